/*
 * libFuzzer harness for the ibnetdiscover reader (aggmgr_topo_parse).
 *
 * The input is the text of a topology file. Whatever parses must also
 * survive what aggmgr does next with it: the writer's output must read back
 * to the same fabric, and trees built and pruned over a few of its CAs must
 * keep the invariants the job code relies on (parents first, depths, HCA
 * counts, links that exist). A broken invariant aborts, so libFuzzer keeps
 * the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggmgr_topo.h"
#include "aggmgr_tree.h"
#include "fuzz.h"
#include "agg/log.h"

#define FUZZ_MAX_HCAS 8


int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *lvl = getenv("AGG_FUZZ_LOG_LEVEL");

    /* Every message is formatted (its arguments are read) unless asked
     * otherwise; run with -close_fd_mask=2 to keep the output quiet. */
    agg_log_set_level(lvl != NULL ? atoi(lvl) : AGG_LOG_TRACE);
    return 0;
}

/* What the reader promises about a topology it returned. */
static void fuzz_check_topo(const aggmgr_topo_t *t)
{
    const aggmgr_node_t *n, *peer;
    int i, p, k, sw = 0, ca = 0;

    FUZZ_CHECK(t->num_nodes > 0);
    for (i = 0; i < t->num_nodes; i++) {
        n = &t->nodes[i];
        FUZZ_CHECK(n->type == AGGMGR_NODE_SWITCH || n->type == AGGMGR_NODE_CA);
        FUZZ_CHECK(n->num_ports >= 1 && n->num_ports <= 255);
        FUZZ_CHECK(memchr(n->id, '\0', sizeof(n->id)) != NULL && n->id[0] != '\0');
        FUZZ_CHECK(memchr(n->desc, '\0', sizeof(n->desc)) != NULL);
        sw += n->type == AGGMGR_NODE_SWITCH;
        ca += n->type == AGGMGR_NODE_CA;
        for (p = 1; p <= n->num_ports; p++) {
            if (n->ports[p].peer_node < 0) {
                continue;
            }
            /* cabled both ways, to a port that exists */
            FUZZ_CHECK(n->ports[p].peer_node < t->num_nodes);
            peer = &t->nodes[n->ports[p].peer_node];
            FUZZ_CHECK(n->ports[p].peer_port >= 1 &&
                       n->ports[p].peer_port <= peer->num_ports);
            FUZZ_CHECK(peer->ports[n->ports[p].peer_port].peer_node == i);
            FUZZ_CHECK(peer->ports[n->ports[p].peer_port].peer_port == p);
        }
    }
    FUZZ_CHECK(sw == t->num_switches && ca == t->num_cas);
    FUZZ_CHECK(t->num_nodes == t->num_switches + t->num_cas);
    for (k = 0; k < t->num_cas; k++) {
        FUZZ_CHECK(t->cas[k] >= 0 && t->cas[k] < t->num_nodes);
        FUZZ_CHECK(t->nodes[t->cas[k]].type == AGGMGR_NODE_CA);
        FUZZ_CHECK(k == 0 || t->cas[k] > t->cas[k - 1]);
        FUZZ_CHECK(t->ca_switch[k] == -1 ||
                   (t->ca_switch[k] >= 0 && t->ca_switch[k] < t->num_nodes &&
                    t->nodes[t->ca_switch[k]].type == AGGMGR_NODE_SWITCH));
    }
}

