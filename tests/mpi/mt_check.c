/*
 * mt_check: collectives from several threads at once, each thread on its
 * own communicator (MPI_THREAD_MULTIPLE), as a threaded program under the
 * shim does them: blocking allreduce, bcast, reduce and barrier, and
 * non-blocking allreduces waited for out of order, with every result
 * checked. Prints "mt_check: N passed, M failed"; exits 1 on any failure.
 *
 *   mt_check [-t THREADS] [-i ITERATIONS]
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MT_MAX_THREADS 16
#define MT_COUNT       4099 /* a few LLT fragments */

typedef struct mt_thread {
    int       id;
    MPI_Comm  comm;
    int       iters;
    long      passed;
    long      failed;
    pthread_t tid;
} mt_thread_t;

static int rank, size;

static void mt_expect(mt_thread_t *t, int ok, const char *what, int it)
{
    if (ok) {
        t->passed++;
        return;
    }
    if (t->failed++ < 5) {
        fprintf(stderr, "mt_check: FAIL rank %d thread %d iteration %d: %s\n", rank, t->id,
                it, what);
    }
}

/* Sum over ranks r of (r + 1) * (i + 1 + thread + it): exact in int. */
static int mt_sum(int i, int id, int it)
{
    return size * (size + 1) / 2 * (i + 1 + id + it);
}

static void *mt_run(void *arg)
{
    mt_thread_t *t = arg;
    int *in = malloc(MT_COUNT * sizeof(int)), *out = malloc(MT_COUNT * sizeof(int));
    int nb[4][64], nbout[4][64];
    MPI_Request reqs[4];
    int it, i, k, ok;

    for (it = 0; it < t->iters; ++it) {
        for (i = 0; i < MT_COUNT; ++i) {
            in[i] = (rank + 1) * (i + 1 + t->id + it);
        }
        MPI_Allreduce(in, out, MT_COUNT, MPI_INT, MPI_SUM, t->comm);
        for (ok = 1, i = 0; i < MT_COUNT; ++i) {
            ok &= out[i] == mt_sum(i, t->id, it);
        }
        mt_expect(t, ok, "allreduce", it);

        for (i = 0; i < MT_COUNT; ++i) {
            out[i] = rank == it % size ? i * 7 + t->id : -1;
        }
        MPI_Bcast(out, MT_COUNT, MPI_INT, it % size, t->comm);
        for (ok = 1, i = 0; i < MT_COUNT; ++i) {
            ok &= out[i] == i * 7 + t->id;
        }
        mt_expect(t, ok, "bcast", it);

        memset(out, 0, MT_COUNT * sizeof(int));
        MPI_Reduce(in, out, MT_COUNT, MPI_INT, MPI_SUM, (it + 1) % size, t->comm);
        if (rank == (it + 1) % size) {
            for (ok = 1, i = 0; i < MT_COUNT; ++i) {
                ok &= out[i] == mt_sum(i, t->id, it);
            }
            mt_expect(t, ok, "reduce", it);
        }
        MPI_Barrier(t->comm);

        for (k = 0; k < 4; ++k) {
            for (i = 0; i < 64; ++i) {
                nb[k][i] = (rank + 1) * (i + 1 + t->id + it + k);
            }
            MPI_Iallreduce(nb[k], nbout[k], 64, MPI_INT, MPI_SUM, t->comm, &reqs[k]);
        }
        for (k = 3; k >= 0; --k) {
            MPI_Wait(&reqs[k], MPI_STATUS_IGNORE);
            for (ok = 1, i = 0; i < 64; ++i) {
                ok &= nbout[k][i] == mt_sum(i, t->id, it + k);
            }
            mt_expect(t, ok, "iallreduce", it);
        }
    }
    free(in);
    free(out);
    return NULL;
}

int main(int argc, char **argv)
{
    mt_thread_t th[MT_MAX_THREADS];
    int provided, nthreads = 3, iters = 50, opt, i;
    long totals[2] = {0, 0}, sums[2];

    while ((opt = getopt(argc, argv, "t:i:")) != -1) {
        if (opt == 't') {
            nthreads = atoi(optarg);
        } else if (opt == 'i') {
            iters = atoi(optarg);
        } else {
            fprintf(stderr, "usage: mt_check [-t THREADS] [-i ITERATIONS]\n");
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > MT_MAX_THREADS || iters < 1) {
        fprintf(stderr, "mt_check: -t 1..%d, -i at least 1\n", MT_MAX_THREADS);
        return 2;
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            fprintf(stderr, "mt_check: MPI gives thread level %d only\n", provided);
        }
        MPI_Finalize();
        return 1;
    }
    for (i = 0; i < nthreads; ++i) {
        th[i] = (mt_thread_t){.id = i, .iters = iters};
        MPI_Comm_dup(MPI_COMM_WORLD, &th[i].comm);
    }
    for (i = 0; i < nthreads; ++i) {
        pthread_create(&th[i].tid, NULL, mt_run, &th[i]);
    }
    for (i = 0; i < nthreads; ++i) {
        pthread_join(th[i].tid, NULL);
        totals[0] += th[i].passed;
        totals[1] += th[i].failed;
        MPI_Comm_free(&th[i].comm);
    }
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("mt_check: %ld passed, %ld failed\n", sums[0], sums[1]);
    }
    MPI_Bcast(sums, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return sums[1] != 0;
}
