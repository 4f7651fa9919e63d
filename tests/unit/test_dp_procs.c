/*
 * The aggregation-node engine across real processes, as it runs: member
 * ranks are forked processes that push their own fragments (and complete
 * nodes for each other), or stage them for a switchsim-like scanner which
 * may read them straight from the ranks' memory (process_vm_readv); and a
 * tree split over two segments, each driven by its own process, joined by a
 * shared-memory port.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "agg/wait.h"
#include "dp_test.h"

#define FRAGS 2000
#define COUNT 24

static int32_t value(uint32_t m, uint64_t n, uint32_t i)
{
    return (int32_t)(m * 1000003u + (uint32_t)n * 31u + i);
}

typedef struct wait_arg {
    agg_dp_seg_t *seg;
    uint64_t      n;
} wait_arg_t;

static int result_ready(void *arg)
{
    wait_arg_t *w = arg;

    return agg_dp_result(w->seg, w->n) != NULL;
}

/*
 * A member: pushes (or stages) fragments 1..FRAGS with at most `window` in
 * flight, checks every result, exits 0 when all were right.
 */
static int member_main(dp_test_seg_t *t, uint32_t m, uint32_t members, int staged, int cma)
{
    agg_dp_seg_t *s = t->view.seg;
    agg_dp_counters_t *ctr = &agg_dp_chan(s, m)->drv;
    agg_dp_driver_t drv = {.ctr = ctr};
    static int32_t data[64][COUNT];
    int32_t out[COUNT];
    uint64_t posted = 0, done = 0;
    agg_wait_t w;
    uint32_t i, k;
    int wrong = 0;

    agg_dp_member(s, m)->pid = (uint32_t)getpid();
    agg_wait_init(&w, 100);
    while (done < FRAGS) {
        /* post what the window allows */
        while (posted < FRAGS && agg_seq_may_post(posted + 1, done, s->window)) {
            uint64_t n = posted + 1;
            int32_t *d = data[n % 64];

            for (i = 0; i < COUNT; ++i) {
                d[i] = value(m, n, i);
            }
            if (staged) {
                agg_dp_frag_t *f = agg_dp_stage(s, m, n);

                f->desc.count = COUNT;
                f->desc.op    = AGG_OP_SUM;
                f->desc.dtype = AGG_DTYPE_INT32;
                f->desc.kind  = AGG_DP_KIND_DATA;
                f->flags = cma ? AGG_DP_FRAG_CMA : 0;
                if (cma) {
                    f->pid = (uint32_t)getpid();
                    f->src = (uint64_t)(uintptr_t)d;
                    f->dst = (uint64_t)(uintptr_t)out;
                } else {
                    memcpy(agg_dp_frag_data(f), d, sizeof(int32_t) * COUNT);
                }
                __atomic_store_n(&f->n, n, __ATOMIC_RELEASE);
            } else {
                agg_dp_contrib_t c = {.n = n, .desc.count = COUNT, .desc.op = AGG_OP_SUM,
                                      .desc.dtype = AGG_DTYPE_INT32, .data = d};
                const agg_dp_member_t *me = agg_dp_member(s, m);

                if (agg_dp_push(&t->view, me->leaf, me->position, &c, &drv) != AGG_OK) {
                    break; /* busy: the next pass */
                }
                agg_dp_count_in(&drv, s->tree, &c);
            }
            posted++;
        }
        agg_dp_progress(&t->view, &drv);
        /* take the oldest result once it is there */
        agg_dp_slot_t *res = agg_dp_result(s, done + 1);
        if (res == NULL) {
            wait_arg_t wa = {s, done + 1};
            agg_wait_idle(&w, &s->result_gen, &s->sleepers, result_ready, &wa);
            continue;
        }
        agg_wait_reset(&w);
        if (!cma) {
            agg_dp_copy_out(res, out);
        }
        for (i = 0; i < COUNT; ++i) {
            int32_t want = 0;
            for (k = 0; k < members; ++k) {
                want += value(k, done + 1, i);
            }
            wrong += res->status != AGG_OK || out[i] != want;
        }
        done++;
        if (cma) {
            /* the next chunk's result lands here again: only one in flight */
            assert_true(s->window == 1);
        }
    }
    return wrong != 0;
}

/* A forked helper dies with the test, whatever happens to the test. */
static pid_t fork_child(void)
{
    pid_t pid = fork();

    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
    }
    return pid;
}

