/*
 * Aggregation trees over the switches of a topology. Tree nodes are stored
 * parents first (BFS order from the root, root at index 0).
 */
#ifndef AGGMGR_TREE_H
#define AGGMGR_TREE_H

#include "aggmgr_topo.h"

typedef struct aggmgr_tree_node {
    int topo_node;    /* switch: index into topo->nodes */
    int parent;       /* index into tree->nodes, -1 for the root */
    int depth;        /* root is 0 */
    int num_children; /* child tree nodes (switches) */
    int num_hcas;     /* job HCAs directly under this switch */
} aggmgr_tree_node_t;

typedef struct aggmgr_tree {
    aggmgr_tree_node_t *nodes;
    int                 num_nodes;
    int                 depth;    /* levels of switches: 1 when a single switch */
    int                 num_hcas;
    int                *hca_leaf; /* per HCA given to build: index of its leaf tree node */
} aggmgr_tree_t;

/*
 * Builds a minimum-depth tree whose leaves are the switches the given CAs
 * (entries of topo->cas, by index into that array) are cabled to. A CA may
 * be given more than once (ranks of one host sharing its adapter): each
 * entry is a member of the tree, with its own hca_leaf entry. The root is
 * a switch reaching every leaf with the smallest height; among equals the one
 * with the lowest root_load[topo node] (trees already rooted there, may be
 * NULL), then the lowest GUID. On a fat tree this is a top switch. Only
 * switches on a shortest path from the root to a leaf are kept.
 * Returns AGG_ERR_NO_TREE when no switch reaches every leaf, or when a CA is
 * not cabled to a switch.
 */
agg_status_t aggmgr_tree_build(const aggmgr_topo_t *topo, const int *ca_idx,
                               int num, const unsigned *root_load,
                               aggmgr_tree_t *tree);

/*
 * The same, through switches that are up only: down[topo node] non-zero
 * takes a switch out of the fabric (down may be NULL). AGG_ERR_NO_TREE when
 * an adapter's own switch is down, or the others leave no switch reaching
 * every leaf.
 */
agg_status_t aggmgr_tree_build_avoiding(const aggmgr_topo_t *topo, const int *ca_idx,
                                        int num, const unsigned *root_load,
                                        const uint8_t *down, aggmgr_tree_t *tree);

/*
 * The subtree of `tree` that serves only the HCAs sel[0..n) (indices into
 * tree->hca_leaf): branches with none of them are pruned, then the root moves
 * down while it has a single child and no selected HCA of its own, so a group
 * under one leaf switch is a one-node tree.
 * sub->hca_leaf has n entries, in the order of sel.
 */
agg_status_t aggmgr_tree_prune(const aggmgr_tree_t *tree, const int *sel, int n,
                               aggmgr_tree_t *sub);

void aggmgr_tree_free(aggmgr_tree_t *tree);

#endif
