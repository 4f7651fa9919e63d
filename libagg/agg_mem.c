/*
 * Memory registration with a registration cache (SHARP's reg_mr/dereg_mr,
 * UCX's rcache). A registration covers whole pages; registering a range
 * inside one already held returns that one (a hit), and a registration
 * given back stays cached, unreferenced, until the cache is full, so a
 * program that registers the same buffer for every call pays once.
 *
 * What registering does depends on the memory: host memory is checked to
 * be mapped and readable here (a bad pointer is an error at registration,
 * not a fault in the middle of a collective) and, where RLIMIT_MEMLOCK
 * allows, locked in RAM so that a transport reading it from another
 * process (zero copy) never waits for it to be paged in.
 *
 * Entries are kept sorted by start address; lookups are a binary search.
 */
#include "agg_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agg/gpu.h"
#include "agg/log.h"

struct agg_mem_reg {
    uintptr_t      start; /* page aligned */
    size_t         length;
    agg_mem_type_t mem;
    int            locked; /* mlock succeeded */
    int            dmabuf; /* device memory exported for GPU-direct, or -1 */
    unsigned       refs;   /* 0: cached, not held */
    uint64_t       used;   /* LRU clock of the last registration */
};

#define AGG__RCACHE_MAX 256 /* registrations kept; unreferenced ones are evicted first */

typedef struct agg__rcache {
    agg_mem_reg_t *regs[AGG__RCACHE_MAX];
    unsigned       num;
    uint64_t       clock;
    int            gdr;    /* SHARP_COLL_ENABLE_GPU_DIRECT_RDMA */
    agg_mem_stats_t stats;
} agg__rcache_t;

