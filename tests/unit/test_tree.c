/*
 * Aggregation trees: root choice, minimum depth, parents, pruning.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aggmgr_tree.h"

/* ---- fabrics from edge lists --------------------------------------------- */

/*
 * Switch i is "S-<hex i+1>" (GUID i + 1), described "swI"; host h is
 * "H-<hex 0x100000+h>", cabled to switch host_sw[h] (-1: to nothing). Switch
 * ports: links in edge order, then hosts. Built as ibnetdiscover text and
 * parsed, so the tests go through the same path as a real fabric.
 */
static void topo_from_edges(int nsw, const int (*edges)[2], int nedges,
                            const int *host_sw, int nhosts, aggmgr_topo_t *topo)
{
    int *nports = calloc((size_t)nsw, sizeof(int));
    int (*eport)[2] = calloc((size_t)nedges + 1, sizeof(*eport));
    int *hport = calloc((size_t)nhosts + 1, sizeof(int));
    char *text = NULL, err[512] = "";
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int e, h, s;

    assert_non_null(f);
    for (e = 0; e < nedges; e++) {
        eport[e][0] = ++nports[edges[e][0]];
        eport[e][1] = ++nports[edges[e][1]];
    }
    for (h = 0; h < nhosts; h++) {
        hport[h] = host_sw[h] >= 0 ? ++nports[host_sw[h]] : 0;
    }
    for (s = 0; s < nsw; s++) {
        fprintf(f, "\nSwitch %d \"S-%x\" # \"sw%d\"\n", nports[s] ? nports[s] : 1,
                s + 1, s + 1);
        for (e = 0; e < nedges; e++) {
            for (int end = 0; end < 2; end++) {
                if (edges[e][end] == s) {
                    fprintf(f, "[%d] \"S-%x\"[%d]\n", eport[e][end],
                            edges[e][1 - end] + 1, eport[e][1 - end]);
                }
            }
        }
        for (h = 0; h < nhosts; h++) {
            if (host_sw[h] == s) {
                fprintf(f, "[%d] \"H-%x\"[1]\n", hport[h], 0x100000 + h);
            }
        }
    }
    for (h = 0; h < nhosts; h++) {
        fprintf(f, "\nCa 1 \"H-%x\" # \"host%d\"\n", 0x100000 + h, h);
        if (host_sw[h] >= 0) {
            fprintf(f, "[1] \"S-%x\"[%d]\n", host_sw[h] + 1, hport[h]);
        }
    }
    assert_int_equal(fclose(f), 0);
    if (aggmgr_topo_parse(text, "edges", topo, err, sizeof(err)) != AGG_OK) {
        print_error("%s\n", err);
        fail();
    }
    free(text);
    free(hport);
    free(eport);
    free(nports);
}

/* The smallest height over the job's leaves any switch has (brute force). */
static int min_height(const aggmgr_topo_t *t, const int *ca_idx, int num)
{
    int *dist  = malloc((size_t)t->num_nodes * sizeof(int));
    int *queue = malloc((size_t)t->num_nodes * sizeof(int));
    int best = -1, r, i, head, tail, u, p, v, h;

    for (r = 0; r < t->num_nodes; r++) {
        if (t->nodes[r].type != AGGMGR_NODE_SWITCH) {
            continue;
        }
        for (i = 0; i < t->num_nodes; i++) {
            dist[i] = -1;
        }
        dist[r]  = 0;
        queue[0] = r;
        for (head = 0, tail = 1; head < tail; head++) {
            u = queue[head];
            for (p = 1; p <= t->nodes[u].num_ports; p++) {
                v = t->nodes[u].ports[p].peer_node;
                if (v >= 0 && t->nodes[v].type == AGGMGR_NODE_SWITCH && dist[v] < 0) {
                    dist[v]         = dist[u] + 1;
                    queue[tail++] = v;
                }
            }
        }
        for (i = 0, h = 0; i < num && h >= 0; i++) {
            v = dist[t->ca_switch[ca_idx[i]]];
            h = v < 0 ? -1 : (v > h ? v : h);
        }
        if (h >= 0 && (best < 0 || h < best)) {
            best = h;
        }
    }
    free(dist);
    free(queue);
    return best;
}

static int linked(const aggmgr_topo_t *t, int a, int b)
{
    int p;

    for (p = 1; p <= t->nodes[a].num_ports; p++) {
        if (t->nodes[a].ports[p].peer_node == b) {
            return 1;
        }
    }
    return 0;
}

