/*
 * The libagg C API used directly (no shim), with MPI as the out-of-band
 * channel: argument checks, caps, several communicators at once, fragment
 * accounting, every collective, registration, and a clean teardown. Run
 * under aggrun.
 *
 * Prints "agg_api_check: N passed, M failed" on rank 0.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/agg.h"

static int rank, size;
static long passed, failed;

#define CHECK(_cond)                                                              \
    do {                                                                          \
        if (_cond) {                                                              \
            passed++;                                                             \
        } else {                                                                  \
            failed++;                                                             \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", rank, __FILE__, \
                    __LINE__, #_cond);                                            \
        }                                                                         \
    } while (0)

static int oob_bcast(void *ctx, void *buf, size_t len, int root)
{
    return MPI_Bcast(buf, (int)len, MPI_BYTE, root, *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int oob_barrier(void *ctx)
{
    return MPI_Barrier(*(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int oob_gather(void *ctx, int root, const void *sbuf, void *rbuf, size_t len)
{
    return MPI_Gather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, root,
                      *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static agg_comm_t *make_comm(agg_context_t *ctx, MPI_Comm *comm)
{
    agg_comm_spec_t spec = {0};
    MPI_Group g, wg;
    int *idx, *world, i;
    agg_comm_t *ac = NULL;

    MPI_Comm_rank(*comm, &spec.rank);
    MPI_Comm_size(*comm, &spec.size);
    idx   = malloc((size_t)spec.size * sizeof(int));
    world = malloc((size_t)spec.size * sizeof(int));
    for (i = 0; i < spec.size; ++i) {
        idx[i] = i;
    }
    MPI_Comm_group(*comm, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, spec.size, idx, wg, world);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    spec.world_ranks = world;
    spec.oob_ctx     = comm;
    CHECK(agg_comm_init(ctx, &spec, &ac) == AGG_OK);
    free(idx);
    free(world);
    return ac;
}

/* int64 sum of (member rank + 1) * (i + 1): exact, checks every element */
static void check_sum(agg_comm_t *ac, MPI_Comm comm, size_t count)
{
    int64_t *buf = malloc(count * sizeof(int64_t) + 1), *out = malloc(count * sizeof(int64_t) + 1);
    agg_reduce_spec_t spec = {.sbuf = buf, .rbuf = out, .count = count,
                              .dtype = AGG_DTYPE_INT64, .op = AGG_OP_SUM};
    int crank, csize;
    size_t i, bad = 0;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    for (i = 0; i < count; ++i) {
        buf[i] = (int64_t)(crank + 1) * (int64_t)(i + 1);
    }
    CHECK(agg_allreduce(ac, &spec) == AGG_OK);
    for (i = 0; i < count; ++i) {
        bad += out[i] != (int64_t)csize * (csize + 1) / 2 * (int64_t)(i + 1);
    }
    CHECK(bad == 0);
    free(buf);
    free(out);
}

/*
 * float16 and bfloat16 through libagg: sums of values exact in both
 * formats, and one whose result shows that the nodes add in float32 (2048 +
 * 1 + 1 is 2048 one float16 addition at a time, 2050 in float32).
 */
static void check_half(agg_comm_t *ac, MPI_Comm comm, int bf16)
{
    enum { N = 3000 };
    uint16_t *in = malloc(N * 2), *out = malloc(N * 2);
    float (*to)(uint16_t)    = bf16 ? agg_bf16_to_float : agg_half_to_float;
    uint16_t (*from)(float)  = bf16 ? agg_float_to_bf16 : agg_float_to_half;
    agg_reduce_spec_t rs = {.sbuf = in, .rbuf = out, .count = N,
                            .dtype = bf16 ? AGG_DTYPE_BFLOAT16 : AGG_DTYPE_FLOAT16,
                            .op = AGG_OP_SUM};
    int crank, csize, r;
    size_t i, bad = 0;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    for (i = 0; i < N; ++i) {
        in[i] = from((float)(crank + 1) * 0.25f + (float)(i % 8));
    }
    CHECK(agg_allreduce(ac, &rs) == AGG_OK);
    for (i = 0; i < N; ++i) {
        float want = 0;
        for (r = 0; r < csize; ++r) {
            want += (float)(r + 1) * 0.25f + (float)(i % 8);
        }
        bad += out[i] != from(want);
    }
    CHECK(bad == 0);
    if (!bf16 && csize >= 3) {
        in[0] = from(crank == 0 ? 2048.0f : 1.0f);
        rs.count = 1;
        CHECK(agg_allreduce(ac, &rs) == AGG_OK);
        CHECK(to(out[0]) == to(from(2048.0f + (float)(csize - 1))));
        CHECK(to(out[0]) != 2048.0f);
    }
    free(in);
    free(out);
}

