/*
 * Communicators: a group on the job's tree. The communicator's rank 0 asks
 * aggmgr for the group and broadcasts the answer; every member maps the
 * group's shared-memory segment, and all agree before anyone uses it.
 */
#include "agg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "agg/sock.h"

static agg_status_t agg__group_request(agg_context_t *ctx, const agg_comm_spec_t *spec,
                                       agg__group_info_t *info, uint64_t *leaf_guids)
{
    agg_msg_group_create_t *req;
    agg_msg_group_create_reply_t *rep;
    size_t req_len = sizeof(*req) + (size_t)spec->size * sizeof(uint32_t);
    size_t rep_cap = sizeof(*rep) + (size_t)spec->size * sizeof(uint64_t), len;
    uint32_t *ranks;
    agg_status_t st;
    int i;

    st = agg__am_connect(ctx);
    if (st != AGG_OK) {
        return st;
    }
    req = calloc(1, req_len);
    rep = calloc(1, rep_cap);
    if (req == NULL || rep == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto out;
    }
    req->job_id      = ctx->job.job_id;
    req->num_members = (uint32_t)spec->size;
    req->osts        = ctx->osts_per_group;
    ranks            = (uint32_t *)(req + 1);
    for (i = 0; i < spec->size; ++i) {
        ranks[i] = (uint32_t)spec->world_ranks[i];
    }
    agg_wire_swap(req, AGG_FMT_GROUP_CREATE, 1);
    agg_wire_swap(ranks, "l", (size_t)spec->size);
    st = agg_msg_call(ctx->am_fd, AGG_MSG_GROUP_CREATE, req, req_len,
                      AGG_MSG_GROUP_CREATE_REPLY, rep, rep_cap, &len,
                      ctx->connect_timeout_ms);
    if (st != AGG_OK) {
        goto out;
    }
    if (len == sizeof(agg_msg_status_t)) {
        agg_wire_swap(rep, AGG_FMT_STATUS, 1);
        st = rep->status != AGG_OK ? rep->status : AGG_ERR_PROTOCOL;
        goto out;
    }
    if (len != rep_cap) {
        st = AGG_ERR_PROTOCOL;
        goto out;
    }
    agg_wire_swap(rep, AGG_FMT_GROUP_CREATE_REPLY, 1);
    agg_wire_swap(rep + 1, "q", (size_t)spec->size);
    st = rep->status;
    if (st == AGG_OK && rep->num_members != (uint32_t)spec->size) {
        st = AGG_ERR_PROTOCOL;
    }
    if (st != AGG_OK) {
        goto out;
    }
    info->group_id        = rep->group_id;
    info->osts            = rep->osts;
    info->payload_per_ost = rep->payload_per_ost;
    info->tree_depth      = rep->tree_depth;
    info->tree_nodes      = rep->tree_nodes;
    memcpy(info->shm_name, rep->shm_name, sizeof(info->shm_name));
    memcpy(info->bell_name, rep->bell_name, sizeof(info->bell_name));
    info->shm_name[sizeof(info->shm_name) - 1]   = '\0';
    info->bell_name[sizeof(info->bell_name) - 1] = '\0';
    memcpy(leaf_guids, rep + 1, (size_t)spec->size * sizeof(uint64_t));
out:
    free(req);
    free(rep);
    return st;
}

static agg_status_t agg__group_release(agg_context_t *ctx, uint32_t group_id)
{
    agg_msg_group_ref_t ref = {.job_id = ctx->job.job_id, .group_id = group_id};
    agg_status_t st;

    st = agg__am_connect(ctx);
    if (st == AGG_OK) {
        agg_wire_swap(&ref, AGG_FMT_GROUP_REF, 1);
        st = agg_msg_call_status(ctx->am_fd, AGG_MSG_GROUP_DESTROY, &ref, sizeof(ref),
                                 AGG_MSG_GROUP_DESTROY_REPLY, ctx->connect_timeout_ms);
    }
    if (st != AGG_OK) {
        agg_warn("aggmgr did not release group %u: %s", group_id, agg_status_string(st));
    }
    return st;
}

agg_status_t agg_comm_init(agg_context_t *ctx, const agg_comm_spec_t *spec,
                           agg_comm_t **comm_out)
{
    agg__group_info_t info = {0};
    uint64_t *leaf_guids = NULL;
    agg_comm_t *comm;
    agg_status_t st, local = AGG_OK;

    if (ctx == NULL || spec == NULL || comm_out == NULL || spec->size <= 0 ||
        spec->rank < 0 || spec->rank >= spec->size || spec->world_ranks == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    comm = calloc(1, sizeof(*comm));
    if (comm == NULL) {
        local = AGG_ERR_NO_MEMORY;
    } else {
        comm->ctx     = ctx;
        comm->rank    = spec->rank;
        comm->size    = spec->size;
        comm->oob_ctx = spec->oob_ctx;
    }
    if (spec->rank == 0) {
        leaf_guids = calloc((size_t)spec->size, sizeof(*leaf_guids));
        info.status = leaf_guids == NULL ? AGG_ERR_NO_MEMORY :
                      agg__group_request(ctx, spec, &info, leaf_guids);
    }
    if (ctx->oob.bcast(spec->oob_ctx, &info, sizeof(info), 0) != 0) {
        st = AGG_ERR_OOB;
        goto err_free;
    }
    if (info.status != AGG_OK) {
        st = info.status;
        if (spec->rank == 0) {
            agg_info("communicator of %d ranks not offloaded: %s", spec->size,
                     agg_status_string(st));
        }
        goto err_free;
    }
    if (local == AGG_OK) {
        comm->tl = &agg_tl_shm_ops;
        local    = comm->tl->attach(comm, &info);
    }
    st = agg__oob_agree(ctx, spec->oob_ctx, spec->rank, spec->size, local);
    if (st != AGG_OK) {
        if (spec->rank == 0) {
            agg__group_release(ctx, info.group_id);
        }
        goto err_detach;
    }
    /* SHARP's group line, from world rank 0 only (complaint: log spam) */
    if (ctx->world_rank == 0) {
        agg_info("[group#:%d] group id:%x tree idx:0 tree_type:LLT rail_idx:0 group size:%d "
                 "quota: (osts:%u user_data_per_ost:%u) mgid: (subnet prefix:0x0 "
                 "interface id:0x0) mlid:0 depth:%u nodes:%u leaf:0x%016llx",
                 ctx->num_comms, info.group_id, spec->size, info.osts,
                 info.payload_per_ost, info.tree_depth, info.tree_nodes,
                 (unsigned long long)comm->leaf_guid);
    }
    ctx->num_comms++;
    free(leaf_guids);
    *comm_out = comm;
    return AGG_OK;

err_detach:
    if (comm != NULL && comm->tl != NULL) {
        comm->tl->detach(comm);
    }
err_free:
    free(leaf_guids);
    free(comm);
    return st;
}

agg_status_t agg_comm_destroy(agg_comm_t *comm)
{
    agg_context_t *ctx;
    agg_status_t st = AGG_OK;

    if (comm == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    ctx = comm->ctx;
    /* No member may still be reading results when the segment goes. */
    if (ctx->oob.barrier(comm->oob_ctx) != 0) {
        st = AGG_ERR_OOB;
    }
    comm->tl->detach(comm);
    if (comm->rank == 0) {
        agg_status_t rst = agg__group_release(ctx, comm->group_id);
        if (st == AGG_OK) {
            st = rst;
        }
    }
    free(comm);
    return st;
}

void agg_comm_abandon(agg_comm_t *comm)
{
    if (comm != NULL) {
        comm->tl->detach(comm);
        free(comm);
    }
}
