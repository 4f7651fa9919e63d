/*
 * MINLOC/MAXLOC on the value-index pair dtypes: the layouts MPI uses on
 * x86-64 Linux, every pair dtype and both ops against a reference written as
 * an ordering (NaN first, then the values, ties to the smaller index), the
 * NaN and signed-zero rules pinned, the result independent of the order and
 * grouping of operands, and NULL for every combination that is not a pair
 * with MINLOC/MAXLOC.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/reduce.h"
#include "reduce_test.h"

enum vkind { V_F32, V_F64, V_I64, V_I32, V_I16 };

typedef struct pair_case {
    int         dtype;
    const char *name;
    size_t      size, value_size, index_offset;
    enum vkind  kind;
} pair_case_t;

/* MPI's C structs on x86-64 Linux: struct { value; int32_t index; }. */
static const pair_case_t pair_cases[] = {
    { AGG_DTYPE_FLOAT32_INT32, "float32_int32", 8,  4, 4, V_F32 }, /* MPI_FLOAT_INT */
    { AGG_DTYPE_FLOAT64_INT32, "float64_int32", 16, 8, 8, V_F64 }, /* MPI_DOUBLE_INT */
    { AGG_DTYPE_INT64_INT32,   "int64_int32",   16, 8, 8, V_I64 }, /* MPI_LONG_INT */
    { AGG_DTYPE_INT32_INT32,   "int32_int32",   8,  4, 4, V_I32 }, /* MPI_2INT */
    { AGG_DTYPE_INT16_INT32,   "int16_int32",   8,  2, 4, V_I16 }, /* MPI_SHORT_INT */
};
#define NUM_PAIRS (sizeof(pair_cases) / sizeof(pair_cases[0]))

/* An element as the reference sees it: the value's raw bits and the index. */
typedef struct elem {
    uint64_t bits;
    int32_t  index;
} elem_t;

static elem_t load_elem(const pair_case_t *pc, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * pc->size;
    elem_t               e = { 0, 0 };
    memcpy(&e.bits, p, pc->value_size); /* little-endian: the low bytes */
    memcpy(&e.index, p + pc->index_offset, sizeof(e.index));
    return e;
}

static void store_elem(const pair_case_t *pc, void *buf, size_t i, elem_t e)
{
    unsigned char *p = (unsigned char *)buf + i * pc->size;
    memcpy(p, &e.bits, pc->value_size);
    memcpy(p + pc->index_offset, &e.index, sizeof(e.index));
}

static int is_nan(const pair_case_t *pc, uint64_t bits)
{
    if (pc->kind == V_F32) {
        return (bits & 0x7fffffffu) > 0x7f800000u;
    }
    return pc->kind == V_F64 && (bits & ~(1ull << 63)) > 0x7ff0000000000000ull;
}

/* The value as a double (every int16/int32 and these int64 test values are exact). */
static double value_of(const pair_case_t *pc, uint64_t bits)
{
    float  f;
    double d;
    switch (pc->kind) {
    case V_F32: memcpy(&f, &bits, 4); return f;
    case V_F64: memcpy(&d, &bits, 8); return d;
    case V_I64: return (double)(int64_t)bits;
    case V_I32: return (int32_t)(uint32_t)bits;
    case V_I16: return (int16_t)(uint16_t)bits;
    }
    return 0;
}

/*
 * Where x stands relative to y in the op's order: < 0 first, > 0 after, 0
 * tied. NaN comes before every number for both ops (it wins), two NaNs tie.
 */
static int order(const pair_case_t *pc, int op, uint64_t x, uint64_t y)
{
    int xn = is_nan(pc, x), yn = is_nan(pc, y);
    if (xn || yn) {
        return yn - xn;
    }
    double a = value_of(pc, x), b = value_of(pc, y);
    int    c = (a > b) - (a < b);
    return op == AGG_OP_MINLOC ? c : -c;
}

static elem_t reference(const pair_case_t *pc, int op, elem_t a, elem_t b)
{
    int c = order(pc, op, a.bits, b.bits);
    if (c != 0) {
        return c < 0 ? a : b;
    }
    a.index = b.index < a.index ? b.index : a.index; /* tie: a's value, smaller index */
    return a;
}

