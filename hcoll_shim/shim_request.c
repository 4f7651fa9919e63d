/*
 * Non-blocking collectives in the network, seen by the program as ordinary
 * MPI requests: each is a generalized request (MPI_Grequest_start) that the
 * shim completes when libagg's request completes. Under Open MPI,
 * shim_progress is one of its progress callbacks, so any MPI call that
 * waits (MPI_Recv as much as MPI_Wait) moves the requests on, as a network
 * that needs no host would. While any is in flight the wait and test calls
 * (MPI_Wait, MPI_Test, their -all, -any and -some forms, and
 * MPI_Request_get_status) also poll libagg's requests, then MPI's own: in an
 * MPI without such a hook that is what moves them, and only a request the
 * program waits for or tests may time out (AGG_COLL_TIMEOUT_MS).
 *
 * A request that fails in the network (a timeout, the group torn down) is
 * redone on the host at HCOLL_ENABLE_SHARP 1 and 2 where its input is
 * intact (host memory; an in-place reduction's input was moved aside when
 * it started): Open MPI's own non-blocking
 * collective with the program's arguments, posted by every member in the
 * communicator's order (each once every earlier call of its communicator
 * has left the network) and never from inside MPI's progress (the wait and
 * test calls, and every collective's entry, post it). Elsewhere it
 * completes with MPI_ERR_INTERN through the communicator's error handler:
 * its buffers may already be partly written.
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "shim.h"

/*
 * shim.active belongs to one thread at a time. A thread that has it and is
 * called back into the shim (MPI's progress, inside a wait of ours) must
 * keep out of the list it is walking; a progress callback never waits for
 * another thread's walk (that thread moves the requests on meanwhile).
 */
static pthread_mutex_t shim_req_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int    shim_req_owner;

/* 1: taken now (give it back); 0: this thread had it already; -1: busy (try only). */
static int shim_req_take(int wait)
{
    if (shim_req_owner) {
        return 0;
    }
    if (wait) {
        pthread_mutex_lock(&shim_req_lock);
    } else if (pthread_mutex_trylock(&shim_req_lock) != 0) {
        return -1;
    }
    shim_req_owner = 1;
    return 1;
}

static void shim_req_give(int taken)
{
    if (taken == 1) {
        shim_req_owner = 0;
        pthread_mutex_unlock(&shim_req_lock);
    }
}

/*
 * The thread that completed a request (anyone's progress) wrote its result
 * into the program's buffers; the thread in MPI_Wait reads them once MPI
 * says it is complete. MPI orders the two, but inside itself: this flag
 * says it where the tools can see it too.
 */
static void shim_ireq_seen(shim_req_t *sr)
{
    /* MPI calls us once it is complete: the flag is set, or about to be */
    for (int i = 0; i < 100000 && !__atomic_load_n(&sr->completed, __ATOMIC_ACQUIRE); ++i) {
        sched_yield();
    }
}

static int shim_ireq_query(void *extra, MPI_Status *status)
{
    shim_req_t *sr = extra;

    shim_ireq_seen(sr);
    MPI_Status_set_elements(status, MPI_BYTE, 0);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG    = MPI_UNDEFINED;
    status->MPI_ERROR  = sr->error;
    return sr->error;
}

static int shim_ireq_free(void *extra)
{
    shim_req_t *sr = extra;

    shim_ireq_seen(sr);
    agg_request_free(sr->agg);
    free(sr->call);
    free(sr);
    return MPI_SUCCESS;
}

static int shim_ireq_cancel(void *extra, int complete)
{
    return MPI_SUCCESS; /* a collective cannot be cancelled; it completes */
}

/* Why a call went to the LLT where SAT was wanted, as AGG_STATS counts it. */
static shim_why_t shim_why_llt(const agg_request_info_t *info)
{
    return info->why_llt == AGG_OK                    ? SHIM_WHY_NONE
           : info->why_llt == AGG_ERR_SAT_LOCK_BUSY   ? SHIM_WHY_LOCK
           : info->why_llt == AGG_ERR_NO_RESOURCE     ? SHIM_WHY_SAT_FLOWS
                                                      : SHIM_WHY_NO_SAT;
}

agg_status_t shim_net_wait(shim_fn_t fn, agg_request_t *req)
{
    agg_request_info_t info;

    return shim_net_wait_info(fn, req, &info);
}

