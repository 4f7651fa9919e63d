/*
 * Device buffers in the intercepted collectives: where a call's buffers
 * are (shim_gpu_mem, filled into the call descriptor once) and the two
 * paths of the walk that know about device memory. Allreduce, reduce and
 * bcast of a contiguous predefined type go to the network with their
 * buffers marked as device memory, and libagg stages them (pipelined:
 * shim_path_net). Whatever cannot go there runs where it would for host
 * buffers, so that every rank takes the same path and algorithm whatever
 * memory its buffers are in:
 *
 *  - shim_path_gpu_ring: a blocking allreduce the host ring would run keeps
 *    its data on the device and reduces it there;
 *  - shim_path_stage: the buffers are copied to pinned host memory and the
 *    call walks its paths again as a host call; a result is copied back.
 *    Not where the call would end on Open MPI and Open MPI takes device
 *    memory (CUDA-aware): then Open MPI's path gets the device pointers.
 *
 * A staged call says its buffers are host memory in its descriptor: the
 * runtime may place pinned host memory where a freed device allocation
 * was, which the cache of device allocations cannot see, so a staging
 * copy is never asked what it is.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "agg/conf.h"
#include "agg/gpu.h"
#include "agg/log.h"
#include "shim.h"

static const agg_gpu_ops_t *shim_gpu;
static int shim_gpu_mpi_aware; /* Open MPI takes device pointers itself */
static long long shim_gpu_reduce_min; /* AGG_GPU_HOST_REDUCE_MIN */

/* A thread's staging buffers: pinned, grown as needed. */
static __thread void  *shim_gpu_buf[2];
static __thread size_t shim_gpu_len[2];

/*
 * A thread's scratch on each device, for the ring's reductions there:
 * allocated with that device current, the first time it is used on it.
 */
#define SHIM_GPU_CHUNK (1u << 20) /* bytes of arrived data handed to the device at once */
static __thread void *shim_gpu_scr[AGG_GPU_MAX_DEV];
/* copies on the current device's default stream: right whichever device is current */
#define shim_gpu_stream NULL

void shim_gpu_setup(const agg_conf_t *conf)
{
    int (*aware)(void);

    agg_gpu_load_conf(conf, &shim_gpu);
    shim_gpu_reduce_min = agg_conf_int(conf, AGG_CONF_GPU_HOST_REDUCE_MIN);
    if (shim_gpu == NULL) {
        return;
    }
    *(void **)&aware = dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    shim_gpu_mpi_aware = shim_gpu->mem_type == AGG_MEM_CUDA && aware != NULL && aware() == 1;
    agg_debug("GPU buffers through %s; Open MPI %s device memory", shim_gpu->name,
              shim_gpu_mpi_aware ? "takes" : "does not take");
}

agg_mem_type_t shim_gpu_mem(const void *p)
{
    agg_gpu_ptr_t q;

    if (shim_gpu == NULL || p == NULL || p == MPI_IN_PLACE || agg_gpu_query(p, &q) != 0 ||
        (q.mem != AGG_GPU_MEM_DEVICE && q.mem != AGG_GPU_MEM_MANAGED)) {
        return AGG_MEM_HOST;
    }
    return (agg_mem_type_t)shim_gpu->mem_type;
}

void shim_gpu_cleanup(void)
{
    int i;

    for (i = 0; shim_gpu != NULL && i < AGG_GPU_MAX_DEV; ++i) {
        if (shim_gpu_scr[i] != NULL) {
            shim_gpu->dev_free(shim_gpu_scr[i]);
            shim_gpu_scr[i] = NULL;
        }
    }

    for (i = 0; shim_gpu != NULL && i < 2; ++i) {
        if (shim_gpu_buf[i] != NULL) {
            shim_gpu->host_free(shim_gpu_buf[i]);
            shim_gpu_buf[i] = NULL;
            shim_gpu_len[i] = 0;
        }
    }
}

