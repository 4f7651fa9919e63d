/*
 * gpu_kernel_check: holds a GPU backend (libagg_gpu_cuda.so or
 * libagg_gpu_rocm.so) against the host reduce engine. For every dtype and
 * op agg_reduce_fn supports, several counts and buffer offsets, with fresh
 * random inputs full of NaNs, signed zeros, infinities, subnormals, integer
 * extremes and MINLOC/MAXLOC ties, the GPU result must equal the host's bit
 * for bit (pairs: value and index; their padding must stay as it was), no
 * byte around the result may change, and `in` must come back unchanged.
 * It also checks the ops table around the kernels: pointer queries, events,
 * error paths, dma-buf export. Only the ops table is used: no GPU runtime
 * is linked here.
 *
 *   gpu_kernel_check [-b] [-s SEED] [BACKEND.so]
 *
 * Without BACKEND.so it tries ../lib/libagg_gpu_{cuda,rocm}.so next to the
 * program. -b adds a bandwidth table (reduce kernels against a device copy).
 * Exit: 0 all good, 1 any failure, 77 no GPU device (the test is skipped).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agg/gpu.h"
#include "agg/reduce.h"
#include "gpu_check.h"

#define SKIP  77
#define GUARD 64 /* bytes checked on each side of a result */

static const agg_gpu_ops_t *ops;
static void                *stream;
static unsigned long        ncases, nfail;

