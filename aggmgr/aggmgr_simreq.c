/*
 * Requests to switchsims without waiting for them. Each goes out with a
 * txid of its own and is recorded with whoever hears its outcome (a
 * callback, its owner, and what it is about, all theirs); the event loop
 * hands the answers back as they come, in any order and from any
 * switchsim, and fails what is not answered in time. This layer carries
 * messages: what an answer says, and what follows from it, is the asker's.
 */
#include "aggmgr.h"

#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "agg/sock.h"

static uint16_t aggmgr__reply_type(uint16_t type)
{
    switch (type) {
    case AGG_MSG_GROUP_CONFIG:
        return AGG_MSG_GROUP_CONFIG_REPLY;
    case AGG_MSG_GROUP_TEARDOWN:
        return AGG_MSG_GROUP_TEARDOWN_REPLY;
    case AGG_MSG_STATS:
        return AGG_MSG_STATS_REPLY;
    default:
        return 0;
    }
}

agg_status_t aggmgr_sim_request(aggmgr_t *am, const aggmgr_simreq_t *what, const void *body,
                                size_t len, int64_t *deadline_ms)
{
    int sim = what->sim;
    aggmgr_simreq_t *r;
    agg_status_t st;
    int64_t deadline;
    uint32_t txid;

    if (sim < 0 || sim >= am->num_sims || am->sims[sim].fd < 0) {
        return AGG_ERR_NO_SWITCHSIM;
    }
    if (am->num_reqs == am->cap_reqs) {
        uint32_t cap = am->cap_reqs ? 2 * am->cap_reqs : 64;
        aggmgr_simreq_t *reqs = realloc(am->reqs, cap * sizeof(*reqs));

        if (reqs == NULL) {
            return AGG_ERR_NO_MEMORY;
        }
        am->reqs     = reqs;
        am->cap_reqs = cap;
    }
    do {
        txid = ++am->next_txid;
    } while (txid == 0); /* 0 is a message nobody asked for */
    /* queued when the socket is full: nothing here waits on the switchsim */
    st = aggmgr_conn_send(am, am->sims[sim].fd, what->type, txid, body, len);
    if (st != AGG_OK) {
        agg_error("%s to switchsim %u failed: %s", agg_msg_type_name(what->type),
                  am->sims[sim].id, agg_status_string(st));
        return st;
    }
    deadline = agg_time_ms() + agg_conf_int(&am->conf, AGG_CONF_AM_SIM_TIMEOUT_MS);
    if (deadline_ms != NULL) {
        if (*deadline_ms == 0) {
            *deadline_ms = deadline;
        }
        deadline = *deadline_ms;
    }
    r              = &am->reqs[am->num_reqs++];
    *r             = *what;
    r->txid        = txid;
    r->deadline_ms = deadline;
    return AGG_OK;
}

/* The outcome of request `req` (already out of the table) to whoever waits for it. */
static void aggmgr__req_done(aggmgr_t *am, aggmgr_simreq_t req, agg_status_t st,
                             uint16_t type, void *body, size_t len)
{
    if (req.cb != NULL) {
        req.cb(am, &req, st, type, body, len);
    }
}

static aggmgr_simreq_t aggmgr__req_take(aggmgr_t *am, uint32_t i)
{
    aggmgr_simreq_t req = am->reqs[i];

    am->reqs[i] = am->reqs[--am->num_reqs];
    return req;
}

/* What a switchsim says unasked: logged where the operator looks, with the groups it hits. */
static agg_status_t aggmgr__sim_report(aggmgr_t *am, int sim, const agg_msg_hdr_t *hdr,
                                       uint8_t *body)
{
    aggmgr_sim_t *s = &am->sims[sim];
    agg_msg_sim_report_t rep;
    char groups[256] = "";
    unsigned n = 0;
    int peer;

    if (hdr->length != sizeof(rep) || hdr->txid != 0) {
        agg_warn("switchsim %u: malformed SIM_REPORT (%u bytes, txid %u)", s->id, hdr->length,
                 hdr->txid);
        return AGG_ERR_PROTOCOL;
    }
    memcpy(&rep, body, sizeof(rep));
    agg_wire_swap(&rep, AGG_FMT_SIM_REPORT, 1);
    rep.addr[sizeof(rep.addr) - 1] = '\0';
    if (rep.what != AGG_SIM_REPORT_LINK_DOWN) {
        agg_warn("switchsim %u: SIM_REPORT of an unknown kind (%u) ignored", s->id, rep.what);
        return AGG_OK; /* a newer switchsim's news: not a reason to drop it */
    }
    s->reports++;
    for (peer = 0; peer < am->num_sims; ++peer) {
        aggmgr_sim_t *away = &am->sims[peer];

        if (peer != sim && away->fd < 0 && away->away_until_ms != 0 &&
            strcmp(away->data_addr, rep.addr) == 0) {
            /* away, and its data port gone too: not a broken connection, a dead process */
            agg_warn("switchsim %u (pid %u on %s), away, lost its data port too (switchsim %u "
                     "reports its link to it broke): its groups go now", away->id, away->pid,
                     away->host, s->id);
            away->away_until_ms = 1;
            aggmgr_sims_away_expire(am);
        }
    }
    for (peer = 0; peer < am->num_sims; ++peer) {
        if (peer != sim && am->sims[peer].fd >= 0 &&
            strcmp(am->sims[peer].data_addr, rep.addr) == 0) {
            n = aggmgr_groups_across(am, sim, peer, 1, groups, sizeof(groups));
            break;
        }
    }
    agg_error("switchsim %u (%s) reports its link to %s%s broke: %s; %u groups across it "
              "dropped (job/group: %s); a job's next group makes the link again", s->id,
              s->host, rep.addr, peer < am->num_sims ? "" : " (no registered switchsim)",
              agg_status_string((agg_status_t)rep.status), n, n ? groups : "none");
    return AGG_OK;
}

