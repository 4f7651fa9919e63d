/*
 * The job: configuration, the connection to aggmgr, job creation and the
 * out-of-band agreement that keeps every rank on the same path.
 */
#include "agg_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/sock.h"

extern char **environ;

static char agg__last_error[512];

void agg__set_last_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(agg__last_error, sizeof(agg__last_error), fmt, ap);
    va_end(ap);
}

const char *agg_context_last_error(void)
{
    return agg__last_error;
}

const char *agg_strerror(agg_status_t status)
{
    return agg_status_string(status);
}

agg_status_t agg__am_connect(agg_context_t *ctx)
{
    const char *addr = agg_conf_str(&ctx->conf, AGG_CONF_AM_ADDR);
    char host[256];
    int port;
    agg_status_t st;

    if (ctx->am_fd >= 0) {
        return AGG_OK;
    }
    st = agg_conf_addr_split(addr, host, sizeof(host), &port);
    if (st == AGG_OK) {
        st = agg_sock_connect(host, port, ctx->connect_timeout_ms, &ctx->am_fd);
    }
    if (st != AGG_OK) {
        agg__set_last_error("cannot connect to the aggregation manager at %s (%s); "
                            "is aggmgr running? Set AGG_AM_ADDR=host:port", addr,
                            st == AGG_ERR_TIMEOUT ? "timed out" : "connection refused");
        ctx->am_fd = -1;
        return AGG_ERR_SESSION_INIT;
    }
    return AGG_OK;
}

agg_status_t agg__oob_agree(agg_context_t *ctx, void *oob_ctx, int rank, int size,
                            agg_status_t local)
{
    int32_t mine = local, verdict = AGG_OK, *all = NULL;
    int i;

    if (rank == 0) {
        all = malloc((size_t)size * sizeof(*all));
        if (all == NULL) {
            mine = AGG_ERR_NO_MEMORY;
        }
    }
    if (ctx->oob.gather(oob_ctx, 0, &mine, all, sizeof(mine)) != 0) {
        free(all);
        return AGG_ERR_OOB;
    }
    if (rank == 0) {
        verdict = all ? AGG_OK : AGG_ERR_NO_MEMORY;
        for (i = 0; all != NULL && i < size; ++i) {
            if (all[i] != AGG_OK) {
                verdict = all[i];
                break;
            }
        }
        free(all);
    }
    if (ctx->oob.bcast(oob_ctx, &verdict, sizeof(verdict), 0) != 0) {
        return AGG_ERR_OOB;
    }
    return (agg_status_t)verdict;
}

static agg_status_t agg__job_create(agg_context_t *ctx)
{
    agg_msg_job_create_t req = {0};
    agg_msg_job_create_reply_t rep;
    size_t len;
    agg_status_t st;

    st = agg__am_connect(ctx);
    if (st != AGG_OK) {
        return st;
    }
    if (getrandom(&ctx->job_key, sizeof(ctx->job_key), 0) != sizeof(ctx->job_key)) {
        ctx->job_key = ((uint64_t)getpid() << 32) ^ (uint64_t)agg_time_ns();
    }
    req.job_key               = ctx->job_key;
    req.world_size            = (uint32_t)ctx->world_size;
    req.pid                   = (uint32_t)getpid();
    req.quota_osts            = (uint32_t)agg_conf_int(&ctx->conf, AGG_CONF_JOB_QUOTA_OSTS);
    req.quota_payload_per_ost = (uint32_t)agg_conf_int(&ctx->conf,
                                                       AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST);
    req.quota_max_groups      = (uint32_t)agg_conf_int(&ctx->conf,
                                                       AGG_CONF_JOB_QUOTA_MAX_GROUPS);
    req.osts_per_group        = ctx->osts_per_group;
    gethostname(req.host, sizeof(req.host) - 1);
    agg_info("job (ID: %llu) resource request quota: ( osts:%u user_data_per_ost:%u "
             "max_groups:%u max_qps:1 max_group_channels:1, num_trees:1)",
             (unsigned long long)ctx->job_key, req.quota_osts, req.quota_payload_per_ost,
             req.quota_max_groups);
    agg_wire_swap(&req, AGG_FMT_JOB_CREATE, 1);
    st = agg_msg_call(ctx->am_fd, AGG_MSG_JOB_CREATE, &req, sizeof(req),
                      AGG_MSG_JOB_CREATE_REPLY, &rep, sizeof(rep), &len,
                      ctx->connect_timeout_ms);
    if (st != AGG_OK) {
        agg__set_last_error("aggregation manager at %s did not answer the job request: %s",
                            agg_conf_str(&ctx->conf, AGG_CONF_AM_ADDR),
                            agg_status_string(st));
        return AGG_ERR_JOB_CREATE;
    }
    if (len == sizeof(agg_msg_status_t)) {
        agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
        st = rep.status != AGG_OK ? rep.status : AGG_ERR_PROTOCOL;
    } else if (len != sizeof(rep)) {
        st = AGG_ERR_PROTOCOL;
    } else {
        agg_wire_swap(&rep, AGG_FMT_JOB_CREATE_REPLY, 1);
        st = rep.status;
    }
    if (st != AGG_OK) {
        agg__set_last_error("the aggregation manager refused the job: %s",
                            agg_status_string(st));
        return st;
    }
    ctx->job = rep;
    return AGG_OK;
}

