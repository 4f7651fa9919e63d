/*
 * switchsim's TCP data port: members on other hosts send their fragments
 * here (agg/net.h) and get each result back. One thread serves every
 * connection from one poll() loop: it reads what arrived, pushes each
 * fragment into the member's leaf with the same engine ranks run on shared
 * memory, and keeps a fragment whose slot is busy (or, reproducible, not its
 * turn yet) at the head of its connection until it goes in, reading no more
 * from that connection meanwhile. Results go out through the node's MEMBER
 * down ports, sent by whichever switchsim thread publishes them (this one,
 * or a worker finishing what a local rank left).
 *
 * A group whose tree spans switchsims has a part here and parts there:
 * this switchsim keeps one outgoing link per other switchsim it sends to
 * (a part's partial up to its parent part, the result down to child parts)
 * and reads what other switchsims send it on the connections they opened,
 * which say so in their HELLO (channel AGG_NET_PEER).
 *
 * Off loopback every connection first proves the shared secret
 * (agg/auth.h). Nothing is allocated per fragment: a connection's buffers
 * are sized for its group's payload when it joins.
 */
#include "switchsim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/auth.h"
#include "agg/log.h"
#include "agg/net.h"
#include "agg/reduce.h"
#include "agg/sock.h"

#define SWITCHSIM_NET_MAX_CONNS 1024
#define SWITCHSIM_NET_MAX_LINKS 64
#define SWITCHSIM_NET_MAX_MSG   (2u * (64u << 20) + 64u) /* a SAT chunk of accumulators */
#define SWITCHSIM_NET_SEND_MS   10000 /* a member that reads nothing for this long is cut off */

typedef struct switchsim_conn {
    int             fd;         /* -1: free */
    uint32_t        gen;        /* bumped at every use, so stale bindings miss */
    pthread_mutex_t tx_lock;    /* results are sent by several threads */
    uint8_t        *tx;         /* a result narrowed to the wire type */
    size_t          tx_cap;
    uint32_t        group_id;
    uint8_t         tree;
    uint32_t        part;
    uint32_t        channel;
    uint8_t        *rx;         /* what arrived and is not handled yet */
    size_t          rx_cap, rx_len;
    int             stalled;    /* the head fragment waits for its slot */
    int             is_peer;    /* another switchsim: UP and DOWN of any group */
    int             off_loopback; /* it proves the shared secret first */
    char            peer[64];
} switchsim_conn_t;

/* An outgoing link to another switchsim's data port. */
typedef struct switchsim_link {
    char            addr[AGG_WIRE_NAME_LEN];
    int             fd;         /* -1: broken (sends are dropped; the next group
                                   configured over it reconnects) */
    int32_t         broke;      /* why it broke, until aggmgr is told; 0 none */
    pthread_mutex_t lock;
} switchsim_link_t;

struct switchsim_net {
    switchsim_t      *sim;
    int               listen_fd;
    int               off_loopback; /* peers prove the shared secret */
    agg_auth_t        auth;
    char              addr[AGG_WIRE_NAME_LEN]; /* advertised "ip:port" */
    pthread_t         thread;
    int               started;
    switchsim_conn_t  conns[SWITCHSIM_NET_MAX_CONNS];
    switchsim_link_t  links[SWITCHSIM_NET_MAX_LINKS];
    int               num_links;
    agg_dp_counters_t ctr;      /* this thread's driving */
    agg_dp_driver_t   drv;
};

static void switchsim__conn_close(switchsim_net_t *net, switchsim_conn_t *c, const char *why)
{
    if (c->fd < 0) {
        return;
    }
    if (why != NULL) {
        agg_info("data connection from %s (group %u channel %u) closed: %s", c->peer,
                 c->group_id, c->channel, why);
    }
    pthread_mutex_lock(&c->tx_lock);
    close(c->fd);
    c->fd = -1;
    c->gen++;
    pthread_mutex_unlock(&c->tx_lock);
    c->rx_len  = 0;
    c->stalled = 0;
    (void)net;
}

/* ---- results: a MEMBER down port's send (any switchsim thread) -------- */

