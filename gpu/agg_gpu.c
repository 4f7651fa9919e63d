/*
 * The GPU loader: finds a backend shared object at run time, and answers
 * "what is this pointer" through a cache of device allocations, the way
 * UCX's memtype cache spares the runtime a query per call.
 *
 * A backend is looked for next to the object this code is linked into
 * (libagg.so, the shim, a tool in bin/ with the libraries in ../lib), then
 * by name through the loader's path. Nothing here links a GPU runtime.
 */
#include "agg/gpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agg/conf.h"
#include "agg/log.h"

#define AGG_GPU_CACHE 64 /* device allocations remembered */

static pthread_mutex_t agg__gpu_lock = PTHREAD_MUTEX_INITIALIZER;
static int agg__gpu_tried;
static agg_status_t agg__gpu_status;
static const agg_gpu_ops_t *agg__gpu;
static char agg__gpu_whynot[512];

/* The range cache: device and managed allocations, most recent first. */
static struct {
    uintptr_t     base;
    size_t        size;
    agg_gpu_ptr_t ptr;
} agg__gpu_cache[AGG_GPU_CACHE];
static unsigned agg__gpu_cached;

/* Tries one backend file; 0 and *ops, or -1 with agg__gpu_whynot extended. */
static int agg__gpu_open(const char *path, const agg_gpu_ops_t **ops)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    agg_gpu_backend_fn_t fn;
    const agg_gpu_ops_t *o;
    size_t len = strlen(agg__gpu_whynot);
    int count = 0;

    if (h == NULL) {
        /* a backend that is there but cannot load lacks its runtime (the driver) */
        snprintf(agg__gpu_whynot + len, sizeof(agg__gpu_whynot) - len, "%s%s: %s", len ? "; " : "",
                 strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path, dlerror());
        return -1;
    }
    *(void **)&fn = dlsym(h, AGG_GPU_BACKEND_SYM);
    o = fn != NULL ? fn() : NULL;
    if (o == NULL || o->abi != AGG_GPU_ABI) {
        snprintf(agg__gpu_whynot + len, sizeof(agg__gpu_whynot) - len,
                 "%s%s: not a backend of this version (ABI %u, want %u)", len ? "; " : "", path,
                 o != NULL ? o->abi : 0u, AGG_GPU_ABI);
        dlclose(h);
        return -1;
    }
    if (o->init(&count) != 0) {
        snprintf(agg__gpu_whynot + len, sizeof(agg__gpu_whynot) - len, "%s%s", len ? "; " : "",
                 o->error());
        dlclose(h);
        return -1;
    }
    agg_debug("GPU backend %s from %s: %d device(s)", o->name, path, count);
    *ops = o; /* kept loaded for the life of the process */
    return 0;
}

/* Looks for libagg_gpu_<name>.so beside this object, in ../lib, then by name. */
static int agg__gpu_find(const char *name, const agg_gpu_ops_t **ops)
{
    char dir[4096], path[4200];
    Dl_info di;
    char *slash;

    if (dladdr((void *)agg__gpu_find, &di) != 0 && di.dli_fname != NULL &&
        strlen(di.dli_fname) < sizeof(dir)) {
        strcpy(dir, di.dli_fname);
        slash = strrchr(dir, '/');
        if (slash != NULL) {
            *slash = '\0';
            snprintf(path, sizeof(path), "%s/libagg_gpu_%s.so", dir, name);
            if (access(path, R_OK) == 0) {
                return agg__gpu_open(path, ops);
            }
            snprintf(path, sizeof(path), "%s/../lib/libagg_gpu_%s.so", dir, name);
            if (access(path, R_OK) == 0) {
                return agg__gpu_open(path, ops);
            }
        }
    }
    snprintf(path, sizeof(path), "libagg_gpu_%s.so", name);
    return agg__gpu_open(path, ops);
}

