/*
 * MPI_Allreduce correctness under the shim: every supported datatype and
 * operation (MINLOC/MAXLOC on the pair types too), counts from 1 to 4 Mi elements (also counts that are not a
 * multiple of the payload per OST), out of place and in place, on
 * MPI_COMM_WORLD and on split communicators. Each rank computes the
 * expected result itself from the same generator and compares every element.
 *
 *   allreduce_check [--max-count N] [--unsupported-only] [--world-only]
 *                   [--thread-multiple] [--types NAME,NAME...]
 *
 * --types keeps the listed types (int8 ... double, as the output names them;
 * the pair types always run): the ThreadSanitizer pass takes one of each
 * size class, what its threads do with a buffer does not depend on the type.
 *
 * Prints "allreduce_check: N passed, M failed" on rank 0 and exits non-zero
 * when anything failed.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long checks, failures;
static int world_rank;
static const char *type_filter; /* --types, or NULL for all */

/* Whether --types keeps the type called `name`. */
static int type_wanted(const char *name)
{
    size_t n = strlen(name);
    const char *p = type_filter;

    if (p == NULL) {
        return 1;
    }
    while ((p = strstr(p, name)) != NULL) {
        if ((p == type_filter || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) {
            return 1;
        }
        p += n;
    }
    return 0;
}

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_LAND, OP_BAND, OP_LOR, OP_BOR, OP_LXOR,
       OP_BXOR, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"sum", "prod", "min", "max", "land",
                                               "band", "lor", "bor", "lxor", "bxor"};

static MPI_Op mpi_op(int op)
{
    static MPI_Op ops[OP_COUNT];

    ops[OP_SUM] = MPI_SUM; ops[OP_PROD] = MPI_PROD; ops[OP_MIN] = MPI_MIN;
    ops[OP_MAX] = MPI_MAX; ops[OP_LAND] = MPI_LAND; ops[OP_BAND] = MPI_BAND;
    ops[OP_LOR] = MPI_LOR; ops[OP_BOR] = MPI_BOR; ops[OP_LXOR] = MPI_LXOR;
    ops[OP_BXOR] = MPI_BXOR;
    return ops[op];
}

/* The value rank r contributes at element i for `op`, chosen so that sums
 * and products stay exact and in range for every type. */
static long long gen(int op, int r, size_t i)
{
    switch (op) {
    case OP_SUM:  return (long long)(r + 1) * (long long)(i % 7 + 1);
    case OP_PROD: return ((i + (size_t)r) % 5 == 0) ? 2 : 1;
    case OP_MIN:
    case OP_MAX:  return (long long)((i * 31 + (size_t)r * 17) % 200);
    case OP_LAND:
    case OP_LOR:
    case OP_LXOR: return ((i + (size_t)r) % 3) == 0;
    default:      return (long long)((i * 2654435761u) ^ ((size_t)r * 40503u)) & 0x7f;
    }
}

#define DEFINE_CHECK(NAME, T, IS_FLOAT)                                              \
static void NAME(MPI_Datatype dt, const char *tname, int op, size_t count,            \
                 MPI_Comm comm, const int *members, int in_place)                     \
{                                                                                     \
    T *s = malloc(count * sizeof(T)), *r = malloc(count * sizeof(T));                 \
    int rank, size, m;                                                                \
    size_t i, bad = 0, first = 0;                                                     \
    T exp = 0;                                                                        \
                                                                                      \
    MPI_Comm_rank(comm, &rank);                                                       \
    MPI_Comm_size(comm, &size);                                                       \
    for (i = 0; i < count; ++i) {                                                     \
        s[i] = (T)gen(op, members[rank], i);                                          \
        r[i] = in_place ? s[i] : (T)-1;                                               \
    }                                                                                 \
    MPI_Allreduce(in_place ? MPI_IN_PLACE : (void *)s, r, (int)count, dt,             \
                  mpi_op(op), comm);                                                  \
    for (i = 0; i < count; ++i) {                                                     \
        for (m = 0; m < size; ++m) {                                                  \
            T v = (T)gen(op, members[m], i);                                          \
            if (m == 0) { exp = v; continue; }                                        \
            switch (op) {                                                             \
            case OP_SUM:  exp = (T)(exp + v); break;                                  \
            case OP_PROD: exp = (T)(exp * v); break;                                  \
            case OP_MIN:  exp = v < exp ? v : exp; break;                             \
            case OP_MAX:  exp = v > exp ? v : exp; break;                             \
            case OP_LAND: exp = (T)(exp && v); break;                                 \
            case OP_LOR:  exp = (T)(exp || v); break;                                 \
            case OP_LXOR: exp = (T)(!exp != !v); break;                               \
            default: BITOPS_##IS_FLOAT(exp, v, op); break;                            \
            }                                                                         \
        }                                                                             \
        if (size == 1 && (op == OP_LAND || op == OP_LOR || op == OP_LXOR)) {          \
            exp = (T)(exp != 0);                                                      \
        }                                                                             \
        if (memcmp(&exp, &r[i], sizeof(T)) != 0) {                                    \
            if (bad++ == 0) first = i;                                                \
        }                                                                             \
    }                                                                                 \
    checks++;                                                                         \
    if (bad) {                                                                        \
        failures++;                                                                   \
        fprintf(stderr, "rank %d: %s %s count %zu comm size %d %s: %zu wrong, first " \
                "at %zu\n", world_rank, tname, op_names[op], count, size,             \
                in_place ? "in-place" : "out-of-place", bad, first);                  \
    }                                                                                 \
    free(s);                                                                          \
    free(r);                                                                          \
}

