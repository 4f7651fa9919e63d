/*
 * The control server, on the daemons' event loop (agg/loop.h): the
 * listening socket and every peer are watched there. A request is answered
 * at once, or, when switchsims must act on it first (a group, the
 * counters), once they have (aggmgr_simreq.c): the loop never waits on one
 * peer. Answers go through each connection's send queue (agg/txq.h). A peer
 * that sends a malformed message gets an error reply and is disconnected.
 */
#include "aggmgr.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/sock.h"
#include "agg/tls.h"

extern char **environ;

agg_status_t aggmgr_server_listen(aggmgr_t *am, int *bound_port)
{
    const char *addr = agg_conf_str(&am->conf, AGG_CONF_AM_ADDR);
    char host[256];
    int port;
    agg_status_t st;

    st = agg_sock_addr_parse(addr, host, sizeof(host), &port, NULL, 0);
    if (st != AGG_OK) {
        agg_error("bad listen address '%s'", addr);
        return st;
    }
    st = agg_sock_listen(host, port, &am->listen_fd, bound_port);
    if (st != AGG_OK) {
        agg_error("cannot listen on %s: %s", addr,
                  st == AGG_ERR_IO ? "address in use" : "address not usable here");
        return st;
    }
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char why[256];

        /* with a secret every peer speaks TLS keyed by it, local ones too; without
           one only loopback is served, in plain */
        am->off_loopback = getsockname(am->listen_fd, (struct sockaddr *)&ss, &sl) != 0 ||
                           !agg_auth_addr_is_loopback((struct sockaddr *)&ss);
        st = agg_auth_load(&am->auth, agg_conf_str(&am->conf, AGG_CONF_AM_KEY_FILE), why,
                           sizeof(why));
        if (st == AGG_OK && !am->auth.set && am->off_loopback) {
            snprintf(why, sizeof(why), "aggmgr listens on %s, not loopback: set "
                     "AGG_AM_SECRET or am_key_file (every peer must prove it)", addr);
            st = AGG_ERR_CONFIG;
        }
        if (st != AGG_OK) {
            agg_error("%s", why);
            close(am->listen_fd);
            am->listen_fd = -1;
            return st;
        }
    }
    snprintf(am->listen_addr, sizeof(am->listen_addr), "%s:%d", host, *bound_port);
    return AGG_OK;
}

/* ---- sending: never waiting on a peer ------------------------------------ */

static aggmgr_conn_t *aggmgr__conn_of(aggmgr_t *am, int fd)
{
    int i;

    for (i = 0; i < am->num_conns; ++i) {
        if (am->conns[i].fd == fd) {
            return &am->conns[i];
        }
    }
    return NULL;
}

agg_status_t aggmgr_conn_send(aggmgr_t *am, int fd, uint16_t type, uint32_t txid,
                              const void *body, size_t len)
{
    aggmgr_conn_t *c = aggmgr__conn_of(am, fd);
    agg_msg_hdr_t hdr;
    agg_status_t st;

    if (c == NULL) {
        return agg_msg_send(fd, type, txid, body, len, AGGMGR_IO_TIMEOUT_MS);
    }
    if (len > AGG_WIRE_MAX_BODY) {
        return AGG_ERR_INVALID_PARAM;
    }
    agg_wire_hdr_encode(&hdr, type, (uint32_t)len, txid);
    st = agg_txq_send(&c->txq, fd, &hdr, sizeof(hdr), body, len, AGG_TXQ_COPY);
    if (st == AGG_ERR_NO_RESOURCE) {
        agg_warn("peer fd %d (pid %u) reads nothing: %zu bytes wait for it", fd, c->pid,
                 c->txq.bytes);
        return AGG_ERR_IO;
    }
    return st;
}

static agg_status_t aggmgr__send_status(aggmgr_t *am, int fd, uint16_t type, uint32_t txid,
                                        agg_status_t status)
{
    agg_msg_status_t rep = {.status = status};

    agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
    return aggmgr_conn_send(am, fd, type, txid, &rep, sizeof(rep));
}

/* Is switch `node` one that `select` (sim_switches) asks for? */
static int aggmgr__sim_wants(const aggmgr_t *am, int node, const char *select,
                             const char *host)
{
    const aggmgr_node_t *sw = &am->topo.nodes[node];
    int i;

    if (select[0] == '\0' || strcmp(select, "all") == 0) {
        return 1;
    }
    if (strcmp(select, "host") == 0) {
        /* the switches the host's adapters are cabled to ("host17 mlx5_0") */
        for (i = 0; i < am->topo.num_cas; ++i) {
            const char *desc = am->topo.nodes[am->topo.cas[i]].desc;
            size_t hl = strlen(host);

            if (am->topo.ca_switch[i] == node && strncmp(desc, host, hl) == 0 &&
                (desc[hl] == ' ' || desc[hl] == '\0')) {
                return 1;
            }
        }
        return 0;
    }
    if (strncmp(select, "name:", 5) == 0) {
        return fnmatch(select + 5, sw->desc, 0) == 0 || fnmatch(select + 5, sw->id, 0) == 0;
    }
    if (strncmp(select, "guid:", 5) == 0) {
        const char *p = select + 5;

        while (*p != '\0') {
            char *end;
            unsigned long long g = strtoull(p, &end, 0);

            if (end == p) {
                return 0;
            }
            if (g == sw->guid) {
                return 1;
            }
            p = *end == ',' ? end + 1 : end;
        }
    }
    return 0;
}

static int aggmgr__select_valid(const char *select)
{
    return select[0] == '\0' || strcmp(select, "all") == 0 || strcmp(select, "host") == 0 ||
           strncmp(select, "name:", 5) == 0 || strncmp(select, "guid:", 5) == 0;
}

/*
 * The slot a registering switchsim takes: the one a switchsim of its host
 * was away from (its kept groups name that slot), else a free one; with
 * none free, the away one whose time is nearest up gives its groups up.
 */
static int aggmgr__sim_slot(aggmgr_t *am, const char *host)
{
    int i, free_slot = -1, away = -1;

    for (i = 0; i < am->num_sims; ++i) {
        const aggmgr_sim_t *s = &am->sims[i];

        if (s->fd >= 0) {
            continue;
        }
        if (s->away_until_ms == 0) {
            free_slot = free_slot < 0 ? i : free_slot;
        } else if (strcmp(s->host, host) == 0) {
            return i;
        } else if (away < 0 || s->away_until_ms < am->sims[away].away_until_ms) {
            away = i;
        }
    }
    if (free_slot >= 0 || am->num_sims < AGGMGR_MAX_SIMS) {
        return free_slot >= 0 ? free_slot : am->num_sims;
    }
    if (away >= 0) {
        am->sims[away].away_until_ms = 1; /* up now */
        aggmgr_sims_away_expire(am);
        return away;
    }
    return AGGMGR_MAX_SIMS;
}

