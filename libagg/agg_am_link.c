/*
 * The connection to aggmgr, kept across the manager's restarts. Every
 * request goes through agg__am_call: a connection found closed is made
 * again, the job's key shown (JOB_ATTACH) and the request sent once more.
 * World rank 0 owns the job: a thread of its (agg__am_watch_start) looks
 * at the connection twice a second and, when the manager has gone, calls
 * it again until it is back and rank 0 has claimed the job, so that a
 * manager reading its journal back keeps the job (am_restore_grace_ms)
 * however long the job goes without asking anything of it.
 *
 * am_lock guards am_fd and is taken by nothing else: a request holds it
 * while it waits for its answer, the watcher while it calls the manager.
 */
#include "agg_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/sock.h"
#include "agg/tls.h"

#define AGG__AM_WATCH_MS 500

/* Shows the job's key on a fresh connection: rank 0 owns the job again. */
static agg_status_t agg__am_attach(agg_context_t *ctx, int fd)
{
    agg_msg_job_attach_t req = {.job_key = ctx->job_key, .job_id = ctx->job.job_id,
                                .world_rank = (uint32_t)ctx->world_rank};

    agg_wire_swap(&req, AGG_FMT_JOB_ATTACH, 1);
    return agg_msg_call_status(fd, AGG_MSG_JOB_ATTACH, &req, sizeof(req),
                               AGG_MSG_JOB_ATTACH_REPLY, ctx->connect_timeout_ms);
}

/* am_lock held: a new connection, attached to the job when there is one. */
static agg_status_t agg__am_reconnect(agg_context_t *ctx)
{
    agg_status_t st;

    if (ctx->am_fd >= 0) {
        agg_tls_close(ctx->am_fd);
        ctx->am_fd = -1;
    }
    st = agg__am_connect(ctx);
    if (st != AGG_OK || ctx->job.job_id == 0) {
        return st;
    }
    st = agg__am_attach(ctx, ctx->am_fd);
    if (st != AGG_OK) {
        agg_tls_close(ctx->am_fd);
        ctx->am_fd = -1;
    }
    return st;
}

agg_status_t agg__am_call(agg_context_t *ctx, uint16_t type, const void *body, size_t len,
                          uint16_t reply_type, void *reply, size_t cap, size_t *reply_len,
                          int timeout_ms)
{
    agg_status_t st = AGG_OK;

    pthread_mutex_lock(&ctx->am_lock);
    if (ctx->am_fd < 0) {
        st = agg__am_reconnect(ctx);
    }
    if (st == AGG_OK) {
        st = agg_msg_call(ctx->am_fd, type, body, len, reply_type, reply, cap, reply_len,
                          timeout_ms);
        if (st == AGG_ERR_IO) {
            /* the manager went (and may be back): once more on a new connection */
            agg_debug("aggmgr closed the connection; %s again on a new one",
                      agg_msg_type_name(type));
            st = agg__am_reconnect(ctx);
            if (st == AGG_OK) {
                st = agg_msg_call(ctx->am_fd, type, body, len, reply_type, reply, cap,
                                  reply_len, timeout_ms);
            }
        }
    }
    pthread_mutex_unlock(&ctx->am_lock);
    return st;
}

agg_status_t agg__am_call_status(agg_context_t *ctx, uint16_t type, const void *body,
                                 size_t len, uint16_t reply_type, int timeout_ms)
{
    agg_msg_status_t rep;
    size_t rep_len;
    agg_status_t st;

    st = agg__am_call(ctx, type, body, len, reply_type, &rep, sizeof(rep), &rep_len,
                      timeout_ms);
    if (st != AGG_OK) {
        return st;
    }
    agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
    return (agg_status_t)rep.status;
}

/* am_lock held: has the manager closed the connection? */
static int agg__am_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};

    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void *agg__am_watch(void *arg)
{
    agg_context_t *ctx = arg;
    struct timespec ts;
    int lost = 0;

    pthread_mutex_lock(&ctx->am_lock);
    while (!ctx->am_watch_stop) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += AGG__AM_WATCH_MS * 1000000L;
        ts.tv_sec  += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&ctx->am_cond, &ctx->am_lock, &ts);
        if (ctx->am_watch_stop) {
            break;
        }
        if (ctx->am_fd >= 0 && !agg__am_closed(ctx->am_fd)) {
            continue;
        }
        if (!lost) {
            agg_warn("aggmgr closed the connection of job %u; calling it again to claim the "
                     "job (its groups go on meanwhile)", ctx->job.job_id);
            lost = 1;
        }
        switch (agg__am_reconnect(ctx)) {
        case AGG_OK:
            agg_info("job %u: back with aggmgr, the job claimed again", ctx->job.job_id);
            lost = 0;
            break;
        case AGG_ERR_NO_JOB:
            agg_warn("aggmgr no longer holds job %u (it started without its journal, or "
                     "released the job): new communicators stay on the host", ctx->job.job_id);
            ctx->am_watch_stop = 1;
            break;
        default:
            break; /* not back yet */
        }
    }
    pthread_mutex_unlock(&ctx->am_lock);
    return NULL;
}

void agg__am_watch_start(agg_context_t *ctx)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&ctx->am_cond, &attr);
    pthread_condattr_destroy(&attr);
    ctx->am_watch_stop = 0;
    if (pthread_create(&ctx->am_watch, NULL, agg__am_watch, ctx) != 0) {
        agg_warn("no thread to watch the connection to aggmgr: a restarted manager "
                 "releases job %u after its am_restore_grace_ms", ctx->job.job_id);
        pthread_cond_destroy(&ctx->am_cond);
        return;
    }
    ctx->am_watching = 1;
}

void agg__am_watch_stop(agg_context_t *ctx)
{
    if (!ctx->am_watching) {
        return;
    }
    pthread_mutex_lock(&ctx->am_lock);
    ctx->am_watch_stop = 1;
    pthread_cond_signal(&ctx->am_cond);
    pthread_mutex_unlock(&ctx->am_lock);
    pthread_join(ctx->am_watch, NULL);
    pthread_cond_destroy(&ctx->am_cond);
    ctx->am_watching = 0;
}
