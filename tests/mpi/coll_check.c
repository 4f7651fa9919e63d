/*
 * Results of every MPI collective the shim intercepts, as any MPI program
 * would see them: MPI_Allreduce, MPI_Iallreduce, MPI_Reduce, MPI_Ireduce,
 * MPI_Reduce_scatter_block, MPI_Bcast, MPI_Ibcast, MPI_Allgather,
 * MPI_Iallgather, MPI_Barrier and MPI_Ibarrier, over
 *   - every predefined datatype and every predefined op valid for it, the
 *     value-index pairs with MINLOC/MAXLOC (ties must go to the lower index),
 *     a non-commutative and a commutative user op, and derived datatypes
 *     (one with holes that must stay untouched);
 *   - MPI_IN_PLACE, a NULL receive buffer on the non-roots of MPI_Reduce,
 *     counts from 0 to MAXCOUNT;
 *   - MPI_COMM_WORLD, split communicators of odd sizes, one in reverse rank
 *     order, MPI_COMM_SELF and a split of one rank, used in turn, and
 *     communicators created and freed in a loop;
 *   - non-blocking calls in flight together on several communicators,
 *     completed out of order by every wait and test call.
 * Each rank computes the expected values itself from the generator every
 * rank uses; no collective is trusted for an expected value. Besides the
 * values, a check fails when the send buffer changed or anything past the
 * end of the receive buffer was written. The totals travel point to point.
 *
 *   coll_check [-m MAXCOUNT] [-l LOOPS] [-q] [-v [-v]]
 *     -m  largest count (default 4194304; the largest counts run only
 *         int32/float/double SUM and MIN)
 *     -l  communicators created, used and freed (default 50)
 *     -q  only failures and the final line;  -v  every failure, -v -v
 *         every call (on rank 0, before it is made)
 *
 * Prints "coll_check: N passed, M failed" on rank 0 and exits non-zero on
 * every rank when anything failed.
 */
#include <malloc.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GUARD_BYTES      64     /* checked past the end of every receive buffer */
#define SEND_FILL        0x5c   /* what send buffers hold where no element is */
#define RECV_FILL        0xcd   /* what receive buffers hold before the call */
#define GUARD_FILL       0xa5
#define MAX_ELEM         64     /* the largest element extent, bytes */
#define MAX_REPORTS      8      /* failures printed per rank without -v */
#define BARRIER_DELAY_MS 3      /* how late the last rank enters a barrier */
#define TAG_BARRIER      4711
#define TAG_TOTALS       4712

static int world_rank, world_size, same_host, quiet, verbose;
static long checks, failures, reports;
static size_t max_count = 4194304;
static int loops = 50;

static void fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail_msg(const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    failures++;
    if (reports++ >= MAX_REPORTS && !verbose) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    /* one write per line, so lines of different ranks do not interleave */
    fprintf(stderr, "coll_check: FAIL rank %d: %s\n", world_rank, line);
}

/* ------------------------------------------------------------------------
 * Datatypes and ops
 */
enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_LAND, OP_LOR, OP_LXOR, OP_BAND, OP_BOR,
       OP_BXOR, OP_MINLOC, OP_MAXLOC, OP_MATMUL, OP_SUMMAX, OP_ISUM, OP_VMIN, OP_COUNT,
       OP_NONE = -1 };
static const char *const op_names[OP_COUNT] = {
    "sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor",
    "minloc", "maxloc", "user_matmul(non-commutative)", "user_summax", "user_int_sum",
    "user_vector_min"};
#define B(op) (1u << (op))
#define OPS_INT   (B(OP_SUM) | B(OP_PROD) | B(OP_MIN) | B(OP_MAX) | B(OP_LAND) | B(OP_LOR) | \
                   B(OP_LXOR) | B(OP_BAND) | B(OP_BOR) | B(OP_BXOR))
#define OPS_FLOAT (B(OP_SUM) | B(OP_PROD) | B(OP_MIN) | B(OP_MAX))
#define OPS_BOOL  (B(OP_LAND) | B(OP_LOR) | B(OP_LXOR))
#define OPS_BYTE  (B(OP_BAND) | B(OP_BOR) | B(OP_BXOR))
#define OPS_PAIR  (B(OP_MINLOC) | B(OP_MAXLOC))

#define N_USER_OPS 4
static MPI_Op user_ops[N_USER_OPS]; /* OP_MATMUL.. */

static MPI_Op mpi_op(int op)
{
    switch (op) {
    case OP_SUM:    return MPI_SUM;
    case OP_PROD:   return MPI_PROD;
    case OP_MIN:    return MPI_MIN;
    case OP_MAX:    return MPI_MAX;
    case OP_LAND:   return MPI_LAND;
    case OP_LOR:    return MPI_LOR;
    case OP_LXOR:   return MPI_LXOR;
    case OP_BAND:   return MPI_BAND;
    case OP_BOR:    return MPI_BOR;
    case OP_BXOR:   return MPI_BXOR;
    case OP_MINLOC: return MPI_MINLOC;
    case OP_MAXLOC: return MPI_MAXLOC;
    case OP_MATMUL:
    case OP_SUMMAX:
    case OP_ISUM:
    case OP_VMIN:   return user_ops[op - OP_MATMUL];
    default:        return MPI_OP_NULL;
    }
}

/* signed and unsigned C integers, floating point, C bool, MPI_BYTE, MPI_CHAR
 * (no arithmetic), value-index pairs, user types */
enum { K_SINT, K_UINT, K_FLOAT, K_BOOL, K_BYTE, K_CHAR, K_PAIR, K_USER };

typedef struct type type_t;
struct type {
    const char  *name;
    MPI_Datatype dt;
    int          kind;
    size_t       size;  /* extent of one element */
    unsigned     ops;   /* B(op) for every op valid for it */
    /* what rank r of n puts at element i for op (OP_NONE: bcast, allgather) */
    void (*gen)(const type_t *t, int op, int n, int r, size_t i, unsigned salt, void *e);
    void (*put)(void *e, long long v, int idx);         /* for the generic gen */
    void (*fold)(int op, void *acc, const void *x);     /* acc = acc op x; NULL: scalar */
    int  (*eq)(const void *a, const void *b);
    void (*fmt)(const void *e, char *out, size_t len);
    int  disabled;
};

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash(int r, size_t i, unsigned salt)
{
    return mix((uint64_t)i ^ ((uint64_t)(unsigned)r << 32) ^ ((uint64_t)salt << 46));
}

/*
 * Values that keep every result exact and in range of the smallest type of
 * the kind at any communicator size: sums of |v| <= 127/n (255/n unsigned),
 * products of at most four 2s and some -1s, minima and maxima in -100..100,
 * logical inputs mostly true on even elements and mostly false on odd ones
 * (so LAND and LOR both come out either way), bits for the bit ops biased so
 * AND and OR do not saturate. Pairs repeat values on purpose: ties must pick
 * the smaller index, which is not the smaller rank.
 */