/* Requests: in flight together, completed in reverse, one freed before it completes. */
static void check_requests(agg_comm_t *ac, MPI_Comm comm, int sat)
{
    enum { K = 5 };
    static const size_t counts[K] = {3, 70000, 1, 513, 300000};
    int32_t *s[K], *r[K];
    agg_request_t *req[K];
    agg_request_info_t info;
    int csize, crank, k;
    size_t i, bad = 0;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    for (k = 0; k < K; ++k) {
        agg_reduce_spec_t rs = {.count = counts[k], .dtype = AGG_DTYPE_INT32,
                                .op = AGG_OP_SUM};

        s[k] = malloc(counts[k] * 4);
        r[k] = malloc(counts[k] * 4);
        for (i = 0; i < counts[k]; ++i) {
            s[k][i] = (int32_t)((crank + 1) * (k + 1) + (int)(i % 5));
        }
        rs.sbuf = s[k];
        rs.rbuf = r[k];
        CHECK(agg_iallreduce(ac, &rs, &req[k]) == AGG_OK);
    }
    /* the first is let go while in flight: it completes anyway, behind the others */
    agg_request_free(req[0]);
    for (k = K - 1; k >= 1; --k) {
        agg_status_t st;

        while ((st = agg_request_test(req[k])) == AGG_INPROGRESS) {
            agg_comm_progress(ac);
        }
        CHECK(st == AGG_OK);
        agg_request_info(req[k], &info);
        CHECK(info.tree == (sat && counts[k] * 4 >= 4096 ? AGG_AGGR_SAT : AGG_AGGR_LLT));
        CHECK(agg_request_wait(req[k]) == AGG_OK); /* done: wait returns at once */
        agg_request_free(req[k]);
    }
    for (k = 0; k < K; ++k) {
        for (i = 0; i < counts[k]; ++i) {
            bad += r[k][i] != (int32_t)(csize * (csize + 1) / 2 * (k + 1) + csize * (int)(i % 5));
        }
        free(s[k]);
        free(r[k]);
    }
    CHECK(bad == 0);
}

/*
 * Persistent requests: made once, posted again and again with new buffer
 * contents, two of them in flight together (one small, one large enough for
 * SAT), completed out of order; posting one still in flight is refused.
 */
static void check_persistent(agg_comm_t *ac, MPI_Comm comm, int sat)
{
    enum { SMALL = 7, LARGE = 50000, ROUNDS = 4 };
    static int32_t ss[SMALL], sr[SMALL], ls[LARGE], lr[LARGE];
    agg_reduce_spec_t small = {.sbuf = ss, .rbuf = sr, .count = SMALL,
                               .dtype = AGG_DTYPE_INT32, .op = AGG_OP_SUM};
    agg_reduce_spec_t large = {.sbuf = ls, .rbuf = lr, .count = LARGE,
                               .dtype = AGG_DTYPE_INT32, .op = AGG_OP_MAX};
    agg_request_t *rq_small, *rq_large;
    agg_request_info_t info;
    int crank, csize, round, i, bad = 0;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    CHECK(agg_allreduce_init(ac, &small, &rq_small) == AGG_OK);
    CHECK(agg_allreduce_init(ac, &large, &rq_large) == AGG_OK);
    CHECK(agg_request_test(rq_small) == AGG_OK); /* not posted: nothing to wait for */
    CHECK(agg_request_wait(rq_large) == AGG_OK);
    for (round = 0; round < ROUNDS; ++round) {
        for (i = 0; i < SMALL; ++i) {
            ss[i] = crank + round * i;
        }
        for (i = 0; i < LARGE; ++i) {
            ls[i] = (crank * 7 + i + round) % (csize * 5 + 3);
        }
        /* rank 0 posts first and tries again before the others have posted:
           its request cannot have completed, so the second post is refused */
        if (crank == 0) {
            CHECK(agg_request_post(rq_large) == AGG_OK);
            CHECK(agg_request_post(rq_large) == AGG_ERR_INVALID_PARAM);
        }
        MPI_Barrier(comm);
        if (crank != 0) {
            CHECK(agg_request_post(rq_large) == AGG_OK);
        }
        CHECK(agg_request_post(rq_small) == AGG_OK);
        CHECK(agg_request_wait(rq_small) == AGG_OK);
        CHECK(agg_request_wait(rq_large) == AGG_OK);
        for (i = 0; i < SMALL; ++i) {
            bad += sr[i] != csize * (csize - 1) / 2 + csize * round * i;
        }
        for (i = 0; i < LARGE; ++i) {
            int m, want = 0;

            for (m = 0; m < csize; ++m) {
                int v = (m * 7 + i + round) % (csize * 5 + 3);
                want = v > want ? v : want;
            }
            bad += lr[i] != want;
        }
        agg_request_info(rq_large, &info);
        CHECK(info.tree == (sat ? AGG_AGGR_SAT : AGG_AGGR_LLT));
    }
    CHECK(bad == 0);
    agg_request_free(rq_small);
    agg_request_free(rq_large);
    CHECK(agg_allreduce_init(ac, NULL, &rq_small) == AGG_ERR_INVALID_PARAM);
    CHECK(agg_request_post(NULL) == AGG_ERR_INVALID_PARAM);
}

