/*
 * The control server: one poll() loop over the listening socket and every
 * peer. A request is answered at once, or, when switchsims must act on it
 * first (a group, the counters), once they have (aggmgr_simreq.c): the loop
 * never waits on one peer. A peer that sends a malformed message gets an
 * error reply and is disconnected.
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

        am->auth_pipe[0] = am->auth_pipe[1] = -1;
        am->off_loopback = getsockname(am->listen_fd, (struct sockaddr *)&ss, &sl) != 0 ||
                           !agg_auth_addr_is_loopback((struct sockaddr *)&ss);
        if (am->off_loopback) {
            st = agg_auth_load(&am->auth, agg_conf_str(&am->conf, AGG_CONF_AM_KEY_FILE), why,
                               sizeof(why));
            if (st == AGG_OK && !am->auth.set) {
                snprintf(why, sizeof(why), "aggmgr listens on %s, not loopback: set "
                         "AGG_AM_SECRET or am_key_file (every peer must prove it)", addr);
                st = AGG_ERR_CONFIG;
            }
            if (st == AGG_OK && pipe2(am->auth_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
                snprintf(why, sizeof(why), "pipe: %s", strerror(errno));
                st = AGG_ERR_IO;
            }
            if (st != AGG_OK) {
                agg_error("%s", why);
                close(am->listen_fd);
                am->listen_fd = -1;
                return st;
            }
        }
    }
    snprintf(am->listen_addr, sizeof(am->listen_addr), "%s:%d", host, *bound_port);
    return AGG_OK;
}

/* ---- sending: never waiting on a peer ------------------------------------ */

/* Writes what waits; 0, or -1 when the peer is gone (errno). */
static int aggmgr__conn_flush(aggmgr_conn_t *c)
{
    while (c->tx_off < c->tx_len) {
        ssize_t n = send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        c->tx_off     += (size_t)n;
        c->tx_moved_ms = agg_time_ms();
    }
    c->tx_off = c->tx_len = 0;
    return 0;
}