agg_status_t agg_gpu_load(int want, const char *which, const agg_gpu_ops_t **ops)
{
    static const char *const names[] = {"cuda", "rocm"};
    const agg_gpu_ops_t *o = NULL;
    unsigned i;

    pthread_mutex_lock(&agg__gpu_lock);
    if (!agg__gpu_tried) {
        agg__gpu_tried  = 1;
        agg__gpu_status = AGG_OK;
        if (want == AGG_GPU_OFF) {
            snprintf(agg__gpu_whynot, sizeof(agg__gpu_whynot),
                     "GPU buffers are off (SHARP_COLL_ENABLE_CUDA=0)");
        } else {
            for (i = 0; i < sizeof(names) / sizeof(names[0]) && o == NULL; ++i) {
                if (which == NULL || strcmp(which, "auto") == 0 || strcmp(which, names[i]) == 0) {
                    agg__gpu_find(names[i], &o);
                }
            }
            if (o == NULL && agg__gpu_whynot[0] == '\0') {
                snprintf(agg__gpu_whynot, sizeof(agg__gpu_whynot),
                         "no GPU backend is called \"%s\" (AGG_GPU_BACKEND: auto, cuda or rocm)",
                         which);
            }
            if (o == NULL && want == AGG_GPU_ON) {
                agg__gpu_status = AGG_ERR_NOT_SUPPORTED;
                agg_error("SHARP_COLL_ENABLE_CUDA=1 but no GPU backend loaded: %s",
                          agg__gpu_whynot);
            } else if (o == NULL) {
                agg_info("no GPU runtime: every buffer is taken as host memory (%s)",
                         agg__gpu_whynot);
            }
        }
        agg__gpu = o;
        if (o != NULL) {
            agg__gpu_whynot[0] = '\0';
        }
    }
    if (ops != NULL) {
        *ops = agg__gpu;
    }
    pthread_mutex_unlock(&agg__gpu_lock);
    return agg__gpu_status;
}

agg_status_t agg_gpu_load_conf(const struct agg_conf *conf, const agg_gpu_ops_t **ops)
{
    static const char *const names[] = {"auto", "cuda", "rocm"}; /* AGG_GPU_BACKEND's choices */
    long long which = agg_conf_int(conf, AGG_CONF_GPU_BACKEND);

    return agg_gpu_load((int)agg_conf_int(conf, AGG_CONF_ENABLE_CUDA),
                        names[which >= 0 && which < 3 ? which : 0], ops);
}

const agg_gpu_ops_t *agg_gpu_ops(void)
{
    return __atomic_load_n(&agg__gpu, __ATOMIC_ACQUIRE);
}

const char *agg_gpu_why(void)
{
    return agg__gpu_tried ? agg__gpu_whynot : "no GPU backend was asked for yet";
}

int agg_gpu_query(const void *p, agg_gpu_ptr_t *out)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    uintptr_t a = (uintptr_t)p;
    unsigned i;

    *out = (agg_gpu_ptr_t){.mem = AGG_GPU_MEM_HOST, .device = -1};
    if (o == NULL || p == NULL) {
        return 0;
    }
    pthread_mutex_lock(&agg__gpu_lock);
    for (i = 0; i < agg__gpu_cached; ++i) {
        if (a - agg__gpu_cache[i].base < agg__gpu_cache[i].size) {
            *out = agg__gpu_cache[i].ptr;
            if (i > 0) { /* to the front: the buffers of a loop stay hits */
                __typeof__(agg__gpu_cache[0]) hit = agg__gpu_cache[i];

                memmove(&agg__gpu_cache[1], &agg__gpu_cache[0], i * sizeof(hit));
                agg__gpu_cache[0] = hit;
            }
            pthread_mutex_unlock(&agg__gpu_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&agg__gpu_lock);
    if (o->ptr_query(p, out) != 0) {
        return -1;
    }
    if ((out->mem == AGG_GPU_MEM_DEVICE || out->mem == AGG_GPU_MEM_MANAGED) && out->size > 0) {
        pthread_mutex_lock(&agg__gpu_lock);
        i = agg__gpu_cached < AGG_GPU_CACHE ? agg__gpu_cached++ : AGG_GPU_CACHE - 1;
        memmove(&agg__gpu_cache[1], &agg__gpu_cache[0], i * sizeof(agg__gpu_cache[0]));
        agg__gpu_cache[0].base = out->base;
        agg__gpu_cache[0].size = out->size;
        agg__gpu_cache[0].ptr  = *out;
        pthread_mutex_unlock(&agg__gpu_lock);
    }
    return 0;
}

void agg_gpu_forget(const void *p, size_t bytes)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + bytes;
    unsigned i, j = 0;

    pthread_mutex_lock(&agg__gpu_lock);
    for (i = 0; i < agg__gpu_cached; ++i) {
        if (agg__gpu_cache[i].base >= hi || agg__gpu_cache[i].base + agg__gpu_cache[i].size <= lo) {
            agg__gpu_cache[j++] = agg__gpu_cache[i];
        }
    }
    agg__gpu_cached = j;
    pthread_mutex_unlock(&agg__gpu_lock);
}

int agg_gpu_on_device(int dev, int (*fn)(void *arg), void *arg)
{
    const agg_gpu_ops_t *o = agg_gpu_ops();
    int cur = -1, rc;

    if (o == NULL) {
        return -1;
    }
    if (o->device_get(&cur) != 0 || (cur != dev && o->device_set(dev) != 0)) {
        return -1;
    }
    rc = fn(arg);
    if (cur != dev && o->device_set(cur) != 0) {
        rc = -1;
    }
    return rc;
}
