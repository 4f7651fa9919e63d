/*
 * agg_host_bench: the shim's host allreduce (hcoll_shim/shim_host.c) against
 * Open MPI's own PMPI_Allreduce, in one run on the same buffers.
 *
 * Each size runs several rounds; a round times a loop of PMPI_Allreduce and a
 * loop of shim_host_allreduce back to back (which goes first alternates), and
 * a loop's time is its slowest rank's. The minimum (or, with -m, the median)
 * over rounds is reported, which keeps the noise of a small shared machine
 * out of the ratio. After the timed loops one call is checked against the
 * exact sum of small integers.
 *
 * Usage: agg_host_bench [-b MIN] [-e MAX] [-f 2|4] [-n ITERS] [-r ROUNDS]
 *                       [-t float|double|int32] [-a auto|rd|rab|ring] [-d] [-i] [-m]
 *        agg_host_bench -C        correctness self-test of every algorithm
 *   -d: thresholds from shim_host_tune_dynamic instead of the static table
 *   -i: MPI_IN_PLACE
 * Exits non-zero when any result was wrong.
 */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_host.h"

#define BENCH_ROUND_BYTES (16u << 20) /* bytes one timed loop moves, per rank */
#define BENCH_ROUNDS_MAX  64

typedef struct bench_opts {
    size_t       min_bytes, max_bytes;
    int          factor, iters, rounds, median, in_place, dynamic, check_only;
    int          alg;       /* -1: chosen by the thresholds */
    const char  *type;
} bench_opts_t;

static int bench_rank, bench_size;

/* ------------------------------------------------------------------ perf */

static MPI_Datatype bench_perf_dtype(const char *type, size_t *size)
{
    if (strcmp(type, "double") == 0) {
        *size = sizeof(double);
        return MPI_DOUBLE;
    }
    if (strcmp(type, "int32") == 0) {
        *size = sizeof(int32_t);
        return MPI_INT32_T;
    }
    *size = sizeof(float);
    return MPI_FLOAT;
}

/* Small integers: their sum over ranks is exact in every type. */
static int bench_value(int rank, size_t i)
{
    return (int)((rank * 7 + i) % 13) - 6;
}

static void bench_fill(void *buf, MPI_Datatype dt, size_t count, int rank)
{
    size_t i;

    for (i = 0; i < count; i++) {
        int v = bench_value(rank, i);
        if (dt == MPI_DOUBLE) {
            ((double *)buf)[i] = v;
        } else if (dt == MPI_INT32_T) {
            ((int32_t *)buf)[i] = v;
        } else {
            ((float *)buf)[i] = (float)v;
        }
    }
}

