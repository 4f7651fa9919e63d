/*
 * The reduce engine against a reference written the slow way: every element
 * is widened to 64-bit integers (masked back to the type's width) or to
 * double, and the operation is picked by a switch per element. The kernels
 * are macro-generated vector loops, so the two share no code except the
 * float16/bfloat16 conversions, which test_reduce_half.c pins on their own
 * (exhaustively, and against the compiler's _Float16 where it has one).
 * MINLOC/MAXLOC and the pair dtypes: test_reduce_loc.c; float32
 * accumulation of 16-bit floats and the instruction-set levels:
 * test_reduce_acc.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/reduce.h"
#include "reduce_test.h"

enum kind { K_SINT, K_UINT, K_HALF, K_BF16, K_F32, K_F64, K_PAIR };

typedef struct dtype_case {
    int         dtype;
    const char *name;
    size_t      size;
    enum kind   kind;
} dtype_case_t;

static const dtype_case_t dtype_cases[] = {
    { AGG_DTYPE_INT8,     "int8",     1, K_SINT },
    { AGG_DTYPE_UINT8,    "uint8",    1, K_UINT },
    { AGG_DTYPE_INT16,    "int16",    2, K_SINT },
    { AGG_DTYPE_UINT16,   "uint16",   2, K_UINT },
    { AGG_DTYPE_INT32,    "int32",    4, K_SINT },
    { AGG_DTYPE_UINT32,   "uint32",   4, K_UINT },
    { AGG_DTYPE_INT64,    "int64",    8, K_SINT },
    { AGG_DTYPE_UINT64,   "uint64",   8, K_UINT },
    { AGG_DTYPE_FLOAT16,  "float16",  2, K_HALF },
    { AGG_DTYPE_BFLOAT16, "bfloat16", 2, K_BF16 },
    { AGG_DTYPE_FLOAT32,  "float32",  4, K_F32 },
    { AGG_DTYPE_FLOAT64,  "float64",  8, K_F64 },
    /* Sizes as MPI's C pair structs on x86-64 Linux, padding included. */
    { AGG_DTYPE_FLOAT32_INT32, "float32_int32", 8,  K_PAIR },
    { AGG_DTYPE_FLOAT64_INT32, "float64_int32", 16, K_PAIR },
    { AGG_DTYPE_INT64_INT32,   "int64_int32",   16, K_PAIR },
    { AGG_DTYPE_INT32_INT32,   "int32_int32",   8,  K_PAIR },
    { AGG_DTYPE_INT16_INT32,   "int16_int32",   8,  K_PAIR },
};
#define NUM_DTYPES (sizeof(dtype_cases) / sizeof(dtype_cases[0]))

static const char *const op_names[] = {
    "sum", "prod", "min", "max", "land", "band", "lor", "bor", "lxor", "bxor",
    "minloc", "maxloc",
};
#define NUM_OPS (sizeof(op_names) / sizeof(op_names[0]))

static int is_float(enum kind k)
{
    return k == K_HALF || k == K_BF16 || k == K_F32 || k == K_F64;
}

static int is_loc(int op)
{
    return op == AGG_OP_MINLOC || op == AGG_OP_MAXLOC;
}

/* Pairs take only MINLOC/MAXLOC, and nothing else takes those. */
static int op_supported(enum kind k, int op)
{
    if (k == K_PAIR || is_loc(op)) {
        return k == K_PAIR && is_loc(op);
    }
    return !is_float(k) || op == AGG_OP_SUM || op == AGG_OP_PROD ||
           op == AGG_OP_MIN || op == AGG_OP_MAX;
}

/* ---- helpers ---------------------------------------------------------- */

static uint64_t width_mask(size_t size)
{
    return size == 8 ? ~0ull : (1ull << (size * 8)) - 1;
}

static uint64_t load_bits(const void *buf, size_t i, size_t size)
{
    uint64_t v = 0;
    /* Little-endian host: the low bytes of v hold the element. */
    memcpy(&v, (const char *)buf + i * size, size);
    return v;
}

