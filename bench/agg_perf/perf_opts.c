/*
 * agg_perf's command line: the names it accepts (types, ops, collectives,
 * paths) and the parsing of every option into a perf_opts_t.
 */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_size.h"
#include "perf.h"

#define PERF_STR_(x) #x
#define PERF_STR(x)  PERF_STR_(x)

const char *const perf_path_names[PERF_PATH__COUNT] = {"mpi", "host", "llt", "sat"};
const char *const perf_coll_names[AGG_COLL__COUNT] = {
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
#define PERF_NTYPES    (sizeof(perf_types) / sizeof(perf_types[0]))
#define PERF_TYPE_FLOAT 7 /* the default */

const perf_op_t perf_ops[PERF_OP__COUNT] = {
    {"sum", AGG_OP_SUM, perf_mpi_sum},
    {"prod", AGG_OP_PROD, perf_mpi_prod},
    {"min", AGG_OP_MIN, perf_mpi_min},
    {"max", AGG_OP_MAX, perf_mpi_max},
};

/* The options that take a bounded integer: one row each, the message's "expected" part with it. */
typedef struct perf_int_opt {
    char        opt;
    size_t      field; /* offsetof an int in perf_opts_t */
    long        lo, hi;
    const char *expect;
} perf_int_opt_t;

static const perf_int_opt_t perf_int_opts[] = {
    {'n', offsetof(perf_opts_t, iters), 1, 1000000, "an integer >= 1"},
    {'w', offsetof(perf_opts_t, warmup), 0, 1000000, "an integer >= 0"},
    {'c', offsetof(perf_opts_t, check), 0, 1, "0 or 1"},
    {'z', offsetof(perf_opts_t, blocking), 0, 1, "0 or 1"},
    {'W', offsetof(perf_opts_t, depth), 1, PERF_DEPTH_MAX, "1.." PERF_STR(PERF_DEPTH_MAX)},
    {'R', offsetof(perf_opts_t, rounds), 1, PERF_ROUNDS_MAX, "1.." PERF_STR(PERF_ROUNDS_MAX)},
};
#define PERF_NINT_OPTS (sizeof(perf_int_opts) / sizeof(perf_int_opts[0]))

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
            "  -P FILE       sample where the timed loops spend CPU time (every 100 us),\n"
            "                each rank to FILE.RANK (one path in -p; tools/prof_report.sh)\n"
            "  -T FILE       write the rows as a whitespace-separated data file\n"
            "  -h            this text\n",
            PERF_ITERS_MIN, PERF_ITERS_MAX, PERF_WARMUP_MIN, PERF_WARMUP_MAX, PERF_DEPTH_MAX);
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

/* An option from perf_int_opts; 1: c is not one of them. */
static int perf_parse_int_opt(int c, const char *arg, perf_opts_t *o)
{
    const perf_int_opt_t *io;
    size_t i;

    for (i = 0; i < PERF_NINT_OPTS && perf_int_opts[i].opt != c; ++i) {
    }
    if (i == PERF_NINT_OPTS) {
        return 1;
    }
    io = &perf_int_opts[i];
    if (perf_parse_int(arg, io->lo, io->hi, (int *)((char *)o + io->field)) != 0) {
        perf_arg_error("-%c '%s': expected %s\n", c, arg, io->expect);
        return -1;
    }
    return 0;
}

/* The options that take a size or a number outside perf_int_opts; 1: c is none of them. */
static int perf_parse_value_opt(int c, const char *arg, int nranks, perf_opts_t *o)
{
    int v;

    switch (c) {
    case 'b':
    case 'e':
        if (bench_parse_size(arg, c == 'b' ? &o->min_bytes : &o->max_bytes) != 0) {
            perf_arg_error("-%c '%s': expected a size in bytes, e.g. 8, 64K or 16M\n", c, arg);
            return -1;
        }
        return 0;
    case 'f':
        if (perf_parse_int(arg, 2, 1 << 20, &v) != 0) {
            perf_arg_error("-f '%s': expected an integer >= 2\n", arg);
            return -1;
        }
        o->factor = (size_t)v;
        return 0;
    case 'i':
        if (bench_parse_size(arg, &o->increment) != 0 || o->increment == 0) {
            perf_arg_error("-i '%s': expected a positive size in bytes\n", arg);
            return -1;
        }
        o->factor = 0;
        return 0;
    case 'r':
        if (perf_parse_int(arg, 0, nranks - 1, &o->root) != 0) {
            perf_arg_error("-r '%s': expected a rank in 0..%d\n", arg, nranks - 1);
            return -1;
        }
        return 0;
    case 's':
        if (strcmp(arg, "min") != 0 && strcmp(arg, "median") != 0) {
            perf_arg_error("-s '%s': expected median or min\n", arg);
            return -1;
        }
        o->use_min = strcmp(arg, "min") == 0;
        return 0;
    default:
        return 1;
    }
}

