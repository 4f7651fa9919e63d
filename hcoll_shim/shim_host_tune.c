/*
 * Which host allreduce algorithm a size gets (shim_host.h): a static table
 * by communicator size, measured on this kind of machine, or a short
 * measurement when the shim first sees a communicator
 * (HCOLL_ALLREDUCE_ZCOPY_TUNE=dynamic), decided by rank 0 for all.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "shim_host.h"

shim_host_alg_t shim_host_choose(const shim_host_tune_t *t, size_t bytes, int comm_size)
{
    (void)comm_size; /* t was made for it */
    if (bytes < t->rd_max) {
        return SHIM_ALG_RECURSIVE_DOUBLING;
    }
    return bytes < t->rab_max ? SHIM_ALG_RABENSEIFNER : SHIM_ALG_RING;
}

/*
 * Thresholds by communicator size, from agg_host_bench -a (and -i) on 2
 * cores, Open MPI 4.1.4, vader, 3 to 8 ranks oversubscribed. Recursive
 * doubling wins while latency rules; at 2 ranks it would win up to 2 MiB
 * with a separate sbuf but loses 10-30% in place from 128 KiB, where the
 * ring (at 2 ranks the same exchanges as Rabenseifner) is even. From 3
 * ranks on Rabenseifner wins while its fewer steps matter and the ring once
 * bandwidth does. Beyond 8 ranks nothing was measured here: the 8-rank row.
 */
static const struct {
    int    max_size;
    size_t rd_max, rab_max;
} shim_host_tune_table[] = {
    {2, 128u << 10, 128u << 10},
    {4, 128u << 10, 512u << 10},
    {INT_MAX, 128u << 10, 2u << 20},
};

void shim_host_tune_static(shim_host_tune_t *t, int comm_size)
{
    size_t i = 0;

    while (comm_size > shim_host_tune_table[i].max_size) {
        i++;
    }
    t->rd_max  = shim_host_tune_table[i].rd_max;
    t->rab_max = shim_host_tune_table[i].rab_max;
}

/*
 * Dynamic tuning: float sums of 1 KiB to 256 KiB by 4x, where the crossovers
 * mostly lie on shared memory; a crossover beyond keeps the static
 * threshold, so that the whole measurement stays within a few ms. The
 * algorithms take turns within each repetition, so that a burst of noise on
 * a shared machine hits them alike, and the thresholds are fitted to all
 * sizes at once, so that one noisy size cannot move them far.
 */
#define SHIM_HOST_TUNE_MIN  (1u << 10)
#define SHIM_HOST_TUNE_NSZ  5
#define SHIM_HOST_TUNE_REPS 4

typedef double shim_host_tune_tm_t[SHIM_HOST_TUNE_NSZ][SHIM_ALG__COUNT];

static int shim_host_tune_count(int i)
{
    return (int)(((size_t)SHIM_HOST_TUNE_MIN << (2 * i)) / sizeof(float));
}

/* tm[size][alg]: the best of REPS calls as this rank sees it. */
static int shim_host_tune_measure(float *buf, MPI_Comm comm, shim_host_tune_tm_t tm)
{
    float *rbuf = buf + shim_host_tune_count(SHIM_HOST_TUNE_NSZ - 1);
    int rep, i, a, rc = MPI_SUCCESS;
    double t;

    /* One untimed call of each at the largest size: scratch grows, pages are touched. */
    for (a = 0; rc == MPI_SUCCESS && a < SHIM_ALG__COUNT; a++) {
        rc = shim_host_allreduce(buf, rbuf, shim_host_tune_count(SHIM_HOST_TUNE_NSZ - 1),
                                 MPI_FLOAT, MPI_SUM, comm, (shim_host_alg_t)a);
    }
    for (i = 0; i < SHIM_HOST_TUNE_NSZ; i++) {
        for (a = 0; a < SHIM_ALG__COUNT; a++) {
            tm[i][a] = 1e30;
        }
    }
    /* An allreduce ends about together everywhere: no barrier between calls. */
    for (rep = 0; rc == MPI_SUCCESS && rep < SHIM_HOST_TUNE_REPS; rep++) {
        rc = PMPI_Barrier(comm);
        for (i = 0; rc == MPI_SUCCESS && i < SHIM_HOST_TUNE_NSZ; i++) {
            for (a = 0; rc == MPI_SUCCESS && a < SHIM_ALG__COUNT; a++) {
                t  = PMPI_Wtime();
                rc = shim_host_allreduce(buf, rbuf, shim_host_tune_count(i), MPI_FLOAT,
                                         MPI_SUM, comm, (shim_host_alg_t)a);
                t        = PMPI_Wtime() - t;
                tm[i][a] = t < tm[i][a] ? t : tm[i][a];
            }
        }
    }
    return rc;
}

