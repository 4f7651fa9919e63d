/*
 * agg_perf's paths, each an ops table over the same perf_call_t:
 *
 *   mpi   Open MPI's own collectives (PMPI_*, so a preloaded shim is bypassed);
 *   host  hcoll_shim's host allreduce (shim_host_allreduce; allreduce only);
 *   llt   libagg called directly, low-latency tree (agg_reduce_spec_t.mode LLT);
 *   sat   libagg, streaming aggregation tree (mode SAT; reductions only).
 *
 * and the libagg set-up that the llt and sat paths need.
 */
#include <stdlib.h>
#include <string.h>

#include "perf.h"

int perf_is_reduction(agg_coll_type_t coll)
{
    return coll == AGG_COLL_ALLREDUCE || coll == AGG_COLL_REDUCE ||
           coll == AGG_COLL_REDUCE_SCATTER;
}

static const char *perf_mpi_skip(const perf_env_t *e, agg_coll_type_t coll,
                                 const perf_type_t *t)
{
    return perf_is_reduction(coll) && t->mpi == NULL ? "MPI has no such type" : NULL;
}

/* bcast and allgather move bytes: they go as MPI_BYTE whatever the type. */
static int perf_mpi_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    MPI_Datatype dt = c->type->mpi != NULL ? c->type->mpi() : MPI_BYTE;
    MPI_Op op       = perf_ops[c->op].mpi();
    const void *s   = c->in_place ? MPI_IN_PLACE : c->sbuf;
    int n = (int)c->count, bytes = (int)(c->count * agg_dtype_size(c->type->dtype));
    MPI_Request *r  = req != NULL ? &req->mpi : NULL;

    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return r ? PMPI_Iallreduce(s, c->rbuf, n, dt, op, e->mpi, r)
                 : PMPI_Allreduce(s, c->rbuf, n, dt, op, e->mpi);
    case AGG_COLL_REDUCE:
        s = c->in_place && e->rank == c->root ? MPI_IN_PLACE : c->sbuf;
        return r ? PMPI_Ireduce(s, c->rbuf, n, dt, op, c->root, e->mpi, r)
                 : PMPI_Reduce(s, c->rbuf, n, dt, op, c->root, e->mpi);
    case AGG_COLL_BCAST:
        return r ? PMPI_Ibcast(c->rbuf, bytes, MPI_BYTE, c->root, e->mpi, r)
                 : PMPI_Bcast(c->rbuf, bytes, MPI_BYTE, c->root, e->mpi);
    case AGG_COLL_BARRIER:
        return r ? PMPI_Ibarrier(e->mpi, r) : PMPI_Barrier(e->mpi);
    case AGG_COLL_REDUCE_SCATTER:
        return r ? PMPI_Ireduce_scatter_block(s, c->rbuf, n, dt, op, e->mpi, r)
                 : PMPI_Reduce_scatter_block(s, c->rbuf, n, dt, op, e->mpi);
    case AGG_COLL_ALLGATHER:
        return r ? PMPI_Iallgather(s, bytes, MPI_BYTE, c->rbuf, bytes, MPI_BYTE, e->mpi, r)
                 : PMPI_Allgather(s, bytes, MPI_BYTE, c->rbuf, bytes, MPI_BYTE, e->mpi);
    default:
        return MPI_ERR_ARG;
    }
}

static int perf_mpi_wait(perf_env_t *e, perf_req_t *req)
{
    return PMPI_Wait(&req->mpi, MPI_STATUS_IGNORE);
}

static const char *perf_host_skip(const perf_env_t *e, agg_coll_type_t coll,
                                  const perf_type_t *t)
{
    return coll != AGG_COLL_ALLREDUCE ? "allreduce only" :
           t->mpi == NULL             ? "MPI has no such type" : NULL;
}

/* shim_host_allreduce has no non-blocking form: it completes before it returns. */
static int perf_host_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    size_t bytes = c->count * agg_dtype_size(c->type->dtype);

    if (req != NULL) {
        req->mpi = MPI_REQUEST_NULL;
    }
    return shim_host_allreduce(c->in_place ? MPI_IN_PLACE : c->sbuf, c->rbuf, (int)c->count,
                               c->type->mpi(), perf_ops[c->op].mpi(), e->host,
                               shim_host_choose(&e->tune, bytes, e->size));
}

