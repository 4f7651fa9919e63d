/*
 * Jobs, groups and the resource counts behind them. A job reserves OSTs and
 * group slots on every aggregation node of its tree; each group takes its
 * OSTs out of its job's reservation. Running out is an ordinary answer
 * (AGG_ERR_QUOTA or AGG_ERR_NO_RESOURCE) that the client falls back on.
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
    int i;

    for (i = 0; i < am->topo.num_nodes; ++i) {
        am->ans[i].osts_cap   = osts;
        am->ans[i].groups_cap = groups;
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

agg_status_t aggmgr_job_create(aggmgr_t *am, int owner_fd,
                               const agg_msg_job_create_t *req,
                               agg_msg_job_create_reply_t *rep)
{
    long long percent = agg_conf_int(&am->conf, AGG_CONF_AM_LLT_QUOTA_PERCENT);
    uint32_t an_payload = (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_PAYLOAD_PER_OST);
    uint32_t osts, groups, payload, i, found;
    aggmgr_job_t *job;
    agg_status_t st;

    if (req->world_size == 0 || req->world_size > (uint32_t)am->topo.num_cas) {
        agg_warn("job from %s pid %u asks for %u hosts; the fabric (%s) has %d",
                 req->host, req->pid, req->world_size, am->topo.source, am->topo.num_cas);
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
    job->cas = malloc(req->world_size * sizeof(*job->cas));
    if (job->cas == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto err_free;
    }
    /* Rank r gets the r-th free host adapter, in topology order. */
    for (i = 0, found = 0; i < (uint32_t)am->topo.num_cas && found < req->world_size; ++i) {
        if (!am->ca_busy[i]) {
            job->cas[found++] = (int)i;
        }
    }
    if (found < req->world_size) {
        agg_warn("job from %s pid %u asks for %u hosts; only %u are free", req->host,
                 req->pid, req->world_size, found);
        st = AGG_ERR_NO_RESOURCE;
        goto err_free;
    }
    {
        unsigned *load = malloc((size_t)am->topo.num_nodes * sizeof(*load));
        int n;

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
            agg_warn("no aggregation tree covers the %u hosts of the job: %s",
                     req->world_size, agg_status_string(st));
            goto err_free;
        }
    }
    if (!aggmgr__tree_fits(am, &job->tree, osts, groups)) {
        agg_warn("job quota (osts %u, groups %u) does not fit on its tree", osts, groups);
        st = AGG_ERR_NO_RESOURCE;
        goto err_tree;
    }
    aggmgr__tree_reserve(am, &job->tree, 1, osts, groups);
    am->ans[job->tree.nodes[0].topo_node].trees_rooted++;
    for (i = 0; i < req->world_size; ++i) {
        am->ca_busy[job->cas[i]] = 1;
    }

    job->id              = ++am->next_job_id;
    job->key             = req->job_key;
    job->owner_fd        = owner_fd;
    job->world_size      = req->world_size;
    job->osts            = osts;
    job->max_groups      = groups;
    job->payload_per_ost = payload;
    job->osts_per_group  = req->osts_per_group;
    job->tree_id         = am->next_tree_id++;
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
    agg_info("job %u (key 0x%llx) created for %s pid %u: %u hosts, tree %u root %s "
             "depth %d nodes %d, quota osts %u payload %u groups %u",
             job->id, (unsigned long long)job->key, req->host, req->pid, job->world_size,
             job->tree_id, am->topo.nodes[job->tree.nodes[0].topo_node].id,
             job->tree.depth, job->tree.num_nodes, osts, payload, groups);
    return AGG_OK;

err_tree:
    aggmgr_tree_free(&job->tree);
err_free:
    free(job->cas);
    free(job);
    return st;
}

static void aggmgr__group_teardown(aggmgr_t *am, aggmgr_job_t *job, aggmgr_group_t *g)
{
    agg_msg_group_ref_t ref = {.job_id = job->id, .group_id = g->id};
    agg_status_t st;

    if (am->sim.fd >= 0) {
        agg_wire_swap(&ref, AGG_FMT_GROUP_REF, 1);
        st = agg_msg_call_status(am->sim.fd, AGG_MSG_GROUP_TEARDOWN, &ref, sizeof(ref),
                                 AGG_MSG_GROUP_TEARDOWN_REPLY, 5000);
        if (st != AGG_OK) {
            agg_warn("switchsim did not tear down group %u: %s", g->id,
                     agg_status_string(st));
        }
    }
    job->osts_used -= g->osts;
    job->num_groups--;
    aggmgr_tree_free(&g->tree);
    free(g);
}

