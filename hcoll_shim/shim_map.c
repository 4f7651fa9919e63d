/*
 * MPI datatypes and operations the network can reduce or move. Anything
 * not listed (long double, user operations) goes to the host path; derived
 * types to MPI.
 */
#include "shim.h"

#include <stdint.h>

static int shim__int_dtype(int size, int is_signed)
{
    switch (size) {
    case 1: return is_signed ? AGG_DTYPE_INT8 : AGG_DTYPE_UINT8;
    case 2: return is_signed ? AGG_DTYPE_INT16 : AGG_DTYPE_UINT16;
    case 4: return is_signed ? AGG_DTYPE_INT32 : AGG_DTYPE_UINT32;
    case 8: return is_signed ? AGG_DTYPE_INT64 : AGG_DTYPE_UINT64;
    }
    return -1;
}

/*
 * Fortran's named types, which C programs may pass too: as wide as the
 * Fortran compiler Open MPI was built with made them.
 */
static int shim__fortran_dtype(MPI_Datatype d)
{
    int size;

    if (d == MPI_DATATYPE_NULL || PMPI_Type_size(d, &size) != MPI_SUCCESS) {
        return -1; /* a kind this MPI lacks is MPI_DATATYPE_NULL */
    }
    if (d == MPI_INTEGER || d == MPI_INTEGER1 || d == MPI_INTEGER2 || d == MPI_INTEGER4 ||
        d == MPI_INTEGER8) {
        return shim__int_dtype(size, 1);
    }
    if (d == MPI_REAL || d == MPI_REAL4 || d == MPI_DOUBLE_PRECISION || d == MPI_REAL8) {
        return size == 4 ? AGG_DTYPE_FLOAT32 : size == 8 ? AGG_DTYPE_FLOAT64 : -1;
    }
    if (d == MPI_2INTEGER) {
        return size == 8 ? AGG_DTYPE_INT32_INT32 : -1; /* MINLOC/MAXLOC pairs */
    }
    return -1;
}

int shim_map_dtype(MPI_Datatype d)
{
    /* value-index pairs (MINLOC/MAXLOC), as MPI lays them out in C */
    if (d == MPI_FLOAT_INT) {
        return AGG_DTYPE_FLOAT32_INT32;
    }
    if (d == MPI_DOUBLE_INT) {
        return AGG_DTYPE_FLOAT64_INT32;
    }
    if (d == MPI_LONG_INT) {
        return sizeof(long) == 8 ? AGG_DTYPE_INT64_INT32 : -1;
    }
    if (d == MPI_2INT) {
        return sizeof(int) == 4 ? AGG_DTYPE_INT32_INT32 : -1;
    }
    if (d == MPI_SHORT_INT) {
        return sizeof(short) == 2 ? AGG_DTYPE_INT16_INT32 : -1;
    }
    if (d == MPI_FLOAT) {
        return AGG_DTYPE_FLOAT32;
    }
    if (d == MPI_DOUBLE) {
        return AGG_DTYPE_FLOAT64;
    }
    if (d == MPI_INT8_T || d == MPI_SIGNED_CHAR) {
        return AGG_DTYPE_INT8;
    }
    if (d == MPI_UINT8_T || d == MPI_UNSIGNED_CHAR) {
        return AGG_DTYPE_UINT8;
    }
    if (d == MPI_INT16_T || d == MPI_SHORT) {
        return shim__int_dtype(sizeof(short), 1);
    }
    if (d == MPI_UINT16_T || d == MPI_UNSIGNED_SHORT) {
        return shim__int_dtype(sizeof(unsigned short), 0);
    }
    if (d == MPI_INT32_T || d == MPI_INT) {
        return shim__int_dtype(sizeof(int), 1);
    }
    if (d == MPI_UINT32_T || d == MPI_UNSIGNED) {
        return shim__int_dtype(sizeof(unsigned), 0);
    }
    if (d == MPI_INT64_T || d == MPI_LONG_LONG || d == MPI_LONG_LONG_INT) {
        return shim__int_dtype(sizeof(long long), 1);
    }
    if (d == MPI_UINT64_T || d == MPI_UNSIGNED_LONG_LONG) {
        return shim__int_dtype(sizeof(unsigned long long), 0);
    }
    if (d == MPI_LONG) {
        return shim__int_dtype(sizeof(long), 1);
    }
    if (d == MPI_UNSIGNED_LONG) {
        return shim__int_dtype(sizeof(unsigned long), 0);
    }
    return shim__fortran_dtype(d);
}

int shim_map_op(MPI_Op op)
{
    if (op == MPI_SUM) {
        return AGG_OP_SUM;
    }
    if (op == MPI_PROD) {
        return AGG_OP_PROD;
    }
    if (op == MPI_MIN) {
        return AGG_OP_MIN;
    }
    if (op == MPI_MAX) {
        return AGG_OP_MAX;
    }
    if (op == MPI_LAND) {
        return AGG_OP_LAND;
    }
    if (op == MPI_BAND) {
        return AGG_OP_BAND;
    }
    if (op == MPI_LOR) {
        return AGG_OP_LOR;
    }
    if (op == MPI_BOR) {
        return AGG_OP_BOR;
    }
    if (op == MPI_LXOR) {
        return AGG_OP_LXOR;
    }
    if (op == MPI_BXOR) {
        return AGG_OP_BXOR;
    }
    if (op == MPI_MINLOC) {
        return AGG_OP_MINLOC;
    }
    if (op == MPI_MAXLOC) {
        return AGG_OP_MAXLOC;
    }
    return -1;
}

int shim_dtype_named(MPI_Datatype d)
{
    int ni, na, nd, combiner;

    if (d == MPI_DATATYPE_NULL ||
        PMPI_Type_get_envelope(d, &ni, &na, &nd, &combiner) != MPI_SUCCESS) {
        return 0;
    }
    return combiner == MPI_COMBINER_NAMED;
}

long long shim_dtype_bytes(MPI_Datatype d, int count)
{
    MPI_Aint lb, extent;
    int size;

    if (count < 0 || !shim_dtype_named(d) || PMPI_Type_size(d, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(d, &lb, &extent) != MPI_SUCCESS || lb != 0 ||
        extent != (MPI_Aint)size) {
        return -1; /* value-index pairs have holes: MPI moves them */
    }
    return (long long)size * count;
}
