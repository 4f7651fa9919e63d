/*
 * The aggregation-node engine (dp/agg_dp_*.c) in one process: segment
 * layout and its checks, a node combining its children, multi-level trees,
 * duplicates, mismatches, forwards that find the parent busy, reproducible
 * order under shuffled arrivals, float16 combined in float32, and the SAT
 * lock on a host segment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "dp_test.h"

static void test_layout_and_check(void **state)
{
    uint32_t leaf[4] = {1, 1, 2, 2};
    dp_test_seg_t *t = dp_test_tree(2, leaf, 4, 8, 4096, 0);
    agg_dp_seg_t *s;
    uint8_t *copy;
    char why[256];
    size_t i;

    assert_non_null(t);
    s = t->view.seg;
    assert_int_equal(s->num_slots, 16);
    assert_int_equal(agg_dp_node(s, 0)->expected, 2);
    assert_int_equal(agg_dp_node(s, 1)->expected, 2);
    assert_int_equal(agg_dp_node(s, 2)->position, 1);
    assert_int_equal(agg_dp_member(s, 3)->position, 1);
    assert_int_equal(agg_dp_member(s, 2)->leaf_guid, 0x102);
    assert_true(s->slot_stride >= AGG_DP_SLOT_HDR + 2 * 4096);
    assert_int_equal(s->slot_stride % AGG_DP_LINE, 0);
    /* every slot and channel lies inside the segment */
    assert_true((uint8_t *)agg_dp_slot(s, agg_dp_node(s, 2), 16) + s->slot_stride <=
                (uint8_t *)s + s->total_size);
    assert_true((uint8_t *)agg_dp_stage(s, 3, 8) + s->stage_stride <=
                (uint8_t *)s + s->total_size);

    /* a copy with any of these fields broken is refused, never trusted */
    copy = malloc(t->view.size);
    static const size_t fields[] = {
        offsetof(agg_dp_seg_t, magic), offsetof(agg_dp_seg_t, version),
        offsetof(agg_dp_seg_t, num_nodes), offsetof(agg_dp_seg_t, window),
        offsetof(agg_dp_seg_t, num_slots), offsetof(agg_dp_seg_t, slot_stride),
        offsetof(agg_dp_seg_t, chan_stride), offsetof(agg_dp_seg_t, nodes_off),
        offsetof(agg_dp_seg_t, slots_off) /* not used by check: must not matter */,
        offsetof(agg_dp_seg_t, total_size), offsetof(agg_dp_seg_t, members_off),
    };
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); ++i) {
        memcpy(copy, s, t->view.size);
        *(uint32_t *)(copy + fields[i]) ^= 0x40000000u;
        if (fields[i] == offsetof(agg_dp_seg_t, slots_off)) {
            assert_int_equal(agg_dp_check(copy, t->view.size, why, sizeof(why)), AGG_OK);
        } else {
            assert_int_equal(agg_dp_check(copy, t->view.size, why, sizeof(why)),
                             AGG_ERR_GROUP_JOIN);
            assert_true(why[0] != '\0');
        }
    }
    /* a node slot array running past the end, a member pointing at no node */
    memcpy(copy, s, t->view.size);
    agg_dp_node((agg_dp_seg_t *)copy, 2)->slots_off = t->view.size - 64;
    assert_int_equal(agg_dp_check(copy, t->view.size, why, sizeof(why)), AGG_ERR_GROUP_JOIN);
    memcpy(copy, s, t->view.size);
    agg_dp_member((agg_dp_seg_t *)copy, 1)->leaf = 9;
    assert_int_equal(agg_dp_check(copy, t->view.size, why, sizeof(why)), AGG_ERR_GROUP_JOIN);
    memcpy(copy, s, t->view.size);
    agg_dp_node((agg_dp_seg_t *)copy, 1)->expected = 3; /* a child nobody will push */
    assert_int_equal(agg_dp_check(copy, t->view.size, why, sizeof(why)), AGG_OK);
    agg_dp_node((agg_dp_seg_t *)copy, 1)->expected = 1; /* more children than expected */
    assert_int_equal(agg_dp_check(copy, t->view.size, why, sizeof(why)), AGG_ERR_GROUP_JOIN);
    /* shorter than it says */
    assert_int_equal(agg_dp_check(s, t->view.size - 64, why, sizeof(why)), AGG_ERR_GROUP_JOIN);
    free(copy);
    dp_test_free(t);

    /* shapes that cannot work are refused with a reason */
    {
        uint32_t bad_leaf[1] = {5};
        agg_dp_node_desc_t nodes[2] = {{.parent = -1}, {.parent = 0, .up = AGG_DP_UP_LOCAL}};
        agg_dp_shape_t sh = {.window = 4, .payload = 64, .num_nodes = 2, .nodes = nodes,
                             .num_members = 1, .member_leaf = bad_leaf};
        agg_dp_seg_t L;

        assert_int_equal(agg_dp_layout(&sh, &L, why, sizeof(why)), 0);
        bad_leaf[0] = 0; /* node 1 then has no child */
        assert_int_equal(agg_dp_layout(&sh, &L, why, sizeof(why)), 0);
        assert_non_null(strstr(why, "no child"));
        bad_leaf[0] = 1;
        sh.payload  = 100; /* not a multiple of 8 */
        assert_int_equal(agg_dp_layout(&sh, &L, why, sizeof(why)), 0);
        sh.payload = 64;
        assert_true(agg_dp_layout(&sh, &L, why, sizeof(why)) > 0);
    }
}

