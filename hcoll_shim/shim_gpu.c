/*
 * Device buffers in the intercepted collectives. Allreduce, reduce and
 * bcast of a contiguous predefined type go to the network with their
 * buffers marked as device memory, and libagg stages them (pipelined).
 * Whatever cannot go there runs where it would for host buffers: on an
 * Open MPI that takes device memory (CUDA-aware), with the device
 * pointers; otherwise through host copies of the buffers, re-entering the
 * same call, so that every rank takes the same path and algorithm whatever
 * memory its buffers are in.
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

/*
 * Set while a staged call re-enters MPI with host copies: those are never
 * device buffers. (The runtime may place pinned host memory where a freed
 * device allocation was, which the cache of device allocations cannot see.)
 */
static __thread int shim_gpu_inner;

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

int shim_gpu_dev(const void *p)
{
    agg_gpu_ptr_t q;

    if (shim_gpu == NULL || shim_gpu_inner || p == NULL || p == MPI_IN_PLACE ||
        agg_gpu_query(p, &q) != 0) {
        return 0;
    }
    return q.mem == AGG_GPU_MEM_DEVICE || q.mem == AGG_GPU_MEM_MANAGED;
}

agg_mem_type_t shim_gpu_mem(const void *p)
{
    return shim_gpu_dev(p) ? (agg_mem_type_t)shim_gpu->mem_type : AGG_MEM_HOST;
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

/* A non-blocking call done at once: a request that is already complete. */
static int shim_gpu_nop_query(void *s, MPI_Status *st)
{
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG    = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int shim_gpu_nop_free(void *s)
{
    return MPI_SUCCESS;
}

static int shim_gpu_nop_cancel(void *s, int done)
{
    return MPI_SUCCESS;
}

static int shim_gpu_done(int rc, MPI_Request *request)
{
    if (request != NULL && rc == MPI_SUCCESS) {
        rc = PMPI_Grequest_start(shim_gpu_nop_query, shim_gpu_nop_free, shim_gpu_nop_cancel,
                                 NULL, request);
        if (rc == MPI_SUCCESS) {
            rc = PMPI_Grequest_complete(*request);
        }
    }
    return rc;
}

/*
 * The network, when the call can go there as it is: AGG_OK (done, or
 * posted on *request), else an error and the caller stages.
 */
static agg_status_t shim_gpu_net(agg_coll_type_t coll, shim_comm_t *sc, agg_reduce_spec_t *spec,
                                 MPI_Request *request, int *posted)
{
    agg_request_t *req = NULL;
    agg_status_t st;

    spec->sbuf_mem = shim_gpu_mem(spec->sbuf);
    spec->rbuf_mem = shim_gpu_mem(spec->rbuf);
    st = coll == AGG_COLL_ALLREDUCE ? agg_iallreduce(sc->agg, spec, &req)
                                    : agg_ireduce(sc->agg, spec, &req);
    *posted = st == AGG_OK;
    if (st != AGG_OK) {
        return st; /* the arguments: alike on every rank, nothing written */
    }
    if (request != NULL) {
        shim_ireq_start(sc, coll, req, NULL, request);
        return AGG_OK;
    }
    return shim_net_wait(coll, req);
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
 * call has AGG_GPU_HOST_REDUCE_MIN bytes; else 0 and nothing done. *rc: the
 * call's MPI result.
 */
static int shim_gpu_ring(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype, MPI_Op op,
                         shim_comm_t *sc, shim_why_t why, int *rc)
{
    shim_gpu_ring_t g = {.own = sbuf == MPI_IN_PLACE ? rbuf : sbuf, .res = rbuf};
    shim_host_dev_t dev = {&g, shim_gpu_ring_own, shim_gpu_ring_reduce, shim_gpu_ring_fetch,
                           shim_gpu_ring_put};
    int adt = shim_map_dtype(dtype), aop = shim_map_op(op), size = 0, cur = -1;
    MPI_Aint lb, ext = 0;
    agg_gpu_ptr_t q;

    PMPI_Type_size(dtype, &size);
    PMPI_Type_get_extent(dtype, &lb, &ext); /* pairs: larger than their size */
    if ((long long)size * count < shim_gpu_reduce_min || !shim_gpu_dev(rbuf) || adt < 0 ||
        aop < 0 || !shim_gpu->reduce_supported(adt, aop) ||
        shim_host_choose(&sc->tune, (size_t)size * (size_t)count, sc->size) != SHIM_ALG_RING ||
        agg_gpu_query(rbuf, &q) != 0 || q.device < 0 || q.device >= AGG_GPU_MAX_DEV ||
        shim_gpu->device_get(&cur) != 0) {
        return 0;
    }
    if (cur != q.device && shim_gpu->device_set(q.device) != 0) {
        shim_gpu_die("making the buffer's device current");
    }
    if (shim_gpu_scr[q.device] == NULL &&
        shim_gpu->dev_alloc(&shim_gpu_scr[q.device], SHIM_GPU_CHUNK) != 0) {
        shim_gpu_scr[q.device] = NULL;
        shim_gpu_die("device scratch for the ring");
    }
    g.scr    = shim_gpu_scr[q.device];
    g.mirror = shim_gpu_in(1, rbuf, count, dtype, 0);
    g.ext    = (size_t)ext;
    g.count  = count;
    g.dtype  = adt;
    g.op     = aop;
    shim_count(AGG_COLL_ALLREDUCE, SHIM_PATH_GPU_RING, why);
    *rc = shim_host_ring_dev(g.mirror, count, dtype, op, sc->pcomm, &dev);
    if (cur != q.device) {
        shim_gpu->device_set(cur);
    }
    return 1;
}

int shim_gpu_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype, MPI_Op op,
                       MPI_Comm comm, MPI_Request *request)
{
    agg_reduce_spec_t spec;
    shim_comm_t *sc = request != NULL ? shim_comm_peek(comm) : shim_comm_get(comm);
    shim_why_t why;
    shim_route_t r;
    void *hs, *hr;
    int rc, posted = 0;

    r = shim_route_reduce(AGG_COLL_ALLREDUCE, sbuf, rbuf, count, dtype, op, sc, &spec, &why);
    if (r == SHIM_ROUTE_NET && !sc->hier) {
        if (shim_gpu_net(AGG_COLL_ALLREDUCE, sc, &spec, request, &posted) == AGG_OK) {
            return MPI_SUCCESS;
        }
        if (posted && sbuf == MPI_IN_PLACE) {
            /* some results may be in rbuf already: its input is gone (as on the host) */
            agg_error("in-place allreduce of a device buffer failed in the network");
            shim_count(AGG_COLL_ALLREDUCE, SHIM_PATH_MPI, SHIM_WHY_NETWORK_ERROR);
            PMPI_Comm_call_errhandler(comm, MPI_ERR_INTERN);
            return MPI_ERR_INTERN;
        }
        r   = SHIM_ROUTE_HOST; /* as ranks with host buffers go on */
        why = SHIM_WHY_NETWORK_ERROR;
    }
    if (request != NULL) {
        /* as MPI_Iallreduce on host buffers: Open MPI's, on the same communicator */
        why = r == SHIM_ROUTE_NET ? SHIM_WHY_LEADERS : why; /* hier: the leaders' steps block */
        r   = SHIM_ROUTE_MPI;
    } else if (r == SHIM_ROUTE_HOST &&
               shim_gpu_ring(sbuf, rbuf, count, dtype, op, sc, why, &rc)) {
        return rc;
    }
    if (r == SHIM_ROUTE_MPI && shim_gpu_mpi_aware) {
        shim_count(AGG_COLL_ALLREDUCE, SHIM_PATH_MPI, why);
        return request != NULL ? PMPI_Iallreduce(sbuf, rbuf, count, dtype, op, comm, request)
                               : PMPI_Allreduce(sbuf, rbuf, count, dtype, op, comm);
    }
    hs = sbuf == MPI_IN_PLACE ? MPI_IN_PLACE : shim_gpu_in(0, sbuf, count, dtype, 1);
    hr = shim_gpu_in(1, rbuf, count, dtype, sbuf == MPI_IN_PLACE);
    shim_gpu_inner = 1;
    if (request != NULL) {
        shim_count(AGG_COLL_ALLREDUCE, SHIM_PATH_MPI, why);
        rc = PMPI_Iallreduce(hs, hr, count, dtype, op, comm, request);
        rc = rc == MPI_SUCCESS ? PMPI_Wait(request, MPI_STATUS_IGNORE) : rc;
    } else {
        rc = r == SHIM_ROUTE_HOST ? shim_allreduce_host(hs, hr, count, dtype, op, sc, why)
                                  : MPI_Allreduce(hs, hr, count, dtype, op, comm);
    }
    shim_gpu_inner = 0;
    if (rc == MPI_SUCCESS) {
        shim_gpu_out(1, rbuf, count, dtype);
    }
    return shim_gpu_done(rc, request);
}

int shim_gpu_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype, MPI_Op op,
                    int root, MPI_Comm comm, MPI_Request *request)
{
    agg_reduce_spec_t spec;
    shim_comm_t *sc = request != NULL ? shim_comm_peek(comm) : shim_comm_get(comm);
    shim_why_t why;
    void *hs, *hr = NULL;
    int rc, me = -1, posted;

    PMPI_Comm_rank(comm, &me);
    if (shim_reduce_route(sbuf, rbuf, count, dtype, op, root, sc, &spec, &why) ==
            SHIM_ROUTE_NET && sbuf != MPI_IN_PLACE &&
        shim_gpu_net(AGG_COLL_REDUCE, sc, &spec, request, &posted) == AGG_OK) {
        return MPI_SUCCESS;
    }
    if (shim_gpu_mpi_aware) {
        shim_count(AGG_COLL_REDUCE, SHIM_PATH_MPI, why);
        return request != NULL ? PMPI_Ireduce(sbuf, rbuf, count, dtype, op, root, comm, request)
                               : PMPI_Reduce(sbuf, rbuf, count, dtype, op, root, comm);
    }
    hs = sbuf == MPI_IN_PLACE ? MPI_IN_PLACE : shim_gpu_in(0, sbuf, count, dtype, 1);
    if (me == root) {
        hr = shim_gpu_in(1, rbuf, count, dtype, sbuf == MPI_IN_PLACE);
    }
    shim_gpu_inner = 1;
    rc = MPI_Reduce(hs, hr, count, dtype, op, root, comm);
    shim_gpu_inner = 0;
    if (rc == MPI_SUCCESS && me == root) {
        shim_gpu_out(1, rbuf, count, dtype);
    }
    return shim_gpu_done(rc, request);
}

int shim_gpu_bcast(void *buf, int count, MPI_Datatype dtype, int root, MPI_Comm comm,
                   MPI_Request *request)
{
    long long bytes = shim_dtype_bytes(dtype, count);
    shim_comm_t *sc = request != NULL ? shim_comm_peek(comm) : shim_comm_get(comm);
    agg_data_spec_t spec = {.rbuf = buf, .bytes = (size_t)bytes, .root = root};
    agg_request_t *req = NULL;
    shim_why_t why;
    void *hb;
    int rc, me = -1;

    PMPI_Comm_rank(comm, &me);
    if (bytes > 0 && shim_bcast_route(count, dtype, root, sc, &why) == SHIM_ROUTE_NET &&
        !sc->hier) {
        spec.rbuf_mem = shim_gpu_mem(buf);
        if (agg_ibcast(sc->agg, &spec, &req) == AGG_OK) {
            if (request != NULL) {
                shim_ireq_start(sc, AGG_COLL_BCAST, req, NULL, request);
                return MPI_SUCCESS;
            }
            if (shim_net_wait(AGG_COLL_BCAST, req) == AGG_OK) {
                return MPI_SUCCESS;
            }
        }
    }
    if (shim_gpu_mpi_aware) {
        shim_count(AGG_COLL_BCAST, SHIM_PATH_MPI, SHIM_WHY_NONE);
        return request != NULL ? PMPI_Ibcast(buf, count, dtype, root, comm, request)
                               : PMPI_Bcast(buf, count, dtype, root, comm);
    }
    hb = shim_gpu_in(0, buf, count, dtype, me == root);
    shim_gpu_inner = 1;
    rc = MPI_Bcast(hb, count, dtype, root, comm);
    shim_gpu_inner = 0;
    if (rc == MPI_SUCCESS && me != root) {
        shim_gpu_out(0, buf, count, dtype);
    }
    return shim_gpu_done(rc, request);
}

int shim_gpu_allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                       MPI_Datatype rtype, MPI_Comm comm)
{
    int size = 1, rc;
    void *hs, *hr;

    if (shim_gpu_mpi_aware) {
        shim_count(AGG_COLL_ALLGATHER, SHIM_PATH_MPI, SHIM_WHY_NONE);
        return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
    }
    PMPI_Comm_size(comm, &size);
    hs = sbuf == MPI_IN_PLACE ? MPI_IN_PLACE : shim_gpu_in(0, sbuf, scount, stype, 1);
    hr = shim_gpu_in(1, rbuf, rcount * size, rtype, sbuf == MPI_IN_PLACE);
    shim_gpu_inner = 1;
    rc = MPI_Allgather(hs, scount, stype, hr, rcount, rtype, comm);
    shim_gpu_inner = 0;
    if (rc == MPI_SUCCESS) {
        shim_gpu_out(1, rbuf, rcount * size, rtype);
    }
    return rc;
}

int shim_gpu_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dtype,
                                  MPI_Op op, MPI_Comm comm)
{
    int size = 1, rc;
    void *hs, *hr;

    if (shim_gpu_mpi_aware) {
        shim_count(AGG_COLL_REDUCE_SCATTER, SHIM_PATH_MPI, SHIM_WHY_NONE);
        return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dtype, op, comm);
    }
    PMPI_Comm_size(comm, &size);
    hs = sbuf == MPI_IN_PLACE ? MPI_IN_PLACE : shim_gpu_in(0, sbuf, rcount * size, dtype, 1);
    /* in place, rbuf holds every block on entry */
    hr = shim_gpu_in(1, rbuf, sbuf == MPI_IN_PLACE ? rcount * size : rcount, dtype,
                     sbuf == MPI_IN_PLACE);
    shim_gpu_inner = 1;
    rc = MPI_Reduce_scatter_block(hs, hr, rcount, dtype, op, comm);
    shim_gpu_inner = 0;
    if (rc == MPI_SUCCESS) {
        shim_gpu_out(1, rbuf, rcount, dtype);
    }
    return rc;
}
