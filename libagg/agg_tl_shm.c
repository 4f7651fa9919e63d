/*
 * The shared-memory transport: this member's send slots and the group's
 * result slots live in a segment created by switchsim on the same host.
 * A fragment's header and payload are written into the slot of its
 * sequence number, `seq` last (release); the member's `posted` counter
 * and, once per batch, switchsim's doorbell tell the data thread.
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

static agg_status_t agg__tl_shm_attach(agg_comm_t *comm, const agg__group_info_t *info)
{
    agg_shm_group_t *shm;
    agg_status_t st;

    st = agg_shm_attach(info->shm_name, (void **)&comm->shm, &comm->shm_size);
    if (st != AGG_OK) {
        return st;
    }
    st = agg_shm_attach(info->bell_name, (void **)&comm->bell, &comm->bell_size);
    if (st != AGG_OK) {
        return st;
    }
    shm = comm->shm;
    /* Never trust a size read from a segment before checking it. */
    if (comm->shm_size < sizeof(*shm) || comm->bell_size < sizeof(*comm->bell) ||
        __atomic_load_n(&shm->magic, __ATOMIC_ACQUIRE) != AGG_SHM_GROUP_MAGIC ||
        shm->version != AGG_SHM_VERSION || comm->bell->magic != AGG_SHM_BELL_MAGIC ||
        shm->group_id != info->group_id || shm->num_members != (uint32_t)comm->size ||
        shm->osts != info->osts || shm->payload_per_ost != info->payload_per_ost ||
        shm->slot_stride < AGG_FRAG_HDR_SIZE + shm->payload_per_ost ||
        shm->total_size != comm->shm_size ||
        shm->results_offset + (uint64_t)shm->osts * shm->slot_stride > comm->shm_size ||
        shm->channels_offset + (uint64_t)shm->num_members * shm->channel_stride >
            shm->results_offset) {
        agg_error("group segment %s does not match group %u", info->shm_name,
                  info->group_id);
        return AGG_ERR_GROUP_JOIN;
    }
    comm->group_id        = info->group_id;
    comm->osts            = info->osts;
    comm->payload_per_ost = info->payload_per_ost;
    comm->slot_stride     = shm->slot_stride;
    comm->chan            = (agg_shm_channel_t *)((uint8_t *)shm + shm->channels_offset +
                                                  (size_t)comm->rank * shm->channel_stride);
    comm->send_slots      = (uint8_t *)(comm->chan + 1);
    comm->leaf_guid       = comm->chan->leaf_guid;
    agg_debug("communicator rank %d of %d: group %u, leaf switch 0x%016llx", comm->rank,
              comm->size, info->group_id, (unsigned long long)comm->leaf_guid);
    comm->results         = (uint8_t *)shm + shm->results_offset;
    return AGG_OK;
}

static void agg__tl_shm_detach(agg_comm_t *comm)
{
    agg_shm_detach(comm->shm, comm->shm_size);
    agg_shm_detach(comm->bell, comm->bell_size);
    comm->shm  = NULL;
    comm->bell = NULL;
}

static void *agg__tl_shm_send_buf(agg_comm_t *comm, uint32_t seq)
{
    return (uint8_t *)agg__slot(comm->send_slots, comm->slot_stride, seq, comm->osts) +
           AGG_FRAG_HDR_SIZE;
}

static void agg__tl_shm_post(agg_comm_t *comm, uint32_t seq, uint16_t op, uint8_t dtype,
                             uint32_t count)
{
    agg_frag_hdr_t *slot = agg__slot(comm->send_slots, comm->slot_stride, seq, comm->osts);

    slot->op    = op;
    slot->dtype = dtype;
    slot->count = count;
    __atomic_store_n(&slot->seq, seq, __ATOMIC_RELEASE);
    __atomic_store_n(&comm->chan->posted, comm->chan->posted + 1, __ATOMIC_RELEASE);
}

static const agg_frag_hdr_t *agg__tl_shm_result(agg_comm_t *comm, uint32_t seq)
{
    agg_frag_hdr_t *res = agg__slot(comm->results, comm->slot_stride, seq, comm->osts);

    return __atomic_load_n(&res->seq, __ATOMIC_ACQUIRE) == seq ? res : NULL;
}

static void agg__tl_shm_flush(agg_comm_t *comm)
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
static agg_status_t agg__tl_shm_wait(agg_comm_t *comm, uint32_t seq)
{
    agg_frag_hdr_t *res = agg__slot(comm->results, comm->slot_stride, seq, comm->osts);
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

const agg_tl_ops_t agg_tl_shm_ops = {
    .name     = "shm",
    .attach   = agg__tl_shm_attach,
    .detach   = agg__tl_shm_detach,
    .send_buf = agg__tl_shm_send_buf,
    .post     = agg__tl_shm_post,
    .flush    = agg__tl_shm_flush,
    .result   = agg__tl_shm_result,
    .wait     = agg__tl_shm_wait,
};