static size_t agg__page(void)
{
    static size_t page;

    if (page == 0) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

/* First entry whose start is >= addr. */
static unsigned agg__rcache_lower(const agg__rcache_t *rc, uintptr_t addr)
{
    unsigned lo = 0, hi = rc->num;

    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;

        if (rc->regs[mid]->start < addr) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* A cached registration of this memory type covering [start, end), or NULL. */
static agg_mem_reg_t *agg__rcache_find(agg__rcache_t *rc, uintptr_t start, uintptr_t end,
                                       agg_mem_type_t mem)
{
    unsigned i = agg__rcache_lower(rc, start + 1);

    /* candidates start at or before `start` (the cache is small: walk them) */
    while (i-- > 0) {
        agg_mem_reg_t *r = rc->regs[i];

        if (r->start + r->length >= end && r->mem == mem) {
            return r;
        }
    }
    return NULL;
}

static void agg__reg_release(agg_mem_reg_t *r)
{
    if (r->locked) {
        munlock((void *)r->start, r->length);
    }
    if (r->dmabuf >= 0) {
        close(r->dmabuf);
    }
    free(r);
}

/* Makes room for one more entry: evicts the least recently used unreferenced one. */
static agg_status_t agg__rcache_room(agg__rcache_t *rc)
{
    unsigned i, victim = rc->num;

    if (rc->num < AGG__RCACHE_MAX) {
        return AGG_OK;
    }
    for (i = 0; i < rc->num; ++i) {
        if (rc->regs[i]->refs == 0 &&
            (victim == rc->num || rc->regs[i]->used < rc->regs[victim]->used)) {
            victim = i;
        }
    }
    if (victim == rc->num) {
        return AGG_ERR_NO_RESOURCE; /* every registration is held */
    }
    for (i = 0; i < rc->num; ++i) {
        const agg_mem_reg_t *o = rc->regs[i], *v = rc->regs[victim];

        if (i != victim && o->start < v->start + v->length && v->start < o->start + o->length) {
            rc->regs[victim]->locked = 0; /* mlock does not nest: o still needs its pages */
        }
    }
    agg__reg_release(rc->regs[victim]);
    memmove(&rc->regs[victim], &rc->regs[victim + 1],
            (rc->num - victim - 1) * sizeof(rc->regs[0]));
    rc->num--;
    rc->stats.evictions++;
    return AGG_OK;
}

/* Host memory must be mapped and readable: ask the kernel, never touch it. */
static int agg__host_mapped(uintptr_t start, size_t length)
{
    size_t page = agg__page(), pages = length / page, i;
    unsigned char vec[64];

    for (i = 0; i < pages; i += sizeof(vec)) {
        size_t n = pages - i < sizeof(vec) ? pages - i : sizeof(vec);

        if (mincore((void *)(start + i * page), n * page, vec) != 0 && errno == ENOMEM) {
            return 0;
        }
    }
    return 1;
}

/*
 * Device memory: it must be the runtime's, and with GPU-direct allowed it is
 * exported as a dma-buf for a transport that can import one (*fd). The
 * shared-memory transport cannot, so its data is staged either way.
 */
static agg_status_t agg__reg_device(const agg__rcache_t *rc, uintptr_t start, size_t length,
                                    agg_mem_type_t mem, int *fd)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    agg_gpu_ptr_t q;
    uint64_t off;

    if ((unsigned)mem > AGG_MEM_ROCM) {
        agg__set_last_error("agg_mem_register: memory type %d is not host, CUDA or ROCm",
                            (int)mem);
        return AGG_ERR_INVALID_PARAM;
    }
    if (o == NULL || o->mem_type != (int)mem) {
        agg__set_last_error("agg_mem_register: %s memory, but %s", mem == AGG_MEM_CUDA ?
                            "CUDA" : "ROCm", o == NULL ? agg_gpu_why() :
                            "the GPU backend loaded is the other vendor's");
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (agg_gpu_query((const void *)start, &q) != 0 ||
        (q.mem != AGG_GPU_MEM_DEVICE && q.mem != AGG_GPU_MEM_MANAGED) ||
        (q.size > 0 && (start < q.base || start + length > q.base + q.size))) {
        agg__set_last_error("agg_mem_register: [0x%lx, +%zu) is not one %s allocation",
                            (unsigned long)start, length, o->name);
        return AGG_ERR_INVALID_PARAM;
    }
    if (rc->gdr == 0 || q.mem != AGG_GPU_MEM_DEVICE) {
        return AGG_OK;
    }
    if (o->dmabuf_export((const void *)start, length, fd, &off) != 0) {
        *fd = -1;
        if (rc->gdr == 1) {
            agg__set_last_error("agg_mem_register: SHARP_COLL_ENABLE_GPU_DIRECT_RDMA=1 but "
                                "device memory cannot be exported as a dma-buf: %s",
                                o->error());
            return AGG_ERR_NOT_SUPPORTED;
        }
        agg_debug("no dma-buf for device memory (%s): staged", o->error());
    }
    return AGG_OK;
}

static agg_status_t agg__reg_new(agg__rcache_t *rc, uintptr_t start, size_t length,
                                 agg_mem_type_t mem, agg_mem_reg_t **out)
{
    agg_mem_reg_t *r;
    unsigned at;

    int fd = -1;
    agg_status_t st;

    if (mem != AGG_MEM_HOST) {
        st = agg__reg_device(rc, start, length, mem, &fd);
        if (st != AGG_OK) {
            return st;
        }
    } else if (!agg__host_mapped(start, length)) {
        agg__set_last_error("agg_mem_register: [0x%lx, +%zu) is not mapped memory",
                            (unsigned long)start, length);
        return AGG_ERR_INVALID_PARAM;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL || agg__rcache_room(rc) != AGG_OK) {
        if (fd >= 0) {
            close(fd);
        }
        st = r == NULL ? AGG_ERR_NO_MEMORY : AGG_ERR_NO_RESOURCE;
        free(r);
        return st;
    }
    r->start  = start;
    r->length = length;
    r->mem    = mem;
    r->dmabuf = fd;
    rc->stats.dmabuf += fd >= 0;
    /* best effort: RLIMIT_MEMLOCK */
    r->locked = mem == AGG_MEM_HOST && mlock((void *)start, length) == 0;
    rc->stats.locked_bytes += r->locked ? length : 0;
    at = agg__rcache_lower(rc, start);
    memmove(&rc->regs[at + 1], &rc->regs[at], (rc->num - at) * sizeof(rc->regs[0]));
    rc->regs[at] = r;
    rc->num++;
    *out = r;
    return AGG_OK;
}

agg_status_t agg_mem_register(agg_context_t *ctx, const void *addr, size_t length,
                              agg_mem_type_t mem, agg_mem_reg_t **reg)
{
    size_t page = agg__page();
    uintptr_t start, end;
    agg__rcache_t *rc;
    agg_mem_reg_t *r;
    agg_status_t st = AGG_OK;

    if (ctx == NULL || addr == NULL || length == 0 || reg == NULL ||
        (uintptr_t)addr + length < (uintptr_t)addr) {
        return AGG_ERR_INVALID_PARAM;
    }
    start = (uintptr_t)addr & ~(uintptr_t)(page - 1);
    end   = ((uintptr_t)addr + length + page - 1) & ~(uintptr_t)(page - 1);
    if (mem != AGG_MEM_HOST) {
        start = (uintptr_t)addr; /* a device allocation need not start on a host page */
        end   = start + length;
    }
    agg__ctx_lock(ctx);
    rc = ctx->rcache;
    if (rc == NULL) {
        rc = ctx->rcache = calloc(1, sizeof(*rc));
        if (rc != NULL) {
            rc->gdr = (int)agg_conf_int(&ctx->conf, AGG_CONF_GPU_DIRECT_RDMA);
        }
    }
    if (rc == NULL) {
        st = AGG_ERR_NO_MEMORY;
        goto out;
    }
    r = agg__rcache_find(rc, start, end, mem);
    if (r != NULL) {
        rc->stats.hits++;
    } else {
        st = agg__reg_new(rc, start, end - start, mem, &r);
        if (st != AGG_OK) {
            goto out;
        }
        rc->stats.misses++;
    }
    r->refs++;
    r->used = ++rc->clock;
    *reg    = r;
out:
    agg__ctx_unlock(ctx);
    return st;
}

agg_status_t agg_mem_deregister(agg_context_t *ctx, agg_mem_reg_t *reg)
{
    agg_status_t st = AGG_ERR_INVALID_PARAM;
    agg__rcache_t *rc;
    unsigned i;

    if (ctx == NULL || reg == NULL) {
        return st;
    }
    agg__ctx_lock(ctx);
    rc = ctx->rcache;
    for (i = 0; rc != NULL && i < rc->num; ++i) {
        if (rc->regs[i] == reg && reg->refs > 0) {
            reg->refs--; /* stays cached for the next registration of it */
            st = AGG_OK;
            break;
        }
    }
    agg__ctx_unlock(ctx);
    return st;
}

agg_status_t agg_mem_stats(agg_context_t *ctx, agg_mem_stats_t *stats)
{
    agg__rcache_t *rc;
    unsigned i;

    if (ctx == NULL || stats == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    agg__ctx_lock(ctx);
    rc = ctx->rcache;
    memset(stats, 0, sizeof(*stats));
    if (rc != NULL) {
        *stats = rc->stats;
        for (i = 0; i < rc->num; ++i) {
            stats->cached++;
            stats->held += rc->regs[i]->refs > 0;
        }
    }
    agg__ctx_unlock(ctx);
    return AGG_OK;
}

void agg__rcache_free(agg_context_t *ctx)
{
    agg__rcache_t *rc = ctx->rcache;
    unsigned i;

    if (rc == NULL) {
        return;
    }
    for (i = 0; i < rc->num; ++i) {
        if (rc->regs[i]->refs > 0) {
            agg_debug("registration of %zu bytes still held at finalize", rc->regs[i]->length);
        }
        agg__reg_release(rc->regs[i]);
    }
    free(rc);
    ctx->rcache = NULL;
}
