/*
 * fault_loop: checked allreduces, out of place (or in place), of 1 to COUNT
 * int32 for SECONDS, while the test around it kills or stops a part of the
 * network. MODE: "in-place"; "nb" (two MPI_Iallreduce in flight at a time,
 * then MPI_Waitall); "nb-in-place".
 * Rank 0 says "fault_loop: under way" after 256 calls (the test breaks the
 * network after it), SECONDS from which it stops, telling the others every
 * 32 calls through PMPI_Bcast (the shim never sees it). The communicator returns errors, so
 * a failed call is seen here. Prints
 *   fault_loop: N calls, W wrong, E errors, worst call X ms, mean call Y us
 * (over every rank; a non-blocking pair counts as two calls, its time as
 * each's); exits 1 on a wrong element, 3 after an MPI error.
 *
 *   fault_loop SECONDS [COUNT [MODE]]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Call n's input (and, in place, its output buffer) for `count` elements. */
static void fill(int32_t *in, int32_t *out, int count, int rank, long n)
{
    for (int i = 0; i < count; ++i) {
        in[i] = out[i] = (rank + 1) * (int32_t)(i % 101 + n % 7);
    }
}

/* Elements of call n's result that are wrong. */
static long check(const int32_t *out, int count, int size, long n)
{
    long wrong = 0;

    for (int i = 0; i < count; ++i) {
        wrong += out[i] != size * (size + 1) / 2 * (int32_t)(i % 101 + n % 7);
    }
    return wrong;
}

static int failed(int rank, long n, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;

    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "fault_loop: rank %d: call %ld returned %d (%s)\n", rank, n, rc, msg);
    return 1;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3, t0, t, worst = 0, all_worst, spent = 0,
           all_spent;
    int max_count = argc > 2 ? atoi(argv[2]) : 4096, rank, size, stop = 0, rc = MPI_SUCCESS;
    int in_place = argc > 3 && strstr(argv[3], "in-place") != NULL;
    int nb = argc > 3 && strncmp(argv[3], "nb", 2) == 0, k, per = nb ? 2 : 1;
    long calls = 0, wrong = 0, errors = 0, mine[3], sums[3];
    int32_t *in[2], *out[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    max_count = max_count < 1 ? 1 : max_count;
    for (k = 0; k < 2; ++k) {
        in[k]  = malloc((size_t)max_count * sizeof(int32_t));
        out[k] = malloc((size_t)max_count * sizeof(int32_t));
    }
    t0 = MPI_Wtime();
    while (!stop) {
        MPI_Request req[2];
        MPI_Status st[2];
        int count[2];

        for (k = 0; k < per; ++k) {
            count[k] = (int)((calls + k) * 977 % max_count) + 1;
            fill(in[k], out[k], count[k], rank, calls + k);
        }
        t = MPI_Wtime();
        if (!nb) {
            rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : in[0], out[0], count[0], MPI_INT32_T,
                               MPI_SUM, MPI_COMM_WORLD);
        } else {
            for (k = 0; k < per && rc == MPI_SUCCESS; ++k) {
                rc = MPI_Iallreduce(in_place ? MPI_IN_PLACE : in[k], out[k], count[k],
                                    MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &req[k]);
            }
            if (rc == MPI_SUCCESS) {
                rc = MPI_Waitall(per, req, st);
                for (k = 0; rc == MPI_ERR_IN_STATUS && k < per; ++k) {
                    if (st[k].MPI_ERROR != MPI_SUCCESS) {
                        rc = st[k].MPI_ERROR;
                    }
                }
            }
        }
        t = (MPI_Wtime() - t) / per;
        worst = t > worst ? t : worst;
        spent += t * per;
        calls += per;
        if (rc != MPI_SUCCESS) {
            errors += failed(rank, calls, rc);
            break; /* every member fails the same call */
        }
        for (k = 0; k < per; ++k) {
            wrong += check(out[k], count[k], size, calls - per + k);
        }
        if (calls == 256) {
            t0 = MPI_Wtime(); /* SECONDS from here: the test breaks the network after it */
            if (rank == 0) {
                printf("fault_loop: under way\n");
                fflush(stdout);
            }
        }
        if (calls % 32 == 0) {
            stop = rank == 0 && MPI_Wtime() - t0 > seconds;
            PMPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
    }
    mine[0] = calls;
    mine[1] = wrong;
    mine[2] = errors;
    PMPI_Reduce(mine, sums, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&worst, &all_worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&spent, &all_spent, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("fault_loop: %ld calls, %ld wrong, %ld errors, worst call %.0f ms, mean call "
               "%.0f us\n", sums[0], sums[1], sums[2], all_worst * 1e3,
               sums[0] > 0 ? all_spent / (double)sums[0] * 1e6 : 0.0);
    }
    for (k = 0; k < 2; ++k) {
        free(in[k]);
        free(out[k]);
    }
    MPI_Finalize();
    return wrong ? 1 : errors ? 3 : 0;
}
