/*
 * switchsim's group and data-path code on real shared memory: a group is
 * configured as aggmgr would, members post fragments into their channels
 * the way libagg does, and the data path reduces them up a multi-level tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "agg/shm.h"
#include "switchsim.h"

static switchsim_t sim;
static agg_wire_switch_t switches[4] = {
    {.guid = 0x10}, {.guid = 0x20}, {.guid = 0x30}, {.guid = 0x40},
};

static int setup(void **state)
{
    memset(&sim, 0, sizeof(sim));
    agg_conf_init(&sim.conf);
    pthread_mutex_init(&sim.lock, NULL);
    snprintf(sim.bell_name, sizeof(sim.bell_name), "/agg-test-%d-bell", (int)getpid());
    agg_shm_unlink(sim.bell_name);
    assert_int_equal(agg_shm_create(sim.bell_name, sizeof(agg_shm_bell_t), (void **)&sim.bell),
                     AGG_OK);
    sim.switches     = switches;
    sim.num_switches = 4;
    sim.spin_count   = 1;
    return 0;
}

static int teardown(void **state)
{
    switchsim_group_destroy_all(&sim);
    agg_shm_detach(sim.bell, sizeof(agg_shm_bell_t));
    agg_shm_unlink(sim.bell_name);
    pthread_mutex_destroy(&sim.lock);
    return 0;
}

/* Root 0x10 with two leaves 0x20 (members 0, 1) and 0x30 (member 2, 3). */
static switchsim_group_t *make_group(uint32_t id, uint32_t osts, uint32_t payload)
{
    agg_msg_group_config_t cfg = {.group_id = id, .job_id = 1, .num_members = 4,
                                  .num_nodes = 3, .osts = osts, .payload_per_ost = payload};
    agg_wire_tree_node_t nodes[3] = {{0x10, -1, 0}, {0x20, 0, 0}, {0x30, 0, 0}};
    agg_wire_member_t members[4] = {{1}, {1}, {2}, {2}};
    switchsim_group_t *g = NULL;

    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g), AGG_OK);
    assert_non_null(g);
    return g;
}

static agg_frag_hdr_t *send_slot(switchsim_group_t *g, uint32_t m, uint32_t seq)
{
    agg_shm_group_t *shm = g->shm;

    return (agg_frag_hdr_t *)((uint8_t *)shm + shm->channels_offset +
                              (size_t)m * shm->channel_stride + sizeof(agg_shm_channel_t) +
                              (size_t)((seq - 1) % shm->osts) * shm->slot_stride);
}

static agg_frag_hdr_t *result_slot(switchsim_group_t *g, uint32_t seq)
{
    return (agg_frag_hdr_t *)((uint8_t *)g->shm + g->shm->results_offset +
                              (size_t)((seq - 1) % g->shm->osts) * g->shm->slot_stride);
}

static void post(switchsim_group_t *g, uint32_t m, uint32_t seq, int op, int dtype,
                 const void *data, uint32_t count)
{
    agg_frag_hdr_t *h = send_slot(g, m, seq);
    agg_shm_channel_t *ch = (agg_shm_channel_t *)((uint8_t *)g->shm + g->shm->channels_offset +
                                                  (size_t)m * g->shm->channel_stride);

    memcpy((uint8_t *)h + AGG_FRAG_HDR_SIZE, data, count * agg_dtype_size(dtype));
    h->op    = (uint16_t)op;
    h->dtype = (uint8_t)dtype;
    h->count = count;
    __atomic_store_n(&h->seq, seq, __ATOMIC_RELEASE);
    __atomic_store_n(&ch->posted, ch->posted + 1, __ATOMIC_RELEASE);
}

