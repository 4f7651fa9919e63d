/*
 * The other collectives: MPI_Reduce, MPI_Bcast, MPI_Barrier (with their
 * non-blocking forms), MPI_Reduce_scatter_block and MPI_Allgather. Each goes
 * to the network when it can, to Open MPI otherwise, counted with the
 * reason. A call that fails in the network fails on every member alike; it
 * is redone by Open MPI when its input is still intact, which it is except
 * for an in-place reduce at the root.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "shim.h"

/*
 * The bytes of a bcast's or allgather's data: the size of the type
 * signature, which MPI requires to match on every rank, whatever each
 * rank's datatype (its layout may differ: a rank with a non-contiguous one
 * packs and unpacks). -1 if MPI will reject the arguments.
 */
static long long shim_sig_bytes(MPI_Datatype dtype, int count)
{
    int size;

    if (count < 0 || dtype == MPI_DATATYPE_NULL || PMPI_Type_size(dtype, &size) != MPI_SUCCESS) {
        return -1;
    }
    return (long long)size * count;
}

/* Whether count dtype at buf are `bytes` contiguous bytes (else: pack them). */
static int shim_contig(MPI_Datatype dtype, int count, long long bytes)
{
    return shim_dtype_bytes(dtype, count) == bytes;
}

/*
 * Whether MPI can pack dtype (it is committed): a type it cannot goes to
 * MPI, which reports the error the program's handler expects.
 */
static int shim_type_ok(const shim_comm_t *sc, MPI_Datatype dtype)
{
    char none;
    int pos = 0;

    return PMPI_Pack(&none, 0, dtype, &none, 0, &pos, sc->pcomm) == MPI_SUCCESS;
}