agg_status_t agg_context_init(const agg_context_spec_t *spec, agg_context_t **ctx_out)
{
    agg_context_t *ctx;
    char err[512];
    agg_status_t st, local;

    if (spec == NULL || ctx_out == NULL || spec->world_size <= 0 ||
        spec->world_rank < 0 || spec->world_rank >= spec->world_size ||
        spec->oob.bcast == NULL || spec->oob.barrier == NULL || spec->oob.gather == NULL) {
        agg__set_last_error("agg_context_init: invalid spec");
        return AGG_ERR_INVALID_PARAM;
    }
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL) {
        /* still take part in the agreement, or the other ranks would wait */
        agg_context_t tmp = {.oob = spec->oob};

        agg__oob_agree(&tmp, spec->oob_ctx, spec->world_rank, spec->world_size,
                       AGG_ERR_NO_MEMORY);
        agg__set_last_error("agg_context_init: out of memory");
        return AGG_ERR_NO_MEMORY;
    }
    ctx->world_rank = spec->world_rank;
    ctx->world_size = spec->world_size;
    ctx->oob        = spec->oob;
    ctx->oob_ctx    = spec->oob_ctx;
    ctx->am_fd      = -1;
    snprintf(err, sizeof(err), "libagg:%d", spec->world_rank);
    agg_log_set_prefix(err);

    local = agg_conf_load(&ctx->conf, spec->config_file, environ, err, sizeof(err));
    if (local != AGG_OK) {
        agg__set_last_error("%s", err);
        agg_error("%s", err);
    } else {
        agg_log_set_level((int)agg_conf_int(&ctx->conf, AGG_CONF_LOG_LEVEL));
        ctx->spin_count         = (long)agg_conf_int(&ctx->conf, AGG_CONF_SPIN_COUNT);
        /* Spinning while ranks and switchsim outnumber the cores only takes
         * the CPU from the process being waited for. */
        if (ctx->conf.v[AGG_CONF_SPIN_COUNT].source == AGG_CONF_SRC_DEFAULT &&
            spec->local_size > 0 && spec->local_size + 1 > sysconf(_SC_NPROCESSORS_ONLN)) {
            agg_debug("%d local ranks + switchsim on %ld cores: no spinning",
                      spec->local_size, sysconf(_SC_NPROCESSORS_ONLN));
            ctx->spin_count = 0;
        }
        ctx->coll_timeout_ms    = (int)agg_conf_int(&ctx->conf, AGG_CONF_COLL_TIMEOUT_MS);
        ctx->connect_timeout_ms = (int)agg_conf_int(&ctx->conf, AGG_CONF_CONNECT_TIMEOUT_MS);
        ctx->osts_per_group     = (uint32_t)agg_conf_int(&ctx->conf, AGG_CONF_OSTS_PER_GROUP);
    }
    /* Everyone must have a usable configuration before rank 0 creates the job. */
    st = agg__oob_agree(ctx, ctx->oob_ctx, ctx->world_rank, ctx->world_size, local);
    if (st != AGG_OK) {
        goto err_free;
    }
    if (ctx->world_rank == 0) {
        st = agg__job_create(ctx);
        ctx->job.status = st;
    }
    if (ctx->oob.bcast(ctx->oob_ctx, &ctx->job, sizeof(ctx->job), 0) != 0) {
        st = AGG_ERR_OOB;
        goto err_free;
    }
    st = ctx->job.status;
    if (st != AGG_OK) {
        if (ctx->world_rank != 0 && st == AGG_ERR_SESSION_INIT) {
            agg__set_last_error("cannot connect to the aggregation manager at %s; "
                                "is aggmgr running? Set AGG_AM_ADDR=host:port",
                                agg_conf_str(&ctx->conf, AGG_CONF_AM_ADDR));
        } else if (ctx->world_rank != 0) {
            agg__set_last_error("job creation failed on rank 0: %s",
                                agg_status_string(st));
        }
        goto err_free;
    }
    if (ctx->world_rank == 0) {
        agg_info("tree_info: type:LLT tree idx:0 treeID:0x%x caps:0x6 quota: ( osts:%u "
                 "user_data_per_ost:%u max_groups:%u max_qps:1 max_group_channels:1) "
                 "depth:%u nodes:%u root:0x%016llx",
                 ctx->job.tree_id, ctx->job.osts, ctx->job.payload_per_ost,
                 ctx->job.max_groups, ctx->job.tree_depth, ctx->job.tree_nodes,
                 (unsigned long long)ctx->job.root_guid);
    }
    *ctx_out = ctx;
    return AGG_OK;

