/*
 * Device buffers through the network: staged through pinned host memory,
 * pipelined so that the copy of one chunk overlaps the aggregation of the
 * chunk before it.
 *
 * A request with a device buffer cuts its vector into chunks of whole
 * fragments (about gpu_stage_chunk bytes). Each communicator keeps, per
 * device, a stream and a ring of gpu_stage_depth pinned slots, each with a
 * source and a result half; one request holds the ring at a time. Chunk j
 * uses slot j % depth:
 *   1. its source part is copied device -> slot (async, then an event);
 *   2. once the event has fired its fragments may take numbers and go out,
 *      reading the slot;
 *   3. once they are all back (in order, so chunk by chunk) its result part
 *      is copied slot -> device (async, then an event);
 *   4. once that event has fired the slot is free for chunk j + depth.
 * The request completes when its last chunk is retired. Everything is made
 * with its device current, so one thread may drive communicators on several
 * devices and switch devices between calls.
 */
#include "agg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "agg/gpu.h"
#include "agg/log.h"

struct agg__gpu_dev {
    int       dev;
    void     *stream;
    uint8_t  *ring;     /* depth slots of 2 x slot_bytes: source half, result half */
    size_t    slot_bytes;
    unsigned  depth;
    void    **d2h;      /* per slot: its source copy is done */
    void    **h2d;      /* per slot: its result copy is done */
    agg_request_t *owner;
};

static agg_status_t agg__gpu_fail(const char *what)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();

    agg__set_last_error("%s: %s", what, o != NULL ? o->error() : "no GPU backend");
    agg_error("%s: %s", what, o != NULL ? o->error() : "no GPU backend");
    return AGG_ERR_DEVICE;
}

/* Makes the device current for a moment; *prev to put back (-1: nothing to). */
static int agg__gpu_enter(const agg_gpu_ops_t *o, int dev, int *prev)
{
    int cur;

    *prev = -1;
    if (o->device_get(&cur) != 0) {
        return -1;
    }
    if (cur != dev) {
        if (o->device_set(dev) != 0) {
            return -1;
        }
        *prev = cur;
    }
    return 0;
}

static void agg__gpu_leave(const agg_gpu_ops_t *o, int prev)
{
    if (prev >= 0) {
        o->device_set(prev);
    }
}

static void agg__gpu_dev_release(const agg_gpu_ops_t *o, struct agg__gpu_dev *g)
{
    unsigned i;

    for (i = 0; g->d2h != NULL && i < g->depth; ++i) {
        if (g->d2h[i] != NULL) {
            o->event_destroy(g->d2h[i]);
        }
        if (g->h2d[i] != NULL) {
            o->event_destroy(g->h2d[i]);
        }
    }
    free(g->d2h);
    g->d2h = g->h2d = NULL;
    if (g->ring != NULL) {
        o->host_free(g->ring);
        g->ring = NULL;
    }
    g->slot_bytes = 0;
}

