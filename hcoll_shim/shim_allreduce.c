/*
 * MPI_Allreduce and MPI_Iallreduce: offloaded when the network can reduce
 * the type and op on this communicator, at this size; Open MPI's own
 * PMPI_ functions otherwise, so a result is never wrong.
 */
#include <stdlib.h>
#include <string.h>

#include "agg/conf.h"
#include "agg/log.h"
#include "shim.h"

/*
 * The offloaded form of a call, or NULL when it goes to the host path. Only
 * a blocking call (setup) creates the communicator's group; see shim_init.
 */
static shim_comm_t *shim_allreduce_route(const void *sbuf, void *rbuf, int count,
                                         MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                                         int setup, agg_reduce_spec_t *spec)
{
    long long bytes;
    shim_comm_t *sc;
    int adt, aop;

    if (shim.ctx == NULL || count < 0 || comm == MPI_COMM_NULL) {
        return NULL;
    }
    adt = shim_map_dtype(dtype);
    aop = shim_map_op(op);
    if (adt < 0 || aop < 0 || agg_reduce_fn(adt, aop) == NULL) {
        return NULL;
    }
    bytes = (long long)count * (long long)agg_dtype_size(adt);
    if ((shim.max_bytes > 0 && bytes > shim.max_bytes) ||
        (shim.large_host && bytes >= shim.large_bytes)) {
        return NULL;
    }
    sc = setup ? shim_comm_get(comm) : shim_comm_peek(comm);
    if (sc == NULL || sc->state != SHIM_COMM_READY) {
        return NULL;
    }
    memset(spec, 0, sizeof(*spec));
    spec->sbuf  = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    spec->rbuf  = rbuf;
    spec->count = (size_t)count;
    spec->dtype = (agg_dtype_t)adt;
    spec->op    = (agg_op_t)aop;
    return sc;
}

SHIM_API int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                           MPI_Op op, MPI_Comm comm)
{
    agg_reduce_spec_t spec;
    shim_comm_t *sc;
    agg_status_t st;

    sc = shim_allreduce_route(sbuf, rbuf, count, dtype, op, comm, 1, &spec);
    if (sc == NULL) {
        goto host;
    }
    st = agg_allreduce(sc->agg, &spec);
    if (st == AGG_OK) {
        shim.offloaded++;
        return MPI_SUCCESS;
    }
    /*
     * Every member sees a failure in the tree, so all complete this call the
     * same way; the communicator stays offloaded (none may take another path
     * on its own), and a tree that is gone fails the next calls at once.
     */
    shim.fallbacks++;
    if (sbuf == MPI_IN_PLACE) {
        /* part of rbuf may already hold reduced data: redoing it would be wrong */
        agg_error("in-place allreduce failed in the network (%s); cannot recover the "
                  "input", agg_strerror(st));
        PMPI_Comm_call_errhandler(comm, MPI_ERR_INTERN);
        return MPI_ERR_INTERN;
    }
    agg_warn("allreduce failed in the network (%s); completing it on the host",
             agg_strerror(st));
host:
    shim.host_calls++;
    return PMPI_Allreduce(sbuf, rbuf, count, dtype, op, comm);
}

SHIM_API int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                            MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    agg_reduce_spec_t spec;
    shim_comm_t *sc;

    sc = shim_allreduce_route(sbuf, rbuf, count, dtype, op, comm, 0, &spec);
    if (sc != NULL && count > 0 && shim_ireq_start(sc, &spec, request) == MPI_SUCCESS) {
        shim.offloaded++;
        shim.offloaded_nb++;
        return MPI_SUCCESS;
    }
    shim.host_calls++;
    return PMPI_Iallreduce(sbuf, rbuf, count, dtype, op, comm, request);
}
