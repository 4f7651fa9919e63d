/*
 * agg_allreduce_perf: allreduce bandwidth and latency in the nccl-tests
 * format, for the offload path and the host path side by side in one run.
 *
 *   offload: MPI_Allreduce, which hcoll_shim intercepts when it is preloaded
 *            and sends through the aggregation tree;
 *   host:    PMPI_Allreduce called directly, i.e. Open MPI's own algorithm,
 *            which the shim never sees.
 *
 * Both paths run on the same buffers, sizes and iteration counts, so a row
 * compares them under the same conditions (same ranks, same CPU contention).
 *
 * Columns follow nccl-tests: time is the mean time of one call in us (the
 * slowest rank's), algbw = bytes / time and busbw = algbw * 2(p-1)/p in GB/s
 * (1 GB = 1e9 bytes), #wrong is the number of wrong elements over all ranks
 * in one extra checked call made after the timed loop.
 *
 * Usage: agg_allreduce_perf [-b MIN] [-e MAX] [-f FACTOR] [-t TYPE] [-o OP]
 *                           [-n ITERS] [-w WARMUP] [-c 0|1] [-h]
 * Exits non-zero when any element was wrong.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_size.h"

/*
 * Default iteration counts: enough calls that small sizes are not timer
 * noise, few enough that 16 MiB over 4 ranks on 2 cores stays within about a
 * minute for the whole run (4 timed loops and 4 warm-up loops per size).
 */
#define PERF_ITER_BYTES   (256u << 20) /* bytes moved per timed loop, per rank */
#define PERF_ITERS_MAX    500
#define PERF_ITERS_MIN    5
#define PERF_WARMUP_MAX   20
#define PERF_WARMUP_MIN   1

typedef enum perf_kind { PERF_FLOAT, PERF_DOUBLE, PERF_INT32, PERF_INT64 } perf_kind_t;
typedef enum perf_op { PERF_SUM, PERF_MAX, PERF_MIN } perf_op_t;
typedef enum perf_path { PERF_PATH_OFFLOAD, PERF_PATH_HOST, PERF_PATH_COUNT } perf_path_t;

typedef struct perf_type {
    const char  *name;
    perf_kind_t  kind;
    size_t       size;
    MPI_Datatype (*dt)(void); /* MPI handles are not constants in every MPI */
} perf_type_t;

static MPI_Datatype perf_dt_float(void)  { return MPI_FLOAT; }
static MPI_Datatype perf_dt_double(void) { return MPI_DOUBLE; }
static MPI_Datatype perf_dt_int32(void)  { return MPI_INT32_T; }
static MPI_Datatype perf_dt_int64(void)  { return MPI_INT64_T; }

static const perf_type_t perf_types[] = {
    {"float", PERF_FLOAT, sizeof(float), perf_dt_float},
    {"double", PERF_DOUBLE, sizeof(double), perf_dt_double},
    {"int32", PERF_INT32, sizeof(int32_t), perf_dt_int32},
    {"int64", PERF_INT64, sizeof(int64_t), perf_dt_int64},
};

static const char *const perf_op_names[] = {"sum", "max", "min"};
static const char *const perf_path_names[] = {"offload", "host"};

typedef struct perf_opts {
    size_t             min_bytes;
    size_t             max_bytes;
    size_t             factor;
    const perf_type_t *type;
    perf_op_t          op;
    int                iters;  /* -1: by size */
    int                warmup; /* -1: by size */
    int                check;
    int                rounds; /* each cell measured this many times, paths alternating */
} perf_opts_t;

/* One measured (path, mode) cell of a row. */
typedef struct perf_cell {
    double    usec;
    double    algbw;
    double    busbw;
    long long wrong; /* -1: not checked */
} perf_cell_t;

static int perf_rank, perf_size;

static MPI_Op perf_mpi_op(perf_op_t op)
{
    return op == PERF_SUM ? MPI_SUM : op == PERF_MAX ? MPI_MAX : MPI_MIN;
}

