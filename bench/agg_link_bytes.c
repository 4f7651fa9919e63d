/*
 * What each host sends per allreduce, from its network interface's byte
 * counters, and how long the call takes: the offload (MPI_Allreduce, which
 * the shim sends into the aggregation tree) against Open MPI's own
 * (PMPI_Allreduce), the two measured in the same run. Its own bookkeeping
 * (barriers, the figures' reductions) goes to Open MPI directly, so only the
 * measured calls are offloaded. Run one rank per
 * host (tests/e2e/netns.sh runs it across network namespaces):
 *
 *   agg_link_bytes [-i IFACE] [-n ITERS] [-s SIZE,SIZE,...]
 *
 * Each rank reads /sys/class/net/IFACE/statistics/{tx,rx}_bytes of its own
 * host before and after ITERS calls of each size and path; rank 0 prints
 * per size and path the time per call and the bytes the hosts sent per call
 * (smallest and largest host), as a multiple of the buffer. The counters
 * include Ethernet, IP and TCP headers and the ACKs a host sends for what it
 * receives, so a host that sends its buffer once shows a little more than 1.
 * Every call's result is checked.
 */
#include <mpi.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t read_counter(const char *iface, const char *name)
{
    char path[256];
    unsigned long long v = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", iface, name);
    f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%llu", &v) != 1) {
        fprintf(stderr, "agg_link_bytes: cannot read %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fclose(f);
    return v;
}

/* path 0: the offload (through the shim); 1: Open MPI's own (PMPI). */
static void allreduce(int path, const float *in, float *out, size_t count)
{
    if (path == 0) {
        MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else {
        PMPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    const char *iface = "eth0", *sizes = "65536,1048576,4194304,16777216";
    int rank, size, iters = 20, opt, bad = 0;
    char *list, *tok, *save = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "i:n:s:")) != -1) {
        switch (opt) {
        case 'i': iface = optarg; break;
        case 'n': iters = atoi(optarg); break;
        case 's': sizes = optarg; break;
        default:
            if (rank == 0) {
                fprintf(stderr, "usage: agg_link_bytes [-i IFACE] [-n ITERS] [-s SIZE,...]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    if (iters < 1) {
        iters = 1;
    }
    if (rank == 0) {
        printf("# %d ranks, %d calls per size and path, float sum; bytes each host sent per "
               "call on %s (headers and ACKs included)\n", size, iters, iface);
        printf("# Open MPI's own algorithms send 2(p-1)/p = %.2f buffers per host\n",
               2.0 * (size - 1) / size);
        printf("%12s %8s %12s %14s %14s %8s %8s\n", "bytes", "path", "us/call", "min_tx/call",
               "max_tx/call", "min/buf", "max/buf");
    }
    list = strdup(sizes);
    for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        size_t bytes = strtoull(tok, NULL, 0), count = bytes / sizeof(float), i;
        float *in = malloc(count * sizeof(float) + 1), *out = malloc(count * sizeof(float) + 1);
        int path;

        for (i = 0; i < count; ++i) {
            in[i] = (float)((rank + 1) * (int)(i % 7 + 1));
        }
        for (path = 0; path < 2; ++path) {
            uint64_t tx0, tx1, sent, mn, mx;
            double t0, t;
            int k;

            /* a call first, untimed and not counted: the offload makes its group at
               the first one, and the output buffer's pages are touched */
            allreduce(path, in, out, count);
            PMPI_Barrier(MPI_COMM_WORLD);
            tx0 = read_counter(iface, "tx_bytes");
            t0  = MPI_Wtime();
            for (k = 0; k < iters; ++k) {
                allreduce(path, in, out, count);
            }
            t   = (MPI_Wtime() - t0) / iters;
            tx1 = read_counter(iface, "tx_bytes");
            PMPI_Barrier(MPI_COMM_WORLD);
            for (i = 0; i < count; ++i) {
                float want = (float)(size * (size + 1) / 2 * (int)(i % 7 + 1));

                if (out[i] != want) {
                    if (bad++ < 5) {
                        fprintf(stderr, "rank %d: %zu bytes, %s: element %zu is %g, expected "
                                "%g\n", rank, bytes, path ? "mpi" : "offload", i,
                                (double)out[i], (double)want);
                    }
                    break;
                }
            }
            sent = (tx1 - tx0) / (uint64_t)iters;
            /* the tool's own bookkeeping never goes through the offload */
            PMPI_Reduce(&sent, &mn, 1, MPI_UINT64_T, MPI_MIN, 0, MPI_COMM_WORLD);
            PMPI_Reduce(&sent, &mx, 1, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
            PMPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0) {
                printf("%12zu %8s %12.1f %14" PRIu64 " %14" PRIu64 " %8.3f %8.3f\n", bytes,
                       path ? "mpi" : "offload", t * 1e6, mn, mx, (double)mn / (double)bytes,
                       (double)mx / (double)bytes);
            }
        }
        free(in);
        free(out);
    }
    free(list);
    PMPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("agg_link_bytes: %s\n", bad ? "WRONG RESULTS" : "every result right");
    }
    MPI_Finalize();
    return bad ? 1 : 0;
}