static agg_status_t aggmgr__on_sim_register(aggmgr_t *am, aggmgr_conn_t *c,
                                            uint32_t txid, uint8_t *body, size_t len)
{
    agg_msg_sim_register_t *reg = (agg_msg_sim_register_t *)body;
    agg_msg_sim_register_reply_t *rep;
    const char *select = "";
    agg_wire_switch_t *sw;
    aggmgr_sim_t *sim;
    size_t rep_len;
    agg_status_t st;
    int i, k, slot, back;

    if (c->kind != 0) {
        agg_error("SIM_REGISTER from fd %d, which already said it is a %s; disconnecting",
                  c->fd, c->kind == AGG_PEER_SIM ? "switchsim" : "client");
        return AGG_ERR_PROTOCOL;
    }
    if (len < sizeof(*reg) || len > sizeof(*reg) + 4096 ||
        (len > sizeof(*reg) && body[len - 1] != '\0')) {
        return AGG_ERR_PROTOCOL;
    }
    if (len > sizeof(*reg)) {
        select = (const char *)(reg + 1);
    }
    agg_wire_swap(reg, AGG_FMT_SIM_REGISTER, 1);
    reg->host[sizeof(reg->host) - 1]           = '\0';
    reg->data_addr[sizeof(reg->data_addr) - 1] = '\0';
    if (!aggmgr__select_valid(select)) {
        agg_error("switchsim pid %u on %s asks for switches \"%s\": expected all, host, "
                  "guid:G,G,... or name:PATTERN", reg->pid, reg->host, select);
        return aggmgr__send_status(am, c->fd, AGG_MSG_SIM_REGISTER_REPLY, txid,
                                    AGG_ERR_INVALID_PARAM);
    }
    slot = aggmgr__sim_slot(am, reg->host);
    if (slot >= AGGMGR_MAX_SIMS) {
        agg_error("switchsim pid %u on %s refused: %d switchsims are registered already",
                  reg->pid, reg->host, AGGMGR_MAX_SIMS);
        return aggmgr__send_status(am, c->fd, AGG_MSG_SIM_REGISTER_REPLY, txid, AGG_ERR_NO_RESOURCE);
    }
    if (reg->an_payload_per_ost < (uint32_t)agg_conf_int(&am->conf,
                                                         AGG_CONF_AN_PAYLOAD_PER_OST)) {
        agg_error("switchsim pid %u offers %u bytes per OST, the manager is set for %lld",
                  reg->pid, reg->an_payload_per_ost,
                  agg_conf_int(&am->conf, AGG_CONF_AN_PAYLOAD_PER_OST));
        return aggmgr__send_status(am, c->fd, AGG_MSG_SIM_REGISTER_REPLY, txid, AGG_ERR_CONFIG);
    }
    rep_len = sizeof(*rep) + (size_t)am->topo.num_switches * sizeof(*sw);
    rep     = calloc(1, rep_len);
    if (rep == NULL) {
        return aggmgr__send_status(am, c->fd, AGG_MSG_SIM_REGISTER_REPLY, txid,
                                    AGG_ERR_NO_MEMORY);
    }
    /* the switches it asks for that no other switchsim hosts */
    sw = (agg_wire_switch_t *)(rep + 1);
    for (i = 0, k = 0; i < am->topo.num_nodes; ++i) {
        if (am->topo.nodes[i].type == AGGMGR_NODE_SWITCH && am->ans[i].sim < 0 &&
            aggmgr__sim_wants(am, i, select, reg->host)) {
            sw[k].guid = am->topo.nodes[i].guid;
            snprintf(sw[k].desc, sizeof(sw[k].desc), "%.*s", (int)sizeof(sw[k].desc) - 1,
                     am->topo.nodes[i].desc);
            ++k;
        }
    }
    if (k == 0) {
        free(rep);
        agg_error("switchsim pid %u on %s asks for switches \"%s\": none of the fabric's "
                  "is left for it", reg->pid, reg->host, select[0] ? select : "all");
        return aggmgr__send_status(am, c->fd, AGG_MSG_SIM_REGISTER_REPLY, txid, AGG_ERR_NOT_FOUND);
    }
    rep_len           = sizeof(*rep) + (size_t)k * sizeof(*sw);
    rep->status       = AGG_OK;
    rep->sim_id       = ++am->next_sim_id;
    rep->num_switches = (uint32_t)k;
    agg_wire_swap(rep, AGG_FMT_SIM_REGISTER_REPLY, 1);
    agg_wire_swap(sw, AGG_FMT_SWITCH, (size_t)k);
    st = aggmgr_conn_send(am, c->fd, AGG_MSG_SIM_REGISTER_REPLY, txid, rep, rep_len);
    free(rep);
    if (st != AGG_OK) {
        return st;
    }
    c->kind = AGG_PEER_SIM;
    c->pid  = reg->pid;
    sim     = &am->sims[slot];
    back    = sim->fd < 0 && sim->away_until_ms != 0;
    free(sim->served);
    *sim    = (aggmgr_sim_t){
        .back = back,
        .fd = c->fd, .id = am->next_sim_id, .pid = reg->pid, .an_osts = reg->an_osts,
        .an_payload_per_ost = reg->an_payload_per_ost, .an_max_groups = reg->an_max_groups,
        .an_sat_flows = reg->an_sat_flows, .workers = reg->workers,
    };
    snprintf(sim->host, sizeof(sim->host), "%s", reg->host);
    snprintf(sim->data_addr, sizeof(sim->data_addr), "%s", reg->data_addr);
    if (slot == am->num_sims) {
        am->num_sims++;
    }
    /* jobs are promised what aggmgr's settings say each switch has */
    if (reg->an_osts < (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_OSTS) ||
        reg->an_max_groups < (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_MAX_GROUPS) ||
        reg->an_sat_flows < (uint32_t)agg_conf_int(&am->conf, AGG_CONF_AN_SAT_FLOWS)) {
        agg_warn("switchsim %u (pid %u on %s) has %u OSTs, %u groups and %u SAT flows per "
                 "switch, fewer than aggmgr hands out (an_osts %lld, an_max_groups %lld, "
                 "an_sat_flows %lld): jobs may be promised what its switches lack; give "
                 "both the same settings", sim->id, reg->pid, reg->host, reg->an_osts,
                 reg->an_max_groups, reg->an_sat_flows,
                 agg_conf_int(&am->conf, AGG_CONF_AN_OSTS),
                 agg_conf_int(&am->conf, AGG_CONF_AN_MAX_GROUPS),
                 agg_conf_int(&am->conf, AGG_CONF_AN_SAT_FLOWS));
    }
    for (i = 0; i < am->topo.num_nodes; ++i) {
        if (am->topo.nodes[i].type == AGGMGR_NODE_SWITCH && am->ans[i].sim < 0 &&
            aggmgr__sim_wants(am, i, select, reg->host)) {
            am->ans[i].sim = slot;
        }
    }
    agg_info("switchsim %u registered: pid %u on %s hosts %d switches (%s), %u reduction "
             "threads%s%s", sim->id, reg->pid, reg->host, k, select[0] ? select : "all",
             reg->workers, reg->data_addr[0] ? ", TCP data port " : "", reg->data_addr);
    return AGG_OK; /* SIM_PARTS follows: what it serves (nothing, when it is new) */
}

