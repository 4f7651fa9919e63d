/*
 * agg_perf: collective latency and bandwidth in the nccl-tests format, for
 * several implementations of each collective measured side by side in one
 * run, on the same ranks, buffers and sizes:
 *
 *   mpi   Open MPI's own collectives (PMPI_*, so a preloaded shim is bypassed);
 *   host  hcoll_shim's host allreduce (shim_host_allreduce; allreduce only);
 *   llt   libagg called directly, low-latency tree (agg_reduce_spec_t.mode LLT);
 *   sat   libagg, streaming aggregation tree (mode SAT; reductions only).
 *
 * The libagg paths need aggmgr and switchsim: run under build/bin/aggrun.
 * Without them those paths are skipped with the reason, and the others run.
 *
 * For each size the paths take turns: path A's cells, path B's, ... and that
 * again -R times, the first path rotating, so slow phases of a noisy machine
 * hit every path alike; a row shows each path's median (or minimum) time.
 *
 * Exits 1 when an element was wrong or a call failed, 2 on a bad option.
 */
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/agg.h"
#include "shim_host.h"

/*
 * The collectives other than allreduce are newer than libagg's first
 * release. Weak references let this tool run against a libagg.so without
 * them: a missing one is NULL, and its rows are skipped with a note.
 */
#pragma weak agg_reduce
#pragma weak agg_ireduce
#pragma weak agg_reduce_scatter
#pragma weak agg_ireduce_scatter
#pragma weak agg_bcast
#pragma weak agg_ibcast
#pragma weak agg_allgather
#pragma weak agg_iallgather
#pragma weak agg_barrier
#pragma weak agg_ibarrier

/*
 * Default iteration counts: enough calls that small sizes are not timer
 * noise, few enough that 16 MiB on 4 ranks over 2 cores, four paths and
 * three rounds, stays within a few minutes.
 */
#define PERF_ITER_BYTES  (64u << 20) /* bytes per timed loop, when -n is not given */
#define PERF_ITERS_MIN   5
#define PERF_ITERS_MAX   500
#define PERF_WARMUP_MIN  1
#define PERF_WARMUP_MAX  20
#define PERF_DEPTH_MAX   64 /* -W: non-blocking calls in flight */
#define PERF_ROUNDS_MAX  99

typedef enum perf_path_id { PERF_MPI, PERF_HOST, PERF_LLT, PERF_SAT, PERF_PATH__COUNT } perf_path_id_t;
typedef enum perf_op_id { PERF_SUM, PERF_PROD, PERF_MIN, PERF_MAX, PERF_OP__COUNT } perf_op_id_t;

static const char *const perf_path_names[PERF_PATH__COUNT] = {"mpi", "host", "llt", "sat"};
static const char *const perf_coll_names[AGG_COLL__COUNT] = {
    "allreduce", "reduce", "bcast", "barrier", "reduce_scatter", "allgather"};

/* MPI handles are not compile-time constants in every MPI: look them up by function. */
static MPI_Datatype perf_mpi_int8(void)   { return MPI_INT8_T; }
static MPI_Datatype perf_mpi_uint8(void)  { return MPI_UINT8_T; }
static MPI_Datatype perf_mpi_int32(void)  { return MPI_INT32_T; }
static MPI_Datatype perf_mpi_uint32(void) { return MPI_UINT32_T; }
static MPI_Datatype perf_mpi_int64(void)  { return MPI_INT64_T; }
static MPI_Datatype perf_mpi_uint64(void) { return MPI_UINT64_T; }
static MPI_Datatype perf_mpi_float(void)  { return MPI_FLOAT; }
static MPI_Datatype perf_mpi_double(void) { return MPI_DOUBLE; }
static MPI_Op perf_mpi_sum(void)  { return MPI_SUM; }
static MPI_Op perf_mpi_prod(void) { return MPI_PROD; }
static MPI_Op perf_mpi_min(void)  { return MPI_MIN; }
static MPI_Op perf_mpi_max(void)  { return MPI_MAX; }

typedef struct perf_type {
    const char   *name;   /* nccl-tests' name */
    agg_dtype_t   dtype;
    int           is_signed;
    double        exact;  /* largest sum the type holds exactly */
    MPI_Datatype (*mpi)(void); /* NULL: MPI has no such type */
} perf_type_t;

static const perf_type_t perf_types[] = {
    {"int8", AGG_DTYPE_INT8, 1, 127, perf_mpi_int8},
    {"uint8", AGG_DTYPE_UINT8, 0, 255, perf_mpi_uint8},
    {"int32", AGG_DTYPE_INT32, 1, 1 << 20, perf_mpi_int32},
    {"uint32", AGG_DTYPE_UINT32, 0, 1 << 20, perf_mpi_uint32},
    {"int64", AGG_DTYPE_INT64, 1, 1 << 20, perf_mpi_int64},
    {"uint64", AGG_DTYPE_UINT64, 0, 1 << 20, perf_mpi_uint64},
    {"half", AGG_DTYPE_FLOAT16, 1, 2048, NULL},
    {"float", AGG_DTYPE_FLOAT32, 1, 1 << 20, perf_mpi_float},
    {"double", AGG_DTYPE_FLOAT64, 1, 1 << 20, perf_mpi_double},
    {"bfloat16", AGG_DTYPE_BFLOAT16, 1, 256, NULL},
};
#define PERF_NTYPES (sizeof(perf_types) / sizeof(perf_types[0]))

typedef struct perf_op {
    const char *name;
    agg_op_t    agg;
    MPI_Op    (*mpi)(void);
} perf_op_t;

static const perf_op_t perf_ops[PERF_OP__COUNT] = {
    {"sum", AGG_OP_SUM, perf_mpi_sum},
    {"prod", AGG_OP_PROD, perf_mpi_prod},
    {"min", AGG_OP_MIN, perf_mpi_min},
    {"max", AGG_OP_MAX, perf_mpi_max},
};

typedef struct perf_opts {
    size_t             min_bytes, max_bytes;
    size_t             factor;    /* 0: add `increment` instead */
    size_t             increment;
    int                iters, warmup; /* -1: by size */
    int                check, blocking, root, depth, rounds, use_min;
    const perf_type_t *type;
    perf_op_id_t       op;
    unsigned           colls;     /* bit per agg_coll_type_t */
    unsigned           paths;     /* bit per perf_path_id_t */
    const char        *png, *table;
    size_t             span;      /* values of a sum stay below this (perf_gen) */
} perf_opts_t;

/* What the run holds: communicators, libagg handles, buffers. */
typedef struct perf_env {
    int               rank, size, local_size;
    MPI_Comm          ctl;   /* timing barriers and agreement, never timed */
    MPI_Comm          mpi;   /* the mpi path */
    MPI_Comm          host;  /* the host path (shim_host_allreduce wants a private one) */
    MPI_Comm          oob;   /* libagg's out-of-band channel */
    shim_host_tune_t  tune;
    agg_context_t    *actx;
    agg_comm_t       *acomm;
    unsigned          have;  /* paths that can run, bit per perf_path_id_t */
    char             *sbuf, *rbuf, *ebuf; /* input, output, expected output */
    FILE             *table;
} perf_env_t;

/* One call's arguments, as every path needs them. */
typedef struct perf_call {
    agg_coll_type_t    coll;
    const perf_type_t *type;
    perf_op_id_t       op;
    int                root;
    int                in_place;
    const void        *sbuf;
    void              *rbuf;
    size_t             count; /* elements per member (allgather, reduce_scatter: one block) */
} perf_call_t;

typedef union perf_req {
    MPI_Request    mpi;
    agg_request_t *agg;
} perf_req_t;

/*
 * A path: starts a call (blocking when req is NULL, else leaves a request
 * in *req) and waits for a request. Both return 0, a negative agg_status_t
 * or a positive MPI error code.
 */
typedef struct perf_path_ops {
    const char *(*skip)(const perf_env_t *e, agg_coll_type_t coll, const perf_type_t *t);
    int         (*start)(perf_env_t *e, const perf_call_t *c, perf_req_t *req);
    int         (*wait)(perf_env_t *e, perf_req_t *req);
} perf_path_ops_t;

/* One (path, size, mode) measurement. */
typedef struct perf_cell {
    double    usec;  /* < 0: not run */
    long long wrong; /* -1: not checked */
    int       rc;
} perf_cell_t;