static void run_members(dp_test_seg_t *t, uint32_t members, int staged, int cma,
                        void (*scanner)(dp_test_seg_t *, volatile int *))
{
    pid_t pids[8];
    volatile int *stop = dp_test_shared(sizeof(int));
    pid_t sc = -1;
    uint32_t m;
    int status, bad = 0;

    if (scanner != NULL) {
        sc = fork_child();
        if (sc == 0) {
            scanner(t, stop);
            _exit(0);
        }
    }
    for (m = 0; m < members; ++m) {
        pids[m] = fork_child();
        if (pids[m] == 0) {
            alarm(60); /* a member that hangs fails the test instead */
            _exit(member_main(t, m, members, staged, cma));
        }
    }
    /* reap everybody before judging, so a failure leaves no process behind */
    for (m = 0; m < members; ++m) {
        if (pids[m] < 0 || waitpid(pids[m], &status, 0) != pids[m] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            bad++;
        }
    }
    if (sc > 0) {
        *stop = 1;
        if (waitpid(sc, &status, 0) != sc || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            bad++;
        }
    }
    munmap((void *)stop, sizeof(int));
    assert_int_equal(bad, 0);
}

static void sum_counters(dp_test_seg_t *t, agg_dp_counters_t *sum)
{
    uint32_t m;

    memset(sum, 0, sizeof(*sum));
    for (m = 0; m < t->view.seg->num_members; ++m) {
        agg_dp_counters_add(sum, &agg_dp_chan(t->view.seg, m)->drv);
    }
}

static void test_ranks_drive(void **state)
{
    uint32_t leaf[4] = {1, 2, 1, 2};
    dp_test_seg_t *t = dp_test_tree(2, leaf, 4, 4, 256, 0);
    agg_dp_counters_t sum;

    assert_non_null(t);
    run_members(t, 4, 0, 0, NULL);
    sum_counters(t, &sum);
    assert_int_equal(sum.llt_fragments_in, 4 * FRAGS);
    assert_int_equal(sum.results_out, FRAGS);
    assert_int_equal(sum.reductions, 3 * FRAGS);
    assert_int_equal(sum.errors, 0);
    dp_test_free(t);

    /* reproducible: members wait for their turn, and still finish */
    t = dp_test_tree(2, leaf, 4, 4, 256, AGG_DP_F_REPRODUCIBLE);
    run_members(t, 4, 0, 0, NULL);
    dp_test_free(t);
}

/* switchsim's part: scan every channel until told to stop. */
static void scanner_main(dp_test_seg_t *t, volatile int *stop)
{
    agg_dp_driver_t drv = {.ctr = &t->ctr, .scratch = t->scratch,
                           .scratch_size = sizeof(t->scratch)};
    uint32_t m;

    while (!*stop) {
        unsigned got = 0;
        for (m = 0; m < t->view.seg->num_members; ++m) {
            got += agg_dp_scan(&t->view, m, &drv);
        }
        got += agg_dp_progress(&t->view, &drv);
        if (got == 0) {
            sched_yield();
        }
    }
    /* the parent checks what the scanner counted */
    if (t->ctr.llt_fragments_in + t->ctr.sat_chunks_in != 3u * FRAGS || t->ctr.errors != 0) {
        _exit(1);
    }
}

static void test_switchsim_drives(void **state)
{
    uint32_t leaf[3] = {0, 0, 0};
    dp_test_seg_t *t = dp_test_tree(0, leaf, 3, 8, 256, 0);

    assert_non_null(t);
    run_members(t, 3, 1, 0, scanner_main);
    dp_test_free(t);
}

static void test_zero_copy(void **state)
{
    uint32_t leaf[3] = {0, 0, 0};
    agg_dp_node_desc_t node = {.parent = -1, .up = AGG_DP_UP_ROOT};
    agg_dp_shape_t sh = {.group_id = 9, .tree = AGG_TREE_SAT, .window = 1, .payload = 4096,
                         .num_nodes = 1, .nodes = &node, .num_members = 3,
                         .member_leaf = leaf};
    dp_test_seg_t *t = dp_test_build(&sh);

    assert_non_null(t);
    /* the scanner reads each rank's chunk from its memory and writes the result back */
    run_members(t, 3, 1, 1, scanner_main);
    dp_test_free(t);
}

/*
 * A tree split over two segments: segment A holds leaf a (members 0, 1) whose
 * parent, the root, is in segment B with leaf b (members 2, 3). Each segment
 * has its driver process mapping both (switchsims on one host); the members
 * map only their own, so a member completing leaf a leaves the forward to
 * A's driver.
 */
static void port_driver(dp_test_seg_t *mine, agg_dp_view_t **peers, volatile int *stop)
{
    agg_dp_view_t v = mine->view;
    agg_dp_driver_t drv = {.ctr = &mine->ctr};

    v.peers = peers;
    while (!*stop) {
        if (agg_dp_progress(&v, &drv) == 0) {
            sched_yield();
        }
    }
}

