/*
 * A group's life, as one state machine: laid out in two rounds (every part
 * of its LLT tree on every switchsim at once, then, when all have answered,
 * the parts of its SAT tree), ready, and torn down when dropped. A failed
 * LLT part fails the group and undoes the parts laid out; a failed SAT part
 * leaves it on its LLT. A group dropped while laid out (its creator, its
 * job or a switchsim went) gives everything back at once and lingers, out
 * of its job, until its answers are in: what they laid out is undone, and
 * its creator hears why it failed.
 *
 * Every step is a row of aggmgr__group_table: in this state, on this event,
 * this action, then that state. An action may say which event follows (a
 * round's last answer ends the round); an event a state has no row for is
 * refused and logged. A new state (a group moved to another tree, restored
 * from a journal) is new rows.
 *
 * A group takes its LLT OSTs out of its job's reservation, and its SAT part
 * a SAT flow on every switch of its tree (a switch serves an_sat_flows SAT
 * groups at once), from the moment it is started.
 */
#include "aggmgr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"

/* What an event carries: a part's answer, or why the group is dropped. */
typedef struct aggmgr_group_input {
    agg_status_t                        status;
    const aggmgr_simreq_t              *req; /* a part's answer: the request */
    const agg_msg_group_config_reply_t *rep; /* CONFIGURED: what the part offers */
} aggmgr_group_input_t;

static const aggmgr_group_input_t aggmgr__no_input = {.status = AGG_OK};

typedef aggmgr_group_event_t (*aggmgr_group_action_t)(aggmgr_t *am, aggmgr_group_t *g,
                                                      const aggmgr_group_input_t *in);

typedef struct aggmgr_group_row {
    aggmgr_group_state_t  state;
    aggmgr_group_event_t  event;
    aggmgr_group_action_t action; /* runs once the group is in `next` */
    aggmgr_group_state_t  next;
} aggmgr_group_row_t;

static const char *const aggmgr__state_names[AGGMGR_GROUP_NUM_STATES] = {
    [AGGMGR_GROUP_NEW]            = "NEW",
    [AGGMGR_GROUP_LLT_LAYING_OUT] = "LLT_LAYING_OUT",
    [AGGMGR_GROUP_SAT_LAYING_OUT] = "SAT_LAYING_OUT",
    [AGGMGR_GROUP_READY]          = "READY",
    [AGGMGR_GROUP_GONE]           = "GONE",
    [AGGMGR_GROUP_FREED]          = "FREED",
};

static const char *const aggmgr__event_names[AGGMGR_GROUP_NUM_EVENTS] = {
    [AGGMGR_GROUP_EV_NONE]         = "NONE",
    [AGGMGR_GROUP_EV_START]        = "START",
    [AGGMGR_GROUP_EV_CONFIGURED]   = "CONFIGURED",
    [AGGMGR_GROUP_EV_REFUSED]      = "REFUSED",
    [AGGMGR_GROUP_EV_UNANSWERED]   = "UNANSWERED",
    [AGGMGR_GROUP_EV_ROUND_OK]     = "ROUND_OK",
    [AGGMGR_GROUP_EV_ROUND_FAILED] = "ROUND_FAILED",
    [AGGMGR_GROUP_EV_DROP]         = "DROP",
};

const char *aggmgr_group_state_name(aggmgr_group_state_t state)
{
    return (unsigned)state < AGGMGR_GROUP_NUM_STATES ? aggmgr__state_names[state] : "?";
}

const char *aggmgr_group_event_name(aggmgr_group_event_t ev)
{
    return (unsigned)ev < AGGMGR_GROUP_NUM_EVENTS ? aggmgr__event_names[ev] : "?";
}

/* ---- resources ------------------------------------------------------------ */

/* Every switch of the group's SAT tree has a SAT flow to spare; which does not. */
static int aggmgr__sat_flows_fit(const aggmgr_t *am, const aggmgr_tree_t *tree)
{
    int i;

    for (i = 0; i < tree->num_nodes; ++i) {
        const aggmgr_an_t *an = &am->ans[tree->nodes[i].topo_node];
        if (an->sat_flows_used >= an->sat_flows_cap) {
            return tree->nodes[i].topo_node;
        }
    }
    return -1;
}

static void aggmgr__sat_flows_take(aggmgr_t *am, const aggmgr_tree_t *tree, int sign)
{
    int i;

    for (i = 0; i < tree->num_nodes; ++i) {
        am->ans[tree->nodes[i].topo_node].sat_flows_used += (uint32_t)sign;
    }
}