static void store_bits(void *buf, size_t i, size_t size, uint64_t v)
{
    memcpy((char *)buf + i * size, &v, size);
}

static int64_t sign_extend(uint64_t v, size_t size)
{
    unsigned shift = 64 - (unsigned)size * 8;
    return (int64_t)(v << shift) >> shift;
}

static double to_double(enum kind k, uint64_t bits)
{
    switch (k) {
    case K_HALF: return agg_half_to_float((uint16_t)bits);
    case K_BF16: return agg_bf16_to_float((uint16_t)bits);
    case K_F32:  return bits_f32((uint32_t)bits);
    default:     return bits_f64(bits);
    }
}

static uint64_t from_double(enum kind k, double d)
{
    switch (k) {
    case K_HALF: return agg_float_to_half((float)d);
    case K_BF16: return agg_float_to_bf16((float)d);
    case K_F32:  return f32_bits((float)d);
    default:     return f64_bits(d);
    }
}

/*
 * The expected result for one element. Integers: 64-bit arithmetic wraps
 * modulo 2^64, and masking to the width then gives the modulo 2^N result.
 * Floats narrower than double: computing in double and rounding once to the
 * type equals computing in the type (53 >= 2 * 24 + 2 for sum and product).
 */
static uint64_t reference(const dtype_case_t *dc, int op, uint64_t a, uint64_t b)
{
    uint64_t mask = width_mask(dc->size);

    if (!is_float(dc->kind)) {
        int     sgn = dc->kind == K_SINT;
        int64_t sa = sign_extend(a, dc->size), sb = sign_extend(b, dc->size);
        int     a_lt_b = sgn ? sa < sb : a < b;
        int     za = (a & mask) == 0, zb = (b & mask) == 0;
        switch (op) {
        case AGG_OP_SUM:  return (a + b) & mask;
        case AGG_OP_PROD: return (a * b) & mask;
        case AGG_OP_MIN:  return a_lt_b ? a : b;
        case AGG_OP_MAX:  return a_lt_b ? b : a;
        case AGG_OP_LAND: return !za && !zb;
        case AGG_OP_BAND: return a & b;
        case AGG_OP_LOR:  return !za || !zb;
        case AGG_OP_BOR:  return a | b;
        case AGG_OP_LXOR: return za != zb;
        case AGG_OP_BXOR: return a ^ b;
        }
        fail_msg("no reference for op %d", op);
        return 0;
    }

    double x = to_double(dc->kind, a), y = to_double(dc->kind, b), r = 0;
    switch (op) {
    case AGG_OP_SUM:  r = x + y; break;
    case AGG_OP_PROD: r = x * y; break;
    case AGG_OP_MIN:  r = (isnan(x) || isnan(y)) ? NAN : fmin(x, y); break;
    case AGG_OP_MAX:  r = (isnan(x) || isnan(y)) ? NAN : fmax(x, y); break;
    default: fail_msg("no float reference for op %d", op); return 0;
    }
    return from_double(dc->kind, r);
}

/* Bit-exact, except that any NaN matches any NaN, and for min/max -0 == +0. */
static int same_result(const dtype_case_t *dc, int op, uint64_t got, uint64_t want)
{
    if (got == want) {
        return 1;
    }
    if (!is_float(dc->kind)) {
        return 0;
    }
    double g = to_double(dc->kind, got), w = to_double(dc->kind, want);
    if (isnan(g) && isnan(w)) {
        return 1;
    }
    return (op == AGG_OP_MIN || op == AGG_OP_MAX) && g == 0 && w == 0;
}