/* One printed row (rank 0 keeps them for -g). */
typedef struct perf_row {
    agg_coll_type_t coll;
    perf_path_id_t  path;
    size_t          bytes, count;
    perf_cell_t     cell[2]; /* out-of-place, in-place */
} perf_row_t;

/* The shape of a collective at one size, on this member. */
typedef struct perf_shape {
    agg_coll_type_t coll;
    size_t          bytes;   /* the size column: all members' data for allgather, reduce_scatter */
    size_t          count;   /* elements per member, the count column */
    size_t          in_len;  /* input elements this member holds */
    size_t          out_len; /* result elements it checks (0: none) */
} perf_shape_t;

static int perf_rank;

static void perf_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Rank 0 says it; every rank calls it at the same point. */
static void perf_note(const char *fmt, ...)
{
    va_list ap;

    if (perf_rank != 0) {
        return;
    }
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* ------------------------------------------------------------------ options */

static void perf_usage(FILE *out)
{
    fprintf(out,
            "usage: agg_perf [options]   (an MPI program: run it under aggrun and mpirun)\n"
            "  -b MIN        smallest size in bytes, K/M/G suffixes (default 8)\n"
            "  -e MAX        largest size in bytes (default 16M)\n"
            "  -f FACTOR     multiply the size by FACTOR each row (default 2)\n"
            "  -i INCREMENT  add INCREMENT bytes each row instead (the later of -f, -i wins)\n"
            "  -n ITERS      timed calls per cell (default %d..%d by size)\n"
            "  -w WARMUP     untimed calls before each timed loop (default %d..%d by size)\n"
            "  -c 0|1        check the result of one extra call per cell (default 1)\n"
            "  -o OP         sum, prod, min or max (default sum)\n"
            "  -d TYPE       int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
            "                (default float; half and bfloat16: libagg only)\n"
            "  -z 0|1        1: blocking calls (default); 0: non-blocking, -W in flight\n"
            "  -W DEPTH      non-blocking calls in flight with -z 0 (default 8, max %d)\n"
            "  -r ROOT       root of reduce and bcast (default 0)\n"
            "  -C COLLS      allreduce reduce bcast barrier reduce_scatter allgather, a\n"
            "                comma list, or all (default allreduce)\n"
            "  -p PATHS      comma list of mpi, host, llt, sat (default: all that can run)\n"
            "  -R ROUNDS     measure each cell ROUNDS times, the paths taking turns (default 3)\n"
            "  -s STAT       median or min of the rounds (default median)\n"
            "  -g FILE.png   plot time and busbw against size, a line per path (gnuplot)\n"
            "  -T FILE       write the rows as a whitespace-separated data file\n"
            "  -h            this text\n",
            PERF_ITERS_MIN, PERF_ITERS_MAX, PERF_WARMUP_MIN, PERF_WARMUP_MAX, PERF_DEPTH_MAX);
}

static void perf_arg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void perf_arg_error(const char *fmt, ...)
{
    va_list ap;

    if (perf_rank != 0) {
        return;
    }
    va_start(ap, fmt);
    fputs("agg_perf: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* "64", "8K", "16M", "1G": powers of 1024, like nccl-tests. */
static int perf_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);

    if (end == s || *s == '-') {
        return -1;
    }
    switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
    }
    if (*end != '\0') {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int perf_parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A comma list of names (or "all") into a bit mask; -1 names a bad entry. */
static int perf_parse_list(const char *s, const char *const *names, int n, unsigned *mask,
                           char *bad, size_t badlen)
{
    char buf[256], *tok, *save = NULL;
    int i;

    snprintf(buf, sizeof(buf), "%s", s);
    *mask = 0;
    for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "all") == 0) {
            *mask = (1u << n) - 1;
            continue;
        }
        for (i = 0; i < n && strcmp(tok, names[i]) != 0; ++i) {
        }
        if (i == n) {
            snprintf(bad, badlen, "%s", tok);
            return -1;
        }
        *mask |= 1u << i;
    }
    return *mask != 0 ? 0 : -1;
}

