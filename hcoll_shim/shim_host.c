/*
 * Host allreduce over PMPI point-to-point: recursive doubling for small
 * messages, Rabenseifner (recursive halving + doubling) for medium ones and
 * a segmented ring for large ones. Blocks of the reduce-scatter phases are
 * reduced by exactly one rank and then copied, and recursive doubling applies
 * every op as (lower rank's data op higher rank's data), so every rank ends
 * with the same bits even for floating point.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "shim_host.h"

/*
 * How a step's block is cut into messages. Vader sends up to 4 KiB (its
 * header included) eagerly; a larger message pays a rendezvous and a CMA
 * system call, several us here. Small calls therefore go in segments just
 * under that limit, all of a block in flight at once (with oversubscribed
 * ranks every wait may cost a trip through the scheduler). Large calls
 * reduce in segments that the reduction finds in cache, DEPTH in flight so
 * the peer copies the next one meanwhile; their copying steps send a block
 * whole, since a single CMA copy is the cheapest move there is.
 */
#define SHIM_HOST_EAGER_BYTES 4032
#define SHIM_HOST_SMALL_MSG   (32u << 10)
#define SHIM_HOST_SEG_BYTES   (256u << 10)
#define SHIM_HOST_DEPTH       2
#define SHIM_HOST_DEPTH_MAX   8

/* Copy-then-reduce of a read-only buffer goes in pieces that fit in L1/L2. */
#define SHIM_HOST_PIECE_BYTES (32u << 10)

/* One call: its buffers, type and place in the communicator. */
typedef struct shim_host_call {
    const char  *own;   /* this rank's contribution: sbuf, or rbuf when in place */
    char        *rbuf;
    int          count;
    MPI_Datatype dtype;
    MPI_Op       op;
    MPI_Comm     comm;
    size_t       ext;   /* extent of dtype: byte offset of one element */
    int          rank;
    int          size;
    int          rseg;  /* elements per message of a reducing step */
    int          cseg;  /* elements per message of a copying step */
    int          depth; /* messages in flight per direction in a step */
    const shim_host_dev_t *dev; /* the data is on a device, rbuf its host mirror; else NULL */
} shim_host_call_t;

/* What a step does with the data it receives. */
typedef enum shim_host_mode {
    SHIM_HOST_COPY,       /* lands in rbuf as it is */
    SHIM_HOST_REDUCE_OWN, /* lands in rbuf, empty so far, then reduced with own */
    SHIM_HOST_REDUCE_ACC, /* lands in scratch, then reduced into what rbuf holds */
    SHIM_HOST_REDUCE_DEV, /* lands in the mirror, then reduced on the device (c->dev) */
} shim_host_mode_t;

/*
 * One step's traffic: scnt elements at soff of sbase to dst, rcnt at roff of
 * rbase from src, in messages of seg elements (both ends of a block must cut
 * it alike: c->rseg where the receiver reduces, c->cseg where it copies).
 * A reducing step reduces into rbuf, whatever rbase is.
 */
typedef struct shim_host_xfer {
    const char *sbase;
    int         soff, scnt, dst;
    char       *rbase;
    int         roff, rcnt, src;
    int         seg;
} shim_host_xfer_t;

/* Grow-only, per thread: a call allocates nothing once the size has been seen. */
static __thread char  *shim_host_buf;
static __thread size_t shim_host_buf_len;

static char *shim_host_scratch(size_t len)
{
    void *p;

    if (len <= shim_host_buf_len) {
        return shim_host_buf;
    }
    /* Round up so a run of slowly growing sizes does not reallocate each time. */
    len = (len + 0xffffu) & ~(size_t)0xffffu;
    if (posix_memalign(&p, 64, len) != 0) {
        return NULL;
    }
    free(shim_host_buf);
    shim_host_buf     = p;
    shim_host_buf_len = len;
    return p;
}

void shim_host_cleanup(void)
{
    free(shim_host_buf);
    shim_host_buf     = NULL;
    shim_host_buf_len = 0;
}

