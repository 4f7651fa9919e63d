/*
 * Communicators: a group on the job's LLT tree, and one on its SAT tree when
 * SAT is enabled and a SAT flow is free on every switch. The communicator's
 * rank 0 asks aggmgr and broadcasts the answer; every member attaches to its
 * own endpoint of each tree, and all agree before anyone uses either.
 */
#include "agg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "agg/sock.h"

static void agg__comm_unlink(agg_comm_t *comm)
{
    agg_comm_t **pp;

    agg__ctx_lock(comm->ctx);
    for (pp = &comm->ctx->comms; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == comm) {
            *pp = comm->next;
            break;
        }
    }
    agg__ctx_unlock(comm->ctx);
}

/* Frees what is left of a communicator taken out of the context's list. */
static void agg__comm_free(agg_comm_t *comm)
{
    agg__group_fini(&comm->llt);
    agg__group_fini(&comm->sat);
    agg__comm_requests_free(comm);
    agg__stage_comm_free(comm);
    if (comm->ctx->mt) {
        pthread_mutex_destroy(&comm->lock);
    }
    free(comm);
}

/*
 * Checks a GROUP_CREATE_REPLY body (host order) and takes from it what
 * member `me` of `n` needs: its endpoint and channel on each tree.
 */
static agg_status_t agg__reply_parse(const uint8_t *body, size_t len, uint32_t n, uint32_t me,
                                     uint32_t *group_id, agg__tree_info_t trees[2])
{
    const agg_msg_group_create_reply_t *rep = (const agg_msg_group_create_reply_t *)body;
    size_t off = sizeof(*rep);
    uint32_t t;

    if (len < sizeof(*rep) || rep->status != AGG_OK || rep->num_members != n ||
        rep->num_trees < 1 || rep->num_trees > 2) {
        return AGG_ERR_PROTOCOL;
    }
    *group_id = rep->group_id;
    memset(trees, 0, 2 * sizeof(*trees));
    trees[1].status = AGG_ERR_SAT_UNAVAILABLE;
    trees[1].tree   = AGG_TREE_SAT;
    for (t = 0; t < rep->num_trees; ++t) {
        const agg_wire_group_tree_t *gt = (const agg_wire_group_tree_t *)(body + off);
        const agg_wire_endpoint_t *eps;
        const agg_wire_member_ep_t *mep;
        agg__tree_info_t *ti = &trees[t];

        if (len - off < sizeof(*gt) || gt->tree != t) {
            return AGG_ERR_PROTOCOL;
        }
        off += sizeof(*gt);
        memset(ti, 0, sizeof(*ti));
        ti->status = gt->status;
        ti->tree   = gt->tree;
        if (gt->status != AGG_OK) {
            continue;
        }
        if (gt->num_endpoints == 0 || gt->num_endpoints > AGG__MAX_EPS(n) || gt->osts == 0 ||
            gt->osts > 4096 || gt->payload < 8 ||
            (len - off) / sizeof(*eps) < gt->num_endpoints ||
            (len - off - gt->num_endpoints * sizeof(*eps)) / sizeof(*mep) < n) {
            return AGG_ERR_PROTOCOL;
        }
        eps  = (const agg_wire_endpoint_t *)(body + off);
        off += gt->num_endpoints * sizeof(*eps);
        mep  = (const agg_wire_member_ep_t *)(body + off);
        off += (size_t)n * sizeof(*mep);
        if (mep[me].endpoint >= gt->num_endpoints) {
            return AGG_ERR_PROTOCOL;
        }
        ti->tree_id   = gt->tree_id;
        ti->osts      = gt->osts;
        ti->payload   = gt->payload;
        ti->depth     = gt->depth;
        ti->nodes     = gt->nodes;
        ti->root_guid = gt->root_guid;
        ti->channel   = mep[me].channel;
        ti->leaf_guid = mep[me].leaf_guid;
        ti->ep        = eps[mep[me].endpoint];
    }
    return off == len ? AGG_OK : AGG_ERR_PROTOCOL;
}