static void perf_usage(FILE *out)
{
    fprintf(out,
            "usage: agg_allreduce_perf [options]\n"
            "  -b MIN      smallest message in bytes, K/M/G suffixes (default 8)\n"
            "  -e MAX      largest message in bytes (default 16M)\n"
            "  -f FACTOR   multiply the size by FACTOR each row, >= 2 (default 2)\n"
            "  -t TYPE     float, double, int32 or int64 (default float)\n"
            "  -o OP       sum, max or min (default sum)\n"
            "  -n ITERS    timed calls per cell (default: %d..%d by size)\n"
            "  -w WARMUP   untimed calls before each timed loop (default: %d..%d by size)\n"
            "  -c 0|1      check every element after the timed loop (default 1)\n"
            "  -r ROUNDS   measure each cell ROUNDS times, offload and host alternating\n"
            "              (which goes first alternates too); the median is shown (default 1)\n"
            "  -h          this text\n",
            PERF_ITERS_MIN, PERF_ITERS_MAX, PERF_WARMUP_MIN, PERF_WARMUP_MAX);
}

/* Every rank parses the same argv; only rank 0 says what is wrong with it. */
static void perf_arg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void perf_arg_error(const char *fmt, ...)
{
    va_list ap;

    if (perf_rank != 0) {
        return;
    }
    va_start(ap, fmt);
    fputs("agg_allreduce_perf: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* Returns 0 to run, 1 to exit successfully (help), -1 on a bad option. */
static int perf_parse_args(int argc, char **argv, perf_opts_t *o)
{
    size_t i, *sz;
    int c;
    long v;
    char *end;

    *o = (perf_opts_t){.min_bytes = 8, .max_bytes = 16u << 20, .factor = 2,
                       .type = &perf_types[0], .op = PERF_SUM, .iters = -1,
                       .warmup = -1, .check = 1, .rounds = 1};
    opterr = 0;
    while ((c = getopt(argc, argv, "b:e:f:t:o:n:w:c:r:h")) != -1) {
        switch (c) {
        case 'b':
        case 'e':
            sz = c == 'b' ? &o->min_bytes : &o->max_bytes;
            if (bench_parse_size(optarg, sz) != 0 || *sz == 0) {
                perf_arg_error("-%c '%s': expected a positive size in bytes, e.g. 8, 64K "
                               "or 16M\n", c, optarg);
                return -1;
            }
            break;
        case 'f':
            v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < 2) {
                perf_arg_error("-f '%s': expected an integer >= 2\n", optarg);
                return -1;
            }
            o->factor = (size_t)v;
            break;
        case 't':
            for (i = 0; i < sizeof(perf_types) / sizeof(perf_types[0]); ++i) {
                if (strcmp(optarg, perf_types[i].name) == 0) {
                    break;
                }
            }
            if (i == sizeof(perf_types) / sizeof(perf_types[0])) {
                perf_arg_error("-t '%s': expected float, double, int32 or int64\n",
                               optarg);
                return -1;
            }
            o->type = &perf_types[i];
            break;
        case 'o':
            for (i = 0; i < 3 && strcmp(optarg, perf_op_names[i]) != 0; ++i) {
            }
            if (i == 3) {
                perf_arg_error("-o '%s': expected sum, max or min\n", optarg);
                return -1;
            }
            o->op = (perf_op_t)i;
            break;
        case 'r':
            v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < 1 || v > 99) {
                perf_arg_error("-r '%s': expected an integer in 1..99\n", optarg);
                return -1;
            }
            o->rounds = (int)v;
            break;
        case 'n':
        case 'w':
        case 'c':
            v = strtol(optarg, &end, 10);
            if (*end != '\0' || v < (c == 'n') || v > 1000000 || (c == 'c' && v > 1)) {
                perf_arg_error("-%c '%s': expected %s\n", c, optarg,
                               c == 'n' ? "an integer >= 1" :
                               c == 'w' ? "an integer >= 0" : "0 or 1");
                return -1;
            }
            *(c == 'n' ? &o->iters : c == 'w' ? &o->warmup : &o->check) = (int)v;
            break;
        case 'h':
            if (perf_rank == 0) {
                perf_usage(stdout);
            }
            return 1;
        default:
            perf_arg_error("unknown option or missing value: -%c\n", optopt);
            if (perf_rank == 0) {
                perf_usage(stderr);
            }
            return -1;
        }
    }
    if (optind < argc) {
        perf_arg_error("unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->min_bytes > o->max_bytes) {
        perf_arg_error("-b %zu is larger than -e %zu\n", o->min_bytes, o->max_bytes);
        return -1;
    }
    if (o->max_bytes / o->type->size > INT32_MAX) {
        perf_arg_error("-e %zu: more than %d %s elements do not fit an MPI count\n",
                       o->max_bytes, INT32_MAX, o->type->name);
        return -1;
    }
    return 0;
}

static size_t perf_clamp(size_t v, size_t lo, size_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int perf_iters(const perf_opts_t *o, size_t bytes)
{
    return o->iters >= 0 ? o->iters :
           (int)perf_clamp(PERF_ITER_BYTES / bytes, PERF_ITERS_MIN, PERF_ITERS_MAX);
}

static int perf_warmup(const perf_opts_t *o, size_t bytes)
{
    return o->warmup >= 0 ? o->warmup :
           (int)perf_clamp(PERF_ITER_BYTES / 16 / bytes, PERF_WARMUP_MIN, PERF_WARMUP_MAX);
}

/*
 * What rank r contributes at element i: small integers, some negative, that
 * differ between ranks, so sums are exact in every type and a result taken
 * from the wrong rank or the wrong offset shows.
 */
static long long perf_gen(int r, size_t i)
{
    return (long long)((i * 7 + (size_t)r * 13) % 64) - 16;
}

static long long perf_expected(perf_op_t op, size_t i)
{
    long long acc = perf_gen(0, i), v;
    int r;

    for (r = 1; r < perf_size; ++r) {
        v = perf_gen(r, i);
        acc = op == PERF_SUM ? acc + v : op == PERF_MAX ? (v > acc ? v : acc) :
              (v < acc ? v : acc);
    }
    return acc;
}

static void perf_set(perf_kind_t k, void *buf, size_t i, long long v)
{
    switch (k) {
    case PERF_FLOAT:  ((float *)buf)[i]   = (float)v; break;
    case PERF_DOUBLE: ((double *)buf)[i]  = (double)v; break;
    case PERF_INT32:  ((int32_t *)buf)[i] = (int32_t)v; break;
    case PERF_INT64:  ((int64_t *)buf)[i] = (int64_t)v; break;
    }
}

static double perf_get(perf_kind_t k, const void *buf, size_t i)
{
    switch (k) {
    case PERF_FLOAT:  return ((const float *)buf)[i];
    case PERF_DOUBLE: return ((const double *)buf)[i];
    case PERF_INT32:  return ((const int32_t *)buf)[i];
    default:          return (double)((const int64_t *)buf)[i];
    }
}

/* value < 0 with a large magnitude: the sentinel for "never written" */
#define PERF_SENTINEL (-1000003LL)

static void perf_fill(perf_kind_t k, void *buf, size_t count, int pattern)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        perf_set(k, buf, i, pattern ? perf_gen(perf_rank, i) : PERF_SENTINEL);
    }
}