/* The tree per call; device pointers are refused, never dereferenced; pairs. */
static void check_modes(agg_comm_t *ac, MPI_Comm comm, int sat)
{
    static int32_t s[100000], r[100000];
    agg_reduce_spec_t rs = {.sbuf = s, .rbuf = r, .count = 100000, .dtype = AGG_DTYPE_INT32,
                            .op = AGG_OP_MAX, .mode = AGG_AGGR_SAT};
    agg_float32_int32_t ps[16], pr[16];
    agg_request_t *req;
    agg_request_info_t info;
    int crank, csize, i;
    agg_status_t st;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    for (i = 0; i < 100000; ++i) {
        s[i] = crank * 3 + i % 7;
    }
    if (!sat) {
        CHECK(agg_allreduce(ac, &rs) == AGG_ERR_SAT_UNAVAILABLE);
        CHECK(agg_comm_has_sat(ac) == 0);
    } else {
        CHECK(agg_comm_has_sat(ac) == 1);
        CHECK(agg_iallreduce(ac, &rs, &req) == AGG_OK);
        CHECK(agg_request_wait(req) == AGG_OK);
        agg_request_info(req, &info);
        CHECK(info.tree == AGG_AGGR_SAT);
        agg_request_free(req);
        CHECK(r[5] == (csize - 1) * 3 + 5);
    }
    rs.mode = AGG_AGGR_LLT; /* large, but on the LLT because asked */
    CHECK(agg_iallreduce(ac, &rs, &req) == AGG_OK);
    CHECK(agg_request_wait(req) == AGG_OK);
    agg_request_info(req, &info);
    CHECK(info.tree == AGG_AGGR_LLT);
    CHECK(info.fragments > 1);
    agg_request_free(req);
    CHECK(r[99999] == (csize - 1) * 3 + 99999 % 7);
    rs.mode     = (agg_aggr_mode_t)7;
    CHECK(agg_allreduce(ac, &rs) == AGG_ERR_INVALID_PARAM);
    rs.mode     = AGG_AGGR_AUTO;
    rs.sbuf     = (void *)8; /* a device pointer: must not be touched */
    rs.sbuf_mem = AGG_MEM_CUDA;
    /* no GPU backend: not supported; with one, the runtime says it is no allocation */
    st = agg_allreduce(ac, &rs);
    CHECK(st == AGG_ERR_NOT_SUPPORTED || st == AGG_ERR_INVALID_PARAM);
    /* MINLOC on value-index pairs */
    for (i = 0; i < 16; ++i) {
        ps[i].value = (float)((i + crank) % 3);
        ps[i].index = crank;
    }
    rs = (agg_reduce_spec_t){.sbuf = ps, .rbuf = pr, .count = 16,
                             .dtype = AGG_DTYPE_FLOAT32_INT32, .op = AGG_OP_MINLOC};
    CHECK(agg_allreduce(ac, &rs) == AGG_OK);
    for (i = 0; i < 16; ++i) {
        int m, best = 0;
        for (m = 1; m < csize; ++m) {
            if ((i + m) % 3 < (i + best) % 3) {
                best = m;
            }
        }
        CHECK(pr[i].value == (float)((i + best) % 3) && pr[i].index == best);
    }
}

