/*
 * float16 and bfloat16: the scalar conversions pinned on their own
 * (exhaustively, and against the compiler's _Float16 where it has one), then
 * the widen and narrow kernels of every instruction-set level held bit for
 * bit against those scalar conversions: every 16-bit pattern for widen, about
 * nine million chosen float patterns for narrow, odd counts and unaligned
 * starts, and a changed MXCSR. The scalar conversions are the reference
 * because they are plain integer code that no compiler setting or CPU mode
 * can change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "agg/reduce.h"
#include "reduce_test.h"

/* ---- helpers ---------------------------------------------------------- */

/* The same mix as a function of n, so that any slice of inputs is reproducible. */
static uint64_t hash64(uint64_t n)
{
    return mix64(n * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
}

/* ---- the scalar conversions ------------------------------------------ */

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


/* The scalar NaN rules exactly, since every level has to reproduce them. */
static void test_nan_bits_pinned(void **state)
{
    (void)state;
    /* Widening keeps the payload and the quiet bit as they are. */
    assert_int_equal(f32_bits(agg_half_to_float(0x7c01)), 0x7f802000u);  /* signalling */
    assert_int_equal(f32_bits(agg_half_to_float(0xfdff)), 0xffbfe000u);  /* signalling */
    assert_int_equal(f32_bits(agg_half_to_float(0x7e00)), 0x7fc00000u);  /* quiet */
    assert_int_equal(f32_bits(agg_bf16_to_float(0x7f81)), 0x7f810000u);
    /* Narrowing forces the quiet bit and keeps the top payload bits. */
    assert_int_equal(agg_float_to_half(bits_f32(0x7f800001u)), 0x7e00);
    assert_int_equal(agg_float_to_half(bits_f32(0x7f802000u)), 0x7e01);
    assert_int_equal(agg_float_to_half(bits_f32(0xffc00000u)), 0xfe00);
    assert_int_equal(agg_float_to_half(bits_f32(0x7fffe000u)), 0x7fff);
    assert_int_equal(agg_float_to_bf16(bits_f32(0x7f800001u)), 0x7fc0);
    assert_int_equal(agg_float_to_bf16(bits_f32(0xff810000u)), 0xffc1);
    assert_int_equal(agg_float_to_bf16(bits_f32(0x7fffffffu)), 0x7fff);
}

/* ---- every level against the scalar conversions ----------------------- */

static const int half_dtypes[] = { AGG_DTYPE_FLOAT16, AGG_DTYPE_BFLOAT16 };

static uint32_t ref_widen(int dtype, uint16_t h)
{
    return f32_bits(dtype == AGG_DTYPE_FLOAT16 ? agg_half_to_float(h) : agg_bf16_to_float(h));
}

static uint16_t ref_narrow(int dtype, uint32_t bits)
{
    return dtype == AGG_DTYPE_FLOAT16 ? agg_float_to_half(bits_f32(bits))
                                      : agg_float_to_bf16(bits_f32(bits));
}

static const uint32_t narrow_specials[] = {
    0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0xc77ff000u, /* 65504, 65520 */
    0x477fffffu, 0x47800000u, 0x7f7fffffu, 0xff7fffffu,             /* 65536, FLT_MAX */
    0x7f800000u, 0xff800000u, 0x7f800001u, 0xff800001u, 0x7fc00000u, /* Inf, NaN */
    0xffc00001u, 0x7fbfffffu, 0x7f802000u, 0xff801fffu, 0x7fffffffu,
    0x33000000u, 0x33000001u, 0xb3000000u, 0x387fe000u, 0x387ff000u, /* 2^-25, subnormals */
    0x387fffffu, 0x38800000u, 0x00000001u, 0x807fffffu, 0x00800000u,
    0x3f808000u, 0x3f818000u, 0x00008000u, 0x00018000u, 0x7f7f8000u, /* bf16 ties */
};
#define NUM_SPECIALS  (sizeof(narrow_specials) / sizeof(narrow_specials[0]))
#define NARROW_GRID   (1u << 23) /* every top 20 bits x 8 low parts */
#define NARROW_RANDOM (1u << 20)
#define NARROW_INPUTS (NARROW_GRID + NARROW_RANDOM + (uint32_t)NUM_SPECIALS)

/*
 * Input n of the narrow set. The grid takes every sign, exponent and top 11
 * mantissa bits, each with low 12 bits on, just below and just above the
 * rounding points of both types (plus two random): every exponent, every
 * subnormal-half shift, ties both ways, NaN payloads that live only in the
 * low bits, +-Inf and the overflow edge at 65520 all appear. Then uniformly
 * random patterns, then the hand-picked ones above.
 */
static uint32_t narrow_input(uint32_t n)
{
    static const uint32_t lows[6] = { 0, 1, 0x7ff, 0x800, 0x801, 0xfff };
    if (n < NARROW_GRID) {
        uint32_t low = (n & 7) < 6 ? lows[n & 7] : (uint32_t)hash64(n) & 0xfffu;
        return (n >> 3) << 12 | low;
    }
    n -= NARROW_GRID;
    if (n < NARROW_RANDOM) {
        return (uint32_t)hash64(n + 0x100000000ull);
    }
    return narrow_specials[n - NARROW_RANDOM];
}

static void test_widen_every_pattern(void **state)
{
    int       isa = level_of(state);
    enum { N = 65536, PAD = 3 + 16 };
    uint16_t *in  = malloc((N + PAD) * sizeof(*in));
    uint32_t *out = malloc((N + PAD) * sizeof(*out));
    assert_non_null(in);
    assert_non_null(out);

    for (size_t t = 0; t < 2; t++) {
        agg_convert_fn_t fn = agg_widen_fn_isa(half_dtypes[t], isa);
        assert_non_null(fn);
        /* Starting 0..3 elements in: unaligned for every vector width. */
        for (size_t off = 0; off < 4; off++) {
            for (size_t i = 0; i < N; i++) {
                in[off + i] = (uint16_t)i;
            }
            memset(out, 0xa5, (N + PAD) * sizeof(*out));
            fn(out + off, in + off, N);
            for (size_t i = 0; i < N + PAD; i++) {
                uint32_t want = 0xa5a5a5a5u;
                if (i >= off && i < off + N) {
                    want = ref_widen(half_dtypes[t], (uint16_t)(i - off));
                }
                if (out[i] != want) {
                    fail_msg("%s widen at %s, offset %zu, element %zu: got 0x%08x, want 0x%08x",
                             agg_dtype_name(half_dtypes[t]), agg_isa_name(isa), off, i, out[i],
                             want);
                }
            }
        }
    }
    free(out);
    free(in);
}

static void test_narrow_float_patterns(void **state)
{
    int       isa = level_of(state);
    enum { CHUNK = 65536 + 13, PAD = 3 + 16 }; /* no vector width divides CHUNK */
    uint32_t *in  = malloc((CHUNK + PAD) * sizeof(*in));
    uint16_t *out = malloc((CHUNK + PAD) * sizeof(*out));
    assert_non_null(in);
    assert_non_null(out);

    for (size_t t = 0; t < 2; t++) {
        agg_convert_fn_t fn = agg_narrow_fn_isa(half_dtypes[t], isa);
        assert_non_null(fn);
        for (uint32_t base = 0, c = 0; base < NARROW_INPUTS; base += CHUNK, c++) {
            size_t n = NARROW_INPUTS - base < CHUNK ? NARROW_INPUTS - base : CHUNK, off = c % 4;
            for (size_t i = 0; i < n; i++) {
                in[off + i] = narrow_input(base + (uint32_t)i);
            }
            memset(out, 0xa5, (CHUNK + PAD) * sizeof(*out));
            fn(out + off, in + off, n);
            for (size_t i = 0; i < n + off + 16; i++) {
                uint32_t x    = i >= off && i < off + n ? in[i] : 0;
                uint16_t want = i >= off && i < off + n ? ref_narrow(half_dtypes[t], x) : 0xa5a5;
                if (out[i] != want) {
                    fail_msg("%s narrow at %s: 0x%08x (%a) gave 0x%04x, want 0x%04x",
                             agg_dtype_name(half_dtypes[t]), agg_isa_name(isa), x,
                             (double)bits_f32(x), out[i], want);
                }
            }
        }
    }
    free(out);
    free(in);
}

/*
 * Short and odd counts at every start 0..3: exactly [off, off + n) changes,
 * with the scalar results, and the input stays as it was.
 */
static void test_convert_tails(void **state)
{
    static const size_t counts[] = { 0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 1023, 1025 };
    enum { MAX = 1025 + 3 + 16 };
    int      isa = level_of(state);
    uint16_t h[MAX], h_copy[MAX], h_out[MAX];
    uint32_t f[MAX], f_copy[MAX], f_out[MAX];

    rng_state = 0x7a11 + (uint64_t)isa;
    for (size_t t = 0; t < 2; t++) {
        int              d      = half_dtypes[t];
        agg_convert_fn_t widen  = agg_widen_fn_isa(d, isa);
        agg_convert_fn_t narrow = agg_narrow_fn_isa(d, isa);
        assert_non_null(widen);
        assert_non_null(narrow);
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            for (size_t off = 0; off < 4; off++) {
                size_t n = counts[c];
                for (size_t i = 0; i < MAX; i++) {
                    h[i] = (uint16_t)rng_next();
                    f[i] = narrow_input((uint32_t)(rng_next() % NARROW_INPUTS));
                }
                memcpy(h_copy, h, sizeof(h));
                memcpy(f_copy, f, sizeof(f));
                memset(f_out, 0xa5, sizeof(f_out));
                memset(h_out, 0xa5, sizeof(h_out));
                widen(f_out + off, h + off, n);
                narrow(h_out + off, f + off, n);
                for (size_t i = 0; i < MAX; i++) {
                    int      inside = i >= off && i < off + n;
                    uint32_t wf = inside ? ref_widen(d, h[i]) : 0xa5a5a5a5u;
                    uint16_t wh = inside ? ref_narrow(d, f[i]) : 0xa5a5;
                    if (f_out[i] != wf || h_out[i] != wh) {
                        fail_msg("%s at %s, n=%zu offset=%zu element %zu: widen 0x%08x "
                                 "(want 0x%08x), narrow 0x%04x (want 0x%04x)", agg_dtype_name(d),
                                 agg_isa_name(isa), n, off, i, f_out[i], wf, h_out[i], wh);
                    }
                }
                assert_memory_equal(h, h_copy, sizeof(h));
                assert_memory_equal(f, f_copy, sizeof(f));
            }
        }
    }
}

