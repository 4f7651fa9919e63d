/*
 * gpu_coll_check: collectives on device buffers, every result copied back
 * to the host and compared element by element with one computed there.
 *
 *   gpu_coll_check -m api [-d NDEV] [-v]       libagg called directly (under aggrun)
 *   gpu_coll_check -m mpi [-H RANK] [-v]       MPI calls (the shim preloaded, under aggrun)
 *   gpu_coll_check -m api|mpi -b [-e MAXBYTES] a bandwidth table instead of the checks
 *
 * -m api: for every dtype and op agg_reduce_fn supports and counts from 1
 *   to 2^20 + 5, agg_allreduce into a second device buffer and in place,
 *   agg_reduce to a rotating root and agg_bcast from one; the expected
 *   values come from agg_reduce_fn over every rank's inputs in rank order.
 *   Then what libagg says device pointers are (agg_mem_query), their
 *   registration, and float32 sums on NDEV devices (default 1) in turn
 *   over three communicators, the device switched between calls.
 * -m mpi: MPI_Allreduce (and in place), MPI_Iallreduce, MPI_Reduce,
 *   MPI_Reduce_scatter_block and its non-blocking form, MPI_Reduce_scatter
 *   (counts that differ), MPI_Bcast, MPI_Allgather, MPI_Iallgather and
 *   MPI_Allgatherv on device
 *   buffers, against the same PMPI_ calls on host copies of the inputs
 *   (PMPI_ bypasses the shim, so the expected values are Open MPI's own).
 *   -H RANK: that rank's buffers are host memory, the others' device
 *   memory, as MPI allows: every rank must still take the same messages.
 * -b: float32 sum allreduce from 4 to 256 MiB (at most MAXBYTES, suffixes
 *   K, M, G): device buffers against host buffers and against the pinned
 *   copy bandwidth of the same size (and, with -m mpi, PMPI_Allreduce).
 *
 * Inputs are small integers, so float results are exact whatever order the
 * tree adds in, and 8- and 16-bit sums never overflow (Open MPI 4.1 saturates
 * those instead of wrapping). Every result buffer is poisoned before a call,
 * so a result never written is caught.
 *
 * No GPU runtime is linked: device memory comes from the ops table of the
 * backend the loader finds (agg/gpu.h), the same one libagg and the shim load.
 *
 * Exit: 0 every check passed, 1 any failed, 77 no GPU device (a skip), 2 bad
 * arguments; every rank exits alike.
 */
#include <execinfo.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/gpu.h"
#include "agg/reduce.h"

#define SKIP        77
#define POISON      0xa5
#define MAX_ELEM    16      /* bytes of the largest element (float64_int32) */
#define MAX_REPORTS 8       /* failed checks described per rank */
#define MAX_SHOWN   3       /* wrong elements shown per failed check */
#define OP_COPY     (-1)    /* inputs of bcast and allgather: no op */
#define WARMUP      3
#define TIMED       10

static const agg_gpu_ops_t *gpu;
static int rank, size, verbose;
static int host_rank = -1; /* -H: this rank's buffers are host memory */
static long checks, failures;
static uint8_t *poison_src; /* POISON bytes, the source of every poisoning copy */
static size_t poison_len;

/* An ops call that fails leaves nothing sensible to check: stop the job. */
#define GPU_CALL(_call)                                                                  \
    do {                                                                                 \
        if ((_call) != 0) {                                                              \
            fprintf(stderr, "gpu_coll_check: rank %d: %s (line %d): %s\n", rank, #_call, \
                    __LINE__, gpu->error());                                             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                \
        }                                                                                \
    } while (0)

