/*
 * Every intercepted collective, as one call descriptor (shim_call_t) and
 * one walk. An entry point fills the descriptor with its arguments;
 * shim_call says where the buffers are, routes the call once on its
 * arguments and communicator (NET, HOST or MPI, with the reason it is not
 * offloaded), and walks the collective's list of paths: the first that
 * takes the call runs it. A path whose run fails alike on every member
 * with the input intact (the network's) sets the reason and the walk goes
 * on, as staging device buffers does with host copies of them. Open MPI's
 * path ends every list and takes whatever reaches it.
 *
 *   allreduce       network, device ring, stage, node leaders, host, MPI
 *   reduce          network, stage, MPI
 *   bcast           network, stage, node leaders, MPI
 *   barrier         network, node leaders, MPI
 *   reduce-scatter  network, stage, MPI
 *   allgather       network, stage, MPI (MPI_Allgatherv too: its blocks
 *                   back to back in the tree, placed at displs on each rank)
 *
 * Routing looks at the arguments first: derived types, user ops, types and
 * ops the tree does not reduce, count 0 and intercommunicators go to MPI
 * untouched, and only then is the communicator's state made (blocking
 * calls) or looked up (non-blocking ones).
 */
#include <limits.h>

#include "agg/log.h"
#include "shim.h"

#define SHIM_CALL_PATHS 6 /* the longest list */

static const shim_call_path_ops_t *const shim_call_paths[AGG_COLL__COUNT][SHIM_CALL_PATHS] = {
    [AGG_COLL_ALLREDUCE]      = {&shim_path_net, &shim_path_gpu_ring, &shim_path_stage,
                                 &shim_path_leaders, &shim_path_host, &shim_path_mpi},
    [AGG_COLL_REDUCE]         = {&shim_path_net, &shim_path_stage, &shim_path_mpi},
    [AGG_COLL_BCAST]          = {&shim_path_net, &shim_path_stage, &shim_path_leaders,
                                 &shim_path_mpi},
    [AGG_COLL_BARRIER]        = {&shim_path_net, &shim_path_leaders, &shim_path_mpi},
    [AGG_COLL_REDUCE_SCATTER] = {&shim_path_net, &shim_path_stage, &shim_path_mpi},
    [AGG_COLL_ALLGATHER]      = {&shim_path_net, &shim_path_stage, &shim_path_mpi},
};

/* ---- routing ----------------------------------------------------------- */

/*
 * A reduction's arguments alone: MPI for derived types and user ops (which
 * only MPI knows how to apply), for types and ops the tree does not reduce
 * (long double, complex, bool, MPI_REPLACE: MPI decides whether they are
 * even valid), and for count 0; else NONE (the network, or where it cannot
 * be used the host algorithms, whose element-wise kernels are the tree's).
 */
static shim_why_t shim_route_args(MPI_Datatype dtype, MPI_Op op, long long count)
{
    int adt, aop;

    if (count <= 0) {
        return SHIM_WHY_TOO_SMALL; /* nothing to reduce; MPI checks the arguments */
    }
    if (!shim_dtype_named(dtype)) {
        return SHIM_WHY_DERIVED;
    }
    aop = shim_map_op(op);
    if (aop < 0) {
        return op == MPI_REPLACE || op == MPI_NO_OP ? SHIM_WHY_OP : SHIM_WHY_USER_OP;
    }
    adt = shim_map_dtype(dtype);
    if (adt < 0) {
        return SHIM_WHY_TYPE;
    }
    if (agg_reduce_fn(adt, aop) == NULL) {
        return SHIM_WHY_OP; /* e.g. a bitwise op on floats: MPI reports it */
    }
    return SHIM_WHY_NONE;
}

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

/*
 * Whether MPI can pack count dtype as `bytes` (contiguous, or committed): a
 * type it cannot goes to MPI, which reports the error the program expects.
 */
static int shim_type_ok(const shim_comm_t *sc, MPI_Datatype dtype, int count, long long bytes)
{
    char none;
    int pos = 0;

    return shim_contig(dtype, count, bytes) ||
           PMPI_Pack(&none, 0, dtype, &none, 0, &pos, sc->pcomm) == MPI_SUCCESS;
}

/*
 * The communicator's part: its state (made by blocking calls only), and
 * whether it is offloaded for this collective. A root out of range is
 * MPI's to report.
 */