/* sc's scratch of `bytes`; running out here would split the ranks' paths: stop. */
static void *shim_scratch_or_abort(shim_comm_t *sc, size_t bytes)
{
    void *p = shim_scratch(sc, bytes);

    if (p == NULL) {
        agg_error("out of memory for a %zu-byte packing buffer", bytes);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* Where a bcast or allgather of `bytes` (per rank) goes on sc. */
static shim_route_t shim_route_data(agg_coll_type_t coll, long long bytes, shim_comm_t *sc,
                                    shim_why_t *why)
{
    if (bytes <= 0) {
        *why = bytes == 0 ? SHIM_WHY_TOO_SMALL : SHIM_WHY_NONE; /* MPI reports errors */
        return SHIM_ROUTE_MPI;
    }
    if (bytes > INT_MAX / (sc != NULL ? sc->size : 1)) {
        *why = SHIM_WHY_TOO_LARGE; /* counts beyond int: MPI's */
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

/*
 * A non-blocking call's request, handed to the program; 0 when the post
 * failed, which it does alike on every rank (the arguments), so MPI then
 * takes the call everywhere.
 */
static int shim_start(shim_comm_t *sc, agg_coll_type_t coll, agg_status_t posted,
                      agg_request_t **req, shim_ipack_t *pack, MPI_Request *request)
{
    if (posted != AGG_OK) {
        free(pack != NULL ? pack->buf : NULL);
        return 0;
    }
    shim_ireq_start(sc, coll, *req, pack, request);
    return 1;
}

/* ---- reduce ------------------------------------------------------------ */

shim_route_t shim_reduce_route(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                               MPI_Op op, int root, shim_comm_t *sc, agg_reduce_spec_t *spec,
                               shim_why_t *why)
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
    if (shim_gpu_dev(sbuf) || shim_gpu_dev(rbuf)) {
        return shim_gpu_reduce(sbuf, rbuf, count, dtype, op, root, comm, NULL);
    }
    r = shim_route_args(dtype, op, count, &why);
    if (r == SHIM_ROUTE_NET) {
        sc = shim_comm_get(comm);
        r  = shim_reduce_route(sbuf, rbuf, count, dtype, op, root, sc, &spec, &why);
    }
    if (r == SHIM_ROUTE_NET) {
        size_t bytes = (size_t)count * agg_dtype_size(spec.dtype);

        if (sbuf == MPI_IN_PLACE && sc->rank == root) {
            /* the root's input kept apart: a failure in the tree is redone from it */
            spec.sbuf = shim_scratch_or_abort(sc, bytes);
            memcpy((void *)spec.sbuf, rbuf, bytes);
        }
        st = agg_ireduce(sc->agg, &spec, &req);
        st = shim_run(AGG_COLL_REDUCE, st, &req);
        if (st == AGG_OK) {
            return MPI_SUCCESS;
        }
        if (sbuf == MPI_IN_PLACE && sc->rank == root) {
            memcpy(rbuf, spec.sbuf, bytes);
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
    if (shim_gpu_dev(sbuf) || shim_gpu_dev(rbuf)) {
        return shim_gpu_reduce(sbuf, rbuf, count, dtype, op, root, comm, request);
    }
    sc = shim_comm_peek(comm);
    if (shim_reduce_route(sbuf, rbuf, count, dtype, op, root, sc, &spec, &why) ==
        SHIM_ROUTE_NET) {
        if (shim_start(sc, AGG_COLL_REDUCE, agg_ireduce(sc->agg, &spec, &req), &req, NULL,
                       request)) {
            return MPI_SUCCESS;
        }
        why = SHIM_WHY_NETWORK_ERROR;
    }
    shim_count(AGG_COLL_REDUCE, SHIM_PATH_MPI, why);
    return PMPI_Ireduce(sbuf, rbuf, count, dtype, op, root, comm, request);
}

/* ---- bcast ------------------------------------------------------------- */

shim_route_t shim_bcast_route(int count, MPI_Datatype dtype, int root, shim_comm_t *sc,
                              shim_why_t *why)
{
    if (sc != NULL && (root < 0 || root >= sc->size)) {
        *why = SHIM_WHY_NONE; /* MPI reports the error */
        return SHIM_ROUTE_MPI;
    }
    return shim_route_data(AGG_COLL_BCAST, shim_sig_bytes(dtype, count), sc, why);
}

SHIM_API int MPI_Bcast(void *buf, int count, MPI_Datatype dtype, int root, MPI_Comm comm)
{
    long long bytes = shim_sig_bytes(dtype, count);
    agg_data_spec_t spec = {.rbuf = buf, .bytes = (size_t)bytes, .root = root};
    agg_request_t *req = NULL;
    shim_comm_t *sc = NULL;
    shim_why_t why = SHIM_WHY_TOO_SMALL;
    shim_route_t r = SHIM_ROUTE_MPI;
    int contig, pos = 0, rc = MPI_SUCCESS;

    if (!shim.on) {
        return PMPI_Bcast(buf, count, dtype, root, comm);
    }
    if (shim_gpu_dev(buf)) {
        return shim_gpu_bcast(buf, count, dtype, root, comm, NULL);
    }
    if (bytes > 0) {
        sc = shim_comm_get(comm);
        r  = shim_bcast_route(count, dtype, root, sc, &why);
    }
    if (r == SHIM_ROUTE_NET && !shim_contig(dtype, count, bytes) && !shim_type_ok(sc, dtype)) {
        r = SHIM_ROUTE_MPI;
    }
    if (r == SHIM_ROUTE_NET) {
        contig = shim_contig(dtype, count, bytes);
        if (!contig) {
            spec.rbuf = shim_scratch_or_abort(sc, (size_t)bytes);
            if (sc->rank == root) {
                PMPI_Pack(buf, count, dtype, spec.rbuf, (int)bytes, &pos, sc->pcomm);
            }
        }
        if (sc->hier) {
            rc = shim_hier_bcast(sc, spec.rbuf, (int)bytes, MPI_BYTE, root, (size_t)bytes);
        } else if (shim_run(AGG_COLL_BCAST, agg_ibcast(sc->agg, &spec, &req), &req) != AGG_OK) {
            /* the root's buffer is intact: MPI redoes it */
            shim_count(AGG_COLL_BCAST, SHIM_PATH_MPI, SHIM_WHY_NETWORK_ERROR);
            return PMPI_Bcast(buf, count, dtype, root, comm);
        }
        if (!contig && sc->rank != root && rc == MPI_SUCCESS) {
            pos = 0;
            rc  = PMPI_Unpack(spec.rbuf, (int)bytes, &pos, buf, count, dtype, sc->pcomm);
        }
        return rc;
    }
    shim_count(AGG_COLL_BCAST, SHIM_PATH_MPI, why);
    return PMPI_Bcast(buf, count, dtype, root, comm);
}

SHIM_API int MPI_Ibcast(void *buf, int count, MPI_Datatype dtype, int root, MPI_Comm comm,
                        MPI_Request *request)
{
    long long bytes = shim_sig_bytes(dtype, count);
    agg_data_spec_t spec = {.rbuf = buf, .bytes = (size_t)bytes, .root = root};
    shim_ipack_t pack = {0};
    agg_request_t *req = NULL;
    shim_comm_t *sc = shim_comm_peek(comm);
    shim_why_t why = SHIM_WHY_TOO_SMALL;
    shim_route_t r = SHIM_ROUTE_MPI;
    int pos = 0;

    if (!shim.on) {
        return PMPI_Ibcast(buf, count, dtype, root, comm, request);
    }
    if (shim_gpu_dev(buf)) {
        return shim_gpu_bcast(buf, count, dtype, root, comm, request);
    }
    if (bytes > 0) {
        r = shim_bcast_route(count, dtype, root, sc, &why);
    }
    if (r == SHIM_ROUTE_NET && sc->hier) {
        why = SHIM_WHY_LEADERS; /* the leaders' steps block */
    } else if (r == SHIM_ROUTE_NET && !shim_contig(dtype, count, bytes) &&
               !shim_type_ok(sc, dtype)) {
        why = SHIM_WHY_NONE; /* MPI reports it */
    } else if (r == SHIM_ROUTE_NET) {
        if (!shim_contig(dtype, count, bytes)) {
            /* packed now at the root, unpacked when it completes elsewhere
               (into a copy of the type: the program may free its own) */
            pack.buf = malloc((size_t)bytes);
            if (pack.buf == NULL) {
                agg_error("out of memory for a %lld-byte packing buffer", bytes);
                PMPI_Abort(MPI_COMM_WORLD, 1);
            }
            if (sc->rank == root) {
                PMPI_Pack(buf, count, dtype, pack.buf, (int)bytes, &pos, sc->pcomm);
            } else {
                pack = (shim_ipack_t){pack.buf, buf, count, MPI_DATATYPE_NULL, sc->pcomm,
                                      (int)bytes};
                PMPI_Type_dup(dtype, &pack.utype);
            }
            spec.rbuf = pack.buf;
        }
        if (shim_start(sc, AGG_COLL_BCAST, agg_ibcast(sc->agg, &spec, &req), &req, &pack,
                       request)) {
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
    r = shim_route_data(AGG_COLL_BARRIER, 1, sc, &why);
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
    r = shim_route_data(AGG_COLL_BARRIER, 1, sc, &why);
    if (r == SHIM_ROUTE_NET && sc->hier) {
        why = SHIM_WHY_LEADERS; /* the leaders' steps block */
    } else if (r == SHIM_ROUTE_NET) {
        if (shim_start(sc, AGG_COLL_BARRIER, agg_ibarrier(sc->agg, &req), &req, NULL,
                       request)) {
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
    if (shim_gpu_dev(sbuf) || shim_gpu_dev(rbuf)) {
        return shim_gpu_reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm);
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
    long long bytes = shim_sig_bytes(rtype, rcount); /* per rank, alike everywhere */
    agg_data_spec_t spec = {.rbuf = rbuf, .sbuf = sbuf, .bytes = (size_t)bytes};
    agg_request_t *req = NULL;
    shim_comm_t *sc = NULL;
    shim_why_t why = SHIM_WHY_TOO_SMALL;
    shim_route_t r = SHIM_ROUTE_MPI;
    MPI_Aint lb, extent;
    uint8_t *scratch;
    int rcontig, pos = 0, rc = MPI_SUCCESS, in_place = sbuf == MPI_IN_PLACE;

    if (!shim.on) {
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    }
    if (shim_gpu_dev(sbuf) || shim_gpu_dev(rbuf)) {
        return shim_gpu_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    }
    if (!in_place && shim_sig_bytes(stype, scount) != bytes) {
        bytes = -1; /* the two sides' signatures differ: MPI reports it */
    }
    if (bytes > 0) {
        sc = shim_comm_get(comm);
        r  = shim_route_data(AGG_COLL_ALLGATHER, bytes, sc, &why);
    }
    if (r == SHIM_ROUTE_NET &&
        ((!shim_contig(rtype, rcount, bytes) && !shim_type_ok(sc, rtype)) ||
         (!in_place && !shim_contig(stype, scount, bytes) && !shim_type_ok(sc, stype)))) {
        r   = SHIM_ROUTE_MPI;
        why = SHIM_WHY_NONE; /* MPI reports it */
    }
    if (r != SHIM_ROUTE_NET) {
        shim_count(AGG_COLL_ALLGATHER, SHIM_PATH_MPI, why);
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    }
    if (in_place) {
        /* my block is in rbuf, at its place */
        PMPI_Type_get_extent(rtype, &lb, &extent);
        sbuf   = (const uint8_t *)rbuf + (size_t)sc->rank * (size_t)rcount * (size_t)extent;
        scount = rcount;
        stype  = rtype;
    }
    /* the layouts on this rank: blocks not contiguous are packed in scratch */
    rcontig = shim_contig(rtype, rcount, bytes);
    scratch = rcontig && shim_contig(stype, scount, bytes) ? NULL :
              shim_scratch_or_abort(sc, (size_t)bytes * ((size_t)sc->size + 1));
    spec.sbuf = sbuf;
    if (!shim_contig(stype, scount, bytes)) {
        PMPI_Pack(sbuf, scount, stype, scratch, (int)bytes, &pos, sc->pcomm);
        spec.sbuf = scratch;
    }
    if (!rcontig) {
        spec.rbuf = scratch + bytes;
    }
    if (shim_run(AGG_COLL_ALLGATHER, agg_iallgather(sc->agg, &spec, &req), &req) != AGG_OK) {
        /* failed results are never written: the input is intact */
        shim_count(AGG_COLL_ALLGATHER, SHIM_PATH_MPI, SHIM_WHY_NETWORK_ERROR);
        return PMPI_Allgather(in_place ? MPI_IN_PLACE : sbuf, scount, stype, rbuf, rcount,
                              rtype, comm);
    }
    if (!rcontig) {
        pos = 0;
        rc  = PMPI_Unpack(spec.rbuf, (int)(bytes * sc->size), &pos, rbuf, rcount * sc->size,
                          rtype, sc->pcomm);
    }
    return rc;
}