static void test_two_level_sum(void **state)
{
    switchsim_group_t *g = make_group(1, 4, 256);
    int32_t data[64], *res;
    uint32_t m, seq, i;

    assert_int_equal(g->nodes[0].expected, 2);
    assert_int_equal(g->nodes[1].expected, 2);
    /* every member can read which node its fragments enter */
    for (m = 0; m < 4; ++m) {
        agg_shm_channel_t *ch = (agg_shm_channel_t *)((uint8_t *)g->shm +
                                g->shm->channels_offset + (size_t)m * g->shm->channel_stride);
        assert_int_equal(ch->leaf_guid, m < 2 ? 0x20 : 0x30);
    }
    for (seq = 1; seq <= 10; ++seq) { /* more than osts: slots are reused */
        for (m = 0; m < 4; ++m) {
            for (i = 0; i < 64; ++i) {
                data[i] = (int32_t)((m + 1) * 1000 + i + seq);
            }
            post(g, m, seq, AGG_OP_SUM, AGG_DTYPE_INT32, data, 64);
            if (m < 3) {
                switchsim_dp_progress(&sim);
                /* no result until the last member has contributed */
                assert_int_not_equal(result_slot(g, seq)->seq, seq);
            }
        }
        assert_int_equal(switchsim_dp_progress(&sim), 1);
        assert_int_equal(result_slot(g, seq)->seq, seq);
        assert_int_equal(result_slot(g, seq)->status, AGG_OK);
        assert_int_equal(result_slot(g, seq)->count, 64);
        res = (int32_t *)((uint8_t *)result_slot(g, seq) + AGG_FRAG_HDR_SIZE);
        for (i = 0; i < 64; ++i) {
            assert_int_equal(res[i], 10000 + 4 * (int32_t)(i + seq));
        }
    }
    assert_int_equal(sim.stats.fragments_in, 40);
    assert_int_equal(sim.stats.results_out, 10);
    /* each leaf reduces 1 pair, the root 1 pair: 3 reductions per fragment */
    assert_int_equal(sim.stats.fragments_reduced, 30);
    assert_int_equal(switchsim_group_destroy(&sim, 1), AGG_OK);
}

static void test_mismatch_reported_to_all(void **state)
{
    switchsim_group_t *g = make_group(2, 2, 128);
    double d[4] = {1, 2, 3, 4};
    uint32_t m;

    for (m = 0; m < 4; ++m) {
        /* member 3 disagrees on the operation */
        post(g, m, 1, m == 3 ? AGG_OP_MAX : AGG_OP_SUM, AGG_DTYPE_FLOAT64, d, 4);
    }
    switchsim_dp_progress(&sim);
    assert_int_equal(result_slot(g, 1)->seq, 1);
    assert_int_equal(result_slot(g, 1)->status, AGG_ERR_DATA_MISMATCH);
    assert_true(sim.stats.errors > 0);

    /* the next fragment is fine again: members stay in step */
    for (m = 0; m < 4; ++m) {
        post(g, m, 2, AGG_OP_MAX, AGG_DTYPE_FLOAT64, d, 4);
    }
    switchsim_dp_progress(&sim);
    assert_int_equal(result_slot(g, 2)->status, AGG_OK);
}

static void test_bad_fragment(void **state)
{
    switchsim_group_t *g = make_group(3, 2, 128);
    float f[64] = {0};
    uint32_t m;

    for (m = 0; m < 4; ++m) {
        /* bitwise AND on floats has no kernel; count too large for the slot */
        post(g, m, 1, AGG_OP_BAND, AGG_DTYPE_FLOAT32, f, 4);
    }
    switchsim_dp_progress(&sim);
    assert_int_equal(result_slot(g, 1)->status, AGG_ERR_BAD_FRAGMENT);
    for (m = 0; m < 4; ++m) {
        post(g, m, 2, AGG_OP_SUM, AGG_DTYPE_FLOAT32, f, 32);
        send_slot(g, m, 2)->count = 1000; /* 4000 bytes in a 128-byte slot */
    }
    switchsim_dp_progress(&sim);
    assert_int_equal(result_slot(g, 2)->status, AGG_ERR_BAD_FRAGMENT);
}

