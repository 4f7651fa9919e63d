/*
 * What the data-path engine tests share: segments built in shared anonymous
 * memory (so forked processes see the same bytes, as ranks and switchsim do
 * through /dev/shm), drivers, and a member's side of pushing and reading.
 */
#ifndef DP_TEST_H
#define DP_TEST_H

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "agg/dp.h"
#include "agg/reduce.h"

typedef struct dp_test_seg {
    agg_dp_view_t     view;
    agg_dp_counters_t ctr;
    agg_dp_driver_t   drv;
    uint8_t           scratch[4096];
} dp_test_seg_t;

static inline void *dp_test_shared(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

/* Builds a segment for the shape in shared memory; NULL if the shape is refused. */
static inline dp_test_seg_t *dp_test_build(const agg_dp_shape_t *shape)
{
    agg_dp_seg_t layout;
    char why[256];
    size_t size = agg_dp_layout(shape, &layout, why, sizeof(why));
    dp_test_seg_t *t;

    if (size == 0) {
        return NULL;
    }
    t = calloc(1, sizeof(*t));
    t->view.seg  = dp_test_shared(size);
    t->view.size = size;
    if (t->view.seg == NULL || agg_dp_init(t->view.seg, size, shape) != AGG_OK ||
        agg_dp_check(t->view.seg, size, why, sizeof(why)) != AGG_OK) {
        free(t);
        return NULL;
    }
    t->drv.ctr          = &t->ctr;
    t->drv.scratch      = t->scratch;
    t->drv.scratch_size = sizeof(t->scratch);
    return t;
}

static inline void dp_test_free(dp_test_seg_t *t)
{
    if (t != NULL) {
        munmap(t->view.seg, t->view.size);
        free(t);
    }
}

/* A one-level or two-level tree: node 0 root, nodes 1..leaves under it. */
static inline dp_test_seg_t *dp_test_tree(uint32_t leaves, const uint32_t *member_leaf,
                                          uint32_t members, uint32_t window,
                                          uint32_t payload, uint8_t flags)
{
    agg_dp_node_desc_t nodes[16] = {{0}};
    agg_dp_shape_t sh = {.group_id = 7, .tree = AGG_TREE_LLT, .flags = flags,
                         .window = window, .payload = payload, .num_nodes = 1 + leaves,
                         .nodes = nodes, .num_members = members, .member_leaf = member_leaf};
    uint32_t i;

    nodes[0] = (agg_dp_node_desc_t){.guid = 0x100, .parent = -1, .up = AGG_DP_UP_ROOT};
    for (i = 1; i <= leaves; ++i) {
        nodes[i] = (agg_dp_node_desc_t){.guid = 0x100 + i, .parent = 0, .an = i,
                                        .up = AGG_DP_UP_LOCAL};
    }
    return dp_test_build(&sh);
}

/* Member m pushes its own fragment n (count elements at data) into its leaf. */
static inline agg_status_t dp_test_push(dp_test_seg_t *t, uint32_t m, uint64_t n, int dtype,
                                        int op, const void *data, uint32_t count)
{
    const agg_dp_member_t *mem = agg_dp_member(t->view.seg, m);
    agg_dp_contrib_t c = {.n = n, .status = AGG_OK, .data = data,
                          .desc = {.count = count, .op = (uint8_t)op, .dtype = (uint8_t)dtype,
                                   .kind = AGG_DP_KIND_DATA}};

    return agg_dp_push(&t->view, mem->leaf, mem->position, &c, &t->drv);
}

#endif