agg_status_t shim_net_wait_info(shim_fn_t fn, agg_request_t *req, agg_request_info_t *out)
{
    agg_request_info_t info;
    agg_status_t st = agg_request_wait(req);

    agg_request_info(req, &info);
    *out = info;
    agg_request_free(req);
    if (st == AGG_OK && fn < SHIM_FN__COUNT) {
        shim_count(fn, info.tree == AGG_AGGR_SAT ? SHIM_PATH_SAT : SHIM_PATH_LLT,
                   shim_why_llt(&info));
    }
    return st;
}

/* A packed bcast's data into the program's buffer, once it is there. */
static void shim_ipack_finish(shim_ipack_t *pack, agg_status_t st)
{
    int pos = 0;

    if (pack->ubuf != NULL && st == AGG_OK) {
        PMPI_Unpack(pack->buf, pack->bytes, &pos, pack->ubuf, pack->ucount, pack->utype,
                    pack->ucomm);
    }
    if (pack->ubuf != NULL) {
        PMPI_Type_free(&pack->utype);
        pack->ubuf = NULL;
    }
    free(pack->buf);
    pack->buf = NULL;
}

void shim_ireq_start(const shim_call_t *c, agg_request_t *req, const shim_ipack_t *pack)
{
    shim_req_t *sr = calloc(1, sizeof(*sr));
    shim_comm_t *sc = c->sc;
    shim_fn_t fn = c->fn;
    MPI_Request *request = c->request;
    shim_ipack_t none = {0};
    agg_request_info_t info;
    int taken;

    if (sr != NULL && (sr->call = malloc(sizeof(*c))) == NULL) {
        free(sr);
        sr = NULL;
    }
    if (sr == NULL || PMPI_Grequest_start(shim_ireq_query, shim_ireq_free, shim_ireq_cancel,
                                          sr, &sr->greq) != MPI_SUCCESS) {
        /*
         * The others have the same call in the network: see it through
         * here (no other path may take it), then hand back a request that
         * is complete. Its error, if any, is logged.
         */
        agg_status_t st = agg_request_wait(req);

        agg_request_free(req);
        shim_ipack_finish(pack != NULL ? (shim_ipack_t *)pack : &none, st);
        if (sr != NULL) {
            free(sr->call);
        }
        free(sr);
        if (st != AGG_OK) {
            agg_error("%s failed in the network (%s)", shim_fn_name(fn),
                      agg_strerror(st));
        }
        PMPI_Ibarrier(MPI_COMM_SELF, request);
        return;
    }
    if (pack != NULL) {
        sr->pack = *pack;
    }
    agg_request_info(req, &info);
    sr->path = info.tree == AGG_AGGR_SAT ? SHIM_PATH_SAT : SHIM_PATH_LLT;
    shim_count(fn, (shim_path_t)sr->path, shim_why_llt(&info));
    __atomic_fetch_add(&shim.offloaded_nb, 1, __ATOMIC_RELAXED);
    *sr->call         = *c;
    sr->call->request = &sr->hreq;
    sr->agg   = req;
    sr->fn    = fn;
    sr->sc    = sc;
    sr->state = SHIM_REQ_NET;
    sr->seq   = __atomic_fetch_add(&sc->nb_seq, 1, __ATOMIC_RELAXED);
    *request  = sr->greq;
    taken    = shim_req_take(1);
    sr->next = shim.active;
    __atomic_store_n(&shim.active, sr, __ATOMIC_RELEASE);
    shim_req_give(taken);
}

/*
 * A request whose libagg side finished: let that go now (the communicator
 * may be freed before MPI frees the request) and complete its MPI side. A
 * failure reaches the program through the request's status (query_fn), and
 * MPI_Wait then raises the error handler outside MPI's progress engine. The
 * communicator stays offloaded: every member sees a failure in the tree, and
 * none must take another path than the others on its own.
 */