static void aggmgr__group_free(void *task)
{
    aggmgr_group_t *g = task;

    free(g->sel);
    free(g);
}

/* Takes g out of its job and gives back what it holds: its parts, its quota. */
static void aggmgr__group_release(aggmgr_t *am, aggmgr_group_t *g)
{
    aggmgr_job_t *job = g->job;
    aggmgr_group_t **pp;

    for (pp = &job->groups; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    }
    aggmgr_gtree_release(am, g, &g->llt, AGG_TREE_LLT);
    if (g->sat.status == AGG_OK || g->sat.status == AGG_INPROGRESS) {
        aggmgr_gtree_release(am, g, &g->sat, AGG_TREE_SAT);
        aggmgr__sat_flows_take(am, &g->sat.tree, -1);
        aggmgr_tree_free(&g->sat.tree);
        g->sat.status = AGG_ERR_SAT_UNAVAILABLE;
    }
    job->osts_used -= g->llt.osts;
    job->num_groups--;
    aggmgr_tree_free(&g->llt.tree);
    if (g->journaled && !job->ending) {
        aggmgr_journal_group_end(am, g);
    }
    g->journaled = 0;
    g->job       = NULL;
}

/* ---- the actions ------------------------------------------------------------ */

/* A round ends with its last answer: laid out when every part is, endpoints and all. */
static aggmgr_group_event_t aggmgr__round_end(aggmgr_t *am, aggmgr_group_t *g)
{
    aggmgr_gtree_t *gt = g->state == AGGMGR_GROUP_SAT_LAYING_OUT ? &g->sat : &g->llt;

    if (g->pending > 0) {
        return AGGMGR_GROUP_EV_NONE;
    }
    if (g->status == AGG_OK && g->state != AGGMGR_GROUP_GONE &&
        gt->status == AGG_INPROGRESS) {
        g->status = aggmgr_gtree_eps(am, g, gt);
    }
    return g->status == AGG_OK ? AGGMGR_GROUP_EV_ROUND_OK : AGGMGR_GROUP_EV_ROUND_FAILED;
}

static void aggmgr__group_answered(aggmgr_t *am, const aggmgr_simreq_t *req, agg_status_t st,
                                   uint16_t type, void *body, size_t len);

static aggmgr_group_event_t aggmgr__lay_out_llt(aggmgr_t *am, aggmgr_group_t *g,
                                                const aggmgr_group_input_t *in)
{
    agg_status_t st = aggmgr_gtree_lay_out(am, g, &g->llt, AGG_TREE_LLT,
                                           aggmgr__group_answered);

    (void)in;
    if (st != AGG_OK && g->status == AGG_OK) {
        g->status = st; /* what went out is answered, then undone */
    }
    return aggmgr__round_end(am, g);
}

/*
 * The LLT part stands: the SAT part when asked for and the job has a SAT
 * tree. A SAT part that cannot be had is logged and recorded in sat.status,
 * and leaves nothing to lay out.
 */
static aggmgr_group_event_t aggmgr__lay_out_sat(aggmgr_t *am, aggmgr_group_t *g,
                                                const aggmgr_group_input_t *in)
{
    const aggmgr_job_t *job = g->job;
    aggmgr_gtree_t *gt = &g->sat;
    int full;

    (void)in;
    g->llt.status = AGG_OK;
    if (!(g->flags & AGG_GROUP_F_SAT) || job->sat_tree_id == 0) {
        return aggmgr__round_end(am, g);
    }
    gt->tree_id = job->sat_tree_id;
    gt->osts    = g->sat_osts ? g->sat_osts : 4;
    gt->payload = g->sat_payload;
    gt->status  = aggmgr_tree_prune(&job->tree, g->sel, (int)g->num_members, &gt->tree);
    if (gt->status != AGG_OK) {
        return aggmgr__round_end(am, g);
    }
    full = aggmgr__sat_flows_fit(am, &gt->tree);
    if (full >= 0) {
        agg_info("job %u: group %u gets no SAT part: switch %s already serves %u SAT flows "
                 "(an_sat_flows); it uses the LLT", job->id, g->id, am->topo.nodes[full].id,
                 am->ans[full].sat_flows_used);
        gt->status = AGG_ERR_NO_RESOURCE;
        aggmgr_tree_free(&gt->tree);
        return aggmgr__round_end(am, g);
    }
    aggmgr__sat_flows_take(am, &gt->tree, 1); /* held while it is laid out */
    gt->status = AGG_INPROGRESS;
    if (aggmgr_gtree_lay_out(am, g, gt, AGG_TREE_SAT, aggmgr__group_answered) != AGG_OK &&
        g->status == AGG_OK) {
        g->status = AGG_ERR_NO_SWITCHSIM; /* the round fails: all of it given back */
    }
    return aggmgr__round_end(am, g);
}

