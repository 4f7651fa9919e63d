/*
 * switchsim's aggregation-node objects: what each switch gives a group (OSTs,
 * accumulator memory, group slots, SAT flows), all or nothing; SAT locks given
 * back when their holder goes or loses a member process; and group
 * configurations that cannot work, refused with a message. On real shared
 * memory, with a switchsim_t set up as main.c does (without aggmgr).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "agg/shm.h"
#include "switchsim.h"
#include "switchsim_test.h"

#define NUM_SWITCHES 8

static switchsim_t sim;
static agg_wire_switch_t switches[NUM_SWITCHES];
static char logged[8192]; /* what the last create_logged() call wrote to stderr */

static int setup(void **state)
{
    switchsim_test_init(&sim, sysconf(_SC_NPROCESSORS_ONLN), 1);
    switchsim_test_switches(switches, NUM_SWITCHES);
    return 0;
}

static int teardown(void **state)
{
    switchsim_test_fini(&sim);
    return 0;
}

/* Settings as a file or the environment would give them, then the switches. */
static void host_switches(const char *osts, const char *buffer_mb, const char *sat_flows,
                          const char *max_groups)
{
    const struct {
        agg_conf_id_t id;
        const char   *v;
    } set[] = {{AGG_CONF_AN_OSTS, osts}, {AGG_CONF_AN_BUFFER_MB, buffer_mb},
               {AGG_CONF_AN_SAT_FLOWS, sat_flows}, {AGG_CONF_AN_MAX_GROUPS, max_groups}};
    char err[256];
    size_t i;

    for (i = 0; i < sizeof(set) / sizeof(set[0]); ++i) {
        if (set[i].v != NULL) {
            assert_int_equal(agg_conf_set(&sim.conf, set[i].id, set[i].v, AGG_CONF_SRC_CMDLINE,
                                          NULL, err, sizeof(err)), AGG_OK);
        }
    }
    assert_int_equal(switchsim_an_init(&sim, switches, NUM_SWITCHES), AGG_OK);
}

/* One switch alone, its four members below it. */
static switchsim_test_cfg_t tree1(uint32_t id, uint8_t tree, uint64_t guid, uint32_t osts,
                                  uint32_t payload)
{
    switchsim_test_cfg_t t = switchsim_test_tree3(id, tree, guid, osts, payload);

    t.cfg.num_nodes = 1;
    memset(t.members, 0, sizeof(t.members));
    return t;
}

/* switchsim_group_create with what it logs captured in `logged`. */
static agg_status_t create_logged(const switchsim_test_cfg_t *t, switchsim_group_t **g)
{
    FILE *tmp = tmpfile();
    int saved = dup(2);
    size_t len;
    agg_status_t st;

    assert_non_null(tmp);
    assert_true(saved >= 0);
    fflush(stderr);
    assert_true(dup2(fileno(tmp), 2) == 2);
    st = switchsim_group_create(&sim, &t->cfg, t->nodes, t->members, NULL, g);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    len = fread(logged, 1, sizeof(logged) - 1, tmp);
    logged[len] = '\0';
    fclose(tmp);
    return st;
}

static switchsim_group_t *make_group(const switchsim_test_cfg_t *t)
{
    switchsim_group_t *g = NULL;

    assert_int_equal(create_logged(t, &g), AGG_OK);
    assert_non_null(g);
    return g;
}

/* Refused with `st`, a message saying `why`, and nothing left behind. */
static void refused(const switchsim_test_cfg_t *t, agg_status_t st, const char *why)
{
    switchsim_group_t *g = NULL;
    uint32_t groups = sim.num_groups;
    char name[64];
    int fd;

    assert_int_equal(create_logged(t, &g), st);
    assert_null(g);
    if (strstr(logged, why) == NULL) {
        fail_msg("expected \"%s\" in: %s", why, logged);
    }
    assert_int_equal(sim.num_groups, groups);
    snprintf(name, sizeof(name), "/agg-%d-g%u%s", (int)getpid(), t->cfg.group_id,
             t->cfg.tree == AGG_TREE_SAT ? "s" : "");
    fd = shm_open(name, O_RDONLY, 0);
    if (fd >= 0) {
        close(fd);
        fail_msg("segment %s left behind", name);
    }
}

