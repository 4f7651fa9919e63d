/*
 * Takes the SAT lock and keeps it: one streaming allreduce on
 * MPI_COMM_WORLD (with SHARP_COLL_SAT_LOCK_BATCH_SIZE unlimited the
 * communicator holds the lock from then on), then a file is created to say
 * so and the ranks sleep, so a test can kill them while they hold it.
 *
 *   sat_hold READY_FILE SECONDS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    static int s[65536], r[65536];
    int rank;
    FILE *f;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 3) {
        if (rank == 0) {
            fprintf(stderr, "usage: sat_hold READY_FILE SECONDS\n");
        }
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Allreduce(s, r, 65536, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && (f = fopen(argv[1], "w")) != NULL) {
        fclose(f);
    }
    sleep((unsigned)atoi(argv[2]));
    MPI_Finalize();
    return 0;
}