/* Converts a received GROUP_CREATE_REPLY body to host order in place; checks its counts. */
static agg_status_t agg__reply_to_host(uint8_t *body, size_t len, uint32_t n)
{
    agg_msg_group_create_reply_t *rep = (agg_msg_group_create_reply_t *)body;
    size_t off = sizeof(*rep);
    uint32_t t;

    agg_wire_swap(rep, AGG_FMT_GROUP_CREATE_REPLY, 1);
    if (rep->status != AGG_OK || rep->num_members != n || rep->num_trees > 2) {
        return rep->status != AGG_OK ? rep->status : AGG_ERR_PROTOCOL;
    }
    for (t = 0; t < rep->num_trees; ++t) {
        agg_wire_group_tree_t *gt = (agg_wire_group_tree_t *)(body + off);

        if (len - off < sizeof(*gt)) {
            return AGG_ERR_PROTOCOL;
        }
        agg_wire_swap(gt, AGG_FMT_GROUP_TREE, 1);
        off += sizeof(*gt);
        if (gt->status != AGG_OK) {
            continue;
        }
        if (gt->num_endpoints > AGG__MAX_EPS(n) || (len - off) / sizeof(agg_wire_endpoint_t) <
                                         gt->num_endpoints) {
            return AGG_ERR_PROTOCOL;
        }
        agg_wire_swap(body + off, AGG_FMT_ENDPOINT, gt->num_endpoints);
        off += gt->num_endpoints * sizeof(agg_wire_endpoint_t);
        if ((len - off) / sizeof(agg_wire_member_ep_t) < n) {
            return AGG_ERR_PROTOCOL;
        }
        agg_wire_swap(body + off, AGG_FMT_MEMBER_EP, n);
        off += (size_t)n * sizeof(agg_wire_member_ep_t);
    }
    return off == len ? AGG_OK : AGG_ERR_PROTOCOL;
}

/* Rank 0: GROUP_CREATE to aggmgr; *body gets the reply in host order. */
/*
 * aggmgr answers GROUP_CREATE once the switchsims have laid the group out
 * (within its am_sim_timeout_ms, 5 s by default); a communicator's creation
 * is a collective, and may wait what a collective may.
 */
static int agg__group_create_wait_ms(const agg_context_t *ctx)
{
    return ctx->alike.coll_timeout_ms > ctx->connect_timeout_ms ? ctx->alike.coll_timeout_ms :
                                                                  ctx->connect_timeout_ms;
}

static agg_status_t agg__group_request(agg_context_t *ctx, const agg_comm_spec_t *spec,
                                       uint8_t **body, size_t *body_len)
{
    agg_msg_group_create_t *req;
    size_t req_len = sizeof(*req) + (size_t)spec->size * sizeof(uint32_t);
    /* per tree: a block, endpoints (a tree split over switchsims has one per part and
       transport, AGG__MAX_EPS at most) and the members */
    size_t cap = sizeof(agg_msg_group_create_reply_t) +
                 2 * (sizeof(agg_wire_group_tree_t) +
                      AGG__MAX_EPS((size_t)spec->size) * sizeof(agg_wire_endpoint_t) +
                      (size_t)spec->size * sizeof(agg_wire_member_ep_t));
    uint32_t *ranks;
    uint8_t *rep;
    agg_status_t st;
    size_t len;
    int i;

    req = calloc(1, req_len);
    rep = calloc(1, cap);
    if (req == NULL || rep == NULL) {
        free(req);
        free(rep);
        return AGG_ERR_NO_MEMORY;
    }
    req->job_id      = ctx->job.job_id;
    req->num_members = (uint32_t)spec->size;
    req->osts        = ctx->alike.osts_per_group;
    req->flags       = (ctx->alike.enable_sat && ctx->job.sat_tree_id ? AGG_GROUP_F_SAT : 0) |
                       (ctx->alike.reproducible ? AGG_GROUP_F_REPRODUCIBLE : 0);
    req->sat_osts    = ctx->alike.sat_depth;
    req->sat_payload = ctx->alike.sat_chunk;
    req->job_key     = ctx->job_key;
    ranks            = (uint32_t *)(req + 1);
    for (i = 0; i < spec->size; ++i) {
        ranks[i] = (uint32_t)spec->world_ranks[i];
    }
    agg_wire_swap(req, AGG_FMT_GROUP_CREATE, 1);
    agg_wire_swap(ranks, "l", (size_t)spec->size);
    st = agg__am_call(ctx, AGG_MSG_GROUP_CREATE, req, req_len, AGG_MSG_GROUP_CREATE_REPLY,
                      rep, cap, &len, agg__group_create_wait_ms(ctx));
    free(req);
    if (st == AGG_OK && len == sizeof(agg_msg_status_t)) {
        agg_wire_swap(rep, AGG_FMT_STATUS, 1);
        st = ((agg_msg_status_t *)rep)->status != AGG_OK ? ((agg_msg_status_t *)rep)->status :
                                                         AGG_ERR_PROTOCOL;
    } else if (st == AGG_OK) {
        st = agg__reply_to_host(rep, len, (uint32_t)spec->size);
    }
    if (st != AGG_OK) {
        free(rep);
        return st;
    }
    *body     = rep;
    *body_len = len;
    return AGG_OK;
}

