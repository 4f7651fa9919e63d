/*
 * agg_reduce_bench: how fast the reduce kernels run compared with memcpy of
 * the same buffer on the same machine, in the same run. An aggregation node
 * reduces every fragment it receives, so a kernel much slower than memcpy
 * would be the bottleneck of the data path.
 *
 * Both are measured on the same two buffers (reduce: inout OP= in; memcpy:
 * inout = in), so they see the same cache footprint. GB/s counts the bytes of
 * `in` per second (1 GB = 1e9 bytes); the reduce also reads and writes inout,
 * memcpy only writes it.
 *
 * Rows of kernel "acc" are what a node does with float16/bfloat16 when it
 * accumulates in float32 (agg_reduce_acc_fn): inout is a float32 buffer,
 * twice the bytes of the 16-bit `in`, so the kernel moves 10 bytes per
 * element where memcpy of `in` moves 4. Rows of kernel "reduce" are
 * agg_reduce_fn, 16-bit in and out for the 16-bit types. Column isa: the
 * instruction-set level of the 16-bit kernels (-a: every level this CPU
 * runs); "ifunc" for the others, whose target_clones version the loader
 * picks.
 *
 * Usage: agg_reduce_bench [-t SECONDS_PER_ROW] [-a]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg/reduce.h"

#define BENCH_MAX_BYTES (16u << 20) /* of `in`; inout gets twice that for acc rows */

typedef struct bench_row {
    int dtype;
    int acc; /* 1: agg_reduce_acc_fn, 0: agg_reduce_fn */
} bench_row_t;

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Runs the reduce (or memcpy when fn is NULL) in batches until `seconds` have
 * passed; returns bytes of `in` per second. Batches grow from one call so that
 * a slow row does not overshoot, and clock_gettime stays out of the inner loop.
 */
static double bench_rate(agg_reduce_fn_t fn, void *inout, const void *in, size_t bytes,
                         size_t count, double seconds)
{
    size_t batch = 1, done = 0;
    double start = bench_now(), elapsed;

    do {
        for (size_t i = 0; i < batch; i++) {
            if (fn != NULL) {
                fn(inout, in, count);
            } else {
                memcpy(inout, in, bytes);
            }
            /* The result is "used": the compiler may not drop or merge calls. */
            __asm__ volatile("" ::: "memory");
        }
        done   += batch;
        elapsed = bench_now() - start;

        double per_call = elapsed / (double)done;
        double left     = (seconds - elapsed) / per_call;
        batch = left < 1 ? 1 : (left < 2.0 * (double)batch ? (size_t)left + 1 : 2 * batch);
    } while (elapsed < seconds);

    return (double)bytes * (double)done / elapsed;
}

/*
 * Small non-negative values: float32 and float64 never reach Inf, NaN or
 * subnormals. 16-bit sums saturate to Inf after a few hundred calls; the
 * conversions cost the same for every value, the scalar level excepted.
 */
static void bench_fill(int dtype, void *buf, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        float f = (float)(i & 1023) * 0.5f;
        switch (dtype) {
        case AGG_DTYPE_INT32:    ((int32_t *)buf)[i]  = (int32_t)(i & 1023); break;
        case AGG_DTYPE_FLOAT16:  ((uint16_t *)buf)[i] = agg_float_to_half(f); break;
        case AGG_DTYPE_BFLOAT16: ((uint16_t *)buf)[i] = agg_float_to_bf16(f); break;
        case AGG_DTYPE_FLOAT32:  ((float *)buf)[i]    = f; break;
        case AGG_DTYPE_FLOAT64:  ((double *)buf)[i]   = (double)(i & 1023) * 0.5; break;
        }
    }
}

