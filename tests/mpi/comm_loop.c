/*
 * comm_loop: communicators made (MPI_Comm_dup, _split, _create), used for
 * an allreduce and a bcast, and freed, many times over, under the shim. The
 * manager's count of live groups (agg_info -S) must rise while one is in
 * use and be back where it started once they are all freed: nothing leaks
 * on the tree. Every result is checked. Prints "comm_loop: N passed, M
 * failed".
 *
 *   comm_loop AGG_INFO_PATH [LOOPS]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static long passed, failed;

static void expect(int ok, const char *what, int loop)
{
    if (ok) {
        passed++;
    } else if (failed++ < 5) {
        fprintf(stderr, "comm_loop: FAIL rank %d loop %d: %s\n", rank, loop, what);
    }
}

/* Live groups on the manager, asked by rank 0 and told to all; -1 if unknown. */
static long live_groups(const char *agg_info)
{
    char cmd[4096], line[256];
    long groups = -1;
    FILE *p;

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        snprintf(cmd, sizeof(cmd), "'%s' -S 2>&1", agg_info);
        p = popen(cmd, "r");
        while (p != NULL && fgets(line, sizeof(line), p) != NULL) {
            if (strncmp(line, "groups ", 7) == 0) {
                groups = strtol(line + 7, NULL, 10);
            }
        }
        if (p != NULL) {
            pclose(p);
        }
    }
    MPI_Bcast(&groups, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return groups;
}

/* One use of comm: an allreduce, a bcast and an allreduce, checked. */
static void use(MPI_Comm comm, int loop)
{
    int crank, csize, in[100], out[100], i, ok = 1;

    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    for (i = 0; i < 100; ++i) {
        in[i] = crank + i;
    }
    MPI_Allreduce(in, out, 100, MPI_INT, MPI_SUM, comm);
    for (i = 0; i < 100; ++i) {
        ok &= out[i] == csize * (csize - 1) / 2 + csize * i;
    }
    expect(ok, "allreduce", loop);
    for (i = 0; i < 100; ++i) {
        out[i] = crank == csize - 1 ? i * 3 + loop : -1;
    }
    MPI_Bcast(out, 100, MPI_INT, csize - 1, comm);
    for (ok = 1, i = 0; i < 100; ++i) {
        ok &= out[i] == i * 3 + loop;
    }
    expect(ok, "bcast", loop);
    /* a third call: a group made lazily, after two, is made by now */
    MPI_Allreduce(MPI_IN_PLACE, in, 100, MPI_INT, MPI_MAX, comm);
    for (ok = 1, i = 0; i < 100; ++i) {
        ok &= in[i] == csize - 1 + i;
    }
    expect(ok, "allreduce in place", loop);
}

int main(int argc, char **argv)
{
    long before, during = -1, after, sums[2], mine[2];
    int loops, loop;
    MPI_Group world_group, low;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0) {
            fprintf(stderr, "usage: comm_loop AGG_INFO_PATH [LOOPS]\n");
        }
        MPI_Finalize();
        return 2;
    }
    loops = argc > 2 ? atoi(argv[2]) : 30;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    {
        int range[1][3] = {{0, size > 1 ? size - 2 : 0, 1}};
        MPI_Group_range_incl(world_group, 1, range, &low);
    }
    /* the world's own group first, if it comes lazily (live_groups uses it too) */
    for (loop = 0; loop < 3; ++loop) {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    before = live_groups(argv[1]);
    expect(before >= 0, "agg_info -S gave no group count", -1);
    for (loop = 0; loop < loops; ++loop) {
        MPI_Comm dup, split, made;

        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split);
        MPI_Comm_create(MPI_COMM_WORLD, low, &made);
        use(dup, loop);
        use(split, loop);
        if (made != MPI_COMM_NULL) {
            use(made, loop);
        }
        if (loop == 0) {
            during = live_groups(argv[1]);
        }
        MPI_Comm_free(&dup);
        MPI_Comm_free(&split);
        if (made != MPI_COMM_NULL) {
            MPI_Comm_free(&made);
        }
    }
    after = live_groups(argv[1]);
    if (rank == 0) {
        printf("comm_loop: live groups %ld before, %ld while in use, %ld after %d loops\n",
               before, during, after, loops);
    }
    expect(during > before, "no group made for the communicators in use", -1);
    expect(after == before, "groups left on the manager after the communicators were freed",
           -1);
    MPI_Group_free(&low);
    MPI_Group_free(&world_group);
    mine[0] = passed;
    mine[1] = failed;
    MPI_Reduce(mine, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("comm_loop: %ld passed, %ld failed\n", sums[0], sums[1]);
    }
    MPI_Bcast(sums, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return sums[1] != 0;
}
