/*
 * A group's part on one tree (LLT or SAT), as the switchsims lay it out:
 * cut into parts, one per switchsim, each asked with a GROUP_CONFIG and
 * undone with a GROUP_TEARDOWN; what each part's switchsim answers, and the
 * endpoints the members attach to. When to ask and what follows from the
 * answers is the group's state machine's (aggmgr_group.c).
 */
#include "aggmgr.h"

#include <stdlib.h>
#include <string.h>

#include "agg/log.h"

static void aggmgr__gtree_parts_free(aggmgr_gtree_t *gt)
{
    free(gt->parts);
    free(gt->node_part);
    free(gt->node_local);
    free(gt->remote);
    free(gt->channel);
    free(gt->eps);
    gt->parts      = NULL;
    gt->node_part  = NULL;
    gt->node_local = NULL;
    gt->remote     = NULL;
    gt->channel    = NULL;
    gt->eps        = NULL;
    gt->num_parts  = 0;
    gt->num_eps    = 0;
}

/*
 * Cuts the group's tree into parts, one per set of connected switches that
 * one switchsim hosts, and gives each member its part's channel; says which
 * members are on another host than their part's switchsim (they attach over
 * TCP). Fails with the reason when a switch has no switchsim or a link the
 * group needs has no TCP data port behind it.
 */
static agg_status_t aggmgr__gtree_parts(aggmgr_t *am, const aggmgr_group_t *g,
                                        aggmgr_gtree_t *gt)
{
    const aggmgr_job_t *job = g->job;
    const int *sel = g->sel;
    uint32_t nn = (uint32_t)gt->tree.num_nodes, i, *extra;
    aggmgr_part_t *p;

    gt->parts      = calloc(nn, sizeof(*gt->parts));
    gt->node_part  = calloc(nn, sizeof(*gt->node_part));
    gt->node_local = calloc(nn, sizeof(*gt->node_local));
    gt->remote     = calloc(g->num_members, sizeof(*gt->remote));
    gt->channel    = calloc(g->num_members, sizeof(*gt->channel));
    extra          = calloc(nn, sizeof(*extra));
    if (gt->parts == NULL || gt->node_part == NULL || gt->node_local == NULL ||
        gt->remote == NULL || gt->channel == NULL || extra == NULL) {
        free(extra);
        return AGG_ERR_NO_MEMORY;
    }
    gt->num_parts = 0;
    for (i = 0; i < nn; ++i) {
        int topo = gt->tree.nodes[i].topo_node, parent = gt->tree.nodes[i].parent;
        int sim = am->ans[topo].sim;

        if (sim < 0 || am->sims[sim].fd < 0) {
            agg_warn("job %u: group %u needs switch %s, which no switchsim hosts", job->id,
                     g->id, am->topo.nodes[topo].id);
            free(extra);
            return AGG_ERR_NO_SWITCHSIM;
        }
        if (parent >= 0 && gt->parts[gt->node_part[parent]].sim == sim) {
            gt->node_part[i] = gt->node_part[parent];
        } else {
            p = &gt->parts[gt->num_parts];
            *p = (aggmgr_part_t){.sim = sim, .parent = parent < 0 ? -1 : gt->node_part[parent],
                                 .parent_node = parent, .ep_away = UINT32_MAX};
            if (parent >= 0) {
                p->extra = extra[parent]++;
                if (am->sims[sim].data_addr[0] == '\0' ||
                    am->sims[gt->parts[p->parent].sim].data_addr[0] == '\0') {
                    agg_warn("job %u: group %u spans switchsims %u and %u, and one has no "
                             "TCP data port (set sim_data_addr)", job->id, g->id,
                             am->sims[sim].id, am->sims[gt->parts[p->parent].sim].id);
                    free(extra);
                    return AGG_ERR_NOT_SUPPORTED;
                }
            }
            gt->node_part[i] = (int)gt->num_parts++;
        }
        gt->node_local[i] = gt->parts[gt->node_part[i]].num_nodes++;
    }
    free(extra);
    for (i = 0; i < g->num_members; ++i) {
        p = &gt->parts[gt->node_part[gt->tree.hca_leaf[i]]];
        gt->channel[i] = p->num_members++;
        gt->remote[i]  = strncmp(job->rank_host[sel[i]], am->sims[p->sim].host,
                                 AGG_WIRE_NAME_LEN) != 0;
        if (gt->remote[i] && am->sims[p->sim].data_addr[0] == '\0') {
            agg_warn("job %u: group %u has rank %d on host %s, but the switchsim of its leaf "
                     "runs on %s and has no TCP data port (set sim_data_addr there); the group "
                     "stays on the host path", job->id, g->id, sel[i], job->rank_host[sel[i]],
                     am->sims[p->sim].host);
            return AGG_ERR_NOT_SUPPORTED;
        }
    }
    return AGG_OK;
}