static aggmgr_group_event_t aggmgr__part_keep(aggmgr_t *am, aggmgr_group_t *g,
                                              const aggmgr_group_input_t *in)
{
    const aggmgr_part_ref_t *ref = &in->req->ref;
    aggmgr_gtree_t *gt = ref->tree == AGG_TREE_SAT ? &g->sat : &g->llt;

    if (ref->part < gt->num_parts) {
        gt->parts[ref->part].here       = in->rep->here;
        gt->parts[ref->part].away       = in->rep->away;
        gt->parts[ref->part].configured = 1;
    }
    return aggmgr__round_end(am, g);
}

static aggmgr_group_event_t aggmgr__part_failed(aggmgr_t *am, aggmgr_group_t *g,
                                                const aggmgr_group_input_t *in)
{
    if (in->status != AGG_OK && g->status == AGG_OK) {
        g->status = in->status;
    }
    return aggmgr__round_end(am, g);
}

/* A part laid out for a group that is gone, or perhaps laid out after all: undone. */
static aggmgr_group_event_t aggmgr__part_undo(aggmgr_t *am, aggmgr_group_t *g,
                                              const aggmgr_group_input_t *in)
{
    aggmgr_gtree_part_teardown(am, in->req->sim, &in->req->ref);
    return aggmgr__part_failed(am, g, in);
}

/*
 * Its creator hears how it went: st, and with AGG_OK the group (which it may
 * destroy at once); a group that failed goes with its creation.
 */
static aggmgr_group_event_t aggmgr__answer(aggmgr_t *am, aggmgr_group_t *g, agg_status_t st)
{
    aggmgr_op_t *op = g->op;

    g->op      = NULL;
    op->status = st;
    op->result = st == AGG_OK ? g : NULL;
    if (st != AGG_OK) {
        op->task      = g;
        op->task_free = aggmgr__group_free;
    }
    aggmgr_op_finish(am, op);
    return AGGMGR_GROUP_EV_NONE;
}

static aggmgr_group_event_t aggmgr__answer_made(aggmgr_t *am, aggmgr_group_t *g)
{
    aggmgr_journal_group(am, g); /* with its members (sel), kept for compaction */
    agg_info("job %u: group %u of %u members on %d nodes (depth %d, root %s), %u OSTs%s",
             g->job->id, g->id, g->num_members, g->llt.tree.num_nodes, g->llt.tree.depth,
             am->topo.nodes[g->llt.tree.nodes[0].topo_node].id, g->llt.osts,
             g->sat.status == AGG_OK ? ", with a SAT part" : "");
    return aggmgr__answer(am, g, AGG_OK);
}

static aggmgr_group_event_t aggmgr__answer_failed(aggmgr_t *am, aggmgr_group_t *g,
                                                  const aggmgr_group_input_t *in)
{
    (void)in;
    return aggmgr__answer(am, g, g->status);
}

static aggmgr_group_event_t aggmgr__keep_sat(aggmgr_t *am, aggmgr_group_t *g,
                                             const aggmgr_group_input_t *in)
{
    (void)in;
    if (g->sat.status == AGG_INPROGRESS) {
        g->sat.status = AGG_OK;
    }
    return aggmgr__answer_made(am, g);
}

static aggmgr_group_event_t aggmgr__give_back_sat(aggmgr_t *am, aggmgr_group_t *g,
                                                  const aggmgr_group_input_t *in)
{
    agg_status_t st = g->status;

    (void)in;
    g->status = AGG_OK; /* the group stands on its LLT part whatever happened here */
    agg_warn("job %u: group %u gets no SAT part (%s); it uses the LLT", g->job->id, g->id,
             agg_status_string(st));
    aggmgr_gtree_release(am, g, &g->sat, AGG_TREE_SAT);
    aggmgr__sat_flows_take(am, &g->sat.tree, -1);
    aggmgr_tree_free(&g->sat.tree);
    g->sat.status = st;
    return aggmgr__answer_made(am, g);
}

static aggmgr_group_event_t aggmgr__fail(aggmgr_t *am, aggmgr_group_t *g,
                                         const aggmgr_group_input_t *in)
{
    aggmgr__group_release(am, g); /* undoes the parts laid out */
    return aggmgr__answer_failed(am, g, in);
}

