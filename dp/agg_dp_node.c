/*
 * The aggregation-node engine (agg/dp.h): a child's contribution goes into a
 * node slot under the slot's lock, and the child that completes a node moves
 * the fragment on: to the parent through the node's up port, or, at the
 * root, into the result every member reads. Any process mapping the segment
 * runs this code: switchsim's workers and the member ranks themselves.
 *
 * Nothing here allocates, logs or makes a system call on the way of a
 * fragment, except futex wake-ups when somebody sleeps and the
 * process_vm_readv/writev of zero-copy chunks.
 */
#include "agg/dp.h"

#include <sched.h>
#include <string.h>

#include "agg_dp_int.h"

/* Yields to wait for a slot a result comes back to before handing it back. */
#define AGG_DP_RESULT_SPINS 64

#include "agg/reduce.h"
#include "agg/wait.h"

static inline uint64_t *agg__dp_seen(const agg_dp_seg_t *s, const agg_dp_node_t *node,
                                     agg_dp_slot_t *slot, uint64_t n)
{
    if (node->bitmap_words == 0) {
        return &slot->seen;
    }
    return (uint64_t *)((uint8_t *)s + node->bitmap_off) +
           (size_t)agg_seq_slot(n, s->num_slots) * node->bitmap_words;
}

void agg_dp_wake_members(agg_dp_seg_t *s)
{
    agg_wait_wake(&s->result_gen, &s->sleepers);
}

static void agg__dp_ring(agg_dp_host_t *host)
{
    if (host != NULL) {
        agg_wait_wake(&host->doorbell, &host->sleeping);
    }
}

/*
 * Releases a slot with `pushed` children in it. A member whose push found
 * the slot busy may be asleep by now waiting for a result that needs its
 * push: wake it (only costs a load when nobody sleeps).
 */
static void agg__dp_unlock(agg_dp_seg_t *s, agg_dp_slot_t *slot, uint32_t pushed)
{
    __atomic_store_n(&slot->state, pushed, __ATOMIC_SEQ_CST);
    agg_dp_wake_members(s);
}

/*
 * Ready for the next use: nothing seen, nothing pushed, unlocked, and the
 * fragment recorded as moved on, so that a late copy of it is recognised. A
 * node below the top also records it as done; node 0 of a segment whose
 * parent is elsewhere does not: its `done` is what members read, and only the
 * result coming down sets it.
 */
static void agg__dp_reset(agg_dp_seg_t *s, const agg_dp_node_t *node, agg_dp_slot_t *slot)
{
    uint64_t *seen = agg__dp_seen(s, node, slot, slot->cur);

    memset(seen, 0, (node->bitmap_words ? node->bitmap_words : 1) * sizeof(uint64_t));
    if (node->up == AGG_DP_UP_LOCAL) {
        __atomic_store_n(&slot->done, slot->cur, __ATOMIC_RELAXED);
    }
    slot->moved = slot->cur; /* a late copy of it is a duplicate, whatever the node */
    slot->flags &= AGG_DP_SLOT_FILLED; /* what a partial sent again says (empty or not) */
    agg__dp_unlock(s, slot, 0);
}

/* ---- combining ---------------------------------------------------------- */

/*
 * ALLGATHER: each child fills its part of the fragment. A member sends its
 * own block (elements off .. off + len), a child node its whole partial,
 * zero where none of its members has a block: OR-ing into an accumulator
 * zeroed at the first contribution places every part, whatever the order.
 */
static void agg__dp_place(agg_dp_slot_t *slot, const agg_dp_contrib_t *c, int first)
{
    size_t esize = agg_dtype_size(c->desc.dtype);
    uint8_t *acc = agg_dp_acc(slot);

    if (first && (c->in_acc || (c->off == 0 && c->len == c->desc.count))) {
        memcpy(acc, c->data, (size_t)c->desc.count * esize);
        return;
    }
    if (first) {
        memset(acc, 0, (size_t)c->desc.count * esize);
    }
    if (c->in_acc) {
        agg_reduce_fn(c->desc.dtype, AGG_OP_BOR)(acc, c->data, c->desc.count);
    } else {
        agg_reduce_fn(c->desc.dtype, AGG_OP_BOR)(acc + (size_t)c->off * esize, c->data, c->len);
    }
}