/* Returns 0 to run, 1 to exit successfully (help), -1 on a bad option. */
static int perf_parse_args(int argc, char **argv, int nranks, perf_opts_t *o)
{
    static const char *const op_names[PERF_OP__COUNT] = {"sum", "prod", "min", "max"};
    char bad[256] = "";
    unsigned ops;
    size_t i;
    int c, v;

    *o = (perf_opts_t){.min_bytes = 8, .max_bytes = 16u << 20, .factor = 2, .iters = -1,
                       .warmup = -1, .check = 1, .blocking = 1, .depth = 8, .rounds = 3,
                       .type = &perf_types[7], .op = PERF_SUM,
                       .colls = 1u << AGG_COLL_ALLREDUCE, .paths = (1u << PERF_PATH__COUNT) - 1};
    opterr = 0;
    while ((c = getopt(argc, argv, "b:e:f:i:n:w:c:o:d:z:W:r:C:p:R:s:g:T:h")) != -1) {
        switch (c) {
        case 'b':
        case 'e':
            if (perf_parse_size(optarg, c == 'b' ? &o->min_bytes : &o->max_bytes) != 0) {
                perf_arg_error("-%c '%s': expected a size in bytes, e.g. 8, 64K or 16M\n", c,
                               optarg);
                return -1;
            }
            break;
        case 'f':
            if (perf_parse_int(optarg, 2, 1 << 20, &v) != 0) {
                perf_arg_error("-f '%s': expected an integer >= 2\n", optarg);
                return -1;
            }
            o->factor = (size_t)v;
            break;
        case 'i':
            if (perf_parse_size(optarg, &o->increment) != 0 || o->increment == 0) {
                perf_arg_error("-i '%s': expected a positive size in bytes\n", optarg);
                return -1;
            }
            o->factor = 0;
            break;
        case 'n':
        case 'w':
            if (perf_parse_int(optarg, c == 'n', 1000000, c == 'n' ? &o->iters : &o->warmup)) {
                perf_arg_error("-%c '%s': expected an integer >= %d\n", c, optarg, c == 'n');
                return -1;
            }
            break;
        case 'c':
        case 'z':
            if (perf_parse_int(optarg, 0, 1, c == 'c' ? &o->check : &o->blocking) != 0) {
                perf_arg_error("-%c '%s': expected 0 or 1\n", c, optarg);
                return -1;
            }
            break;
        case 'W':
            if (perf_parse_int(optarg, 1, PERF_DEPTH_MAX, &o->depth) != 0) {
                perf_arg_error("-W '%s': expected 1..%d\n", optarg, PERF_DEPTH_MAX);
                return -1;
            }
            break;
        case 'r':
            if (perf_parse_int(optarg, 0, nranks - 1, &o->root) != 0) {
                perf_arg_error("-r '%s': expected a rank in 0..%d\n", optarg, nranks - 1);
                return -1;
            }
            break;
        case 'R':
            if (perf_parse_int(optarg, 1, PERF_ROUNDS_MAX, &o->rounds) != 0) {
                perf_arg_error("-R '%s': expected 1..%d\n", optarg, PERF_ROUNDS_MAX);
                return -1;
            }
            break;
        case 's':
            if (strcmp(optarg, "min") != 0 && strcmp(optarg, "median") != 0) {
                perf_arg_error("-s '%s': expected median or min\n", optarg);
                return -1;
            }
            o->use_min = strcmp(optarg, "min") == 0;
            break;
        case 'o':
            if (perf_parse_list(optarg, op_names, PERF_OP__COUNT, &ops, bad, sizeof(bad)) != 0 ||
                (ops & (ops - 1)) != 0) {
                perf_arg_error("-o '%s': expected one of sum, prod, min, max\n", optarg);
                return -1;
            }
            o->op = (perf_op_id_t)__builtin_ctz(ops);
            break;
        case 'd':
            for (i = 0; i < PERF_NTYPES && strcmp(optarg, perf_types[i].name) != 0; ++i) {
            }
            if (i == PERF_NTYPES) {
                perf_arg_error("-d '%s': expected int8, uint8, int32, uint32, int64, uint64, "
                               "half, float, double or bfloat16\n", optarg);
                return -1;
            }
            o->type = &perf_types[i];
            break;
        case 'C':
            if (perf_parse_list(optarg, perf_coll_names, AGG_COLL__COUNT, &o->colls, bad,
                                sizeof(bad)) != 0) {
                perf_arg_error("-C '%s': '%s' is not allreduce, reduce, bcast, barrier, "
                               "reduce_scatter, allgather or all\n", optarg, bad);
                return -1;
            }
            break;
        case 'p':
            if (perf_parse_list(optarg, perf_path_names, PERF_PATH__COUNT, &o->paths, bad,
                                sizeof(bad)) != 0) {
                perf_arg_error("-p '%s': '%s' is not mpi, host, llt, sat or all\n", optarg,
                               bad);
                return -1;
            }
            break;
        case 'g':
            o->png = optarg;
            break;
        case 'T':
            o->table = optarg;
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
    if (o->max_bytes / agg_dtype_size(o->type->dtype) > INT_MAX) {
        perf_arg_error("-e %zu: more than %d %s elements do not fit an MPI count\n",
                       o->max_bytes, INT_MAX, o->type->name);
        return -1;
    }
    /* sums of every member's values stay exact in the type (perf_gen) */
    o->span = (size_t)(o->type->exact / nranks);
    o->span = o->span < 2 ? 2 : o->span > 64 ? 64 : o->span;
    return 0;
}

/* --------------------------------------------------------------- the data */

/*
 * What member r holds at element k: small integers, exact in every type,
 * different on every member and element, so a result from the wrong member
 * or offset shows. Sums stay within the type's exact range; products are of
 * 1, -1 and a few 2s.
 */
static double perf_gen(const perf_opts_t *o, int r, size_t k)
{
    size_t h = k * 7 + (size_t)r * 13;

    switch (o->op) {
    case PERF_SUM:
        return (double)(h % o->span) - (o->type->is_signed ? (double)(o->span / 4) : 0);
    case PERF_PROD:
        if ((k + (size_t)r) % 8 == 0) {
            return 2;
        }
        return o->type->is_signed && (k + 3 * (size_t)r) % 5 == 0 ? -1 : 1;
    default:
        return (double)(h % 64) - (o->type->is_signed ? 16 : 0);
    }
}

static double perf_fold(perf_op_id_t op, double a, double b)
{
    switch (op) {
    case PERF_SUM:  return a + b;
    case PERF_PROD: return a * b;
    case PERF_MIN:  return b < a ? b : a;
    default:        return b > a ? b : a;
    }
}

static void perf_set(const perf_type_t *t, void *buf, size_t i, double v)
{
    switch (t->dtype) {
    case AGG_DTYPE_INT8:     ((int8_t *)buf)[i]   = (int8_t)v; break;
    case AGG_DTYPE_UINT8:    ((uint8_t *)buf)[i]  = (uint8_t)v; break;
    case AGG_DTYPE_INT32:    ((int32_t *)buf)[i]  = (int32_t)v; break;
    case AGG_DTYPE_UINT32:   ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case AGG_DTYPE_INT64:    ((int64_t *)buf)[i]  = (int64_t)v; break;
    case AGG_DTYPE_UINT64:   ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case AGG_DTYPE_FLOAT16:  ((uint16_t *)buf)[i] = agg_float_to_half((float)v); break;
    case AGG_DTYPE_BFLOAT16: ((uint16_t *)buf)[i] = agg_float_to_bf16((float)v); break;
    case AGG_DTYPE_FLOAT32:  ((float *)buf)[i]    = (float)v; break;
    default:                 ((double *)buf)[i]   = v; break;
    }
}

static double perf_get(const perf_type_t *t, const void *buf, size_t i)
{
    switch (t->dtype) {
    case AGG_DTYPE_INT8:     return ((const int8_t *)buf)[i];
    case AGG_DTYPE_UINT8:    return ((const uint8_t *)buf)[i];
    case AGG_DTYPE_INT32:    return ((const int32_t *)buf)[i];
    case AGG_DTYPE_UINT32:   return ((const uint32_t *)buf)[i];
    case AGG_DTYPE_INT64:    return (double)((const int64_t *)buf)[i];
    case AGG_DTYPE_UINT64:   return (double)((const uint64_t *)buf)[i];
    case AGG_DTYPE_FLOAT16:  return agg_half_to_float(((const uint16_t *)buf)[i]);
    case AGG_DTYPE_BFLOAT16: return agg_bf16_to_float(((const uint16_t *)buf)[i]);
    case AGG_DTYPE_FLOAT32:  return ((const float *)buf)[i];
    default:                 return ((const double *)buf)[i];
    }
}

/* The shape of `coll` at `bytes` requested bytes; count 0: too small to run. */
static perf_shape_t perf_shape(const perf_opts_t *o, const perf_env_t *e, agg_coll_type_t coll,
                               size_t bytes)
{
    size_t ts = agg_dtype_size(o->type->dtype), n = (size_t)e->size;
    perf_shape_t s = {.coll = coll};

    switch (coll) {
    case AGG_COLL_BARRIER:
        break;
    case AGG_COLL_REDUCE_SCATTER:
        s.count   = bytes / ts / n;
        s.in_len  = s.count * n;
        s.out_len = s.count;
        s.bytes   = s.in_len * ts;
        break;
    case AGG_COLL_ALLGATHER:
        s.count   = bytes / ts / n;
        s.in_len  = s.count;
        s.out_len = s.count * n;
        s.bytes   = s.out_len * ts;
        break;
    default:
        s.count   = bytes / ts;
        s.in_len  = s.count;
        s.out_len = coll != AGG_COLL_REDUCE || e->rank == o->root ? s.count : 0;
        s.bytes   = s.count * ts;
        break;
    }
    return s;
}

/* Fills sbuf with this member's input and ebuf with the result it must see. */
static void perf_shape_fill(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s)
{
    const perf_type_t *t = o->type;
    int src = s->coll == AGG_COLL_BCAST ? o->root : e->rank, r;
    size_t k, base = s->coll == AGG_COLL_REDUCE_SCATTER ? (size_t)e->rank * s->count : 0;
    double acc;

    for (k = 0; k < s->in_len; ++k) {
        perf_set(t, e->sbuf, k, perf_gen(o, src, k));
    }
    for (k = 0; k < s->out_len; ++k) {
        switch (s->coll) {
        case AGG_COLL_BCAST:
            acc = perf_gen(o, o->root, k);
            break;
        case AGG_COLL_ALLGATHER:
            acc = perf_gen(o, (int)(k / s->count), k % s->count);
            break;
        default:
            acc = perf_gen(o, 0, base + k);
            for (r = 1; r < e->size; ++r) {
                acc = perf_fold(o->op, acc, perf_gen(o, r, base + k));
            }
            break;
        }
        perf_set(t, e->ebuf, k, acc);
    }
}

/* --------------------------------------------------------------- the paths */

static int perf_is_reduction(agg_coll_type_t coll)
{
    return coll == AGG_COLL_ALLREDUCE || coll == AGG_COLL_REDUCE ||
           coll == AGG_COLL_REDUCE_SCATTER;
}

static const char *perf_mpi_skip(const perf_env_t *e, agg_coll_type_t coll,
                                 const perf_type_t *t)
{
    return perf_is_reduction(coll) && t->mpi == NULL ? "MPI has no such type" : NULL;
}

/* bcast and allgather move bytes: they go as MPI_BYTE whatever the type. */
static int perf_mpi_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    MPI_Datatype dt = c->type->mpi != NULL ? c->type->mpi() : MPI_BYTE;
    MPI_Op op       = perf_ops[c->op].mpi();
    const void *s   = c->in_place ? MPI_IN_PLACE : c->sbuf;
    int n = (int)c->count, bytes = (int)(c->count * agg_dtype_size(c->type->dtype));
    MPI_Request *r  = req != NULL ? &req->mpi : NULL;

    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return r ? PMPI_Iallreduce(s, c->rbuf, n, dt, op, e->mpi, r)
                 : PMPI_Allreduce(s, c->rbuf, n, dt, op, e->mpi);
    case AGG_COLL_REDUCE:
        s = c->in_place && e->rank == c->root ? MPI_IN_PLACE : c->sbuf;
        return r ? PMPI_Ireduce(s, c->rbuf, n, dt, op, c->root, e->mpi, r)
                 : PMPI_Reduce(s, c->rbuf, n, dt, op, c->root, e->mpi);
    case AGG_COLL_BCAST:
        return r ? PMPI_Ibcast(c->rbuf, bytes, MPI_BYTE, c->root, e->mpi, r)
                 : PMPI_Bcast(c->rbuf, bytes, MPI_BYTE, c->root, e->mpi);
    case AGG_COLL_BARRIER:
        return r ? PMPI_Ibarrier(e->mpi, r) : PMPI_Barrier(e->mpi);
    case AGG_COLL_REDUCE_SCATTER:
        return r ? PMPI_Ireduce_scatter_block(s, c->rbuf, n, dt, op, e->mpi, r)
                 : PMPI_Reduce_scatter_block(s, c->rbuf, n, dt, op, e->mpi);
    case AGG_COLL_ALLGATHER:
        return r ? PMPI_Iallgather(s, bytes, MPI_BYTE, c->rbuf, bytes, MPI_BYTE, e->mpi, r)
                 : PMPI_Allgather(s, bytes, MPI_BYTE, c->rbuf, bytes, MPI_BYTE, e->mpi);
    default:
        return MPI_ERR_ARG;
    }
}

