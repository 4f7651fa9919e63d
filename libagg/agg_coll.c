/*
 * Allreduce through the aggregation tree. The user buffer is cut into
 * fragments of payload_per_ost bytes; a fragment is copied into this
 * member's send slot, switchsim reduces it with the other members' up the
 * tree, and the result appears in the group's result slot of the same
 * index. At most `osts` fragments are in flight: fragment s reuses the slots
 * of fragment s - osts, whose result has been read by then.
 */
#include "agg_internal.h"

#include <string.h>

#include "agg/log.h"

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

agg_status_t agg_allreduce(agg_comm_t *comm, const agg_reduce_spec_t *spec)
{
    size_t esize, per_frag, nfrags, posted = 0, done = 0, off, n;
    uint32_t first_seq, seq;
    const agg_tl_ops_t *tl;
    const agg_frag_hdr_t *res;
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
    tl        = comm->tl;

    while (done < nfrags) {
        /* fill the window, then ring the doorbell once for all of it */
        if (posted < nfrags && posted - done < comm->osts) {
            do {
                seq = agg__next_seq(comm);
                off = posted * per_frag;
                n   = spec->count - off < per_frag ? spec->count - off : per_frag;
                memcpy(tl->send_buf(comm, seq), src + off * esize, n * esize);
                tl->post(comm, seq, (uint16_t)spec->op, (uint8_t)spec->dtype, (uint32_t)n);
                ++posted;
            } while (posted < nfrags && posted - done < comm->osts);
            tl->flush(comm);
        }
        /* block for the oldest fragment, then take every result already there */
        for (block = 1; done < posted; block = 0) {
            seq = agg__seq_after(first_seq, done);
            res = tl->result(comm, seq);
            if (res == NULL) {
                if (!block) {
                    break; /* refill the window before blocking again */
                }
                st = tl->wait(comm, seq);
                if (st != AGG_OK) {
                    agg_error("allreduce of %zu x %s (%s) on group %u: fragment %zu of "
                              "%zu: %s", spec->count, agg_dtype_name(spec->dtype),
                              agg_op_name(spec->op), comm->group_id, done, nfrags,
                              agg_status_string(st));
                    comm->broken = 1;
                    return st;
                }
                res = tl->result(comm, seq);
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
