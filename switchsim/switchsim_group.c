/*
 * Groups: a group's part of one tree (LLT or SAT) that this switchsim hosts.
 * Creating one reserves what each of its switches gives it (switchsim_an_t)
 * and lays out its data-path segment; the members attach to that segment
 * through the endpoint in the reply.
 */
#include "switchsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/net.h"
#include "agg/shm.h"

#define SWITCHSIM_MAX_SEGMENT (2ull << 30) /* bytes of one group's segment */

switchsim_group_t *switchsim_group_find(switchsim_t *sim, uint32_t id, uint8_t tree,
                                        uint32_t part)
{
    switchsim_group_t *g;

    for (g = sim->groups; g != NULL; g = g->next) {
        if (g->id == id && g->tree == tree && g->part == part) {
            return g;
        }
    }
    return NULL;
}

static void switchsim__group_free(switchsim_t *sim, switchsim_group_t *g)
{
    uint32_t i;

    if (g->ans != NULL) {
        for (i = 0; i < g->num_nodes; ++i) {
            if (g->ans[i] != NULL) {
                switchsim_an_release(g->ans[i], &g->gnodes[i], g->tree);
            }
        }
    }
    if (g->view.seg != NULL) {
        agg_dp_seg_t *s = g->view.seg;

        /* what the group's ranks counted stays in switchsim's totals */
        for (i = 0; i < s->num_members; ++i) {
            agg_dp_counters_add(&sim->retired, &agg_dp_chan(s, i)->drv);
        }
        __atomic_store_n(&s->dead, 1, __ATOMIC_SEQ_CST);
        /* wake every rank sleeping on a result so it sees the group is gone */
        __atomic_fetch_add(&s->result_gen, 1, __ATOMIC_SEQ_CST);
        agg_futex_wake(&s->result_gen, 0);
        agg_shm_detach(s, g->view.size);
        agg_shm_unlink(g->shm_name);
    }
    free(g->gnodes);
    free(g->ans);
    free(g->remote);
    free(g->member_conn);
    free(g->member_gen);
    free(g->member_lanes);
    free(g->lane_of);
    free(g->extra);
    free(g->port_link);
    free(g->port_part);
    free(g);
}

/*
 * The shape of the segment: the part's nodes as aggmgr sent them. Its top
 * sends up (port 0, NET) unless it is the root; the result goes down to the
 * child parts (NET ports) and to members on other hosts (MEMBER ports), all
 * down ports of node 0. ports has room for the links and every member.
 */
static agg_status_t switchsim__shape(switchsim_t *sim, const agg_msg_group_config_t *cfg,
                                     const agg_wire_tree_node_t *nodes,
                                     const agg_wire_member_t *members,
                                     const agg_wire_port_t *links, switchsim_group_t *g,
                                     agg_dp_node_desc_t *desc, uint32_t *leaf,
                                     agg_dp_port_t *ports, uint32_t *num_ports)
{
    uint32_t i, num_up = 0;

    for (i = 0; i < cfg->num_nodes; ++i) {
        g->ans[i] = switchsim_an_find(sim, nodes[i].guid);
        if (g->ans[i] == NULL) {
            agg_error("group %u: switch 0x%016llx is not hosted here", cfg->group_id,
                      (unsigned long long)nodes[i].guid);
            return AGG_ERR_NOT_FOUND;
        }
        desc[i] = (agg_dp_node_desc_t){
            .guid   = nodes[i].guid,
            .parent = nodes[i].parent,
            .an     = g->ans[i]->index,
            .up     = i == 0 ? AGG_DP_UP_ROOT : AGG_DP_UP_LOCAL,
            .extra  = nodes[i].extra,
        };
        g->extra[i] = nodes[i].extra;
    }
    *num_ports = 0;
    for (i = 0; i < cfg->num_ports; ++i) {
        const agg_wire_port_t *l = &links[i];
        int link;

        if ((l->kind != AGG_WIRE_PORT_UP && l->kind != AGG_WIRE_PORT_DOWN) ||
            (l->kind == AGG_WIRE_PORT_UP && (i != 0 || cfg->part == 0)) ||
            memchr(l->addr, '\0', sizeof(l->addr)) == NULL) {
            agg_error("group %u part %u: bad link %u (kind %u)", cfg->group_id, cfg->part, i,
                      l->kind);
            return AGG_ERR_INVALID_PARAM;
        }
        link = switchsim_net_link(sim, l->addr);
        if (link < 0) {
            return AGG_ERR_NO_SWITCHSIM;
        }
        g->port_link[*num_ports] = link;
        g->port_part[*num_ports] = l->part;
        ports[*num_ports] = (agg_dp_port_t){.node = l->node, .position = l->extra,
                                            .kind = AGG_DP_PORT_NET};
        if (l->kind == AGG_WIRE_PORT_UP) {
            desc[0].up   = AGG_DP_UP_NET;
            desc[0].port = 0;
            num_up       = 1;
        }
        ++*num_ports;
    }
    if (cfg->part != 0 && num_up == 0) {
        agg_error("group %u part %u has no link up to the root's part", cfg->group_id,
                  cfg->part);
        return AGG_ERR_INVALID_PARAM;
    }
    for (i = 0; i < cfg->num_members; ++i) {
        leaf[i] = members[i].leaf;
        if (!(members[i].flags & AGG_MEMBER_F_REMOTE)) {
            continue;
        }
        if (sim->net == NULL) {
            agg_error("group %u: member %u is on another host, and this switchsim has no "
                      "TCP data port (set sim_data_addr)", cfg->group_id, i);
            return AGG_ERR_NOT_SUPPORTED;
        }
        g->remote[i] = 1;
        g->port_link[*num_ports] = -1;
        ports[*num_ports] = (agg_dp_port_t){.node = i, .kind = AGG_DP_PORT_MEMBER};
        ++*num_ports;
    }
    desc[0].num_down   = *num_ports - num_up;
    desc[0].down_first = num_up;
    return AGG_OK;
}