/* int32 sum of members' (m + 1) * (i + 1), through a tree, one fragment at a time. */
static void run_sum(dp_test_seg_t *t, uint32_t members, uint64_t frags, uint32_t count,
                    const uint32_t *order)
{
    int32_t data[8][64], out[64];
    uint64_t n;
    uint32_t m, i;

    for (n = 1; n <= frags; ++n) {
        for (m = 0; m < members; ++m) {
            for (i = 0; i < count; ++i) {
                data[m][i] = (int32_t)((m + 1) * (i + 1) + n);
            }
        }
        for (m = 0; m < members; ++m) {
            uint32_t who = order ? order[(m + n) % members] : m;

            assert_null(agg_dp_result(t->view.seg, n));
            assert_int_equal(dp_test_push(t, who, n, AGG_DTYPE_INT32, AGG_OP_SUM, data[who],
                                          count), AGG_OK);
        }
        assert_non_null(agg_dp_result(t->view.seg, n));
        assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_OK);
        agg_dp_copy_out(agg_dp_result(t->view.seg, n), out);
        for (i = 0; i < count; ++i) {
            int32_t want = 0;
            for (m = 0; m < members; ++m) {
                want += (int32_t)((m + 1) * (i + 1) + n);
            }
            assert_int_equal(out[i], want);
        }
    }
}

static void test_single_node(void **state)
{
    uint32_t leaf[4] = {0, 0, 0, 0}, order[4] = {2, 0, 3, 1};
    dp_test_seg_t *t = dp_test_tree(0, leaf, 4, 4, 256, 0);

    assert_non_null(t);
    /* many more fragments than slots: slots are reused use after use */
    run_sum(t, 4, 100, 64, order);
    assert_int_equal(t->ctr.results_out, 100);
    assert_int_equal(t->ctr.reductions, 300);
    assert_int_equal(t->ctr.errors, 0);
    dp_test_free(t);
}

static void test_two_levels(void **state)
{
    uint32_t leaf[4] = {1, 2, 1, 2}, order[4] = {3, 1, 0, 2};
    dp_test_seg_t *t = dp_test_tree(2, leaf, 4, 2, 256, 0);

    assert_non_null(t);
    run_sum(t, 4, 40, 17, order);
    /* 2 per leaf, 1 at the root, per fragment */
    assert_int_equal(t->ctr.reductions, 40 * 3);
    dp_test_free(t);

    /* the same reproducibly, in every arrival order that fits the turns */
    t = dp_test_tree(2, leaf, 4, 2, 256, AGG_DP_F_REPRODUCIBLE);
    run_sum(t, 4, 8, 5, NULL);
    dp_test_free(t);
}

