#include "switchsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/shm.h"

#define SWITCHSIM_MAX_NODES   4096
#define SWITCHSIM_MAX_MEMBERS 65536
#define SWITCHSIM_MAX_OSTS    4096
#define SWITCHSIM_MAX_SEGMENT (1ull << 30) /* bytes of one group's shared segment */

static int switchsim__hosts(const switchsim_t *sim, uint64_t guid)
{
    uint32_t lo = 0, hi = sim->num_switches;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (sim->switches[mid].guid == guid) {
            return 1;
        }
        if (sim->switches[mid].guid < guid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return 0;
}

static agg_status_t switchsim__group_check(const switchsim_t *sim,
                                           const agg_msg_group_config_t *cfg,
                                           const agg_wire_tree_node_t *nodes,
                                           const agg_wire_member_t *members)
{
    uint32_t i;

    if (cfg->num_nodes == 0 || cfg->num_nodes > SWITCHSIM_MAX_NODES ||
        cfg->num_members == 0 || cfg->num_members > SWITCHSIM_MAX_MEMBERS ||
        cfg->osts == 0 || cfg->osts > SWITCHSIM_MAX_OSTS ||
        cfg->payload_per_ost < 8 || cfg->payload_per_ost > 65536 ||
        cfg->payload_per_ost % 8 != 0) {
        agg_error("group %u: bad shape (nodes %u members %u osts %u payload %u)",
                  cfg->group_id, cfg->num_nodes, cfg->num_members, cfg->osts,
                  cfg->payload_per_ost);
        return AGG_ERR_INVALID_PARAM;
    }
    /* each limit alone still allows terabytes: bound the segment itself */
    if (((uint64_t)cfg->num_members + 1) * cfg->osts *
            (AGG_FRAG_HDR_SIZE + (uint64_t)cfg->payload_per_ost) > SWITCHSIM_MAX_SEGMENT ||
        (uint64_t)cfg->num_nodes * cfg->osts * cfg->payload_per_ost > SWITCHSIM_MAX_SEGMENT) {
        agg_error("group %u: %u members x %u OSTs x %u B is more than %llu bytes",
                  cfg->group_id, cfg->num_members, cfg->osts, cfg->payload_per_ost,
                  SWITCHSIM_MAX_SEGMENT);
        return AGG_ERR_NO_RESOURCE;
    }
    for (i = 0; i < cfg->num_nodes; ++i) {
        if ((i == 0) != (nodes[i].parent == -1) ||
            (i > 0 && (nodes[i].parent < 0 || (uint32_t)nodes[i].parent >= i))) {
            agg_error("group %u: node %u has parent %d; parents must come first",
                      cfg->group_id, i, nodes[i].parent);
            return AGG_ERR_INVALID_PARAM;
        }
        if (!switchsim__hosts(sim, nodes[i].guid)) {
            agg_error("group %u: switch 0x%016llx is not hosted here", cfg->group_id,
                      (unsigned long long)nodes[i].guid);
            return AGG_ERR_NOT_FOUND;
        }
    }
    for (i = 0; i < cfg->num_members; ++i) {
        if (members[i].leaf >= cfg->num_nodes) {
            agg_error("group %u: member %u has leaf %u of %u nodes", cfg->group_id, i,
                      members[i].leaf, cfg->num_nodes);
            return AGG_ERR_INVALID_PARAM;
        }
    }
    return AGG_OK;
}

static void switchsim__group_free(switchsim_group_t *g)
{
    uint32_t i;

    if (g->shm != NULL) {
        __atomic_store_n(&g->shm->dead, 1, __ATOMIC_SEQ_CST);
        /* wake every rank sleeping on a result so it sees the group is gone */
        __atomic_fetch_add(&g->shm->result_gen, 1, __ATOMIC_SEQ_CST);
        agg_futex_wake(&g->shm->result_gen, 0);
        agg_shm_detach(g->shm, g->shm_size);
        agg_shm_unlink(g->shm_name);
    }
    if (g->nodes != NULL) {
        for (i = 0; i < g->num_nodes; ++i) {
            free(g->nodes[i].slots);
        }
    }
    free(g->nodes);
    free(g->member_leaf);
    free(g->consumed);
    free(g->acc_mem);
    free(g);
}

agg_status_t switchsim_group_create(switchsim_t *sim, const agg_msg_group_config_t *cfg,
                                    const agg_wire_tree_node_t *nodes,
                                    const agg_wire_member_t *members,
                                    switchsim_group_t **group_out)
{
    switchsim_group_t *g, *it;
    agg_shm_group_t *shm;
    size_t slot_stride, channel_stride, acc_size;
    uint32_t i, k;
    agg_status_t st;

    st = switchsim__group_check(sim, cfg, nodes, members);
    if (st != AGG_OK) {
        return st;
    }
    switchsim_ctl_lock(sim);
    for (it = sim->groups; it != NULL; it = it->next) {
        if (it->id == cfg->group_id) {
            switchsim_ctl_unlock(sim);
            agg_error("group %u already exists", cfg->group_id);
            return AGG_ERR_GROUP_ID;
        }
    }
    switchsim_ctl_unlock(sim);

    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    g->id              = cfg->group_id;
    g->job_id          = cfg->job_id;
    g->num_members     = cfg->num_members;
    g->osts            = cfg->osts;
    g->payload_per_ost = cfg->payload_per_ost;
    g->num_nodes       = cfg->num_nodes;
    g->nodes           = calloc(cfg->num_nodes, sizeof(*g->nodes));
    g->member_leaf     = calloc(cfg->num_members, sizeof(*g->member_leaf));
    g->consumed        = calloc(cfg->num_members, sizeof(*g->consumed));
    acc_size           = (size_t)cfg->num_nodes * cfg->osts * cfg->payload_per_ost;
    g->acc_mem         = aligned_alloc(AGG_CACHE_LINE,
                                       (acc_size + AGG_CACHE_LINE - 1) /
                                       AGG_CACHE_LINE * AGG_CACHE_LINE);
    if (g->nodes == NULL || g->member_leaf == NULL || g->consumed == NULL ||
        g->acc_mem == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto err_free;
    }
    for (i = 0; i < cfg->num_nodes; ++i) {
        g->nodes[i].guid   = nodes[i].guid;
        g->nodes[i].parent = nodes[i].parent;
        g->nodes[i].slots  = calloc(cfg->osts, sizeof(switchsim_slot_t));
        if (g->nodes[i].slots == NULL) {
            st = AGG_ERR_NO_MEMORY;
            goto err_free;
        }
        for (k = 0; k < cfg->osts; ++k) {
            g->nodes[i].slots[k].acc = g->acc_mem +
                ((size_t)i * cfg->osts + k) * cfg->payload_per_ost;
        }
        if (i > 0) {
            g->nodes[nodes[i].parent].expected++;
        }
    }
    for (i = 0; i < cfg->num_members; ++i) {
        g->member_leaf[i] = members[i].leaf;
        g->nodes[members[i].leaf].expected++;
    }
    for (i = 0; i < cfg->num_nodes; ++i) {
        if (g->nodes[i].expected == 0) {
            agg_error("group %u: switch 0x%016llx has no member below it", g->id,
                      (unsigned long long)g->nodes[i].guid);
            st = AGG_ERR_INVALID_PARAM;
            goto err_free;
        }
    }

    slot_stride    = AGG_FRAG_HDR_SIZE +
                     (cfg->payload_per_ost + AGG_CACHE_LINE - 1) / AGG_CACHE_LINE *
                     AGG_CACHE_LINE;
    channel_stride = sizeof(agg_shm_channel_t) + (size_t)cfg->osts * slot_stride;
    g->shm_size    = sizeof(agg_shm_group_t) + (size_t)cfg->num_members * channel_stride +
                     (size_t)cfg->osts * slot_stride;
    snprintf(g->shm_name, sizeof(g->shm_name), "/agg-%d-g%u", (int)getpid(), g->id);
    agg_shm_unlink(g->shm_name); /* a stale one from a crashed run with our pid */
    st = agg_shm_create(g->shm_name, g->shm_size, (void **)&g->shm);
    if (st != AGG_OK) {
        goto err_free;
    }
    shm                  = g->shm;
    shm->group_id        = g->id;
    shm->num_members     = g->num_members;
    shm->osts            = g->osts;
    shm->payload_per_ost = g->payload_per_ost;
    shm->slot_stride     = (uint32_t)slot_stride;
    shm->channel_stride  = (uint32_t)channel_stride;
    shm->channels_offset = sizeof(agg_shm_group_t);
    shm->results_offset  = sizeof(agg_shm_group_t) + (size_t)g->num_members * channel_stride;
    shm->total_size      = g->shm_size;
    for (i = 0; i < g->num_members; ++i) {
        agg_shm_channel_t *ch = (agg_shm_channel_t *)((uint8_t *)shm + shm->channels_offset +
                                                      (size_t)i * channel_stride);
        ch->leaf_guid = g->nodes[g->member_leaf[i]].guid;
    }
    shm->version         = AGG_SHM_VERSION;
    __atomic_store_n(&shm->magic, AGG_SHM_GROUP_MAGIC, __ATOMIC_RELEASE);

    switchsim_ctl_lock(sim);
    g->next     = sim->groups;
    sim->groups = g;
    sim->num_groups++;
    sim->stats.groups_total++;
    sim->members_total += g->num_members;
    switchsim_dp_tune(sim);
    switchsim_ctl_unlock(sim);
    switchsim_dp_kick(sim);

    agg_debug("group %u: %u members, %u nodes, %u OSTs x %u B, segment %s (%zu B)",
              g->id, g->num_members, g->num_nodes, g->osts, g->payload_per_ost,
              g->shm_name, g->shm_size);
    *group_out = g;
    return AGG_OK;

err_free:
    switchsim__group_free(g);
    return st;
}

agg_status_t switchsim_group_destroy(switchsim_t *sim, uint32_t group_id)
{
    switchsim_group_t **pp, *g = NULL;

    switchsim_ctl_lock(sim);
    for (pp = &sim->groups; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id == group_id) {
            g   = *pp;
            *pp = g->next;
            sim->num_groups--;
            sim->members_total -= g->num_members;
            switchsim_dp_tune(sim);
            break;
        }
    }
    switchsim_ctl_unlock(sim);
    if (g == NULL) {
        return AGG_ERR_GROUP_ID;
    }
    agg_debug("group %u destroyed", group_id);
    switchsim__group_free(g);
    return AGG_OK;
}

void switchsim_group_destroy_all(switchsim_t *sim)
{
    switchsim_group_t *g;

    for (;;) {
        switchsim_ctl_lock(sim);
        g = sim->groups;
        if (g != NULL) {
            sim->groups = g->next;
            sim->num_groups--;
        }
        switchsim_ctl_unlock(sim);
        if (g == NULL) {
            return;
        }
        switchsim__group_free(g);
    }
}