/*
 * Everything a tree promises: parents first, depths, real links, counts,
 * every switch once, no branch without HCAs, hca_leaf on the HCA's switch.
 */
static void check_tree(const aggmgr_topo_t *t, const aggmgr_tree_t *tr,
                       const int *ca_idx, int num)
{
    int *children = calloc((size_t)tr->num_nodes, sizeof(int));
    int *hcas     = calloc((size_t)tr->num_nodes, sizeof(int));
    int i, j, max_depth = 0;

    assert_true(tr->num_nodes >= 1);
    assert_int_equal(tr->num_hcas, num);
    assert_int_equal(tr->nodes[0].parent, -1);
    assert_int_equal(tr->nodes[0].depth, 0);
    for (i = 0; i < tr->num_nodes; i++) {
        const aggmgr_tree_node_t *n = &tr->nodes[i];

        assert_int_equal(t->nodes[n->topo_node].type, AGGMGR_NODE_SWITCH);
        for (j = 0; j < i; j++) {
            assert_int_not_equal(tr->nodes[j].topo_node, n->topo_node);
        }
        if (i > 0) {
            assert_in_range(n->parent, 0, i - 1);
            assert_int_equal(n->depth, tr->nodes[n->parent].depth + 1);
            assert_true(n->depth >= tr->nodes[i - 1].depth); /* BFS order */
            assert_true(linked(t, n->topo_node, tr->nodes[n->parent].topo_node));
            children[n->parent]++;
        }
        max_depth = n->depth > max_depth ? n->depth : max_depth;
    }
    for (i = 0; i < num; i++) {
        assert_in_range(tr->hca_leaf[i], 0, tr->num_nodes - 1);
        hcas[tr->hca_leaf[i]]++;
        if (ca_idx != NULL) {
            assert_int_equal(tr->nodes[tr->hca_leaf[i]].topo_node,
                             t->ca_switch[ca_idx[i]]);
        }
    }
    for (i = 0; i < tr->num_nodes; i++) {
        assert_int_equal(tr->nodes[i].num_children, children[i]);
        assert_int_equal(tr->nodes[i].num_hcas, hcas[i]);
        assert_true(hcas[i] > 0 || children[i] > 0);
    }
    /* A root with one child and no HCA of its own could move down. */
    assert_true(hcas[0] > 0 || children[0] != 1);
    assert_int_equal(tr->depth, max_depth + 1);
    if (ca_idx != NULL) {
        assert_int_equal(tr->depth, min_height(t, ca_idx, num) + 1);
    }
    free(children);
    free(hcas);
}

static aggmgr_tree_t build_ok(const aggmgr_topo_t *t, const int *ca_idx, int num,
                              const unsigned *load)
{
    aggmgr_tree_t tr;

    memset(&tr, 0, sizeof(tr));
    assert_int_equal(aggmgr_tree_build(t, ca_idx, num, load, &tr), AGG_OK);
    check_tree(t, &tr, ca_idx, num);
    return tr;
}

static void all_cas(int *idx, int num)
{
    for (int i = 0; i < num; i++) {
        idx[i] = i;
    }
}

/* ---- tests ----------------------------------------------------------------- */