static void fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Counts a failed check; describes the first few of this rank's. */
static void fail_msg(const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (++failures > MAX_REPORTS) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* one write per line, so that the ranks' lines do not interleave */
    fprintf(stderr, "gpu_coll_check: FAIL rank %d: %s\n", rank, line);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        fprintf(stderr, "gpu_coll_check: rank %d: out of host memory (%zu bytes)\n", rank, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* ------------------------------------------------------------------------
 * Device memory, through the ops table only
 */
static void *dev_alloc(size_t n)
{
    void *p = NULL;

    GPU_CALL(gpu->dev_alloc(&p, n ? n : 1));
    return p;
}

/* Any direction; waited for, so the bytes are in place when it returns. */
static void copy_sync(void *dst, const void *src, size_t n)
{
    if (n == 0) {
        return;
    }
    GPU_CALL(gpu->memcpy_async(dst, src, n, NULL));
    GPU_CALL(gpu->stream_sync(NULL));
}

static void poison(void *dev, size_t n)
{
    if (n > poison_len) {
        free(poison_src);
        poison_src = xmalloc(n);
        memset(poison_src, POISON, n);
        poison_len = n;
    }
    copy_sync(dev, poison_src, n);
}

/* ------------------------------------------------------------------------
 * Elements
 */
static int dtype_unsigned(int dtype)
{
    return dtype == AGG_DTYPE_UINT8 || dtype == AGG_DTYPE_UINT16 || dtype == AGG_DTYPE_UINT32 ||
           dtype == AGG_DTYPE_UINT64;
}

static int dtype_float(int dtype)
{
    return dtype == AGG_DTYPE_FLOAT16 || dtype == AGG_DTYPE_BFLOAT16 ||
           dtype == AGG_DTYPE_FLOAT32 || dtype == AGG_DTYPE_FLOAT64;
}

/* The dtype of a pair's value; the dtype itself for the others. */
static int pair_value_dtype(int dtype)
{
    switch (dtype) {
    case AGG_DTYPE_FLOAT32_INT32: return AGG_DTYPE_FLOAT32;
    case AGG_DTYPE_FLOAT64_INT32: return AGG_DTYPE_FLOAT64;
    case AGG_DTYPE_INT64_INT32:   return AGG_DTYPE_INT64;
    case AGG_DTYPE_INT32_INT32:   return AGG_DTYPE_INT32;
    case AGG_DTYPE_INT16_INT32:   return AGG_DTYPE_INT16;
    default:                      return dtype;
    }
}

static size_t pair_index_offset(int dtype)
{
    switch (dtype) {
    case AGG_DTYPE_FLOAT32_INT32: return offsetof(agg_float32_int32_t, index);
    case AGG_DTYPE_FLOAT64_INT32: return offsetof(agg_float64_int32_t, index);
    case AGG_DTYPE_INT64_INT32:   return offsetof(agg_int64_int32_t, index);
    case AGG_DTYPE_INT32_INT32:   return offsetof(agg_int32_int32_t, index);
    case AGG_DTYPE_INT16_INT32:   return offsetof(agg_int16_int32_t, index);
    default:                      return 0;
    }
}

#define PUT(_T, _v)                      \
    do {                                 \
        _T x_ = (_T)(_v);                \
        memcpy(e, &x_, sizeof(x_));      \
    } while (0)

/* Writes v (and idx, for a pair) as one element of dtype; padding is zeroed. */
static void elem_put(int dtype, void *e, long long v, int32_t idx)
{
    memset(e, 0, agg_dtype_size(dtype));
    switch (pair_value_dtype(dtype)) {
    case AGG_DTYPE_INT8:     PUT(int8_t, v); break;
    case AGG_DTYPE_UINT8:    PUT(uint8_t, v); break;
    case AGG_DTYPE_INT16:    PUT(int16_t, v); break;
    case AGG_DTYPE_UINT16:   PUT(uint16_t, v); break;
    case AGG_DTYPE_INT32:    PUT(int32_t, v); break;
    case AGG_DTYPE_UINT32:   PUT(uint32_t, v); break;
    case AGG_DTYPE_INT64:    PUT(int64_t, v); break;
    case AGG_DTYPE_UINT64:   PUT(uint64_t, v); break;
    case AGG_DTYPE_FLOAT16:  PUT(uint16_t, agg_float_to_half((float)v)); break;
    case AGG_DTYPE_BFLOAT16: PUT(uint16_t, agg_float_to_bf16((float)v)); break;
    case AGG_DTYPE_FLOAT32:  PUT(float, v); break;
    case AGG_DTYPE_FLOAT64:  PUT(double, v); break;
    default:                 break;
    }
    if (agg_dtype_is_pair(dtype)) {
        memcpy((uint8_t *)e + pair_index_offset(dtype), &idx, sizeof(idx));
    }
}

#define GET(_T, _fmt, _CT)                                  \
    do {                                                    \
        _T x_;                                              \
        memcpy(&x_, e, sizeof(x_));                         \
        n = snprintf(out, len, _fmt, (_CT)x_);              \
    } while (0)

static void elem_fmt(int dtype, const void *e, char *out, size_t len)
{
    uint16_t h;
    int32_t idx;
    int n = 0;

    switch (pair_value_dtype(dtype)) {
    case AGG_DTYPE_INT8:    GET(int8_t, "%lld", long long); break;
    case AGG_DTYPE_UINT8:   GET(uint8_t, "%llu", unsigned long long); break;
    case AGG_DTYPE_INT16:   GET(int16_t, "%lld", long long); break;
    case AGG_DTYPE_UINT16:  GET(uint16_t, "%llu", unsigned long long); break;
    case AGG_DTYPE_INT32:   GET(int32_t, "%lld", long long); break;
    case AGG_DTYPE_UINT32:  GET(uint32_t, "%llu", unsigned long long); break;
    case AGG_DTYPE_INT64:   GET(int64_t, "%lld", long long); break;
    case AGG_DTYPE_UINT64:  GET(uint64_t, "%llu", unsigned long long); break;
    case AGG_DTYPE_FLOAT32: GET(float, "%.9g", double); break;
    case AGG_DTYPE_FLOAT64: GET(double, "%.17g", double); break;
    case AGG_DTYPE_FLOAT16:
    case AGG_DTYPE_BFLOAT16:
        memcpy(&h, e, sizeof(h));
        n = snprintf(out, len, "%.9g (0x%04x)",
                     (double)(dtype == AGG_DTYPE_FLOAT16 ? agg_half_to_float(h)
                                                         : agg_bf16_to_float(h)),
                     (unsigned)h);
        break;
    default:
        n = snprintf(out, len, "?");
        break;
    }
    if (agg_dtype_is_pair(dtype) && n >= 0 && (size_t)n < len) {
        memcpy(&idx, (const uint8_t *)e + pair_index_offset(dtype), sizeof(idx));
        snprintf(out + n, len - (size_t)n, " index %d", (int)idx);
    }
}

/* Pairs: value and index only, their padding is nobody's business. */
static int elem_same(int dtype, const void *a, const void *b)
{
    size_t io;

    if (!agg_dtype_is_pair(dtype)) {
        return memcmp(a, b, agg_dtype_size(dtype)) == 0;
    }
    io = pair_index_offset(dtype);
    return memcmp(a, b, agg_dtype_size(pair_value_dtype(dtype))) == 0 &&
           memcmp((const uint8_t *)a + io, (const uint8_t *)b + io, sizeof(int32_t)) == 0;
}

/* ------------------------------------------------------------------------
 * Inputs: a function of (rank, dtype, op, count, salt, element) only, so that
 * every rank can make every other rank's
 */
static uint64_t mix(uint64_t x) /* splitmix64's finalizer */
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/*
 * Ranges that keep every result exact in any order of the tree and in range
 * for the smallest type: sums of |v| <= min(8, 127 / size) (unsigned: 255),
 * products with a 2 from at most three ranks, min/max in -100..100 (0..200
 * unsigned). Logical inputs are mostly true on even elements and mostly false
 * on odd ones, one rank in two flipping, so LAND and LOR come out both ways;
 * their true values differ in bits (1..3), so a bitwise result is told from a
 * logical one. Bit ops get biased bits, so AND and OR do not saturate. Pairs
 * take four values: ties everywhere, and the smaller index is not the
 * smaller rank.
 */
static long long gen_value(int dtype, int op, int r, size_t i, uint64_t h, int32_t *idx)
{
    int sgn = !dtype_unsigned(dtype);
    long long m;
    int rare;

    switch (op) {
    case AGG_OP_SUM:
        m = (sgn ? 127 : 255) / size;
        m = m > 8 ? 8 : m;
        return sgn ? (long long)(h % (uint64_t)(2 * m + 1)) - m : (long long)(h % (uint64_t)(m + 1));
    case AGG_OP_PROD:
        m = r < 3 && h % 3 == 0 ? 2 : 1;
        return sgn && (h >> 8) % 4 == 0 ? -m : m;
    case AGG_OP_MIN:
    case AGG_OP_MAX:
        return (long long)(h % 201) - (sgn ? 100 : 0);
    case AGG_OP_LAND:
    case AGG_OP_LOR:
    case AGG_OP_LXOR:
        rare = h % (uint64_t)(2 * size) == 0;
        return rare == (i % 2 == 1) ? 1 + (long long)((h >> 16) % 3) : 0;
    case AGG_OP_BAND:
        return (long long)(h | mix(h));
    case AGG_OP_BOR:
        return (long long)(h & mix(h));
    case AGG_OP_BXOR:
        return (long long)h;
    case AGG_OP_MINLOC:
    case AGG_OP_MAXLOC:
        *idx = (int32_t)(((unsigned)r * 5u + (unsigned)(i % 11)) % 7u) - 3;
        return (long long)(h % 4) - 1;
    default: /* a copy: as varied as the type holds, no NaN */
        if (agg_dtype_is_pair(dtype)) {
            *idx = (int32_t)(h >> 40);
            return (long long)(h % 2001) - 1000;
        }
        if (dtype == AGG_DTYPE_FLOAT16 || dtype == AGG_DTYPE_BFLOAT16) {
            return (long long)(h % 2001) - 1000;
        }
        return dtype_float(dtype) ? (long long)(h % 2000001) - 1000000 : (long long)h;
    }
}

/* Rank r's count elements of dtype for op. */
static void gen(void *buf, int dtype, int op, size_t count, int r, unsigned salt)
{
    size_t es = agg_dtype_size(dtype), i;
    uint64_t seed = mix(mix(((uint64_t)(unsigned)r << 32) ^ ((uint64_t)(unsigned)dtype << 24) ^
                            ((uint64_t)(unsigned)(op + 1) << 16) ^ salt) ^
                        count);

    for (i = 0; i < count; ++i) {
        int32_t idx = 0;
        long long v = gen_value(dtype, op, r, i, mix(seed + i), &idx);

        elem_put(dtype, (uint8_t *)buf + i * es, v, idx);
    }
}

/* What a reduction of every rank's inputs gives, folded in rank order. */
static void expect_reduce(void *want, void *tmp, int dtype, int op, size_t count, unsigned salt)
{
    agg_reduce_fn_t fn = agg_reduce_fn(dtype, op);
    int r;

    gen(want, dtype, op, count, 0, salt);
    for (r = 1; r < size; ++r) {
        gen(tmp, dtype, op, count, r, salt);
        fn(want, tmp, count);
    }
}

/* n elements of got against want; one check. */
static void verify(const char *what, const char *label, int dtype, const void *got,
                   const void *want, size_t n)
{
    size_t es = agg_dtype_size(dtype), i, bad = 0;
    char g[96], w[96];

    checks++;
    for (i = 0; i < n; ++i) {
        const uint8_t *a = (const uint8_t *)got + i * es, *b = (const uint8_t *)want + i * es;

        if (elem_same(dtype, a, b)) {
            continue;
        }
        if (bad++ < MAX_SHOWN && failures < MAX_REPORTS) {
            elem_fmt(dtype, b, w, sizeof(w));
            elem_fmt(dtype, a, g, sizeof(g));
            fprintf(stderr, "gpu_coll_check: rank %d: %s %s: element %zu: expected %s, got %s\n",
                    rank, what, label, i, w, g);
        }
    }
    if (bad > 0) {
        fail_msg("%s %s: %zu of %zu elements wrong", what, label, bad, n);
    }
}

/* ------------------------------------------------------------------------
 * -m api: libagg directly, MPI as its out-of-band channel
 */

/* PMPI_: the channel must work whether or not the shim is preloaded too. */
static int oob_bcast(void *ctx, void *buf, size_t len, int root)
{
    return PMPI_Bcast(buf, (int)len, MPI_BYTE, root, *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int oob_barrier(void *ctx)
{
    return PMPI_Barrier(*(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int oob_gather(void *ctx, int root, const void *sbuf, void *rbuf, size_t len)
{
    return PMPI_Gather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, root,
                       *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int api_ok(agg_status_t st, const char *what, const char *label)
{
    checks++;
    if (st != AGG_OK) {
        fail_msg("%s %s: %s (%s)", what, label, agg_strerror(st), agg_context_last_error());
        return 0;
    }
    return 1;
}

/* A libagg communicator over *comm, which must outlive it (its oob_ctx). */
static agg_comm_t *api_comm(agg_context_t *ctx, MPI_Comm *comm)
{
    agg_comm_spec_t spec = {0};
    MPI_Group g, wg;
    agg_comm_t *ac = NULL;
    int *idx, *world, i;

    MPI_Comm_rank(*comm, &spec.rank);
    MPI_Comm_size(*comm, &spec.size);
    idx   = xmalloc((size_t)spec.size * sizeof(int));
    world = xmalloc((size_t)spec.size * sizeof(int));
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
    if (!api_ok(agg_comm_init(ctx, &spec, &ac), "agg_comm_init", "")) {
        ac = NULL;
    }
    free(idx);
    free(world);
    return ac;
}

/* What libagg says a device buffer is, and registering device memory (and host memory as such). */
static void api_memory(agg_context_t *ctx)
{
    const size_t len = 1 << 20;
    uint8_t *d = dev_alloc(len), *h = xmalloc(len);
    agg_mem_stats_t before, after;
    agg_mem_reg_t *reg = NULL;
    agg_mem_type_t mt;
    agg_status_t st;
    int cur, qd, k;

    GPU_CALL(gpu->device_get(&cur));
    memset(h, 1, len); /* mapped, so that only its kind makes the registration fail */
    for (k = 0; k < 2; ++k) { /* the start and the last byte of the allocation */
        mt = agg_mem_query(d + (k ? len - 1 : 0), &qd);
        checks++;
        if ((int)mt != gpu->mem_type || qd != cur) {
            fail_msg("agg_mem_query(device buffer + %zu): memory type %d on device %d, "
                     "expected %d on device %d", k ? len - 1 : 0, (int)mt, qd, gpu->mem_type, cur);
        }
    }
    mt = agg_mem_query(h, &qd);
    checks++;
    if (mt != AGG_MEM_HOST || qd != -1) {
        fail_msg("agg_mem_query(malloc'ed buffer): memory type %d on device %d, expected host, -1",
                 (int)mt, qd);
    }

    if (api_ok(agg_mem_stats(ctx, &before), "agg_mem_stats", "") &&
        api_ok(agg_mem_register(ctx, d, len, (agg_mem_type_t)gpu->mem_type, &reg),
               "agg_mem_register", "(device buffer)") &&
        api_ok(agg_mem_stats(ctx, &after), "agg_mem_stats", "")) {
        if (rank == 0) {
            printf("gpu_coll_check: a device registration %s exported as a dma-buf\n",
                   after.dmabuf > before.dmabuf ? "was" : "was not");
        }
        api_ok(agg_mem_deregister(ctx, reg), "agg_mem_deregister", "(device buffer)");
    }
    st = agg_mem_register(ctx, h, len, (agg_mem_type_t)gpu->mem_type, &reg);
    checks++;
    if (st != AGG_ERR_INVALID_PARAM) {
        fail_msg("agg_mem_register(malloc'ed buffer as %s memory): %s, expected %s", gpu->name,
                 agg_strerror(st), agg_strerror(AGG_ERR_INVALID_PARAM));
        if (st == AGG_OK) {
            agg_mem_deregister(ctx, reg);
        }
    }
    gpu->dev_free(d);
    free(h);
}

/*
 * Every dtype and op libagg reduces: allreduce into a second device buffer
 * and in place, reduce to a rotating root (the other ranks' buffer must stay
 * as it was: libagg does not write it), bcast of the bytes.
 */
static void api_colls(agg_comm_t *comm)
{
    static const size_t counts[] = {1, 1000, 300000, (1u << 20) + 5};
    const size_t nc = sizeof(counts) / sizeof(counts[0]), maxb = counts[nc - 1] * MAX_ELEM;
    const agg_mem_type_t mt = (agg_mem_type_t)gpu->mem_type;
    uint8_t *in = xmalloc(maxb), *want = xmalloc(maxb), *tmp = xmalloc(maxb), *got = xmalloc(maxb);
    void *dsend = dev_alloc(maxb), *drecv = dev_alloc(maxb);
    unsigned k = 0;
    int dtype, op;
    size_t ci;

    for (dtype = 0; dtype < AGG_DTYPE__COUNT; ++dtype) {
        for (op = 0; op < AGG_OP__COUNT; ++op) {
            if (agg_reduce_fn(dtype, op) == NULL) {
                continue;
            }
            for (ci = 0; ci < nc; ++ci, ++k) {
                size_t count = counts[ci], bytes = count * agg_dtype_size(dtype);
                int root = (int)(k % (unsigned)size), broot = (int)((k + 1) % (unsigned)size);
                agg_reduce_spec_t base = {.count = count, .dtype = (agg_dtype_t)dtype,
                                          .op = (agg_op_t)op, .sbuf_mem = mt, .rbuf_mem = mt};
                agg_reduce_spec_t rs;
                agg_data_spec_t ds;
                char label[96];

                snprintf(label, sizeof(label), "%s %s count %zu", agg_dtype_name(dtype),
                         agg_op_name(op), count);
                if (verbose && rank == 0) {
                    printf("gpu_coll_check: %s\n", label);
                    fflush(stdout);
                }
                gen(in, dtype, op, count, rank, 0);
                expect_reduce(want, tmp, dtype, op, count, 0);
                copy_sync(dsend, in, bytes);

                poison(drecv, bytes);
                rs      = base;
                rs.sbuf = dsend;
                rs.rbuf = drecv;
                if (api_ok(agg_allreduce(comm, &rs), "agg_allreduce", label)) {
                    copy_sync(got, drecv, bytes);
                    verify("agg_allreduce", label, dtype, got, want, count);
                }

                copy_sync(drecv, in, bytes);
                rs.sbuf = drecv;
                if (api_ok(agg_allreduce(comm, &rs), "agg_allreduce(in place)", label)) {
                    copy_sync(got, drecv, bytes);
                    verify("agg_allreduce(in place)", label, dtype, got, want, count);
                }

                poison(drecv, bytes);
                rs      = base;
                rs.sbuf = dsend;
                rs.rbuf = drecv;
                rs.root = root;
                if (api_ok(agg_reduce(comm, &rs), "agg_reduce", label)) {
                    copy_sync(got, drecv, bytes);
                    if (rank == root) {
                        verify("agg_reduce", label, dtype, got, want, count);
                    } else {
                        checks++;
                        if (memcmp(got, poison_src, bytes) != 0) {
                            fail_msg("agg_reduce %s: root %d, but rank %d's rbuf was written",
                                     label, root, rank);
                        }
                    }
                }

                /* the root's own inputs, for the bytes a bcast carries */
                gen(want, dtype, OP_COPY, count, broot, (unsigned)op + 1);
                if (rank == broot) {
                    copy_sync(drecv, want, bytes);
                } else {
                    poison(drecv, bytes);
                }
                ds = (agg_data_spec_t){.sbuf = drecv, .rbuf = drecv, .bytes = bytes,
                                       .root = broot, .sbuf_mem = mt, .rbuf_mem = mt};
                if (api_ok(agg_bcast(comm, &ds), "agg_bcast", label)) {
                    copy_sync(got, drecv, bytes);
                    verify("agg_bcast", label, dtype, got, want, count);
                }
            }
        }
    }
    gpu->dev_free(dsend);
    gpu->dev_free(drecv);
    free(in);
    free(want);
    free(tmp);
    free(got);
}

/*
 * One thread driving buffers on ndev devices over three communicators, the
 * device switched before every call: libagg must stage each call on its
 * buffers' device, whichever the communicator used last.
 */
static void api_devices(agg_context_t *ctx, int ndev)
{
    enum { NCOMM = 3, COUNT = 1 << 18 };
    const size_t bytes = COUNT * sizeof(float);
    const agg_mem_type_t mt = (agg_mem_type_t)gpu->mem_type;
    MPI_Comm mc[NCOMM];
    agg_comm_t *ac[NCOMM];
    void *ds[AGG_GPU_MAX_DEV], *dr[AGG_GPU_MAX_DEV];
    float *in = xmalloc(bytes), *want = xmalloc(bytes), *tmp = xmalloc(bytes),
          *got = xmalloc(bytes);
    int start, d, i, c, ok = 1;

    GPU_CALL(gpu->device_get(&start));
    for (d = 0; d < ndev && ok; ++d) {
        ok = gpu->device_set(d) == 0;
    }
    /* a rank with fewer devices must not leave the others waiting in a collective */
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    checks++;
    if (!ok) {
        fail_msg("-d %d: not every rank can make devices 0 to %d current (%s)", ndev, ndev - 1,
                 gpu->error());
        GPU_CALL(gpu->device_set(start));
        goto out_host;
    }
    for (d = 0; d < ndev; ++d) {
        GPU_CALL(gpu->device_set(d));
        ds[d] = dev_alloc(bytes);
        dr[d] = dev_alloc(bytes);
    }
    for (c = 0; c < NCOMM; ++c) {
        MPI_Comm_dup(MPI_COMM_WORLD, &mc[c]);
        ac[c] = api_comm(ctx, &mc[c]);
        ok &= ac[c] != NULL;
    }
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    for (i = 0; ok && i < NCOMM * ndev * 4; ++i) {
        agg_reduce_spec_t rs = {.count = COUNT, .dtype = AGG_DTYPE_FLOAT32, .op = AGG_OP_SUM,
                                .sbuf_mem = mt, .rbuf_mem = mt};
        char label[96];

        d = i % ndev;
        snprintf(label, sizeof(label), "float32 sum count %d, device %d, communicator %d", COUNT,
                 d, i % NCOMM);
        GPU_CALL(gpu->device_set(d));
        gen(in, AGG_DTYPE_FLOAT32, AGG_OP_SUM, COUNT, rank, (unsigned)i + 100);
        expect_reduce(want, tmp, AGG_DTYPE_FLOAT32, AGG_OP_SUM, COUNT, (unsigned)i + 100);
        copy_sync(ds[d], in, bytes);
        poison(dr[d], bytes);
        rs.sbuf = ds[d];
        rs.rbuf = dr[d];
        if (api_ok(agg_allreduce(ac[i % NCOMM], &rs), "agg_allreduce", label)) {
            copy_sync(got, dr[d], bytes);
            verify("agg_allreduce", label, AGG_DTYPE_FLOAT32, got, want, COUNT);
        }
    }
    for (d = 0; d < ndev; ++d) {
        for (c = 0; c < 2; ++c) {
            int qd;
            agg_mem_type_t q = agg_mem_query(c ? dr[d] : ds[d], &qd);

            checks++;
            if ((int)q != gpu->mem_type || qd != d) {
                fail_msg("agg_mem_query(a buffer of device %d): memory type %d on device %d",
                         d, (int)q, qd);
            }
        }
    }
    for (c = 0; c < NCOMM; ++c) {
        if (ac[c] != NULL) {
            api_ok(agg_comm_destroy(ac[c]), "agg_comm_destroy", "");
        }
        MPI_Comm_free(&mc[c]);
    }
    for (d = 0; d < ndev; ++d) {
        GPU_CALL(gpu->device_set(d));
        gpu->dev_free(ds[d]);
        gpu->dev_free(dr[d]);
    }
    GPU_CALL(gpu->device_set(start));
out_host:
    free(in);
    free(want);
    free(tmp);
    free(got);
}

/* ------------------------------------------------------------------------
 * -m mpi: MPI calls on device buffers, PMPI_ calls on host copies
 */
static const int mpi_dtypes[] = {
    AGG_DTYPE_INT8,    AGG_DTYPE_UINT8,   AGG_DTYPE_INT16,         AGG_DTYPE_UINT16,
    AGG_DTYPE_INT32,   AGG_DTYPE_UINT32,  AGG_DTYPE_INT64,         AGG_DTYPE_UINT64,
    AGG_DTYPE_FLOAT32, AGG_DTYPE_FLOAT64, AGG_DTYPE_FLOAT32_INT32, AGG_DTYPE_FLOAT64_INT32,
    AGG_DTYPE_INT32_INT32};

static MPI_Datatype mpi_type(int dtype, const char **name)
{
    switch (dtype) {
    case AGG_DTYPE_INT8:          *name = "MPI_INT8_T"; return MPI_INT8_T;
    case AGG_DTYPE_UINT8:         *name = "MPI_UINT8_T"; return MPI_UINT8_T;
    case AGG_DTYPE_INT16:         *name = "MPI_INT16_T"; return MPI_INT16_T;
    case AGG_DTYPE_UINT16:        *name = "MPI_UINT16_T"; return MPI_UINT16_T;
    case AGG_DTYPE_INT32:         *name = "MPI_INT32_T"; return MPI_INT32_T;
    case AGG_DTYPE_UINT32:        *name = "MPI_UINT32_T"; return MPI_UINT32_T;
    case AGG_DTYPE_INT64:         *name = "MPI_INT64_T"; return MPI_INT64_T;
    case AGG_DTYPE_UINT64:        *name = "MPI_UINT64_T"; return MPI_UINT64_T;
    case AGG_DTYPE_FLOAT32:       *name = "MPI_FLOAT"; return MPI_FLOAT;
    case AGG_DTYPE_FLOAT64:       *name = "MPI_DOUBLE"; return MPI_DOUBLE;
    case AGG_DTYPE_FLOAT32_INT32: *name = "MPI_FLOAT_INT"; return MPI_FLOAT_INT;
    case AGG_DTYPE_FLOAT64_INT32: *name = "MPI_DOUBLE_INT"; return MPI_DOUBLE_INT;
    case AGG_DTYPE_INT32_INT32:   *name = "MPI_2INT"; return MPI_2INT;
    default:                      *name = "?"; return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(int op)
{
    switch (op) {
    case AGG_OP_SUM:    return MPI_SUM;
    case AGG_OP_PROD:   return MPI_PROD;
    case AGG_OP_MIN:    return MPI_MIN;
    case AGG_OP_MAX:    return MPI_MAX;
    case AGG_OP_LAND:   return MPI_LAND;
    case AGG_OP_BAND:   return MPI_BAND;
    case AGG_OP_LOR:    return MPI_LOR;
    case AGG_OP_BOR:    return MPI_BOR;
    case AGG_OP_LXOR:   return MPI_LXOR;
    case AGG_OP_BXOR:   return MPI_BXOR;
    case AGG_OP_MINLOC: return MPI_MINLOC;
    case AGG_OP_MAXLOC: return MPI_MAXLOC;
    default:            return MPI_OP_NULL;
    }
}

static int mpi_ok(int rc, const char *what, const char *label)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    checks++;
    if (rc != MPI_SUCCESS) {
        MPI_Error_string(rc, msg, &len);
        fail_msg("%s %s: %s", what, label, msg);
        return 0;
    }
    return 1;
}

/* The reductions for one type, op and count. */
static void mpi_reductions(int dtype, int op, size_t count, int root, uint8_t *in, uint8_t *want,
                           uint8_t *got, void *dsend, void *drecv)
{
    const char *tname;
    MPI_Datatype dt = mpi_type(dtype, &tname);
    MPI_Op mop = mpi_op(op);
    size_t bytes = count * agg_dtype_size(dtype);
    int n = (int)count, rc;
    MPI_Request req;
    char label[96];

    snprintf(label, sizeof(label), "%s %s count %zu", tname, agg_op_name(op), count);
    if (verbose && rank == 0) {
        printf("gpu_coll_check: %s\n", label);
        fflush(stdout);
    }
    gen(in, dtype, op, count, rank, 0);
    PMPI_Allreduce(in, want, n, dt, mop, MPI_COMM_WORLD);
    copy_sync(dsend, in, bytes);

    poison(drecv, bytes);
    if (mpi_ok(MPI_Allreduce(dsend, drecv, n, dt, mop, MPI_COMM_WORLD), "MPI_Allreduce", label)) {
        copy_sync(got, drecv, bytes);
        verify("MPI_Allreduce", label, dtype, got, want, count);
    }

    copy_sync(drecv, in, bytes);
    if (mpi_ok(MPI_Allreduce(MPI_IN_PLACE, drecv, n, dt, mop, MPI_COMM_WORLD),
               "MPI_Allreduce(MPI_IN_PLACE)", label)) {
        copy_sync(got, drecv, bytes);
        verify("MPI_Allreduce(MPI_IN_PLACE)", label, dtype, got, want, count);
    }

    poison(drecv, bytes);
    rc = MPI_Iallreduce(dsend, drecv, n, dt, mop, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (mpi_ok(rc, "MPI_Iallreduce", label)) {
        copy_sync(got, drecv, bytes);
        verify("MPI_Iallreduce", label, dtype, got, want, count);
    }

    /* the other ranks pass no receive buffer, as MPI allows */
    PMPI_Reduce(in, rank == root ? want : NULL, n, dt, mop, root, MPI_COMM_WORLD);
    poison(drecv, bytes);
    if (mpi_ok(MPI_Reduce(dsend, rank == root ? drecv : NULL, n, dt, mop, root, MPI_COMM_WORLD),
               "MPI_Reduce", label) &&
        rank == root) {
        copy_sync(got, drecv, bytes);
        verify("MPI_Reduce", label, dtype, got, want, count);
    }

    gen(in, dtype, op, count * (size_t)size, rank, 1);
    PMPI_Reduce_scatter_block(in, want, n, dt, mop, MPI_COMM_WORLD);
    copy_sync(dsend, in, bytes * (size_t)size);
    poison(drecv, bytes);
    if (mpi_ok(MPI_Reduce_scatter_block(dsend, drecv, n, dt, mop, MPI_COMM_WORLD),
               "MPI_Reduce_scatter_block", label)) {
        copy_sync(got, drecv, bytes);
        verify("MPI_Reduce_scatter_block", label, dtype, got, want, count);
    }
    poison(drecv, bytes);
    rc = MPI_Ireduce_scatter_block(dsend, drecv, n, dt, mop, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (mpi_ok(rc, "MPI_Ireduce_scatter_block", label)) {
        copy_sync(got, drecv, bytes);
        verify("MPI_Ireduce_scatter_block", label, dtype, got, want, count);
    }

    /* counts that differ (odd ranks one short): the blocks of one vector */
    {
        int *counts = xmalloc((size_t)size * sizeof(int)), m;
        size_t mine = count - (size_t)(rank % 2), esize = agg_dtype_size(dtype);

        for (m = 0; m < size; ++m) {
            counts[m] = n - m % 2;
        }
        PMPI_Reduce_scatter(in, want, counts, dt, mop, MPI_COMM_WORLD);
        poison(drecv, bytes);
        if (mpi_ok(MPI_Reduce_scatter(dsend, drecv, counts, dt, mop, MPI_COMM_WORLD),
                   "MPI_Reduce_scatter", label)) {
            copy_sync(got, drecv, mine * esize);
            verify("MPI_Reduce_scatter", label, dtype, got, want, mine);
        }
        free(counts);
    }
}

/* The collectives that move data without an op, for one type and count. */
static void mpi_moves(int dtype, size_t count, int root, uint8_t *in, uint8_t *want,
                      uint8_t *got, void *dsend, void *drecv)
{
    const char *tname;
    MPI_Datatype dt = mpi_type(dtype, &tname);
    size_t bytes = count * agg_dtype_size(dtype);
    int n = (int)count, rc;
    MPI_Request req;
    char label[96];

    snprintf(label, sizeof(label), "%s count %zu", tname, count);
    gen(in, dtype, OP_COPY, count, rank, 2);
    memcpy(want, in, bytes);
    PMPI_Bcast(want, n, dt, root, MPI_COMM_WORLD);
    if (rank == root) {
        copy_sync(drecv, in, bytes);
    } else {
        poison(drecv, bytes);
    }
    if (mpi_ok(MPI_Bcast(drecv, n, dt, root, MPI_COMM_WORLD), "MPI_Bcast", label)) {
        copy_sync(got, drecv, bytes);
        verify("MPI_Bcast", label, dtype, got, want, count);
    }

    PMPI_Allgather(in, n, dt, want, n, dt, MPI_COMM_WORLD);
    copy_sync(dsend, in, bytes);
    poison(drecv, bytes * (size_t)size);
    if (mpi_ok(MPI_Allgather(dsend, n, dt, drecv, n, dt, MPI_COMM_WORLD), "MPI_Allgather",
               label)) {
        copy_sync(got, drecv, bytes * (size_t)size);
        verify("MPI_Allgather", label, dtype, got, want, count * (size_t)size);
    }
    poison(drecv, bytes * (size_t)size);
    rc = MPI_Iallgather(dsend, n, dt, drecv, n, dt, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) {
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (mpi_ok(rc, "MPI_Iallgather", label)) {
        copy_sync(got, drecv, bytes * (size_t)size);
        verify("MPI_Iallgather", label, dtype, got, want, count * (size_t)size);
    }

    /* odd ranks one short, placed in reverse rank order */
    {
        int *counts = xmalloc((size_t)size * sizeof(int));
        int *displs = xmalloc((size_t)size * sizeof(int)), m, at = 0;
        size_t all;

        for (m = size - 1; m >= 0; --m) {
            counts[m] = n - m % 2;
            displs[m] = at;
            at += counts[m];
        }
        all = (size_t)at * agg_dtype_size(dtype);
        PMPI_Allgatherv(in, counts[rank], dt, want, counts, displs, dt, MPI_COMM_WORLD);
        poison(drecv, all > 0 ? all : 1);
        if (mpi_ok(MPI_Allgatherv(dsend, counts[rank], dt, drecv, counts, displs, dt,
                                  MPI_COMM_WORLD), "MPI_Allgatherv", label)) {
            copy_sync(got, drecv, all);
            verify("MPI_Allgatherv", label, dtype, got, want, (size_t)at);
        }
        free(counts);
        free(displs);
    }
}

static void mpi_colls(void)
{
    static const size_t counts[] = {1, 1000, (1u << 18) + 3};
    const size_t nc = sizeof(counts) / sizeof(counts[0]);
    const size_t maxb = counts[nc - 1] * MAX_ELEM * (size_t)size; /* reduce-scatter, allgather */
    uint8_t *in = xmalloc(maxb), *want = xmalloc(maxb), *got = xmalloc(maxb);
    int host = rank == host_rank;
    void *dsend = host ? xmalloc(maxb) : dev_alloc(maxb);
    void *drecv = host ? xmalloc(maxb) : dev_alloc(maxb);
    unsigned k = 0;
    size_t t, ci;
    int op;

    for (t = 0; t < sizeof(mpi_dtypes) / sizeof(mpi_dtypes[0]); ++t) {
        int dtype = mpi_dtypes[t];

        for (op = 0; op < AGG_OP__COUNT; ++op) {
            if (agg_reduce_fn(dtype, op) == NULL) {
                continue;
            }
            for (ci = 0; ci < nc; ++ci, ++k) {
                mpi_reductions(dtype, op, counts[ci], (int)(k % (unsigned)size), in, want, got,
                               dsend, drecv);
            }
        }
        for (ci = 0; ci < nc; ++ci, ++k) {
            mpi_moves(dtype, counts[ci], (int)(k % (unsigned)size), in, want, got, dsend,
                      drecv);
        }
    }
    if (host) {
        free(dsend);
        free(drecv);
    } else {
        gpu->dev_free(dsend);
        gpu->dev_free(drecv);
    }
    free(in);
    free(want);
    free(got);
}

/* ------------------------------------------------------------------------
 * -b: bandwidth
 */
enum { B_AGG, B_MPI, B_PMPI, B_COPY };

typedef struct bench_call {
    int            how;
    agg_comm_t    *comm;  /* B_AGG */
    agg_mem_type_t mem;   /* B_AGG */
    const void    *src;   /* sbuf, or a copy's source */
    void          *dst;   /* rbuf, or a copy's destination */
    size_t         count; /* floats */
} bench_call_t;

static void bench_once(const bench_call_t *b)
{
    agg_reduce_spec_t rs = {.sbuf = b->src, .rbuf = b->dst, .count = b->count,
                            .dtype = AGG_DTYPE_FLOAT32, .op = AGG_OP_SUM,
                            .sbuf_mem = b->mem, .rbuf_mem = b->mem};
    int n = (int)b->count;

    switch (b->how) {
    case B_AGG:
        api_ok(agg_allreduce(b->comm, &rs), "agg_allreduce", "(benchmark)");
        break;
    case B_MPI:
        mpi_ok(MPI_Allreduce(b->src, b->dst, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
               "MPI_Allreduce", "(benchmark)");
        break;
    case B_PMPI:
        mpi_ok(PMPI_Allreduce(b->src, b->dst, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
               "PMPI_Allreduce", "(benchmark)");
        break;
    default:
        copy_sync(b->dst, b->src, b->count * sizeof(float));
        break;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/*
 * Seconds per call: each call between a barrier and the slowest rank's end
 * (the max over ranks), the median of TIMED after WARMUP.
 */
static double bench_time(const bench_call_t *b)
{
    double t[TIMED], x;
    int i;

    for (i = 0; i < WARMUP + TIMED; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        x = MPI_Wtime();
        bench_once(b);
        x = MPI_Wtime() - x;
        /* bookkeeping, not under test: past the shim */
        PMPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= WARMUP) {
            t[i - WARMUP] = x;
        }
    }
    qsort(t, TIMED, sizeof(t[0]), cmp_double);
    return (t[(TIMED - 1) / 2] + t[TIMED / 2]) / 2;
}

/* The first and last sum of a benchmark's result: a fast answer must also be right. */
static void bench_spot(const char *what, size_t bytes, const float *first, const float *last)
{
    float want = (float)size * (float)(size + 1) / 2;

    checks++;
    if (*first != want || *last != want) {
        fail_msg("%s of %zu bytes: first and last element %g and %g, expected %g", what, bytes,
                 (double)*first, (double)*last, (double)want);
    }
}

static void bench(agg_comm_t *comm, size_t maxbytes)
{
    static const size_t sizes[] = {(size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20,
                                   (size_t)256 << 20};
    const int mpi = comm == NULL;
    agg_gpu_dev_info_t info;
    size_t s, i;
    int cur;

    GPU_CALL(gpu->device_get(&cur));
    GPU_CALL(gpu->device_info(cur, &info));
    if (rank == 0) {
        printf("gpu_coll_check: float32 sum allreduce, %s, %d ranks, %s device %d (%s); "
               "median of %d, GB/s = bytes / time\n",
               mpi ? "MPI calls" : "libagg", size, gpu->name, cur, info.name, TIMED);
        printf("%12s %10s %10s %10s %10s %9s %9s", "bytes", "dev_us", "dev_GBps", "host_GBps",
               "copy_GBps", "dev/copy", "dev/host");
        if (mpi) {
            printf(" %10s %10s", "ompi_GBps", "host/ompi");
        }
        printf("\n");
    }
    for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        size_t bytes = sizes[s], count = bytes / sizeof(float);
        bench_call_t b = {.how = mpi ? B_MPI : B_AGG, .comm = comm, .count = count};
        double t_dev, t_host, t_ompi = 0, t_h2d, t_d2h, t_copy;
        float *hs, *hr, first, last;
        void *ds, *dr, *pinned;

        /* every rank may share one device: leave it half its memory */
        if (bytes > maxbytes ||
            (info.total_mem > 0 && 2 * bytes * (size_t)size > info.total_mem / 2)) {
            if (rank == 0) {
                printf("%12zu (skipped: over %s)\n", bytes,
                       bytes > maxbytes ? "-e" : "half the device memory");
            }
            continue;
        }
        hs = xmalloc(bytes);
        hr = xmalloc(bytes);
        for (i = 0; i < count; ++i) { /* touched: no page faults in the timing */
            hs[i] = (float)(rank + 1);
            hr[i] = 0;
        }
        ds = dev_alloc(bytes);
        dr = dev_alloc(bytes);
        GPU_CALL(gpu->host_alloc(&pinned, bytes));
        copy_sync(ds, hs, bytes);
        poison(dr, bytes);

        b.mem = (agg_mem_type_t)gpu->mem_type;
        b.src = ds;
        b.dst = dr;
        t_dev = bench_time(&b);
        copy_sync(&first, dr, sizeof(first));
        copy_sync(&last, (float *)dr + count - 1, sizeof(last));
        bench_spot("device allreduce", bytes, &first, &last);

        b.mem = AGG_MEM_HOST;
        b.src = hs;
        b.dst = hr;
        t_host = bench_time(&b);
        bench_spot("host allreduce", bytes, &hr[0], &hr[count - 1]);
        if (mpi) {
            b.how = B_PMPI;
            t_ompi = bench_time(&b);
        }

        memset(pinned, 1, bytes);
        b.how = B_COPY;
        b.src = pinned;
        b.dst = ds;
        t_h2d = bench_time(&b);
        b.src = dr;
        b.dst = pinned;
        t_d2h = bench_time(&b);
        t_copy = t_h2d > t_d2h ? t_h2d : t_d2h;

        if (rank == 0) {
            double dev = (double)bytes / t_dev / 1e9, host = (double)bytes / t_host / 1e9,
                   copy = (double)bytes / t_copy / 1e9;

            printf("%12zu %10.1f %10.2f %10.2f %10.2f %9.2f %9.2f", bytes, t_dev * 1e6, dev,
                   host, copy, dev / copy, dev / host);
            if (mpi) {
                double ompi = (double)bytes / t_ompi / 1e9;

                printf(" %10.2f %10.2f", ompi, host / ompi);
            }
            printf("\n");
            fflush(stdout);
        }
        gpu->host_free(pinned);
        gpu->dev_free(ds);
        gpu->dev_free(dr);
        free(hs);
        free(hr);
    }
}

/* ------------------------------------------------------------------------
 * main
 */
static MPI_Comm oob_world; /* the context's out-of-band channel */

static void run_api(int ndev, int bench_only, size_t maxbytes)
{
    agg_context_spec_t spec = {0};
    agg_context_t *ctx = NULL;
    agg_comm_t *comm;
    MPI_Comm world;

    MPI_Comm_dup(MPI_COMM_WORLD, &oob_world);
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    spec.world_rank  = rank;
    spec.world_size  = size;
    spec.oob.bcast   = oob_bcast;
    spec.oob.barrier = oob_barrier;
    spec.oob.gather  = oob_gather;
    spec.oob_ctx     = &oob_world;
    /* every rank gets the same status, so all of them stop here alike */
    if (!api_ok(agg_context_init(&spec, &ctx), "agg_context_init", "")) {
        goto out;
    }
    comm = api_comm(ctx, &world);
    if (comm != NULL) {
        if (bench_only) {
            bench(comm, maxbytes);
        } else {
            api_memory(ctx);
            api_colls(comm);
            api_devices(ctx, ndev);
        }
        api_ok(agg_comm_destroy(comm), "agg_comm_destroy", "");
    }
    api_ok(agg_context_finalize(ctx), "agg_context_finalize", "");
out:
    MPI_Comm_free(&world);
    MPI_Comm_free(&oob_world);
}

static int parse_bytes(const char *s, size_t *out)
{
    static const char units[] = "kmgKMG";
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    const char *u = *end != '\0' ? strchr(units, *end) : NULL;

    if (u != NULL) {
        v <<= 10 * (1 + (u - units) % 3);
        ++end;
    }
    if (end == s || *end != '\0' || v == 0) {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: gpu_coll_check -m api|mpi [-d NDEV] [-H RANK] [-b [-e MAXBYTES]] [-v]\n"
            "  -m api   libagg called directly; -m mpi: MPI calls (run with the shim preloaded)\n"
            "  -d NDEV  -m api: devices used in turn by the device-switching checks (default 1)\n"
            "  -H RANK  -m mpi: that rank's buffers are host memory, the others' device memory\n"
            "  -b       a bandwidth table instead of the checks; -e: largest size (default 256M)\n"
            "  -v       name each type, op and count on rank 0 before it runs\n");
}

/* A crash says where, also when the runtime's or MPI's handlers do not. */
static void on_fault(int sig)
{
    void *frames[64];
    int n = backtrace(frames, 64);

    fprintf(stderr, "gpu_coll_check: rank %d: signal %d; stack:\n", rank, sig);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    const char *mode = NULL;
    size_t maxbytes = (size_t)256 << 20;
    int ndev = 1, bench_only = 0, opt, bad = 0, have;
    long totals[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    signal(SIGSEGV, on_fault);
    signal(SIGBUS, on_fault);
    while ((opt = getopt(argc, argv, "m:d:be:H:v")) != -1) {
        switch (opt) {
        case 'm': mode = optarg; break;
        case 'd': ndev = atoi(optarg); break;
        case 'b': bench_only = 1; break;
        case 'e': bad |= parse_bytes(optarg, &maxbytes) != 0; break;
        case 'H': host_rank = atoi(optarg); break;
        case 'v': verbose = 1; break;
        default: bad = 1; break;
        }
    }
    if (bad || optind != argc || mode == NULL ||
        (strcmp(mode, "api") != 0 && strcmp(mode, "mpi") != 0) || ndev < 1 ||
        ndev > AGG_GPU_MAX_DEV) {
        if (rank == 0) {
            usage();
        }
        MPI_Finalize();
        return 2;
    }

    agg_gpu_load(AGG_GPU_AUTO, "auto", &gpu);
    /* one rank without a device would leave the others waiting in a collective */
    have = gpu != NULL;
    PMPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!have) {
        if (rank == 0) {
            printf("no GPU device: %s\n", gpu == NULL ? agg_gpu_why() : "not on every rank");
            fflush(stdout);
        }
        MPI_Finalize();
        return SKIP;
    }

    if (strcmp(mode, "api") == 0) {
        run_api(ndev, bench_only, maxbytes);
    } else if (bench_only) {
        bench(NULL, maxbytes);
    } else {
        mpi_colls();
    }

    totals[0] = checks;
    totals[1] = failures;
    PMPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (totals[1] == 0) {
            printf("gpu_coll_check: %ld checks passed\n", totals[0]);
        } else {
            printf("gpu_coll_check: %ld of %ld checks failed\n", totals[1], totals[0]);
        }
    }
    free(poison_src);
    MPI_Finalize();
    return totals[1] != 0;
}
