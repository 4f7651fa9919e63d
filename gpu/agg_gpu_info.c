/*
 * agg_info --gpu: what a user checks by hand before trusting device
 * buffers to the stack. Which backend loaded and why not; per device: its
 * identity, a pointer-attribute round trip, whether device memory is
 * directly readable and writable from the host (the large-BAR check ROCm
 * users run by hand), whether it exports as a dma-buf, and the copy rate
 * through pinned memory. Host access to device memory runs in a child
 * process, so a fault is a line of the report, not a crash.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agg/conf.h"
#include "agg/gpu.h"
#include "agg/sock.h"

/* Reads and writes device memory from the host; exit 0 when both work. */
static int agg__gpu_host_touch(const agg_gpu_ops_t *o, void *d, size_t n)
{
    volatile unsigned char *p = d;
    unsigned char back = 0;
    pid_t pid;
    int status;

    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        alarm(10);
        p[0]     = 0x5a; /* faults unless the device memory is mapped into the host */
        p[n - 1] = 0xa5;
        _exit(p[0] == 0x5a && p[n - 1] == 0xa5 ? 0 : 3);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return -1;
    }
    if (WIFSIGNALED(status)) {
        return WTERMSIG(status);
    }
    /* what the child wrote must be what the device holds */
    if (WEXITSTATUS(status) == 0 &&
        (o->memcpy_async(&back, (const char *)d + n - 1, 1, NULL) != 0 ||
         o->stream_sync(NULL) != 0 || back != 0xa5)) {
        return 200;
    }
    return WEXITSTATUS(status) == 0 ? 0 : 100 + WEXITSTATUS(status);
}

/* GB/s of a host <-> device copy of n bytes through pinned memory (best of 5). */
static double agg__gpu_copy_rate(const agg_gpu_ops_t *o, void *d, void *h, size_t n, int up)
{
    double best = 0;
    int i;

    for (i = 0; i < 5; ++i) {
        uint64_t t0 = agg_time_ns(), t;

        if ((up ? o->memcpy_async(d, h, n, NULL) : o->memcpy_async(h, d, n, NULL)) != 0 ||
            o->stream_sync(NULL) != 0) {
            return -1;
        }
        t = agg_time_ns() - t0;
        if (t > 0 && (double)n / (double)t > best) {
            best = (double)n / (double)t;
        }
    }
    return best;
}

static int agg__gpu_report_dev(FILE *out, const agg_gpu_ops_t *o, int dev)
{
    const size_t n = 64u << 20;
    agg_gpu_dev_info_t di;
    agg_gpu_ptr_t q;
    void *d = NULL, *h = NULL;
    int problems = 0, fd = -1, touch;
    uint64_t off;

    if (o->device_set(dev) != 0 || o->device_info(dev, &di) != 0) {
        fprintf(out, "  device %d: cannot be used: %s\n", dev, o->error());
        return 1;
    }
    fprintf(out, "  device %d: %s, PCI %s, %.1f GiB, %d multiprocessors, capability %d.%d\n",
            dev, di.name, di.pci_bus_id, (double)di.total_mem / (1u << 30), di.multiprocessors,
            di.cc_major, di.cc_minor);
    if (o->dev_alloc(&d, n) != 0) {
        fprintf(out, "    PROBLEM: cannot allocate 64 MiB on it: %s\n", o->error());
        return 1;
    }
    if (o->ptr_query((char *)d + 4096, &q) != 0 || q.mem != AGG_GPU_MEM_DEVICE ||
        q.device != dev || (q.size > 0 && (q.base != (uintptr_t)d || q.size < n))) {
        fprintf(out, "    PROBLEM: the runtime does not describe its own allocation right "
                     "(type %d, device %d): device buffers would be taken for host memory; "
                     "check that the driver and the runtime versions match\n", q.mem, q.device);
        problems++;
    } else {
        fprintf(out, "    pointer attributes: right (device memory of device %d, whole "
                     "allocation found)\n", dev);
    }
    fprintf(out, "    unified addressing: %s; pageable host memory from the device: %s\n",
            di.unified_addressing ? "yes" : "NO", di.pageable_access ? "yes" : "no");
    if (!di.unified_addressing) {
        fprintf(out, "    PROBLEM: no unified addressing: libagg cannot tell device from host "
                     "pointers; use a 64-bit build and a current driver\n");
        problems++;
    }
    touch = agg__gpu_host_touch(o, d, n);
    if (touch == 0) {
        fprintf(out, "    device memory from the host: readable and writable (large BAR)\n");
    } else {
        fprintf(out, "    device memory from the host: not accessible (%s %d). Buffers are "
                     "staged through pinned host memory instead, which works. For direct "
                     "access, enable \"Above 4G decoding\" and Resizable BAR in the BIOS, and "
                     "check that the IOMMU is off or in pass-through (iommu=pt)\n",
                touch > 0 && touch < 100 ? "signal" : "status", touch);
    }
    if (o->dmabuf_export(d, n, &fd, &off) == 0) {
        fprintf(out, "    dma-buf export: works (GPU-direct registration possible)\n");
        close(fd);
    } else {
        fprintf(out, "    dma-buf export: not available (%s). GPU-direct to a NIC needs it, or "
                     "the peer-memory module (nvidia-peermem / amdgpu peer-memory); the shared-"
                     "memory transport stages either way\n", o->error());
    }
    if (o->host_alloc(&h, n) == 0) {
        double up = agg__gpu_copy_rate(o, d, h, n, 1), down = agg__gpu_copy_rate(o, d, h, n, 0);

        fprintf(out, "    pinned copies, 64 MiB: host->device %.1f GB/s, device->host %.1f GB/s\n",
                up, down);
        if (up >= 0 && up < 3.0) {
            fprintf(out, "    PROBLEM: host->device copies under 3 GB/s: check the PCIe link "
                         "width and generation (lspci -vv) and the NUMA node of the process\n");
            problems++;
        }
        o->host_free(h);
    } else {
        fprintf(out, "    PROBLEM: no pinned host memory (%s): raise the locked-memory limit "
                     "(ulimit -l) or the container's\n", o->error());
        problems++;
    }
    o->dev_free(d);
    return problems;
}

int agg_gpu_report(FILE *out, const struct agg_conf *conf)
{
    const agg_gpu_ops_t *o = NULL;
    int count = 0, dev, cur = 0, problems = 0;
    int want = (int)agg_conf_int(conf, AGG_CONF_ENABLE_CUDA);

    agg_gpu_load_conf(conf, &o);
    if (o == NULL) {
        fprintf(out, "GPU: none usable: %s\n", agg_gpu_why());
        fprintf(out, "  every buffer is taken as host memory; a buffer declared as device "
                     "memory is refused with \"not supported\"\n");
        return want == AGG_GPU_ON ? 1 : 0;
    }
    o->init(&count);
    o->device_get(&cur);
    fprintf(out, "GPU: %s backend, %d device(s)\n", o->name, count);
    for (dev = 0; dev < count; ++dev) {
        problems += agg__gpu_report_dev(out, o, dev);
    }
    o->device_set(cur);
    fprintf(out, problems == 0 ? "GPU: no problem found\n" : "GPU: %d problem(s) found\n",
            problems);
    return problems > 0;
}
