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
 * system call. Small blocks therefore go in segments just under that limit;
 * large ones in segments that a reduction still finds in cache, each one
 * reduced while the peer copies the next. A copying step of a large block
 * sends it whole: a single CMA copy is the cheapest move there is.
 */
#define SHIM_HOST_EAGER_BYTES 4032
#define SHIM_HOST_SEG_BYTES   (128u << 10)
#define SHIM_HOST_SMALL_BLOCK (32u << 10) /* messages up to this: eager segments */
#define SHIM_HOST_DEPTH       2           /* large segments in flight per direction */
#define SHIM_HOST_DEPTH_MAX   8           /* small ones: all of a block at once */

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
} shim_host_call_t;

/* What a step does with the data it receives. */
typedef enum shim_host_mode {
    SHIM_HOST_COPY,       /* lands in rbuf as it is */
    SHIM_HOST_REDUCE_OWN, /* lands in rbuf, empty so far, then reduced with own */
    SHIM_HOST_REDUCE_ACC, /* lands in scratch, then reduced into what rbuf holds */
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

/* TUNING ONLY */
static long shim_host_knob(const char *name, long def)
{
    static const char *names[8];
    static long vals[8];
    int i;
    for (i = 0; i < 8 && names[i]; i++) if (!strcmp(names[i], name)) return vals[i];
    const char *e = getenv(name);
    names[i] = name; vals[i] = e ? atol(e) : def;
    return vals[i];
}

/* Message sizes of a call, the same on every rank: they depend on nothing but the call. */
static void shim_host_segs(shim_host_call_t *c)
{
    size_t bytes = (size_t)c->count * c->ext;
    size_t rseg = (size_t)shim_host_knob("SEG_LARGE", SHIM_HOST_SEG_BYTES);

    if (bytes <= (size_t)shim_host_knob("SEG_SWITCH", SHIM_HOST_SMALL_BLOCK)) {
        rseg = (size_t)shim_host_knob("SEG_SMALL", SHIM_HOST_EAGER_BYTES);
        c->cseg = (int)(rseg / c->ext);
        c->depth = (int)shim_host_knob("DEPTH_SMALL", SHIM_HOST_DEPTH_MAX);
    } else {
        c->depth = (int)shim_host_knob("DEPTH_LARGE", SHIM_HOST_DEPTH);
        c->cseg = shim_host_knob("CSEG", 0) ? (int)(shim_host_knob("CSEG", 0) / (long)c->ext) : INT_MAX;
    }
    c->rseg = (int)(rseg / c->ext);
    c->rseg = c->rseg > 0 ? c->rseg : 1;
    c->cseg = c->cseg > 0 ? c->cseg : 1;
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

    if (mode == SHIM_HOST_REDUCE_OWN) {
        return PMPI_Reduce_local(shim_host_at(c, c->own, x->roff + k * seg), acc, n, c->dtype,
                                 c->op);
    }
    return PMPI_Reduce_local(slot, acc, n, c->dtype, c->op);
}

/*
 * One step of any phase, in segments with DEPTH of them in flight each way:
 * iteration i retires segment i - DEPTH from slot i % DEPTH (waits for it,
 * reduces it), then posts segment i in that slot. A peer that sends several
 * steps in a row is matched in order: MPI does not let messages overtake.
 */
static int shim_host_step(const shim_host_call_t *c, shim_host_mode_t mode,
                          const shim_host_xfer_t *x, char *slots)
{
    MPI_Request sreq[SHIM_HOST_DEPTH_MAX], rreq[SHIM_HOST_DEPTH_MAX];
    int seg = x->seg, d = c->depth;
    int ns = shim_host_nseg(x->scnt, seg), nr = shim_host_nseg(x->rcnt, seg);
    int i, j, k, rc = MPI_SUCCESS;
    char *slot, *in;

    for (j = 0; j < d; j++) {
        sreq[j] = rreq[j] = MPI_REQUEST_NULL;
    }
    for (i = 0; rc == MPI_SUCCESS && i < (ns > nr ? ns : nr) + d; i++) {
        j    = i % d;
        k    = i - d;
        slot = slots + (size_t)j * c->rseg * c->ext;
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
 * Recursive doubling. Both partners of a step compute (lower's op higher's)
 * with the same arguments of PMPI_Reduce_local (inoutbuf = inbuf op
 * inoutbuf), so they hold the same bits after every step. The running value
 * moves between rbuf and scratch instead of being copied back each step;
 * only a higher partner starting from a read-only sbuf copies it once.
 */
static int shim_host_rd(const shim_host_call_t *c)
{
    size_t bytes = (size_t)c->count * c->ext;
    int pof2 = shim_host_pof2(c->size), rem = c->size - pof2;
    shim_host_xfer_t x = {NULL, 0, c->count, 0, NULL, 0, c->count, 0, c->cseg};
    const char *cur;
    int nr, mask, pnr, rc;
    char *tmp;

    tmp = shim_host_scratch(bytes > shim_host_slots_len(c) ? bytes : shim_host_slots_len(c));
    if (tmp == NULL) {
        return MPI_ERR_NO_MEM;
    }
    nr = shim_host_fold_in(c, rem, tmp, &cur, &rc);
    for (mask = 1; rc == MPI_SUCCESS && nr >= 0 && mask < pof2; mask <<= 1) {
        pnr     = nr ^ mask;
        x.dst   = x.src = shim_host_real(pnr, rem);
        x.sbase = cur;
        x.rbase = (cur == tmp) ? c->rbuf : tmp;
        rc      = shim_host_step(c, SHIM_HOST_COPY, &x, NULL);
        if (rc != MPI_SUCCESS) {
            break;
        }
        if (nr < pnr) {
            rc  = PMPI_Reduce_local(cur, x.rbase, c->count, c->dtype, c->op);
            cur = x.rbase;
            continue;
        }
        if (cur != c->rbuf && cur != tmp) {
            memcpy(c->rbuf, cur, bytes);
            cur = c->rbuf;
        }
        rc = PMPI_Reduce_local(x.rbase, (char *)cur, c->count, c->dtype, c->op);
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
        x.dst  = x.src = shim_host_real(nr ^ mask, rem);
        lo     = nr & ~(2 * mask - 1);
        keep   = (nr & mask) ? lo + mask : lo;
        give   = (nr & mask) ? lo : lo + mask;
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
 * Ring: p - 1 reduce-scatter steps (each block is received once, straight
 * into rbuf, and reduced with this rank's data where it is), then p - 1
 * allgather steps. Every step moves 1/p of the data, whatever p is.
 */
static int shim_host_ring(const shim_host_call_t *c)
{
    int p = c->size, r = c->rank, k, rc = MPI_SUCCESS;
    shim_host_mode_t mode = c->own != c->rbuf ? SHIM_HOST_REDUCE_OWN : SHIM_HOST_REDUCE_ACC;
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
    for (k = 0; rc == MPI_SUCCESS && k < p - 1; k++) {
        x.sbase = (k == 0) ? c->own : c->rbuf;
        shim_host_range(c->count, p, (r - k + p) % p, 1, &x.soff, &x.scnt);
        shim_host_range(c->count, p, (r - k - 1 + p) % p, 1, &x.roff, &x.rcnt);
        rc = shim_host_step(c, mode, &x, slots);
    }
    /* Rank r now owns block r + 1. */
    x.sbase = c->rbuf;
    x.seg   = c->cseg;
    for (k = 0; rc == MPI_SUCCESS && k < p - 1; k++) {
        shim_host_range(c->count, p, (r + 1 - k + p) % p, 1, &x.soff, &x.scnt);
        shim_host_range(c->count, p, (r - k + p) % p, 1, &x.roff, &x.rcnt);
        rc = shim_host_step(c, SHIM_HOST_COPY, &x, NULL);
    }
    return rc;
}

int shim_host_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                        MPI_Op op, MPI_Comm comm, shim_host_alg_t alg)
{
    shim_host_call_t c;
    MPI_Aint lb, ext;
    int rc;

    if (count <= 0) {
        return count == 0 ? MPI_SUCCESS : MPI_ERR_COUNT;
    }
    rc = PMPI_Comm_size(comm, &c.size);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_rank(comm, &c.rank);
    }
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Type_get_extent(dtype, &lb, &ext);
    }
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    c.own   = (sbuf == MPI_IN_PLACE) ? rbuf : sbuf;
    c.rbuf  = rbuf;
    c.count = count;
    c.dtype = dtype;
    c.op    = op;
    c.comm  = comm;
    c.ext   = (size_t)ext;
    shim_host_segs(&c);
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

shim_host_alg_t shim_host_choose(const shim_host_tune_t *t, size_t bytes, int comm_size)
{
    (void)comm_size;
    if (bytes < t->rd_max) {
        return SHIM_ALG_RECURSIVE_DOUBLING;
    }
    return bytes < t->rab_max ? SHIM_ALG_RABENSEIFNER : SHIM_ALG_RING;
}

void shim_host_tune_static(shim_host_tune_t *t, int comm_size)
{
    (void)comm_size;
    const char *e;
    t->rd_max  = (e = getenv("RD_MAX")) ? (size_t)atol(e) : 8192;
    t->rab_max = (e = getenv("RAB_MAX")) ? (size_t)atol(e) : 1u << 20;
}

/*
 * Dynamic tuning: sizes 1 KiB to 256 KiB by 4x, where the crossovers lie on
 * shared memory; larger sizes keep the static choice (ring), so that the
 * whole measurement stays within a few ms.
 */
#define SHIM_HOST_TUNE_MIN  (1u << 10)
#define SHIM_HOST_TUNE_NSZ  5
#define SHIM_HOST_TUNE_REPS 3

/* Best of reps calls of alg, as this rank sees it. */
static int shim_host_time(const float *sbuf, float *rbuf, int count, MPI_Comm comm,
                          shim_host_alg_t alg, double *best)
{
    double t;
    int i, rc;

    *best = 1e30;
    rc    = PMPI_Barrier(comm);
    for (i = 0; rc == MPI_SUCCESS && i <= SHIM_HOST_TUNE_REPS; i++) {
        t  = PMPI_Wtime();
        rc = shim_host_allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm, alg);
        t  = PMPI_Wtime() - t;
        /* the first call only warms up */
        if (i > 0 && t < *best) {
            *best = t;
        }
    }
    return rc;
}

/* Rank 0's decision from its timings; a crossover between two sizes is put halfway (in log). */
static void shim_host_decide(double tm[][SHIM_ALG__COUNT], shim_host_tune_t *t)
{
    size_t bytes;
    int i, rd_done = 0;

    for (i = 0; i < SHIM_HOST_TUNE_NSZ; i++) {
        bytes = (size_t)SHIM_HOST_TUNE_MIN << (2 * i);
        if (!rd_done && tm[i][SHIM_ALG_RECURSIVE_DOUBLING] >
                            (tm[i][SHIM_ALG_RABENSEIFNER] < tm[i][SHIM_ALG_RING]
                                 ? tm[i][SHIM_ALG_RABENSEIFNER] : tm[i][SHIM_ALG_RING])) {
            t->rd_max = i == 0 ? bytes : bytes / 2;
            rd_done   = 1;
        }
        if (rd_done && tm[i][SHIM_ALG_RING] < tm[i][SHIM_ALG_RABENSEIFNER]) {
            t->rab_max = i == 0 ? bytes : bytes / 2;
            break;
        }
    }
    if (t->rab_max < t->rd_max) {
        t->rab_max = t->rd_max;
    }
}

int shim_host_tune_dynamic(shim_host_tune_t *t, MPI_Comm comm)
{
    double tm[SHIM_HOST_TUNE_NSZ][SHIM_ALG__COUNT];
    size_t maxb = (size_t)SHIM_HOST_TUNE_MIN << (2 * (SHIM_HOST_TUNE_NSZ - 1));
    unsigned long long th[2];
    shim_host_tune_t res;
    int size, rank, i, a, rc;
    float *buf;

    rc = PMPI_Comm_size(comm, &size);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_rank(comm, &rank);
    }
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    shim_host_tune_static(&res, size);
    if (size > 1) {
        buf = calloc(2, maxb);
        if (buf == NULL) {
            return MPI_ERR_NO_MEM;
        }
        for (i = 0; rc == MPI_SUCCESS && i < SHIM_HOST_TUNE_NSZ; i++) {
            for (a = 0; rc == MPI_SUCCESS && a < SHIM_ALG__COUNT; a++) {
                rc = shim_host_time(buf, buf + maxb / sizeof(float),
                                    (int)((SHIM_HOST_TUNE_MIN << (2 * i)) / sizeof(float)), comm,
                                    (shim_host_alg_t)a, &tm[i][a]);
            }
        }
        free(buf);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
        if (rank == 0) {
            shim_host_decide(tm, &res);
        }
        th[0] = res.rd_max;
        th[1] = res.rab_max;
        rc    = PMPI_Bcast(th, 2, MPI_UNSIGNED_LONG_LONG, 0, comm);
        if (rc != MPI_SUCCESS) {
            return rc;
        }
        res.rd_max  = (size_t)th[0];
        res.rab_max = (size_t)th[1];
    }
    *t = res;
    return MPI_SUCCESS;
}
