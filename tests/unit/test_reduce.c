/*
 * The reduce engine against a reference written the slow way: every element
 * is widened to 64-bit integers (masked back to the type's width) or to
 * double, and the operation is picked by a switch per element. The kernels
 * are macro-generated vector loops, so the two share no code except the
 * float16/bfloat16 conversions, which are pinned on their own below
 * (exhaustively, and against the compiler's _Float16 where it has one).
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

enum kind { K_SINT, K_UINT, K_HALF, K_BF16, K_F32, K_F64 };

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
};
#define NUM_DTYPES (sizeof(dtype_cases) / sizeof(dtype_cases[0]))

static const char *const op_names[] = {
    "sum", "prod", "min", "max", "land", "band", "lor", "bor", "lxor", "bxor",
};
#define NUM_OPS (sizeof(op_names) / sizeof(op_names[0]))

static int is_float(enum kind k)
{
    return k == K_HALF || k == K_BF16 || k == K_F32 || k == K_F64;
}

static int op_supported(enum kind k, int op)
{
    return !is_float(k) || op == AGG_OP_SUM || op == AGG_OP_PROD ||
           op == AGG_OP_MIN || op == AGG_OP_MAX;
}

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rng_state;

/* splitmix64: small, seeded, the same sequence everywhere. */
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static double bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

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
    }
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
        assert_int_equal(agg_dtype_size(dtype_cases[i].dtype), dtype_cases[i].size);
        assert_string_equal(agg_dtype_name(dtype_cases[i].dtype), dtype_cases[i].name);
    }
    assert_int_equal(AGG_DTYPE__COUNT, NUM_DTYPES);
    for (int op = 0; op < (int)NUM_OPS; op++) {
        assert_string_equal(agg_op_name(op), op_names[op]);
    }
    assert_int_equal(AGG_OP__COUNT, NUM_OPS);

    static const int bad[] = { -1, INT_MIN, INT_MAX, 100 };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(agg_dtype_size(bad[i]), 0);
        assert_string_equal(agg_dtype_name(bad[i]), "unknown");
        assert_string_equal(agg_op_name(bad[i]), "unknown");
    }
    assert_int_equal(agg_dtype_size(AGG_DTYPE__COUNT), 0);
    assert_string_equal(agg_dtype_name(AGG_DTYPE__COUNT), "unknown");
    assert_string_equal(agg_op_name(AGG_OP__COUNT), "unknown");
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

/* ---- float16 / bfloat16 conversions ----------------------------------- */

static int half_is_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

static int bf16_is_nan(uint16_t b)
{
    return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
}

