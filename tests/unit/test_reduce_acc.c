/*
 * float32 accumulation of float16/bfloat16 (agg_reduce_acc_fn), agg_reduce_fn's
 * 16-bit kernels, and the lookups around them (widen/narrow copies for the
 * other dtypes, the _isa forms, NULL where nothing fits), at every
 * instruction-set level. The reference is one float operation per element on
 * operands widened by the scalar conversions, with the engine's documented
 * NaN rule for min/max; it shares no code with the vector kernels.
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

static const int half_dtypes[] = { AGG_DTYPE_FLOAT16, AGG_DTYPE_BFLOAT16 };
static const int arith_ops[]   = { AGG_OP_SUM, AGG_OP_PROD, AGG_OP_MIN, AGG_OP_MAX };

static float widen1(int dtype, uint16_t h)
{
    return dtype == AGG_DTYPE_FLOAT16 ? agg_half_to_float(h) : agg_bf16_to_float(h);
}

static uint16_t narrow1(int dtype, float f)
{
    return dtype == AGG_DTYPE_FLOAT16 ? agg_float_to_half(f) : agg_float_to_bf16(f);
}

/* a OP b in float; min/max: a when a is smaller or NaN, otherwise b. */
static float ref_op(int op, float a, float b)
{
    switch (op) {
    case AGG_OP_SUM:  return a + b;
    case AGG_OP_PROD: return a * b;
    case AGG_OP_MIN:  return (isnan(a) || a < b) ? a : b;
    case AGG_OP_MAX:  return (isnan(a) || a > b) ? a : b;
    }
    fail_msg("no reference for op %d", op);
    return 0;
}

/*
 * Bit-exact, except that a sum or product that is NaN may be any NaN: which
 * operand's payload survives is up to the compiler's operand order.
 */
static int same_bits(int op, uint32_t got, uint32_t want, int got_nan, int want_nan)
{
    return got == want || ((op == AGG_OP_SUM || op == AGG_OP_PROD) && got_nan && want_nan);
}

static int half_is_nan(int dtype, uint16_t h)
{
    return isnan(widen1(dtype, h));
}

/* Accumulator values: widened 16-bit ones (ties, NaN payloads), any bits, specials. */
static uint32_t random_acc(int dtype)
{
    static const uint32_t specials[] = { 0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                         0x7f800001u, 0x00000001u, 0x3f800000u, 0x7f7fffffu };
    uint64_t r = rng_next();
    switch (r & 3) {
    case 0:  return specials[(r >> 8) % (sizeof(specials) / sizeof(specials[0]))];
    case 1:  return (uint32_t)(r >> 32);
    default: return f32_bits(widen1(dtype, (uint16_t)(r >> 16)));
    }
}

#define PAD 20 /* room for a start 0..3 elements in, and a guard after */

/* One acc call of n elements starting `off` in, checked element by element. */
static void check_acc(int dtype, int op, int isa, agg_reduce_fn_t fn, uint32_t *inout,
                      uint16_t *in, size_t n, size_t off)
{
    size_t    total  = n + PAD;
    uint32_t *before = malloc(total * sizeof(*before));
    uint16_t *in_cp  = malloc(total * sizeof(*in_cp));
    assert_non_null(before);
    assert_non_null(in_cp);
    memcpy(before, inout, total * sizeof(*inout));
    memcpy(in_cp, in, total * sizeof(*in));

    fn(inout + off, in + off, n);

    for (size_t i = 0; i < total; i++) {
        uint32_t want = before[i];
        if (i >= off && i < off + n) {
            want = f32_bits(ref_op(op, bits_f32(before[i]), widen1(dtype, in[i])));
        }
        if (!same_bits(op, inout[i], want, isnan(bits_f32(inout[i])), isnan(bits_f32(want)))) {
            fail_msg("%s %s acc at %s, n=%zu offset=%zu element %zu: 0x%08x OP 0x%04x gave "
                     "0x%08x, want 0x%08x", agg_dtype_name(dtype), agg_op_name(op),
                     agg_isa_name(isa), n, off, i, before[i], in[i], inout[i], want);
        }
    }
    assert_memory_equal(in, in_cp, total * sizeof(*in));
    free(in_cp);
    free(before);
}