static agg_status_t switchsim__net_down_part(switchsim_group_t *g, uint32_t port,
                                             const agg_dp_slot_t *slot);

static agg_status_t switchsim__net_down(void *ctx, uint32_t port, const agg_dp_slot_t *slot)
{
    switchsim_group_t *g = ctx;
    switchsim_net_t *net = g->sim->net;
    const agg_dp_port_t *p = agg_dp_port(g->view.seg, port);
    uint32_t ch = p->node, bind;
    agg_net_msg_t m = {
        .magic = AGG_NET_MAGIC, .type = AGG_NET_RESULT, .tree = g->tree, .kind = slot->kind,
        .coll = slot->coll, .op = slot->op, .dtype = slot->dtype, .group_id = g->id,
        .channel = ch, .status = slot->status, .n = slot->cur, .count = slot->count,
        .root = slot->root, .total = slot->total,
    };
    const void *data = NULL;
    switchsim_conn_t *c;
    agg_status_t st;

    if (p->kind == AGG_DP_PORT_NET && net != NULL) {
        return switchsim__net_down_part(g, port, slot);
    }
    if (p->kind != AGG_DP_PORT_MEMBER || net == NULL || ch >= g->num_members) {
        return AGG_ERR_NOT_SUPPORTED;
    }
    bind = __atomic_load_n(&g->member_conn[ch], __ATOMIC_ACQUIRE);
    if (bind == 0) {
        return AGG_OK; /* the member left: nobody to tell */
    }
    c = &net->conns[bind - 1];
    pthread_mutex_lock(&c->tx_lock);
    if (c->fd < 0 || c->gen != g->member_gen[ch]) {
        pthread_mutex_unlock(&c->tx_lock);
        return AGG_OK;
    }
    if (slot->status == AGG_OK && slot->kind == AGG_DP_KIND_DATA && slot->count > 0) {
        size_t bytes = (size_t)slot->count * agg_dtype_size(slot->dtype);

        if (bytes <= c->tx_cap) {
            if (agg_dtype_acc(slot->dtype) == slot->dtype) {
                data = agg_dp_acc((agg_dp_slot_t *)slot);
            } else {
                agg_narrow_fn(slot->dtype)(c->tx, agg_dp_acc((agg_dp_slot_t *)slot),
                                           slot->count);
                data = c->tx;
            }
            m.bytes = (uint32_t)bytes;
        } else {
            m.status = AGG_ERR_BAD_FRAGMENT;
        }
    }
    st = agg_net_send(c->fd, &m, data, SWITCHSIM_NET_SEND_MS, NULL, NULL);
    if (st != AGG_OK) {
        /* the receiving thread sees the hang-up and frees the connection */
        agg_warn("group %u: result %llu to %s not sent: %s", g->id, (unsigned long long)m.n,
                 c->peer, agg_status_string(st));
        shutdown(c->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&c->tx_lock);
    return AGG_OK;
}

int switchsim_net_broken(switchsim_t *sim, char *addr, size_t len, int32_t *why)
{
    switchsim_net_t *net = sim->net;
    int i, found = 0;

    for (i = 0; net != NULL && !found && i < net->num_links; ++i) {
        switchsim_link_t *l = &net->links[i];

        pthread_mutex_lock(&l->lock);
        if (l->broke != 0) {
            snprintf(addr, len, "%s", l->addr);
            *why     = l->broke;
            l->broke = 0;
            found    = 1;
        }
        pthread_mutex_unlock(&l->lock);
    }
    return found;
}

/* Sends a message on a link to another switchsim; a broken link drops it. */
static void switchsim__link_send(switchsim_net_t *net, int li, const agg_net_msg_t *m,
                                 const void *data)
{
    switchsim_link_t *l = &net->links[li];
    agg_status_t st;

    pthread_mutex_lock(&l->lock);
    if (l->fd >= 0) {
        st = agg_net_send(l->fd, m, data, SWITCHSIM_NET_SEND_MS, NULL, NULL);
        if (st != AGG_OK) {
            agg_error("link to switchsim %s broke (%s): groups across it time out until it "
                      "is made again", l->addr, agg_status_string(st));
            close(l->fd);
            l->fd    = -1;
            l->broke = st; /* the control thread tells aggmgr */
        }
    }
    pthread_mutex_unlock(&l->lock);
}

/* Accumulator bytes a partial or result of this shape carries. */
static uint32_t switchsim__acc_bytes(int32_t status, uint8_t kind, uint8_t dtype,
                                     uint32_t count, int empty)
{
    if (status != AGG_OK || kind != AGG_DP_KIND_DATA || empty || count == 0) {
        return 0;
    }
    return count * (uint32_t)agg_dtype_acc_size(dtype);
}

/* A NET up port: this part's partial to its parent part in another switchsim. */
static agg_status_t switchsim__net_up(void *ctx, uint32_t port, const agg_dp_contrib_t *c)
{
    switchsim_group_t *g = ctx;
    const agg_dp_port_t *p = agg_dp_port(g->view.seg, port);
    agg_net_msg_t m = {
        .magic = AGG_NET_MAGIC, .type = AGG_NET_UP, .tree = g->tree, .kind = c->kind,
        .coll = c->coll, .op = c->op, .dtype = c->dtype, .group_id = g->id,
        .part = g->port_part[port], .channel = p->node, .extra = p->position,
        .status = c->status, .n = c->n, .count = c->count, .root = c->root,
        .total = c->total, .flags = c->empty ? AGG_NET_F_EMPTY : 0,
    };

    m.bytes = switchsim__acc_bytes(c->status, c->kind, c->dtype, c->count, c->empty);
    switchsim__link_send(g->sim->net, g->port_link[port], &m, c->data);
    return AGG_OK;
}

/* A NET down port: the result to a child part in another switchsim. */
static agg_status_t switchsim__net_down_part(switchsim_group_t *g, uint32_t port,
                                             const agg_dp_slot_t *slot)
{
    agg_net_msg_t m = {
        .magic = AGG_NET_MAGIC, .type = AGG_NET_DOWN, .tree = g->tree, .kind = slot->kind,
        .coll = slot->coll, .op = slot->op, .dtype = slot->dtype, .group_id = g->id,
        .part = g->port_part[port], .status = slot->status, .n = slot->cur,
        .count = slot->count, .root = slot->root, .total = slot->total,
    };

    m.bytes = switchsim__acc_bytes(slot->status, slot->kind, slot->dtype, slot->count, 0);
    switchsim__link_send(g->sim->net, g->port_link[port], &m,
                         agg_dp_acc((agg_dp_slot_t *)slot));
    return AGG_OK;
}

int switchsim_net_link(switchsim_t *sim, const char *addr)
{
    switchsim_net_t *net = sim->net;
    int timeout = (int)agg_conf_int(&sim->conf, AGG_CONF_CONNECT_TIMEOUT_MS), i, port, fd;
    agg_net_msg_t hello = {.magic = AGG_NET_MAGIC, .type = AGG_NET_HELLO,
                           .channel = AGG_NET_PEER}, reply;
    char host[AGG_WIRE_NAME_LEN], why[256];
    switchsim_link_t *l = NULL;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    agg_status_t st;

    if (net == NULL) {
        agg_error("a group spans switchsims, and this one has no TCP data port "
                  "(set sim_data_addr)");
        return -1;
    }
    for (i = 0; i < net->num_links; ++i) {
        if (strcmp(net->links[i].addr, addr) == 0) {
            l = &net->links[i];
            break;
        }
    }
    if (l == NULL) {
        if (net->num_links >= SWITCHSIM_NET_MAX_LINKS) {
            agg_error("links to %d switchsims already; not one more (%s)",
                      SWITCHSIM_NET_MAX_LINKS, addr);
            return -1;
        }
        l     = &net->links[net->num_links++];
        l->fd = -1;
        pthread_mutex_init(&l->lock, NULL);
        snprintf(l->addr, sizeof(l->addr), "%s", addr);
    }
    pthread_mutex_lock(&l->lock);
    fd = l->fd;
    pthread_mutex_unlock(&l->lock);
    if (fd >= 0) {
        return (int)(l - net->links);
    }
    if (agg_conf_addr_split(addr, host, sizeof(host), &port) != AGG_OK) {
        agg_error("switchsim data port \"%s\" is not host:port", addr);
        return -1;
    }
    st = agg_sock_connect(host, port, timeout, &fd);
    if (st != AGG_OK) {
        agg_error("cannot reach switchsim at %s: %s", addr, agg_status_string(st));
        return -1;
    }
    agg_net_tune(fd);
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0 ||
        !agg_auth_addr_is_loopback((struct sockaddr *)&ss)) {
        st = agg_auth_client(fd, &net->auth, timeout, why, sizeof(why));
        if (st != AGG_OK) {
            agg_error("switchsim at %s: %s", addr, why);
            close(fd);
            return -1;
        }
    }
    st = agg_net_send(fd, &hello, NULL, timeout, NULL, NULL);
    if (st == AGG_OK) {
        st = agg_sock_recv_all(fd, &reply, sizeof(reply), timeout);
    }
    if (st == AGG_OK && (reply.magic != AGG_NET_MAGIC || reply.type != AGG_NET_HELLO ||
                         reply.status != AGG_OK)) {
        st = reply.magic == AGG_NET_MAGIC && reply.status != AGG_OK ? reply.status :
                                                                       AGG_ERR_PROTOCOL;
    }
    if (st != AGG_OK) {
        agg_error("switchsim at %s refused the link: %s", addr, agg_status_string(st));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    pthread_mutex_lock(&l->lock);
    l->fd = fd;
    pthread_mutex_unlock(&l->lock);
    agg_info("link to switchsim %s up", addr);
    return (int)(l - net->links);
}

void switchsim_net_group_init(switchsim_t *sim, switchsim_group_t *g)
{
    g->sim          = sim;
    g->netops.up    = switchsim__net_up;
    g->netops.down  = switchsim__net_down;
    g->netops.ctx   = g;
    g->view.net     = &g->netops;
}

/* ---- joining ------------------------------------------------------------ */

/* Auth (off loopback) and HELLO on a new connection; the answer says why not. */
static agg_status_t switchsim__net_join(switchsim_net_t *net, switchsim_conn_t *c, int timeout)
{
    switchsim_t *sim = net->sim;
    agg_net_msg_t hello, reply = {.magic = AGG_NET_MAGIC, .type = AGG_NET_HELLO};
    switchsim_group_t *g;
    char why[256];
    size_t need;
    agg_status_t st;

    if (c->off_loopback) {
        st = agg_auth_server(c->fd, &net->auth, timeout, why, sizeof(why));
        if (st != AGG_OK) {
            agg_warn("data connection from %s refused: %s", c->peer, why);
            return st;
        }
    }
    st = agg_sock_recv_all(c->fd, &hello, sizeof(hello), timeout);
    if (st != AGG_OK) {
        return st;
    }
    if (hello.magic != AGG_NET_MAGIC || hello.type != AGG_NET_HELLO || hello.bytes != 0) {
        agg_warn("data connection from %s: not a HELLO of this stack (magic 0x%08x)",
                 c->peer, hello.magic);
        return AGG_ERR_PROTOCOL;
    }
    if (hello.channel == AGG_NET_PEER) {
        /* another switchsim: its messages name their group's part each */
        c->is_peer = 1;
        c->rx_cap  = 4u << 20;
        c->rx      = malloc(c->rx_cap);
        st         = c->rx != NULL ? AGG_OK : AGG_ERR_NO_MEMORY;
        reply.status = st;
        if (agg_net_send(c->fd, &reply, NULL, timeout, NULL, NULL) != AGG_OK && st == AGG_OK) {
            st = AGG_ERR_IO;
        }
        return st;
    }
    pthread_rwlock_rdlock(&sim->lock);
    g  = switchsim_group_find(sim, hello.group_id, hello.tree, hello.part);
    st = AGG_OK;
    if (g == NULL) {
        st = AGG_ERR_GROUP_ID;
    } else if (hello.n != g->job_key) {
        st = AGG_ERR_AUTH; /* a client of another job */
    } else if (hello.channel >= g->num_members || !g->remote[hello.channel]) {
        st = AGG_ERR_INVALID_PARAM; /* a local member maps the segment instead */
    } else {
        uint32_t bound = __atomic_load_n(&g->member_conn[hello.channel], __ATOMIC_ACQUIRE);

        if (bound != 0 && net->conns[bound - 1].fd >= 0 &&
            net->conns[bound - 1].gen == g->member_gen[hello.channel]) {
            st = AGG_ERR_GROUP_JOIN; /* the channel is someone's already */
        }
    }
    if (st == AGG_OK) {
        need = g->view.seg->payload;
        c->tx     = malloc(need);
        c->tx_cap = need;
        c->rx_cap = 2 * (sizeof(agg_net_msg_t) + need) + (64u << 10);
        c->rx     = malloc(c->rx_cap);
        if (c->tx == NULL || c->rx == NULL) {
            st = AGG_ERR_NO_MEMORY;
        } else {
            c->group_id = g->id;
            c->tree     = g->tree;
            c->part     = g->part;
            c->channel  = hello.channel;
            g->member_gen[hello.channel] = c->gen;
            __atomic_store_n(&g->member_conn[hello.channel], (uint32_t)(c - net->conns) + 1,
                             __ATOMIC_RELEASE);
        }
    }
    pthread_rwlock_unlock(&sim->lock);
    if (st != AGG_OK) {
        agg_warn("data connection from %s for group %u channel %u refused: %s", c->peer,
                 hello.group_id, hello.channel, agg_status_string(st));
    }
    reply.status   = st;
    reply.group_id = hello.group_id;
    if (agg_net_send(c->fd, &reply, NULL, timeout, NULL, NULL) != AGG_OK && st == AGG_OK) {
        st = AGG_ERR_IO;
    }
    return st;
}

static void switchsim__net_accept(switchsim_net_t *net)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    switchsim_conn_t *c = NULL;
    int fd, i, timeout;

    fd = accept4(net->listen_fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS && c == NULL; ++i) {
        if (net->conns[i].fd < 0) {
            c = &net->conns[i];
        }
    }
    if (c == NULL) {
        agg_warn("data port: %d connections already; refusing one", SWITCHSIM_NET_MAX_CONNS);
        close(fd);
        return;
    }
    /* a worker sending a result takes the lock and finds the old use gone */
    pthread_mutex_lock(&c->tx_lock);
    free(c->rx);
    free(c->tx);
    c->rx = c->tx = NULL;
    c->rx_len = c->tx_cap = 0;
    c->is_peer = 0;
    c->off_loopback = net->off_loopback && !agg_auth_addr_is_loopback((struct sockaddr *)&ss);
    c->fd = fd;
    c->gen++;
    pthread_mutex_unlock(&c->tx_lock);
    agg_sock_addr_string((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    agg_net_tune(fd);
    /* a member joins once per group: blocking here, briefly, is fine */
    timeout = (int)agg_conf_int(&net->sim->conf, AGG_CONF_CONNECT_TIMEOUT_MS);
    if (switchsim__net_join(net, c, timeout) != AGG_OK) {
        switchsim__conn_close(net, c, NULL);
        return;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    agg_debug("member %u of group %u joined over TCP from %s", c->channel, c->group_id,
              c->peer);
}

/* ---- fragments ---------------------------------------------------------- */

/*
 * Pushes the fragment at the head of c->rx. 1: taken; 0: its slot is busy,
 * try again later; -1: the connection must go (why logged).
 */
static int switchsim__net_push(switchsim_net_t *net, switchsim_conn_t *c,
                               const agg_net_msg_t *m, const uint8_t *data)
{
    switchsim_t *sim = net->sim;
    agg_dp_contrib_t in = {
        .n = m->n, .count = m->count, .op = m->op, .dtype = m->dtype, .kind = m->kind,
        .coll = m->coll, .root = m->root, .total = m->total,
        .empty = (m->flags & AGG_NET_F_EMPTY) != 0, .status = m->status, .off = m->off,
        .len = m->len, .data = m->bytes > 0 ? data : NULL,
    };
    size_t want = 0;
    switchsim_group_t *g;
    agg_dp_member_t *mem;
    agg_status_t st;
    int taken = 0;

    if (m->status == AGG_OK && !in.empty && m->kind == AGG_DP_KIND_DATA &&
        agg_dtype_size(m->dtype) > 0) {
        want = (size_t)(m->coll == AGG_DP_COLL_ALLGATHER ? m->len : m->count) *
               agg_dtype_size(m->dtype);
    }
    if (m->type != AGG_NET_PUSH || m->group_id != c->group_id || m->tree != c->tree ||
        m->channel != c->channel || m->n == 0 || m->bytes != want) {
        agg_warn("data connection from %s: malformed fragment (type %u, group %u, "
                 "channel %u, %u bytes for %u elements)", c->peer, m->type, m->group_id,
                 m->channel, m->bytes, m->count);
        return -1;
    }
    if (m->status != AGG_OK) {
        in.status = AGG_ERR_TIMEOUT; /* the member gave up on it */
    }
    pthread_rwlock_rdlock(&sim->lock);
    g = switchsim_group_find(sim, c->group_id, c->tree, c->part);
    if (g == NULL) {
        pthread_rwlock_unlock(&sim->lock);
        agg_info("group %u is gone; closing its member's connection", c->group_id);
        return -1;
    }
    mem                = agg_dp_member(g->view.seg, c->channel);
    net->drv.work_seen = g->net_work_seen;
    net->drv.work_seg  = g->view.seg;
    st = agg_dp_push(&g->view, mem->leaf, mem->position, &in, &net->drv);
    if (st == AGG_OK) {
        agg_dp_count_in(&net->drv, g->tree, &in);
        taken = 1;
    } else if (st != AGG_INPROGRESS) {
        taken = -1;
    }
    if (net->drv.work_seg == g->view.seg) {
        g->net_work_seen = net->drv.work_seen;
    }
    pthread_rwlock_unlock(&sim->lock);
    return taken;
}

/*
 * A message from another switchsim: a child part's partial (UP), pushed into
 * the node it hangs from, or the result from the parent part (DOWN). 1:
 * done; 0: the slot is busy, try again; -1: the connection must go.
 */
static int switchsim__net_peer(switchsim_net_t *net, switchsim_conn_t *c,
                               const agg_net_msg_t *m, const uint8_t *data)
{
    switchsim_t *sim = net->sim;
    int empty = (m->flags & AGG_NET_F_EMPTY) != 0, done = 1;
    switchsim_group_t *g;
    agg_status_t st;

    if ((m->type != AGG_NET_UP && m->type != AGG_NET_DOWN) || m->n == 0 ||
        agg_dtype_size(m->dtype) == 0 ||
        m->bytes != switchsim__acc_bytes(m->status, m->kind, m->dtype, m->count, empty)) {
        agg_warn("link from %s: malformed message (type %u, group %u, %u bytes for %u "
                 "elements)", c->peer, m->type, m->group_id, m->bytes, m->count);
        return -1;
    }
    pthread_rwlock_rdlock(&sim->lock);
    g = switchsim_group_find(sim, m->group_id, m->tree, m->part);
    if (g == NULL) {
        /* torn down here first: its members see the end from aggmgr's side */
        pthread_rwlock_unlock(&sim->lock);
        return 1;
    }
    net->drv.work_seen = g->net_work_seen;
    net->drv.work_seg  = g->view.seg;
    if (m->type == AGG_NET_UP) {
        const agg_dp_node_t *node = m->channel < g->num_nodes ?
                                    agg_dp_node(g->view.seg, m->channel) : NULL;
        agg_dp_contrib_t in = {
            .n = m->n, .count = m->count, .op = m->op, .dtype = m->dtype, .kind = m->kind,
            .coll = m->coll, .root = m->root, .total = m->total, .empty = (uint8_t)empty,
            .status = m->status, .data = m->bytes > 0 ? data : NULL, .in_acc = 1,
        };

        if (node == NULL || m->extra >= g->extra[m->channel]) {
            st = AGG_ERR_INVALID_PARAM;
        } else {
            st = agg_dp_push(&g->view, m->channel, node->expected - g->extra[m->channel] +
                             m->extra, &in, &net->drv);
        }
    } else {
        agg_dp_slot_t hdr = {
            .status = m->status, .cur = m->n, .count = m->count, .op = m->op,
            .dtype = m->dtype, .kind = m->kind, .root = m->root, .coll = m->coll,
            .total = m->total,
        };

        st = agg_dp_result_in(&g->view, &hdr, data);
    }
    if (net->drv.work_seg == g->view.seg) {
        g->net_work_seen = net->drv.work_seen;
    }
    pthread_rwlock_unlock(&sim->lock);
    if (st == AGG_INPROGRESS) {
        done = 0;
    } else if (st != AGG_OK) {
        agg_warn("link from %s: group %u part %u refused a message: %s", c->peer, m->group_id,
                 m->part, agg_status_string(st));
        done = -1;
    }
    return done;
}

/* Reads what the connection has and pushes every whole fragment that can go in. */
static void switchsim__net_serve(switchsim_net_t *net, switchsim_conn_t *c, int readable)
{
    size_t off = 0;

    if (readable && c->rx_len < c->rx_cap) {
        ssize_t rc = recv(c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, MSG_DONTWAIT);

        if (rc == 0 || (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            switchsim__conn_close(net, c, rc == 0 ? "the member hung up" : strerror(errno));
            return;
        }
        if (rc > 0) {
            c->rx_len += (size_t)rc;
        }
    }
    c->stalled = 0;
    while (c->rx_len - off >= sizeof(agg_net_msg_t)) {
        agg_net_msg_t m;
        int r;

        memcpy(&m, c->rx + off, sizeof(m));
        if (m.magic != AGG_NET_MAGIC ||
            m.bytes > (c->is_peer ? SWITCHSIM_NET_MAX_MSG : c->tx_cap)) {
            switchsim__conn_close(net, c, "not a fragment of this stack");
            return;
        }
        if (c->rx_len - off < sizeof(m) + m.bytes) {
            if (sizeof(m) + m.bytes > c->rx_cap) {
                /* a peer's larger chunk: room for two, once */
                size_t cap = 2 * (sizeof(m) + m.bytes);
                uint8_t *rx;

                memmove(c->rx, c->rx + off, c->rx_len - off);
                c->rx_len -= off;
                off = 0;
                rx = realloc(c->rx, cap);
                if (rx == NULL) {
                    switchsim__conn_close(net, c, "out of memory");
                    return;
                }
                c->rx     = rx;
                c->rx_cap = cap;
            }
            break;
        }
        r = c->is_peer ? switchsim__net_peer(net, c, &m, c->rx + off + sizeof(m)) :
                         switchsim__net_push(net, c, &m, c->rx + off + sizeof(m));
        if (r < 0) {
            switchsim__conn_close(net, c, "bad fragment");
            return;
        }
        if (r == 0) {
            c->stalled = 1;
            break;
        }
        off += sizeof(m) + m.bytes;
    }
    if (off > 0) {
        memmove(c->rx, c->rx + off, c->rx_len - off);
        c->rx_len -= off;
    }
}

static void *switchsim__net_main(void *arg)
{
    switchsim_net_t *net = arg;
    static struct pollfd pfds[SWITCHSIM_NET_MAX_CONNS + 1];
    static int idx[SWITCHSIM_NET_MAX_CONNS + 1];

    while (!__atomic_load_n(&net->sim->stop, __ATOMIC_ACQUIRE)) {
        int n = 1, i, stalled = 0;

        pfds[0] = (struct pollfd){.fd = net->listen_fd, .events = POLLIN};
        for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
            switchsim_conn_t *c = &net->conns[i];

            if (c->fd < 0) {
                continue;
            }
            stalled |= c->stalled;
            pfds[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            idx[n++] = i;
        }
        /* a stalled fragment is retried at once; a worker frees its slot soon */
        if (poll(pfds, (nfds_t)n, stalled ? 0 : 100) < 0 && errno != EINTR) {
            agg_error("data port: poll failed: %s", strerror(errno));
            break;
        }
        for (i = 1; i < n; ++i) {
            switchsim_conn_t *c = &net->conns[idx[i]];

            if (c->fd >= 0 && ((pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) || c->stalled)) {
                switchsim__net_serve(net, c, (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0);
            }
        }
        if (pfds[0].revents & POLLIN) {
            switchsim__net_accept(net);
        }
        if (stalled) {
            sched_yield();
        }
    }
    return NULL;
}

/* ---- setup -------------------------------------------------------------- */

agg_status_t switchsim_net_start(switchsim_t *sim)
{
    const char *addr = agg_conf_str(&sim->conf, AGG_CONF_SIM_DATA_ADDR);
    char host[AGG_WIRE_NAME_LEN], why[256];
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    switchsim_net_t *net;
    int port, bound, i;
    agg_status_t st;

    if (addr == NULL || addr[0] == '\0') {
        return AGG_OK; /* shared memory only */
    }
    if (agg_conf_addr_split(addr, host, sizeof(host), &port) != AGG_OK) {
        agg_error("sim_data_addr \"%s\" is not host:port", addr);
        return AGG_ERR_CONFIG;
    }
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
        agg_error("sim_data_addr \"%s\": give an address of this host that ranks on other "
                  "hosts can reach, not the wildcard (it is what they are told)", addr);
        return AGG_ERR_CONFIG;
    }
    net = calloc(1, sizeof(*net));
    if (net == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    net->sim       = sim;
    net->drv.ctr   = &net->ctr;
    net->listen_fd = -1;
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        net->conns[i].fd = -1;
        pthread_mutex_init(&net->conns[i].tx_lock, NULL);
    }
    st = agg_sock_listen(host, port, &net->listen_fd, &bound);
    if (st != AGG_OK) {
        agg_error("sim_data_addr %s: cannot listen: %s", addr, agg_status_string(st));
        goto err;
    }
    if (getsockname(net->listen_fd, (struct sockaddr *)&ss, &len) == 0) {
        net->off_loopback = !agg_auth_addr_is_loopback((struct sockaddr *)&ss);
    }
    /* the secret also opens links to switchsims off loopback, wherever we listen */
    st = agg_auth_load(&net->auth, agg_conf_str(&sim->conf, AGG_CONF_AM_KEY_FILE), why,
                       sizeof(why));
    if (st == AGG_OK && net->off_loopback && !net->auth.set) {
        snprintf(why, sizeof(why), "no shared secret: set AGG_AM_SECRET or am_key_file "
                 "(required off loopback)");
        st = AGG_ERR_CONFIG;
    }
    if (st != AGG_OK) {
        agg_error("sim_data_addr %s: %s", addr, why);
        goto err;
    }
    snprintf(net->addr, sizeof(net->addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host,
             bound);
    if (pthread_create(&net->thread, NULL, switchsim__net_main, net) != 0) {
        st = AGG_ERR_NO_MEMORY;
        goto err;
    }
    net->started = 1;
    sim->net     = net;
    agg_info("data port %s for ranks on other hosts%s", net->addr,
             net->off_loopback ? " (shared secret required)" : "");
    return AGG_OK;

err:
    if (net->listen_fd >= 0) {
        close(net->listen_fd);
    }
    free(net);
    return st;
}

const char *switchsim_net_addr(const switchsim_t *sim)
{
    return sim->net != NULL ? sim->net->addr : "";
}

void switchsim_net_stop(switchsim_t *sim)
{
    switchsim_net_t *net = sim->net;
    int i;

    if (net == NULL) {
        return;
    }
    __atomic_store_n(&sim->stop, 1, __ATOMIC_RELEASE);
    if (net->started) {
        pthread_join(net->thread, NULL);
    }
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        switchsim__conn_close(net, &net->conns[i], NULL);
        free(net->conns[i].rx);
        free(net->conns[i].tx);
        pthread_mutex_destroy(&net->conns[i].tx_lock);
    }
    for (i = 0; i < net->num_links; ++i) {
        if (net->links[i].fd >= 0) {
            close(net->links[i].fd);
        }
        pthread_mutex_destroy(&net->links[i].lock);
    }
    close(net->listen_fd);
    agg_dp_counters_add(&sim->retired, &net->ctr);
    sim->net = NULL;
    free(net);
}

void switchsim_net_stats(switchsim_t *sim, agg_dp_counters_t *sum)
{
    if (sim->net != NULL) {
        agg_dp_counters_add(sum, &sim->net->ctr);
    }
}