/*
 * Adds a child's data to the slot: the first data copied (widened) into the
 * accumulator, the next reduced into it. A child with no data (a bcast's
 * non-root) adds nothing.
 */
static agg_status_t agg__dp_combine(agg_dp_slot_t *slot, const agg_dp_contrib_t *c,
                                    agg_dp_driver_t *drv)
{
    void *acc = agg_dp_acc(slot);
    int accdt = agg_dtype_acc(c->desc.dtype);
    int first = !(slot->flags & AGG_DP_SLOT_FILLED);

    if (c->empty) {
        return AGG_OK;
    }
    slot->flags |= AGG_DP_SLOT_FILLED;
    if (c->desc.coll == AGG_DP_COLL_ALLGATHER) {
        agg__dp_place(slot, c, first);
        return AGG_OK;
    }
    if (c->in_place) {
        return AGG_OK; /* read straight into the accumulator (agg_dp_claim) */
    }
    if (c->data == NULL) {
        return agg__dp_combine_remote(acc, c, first, drv);
    }
    if (c->in_acc) {
        if (first) {
            memcpy(acc, c->data, (size_t)c->desc.count * agg_dtype_size(accdt));
        } else {
            agg_reduce_fn(accdt, c->desc.op)(acc, c->data, c->desc.count);
        }
    } else if (first) {
        agg_widen_fn(c->desc.dtype)(acc, c->data, c->desc.count);
    } else {
        agg_reduce_acc_fn(c->desc.dtype, c->desc.op)(acc, c->data, c->desc.count);
    }
    return AGG_OK;
}

/* Is a contribution something this segment's nodes can take at all? */
static int agg__dp_valid(const agg_dp_seg_t *s, const agg_dp_contrib_t *c)
{
    if (c->desc.kind >= AGG_DP_KIND__COUNT || c->desc.coll >= AGG_DP_COLL__COUNT ||
        (c->desc.kind != AGG_DP_KIND_DATA && s->tree != AGG_TREE_SAT)) {
        return 0; /* only a SAT group has a lock to ask for */
    }
    if (c->desc.kind != AGG_DP_KIND_DATA || c->desc.count == 0 || c->status != AGG_OK) {
        return 1;
    }
    if (c->desc.coll == AGG_DP_COLL_ALLGATHER &&
        (agg_dtype_acc(c->desc.dtype) != c->desc.dtype ||
         agg_reduce_fn(c->desc.dtype, AGG_OP_BOR) == NULL || (c->data == NULL && !c->empty) ||
         (!c->in_acc && !c->empty && (uint64_t)c->off + c->len > c->desc.count))) {
        return 0; /* parts are placed by OR: integer types, in memory here */
    }
    return agg_reduce_acc_fn(c->desc.dtype, c->desc.op) != NULL &&
           (uint64_t)c->desc.count * agg_dtype_size(c->desc.dtype) <= s->payload;
}

/* ---- completing a node -------------------------------------------------- */

static agg_status_t agg__dp_forward(agg_dp_view_t *v, const agg_dp_node_t *node,
                                    agg_dp_slot_t *slot, agg_dp_driver_t *drv)
{
    agg_dp_contrib_t c = {
        .n      = slot->cur,
        .desc   = slot->desc,
        .empty  = !(slot->flags & AGG_DP_SLOT_FILLED),
        .status = slot->status,
        .data   = agg_dp_acc(slot),
        .in_acc = 1,
    };
    agg_dp_view_t *peer;
    agg_dp_port_t *port;

    if (node->up == AGG_DP_UP_LOCAL) {
        return agg_dp_push(v, (uint32_t)node->parent, node->position, &c, drv);
    }
    if (node->up == AGG_DP_UP_NET) {
        if (v->net == NULL) {
            agg__dp_ring(v->host); /* switchsim owns the link */
            return AGG_INPROGRESS;
        }
        return v->net->up(v->net->ctx, node->port, &c);
    }
    peer = v->peers != NULL ? v->peers[node->port] : NULL;
    if (peer == NULL) {
        /* this process does not map the parent's segment: switchsim does */
        agg__dp_ring(v->host);
        return AGG_INPROGRESS;
    }
    port = agg_dp_port(v->seg, node->port);
    return agg_dp_push(peer, port->node, port->position, &c, drv);
}

