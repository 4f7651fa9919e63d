/*
 * The job: configuration, the connection to aggmgr, job creation and the
 * out-of-band agreement that keeps every rank on the same path.
 */
#include "agg_internal.h"
#include "agg/gpu.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "agg/auth.h"
#include "agg/log.h"
#include "agg/sock.h"
#include "agg/tls.h"

extern char **environ;

static __thread char agg__last_error[512]; /* per thread: each reads its own failure */

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
    agg_am_target_t am = agg_conf_am_target(&ctx->conf);
    char err[512];

    if (ctx->am_fd >= 0) {
        return AGG_OK;
    }
    if (agg_am_connect(&am, 0, &ctx->am_fd, err, sizeof(err)) != AGG_OK) {
        agg__set_last_error("%s", err);
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

/*
 * Rank 0: JOB_CREATE with every rank's host (gathered by the caller into
 * `names`, AGG_WIRE_NAME_LEN bytes per world rank), as a table of distinct
 * hosts and each rank's index into it.
 */
static agg_status_t agg__job_create(agg_context_t *ctx, const char *names)
{
    agg_msg_job_create_t *req;
    agg_msg_job_create_reply_t rep;
    uint32_t *host_of, nh = 0, r, h;
    size_t len, req_len;
    char *hosts;
    agg_status_t st;

    st = agg__am_connect(ctx);
    if (st != AGG_OK) {
        return st;
    }
    req_len = sizeof(*req) + (size_t)ctx->world_size * (AGG_WIRE_NAME_LEN + sizeof(uint32_t));
    req     = calloc(1, req_len);
    host_of = malloc((size_t)ctx->world_size * sizeof(*host_of));
    if (req == NULL || host_of == NULL) {
        free(req);
        free(host_of);
        return AGG_ERR_NO_MEMORY;
    }
    hosts = (char *)(req + 1);
    for (r = 0; r < (uint32_t)ctx->world_size; ++r) {
        const char *name = names + (size_t)r * AGG_WIRE_NAME_LEN;

        for (h = 0; h < nh && strcmp(hosts + (size_t)h * AGG_WIRE_NAME_LEN, name) != 0; ++h) {
        }
        if (h == nh) {
            memcpy(hosts + (size_t)nh++ * AGG_WIRE_NAME_LEN, name, AGG_WIRE_NAME_LEN);
        }
        host_of[r] = h;
    }
    /* the per-rank indices follow the table of the hosts actually seen */
    memcpy(hosts + (size_t)nh * AGG_WIRE_NAME_LEN, host_of,
           (size_t)ctx->world_size * sizeof(uint32_t));
    agg_wire_swap(hosts + (size_t)nh * AGG_WIRE_NAME_LEN, "l", (size_t)ctx->world_size);
    req_len = sizeof(*req) + (size_t)nh * AGG_WIRE_NAME_LEN +
              (size_t)ctx->world_size * sizeof(uint32_t);
    free(host_of);

    if (getrandom(&ctx->job_key, sizeof(ctx->job_key), 0) != sizeof(ctx->job_key)) {
        ctx->job_key = ((uint64_t)getpid() << 32) ^ (uint64_t)agg_time_ns();
    }
    req->job_key               = ctx->job_key;
    req->world_size            = (uint32_t)ctx->world_size;
    req->pid                   = (uint32_t)getpid();
    req->quota_osts            = (uint32_t)agg_conf_int(&ctx->conf, AGG_CONF_JOB_QUOTA_OSTS);
    req->quota_payload_per_ost = (uint32_t)agg_conf_int(&ctx->conf,
                                                        AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST);
    req->quota_max_groups      = (uint32_t)agg_conf_int(&ctx->conf,
                                                        AGG_CONF_JOB_QUOTA_MAX_GROUPS);
    req->osts_per_group        = ctx->alike.osts_per_group;
    req->flags                 = (ctx->alike.enable_sat ? AGG_JOB_F_SAT : 0) |
                                 (agg_conf_int(&ctx->conf, AGG_CONF_PLACEMENT) == 1 ?
                                  AGG_JOB_F_SPREAD : 0);
    req->num_hosts             = nh;
    memcpy(req->host, names, AGG_WIRE_NAME_LEN);
    snprintf(req->device, sizeof(req->device), "%s",
             agg_conf_str(&ctx->conf, AGG_CONF_HCOLL_MAIN_IB));
    {
        /* SHARP's line names the job; the key itself is never logged: an ID
           drawn from it one way (SHA-256) tells jobs apart in the logs */
        uint8_t digest[32];
        uint64_t id;

        agg_sha256(&ctx->job_key, sizeof(ctx->job_key), digest);
        memcpy(&id, digest, sizeof(id));
        agg_info("job (ID: %llu) resource request quota: ( osts:%u user_data_per_ost:%u "
                 "max_groups:%u max_qps:1 max_group_channels:1, num_trees:%d)",
                 (unsigned long long)(id >> 1), req->quota_osts, req->quota_payload_per_ost,
                 req->quota_max_groups, ctx->alike.enable_sat ? 2 : 1);
    }
    agg_wire_swap(req, AGG_FMT_JOB_CREATE, 1);
    st = agg_msg_call(ctx->am_fd, AGG_MSG_JOB_CREATE, req, req_len,
                      AGG_MSG_JOB_CREATE_REPLY, &rep, sizeof(rep), &len,
                      ctx->connect_timeout_ms);
    free(req);
    if (st != AGG_OK) {
        agg__set_last_error("aggregation manager at %s did not answer the job request: %s",
                            agg_conf_str(&ctx->conf, AGG_CONF_AM_ADDR),
                            agg_status_string(st));
        return AGG_ERR_JOB_CREATE;
    }
    st = agg_wire_reply_decode(&rep, len, sizeof(rep), AGG_FMT_JOB_CREATE_REPLY);
    if (st != AGG_OK) {
        agg__set_last_error("the aggregation manager refused the job: %s",
                            agg_status_string(st));
        return st;
    }
    ctx->job = rep;
    return AGG_OK;
}

/* The settings every call reads, taken once. */
static void agg__context_settings(agg_context_t *ctx, const agg_context_spec_t *spec)
{
    const agg_conf_t *c = &ctx->conf;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    agg_log_set_level((int)agg_conf_int(c, AGG_CONF_LOG_LEVEL));
    ctx->rank_progress      = (int)agg_conf_int(c, AGG_CONF_RANK_PROGRESS);
    ctx->spin_count         = (long)agg_conf_int(c, AGG_CONF_SPIN_COUNT);
    /* Spinning while the processes that must run (the ranks, and switchsim
     * when it does the nodes' work) outnumber the cores only takes the CPU
     * from the process being waited for. */
    if (c->v[AGG_CONF_SPIN_COUNT].source == AGG_CONF_SRC_DEFAULT && spec->local_size > 0 &&
        spec->local_size + (ctx->rank_progress ? 0 : 1) > cpus) {
        agg_debug("%d local ranks on %ld cores: no spinning", spec->local_size, cpus);
        ctx->spin_count = 0;
    }
    ctx->progress              = spec->progress;
    ctx->progress_arg          = spec->progress_arg;
    ctx->alike.coll_timeout_ms = (int)agg_conf_int(c, AGG_CONF_COLL_TIMEOUT_MS);
    ctx->connect_timeout_ms    = (int)agg_conf_int(c, AGG_CONF_CONNECT_TIMEOUT_MS);
    ctx->tcp_lanes             = (uint32_t)agg_conf_int(c, AGG_CONF_TCP_LANES);
    ctx->net_resend_ms         = (int)agg_conf_int(c, AGG_CONF_NET_RESEND_MS);
    ctx->sat_zcopy             = (int)agg_conf_int(c, AGG_CONF_SAT_ZCOPY);
    ctx->alike.osts_per_group  = (uint32_t)agg_conf_int(c, AGG_CONF_OSTS_PER_GROUP);
    ctx->alike.enable_sat      = (int)agg_conf_int(c, AGG_CONF_ENABLE_SAT);
    ctx->alike.sat_threshold   = (size_t)agg_conf_int(c, AGG_CONF_SAT_THRESHOLD);
    ctx->alike.sat_chunk       = (uint32_t)agg_conf_int(c, AGG_CONF_SAT_CHUNK) & ~7u;
    ctx->alike.sat_depth       = (uint32_t)agg_conf_int(c, AGG_CONF_PIPELINE_DEPTH);
    ctx->alike.sat_batch       = (uint32_t)agg_conf_int(c, AGG_CONF_SAT_LOCK_BATCH_SIZE);
    ctx->alike.sat_retries     = (int)agg_conf_int(c, AGG_CONF_SAT_LOCK_RETRIES);
    ctx->alike.sat_retry_us    = (int)agg_conf_int(c, AGG_CONF_SAT_LOCK_RETRY_US);
    ctx->alike.lock_on_init    = (int)agg_conf_int(c, AGG_CONF_LOCK_ON_COMM_INIT);
    ctx->alike.reproducible    = (int)agg_conf_int(c, AGG_CONF_REPRODUCIBLE);
    {
        char why[256];

        /* only a switchsim off loopback asks for it: a bad key file is said
           now, and such groups are then refused at attach */
        if (agg_auth_load(&ctx->auth, agg_conf_str(c, AGG_CONF_AM_KEY_FILE), why,
                          sizeof(why)) != AGG_OK) {
            agg_error("%s", why);
        }
    }
}

/*
 * Rank 0's per-call settings (agg__alike_t) for everyone: a rank started
 * with other values would take another path than its peers and wait for them
 * until the timeout, so it says which values it ignores.
 */
static agg_status_t agg__settings_share(agg_context_t *ctx)
{
    agg__alike_t root = ctx->alike;

    if (ctx->oob.bcast(ctx->oob_ctx, &root, sizeof(root), 0) != 0) {
        return AGG_ERR_OOB;
    }
    if (memcmp(&ctx->alike, &root, sizeof(root)) != 0) {
        agg_warn("rank %d: its SHARP_COLL_ENABLE_SAT, SHARP_COLL_SAT_THRESHOLD, "
                 "SHARP_COLL_SAT_LOCK_BATCH_SIZE, SHARP_COLL_LOCK_ON_COMM_INIT, "
                 "SHARP_COLL_PIPELINE_DEPTH, SHARP_COLL_OSTS_PER_GROUP, AGG_SAT_* or "
                 "AGG_REPRODUCIBLE differ from rank 0's; rank 0's are used "
                 "(threshold %llu, SAT %d, batch %u)", ctx->world_rank,
                 (unsigned long long)root.sat_threshold, root.enable_sat, root.sat_batch);
    }
    ctx->alike = root;
    return AGG_OK;
}

/* Loads a GPU backend as SHARP_COLL_ENABLE_CUDA and AGG_GPU_BACKEND say. */
static agg_status_t agg__gpu_setup(agg_context_t *ctx)
{
    agg_status_t st = agg_gpu_load_conf(&ctx->conf, NULL);

    if (st != AGG_OK) {
        agg__set_last_error("SHARP_COLL_ENABLE_CUDA=1 but no GPU backend loaded: %s",
                            agg_gpu_why());
    }
    return st;
}

agg_mem_type_t agg_mem_query(const void *p, int *device)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    agg_gpu_ptr_t q;

    if (device != NULL) {
        *device = -1;
    }
    if (o == NULL || agg_gpu_query(p, &q) != 0 ||
        (q.mem != AGG_GPU_MEM_DEVICE && q.mem != AGG_GPU_MEM_MANAGED)) {
        return AGG_MEM_HOST;
    }
    if (device != NULL) {
        *device = q.device;
    }
    return (agg_mem_type_t)o->mem_type;
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
    ctx->mt         = spec->thread_safe != 0;
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->am_lock, NULL);
    snprintf(err, sizeof(err), "libagg:%d", spec->world_rank);
    agg_log_set_prefix(err);

    local = agg_conf_load(&ctx->conf, spec->config_file, environ, err, sizeof(err));
    if (local != AGG_OK) {
        agg__set_last_error("%s", err);
        agg_error("%s", err);
    } else {
        agg__context_settings(ctx, spec);
        local = agg__gpu_setup(ctx);
    }
    /* Everyone must have a usable configuration before rank 0 creates the job. */
    st = agg__oob_agree(ctx, ctx->oob_ctx, ctx->world_rank, ctx->world_size, local);
    if (st == AGG_OK) {
        st = agg__settings_share(ctx);
    }
    if (st != AGG_OK) {
        goto err_free;
    }
    {
        /* every rank's host, so that aggmgr places it on an adapter of that host */
        char mine[AGG_WIRE_NAME_LEN] = {0}, *names = NULL;

        gethostname(mine, sizeof(mine) - 1);
        if (ctx->world_rank == 0) {
            names = calloc((size_t)ctx->world_size, AGG_WIRE_NAME_LEN);
        }
        if (ctx->oob.gather(ctx->oob_ctx, 0, mine, names, AGG_WIRE_NAME_LEN) != 0) {
            free(names);
            st = AGG_ERR_OOB;
            goto err_free;
        }
        if (ctx->world_rank == 0) {
            st = names != NULL ? agg__job_create(ctx, names) : AGG_ERR_NO_MEMORY;
            ctx->job.status = st;
        }
        free(names);
    }
    /* the answer, and the job's key: any rank may lead a communicator's group */
    if (ctx->oob.bcast(ctx->oob_ctx, &ctx->job, sizeof(ctx->job), 0) != 0 ||
        ctx->oob.bcast(ctx->oob_ctx, &ctx->job_key, sizeof(ctx->job_key), 0) != 0) {
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
        agg__am_watch_start(ctx);
        agg_info("tree_info: type:LLT tree idx:0 treeID:0x%x caps:0x6 quota: ( osts:%u "
                 "user_data_per_ost:%u max_groups:%u max_qps:1 max_group_channels:1) "
                 "depth:%u nodes:%u root:0x%016llx",
                 ctx->job.tree_id, ctx->job.osts, ctx->job.payload_per_ost,
                 ctx->job.max_groups, ctx->job.tree_depth, ctx->job.tree_nodes,
                 (unsigned long long)ctx->job.root_guid);
        if (ctx->job.sat_tree_id != 0) {
            agg_info("tree_info: type:SAT tree idx:1 treeID:0x%x caps:0x16 quota: ( "
                     "sat_flows:%u chunk:%u pipeline_depth:%u)", ctx->job.sat_tree_id,
                     ctx->job.sat_flows, ctx->alike.sat_chunk, ctx->alike.sat_depth);
        }
    }
    *ctx_out = ctx;
    return AGG_OK;