/*
 * The other collectives through libagg, blocking, non-blocking and
 * persistent, around fragment edges: every member checks its own result,
 * and the communicator's stats count each call.
 */
static void check_colls(agg_comm_t *ac, MPI_Comm comm, size_t payload)
{
    size_t counts[3] = {1, payload / 4 + 3, payload + 1}, k, i, bad = 0;
    agg_comm_stats_t before, after;
    agg_request_t *req;
    int crank, csize, root, c;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    CHECK(agg_comm_stats(ac, &before) == AGG_OK);
    for (k = 0; k < 3; ++k) {
        size_t n = counts[k];
        int32_t *in = malloc(n * (size_t)csize * sizeof(int32_t));
        int32_t *out = malloc(n * (size_t)csize * sizeof(int32_t));
        uint8_t *bytes = malloc(n * (size_t)csize);

        for (i = 0; i < n * (size_t)csize; ++i) {
            in[i] = (int32_t)((crank + 1) * (int)(i % 1000 + 1));
        }
        for (root = 0; root < csize; root += csize > 2 ? csize - 1 : 1) {
            agg_reduce_spec_t rs = {.sbuf = in, .rbuf = crank == root ? out : NULL,
                                    .count = n, .dtype = AGG_DTYPE_INT32, .op = AGG_OP_SUM,
                                    .root = root};
            agg_data_spec_t ds = {.sbuf = bytes, .rbuf = bytes, .bytes = n, .root = root};

            memset(out, 0x5a, n * sizeof(int32_t));
            CHECK(agg_reduce(ac, &rs) == AGG_OK);
            for (i = 0; crank == root && i < n; ++i) {
                bad += out[i] != csize * (csize + 1) / 2 * (int32_t)(i % 1000 + 1);
            }
            for (i = 0; i < n; ++i) {
                bytes[i] = crank == root ? (uint8_t)(i * 7 + (size_t)root) : 0xee;
            }
            /* non-blocking, then the same again as a persistent request */
            CHECK(agg_ibcast(ac, &ds, &req) == AGG_OK);
            CHECK(agg_request_wait(req) == AGG_OK);
            agg_request_free(req);
            CHECK(agg_bcast_init(ac, &ds, &req) == AGG_OK);
            for (c = 0; c < 2; ++c) {
                CHECK(agg_request_post(req) == AGG_OK);
                CHECK(agg_request_wait(req) == AGG_OK);
            }
            agg_request_free(req);
            for (i = 0; i < n; ++i) {
                bad += bytes[i] != (uint8_t)(i * 7 + (size_t)root);
            }
        }
        {
            agg_reduce_spec_t rs = {.sbuf = in, .rbuf = out, .count = n,
                                    .dtype = AGG_DTYPE_INT32, .op = AGG_OP_MAX};
            agg_data_spec_t ds = {.sbuf = bytes + n * (size_t)crank, .rbuf = bytes,
                                  .bytes = n};

            CHECK(agg_reduce_scatter(ac, &rs) == AGG_OK);
            for (i = 0; i < n; ++i) {
                bad += out[i] != csize * (int32_t)((n * (size_t)crank + i) % 1000 + 1);
            }
            for (i = 0; i < n; ++i) { /* in place: my block is at its place */
                bytes[n * (size_t)crank + i] = (uint8_t)(crank * 31 + (int)i);
            }
            CHECK(agg_iallgather(ac, &ds, &req) == AGG_OK);
            CHECK(agg_request_wait(req) == AGG_OK);
            agg_request_free(req);
            for (i = 0; i < n * (size_t)csize; ++i) {
                bad += bytes[i] != (uint8_t)((int)(i / n) * 31 + (int)(i % n));
            }
        }
        free(in);
        free(out);
        free(bytes);
    }
    CHECK(agg_barrier(ac) == AGG_OK);
    CHECK(agg_ibarrier(ac, &req) == AGG_OK);
    CHECK(agg_request_wait(req) == AGG_OK);
    agg_request_free(req);
    CHECK(bad == 0);
    /* the stats count what ran */
    CHECK(agg_comm_stats(ac, &after) == AGG_OK);
    CHECK(after.calls[AGG_COLL_BARRIER][0] - before.calls[AGG_COLL_BARRIER][0] == 2);
    CHECK(after.calls[AGG_COLL_ALLGATHER][0] + after.calls[AGG_COLL_ALLGATHER][1] -
          before.calls[AGG_COLL_ALLGATHER][0] - before.calls[AGG_COLL_ALLGATHER][1] == 3);
    CHECK(after.errors[AGG_COLL_BCAST] == before.errors[AGG_COLL_BCAST]);
    /* arguments: a root out of range, a reduce root without a buffer */
    {
        agg_data_spec_t ds = {.sbuf = &c, .rbuf = &c, .bytes = 1, .root = csize};
        agg_reduce_spec_t rs = {.sbuf = &c, .rbuf = NULL, .count = 1,
                                .dtype = AGG_DTYPE_INT32, .op = AGG_OP_SUM, .root = crank};

        CHECK(agg_bcast(ac, &ds) == AGG_ERR_INVALID_PARAM);
        CHECK(agg_reduce(ac, &rs) == AGG_ERR_INVALID_PARAM);
        CHECK(agg_ibarrier(ac, NULL) == AGG_ERR_INVALID_PARAM);
        CHECK(strcmp(agg_coll_name(AGG_COLL_REDUCE_SCATTER), "reduce_scatter") == 0);
    }
}

