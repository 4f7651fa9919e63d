/*
 * aggmgr's jobs, groups and resource counts on generated fabrics: quotas are
 * reserved on every node of a job's tree and given back, hosts are not
 * shared between jobs, roots spread over spines, running out is an ordinary
 * answer; SAT jobs get a SAT tree, SAT groups a SAT flow on every switch of
 * their tree while an_sat_flows allows, and a SAT part that cannot be had
 * leaves the LLT part standing.
 *
 * Groups are configured on switchsim through aggmgr_sim_request. Here a thread
 * on the other end of a socketpair stands in for it: it parses every
 * GROUP_CONFIG and GROUP_TEARDOWN, checks it against the fabric, records it
 * and answers (with an endpoint, or with a refusal a test asks for).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "aggmgr.h"
#include "agg/net.h"
#include "agg/sock.h"

/* ---- a switchsim on a socketpair ----------------------------------------- */

#define FAKE_MAX_RECS    64
#define FAKE_MAX_NODES   16
#define FAKE_MAX_MEMBERS 16

typedef struct fake_config {
    agg_msg_group_config_t cfg;   /* host order */
    uint64_t               guid[FAKE_MAX_NODES];
    int32_t                parent[FAKE_MAX_NODES];
    uint32_t               leaf[FAKE_MAX_MEMBERS];
    int32_t                answer; /* what the fake replied */
    int                    live;   /* configured and not torn down */
} fake_config_t;

typedef struct fake_sim {
    aggmgr_t           *am;           /* its fabric, to check GUIDs against */
    int                 fd;           /* the manager's end: am->sims[0].fd */
    int                 peer;         /* the fake's end */
    pthread_t           thread;
    pthread_mutex_t     lock;
    /* set by a test: how to answer the next configs */
    int32_t             llt_answer;   /* AGG_OK: an endpoint */
    int32_t             sat_answer;
    int                 status_only;  /* refuse with a bare agg_msg_status_t */
    int                 hold;         /* keep requests unanswered until fake_release */
    unsigned            num_held;
    struct {
        agg_msg_hdr_t hdr;
        uint8_t      *body;
    } held[FAKE_MAX_RECS];
    /* what it received */
    unsigned            num_configs;
    fake_config_t       configs[FAKE_MAX_RECS];
    unsigned            num_teardowns;
    agg_msg_group_ref_t teardowns[FAKE_MAX_RECS];
    unsigned            errors;
    char                error[256];
} fake_sim_t;

static void fake_bad(fake_sim_t *fs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fake_bad(fake_sim_t *fs, const char *fmt, ...)
{
    va_list ap;

    if (fs->errors++ == 0) {
        va_start(ap, fmt);
        vsnprintf(fs->error, sizeof(fs->error), fmt, ap);
        va_end(ap);
    }
}

static void fake_endpoint(agg_wire_endpoint_t *ep, uint32_t group_id, uint32_t tree)
{
    int n;

    memset(ep, 0, sizeof(*ep));
    ep->transport = AGG_TL_SHM;
    n = snprintf((char *)ep->addr, sizeof(ep->addr), "fake-g%u-%s", group_id,
                 tree == AGG_TREE_SAT ? "sat" : "llt");
    ep->length = (uint32_t)n + 1;
}

/* Checks a GROUP_CONFIG as switchsim would, and more; returns the status to answer. */
static int32_t fake_check_config(fake_sim_t *fs, uint8_t *body, size_t len, fake_config_t *rec)
{
    agg_msg_group_config_t *cfg = (agg_msg_group_config_t *)body;
    agg_wire_tree_node_t *wn;
    agg_wire_member_t *wm;
    uint32_t i, j, nn, nm;
    unsigned k;
    int node;

    if (len < sizeof(*cfg)) {
        fake_bad(fs, "GROUP_CONFIG of %zu bytes", len);
        return AGG_ERR_PROTOCOL;
    }
    agg_wire_swap(cfg, AGG_FMT_GROUP_CONFIG, 1);
    nn = cfg->num_nodes;
    nm = cfg->num_members;
    if (nn == 0 || nn > FAKE_MAX_NODES || nm == 0 || nm > FAKE_MAX_MEMBERS ||
        cfg->part != 0 || cfg->num_ports != 0 ||
        len != sizeof(*cfg) + nn * sizeof(*wn) + nm * sizeof(*wm)) {
        fake_bad(fs, "GROUP_CONFIG of %zu bytes for %u nodes and %u members", len, nn, nm);
        return AGG_ERR_PROTOCOL;
    }
    if (cfg->tree != AGG_TREE_LLT && cfg->tree != AGG_TREE_SAT) {
        fake_bad(fs, "group %u: tree %u", cfg->group_id, cfg->tree);
    }
    if (cfg->flags & ~AGG_GROUP_F_REPRODUCIBLE) {
        fake_bad(fs, "group %u: flags 0x%x", cfg->group_id, cfg->flags);
    }
    if (cfg->job_id == 0 || cfg->group_id == 0 || cfg->osts == 0 || cfg->payload == 0) {
        fake_bad(fs, "group %u of job %u: osts %u payload %u", cfg->group_id, cfg->job_id,
                 cfg->osts, cfg->payload);
    }
    for (k = 0; k < fs->num_configs; ++k) {
        if (fs->configs[k].live && fs->configs[k].cfg.group_id == cfg->group_id &&
            fs->configs[k].cfg.tree == cfg->tree) {
            fake_bad(fs, "group %u tree %u configured twice", cfg->group_id, cfg->tree);
        }
    }
    wn = (agg_wire_tree_node_t *)(cfg + 1);
    wm = (agg_wire_member_t *)(wn + nn);
    agg_wire_swap(wn, AGG_FMT_TREE_NODE, nn);
    agg_wire_swap(wm, AGG_FMT_MEMBER, nm);
    rec->cfg = *cfg;
    for (i = 0; i < nn; ++i) {
        node = aggmgr_topo_find_guid(&fs->am->topo, wn[i].guid);
        if (node < 0 || fs->am->topo.nodes[node].type != AGGMGR_NODE_SWITCH) {
            fake_bad(fs, "group %u: node %u GUID 0x%llx is not a switch", cfg->group_id, i,
                     (unsigned long long)wn[i].guid);
        }
        if (i == 0 ? wn[i].parent != -1 : (wn[i].parent < 0 || (uint32_t)wn[i].parent >= i)) {
            fake_bad(fs, "group %u: node %u has parent %d", cfg->group_id, i, wn[i].parent);
        }
        if (wn[i].extra != 0) {
            fake_bad(fs, "group %u: node %u has %u child parts on one switchsim",
                     cfg->group_id, i, wn[i].extra);
        }
        for (j = 0; j < i; ++j) {
            if (wn[j].guid == wn[i].guid) {
                fake_bad(fs, "group %u: nodes %u and %u are one switch", cfg->group_id, j, i);
            }
        }
        rec->guid[i]   = wn[i].guid;
        rec->parent[i] = wn[i].parent;
    }
    for (i = 0; i < nm; ++i) {
        if (wm[i].leaf >= nn) {
            fake_bad(fs, "group %u: member %u on node %u of %u", cfg->group_id, i,
                     wm[i].leaf, nn);
        }
        rec->leaf[i] = wm[i].leaf;
    }
    return cfg->tree == AGG_TREE_SAT ? fs->sat_answer : fs->llt_answer;
}

static void fake_on_config(fake_sim_t *fs, uint32_t txid, uint8_t *body, size_t len)
{
    agg_msg_group_config_reply_t rep = {0};
    agg_msg_status_t srep;
    fake_config_t rec;
    int32_t answer;

    memset(&rec, 0, sizeof(rec));
    answer = fake_check_config(fs, body, len, &rec);
    rec.answer = answer;
    rec.live   = answer == AGG_OK;
    if (fs->num_configs < FAKE_MAX_RECS) {
        fs->configs[fs->num_configs++] = rec;
    } else {
        fake_bad(fs, "more than %d GROUP_CONFIGs", FAKE_MAX_RECS);
    }
    if (answer != AGG_OK && fs->status_only) {
        srep.status = answer;
        agg_wire_swap(&srep, AGG_FMT_STATUS, 1);
        agg_msg_send(fs->peer, AGG_MSG_GROUP_CONFIG_REPLY, txid, &srep, sizeof(srep), 5000);
        return;
    }
    rep.status   = answer;
    rep.group_id = rec.cfg.group_id;
    rep.tree     = rec.cfg.tree;
    if (answer == AGG_OK) {
        fake_endpoint(&rep.here, rec.cfg.group_id, rec.cfg.tree);
        if (fs->am->sims[0].data_addr[0] != '\0') { /* as switchsim offers its data port */
            agg_net_ep_format(&rep.away, fs->am->sims[0].data_addr, rec.cfg.group_id,
                              rec.cfg.tree, rec.cfg.part);
        }
    }
    agg_wire_swap(&rep, AGG_FMT_GROUP_CONFIG_REPLY, 1);
    agg_msg_send(fs->peer, AGG_MSG_GROUP_CONFIG_REPLY, txid, &rep, sizeof(rep), 5000);
}

static void fake_on_teardown(fake_sim_t *fs, uint32_t txid, uint8_t *body, size_t len)
{
    agg_msg_group_ref_t ref;
    agg_msg_status_t rep = {.status = AGG_OK};
    unsigned k, found = 0;

    if (len != sizeof(ref)) {
        fake_bad(fs, "GROUP_TEARDOWN of %zu bytes", len);
        rep.status = AGG_ERR_PROTOCOL;
    } else {
        memcpy(&ref, body, sizeof(ref));
        agg_wire_swap(&ref, AGG_FMT_GROUP_REF, 1);
        for (k = 0; k < fs->num_configs; ++k) {
            fake_config_t *c = &fs->configs[k];
            if (c->live && c->cfg.job_id == ref.job_id && c->cfg.group_id == ref.group_id &&
                c->cfg.tree == ref.tree) {
                c->live = 0;
                found   = 1;
            }
        }
        if (!found) {
            fake_bad(fs, "teardown of group %u tree %u of job %u, which is not configured",
                     ref.group_id, ref.tree, ref.job_id);
            rep.status = AGG_ERR_GROUP_ID;
        }
        if (fs->num_teardowns < FAKE_MAX_RECS) {
            fs->teardowns[fs->num_teardowns++] = ref;
        }
    }
    agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
    agg_msg_send(fs->peer, AGG_MSG_GROUP_TEARDOWN_REPLY, txid, &rep, sizeof(rep), 5000);
}

static void fake_handle(fake_sim_t *fs, const agg_msg_hdr_t *h, uint8_t *body);

static void *fake_main(void *arg)
{
    fake_sim_t *fs = arg;
    static uint8_t body[65536]; /* one fake at a time */
    agg_msg_hdr_t hdr;

    /* ends when the manager's end is closed */
    while (agg_msg_recv(fs->peer, &hdr, body, sizeof(body), 60000) == AGG_OK) {
        pthread_mutex_lock(&fs->lock);
        if (fs->hold && fs->num_held < FAKE_MAX_RECS) {
            fs->held[fs->num_held].hdr  = hdr;
            fs->held[fs->num_held].body = malloc(hdr.length + 1u);
            memcpy(fs->held[fs->num_held++].body, body, hdr.length);
            pthread_mutex_unlock(&fs->lock);
            continue;
        }
        fake_handle(fs, &hdr, body);
        pthread_mutex_unlock(&fs->lock);
    }
    return NULL;
}

/* Answers what came while held: newest first when `backwards`. */
static void fake_release(fake_sim_t *fs, int backwards)
{
    unsigned k, i;

    pthread_mutex_lock(&fs->lock);
    for (k = 0; k < fs->num_held; ++k) {
        i = backwards ? fs->num_held - 1 - k : k;
        fake_handle(fs, &fs->held[i].hdr, fs->held[i].body);
        free(fs->held[i].body);
    }
    fs->num_held = 0;
    fs->hold     = 0;
    pthread_mutex_unlock(&fs->lock);
}

/* Requests held so far. */
static unsigned fake_held(fake_sim_t *fs)
{
    unsigned n;

    pthread_mutex_lock(&fs->lock);
    n = fs->num_held;
    pthread_mutex_unlock(&fs->lock);
    return n;
}

static void fake_hold(fake_sim_t *fs)
{
    pthread_mutex_lock(&fs->lock);
    fs->hold = 1;
    pthread_mutex_unlock(&fs->lock);
}

static void fake_handle(fake_sim_t *fs, const agg_msg_hdr_t *h, uint8_t *body)
{
    agg_msg_status_t rep;

    switch (h->type) {
    case AGG_MSG_GROUP_CONFIG:
        fake_on_config(fs, h->txid, body, h->length);
        break;
    case AGG_MSG_GROUP_TEARDOWN:
        fake_on_teardown(fs, h->txid, body, h->length);
        break;
    default:
        fake_bad(fs, "unexpected %s", agg_msg_type_name(h->type));
        rep.status = AGG_ERR_PROTOCOL;
        agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
        agg_msg_send(fs->peer, AGG_MSG_ERROR_REPLY, h->txid, &rep, sizeof(rep), 5000);
        break;
    }
}

static fake_sim_t *fake_start(aggmgr_t *am)
{
    fake_sim_t *fs = calloc(1, sizeof(*fs));
    int sv[2];

    assert_non_null(fs);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    fs->am   = am;
    fs->fd   = sv[0];
    fs->peer = sv[1];
    assert_int_equal(pthread_mutex_init(&fs->lock, NULL), 0);
    assert_int_equal(pthread_create(&fs->thread, NULL, fake_main, fs), 0);
    /* one switchsim hosting every switch, on the host of the jobs' ranks, with a
       TCP data port for those of other hosts */
    am->sims[0].fd = fs->fd;
    am->sims[0].id = 1;
    am->num_sims   = 1;
    snprintf(am->sims[0].host, sizeof(am->sims[0].host), "test");
    snprintf(am->sims[0].data_addr, sizeof(am->sims[0].data_addr), "127.0.0.1:7126");
    for (int i = 0; i < am->topo.num_nodes; ++i) {
        am->ans[i].sim = am->topo.nodes[i].type == AGGMGR_NODE_SWITCH ? 0 : -1;
    }
    return fs;
}

/* Whatever aggmgr sent has been answered (teardowns go out unawaited). */
static void fake_settle(fake_sim_t *fs)
{
    assert_int_equal(aggmgr_sims_settle(fs->am, 10000), 0);
}

/* Parts configured and not torn down. */
static unsigned fake_live(fake_sim_t *fs)
{
    unsigned k, n = 0;

    fake_settle(fs);
    pthread_mutex_lock(&fs->lock);
    for (k = 0; k < fs->num_configs; ++k) {
        n += fs->configs[k].live != 0;
    }
    pthread_mutex_unlock(&fs->lock);
    return n;
}

/* GROUP_CONFIGs received for `tree`. */
static unsigned fake_count(fake_sim_t *fs, uint32_t tree)
{
    unsigned k, n = 0;

    fake_settle(fs);
    pthread_mutex_lock(&fs->lock);
    for (k = 0; k < fs->num_configs; ++k) {
        n += fs->configs[k].cfg.tree == tree;
    }
    pthread_mutex_unlock(&fs->lock);
    return n;
}

/* The last GROUP_CONFIG of a group's part; 0 if none came. */
static int fake_config(fake_sim_t *fs, uint32_t group_id, uint32_t tree, fake_config_t *out)
{
    unsigned k;
    int found = 0;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&fs->lock);
    for (k = 0; k < fs->num_configs; ++k) {
        if (fs->configs[k].cfg.group_id == group_id && fs->configs[k].cfg.tree == tree) {
            *out  = fs->configs[k];
            found = 1;
        }
    }
    pthread_mutex_unlock(&fs->lock);
    return found;
}

