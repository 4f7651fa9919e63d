/*
 * The aggregation-node objects: one per hosted switch, with that switch's
 * resources and its SAT lock. The lock itself is a word in the host segment
 * (agg_dp_an_t) so that whoever completes a lock request, switchsim or a
 * member rank, takes it with one compare-and-swap; everything else is
 * bookkeeping of the control thread.
 */
#include "switchsim.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/shm.h"

agg_status_t switchsim_an_init(switchsim_t *sim, const agg_wire_switch_t *sw, uint32_t n)
{
    uint32_t i;
    int n_stale;
    agg_status_t st;

    sim->ans = calloc(n ? n : 1, sizeof(*sim->ans));
    if (sim->ans == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    n_stale = agg_shm_sweep(); /* what switchsims killed before us left in /dev/shm */
    if (n_stale > 0) {
        agg_info("removed %d shared memory segments of switchsims that no longer run", n_stale);
    }
    snprintf(sim->host_name, sizeof(sim->host_name), "/agg-%d-host", (int)getpid());
    agg_shm_unlink(sim->host_name); /* a stale one from a crashed run with our pid */
    sim->host_size = agg_dp_host_size(n);
    st = agg_shm_create(sim->host_name, sim->host_size, (void **)&sim->host);
    if (st != AGG_OK) {
        free(sim->ans);
        sim->ans = NULL;
        return st;
    }
    sim->host->version = AGG_DP_VERSION;
    sim->host->num_ans = n;
    sim->host->workers = sim->num_workers;
    sim->host->pid     = (uint32_t)getpid();
    for (i = 0; i < n; ++i) {
        switchsim_an_t *an = &sim->ans[i];

        an->guid   = sw[i].guid;
        an->index  = i;
        an->shared = agg_dp_host_an(sim->host, i);
        snprintf(an->desc, sizeof(an->desc), "%.*s", (int)sizeof(an->desc) - 1, sw[i].desc);
        an->shared->guid  = an->guid;
        an->osts_cap      = (uint32_t)agg_conf_int(&sim->conf, AGG_CONF_AN_OSTS);
        an->groups_cap    = (uint32_t)agg_conf_int(&sim->conf, AGG_CONF_AN_MAX_GROUPS);
        an->sat_flows_cap = (uint32_t)agg_conf_int(&sim->conf, AGG_CONF_AN_SAT_FLOWS);
        an->buf_cap       = (uint64_t)agg_conf_int(&sim->conf, AGG_CONF_AN_BUFFER_MB) << 20;
    }
    sim->num_ans = n;
    __atomic_store_n(&sim->host->magic, AGG_DP_HOST_MAGIC, __ATOMIC_RELEASE);
    return AGG_OK;
}

void switchsim_an_fini(switchsim_t *sim)
{
    if (sim->host != NULL) {
        agg_shm_detach(sim->host, sim->host_size);
        agg_shm_unlink(sim->host_name);
        sim->host = NULL;
    }
    free(sim->ans);
    sim->ans     = NULL;
    sim->num_ans = 0;
}

switchsim_an_t *switchsim_an_find(switchsim_t *sim, uint64_t guid)
{
    uint32_t lo = 0, hi = sim->num_ans;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (sim->ans[mid].guid == guid) {
            return &sim->ans[mid];
        }
        if (sim->ans[mid].guid < guid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

agg_status_t switchsim_an_reserve(switchsim_an_t *an, switchsim_gnode_t *gn, uint8_t tree)
{
    const char *what = NULL;

    if (an->groups_used >= an->groups_cap) {
        what = "group slots";
    } else if (an->osts_used + gn->osts > an->osts_cap) {
        what = "OSTs";
    } else if (an->buf_used + gn->buf_bytes > an->buf_cap) {
        what = "buffer memory";
    } else if (tree == AGG_TREE_SAT && an->sat_flows_used >= an->sat_flows_cap) {
        what = "SAT flows";
    }
    if (what != NULL) {
        agg_warn("switch 0x%016llx (%s) has no %s left for group %u", (unsigned long long)an->guid,
                 an->desc, what, gn->group->id);
        return AGG_ERR_NO_RESOURCE;
    }
    an->groups_used++;
    an->osts_used += gn->osts;
    an->buf_used  += gn->buf_bytes;
    if (tree == AGG_TREE_SAT) {
        an->sat_flows_used++;
    }
    gn->next   = an->gnodes;
    an->gnodes = gn;
    return AGG_OK;
}

void switchsim_an_release(switchsim_an_t *an, switchsim_gnode_t *gn, uint8_t tree)
{
    switchsim_gnode_t **pp;
    uint32_t mine = gn->group->id;

    for (pp = &an->gnodes; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == gn) {
            *pp = gn->next;
            an->groups_used--;
            an->osts_used -= gn->osts;
            an->buf_used  -= gn->buf_bytes;
            if (tree == AGG_TREE_SAT) {
                an->sat_flows_used--;
            }
            break;
        }
    }
    /* a group that goes while holding the lock gives it back */
    if (tree == AGG_TREE_SAT &&
        __atomic_compare_exchange_n(&an->shared->sat_lock, &mine, 0, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED)) {
        agg_info("switch 0x%016llx: SAT lock of group %u returned at teardown",
                 (unsigned long long)an->guid, gn->group->id);
    }
}

/* Is any member process of the group gone? (same host, same pid namespace) */
static int switchsim__group_lost_member(const switchsim_group_t *g)
{
    uint32_t m, pid;

    for (m = 0; m < g->num_members; ++m) {
        pid = __atomic_load_n(&agg_dp_member(g->view.seg, m)->pid, __ATOMIC_RELAXED);
        if (pid != 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            return 1;
        }
    }
    return 0;
}

unsigned switchsim_an_reap_locks(switchsim_t *sim)
{
    switchsim_group_t *g;
    unsigned freed = 0;
    uint32_t i, holder;

    for (i = 0; i < sim->num_ans; ++i) {
        switchsim_an_t *an = &sim->ans[i];

        holder = __atomic_load_n(&an->shared->sat_lock, __ATOMIC_ACQUIRE);
        if (holder == 0) {
            continue;
        }
        for (g = sim->groups; g != NULL; g = g->next) {
            if (g->id == holder && g->tree == AGG_TREE_SAT) {
                break;
            }
        }
        if (g != NULL && !switchsim__group_lost_member(g)) {
            continue;
        }
        if (__atomic_compare_exchange_n(&an->shared->sat_lock, &holder, 0, 0,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
            agg_warn("switch 0x%016llx: SAT lock held by group %u returned: %s",
                     (unsigned long long)an->guid, holder,
                     g == NULL ? "the group is gone" : "a member process died");
            freed++;
        }
        if (g != NULL && !__atomic_load_n(&g->view.seg->dead, __ATOMIC_RELAXED)) {
            /* the others would only time out: tell them now */
            __atomic_store_n(&g->view.seg->dead, 1, __ATOMIC_SEQ_CST);
            __atomic_fetch_add(&g->view.seg->result_gen, 1, __ATOMIC_SEQ_CST);
            agg_futex_wake(&g->view.seg->result_gen, 0);
        }
    }
    return freed;
}
