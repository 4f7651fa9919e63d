/*
 * A send queue per socket, so that no thread of a daemon waits for room on
 * a peer's socket. A message (a header of at most AGG_TXQ_HDR_MAX bytes
 * and its data) goes straight out when nothing waits before it and the
 * socket takes it; what the socket does not take waits in the queue, in
 * order, and the event loop writes it when poll() says there is room
 * (agg_txq_poll; the queue's `pending` flag is the loop's want_out). A
 * socket whose queue moves nothing for the owner's stall limit is cut off.
 *
 * A message's data stay where the sender has them (a switchsim slot's
 * accumulator stays put until its result went, agg_seq_slots) unless the
 * sender says AGG_TXQ_COPY: then what waits of them is copied. An entry
 * flagged AGG_TXQ_PREP is handed to the queue's prep() just before its
 * first byte goes, with the one scratch buffer of the queue (switchsim
 * narrows accumulators to the wire type there). Nothing is allocated per
 * message on the path that sends straight out.
 *
 * The queue is not locked: its owner holds whatever lock it needs around
 * every call (aggmgr's single thread needs none).
 */
#ifndef AGG_TXQ_H
#define AGG_TXQ_H

#include <stddef.h>
#include <stdint.h>

#include "agg/status.h"

struct agg_loop;

#define AGG_TXQ_HDR_MAX 72

/* agg_txq_send flags */
#define AGG_TXQ_COPY 0x1u /* the data are the caller's only for the call */
#define AGG_TXQ_PREP 0x2u /* prep() the entry before it goes */

typedef struct agg_txe {
    uint8_t     hdr[AGG_TXQ_HDR_MAX];
    uint32_t    hdr_len;
    uint32_t    flags;
    const void *data;
    size_t      len;
    void       *owned; /* a copy of the data, freed once sent */
} agg_txe_t;

typedef struct agg_txq agg_txq_t;

/*
 * Makes e ready to go: may point e->data at q->scratch (q->scratch_cap
 * bytes) and fill it; e->len, the bytes that go, stays as sent.
 */
typedef void (*agg_txq_prep_fn)(agg_txq_t *q, agg_txe_t *e);

struct agg_txq {
    agg_txe_t       *e;
    uint32_t         cap;       /* a power of two */
    uint32_t         max;       /* entries at most (the cap doubles up to it) */
    uint64_t         head, tail;
    size_t           off;       /* bytes of the tail entry already sent */
    size_t           bytes;     /* bytes waiting */
    size_t           max_bytes; /* at most this many wait (0: no limit) */
    int64_t          moved_ms;  /* when the socket last took something, while pending */
    int              pending;   /* something waits for room (atomic: the loop's want_out) */
    agg_txq_prep_fn  prep;
    uint8_t         *scratch;
    size_t           scratch_cap;
    struct agg_loop *loop;      /* woken when a message starts waiting */
};

/*
 * A queue of first..max entries (first and max powers of two) and at most
 * max_bytes waiting (0: no limit), with scratch_cap bytes of scratch for
 * prep (may be 0, prep NULL). The loop, when not NULL, is woken when a
 * message starts waiting.
 */
agg_status_t agg_txq_init(agg_txq_t *q, uint32_t first, uint32_t max, size_t max_bytes,
                          struct agg_loop *loop, agg_txq_prep_fn prep, size_t scratch_cap);

/* Frees what the queue holds; it is all zeros after. */
void agg_txq_free(agg_txq_t *q);

/* Drops what waits (the socket is gone). */
void agg_txq_drop(agg_txq_t *q);

/*
 * Sends hdr and data on fd through the queue. AGG_OK: sent, or waiting;
 * AGG_ERR_IO: the socket is broken (errno says why); AGG_ERR_NO_RESOURCE:
 * the queue is full (the peer reads too little); AGG_ERR_NO_MEMORY.
 */
agg_status_t agg_txq_send(agg_txq_t *q, int fd, const void *hdr, size_t hdr_len,
                          const void *data, size_t len, unsigned flags);

/*
 * Writes what waits as far as the socket takes it: 1 the queue is empty, 0
 * the socket is full, -1 it is broken (errno).
 */
int agg_txq_flush(agg_txq_t *q, int fd);

/*
 * The loop's part: writes what waits once poll() said there is room
 * (revents), or says the socket must go when it took nothing for stall_ms.
 * 0, or -1 with *why saying why.
 */
int agg_txq_poll(agg_txq_t *q, int fd, short revents, int stall_ms, const char **why);

static inline int agg_txq_pending(const agg_txq_t *q)
{
    return __atomic_load_n(&q->pending, __ATOMIC_ACQUIRE);
}

#endif