/* Out of its job now; its creation (which owns it from now on) waits for its answers. */
static aggmgr_group_event_t aggmgr__abandon(aggmgr_t *am, aggmgr_group_t *g,
                                            const aggmgr_group_input_t *in)
{
    if (g->status == AGG_OK) {
        g->status = in->status != AGG_OK ? in->status : AGG_ERR_NO_JOB;
    }
    aggmgr__group_release(am, g);
    g->op->task      = g;
    g->op->task_free = aggmgr__group_free;
    return aggmgr__round_end(am, g);
}

static aggmgr_group_event_t aggmgr__destroy(aggmgr_t *am, aggmgr_group_t *g,
                                            const aggmgr_group_input_t *in)
{
    (void)in;
    aggmgr__group_release(am, g);
    aggmgr__group_free(g);
    return AGGMGR_GROUP_EV_NONE;
}

/* ---- the table ------------------------------------------------------------- */

#define AGGMGR__ROW(_state, _event, _action, _next) \
    {AGGMGR_GROUP_##_state, AGGMGR_GROUP_EV_##_event, _action, AGGMGR_GROUP_##_next}

static const aggmgr_group_row_t aggmgr__group_table[] = {
    AGGMGR__ROW(NEW,            START,        aggmgr__lay_out_llt,   LLT_LAYING_OUT),

    AGGMGR__ROW(LLT_LAYING_OUT, CONFIGURED,   aggmgr__part_keep,     LLT_LAYING_OUT),
    AGGMGR__ROW(LLT_LAYING_OUT, REFUSED,      aggmgr__part_failed,   LLT_LAYING_OUT),
    AGGMGR__ROW(LLT_LAYING_OUT, UNANSWERED,   aggmgr__part_undo,     LLT_LAYING_OUT),
    AGGMGR__ROW(LLT_LAYING_OUT, ROUND_OK,     aggmgr__lay_out_sat,   SAT_LAYING_OUT),
    AGGMGR__ROW(LLT_LAYING_OUT, ROUND_FAILED, aggmgr__fail,          FREED),
    AGGMGR__ROW(LLT_LAYING_OUT, DROP,         aggmgr__abandon,       GONE),

    AGGMGR__ROW(SAT_LAYING_OUT, CONFIGURED,   aggmgr__part_keep,     SAT_LAYING_OUT),
    AGGMGR__ROW(SAT_LAYING_OUT, REFUSED,      aggmgr__part_failed,   SAT_LAYING_OUT),
    AGGMGR__ROW(SAT_LAYING_OUT, UNANSWERED,   aggmgr__part_undo,     SAT_LAYING_OUT),
    AGGMGR__ROW(SAT_LAYING_OUT, ROUND_OK,     aggmgr__keep_sat,      READY),
    AGGMGR__ROW(SAT_LAYING_OUT, ROUND_FAILED, aggmgr__give_back_sat, READY),
    AGGMGR__ROW(SAT_LAYING_OUT, DROP,         aggmgr__abandon,       GONE),

    AGGMGR__ROW(READY,          DROP,         aggmgr__destroy,       FREED),

    AGGMGR__ROW(GONE,           CONFIGURED,   aggmgr__part_undo,     GONE),
    AGGMGR__ROW(GONE,           REFUSED,      aggmgr__part_failed,   GONE),
    AGGMGR__ROW(GONE,           UNANSWERED,   aggmgr__part_undo,     GONE),
    AGGMGR__ROW(GONE,           ROUND_FAILED, aggmgr__answer_failed, FREED),
};

static const aggmgr_group_row_t *aggmgr__group_row(aggmgr_group_state_t state,
                                                   aggmgr_group_event_t ev)
{
    size_t i;

    for (i = 0; i < sizeof(aggmgr__group_table) / sizeof(aggmgr__group_table[0]); ++i) {
        if (aggmgr__group_table[i].state == state && aggmgr__group_table[i].event == ev) {
            return &aggmgr__group_table[i];
        }
    }
    return NULL;
}

int aggmgr_group_transition(aggmgr_group_state_t from, aggmgr_group_event_t ev)
{
    const aggmgr_group_row_t *row = aggmgr__group_row(from, ev);

    return row != NULL ? (int)row->next : -1;
}

/* Runs ev's row and whatever follows; an action that frees g says nothing follows. */
static agg_status_t aggmgr__group_fire(aggmgr_t *am, aggmgr_group_t *g,
                                       aggmgr_group_event_t ev, const aggmgr_group_input_t *in)
{
    while (ev != AGGMGR_GROUP_EV_NONE) {
        const aggmgr_group_row_t *row = aggmgr__group_row(g->state, ev);

        if (row == NULL) {
            agg_warn("group %u: %s in state %s has no transition; ignored", g->id,
                     aggmgr_group_event_name(ev), aggmgr_group_state_name(g->state));
            return AGG_ERR_INVALID_PARAM;
        }
        agg_debug("group %u: %s, %s -> %s", g->id, aggmgr_group_event_name(ev),
                  aggmgr_group_state_name(g->state), aggmgr_group_state_name(row->next));
        g->state = row->next;
        ev       = row->action(am, g, in);
        in       = &aggmgr__no_input;
    }
    return AGG_OK;
}

agg_status_t aggmgr_group_event(aggmgr_t *am, aggmgr_group_t *g, aggmgr_group_event_t ev,
                                agg_status_t why)
{
    aggmgr_group_input_t in = {.status = why};

    if (ev != AGGMGR_GROUP_EV_START && ev != AGGMGR_GROUP_EV_DROP) {
        agg_warn("group %u: %s comes only from the group's own answers; ignored", g->id,
                 aggmgr_group_event_name(ev));
        return AGG_ERR_INVALID_PARAM;
    }
    return aggmgr__group_fire(am, g, ev, &in);
}

/* A switchsim's answer to one of g's GROUP_CONFIGs, or its failure: an event of g's. */
static void aggmgr__group_answered(aggmgr_t *am, const aggmgr_simreq_t *req, agg_status_t st,
                                   uint16_t type, void *body, size_t len)
{
    aggmgr_group_t *g = req->owner;
    agg_msg_group_config_reply_t rep;
    aggmgr_group_input_t in = {.req = req, .rep = &rep};

    (void)type;
    st = aggmgr_gtree_config_decode(st, body, len, &rep);
    if (st != AGG_OK) {
        agg_warn("switchsim %u could not configure part %u of the %s part of group %u: %s",
                 am->sims[req->sim].id, req->ref.part,
                 req->ref.tree == AGG_TREE_SAT ? "SAT" : "LLT", req->ref.group_id,
                 agg_status_string(st));
    }
    in.status = st;
    g->pending--;
    aggmgr__group_fire(am, g, st == AGG_OK ? AGGMGR_GROUP_EV_CONFIGURED :
                              st == AGG_ERR_TIMEOUT ? AGGMGR_GROUP_EV_UNANSWERED :
                                                      AGGMGR_GROUP_EV_REFUSED, &in);
}

/* ---- groups of a job ------------------------------------------------------- */

agg_status_t aggmgr_group_create(aggmgr_t *am, int owner_fd, const agg_msg_group_create_t *req,
                                 const uint32_t *world_ranks, aggmgr_op_t *op)
{
    aggmgr_job_t *job = aggmgr_job_find(am, req->job_id);
    uint32_t i, j, n = req->num_members, osts = req->osts;
    aggmgr_group_t *g;
    int *sel = NULL;
    agg_status_t st;

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    if (req->job_key != job->key) {
        agg_warn("group for job %u refused: the request does not carry the job's key (a "
                 "client of another job?)", req->job_id);
        return AGG_ERR_AUTH;
    }
    if (aggmgr_sims_live(am) == 0) {
        agg_warn("group for job %u refused: no switchsim is registered", req->job_id);
        return AGG_ERR_NO_SWITCHSIM;
    }
    /* a switch of the job's tree went: another tree, where the fabric has one */
    aggmgr_job_reroute(am, job);
    if (n == 0 || n > job->world_size) {
        return AGG_ERR_INVALID_PARAM;
    }
    if ((req->flags & AGG_GROUP_F_SAT) &&
        (req->sat_payload < 8 || req->sat_payload % 8 != 0 || req->sat_payload > (64u << 20) ||
         req->sat_osts > 64)) {
        agg_warn("job %u: SAT chunks of %u bytes, %u in flight: not supported", req->job_id,
                 req->sat_payload, req->sat_osts);
        return AGG_ERR_INVALID_PARAM;
    }
    if (osts == 0) {
        osts = job->osts_per_group ? job->osts_per_group : 8;
    }
    if (job->num_groups >= job->max_groups || job->osts_used + osts > job->osts) {
        agg_info("job %u: group of %u refused, quota used (groups %u/%u, osts %u+%u/%u)",
                 req->job_id, n, job->num_groups, job->max_groups, job->osts_used, osts,
                 job->osts);
        return AGG_ERR_QUOTA;
    }
    sel = malloc(n * sizeof(*sel));
    g   = calloc(1, sizeof(*g));
    if (sel == NULL || g == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto err_free;
    }
    for (i = 0; i < n; ++i) {
        if (world_ranks[i] >= job->world_size) {
            agg_warn("job %u: group member %u has world rank %u of %u", req->job_id, i,
                     world_ranks[i], job->world_size);
            st = AGG_ERR_INVALID_PARAM;
            goto err_free;
        }
        for (j = 0; j < i; ++j) {
            if (world_ranks[j] == world_ranks[i]) {
                st = AGG_ERR_INVALID_PARAM;
                goto err_free;
            }
        }
        sel[i] = (int)world_ranks[i];
    }
    g->id          = ++am->next_group_id;
    g->num_members = n;
    g->owner_fd    = owner_fd;
    g->state       = AGGMGR_GROUP_NEW;
    g->job         = job;
    g->flags       = req->flags;
    g->sat_osts    = req->sat_osts;
    g->sat_payload = req->sat_payload;
    g->llt.tree_id = job->tree_id;
    g->llt.osts    = osts;
    g->llt.payload = job->payload_per_ost;
    g->llt.status  = AGG_INPROGRESS;
    g->sat.status  = AGG_ERR_SAT_UNAVAILABLE;
    st = aggmgr_tree_prune(&job->tree, sel, (int)n, &g->llt.tree);
    if (st != AGG_OK) {
        goto err_free;
    }
    /* the group holds its quota from now on: a request meanwhile sees it taken */
    g->next     = job->groups;
    job->groups = g;
    job->num_groups++;
    job->osts_used += osts;
    g->op  = op;
    g->sel = sel;
    aggmgr_op_start(am, op);
    aggmgr__group_fire(am, g, AGGMGR_GROUP_EV_START, &aggmgr__no_input);
    return AGG_INPROGRESS;

err_free:
    free(sel);
    free(g);
    return st;
}

agg_status_t aggmgr_group_restore(aggmgr_t *am, const aggmgr_group_rec_t *rec, char *why,
                                  size_t whylen)
{
    aggmgr_job_t *job = aggmgr_job_find(am, rec->job_id);
    aggmgr_group_t *g, *o;
    uint32_t i, j, n = rec->num_members;
    agg_status_t st;

    if (job == NULL) {
        snprintf(why, whylen, "group %u of job %u, which is not there", rec->id, rec->job_id);
        return AGG_ERR_PROTOCOL;
    }
    for (o = job->groups; o != NULL && o->id != rec->id; o = o->next) {
    }
    if (o != NULL || n == 0 || n > job->world_size) {
        snprintf(why, whylen, "job %u: group %u of %u members is there %s", job->id, rec->id,
                 n, o != NULL ? "twice" : "with a member count out of range");
        return AGG_ERR_PROTOCOL;
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL || (g->sel = malloc(n * sizeof(*g->sel))) == NULL) {
        free(g);
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < n; ++i) {
        for (j = 0; j < i && rec->members[j] != rec->members[i]; ++j) {
        }
        if (rec->members[i] < 0 || (uint32_t)rec->members[i] >= job->world_size || j < i) {
            snprintf(why, whylen, "job %u: group %u's member %u is world rank %d of %u%s",
                     job->id, rec->id, i, rec->members[i], job->world_size,
                     j < i ? ", twice" : "");
            aggmgr__group_free(g);
            return AGG_ERR_PROTOCOL;
        }
        g->sel[i] = rec->members[i];
    }
    g->id          = rec->id;
    g->num_members = n;
    g->owner_fd    = -1; /* any rank that attaches with the job's key may destroy it */
    g->state       = AGGMGR_GROUP_READY;
    g->job         = job;
    g->flags       = rec->flags;
    g->sat_osts    = rec->sat_osts;
    g->sat_payload = rec->sat_payload;
    g->journaled   = 1;
    g->llt.tree_id = job->tree_id;
    g->llt.osts    = rec->llt_osts;
    g->llt.payload = job->payload_per_ost;
    g->llt.status  = AGG_OK;
    g->sat.status  = rec->sat_status == AGG_OK ? AGG_ERR_SAT_UNAVAILABLE : rec->sat_status;
    st = aggmgr_tree_prune(&job->tree, g->sel, (int)n, &g->llt.tree);
    if (st != AGG_OK) {
        snprintf(why, whylen, "job %u: group %u's members leave no tree", job->id, rec->id);
        aggmgr__group_free(g);
        return st;
    }
    if (rec->sat_status == AGG_OK && job->sat_tree_id != 0 &&
        aggmgr_tree_prune(&job->tree, g->sel, (int)n, &g->sat.tree) == AGG_OK) {
        g->sat.tree_id = job->sat_tree_id;
        g->sat.osts    = g->sat_osts ? g->sat_osts : 4;
        g->sat.payload = g->sat_payload;
        g->sat.status  = AGG_OK;
        aggmgr__sat_flows_take(am, &g->sat.tree, 1);
    }
    g->next     = job->groups;
    job->groups = g;
    job->num_groups++;
    job->osts_used += g->llt.osts;
    if (am->next_group_id < g->id) {
        am->next_group_id = g->id;
    }
    return AGG_OK;
}

agg_status_t aggmgr_group_destroy(aggmgr_t *am, uint32_t job_id, uint32_t group_id)
{
    aggmgr_job_t *job = aggmgr_job_find(am, job_id);
    aggmgr_group_t **pp, *g;

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    for (pp = &job->groups; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id == group_id) {
            g = *pp;
            agg_info("job %u: group %u destroyed", job_id, group_id);
            aggmgr_group_event(am, g, AGGMGR_GROUP_EV_DROP, AGG_ERR_NO_JOB);
            return AGG_OK;
        }
    }
    return AGG_ERR_GROUP_ID;
}