/* libagg runs every collective in every type on the low-latency tree. */
static const char *perf_llt_skip(const perf_env_t *e, agg_coll_type_t coll,
                                 const perf_type_t *t)
{
    return NULL;
}

static const char *perf_sat_skip(const perf_env_t *e, agg_coll_type_t coll,
                                 const perf_type_t *t)
{
    return !perf_is_reduction(coll) ? "no tree choice for this collective (see llt)" : NULL;
}

static int perf_agg_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req,
                          agg_aggr_mode_t mode)
{
    agg_reduce_spec_t rs = {.sbuf = c->sbuf, .rbuf = c->rbuf, .count = c->count,
                            .dtype = c->type->dtype, .op = perf_ops[c->op].agg, .mode = mode,
                            .root = c->root};
    agg_data_spec_t ds   = {.sbuf = c->sbuf, .rbuf = c->rbuf, .root = c->root,
                            .bytes = c->count * agg_dtype_size(c->type->dtype)};
    agg_request_t **r    = req != NULL ? &req->agg : NULL;
    agg_comm_t *ac       = e->acomm;

    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return r ? agg_iallreduce(ac, &rs, r) : agg_allreduce(ac, &rs);
    case AGG_COLL_REDUCE:
        return r ? agg_ireduce(ac, &rs, r) : agg_reduce(ac, &rs);
    case AGG_COLL_BCAST:
        return r ? agg_ibcast(ac, &ds, r) : agg_bcast(ac, &ds);
    case AGG_COLL_BARRIER:
        return r ? agg_ibarrier(ac, r) : agg_barrier(ac);
    case AGG_COLL_REDUCE_SCATTER:
        return r ? agg_ireduce_scatter(ac, &rs, r) : agg_reduce_scatter(ac, &rs);
    case AGG_COLL_ALLGATHER:
        return r ? agg_iallgather(ac, &ds, r) : agg_allgather(ac, &ds);
    default:
        return AGG_ERR_INVALID_PARAM;
    }
}

static int perf_llt_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    return perf_agg_start(e, c, req, AGG_AGGR_LLT);
}

static int perf_sat_start(perf_env_t *e, const perf_call_t *c, perf_req_t *req)
{
    return perf_agg_start(e, c, req, AGG_AGGR_SAT);
}

static int perf_agg_wait(perf_env_t *e, perf_req_t *req)
{
    agg_status_t st = agg_request_wait(req->agg);

    agg_request_free(req->agg);
    req->agg = NULL;
    return st;
}

const perf_path_ops_t perf_paths[PERF_PATH__COUNT] = {
    [PERF_MPI]  = {.skip = perf_mpi_skip, .start = perf_mpi_start, .wait = perf_mpi_wait},
    [PERF_HOST] = {.skip = perf_host_skip, .start = perf_host_start, .wait = perf_mpi_wait},
    [PERF_LLT]  = {.skip = perf_llt_skip, .start = perf_llt_start, .wait = perf_agg_wait},
    [PERF_SAT]  = {.skip = perf_sat_skip, .start = perf_sat_start, .wait = perf_agg_wait},
};

int perf_has_in_place(perf_path_id_t p, agg_coll_type_t coll)
{
    if (coll == AGG_COLL_BCAST || coll == AGG_COLL_BARRIER) {
        return 0; /* one buffer: in place is the same call */
    }
    /* libagg's reduce_scatter wants sbuf and rbuf apart */
    return coll != AGG_COLL_REDUCE_SCATTER || p == PERF_MPI;
}

const char *perf_rc_string(int rc, char *buf, size_t len)
{
    int n = 0;

    if (rc < 0) {
        snprintf(buf, len, "%s", agg_strerror((agg_status_t)rc));
    } else if (len < MPI_MAX_ERROR_STRING || PMPI_Error_string(rc, buf, &n) != MPI_SUCCESS) {
        snprintf(buf, len, "MPI error %d", rc);
    }
    return buf;
}

/* ------------------------------------------------------------ libagg set-up */