agg_status_t switchsim_group_create(switchsim_t *sim, const agg_msg_group_config_t *cfg,
                                    const agg_wire_tree_node_t *nodes,
                                    const agg_wire_member_t *members,
                                    const agg_wire_port_t *links,
                                    switchsim_group_t **group_out)
{
    agg_dp_node_desc_t *desc = NULL;
    agg_dp_port_t *ports = NULL;
    uint32_t num_ports = 0;
    agg_dp_shape_t shape;
    agg_dp_seg_t layout;
    switchsim_group_t *g;
    uint32_t *leaf = NULL, i, reserved = 0;
    char why[256];
    size_t size;
    agg_status_t st;

    /* group id 0 would read as "free" in a SAT lock word */
    if (cfg->group_id == 0 || cfg->tree > AGG_TREE_SAT || cfg->num_nodes == 0 ||
        cfg->num_nodes > 4096 || cfg->num_members > 65536 || cfg->num_ports > 4096 ||
        (cfg->num_members == 0 && cfg->part == 0 && cfg->num_ports == 0)) {
        agg_error("group %u: bad shape or group id (tree %u, %u nodes, %u members)", cfg->group_id,
                  cfg->tree, cfg->num_nodes, cfg->num_members);
        return AGG_ERR_INVALID_PARAM;
    }
    pthread_rwlock_rdlock(&sim->lock);
    g = switchsim_group_find(sim, cfg->group_id, (uint8_t)cfg->tree, cfg->part);
    pthread_rwlock_unlock(&sim->lock);
    if (g != NULL) {
        agg_error("group %u already has %s part %u here", cfg->group_id,
                  cfg->tree == AGG_TREE_SAT ? "SAT" : "LLT", cfg->part);
        return AGG_ERR_GROUP_ID;
    }
    g    = calloc(1, sizeof(*g));
    desc = calloc(cfg->num_nodes, sizeof(*desc));
    leaf = calloc(cfg->num_members + 1u, sizeof(*leaf));
    ports = calloc((size_t)cfg->num_members + cfg->num_ports, sizeof(*ports));
    if (g == NULL || desc == NULL || leaf == NULL || ports == NULL) {
        free(g);
        st = AGG_ERR_NO_MEMORY;
        goto out;
    }
    g->id          = cfg->group_id;
    g->part        = cfg->part;
    g->job_key     = cfg->job_key;
    g->job_id      = cfg->job_id;
    g->tree        = (uint8_t)cfg->tree;
    g->num_members = cfg->num_members;
    g->num_nodes   = cfg->num_nodes;
    g->gnodes      = calloc(cfg->num_nodes, sizeof(*g->gnodes));
    g->ans         = calloc(cfg->num_nodes, sizeof(*g->ans));
    g->remote      = calloc(cfg->num_members + 1u, sizeof(*g->remote));
    g->member_conn = calloc((cfg->num_members + 1u) * AGG_NET_MAX_LANES, sizeof(*g->member_conn));
    g->member_gen  = calloc((cfg->num_members + 1u) * AGG_NET_MAX_LANES, sizeof(*g->member_gen));
    g->member_lanes = calloc(cfg->num_members + 1u, sizeof(*g->member_lanes));
    g->lane_of      = calloc((cfg->num_members + 1u) * AGG_NET_LANE_RING, sizeof(*g->lane_of));
    g->extra       = calloc(cfg->num_nodes, sizeof(*g->extra));
    g->port_link   = calloc((size_t)cfg->num_members + cfg->num_ports, sizeof(*g->port_link));
    g->port_part   = calloc((size_t)cfg->num_members + cfg->num_ports, sizeof(*g->port_part));
    if (g->gnodes == NULL || g->ans == NULL || g->remote == NULL || g->member_conn == NULL ||
        g->member_gen == NULL || g->member_lanes == NULL || g->lane_of == NULL || g->extra == NULL || g->port_link == NULL ||
        g->port_part == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto err_free;
    }
    st = switchsim__shape(sim, cfg, nodes, members, links, g, desc, leaf, ports, &num_ports);
    if (st != AGG_OK) {
        goto err_nodes;
    }
    shape = (agg_dp_shape_t){
        .group_id    = cfg->group_id,
        .tree        = (uint8_t)cfg->tree,
        .flags       = (cfg->flags & AGG_GROUP_F_REPRODUCIBLE) ? AGG_DP_F_REPRODUCIBLE : 0,
        .window      = cfg->osts,
        .payload     = cfg->payload,
        .num_nodes   = cfg->num_nodes,
        .nodes       = desc,
        .num_members = cfg->num_members,
        .member_leaf = leaf,
        .num_ports   = num_ports,
        .ports       = ports,
    };
    size = agg_dp_layout(&shape, &layout, why, sizeof(why));
    if (size == 0 || size > SWITCHSIM_MAX_SEGMENT) {
        if (size == 0) {
            agg_error("group %u: %s", cfg->group_id, why);
        } else {
            agg_error("group %u: a segment of %zu bytes is more than %llu", cfg->group_id,
                      size, SWITCHSIM_MAX_SEGMENT);
        }
        st = size == 0 ? AGG_ERR_INVALID_PARAM : AGG_ERR_NO_RESOURCE;
        goto err_nodes;
    }
    /* every switch gives the group what its node needs, or nobody does */
    for (i = 0; i < cfg->num_nodes; ++i) {
        g->gnodes[i] = (switchsim_gnode_t){
            .group     = g,
            .node      = i,
            .osts      = cfg->osts,
            .buf_bytes = (uint64_t)layout.num_slots * layout.slot_stride,
        };
    }
    switchsim_ctl_wrlock(sim);
    for (reserved = 0; reserved < cfg->num_nodes; ++reserved) {
        st = switchsim_an_reserve(g->ans[reserved], &g->gnodes[reserved], g->tree);
        if (st != AGG_OK) {
            break;
        }
    }
    if (st != AGG_OK) {
        while (reserved-- > 0) {
            switchsim_an_release(g->ans[reserved], &g->gnodes[reserved], g->tree);
        }
    }
    pthread_rwlock_unlock(&sim->lock);
    if (st != AGG_OK) {
        goto err_nodes;
    }

    snprintf(g->shm_name, sizeof(g->shm_name), "/agg-%d-g%u-p%u%s", (int)getpid(), g->id,
             g->part, g->tree == AGG_TREE_SAT ? "s" : "");
    agg_shm_unlink(g->shm_name); /* a stale one from a crashed run with our pid */
    st = agg_shm_create(g->shm_name, size, (void **)&g->view.seg);
    if (st == AGG_OK) {
        g->view.size = size;
        g->view.host = sim->host;
        switchsim_net_group_init(sim, g);
        st = agg_dp_init(g->view.seg, size, &shape);
    }
    if (st != AGG_OK) {
        goto err_free;
    }

    switchsim_ctl_wrlock(sim);
    g->next     = sim->groups;
    sim->groups = g;
    sim->num_groups++;
    g->uid      = ++sim->groups_total;
    __atomic_fetch_add(&sim->members_total, g->num_members, __ATOMIC_RELAXED);
    pthread_rwlock_unlock(&sim->lock);
    switchsim_workers_kick(sim);

    agg_debug("group %u (%s): %u members, %u nodes, %u x %u B, segment %s (%zu B)", g->id,
              g->tree == AGG_TREE_SAT ? "SAT" : "LLT", g->num_members, g->num_nodes,
              cfg->osts, cfg->payload, g->shm_name, size);
    *group_out = g;
    st = AGG_OK;
    goto out;

err_nodes:
    free(g->ans);
    g->ans = NULL;
err_free:
    switchsim_ctl_wrlock(sim);
    switchsim__group_free(sim, g);
    pthread_rwlock_unlock(&sim->lock);
out:
    free(desc);
    free(leaf);
    free(ports);
    return st;
}

