/*
 * agg_hello: the smallest libagg job (the role of SHARP's sharp_hello). One
 * process, no MPI: a context whose out-of-band collectives are trivial (one
 * member), a communicator of that member, a barrier, then an allreduce of a
 * few integers whose result is checked. Prints "Test Passed." and exits 0,
 * or says which step failed, why, and what to check, and exits 1.
 *
 *   build/bin/aggrun -- build/bin/agg_hello [-v]
 *   AGG_AM_ADDR=host:port build/bin/agg_hello [-v]   (a manager already running)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/conf.h"

/* agg_barrier is newer than libagg's first release: skipped when absent. */
#pragma weak agg_barrier

#define HELLO_COUNT 8

static int hello_verbose;

/* One member: a broadcast and a barrier have nothing to do, a gather copies. */
static int hello_oob_bcast(void *ctx, void *buf, size_t size, int root)
{
    return root == 0 ? 0 : -1;
}

static int hello_oob_barrier(void *ctx)
{
    return 0;
}

static int hello_oob_gather(void *ctx, int root, const void *sbuf, void *rbuf, size_t size)
{
    if (root != 0) {
        return -1;
    }
    memmove(rbuf, sbuf, size);
    return 0;
}

/* Where the manager is looked for, as libagg resolves it: value and origin. */
static void hello_am_addr(char *buf, size_t len)
{
    agg_conf_t conf;
    char err[256];

    if (agg_conf_load(&conf, NULL, NULL, err, sizeof(err)) != AGG_OK) {
        snprintf(buf, len, "unknown: the settings do not load: %s", err);
        return;
    }
    snprintf(buf, len, "%s (%s%s)", agg_conf_str(&conf, AGG_CONF_AM_ADDR),
             conf.v[AGG_CONF_AM_ADDR].source == AGG_CONF_SRC_DEFAULT ? "the default" : "from ",
             conf.v[AGG_CONF_AM_ADDR].source == AGG_CONF_SRC_DEFAULT
             ? "" : conf.v[AGG_CONF_AM_ADDR].where);
}

/* What to look at for a failed step, by what failed. */
static void hello_fail(const char *step, agg_status_t st, const char *detail)
{
    char addr[512];

    hello_am_addr(addr, sizeof(addr));
    fprintf(stderr, "agg_hello: %s failed: %s%s%s\n", step, agg_strerror(st),
            detail != NULL && *detail != '\0' ? ": " : "", detail != NULL ? detail : "");
    fprintf(stderr, "agg_hello: manager address AGG_AM_ADDR = %s\n", addr);
    switch (st) {
    case AGG_ERR_SESSION_INIT:
    case AGG_ERR_VERSION:
    case AGG_ERR_PROTOCOL:
        fprintf(stderr, "agg_hello: check: is aggmgr running and listening there? (start "
                "both daemons with build/bin/aggrun -- build/bin/agg_hello, or set "
                "AGG_AM_ADDR to where aggmgr --listen is)\n");
        break;
    case AGG_ERR_NO_SWITCHSIM:
    case AGG_ERR_JOB_CREATE:
    case AGG_ERR_TOPOLOGY:
        fprintf(stderr, "agg_hello: check: is switchsim running and registered with that "
                "manager (switchsim --am ADDR)? build/bin/agg_info -S shows what the "
                "manager has\n");
        break;
    case AGG_ERR_QUOTA:
    case AGG_ERR_NO_RESOURCE:
    case AGG_ERR_GROUP_ALLOC:
        fprintf(stderr, "agg_hello: check: the job's quota (SHARP_COLL_JOB_QUOTA_OSTS, "
                "SHARP_COLL_JOB_QUOTA_MAX_GROUPS) and whether other jobs hold the "
                "aggregation nodes' resources (build/bin/agg_info -S)\n");
        break;
    case AGG_ERR_TIMEOUT:
        fprintf(stderr, "agg_hello: check: is switchsim still running? (AGG_COLL_TIMEOUT_MS "
                "passed without progress)\n");
        break;
    default:
        fprintf(stderr, "agg_hello: check: that switchsim is running, the manager's log, "
                "and SHARP_COLL_LOG_LEVEL=4 for details\n");
        break;
    }
}