/* Copies a published result into the child segments below this node. */
static agg_status_t agg__dp_deliver_down(agg_dp_view_t *v, const agg_dp_node_t *node,
                                         agg_dp_slot_t *slot)
{
    size_t bytes = (size_t)slot->desc.count * agg_dtype_acc_size(slot->desc.dtype);
    uint32_t i;

    for (i = 0; i < node->num_down; ++i) {
        uint8_t kind = agg_dp_port(v->seg, node->down_first + i)->kind;

        if (kind == AGG_DP_PORT_SHM ? v->peers == NULL || v->peers[node->down_first + i] == NULL
                                    : v->net == NULL) {
            agg__dp_ring(v->host); /* switchsim maps it, or owns the link */
            return AGG_INPROGRESS;
        }
    }
    for (i = 0; i < node->num_down; ++i) {
        agg_dp_port_t *port = agg_dp_port(v->seg, node->down_first + i);
        agg_dp_view_t *peer;
        agg_dp_slot_t *dst;

        if (port->kind != AGG_DP_PORT_SHM) {
            v->net->down(v->net->ctx, node->down_first + i, slot);
            continue;
        }
        peer = v->peers[node->down_first + i];
        dst  = agg_dp_slot(peer->seg, agg_dp_node(peer->seg, port->node), slot->cur);

        if (slot->status == AGG_OK && slot->desc.kind == AGG_DP_KIND_DATA) {
            memcpy(agg_dp_acc(dst), agg_dp_acc(slot), bytes);
        }
        /* a refused lock: the child segment gives back what it took on the way up */
        if (slot->desc.kind == AGG_DP_KIND_LOCK && slot->status != AGG_OK) {
            agg__dp_unlock_sat(peer);
        }
        dst->status = slot->status;
        dst->desc   = slot->desc;
        __atomic_store_n(&dst->done, slot->cur, __ATOMIC_SEQ_CST);
        agg_dp_wake_members(peer->seg);
    }
    return AGG_OK;
}