/* Nothing reserved on any switch. */
static void all_free(void)
{
    uint32_t k;

    for (k = 0; k < NUM_SWITCHES; ++k) {
        assert_int_equal(sim.ans[k].osts_used, 0);
        assert_int_equal(sim.ans[k].buf_used, 0);
        assert_int_equal(sim.ans[k].groups_used, 0);
        assert_int_equal(sim.ans[k].sat_flows_used, 0);
        assert_null(sim.ans[k].gnodes);
    }
}

static void test_osts_and_slots(void **state)
{
    switchsim_test_cfg_t big = switchsim_test_tree3(1, AGG_TREE_LLT, 0x10, 16, 256);
    switchsim_test_cfg_t one = tree1(2, AGG_TREE_LLT, 0x30, 6, 256);
    switchsim_test_cfg_t t   = switchsim_test_tree3(3, AGG_TREE_LLT, 0x10, 4, 256);
    switchsim_test_cfg_t extra = tree1(4, AGG_TREE_LLT, 0x20, 2, 256);

    host_switches("8", NULL, NULL, "2");
    refused(&big, AGG_ERR_NO_RESOURCE, "has no OSTs left for group 1");
    all_free();

    /* 0x30 has 2 OSTs left: the group gets nothing on 0x10 and 0x20 either */
    make_group(&one);
    refused(&t, AGG_ERR_NO_RESOURCE, "switch 0x0000000000000030 (sw3) has no OSTs left");
    assert_int_equal(switchsim_an_find(&sim, 0x10)->osts_used, 0);
    assert_int_equal(switchsim_an_find(&sim, 0x10)->groups_used, 0);
    assert_int_equal(switchsim_an_find(&sim, 0x20)->osts_used, 0);
    assert_int_equal(switchsim_an_find(&sim, 0x20)->buf_used, 0);
    assert_null(switchsim_an_find(&sim, 0x20)->gnodes);
    assert_int_equal(switchsim_an_find(&sim, 0x30)->osts_used, 6);
    assert_int_equal(switchsim_an_find(&sim, 0x30)->groups_used, 1);
    t.cfg.osts = 2;
    make_group(&t);
    assert_int_equal(switchsim_an_find(&sim, 0x30)->osts_used, 8);
    assert_int_equal(switchsim_an_find(&sim, 0x10)->osts_used, 2);
    /* 0x30 is full, and a third group on 0x20 has no group slot left */
    assert_int_equal(switchsim_an_find(&sim, 0x20)->groups_used, 1);
    make_group(&extra);
    extra.cfg.group_id = 5;
    refused(&extra, AGG_ERR_NO_RESOURCE, "has no group slots left for group 5");
    assert_int_equal(switchsim_an_find(&sim, 0x20)->osts_used, 4);

    assert_int_equal(switchsim_group_destroy(&sim, 2, AGG_TREE_LLT, 0), AGG_OK);
    assert_int_equal(switchsim_group_destroy(&sim, 3, AGG_TREE_LLT, 0), AGG_OK);
    assert_int_equal(switchsim_group_destroy(&sim, 4, AGG_TREE_LLT, 0), AGG_OK);
    all_free();
}

static void test_buffer(void **state)
{
    /* 2 x 32 slots of 48 + 2 x 4096 bytes, rounded to 8256: half of 1 MiB */
    switchsim_test_cfg_t half = switchsim_test_tree3(1, AGG_TREE_LLT, 0x10, 32, 4096);
    switchsim_test_cfg_t more = switchsim_test_tree3(2, AGG_TREE_LLT, 0x10, 32, 4096);
    switchsim_test_cfg_t whole = switchsim_test_tree3(3, AGG_TREE_LLT, 0x10, 64, 4096);
    switchsim_group_t *g;
    uint64_t need;

    host_switches(NULL, "1", NULL, NULL);
    refused(&whole, AGG_ERR_NO_RESOURCE, "has no buffer memory left for group 3");
    all_free();
    g    = make_group(&half);
    need = (uint64_t)g->view.seg->num_slots * g->view.seg->slot_stride;
    assert_int_equal(need, 64 * 8256);
    assert_int_equal(switchsim_an_find(&sim, 0x10)->buf_used, need);
    assert_int_equal(switchsim_an_find(&sim, 0x30)->buf_used, need);
    refused(&more, AGG_ERR_NO_RESOURCE, "has no buffer memory left for group 2");
    assert_int_equal(switchsim_an_find(&sim, 0x20)->buf_used, need);
    assert_int_equal(switchsim_group_destroy(&sim, 1, AGG_TREE_LLT, 0), AGG_OK);
    all_free();
    make_group(&more);
    assert_int_equal(switchsim_an_find(&sim, 0x20)->buf_used, need);
}