static void shim_ireq_done(shim_req_t *sr, agg_status_t st)
{
    MPI_Request greq = sr->greq; /* sr may be freed once completed is set */

    agg_request_free(sr->agg);
    sr->agg = NULL;
    shim_ipack_finish(&sr->pack, st);
    if (st != AGG_OK) {
        if (shim_forced(sr->call->coll)) {
            agg_error("%s failed in the network (%s): HCOLL_ENABLE_SHARP=%d forces it there, "
                      "so it fails with MPI_ERR_INTERN", shim_fn_name(sr->fn),
                      agg_strerror(st), shim.level);
        } else {
            agg_error("%s failed in the network (%s), and its buffers are device memory, "
                      "which the host path does not redo: it fails with MPI_ERR_INTERN",
                      shim_fn_name(sr->fn), agg_strerror(st));
        }
        sr->error = MPI_ERR_INTERN;
    }
    /* after this, nothing of sr: a thread in MPI_Wait may free it as soon as
       MPI sees the request complete (the release pairs with shim_ireq_seen) */
    __atomic_store_n(&sr->completed, 1, __ATOMIC_RELEASE);
    /* last: if the program freed the request already, this frees sr */
    PMPI_Grequest_complete(greq);
}

/*
 * Whether the host can redo sr, which the network failed with st: the level
 * lets it (1, 2), its buffers are host memory, and its input is intact. The
 * answer is the same on every member (an in-place reduction's input was
 * moved aside at the start, at the root of a reduce too), or members would
 * wait for each other's host calls forever.
 */
static int shim_ireq_redoable(const shim_req_t *sr, agg_status_t st)
{
    const shim_call_t *c = sr->call;

    if (st == AGG_OK || shim_forced(c->coll) || c->smem != AGG_MEM_HOST ||
        c->rmem != AGG_MEM_HOST) {
        return 0;
    }
    /* in place: the blocks gathered are the same bytes whoever wrote them; a
       reduction's input was moved aside (shim_ireduce_aside) */
    return c->sbuf != MPI_IN_PLACE || c->coll == AGG_COLL_ALLGATHER || sr->pack.buf != NULL;
}

/*
 * The network failed sr and the host redoes it: it stays in the list, to
 * be posted by shim_requests_redo (never here: this may run inside MPI's
 * progress). What the network wrote of its results is overwritten.
 */
static void shim_ireq_to_host(shim_req_t *sr, agg_status_t st)
{
    shim_comm_t *sc = sr->sc;

    agg_request_free(sr->agg);
    sr->agg = NULL;
    /* counted on the host now, for the network's failure */
    __atomic_fetch_sub(&shim.calls[sr->fn][sr->path], 1, __ATOMIC_RELAXED);
    shim_count(sr->fn, SHIM_PATH_MPI, SHIM_WHY_NETWORK_ERROR);
    if (st == AGG_ERR_SHUTDOWN) {
        __atomic_store_n(&sc->nb_host, 1, __ATOMIC_RELAXED); /* the group is gone for good */
    }
    if (__atomic_fetch_add(&sc->net_failures, 1, __ATOMIC_RELAXED) == 0 && sc->rank == 0) {
        agg_warn("%s failed in the network (%s): redone on the host (the next failures on "
                 "this communicator of %d ranks are counted in AGG_STATS, network_error, "
                 "not logged)", shim_fn_name(sr->fn), agg_strerror(st), sc->size);
    }
    __atomic_fetch_add(&shim.redoing, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&sr->state, SHIM_REQ_REDO, __ATOMIC_RELEASE);
}

/* Whether sr's MPI request is one of reqs[0 .. n). */
static int shim_ireq_in(const shim_req_t *sr, const MPI_Request *reqs, int n)
{
    for (int i = 0; i < n; ++i) {
        if (reqs[i] == sr->greq) {
            return 1;
        }
    }
    return 0;
}

/*
 * Moves the requests on. Those of reqs[0 .. n), and every one of `drain`'s
 * communicator (all, for SHIM_DRAIN_ALL), are waited for: they may time out.
 */
#define SHIM_DRAIN_ALL ((const shim_comm_t *)1)

