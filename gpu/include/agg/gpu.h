/*
 * Device buffers: the one ops table every GPU runtime backend fills, and the
 * loader that finds one at run time. Internal to the stack (libagg, the shim,
 * agg_info); not installed.
 *
 * A backend is a small shared object (libagg_gpu_cuda.so built by nvcc,
 * libagg_gpu_rocm.so built by hipcc, both from the same sources) exporting
 * agg_gpu_backend(). libagg never links a GPU runtime: it dlopens a backend
 * when one is asked for and present, so the library, the shim and the daemons
 * run where no runtime is installed, and then treat every pointer as host
 * memory (and say so once).
 *
 * Calls return 0 on success and -1 on failure; ops->error() then gives a
 * sentence for this thread's last failure. Streams and events are opaque
 * pointers of the runtime (cudaStream_t, hipEvent_t, ...).
 */
#ifndef AGG_GPU_H
#define AGG_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "agg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AGG_GPU_ABI     1   /* bumped whenever agg_gpu_ops_t changes */
#define AGG_GPU_MAX_DEV 16  /* devices a process may use through libagg */

/* What a pointer is, as the runtime knows it. */
typedef enum agg_gpu_mem {
    AGG_GPU_MEM_HOST    = 0, /* plain host memory (or unknown to the runtime) */
    AGG_GPU_MEM_PINNED  = 1, /* host memory the runtime allocated or registered */
    AGG_GPU_MEM_DEVICE  = 2, /* device memory */
    AGG_GPU_MEM_MANAGED = 3, /* managed (unified) memory */
} agg_gpu_mem_t;

typedef struct agg_gpu_ptr {
    agg_gpu_mem_t mem;
    int           device; /* DEVICE/MANAGED: its device; else -1 */
    uintptr_t     base;   /* DEVICE/MANAGED: the whole allocation, for the range cache */
    size_t        size;   /*   (0 when the runtime cannot say) */
} agg_gpu_ptr_t;

typedef struct agg_gpu_dev_info {
    char   name[128];
    char   pci_bus_id[32];
    size_t total_mem;
    int    cc_major, cc_minor;      /* compute capability; gfx version for ROCm */
    int    multiprocessors;
    int    unified_addressing;      /* one address space with the host */
    int    pageable_access;         /* the device reads pageable host memory */
    int    can_map_host;            /* host memory can be mapped into the device */
    int    dmabuf_supported;        /* the driver says dma-buf export works */
} agg_gpu_dev_info_t;

typedef struct agg_gpu_ops {
    uint32_t    abi;          /* AGG_GPU_ABI */
    const char *name;         /* "cuda" or "rocm" */
    int         mem_type;     /* the agg_mem_type_t its device pointers are (AGG_MEM_CUDA/ROCM) */

    /* Loads the driver and counts devices; 0 with *count >= 1, else -1. */
    int         (*init)(int *count);
    const char *(*error)(void);

    int  (*ptr_query)(const void *p, agg_gpu_ptr_t *out);
    int  (*device_get)(int *dev);
    int  (*device_set)(int dev);
    int  (*device_info)(int dev, agg_gpu_dev_info_t *info);

    /* On the current device. */
    int  (*stream_create)(void **stream);
    void (*stream_destroy)(void *stream);
    int  (*stream_sync)(void *stream);
    int  (*event_create)(void **event);   /* timing off: for ordering only */
    void (*event_destroy)(void *event);
    int  (*event_record)(void *event, void *stream);
    int  (*event_query)(void *event);     /* 1 done, 0 pending, -1 failed */

    int  (*host_alloc)(void **p, size_t bytes); /* pinned, usable from every device */
    void (*host_free)(void *p);
    int  (*dev_alloc)(void **p, size_t bytes);  /* on the current device */
    void (*dev_free)(void *p);
    int  (*host_register)(void *p, size_t bytes);
    int  (*host_unregister)(void *p);

    /* Any direction (unified addressing), ordered on stream. */
    int  (*memcpy_async)(void *dst, const void *src, size_t bytes, void *stream);

    /*
     * inout[i] = inout[i] OP in[i], i < count, on the device of the buffers,
     * ordered on stream; the same results as agg_reduce_fn (reduce.h) for
     * every dtype and op it supports. -1 when reduce_supported says 0.
     */
    int  (*reduce_supported)(int dtype, int op);
    int  (*reduce)(void *inout, const void *in, size_t count, int dtype, int op,
                   void *stream);

    /*
     * Exports [p, p + bytes) of device memory as a dma-buf for a NIC or
     * another driver to import; *fd to close, *offset of p in it. -1 where
     * the runtime or driver cannot.
     */
    int  (*dmabuf_export)(const void *p, size_t bytes, int *fd, uint64_t *offset);
} agg_gpu_ops_t;

/* The one symbol a backend shared object exports. */
typedef const agg_gpu_ops_t *(*agg_gpu_backend_fn_t)(void);
#define AGG_GPU_BACKEND_SYM "agg_gpu_backend"

/* ---- the loader (gpu/agg_gpu.c) ------------------------------------- */

typedef enum agg_gpu_want {
    AGG_GPU_OFF  = 0,  /* SHARP_COLL_ENABLE_CUDA=0: every pointer is host memory */
    AGG_GPU_ON   = 1,  /* =1: a backend must load, else an error */
    AGG_GPU_AUTO = -1, /* load one if a runtime and a device are there */
} agg_gpu_want_t;

/*
 * Loads a backend once per process; later calls return the first answer.
 * `which`: "auto", "cuda" or "rocm". AGG_OK with ops (NULL when `want` is
 * OFF or AUTO found none, said once at info level), or AGG_ERR_NOT_SUPPORTED
 * when `want` is ON and none loaded (agg_gpu_why() says why).
 */
agg_status_t agg_gpu_load(int want, const char *which, const agg_gpu_ops_t **ops);

/* agg_gpu_load as SHARP_COLL_ENABLE_CUDA and AGG_GPU_BACKEND in conf say. */
struct agg_conf;
agg_status_t agg_gpu_load_conf(const struct agg_conf *conf, const agg_gpu_ops_t **ops);

/* The backend loaded, or NULL (none asked for, none found, not loaded yet). */
const agg_gpu_ops_t *agg_gpu_ops(void);

/* Why no backend is loaded: a sentence, "" when one is. */
const char *agg_gpu_why(void);

/*
 * What p is, through a cache of device allocations (a hit costs no call
 * into the runtime). With no backend: HOST. -1 only when the runtime failed.
 */
int agg_gpu_query(const void *p, agg_gpu_ptr_t *out);

/* Forget the cached allocations overlapping [p, p + bytes) (a free of them). */
void agg_gpu_forget(const void *p, size_t bytes);

/* Runs fn with device dev current, then puts the caller's device back. */
int agg_gpu_on_device(int dev, int (*fn)(void *arg), void *arg);

/*
 * agg_info --gpu (gpu/agg_gpu_info.c): loads a backend as conf says
 * (agg_gpu_load_conf) and prints, per device, what works and a sentence
 * for each problem with what to change. 0 when nothing is wrong (no GPU at
 * all is not wrong unless SHARP_COLL_ENABLE_CUDA=1).
 */
#include <stdio.h>
int agg_gpu_report(FILE *out, const struct agg_conf *conf);

#ifdef __cplusplus
}
#endif

#endif
