/*
 * The data path: one thread takes fragments from the member channels of
 * every group, reduces them node by node up the group's tree and writes
 * the root's result into the group's result slot, which every member reads
 * (the software counterpart of SHARP's multicast result). Nothing here
 * allocates, logs per fragment, or makes a system call unless a rank is
 * asleep waiting for the result.
 */
#include "switchsim.h"

#include <sched.h>
#include <string.h>

#include "agg/log.h"
#include "agg/shm.h"

#define SWITCHSIM_SLEEP_MS 100 /* re-check for shutdown at least this often */

static inline agg_frag_hdr_t *switchsim__send_slot(const switchsim_group_t *g,
                                                   uint32_t member, uint32_t k)
{
    const agg_shm_group_t *shm = g->shm;

    return (agg_frag_hdr_t *)((uint8_t *)shm + shm->channels_offset +
                              (size_t)member * shm->channel_stride +
                              sizeof(agg_shm_channel_t) + (size_t)k * shm->slot_stride);
}

static inline agg_shm_channel_t *switchsim__channel(const switchsim_group_t *g,
                                                    uint32_t member)
{
    return (agg_shm_channel_t *)((uint8_t *)g->shm + g->shm->channels_offset +
                                 (size_t)member * g->shm->channel_stride);
}

static inline agg_frag_hdr_t *switchsim__result_slot(const switchsim_group_t *g,
                                                     uint32_t k)
{
    return (agg_frag_hdr_t *)((uint8_t *)g->shm + g->shm->results_offset +
                              (size_t)k * g->shm->slot_stride);
}

static void switchsim__result(switchsim_t *sim, switchsim_group_t *g, uint32_t k,
                              const switchsim_slot_t *s)
{
    agg_frag_hdr_t *res = switchsim__result_slot(g, k);
    size_t bytes = (size_t)s->count * agg_dtype_size(s->dtype);

    if (s->status == AGG_OK) {
        memcpy((uint8_t *)res + AGG_FRAG_HDR_SIZE, s->acc, bytes);
    }
    res->op     = s->op;
    res->dtype  = s->dtype;
    res->count  = s->count;
    res->status = s->status;
    __atomic_store_n(&res->seq, s->seq, __ATOMIC_SEQ_CST);
    sim->stats.results_out++;
    g->published = 1; /* sleeping members are woken once per pass */
}

/* Wakes the members asleep on the group's result_gen, if any. */
static void switchsim__wake_members(switchsim_group_t *g)
{
    if (__atomic_load_n(&g->shm->waiters, __ATOMIC_SEQ_CST) != 0) {
        __atomic_fetch_add(&g->shm->result_gen, 1, __ATOMIC_SEQ_CST);
        agg_futex_wake(&g->shm->result_gen, 0);
    }
}

/*
 * Adds one child's contribution (a rank's fragment or a child node's
 * partial result) to node `n`'s slot k; forwards up or returns the result
 * once every child has contributed.
 */
static void switchsim__deliver(switchsim_t *sim, switchsim_group_t *g, uint32_t n,
                               uint32_t k, uint32_t seq, uint16_t op, uint8_t dtype,
                               uint32_t count, int32_t status, const uint8_t *data)
{
    switchsim_gnode_t *node;
    switchsim_slot_t *s;
    agg_reduce_fn_t fn;

    for (;;) {
        node = &g->nodes[n];
        s    = &node->slots[k];
        if (s->arrived == 0) {
            s->seq    = seq;
            s->op     = op;
            s->dtype  = dtype;
            s->count  = count;
            s->status = status;
            if (status == AGG_OK &&
                (agg_reduce_fn(dtype, op) == NULL ||
                 (size_t)count * agg_dtype_size(dtype) > g->payload_per_ost)) {
                s->status = AGG_ERR_BAD_FRAGMENT;
                sim->stats.errors++;
            }
            if (s->status == AGG_OK) {
                memcpy(s->acc, data, (size_t)count * agg_dtype_size(dtype));
            }
        } else if (s->status == AGG_OK) {
            if (status != AGG_OK) {
                s->status = status;
            } else if (seq != s->seq || op != s->op || dtype != s->dtype ||
                       count != s->count) {
                s->status = AGG_ERR_DATA_MISMATCH;
                sim->stats.errors++;
            } else {
                fn = agg_reduce_fn(dtype, op);
                fn(s->acc, data, count);
                sim->stats.fragments_reduced++;
            }
        }
        if (++s->arrived < node->expected) {
            return;
        }
        s->arrived = 0;
        if (node->parent < 0) {
            switchsim__result(sim, g, k, s);
            return;
        }
        /* Forward up: the parent reads this node's accumulator in place. */
        seq    = s->seq;
        op     = s->op;
        dtype  = s->dtype;
        count  = s->count;
        status = s->status;
        data   = s->acc;
        n      = (uint32_t)node->parent;
    }
}