/* Random element bits: zeros and small values often, specials sometimes. */
static uint64_t random_elem(enum kind k, size_t size)
{
    uint64_t r = rng_next(), pick = r & 15;

    r >>= 4;
    switch (k) {
    case K_SINT:
    case K_UINT:
        if (pick < 4) return 0;
        if (pick < 6) return (r % 5 - 2) & width_mask(size); /* -2..2 */
        return r & width_mask(size);
    case K_HALF:
    case K_BF16:
        return r & 0xffff; /* every pattern: subnormals, Inf, NaN included */
    case K_F32:
    case K_F64: {
        static const double specials[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0,
                                           FLT_MIN / 4, DBL_MIN / 4, FLT_MAX, DBL_MAX };
        double d;
        if (pick == 0) {
            d = specials[r % (sizeof(specials) / sizeof(specials[0]))];
        } else if (pick == 1) {
            return r & width_mask(size); /* any pattern */
        } else {
            /* Moderate magnitudes, so products stay finite most of the time. */
            d = ldexp((double)(r & 0xffffffffffull) / 0x1p40, (int)((r >> 40) % 41) - 20);
            if (r >> 63) d = -d;
        }
        return k == K_F32 ? f32_bits((float)d) : f64_bits(d);
    }
    case K_PAIR:
        break; /* test_reduce_loc.c makes its own */
    }
    fail_msg("no random elements of kind %d", (int)k);
    return 0;
}

/* ---- reduce against the reference ------------------------------------ */

#define GUARD 16 /* elements past the end that must stay untouched */

static void check_reduce(const dtype_case_t *dc, int op, agg_reduce_fn_t fn,
                         size_t n, size_t offset)
{
    size_t total = offset + n + GUARD, size = dc->size;
    char  *inout = malloc(total * size), *in = malloc(total * size);
    char  *before = malloc(total * size), *in_copy = malloc(total * size);
    assert_non_null(inout);
    assert_non_null(in);
    assert_non_null(before);
    assert_non_null(in_copy);

    for (size_t i = 0; i < total; i++) {
        store_bits(inout, i, size, random_elem(dc->kind, size));
        store_bits(in, i, size, random_elem(dc->kind, size));
    }
    memcpy(before, inout, total * size);
    memcpy(in_copy, in, total * size);

    fn(inout + offset * size, in + offset * size, n);

    for (size_t i = 0; i < total; i++) {
        uint64_t a = load_bits(before, i, size), b = load_bits(in, i, size);
        uint64_t got = load_bits(inout, i, size);
        uint64_t want = (i >= offset && i < offset + n) ? reference(dc, op, a, b) : a;
        if (!same_result(dc, op, got, want)) {
            fail_msg("%s %s n=%zu offset=%zu element %zu: a=0x%llx b=0x%llx got 0x%llx, "
                     "expected 0x%llx", dc->name, op_names[op], n, offset, i,
                     (unsigned long long)a, (unsigned long long)b,
                     (unsigned long long)got, (unsigned long long)want);
        }
    }
    assert_memory_equal(in, in_copy, total * size);

    free(in_copy);
    free(before);
    free(in);
    free(inout);
}

static void test_reduce_dtype(void **state)
{
    const dtype_case_t *dc = *state;
    static const size_t lengths[] = { 0, 1, 7, 1000, 4099 };

    rng_state = 0x5eed0000u + (uint64_t)dc->dtype;
    for (int op = 0; op < (int)NUM_OPS; op++) {
        agg_reduce_fn_t fn = agg_reduce_fn(dc->dtype, op);
        if (!op_supported(dc->kind, op)) {
            assert_null(fn);
            continue;
        }
        if (fn == NULL) {
            fail_msg("%s %s: no kernel", dc->name, op_names[op]);
        }
        for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
            /* Offset 1 element: a start that is not vector aligned. */
            check_reduce(dc, op, fn, lengths[l], 0);
            check_reduce(dc, op, fn, lengths[l], 1);
        }
    }
}

/* ---- pinned behaviour ------------------------------------------------- */