agg_status_t aggmgr_group_owned(aggmgr_t *am, uint32_t job_id, uint32_t group_id, int fd)
{
    aggmgr_job_t *job = aggmgr_job_find(am, job_id);
    aggmgr_group_t *g;

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    for (g = job->groups; g != NULL; g = g->next) {
        if (g->id != group_id) {
            continue;
        }
        if (g->owner_fd != fd && job->owner_fd != fd &&
            !(g->owner_fd < 0 && aggmgr_conn_attached(am, fd, job_id))) {
            agg_warn("fd %d asked to destroy group %u of job %u, which is another's; refused",
                     fd, group_id, job_id);
            return AGG_ERR_AUTH;
        }
        return AGG_OK;
    }
    return AGG_ERR_GROUP_ID;
}

/* Does every part of gt stand on its switchsim, as the switchsim said (SIM_PARTS)? */
static int aggmgr__gtree_served(const aggmgr_t *am, const aggmgr_group_t *g,
                                const aggmgr_gtree_t *gt, uint32_t tree)
{
    uint32_t pi, k;

    for (pi = 0; pi < gt->num_parts; ++pi) {
        const aggmgr_sim_t *s = &am->sims[gt->parts[pi].sim];

        for (k = 0; k < s->num_served; ++k) {
            if (s->served[k].group_id == g->id && s->served[k].job_id == g->job->id &&
                s->served[k].tree == tree && s->served[k].part == pi) {
                break;
            }
        }
        if (k == s->num_served) {
            agg_warn("job %u: group %u read back from the journal: switchsim %u does not "
                     "serve its %s part %u (it restarted?); the group is dropped", g->job->id,
                     g->id, s->id, tree == AGG_TREE_SAT ? "SAT" : "LLT", pi);
            return 0;
        }
    }
    return 1;
}

