/*
 * Datatypes, reduction operations and the reduce engine shared by the
 * aggregation nodes (switchsim) and the client library. The numeric values of
 * agg_dtype_t and agg_op_t travel on the wire; never reorder them, only append.
 */
#ifndef AGG_REDUCE_H
#define AGG_REDUCE_H

#include <stddef.h>
#include <stdint.h>

typedef enum agg_dtype {
    AGG_DTYPE_INT8          = 0,
    AGG_DTYPE_UINT8         = 1,
    AGG_DTYPE_INT16         = 2,
    AGG_DTYPE_UINT16        = 3,
    AGG_DTYPE_INT32         = 4,
    AGG_DTYPE_UINT32        = 5,
    AGG_DTYPE_INT64         = 6,
    AGG_DTYPE_UINT64        = 7,
    AGG_DTYPE_FLOAT16       = 8,
    AGG_DTYPE_BFLOAT16      = 9,
    AGG_DTYPE_FLOAT32       = 10,
    AGG_DTYPE_FLOAT64       = 11,
    /* Value-index pairs for MINLOC/MAXLOC, laid out as the agg_*_int32_t below. */
    AGG_DTYPE_FLOAT32_INT32 = 12, /* MPI_FLOAT_INT */
    AGG_DTYPE_FLOAT64_INT32 = 13, /* MPI_DOUBLE_INT */
    AGG_DTYPE_INT64_INT32   = 14, /* MPI_LONG_INT (x86-64 Linux: long is 64 bits) */
    AGG_DTYPE_INT32_INT32   = 15, /* MPI_2INT */
    AGG_DTYPE_INT16_INT32   = 16, /* MPI_SHORT_INT */
    AGG_DTYPE__COUNT
} agg_dtype_t;

typedef enum agg_op {
    AGG_OP_SUM    = 0,
    AGG_OP_PROD   = 1,
    AGG_OP_MIN    = 2,
    AGG_OP_MAX    = 3,
    AGG_OP_LAND   = 4,
    AGG_OP_BAND   = 5,
    AGG_OP_LOR    = 6,
    AGG_OP_BOR    = 7,
    AGG_OP_LXOR   = 8,
    AGG_OP_BXOR   = 9,
    AGG_OP_MINLOC = 10, /* pair dtypes only */
    AGG_OP_MAXLOC = 11, /* pair dtypes only */
    AGG_OP__COUNT
} agg_op_t;

/*
 * One element of each pair dtype: the C structs MPI's pair types describe on
 * x86-64 Linux, padding included (float64_int32 and int64_int32 are 16 bytes
 * with the index at offset 8; int16_int32 is 8 bytes with the index at 4).
 */
typedef struct agg_float32_int32 { float   value; int32_t index; } agg_float32_int32_t;
typedef struct agg_float64_int32 { double  value; int32_t index; } agg_float64_int32_t;
typedef struct agg_int64_int32   { int64_t value; int32_t index; } agg_int64_int32_t;
typedef struct agg_int32_int32   { int32_t value; int32_t index; } agg_int32_int32_t;
typedef struct agg_int16_int32   { int16_t value; int32_t index; } agg_int16_int32_t;

/*
 * inout[i] = inout[i] OP in[i] for i < count. The buffers must not overlap and
 * should be aligned to the element size.
 *
 * Integers: sum and prod wrap modulo 2^N (two's complement for signed types);
 * min/max compare as the type's signedness; land/lor/lxor give 0 or 1.
 * Floating point: min/max return NaN when either operand is NaN (unlike
 * fmin/fmax); between -0 and +0 either may be returned. float16 and bfloat16
 * are widened to float, combined, and rounded back per element.
 *
 * MINLOC/MAXLOC (pair dtypes): the pair with the smaller (larger) value wins;
 * on equal values the value of inout stays and the index becomes the smaller
 * of the two. NaN counts as smaller than every number for MINLOC and larger
 * for MAXLOC, so a NaN wins like it does for MIN/MAX, and two NaNs tie (inout's
 * NaN, the smaller index). That keeps both operations commutative and
 * associative: every tree shape gives the same pair, except the payload of a
 * NaN and the sign of a zero value, which come from whichever tied operand
 * arrived first. Padding bytes of inout are left as they are.
 */
typedef void (*agg_reduce_fn_t)(void *restrict inout, const void *restrict in,
                                size_t count);

/* out[i] = in[i] converted, for i < count. The buffers must not overlap. */
typedef void (*agg_convert_fn_t)(void *restrict out, const void *restrict in,
                                 size_t count);

/* Size in bytes of one element; 0 for a value out of range. */
size_t agg_dtype_size(int dtype);

/* "int32", "float64", "float32_int32", ...; "unknown" for a value out of range. */
const char *agg_dtype_name(int dtype);