/*
 * Blocks of their own length (MPI_Reduce_scatter's and MPI_Allgatherv's
 * form): member i's block is counts[i], member 0's empty, around fragment
 * edges; blocking and non-blocking. Counts that overflow, and counts given
 * to a collective without blocks, are refused.
 */
static void check_blocks(agg_comm_t *ac, MPI_Comm comm, size_t payload)
{
    size_t *counts, *at, total = 0, i, j, bad = 0;
    int32_t *in, *out;
    uint8_t *all;
    agg_request_t *req;
    int crank, csize, m;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    counts = calloc((size_t)csize, sizeof(*counts));
    at     = calloc((size_t)csize, sizeof(*at));
    for (m = 0; m < csize; ++m) {
        counts[m] = (size_t)m * (payload / 4 + 5) % (payload + 9);
        at[m]     = total;
        total += counts[m];
    }
    in  = malloc((total + 1) * sizeof(int32_t));
    out = malloc((counts[crank] + 1) * sizeof(int32_t));
    all = malloc(total + 1);
    for (i = 0; i < total; ++i) {
        in[i] = (int32_t)((crank + 1) * (int)(i % 977 + 1));
    }
    {
        agg_reduce_spec_t rs = {.sbuf = in, .rbuf = out, .dtype = AGG_DTYPE_INT32,
                                .op = AGG_OP_SUM, .counts = counts};
        agg_data_spec_t ds = {.sbuf = all + at[crank], .rbuf = all, .counts = counts};

        CHECK(agg_reduce_scatter(ac, &rs) == AGG_OK);
        for (i = 0; i < counts[crank]; ++i) {
            bad += out[i] != csize * (csize + 1) / 2 * (int32_t)((at[crank] + i) % 977 + 1);
        }
        memset(all, 0xee, total);
        for (i = 0; i < counts[crank]; ++i) {
            all[at[crank] + i] = (uint8_t)(crank * 29 + (int)i);
        }
        CHECK(agg_iallgather(ac, &ds, &req) == AGG_OK);
        CHECK(agg_request_wait(req) == AGG_OK);
        agg_request_free(req);
        for (m = 0; m < csize; ++m) {
            for (j = 0; j < counts[m]; ++j) {
                bad += all[at[m] + j] != (uint8_t)(m * 29 + (int)j);
            }
        }
        CHECK(bad == 0);
        counts[0] = 1;
        counts[csize - 1] += (size_t)UINT32_MAX; /* the whole no longer fits */
        CHECK(agg_reduce_scatter(ac, &rs) == AGG_ERR_INVALID_PARAM);
        CHECK(agg_allgather(ac, &ds) == AGG_ERR_INVALID_PARAM);
        rs.count = 1;
        CHECK(agg_allreduce(ac, &rs) == AGG_ERR_INVALID_PARAM);
    }
    free(in);
    free(out);
    free(all);
    free(at);
    free(counts);
}