static int shim_progress_some(const MPI_Request *reqs, int n, const shim_comm_t *drain)
{
    shim_req_t **pp = &shim.active, *sr;
    agg_status_t st;
    int completed = 0, taken;

    if (shim_req_owner || __atomic_load_n(&shim.active, __ATOMIC_ACQUIRE) == NULL) {
        return 0; /* called back from inside itself, through MPI's progress */
    }
    taken = shim_req_take(0);
    if (taken < 0) {
        return 0; /* another thread is moving them on */
    }
    while ((sr = *pp) != NULL) {
        if (sr->state != SHIM_REQ_NET) {
            pp = &sr->next; /* the host's now: shim_requests_redo moves it */
            continue;
        }
        /* only a request somebody waits for (or one whose communicator waits for
           it, shim_requests_drain) may time out */
        st = shim_ireq_in(sr, reqs, n) || drain == SHIM_DRAIN_ALL || sr->sc == drain ?
             agg_request_test(sr->agg) : agg_request_poll(sr->agg);
        if (st == AGG_INPROGRESS) {
            pp = &sr->next;
            continue;
        }
        completed++;
        if (shim_ireq_redoable(sr, st)) {
            shim_ireq_to_host(sr, st);
            pp = &sr->next;
            continue;
        }
        __atomic_store_n(pp, sr->next, __ATOMIC_RELEASE); /* others peek at shim.active */
        shim_ireq_done(sr, st);
    }
    shim_req_give(taken);
    return completed;
}

int shim_progress_for(const MPI_Request *reqs, int n)
{
    return shim_progress_some(reqs, n, NULL);
}

int shim_progress(void)
{
    return shim_progress_some(NULL, 0, NULL);
}

/* Is an earlier call of sr's communicator still in the network, or still to be posted? */
static int shim_ireq_blocked(const shim_req_t *sr)
{
    const shim_req_t *o;

    for (o = shim.active; o != NULL; o = o->next) {
        if (o != sr && o->sc == sr->sc && o->seq < sr->seq && o->state != SHIM_REQ_HOSTED) {
            return 1;
        }
    }
    return 0;
}

/* The host finished sr (or would not take it): its MPI request completes. */
static void shim_ireq_hosted_done(shim_req_t *sr, int rc)
{
    MPI_Request greq = sr->greq;

    __atomic_fetch_sub(&shim.redoing, 1, __ATOMIC_RELAXED);
    shim_ipack_finish(&sr->pack, AGG_ERR_IO); /* frees, unpacks nothing: the host wrote it */
    if (sr->lost) {
        sr->error = MPI_ERR_OTHER; /* said at the agreement */
    } else if (rc != MPI_SUCCESS) {
        agg_error("%s, redone on the host, failed there (MPI error %d)", shim_fn_name(sr->fn),
                  rc);
        sr->error = MPI_ERR_INTERN;
    }
    __atomic_store_n(&sr->completed, 1, __ATOMIC_RELEASE);
    PMPI_Grequest_complete(greq);
}

/* Posts sr on the host with the program's arguments (its input moved aside, if it was). */
static int shim_ireq_post_host(shim_req_t *sr)
{
    shim_call_t c = *sr->call;

    if (c.coll != AGG_COLL_ALLGATHER && c.sbuf == MPI_IN_PLACE) {
        c.sbuf = sr->pack.buf; /* rbuf, as it was, before the network wrote into it */
    }
    c.request = &sr->hreq;
    return shim_call_pmpi(&c);
}

/*
 * Over TCP each member gets its results in messages of its own, so a
 * switchsim killed while it sends a call's results leaves some members with
 * that call done and the next failed, the others with that call failed:
 * redone on the host as they stand, different calls would meet there. So
 * before the first of a failure's calls is redone, the members tell each
 * other the first call that failed on them (an MPI_Iallreduce, on the
 * failure path only). All the same: every call from it on is redone alike.
 * Not: every failed call completes with MPI_ERR_OTHER and the communicator
 * is broken, as for blocking calls (shim_comm_agree).
 * 1 once sr's communicator has agreed; 0 while the agreement is under way.
 */
