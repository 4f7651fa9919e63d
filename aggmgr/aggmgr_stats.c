/*
 * STATS: every switchsim's counters, added up once all have answered. The
 * client hears the sum, or the first failure (a switchsim that refused,
 * went, or did not answer in time).
 */
#include "aggmgr.h"

#include <stdlib.h>
#include <string.h>

typedef struct aggmgr_stats {
    aggmgr_op_t          *op;
    uint32_t              pending; /* switchsims yet to answer */
    agg_msg_stats_reply_t sum;     /* host order */
} aggmgr_stats_t;

static void aggmgr__stats_add(agg_msg_stats_reply_t *sum, const agg_msg_stats_reply_t *rep)
{
    sum->groups += rep->groups;
    sum->fragments_in += rep->fragments_in;
    sum->fragments_reduced += rep->fragments_reduced;
    sum->results_out += rep->results_out;
    sum->bytes_in += rep->bytes_in;
    sum->errors += rep->errors;
    sum->groups_total += rep->groups_total;
    sum->llt_fragments_in += rep->llt_fragments_in;
    sum->sat_chunks_in += rep->sat_chunks_in;
    sum->sat_bytes_in += rep->sat_bytes_in;
    sum->duplicates += rep->duplicates;
    sum->locks_granted += rep->locks_granted;
    sum->locks_busy += rep->locks_busy;
    sum->zcopy_bytes += rep->zcopy_bytes;
    sum->faults += rep->faults;
    sum->resent += rep->resent;
    sum->corrupt += rep->corrupt;
    sum->sat_groups += rep->sat_groups;
    sum->workers += rep->workers;
}

/* Nothing in flight any more: the client hears how it went. */
static void aggmgr__stats_check(aggmgr_t *am, aggmgr_stats_t *stats)
{
    if (stats->pending > 0) {
        return;
    }
    stats->op->result = stats->op->status == AGG_OK ? &stats->sum : NULL;
    aggmgr_op_finish(am, stats->op); /* frees stats too */
}

static void aggmgr__stats_answered(aggmgr_t *am, const aggmgr_simreq_t *req, agg_status_t st,
                                   uint16_t type, void *body, size_t len)
{
    aggmgr_stats_t *stats = req->owner;
    agg_msg_stats_reply_t rep = {0};

    (void)type;
    if (st == AGG_OK) {
        memcpy(&rep, body, len < sizeof(rep) ? len : sizeof(rep));
        st = agg_wire_reply_decode(&rep, len, sizeof(rep), AGG_FMT_STATS_REPLY);
    }
    if (st == AGG_OK) {
        aggmgr__stats_add(&stats->sum, &rep);
    } else if (stats->op->status == AGG_OK) {
        stats->op->status = st;
    }
    stats->pending--;
    aggmgr__stats_check(am, stats);
}

void aggmgr_stats_start(aggmgr_t *am, aggmgr_op_t *op)
{
    aggmgr_stats_t *stats = calloc(1, sizeof(*stats));
    aggmgr_simreq_t what = {.type = AGG_MSG_STATS, .cb = aggmgr__stats_answered};
    int i;

    aggmgr_op_start(am, op);
    if (stats == NULL) {
        op->status = AGG_ERR_NO_MEMORY;
        aggmgr_op_finish(am, op);
        return;
    }
    stats->op      = op;
    op->task       = stats;
    op->task_free  = free;
    what.owner     = stats;
    for (i = 0; i < am->num_sims; ++i) {
        agg_status_t st;

        if (am->sims[i].fd < 0) {
            continue;
        }
        what.sim = i;
        st       = aggmgr_sim_request(am, &what, NULL, 0, &op->deadline_ms);
        if (st == AGG_OK) {
            stats->pending++;
        } else if (op->status == AGG_OK) {
            op->status = st;
        }
    }
    aggmgr__stats_check(am, stats);
}
