/*
 * Jobs and the resource counts behind them. A job reserves OSTs and group
 * slots on every aggregation node of its LLT tree, and gets the paired SAT
 * tree (same switches, its own tree ID) when it asks for SAT; its groups
 * (aggmgr_group.c) take their share out of that. Running out is an ordinary
 * answer (AGG_ERR_QUOTA or AGG_ERR_NO_RESOURCE) that the client falls back
 * on.
 */
#include "aggmgr.h"


#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

aggmgr_job_t *aggmgr_job_find(aggmgr_t *am, uint32_t job_id)
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

/* What a job's struct holds, and itself (its tree apart). */
static void aggmgr__job_free(aggmgr_job_t *job)
{
    free(job->down);
    free(job->cas);
    free(job->rank_host);
    free(job->held);
    free(job);
}

/* A job of `world_size` ranks, its per-rank arrays allocated; NULL without memory. */
static aggmgr_job_t *aggmgr__job_new(uint32_t world_size)
{
    aggmgr_job_t *job = calloc(1, sizeof(*job));

    if (job == NULL) {
        return NULL;
    }
    job->world_size = world_size;
    job->cas        = malloc(world_size * sizeof(*job->cas));
    job->rank_host  = malloc(world_size * sizeof(*job->rank_host));
    if (job->cas == NULL || job->rank_host == NULL) {
        aggmgr__job_free(job);
        return NULL;
    }
    return job;
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
    long long max_cas = agg_conf_int(&am->conf, AGG_CONF_AM_CLIENT_MAX_ADAPTERS);
    uint32_t an_payload = (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_PAYLOAD_PER_OST);
    uint32_t osts, groups, payload, peer_jobs = 0, peer_cas = 0, k;
    const aggmgr_job_t *other;
    const char *peer;
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
    /* what the jobs of its address hold already (am_client_max_*) */
    peer = aggmgr_conn_peer(am, owner_fd);
    for (other = am->jobs; other != NULL; other = other->next) {
        if (other->owner_fd >= 0 && strcmp(aggmgr_conn_peer(am, other->owner_fd), peer) == 0) {
            peer_jobs++;
            peer_cas += other->num_cas;
        }
    }
    if (peer_jobs >= (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AM_CLIENT_MAX_JOBS)) {
        agg_warn("job from %s pid %u refused: its address (%s) has %u jobs already "
                 "(am_client_max_jobs)", req->host, req->pid, peer, peer_jobs);
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

    job = aggmgr__job_new(req->world_size);
    if (job == NULL) {
        return AGG_ERR_NO_MEMORY;
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
    if (max_cas > 0 && peer_cas + job->num_cas > (uint64_t)max_cas) {
        agg_warn("job from %s pid %u refused: its address (%s) holds %u adapters, and %u more "
                 "would pass am_client_max_adapters (%lld)", req->host, req->pid, peer,
                 peer_cas, job->num_cas, max_cas);
        for (k = 0; k < job->num_cas; ++k) {
            am->ca_busy[job->held[k]] = 0;
        }
        st = AGG_ERR_NO_RESOURCE;
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
    job->owner_pid       = req->pid;
    snprintf(job->owner_host, sizeof(job->owner_host), "%s", req->host);
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
    aggmgr_journal_job(am, job);
    agg_info("job %u created for %s pid %u: %u ranks on %u adapters, tree %u%s "
             "root %s depth %d nodes %d, quota osts %u payload %u groups %u",
             job->id, req->host, req->pid, job->world_size,
             job->num_cas, job->tree_id, job->sat_tree_id ? " (+SAT)" : "",
             am->topo.nodes[job->tree.nodes[0].topo_node].id, job->tree.depth,
             job->tree.num_nodes, osts, payload, groups);
    return AGG_OK;

err_tree:
    aggmgr_tree_free(&job->tree);
err_free:
    aggmgr__job_free(job);
    return st;
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
        job->ending = 1; /* one record says it all */
        aggmgr_journal_job_end(am, job->id);
        while ((g = job->groups) != NULL) {
            aggmgr_group_event(am, g, AGGMGR_GROUP_EV_DROP, AGG_ERR_NO_JOB);
        }
        aggmgr__tree_reserve(am, &job->tree, -1, job->osts, job->max_groups);
        am->ans[job->tree.nodes[0].topo_node].trees_rooted--;
        for (k = 0; k < job->num_cas; ++k) {
            am->ca_busy[job->held[k]] = 0;
        }
        agg_info("job %u destroyed", job->id);
        aggmgr_tree_free(&job->tree);
        aggmgr__job_free(job);
        am->num_jobs--;
        return AGG_OK;
    }
    return AGG_ERR_NO_JOB;
}

/*
 * The job's tree again, rooted where the journal says it was, around the
 * switches that were down when it was built (job->down), into *tree.
 */
static agg_status_t aggmgr__tree_rebuild(aggmgr_t *am, const aggmgr_job_t *job, uint32_t root,
                                         aggmgr_tree_t *tree)
{
    unsigned *load = malloc((size_t)am->topo.num_nodes * sizeof(*load));
    uint8_t *down = calloc((size_t)am->topo.num_nodes, 1);
    agg_status_t st = AGG_ERR_NO_MEMORY;
    uint32_t i;
    int n;

    if (load == NULL || down == NULL) {
        goto out;
    }
    /* the root is chosen among the switches of least height by load: the
       recorded one alone has none */
    for (n = 0; n < am->topo.num_nodes; ++n) {
        load[n] = (uint32_t)n == root ? 0 : 1;
    }
    for (i = 0; i < job->num_down; ++i) {
        if (job->down[i] < (uint32_t)am->topo.num_nodes) {
            down[job->down[i]] = 1;
        }
    }
    st = aggmgr_tree_build_avoiding(&am->topo, job->cas, (int)job->world_size, load, down,
                                    tree);
    if (st == AGG_OK && (uint32_t)tree->nodes[0].topo_node != root) {
        aggmgr_tree_free(tree);
        st = AGG_ERR_NO_TREE;
    }
out:
    free(load);
    free(down);
    return st;
}

/* Takes the switches down[] into job->down (a copy). */
static agg_status_t aggmgr__job_set_down(aggmgr_job_t *job, const uint32_t *down, uint32_t n)
{
    uint32_t *copy = NULL;

    if (n > 0 && (copy = malloc(n * sizeof(*copy))) == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    if (n > 0) {
        memcpy(copy, down, n * sizeof(*copy));
    }
    free(job->down);
    job->down     = copy;
    job->num_down = n;
    return AGG_OK;
}

/* The job's reservation moves from its tree to nt, which becomes its tree. */
static agg_status_t aggmgr__job_move(aggmgr_t *am, aggmgr_job_t *job, aggmgr_tree_t *nt)
{
    aggmgr__tree_reserve(am, &job->tree, -1, job->osts, job->max_groups);
    if (!aggmgr__tree_fits(am, nt, job->osts, job->max_groups)) {
        aggmgr__tree_reserve(am, &job->tree, 1, job->osts, job->max_groups);
        return AGG_ERR_NO_RESOURCE;
    }
    am->ans[job->tree.nodes[0].topo_node].trees_rooted--;
    aggmgr_tree_free(&job->tree);
    job->tree = *nt;
    aggmgr__tree_reserve(am, &job->tree, 1, job->osts, job->max_groups);
    am->ans[job->tree.nodes[0].topo_node].trees_rooted++;
    return AGG_OK;
}

agg_status_t aggmgr_job_reroute(aggmgr_t *am, aggmgr_job_t *job)
{
    uint8_t *down = calloc((size_t)am->topo.num_nodes, 1);
    uint32_t *list = NULL, nd = 0;
    unsigned *load = NULL;
    aggmgr_tree_t nt;
    agg_status_t st = AGG_OK;
    int i, any = 0;

    if (down == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < am->topo.num_nodes; ++i) {
        int sim = am->ans[i].sim;

        down[i] = am->topo.nodes[i].type == AGGMGR_NODE_SWITCH &&
                  (sim < 0 || am->sims[sim].fd < 0);
        nd += down[i];
    }
    for (i = 0; i < job->tree.num_nodes; ++i) {
        any |= down[job->tree.nodes[i].topo_node];
    }
    if (!any) {
        goto out; /* whole */
    }
    load = malloc((size_t)am->topo.num_nodes * sizeof(*load));
    list = malloc((nd + 1) * sizeof(*list));
    if (load == NULL || list == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto out;
    }
    for (i = 0, nd = 0; i < am->topo.num_nodes; ++i) {
        load[i] = am->ans[i].trees_rooted;
        if (down[i]) {
            list[nd++] = (uint32_t)i;
        }
    }
    st = aggmgr_tree_build_avoiding(&am->topo, job->cas, (int)job->world_size, load, down, &nt);
    if (st != AGG_OK) {
        agg_warn("job %u: its tree has a switch no switchsim serves, and the switches that "
                 "are up leave no other tree for its ranks: its groups wait for that switch",
                 job->id);
        st = AGG_ERR_NO_SWITCHSIM;
        goto out;
    }
    st = aggmgr__job_move(am, job, &nt);
    if (st != AGG_OK) {
        agg_warn("job %u: a tree around the switches that are down has no room for its quota",
                 job->id);
        aggmgr_tree_free(&nt);
        goto out;
    }
    aggmgr__job_set_down(job, list, nd);
    job->tree_id = am->next_tree_id++;
    if (job->sat_tree_id != 0) {
        job->sat_tree_id = am->next_tree_id++;
    }
    aggmgr_journal_job_tree(am, job);
    agg_warn("job %u: its tree went through a switch that is down (%u down); its groups now "
             "use tree %u rooted at %s, depth %d, %d nodes", job->id, nd, job->tree_id,
             am->topo.nodes[job->tree.nodes[0].topo_node].id, job->tree.depth,
             job->tree.num_nodes);
out:
    free(down);
    free(load);
    free(list);
    return st;
}

agg_status_t aggmgr_job_retree(aggmgr_t *am, uint32_t job_id, uint32_t root, uint32_t tree_id,
                               uint32_t sat_tree_id, const uint32_t *down, uint32_t num_down,
                               char *why, size_t whylen)
{
    aggmgr_job_t *job = aggmgr_job_find(am, job_id);
    aggmgr_tree_t nt;
    agg_status_t st;

    if (job == NULL || root >= (uint32_t)am->topo.num_nodes) {
        snprintf(why, whylen, "job %u's new tree (root %u), but %s", job_id, root,
                 job == NULL ? "no such job" : "no such switch");
        return AGG_ERR_PROTOCOL;
    }
    st = aggmgr__job_set_down(job, down, num_down);
    if (st == AGG_OK) {
        st = aggmgr__tree_rebuild(am, job, root, &nt);
    }
    if (st == AGG_OK) {
        st = aggmgr__job_move(am, job, &nt);
        if (st != AGG_OK) {
            aggmgr_tree_free(&nt);
        }
    }
    if (st != AGG_OK) {
        snprintf(why, whylen, "job %u: its new tree rooted at %s cannot be built again or "
                 "does not fit", job_id, am->topo.nodes[root].id);
        return AGG_ERR_PROTOCOL;
    }
    job->tree_id     = tree_id;
    job->sat_tree_id = sat_tree_id;
    if (am->next_tree_id <= tree_id) {
        am->next_tree_id = tree_id + 1;
    }
    if (am->next_tree_id <= sat_tree_id) {
        am->next_tree_id = sat_tree_id + 1;
    }
    return AGG_OK;
}

agg_status_t aggmgr_job_restore(aggmgr_t *am, const aggmgr_job_rec_t *rec, char *why,
                                size_t whylen)
{
    aggmgr_job_t *job;
    agg_status_t st = AGG_ERR_NO_MEMORY;
    uint32_t r;

    if (aggmgr_job_find(am, rec->id) != NULL) {
        snprintf(why, whylen, "job %u is there twice", rec->id);
        return AGG_ERR_PROTOCOL;
    }
    if (rec->world_size == 0 || rec->num_hosts == 0 || rec->root >= (uint32_t)am->topo.num_nodes ||
        am->topo.nodes[rec->root].type != AGGMGR_NODE_SWITCH) {
        snprintf(why, whylen, "job %u: %u ranks, %u hosts, root node %u", rec->id,
                 rec->world_size, rec->num_hosts, rec->root);
        return AGG_ERR_PROTOCOL;
    }
    for (r = 0; r < rec->world_size; ++r) {
        if (rec->cas[r] < 0 || rec->cas[r] >= am->topo.num_cas ||
            rec->host_of[r] >= rec->num_hosts) {
            snprintf(why, whylen, "job %u: rank %u has adapter %d of %d, host %u of %u",
                     rec->id, r, rec->cas[r], am->topo.num_cas, rec->host_of[r],
                     rec->num_hosts);
            return AGG_ERR_PROTOCOL;
        }
        if (am->ca_busy[rec->cas[r]]) {
            snprintf(why, whylen, "job %u: rank %u's adapter %s is another job's", rec->id, r,
                     am->topo.nodes[am->topo.cas[rec->cas[r]]].id);
            return AGG_ERR_PROTOCOL;
        }
    }
    job = aggmgr__job_new(rec->world_size);
    if (job == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (r = 0; r < rec->world_size; ++r) {
        job->cas[r] = rec->cas[r];
        memcpy(job->rank_host[r], rec->hosts + (size_t)rec->host_of[r] * AGG_WIRE_NAME_LEN,
               AGG_WIRE_NAME_LEN);
        job->rank_host[r][AGG_WIRE_NAME_LEN - 1] = '\0';
    }
    st = aggmgr__job_set_down(job, rec->down, rec->num_down);
    if (st == AGG_OK) {
        st = aggmgr__tree_rebuild(am, job, rec->root, &job->tree);
    }
    if (st != AGG_OK) {
        snprintf(why, whylen, "job %u: no tree rooted at %s covers its adapters", rec->id,
                 am->topo.nodes[rec->root].id);
        goto err_free;
    }
    st = aggmgr__job_hold(am, job);
    if (st != AGG_OK) {
        goto err_tree;
    }
    /* what it held before, whether or not it would be granted now */
    aggmgr__tree_reserve(am, &job->tree, 1, rec->osts, rec->max_groups);
    am->ans[rec->root].trees_rooted++;
    job->id                = rec->id;
    job->key               = rec->key;
    job->owner_fd          = -1;
    job->osts              = rec->osts;
    job->max_groups        = rec->max_groups;
    job->payload_per_ost   = rec->payload_per_ost;
    job->osts_per_group    = rec->osts_per_group;
    job->tree_id           = rec->tree_id;
    job->sat_tree_id       = rec->sat_tree_id;
    job->owner_pid         = rec->owner_pid;
    job->restored_until_ms = agg_time_ms() +
                             agg_conf_int(&am->conf, AGG_CONF_AM_RESTORE_GRACE_MS);
    memcpy(job->owner_host, rec->owner_host, AGG_WIRE_NAME_LEN);
    job->owner_host[AGG_WIRE_NAME_LEN - 1] = '\0';
    job->next = am->jobs;
    am->jobs  = job;
    am->num_jobs++;
    if (am->next_job_id < job->id) {
        am->next_job_id = job->id;
    }
    if (am->next_tree_id <= job->tree_id) {
        am->next_tree_id = job->tree_id + 1;
    }
    if (am->next_tree_id <= job->sat_tree_id) {
        am->next_tree_id = job->sat_tree_id + 1;
    }
    return AGG_OK;

err_tree:
    aggmgr_tree_free(&job->tree);
err_free:
    aggmgr__job_free(job);
    return st;
}

agg_status_t aggmgr_job_attach(aggmgr_t *am, int fd, const agg_msg_job_attach_t *req)
{
    aggmgr_job_t *job = aggmgr_job_find(am, req->job_id);

    if (job == NULL) {
        return AGG_ERR_NO_JOB;
    }
    if (req->job_key != job->key) {
        agg_warn("fd %d asked to attach to job %u without its key; refused", fd, job->id);
        return AGG_ERR_AUTH;
    }
    if (req->world_rank == 0 && job->owner_fd < 0) {
        job->owner_fd          = fd;
        job->restored_until_ms = 0;
        agg_info("job %u: rank 0 is back; the job is its again", job->id);
    }
    return AGG_OK;
}

int aggmgr_jobs_expire(aggmgr_t *am)
{
    int64_t now = agg_time_ms(), next = -1;
    aggmgr_job_t *job, *jnext;

    for (job = am->jobs; job != NULL; job = jnext) {
        jnext = job->next;
        if (job->restored_until_ms == 0) {
            continue;
        }
        if (job->restored_until_ms <= now) {
            agg_warn("job %u (pid %u on %s): read back from the journal, and its rank 0 did "
                     "not come back within am_restore_grace_ms; releasing it", job->id,
                     job->owner_pid, job->owner_host);
            aggmgr_job_destroy(am, job->id);
            continue;
        }
        if (next < 0 || job->restored_until_ms - now < next) {
            next = job->restored_until_ms - now;
        }
    }
    return next > INT32_MAX ? INT32_MAX : (int)next;
}

agg_status_t aggmgr_job_owned(aggmgr_t *am, uint32_t job_id, int fd)
{
    aggmgr_job_t *job = aggmgr_job_find(am, job_id);

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

/* A switchsim of this host whose process is gone: no use waiting for it. */
static int aggmgr__sim_dead_here(const aggmgr_sim_t *s)
{
    char host[AGG_WIRE_NAME_LEN] = "";

    char path[64], stat[256] = "";
    const char *state;
    FILE *f;

    if (gethostname(host, sizeof(host) - 1) != 0 || strcmp(host, s->host) != 0 || s->pid == 0) {
        return 0;
    }
    if (kill((pid_t)s->pid, 0) != 0) {
        return errno == ESRCH;
    }
    /* killed, not yet reaped by its parent: dead all the same */
    snprintf(path, sizeof(path), "/proc/%u/stat", s->pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    if (fgets(stat, sizeof(stat), f) == NULL) {
        stat[0] = '\0';
    }
    fclose(f);
    state = strrchr(stat, ')');
    return state != NULL && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X');
}

void aggmgr_sim_lost(aggmgr_t *am, int sim)
{
    aggmgr_sim_t *s = &am->sims[sim];
    long long grace;
    unsigned lost;
    int i;

    /* its groups first, while its fd still tells which teardowns to skip;
       what it was asked and never answered fails now */
    s->fd = -1;
    free(s->served);
    s->served     = NULL;
    s->num_served = 0;
    aggmgr_sim_fail_all(am, sim, AGG_ERR_NO_SWITCHSIM);
    for (i = 0; i < am->topo.num_nodes; ++i) {
        if (am->ans[i].sim == sim) {
            am->ans[i].sim = -1; /* down: new groups go around it, or fail */
        }
    }
    grace = agg_conf_int(&am->conf, AGG_CONF_AM_SIM_GRACE_MS);
    lost  = aggmgr_groups_across(am, sim, sim, 0, NULL, 0); /* the groups on it */
    if (grace > 0 && lost > 0 && !aggmgr__sim_dead_here(s)) {
        /* a connection can break with the process alive (it calls back at once):
           its groups' data keeps flowing meanwhile */
        s->away_until_ms = agg_time_ms() + grace;
        agg_warn("switchsim %u (pid %u on %s): its control connection closed; its %u "
                 "groups are kept %lld ms (am_sim_grace_ms) for it to register again",
                 s->id, s->pid, s->host, lost, grace);
        return;
    }
    lost = aggmgr_groups_across(am, sim, sim, 1, NULL, 0);
    if (lost > 0) {
        agg_error("switchsim %u (pid %u on %s) is gone; %u groups are lost", s->id, s->pid,
                  s->host, lost);
    } else {
        agg_info("switchsim %u (pid %u on %s) disconnected", s->id, s->pid, s->host);
    }
}

void aggmgr_sims_away_expire(aggmgr_t *am)
{
    int64_t now = agg_time_ms();
    unsigned lost;
    int i;

    for (i = 0; i < am->num_sims; ++i) {
        aggmgr_sim_t *s = &am->sims[i];

        if (s->fd >= 0 || s->away_until_ms == 0 || now < s->away_until_ms) {
            continue;
        }
        s->away_until_ms = 0;
        lost = aggmgr_groups_across(am, i, i, 1, NULL, 0);
        agg_error("switchsim %u (pid %u on %s) did not register again within "
                  "am_sim_grace_ms; its %u groups are lost", s->id, s->pid, s->host, lost);
    }
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