const char *shim_host_alg_name(shim_host_alg_t alg)
{
    static const char *const names[SHIM_ALG__COUNT] = {
        [SHIM_ALG_RECURSIVE_DOUBLING] = "recursive_doubling",
        [SHIM_ALG_RABENSEIFNER]       = "rabenseifner",
        [SHIM_ALG_RING]               = "ring",
    };

    return ((unsigned)alg < SHIM_ALG__COUNT) ? names[alg] : "unknown";
}

/* Offset of block i of n over count elements: the first count % n blocks get one more. */
static int shim_host_off(int count, int n, int i)
{
    int q = count / n, r = count % n;

    return i * q + (i < r ? i : r);
}

/* Blocks [first, first + nb) of n over count elements, as an element range. */
static void shim_host_range(int count, int n, int first, int nb, int *off, int *cnt)
{
    *off = shim_host_off(count, n, first);
    *cnt = shim_host_off(count, n, first + nb) - *off;
}

static char *shim_host_at(const shim_host_call_t *c, const char *base, int off)
{
    return (char *)base + (size_t)off * c->ext;
}

/* Message sizes of a call, the same on every rank: they depend on nothing but the call. */
static void shim_host_segs(shim_host_call_t *c)
{
    size_t seg;

    if ((size_t)c->count * c->ext <= SHIM_HOST_SMALL_MSG) {
        seg      = SHIM_HOST_EAGER_BYTES / c->ext;
        c->rseg  = seg > 0 ? (int)seg : 1;
        c->cseg  = c->rseg;
        c->depth = SHIM_HOST_DEPTH_MAX;
        return;
    }
    seg      = SHIM_HOST_SEG_BYTES / c->ext;
    c->rseg  = seg > 0 ? (int)seg : 1;
    c->cseg  = INT_MAX;
    c->depth = SHIM_HOST_DEPTH;
}

/* Scratch of a step that reduces into rbuf: DEPTH landing slots. */
static size_t shim_host_slots_len(const shim_host_call_t *c)
{
    return (size_t)c->depth * (size_t)c->rseg * c->ext;
}

static int shim_host_nseg(int cnt, int seg)
{
    return cnt / seg + (cnt % seg != 0);
}

/* Segment k of a block of cnt elements: its element count. */
static int shim_host_seglen(int cnt, int seg, int k)
{
    return (cnt - k * seg) < seg ? (cnt - k * seg) : seg;
}

/* Receive side of segment k has arrived in slot j: fold it into rbuf. */
static int shim_host_seg_done(const shim_host_call_t *c, shim_host_mode_t mode,
                              const shim_host_xfer_t *x, int seg, int k, const char *slot)
{
    int n     = shim_host_seglen(x->rcnt, seg, k);
    char *acc = shim_host_at(c, c->rbuf, x->roff + k * seg);

    if (mode == SHIM_HOST_REDUCE_DEV) {
        return c->dev->reduce(c->dev->arg, x->roff + k * seg, n);
    }
    if (mode == SHIM_HOST_REDUCE_OWN) {
        return PMPI_Reduce_local(shim_host_at(c, c->own, x->roff + k * seg), acc, n, c->dtype,
                                 c->op);
    }
    return PMPI_Reduce_local(slot, acc, n, c->dtype, c->op);
}

/*
 * One step of any phase, in segments with c->depth of them in flight each
 * way: iteration i retires segment i - depth from slot i % depth (waits for
 * it, reduces it), then posts segment i in that slot. A peer that sends
 * several steps in a row is matched in order: MPI does not let messages
 * overtake. An error returns at once, leaving the rest of the step posted:
 * the communicator is not usable for this call any more either way.
 */
