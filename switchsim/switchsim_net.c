/*
 * switchsim's TCP data port: members on other hosts send their fragments
 * here (agg/net.h) and get each result back. One thread serves every
 * connection from one poll() loop: it reads what arrived, pushes each
 * fragment into the member's leaf with the same engine ranks run on shared
 * memory, and keeps a fragment whose slot is busy (or, reproducible, not its
 * turn yet) at the head of its connection until it goes in, reading no more
 * from that connection meanwhile. A large fragment that is the only one its
 * slot waits for (a leaf with one member) is read straight into the slot's
 * accumulator (agg_dp_claim), not through the connection's buffer. Results
 * go out through the node's MEMBER down ports, from whichever switchsim
 * thread publishes them (this one, or a worker finishing what a local rank
 * left).
 *
 * No thread waits for room on a socket. Every socket this port writes (a
 * member's connection, a link to another switchsim) has a queue of messages
 * in order: a message goes straight out when the queue is empty and the
 * socket takes it; what the socket does not take waits in the queue, and
 * this thread writes it when poll() says there is room. A queued message's
 * data stay where they are, in the slot's accumulator: a slot is used again
 * for fragment n + 2 x window only (agg_seq_slots), which needs every
 * member's fragment n + window, which a member sends once it has result n,
 * which is still in the queue. A result narrowed to its wire type is
 * narrowed when it starts going out, into the connection's one buffer. A
 * socket whose queue moves nothing for SWITCHSIM_NET_SEND_MS is cut off.
 *
 * A group whose tree spans switchsims has a part here and parts there:
 * this switchsim keeps one outgoing link per other switchsim it sends to
 * (a part's partial up to its parent part, the result down to child parts)
 * and reads what other switchsims send it on the connections they opened,
 * which say so in their HELLO (channel AGG_NET_PEER).
 *
 * Off loopback every connection first proves the shared secret
 * (agg/auth.h). A new connection's secret and HELLO are checked on a thread
 * of its own, so a peer that says nothing holds up nobody. Nothing is
 * allocated per fragment: a connection's buffers are sized for its group's
 * payload when it joins.
 */
#include "switchsim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/auth.h"
#include "agg/log.h"
#include "agg/net.h"
#include "agg/reduce.h"
#include "agg/sock.h"

#define SWITCHSIM_NET_MAX_CONNS 1024
#define SWITCHSIM_NET_MAX_LINKS 64
#define SWITCHSIM_NET_MAX_JOINS 64    /* connections proving the secret at once */
#define SWITCHSIM_NET_MAX_MSG   (2u * (64u << 20) + 64u) /* a SAT chunk of accumulators */
#define SWITCHSIM_NET_SEND_MS   10000 /* a socket that takes nothing for this long (10 s) is cut off */
#define SWITCHSIM_NET_TXQ_FIRST 64u   /* messages a queue holds at first... */
#define SWITCHSIM_NET_TXQ_MAX   (1u << 16) /* ...and at most, doubling when full */
#define SWITCHSIM_NET_TX_IOV    16    /* queued messages written by one sendmsg */
#define SWITCHSIM_NET_DIRECT_MIN 16384u /* a fragment this large is read straight into its
                                          accumulator when it can be */
#define SWITCHSIM_NET_SERVE_MAX 16    /* fragments read straight in per turn of a connection */

/* A message waiting to go out: its header, and where its data are. */
typedef struct switchsim_txe {
    agg_net_msg_t  m;
    const uint8_t *data;
    int            narrow; /* data are accumulators, narrowed to m.dtype as they go */
} switchsim_txe_t;

/*
 * The messages one socket has to send, in order, from tail to head. Changed
 * under its owner's lock (a connection's tx_lock, a link's lock); pending is
 * read without it by the data port's thread to know what to poll for.
 */
typedef struct switchsim_txq {
    switchsim_txe_t *e;
    uint32_t         cap;      /* a power of two */
    uint64_t         head, tail;
    size_t           off;      /* bytes of the tail message already sent */
    int64_t          moved_ms; /* when the socket last took something, while pending */
    int              pending;  /* messages wait for room (atomic) */
    uint8_t         *narrow;   /* the tail's data narrowed to the wire type */
    size_t           narrow_cap;
} switchsim_txq_t;

enum {
    SWITCHSIM_CONN_FREE = 0,    /* no socket */
    SWITCHSIM_CONN_JOINING,     /* its join thread checks the secret and the HELLO */
    SWITCHSIM_CONN_LIVE,        /* joined: the data port's thread serves it */
    SWITCHSIM_CONN_REFUSED      /* the join failed: the data port's thread closes it */
};