static int shim_ireq_agreed(shim_req_t *sr)
{
    shim_comm_t *sc = sr->sc;
    int flag = 0;

    if (sc->nb_agree == 2) {
        return 1;
    }
    if (sc->nb_agree == 0) {
        sc->nb_agree_v[0] = (long)sr->seq; /* the first failed: every earlier one is done */
        sc->nb_agree_v[1] = -(long)sr->seq;
        if (PMPI_Iallreduce(sc->nb_agree_v, sc->nb_agree_all, 2, MPI_LONG, MPI_MIN, sc->pcomm,
                            &sc->nb_agree_req) != MPI_SUCCESS) {
            sc->nb_redo_from = 0; /* as before the agreement was made */
            sc->nb_agree     = 2;
            return 1;
        }
        sc->nb_agree = 1;
    }
    if (PMPI_Test(&sc->nb_agree_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        flag = 1;
        sc->nb_agree_all[0] = sc->nb_agree_all[1] = 0;
    }
    if (!flag) {
        return 0;
    }
    sc->nb_agree     = 2;
    sc->nb_redo_from = 0;
    if (sc->nb_agree_all[0] != -sc->nb_agree_all[1]) {
        sc->nb_redo_from = ULONG_MAX; /* none can be redone */
        shim_comm_break(sc, "non-blocking calls", sc->nb_agree_all[0], -sc->nb_agree_all[1]);
    }
    return 1;
}

int shim_requests_redo(void)
{
    shim_req_t **pp, *sr;
    int moved = 0, taken, flag, rc, again = 1;
    MPI_Status status;

    if (shim_req_owner || __atomic_load_n(&shim.redoing, __ATOMIC_ACQUIRE) == 0) {
        return 0; /* nothing of the host's: the common case, a load and no lock */
    }
    taken = shim_req_take(0);
    if (taken < 0) {
        return 0;
    }
    /* posts in each communicator's order: a post may let a later one go */
    while (again) {
        again = 0;
        for (sr = shim.active; sr != NULL; sr = sr->next) {
            if (sr->state != SHIM_REQ_REDO || shim_ireq_blocked(sr) || !shim_ireq_agreed(sr)) {
                continue;
            }
            if (sr->seq < sr->sc->nb_redo_from) {
                sr->lost = 1; /* done on other members: its result is not here */
                sr->hreq = MPI_REQUEST_NULL;
                __atomic_store_n(&sr->state, SHIM_REQ_HOSTED, __ATOMIC_RELEASE);
                moved++;
                again = 1;
                continue;
            }
            rc = shim_ireq_post_host(sr);
            moved++;
            again = 1;
            if (rc != MPI_SUCCESS) {
                sr->hreq = MPI_REQUEST_NULL;
                sr->error = MPI_ERR_INTERN;
            }
            __atomic_store_n(&sr->state, SHIM_REQ_HOSTED, __ATOMIC_RELEASE);
        }
    }
    for (pp = &shim.active; (sr = *pp) != NULL;) {
        if (sr->state != SHIM_REQ_HOSTED) {
            pp = &sr->next;
            continue;
        }
        flag = 1;
        rc   = sr->hreq == MPI_REQUEST_NULL ? MPI_ERR_INTERN :
               PMPI_Test(&sr->hreq, &flag, &status);
        if (!flag) {
            pp = &sr->next;
            continue;
        }
        __atomic_store_n(pp, sr->next, __ATOMIC_RELEASE);
        shim_ireq_hosted_done(sr, rc);
        moved++;
    }
    shim_req_give(taken);
    return moved;
}

/* Until no call of sc (of any, for SHIM_DRAIN_ALL) is in the network or still to be posted. */
static void shim_drain(const shim_comm_t *sc)
{
    const shim_req_t *sr;
    int left = !shim_req_owner; /* called back from inside the list's walk: nothing to do */

    while (left) {
        int moved = shim_progress_some(NULL, 0, sc) + shim_requests_redo();
        int taken = shim_req_take(1); /* the list is walked: nothing leaves it meanwhile */

        left = 0;
        for (sr = shim.active; sr != NULL; sr = sr->next) {
            left |= (sc == SHIM_DRAIN_ALL || sr->sc == sc) && sr->state != SHIM_REQ_HOSTED;
        }
        shim_req_give(taken);
        if (left && !moved) {
            sched_yield();
        }
    }
}

void shim_requests_drain(shim_comm_t *sc)
{
    if (__atomic_load_n(&shim.active, __ATOMIC_ACQUIRE) != NULL) {
        shim_drain(sc);
    }
}

void shim_requests_finish(shim_comm_t *sc)
{
    shim_req_t *sr;
    int taken;

    shim_requests_drain(sc);
    /* what the host still runs of sc outlives it: MPI keeps the communicator
       until then, and nothing of the shim's state of it is read again */
    taken = shim_req_take(1);
    for (sr = shim.active; sr != NULL; sr = sr->next) {
        if (sr->sc == sc) {
            sr->sc = NULL;
        }
    }
    shim_req_give(taken);
}

void shim_requests_abandon(void)
{
    shim_req_t *sr;
    MPI_Status status;
    int taken, rc;

    if (__atomic_load_n(&shim.active, __ATOMIC_ACQUIRE) == NULL) {
        return;
    }
    shim_drain(SHIM_DRAIN_ALL);
    taken = shim_req_take(1);
    while ((sr = shim.active) != NULL) {
        __atomic_store_n(&shim.active, sr->next, __ATOMIC_RELEASE);
        rc = sr->hreq == MPI_REQUEST_NULL ? MPI_ERR_INTERN : PMPI_Wait(&sr->hreq, &status);
        shim_ireq_hosted_done(sr, rc);
    }
    shim_req_give(taken);
}

/* ---- the wait and test calls ------------------------------------------- */

/*
 * Whether MPI's own wait and test calls suffice: nothing of ours is in
 * flight. Otherwise they poll ours too (even where Open MPI's progress
 * engine runs shim_progress): a request of ours that the program waits for
 * may time out, one it does not wait for yet may not.
 */
static inline int shim_mpi_drives(void)
{
    return __atomic_load_n(&shim.active, __ATOMIC_ACQUIRE) == NULL;
}

/* Polls until done() says so; libagg's requests and MPI's move on together. */
#define SHIM_WAIT_LOOP(_reqs, _n, _test_call)                                      \
    do {                                                                           \
        int _flag = 0, _rc;                                                        \
        for (;;) {                                                                 \
            int _moved = shim_progress_for((_reqs), (_n)) + shim_requests_redo();  \
            _rc = (_test_call);                                                    \
            if (_rc != MPI_SUCCESS || _flag) {                                     \
                return _rc;                                                        \
            }                                                                      \
            if (!_moved) {                                                         \
                sched_yield();                                                     \
            }                                                                      \
        }                                                                          \
    } while (0)

SHIM_API int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    if (shim_mpi_drives()) {
        return PMPI_Wait(request, status);
    }
    SHIM_WAIT_LOOP(request, 1, PMPI_Test(request, &_flag, status));
}