/* A failed call of the ops table outside the kernels' results: stop here. */
#define CALL(_call)                                                            \
    do {                                                                       \
        if ((_call) != 0) {                                                    \
            printf("FAIL %s (line %d): %s\n", #_call, __LINE__, ops->error()); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fail(const char *fmt, ...)
{
    va_list ap;

    nfail++;
    printf("FAIL ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        printf("FAIL out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* ---- one case --------------------------------------------------------- */

typedef struct {
    unsigned char *dev_o, *dev_i; /* device buffers, each `cap` bytes */
    size_t         cap;
    unsigned char *a, *b, *want, *got, *gin, *poison; /* host, `cap` bytes each */
} bufs_t;

static void check_guard(const char *what, const unsigned char *p, size_t n, const char *name,
                        const char *op, size_t count, size_t oo, size_t oi)
{
    for (size_t k = 0; k < n; k++) {
        if (p[k] != 0xa5) {
            fail("%s %s count=%zu inout+%zu in+%zu: %s written (byte %zu is 0x%02x)", name, op,
                 count, oo, oi, what, k, p[k]);
            return;
        }
    }
}

static void run_case(bufs_t *B, int dtype, int op, size_t count, size_t oo, size_t oi)
{
    const layout_t  l     = layout(dtype);
    const size_t    bytes = count * l.size;
    const char     *name = agg_dtype_name(dtype), *opn = agg_op_name(op);
    agg_reduce_fn_t ref = agg_reduce_fn(dtype, op);
    size_t          bad = 0, first = 0;

    ncases++;
    gen_inputs(dtype, &l, B->a, B->b, count);
    memcpy(B->want, B->a, bytes);
    ref(B->want, B->b, count);

    /* Poison around the result on the device and everything read back here. */
    CALL(ops->memcpy_async(B->dev_o, B->poison, oo + bytes + GUARD, stream));
    CALL(ops->memcpy_async(B->dev_o + oo, B->a, bytes, stream));
    CALL(ops->memcpy_async(B->dev_i + oi, B->b, bytes, stream));
    memset(B->got, 0x3c, oo + bytes + GUARD);
    memset(B->gin, 0x3c, bytes);
    if (ops->reduce(B->dev_o + oo, B->dev_i + oi, count, dtype, op, stream) != 0) {
        fail("%s %s count=%zu inout+%zu in+%zu: reduce returned -1: %s", name, opn, count, oo, oi,
             ops->error());
        CALL(ops->stream_sync(stream));
        return;
    }
    CALL(ops->memcpy_async(B->got, B->dev_o, oo + bytes + GUARD, stream));
    CALL(ops->memcpy_async(B->gin, B->dev_i + oi, bytes, stream));
    CALL(ops->stream_sync(stream));

    check_guard("a byte before inout", B->got, oo, name, opn, count, oo, oi);
    check_guard("a byte after inout", B->got + oo + bytes, GUARD, name, opn, count, oo, oi);
    if (memcmp(B->gin, B->b, bytes) != 0) {
        fail("%s %s count=%zu inout+%zu in+%zu: `in` was modified", name, opn, count, oo, oi);
    }
    for (size_t i = 0; i < count; i++) {
        const unsigned char *g = B->got + oo + i * l.size, *w = B->want + i * l.size;
        int ok = same(dtype, op, &l, g, w, B->a + i * l.size, B->b + i * l.size);

        /* Pair padding: as it was in inout (the host kernel does not touch it either). */
        for (size_t k = l.vsize; ok && l.pair && k < l.size; k++) {
            if (k < l.ioff || k >= l.ioff + 4) {
                ok = g[k] == B->a[i * l.size + k];
            }
        }
        if (!ok && bad++ == 0) {
            first = i;
        }
    }
    if (bad > 0) {
        const unsigned char *g = B->got + oo + first * l.size, *w = B->want + first * l.size;
        const char          *note = "";
        char                 sa[64], sb[64], sg[64], sw[64];

        if (l.pair && same(dtype, op, &l, g, w, g, g)) {
            note = " (padding written)";
        } else if (is_nan(dtype, &l, g) && is_nan(dtype, &l, w)) {
            note = " (NaN payloads differ)";
        }
        hex(sa, sizeof(sa), B->a + first * l.size, &l);
        hex(sb, sizeof(sb), B->b + first * l.size, &l);
        hex(sg, sizeof(sg), g, &l);
        hex(sw, sizeof(sw), w, &l);
        fail("%s %s count=%zu inout+%zu in+%zu: %zu element(s) differ; first [%zu]:"
             " inout %s, in %s: gpu %s, host %s%s", name, opn, count, oo, oi, bad, first, sa, sb,
             sg, sw, note);
    }
}

/* ---- the ops table around the kernels ---------------------------------- */

static void check_table(bufs_t *B)
{
    agg_gpu_ptr_t q;
    void         *pinned = NULL, *ev = NULL;
    unsigned char local[64];
    float         one = 1.0f;
    int           fd = -1;
    uint64_t      off = 0;

    for (int d = 0; d < AGG_DTYPE__COUNT; d++) {
        for (int o = 0; o < AGG_OP__COUNT; o++) {
            int host = agg_reduce_fn(d, o) != NULL, gpu = ops->reduce_supported(d, o);
            if (host != gpu) {
                fail("reduce_supported(%s, %s) = %d but agg_reduce_fn says %d", agg_dtype_name(d),
                     agg_op_name(o), gpu, host);
            }
        }
    }
    if (ops->reduce(B->dev_o, B->dev_i, 1, AGG_DTYPE_FLOAT32, AGG_OP_BAND, stream) != -1) {
        fail("reduce(float32, band) did not return -1");
    }
    /* A float one byte off its alignment: refused, not a fault that kills the context. */
    if (ops->reduce(B->dev_o + 1, B->dev_i + 1, 4, AGG_DTYPE_FLOAT32, AGG_OP_SUM, stream) != -1) {
        fail("reduce on a misaligned float32 buffer did not return -1");
    } else {
        printf("misaligned float32 refused: %s\n", ops->error());
    }
    CALL(ops->memcpy_async(B->dev_o, &one, sizeof(one), stream));
    CALL(ops->reduce(B->dev_o, B->dev_i, 0, AGG_DTYPE_FLOAT32, AGG_OP_SUM, stream));
    CALL(ops->memcpy_async(local, B->dev_o, sizeof(one), stream));
    CALL(ops->stream_sync(stream));
    if (memcmp(local, &one, sizeof(one)) != 0) {
        fail("reduce with count 0 changed inout");
    }

    CALL(ops->ptr_query(B->dev_o + 100, &q));
    if (q.mem != AGG_GPU_MEM_DEVICE || q.device != 0 || q.base != (uintptr_t)B->dev_o ||
        q.size < B->cap) {
        fail("ptr_query(device + 100): mem %d device %d base %#lx size %zu; want %d 0 %p >= %zu",
             (int)q.mem, q.device, (unsigned long)q.base, q.size, AGG_GPU_MEM_DEVICE,
             (void *)B->dev_o, B->cap);
    }
    CALL(ops->ptr_query(B->a, &q));
    if (q.mem != AGG_GPU_MEM_HOST || q.device != -1) {
        fail("ptr_query(malloc) says mem %d device %d, want HOST -1", (int)q.mem, q.device);
    }
    CALL(ops->ptr_query(local, &q));
    if (q.mem != AGG_GPU_MEM_HOST) {
        fail("ptr_query(stack) says mem %d, want HOST", (int)q.mem);
    }
    /* A failed query must not leave an error behind for the next call. */
    CALL(ops->stream_sync(stream));
    CALL(ops->host_alloc(&pinned, 1 << 20));
    CALL(ops->ptr_query((char *)pinned + 10, &q));
    if (q.mem != AGG_GPU_MEM_PINNED) {
        fail("ptr_query(host_alloc) says mem %d, want PINNED", (int)q.mem);
    }
    ops->host_free(pinned);
    CALL(ops->host_register(B->poison, 1 << 20));
    CALL(ops->ptr_query(B->poison, &q));
    if (q.mem != AGG_GPU_MEM_PINNED) {
        fail("ptr_query(host_register) says mem %d, want PINNED", (int)q.mem);
    }
    CALL(ops->host_unregister(B->poison));

    CALL(ops->event_create(&ev));
    CALL(ops->reduce(B->dev_o, B->dev_i, 1000, AGG_DTYPE_INT32, AGG_OP_BXOR, stream));
    CALL(ops->event_record(ev, stream));
    CALL(ops->stream_sync(stream));
    if (ops->event_query(ev) != 1) {
        fail("event_query after stream_sync is not 1: %s", ops->error());
    }
    ops->event_destroy(ev);

    agg_gpu_dev_info_t info;
    CALL(ops->device_info(0, &info));
    if (ops->dmabuf_export(B->dev_o + 4096 + 100, 1000, &fd, &off) == 0) {
        printf("dma-buf export: fd %d, offset %llu\n", fd, (unsigned long long)off);
        if (fd < 0 || off != 100) {
            fail("dmabuf_export gave fd %d offset %llu, want >= 0 and 100", fd,
                 (unsigned long long)off);
        }
        if (fd >= 0) {
            close(fd);
        }
    } else if (info.dmabuf_supported) {
        fail("the device says dma-buf works, but dmabuf_export failed: %s", ops->error());
    } else {
        printf("dma-buf export: not supported here (%s)\n", ops->error());
    }
}

/* ---- bandwidth ------------------------------------------------------------ */

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/*
 * Seconds per operation: the median of 20 batches (after 3 warm-up ones) of
 * k operations each, round robin over nsets buffer pairs so that no batch
 * finds its data in L2. dtype < 0 times a device-to-device copy.
 */
static double time_op(unsigned char **o, unsigned char **in, int nsets, size_t bytes, int dtype,
                      int op, int k)
{
    double t[20];
    size_t count = dtype < 0 ? 0 : bytes / agg_dtype_size(dtype);

    for (int rep = -3; rep < 20; rep++) {
        double t0 = now();
        for (int j = 0; j < k; j++) {
            int s = j % nsets;
            if (dtype < 0) {
                CALL(ops->memcpy_async(o[s], in[s], bytes, stream));
            } else {
                CALL(ops->reduce(o[s], in[s], count, dtype, op, stream));
            }
        }
        CALL(ops->stream_sync(stream));
        if (rep >= 0) {
            t[rep] = (now() - t0) / k;
        }
    }
    qsort(t, 20, sizeof(t[0]), cmp_double);
    return (t[9] + t[10]) / 2;
}

static void bench(void)
{
    static const struct { int dtype, op; } kern[] = {
        { AGG_DTYPE_FLOAT32, AGG_OP_SUM }, { AGG_DTYPE_FLOAT16, AGG_OP_SUM },
        { AGG_DTYPE_BFLOAT16, AGG_OP_SUM }, { AGG_DTYPE_INT32, AGG_OP_SUM },
        { AGG_DTYPE_FLOAT64, AGG_OP_MAX },
    };
    static const size_t sizes[] = { 4u << 20, 64u << 20, 512u << 20 };
    const int nk = (int)(sizeof(kern) / sizeof(kern[0]));

    printf("\nbandwidth in GB/s (1e9 bytes/s): a reduce moves 3x its buffer (2 reads, 1 write), a\n"
           "copy 2x (1 read, 1 write); median of 20 batches, buffers rotated past the L2;\n"
           "(ratio) is the reduce's over the copy's at that size, goal >= 0.80\n");
    printf("%-8s %10s", "buffer", "d2d copy");
    for (int i = 0; i < nk; i++) {
        char h[40];
        snprintf(h, sizeof(h), "%s %s", agg_dtype_name(kern[i].dtype), agg_op_name(kern[i].op));
        printf(" %17s", h);
    }
    printf("\n");
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        const size_t bytes = sizes[si];
        const int    nsets = bytes * 2 >= (256u << 20) ? 2 : (int)((256u << 20) / (bytes * 2));
        const int    per   = (int)((4ull << 30) / (bytes * 2)); /* a batch: ~4 GiB of buffers */
        const int    k     = per > nsets ? per : nsets;
        unsigned char *o[64] = { 0 }, *in[64] = { 0 }, *fill = xmalloc(bytes);
        int            ok = 1;

        for (size_t j = 0; j < bytes / 2; j++) {
            ((uint16_t *)fill)[j] = 0x3c00; /* finite in every dtype; in is 0: sums stay put */
        }
        for (int s = 0; s < nsets && ok; s++) {
            if (ops->dev_alloc((void **)&o[s], bytes) != 0 ||
                ops->dev_alloc((void **)&in[s], bytes) != 0) {
                printf("%zu MiB: skipped, %s\n", bytes >> 20, ops->error());
                ok = 0;
                break;
            }
            CALL(ops->memcpy_async(o[s], fill, bytes, stream));
            CALL(ops->stream_sync(stream));
        }
        memset(fill, 0, bytes);
        for (int s = 0; s < nsets && ok; s++) {
            CALL(ops->memcpy_async(in[s], fill, bytes, stream));
            CALL(ops->stream_sync(stream));
        }
        if (ok) {
            double copy = 2.0 * (double)bytes / time_op(o, in, nsets, bytes, -1, 0, k) / 1e9;
            printf("%4zu MiB %10.1f", bytes >> 20, copy);
            for (int i = 0; i < nk; i++) {
                double t = time_op(o, in, nsets, bytes, kern[i].dtype, kern[i].op, k);
                double r = 3.0 * (double)bytes / t / 1e9;
                printf(" %9.1f (%4.2f%s)", r, r / copy, r / copy < 0.8 ? "!" : " ");
            }
            printf("\n");
        }
        for (int s = 0; s < nsets; s++) {
            ops->dev_free(o[s]);
            ops->dev_free(in[s]);
        }
        free(fill);
    }

    const size_t bytes = 64u << 20;
    void        *h = NULL, *d = NULL;
    CALL(ops->host_alloc(&h, bytes));
    CALL(ops->dev_alloc(&d, bytes));
    memset(h, 1, bytes);
    unsigned char *hs[1] = { h }, *ds[1] = { d };
    double h2d = (double)bytes / time_op(ds, hs, 1, bytes, -1, 0, 1) / 1e9;
    double d2h = (double)bytes / time_op(hs, ds, 1, bytes, -1, 0, 1) / 1e9;
    printf("pinned host <-> device, 64 MiB, one direction's bytes: H2D %.1f GB/s, D2H %.1f GB/s\n",
           h2d, d2h);
    ops->dev_free(d);
    ops->host_free(h);
}

/* ---- loading ----------------------------------------------------------- */

/* 0 loaded and initialised; 1 no device (why says why); -1 broken backend. */
static int load(const char *path, char *why, size_t len)
{
    void                *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    agg_gpu_backend_fn_t fn;
    int                  count = 0;

    if (h == NULL) {
        snprintf(why, len, "cannot load %s: %s", path, dlerror());
        return 1;
    }
    *(void **)&fn = dlsym(h, AGG_GPU_BACKEND_SYM);
    if (fn == NULL || (ops = fn()) == NULL || ops->abi != AGG_GPU_ABI) {
        printf("FAIL %s: no %s() or ABI %u, want %u\n", path, AGG_GPU_BACKEND_SYM,
               ops ? ops->abi : 0u, AGG_GPU_ABI);
        return -1;
    }
    if (ops->init(&count) != 0) {
        snprintf(why, len, "%s", ops->error());
        return 1;
    }
    printf("backend %s (%s), %d device(s)\n", ops->name, path, count);
    return 0;
}

int main(int argc, char **argv)
{
    int         do_bench = 0, opt, rc = 1;
    uint64_t    seed = (uint64_t)time(NULL);
    char        self[PATH_MAX], path[PATH_MAX + 64], one[PATH_MAX + 1024];
    char        why[2 * sizeof(one)] = "";
    const char *names[] = { "cuda", "rocm" };

    while ((opt = getopt(argc, argv, "bs:")) != -1) {
        if (opt == 'b') {
            do_bench = 1;
        } else if (opt == 's') {
            seed = strtoull(optarg, NULL, 0);
        } else {
            fprintf(stderr, "usage: %s [-b] [-s SEED] [BACKEND.so]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (optind < argc) {
        rc = load(argv[optind], why, sizeof(why));
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        self[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        for (int i = 0; i < 2 && rc != 0 && rc != -1; i++) {
            snprintf(path, sizeof(path), "%s/../lib/libagg_gpu_%s.so", self, names[i]);
            if (access(path, F_OK) != 0) {
                snprintf(one, sizeof(one), "not built (no %s)", path);
            } else {
                rc = load(path, one, sizeof(one));
            }
            snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s: %s", i ? "; " : "",
                     names[i], one);
        }
    }
    if (rc == -1) {
        return 1;
    }
    if (rc != 0) {
        printf("no GPU device: %s\n", why);
        return SKIP;
    }

    agg_gpu_dev_info_t info;
    CALL(ops->device_set(0));
    CALL(ops->device_info(0, &info));
    printf("device 0: %s, pci %s, %.1f GiB, cc %d.%d, %d multiprocessors, unified addressing %d,"
           " pageable access %d, map host %d, dma-buf %d\n", info.name, info.pci_bus_id,
           (double)info.total_mem / (1 << 30), info.cc_major, info.cc_minor, info.multiprocessors,
           info.unified_addressing, info.pageable_access, info.can_map_host, info.dmabuf_supported);
    printf("seed %llu (rerun with -s %llu)\n", (unsigned long long)seed, (unsigned long long)seed);
    rng_state = seed * 2 + 1;
    CALL(ops->stream_create(&stream));

    const size_t big = (1u << 20) + 3;
    bufs_t       B;
    B.cap = big * 16 + 256 + GUARD;
    CALL(ops->dev_alloc((void **)&B.dev_o, B.cap));
    CALL(ops->dev_alloc((void **)&B.dev_i, B.cap));
    B.a = xmalloc(B.cap), B.b = xmalloc(B.cap), B.want = xmalloc(B.cap);
    B.got = xmalloc(B.cap), B.gin = xmalloc(B.cap), B.poison = xmalloc(B.cap);
    memset(B.poison, 0xa5, B.cap);

    check_table(&B);

    /* Aligned buffers at every count; then offsets (in units of the alignment) that exercise
     * the one-by-one head, the vector body, the tail, and the all-scalar path. */
    static const size_t counts[] = { 1, 7, 1000, (1u << 20) + 3 };
    static const size_t ucounts[] = { 7, 1000, 65541 };
    static const size_t offs[][2] = { { 1, 1 }, { 1, 0 }, { 3, 5 } };
    for (int d = 0; d < AGG_DTYPE__COUNT; d++) {
        for (int o = 0; o < AGG_OP__COUNT; o++) {
            if (agg_reduce_fn(d, o) == NULL) {
                continue;
            }
            const size_t a = layout(d).align;
            for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
                run_case(&B, d, o, counts[c], 0, 0);
            }
            for (size_t c = 0; c < sizeof(ucounts) / sizeof(ucounts[0]); c++) {
                for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
                    run_case(&B, d, o, ucounts[c], offs[k][0] * a, offs[k][1] * a);
                }
            }
        }
    }
    printf("gpu_kernel_check: %s backend on %s: %lu cases, %lu failure(s)%s\n", ops->name,
           info.name, ncases, nfail, nfail ? "" : ": every result bit-identical to agg_reduce_fn");

    if (do_bench) {
        bench();
    }
    ops->dev_free(B.dev_o);
    ops->dev_free(B.dev_i);
    ops->stream_destroy(stream);
    free(B.a), free(B.b), free(B.want), free(B.got), free(B.gin), free(B.poison);
    return nfail ? 1 : 0;
}