/* The bytes count elements of dtype span, and where they start from buf. */
static size_t shim_gpu_span(MPI_Datatype dtype, int count, MPI_Aint *lb)
{
    MPI_Aint tlb, text, l, ext;

    if (count <= 0 || PMPI_Type_get_true_extent(dtype, &tlb, &text) != MPI_SUCCESS ||
        PMPI_Type_get_extent(dtype, &l, &ext) != MPI_SUCCESS) {
        *lb = 0;
        return 0;
    }
    *lb = tlb;
    return (size_t)(text + (MPI_Aint)(count - 1) * ext);
}

static void shim_gpu_die(const char *what)
{
    agg_error("%s: %s", what, shim_gpu->error());
    PMPI_Abort(MPI_COMM_WORLD, 1);
}

/* Staging buffer i holding the span of count x dtype at buf (copied in when `in`). */
static void *shim_gpu_in(int i, const void *buf, int count, MPI_Datatype dtype, int in)
{
    MPI_Aint lb;
    size_t len = shim_gpu_span(dtype, count, &lb);

    if (len > shim_gpu_len[i]) {
        if (shim_gpu_buf[i] != NULL) {
            shim_gpu->host_free(shim_gpu_buf[i]);
        }
        shim_gpu_len[i] = 0;
        if (shim_gpu->host_alloc(&shim_gpu_buf[i], len) != 0) {
            shim_gpu_buf[i] = NULL;
            shim_gpu_die("pinned staging buffer"); /* going on alone would split the ranks */
        }
        shim_gpu_len[i] = len;
        agg_gpu_forget(shim_gpu_buf[i], len); /* host memory now, whatever was there */
    }
    if (in && len > 0 &&
        (shim_gpu->memcpy_async(shim_gpu_buf[i], (const char *)buf + lb, len, shim_gpu_stream) != 0 ||
         shim_gpu->stream_sync(shim_gpu_stream) != 0)) {
        shim_gpu_die("copying a device buffer to the host");
    }
    return (char *)shim_gpu_buf[i] - lb;
}

/* Copies staging buffer i back to the device buffer. */
static void shim_gpu_out(int i, void *buf, int count, MPI_Datatype dtype)
{
    MPI_Aint lb;
    size_t len = shim_gpu_span(dtype, count, &lb);

    if (len > 0 &&
        (shim_gpu->memcpy_async((char *)buf + lb, shim_gpu_buf[i], len, shim_gpu_stream) != 0 ||
         shim_gpu->stream_sync(shim_gpu_stream) != 0)) {
        shim_gpu_die("copying a result to the device buffer");
    }
}

/*
 * Device buffers on the host path: the shim's ring (shim_host_ring_dev)
 * moves the data through a pinned mirror of the result and the reductions
 * run on the device, a chunk of arrived segments at a time, on the current
 * device's default stream.
 */
typedef struct shim_gpu_ring {
    const char *own;   /* this rank's data: device or host memory */
    char       *res;   /* the result: device memory */
    char       *mirror;
    char       *scr;   /* SHIM_GPU_CHUNK bytes on the result's device */
    size_t      ext;
    int         count, dtype, op;
    int         poff, pcnt; /* arrived, not yet handed to the device */
} shim_gpu_ring_t;

static int shim_gpu_ring_copy(void *dst, const void *src, size_t bytes, const char *what)
{
    if (bytes > 0 && shim_gpu->memcpy_async(dst, src, bytes, shim_gpu_stream) != 0) {
        shim_gpu_die(what);
    }
    return MPI_SUCCESS;
}

/* The arrived elements go up to the scratch and are reduced into the result. */
static void shim_gpu_ring_flush(shim_gpu_ring_t *g)
{
    size_t off = (size_t)g->poff * g->ext;

    if (g->pcnt == 0) {
        return;
    }
    shim_gpu_ring_copy(g->scr, g->mirror + off, (size_t)g->pcnt * g->ext,
                       "copying arrived data to the device");
    if (shim_gpu->reduce(g->res + off, g->scr, (size_t)g->pcnt, g->dtype, g->op,
                         shim_gpu_stream) != 0) {
        shim_gpu_die("reducing on the device");
    }
    g->pcnt = 0;
}