static uint64_t bench_wrong(const void *buf, MPI_Datatype dt, size_t count)
{
    uint64_t wrong = 0;
    size_t i;
    int r, want;

    for (i = 0; i < count; i++) {
        for (want = 0, r = 0; r < bench_size; r++) {
            want += bench_value(r, i);
        }
        if (dt == MPI_DOUBLE) {
            wrong += ((const double *)buf)[i] != want;
        } else if (dt == MPI_INT32_T) {
            wrong += ((const int32_t *)buf)[i] != want;
        } else {
            wrong += ((const float *)buf)[i] != (float)want;
        }
    }
    return wrong;
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The slowest rank's time of each round, reduced to one figure on every rank. */
static double bench_summary(double *t, int rounds, int median)
{
    PMPI_Allreduce(MPI_IN_PLACE, t, rounds, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(t, (size_t)rounds, sizeof(*t), bench_cmp_double);
    return median ? t[rounds / 2] : t[0];
}

/* Mean time of one call over iters calls; shim when alg >= 0, Open MPI otherwise. */
static double bench_loop(const bench_opts_t *o, const void *sbuf, void *rbuf, int count,
                         MPI_Datatype dt, MPI_Comm comm, int alg, int iters)
{
    double t0;
    int i;

    PMPI_Barrier(comm);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        if (alg < 0) {
            PMPI_Allreduce(o->in_place ? MPI_IN_PLACE : sbuf, rbuf, count, dt, MPI_SUM, comm);
        } else {
            shim_host_allreduce(o->in_place ? MPI_IN_PLACE : sbuf, rbuf, count, dt, MPI_SUM,
                                comm, (shim_host_alg_t)alg);
        }
    }
    return (MPI_Wtime() - t0) / iters;
}

static int bench_perf(const bench_opts_t *o, MPI_Comm comm)
{
    double tompi[BENCH_ROUNDS_MAX], tshim[BENCH_ROUNDS_MAX], ratio, worst = 0;
    size_t esize, bytes, worst_bytes = 0;
    uint64_t wrong, total_wrong = 0;
    MPI_Datatype dt = bench_perf_dtype(o->type, &esize);
    double tune_ms = 0;
    shim_host_tune_t tune;
    void *sbuf, *rbuf;
    int count, iters, r, alg, rc;

    if (o->dynamic) {
        tune_ms = MPI_Wtime();
        rc      = shim_host_tune_dynamic(&tune, comm);
        tune_ms = (MPI_Wtime() - tune_ms) * 1e3;
        if (rc != MPI_SUCCESS) {
            fprintf(stderr, "agg_host_bench: shim_host_tune_dynamic failed (%d)\n", rc);
            return 1;
        }
    } else {
        shim_host_tune_static(&tune, bench_size);
    }
    sbuf = malloc(o->max_bytes + esize);
    rbuf = malloc(o->max_bytes + esize);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "agg_host_bench: cannot allocate 2 x %zu bytes\n", o->max_bytes);
        return 1;
    }
    if (bench_rank == 0) {
        printf("# agg_host_bench: %d ranks, %s sum%s, %s thresholds rd < %zu, rab < %zu, "
               "%s of %d rounds\n", bench_size, o->type, o->in_place ? " in place" : "",
               o->dynamic ? "dynamic" : "static", tune.rd_max, tune.rab_max,
               o->median ? "median" : "min", o->rounds);
        if (o->dynamic) {
            printf("# shim_host_tune_dynamic took %.2f ms on rank 0\n", tune_ms);
        }
        printf("# %10s %10s %10s %6s  %-18s %s\n", "bytes", "ompi_us", "shim_us", "ratio",
               "algorithm", "check");
    }
    for (bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= (size_t)o->factor) {
        count = (int)(bytes / esize);
        count = count > 0 ? count : 1;
        iters = (int)(BENCH_ROUND_BYTES / bytes);
        iters = iters < 1 ? 1 : (iters > o->iters ? o->iters : iters);
        alg   = o->alg >= 0 ? o->alg : (int)shim_host_choose(&tune, (size_t)count * esize,
                                                             bench_size);
        bench_fill(sbuf, dt, (size_t)count, bench_rank);
        memcpy(rbuf, sbuf, (size_t)count * esize);
        bench_loop(o, sbuf, rbuf, count, dt, comm, -1, 1); /* warm both up */
        bench_loop(o, sbuf, rbuf, count, dt, comm, alg, 1);
        for (r = 0; r < o->rounds; r++) {
            if (r & 1) {
                tshim[r] = bench_loop(o, sbuf, rbuf, count, dt, comm, alg, iters);
                tompi[r] = bench_loop(o, sbuf, rbuf, count, dt, comm, -1, iters);
            } else {
                tompi[r] = bench_loop(o, sbuf, rbuf, count, dt, comm, -1, iters);
                tshim[r] = bench_loop(o, sbuf, rbuf, count, dt, comm, alg, iters);
            }
        }
        bench_fill(sbuf, dt, (size_t)count, bench_rank);
        memcpy(rbuf, sbuf, (size_t)count * esize);
        bench_loop(o, sbuf, rbuf, count, dt, comm, alg, 1);
        wrong = bench_wrong(rbuf, dt, (size_t)count);
        PMPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        total_wrong += wrong;
        tompi[0] = bench_summary(tompi, o->rounds, o->median);
        tshim[0] = bench_summary(tshim, o->rounds, o->median);
        ratio    = tshim[0] / tompi[0];
        if (ratio > worst) {
            worst       = ratio;
            worst_bytes = (size_t)count * esize;
        }
        if (bench_rank == 0) {
            printf("  %10zu %10.2f %10.2f %6.3f  %-18s %s\n", (size_t)count * esize,
                   tompi[0] * 1e6, tshim[0] * 1e6, ratio, shim_host_alg_name(alg),
                   wrong ? "WRONG" : "ok");
            fflush(stdout);
        }
    }
    if (bench_rank == 0) {
        printf("# worst ratio %.3f at %zu bytes; %llu wrong elements\n", worst, worst_bytes,
               (unsigned long long)total_wrong);
    }
    free(sbuf);
    free(rbuf);
    return total_wrong != 0;
}