/* Time of alg a at size i relative to the fastest there; lo < 0: the faster of the others. */
static double shim_host_tune_rel(shim_host_tune_tm_t tm, int i, int a, int lo)
{
    double best = tm[i][0], mine = -1;
    int b;

    for (b = 0; b < SHIM_ALG__COUNT; b++) {
        best = tm[i][b] < best ? tm[i][b] : best;
        if (a < 0 && b != lo && (mine < 0 || tm[i][b] < mine)) {
            mine = tm[i][b];
        }
    }
    return (a < 0 ? mine : tm[i][a]) / best;
}

/*
 * The change point k in [from, NSZ] that fits the timings best: sizes from
 * `from` to k - 1 run lo, the rest hi (-1: whichever of the others is faster
 * there). Ties keep lo, as the static table would.
 */
static int shim_host_tune_split(shim_host_tune_tm_t tm, int from, int lo, int hi)
{
    double cost, best = 1e30;
    int k, i, best_k = SHIM_HOST_TUNE_NSZ;

    for (k = SHIM_HOST_TUNE_NSZ; k >= from; k--) {
        for (cost = 0, i = from; i < SHIM_HOST_TUNE_NSZ; i++) {
            cost += i < k ? shim_host_tune_rel(tm, i, lo, lo) : shim_host_tune_rel(tm, i, hi, lo);
        }
        if (cost < best * 0.999) {
            best   = cost;
            best_k = k;
        }
    }
    return best_k;
}

/* The threshold below measured size k, halfway (in log) from size k - 1; beyond them: keep. */
static size_t shim_host_tune_bound(int k, size_t current)
{
    const size_t top = (size_t)SHIM_HOST_TUNE_MIN << (2 * SHIM_HOST_TUNE_NSZ - 1);

    if (k == SHIM_HOST_TUNE_NSZ) {
        return current > top ? current : top;
    }
    return ((size_t)SHIM_HOST_TUNE_MIN << (2 * k)) / 2;
}

/* Rank 0's decision from its timings, starting from the static table in t. */
static void shim_host_decide(shim_host_tune_tm_t tm, shim_host_tune_t *t)
{
    int k = shim_host_tune_split(tm, 0, SHIM_ALG_RECURSIVE_DOUBLING, -1);
    int m = shim_host_tune_split(tm, k, SHIM_ALG_RABENSEIFNER, SHIM_ALG_RING);

    t->rd_max  = shim_host_tune_bound(k, t->rd_max);
    t->rab_max = shim_host_tune_bound(m, t->rab_max);
    if (t->rab_max < t->rd_max) {
        t->rab_max = t->rd_max;
    }
}

int shim_host_tune_dynamic(shim_host_tune_t *t, MPI_Comm comm)
{
    shim_host_tune_tm_t tm;
    unsigned long long th[2];
    shim_host_tune_t res;
    int size, rank, rc;
    float *buf;

    rc = PMPI_Comm_size(comm, &size);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_rank(comm, &rank);
    }
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    shim_host_tune_static(&res, size);
    if (size == 1) {
        *t = res;
        return MPI_SUCCESS;
    }
    buf = calloc(2 * (size_t)shim_host_tune_count(SHIM_HOST_TUNE_NSZ - 1), sizeof(float));
    if (buf == NULL) {
        return MPI_ERR_NO_MEM;
    }
    rc = shim_host_tune_measure(buf, comm, tm);
    free(buf);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (rank == 0) {
        shim_host_decide(tm, &res);
    }
    th[0] = res.rd_max;
    th[1] = res.rab_max;
    rc    = PMPI_Bcast(th, 2, MPI_UNSIGNED_LONG_LONG, 0, comm);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    t->rd_max  = (size_t)th[0];
    t->rab_max = (size_t)th[1];
    return MPI_SUCCESS;
}
