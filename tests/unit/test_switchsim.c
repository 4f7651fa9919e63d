/*
 * switchsim's groups and reduction threads on real shared memory: a
 * switchsim_t set up as main.c does (without aggmgr), groups configured from
 * a GROUP_CONFIG body as the control link passes it, members that map the
 * group segment by name and stage fragments the way libagg does when ranks
 * leave the work to switchsim, and the worker threads reducing them.
 * Resources, SAT locks and malformed configurations: test_switchsim_an.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agg/reduce.h"
#include "agg/shm.h"
#include "agg/wait.h"
#include "switchsim.h"
#include "switchsim_test.h"

#define NUM_SWITCHES 8

/*
 * What the workers wrote before a result, read by the test thread. Members map
 * the segments at other addresses than switchsim, so ThreadSanitizer does not
 * see the result's acquire: read such words the way a driver would.
 */
#define LOAD(_x) __atomic_load_n(&(_x), __ATOMIC_ACQUIRE)

static switchsim_t sim;
static agg_wire_switch_t switches[NUM_SWITCHES];

/* A member's mapping of a group segment, by its name. */
typedef struct test_member_view {
    agg_dp_seg_t *seg;
    size_t        size;
} test_member_view_t;

static int setup(void **state)
{
    switchsim_test_init(&sim, sysconf(_SC_NPROCESSORS_ONLN), 2);
    switchsim_test_switches(switches, NUM_SWITCHES);
    return 0;
}

static int teardown(void **state)
{
    switchsim_test_fini(&sim);
    return 0;
}

static void host_switches(void)
{
    assert_int_equal(switchsim_an_init(&sim, switches, NUM_SWITCHES), AGG_OK);
}

static switchsim_group_t *make_group(switchsim_test_cfg_t *t)
{
    switchsim_group_t *g = NULL;

    assert_int_equal(switchsim_group_create(&sim, &t->cfg, t->nodes, t->members, NULL, &g), AGG_OK);
    assert_non_null(g);
    return g;
}

static test_member_view_t member_attach(const switchsim_group_t *g)
{
    test_member_view_t v = {0};
    char why[256];
    void *p;

    assert_int_equal(agg_shm_attach(g->shm_name, &p, &v.size), AGG_OK);
    assert_int_equal(agg_dp_check(p, v.size, why, sizeof(why)), AGG_OK);
    v.seg = p;
    return v;
}

/* Member m stages fragment n in its channel and rings switchsim's doorbell. */
static void stage(agg_dp_seg_t *s, uint32_t m, uint64_t n, uint8_t kind, int op, int dtype,
                  const void *data, uint32_t count)
{
    agg_dp_frag_t *f = agg_dp_stage(s, m, n);

    f->desc.count = count;
    f->desc.op    = (uint8_t)op;
    f->desc.dtype = (uint8_t)dtype;
    f->desc.kind  = kind;
    f->flags = 0;
    if (count > 0) {
        memcpy(agg_dp_frag_data(f), data, (size_t)count * agg_dtype_size(dtype));
    }
    __atomic_store_n(&f->n, n, __ATOMIC_RELEASE);
    __atomic_fetch_add(&sim.host->doorbell, 1, __ATOMIC_SEQ_CST);
    agg_wait_wake(&sim.host->doorbell, &sim.host->sleeping);
}

/* Fragment n's result, waited for as a member would (10 s at most). */
static const agg_dp_slot_t *wait_result(const agg_dp_seg_t *s, uint64_t n)
{
    struct timespec t0, now;
    const agg_dp_slot_t *r;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((r = agg_dp_result(s, n)) == NULL) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 10) {
            fail_msg("no result for fragment %llu", (unsigned long long)n);
        }
        usleep(100);
    }
    return r;
}

/* Entries of /dev/shm made by this process whose name starts with "agg-<pid>-". */
static int count_segments(int *host)
{
    char prefix[32];
    struct dirent *e;
    DIR *d = opendir("/dev/shm");
    int n = 0;

    assert_non_null(d);
    snprintf(prefix, sizeof(prefix), "agg-%d-", (int)getpid());
    *host = 0;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            n++;
            *host += strcmp(e->d_name + strlen(prefix), "host") == 0;
        }
    }
    closedir(d);
    return n;
}