static agg_status_t aggmgr__on_job_create(aggmgr_t *am, aggmgr_conn_t *c, uint32_t txid,
                                          uint8_t *body, size_t len)
{
    agg_msg_job_create_t *req = (agg_msg_job_create_t *)body;
    agg_msg_job_create_reply_t rep = {0};
    uint32_t *host_of, h;
    char *hosts;
    agg_status_t st;

    if (len < sizeof(*req)) {
        return AGG_ERR_PROTOCOL;
    }
    agg_wire_swap(req, AGG_FMT_JOB_CREATE, 1);
    if (req->world_size == 0 || req->num_hosts == 0 || req->num_hosts > req->world_size ||
        len != sizeof(*req) + (size_t)req->num_hosts * AGG_WIRE_NAME_LEN +
                   (size_t)req->world_size * sizeof(uint32_t)) {
        return AGG_ERR_PROTOCOL;
    }
    req->host[sizeof(req->host) - 1]     = '\0';
    req->device[sizeof(req->device) - 1] = '\0';
    hosts   = (char *)(req + 1);
    host_of = (uint32_t *)(hosts + (size_t)req->num_hosts * AGG_WIRE_NAME_LEN);
    agg_wire_swap(host_of, "l", req->world_size);
    for (h = 0; h < req->num_hosts; ++h) {
        hosts[(size_t)h * AGG_WIRE_NAME_LEN + AGG_WIRE_NAME_LEN - 1] = '\0';
    }
    for (h = 0; h < req->world_size; ++h) {
        if (host_of[h] >= req->num_hosts) {
            return AGG_ERR_PROTOCOL;
        }
    }
    c->kind = AGG_PEER_CLIENT;
    c->pid  = req->pid;
    st = aggmgr_job_create(am, c->fd, req, hosts, host_of, &rep);
    rep.status = st;
    agg_wire_swap(&rep, AGG_FMT_JOB_CREATE_REPLY, 1);
    return aggmgr_conn_send(am, c->fd, AGG_MSG_JOB_CREATE_REPLY, txid, &rep, sizeof(rep));
}

/* Bytes of one tree's block in GROUP_CREATE_REPLY. */
static size_t aggmgr__tree_block_len(const aggmgr_gtree_t *gt, uint32_t n)
{
    return sizeof(agg_wire_group_tree_t) +
           (gt->status == AGG_OK ? gt->num_eps * sizeof(agg_wire_endpoint_t) +
                                   (size_t)n * sizeof(agg_wire_member_ep_t) : 0);
}

/*
 * Writes one tree's block (wire order) at p; returns the bytes written.
 * Endpoints: every part's shared memory, then the TCP data ports of parts
 * with members on other hosts; each member is sent to its leaf's part.
 */
static size_t aggmgr__tree_block(aggmgr_t *am, const aggmgr_gtree_t *gt, uint32_t tree,
                                 uint32_t n, uint8_t *p)
{
    agg_wire_group_tree_t *t = (agg_wire_group_tree_t *)p;
    agg_wire_endpoint_t *ep = (agg_wire_endpoint_t *)(t + 1);
    agg_wire_member_ep_t *mep;
    uint32_t i;

    memset(t, 0, sizeof(*t));
    t->status = gt->status;
    t->tree   = tree;
    if (gt->status == AGG_OK) {
        mep              = (agg_wire_member_ep_t *)(ep + gt->num_eps);
        t->tree_id       = gt->tree_id;
        t->osts          = gt->osts;
        t->payload       = gt->payload;
        t->depth         = (uint32_t)gt->tree.depth;
        t->nodes         = (uint32_t)gt->tree.num_nodes;
        t->num_endpoints = gt->num_eps;
        t->root_guid     = am->topo.nodes[gt->tree.nodes[0].topo_node].guid;
        memcpy(ep, gt->eps, gt->num_eps * sizeof(*ep));
        agg_wire_swap(ep, AGG_FMT_ENDPOINT, gt->num_eps);
        for (i = 0; i < n; ++i) {
            const aggmgr_part_t *part = &gt->parts[gt->node_part[gt->tree.hca_leaf[i]]];

            mep[i].endpoint  = gt->remote[i] ? part->ep_away : part->ep_here;
            mep[i].channel   = gt->channel[i];
            mep[i].leaf_guid =
                am->topo.nodes[gt->tree.nodes[gt->tree.hca_leaf[i]].topo_node].guid;
        }
        agg_wire_swap(mep, AGG_FMT_MEMBER_EP, n);
    }
    agg_wire_swap(t, AGG_FMT_GROUP_TREE, 1);
    return aggmgr__tree_block_len(gt, n);
}

/* A group's switchsims have answered: its creator hears how it went. */
static void aggmgr__group_created(aggmgr_t *am, aggmgr_op_t *op)
{
    agg_msg_group_create_reply_t *rep;
    aggmgr_group_t *g = op->result;
    uint32_t n, sat;
    size_t rep_len;
    uint8_t *p;

    if (op->client_fd < 0) {
        return; /* it went away; its groups went with it */
    }
    if (op->status != AGG_OK || g == NULL) {
        aggmgr__send_status(am, op->client_fd, AGG_MSG_GROUP_CREATE_REPLY, op->client_txid,
                            op->status != AGG_OK ? op->status : AGG_ERR_GROUP_ALLOC);
        return;
    }
    n       = g->num_members;
    sat     = (g->flags & AGG_GROUP_F_SAT) != 0;
    rep_len = sizeof(*rep) + aggmgr__tree_block_len(&g->llt, n) +
              (sat ? aggmgr__tree_block_len(&g->sat, n) : 0);
    rep     = calloc(1, rep_len);
    if (rep == NULL) {
        aggmgr_group_destroy(am, g->job->id, g->id);
        aggmgr__send_status(am, op->client_fd, AGG_MSG_GROUP_CREATE_REPLY, op->client_txid,
                            AGG_ERR_NO_MEMORY);
        return;
    }
    rep->status      = AGG_OK;
    rep->group_id    = g->id;
    rep->num_members = n;
    rep->num_trees   = sat ? 2 : 1;
    p  = (uint8_t *)(rep + 1);
    p += aggmgr__tree_block(am, &g->llt, AGG_TREE_LLT, n, p);
    if (sat) {
        aggmgr__tree_block(am, &g->sat, AGG_TREE_SAT, n, p);
    }
    agg_wire_swap(rep, AGG_FMT_GROUP_CREATE_REPLY, 1);
    if (aggmgr_conn_send(am, op->client_fd, AGG_MSG_GROUP_CREATE_REPLY, op->client_txid, rep,
                     rep_len) != AGG_OK) {
        agg_warn("job %u: group %u was made, but its creator (fd %d) did not take the answer",
                 g->job->id, g->id, op->client_fd);
    }
    free(rep);
}