void aggmgr_groups_rejoin(aggmgr_t *am)
{
    aggmgr_job_t *job;
    aggmgr_group_t *g, *next;

    for (job = am->jobs; job != NULL; job = job->next) {
        for (g = job->groups; g != NULL; g = next) {
            next = g->next;
            if (g->state != AGGMGR_GROUP_READY || g->llt.parts != NULL ||
                !aggmgr_gtree_rejoin(am, g, &g->llt) ||
                (g->sat.status == AGG_OK && !aggmgr_gtree_rejoin(am, g, &g->sat))) {
                continue;
            }
            if (!aggmgr__gtree_served(am, g, &g->llt, AGG_TREE_LLT) ||
                (g->sat.status == AGG_OK && !aggmgr__gtree_served(am, g, &g->sat,
                                                                  AGG_TREE_SAT))) {
                aggmgr_group_event(am, g, AGGMGR_GROUP_EV_DROP, AGG_ERR_NO_SWITCHSIM);
                continue;
            }
            agg_info("job %u: group %u read back from the journal has its switchsims again",
                     job->id, g->id);
        }
    }
}

int aggmgr_part_held(aggmgr_t *am, int sim, const agg_msg_group_ref_t *ref)
{
    aggmgr_job_t *job = aggmgr_job_find(am, ref->job_id);
    const aggmgr_gtree_t *gt;
    aggmgr_group_t *g;

    for (g = job != NULL ? job->groups : NULL; g != NULL && g->id != ref->group_id;
         g = g->next) {
    }
    if (g == NULL || g->state != AGGMGR_GROUP_READY || ref->tree > AGG_TREE_SAT) {
        return 0;
    }
    gt = ref->tree == AGG_TREE_SAT ? &g->sat : &g->llt;
    if (gt->status != AGG_OK) {
        return 0;
    }
    if (gt->parts == NULL) {
        return 1; /* not cut yet: a switchsim it needs is still away */
    }
    return ref->part < gt->num_parts && gt->parts[ref->part].sim == sim;
}

