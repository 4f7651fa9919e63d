/*
 * Allreduce's own paths: its part of the network path (HCOLL_ALLREDUCE_HYBRID_LB's
 * fragments, and an in-place call that fails there) and the shim's host
 * algorithms (recursive doubling, Rabenseifner, ring: shim_host.c), which
 * take a blocking allreduce the network cannot (off, a small communicator,
 * too large, no resources, after a network error). The entry points and
 * the routing are shim_call.c's.
 */
#include "agg/log.h"
#include "shim.h"

/*
 * HCOLL_ALLREDUCE_HYBRID_LB: a large allreduce as fragments of
 * hcoll_hybrid_ar_lb_frag_thresh bytes, up to 16 posted ahead of the one
 * waited for, so a late member delays only what it has not sent yet.
 */
#define SHIM_HYBRID_INFLIGHT 16 /* fragments posted ahead of the oldest one waited for */

static agg_status_t shim_allreduce_frags(shim_comm_t *sc, const agg_reduce_spec_t *spec,
                                         size_t *posted_out)
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
            rc = shim_net_wait(done == 0 ? SHIM_FN_ALLREDUCE : SHIM_FN__COUNT,
                               reqs[done % SHIM_HYBRID_INFLIGHT]);
            st = st == AGG_OK ? rc : st;
            done++;
        }
    }
    *posted_out = posted;
    return st;
}

/*
 * An in-place allreduce the network failed: rbuf's first `written` elements
 * hold the result on this member (libagg writes an in-place one in order,
 * nothing after a failure), the rest its input. Members may differ (a
 * transport that failed one of them sooner), so they agree: what the member
 * with the most has is broadcast from it, what none has is reduced on the
 * host, in place, by the host algorithm for its size. MPI_ERR_INTERN where
 * some member cannot say (device memory, SAT zero copy, HCOLL_ALLREDUCE_
 * HYBRID_LB's pieces): its input may be partly overwritten.
 */
static int shim_allreduce_recover(shim_call_t *c, size_t written, agg_status_t st)
{
    static const shim_path_t paths[SHIM_ALG__COUNT] = {
        [SHIM_ALG_RECURSIVE_DOUBLING] = SHIM_PATH_RD,
        [SHIM_ALG_RABENSEIFNER]       = SHIM_PATH_RAB,
        [SHIM_ALG_RING]               = SHIM_PATH_RING,
    };
    shim_comm_t *sc = c->sc;
    struct {
        long w;
        int  rank;
    } mine = {written == SIZE_MAX ? -1 : (long)written, sc->rank}, most;
    long least, w = mine.w;
    size_t esize = agg_dtype_size(c->spec.red.dtype);
    uint8_t *rbuf = c->rbuf;
    shim_host_alg_t alg;
    int rc;

    rc = PMPI_Allreduce(&w, &least, 1, MPI_LONG, MPI_MIN, sc->pcomm);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Allreduce(&mine, &most, 1, MPI_LONG_INT, MPI_MAXLOC, sc->pcomm);
    }
    if (rc != MPI_SUCCESS || least < 0) {
        agg_error("in-place allreduce failed in the network (%s) after writing part of the "
                  "buffer on some rank; its input cannot be recovered", agg_strerror(st));
        shim_count(c->fn, SHIM_PATH_MPI, SHIM_WHY_NETWORK_ERROR);
        PMPI_Comm_call_errhandler(c->comm, MPI_ERR_INTERN);
        return MPI_ERR_INTERN;
    }
    if (most.w > least) { /* results some have: from the one that has the most */
        rc = PMPI_Bcast(rbuf + (size_t)least * esize, (int)(most.w - least), c->dtype,
                        most.rank, sc->pcomm);
    }
    alg = shim_host_choose(&sc->tune, ((size_t)c->count - (size_t)most.w) * esize, sc->size);
    if (rc == MPI_SUCCESS && most.w < c->count) { /* inputs everywhere: reduced on the host */
        rc = shim_host_allreduce(MPI_IN_PLACE, rbuf + (size_t)most.w * esize,
                                 c->count - (int)most.w, c->dtype, c->op, sc->pcomm, alg);
    }
    shim_count(c->fn, paths[alg], SHIM_WHY_NETWORK_ERROR);
    agg_debug("in-place allreduce of %d: %ld elements back from the tree, %ld from rank %d, "
              "the rest on the host", c->count, least, most.w - least, most.rank);
    return rc;
}

