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

#include "agg/net.h"

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

/* Has switchsim lay out a group's part on one tree; fills gt->endpoint. */
/*
 * Which members are on another host than switchsim (they attach over TCP);
 * AGG_ERR_NOT_SUPPORTED when some are and switchsim has no data port.
 */
static agg_status_t aggmgr__gtree_remote(aggmgr_t *am, const aggmgr_job_t *job,
                                         const aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                         const int *sel)
{
    uint32_t i;

    gt->remote = calloc(g->num_members, 1);
    if (gt->remote == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    gt->any_remote = 0;
    for (i = 0; i < g->num_members; ++i) {
        gt->remote[i] = strncmp(job->rank_host[sel[i]], am->sim.host, AGG_WIRE_NAME_LEN) != 0;
        gt->any_remote |= gt->remote[i];
    }
    if (gt->any_remote && am->sim.data_addr[0] == '\0') {
        for (i = 0; !gt->remote[i]; ++i) {
        }
        agg_warn("job %u: group %u has rank %d on host %s, but switchsim runs on %s and has "
                 "no TCP data port (set sim_data_addr there); the group stays on the host path",
                 job->id, g->id, sel[i], job->rank_host[sel[i]], am->sim.host);
        free(gt->remote);
        gt->remote = NULL;
        return AGG_ERR_NOT_SUPPORTED;
    }
    return AGG_OK;
}

static agg_status_t aggmgr__gtree_config(aggmgr_t *am, const aggmgr_job_t *job,
                                         const aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                         uint32_t tree, uint32_t flags, const int *sel)
{
    agg_msg_group_config_reply_t rep;
    agg_msg_group_config_t *cfg;
    agg_wire_tree_node_t *wn;
    agg_wire_member_t *wm;
    size_t len, body_len;
    uint32_t i, nn = (uint32_t)gt->tree.num_nodes;
    agg_status_t st;

    st = aggmgr__gtree_remote(am, job, g, gt, sel);
    if (st != AGG_OK) {
        return st;
    }
    body_len = sizeof(*cfg) + nn * sizeof(*wn) + g->num_members * sizeof(*wm);
    cfg = calloc(1, body_len);
    if (cfg == NULL) {
        free(gt->remote);
        gt->remote = NULL;
        return AGG_ERR_NO_MEMORY;
    }
    *cfg = (agg_msg_group_config_t){
        .group_id = g->id, .job_id = job->id, .num_members = g->num_members,
        .num_nodes = nn, .osts = gt->osts, .payload = gt->payload, .tree = tree,
        .flags = flags & AGG_GROUP_F_REPRODUCIBLE,
    };
    wn = (agg_wire_tree_node_t *)(cfg + 1);
    wm = (agg_wire_member_t *)(wn + nn);
    for (i = 0; i < nn; ++i) {
        wn[i].guid   = am->topo.nodes[gt->tree.nodes[i].topo_node].guid;
        wn[i].parent = gt->tree.nodes[i].parent;
    }
    for (i = 0; i < g->num_members; ++i) {
        wm[i].leaf  = (uint32_t)gt->tree.hca_leaf[i];
        wm[i].flags = gt->remote[i] ? AGG_MEMBER_F_REMOTE : 0;
    }
    agg_wire_swap(cfg, AGG_FMT_GROUP_CONFIG, 1);
    agg_wire_swap(wn, AGG_FMT_TREE_NODE, nn);
    agg_wire_swap(wm, AGG_FMT_MEMBER, g->num_members);
    st = aggmgr_sim_call(am, AGG_MSG_GROUP_CONFIG, cfg, body_len, AGG_MSG_GROUP_CONFIG_REPLY,
                         &rep, sizeof(rep), &len);
    free(cfg);
    if (st == AGG_OK) {
        st = agg_wire_reply_decode(&rep, len, sizeof(rep), AGG_FMT_GROUP_CONFIG_REPLY);
        if (st == AGG_OK && (rep.endpoint.length == 0 ||
                             rep.endpoint.length > sizeof(rep.endpoint.addr))) {
            st = AGG_ERR_PROTOCOL;
        }
    }
    if (st != AGG_OK) {
        agg_warn("switchsim could not configure the %s part of group %u: %s",
                 tree == AGG_TREE_SAT ? "SAT" : "LLT", g->id, agg_status_string(st));
        free(gt->remote);
        gt->remote = NULL;
        return st;
    }
    gt->endpoint = rep.endpoint;
    memset(&gt->tcp, 0, sizeof(gt->tcp));
    if (gt->any_remote) {
        gt->tcp.transport = AGG_TL_TCP;
        gt->tcp.length    = (uint32_t)agg_net_ep_format((char *)gt->tcp.addr,
                                                        sizeof(gt->tcp.addr), am->sim.data_addr,
                                                        g->id, tree, 0);
    }
    return AGG_OK;
}

static void aggmgr__gtree_teardown(aggmgr_t *am, const aggmgr_job_t *job,
                                   const aggmgr_group_t *g, uint32_t tree)
{
    agg_msg_group_ref_t ref = {.job_id = job->id, .group_id = g->id, .tree = tree};
    agg_status_t st;

    if (am->sim.fd < 0) {
        return;
    }
    agg_wire_swap(&ref, AGG_FMT_GROUP_REF, 1);
    st = agg_msg_call_status(am->sim.fd, AGG_MSG_GROUP_TEARDOWN, &ref, sizeof(ref),
                             AGG_MSG_GROUP_TEARDOWN_REPLY, 5000);
    if (st != AGG_OK) {
        agg_warn("switchsim did not tear down group %u: %s", g->id, agg_status_string(st));
    }
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

/* The SAT part of a new group; a refusal is logged and recorded, not fatal. */
static void aggmgr__group_sat(aggmgr_t *am, const aggmgr_job_t *job, aggmgr_group_t *g,
                              const agg_msg_group_create_t *req, const int *sel)
{
    aggmgr_gtree_t *gt = &g->sat;
    int full;

    gt->tree_id = job->sat_tree_id;
    gt->osts    = req->sat_osts ? req->sat_osts : 4;
    gt->payload = req->sat_payload;
    gt->status  = aggmgr_tree_prune(&job->tree, sel, (int)g->num_members, &gt->tree);
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
    gt->status = aggmgr__gtree_config(am, job, g, gt, AGG_TREE_SAT, req->flags, sel);
    if (gt->status != AGG_OK) {
        aggmgr_tree_free(&gt->tree);
        return;
    }
    aggmgr__sat_flows_take(am, &gt->tree, 1);
}

agg_status_t aggmgr_group_create(aggmgr_t *am, int owner_fd, const agg_msg_group_create_t *req,
                                 const uint32_t *world_ranks, aggmgr_group_t **out)
{
    aggmgr_job_t *job = aggmgr__job_find(am, req->job_id);
    uint32_t i, j, n = req->num_members, osts = req->osts;
    aggmgr_group_t *g;
    int *sel = NULL;
    agg_status_t st;

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    if (am->sim.fd < 0) {
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
    g->sat.status  = AGG_ERR_SAT_UNAVAILABLE;
    st = aggmgr_tree_prune(&job->tree, sel, (int)n, &g->llt.tree);
    if (st != AGG_OK) {
        goto err_free;
    }
    st = aggmgr__gtree_config(am, job, g, &g->llt, AGG_TREE_LLT, req->flags, sel);
    if (st != AGG_OK) {
        goto err_tree;
    }
    g->llt.status = AGG_OK;
    if ((req->flags & AGG_GROUP_F_SAT) && job->sat_tree_id != 0) {
        aggmgr__group_sat(am, job, g, req, sel);
    }
    g->next     = job->groups;
    job->groups = g;
    job->num_groups++;
    job->osts_used += osts;
    agg_info("job %u: group %u of %u members on %d nodes (depth %d, root %s), %u OSTs%s",
             req->job_id, g->id, n, g->llt.tree.num_nodes, g->llt.tree.depth,
             am->topo.nodes[g->llt.tree.nodes[0].topo_node].id, osts,
             g->sat.status == AGG_OK ? ", with a SAT part" : "");
    free(sel);
    *out = g;
    return AGG_OK;

err_tree:
    aggmgr_tree_free(&g->llt.tree);
err_free:
    free(sel);
    free(g);
    return st;
}

static void aggmgr__group_free(aggmgr_t *am, aggmgr_job_t *job, aggmgr_group_t *g)
{
    aggmgr__gtree_teardown(am, job, g, AGG_TREE_LLT);
    if (g->sat.status == AGG_OK) {
        aggmgr__gtree_teardown(am, job, g, AGG_TREE_SAT);
        aggmgr__sat_flows_take(am, &g->sat.tree, -1);
        aggmgr_tree_free(&g->sat.tree);
    }
    free(g->sat.remote);
    free(g->llt.remote);
    job->osts_used -= g->llt.osts;
    job->num_groups--;
    aggmgr_tree_free(&g->llt.tree);
    free(g);
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

void aggmgr_conn_release(aggmgr_t *am, int fd)
{
    aggmgr_job_t *job, *next;
    aggmgr_group_t *g, *gnext;

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

void aggmgr_sim_lost(aggmgr_t *am)
{
    aggmgr_job_t *job;
    aggmgr_group_t *g;
    unsigned lost = 0;

    for (job = am->jobs; job != NULL; job = job->next) {
        lost += job->num_groups;
    }
    if (lost > 0) {
        agg_error("switchsim %u (pid %u) is gone; %u groups are lost", am->sim.id,
                  am->sim.pid, lost);
    } else {
        agg_info("switchsim %u (pid %u) disconnected", am->sim.id, am->sim.pid);
    }
    am->sim.fd = -1;
    for (job = am->jobs; job != NULL; job = job->next) {
        while ((g = job->groups) != NULL) {
            job->groups = g->next;
            aggmgr__group_free(am, job, g);
        }
    }
}