/*
 * Starts laying the group out and goes back to the loop; the answer goes
 * out from aggmgr__group_created.
 */
static agg_status_t aggmgr__on_group_create(aggmgr_t *am, aggmgr_conn_t *c,
                                            uint32_t txid, uint8_t *body, size_t len)
{
    agg_msg_group_create_t *req = (agg_msg_group_create_t *)body;
    aggmgr_op_t *op;
    uint32_t *ranks, n;
    agg_status_t st;

    if (len < sizeof(*req)) {
        return AGG_ERR_PROTOCOL;
    }
    agg_wire_swap(req, AGG_FMT_GROUP_CREATE, 1);
    n = req->num_members;
    if (n == 0 || n > 1u << 14 || len != sizeof(*req) + (size_t)n * sizeof(uint32_t)) {
        return AGG_ERR_PROTOCOL;
    }
    c->kind = AGG_PEER_CLIENT;
    ranks   = (uint32_t *)(req + 1);
    agg_wire_swap(ranks, "l", n);
    op = aggmgr_op_new(aggmgr__group_created, NULL);
    if (op == NULL) {
        return aggmgr__send_status(am, c->fd, AGG_MSG_GROUP_CREATE_REPLY, txid, AGG_ERR_NO_MEMORY);
    }
    op->client_fd   = c->fd;
    op->client_txid = txid;
    st = aggmgr_group_create(am, c->fd, req, ranks, op);
    if (st != AGG_INPROGRESS) {
        aggmgr_op_free(op);
        return aggmgr__send_status(am, c->fd, AGG_MSG_GROUP_CREATE_REPLY, txid, st);
    }
    return AGG_OK;
}

/* Every switchsim has answered STATS: the sum to who asked. */
static void aggmgr__stats_done(aggmgr_t *am, aggmgr_op_t *op)
{
    agg_msg_stats_reply_t *sum = op->result;

    if (op->client_fd < 0) {
        return;
    }
    if (op->status != AGG_OK) {
        aggmgr__send_status(am, op->client_fd, AGG_MSG_STATS_REPLY, op->client_txid, op->status);
        return;
    }
    sum->status = AGG_OK;
    agg_wire_swap(sum, AGG_FMT_STATS_REPLY, 1);
    aggmgr_conn_send(am, op->client_fd, AGG_MSG_STATS_REPLY, op->client_txid, sum,
                 sizeof(*sum));
}

/* Every switchsim's counters, added up once they have all answered. */
static agg_status_t aggmgr__on_stats(aggmgr_t *am, aggmgr_conn_t *c, uint32_t txid)
{
    aggmgr_op_t *op;

    if (aggmgr_sims_live(am) == 0) {
        return aggmgr__send_status(am, c->fd, AGG_MSG_STATS_REPLY, txid, AGG_ERR_NO_SWITCHSIM);
    }
    op = aggmgr_op_new(aggmgr__stats_done, NULL);
    if (op == NULL) {
        return aggmgr__send_status(am, c->fd, AGG_MSG_STATS_REPLY, txid, AGG_ERR_NO_MEMORY);
    }
    op->client_fd   = c->fd;
    op->client_txid = txid;
    aggmgr_stats_start(am, op);
    return AGG_OK;
}

static agg_status_t aggmgr__on_hello(aggmgr_t *am, aggmgr_conn_t *c, uint32_t txid,
                                     uint8_t *body, size_t len)
{
    agg_msg_hello_t *req = (agg_msg_hello_t *)body;
    agg_msg_hello_reply_t rep = {0};

    if (len != sizeof(*req)) {
        return AGG_ERR_PROTOCOL;
    }
    agg_wire_swap(req, AGG_FMT_HELLO, 1);
    req->host[sizeof(req->host) - 1] = '\0';
    c->kind = req->kind;
    c->pid  = req->pid;
    snprintf(c->host, sizeof(c->host), "%s", req->host);
    rep.status       = AGG_OK;
    rep.mgr_pid      = (uint32_t)getpid();
    rep.num_switches = (uint32_t)am->topo.num_switches;
    rep.num_cas      = (uint32_t)am->topo.num_cas;
    agg_wire_swap(&rep, AGG_FMT_HELLO_REPLY, 1);
    return aggmgr_conn_send(am, c->fd, AGG_MSG_HELLO_REPLY, txid, &rep, sizeof(rep));
}

/*
 * SIM_PARTS: a switchsim registered again says which parts it serves. It
 * hears back first (it waits for that answer alone), then the groups read
 * back get their parts, then what the manager does not hold is torn down.
 */
