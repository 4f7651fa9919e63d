/*
 * The reduction threads. Each takes the fragments ranks staged for it (the
 * channels of members m with m % workers == its index, in every group),
 * pushes them into their leaves, and finishes what completed nodes left to
 * do. When ranks push their own fragments (the default) there is little
 * left for these threads, and they sleep on the host segment's doorbell:
 * a rank rings it when it stages a fragment or leaves work only switchsim
 * can do.
 *
 * The group list is read under the read lock; the control thread takes the
 * write lock (preferred) to add or remove a group. Each thread writes its
 * own counters only.
 */
#include "switchsim.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/wait.h"

#define SWITCHSIM_SCRATCH (256u << 10) /* zero-copy reads go through this, per thread */

/* Something staged for this worker, or work left by a rank? (the sleep's last check) */
static int switchsim__has_work(void *arg)
{
    switchsim_worker_t *w = arg;
    switchsim_t *sim = w->sim;
    switchsim_group_t *g;
    uint32_t m;
    int found = 0;

    if (__atomic_load_n(&sim->stop, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    pthread_rwlock_rdlock(&sim->lock);
    for (g = sim->groups; g != NULL && !found; g = g->next) {
        agg_dp_seg_t *s = g->view.seg;

        found = __atomic_load_n(&s->work_gen, __ATOMIC_ACQUIRE) != g->work_seen[w->index];
        for (m = w->index; m < s->num_members && !found; m += sim->num_workers) {
            uint64_t n = __atomic_load_n(&agg_dp_chan(s, m)->consumed, __ATOMIC_ACQUIRE) + 1;
            found = __atomic_load_n(&agg_dp_stage(s, m, n)->n, __ATOMIC_ACQUIRE) == n;
        }
    }
    pthread_rwlock_unlock(&sim->lock);
    return found;
}

/*
 * sim_faults on shared memory: `kill at N` and `stall T at N` count the
 * fragments these threads take from ranks' channels (AGG_RANK_PROGRESS=0:
 * all of them; with rank progress, only what ranks leave to switchsim).
 * A stall holds the thread, and so every group it serves, T ms.
 */
static void switchsim__shm_fault(switchsim_t *sim, unsigned taken)
{
    uint32_t ms = 0;
    unsigned what;

    while (taken-- > 0) {
        what = agg_fault_next(&sim->shm_faults, AGG_FAULT_IN, &ms);
        if (what & AGG_FAULT_KILL) {
            agg_warn("sim_faults: killed at fragment %llu in (shared memory)",
                     (unsigned long long)__atomic_load_n(&sim->shm_faults.seen[AGG_FAULT_IN],
                                                         __ATOMIC_RELAXED));
            raise(SIGKILL);
        }
        if ((what & AGG_FAULT_HOLD) && ms > 0) {
            usleep(ms * 1000u);
        }
    }
}

/* One pass over every group; returns what it moved. */
static unsigned switchsim__pass(switchsim_worker_t *w)
{
    switchsim_t *sim = w->sim;
    switchsim_group_t *g;
    unsigned moved = 0;
    uint32_t m;

    pthread_rwlock_rdlock(&sim->lock);
    for (g = sim->groups; g != NULL; g = g->next) {
        /* the driver's idea of what is handled is about this group's segment */
        w->drv.work_seen = g->work_seen[w->index];
        w->drv.work_seg  = g->view.seg;
        for (m = w->index; m < g->num_members; m += sim->num_workers) {
            unsigned taken = agg_dp_scan(&g->view, m, &w->drv);

            moved += taken;
            if (taken > 0 && sim->shm_faults.num > 0) {
                switchsim__shm_fault(sim, taken);
            }
        }
        moved += agg_dp_progress(&g->view, &w->drv);
        if (w->drv.work_seg == g->view.seg) {
            g->work_seen[w->index] = w->drv.work_seen;
        }
    }
    pthread_rwlock_unlock(&sim->lock);
    return moved;
}

static void *switchsim__worker_main(void *arg)
{
    switchsim_worker_t *w = arg;
    switchsim_t *sim = w->sim;
    agg_wait_t wait;
    /* read once: a SIGHUP reload rewrites sim->conf in the control thread */
    long spin = agg_conf_int(&sim->conf, AGG_CONF_SPIN_COUNT);
    int spin_default = sim->conf.v[AGG_CONF_SPIN_COUNT].source == AGG_CONF_SRC_DEFAULT;

    agg_wait_init(&wait, spin);
    while (!__atomic_load_n(&sim->stop, __ATOMIC_ACQUIRE)) {
        if (switchsim__pass(w) != 0) {
            agg_wait_reset(&wait);
            continue;
        }
        /* spinning while ranks and switchsim outnumber the cores only takes
           the CPU from the process being waited for */
        wait.spin = (long)__atomic_load_n(&sim->members_total, __ATOMIC_RELAXED) +
                    (long)sim->num_workers > sim->num_cpus && spin_default ? 0 : spin;
        agg_wait_idle(&wait, &sim->host->doorbell, &sim->host->sleeping,
                      switchsim__has_work, w);
    }
    return NULL;
}

void switchsim_workers_kick(switchsim_t *sim)
{
    if (sim->host != NULL) {
        __atomic_fetch_add(&sim->host->doorbell, 1, __ATOMIC_SEQ_CST);
        agg_wait_wake(&sim->host->doorbell, &sim->host->sleeping);
    }
}

agg_status_t switchsim_workers_start(switchsim_t *sim)
{
    char why[256];
    unsigned i;

    /* (the TCP data port counts its own messages: switchsim_net.c) */
    if (agg_fault_parse(&sim->shm_faults, agg_conf_str(&sim->conf, AGG_CONF_SIM_FAULTS), why,
                        sizeof(why)) != AGG_OK) {
        agg_error("sim_faults \"%s\": %s", agg_conf_str(&sim->conf, AGG_CONF_SIM_FAULTS), why);
        return AGG_ERR_CONFIG;
    }
    sim->workers = calloc(sim->num_workers, sizeof(*sim->workers));
    if (sim->workers == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < sim->num_workers; ++i) {
        switchsim_worker_t *w = &sim->workers[i];

        w->sim              = sim;
        w->index            = i;
        w->scratch          = malloc(SWITCHSIM_SCRATCH);
        w->drv.ctr          = &w->ctr;
        w->drv.scratch      = w->scratch;
        w->drv.scratch_size = w->scratch ? SWITCHSIM_SCRATCH : 0;
        if (w->scratch == NULL ||
            pthread_create(&w->thread, NULL, switchsim__worker_main, w) != 0) {
            agg_error("cannot start reduction thread %u", i);
            free(w->scratch);
            sim->num_workers = i;
            switchsim_workers_stop(sim);
            return AGG_ERR_NO_MEMORY;
        }
    }
    agg_info("%u reduction threads", sim->num_workers);
    return AGG_OK;
}

void switchsim_workers_stop(switchsim_t *sim)
{
    unsigned i;

    if (sim->workers == NULL) {
        return;
    }
    __atomic_store_n(&sim->stop, 1, __ATOMIC_RELEASE);
    switchsim_workers_kick(sim);
    for (i = 0; i < sim->num_workers; ++i) {
        pthread_join(sim->workers[i].thread, NULL);
    }
    /* keep the counters: the stats file is written after the threads stop */
    for (i = 0; i < sim->num_workers; ++i) {
        agg_dp_counters_add(&sim->retired, &sim->workers[i].ctr);
        free(sim->workers[i].scratch);
    }
    free(sim->workers);
    sim->workers = NULL;
}

void switchsim_stats(switchsim_t *sim, agg_dp_counters_t *sum)
{
    switchsim_group_t *g;
    uint32_t m;
    unsigned i;

    pthread_rwlock_rdlock(&sim->lock);
    *sum = sim->retired;
    for (i = 0; sim->workers != NULL && i < sim->num_workers; ++i) {
        agg_dp_counters_add(sum, &sim->workers[i].ctr);
    }
    switchsim_net_stats(sim, sum);
    for (g = sim->groups; g != NULL; g = g->next) {
        for (m = 0; m < g->num_members; ++m) {
            agg_dp_counters_add(sum, &agg_dp_chan(g->view.seg, m)->drv);
        }
    }
    pthread_rwlock_unlock(&sim->lock);
}

void switchsim_stats_reply(switchsim_t *sim, agg_msg_stats_reply_t *rep)
{
    agg_dp_counters_t s;
    switchsim_group_t *g;

    switchsim_stats(sim, &s);
    memset(rep, 0, sizeof(*rep));
    pthread_rwlock_rdlock(&sim->lock);
    rep->groups       = sim->num_groups;
    rep->groups_total = sim->groups_total;
    for (g = sim->groups; g != NULL; g = g->next) {
        rep->sat_groups += g->tree == AGG_TREE_SAT;
    }
    pthread_rwlock_unlock(&sim->lock);
    rep->status            = AGG_OK;
    rep->fragments_in      = s.llt_fragments_in + s.sat_chunks_in;
    rep->fragments_reduced = s.reductions;
    rep->results_out       = s.results_out;
    rep->bytes_in          = s.bytes_in;
    rep->errors            = s.errors;
    rep->llt_fragments_in  = s.llt_fragments_in;
    rep->sat_chunks_in     = s.sat_chunks_in;
    rep->sat_bytes_in      = s.sat_bytes_in;
    rep->duplicates        = s.duplicates;
    rep->locks_granted     = s.locks_granted;
    rep->locks_busy        = s.locks_busy;
    rep->zcopy_bytes       = s.zcopy_bytes;
    rep->faults            = s.faults;
    rep->resent            = s.resent;
    rep->corrupt           = s.corrupt;
    rep->workers           = sim->num_workers;
}