#define BITOPS_0(e, v, op)                                                            \
    do {                                                                              \
        if ((op) == OP_BAND) e &= v;                                                  \
        else if ((op) == OP_BOR) e |= v;                                              \
        else e ^= v;                                                                  \
    } while (0)
#define BITOPS_1(e, v, op) ((void)0)

DEFINE_CHECK(check_i8, int8_t, 0)
DEFINE_CHECK(check_u8, uint8_t, 0)
DEFINE_CHECK(check_i16, int16_t, 0)
DEFINE_CHECK(check_u16, uint16_t, 0)
DEFINE_CHECK(check_i32, int32_t, 0)
DEFINE_CHECK(check_u32, uint32_t, 0)
DEFINE_CHECK(check_i64, int64_t, 0)
DEFINE_CHECK(check_u64, uint64_t, 0)
DEFINE_CHECK(check_int, int, 0)
DEFINE_CHECK(check_long, long, 0)
DEFINE_CHECK(check_f32, float, 1)
DEFINE_CHECK(check_f64, double, 1)

typedef void (*check_fn)(MPI_Datatype, const char *, int, size_t, MPI_Comm, const int *, int);

typedef struct {
    const char  *name;
    MPI_Datatype dt;
    check_fn     fn;
    int          is_float;
} type_case_t;

static void run_pairs(MPI_Comm comm, const int *members, size_t max_count);

static void run_comm(MPI_Comm comm, size_t max_count)
{
    static const size_t counts[] = {1, 2, 7, 63, 64, 65, 255, 256, 257, 1000, 4099,
                                    65536 + 13, 1u << 20, 4u << 20};
    type_case_t types[] = {
        {"int8", MPI_INT8_T, check_i8, 0},     {"uint8", MPI_UINT8_T, check_u8, 0},
        {"int16", MPI_INT16_T, check_i16, 0},  {"uint16", MPI_UINT16_T, check_u16, 0},
        {"int32", MPI_INT32_T, check_i32, 0},  {"uint32", MPI_UINT32_T, check_u32, 0},
        {"int64", MPI_INT64_T, check_i64, 0},  {"uint64", MPI_UINT64_T, check_u64, 0},
        {"int", MPI_INT, check_int, 0},        {"long", MPI_LONG, check_long, 0},
        {"float", MPI_FLOAT, check_f32, 1},    {"double", MPI_DOUBLE, check_f64, 1},
    };
    int size, rank, t, op, c, ip, kept, *members;
    MPI_Group g, wg;

    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    members = malloc((size_t)size * sizeof(int));
    {
        int *idx = malloc((size_t)size * sizeof(int));
        for (c = 0; c < size; ++c) idx[c] = c;
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_translate_ranks(g, size, idx, wg, members);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        free(idx);
    }
    for (t = 0, kept = 0; t < (int)(sizeof(types) / sizeof(types[0])); ++t) {
        if (!type_wanted(types[t].name)) {
            continue;
        }
        kept++;
        for (op = 0; op < OP_COUNT; ++op) {
            if (types[t].is_float && op >= OP_LAND) {
                continue;
            }
            for (c = 0; c < (int)(sizeof(counts) / sizeof(counts[0])); ++c) {
                /* the largest counts for sum only: they exercise the pipeline,
                 * the ops are covered at every smaller size */
                if (counts[c] > max_count || (counts[c] > 65536 + 13 && op != OP_SUM)) {
                    continue;
                }
                for (ip = 0; ip < 2; ++ip) {
                    types[t].fn(types[t].dt, types[t].name, op, counts[c], comm, members, ip);
                }
            }
        }
    }
    if (type_filter != NULL) {
        /* every name in --types must be a type here: a typo drops no check unseen */
        int names = 1;

        for (const char *q = type_filter; *q != '\0'; q++) {
            names += *q == ',';
        }
        if (kept != names) {
            if (world_rank == 0) {
                fprintf(stderr, "allreduce_check: --types %s: %d of its %d names are types "
                        "(int8 ... uint64, int, long, float, double)\n", type_filter, kept,
                        names);
            }
            failures++;
        }
    }
    run_pairs(comm, members, max_count);
    free(members);
}

