/*
 * Jobs, groups and the resource counts behind them. A job reserves OSTs and
 * group slots on every aggregation node of its LLT tree, and gets the paired
 * SAT tree (same switches, its own tree ID) when it asks for SAT. A group
 * takes its LLT OSTs out of its job's reservation, and its SAT part a SAT
 * flow on every switch of its tree (a switch serves an_sat_flows SAT groups
 * at once). Running out is an ordinary answer (AGG_ERR_QUOTA or
 * AGG_ERR_NO_RESOURCE) that the client falls back on.
 */
#include "aggmgr.h"


#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "agg/sock.h"

void aggmgr_resources_init(aggmgr_t *am)
{
    uint32_t osts   = (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_OSTS);
    uint32_t groups = (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_MAX_GROUPS);
    uint32_t flows  = (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_SAT_FLOWS);
    int i;

    for (i = 0; i < am->topo.num_nodes; ++i) {
        am->ans[i].sim           = -1;
        am->ans[i].osts_cap      = osts;
        am->ans[i].groups_cap    = groups;
        am->ans[i].sat_flows_cap = flows;
    }
}

static aggmgr_job_t *aggmgr__job_find(aggmgr_t *am, uint32_t job_id)
{
    aggmgr_job_t *job;

    for (job = am->jobs; job != NULL; job = job->next) {
        if (job->id == job_id) {
            return job;
        }
    }
    return NULL;
}

/* Every node of the tree can give `osts` and `groups` more. */
static int aggmgr__tree_fits(const aggmgr_t *am, const aggmgr_tree_t *tree,
                             uint32_t osts, uint32_t groups)
{
    int i;

    for (i = 0; i < tree->num_nodes; ++i) {
        const aggmgr_an_t *an = &am->ans[tree->nodes[i].topo_node];
        if (an->osts_used + osts > an->osts_cap ||
            an->groups_used + groups > an->groups_cap) {
            return 0;
        }
    }
    return 1;
}

static void aggmgr__tree_reserve(aggmgr_t *am, const aggmgr_tree_t *tree, int sign,
                                 uint32_t osts, uint32_t groups)
{
    int i;

    for (i = 0; i < tree->num_nodes; ++i) {
        aggmgr_an_t *an = &am->ans[tree->nodes[i].topo_node];
        an->osts_used   += (uint32_t)sign * osts;
        an->groups_used += (uint32_t)sign * groups;
    }
}

static uint32_t aggmgr__share(uint32_t cap, long long percent)
{
    uint32_t v = (uint32_t)((unsigned long long)cap * (unsigned long long)percent / 100u);

    return v == 0 ? 1 : v;
}