/* ------------------------------------------------------------ self-test */

typedef struct bench_di { double v; int k; } bench_di_t;
typedef struct bench_fi { float v; int k; } bench_fi_t;

/* One tested (type, op): how to make rank r's element i and compare two elements. */
typedef struct bench_case {
    const char *name;
    size_t      size;
    MPI_Datatype (*dtype)(void); /* MPI handles are not constants in every MPI */
    MPI_Op       (*op)(void);
    void        (*make)(void *elem, int rank, int i);
    int         (*same)(const void *a, const void *b);
    int           exact; /* 0: rounding makes the result order-dependent; check that
                            every rank has rank 0's bits instead of Open MPI's */
} bench_case_t;

static MPI_Datatype bench_t_int(void)    { return MPI_INT; }
static MPI_Datatype bench_t_double(void) { return MPI_DOUBLE; }
static MPI_Datatype bench_t_float(void)  { return MPI_FLOAT; }
static MPI_Datatype bench_t_di(void)     { return MPI_DOUBLE_INT; }
static MPI_Datatype bench_t_fi(void)     { return MPI_FLOAT_INT; }
static MPI_Datatype bench_t_uchar(void)  { return MPI_UNSIGNED_CHAR; }
static MPI_Op bench_o_sum(void)    { return MPI_SUM; }
static MPI_Op bench_o_max(void)    { return MPI_MAX; }
static MPI_Op bench_o_minloc(void) { return MPI_MINLOC; }
static MPI_Op bench_o_maxloc(void) { return MPI_MAXLOC; }
static MPI_Op bench_o_bor(void)    { return MPI_BOR; }

static void bench_make_int(void *e, int r, int i) { *(int *)e = (r * 31 + i * 7) % 1000 - 500; }
static void bench_make_double(void *e, int r, int i) { *(double *)e = bench_value(r, (size_t)i); }
static void bench_make_float(void *e, int r, int i) { *(float *)e = (float)bench_value(r, (size_t)i); }
/* Fractions whose sum rounds: the order of the reduction shows in the bits. */
static void bench_make_frac_d(void *e, int r, int i)
{
    *(double *)e = (1.0 + r) / (3.0 + (r * 13 + i) % 17);
}

static void bench_make_frac_f(void *e, int r, int i)
{
    *(float *)e = (float)((1.0 + r) / (3.0 + (r * 13 + i) % 17));
}

static void bench_make_uchar(void *e, int r, int i)
{
    *(unsigned char *)e = (unsigned char)((1u << ((r + i) % 8)) ^ (i & 0x11));
}

/* Values repeat across ranks, so ties exercise the lowest-index rule. */
static void bench_make_di(void *e, int r, int i)
{
    bench_di_t *p = e;

    p->v = (r * 5 + i) % 4;
    p->k = r;
}

static void bench_make_fi(void *e, int r, int i)
{
    bench_fi_t *p = e;

    p->v = (float)((r * 3 + i) % 5);
    p->k = r * 10 + i % 3;
}

static int bench_same_int(const void *a, const void *b) { return *(const int *)a == *(const int *)b; }
static int bench_same_uchar(const void *a, const void *b)
{
    return *(const unsigned char *)a == *(const unsigned char *)b;
}
/* Bitwise: every rank must end with the same bits as the reference. */
static int bench_same_double(const void *a, const void *b) { return !memcmp(a, b, sizeof(double)); }
static int bench_same_float(const void *a, const void *b) { return !memcmp(a, b, sizeof(float)); }
/* Field by field: the padding of the pair is not data. */
static int bench_same_di(const void *a, const void *b)
{
    const bench_di_t *x = a, *y = b;

    return !memcmp(&x->v, &y->v, sizeof(x->v)) && x->k == y->k;
}