agg_status_t switchsim_group_destroy(switchsim_t *sim, uint32_t group_id, uint8_t tree,
                                     uint32_t part)
{
    switchsim_group_t **pp, *g = NULL;

    switchsim_ctl_wrlock(sim);
    for (pp = &sim->groups; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->id == group_id && (*pp)->tree == tree && (*pp)->part == part) {
            g   = *pp;
            *pp = g->next;
            sim->num_groups--;
            __atomic_fetch_sub(&sim->members_total, g->num_members, __ATOMIC_RELAXED);
            switchsim__group_free(sim, g);
            break;
        }
    }
    pthread_rwlock_unlock(&sim->lock);
    if (g == NULL) {
        return AGG_ERR_GROUP_ID;
    }
    agg_debug("group %u (%s) destroyed", group_id, tree == AGG_TREE_SAT ? "SAT" : "LLT");
    return AGG_OK;
}

void switchsim_group_destroy_all(switchsim_t *sim)
{
    switchsim_group_t *g;

    switchsim_ctl_wrlock(sim);
    while ((g = sim->groups) != NULL) {
        sim->groups = g->next;
        sim->num_groups--;
        __atomic_fetch_sub(&sim->members_total, g->num_members, __ATOMIC_RELAXED);
        switchsim__group_free(sim, g);
    }
    pthread_rwlock_unlock(&sim->lock);
}