/* Values from a small set, so that ties are common; NaN, +-0 and +-Inf for floats. */
static elem_t random_elem(const pair_case_t *pc)
{
    static const uint64_t f32s[] = { 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                     0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x3f800000u,
                                     0xbf800000u, 0x00000001u };
    static const uint64_t f64s[] = { 0, 1ull << 63, 0x7ff0000000000000ull, 0xfff0000000000000ull,
                                     0x7ff8000000000000ull, 0x7ff0000000000001ull,
                                     0x3ff0000000000000ull, 0xbff0000000000000ull, 1 };
    uint64_t r = rng_next();
    elem_t   e;

    e.index = (int32_t)((r >> 40) % 9) - 2; /* negative indices compare as signed */
    switch (pc->kind) {
    case V_F32:
        if (r & 1) {
            e.bits = f32s[(r >> 8) % (sizeof(f32s) / sizeof(f32s[0]))];
        } else {
            float f = (float)((int)((r >> 8) % 7) - 3) * 0.5f;
            memcpy(&e.bits, &f, 4);
            e.bits &= 0xffffffffu;
        }
        break;
    case V_F64:
        if (r & 1) {
            e.bits = f64s[(r >> 8) % (sizeof(f64s) / sizeof(f64s[0]))];
        } else {
            double d = (double)((int)((r >> 8) % 7) - 3) * 0.5;
            memcpy(&e.bits, &d, 8);
        }
        break;
    case V_I64: {
        static const int64_t extremes[] = { INT64_MIN, INT64_MAX, -1, 0 };
        int64_t v = (r & 1) ? extremes[(r >> 8) & 3] : (int64_t)((r >> 8) % 7) - 3;
        e.bits    = (uint64_t)v;
        break;
    }
    case V_I32: {
        int32_t v = (r & 1) ? ((r >> 8) & 1 ? INT32_MIN : INT32_MAX) : (int32_t)((r >> 8) % 7) - 3;
        e.bits    = (uint32_t)v;
        break;
    }
    case V_I16: {
        int16_t v = (r & 1) ? ((r >> 8) & 1 ? INT16_MIN : INT16_MAX) : (int16_t)((r >> 8) % 7 - 3);
        e.bits    = (uint16_t)v;
        break;
    }
    }
    return e;
}

/* ---- tests ------------------------------------------------------------ */

static void test_pair_layout(void **state)
{
    (void)state;
    assert_int_equal(sizeof(agg_float32_int32_t), 8);
    assert_int_equal(offsetof(agg_float32_int32_t, index), 4);
    assert_int_equal(sizeof(agg_float64_int32_t), 16);
    assert_int_equal(offsetof(agg_float64_int32_t, index), 8);
    assert_int_equal(sizeof(agg_int64_int32_t), 16);
    assert_int_equal(offsetof(agg_int64_int32_t, index), 8);
    assert_int_equal(sizeof(agg_int32_int32_t), 8);
    assert_int_equal(offsetof(agg_int32_int32_t, index), 4);
    assert_int_equal(sizeof(agg_int16_int32_t), 8);
    assert_int_equal(offsetof(agg_int16_int32_t, index), 4);
    for (size_t i = 0; i < NUM_PAIRS; i++) {
        assert_int_equal(agg_dtype_size(pair_cases[i].dtype), pair_cases[i].size);
        assert_string_equal(agg_dtype_name(pair_cases[i].dtype), pair_cases[i].name);
        assert_true(agg_dtype_is_pair(pair_cases[i].dtype));
        assert_int_equal(agg_dtype_acc(pair_cases[i].dtype), pair_cases[i].dtype);
    }
    for (int d = 0; d <= AGG_DTYPE_FLOAT64; d++) {
        assert_false(agg_dtype_is_pair(d));
    }
    assert_string_equal(agg_op_name(AGG_OP_MINLOC), "minloc");
    assert_string_equal(agg_op_name(AGG_OP_MAXLOC), "maxloc");
}

/* Kernels exist exactly for (pair, MINLOC/MAXLOC); the acc form is the same kernel. */
static void test_pair_support(void **state)
{
    (void)state;
    for (int d = 0; d < AGG_DTYPE__COUNT; d++) {
        for (int op = 0; op < AGG_OP__COUNT; op++) {
            int             loc = op == AGG_OP_MINLOC || op == AGG_OP_MAXLOC;
            agg_reduce_fn_t fn  = agg_reduce_fn(d, op);
            if (agg_dtype_is_pair(d) && loc) {
                assert_non_null(fn);
            } else if (agg_dtype_is_pair(d) || loc) {
                assert_null(fn);
            }
            if (agg_dtype_is_pair(d)) {
                assert_ptr_equal(agg_reduce_acc_fn(d, op), fn);
            }
        }
    }
}

