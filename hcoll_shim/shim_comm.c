/*
 * The shim's state of each communicator: a private duplicate for its own
 * messages (libagg's out-of-band calls, the host algorithms), the host
 * algorithms' size table, and the group on the tree, made at the first
 * blocking collective, or after SHARP_COLL_NUM_COLL_GROUP_RESOURCE_ALLOC_
 * THRESHOLD of them (only a blocking call may make it: making a group is
 * collective and blocking, and a program may start non-blocking calls on
 * different communicators in different orders). The state is made when the
 * program creates the communicator (MPI_Comm_dup, _split, _create), where
 * every member is anyway, or at its first blocking collective; it goes with
 * MPI_Comm_free.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "shim.h"

/* shim.comms: threads make and free communicators at once (MPI_THREAD_MULTIPLE) */
static pthread_mutex_t shim_comms_lock = PTHREAD_MUTEX_INITIALIZER;

shim_comm_t *shim_comm_peek(MPI_Comm comm)
{
    int flag = 0;
    void *val;

    if (!shim.on || comm == MPI_COMM_NULL ||
        PMPI_Comm_get_attr(comm, shim.keyval, &val, &flag) != MPI_SUCCESS || !flag) {
        return NULL;
    }
    return val;
}

/* Says once per reason at INFO why communicators stay on the host path. */
static void shim_comm_say(const shim_comm_t *sc, const char *what)
{
    static uint64_t said; /* bit per reason already logged */
    uint64_t bit = 1ull << ((unsigned)sc->why % 64);

    if (sc->rank != 0) {
        return;
    }
    if (!(__atomic_fetch_or(&said, bit, __ATOMIC_RELAXED) & bit)) {
        agg_info("communicator of %d ranks stays on the host path: %s (said once; the "
                 "others at SHARP_COLL_LOG_LEVEL=4)", sc->size, what);
    } else {
        agg_debug("communicator of %d ranks stays on the host path: %s", sc->size, what);
    }
}

/* The outcome of making a group, the same on every member. */
static void shim_comm_group_made(shim_comm_t *sc, agg_status_t st)
{
    if (st == AGG_OK) {
        if (sc->regroup && sc->rank == 0) {
            agg_info("communicator of %d ranks has its group on the tree again", sc->size);
        }
        sc->state   = SHIM_COMM_READY;
        sc->why     = SHIM_WHY_NONE;
        sc->regroup = 0;
        sc->nb_agree = 0; /* a failure of the new group is agreed on afresh */
        __atomic_store_n(&sc->nb_host, 0, __ATOMIC_RELAXED);
        return;
    }
    if (sc->regroup) {
        /* the network is not back yet: on the host for as many calls again */
        agg_debug("communicator of %d ranks: no group yet (%s)", sc->size, agg_strerror(st));
        sc->state = SHIM_COMM_LATER;
        sc->calls = 0;
        return;
    }
    sc->state = shim.level >= 3 ? SHIM_COMM_FAILED : SHIM_COMM_HOST;
    sc->agg   = NULL;
    sc->fail  = st;
    sc->why   = st == AGG_ERR_QUOTA || st == AGG_ERR_NO_RESOURCE ? SHIM_WHY_RESOURCES
                                                                  : SHIM_WHY_NETWORK_ERROR;
    if (sc->state == SHIM_COMM_HOST) {
        shim_comm_say(sc, agg_strerror(st));
    }
}

/* Makes the communicator's group on the tree; collective over comm. */
static void shim_comm_make_group(shim_comm_t *sc, MPI_Comm comm)
{
    agg_comm_spec_t spec = {.rank = sc->rank, .size = sc->size, .oob_ctx = &sc->pcomm};
    MPI_Group group, world_group;
    int *ranks, *world_ranks, i, ok;
    agg_status_t st;

    if (sc->hier) {
        shim_comm_group_made(sc, shim_hier_group(sc));
        return;
    }
    ranks       = malloc((size_t)sc->size * sizeof(int));
    world_ranks = malloc((size_t)sc->size * sizeof(int));
    ok          = ranks != NULL && world_ranks != NULL;
    /* every member must take the same path, even if one is out of memory */
    PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, sc->pcomm);
    if (!ok) {
        free(ranks);
        free(world_ranks);
        shim_comm_group_made(sc, AGG_ERR_NO_MEMORY);
        return;
    }
    for (i = 0; i < sc->size; ++i) {
        ranks[i] = i;
    }
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    PMPI_Group_translate_ranks(group, sc->size, ranks, world_group, world_ranks);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world_group);
    spec.world_ranks = world_ranks;
    st = agg_comm_init(shim.ctx, &spec, &sc->agg);
    free(ranks);
    free(world_ranks);
    shim_comm_group_made(sc, st);
}