/*
 * Registration: a buffer registered again (or a part of it) is a cache
 * hit, a deregistered one stays cached, unmapped memory is refused, and a
 * full cache evicts what nobody holds.
 */
static void check_registration(agg_context_t *ctx)
{
    static agg_mem_reg_t *held[300];
    size_t page = 4096, len = 64 * page;
    uint8_t *buf = aligned_alloc(page, len), *many;
    agg_mem_reg_t *a, *b;
    agg_mem_stats_t st;
    int i, n;

    CHECK(agg_mem_register(ctx, buf, len, AGG_MEM_HOST, &a) == AGG_OK);
    CHECK(agg_mem_register(ctx, buf + page, 100, AGG_MEM_HOST, &b) == AGG_OK);
    CHECK(a == b);
    CHECK(agg_mem_deregister(ctx, b) == AGG_OK);
    CHECK(agg_mem_deregister(ctx, a) == AGG_OK);
    CHECK(agg_mem_deregister(ctx, a) == AGG_ERR_INVALID_PARAM); /* not held any more */
    CHECK(agg_mem_register(ctx, buf, len, AGG_MEM_HOST, &b) == AGG_OK);
    CHECK(agg_mem_deregister(ctx, b) == AGG_OK);
    CHECK(agg_mem_stats(ctx, &st) == AGG_OK);
    CHECK(st.hits == 2 && st.misses == 1 && st.cached == 1 && st.held == 0);
    CHECK(agg_mem_register(ctx, (void *)8, 100, AGG_MEM_HOST, &b) == AGG_ERR_INVALID_PARAM);
    CHECK(agg_mem_register(ctx, buf, 0, AGG_MEM_HOST, &b) == AGG_ERR_INVALID_PARAM);
    CHECK(agg_mem_register(ctx, buf, len, AGG_MEM_CUDA, &b) == AGG_ERR_NOT_SUPPORTED);
    /* 300 pages held one by one: the cached, unheld buffer above makes room
       for the 256th; past that every entry is held and the rest are refused */
    many = aligned_alloc(page, 2 * 300 * page);
    for (n = 0; n < 300; ++n) {
        if (agg_mem_register(ctx, many + (size_t)n * 2 * page, 1, AGG_MEM_HOST, &held[n]) !=
            AGG_OK) {
            break;
        }
    }
    CHECK(n == 256);
    CHECK(agg_mem_stats(ctx, &st) == AGG_OK);
    CHECK(st.evictions == 1 && st.cached == 256 && st.held == 256);
    for (i = 0; i < n; ++i) {
        CHECK(agg_mem_deregister(ctx, held[i]) == AGG_OK);
    }
    /* once given back they stay cached; a new one evicts the least recently used */
    CHECK(agg_mem_register(ctx, many + 5 * 2 * page, 8, AGG_MEM_HOST, &a) == AGG_OK);
    CHECK(a == held[5]);
    CHECK(agg_mem_register(ctx, buf, len, AGG_MEM_HOST, &b) == AGG_OK);
    CHECK(agg_mem_stats(ctx, &st) == AGG_OK);
    CHECK(st.evictions == 2 && st.cached == 256 && st.held == 2);
    agg_mem_deregister(ctx, a);
    agg_mem_deregister(ctx, b);
    free(many);
    free(buf);
}