static void shim_route_comm(shim_call_t *c, shim_route_t not_net)
{
    shim_comm_t *sc = c->request == NULL ? shim_comm_get(c->comm) : shim_comm_peek(c->comm);

    c->sc    = sc;
    c->route = SHIM_ROUTE_MPI;
    if (sc != NULL && (c->coll == AGG_COLL_REDUCE || c->coll == AGG_COLL_BCAST) &&
        (c->root < 0 || c->root >= sc->size)) {
        c->why = SHIM_WHY_NONE;
    } else if ((c->coll == AGG_COLL_ALLGATHER ? c->total : c->bytes) > INT_MAX) {
        c->why = SHIM_WHY_TOO_LARGE; /* counts beyond int: MPI's */
    } else if (sc == NULL || sc->inter) {
        c->why = sc != NULL ? SHIM_WHY_INTERCOMM : SHIM_WHY_LAZY;
    } else {
        c->why = shim_comm_why(sc, c->coll);
        if (c->why == SHIM_WHY_NONE && c->request != NULL &&
            __atomic_load_n(&sc->nb_host, __ATOMIC_RELAXED)) {
            /* the group is gone: a member that has not seen it yet fails the call
               in the network and redoes it on the host, in the same order */
            c->why = SHIM_WHY_NETWORK_ERROR;
        }
        c->route = c->why == SHIM_WHY_NONE ? SHIM_ROUTE_NET : not_net;
        if (sc->state == SHIM_COMM_FAILED && shim_forced(c->coll)) {
            c->route = SHIM_ROUTE_FAIL;
            c->fail  = sc->fail;
        }
    }
}

/*
 * A reduction (count elements per block), with its spec for the network
 * but the buffers (the network path's: a staged call has others).
 */
static void shim_route_reduce(shim_call_t *c)
{
    agg_reduce_spec_t *spec = &c->spec.red;
    long long bytes;

    c->why = shim_route_args(c->dtype, c->op,
                             c->coll == AGG_COLL_REDUCE_SCATTER ? c->total : c->count);
    if (c->why != SHIM_WHY_NONE) {
        return;
    }
    shim_route_comm(c, SHIM_ROUTE_HOST);
    if (c->route != SHIM_ROUTE_NET) {
        return;
    }
    spec->dtype = (agg_dtype_t)shim_map_dtype(c->dtype);
    spec->op    = (agg_op_t)shim_map_op(c->op);
    spec->count = (size_t)c->count;
    bytes       = (long long)c->count * (long long)agg_dtype_size(spec->dtype);
    if (c->coll == AGG_COLL_ALLREDUCE && ((shim.max_bytes > 0 && bytes > shim.max_bytes) ||
                                          (shim.large_host && bytes >= shim.large_bytes))) {
        c->why   = SHIM_WHY_TOO_LARGE;
        c->route = SHIM_ROUTE_HOST;
        return;
    }
    spec->root = c->root;
}

/*
 * A bcast or allgather of c->bytes (an allgather's: this rank's block, of
 * c->total in all): -1 when MPI reports the arguments.
 */
static void shim_route_data(shim_call_t *c)
{
    agg_data_spec_t *spec = &c->spec.data;
    int gather = c->coll == AGG_COLL_ALLGATHER;

    if (c->bytes < 0) {
        c->why = SHIM_WHY_NONE; /* MPI reports it */
        return;
    }
    if ((gather ? c->total : c->bytes) == 0) {
        c->why = SHIM_WHY_TOO_SMALL;
        return;
    }
    shim_route_comm(c, SHIM_ROUTE_MPI);
    if (c->route != SHIM_ROUTE_NET || (c->request != NULL && c->sc->hier)) {
        return;
    }
    if (gather ? !shim_type_ok(c->sc, c->dtype, 1, c->esize) ||
                     (c->sbuf != MPI_IN_PLACE &&
                      !shim_type_ok(c->sc, c->stype, c->scount, c->bytes))
               : !shim_type_ok(c->sc, c->dtype, c->count, c->bytes)) {
        c->why   = SHIM_WHY_NONE; /* MPI reports it */
        c->route = SHIM_ROUTE_MPI;
        return;
    }
    spec->bytes = c->uneven ? 0 : (size_t)c->bytes;
    spec->root  = c->root;
}