err_free:
    if (ctx->am_fd >= 0) {
        agg_tls_close(ctx->am_fd);
    }
    agg__rcache_free(ctx);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->am_lock);
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
    agg__am_watch_stop(ctx);
    if (ctx->world_rank == 0) {
        ref.job_id = ctx->job.job_id;
        agg_wire_swap(&ref, AGG_FMT_JOB_REF, 1);
        if (agg__am_call_status(ctx, AGG_MSG_JOB_DESTROY, &ref, sizeof(ref),
                                AGG_MSG_JOB_DESTROY_REPLY, ctx->connect_timeout_ms) != AGG_OK) {
            agg_warn("aggmgr did not confirm the end of job %u", ctx->job.job_id);
        }
    }
    if (ctx->am_fd >= 0) {
        agg_tls_close(ctx->am_fd);
    }
    agg__rcache_free(ctx);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->am_lock);
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
                caps->dtypes     |= 1u << d;
                caps->ops        |= 1u << o;
                caps->op_mask[d] |= 1u << o;
            }
        }
    }
    caps->max_osts        = ctx->job.osts;
    caps->payload_per_ost = ctx->job.payload_per_ost;
    caps->max_groups      = ctx->job.max_groups;
    caps->osts_per_group  = ctx->alike.osts_per_group;
    caps->tree_depth      = ctx->job.tree_depth;
    caps->features        = AGG_FEATURE_LLT | AGG_FEATURE_REPRODUCIBLE |
                            (ctx->job.sat_tree_id ? AGG_FEATURE_SAT | AGG_FEATURE_SAT_LOCK : 0) |
                            (ctx->job.shared_adapters ? AGG_FEATURE_SHARED_ADAPTER : 0);
    caps->sat_chunk       = ctx->alike.sat_chunk;
    caps->sat_threshold   = ctx->alike.sat_threshold;
    caps->colls           = (1u << AGG_COLL__COUNT) - 1;
    return AGG_OK;
}

uint64_t agg_context_fragments_sent(const agg_context_t *ctx)
{
    return ctx ? __atomic_load_n(&ctx->frags_sent, __ATOMIC_RELAXED) : 0;
}
