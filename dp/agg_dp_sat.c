/*
 * The SAT side of the aggregation-node engine (agg_dp_int.h): the SAT lock,
 * exclusive per switch, and zero-copy chunks that stay in the members' own
 * memory. Only the zero-copy paths make system calls (process_vm_readv and
 * _writev), one per scratch-sized piece.
 */
#include "agg_dp_int.h"

#include <string.h>
#include <sys/uio.h>

#include "agg/reduce.h"

/* ---- zero copy ---------------------------------------------------------- */

/* Reads `bytes` at raddr of process pid into buf (process_vm_readv). */
static agg_status_t agg__dp_cma_read(uint32_t pid, uint64_t raddr, void *buf, size_t bytes)
{
    while (bytes > 0) {
        struct iovec local = {buf, bytes}, remote = {(void *)(uintptr_t)raddr, bytes};
        ssize_t got = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);

        if (got <= 0) {
            return AGG_ERR_IO;
        }
        buf    = (uint8_t *)buf + got;
        raddr += (uint64_t)got;
        bytes -= (size_t)got;
    }
    return AGG_OK;
}

static agg_status_t agg__dp_cma_write(uint32_t pid, uint64_t raddr, const void *buf,
                                      size_t bytes)
{
    while (bytes > 0) {
        struct iovec local = {(void *)buf, bytes}, remote = {(void *)(uintptr_t)raddr, bytes};
        ssize_t put = process_vm_writev((pid_t)pid, &local, 1, &remote, 1, 0);

        if (put <= 0) {
            return AGG_ERR_IO;
        }
        buf    = (const uint8_t *)buf + put;
        raddr += (uint64_t)put;
        bytes -= (size_t)put;
    }
    return AGG_OK;
}

/*
 * A contribution that stays in the rank's memory: read it in scratch-sized
 * pieces and combine each (straight into the accumulator when it is the
 * first one and needs no widening).
 */
agg_status_t agg__dp_combine_remote(void *acc, const agg_dp_contrib_t *c, int first,
                                    agg_dp_driver_t *drv)
{
    size_t esize = agg_dtype_size(c->desc.dtype), asize = agg_dtype_acc_size(c->desc.dtype);
    size_t per, done = 0, k;
    agg_status_t st;

    if (first && esize == asize) {
        st = agg__dp_cma_read(c->pid, c->raddr, acc, (size_t)c->desc.count * esize);
        agg_dp_count(&drv->ctr->zcopy_bytes, st == AGG_OK ? (uint64_t)c->desc.count * esize : 0);
        return st;
    }
    per = drv->scratch_size / esize;
    if (drv->scratch == NULL || per == 0) {
        return AGG_ERR_NO_MEMORY;
    }
    while (done < c->desc.count) {
        k  = c->desc.count - done < per ? c->desc.count - done : per;
        st = agg__dp_cma_read(c->pid, c->raddr + done * esize, drv->scratch, k * esize);
        if (st != AGG_OK) {
            return st;
        }
        if (first) {
            agg_widen_fn(c->desc.dtype)((uint8_t *)acc + done * asize, drv->scratch, k);
        } else {
            agg_reduce_acc_fn(c->desc.dtype, c->desc.op)((uint8_t *)acc + done * asize,
                                                         drv->scratch, k);
        }
        done += k;
    }
    agg_dp_count(&drv->ctr->zcopy_bytes, (uint64_t)c->desc.count * esize);
    return AGG_OK;
}

/* ---- the SAT lock ------------------------------------------------------- */

/*
 * Takes the SAT lock of every switch of this segment for the group, all or
 * nothing: a switch streams for one group at a time.
 */