agg_status_t agg_dp_result_in(agg_dp_view_t *v, const agg_dp_slot_t *hdr, const void *acc)
{
    agg_dp_seg_t *s = v->seg;
    const agg_dp_node_t *top = agg_dp_node(s, 0);
    agg_dp_slot_t *dst = agg_dp_slot(s, top, hdr->cur);
    size_t bytes = (size_t)hdr->desc.count * agg_dtype_acc_size(hdr->desc.dtype);

    if (top->up == AGG_DP_UP_ROOT || bytes > (uint64_t)s->payload * AGG_DP_ACC_FACTOR) {
        return AGG_ERR_BAD_FRAGMENT; /* the top of the tree gets no result from above */
    }
    /*
     * The slot combined this fragment on its way up; the thread that sent it
     * may still be letting go of it (the answer can come back that fast).
     * Still held after a few yields: AGG_INPROGRESS, the caller keeps the
     * message and offers it again. Nothing else takes the slot before the
     * members have this result.
     */
    for (uint32_t free_st = 0, spins = 0;
         !__atomic_compare_exchange_n(&dst->state, &free_st, AGG_DP_SLOT_LOCKED, 0,
                                      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
         free_st = 0, ++spins) {
        if (spins == AGG_DP_RESULT_SPINS) {
            return AGG_INPROGRESS;
        }
        sched_yield();
    }
    if (__atomic_load_n(&dst->done, __ATOMIC_RELAXED) == hdr->cur || hdr->cur < dst->moved) {
        /* its result came already (this is a copy sent again), or the slot
           moved on since */
        __atomic_store_n(&dst->state, 0, __ATOMIC_RELEASE);
        return AGG_OK;
    }
    if (dst->moved != hdr->cur) {
        /* not a fragment this node sent up */
        __atomic_store_n(&dst->state, 0, __ATOMIC_RELEASE);
        return AGG_ERR_BAD_FRAGMENT;
    }
    if (hdr->status == AGG_OK && hdr->desc.kind == AGG_DP_KIND_DATA && bytes > 0) {
        memcpy(agg_dp_acc(dst), acc, bytes);
    }
    if (hdr->desc.kind == AGG_DP_KIND_LOCK && hdr->status != AGG_OK) {
        agg__dp_unlock_sat(v); /* a refused lock: give back what this part took */
    }
    dst->status = hdr->status;
    dst->desc   = hdr->desc;
    dst->cur    = hdr->cur;
    if (top->num_down > 0) {
        agg__dp_deliver_down(v, top, dst);
    }
    __atomic_store_n(&dst->done, hdr->cur, __ATOMIC_SEQ_CST);
    __atomic_store_n(&dst->state, 0, __ATOMIC_SEQ_CST);
    agg_dp_wake_members(s);
    return AGG_OK;
}

/* The root: lock requests are decided here, then the result is published. */
static agg_status_t agg__dp_publish(agg_dp_view_t *v, const agg_dp_node_t *node,
                                    agg_dp_slot_t *slot, agg_dp_driver_t *drv)
{
    if (!(slot->flags & AGG_DP_SLOT_PENDING)) {
        agg__dp_lock_step(v, slot, drv);
        if (slot->status == AGG_OK && slot->desc.kind == AGG_DP_KIND_DATA &&
            v->seg->tree == AGG_TREE_SAT) {
            agg_status_t st = agg__dp_deliver_cma(v, slot, drv);

            if (st != AGG_OK) {
                slot->status = st;
            }
        }
    }
    if (node->num_down > 0 && agg__dp_deliver_down(v, node, slot) != AGG_OK) {
        return AGG_INPROGRESS;
    }
    agg_dp_count(&drv->ctr->results_out, 1);
    __atomic_store_n(&slot->done, slot->cur, __ATOMIC_SEQ_CST);
    return AGG_OK;
}

/*
 * Moves a complete slot on (the caller holds its lock). AGG_INPROGRESS: the
 * parent was busy, or the way on goes through a segment this process does
 * not map; the slot stays complete and marked, for agg_dp_progress.
 */
static agg_status_t agg__dp_move_on(agg_dp_view_t *v, const agg_dp_node_t *node,
                                    agg_dp_slot_t *slot, agg_dp_driver_t *drv)
{
    if (node->up == AGG_DP_UP_ROOT) {
        return agg__dp_publish(v, node, slot, drv);
    }
    if ((node->up == AGG_DP_UP_SHM || node->up == AGG_DP_UP_NET) &&
        !(slot->flags & AGG_DP_SLOT_PENDING)) {
        agg__dp_lock_step(v, slot, drv);
    }
    return agg__dp_forward(v, node, slot, drv);
}

/* Another try for a slot left complete and marked; 1 when it moved on. */
static int agg__dp_retry(agg_dp_view_t *v, const agg_dp_node_t *node, agg_dp_slot_t *slot,
                         agg_dp_driver_t *drv)
{
    uint32_t st = node->expected;

    if (!__atomic_compare_exchange_n(&slot->state, &st, node->expected | AGG_DP_SLOT_LOCKED,
                                     0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        return 0;
    }
    if (!(slot->flags & AGG_DP_SLOT_PENDING) ||
        agg__dp_move_on(v, node, slot, drv) != AGG_OK) {
        agg__dp_unlock(v->seg, slot, node->expected);
        return 0;
    }
    agg__dp_reset(v->seg, node, slot);
    return 1;
}

static void agg__dp_complete(agg_dp_view_t *v, const agg_dp_node_t *node,
                             agg_dp_slot_t *slot, agg_dp_driver_t *drv)
{
    agg_dp_seg_t *s = v->seg;

    if (agg__dp_move_on(v, node, slot, drv) == AGG_OK) {
        agg__dp_reset(s, node, slot);
        return;
    }
    slot->flags |= AGG_DP_SLOT_PENDING;
    __atomic_fetch_add(&s->work_gen, 1, __ATOMIC_SEQ_CST);
    agg__dp_unlock(s, slot, node->expected);
    /* whoever held the parent may have let go between our try and the mark */
    agg__dp_retry(v, node, slot, drv);
}

/*
 * A fragment already seen in this slot: in this use, a late copy of one
 * completed here, or of one older still (a copy sent again over TCP that
 * arrives after the slot moved on: on another lane than the fragments
 * after it).
 */
static int agg__dp_seen_before(agg_dp_seg_t *s, const agg_dp_node_t *node, agg_dp_slot_t *slot,
                               uint32_t pushed, uint32_t position, uint64_t n)
{
    if (pushed > 0) {
        return n < slot->cur ||
               ((agg__dp_seen(s, node, slot, n)[position / 64] >> (position % 64)) & 1);
    }
    return n <= slot->moved || n == __atomic_load_n(&slot->done, __ATOMIC_RELAXED);
}

/* Takes contribution c into a slot the caller locked with `pushed` children in. */
static agg_status_t agg__dp_take(agg_dp_view_t *v, const agg_dp_node_t *node,
                                 agg_dp_slot_t *slot, uint32_t position, uint32_t pushed,
                                 const agg_dp_contrib_t *c, agg_dp_driver_t *drv)
{
    agg_dp_seg_t *s = v->seg;
    uint64_t *seen = agg__dp_seen(s, node, slot, c->n) + position / 64;
    uint64_t bit = 1ull << (position % 64);
    int first, reduced;

    if (agg__dp_seen_before(s, node, slot, pushed, position, c->n)) {
        agg_dp_count(&drv->ctr->duplicates, 1);
        agg__dp_unlock(s, slot, pushed);
        return AGG_OK;
    }
    *seen |= bit;
    first = pushed == 0;
    if (first) {
        slot->cur    = c->n;
        slot->desc   = c->desc;
        slot->status = AGG_OK;
        slot->flags  = 0;
    } else if (slot->cur != c->n || !agg_frag_desc_same(&slot->desc, &c->desc)) {
        if (slot->status == AGG_OK) {
            slot->status = AGG_ERR_DATA_MISMATCH;
            agg_dp_count(&drv->ctr->errors, 1);
        }
    }
    if (slot->status == AGG_OK && c->status != AGG_OK) {
        slot->status = c->status;
    } else if (slot->status == AGG_OK && !agg__dp_valid(s, c)) {
        slot->status = AGG_ERR_BAD_FRAGMENT;
        agg_dp_count(&drv->ctr->errors, 1);
    }
    if (slot->status == AGG_OK && c->desc.kind == AGG_DP_KIND_DATA && c->desc.count > 0) {
        agg_status_t rc;

        reduced = (slot->flags & AGG_DP_SLOT_FILLED) && !c->empty;
        rc      = agg__dp_combine(slot, c, drv);
        if (rc != AGG_OK) {
            slot->status = rc;
            agg_dp_count(&drv->ctr->errors, 1);
        } else if (reduced) {
            agg_dp_count(&drv->ctr->reductions, 1);
        }
    }
    if (++pushed < node->expected) {
        agg__dp_unlock(s, slot, pushed);
    } else {
        agg__dp_complete(v, node, slot, drv);
    }
    if (__atomic_load_n(&s->work_gen, __ATOMIC_SEQ_CST) != drv->work_seen ||
        drv->work_seg != s) {
        agg_dp_progress(v, drv);
    }
    return AGG_OK;
}

agg_status_t agg_dp_push(agg_dp_view_t *v, uint32_t node_idx, uint32_t position,
                         const agg_dp_contrib_t *c, agg_dp_driver_t *drv)
{
    agg_dp_seg_t *s = v->seg;
    const agg_dp_node_t *node = agg_dp_node(s, node_idx);
    agg_dp_slot_t *slot = agg_dp_slot(s, node, c->n);
    uint32_t E = node->expected, st;
    int repro = s->flags & AGG_DP_F_REPRODUCIBLE;

    if (position >= E || c->in_place) {
        return AGG_ERR_INVALID_PARAM;
    }
    st = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
    do {
        if ((st & AGG_DP_SLOT_LOCKED) || st >= E || (repro && st != position)) {
            return AGG_INPROGRESS;
        }
    } while (!__atomic_compare_exchange_n(&slot->state, &st, st | AGG_DP_SLOT_LOCKED, 0,
                                          __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE));
    return agg__dp_take(v, node, slot, position, st, c, drv);
}

void *agg_dp_claim(agg_dp_view_t *v, uint32_t node_idx, const agg_dp_contrib_t *c)
{
    agg_dp_seg_t *s = v->seg;
    const agg_dp_node_t *node = agg_dp_node(s, node_idx);
    agg_dp_slot_t *slot = agg_dp_slot(s, node, c->n);
    uint32_t st = 0;

    if (node->expected != 1 || c->desc.kind != AGG_DP_KIND_DATA || c->status != AGG_OK ||
        c->empty || c->in_acc || c->desc.coll == AGG_DP_COLL_ALLGATHER || c->desc.count == 0 ||
        agg_dtype_acc(c->desc.dtype) != c->desc.dtype || !agg__dp_valid(s, c) ||
        !__atomic_compare_exchange_n(&slot->state, &st, AGG_DP_SLOT_LOCKED, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        return NULL;
    }
    if (agg__dp_seen_before(s, node, slot, 0, 0, c->n)) {
        agg__dp_unlock(s, slot, 0); /* agg_dp_push counts it and drops it */
        return NULL;
    }
    return agg_dp_acc(slot);
}

agg_status_t agg_dp_push_claimed(agg_dp_view_t *v, uint32_t node_idx,
                                 const agg_dp_contrib_t *c, agg_dp_driver_t *drv)
{
    const agg_dp_node_t *node = agg_dp_node(v->seg, node_idx);
    agg_dp_contrib_t in = *c;

    in.data     = agg_dp_acc(agg_dp_slot(v->seg, node, c->n));
    in.in_place = 1;
    return agg__dp_take(v, node, agg_dp_slot(v->seg, node, c->n), 0, 0, &in, drv);
}

void agg_dp_unclaim(agg_dp_view_t *v, uint32_t node_idx, uint64_t n)
{
    const agg_dp_node_t *node = agg_dp_node(v->seg, node_idx);

    agg__dp_unlock(v->seg, agg_dp_slot(v->seg, node, n), 0);
}

unsigned agg_dp_progress(agg_dp_view_t *v, agg_dp_driver_t *drv)
{
    agg_dp_seg_t *s = v->seg;
    uint32_t gen = __atomic_load_n(&s->work_gen, __ATOMIC_SEQ_CST), i, k;
    unsigned moved = 0, left = 0;

    if ((gen == drv->work_seen && drv->work_seg == s) || drv->in_progress) {
        return 0;
    }
    drv->in_progress = 1;
    /* deepest nodes first: what they move on may complete their parents */
    for (i = s->num_nodes; i-- > 0;) {
        const agg_dp_node_t *node = agg_dp_node(s, i);

        if (node->up == AGG_DP_UP_ROOT && node->num_down == 0) {
            continue;
        }
        for (k = 0; k < s->num_slots; ++k) {
            agg_dp_slot_t *slot = (agg_dp_slot_t *)((uint8_t *)s + node->slots_off +
                                                    (size_t)k * s->slot_stride);
            uint32_t state = __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);

            if (state & AGG_DP_SLOT_LOCKED) {
                /* its holder may be completing it and about to mark it pending
                   (with its count still one short): not handled yet */
                left++;
                continue;
            }
            if (state != node->expected) {
                continue;
            }
            if (agg__dp_retry(v, node, slot, drv)) {
                moved++;
            } else {
                left++;
            }
        }
    }
    /* the generation counts as handled only once nothing is left waiting */
    if (left == 0) {
        drv->work_seen = gen;
        drv->work_seg  = s;
    }
    drv->in_progress = 0;
    return moved;
}

unsigned agg_dp_scan(agg_dp_view_t *v, uint32_t m, agg_dp_driver_t *drv)
{
    agg_dp_seg_t *s = v->seg;
    agg_dp_chan_t *ch = agg_dp_chan(s, m);
    const agg_dp_member_t *mem = agg_dp_member(s, m);
    uint32_t unlocked = 0, k;
    unsigned taken = 0;

    if (!__atomic_compare_exchange_n(&ch->scan_lock, &unlocked, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
        return 0;
    }
    for (k = 0; k < s->window; ++k) {
        uint64_t n = ch->consumed + 1;
        agg_dp_frag_t *f = agg_dp_stage(s, m, n);
        agg_dp_contrib_t c;

        if (__atomic_load_n(&f->n, __ATOMIC_ACQUIRE) != n) {
            break;
        }
        c = (agg_dp_contrib_t){.n = n, .desc = f->desc,
                               .empty = (f->flags & AGG_DP_FRAG_EMPTY) != 0, .off = f->off,
                               .len = f->len, .status = AGG_OK};
        if (f->flags & AGG_DP_FRAG_FAILED) {
            c.status = AGG_ERR_TIMEOUT;
        } else if (f->flags & AGG_DP_FRAG_CMA) {
            c.pid   = f->pid;
            c.raddr = f->src;
        } else {
            c.data = agg_dp_frag_data(f);
        }
        if (agg_dp_push(v, mem->leaf, mem->position, &c, drv) != AGG_OK) {
            break; /* the slot is busy: this channel waits for the next pass */
        }
        agg_dp_count_in(drv, s->tree, &c);
        __atomic_store_n(&ch->consumed, n, __ATOMIC_RELEASE);
        taken++;
    }
    __atomic_store_n(&ch->scan_lock, 0, __ATOMIC_RELEASE);
    return taken;
}

void agg_dp_count_in(agg_dp_driver_t *drv, uint8_t tree, const agg_dp_contrib_t *c)
{
    uint64_t bytes;

    if (c->desc.kind != AGG_DP_KIND_DATA) {
        return; /* SAT lock requests are control, not data */
    }
    bytes = c->empty ? 0 : (uint64_t)(c->desc.coll == AGG_DP_COLL_ALLGATHER && !c->in_acc ?
                                      c->len : c->desc.count) * agg_dtype_size(c->desc.dtype);
    if (tree == AGG_TREE_SAT) {
        agg_dp_count(&drv->ctr->sat_chunks_in, 1);
        agg_dp_count(&drv->ctr->sat_bytes_in, bytes);
    } else {
        agg_dp_count(&drv->ctr->llt_fragments_in, 1);
    }
    agg_dp_count(&drv->ctr->bytes_in, bytes);
}

void agg_dp_copy_out(const agg_dp_slot_t *slot, void *dst)
{
    agg_dp_copy_out_part(slot, 0, slot->desc.count, dst);
}

void agg_dp_copy_out_part(const agg_dp_slot_t *slot, uint32_t off, uint32_t len, void *dst)
{
    size_t asize = agg_dtype_acc_size(slot->desc.dtype);

    if (slot->desc.kind == AGG_DP_KIND_DATA && len > 0 && slot->status == AGG_OK &&
        (uint64_t)off + len <= slot->desc.count) {
        agg_narrow_fn(slot->desc.dtype)(dst, (uint8_t *)agg_dp_acc((agg_dp_slot_t *)slot) +
                                   (size_t)off * asize, len);
    }
}
