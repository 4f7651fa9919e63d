/*
 * The runtime half of a GPU backend: agg_gpu_ops_t (agg/gpu.h) over the CUDA
 * runtime, or over HIP when hipcc compiles this same file. libagg dlopens
 * the shared object and calls agg_gpu_backend(); nothing else is exported.
 *
 * Every failure leaves a sentence naming the runtime call and its error in
 * a thread-local buffer, for ops->error(). Void ops (the frees and destroys)
 * have nowhere to report, so they clear the runtime's last error instead of
 * leaving it for an unrelated later call to find.
 */
#include "agg_gpu_compat.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


namespace {

thread_local char agg__err[320];

__attribute__((format(printf, 1, 2))) int agg__fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(agg__err, sizeof(agg__err), fmt, ap);
    va_end(ap);
    return -1;
}

/* "out of memory (cudaErrorMemoryAllocation)"; HIP 5 gives the name twice. */
const char *agg__rt_str(gpuError_t e, char *buf, size_t len)
{
    const char *s = gpuGetErrorString(e), *n = gpuGetErrorName(e);

    if (strcmp(s, n) == 0) {
        return s;
    }
    snprintf(buf, len, "%s (%s)", s, n);
    return buf;
}

/* "cudaMalloc failed: out of memory (cudaErrorMemoryAllocation)". */
int agg__rt_fail(const char *call, gpuError_t e)
{
    char buf[200];

    return agg__fail("%s failed: %s", call, agg__rt_str(e, buf, sizeof(buf)));
}

/* Checks one runtime call, naming it by its real name in the sentence. */
#define AGG__CHECK(_fn, _args)                                                \
    do {                                                                      \
        gpuError_t _e = _fn _args;                                            \
        if (_e != gpuSuccess) {                                               \
            return agg__rt_fail(AGG_GPU_STR(_fn), _e);                        \
        }                                                                     \
    } while (0)

#if !AGG_GPU_HIP
/* The driver API, for what the runtime API does not offer. */
int agg__cu_fail(const char *call, CUresult r)
{
    const char *s = NULL;

    if (cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL) {
        s = "unknown driver error";
    }
    return agg__fail("%s failed: %s (CUresult %d)", call, s, (int)r);
}

/*
 * Driver calls act on the thread's current context, which the runtime only
 * makes current when one of its own calls needs it: bind the primary
 * context of the current device first (what the runtime would do anyway).
 */
int agg__cu_context(void)
{
    CUcontext ctx = NULL;
    int       dev;

    if (cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != NULL) {
        return 0;
    }
    AGG__CHECK(cudaGetDevice, (&dev));
    AGG__CHECK(cudaSetDevice, (dev));
    return 0;
}
#endif

/* ---- devices ----------------------------------------------------------- */

int agg__init(int *count)
{
    int        n = 0;
    char       buf[200];
    gpuError_t e = gpuGetDeviceCount(&n);

    if (e != gpuSuccess) {
        (void)gpuGetLastError();
        return agg__fail("no %s device: %s says %s", AGG_GPU_RT_HUMAN,
                         AGG_GPU_STR(gpuGetDeviceCount), agg__rt_str(e, buf, sizeof(buf)));
    }
    if (n <= 0) {
        return agg__fail("no %s device: %s found none", AGG_GPU_RT_HUMAN,
                         AGG_GPU_STR(gpuGetDeviceCount));
    }
    *count = n;
    return 0;
}

const char *agg__error(void)
{
    return agg__err;
}

int agg__device_get(int *dev)
{
    AGG__CHECK(gpuGetDevice, (dev));
    return 0;
}

int agg__device_set(int dev)
{
    AGG__CHECK(gpuSetDevice, (dev));
    return 0;
}

