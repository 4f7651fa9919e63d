/*
 * layout_check: bcast and allgather where ranks describe the same bytes
 * with different datatypes (MPI only asks the type signatures to match):
 * n x MPI_INT on some ranks, n/4 x a contiguous type of 4 MPI_INT on
 * others, a strided vector type (with holes that must stay untouched) on a
 * third; blocking and non-blocking, every root. The shim must take one
 * path on every rank, whatever each rank's layout, and be right.
 * Prints "layout_check: N passed, M failed".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096 /* ints: several LLT fragments */

static int rank, size;
static long passed, failed;

static void expect(int ok, const char *what, int root)
{
    if (ok) {
        passed++;
    } else if (failed++ < 5) {
        fprintf(stderr, "layout_check: FAIL rank %d root %d: %s\n", rank, root, what);
    }
}

/* This rank's way of describing N ints: 0 plain, 1 blocks of 4, 2 strided (every other int). */
static int layout(void)
{
    return rank % 3;
}

static void make_type(MPI_Datatype *t, int *count)
{
    switch (layout()) {
    case 0:
        *t     = MPI_INT;
        *count = N;
        break;
    case 1:
        MPI_Type_contiguous(4, MPI_INT, t);
        MPI_Type_commit(t);
        *count = N / 4;
        break;
    default: {
        MPI_Datatype v;

        /* N ints, a hole after each, the last hole included in the extent */
        MPI_Type_vector(N, 1, 2, MPI_INT, &v);
        MPI_Type_create_resized(v, 0, 2 * N * (MPI_Aint)sizeof(int), t);
        MPI_Type_free(&v);
        MPI_Type_commit(t);
        *count = 1;
        break;
    }
    }
}

/* Element i of this rank's buffer, whatever the layout. */
static int *at(int *buf, int i)
{
    return layout() == 2 ? &buf[2 * i] : &buf[i];
}

static int holes_intact(const int *buf)
{
    for (int i = 0; layout() == 2 && i < N; ++i) {
        if (buf[2 * i + 1] != -7) {
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Datatype t;
    MPI_Request req;
    int count, root, i, ok, *buf, *all;
    long mine[2], sums[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    make_type(&t, &count);
    buf = malloc(2 * N * sizeof(int));
    all = malloc((size_t)size * 2 * N * sizeof(int));
    for (root = 0; root < size; ++root) {
        for (int nb = 0; nb < 2; ++nb) {
            for (i = 0; i < 2 * N; ++i) {
                buf[i] = -7;
            }
            for (i = 0; rank == root && i < N; ++i) {
                *at(buf, i) = i * 5 + root + nb;
            }
            if (nb) {
                /* the type may be freed while the bcast is pending (MPI 4.1.9) */
                MPI_Datatype copy;

                MPI_Type_dup(t, &copy);
                MPI_Ibcast(buf, count, copy, root, MPI_COMM_WORLD, &req);
                MPI_Type_free(&copy);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            } else {
                MPI_Bcast(buf, count, t, root, MPI_COMM_WORLD);
            }
            for (ok = 1, i = 0; i < N; ++i) {
                ok &= *at(buf, i) == i * 5 + root + nb;
            }
            expect(ok && holes_intact(buf), nb ? "ibcast" : "bcast", root);
        }
    }
    /* allgather: each rank's N ints, received in its own layout */
    for (i = 0; i < 2 * N; ++i) {
        buf[i] = -7;
    }
    for (i = 0; i < N; ++i) {
        *at(buf, i) = rank * 100000 + i;
    }
    {
        MPI_Aint lb, extent;
        int r, j;

        MPI_Type_get_extent(t, &lb, &extent);
        for (i = 0; i < size * 2 * N; ++i) {
            all[i] = -7;
        }
        MPI_Allgather(buf, count, t, all, count, t, MPI_COMM_WORLD);
        for (ok = 1, r = 0; r < size; ++r) {
            int *blk = (int *)((char *)all + (size_t)r * (size_t)count * (size_t)extent);

            for (j = 0; j < N; ++j) {
                ok &= *at(blk, j) == r * 100000 + j;
            }
            ok &= holes_intact(blk);
        }
        expect(ok, "allgather", -1);
    }
    /* an in-place reduce at the root keeps its input for a redo */
    for (root = 0; root < size; ++root) {
        int v[64], w[64];

        for (i = 0; i < 64; ++i) {
            v[i] = rank + i;
        }
        MPI_Reduce(rank == root ? MPI_IN_PLACE : v, rank == root ? v : w, 64, MPI_INT, MPI_SUM,
                   root, MPI_COMM_WORLD);
        for (ok = 1, i = 0; rank == root && i < 64; ++i) {
            ok &= v[i] == size * (size - 1) / 2 + size * i;
        }
        expect(ok, "reduce in place", root);
    }
    if (layout() != 0) {
        MPI_Type_free(&t);
    }
    free(buf);
    free(all);
    mine[0] = passed;
    mine[1] = failed;
    MPI_Reduce(mine, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("layout_check: %ld passed, %ld failed\n", sums[0], sums[1]);
    }
    MPI_Bcast(sums, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return sums[1] != 0;
}