static void test_sizes_and_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < NUM_DTYPES; i++) {
        const dtype_case_t *dc = &dtype_cases[i];
        int half = dc->kind == K_HALF || dc->kind == K_BF16;
        assert_int_equal(agg_dtype_size(dc->dtype), dc->size);
        assert_string_equal(agg_dtype_name(dc->dtype), dc->name);
        assert_int_equal(agg_dtype_is_pair(dc->dtype), dc->kind == K_PAIR);
        /* 16-bit floats accumulate in float32, everything else in itself. */
        assert_int_equal(agg_dtype_acc(dc->dtype), half ? AGG_DTYPE_FLOAT32 : dc->dtype);
        assert_int_equal(agg_dtype_acc_size(dc->dtype), half ? 4 : dc->size);
    }
    assert_int_equal(AGG_DTYPE__COUNT, NUM_DTYPES);

    /* The values travel on the wire: appended, never renumbered. */
    assert_int_equal(AGG_DTYPE_FLOAT64, 11);
    assert_int_equal(AGG_DTYPE_FLOAT32_INT32, 12);
    assert_int_equal(AGG_DTYPE_FLOAT64_INT32, 13);
    assert_int_equal(AGG_DTYPE_INT64_INT32, 14);
    assert_int_equal(AGG_DTYPE_INT32_INT32, 15);
    assert_int_equal(AGG_DTYPE_INT16_INT32, 16);
    assert_int_equal(AGG_OP_BXOR, 9);
    assert_int_equal(AGG_OP_MINLOC, 10);
    assert_int_equal(AGG_OP_MAXLOC, 11);
    for (int op = 0; op < (int)NUM_OPS; op++) {
        assert_string_equal(agg_op_name(op), op_names[op]);
    }
    assert_int_equal(AGG_OP__COUNT, NUM_OPS);

    static const int bad[] = { -1, INT_MIN, INT_MAX, 100 };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(agg_dtype_size(bad[i]), 0);
        assert_string_equal(agg_dtype_name(bad[i]), "unknown");
        assert_string_equal(agg_op_name(bad[i]), "unknown");
        assert_int_equal(agg_dtype_is_pair(bad[i]), 0);
        assert_int_equal(agg_dtype_acc(bad[i]), -1);
        assert_int_equal(agg_dtype_acc_size(bad[i]), 0);
    }
    assert_int_equal(agg_dtype_size(AGG_DTYPE__COUNT), 0);
    assert_string_equal(agg_dtype_name(AGG_DTYPE__COUNT), "unknown");
    assert_string_equal(agg_op_name(AGG_OP__COUNT), "unknown");
    assert_int_equal(agg_dtype_acc(AGG_DTYPE__COUNT), -1);
}

static void test_support_matrix(void **state)
{
    (void)state;
    for (size_t i = 0; i < NUM_DTYPES; i++) {
        for (int op = 0; op < (int)NUM_OPS; op++) {
            agg_reduce_fn_t fn = agg_reduce_fn(dtype_cases[i].dtype, op);
            if (op_supported(dtype_cases[i].kind, op)) {
                assert_non_null(fn);
            } else {
                assert_null(fn);
            }
        }
    }
    static const int bad_dtype[] = { -1, INT_MIN, INT_MAX, AGG_DTYPE__COUNT };
    static const int bad_op[]    = { -1, INT_MIN, INT_MAX, AGG_OP__COUNT };
    for (size_t i = 0; i < 4; i++) {
        assert_null(agg_reduce_fn(bad_dtype[i], AGG_OP_SUM));
        assert_null(agg_reduce_fn(AGG_DTYPE_INT32, bad_op[i]));
        assert_null(agg_reduce_fn(bad_dtype[i], bad_op[i]));
    }
}

