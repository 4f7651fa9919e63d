/*
 * Datatypes, reduction operations and the reduce engine shared by the
 * aggregation nodes (switchsim) and the client library. The numeric values of
 * agg_dtype_t and agg_op_t travel on the wire; never reorder them.
 */
#ifndef AGG_REDUCE_H
#define AGG_REDUCE_H

#include <stddef.h>
#include <stdint.h>

typedef enum agg_dtype {
    AGG_DTYPE_INT8     = 0,
    AGG_DTYPE_UINT8    = 1,
    AGG_DTYPE_INT16    = 2,
    AGG_DTYPE_UINT16   = 3,
    AGG_DTYPE_INT32    = 4,
    AGG_DTYPE_UINT32   = 5,
    AGG_DTYPE_INT64    = 6,
    AGG_DTYPE_UINT64   = 7,
    AGG_DTYPE_FLOAT16  = 8,
    AGG_DTYPE_BFLOAT16 = 9,
    AGG_DTYPE_FLOAT32  = 10,
    AGG_DTYPE_FLOAT64  = 11,
    AGG_DTYPE__COUNT
} agg_dtype_t;

typedef enum agg_op {
    AGG_OP_SUM  = 0,
    AGG_OP_PROD = 1,
    AGG_OP_MIN  = 2,
    AGG_OP_MAX  = 3,
    AGG_OP_LAND = 4,
    AGG_OP_BAND = 5,
    AGG_OP_LOR  = 6,
    AGG_OP_BOR  = 7,
    AGG_OP_LXOR = 8,
    AGG_OP_BXOR = 9,
    AGG_OP__COUNT
} agg_op_t;

/*
 * inout[i] = inout[i] OP in[i] for i < count. The buffers must not overlap and
 * should be aligned to the element size.
 *
 * Integers: sum and prod wrap modulo 2^N (two's complement for signed types);
 * min/max compare as the type's signedness; land/lor/lxor give 0 or 1.
 * Floating point: min/max return NaN when either operand is NaN (unlike
 * fmin/fmax); between -0 and +0 either may be returned. float16 and bfloat16
 * are widened to float, combined, and rounded back per element.
 */
typedef void (*agg_reduce_fn_t)(void *restrict inout, const void *restrict in,
                                size_t count);

/* Size in bytes of one element; 0 for a value out of range. */
size_t agg_dtype_size(int dtype);

/* "int32", "float64", ...; "unknown" for a value out of range. */
const char *agg_dtype_name(int dtype);

/* "sum", "max", ...; "unknown" for a value out of range. */
const char *agg_op_name(int op);

/*
 * The reduction function for a datatype and operation, or NULL when the
 * combination is not supported (bitwise and logical ops on floating point, or
 * values out of range). Look it up once per operation, not per fragment.
 */
agg_reduce_fn_t agg_reduce_fn(int dtype, int op);

/* Conversions used by the float16 and bfloat16 kernels (round to nearest even). */
float    agg_half_to_float(uint16_t h);
uint16_t agg_float_to_half(float f);
float    agg_bf16_to_float(uint16_t b);
uint16_t agg_float_to_bf16(float f);

#endif