static int bench_same_fi(const void *a, const void *b)
{
    const bench_fi_t *x = a, *y = b;

    return !memcmp(&x->v, &y->v, sizeof(x->v)) && x->k == y->k;
}

static const bench_case_t bench_cases[] = {
    {"int sum", sizeof(int), bench_t_int, bench_o_sum, bench_make_int, bench_same_int, 1},
    {"int max", sizeof(int), bench_t_int, bench_o_max, bench_make_int, bench_same_int, 1},
    {"double sum", sizeof(double), bench_t_double, bench_o_sum, bench_make_double,
     bench_same_double, 1},
    {"float sum", sizeof(float), bench_t_float, bench_o_sum, bench_make_float, bench_same_float,
     1},
    {"double_int minloc", sizeof(bench_di_t), bench_t_di, bench_o_minloc, bench_make_di,
     bench_same_di, 1},
    {"float_int maxloc", sizeof(bench_fi_t), bench_t_fi, bench_o_maxloc, bench_make_fi,
     bench_same_fi, 1},
    {"uchar bor", 1, bench_t_uchar, bench_o_bor, bench_make_uchar, bench_same_uchar, 1},
    {"double sum rounded", sizeof(double), bench_t_double, bench_o_sum, bench_make_frac_d,
     bench_same_double, 0},
    {"float sum rounded", sizeof(float), bench_t_float, bench_o_sum, bench_make_frac_f,
     bench_same_float, 0},
};

#define BENCH_GUARD 64 /* bytes after rbuf that must stay untouched */

/* One check: returns the number of wrong elements (or guard bytes) on this rank. */
static int bench_check_one(const bench_case_t *tc, int alg, int count, int in_place,
                           MPI_Comm comm, char *sbuf, char *rbuf, char *ref)
{
    size_t len = (size_t)count * tc->size;
    int i, bad = 0, rc;

    for (i = 0; i < count; i++) {
        tc->make(sbuf + (size_t)i * tc->size, bench_rank, i);
    }
    PMPI_Allreduce(sbuf, ref, count, tc->dtype(), tc->op(), MPI_COMM_WORLD);
    if (in_place) {
        memcpy(rbuf, sbuf, len);
    } else {
        memset(rbuf, 0xa5, len); /* a result must not depend on what rbuf held */
    }
    memset(rbuf + len, 0x5a, BENCH_GUARD);
    rc = shim_host_allreduce(in_place ? MPI_IN_PLACE : sbuf, rbuf, count, tc->dtype(),
                             tc->op(), comm, (shim_host_alg_t)alg);
    if (!tc->exact) {
        if (bench_rank == 0) {
            memcpy(ref, rbuf, len);
        }
        PMPI_Bcast(ref, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    for (i = 0; rc == MPI_SUCCESS && i < count; i++) {
        bad += !tc->same(rbuf + (size_t)i * tc->size, ref + (size_t)i * tc->size);
    }
    for (i = 0; i < BENCH_GUARD; i++) {
        bad += (unsigned char)rbuf[len + (size_t)i] != 0x5a;
    }
    return rc != MPI_SUCCESS ? count + 1 : bad;
}

static int bench_selftest(MPI_Comm comm)
{
    const int counts[] = {0, 1, 2, 3, 7, bench_size - 1, bench_size, bench_size + 1, 1000, 65537};
    const int ncounts = (int)(sizeof(counts) / sizeof(counts[0]));
    const size_t maxlen = 65537 * sizeof(bench_di_t) + BENCH_GUARD;
    unsigned long passed = 0, failed = 0;
    char *sbuf = malloc(maxlen), *rbuf = malloc(maxlen), *ref = malloc(maxlen);
    size_t tc;
    int alg, ci, ip, bad, anybad;

    if (sbuf == NULL || rbuf == NULL || ref == NULL) {
        fprintf(stderr, "agg_host_bench: cannot allocate 3 x %zu bytes\n", maxlen);
        return 1;
    }
    for (alg = 0; alg < SHIM_ALG__COUNT; alg++) {
        for (tc = 0; tc < sizeof(bench_cases) / sizeof(bench_cases[0]); tc++) {
            for (ci = 0; ci < ncounts; ci++) {
                for (ip = 0; ip < 2; ip++) {
                    bad = bench_check_one(&bench_cases[tc], alg, counts[ci], ip, comm, sbuf,
                                          rbuf, ref);
                    PMPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
                    if (anybad) {
                        failed++;
                        if (bad) {
                            fprintf(stderr, "agg_host_bench: rank %d: %s %s count %d%s: "
                                    "%d wrong\n", bench_rank, shim_host_alg_name(alg),
                                    bench_cases[tc].name, counts[ci],
                                    ip ? " in place" : "", bad);
                        }
                    } else {
                        passed++;
                    }
                }
            }
        }
    }
    if (bench_rank == 0) {
        printf("agg_host_bench: %lu passed, %lu failed (%d ranks)\n", passed, failed,
               bench_size);
    }
    free(sbuf);
    free(rbuf);
    free(ref);
    return failed != 0;
}

/* ----------------------------------------------------------------- main */

static size_t bench_parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);

    switch (*end) {
    case 'k': case 'K': return v << 10;
    case 'm': case 'M': return v << 20;
    case 'g': case 'G': return v << 30;
    default:            return v;
    }
}