/* Whether a GROUP_TEARDOWN came for the group's part. */
static int fake_torn_down(fake_sim_t *fs, uint32_t job_id, uint32_t group_id, uint32_t tree)
{
    unsigned k;
    int found = 0;

    fake_settle(fs);
    pthread_mutex_lock(&fs->lock);
    for (k = 0; k < fs->num_teardowns; ++k) {
        found |= fs->teardowns[k].job_id == job_id && fs->teardowns[k].group_id == group_id &&
                 fs->teardowns[k].tree == tree;
    }
    pthread_mutex_unlock(&fs->lock);
    return found;
}

static void fake_answer(fake_sim_t *fs, int32_t llt, int32_t sat, int status_only)
{
    pthread_mutex_lock(&fs->lock);
    fs->llt_answer  = llt;
    fs->sat_answer  = sat;
    fs->status_only = status_only;
    pthread_mutex_unlock(&fs->lock);
}

/* Closes the manager's end (the fake then ends) and checks what it saw. */
static void fake_stop(aggmgr_t *am, fake_sim_t *fs)
{
    if (am->sims[0].fd == fs->fd) {
        am->sims[0].fd = -1;
    }
    close(fs->fd);
    assert_int_equal(pthread_join(fs->thread, NULL), 0);
    while (fs->num_held > 0) {
        free(fs->held[--fs->num_held].body);
    }
    close(fs->peer);
    pthread_mutex_destroy(&fs->lock);
    if (fs->errors != 0) {
        fail_msg("the fake switchsim saw %u bad messages, the first: %s", fs->errors,
                 fs->error);
    }
    free(fs);
}

/* ---- the manager ---------------------------------------------------------- */

static aggmgr_t *make_mgr(int leaves, int spines, int hosts)
{
    aggmgr_t *am = calloc(1, sizeof(*am));

    assert_non_null(am);
    agg_conf_init(&am->conf);
    assert_int_equal(aggmgr_topo_fat_tree(leaves, spines, hosts, &am->topo), AGG_OK);
    am->ans     = calloc((size_t)am->topo.num_nodes, sizeof(*am->ans));
    am->ca_busy = calloc((size_t)am->topo.num_cas, 1);
    am->listen_fd = -1;
    aggmgr_resources_init(am);
    return am;
}

static void free_mgr(aggmgr_t *am)
{
    aggmgr_server_close(am); /* destroys every job */
    aggmgr_topo_free(&am->topo);
    free(am->ans);
    free(am->ca_busy);
    free(am);
}

/* With a fake switchsim: every part it configured is torn down by the end. */
static void free_mgr_sim(aggmgr_t *am, fake_sim_t *fs)
{
    aggmgr_server_close(am); /* destroys every job, tearing its groups down */
    assert_int_equal(fake_live(fs), 0);
    fake_stop(am, fs);
    aggmgr_topo_free(&am->topo);
    free(am->ans);
    free(am->ca_busy);
    free(am);
}

static agg_msg_job_create_t request(uint32_t world, uint32_t osts)
{
    agg_msg_job_create_t req = {.world_size = world, .quota_osts = osts, .osts_per_group = 8,
                                .num_hosts = 1};

    snprintf(req.host, sizeof(req.host), "test");
    return req;
}

/*
 * Every rank on host "test", which the fat tree does not name: ranks take
 * free adapters. `host` non-NULL puts them all on that host instead.
 */