#if defined(__x86_64__)
/*
 * The vector conversions may not depend on MXCSR: run them with round toward
 * zero, flush-to-zero and denormals-are-zero set (as code built with
 * -ffast-math would leave it) and compare with the scalar results computed
 * under the default. Nothing may fail while MXCSR is changed: an assert
 * would leave it so for every later test.
 */
static void test_convert_mxcsr(void **state)
{
    enum { N = 65536, M = 1u << 20 };
    int       isa  = level_of(state);
    uint16_t *h    = malloc(N * sizeof(*h)), *hw_h = malloc(2 * M * sizeof(*hw_h));
    uint32_t *hw_f = malloc(2 * N * sizeof(*hw_f)), *f = malloc(M * sizeof(*f));
    assert_non_null(h);
    assert_non_null(hw_h);
    assert_non_null(hw_f);
    assert_non_null(f);
    for (uint32_t i = 0; i < N; i++) {
        h[i] = (uint16_t)i;
    }
    for (uint32_t i = 0; i < M; i++) {
        f[i] = narrow_input((uint32_t)(((uint64_t)i * NARROW_INPUTS) / M));
    }
    agg_convert_fn_t w0 = agg_widen_fn_isa(half_dtypes[0], isa);
    agg_convert_fn_t w1 = agg_widen_fn_isa(half_dtypes[1], isa);
    agg_convert_fn_t n0 = agg_narrow_fn_isa(half_dtypes[0], isa);
    agg_convert_fn_t n1 = agg_narrow_fn_isa(half_dtypes[1], isa);
    assert_true(w0 && w1 && n0 && n1);

    unsigned csr = _mm_getcsr();
    _mm_setcsr((csr & ~0x6000u) | 0x6000u | 0x8040u); /* RC = toward zero, FTZ, DAZ */
    w0(hw_f, h, N);
    w1(hw_f + N, h, N);
    n0(hw_h, f, M);
    n1(hw_h + M, f, M);
    _mm_setcsr(csr);

    for (size_t t = 0; t < 2; t++) {
        for (uint32_t i = 0; i < N; i++) {
            if (hw_f[t * N + i] != ref_widen(half_dtypes[t], h[i])) {
                fail_msg("%s widen at %s under MXCSR 0x%x: 0x%04x gave 0x%08x, want 0x%08x",
                         agg_dtype_name(half_dtypes[t]), agg_isa_name(isa), csr | 0xe040u, h[i],
                         hw_f[t * N + i], ref_widen(half_dtypes[t], h[i]));
            }
        }
        for (uint32_t i = 0; i < M; i++) {
            if (hw_h[t * M + i] != ref_narrow(half_dtypes[t], f[i])) {
                fail_msg("%s narrow at %s under MXCSR 0x%x: 0x%08x gave 0x%04x, want 0x%04x",
                         agg_dtype_name(half_dtypes[t]), agg_isa_name(isa), csr | 0xe040u, f[i],
                         hw_h[t * M + i], ref_narrow(half_dtypes[t], f[i]));
            }
        }
    }
    free(f);
    free(hw_f);
    free(hw_h);
    free(h);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_pinned),
        cmocka_unit_test(test_bf16_pinned),
        cmocka_unit_test(test_nan_bits_pinned),
        cmocka_unit_test(test_half_exhaustive),
        cmocka_unit_test(test_bf16_exhaustive),
#ifdef __FLT16_MANT_DIG__
        cmocka_unit_test(test_half_vs_compiler),
#endif
        LEVEL_TESTS(test_widen_every_pattern),
        LEVEL_TESTS(test_narrow_float_patterns),
        LEVEL_TESTS(test_convert_tails),
#if defined(__x86_64__)
        LEVEL_TESTS(test_convert_mxcsr),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