/* The options that take a name, a list of names or a file; 1: c is none of them. */
static int perf_parse_name_opt(int c, const char *arg, perf_opts_t *o)
{
    static const char *const op_names[PERF_OP__COUNT] = {"sum", "prod", "min", "max"};
    char bad[256] = "";
    unsigned ops;
    size_t i;

    switch (c) {
    case 'o':
        if (perf_parse_list(arg, op_names, PERF_OP__COUNT, &ops, bad, sizeof(bad)) != 0 ||
            (ops & (ops - 1)) != 0) {
            perf_arg_error("-o '%s': expected one of sum, prod, min, max\n", arg);
            return -1;
        }
        o->op = (perf_op_id_t)__builtin_ctz(ops);
        return 0;
    case 'd':
        for (i = 0; i < PERF_NTYPES && strcmp(arg, perf_types[i].name) != 0; ++i) {
        }
        if (i == PERF_NTYPES) {
            perf_arg_error("-d '%s': expected int8, uint8, int32, uint32, int64, uint64, "
                           "half, float, double or bfloat16\n", arg);
            return -1;
        }
        o->type = &perf_types[i];
        return 0;
    case 'C':
        if (perf_parse_list(arg, perf_coll_names, AGG_COLL__COUNT, &o->colls, bad,
                            sizeof(bad)) != 0) {
            perf_arg_error("-C '%s': '%s' is not allreduce, reduce, bcast, barrier, "
                           "reduce_scatter, allgather or all\n", arg, bad);
            return -1;
        }
        return 0;
    case 'p':
        if (perf_parse_list(arg, perf_path_names, PERF_PATH__COUNT, &o->paths, bad,
                            sizeof(bad)) != 0) {
            perf_arg_error("-p '%s': '%s' is not mpi, host, llt, sat or all\n", arg, bad);
            return -1;
        }
        return 0;
    case 'g':
        o->png = arg;
        return 0;
    case 'T':
        o->table = arg;
        return 0;
    case 'P':
        o->prof = arg;
        return 0;
    default:
        return 1;
    }
}

/* What no single option can check: the sizes against each other and the type. */
static int perf_check_opts(int nranks, perf_opts_t *o)
{
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

int perf_parse_args(int argc, char **argv, int nranks, perf_opts_t *o)
{
    int c, rc;

    *o = (perf_opts_t){.min_bytes = 8, .max_bytes = 16u << 20, .factor = 2, .iters = -1,
                       .warmup = -1, .check = 1, .blocking = 1, .depth = 8, .rounds = 3,
                       .type = &perf_types[PERF_TYPE_FLOAT], .op = PERF_SUM,
                       .colls = 1u << AGG_COLL_ALLREDUCE, .paths = (1u << PERF_PATH__COUNT) - 1};
    opterr = 0;
    while ((c = getopt(argc, argv, "b:e:f:i:n:w:c:o:d:z:W:r:C:p:R:s:g:T:P:h")) != -1) {
        if (c == 'h') {
            if (perf_rank == 0) {
                perf_usage(stdout);
            }
            return 1;
        }
        /* each parser says 1 for a letter it does not know; '?' is known to none */
        rc = perf_parse_name_opt(c, optarg, o);
        rc = rc == 1 ? perf_parse_value_opt(c, optarg, nranks, o) : rc;
        rc = rc == 1 ? perf_parse_int_opt(c, optarg, o) : rc;
        if (rc == 1) {
            perf_arg_error("unknown option or missing value: -%c\n", optopt);
            if (perf_rank == 0) {
                perf_usage(stderr);
            }
        }
        if (rc != 0) {
            return -1;
        }
    }
    if (optind < argc) {
        perf_arg_error("unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return perf_check_opts(nranks, o);
}
