/*
 * hcoll_shim: preloaded under an unmodified mpirun and MPI program. This
 * file: MPI_Init*, MPI_Finalize and the job's settings. shim_comm.c keeps a
 * state per communicator (and its group on the tree), shim_call.c takes
 * each collective as one call descriptor and walks its paths: the network
 * (shim_coll.c), device buffers' (shim_gpu.c), node leaders (shim_hier.c),
 * the shim's own host algorithms (shim_allreduce.c, shim_host.c) or Open
 * MPI's PMPI_ functions, so a result is never wrong; shim_request.c completes non-blocking ones through MPI's own
 * requests, shim_stats.c says where calls went. HCOLL_ENABLE_SHARP: 0 off,
 * 1 use if available, 2 and up force (an unreachable manager is then an
 * error), 4 offloads barriers too.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/conf.h"
#include "agg/log.h"
#include "shim.h"

shim_state_t shim = {.keyval = MPI_KEYVAL_INVALID};
static MPI_Comm shim_world_oob = MPI_COMM_NULL; /* libagg's out-of-band channel for the job */

static int shim_oob_bcast(void *ctx, void *buf, size_t size, int root)
{
    return PMPI_Bcast(buf, (int)size, MPI_BYTE, root, *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int shim_oob_barrier(void *ctx)
{
    return PMPI_Barrier(*(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static int shim_oob_gather(void *ctx, int root, const void *sbuf, void *rbuf, size_t size)
{
    return PMPI_Gather(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, root,
                       *(MPI_Comm *)ctx) != MPI_SUCCESS;
}

static void shim_warn_env(const char *msg, void *arg)
{
    agg_warn("%s", msg);
}

/*
 * MPI's progress, for libagg to drive while it waits: a peer's synchronous
 * send to this rank, or an MPI request the other members need, completes
 * only when this process moves MPI on. Open MPI's engine when it is there
 * (which also runs shim_progress), else a probe, which does the same in any
 * MPI.
 */
static int shim_mpi_progress(void *arg)
{
    int flag = 0;

    if (shim.opal_progress != NULL) {
        return shim.opal_progress();
    }
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, shim_world_oob, &flag, MPI_STATUS_IGNORE);
    return flag;
}

/* Hooks shim_progress into Open MPI's progress engine, where there is one. */
static void shim_progress_hook(void)
{
    int (*reg)(int (*cb)(void));

    *(void **)&shim.opal_progress   = dlsym(RTLD_DEFAULT, "opal_progress");
    *(void **)&reg                  = dlsym(RTLD_DEFAULT, "opal_progress_register");
    *(void **)&shim.opal_unregister = dlsym(RTLD_DEFAULT, "opal_progress_unregister");
    if (reg != NULL && shim.opal_unregister != NULL && reg(shim_progress) == 0) {
        shim.registered = 1;
        return;
    }
    agg_debug("no Open MPI progress engine to hook into: non-blocking allreduces "
              "move on inside the MPI wait and test calls only");
}

/*
 * Rank 0's settings hold for every rank: one that took another path than
 * its peers (host or network, set up a group or not, which host algorithm)
 * would wait for them in vain, or pair its messages with theirs wrongly.
 */
static void shim_settings(void)
{
    enum { ENABLE, NP, MAX, LARGE, DYNAMIC, LAZY, HYBRID, FRAG, DISABLE, STATS, SBGP, RETRY, N };
    long long mine[N] = {0}, root[N];
    agg_conf_t conf;
    char err[512];
    int ok = agg_conf_load(&conf, NULL, environ, err, sizeof(err)) == AGG_OK;

    if (!ok) {
        const char *forced = getenv("HCOLL_ENABLE_SHARP");

        /* force means force: settings that cannot be read are no reason to run on the host */
        if (forced != NULL && atoi(forced) >= 2) {
            fprintf(stderr, "hcoll_shim: rank %d: %s; HCOLL_ENABLE_SHARP=%s requires in-network "
                    "aggregation with these settings: stopping\n", shim.world_rank, err, forced);
            fflush(stderr);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(stderr, "hcoll_shim: rank %d: %s; offload disabled\n", shim.world_rank, err);
    } else {
        agg_log_set_level((int)agg_conf_int(&conf, AGG_CONF_LOG_LEVEL));
        mine[ENABLE]  = agg_conf_int(&conf, AGG_CONF_HCOLL_ENABLE_SHARP);
        mine[NP]      = agg_conf_int(&conf, AGG_CONF_HCOLL_SHARP_NP);
        mine[MAX]     = agg_conf_int(&conf, AGG_CONF_HCOLL_ALLREDUCE_SHARP_MAX);
        mine[LARGE]   = agg_conf_int(&conf, AGG_CONF_HCOLL_LARGE_ALLREDUCE_ALG) != 4;
        mine[DYNAMIC] = strcmp(agg_conf_str(&conf, AGG_CONF_HCOLL_ZCOPY_TUNE), "dynamic") == 0;
        mine[LAZY]    = agg_conf_int(&conf, AGG_CONF_GROUP_ALLOC_THRESHOLD);
        mine[RETRY]   = agg_conf_int(&conf, AGG_CONF_NET_RETRY_CALLS);
        mine[HYBRID]  = agg_conf_int(&conf, AGG_CONF_HCOLL_HYBRID_LB);
        mine[FRAG]    = agg_conf_int(&conf, AGG_CONF_HCOLL_HYBRID_FRAG);
        mine[DISABLE] = agg_conf_int(&conf, AGG_CONF_SHIM_DISABLE);
        mine[STATS]   = agg_conf_int(&conf, AGG_CONF_STATS);
        /* a shared-memory level in HCOLL's hierarchy: ranks of a host may elect a leader */
        mine[SBGP]    = strstr(agg_conf_str(&conf, AGG_CONF_HCOLL_SBGP), "basesm") != NULL;
        shim_gpu_setup(&conf);
        if (shim.world_rank == 0) {
            agg_conf_check_env(environ, shim_warn_env, NULL);
        }
    }
    memcpy(root, mine, sizeof(root));
    PMPI_Bcast(root, N, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (ok && memcmp(mine, root, sizeof(root)) != 0) {
        agg_warn("rank %d: its HCOLL_* / SHARP_COLL_* / AGG_SHIM_DISABLE / AGG_STATS settings "
                 "differ from rank 0's; rank 0's are used (HCOLL_ENABLE_SHARP=%lld)",
                 shim.world_rank, root[ENABLE]);
    }
    shim.level       = (int)root[ENABLE];
    shim.np          = root[NP];
    shim.max_bytes   = root[MAX];
    shim.large_host  = (int)root[LARGE];
    shim.dynamic     = (int)root[DYNAMIC];
    shim.lazy        = root[LAZY];
    shim.retry_calls = root[RETRY];
    shim.hybrid_frag = root[HYBRID] ? root[FRAG] : 0;
    shim.on          = !root[DISABLE];
    shim.stats       = (int)root[STATS];
    shim.sbgp_sm     = (int)root[SBGP];
}

static void shim_init(int thread_level)
{
    agg_context_spec_t spec = {0};
    char prefix[32];
    agg_status_t st;

    PMPI_Comm_rank(MPI_COMM_WORLD, &shim.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &shim.world_size);
    snprintf(prefix, sizeof(prefix), "shim:%d", shim.world_rank);
    agg_log_set_prefix(prefix);
    shim_settings();
    if (!shim.on) {
        return; /* AGG_SHIM_DISABLE: as if the shim were not there */
    }
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &shim.keyval,
                            NULL);
    shim.off_why = SHIM_WHY_OFF;
    if (shim.level == 0) {
        agg_debug("HCOLL_ENABLE_SHARP=0: every collective on the host path");
        return;
    }
    PMPI_Comm_dup(MPI_COMM_WORLD, &shim_world_oob);
    {
        MPI_Comm node;
        PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        PMPI_Comm_size(node, &spec.local_size);
        PMPI_Comm_free(&node);
    }
    spec.world_rank  = shim.world_rank;
    spec.world_size  = shim.world_size;
    spec.oob.bcast   = shim_oob_bcast;
    spec.oob.barrier = shim_oob_barrier;
    spec.oob.gather  = shim_oob_gather;
    spec.oob_ctx     = &shim_world_oob;
    spec.progress    = shim_mpi_progress;
    /* threads may call collectives on different communicators at once; each
       communicator's group is set up within its own blocking collective */
    spec.thread_safe = thread_level == MPI_THREAD_MULTIPLE;
    st = agg_context_init(&spec, &shim.ctx);
    if (st == AGG_OK) {
        agg_caps_t caps;

        /* "large" is what libagg (rank 0's settings) sends to SAT */
        agg_caps_query(shim.ctx, &caps);
        shim.large_bytes = (long long)caps.sat_threshold;
        shim.leaders     = shim.sbgp_sm && (caps.features & AGG_FEATURE_SHARED_ADAPTER);
        shim_progress_hook();
        /* MPI_COMM_WORLD's state now, while every rank is here anyway (and
           its group, unless that comes lazily) */
        shim_comm_created(MPI_COMM_WORLD);
        return;
    }
    shim.ctx = NULL;
    PMPI_Comm_free(&shim_world_oob);
    if (shim.level == 1) {
        if (shim.world_rank == 0) {
            agg_warn("HCOLL_ENABLE_SHARP=1: in-network aggregation not available (%s); "
                     "collectives use the host path", agg_context_last_error());
        }
        shim.level = 0;
        return;
    }
    /* Forced: an unavailable network is an error, not a silent slowdown. */
    if (shim.world_rank == 0) {
        fprintf(stderr, "hcoll_shim: HCOLL_ENABLE_SHARP=%d requires in-network aggregation, "
                "but it is not available: %s (%s)\n", shim.level, agg_context_last_error(),
                agg_strerror(st));
        fflush(stderr);
    }
    PMPI_Abort(MPI_COMM_WORLD, 1);
}

SHIM_API int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);

    if (rc == MPI_SUCCESS) {
        shim_init(MPI_THREAD_SINGLE);
    }
    return rc;
}

SHIM_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);

    if (rc == MPI_SUCCESS) {
        shim_init(*provided);
    }
    return rc;
}

SHIM_API int MPI_Finalize(void)
{
    shim_comm_t *sc;

    if (!shim.on) {
        return PMPI_Finalize();
    }
    if (shim.registered) {
        shim.opal_unregister(shim_progress);
        shim.registered = 0;
    }
    shim_requests_abandon();
    if (shim.world_rank == 0 && shim.ctx != NULL) {
        unsigned long off = shim.calls[SHIM_FN_ALLREDUCE][SHIM_PATH_LLT] +
                            shim.calls[SHIM_FN_ALLREDUCE][SHIM_PATH_SAT] +
                            shim.calls[SHIM_FN_IALLREDUCE][SHIM_PATH_LLT] +
                            shim.calls[SHIM_FN_IALLREDUCE][SHIM_PATH_SAT];
        agg_info("hcoll_shim: %lu allreduce calls offloaded (%lu non-blocking collectives, "
                 "%llu fragments); AGG_STATS=1 says where every call went", off,
                 shim.offloaded_nb,
                 (unsigned long long)agg_context_fragments_sent(shim.ctx));
    }
    if (shim.stats && shim.world_rank == 0) {
        shim_stats_print();
    }
    /* Groups still open are released with the job; only local state goes. */
    while ((sc = shim.comms) != NULL) {
        shim.comms = sc->next;
        if (sc->agg != NULL) {
            agg_comm_abandon(sc->agg);
        }
        free(sc->scratch);
        free(sc->leader_of);
        free(sc->node_rank);
        free(sc);
    }
    if (shim.ctx != NULL) {
        agg_context_finalize(shim.ctx);
        shim.ctx = NULL;
        PMPI_Comm_free(&shim_world_oob);
    }
    shim_host_cleanup();
    shim_gpu_cleanup();
    PMPI_Comm_free_keyval(&shim.keyval);
    shim.on = 0;
    return PMPI_Finalize();
}