/* -1: auto (the thresholds choose), -2: not an algorithm. */
static int bench_parse_alg(const char *s)
{
    if (strcmp(s, "auto") == 0) {
        return -1;
    }
    if (strcmp(s, "rd") == 0) {
        return SHIM_ALG_RECURSIVE_DOUBLING;
    }
    if (strcmp(s, "rab") == 0) {
        return SHIM_ALG_RABENSEIFNER;
    }
    if (strcmp(s, "ring") == 0) {
        return SHIM_ALG_RING;
    }
    return -2;
}

static int bench_args(int argc, char **argv, bench_opts_t *o)
{
    int c;

    *o = (bench_opts_t){.min_bytes = 8, .max_bytes = 64u << 20, .factor = 2, .iters = 1000,
                        .rounds = 15, .alg = -1, .type = "float"};
    while ((c = getopt(argc, argv, "b:e:f:n:r:t:a:dimCh")) != -1) {
        switch (c) {
        case 'b': o->min_bytes = bench_parse_size(optarg); break;
        case 'e': o->max_bytes = bench_parse_size(optarg); break;
        case 'f': o->factor = atoi(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'r': o->rounds = atoi(optarg); break;
        case 't': o->type = optarg; break;
        case 'a': o->alg = bench_parse_alg(optarg); break;
        case 'd': o->dynamic = 1; break;
        case 'i': o->in_place = 1; break;
        case 'm': o->median = 1; break;
        case 'C': o->check_only = 1; break;
        default:  return -1;
        }
    }
    if ((strcmp(o->type, "float") && strcmp(o->type, "double") && strcmp(o->type, "int32")) ||
        o->min_bytes == 0 || o->max_bytes < o->min_bytes || o->max_bytes > INT_MAX ||
        o->factor < 2 || o->iters < 1 || o->alg < -1 || o->rounds < 1 || o->rounds > BENCH_ROUNDS_MAX) {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    MPI_Comm comm;
    int rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &bench_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &bench_size);
    if (bench_args(argc, argv, &o) != 0) {
        if (bench_rank == 0) {
            fprintf(stderr, "usage: agg_host_bench [-b MIN] [-e MAX] [-f 2|4] [-n ITERS] "
                    "[-r ROUNDS<=%d] [-t float|double|int32] [-a auto|rd|rab|ring] [-d] [-i] "
                    "[-m] | -C\n", BENCH_ROUNDS_MAX);
        }
        MPI_Finalize();
        return 2;
    }
    /* The shim's calls run on a private duplicate, as in the library. */
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    rc = o.check_only ? bench_selftest(comm) : bench_perf(&o, comm);
    shim_host_cleanup();
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return rc;
}