static void test_shm_port(void **state)
{
    uint32_t leaf_a[2] = {0, 0}, leaf_b[2] = {1, 1};
    agg_dp_port_t up = {.node = 0, .position = 1}, down = {.node = 0};
    agg_dp_node_desc_t na = {.guid = 0xa, .parent = -1, .up = AGG_DP_UP_SHM, .port = 0};
    agg_dp_node_desc_t nb[2] = {
        {.guid = 0x1, .parent = -1, .up = AGG_DP_UP_ROOT, .extra = 1, .num_down = 1},
        {.guid = 0xb, .parent = 0, .up = AGG_DP_UP_LOCAL},
    };
    agg_dp_shape_t sa = {.group_id = 5, .window = 2, .payload = 128, .num_nodes = 1,
                         .nodes = &na, .num_members = 2, .member_leaf = leaf_a,
                         .num_ports = 1, .ports = &up};
    agg_dp_shape_t sb = {.group_id = 5, .window = 2, .payload = 128, .num_nodes = 2,
                         .nodes = nb, .num_members = 2, .member_leaf = leaf_b,
                         .num_ports = 1, .ports = &down};
    dp_test_seg_t *a, *b;
    agg_dp_view_t *peers_a[1], *peers_b[1];
    volatile int *stop = dp_test_shared(sizeof(int));
    pid_t da, db, m[4];
    int status, i, bad = 0;

    snprintf(up.seg, sizeof(up.seg), "B");
    snprintf(down.seg, sizeof(down.seg), "A");
    a = dp_test_build(&sa);
    b = dp_test_build(&sb);
    assert_non_null(a);
    assert_non_null(b);
    /* b's root: child 0 is leaf b, child 1 is a's top through the port */
    assert_int_equal(agg_dp_node(b->view.seg, 0)->expected, 2);
    assert_int_equal(agg_dp_node(b->view.seg, 1)->position, 0);
    peers_a[0] = &b->view;
    peers_b[0] = &a->view;
    da = fork_child();
    if (da == 0) {
        port_driver(a, peers_a, stop);
        _exit(0);
    }
    db = fork_child();
    if (db == 0) {
        port_driver(b, peers_b, stop);
        _exit(0);
    }
    /* members 0, 1 in segment A, members 0, 1 of segment B as ranks 2, 3 */
    for (i = 0; i < 4; ++i) {
        m[i] = fork_child();
        if (m[i] == 0) {
            alarm(60);
            dp_test_seg_t *t = i < 2 ? a : b;
            uint32_t me = (uint32_t)(i % 2);
            agg_dp_driver_t drv = {.ctr = &agg_dp_chan(t->view.seg, me)->drv};
            int32_t d[4], out[4], wrong = 0;
            uint64_t n, done = 0, posted = 0;

            while (done < 500) {
                while (posted < 500 && agg_seq_may_post(posted + 1, done, 2)) {
                    agg_dp_contrib_t c = {.n = posted + 1, .desc.count = 4, .desc.op = AGG_OP_SUM,
                                          .desc.dtype = AGG_DTYPE_INT32, .data = d};
                    const agg_dp_member_t *mm = agg_dp_member(t->view.seg, me);
                    for (int k = 0; k < 4; ++k) {
                        d[k] = (int32_t)((i + 1) * (k + 1) + (int)posted);
                    }
                    if (agg_dp_push(&t->view, mm->leaf, mm->position, &c, &drv) != AGG_OK) {
                        break;
                    }
                    posted++;
                }
                n = done + 1;
                if (agg_dp_result(t->view.seg, n) == NULL) {
                    sched_yield();
                    continue;
                }
                agg_dp_copy_out(agg_dp_result(t->view.seg, n), out);
                for (int k = 0; k < 4; ++k) {
                    /* sum over ranks 1..4 of r * (k + 1) + (n - 1) */
                    wrong += out[k] != 10 * (k + 1) + 4 * (int32_t)(n - 1);
                }
                done++;
            }
            _exit(wrong != 0);
        }
    }
    for (i = 0; i < 4; ++i) {
        if (waitpid(m[i], &status, 0) != m[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            bad++;
        }
    }
    *stop = 1;
    waitpid(da, &status, 0);
    waitpid(db, &status, 0);
    dp_test_free(a);
    dp_test_free(b);
    munmap((void *)stop, sizeof(int));
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_drive),
        cmocka_unit_test(test_switchsim_drives),
        cmocka_unit_test(test_zero_copy),
        cmocka_unit_test(test_shm_port),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