static void test_acc_kernels(void **state)
{
    static const size_t counts[] = { 0, 1, 7, 15, 16, 17, 31, 33, 1023, 2048, 4099 };
    enum { N = 65536 };
    int       isa   = level_of(state);
    uint32_t *inout = malloc((N + PAD) * sizeof(*inout));
    uint16_t *in    = malloc((N + PAD) * sizeof(*in));
    assert_non_null(inout);
    assert_non_null(in);

    for (size_t t = 0; t < 2; t++) {
        for (size_t o = 0; o < 4; o++) {
            int             d = half_dtypes[t], op = arith_ops[o];
            agg_reduce_fn_t fn = agg_reduce_acc_fn_isa(d, op, isa);
            assert_non_null(fn);
            rng_state = 0xacc0 + (uint64_t)(isa * 64 + d * 8 + op);

            /* Every 16-bit pattern as `in`, against random accumulators... */
            for (size_t i = 0; i < N + PAD; i++) {
                inout[i] = random_acc(d);
                in[i]    = (uint16_t)(i - 1);
            }
            check_acc(d, op, isa, fn, inout, in, N, 1);
            /* ...and against its own widened value: ties, NaN against the same NaN. */
            for (size_t i = 0; i < N + PAD; i++) {
                inout[i] = f32_bits(widen1(d, in[i]));
            }
            check_acc(d, op, isa, fn, inout, in, N, 1);

            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                for (size_t off = 0; off < 4; off++) {
                    for (size_t i = 0; i < counts[c] + PAD; i++) {
                        inout[i] = random_acc(d);
                        in[i]    = (uint16_t)rng_next();
                    }
                    check_acc(d, op, isa, fn, inout, in, counts[c], off);
                }
            }
        }
    }
    free(in);
    free(inout);
}

/*
 * agg_reduce_fn's 16-bit in, 16-bit out kernels at this level: every pattern
 * of inout against random and shifted patterns of in, odd counts, unaligned
 * starts, against narrow(widen(a) OP widen(b)).
 */
static void test_reduce16_kernels(void **state)
{
    enum { N = 65536 };
    int       isa   = level_of(state);
    uint16_t *inout = malloc((N + PAD) * sizeof(*inout)), *before = malloc((N + PAD) * 2);
    uint16_t *in    = malloc((N + PAD) * sizeof(*in));
    assert_non_null(inout);
    assert_non_null(before);
    assert_non_null(in);

    for (size_t t = 0; t < 2; t++) {
        for (size_t o = 0; o < 4; o++) {
            int             d = half_dtypes[t], op = arith_ops[o];
            agg_reduce_fn_t fn = agg_reduce_fn_isa(d, op, isa);
            assert_non_null(fn);
            rng_state = 0x1600 + (uint64_t)(isa * 64 + d * 8 + op);
            for (int round = 0; round < 6; round++) {
                size_t n = round < 3 ? N : (size_t)(rng_next() % 2000), off = (size_t)round % 4;
                for (size_t i = 0; i < N + PAD; i++) {
                    inout[i] = (uint16_t)(i + (size_t)round);
                    in[i]    = round == 1 ? (uint16_t)(i * 7919u) : (uint16_t)rng_next();
                }
                memcpy(before, inout, (N + PAD) * sizeof(*inout));
                fn(inout + off, in + off, n);
                for (size_t i = 0; i < n + PAD; i++) {
                    uint16_t want = before[i];
                    if (i >= off && i < off + n) {
                        want = narrow1(d, ref_op(op, widen1(d, before[i]), widen1(d, in[i])));
                    }
                    if (!same_bits(op, inout[i], want, half_is_nan(d, inout[i]),
                                   half_is_nan(d, want))) {
                        fail_msg("%s %s at %s, n=%zu offset=%zu element %zu: 0x%04x OP 0x%04x "
                                 "gave 0x%04x, want 0x%04x", agg_dtype_name(d), agg_op_name(op),
                                 agg_isa_name(isa), n, off, i, before[i], in[i], inout[i], want);
                    }
                }
            }
        }
    }
    free(in);
    free(before);
    free(inout);
}

/*
 * Why a node accumulates in float32: 2048 + 1 + 1 + 1 + 1 in float16 rounds
 * back to 2048 at every step (2049 is a tie, to even), while the float32
 * accumulator reaches 2052 and rounds once. bfloat16 the same at 256.
 */
static void test_acc_rounds_once(void **state)
{
    (void)state;
    static const uint16_t start[] = { 0x6800, 0x4380 }, one[] = { 0x3c00, 0x3f80 };
    static const uint16_t want16[] = { 0x6800, 0x4380 }, want_acc[] = { 0x6802, 0x4382 };

    for (size_t t = 0; t < 2; t++) {
        int             d = half_dtypes[t];
        agg_reduce_fn_t red = agg_reduce_fn(d, AGG_OP_SUM), acc = agg_reduce_acc_fn(d, AGG_OP_SUM);
        agg_convert_fn_t widen = agg_widen_fn(d), narrow = agg_narrow_fn(d);
        assert_true(red && acc && widen && narrow);

        uint16_t v16 = start[t], result;
        float    v32;
        widen(&v32, &start[t], 1);
        for (int i = 0; i < 4; i++) {
            red(&v16, &one[t], 1);
            acc(&v32, &one[t], 1);
        }
        narrow(&result, &v32, 1);
        assert_int_equal(v16, want16[t]);
        assert_true(v32 == (t == 0 ? 2052.0f : 260.0f));
        assert_int_equal(result, want_acc[t]);
    }
}