static int perf_oob_bcast(void *ctx, void *buf, size_t len, int root)
{
    return PMPI_Bcast(buf, (int)len, MPI_BYTE, root, *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int perf_oob_barrier(void *ctx)
{
    return PMPI_Barrier(*(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int perf_oob_gather(void *ctx, int root, const void *sbuf, void *rbuf, size_t len)
{
    return PMPI_Gather(sbuf, (int)len, MPI_BYTE, rbuf, (int)len, MPI_BYTE, root,
                       *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

/* A libagg communicator of every rank; *usec: how long agg_comm_init took. */
static agg_status_t perf_agg_comm_init(perf_env_t *e, double *usec)
{
    agg_comm_spec_t ms = {.rank = e->rank, .size = e->size, .oob_ctx = &e->oob};
    agg_status_t st;
    double t0;
    int *world, i;

    world = malloc((size_t)e->size * sizeof(*world));
    for (i = 0; world != NULL && i < e->size; ++i) {
        world[i] = i;
    }
    ms.world_ranks = world;
    t0    = PMPI_Wtime();
    st    = world != NULL ? agg_comm_init(e->actx, &ms, &e->acomm) : AGG_ERR_NO_MEMORY;
    *usec = (PMPI_Wtime() - t0) * 1e6;
    free(world);
    return st;
}

/*
 * The libagg job and its communicator; NULL handles on failure, with the
 * reason said once for `which` (the paths asked for).
 */
static void perf_agg_open(perf_env_t *e, const char *which, const char *am, double *usec)
{
    agg_context_spec_t cs = {.world_rank = e->rank, .world_size = e->size,
                             .local_size = e->local_size, .oob_ctx = &e->oob,
                             .oob = {.bcast = perf_oob_bcast, .barrier = perf_oob_barrier,
                                     .gather = perf_oob_gather}};
    agg_status_t st;

    st = agg_context_init(&cs, &e->actx);
    if (st != AGG_OK) {
        perf_note("#   %s skipped: agg_context_init: %s: %s\n#     (manager AGG_AM_ADDR=%s; "
                  "run under build/bin/aggrun, which starts aggmgr and switchsim)\n", which,
                  agg_strerror(st), agg_context_last_error(), am ? am : "unset, default");
        e->actx = NULL;
        return;
    }
    st = perf_agg_comm_init(e, usec);
    if (st != AGG_OK) {
        perf_note("#   %s skipped: agg_comm_init: %s%s\n", which, agg_strerror(st),
                  st == AGG_ERR_QUOTA || st == AGG_ERR_NO_RESOURCE
                  ? " (the job's quota: SHARP_COLL_JOB_QUOTA_OSTS, _MAX_GROUPS)" : "");
        e->acomm = NULL;
        agg_context_finalize(e->actx);
        e->actx = NULL;
    }
}

void perf_agg_setup(const perf_opts_t *o, perf_env_t *e)
{
    const char *am = getenv("AGG_AM_ADDR"), *sat = getenv("SHARP_COLL_ENABLE_SAT");
    const char *which = !(o->paths & (1u << PERF_SAT)) ? "llt" :
                        !(o->paths & (1u << PERF_LLT)) ? "sat" : "llt, sat";
    agg_caps_t caps;
    double usec = 0;

    if (!(o->paths & ((1u << PERF_LLT) | (1u << PERF_SAT)))) {
        return;
    }
    /* The sat path needs SAT trees in the job; rank 0's setting holds for all. */
    if ((o->paths & (1u << PERF_SAT)) && sat == NULL) {
        setenv("SHARP_COLL_ENABLE_SAT", "1", 0);
    }
    perf_agg_open(e, which, am, &usec);
    if (e->acomm == NULL) {
        return;
    }
    if (agg_caps_query(e->actx, &caps) != AGG_OK) {
        memset(&caps, 0, sizeof(caps));
    }
    if (o->paths & (1u << PERF_LLT)) {
        e->have |= 1u << PERF_LLT;
        perf_note("#   llt   libagg (agg_*), low-latency tree: manager %s, %u B per fragment, "
                  "%u in flight, tree depth %u, group set up in %.0f us\n",
                  am ? am : "127.0.0.1:6126 (default)", caps.payload_per_ost,
                  caps.osts_per_group, caps.tree_depth, usec);
    }
    if (!(o->paths & (1u << PERF_SAT))) {
        return;
    }
    if (agg_comm_has_sat(e->acomm)) {
        e->have |= 1u << PERF_SAT;
        perf_note("#   sat   libagg, streaming tree: %u KiB chunks%s\n", caps.sat_chunk >> 10,
                  sat == NULL ? " (SHARP_COLL_ENABLE_SAT=1 set by agg_perf)" : "");
    } else {
        perf_note("#   sat   skipped: the communicator has no SAT group (SHARP_COLL_ENABLE_SAT="
                  "%s; a switch serves 2 SAT flows)\n", sat ? sat : "1");
    }
}