static void perf_fill_zero(perf_kind_t k, void *buf, size_t count)
{
    size_t i;

    for (i = 0; i < count; ++i) {
        perf_set(k, buf, i, 0);
    }
}

static int perf_allreduce(perf_path_t path, const void *sbuf, void *rbuf, int count,
                          MPI_Datatype dt, MPI_Op op)
{
    return path == PERF_PATH_OFFLOAD ? MPI_Allreduce(sbuf, rbuf, count, dt, op, MPI_COMM_WORLD)
                                     : PMPI_Allreduce(sbuf, rbuf, count, dt, op,
                                                      MPI_COMM_WORLD);
}

/* Counts wrong elements on this rank; reports the first one on stderr. */
static long long perf_verify(const perf_opts_t *o, perf_path_t path, int in_place,
                             const void *rbuf, size_t count)
{
    long long wrong = 0, exp;
    size_t i, first = 0;
    double got = 0;

    for (i = 0; i < count; ++i) {
        exp = perf_expected(o->op, i);
        if (perf_get(o->type->kind, rbuf, i) != (double)exp) {
            if (wrong++ == 0) {
                first = i;
                got   = perf_get(o->type->kind, rbuf, i);
            }
        }
    }
    if (wrong > 0) {
        fprintf(stderr, "rank %d: %s %s %zu x %s %s: %lld wrong, first at element %zu "
                "(got %g, expected %lld)\n", perf_rank, perf_path_names[path],
                in_place ? "in-place" : "out-of-place", count, o->type->name,
                perf_op_names[o->op], wrong, first, got, perf_expected(o->op, first));
    }
    return wrong;
}

/*
 * Times one (path, mode) cell and, with -c 1, checks one more call. The
 * in-place loop reduces the same buffer over and over; for sum that would
 * grow the values without bound (inf in floats, overflow in integers), so it
 * runs on zeros, which sum to themselves. max and min are stable on the
 * pattern. Values do not change the cost of a reduction on this path.
 */