/* Asks the part's switchsim to lay it out; cb hears its answer. */
static agg_status_t aggmgr__part_send(aggmgr_t *am, aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                      uint32_t pi, uint32_t tree, aggmgr_simreq_cb_t cb)
{
    const aggmgr_job_t *job = g->job;
    aggmgr_part_t *part = &gt->parts[pi];
    aggmgr_simreq_t what = {.sim = part->sim, .type = AGG_MSG_GROUP_CONFIG, .cb = cb,
                            .owner = g, .ref = {.job_id = job->id, .group_id = g->id,
                                                .tree = tree, .part = pi}};
    agg_msg_group_config_t *cfg;
    agg_wire_tree_node_t *wn;
    agg_wire_member_t *wm;
    agg_wire_port_t *wp;
    uint32_t i, k, nn = (uint32_t)gt->tree.num_nodes, np = part->parent >= 0;
    size_t body_len;
    agg_status_t st;

    for (i = 0; i < gt->num_parts; ++i) {
        np += gt->parts[i].parent == (int)pi;
    }
    body_len = sizeof(*cfg) + part->num_nodes * sizeof(*wn) +
               part->num_members * sizeof(*wm) + np * sizeof(*wp);
    cfg = calloc(1, body_len);
    if (cfg == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    *cfg = (agg_msg_group_config_t){
        .group_id = g->id, .job_id = job->id, .num_members = part->num_members,
        .num_nodes = part->num_nodes, .osts = gt->osts, .payload = gt->payload, .tree = tree,
        .flags = g->flags & AGG_GROUP_F_REPRODUCIBLE, .part = pi, .num_ports = np,
        .job_key = job->key,
    };
    wn = (agg_wire_tree_node_t *)(cfg + 1);
    wm = (agg_wire_member_t *)(wn + part->num_nodes);
    wp = (agg_wire_port_t *)(wm + part->num_members);
    for (i = 0; i < nn; ++i) {
        int parent = gt->tree.nodes[i].parent;

        if (gt->node_part[i] != (int)pi) {
            if (parent >= 0 && gt->node_part[parent] == (int)pi) {
                wn[gt->node_local[parent]].extra++; /* a child part hangs here */
            }
            continue;
        }
        wn[gt->node_local[i]].guid   = am->topo.nodes[gt->tree.nodes[i].topo_node].guid;
        wn[gt->node_local[i]].parent = parent >= 0 && gt->node_part[parent] == (int)pi ?
                                       (int32_t)gt->node_local[parent] : -1;
    }
    for (i = 0; i < g->num_members; ++i) {
        int leaf = gt->tree.hca_leaf[i];

        if (gt->node_part[leaf] == (int)pi) {
            wm[gt->channel[i]].leaf  = gt->node_local[leaf];
            wm[gt->channel[i]].flags = gt->remote[i] ? AGG_MEMBER_F_REMOTE : 0;
        }
    }
    k = 0;
    if (part->parent >= 0) {
        const aggmgr_part_t *up = &gt->parts[part->parent];

        wp[k] = (agg_wire_port_t){.kind = AGG_WIRE_PORT_UP, .part = (uint32_t)part->parent,
                                  .node = gt->node_local[part->parent_node],
                                  .extra = part->extra};
        snprintf(wp[k++].addr, sizeof(wp->addr), "%s", am->sims[up->sim].data_addr);
    }
    for (i = 0; i < gt->num_parts; ++i) {
        if (gt->parts[i].parent == (int)pi) {
            wp[k] = (agg_wire_port_t){.kind = AGG_WIRE_PORT_DOWN, .part = i};
            snprintf(wp[k++].addr, sizeof(wp->addr), "%s", am->sims[gt->parts[i].sim].data_addr);
        }
    }
    agg_wire_swap(cfg, AGG_FMT_GROUP_CONFIG, 1);
    agg_wire_swap(wn, AGG_FMT_TREE_NODE, part->num_nodes);
    agg_wire_swap(wm, AGG_FMT_MEMBER, part->num_members);
    agg_wire_swap(wp, AGG_FMT_PORT, np);
    st = aggmgr_sim_request(am, &what, cfg, body_len, &g->op->deadline_ms);
    free(cfg);
    if (st == AGG_OK) {
        g->pending++;
    }
    return st;
}

/* What an endpoint says is switchsim's. */
agg_status_t aggmgr_gtree_eps(aggmgr_t *am, const aggmgr_group_t *g, aggmgr_gtree_t *gt)
{
    uint32_t pi, i;

    gt->eps = calloc(2 * (size_t)gt->num_parts, sizeof(*gt->eps));
    if (gt->eps == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (pi = 0; pi < gt->num_parts; ++pi) {
        gt->parts[pi].ep_here = gt->num_eps;
        gt->eps[gt->num_eps++] = gt->parts[pi].here;
    }
    for (i = 0; i < g->num_members; ++i) {
        aggmgr_part_t *p = &gt->parts[gt->node_part[gt->tree.hca_leaf[i]]];

        if (!gt->remote[i] || p->ep_away != UINT32_MAX) {
            continue;
        }
        if (p->away.transport == 0) {
            agg_error("group %u: switchsim %u offers no endpoint to members on other hosts",
                      g->id, am->sims[p->sim].id);
            return AGG_ERR_GROUP_JOIN;
        }
        p->ep_away             = gt->num_eps;
        gt->eps[gt->num_eps++] = p->away;
    }
    return AGG_OK;
}

/* An endpoint switchsim offered: some transport and an address that fits (or none). */
static int aggmgr__ep_valid(const agg_wire_endpoint_t *ep, int may_be_none)
{
    if (ep->transport == 0) {
        return may_be_none;
    }
    return ep->length > 0 && ep->length <= sizeof(ep->addr);
}

agg_status_t aggmgr_gtree_lay_out(aggmgr_t *am, aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                  uint32_t tree, aggmgr_simreq_cb_t cb)
{
    agg_status_t st = aggmgr__gtree_parts(am, g, gt);
    uint32_t pi;

    for (pi = 0; st == AGG_OK && pi < gt->num_parts; ++pi) {
        st = aggmgr__part_send(am, g, gt, pi, tree, cb);
    }
    return st;
}

agg_status_t aggmgr_gtree_config_decode(agg_status_t st, void *body, size_t len,
                                        agg_msg_group_config_reply_t *rep)
{
    memset(rep, 0, sizeof(*rep));
    if (st == AGG_OK) {
        memcpy(rep, body, len < sizeof(*rep) ? len : sizeof(*rep));
        st = agg_wire_reply_decode(rep, len, sizeof(*rep), AGG_FMT_GROUP_CONFIG_REPLY);
    }
    if (st == AGG_OK && (!aggmgr__ep_valid(&rep->here, 0) || !aggmgr__ep_valid(&rep->away, 1))) {
        st = AGG_ERR_PROTOCOL;
    }
    return st;
}

/* A switchsim's answer to GROUP_TEARDOWN: nobody waits for it, a failure is logged. */
static void aggmgr__part_torn_down(aggmgr_t *am, const aggmgr_simreq_t *req, agg_status_t st,
                                   uint16_t type, void *body, size_t len)
{
    agg_msg_status_t rep = {0};

    (void)type;
    if (st == AGG_OK && len != sizeof(rep)) {
        st = AGG_ERR_PROTOCOL;
    } else if (st == AGG_OK) {
        memcpy(&rep, body, sizeof(rep));
        agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
        st = (agg_status_t)rep.status;
    }
    if (st != AGG_OK) {
        agg_warn("switchsim %u did not tear down part %u of group %u: %s", am->sims[req->sim].id,
                 req->ref.part, req->ref.group_id, agg_status_string(st));
    }
}

void aggmgr_gtree_part_teardown(aggmgr_t *am, int sim, const aggmgr_part_ref_t *ref)
{
    agg_msg_group_ref_t body = {.job_id = ref->job_id, .group_id = ref->group_id,
                                .tree = ref->tree, .part = ref->part};
    aggmgr_simreq_t what = {.sim = sim, .type = AGG_MSG_GROUP_TEARDOWN,
                            .cb = aggmgr__part_torn_down, .ref = *ref};

    if (sim < 0 || sim >= am->num_sims || am->sims[sim].fd < 0 || am->keep_parts) {
        return; /* gone, and its parts with it; or kept for the manager's return */
    }
    agg_wire_swap(&body, AGG_FMT_GROUP_REF, 1);
    if (aggmgr_sim_request(am, &what, &body, sizeof(body), NULL) != AGG_OK) {
        agg_warn("switchsim %u was not asked to tear down part %u of group %u",
                 am->sims[sim].id, ref->part, ref->group_id);
    }
}

void aggmgr_gtree_release(aggmgr_t *am, const aggmgr_group_t *g, aggmgr_gtree_t *gt,
                          uint32_t tree)
{
    uint32_t pi;

    for (pi = 0; pi < gt->num_parts; ++pi) {
        aggmgr_part_ref_t ref = {.job_id = g->job->id, .group_id = g->id, .tree = tree,
                                 .part = pi};

        if (gt->parts[pi].configured) {
            aggmgr_gtree_part_teardown(am, gt->parts[pi].sim, &ref);
            gt->parts[pi].configured = 0;
        }
    }
    aggmgr__gtree_parts_free(gt);
}

int aggmgr_gtree_rejoin(aggmgr_t *am, const aggmgr_group_t *g, aggmgr_gtree_t *gt)
{
    uint32_t pi;
    int i;

    if (gt->parts != NULL) {
        return 1;
    }
    for (i = 0; i < gt->tree.num_nodes; ++i) {
        int sim = am->ans[gt->tree.nodes[i].topo_node].sim;

        if (sim < 0 || am->sims[sim].fd < 0) {
            return 0; /* a switchsim it needs has not come back yet */
        }
    }
    if (aggmgr__gtree_parts(am, g, gt) != AGG_OK) {
        aggmgr__gtree_parts_free(gt);
        return 0;
    }
    for (pi = 0; pi < gt->num_parts; ++pi) {
        gt->parts[pi].configured = 1; /* its switchsim serves it: it said so */
    }
    return 1;
}