static int shim_gpu_ring_own(void *arg, int off, int cnt)
{
    shim_gpu_ring_t *g = arg;

    if (g->own != g->res) {
        shim_gpu_ring_copy(g->res, g->own, (size_t)g->count * g->ext, "copying the input");
    }
    shim_gpu_ring_copy(g->mirror + (size_t)off * g->ext, g->own + (size_t)off * g->ext,
                       (size_t)cnt * g->ext, "copying the input to the host");
    if (shim_gpu->stream_sync(shim_gpu_stream) != 0) {
        shim_gpu_die("copying the input");
    }
    return MPI_SUCCESS;
}

static int shim_gpu_ring_reduce(void *arg, int off, int cnt)
{
    shim_gpu_ring_t *g = arg;

    if (g->pcnt > 0 && (g->poff + g->pcnt != off ||
                        (size_t)(g->pcnt + cnt) * g->ext > SHIM_GPU_CHUNK)) {
        shim_gpu_ring_flush(g);
    }
    if (g->pcnt == 0) {
        g->poff = off;
    }
    g->pcnt += cnt;
    if ((size_t)g->pcnt * g->ext == SHIM_GPU_CHUNK) {
        shim_gpu_ring_flush(g);
    }
    return MPI_SUCCESS;
}

static int shim_gpu_ring_fetch(void *arg, int off, int cnt)
{
    shim_gpu_ring_t *g = arg;

    shim_gpu_ring_flush(g);
    shim_gpu_ring_copy(g->mirror + (size_t)off * g->ext, g->res + (size_t)off * g->ext,
                       (size_t)cnt * g->ext, "copying a reduced block to the host");
    if (shim_gpu->stream_sync(shim_gpu_stream) != 0) {
        shim_gpu_die("reducing on the device");
    }
    return MPI_SUCCESS;
}

static int shim_gpu_ring_put(void *arg, int off, int cnt)
{
    shim_gpu_ring_t *g = arg;

    return shim_gpu_ring_copy(g->res + (size_t)off * g->ext, g->mirror + (size_t)off * g->ext,
                              (size_t)cnt * g->ext, "copying a result block to the device");
}

/*
 * The ring on the device when the host path would run the ring here (so the
 * messages are those of ranks with host buffers, which lets each rank pick
 * where it reduces on its own), the device reduces the type and op and the
 * call has AGG_GPU_HOST_REDUCE_MIN bytes.
 */
static int shim_gpu_ring_take(shim_call_t *c)
{
    int adt, aop, size = 0;

    if (c->request != NULL || c->route != SHIM_ROUTE_HOST || c->rmem == AGG_MEM_HOST) {
        return 0;
    }
    adt = shim_map_dtype(c->dtype);
    aop = shim_map_op(c->op);
    PMPI_Type_size(c->dtype, &size);
    return (long long)size * c->count >= shim_gpu_reduce_min && adt >= 0 && aop >= 0 &&
           shim_gpu->reduce_supported(adt, aop) &&
           shim_host_choose(&c->sc->tune, (size_t)size * (size_t)c->count, c->sc->size) ==
               SHIM_ALG_RING;
}

static int shim_gpu_ring_run(shim_call_t *c)
{
    shim_gpu_ring_t g = {.own = c->sbuf == MPI_IN_PLACE ? c->rbuf : c->sbuf, .res = c->rbuf};
    shim_host_dev_t dev = {&g, shim_gpu_ring_own, shim_gpu_ring_reduce, shim_gpu_ring_fetch,
                           shim_gpu_ring_put};
    MPI_Aint lb, ext = 0;
    agg_gpu_ptr_t q;
    int rc, cur = -1;

    if (agg_gpu_query(c->rbuf, &q) != 0 || q.device < 0 || q.device >= AGG_GPU_MAX_DEV ||
        shim_gpu->device_get(&cur) != 0) {
        return SHIM_CALL_NEXT; /* staged, as the host path would run it */
    }
    if (cur != q.device && shim_gpu->device_set(q.device) != 0) {
        shim_gpu_die("making the buffer's device current");
    }
    if (shim_gpu_scr[q.device] == NULL &&
        shim_gpu->dev_alloc(&shim_gpu_scr[q.device], SHIM_GPU_CHUNK) != 0) {
        shim_gpu_scr[q.device] = NULL;
        shim_gpu_die("device scratch for the ring");
    }
    PMPI_Type_get_extent(c->dtype, &lb, &ext); /* pairs: larger than their size */
    g.scr    = shim_gpu_scr[q.device];
    g.mirror = shim_gpu_in(1, c->rbuf, c->count, c->dtype, 0);
    g.ext    = (size_t)ext;
    g.count  = c->count;
    g.dtype  = shim_map_dtype(c->dtype);
    g.op     = shim_map_op(c->op);
    shim_count(c->fn, SHIM_PATH_GPU_RING, c->why);
    rc = shim_host_ring_dev(g.mirror, c->count, c->dtype, c->op, c->sc->pcomm, &dev);
    if (cur != q.device) {
        shim_gpu->device_set(cur);
    }
    return rc;
}