static agg_status_t aggmgr__on_sim_parts(aggmgr_t *am, aggmgr_conn_t *c, int sim,
                                         uint32_t txid, uint8_t *body, size_t len)
{
    agg_msg_sim_parts_t *msg = (agg_msg_sim_parts_t *)body;
    agg_msg_group_ref_t *ref;
    unsigned dropped = 0;
    agg_status_t st;
    uint32_t i;

    if (len < sizeof(*msg)) {
        return AGG_ERR_PROTOCOL;
    }
    agg_wire_swap(msg, AGG_FMT_SIM_PARTS, 1);
    if (len != sizeof(*msg) + (size_t)msg->num_parts * sizeof(*ref)) {
        return AGG_ERR_PROTOCOL;
    }
    ref = (agg_msg_group_ref_t *)(msg + 1);
    agg_wire_swap(ref, AGG_FMT_GROUP_REF, msg->num_parts);
    free(am->sims[sim].served);
    am->sims[sim].served     = NULL;
    am->sims[sim].num_served = 0;
    if (msg->num_parts > 0) {
        am->sims[sim].served = malloc(msg->num_parts * sizeof(*ref));
        if (am->sims[sim].served == NULL) {
            return aggmgr__send_status(am, c->fd, AGG_MSG_SIM_PARTS_REPLY, txid,
                                       AGG_ERR_NO_MEMORY);
        }
        memcpy(am->sims[sim].served, ref, msg->num_parts * sizeof(*ref));
        am->sims[sim].num_served = msg->num_parts;
    }
    st = aggmgr__send_status(am, c->fd, AGG_MSG_SIM_PARTS_REPLY, txid, AGG_OK);
    if (st != AGG_OK) {
        return st;
    }
    if (am->sims[sim].back) {
        am->sims[sim].back = 0;
        aggmgr_sim_back(am, sim);
    }
    aggmgr_groups_rejoin(am);
    for (i = 0; i < msg->num_parts; ++i) {
        if (!aggmgr_part_held(am, sim, &ref[i])) {
            aggmgr_part_ref_t pref = {.job_id = ref[i].job_id, .group_id = ref[i].group_id,
                                      .tree = ref[i].tree, .part = ref[i].part};

            aggmgr_gtree_part_teardown(am, sim, &pref);
            dropped++;
        }
    }
    if (msg->num_parts > 0) {
        agg_info("switchsim %u serves %u groups' parts; %u of them the manager does not hold "
                 "(torn down)", am->sims[sim].id, msg->num_parts, dropped);
    }
    return AGG_OK;
}

/* STATE: the manager's state as text (agg_info -S). */
static agg_status_t aggmgr__on_state(aggmgr_t *am, aggmgr_conn_t *c, uint32_t txid)
{
    agg_msg_status_t *rep = malloc(sizeof(*rep) + AGG_STATE_TEXT_MAX);
    size_t len;
    agg_status_t st;

    if (rep == NULL) {
        return aggmgr__send_status(am, c->fd, AGG_MSG_STATE_REPLY, txid, AGG_ERR_NO_MEMORY);
    }
    len         = aggmgr_state_text(am, (char *)(rep + 1), AGG_STATE_TEXT_MAX);
    rep->status = AGG_OK;
    agg_wire_swap(rep, AGG_FMT_STATUS, 1);
    st = aggmgr_conn_send(am, c->fd, AGG_MSG_STATE_REPLY, txid, rep, sizeof(*rep) + len + 1);
    free(rep);
    return st;
}

static agg_status_t aggmgr__on_job_attach(aggmgr_t *am, aggmgr_conn_t *c, uint32_t txid,
                                          uint8_t *body, size_t len)
{
    agg_msg_job_attach_t *req = (agg_msg_job_attach_t *)body;
    agg_status_t st;

    if (len != sizeof(*req)) {
        return AGG_ERR_PROTOCOL;
    }
    agg_wire_swap(req, AGG_FMT_JOB_ATTACH, 1);
    st = aggmgr_job_attach(am, c->fd, req);
    if (st == AGG_OK) {
        c->kind         = AGG_PEER_CLIENT;
        c->attached_job = req->job_id;
    }
    return aggmgr__send_status(am, c->fd, AGG_MSG_JOB_ATTACH_REPLY, txid, st);
}

int aggmgr_conn_attached(const aggmgr_t *am, int fd, uint32_t job_id)
{
    int i;

    for (i = 0; i < am->num_conns; ++i) {
        if (am->conns[i].fd == fd) {
            return am->conns[i].attached_job == job_id;
        }
    }
    return 0;
}

/* Handles one complete message; anything but AGG_OK drops the connection. */
static agg_status_t aggmgr__dispatch(aggmgr_t *am, aggmgr_conn_t *c, agg_msg_hdr_t hdr,
                                     uint8_t *body)
{
    agg_msg_job_ref_t *jref;
    agg_msg_group_ref_t *gref;
    agg_status_t st;

    agg_debug("%s from fd %d (%u bytes)", agg_msg_type_name(hdr.type), c->fd, hdr.length);
    if (c->kind == AGG_PEER_SIM) {
        /* a registered switchsim only answers what it was asked */
        int sim = aggmgr_sim_of_fd(am, c->fd);

        if (sim >= 0 && hdr.type == AGG_MSG_SIM_PARTS) {
            st = aggmgr__on_sim_parts(am, c, sim, hdr.txid, body, hdr.length);
            if (st == AGG_ERR_PROTOCOL) {
                agg_warn("malformed SIM_PARTS (%u bytes) from switchsim %u; disconnecting",
                         hdr.length, am->sims[sim].id);
            }
            return st;
        }
        if (sim >= 0) {
            return aggmgr_sim_message(am, sim, &hdr, body);
        }
    }
    switch (hdr.type) {
    case AGG_MSG_HELLO:
        st = aggmgr__on_hello(am, c, hdr.txid, body, hdr.length);
        break;
    case AGG_MSG_SIM_REGISTER:
        st = aggmgr__on_sim_register(am, c, hdr.txid, body, hdr.length);
        break;
    case AGG_MSG_JOB_CREATE:
        st = aggmgr__on_job_create(am, c, hdr.txid, body, hdr.length);
        break;
    case AGG_MSG_JOB_DESTROY:
        if (hdr.length != sizeof(*jref)) {
            st = AGG_ERR_PROTOCOL;
            break;
        }
        jref = (agg_msg_job_ref_t *)body;
        agg_wire_swap(jref, AGG_FMT_JOB_REF, 1);
        st = aggmgr_job_owned(am, jref->job_id, c->fd);
        st = aggmgr__send_status(am, c->fd, AGG_MSG_JOB_DESTROY_REPLY, hdr.txid,
                                  st == AGG_OK ? aggmgr_job_destroy(am, jref->job_id) : st);
        break;
    case AGG_MSG_GROUP_CREATE:
        st = aggmgr__on_group_create(am, c, hdr.txid, body, hdr.length);
        break;
    case AGG_MSG_GROUP_DESTROY:
        if (hdr.length != sizeof(*gref)) {
            st = AGG_ERR_PROTOCOL;
            break;
        }
        gref = (agg_msg_group_ref_t *)body;
        agg_wire_swap(gref, AGG_FMT_GROUP_REF, 1);
        st = aggmgr_group_owned(am, gref->job_id, gref->group_id, c->fd);
        st = aggmgr__send_status(am, c->fd, AGG_MSG_GROUP_DESTROY_REPLY, hdr.txid,
                                  st == AGG_OK ? aggmgr_group_destroy(am, gref->job_id,
                                                                      gref->group_id) : st);
        break;
    case AGG_MSG_STATS:
        st = aggmgr__on_stats(am, c, hdr.txid);
        break;
    case AGG_MSG_STATE:
        st = hdr.length == 0 ? aggmgr__on_state(am, c, hdr.txid) : AGG_ERR_PROTOCOL;
        break;
    case AGG_MSG_JOB_ATTACH:
        st = aggmgr__on_job_attach(am, c, hdr.txid, body, hdr.length);
        break;
    default:
        st = AGG_ERR_PROTOCOL;
        break;
    }
    if (st == AGG_ERR_PROTOCOL) {
        agg_warn("malformed %s (%u bytes) from fd %d pid %u; disconnecting",
                 agg_msg_type_name(hdr.type), hdr.length, c->fd, c->pid);
        aggmgr__send_status(am, c->fd, AGG_MSG_ERROR_REPLY, hdr.txid, AGG_ERR_PROTOCOL);
    }
    return st;
}

