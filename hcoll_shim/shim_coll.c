/*
 * The network path (shim_path_net) of every collective: the call as
 * routed by shim_call.c goes to the tree, blocking (waited for here) or
 * not (handed to the program as a generalized request, shim_request.c).
 * Device buffers go as they are where libagg stages them itself (allreduce,
 * reduce but in place, bcast of a contiguous type); the rest of them is
 * staged by the shim first (shim_gpu.c) and comes back here as host memory.
 *
 * A call that fails in the network fails on every member alike. The walk
 * then goes on to the next path (the host algorithms for an allreduce,
 * Open MPI for the others) when the input is intact: an in-place reduce at
 * the root and an in-place reduce-scatter keep a copy of it for that; an
 * in-place allreduce cannot (shim_allreduce.c). A non-blocking call whose
 * post fails (alike everywhere: the arguments) goes to Open MPI; what it
 * packs, unpacks or moves aside is in a buffer of its request's own.
 */
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "shim.h"

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

static agg_status_t shim_net_post(shim_call_t *c, agg_request_t **req)
{
    agg_comm_t *agg = c->sc->agg;

    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return agg_iallreduce(agg, &c->spec.red, req);
    case AGG_COLL_REDUCE:
        return agg_ireduce(agg, &c->spec.red, req);
    case AGG_COLL_BCAST:
        return agg_ibcast(agg, &c->spec.data, req);
    case AGG_COLL_BARRIER:
        return agg_ibarrier(agg, req);
    case AGG_COLL_REDUCE_SCATTER:
        return agg_ireduce_scatter(agg, &c->spec.red, req);
    default:
        return agg_iallgather(agg, &c->spec.data, req);
    }
}

/*
 * A blocking call in the network, waited for and counted: AGG_OK, or the
 * failure every member saw (logged; the caller restores what it must).
 */
static agg_status_t shim_net_block(shim_call_t *c)
{
    agg_request_t *req;
    agg_status_t st;

    c->sc->net_seq++;
    st = shim_net_post(c, &req);

    st = st == AGG_OK ? shim_net_wait(c->fn, req) : st;
    if (st != AGG_OK) {
        shim_net_warn(c->sc, c, st, shim_forced(c->coll) ? "an error" : "redone off the tree");
        c->fail = st;
    }
    return st;
}

/*
 * The walk goes on: the next path redoes the call from its intact input;
 * unless HCOLL_ENABLE_SHARP forces the call into the network and the
 * network failed it (not its arguments, which are MPI's to judge): then it
 * is an error.
 */
static int shim_net_failed(shim_call_t *c)
{
    int forced = shim_forced(c->coll) && c->fail != AGG_ERR_INVALID_PARAM &&
                 c->fail != AGG_ERR_NOT_SUPPORTED;

    if (c->request == NULL && !forced && shim_comm_agree(c->sc, c) != MPI_SUCCESS) {
        shim_comm_lost(c->sc, c->fail);
        return MPI_ERR_OTHER; /* members failed different calls */
    }
    c->why   = SHIM_WHY_NETWORK_ERROR;
    c->route = SHIM_ROUTE_HOST;
    if (c->request == NULL) {
        shim_comm_lost(c->sc, c->fail); /* a blocking call: every member is here */
    }
    if (forced) {
        return shim_call_fail(c);
    }
    if (c->request != NULL && c->fail == AGG_ERR_SHUTDOWN) {
        __atomic_store_n(&c->sc->nb_host, 1, __ATOMIC_RELAXED); /* the group is gone */
    }
    shim_requests_drain(c->sc); /* the communicator's earlier calls reach the host first */
    return SHIM_CALL_NEXT;
}

/* ---- bcast's packing --------------------------------------------------- */

void shim_bcast_pack(shim_call_t *c)
{
    int pos = 0;

    c->spec.data.rbuf = c->rbuf;
    if (shim_contig(c->dtype, c->count, c->bytes)) {
        return;
    }
    c->spec.data.rbuf = shim_scratch_or_abort(c->sc, (size_t)c->bytes);
    if (c->sc->rank == c->root) {
        PMPI_Pack(c->rbuf, c->count, c->dtype, c->spec.data.rbuf, (int)c->bytes, &pos,
                  c->sc->pcomm);
    }
}

