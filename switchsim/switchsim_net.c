/*
 * switchsim's TCP data port: the listening socket, joining (the shared
 * secret and HELLO, on a thread each), the event loop every connection and
 * link is watched on, the send queues' setup, start and stop. The design
 * of the whole port is in switchsim_net_int.h.
 */
#include "switchsim_net_int.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/reduce.h"
#include "agg/sock.h"

/* A result's accumulators narrowed to the wire type as it starts going out, and sealed. */
static void switchsim__narrow(agg_txq_t *q, agg_txe_t *e)
{
    agg_net_msg_t m;

    uint32_t spoil;

    memcpy(&m, e->hdr, sizeof(m));
    agg_narrow_fn(m.desc.dtype)(q->scratch, e->data, m.desc.count);
    e->data = q->scratch;
    spoil   = m.pad; /* switchsim__txq_send */
    m.pad   = 0;
    agg_net_seal(&m, e->data);
    m.pad = spoil;
    memcpy(e->hdr, &m, sizeof(m));
}

/* A queue for a socket whose results may be narrowed into narrow_cap bytes. */
agg_status_t switchsim__txq_init(switchsim_net_t *net, agg_txq_t *q, size_t narrow_cap)
{
    return agg_txq_init(q, SWITCHSIM_NET_TXQ_FIRST, SWITCHSIM_NET_TXQ_MAX, 0, net->loop,
                        switchsim__narrow, narrow_cap);
}

void switchsim__conn_close(switchsim_net_t *net, switchsim_conn_t *c, const char *why)
{
    if (c->fd < 0) {
        return;
    }
    switchsim__direct_drop(net, c);
    if (why != NULL) {
        agg_info("data connection from %s (group %u channel %u) closed: %s", c->peer,
                 c->group_id, c->channel, why);
    }
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != SWITCHSIM_CONN_FREE) {
        agg_loop_del(net->loop, c->fd, c); /* joining or live: watched */
    }
    pthread_mutex_lock(&c->tx_lock);
    close(c->fd);
    c->fd = -1;
    c->gen++;
    agg_txq_drop(&c->txq);
    pthread_mutex_unlock(&c->tx_lock);
    __atomic_store_n(&c->state, SWITCHSIM_CONN_FREE, __ATOMIC_RELEASE);
    c->rx_len  = 0;
    c->stalled = 0;
    c->held_until = 0;
    c->fault_set  = 0;
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