static long long gen_value(int kind, int op, int n, int r, size_t i, unsigned salt, int *idx)
{
    uint64_t h = hash(r, i, salt ^ (unsigned)(op + 1) * 0x9e37u);
    int sgn = kind == K_SINT || kind == K_FLOAT || kind == K_PAIR;
    long long m, v;

    switch (op) {
    case OP_SUM:
        if (sgn) {
            m = 127 / n < 4 ? 127 / n : 4;
            return (long long)(h % (uint64_t)(2 * m + 1)) - m;
        }
        m = 255 / n < 8 ? 255 / n : 8;
        return (long long)(h % (uint64_t)(m + 1));
    case OP_PROD:
        v = (r < 4 && h % 3 == 0) ? 2 : 1;
        return (sgn && (h >> 8) % 4 == 0) ? -v : v;
    case OP_MIN:
    case OP_MAX:
        return (long long)(h % 201) - (sgn ? 100 : 0);
    case OP_LAND:
    case OP_LOR:
    case OP_LXOR:
        v = (h % (uint64_t)(2 * n) == 0) == (i % 2 == 0) ? 0 : 1 + (long long)((h >> 16) % 3);
        return v;
    case OP_BAND: return (long long)(h | mix(h));
    case OP_BOR:  return (long long)(h & mix(h));
    case OP_BXOR: return (long long)h;
    case OP_MINLOC:
    case OP_MAXLOC:
        *idx = (int)(((unsigned)r * 7u + (unsigned)(i % 13) * 3u + salt) % 13u) - 6;
        return (long long)(h % 4) - 1;
    default: /* a copy: as many distinct bits as the type holds */
        switch (kind) {
        case K_FLOAT: return (long long)(h % 2000001) - 1000000;
        case K_BOOL:  return (long long)(h & 1);
        case K_PAIR:
            *idx = (int)(h >> 40);
            return (long long)(h % 2001) - 1000;
        default: return (long long)h;
        }
    }
}

static void gen_basic(const type_t *t, int op, int n, int r, size_t i, unsigned salt, void *e)
{
    int idx = 0;
    long long v = gen_value(t->kind, op, n, r, i, salt, &idx);

    t->put(e, v, idx);
}

#define SCALAR(N, T, CT, F)                                                           \
    static void put_##N(void *e, long long v, int idx)                                \
    {                                                                                 \
        (void)idx;                                                                    \
        *(T *)e = (T)v;                                                               \
    }                                                                                 \
    static int eq_##N(const void *a, const void *b)                                   \
    {                                                                                 \
        return *(const T *)a == *(const T *)b;                                        \
    }                                                                                 \
    static void fmt_##N(const void *e, char *out, size_t len)                         \
    {                                                                                 \
        snprintf(out, len, F, (CT) * (const T *)e);                                   \
    }

#define INT_TYPE(N, T, CT, F) SCALAR(N, T, CT, F)
#define FLOAT_TYPE(N, T)      SCALAR(N, T, long double, "%.21Lg")

INT_TYPE(char, char, int, "%d")
INT_TYPE(schar, signed char, int, "%d")
INT_TYPE(uchar, unsigned char, unsigned, "%u")
INT_TYPE(short, short, int, "%d")
INT_TYPE(ushort, unsigned short, unsigned, "%u")
INT_TYPE(int, int, int, "%d")
INT_TYPE(uint, unsigned, unsigned, "%u")
INT_TYPE(long, long, long, "%ld")
INT_TYPE(ulong, unsigned long, unsigned long, "%lu")
INT_TYPE(llong, long long, long long, "%lld")
INT_TYPE(ullong, unsigned long long, unsigned long long, "%llu")
INT_TYPE(i8, int8_t, int, "%d")
INT_TYPE(u8, uint8_t, unsigned, "%u")
INT_TYPE(i16, int16_t, int, "%d")
INT_TYPE(u16, uint16_t, unsigned, "%u")
INT_TYPE(i32, int32_t, long, "%ld")
INT_TYPE(u32, uint32_t, unsigned long, "%lu")
INT_TYPE(i64, int64_t, long long, "%lld")
INT_TYPE(u64, uint64_t, unsigned long long, "%llu")
SCALAR(cbool, bool, int, "%d")
FLOAT_TYPE(float, float)
FLOAT_TYPE(double, double)
FLOAT_TYPE(ldouble, long double)

