/*
 * Allreduce through the aggregation tree. The user buffer is cut into
 * fragments of payload_per_ost bytes; a fragment is copied into this
 * member's send slot, switchsim reduces it with the other members' up the
 * tree, and the result appears in the group's result slot of the same
 * index. At most `osts` fragments are in flight: fragment s reuses the slots
 * of fragment s - osts, whose result has been read by then.
 */
#include "agg_internal.h"

#include <sched.h>
#include <string.h>

#include "agg/log.h"
#include "agg/shm.h"
#include "agg/sock.h"

#define AGG_WAIT_SLICE_MS 100 /* futex sleeps are cut so deadlines are seen */

static inline agg_frag_hdr_t *agg__slot(uint8_t *base, uint32_t stride, uint32_t seq,
                                        uint32_t osts)
{
    return (agg_frag_hdr_t *)(base + (size_t)((seq - 1) % osts) * stride);
}

/*
 * Sequence numbers run 1..2^32-1 and wrap to 1: 0 marks an empty slot.
 * The i-th (0-based) fragment after `base` carries agg__seq_after(base, i);
 * switchsim counts the same way.
 */
static inline uint32_t agg__seq_after(uint32_t base, size_t i)
{
    return (uint32_t)(((uint64_t)base + i) % 0xffffffffu) + 1u;
}

static inline uint32_t agg__next_seq(agg_comm_t *comm)
{
    comm->seq = agg__seq_after(comm->seq, 0);
    return comm->seq;
}

static void agg__ring(agg_comm_t *comm)
{
    agg_shm_bell_t *bell = comm->bell;

    __atomic_fetch_add(&bell->doorbell, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&bell->sleeping, __ATOMIC_SEQ_CST)) {
        agg_futex_wake(&bell->doorbell, 1);
    }
}

/*
 * Waits until the result slot holds `seq`: spins (unless processes
 * outnumber cores), yields a few times, then sleeps on the group's
 * result_gen, which switchsim bumps once per pass that published results.
 */
static agg_status_t agg__wait_result(agg_comm_t *comm, agg_frag_hdr_t *res, uint32_t seq)
{
    agg_context_t *ctx = comm->ctx;
    agg_shm_group_t *shm = comm->shm;
    int64_t deadline = 0;
    uint32_t gen;
    long spins = 0;

    for (;;) {
        if (__atomic_load_n(&res->seq, __ATOMIC_ACQUIRE) == seq) {
            return AGG_OK;
        }
        if (++spins < ctx->spin_count) {
            agg_cpu_relax();
            continue;
        }
        if (spins < ctx->spin_count + 8) {
            sched_yield(); /* with more processes than cores, let switchsim run */
            continue;
        }
        if (deadline == 0) {
            deadline = agg_time_ms() + ctx->coll_timeout_ms;
        } else if (agg_time_ms() > deadline) {
            return AGG_ERR_TIMEOUT;
        }
        if (__atomic_load_n(&shm->dead, __ATOMIC_ACQUIRE)) {
            return AGG_ERR_SHUTDOWN;
        }
        gen = __atomic_load_n(&shm->result_gen, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&shm->waiters, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&res->seq, __ATOMIC_SEQ_CST) != seq) {
            agg_futex_wait(&shm->result_gen, gen, AGG_WAIT_SLICE_MS);
        }
        __atomic_fetch_sub(&shm->waiters, 1, __ATOMIC_SEQ_CST);
        spins = ctx->spin_count; /* after a sleep: check, yield once, sleep again */
    }
}

agg_status_t agg_allreduce(agg_comm_t *comm, const agg_reduce_spec_t *spec)
{
    size_t esize, per_frag, nfrags, posted = 0, done = 0, off, n;
    uint32_t first_seq, seq;
    agg_frag_hdr_t *slot, *res;
    agg_status_t st, result = AGG_OK;
    const uint8_t *src;
    int block;
    uint8_t *dst;

    if (comm == NULL || spec == NULL || (spec->count > 0 && (spec->rbuf == NULL ||
                                                             spec->sbuf == NULL))) {
        return AGG_ERR_INVALID_PARAM;
    }
    if (agg_reduce_fn(spec->dtype, spec->op) == NULL) {
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (comm->broken) {
        return AGG_ERR_TIMEOUT;
    }
    if (spec->count == 0) {
        return AGG_OK;
    }
    esize    = agg_dtype_size(spec->dtype);
    per_frag = comm->payload_per_ost / esize;
    nfrags   = (spec->count + per_frag - 1) / per_frag;
    src      = spec->sbuf;
    dst      = spec->rbuf;
    first_seq = comm->seq;

    while (done < nfrags) {
        /* fill the window, then ring the doorbell once for all of it */
        if (posted < nfrags && posted - done < comm->osts) {
            do {
                seq  = agg__next_seq(comm);
                slot = agg__slot(comm->send_slots, comm->slot_stride, seq, comm->osts);
                off  = posted * per_frag;
                n    = spec->count - off < per_frag ? spec->count - off : per_frag;
                memcpy((uint8_t *)slot + AGG_FRAG_HDR_SIZE, src + off * esize, n * esize);
                slot->op    = (uint16_t)spec->op;
                slot->dtype = (uint8_t)spec->dtype;
                slot->count = (uint32_t)n;
                __atomic_store_n(&slot->seq, seq, __ATOMIC_RELEASE);
                __atomic_store_n(&comm->chan->posted, comm->chan->posted + 1,
                                 __ATOMIC_RELEASE);
                ++posted;
            } while (posted < nfrags && posted - done < comm->osts);
            agg__ring(comm);
        }
        /* block for the oldest fragment, then take every result already there */
        for (block = 1; done < posted; block = 0) {
            seq = agg__seq_after(first_seq, done);
            res = agg__slot(comm->results, comm->slot_stride, seq, comm->osts);
            if (__atomic_load_n(&res->seq, __ATOMIC_ACQUIRE) != seq) {
                if (!block) {
                    break; /* refill the window before blocking again */
                }
                st = agg__wait_result(comm, res, seq);
                if (st != AGG_OK) {
                    agg_error("allreduce of %zu x %s (%s) on group %u: fragment %zu of "
                              "%zu: %s", spec->count, agg_dtype_name(spec->dtype),
                              agg_op_name(spec->op), comm->group_id, done, nfrags,
                              agg_status_string(st));
                    comm->broken = 1;
                    return st;
                }
            }
            off = done * per_frag;
            n   = spec->count - off < per_frag ? spec->count - off : per_frag;
            if (res->status != AGG_OK || res->count != n) {
                /* keep draining so the group stays in step; report at the end */
                if (result == AGG_OK) {
                    result = res->status != AGG_OK ? (agg_status_t)res->status :
                                                     AGG_ERR_BAD_FRAGMENT;
                }
            } else {
                memcpy(dst + off * esize, (uint8_t *)res + AGG_FRAG_HDR_SIZE, n * esize);
            }
            ++done;
        }
    }
    comm->ctx->frags_sent += nfrags;
    return result;
}