static agg_status_t job_create_on(aggmgr_t *am, int fd, const agg_msg_job_create_t *req,
                                  const char *host, agg_msg_job_create_reply_t *rep)
{
    char hosts[AGG_WIRE_NAME_LEN] = "";
    uint32_t *host_of = calloc(req->world_size + 1u, sizeof(*host_of));
    agg_status_t st;

    assert_non_null(host_of);
    assert_int_equal(req->num_hosts, 1);
    snprintf(hosts, sizeof(hosts), "%s", host != NULL ? host : req->host);
    st = aggmgr_job_create(am, fd, req, hosts, host_of, rep);
    free(host_of);
    return st;
}

static agg_status_t job_create(aggmgr_t *am, int fd, const agg_msg_job_create_t *req,
                               agg_msg_job_create_reply_t *rep)
{
    return job_create_on(am, fd, req, NULL, rep);
}

static aggmgr_job_t *find_job(const aggmgr_t *am, uint32_t id)
{
    aggmgr_job_t *job;

    for (job = am->jobs; job != NULL; job = job->next) {
        if (job->id == id) {
            return job;
        }
    }
    fail_msg("no job %u", id);
    return NULL;
}

static agg_msg_group_create_t group_req(uint32_t job_id, uint32_t n, uint32_t osts,
                                        uint32_t flags)
{
    agg_msg_group_create_t req = {.job_id = job_id, .num_members = n, .osts = osts,
                                  .flags = flags, .sat_osts = 2, .sat_payload = 65536};

    return req;
}

typedef struct created {
    int             done;
    agg_status_t    status;
    aggmgr_group_t *group;
} created_t;

static void created_cb(aggmgr_t *am, aggmgr_op_t *op)
{
    created_t *c = op->arg;

    (void)am;
    c->done++;
    c->status = op->status;
    c->group  = op->result;
}

/*
 * What a client's GROUP_CREATE gets: aggmgr starts the group, the fake
 * switchsim answers, aggmgr_sims_settle hands the answers over the way the
 * event loop does; the operation ends exactly once.
 */
static agg_status_t group_create_req(aggmgr_t *am, int fd, const agg_msg_group_create_t *req,
                                     const uint32_t *ranks, aggmgr_group_t **g)
{
    created_t c = {0};
    aggmgr_op_t *op = aggmgr_op_new(created_cb, &c);
    agg_status_t st;

    assert_non_null(op);
    *g = NULL;
    st = aggmgr_group_create(am, fd, req, ranks, op);
    if (st != AGG_INPROGRESS) {
        aggmgr_op_free(op);
        assert_int_not_equal(st, AGG_OK);
        return st;
    }
    assert_int_equal(aggmgr_sims_settle(am, 10000), 0);
    assert_int_equal(c.done, 1);
    assert_null(am->ops);
    if (c.status == AGG_OK) {
        assert_non_null(c.group);
        assert_null(c.group->op);
        *g = c.group;
    }
    return c.status;
}

static agg_status_t group_create(aggmgr_t *am, int fd, uint32_t job_id, const uint32_t *ranks,
                                 uint32_t n, uint32_t flags, aggmgr_group_t **g)
{
    agg_msg_group_create_t req = group_req(job_id, n, 0, flags);

    return group_create_req(am, fd, &req, ranks, g);
}

static uint32_t used_osts(const aggmgr_t *am)
{
    uint32_t sum = 0;
    int i;

    for (i = 0; i < am->topo.num_nodes; ++i) {
        sum += am->ans[i].osts_used;
    }
    return sum;
}

static uint32_t used_flows(const aggmgr_t *am)
{
    uint32_t sum = 0;
    int i;

    for (i = 0; i < am->topo.num_nodes; ++i) {
        sum += am->ans[i].sat_flows_used;
    }
    return sum;
}

static int node_by_desc(const aggmgr_t *am, const char *desc)
{
    int i;

    for (i = 0; i < am->topo.num_nodes; ++i) {
        if (strcmp(am->topo.nodes[i].desc, desc) == 0) {
            return i;
        }
    }
    fail_msg("no node '%s'", desc);
    return -1;
}

/*
 * Every count of every node is what the jobs and groups hold: each job's
 * quota on each node of its tree, a SAT flow on each node of each SAT part;
 * each adapter marked busy belongs to exactly one job.
 */
static void check_counts(const aggmgr_t *am)
{
    uint32_t *osts   = calloc((size_t)am->topo.num_nodes, sizeof(*osts));
    uint32_t *groups = calloc((size_t)am->topo.num_nodes, sizeof(*groups));
    uint32_t *flows  = calloc((size_t)am->topo.num_nodes, sizeof(*flows));
    uint8_t *busy    = calloc((size_t)am->topo.num_cas, 1);
    const aggmgr_job_t *job;
    const aggmgr_group_t *g;
    uint32_t n, gosts, r, k;
    int i;

    assert_true(osts && groups && flows && busy);
    for (job = am->jobs; job != NULL; job = job->next) {
        for (i = 0; i < job->tree.num_nodes; ++i) {
            osts[job->tree.nodes[i].topo_node] += job->osts;
            groups[job->tree.nodes[i].topo_node] += job->max_groups;
        }
        for (k = 0; k < job->num_cas; ++k) {
            if (busy[job->held[k]]) {
                fail_msg("adapter %d is held by two jobs (job %u)", job->held[k], job->id);
            }
            busy[job->held[k]] = 1;
        }
        for (r = 0; r < job->world_size; ++r) {
            for (k = 0; k < job->num_cas && job->held[k] != job->cas[r]; ++k) {
            }
            if (k == job->num_cas) {
                fail_msg("job %u: rank %u on adapter %d, which the job does not hold",
                         job->id, r, job->cas[r]);
            }
        }
        n     = 0;
        gosts = 0;
        for (g = job->groups; g != NULL; g = g->next) {
            n++;
            gosts += g->llt.osts;
            assert_int_equal(g->llt.status, AGG_OK);
            if (g->sat.status == AGG_OK) {
                for (i = 0; i < g->sat.tree.num_nodes; ++i) {
                    flows[g->sat.tree.nodes[i].topo_node]++;
                }
            }
        }
        assert_int_equal(job->num_groups, n);
        assert_int_equal(job->osts_used, gosts);
        assert_true(job->osts_used <= job->osts);
        assert_true(job->num_groups <= job->max_groups);
    }
    for (i = 0; i < am->topo.num_nodes; ++i) {
        assert_int_equal(am->ans[i].osts_used, osts[i]);
        assert_int_equal(am->ans[i].groups_used, groups[i]);
        assert_int_equal(am->ans[i].sat_flows_used, flows[i]);
        assert_true(am->ans[i].sat_flows_used <= am->ans[i].sat_flows_cap);
        assert_true(am->ans[i].osts_used <= am->ans[i].osts_cap);
    }
    for (i = 0; i < am->topo.num_cas; ++i) {
        assert_int_equal(am->ca_busy[i], busy[i]);
    }
    free(osts);
    free(groups);
    free(flows);
    free(busy);
}

/*
 * What the fake received for a group's part is the part: its tree, in
 * order, each member on the leaf switch its adapter is cabled to.
 */
static void check_config(const aggmgr_t *am, fake_sim_t *fs, const aggmgr_job_t *job,
                         const aggmgr_group_t *g, const aggmgr_gtree_t *gt, uint32_t tree,
                         const uint32_t *ranks)
{
    fake_config_t c;
    agg_wire_endpoint_t ep;
    uint32_t i;

    assert_true(fake_config(fs, g->id, tree, &c));
    assert_int_equal(c.answer, AGG_OK);
    assert_int_equal(c.cfg.job_id, job->id);
    assert_int_equal(c.cfg.tree, tree);
    assert_int_equal(c.cfg.num_members, g->num_members);
    assert_int_equal(c.cfg.num_nodes, (uint32_t)gt->tree.num_nodes);
    assert_in_range(c.cfg.num_nodes, 1, FAKE_MAX_NODES);
    assert_in_range(c.cfg.num_members, 1, FAKE_MAX_MEMBERS);
    assert_int_equal(c.cfg.osts, gt->osts);
    assert_int_equal(c.cfg.payload, gt->payload);
    for (i = 0; i < c.cfg.num_nodes; ++i) {
        assert_true(c.guid[i] == am->topo.nodes[gt->tree.nodes[i].topo_node].guid);
        assert_int_equal(c.parent[i], gt->tree.nodes[i].parent);
    }
    for (i = 0; i < g->num_members; ++i) {
        int sw = am->topo.ca_switch[job->cas[ranks[i]]];
        assert_true(c.guid[c.leaf[i]] == am->topo.nodes[sw].guid);
    }
    /* one switchsim, one part, all members on its host: one endpoint */
    fake_endpoint(&ep, g->id, tree);
    assert_int_equal(gt->num_parts, 1);
    assert_int_equal(gt->num_eps, 1);
    assert_int_equal(gt->parts[0].here.transport, ep.transport);
    assert_int_equal(gt->parts[0].here.length, ep.length);
    assert_memory_equal(gt->parts[0].here.addr, ep.addr, ep.length);
}

/* ---- jobs ----------------------------------------------------------------- */