/*
 * MINLOC/MAXLOC on MPI's value-index pair types. Values repeat across ranks
 * so ties happen (the smaller index must win); the index is a rank-dependent
 * tag, not the rank itself, so a result taken from the wrong pair shows.
 */
#define DEFINE_PAIR_CHECK(NAME, VT)                                                   \
static void NAME(MPI_Datatype dt, const char *tname, int maxloc, size_t count,        \
                 MPI_Comm comm, const int *members, int in_place)                     \
{                                                                                     \
    struct pair { VT v; int i; } *s = malloc(count * sizeof(*s)),                     \
                                 *r = malloc(count * sizeof(*r));                     \
    int rank, size, m;                                                                \
    size_t e, bad = 0;                                                                \
                                                                                      \
    MPI_Comm_rank(comm, &rank);                                                       \
    MPI_Comm_size(comm, &size);                                                       \
    for (e = 0; e < count; ++e) {                                                     \
        s[e].v = (VT)((e * 5 + (size_t)members[rank] * 3) % 7);                       \
        s[e].i = members[rank] * 10 + (int)(e % 3);                                   \
        r[e] = in_place ? s[e] : (struct pair){(VT)-1, -1};                           \
    }                                                                                 \
    MPI_Allreduce(in_place ? MPI_IN_PLACE : (void *)s, r, (int)count, dt,             \
                  maxloc ? MPI_MAXLOC : MPI_MINLOC, comm);                            \
    for (e = 0; e < count; ++e) {                                                     \
        struct pair want = {0, 0};                                                    \
        for (m = 0; m < size; ++m) {                                                  \
            struct pair p = {(VT)((e * 5 + (size_t)members[m] * 3) % 7),              \
                             members[m] * 10 + (int)(e % 3)};                         \
            if (m == 0 || (maxloc ? p.v > want.v : p.v < want.v) ||                   \
                (p.v == want.v && p.i < want.i)) {                                    \
                want = p;                                                             \
            }                                                                         \
        }                                                                             \
        bad += r[e].v != want.v || r[e].i != want.i;                                  \
    }                                                                                 \
    checks++;                                                                         \
    if (bad) {                                                                        \
        failures++;                                                                   \
        fprintf(stderr, "rank %d: %s %s count %zu %s: %zu wrong\n", world_rank,       \
                tname, maxloc ? "maxloc" : "minloc", count,                           \
                in_place ? "in-place" : "out-of-place", bad);                         \
    }                                                                                 \
    free(s);                                                                          \
    free(r);                                                                          \
}

DEFINE_PAIR_CHECK(check_float_int, float)
DEFINE_PAIR_CHECK(check_double_int, double)
DEFINE_PAIR_CHECK(check_long_int, long)
DEFINE_PAIR_CHECK(check_2int, int)
DEFINE_PAIR_CHECK(check_short_int, short)

static void run_pairs(MPI_Comm comm, const int *members, size_t max_count)
{
    static const size_t counts[] = {1, 3, 255, 256, 257, 4099, 65536 + 13, 1u << 20};
    const struct {
        const char  *name;
        MPI_Datatype dt;
        check_fn     fn;
    } types[] = {
        {"float_int", MPI_FLOAT_INT, check_float_int}, {"double_int", MPI_DOUBLE_INT, check_double_int},
        {"long_int", MPI_LONG_INT, check_long_int},    {"2int", MPI_2INT, check_2int},
        {"short_int", MPI_SHORT_INT, check_short_int},
    };
    size_t t, c;
    int loc, ip;

    for (t = 0; t < sizeof(types) / sizeof(types[0]); ++t) {
        for (c = 0; c < sizeof(counts) / sizeof(counts[0]) && counts[c] <= max_count; ++c) {
            for (loc = 0; loc < 2; ++loc) {
                for (ip = 0; ip < 2; ++ip) {
                    types[t].fn(types[t].dt, types[t].name, loc, counts[c], comm, members, ip);
                }
            }
        }
    }
}