static int shim_host_step(const shim_host_call_t *c, shim_host_mode_t mode,
                          const shim_host_xfer_t *x, char *slots)
{
    MPI_Request sreq[SHIM_HOST_DEPTH_MAX], rreq[SHIM_HOST_DEPTH_MAX];
    int seg = x->seg, d = c->depth;
    int ns = shim_host_nseg(x->scnt, seg), nr = shim_host_nseg(x->rcnt, seg);
    int i, j, k, rc = MPI_SUCCESS;
    char *slot, *in;

    if (mode == SHIM_HOST_COPY && ns == 1 && nr == 1) {
        /* the common small exchange, in one call */
        return PMPI_Sendrecv(shim_host_at(c, x->sbase, x->soff), x->scnt, c->dtype, x->dst,
                             SHIM_HOST_TAG, shim_host_at(c, x->rbase, x->roff), x->rcnt,
                             c->dtype, x->src, SHIM_HOST_TAG, c->comm, MPI_STATUS_IGNORE);
    }
    for (j = 0; j < d; j++) {
        sreq[j] = rreq[j] = MPI_REQUEST_NULL;
    }
    for (i = 0; rc == MPI_SUCCESS && i < (ns > nr ? ns : nr) + d; i++) {
        j    = i % d;
        k    = i - d;
        slot = slots != NULL ? slots + (size_t)j * c->rseg * c->ext : NULL;
        if (k >= 0 && k < nr) {
            rc = PMPI_Wait(&rreq[j], MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && mode != SHIM_HOST_COPY) {
                rc = shim_host_seg_done(c, mode, x, seg, k, slot);
            }
        }
        if (rc == MPI_SUCCESS && k >= 0 && k < ns) {
            rc = PMPI_Wait(&sreq[j], MPI_STATUS_IGNORE);
        }
        if (rc == MPI_SUCCESS && i < nr) {
            in = (mode == SHIM_HOST_REDUCE_ACC) ? slot
                                                : shim_host_at(c, x->rbase, x->roff + i * seg);
            rc = PMPI_Irecv(in, shim_host_seglen(x->rcnt, seg, i), c->dtype, x->src,
                            SHIM_HOST_TAG, c->comm, &rreq[j]);
        }
        if (rc == MPI_SUCCESS && i < ns) {
            rc = PMPI_Isend(shim_host_at(c, x->sbase, x->soff + i * seg),
                            shim_host_seglen(x->scnt, seg, i), c->dtype, x->dst, SHIM_HOST_TAG,
                            c->comm, &sreq[j]);
        }
    }
    return rc;
}

/* A step that only sends or only receives the whole buffer (the folds). */
static int shim_host_send_all(const shim_host_call_t *c, const char *base, int dst, int seg)
{
    shim_host_xfer_t x = {base, 0, c->count, dst, NULL, 0, 0, MPI_PROC_NULL, seg};

    return shim_host_step(c, SHIM_HOST_COPY, &x, NULL);
}

static int shim_host_recv_all(const shim_host_call_t *c, shim_host_mode_t mode, int src,
                              char *slots)
{
    shim_host_xfer_t x = {NULL, 0, 0, MPI_PROC_NULL, c->rbuf, 0, c->count, src,
                          mode == SHIM_HOST_COPY ? c->cseg : c->rseg};

    return shim_host_step(c, mode, &x, slots);
}

/*
 * Folding a size that is not a power of two (as MPICH and Open MPI do): of
 * the first 2 * rem ranks, each even one hands its data to the odd one above
 * and sits out; the others renumber to 0..pof2-1. The real rank of new rank nr.
 */
static int shim_host_real(int nr, int rem)
{
    return nr < rem ? 2 * nr + 1 : nr + rem;
}

/*
 * The fold before the power-of-two part. Returns this rank's new rank, or -1
 * when it sits out; *src is where its (possibly folded) data is now. Only
 * the odd rank computes the pair's value, so operand order is free and own
 * needs no copy.
 */
static int shim_host_fold_in(const shim_host_call_t *c, int rem, char *slots, const char **src,
                             int *rc)
{
    *src = c->own;
    *rc  = MPI_SUCCESS;
    if (c->rank >= 2 * rem) {
        return c->rank - rem;
    }
    if (!(c->rank & 1)) {
        *rc = shim_host_send_all(c, c->own, c->rank + 1, c->rseg);
        return -1;
    }
    *rc  = shim_host_recv_all(c, c->own != c->rbuf ? SHIM_HOST_REDUCE_OWN : SHIM_HOST_REDUCE_ACC,
                              c->rank - 1, slots);
    *src = c->rbuf;
    return c->rank / 2;
}

/* After the power-of-two part: the odd ranks of the fold give the result back. */
static int shim_host_fold_out(const shim_host_call_t *c, int rem)
{
    if (c->rank >= 2 * rem) {
        return MPI_SUCCESS;
    }
    if (c->rank & 1) {
        return shim_host_send_all(c, c->rbuf, c->rank - 1, c->cseg);
    }
    return shim_host_recv_all(c, SHIM_HOST_COPY, c->rank + 1, NULL);
}

