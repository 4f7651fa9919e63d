/*
 * switchsim's TCP data port, between switchsims: the links this switchsim
 * opens to others (a part's partial up, the result down to child parts),
 * what arrives from theirs, and a broken link reported to aggmgr. The
 * design of the whole port is in switchsim_net_int.h.
 */
#include "switchsim_net_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/reduce.h"
#include "agg/sock.h"

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
    agg_txq_drop(&l->txq);
}

/* Sends a message on a link to another switchsim; a broken link drops it. */
static void switchsim__link_send(switchsim_net_t *net, int li, const agg_net_msg_t *m,
                                 const void *data)
{
    switchsim_link_t *l = &net->links[li];
    int fault = net->faults.num > 0 ? switchsim__net_fault_out(net) : 0;
    agg_status_t st;

    if (fault == 1) {
        return; /* lost on the way */
    }
    pthread_mutex_lock(&l->lock);
    if (l->fd >= 0) {
        st = switchsim__txq_send(&l->txq, l->fd, m, data, fault == 3 ? SWITCHSIM_TX_SPOIL : 0);
        if (st == AGG_OK && fault == 2) {
            st = switchsim__txq_send(&l->txq, l->fd, m, data, 0);
        }
        if (st != AGG_OK) {
            switchsim__link_break(l, st == AGG_ERR_NO_RESOURCE ? AGG_ERR_TIMEOUT : AGG_ERR_IO,
                                  st == AGG_ERR_NO_RESOURCE ? "its queue is full" :
                                                               strerror(errno));
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
agg_status_t switchsim__net_up(void *ctx, uint32_t port, const agg_dp_contrib_t *c)
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
agg_status_t switchsim__net_down_part(switchsim_group_t *g, uint32_t port,
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
        if (switchsim__txq_init(net, &l->txq, 0) != AGG_OK) {
            agg_error("no memory for a link to switchsim %s", addr);
            return -1;
        }
        l->fd      = -1;
        l->watched = -1;
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
                         !agg_net_intact(&reply, NULL) ||
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
    if (agg_loop_post(net->loop, switchsim__link_watch, l) != AGG_OK) {
        agg_warn("link to switchsim %s: what does not go out at once will wait", addr);
    }
    agg_info("link to switchsim %s up", addr);
    return (int)(l - net->links);
}

int switchsim__part_again(switchsim_net_t *net, switchsim_group_t *g, uint64_t n,
                          int member_port)
{
    agg_dp_seg_t *s = g->view.seg;
    const agg_dp_node_t *top = agg_dp_node(s, 0);
    agg_dp_slot_t *slot = agg_dp_slot(s, top, n);
    uint32_t st = 0, i;
    int again = 0;

    if (!__atomic_compare_exchange_n(&slot->state, &st, AGG_DP_SLOT_LOCKED, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
        return 0; /* in use: the copy is a duplicate, or comes again later */
    }
    if (__atomic_load_n(&slot->done, __ATOMIC_RELAXED) == n) {
        for (i = 0; i < top->num_down; ++i) {
            uint32_t port = top->down_first + i;
            uint8_t kind = agg_dp_port(s, port)->kind;

            if (member_port >= 0 ? (int)port == member_port : kind == AGG_DP_PORT_NET) {
                switchsim__net_down(g, port, slot);
                again = 1;
            }
        }
    } else if (slot->moved == n && top->up == AGG_DP_UP_NET) {
        agg_dp_contrib_t c = {
            .n = n, .desc = slot->desc, .empty = !(slot->flags & AGG_DP_SLOT_FILLED),
            .status = slot->status, .data = agg_dp_acc(slot), .in_acc = 1,
        };

        switchsim__net_up(g, top->port, &c);
        again = 1;
    }
    __atomic_store_n(&slot->state, 0, __ATOMIC_RELEASE);
    if (again) {
        agg_dp_count(&net->ctr.resent, 1);
    }
    return again;
}

/*
 * A message from another switchsim: a child part's partial (UP), pushed into
 * the node it hangs from, or the result from the parent part (DOWN). 1:
 * done; 0: the slot is busy, try again; -1: the connection must go.
 */
int switchsim__net_peer(switchsim_net_t *net, switchsim_conn_t *c,
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
        } else if (switchsim__part_seen(g, m->n)) {
            /* it came again: what went from here on may have been lost */
            switchsim__part_again(net, g, m->n, -1);
            agg_dp_count(&net->drv.ctr->duplicates, 1);
            st = AGG_OK;
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

/* On the loop's thread: a link's socket is the one watched (it was made again). */
void switchsim__link_watch(agg_loop_t *loop, void *arg)
{
    switchsim_link_t *l = arg;

    pthread_mutex_lock(&l->lock);
    if (l->fd != l->watched) {
        if (l->watched >= 0) {
            agg_loop_del(loop, l->watched, l);
        }
        l->watched = -1;
        if (l->fd >= 0 &&
            agg_loop_add(loop, l->fd, 0, &l->txq.pending, switchsim__on_link, l) == AGG_OK) {
            l->watched = l->fd;
        }
    }
    pthread_mutex_unlock(&l->lock);
}

void switchsim__on_link(agg_loop_t *loop, int fd, short revents, void *arg)
{
    switchsim_link_t *l = arg;
    const char *why = NULL;

    pthread_mutex_lock(&l->lock);
    if (l->fd != fd) { /* it broke (and the number may be another socket's now) */
        agg_loop_del(loop, fd, l);
        l->watched = -1;
    } else if (agg_txq_poll(&l->txq, l->fd, revents, SWITCHSIM_NET_SEND_MS, &why) != 0) {
        switchsim__link_break(l, AGG_ERR_TIMEOUT, why);
    }
    pthread_mutex_unlock(&l->lock);
}

