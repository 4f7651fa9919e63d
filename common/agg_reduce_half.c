/*
 * float16 and bfloat16: the scalar conversions, and the kernels that use them
 * (widen to float32, narrow back, reduce into a float32 accumulator, and
 * agg_reduce_fn's 16-bit in, 16-bit out kernels), once per instruction-set
 * level.
 *
 * Why levels chosen at lookup time rather than target_clones like
 * agg_reduce.c: the scalar conversions are branchy bit manipulation that no
 * compiler vectorises, while F16C / AVX-512 convert 8 or 16 elements per
 * instruction, so the vector kernels are written with intrinsics inside
 * functions carrying a target attribute. Picking the level in the lookup
 * (through __builtin_cpu_supports, probed once) instead of an ifunc keeps
 * them in the clang, ASan and TSan builds too, where ifunc resolvers are not
 * usable; and it lets the tests pin each level and compare it with the scalar
 * code on one machine.
 *
 * Every level must give the same bits as the scalar code for every input:
 * - vcvtps2ph with an explicit round-to-nearest-even immediate already does
 *   (NaN: quiet bit forced, top payload bits kept; overflow to Inf; half
 *   subnormals), whatever the MXCSR rounding mode and DAZ/FTZ bits, which it
 *   ignores or which cannot change a result (a float subnormal narrows to
 *   +-0 either way). tests/unit/test_reduce_half.c checks this on the
 *   machine, under a changed MXCSR too.
 * - vcvtph2ps quiets signalling NaNs, where the scalar code keeps the
 *   payload as it is; the load helpers below clear the quiet bit again.
 *   Half subnormals widen exactly (DAZ does not apply to them).
 * - bf16 is done with integer operations: vcvtneps2bf16 (AVX512_BF16) would
 *   flush float subnormals to zero.
 */
#include "agg/reduce.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) /* gcc and clang */
#define AGG__X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define AGG__X86 0
#endif

/* ---- scalar conversions ----------------------------------------------- */

/* memcpy is the defined way to look at the bits; it compiles to a move. */
static inline uint32_t agg__float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float agg__bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline float agg__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp  = (h >> 10) & 0x1fu;
    uint32_t man  = h & 0x3ffu;

    if (exp == 0x1f) {
        /* Inf, or NaN keeping its payload (and so its quiet bit). */
        return agg__bits_float(sign | 0x7f800000u | (man << 13));
    }
    if (exp == 0) {
        /* Zero or subnormal: man * 2^-24 is exact in float. */
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    /* Normal: rebias the exponent from 15 to 127. */
    return agg__bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t agg__float_to_half(float f)
{
    uint32_t x    = agg__float_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax   = x & 0x7fffffffu;

    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) {
            return sign | 0x7c00u;
        }
        /*
         * NaN: keep the top payload bits and force the quiet bit, otherwise a
         * payload living only in the low 13 bits would turn into infinity.
         */
        return sign | 0x7e00u | (uint16_t)((ax >> 13) & 0x3ffu);
    }
    if (ax >= 0x477ff000u) {
        /* >= 65520, the midpoint between 65504 (odd) and 2^16: Inf. */
        return sign | 0x7c00u;
    }
    if (ax >= 0x38800000u) {
        /*
         * Normal half (>= 2^-14). Rebias, then round away the low 13 bits to
         * nearest even; a carry out of the mantissa correctly bumps the
         * exponent, and the check above keeps it below Inf.
         */
        uint32_t m = ax - (112u << 23);
        m += 0x0fffu + ((m >> 13) & 1u);
        return sign | (uint16_t)(m >> 13);
    }
    if (ax <= 0x33000000u) {
        /* <= 2^-25, at most half the smallest subnormal: ties to even 0. */
        return sign;
    }
    /*
     * Subnormal half: the result is the value in units of 2^-24. Float
     * exponents 102..112 give shifts of 24..14 of the 24-bit significand.
     * Rounding 0x3ff up to 0x400 yields the smallest normal, as it should.
     */
    uint32_t exp   = ax >> 23;
    uint32_t man   = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;
    uint32_t r     = man >> shift;
    uint32_t rem   = man & ((1u << shift) - 1u);
    uint32_t mid   = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (r & 1u))) {
        r++;
    }
    return sign | (uint16_t)r;
}

static inline float agg__bf16_to_float(uint16_t b)
{
    return agg__bits_float((uint32_t)b << 16);
}