int agg__attr(int *v, int attr, int dev, const char *what)
{
    gpuError_t e = gpuDeviceGetAttribute(v, (decltype(gpuDevAttrMultiProcessorCount))attr, dev);
    char       buf[200];

    if (e != gpuSuccess) {
        return agg__fail("%s(%s) failed: %s", AGG_GPU_STR(gpuDeviceGetAttribute), what,
                         agg__rt_str(e, buf, sizeof(buf)));
    }
    return 0;
}

int agg__device_info(int dev, agg_gpu_dev_info_t *info)
{
    gpuDeviceProp      prop;
    agg_gpu_dev_info_t d;

    memset(&d, 0, sizeof(d));
    AGG__CHECK(gpuGetDeviceProperties, (&prop, dev));
    snprintf(d.name, sizeof(d.name), "%.*s", (int)sizeof(d.name) - 1, prop.name);
    d.total_mem = prop.totalGlobalMem;
    AGG__CHECK(gpuDeviceGetPCIBusId, (d.pci_bus_id, (int)sizeof(d.pci_bus_id), dev));
    if (agg__attr(&d.cc_major, gpuDevAttrComputeCapabilityMajor, dev, "cc major") ||
        agg__attr(&d.cc_minor, gpuDevAttrComputeCapabilityMinor, dev, "cc minor") ||
        agg__attr(&d.multiprocessors, gpuDevAttrMultiProcessorCount, dev, "multiprocessors") ||
        agg__attr(&d.pageable_access, gpuDevAttrPageableMemoryAccess, dev, "pageable access") ||
        agg__attr(&d.can_map_host, gpuDevAttrCanMapHostMemory, dev, "can map host memory")) {
        return -1;
    }
#if AGG_GPU_HIP
    /* HIP 5.2 answers this attribute for CUDA only; ROCm on 64-bit Linux always is. */
    d.unified_addressing = 1;
    d.dmabuf_supported   = 0; /* no export call in this HIP (agg__dmabuf_export) */
#else
    if (agg__attr(&d.unified_addressing, cudaDevAttrUnifiedAddressing, dev, "unified addressing")) {
        return -1;
    }
    {
        CUdevice cu;
        CUresult r = cuDeviceGet(&cu, dev);
        if (r != CUDA_SUCCESS) {
            return agg__cu_fail("cuDeviceGet", r);
        }
        /* Older drivers do not know the attribute: then it is not supported. */
        if (cuDeviceGetAttribute(&d.dmabuf_supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, cu) !=
            CUDA_SUCCESS) {
            d.dmabuf_supported = 0;
        }
    }
#endif
    *info = d;
    return 0;
}

/* ---- pointers ---------------------------------------------------------- */

