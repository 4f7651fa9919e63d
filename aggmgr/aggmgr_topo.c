/*
 * The fabric as a topology object: a two-level fat-tree generator, a writer
 * whose output the ibnetdiscover reader (aggmgr_topo_ibnd.c) takes back
 * unchanged, lookup and release.
 */
#include "aggmgr_topo_int.h"
#include "agg/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated fabrics: switch n (1-based, spines first) and CA h (1-based). CA
 * GUIDs are 16 apart so that the port GUIDs written (node GUID + port) never
 * collide with another node's GUID. */
#define TOPO_FT_SWITCH_GUID 0x0002c90300000000ull
#define TOPO_FT_CA_GUID     0x0002c90300100000ull

/* ---- generated fabrics ---------------------------------------------------- */

static void topo_ft_cable(aggmgr_topo_t *t, int a, int pa, int b, int pb)
{
    t->nodes[a].ports[pa].peer_node = b;
    t->nodes[a].ports[pa].peer_port = pb;
    t->nodes[b].ports[pb].peer_node = a;
    t->nodes[b].ports[pb].peer_port = pa;
}

agg_status_t aggmgr_topo_fat_tree(int leaves, int spines, int hosts_per_leaf,
                                  aggmgr_topo_t *topo)
{
    aggmgr_topo_t t;
    aggmgr_node_t *n;
    int i, p, l, s, h, leaf, ca;

    if (topo == NULL || leaves < 1 || leaves > TOPO_MAX_PORTS || spines < 0 ||
        hosts_per_leaf < 0 || hosts_per_leaf + spines < 1 ||
        hosts_per_leaf + spines > TOPO_MAX_PORTS ||
        (long)leaves * hosts_per_leaf > 1000000) {
        agg_error("fat tree %d:%d:%d: want 1..255 leaves, hosts per leaf plus "
                  "spines in 1..255", leaves, spines, hosts_per_leaf);
        return AGG_ERR_INVALID_PARAM;
    }
    memset(&t, 0, sizeof(t));
    t.num_switches = leaves + spines;
    t.num_cas      = leaves * hosts_per_leaf;
    t.num_nodes    = t.num_switches + t.num_cas;
    t.nodes        = calloc((size_t)t.num_nodes, sizeof(*t.nodes));
    t.cas          = calloc((size_t)t.num_cas + 1, sizeof(*t.cas));
    t.ca_switch    = calloc((size_t)t.num_cas + 1, sizeof(*t.ca_switch));
    if (t.nodes == NULL || t.cas == NULL || t.ca_switch == NULL) {
        goto err_free;
    }
    /* Nodes: spines, then leaves, then CAs leaf by leaf. */
    for (i = 0; i < t.num_nodes; i++) {
        n = &t.nodes[i];
        if (i < spines) {
            n->type      = AGGMGR_NODE_SWITCH;
            n->num_ports = leaves;
            snprintf(n->desc, sizeof(n->desc), "spine%d", i + 1);
        } else if (i < t.num_switches) {
            n->type      = AGGMGR_NODE_SWITCH;
            n->num_ports = hosts_per_leaf + spines;
            snprintf(n->desc, sizeof(n->desc), "leaf%d", i - spines + 1);
        } else {
            n->type      = AGGMGR_NODE_CA;
            n->num_ports = 1;
            snprintf(n->desc, sizeof(n->desc), "host%d mlx5_0",
                     i - t.num_switches + 1);
        }
        if (n->type == AGGMGR_NODE_SWITCH) {
            n->guid = TOPO_FT_SWITCH_GUID + (uint64_t)i + 1;
            snprintf(n->id, sizeof(n->id), "S-%016" PRIx64, n->guid);
        } else {
            n->guid = TOPO_FT_CA_GUID + 16 * ((uint64_t)(i - t.num_switches) + 1);
            snprintf(n->id, sizeof(n->id), "H-%016" PRIx64, n->guid);
        }
        n->ports = calloc((size_t)n->num_ports + 1, sizeof(*n->ports));
        if (n->ports == NULL) {
            goto err_free;
        }
        for (p = 0; p <= n->num_ports; p++) {
            n->ports[p].peer_node = -1;
        }
    }
    /* Leaf ports 1..hosts go down to CAs, hosts+s up to spine s (port = leaf). */
    for (l = 0; l < leaves; l++) {
        leaf = spines + l;
        for (h = 0; h < hosts_per_leaf; h++) {
            ca = l * hosts_per_leaf + h;
            topo_ft_cable(&t, leaf, h + 1, t.num_switches + ca, 1);
            t.cas[ca]       = t.num_switches + ca;
            t.ca_switch[ca] = leaf;
        }
        for (s = 0; s < spines; s++) {
            topo_ft_cable(&t, leaf, hosts_per_leaf + s + 1, s, l + 1);
        }
    }
    snprintf(t.source, sizeof(t.source), "fat-tree %d:%d:%d", leaves, spines,
             hosts_per_leaf);
    *topo = t;
    return AGG_OK;

err_free:
    agg_error("fat tree %d:%d:%d: out of memory", leaves, spines, hosts_per_leaf);
    aggmgr_topo_free(&t);
    return AGG_ERR_NO_MEMORY;
}

