/*
 * Aggregation trees over the switches of a topology.
 *
 * How, and why:
 * - Heights: one BFS from each distinct leaf switch of the job, over
 *   switch-to-switch links only (a CA never forwards aggregation traffic),
 *   gives every switch its distance to the farthest leaf. A switch of least
 *   such height is a root of a minimum-depth tree. This costs
 *   O(leaves * (switches + links)): milliseconds for a few thousand switches,
 *   and it needs no knowledge of the fabric's shape.
 * - Root ties: lowest root_load (so the trees of several jobs and groups
 *   spread over the top switches), then lowest GUID (stable across restarts,
 *   unlike node indices, which follow the file order).
 * - Parents: chosen bottom-up, deepest level first and only for switches the
 *   tree needs (a job leaf, or the parent of one already chosen). Each takes,
 *   among its neighbours one level closer to the root, the one with the fewest
 *   children so far, then the lowest GUID: fan-in is spread over the middle
 *   levels, and no branch without HCAs is ever added.
 * - Tree order: BFS from the root, siblings by GUID, so parents come first.
 */
#include "aggmgr_tree.h"
#include "agg/log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Per topology node scratch space of one build. */
typedef struct tree_work {
    int *adj_off;  /* [num_nodes + 1]: switch neighbours in adj[adj_off[v]..] */
    int *adj;
    int *dist;     /* BFS distance, -1 not reached */
    int *queue;    /* BFS order */
    int *ecc;      /* distance to the farthest job leaf */
    int *reached;  /* job leaves that reach this switch */
    int *hcas;     /* job HCAs cabled to this switch */
    int *parent;   /* chosen parent (topology node), -1 none */
    int *nchild;   /* children chosen so far */
    int *tidx;     /* index in the tree, -1 not in it */
    int *leaves;   /* distinct leaf switches of the job */
    int *child_off; /* [num_nodes + 1]: chosen children in child[child_off[v]..] */
    int *child;
    int *mem;
} tree_work_t;

typedef struct tree_guid_ent {
    uint64_t guid;
    int      node;
} tree_guid_ent_t;

static int tree_guid_cmp(const void *a, const void *b)
{
    const tree_guid_ent_t *x = a, *y = b;

    if (x->guid != y->guid) {
        return x->guid < y->guid ? -1 : 1;
    }
    return x->node - y->node;
}

static int tree_is_switch(const aggmgr_topo_t *topo, int v)
{
    return v >= 0 && topo->nodes[v].type == AGGMGR_NODE_SWITCH;
}