/* The ring for slots of `bytes`; made (again) with the device current. */
static agg_status_t agg__gpu_dev_ring(const agg_gpu_ops_t *o, struct agg__gpu_dev *g,
                                      size_t bytes, unsigned depth)
{
    unsigned i;

    if (g->ring != NULL && g->slot_bytes >= bytes && g->depth == depth) {
        return AGG_OK;
    }
    agg__gpu_dev_release(o, g);
    g->depth = depth;
    g->d2h   = calloc(2 * (size_t)depth, sizeof(void *));
    if (g->d2h == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    g->h2d = g->d2h + depth;
    if (o->host_alloc((void **)&g->ring, 2 * bytes * depth) != 0) {
        g->ring = NULL;
        return agg__gpu_fail("pinned staging buffers");
    }
    g->slot_bytes = bytes;
    agg_gpu_forget(g->ring, 2 * bytes * depth); /* host memory now, whatever was there */
    for (i = 0; i < depth; ++i) {
        if (o->event_create(&g->d2h[i]) != 0 || o->event_create(&g->h2d[i]) != 0) {
            return agg__gpu_fail("staging events");
        }
    }
    return AGG_OK;
}

/* The communicator's staging on device dev, made at first use. */
static agg_status_t agg__gpu_dev_get(agg_comm_t *comm, int dev, struct agg__gpu_dev **out)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    struct agg__gpu_dev *g;
    int prev;

    if (dev < 0 || dev >= AGG_GPU_MAX_DEV) {
        agg__set_last_error("device %d: libagg drives devices 0 to %d", dev, AGG_GPU_MAX_DEV - 1);
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (comm->gpu[dev] != NULL) {
        *out = comm->gpu[dev];
        return AGG_OK;
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    g->dev = dev;
    if (agg__gpu_enter(o, dev, &prev) != 0 || o->stream_create(&g->stream) != 0) {
        free(g);
        return agg__gpu_fail("a stream for staging");
    }
    agg__gpu_leave(o, prev);
    comm->gpu[dev] = g;
    *out = g;
    return AGG_OK;
}

void agg__stage_comm_free(agg_comm_t *comm)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    int d, prev;

    for (d = 0; d < AGG_GPU_MAX_DEV; ++d) {
        struct agg__gpu_dev *g = comm->gpu[d];

        if (g == NULL || o == NULL) {
            continue;
        }
        if (agg__gpu_enter(o, g->dev, &prev) == 0) {
            o->stream_sync(g->stream);
            agg__gpu_dev_release(o, g);
            o->stream_destroy(g->stream);
            agg__gpu_leave(o, prev);
        }
        free(g);
        comm->gpu[d] = NULL;
    }
}

/* Where a buffer is; a declared device buffer with no backend is refused. */
static agg_status_t agg__stage_where(const void *p, agg_mem_type_t declared, int *dev)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    agg_gpu_ptr_t q;

    *dev = -1;
    if (p == NULL) {
        return AGG_OK;
    }
    if ((unsigned)declared > AGG_MEM_ROCM) {
        agg__set_last_error("memory type %d: not host, CUDA or ROCm", (int)declared);
        return AGG_ERR_INVALID_PARAM;
    }
    if (o == NULL) {
        if (declared == AGG_MEM_HOST) {
            return AGG_OK;
        }
        /* never dereference it: it may be device memory */
        agg__set_last_error("a %s buffer, but no GPU backend is loaded: %s",
                            declared == AGG_MEM_CUDA ? "CUDA" : "ROCm", agg_gpu_why());
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (agg_gpu_query(p, &q) != 0) {
        return agg__gpu_fail("what a buffer is");
    }
    if (q.mem == AGG_GPU_MEM_DEVICE || q.mem == AGG_GPU_MEM_MANAGED) {
        *dev = q.device;
    } else if (declared != AGG_MEM_HOST && q.mem == AGG_GPU_MEM_HOST) {
        /* neither device nor pinned memory: a wrong pointer, never to be read */
        agg__set_last_error("a buffer declared as %s memory is no allocation of the %s runtime",
                            declared == AGG_MEM_CUDA ? "CUDA" : "ROCm", o->name);
        return AGG_ERR_INVALID_PARAM;
    }
    return AGG_OK;
}

/* Whether the transports of every tree of comm move memory of type mem themselves. */
static int agg__stage_moved(const agg_comm_t *comm, agg_mem_type_t mem)
{
    unsigned bit = 1u << mem;

    return (comm->llt.tl_attr.mem_types & bit) &&
           (comm->sat.tl == NULL || (comm->sat.tl_attr.mem_types & bit));
}

agg_status_t agg__stage_prepare(agg_request_t *req)
{
    const agg_reduce_spec_t *sp = &req->spec;
    agg__stage_t *s = &req->stage;
    int sdev, ddev;
    agg_status_t st;

    memset(s, 0, sizeof(*s));
    /* a bcast reads the root's rbuf */
    st = agg__stage_where(req->src, req->coll == AGG_COLL_BCAST ? sp->rbuf_mem : sp->sbuf_mem,
                          &sdev);
    if (st == AGG_OK) {
        st = agg__stage_where(req->dst, sp->rbuf_mem, &ddev);
    }
    if (st != AGG_OK || (sdev < 0 && ddev < 0) ||
        agg__stage_moved(req->comm, (agg_mem_type_t)agg_gpu_ops()->mem_type)) {
        return st;
    }
    st = agg__gpu_dev_get(req->comm, sdev >= 0 ? sdev : ddev, &s->gd);
    if (st != AGG_OK) {
        return st;
    }
    s->dsrc = sdev >= 0 ? req->src : NULL;
    s->ddst = ddev >= 0 ? req->dst : NULL;
    return AGG_OK;
}

void agg__stage_start(agg_request_t *req)
{
    agg__stage_t *s = &req->stage;
    size_t frag_bytes = req->per_frag * req->esize;
    size_t want = (size_t)agg_conf_int(&req->comm->ctx->conf, AGG_CONF_GPU_STAGE_CHUNK);

    s->frags    = want > frag_bytes ? want / frag_bytes : 1;
    s->chunk    = s->frags * req->per_frag;
    s->nchunks  = req->total > 0 ? (req->total + s->chunk - 1) / s->chunk : 0;
    s->issued   = s->ready = s->uploaded = s->retired = 0;
    s->status   = AGG_OK;
}

/* The part [lo, hi) of chunk j that lies in [a, b). */
static int agg__stage_part(const agg__stage_t *s, size_t j, size_t a, size_t b, size_t total,
                           size_t *lo, size_t *hi)
{
    size_t c0 = j * s->chunk, c1 = c0 + s->chunk < total ? c0 + s->chunk : total;

    *lo = c0 > a ? c0 : a;
    *hi = c1 < b ? c1 : b;
    return *lo < *hi;
}

static uint8_t *agg__slot(const agg__stage_t *s, size_t j, int result)
{
    return s->gd->ring + ((j % s->gd->depth) * 2 + (size_t)result) * s->gd->slot_bytes;
}

const uint8_t *agg__stage_src(const agg_request_t *req, size_t x)
{
    const agg__stage_t *s = &req->stage;
    size_t j;

    if (s->dsrc == NULL) {
        return req->src + (x - req->src_lo) * req->esize;
    }
    j = x / s->chunk;
    return agg__slot(s, j, 0) + (x - j * s->chunk) * req->esize;
}

uint8_t *agg__stage_dst(const agg_request_t *req, size_t x)
{
    const agg__stage_t *s = &req->stage;
    size_t j;

    if (s->ddst == NULL) {
        return req->dst + (x - req->dst_lo) * req->esize;
    }
    j = x / s->chunk;
    return agg__slot(s, j, 1) + (x - j * s->chunk) * req->esize;
}

/* Chunk j's source copy, into its slot. */
static int agg__stage_d2h(const agg_gpu_ops_t *o, agg_request_t *req, size_t j)
{
    agg__stage_t *s = &req->stage;
    size_t lo, hi;

    if (s->dsrc != NULL && agg__stage_part(s, j, req->src_lo, req->src_hi, req->total, &lo, &hi) &&
        o->memcpy_async(agg__slot(s, j, 0) + (lo - j * s->chunk) * req->esize,
                        s->dsrc + (lo - req->src_lo) * req->esize, (hi - lo) * req->esize,
                        s->gd->stream) != 0) {
        return -1;
    }
    return o->event_record(s->gd->d2h[j % s->gd->depth], s->gd->stream);
}

/* Chunk j's result copy, out of its slot. */
static int agg__stage_h2d(const agg_gpu_ops_t *o, agg_request_t *req, size_t j)
{
    agg__stage_t *s = &req->stage;
    size_t lo, hi;

    if (s->ddst != NULL && !req->abandoned && req->status == AGG_OK &&
        agg__stage_part(s, j, req->dst_lo, req->dst_hi, req->total, &lo, &hi) &&
        o->memcpy_async(s->ddst + (lo - req->dst_lo) * req->esize,
                        agg__slot(s, j, 1) + (lo - j * s->chunk) * req->esize,
                        (hi - lo) * req->esize, s->gd->stream) != 0) {
        return -1;
    }
    return o->event_record(s->gd->h2d[j % s->gd->depth], s->gd->stream);
}

/* A GPU call failed: the rest of the request's fragments fail for every member. */
static void agg__stage_broken(agg_request_t *req, const char *what)
{
    agg__stage_t *s = &req->stage;

    s->status = agg__gpu_fail(what);
    s->ready  = s->nchunks; /* let its fragments out, as errors */
    if (req->status == AGG_OK) {
        req->status = s->status;
    }
}

unsigned agg__stage_step(agg_request_t *req)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    agg__stage_t *s = &req->stage;
    struct agg__gpu_dev *g = s->gd;
    size_t depth = (size_t)agg_conf_int(&req->comm->ctx->conf, AGG_CONF_GPU_STAGE_DEPTH);
    unsigned steps = 0;
    int prev, q;

    if (g->owner != req) {
        if (g->owner != NULL) {
            return 0; /* another request of this communicator streams through it */
        }
        if (agg__gpu_enter(o, g->dev, &prev) != 0) {
            agg__stage_broken(req, "making the buffer's device current");
            return 1;
        }
        if (agg__gpu_dev_ring(o, g, s->chunk * req->esize, (unsigned)depth) != AGG_OK) {
            agg__gpu_leave(o, prev);
            agg__stage_broken(req, "staging buffers");
            return 1;
        }
        agg__gpu_leave(o, prev);
        g->owner = req;
    }
    if (s->status != AGG_OK) {
        goto out;
    }
    if (agg__gpu_enter(o, g->dev, &prev) != 0) {
        agg__stage_broken(req, "making the buffer's device current");
        goto out;
    }
    while (s->issued < s->nchunks && s->issued < s->retired + g->depth) {
        if (agg__stage_d2h(o, req, s->issued) != 0) {
            agg__stage_broken(req, "copying a device buffer to the staging buffer");
            break;
        }
        s->issued++;
        steps++;
    }
    while (s->status == AGG_OK && s->ready < s->issued &&
           (q = o->event_query(g->d2h[s->ready % g->depth])) != 0) {
        if (q < 0) {
            agg__stage_broken(req, "copying a device buffer to the staging buffer");
            break;
        }
        s->ready++;
        steps++;
    }
    /* a chunk's fragments are all back once done covers them (they complete in order) */
    while (s->status == AGG_OK && s->uploaded < s->ready &&
           req->done >= ((s->uploaded + 1) * s->frags < req->nfrags ? (s->uploaded + 1) * s->frags
                                                                   : req->nfrags)) {
        if (agg__stage_h2d(o, req, s->uploaded) != 0) {
            agg__stage_broken(req, "copying a result to the device buffer");
            break;
        }
        s->uploaded++;
        steps++;
    }
    while (s->status == AGG_OK && s->retired < s->uploaded &&
           (q = o->event_query(g->h2d[s->retired % g->depth])) != 0) {
        if (q < 0) {
            agg__stage_broken(req, "copying a result to the device buffer");
            break;
        }
        s->retired++;
        steps++;
    }
    agg__gpu_leave(o, prev);
out:
    if (req->done == req->nfrags && (s->retired == s->nchunks || s->status != AGG_OK)) {
        g->owner = NULL; /* the caller finishes the request */
    }
    return steps;
}

