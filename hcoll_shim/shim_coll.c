/*
 * The other collectives: MPI_Reduce, MPI_Bcast, MPI_Barrier (with their
 * non-blocking forms), MPI_Reduce_scatter_block and MPI_Allgather. Each goes
 * to the network when it can, to Open MPI otherwise, counted with the
 * reason. A call that fails in the network fails on every member alike; it
 * is redone by Open MPI when its input is still intact, which it is except
 * for an in-place reduce at the root.
 */
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "shim.h"

/*
 * Where a bcast or allgather of `bytes` of dtype (-1: not one contiguous
 * block) goes on sc.
 */
static shim_route_t shim_route_data(agg_coll_type_t coll, long long bytes, MPI_Datatype dtype,
                                    shim_comm_t *sc, shim_why_t *why)
{
    if (bytes < 0) {
        /* a value-index pair has holes the network would fill */
        *why = shim_dtype_named(dtype) ? SHIM_WHY_TYPE : SHIM_WHY_DERIVED;
        return SHIM_ROUTE_MPI;
    }
    if (bytes == 0) {
        *why = SHIM_WHY_TOO_SMALL;
        return SHIM_ROUTE_MPI;
    }
    if (sc == NULL || sc->inter) {
        *why = sc != NULL ? SHIM_WHY_INTERCOMM : SHIM_WHY_LAZY;
        return SHIM_ROUTE_MPI;
    }
    *why = shim_comm_why(sc, coll);
    return *why == SHIM_WHY_NONE ? SHIM_ROUTE_NET : SHIM_ROUTE_MPI;
}

/*
 * A blocking call's request (read through req: the post that makes it is
 * an argument of the same call), waited for and counted. AGG_OK, or the
 * failure every member saw (then logged, and the caller redoes or reports).
 */
static agg_status_t shim_run(agg_coll_type_t coll, agg_status_t posted, agg_request_t **req)
{
    agg_status_t st = posted == AGG_OK ? shim_net_wait(coll, *req) : posted;

    if (st != AGG_OK) {
        agg_warn("%s failed in the network (%s)", agg_coll_name(coll), agg_strerror(st));
    }
    return st;
}

/* A non-blocking call's request, handed to the program. */
static int shim_start(shim_comm_t *sc, agg_coll_type_t coll, agg_status_t posted,
                      agg_request_t **req, MPI_Request *request)
{
    return posted == AGG_OK && shim_ireq_start(sc, coll, *req, request) == MPI_SUCCESS;
}

/* ---- reduce ------------------------------------------------------------ */

static shim_route_t shim_reduce_route(const void *sbuf, void *rbuf, int count,
                                      MPI_Datatype dtype, MPI_Op op, int root, shim_comm_t *sc,
                                      agg_reduce_spec_t *spec, shim_why_t *why)
{
    shim_route_t r;

    if (sc != NULL && (root < 0 || root >= sc->size)) {
        *why = SHIM_WHY_NONE; /* MPI reports the error */
        return SHIM_ROUTE_MPI;
    }
    r = shim_route_reduce(AGG_COLL_REDUCE, sbuf, rbuf, count, dtype, op, sc, spec, why);
    if (r == SHIM_ROUTE_NET) {
        spec->root = root;
        if (sc->rank != root) {
            spec->rbuf = NULL; /* not written, may be anything on non-roots */
            spec->sbuf = sbuf;
        }
    }
    return r;
}

SHIM_API int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                        MPI_Op op, int root, MPI_Comm comm)
{
    agg_reduce_spec_t spec;
    agg_request_t *req = NULL;
    shim_comm_t *sc = NULL;
    shim_why_t why;
    shim_route_t r;
    agg_status_t st;

    if (!shim.on) {
        return PMPI_Reduce(sbuf, rbuf, count, dtype, op, root, comm);
    }
    r = shim_route_args(dtype, op, count, &why);
    if (r == SHIM_ROUTE_NET) {
        sc = shim_comm_get(comm);
        r  = shim_reduce_route(sbuf, rbuf, count, dtype, op, root, sc, &spec, &why);
    }
    if (r == SHIM_ROUTE_NET) {
        st = agg_ireduce(sc->agg, &spec, &req);
        st = shim_run(AGG_COLL_REDUCE, st, &req);
        if (st == AGG_OK) {
            return MPI_SUCCESS;
        }
        if (sbuf == MPI_IN_PLACE && sc->rank == root) {
            shim_count(AGG_COLL_REDUCE, SHIM_PATH_MPI, SHIM_WHY_NETWORK_ERROR);
            PMPI_Comm_call_errhandler(comm, MPI_ERR_INTERN);
            return MPI_ERR_INTERN; /* the root's input may be partly overwritten */
        }
        why = SHIM_WHY_NETWORK_ERROR;
    }
    shim_count(AGG_COLL_REDUCE, SHIM_PATH_MPI, why);
    return PMPI_Reduce(sbuf, rbuf, count, dtype, op, root, comm);
}

