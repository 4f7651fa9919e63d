/* Send queues that never wait on a peer (agg/txq.h). */
#include "agg/txq.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "agg/loop.h"
#include "agg/sock.h"
#include "agg/tls.h"

#define AGG_TXQ_IOV 16 /* entries written by one sendmsg */

agg_status_t agg_txq_init(agg_txq_t *q, uint32_t first, uint32_t max, size_t max_bytes,
                          struct agg_loop *loop, agg_txq_prep_fn prep, size_t scratch_cap)
{
    agg_txq_free(q);
    q->cap         = first;
    q->max         = max;
    q->max_bytes   = max_bytes;
    q->loop        = loop;
    q->prep        = prep;
    q->scratch_cap = scratch_cap;
    q->e           = calloc(first, sizeof(*q->e));
    q->scratch     = scratch_cap > 0 ? malloc(scratch_cap) : NULL;
    if (q->e == NULL || (scratch_cap > 0 && q->scratch == NULL)) {
        agg_txq_free(q);
        return AGG_ERR_NO_MEMORY;
    }
    return AGG_OK;
}

void agg_txq_drop(agg_txq_t *q)
{
    for (; q->tail != q->head; ++q->tail) {
        agg_txe_t *e = &q->e[q->tail & (q->cap - 1)];

        free(e->owned);
        e->owned = NULL;
    }
    q->head = q->tail = 0;
    q->off   = 0;
    q->bytes = 0;
    __atomic_store_n(&q->pending, 0, __ATOMIC_RELEASE);
}

void agg_txq_free(agg_txq_t *q)
{
    if (q->e != NULL) {
        agg_txq_drop(q);
    }
    free(q->e);
    free(q->scratch);
    memset(q, 0, sizeof(*q));
}

int agg_txq_flush(agg_txq_t *q, int fd)
{
    while (q->tail != q->head) {
        struct iovec iov[2 * AGG_TXQ_IOV];
        struct msghdr mh = {.msg_iov = iov};
        size_t skip = q->off, left;
        uint64_t i;
        ssize_t rc;

        for (i = q->tail; i != q->head && mh.msg_iovlen + 2 <= 2 * AGG_TXQ_IOV; ++i) {
            agg_txe_t *e = &q->e[i & (q->cap - 1)];

            if (e->flags & AGG_TXQ_PREP) {
                if (i != q->tail) {
                    break; /* the one scratch buffer is the tail's */
                }
                q->prep(q, e);
                e->flags &= ~AGG_TXQ_PREP;
            }
            iov[mh.msg_iovlen++] = (struct iovec){e->hdr, e->hdr_len};
            if (e->len > 0) {
                iov[mh.msg_iovlen++] = (struct iovec){(void *)e->data, e->len};
            }
        }
        /* the tail's bytes already out */
        for (i = 0; skip > 0; ++i) {
            size_t take = skip < iov[i].iov_len ? skip : iov[i].iov_len;

            iov[i].iov_base = (uint8_t *)iov[i].iov_base + take;
            iov[i].iov_len -= take;
            skip -= take;
        }
        rc = agg_tls_on(fd) ? agg_tls_sendv(fd, iov, (int)mh.msg_iovlen) :
                              sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        q->moved_ms = agg_time_ms();
        /* retire the entries now wholly out */
        left = q->off + (size_t)rc;
        while (q->tail != q->head) {
            agg_txe_t *e = &q->e[q->tail & (q->cap - 1)];
            size_t whole = e->hdr_len + e->len;

            if (left < whole) {
                break;
            }
            left     -= whole;
            q->bytes -= whole;
            free(e->owned);
            e->owned = NULL;
            q->tail++;
        }
        q->off = left;
    }
    q->head = q->tail = 0;
    q->off  = 0;
    return 1;
}

/* Room for one more entry: the ring doubles (rarely, never per message). */
static int agg__txq_room(agg_txq_t *q)
{
    agg_txe_t *grown;
    uint64_t i;

    if (q->head - q->tail < q->cap) {
        return 0;
    }
    grown = q->cap < q->max ? calloc(2u * q->cap, sizeof(*grown)) : NULL;
    if (grown == NULL) {
        return -1;
    }
    for (i = q->tail; i != q->head; ++i) {
        grown[i - q->tail] = q->e[i & (q->cap - 1)];
    }
    free(q->e);
    q->e     = grown;
    q->head -= q->tail;
    q->tail  = 0;
    q->cap  *= 2;
    return 0;
}

agg_status_t agg_txq_send(agg_txq_t *q, int fd, const void *hdr, size_t hdr_len,
                          const void *data, size_t len, unsigned flags)
{
    agg_txe_t *e;
    int r;

    if (q->e == NULL || hdr_len > AGG_TXQ_HDR_MAX) {
        errno = ENOTCONN;
        return AGG_ERR_IO;
    }
    if ((q->max_bytes > 0 && q->bytes + hdr_len + len > q->max_bytes) || agg__txq_room(q) != 0) {
        return AGG_ERR_NO_RESOURCE;
    }
    e = &q->e[q->head & (q->cap - 1)];
    memcpy(e->hdr, hdr, hdr_len);
    e->hdr_len = (uint32_t)hdr_len;
    e->flags   = flags & AGG_TXQ_PREP;
    e->data    = data;
    e->len     = len;
    e->owned   = NULL;
    q->bytes  += hdr_len + len;
    q->head++;
    if (q->head - q->tail > 1) {
        r = 0; /* behind others: pending already */
    } else {
        r = agg_txq_flush(q, fd);
        if (r == 0) {
            q->moved_ms = agg_time_ms(); /* nothing waited: its clock starts now */
            __atomic_store_n(&q->pending, 1, __ATOMIC_RELEASE);
            if (q->loop != NULL) {
                agg_loop_wake(q->loop);
            }
        }
    }
    if (r == 0 && (flags & AGG_TXQ_COPY) && len > 0) {
        void *copy = malloc(len);

        if (copy == NULL) {
            errno = ENOMEM; /* the data cannot wait: the connection must go */
            return AGG_ERR_IO;
        }
        memcpy(copy, data, len);
        e->data  = copy;
        e->owned = copy;
    }
    return r < 0 ? AGG_ERR_IO : AGG_OK;
}

int agg_txq_poll(agg_txq_t *q, int fd, short revents, int stall_ms, const char **why)
{
    int r = 1;

    if (!agg_txq_pending(q)) {
        return 0;
    }
    if (revents & (POLLOUT | POLLERR | POLLHUP)) {
        r = agg_txq_flush(q, fd);
        if (r < 0) {
            *why = strerror(errno);
            return -1;
        }
    }
    if (r > 0 && q->tail == q->head) {
        __atomic_store_n(&q->pending, 0, __ATOMIC_RELEASE);
    } else if (agg_time_ms() - q->moved_ms > stall_ms) {
        static __thread char text[80];

        snprintf(text, sizeof(text), "it took nothing of what waits for it for %d.%d s",
                 stall_ms / 1000, stall_ms % 1000 / 100);
        *why = text;
        return -1;
    }
    return 0;
}