/* Types, ops and communicators the network does not take: they must still be right. */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int i;
    for (i = 0; i < 2 * *len; ++i) { /* each element is two ints */
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

static void run_unsupported(MPI_Comm comm)
{
    int size, rank, i, n = 1000;
    int *a = malloc(2 * n * sizeof(int)), *b = malloc(2 * n * sizeof(int));
    long double *ld = malloc(n * sizeof(long double)), *ldo = malloc(n * sizeof(long double));
    MPI_Datatype contig;
    MPI_Op uop;
    long bad = 0;

    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    for (i = 0; i < n; ++i) {
        ld[i] = (long double)(rank + i);
        a[2 * i] = rank + i;
        a[2 * i + 1] = rank * i;
    }
    MPI_Allreduce(ld, ldo, n, MPI_LONG_DOUBLE, MPI_SUM, comm);
    MPI_Type_contiguous(2, MPI_INT, &contig);
    MPI_Type_commit(&contig);
    MPI_Op_create(user_sum, 1, &uop);
    MPI_Allreduce(a, b, n, contig, uop, comm);
    for (i = 0; i < n; ++i) {
        int r;
        long double s = 0;
        long e0 = 0, e1 = 0;
        for (r = 0; r < size; ++r) {
            s += (long double)(r + i);
            e0 += r + i;
            e1 += (long)r * i;
        }
        bad += ldo[i] != s;
        bad += b[2 * i] != e0 || b[2 * i + 1] != e1;
    }
    checks += 2;
    /* an intercommunicator: each side gets the other side's sum */
    if (size >= 2) {
        MPI_Comm half, inter;
        int wsize, mine = world_rank + 1, theirs = -1, expect = 0, r;

        MPI_Comm_size(MPI_COMM_WORLD, &wsize);
        MPI_Comm_split(comm, rank % 2, rank, &half);
        MPI_Intercomm_create(half, 0, comm, rank % 2 ? 0 : 1, 77, &inter);
        MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, inter);
        for (r = 0; r < size; ++r) {
            expect += (r % 2 != rank % 2) ? r + 1 : 0;
        }
        bad += theirs != expect;
        checks++;
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    if (bad) {
        failures++;
        fprintf(stderr, "rank %d: unsupported-type allreduce: %ld wrong\n", world_rank, bad);
    }
    MPI_Op_free(&uop);
    MPI_Type_free(&contig);
    free(a); free(b); free(ld); free(ldo);
}

int main(int argc, char **argv)
{
    size_t max_count = 4u << 20;
    int unsupported_only = 0, world_only = 0, i, size;
    long totals[2], sums[2];
    MPI_Comm split, reversed;

    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--thread-multiple") == 0) {
            int provided;
            MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
            break;
        }
    }
    if (i == argc) {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--max-count") == 0 && i + 1 < argc) {
            max_count = strtoul(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--unsupported-only") == 0) {
            unsupported_only = 1;
        } else if (strcmp(argv[i], "--world-only") == 0) {
            world_only = 1;
        } else if (strcmp(argv[i], "--types") == 0 && i + 1 < argc) {
            type_filter = argv[++i];
        }
    }
    if (unsupported_only) {
        run_unsupported(MPI_COMM_WORLD);
    } else {
        run_comm(MPI_COMM_WORLD, max_count);
        run_unsupported(MPI_COMM_WORLD);
        if (!world_only) {
            /* halves, and the whole world in reverse rank order */
            MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &split);
            run_comm(split, max_count < 65536 ? max_count : 65536);
            MPI_Comm_free(&split);
            MPI_Comm_split(MPI_COMM_WORLD, 0, size - world_rank, &reversed);
            run_comm(reversed, max_count < 4099 ? max_count : 4099);
            MPI_Comm_free(&reversed);
        }
    }
    totals[0] = checks;
    totals[1] = failures;
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0) {
        printf("allreduce_check: %ld passed, %ld failed\n", sums[0] - sums[1], sums[1]);
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