static void test_config_validation(void **state)
{
    agg_msg_group_config_t cfg = {.group_id = 9, .num_members = 2, .num_nodes = 2,
                                  .osts = 4, .payload_per_ost = 256};
    agg_wire_tree_node_t nodes[2] = {{0x10, -1, 0}, {0x99, 0, 0}};
    agg_wire_member_t members[2] = {{1}, {1}};
    switchsim_group_t *g = NULL;

    /* a switch this switchsim does not host */
    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g), AGG_ERR_NOT_FOUND);
    /* a parent listed after its child */
    nodes[1].guid   = 0x20;
    nodes[1].parent = 1;
    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g),
                     AGG_ERR_INVALID_PARAM);
    nodes[1].parent = 0;
    /* a member whose leaf is out of range */
    members[1].leaf = 2;
    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g),
                     AGG_ERR_INVALID_PARAM);
    members[1].leaf = 1;
    /* a node with nobody below it */
    members[0].leaf = members[1].leaf = 0;
    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g),
                     AGG_ERR_INVALID_PARAM);
    members[0].leaf = members[1].leaf = 1;
    cfg.payload_per_ost = 100; /* not a multiple of 8 */
    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g),
                     AGG_ERR_INVALID_PARAM);
    cfg.payload_per_ost = 256;
    /* every dimension within its own limit, the segment far too large */
    {
        agg_wire_member_t eight[8] = {{1}, {1}, {1}, {1}, {1}, {1}, {1}, {1}};

        cfg.num_members     = 8;
        cfg.osts            = 4096;
        cfg.payload_per_ost = 65536;
        assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, eight, &g),
                         AGG_ERR_NO_RESOURCE);
        cfg.num_members     = 2;
        cfg.osts            = 4;
        cfg.payload_per_ost = 256;
    }
    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g), AGG_OK);
    assert_int_equal(switchsim_group_create(&sim, &cfg, nodes, members, &g), AGG_ERR_GROUP_ID);
    assert_int_equal(switchsim_group_destroy(&sim, 9), AGG_OK);
    assert_int_equal(switchsim_group_destroy(&sim, 9), AGG_ERR_GROUP_ID);
}

static void test_destroy_marks_dead(void **state)
{
    switchsim_group_t *g = make_group(4, 2, 128);
    void *addr;
    size_t size;
    char name[AGG_WIRE_NAME_LEN];

    snprintf(name, sizeof(name), "%s", g->shm_name);
    assert_int_equal(agg_shm_attach(name, &addr, &size), AGG_OK);
    assert_int_equal(((agg_shm_group_t *)addr)->dead, 0);
    assert_int_equal(switchsim_group_destroy(&sim, 4), AGG_OK);
    /* a rank still mapping it sees the group is gone; the name is unlinked */
    assert_int_equal(((agg_shm_group_t *)addr)->dead, 1);
    agg_shm_detach(addr, size);
    assert_int_not_equal(agg_shm_attach(name, &addr, &size), AGG_OK);
}

/*
 * Found by fuzz_switchsim: a member whose posted counter jumped 2^31 ahead
 * kept one data-path pass, holding sim->lock, busy for minutes. A pass now
 * takes at most osts fragments from a member, as many as it can have waiting.
 */
static void test_posted_runs_ahead(void **state)
{
    switchsim_group_t *g  = make_group(5, 2, 128);
    agg_shm_channel_t *ch = (agg_shm_channel_t *)((uint8_t *)g->shm + g->shm->channels_offset);

    __atomic_store_n(&ch->posted, 0x80000000u, __ATOMIC_RELEASE);
    assert_int_equal(switchsim_dp_progress(&sim), 2);
    assert_int_equal(g->consumed[0], 2);
    assert_int_equal(sim.stats.errors, 2); /* no fragment in either slot */
    assert_int_equal(switchsim_dp_progress(&sim), 2);
    assert_int_equal(switchsim_group_destroy(&sim, 5), AGG_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_level_sum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatch_reported_to_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_fragment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_marks_dead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_posted_runs_ahead, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
