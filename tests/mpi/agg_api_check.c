/*
 * The libagg C API used directly (no shim), with MPI as the out-of-band
 * channel: argument checks, caps, several communicators at once, fragment
 * accounting, and a clean teardown. Run under aggrun.
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
