/*
 * gpu_kernel_check's inputs and comparisons: random operands for every
 * dtype, weighted towards the values where kernels go wrong (NaN payloads,
 * signed zeros, infinities, subnormals, rounding ties, integer extremes,
 * MINLOC/MAXLOC ties), and the bit-for-bit comparison with its one
 * allowance (see same()).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agg/reduce.h"
#include "gpu_check.h"

uint64_t rng_state = 1;

uint64_t rnd(void) /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* ---- inputs ----------------------------------------------------------- */

static const uint16_t f16_special[] = { 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x7dff,
                                        0xfe01, 0x7bff, 0xfbff, 0x0001, 0x8001, 0x03ff, 0x0400,
                                        0x3c00, 0xbc00, 0x7bfe, 0x0200 };
static const uint16_t bf16_special[] = { 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1,
                                         0x7f7f, 0xff7f, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80,
                                         0xbf80, 0x7fbf };
static const uint32_t f32_special[] = { 0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                        0x7fc00000u, 0x7f800001u, 0x7fa12345u, 0xffc00001u,
                                        0x7f7fffffu, 0xff7fffffu, 0x00800000u, 0x00000001u,
                                        0x807fffffu, 0x3f800000u, 0xbf800000u, 0x477fe000u,
                                        0x477ff000u, 0x33000000u, 0x33000001u };
static const uint64_t f64_special[] = { 0, 0x8000000000000000ull, 0x7ff0000000000000ull,
                                        0xfff0000000000000ull, 0x7ff8000000000000ull,
                                        0x7ff0000000000001ull, 0xfff8000000abcdefull,
                                        0x7fefffffffffffffull, 0x0000000000000001ull,
                                        0x8010000000000000ull, 0x3ff0000000000000ull,
                                        0xbff0000000000000ull };
#define PICK(_a) (_a)[rnd() % (sizeof(_a) / sizeof((_a)[0]))]

/* An integer of `bytes` bytes (low bytes of the result): extremes, small, any. */
static uint64_t gen_int(size_t bytes)
{
    const uint64_t top = 1ull << (bytes * 8 - 1);
    uint64_t       r   = rnd();

    switch (r % 8) {
    case 0:  return 0;
    case 1:  return 1;
    case 2:  return ~0ull;            /* -1 / max unsigned */
    case 3:  return top;              /* min signed */
    case 4:  return top - 1;          /* max signed */
    case 5:  return (r >> 32) % 5;    /* small: ties, logical ops */
    default: return rnd();
    }
}

/* A float of moderate size (sums that round), a special or any bits. */
static uint32_t gen_f32(void)
{
    uint64_t r = rnd();

    if (r % 4 == 0) {
        return PICK(f32_special);
    }
    if (r % 4 == 1) {
        return (uint32_t)(r >> 32);
    }
    return (uint32_t)((r >> 63) << 31 | (112 + (r >> 8) % 32) << 23 | (r >> 20 & 0x7fffff));
}

static uint64_t gen_f64(void)
{
    uint64_t r = rnd();

    if (r % 4 == 0) {
        return PICK(f64_special);
    }
    if (r % 4 == 1) {
        return rnd();
    }
    return (r >> 63) << 63 | (uint64_t)(1000 + (r >> 8) % 48) << 52 | (rnd() >> 12);
}

static uint16_t gen_16(int dtype)
{
    uint64_t r = rnd();

    if (r % 4 == 0) {
        return dtype == AGG_DTYPE_FLOAT16 ? PICK(f16_special) : PICK(bf16_special);
    }
    if (r % 4 == 1) {
        return (uint16_t)(r >> 32);
    }
    /* Exponents around 1.0: sums and products that round (and ties). */
    if (dtype == AGG_DTYPE_FLOAT16) {
        return (uint16_t)((r >> 63) << 15 | (8 + (r >> 8) % 16) << 10 | (r >> 20 & 0x3ff));
    }
    return (uint16_t)((r >> 63) << 15 | (120 + (r >> 8) % 16) << 7 | (r >> 20 & 0x7f));
}

