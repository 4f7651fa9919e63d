/*
 * Completing requests: test, poll and wait, and the timeout that keeps a
 * wait (or a caller's test loop) from going on for ever when the members
 * stop meeting. A wait moves every communicator of the context on, runs the
 * caller's progress engine now and then (MPI's: a peer's message may be
 * what the others wait for), and sleeps in the transport when nothing can
 * happen.
 */
#include "agg_internal.h"

#include <sched.h>

#include <unistd.h>

#include "agg/log.h"
#include "agg/sock.h"

#define AGG__CALLER_PROGRESS_NS 100000u /* a wait runs the caller's progress this often */
#define AGG__WAIT_GAP_MS 1000 /* timed polls further apart than this are separate waits */

/*
 * Called when a poll of req's communicator moved nothing: after
 * coll_timeout_ms without progress the request fails (AGG_ERR_TIMEOUT), so
 * neither a wait nor a caller's test loop goes on for ever.
 */
static int agg__request_stalled(agg_request_t *req, int64_t now)
{
    agg_comm_t *comm = req->comm;

    /* the clock runs only while somebody waits: a first wait after a long
       time of polls (or of nothing) starts it anew */
    if (req->seen_ms == 0 || now - req->waited_ms > AGG__WAIT_GAP_MS) {
        req->seen_ms = now;
    }
    req->waited_ms = now;
    if (now - req->seen_ms <= comm->ctx->alike.coll_timeout_ms) {
        return 0;
    }
    /* every member times out alike: rank 0 says it once for the communicator */
    if (__atomic_fetch_add(&comm->stalls, 1, __ATOMIC_RELAXED) == 0 && comm->rank == 0) {
        agg_error("%s of %zu x %s (%s) on group %u: no progress for %d ms (fragment %zu of "
                  "%zu); later timeouts of this communicator of %d ranks are not logged",
                  agg_coll_name(req->coll), req->spec.count, agg_dtype_name(req->spec.dtype),
                  agg_op_name(req->spec.op), comm->group_id,
                  comm->ctx->alike.coll_timeout_ms, req->done, req->nfrags, comm->size);
    } else {
        agg_debug("%s on group %u: no progress for %d ms (fragment %zu of %zu)",
                  agg_coll_name(req->coll), comm->group_id, comm->ctx->alike.coll_timeout_ms,
                  req->done, req->nfrags);
    }
    agg__request_abandon(req, AGG_ERR_TIMEOUT);
    return 1;
}

/* test (timed) and poll (not): one step of the request's communicator. */
static agg_status_t agg__request_step(agg_request_t *req, int timed)
{
    if (req->abandoned || req->state == AGG__REQ_INACTIVE) {
        return req->status;
    }
    if (req->state != AGG__REQ_DONE) {
        if (agg__comm_progress(req->comm) > 0) {
            req->seen_ms = 0;
        } else if (timed && agg__request_stalled(req, agg_time_ms())) {
            return AGG_ERR_TIMEOUT;
        }
    }
    return req->state == AGG__REQ_DONE ? req->status : AGG_INPROGRESS;
}

agg_status_t agg_request_test(agg_request_t *req)
{
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    /* a test never waits: while another thread drives the communicator, not yet */
    if (!agg__comm_trylock(req->comm)) {
        return AGG_INPROGRESS;
    }
    st = agg__request_step(req, 1);
    agg__comm_unlock(req->comm);
    return st;
}

agg_status_t agg_request_poll(agg_request_t *req)
{
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    /* a progress engine polls from any thread: never wait for another one here */
    if (!agg__comm_trylock(req->comm)) {
        return AGG_INPROGRESS;
    }
    st = agg__request_step(req, 0);
    agg__comm_unlock(req->comm);
    return st;
}

static unsigned agg__others_progress(agg_comm_t *comm)
{
    agg_context_t *ctx = comm->ctx;
    unsigned steps = 0;
    agg_comm_t *c;

    if (ctx->mt && pthread_mutex_trylock(&ctx->lock) != 0) {
        return 0;
    }
    for (c = ctx->comms; c != NULL; c = c->next) {
        if (c != comm && agg__comm_trylock(c)) {
            if (c->head != NULL) { /* read under its lock: another thread posts there */
                steps += agg__comm_progress(c);
            }
            agg__comm_unlock(c);
        }
    }
    agg__ctx_unlock(ctx);
    return steps;
}

/* The group whose oldest fragment in flight the request is waiting on, if any. */
static agg__group_t *agg__wait_group(agg_request_t *req)
{
    agg_comm_t *comm = req->comm;

    if (req->grp->done_n < req->grp->next_n) {
        return req->grp;
    }
    if (comm->sat.tl != NULL && comm->sat.done_n < comm->sat.next_n) {
        return &comm->sat;
    }
    return comm->llt.done_n < comm->llt.next_n ? &comm->llt : NULL;
}

static agg_status_t agg__request_wait(agg_request_t *req)
{
    agg_comm_t *comm = req->comm;
    agg__group_t *grp;
    uint64_t now_ns, mpi_at_ns = agg_time_ns();

    while (req->state != AGG__REQ_DONE && req->state != AGG__REQ_INACTIVE && !req->abandoned) {
        if (agg__comm_progress(comm) > 0) {
            req->seen_ms = 0;
            continue;
        }
        /* requests on other communicators may be what the others wait for */
        if (agg__others_progress(comm) > 0) {
            continue;
        }
        /* ... or messages of the caller's (a peer's synchronous send); not at
           every poll: MPI's progress may yield the CPU, and costs the
           latency of small allreduces on a machine with no core to spare */
        now_ns = agg_time_ns();
        if (comm->ctx->progress != NULL && now_ns - mpi_at_ns >= AGG__CALLER_PROGRESS_NS) {
            /* not under this communicator's lock: the caller's engine may
               complete and free requests of other communicators, whose
               waiters hold their own lock and call it too (TSan saw the
               lock-order inversion under MPI_THREAD_MULTIPLE) */
            agg__comm_unlock(comm);
            comm->ctx->progress(comm->ctx->progress_arg);
            agg__comm_lock(comm);
            mpi_at_ns = now_ns;
        }
        if (agg__request_stalled(req, (int64_t)(now_ns / 1000000u))) {
            return AGG_ERR_TIMEOUT;
        }
        grp = agg__wait_group(req);
        if (agg__stage_busy(req)) {
            sched_yield(); /* a copy engine, not a peer, is what we wait for */
        } else if (grp != NULL) {
            grp->tl->idle(grp->tl_priv, &agg__ring(grp, grp->done_n + 1)->f);
        } else {
            usleep(20); /* a lock request waits for its retry time */
        }
    }
    return req->status;
}

agg_status_t agg_request_wait(agg_request_t *req)
{
    agg_status_t st;

    if (req == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    agg__comm_lock(req->comm);
    st = agg__request_wait(req);
    agg__comm_unlock(req->comm);
    return st;
}