int main(int argc, char **argv)
{
    agg_context_spec_t spec = {0};
    agg_context_t *ctx = NULL;
    agg_comm_t *world = NULL, *half = NULL, *again = NULL;
    agg_reduce_spec_t rs;
    agg_caps_t caps;
    MPI_Comm oob, split;
    float f = 1;
    uint64_t before;
    long totals[2], sums[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_dup(MPI_COMM_WORLD, &oob);

    /* arguments are checked before anything collective happens */
    CHECK(agg_context_init(NULL, &ctx) == AGG_ERR_INVALID_PARAM);
    spec.world_rank  = size;
    spec.world_size  = size;
    spec.oob.bcast   = oob_bcast;
    spec.oob.barrier = oob_barrier;
    spec.oob.gather  = oob_gather;
    spec.oob_ctx     = &oob;
    CHECK(agg_context_init(&spec, &ctx) == AGG_ERR_INVALID_PARAM);
    spec.world_rank = rank;
    spec.oob.gather = NULL;
    CHECK(agg_context_init(&spec, &ctx) == AGG_ERR_INVALID_PARAM);
    spec.oob.gather = oob_gather;

    CHECK(agg_context_init(&spec, &ctx) == AGG_OK);
    if (ctx == NULL) {
        fprintf(stderr, "rank %d: no context: %s\n", rank, agg_context_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK(agg_caps_query(ctx, &caps) == AGG_OK);
    CHECK(caps.dtypes & (1u << AGG_DTYPE_INT64));
    CHECK(caps.dtypes & (1u << AGG_DTYPE_FLOAT64));
    CHECK(caps.ops & (1u << AGG_OP_SUM));
    CHECK(caps.payload_per_ost >= 128 && caps.payload_per_ost % 8 == 0);
    CHECK(caps.max_osts >= caps.osts_per_group && caps.osts_per_group >= 2);
    CHECK(caps.tree_depth >= 1);

    world = make_comm(ctx, &oob);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &split);
    half = make_comm(ctx, &split);

    /* unsupported or malformed requests fail alike on every rank, nothing sent */
    before = agg_context_fragments_sent(ctx);
    rs = (agg_reduce_spec_t){.sbuf = &f, .rbuf = &f, .count = 1,
                             .dtype = AGG_DTYPE_FLOAT32, .op = AGG_OP_BAND};
    CHECK(agg_allreduce(world, &rs) == AGG_ERR_NOT_SUPPORTED);
    rs.dtype = (agg_dtype_t)99;
    CHECK(agg_allreduce(world, &rs) == AGG_ERR_NOT_SUPPORTED);
    rs = (agg_reduce_spec_t){.sbuf = NULL, .rbuf = &f, .count = 1,
                             .dtype = AGG_DTYPE_FLOAT32, .op = AGG_OP_SUM};
    CHECK(agg_allreduce(world, &rs) == AGG_ERR_INVALID_PARAM);
    rs.count = 0; /* nothing to do: fine with NULL buffers */
    rs.rbuf  = NULL;
    CHECK(agg_allreduce(world, &rs) == AGG_OK);
    CHECK(agg_context_fragments_sent(ctx) == before);

    /* fragments are payload-sized: ceil(bytes / payload) of them */
    check_sum(world, oob, 1000);
    CHECK(agg_context_fragments_sent(ctx) - before ==
          (1000 * 8 + caps.payload_per_ost - 1) / caps.payload_per_ost);

    /* two communicators, interleaved, with counts around fragment edges */
    check_sum(half, split, 1);
    check_sum(world, oob, caps.payload_per_ost / 8);
    check_sum(half, split, caps.payload_per_ost / 8 + 1);
    check_sum(world, oob, (size_t)caps.payload_per_ost * caps.osts_per_group / 8 * 3 + 5);
    check_sum(half, split, 100000);
    {
        const char *e = getenv("SHARP_COLL_ENABLE_SAT");
        int sat = e != NULL && strcmp(e, "1") == 0;

        CHECK(((caps.features & AGG_FEATURE_SAT) != 0) == sat);
        check_half(world, oob, 0);
        check_half(half, split, 1);
        check_requests(world, oob, sat && agg_comm_has_sat(world));
        check_persistent(world, oob, sat && agg_comm_has_sat(world));
        check_modes(world, oob, sat);
        check_colls(world, oob, caps.payload_per_ost);
        check_colls(half, split, caps.payload_per_ost);
        check_blocks(world, oob, caps.payload_per_ost);
        check_blocks(half, split, caps.payload_per_ost);
    }
    check_registration(ctx);

    CHECK(agg_comm_destroy(half) == AGG_OK);
    /* a new group after one was released */
    again = make_comm(ctx, &split);
    check_sum(again, split, 4099);
    CHECK(agg_comm_destroy(again) == AGG_OK);
    CHECK(agg_comm_destroy(world) == AGG_OK);
    CHECK(agg_context_finalize(ctx) == AGG_OK);
    CHECK(strlen(agg_strerror(AGG_ERR_QUOTA)) > 0);

    totals[0] = passed;
    totals[1] = failed;
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("agg_api_check: %ld passed, %ld failed\n", sums[0], sums[1]);
    }
    MPI_Comm_free(&split);
    MPI_Comm_free(&oob);
    MPI_Finalize();
    return failed ? 1 : 0;
}