/* fat tree 4 leaves x 3 hosts, 2 spines: nodes 0-1 spines, 2-5 leaves, CAs. */
static void test_fat_tree_all(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int idx[12], i;

    (void)state;
    assert_int_equal(aggmgr_topo_fat_tree(4, 2, 3, &t), AGG_OK);
    all_cas(idx, 12);
    tr = build_ok(&t, idx, 12, NULL);
    assert_int_equal(tr.num_nodes, 5);
    assert_int_equal(tr.depth, 2);
    assert_int_equal(tr.nodes[0].topo_node, 0); /* spine1: lowest GUID */
    assert_int_equal(tr.nodes[0].num_children, 4);
    assert_int_equal(tr.nodes[0].num_hcas, 0);
    for (i = 1; i <= 4; i++) {
        assert_int_equal(tr.nodes[i].topo_node, 1 + i); /* leaves by GUID */
        assert_int_equal(tr.nodes[i].num_hcas, 3);
        assert_int_equal(tr.nodes[i].num_children, 0);
    }
    for (i = 0; i < 12; i++) {
        assert_int_equal(tr.hca_leaf[i], 1 + i / 3);
    }
    aggmgr_tree_free(&tr);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

static void test_root_load_spreads(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t a, b, c;
    unsigned load[40] = {0};
    int idx[] = {0, 4, 8};

    (void)state;
    assert_int_equal(aggmgr_topo_fat_tree(4, 3, 3, &t), AGG_OK);
    a = build_ok(&t, idx, 3, load);
    load[a.nodes[0].topo_node]++;
    b = build_ok(&t, idx, 3, load);
    load[b.nodes[0].topo_node]++;
    c = build_ok(&t, idx, 3, load);
    assert_true(a.nodes[0].topo_node < 3 && b.nodes[0].topo_node < 3 &&
                c.nodes[0].topo_node < 3);
    assert_int_not_equal(a.nodes[0].topo_node, b.nodes[0].topo_node);
    assert_int_not_equal(b.nodes[0].topo_node, c.nodes[0].topo_node);
    assert_int_not_equal(a.nodes[0].topo_node, c.nodes[0].topo_node);
    assert_int_equal(b.depth, 2);
    aggmgr_tree_free(&a);
    aggmgr_tree_free(&b);
    aggmgr_tree_free(&c);
    aggmgr_topo_free(&t);
}

static void test_one_leaf(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    unsigned load[40] = {0};
    int idx[] = {5, 3, 4}; /* all under leaf2 (node 3), out of order */

    (void)state;
    assert_int_equal(aggmgr_topo_fat_tree(4, 2, 3, &t), AGG_OK);
    load[3] = 7; /* load never moves a tree up */
    tr = build_ok(&t, idx, 3, load);
    assert_int_equal(tr.num_nodes, 1);
    assert_int_equal(tr.depth, 1);
    assert_int_equal(tr.nodes[0].topo_node, 3);
    assert_int_equal(tr.nodes[0].num_hcas, 3);
    assert_int_equal(tr.nodes[0].num_children, 0);
    aggmgr_tree_free(&tr);

    /* One HCA, and a single-switch fabric. */
    tr = build_ok(&t, idx, 1, NULL);
    assert_int_equal(tr.num_nodes, 1);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
    assert_int_equal(aggmgr_topo_fat_tree(1, 0, 4, &t), AGG_OK);
    all_cas(idx, 3);
    tr = build_ok(&t, idx, 3, NULL);
    assert_int_equal(tr.num_nodes, 1);
    assert_int_equal(tr.nodes[0].topo_node, 0);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

static void test_two_leaves(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int idx[] = {11, 0, 1};

    (void)state;
    assert_int_equal(aggmgr_topo_fat_tree(4, 2, 3, &t), AGG_OK);
    tr = build_ok(&t, idx, 3, NULL);
    assert_int_equal(tr.num_nodes, 3);
    assert_int_equal(tr.depth, 2);
    assert_int_equal(tr.nodes[1].topo_node, 2); /* leaf1, then leaf4 */
    assert_int_equal(tr.nodes[2].topo_node, 5);
    assert_int_equal(tr.hca_leaf[0], 2);
    assert_int_equal(tr.hca_leaf[1], 1);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

static void test_bad_params(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int dup[] = {1, 2, 1}, range[] = {0, 12}, neg[] = {-1};

    (void)state;
    memset(&tr, 0, sizeof(tr));
    assert_int_equal(aggmgr_topo_fat_tree(4, 2, 3, &t), AGG_OK);
    /* an adapter given twice is two ranks sharing it: both are members */
    assert_int_equal(aggmgr_tree_build(&t, dup, 3, NULL, &tr), AGG_OK);
    assert_int_equal(tr.num_hcas, 3);
    assert_int_equal(tr.hca_leaf[0], tr.hca_leaf[2]);
    aggmgr_tree_free(&tr);
    memset(&tr, 0, sizeof(tr));
    assert_int_equal(aggmgr_tree_build(&t, range, 2, NULL, &tr), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_tree_build(&t, neg, 1, NULL, &tr), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_tree_build(&t, dup, 0, NULL, &tr), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_tree_build(NULL, dup, 1, NULL, &tr), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_tree_build(&t, NULL, 1, NULL, &tr), AGG_ERR_INVALID_PARAM);
    assert_null(tr.nodes);
    aggmgr_topo_free(&t);
}

/* Switches that are down are not in any tree: the other spine is the root. */
static void test_avoiding(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int idx[] = {0, 2, 5}; /* hosts under leaves 1, 2 and 3 (two per leaf) */
    uint8_t down[16] = {0};
    int i;

    (void)state;
    memset(&tr, 0, sizeof(tr));
    assert_int_equal(aggmgr_topo_fat_tree(3, 2, 2, &t), AGG_OK); /* spines: nodes 0, 1 */
    assert_true((size_t)t.num_nodes <= sizeof(down));
    assert_int_equal(aggmgr_tree_build_avoiding(&t, idx, 3, NULL, down, &tr), AGG_OK);
    assert_int_equal(tr.nodes[0].topo_node, 0); /* spine1: the lower GUID */
    aggmgr_tree_free(&tr);
    down[0] = 1; /* spine1 down */
    assert_int_equal(aggmgr_tree_build_avoiding(&t, idx, 3, NULL, down, &tr), AGG_OK);
    assert_int_equal(tr.nodes[0].topo_node, 1);
    for (i = 0; i < tr.num_nodes; ++i) {
        assert_false(down[tr.nodes[i].topo_node]);
    }
    aggmgr_tree_free(&tr);
    down[1] = 1; /* both spines: the leaves have no switch in common */
    assert_int_equal(aggmgr_tree_build_avoiding(&t, idx, 3, NULL, down, &tr), AGG_ERR_NO_TREE);
    down[0] = down[1] = 0;
    down[t.ca_switch[idx[0]]] = 1; /* a member's own leaf: no way around it */
    assert_int_equal(aggmgr_tree_build_avoiding(&t, idx, 3, NULL, down, &tr), AGG_ERR_NO_TREE);
    aggmgr_topo_free(&t);
}

static void test_prune(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t tr, sub, sub2;
    int idx[12], two[] = {10, 0, 1}, one[] = {5, 3}, bad[] = {2, 2}, out[] = {12};
    int again[] = {0};

    (void)state;
    assert_int_equal(aggmgr_topo_fat_tree(4, 2, 3, &t), AGG_OK);
    all_cas(idx, 12);
    tr = build_ok(&t, idx, 12, NULL);

    /* HCAs on leaf1 and leaf4: the spine keeps two branches. */
    assert_int_equal(aggmgr_tree_prune(&tr, two, 3, &sub), AGG_OK);
    check_tree(&t, &sub, NULL, 3);
    assert_int_equal(sub.num_nodes, 3);
    assert_int_equal(sub.depth, 2);
    assert_int_equal(sub.nodes[0].topo_node, tr.nodes[0].topo_node);
    assert_int_equal(sub.nodes[0].num_children, 2);
    assert_int_equal(sub.nodes[1].topo_node, 2);
    assert_int_equal(sub.nodes[2].topo_node, 5);
    assert_int_equal(sub.hca_leaf[0], 2);
    assert_int_equal(sub.hca_leaf[1], 1);
    assert_int_equal(sub.hca_leaf[2], 1);
    assert_int_equal(sub.nodes[1].num_hcas, 2);

    /* Pruning a pruned tree: down to leaf4 alone, the root moves down. */
    assert_int_equal(aggmgr_tree_prune(&sub, again, 1, &sub2), AGG_OK);
    check_tree(&t, &sub2, NULL, 1);
    assert_int_equal(sub2.num_nodes, 1);
    assert_int_equal(sub2.nodes[0].topo_node, 5);
    aggmgr_tree_free(&sub2);
    aggmgr_tree_free(&sub);

    /* HCAs on leaf2 only: a one-node tree, the root is the leaf. */
    assert_int_equal(aggmgr_tree_prune(&tr, one, 2, &sub), AGG_OK);
    check_tree(&t, &sub, NULL, 2);
    assert_int_equal(sub.num_nodes, 1);
    assert_int_equal(sub.depth, 1);
    assert_int_equal(sub.nodes[0].topo_node, 3);
    assert_int_equal(sub.nodes[0].parent, -1);
    assert_int_equal(sub.nodes[0].num_hcas, 2);
    assert_int_equal(sub.hca_leaf[0], 0);
    aggmgr_tree_free(&sub);

    /* Everything: the same tree. */
    assert_int_equal(aggmgr_tree_prune(&tr, idx, 12, &sub), AGG_OK);
    assert_int_equal(sub.num_nodes, tr.num_nodes);
    assert_memory_equal(sub.nodes, tr.nodes, sizeof(*tr.nodes) * (size_t)tr.num_nodes);
    assert_memory_equal(sub.hca_leaf, tr.hca_leaf, sizeof(int) * 12);
    aggmgr_tree_free(&sub);

    memset(&sub, 0, sizeof(sub));
    assert_int_equal(aggmgr_tree_prune(&tr, bad, 2, &sub), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_tree_prune(&tr, out, 1, &sub), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_tree_prune(&tr, out, 0, &sub), AGG_ERR_INVALID_PARAM);
    assert_null(sub.nodes);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

/* sw1 - sw2 - sw3 - sw4 - sw5 */
static void test_chain(void **state)
{
    static const int edges[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
    static const int host_sw[] = {0, 4, 1, 2};
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int ends[] = {0, 1}, near[] = {0, 2}, mid[] = {3};

    (void)state;
    topo_from_edges(5, edges, 4, host_sw, 4, &t);
    tr = build_ok(&t, ends, 2, NULL);
    assert_int_equal(tr.num_nodes, 5);
    assert_int_equal(tr.depth, 3);
    assert_int_equal(tr.nodes[0].topo_node, 2); /* sw3, the middle */
    assert_int_equal(tr.nodes[0].num_children, 2);
    aggmgr_tree_free(&tr);

    /* sw1 and sw2 are both of height 1: the lower GUID wins. */
    tr = build_ok(&t, near, 2, NULL);
    assert_int_equal(tr.num_nodes, 2);
    assert_int_equal(tr.nodes[0].topo_node, 0);
    assert_int_equal(tr.nodes[0].num_hcas, 1); /* a root can be a leaf too */
    assert_int_equal(tr.nodes[1].topo_node, 1);
    aggmgr_tree_free(&tr);

    tr = build_ok(&t, mid, 1, NULL);
    assert_int_equal(tr.num_nodes, 1);
    assert_int_equal(tr.nodes[0].topo_node, 2);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

/* A ring of six: hosts on opposite switches sw1 and sw4. */
static void test_ring(void **state)
{
    static const int edges[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 0}};
    static const int host_sw[] = {0, 3};
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int idx[] = {0, 1};

    (void)state;
    topo_from_edges(6, edges, 6, host_sw, 2, &t);
    tr = build_ok(&t, idx, 2, NULL);
    /* sw2, sw3, sw5, sw6 all have height 2; sw2 has the lowest GUID. */
    assert_int_equal(tr.depth, 3);
    assert_int_equal(tr.num_nodes, 4);
    assert_int_equal(tr.nodes[0].topo_node, 1);
    assert_int_equal(tr.nodes[1].topo_node, 0);
    assert_int_equal(tr.nodes[2].topo_node, 2);
    assert_int_equal(tr.nodes[3].topo_node, 3);
    assert_int_equal(tr.nodes[3].parent, 2);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

/*
 * Two pods under one core: pod A has aggregation switches a1, a2 and leaves
 * l1, l2 (each cabled to a1 and a2); pod B the same with b1, b2, l3, l4.
 * Leaves under one pod share their parents' choice: fewest children first.
 */
static void test_parents_spread(void **state)
{
    enum { CORE, A1, A2, B1, B2, L1, L2, L3, L4 };
    static const int edges[][2] = {
        {CORE, A1}, {CORE, A2}, {CORE, B1}, {CORE, B2},
        {A1, L1},   {A2, L1},   {A1, L2},   {A2, L2},
        {B1, L3},   {B2, L3},   {B1, L4},   {B2, L4},
    };
    static const int host_sw[] = {L1, L2, L3, L4, L1};
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int idx[] = {0, 1, 2, 3, 4}, pod[] = {0, 1};

    (void)state;
    topo_from_edges(9, edges, 12, host_sw, 5, &t);
    tr = build_ok(&t, idx, 5, NULL);
    assert_int_equal(tr.depth, 3);
    assert_int_equal(tr.nodes[0].topo_node, CORE);
    assert_int_equal(tr.num_nodes, 9);
    assert_int_equal(tr.nodes[0].num_children, 4);
    for (int i = 1; i <= 4; i++) {
        assert_int_equal(tr.nodes[i].num_children, 1);
    }
    assert_int_equal(tr.nodes[tr.hca_leaf[0]].parent, 1); /* l1 under a1 */
    assert_int_equal(tr.nodes[tr.hca_leaf[1]].parent, 2); /* l2 under a2 */
    aggmgr_tree_free(&tr);

    /* Within one pod an aggregation switch is the root. */
    tr = build_ok(&t, pod, 2, NULL);
    assert_int_equal(tr.depth, 2);
    assert_int_equal(tr.nodes[0].topo_node, A1);
    assert_int_equal(tr.num_nodes, 3);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

static void test_no_tree(void **state)
{
    static const int edges[][2] = {{0, 1}, {2, 3}};
    static const int host_sw[] = {0, 1, 3, -1};
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    int same_half[] = {0, 1}, halves[] = {0, 2}, uncabled[] = {0, 3};

    (void)state;
    memset(&tr, 0, sizeof(tr));
    topo_from_edges(4, edges, 2, host_sw, 4, &t);
    assert_int_equal(aggmgr_tree_build(&t, halves, 2, NULL, &tr), AGG_ERR_NO_TREE);
    assert_int_equal(aggmgr_tree_build(&t, uncabled, 2, NULL, &tr), AGG_ERR_NO_TREE);
    assert_null(tr.nodes);
    tr = build_ok(&t, same_half, 2, NULL);
    assert_int_equal(tr.num_nodes, 2);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

/* Real ibnetdiscover output: Switch2 (node 0) and Switch1 (node 1, lower GUID)
 * cabled twice, two HCAs each. */
static void test_ibsim_capture(void **state)
{
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    char err[512] = "";
    int idx[] = {0, 1, 2, 3}, sw1[] = {3, 2};

    (void)state;
    assert_int_equal(aggmgr_topo_load(AGG_TEST_DATA "/ibsim_2sw2path4hca.topo", &t,
                                      err, sizeof(err)),
                     AGG_OK);
    tr = build_ok(&t, idx, 4, NULL);
    assert_int_equal(tr.num_nodes, 2);
    assert_int_equal(tr.depth, 2);
    assert_int_equal(tr.nodes[0].topo_node, 1);
    assert_int_equal(tr.nodes[0].num_hcas, 2);
    assert_int_equal(tr.nodes[1].topo_node, 0);
    assert_int_equal(tr.nodes[1].num_children, 0);
    aggmgr_tree_free(&tr);
    tr = build_ok(&t, sw1, 2, NULL);
    assert_int_equal(tr.num_nodes, 1);
    assert_int_equal(tr.nodes[0].topo_node, 1);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
}

/*
 * A k-ary three-level fat tree (k = 16: 320 switches), one HCA per edge
 * switch. Core switches are the roots; a job inside one pod stays there.
 */
static void test_three_level(void **state)
{
    enum { K = 16, H = K / 2, EDGE = 0, AGGR = K * H, CORE = 2 * K * H };
    int nsw = CORE + H * H, nedges = 2 * K * H * H, e = 0, pod, i, j;
    int (*edges)[2] = calloc((size_t)nedges, sizeof(*edges));
    int host_sw[K * H], idx[K * H];
    aggmgr_topo_t t;
    aggmgr_tree_t tr;
    clock_t start;

    (void)state;
    for (pod = 0; pod < K; pod++) {
        for (i = 0; i < H; i++) {
            for (j = 0; j < H; j++) {
                edges[e][0]   = EDGE + pod * H + i;
                edges[e++][1] = AGGR + pod * H + j;
                edges[e][0]   = AGGR + pod * H + i;
                edges[e++][1] = CORE + i * H + j;
            }
        }
    }
    for (i = 0; i < K * H; i++) {
        host_sw[i] = EDGE + i;
    }
    topo_from_edges(nsw, (const int (*)[2])edges, nedges, host_sw, K * H, &t);
    all_cas(idx, K * H);
    start = clock();
    tr    = build_ok(&t, idx, K * H, NULL);
    assert_true(clock() - start < CLOCKS_PER_SEC);
    assert_int_equal(tr.depth, 3);
    assert_int_equal(tr.nodes[0].topo_node, CORE);
    assert_int_equal(tr.num_nodes, 1 + K + K * H);
    aggmgr_tree_free(&tr);

    tr = build_ok(&t, idx + H, H, NULL); /* pod 1 */
    assert_int_equal(tr.depth, 2);
    assert_int_equal(tr.nodes[0].topo_node, AGGR + H);
    aggmgr_tree_free(&tr);
    aggmgr_topo_free(&t);
    free(edges);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fat_tree_all),
        cmocka_unit_test(test_root_load_spreads),
        cmocka_unit_test(test_one_leaf),
        cmocka_unit_test(test_two_leaves),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_prune),
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_parents_spread),
        cmocka_unit_test(test_no_tree),
        cmocka_unit_test(test_ibsim_capture),
        cmocka_unit_test(test_three_level),
        cmocka_unit_test(test_avoiding),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