/* The state of a communicator the shim has not seen yet; collective over comm. */
static shim_comm_t *shim_comm_new(MPI_Comm comm)
{
    shim_comm_t *sc;
    int inter = 0;

    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
        return NULL; /* not a communicator: MPI reports it */
    }
    sc = calloc(1, sizeof(*sc));
    if (sc == NULL) {
        return NULL;
    }
    sc->pcomm   = MPI_COMM_NULL;
    sc->node    = MPI_COMM_NULL;
    sc->leaders = MPI_COMM_NULL;
    sc->state = SHIM_COMM_HOST;
    PMPI_Comm_rank(comm, &sc->rank);
    PMPI_Comm_size(comm, &sc->size);
    if (inter) {
        /* an intercommunicator's allreduce returns the other group's
           reduction: not what a group on the tree computes */
        sc->inter = 1;
        sc->why   = SHIM_WHY_INTERCOMM;
        goto out;
    }
    sc->blocks = calloc((size_t)sc->size, sizeof(*sc->blocks));
    if (sc->blocks == NULL) {
        free(sc);
        return NULL;
    }
    PMPI_Comm_dup(comm, &sc->pcomm);
    /* the shim's own calls on it return errors (the caller decides), never abort */
    PMPI_Comm_set_errhandler(sc->pcomm, MPI_ERRORS_RETURN);
    shim_host_tune_static(&sc->tune, sc->size);
    if (shim.dynamic && shim_host_tune_dynamic(&sc->tune, sc->pcomm) != MPI_SUCCESS) {
        shim_host_tune_static(&sc->tune, sc->size);
    }
    if (shim.ctx == NULL) {
        sc->why = shim.off_why;
    } else if (sc->size == 1) {
        /* nobody to reduce with: a copy at most, whatever HCOLL_ENABLE_SHARP forces;
           a group would only spend the job's quota */
        sc->why = SHIM_WHY_COMM_SMALL;
    } else if (shim.level <= 2 && sc->size < shim.np) {
        sc->why = SHIM_WHY_COMM_SMALL;
        if (sc->rank == 0) {
            /* say why the network is not used (users' first complaint about SHARP) */
            agg_info("communicator of %d ranks stays on the host path: below "
                     "HCOLL_SHARP_NP=%lld", sc->size, shim.np);
        }
    } else {
        sc->state = SHIM_COMM_LATER;
        sc->why   = SHIM_WHY_LAZY;
        if (shim.leaders) {
            shim_hier_setup(sc);
        }
    }
out:
    pthread_mutex_lock(&shim_comms_lock);
    sc->next   = shim.comms;
    shim.comms = sc;
    pthread_mutex_unlock(&shim_comms_lock);
    PMPI_Comm_set_attr(comm, shim.keyval, sc);
    return sc;
}

shim_comm_t *shim_comm_get(MPI_Comm comm)
{
    shim_comm_t *sc;

    if (!shim.on || comm == MPI_COMM_NULL) {
        return NULL;
    }
    sc = shim_comm_peek(comm);
    if (sc == NULL) {
        sc = shim_comm_new(comm);
    }
    if (sc != NULL && sc->state == SHIM_COMM_LATER &&
        (long long)sc->calls++ >= (sc->regroup ? shim.retry_calls : shim.lazy)) {
        shim_comm_make_group(sc, comm);
    }
    return sc;
}

void shim_comm_lost(shim_comm_t *sc, agg_status_t st)
{
    if (st != AGG_ERR_SHUTDOWN || shim.level > 2 || shim.retry_calls <= 0 || sc->hier ||
        sc->state != SHIM_COMM_READY) {
        return;
    }
    shim_requests_finish(sc); /* non-blocking ones still on the group fail with it */
    agg_comm_destroy(sc->agg);
    sc->agg     = NULL;
    sc->state   = SHIM_COMM_LATER;
    sc->why     = SHIM_WHY_NETWORK_ERROR;
    sc->calls   = 0;
    sc->regroup = 1;
    if (sc->rank == 0) {
        agg_warn("communicator of %d ranks lost its group on the tree (%s): its collectives "
                 "run on the host, and it makes its group again after %lld of them "
                 "(AGG_NET_RETRY_CALLS)", sc->size, agg_strerror(st), shim.retry_calls);
    }
}

/*
 * Over TCP each member gets its result in a message of its own, so a
 * switchsim killed while it sends them leaves some members with the result
 * (their call done, the next one failing) and the others without. Redone on
 * the host, two different calls would meet: a wrong result, or a wait
 * forever. The count of the communicator's blocking calls in the network
 * tells (every member makes the same ones): equal everywhere, the call is
 * redone; not, neither side can be, and both are errors that say why. The
 * members now stand at different calls of the program, so every later
 * collective of the communicator fails too (redone or not, the host would
 * pair different calls, whether the program stops at its error or not).
 */
void shim_comm_break(shim_comm_t *sc, const char *what, long first, long last)
{
    __atomic_store_n(&sc->broken, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&sc->fail_said, 1, __ATOMIC_RELAXED); /* said here, once */
    if (sc->rank == 0) {
        agg_error("%s on a communicator of %d ranks failed in the network at call %ld on some "
                  "members and at %ld on others (the tree was lost while it sent a call's "
                  "results), so no call can be redone on the host: each fails with "
                  "MPI_ERR_OTHER, as does every later collective of this communicator", what,
                  sc->size, first, last);
    }
}