/* Does a group have a part on switchsim `sim`? */
static int aggmgr__group_on(const aggmgr_group_t *g, int sim)
{
    uint32_t i;

    for (i = 0; i < g->llt.num_parts; ++i) {
        if (g->llt.parts[i].sim == sim) {
            return 1;
        }
    }
    for (i = 0; (g->sat.status == AGG_OK || g->sat.status == AGG_INPROGRESS) &&
                i < g->sat.num_parts; ++i) {
        if (g->sat.parts[i].sim == sim) {
            return 1;
        }
    }
    return 0;
}

/* Does switchsim `sim` (its SIM_PARTS) serve every part of gt it hosts? */
static int aggmgr__gtree_served_on(const aggmgr_t *am, const aggmgr_group_t *g,
                                   const aggmgr_gtree_t *gt, uint32_t tree, int sim)
{
    const aggmgr_sim_t *s = &am->sims[sim];
    uint32_t pi, k;

    for (pi = 0; pi < gt->num_parts; ++pi) {
        if (gt->parts[pi].sim != sim) {
            continue;
        }
        for (k = 0; k < s->num_served; ++k) {
            if (s->served[k].group_id == g->id && s->served[k].job_id == g->job->id &&
                s->served[k].tree == tree && s->served[k].part == pi) {
                break;
            }
        }
        if (k == s->num_served) {
            return 0;
        }
    }
    return 1;
}