size_t agg__stage_assignable(const agg_request_t *req)
{
    const agg__stage_t *s = &req->stage;
    size_t n = s->ready * s->frags;

    if (s->gd == NULL || s->gd->owner != req) {
        return s->gd == NULL ? req->nfrags : 0;
    }
    return n < req->nfrags ? n : req->nfrags;
}

int agg__stage_drained(const agg_request_t *req)
{
    const agg__stage_t *s = &req->stage;

    return s->gd == NULL || (s->gd->owner != req && req->done == req->nfrags);
}

int agg__stage_busy(const agg_request_t *req)
{
    const agg__stage_t *s = &req->stage;

    if (s->gd == NULL || s->gd->owner == NULL) {
        return 0;
    }
    return s->gd->owner != req || s->ready < s->issued || s->retired < s->uploaded;
}

void agg__stage_abandon(agg_request_t *req)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    agg__stage_t *s = &req->stage;
    int prev;

    if (s->gd == NULL || s->gd->owner != req) {
        return;
    }
    /* the caller may reuse its buffers on return: no copy may still touch them */
    if (agg__gpu_enter(o, s->gd->dev, &prev) == 0) {
        o->stream_sync(s->gd->stream);
        agg__gpu_leave(o, prev);
    }
    s->dsrc = NULL;
    s->ddst = NULL;
}