/*
 * Takes what the peer has sent so far without blocking; dispatches the
 * message once it is whole. AGG_OK also means "not complete yet".
 */
/* Why aggmgr drops a peer that is no use to it (counted; logged when the count is 1, 10, 100...). */
enum { AGGMGR_DROP_SLOW, AGGMGR_DROP_QUIET, AGGMGR_DROP_BUDGET, AGGMGR_DROP_EVICTED,
       AGGMGR_DROP_PER_ADDR };

static void aggmgr__dropped(aggmgr_t *am, const aggmgr_conn_t *c, int why, const char *what)
{
    unsigned long n = ++am->dropped[why];
    unsigned long p = 1;

    while (p * 10 <= n) {
        p *= 10;
    }
    if (n == p) {
        agg_warn("dropping peer fd %d (pid %u): %s (%lu peers dropped for this so far; "
                 "logged again at %lu)", c->fd, c->pid, what, n, p * 10);
    } else {
        agg_debug("dropping peer fd %d (pid %u): %s", c->fd, c->pid, what);
    }
}

/* Whether a peer holds anything: a job or group it made, or a switchsim's place. */
static int aggmgr__conn_holds(const aggmgr_t *am, int fd)
{
    const aggmgr_job_t *job;
    const aggmgr_group_t *g;

    if (aggmgr_sim_of_fd((aggmgr_t *)am, fd) >= 0) {
        return 1;
    }
    for (job = am->jobs; job != NULL; job = job->next) {
        if (job->owner_fd == fd) {
            return 1;
        }
        for (g = job->groups; g != NULL; g = g->next) {
            if (g->owner_fd == fd) {
                return 1;
            }
        }
    }
    return 0;
}

static agg_status_t aggmgr__conn_read(aggmgr_t *am, aggmgr_conn_t *c)
{
    size_t want = c->rx_len < sizeof(agg_msg_hdr_t) ? sizeof(agg_msg_hdr_t) :
                  sizeof(agg_msg_hdr_t) + c->rx_hdr.length;
    agg_status_t st;
    ssize_t n;
    uint8_t *p;

    if (c->rx_cap < want) {
        if (am->rx_bytes + (want - c->rx_cap) > AGGMGR_RX_BUDGET) {
            /* what every peer is sending at once is bounded; one waits its turn never */
            aggmgr__dropped(am, c, AGGMGR_DROP_BUDGET, "its message would take aggmgr past "
                            "its receive budget (64 MiB for all peers)");
            return AGG_ERR_NO_RESOURCE;
        }
        p = realloc(c->rx, want);
        if (p == NULL) {
            return AGG_ERR_NO_MEMORY;
        }
        am->rx_bytes += want - c->rx_cap;
        c->rx     = p;
        c->rx_cap = want;
    }
    n = agg_sock_recv_some(c->fd, c->rx + c->rx_len, want - c->rx_len);
    if (n == 0) {
        return AGG_ERR_IO; /* hung up */
    }
    if (n < 0) {
        if (errno == EPROTO) {
            agg_warn("dropping peer fd %d (pid %u) from %s: a TLS record did not verify "
                     "(altered or forged on the way)", c->fd, c->pid, c->peer);
        }
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? AGG_OK :
                                                                             AGG_ERR_IO;
    }
    if (c->rx_len == 0) {
        c->rx_since_ms = (uint64_t)agg_time_ms(); /* a message begins: whole in time, or out */
    }
    c->rx_len += (size_t)n;
    if (c->rx_len == sizeof(agg_msg_hdr_t)) {
        memcpy(&c->rx_hdr, c->rx, sizeof(c->rx_hdr));
        st = agg_wire_hdr_decode(&c->rx_hdr);
        if (st != AGG_OK) {
            agg_warn("dropping peer fd %d (pid %u): %s", c->fd, c->pid,
                     agg_status_string(st));
            return st;
        }
    }
    if (c->rx_len < sizeof(agg_msg_hdr_t) ||
        c->rx_len < sizeof(agg_msg_hdr_t) + c->rx_hdr.length) {
        return AGG_OK;
    }
    c->rx_len         = 0;
    c->rx_since_ms    = 0;
    c->quiet_since_ms = (uint64_t)agg_time_ms();
    st = aggmgr__dispatch(am, c, c->rx_hdr, c->rx + sizeof(agg_msg_hdr_t));
    if (c->rx_cap > 65536) {
        /* a large request was a one-off: do not keep its buffer */
        am->rx_bytes -= c->rx_cap;
        free(c->rx);
        c->rx     = NULL;
        c->rx_cap = 0;
    }
    return st;
}

static void aggmgr__conn_close(aggmgr_t *am, aggmgr_conn_t *c)
{
    int fd = c->fd, sim = aggmgr_sim_of_fd(am, fd);

    if (sim >= 0) {
        aggmgr_sim_lost(am, sim);
    } else {
        aggmgr_conn_release(am, fd);
    }
    agg_txq_flush(&c->txq, fd); /* a last answer (a refusal, say) goes if it can */
    agg_loop_del(am->loop, fd, am);
    agg_tls_close(fd);
    am->rx_bytes -= c->rx_cap;
    free(c->rx);
    agg_txq_free(&c->txq); /* the loop's want_out points here: the slot stays put */
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    while (am->num_conns > 0 && am->conns[am->num_conns - 1].fd < 0) {
        am->num_conns--;
    }
}

/* A peer's socket: what waits for it goes out, what it sent comes in. */
static void aggmgr__on_conn(agg_loop_t *loop, int fd, short revents, void *arg)
{
    aggmgr_t *am = arg;
    aggmgr_conn_t *c = aggmgr__conn_of(am, fd);
    const char *why = NULL;

    (void)loop;
    if (c == NULL) {
        return;
    }
    if (agg_txq_poll(&c->txq, fd, revents, AGGMGR_IO_TIMEOUT_MS, &why) != 0) {
        agg_warn("dropping peer fd %d (pid %u): %s", fd, c->pid, why);
        aggmgr__conn_close(am, c);
        return;
    }
    if ((revents & ~POLLOUT) != 0 && aggmgr__conn_read(am, c) != AGG_OK) {
        aggmgr__conn_close(am, c);
    }
}