/* The adapters a job holds, each once (ranks of a host may share one). */
static agg_status_t aggmgr__job_hold(aggmgr_t *am, aggmgr_job_t *job)
{
    uint32_t r, k;

    job->held = malloc(job->world_size * sizeof(*job->held));
    if (job->held == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (r = 0; r < job->world_size; ++r) {
        for (k = 0; k < job->num_cas && job->held[k] != job->cas[r]; ++k) {
        }
        if (k == job->num_cas) {
            job->held[job->num_cas++] = job->cas[r];
        }
    }
    for (k = 0; k < job->num_cas; ++k) {
        am->ca_busy[job->held[k]] = 1;
    }
    return AGG_OK;
}

agg_status_t aggmgr_job_create(aggmgr_t *am, int owner_fd,
                               const agg_msg_job_create_t *req, const char *hosts,
                               const uint32_t *host_of, agg_msg_job_create_reply_t *rep)
{
    long long percent = agg_conf_int(&am->conf, AGG_CONF_AM_LLT_QUOTA_PERCENT);
    uint32_t an_payload = (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_PAYLOAD_PER_OST);
    uint32_t osts, groups, payload;
    aggmgr_job_t *job;
    unsigned *load;
    char why[512];
    agg_status_t st;
    int n;

    if (req->world_size == 0 || req->world_size > (uint32_t)am->topo.num_cas * 1024u) {
        agg_warn("job from %s pid %u asks for %u ranks", req->host, req->pid, req->world_size);
        return AGG_ERR_NO_RESOURCE;
    }
    if (am->num_jobs >= (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AM_MAX_JOBS)) {
        agg_warn("job from %s pid %u refused: %u jobs already", req->host, req->pid,
                 am->num_jobs);
        return AGG_ERR_NO_RESOURCE;
    }
    payload = req->quota_payload_per_ost ? req->quota_payload_per_ost : an_payload;
    if (payload > an_payload || payload < 8 || payload % 8 != 0) {
        agg_warn("job asks for %u bytes per OST; nodes offer at most %u (multiple of 8)",
                 payload, an_payload);
        return AGG_ERR_QUOTA;
    }
    osts   = req->quota_osts ? req->quota_osts :
             aggmgr__share((uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_OSTS), percent);
    groups = req->quota_max_groups ? req->quota_max_groups :
             aggmgr__share((uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_MAX_GROUPS),
                           percent);

    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    job->world_size = req->world_size;
    job->cas        = malloc(req->world_size * sizeof(*job->cas));
    job->rank_host  = malloc(req->world_size * sizeof(*job->rank_host));
    if (job->cas == NULL || job->rank_host == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto err_free;
    }
    for (uint32_t r = 0; r < req->world_size; ++r) {
        memcpy(job->rank_host[r], hosts + (size_t)host_of[r] * AGG_WIRE_NAME_LEN,
               AGG_WIRE_NAME_LEN);
    }
    st = aggmgr_place(am, req, hosts, host_of, job->cas, why, sizeof(why));
    if (st != AGG_OK) {
        agg_warn("job from %s pid %u: %s", req->host, req->pid, why);
        goto err_free;
    }
    load = malloc((size_t)am->topo.num_nodes * sizeof(*load));
    if (load == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto err_free;
    }
    for (n = 0; n < am->topo.num_nodes; ++n) {
        load[n] = am->ans[n].trees_rooted;
    }
    st = aggmgr_tree_build(&am->topo, job->cas, (int)req->world_size, load, &job->tree);
    free(load);
    if (st != AGG_OK) {
        agg_warn("no aggregation tree covers the %u ranks of the job: %s", req->world_size,
                 agg_status_string(st));
        goto err_free;
    }
    if (!aggmgr__tree_fits(am, &job->tree, osts, groups)) {
        agg_warn("job quota (osts %u, groups %u) does not fit on its tree", osts, groups);
        st = AGG_ERR_NO_RESOURCE;
        goto err_tree;
    }
    st = aggmgr__job_hold(am, job);
    if (st != AGG_OK) {
        goto err_tree;
    }
    aggmgr__tree_reserve(am, &job->tree, 1, osts, groups);
    am->ans[job->tree.nodes[0].topo_node].trees_rooted++;

    job->id              = ++am->next_job_id;
    job->key             = req->job_key;
    job->owner_fd        = owner_fd;
    job->osts            = osts;
    job->max_groups      = groups;
    job->payload_per_ost = payload;
    job->osts_per_group  = req->osts_per_group;
    job->tree_id         = am->next_tree_id++;
    /* the paired SAT tree: the same switches, streaming, its own ID */
    job->sat_tree_id     = (req->flags & AGG_JOB_F_SAT) ? am->next_tree_id++ : 0;
    job->next            = am->jobs;
    am->jobs             = job;
    am->num_jobs++;

    rep->status          = AGG_OK;
    rep->job_id          = job->id;
    rep->tree_id         = job->tree_id;
    rep->tree_depth      = (uint32_t)job->tree.depth;
    rep->tree_nodes      = (uint32_t)job->tree.num_nodes;
    rep->osts            = osts;
    rep->payload_per_ost = payload;
    rep->max_groups      = groups;
    rep->root_guid       = am->topo.nodes[job->tree.nodes[0].topo_node].guid;
    rep->sat_tree_id     = job->sat_tree_id;
    rep->sat_flows       = (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_SAT_FLOWS);
    rep->shared_adapters = job->num_cas < job->world_size;
    agg_info("job %u (key 0x%llx) created for %s pid %u: %u ranks on %u adapters, tree %u%s "
             "root %s depth %d nodes %d, quota osts %u payload %u groups %u",
             job->id, (unsigned long long)job->key, req->host, req->pid, job->world_size,
             job->num_cas, job->tree_id, job->sat_tree_id ? " (+SAT)" : "",
             am->topo.nodes[job->tree.nodes[0].topo_node].id, job->tree.depth,
             job->tree.num_nodes, osts, payload, groups);
    return AGG_OK;

err_tree:
    aggmgr_tree_free(&job->tree);
err_free:
    free(job->cas);
    free(job->rank_host);
    free(job);
    return st;
}

/* ---- groups -------------------------------------------------------------- */

/* ---- a group's tree on the switchsims ------------------------------------ */

static void aggmgr__gtree_parts_free(aggmgr_gtree_t *gt)
{
    free(gt->parts);
    free(gt->node_part);
    free(gt->node_local);
    free(gt->remote);
    free(gt->channel);
    free(gt->eps);
    gt->parts      = NULL;
    gt->node_part  = NULL;
    gt->node_local = NULL;
    gt->remote     = NULL;
    gt->channel    = NULL;
    gt->eps        = NULL;
    gt->num_parts  = 0;
    gt->num_eps    = 0;
}

/*
 * Cuts the group's tree into parts, one per set of connected switches that
 * one switchsim hosts, and gives each member its part's channel; says which
 * members are on another host than their part's switchsim (they attach over
 * TCP). Fails with the reason when a switch has no switchsim or a link the
 * group needs has no TCP data port behind it.
 */
static agg_status_t aggmgr__gtree_parts(aggmgr_t *am, const aggmgr_job_t *job,
                                        const aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                        const int *sel)
{
    uint32_t nn = (uint32_t)gt->tree.num_nodes, i, *extra;
    aggmgr_part_t *p;

    gt->parts      = calloc(nn, sizeof(*gt->parts));
    gt->node_part  = calloc(nn, sizeof(*gt->node_part));
    gt->node_local = calloc(nn, sizeof(*gt->node_local));
    gt->remote     = calloc(g->num_members, sizeof(*gt->remote));
    gt->channel    = calloc(g->num_members, sizeof(*gt->channel));
    extra          = calloc(nn, sizeof(*extra));
    if (gt->parts == NULL || gt->node_part == NULL || gt->node_local == NULL ||
        gt->remote == NULL || gt->channel == NULL || extra == NULL) {
        free(extra);
        return AGG_ERR_NO_MEMORY;
    }
    gt->num_parts = 0;
    for (i = 0; i < nn; ++i) {
        int topo = gt->tree.nodes[i].topo_node, parent = gt->tree.nodes[i].parent;
        int sim = am->ans[topo].sim;

        if (sim < 0 || am->sims[sim].fd < 0) {
            agg_warn("job %u: group %u needs switch %s, which no switchsim hosts", job->id,
                     g->id, am->topo.nodes[topo].id);
            free(extra);
            return AGG_ERR_NO_SWITCHSIM;
        }
        if (parent >= 0 && gt->parts[gt->node_part[parent]].sim == sim) {
            gt->node_part[i] = gt->node_part[parent];
        } else {
            p = &gt->parts[gt->num_parts];
            *p = (aggmgr_part_t){.sim = sim, .parent = parent < 0 ? -1 : gt->node_part[parent],
                                 .parent_node = parent, .ep_away = UINT32_MAX};
            if (parent >= 0) {
                p->extra = extra[parent]++;
                if (am->sims[sim].data_addr[0] == '\0' ||
                    am->sims[gt->parts[p->parent].sim].data_addr[0] == '\0') {
                    agg_warn("job %u: group %u spans switchsims %u and %u, and one has no "
                             "TCP data port (set sim_data_addr)", job->id, g->id,
                             am->sims[sim].id, am->sims[gt->parts[p->parent].sim].id);
                    free(extra);
                    return AGG_ERR_NOT_SUPPORTED;
                }
            }
            gt->node_part[i] = (int)gt->num_parts++;
        }
        gt->node_local[i] = gt->parts[gt->node_part[i]].num_nodes++;
    }
    free(extra);
    for (i = 0; i < g->num_members; ++i) {
        p = &gt->parts[gt->node_part[gt->tree.hca_leaf[i]]];
        gt->channel[i] = p->num_members++;
        gt->remote[i]  = strncmp(job->rank_host[sel[i]], am->sims[p->sim].host,
                                 AGG_WIRE_NAME_LEN) != 0;
        if (gt->remote[i] && am->sims[p->sim].data_addr[0] == '\0') {
            agg_warn("job %u: group %u has rank %d on host %s, but the switchsim of its leaf "
                     "runs on %s and has no TCP data port (set sim_data_addr there); the group "
                     "stays on the host path", job->id, g->id, sel[i], job->rank_host[sel[i]],
                     am->sims[p->sim].host);
            return AGG_ERR_NOT_SUPPORTED;
        }
    }
    return AGG_OK;
}

/*
 * Asks the part's switchsim to lay it out; its answer comes to
 * aggmgr_group_config_reply, which fills part->here and ->away.
 */
static agg_status_t aggmgr__part_send(aggmgr_t *am, const aggmgr_job_t *job,
                                      const aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                      uint32_t pi, uint32_t tree, aggmgr_op_t *op)
{
    aggmgr_simreq_t what = {.job_id = job->id, .group_id = g->id, .tree = tree, .part = pi};
    aggmgr_part_t *part = &gt->parts[pi];
    agg_msg_group_config_t *cfg;
    agg_wire_tree_node_t *wn;
    agg_wire_member_t *wm;
    agg_wire_port_t *wp;
    uint32_t i, k, nn = (uint32_t)gt->tree.num_nodes, np = part->parent >= 0;
    size_t body_len;
    agg_status_t st;

    for (i = 0; i < gt->num_parts; ++i) {
        np += gt->parts[i].parent == (int)pi;
    }
    body_len = sizeof(*cfg) + part->num_nodes * sizeof(*wn) +
               part->num_members * sizeof(*wm) + np * sizeof(*wp);
    cfg = calloc(1, body_len);
    if (cfg == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    *cfg = (agg_msg_group_config_t){
        .group_id = g->id, .job_id = job->id, .num_members = part->num_members,
        .num_nodes = part->num_nodes, .osts = gt->osts, .payload = gt->payload, .tree = tree,
        .flags = op->flags & AGG_GROUP_F_REPRODUCIBLE, .part = pi, .num_ports = np,
        .job_key = job->key,
    };
    wn = (agg_wire_tree_node_t *)(cfg + 1);
    wm = (agg_wire_member_t *)(wn + part->num_nodes);
    wp = (agg_wire_port_t *)(wm + part->num_members);
    for (i = 0; i < nn; ++i) {
        int parent = gt->tree.nodes[i].parent;

        if (gt->node_part[i] != (int)pi) {
            if (parent >= 0 && gt->node_part[parent] == (int)pi) {
                wn[gt->node_local[parent]].extra++; /* a child part hangs here */
            }
            continue;
        }
        wn[gt->node_local[i]].guid   = am->topo.nodes[gt->tree.nodes[i].topo_node].guid;
        wn[gt->node_local[i]].parent = parent >= 0 && gt->node_part[parent] == (int)pi ?
                                       (int32_t)gt->node_local[parent] : -1;
    }
    for (i = 0; i < g->num_members; ++i) {
        int leaf = gt->tree.hca_leaf[i];

        if (gt->node_part[leaf] == (int)pi) {
            wm[gt->channel[i]].leaf  = gt->node_local[leaf];
            wm[gt->channel[i]].flags = gt->remote[i] ? AGG_MEMBER_F_REMOTE : 0;
        }
    }
    k = 0;
    if (part->parent >= 0) {
        const aggmgr_part_t *up = &gt->parts[part->parent];

        wp[k] = (agg_wire_port_t){.kind = AGG_WIRE_PORT_UP, .part = (uint32_t)part->parent,
                                  .node = gt->node_local[part->parent_node],
                                  .extra = part->extra};
        snprintf(wp[k++].addr, sizeof(wp->addr), "%s", am->sims[up->sim].data_addr);
    }
    for (i = 0; i < gt->num_parts; ++i) {
        if (gt->parts[i].parent == (int)pi) {
            wp[k] = (agg_wire_port_t){.kind = AGG_WIRE_PORT_DOWN, .part = i};
            snprintf(wp[k++].addr, sizeof(wp->addr), "%s", am->sims[gt->parts[i].sim].data_addr);
        }
    }
    agg_wire_swap(cfg, AGG_FMT_GROUP_CONFIG, 1);
    agg_wire_swap(wn, AGG_FMT_TREE_NODE, part->num_nodes);
    agg_wire_swap(wm, AGG_FMT_MEMBER, part->num_members);
    agg_wire_swap(wp, AGG_FMT_PORT, np);
    st = aggmgr_sim_request(am, part->sim, AGG_MSG_GROUP_CONFIG, cfg, body_len, op, &what);
    free(cfg);
    return st;
}

/* Undoes one laid-out part; nobody waits for the answer. */
static void aggmgr__part_teardown(aggmgr_t *am, int sim, const aggmgr_simreq_t *what)
{
    agg_msg_group_ref_t ref = {.job_id = what->job_id, .group_id = what->group_id,
                               .tree = what->tree, .part = what->part};

    if (sim < 0 || sim >= am->num_sims || am->sims[sim].fd < 0) {
        return; /* gone, and its parts with it */
    }
    agg_wire_swap(&ref, AGG_FMT_GROUP_REF, 1);
    if (aggmgr_sim_request(am, sim, AGG_MSG_GROUP_TEARDOWN, &ref, sizeof(ref), NULL, what) !=
        AGG_OK) {
        agg_warn("switchsim %u was not asked to tear down part %u of group %u",
                 am->sims[sim].id, what->part, what->group_id);
    }
}

static void aggmgr__gtree_teardown(aggmgr_t *am, const aggmgr_job_t *job,
                                   const aggmgr_group_t *g, aggmgr_gtree_t *gt, uint32_t tree)
{
    uint32_t pi;

    for (pi = 0; pi < gt->num_parts; ++pi) {
        aggmgr_simreq_t what = {.job_id = job->id, .group_id = g->id, .tree = tree, .part = pi};

        if (gt->parts[pi].configured) {
            aggmgr__part_teardown(am, gt->parts[pi].sim, &what);
            gt->parts[pi].configured = 0;
        }
    }
}

/*
 * Cuts a group's tree into parts and asks each part's switchsim to lay it
 * out. AGG_OK: every request went out (op waits for them); otherwise
 * whatever went out is undone when its answer comes (the caller frees the
 * parts).
 */
static agg_status_t aggmgr__gtree_start(aggmgr_t *am, const aggmgr_job_t *job,
                                        const aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                        uint32_t tree, aggmgr_op_t *op)
{
    agg_status_t st = aggmgr__gtree_parts(am, job, g, gt, op->sel);
    uint32_t pi;

    for (pi = 0; st == AGG_OK && pi < gt->num_parts; ++pi) {
        st = aggmgr__part_send(am, job, g, gt, pi, tree, op);
    }
    return st;
}

/*
 * Every part laid out: the endpoints its members attach to, per part the one
 * switchsim offers to its own host, and the one for other hosts when some
 * member of it is on another host. What an endpoint says is switchsim's.
 */
static agg_status_t aggmgr__gtree_eps(aggmgr_t *am, const aggmgr_group_t *g,
                                      aggmgr_gtree_t *gt)
{
    uint32_t pi, i;

    gt->eps = calloc(2 * (size_t)gt->num_parts, sizeof(*gt->eps));
    if (gt->eps == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (pi = 0; pi < gt->num_parts; ++pi) {
        gt->parts[pi].ep_here = gt->num_eps;
        gt->eps[gt->num_eps++] = gt->parts[pi].here;
    }
    for (i = 0; i < g->num_members; ++i) {
        aggmgr_part_t *p = &gt->parts[gt->node_part[gt->tree.hca_leaf[i]]];

        if (!gt->remote[i] || p->ep_away != UINT32_MAX) {
            continue;
        }
        if (p->away.transport == 0) {
            agg_error("group %u: switchsim %u offers no endpoint to members on other hosts",
                      g->id, am->sims[p->sim].id);
            return AGG_ERR_GROUP_JOIN;
        }
        p->ep_away             = gt->num_eps;
        gt->eps[gt->num_eps++] = p->away;
    }
    return AGG_OK;
}

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

/*
 * Starts the SAT part of a new group (its LLT part is laid out); a refusal
 * is logged and recorded in sat.status, not fatal. AGG_INPROGRESS in
 * sat.status while the switchsims lay it out.
 */
static void aggmgr__group_sat(aggmgr_t *am, const aggmgr_job_t *job, aggmgr_group_t *g,
                              aggmgr_op_t *op)
{
    aggmgr_gtree_t *gt = &g->sat;
    int full;

    gt->tree_id = job->sat_tree_id;
    gt->osts    = op->sat_osts ? op->sat_osts : 4;
    gt->payload = op->sat_payload;
    gt->status  = aggmgr_tree_prune(&job->tree, op->sel, (int)g->num_members, &gt->tree);
    if (gt->status != AGG_OK) {
        return;
    }
    full = aggmgr__sat_flows_fit(am, &gt->tree);
    if (full >= 0) {
        agg_info("job %u: group %u gets no SAT part: switch %s already serves %u SAT flows "
                 "(an_sat_flows); it uses the LLT", job->id, g->id, am->topo.nodes[full].id,
                 am->ans[full].sat_flows_used);
        gt->status = AGG_ERR_NO_RESOURCE;
        aggmgr_tree_free(&gt->tree);
        return;
    }
    aggmgr__sat_flows_take(am, &gt->tree, 1); /* held while it is laid out */
    gt->status = AGG_INPROGRESS;
    if (aggmgr__gtree_start(am, job, g, gt, AGG_TREE_SAT, op) != AGG_OK &&
        op->status == AGG_OK) {
        op->status = AGG_ERR_NO_SWITCHSIM; /* aggmgr_group_step gives it all back */
    }
}

/* The SAT part is laid out, or failed (op->status): keep it or give it back. */
static void aggmgr__group_sat_end(aggmgr_t *am, const aggmgr_job_t *job, aggmgr_group_t *g,
                                  aggmgr_op_t *op)
{
    agg_status_t st = op->status;

    op->status = AGG_OK; /* the group stands on its LLT part whatever happened here */
    if (st == AGG_OK) {
        st = aggmgr__gtree_eps(am, g, &g->sat);
    }
    if (st == AGG_OK) {
        g->sat.status = AGG_OK;
        return;
    }
    agg_warn("job %u: group %u gets no SAT part (%s); it uses the LLT", job->id, g->id,
             agg_status_string(st));
    aggmgr__gtree_teardown(am, job, g, &g->sat, AGG_TREE_SAT);
    aggmgr__gtree_parts_free(&g->sat);
    aggmgr__sat_flows_take(am, &g->sat.tree, -1);
    aggmgr_tree_free(&g->sat.tree);
    g->sat.status = st;
}

static void aggmgr__group_free(aggmgr_t *am, aggmgr_job_t *job, aggmgr_group_t *g)
{
    if (g->op != NULL) {
        /* still being laid out: its answers find no group, and undo their part */
        g->op->group = NULL;
        if (g->op->status == AGG_OK) {
            g->op->status = AGG_ERR_NO_JOB;
        }
    }
    aggmgr__gtree_teardown(am, job, g, &g->llt, AGG_TREE_LLT);
    aggmgr__gtree_parts_free(&g->llt);
    if (g->sat.status == AGG_OK || g->sat.status == AGG_INPROGRESS) {
        aggmgr__gtree_teardown(am, job, g, &g->sat, AGG_TREE_SAT);
        aggmgr__gtree_parts_free(&g->sat);
        aggmgr__sat_flows_take(am, &g->sat.tree, -1);
        aggmgr_tree_free(&g->sat.tree);
    }
    job->osts_used -= g->llt.osts;
    job->num_groups--;
    aggmgr_tree_free(&g->llt.tree);
    free(g);
}

/* Takes g out of its job's list and frees it. */
static void aggmgr__group_drop(aggmgr_t *am, aggmgr_job_t *job, aggmgr_group_t *g)
{
    aggmgr_group_t **pp;

    for (pp = &job->groups; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            aggmgr__group_free(am, job, g);
            return;
        }
    }
}

/* An endpoint switchsim offered: some transport and an address that fits (or none). */
static int aggmgr__ep_valid(const agg_wire_endpoint_t *ep, int may_be_none)
{
    if (ep->transport == 0) {
        return may_be_none;
    }
    return ep->length > 0 && ep->length <= sizeof(ep->addr);
}

void aggmgr_group_config_reply(aggmgr_t *am, const aggmgr_simreq_t *req, agg_status_t st,
                               const agg_msg_group_config_reply_t *rep)
{
    aggmgr_group_t *g = req->op != NULL ? req->op->group : NULL;
    aggmgr_gtree_t *gt;

    if (st == AGG_OK && (!aggmgr__ep_valid(&rep->here, 0) || !aggmgr__ep_valid(&rep->away, 1))) {
        st = AGG_ERR_PROTOCOL;
    }
    if (st != AGG_OK) {
        agg_warn("switchsim %u could not configure part %u of the %s part of group %u: %s",
                 am->sims[req->sim].id, req->part, req->tree == AGG_TREE_SAT ? "SAT" : "LLT",
                 req->group_id, agg_status_string(st));
    }
    if (st == AGG_ERR_TIMEOUT || (st == AGG_OK && (g == NULL || g->id != req->group_id))) {
        /* laid out for a group that is gone, or perhaps laid out after all */
        aggmgr__part_teardown(am, req->sim, req);
        return;
    }
    if (st != AGG_OK) {
        return;
    }
    gt = req->tree == AGG_TREE_SAT ? &g->sat : &g->llt;
    if (req->part < gt->num_parts) {
        gt->parts[req->part].here       = rep->here;
        gt->parts[req->part].away       = rep->away;
        gt->parts[req->part].configured = 1;
    }
}

void aggmgr_group_step(aggmgr_t *am, aggmgr_op_t *op)
{
    aggmgr_job_t *job = aggmgr__job_find(am, op->job_id);
    aggmgr_group_t *g = op->group;

    if (g == NULL || job == NULL) {
        if (op->status == AGG_OK) {
            op->status = AGG_ERR_NO_JOB;
        }
        return;
    }
    if (op->phase == 0) {
        if (op->status == AGG_OK) {
            op->status = aggmgr__gtree_eps(am, g, &g->llt);
        }
        if (op->status != AGG_OK) {
            aggmgr__group_drop(am, job, g); /* undoes the parts laid out */
            op->group = NULL;
            return;
        }
        g->llt.status = AGG_OK;
        op->phase     = 1;
        if ((op->flags & AGG_GROUP_F_SAT) && job->sat_tree_id != 0) {
            aggmgr__group_sat(am, job, g, op);
            if (op->pending > 0) {
                return;
            }
        }
    }
    if (g->sat.status == AGG_INPROGRESS) {
        aggmgr__group_sat_end(am, job, g, op);
    }
    g->op = NULL;
    agg_info("job %u: group %u of %u members on %d nodes (depth %d, root %s), %u OSTs%s",
             job->id, g->id, g->num_members, g->llt.tree.num_nodes, g->llt.tree.depth,
             am->topo.nodes[g->llt.tree.nodes[0].topo_node].id, g->llt.osts,
             g->sat.status == AGG_OK ? ", with a SAT part" : "");
}

agg_status_t aggmgr_group_create(aggmgr_t *am, int owner_fd, const agg_msg_group_create_t *req,
                                 const uint32_t *world_ranks, aggmgr_op_t *op)
{
    aggmgr_job_t *job = aggmgr__job_find(am, req->job_id);
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
    g->op           = op;
    op->group       = g;
    op->job_id      = job->id;
    op->flags       = req->flags;
    op->sat_osts    = req->sat_osts;
    op->sat_payload = req->sat_payload;
    op->sel         = sel;
    st = aggmgr__gtree_start(am, job, g, &g->llt, AGG_TREE_LLT, op);
    if (st != AGG_OK && op->status == AGG_OK) {
        op->status = st; /* aggmgr_group_step undoes what went out */
    }
    aggmgr_op_start(am, op);
    return AGG_INPROGRESS;

err_free:
    free(sel);
    free(g);
    return st;
}

agg_status_t aggmgr_group_destroy(aggmgr_t *am, uint32_t job_id, uint32_t group_id)
{
    aggmgr_job_t *job = aggmgr__job_find(am, job_id);
    aggmgr_group_t **pp, *g;

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    for (pp = &job->groups; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id == group_id) {
            g   = *pp;
            *pp = g->next;
            agg_info("job %u: group %u destroyed", job_id, group_id);
            aggmgr__group_free(am, job, g);
            return AGG_OK;
        }
    }
    return AGG_ERR_GROUP_ID;
}

agg_status_t aggmgr_job_destroy(aggmgr_t *am, uint32_t job_id)
{
    aggmgr_job_t **pp, *job;
    aggmgr_group_t *g;
    uint32_t k;

    for (pp = &am->jobs; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id != job_id) {
            continue;
        }
        job = *pp;
        *pp = job->next;
        while ((g = job->groups) != NULL) {
            job->groups = g->next;
            aggmgr__group_free(am, job, g);
        }
        aggmgr__tree_reserve(am, &job->tree, -1, job->osts, job->max_groups);
        am->ans[job->tree.nodes[0].topo_node].trees_rooted--;
        for (k = 0; k < job->num_cas; ++k) {
            am->ca_busy[job->held[k]] = 0;
        }
        agg_info("job %u destroyed", job->id);
        aggmgr_tree_free(&job->tree);
        free(job->cas);
        free(job->rank_host);
        free(job->held);
        free(job);
        am->num_jobs--;
        return AGG_OK;
    }
    return AGG_ERR_NO_JOB;
}