typedef struct switchsim_conn {
    struct switchsim_net *net;
    int             state;      /* SWITCHSIM_CONN_* (atomic) */
    int             fd;         /* -1: free */
    uint32_t        gen;        /* bumped at every use, so stale bindings miss */
    pthread_mutex_t tx_lock;    /* results are sent by several threads */
    switchsim_txq_t txq;
    size_t          tx_cap;     /* a result's bytes at most (its group's payload) */
    uint32_t        group_id;
    uint8_t         tree;
    uint32_t        part;
    uint32_t        channel;
    uint32_t        lane;       /* which of its member's connections (agg/net.h) */
    uint8_t        *rx;         /* what arrived and is not handled yet */
    size_t          rx_cap, rx_len;
    int             stalled;    /* the head fragment waits for its slot */
    /* a fragment read straight into its slot's accumulator (agg_dp_claim) */
    agg_net_msg_t   dm;         /* its header */
    uint8_t        *dst;        /* where its data go; NULL: none */
    size_t          dst_got;    /* bytes of them in */
    uint64_t        dst_uid;    /* its group (switchsim_group_t.uid) */
    int             hdr_first;  /* the last one went so: read the next header alone */
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
    switchsim_txq_t txq;
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
    int               joining;  /* join threads running (atomic) */
    int               wake_fd;  /* an eventfd: another thread queued something */
    int               woken;    /* it was written and not read yet (atomic) */
};

/* Set on the data port's thread: it polls its queues anyway, nobody wakes it. */
static __thread int switchsim__on_net_thread;

/* ---- send queues -------------------------------------------------------- */

static agg_status_t switchsim__txq_init(switchsim_txq_t *q, size_t narrow_cap)
{
    free(q->e);
    free(q->narrow);
    memset(q, 0, sizeof(*q));
    q->cap        = SWITCHSIM_NET_TXQ_FIRST;
    q->e          = calloc(q->cap, sizeof(*q->e));
    q->narrow_cap = narrow_cap;
    q->narrow     = narrow_cap > 0 ? malloc(narrow_cap) : NULL;
    return q->e != NULL && (narrow_cap == 0 || q->narrow != NULL) ? AGG_OK : AGG_ERR_NO_MEMORY;
}

static void switchsim__txq_free(switchsim_txq_t *q)
{
    free(q->e);
    free(q->narrow);
    memset(q, 0, sizeof(*q));
}

/* Drops what waits (the socket is gone). */
static void switchsim__txq_drop(switchsim_txq_t *q)
{
    q->head = q->tail = 0;
    q->off  = 0;
    __atomic_store_n(&q->pending, 0, __ATOMIC_RELAXED);
}

/*
 * Writes queued messages from the tail, as many as the socket takes, up to
 * SWITCHSIM_NET_TX_IOV per sendmsg. 1: the queue is empty; 0: the socket is
 * full; -1: it is broken (errno says why).
 */
static int switchsim__txq_flush(switchsim_txq_t *q, int fd)
{
    while (q->tail != q->head) {
        struct iovec iov[2 * SWITCHSIM_NET_TX_IOV];
        struct msghdr mh = {.msg_iov = iov};
        uint64_t i;
        size_t skip = q->off, left;
        ssize_t rc;

        for (i = q->tail; i != q->head && mh.msg_iovlen + 2 <= 2 * SWITCHSIM_NET_TX_IOV; ++i) {
            switchsim_txe_t *e = &q->e[i & (q->cap - 1)];

            if (e->narrow) {
                if (i != q->tail) {
                    break; /* the one buffer is the tail's */
                }
                agg_narrow_fn(e->m.desc.dtype)(q->narrow, e->data, e->m.desc.count);
                e->data   = q->narrow;
                e->narrow = 0;
            }
            iov[mh.msg_iovlen++] = (struct iovec){&e->m, sizeof(e->m)};
            if (e->m.bytes > 0) {
                iov[mh.msg_iovlen++] = (struct iovec){(void *)e->data, e->m.bytes};
            }
        }
        /* the tail's bytes already out */
        for (i = 0; skip > 0; ++i) {
            size_t take = skip < iov[i].iov_len ? skip : iov[i].iov_len;

            iov[i].iov_base = (uint8_t *)iov[i].iov_base + take;
            iov[i].iov_len -= take;
            skip -= take;
        }
        rc = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        q->moved_ms = agg_time_ms();
        /* retire the messages now wholly out */
        left = q->off + (size_t)rc;
        while (q->tail != q->head) {
            size_t whole = sizeof(agg_net_msg_t) + q->e[q->tail & (q->cap - 1)].m.bytes;

            if (left < whole) {
                break;
            }
            left -= whole;
            q->tail++;
        }
        q->off = left;
    }
    q->head = q->tail = 0;
    q->off  = 0;
    return 1;
}

/* Another thread left something queued: the data port's thread polls for room. */
static void switchsim__wake(switchsim_net_t *net)
{
    uint64_t one = 1;

    if (!switchsim__on_net_thread && !__atomic_exchange_n(&net->woken, 1, __ATOMIC_ACQ_REL) &&
        write(net->wake_fd, &one, sizeof(one)) < 0) {
        __atomic_store_n(&net->woken, 0, __ATOMIC_RELEASE); /* polled within 100 ms anyway */
    }
}

/*
 * Sends a message through a socket's queue (caller holds the queue's lock):
 * straight out when nothing waits, else behind what waits, for the data
 * port's thread to write. 0, or -1 when the socket is broken or the queue
 * is full (errno says which).
 */