static void test_group_segment(void **state)
{
    switchsim_test_cfg_t t = switchsim_test_tree3(1, AGG_TREE_LLT, 0x10, 4, 256);
    switchsim_group_t *g, *dup = NULL, *sat;
    test_member_view_t v;
    agg_dp_host_t *h;
    char why[256], prefix[32];
    size_t hsize;
    uint32_t m;

    host_switches();
    g = make_group(&t);
    snprintf(prefix, sizeof(prefix), "/agg-%d-", (int)getpid());
    assert_int_equal(strncmp(g->shm_name, prefix, strlen(prefix)), 0);
    v = member_attach(g);
    assert_int_equal(v.size, g->view.size);
    assert_int_equal(v.seg->group_id, 1);
    assert_int_equal(v.seg->tree, AGG_TREE_LLT);
    assert_int_equal(v.seg->flags, 0);
    assert_int_equal(v.seg->num_nodes, 3);
    assert_int_equal(v.seg->num_members, 4);
    assert_int_equal(v.seg->window, 4);
    assert_int_equal(v.seg->num_slots, 8);
    assert_int_equal(v.seg->payload, 256);
    assert_int_equal(v.seg->dead, 0);
    /* the root on 0x10 waits for its two leaves, each for its two members */
    assert_int_equal(agg_dp_node(v.seg, 0)->guid, 0x10);
    assert_int_equal(agg_dp_node(v.seg, 0)->parent, -1);
    assert_int_equal(agg_dp_node(v.seg, 0)->up, AGG_DP_UP_ROOT);
    for (m = 0; m < 3; ++m) {
        assert_int_equal(agg_dp_node(v.seg, m)->expected, 2);
        assert_int_equal(agg_dp_node(v.seg, m)->an, m); /* 0x10, 0x20, 0x30 */
    }
    assert_int_equal(agg_dp_node(v.seg, 1)->guid, 0x20);
    assert_int_equal(agg_dp_node(v.seg, 1)->up, AGG_DP_UP_LOCAL);
    assert_int_equal(agg_dp_node(v.seg, 1)->position, 0);
    assert_int_equal(agg_dp_node(v.seg, 2)->guid, 0x30);
    assert_int_equal(agg_dp_node(v.seg, 2)->parent, 0);
    assert_int_equal(agg_dp_node(v.seg, 2)->position, 1);
    for (m = 0; m < 4; ++m) {
        assert_int_equal(agg_dp_member(v.seg, m)->leaf, m < 2 ? 1 : 2);
        assert_int_equal(agg_dp_member(v.seg, m)->position, m % 2);
        assert_int_equal(agg_dp_member(v.seg, m)->leaf_guid, m < 2 ? 0x20 : 0x30);
    }
    /* the host segment members map next to it */
    assert_int_equal(agg_shm_attach(sim.host_name, (void **)&h, &hsize), AGG_OK);
    assert_int_equal(agg_dp_host_check(h, hsize, why, sizeof(why)), AGG_OK);
    assert_int_equal(h->num_ans, NUM_SWITCHES);
    assert_int_equal(h->workers, 2);
    assert_int_equal(agg_dp_host_an(h, 2)->guid, 0x30);
    agg_shm_detach(h, hsize);
    assert_int_equal(sim.num_groups, 1);
    assert_int_equal(sim.members_total, 4);

    /* the same group on the same tree again: refused, nothing taken */
    assert_int_equal(switchsim_group_create(&sim, &t.cfg, t.nodes, t.members, NULL, &dup),
                     AGG_ERR_GROUP_ID);
    assert_null(dup);
    assert_int_equal(sim.num_groups, 1);
    assert_int_equal(switchsim_an_find(&sim, 0x20)->osts_used, 4);
    assert_int_equal(switchsim_an_find(&sim, 0x20)->groups_used, 1);
    /* its SAT part is another group segment */
    t.cfg.tree  = AGG_TREE_SAT;
    t.cfg.flags = AGG_GROUP_F_REPRODUCIBLE;
    sat = make_group(&t);
    assert_string_not_equal(sat->shm_name, g->shm_name);
    assert_int_equal(sat->view.seg->tree, AGG_TREE_SAT);
    assert_int_equal(sat->view.seg->flags, AGG_DP_F_REPRODUCIBLE);
    assert_int_equal(sim.num_groups, 2);

    /* a member still mapping a destroyed group sees it is gone */
    assert_int_equal(switchsim_group_destroy(&sim, 1, AGG_TREE_LLT, 0), AGG_OK);
    assert_int_equal(v.seg->dead, 1);
    assert_int_equal(switchsim_group_destroy(&sim, 1, AGG_TREE_LLT, 0), AGG_ERR_GROUP_ID);
    assert_int_equal(sim.num_groups, 1);
    assert_int_equal(switchsim_an_find(&sim, 0x20)->osts_used, 4); /* the SAT part's */
    agg_shm_detach(v.seg, v.size);
}