/* Dtypes accumulated in themselves: widen and narrow copy exactly count elements. */
static void check_copy(int dtype, agg_convert_fn_t fn)
{
    static const size_t counts[] = { 0, 1, 7, 33 };
    size_t              size = agg_dtype_size(dtype);
    unsigned char       in[40 * 16], out[40 * 16];

    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        for (size_t i = 0; i < sizeof(in); i++) {
            in[i] = (unsigned char)rng_next();
        }
        memset(out, 0xa5, sizeof(out));
        fn(out, in, counts[c]);
        assert_memory_equal(out, in, counts[c] * size);
        for (size_t i = counts[c] * size; i < sizeof(out); i++) {
            assert_int_equal(out[i], 0xa5);
        }
    }
}

static void test_lookups(void **state)
{
    (void)state;
    int best = agg_isa_best();

    assert_true(agg_isa_supported(AGG_ISA_SCALAR));
    assert_true(agg_isa_supported(best));
    for (int isa = best + 1; isa < AGG_ISA__COUNT; isa++) {
        assert_false(agg_isa_supported(isa)); /* best is the widest */
    }
    print_message("widest level here: %s\n", agg_isa_name(best));
#if defined(__x86_64__) && defined(__GNUC__)
    /* The probe against the compiler's own view of this CPU. */
    __builtin_cpu_init();
    assert_int_equal(agg_isa_supported(AGG_ISA_AVX512), __builtin_cpu_supports("avx512f") &&
                     __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"));
#endif
    assert_string_equal(agg_isa_name(AGG_ISA_SCALAR), "scalar");
    assert_string_equal(agg_isa_name(AGG_ISA_AVX2_F16C), "avx2_f16c");
    assert_string_equal(agg_isa_name(AGG_ISA_AVX512), "avx512");

    rng_state = 0x100c;
    for (int d = 0; d < AGG_DTYPE__COUNT; d++) {
        int half = d == AGG_DTYPE_FLOAT16 || d == AGG_DTYPE_BFLOAT16;
        assert_non_null(agg_widen_fn(d));
        assert_non_null(agg_narrow_fn(d));
        assert_ptr_equal(agg_widen_fn(d), agg_widen_fn_isa(d, best));
        assert_ptr_equal(agg_narrow_fn(d), agg_narrow_fn_isa(d, best));
        if (!half) {
            check_copy(d, agg_widen_fn(d));
            check_copy(d, agg_narrow_fn(d));
        }
        for (int op = -1; op <= AGG_OP__COUNT; op++) {
            agg_reduce_fn_t red = agg_reduce_fn(d, op), acc = agg_reduce_acc_fn(d, op);
            assert_ptr_equal(acc, agg_reduce_acc_fn_isa(d, op, best));
            assert_ptr_equal(red, agg_reduce_fn_isa(d, op, best));
            if (half) {
                assert_int_equal(acc != NULL, red != NULL);
            } else {
                assert_ptr_equal(acc, red); /* the dtype is its own accumulator */
            }
            for (int isa = 0; isa < AGG_ISA__COUNT; isa++) {
                if (!agg_isa_supported(isa)) {
                    continue;
                }
                assert_int_equal(agg_reduce_acc_fn_isa(d, op, isa) != NULL, red != NULL);
                assert_int_equal(agg_reduce_fn_isa(d, op, isa) != NULL, red != NULL);
                if (!half) {
                    assert_ptr_equal(agg_reduce_fn_isa(d, op, isa), red);
                    assert_ptr_equal(agg_widen_fn_isa(d, isa), agg_widen_fn(d));
                }
            }
        }
    }

    /* Nothing for values out of range, bitwise ops on 16-bit floats, or MINLOC. */
    static const int bad[] = { -1, INT_MIN, INT_MAX, AGG_DTYPE__COUNT };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(agg_widen_fn(bad[i]));
        assert_null(agg_narrow_fn(bad[i]));
        assert_null(agg_reduce_acc_fn(bad[i], AGG_OP_SUM));
        assert_null(agg_reduce_acc_fn(AGG_DTYPE_FLOAT16, bad[i]));
        assert_null(agg_widen_fn_isa(AGG_DTYPE_FLOAT16, bad[i]));
        assert_null(agg_narrow_fn_isa(AGG_DTYPE_INT32, bad[i]));
        assert_null(agg_reduce_acc_fn_isa(AGG_DTYPE_FLOAT16, AGG_OP_SUM, bad[i]));
        assert_null(agg_reduce_fn_isa(AGG_DTYPE_INT32, AGG_OP_SUM, bad[i]));
        assert_false(agg_isa_supported(bad[i]));
        assert_string_equal(agg_isa_name(bad[i]), "unknown");
    }
    for (size_t t = 0; t < 2; t++) {
        static const int none[] = { AGG_OP_LAND, AGG_OP_BAND, AGG_OP_LOR, AGG_OP_BOR,
                                    AGG_OP_LXOR, AGG_OP_BXOR, AGG_OP_MINLOC, AGG_OP_MAXLOC };
        for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
            for (int isa = 0; isa < AGG_ISA__COUNT; isa++) {
                assert_null(agg_reduce_acc_fn_isa(half_dtypes[t], none[i], isa));
                assert_null(agg_reduce_fn_isa(half_dtypes[t], none[i], isa));
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_acc_rounds_once),
        LEVEL_TESTS(test_acc_kernels),
        LEVEL_TESTS(test_reduce16_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