static void test_default_quota(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    aggmgr_job_t *job;
    int i, k, in_tree;

    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    /* 20 % of a node's 1024 OSTs and 256 groups; the node's 4096-byte payload */
    assert_int_equal(rep.status, AGG_OK);
    assert_int_equal(rep.osts, 204);
    assert_int_equal(rep.max_groups, 51);
    assert_int_equal(rep.payload_per_ost, 4096);
    /* 4 hosts on 2 leaves under one spine: 3 switches */
    assert_int_equal(rep.tree_depth, 2);
    assert_int_equal(rep.tree_nodes, 3);
    assert_int_equal(rep.sat_tree_id, 0); /* no SAT asked for */
    assert_int_equal(used_osts(am), 3 * 204);
    /* reserved on every node of the tree and nowhere else */
    job = find_job(am, rep.job_id);
    assert_int_equal(job->tree.num_nodes, 3);
    assert_true(rep.root_guid == am->topo.nodes[job->tree.nodes[0].topo_node].guid);
    for (i = 0; i < am->topo.num_nodes; ++i) {
        for (k = 0, in_tree = 0; k < job->tree.num_nodes; ++k) {
            in_tree |= job->tree.nodes[k].topo_node == i;
        }
        assert_int_equal(am->ans[i].osts_used, in_tree ? 204 : 0);
        assert_int_equal(am->ans[i].groups_used, in_tree ? 51 : 0);
    }
    /* the 4 packed ranks hold the 4 first adapters */
    for (i = 0; i < am->topo.num_cas; ++i) {
        assert_int_equal(am->ca_busy[i], i < 4);
    }
    check_counts(am);
    assert_int_equal(aggmgr_job_destroy(am, rep.job_id), AGG_OK);
    for (i = 0; i < am->topo.num_nodes; ++i) {
        assert_int_equal(am->ans[i].osts_used, 0);
        assert_int_equal(am->ans[i].groups_used, 0);
        assert_int_equal(am->ans[i].trees_rooted, 0);
    }
    for (i = 0; i < am->topo.num_cas; ++i) {
        assert_int_equal(am->ca_busy[i], 0);
    }
    assert_int_equal(am->num_jobs, 0);
    assert_int_equal(aggmgr_job_destroy(am, rep.job_id), AGG_ERR_NO_JOB);
    free_mgr(am);
}

static void test_hosts_not_shared_roots_spread(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t a = {0}, b = {0}, c = {0};
    const aggmgr_job_t *ja, *jc;
    int a_cas[4];
    uint32_t r, k;

    assert_int_equal(job_create(am, 5, &req, &a), AGG_OK);
    assert_int_equal(job_create(am, 6, &req, &b), AGG_OK);
    assert_int_not_equal(a.job_id, b.job_id);
    assert_int_not_equal(a.tree_id, b.tree_id);
    assert_true(a.root_guid != b.root_guid); /* one tree per spine */
    check_counts(am); /* no adapter in both */
    ja = find_job(am, a.job_id);
    memcpy(a_cas, ja->cas, sizeof(a_cas));
    /* all 8 hosts are taken now */
    req.world_size = 1;
    assert_int_equal(job_create(am, 7, &req, &c), AGG_ERR_NO_RESOURCE);
    assert_int_equal(am->num_jobs, 2);
    check_counts(am);
    /* the owner of job a goes away: its hosts come back */
    aggmgr_conn_release(am, 5);
    assert_int_equal(am->num_jobs, 1);
    for (r = 0; r < 4; ++r) {
        assert_int_equal(am->ca_busy[a_cas[r]], 0);
    }
    assert_int_equal(job_create(am, 7, &req, &c), AGG_OK);
    jc = find_job(am, c.job_id);
    for (k = 0, r = 0; r < 4; ++r) {
        k += jc->cas[0] == a_cas[r];
    }
    assert_int_equal(k, 1); /* one of job a's adapters: the only free ones */
    check_counts(am);
    free_mgr(am);
}

static void test_quota_exhaustion(void **state)
{
    aggmgr_t *am = make_mgr(1, 1, 8);
    agg_msg_job_create_t req = request(2, 600);
    agg_msg_job_create_reply_t a = {0}, b = {0};

    assert_int_equal(job_create(am, 5, &req, &a), AGG_OK);
    assert_int_equal(a.tree_nodes, 1); /* both hosts under the one leaf */
    assert_int_equal(a.osts, 600);
    /* 600 more do not fit in the leaf's remaining 424 */
    assert_int_equal(job_create(am, 6, &req, &b), AGG_ERR_NO_RESOURCE);
    check_counts(am); /* the refused job took nothing, its adapters neither */
    assert_int_equal(am->num_jobs, 1);
    req.quota_osts = 424;
    assert_int_equal(job_create(am, 6, &req, &b), AGG_OK);
    assert_int_equal(used_osts(am), 1024);
    req.quota_osts = 1;
    assert_int_equal(job_create(am, 7, &req, &b), AGG_ERR_NO_RESOURCE);
    assert_int_equal(aggmgr_job_destroy(am, a.job_id), AGG_OK);
    assert_int_equal(used_osts(am), 424);
    req.quota_osts = 424;
    assert_int_equal(job_create(am, 6, &req, &a), AGG_OK);
    assert_int_equal(aggmgr_job_destroy(am, a.job_id), AGG_OK);
    assert_int_equal(aggmgr_job_destroy(am, b.job_id), AGG_OK);
    assert_int_equal(used_osts(am), 0);
    check_counts(am);
    free_mgr(am);
}

static void test_bad_requests(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    agg_msg_job_create_t req = request(5, 0);
    agg_msg_job_create_reply_t rep = {0};
    agg_msg_group_create_t greq;
    aggmgr_group_t *g = NULL;
    uint32_t ranks[3] = {0, 1, 2};
    fake_sim_t *fs;

    /* more hosts than the fabric has */
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_ERR_NO_RESOURCE);
    req.world_size = 0;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_ERR_NO_RESOURCE);
    /* a payload larger than the nodes offer, or not a multiple of 8 */
    req = request(2, 0);
    req.quota_payload_per_ost = 8192;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_ERR_QUOTA);
    req.quota_payload_per_ost = 100;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_ERR_QUOTA);
    assert_int_equal(am->num_jobs, 0);
    check_counts(am);
    req.quota_payload_per_ost = 0;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    /* groups need a switchsim, a known job and members of the job */
    greq = group_req(rep.job_id, 2, 0, 0);
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_NO_SWITCHSIM);
    fs = fake_start(am);
    greq.job_id = 999;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_NO_JOB);
    greq.job_id = rep.job_id;
    ranks[1] = 7;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    ranks[1] = 0;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    ranks[1] = 1;
    greq.num_members = 0;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    greq.num_members = 3; /* the job has 2 ranks */
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    greq.num_members = 2;
    /* a group asking for more OSTs than the job holds */
    greq.osts = 100000;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_QUOTA);
    /* SAT chunks that are no size at all, not a multiple of 8, or too large */
    greq = group_req(rep.job_id, 2, 0, AGG_GROUP_F_SAT);
    greq.sat_payload = 0;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    greq.sat_payload = 4100;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    greq.sat_payload = (64u << 20) + 8;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    greq.sat_payload = 65536;
    greq.sat_osts    = 65;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g), AGG_ERR_INVALID_PARAM);
    /* none of them reached switchsim or took anything */
    assert_null(g);
    assert_int_equal(fake_count(fs, AGG_TREE_LLT) + fake_count(fs, AGG_TREE_SAT), 0);
    assert_int_equal(find_job(am, rep.job_id)->num_groups, 0);
    check_counts(am);
    /* destroying what does not exist */
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, 12345), AGG_ERR_GROUP_ID);
    assert_int_equal(aggmgr_group_destroy(am, 999, 1), AGG_ERR_NO_JOB);
    free_mgr_sim(am, fs);
}

static void test_max_jobs(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 4);
    agg_msg_job_create_t req = request(1, 1);
    agg_msg_job_create_reply_t rep;
    char err[256];
    int i;

    assert_int_equal(agg_conf_set(&am->conf, AGG_CONF_AM_MAX_JOBS, "3", AGG_CONF_SRC_CMDLINE,
                                  "test", err, sizeof(err)), AGG_OK);
    for (i = 0; i < 3; ++i) {
        assert_int_equal(job_create(am, 10 + i, &req, &rep), AGG_OK);
    }
    assert_int_equal(job_create(am, 20, &req, &rep), AGG_ERR_NO_RESOURCE);
    assert_int_equal(am->num_jobs, 3);
    check_counts(am);
    assert_int_equal(aggmgr_job_destroy(am, rep.job_id), AGG_OK);
    assert_int_equal(job_create(am, 20, &req, &rep), AGG_OK);
    free_mgr(am);
}

/* Ranks of one host share its adapter: the job holds it once. */
static void test_ranks_share_host_adapter(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    agg_msg_job_create_t req = request(3, 0);
    agg_msg_job_create_reply_t rep = {0}, other = {0};
    aggmgr_job_t *job;
    int ca = 2; /* host3, under leaf2 */
    uint32_t r;

    assert_int_equal(job_create_on(am, 5, &req, "host3", &rep), AGG_OK);
    job = find_job(am, rep.job_id);
    for (r = 0; r < 3; ++r) {
        assert_int_equal(job->cas[r], ca);
    }
    assert_int_equal(job->num_cas, 1);
    assert_int_equal(rep.tree_nodes, 1);
    assert_true(rep.root_guid == am->topo.nodes[node_by_desc(am, "leaf2")].guid);
    check_counts(am);
    /* host3's adapter is the job's: another job on host3 is refused */
    req.world_size = 1;
    assert_int_equal(job_create_on(am, 6, &req, "host3", &other), AGG_ERR_NO_RESOURCE);
    assert_int_equal(aggmgr_job_destroy(am, rep.job_id), AGG_OK);
    assert_int_equal(am->ca_busy[ca], 0);
    assert_int_equal(job_create_on(am, 6, &req, "host3", &other), AGG_OK);
    check_counts(am);
    free_mgr(am);
}

