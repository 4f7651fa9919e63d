/*
 * Shared by the parts of gpu_kernel_check: the inputs it generates and how
 * it compares a GPU result with the host's (gpu_check_data.c).
 */
#ifndef GPU_CHECK_H
#define GPU_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Where the fields of one element of a dtype are. */
typedef struct {
    size_t size, align, vsize, ioff; /* element, alignment, value field, index offset */
    int    pair, kind;               /* kind: 'i' int, 'h' 16-bit float, 'f' float32, 'd' float64 */
} layout_t;

extern uint64_t rng_state; /* seed it (odd) before the first rnd() */

uint64_t rnd(void);
layout_t layout(int dtype);

/* n elements of both operands, full of special values and ties. */
void gen_inputs(int dtype, const layout_t *l, unsigned char *a, unsigned char *b, size_t n);

/* The value of element e is a NaN. */
int is_nan(int dtype, const layout_t *l, const unsigned char *e);

/* The GPU's element got is the host's want, for operands a and b; see the rules there. */
int same(int dtype, int op, const layout_t *l, const unsigned char *got, const unsigned char *want,
         const unsigned char *a, const unsigned char *b);

/* "0x3c00", or "0x3f800000/-5" for a pair. */
void hex(char *s, size_t len, const unsigned char *e, const layout_t *l);

#endif