int shim_comm_agree(shim_comm_t *sc, shim_call_t *c)
{
    long mine[2] = {(long)sc->net_seq, -(long)sc->net_seq}, all[2];

    if (PMPI_Allreduce(mine, all, 2, MPI_LONG, MPI_MIN, sc->pcomm) != MPI_SUCCESS) {
        all[0] = -1;
        all[1] = 0;
    }
    if (all[0] == -all[1]) {
        return MPI_SUCCESS;
    }
    shim_comm_break(sc, shim_fn_name(c->fn), all[0], -all[1]);
    c->why   = SHIM_WHY_NETWORK_ERROR;
    c->route = SHIM_ROUTE_FAIL;
    shim_count(c->fn, SHIM_PATH_FAILED, c->why);
    PMPI_Comm_call_errhandler(c->comm, MPI_ERR_OTHER);
    return MPI_ERR_OTHER;
}

void shim_comm_created(MPI_Comm comm)
{
    shim_comm_t *sc;

    if (!shim.on || comm == MPI_COMM_NULL || shim_comm_peek(comm) != NULL) {
        return;
    }
    sc = shim_comm_new(comm);
    /*
     * SHARP_COLL_NUM_COLL_GROUP_RESOURCE_ALLOC_THRESHOLD=0: its group now,
     * while every member is here making it; a non-blocking collective never
     * sets one up (it must not wait for the others), so one on a new
     * communicator is offloaded too (a communicator of one rank never gets
     * one: shim_comm_new).
     */
    if (sc != NULL && sc->state == SHIM_COMM_LATER && shim.lazy == 0) {
        shim_comm_make_group(sc, comm);
    }
}

shim_why_t shim_comm_why(const shim_comm_t *sc, agg_coll_type_t coll)
{
    if (sc == NULL) {
        return shim.ctx != NULL ? SHIM_WHY_LAZY : shim.off_why;
    }
    if (sc->state != SHIM_COMM_READY) {
        return sc->why;
    }
    if (coll == AGG_COLL_BARRIER && shim.level < 4) {
        return SHIM_WHY_LEVEL;
    }
    if (sc->hier && coll != AGG_COLL_ALLREDUCE && coll != AGG_COLL_BCAST &&
        coll != AGG_COLL_BARRIER) {
        return SHIM_WHY_LEADERS;
    }
    return SHIM_WHY_NONE;
}

const size_t *shim_blocks(shim_comm_t *sc, const int *counts, size_t unit)
{
    int i;

    for (i = 0; i < sc->size; ++i) {
        sc->blocks[i] = (size_t)counts[i] * unit;
    }
    return sc->blocks;
}

void *shim_scratch(shim_comm_t *sc, size_t bytes)
{
    if (sc->scratch_size < bytes) {
        void *p = realloc(sc->scratch, bytes);

        if (p == NULL) {
            return NULL;
        }
        sc->scratch      = p;
        sc->scratch_size = bytes;
    }
    return sc->scratch;
}

static void shim_comm_forget(shim_comm_t *sc)
{
    shim_comm_t **pp;

    pthread_mutex_lock(&shim_comms_lock);
    for (pp = &shim.comms; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == sc) {
            *pp = sc->next;
            break;
        }
    }
    pthread_mutex_unlock(&shim_comms_lock);
}

/* The shim's state of a communicator going away (collective, like its group). */
static void shim_comm_release(MPI_Comm *comm)
{
    shim_comm_t *sc = comm != NULL ? shim_comm_peek(*comm) : NULL;

    if (sc != NULL) {
        shim_requests_finish(sc);
        if (sc->agg != NULL) {
            agg_comm_destroy(sc->agg);
        }
        shim_hier_free(sc);
        if (sc->pcomm != MPI_COMM_NULL) {
            PMPI_Comm_free(&sc->pcomm);
        }
        PMPI_Comm_delete_attr(*comm, shim.keyval);
        shim_comm_forget(sc);
        free(sc->scratch);
        free(sc->blocks);
        free(sc);
    }
}

SHIM_API int MPI_Comm_free(MPI_Comm *comm)
{
    shim_comm_release(comm);
    return PMPI_Comm_free(comm);
}

SHIM_API int MPI_Comm_disconnect(MPI_Comm *comm)
{
    shim_comm_release(comm);
    return PMPI_Comm_disconnect(comm);
}

SHIM_API int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup(comm, newcomm);

    if (rc == MPI_SUCCESS) {
        /* MPI copies attributes with the copy function of the keyval: ours
           copies nothing, so the new communicator gets its own state */
        shim_comm_created(*newcomm);
    }
    return rc;
}

SHIM_API int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_split(comm, color, key, newcomm);

    if (rc == MPI_SUCCESS) {
        shim_comm_created(*newcomm);
    }
    return rc;
}

SHIM_API int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_create(comm, group, newcomm);

    if (rc == MPI_SUCCESS) {
        shim_comm_created(*newcomm);
    }
    return rc;
}