SHIM_API int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                         MPI_Op op, int root, MPI_Comm comm, MPI_Request *request)
{
    agg_reduce_spec_t spec;
    agg_request_t *req = NULL;
    shim_comm_t *sc;
    shim_why_t why;

    if (!shim.on) {
        return PMPI_Ireduce(sbuf, rbuf, count, dtype, op, root, comm, request);
    }
    sc = shim_comm_peek(comm);
    if (shim_reduce_route(sbuf, rbuf, count, dtype, op, root, sc, &spec, &why) ==
        SHIM_ROUTE_NET) {
        if (shim_start(sc, AGG_COLL_REDUCE, agg_ireduce(sc->agg, &spec, &req), &req, request)) {
            return MPI_SUCCESS;
        }
        why = SHIM_WHY_NETWORK_ERROR;
    }
    shim_count(AGG_COLL_REDUCE, SHIM_PATH_MPI, why);
    return PMPI_Ireduce(sbuf, rbuf, count, dtype, op, root, comm, request);
}

/* ---- bcast ------------------------------------------------------------- */

static shim_route_t shim_bcast_route(void *buf, int count, MPI_Datatype dtype, int root,
                                     shim_comm_t *sc, agg_data_spec_t *spec, shim_why_t *why)
{
    long long bytes = shim_dtype_bytes(dtype, count);
    shim_route_t r;

    if (sc != NULL && (root < 0 || root >= sc->size)) {
        *why = SHIM_WHY_NONE;
        return SHIM_ROUTE_MPI;
    }
    r = shim_route_data(AGG_COLL_BCAST, bytes, dtype, sc, why);
    if (r == SHIM_ROUTE_NET) {
        memset(spec, 0, sizeof(*spec));
        spec->sbuf  = buf;
        spec->rbuf  = buf;
        spec->bytes = (size_t)bytes;
        spec->root  = root;
    }
    return r;
}

SHIM_API int MPI_Bcast(void *buf, int count, MPI_Datatype dtype, int root, MPI_Comm comm)
{
    agg_data_spec_t spec;
    agg_request_t *req = NULL;
    shim_comm_t *sc = NULL;
    shim_why_t why = SHIM_WHY_DERIVED;
    shim_route_t r;

    if (!shim.on) {
        return PMPI_Bcast(buf, count, dtype, root, comm);
    }
    if (shim_dtype_bytes(dtype, count) > 0) {
        sc = shim_comm_get(comm);
    }
    r = shim_bcast_route(buf, count, dtype, root, sc, &spec, &why);
    if (r == SHIM_ROUTE_NET && sc->hier) {
        return shim_hier_bcast(sc, buf, count, dtype, root, spec.bytes);
    }
    if (r == SHIM_ROUTE_NET) {
        if (shim_run(AGG_COLL_BCAST, agg_ibcast(sc->agg, &spec, &req), &req) == AGG_OK) {
            return MPI_SUCCESS;
        }
        why = SHIM_WHY_NETWORK_ERROR; /* the root's buffer is intact: MPI redoes it */
    }
    shim_count(AGG_COLL_BCAST, SHIM_PATH_MPI, why);
    return PMPI_Bcast(buf, count, dtype, root, comm);
}

SHIM_API int MPI_Ibcast(void *buf, int count, MPI_Datatype dtype, int root, MPI_Comm comm,
                        MPI_Request *request)
{
    agg_data_spec_t spec;
    agg_request_t *req = NULL;
    shim_comm_t *sc;
    shim_why_t why;
    shim_route_t r;

    if (!shim.on) {
        return PMPI_Ibcast(buf, count, dtype, root, comm, request);
    }
    sc = shim_comm_peek(comm);
    r = shim_bcast_route(buf, count, dtype, root, sc, &spec, &why);
    if (r == SHIM_ROUTE_NET && sc->hier) {
        why = SHIM_WHY_LEADERS; /* the leaders' steps block */
    } else if (r == SHIM_ROUTE_NET) {
        if (shim_start(sc, AGG_COLL_BCAST, agg_ibcast(sc->agg, &spec, &req), &req, request)) {
            return MPI_SUCCESS;
        }
        why = SHIM_WHY_NETWORK_ERROR;
    }
    shim_count(AGG_COLL_BCAST, SHIM_PATH_MPI, why);
    return PMPI_Ibcast(buf, count, dtype, root, comm, request);
}

/* ---- barrier ----------------------------------------------------------- */