static agg_status_t tree_work_init(tree_work_t *w, const aggmgr_topo_t *topo,
                                   const uint8_t *down)
{
    const aggmgr_node_t *n;
    size_t num = (size_t)topo->num_nodes;
    int v, p, k = 0;

    memset(w, 0, sizeof(*w));
    w->mem = malloc(12 * (num + 1) * sizeof(int)); /* the twelve arrays below */
    if (w->mem == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    w->adj_off   = w->mem;
    w->dist      = w->adj_off + num + 1;
    w->queue     = w->dist + num + 1;
    w->ecc       = w->queue + num + 1;
    w->reached   = w->ecc + num + 1;
    w->hcas      = w->reached + num + 1;
    w->parent    = w->hcas + num + 1;
    w->nchild    = w->parent + num + 1;
    w->tidx      = w->nchild + num + 1;
    w->leaves    = w->tidx + num + 1;
    w->child_off = w->leaves + num + 1;
    w->child     = w->child_off + num + 1;
    for (v = 0; v < topo->num_nodes; v++) {
        w->dist[v] = w->parent[v] = w->tidx[v] = -1;
        w->ecc[v] = w->reached[v] = w->hcas[v] = w->nchild[v] = 0;
    }
    for (v = 0; v < topo->num_nodes; v++) {
        n = &topo->nodes[v];
        for (p = 1; n->type == AGGMGR_NODE_SWITCH && p <= n->num_ports; p++) {
            k += tree_is_switch(topo, n->ports[p].peer_node);
        }
    }
    /* a switch that is down has no cables: no path goes through it */
    w->adj = malloc(((size_t)k + 1) * sizeof(int));
    if (w->adj == NULL) {
        free(w->mem);
        return AGG_ERR_NO_MEMORY;
    }
    for (v = 0, k = 0; v < topo->num_nodes; v++) {
        n             = &topo->nodes[v];
        w->adj_off[v] = k;
        for (p = 1; n->type == AGGMGR_NODE_SWITCH && p <= n->num_ports; p++) {
            if (tree_is_switch(topo, n->ports[p].peer_node) &&
                (down == NULL || (!down[v] && !down[n->ports[p].peer_node]))) {
                w->adj[k++] = n->ports[p].peer_node;
            }
        }
    }
    w->adj_off[topo->num_nodes] = k;
    return AGG_OK;
}

static void tree_work_free(tree_work_t *w)
{
    free(w->adj);
    free(w->mem);
}

/* BFS from `src`; fills dist and queue, returns the number of switches reached. */
static int tree_bfs(tree_work_t *w, int src)
{
    int head = 0, tail = 0, u, k;

    w->dist[src]    = 0;
    w->queue[tail++] = src;
    while (head < tail) {
        u = w->queue[head++];
        for (k = w->adj_off[u]; k < w->adj_off[u + 1]; k++) {
            if (w->dist[w->adj[k]] < 0) {
                w->dist[w->adj[k]] = w->dist[u] + 1;
                w->queue[tail++]   = w->adj[k];
            }
        }
    }
    return tail;
}

static void tree_bfs_reset(tree_work_t *w, int count)
{
    int i;

    for (i = 0; i < count; i++) {
        w->dist[w->queue[i]] = -1;
    }
}

/* The root: reaches every leaf with the least height, then load, then GUID. */
static agg_status_t tree_pick_root(const aggmgr_topo_t *topo, tree_work_t *w,
                                   int num_leaves, const unsigned *root_load,
                                   int *root)
{
    unsigned load, best_load = 0;
    int i, j, v, count, best = -1;

    for (i = 0; i < num_leaves; i++) {
        count = tree_bfs(w, w->leaves[i]);
        for (j = 0; i == 0 && j < num_leaves; j++) {
            if (w->dist[w->leaves[j]] < 0) {
                agg_debug("%s: no switch path between \"%s\" and \"%s\"",
                          topo->source, topo->nodes[w->leaves[0]].desc,
                          topo->nodes[w->leaves[j]].desc);
                tree_bfs_reset(w, count);
                return AGG_ERR_NO_TREE;
            }
        }
        for (j = 0; j < count; j++) {
            v = w->queue[j];
            w->reached[v]++;
            if (w->dist[v] > w->ecc[v]) {
                w->ecc[v] = w->dist[v];
            }
        }
        tree_bfs_reset(w, count);
    }
    for (v = 0; v < topo->num_nodes; v++) {
        if (w->reached[v] != num_leaves || topo->nodes[v].type != AGGMGR_NODE_SWITCH) {
            continue;
        }
        load = root_load ? root_load[v] : 0;
        if (best < 0 || w->ecc[v] < w->ecc[best] ||
            (w->ecc[v] == w->ecc[best] &&
             (load < best_load ||
              (load == best_load && topo->nodes[v].guid < topo->nodes[best].guid)))) {
            best      = v;
            best_load = load;
        }
    }
    *root = best; /* a leaf always qualifies once all leaves are connected */
    return AGG_OK;
}

/* Parents bottom-up over the BFS from the root (w->queue, `count` entries). */
static void tree_pick_parents(const aggmgr_topo_t *topo, tree_work_t *w, int count)
{
    int lo, hi, i, k, u, c, best, d;

    for (hi = count; hi > 1; hi = lo) {
        d = w->dist[w->queue[hi - 1]];
        for (lo = hi - 1; w->dist[w->queue[lo - 1]] == d; lo--) {
        }
        for (i = lo; i < hi; i++) {
            u = w->queue[i];
            if (w->hcas[u] == 0 && w->nchild[u] == 0) {
                continue; /* not needed */
            }
            best = -1;
            for (k = w->adj_off[u]; k < w->adj_off[u + 1]; k++) {
                c = w->adj[k];
                if (w->dist[c] != d - 1) {
                    continue;
                }
                if (best < 0 || w->nchild[c] < w->nchild[best] ||
                    (w->nchild[c] == w->nchild[best] &&
                     topo->nodes[c].guid < topo->nodes[best].guid)) {
                    best = c;
                }
            }
            w->parent[u] = best;
            w->nchild[best]++;
        }
    }
}

/* Lays the chosen tree out in BFS order, siblings by GUID. */
static agg_status_t tree_layout(const aggmgr_topo_t *topo, tree_work_t *w,
                                int root, int count, const int *ca_idx, int num,
                                aggmgr_tree_t *tree)
{
    tree_guid_ent_t *ent;
    aggmgr_tree_node_t *tn;
    int *child_off = w->child_off, *child = w->child;
    int i, k, u, v, num_nodes = 0, head, tail;

    ent = malloc(((size_t)count + 1) * sizeof(*ent));
    if (ent == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < count; i++) {
        u = w->queue[i];
        if (u == root || w->parent[u] >= 0) {
            ent[num_nodes].guid   = topo->nodes[u].guid;
            ent[num_nodes++].node = u;
        }
    }
    qsort(ent, (size_t)num_nodes, sizeof(*ent), tree_guid_cmp);
    tree->nodes    = calloc((size_t)num_nodes, sizeof(*tree->nodes));
    tree->hca_leaf = calloc((size_t)num, sizeof(*tree->hca_leaf));
    if (tree->nodes == NULL || tree->hca_leaf == NULL) {
        free(ent);
        return AGG_ERR_NO_MEMORY;
    }
    /* Children lists (CSR over topology nodes), each in GUID order. */
    for (v = 0; v <= topo->num_nodes; v++) {
        child_off[v] = 0;
    }
    for (i = 0; i < num_nodes; i++) {
        if (w->parent[ent[i].node] >= 0) {
            child_off[w->parent[ent[i].node] + 1]++;
        }
    }
    for (v = 0; v < topo->num_nodes; v++) {
        child_off[v + 1] += child_off[v];
    }
    for (i = 0; i < num_nodes; i++) {
        u = ent[i].node;
        if (w->parent[u] >= 0) {
            child[child_off[w->parent[u]]++] = u;
        }
    }
    for (v = topo->num_nodes; v > 0; v--) {
        child_off[v] = child_off[v - 1];
    }
    child_off[0] = 0;
    free(ent);

    /* BFS over the chosen children; tree->nodes doubles as the queue. */
    head = tail = 0;
    w->tidx[root] = tail;
    tree->nodes[tail++] = (aggmgr_tree_node_t){
        .topo_node = root, .parent = -1, .depth = 0, .num_hcas = w->hcas[root]};
    while (head < tail) {
        tn = &tree->nodes[head];
        u  = tn->topo_node;
        for (k = child_off[u]; k < child_off[u + 1]; k++) {
            v          = child[k];
            w->tidx[v] = tail;
            tree->nodes[tail++] = (aggmgr_tree_node_t){
                .topo_node = v, .parent = head, .depth = tn->depth + 1,
                .num_hcas = w->hcas[v]};
            tn->num_children++;
        }
        head++;
    }
    tree->num_nodes = tail;
    tree->depth     = tree->nodes[tail - 1].depth + 1;
    tree->num_hcas  = num;
    for (i = 0; i < num; i++) {
        tree->hca_leaf[i] = w->tidx[topo->ca_switch[ca_idx[i]]];
    }
    return AGG_OK;
}

agg_status_t aggmgr_tree_build(const aggmgr_topo_t *topo, const int *ca_idx,
                               int num, const unsigned *root_load,
                               aggmgr_tree_t *tree)
{
    return aggmgr_tree_build_avoiding(topo, ca_idx, num, root_load, NULL, tree);
}

agg_status_t aggmgr_tree_build_avoiding(const aggmgr_topo_t *topo, const int *ca_idx,
                                        int num, const unsigned *root_load,
                                        const uint8_t *down, aggmgr_tree_t *tree)
{
    aggmgr_tree_t t;
    tree_work_t w;
    agg_status_t status;
    int i, c, sw, root = -1, count, num_leaves = 0;

    if (topo == NULL || ca_idx == NULL || tree == NULL || num <= 0) {
        agg_error("tree build: no topology, no tree or no HCAs (%d)", num);
        return AGG_ERR_INVALID_PARAM;
    }
    /* an adapter may appear more than once: ranks of one host share it */
    for (i = 0; i < num; i++) {
        c = ca_idx[i];
        if (c < 0 || c >= topo->num_cas) {
            agg_error("tree build: HCA %d (entry %d) is not a CA of the topology", c, i);
            return AGG_ERR_INVALID_PARAM;
        }
    }

    memset(&t, 0, sizeof(t));
    status = tree_work_init(&w, topo, down);
    if (status != AGG_OK) {
        return status;
    }
    for (i = 0; i < num; i++) {
        sw = topo->ca_switch[ca_idx[i]];
        if (sw >= 0 && down != NULL && down[sw]) {
            agg_debug("%s: HCA \"%s\" hangs from switch \"%s\", which is down", topo->source,
                      topo->nodes[topo->cas[ca_idx[i]]].desc, topo->nodes[sw].desc);
            status = AGG_ERR_NO_TREE;
            goto out;
        }
        if (sw < 0) {
            agg_debug("%s: HCA \"%s\" is not cabled to a switch", topo->source,
                      topo->nodes[topo->cas[ca_idx[i]]].desc);
            status = AGG_ERR_NO_TREE;
            goto out;
        }
        if (w.hcas[sw]++ == 0) {
            w.leaves[num_leaves++] = sw;
        }
    }
    status = tree_pick_root(topo, &w, num_leaves, root_load, &root);
    if (status != AGG_OK) {
        goto out;
    }
    count = tree_bfs(&w, root);
    tree_pick_parents(topo, &w, count);
    status = tree_layout(topo, &w, root, count, ca_idx, num, &t);
    if (status != AGG_OK) {
        aggmgr_tree_free(&t);
        goto out;
    }
    agg_debug("%s: tree of %d switches, depth %d, root \"%s\" for %d HCAs",
              topo->source, t.num_nodes, t.depth, topo->nodes[root].desc, num);
    *tree = t;
out:
    tree_work_free(&w);
    return status;
}

agg_status_t aggmgr_tree_prune(const aggmgr_tree_t *tree, const int *sel, int n,
                               aggmgr_tree_t *sub)
{
    aggmgr_tree_t t;
    int *cnt, *nch, *only, *newidx, *seen;
    int i, s, r, num = 0, max_depth = 0;

    if (tree == NULL || sel == NULL || sub == NULL || n <= 0 || tree->num_nodes <= 0) {
        agg_error("tree prune: no tree, no subtree or no HCAs (%d)", n);
        return AGG_ERR_INVALID_PARAM;
    }
    cnt = calloc(4 * (size_t)tree->num_nodes + (size_t)tree->num_hcas, sizeof(int));
    if (cnt == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    nch    = cnt + tree->num_nodes;
    only   = nch + tree->num_nodes;   /* the last kept child seen */
    newidx = only + tree->num_nodes;
    seen   = newidx + tree->num_nodes; /* per HCA of the tree */
    for (i = 0; i < n; i++) {
        s = sel[i];
        if (s < 0 || s >= tree->num_hcas || seen[s]) {
            agg_error("tree prune: HCA %d (entry %d) is %s", s, i,
                      s < 0 || s >= tree->num_hcas ? "not in the tree" : "given twice");
            free(cnt);
            return AGG_ERR_INVALID_PARAM;
        }
        seen[s] = 1;
        cnt[tree->hca_leaf[s]]++;
    }
    /* Children come after parents: one backward pass marks what is needed. */
    for (i = tree->num_nodes - 1; i > 0; i--) {
        if (cnt[i] > 0 || nch[i] > 0) {
            nch[tree->nodes[i].parent]++;
            only[tree->nodes[i].parent] = i;
        }
    }
    for (r = 0; cnt[r] == 0 && nch[r] == 1; r = only[r]) {
    }
    /* Keep r and the needed nodes below it; order stays BFS, parents first. */
    for (i = 0; i < tree->num_nodes; i++) {
        newidx[i] = -1;
        if (i == r || (i > r && (cnt[i] > 0 || nch[i] > 0) &&
                       newidx[tree->nodes[i].parent] >= 0)) {
            newidx[i] = num++;
        }
    }
    memset(&t, 0, sizeof(t));
    t.nodes    = calloc((size_t)num, sizeof(*t.nodes));
    t.hca_leaf = calloc((size_t)n, sizeof(*t.hca_leaf));
    if (t.nodes == NULL || t.hca_leaf == NULL) {
        aggmgr_tree_free(&t);
        free(cnt);
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < tree->num_nodes; i++) {
        if (newidx[i] < 0) {
            continue;
        }
        t.nodes[newidx[i]] = (aggmgr_tree_node_t){
            .topo_node    = tree->nodes[i].topo_node,
            .parent       = i == r ? -1 : newidx[tree->nodes[i].parent],
            .depth        = tree->nodes[i].depth - tree->nodes[r].depth,
            .num_children = nch[i],
            .num_hcas     = cnt[i]};
        if (t.nodes[newidx[i]].depth > max_depth) {
            max_depth = t.nodes[newidx[i]].depth;
        }
    }
    t.num_nodes = num;
    t.depth     = max_depth + 1;
    t.num_hcas  = n;
    for (i = 0; i < n; i++) {
        t.hca_leaf[i] = newidx[tree->hca_leaf[sel[i]]];
    }
    free(cnt);
    *sub = t;
    return AGG_OK;
}

void aggmgr_tree_free(aggmgr_tree_t *tree)
{
    if (tree == NULL) {
        return;
    }
    free(tree->nodes);
    free(tree->hca_leaf);
    memset(tree, 0, sizeof(*tree));
}