static void check_int_sum(const agg_dp_slot_t *r, uint64_t n)
{
    int32_t out[64];
    uint32_t i;

    assert_int_equal(r->status, AGG_OK);
    assert_int_equal(r->desc.kind, AGG_DP_KIND_DATA);
    assert_int_equal(r->desc.count, 64);
    memset(out, 0, sizeof(out));
    agg_dp_copy_out(r, out);
    for (i = 0; i < 64; ++i) {
        /* members add (m + 1) * 1000 + i + n for m = 0..3 */
        assert_int_equal(out[i], 10000 + 4 * (int32_t)(i + n));
    }
}

static void test_workers_reduce(void **state)
{
    switchsim_test_cfg_t t = switchsim_test_tree3(2, AGG_TREE_LLT, 0x10, 4, 256);
    switchsim_group_t *g;
    test_member_view_t v;
    agg_dp_counters_t c;
    int32_t data[64];
    float f[32], fout[32];
    uint64_t n;
    uint32_t m, i;

    host_switches();
    g = make_group(&t);
    v = member_attach(g);
    assert_int_equal(switchsim_workers_start(&sim), AGG_OK);
    /* 12 sums, a window (4) at a time: every staging and node slot is reused */
    for (n = 1; n <= 12; n += 4) {
        uint64_t k;

        for (k = n; k < n + 4; ++k) {
            for (m = 0; m < 4; ++m) {
                for (i = 0; i < 64; ++i) {
                    data[i] = (int32_t)((m + 1) * 1000 + i + k);
                }
                stage(v.seg, m, k, AGG_DP_KIND_DATA, AGG_OP_SUM, AGG_DTYPE_INT32, data, 64);
            }
        }
        for (k = n; k < n + 4; ++k) {
            check_int_sum(wait_result(v.seg, k), k);
        }
    }
    /* 13: the members of leaf 0x30 disagree with those of 0x20 on the operation:
       the root finds out, and every member sees it */
    for (m = 0; m < 4; ++m) {
        for (i = 0; i < 32; ++i) {
            f[i] = (float)m + 0.5f * (float)i;
        }
        stage(v.seg, m, 13, AGG_DP_KIND_DATA, m >= 2 ? AGG_OP_MIN : AGG_OP_MAX,
              AGG_DTYPE_FLOAT32, f, 32);
    }
    assert_int_equal(wait_result(v.seg, 13)->status, AGG_ERR_DATA_MISMATCH);
    /* 14: in step again */
    for (m = 0; m < 4; ++m) {
        for (i = 0; i < 32; ++i) {
            f[i] = (float)m + 0.5f * (float)i;
        }
        stage(v.seg, m, 14, AGG_DP_KIND_DATA, AGG_OP_MAX, AGG_DTYPE_FLOAT32, f, 32);
    }
    assert_int_equal(wait_result(v.seg, 14)->status, AGG_OK);
    assert_int_equal(wait_result(v.seg, 14)->desc.count, 32);
    agg_dp_copy_out(wait_result(v.seg, 14), fout);
    for (i = 0; i < 32; ++i) {
        assert_true(fout[i] == 3.0f + 0.5f * (float)i);
    }
    for (m = 0; m < 4; ++m) {
        assert_int_equal(agg_dp_chan(v.seg, m)->consumed, 14);
    }
    /* results are counted before they are published */
    switchsim_stats(&sim, &c);
    assert_int_equal(c.results_out, 14);

    /* once the threads are joined, everything they took is counted */
    switchsim_workers_stop(&sim);
    switchsim_stats(&sim, &c);
    assert_int_equal(c.llt_fragments_in, 4 * 14);
    assert_int_equal(c.sat_chunks_in, 0);
    assert_int_equal(c.bytes_in, 4 * (12 * 64 * 4 + 2 * 32 * 4));
    assert_int_equal(c.sat_bytes_in, 0);
    assert_int_equal(c.results_out, 14);
    /* 3 per fragment (one per node); of fragment 13 only the leaves' */
    assert_int_equal(c.reductions, 13 * 3 + 2);
    assert_int_equal(c.errors, 1);
    assert_int_equal(c.duplicates, 0);
    agg_shm_detach(v.seg, v.size);
}

/* All four members stage fragment n of `kind` (count uint64 of value n + m for DATA). */
static const agg_dp_slot_t *sat_round(agg_dp_seg_t *s, uint64_t n, uint8_t kind,
                                      uint32_t count)
{
    static uint64_t data[512];
    uint32_t m, i;

    for (m = 0; m < 4; ++m) {
        for (i = 0; i < count; ++i) {
            data[i] = n + m + i;
        }
        stage(s, m, n, kind, AGG_OP_SUM, AGG_DTYPE_UINT64, data, count);
    }
    return wait_result(s, n);
}