SHIM_API int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    if (!shim_mpi_drives()) {
        shim_progress_for(request, 1);
        shim_requests_redo();
    }
    return PMPI_Test(request, flag, status);
}

SHIM_API int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    if (shim_mpi_drives()) {
        return PMPI_Waitall(count, requests, statuses);
    }
    SHIM_WAIT_LOOP(requests, count, PMPI_Testall(count, requests, &_flag, statuses));
}

SHIM_API int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    if (!shim_mpi_drives()) {
        shim_progress_for(requests, count);
        shim_requests_redo();
    }
    return PMPI_Testall(count, requests, flag, statuses);
}

SHIM_API int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    if (shim_mpi_drives()) {
        return PMPI_Waitany(count, requests, index, status);
    }
    /* no active request among them: Testany says flag 1, index MPI_UNDEFINED */
    SHIM_WAIT_LOOP(requests, count, PMPI_Testany(count, requests, index, &_flag, status));
}

SHIM_API int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                         MPI_Status *status)
{
    if (!shim_mpi_drives()) {
        shim_progress_for(requests, count);
        shim_requests_redo();
    }
    return PMPI_Testany(count, requests, index, flag, status);
}

SHIM_API int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                          MPI_Status statuses[])
{
    if (shim_mpi_drives()) {
        return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    }
    /* done once something completed, or nothing was active (MPI_UNDEFINED) */
    SHIM_WAIT_LOOP(requests, incount,
                   (_rc = PMPI_Testsome(incount, requests, outcount, indices, statuses),
                    _flag = *outcount != 0, _rc));
}

SHIM_API int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                          MPI_Status statuses[])
{
    if (!shim_mpi_drives()) {
        shim_progress_for(requests, incount);
        shim_requests_redo();
    }
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

SHIM_API int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    if (!shim_mpi_drives()) {
        shim_progress_for(&request, 1);
        shim_requests_redo();
    }
    return PMPI_Request_get_status(request, flag, status);
}
