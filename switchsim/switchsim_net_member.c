/*
 * switchsim's TCP data port, the members' side: fragments read from a
 * member's connection and pushed into its leaf (straight into the slot's
 * accumulator when it is large and alone), results sent back on the lane
 * the fragment came up on. The design of the whole port is in
 * switchsim_net_int.h.
 */
#include "switchsim_net_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/reduce.h"

/* ---- results: a MEMBER down port's send (any switchsim thread) -------- */

agg_status_t switchsim__net_down(void *ctx, uint32_t port, const agg_dp_slot_t *slot)
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
    int narrow = 0, fault;
    unsigned how;

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
    fault = net->faults.num > 0 ? switchsim__net_fault_out(net) : 0;
    if (fault == 1) {
        pthread_mutex_unlock(&c->tx_lock);
        return AGG_OK; /* lost on the way */
    }
    how = (narrow ? SWITCHSIM_TX_NARROW : 0) | (fault == 3 ? SWITCHSIM_TX_SPOIL : 0);
    if (switchsim__txq_send(&c->txq, c->fd, &m, data, how) != AGG_OK ||
        (fault == 2 && switchsim__txq_send(&c->txq, c->fd, &m, data, how) != AGG_OK)) {
        /* the receiving thread sees the hang-up and frees the connection */
        agg_warn("group %u: result %llu to %s not sent: %s", g->id, (unsigned long long)m.n,
                 c->peer, errno == 0 ? "its queue is full" : strerror(errno));
        shutdown(c->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&c->tx_lock);
    return AGG_OK;
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
 * A member's fragment came again (it sent it again: its result is late): when
 * this part has it done or sent up, the result or the partial goes again
 * (switchsim__part_again), on the lane it asked on. 1 when it came again
 * (a duplicate: taken), 0 the first time (caller holds sim->lock).
 */
static int switchsim__net_resend(switchsim_net_t *net, switchsim_group_t *g,
                                 const switchsim_conn_t *c, uint64_t n)
{
    const agg_dp_node_t *top = agg_dp_node(g->view.seg, 0);
    uint32_t i;

    if (!switchsim__part_seen(g, n)) {
        return 0; /* the first time: the usual way */
    }
    agg_dp_count(&net->ctr.duplicates, 1);
    for (i = 0; i < top->num_down; ++i) {
        const agg_dp_port_t *p = agg_dp_port(g->view.seg, top->down_first + i);

        if (p->kind == AGG_DP_PORT_MEMBER && p->node == c->channel) {
            switchsim__net_note_lane(g, c, n);
            switchsim__part_again(net, g, n, (int)(top->down_first + i));
            return 1;
        }
    }
    return 1;
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
    if (switchsim__net_resend(net, g, c, m->n)) {
        pthread_rwlock_unlock(&sim->lock);
        return 1;
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
 * sim_faults' corrupt: one bit of a whole message flipped, anywhere but in
 * its magic and length (a stream whose framing is lost cannot be read on),
 * where the message's own number says.
 */
static void switchsim__net_corrupt(uint8_t *msg)
{
    agg_net_msg_t m;
    size_t span, pos;

    memcpy(&m, msg, sizeof(m));
    span = sizeof(m) - 8 + m.bytes;
    pos  = (size_t)((m.n * 0x9e3779b97f4a7c15ull + m.channel) >> 11) % span;
    pos += pos < offsetof(agg_net_msg_t, bytes) - 4 ? 4 : 8; /* past magic; past bytes */
    msg[pos] ^= (uint8_t)(1u << (m.n % 8));
}

/*
 * A message that does not match its checksum: taken for lost (its sender
 * sends it again), said once per connection, counted as `corrupt`.
 */
static void switchsim__net_bad_csum(switchsim_net_t *net, switchsim_conn_t *c,
                                    const agg_net_msg_t *m)
{
    agg_dp_count(&net->ctr.corrupt, 1);
    if (!c->corrupt_said) {
        c->corrupt_said = 1;
        agg_warn("data connection from %s: a message (type %u, fragment %llu) does not match "
                 "its checksum: taken for lost (said once per connection; switchsim's "
                 "`corrupt` counts them)", c->peer, m->type, (unsigned long long)m->n);
    }
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
void switchsim__direct_drop(switchsim_net_t *net, switchsim_conn_t *c)
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
    } else if (rc > 0 && (c->dst_got += (size_t)rc) == c->dm.bytes &&
               !agg_net_intact(&c->dm, c->dst)) {
        switchsim__net_bad_csum(net, c, &c->dm); /* lost: the slot waits for it again */
        agg_dp_unclaim(&g->view, leaf, c->dm.n);
        c->dst = NULL;
        r      = 1;
    } else if (rc > 0 && c->dst_got == c->dm.bytes) {
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
 * sim_faults on the whole message at the head of c->rx, decided once: 1
 * when it is lost or held (c->held_until set), 0 when it goes on (perhaps
 * twice: c->fault).
 */
static int switchsim__net_fault_in(switchsim_net_t *net, switchsim_conn_t *c, uint8_t *msg)
{
    uint32_t ms;

    if (!c->fault_set) {
        c->fault     = agg_fault_next(&net->faults, AGG_FAULT_IN, &ms);
        c->fault_set = 1;
        if (c->fault != 0) {
            agg_dp_count(&net->ctr.faults, 1);
        }
        if (c->fault & AGG_FAULT_CORRUPT) {
            switchsim__net_corrupt(msg);
        }
        if (c->fault & AGG_FAULT_KILL) {
            switchsim__fault_kill(net, AGG_FAULT_IN);
        }
        if (c->fault & AGG_FAULT_HOLD) {
            c->fault &= ~AGG_FAULT_HOLD;
            switchsim__conn_hold(net, c, ms);
            return 1;
        }
    }
    return (c->fault & AGG_FAULT_LOSS) != 0;
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

    if (c->held_until != 0) {
        return 0; /* sim_faults hold it: nothing read, nothing pushed */
    }
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
            c->hdr_first = net->faults.num == 0 && switchsim__net_claim(net, c, &m, off);
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
        if (net->faults.num > 0 && switchsim__net_fault_in(net, c, c->rx + off)) {
            if (c->held_until != 0) {
                break; /* held: this message waits, and what follows it */
            }
            c->fault_set = 0; /* lost */
            off += sizeof(m) + m.bytes;
            continue;
        }
        memcpy(&m, c->rx + off, sizeof(m)); /* as it is now (sim_faults may corrupt it) */
        if (!agg_net_intact(&m, c->rx + off + sizeof(m))) {
            switchsim__net_bad_csum(net, c, &m);
            c->fault_set = 0;
            off += sizeof(m) + m.bytes;
            continue;
        }
        r = c->is_peer ? switchsim__net_peer(net, c, &m, c->rx + off + sizeof(m)) :
                         switchsim__net_push(net, c, &m, c->rx + off + sizeof(m));
        if (r > 0 && (c->fault & AGG_FAULT_DUP)) {
            /* it came twice: the second is a duplicate, or waits as one would */
            (void)(c->is_peer ? switchsim__net_peer(net, c, &m, c->rx + off + sizeof(m)) :
                                switchsim__net_push(net, c, &m, c->rx + off + sizeof(m)));
        }
        if (r < 0) {
            switchsim__conn_close(net, c, "bad fragment");
            return -1;
        }
        if (r == 0) {
            c->stalled = 1;
            break;
        }
        c->fault_set = 0;
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
void switchsim__net_serve(switchsim_net_t *net, switchsim_conn_t *c, int readable)
{
    int i;

    for (i = 0; i < SWITCHSIM_NET_SERVE_MAX && switchsim__net_read(net, c, readable) > 0; ++i) {
        readable = 1;
    }
}