static inline uint16_t agg__float_to_bf16(float f)
{
    uint32_t x = agg__float_bits(f);

    if ((x & 0x7fffffffu) > 0x7f800000u) {
        /* NaN: truncating could clear every payload bit and give Inf. */
        return (uint16_t)((x >> 16) | 0x0040u);
    }
    /*
     * Same exponent range as float, so rounding the low 16 bits to nearest
     * even covers subnormals too, and overflow carries into Inf by itself.
     */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float agg_half_to_float(uint16_t h)
{
    return agg__half_to_float(h);
}

uint16_t agg_float_to_half(float f)
{
    return agg__float_to_half(f);
}

float agg_bf16_to_float(uint16_t b)
{
    return agg__bf16_to_float(b);
}

uint16_t agg_float_to_bf16(float f)
{
    return agg__float_to_bf16(f);
}

/* ---- kernel shapes, written once for every level ---------------------- */

/*
 * Floating point min/max propagate NaN, as in agg_reduce.c: "a < b ||
 * isnan(a)" picks a when a is smaller or NaN, otherwise b, which is NaN
 * whenever b is. The vector levels make the same choice lane by lane.
 */
#define AGG__FMIN(_a, _b) (((_a) < (_b) || isnan(_a)) ? (_a) : (_b))
#define AGG__FMAX(_a, _b) (((_a) > (_b) || isnan(_a)) ? (_a) : (_b))

/*
 * A level _lv provides AGG__ATTR_<_lv> (its target attribute), AGG__W_<_lv>
 * (floats per vector) and, on that vector: agg__<_lv>_loadf/_storef for
 * float32 elements, agg__<_lv>_load_<t>/_store_<t> widening and narrowing
 * 16-bit ones (t = f16, bf16), agg__<_lv>_loadq_<t>, and
 * agg__<_lv>_sum/_prod/_min/_max.
 *
 * loadq_<t> may return a signalling NaN quieted. Sums and products quiet it
 * anyway (x86 returns the NaN operand, quieted, the same for either input)
 * and narrowing forces the quiet bit, so only widen and the acc min/max,
 * which hand a widened value on as it is, need the exact load_<t>. For f16
 * that saves the re-signalling fix-up, a third of the acc sum's time on
 * data in L1.
 */
#define AGG__W(_lv)      AGG__W_##_lv
#define AGG__FN(_lv, _f) agg__##_lv##_##_f

/*
 * Every kernel is this loop around one step of W elements: o is out or
 * inout (of type _To), in is in (_Ti). The last count % W elements go through
 * zero-padded copies on the stack, so no level touches a byte past the end
 * of a buffer.
 */
#define AGG__LOOP(_name, _lv, _To, _Ti, _step, _t, _op)                       \
    AGG__ATTR_##_lv static void _name(void *restrict o_v,                     \
                                      const void *restrict in_v, size_t count) \
    {                                                                         \
        _To *restrict       o  = o_v;                                         \
        const _Ti *restrict in = in_v;                                        \
        size_t              i  = 0;                                           \
        for (; i + AGG__W(_lv) <= count; i += AGG__W(_lv)) {                  \
            _step(_lv, _t, _op, o + i, in + i);                               \
        }                                                                     \
        if (i < count) {                                                      \
            _To a[AGG__W(_lv)] = { 0 };                                       \
            _Ti b[AGG__W(_lv)] = { 0 };                                       \
            memcpy(a, o + i, (count - i) * sizeof(*o));                       \
            memcpy(b, in + i, (count - i) * sizeof(*in));                     \
            _step(_lv, _t, _op, a, b);                                        \
            memcpy(o + i, a, (count - i) * sizeof(*o));                       \
        }                                                                     \
    }