/* A new connection's HELLO, read whole: the answer says why not. */
static agg_status_t switchsim__net_hello(switchsim_net_t *net, switchsim_conn_t *c,
                                         const agg_net_msg_t *hm, int timeout)
{
    switchsim_t *sim = net->sim;
    agg_net_msg_t hello = *hm, reply = {.magic = AGG_NET_MAGIC, .type = AGG_NET_HELLO};
    switchsim_group_t *g;
    size_t need;
    uint32_t lanes, slot;
    agg_status_t st;

    if (hello.magic != AGG_NET_MAGIC || hello.type != AGG_NET_HELLO || hello.bytes != 0 ||
        !agg_net_intact(&hello, NULL)) {
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
        if (c->rx == NULL || switchsim__txq_init(net, &c->txq, need) != AGG_OK) {
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

static void switchsim__on_conn(agg_loop_t *loop, int fd, short revents, void *arg);

/*
 * A joining connection's turn: what it sent so far is read (so that poll
 * does not wake for it again), and once the step's message is whole it is
 * handled: the proof of the secret (off loopback, after the challenge sent
 * at accept), then the HELLO. No thread waits on a peer: one that says
 * nothing holds only its own connection, until the sweep closes it or a new
 * connection takes its place.
 */
static void switchsim__on_joining(agg_loop_t *loop, int fd, short revents, void *arg)
{
    switchsim_conn_t *c = arg;
    switchsim_net_t *net = c->net;
    int timeout = (int)agg_conf_int(&net->sim->conf, AGG_CONF_CONNECT_TIMEOUT_MS);
    size_t need = c->join_step == SWITCHSIM_JOIN_PROOF ? sizeof(agg_auth_response_t) :
                                                         sizeof(agg_net_msg_t);
    char why[256];
    ssize_t rc;

    (void)revents;
    rc = recv(fd, c->join_buf + c->join_got, need - c->join_got, MSG_DONTWAIT);
    if (rc == 0 || (rc < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        switchsim__conn_close(net, c, rc == 0 ? "hung up while joining" : strerror(errno));
        return;
    }
    if (rc < 0 || (c->join_got += (size_t)rc) < need) {
        return;
    }
    c->join_got = 0;
    if (c->join_step == SWITCHSIM_JOIN_PROOF) {
        agg_auth_response_t rsp;

        memcpy(&rsp, c->join_buf, sizeof(rsp));
        if (agg_auth_server_verdict(fd, &net->auth, timeout, c->nonce, &rsp, why,
                                    sizeof(why)) != AGG_OK) {
            agg_warn("data connection from %s refused: %s", c->peer, why);
            switchsim__conn_close(net, c, NULL);
            return;
        }
        c->join_step = SWITCHSIM_JOIN_HELLO;
        return;
    }
    {
        agg_net_msg_t hello;

        memcpy(&hello, c->join_buf, sizeof(hello));
        if (switchsim__net_hello(net, c, &hello, timeout) != AGG_OK) {
            switchsim__conn_close(net, c, NULL);
            return;
        }
    }
    agg_debug("%s %u of group %u joined over TCP from %s", c->is_peer ? "link" : "member",
              c->channel, c->group_id, c->peer);
    agg_loop_del(loop, fd, c);
    if (agg_loop_add(loop, fd, POLLIN, &c->txq.pending, switchsim__on_conn, c) != AGG_OK) {
        __atomic_store_n(&c->state, SWITCHSIM_CONN_LIVE, __ATOMIC_RELEASE); /* nothing watched */
        switchsim__conn_close(net, c, "no room in the data port's loop");
        return;
    }
    c->join_step = SWITCHSIM_JOIN_DONE;
    __atomic_store_n(&c->state, SWITCHSIM_CONN_LIVE, __ATOMIC_RELEASE);
}

/* A connection accepted: a place for it (made if need be), then its join on the loop. */
static void switchsim__net_take(agg_loop_t *loop, switchsim_net_t *net, int fd,
                                const struct sockaddr_storage *ssp)
{
    struct sockaddr_storage ss = *ssp;
    switchsim_conn_t *c = NULL;
    agg_status_t st;
    int i;

    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS && c == NULL; ++i) {
        if (__atomic_load_n(&net->conns[i].state, __ATOMIC_ACQUIRE) == SWITCHSIM_CONN_FREE) {
            c = &net->conns[i];
        }
    }
    if (c == NULL) {
        /* every one taken: the one that has been joining longest makes room */
        for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
            switchsim_conn_t *o = &net->conns[i];

            if (__atomic_load_n(&o->state, __ATOMIC_ACQUIRE) == SWITCHSIM_CONN_JOINING &&
                (c == NULL || o->join_at < c->join_at)) {
                c = o;
            }
        }
        if (c == NULL) {
            agg_warn("data port: every connection is taken by a joined peer; refusing one");
            close(fd);
            return;
        }
        net->evicted++;
        if (net->evicted == 1 || net->evicted % 1000 == 0) {
            agg_warn("data port: every connection is taken; closed %s, which has been joining "
                     "longest, for a new one (%llu so far)", c->peer,
                     (unsigned long long)net->evicted);
        }
        switchsim__conn_close(net, c, NULL);
    }
    /* a worker sending a result takes the lock and finds the old use gone */
    pthread_mutex_lock(&c->tx_lock);
    free(c->rx);
    c->rx     = NULL;
    agg_txq_free(&c->txq);
    c->rx_len = c->tx_cap = 0;
    c->is_peer = 0;
    c->stalled = 0;
    c->held_until = 0;
    c->fault_set  = 0;
    c->join_got = 0;
    c->dst     = NULL;
    c->hdr_first = 0;
    c->off_loopback = net->off_loopback && !agg_auth_addr_is_loopback((struct sockaddr *)&ss);
    c->fd = fd;
    c->gen++;
    pthread_mutex_unlock(&c->tx_lock);
    agg_sock_addr_string((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
    agg_net_tune(fd);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->net       = net;
    c->join_at   = agg_time_ms();
    c->join_step = c->off_loopback ? SWITCHSIM_JOIN_PROOF : SWITCHSIM_JOIN_HELLO;
    st = AGG_OK;
    if (c->off_loopback) {
        char why[256];

        /* a few dozen bytes into a new socket: they go at once */
        st = agg_auth_server_challenge(fd, &net->auth, 1000, c->nonce, why, sizeof(why));
        if (st != AGG_OK) {
            agg_warn("data connection from %s refused: %s", c->peer, why);
        }
    }
    if (st == AGG_OK) {
        st = agg_loop_add(loop, fd, POLLIN, NULL, switchsim__on_joining, c);
    }
    __atomic_store_n(&c->state, SWITCHSIM_CONN_JOINING, __ATOMIC_RELEASE);
    if (st != AGG_OK) {
        switchsim__conn_close(net, c, NULL);
    }
}

/* The port's listening socket: every connection waiting is taken (64 a round at most). */
static void switchsim__net_accept(agg_loop_t *loop, int lfd, short revents, void *arg)
{
    switchsim_net_t *net = arg;
    int k;

    (void)revents;
    for (k = 0; k < 64; ++k) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);

        if (fd < 0) {
            return; /* none left (the socket does not block), or a transient error */
        }
        switchsim__net_take(loop, net, fd, &ss);
    }
}

static void switchsim__on_conn(agg_loop_t *loop, int fd, short revents, void *arg);

void switchsim__conn_hold(switchsim_net_t *net, switchsim_conn_t *c, uint32_t ms)
{
    uint64_t now = (uint64_t)agg_time_ms();

    c->held_until = now + ms;
    /* not readable meanwhile: the loop would wake for it every round */
    agg_loop_del(net->loop, c->fd, c);
    if (agg_loop_add(net->loop, c->fd, 0, &c->txq.pending, switchsim__on_conn, c) != AGG_OK) {
        c->held_until = 0; /* cannot happen: its own watch was just freed */
    }
    if (net->hold_at == 0 || c->held_until < net->hold_at) {
        net->hold_at = c->held_until;
        agg_loop_timer_set(net->loop, net->hold, (int)ms);
    }
}

/* Connections whose hold is over are read again; runs again for the next one. */
static int switchsim__unhold(agg_loop_t *loop, void *arg)
{
    switchsim_net_t *net = arg;
    uint64_t now = (uint64_t)agg_time_ms(), next = 0;
    int i;

    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        switchsim_conn_t *c = &net->conns[i];

        if (c->fd < 0 || c->held_until == 0) {
            continue;
        }
        if (c->held_until > now) {
            next = next == 0 || c->held_until < next ? c->held_until : next;
            continue;
        }
        c->held_until = 0;
        agg_loop_del(loop, c->fd, c);
        if (agg_loop_add(loop, c->fd, POLLIN, &c->txq.pending, switchsim__on_conn, c) != AGG_OK) {
            switchsim__conn_close(net, c, "no watch for it after its hold");
            continue;
        }
        switchsim__net_serve(net, c, 1);
        if (c->fd >= 0 && c->stalled) {
            agg_loop_timer_set(loop, net->retry, 0);
        }
        if (c->fd >= 0 && c->held_until != 0) {
            next = next == 0 || c->held_until < next ? c->held_until : next;
        }
    }
    net->hold_at = next;
    return next == 0 ? -1 : (int)(next - now);
}

void switchsim__fault_kill(switchsim_net_t *net, int dir)
{
    agg_warn("sim_faults: killed at message %llu %s",
             (unsigned long long)__atomic_load_n(&net->faults.seen[dir], __ATOMIC_RELAXED),
             dir == AGG_FAULT_IN ? "in" : "out");
    raise(SIGKILL);
}

int switchsim__net_fault_out(switchsim_net_t *net)
{
    uint32_t ms;
    unsigned what = agg_fault_next(&net->faults, AGG_FAULT_OUT, &ms);

    if (what == 0) {
        return 0;
    }
    __atomic_fetch_add(&net->faults_out, 1, __ATOMIC_RELAXED);
    if (what & AGG_FAULT_KILL) {
        switchsim__fault_kill(net, AGG_FAULT_OUT);
    }
    return what & AGG_FAULT_LOSS ? 1 : what & AGG_FAULT_DUP ? 2 : what & AGG_FAULT_CORRUPT ? 3 : 0;
}

/* A member's or a peer's connection: results out, fragments in. */
static void switchsim__on_conn(agg_loop_t *loop, int fd, short revents, void *arg)
{
    switchsim_conn_t *c = arg;
    switchsim_net_t *net = c->net;
    const char *why = NULL;

    (void)fd;
    if (agg_txq_pending(&c->txq)) {
        pthread_mutex_lock(&c->tx_lock);
        if (agg_txq_poll(&c->txq, c->fd, revents, SWITCHSIM_NET_SEND_MS, &why) != 0) {
            agg_warn("group %u: results to %s not sent: %s", c->group_id, c->peer, why);
            shutdown(c->fd, SHUT_RDWR); /* read below as a hang-up */
            revents |= POLLHUP;
        }
        pthread_mutex_unlock(&c->tx_lock);
    }
    if (revents & (POLLHUP | POLLERR)) {
        c->held_until = 0; /* the peer is gone: no hold keeps its hang-up from being read */
    }
    if (c->fd >= 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
        switchsim__net_serve(net, c, 1);
    }
    if (c->fd >= 0 && c->stalled) {
        agg_loop_timer_set(loop, net->retry, 0); /* its slot frees soon: try again at once */
    }
}

/* Fragments that waited for their slot (or their turn) try again; 0: again at once. */
static int switchsim__retry(agg_loop_t *loop, void *arg)
{
    switchsim_net_t *net = arg;
    int i, stalled = 0;

    (void)loop;
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        switchsim_conn_t *c = &net->conns[i];

        if (c->fd >= 0 && c->stalled &&
            __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == SWITCHSIM_CONN_LIVE) {
            switchsim__net_serve(net, c, 0);
            stalled |= c->fd >= 0 && c->stalled;
        }
    }
    if (stalled) {
        sched_yield(); /* a worker frees the slot: let it run */
        return 0;
    }
    return -1;
}