static int perf_mpi_wait(perf_env_t *e, perf_req_t *req)
{
    return PMPI_Wait(&req->mpi, MPI_STATUS_IGNORE);
}

static const char *perf_host_skip(const perf_env_t *e, agg_coll_type_t coll,
                                  const perf_type_t *t)
{
    return coll != AGG_COLL_ALLREDUCE ? "allreduce only" :
           t->mpi == NULL             ? "MPI has no such type" : NULL;
}

/* shim_host_allreduce has no non-blocking form: it completes before it returns. */
static int perf_host_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    size_t bytes = c->count * agg_dtype_size(c->type->dtype);

    if (req != NULL) {
        req->mpi = MPI_REQUEST_NULL;
    }
    return shim_host_allreduce(c->in_place ? MPI_IN_PLACE : c->sbuf, c->rbuf, (int)c->count,
                               c->type->mpi(), perf_ops[c->op].mpi(), e->host,
                               shim_host_choose(&e->tune, bytes, e->size));
}

/* Whether this libagg.so has the collective (blocking or non-blocking form). */
static int perf_agg_linked(agg_coll_type_t coll, int blocking)
{
    switch (coll) {
    case AGG_COLL_ALLREDUCE:      return 1;
    case AGG_COLL_REDUCE:         return blocking ? agg_reduce != NULL : agg_ireduce != NULL;
    case AGG_COLL_BCAST:          return blocking ? agg_bcast != NULL : agg_ibcast != NULL;
    case AGG_COLL_BARRIER:        return blocking ? agg_barrier != NULL : agg_ibarrier != NULL;
    case AGG_COLL_REDUCE_SCATTER: return blocking ? agg_reduce_scatter != NULL
                                                  : agg_ireduce_scatter != NULL;
    case AGG_COLL_ALLGATHER:      return blocking ? agg_allgather != NULL
                                                  : agg_iallgather != NULL;
    default:                      return 0;
    }
}

static const char *perf_llt_skip(const perf_env_t *e, agg_coll_type_t coll,
                                 const perf_type_t *t)
{
    return !perf_agg_linked(coll, 1) || !perf_agg_linked(coll, 0)
           ? "not in this libagg.so" : NULL;
}

static const char *perf_sat_skip(const perf_env_t *e, agg_coll_type_t coll,
                                 const perf_type_t *t)
{
    return !perf_is_reduction(coll) ? "no tree choice for this collective (see llt)" :
           perf_llt_skip(e, coll, t);
}

static int perf_agg_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req,
                          agg_aggr_mode_t mode)
{
    agg_reduce_spec_t rs = {.sbuf = c->sbuf, .rbuf = c->rbuf, .count = c->count,
                            .dtype = c->type->dtype, .op = perf_ops[c->op].agg, .mode = mode,
                            .root = c->root};
    agg_data_spec_t ds   = {.sbuf = c->sbuf, .rbuf = c->rbuf, .root = c->root,
                            .bytes = c->count * agg_dtype_size(c->type->dtype)};
    agg_request_t **r    = req != NULL ? &req->agg : NULL;
    agg_comm_t *ac       = e->acomm;

    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return r ? agg_iallreduce(ac, &rs, r) : agg_allreduce(ac, &rs);
    case AGG_COLL_REDUCE:
        return r ? agg_ireduce(ac, &rs, r) : agg_reduce(ac, &rs);
    case AGG_COLL_BCAST:
        return r ? agg_ibcast(ac, &ds, r) : agg_bcast(ac, &ds);
    case AGG_COLL_BARRIER:
        return r ? agg_ibarrier(ac, r) : agg_barrier(ac);
    case AGG_COLL_REDUCE_SCATTER:
        return r ? agg_ireduce_scatter(ac, &rs, r) : agg_reduce_scatter(ac, &rs);
    case AGG_COLL_ALLGATHER:
        return r ? agg_iallgather(ac, &ds, r) : agg_allgather(ac, &ds);
    default:
        return AGG_ERR_INVALID_PARAM;
    }
}

static int perf_llt_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    return perf_agg_start(e, c, req, AGG_AGGR_LLT);
}

static int perf_sat_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    return perf_agg_start(e, c, req, AGG_AGGR_SAT);
}

static int perf_agg_wait(perf_env_t *e, perf_req_t *req)
{
    agg_status_t st = agg_request_wait(req->agg);

    agg_request_free(req->agg);
    req->agg = NULL;
    return st;
}

static const perf_path_ops_t perf_paths[PERF_PATH__COUNT] = {
    [PERF_MPI]  = {.skip = perf_mpi_skip, .start = perf_mpi_start, .wait = perf_mpi_wait},
    [PERF_HOST] = {.skip = perf_host_skip, .start = perf_host_start, .wait = perf_mpi_wait},
    [PERF_LLT]  = {.skip = perf_llt_skip, .start = perf_llt_start, .wait = perf_agg_wait},
    [PERF_SAT]  = {.skip = perf_sat_skip, .start = perf_sat_start, .wait = perf_agg_wait},
};

/* Whether a path has an in-place form of the collective. */
static int perf_has_in_place(perf_path_id_t p, agg_coll_type_t coll)
{
    if (coll == AGG_COLL_BCAST || coll == AGG_COLL_BARRIER) {
        return 0; /* one buffer: in place is the same call */
    }
    /* libagg's reduce_scatter wants sbuf and rbuf apart */
    return coll != AGG_COLL_REDUCE_SCATTER || p == PERF_MPI;
}

static const char *perf_rc_string(int rc, char *buf, size_t len)
{
    int n = 0;

    if (rc < 0) {
        snprintf(buf, len, "%s", agg_strerror((agg_status_t)rc));
    } else if (len < MPI_MAX_ERROR_STRING || PMPI_Error_string(rc, buf, &n) != MPI_SUCCESS) {
        snprintf(buf, len, "MPI error %d", rc);
    }
    return buf;
}

/* --------------------------------------------------------------- measuring */

/* Runs `iters` calls; returns the first failure (0: none). */
static int perf_loop(perf_env_t *e, const perf_opts_t *o, perf_path_id_t p,
                     const perf_call_t *c, int iters)
{
    const perf_path_ops_t *ops = &perf_paths[p];
    perf_req_t req[PERF_DEPTH_MAX];
    int i, rc = 0, st, posted = 0, done = 0;

    if (o->blocking) {
        for (i = 0; i < iters && rc == 0; ++i) {
            rc = ops->start(e, c, NULL);
        }
        return rc;
    }
    for (i = 0; i < iters && rc == 0; ++i) {
        if (posted - done == o->depth) {
            rc = ops->wait(e, &req[done++ % o->depth]);
            if (rc != 0) {
                break;
            }
        }
        rc = ops->start(e, c, &req[posted % o->depth]);
        posted += rc == 0;
    }
    while (done < posted) {
        st = ops->wait(e, &req[done++ % o->depth]);
        rc = rc != 0 ? rc : st;
    }
    return rc;
}

/*
 * Every rank's verdict on a step: 0 when it went well everywhere, else one
 * failure (libagg's, negative, before MPI's, positive), the same on every rank.
 */
static int perf_agree(perf_env_t *e, int rc)
{
    int mine[2] = {rc < 0 ? rc : 0, rc > 0 ? -rc : 0}, all[2];

    PMPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, e->ctl);
    return all[0] != 0 ? all[0] : -all[1];
}