static void perf_cell_run(const perf_opts_t *o, perf_path_t path, int in_place, void *sbuf,
                          void *rbuf, size_t count, perf_cell_t *cell)
{
    MPI_Datatype dt = o->type->dt();
    MPI_Op op       = perf_mpi_op(o->op);
    size_t bytes    = count * o->type->size;
    int iters = perf_iters(o, bytes), warmup = perf_warmup(o, bytes), i;
    const void *src = in_place ? MPI_IN_PLACE : sbuf;
    double t0, local, slowest = 0;
    long long wrong = 0, total = 0;

    if (in_place) {
        if (o->op == PERF_SUM) {
            perf_fill_zero(o->type->kind, rbuf, count);
        } else {
            perf_fill(o->type->kind, rbuf, count, 1);
        }
    }
    for (i = 0; i < warmup; ++i) {
        perf_allreduce(path, src, rbuf, (int)count, dt, op);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; ++i) {
        perf_allreduce(path, src, rbuf, (int)count, dt, op);
    }
    local = (MPI_Wtime() - t0) / iters;
    MPI_Reduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    cell->usec  = slowest * 1e6;
    cell->algbw = slowest > 0 ? (double)bytes / slowest / 1e9 : 0;
    cell->busbw = cell->algbw * 2.0 * (perf_size - 1) / perf_size;
    cell->wrong = -1;
    if (!o->check) {
        return;
    }
    if (in_place) {
        perf_fill(o->type->kind, rbuf, count, 1);
    } else {
        perf_fill(o->type->kind, rbuf, count, 0);
    }
    perf_allreduce(path, src, rbuf, (int)count, dt, op);
    wrong = perf_verify(o, path, in_place, rbuf, count);
    MPI_Reduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    cell->wrong = total;
}

/* The cell whose time is the median of n runs (wrong elements added up). */
static perf_cell_t perf_median(perf_cell_t *runs, int n)
{
    perf_cell_t mid;
    long long wrong = 0;
    int i, j;

    for (i = 0; i < n; ++i) {
        wrong += runs[i].wrong > 0 ? runs[i].wrong : 0;
        for (j = i + 1; j < n; ++j) {
            if (runs[j].usec < runs[i].usec) {
                perf_cell_t t = runs[i];
                runs[i] = runs[j];
                runs[j] = t;
            }
        }
    }
    mid       = runs[n / 2];
    mid.wrong = runs[0].wrong < 0 ? -1 : wrong;
    return mid;
}

/* Widths of the row prefix (size .. root) and of one (time .. #wrong) cell. */
#define PERF_ROW_PREFIX 47
#define PERF_CELL_WIDTH 34

/* Prints `label` centred in `width` columns, like the nccl-tests group
 * titles; the last one on a line gets no trailing blanks. */
static void perf_print_centered(const char *label, int width, int last)
{
    int len = (int)strlen(label), left = (width - len) / 2;

    printf("%*s%s%*s", left, "", label, last ? 0 : width - len - left, "");
}

/* nccl-tests prints fewer decimals as times grow, to keep the column width. */
static void perf_print_cell(const perf_cell_t *c)
{
    char wrong[24];

    if (c->wrong < 0) {
        snprintf(wrong, sizeof(wrong), "N/A");
    } else {
        snprintf(wrong, sizeof(wrong), "%lld", c->wrong);
    }
    printf(c->usec >= 10000.0 ? "  %8.0f" : c->usec >= 100.0 ? "  %8.1f" : "  %8.2f",
           c->usec);
    printf("  %6.2f  %6.2f  %6s", c->algbw, c->busbw, wrong);
}

typedef enum perf_interposer {
    PERF_NONE,  /* MPI_Allreduce is the MPI library's own */
    PERF_SHIM,  /* hcoll_shim's */
    PERF_OTHER, /* some other library's */
} perf_interposer_t;

/*
 * Who answers MPI_Allreduce. Open MPI makes MPI_Allreduce an alias of
 * PMPI_Allreduce, so two different addresses mean a preloaded library took
 * it; dladdr names that library. LD_PRELOAD is the fallback for an MPI that
 * does not alias the two symbols. `lib` receives the library's path or NULL.
 */