static void test_job_sat(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    agg_msg_job_create_t req = request(2, 0);
    agg_msg_job_create_reply_t a = {0}, b = {0}, c = {0};

    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &a), AGG_OK);
    assert_int_not_equal(a.sat_tree_id, 0);
    assert_int_not_equal(a.sat_tree_id, a.tree_id);
    assert_int_equal(a.sat_flows, 2); /* an_sat_flows by default */
    assert_int_equal(find_job(am, a.job_id)->sat_tree_id, a.sat_tree_id);
    req.flags = 0;
    assert_int_equal(job_create(am, 6, &req, &b), AGG_OK);
    assert_int_equal(b.sat_tree_id, 0);
    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 7, &req, &c), AGG_OK);
    /* every tree ID is its own */
    assert_int_not_equal(c.sat_tree_id, 0);
    assert_int_not_equal(c.sat_tree_id, c.tree_id);
    assert_int_not_equal(c.sat_tree_id, a.sat_tree_id);
    assert_int_not_equal(c.sat_tree_id, a.tree_id);
    assert_int_not_equal(c.sat_tree_id, b.tree_id);
    assert_int_not_equal(c.tree_id, a.sat_tree_id);
    assert_int_not_equal(b.tree_id, a.sat_tree_id);
    /* a SAT job reserves the same LLT quota, no more */
    assert_int_equal(a.osts, b.osts);
    check_counts(am);
    free_mgr(am);
}

/* ---- groups --------------------------------------------------------------- */

static void test_group_llt(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    agg_msg_group_create_t greq;
    uint32_t all[4] = {0, 1, 2, 3}, one_leaf[2] = {3, 2}, across[2] = {3, 0};
    aggmgr_group_t *g1, *g2, *g3;
    aggmgr_job_t *job;
    fake_config_t c;
    uint32_t g1_id;

    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    job = find_job(am, rep.job_id);
    greq = group_req(rep.job_id, 4, 16, AGG_GROUP_F_REPRODUCIBLE);
    assert_int_equal(group_create_req(am, 5, &greq, all, &g1), AGG_OK);
    assert_non_null(g1);
    assert_int_equal(g1->num_members, 4);
    assert_int_equal(g1->llt.status, AGG_OK);
    assert_int_equal(g1->llt.tree_id, rep.tree_id);
    assert_int_equal(g1->llt.osts, 16);
    assert_int_equal(g1->llt.payload, 4096);
    assert_int_equal(g1->llt.tree.num_nodes, 3);
    assert_int_not_equal(g1->sat.status, AGG_OK); /* not asked for */
    check_config(am, fs, job, g1, &g1->llt, AGG_TREE_LLT, all);
    assert_true(fake_config(fs, g1->id, AGG_TREE_LLT, &c));
    assert_int_equal(c.cfg.flags, AGG_GROUP_F_REPRODUCIBLE);
    assert_true(c.guid[0] == rep.root_guid);
    assert_int_equal(fake_count(fs, AGG_TREE_SAT), 0);
    assert_int_equal(job->osts_used, 16);
    check_counts(am);

    /* two members under leaf2, given in reverse: a one-switch tree; the job's 8 OSTs */
    assert_int_equal(group_create(am, 6, rep.job_id, one_leaf, 2, 0, &g2), AGG_OK);
    assert_int_equal(g2->llt.tree.num_nodes, 1);
    assert_int_equal(g2->llt.osts, 8);
    check_config(am, fs, job, g2, &g2->llt, AGG_TREE_LLT, one_leaf);
    assert_true(fake_config(fs, g2->id, AGG_TREE_LLT, &c));
    assert_true(c.guid[0] == am->topo.nodes[node_by_desc(am, "leaf2")].guid);
    assert_int_equal(c.cfg.flags, 0);
    /* members in the order given: rank 3 under leaf2, rank 0 under leaf1 */
    assert_int_equal(group_create(am, 6, rep.job_id, across, 2, 0, &g3), AGG_OK);
    assert_int_equal(g3->llt.tree.num_nodes, 3);
    check_config(am, fs, job, g3, &g3->llt, AGG_TREE_LLT, across);
    assert_int_not_equal(g1->id, g2->id);
    assert_int_not_equal(g2->id, g3->id);
    assert_int_equal(job->num_groups, 3);
    assert_int_equal(job->osts_used, 32);
    check_counts(am);

    g1_id = g1->id;
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, g1_id), AGG_OK);
    assert_true(fake_torn_down(fs, rep.job_id, g1_id, AGG_TREE_LLT));
    assert_false(fake_torn_down(fs, rep.job_id, g1_id, AGG_TREE_SAT));
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, g1_id), AGG_ERR_GROUP_ID);
    assert_int_equal(job->osts_used, 16);
    assert_int_equal(fake_live(fs), 2);
    /* the owner of g2 and g3 goes away: its groups go, the job stays */
    aggmgr_conn_release(am, 6);
    assert_int_equal(am->num_jobs, 1);
    assert_int_equal(job->num_groups, 0);
    assert_int_equal(job->osts_used, 0);
    assert_int_equal(fake_live(fs), 0);
    check_counts(am);
    free_mgr_sim(am, fs);
}

static void test_group_quota(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(2, 20);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[2] = {0, 1};
    agg_msg_group_create_t greq;
    aggmgr_group_t *g[4];
    unsigned before;

    req.quota_max_groups = 3;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    assert_int_equal(rep.max_groups, 3);
    assert_int_equal(rep.osts, 20);
    /* 8 OSTs a group: two fit in 20, a third does not, a smaller one does */
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 2, 0, &g[0]), AGG_OK);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 2, 0, &g[1]), AGG_OK);
    before = fake_count(fs, AGG_TREE_LLT);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 2, 0, &g[2]), AGG_ERR_QUOTA);
    assert_int_equal(fake_count(fs, AGG_TREE_LLT), before);
    greq = group_req(rep.job_id, 2, 4, 0);
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g[2]), AGG_OK);
    /* three groups is the job's limit, whatever OSTs are left */
    greq.osts = 1;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g[3]), AGG_ERR_QUOTA);
    check_counts(am);
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, g[0]->id), AGG_OK);
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &g[3]), AGG_OK);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/*
 * Only a job's ranks make its groups (the request carries the job's key),
 * and only the group's connection or the job's destroys one: a client of
 * another job can touch neither. Members on another host than switchsim
 * are flagged and get its TCP data port.
 */
static void test_group_owners(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(2, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[2] = {0, 1};
    agg_msg_group_create_t greq;
    aggmgr_group_t *g = NULL, *mine = NULL;
    char hosts[2 * AGG_WIRE_NAME_LEN] = "test";
    uint32_t host_of[2] = {0, 1};
    unsigned before;

    (void)state;
    req.job_key   = 0x1234abcd5678ef00ull;
    req.num_hosts = 2;
    snprintf(hosts + AGG_WIRE_NAME_LEN, AGG_WIRE_NAME_LEN, "elsewhere");
    assert_int_equal(aggmgr_job_create(am, 5, &req, hosts, host_of, &rep), AGG_OK);
    greq = group_req(rep.job_id, 2, 0, 0);
    before = fake_count(fs, AGG_TREE_LLT);
    greq.job_key = 0x1234abcd5678ef01ull; /* one bit off */
    assert_int_equal(group_create_req(am, 7, &greq, ranks, &g), AGG_ERR_AUTH);
    assert_null(g);
    assert_int_equal(fake_count(fs, AGG_TREE_LLT), before);
    greq.job_key = req.job_key;
    assert_int_equal(group_create_req(am, 6, &greq, ranks, &mine), AGG_OK);
    /* rank 1 runs on "elsewhere": it attaches over TCP to switchsim's data port */
    assert_int_equal(mine->llt.num_eps, 2);
    assert_int_equal(mine->llt.remote[0], 0);
    assert_int_equal(mine->llt.remote[1], 1);
    assert_int_equal(mine->llt.eps[1].transport, AGG_TL_TCP);
    assert_true(strncmp((const char *)mine->llt.eps[1].addr, "127.0.0.1:7126/g", 16) == 0);
    /* another connection may destroy neither the group nor the job */
    assert_int_equal(aggmgr_group_owned(am, rep.job_id, mine->id, 7), AGG_ERR_AUTH);
    assert_int_equal(aggmgr_job_owned(am, rep.job_id, 7), AGG_ERR_AUTH);
    assert_int_equal(aggmgr_group_owned(am, rep.job_id, mine->id, 6), AGG_OK);
    assert_int_equal(aggmgr_group_owned(am, rep.job_id, mine->id, 5), AGG_OK);
    assert_int_equal(aggmgr_group_owned(am, rep.job_id, 999, 5), AGG_ERR_GROUP_ID);
    assert_int_equal(aggmgr_job_owned(am, rep.job_id, 5), AGG_OK);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/* switchsim refusing a group's LLT part refuses the group; nothing is kept. */
static void test_group_llt_refused(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    aggmgr_group_t *g;
    aggmgr_job_t *job;

    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    job = find_job(am, rep.job_id);
    fake_answer(fs, AGG_ERR_NO_RESOURCE, AGG_OK, 0);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g),
                     AGG_ERR_NO_RESOURCE);
    fake_answer(fs, AGG_ERR_GROUP_ALLOC, AGG_OK, 1);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g),
                     AGG_ERR_GROUP_ALLOC);
    assert_int_equal(fake_count(fs, AGG_TREE_SAT), 0); /* no SAT part without an LLT one */
    assert_int_equal(job->num_groups, 0);
    assert_int_equal(job->osts_used, 0);
    assert_int_equal(used_flows(am), 0);
    check_counts(am);
    fake_answer(fs, AGG_OK, AGG_OK, 0);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->llt.status, AGG_OK);
    assert_int_equal(g->sat.status, AGG_OK);
    check_counts(am);
    free_mgr_sim(am, fs);
}

