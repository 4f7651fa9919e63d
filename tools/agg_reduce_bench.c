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
 * Usage: agg_reduce_bench [-t SECONDS_PER_ROW]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg/reduce.h"

#define BENCH_MAX_BYTES (16u << 20)

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

static void bench_fill(int dtype, void *buf, size_t count)
{
    /* Small non-negative values: floats never reach Inf, NaN or subnormals. */
    for (size_t i = 0; i < count; i++) {
        switch (dtype) {
        case AGG_DTYPE_INT32:   ((int32_t *)buf)[i] = (int32_t)(i & 1023); break;
        case AGG_DTYPE_FLOAT32: ((float *)buf)[i]   = (float)(i & 1023) * 0.5f; break;
        case AGG_DTYPE_FLOAT64: ((double *)buf)[i]  = (double)(i & 1023) * 0.5; break;
        }
    }
}

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: agg_reduce_bench [-t SECONDS_PER_ROW]\n"
               "  -t  time spent on each row, split between reduce and memcpy "
               "(default 0.2)\n");
}

int main(int argc, char **argv)
{
    static const int    dtypes[] = { AGG_DTYPE_INT32, AGG_DTYPE_FLOAT32, AGG_DTYPE_FLOAT64 };
    static const struct {
        size_t      bytes;
        const char *label;
    } sizes[] = {
        { 4u << 10, "4 KiB" }, { 64u << 10, "64 KiB" }, { 1u << 20, "1 MiB" }, { 16u << 20, "16 MiB" },
    };
    double              row_seconds = 0.2;
    void               *inout = NULL, *in = NULL;
    int                 rc = EXIT_FAILURE;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            bench_usage(stdout);
            return EXIT_SUCCESS;
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

    inout = aligned_alloc(64, BENCH_MAX_BYTES);
    in    = aligned_alloc(64, BENCH_MAX_BYTES);
    if (inout == NULL || in == NULL) {
        fprintf(stderr, "agg_reduce_bench: cannot allocate 2 x %u MiB\n",
                BENCH_MAX_BYTES >> 20);
        goto out;
    }

    printf("reduce: inout[i] = inout[i] OP in[i]; GB/s = bytes of in per second (1e9 B); "
           "%.2f s per row\n", row_seconds);
    printf("%-8s %-4s %8s %12s %12s %8s\n", "dtype", "op", "size", "reduce GB/s",
           "memcpy GB/s", "ratio");

    for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
        agg_reduce_fn_t fn = agg_reduce_fn(dtypes[d], AGG_OP_SUM);
        size_t          esize = agg_dtype_size(dtypes[d]);
        if (fn == NULL) {
            fprintf(stderr, "agg_reduce_bench: no sum kernel for %s\n",
                    agg_dtype_name(dtypes[d]));
            goto out;
        }
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t bytes = sizes[s].bytes, count = bytes / esize;

            bench_fill(dtypes[d], inout, count);
            bench_fill(dtypes[d], in, count);
            /* Warm up: page faults and the first touch of the caches. */
            fn(inout, in, count);
            memcpy(inout, in, bytes);

            double red = bench_rate(fn, inout, in, bytes, count, row_seconds / 2);
            double cpy = bench_rate(NULL, inout, in, bytes, count, row_seconds / 2);
            printf("%-8s %-4s %8s %12.2f %12.2f %8.2f\n", agg_dtype_name(dtypes[d]),
                   agg_op_name(AGG_OP_SUM), sizes[s].label, red / 1e9, cpy / 1e9, red / cpy);
            fflush(stdout);
        }
    }
    rc = EXIT_SUCCESS;

out:
    free(in);
    free(inout);
    return rc;
}