agg_status_t aggmgr_conn_send(aggmgr_t *am, int fd, uint16_t type, uint32_t txid,
                              const void *body, size_t len)
{
    aggmgr_conn_t *c = NULL;
    agg_msg_hdr_t hdr;
    size_t need;
    int i;

    for (i = 0; i < am->num_conns && c == NULL; ++i) {
        if (am->conns[i].fd == fd) {
            c = &am->conns[i];
        }
    }
    if (c == NULL) {
        return agg_msg_send(fd, type, txid, body, len, AGGMGR_IO_TIMEOUT_MS);
    }
    if (len > AGG_WIRE_MAX_BODY) {
        return AGG_ERR_INVALID_PARAM;
    }
    need = c->tx_len - c->tx_off + sizeof(hdr) + len;
    if (need > AGGMGR_TX_MAX) {
        agg_warn("peer fd %d (pid %u) reads nothing: %zu bytes wait for it", fd, c->pid,
                 c->tx_len - c->tx_off);
        return AGG_ERR_IO;
    }
    if (c->tx_off > 0 && c->tx_len + sizeof(hdr) + len > c->tx_cap) {
        memmove(c->tx, c->tx + c->tx_off, c->tx_len - c->tx_off);
        c->tx_len -= c->tx_off;
        c->tx_off  = 0;
    }
    if (c->tx_len + sizeof(hdr) + len > c->tx_cap) {
        size_t cap = c->tx_cap ? c->tx_cap : 4096;
        uint8_t *p;

        while (cap < c->tx_len + sizeof(hdr) + len) {
            cap *= 2;
        }
        p = realloc(c->tx, cap);
        if (p == NULL) {
            return AGG_ERR_NO_MEMORY;
        }
        c->tx     = p;
        c->tx_cap = cap;
    }
    if (c->tx_off == c->tx_len) {
        c->tx_moved_ms = agg_time_ms(); /* nothing waited: its clock starts now */
    }
    agg_wire_hdr_encode(&hdr, type, (uint32_t)len, txid);
    memcpy(c->tx + c->tx_len, &hdr, sizeof(hdr));
    if (len > 0) {
        memcpy(c->tx + c->tx_len + sizeof(hdr), body, len);
    }
    c->tx_len += sizeof(hdr) + len;
    return aggmgr__conn_flush(c) == 0 ? AGG_OK : AGG_ERR_IO;
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
    int i, k, slot;

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
    for (slot = 0; slot < am->num_sims && am->sims[slot].fd >= 0; ++slot) {
    }
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
    *sim    = (aggmgr_sim_t){
        .fd = c->fd, .id = am->next_sim_id, .pid = reg->pid, .an_osts = reg->an_osts,
        .an_payload_per_ost = reg->an_payload_per_ost, .an_max_groups = reg->an_max_groups,
        .an_sat_flows = reg->an_sat_flows, .workers = reg->workers,
    };
    snprintf(sim->host, sizeof(sim->host), "%s", reg->host);
    snprintf(sim->data_addr, sizeof(sim->data_addr), "%s", reg->data_addr);
    if (slot == am->num_sims) {
        am->num_sims++;
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
    return AGG_OK;
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
static agg_status_t aggmgr__conn_read(aggmgr_t *am, aggmgr_conn_t *c)
{
    size_t want = c->rx_len < sizeof(agg_msg_hdr_t) ? sizeof(agg_msg_hdr_t) :
                  sizeof(agg_msg_hdr_t) + c->rx_hdr.length;
    agg_status_t st;
    ssize_t n;
    uint8_t *p;

    if (c->rx_cap < want) {
        p = realloc(c->rx, want);
        if (p == NULL) {
            return AGG_ERR_NO_MEMORY;
        }
        c->rx     = p;
        c->rx_cap = want;
    }
    n = recv(c->fd, c->rx + c->rx_len, want - c->rx_len, MSG_DONTWAIT);
    if (n == 0) {
        return AGG_ERR_IO; /* hung up */
    }
    if (n < 0) {
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? AGG_OK :
                                                                             AGG_ERR_IO;
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
    c->rx_len = 0;
    st = aggmgr__dispatch(am, c, c->rx_hdr, c->rx + sizeof(agg_msg_hdr_t));
    if (c->rx_cap > 65536) {
        /* a large request was a one-off: do not keep its buffer */
        free(c->rx);
        c->rx     = NULL;
        c->rx_cap = 0;
    }
    return st;
}

static void aggmgr__conn_close(aggmgr_t *am, int idx)
{
    aggmgr_conn_t *c = &am->conns[idx];
    int fd = c->fd, sim = aggmgr_sim_of_fd(am, fd);

    if (sim >= 0) {
        aggmgr_sim_lost(am, sim);
    } else {
        aggmgr_conn_release(am, fd);
    }
    aggmgr__conn_flush(c); /* a last answer (a refusal, say) goes if it can */
    close(fd);
    free(c->rx);
    free(c->tx);
    am->conns[idx] = am->conns[--am->num_conns];
}

typedef struct aggmgr__auth_job {
    aggmgr_t *am;
    int       fd;
    char      peer[64];
} aggmgr__auth_job_t;

/*
 * The shared-secret check of one new connection, in a thread of its own so
 * that a slow or silent peer holds up nobody; a peer that passes goes to the
 * event loop through the pipe, one that fails is logged and closed.
 */
#define AGGMGR_MAX_CHECKS 64 /* connections proving the secret at once */
static unsigned aggmgr__checks;  /* atomic */

static void *aggmgr__auth_main(void *arg)
{
    aggmgr__auth_job_t *job = arg;
    char why[256] = "";

    if (agg_auth_server(job->fd, &job->am->auth, AGGMGR_IO_TIMEOUT_MS, why, sizeof(why)) ==
        AGG_OK) {
        if (write(job->am->auth_pipe[1], &job->fd, sizeof(job->fd)) ==
            (ssize_t)sizeof(job->fd)) {
            job->fd = -1;
        } else {
            snprintf(why, sizeof(why), "cannot hand it to the main loop: %s", strerror(errno));
        }
    }
    if (job->fd >= 0) {
        agg_warn("connection from %s refused: %s", job->peer, why);
        close(job->fd);
    }
    __atomic_fetch_sub(&aggmgr__checks, 1, __ATOMIC_RELAXED);
    free(job);
    return NULL;
}

static void aggmgr__add_conn(aggmgr_t *am, int fd)
{
    if (am->num_conns >= AGGMGR_MAX_CONNS) {
        agg_warn("too many connections (%d); refusing one", am->num_conns);
        close(fd);
        return;
    }
    agg_sock_nodelay(fd);
    memset(&am->conns[am->num_conns], 0, sizeof(am->conns[0]));
    am->conns[am->num_conns++].fd = fd;
}

static void aggmgr__accept(aggmgr_t *am)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(am->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);

    if (fd < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            agg_warn("accept failed: %s", strerror(errno));
        }
        return;
    }
    /* off loopback a peer proves the secret first (a local one never does: both
       ends decide from the other's address) */
    if (am->off_loopback && !agg_auth_addr_is_loopback((struct sockaddr *)&ss)) {
        aggmgr__auth_job_t *job;
        pthread_attr_t attr;
        pthread_t t;

        if (__atomic_fetch_add(&aggmgr__checks, 1, __ATOMIC_RELAXED) >= AGGMGR_MAX_CHECKS) {
            __atomic_fetch_sub(&aggmgr__checks, 1, __ATOMIC_RELAXED);
            agg_warn("%d connections are proving the secret already; refusing one",
                     AGGMGR_MAX_CHECKS);
            close(fd);
            return;
        }
        job = calloc(1, sizeof(*job));
        if (job == NULL) {
            __atomic_fetch_sub(&aggmgr__checks, 1, __ATOMIC_RELAXED);
            close(fd);
            return;
        }
        job->am = am;
        job->fd = fd;
        agg_sock_addr_string((struct sockaddr *)&ss, job->peer, sizeof(job->peer));
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, aggmgr__auth_main, job) != 0) {
            agg_warn("cannot check the connection from %s; refusing it", job->peer);
            __atomic_fetch_sub(&aggmgr__checks, 1, __ATOMIC_RELAXED);
            close(fd);
            free(job);
        }
        pthread_attr_destroy(&attr);
        return;
    }
    aggmgr__add_conn(am, fd);
}