static agg_status_t agg__group_release(agg_context_t *ctx, uint32_t group_id)
{
    agg_msg_group_ref_t ref = {.job_id = ctx->job.job_id, .group_id = group_id};
    agg_status_t st;

    agg_wire_swap(&ref, AGG_FMT_GROUP_REF, 1);
    st = agg__am_call_status(ctx, AGG_MSG_GROUP_DESTROY, &ref, sizeof(ref),
                             AGG_MSG_GROUP_DESTROY_REPLY, ctx->connect_timeout_ms);
    if (st != AGG_OK) {
        agg_warn("aggmgr did not release group %u: %s", group_id, agg_status_string(st));
    }
    return st;
}

/* Attaches to one tree's part; a refused SAT part is no error. */
static agg_status_t agg__attach(agg_comm_t *comm, agg__group_t *grp, const agg__tree_info_t *ti)
{
    const agg_tl_ops_t *tl;
    agg_status_t st;

    if (ti->status != AGG_OK) {
        return ti->tree == AGG_TREE_SAT ? AGG_OK : ti->status;
    }
    tl = agg__tl_for(ti->ep.transport);
    if (tl == NULL) {
        agg_error("no transport for endpoint type %u", ti->ep.transport);
        return AGG_ERR_NOT_SUPPORTED;
    }
    st = agg__group_init(comm, grp, ti);
    if (st == AGG_OK) {
        st = tl->attach(comm->ctx, ti, comm->rank, &grp->tl_priv);
    }
    if (st == AGG_OK) {
        grp->tl = tl;
        tl->query(&grp->tl_attr);
    }
    return st;
}

/* SHARP's group lines, from world rank 0 only (users grep for them). */
static void agg__group_log(agg_comm_t *comm, const agg__tree_info_t *ti, int tree_idx)
{
    agg_context_t *ctx = comm->ctx;
    int num = __atomic_fetch_add(&ctx->num_groups, 1, __ATOMIC_RELAXED);

    if (ctx->world_rank == 0) {
        agg_info("[group#:%d] group id:%x tree idx:%d tree_type:%s rail_idx:0 group size:%d "
                 "quota: (osts:%u user_data_per_ost:%u) mgid: (subnet prefix:0x0 interface "
                 "id:0x0) mlid:0 depth:%u nodes:%u leaf:0x%016llx", num,
                 comm->group_id, tree_idx, tree_idx ? "SAT" : "LLT", comm->size, ti->osts,
                 tree_idx ? 0 : ti->payload, ti->depth, ti->nodes,
                 (unsigned long long)ti->leaf_guid);
    }
}