/* Writes t and reads it back: the writer's output is a file aggmgr accepts. */
static void fuzz_round_trip(const aggmgr_topo_t *t)
{
    aggmgr_topo_t back;
    char err[512], *buf = NULL;
    size_t len = 0;
    agg_status_t st;
    FILE *f;
    int i, p;

    f = open_memstream(&buf, &len);
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(aggmgr_topo_write(t, f) == AGG_OK);
    FUZZ_CHECK(fclose(f) == 0);
    memset(&back, 0, sizeof(back));
    err[0] = '\0';
    st     = aggmgr_topo_parse(buf, "written", &back, err, sizeof(err));
    if (st != AGG_OK) {
        fprintf(stderr, "written topology does not parse back: %s\n%s", err, buf);
    }
    FUZZ_CHECK(st == AGG_OK);
    FUZZ_CHECK(back.num_nodes == t->num_nodes);
    FUZZ_CHECK(back.num_switches == t->num_switches);
    FUZZ_CHECK(back.num_cas == t->num_cas);
    for (i = 0; i < t->num_nodes; i++) {
        FUZZ_CHECK(back.nodes[i].type == t->nodes[i].type);
        FUZZ_CHECK(back.nodes[i].guid == t->nodes[i].guid);
        FUZZ_CHECK(back.nodes[i].num_ports == t->nodes[i].num_ports);
        FUZZ_CHECK(strcmp(back.nodes[i].id, t->nodes[i].id) == 0);
        FUZZ_CHECK(strcmp(back.nodes[i].desc, t->nodes[i].desc) == 0);
        for (p = 1; p <= t->nodes[i].num_ports; p++) {
            FUZZ_CHECK(back.nodes[i].ports[p].peer_node == t->nodes[i].ports[p].peer_node);
            FUZZ_CHECK(back.nodes[i].ports[p].peer_node < 0 ||
                       back.nodes[i].ports[p].peer_port == t->nodes[i].ports[p].peer_port);
        }
    }
    for (i = 0; i < t->num_cas; i++) {
        FUZZ_CHECK(back.cas[i] == t->cas[i] && back.ca_switch[i] == t->ca_switch[i]);
    }
    aggmgr_topo_free(&back);
    free(buf);
}

/* 1 when topology nodes a and b are cabled to each other. */
static int fuzz_cabled(const aggmgr_topo_t *t, int a, int b)
{
    int p;

    for (p = 1; p <= t->nodes[a].num_ports; p++) {
        if (t->nodes[a].ports[p].peer_node == b) {
            return 1;
        }
    }
    return 0;
}

/* Parents first, depths by one, counts that add up, edges that are cables. */
static void fuzz_check_tree(const aggmgr_topo_t *t, const aggmgr_tree_t *tree, int num)
{
    const aggmgr_tree_node_t *tn;
    int *nch, *hcas, i, max_depth = 0;

    FUZZ_CHECK(tree->num_nodes >= 1 && tree->num_nodes <= t->num_switches);
    FUZZ_CHECK(tree->num_hcas == num);
    nch  = calloc((size_t)tree->num_nodes * 2, sizeof(int));
    FUZZ_CHECK(nch != NULL);
    hcas = nch + tree->num_nodes;
    for (i = 0; i < tree->num_nodes; i++) {
        tn = &tree->nodes[i];
        FUZZ_CHECK(tn->topo_node >= 0 && tn->topo_node < t->num_nodes);
        FUZZ_CHECK(t->nodes[tn->topo_node].type == AGGMGR_NODE_SWITCH);
        if (i == 0) {
            FUZZ_CHECK(tn->parent == -1 && tn->depth == 0);
        } else {
            FUZZ_CHECK(tn->parent >= 0 && tn->parent < i);
            FUZZ_CHECK(tn->depth == tree->nodes[tn->parent].depth + 1);
            FUZZ_CHECK(tn->topo_node != tree->nodes[tn->parent].topo_node);
            FUZZ_CHECK(fuzz_cabled(t, tn->topo_node, tree->nodes[tn->parent].topo_node));
            nch[tn->parent]++;
        }
        if (tn->depth > max_depth) {
            max_depth = tn->depth;
        }
    }
    FUZZ_CHECK(tree->depth == max_depth + 1);
    for (i = 0; i < num; i++) {
        FUZZ_CHECK(tree->hca_leaf[i] >= 0 && tree->hca_leaf[i] < tree->num_nodes);
        hcas[tree->hca_leaf[i]]++;
    }
    for (i = 0; i < tree->num_nodes; i++) {
        FUZZ_CHECK(tree->nodes[i].num_children == nch[i]);
        FUZZ_CHECK(tree->nodes[i].num_hcas == hcas[i]);
        /* no branch without HCAs below it */
        FUZZ_CHECK(nch[i] > 0 || hcas[i] > 0);
    }
    free(nch);
}