static perf_interposer_t perf_interposer(const char **lib)
{
    const char *pre = getenv("LD_PRELOAD");
    void *mpi  = dlsym(RTLD_DEFAULT, "MPI_Allreduce");
    void *pmpi = dlsym(RTLD_DEFAULT, "PMPI_Allreduce");
    Dl_info info;

    *lib = NULL;
    if (mpi == NULL || pmpi == NULL) {
        return pre != NULL && strstr(pre, "hcoll_shim") != NULL ? PERF_SHIM : PERF_NONE;
    }
    if (mpi == pmpi) {
        return PERF_NONE;
    }
    if (dladdr(mpi, &info) != 0 && info.dli_fname != NULL) {
        *lib = info.dli_fname;
        return strstr(info.dli_fname, "hcoll_shim") != NULL ? PERF_SHIM : PERF_OTHER;
    }
    return pre != NULL && strstr(pre, "hcoll_shim") != NULL ? PERF_SHIM : PERF_OTHER;
}

static void perf_print_header(const perf_opts_t *o, perf_interposer_t shim,
                              const char *lib, double setup_usec)
{
    const char *level = getenv("HCOLL_ENABLE_SHARP");
    const char *max   = getenv("HCOLL_ALLREDUCE_SHARP_MAX");
    char libver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_Get_library_version(libver, &len);
    libver[strcspn(libver, ",\n")] = '\0';
    printf("# agg_allreduce_perf: %d ranks, %s, minBytes %zu maxBytes %zu step: %zu(factor) "
           "type %s op %s check %d\n", perf_size, libver, o->min_bytes, o->max_bytes,
           o->factor, o->type->name, perf_op_names[o->op], o->check);
    if (o->iters >= 0) {
        printf("# iters %d", o->iters);
    } else {
        printf("# iters %d..%d by size", PERF_ITERS_MIN, PERF_ITERS_MAX);
    }
    if (o->warmup >= 0) {
        printf(", warmup %d\n", o->warmup);
    } else {
        printf(", warmup %d..%d by size\n", PERF_WARMUP_MIN, PERF_WARMUP_MAX);
    }
    if (shim == PERF_SHIM) {
        printf("# offload path: hcoll_shim (HCOLL_ENABLE_SHARP=%s)", level ? level : "unset");
        if (level == NULL || strcmp(level, "0") == 0) {
            printf(" -- offload off: both columns measure the host path");
        }
        if (max != NULL && strcmp(max, "0") != 0) {
            printf(", HCOLL_ALLREDUCE_SHARP_MAX=%s: larger messages take the host path", max);
        }
        printf("\n");
    } else if (shim == PERF_OTHER) {
        printf("# offload path: MPI_Allreduce from %s (not hcoll_shim)\n", lib ? lib : "?");
    } else {
        printf("# offload path: not active (shim not preloaded) -- both columns measure "
               "the host path\n");
    }
    printf("# host path:    PMPI_Allreduce (Open MPI's own algorithm, bypasses the shim)\n");
    printf("# first MPI_Allreduce on MPI_COMM_WORLD (group setup on the offload path): "
           "%.0f us, not in the table\n", setup_usec);
    printf("#\n");
    printf("#%*s", PERF_ROW_PREFIX - 1, "");
    perf_print_centered("offload: MPI_Allreduce", 2 * PERF_CELL_WIDTH, 0);
    perf_print_centered("host: PMPI_Allreduce", 2 * PERF_CELL_WIDTH, 1);
    printf("\n#%*s", PERF_ROW_PREFIX - 1, "");
    for (int i = 0; i < 2; ++i) {
        perf_print_centered("out-of-place", PERF_CELL_WIDTH, 0);
        perf_print_centered("in-place", PERF_CELL_WIDTH, i == 1);
    }
    printf("\n");
    printf("#%11s  %12s  %6s  %5s  %4s", "size", "count", "type", "redop", "root");
    for (int i = 0; i < 4; ++i) {
        printf("  %8s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    }
    printf("\n#%11s  %12s  %6s  %5s  %4s", "(B)", "(elements)", "", "", "");
    for (int i = 0; i < 4; ++i) {
        printf("  %8s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    perf_opts_t o;
    perf_cell_t c[PERF_PATH_COUNT][2], runs[PERF_PATH_COUNT][2][99];
    double ratios[64];
    size_t ratio_bytes[64];
    double bw_sum[PERF_PATH_COUNT] = {0}, first_ratio = 0, last_ratio = 0;
    double setup_t0, setup_usec, one = 1, out;
    size_t bytes, count, first_bytes = 0, last_bytes = 0, alloc;
    long long wrong[PERF_PATH_COUNT] = {0};
    int rc, rows = 0, p, m, failed;
    perf_interposer_t shim;
    const char *shim_lib;
    void *sbuf, *rbuf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &perf_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &perf_size);
    /* Every rank parses the same argv, so every rank takes the same exit. */
    rc = perf_parse_args(argc, argv, &o);
    if (rc != 0) {
        MPI_Finalize();
        return rc > 0 ? 0 : 2;
    }
    /* aligned_alloc wants a multiple of the alignment */
    alloc = (o.max_bytes / o.type->size * o.type->size + 63) / 64 * 64;
    sbuf  = aligned_alloc(64, alloc);
    rbuf  = aligned_alloc(64, alloc);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "rank %d: cannot allocate 2 x %zu bytes\n", perf_rank, o.max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    shim = perf_interposer(&shim_lib);

    /* The shim builds its group on the first call on a communicator; keep
     * that one-time cost out of the first row and report it separately. */
    MPI_Barrier(MPI_COMM_WORLD);
    setup_t0 = MPI_Wtime();
    MPI_Allreduce(&one, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    setup_usec = (MPI_Wtime() - setup_t0) * 1e6;
    if (perf_rank == 0) {
        perf_print_header(&o, shim, shim_lib, setup_usec);
        fflush(stdout);
    }

    for (bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
        count = bytes / o.type->size;
        if (count == 0) {
            continue;
        }
        perf_fill(o.type->kind, sbuf, count, 1);
        for (int r = 0; r < o.rounds; ++r) {
            for (int k = 0; k < PERF_PATH_COUNT; ++k) {
                p = (k + r) % PERF_PATH_COUNT; /* who goes first alternates */
                for (m = 0; m < 2; ++m) {
                    perf_cell_run(&o, (perf_path_t)p, m, sbuf, rbuf, count, &runs[p][m][r]);
                }
            }
        }
        for (p = 0; p < PERF_PATH_COUNT; ++p) {
            for (m = 0; m < 2; ++m) {
                c[p][m] = perf_median(runs[p][m], o.rounds);
            }
        }
        if (perf_rank == 0) {
            printf("%12zu  %12zu  %6s  %5s  %4d", count * o.type->size, count, o.type->name,
                   perf_op_names[o.op], -1);
            for (p = 0; p < PERF_PATH_COUNT; ++p) {
                for (m = 0; m < 2; ++m) {
                    perf_print_cell(&c[p][m]);
                    bw_sum[p] += c[p][m].busbw;
                    wrong[p]  += c[p][m].wrong > 0 ? c[p][m].wrong : 0;
                }
            }
            printf("\n");
            fflush(stdout);
            last_ratio = c[PERF_PATH_HOST][0].usec / c[PERF_PATH_OFFLOAD][0].usec;
            last_bytes = count * o.type->size;
            if (rows < 64) {
                ratios[rows]      = last_ratio;
                ratio_bytes[rows] = last_bytes;
            }
            if (rows == 0) {
                first_ratio = last_ratio;
                first_bytes = last_bytes;
            }
        }
        ++rows;
        if (bytes > o.max_bytes / o.factor) {
            break; /* the next step would overflow or pass the end */
        }
    }

    if (perf_rank == 0) {
        for (p = 0; p < PERF_PATH_COUNT; ++p) {
            printf("# %-7s wrong elements : %lld %s\n", perf_path_names[p], wrong[p],
                   !o.check ? "(not checked)" : wrong[p] ? "FAILED" : "OK");
        }
        for (p = 0; p < PERF_PATH_COUNT; ++p) {
            printf("# Avg bus bandwidth (%s)%*s : %.4g GB/s\n", perf_path_names[p],
                   (int)(7 - strlen(perf_path_names[p])), "",
                   rows ? bw_sum[p] / (2.0 * rows) : 0.0);
        }
        printf("# host time / offload time per size, out-of-place (> 1: offload faster; "
               "median of %d rounds):\n#", o.rounds);
        for (int i = 0; i < rows && i < 64; ++i) {
            printf(" %zu:%.2f", ratio_bytes[i], ratios[i]);
        }
        printf("\n");
        if (rows > 0) {
            printf("# offload/host speed-up (host time / offload time, out-of-place; "
                   "< 1: offload slower): %.2fx at %zu B, %.2fx at %zu B%s\n", first_ratio,
                   first_bytes, last_ratio, last_bytes,
                   shim != PERF_NONE ? "" : " (both host: expect about 1x)");
        }
    }
    failed = perf_rank == 0 && (wrong[0] > 0 || wrong[1] > 0);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return failed ? 1 : 0;
}