static void test_half_pinned(void **state)
{
    (void)state;
    assert_int_equal(agg_float_to_half(1.0f), 0x3c00);
    assert_int_equal(agg_float_to_half(-2.0f), 0xc000);
    assert_int_equal(agg_float_to_half(0.0f), 0x0000);
    assert_int_equal(agg_float_to_half(-0.0f), 0x8000);
    assert_int_equal(agg_float_to_half(65504.0f), 0x7bff);          /* largest finite */
    assert_int_equal(agg_float_to_half(0x1p-14f), 0x0400);          /* smallest normal */
    assert_int_equal(agg_float_to_half(0x1p-24f), 0x0001);          /* smallest subnormal */
    assert_int_equal(agg_float_to_half(0x3ffp-24f), 0x03ff);        /* largest subnormal */
    assert_int_equal(agg_float_to_half(INFINITY), 0x7c00);
    assert_int_equal(agg_float_to_half(-INFINITY), 0xfc00);
    assert_true(half_is_nan(agg_float_to_half(NAN)));
    assert_true(half_is_nan(agg_float_to_half(bits_f32(0x7f800001u)))); /* payload in low bits */
    assert_true(half_is_nan(agg_float_to_half(bits_f32(0xffc00000u))));

    /* Ties go to the even neighbour; anything past a tie goes away from it. */
    assert_int_equal(agg_float_to_half(1.0f + 0x1p-11f), 0x3c00);  /* 1 | 1+2^-10 */
    assert_int_equal(agg_float_to_half(1.0f + 0x3p-11f), 0x3c02);  /* 1+2^-10 | 1+2^-9 */
    assert_int_equal(agg_float_to_half(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);
    assert_int_equal(agg_float_to_half(65519.0f), 0x7bff);
    assert_int_equal(agg_float_to_half(65520.0f), 0x7c00);         /* tie, 0x7bff is odd */
    assert_int_equal(agg_float_to_half(FLT_MAX), 0x7c00);
    assert_int_equal(agg_float_to_half(0x1p-25f), 0x0000);         /* tie 0 | 2^-24 */
    assert_int_equal(agg_float_to_half(0x1.0002p-25f), 0x0001);
    assert_int_equal(agg_float_to_half(0x3p-25f), 0x0002);         /* tie 1 | 2 subnormal */
    assert_int_equal(agg_float_to_half(0x5p-25f), 0x0002);         /* tie 2 | 3 subnormal */
    assert_int_equal(agg_float_to_half(0x7ffp-25f), 0x0400);       /* rounds up to normal */
    assert_int_equal(agg_float_to_half(FLT_MIN), 0x0000);
    assert_int_equal(agg_float_to_half(-0x1p-149f), 0x8000);

    assert_true(agg_half_to_float(0x3c00) == 1.0f);
    assert_true(agg_half_to_float(0xc000) == -2.0f);
    assert_true(agg_half_to_float(0x7bff) == 65504.0f);
    assert_true(agg_half_to_float(0x0001) == 0x1p-24f);
    assert_true(agg_half_to_float(0x8001) == -0x1p-24f);
    assert_true(agg_half_to_float(0x03ff) == 0x3ffp-24f);
    assert_true(agg_half_to_float(0x0400) == 0x1p-14f);
    assert_true(agg_half_to_float(0x7c00) == INFINITY);
    assert_true(agg_half_to_float(0xfc00) == -INFINITY);
    assert_true(isnan(agg_half_to_float(0x7e00)));
    assert_true(isnan(agg_half_to_float(0x7c01)));
    assert_true(signbit(agg_half_to_float(0x8000)) && agg_half_to_float(0x8000) == 0.0f);
}

static void test_bf16_pinned(void **state)
{
    (void)state;
    assert_int_equal(agg_float_to_bf16(1.0f), 0x3f80);
    assert_int_equal(agg_float_to_bf16(-2.0f), 0xc000);
    assert_int_equal(agg_float_to_bf16(-0.0f), 0x8000);
    assert_int_equal(agg_float_to_bf16(65504.0f), 0x4780);         /* 65536: 8 bits of precision */
    assert_int_equal(agg_float_to_bf16(0x1p-133f), 0x0001);        /* smallest subnormal */
    assert_int_equal(agg_float_to_bf16(0x1p-126f), 0x0080);        /* smallest normal */
    assert_int_equal(agg_float_to_bf16(0x1p-134f), 0x0000);        /* tie 0 | 2^-133 */
    assert_int_equal(agg_float_to_bf16(0x3p-134f), 0x0002);        /* tie 1 | 2 subnormal */
    assert_int_equal(agg_float_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(agg_float_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(agg_float_to_bf16(FLT_MAX), 0x7f80);          /* above the last tie */
    assert_int_equal(agg_float_to_bf16(bits_f32(0x7f7f7fffu)), 0x7f7f);
    assert_true(bf16_is_nan(agg_float_to_bf16(NAN)));
    assert_true(bf16_is_nan(agg_float_to_bf16(bits_f32(0x7f800001u)))); /* not Inf */
    assert_true(bf16_is_nan(agg_float_to_bf16(bits_f32(0xff800001u))));
    assert_int_equal(agg_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);   /* tie 1 | 1+2^-7 */
    assert_int_equal(agg_float_to_bf16(1.0f + 0x3p-8f), 0x3f82);   /* tie to even, up */
    assert_int_equal(agg_float_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);

    assert_true(agg_bf16_to_float(0x3f80) == 1.0f);
    assert_true(agg_bf16_to_float(0xc000) == -2.0f);
    assert_true(agg_bf16_to_float(0x0001) == 0x1p-133f);
    assert_true(agg_bf16_to_float(0x7f80) == INFINITY);
    assert_true(isnan(agg_bf16_to_float(0x7fc0)));
    assert_true(isnan(agg_bf16_to_float(0x7f81)));
}

/*
 * Every 16-bit pattern: to float and back is the identity (NaN stays NaN), to
 * float matches sign * man * 2^exp, and for every finite pair of neighbours
 * the exact midpoint rounds to the even one while its float neighbours round
 * to the nearer one.
 */
static void check_exhaustive(int bf16)
{
    int   man_bits = bf16 ? 7 : 10, bias = bf16 ? 127 : 15, emax = bf16 ? 255 : 31;
    float (*to)(uint16_t)  = bf16 ? agg_bf16_to_float : agg_half_to_float;
    uint16_t (*from)(float) = bf16 ? agg_float_to_bf16 : agg_float_to_half;
    int (*is_nan)(uint16_t) = bf16 ? bf16_is_nan : half_is_nan;

    for (uint32_t h = 0; h <= 0xffff; h++) {
        uint16_t x = (uint16_t)h;
        int      e = (x >> man_bits) & emax, m = x & ((1 << man_bits) - 1);
        double   want;
        if (e == emax) {
            want = m ? NAN : INFINITY;
        } else if (e == 0) {
            want = ldexp(m, 1 - bias - man_bits);
        } else {
            want = ldexp(m + (1 << man_bits), e - bias - man_bits);
        }
        if (x & 0x8000) {
            want = -want;
        }
        float f = to(x);
        if (is_nan(x)) {
            assert_true(isnan(f));
            assert_true(is_nan(from(f)));
            continue;
        }
        if ((double)f != want || !signbit(f) != !signbit(want)) {
            fail_msg("%s 0x%04x -> %a, expected %a", bf16 ? "bf16" : "half", h, f, want);
        }
        if (from(f) != x) {
            fail_msg("%s 0x%04x -> %a -> 0x%04x", bf16 ? "bf16" : "half", h, f, from(f));
        }
    }

    uint16_t max_finite = (uint16_t)((emax << man_bits) - 1);
    for (uint16_t lo = 0; lo < max_finite + 1; lo++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t s = neg ? 0x8000 : 0;
            double   a = fabs((double)to(lo)), b;
            /* Past the largest finite value the next "neighbour" is 2^(emax-bias). */
            b = lo == max_finite ? ldexp(1, emax - bias) : (double)to((uint16_t)(lo + 1));
            float mid = (float)((a + b) / 2); /* exact: one more bit than the type */
            assert_true((double)mid == (a + b) / 2);
            if (neg) {
                mid = -mid;
            }
            uint16_t even = (lo & 1) ? (uint16_t)(lo + 1) : lo;
            uint16_t got  = from(mid);
            if (got != (even | s)) {
                fail_msg("%s tie %a -> 0x%04x, expected 0x%04x", bf16 ? "bf16" : "half",
                         mid, got, even | s);
            }
            assert_int_equal(from(nextafterf(mid, 0)), lo | s);
            assert_int_equal(from(nextafterf(mid, neg ? -INFINITY : INFINITY)),
                             (uint16_t)(lo + 1) | s);
        }
    }
}

static void test_half_exhaustive(void **state)
{
    (void)state;
    check_exhaustive(0);
}

static void test_bf16_exhaustive(void **state)
{
    (void)state;
    check_exhaustive(1);
}

#ifdef __FLT16_MANT_DIG__
/* The compiler's own conversions, where it has _Float16, as a second opinion. */
static void test_half_vs_compiler(void **state)
{
    (void)state;
    rng_state = 0xf16;
    for (uint32_t n = 0; n < (1u << 20); n++) {
        uint32_t bits = (uint32_t)rng_next();
        if (n & 1) {
            /* Bias towards the half range, where rounding decisions happen. */
            bits = (bits & 0x807fffffu) | ((100u + (bits >> 23) % 45u) << 23);
        }
        float    f = bits_f32(bits);
        _Float16 c = (_Float16)f;
        uint16_t want;
        memcpy(&want, &c, 2);
        uint16_t got = agg_float_to_half(f);
        if (isnan(f)) {
            assert_true(half_is_nan(got));
        } else if (got != want) {
            fail_msg("%a (0x%08x): got 0x%04x, compiler says 0x%04x", f, bits, got, want);
        }
    }
}
#endif

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
        cmocka_unit_test(test_half_pinned),
        cmocka_unit_test(test_bf16_pinned),
        cmocka_unit_test(test_half_exhaustive),
        cmocka_unit_test(test_bf16_exhaustive),
#ifdef __FLT16_MANT_DIG__
        cmocka_unit_test(test_half_vs_compiler),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
