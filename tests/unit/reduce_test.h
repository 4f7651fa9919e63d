/*
 * What the reduce engine tests share (test_reduce*.c): a seeded random
 * sequence, float bit patterns, and tests run once per instruction-set level.
 * Include after <cmocka.h>.
 */
#ifndef REDUCE_TEST_H
#define REDUCE_TEST_H

#include <stdint.h>
#include <string.h>

#include "agg/reduce.h"

/* splitmix64's finalizer: every bit of z mixed into every bit of the result. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The state of rng_next; a test seeds it by assigning it. */
static uint64_t rng_state;

/* splitmix64: small, seeded, the same sequence everywhere. */
static inline uint64_t rng_next(void)
{
    return mix64(rng_state += 0x9e3779b97f4a7c15ull);
}

/* The bits of a float or double, and the float or double of some bits. */
static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static inline double bits_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* The level a test runs at (its cmocka state points at an AGG_ISA_* int);
 * skip() where this build or CPU has none. */
static inline int level_of(void **state)
{
    int isa = *(const int *)*state;
    if (!agg_isa_supported(isa)) {
        print_message("level %s not available here: skipped\n", agg_isa_name(isa));
        skip();
    }
    return isa;
}

/* The cmocka state level_of reads for level `isa` (an AGG_ISA_* value). */
static inline void *level_state(int isa)
{
    static const int levels[AGG_ISA__COUNT] = { AGG_ISA_SCALAR, AGG_ISA_AVX2_F16C, AGG_ISA_AVX512 };

    return (void *)&levels[isa];
}

/* Entries of a cmocka test table: _fn at level _isa, and _fn at every level. */
#define LEVEL_TEST(_fn, _isa)                                                 \
    { .name = #_fn "/" #_isa, .test_func = _fn, .initial_state = level_state(_isa) }
#define LEVEL_TESTS(_fn)                                                      \
    LEVEL_TEST(_fn, AGG_ISA_SCALAR), LEVEL_TEST(_fn, AGG_ISA_AVX2_F16C),      \
    LEVEL_TEST(_fn, AGG_ISA_AVX512)

#endif