/* out = widen(in); out = narrow(in). */
#define AGG__WIDEN(_lv, _t, _op, _o, _in)                                     \
    AGG__FN(_lv, storef)(_o, AGG__FN(_lv, load_##_t)(_in))
#define AGG__NARROW(_lv, _t, _op, _o, _in)                                    \
    AGG__FN(_lv, store_##_t)(_o, AGG__FN(_lv, loadf)(_in))
/* inout (float32) = inout OP widen(in): sum/prod may quiet, min/max may not. */
#define AGG__ACCQ(_lv, _t, _op, _o, _in)                                      \
    AGG__FN(_lv, storef)(_o, AGG__FN(_lv, _op)(AGG__FN(_lv, loadf)(_o),      \
                                               AGG__FN(_lv, loadq_##_t)(_in)))
#define AGG__ACCX(_lv, _t, _op, _o, _in)                                      \
    AGG__FN(_lv, storef)(_o, AGG__FN(_lv, _op)(AGG__FN(_lv, loadf)(_o),      \
                                               AGG__FN(_lv, load_##_t)(_in)))
/* inout (16-bit) = narrow(widen(inout) OP widen(in)): agg_reduce_fn's kernels. */
#define AGG__RED16(_lv, _t, _op, _o, _in)                                     \
    AGG__FN(_lv, store_##_t)(_o, AGG__FN(_lv, _op)(AGG__FN(_lv, loadq_##_t)(_o), \
                                                   AGG__FN(_lv, loadq_##_t)(_in)))

#define AGG__TYPE_KERNELS(_lv, _t)                                                     \
    AGG__LOOP(agg__widen_##_t##_##_lv, _lv, float, uint16_t, AGG__WIDEN, _t, -)        \
    AGG__LOOP(agg__narrow_##_t##_##_lv, _lv, uint16_t, float, AGG__NARROW, _t, -)      \
    AGG__LOOP(agg__acc_##_t##_sum_##_lv, _lv, float, uint16_t, AGG__ACCQ, _t, sum)     \
    AGG__LOOP(agg__acc_##_t##_prod_##_lv, _lv, float, uint16_t, AGG__ACCQ, _t, prod)   \
    AGG__LOOP(agg__acc_##_t##_min_##_lv, _lv, float, uint16_t, AGG__ACCX, _t, min)     \
    AGG__LOOP(agg__acc_##_t##_max_##_lv, _lv, float, uint16_t, AGG__ACCX, _t, max)     \
    AGG__LOOP(agg__reduce_##_t##_sum_##_lv, _lv, uint16_t, uint16_t, AGG__RED16, _t, sum)   \
    AGG__LOOP(agg__reduce_##_t##_prod_##_lv, _lv, uint16_t, uint16_t, AGG__RED16, _t, prod) \
    AGG__LOOP(agg__reduce_##_t##_min_##_lv, _lv, uint16_t, uint16_t, AGG__RED16, _t, min)   \
    AGG__LOOP(agg__reduce_##_t##_max_##_lv, _lv, uint16_t, uint16_t, AGG__RED16, _t, max)

#define AGG__LEVEL_KERNELS(_lv) AGG__TYPE_KERNELS(_lv, f16) AGG__TYPE_KERNELS(_lv, bf16)

/* ---- scalar level ----------------------------------------------------- */

#define AGG__ATTR_scalar
#define AGG__W_scalar 1

static inline float agg__scalar_loadf(const float *p) { return *p; }
static inline void  agg__scalar_storef(float *p, float v) { *p = v; }
static inline float agg__scalar_load_f16(const uint16_t *p) { return agg__half_to_float(*p); }
static inline void  agg__scalar_store_f16(uint16_t *p, float v) { *p = agg__float_to_half(v); }
static inline float agg__scalar_load_bf16(const uint16_t *p) { return agg__bf16_to_float(*p); }
static inline void  agg__scalar_store_bf16(uint16_t *p, float v) { *p = agg__float_to_bf16(v); }
static inline float agg__scalar_sum(float a, float b) { return a + b; }
static inline float agg__scalar_prod(float a, float b) { return a * b; }
static inline float agg__scalar_min(float a, float b) { return AGG__FMIN(a, b); }
static inline float agg__scalar_max(float a, float b) { return AGG__FMAX(a, b); }
#define agg__scalar_loadq_f16  agg__scalar_load_f16 /* exact anyway */
#define agg__scalar_loadq_bf16 agg__scalar_load_bf16

AGG__LEVEL_KERNELS(scalar)

#if AGG__X86
/* ---- AVX2 + F16C level: 8 floats ------------------------------------- */

#define AGG__ATTR_avx2 __attribute__((target("avx2,f16c")))
#define AGG__W_avx2 8

AGG__ATTR_avx2 static inline __m256 agg__avx2_loadf(const float *p)
{
    return _mm256_loadu_ps(p);
}

AGG__ATTR_avx2 static inline void agg__avx2_storef(float *p, __m256 v)
{
    _mm256_storeu_ps(p, v);
}

AGG__ATTR_avx2 static inline __m256 agg__avx2_load_f16(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    /* Lanes that were Inf or a signalling NaN: take back the quiet bit. */
    __m128i s = _mm_cmpeq_epi16(_mm_and_si128(h, _mm_set1_epi16(0x7e00)),
                                _mm_set1_epi16(0x7c00));
    __m256i q = _mm256_and_si256(_mm256_cvtepi16_epi32(s), _mm256_set1_epi32(0x00400000));
    return _mm256_andnot_ps(_mm256_castsi256_ps(q), _mm256_cvtph_ps(h));
}

AGG__ATTR_avx2 static inline __m256 agg__avx2_loadq_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

AGG__ATTR_avx2 static inline void agg__avx2_store_f16(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

AGG__ATTR_avx2 static inline __m256 agg__avx2_load_bf16(const uint16_t *p)
{
    __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}

#define agg__avx2_loadq_bf16 agg__avx2_load_bf16 /* exact anyway */

/*
 * agg__float_to_bf16 lane by lane: round the low half away to nearest even,
 * or, for NaN, set the quiet bit; the results fit 16 bits, so packus is exact.
 */
AGG__ATTR_avx2 static inline void agg__avx2_store_bf16(uint16_t *p, __m256 v)
{
    __m256i x   = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i t   = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
    __m256  nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);

    t = _mm256_blendv_epi8(t, _mm256_or_si256(x, _mm256_set1_epi32(0x00400000)),
                           _mm256_castps_si256(nan));
    t = _mm256_srli_epi32(t, 16);
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(t),
                                                    _mm256_extracti128_si256(t, 1)));
}

AGG__ATTR_avx2 static inline __m256 agg__avx2_sum(__m256 a, __m256 b)
{
    return _mm256_add_ps(a, b);
}

AGG__ATTR_avx2 static inline __m256 agg__avx2_prod(__m256 a, __m256 b)
{
    return _mm256_mul_ps(a, b);
}

AGG__ATTR_avx2 static inline __m256 agg__avx2_min(__m256 a, __m256 b)
{
    __m256 take_a = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ),
                                 _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, take_a);
}

AGG__ATTR_avx2 static inline __m256 agg__avx2_max(__m256 a, __m256 b)
{
    __m256 take_a = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ),
                                 _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, take_a);
}

AGG__LEVEL_KERNELS(avx2)

/* ---- AVX-512 level: 16 floats ---------------------------------------- */

#define AGG__ATTR_avx512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define AGG__W_avx512 16

AGG__ATTR_avx512 static inline __m512 agg__avx512_loadf(const float *p)
{
    return _mm512_loadu_ps(p);
}

AGG__ATTR_avx512 static inline void agg__avx512_storef(float *p, __m512 v)
{
    _mm512_storeu_ps(p, v);
}

AGG__ATTR_avx512 static inline __m512 agg__avx512_load_f16(const uint16_t *p)
{
    __m256i   h = _mm256_loadu_si256((const __m256i *)p);
    /* Lanes that were Inf or a signalling NaN: take back the quiet bit. */
    __mmask16 s = _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7e00)),
                                          _mm256_set1_epi16(0x7c00));
    __m512i   f = _mm512_castps_si512(_mm512_cvtph_ps(h));
    f = _mm512_mask_andnot_epi32(f, s, _mm512_set1_epi32(0x00400000), f);
    return _mm512_castsi512_ps(f);
}

AGG__ATTR_avx512 static inline __m512 agg__avx512_loadq_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

AGG__ATTR_avx512 static inline void agg__avx512_store_f16(uint16_t *p, __m512 v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

AGG__ATTR_avx512 static inline __m512 agg__avx512_load_bf16(const uint16_t *p)
{
    __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
}

#define agg__avx512_loadq_bf16 agg__avx512_load_bf16 /* exact anyway */

/*
 * agg__float_to_bf16 lane by lane. Adding 0x8000 where bit 16 is set and
 * 0x7fff elsewhere is the round-to-nearest-even step; NaN lanes get the
 * quiet bit instead; vpermw then gathers the high halves. Fewer operations
 * than the scalar formula written out (and than vpmovdw, slow on Zen 4).
 */
AGG__ATTR_avx512 static inline void agg__avx512_store_bf16(uint16_t *p, __m512 v)
{
    const __m512i hi_words = _mm512_set_epi16(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5,
                                              3, 1, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11,
                                              9, 7, 5, 3, 1);
    __m512i   x   = _mm512_castps_si512(v);
    __mmask16 odd = _mm512_test_epi32_mask(x, _mm512_set1_epi32(0x10000));
    __m512i   t   = _mm512_add_epi32(x, _mm512_mask_blend_epi32(odd, _mm512_set1_epi32(0x7fff),
                                                                _mm512_set1_epi32(0x8000)));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);

    t = _mm512_mask_or_epi32(t, nan, x, _mm512_set1_epi32(0x00400000));
    t = _mm512_permutexvar_epi16(hi_words, t);
    _mm256_storeu_si256((__m256i *)p, _mm512_castsi512_si256(t));
}

AGG__ATTR_avx512 static inline __m512 agg__avx512_sum(__m512 a, __m512 b)
{
    return _mm512_add_ps(a, b);
}

AGG__ATTR_avx512 static inline __m512 agg__avx512_prod(__m512 a, __m512 b)
{
    return _mm512_mul_ps(a, b);
}

AGG__ATTR_avx512 static inline __m512 agg__avx512_min(__m512 a, __m512 b)
{
    __mmask16 take_a = _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) |
                       _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(take_a, b, a);
}

AGG__ATTR_avx512 static inline __m512 agg__avx512_max(__m512 a, __m512 b)
{
    __mmask16 take_a = _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) |
                       _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(take_a, b, a);
}

AGG__LEVEL_KERNELS(avx512)
#endif /* AGG__X86 */

/* ---- copies, for dtypes accumulated in themselves --------------------- */

#define AGG__COPY(_n)                                                         \
    static void agg__copy_##_n(void *restrict out, const void *restrict in,   \
                               size_t count)                                  \
    {                                                                         \
        memcpy(out, in, count * (_n));                                        \
    }

AGG__COPY(1)
AGG__COPY(2)
AGG__COPY(4)
AGG__COPY(8)
AGG__COPY(16)

static agg_convert_fn_t agg__copy_fn(int dtype)
{
    switch (agg_dtype_size(dtype)) {
    case 1:  return agg__copy_1;
    case 2:  return agg__copy_2;
    case 4:  return agg__copy_4;
    case 8:  return agg__copy_8;
    case 16: return agg__copy_16;
    default: return NULL; /* out of range */
    }
}

/* ---- levels and lookups ----------------------------------------------- */

enum { AGG__F16 = 0, AGG__BF16 = 1 };

typedef struct agg__half_level {
    agg_convert_fn_t widen[2];                 /* by AGG__F16 / AGG__BF16 */
    agg_convert_fn_t narrow[2];
    agg_reduce_fn_t  acc[2][AGG_OP__COUNT];    /* NULL: op not supported */
    agg_reduce_fn_t  reduce[2][AGG_OP__COUNT];
} agg__half_level_t;

#define AGG__OPS(_kind, _t, _lv)                                              \
    {                                                                         \
        [AGG_OP_SUM]  = agg__##_kind##_##_t##_sum_##_lv,                      \
        [AGG_OP_PROD] = agg__##_kind##_##_t##_prod_##_lv,                     \
        [AGG_OP_MIN]  = agg__##_kind##_##_t##_min_##_lv,                      \
        [AGG_OP_MAX]  = agg__##_kind##_##_t##_max_##_lv,                      \
    }

#define AGG__LEVEL(_lv)                                                       \
    {                                                                         \
        .widen  = { agg__widen_f16_##_lv, agg__widen_bf16_##_lv },            \
        .narrow = { agg__narrow_f16_##_lv, agg__narrow_bf16_##_lv },          \
        .acc    = { AGG__OPS(acc, f16, _lv), AGG__OPS(acc, bf16, _lv) },      \
        .reduce = { AGG__OPS(reduce, f16, _lv), AGG__OPS(reduce, bf16, _lv) },\
    }

/* Levels this build has no code for stay all NULL; agg_isa_supported says 0. */
static const agg__half_level_t agg__levels[AGG_ISA__COUNT] = {
    [AGG_ISA_SCALAR] = AGG__LEVEL(scalar),
#if AGG__X86
    [AGG_ISA_AVX2_F16C] = AGG__LEVEL(avx2),
    [AGG_ISA_AVX512]    = AGG__LEVEL(avx512),
#endif
};

static const char *const agg__isa_names[] = {
    [AGG_ISA_SCALAR]    = "scalar",
    [AGG_ISA_AVX2_F16C] = "avx2_f16c",
    [AGG_ISA_AVX512]    = "avx512",
};
_Static_assert(sizeof(agg__isa_names) / sizeof(agg__isa_names[0]) == AGG_ISA__COUNT,
               "agg__isa_names needs one row per agg_isa_t");

/* Bit per level this build and CPU run. */
static unsigned agg__isa_probe(void)
{
    unsigned mask = 1u << AGG_ISA_SCALAR;
#if AGG__X86
    unsigned eax, ebx, ecx, edx;

    /* The cpu_supports checks include the OS saving the vector registers. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
        (ecx & bit_F16C)) {
        mask |= 1u << AGG_ISA_AVX2_F16C;
    }
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
        mask |= 1u << AGG_ISA_AVX512;
    }
#endif
    return mask;
}

/*
 * Probed once: agg_reduce_fn is looked up per fragment by switchsim, and
 * cpuid traps to the hypervisor in a VM. Threads racing on the first call
 * compute the same value; the atomic keeps that race defined.
 */
static unsigned agg__isa_mask(void)
{
    static atomic_uint mask; /* 0 until probed; the scalar bit is always set */
    unsigned           m = atomic_load_explicit(&mask, memory_order_relaxed);

    if (m == 0) {
        m = agg__isa_probe();
        atomic_store_explicit(&mask, m, memory_order_relaxed);
    }
    return m;
}

const char *agg_isa_name(int isa)
{
    return isa >= 0 && isa < AGG_ISA__COUNT ? agg__isa_names[isa] : "unknown";
}

int agg_isa_supported(int isa)
{
    return isa >= 0 && isa < AGG_ISA__COUNT && (agg__isa_mask() >> isa) & 1u;
}

int agg_isa_best(void)
{
    int isa = AGG_ISA__COUNT - 1;

    while (!agg_isa_supported(isa)) {
        isa--;
    }
    return isa;
}

/* AGG__F16 / AGG__BF16 for the 16-bit float dtypes, -1 for the others. */
static int agg__half_kind(int dtype)
{
    return dtype == AGG_DTYPE_FLOAT16 ? AGG__F16 : dtype == AGG_DTYPE_BFLOAT16 ? AGG__BF16 : -1;
}

agg_convert_fn_t agg_widen_fn_isa(int dtype, int isa)
{
    int k = agg__half_kind(dtype);

    if (!agg_isa_supported(isa)) {
        return NULL;
    }
    return k >= 0 ? agg__levels[isa].widen[k] : agg__copy_fn(dtype);
}

agg_convert_fn_t agg_narrow_fn_isa(int dtype, int isa)
{
    int k = agg__half_kind(dtype);

    if (!agg_isa_supported(isa)) {
        return NULL;
    }
    return k >= 0 ? agg__levels[isa].narrow[k] : agg__copy_fn(dtype);
}

agg_reduce_fn_t agg_reduce_acc_fn_isa(int dtype, int op, int isa)
{
    int k = agg__half_kind(dtype);

    if (!agg_isa_supported(isa)) {
        return NULL;
    }
    if (k < 0) {
        return agg_reduce_fn(dtype, op);
    }
    return op >= 0 && op < AGG_OP__COUNT ? agg__levels[isa].acc[k][op] : NULL;
}

/*
 * agg_reduce_fn sends float16/bfloat16 here and this sends every other dtype
 * back to its table; neither path comes round again.
 */
agg_reduce_fn_t agg_reduce_fn_isa(int dtype, int op, int isa)
{
    int k = agg__half_kind(dtype);

    if (!agg_isa_supported(isa)) {
        return NULL;
    }
    if (k < 0) {
        return agg_reduce_fn(dtype, op);
    }
    return op >= 0 && op < AGG_OP__COUNT ? agg__levels[isa].reduce[k][op] : NULL;
}

agg_convert_fn_t agg_widen_fn(int dtype)
{
    return agg_widen_fn_isa(dtype, agg_isa_best());
}

agg_convert_fn_t agg_narrow_fn(int dtype)
{
    return agg_narrow_fn_isa(dtype, agg_isa_best());
}

agg_reduce_fn_t agg_reduce_acc_fn(int dtype, int op)
{
    return agg_reduce_acc_fn_isa(dtype, op, agg_isa_best());
}