/*
 * Every half second: a peer that takes nothing of what waits for it goes,
 * and so does one whose message is not whole after AGGMGR_MSG_TIMEOUT_MS,
 * or that said nothing that long after connecting.
 */
static int aggmgr__stalled(agg_loop_t *loop, void *arg)
{
    aggmgr_t *am = arg;
    uint64_t now = (uint64_t)agg_time_ms();
    const char *why = NULL;
    int i;

    (void)loop;
    for (i = am->num_conns - 1; i >= 0; --i) {
        aggmgr_conn_t *c = &am->conns[i];

        if (c->fd < 0) {
            continue;
        }
        if (agg_txq_poll(&c->txq, c->fd, 0, AGGMGR_IO_TIMEOUT_MS, &why) != 0) {
            agg_warn("dropping peer fd %d (pid %u): %s", c->fd, c->pid, why);
            aggmgr__conn_close(am, c);
        } else if (c->rx_since_ms != 0 && now - c->rx_since_ms > AGGMGR_MSG_TIMEOUT_MS) {
            aggmgr__dropped(am, c, c->rx_len > 0 ? AGGMGR_DROP_SLOW : AGGMGR_DROP_QUIET,
                            c->rx_len > 0 ? "a message not whole after 10 s" :
                                            "nothing said in the 10 s after connecting");
            aggmgr__conn_close(am, c);
        }
    }
    return 500;
}

/*
 * With every connection taken (of one address: peer not NULL), the one
 * quiet longest that holds nothing (no job, group or switchsim) makes room
 * for a new one; -1 if none may go.
 */
static int aggmgr__evict_of(aggmgr_t *am, const char *peer)
{
    int i, best = -1;

    for (i = 0; i < am->num_conns; ++i) {
        const aggmgr_conn_t *c = &am->conns[i];

        if (c->fd >= 0 && (peer == NULL || strcmp(c->peer, peer) == 0) &&
            !aggmgr__conn_holds(am, c->fd) &&
            (best < 0 || c->quiet_since_ms < am->conns[best].quiet_since_ms)) {
            best = i;
        }
    }
    if (best >= 0) {
        aggmgr__dropped(am, &am->conns[best],
                        peer != NULL ? AGGMGR_DROP_PER_ADDR : AGGMGR_DROP_EVICTED,
                        peer != NULL ? "its address has am_client_max_conns connections: "
                                       "the quietest that holds nothing goes" :
                                       "every connection is taken: the quietest that holds "
                                       "nothing goes");
        aggmgr__conn_close(am, &am->conns[best]);
    }
    return best;
}

static int aggmgr__evict(aggmgr_t *am)
{
    return aggmgr__evict_of(am, NULL);
}

const char *aggmgr_conn_peer(const aggmgr_t *am, int fd)
{
    int i;

    for (i = 0; i < am->num_conns; ++i) {
        if (am->conns[i].fd == fd) {
            return am->conns[i].peer;
        }
    }
    return "";
}

/* The peer's address without its port; "local" for a peer that is no IP socket. */
static void aggmgr__peer_of(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char *colon;

    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)) {
        snprintf(buf, len, "local");
        return;
    }
    agg_sock_addr_string((struct sockaddr *)&ss, buf, len);
    colon = strrchr(buf, ':'); /* "host:port", "[v6]:port" */
    if (colon != NULL) {
        *colon = '\0';
    }
}

/* A new connection from peer: room under am_client_max_conns, or -1 (refused). */
static int aggmgr__peer_room(aggmgr_t *am, const char *peer)
{
    long long max = agg_conf_int(&am->conf, AGG_CONF_AM_CLIENT_MAX_CONNS);
    int i, n = 0;

    for (i = 0; i < am->num_conns; ++i) {
        n += am->conns[i].fd >= 0 && strcmp(am->conns[i].peer, peer) == 0;
    }
    if (n < max || aggmgr__evict_of(am, peer) >= 0) {
        return 0;
    }
    return -1;
}

static void aggmgr__add_conn(aggmgr_t *am, int fd)
{
    aggmgr_conn_t *c = NULL;
    char peer[64];
    int i;

    aggmgr__peer_of(fd, peer, sizeof(peer));
    if (aggmgr__peer_room(am, peer) < 0) {
        aggmgr_conn_t tmp = {.fd = fd};

        aggmgr__dropped(am, &tmp, AGGMGR_DROP_PER_ADDR,
                        "its address has am_client_max_conns connections, every one holding "
                        "a job, group or switchsim: refused");
        agg_tls_close(fd);
        return;
    }

    for (i = 0; i < am->num_conns && c == NULL; ++i) {
        if (am->conns[i].fd < 0) {
            c = &am->conns[i]; /* a closed one's slot */
        }
    }
    if (c == NULL && am->num_conns >= AGGMGR_MAX_CONNS) {
        i = aggmgr__evict(am);
        if (i >= 0) {
            /* its slot, or the end where the slots shrank past it */
            c = &am->conns[i < am->num_conns ? i : am->num_conns];
        }
    } else if (c == NULL) {
        c = &am->conns[am->num_conns];
    }
    if (c == NULL) {
        agg_warn("too many connections (%d), every one holding a job, group or switchsim; "
                 "refusing one", am->num_conns);
        agg_tls_close(fd);
        return;
    }
    memset(c, 0, sizeof(*c));
    c->fd             = fd;
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    c->rx_since_ms    = (uint64_t)agg_time_ms(); /* its first message: in time, or out */
    c->quiet_since_ms = c->rx_since_ms;
    if (agg_txq_init(&c->txq, 16, 1u << 16, AGGMGR_TX_MAX, am->loop, NULL, 0) != AGG_OK ||
        agg_loop_add(am->loop, fd, POLLIN, &c->txq.pending, aggmgr__on_conn, am) != AGG_OK) {
        agg_warn("no room for another connection; refusing one");
        agg_txq_free(&c->txq);
        c->fd = -1;
        agg_tls_close(fd);
        return;
    }
    agg_sock_nodelay(fd);
    if (c == &am->conns[am->num_conns]) {
        am->num_conns++;
    }
}

/*
 * The shared-secret check of one new connection, on a thread of its own so
 * that a slow or silent peer holds up nobody; a peer that passes joins the
 * loop, one that fails is logged and closed.
 */
#define AGGMGR_MAX_CHECKS 64 /* connections proving the secret at once */

typedef struct aggmgr__auth_job {
    aggmgr_t    *am;
    int          fd;
    agg_status_t st;
    char         peer[64];
    char         why[256];
} aggmgr__auth_job_t;