static void test_sat_group(void **state)
{
    switchsim_test_cfg_t t = switchsim_test_tree3(3, AGG_TREE_SAT, 0x10, 2, 4096);
    switchsim_test_cfg_t t2 = switchsim_test_tree3(4, AGG_TREE_SAT, 0x10, 2, 4096);
    test_member_view_t v, v2;
    const agg_dp_slot_t *r;
    agg_dp_counters_t c;
    static uint64_t out[512];
    uint32_t i, k;

    host_switches();
    v  = member_attach(make_group(&t));
    v2 = member_attach(make_group(&t2));
    assert_int_equal(switchsim_workers_start(&sim), AGG_OK);

    /* a LOCK request takes the lock of every switch of the tree */
    r = sat_round(v.seg, 1, AGG_DP_KIND_LOCK, 0);
    assert_int_equal(r->status, AGG_OK);
    assert_int_equal(r->desc.kind, AGG_DP_KIND_LOCK);
    for (k = 0; k < 3; ++k) {
        assert_int_equal(LOAD(sim.ans[k].shared->sat_lock), 3);
        assert_int_equal(LOAD(sim.ans[k].shared->sat_lock_taken), 1);
    }
    assert_int_equal(LOAD(sim.ans[3].shared->sat_lock), 0);
    /* another SAT group on those switches is told to wait */
    assert_int_equal(sat_round(v2.seg, 1, AGG_DP_KIND_LOCK, 0)->status, AGG_ERR_SAT_LOCK_BUSY);
    assert_int_equal(LOAD(sim.ans[0].shared->sat_lock), 3);

    for (k = 2; k <= 3; ++k) {
        r = sat_round(v.seg, k, AGG_DP_KIND_DATA, 512);
        assert_int_equal(r->status, AGG_OK);
        assert_int_equal(r->desc.count, 512);
        agg_dp_copy_out(r, out);
        for (i = 0; i < 512; ++i) {
            assert_int_equal(out[i], 4 * (k + i) + 6);
        }
    }
    assert_int_equal(sat_round(v.seg, 4, AGG_DP_KIND_UNLOCK, 0)->status, AGG_OK);
    for (k = 0; k < 3; ++k) {
        assert_int_equal(LOAD(sim.ans[k].shared->sat_lock), 0);
    }
    /* now the other group gets it */
    assert_int_equal(sat_round(v2.seg, 2, AGG_DP_KIND_LOCK, 0)->status, AGG_OK);
    assert_int_equal(LOAD(sim.ans[1].shared->sat_lock), 4);

    switchsim_workers_stop(&sim);
    switchsim_stats(&sim, &c);
    assert_int_equal(c.sat_chunks_in, 4 * 2); /* lock requests are control, not chunks */
    assert_int_equal(c.sat_bytes_in, 4 * 2 * 512 * 8);
    assert_int_equal(c.bytes_in, c.sat_bytes_in);
    assert_int_equal(c.llt_fragments_in, 0);
    assert_int_equal(c.results_out, 6);
    assert_int_equal(c.locks_granted, 2);
    assert_int_equal(c.locks_busy, 1);
    agg_shm_detach(v.seg, v.size);
    agg_shm_detach(v2.seg, v2.size);
}

static void test_destroy_all_unlinks(void **state)
{
    switchsim_test_cfg_t a = switchsim_test_tree3(5, AGG_TREE_LLT, 0x10, 2, 128);
    switchsim_test_cfg_t b = switchsim_test_tree3(6, AGG_TREE_LLT, 0x40, 2, 128);
    uint32_t k;
    int host;

    host_switches();
    make_group(&a);
    make_group(&b);
    a.cfg.tree = AGG_TREE_SAT;
    make_group(&a);
    assert_int_equal(count_segments(&host), 4);
    assert_int_equal(host, 1);
    switchsim_group_destroy_all(&sim);
    /* only the host segment is left, and it goes with the switches */
    assert_int_equal(count_segments(&host), 1);
    assert_int_equal(host, 1);
    assert_null(sim.groups);
    assert_int_equal(sim.num_groups, 0);
    assert_int_equal(sim.members_total, 0);
    assert_int_equal(sim.groups_total, 3);
    for (k = 0; k < NUM_SWITCHES; ++k) {
        assert_int_equal(sim.ans[k].groups_used, 0);
        assert_int_equal(sim.ans[k].osts_used, 0);
        assert_int_equal(sim.ans[k].buf_used, 0);
        assert_int_equal(sim.ans[k].sat_flows_used, 0);
        assert_null(sim.ans[k].gnodes);
    }
    switchsim_an_fini(&sim);
    assert_int_equal(count_segments(&host), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_segment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_workers_reduce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sat_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_all_unlinks, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