static void test_sat_flows(void **state)
{
    switchsim_test_cfg_t t = switchsim_test_tree3(1, AGG_TREE_SAT, 0x10, 4, 1024);
    uint32_t k;

    host_switches(NULL, NULL, "2", NULL);
    make_group(&t);
    t.cfg.group_id = 2;
    make_group(&t);
    t.cfg.group_id = 3;
    refused(&t, AGG_ERR_NO_RESOURCE, "has no SAT flows left for group 3");
    /* an LLT group needs no flow */
    t.cfg.tree = AGG_TREE_LLT;
    make_group(&t);
    for (k = 0; k < 3; ++k) {
        assert_int_equal(sim.ans[k].sat_flows_used, 2);
        assert_int_equal(sim.ans[k].groups_used, 3);
    }
    assert_int_equal(switchsim_group_destroy(&sim, 1, AGG_TREE_SAT, 0), AGG_OK);
    assert_int_equal(sim.ans[1].sat_flows_used, 1);
    t.cfg.tree = AGG_TREE_SAT;
    make_group(&t);
    assert_int_equal(sim.ans[2].sat_flows_used, 2);
}

static void test_destroy_returns_lock(void **state)
{
    switchsim_test_cfg_t t = switchsim_test_tree3(5, AGG_TREE_SAT, 0x10, 2, 1024);
    agg_dp_host_t *h;
    size_t hsize;
    uint32_t k;

    host_switches(NULL, NULL, NULL, NULL);
    make_group(&t);
    t.cfg.tree = AGG_TREE_LLT;
    make_group(&t);
    /* as a member completing a LOCK fragment would, through its own mapping */
    assert_int_equal(agg_shm_attach(sim.host_name, (void **)&h, &hsize), AGG_OK);
    for (k = 0; k < 3; ++k) {
        __atomic_store_n(&agg_dp_host_an(h, k)->sat_lock, 5, __ATOMIC_RELEASE);
    }
    agg_dp_host_an(h, 3)->sat_lock = 6; /* another group's, on a switch not in the tree */
    /* the group's LLT part going does not end its streaming */
    assert_int_equal(switchsim_group_destroy(&sim, 5, AGG_TREE_LLT, 0), AGG_OK);
    assert_int_equal(agg_dp_host_an(h, 0)->sat_lock, 5);
    assert_int_equal(switchsim_group_destroy(&sim, 5, AGG_TREE_SAT, 0), AGG_OK);
    for (k = 0; k < 3; ++k) {
        assert_int_equal(agg_dp_host_an(h, k)->sat_lock, 0);
    }
    assert_int_equal(agg_dp_host_an(h, 3)->sat_lock, 6);
    agg_shm_detach(h, hsize);
    all_free();
}