agg_status_t aggmgr_sim_message(aggmgr_t *am, int sim, const agg_msg_hdr_t *hdr,
                                uint8_t *body)
{
    uint32_t i;

    if (hdr->type == AGG_MSG_SIM_REPORT) {
        return aggmgr__sim_report(am, sim, hdr, body);
    }
    for (i = 0; i < am->num_reqs; ++i) {
        const aggmgr_simreq_t *r = &am->reqs[i];

        if (r->sim != sim || r->txid != hdr->txid) {
            continue;
        }
        if (hdr->type != aggmgr__reply_type(r->type) && hdr->type != AGG_MSG_ERROR_REPLY) {
            agg_warn("switchsim %u answered %s with %s", am->sims[sim].id,
                     agg_msg_type_name(r->type), agg_msg_type_name(hdr->type));
            return AGG_ERR_PROTOCOL;
        }
        aggmgr__req_done(am, aggmgr__req_take(am, i), AGG_OK, hdr->type, body, hdr->length);
        return AGG_OK;
    }
    if (hdr->type == AGG_MSG_GROUP_CONFIG_REPLY || hdr->type == AGG_MSG_GROUP_TEARDOWN_REPLY ||
        hdr->type == AGG_MSG_STATS_REPLY || hdr->type == AGG_MSG_ERROR_REPLY) {
        /* the answer to a request that timed out: it was dealt with then */
        agg_info("switchsim %u: late %s (txid %u) dropped", am->sims[sim].id,
                 agg_msg_type_name(hdr->type), hdr->txid);
        return AGG_OK;
    }
    agg_warn("switchsim %u sent %s, which is not an answer to anything", am->sims[sim].id,
             agg_msg_type_name(hdr->type));
    return AGG_ERR_PROTOCOL;
}

int aggmgr_sims_expire(aggmgr_t *am)
{
    int64_t now = agg_time_ms(), next = -1;
    uint32_t i = 0;

    while (i < am->num_reqs) {
        const aggmgr_simreq_t *r = &am->reqs[i];

        if (r->deadline_ms > now) {
            if (next < 0 || r->deadline_ms - now < next) {
                next = r->deadline_ms - now;
            }
            ++i;
            continue;
        }
        agg_error("switchsim %u did not answer %s (txid %u) in time (am_sim_timeout_ms "
                  "%lld for a request and all that follow from it)", am->sims[r->sim].id, agg_msg_type_name(r->type),
                  r->txid, (long long)agg_conf_int(&am->conf, AGG_CONF_AM_SIM_TIMEOUT_MS));
        aggmgr__req_done(am, aggmgr__req_take(am, i), AGG_ERR_TIMEOUT, 0, NULL, 0);
        i = 0; /* finishing an operation may have changed the table */
        now = agg_time_ms();
        next = -1;
    }
    return (int)next;
}

void aggmgr_sim_fail_all(aggmgr_t *am, int sim, agg_status_t st)
{
    uint32_t i = 0;

    while (i < am->num_reqs) {
        if (am->reqs[i].sim != sim) {
            ++i;
            continue;
        }
        aggmgr__req_done(am, aggmgr__req_take(am, i), st, 0, NULL, 0);
        i = 0;
    }
}

/* One switchsim's socket while aggmgr settles (aggmgr_sims_settle). */
typedef struct aggmgr__settle {
    aggmgr_t *am;
    int       sim;
} aggmgr__settle_t;

static void aggmgr__settle_read(agg_loop_t *loop, int fd, short revents, void *arg)
{
    static uint8_t body[65536]; /* replies to aggmgr's requests are small */
    aggmgr__settle_t *s = arg;
    agg_msg_hdr_t hdr;

    (void)revents;
    if (agg_msg_recv(fd, &hdr, body, sizeof(body), AGGMGR_IO_TIMEOUT_MS) != AGG_OK ||
        aggmgr_sim_message(s->am, s->sim, &hdr, body) != AGG_OK) {
        agg_loop_del(loop, fd, s);
        aggmgr_sim_lost(s->am, s->sim);
    }
}

static int aggmgr__settle_expire(agg_loop_t *loop, void *arg)
{
    int next = aggmgr_sims_expire(arg);

    (void)loop;
    return next >= 0 && next < 100 ? next : 100;
}

int aggmgr_sims_settle(aggmgr_t *am, int timeout_ms)
{
    int64_t end = agg_time_ms() + timeout_ms;
    aggmgr__settle_t s[AGGMGR_MAX_SIMS];
    agg_loop_t *loop;
    int i, rc = 0;

    if (am->num_reqs == 0) {
        return 0;
    }
    /* a loop of its own: the server's has stopped, and the unit tests have none */
    if (agg_loop_create(&loop, AGGMGR_MAX_SIMS) != AGG_OK) {
        return -1;
    }
    for (i = 0; i < am->num_sims; ++i) {
        s[i] = (aggmgr__settle_t){am, i};
        if (am->sims[i].fd >= 0) {
            agg_loop_add(loop, am->sims[i].fd, POLLIN, NULL, aggmgr__settle_read, &s[i]);
        }
    }
    if (agg_loop_timer(loop, 0, aggmgr__settle_expire, am) < 0) {
        rc = -1;
    }
    while (rc == 0 && am->num_reqs > 0) {
        int left = (int)(end - agg_time_ms());

        if (left <= 0 || agg_loop_once(loop, left) != AGG_OK) {
            rc = -1;
        }
    }
    agg_loop_destroy(loop);
    return rc;
}