/* Pinned edge cases, so a wrong reference above cannot hide a wrong kernel. */
static void test_integer_wraps(void **state)
{
    (void)state;
    int8_t i8a[] = { INT8_MAX, INT8_MIN, INT8_MIN, 16 };
    int8_t i8b[] = { 1, -1, -1, 16 };
    agg_reduce_fn(AGG_DTYPE_INT8, AGG_OP_SUM)(i8a, i8b, 2);
    agg_reduce_fn(AGG_DTYPE_INT8, AGG_OP_PROD)(i8a + 2, i8b + 2, 2);
    assert_int_equal(i8a[0], INT8_MIN);
    assert_int_equal(i8a[1], INT8_MAX);
    assert_int_equal(i8a[2], INT8_MIN);
    assert_int_equal(i8a[3], 0);

    uint8_t u8a[] = { 255 }, u8b[] = { 1 };
    agg_reduce_fn(AGG_DTYPE_UINT8, AGG_OP_SUM)(u8a, u8b, 1);
    assert_int_equal(u8a[0], 0);

    /* 65535 * 65535 would overflow int if the kernel let uint16 promote. */
    uint16_t u16a[] = { 65535, 300 }, u16b[] = { 65535, 300 };
    agg_reduce_fn(AGG_DTYPE_UINT16, AGG_OP_PROD)(u16a, u16b, 2);
    assert_int_equal(u16a[0], 1);
    assert_int_equal(u16a[1], 90000 % 65536);

    int16_t i16a[] = { INT16_MIN, 300 }, i16b[] = { INT16_MIN, 300 };
    agg_reduce_fn(AGG_DTYPE_INT16, AGG_OP_PROD)(i16a, i16b, 2);
    assert_int_equal(i16a[0], 0);
    assert_int_equal(i16a[1], 90000 - 65536);

    int32_t i32a[] = { INT32_MAX, INT32_MIN, 65536 }, i32b[] = { 1, -1, 65536 };
    agg_reduce_fn(AGG_DTYPE_INT32, AGG_OP_SUM)(i32a, i32b, 1);
    agg_reduce_fn(AGG_DTYPE_INT32, AGG_OP_PROD)(i32a + 1, i32b + 1, 2);
    assert_int_equal(i32a[0], INT32_MIN);
    assert_int_equal(i32a[1], INT32_MIN);
    assert_int_equal(i32a[2], 0);

    int64_t i64a[] = { INT64_MAX, INT64_MIN }, i64b[] = { 1, -1 };
    agg_reduce_fn(AGG_DTYPE_INT64, AGG_OP_SUM)(i64a, i64b, 1);
    agg_reduce_fn(AGG_DTYPE_INT64, AGG_OP_PROD)(i64a + 1, i64b + 1, 1);
    assert_true(i64a[0] == INT64_MIN);
    assert_true(i64a[1] == INT64_MIN);

    uint64_t u64a[] = { UINT64_MAX }, u64b[] = { 2 };
    agg_reduce_fn(AGG_DTYPE_UINT64, AGG_OP_SUM)(u64a, u64b, 1);
    assert_true(u64a[0] == 1);

    /* Signedness of min/max. */
    int32_t mn[] = { -1 }, mx[] = { -1 }, other[] = { 1 };
    agg_reduce_fn(AGG_DTYPE_INT32, AGG_OP_MIN)(mn, other, 1);
    agg_reduce_fn(AGG_DTYPE_INT32, AGG_OP_MAX)(mx, other, 1);
    assert_int_equal(mn[0], -1);
    assert_int_equal(mx[0], 1);
    uint32_t umn[] = { 0xffffffffu }, uother[] = { 1 };
    agg_reduce_fn(AGG_DTYPE_UINT32, AGG_OP_MIN)(umn, uother, 1);
    assert_int_equal(umn[0], 1);

    /* Logical ops give exactly 0 or 1. */
    int32_t la[] = { 5, 0, 7, 0, -3 }, lb[] = { -3, 0, 9, -1, 0 };
    int32_t land[5], lor[5], lxor[5];
    memcpy(land, la, sizeof(la));
    memcpy(lor, la, sizeof(la));
    memcpy(lxor, la, sizeof(la));
    agg_reduce_fn(AGG_DTYPE_INT32, AGG_OP_LAND)(land, lb, 5);
    agg_reduce_fn(AGG_DTYPE_INT32, AGG_OP_LOR)(lor, lb, 5);
    agg_reduce_fn(AGG_DTYPE_INT32, AGG_OP_LXOR)(lxor, lb, 5);
    static const int32_t want_and[] = { 1, 0, 1, 0, 0 };
    static const int32_t want_or[]  = { 1, 0, 1, 1, 1 };
    static const int32_t want_xor[] = { 0, 0, 0, 1, 1 };
    assert_memory_equal(land, want_and, sizeof(land));
    assert_memory_equal(lor, want_or, sizeof(lor));
    assert_memory_equal(lxor, want_xor, sizeof(lxor));
}