layout_t layout(int dtype)
{
    layout_t l = { agg_dtype_size(dtype), agg_dtype_size(dtype), agg_dtype_size(dtype), 0, 0, 'i' };

#define PAIR(_d, _t, _k)                                                      \
    case _d:                                                                  \
        l.align = _Alignof(_t);                                               \
        l.vsize = sizeof(((_t *)0)->value);                                   \
        l.ioff  = offsetof(_t, index);                                        \
        l.pair  = 1;                                                          \
        l.kind  = _k;                                                         \
        break;
    switch (dtype) {
    PAIR(AGG_DTYPE_FLOAT32_INT32, agg_float32_int32_t, 'f')
    PAIR(AGG_DTYPE_FLOAT64_INT32, agg_float64_int32_t, 'd')
    PAIR(AGG_DTYPE_INT64_INT32, agg_int64_int32_t, 'i')
    PAIR(AGG_DTYPE_INT32_INT32, agg_int32_int32_t, 'i')
    PAIR(AGG_DTYPE_INT16_INT32, agg_int16_int32_t, 'i')
    case AGG_DTYPE_FLOAT16:
    case AGG_DTYPE_BFLOAT16: l.kind = 'h'; break;
    case AGG_DTYPE_FLOAT32:  l.kind = 'f'; break;
    case AGG_DTYPE_FLOAT64:  l.kind = 'd'; break;
    default: break;
    }
#undef PAIR
    return l;
}

/* One value of the dtype's value type into e (its first l->vsize bytes). */
static void gen_value(int dtype, const layout_t *l, unsigned char *e)
{
    uint64_t v;

    switch (l->kind) {
    case 'h': v = gen_16(dtype); break;
    case 'f': v = gen_f32(); break;
    case 'd': v = gen_f64(); break;
    default:  v = gen_int(l->vsize); break;
    }
    memcpy(e, &v, l->vsize); /* little-endian: the low bytes */
}

/*
 * Both operands. Pairs get random padding and indices (negative ones too,
 * and often small so that index ties come up); an eighth of the elements of
 * `in` copy inout's value, so MIN/MAX and MINLOC/MAXLOC ties are common.
 */
void gen_inputs(int dtype, const layout_t *l, unsigned char *a, unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char *ea = a + i * l->size, *eb = b + i * l->size;

        for (size_t k = 0; k < l->size; k++) {
            ea[k] = (unsigned char)rnd();
            eb[k] = (unsigned char)rnd();
        }
        gen_value(dtype, l, ea);
        gen_value(dtype, l, eb);
        if (rnd() % 8 == 0) {
            memcpy(eb, ea, l->vsize);
        }
        if (l->pair) {
            int32_t ia = (int32_t)rnd(), ib = (int32_t)rnd();
            if (rnd() % 2) {
                ia %= 8;
                ib %= 8;
            }
            memcpy(ea + l->ioff, &ia, 4);
            memcpy(eb + l->ioff, &ib, 4);
        }
    }
}

/* ---- comparing -------------------------------------------------------- */

int is_nan(int dtype, const layout_t *l, const unsigned char *e)
{
    uint64_t v = 0;

    memcpy(&v, e, l->vsize);
    switch (l->kind) {
    case 'h': return dtype == AGG_DTYPE_FLOAT16 ? (v & 0x7fff) > 0x7c00 : (v & 0x7fff) > 0x7f80;
    case 'f': return (v & 0x7fffffffu) > 0x7f800000u;
    case 'd': return (v & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default:  return 0;
    }
}

/*
 * Same bits (got from the GPU, want from the host, for operands a and b).
 * The kernels copy x86's NaN rules for sums and products: the one NaN
 * operand, quieted, or the default NaN for Inf - Inf and 0 * Inf. When both
 * operands are NaN, x86 returns the first source operand's, and which one
 * that is depends on the compiler's operand order, which differs between
 * gcc's vector loop and its remainder in one function: there either payload
 * goes. On other hosts the reference follows other rules: any NaN goes.
 */
int same(int dtype, int op, const layout_t *l, const unsigned char *got,
                const unsigned char *want, const unsigned char *a, const unsigned char *b)
{
    if (memcmp(got, want, l->vsize) == 0) {
        return !l->pair || memcmp(got + l->ioff, want + l->ioff, 4) == 0;
    }
    if ((op != AGG_OP_SUM && op != AGG_OP_PROD) || !is_nan(dtype, l, got) ||
        !is_nan(dtype, l, want)) {
        return 0;
    }
#if defined(__x86_64__) || defined(__i386__)
    return is_nan(dtype, l, a) && is_nan(dtype, l, b);
#else
    (void)a, (void)b;
    return 1;
#endif
}

void hex(char *s, size_t len, const unsigned char *e, const layout_t *l)
{
    size_t o = 0;

    o += (size_t)snprintf(s + o, len - o, "0x");
    for (size_t k = l->vsize; k-- > 0;) {
        o += (size_t)snprintf(s + o, len - o, "%02x", e[k]);
    }
    if (l->pair) {
        int32_t idx;
        memcpy(&idx, e + l->ioff, 4);
        snprintf(s + o, len - o, "/%d", idx);
    }
}
