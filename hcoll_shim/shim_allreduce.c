/*
 * MPI_Allreduce and MPI_Iallreduce. In the network when it can reduce the
 * type and op on this communicator at this size; when the network cannot be
 * used (off, a small communicator, too large, no resources, an error) on the
 * shim's own host algorithms (recursive doubling, Rabenseifner, ring:
 * shim_host.c); types and ops the tree does not reduce, derived types, user
 * ops and intercommunicators go to Open MPI untouched.
 * Non-blocking calls are offloaded or handed to Open MPI (the host
 * algorithms block).
 */
#include <stdlib.h>
#include <string.h>

#include "agg/conf.h"
#include "agg/log.h"
#include "shim.h"

/*
 * Where a reduction can go, before looking at the communicator: MPI for
 * derived types and user ops (which only MPI knows how to apply), for
 * types and ops the tree does not reduce (long double, complex, bool,
 * MPI_REPLACE: MPI decides whether they are even valid), and for count 0;
 * else the network, or where it cannot be used the host algorithms, whose
 * element-wise kernels are the tree's own.
 */
shim_route_t shim_route_args(MPI_Datatype dtype, MPI_Op op, int count, shim_why_t *why)
{
    int adt, aop;

    *why = SHIM_WHY_NONE;
    if (count <= 0) {
        *why = SHIM_WHY_TOO_SMALL; /* nothing to reduce; MPI checks the arguments */
        return SHIM_ROUTE_MPI;
    }
    if (!shim_dtype_named(dtype)) {
        *why = SHIM_WHY_DERIVED;
        return SHIM_ROUTE_MPI;
    }
    aop = shim_map_op(op);
    if (aop < 0) {
        *why = op == MPI_REPLACE || op == MPI_NO_OP ? SHIM_WHY_OP : SHIM_WHY_USER_OP;
        return SHIM_ROUTE_MPI;
    }
    adt = shim_map_dtype(dtype);
    if (adt < 0) {
        *why = SHIM_WHY_TYPE;
        return SHIM_ROUTE_MPI;
    }
    if (agg_reduce_fn(adt, aop) == NULL) {
        *why = SHIM_WHY_OP; /* e.g. a bitwise op on floats: MPI reports it */
        return SHIM_ROUTE_MPI;
    }
    return SHIM_ROUTE_NET;
}

shim_route_t shim_route_reduce(agg_coll_type_t coll, const void *sbuf, void *rbuf, int count,
                               MPI_Datatype dtype, MPI_Op op, shim_comm_t *sc,
                               agg_reduce_spec_t *spec, shim_why_t *why)
{
    shim_route_t r = shim_route_args(dtype, op, count, why);
    int adt = shim_map_dtype(dtype);
    long long bytes;

    if (r != SHIM_ROUTE_NET) {
        return r;
    }
    if (sc == NULL || sc->inter) {
        *why = sc != NULL ? SHIM_WHY_INTERCOMM : SHIM_WHY_LAZY;
        return SHIM_ROUTE_MPI;
    }
    *why = shim_comm_why(sc, coll);
    if (*why != SHIM_WHY_NONE) {
        return SHIM_ROUTE_HOST;
    }
    bytes = (long long)count * (long long)agg_dtype_size(adt);
    if (coll == AGG_COLL_ALLREDUCE && ((shim.max_bytes > 0 && bytes > shim.max_bytes) ||
                                       (shim.large_host && bytes >= shim.large_bytes))) {
        *why = SHIM_WHY_TOO_LARGE;
        return SHIM_ROUTE_HOST;
    }
    memset(spec, 0, sizeof(*spec));
    spec->sbuf  = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    spec->rbuf  = rbuf;
    spec->count = (size_t)count;
    spec->dtype = (agg_dtype_t)adt;
    spec->op    = (agg_op_t)shim_map_op(op);
    return SHIM_ROUTE_NET;
}

/*
 * HCOLL_ALLREDUCE_HYBRID_LB: a large allreduce as fragments of
 * hcoll_hybrid_ar_lb_frag_thresh bytes, up to 16 posted ahead of the one
 * waited for, so a late member delays only what it has not sent yet.
 */
#define SHIM_HYBRID_INFLIGHT 16 /* fragments posted ahead of the oldest one waited for */

static agg_status_t shim_allreduce_frags(shim_comm_t *sc, const agg_reduce_spec_t *spec)
{
    size_t esize = agg_dtype_size(spec->dtype);
    size_t per = (size_t)shim.hybrid_frag / esize, n = (spec->count + per - 1) / per;
    agg_request_t *reqs[SHIM_HYBRID_INFLIGHT];
    agg_status_t st = AGG_OK, rc;
    size_t posted = 0, done = 0;

    while (done < n) {
        /* post ahead while there is room; every member posts the same parts */
        while (posted < n && posted - done < SHIM_HYBRID_INFLIGHT && st == AGG_OK) {
            agg_reduce_spec_t part = *spec;
            size_t off = posted * per;

            part.sbuf  = (const uint8_t *)spec->sbuf + off * esize;
            part.rbuf  = (uint8_t *)spec->rbuf + off * esize;
            part.count = spec->count - off < per ? spec->count - off : per;
            rc = agg_iallreduce(sc->agg, &part, &reqs[posted % SHIM_HYBRID_INFLIGHT]);
            if (rc != AGG_OK) {
                st = rc; /* the arguments: alike on every member */
                n  = posted;
                break;
            }
            posted++;
        }
        if (done < posted) {
            rc = shim_net_wait(done == 0 ? AGG_COLL_ALLREDUCE : AGG_COLL__COUNT,
                               reqs[done % SHIM_HYBRID_INFLIGHT]);
            st = st == AGG_OK ? rc : st;
            done++;
        }
    }
    return st;
}