/*
 * Every second: a socket that took nothing of what waits for it for
 * SWITCHSIM_NET_SEND_MS is cut off (it never says it has room), and every
 * link's socket is the one the loop watches.
 */
static int switchsim__sweep(agg_loop_t *loop, void *arg)
{
    switchsim_net_t *net = arg;
    int i, links = __atomic_load_n(&net->num_links, __ATOMIC_ACQUIRE);
    int64_t now = agg_time_ms(),
            limit = agg_conf_int(&net->sim->conf, AGG_CONF_CONNECT_TIMEOUT_MS);

    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        switchsim_conn_t *c = &net->conns[i];

        if (c->fd >= 0 &&
            __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == SWITCHSIM_CONN_JOINING &&
            now - c->join_at > limit) {
            switchsim__conn_close(net, c, "it did not finish joining in connect_timeout_ms");
            continue;
        }
        if (c->fd >= 0 && agg_txq_pending(&c->txq) &&
            __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == SWITCHSIM_CONN_LIVE) {
            switchsim__on_conn(loop, c->fd, 0, c);
        }
    }
    for (i = 0; i < links; ++i) {
        switchsim_link_t *l = &net->links[i];

        switchsim__link_watch(loop, l);
        if (l->watched >= 0 && agg_txq_pending(&l->txq)) {
            switchsim__on_link(loop, l->watched, 0, l);
        }
    }
    return 1000;
}

