/*
 * hcoll_shim: preloaded under an unmodified mpirun and MPI program. This
 * file: MPI_Init*, MPI_Comm_free and MPI_Finalize, and the group behind each
 * communicator; shim_allreduce.c offloads MPI_Allreduce and MPI_Iallreduce,
 * shim_request.c completes the latter through MPI's own requests. What the
 * network cannot reduce goes to Open MPI's PMPI_ functions, so a result is never
 * wrong. HCOLL_ENABLE_SHARP: 0 off, 1 use if available, 2 and up force (an
 * unreachable manager is then an error).
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
    PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, shim.world_oob, &flag, MPI_STATUS_IGNORE);
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

static void shim_init(int thread_level)
{
    agg_context_spec_t spec = {0};
    agg_conf_t conf;
    char err[512];
    agg_status_t st;

    PMPI_Comm_rank(MPI_COMM_WORLD, &shim.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &shim.world_size);
    snprintf(err, sizeof(err), "shim:%d", shim.world_rank);
    agg_log_set_prefix(err);
    {
        /*
         * Rank 0's choices hold for every rank: one that took another path
         * than its peers (host or network, set up a group or not) would wait
         * for them in vain, or pair its collectives with theirs wrongly.
         */
        long long mine[4] = {0}, root[4];
        int ok = agg_conf_load(&conf, NULL, environ, err, sizeof(err)) == AGG_OK;

        if (!ok) {
            fprintf(stderr, "hcoll_shim: rank %d: %s; offload disabled\n", shim.world_rank,
                    err);
        } else {
            agg_log_set_level((int)agg_conf_int(&conf, AGG_CONF_LOG_LEVEL));
            mine[0] = agg_conf_int(&conf, AGG_CONF_HCOLL_ENABLE_SHARP);
            mine[1] = agg_conf_int(&conf, AGG_CONF_HCOLL_SHARP_NP);
            mine[2] = agg_conf_int(&conf, AGG_CONF_HCOLL_ALLREDUCE_SHARP_MAX);
            mine[3] = agg_conf_int(&conf, AGG_CONF_HCOLL_LARGE_ALLREDUCE_ALG) != 4;
            if (shim.world_rank == 0) {
                agg_conf_check_env(environ, shim_warn_env, NULL);
            }
        }
        memcpy(root, mine, sizeof(root));
        PMPI_Bcast(root, 4, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        if (ok && memcmp(mine, root, sizeof(root)) != 0) {
            agg_warn("rank %d: its HCOLL_ENABLE_SHARP, HCOLL_SHARP_NP, "
                     "HCOLL_ALLREDUCE_SHARP_MAX or "
                     "HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG differ from rank 0's; rank 0's "
                     "are used (HCOLL_ENABLE_SHARP=%lld)", shim.world_rank, root[0]);
        }
        shim.level       = (int)root[0];
        shim.np          = root[1];
        shim.max_bytes   = root[2];
        shim.large_host  = (int)root[3];
    }
    if (shim.level == 0) {
        agg_debug("HCOLL_ENABLE_SHARP=0: every collective on the host path");
        return;
    }
    {
        /* Collectives from several threads at once could interleave their
         * group set-up differently on different ranks: never risk a hang. */
        int multiple = thread_level == MPI_THREAD_MULTIPLE;

        PMPI_Allreduce(MPI_IN_PLACE, &multiple, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (multiple) {
            if (shim.world_rank == 0) {
                agg_warn("HCOLL_ENABLE_SHARP=%d ignored: the program runs with "
                         "MPI_THREAD_MULTIPLE, which the offload does not support yet; "
                         "collectives use the host path", shim.level);
            }
            shim.level = 0;
            return;
        }
    }
    PMPI_Comm_dup(MPI_COMM_WORLD, &shim.world_oob);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &shim.keyval,
                            NULL);
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
    spec.oob_ctx     = &shim.world_oob;
    spec.progress    = shim_mpi_progress;
    st = agg_context_init(&spec, &shim.ctx);
    if (st == AGG_OK) {
        agg_caps_t caps;

        /* "large" is what libagg (rank 0's settings) sends to SAT */
        agg_caps_query(shim.ctx, &caps);
        shim.large_bytes = (long long)caps.sat_threshold;
        shim_progress_hook();
        /*
         * MPI_COMM_WORLD's group now, while every rank is here anyway: a
         * non-blocking allreduce never sets a group up (that is collective
         * and blocking, and could deadlock a program that starts them in
         * different orders on different communicators), so it is offloaded
         * on communicators that have one already.
         */
        shim_comm_get(MPI_COMM_WORLD);
        return;
    }
    shim.ctx = NULL;
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

shim_comm_t *shim_comm_peek(MPI_Comm comm)
{
    int flag = 0;
    void *val;

    if (comm == MPI_COMM_NULL ||
        PMPI_Comm_get_attr(comm, shim.keyval, &val, &flag) != MPI_SUCCESS || !flag) {
        return NULL;
    }
    return val;
}