/* Input for the timed loop: in place, data the op leaves as it is (x + 0, x * 1, min(x, x)). */
static void perf_fill_timed(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                            int in_place)
{
    size_t ts = agg_dtype_size(o->type->dtype), k;

    if (s->coll == AGG_COLL_BCAST && e->rank == o->root) {
        memcpy(e->rbuf, e->sbuf, s->in_len * ts);
    } else if (in_place && s->coll == AGG_COLL_ALLGATHER) {
        memcpy(e->rbuf + (size_t)e->rank * s->count * ts, e->sbuf, s->count * ts);
    } else if (in_place && o->op == PERF_SUM) {
        memset(e->rbuf, 0, s->in_len * ts);
    } else if (in_place && o->op == PERF_PROD) {
        for (k = 0; k < s->in_len; ++k) {
            perf_set(o->type, e->rbuf, k, 1);
        }
    } else if (in_place) {
        memcpy(e->rbuf, e->sbuf, s->in_len * ts);
    }
}

/* Input for the checked call: the result area holds the complement of what it must become. */
static void perf_fill_check(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                            int in_place)
{
    size_t ts = agg_dtype_size(o->type->dtype), k;

    for (k = 0; k < s->out_len * ts; ++k) {
        e->rbuf[k] = (char)~e->ebuf[k];
    }
    if (s->coll == AGG_COLL_BCAST && e->rank == o->root) {
        memcpy(e->rbuf, e->sbuf, s->in_len * ts);
    } else if (in_place && s->coll == AGG_COLL_ALLGATHER) {
        memcpy(e->rbuf + (size_t)e->rank * s->count * ts, e->sbuf, s->count * ts);
    } else if (in_place) {
        memcpy(e->rbuf, e->sbuf, s->in_len * ts);
    }
}

/* Wrong elements of this member's result; the first one is described on stderr. */
static long long perf_verify(const perf_opts_t *o, const perf_env_t *e, const perf_shape_t *s,
                             perf_path_id_t p, int in_place)
{
    size_t ts = agg_dtype_size(o->type->dtype), k, first = 0;
    long long wrong = 0;

    if (memcmp(e->rbuf, e->ebuf, s->out_len * ts) == 0) {
        return 0;
    }
    for (k = 0; k < s->out_len; ++k) {
        if (memcmp(e->rbuf + k * ts, e->ebuf + k * ts, ts) != 0 && wrong++ == 0) {
            first = k;
        }
    }
    fprintf(stderr, "rank %d: %s %s %s %zu B %s %s: %lld wrong, first at element %zu (got %g, "
            "expected %g)\n", e->rank, perf_path_names[p], perf_coll_names[s->coll],
            in_place ? "in-place" : "out-of-place", s->bytes, o->type->name,
            perf_ops[o->op].name, wrong, first, perf_get(o->type, e->rbuf, first),
            perf_get(o->type, e->ebuf, first));
    return wrong;
}

static int perf_iters(const perf_opts_t *o, size_t bytes, int warmup)
{
    size_t lo = warmup ? PERF_WARMUP_MIN : PERF_ITERS_MIN;
    size_t hi = warmup ? PERF_WARMUP_MAX : PERF_ITERS_MAX;
    size_t v  = bytes == 0 ? hi : PERF_ITER_BYTES / (warmup ? 16 : 1) / bytes;

    if ((warmup ? o->warmup : o->iters) >= 0) {
        return warmup ? o->warmup : o->iters;
    }
    return (int)(v < lo ? lo : v > hi ? hi : v);
}

/* Times one (path, mode) cell and, when `check`, checks one more call. */
static perf_cell_t perf_cell_run(const perf_opts_t *o, perf_env_t *e, perf_path_id_t p,
                                 const perf_shape_t *s, int in_place, int check)
{
    size_t ts = agg_dtype_size(o->type->dtype);
    perf_call_t c = {.coll = s->coll, .type = o->type, .op = o->op, .root = o->root,
                     .in_place = in_place, .sbuf = e->sbuf, .rbuf = e->rbuf,
                     .count = s->count};
    perf_cell_t cell = {.usec = -1, .wrong = -1};
    double t0, local, slowest;
    long long wrong = 0;
    int rc;

    if (in_place) {
        c.sbuf = s->coll == AGG_COLL_ALLGATHER ? e->rbuf + (size_t)e->rank * s->count * ts
                                               : e->rbuf;
    }
    perf_fill_timed(o, e, s, in_place);
    rc = perf_agree(e, perf_loop(e, o, p, &c, perf_iters(o, s->bytes, 1)));
    if (rc == 0) {
        PMPI_Barrier(e->ctl);
        t0    = PMPI_Wtime();
        rc    = perf_loop(e, o, p, &c, perf_iters(o, s->bytes, 0));
        local = (PMPI_Wtime() - t0) / perf_iters(o, s->bytes, 0);
        PMPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, e->ctl);
        rc        = perf_agree(e, rc);
        cell.usec = slowest * 1e6;
    }
    if (rc == 0 && check && s->coll != AGG_COLL_BARRIER) {
        perf_fill_check(o, e, s, in_place);
        rc    = perf_agree(e, perf_loop(e, o, p, &c, 1));
        wrong = rc == 0 ? perf_verify(o, e, s, p, in_place) : 0;
        PMPI_Allreduce(&wrong, &cell.wrong, 1, MPI_LONG_LONG, MPI_SUM, e->ctl);
    }
    cell.rc = rc;
    return cell;
}

/* The cell of the median (or least) time of n runs; wrong elements added up. */
static perf_cell_t perf_pick(perf_cell_t *runs, int n, int use_min)
{
    perf_cell_t t, best = {.usec = -1, .wrong = -1};
    int i, j, ok = 0;

    for (i = 0; i < n; ++i) {
        if (runs[i].wrong >= 0) {
            best.wrong = (best.wrong < 0 ? 0 : best.wrong) + runs[i].wrong;
        }
        if (runs[i].rc != 0 && best.rc == 0) {
            best.rc = runs[i].rc;
        }
        if (runs[i].usec >= 0) {
            runs[ok++] = runs[i];
        }
    }
    for (i = 0; i < ok; ++i) {
        for (j = i + 1; j < ok; ++j) {
            if (runs[j].usec < runs[i].usec) {
                t       = runs[i];
                runs[i] = runs[j];
                runs[j] = t;
            }
        }
    }
    if (ok > 0) {
        best.usec = runs[use_min ? 0 : ok / 2].usec;
    }
    return best;
}

/* ---------------------------------------------------------------- printing */

/* nccl-tests' bus bandwidth factors: what a link of an optimal algorithm carries. */
static double perf_bus_factor(agg_coll_type_t coll, int n)
{
    switch (coll) {
    case AGG_COLL_ALLREDUCE:      return 2.0 * (n - 1) / n;
    case AGG_COLL_REDUCE_SCATTER:
    case AGG_COLL_ALLGATHER:      return (double)(n - 1) / n;
    case AGG_COLL_BARRIER:        return 0;
    default:                      return 1;
    }
}

static double perf_algbw(const perf_row_t *r, int m)
{
    return r->cell[m].usec > 0 ? (double)r->bytes / r->cell[m].usec / 1e3 : 0;
}

/* nccl-tests prints fewer decimals as times grow, to keep the column width. */
static void perf_print_cell(const perf_row_t *r, int m, int n)
{
    const perf_cell_t *c = &r->cell[m];
    char t[32], wrong[24];

    if (c->usec < 0) {
        printf("  %8s  %6s  %6s  %6s", c->rc != 0 ? "err" : "N/A", "N/A", "N/A", "N/A");
        return;
    }
    snprintf(t, sizeof(t), c->usec >= 10000.0 ? "%.0f" : c->usec >= 100.0 ? "%.1f" : "%.2f",
             c->usec);
    if (c->wrong < 0) {
        snprintf(wrong, sizeof(wrong), "N/A");
    } else {
        snprintf(wrong, sizeof(wrong), "%lld", c->wrong);
    }
    printf("  %8s  %6.2f  %6.2f  %6s", t, perf_algbw(r, m),
           perf_algbw(r, m) * perf_bus_factor(r->coll, n), wrong);
}