#define PAD 4 /* elements after the end that must stay untouched */

static void check_loc(const pair_case_t *pc, int op, size_t n, size_t off)
{
    agg_reduce_fn_t fn    = agg_reduce_fn(pc->dtype, op);
    size_t          total = off + n + PAD, bytes = total * pc->size;
    unsigned char  *inout = malloc(bytes), *in = malloc(bytes), *before = malloc(bytes);
    unsigned char  *in_cp = malloc(bytes);
    assert_non_null(fn);
    assert_true(inout && in && before && in_cp);

    /* 0xa5 in the padding: the kernel must not write it. */
    memset(inout, 0xa5, bytes);
    memset(in, 0x5a, bytes);
    for (size_t i = 0; i < total; i++) {
        store_elem(pc, inout, i, random_elem(pc));
        store_elem(pc, in, i, random_elem(pc));
    }
    memcpy(before, inout, bytes);
    memcpy(in_cp, in, bytes);

    fn(inout + off * pc->size, in + off * pc->size, n);

    for (size_t i = 0; i < total; i++) {
        elem_t a = load_elem(pc, before, i), b = load_elem(pc, in, i);
        elem_t got = load_elem(pc, inout, i);
        elem_t want = (i >= off && i < off + n) ? reference(pc, op, a, b) : a;
        if (got.bits != want.bits || got.index != want.index) {
            fail_msg("%s %s n=%zu offset=%zu element %zu: (0x%llx, %d) OP (0x%llx, %d) gave "
                     "(0x%llx, %d), want (0x%llx, %d)", pc->name, agg_op_name(op), n, off, i,
                     (unsigned long long)a.bits, a.index, (unsigned long long)b.bits, b.index,
                     (unsigned long long)got.bits, got.index, (unsigned long long)want.bits,
                     want.index);
        }
        /* Padding bytes: between value and index, and after the index. */
        for (size_t k = pc->value_size; k < pc->size; k++) {
            if (k >= pc->index_offset && k < pc->index_offset + 4) {
                continue;
            }
            assert_int_equal(inout[i * pc->size + k], 0xa5);
        }
    }
    assert_memory_equal(in, in_cp, bytes);
    free(in_cp);
    free(before);
    free(in);
    free(inout);
}

static void test_loc_against_reference(void **state)
{
    static const size_t counts[] = { 0, 1, 7, 17, 1000, 4099 };
    (void)state;
    for (size_t p = 0; p < NUM_PAIRS; p++) {
        for (int op = AGG_OP_MINLOC; op <= AGG_OP_MAXLOC; op++) {
            rng_state = 0x10c0 + p * 2 + (uint64_t)op;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                check_loc(&pair_cases[p], op, counts[c], 0);
                check_loc(&pair_cases[p], op, counts[c], 1);
            }
        }
    }
}