/*
 * A reduce-scatter's or allgather's blocks: c->total (the elements of
 * every block, times `unit`), c->mine (this rank's elements), and whether
 * MPI's counts (the same on every rank, as MPI requires, so every rank
 * decides alike) differ. 0 for a negative count: MPI reports it.
 */
static int shim_call_blocks(shim_call_t *c, long long unit)
{
    int size, rank, i;

    if (PMPI_Comm_size(c->comm, &size) != MPI_SUCCESS ||
        PMPI_Comm_rank(c->comm, &rank) != MPI_SUCCESS) {
        return 0;
    }
    if (c->counts == NULL) {
        c->total = (long long)c->count * size * unit;
        c->mine  = c->count;
        return c->count >= 0;
    }
    for (c->total = 0, i = 0; i < size; ++i) {
        if (c->counts[i] < 0) {
            return 0;
        }
        c->total += c->counts[i] * unit;
        c->uneven = c->uneven || c->counts[i] != c->counts[0];
    }
    c->count = c->counts[0];
    c->mine  = c->counts[rank];
    return 1;
}

/*
 * An allgather's blocks, in bytes of the type signature (which MPI requires
 * to match, whatever each rank's layout): c->bytes (this rank's), c->total,
 * c->esize. c->bytes is -1 for arguments MPI reports: a negative count, or
 * a send side that is not this rank's block.
 */
static void shim_gather_blocks(shim_call_t *c)
{
    c->bytes = -1;
    c->esize = (int)shim_sig_bytes(c->dtype, 1);
    if (c->esize < 0 || !shim_call_blocks(c, c->esize) ||
        (c->sbuf != MPI_IN_PLACE &&
         shim_sig_bytes(c->stype, c->scount) != (long long)c->mine * c->esize)) {
        return;
    }
    c->bytes = (long long)c->mine * c->esize;
}

static void shim_route(shim_call_t *c)
{
    c->route = SHIM_ROUTE_MPI;
    if (c->comm == MPI_COMM_NULL) {
        c->why = SHIM_WHY_NONE; /* not a communicator: MPI's error to report */
        return;
    }
    if (c->coll == AGG_COLL_REDUCE_SCATTER && !shim_call_blocks(c, 1)) {
        c->why = SHIM_WHY_NONE; /* MPI reports the counts */
        return;
    }
    switch (c->coll) {
    case AGG_COLL_BCAST:
        c->bytes = shim_sig_bytes(c->dtype, c->count);
        shim_route_data(c);
        break;
    case AGG_COLL_ALLGATHER:
        shim_gather_blocks(c);
        shim_route_data(c);
        break;
    case AGG_COLL_BARRIER:
        shim_route_comm(c, SHIM_ROUTE_MPI);
        break;
    default:
        shim_route_reduce(c);
        break;
    }
    if (c->route == SHIM_ROUTE_NET && c->request != NULL && c->sc->hier) {
        c->why   = SHIM_WHY_LEADERS; /* the leaders' steps block */
        c->route = SHIM_ROUTE_HOST;
    }
}

/* ---- the walk ---------------------------------------------------------- */

int shim_call_walk(shim_call_t *c)
{
    const shim_call_path_ops_t *const *path = shim_call_paths[c->coll];
    int rc = SHIM_CALL_NEXT;

    for (; rc == SHIM_CALL_NEXT; ++path) {
        if ((*path)->take(c)) {
            agg_trace("%s: %s", agg_coll_name(c->coll), (*path)->name);
            rc = (*path)->run(c);
        }
    }
    return rc;
}