/* One row per size: `fn` against memcpy of the bytes of `in`. */
static void bench_row(const bench_row_t *row, int isa, agg_reduce_fn_t fn, void *inout,
                      void *in, double row_seconds)
{
    static const struct {
        size_t      bytes;
        const char *label;
    } sizes[] = {
        { 4u << 10, "4 KiB" }, { 64u << 10, "64 KiB" },
        { 1u << 20, "1 MiB" }, { 16u << 20, "16 MiB" },
    };
    int inout_dtype = row->acc ? agg_dtype_acc(row->dtype) : row->dtype;
    /* Only the 16-bit kernels have levels; the others are target_clones (ifunc). */
    const char *level = agg_dtype_acc(row->dtype) != row->dtype ? agg_isa_name(isa) : "ifunc";

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t bytes = sizes[s].bytes, count = bytes / agg_dtype_size(row->dtype);

        bench_fill(inout_dtype, inout, count);
        bench_fill(row->dtype, in, count);
        /* Warm up: page faults and the first touch of the caches. */
        fn(inout, in, count);
        memcpy(inout, in, bytes);

        double red = bench_rate(fn, inout, in, bytes, count, row_seconds / 2);
        double cpy = bench_rate(NULL, inout, in, bytes, count, row_seconds / 2);
        printf("%-8s %-4s %-6s %-9s %8s %12.2f %12.2f %8.2f\n", agg_dtype_name(row->dtype),
               agg_op_name(AGG_OP_SUM), row->acc ? "acc" : "reduce", level,
               sizes[s].label, red / 1e9, cpy / 1e9, red / cpy);
        fflush(stdout);
    }
}

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: agg_reduce_bench [-t SECONDS_PER_ROW] [-a]\n"
               "  -t  time spent on each row, split between reduce and memcpy "
               "(default 0.2)\n"
               "  -a  float16/bfloat16 rows at every instruction-set level this CPU "
               "runs, not only the best\n");
}

int main(int argc, char **argv)
{
    static const bench_row_t rows[] = {
        { AGG_DTYPE_INT32, 0 },   { AGG_DTYPE_FLOAT32, 0 },  { AGG_DTYPE_FLOAT64, 0 },
        { AGG_DTYPE_FLOAT16, 1 }, { AGG_DTYPE_BFLOAT16, 1 }, { AGG_DTYPE_FLOAT16, 0 },
    };
    double row_seconds = 0.2;
    int    all_levels  = 0;
    void  *inout = NULL, *in = NULL;
    int    rc = EXIT_FAILURE;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            bench_usage(stdout);
            return EXIT_SUCCESS;
        }
        if (strcmp(argv[i], "-a") == 0) {
            all_levels = 1;
            continue;
        }
        if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            char *end;
            row_seconds = strtod(argv[++i], &end);
            if (*end != '\0' || end == argv[i] || !(row_seconds >= 0.002 && row_seconds <= 60)) {
                fprintf(stderr, "agg_reduce_bench: -t wants seconds between 0.002 and 60, "
                                "got '%s'\n", argv[i]);
                return EXIT_FAILURE;
            }
            continue;
        }
        fprintf(stderr, "agg_reduce_bench: unexpected argument '%s'\n", argv[i]);
        bench_usage(stderr);
        return EXIT_FAILURE;
    }

    inout = aligned_alloc(64, 2 * (size_t)BENCH_MAX_BYTES);
    in    = aligned_alloc(64, BENCH_MAX_BYTES);
    if (inout == NULL || in == NULL) {
        fprintf(stderr, "agg_reduce_bench: cannot allocate 3 x %u MiB\n",
                BENCH_MAX_BYTES >> 20);
        goto out;
    }

    printf("reduce: inout[i] = inout[i] OP in[i]; GB/s = bytes of in per second (1e9 B); "
           "%.2f s per row\n", row_seconds);
    printf("%-8s %-4s %-6s %-9s %8s %12s %12s %8s\n", "dtype", "op", "kernel", "isa", "size",
           "reduce GB/s", "memcpy GB/s", "ratio");

    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        int leveled = agg_dtype_acc(rows[r].dtype) != rows[r].dtype;
        int best    = agg_isa_best();

        /* Other dtypes have no levels of their own: one row each. */
        for (int isa = (all_levels && leveled) ? 0 : best; isa <= best; isa++) {
            agg_reduce_fn_t fn;
            if (!agg_isa_supported(isa)) {
                continue;
            }
            fn = rows[r].acc ? agg_reduce_acc_fn_isa(rows[r].dtype, AGG_OP_SUM, isa)
                             : agg_reduce_fn_isa(rows[r].dtype, AGG_OP_SUM, isa);
            if (fn == NULL) {
                fprintf(stderr, "agg_reduce_bench: no sum kernel for %s\n",
                        agg_dtype_name(rows[r].dtype));
                goto out;
            }
            bench_row(&rows[r], isa, fn, inout, in, row_seconds);
        }
    }
    rc = EXIT_SUCCESS;

out:
    free(in);
    free(inout);
    return rc;
}