static unsigned switchsim__group_progress(switchsim_t *sim, switchsim_group_t *g)
{
    unsigned handled = 0;
    uint32_t m, posted, seq, k, n;
    agg_frag_hdr_t *hdr;

    for (m = 0; m < g->num_members; ++m) {
        posted = __atomic_load_n(&switchsim__channel(g, m)->posted, __ATOMIC_ACQUIRE);
        /* A member reuses a slot only after its result, so it never has more
         * than osts fragments waiting. A posted counter that jumps further
         * must not hold this pass, and sim->lock, for up to 2^32 of them. */
        for (n = 0; (uint32_t)g->consumed[m] != posted && n < g->osts; ++n) {
            /* 1..2^32-1 then 1 again: 0 marks an empty slot (as in libagg) */
            seq = (uint32_t)(g->consumed[m] % 0xffffffffu) + 1u;
            k   = (seq - 1) % g->osts;
            hdr = switchsim__send_slot(g, m, k);
            if (__atomic_load_n(&hdr->seq, __ATOMIC_ACQUIRE) != seq) {
                /* posted ran ahead of the slot: a broken or hostile client */
                sim->stats.errors++;
                switchsim__deliver(sim, g, g->member_leaf[m], k, seq, 0, 0, 0,
                                   AGG_ERR_BAD_FRAGMENT, NULL);
            } else {
                sim->stats.fragments_in++;
                sim->stats.bytes_in += (uint64_t)hdr->count * agg_dtype_size(hdr->dtype);
                switchsim__deliver(sim, g, g->member_leaf[m], k, seq, hdr->op,
                                   hdr->dtype, hdr->count, AGG_OK,
                                   (const uint8_t *)hdr + AGG_FRAG_HDR_SIZE);
            }
            g->consumed[m]++;
            ++handled;
        }
    }
    return handled;
}

unsigned switchsim_dp_progress(switchsim_t *sim)
{
    switchsim_group_t *g;
    unsigned handled = 0;

    for (g = sim->groups; g != NULL; g = g->next) {
        handled += switchsim__group_progress(sim, g);
        if (g->published) {
            g->published = 0;
            switchsim__wake_members(g);
        }
    }
    return handled;
}

static void *switchsim__dp_main(void *arg)
{
    switchsim_t *sim = arg;
    agg_shm_bell_t *bell = sim->bell;
    uint32_t bell_val;
    long idle = 0, spin;
    unsigned handled;

    while (!__atomic_load_n(&sim->dp_stop, __ATOMIC_ACQUIRE)) {
        bell_val = __atomic_load_n(&bell->doorbell, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&sim->ctl_waiting, __ATOMIC_ACQUIRE)) {
            sched_yield(); /* a group is being added or removed */
        }
        pthread_mutex_lock(&sim->lock);
        handled = switchsim_dp_progress(sim);
        pthread_mutex_unlock(&sim->lock);
        if (handled != 0) {
            idle = 0;
            continue;
        }
        spin = __atomic_load_n(&sim->spin_effective, __ATOMIC_RELAXED);
        if (++idle < spin) {
            agg_cpu_relax();
            continue;
        }
        if (idle < spin + 4) {
            sched_yield(); /* let a rank on this core run before we sleep */
            continue;
        }
        __atomic_store_n(&bell->sleeping, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&bell->doorbell, __ATOMIC_SEQ_CST) == bell_val) {
            agg_futex_wait(&bell->doorbell, bell_val, SWITCHSIM_SLEEP_MS);
        }
        __atomic_store_n(&bell->sleeping, 0, __ATOMIC_SEQ_CST);
        idle = 0;
    }
    return NULL;
}

void switchsim_dp_tune(switchsim_t *sim)
{
    int crowded = sim->num_cpus > 0 && (long)sim->members_total + 1 > sim->num_cpus;

    /* read by the data thread between passes, without the lock */
    __atomic_store_n(&sim->spin_effective,
                     (crowded && !sim->spin_explicit) ? 0 : sim->spin_count,
                     __ATOMIC_RELAXED);
}

void switchsim_dp_kick(switchsim_t *sim)
{
    __atomic_fetch_add(&sim->bell->doorbell, 1, __ATOMIC_SEQ_CST);
    agg_futex_wake(&sim->bell->doorbell, 1);
}

agg_status_t switchsim_dp_start(switchsim_t *sim)
{
    sim->dp_stop = 0;
    if (pthread_create(&sim->dp_thread, NULL, switchsim__dp_main, sim) != 0) {
        agg_error("cannot start the data-path thread");
        return AGG_ERR_NO_MEMORY;
    }
    sim->dp_running = 1;
    return AGG_OK;
}

void switchsim_dp_stop(switchsim_t *sim)
{
    if (!sim->dp_running) {
        return;
    }
    __atomic_store_n(&sim->dp_stop, 1, __ATOMIC_RELEASE);
    switchsim_dp_kick(sim);
    pthread_join(sim->dp_thread, NULL);
    sim->dp_running = 0;
}

void switchsim_ctl_lock(switchsim_t *sim)
{
    __atomic_fetch_add(&sim->ctl_waiting, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&sim->lock);
    __atomic_fetch_sub(&sim->ctl_waiting, 1, __ATOMIC_SEQ_CST);
}

void switchsim_ctl_unlock(switchsim_t *sim)
{
    pthread_mutex_unlock(&sim->lock);
}

void switchsim_stats_snapshot(switchsim_t *sim, switchsim_stats_t *out)
{
    switchsim_ctl_lock(sim);
    *out = sim->stats;
    switchsim_ctl_unlock(sim);
}