void aggmgr_sim_back(aggmgr_t *am, int sim)
{
    aggmgr_job_t *job;
    aggmgr_group_t *g, *next;
    unsigned kept = 0, dropped = 0;

    for (job = am->jobs; job != NULL; job = job->next) {
        for (g = job->groups; g != NULL; g = next) {
            next = g->next;
            if (g->state != AGGMGR_GROUP_READY || !aggmgr__group_on(g, sim)) {
                continue;
            }
            if (aggmgr__gtree_served_on(am, g, &g->llt, AGG_TREE_LLT, sim) &&
                (g->sat.status != AGG_OK ||
                 aggmgr__gtree_served_on(am, g, &g->sat, AGG_TREE_SAT, sim))) {
                kept++;
                continue;
            }
            agg_warn("job %u: group %u: switchsim %u is back but no longer serves its part "
                     "(it restarted?); the group is dropped", job->id, g->id,
                     am->sims[sim].id);
            aggmgr_group_event(am, g, AGGMGR_GROUP_EV_DROP, AGG_ERR_NO_SWITCHSIM);
            dropped++;
        }
    }
    agg_info("switchsim %u is back (pid %u on %s): %u of its groups kept, %u dropped",
             am->sims[sim].id, am->sims[sim].pid, am->sims[sim].host, kept, dropped);
}

unsigned aggmgr_groups_across(aggmgr_t *am, int a, int b, int drop, char *list, size_t len)
{
    aggmgr_job_t *job;
    aggmgr_group_t **pp, *g;
    unsigned n = 0;
    size_t off = 0;

    if (len > 0) {
        list[0] = '\0';
    }
    for (job = am->jobs; job != NULL; job = job->next) {
        for (pp = &job->groups; (g = *pp) != NULL;) {
            if (!aggmgr__group_on(g, a) || !aggmgr__group_on(g, b)) {
                pp = &g->next;
                continue;
            }
            if (off + 24 < len) {
                off += (size_t)snprintf(list + off, len - off, "%s%u/%u", n ? ", " : "",
                                        job->id, g->id);
            }
            n++;
            if (!drop) {
                pp = &g->next;
                continue;
            }
            /* its parts everywhere are torn down, so members fail at once
               rather than time out, and the job's next group makes them again;
               a creator still waiting hears AGG_ERR_NO_SWITCHSIM */
            aggmgr_group_event(am, g, AGGMGR_GROUP_EV_DROP, AGG_ERR_NO_SWITCHSIM);
        }
    }
    return n;
}