/* Runs an offloaded allreduce; every member sees the same outcome. */
static agg_status_t shim_allreduce_net(shim_comm_t *sc, const agg_reduce_spec_t *spec)
{
    agg_request_t *req;
    agg_status_t st;

    if (shim.hybrid_frag > 0 &&
        spec->count * agg_dtype_size(spec->dtype) > (size_t)shim.hybrid_frag) {
        return shim_allreduce_frags(sc, spec);
    }
    st = agg_iallreduce(sc->agg, spec, &req);
    return st == AGG_OK ? shim_net_wait(AGG_COLL_ALLREDUCE, req) : st;
}

/* The host algorithm the communicator's table gives for this size. */
int shim_allreduce_host(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                        MPI_Op op, shim_comm_t *sc, shim_why_t why)
{
    static const shim_path_t paths[SHIM_ALG__COUNT] = {
        [SHIM_ALG_RECURSIVE_DOUBLING] = SHIM_PATH_RD,
        [SHIM_ALG_RABENSEIFNER]       = SHIM_PATH_RAB,
        [SHIM_ALG_RING]               = SHIM_PATH_RING,
    };
    int size = 0;
    shim_host_alg_t alg;

    PMPI_Type_size(dtype, &size);
    alg = shim_host_choose(&sc->tune, (size_t)size * (size_t)count, sc->size);
    shim_count(AGG_COLL_ALLREDUCE, paths[alg], why);
    return shim_host_allreduce(sbuf, rbuf, count, dtype, op, sc->pcomm, alg);
}

SHIM_API int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                           MPI_Op op, MPI_Comm comm)
{
    agg_reduce_spec_t spec;
    shim_comm_t *sc = NULL;
    shim_why_t why;
    shim_route_t r;
    agg_status_t st;

    if (!shim.on) {
        return PMPI_Allreduce(sbuf, rbuf, count, dtype, op, comm);
    }
    if (shim_gpu_dev(sbuf) || shim_gpu_dev(rbuf)) {
        return shim_gpu_allreduce(sbuf, rbuf, count, dtype, op, comm, NULL);
    }
    r = shim_route_args(dtype, op, count, &why);
    if (r == SHIM_ROUTE_NET) {
        sc = shim_comm_get(comm);
        r  = shim_route_reduce(AGG_COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, sc, &spec,
                               &why);
    }
    if (r == SHIM_ROUTE_NET && sc->hier) {
        return shim_hier_allreduce(sc, sbuf, rbuf, count, dtype, op, &spec);
    }
    if (r == SHIM_ROUTE_NET) {
        st = shim_allreduce_net(sc, &spec);
        if (st == AGG_OK) {
            return MPI_SUCCESS;
        }
        /*
         * Every member sees a failure in the tree, so all complete this call
         * the same way; the communicator stays offloaded (none may take
         * another path on its own), and a tree that is gone fails the next
         * calls at once.
         */
        if (sbuf == MPI_IN_PLACE) {
            /* part of rbuf may already hold reduced data: redoing it would be wrong */
            agg_error("in-place allreduce failed in the network (%s); cannot recover the "
                      "input", agg_strerror(st));
            shim_count(AGG_COLL_ALLREDUCE, SHIM_PATH_MPI, SHIM_WHY_NETWORK_ERROR);
            PMPI_Comm_call_errhandler(comm, MPI_ERR_INTERN);
            return MPI_ERR_INTERN;
        }
        agg_warn("allreduce failed in the network (%s); completing it on the host",
                 agg_strerror(st));
        r   = SHIM_ROUTE_HOST;
        why = SHIM_WHY_NETWORK_ERROR;
    }
    if (r == SHIM_ROUTE_HOST) {
        return shim_allreduce_host(sbuf, rbuf, count, dtype, op, sc, why);
    }
    shim_count(AGG_COLL_ALLREDUCE, SHIM_PATH_MPI, why);
    return PMPI_Allreduce(sbuf, rbuf, count, dtype, op, comm);
}

SHIM_API int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                            MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    agg_reduce_spec_t spec;
    agg_request_t *req;
    shim_comm_t *sc;
    shim_why_t why;

    if (!shim.on) {
        return PMPI_Iallreduce(sbuf, rbuf, count, dtype, op, comm, request);
    }
    if (shim_gpu_dev(sbuf) || shim_gpu_dev(rbuf)) {
        return shim_gpu_allreduce(sbuf, rbuf, count, dtype, op, comm, request);
    }
    sc = shim_comm_peek(comm);
    if (shim_route_reduce(AGG_COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, sc, &spec, &why) ==
        SHIM_ROUTE_NET) {
        if (sc->hier) {
            why = SHIM_WHY_LEADERS; /* the leaders' steps block */
        } else if (agg_iallreduce(sc->agg, &spec, &req) == AGG_OK) {
            shim_ireq_start(sc, AGG_COLL_ALLREDUCE, req, NULL, request);
            return MPI_SUCCESS;
        } else {
            why = SHIM_WHY_NETWORK_ERROR; /* the post fails alike everywhere */
        }
    }
    shim_count(AGG_COLL_ALLREDUCE, SHIM_PATH_MPI, why);
    return PMPI_Iallreduce(sbuf, rbuf, count, dtype, op, comm, request);
}