static void *switchsim__net_main(void *arg)
{
    switchsim_net_t *net = arg;

    agg_loop_run(net->loop, &net->sim->stop);
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
        return AGG_OK; /* shared memory only (sim_faults: its kill and stall apply there) */
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
    /* a descriptor for every connection and link it may keep, where the hard limit allows */
    agg_sock_fd_limit(SWITCHSIM_NET_MAX_CONNS + SWITCHSIM_NET_MAX_LINKS + 64);
    if (agg_fault_parse(&net->faults, agg_conf_str(&sim->conf, AGG_CONF_SIM_FAULTS), why,
                        sizeof(why)) != AGG_OK) {
        agg_error("sim_faults \"%s\": %s", agg_conf_str(&sim->conf, AGG_CONF_SIM_FAULTS), why);
        free(net);
        return AGG_ERR_CONFIG;
    }
    if (net->faults.num > 0) {
        agg_warn("data port: injecting faults \"%s\" (sim_faults)",
                 agg_conf_str(&sim->conf, AGG_CONF_SIM_FAULTS));
    }
    st = agg_loop_create(&net->loop, 1 + SWITCHSIM_NET_MAX_CONNS + SWITCHSIM_NET_MAX_LINKS);
    if (st != AGG_OK) {
        free(net);
        return st;
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
    net->retry = agg_loop_timer(net->loop, -1, switchsim__retry, net);
    net->hold  = agg_loop_timer(net->loop, -1, switchsim__unhold, net);
    fcntl(net->listen_fd, F_SETFL, fcntl(net->listen_fd, F_GETFL) | O_NONBLOCK);
    st = agg_loop_add(net->loop, net->listen_fd, POLLIN, NULL, switchsim__net_accept, net);
    if (st != AGG_OK || net->retry < 0 || net->hold < 0 ||
        agg_loop_timer(net->loop, 1000, switchsim__sweep, net) < 0 ||
        pthread_create(&net->thread, NULL, switchsim__net_main, net) != 0) {
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
    agg_loop_destroy(net->loop);
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
    if (agg_loop_destroy(net->loop) != 0) {
        agg_warn("data port: threads of its loop still running at exit");
        return; /* net stays: they may still touch it */
    }
    net->loop = NULL;
    for (i = 0; i < SWITCHSIM_NET_MAX_CONNS; ++i) {
        __atomic_store_n(&net->conns[i].state, SWITCHSIM_CONN_FREE, __ATOMIC_RELEASE);
        switchsim__conn_close(net, &net->conns[i], NULL);
        free(net->conns[i].rx);
        agg_txq_free(&net->conns[i].txq);
        pthread_mutex_destroy(&net->conns[i].tx_lock);
    }
    for (i = 0; i < net->num_links; ++i) {
        if (net->links[i].fd >= 0) {
            close(net->links[i].fd);
        }
        agg_txq_free(&net->links[i].txq);
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
        sum->faults += __atomic_load_n(&sim->net->faults_out, __ATOMIC_RELAXED);
    }
}