static int shim_host_pof2(int size)
{
    int pof2 = 1;

    while (pof2 * 2 <= size) {
        pof2 *= 2;
    }
    return pof2;
}

/*
 * rbuf = in op own for a read-only own, in pieces that stay in cache between
 * the copy of own and the reduction (one pass over memory instead of two).
 */
static int shim_host_copy_reduce(const shim_host_call_t *c, const char *in, const char *own)
{
    int piece = (int)(SHIM_HOST_PIECE_BYTES / c->ext), off, n, rc = MPI_SUCCESS;

    piece = piece > 0 ? piece : 1;
    for (off = 0; rc == MPI_SUCCESS && off < c->count; off += n) {
        n = (c->count - off) < piece ? (c->count - off) : piece;
        memcpy(shim_host_at(c, c->rbuf, off), shim_host_at(c, own, off), (size_t)n * c->ext);
        rc = PMPI_Reduce_local(shim_host_at(c, in, off), shim_host_at(c, c->rbuf, off), n,
                               c->dtype, c->op);
    }
    return rc;
}

/*
 * rbuf = own op in, where only in is writable: in pieces, each reduced into
 * in and copied out while still in cache (the last step of a lower partner
 * whose running value is not in rbuf).
 */
static int shim_host_reduce_copy(const shim_host_call_t *c, const char *own, char *in)
{
    int piece = (int)(SHIM_HOST_PIECE_BYTES / c->ext), off, n, rc = MPI_SUCCESS;

    piece = piece > 0 ? piece : 1;
    for (off = 0; rc == MPI_SUCCESS && off < c->count; off += n) {
        n  = (c->count - off) < piece ? (c->count - off) : piece;
        rc = PMPI_Reduce_local(shim_host_at(c, own, off), shim_host_at(c, in, off), n, c->dtype,
                               c->op);
        memcpy(shim_host_at(c, c->rbuf, off), shim_host_at(c, in, off), (size_t)n * c->ext);
    }
    return rc;
}

/*
 * Recursive doubling. Both partners of a step compute (lower's op higher's)
 * with the same arguments of PMPI_Reduce_local (inoutbuf = inbuf op
 * inoutbuf), so they hold the same bits after every step. The running value
 * moves between rbuf and scratch instead of being copied back each step; a
 * read-only sbuf is read where it is by the lower partner and copied piece
 * by piece into the reduction by the higher one. Copies that remain are
 * done piece by piece with a reduction, while the data is in cache.
 */
static int shim_host_rd(const shim_host_call_t *c)
{
    size_t bytes = (size_t)c->count * c->ext;
    int pof2 = shim_host_pof2(c->size), rem = c->size - pof2;
    shim_host_xfer_t x = {NULL, 0, c->count, 0, NULL, 0, c->count, 0, c->cseg};
    int nr, mask, pnr, ro, rc;
    const char *cur;
    char *tmp;

    tmp = shim_host_scratch(bytes > shim_host_slots_len(c) ? bytes : shim_host_slots_len(c));
    if (tmp == NULL) {
        return MPI_ERR_NO_MEM;
    }
    nr = shim_host_fold_in(c, rem, tmp, &cur, &rc);
    for (mask = 1; rc == MPI_SUCCESS && nr >= 0 && mask < pof2; mask <<= 1) {
        pnr     = nr ^ mask;
        ro      = (cur != c->rbuf && cur != tmp);
        x.dst   = x.src = shim_host_real(pnr, rem);
        x.sbase = cur;
        x.rbase = (cur == tmp || (ro && nr < pnr)) ? c->rbuf : tmp;
        rc      = shim_host_step(c, SHIM_HOST_COPY, &x, NULL);
        if (rc != MPI_SUCCESS) {
            break;
        }
        if (nr < pnr && 2 * mask == pof2 && x.rbase != c->rbuf) {
            rc  = shim_host_reduce_copy(c, cur, x.rbase);
            cur = c->rbuf;
        } else if (nr < pnr) {
            rc  = PMPI_Reduce_local(cur, x.rbase, c->count, c->dtype, c->op);
            cur = x.rbase;
        } else if (ro) {
            rc  = shim_host_copy_reduce(c, x.rbase, cur);
            cur = c->rbuf;
        } else {
            rc = PMPI_Reduce_local(x.rbase, (char *)cur, c->count, c->dtype, c->op);
        }
    }
    if (rc == MPI_SUCCESS && nr >= 0 && cur != c->rbuf) {
        memcpy(c->rbuf, cur, bytes);
    }
    return rc == MPI_SUCCESS ? shim_host_fold_out(c, rem) : rc;
}