/* The allocation holding p, for DEVICE and MANAGED pointers; 0, 0 if unknown. */
void agg__range(const void *p, uintptr_t *base, size_t *size)
{
    *base = 0;
    *size = 0;
#if AGG_GPU_HIP
    hipDeviceptr_t b = NULL;
    size_t         s = 0;
    if (hipMemGetAddressRange(&b, &s, (hipDeviceptr_t)p) == hipSuccess) {
        *base = (uintptr_t)b;
        *size = s;
    } else {
        (void)hipGetLastError();
    }
#else
    CUdeviceptr          b = 0;
    size_t               s = 0;
    CUpointer_attribute  attrs[2] = { CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                      CU_POINTER_ATTRIBUTE_RANGE_SIZE };
    void                *vals[2]  = { &b, &s };
    if (agg__cu_context() == 0 &&
        cuPointerGetAttributes(2, attrs, vals, (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS) {
        *base = (uintptr_t)b;
        *size = s;
    }
#endif
}

int agg__ptr_query(const void *p, agg_gpu_ptr_t *out)
{
    gpuPointerAttributes a;
    agg_gpu_ptr_t        r = { AGG_GPU_MEM_HOST, -1, 0, 0 };
    gpuError_t           e;

    memset(&a, 0, sizeof(a));
    e = gpuPointerGetAttributes(&a, p);
    if (e != gpuSuccess) {
        /*
         * Plain host memory the runtime never saw (HIP; CUDA before 11
         * too). The failed query also sets the runtime's last error, which
         * would otherwise surface in the next unrelated check.
         */
        (void)gpuGetLastError();
        if (e != AGG_GPU_PTR_UNKNOWN_ERR) {
            return agg__rt_fail(AGG_GPU_STR(gpuPointerGetAttributes), e);
        }
        *out = r;
        return 0;
    }
#if AGG_GPU_HIP && HIP_VERSION_MAJOR < 6
    /* HIP 5: memoryType says where the memory is, isManaged the rest. */
    if (a.isManaged) {
        r.mem = AGG_GPU_MEM_MANAGED;
    } else if (a.memoryType == hipMemoryTypeDevice) {
        r.mem = AGG_GPU_MEM_DEVICE;
    } else if (a.memoryType == hipMemoryTypeHost) {
        r.mem = AGG_GPU_MEM_PINNED;
    }
#else
    /* CUDA, and HIP 6 (which took CUDA's names and values). */
    switch (a.type) {
    case AGG_GPU_MEMTYPE(Host):    r.mem = AGG_GPU_MEM_PINNED; break;
    case AGG_GPU_MEMTYPE(Device):  r.mem = AGG_GPU_MEM_DEVICE; break;
    case AGG_GPU_MEMTYPE(Managed): r.mem = AGG_GPU_MEM_MANAGED; break;
    default:                       r.mem = AGG_GPU_MEM_HOST; break; /* unregistered */
    }
#endif
    if (r.mem == AGG_GPU_MEM_DEVICE || r.mem == AGG_GPU_MEM_MANAGED) {
        r.device = a.device;
        agg__range(p, &r.base, &r.size);
    }
    *out = r;
    return 0;
}

/* ---- streams and events ----------------------------------------------- */

int agg__stream_create(void **stream)
{
    gpuStream_t s;

    AGG__CHECK(gpuStreamCreateWithFlags, (&s, gpuStreamNonBlocking));
    *stream = (void *)s;
    return 0;
}

void agg__stream_destroy(void *stream)
{
    if (stream != NULL && gpuStreamDestroy((gpuStream_t)stream) != gpuSuccess) {
        (void)gpuGetLastError();
    }
}

int agg__stream_sync(void *stream)
{
    AGG__CHECK(gpuStreamSynchronize, ((gpuStream_t)stream));
    return 0;
}

int agg__event_create(void **event)
{
    gpuEvent_t ev;

    AGG__CHECK(gpuEventCreateWithFlags, (&ev, gpuEventDisableTiming));
    *event = (void *)ev;
    return 0;
}

void agg__event_destroy(void *event)
{
    if (event != NULL && gpuEventDestroy((gpuEvent_t)event) != gpuSuccess) {
        (void)gpuGetLastError();
    }
}

int agg__event_record(void *event, void *stream)
{
    AGG__CHECK(gpuEventRecord, ((gpuEvent_t)event, (gpuStream_t)stream));
    return 0;
}

int agg__event_query(void *event)
{
    gpuError_t e = gpuEventQuery((gpuEvent_t)event);

    if (e == gpuSuccess) {
        return 1;
    }
    if (e == gpuErrorNotReady) {
        (void)gpuGetLastError(); /* "not ready" is no error; keep it out of later checks */
        return 0;
    }
    return agg__rt_fail(AGG_GPU_STR(gpuEventQuery), e);
}

/* ---- memory ------------------------------------------------------------ */

int agg__host_alloc(void **p, size_t bytes)
{
    AGG__CHECK(gpuHostAlloc, (p, bytes, gpuHostAllocPortable));
    return 0;
}

void agg__host_free(void *p)
{
    if (p != NULL && gpuFreeHost(p) != gpuSuccess) {
        (void)gpuGetLastError();
    }
}

int agg__dev_alloc(void **p, size_t bytes)
{
    AGG__CHECK(gpuMalloc, (p, bytes));
    return 0;
}

void agg__dev_free(void *p)
{
    if (p != NULL && gpuFree(p) != gpuSuccess) {
        (void)gpuGetLastError();
    }
}

int agg__host_register(void *p, size_t bytes)
{
    AGG__CHECK(gpuHostRegister, (p, bytes, gpuHostRegisterPortable));
    return 0;
}

int agg__host_unregister(void *p)
{
    AGG__CHECK(gpuHostUnregister, (p));
    return 0;
}

int agg__memcpy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0) {
        return 0;
    }
    AGG__CHECK(gpuMemcpyAsync, (dst, src, bytes, gpuMemcpyDefault, (gpuStream_t)stream));
    return 0;
}