/*
 * Builds a tree over up to FUZZ_MAX_HCAS CAs chosen by `pick` (the input's
 * hash, so the choice is part of the input), then prunes it to every other one.
 */
static void fuzz_trees(const aggmgr_topo_t *t, uint64_t pick)
{
    int ca_idx[FUZZ_MAX_HCAS], sel[FUZZ_MAX_HCAS];
    unsigned *load = NULL;
    aggmgr_tree_t tree, sub;
    agg_status_t st;
    int i, k, num = 0, nsel = 0, start;

    if (t->num_cas == 0) {
        return;
    }
    start = (int)(pick % (uint64_t)t->num_cas);
    for (k = 0; k < t->num_cas && num < FUZZ_MAX_HCAS; k++) {
        ca_idx[num++] = (start + k) % t->num_cas;
    }
    if (pick & (1ull << 40)) {
        load = calloc((size_t)t->num_nodes, sizeof(*load));
        FUZZ_CHECK(load != NULL);
        for (i = 0; i < t->num_nodes; i++) {
            load[i] = (unsigned)((pick >> (i % 32)) & 3);
        }
    }
    memset(&tree, 0, sizeof(tree));
    st = aggmgr_tree_build(t, ca_idx, num, load, &tree);
    free(load);
    if (st != AGG_OK) {
        /* only for a CA with no switch, or leaves no switch path joins */
        FUZZ_CHECK(st == AGG_ERR_NO_TREE);
        FUZZ_CHECK(tree.nodes == NULL);
        return;
    }
    for (i = 0; i < num; i++) {
        FUZZ_CHECK(tree.nodes[tree.hca_leaf[i]].topo_node == t->ca_switch[ca_idx[i]]);
    }
    fuzz_check_tree(t, &tree, num);

    for (i = 0; i < num; i++) {
        if ((pick >> (48 + i)) & 1) {
            sel[nsel++] = i;
        }
    }
    if (nsel == 0) {
        sel[nsel++] = num - 1;
    }
    memset(&sub, 0, sizeof(sub));
    FUZZ_CHECK(aggmgr_tree_prune(&tree, sel, nsel, &sub) == AGG_OK);
    fuzz_check_tree(t, &sub, nsel);
    for (i = 0; i < nsel; i++) {
        FUZZ_CHECK(sub.nodes[sub.hca_leaf[i]].topo_node ==
                   tree.nodes[tree.hca_leaf[sel[i]]].topo_node);
    }
    /* the root moved down as far as it can */
    FUZZ_CHECK(sub.nodes[0].num_children != 1 || sub.nodes[0].num_hcas > 0);
    aggmgr_tree_free(&sub);
    aggmgr_tree_free(&tree);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    aggmgr_topo_t topo;
    char err[512];
    uint64_t hash = 0xcbf29ce484222325ull;
    agg_status_t st;
    char *text;
    size_t i;

    text = malloc(size + 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    for (i = 0; i < size; i++) {
        hash = (hash ^ data[i]) * 0x100000001b3ull;
    }

    memset(&topo, 0, sizeof(topo));
    memset(err, 'x', sizeof(err));
    st = aggmgr_topo_parse(text, "fuzz", &topo, err, sizeof(err));
    free(text);
    if (st != AGG_OK) {
        FUZZ_CHECK(st == AGG_ERR_PARSE);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(topo.nodes == NULL); /* outputs are set only on success */
        return 0;
    }
    fuzz_check_topo(&topo);
    fuzz_round_trip(&topo);
    fuzz_trees(&topo, hash);
    aggmgr_topo_free(&topo);
    return 0;
}