/* Open MPI's own collective, with c's buffers. */
int shim_call_pmpi(const shim_call_t *c)
{
    int nb = c->request != NULL;

    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return nb ? PMPI_Iallreduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, c->comm,
                                    c->request)
                  : PMPI_Allreduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, c->comm);
    case AGG_COLL_REDUCE:
        return nb ? PMPI_Ireduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, c->root, c->comm,
                                 c->request)
                  : PMPI_Reduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, c->root, c->comm);
    case AGG_COLL_BCAST:
        return nb ? PMPI_Ibcast(c->rbuf, c->count, c->dtype, c->root, c->comm, c->request)
                  : PMPI_Bcast(c->rbuf, c->count, c->dtype, c->root, c->comm);
    case AGG_COLL_BARRIER:
        return nb ? PMPI_Ibarrier(c->comm, c->request) : PMPI_Barrier(c->comm);
    case AGG_COLL_REDUCE_SCATTER:
        if (c->counts != NULL) {
            return nb ? PMPI_Ireduce_scatter(c->sbuf, c->rbuf, c->counts, c->dtype, c->op,
                                             c->comm, c->request)
                      : PMPI_Reduce_scatter(c->sbuf, c->rbuf, c->counts, c->dtype, c->op,
                                            c->comm);
        }
        return nb ? PMPI_Ireduce_scatter_block(c->sbuf, c->rbuf, c->count, c->dtype, c->op,
                                               c->comm, c->request)
                  : PMPI_Reduce_scatter_block(c->sbuf, c->rbuf, c->count, c->dtype, c->op,
                                              c->comm);
    default:
        if (c->displs != NULL) {
            return nb ? PMPI_Iallgatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->counts,
                                         c->displs, c->dtype, c->comm, c->request)
                      : PMPI_Allgatherv(c->sbuf, c->scount, c->stype, c->rbuf, c->counts,
                                        c->displs, c->dtype, c->comm);
        }
        return nb ? PMPI_Iallgather(c->sbuf, c->scount, c->stype, c->rbuf, c->count, c->dtype,
                                    c->comm, c->request)
                  : PMPI_Allgather(c->sbuf, c->scount, c->stype, c->rbuf, c->count, c->dtype,
                                   c->comm);
    }
}

static int shim_mpi_take(shim_call_t *c)
{
    return 1;
}

static int shim_mpi_run(shim_call_t *c)
{
    shim_count(c->fn, SHIM_PATH_MPI, c->why);
    return shim_call_pmpi(c);
}

const shim_call_path_ops_t shim_path_mpi = {"mpi", shim_mpi_take, shim_mpi_run};

int shim_call(shim_call_t *c)
{
    if (!shim.on) {
        return shim_call_pmpi(c);
    }
    c->fn = (shim_fn_t)(2 * c->coll + (c->request != NULL));
    if (c->counts != NULL) {
        c->fn = (c->coll == AGG_COLL_ALLGATHER ? SHIM_FN_ALLGATHERV : SHIM_FN_REDUCE_SCATTER) +
                (c->request != NULL);
    }
    c->smem = shim_gpu_mem(c->sbuf);
    c->rmem = shim_gpu_mem(c->rbuf);
    shim_requests_redo(); /* what the network failed goes to the host first */
    shim_route(c);
    if (c->sc != NULL && __atomic_load_n(&c->sc->broken, __ATOMIC_RELAXED)) {
        c->why   = SHIM_WHY_NETWORK_ERROR; /* its members stand at different calls */
        c->route = SHIM_ROUTE_FAIL;
    }
    if (c->route != SHIM_ROUTE_NET && c->sc != NULL) {
        shim_requests_drain(c->sc); /* the host sees the communicator's calls in order */
    }
    return c->route == SHIM_ROUTE_FAIL ? shim_call_fail(c) : shim_call_walk(c);
}

void shim_net_warn(shim_comm_t *sc, const shim_call_t *c, agg_status_t st, const char *then)
{
    /* every member sees the same failure: its first rank says it for all */
    if (__atomic_fetch_add(&sc->net_failures, 1, __ATOMIC_RELAXED) == 0 && sc->rank == 0) {
        agg_warn("%s failed in the network (%s): %s (the next failures on this communicator "
                 "of %d ranks are counted in AGG_STATS, network_error, not logged)",
                 shim_fn_name(c->fn), agg_strerror(st), then, sc->size);
    } else {
        agg_debug("%s failed in the network (%s): %s", shim_fn_name(c->fn), agg_strerror(st),
                  then);
    }
}

int shim_call_fail(shim_call_t *c)
{
    shim_comm_t *sc = c->sc;

    c->route = SHIM_ROUTE_FAIL;
    shim_count(c->fn, SHIM_PATH_FAILED, c->why);
    if (sc != NULL && !__atomic_exchange_n(&sc->fail_said, 1, __ATOMIC_RELAXED) &&
        sc->rank == 0) {
        agg_error("HCOLL_ENABLE_SHARP=%d forces collectives into the network, but %s on a "
                  "communicator of %d ranks cannot have it: %s (%s); it fails with "
                  "MPI_ERR_OTHER, as will the others there (HCOLL_ENABLE_SHARP=1 or 2 runs "
                  "them on the host)", shim.level, shim_fn_name(c->fn), sc->size,
                  sc->state == SHIM_COMM_FAILED ? "the communicator has no group on the tree"
                                                : "the call failed in the network",
                  agg_strerror(c->fail));
    }
    if (c->request != NULL) {
        *c->request = MPI_REQUEST_NULL;
    }
    PMPI_Comm_call_errhandler(c->comm, MPI_ERR_OTHER);
    return MPI_ERR_OTHER;
}