static void test_float_minmax_nan(void **state)
{
    (void)state;
    float f_min[] = { NAN, 1.0f, 2.0f }, f_max[] = { NAN, 1.0f, 2.0f };
    float f_in[]  = { 1.0f, NAN, 3.0f };
    agg_reduce_fn(AGG_DTYPE_FLOAT32, AGG_OP_MIN)(f_min, f_in, 3);
    agg_reduce_fn(AGG_DTYPE_FLOAT32, AGG_OP_MAX)(f_max, f_in, 3);
    assert_true(isnan(f_min[0]) && isnan(f_min[1]) && f_min[2] == 2.0f);
    assert_true(isnan(f_max[0]) && isnan(f_max[1]) && f_max[2] == 3.0f);

    double d_min[] = { NAN, -1.0 }, d_max[] = { NAN, -1.0 }, d_in[] = { -INFINITY, NAN };
    agg_reduce_fn(AGG_DTYPE_FLOAT64, AGG_OP_MIN)(d_min, d_in, 2);
    agg_reduce_fn(AGG_DTYPE_FLOAT64, AGG_OP_MAX)(d_max, d_in, 2);
    assert_true(isnan(d_min[0]) && isnan(d_min[1]));
    assert_true(isnan(d_max[0]) && isnan(d_max[1]));

    static const int d16[] = { AGG_DTYPE_FLOAT16, AGG_DTYPE_BFLOAT16 };
    static const uint16_t one[] = { 0x3c00, 0x3f80 }, qnan[] = { 0x7e00, 0x7fc0 };
    for (int t = 0; t < 2; t++) {
        for (int op = AGG_OP_MIN; op <= AGG_OP_MAX; op++) {
            uint16_t io[] = { qnan[t], one[t] }, in[] = { one[t], qnan[t] };
            agg_reduce_fn(d16[t], op)(io, in, 2);
            float (*to)(uint16_t) = t ? agg_bf16_to_float : agg_half_to_float;
            assert_true(isnan(to(io[0])) && isnan(to(io[1])));
        }
    }
}

#define REDUCE_TEST(_i, _name)                                                \
    { .name = "reduce_" #_name, .test_func = test_reduce_dtype,               \
      .initial_state = (void *)&dtype_cases[_i] }

int main(void)
{
    const struct CMUnitTest tests[] = {
        REDUCE_TEST(0, int8),     REDUCE_TEST(1, uint8),
        REDUCE_TEST(2, int16),    REDUCE_TEST(3, uint16),
        REDUCE_TEST(4, int32),    REDUCE_TEST(5, uint32),
        REDUCE_TEST(6, int64),    REDUCE_TEST(7, uint64),
        REDUCE_TEST(8, float16),  REDUCE_TEST(9, bfloat16),
        REDUCE_TEST(10, float32), REDUCE_TEST(11, float64),
        cmocka_unit_test(test_sizes_and_names),
        cmocka_unit_test(test_support_matrix),
        cmocka_unit_test(test_integer_wraps),
        cmocka_unit_test(test_float_minmax_nan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