static void hello_step(const char *what)
{
    if (hello_verbose) {
        printf("agg_hello: %s\n", what);
        fflush(stdout);
    }
}

/* The barrier, then an int32 allreduce; 0 when both went right. */
static int hello_colls(agg_comm_t *comm)
{
    int32_t in[HELLO_COUNT], out[HELLO_COUNT];
    agg_reduce_spec_t spec = {.sbuf = in, .rbuf = out, .count = HELLO_COUNT,
                              .dtype = AGG_DTYPE_INT32, .op = AGG_OP_SUM};
    agg_status_t st;
    int i;

    if (agg_barrier == NULL) {
        hello_step("agg_barrier: not in this libagg, skipped");
    } else if ((st = agg_barrier(comm)) != AGG_OK) {
        hello_fail("agg_barrier", st, NULL);
        return -1;
    } else {
        hello_step("agg_barrier: ok");
    }
    for (i = 0; i < HELLO_COUNT; ++i) {
        in[i]  = (i + 1) * 1000 - 3 * i;
        out[i] = -1;
    }
    st = agg_allreduce(comm, &spec);
    if (st != AGG_OK) {
        hello_fail("agg_allreduce", st, NULL);
        return -1;
    }
    /* one member: the sum is its own contribution */
    for (i = 0; i < HELLO_COUNT; ++i) {
        if (out[i] != in[i]) {
            fprintf(stderr, "agg_hello: agg_allreduce gave a wrong result: element %d is %d, "
                    "expected %d\n", i, (int)out[i], (int)in[i]);
            return -1;
        }
    }
    hello_step("agg_allreduce: ok, result checked");
    return 0;
}

int main(int argc, char **argv)
{
    agg_context_spec_t cs = {.world_rank = 0, .world_size = 1, .local_size = 1,
                             .oob = {.bcast = hello_oob_bcast, .barrier = hello_oob_barrier,
                                     .gather = hello_oob_gather}};
    static const int world_ranks[1] = {0};
    agg_comm_spec_t ms = {.rank = 0, .size = 1, .world_ranks = world_ranks};
    agg_context_t *ctx = NULL;
    agg_comm_t *comm = NULL;
    agg_caps_t caps;
    agg_status_t st;
    char buf[160];
    int c, rc = 1;

    while ((c = getopt(argc, argv, "vh")) != -1) {
        switch (c) {
        case 'v':
            hello_verbose = 1;
            break;
        case 'h':
            printf("usage: agg_hello [-v]\n"
                   "One process: libagg context, communicator, barrier and a checked allreduce\n"
                   "through the aggregation manager at AGG_AM_ADDR (run it under aggrun).\n"
                   "  -v  say each step\n");
            return 0;
        default:
            fprintf(stderr, "usage: agg_hello [-v]\n");
            return 2;
        }
    }
    st = agg_context_init(&cs, &ctx);
    if (st != AGG_OK) {
        hello_fail("agg_context_init", st, agg_context_last_error());
        return 1;
    }
    if (hello_verbose && agg_caps_query(ctx, &caps) == AGG_OK) {
        hello_am_addr(buf, sizeof(buf));
        printf("agg_hello: job created: manager %s, %u B per fragment, %u OSTs, tree depth "
               "%u%s\n", buf, caps.payload_per_ost, caps.max_osts, caps.tree_depth,
               caps.features & AGG_FEATURE_SAT ? ", SAT" : "");
    }
    st = agg_comm_init(ctx, &ms, &comm);
    if (st != AGG_OK) {
        hello_fail("agg_comm_init", st, agg_context_last_error());
        goto out_ctx;
    }
    hello_step("communicator created");
    if (hello_colls(comm) == 0) {
        rc = 0;
    }
    st = agg_comm_destroy(comm);
    if (st != AGG_OK) {
        hello_fail("agg_comm_destroy", st, NULL);
        rc = 1;
    }
out_ctx:
    st = agg_context_finalize(ctx);
    if (st != AGG_OK) {
        hello_fail("agg_context_finalize", st, NULL);
        rc = 1;
    }
    if (rc == 0) {
        printf("Test Passed.\n");
    }
    return rc;
}
