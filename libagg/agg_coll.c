/*
 * Allreduce: which tree a call uses, then a request on it. Every member
 * takes the same decision from the same inputs (size, settings, the groups
 * the communicator agreed on), so they all post to the same group.
 */
#include "agg_internal.h"

#include <string.h>

#include "agg/log.h"

static agg_status_t agg__check_spec(const agg_comm_t *comm, const agg_reduce_spec_t *spec)
{
    if (comm == NULL || spec == NULL ||
        (spec->count > 0 && (spec->rbuf == NULL || spec->sbuf == NULL)) ||
        (unsigned)spec->mode > AGG_AGGR_SAT) {
        return AGG_ERR_INVALID_PARAM;
    }
    if (agg_reduce_fn(spec->dtype, spec->op) == NULL) {
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (spec->sbuf_mem != AGG_MEM_HOST || spec->rbuf_mem != AGG_MEM_HOST) {
        /* never dereference a device pointer in a build without a GPU backend */
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (spec->count > UINT32_MAX) {
        return AGG_ERR_INVALID_PARAM;
    }
    return AGG_OK;
}

/* The group a call goes to. */
static agg_status_t agg__choose(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                agg__group_t **grp)
{
    agg_context_t *ctx = comm->ctx;
    size_t bytes = spec->count * agg_dtype_size(spec->dtype);
    int sat = comm->sat.tl != NULL;

    switch (spec->mode) {
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
        *grp = sat && ctx->alike.enable_sat && bytes >= ctx->alike.sat_threshold ? &comm->sat
                                                                                  : &comm->llt;
        return AGG_OK;
    }
}

agg_status_t agg_iallreduce(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                            agg_request_t **req)
{
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    st = agg_allreduce_init(comm, spec, req);
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

agg_status_t agg_allreduce_init(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                agg_request_t **req)
{
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    st = agg__check_spec(comm, spec);
    return st == AGG_OK ? agg__request_new(comm, spec, req) : st;
}

agg_status_t agg_request_post(agg_request_t *req)
{
    agg__group_t *grp;
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    if (req->state != AGG__REQ_INACTIVE && req->state != AGG__REQ_DONE) {
        /* move it on, so that a caller trying again (after a timeout, say)
           sees it drain and may post it then */
        agg__comm_progress(req->comm);
        agg__set_last_error("agg_request_post: the request is still in flight");
        return AGG_ERR_INVALID_PARAM;
    }
    /* the tree is chosen per post, as for agg_iallreduce */
    st = agg__choose(req->comm, &req->spec, &grp);
    if (st != AGG_OK) {
        return st;
    }
    agg__request_start(req, grp);
    agg__comm_progress(req->comm); /* start it: the first fragments leave now */
    return AGG_OK;
}

agg_status_t agg_allreduce(agg_comm_t *comm, const agg_reduce_spec_t *spec)
{
    agg_request_t *req;
    agg_status_t st;

    if (spec != NULL && spec->count == 0) {
        return agg__check_spec(comm, spec);
    }
    st = agg_iallreduce(comm, spec, &req);
    if (st != AGG_OK) {
        return st;
    }
    st = agg_request_wait(req);
    agg_request_free(req);
    return st;
}

agg_status_t agg__sat_lock_now(agg_comm_t *comm)
{
    agg_reduce_spec_t spec = {.dtype = AGG_DTYPE_INT32, .op = AGG_OP_SUM,
                              .mode = AGG_AGGR_SAT};
    agg_request_t *req;
    agg_status_t st;

    st = agg__request_new(comm, &spec, &req);
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