#define PAIR_TYPE(N, T)                                                               \
    typedef struct {                                                                  \
        T   v;                                                                        \
        int i;                                                                        \
    } N##_t;                                                                          \
    static void put_##N(void *e, long long v, int idx)                                \
    {                                                                                 \
        ((N##_t *)e)->v = (T)v;                                                       \
        ((N##_t *)e)->i = idx;                                                        \
    }                                                                                 \
    static void fold_##N(int op, void *acc, const void *xp)                           \
    {                                                                                 \
        N##_t *a = acc;                                                               \
        const N##_t *x = xp;                                                          \
        if ((op == OP_MINLOC ? x->v < a->v : x->v > a->v) ||                          \
            (x->v == a->v && x->i < a->i)) {                                          \
            a->v = x->v;                                                              \
            a->i = x->i;                                                              \
        }                                                                             \
    }                                                                                 \
    static int eq_##N(const void *a, const void *b)                                   \
    {                                                                                 \
        return ((const N##_t *)a)->v == ((const N##_t *)b)->v &&                      \
               ((const N##_t *)a)->i == ((const N##_t *)b)->i;                        \
    }                                                                                 \
    static void fmt_##N(const void *e, char *out, size_t len)                         \
    {                                                                                 \
        snprintf(out, len, "(%.21Lg, %d)", (long double)((const N##_t *)e)->v,        \
                 ((const N##_t *)e)->i);                                              \
    }

PAIR_TYPE(float_int, float)
PAIR_TYPE(double_int, double)
PAIR_TYPE(long_int, long)
PAIR_TYPE(two_int, int)
PAIR_TYPE(short_int, short)
PAIR_TYPE(ldouble_int, long double)

/*
 * Derived types under user ops (Open MPI refuses predefined ops on derived
 * types with MPI_ERR_OP). mat: a 2x2 matrix of uint32
 * (MPI_Type_contiguous(4, MPI_UINT32_T)) under a matrix product, which does
 * not commute: the result must be M(rank 0) x M(rank 1) x ... in rank order.
 * summax: MPI_Type_contiguous(2, MPI_INT), sum of the first and max of the
 * second. int3: MPI_Type_contiguous(3, MPI_INT) under a sum that learns the
 * ints per element from the datatype it is handed. dvec:
 * MPI_Type_vector(2, 2, 3, MPI_DOUBLE), five doubles of extent with a hole
 * in the middle that no call may write, under a min of the four values.
 */
typedef struct { uint32_t m[4]; } mat_t;
typedef struct { int s, m; } summax_t;
typedef struct { int v[3]; } int3_t;
typedef struct { double d[5]; } dvec_t;
static const int dvec_slots[4] = {0, 1, 3, 4};

static void mat_mul(const mat_t *x, const mat_t *y, mat_t *z)
{
    mat_t r;

    r.m[0] = x->m[0] * y->m[0] + x->m[1] * y->m[2];
    r.m[1] = x->m[0] * y->m[1] + x->m[1] * y->m[3];
    r.m[2] = x->m[2] * y->m[0] + x->m[3] * y->m[2];
    r.m[3] = x->m[2] * y->m[1] + x->m[3] * y->m[3];
    *z = r;
}

/* MPI's contract: inout = in op inout, in coming from the lower ranks. */
static void user_matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const mat_t *x = in;
    mat_t *y = inout;
    int k;

    (void)dt;
    for (k = 0; k < *len; ++k) {
        mat_mul(&x[k], &y[k], &y[k]);
    }
}

static void user_summax(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const summax_t *x = in;
    summax_t *y = inout;
    int k;

    (void)dt;
    for (k = 0; k < *len; ++k) {
        y[k].s += x[k].s;
        y[k].m = x[k].m > y[k].m ? x[k].m : y[k].m;
    }
}

static void user_int_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const int *x = in;
    int *y = inout, size, k;

    MPI_Type_size(*dt, &size);
    for (k = 0; k < *len * size / (int)sizeof(int); ++k) {
        y[k] += x[k];
    }
}

static void user_vector_min(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    const dvec_t *x = in;
    dvec_t *y = inout;
    int k, s;

    (void)dt;
    for (k = 0; k < *len; ++k) {
        for (s = 0; s < 4; ++s) {
            double a = x[k].d[dvec_slots[s]], b = y[k].d[dvec_slots[s]];
            y[k].d[dvec_slots[s]] = a < b ? a : b;
        }
    }
}

static void gen_mat(const type_t *t, int op, int n, int r, size_t i, unsigned salt, void *e)
{
    uint64_t h = hash(r, i, salt);
    mat_t *m = e;
    int k;

    (void)t, (void)n;
    for (k = 0; k < 4; ++k) { /* entries 0..3: no two ranks' matrices commute by accident */
        m->m[k] = op == OP_NONE ? (uint32_t)(h >> (16 * k)) : (uint32_t)((h >> (2 * k)) & 3);
    }
}

static void fold_mat(int op, void *acc, const void *x)
{
    (void)op;
    mat_mul(acc, x, acc);
}

static int eq_mat(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(mat_t)) == 0;
}

static void fmt_mat(const void *e, char *out, size_t len)
{
    const mat_t *m = e;

    snprintf(out, len, "[[%u %u] [%u %u]]", m->m[0], m->m[1], m->m[2], m->m[3]);
}

static void gen_summax(const type_t *t, int op, int n, int r, size_t i, unsigned salt, void *e)
{
    uint64_t h = hash(r, i, salt);
    summax_t *p = e;

    (void)t, (void)op, (void)n;
    p->s = (int)(h % 201) - 100;
    p->m = (int)((h >> 16) % 100000) - 50000;
}

static void fold_summax(int op, void *acc, const void *xp)
{
    summax_t *a = acc;
    const summax_t *x = xp;

    (void)op;
    a->s += x->s;
    a->m = x->m > a->m ? x->m : a->m;
}

static int eq_summax(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(summax_t)) == 0;
}

static void fmt_summax(const void *e, char *out, size_t len)
{
    snprintf(out, len, "(%d, %d)", ((const summax_t *)e)->s, ((const summax_t *)e)->m);
}

static void gen_int3(const type_t *t, int op, int n, int r, size_t i, unsigned salt, void *e)
{
    int k, idx;

    for (k = 0; k < 3; ++k) {
        ((int3_t *)e)->v[k] = (int)gen_value(K_SINT, op == OP_NONE ? OP_NONE : OP_SUM, n, r,
                                             3 * i + (size_t)k, salt, &idx);
    }
    (void)t;
}

static void fold_int3(int op, void *acc, const void *x)
{
    int k;

    (void)op;
    for (k = 0; k < 3; ++k) {
        ((int3_t *)acc)->v[k] += ((const int3_t *)x)->v[k];
    }
}

static int eq_int3(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(int3_t)) == 0;
}

static void fmt_int3(const void *e, char *out, size_t len)
{
    const int3_t *p = e;

    snprintf(out, len, "(%d, %d, %d)", p->v[0], p->v[1], p->v[2]);
}

/* only the four slots of the type map; the hole keeps what the buffer had */
static void gen_dvec(const type_t *t, int op, int n, int r, size_t i, unsigned salt, void *e)
{
    int k, idx;

    for (k = 0; k < 4; ++k) {
        ((dvec_t *)e)->d[dvec_slots[k]] =
            (double)gen_value(K_FLOAT, op == OP_NONE ? OP_NONE : OP_MIN, n, r,
                              4 * i + (size_t)k, salt, &idx);
    }
    (void)t;
}

static void fold_dvec(int op, void *acc, const void *x)
{
    int k;

    (void)op;
    for (k = 0; k < 4; ++k) {
        double *a = &((dvec_t *)acc)->d[dvec_slots[k]], b = ((const dvec_t *)x)->d[dvec_slots[k]];

        *a = b < *a ? b : *a;
    }
}

/* the hole must still hold the receive buffer's fill byte */
static int eq_dvec(const void *a, const void *b)
{
    const dvec_t *x = a, *y = b;
    int k;

    for (k = 0; k < 4; ++k) {
        if (x->d[dvec_slots[k]] != y->d[dvec_slots[k]]) {
            return 0;
        }
    }
    return memcmp(&x->d[2], &y->d[2], sizeof(double)) == 0;
}

static void fmt_dvec(const void *e, char *out, size_t len)
{
    const dvec_t *p = e;
    uint64_t hole;

    memcpy(&hole, &p->d[2], sizeof(hole));
    snprintf(out, len, "(%g, %g, hole 0x%016llx, %g, %g)", p->d[0], p->d[1],
             (unsigned long long)hole, p->d[3], p->d[4]);
}

#define MAX_TYPES 40
static type_t types[MAX_TYPES];
static int ntypes;

static type_t *add_type(const char *name, MPI_Datatype dt, int kind, size_t size, unsigned ops,
                        void (*put)(void *, long long, int),
                        void (*fold)(int, void *, const void *),
                        int (*eq)(const void *, const void *),
                        void (*fmt)(const void *, char *, size_t))
{
    type_t *t = &types[ntypes++];

    t->name = name;
    t->dt   = dt;
    t->kind = kind;
    t->size = size;
    t->ops  = ops;
    t->gen  = gen_basic;
    t->put  = put;
    t->fold = fold;
    t->eq   = eq;
    t->fmt  = fmt;
    return t;
}

#define ADD(NAME, DT, KIND, OPS, F, CT) \
    add_type(NAME, DT, KIND, sizeof(CT), OPS, put_##F, NULL, eq_##F, fmt_##F)
#define ADD_PAIR(NAME, DT, F) \
    add_type(NAME, DT, K_PAIR, sizeof(F##_t), OPS_PAIR, put_##F, fold_##F, eq_##F, fmt_##F)

static void init_types(void)
{
    MPI_Datatype mat_dt, summax_dt, int3_dt, dvec_dt;

    ADD("char", MPI_CHAR, K_CHAR, 0, char, char);
    ADD("signed_char", MPI_SIGNED_CHAR, K_SINT, OPS_INT, schar, signed char);
    ADD("unsigned_char", MPI_UNSIGNED_CHAR, K_UINT, OPS_INT, uchar, unsigned char);
    ADD("short", MPI_SHORT, K_SINT, OPS_INT, short, short);
    ADD("unsigned_short", MPI_UNSIGNED_SHORT, K_UINT, OPS_INT, ushort, unsigned short);
    ADD("int", MPI_INT, K_SINT, OPS_INT, int, int);
    ADD("unsigned", MPI_UNSIGNED, K_UINT, OPS_INT, uint, unsigned);
    ADD("long", MPI_LONG, K_SINT, OPS_INT, long, long);
    ADD("unsigned_long", MPI_UNSIGNED_LONG, K_UINT, OPS_INT, ulong, unsigned long);
    ADD("long_long", MPI_LONG_LONG, K_SINT, OPS_INT, llong, long long);
    ADD("unsigned_long_long", MPI_UNSIGNED_LONG_LONG, K_UINT, OPS_INT, ullong,
        unsigned long long);
    ADD("int8", MPI_INT8_T, K_SINT, OPS_INT, i8, int8_t);
    ADD("uint8", MPI_UINT8_T, K_UINT, OPS_INT, u8, uint8_t);
    ADD("int16", MPI_INT16_T, K_SINT, OPS_INT, i16, int16_t);
    ADD("uint16", MPI_UINT16_T, K_UINT, OPS_INT, u16, uint16_t);
    ADD("int32", MPI_INT32_T, K_SINT, OPS_INT, i32, int32_t);
    ADD("uint32", MPI_UINT32_T, K_UINT, OPS_INT, u32, uint32_t);
    ADD("int64", MPI_INT64_T, K_SINT, OPS_INT, i64, int64_t);
    ADD("uint64", MPI_UINT64_T, K_UINT, OPS_INT, u64, uint64_t);
    ADD("float", MPI_FLOAT, K_FLOAT, OPS_FLOAT, float, float);
    ADD("double", MPI_DOUBLE, K_FLOAT, OPS_FLOAT, double, double);
    ADD("long_double", MPI_LONG_DOUBLE, K_FLOAT, OPS_FLOAT, ldouble, long double);
    ADD("c_bool", MPI_C_BOOL, K_BOOL, OPS_BOOL, cbool, bool);
    ADD("byte", MPI_BYTE, K_BYTE, OPS_BYTE, uchar, unsigned char);
    ADD_PAIR("float_int", MPI_FLOAT_INT, float_int);
    ADD_PAIR("double_int", MPI_DOUBLE_INT, double_int);
    ADD_PAIR("long_int", MPI_LONG_INT, long_int);
    ADD_PAIR("2int", MPI_2INT, two_int);
    ADD_PAIR("short_int", MPI_SHORT_INT, short_int);
    ADD_PAIR("long_double_int", MPI_LONG_DOUBLE_INT, ldouble_int);

    MPI_Op_create(user_matmul, 0, &user_ops[0]);
    MPI_Op_create(user_summax, 1, &user_ops[1]);
    MPI_Op_create(user_int_sum, 1, &user_ops[2]);
    MPI_Op_create(user_vector_min, 1, &user_ops[3]);
    MPI_Type_contiguous(4, MPI_UINT32_T, &mat_dt);
    MPI_Type_contiguous(2, MPI_INT, &summax_dt);
    MPI_Type_contiguous(3, MPI_INT, &int3_dt);
    MPI_Type_vector(2, 2, 3, MPI_DOUBLE, &dvec_dt);
    MPI_Type_commit(&mat_dt);
    MPI_Type_commit(&summax_dt);
    MPI_Type_commit(&int3_dt);
    MPI_Type_commit(&dvec_dt);
    add_type("contig4_uint32", mat_dt, K_USER, sizeof(mat_t), B(OP_MATMUL), NULL, fold_mat,
             eq_mat, fmt_mat)->gen = gen_mat;
    add_type("contig2_int", summax_dt, K_USER, sizeof(summax_t), B(OP_SUMMAX), NULL,
             fold_summax, eq_summax, fmt_summax)->gen = gen_summax;
    add_type("contig3_int", int3_dt, K_USER, sizeof(int3_t), B(OP_ISUM), NULL, fold_int3,
             eq_int3, fmt_int3)->gen = gen_int3;
    add_type("vector2x2s3_double", dvec_dt, K_USER, sizeof(dvec_t), B(OP_VMIN), NULL,
             fold_dvec, eq_dvec, fmt_dvec)->gen = gen_dvec;
}

static void free_types(void)
{
    int t;

    for (t = 0; t < ntypes; ++t) {
        if (types[t].kind == K_USER) {
            MPI_Type_free(&types[t].dt);
        }
    }
    for (t = 0; t < N_USER_OPS; ++t) {
        MPI_Op_free(&user_ops[t]);
    }
}

static const type_t *T(const char *name)
{
    int t;

    for (t = 0; t < ntypes; ++t) {
        if (strcmp(types[t].name, name) == 0) {
            return &types[t];
        }
    }
    fprintf(stderr, "coll_check: no type %s\n", name);
    abort();
}

/* Each element's extent must be the C struct's, or no buffer here is right. */
static void check_extents(void)
{
    MPI_Aint lb, extent;
    int t;

    for (t = 0; t < ntypes; ++t) {
        MPI_Type_get_extent(types[t].dt, &lb, &extent);
        checks++;
        if (lb != 0 || (size_t)extent != types[t].size) {
            fail_msg("type %s: lb %ld extent %ld, expected 0 and %zu; its checks are skipped",
                     types[t].name, (long)lb, (long)extent, types[t].size);
            types[t].disabled = 1;
        }
    }
}

/* ------------------------------------------------------------------------
 * Communicators and checks
 */
typedef struct {
    MPI_Comm comm;
    char     name[32];
    int      rank, size;
    unsigned seq; /* the salt of the next check: the same on every member */
} comm_t;

static void comm_init(comm_t *c, MPI_Comm comm, const char *name)
{
    c->comm = comm;
    snprintf(c->name, sizeof(c->name), "%s", name);
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    c->seq = 0;
}

enum { C_ALLREDUCE, C_REDUCE, C_RSB, C_BCAST, C_ALLGATHER, C_BARRIER };
static const char *const coll_names[] = {"allreduce", "reduce", "reduce_scatter_block",
                                         "bcast", "allgather", "barrier"};
enum { F_INPLACE = 1, F_NB = 2, F_NULLRECV = 4 };

typedef struct {
    comm_t        *c;
    const type_t  *t;
    int            coll, op, root, flags, in_place, rc;
    size_t         count;
    unsigned       salt;
    unsigned char *sbuf, *rbuf, *scopy;
    size_t         sbytes, rbytes;
    MPI_Request    req;
} job_t;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (!p) {
        fprintf(stderr, "coll_check: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void describe(const job_t *j, char *out, size_t len)
{
    snprintf(out, len, "%s%s%s type %s op %s count %zu comm %s (size %d) root %d",
             (j->flags & F_NB) ? "i" : "", coll_names[j->coll],
             (j->flags & F_INPLACE) ? " in place" :
             (j->flags & F_NULLRECV) ? " (NULL recvbuf at non-roots)" : "",
             j->t ? j->t->name : "-", j->op >= 0 ? op_names[j->op] : "-", j->count,
             j->c->name, j->c->size,
             (j->coll == C_REDUCE || j->coll == C_BCAST) ? j->root : -1);
}

/* Buffers and this rank's contribution, never the expected values. */
static void job_init(job_t *j, comm_t *c, int coll, const type_t *t, int op, size_t count,
                     int root, int flags)
{
    size_t es = t ? t->size : 0, n = (size_t)c->size, me = (size_t)c->rank, i;
    unsigned char *in;

    memset(j, 0, sizeof(*j));
    j->c        = c;
    j->t        = t;
    j->coll     = coll;
    j->op       = op;
    j->count    = count;
    j->root     = root;
    j->flags    = flags;
    j->salt     = c->seq++;
    j->req      = MPI_REQUEST_NULL;
    j->rc       = MPI_SUCCESS;
    j->in_place = (flags & F_INPLACE) && (coll != C_REDUCE || c->rank == root);
    switch (coll) {
    case C_ALLREDUCE: j->rbytes = count * es; break;
    case C_REDUCE:
        j->rbytes = (c->rank == root || !(flags & F_NULLRECV)) ? count * es : 0;
        break;
    case C_RSB:       j->rbytes = (j->in_place ? n : 1) * count * es; break;
    case C_BCAST:     j->rbytes = count * es; break;
    case C_ALLGATHER: j->rbytes = n * count * es; break;
    default:          return;
    }
    if (coll != C_BCAST && !j->in_place) {
        j->sbytes = (coll == C_RSB ? n : 1) * count * es;
        j->sbuf   = xmalloc(j->sbytes);
        memset(j->sbuf, SEND_FILL, j->sbytes);
    }
    if (!(coll == C_REDUCE && (flags & F_NULLRECV) && c->rank != root)) {
        j->rbuf = xmalloc(j->rbytes + GUARD_BYTES);
        memset(j->rbuf, RECV_FILL, j->rbytes);
        memset(j->rbuf + j->rbytes, GUARD_FILL, GUARD_BYTES);
    }
    in = j->in_place ? j->rbuf : j->sbuf;
    switch (coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
        for (i = 0; i < count; ++i) {
            t->gen(t, op, c->size, c->rank, i, j->salt, in + i * es);
        }
        break;
    case C_RSB:
        for (i = 0; i < n * count; ++i) {
            t->gen(t, op, c->size, c->rank, i, j->salt, in + i * es);
        }
        break;
    case C_BCAST:
        for (i = 0; c->rank == root && i < count; ++i) {
            t->gen(t, OP_NONE, c->size, root, i, j->salt, j->rbuf + i * es);
        }
        break;
    case C_ALLGATHER:
        in = j->in_place ? j->rbuf + me * count * es : j->sbuf;
        for (i = 0; i < count; ++i) {
            t->gen(t, OP_NONE, c->size, c->rank, i, j->salt, in + i * es);
        }
        break;
    }
    if (j->sbytes) {
        j->scopy = xmalloc(j->sbytes);
        memcpy(j->scopy, j->sbuf, j->sbytes);
    }
}

static void job_start(job_t *j)
{
    MPI_Comm comm = j->c->comm;
    MPI_Datatype dt = j->t ? j->t->dt : MPI_DATATYPE_NULL;
    MPI_Op op = mpi_op(j->op);
    MPI_Request *rq = &j->req;
    const void *s = j->in_place ? MPI_IN_PLACE : (const void *)j->sbuf;
    int cnt = (int)j->count, nb = j->flags & F_NB, rc = MPI_ERR_OTHER;

    if (verbose > 1 && world_rank == 0) {
        char what[256];

        describe(j, what, sizeof(what));
        printf("coll_check: %s\n", what);
        fflush(stdout);
    }
    switch (j->coll) {
    case C_ALLREDUCE:
        rc = nb ? MPI_Iallreduce(s, j->rbuf, cnt, dt, op, comm, rq)
                : MPI_Allreduce(s, j->rbuf, cnt, dt, op, comm);
        break;
    case C_REDUCE:
        rc = nb ? MPI_Ireduce(s, j->rbuf, cnt, dt, op, j->root, comm, rq)
                : MPI_Reduce(s, j->rbuf, cnt, dt, op, j->root, comm);
        break;
    case C_RSB:
        rc = nb ? MPI_Ireduce_scatter_block(s, j->rbuf, cnt, dt, op, comm, rq)
                : MPI_Reduce_scatter_block(s, j->rbuf, cnt, dt, op, comm);
        break;
    case C_BCAST:
        rc = nb ? MPI_Ibcast(j->rbuf, cnt, dt, j->root, comm, rq)
                : MPI_Bcast(j->rbuf, cnt, dt, j->root, comm);
        break;
    case C_ALLGATHER:
        rc = nb ? MPI_Iallgather(s, cnt, dt, j->rbuf, cnt, dt, comm, rq)
                : MPI_Allgather(s, cnt, dt, j->rbuf, cnt, dt, comm);
        break;
    case C_BARRIER:
        rc = nb ? MPI_Ibarrier(comm, rq) : MPI_Barrier(comm);
        break;
    }
    j->rc = rc;
}

/* A scalar reduction folded in long long: every value and partial result is
 * in range, and the bit ops commute with the truncation put() makes. */
static void expected_scalar(const type_t *t, int op, int n, size_t i, unsigned salt, void *want)
{
    int idx, r;
    long long e = gen_value(t->kind, op, n, 0, i, salt, &idx), v;

    for (r = 1; r < n; ++r) {
        v = gen_value(t->kind, op, n, r, i, salt, &idx);
        switch (op) {
        case OP_SUM:  e += v; break;
        case OP_PROD: e *= v; break;
        case OP_MIN:  e = v < e ? v : e; break;
        case OP_MAX:  e = v > e ? v : e; break;
        case OP_LAND: e = e && v; break;
        case OP_LOR:  e = e || v; break;
        case OP_LXOR: e = !e != !v; break;
        case OP_BAND: e &= v; break;
        case OP_BOR:  e |= v; break;
        case OP_BXOR: e ^= v; break;
        }
    }
    t->put(want, e, 0);
}

static void job_expected(const job_t *j, size_t k, void *want)
{
    const type_t *t = j->t;
    unsigned char x[MAX_ELEM] __attribute__((aligned(16)));
    size_t cnt = j->count, at = k;
    int n = j->c->size, r;

    if (t->kind == K_USER) {
        memset(want, RECV_FILL, t->size); /* what holes must still hold */
    }
    switch (j->coll) {
    case C_BCAST:     t->gen(t, OP_NONE, n, j->root, k, j->salt, want); return;
    case C_ALLGATHER: t->gen(t, OP_NONE, n, (int)(k / cnt), k % cnt, j->salt, want); return;
    case C_RSB:       at = (size_t)j->c->rank * cnt + k; break;
    }
    if (!t->fold) {
        expected_scalar(t, j->op, n, at, j->salt, want);
        return;
    }
    t->gen(t, j->op, n, 0, at, j->salt, want);
    for (r = 1; r < n; ++r) {
        memset(x, SEND_FILL, t->size);
        t->gen(t, j->op, n, r, at, j->salt, x);
        t->fold(j->op, want, x);
    }
}

static void job_verify(job_t *j)
{
    unsigned char want[MAX_ELEM] __attribute__((aligned(16)));
    char what[256], got_s[160], want_s[160];
    size_t k, nel = 0, bad = 0, first = 0, es = j->t ? j->t->size : 0;

    checks++;
    describe(j, what, sizeof(what));
    if (j->rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING];
        int len = 0;

        MPI_Error_string(j->rc, err, &len);
        fail_msg("%s: returned %d (%s)", what, j->rc, err);
        return;
    }
    if (j->rbuf) {
        for (k = 0; k < GUARD_BYTES; ++k) {
            if (j->rbuf[j->rbytes + k] != GUARD_FILL) {
                fail_msg("%s: wrote past the end of the receive buffer (byte %zu after it)",
                         what, k);
                return;
            }
        }
    }
    if (j->sbytes && memcmp(j->sbuf, j->scopy, j->sbytes) != 0) {
        for (k = 0; j->sbuf[k] == j->scopy[k]; ++k) {
        }
        fail_msg("%s: changed the send buffer (byte %zu)", what, k);
        return;
    }
    switch (j->coll) {
    case C_ALLREDUCE:
    case C_RSB:
    case C_BCAST:     nel = j->count; break;
    case C_REDUCE:    nel = j->c->rank == j->root ? j->count : 0; break;
    case C_ALLGATHER: nel = (size_t)j->c->size * j->count; break;
    }
    for (k = 0; k < nel; ++k) {
        job_expected(j, k, want);
        if (!j->t->eq(j->rbuf + k * es, want)) {
            if (bad++ == 0) {
                first = k;
                j->t->fmt(j->rbuf + k * es, got_s, sizeof(got_s));
                j->t->fmt(want, want_s, sizeof(want_s));
            }
        }
    }
    if (bad) {
        fail_msg("%s: %zu of %zu elements wrong, first at index %zu: got %s, expected %s", what,
                 bad, nel, first, got_s, want_s);
    }
}

static void job_free(job_t *j)
{
    free(j->sbuf);
    free(j->rbuf);
    free(j->scopy);
}

static void job_wait(job_t *j)
{
    if (j->rc == MPI_SUCCESS && (j->flags & F_NB)) {
        j->rc = MPI_Wait(&j->req, MPI_STATUS_IGNORE);
    }
}

static void run_one(comm_t *c, int coll, const type_t *t, int op, size_t count, int root,
                    int flags)
{
    job_t j;

    if (count > max_count || (t && t->disabled)) {
        return;
    }
    double t0 = MPI_Wtime(), t1, t2;

    job_init(&j, c, coll, t, op, count, root, flags);
    t1 = MPI_Wtime();
    job_start(&j);
    job_wait(&j);
    t2 = MPI_Wtime();
    job_verify(&j);
    job_free(&j);
    if (verbose > 1 && world_rank == 0) {
        printf("coll_check:   setup %.3f s, call %.3f s, check %.3f s\n", t1 - t0, t2 - t1,
               MPI_Wtime() - t2);
    }
}

/* ------------------------------------------------------------------------
 * Phases
 */

/* Every type with every op valid for it, every collective. */
static void run_matrix(comm_t *c, const size_t *counts, size_t ncounts)
{
    int t, op, n = c->size;
    size_t ci;
    unsigned k = 0;

    for (t = 0; t < ntypes; ++t) {
        const type_t *ty = &types[t];

        for (op = 0; op < OP_COUNT; ++op) {
            if (!(ty->ops & B(op))) {
                continue;
            }
            for (ci = 0; ci < ncounts; ++ci, ++k) {
                size_t cnt = counts[ci];
                int root = (int)(k % (unsigned)n);

                run_one(c, C_ALLREDUCE, ty, op, cnt, 0, 0);
                run_one(c, C_ALLREDUCE, ty, op, cnt, 0, F_INPLACE);
                run_one(c, C_ALLREDUCE, ty, op, cnt, 0, F_NB | (k % 2 ? F_INPLACE : 0));
                run_one(c, C_REDUCE, ty, op, cnt, root,
                        k % 3 == 1 ? F_INPLACE : k % 3 == 2 ? F_NULLRECV : 0);
                run_one(c, C_REDUCE, ty, op, cnt, (root + n / 2 + 1) % n, F_NB);
                run_one(c, C_RSB, ty, op, cnt, 0, k % 2 ? F_INPLACE : 0);
            }
        }
        for (ci = 0; ci < ncounts; ++ci, ++k) {
            int root = (int)(k % (unsigned)n);

            run_one(c, C_BCAST, ty, OP_NONE, counts[ci], root, 0);
            run_one(c, C_BCAST, ty, OP_NONE, counts[ci], (root + 1) % n, F_NB);
            run_one(c, C_ALLGATHER, ty, OP_NONE, counts[ci], 0, 0);
            run_one(c, C_ALLGATHER, ty, OP_NONE, counts[ci], 0, F_INPLACE);
            run_one(c, C_ALLGATHER, ty, OP_NONE, counts[ci], 0, F_NB);
        }
    }
}

/* Every count up to 64 Ki for a few types, every collective. */
static void run_sweep(comm_t *c)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 63, 64, 65, 1000, 4097, 65536};
    static const struct {
        const char *type;
        int         op;
    } cases[] = {{"int32", OP_SUM}, {"float", OP_SUM},  {"double", OP_MAX},
                 {"uint8", OP_BXOR}, {"int64", OP_PROD}, {"double_int", OP_MINLOC}};
    size_t ci, x;
    unsigned k = 0;
    int n = c->size;

    for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ++ci) {
        for (x = 0; x < sizeof(cases) / sizeof(cases[0]); ++x, ++k) {
            const type_t *t = T(cases[x].type);
            size_t cnt = counts[ci];
            int root = (int)(k % (unsigned)n);

            run_one(c, C_ALLREDUCE, t, cases[x].op, cnt, 0, 0);
            run_one(c, C_ALLREDUCE, t, cases[x].op, cnt, 0, F_INPLACE);
            run_one(c, C_ALLREDUCE, t, cases[x].op, cnt, 0, F_NB);
            run_one(c, C_REDUCE, t, cases[x].op, cnt, root,
                    k % 3 == 1 ? F_INPLACE : k % 3 == 2 ? F_NULLRECV : 0);
            run_one(c, C_REDUCE, t, cases[x].op, cnt, n - 1 - root, F_NB);
            run_one(c, C_RSB, t, cases[x].op, cnt, 0, k % 2 ? F_INPLACE : 0);
            if (x < 2) {
                run_one(c, C_BCAST, t, OP_NONE, cnt, root, 0);
                run_one(c, C_BCAST, t, OP_NONE, cnt, n - 1 - root, F_NB);
                run_one(c, C_ALLGATHER, t, OP_NONE, cnt, 0, k % 2 ? F_INPLACE : 0);
                run_one(c, C_ALLGATHER, t, OP_NONE, cnt, 0, F_NB);
            }
        }
    }
}

/* The largest counts: int32/float/double SUM and MIN once each per size,
 * and every other collective once at 1 Mi. */
static void run_big(comm_t *c)
{
    static const char *const names[] = {"int32", "float", "double"};
    size_t sizes[2] = {1u << 20, max_count}, s, per = ((size_t)1 << 20) / (size_t)c->size;
    int x, op, n = c->size;
    unsigned k = 0;

    for (s = 0; s < 2; ++s) {
        if (sizes[s] > max_count || (s == 1 && sizes[1] <= sizes[0])) {
            continue;
        }
        for (x = 0; x < 3; ++x) {
            for (op = OP_SUM; op <= OP_MIN; op += OP_MIN - OP_SUM, ++k) {
                run_one(c, C_ALLREDUCE, T(names[x]), op, sizes[s], 0,
                        k % 3 == 1 ? F_INPLACE : k % 3 == 2 ? F_NB : 0);
            }
        }
    }
    if (sizes[0] > max_count) {
        return;
    }
    run_one(c, C_BCAST, T("int32"), OP_NONE, sizes[0], n - 1, 0);
    run_one(c, C_REDUCE, T("double"), OP_SUM, sizes[0], n / 2, F_INPLACE);
    run_one(c, C_REDUCE, T("float"), OP_MIN, sizes[0], 0, F_NB);
    run_one(c, C_RSB, T("int32"), OP_SUM, per, 0, 0);
    run_one(c, C_ALLGATHER, T("float"), OP_NONE, per, 0, 0);
}

/* Every root (16 of them on larger communicators). */
static void run_roots(comm_t *c)
{
    int root, step = c->size <= 16 ? 1 : c->size / 16;

    for (root = 0; root < c->size; root += step) {
        run_one(c, C_REDUCE, T("int"), OP_SUM, 7, root, root % 2 ? F_INPLACE : F_NULLRECV);
        run_one(c, C_REDUCE, T("double"), OP_MAX, 1000, root, F_NB);
        run_one(c, C_REDUCE, T("contig4_uint32"), OP_MATMUL, 3, root, root % 2 ? 0 : F_INPLACE);
        run_one(c, C_BCAST, T("int64"), OP_NONE, 65, root, 0);
        run_one(c, C_BCAST, T("float"), OP_NONE, 4097, root, F_NB);
        run_one(c, C_BCAST, T("vector2x2s3_double"), OP_NONE, 10, root, 0);
    }
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * A barrier holds everybody until the last member arrives: one member in turn
 * enters late, and nobody may leave before that member entered (all ranks on
 * one host share CLOCK_MONOTONIC; elsewhere only completion is checked).
 */
static void run_barrier(comm_t *c, int nb)
{
    struct timespec delay = {0, BARRIER_DELAY_MS * 1000000L};
    int late, r, step = c->size <= 8 ? 1 : c->size / 8;

    for (late = 0; late < c->size; late += step) {
        int64_t entered = 0, left;
        MPI_Request req;
        int rc, flag = 0;

        if (c->rank == late) {
            nanosleep(&delay, NULL);
            entered = now_ns();
        }
        if (nb) {
            rc = MPI_Ibarrier(c->comm, &req);
            if (rc == MPI_SUCCESS && late % 2) {
                while (rc == MPI_SUCCESS && !flag) {
                    rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
                }
            } else if (rc == MPI_SUCCESS) {
                rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        } else {
            rc = MPI_Barrier(c->comm);
        }
        left = now_ns();
        checks++;
        if (rc != MPI_SUCCESS) {
            fail_msg("%sbarrier comm %s (size %d): returned %d", nb ? "i" : "", c->name,
                     c->size, rc);
            continue;
        }
        if (c->rank == late) {
            for (r = 0; r < c->size; ++r) {
                if (r != late) {
                    MPI_Send(&entered, 1, MPI_INT64_T, r, TAG_BARRIER, c->comm);
                }
            }
        } else {
            MPI_Recv(&entered, 1, MPI_INT64_T, late, TAG_BARRIER, c->comm, MPI_STATUS_IGNORE);
            if (same_host && left < entered) {
                fail_msg("%sbarrier comm %s (size %d): left %.3f ms before rank %d entered",
                         nb ? "i" : "", c->name, c->size, (double)(entered - left) / 1e6,
                         late);
            }
        }
    }
}

/* Requests in flight on several communicators, completed out of order. */
static const char *const wait_modes[] = {"MPI_Waitall (reverse order)", "MPI_Waitany",
                                         "MPI_Testall loop", "MPI_Waitsome",
                                         "MPI_Wait (reverse order)", "MPI_Test loop (reverse)"};
#define NB_JOBS 9

static int complete(MPI_Request *reqs, int n, int mode)
{
    int rc = MPI_SUCCESS, done = 0, idx, flag = 0, out, i, ind[NB_JOBS];

    switch (mode) {
    case 0: return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    case 1:
        for (done = 0; done < n && rc == MPI_SUCCESS; ++done) {
            rc = MPI_Waitany(n, reqs, &idx, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && idx == MPI_UNDEFINED) {
                return MPI_ERR_REQUEST;
            }
        }
        return rc;
    case 2:
        while (rc == MPI_SUCCESS && !flag) {
            rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        }
        return rc;
    case 3:
        while (rc == MPI_SUCCESS && done < n) {
            rc = MPI_Waitsome(n, reqs, &out, ind, MPI_STATUSES_IGNORE);
            if (rc == MPI_SUCCESS && out == MPI_UNDEFINED) {
                return MPI_ERR_REQUEST;
            }
            done += out;
        }
        return rc;
    case 4:
        for (i = 0; i < n && rc == MPI_SUCCESS; ++i) {
            rc = MPI_Wait(&reqs[i], MPI_STATUS_IGNORE);
        }
        return rc;
    default:
        while (rc == MPI_SUCCESS && done < n) {
            for (i = 0, done = 0; i < n && rc == MPI_SUCCESS; ++i) {
                if (reqs[i] != MPI_REQUEST_NULL) {
                    rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                }
                done += reqs[i] == MPI_REQUEST_NULL;
            }
        }
        return rc;
    }
}

static void run_nonblocking(comm_t *w, comm_t *half, comm_t *dup, comm_t *other)
{
    static const size_t counts[] = {1, 65, 4097, 65536};
    job_t jobs[NB_JOBS];
    MPI_Request reqs[NB_JOBS];
    size_t ci;
    int mode, k, i, rc, n = w->size;

    for (ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ++ci) {
        size_t cnt = counts[ci];

        for (mode = 0; cnt <= max_count && mode < 6; ++mode) {
            k = 0;
            job_init(&jobs[k++], w, C_ALLREDUCE, T("int32"), OP_SUM, cnt, 0, F_NB);
            job_init(&jobs[k++], w, C_BCAST, T("double"), OP_NONE, cnt, mode % n, F_NB);
            job_init(&jobs[k++], w, C_REDUCE, T("int64"), OP_MIN, cnt, n - 1, F_NB);
            job_init(&jobs[k++], half, C_ALLREDUCE, T("float"), OP_MAX, cnt, 0,
                     F_NB | F_INPLACE);
            job_init(&jobs[k++], w, C_ALLGATHER, T("uint16"), OP_NONE, cnt, 0, F_NB);
            job_init(&jobs[k++], w, C_ALLREDUCE, T("uint8"), OP_BXOR, cnt, 0, F_NB | F_INPLACE);
            job_init(&jobs[k++], dup, C_ALLREDUCE, T("double"), OP_SUM, cnt, 0, F_NB);
            job_init(&jobs[k++], half, C_RSB, T("int32"), OP_SUM, cnt, 0, F_NB);
            job_init(&jobs[k++], w, C_BARRIER, NULL, OP_NONE, 0, 0, F_NB);
            for (i = 0; i < k; ++i) {
                job_start(&jobs[i]);
                reqs[k - 1 - i] = jobs[i].req;
            }
            /* a blocking collective on another communicator meanwhile */
            run_one(other, C_ALLREDUCE, T("int32"), OP_SUM, cnt, 0, 0);
            rc = complete(reqs, k, mode);
            for (i = 0; i < k; ++i) {
                if (reqs[i] != MPI_REQUEST_NULL && rc == MPI_SUCCESS) {
                    fail_msg("%s: a request is still active after it completed",
                             wait_modes[mode]);
                }
                if (jobs[i].rc == MPI_SUCCESS) {
                    jobs[i].rc = rc;
                }
                job_verify(&jobs[i]);
                job_free(&jobs[i]);
            }
        }
    }
}

/* Communicators used in turn: one call on the world between calls on others. */
static void run_interleaved(comm_t *w, comm_t **cs, int nc)
{
    static const struct {
        const char *type;
        int         op;
    } mixes[] = {{"int", OP_SUM},        {"double", OP_MAX},   {"uint16", OP_BOR},
                 {"long_long", OP_PROD}, {"float_int", OP_MINLOC}, {"c_bool", OP_LOR},
                 {"contig4_uint32", OP_MATMUL}};
    static const size_t counts[] = {1, 7, 65, 1000};
    static const int colls[] = {C_ALLREDUCE, C_BCAST, C_REDUCE, C_ALLGATHER, C_RSB, C_BARRIER};
    int it, nm = (int)(sizeof(mixes) / sizeof(mixes[0]));

    for (it = 0; it < 6 * nc * 2; ++it) {
        comm_t *c = cs[it % nc];
        const type_t *t = T(mixes[it % nm].type);
        size_t cnt = counts[it % 4];
        int coll = colls[(it / nc) % 6], op = coll == C_BCAST || coll == C_ALLGATHER ?
                                                  OP_NONE : mixes[it % nm].op;

        run_one(w, C_ALLREDUCE, t, mixes[it % nm].op, cnt, 0, it % 2 ? F_INPLACE : 0);
        if (coll == C_BARRIER) {
            run_one(c, C_BARRIER, NULL, OP_NONE, 0, 0, it % 2 ? F_NB : 0);
        } else {
            run_one(c, coll, t, op, cnt, it % c->size, it % 3 == 0 ? F_NB : 0);
        }
    }
}

/* Communicators made, used and freed over and over. */
static void run_comm_loop(comm_t *w)
{
    MPI_Group wg, g;
    int it;

    MPI_Comm_group(w->comm, &wg);
    for (it = 0; it < loops; ++it) {
        MPI_Comm nc = MPI_COMM_NULL;
        comm_t c;
        const char *name = "";
        int rc = MPI_SUCCESS, excl = it % w->size;

        switch (it % 3) {
        case 0:
            rc = MPI_Comm_dup(w->comm, &nc);
            name = "loop_dup";
            break;
        case 1:
            rc = MPI_Comm_split(w->comm, (w->rank + it) % 3 == 0, (w->rank * 5 + it) % w->size, &nc);
            name = "loop_split";
            break;
        case 2: /* all but one rank (all of one) */
            MPI_Group_excl(wg, w->size > 1 ? 1 : 0, &excl, &g);
            rc = MPI_Comm_create(w->comm, g, &nc);
            MPI_Group_free(&g);
            name = "loop_create";
            break;
        }
        checks++;
        if (rc != MPI_SUCCESS) {
            fail_msg("making communicator %s (loop %d): returned %d", name, it, rc);
            continue;
        }
        if (nc == MPI_COMM_NULL) {
            continue;
        }
        comm_init(&c, nc, name);
        run_one(&c, C_ALLREDUCE, T("int32"), OP_SUM, 1 + (size_t)(it * 37) % 300, 0,
                it % 2 ? F_INPLACE : 0);
        run_one(&c, C_BCAST, T("double"), OP_NONE, 33, it % c.size, it % 4 == 1 ? F_NB : 0);
        run_one(&c, C_REDUCE, T("int"), OP_MAX, 5, (it + 1) % c.size, 0);
        if (it % 5 == 0) {
            run_one(&c, C_ALLGATHER, T("int"), OP_NONE, 3, 0, 0);
            run_one(&c, C_BARRIER, NULL, OP_NONE, 0, 0, 0);
            run_one(&c, C_RSB, T("uint32"), OP_BXOR, 2, 0, 0);
        }
        MPI_Comm_free(&nc);
    }
    MPI_Group_free(&wg);
}

static double phase_t0;
static long phase_checks, phase_failures;

static void phase_begin(void)
{
    phase_t0       = MPI_Wtime();
    phase_checks   = checks;
    phase_failures = failures;
}

static void phase_end(const char *name)
{
    if (!quiet && world_rank == 0) {
        printf("coll_check: %-36s %6ld checks %4ld failed %7.2f s (rank 0)\n", name,
               checks - phase_checks, failures - phase_failures, MPI_Wtime() - phase_t0);
        fflush(stdout);
    }
}

static void usage(void)
{
    if (world_rank == 0) {
        fprintf(stderr, "usage: coll_check [-m MAXCOUNT] [-l LOOPS] [-q] [-v [-v]]\n");
    }
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    static const size_t world_counts[] = {0, 1, 3, 65};
    static const size_t sub_counts[]   = {1, 65};
    comm_t world, self, half, lower, third, reversed, single, dup, dup2;
    comm_t *subs[6], *turn[7];
    MPI_Comm tmp;
    long mine[2], all[2], other[2], total_failed = 0;
    int opt, r, i;

    /* Large buffers come back from the heap already mapped: freshly mapped
     * ones cost more page faults than the large calls themselves. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    while ((opt = getopt(argc, argv, "m:l:qv")) != -1) {
        switch (opt) {
        case 'm': max_count = strtoul(optarg, NULL, 0); break;
        case 'l': loops = atoi(optarg); break;
        case 'q': quiet = 1; break;
        case 'v': verbose++; break;
        default:  usage();
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    init_types();
    check_extents();
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &tmp);
    MPI_Comm_size(tmp, &r);
    same_host = r == world_size;
    MPI_Comm_free(&tmp);

    /* communicators inherit MPI_ERRORS_RETURN from the world */
    comm_init(&world, MPI_COMM_WORLD, "world");
    comm_init(&self, MPI_COMM_SELF, "self");
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &tmp);
    comm_init(&half, tmp, world_rank % 2 ? "odd" : "even");
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < 3, world_rank, &tmp);
    comm_init(&lower, tmp, world_rank < 3 ? "first3" : "rest");
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 3, world_rank, &tmp);
    comm_init(&third, tmp, "mod3");
    MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &tmp);
    comm_init(&reversed, tmp, "reversed");
    MPI_Comm_split(MPI_COMM_WORLD, world_rank, 0, &tmp);
    comm_init(&single, tmp, "single");
    MPI_Comm_dup(MPI_COMM_WORLD, &tmp);
    comm_init(&dup, tmp, "dup");
    MPI_Comm_dup(MPI_COMM_WORLD, &tmp);
    comm_init(&dup2, tmp, "dup2");
    subs[0] = &half, subs[1] = &lower, subs[2] = &third, subs[3] = &reversed;
    subs[4] = &self, subs[5] = &single;
    turn[0] = &half, turn[1] = &self, turn[2] = &lower, turn[3] = &reversed;
    turn[4] = &dup, turn[5] = &third, turn[6] = &single;
    if (!quiet && world_rank == 0) {
        printf("coll_check: %d ranks%s, %d types, counts up to %zu, %d communicator loops\n",
               world_size, same_host ? " on one host" : "", ntypes, max_count, loops);
    }

    phase_begin();
    run_matrix(&world, world_counts, sizeof(world_counts) / sizeof(world_counts[0]));
    phase_end("types x ops x collectives, world");
    phase_begin();
    for (i = 0; i < 6; ++i) {
        run_matrix(subs[i], sub_counts, sizeof(sub_counts) / sizeof(sub_counts[0]));
    }
    phase_end("types x ops x collectives, subcomms");
    phase_begin();
    run_sweep(&world);
    run_sweep(&half);
    phase_end("counts 0..64Ki, world and halves");
    phase_begin();
    run_big(&world);
    phase_end("large counts, world");
    phase_begin();
    run_roots(&world);
    run_roots(&lower);
    run_roots(&reversed);
    phase_end("every root");
    phase_begin();
    run_barrier(&world, 0);
    run_barrier(&world, 1);
    for (i = 0; i < 4; ++i) {
        run_barrier(subs[i], i % 2);
        run_barrier(subs[i], !(i % 2));
    }
    phase_end("barriers");
    phase_begin();
    run_nonblocking(&world, &half, &dup, &dup2);
    phase_end("non-blocking, out of order");
    phase_begin();
    run_interleaved(&world, turn, 7);
    phase_end("communicators in turn");
    phase_begin();
    run_comm_loop(&world);
    phase_end("communicators made and freed");

    for (i = 0; i < 4; ++i) {
        MPI_Comm_free(&subs[i]->comm);
    }
    MPI_Comm_free(&single.comm);
    MPI_Comm_free(&dup.comm);
    MPI_Comm_free(&dup2.comm);
    free_types();

    /* totals point to point: a broken collective must not hide failures */
    mine[0] = checks;
    mine[1] = failures;
    if (world_rank == 0) {
        all[0] = mine[0];
        all[1] = mine[1];
        for (r = 1; r < world_size; ++r) {
            MPI_Recv(other, 2, MPI_LONG, r, TAG_TOTALS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            all[0] += other[0];
            all[1] += other[1];
        }
        total_failed = all[1];
        for (r = 1; r < world_size; ++r) {
            MPI_Send(&total_failed, 1, MPI_LONG, r, TAG_TOTALS, MPI_COMM_WORLD);
        }
        printf("coll_check: %ld passed, %ld failed\n", all[0] - all[1], all[1]);
        fflush(stdout);
    } else {
        MPI_Send(mine, 2, MPI_LONG, 0, TAG_TOTALS, MPI_COMM_WORLD);
        MPI_Recv(&total_failed, 1, MPI_LONG, 0, TAG_TOTALS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return total_failed || failures ? 1 : 0;
}
