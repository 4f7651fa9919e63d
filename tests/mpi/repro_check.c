/*
 * Reproducible reductions: float sums whose value depends on the order the
 * contributions are added in (magnitudes from 1e-3 to 1e5, both signs),
 * with every rank sleeping a random time before each call so that the
 * order in which fragments reach the aggregation nodes is shuffled.
 *
 *   repro_check --seed S [--iters N] [--expect-rank-order]
 *
 * Prints "repro_check: hash 0x..." (a hash of every result bit, the same
 * on every run iff the results are bitwise the same) and the number of
 * elements that differ from the sum taken in rank order. With
 * --expect-rank-order (a tree of one switch in reproducible mode combines
 * its ranks in communicator order) any such element is a failure, and the
 * program ends with "repro_check: N passed, M failed".
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static float value(int rank, size_t i, int iter)
{
    unsigned h = (unsigned)rank * 7919u + (unsigned)i * 104729u + (unsigned)iter * 31u;
    float mag  = (float)(h % 1000) + 0.125f;
    int e      = (int)((h >> 10) % 9) - 3; /* 1e-3 .. 1e5 */

    while (e > 0) {
        mag *= 10.0f;
        e--;
    }
    while (e < 0) {
        mag /= 10.0f;
        e++;
    }
    return (h >> 20) & 1 ? -mag : mag;
}

int main(int argc, char **argv)
{
    static const size_t counts[] = {7, 1000, 65536, 300000};
    int rank, size, iters = 30, expect = 0, i, it, r;
    unsigned seed = 1;
    uint64_t hash = 1469598103934665603ull;
    long differ = 0, checks = 0, failures = 0, sums[3], mine[3];
    size_t c, k;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--expect-rank-order") == 0) {
            expect = 1;
        }
    }
    seed = seed * 2654435761u + (unsigned)rank * 40503u;
    for (it = 0; it < iters; ++it) {
        for (c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
            size_t n = counts[c];
            float *s = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));

            for (k = 0; k < n; ++k) {
                s[k] = value(rank, k, it);
            }
            usleep((useconds_t)(rand_r(&seed) % 300)); /* shuffle who arrives first */
            MPI_Allreduce(s, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            for (k = 0; k < n; ++k) {
                uint32_t bits;
                float want = value(0, k, it);

                for (r = 1; r < size; ++r) {
                    want += value(r, k, it); /* rank order, in float */
                }
                memcpy(&bits, &out[k], sizeof(bits));
                hash = (hash ^ bits) * 1099511628211ull;
                differ += memcmp(&want, &out[k], sizeof(want)) != 0;
            }
            checks++;
            free(s);
            free(out);
        }
    }
    if (expect && differ > 0) {
        failures++;
        fprintf(stderr, "rank %d: %ld elements differ from the sum in rank order\n", rank,
                differ);
    }
    mine[0] = checks;
    mine[1] = failures;
    mine[2] = differ;
    MPI_Reduce(mine, sums, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("repro_check: hash 0x%016llx\n", (unsigned long long)hash);
        printf("repro_check: %ld elements differ from the rank-order sum\n", sums[2] / size);
        if (expect) {
            printf("repro_check: %ld passed, %ld failed\n", sums[0] - sums[1], sums[1]);
        }
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