agg_status_t aggmgr_job_owned(aggmgr_t *am, uint32_t job_id, int fd)
{
    aggmgr_job_t *job = aggmgr__job_find(am, job_id);

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    if (job->owner_fd != fd) {
        agg_warn("fd %d asked to destroy job %u, which another connection created; refused",
                 fd, job_id);
        return AGG_ERR_AUTH;
    }
    return AGG_OK;
}

agg_status_t aggmgr_group_owned(aggmgr_t *am, uint32_t job_id, uint32_t group_id, int fd)
{
    aggmgr_job_t *job = aggmgr__job_find(am, job_id);
    aggmgr_group_t *g;

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    for (g = job->groups; g != NULL; g = g->next) {
        if (g->id != group_id) {
            continue;
        }
        if (g->owner_fd != fd && job->owner_fd != fd) {
            agg_warn("fd %d asked to destroy group %u of job %u, which is another's; refused",
                     fd, group_id, job_id);
            return AGG_ERR_AUTH;
        }
        return AGG_OK;
    }
    return AGG_ERR_GROUP_ID;
}

void aggmgr_conn_release(aggmgr_t *am, int fd)
{
    aggmgr_job_t *job, *next;
    aggmgr_group_t *g, *gnext;

    aggmgr_ops_forget_client(am, fd); /* its groups being laid out answer nobody */
    for (job = am->jobs; job != NULL; job = next) {
        next = job->next;
        if (job->owner_fd == fd) {
            agg_info("job %u: its owner disconnected; releasing it", job->id);
            aggmgr_job_destroy(am, job->id);
            continue;
        }
        for (g = job->groups; g != NULL; g = gnext) {
            gnext = g->next;
            if (g->owner_fd == fd) {
                aggmgr_group_destroy(am, job->id, g->id);
            }
        }
    }
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

void aggmgr_sim_lost(aggmgr_t *am, int sim)
{
    aggmgr_sim_t *s = &am->sims[sim];
    unsigned lost;
    int i;

    /* its groups first, while its fd still tells which teardowns to skip;
       what it was asked and never answered fails now */
    s->fd = -1;
    aggmgr_sim_fail_all(am, sim, AGG_ERR_NO_SWITCHSIM);
    lost = aggmgr_groups_across(am, sim, sim, 1, NULL, 0); /* the groups on it */
    for (i = 0; i < am->topo.num_nodes; ++i) {
        if (am->ans[i].sim == sim) {
            am->ans[i].sim = -1;
        }
    }
    if (lost > 0) {
        agg_error("switchsim %u (pid %u on %s) is gone; %u groups are lost", s->id, s->pid,
                  s->host, lost);
    } else {
        agg_info("switchsim %u (pid %u on %s) disconnected", s->id, s->pid, s->host);
    }
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
               rather than time out, and the job's next group makes them again */
            *pp = g->next;
            if (g->op != NULL && g->op->status == AGG_OK) {
                g->op->status = AGG_ERR_NO_SWITCHSIM; /* what its creator hears */
            }
            aggmgr__group_free(am, job, g);
        }
    }
    return n;
}

int aggmgr_sim_of_fd(const aggmgr_t *am, int fd)
{
    int i;

    for (i = 0; i < am->num_sims; ++i) {
        if (am->sims[i].fd >= 0 && am->sims[i].fd == fd) {
            return i;
        }
    }
    return -1;
}

int aggmgr_sims_live(const aggmgr_t *am)
{
    int i, n = 0;

    for (i = 0; i < am->num_sims; ++i) {
        n += am->sims[i].fd >= 0;
    }
    return n;
}