static void test_reap_locks(void **state)
{
    /* a: a member died; b: alive; c: b's LLT part, a member died */
    switchsim_test_cfg_t a = switchsim_test_tree3(11, AGG_TREE_SAT, 0x10, 2, 1024);
    switchsim_test_cfg_t b = switchsim_test_tree3(12, AGG_TREE_SAT, 0x40, 2, 1024);
    switchsim_test_cfg_t c = tree1(12, AGG_TREE_LLT, 0x80, 2, 1024);
    switchsim_group_t *ga, *gb, *gc;
    uint32_t k, gen;
    pid_t child;
    int wst;

    host_switches(NULL, NULL, NULL, NULL);
    ga = make_group(&a);
    gb = make_group(&b);
    gc = make_group(&c);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        _exit(0);
    }
    assert_int_equal(waitpid(child, &wst, 0), child);
    agg_dp_member(ga->view.seg, 1)->pid = (uint32_t)child;
    agg_dp_member(gb->view.seg, 0)->pid = (uint32_t)getpid();
    agg_dp_member(gc->view.seg, 2)->pid = (uint32_t)child;
    for (k = 0; k < 6; ++k) {
        sim.ans[k].shared->sat_lock = k < 3 ? 11 : 12;
    }
    sim.ans[6].shared->sat_lock = 99; /* a group that is gone */
    gen = ga->view.seg->result_gen;

    switchsim_ctl_wrlock(&sim);
    assert_int_equal(switchsim_an_reap_locks(&sim), 4);
    pthread_rwlock_unlock(&sim.lock);
    for (k = 0; k < 3; ++k) {
        assert_int_equal(sim.ans[k].shared->sat_lock, 0);
    }
    assert_int_equal(sim.ans[6].shared->sat_lock, 0);
    /* the live group keeps its lock; its members are told nothing */
    for (k = 3; k < 6; ++k) {
        assert_int_equal(sim.ans[k].shared->sat_lock, 12);
    }
    assert_int_equal(gb->view.seg->dead, 0);
    /* the others in a group that lost a member stop waiting */
    assert_int_equal(ga->view.seg->dead, 1);
    assert_int_not_equal(ga->view.seg->result_gen, gen);
    assert_int_equal(gc->view.seg->dead, 0);

    switchsim_ctl_wrlock(&sim);
    assert_int_equal(switchsim_an_reap_locks(&sim), 0);
    pthread_rwlock_unlock(&sim.lock);
    assert_int_equal(sim.ans[4].shared->sat_lock, 12);
}

static void test_bad_config(void **state)
{
    switchsim_test_cfg_t t;

    host_switches(NULL, NULL, NULL, NULL);
    t = switchsim_test_tree3(21, AGG_TREE_LLT, 0x10, 4, 256);
    t.nodes[1].parent = 2; /* a parent listed after its child */
    refused(&t, AGG_ERR_INVALID_PARAM, "group 21: node 1 has parent 2; parents must come first");
    t = switchsim_test_tree3(22, AGG_TREE_LLT, 0x10, 4, 256);
    t.nodes[0].parent = 0; /* a root with a parent */
    refused(&t, AGG_ERR_INVALID_PARAM, "node 0 has parent 0");
    t = switchsim_test_tree3(23, AGG_TREE_LLT, 0x10, 4, 256);
    t.members[3].leaf = 3;
    refused(&t, AGG_ERR_INVALID_PARAM, "group 23: member 3 has leaf 3 of 3 nodes");
    t = switchsim_test_tree3(24, AGG_TREE_LLT, 0x10, 4, 256);
    t.nodes[2].guid = 0x99;
    refused(&t, AGG_ERR_NOT_FOUND, "group 24: switch 0x0000000000000099 is not hosted here");
    t = switchsim_test_tree3(25, AGG_TREE_LLT, 0x10, 4, 0);
    refused(&t, AGG_ERR_INVALID_PARAM, "group 25: bad shape");
    t = switchsim_test_tree3(26, AGG_TREE_LLT, 0x10, 4, 100); /* not a multiple of 8 */
    refused(&t, AGG_ERR_INVALID_PARAM, "group 26: bad shape");
    t = switchsim_test_tree3(27, AGG_TREE_LLT, 0x10, 0, 256);
    refused(&t, AGG_ERR_INVALID_PARAM, "group 27: bad shape");
    t = switchsim_test_tree3(28, AGG_TREE_LLT, 0x10, 4, 256);
    t.members[2].leaf = t.members[3].leaf = 1; /* leaf 0x30 with nobody below it */
    refused(&t, AGG_ERR_INVALID_PARAM, "node 2 (0x0000000000000030) has no child");
    t = switchsim_test_tree3(29, 2, 0x10, 4, 256);
    refused(&t, AGG_ERR_INVALID_PARAM, "group 29: bad shape or group id (tree 2");
    t = switchsim_test_tree3(30, AGG_TREE_LLT, 0x10, 4, 256);
    t.cfg.num_members = 0;
    refused(&t, AGG_ERR_INVALID_PARAM, "group 30: bad shape");
    /* each limit on its own is fine, the segment is not */
    t = switchsim_test_tree3(31, AGG_TREE_LLT, 0x10, 1024, 1u << 20);
    refused(&t, AGG_ERR_NO_RESOURCE, "group 31: a segment of");
    all_free();
    assert_int_equal(sim.num_groups, 0);
    assert_int_equal(sim.groups_total, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_osts_and_slots, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sat_flows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_returns_lock, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reap_locks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_config, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