static void aggmgr__auth_work(agg_loop_t *loop, void *arg)
{
    aggmgr__auth_job_t *job = arg;

    (void)loop;
    switch (agg_tls_peek_hello(job->fd, AGGMGR_IO_TIMEOUT_MS)) {
    case 1:
        job->st = agg_tls_server(job->fd, &job->am->auth, AGGMGR_IO_TIMEOUT_MS, job->why,
                                 sizeof(job->why));
        break;
    case 0:
        job->st = AGG_ERR_AUTH;
        snprintf(job->why, sizeof(job->why), "it speaks plain, and this manager holds a "
                 "shared secret: only TLS keyed by it is served (set AGG_AM_SECRET or "
                 "am_key_file on the client)");
        break;
    default:
        job->st = AGG_ERR_TIMEOUT;
        snprintf(job->why, sizeof(job->why), "it said nothing in %d ms, or closed",
                 AGGMGR_IO_TIMEOUT_MS);
        break;
    }
}

static void aggmgr__auth_done(agg_loop_t *loop, void *arg)
{
    aggmgr__auth_job_t *job = arg;

    (void)loop;
    if (job->st == AGG_OK && job->am->listen_fd >= 0) { /* not shutting down */
        aggmgr__add_conn(job->am, job->fd);
    } else {
        agg_warn("connection from %s refused: %s", job->peer, job->why);
        close(job->fd);
    }
    free(job);
}

static void aggmgr__on_listen(agg_loop_t *loop, int lfd, short revents, void *arg)
{
    aggmgr_t *am = arg;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    aggmgr__auth_job_t *job;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    agg_status_t st;

    (void)revents;
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && aggmgr__evict(am) >= 0) {
        /* out of descriptors: a quiet peer that holds nothing makes room */
        sl = sizeof(ss);
        fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    }
    if (fd < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            agg_warn("accept failed: %s", strerror(errno));
        }
        return;
    }
    agg_tls_forget(fd); /* a closed TLS socket's session left under this number */
    /* with a secret every peer opens TLS keyed by it, in a worker's time */
    if (!am->auth.set) {
        aggmgr__add_conn(am, fd);
        return;
    }
    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        close(fd);
        return;
    }
    job->am = am;
    job->fd = fd;
    agg_sock_addr_string((struct sockaddr *)&ss, job->peer, sizeof(job->peer));
    st = agg_loop_spawn(loop, AGGMGR_MAX_CHECKS, aggmgr__auth_work, aggmgr__auth_done, job);
    if (st != AGG_OK) {
        agg_warn("%s; refusing the connection from %s", st == AGG_ERR_NO_RESOURCE ?
                 "64 connections are proving the secret already" : "no thread to check it",
                 job->peer);
        close(fd);
        free(job);
    }
}

/* SIGHUP: the file and environment read again (agg_conf_reload says what changed). */
static void aggmgr__reload(aggmgr_t *am)
{
    agg_conf_t fresh;
    char err[512];

    if (agg_conf_load(&fresh, am->config_path, environ, err, sizeof(err)) != AGG_OK) {
        agg_error("SIGHUP: reload failed, keeping the old settings: %s", err);
        return;
    }
    agg_conf_reload(&am->conf, &fresh, AGG_CONF_SCOPE_MANAGER, "aggmgr");
}

/* The switchsims that did not answer in time; SIGHUP. */
static int aggmgr__tick(agg_loop_t *loop, void *arg)
{
    aggmgr_t *am = arg;
    int next;

    (void)loop;
    if (am->reload != NULL && *am->reload) {
        *am->reload = 0;
        aggmgr__reload(am);
    }
    next = aggmgr_sims_expire(am);
    aggmgr_sims_away_expire(am);
    aggmgr_jobs_expire(am);
    aggmgr_journal_flush(am);
    return next >= 0 && next < 100 ? next : 100;
}

agg_status_t aggmgr_server_start(aggmgr_t *am)
{
    agg_status_t st;

    st = agg_loop_create(&am->loop, AGGMGR_MAX_CONNS + 8); /* the listener, the loop's own */
    if (st == AGG_OK && am->listen_fd >= 0) {
        st = agg_loop_add(am->loop, am->listen_fd, POLLIN, NULL, aggmgr__on_listen, am);
    }
    if (st == AGG_OK && (agg_loop_timer(am->loop, 100, aggmgr__tick, am) < 0 ||
                         agg_loop_timer(am->loop, 500, aggmgr__stalled, am) < 0)) {
        st = AGG_ERR_NO_MEMORY;
    }
    if (st != AGG_OK) {
        agg_error("cannot start the event loop: %s", agg_status_string(st));
    }
    return st;
}

void aggmgr_server_adopt(aggmgr_t *am, int fd)
{
    aggmgr__add_conn(am, fd);
}

agg_status_t aggmgr_server_run(aggmgr_t *am, volatile int *stop, volatile int *reload)
{
    agg_status_t st;

    am->reload = reload;
    st = aggmgr_server_start(am);
    return st == AGG_OK ? agg_loop_run(am->loop, stop) : st;
}

void aggmgr_server_close(aggmgr_t *am)
{
    aggmgr_job_t *job;

    if (am->journal.path[0] != '\0') {
        /* the journal keeps the jobs for the next manager, the switchsims their groups */
        aggmgr_journal_close(am);
        am->keep_parts = 1;
    }
    while ((job = am->jobs) != NULL) {
        aggmgr_job_destroy(am, job->id);
    }
    /* the switchsims hear the teardowns out before their connections close */
    if (aggmgr_sims_settle(am, AGGMGR_IO_TIMEOUT_MS) != 0) {
        agg_warn("%u requests to switchsims unanswered at exit", am->num_reqs);
    }
    while (am->ops != NULL) {
        aggmgr_op_t *op = am->ops;

        am->ops = op->next;
        aggmgr_op_free(op);
    }
    free(am->reqs);
    am->reqs     = NULL;
    am->num_reqs = am->cap_reqs = 0;
    while (am->num_conns > 0) {
        aggmgr_conn_t *c = &am->conns[--am->num_conns];

        if (c->fd >= 0) {
            agg_tls_close(c->fd);
            free(c->rx);
            agg_txq_free(&c->txq);
        }
    }
    for (int i = 0; i < am->num_sims; ++i) {
        am->sims[i].fd = -1;
        free(am->sims[i].served);
        am->sims[i].served     = NULL;
        am->sims[i].num_served = 0;
    }
    if (am->listen_fd >= 0) {
        close(am->listen_fd);
        am->listen_fd = -1;
    }
    agg_loop_destroy(am->loop); /* waits for secret checks still running */
    am->loop = NULL;
}