static void test_duplicates_and_mismatch(void **state)
{
    uint32_t leaf[3] = {0, 0, 0};
    dp_test_seg_t *t = dp_test_tree(0, leaf, 3, 4, 256, 0);
    int32_t a[4] = {1, 2, 3, 4}, out[4];
    int64_t b[4] = {1, 2, 3, 4};

    assert_non_null(t);
    /* a child pushing twice is counted once */
    assert_int_equal(dp_test_push(t, 0, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 0, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(t->ctr.duplicates, 1);
    assert_int_equal(dp_test_push(t, 1, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_null(agg_dp_result(t->view.seg, 1));
    assert_int_equal(dp_test_push(t, 2, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    agg_dp_copy_out(agg_dp_result(t->view.seg, 1), out);
    assert_int_equal(out[3], 12);
    /* a late copy of a completed fragment is ignored, the next use is clean */
    assert_int_equal(dp_test_push(t, 1, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(t->ctr.duplicates, 2);

    /* members disagreeing on the type: an error result, for everybody */
    assert_int_equal(dp_test_push(t, 0, 2, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 2, AGG_DTYPE_INT64, AGG_OP_SUM, b, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 2, 2, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(agg_dp_result(t->view.seg, 2)->status, AGG_ERR_DATA_MISMATCH);
    /* an op the type has no kernel for, a fragment larger than the payload */
    assert_int_equal(dp_test_push(t, 0, 3, AGG_DTYPE_FLOAT32, AGG_OP_BXOR, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 3, AGG_DTYPE_FLOAT32, AGG_OP_BXOR, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 2, 3, AGG_DTYPE_FLOAT32, AGG_OP_BXOR, a, 4), AGG_OK);
    assert_int_equal(agg_dp_result(t->view.seg, 3)->status, AGG_ERR_BAD_FRAGMENT);
    assert_int_equal(dp_test_push(t, 0, 4, AGG_DTYPE_INT32, AGG_OP_SUM, a, 65), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 4, AGG_DTYPE_INT32, AGG_OP_SUM, a, 65), AGG_OK);
    assert_int_equal(dp_test_push(t, 2, 4, AGG_DTYPE_INT32, AGG_OP_SUM, a, 65), AGG_OK);
    assert_int_equal(agg_dp_result(t->view.seg, 4)->status, AGG_ERR_BAD_FRAGMENT);
    assert_true(t->ctr.errors >= 3);
    /* and the group goes on: the next fragment is right */
    assert_int_equal(dp_test_push(t, 0, 5, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 5, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 2, 5, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(agg_dp_result(t->view.seg, 5)->status, AGG_OK);
    agg_dp_copy_out(agg_dp_result(t->view.seg, 5), out);
    assert_int_equal(out[0], 3);
    /* a copy older than what its slot holds (sent again over TCP, late on
       another lane): a duplicate, whether the slot has begun its fragment
       (9 uses fragment 1's slot: window 4, 8 slots) or not */
    assert_int_equal(dp_test_push(t, 0, 9, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 1, AGG_DTYPE_INT64, AGG_OP_SUM, b, 4), AGG_OK);
    assert_int_equal(t->ctr.duplicates, 3);
    assert_int_equal(dp_test_push(t, 1, 9, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 2, 9, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(agg_dp_result(t->view.seg, 9)->status, AGG_OK);
    agg_dp_copy_out(agg_dp_result(t->view.seg, 9), out);
    assert_int_equal(out[2], 9);
    assert_int_equal(dp_test_push(t, 2, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(t->ctr.duplicates, 4);
    /* a position past the node's children is refused outright */
    {
        agg_dp_contrib_t c = {.n = 6, .desc.count = 1, .desc.dtype = AGG_DTYPE_INT32, .data = a};
        assert_int_equal(agg_dp_push(&t->view, 0, 3, &c, &t->drv), AGG_ERR_INVALID_PARAM);
    }
    dp_test_free(t);
}

/* A leaf with one member: its fragment is read straight into the accumulator. */
static void test_claim(void **state)
{
    uint32_t leaf[3] = {1, 2, 2};
    dp_test_seg_t *t = dp_test_tree(2, leaf, 3, 2, 256, 0);
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out[4];
    agg_dp_contrib_t c = {.n = 1, .status = AGG_OK,
                          .desc = {.count = 4, .op = AGG_OP_SUM, .dtype = AGG_DTYPE_INT32,
                                   .kind = AGG_DP_KIND_DATA}};
    int32_t *acc;
    int i;

    assert_non_null(t);
    acc = agg_dp_claim(&t->view, 1, &c);
    assert_non_null(acc);
    /* claimed: nobody else gets in meanwhile */
    assert_null(agg_dp_claim(&t->view, 1, &c));
    assert_int_equal(dp_test_push(t, 0, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_INPROGRESS);
    memcpy(acc, a, sizeof(a));
    assert_int_equal(agg_dp_push_claimed(&t->view, 1, &c, &t->drv), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 1, AGG_DTYPE_INT32, AGG_OP_SUM, b, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 2, 1, AGG_DTYPE_INT32, AGG_OP_SUM, b, 4), AGG_OK);
    assert_non_null(agg_dp_result(t->view.seg, 1));
    agg_dp_copy_out(agg_dp_result(t->view.seg, 1), out);
    for (i = 0; i < 4; ++i) {
        assert_int_equal(out[i], a[i] + 2 * b[i]);
    }
    /* one reduction at leaf 2, one at the root, none at the one-member leaf */
    assert_int_equal(t->ctr.reductions, 2);
    /* a late copy of it: not claimed, and agg_dp_push drops it */
    assert_null(agg_dp_claim(&t->view, 1, &c));
    assert_int_equal(dp_test_push(t, 0, 1, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(t->ctr.duplicates, 1);

    /* given back unfilled: the fragment then goes the usual way, whatever the claim left */
    c.n = 2;
    acc = agg_dp_claim(&t->view, 1, &c);
    assert_non_null(acc);
    memset(acc, 0x5a, sizeof(a));
    agg_dp_unclaim(&t->view, 1, 2);
    assert_int_equal(dp_test_push(t, 0, 2, AGG_DTYPE_INT32, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 2, AGG_DTYPE_INT32, AGG_OP_SUM, b, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 2, 2, AGG_DTYPE_INT32, AGG_OP_SUM, b, 4), AGG_OK);
    agg_dp_copy_out(agg_dp_result(t->view.seg, 2), out);
    assert_int_equal(out[3], a[3] + 2 * b[3]);

    /* what cannot go straight in: a leaf of two, a type accumulated wider, a
       part of an allgather, an empty or failed contribution, a lock request */
    c.n = 3;
    assert_null(agg_dp_claim(&t->view, 2, &c));
    c.desc.dtype = AGG_DTYPE_FLOAT16;
    assert_null(agg_dp_claim(&t->view, 1, &c));
    c.desc.dtype = AGG_DTYPE_INT32;
    c.desc.coll  = AGG_DP_COLL_ALLGATHER;
    assert_null(agg_dp_claim(&t->view, 1, &c));
    c.desc.coll  = AGG_DP_COLL_ALLREDUCE;
    c.empty = 1;
    assert_null(agg_dp_claim(&t->view, 1, &c));
    c.empty  = 0;
    c.status = AGG_ERR_TIMEOUT;
    assert_null(agg_dp_claim(&t->view, 1, &c));
    c.status = AGG_OK;
    c.desc.kind   = AGG_DP_KIND_UNLOCK;
    assert_null(agg_dp_claim(&t->view, 1, &c));
    /* ...and agg_dp_push takes no contribution that says it is in place */
    c.desc.kind     = AGG_DP_KIND_DATA;
    c.in_place = 1;
    c.data     = a;
    assert_int_equal(agg_dp_push(&t->view, 1, 0, &c, &t->drv), AGG_ERR_INVALID_PARAM);
    assert_int_equal(t->ctr.errors, 0);
    dp_test_free(t);
}

static void test_busy_parent(void **state)
{
    uint32_t leaf[2] = {1, 1};
    dp_test_seg_t *t = dp_test_tree(1, leaf, 2, 2, 64, 0);
    agg_dp_seg_t *s;
    agg_dp_slot_t *root;
    int32_t a = 5, out = 0;

    assert_non_null(t);
    s = t->view.seg;
    /* the root's slot is busy (another pusher holds it) when the leaf completes */
    root = agg_dp_slot(s, agg_dp_node(s, 0), 1);
    root->state = AGG_DP_SLOT_LOCKED;
    assert_int_equal(dp_test_push(t, 0, 1, AGG_DTYPE_INT32, AGG_OP_SUM, &a, 1), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 1, AGG_DTYPE_INT32, AGG_OP_SUM, &a, 1), AGG_OK);
    assert_null(agg_dp_result(s, 1));
    assert_int_equal(agg_dp_slot(s, agg_dp_node(s, 1), 1)->flags & AGG_DP_SLOT_PENDING,
                     AGG_DP_SLOT_PENDING);
    assert_int_equal(agg_dp_progress(&t->view, &t->drv), 0); /* still busy */
    /* the pusher lets go: the next progress call moves the leaf on */
    root->state = 0;
    assert_int_equal(agg_dp_progress(&t->view, &t->drv), 1);
    assert_non_null(agg_dp_result(s, 1));
    agg_dp_copy_out(agg_dp_result(s, 1), &out);
    assert_int_equal(out, 10);
    /* nothing pending: progress costs one load */
    assert_int_equal(agg_dp_progress(&t->view, &t->drv), 0);
    dp_test_free(t);
}

/*
 * Another driver scans while a pusher holds a slot it is completing: the
 * pusher marks the slot pending and bumps work_gen before it lets go, with
 * the slot's count still one short. The scan must not count that generation
 * as handled, or nobody moves the slot on (a hang seen once in many runs of
 * test_dp_procs' port test).
 */
static void test_progress_during_completion(void **state)
{
    uint32_t leaf[2] = {1, 1};
    dp_test_seg_t *t = dp_test_tree(1, leaf, 2, 2, 64, 0);
    agg_dp_driver_t other = {.ctr = &t->ctr};
    agg_dp_seg_t *s;
    agg_dp_slot_t *root, *slot;
    int32_t a = 5, out = 0;

    assert_non_null(t);
    s    = t->view.seg;
    root = agg_dp_slot(s, agg_dp_node(s, 0), 1);
    slot = agg_dp_slot(s, agg_dp_node(s, 1), 1);
    assert_int_equal(dp_test_push(t, 0, 1, AGG_DTYPE_INT32, AGG_OP_SUM, &a, 1), AGG_OK);
    /* member 1's push, by hand, up to the moment before it unlocks: combined,
       the parent found busy, the slot marked and work_gen bumped */
    root->state = AGG_DP_SLOT_LOCKED;
    slot->state = 1 | AGG_DP_SLOT_LOCKED;
    *(int32_t *)agg_dp_acc(slot) += a;
    slot->seen |= 2;
    slot->flags |= AGG_DP_SLOT_PENDING;
    __atomic_fetch_add(&s->work_gen, 1, __ATOMIC_SEQ_CST);
    /* the other driver scans now */
    assert_int_equal(agg_dp_progress(&t->view, &other), 0);
    /* the pusher unlocks (its own retry finds the parent still busy), then
       the parent is let go */
    slot->state = 2;
    root->state = 0;
    assert_int_equal(agg_dp_progress(&t->view, &other), 1);
    assert_non_null(agg_dp_result(s, 1));
    agg_dp_copy_out(agg_dp_result(s, 1), &out);
    assert_int_equal(out, 10);
    dp_test_free(t);
}

/* Sums that depend on the order: 1e8 + 1 - 1e8 ... in float32. */
static float combine_in_order(const uint32_t *perm, uint32_t flags, const float *vals)
{
    uint32_t leaf[6] = {0, 0, 0, 0, 0, 0}, k;
    dp_test_seg_t *t = dp_test_tree(0, leaf, 6, 1, 64, (uint8_t)flags);
    agg_status_t st;
    float out = 0;
    int left = 6, guard = 0;
    int pushed[6] = {0};

    assert_non_null(t);
    /* members arrive in perm order; one whose turn has not come tries again later */
    while (left > 0 && guard++ < 100) {
        for (k = 0; k < 6; ++k) {
            uint32_t m = perm[k];
            if (pushed[m]) {
                continue;
            }
            st = dp_test_push(t, m, 1, AGG_DTYPE_FLOAT32, AGG_OP_SUM, &vals[m], 1);
            assert_true(st == AGG_OK || st == AGG_INPROGRESS);
            if (st == AGG_OK) {
                pushed[m] = 1;
                left--;
                if (!(flags & AGG_DP_F_REPRODUCIBLE)) {
                    continue;
                }
                break; /* in turn mode, the others come again after this one */
            }
        }
    }
    assert_int_equal(left, 0);
    agg_dp_copy_out(agg_dp_result(t->view.seg, 1), &out);
    dp_test_free(t);
    return out;
}

static void test_reproducible_order(void **state)
{
    const float vals[6] = {1e8f, 1.0f, -1e8f, 3.0f, 0.5f, -7.25f};
    uint32_t perm[6] = {0, 1, 2, 3, 4, 5};
    uint32_t bits_first = 0, bits, i, j, differ = 0;
    float r;
    unsigned seed = 12345;

    for (i = 0; i < 200; ++i) {
        /* shuffle the arrival order */
        for (j = 5; j > 0; --j) {
            uint32_t k = (uint32_t)(rand_r(&seed) % (j + 1)), tmp = perm[j];
            perm[j] = perm[k];
            perm[k] = tmp;
        }
        r = combine_in_order(perm, AGG_DP_F_REPRODUCIBLE, vals);
        memcpy(&bits, &r, sizeof(bits));
        if (i == 0) {
            bits_first = bits;
        }
        assert_int_equal(bits, bits_first);
        /* the same arrivals without the mode: the order shows in the bits */
        r = combine_in_order(perm, 0, vals);
        memcpy(&bits, &r, sizeof(bits));
        differ += bits != bits_first;
    }
    /* fixed order is position order: ((((1e8 + 1) - 1e8) + 3) + 0.5) - 7.25 */
    r = ((((1e8f + 1.0f) - 1e8f) + 3.0f) + 0.5f) - 7.25f;
    memcpy(&bits, &r, sizeof(bits));
    assert_int_equal(bits_first, bits);
    assert_true(differ > 0);
}

static void test_half_in_float(void **state)
{
    uint32_t leaf[2] = {0, 0};
    dp_test_seg_t *t = dp_test_tree(0, leaf, 2, 1, 64, 0);
    uint16_t a[4], b[4], out[4];
    int i;

    assert_non_null(t);
    /* 2048 + 1 is not a float16 (spacing 2 there); 2048 + 1 + 1 = 2050 is */
    for (i = 0; i < 4; ++i) {
        a[i] = agg_float_to_half(2048.0f);
        b[i] = agg_float_to_half(1.0f);
    }
    assert_int_equal(dp_test_push(t, 0, 1, AGG_DTYPE_FLOAT16, AGG_OP_SUM, a, 4), AGG_OK);
    assert_int_equal(dp_test_push(t, 1, 1, AGG_DTYPE_FLOAT16, AGG_OP_SUM, b, 4), AGG_OK);
    agg_dp_copy_out(agg_dp_result(t->view.seg, 1), out);
    /* the accumulator kept 2049 exactly; rounding once, to even, gives 2048 */
    assert_true(agg_half_to_float(out[0]) == 2048.0f);
    {
        float *acc = agg_dp_acc(agg_dp_result(t->view.seg, 1));
        assert_true(acc[3] == 2049.0f);
    }
    dp_test_free(t);
}

static void test_sat_lock(void **state)
{
    uint32_t leaf[2] = {1, 1};
    dp_test_seg_t *g1 = dp_test_tree(1, leaf, 2, 2, 64, 0);
    dp_test_seg_t *g2 = dp_test_tree(1, leaf, 2, 2, 64, 0);
    agg_dp_host_t *host = dp_test_shared(agg_dp_host_size(4));
    agg_dp_contrib_t c = {.desc.kind = AGG_DP_KIND_LOCK};
    char why[128];
    uint32_t m;

    assert_non_null(g1);
    assert_non_null(g2);
    host->magic   = AGG_DP_HOST_MAGIC;
    host->version = AGG_DP_VERSION;
    host->num_ans = 4;
    assert_int_equal(agg_dp_host_check(host, agg_dp_host_size(4), why, sizeof(why)), AGG_OK);
    g1->view.host = host;
    g2->view.host = host;
    g1->view.seg->tree     = AGG_TREE_SAT; /* only SAT groups have a lock to ask for */
    g2->view.seg->tree     = AGG_TREE_SAT;
    g2->view.seg->group_id = 8;

#define LOCKOP(_t, _n, _kind)                                                       \
    do {                                                                            \
        c.n    = (_n);                                                              \
        c.desc.kind = (_kind);                                                           \
        for (m = 0; m < 2; ++m) {                                                   \
            assert_int_equal(agg_dp_push(&(_t)->view, 1, m, &c, &(_t)->drv), AGG_OK); \
        }                                                                           \
    } while (0)

    LOCKOP(g1, 1, AGG_DP_KIND_LOCK);
    assert_int_equal(agg_dp_result(g1->view.seg, 1)->status, AGG_OK);
    assert_int_equal(agg_dp_host_an(host, 0)->sat_lock, 7);
    assert_int_equal(agg_dp_host_an(host, 1)->sat_lock, 7);
    /* the other group is refused on the same switches, and holds nothing after */
    LOCKOP(g2, 1, AGG_DP_KIND_LOCK);
    assert_int_equal(agg_dp_result(g2->view.seg, 1)->status, AGG_ERR_SAT_LOCK_BUSY);
    assert_int_equal(agg_dp_host_an(host, 0)->sat_lock, 7);
    assert_int_equal(g2->ctr.locks_busy, 1);
    /* taking it again while holding it is fine */
    LOCKOP(g1, 2, AGG_DP_KIND_LOCK);
    assert_int_equal(agg_dp_result(g1->view.seg, 2)->status, AGG_OK);
    LOCKOP(g1, 3, AGG_DP_KIND_UNLOCK);
    assert_int_equal(agg_dp_host_an(host, 0)->sat_lock, 0);
    assert_int_equal(agg_dp_host_an(host, 1)->sat_lock, 0);
    LOCKOP(g2, 2, AGG_DP_KIND_LOCK);
    assert_int_equal(agg_dp_result(g2->view.seg, 2)->status, AGG_OK);
    assert_int_equal(agg_dp_host_an(host, 1)->sat_lock, 8);
    /* a partial grab is rolled back: switch 1 taken by someone else */
    LOCKOP(g2, 3, AGG_DP_KIND_UNLOCK);
    agg_dp_host_an(host, 1)->sat_lock = 99;
    LOCKOP(g1, 4, AGG_DP_KIND_LOCK);
    assert_int_equal(agg_dp_result(g1->view.seg, 4)->status, AGG_ERR_SAT_LOCK_BUSY);
    assert_int_equal(agg_dp_host_an(host, 0)->sat_lock, 0);
#undef LOCKOP
    /* an LLT group asking for the lock gets a malformed-fragment error */
    g1->view.seg->tree = AGG_TREE_LLT;
    c.n    = 5;
    c.desc.kind = AGG_DP_KIND_LOCK;
    for (m = 0; m < 2; ++m) {
        assert_int_equal(agg_dp_push(&g1->view, 1, m, &c, &g1->drv), AGG_OK);
    }
    assert_int_equal(agg_dp_result(g1->view.seg, 5)->status, AGG_ERR_BAD_FRAGMENT);
    assert_int_equal(agg_dp_host_an(host, 0)->sat_lock, 0);
    munmap(host, agg_dp_host_size(4));
    dp_test_free(g1);
    dp_test_free(g2);
}

static void test_many_children_bitmap(void **state)
{
    uint32_t leaf[100], m;
    dp_test_seg_t *t;
    int32_t one = 1, out = 0;

    for (m = 0; m < 100; ++m) {
        leaf[m] = 0;
    }
    t = dp_test_tree(0, leaf, 100, 2, 64, 0);
    assert_non_null(t);
    assert_int_equal(agg_dp_node(t->view.seg, 0)->bitmap_words, 2);
    for (int n = 1; n <= 6; ++n) {
        for (m = 0; m < 100; ++m) {
            assert_int_equal(dp_test_push(t, m, (uint64_t)n, AGG_DTYPE_INT32, AGG_OP_SUM, &one,
                                          1), AGG_OK);
            /* member 77 twice: ignored */
            if (m == 77) {
                assert_int_equal(dp_test_push(t, m, (uint64_t)n, AGG_DTYPE_INT32, AGG_OP_SUM,
                                              &one, 1), AGG_OK);
            }
        }
        agg_dp_copy_out(agg_dp_result(t->view.seg, (uint64_t)n), &out);
        assert_int_equal(out, 100);
    }
    assert_int_equal(t->ctr.duplicates, 6);
    dp_test_free(t);
}

/*
 * A tree over three segments in one process: root segment A with two child
 * segments B and C joined by ports. A late copy of a fragment that B's top
 * already forwarded (before the result came down) is a duplicate, not the
 * start of a new fragment.
 */
static dp_test_seg_t *port_seg(agg_dp_node_desc_t *nd, uint32_t members,
                               const uint32_t *leaf, agg_dp_port_t *ports, uint32_t np)
{
    agg_dp_shape_t sh = {.group_id = 9, .tree = AGG_TREE_LLT, .window = 1, .payload = 64,
                         .num_nodes = 1, .nodes = nd, .num_members = members,
                         .member_leaf = leaf, .num_ports = np, .ports = ports};

    return dp_test_build(&sh);
}

static void test_ports_late_duplicate(void **state)
{
    uint32_t leaf[2] = {0, 0};
    agg_dp_port_t pa[2] = {{.node = 0}, {.node = 0}}, pb = {.node = 0, .position = 0},
                  pc = {.node = 0, .position = 1};
    agg_dp_node_desc_t na = {.guid = 0xa0, .parent = -1, .up = AGG_DP_UP_ROOT, .extra = 2,
                             .num_down = 2};
    agg_dp_node_desc_t nb = {.guid = 0xb0, .parent = -1, .up = AGG_DP_UP_SHM};
    dp_test_seg_t *a = port_seg(&na, 0, leaf, pa, 2), *b = port_seg(&nb, 2, leaf, &pb, 1),
                  *c = port_seg(&nb, 1, leaf, &pc, 1);
    agg_dp_view_t *peers_a[2], *peers_b[1], *peers_c[1];
    int32_t x[4] = {1, 2, 3, 4}, out[4];
    uint64_t n;

    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    peers_a[0] = &b->view;
    peers_a[1] = &c->view;
    peers_b[0] = peers_c[0] = &a->view;
    a->view.peers = peers_a;
    b->view.peers = peers_b;
    c->view.peers = peers_c;
    for (n = 1; n <= 5; n += 2) {
        assert_int_equal(dp_test_push(b, 0, n, AGG_DTYPE_INT32, AGG_OP_SUM, x, 4), AGG_OK);
        assert_int_equal(dp_test_push(b, 1, n, AGG_DTYPE_INT32, AGG_OP_SUM, x, 4), AGG_OK);
        if (n == 1) {
            /* B's top forwarded fragment 1; the result has not come down yet */
            assert_null(agg_dp_result(b->view.seg, 1));
            assert_int_equal(dp_test_push(b, 0, 1, AGG_DTYPE_INT32, AGG_OP_SUM, x, 4), AGG_OK);
            assert_int_equal(b->ctr.duplicates, 1);
        }
        assert_int_equal(dp_test_push(c, 0, n, AGG_DTYPE_INT32, AGG_OP_SUM, x, 4), AGG_OK);
        /* the result came down into both child segments */
        assert_non_null(agg_dp_result(b->view.seg, n));
        assert_non_null(agg_dp_result(c->view.seg, n));
        agg_dp_copy_out(agg_dp_result(b->view.seg, n), out);
        assert_int_equal(out[0], 3);
        assert_int_equal(out[3], 12);
    }
    dp_test_free(a);
    dp_test_free(b);
    dp_test_free(c);
}

/* One member's contribution to a collective other than allreduce. */
static agg_status_t push_coll(dp_test_seg_t *t, uint32_t m, uint64_t n, uint8_t coll,
                              uint32_t root, const int32_t *data, uint32_t count, int empty,
                              uint32_t off, uint32_t len)
{
    const agg_dp_member_t *mem = agg_dp_member(t->view.seg, m);
    agg_dp_contrib_t c = {.n = n, .desc.count = count, .desc.op = AGG_OP_BOR,
                          .desc.dtype = AGG_DTYPE_INT32, .desc.kind = AGG_DP_KIND_DATA,
                          .desc.coll = coll, .desc.root = root, .empty = (uint8_t)empty,
                          .off = off, .len = len, .data = empty ? NULL : data};

    return agg_dp_push(&t->view, mem->leaf, mem->position, &c, &t->drv);
}

/*
 * Bcast: only the root adds data, and every member reads it, whichever
 * member arrives first; allgather: each member's block lands at its place,
 * also when a whole leaf's members add nothing to a fragment; a barrier is
 * an empty fragment; members that disagree on the collective or the root, or
 * a block outside the fragment, fail the fragment.
 */
static void test_collectives(void **state)
{
    uint32_t leaf[5] = {1, 1, 2, 2, 2};
    dp_test_seg_t *t = dp_test_tree(2, leaf, 5, 8, 4096, 0);
    int32_t data[5][15], out[15];
    uint64_t n = 0;
    uint32_t m, i, root, first;

    assert_non_null(t);
    for (m = 0; m < 5; ++m) {
        for (i = 0; i < 15; ++i) {
            data[m][i] = (int32_t)(m * 100 + i + 1);
        }
    }
    /* bcast from each root, each member arriving first in turn */
    for (root = 0; root < 5; ++root) {
        for (first = 0; first < 5; ++first) {
            ++n;
            for (i = 0; i < 5; ++i) {
                m = (first + i) % 5;
                assert_int_equal(push_coll(t, m, n, AGG_DP_COLL_BCAST, root, data[m], 15,
                                           m != root, 0, 0), AGG_OK);
            }
            assert_non_null(agg_dp_result(t->view.seg, n));
            assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_OK);
            agg_dp_copy_out(agg_dp_result(t->view.seg, n), out);
            assert_memory_equal(out, data[root], sizeof(out));
        }
    }
    /* allgather: 3 elements per member, in two fragments (9 + 6) */
    for (first = 0; first < 5; ++first) {
        uint32_t frag_lo[2] = {0, 9}, frag_n[2] = {9, 6}, f;

        for (f = 0; f < 2; ++f) {
            ++n;
            for (i = 0; i < 5; ++i) {
                uint32_t lo, hi;

                m  = (first + i) % 5;
                lo = m * 3 > frag_lo[f] ? m * 3 : frag_lo[f];
                hi = m * 3 + 3 < frag_lo[f] + frag_n[f] ? m * 3 + 3 : frag_lo[f] + frag_n[f];
                assert_int_equal(push_coll(t, m, n, AGG_DP_COLL_ALLGATHER, 0,
                                           &data[m][lo - m * 3], frag_n[f], lo >= hi,
                                           lo - frag_lo[f], hi > lo ? hi - lo : 0), AGG_OK);
            }
            assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_OK);
            agg_dp_copy_out(agg_dp_result(t->view.seg, n), out + frag_lo[f]);
        }
        for (i = 0; i < 15; ++i) {
            assert_int_equal(out[i], data[i / 3][i % 3]);
        }
    }
    /* a part of the result only (reduce-scatter's block, a reduce's root) */
    agg_dp_copy_out_part(agg_dp_result(t->view.seg, n), 2, 3, out);
    assert_int_equal(out[0], data[3 + 2 / 3][(9 + 2) % 3]);
    /* barrier: empty fragments of no elements */
    ++n;
    for (m = 0; m < 5; ++m) {
        assert_null(agg_dp_result(t->view.seg, n));
        assert_int_equal(push_coll(t, m, n, AGG_DP_COLL_BARRIER, 0, NULL, 0, 1, 0, 0),
                         AGG_OK);
    }
    assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_OK);
    /* a member with another root, another collective, a block past the end */
    ++n;
    for (m = 0; m < 5; ++m) {
        push_coll(t, m, n, AGG_DP_COLL_BCAST, m == 4 ? 1 : 0, data[m], 15, m != 0, 0, 0);
    }
    assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_ERR_DATA_MISMATCH);
    ++n;
    for (m = 0; m < 5; ++m) {
        push_coll(t, m, n, m == 2 ? AGG_DP_COLL_ALLREDUCE : AGG_DP_COLL_REDUCE, 0, data[m],
                  15, 0, 0, 15);
    }
    assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_ERR_DATA_MISMATCH);
    /* a member whose whole collective is longer (the same fragment otherwise) */
    ++n;
    for (m = 0; m < 5; ++m) {
        const agg_dp_member_t *mem = agg_dp_member(t->view.seg, m);
        agg_dp_contrib_t c = {.n = n, .data = data[m],
                              .desc = {.count = 15, .op = AGG_OP_SUM, .dtype = AGG_DTYPE_INT32,
                                       .kind = AGG_DP_KIND_DATA, .total = m == 3 ? 31 : 30}};

        agg_dp_push(&t->view, mem->leaf, mem->position, &c, &t->drv);
    }
    assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_ERR_DATA_MISMATCH);
    ++n;
    for (m = 0; m < 5; ++m) {
        push_coll(t, m, n, AGG_DP_COLL_ALLGATHER, 0, data[m], 6, 0, m == 1 ? 4 : 0, 3);
    }
    assert_int_equal(agg_dp_result(t->view.seg, n)->status, AGG_ERR_BAD_FRAGMENT);
    dp_test_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_and_check),
        cmocka_unit_test(test_single_node),
        cmocka_unit_test(test_two_levels),
        cmocka_unit_test(test_duplicates_and_mismatch),
        cmocka_unit_test(test_claim),
        cmocka_unit_test(test_busy_parent),
        cmocka_unit_test(test_reproducible_order),
        cmocka_unit_test(test_half_in_float),
        cmocka_unit_test(test_sat_lock),
        cmocka_unit_test(test_many_children_bitmap),
        cmocka_unit_test(test_ports_late_duplicate),
        cmocka_unit_test(test_progress_during_completion),
        cmocka_unit_test(test_collectives),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