/* 1 for the value-index pair dtypes (MINLOC/MAXLOC), 0 otherwise. */
int agg_dtype_is_pair(int dtype);

/* "sum", "max", "minloc", ...; "unknown" for a value out of range. */
const char *agg_op_name(int op);

/*
 * The reduction function for a datatype and operation, or NULL when the
 * combination is not supported (bitwise and logical ops on floating point,
 * MINLOC/MAXLOC on anything but a pair dtype, any other op on a pair dtype, or
 * values out of range). Look it up once per operation, not per fragment.
 */
agg_reduce_fn_t agg_reduce_fn(int dtype, int op);

/* ---- accumulating 16-bit floats in float32 ----------------------------
 *
 * An aggregation node that keeps its partial result in float32 rounds once,
 * when the result leaves the node, instead of once per contribution:
 *   acc = widen(first);  acc = acc OP in (agg_reduce_acc_fn) for the others;
 *   result = narrow(acc).
 * For dtypes other than float16 and bfloat16 the accumulator type is the
 * dtype itself: widen and narrow are copies and the acc kernel is
 * agg_reduce_fn's, so a node can run the same three steps for every dtype.
 */

/*
 * The datatype a node accumulates `dtype` in: AGG_DTYPE_FLOAT32 for FLOAT16
 * and BFLOAT16, `dtype` itself for every other dtype; -1 out of range.
 */
int agg_dtype_acc(int dtype);

/* agg_dtype_size(agg_dtype_acc(dtype)): bytes per accumulator element; 0 out of range. */
size_t agg_dtype_acc_size(int dtype);

/*
 * out (accumulator type) = in (wire type), element by element; exact. For a
 * dtype accumulated in itself, a copy of count elements. NULL out of range.
 */
agg_convert_fn_t agg_widen_fn(int dtype);

/*
 * out (wire type) = in (accumulator type), rounded to nearest even by the
 * rules of agg_float_to_half / agg_float_to_bf16 (NaN stays NaN, overflow
 * gives Inf); the result does not depend on the MXCSR rounding mode or its
 * DAZ/FTZ bits. For a dtype accumulated in itself, a copy. NULL out of range.
 */
agg_convert_fn_t agg_narrow_fn(int dtype);

/*
 * inout (accumulator type) = inout OP widen(in (wire type)), for i < count,
 * with the same semantics as agg_reduce_fn. For dtypes accumulated in
 * themselves, agg_reduce_fn(dtype, op); NULL wherever agg_reduce_fn is NULL.
 */
agg_reduce_fn_t agg_reduce_acc_fn(int dtype, int op);

/* Conversions used by the float16 and bfloat16 kernels (round to nearest even). */
float    agg_half_to_float(uint16_t h);
uint16_t agg_float_to_half(float f);
float    agg_bf16_to_float(uint16_t b);
uint16_t agg_float_to_bf16(float f);

/* ---- instruction-set levels --------------------------------------------
 *
 * The float16/bfloat16 kernels (widen, narrow, acc, and agg_reduce_fn's
 * 16-bit kernels) exist at several levels, all bit-identical to the scalar
 * code; the lookups above take the widest level this build and CPU can run.
 * The _isa forms pin a level, so that tests can hold every level against the
 * scalar code on one machine and agg_reduce_bench can show what each buys.
 * Look them up once, like agg_reduce_fn.
 */
typedef enum agg_isa {
    AGG_ISA_SCALAR    = 0, /* plain C, every build */
    AGG_ISA_AVX2_F16C = 1, /* x86-64 with AVX2 and F16C */
    AGG_ISA_AVX512    = 2, /* x86-64 with AVX-512 F, BW and VL */
    AGG_ISA__COUNT
} agg_isa_t;

/* "scalar", "avx2_f16c", "avx512"; "unknown" for a value out of range. */
const char *agg_isa_name(int isa);

/* 1 when this build has kernels for `isa` and this CPU runs them, else 0. */
int agg_isa_supported(int isa);

/* The widest supported level: what agg_widen_fn and the others use. */
int agg_isa_best(void);

/*
 * agg_widen_fn, agg_narrow_fn, agg_reduce_acc_fn and agg_reduce_fn at level
 * `isa`. NULL where the unpinned lookup is NULL or agg_isa_supported(isa) is
 * 0. Dtypes other than float16/bfloat16 have no levels of their own: any
 * supported `isa` gives the unpinned function.
 */
agg_convert_fn_t agg_widen_fn_isa(int dtype, int isa);
agg_convert_fn_t agg_narrow_fn_isa(int dtype, int isa);
agg_reduce_fn_t  agg_reduce_acc_fn_isa(int dtype, int op, int isa);
agg_reduce_fn_t  agg_reduce_fn_isa(int dtype, int op, int isa);

#endif