/* The rules written out once with plain values. */
static void test_loc_pinned(void **state)
{
    (void)state;
    agg_reduce_fn_t fmin = agg_reduce_fn(AGG_DTYPE_FLOAT32_INT32, AGG_OP_MINLOC);
    agg_reduce_fn_t fmax = agg_reduce_fn(AGG_DTYPE_FLOAT32_INT32, AGG_OP_MAXLOC);
    assert_true(fmin && fmax);

    /* Smaller value wins; equal values keep the value and take the smaller index. */
    agg_float32_int32_t a[] = { { 3.0f, 5 }, { 1.0f, 9 }, { 2.0f, 1 }, { 2.0f, 4 } };
    agg_float32_int32_t b[] = { { 3.0f, 2 }, { 2.0f, 0 }, { 2.0f, 3 }, { -1.0f, 8 } };
    fmin(a, b, 4);
    assert_true(a[0].value == 3.0f && a[0].index == 2);
    assert_true(a[1].value == 1.0f && a[1].index == 9);
    assert_true(a[2].value == 2.0f && a[2].index == 1);
    assert_true(a[3].value == -1.0f && a[3].index == 8);

    /* NaN wins both ops whichever side it is on; two NaNs tie, inout's NaN stays. */
    float               nan_a, nan_b;
    uint32_t            qa = 0x7fc00001u, qb = 0x7fc00002u, got;
    memcpy(&nan_a, &qa, 4);
    memcpy(&nan_b, &qb, 4);
    for (int m = 0; m < 2; m++) {
        agg_reduce_fn_t     fn  = m ? fmax : fmin;
        agg_float32_int32_t x[] = { { 1.0f, 0 }, { nan_a, 7 }, { nan_a, 5 }, { INFINITY, 1 } };
        agg_float32_int32_t y[] = { { nan_b, 7 }, { -INFINITY, 0 }, { nan_b, 3 }, { nan_b, 2 } };
        fn(x, y, 4);
        memcpy(&got, &x[0].value, 4);
        assert_true(got == qb && x[0].index == 7);
        memcpy(&got, &x[1].value, 4);
        assert_true(got == qa && x[1].index == 7);
        memcpy(&got, &x[2].value, 4);
        assert_true(got == qa && x[2].index == 3);
        memcpy(&got, &x[3].value, 4);
        assert_true(got == qb && x[3].index == 2);
    }

    /* -0 and +0 are equal: a tie, inout's zero stays. */
    agg_float64_int32_t z[] = { { -0.0, 4 } }, zin[] = { { 0.0, 1 } };
    agg_reduce_fn(AGG_DTYPE_FLOAT64_INT32, AGG_OP_MAXLOC)(z, zin, 1);
    assert_true(z[0].value == 0.0 && signbit(z[0].value) && z[0].index == 1);

    /* Integers compare signed, indices too. */
    agg_int64_int32_t l[] = { { INT64_MIN, 3 }, { 5, -1 } }, lin[] = { { INT64_MAX, 0 }, { 5, 3 } };
    agg_reduce_fn(AGG_DTYPE_INT64_INT32, AGG_OP_MINLOC)(l, lin, 2);
    assert_true(l[0].value == INT64_MIN && l[0].index == 3);
    assert_true(l[1].value == 5 && l[1].index == -1);
    agg_int16_int32_t s[] = { { -1, 0 } }, sin[] = { { 1, 6 } };
    agg_reduce_fn(AGG_DTYPE_INT16_INT32, AGG_OP_MAXLOC)(s, sin, 1);
    assert_true(s[0].value == 1 && s[0].index == 6);
    agg_int32_int32_t i2[] = { { INT32_MAX, 2 } }, i2in[] = { { INT32_MIN, 1 } };
    agg_reduce_fn(AGG_DTYPE_INT32_INT32, AGG_OP_MAXLOC)(i2, i2in, 1);
    assert_true(i2[0].value == INT32_MAX && i2[0].index == 2);
}

/*
 * An aggregation tree combines contributions in whatever order they arrive:
 * a left fold and a pairwise tree over a shuffled copy must agree on the
 * index, and on the value up to NaN payload and the sign of zero.
 */
static void test_loc_order_independent(void **state)
{
    enum { N = 64 };
    (void)state;
    for (size_t p = 0; p < NUM_PAIRS; p++) {
        const pair_case_t *pc = &pair_cases[p];
        for (int op = AGG_OP_MINLOC; op <= AGG_OP_MAXLOC; op++) {
            agg_reduce_fn_t fn = agg_reduce_fn(pc->dtype, op);
            rng_state          = 0x0dd + p * 2 + (uint64_t)op;
            for (int round = 0; round < 200; round++) {
                unsigned char fold[N * 16], tree[N * 16];
                for (size_t i = 0; i < N; i++) {
                    store_elem(pc, fold, i, random_elem(pc));
                }
                memcpy(tree, fold, sizeof(fold));
                for (size_t i = N - 1; i > 0; i--) { /* Fisher-Yates */
                    size_t        j = (size_t)(rng_next() % (i + 1));
                    unsigned char t[16];
                    memcpy(t, tree + i * pc->size, pc->size);
                    memcpy(tree + i * pc->size, tree + j * pc->size, pc->size);
                    memcpy(tree + j * pc->size, t, pc->size);
                }
                for (size_t i = 1; i < N; i++) {
                    fn(fold, fold + i * pc->size, 1);
                }
                for (size_t w = 1; w < N; w *= 2) {
                    for (size_t i = 0; i + w < N; i += 2 * w) {
                        fn(tree + i * pc->size, tree + (i + w) * pc->size, 1);
                    }
                }
                elem_t x = load_elem(pc, fold, 0), y = load_elem(pc, tree, 0);
                assert_int_equal(x.index, y.index);
                assert_int_equal(order(pc, op, x.bits, y.bits), 0);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pair_layout),
        cmocka_unit_test(test_pair_support),
        cmocka_unit_test(test_loc_against_reference),
        cmocka_unit_test(test_loc_pinned),
        cmocka_unit_test(test_loc_order_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