/* ---- reduce and dma-buf ------------------------------------------------ */

int agg__reduce_supported(int dtype, int op)
{
    return agg_gpu_kernel_supported(dtype, op);
}

int agg__reduce(void *inout, const void *in, size_t count, int dtype, int op, void *stream)
{
    if (agg_gpu_kernel_reduce(inout, in, count, dtype, op, stream) != 0) {
        return agg__fail("%s", agg_gpu_kernel_why());
    }
    return 0;
}

int agg__dmabuf_export(const void *p, size_t bytes, int *fd, uint64_t *offset)
{
#if AGG_GPU_HIP
    (void)p, (void)bytes, (void)fd, (void)offset;
    return agg__fail("this ROCm has no dma-buf export (HIP %d.%d)", HIP_VERSION_MAJOR,
                     HIP_VERSION_MINOR);
#else
    /* The driver exports whole pages only. */
    const uintptr_t page  = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t start = (uintptr_t)p & ~(page - 1);
    const uintptr_t end   = ((uintptr_t)p + bytes + page - 1) & ~(page - 1);
    int             h     = -1;
    CUresult        r;

    if (bytes == 0) {
        return agg__fail("dma-buf export of 0 bytes at %p", p);
    }
    if (agg__cu_context() != 0) {
        return -1;
    }
    r = cuMemGetHandleForAddressRange(&h, (CUdeviceptr)start, (size_t)(end - start),
                                      CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) {
        return agg__cu_fail("cuMemGetHandleForAddressRange", r);
    }
    *fd     = h;
    *offset = (uint64_t)((uintptr_t)p - start);
    return 0;
#endif
}

const agg_gpu_ops_t agg__ops = {
    .abi              = AGG_GPU_ABI,
    .name             = AGG_GPU_RT_NAME,
    .mem_type         = AGG_GPU_MEM_TYPE,
    .init             = agg__init,
    .error            = agg__error,
    .ptr_query        = agg__ptr_query,
    .device_get       = agg__device_get,
    .device_set       = agg__device_set,
    .device_info      = agg__device_info,
    .stream_create    = agg__stream_create,
    .stream_destroy   = agg__stream_destroy,
    .stream_sync      = agg__stream_sync,
    .event_create     = agg__event_create,
    .event_destroy    = agg__event_destroy,
    .event_record     = agg__event_record,
    .event_query      = agg__event_query,
    .host_alloc       = agg__host_alloc,
    .host_free        = agg__host_free,
    .dev_alloc        = agg__dev_alloc,
    .dev_free         = agg__dev_free,
    .host_register    = agg__host_register,
    .host_unregister  = agg__host_unregister,
    .memcpy_async     = agg__memcpy_async,
    .reduce_supported = agg__reduce_supported,
    .reduce           = agg__reduce,
    .dmabuf_export    = agg__dmabuf_export,
};

} /* namespace */

extern "C" __attribute__((visibility("default"))) const agg_gpu_ops_t *agg_gpu_backend(void)
{
    return &agg__ops;
}