static void perf_print_table_header(const perf_opts_t *o, agg_coll_type_t coll)
{
    printf("#\n# Collective: %s%s\n#\n", perf_coll_names[coll],
           coll == AGG_COLL_REDUCE_SCATTER || coll == AGG_COLL_ALLGATHER
           ? " (size: all members' data; count: one member's block)" : "");
    printf("#%58s%-34s%-34s\n", "", "          out-of-place", "            in-place");
    printf("#%11s  %12s  %8s  %6s  %6s  %5s", "size", "count", "type", "redop", "root", "path");
    printf("  %8s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    printf("  %8s  %6s  %6s  %6s  %6s\n", "time", "algbw", "busbw", "#wrong", "vsMPI");
    printf("#%11s  %12s  %8s  %6s  %6s  %5s", "(B)", "(elements)", "", "", "", "");
    printf("  %8s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("  %8s  %6s  %6s  %6s  %6s\n", "(us)", "(GB/s)", "(GB/s)", "", "(x)");
    fflush(stdout);
}

static int perf_root_column(const perf_opts_t *o, agg_coll_type_t coll)
{
    return coll == AGG_COLL_REDUCE || coll == AGG_COLL_BCAST ? o->root : -1;
}

static void perf_print_row(const perf_opts_t *o, const perf_env_t *e, const perf_row_t *r,
                           const perf_row_t *mpi)
{
    int reduction = perf_is_reduction(r->coll);

    printf("%12zu  %12zu  %8s  %6s  %6d  %5s", r->bytes, r->count,
           r->coll == AGG_COLL_BARRIER ? "none" : o->type->name,
           reduction ? perf_ops[o->op].name : "none", perf_root_column(o, r->coll),
           perf_path_names[r->path]);
    perf_print_cell(r, 0, e->size);
    perf_print_cell(r, 1, e->size);
    if (mpi != NULL && mpi->cell[0].usec > 0 && r->cell[0].usec > 0) {
        printf("  %6.2f\n", mpi->cell[0].usec / r->cell[0].usec);
    } else {
        printf("  %6s\n", "N/A");
    }
    if (e->table != NULL) {
        fprintf(e->table, "%s %s %zu %zu %s %s %d", perf_coll_names[r->coll],
                perf_path_names[r->path], r->bytes, r->count, o->type->name,
                reduction ? perf_ops[o->op].name : "none", perf_root_column(o, r->coll));
        for (int m = 0; m < 2; ++m) {
            if (r->cell[m].usec < 0) {
                fprintf(e->table, " nan nan nan %d", -1);
            } else {
                fprintf(e->table, " %.3f %.6g %.6g %lld", r->cell[m].usec, perf_algbw(r, m),
                        perf_algbw(r, m) * perf_bus_factor(r->coll, e->size), r->cell[m].wrong);
            }
        }
        if (mpi != NULL && mpi->cell[0].usec > 0 && r->cell[0].usec > 0) {
            fprintf(e->table, " %.4f\n", mpi->cell[0].usec / r->cell[0].usec);
        } else {
            fprintf(e->table, " nan\n");
        }
        fflush(e->table);
    }
    fflush(stdout);
}

/* ------------------------------------------------------------ the plot (-g) */

/* Whether `prog` is an executable in $PATH. */
static int perf_in_path(const char *prog)
{
    const char *path = getenv("PATH");
    char dir[4096], file[4352];
    size_t len;

    while (path != NULL && *path != '\0') {
        len = strcspn(path, ":");
        snprintf(dir, sizeof(dir), "%.*s", (int)len, path);
        snprintf(file, sizeof(file), "%s/%s", len ? dir : ".", prog);
        if (access(file, X_OK) == 0) {
            return 1;
        }
        path += len + (path[len] == ':');
    }
    return 0;
}

/* Writes `s` as a gnuplot single-quoted string. */
static void perf_gp_quote(FILE *gp, const char *s)
{
    fputc('\'', gp);
    for (; *s != '\0'; ++s) {
        if (*s == '\'') {
            fputc('\'', gp);
        }
        fputc(*s, gp);
    }
    fputc('\'', gp);
}

/*
 * Two panels per collective (time, busbw; out-of-place, log-log), one line
 * per path. barrier has no size: it stays in the table.
 */
static void perf_plot(const perf_opts_t *o, const perf_env_t *e, const perf_row_t *rows,
                      size_t nrows)
{
    unsigned colls = 0, paths;
    int ncolls = 0, coll, p, panel, status;
    char title[256];
    size_t i;
    FILE *gp;

    for (i = 0; i < nrows; ++i) {
        if (rows[i].coll != AGG_COLL_BARRIER && rows[i].cell[0].usec > 0) {
            ncolls += !(colls & (1u << rows[i].coll));
            colls |= 1u << rows[i].coll;
        }
    }
    if (ncolls == 0) {
        fprintf(stderr, "agg_perf: -g %s: nothing to plot (barrier has no size axis)\n",
                o->png);
        return;
    }
    if (!perf_in_path("gnuplot")) {
        fprintf(stderr, "agg_perf: warning: -g %s: gnuplot not found in PATH; no plot written "
                "(apt-get install gnuplot-nox)\n", o->png);
        return;
    }
    gp = popen("gnuplot", "w");
    if (gp == NULL) {
        fprintf(stderr, "agg_perf: warning: -g %s: cannot start gnuplot\n", o->png);
        return;
    }
    fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) "
                "{ set terminal pngcairo noenhanced size 1200,%d font ',10' } "
                "else { set terminal png noenhanced size 1200,%d }\n", 60 + 400 * ncolls,
            60 + 400 * ncolls);
    fprintf(gp, "set output ");
    perf_gp_quote(gp, o->png);
    fprintf(gp, "\n");
    /* one data block per (collective, path): size, time, busbw */
    for (coll = 0; coll < AGG_COLL__COUNT; ++coll) {
        for (p = 0; p < PERF_PATH__COUNT && (colls & (1u << coll)); ++p) {
            for (paths = 0, i = 0; i < nrows; ++i) {
                if ((int)rows[i].coll != coll || (int)rows[i].path != p) {
                    continue;
                }
                if (!paths) {
                    fprintf(gp, "$d_%d_%d << EOD\n", coll, p);
                    paths = 1;
                }
                if (rows[i].cell[0].usec > 0) {
                    fprintf(gp, "%zu %.4f %.6g\n", rows[i].bytes, rows[i].cell[0].usec,
                            perf_algbw(&rows[i], 0) * perf_bus_factor(rows[i].coll, e->size));
                }
            }
            if (paths) {
                fprintf(gp, "EOD\n");
            }
        }
    }
    snprintf(title, sizeof(title), "agg_perf: %d ranks, %s %s, out-of-place, %s of %d "
             "rounds, %s calls", e->size, o->type->name, perf_ops[o->op].name,
             o->use_min ? "min" : "median", o->rounds, o->blocking ? "blocking" : "non-blocking");
    fprintf(gp, "set multiplot layout %d,2 title '%s'\n", ncolls, title);
    /* x: a tick every 8x, labelled 8, 64, 512, 4ki, ... 16Mi; the range is the data's */
    fprintf(gp, "set logscale xy\nset xtics 8\nset format x '%%.0b%%B'\n"
                "set autoscale xfix\nset xlabel 'size (B)'\n"
                "set grid\nset key top left\nset datafile missing 'nan'\n");
    for (coll = 0; coll < AGG_COLL__COUNT; ++coll) {
        if (!(colls & (1u << coll))) {
            continue;
        }
        for (panel = 0; panel < 2; ++panel) {
            fprintf(gp, "set title '%s: %s'\nset ylabel '%s'\nplot ",
                    perf_coll_names[coll], panel ? "bus bandwidth" : "time",
                    panel ? "busbw (GB/s)" : "time (us)");
            for (paths = 0, i = 0; i < nrows; ++i) {
                p = rows[i].path;
                if ((int)rows[i].coll != coll || (paths & (1u << p))) {
                    continue;
                }
                /* a path keeps its colour in every panel */
                fprintf(gp, "%s$d_%d_%d using 1:%d with linespoints lt %d lw 2 title '%s'",
                        paths ? ", " : "", coll, p, panel ? 3 : 2, p + 1, perf_path_names[p]);
                paths |= 1u << p;
            }
            fprintf(gp, "\n");
        }
    }
    fprintf(gp, "unset multiplot\n");
    status = pclose(gp);
    if (status != 0) {
        fprintf(stderr, "agg_perf: warning: gnuplot failed writing %s (status %d)\n", o->png,
                status);
    } else {
        printf("# plot written to %s\n", o->png);
    }
}