static void aggmgr__reload(aggmgr_t *am)
{
    agg_conf_t fresh;
    char err[512];
    int id;

    if (agg_conf_load(&fresh, am->config_path, environ, err, sizeof(err)) != AGG_OK) {
        agg_error("SIGHUP: reload failed, keeping the old settings: %s", err);
        return;
    }
    for (id = 0; id < AGG_CONF__COUNT; ++id) {
        if ((agg_conf_table[id].flags & AGG_CONF_F_RELOADABLE) &&
            fresh.v[id].source != AGG_CONF_SRC_DEFAULT) {
            am->conf.v[id] = fresh.v[id];
        }
    }
    agg_log_set_level((int)agg_conf_int(&am->conf, AGG_CONF_LOG_LEVEL));
    agg_info("SIGHUP: reloadable settings reloaded");
}

agg_status_t aggmgr_server_run(aggmgr_t *am, volatile int *stop, volatile int *reload)
{
    struct pollfd pfds[AGGMGR_MAX_CONNS + 2];
    int n, i, rc, next;

    while (!*stop) {
        if (*reload) {
            *reload = 0;
            aggmgr__reload(am);
        }
        pfds[0].fd     = am->listen_fd;
        pfds[0].events = POLLIN;
        for (i = 0; i < am->num_conns; ++i) {
            pfds[i + 1].fd     = am->conns[i].fd;
            pfds[i + 1].events = POLLIN;
            if (am->conns[i].tx_off < am->conns[i].tx_len) {
                pfds[i + 1].events |= POLLOUT;
            }
        }
        n  = am->num_conns;
        pfds[n + 1].fd     = am->off_loopback ? am->auth_pipe[0] : -1;
        pfds[n + 1].events = POLLIN;
        next = aggmgr_sims_expire(am); /* switchsims that did not answer in time */
        rc   = poll(pfds, (nfds_t)n + 2, next >= 0 && next < 500 ? next : 500);
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            agg_error("poll failed: %s", strerror(errno));
            return AGG_ERR_IO;
        }
        /* Walk backwards: closing swaps the last connection into the hole. */
        for (i = n - 1; i >= 0; --i) {
            aggmgr_conn_t *c = &am->conns[i];

            if (c->tx_off < c->tx_len) {
                const char *why = NULL;

                if ((pfds[i + 1].revents & POLLOUT) && aggmgr__conn_flush(c) != 0) {
                    why = strerror(errno);
                } else if (c->tx_off < c->tx_len &&
                           agg_time_ms() - c->tx_moved_ms > AGGMGR_IO_TIMEOUT_MS) {
                    why = "it read nothing of what waits for it for 2 s";
                }
                if (why != NULL) {
                    agg_warn("dropping peer fd %d (pid %u): %s", c->fd, c->pid, why);
                    aggmgr__conn_close(am, i);
                    continue;
                }
            }
            if ((pfds[i + 1].revents & ~POLLOUT) == 0) {
                continue;
            }
            if (aggmgr__conn_read(am, c) != AGG_OK) {
                aggmgr__conn_close(am, i);
            }
        }
        if (pfds[0].revents & POLLIN) {
            aggmgr__accept(am);
        }
        if (pfds[n + 1].revents & POLLIN) {
            int fd;

            while (read(am->auth_pipe[0], &fd, sizeof(fd)) == (ssize_t)sizeof(fd)) {
                aggmgr__add_conn(am, fd);
            }
        }
    }
    return AGG_OK;
}

void aggmgr_server_close(aggmgr_t *am)
{
    aggmgr_job_t *job;

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
        --am->num_conns;
        close(am->conns[am->num_conns].fd);
        free(am->conns[am->num_conns].rx);
    }
    for (int i = 0; i < am->num_sims; ++i) {
        am->sims[i].fd = -1;
    }
    if (am->listen_fd >= 0) {
        close(am->listen_fd);
        am->listen_fd = -1;
    }
    for (int i = 0; i < 2; ++i) {
        if (am->off_loopback && am->auth_pipe[i] >= 0) {
            close(am->auth_pipe[i]);
            am->auth_pipe[i] = -1;
        }
    }
}
