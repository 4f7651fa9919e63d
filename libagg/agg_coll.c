/*
 * The collectives: each is checked, planned (which part of one vector of
 * elements this member adds to the tree and takes back, agg_internal.h) and
 * made a request; per post, the tree it uses is chosen. Every member takes
 * the same decision from the same inputs (size, settings, the groups the
 * communicator agreed on), so they all post to the same group.
 */
#include "agg_internal.h"

#include <string.h>

#include "agg/log.h"

static const char *const agg__coll_names[AGG_COLL__COUNT] = {
    [AGG_COLL_ALLREDUCE]      = "allreduce",
    [AGG_COLL_REDUCE]         = "reduce",
    [AGG_COLL_BCAST]          = "bcast",
    [AGG_COLL_BARRIER]        = "barrier",
    [AGG_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [AGG_COLL_ALLGATHER]      = "allgather",
};

const char *agg_coll_name(agg_coll_type_t coll)
{
    return (unsigned)coll < AGG_COLL__COUNT ? agg__coll_names[coll] : "unknown";
}

/* Does this member need the buffer for this collective? */
static int agg__needs(const void *buf, size_t count)
{
    return count == 0 || buf != NULL;
}

/*
 * A reduce-scatter's or allgather's blocks: the elements of the whole
 * vector, and this member's block (its first element and its length); each
 * block is count long unless the spec has counts. 0 if they do not add up
 * within a fragment number's reach (UINT32_MAX elements).
 */
static int agg__blocks(const agg_comm_t *comm, const agg_reduce_spec_t *spec, size_t *total,
                       size_t *lo, size_t *len)
{
    size_t me = (size_t)comm->rank, sum = 0;
    int i;

    if (spec->counts == NULL) {
        if (spec->count > UINT32_MAX / (size_t)comm->size) {
            return 0;
        }
        *total = spec->count * (size_t)comm->size;
        *lo    = spec->count * me;
        *len   = spec->count;
        return 1;
    }
    for (i = 0; i < comm->size; ++i) {
        if (spec->counts[i] > UINT32_MAX - sum) {
            return 0;
        }
        if ((size_t)i == me) {
            *lo  = sum;
            *len = spec->counts[i];
        }
        sum += spec->counts[i];
    }
    *total = sum;
    return 1;
}

static agg_status_t agg__check_spec(const agg_comm_t *comm, agg_coll_type_t coll,
                                    const agg_reduce_spec_t *spec)
{
    int root = spec != NULL && comm != NULL && spec->root == comm->rank;
    size_t in, out, total = 0, lo, len;

    if (comm == NULL || spec == NULL || (unsigned)spec->mode > AGG_AGGR_SAT) {
        return AGG_ERR_INVALID_PARAM;
    }
    if (coll == AGG_COLL_REDUCE || coll == AGG_COLL_BCAST) {
        if (spec->root < 0 || spec->root >= comm->size) {
            return AGG_ERR_INVALID_PARAM;
        }
    }
    /* what this member reads and writes: bcast reads the root's rbuf, a reduce writes the
       root's only */
    in  = coll == AGG_COLL_BCAST ? 0 : spec->count;
    out = coll == AGG_COLL_REDUCE && !root ? 0 : spec->count;
    if (coll == AGG_COLL_REDUCE_SCATTER || coll == AGG_COLL_ALLGATHER) {
        if (!agg__blocks(comm, spec, &total, &lo, &len)) {
            return AGG_ERR_INVALID_PARAM;
        }
        in  = coll == AGG_COLL_ALLGATHER ? len : total;
        out = coll == AGG_COLL_ALLGATHER ? total : len;
    } else if (spec->counts != NULL) {
        return AGG_ERR_INVALID_PARAM; /* blocks mean nothing to the others */
    }
    if (!agg__needs(spec->sbuf, in) || !agg__needs(spec->rbuf, out)) {
        return AGG_ERR_INVALID_PARAM;
    }
    if (agg_reduce_fn(spec->dtype, spec->op) == NULL) {
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (spec->count > UINT32_MAX || spec->count > SIZE_MAX / 2 / (size_t)comm->size /
                                                  agg_dtype_size(spec->dtype) ||
        total > SIZE_MAX / 2 / agg_dtype_size(spec->dtype)) {
        return AGG_ERR_INVALID_PARAM;
    }
    if (agg_dtype_size(spec->dtype) > comm->llt.payload) {
        return AGG_ERR_NOT_SUPPORTED; /* not one element fits in a fragment */
    }
    return AGG_OK;
}

/*
 * Which part of the collective's vector this member adds and takes
 * (agg_internal.h). The spec's counts are read here, once, and dropped.
 */
static void agg__request_plan(agg_request_t *req)
{
    agg_reduce_spec_t *sp = &req->spec;
    size_t c = sp->count, lo = 0, len = 0;
    int root = sp->root == req->comm->rank;

    req->src    = sp->sbuf;
    req->dst    = sp->rbuf;
    req->total  = c;
    req->src_lo = 0;
    req->src_hi = c;
    req->dst_lo = 0;
    req->dst_hi = c;
    switch (req->coll) {
    case AGG_COLL_REDUCE:
        req->dst_hi = root ? c : 0;
        break;
    case AGG_COLL_BCAST:
        req->src_hi = root ? c : 0;
        req->dst_hi = root ? 0 : c; /* the root has it already */
        req->src    = sp->rbuf;
        break;
    case AGG_COLL_BARRIER:
        req->total = req->src_hi = req->dst_hi = 0;
        break;
    case AGG_COLL_REDUCE_SCATTER:
        agg__blocks(req->comm, sp, &req->total, &lo, &len); /* checked already */
        req->src_hi = req->total;
        req->dst_lo = lo;
        req->dst_hi = lo + len;
        req->block  = sp->counts == NULL ? len : 0;
        break;
    case AGG_COLL_ALLGATHER:
        agg__blocks(req->comm, sp, &req->total, &lo, &len);
        req->src_lo = lo;
        req->src_hi = lo + len;
        req->dst_hi = req->total;
        req->block  = sp->counts == NULL ? len : 0;
        req->own_there = req->src != NULL && req->src == req->dst + lo * req->esize;
        break;
    default:
        break;
    }
    if (sp->counts != NULL) {
        sp->counts = NULL; /* the caller's, valid during the call only */
        sp->count  = len;
    }
}

/* Makes an inactive request for any collective (the _init forms). */
static agg_status_t agg__coll_init(agg_comm_t *comm, agg_coll_type_t coll,
                                   const agg_reduce_spec_t *spec, agg_request_t **req)
{
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    st = agg__check_spec(comm, coll, spec);
    if (st == AGG_OK) {
        agg__comm_lock(comm);
        st = agg__request_new(comm, coll, spec, req);
        agg__comm_unlock(comm);
    }
    if (st == AGG_OK) {
        if (coll != AGG_COLL_REDUCE && coll != AGG_COLL_BCAST) {
            (*req)->spec.root = 0; /* the tree compares roots: only theirs count */
        }
        agg__request_plan(*req);
        st = agg__stage_prepare(*req); /* device buffers: refused without a backend */
        if (st != AGG_OK) {
            agg_request_free(*req);
            *req = NULL;
        }
    }
    return st;
}

/* Init + post (the non-blocking forms). */
static agg_status_t agg__coll_start(agg_comm_t *comm, agg_coll_type_t coll,
                                    const agg_reduce_spec_t *spec, agg_request_t **req)
{
    agg_status_t st = agg__coll_init(comm, coll, spec, req);

    if (st != AGG_OK) {
        return st;
    }
    st = agg_request_post(*req);
    if (st != AGG_OK) {
        agg_request_free(*req);
        *req = NULL;
    }
    return st;
}

/* Post + wait (the blocking forms). */
static agg_status_t agg__coll_run(agg_comm_t *comm, agg_coll_type_t coll,
                                  const agg_reduce_spec_t *spec)
{
    agg_request_t *req;
    agg_status_t st;

    st = agg__coll_start(comm, coll, spec, &req);
    if (st != AGG_OK) {
        return st;
    }
    st = agg_request_wait(req);
    agg_request_free(req);
    return st;
}

/* The three forms of every collective's entry point. */
typedef enum agg__form {
    AGG__FORM_RUN,   /* blocking: post and wait */
    AGG__FORM_START, /* non-blocking (agg_i*): post */
    AGG__FORM_INIT,  /* persistent (agg_*_init): an inactive request */
} agg__form_t;

/* The one entry of every collective, in each form. */
static agg_status_t agg__coll(agg_comm_t *comm, agg_coll_type_t coll, agg__form_t form,
                              const agg_reduce_spec_t *spec, agg_request_t **req)
{
    switch (form) {
    case AGG__FORM_INIT:
        return agg__coll_init(comm, coll, spec, req);
    case AGG__FORM_START:
        return agg__coll_start(comm, coll, spec, req);
    default:
        if (coll == AGG_COLL_ALLREDUCE && spec != NULL && spec->count == 0) {
            return agg__check_spec(comm, coll, spec); /* nothing to reduce */
        }
        return agg__coll_run(comm, coll, spec);
    }
}

/* Bcast and allgather move bytes: the tree carries them as UINT8 (placed or passed on). */
static agg_status_t agg__coll_data(agg_comm_t *comm, agg_coll_type_t coll, agg__form_t form,
                                   const agg_data_spec_t *d, agg_request_t **req)
{
    agg_reduce_spec_t spec;

    if (d == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    spec = (agg_reduce_spec_t){
        .sbuf = d->sbuf, .rbuf = d->rbuf, .count = d->bytes, .dtype = AGG_DTYPE_UINT8,
        .op = AGG_OP_BOR, .sbuf_mem = d->sbuf_mem, .rbuf_mem = d->rbuf_mem, .root = d->root,
        .counts = d->counts,
    };
    return agg__coll(comm, coll, form, &spec, req);
}

/* agg_NAME, agg_iNAME and agg_NAME_init of one collective (agg.h). */
#define AGG__COLL_ENTRIES(name, coll, spec_type, entry) \
    agg_status_t agg_##name(agg_comm_t *comm, const spec_type *spec) \
    { \
        return entry(comm, coll, AGG__FORM_RUN, spec, NULL); \
    } \
    agg_status_t agg_i##name(agg_comm_t *comm, const spec_type *spec, agg_request_t **req) \
    { \
        return entry(comm, coll, AGG__FORM_START, spec, req); \
    } \
    agg_status_t agg_##name##_init(agg_comm_t *comm, const spec_type *spec, \
                                   agg_request_t **req) \
    { \
        return entry(comm, coll, AGG__FORM_INIT, spec, req); \
    }

AGG__COLL_ENTRIES(allreduce, AGG_COLL_ALLREDUCE, agg_reduce_spec_t, agg__coll)
AGG__COLL_ENTRIES(reduce, AGG_COLL_REDUCE, agg_reduce_spec_t, agg__coll)
AGG__COLL_ENTRIES(reduce_scatter, AGG_COLL_REDUCE_SCATTER, agg_reduce_spec_t, agg__coll)
AGG__COLL_ENTRIES(bcast, AGG_COLL_BCAST, agg_data_spec_t, agg__coll_data)
AGG__COLL_ENTRIES(allgather, AGG_COLL_ALLGATHER, agg_data_spec_t, agg__coll_data)

/*
 * The group a call goes to, and why not SAT where it would have gone there
 * (the communicator has no SAT group: why it has none, comm->sat_why).
 */
static agg_status_t agg__choose(agg_request_t *req, agg__group_t **grp, agg_status_t *why)
{
    agg_comm_t *comm = req->comm;
    agg_context_t *ctx = comm->ctx;
    size_t bytes = req->total * req->esize;
    int sat = comm->sat.tl != NULL, want;

    *why = AGG_OK;
    switch (req->spec.mode) {
    case AGG_AGGR_SAT:
        if (!sat) {
            return AGG_ERR_SAT_UNAVAILABLE;
        }
        *grp = &comm->sat;
        return AGG_OK;
    case AGG_AGGR_LLT:
        *grp = &comm->llt;
        return AGG_OK;
    default:
        want = ctx->alike.enable_sat && bytes >= ctx->alike.sat_threshold;
        *grp = sat && want ? &comm->sat : &comm->llt;
        *why = want && !sat ? (comm->sat_why != AGG_OK ? comm->sat_why :
                                                       AGG_ERR_SAT_UNAVAILABLE) : AGG_OK;
        return AGG_OK;
    }
}

static agg_status_t agg__request_post(agg_request_t *req)
{
    agg__group_t *grp;
    agg_status_t st, why;

    if (req->state != AGG__REQ_INACTIVE && req->state != AGG__REQ_DONE) {
        /* move it on, so that a caller trying again (after a timeout, say)
           sees it drain and may post it then */
        agg__comm_progress(req->comm);
        agg__set_last_error("agg_request_post: the request is still in flight");
        return AGG_ERR_INVALID_PARAM;
    }
    /* the tree is chosen per post, as for agg_iallreduce */
    st = agg__choose(req, &grp, &why);
    if (st != AGG_OK) {
        return st;
    }
    agg__request_start(req, grp);
    req->why_llt = why;
    agg__comm_progress(req->comm); /* start it: the first fragments leave now */
    return AGG_OK;
}

agg_status_t agg_request_post(agg_request_t *req)
{
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    agg__comm_lock(req->comm);
    st = agg__request_post(req);
    agg__comm_unlock(req->comm);
    return st;
}

/* A barrier is one empty fragment: done when every member has sent it. */
static const agg_reduce_spec_t agg__barrier_spec = {.dtype = AGG_DTYPE_UINT8,
                                                    .op = AGG_OP_BOR, .mode = AGG_AGGR_LLT};

agg_status_t agg_barrier(agg_comm_t *comm)
{
    return agg__coll_run(comm, AGG_COLL_BARRIER, &agg__barrier_spec);
}

agg_status_t agg_ibarrier(agg_comm_t *comm, agg_request_t **req)
{
    return agg__coll_start(comm, AGG_COLL_BARRIER, &agg__barrier_spec, req);
}

agg_status_t agg__sat_lock_now(agg_comm_t *comm)
{
    agg_reduce_spec_t spec = {.dtype = AGG_DTYPE_INT32, .op = AGG_OP_SUM,
                              .mode = AGG_AGGR_SAT};
    agg_request_t *req;
    agg_status_t st;

    st = agg__request_new(comm, AGG_COLL_ALLREDUCE, &spec, &req);
    if (st == AGG_OK) {
        agg__request_start(req, &comm->sat);
        st = agg_request_wait(req);
        agg_request_free(req);
    }
    return st;
}

int agg_comm_has_sat(const agg_comm_t *comm)
{
    return comm != NULL && comm->sat.tl != NULL;
}

agg_status_t agg_comm_stats(const agg_comm_t *comm, agg_comm_stats_t *stats)
{
    if (comm == NULL || stats == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    memcpy(stats->calls, comm->counts.calls, sizeof(stats->calls));
    memcpy(stats->bytes, comm->counts.bytes, sizeof(stats->bytes));
    memcpy(stats->errors, comm->counts.errors, sizeof(stats->errors));
    stats->sat_fallbacks = comm->sat_fallbacks;
    return AGG_OK;
}

void agg_comm_dump_stats(const agg_comm_t *comm)
{
    agg_comm_stats_t st;
    int c;

    if (agg_comm_stats(comm, &st) != AGG_OK) {
        return;
    }
    for (c = 0; c < AGG_COLL__COUNT; ++c) {
        if (st.calls[c][0] + st.calls[c][1] == 0) {
            continue;
        }
        agg_info("group %u (%d ranks) %s: %llu calls (LLT %llu, SAT %llu), %llu bytes, "
                 "%llu errors, %llu SAT fallbacks", comm->group_id, comm->size,
                 agg_coll_name((agg_coll_type_t)c),
                 (unsigned long long)(st.calls[c][0] + st.calls[c][1]),
                 (unsigned long long)st.calls[c][0], (unsigned long long)st.calls[c][1],
                 (unsigned long long)st.bytes[c], (unsigned long long)st.errors[c],
                 (unsigned long long)st.sat_fallbacks);
    }
}

/* The tree is told the collective in agg_dp_coll_t, libagg's callers in agg_coll_type_t. */
_Static_assert((int)AGG_COLL_ALLREDUCE == AGG_DP_COLL_ALLREDUCE &&
               (int)AGG_COLL_REDUCE == AGG_DP_COLL_REDUCE &&
               (int)AGG_COLL_BCAST == AGG_DP_COLL_BCAST &&
               (int)AGG_COLL_BARRIER == AGG_DP_COLL_BARRIER &&
               (int)AGG_COLL_REDUCE_SCATTER == AGG_DP_COLL_REDUCE_SCATTER &&
               (int)AGG_COLL_ALLGATHER == AGG_DP_COLL_ALLGATHER &&
               (int)AGG_COLL__COUNT == AGG_DP_COLL__COUNT, "collective numbering");