SHIM_API int MPI_Barrier(MPI_Comm comm)
{
    agg_request_t *req = NULL;
    shim_comm_t *sc;
    shim_why_t why;
    shim_route_t r;

    if (!shim.on) {
        return PMPI_Barrier(comm);
    }
    sc = shim_comm_get(comm);
    r = shim_route_data(AGG_COLL_BARRIER, 1, MPI_BYTE, sc, &why);
    if (r == SHIM_ROUTE_NET && sc->hier) {
        return shim_hier_barrier(sc);
    }
    if (r == SHIM_ROUTE_NET) {
        if (shim_run(AGG_COLL_BARRIER, agg_ibarrier(sc->agg, &req), &req) == AGG_OK) {
            return MPI_SUCCESS;
        }
        why = SHIM_WHY_NETWORK_ERROR;
    }
    shim_count(AGG_COLL_BARRIER, SHIM_PATH_MPI, why);
    return PMPI_Barrier(comm);
}

SHIM_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    agg_request_t *req = NULL;
    shim_comm_t *sc;
    shim_why_t why;
    shim_route_t r;

    if (!shim.on) {
        return PMPI_Ibarrier(comm, request);
    }
    sc = shim_comm_peek(comm);
    r = shim_route_data(AGG_COLL_BARRIER, 1, MPI_BYTE, sc, &why);
    if (r == SHIM_ROUTE_NET && sc->hier) {
        why = SHIM_WHY_LEADERS; /* the leaders' steps block */
    } else if (r == SHIM_ROUTE_NET) {
        if (shim_start(sc, AGG_COLL_BARRIER, agg_ibarrier(sc->agg, &req), &req, request)) {
            return MPI_SUCCESS;
        }
        why = SHIM_WHY_NETWORK_ERROR;
    }
    shim_count(AGG_COLL_BARRIER, SHIM_PATH_MPI, why);
    return PMPI_Ibarrier(comm, request);
}

/* ---- reduce-scatter (block) and allgather ------------------------------ */

SHIM_API int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    agg_reduce_spec_t spec;
    agg_request_t *req = NULL;
    shim_comm_t *sc = NULL;
    shim_why_t why;
    shim_route_t r;
    int ok;

    if (!shim.on) {
        return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm);
    }
    r = shim_route_args(dtype, op, rcount, &why);
    if (r == SHIM_ROUTE_NET) {
        sc = shim_comm_get(comm);
        r  = shim_route_reduce(AGG_COLL_REDUCE_SCATTER, sbuf, rbuf, rcount, dtype, op, sc,
                               &spec, &why);
    }
    if (r == SHIM_ROUTE_NET && sbuf == MPI_IN_PLACE) {
        /* the input is all of rbuf, the result its start: the input moves aside */
        size_t bytes = (size_t)rcount * (size_t)sc->size * agg_dtype_size(spec.dtype);
        void *copy = shim_scratch(sc, bytes);

        ok = copy != NULL;
        PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, sc->pcomm);
        if (ok) {
            memcpy(copy, rbuf, bytes);
            spec.sbuf = copy;
        } else {
            r   = SHIM_ROUTE_MPI;
            why = SHIM_WHY_RESOURCES;
        }
    }
    if (r == SHIM_ROUTE_NET) {
        if (shim_run(AGG_COLL_REDUCE_SCATTER, agg_ireduce_scatter(sc->agg, &spec, &req), &req) ==
            AGG_OK) {
            return MPI_SUCCESS;
        }
        if (sbuf == MPI_IN_PLACE) {
            memcpy(rbuf, spec.sbuf, (size_t)rcount * (size_t)sc->size *
                                    agg_dtype_size(spec.dtype)); /* the input back */
        }
        why = SHIM_WHY_NETWORK_ERROR;
    }
    shim_count(AGG_COLL_REDUCE_SCATTER, SHIM_PATH_MPI, why);
    return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm);
}

SHIM_API int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                           int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    agg_data_spec_t spec = {0};
    agg_request_t *req = NULL;
    shim_comm_t *sc = NULL;
    shim_why_t why;
    long long bytes = shim_dtype_bytes(rtype, rcount);

    if (!shim.on) {
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    }
    if (sbuf != MPI_IN_PLACE && shim_dtype_bytes(stype, scount) != bytes) {
        bytes = -1; /* different type signatures on the two sides: MPI checks them */
    }
    if (bytes > 0) {
        sc = shim_comm_get(comm);
    }
    if (shim_route_data(AGG_COLL_ALLGATHER, bytes, rtype, sc, &why) == SHIM_ROUTE_NET) {
        spec.rbuf  = rbuf;
        spec.bytes = (size_t)bytes;
        spec.sbuf  = sbuf == MPI_IN_PLACE ? (uint8_t *)rbuf + (size_t)bytes * (size_t)sc->rank
                                          : sbuf;
        if (shim_run(AGG_COLL_ALLGATHER, agg_iallgather(sc->agg, &spec, &req), &req) ==
            AGG_OK) {
            return MPI_SUCCESS;
        }
        why = SHIM_WHY_NETWORK_ERROR; /* failed results are never written: input intact */
    }
    shim_count(AGG_COLL_ALLGATHER, SHIM_PATH_MPI, why);
    return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
}