/* ---- writing -------------------------------------------------------------- */

/* Port GUIDs, LIDs and link speeds are not kept. CA port GUIDs are written as
 * node GUID + port number, the usual numbering of HCA ports; LIDs as 0
 * (unassigned) and links as 4xEDR, because ibsim, which reads this format to
 * simulate a fabric, wants a LID and a link type on every port line. */
int aggmgr_topo_write(const aggmgr_topo_t *topo, FILE *out)
{
    const aggmgr_node_t *n, *peer;
    int i, p;

    if (topo == NULL || out == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    fprintf(out, "#\n# Topology file: written by aggmgr from %s\n#\n", topo->source);
    for (i = 0; i < topo->num_nodes; i++) {
        n = &topo->nodes[i];
        if (n->type == AGGMGR_NODE_SWITCH) {
            fprintf(out, "\nswitchguid=0x%016" PRIx64 "(%016" PRIx64 ")\n", n->guid,
                    n->guid);
            fprintf(out, "Switch\t%d \"%s\"\t\t# \"%s\" base port 0 lid 0 lmc 0\n",
                    n->num_ports, n->id, n->desc);
        } else {
            fprintf(out, "\ncaguid=0x%016" PRIx64 "\n", n->guid);
            fprintf(out, "Ca\t%d \"%s\"\t\t# \"%s\"\n", n->num_ports, n->id, n->desc);
        }
        for (p = 1; p <= n->num_ports; p++) {
            if (n->ports[p].peer_node < 0) {
                continue;
            }
            peer = &topo->nodes[n->ports[p].peer_node];
            fprintf(out, "[%d]", p);
            if (n->type == AGGMGR_NODE_CA) {
                fprintf(out, "(%016" PRIx64 ") ", n->guid + (uint64_t)p);
            }
            fprintf(out, "\t\"%s\"[%d]", peer->id, n->ports[p].peer_port);
            if (peer->type == AGGMGR_NODE_CA) {
                fprintf(out, "(%016" PRIx64 ") ",
                        peer->guid + (uint64_t)n->ports[p].peer_port);
            }
            fprintf(out, "\t\t# %s\"%s\" lid 0 4xEDR\n",
                    n->type == AGGMGR_NODE_CA ? "lid 0 lmc 0 " : "", peer->desc);
        }
    }
    return ferror(out) ? AGG_ERR_IO : AGG_OK;
}

int aggmgr_topo_find_guid(const aggmgr_topo_t *topo, uint64_t guid)
{
    int i;

    for (i = 0; topo != NULL && i < topo->num_nodes; i++) {
        if (topo->nodes[i].guid == guid) {
            return i;
        }
    }
    return -1;
}

void aggmgr_topo_free(aggmgr_topo_t *topo)
{
    int i;

    if (topo == NULL) {
        return;
    }
    for (i = 0; topo->nodes != NULL && i < topo->num_nodes; i++) {
        free(topo->nodes[i].ports);
    }
    free(topo->nodes);
    free(topo->cas);
    free(topo->ca_switch);
    memset(topo, 0, sizeof(*topo));
}