static int switchsim__txq_send(switchsim_net_t *net, switchsim_txq_t *q, int fd,
                               const agg_net_msg_t *m, const void *data, int narrow)
{
    switchsim_txe_t *e;
    int r;

    if (q->e == NULL) {
        errno = ENOTCONN; /* no queue: not a member's or a link's socket */
        return -1;
    }
    if (q->head - q->tail == q->cap) {
        /* a slow reader: room for more, rarely, never per message */
        switchsim_txe_t *grown;
        uint64_t i;

        grown = q->cap < SWITCHSIM_NET_TXQ_MAX ? calloc(2u * q->cap, sizeof(*grown)) : NULL;
        if (grown == NULL) {
            errno = ENOBUFS;
            return -1;
        }
        for (i = q->tail; i != q->head; ++i) {
            grown[i - q->tail] = q->e[i & (q->cap - 1)];
        }
        free(q->e);
        q->e     = grown;
        q->head -= q->tail;
        q->tail  = 0;
        q->cap  *= 2;
    }
    e         = &q->e[q->head & (q->cap - 1)];
    e->m      = *m;
    e->data   = data;
    e->narrow = narrow;
    q->head++;
    if (q->head - q->tail > 1) {
        return 0; /* behind others: pending already */
    }
    r = switchsim__txq_flush(q, fd);
    if (r == 0) {
        q->moved_ms = agg_time_ms();
        __atomic_store_n(&q->pending, 1, __ATOMIC_RELEASE);
        switchsim__wake(net);
    }
    return r < 0 ? -1 : 0;
}

static void switchsim__direct_drop(switchsim_net_t *net, switchsim_conn_t *c);