const shim_call_path_ops_t shim_path_gpu_ring = {"gpu_ring", shim_gpu_ring_take,
                                                 shim_gpu_ring_run};

/*
 * Device buffers the paths before did not take. Where Open MPI takes device
 * memory (CUDA-aware), only a blocking allreduce that the shim runs itself
 * (host algorithms, node leaders) is staged; the rest goes to Open MPI
 * with the device pointers.
 */
static int shim_gpu_stage_take(shim_call_t *c)
{
    if (c->smem == AGG_MEM_HOST && c->rmem == AGG_MEM_HOST) {
        return 0;
    }
    return !shim_gpu_mpi_aware || (c->coll == AGG_COLL_ALLREDUCE && c->request == NULL &&
                                   c->route != SHIM_ROUTE_MPI);
}

/*
 * The call again on host copies of its device buffers, from the first
 * path; the result copied back. A non-blocking one is complete when this
 * returns (its request is one that is done).
 */
static int shim_gpu_stage_run(shim_call_t *c)
{
    shim_call_t h = *c;
    int me = -1, size = 1, rc, in_place = c->sbuf == MPI_IN_PLACE, i;
    int scount = c->count, rcount = c->count, rin = in_place, rout = 1;
    MPI_Datatype stype = c->dtype;

    PMPI_Comm_rank(c->comm, &me);
    PMPI_Comm_size(c->comm, &size);
    switch (c->coll) {
    case AGG_COLL_REDUCE:
        rout = me == c->root; /* rbuf only matters at the root */
        rin  = rin && rout;
        break;
    case AGG_COLL_BCAST:
        rin  = me == c->root;
        rout = !rin;
        break;
    case AGG_COLL_REDUCE_SCATTER:
        scount = (int)c->total;
        rcount = in_place ? scount : c->mine; /* in place, rbuf holds every block on entry */
        break;
    case AGG_COLL_ALLGATHER:
        scount = c->scount;
        stype  = c->stype;
        rcount = c->displs != NULL ? 0 : c->count * size;
        for (i = 0; c->displs != NULL && i < size; ++i) { /* rbuf's reach */
            if (c->counts[i] > 0 && c->displs[i] + c->counts[i] > rcount) {
                rcount = c->displs[i] + c->counts[i];
            }
        }
        break;
    default:
        break;
    }
    if (c->smem != AGG_MEM_HOST) {
        h.sbuf = shim_gpu_in(0, c->sbuf, scount, stype, 1);
    }
    if (c->rmem != AGG_MEM_HOST) {
        h.rbuf = rin || rout ? shim_gpu_in(1, c->rbuf, rcount, c->dtype, rin) : NULL;
    }
    h.smem = h.rmem = AGG_MEM_HOST;
    rc = shim_call_walk(&h);
    if (rc == MPI_SUCCESS && c->request != NULL) {
        rc = MPI_Wait(c->request, MPI_STATUS_IGNORE); /* the shim's: offloaded ones too */
    }
    if (rc == MPI_SUCCESS && rout && c->rmem != AGG_MEM_HOST) {
        shim_gpu_out(1, c->rbuf, c->coll == AGG_COLL_REDUCE_SCATTER ? c->mine : rcount,
                     c->dtype);
    }
    if (rc == MPI_SUCCESS && c->request != NULL) {
        rc = PMPI_Ibarrier(MPI_COMM_SELF, c->request); /* a request that is complete */
    }
    return rc;
}

const shim_call_path_ops_t shim_path_stage = {"stage", shim_gpu_stage_take, shim_gpu_stage_run};