/* ---- the entry points -------------------------------------------------- */

SHIM_API int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                           MPI_Op op, MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                     .dtype = dtype, .op = op, .comm = comm};

    return shim_call(&c);
}

SHIM_API int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                            MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_ALLREDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                     .dtype = dtype, .op = op, .comm = comm, .request = request};

    return shim_call(&c);
}

SHIM_API int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                        MPI_Op op, int root, MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_REDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                     .dtype = dtype, .op = op, .root = root, .comm = comm};

    return shim_call(&c);
}

SHIM_API int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                         MPI_Op op, int root, MPI_Comm comm, MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_REDUCE, .sbuf = sbuf, .rbuf = rbuf, .count = count,
                     .dtype = dtype, .op = op, .root = root, .comm = comm, .request = request};

    return shim_call(&c);
}

SHIM_API int MPI_Bcast(void *buf, int count, MPI_Datatype dtype, int root, MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_BCAST, .rbuf = buf, .count = count, .dtype = dtype,
                     .root = root, .comm = comm};

    return shim_call(&c);
}

SHIM_API int MPI_Ibcast(void *buf, int count, MPI_Datatype dtype, int root, MPI_Comm comm,
                        MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_BCAST, .rbuf = buf, .count = count, .dtype = dtype,
                     .root = root, .comm = comm, .request = request};

    return shim_call(&c);
}

SHIM_API int MPI_Barrier(MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_BARRIER, .comm = comm, .bytes = 1};

    return shim_call(&c);
}

SHIM_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_BARRIER, .comm = comm, .bytes = 1, .request = request};

    return shim_call(&c);
}

SHIM_API int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                      MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                     .count = rcount, .dtype = dtype, .op = op, .comm = comm};

    return shim_call(&c);
}

SHIM_API int MPI_Ireduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                       MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                                       MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                     .count = rcount, .dtype = dtype, .op = op, .comm = comm,
                     .request = request};

    return shim_call(&c);
}

SHIM_API int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[],
                               MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                     .counts = rcounts, .dtype = dtype, .op = op, .comm = comm};

    return shim_call(&c);
}

SHIM_API int MPI_Ireduce_scatter(const void *sbuf, void *rbuf, const int rcounts[],
                                 MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                                 MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_REDUCE_SCATTER, .sbuf = sbuf, .rbuf = rbuf,
                     .counts = rcounts, .dtype = dtype, .op = op, .comm = comm,
                     .request = request};

    return shim_call(&c);
}

SHIM_API int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                           int rcount, MPI_Datatype rtype, MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_ALLGATHER, .sbuf = sbuf, .scount = scount,
                     .stype = stype, .rbuf = rbuf, .count = rcount, .dtype = rtype,
                     .comm = comm};

    return shim_call(&c);
}

SHIM_API int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                            int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_ALLGATHER, .sbuf = sbuf, .scount = scount,
                     .stype = stype, .rbuf = rbuf, .count = rcount, .dtype = rtype,
                     .comm = comm, .request = request};

    return shim_call(&c);
}

SHIM_API int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                            const int rcounts[], const int displs[], MPI_Datatype rtype,
                            MPI_Comm comm)
{
    shim_call_t c = {.coll = AGG_COLL_ALLGATHER, .sbuf = sbuf, .scount = scount,
                     .stype = stype, .rbuf = rbuf, .counts = rcounts, .displs = displs,
                     .dtype = rtype, .comm = comm};

    return shim_call(&c);
}

SHIM_API int MPI_Iallgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                             const int rcounts[], const int displs[], MPI_Datatype rtype,
                             MPI_Comm comm, MPI_Request *request)
{
    shim_call_t c = {.coll = AGG_COLL_ALLGATHER, .sbuf = sbuf, .scount = scount,
                     .stype = stype, .rbuf = rbuf, .counts = rcounts, .displs = displs,
                     .dtype = rtype, .comm = comm, .request = request};

    return shim_call(&c);
}