/*
 * A blocking allreduce in the network; every member sees the same outcome.
 * After a failure the input is intact unless something was posted in
 * place: then shim_allreduce_recover.
 */
int shim_allreduce_net(shim_call_t *c)
{
    const agg_reduce_spec_t *spec = &c->spec.red;
    agg_request_info_t info = {.written = SIZE_MAX};
    agg_request_t *req;
    agg_status_t st;
    size_t posted;
    int rc;

    c->sc->net_seq++;
    if (shim.hybrid_frag > 0 && c->smem == AGG_MEM_HOST && c->rmem == AGG_MEM_HOST &&
        spec->count * agg_dtype_size(spec->dtype) > (size_t)shim.hybrid_frag) {
        st = shim_allreduce_frags(c->sc, spec, &posted);
    } else {
        st     = agg_iallreduce(c->sc->agg, spec, &req);
        posted = st == AGG_OK;
        st     = posted ? shim_net_wait_info(c->fn, req, &info) : st;
    }
    if (st == AGG_OK) {
        return MPI_SUCCESS;
    }
    /*
     * Every member sees a failure in the tree, so all complete this call
     * the same way; the communicator stays offloaded (none may take another
     * path on its own), and a tree that is gone fails the next calls at once.
     */
    c->fail = st;
    if (!shim_forced(c->coll) && st != AGG_ERR_INVALID_PARAM && st != AGG_ERR_NOT_SUPPORTED &&
        shim_comm_agree(c->sc, c) != MPI_SUCCESS) {
        shim_comm_lost(c->sc, st);
        return MPI_ERR_OTHER; /* members failed different calls */
    }
    if (c->sbuf == MPI_IN_PLACE && posted > 0) {
        if (shim_forced(c->coll)) {
            return shim_call_fail(c);
        }
        shim_net_warn(c->sc, c, st, "recovered on the host");
        rc = shim_allreduce_recover(c, info.written, st);
        shim_comm_lost(c->sc, st);
        return rc;
    }
    c->why   = SHIM_WHY_NETWORK_ERROR;
    c->route = SHIM_ROUTE_HOST;
    if (shim_forced(c->coll) && st != AGG_ERR_INVALID_PARAM && st != AGG_ERR_NOT_SUPPORTED) {
        return shim_call_fail(c);
    }
    shim_net_warn(c->sc, c, st, "completed on the host");
    shim_comm_lost(c->sc, st);
    return SHIM_CALL_NEXT;
}

static int shim_host_take(shim_call_t *c)
{
    return c->route == SHIM_ROUTE_HOST && c->request == NULL && c->smem == AGG_MEM_HOST &&
           c->rmem == AGG_MEM_HOST;
}

/* The host algorithm the communicator's table gives for this size. */
static int shim_host_run(shim_call_t *c)
{
    static const shim_path_t paths[SHIM_ALG__COUNT] = {
        [SHIM_ALG_RECURSIVE_DOUBLING] = SHIM_PATH_RD,
        [SHIM_ALG_RABENSEIFNER]       = SHIM_PATH_RAB,
        [SHIM_ALG_RING]               = SHIM_PATH_RING,
    };
    int size = 0;
    shim_host_alg_t alg;

    PMPI_Type_size(c->dtype, &size);
    alg = shim_host_choose(&c->sc->tune, (size_t)size * (size_t)c->count, c->sc->size);
    shim_count(c->fn, paths[alg], c->why);
    return shim_host_allreduce(c->sbuf, c->rbuf, c->count, c->dtype, c->op, c->sc->pcomm, alg);
}

const shim_call_path_ops_t shim_path_host = {"host", shim_host_take, shim_host_run};