agg_status_t aggmgr_group_create(aggmgr_t *am, int owner_fd, uint32_t job_id,
                                 const uint32_t *world_ranks, uint32_t n,
                                 uint32_t osts, agg_msg_group_create_reply_t *rep,
                                 uint64_t *leaf_guids)
{
    aggmgr_job_t *job = aggmgr__job_find(am, job_id);
    agg_msg_group_config_reply_t cfg_rep;
    agg_msg_group_config_t *cfg;
    agg_wire_tree_node_t *wnodes;
    agg_wire_member_t *wmembers;
    aggmgr_group_t *g;
    int *sel = NULL;
    size_t len, body_len;
    uint32_t i, j;
    agg_status_t st;

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    if (am->sim.fd < 0) {
        agg_warn("group for job %u refused: no switchsim is registered", job_id);
        return AGG_ERR_NO_SWITCHSIM;
    }
    if (n == 0 || n > job->world_size) {
        return AGG_ERR_INVALID_PARAM;
    }
    if (osts == 0) {
        osts = job->osts_per_group ? job->osts_per_group : 8;
    }
    if (job->num_groups >= job->max_groups || job->osts_used + osts > job->osts) {
        agg_info("job %u: group of %u refused, quota used (groups %u/%u, osts %u+%u/%u)",
                 job_id, n, job->num_groups, job->max_groups, job->osts_used, osts,
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
            agg_warn("job %u: group member %u has world rank %u of %u", job_id, i,
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
    st = aggmgr_tree_prune(&job->tree, sel, (int)n, &g->tree);
    if (st != AGG_OK) {
        goto err_free;
    }

    body_len = sizeof(*cfg) + (size_t)g->tree.num_nodes * sizeof(*wnodes) +
               n * sizeof(*wmembers);
    cfg = calloc(1, body_len);
    if (cfg == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto err_tree;
    }
    g->id                = ++am->next_group_id;
    g->osts              = osts;
    g->owner_fd          = owner_fd;
    cfg->group_id        = g->id;
    cfg->job_id          = job->id;
    cfg->num_members     = n;
    cfg->num_nodes       = (uint32_t)g->tree.num_nodes;
    cfg->osts            = osts;
    cfg->payload_per_ost = job->payload_per_ost;
    wnodes   = (agg_wire_tree_node_t *)(cfg + 1);
    wmembers = (agg_wire_member_t *)(wnodes + g->tree.num_nodes);
    for (i = 0; i < (uint32_t)g->tree.num_nodes; ++i) {
        wnodes[i].guid   = am->topo.nodes[g->tree.nodes[i].topo_node].guid;
        wnodes[i].parent = g->tree.nodes[i].parent;
    }
    for (i = 0; i < n; ++i) {
        wmembers[i].leaf = (uint32_t)g->tree.hca_leaf[i];
        leaf_guids[i]    = wnodes[wmembers[i].leaf].guid;
    }
    agg_wire_swap(cfg, AGG_FMT_GROUP_CONFIG, 1);
    agg_wire_swap(wnodes, AGG_FMT_TREE_NODE, (size_t)g->tree.num_nodes);
    agg_wire_swap(wmembers, AGG_FMT_MEMBER, n);
    st = aggmgr_sim_call(am, AGG_MSG_GROUP_CONFIG, cfg, body_len,
                         AGG_MSG_GROUP_CONFIG_REPLY, &cfg_rep, sizeof(cfg_rep), &len);
    free(cfg);
    if (st == AGG_OK) {
        if (len != sizeof(cfg_rep)) {
            st = AGG_ERR_PROTOCOL;
        } else {
            agg_wire_swap(&cfg_rep, AGG_FMT_GROUP_CONFIG_REPLY, 1);
            st = cfg_rep.status;
        }
    }
    if (st != AGG_OK) {
        agg_warn("switchsim could not configure group %u: %s", g->id,
                 agg_status_string(st));
        goto err_tree;
    }
    snprintf(g->shm_name, sizeof(g->shm_name), "%s", cfg_rep.shm_name);
    g->next     = job->groups;
    job->groups = g;
    job->num_groups++;
    job->osts_used += osts;

    rep->status          = AGG_OK;
    rep->group_id        = g->id;
    rep->osts            = osts;
    rep->payload_per_ost = job->payload_per_ost;
    rep->num_members     = n;
    rep->tree_depth      = (uint32_t)g->tree.depth;
    rep->tree_nodes      = (uint32_t)g->tree.num_nodes;
    snprintf(rep->shm_name, sizeof(rep->shm_name), "%s", cfg_rep.shm_name);
    snprintf(rep->bell_name, sizeof(rep->bell_name), "%s", am->sim.bell_shm);
    agg_info("job %u: group %u of %u members on %d nodes (depth %d, root %s), %u OSTs",
             job_id, g->id, n, g->tree.num_nodes, g->tree.depth,
             am->topo.nodes[g->tree.nodes[0].topo_node].id, osts);
    free(sel);
    return AGG_OK;

err_tree:
    aggmgr_tree_free(&g->tree);
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
            aggmgr__group_teardown(am, job, g);
            return AGG_OK;
        }
    }
    return AGG_ERR_GROUP_ID;
}

agg_status_t aggmgr_job_destroy(aggmgr_t *am, uint32_t job_id)
{
    aggmgr_job_t **pp, *job;
    aggmgr_group_t *g;
    uint32_t i;

    for (pp = &am->jobs; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id != job_id) {
            continue;
        }
        job = *pp;
        *pp = job->next;
        while ((g = job->groups) != NULL) {
            job->groups = g->next;
            aggmgr__group_teardown(am, job, g);
        }
        aggmgr__tree_reserve(am, &job->tree, -1, job->osts, job->max_groups);
        am->ans[job->tree.nodes[0].topo_node].trees_rooted--;
        for (i = 0; i < job->world_size; ++i) {
            am->ca_busy[job->cas[i]] = 0;
        }
        agg_info("job %u destroyed", job->id);
        aggmgr_tree_free(&job->tree);
        free(job->cas);
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
            aggmgr__group_teardown(am, job, g);
        }
    }
}