static void test_group_sat(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    agg_msg_group_create_t greq;
    aggmgr_group_t *a, *b, *c, *d;
    aggmgr_job_t *job;
    fake_config_t llt, sat;
    uint32_t i;
    int k;

    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    job = find_job(am, rep.job_id);

    greq = group_req(rep.job_id, 4, 0, AGG_GROUP_F_SAT);
    greq.sat_payload = 262144;
    greq.sat_osts    = 3;
    assert_int_equal(group_create_req(am, 5, &greq, ranks, &a), AGG_OK);
    assert_int_equal(a->llt.status, AGG_OK);
    assert_int_equal(a->sat.status, AGG_OK);
    assert_int_equal(a->sat.tree_id, rep.sat_tree_id);
    assert_int_equal(a->llt.tree_id, rep.tree_id);
    assert_int_equal(a->sat.payload, 262144);
    assert_int_equal(a->sat.osts, 3);
    check_config(am, fs, job, a, &a->llt, AGG_TREE_LLT, ranks);
    check_config(am, fs, job, a, &a->sat, AGG_TREE_SAT, ranks);
    /* the SAT part as switchsim was told: the SAT tree, the chunk size and window asked */
    assert_true(fake_config(fs, a->id, AGG_TREE_SAT, &sat));
    assert_int_equal(sat.cfg.tree, AGG_TREE_SAT);
    assert_int_equal(sat.cfg.payload, 262144);
    assert_int_equal(sat.cfg.osts, 3);
    assert_int_equal(sat.cfg.flags, 0); /* the SAT bit is GROUP_CREATE's, not switchsim's */
    /* on the same switches as the LLT part */
    assert_true(fake_config(fs, a->id, AGG_TREE_LLT, &llt));
    assert_int_equal(llt.cfg.tree, AGG_TREE_LLT);
    assert_int_equal(llt.cfg.payload, 4096);
    assert_int_equal(sat.cfg.num_nodes, llt.cfg.num_nodes);
    for (i = 0; i < sat.cfg.num_nodes; ++i) {
        assert_true(sat.guid[i] == llt.guid[i]);
    }
    assert_memory_not_equal(a->sat.parts[0].here.addr, a->llt.parts[0].here.addr,
                            a->llt.parts[0].here.length);
    /* a SAT flow on each of the 3 switches of its tree */
    assert_int_equal(a->sat.tree.num_nodes, 3);
    for (k = 0; k < a->sat.tree.num_nodes; ++k) {
        assert_int_equal(am->ans[a->sat.tree.nodes[k].topo_node].sat_flows_used, 1);
    }
    assert_int_equal(used_flows(am), 3);
    check_counts(am);

    /* the second SAT group on those switches: an_sat_flows is 2 */
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &b), AGG_OK);
    assert_int_equal(b->sat.status, AGG_OK);
    assert_int_equal(b->sat.osts, 2);
    assert_int_equal(b->sat.payload, 65536);
    check_config(am, fs, job, b, &b->sat, AGG_TREE_SAT, ranks);
    assert_int_equal(used_flows(am), 6);
    assert_int_equal(fake_count(fs, AGG_TREE_SAT), 2);

    /* the third gets no SAT part, and keeps a working LLT one */
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &c), AGG_OK);
    assert_int_equal(c->sat.status, AGG_ERR_NO_RESOURCE);
    assert_int_equal(c->llt.status, AGG_OK);
    check_config(am, fs, job, c, &c->llt, AGG_TREE_LLT, ranks);
    assert_int_equal(fake_count(fs, AGG_TREE_SAT), 2); /* not even asked */
    assert_false(fake_config(fs, c->id, AGG_TREE_SAT, &sat));
    assert_int_equal(used_flows(am), 6);
    assert_int_equal(job->num_groups, 3);
    check_counts(am);

    /* destroying a SAT group tears down both parts and frees its flows */
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, a->id), AGG_OK);
    assert_int_equal(used_flows(am), 3);
    check_counts(am);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &d), AGG_OK);
    assert_int_equal(d->sat.status, AGG_OK);
    check_config(am, fs, job, d, &d->sat, AGG_TREE_SAT, ranks);
    assert_int_equal(used_flows(am), 6);
    /* destroying the group without a SAT part frees none */
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, c->id), AGG_OK);
    assert_int_equal(used_flows(am), 6);
    check_counts(am);
    assert_int_equal(fake_live(fs), 4); /* b and d, both parts */
    free_mgr_sim(am, fs);
}

/* Which teardowns a destroyed SAT group sends (kept apart: ids are read after). */
static void test_group_sat_teardown(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(2, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[2] = {0, 1}, sat_id, llt_id;
    aggmgr_group_t *g;

    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 2, AGG_GROUP_F_SAT, &g), AGG_OK);
    sat_id = g->id;
    assert_int_equal(g->sat.status, AGG_OK);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 2, 0, &g), AGG_OK);
    llt_id = g->id;
    assert_int_equal(fake_live(fs), 3);
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, sat_id), AGG_OK);
    assert_true(fake_torn_down(fs, rep.job_id, sat_id, AGG_TREE_LLT));
    assert_true(fake_torn_down(fs, rep.job_id, sat_id, AGG_TREE_SAT));
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, llt_id), AGG_OK);
    assert_true(fake_torn_down(fs, rep.job_id, llt_id, AGG_TREE_LLT));
    assert_false(fake_torn_down(fs, rep.job_id, llt_id, AGG_TREE_SAT));
    assert_int_equal(fake_live(fs), 0);
    assert_int_equal(used_flows(am), 0);
    free_mgr_sim(am, fs);
}

/* SAT flows are counted per switch: a full leaf does not stop another leaf. */
static void test_sat_flows_per_switch(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t leaf1[2] = {0, 1}, leaf2[2] = {2, 3}, across[2] = {1, 2};
    int l1 = node_by_desc(am, "leaf1"), l2 = node_by_desc(am, "leaf2");
    aggmgr_group_t *g;
    int i;

    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    for (i = 0; i < 2; ++i) {
        assert_int_equal(group_create(am, 5, rep.job_id, leaf1, 2, AGG_GROUP_F_SAT, &g),
                         AGG_OK);
        assert_int_equal(g->sat.status, AGG_OK);
        assert_int_equal(g->sat.tree.num_nodes, 1);
    }
    assert_int_equal(am->ans[l1].sat_flows_used, 2);
    assert_int_equal(used_flows(am), 2); /* leaf1 only, not the spine */
    assert_int_equal(group_create(am, 5, rep.job_id, leaf1, 2, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->sat.status, AGG_ERR_NO_RESOURCE);
    assert_int_equal(group_create(am, 5, rep.job_id, leaf2, 2, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->sat.status, AGG_OK);
    assert_int_equal(am->ans[l2].sat_flows_used, 1);
    /* across both leaves: leaf1 is full, so no SAT part, and nothing taken elsewhere */
    assert_int_equal(group_create(am, 5, rep.job_id, across, 2, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->sat.status, AGG_ERR_NO_RESOURCE);
    assert_int_equal(g->llt.status, AGG_OK);
    assert_int_equal(am->ans[l2].sat_flows_used, 1);
    assert_int_equal(used_flows(am), 3);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/* A job without a SAT tree: a SAT group gets its LLT part only. */
static void test_group_sat_no_sat_tree(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(2, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[2] = {0, 1};
    aggmgr_group_t *g;

    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    assert_int_equal(rep.sat_tree_id, 0);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 2, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->llt.status, AGG_OK);
    assert_int_equal(g->sat.status, AGG_ERR_SAT_UNAVAILABLE);
    assert_int_equal(fake_count(fs, AGG_TREE_SAT), 0);
    assert_int_equal(used_flows(am), 0);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/* switchsim refusing the SAT part: the group stands on its LLT part, no flow is kept. */
static void test_group_sat_refused(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    aggmgr_group_t *g, *h;

    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    fake_answer(fs, AGG_OK, AGG_ERR_NO_RESOURCE, 1); /* a bare status */
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->llt.status, AGG_OK);
    assert_int_equal(g->sat.status, AGG_ERR_NO_RESOURCE);
    assert_int_equal(used_flows(am), 0);
    fake_answer(fs, AGG_OK, AGG_ERR_GROUP_ALLOC, 0); /* a full reply with an error */
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &h), AGG_OK);
    assert_int_equal(h->sat.status, AGG_ERR_GROUP_ALLOC);
    assert_int_equal(used_flows(am), 0);
    assert_int_equal(fake_live(fs), 2); /* the two LLT parts */
    check_counts(am);
    /* the refused parts are not torn down (the fake fails on that) */
    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, g->id), AGG_OK);
    fake_answer(fs, AGG_OK, AGG_OK, 0);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->sat.status, AGG_OK);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/* switchsim went away: its groups are kept for am_sim_grace_ms, then gone, their flows
 * and OSTs back. */
static void test_sim_lost(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    aggmgr_group_t *g;
    aggmgr_job_t *job;
    int i;

    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    job = find_job(am, rep.job_id);
    for (i = 0; i < 3; ++i) {
        assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g),
                         AGG_OK);
    }
    assert_int_equal(used_flows(am), 2 * 3);
    aggmgr_sim_lost(am, 0);
    assert_int_equal(am->sims[0].fd, -1);
    /* its connection closed: the groups are kept am_sim_grace_ms for it to come
       back, its switches take no new group meanwhile */
    assert_true(am->sims[0].away_until_ms != 0);
    assert_int_equal(job->num_groups, 3);
    assert_int_equal(used_flows(am), 2 * 3);
    check_counts(am);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, 0, &g), AGG_ERR_NO_SWITCHSIM);
    aggmgr_sims_away_expire(am); /* not yet */
    assert_int_equal(job->num_groups, 3);
    am->sims[0].away_until_ms = 1; /* the grace is up */
    aggmgr_sims_away_expire(am);
    assert_int_equal(am->sims[0].away_until_ms, 0);
    assert_int_equal(job->num_groups, 0);
    assert_int_equal(job->osts_used, 0);
    assert_int_equal(used_flows(am), 0);
    assert_int_equal(am->num_jobs, 1); /* the job keeps its tree and quota */
    check_counts(am);
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, 0, &g), AGG_ERR_NO_SWITCHSIM);
    fake_stop(am, fs);
    free_mgr(am);
}