err_free:
    if (ctx->am_fd >= 0) {
        close(ctx->am_fd);
    }
    free(ctx);
    return st;
}

agg_status_t agg_context_finalize(agg_context_t *ctx)
{
    agg_msg_job_ref_t ref = {0};
    agg_status_t st = AGG_OK;

    if (ctx == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    /* Every rank is done with the job's groups before it goes. */
    if (ctx->oob.barrier(ctx->oob_ctx) != 0) {
        st = AGG_ERR_OOB;
    }
    if (ctx->world_rank == 0 && ctx->am_fd >= 0) {
        ref.job_id = ctx->job.job_id;
        agg_wire_swap(&ref, AGG_FMT_JOB_REF, 1);
        if (agg_msg_call_status(ctx->am_fd, AGG_MSG_JOB_DESTROY, &ref, sizeof(ref),
                                AGG_MSG_JOB_DESTROY_REPLY, ctx->connect_timeout_ms) != AGG_OK) {
            agg_warn("aggmgr did not confirm the end of job %u", ctx->job.job_id);
        }
    }
    if (ctx->am_fd >= 0) {
        close(ctx->am_fd);
    }
    free(ctx);
    return st;
}

agg_status_t agg_caps_query(agg_context_t *ctx, agg_caps_t *caps)
{
    int d, o;

    if (ctx == NULL || caps == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    memset(caps, 0, sizeof(*caps));
    for (d = 0; d < AGG_DTYPE__COUNT; ++d) {
        for (o = 0; o < AGG_OP__COUNT; ++o) {
            if (agg_reduce_fn(d, o) != NULL) {
                caps->dtypes |= 1u << d;
                caps->ops    |= 1u << o;
            }
        }
    }
    caps->max_osts        = ctx->job.osts;
    caps->payload_per_ost = ctx->job.payload_per_ost;
    caps->max_groups      = ctx->job.max_groups;
    caps->osts_per_group  = ctx->osts_per_group;
    caps->tree_depth      = ctx->job.tree_depth;
    return AGG_OK;
}

uint64_t agg_context_fragments_sent(const agg_context_t *ctx)
{
    return ctx ? ctx->frags_sent : 0;
}
