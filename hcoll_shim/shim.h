/* hcoll_shim internals. */
#ifndef SHIM_H
#define SHIM_H

#include <mpi.h>
#include "agg/reduce.h"

/* The agg datatype of a predefined MPI datatype; -1 if none (derived, pair...). */
int shim_map_dtype(MPI_Datatype dtype);

/* The agg op of a predefined MPI op; -1 for user ops and MINLOC/MAXLOC/REPLACE. */
int shim_map_op(MPI_Op op);

#endif