/*
 * A link between two switchsims broke: the groups across it go, their parts
 * torn down and their resources back, and the job makes new ones. (One
 * switchsim here: every group is "across" it and itself.)
 */
static void test_groups_dropped_across(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    aggmgr_group_t *g;
    aggmgr_job_t *job;
    char list[64];
    int i;

    (void)state;
    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    job = find_job(am, rep.job_id);
    for (i = 0; i < 2; ++i) {
        assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g),
                         AGG_OK);
    }
    /* counted, not dropped */
    assert_int_equal(aggmgr_groups_across(am, 0, 0, 0, list, sizeof(list)), 2);
    assert_int_equal(job->num_groups, 2);
    assert_non_null(strchr(list, ','));
    assert_int_equal(aggmgr_groups_across(am, 0, 0, 1, list, sizeof(list)), 2);
    assert_int_equal(job->num_groups, 0);
    assert_int_equal(job->osts_used, 0);
    assert_int_equal(used_flows(am), 0);
    check_counts(am);
    assert_int_equal(fake_live(fs), 0); /* every part torn down */
    /* the switchsim stays: the job goes on with a new group */
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, 0, &g), AGG_OK);
    assert_int_equal(job->num_groups, 1);
    free_mgr_sim(am, fs);
}

/* Starts a group and comes back at once; c sees how it ends. */
static void start_group(aggmgr_t *am, int fd, uint32_t job_id, const uint32_t *ranks, uint32_t n,
                        uint32_t flags, created_t *c)
{
    agg_msg_group_create_t req = group_req(job_id, n, 0, flags);
    aggmgr_op_t *op = aggmgr_op_new(created_cb, c);

    assert_non_null(op);
    memset(c, 0, sizeof(*c));
    assert_int_equal(aggmgr_group_create(am, fd, &req, ranks, op), AGG_INPROGRESS);
}

/* Until the fake holds `n` requests (it reads them in its own thread). */
static void wait_held(fake_sim_t *fs, unsigned n)
{
    int i;

    for (i = 0; i < 5000 && fake_held(fs) < n; ++i) {
        usleep(1000);
    }
    assert_int_equal(fake_held(fs), n);
}

/*
 * aggmgr never waits on a switchsim: two groups are started while the
 * switchsim keeps its answers, both hold their quota meanwhile, and the
 * answers come newest first, each finding its own group by its txid.
 */