/*
 * Rabenseifner: reduce-scatter by recursive halving over pof2 blocks (new
 * rank i ends owning block i), then allgather by recursive doubling. The
 * first halving step reads this rank's data where it is.
 */
static int shim_host_rab(const shim_host_call_t *c)
{
    int pof2 = shim_host_pof2(c->size), rem = c->size - pof2;
    int nr, mask, lo, keep, give, rc;
    shim_host_mode_t mode;
    shim_host_xfer_t x;
    const char *src;
    char *slots;

    slots = shim_host_scratch(shim_host_slots_len(c));
    if (slots == NULL) {
        return MPI_ERR_NO_MEM;
    }
    nr      = shim_host_fold_in(c, rem, slots, &src, &rc);
    x.rbase = c->rbuf;
    for (mask = pof2 / 2; rc == MPI_SUCCESS && nr >= 0 && mask > 0; mask >>= 1) {
        x.dst   = x.src = shim_host_real(nr ^ mask, rem);
        lo      = nr & ~(2 * mask - 1);
        keep    = (nr & mask) ? lo + mask : lo;
        give    = (nr & mask) ? lo : lo + mask;
        x.sbase = (mask == pof2 / 2) ? src : c->rbuf;
        x.seg   = c->rseg;
        mode    = (x.sbase != c->rbuf) ? SHIM_HOST_REDUCE_OWN : SHIM_HOST_REDUCE_ACC;
        shim_host_range(c->count, pof2, give, mask, &x.soff, &x.scnt);
        shim_host_range(c->count, pof2, keep, mask, &x.roff, &x.rcnt);
        rc = shim_host_step(c, mode, &x, slots);
    }
    for (mask = 1; rc == MPI_SUCCESS && nr >= 0 && mask < pof2; mask <<= 1) {
        x.dst   = x.src = shim_host_real(nr ^ mask, rem);
        x.sbase = c->rbuf;
        x.seg   = c->cseg;
        lo      = nr & ~(mask - 1);
        shim_host_range(c->count, pof2, lo, mask, &x.soff, &x.scnt);
        shim_host_range(c->count, pof2, lo ^ mask, mask, &x.roff, &x.rcnt);
        rc = shim_host_step(c, SHIM_HOST_COPY, &x, NULL);
    }
    return rc == MPI_SUCCESS ? shim_host_fold_out(c, rem) : rc;
}

/*
 * Ring: p - 1 reduce-scatter steps, then p - 1 allgather steps; every step
 * moves 1/p of the data, whatever p is. Each block arrives once, so unless
 * in place it lands straight in rbuf and is reduced with this rank's data
 * where that is: no copy of sbuf. With the data on a device (c->dev) the
 * messages are the same, through rbuf as the device result's host mirror:
 * a block is reduced on the device as its segments arrive and fetched back
 * before it is sent on, and the gathered blocks go up as they arrive.
 */