static void switchsim__conn_close(switchsim_net_t *net, switchsim_conn_t *c, const char *why)
{
    if (c->fd < 0) {
        return;
    }
    switchsim__direct_drop(net, c);
    if (why != NULL) {
        agg_info("data connection from %s (group %u channel %u) closed: %s", c->peer,
                 c->group_id, c->channel, why);
    }
    pthread_mutex_lock(&c->tx_lock);
    close(c->fd);
    c->fd = -1;
    c->gen++;
    switchsim__txq_drop(&c->txq);
    pthread_mutex_unlock(&c->tx_lock);
    __atomic_store_n(&c->state, SWITCHSIM_CONN_FREE, __ATOMIC_RELEASE);
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
    uint32_t ch = p->node, bind, lane;
    agg_net_msg_t m = {
        .magic = AGG_NET_MAGIC, .type = AGG_NET_RESULT, .tree = g->tree, .group_id = g->id,
        .channel = ch, .status = slot->status, .n = slot->cur, .desc = slot->desc,
    };
    const void *data = NULL;
    switchsim_conn_t *c;
    int narrow = 0;

    if (p->kind == AGG_DP_PORT_NET && net != NULL) {
        return switchsim__net_down_part(g, port, slot);
    }
    if (p->kind != AGG_DP_PORT_MEMBER || net == NULL || ch >= g->num_members) {
        return AGG_ERR_NOT_SUPPORTED;
    }
    /* the lane its fragment came up on (agg/net.h) */
    lane = __atomic_load_n(&g->member_lanes[ch], __ATOMIC_ACQUIRE) <= 1 ? 0 :
           __atomic_load_n(&g->lane_of[ch * AGG_NET_LANE_RING + slot->cur % AGG_NET_LANE_RING],
                           __ATOMIC_ACQUIRE);
    lane = ch * AGG_NET_MAX_LANES + lane;
    bind = __atomic_load_n(&g->member_conn[lane], __ATOMIC_ACQUIRE);
    if (bind == 0) {
        return AGG_OK; /* the member left: nobody to tell */
    }
    c = &net->conns[bind - 1];
    pthread_mutex_lock(&c->tx_lock);
    if (c->fd < 0 || c->gen != g->member_gen[lane]) {
        pthread_mutex_unlock(&c->tx_lock);
        return AGG_OK;
    }
    if (slot->status == AGG_OK && slot->desc.kind == AGG_DP_KIND_DATA && slot->desc.count > 0) {
        size_t bytes = (size_t)slot->desc.count * agg_dtype_size(slot->desc.dtype);

        if (bytes <= c->tx_cap) {
            data    = agg_dp_acc((agg_dp_slot_t *)slot);
            narrow  = agg_dtype_acc(slot->desc.dtype) != slot->desc.dtype;
            m.bytes = (uint32_t)bytes;
        } else {
            m.status = AGG_ERR_BAD_FRAGMENT;
        }
    }
    if (switchsim__txq_send(net, &c->txq, c->fd, &m, data, narrow) != 0) {
        /* the receiving thread sees the hang-up and frees the connection */
        agg_warn("group %u: result %llu to %s not sent: %s", g->id, (unsigned long long)m.n,
                 c->peer, strerror(errno));
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

/* Under l->lock: the link goes; the next group configured over it makes it again. */
static void switchsim__link_break(switchsim_link_t *l, agg_status_t st, const char *why)
{
    agg_error("link to switchsim %s broke (%s): aggmgr is told, and drops the groups "
              "across it", l->addr, why);
    close(l->fd);
    l->fd    = -1;
    l->broke = st; /* the control thread tells aggmgr */
    switchsim__txq_drop(&l->txq);
}

/* Sends a message on a link to another switchsim; a broken link drops it. */
static void switchsim__link_send(switchsim_net_t *net, int li, const agg_net_msg_t *m,
                                 const void *data)
{
    switchsim_link_t *l = &net->links[li];

    pthread_mutex_lock(&l->lock);
    if (l->fd >= 0 && switchsim__txq_send(net, &l->txq, l->fd, m, data, 0) != 0) {
        switchsim__link_break(l, errno == ENOBUFS ? AGG_ERR_TIMEOUT : AGG_ERR_IO,
                              strerror(errno));
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
        .magic = AGG_NET_MAGIC, .type = AGG_NET_UP, .tree = g->tree, .group_id = g->id,
        .part = g->port_part[port], .channel = p->node, .extra = p->position,
        .status = c->status, .n = c->n, .desc = c->desc,
        .flags = c->empty ? AGG_NET_F_EMPTY : 0,
    };

    m.bytes = switchsim__acc_bytes(c->status, c->desc.kind, c->desc.dtype, c->desc.count, c->empty);
    switchsim__link_send(g->sim->net, g->port_link[port], &m, c->data);
    return AGG_OK;
}

/* A NET down port: the result to a child part in another switchsim. */
static agg_status_t switchsim__net_down_part(switchsim_group_t *g, uint32_t port,
                                             const agg_dp_slot_t *slot)
{
    agg_net_msg_t m = {
        .magic = AGG_NET_MAGIC, .type = AGG_NET_DOWN, .tree = g->tree, .group_id = g->id,
        .part = g->port_part[port], .status = slot->status, .n = slot->cur, .desc = slot->desc,
    };

    m.bytes = switchsim__acc_bytes(slot->status, slot->desc.kind, slot->desc.dtype,
                                   slot->desc.count, 0);
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
        l = &net->links[net->num_links];
        if (switchsim__txq_init(&l->txq, 0) != AGG_OK) {
            agg_error("no memory for a link to switchsim %s", addr);
            return -1;
        }
        l->fd = -1;
        pthread_mutex_init(&l->lock, NULL);
        snprintf(l->addr, sizeof(l->addr), "%s", addr);
        __atomic_store_n(&net->num_links, net->num_links + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&l->lock);
    fd = l->fd;
    pthread_mutex_unlock(&l->lock);
    if (fd >= 0) {
        return (int)(l - net->links);
    }
    if (agg_sock_addr_parse(addr, host, sizeof(host), &port, NULL, 0) != AGG_OK) {
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
    uint32_t lanes, slot;
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
    lanes = hello.len > 0 ? hello.len : 1;
    slot  = hello.channel * AGG_NET_MAX_LANES +
            (hello.desc.root < AGG_NET_MAX_LANES ? hello.desc.root : 0); /* the lane */
    pthread_rwlock_rdlock(&sim->lock);
    g  = switchsim_group_find(sim, hello.group_id, hello.tree, hello.part);
    st = AGG_OK;
    if (g == NULL) {
        st = AGG_ERR_GROUP_ID;
    } else if (hello.n != g->job_key) {
        st = AGG_ERR_AUTH; /* a client of another job */
    } else if (hello.channel >= g->num_members || !g->remote[hello.channel]) {
        st = AGG_ERR_INVALID_PARAM; /* a local member maps the segment instead */
    } else if (lanes > AGG_NET_MAX_LANES || hello.desc.root >= lanes ||
               (hello.desc.root > 0 &&
                __atomic_load_n(&g->member_lanes[hello.channel], __ATOMIC_ACQUIRE) != lanes)) {
        st = AGG_ERR_INVALID_PARAM; /* lanes out of range, or not what its first one said */
    } else {
        uint32_t bound = __atomic_load_n(&g->member_conn[slot], __ATOMIC_ACQUIRE);

        if (bound != 0) {
            switchsim_conn_t *o = &net->conns[bound - 1];

            pthread_mutex_lock(&o->tx_lock);
            if (o->fd >= 0 && o->gen == g->member_gen[slot]) {
                st = AGG_ERR_GROUP_JOIN; /* the channel is someone's already */
            }
            pthread_mutex_unlock(&o->tx_lock);
        }
    }
    if (st == AGG_OK) {
        need = g->view.seg->payload;
        c->tx_cap = need;
        c->rx_cap = 2 * (sizeof(agg_net_msg_t) + need) + (64u << 10);
        c->rx     = malloc(c->rx_cap);
        if (c->rx == NULL || switchsim__txq_init(&c->txq, need) != AGG_OK) {
            st = AGG_ERR_NO_MEMORY;
        } else {
            c->group_id = g->id;
            c->tree     = g->tree;
            c->part     = g->part;
            c->channel  = hello.channel;
            c->lane     = hello.desc.root;
            g->member_gen[slot] = c->gen;
            if (hello.desc.root == 0) {
                __atomic_store_n(&g->member_lanes[hello.channel], (uint8_t)lanes,
                                 __ATOMIC_RELEASE);
            }
            __atomic_store_n(&g->member_conn[slot], (uint32_t)(c - net->conns) + 1,
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

/*
 * A new connection's join, on a thread of its own so that a peer slow to
 * prove the secret or to say HELLO holds up nobody: the data port's thread
 * serves the connection once it is LIVE, or closes it once REFUSED.
 */
static void *switchsim__net_join_main(void *arg)
{
    switchsim_conn_t *c = arg;
    switchsim_net_t *net = c->net;
    int timeout = (int)agg_conf_int(&net->sim->conf, AGG_CONF_CONNECT_TIMEOUT_MS), state;

    if (switchsim__net_join(net, c, timeout) == AGG_OK) {
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        agg_debug("%s %u of group %u joined over TCP from %s", c->is_peer ? "link" : "member",
                  c->channel, c->group_id, c->peer);
        state = SWITCHSIM_CONN_LIVE;
    } else {
        state = SWITCHSIM_CONN_REFUSED;
    }
    __atomic_store_n(&c->state, state, __ATOMIC_RELEASE);
    switchsim__wake(net);
    __atomic_sub_fetch(&net->joining, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void switchsim__net_accept(switchsim_net_t *net)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    switchsim_conn_t *c = NULL;
    pthread_attr_t attr;
    pthread_t th;
    int fd, i, rc;

    fd = accept4(net->listen_fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
    if (fd < 0) {
        return;
    }
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS && c == NULL; ++i) {
        if (__atomic_load_n(&net->conns[i].state, __ATOMIC_ACQUIRE) == SWITCHSIM_CONN_FREE) {
            c = &net->conns[i];
        }
    }
    if (c == NULL || __atomic_load_n(&net->joining, __ATOMIC_ACQUIRE) >= SWITCHSIM_NET_MAX_JOINS) {
        agg_warn("data port: %s; refusing a connection", c == NULL ?
                 "every connection is taken" : "too many connections joining at once");
        close(fd);
        return;
    }
    /* a worker sending a result takes the lock and finds the old use gone */
    pthread_mutex_lock(&c->tx_lock);
    free(c->rx);
    c->rx     = NULL;
    switchsim__txq_free(&c->txq);
    c->rx_len = c->tx_cap = 0;
    c->is_peer = 0;
    c->stalled = 0;
    c->dst     = NULL;
    c->hdr_first = 0;
    c->off_loopback = net->off_loopback && !agg_auth_addr_is_loopback((struct sockaddr *)&ss);
    c->fd = fd;
    c->gen++;
    pthread_mutex_unlock(&c->tx_lock);
    agg_sock_addr_string((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    agg_net_tune(fd);
    c->net   = net;
    c->state = SWITCHSIM_CONN_JOINING;
    __atomic_add_fetch(&net->joining, 1, __ATOMIC_ACQ_REL);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, switchsim__net_join_main, c);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        agg_warn("data port: no thread for the join of %s: %s", c->peer, strerror(rc));
        __atomic_sub_fetch(&net->joining, 1, __ATOMIC_RELEASE);
        switchsim__conn_close(net, c, NULL);
    }
}

/* ---- fragments ---------------------------------------------------------- */

/*
 * What a member's fragment gives its leaf (data aside), checked against the
 * connection it came on. 0, or -1 when it is malformed (logged).
 */
static int switchsim__net_contrib(const switchsim_conn_t *c, const agg_net_msg_t *m,
                                  agg_dp_contrib_t *in)
{
    size_t want = 0;

    *in = (agg_dp_contrib_t){
        .n = m->n, .desc = m->desc, .empty = (m->flags & AGG_NET_F_EMPTY) != 0,
        .status = m->status, .off = m->off, .len = m->len,
    };
    if (m->status == AGG_OK && !in->empty && m->desc.kind == AGG_DP_KIND_DATA &&
        agg_dtype_size(m->desc.dtype) > 0) {
        want = (size_t)(m->desc.coll == AGG_DP_COLL_ALLGATHER ? m->len : m->desc.count) *
               agg_dtype_size(m->desc.dtype);
    }
    if (m->type != AGG_NET_PUSH || m->group_id != c->group_id || m->tree != c->tree ||
        m->channel != c->channel || m->n == 0 || m->bytes != want) {
        agg_warn("data connection from %s: malformed fragment (type %u, group %u, "
                 "channel %u, %u bytes for %u elements)", c->peer, m->type, m->group_id,
                 m->channel, m->bytes, m->desc.count);
        return -1;
    }
    if (m->status != AGG_OK) {
        in->status = AGG_ERR_TIMEOUT; /* the member gave up on it */
    }
    return 0;
}

/* Notes the lane fragment n of c's member came on: its result goes back there. */
static void switchsim__net_note_lane(switchsim_group_t *g, const switchsim_conn_t *c, uint64_t n)
{
    __atomic_store_n(&g->lane_of[c->channel * AGG_NET_LANE_RING + n % AGG_NET_LANE_RING],
                     (uint8_t)c->lane, __ATOMIC_RELEASE);
}

/* Counts what the data port's thread pushed into g, and notes what work it saw there. */
static void switchsim__net_pushed(switchsim_net_t *net, switchsim_group_t *g,
                                  const agg_dp_contrib_t *in)
{
    agg_dp_count_in(&net->drv, g->tree, in);
    if (net->drv.work_seg == g->view.seg) {
        g->net_work_seen = net->drv.work_seen;
    }
}

/*
 * Pushes the fragment at the head of c->rx. 1: taken; 0: its slot is busy,
 * try again later; -1: the connection must go (why logged).
 */
static int switchsim__net_push(switchsim_net_t *net, switchsim_conn_t *c,
                               const agg_net_msg_t *m, const uint8_t *data)
{
    switchsim_t *sim = net->sim;
    agg_dp_contrib_t in;
    switchsim_group_t *g;
    agg_dp_member_t *mem;
    agg_status_t st;
    int taken = 0;

    if (switchsim__net_contrib(c, m, &in) != 0) {
        return -1;
    }
    in.data = m->bytes > 0 ? data : NULL;
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
    switchsim__net_note_lane(g, c, m->n);
    st = agg_dp_push(&g->view, mem->leaf, mem->position, &in, &net->drv);
    if (st == AGG_OK) {
        switchsim__net_pushed(net, g, &in);
        taken = 1;
    } else if (st != AGG_INPROGRESS) {
        taken = -1;
    }
    pthread_rwlock_unlock(&sim->lock);
    return taken;
}

/*
 * A large fragment from a member, header in, data partly: when it is the only
 * one its slot waits for, claims the slot and moves the data in so far to the
 * accumulator; the rest is read there (switchsim__net_direct), one copy
 * fewer than through c->rx. 1 when so; 0: it goes the usual way.
 */
static int switchsim__net_claim(switchsim_net_t *net, switchsim_conn_t *c,
                                const agg_net_msg_t *m, size_t off)
{
    switchsim_t *sim = net->sim;
    size_t have = c->rx_len - off - sizeof(*m);
    agg_dp_contrib_t in;
    switchsim_group_t *g;
    uint8_t *acc = NULL;

    if (c->is_peer || m->bytes < SWITCHSIM_NET_DIRECT_MIN ||
        switchsim__net_contrib(c, m, &in) != 0) {
        return 0; /* a malformed one is reported once it is all in */
    }
    pthread_rwlock_rdlock(&sim->lock);
    g = switchsim_group_find(sim, c->group_id, c->tree, c->part);
    if (g != NULL) {
        acc = agg_dp_claim(&g->view, agg_dp_member(g->view.seg, c->channel)->leaf, &in);
    }
    if (acc != NULL) {
        memcpy(acc, c->rx + off + sizeof(*m), have);
        c->dm      = *m;
        c->dst     = acc;
        c->dst_got = have;
        c->dst_uid = g->uid;
    }
    pthread_rwlock_unlock(&sim->lock);
    return acc != NULL;
}

/* The group of the fragment being read straight in, while it is still there (caller holds sim->lock). */
static switchsim_group_t *switchsim__direct_group(switchsim_net_t *net, switchsim_conn_t *c)
{
    switchsim_group_t *g = switchsim_group_find(net->sim, c->group_id, c->tree, c->part);

    return g != NULL && g->uid == c->dst_uid ? g : NULL;
}

/* The connection goes with a fragment half read straight in: its slot is given back. */
static void switchsim__direct_drop(switchsim_net_t *net, switchsim_conn_t *c)
{
    switchsim_group_t *g;

    if (c->dst == NULL) {
        return;
    }
    pthread_rwlock_rdlock(&net->sim->lock);
    g = switchsim__direct_group(net, c);
    if (g != NULL) {
        agg_dp_unclaim(&g->view, agg_dp_member(g->view.seg, c->channel)->leaf, c->dm.n);
    }
    pthread_rwlock_unlock(&net->sim->lock);
    c->dst = NULL;
}

/*
 * Reads more of the fragment going straight into its accumulator, and
 * pushes it once all in. 1: pushed; 0: more to come; -1: the connection must
 * go (why in *why).
 */
static int switchsim__net_direct(switchsim_net_t *net, switchsim_conn_t *c, const char **why)
{
    switchsim_t *sim = net->sim;
    switchsim_group_t *g;
    agg_dp_contrib_t in;
    uint32_t leaf;
    ssize_t rc;
    int r = 0;

    pthread_rwlock_rdlock(&sim->lock);
    g = switchsim__direct_group(net, c);
    if (g == NULL) {
        pthread_rwlock_unlock(&sim->lock);
        c->dst = NULL; /* its memory went with it */
        *why   = "its group is gone";
        return -1;
    }
    leaf = agg_dp_member(g->view.seg, c->channel)->leaf;
    rc   = recv(c->fd, c->dst + c->dst_got, c->dm.bytes - c->dst_got, MSG_DONTWAIT);
    if (rc == 0 || (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        *why = rc == 0 ? "the member hung up" : strerror(errno);
        agg_dp_unclaim(&g->view, leaf, c->dm.n);
        c->dst = NULL;
        r      = -1;
    } else if (rc > 0 && (c->dst_got += (size_t)rc) == c->dm.bytes) {
        switchsim__net_contrib(c, &c->dm, &in); /* checked at the claim */
        net->drv.work_seen = g->net_work_seen;
        net->drv.work_seg  = g->view.seg;
        switchsim__net_note_lane(g, c, c->dm.n);
        if (agg_dp_push_claimed(&g->view, leaf, &in, &net->drv) == AGG_OK) {
            switchsim__net_pushed(net, g, &in);
        }
        c->dst = NULL;
        r      = 1;
    }
    pthread_rwlock_unlock(&sim->lock);
    return r;
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
        agg_dtype_size(m->desc.dtype) == 0 ||
        m->bytes != switchsim__acc_bytes(m->status, m->desc.kind, m->desc.dtype, m->desc.count,
                                         empty)) {
        agg_warn("link from %s: malformed message (type %u, group %u, %u bytes for %u "
                 "elements)", c->peer, m->type, m->group_id, m->bytes, m->desc.count);
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
            .n = m->n, .desc = m->desc, .empty = (uint8_t)empty,
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
            .status = m->status, .cur = m->n, .desc = m->desc,
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

/*
 * Reads what the connection has and pushes every whole fragment that can go
 * in. 1: a large fragment went straight into its accumulator and the next
 * may too; 0: done for this turn; -1: the connection was closed.
 */
static int switchsim__net_read(switchsim_net_t *net, switchsim_conn_t *c, int readable)
{
    size_t off = 0, room = c->rx_cap - c->rx_len;
    const char *why = NULL;
    int r;

    if (c->dst != NULL) {
        r = readable ? switchsim__net_direct(net, c, &why) : 0;
        if (r < 0) {
            switchsim__conn_close(net, c, why);
        }
        return r;
    }
    if (c->hdr_first && c->rx_len < sizeof(agg_net_msg_t)) {
        room = sizeof(agg_net_msg_t) - c->rx_len; /* its data may go straight in too */
    }
    if (readable && room > 0) {
        ssize_t rc = recv(c->fd, c->rx + c->rx_len, room, MSG_DONTWAIT);

        if (rc == 0 || (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            switchsim__conn_close(net, c, rc == 0 ? "the member hung up" : strerror(errno));
            return -1;
        }
        if (rc > 0) {
            c->rx_len += (size_t)rc;
        }
    }
    c->stalled = 0;
    while (c->rx_len - off >= sizeof(agg_net_msg_t)) {
        agg_net_msg_t m;

        memcpy(&m, c->rx + off, sizeof(m));
        if (m.magic != AGG_NET_MAGIC ||
            m.bytes > (c->is_peer ? SWITCHSIM_NET_MAX_MSG : c->tx_cap)) {
            switchsim__conn_close(net, c, "not a fragment of this stack");
            return -1;
        }
        if (c->rx_len - off < sizeof(m) + m.bytes) {
            c->hdr_first = switchsim__net_claim(net, c, &m, off);
            if (c->hdr_first) {
                off = c->rx_len; /* header and data so far: taken */
                break;
            }
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
                    return -1;
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
            return -1;
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
    if (c->dst == NULL) {
        return 0;
    }
    /* its data are most likely there already */
    r = switchsim__net_direct(net, c, &why);
    if (r < 0) {
        switchsim__conn_close(net, c, why);
    }
    return r;
}

/* A connection's turn: a few fragments read straight in, then the others' turn. */
static void switchsim__net_serve(switchsim_net_t *net, switchsim_conn_t *c, int readable)
{
    int i;

    for (i = 0; i < SWITCHSIM_NET_SERVE_MAX && switchsim__net_read(net, c, readable) > 0; ++i) {
        readable = 1;
    }
}

/*
 * Writes what waits in a socket's queue once poll() says there is room
 * (revents), or cuts the socket off when it took nothing for
 * SWITCHSIM_NET_SEND_MS. Caller holds the queue's lock. 0, or -1 when the
 * socket must go (why in *why).
 */
static int switchsim__txq_poll(switchsim_txq_t *q, int fd, short revents, int64_t now,
                               const char **why)
{
    int r = 1;

    if (!__atomic_load_n(&q->pending, __ATOMIC_RELAXED)) {
        return 0;
    }
    if (revents & (POLLOUT | POLLERR | POLLHUP)) {
        r = switchsim__txq_flush(q, fd);
        if (r < 0) {
            *why = strerror(errno);
            return -1;
        }
    }
    if (r > 0 && q->tail == q->head) {
        __atomic_store_n(&q->pending, 0, __ATOMIC_RELAXED);
    } else if (now - q->moved_ms > SWITCHSIM_NET_SEND_MS) {
        *why = "it took nothing for 10 s";
        return -1;
    }
    return 0;
}

static void *switchsim__net_main(void *arg)
{
    switchsim_net_t *net = arg;
    /* the listener, the wake-up, connections, links */
    static struct pollfd pfds[2 + SWITCHSIM_NET_MAX_CONNS + SWITCHSIM_NET_MAX_LINKS];
    static int idx[2 + SWITCHSIM_NET_MAX_CONNS + SWITCHSIM_NET_MAX_LINKS];

    switchsim__on_net_thread = 1;
    while (!__atomic_load_n(&net->sim->stop, __ATOMIC_ACQUIRE)) {
        int n = 2, i, nc, stalled = 0, links = __atomic_load_n(&net->num_links, __ATOMIC_ACQUIRE);
        int64_t now;
        const char *why;

        pfds[0] = (struct pollfd){.fd = net->listen_fd, .events = POLLIN};
        pfds[1] = (struct pollfd){.fd = net->wake_fd, .events = POLLIN};
        for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
            switchsim_conn_t *c = &net->conns[i];
            int state = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);

            if (state == SWITCHSIM_CONN_REFUSED) {
                switchsim__conn_close(net, c, NULL);
            }
            if (state != SWITCHSIM_CONN_LIVE) {
                continue;
            }
            stalled |= c->stalled;
            pfds[n] = (struct pollfd){.fd = c->fd, .events = POLLIN};
            if (__atomic_load_n(&c->txq.pending, __ATOMIC_ACQUIRE)) {
                pfds[n].events |= POLLOUT;
            }
            idx[n++] = i;
        }
        nc = n;
        for (i = 0; i < links; ++i) {
            switchsim_link_t *l = &net->links[i];

            if (__atomic_load_n(&l->txq.pending, __ATOMIC_ACQUIRE)) {
                pthread_mutex_lock(&l->lock);
                if (l->fd >= 0) {
                    pfds[n]  = (struct pollfd){.fd = l->fd, .events = POLLOUT};
                    idx[n++] = i;
                }
                pthread_mutex_unlock(&l->lock);
            }
        }
        /* a stalled fragment is retried at once; a worker frees its slot soon */
        if (poll(pfds, (nfds_t)n, stalled ? 0 : 100) < 0 && errno != EINTR) {
            agg_error("data port: poll failed: %s", strerror(errno));
            break;
        }
        if (pfds[1].revents & POLLIN) {
            uint64_t v;

            __atomic_store_n(&net->woken, 0, __ATOMIC_RELEASE);
            if (read(net->wake_fd, &v, sizeof(v)) < 0) {
                /* EAGAIN: nothing was written since */
            }
        }
        now = agg_time_ms();
        for (i = 2; i < nc; ++i) {
            switchsim_conn_t *c = &net->conns[idx[i]];
            short ev = pfds[i].revents;

            if (c->fd >= 0 && __atomic_load_n(&c->txq.pending, __ATOMIC_ACQUIRE)) {
                pthread_mutex_lock(&c->tx_lock);
                if (switchsim__txq_poll(&c->txq, c->fd, ev, now, &why) != 0) {
                    agg_warn("group %u: results to %s not sent: %s", c->group_id, c->peer, why);
                    shutdown(c->fd, SHUT_RDWR); /* read below as a hang-up */
                    ev |= POLLHUP;
                }
                pthread_mutex_unlock(&c->tx_lock);
            }
            if (c->fd >= 0 && ((ev & (POLLIN | POLLHUP | POLLERR)) || c->stalled)) {
                switchsim__net_serve(net, c, (ev & (POLLIN | POLLHUP | POLLERR)) != 0);
            }
        }
        for (i = nc; i < n; ++i) {
            switchsim_link_t *l = &net->links[idx[i]];

            pthread_mutex_lock(&l->lock);
            if (l->fd == pfds[i].fd &&
                switchsim__txq_poll(&l->txq, l->fd, pfds[i].revents, now, &why) != 0) {
                switchsim__link_break(l, AGG_ERR_TIMEOUT, why);
            }
            pthread_mutex_unlock(&l->lock);
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
    if (agg_sock_addr_parse(addr, host, sizeof(host), &port, NULL, 0) != AGG_OK) {
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
    net->wake_fd   = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (net->wake_fd < 0) {
        agg_error("data port: eventfd: %s", strerror(errno));
        free(net);
        return AGG_ERR_NO_MEMORY;
    }
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
    close(net->wake_fd);
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
    /* joins still going end at their next read: their sockets are shut */
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        if (__atomic_load_n(&net->conns[i].state, __ATOMIC_ACQUIRE) == SWITCHSIM_CONN_JOINING) {
            shutdown(net->conns[i].fd, SHUT_RDWR);
        }
    }
    for (i = 0; __atomic_load_n(&net->joining, __ATOMIC_ACQUIRE) > 0; ++i) {
        if (i == 5000) { /* 5 s: a join stuck past its own timeouts */
            agg_warn("data port: %d joins still running at exit",
                     __atomic_load_n(&net->joining, __ATOMIC_ACQUIRE));
            return; /* net stays: they may still touch it */
        }
        usleep(1000);
    }
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        switchsim__conn_close(net, &net->conns[i], NULL);
        free(net->conns[i].rx);
        switchsim__txq_free(&net->conns[i].txq);
        pthread_mutex_destroy(&net->conns[i].tx_lock);
    }
    for (i = 0; i < net->num_links; ++i) {
        if (net->links[i].fd >= 0) {
            close(net->links[i].fd);
        }
        switchsim__txq_free(&net->links[i].txq);
        pthread_mutex_destroy(&net->links[i].lock);
    }
    close(net->listen_fd);
    close(net->wake_fd);
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