static void test_group_answers_any_order(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    created_t a, b;
    aggmgr_job_t *job;

    (void)state;
    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    job = find_job(am, rep.job_id);
    fake_hold(fs);
    start_group(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &a);
    start_group(am, 5, rep.job_id, ranks + 2, 2, 0, &b);
    assert_int_equal(a.done + b.done, 0);
    assert_int_equal(job->num_groups, 2); /* their quota is taken while they are laid out */
    assert_int_equal(am->num_reqs, 2);
    assert_int_equal(aggmgr_sims_settle(am, 50), -1); /* nothing answered: nothing ends */
    assert_int_equal(a.done + b.done, 0);
    wait_held(fs, 2);
    fake_release(fs, 1);
    assert_int_equal(aggmgr_sims_settle(am, 10000), 0); /* a's SAT part goes out on the way */
    assert_int_equal(a.done, 1);
    assert_int_equal(b.done, 1);
    assert_int_equal(a.status, AGG_OK);
    assert_int_equal(b.status, AGG_OK);
    assert_int_equal(a.group->sat.status, AGG_OK);
    assert_int_equal(b.group->sat.status, AGG_ERR_SAT_UNAVAILABLE);
    assert_int_equal(a.group->llt.num_eps, 1);
    assert_int_equal(b.group->num_members, 2);
    assert_int_equal(fake_live(fs), 3); /* a's LLT and SAT parts, b's LLT part */
    assert_null(am->ops);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/*
 * The group's creator goes while its switchsim lays it out: the job goes at
 * once, the answer that comes later finds no group and is undone.
 */
static void test_group_gone_while_laid_out(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    created_t a;

    (void)state;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    fake_hold(fs);
    start_group(am, 5, rep.job_id, ranks, 4, 0, &a);
    wait_held(fs, 1);
    aggmgr_conn_release(am, 5);
    assert_int_equal(am->num_jobs, 0);
    fake_release(fs, 0);
    assert_int_equal(aggmgr_sims_settle(am, 10000), 0);
    assert_int_equal(a.done, 1);
    assert_int_equal(a.status, AGG_ERR_NO_JOB);
    assert_int_equal(fake_live(fs), 0); /* laid out, then torn down */
    assert_true(fake_torn_down(fs, rep.job_id, 1, AGG_TREE_LLT));
    assert_null(am->ops);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/* The switchsim goes while it lays a group out: the group fails at once. */
static void test_group_sim_lost_while_laid_out(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    created_t a;

    (void)state;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    fake_hold(fs);
    start_group(am, 5, rep.job_id, ranks, 4, 0, &a);
    aggmgr_sim_lost(am, 0);
    assert_int_equal(a.done, 1);
    assert_int_equal(a.status, AGG_ERR_NO_SWITCHSIM);
    assert_int_equal(am->num_reqs, 0);
    assert_null(am->ops);
    assert_int_equal(find_job(am, rep.job_id)->num_groups, 0);
    check_counts(am);
    fake_stop(am, fs);
    free_mgr(am);
}

/*
 * A switchsim that does not answer in time fails the group; when its answer
 * comes after all, the part it laid out is torn down.
 */
static void test_group_sim_timeout(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    created_t a;

    (void)state;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    fake_hold(fs);
    /* past the deadline: the group fails, a teardown follows its request */
    assert_int_equal(agg_conf_set(&am->conf, AGG_CONF_AM_SIM_TIMEOUT_MS, "300",
                                  AGG_CONF_SRC_CMDLINE, "test", NULL, 0), AGG_OK);
    start_group(am, 5, rep.job_id, ranks, 4, 0, &a);
    /* the GROUP_CONFIG times out, then the GROUP_TEARDOWN sent after it */
    assert_int_equal(aggmgr_sims_settle(am, 3000), 0);
    assert_int_equal(a.done, 1);
    assert_int_equal(a.status, AGG_ERR_TIMEOUT);
    assert_int_equal(find_job(am, rep.job_id)->num_groups, 0);
    wait_held(fs, 2);
    fake_release(fs, 0); /* laid out late, then torn down; aggmgr drops both answers */
    assert_int_equal(fake_live(fs), 0);
    assert_null(am->ops);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/* ---- the group's state machine -------------------------------------------- */

/* The states a row leads to from `from`, as a bit set. */
static unsigned table_next(aggmgr_group_state_t from)
{
    unsigned set = 0;
    int ev, to;

    for (ev = 0; ev < AGGMGR_GROUP_NUM_EVENTS; ++ev) {
        to = aggmgr_group_transition(from, (aggmgr_group_event_t)ev);
        if (to >= 0) {
            assert_true(to < AGGMGR_GROUP_NUM_STATES);
            set |= 1u << to;
        }
    }
    return set;
}

/* The states reachable from `from` through the table (itself included). */
static unsigned table_reach(aggmgr_group_state_t from)
{
    unsigned seen = 1u << from, grown;
    int s;

    do {
        grown = seen;
        for (s = 0; s < AGGMGR_GROUP_NUM_STATES; ++s) {
            if (seen & (1u << s)) {
                seen |= table_next((aggmgr_group_state_t)s);
            }
        }
    } while (seen != grown);
    return seen;
}

/*
 * The table itself: every state is reached from NEW, every state can end
 * (FREED is reached from each), nothing leaves FREED, and a group a job
 * lists can always be dropped (a job that goes lets every group go).
 */
static void test_group_table(void **state)
{
    const unsigned all = (1u << AGGMGR_GROUP_NUM_STATES) - 1;
    int s, ev;

    (void)state;
    assert_int_equal(table_reach(AGGMGR_GROUP_NEW), all);
    for (s = 0; s < AGGMGR_GROUP_NUM_STATES; ++s) {
        if (!(table_reach((aggmgr_group_state_t)s) & (1u << AGGMGR_GROUP_FREED))) {
            fail_msg("a group in state %s can never be freed",
                     aggmgr_group_state_name((aggmgr_group_state_t)s));
        }
        assert_string_not_equal(aggmgr_group_state_name((aggmgr_group_state_t)s), "?");
    }
    assert_int_equal(table_next(AGGMGR_GROUP_FREED), 0);
    assert_int_equal(aggmgr_group_transition(AGGMGR_GROUP_LLT_LAYING_OUT, AGGMGR_GROUP_EV_DROP),
                     AGGMGR_GROUP_GONE);
    assert_int_equal(aggmgr_group_transition(AGGMGR_GROUP_SAT_LAYING_OUT, AGGMGR_GROUP_EV_DROP),
                     AGGMGR_GROUP_GONE);
    assert_int_equal(aggmgr_group_transition(AGGMGR_GROUP_READY, AGGMGR_GROUP_EV_DROP),
                     AGGMGR_GROUP_FREED);
    /* a failed SAT round leaves the group on its LLT; a failed LLT round ends it */
    assert_int_equal(aggmgr_group_transition(AGGMGR_GROUP_SAT_LAYING_OUT,
                                             AGGMGR_GROUP_EV_ROUND_FAILED), AGGMGR_GROUP_READY);
    assert_int_equal(aggmgr_group_transition(AGGMGR_GROUP_LLT_LAYING_OUT,
                                             AGGMGR_GROUP_EV_ROUND_FAILED), AGGMGR_GROUP_FREED);
    /* what is not in the table: a group out of its job is not dropped twice,
       nothing happens to a ready group but its end, nothing is an event */
    assert_int_equal(aggmgr_group_transition(AGGMGR_GROUP_GONE, AGGMGR_GROUP_EV_DROP), -1);
    assert_int_equal(aggmgr_group_transition(AGGMGR_GROUP_GONE, AGGMGR_GROUP_EV_ROUND_OK), -1);
    assert_int_equal(table_next(AGGMGR_GROUP_READY), 1u << AGGMGR_GROUP_FREED);
    for (s = 0; s < AGGMGR_GROUP_NUM_STATES; ++s) {
        assert_int_equal(aggmgr_group_transition((aggmgr_group_state_t)s, AGGMGR_GROUP_EV_NONE),
                         -1);
    }
    for (ev = 0; ev < AGGMGR_GROUP_NUM_EVENTS; ++ev) {
        assert_string_not_equal(aggmgr_group_event_name((aggmgr_group_event_t)ev), "?");
    }
}

/*
 * A SAT group through its states: LLT parts out, SAT parts out, dropped
 * while they are (GONE: out of its job, its quota and flows back at once),
 * then its last answer is undone and its creator hears why. An event a
 * state has no row for is refused and changes nothing.
 */
static void test_group_states(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    aggmgr_group_t *g;
    aggmgr_job_t *job;
    unsigned configs;
    uint32_t gid;
    created_t a;

    (void)state;
    req.flags = AGG_JOB_F_SAT;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    job = find_job(am, rep.job_id);
    fake_hold(fs);
    start_group(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &a);
    g = job->groups;
    assert_non_null(g);
    gid = g->id;
    assert_int_equal(g->state, AGGMGR_GROUP_LLT_LAYING_OUT);
    assert_int_equal(g->pending, 1);
    /* started once; a round ends with its own answers, not from outside */
    assert_int_equal(aggmgr_group_event(am, g, AGGMGR_GROUP_EV_START, AGG_OK),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_group_event(am, g, AGGMGR_GROUP_EV_ROUND_OK, AGG_OK),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_group_event(am, g, AGGMGR_GROUP_EV_CONFIGURED, AGG_OK),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(g->state, AGGMGR_GROUP_LLT_LAYING_OUT);
    assert_int_equal(g->pending, 1);
    assert_int_equal(g->sat.status, AGG_ERR_SAT_UNAVAILABLE);
    wait_held(fs, 1);
    fake_release(fs, 0); /* the LLT part's answer */
    fake_hold(fs);       /* keeps the SAT part's */
    assert_int_equal(aggmgr_sims_settle(am, 200), -1);
    assert_int_equal(g->state, AGGMGR_GROUP_SAT_LAYING_OUT);
    assert_int_equal(g->llt.status, AGG_OK);
    assert_int_equal(g->sat.status, AGG_INPROGRESS);
    assert_int_equal(used_flows(am), (uint32_t)g->sat.tree.num_nodes); /* held while laid out */
    wait_held(fs, 1);
    assert_int_equal(a.done, 0);

    assert_int_equal(aggmgr_group_destroy(am, rep.job_id, g->id), AGG_OK);
    assert_int_equal(g->state, AGGMGR_GROUP_GONE);
    assert_null(g->job);
    assert_int_equal(job->num_groups, 0);
    assert_int_equal(used_flows(am), 0);
    check_counts(am);
    assert_int_equal(aggmgr_group_event(am, g, AGGMGR_GROUP_EV_DROP, AGG_ERR_NO_JOB),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(g->state, AGGMGR_GROUP_GONE);
    assert_int_equal(g->pending, 1);
    assert_int_equal(a.done, 0);
    fake_release(fs, 0); /* the SAT part is laid out after all, then undone */
    assert_int_equal(aggmgr_sims_settle(am, 10000), 0);
    assert_int_equal(a.done, 1);
    assert_int_equal(a.status, AGG_ERR_NO_JOB);
    assert_true(fake_torn_down(fs, rep.job_id, gid, AGG_TREE_SAT));
    assert_int_equal(fake_live(fs), 0);
    assert_null(am->ops);

    /* a ready group takes nothing but its end */
    assert_int_equal(group_create(am, 5, rep.job_id, ranks, 4, AGG_GROUP_F_SAT, &g), AGG_OK);
    assert_int_equal(g->state, AGGMGR_GROUP_READY);
    configs = fake_count(fs, AGG_TREE_LLT);
    assert_int_equal(aggmgr_group_event(am, g, AGGMGR_GROUP_EV_START, AGG_OK),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_group_event(am, g, AGGMGR_GROUP_EV_ROUND_FAILED, AGG_OK),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(g->state, AGGMGR_GROUP_READY);
    assert_int_equal(g->sat.status, AGG_OK);
    assert_int_equal(am->num_reqs, 0);
    assert_int_equal(fake_count(fs, AGG_TREE_LLT), configs);
    check_counts(am);
    assert_int_equal(aggmgr_group_event(am, g, AGGMGR_GROUP_EV_DROP, AGG_ERR_NO_JOB), AGG_OK);
    assert_int_equal(job->num_groups, 0);
    assert_int_equal(used_flows(am), 0);
    check_counts(am);
    free_mgr_sim(am, fs);
}

/*
 * aggmgr exits while a group is laid out: its job goes, the group is GONE
 * and waits; the switchsim keeps its answer past the 2 s aggmgr gives it,
 * and the creation goes unanswered, the group with it (ASan sees no leak).
 */
static void test_group_gone_at_exit(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};
    uint32_t ranks[4] = {0, 1, 2, 3};
    aggmgr_group_t *g;
    created_t a;

    (void)state;
    assert_int_equal(job_create(am, 5, &req, &rep), AGG_OK);
    fake_hold(fs);
    start_group(am, 5, rep.job_id, ranks, 4, 0, &a);
    g = find_job(am, rep.job_id)->groups;
    assert_non_null(g);
    assert_ptr_equal(am->ops->task, NULL); /* its job's while it stands */
    wait_held(fs, 1);
    assert_int_equal(aggmgr_job_destroy(am, rep.job_id), AGG_OK);
    assert_int_equal(g->state, AGGMGR_GROUP_GONE);
    assert_ptr_equal(am->ops->task, g); /* its creation's once it is out of its job */
    aggmgr_server_close(am);
    assert_int_equal(a.done, 0);
    assert_null(am->ops);
    assert_int_equal(am->num_reqs, 0);
    free_mgr_sim(am, fs);
}

/* What a switchsim says unasked: a link that broke is counted; a malformed report is refused. */
static void test_sim_report(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    fake_sim_t *fs = fake_start(am);
    agg_msg_sim_report_t r = {.what = AGG_SIM_REPORT_LINK_DOWN, .status = AGG_ERR_IO};
    agg_msg_hdr_t hdr = {.type = AGG_MSG_SIM_REPORT, .length = sizeof(r), .txid = 0};
    uint8_t body[sizeof(r) + 8];
    char list[64];

    (void)state;
    snprintf(r.addr, sizeof(r.addr), "%s", "10.9.0.3:7300");
    memcpy(body, &r, sizeof(r));
    agg_wire_swap(body, AGG_FMT_SIM_REPORT, 1);
    assert_int_equal(aggmgr_sim_message(am, 0, &hdr, body), AGG_OK);
    assert_int_equal(am->sims[0].reports, 1);
    hdr.length = sizeof(r) - 1;
    assert_int_equal(aggmgr_sim_message(am, 0, &hdr, body), AGG_ERR_PROTOCOL);
    hdr.length = sizeof(r);
    hdr.txid   = 7; /* a report answers nothing */
    assert_int_equal(aggmgr_sim_message(am, 0, &hdr, body), AGG_ERR_PROTOCOL);
    /* an answer to nothing asked is refused; one to a request given up on is dropped */
    hdr.type = AGG_MSG_HELLO;
    assert_int_equal(aggmgr_sim_message(am, 0, &hdr, body), AGG_ERR_PROTOCOL);
    hdr.type = AGG_MSG_GROUP_CONFIG_REPLY;
    assert_int_equal(aggmgr_sim_message(am, 0, &hdr, body), AGG_OK);
    assert_int_equal(am->sims[0].reports, 1);
    assert_int_equal(aggmgr_groups_across(am, 0, 0, 0, list, sizeof(list)), 0);
    assert_string_equal(list, "");
    free_mgr_sim(am, fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_quota),
        cmocka_unit_test(test_hosts_not_shared_roots_spread),
        cmocka_unit_test(test_quota_exhaustion),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_max_jobs),
        cmocka_unit_test(test_ranks_share_host_adapter),
        cmocka_unit_test(test_job_sat),
        cmocka_unit_test(test_group_llt),
        cmocka_unit_test(test_group_quota),
        cmocka_unit_test(test_group_llt_refused),
        cmocka_unit_test(test_group_owners),
        cmocka_unit_test(test_group_sat),
        cmocka_unit_test(test_group_sat_teardown),
        cmocka_unit_test(test_sat_flows_per_switch),
        cmocka_unit_test(test_group_sat_no_sat_tree),
        cmocka_unit_test(test_group_sat_refused),
        cmocka_unit_test(test_sim_lost),
        cmocka_unit_test(test_groups_dropped_across),
        cmocka_unit_test(test_group_answers_any_order),
        cmocka_unit_test(test_group_gone_while_laid_out),
        cmocka_unit_test(test_group_sim_lost_while_laid_out),
        cmocka_unit_test(test_group_sim_timeout),
        cmocka_unit_test(test_sim_report),
        cmocka_unit_test(test_group_table),
        cmocka_unit_test(test_group_states),
        cmocka_unit_test(test_group_gone_at_exit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