shim_comm_t *shim_comm_get(MPI_Comm comm)
{
    agg_comm_spec_t spec = {0};
    MPI_Group group, world_group;
    shim_comm_t *sc;
    int *ranks, *world_ranks, flag = 0, i, ok;
    agg_status_t st;

    if (comm == MPI_COMM_NULL) {
        return NULL; /* the host path reports the error */
    }
    sc = shim_comm_peek(comm);
    if (sc != NULL) {
        return sc;
    }
    if (PMPI_Comm_test_inter(comm, &flag) != MPI_SUCCESS) {
        return NULL; /* not a communicator: the host path reports it */
    }
    sc = calloc(1, sizeof(*sc));
    if (sc == NULL) {
        return NULL;
    }
    sc->state = SHIM_COMM_HOST;
    sc->oob   = MPI_COMM_NULL;
    /* An intercommunicator's allreduce returns the other group's reduction:
     * not what a group on the tree computes. */
    if (flag) {
        goto out;
    }
    PMPI_Comm_rank(comm, &spec.rank);
    PMPI_Comm_size(comm, &spec.size);
    if (shim.level <= 2 && spec.size < shim.np) {
        /* say why the network is not used (users' first complaint about SHARP) */
        if (spec.rank == 0) {
            agg_info("communicator of %d ranks stays on the host path: below "
                     "HCOLL_SHARP_NP=%lld", spec.size, shim.np);
        }
        goto out;
    }
    ranks       = malloc((size_t)spec.size * sizeof(int));
    world_ranks = malloc((size_t)spec.size * sizeof(int));
    ok          = ranks != NULL && world_ranks != NULL;
    /* every member must take the same path, even if one is out of memory */
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, comm);
    if (!ok) {
        free(ranks);
        free(world_ranks);
        goto out;
    }
    for (i = 0; i < spec.size; ++i) {
        ranks[i] = i;
    }
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    PMPI_Group_translate_ranks(group, spec.size, ranks, world_group, world_ranks);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world_group);
    PMPI_Comm_dup(comm, &sc->oob);
    spec.world_ranks = world_ranks;
    spec.oob_ctx     = &sc->oob;
    st = agg_comm_init(shim.ctx, &spec, &sc->agg);
    free(ranks);
    free(world_ranks);
    if (st == AGG_OK) {
        sc->state = SHIM_COMM_READY;
    } else if (spec.rank == 0) {
        /* once per reason at INFO: a program making hundreds of communicators
           past the group quota would otherwise print hundreds of lines */
        static uint64_t said; /* bit per agg_status_t already logged */
        uint64_t bit = 1ull << ((unsigned)-st % 64);

        if (!(said & bit)) {
            said |= bit;
            agg_info("communicator of %d ranks stays on the host path: %s (said once; "
                     "the others at SHARP_COLL_LOG_LEVEL=4)", spec.size, agg_strerror(st));
        } else {
            agg_debug("communicator of %d ranks stays on the host path: %s", spec.size,
                      agg_strerror(st));
        }
    }
out:
    sc->next   = shim.comms;
    shim.comms = sc;
    PMPI_Comm_set_attr(comm, shim.keyval, sc);
    return sc;
}

static void shim_comm_forget(shim_comm_t *sc)
{
    shim_comm_t **pp;

    for (pp = &shim.comms; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == sc) {
            *pp = sc->next;
            break;
        }
    }
}

SHIM_API int MPI_Comm_free(MPI_Comm *comm)
{
    shim_comm_t *sc;
    int flag = 0;
    void *val;

    if (shim.ctx != NULL && comm != NULL && *comm != MPI_COMM_NULL) {
        PMPI_Comm_get_attr(*comm, shim.keyval, &val, &flag);
        if (flag) {
            sc = val;
            shim_requests_finish(sc);
            if (sc->agg != NULL) {
                agg_comm_destroy(sc->agg);
            }
            if (sc->oob != MPI_COMM_NULL) {
                PMPI_Comm_free(&sc->oob);
            }
            PMPI_Comm_delete_attr(*comm, shim.keyval);
            shim_comm_forget(sc);
            free(sc);
        }
    }
    return PMPI_Comm_free(comm);
}

SHIM_API int MPI_Finalize(void)
{
    shim_comm_t *sc;

    if (shim.ctx != NULL) {
        if (shim.registered) {
            shim.opal_unregister(shim_progress);
            shim.registered = 0;
        }
        shim_requests_abandon();
        /* Groups still open are released with the job; only local state goes. */
        while ((sc = shim.comms) != NULL) {
            shim.comms = sc->next;
            agg_comm_abandon(sc->agg);
            free(sc);
        }
        if (shim.world_rank == 0) {
            agg_info("hcoll_shim: %lu allreduce calls offloaded (%lu non-blocking, %llu "
                     "fragments), %lu on the host path, %lu fell back after a network error",
                     shim.offloaded, shim.offloaded_nb,
                     (unsigned long long)agg_context_fragments_sent(shim.ctx),
                     shim.host_calls, shim.fallbacks);
        }
        agg_context_finalize(shim.ctx);
        shim.ctx = NULL;
        PMPI_Comm_free_keyval(&shim.keyval);
        PMPI_Comm_free(&shim.world_oob);
    }
    return PMPI_Finalize();
}