/* -------------------------------------------------------------- set-up */

static int perf_oob_bcast(void *ctx, void *buf, size_t len, int root)
{
    return PMPI_Bcast(buf, (int)len, MPI_BYTE, root, *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int perf_oob_barrier(void *ctx)
{
    return PMPI_Barrier(*(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int perf_oob_gather(void *ctx, int root, const void *sbuf, void *rbuf, size_t len)
{
    return PMPI_Gather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, root,
                       *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

/*
 * The libagg job and a communicator of every rank, for the llt and sat
 * paths. Any failure leaves both paths off, with the reason said once.
 */
static void perf_agg_setup(const perf_opts_t *o, perf_env_t *e)
{
    agg_context_spec_t cs = {.world_rank = e->rank, .world_size = e->size,
                             .local_size = e->local_size, .oob_ctx = &e->oob,
                             .oob = {.bcast = perf_oob_bcast, .barrier = perf_oob_barrier,
                                     .gather = perf_oob_gather}};
    agg_comm_spec_t ms = {.rank = e->rank, .size = e->size, .oob_ctx = &e->oob};
    const char *am = getenv("AGG_AM_ADDR"), *sat = getenv("SHARP_COLL_ENABLE_SAT");
    const char *which = !(o->paths & (1u << PERF_SAT)) ? "llt" :
                        !(o->paths & (1u << PERF_LLT)) ? "sat" : "llt, sat";
    agg_caps_t caps;
    agg_status_t st;
    double t0;
    int *world, i;

    if (!(o->paths & ((1u << PERF_LLT) | (1u << PERF_SAT)))) {
        return;
    }
    /* The sat path needs SAT trees in the job; rank 0's setting holds for all. */
    if ((o->paths & (1u << PERF_SAT)) && sat == NULL) {
        setenv("SHARP_COLL_ENABLE_SAT", "1", 0);
    }
    st = agg_context_init(&cs, &e->actx);
    if (st != AGG_OK) {
        perf_note("#   %s skipped: agg_context_init: %s: %s\n#     (manager AGG_AM_ADDR=%s; "
                  "run under build/bin/aggrun, which starts aggmgr and switchsim)\n", which,
                  agg_strerror(st), agg_context_last_error(), am ? am : "unset, default");
        e->actx = NULL;
        return;
    }
    world = malloc((size_t)e->size * sizeof(*world));
    for (i = 0; world != NULL && i < e->size; ++i) {
        world[i] = i;
    }
    ms.world_ranks = world;
    t0 = PMPI_Wtime();
    st = world != NULL ? agg_comm_init(e->actx, &ms, &e->acomm) : AGG_ERR_NO_MEMORY;
    t0 = PMPI_Wtime() - t0;
    free(world);
    if (st != AGG_OK) {
        perf_note("#   %s skipped: agg_comm_init: %s%s\n", which, agg_strerror(st),
                  st == AGG_ERR_QUOTA || st == AGG_ERR_NO_RESOURCE
                  ? " (the job's quota: SHARP_COLL_JOB_QUOTA_OSTS, _MAX_GROUPS)" : "");
        e->acomm = NULL;
        agg_context_finalize(e->actx);
        e->actx = NULL;
        return;
    }
    if (agg_caps_query(e->actx, &caps) != AGG_OK) {
        memset(&caps, 0, sizeof(caps));
    }
    if (o->paths & (1u << PERF_LLT)) {
        e->have |= 1u << PERF_LLT;
        perf_note("#   llt   libagg (agg_*), low-latency tree: manager %s, %u B per fragment, "
                  "%u in flight, tree depth %u, group set up in %.0f us\n",
                  am ? am : "127.0.0.1:6126 (default)", caps.payload_per_ost,
                  caps.osts_per_group, caps.tree_depth, t0 * 1e6);
    }
    if (!(o->paths & (1u << PERF_SAT))) {
        return;
    }
    if (agg_comm_has_sat(e->acomm)) {
        e->have |= 1u << PERF_SAT;
        perf_note("#   sat   libagg, streaming tree: %u KiB chunks%s\n", caps.sat_chunk >> 10,
                  sat == NULL ? " (SHARP_COLL_ENABLE_SAT=1 set by agg_perf)" : "");
    } else {
        perf_note("#   sat   skipped: the communicator has no SAT group (SHARP_COLL_ENABLE_SAT="
                  "%s; a switch serves 2 SAT flows)\n", sat ? sat : "1");
    }
}

static void perf_setup(const perf_opts_t *o, perf_env_t *e)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    size_t alloc = (o->max_bytes + 63) / 64 * 64 + 64;
    MPI_Comm local;
    int len = 0;

    PMPI_Comm_dup(MPI_COMM_WORLD, &e->ctl);
    PMPI_Comm_dup(MPI_COMM_WORLD, &e->mpi);
    PMPI_Comm_dup(MPI_COMM_WORLD, &e->host);
    PMPI_Comm_dup(MPI_COMM_WORLD, &e->oob);
    PMPI_Comm_set_errhandler(e->mpi, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(e->host, MPI_ERRORS_RETURN);
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    PMPI_Comm_size(local, &e->local_size);
    PMPI_Comm_free(&local);
    e->sbuf = aligned_alloc(64, alloc);
    e->rbuf = aligned_alloc(64, alloc);
    e->ebuf = aligned_alloc(64, alloc);
    if (e->sbuf == NULL || e->rbuf == NULL || e->ebuf == NULL) {
        fprintf(stderr, "agg_perf: rank %d: cannot allocate 3 x %zu bytes\n", e->rank, alloc);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    PMPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0';
    perf_note("# agg_perf: %d ranks (%d on this host, %ld cores), %s\n", e->size,
              e->local_size, sysconf(_SC_NPROCESSORS_ONLN), lib);
    if (o->factor) {
        perf_note("# minBytes %zu maxBytes %zu step: %zu(factor)", o->min_bytes, o->max_bytes,
                  o->factor);
    } else {
        perf_note("# minBytes %zu maxBytes %zu step: %zu(bytes)", o->min_bytes, o->max_bytes,
                  o->increment);
    }
    perf_note(" warmup iters: %s iters: %s validation: %d blocking: %d%s\n",
              o->warmup >= 0 ? "fixed" : "by size", o->iters >= 0 ? "fixed" : "by size",
              o->check, o->blocking, o->blocking ? "" : " (-W in flight)");
    perf_note("# type %s, op %s, root %d, %d rounds per cell with the paths taking turns, "
              "%s shown\n#\n# paths:\n", o->type->name, perf_ops[o->op].name, o->root,
              o->rounds, o->use_min ? "minimum" : "median");
    if (o->paths & (1u << PERF_MPI)) {
        e->have |= 1u << PERF_MPI;
        perf_note("#   mpi   Open MPI's own collectives (PMPI_*)\n");
    }
    if (o->paths & (1u << PERF_HOST)) {
        e->have |= 1u << PERF_HOST;
        shim_host_tune_static(&e->tune, e->size);
        perf_note("#   host  shim_host_allreduce: %s < %zu B <= %s < %zu B <= %s (static "
                  "tuning)%s\n", shim_host_alg_name(SHIM_ALG_RECURSIVE_DOUBLING),
                  e->tune.rd_max, shim_host_alg_name(SHIM_ALG_RABENSEIFNER), e->tune.rab_max,
                  shim_host_alg_name(SHIM_ALG_RING), o->blocking ? "" : "; always blocking");
    }
    perf_agg_setup(o, e);
    perf_note("#\n# time: the slowest rank's mean time per call; algbw = size / time; busbw = "
              "algbw x 2(n-1)/n (allreduce),\n#   (n-1)/n (reduce_scatter, allgather), 1 "
              "(bcast, reduce); GB/s = 1e9 B/s\n# #wrong: wrong elements over all ranks in "
              "one checked call per cell (first round)\n# vsMPI: mpi's out-of-place time / "
              "this path's (> 1: faster than Open MPI)\n");
}

static void perf_teardown(perf_env_t *e)
{
    if (e->acomm != NULL) {
        agg_comm_destroy(e->acomm);
    }
    if (e->actx != NULL) {
        agg_context_finalize(e->actx);
    }
    shim_host_cleanup();
    if (e->table != NULL) {
        fclose(e->table);
    }
    free(e->sbuf);
    free(e->rbuf);
    free(e->ebuf);
    PMPI_Comm_free(&e->oob);
    PMPI_Comm_free(&e->host);
    PMPI_Comm_free(&e->mpi);
    PMPI_Comm_free(&e->ctl);
}

/* --------------------------------------------------------------- the run */

typedef struct perf_results {
    perf_row_t *rows;
    size_t      n, cap;
    double      bw[AGG_COLL__COUNT][PERF_PATH__COUNT];
    int         bw_n[AGG_COLL__COUNT][PERF_PATH__COUNT];
    long long   wrong[AGG_COLL__COUNT][PERF_PATH__COUNT];
    int         failed;
} perf_results_t;

/* Rank 0 keeps the row for the summary and the plot. */
static void perf_keep(perf_results_t *res, const perf_row_t *r, int nranks)
{
    perf_row_t *grown;
    int m;

    for (m = 0; m < 2; ++m) {
        if (r->cell[m].usec > 0) {
            res->bw[r->coll][r->path] += perf_algbw(r, m) * perf_bus_factor(r->coll, nranks);
            res->bw_n[r->coll][r->path]++;
        }
        res->wrong[r->coll][r->path] += r->cell[m].wrong > 0 ? r->cell[m].wrong : 0;
        res->failed |= r->cell[m].rc != 0 || r->cell[m].wrong > 0;
    }
    if (res->n == res->cap) {
        grown = realloc(res->rows, (res->cap ? res->cap * 2 : 64) * sizeof(*grown));
        if (grown == NULL) {
            return; /* the plot misses rows; the table is printed already */
        }
        res->rows = grown;
        res->cap  = res->cap ? res->cap * 2 : 64;
    }
    res->rows[res->n++] = *r;
}

/* One size of one collective: every path, every round, then the rows. */
static void perf_run_size(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                          unsigned paths, perf_results_t *res)
{
    static perf_cell_t runs[PERF_PATH__COUNT][2][PERF_ROUNDS_MAX];
    perf_path_id_t order[PERF_PATH__COUNT];
    perf_row_t rows[PERF_PATH__COUNT];
    char why[MPI_MAX_ERROR_STRING];
    int np = 0, r, k, m, p;

    for (p = 0; p < PERF_PATH__COUNT; ++p) {
        if (paths & (1u << p)) {
            order[np++] = (perf_path_id_t)p;
        }
    }
    perf_shape_fill(o, e, s);
    for (r = 0; r < o->rounds; ++r) {
        for (k = 0; k < np; ++k) {
            p = order[(k + r) % np]; /* who goes first rotates */
            for (m = 0; m < 2; ++m) {
                runs[p][m][r] = (perf_cell_t){.usec = -1, .wrong = -1};
                if (m == 0 || perf_has_in_place((perf_path_id_t)p, s->coll)) {
                    runs[p][m][r] = perf_cell_run(o, e, (perf_path_id_t)p, s, m,
                                                  o->check && r == 0);
                }
            }
        }
    }
    for (k = 0; k < np; ++k) {
        p    = order[k];
        rows[k] = (perf_row_t){.coll = s->coll, .path = (perf_path_id_t)p, .bytes = s->bytes,
                               .count = s->count};
        for (m = 0; m < 2; ++m) {
            rows[k].cell[m] = perf_pick(runs[p][m], o->rounds, o->use_min);
            if (rows[k].cell[m].rc != 0) {
                perf_note("# %s %s %s %zu B: %s\n", perf_path_names[p], perf_coll_names[s->coll],
                          m ? "in-place" : "out-of-place", s->bytes,
                          perf_rc_string(rows[k].cell[m].rc, why, sizeof(why)));
            }
        }
    }
    if (e->rank != 0) {
        return;
    }
    for (k = 0; k < np; ++k) {
        perf_print_row(o, e, &rows[k], order[0] == PERF_MPI ? &rows[0] : NULL);
        perf_keep(res, &rows[k], e->size);
    }
}

static void perf_run_coll(const perf_opts_t *o, perf_env_t *e, agg_coll_type_t coll,
                          perf_results_t *res)
{
    unsigned paths = 0;
    const char *why;
    perf_shape_t s;
    size_t bytes, next;
    int p;

    for (p = 0; p < PERF_PATH__COUNT; ++p) {
        if (!(e->have & (1u << p))) {
            continue;
        }
        why = perf_paths[p].skip(e, coll, o->type);
        if (why != NULL) {
            perf_note("#   (%s: skipped for %s: %s)\n", perf_path_names[p],
                      perf_coll_names[coll], why);
            continue;
        }
        paths |= 1u << p;
    }
    if (paths == 0) {
        perf_note("# %s: no path can run it\n", perf_coll_names[coll]);
        return;
    }
    if (e->rank == 0) {
        perf_print_table_header(o, coll);
    }
    for (bytes = o->min_bytes; bytes <= o->max_bytes; bytes = next) {
        s = perf_shape(o, e, coll, bytes);
        if (s.count > 0 || coll == AGG_COLL_BARRIER) {
            perf_run_size(o, e, &s, paths, res);
        }
        next = !o->factor ? bytes + o->increment : bytes ? bytes * o->factor : 1;
        if (coll == AGG_COLL_BARRIER || next <= bytes) {
            break; /* barrier has one size; the others stop before overflowing */
        }
    }
    for (p = 0; p < PERF_PATH__COUNT && e->rank == 0; ++p) {
        if (!(paths & (1u << p))) {
            continue;
        }
        printf("# Out of bounds values : %lld %s  %s %s\n", res->wrong[coll][p],
               !o->check || coll == AGG_COLL_BARRIER ? "(not checked)" :
               res->wrong[coll][p] ? "FAILED" : "OK",
               perf_path_names[p], perf_coll_names[coll]);
    }
    for (p = 0; p < PERF_PATH__COUNT && e->rank == 0; ++p) {
        if (paths & (1u << p)) {
            printf("# Avg bus bandwidth    : %.6g  %s %s\n", res->bw_n[coll][p]
                   ? res->bw[coll][p] / res->bw_n[coll][p] : 0.0, perf_path_names[p],
                   perf_coll_names[coll]);
        }
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    perf_env_t e = {0};
    perf_results_t res = {0};
    perf_opts_t o;
    int rc, coll, failed;

    PMPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &e.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &e.size);
    perf_rank = e.rank;
    /* every rank parses the same argv, so every rank takes the same exit */
    rc = perf_parse_args(argc, argv, e.size, &o);
    if (rc != 0) {
        PMPI_Finalize();
        return rc > 0 ? 0 : 2;
    }
    if (e.rank == 0 && o.png != NULL && !perf_in_path("gnuplot")) {
        fprintf(stderr, "agg_perf: warning: -g %s: gnuplot not found in PATH; the plot will "
                "be skipped (apt-get install gnuplot-nox)\n", o.png);
    }
    rc = 0;
    if (e.rank == 0 && o.table != NULL && (e.table = fopen(o.table, "w")) == NULL) {
        perror(o.table);
        rc = 1;
    }
    PMPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != 0) {
        PMPI_Finalize();
        return 2;
    }
    if (e.table != NULL) {
        fprintf(e.table, "# agg_perf: %d ranks; time in us, bandwidths in GB/s; nan: not run\n"
                "# coll path size count type redop root oop_time oop_algbw oop_busbw "
                "oop_wrong ip_time ip_algbw ip_busbw ip_wrong vs_mpi\n", e.size);
    }
    perf_setup(&o, &e);
    if (e.have == 0) {
        perf_note("# no path can run: nothing measured\n");
        res.failed = 1;
    }
    for (coll = 0; coll < AGG_COLL__COUNT && e.have != 0; ++coll) {
        if (o.colls & (1u << coll)) {
            perf_run_coll(&o, &e, (agg_coll_type_t)coll, &res);
        }
    }
    if (e.rank == 0 && o.png != NULL) {
        perf_plot(&o, &e, res.rows, res.n);
    }
    failed = res.failed;
    PMPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(res.rows);
    perf_teardown(&e);
    PMPI_Finalize();
    return failed ? 1 : 0;
}