static agg_status_t agg__dp_lock(agg_dp_view_t *v, agg_dp_driver_t *drv)
{
    agg_dp_seg_t *s = v->seg;
    uint32_t i, j, gid = s->group_id, free_val;

    if (v->host == NULL) {
        agg_dp_count(&drv->ctr->locks_granted, 1);
        return AGG_OK;
    }
    for (i = 0; i < s->num_nodes; ++i) {
        agg_dp_an_t *an = agg_dp_host_an(v->host, agg_dp_node(s, i)->an);

        free_val = 0;
        if (!__atomic_compare_exchange_n(&an->sat_lock, &free_val, gid, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE) && free_val != gid) {
            for (j = 0; j < i; ++j) {
                uint32_t mine = gid;
                __atomic_compare_exchange_n(&agg_dp_host_an(v->host,
                                                            agg_dp_node(s, j)->an)->sat_lock,
                                            &mine, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
            }
            agg_dp_count(&drv->ctr->locks_busy, 1);
            return AGG_ERR_SAT_LOCK_BUSY;
        }
        agg_dp_count(&an->sat_lock_taken, 1);
    }
    agg_dp_count(&drv->ctr->locks_granted, 1);
    return AGG_OK;
}

void agg__dp_unlock_sat(agg_dp_view_t *v)
{
    agg_dp_seg_t *s = v->seg;
    uint32_t i;

    for (i = 0; v->host != NULL && i < s->num_nodes; ++i) {
        uint32_t mine = s->group_id;
        __atomic_compare_exchange_n(&agg_dp_host_an(v->host, agg_dp_node(s, i)->an)->sat_lock,
                                    &mine, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
}

/* Lock requests pass every segment's top on the way up; each takes its own switches. */
void agg__dp_lock_step(agg_dp_view_t *v, agg_dp_slot_t *slot, agg_dp_driver_t *drv)
{
    if (slot->status != AGG_OK) {
        return;
    }
    if (slot->desc.kind == AGG_DP_KIND_LOCK) {
        slot->status = agg__dp_lock(v, drv);
    } else if (slot->desc.kind == AGG_DP_KIND_UNLOCK) {
        agg__dp_unlock_sat(v);
    }
}

/* ---- results in the members' memory ------------------------------------- */

/*
 * Zero-copy SAT: members that left their data in their own memory get the
 * result written there too, rounded to the wire type on the way.
 */
agg_status_t agg__dp_deliver_cma(agg_dp_view_t *v, agg_dp_slot_t *slot,
                                 agg_dp_driver_t *drv)
{
    agg_dp_seg_t *s = v->seg;
    size_t esize = agg_dtype_size(slot->desc.dtype), asize = agg_dtype_acc_size(slot->desc.dtype);
    size_t per, done, k;
    const uint8_t *acc = agg_dp_acc(slot);
    agg_status_t st;
    uint32_t m;

    for (m = 0; m < s->num_members; ++m) {
        agg_dp_frag_t *f = agg_dp_stage(s, m, slot->cur);

        if (__atomic_load_n(&f->n, __ATOMIC_ACQUIRE) != slot->cur ||
            !(f->flags & AGG_DP_FRAG_CMA)) {
            continue;
        }
        if (esize == asize) {
            st = agg__dp_cma_write(f->pid, f->dst, acc, (size_t)slot->desc.count * esize);
        } else {
            per = drv->scratch_size / esize;
            st  = per == 0 ? AGG_ERR_NO_MEMORY : AGG_OK;
            for (done = 0; st == AGG_OK && done < slot->desc.count; done += k) {
                k = slot->desc.count - done < per ? slot->desc.count - done : per;
                agg_narrow_fn(slot->desc.dtype)(drv->scratch, acc + done * asize, k);
                st = agg__dp_cma_write(f->pid, f->dst + done * esize, drv->scratch,
                                       k * esize);
            }
        }
        if (st != AGG_OK) {
            agg_dp_count(&drv->ctr->errors, 1);
            return st;
        }
        agg_dp_count(&drv->ctr->zcopy_bytes, (uint64_t)slot->desc.count * esize);
    }
    return AGG_OK;
}