agg_status_t agg_comm_init(agg_context_t *ctx, const agg_comm_spec_t *spec,
                           agg_comm_t **comm_out)
{
    agg__tree_info_t trees[2];
    uint8_t *body = NULL;
    uint64_t len = 0;
    agg_comm_t *comm;
    agg_status_t st, local = AGG_OK;
    int32_t head[2] = {AGG_OK, 0};

    if (ctx == NULL || spec == NULL || comm_out == NULL || spec->size <= 0 ||
        spec->rank < 0 || spec->rank >= spec->size || spec->world_ranks == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        local = AGG_ERR_NO_MEMORY;
    } else {
        comm->ctx     = ctx;
        if (ctx->mt) {
            /* recursive: MPI's progress, called in a wait, may poll this communicator */
            pthread_mutexattr_t attr;

            pthread_mutexattr_init(&attr);
            pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
            pthread_mutex_init(&comm->lock, &attr);
            pthread_mutexattr_destroy(&attr);
        }
        comm->rank    = spec->rank;
        comm->size    = spec->size;
        comm->oob_ctx = spec->oob_ctx;
    }
    if (spec->rank == 0) {
        size_t blen = 0;

        head[0] = agg__group_request(ctx, spec, &body, &blen);
        len     = blen;
    }
    /* the reply travels as it came: its length, then its bytes */
    if (ctx->oob.bcast(spec->oob_ctx, head, sizeof(head), 0) != 0 ||
        ctx->oob.bcast(spec->oob_ctx, &len, sizeof(len), 0) != 0) {
        st = AGG_ERR_OOB;
        goto err_free;
    }
    if (head[0] != AGG_OK) {
        st = head[0];
        if (spec->rank == 0) {
            agg_info("communicator of %d ranks not offloaded: %s", spec->size,
                     agg_status_string(st));
        }
        goto err_free;
    }
    if (spec->rank != 0) {
        body = malloc(len ? len : 1);
    }
    /* everybody has room for the reply, or nobody takes it */
    st = agg__oob_agree(ctx, spec->oob_ctx, spec->rank, spec->size,
                        body != NULL && comm != NULL ? AGG_OK : AGG_ERR_NO_MEMORY);
    if (st != AGG_OK) {
        if (spec->rank == 0) {
            agg__group_release(ctx, ((agg_msg_group_create_reply_t *)body)->group_id);
        }
        goto err_free;
    }
    if (ctx->oob.bcast(spec->oob_ctx, body, len, 0) != 0) {
        st = AGG_ERR_OOB;
        goto err_free;
    }
    if (local == AGG_OK) {
        local = agg__reply_parse(body, len, (uint32_t)spec->size, (uint32_t)spec->rank,
                                 &comm->group_id, trees);
    }
    if (local == AGG_OK) {
        local = agg__attach(comm, &comm->llt, &trees[0]);
    }
    if (local == AGG_OK) {
        local = agg__attach(comm, &comm->sat, &trees[1]);
    }
    st = agg__oob_agree(ctx, spec->oob_ctx, spec->rank, spec->size, local);
    if (st != AGG_OK) {
        if (spec->rank == 0 && comm != NULL && comm->group_id != 0) {
            agg__group_release(ctx, comm->group_id);
        }
        goto err_detach;
    }
    /* a member that could not join the SAT part would desynchronise the others */
    st = agg__oob_agree(ctx, spec->oob_ctx, spec->rank, spec->size,
                        comm->sat.tl != NULL || trees[1].status != AGG_OK ? AGG_OK :
                                                                           AGG_ERR_GROUP_JOIN);
    if (st != AGG_OK) {
        agg__group_fini(&comm->sat);
    }
    comm->sat_why   = comm->sat.tl != NULL ? AGG_OK :
                      trees[1].status != AGG_OK ? trees[1].status : AGG_ERR_GROUP_JOIN;
    comm->leaf_guid = trees[0].leaf_guid;
    agg__group_log(comm, &trees[0], 0);
    if (comm->sat.tl != NULL) {
        agg__group_log(comm, &trees[1], 1);
    } else if (ctx->alike.enable_sat && ctx->world_rank == 0) {
        agg_info("communicator of %d ranks (group %u) has no SAT group: %s; its large "
                 "allreduces use the LLT", spec->size, comm->group_id,
                 agg_status_string(trees[1].status));
    }
    free(body);
    if (comm->sat.tl != NULL && ctx->alike.lock_on_init) {
        st = agg__sat_lock_now(comm);
        if (st != AGG_OK && ctx->world_rank == 0) {
            agg_info("SHARP_COLL_LOCK_ON_COMM_INIT: the SAT lock was not had at creation (%s); "
                     "it is asked for again at the first SAT operation", agg_status_string(st));
        }
    }
    agg__ctx_lock(ctx);
    comm->next = ctx->comms;
    ctx->comms = comm;
    agg__ctx_unlock(ctx);
    *comm_out  = comm;
    return AGG_OK;

err_detach:
    if (comm != NULL) {
        agg__group_fini(&comm->llt);
        agg__group_fini(&comm->sat);
    }
err_free:
    free(body);
    if (comm != NULL && ctx->mt) {
        pthread_mutex_destroy(&comm->lock);
    }
    free(comm);
    return st;
}

/* Finishes what is in flight, so no result lands in a segment that is going away. */
static void agg__comm_drain(agg_comm_t *comm)
{
    agg_request_t *r;
    int freed;

    /*
     * A wait may recycle requests the caller freed in flight (this one and
     * others that complete meanwhile), so look again from the head each time.
     */
    for (;;) {
        for (r = comm->head; r != NULL; r = r->next) {
            if (r->state != AGG__REQ_DONE && !r->abandoned) {
                break;
            }
        }
        if (r == NULL) {
            return;
        }
        /* one the caller freed is recycled (even freed) as it completes:
           hold it until the wait is over */
        freed    = r->freed;
        r->freed = 0;
        agg_request_wait(r); /* done or abandoned when it returns */
        if (freed) {
            agg_request_free(r);
        }
    }
}

agg_status_t agg_comm_destroy(agg_comm_t *comm)
{
    agg_context_t *ctx;
    agg_status_t st = AGG_OK;

    if (comm == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    ctx = comm->ctx;
    /* the SAT lock, if held, goes back with the group's SAT part */
    agg__comm_lock(comm);
    agg__comm_drain(comm);
    agg__comm_unlock(comm);
    /* out of the list first: another thread's wait walks it under ctx->lock,
       so once this returns nobody is moving this communicator on */
    agg__comm_unlink(comm);
    /* No member may still be reading results when the segment goes. */
    if (ctx->oob.barrier(comm->oob_ctx) != 0) {
        st = AGG_ERR_OOB;
    }
    if (comm->rank == 0) {
        agg_status_t rst = agg__group_release(ctx, comm->group_id);
        if (st == AGG_OK) {
            st = rst;
        }
    }
    agg__comm_free(comm);
    return st;
}

void agg_comm_abandon(agg_comm_t *comm)
{
    if (comm != NULL) {
        agg__comm_unlink(comm);
        agg__comm_free(comm);
    }
}