int shim_bcast_unpack(shim_call_t *c)
{
    int pos = 0;

    if (c->spec.data.rbuf == c->rbuf || c->sc->rank == c->root) {
        return MPI_SUCCESS;
    }
    return PMPI_Unpack(c->spec.data.rbuf, (int)c->bytes, &pos, c->rbuf, c->count, c->dtype,
                       c->sc->pcomm);
}

/*
 * A non-blocking bcast's packing: packed now at the root, unpacked when it
 * completes elsewhere (into a copy of the type: the program may free its
 * own), in a buffer of its own (another call may use sc's scratch before).
 */
static void shim_ibcast_pack(shim_call_t *c, shim_ipack_t *pack)
{
    int pos = 0;

    pack->buf = malloc((size_t)c->bytes);
    if (pack->buf == NULL) {
        agg_error("out of memory for a %lld-byte packing buffer", c->bytes);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (c->sc->rank == c->root) {
        PMPI_Pack(c->rbuf, c->count, c->dtype, pack->buf, (int)c->bytes, &pos, c->sc->pcomm);
    } else {
        *pack = (shim_ipack_t){pack->buf, c->rbuf, c->count, MPI_DATATYPE_NULL, c->sc->pcomm,
                               (int)c->bytes};
        PMPI_Type_dup(c->dtype, &pack->utype);
    }
    c->spec.data.rbuf = pack->buf;
}

/* A request's own buffer of `bytes`; running out would split the ranks' paths: stop. */
static void *shim_ibuf_or_abort(shim_comm_t *sc, size_t bytes)
{
    (void)sc;
    void *p = malloc(bytes > 0 ? bytes : 1);

    if (p == NULL) {
        agg_error("out of memory for a %zu-byte buffer of a non-blocking call", bytes);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/*
 * A non-blocking in-place reduce-scatter (its input is all of rbuf, whose
 * start takes the result), allreduce or reduce: its input moves to a buffer
 * of the request's own, from which the network takes it (and the host, if
 * it has to redo the call).
 */
static void shim_ireduce_aside(shim_call_t *c, shim_ipack_t *pack)
{
    size_t bytes = (size_t)(c->coll == AGG_COLL_REDUCE_SCATTER ? c->total : c->count) *
                   agg_dtype_size(c->spec.red.dtype);

    pack->buf = shim_ibuf_or_abort(c->sc, bytes);
    memcpy(pack->buf, c->rbuf, bytes);
    c->spec.red.sbuf = pack->buf;
}

/* ---- allgather's layouts ---------------------------------------------- */

/*
 * Whether the blocks land in rbuf as the tree gathers them, back to back in
 * rank order: a contiguous type and, for MPI_Allgatherv, displacements
 * that are the running sum of the counts.
 */
static int shim_allgather_direct(const shim_call_t *c)
{
    int i, at = 0;

    if (!shim_contig(c->dtype, 1, c->esize)) {
        return 0;
    }
    for (i = 0; c->displs != NULL && i < c->sc->size; at += c->counts[i], ++i) {
        if (c->displs[i] != at) {
            return 0;
        }
    }
    return 1;
}

/*
 * An allgather's buffers for the tree. This rank's block is where the
 * program has it (in place: in rbuf, at its place), packed when it is not
 * contiguous; the gathered blocks go to rbuf when its layout is theirs
 * (shim_allgather_direct), else to a buffer that pack describes, unpacked
 * afterwards into rbuf as one type (the blocks at their displacements).
 * Both come from one buffer of get(): [gathered | my block].
 */
static void shim_allgather_prepare(shim_call_t *c, void *(*get)(shim_comm_t *, size_t),
                                   shim_ipack_t *pack)
{
    agg_data_spec_t *spec = &c->spec.data;
    size_t mine = (size_t)c->bytes, all = (size_t)c->total;
    const void *sbuf = c->sbuf;
    int scount = c->scount, direct = shim_allgather_direct(c), scontig, pos = 0;
    MPI_Datatype stype = c->stype;
    MPI_Aint lb, extent;
    uint8_t *buf;

    if (sbuf == MPI_IN_PLACE) {
        PMPI_Type_get_extent(c->dtype, &lb, &extent);
        sbuf   = (const uint8_t *)c->rbuf +
                 (size_t)extent * (size_t)(c->displs != NULL ? c->displs[c->sc->rank]
                                                             : c->sc->rank * c->count);
        scount = c->mine;
        stype  = c->dtype;
    }
    scontig = shim_contig(stype, scount, c->bytes);
    *pack   = (shim_ipack_t){NULL};
    if (direct && scontig) {
        spec->sbuf = sbuf;
        return;
    }
    buf       = get(c->sc, (direct ? 0 : all) + (scontig ? 0 : mine));
    pack->buf = buf;
    spec->sbuf = sbuf;
    if (!scontig) {
        PMPI_Pack(sbuf, scount, stype, buf + (direct ? 0 : all), (int)mine, &pos,
                  c->sc->pcomm);
        spec->sbuf = buf + (direct ? 0 : all);
    }
    if (direct) {
        return;
    }
    spec->rbuf = buf;
    *pack = (shim_ipack_t){buf, c->rbuf, 1, MPI_DATATYPE_NULL, c->sc->pcomm, (int)all};
    if (c->displs != NULL) {
        PMPI_Type_indexed(c->sc->size, c->counts, c->displs, c->dtype, &pack->utype);
        PMPI_Type_commit(&pack->utype);
    } else {
        pack->ucount = c->count * c->sc->size;
        PMPI_Type_dup(c->dtype, &pack->utype);
    }
}

/* ---- each collective's blocking form ------------------------------------ */

static int shim_reduce_net(shim_call_t *c)
{
    agg_reduce_spec_t *spec = &c->spec.red;
    size_t bytes = (size_t)c->count * agg_dtype_size(spec->dtype);
    int keep = c->sbuf == MPI_IN_PLACE && c->sc->rank == c->root;

    if (keep) {
        /* the root's input kept apart: a failure in the tree is redone from it */
        spec->sbuf = shim_scratch_or_abort(c->sc, bytes);
        memcpy((void *)spec->sbuf, c->rbuf, bytes);
    }
    if (shim_net_block(c) == AGG_OK) {
        return MPI_SUCCESS;
    }
    if (keep) {
        memcpy(c->rbuf, spec->sbuf, bytes);
    }
    return shim_net_failed(c);
}

static int shim_bcast_net(shim_call_t *c)
{
    shim_bcast_pack(c);
    if (shim_net_block(c) != AGG_OK) {
        return shim_net_failed(c); /* the root's buffer is intact */
    }
    return shim_bcast_unpack(c);
}

static int shim_reduce_scatter_net(shim_call_t *c)
{
    agg_reduce_spec_t *spec = &c->spec.red;
    size_t bytes = (size_t)c->total * agg_dtype_size(spec->dtype);
    void *copy;
    int ok;

    if (c->sbuf == MPI_IN_PLACE) {
        /* the input is all of rbuf, the result its start: the input moves aside */
        copy = shim_scratch(c->sc, bytes);
        ok   = copy != NULL;
        PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, c->sc->pcomm);
        if (!ok) {
            c->why   = SHIM_WHY_RESOURCES;
            c->route = SHIM_ROUTE_MPI;
            return SHIM_CALL_NEXT;
        }
        memcpy(copy, c->rbuf, bytes);
        spec->sbuf = copy;
    }
    if (shim_net_block(c) == AGG_OK) {
        return MPI_SUCCESS;
    }
    if (c->sbuf == MPI_IN_PLACE) {
        memcpy(c->rbuf, spec->sbuf, bytes); /* the input back */
    }
    return shim_net_failed(c);
}

static int shim_allgather_net(shim_call_t *c)
{
    shim_ipack_t pack = {0};
    int pos = 0, rc = MPI_SUCCESS;

    shim_allgather_prepare(c, shim_scratch_or_abort, &pack);
    if (shim_net_block(c) != AGG_OK) {
        rc = shim_net_failed(c); /* failed results are never written: the input is intact */
    } else if (pack.ubuf != NULL) {
        rc = PMPI_Unpack(pack.buf, pack.bytes, &pos, pack.ubuf, pack.ucount, pack.utype,
                         pack.ucomm);
    }
    if (pack.ubuf != NULL) {
        PMPI_Type_free(&pack.utype);
    }
    return rc;
}

/* ---- the path ----------------------------------------------------------- */

/*
 * A non-blocking call: handed to the program once posted. A post fails
 * alike on every rank (the arguments), so MPI then takes the call everywhere.
 */
static int shim_net_start(shim_call_t *c)
{
    shim_ipack_t pack = {0};
    agg_request_t *req;

    if (c->coll == AGG_COLL_BCAST && !shim_contig(c->dtype, c->count, c->bytes)) {
        shim_ibcast_pack(c, &pack);
    } else if (c->coll == AGG_COLL_REDUCE_SCATTER && c->sbuf == MPI_IN_PLACE) {
        shim_ireduce_aside(c, &pack);
    } else if ((c->coll == AGG_COLL_ALLREDUCE || c->coll == AGG_COLL_REDUCE) &&
               c->sbuf == MPI_IN_PLACE && !shim_forced(c->coll) && c->rmem == AGG_MEM_HOST) {
        /* an in-place allreduce (reduce, at the root): its input stays whole, should
           the host have to redo it (shim_request.c) */
        shim_ireduce_aside(c, &pack);
    } else if (c->coll == AGG_COLL_ALLGATHER) {
        shim_allgather_prepare(c, shim_ibuf_or_abort, &pack);
    }
    c->fail = shim_net_post(c, &req);
    if (c->fail != AGG_OK) {
        if (pack.ubuf != NULL) {
            PMPI_Type_free(&pack.utype);
        }
        free(pack.buf);
        return shim_net_failed(c);
    }
    shim_ireq_start(c, req, &pack);
    return MPI_SUCCESS;
}

static int shim_net_take(shim_call_t *c)
{
    if (c->route != SHIM_ROUTE_NET || c->sc->hier) {
        return 0; /* through node leaders: shim_path_leaders */
    }
    if (c->smem == AGG_MEM_HOST && c->rmem == AGG_MEM_HOST) {
        return 1;
    }
    /* device buffers: where libagg stages them itself, whole */
    return c->coll == AGG_COLL_ALLREDUCE ||
           (c->coll == AGG_COLL_REDUCE && c->sbuf != MPI_IN_PLACE) ||
           (c->coll == AGG_COLL_BCAST && shim_contig(c->dtype, c->count, c->bytes));
}

/* The buffers libagg reads and writes, and where they are (in place: sbuf is rbuf). */
static void shim_net_buffers(shim_call_t *c)
{
    agg_reduce_spec_t *red = &c->spec.red;

    switch (c->coll) {
    case AGG_COLL_BCAST:
    case AGG_COLL_ALLGATHER:
        c->spec.data.sbuf     = c->sbuf;
        c->spec.data.rbuf     = c->rbuf;
        c->spec.data.rbuf_mem = c->rmem;
        c->spec.data.counts   = c->uneven ? shim_blocks(c->sc, c->counts, (size_t)c->esize)
                                          : NULL;
        break;
    case AGG_COLL_BARRIER:
        break;
    default:
        red->sbuf     = c->sbuf == MPI_IN_PLACE ? c->rbuf : c->sbuf;
        red->rbuf     = c->rbuf;
        red->sbuf_mem = c->sbuf == MPI_IN_PLACE ? c->rmem : c->smem;
        red->rbuf_mem = c->rmem;
        red->counts   = c->uneven ? shim_blocks(c->sc, c->counts, 1) : NULL;
        if (c->coll == AGG_COLL_REDUCE && c->sc->rank != c->root) {
            red->rbuf     = NULL; /* not written, may be anything on non-roots */
            red->sbuf     = c->sbuf;
            red->sbuf_mem = c->smem;
            red->rbuf_mem = AGG_MEM_HOST;
        }
        break;
    }
}

static int shim_net_run(shim_call_t *c)
{
    shim_net_buffers(c);
    if (c->request != NULL) {
        return shim_net_start(c);
    }
    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return shim_allreduce_net(c);
    case AGG_COLL_REDUCE:
        return shim_reduce_net(c);
    case AGG_COLL_BCAST:
        return shim_bcast_net(c);
    case AGG_COLL_BARRIER:
        return shim_net_block(c) == AGG_OK ? MPI_SUCCESS : shim_net_failed(c);
    case AGG_COLL_REDUCE_SCATTER:
        return shim_reduce_scatter_net(c);
    default:
        return shim_allgather_net(c);
    }
}

const shim_call_path_ops_t shim_path_net = {"network", shim_net_take, shim_net_run};