static int shim_host_ring(const shim_host_call_t *c)
{
    int p = c->size, r = c->rank, k, rc = MPI_SUCCESS;
    const shim_host_dev_t *dev = c->dev;
    shim_host_mode_t mode = dev != NULL          ? SHIM_HOST_REDUCE_DEV
                            : c->own != c->rbuf ? SHIM_HOST_REDUCE_OWN
                                                : SHIM_HOST_REDUCE_ACC;
    shim_host_xfer_t x;
    char *slots = NULL;

    if (mode == SHIM_HOST_REDUCE_ACC &&
        (slots = shim_host_scratch(shim_host_slots_len(c))) == NULL) {
        return MPI_ERR_NO_MEM;
    }
    x.dst   = (r + 1) % p;
    x.src   = (r + p - 1) % p;
    x.rbase = c->rbuf;
    x.seg   = c->rseg;
    if (dev != NULL) {
        /* the device result starts as own; the first block sent goes to the mirror */
        shim_host_range(c->count, p, r, 1, &x.soff, &x.scnt);
        rc = dev->own(dev->arg, x.soff, x.scnt);
    }
    for (k = 0; rc == MPI_SUCCESS && k < p - 1; k++) {
        x.sbase = (k == 0) ? c->own : c->rbuf;
        shim_host_range(c->count, p, (r - k + p) % p, 1, &x.soff, &x.scnt);
        shim_host_range(c->count, p, (r - k - 1 + p) % p, 1, &x.roff, &x.rcnt);
        rc = shim_host_step(c, mode, &x, slots);
        if (rc == MPI_SUCCESS && dev != NULL) {
            rc = dev->fetch(dev->arg, x.roff, x.rcnt); /* sent on by the next step */
        }
    }
    /* Rank r now owns block r + 1. */
    x.sbase = c->rbuf;
    x.seg   = c->cseg;
    for (k = 0; rc == MPI_SUCCESS && k < p - 1; k++) {
        shim_host_range(c->count, p, (r + 1 - k + p) % p, 1, &x.soff, &x.scnt);
        shim_host_range(c->count, p, (r - k + p) % p, 1, &x.roff, &x.rcnt);
        rc = shim_host_step(c, SHIM_HOST_COPY, &x, NULL);
        if (rc == MPI_SUCCESS && dev != NULL) {
            rc = dev->put(dev->arg, x.roff, x.rcnt);
        }
    }
    if (rc == MPI_SUCCESS && dev != NULL) {
        rc = dev->fetch(dev->arg, 0, 0); /* waits for the puts */
    }
    return rc;
}

/* Fills c for a call; MPI error code. */
static int shim_host_call_init(shim_host_call_t *c, const void *sbuf, void *rbuf, int count,
                               MPI_Datatype dtype, MPI_Op op, MPI_Comm comm)
{
    MPI_Aint lb = 0, ext = 0; /* a failed call below leaves them unset */
    int rc;

    rc = PMPI_Comm_size(comm, &c->size);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_rank(comm, &c->rank);
    }
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Type_get_extent(dtype, &lb, &ext);
    }
    c->own   = (sbuf == MPI_IN_PLACE) ? rbuf : sbuf;
    c->rbuf  = rbuf;
    c->count = count;
    c->dtype = dtype;
    c->op    = op;
    c->comm  = comm;
    c->ext   = (size_t)ext;
    c->dev   = NULL;
    shim_host_segs(c);
    return rc;
}

int shim_host_ring_dev(void *mirror, int count, MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                       const shim_host_dev_t *dev)
{
    shim_host_call_t c;
    int rc;

    if (count <= 0) {
        return count == 0 ? MPI_SUCCESS : MPI_ERR_COUNT;
    }
    rc = shim_host_call_init(&c, MPI_IN_PLACE, mirror, count, dtype, op, comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    c.dev = dev;
    if (c.size == 1) {
        rc = dev->own(dev->arg, 0, 0);
        return rc == MPI_SUCCESS ? dev->fetch(dev->arg, 0, 0) : rc;
    }
    return shim_host_ring(&c);
}

int shim_host_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                        MPI_Op op, MPI_Comm comm, shim_host_alg_t alg)
{
    shim_host_call_t c;
    int rc;

    if (count <= 0) {
        return count == 0 ? MPI_SUCCESS : MPI_ERR_COUNT;
    }
    rc = shim_host_call_init(&c, sbuf, rbuf, count, dtype, op, comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (c.size == 1) {
        if (c.own != c.rbuf) {
            memcpy(c.rbuf, c.own, (size_t)count * c.ext);
        }
        return MPI_SUCCESS;
    }
    switch (alg) {
    case SHIM_ALG_RECURSIVE_DOUBLING:
        return shim_host_rd(&c);
    case SHIM_ALG_RABENSEIFNER:
        return shim_host_rab(&c);
    case SHIM_ALG_RING:
        return shim_host_ring(&c);
    default:
        return MPI_ERR_ARG;
    }
}
