/*
 * Non-blocking allreduces and communicators competing for the network,
 * under the shim:
 *   - requests of mixed sizes (LLT and SAT) in flight together on one
 *     communicator, completed out of order with MPI_Wait (reverse),
 *     MPI_Waitany, MPI_Testall polling and MPI_Waitsome, in place too;
 *   - an MPI_Iallreduce and point-to-point requests in one MPI_Waitall;
 *   - several communicators over the same ranks (so the same switches and
 *     the same SAT lock) used in turn and at once;
 *   - MPI semantics held-out programs rely on (see semantics());
 *   - MPI_Ireduce_scatter_block and MPI_Iallgather, in place and not, in
 *     flight with an MPI_Iallreduce (other_collectives());
 *   - a non-blocking collective as the first call on a new communicator
 *     (fresh_communicator());
 *   - MPI_Reduce_scatter and MPI_Ireduce_scatter with counts alike and
 *     counts that differ, in place and not
 *     (reduce_scatter_counts());
 *   - MPI_Allgatherv and MPI_Iallgatherv, counts alike and not, packed, at
 *     displacements with gaps and through a type with gaps, in place and
 *     not (allgatherv_check()).
 * Every result is checked element by element.
 *
 *   nb_check [--rounds N] [--skew-ms MS]
 *
 * Prints "nb_check: N passed, M failed" on rank 0; exits non-zero on a failure.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int world_rank, world_size;
static long checks, failures;

static int32_t val(int rank, size_t i, int salt)
{
    return (int32_t)((rank + 1) * (int)(i % 13 + 1) + salt);
}

typedef struct job {
    int32_t    *s, *r;
    size_t      count;
    int         salt, in_place;
    MPI_Comm    comm;
    MPI_Request req;
} job_t;

static void job_start(job_t *j, MPI_Comm comm, size_t count, int salt, int in_place)
{
    int rank;
    size_t i;

    MPI_Comm_rank(comm, &rank);
    j->count    = count;
    j->salt     = salt;
    j->in_place = in_place;
    j->comm     = comm;
    j->s        = malloc(count * sizeof(int32_t));
    j->r        = malloc(count * sizeof(int32_t));
    for (i = 0; i < count; ++i) {
        j->s[i] = val(rank, i, salt);
        j->r[i] = in_place ? j->s[i] : -1;
    }
    MPI_Iallreduce(in_place ? MPI_IN_PLACE : j->s, j->r, (int)count, MPI_INT32_T, MPI_SUM,
                   comm, &j->req);
}

static void job_check(job_t *j, const char *how)
{
    int size, m;
    size_t i, bad = 0;

    MPI_Comm_size(j->comm, &size);
    for (i = 0; i < j->count; ++i) {
        int32_t want = 0;
        for (m = 0; m < size; ++m) {
            want += val(m, i, j->salt);
        }
        bad += j->r[i] != want;
    }
    checks++;
    if (bad) {
        failures++;
        fprintf(stderr, "rank %d: %s: %zu of %zu wrong (salt %d%s)\n", world_rank, how, bad,
                j->count, j->salt, j->in_place ? ", in place" : "");
    }
    free(j->s);
    free(j->r);
}

#define NJOBS 6
static const size_t sizes[NJOBS] = {1, 4099, 2, 300000, 65536, 1u << 20};

static void start_all(job_t *jobs, MPI_Comm comm, int salt)
{
    for (int k = 0; k < NJOBS; ++k) {
        job_start(&jobs[k], comm, sizes[k], salt + k, k % 2);
    }
}

static void out_of_order(MPI_Comm comm, int salt)
{
    job_t jobs[NJOBS];
    MPI_Request reqs[NJOBS];
    int k, idx, done, outcount, indices[NJOBS];

    /* reverse order, one MPI_Wait each */
    start_all(jobs, comm, salt);
    for (k = NJOBS - 1; k >= 0; --k) {
        MPI_Wait(&jobs[k].req, MPI_STATUS_IGNORE);
        job_check(&jobs[k], "MPI_Wait in reverse order");
    }
    /* whichever completes first */
    start_all(jobs, comm, salt + 100);
    for (k = 0; k < NJOBS; ++k) {
        reqs[k] = jobs[k].req;
    }
    for (k = 0; k < NJOBS; ++k) {
        MPI_Waitany(NJOBS, reqs, &idx, MPI_STATUS_IGNORE);
        if (idx < 0 || idx >= NJOBS) {
            failures++;
            break;
        }
        job_check(&jobs[idx], "MPI_Waitany");
    }
    /* polling */
    start_all(jobs, comm, salt + 200);
    for (k = 0; k < NJOBS; ++k) {
        reqs[k] = jobs[k].req;
    }
    do {
        MPI_Testall(NJOBS, reqs, &done, MPI_STATUSES_IGNORE);
    } while (!done);
    for (k = 0; k < NJOBS; ++k) {
        job_check(&jobs[k], "MPI_Testall");
    }
    /* some at a time */
    start_all(jobs, comm, salt + 300);
    for (k = 0; k < NJOBS; ++k) {
        reqs[k] = jobs[k].req;
    }
    for (done = 0; done < NJOBS; done += outcount) {
        MPI_Waitsome(NJOBS, reqs, &outcount, indices, MPI_STATUSES_IGNORE);
        for (k = 0; k < outcount; ++k) {
            job_check(&jobs[indices[k]], "MPI_Waitsome");
        }
    }
}

/* An allreduce and a ring exchange in one MPI_Waitall. */
static void with_p2p(int salt)
{
    MPI_Request reqs[3];
    int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
    int32_t out = world_rank * 7 + salt, in = -1;
    job_t j;

    job_start(&j, MPI_COMM_WORLD, 100000, salt, 0);
    reqs[0] = j.req;
    MPI_Irecv(&in, 1, MPI_INT32_T, prev, 5, MPI_COMM_WORLD, &reqs[1]);
    MPI_Isend(&out, 1, MPI_INT32_T, next, 5, MPI_COMM_WORLD, &reqs[2]);
    MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
    job_check(&j, "MPI_Waitall with point-to-point");
    checks++;
    if (in != prev * 7 + salt) {
        failures++;
        fprintf(stderr, "rank %d: ring exchange got %d\n", world_rank, in);
    }
}

static void expect(int ok, const char *what)
{
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "rank %d: %s\n", world_rank, what);
    }
}

/*
 * What any MPI program may do and a network that needs no host would carry
 * through; each used to hang, fail or crash under the shim:
 *   - requests move on while their rank is blocked in another MPI call (an
 *     MPI_Recv waiting for a rank that waits for the allreduce first);
 *   - a blocking allreduce lets a peer's synchronous send to this rank
 *     complete (the peer enters the allreduce only after it);
 *   - non-blocking allreduces started on fresh communicators in different
 *     orders on different ranks (legal: the order is per communicator);
 *   - MPI_Request_get_status polled until the request is done;
 *   - a communicator freed with a request on it still in flight, waited
 *     for afterwards;
 *   - MPI_COMM_NULL with MPI_ERRORS_RETURN: an error, not a crash.
 */
static void semantics(int salt)
{
    static const size_t counts[2] = {1000, 300000};
    MPI_Comm a, b, c;
    job_t ja, jb;
    int k, token = 0, flag = 0, x = 1, y = 0, rc;
    double until;

    for (k = 0; k < 2; ++k) {
        job_start(&ja, MPI_COMM_WORLD, counts[k], salt + k, k);
        if (world_rank == 0) {
            MPI_Wait(&ja.req, MPI_STATUS_IGNORE);
            for (int m = 1; m < world_size; ++m) {
                MPI_Send(&token, 1, MPI_INT, m, 11, MPI_COMM_WORLD);
            }
        } else {
            MPI_Recv(&token, 1, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Wait(&ja.req, MPI_STATUS_IGNORE);
        }
        job_check(&ja, "a request completing while its rank sat in MPI_Recv");
    }

    for (k = 0; k < 2; ++k) {
        int32_t s = world_rank, r = -1;
        MPI_Request rq = MPI_REQUEST_NULL;

        if (world_rank == 0) {
            MPI_Irecv(&token, 1, MPI_INT, 1, 12, MPI_COMM_WORLD, &rq);
        } else if (world_rank == 1) {
            MPI_Ssend(&token, 1, MPI_INT, 0, 12, MPI_COMM_WORLD);
        }
        MPI_Allreduce(&s, &r, 1, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Wait(&rq, MPI_STATUS_IGNORE);
        expect(r == world_size * (world_size - 1) / 2, "allreduce after a peer's MPI_Ssend");
    }

    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    if (world_rank % 2 == 0) {
        job_start(&ja, a, counts[0], salt + 2, 0);
        job_start(&jb, b, counts[1], salt + 3, 0);
    } else {
        job_start(&jb, b, counts[1], salt + 3, 0);
        job_start(&ja, a, counts[0], salt + 2, 0);
    }
    MPI_Wait(&jb.req, MPI_STATUS_IGNORE);
    MPI_Wait(&ja.req, MPI_STATUS_IGNORE);
    job_check(&ja, "fresh communicators started in different orders (a)");
    job_check(&jb, "fresh communicators started in different orders (b)");
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);

    job_start(&ja, MPI_COMM_WORLD, counts[1], salt + 4, 0);
    until = MPI_Wtime() + 20;
    while (!flag && MPI_Wtime() < until) {
        MPI_Request_get_status(ja.req, &flag, MPI_STATUS_IGNORE);
    }
    expect(flag, "MPI_Request_get_status never said the allreduce was done");
    MPI_Wait(&ja.req, MPI_STATUS_IGNORE);
    job_check(&ja, "MPI_Request_get_status");

    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    {
        int32_t s = 1, r = 0;
        MPI_Allreduce(&s, &r, 1, MPI_INT32_T, MPI_SUM, c); /* its group is set up */
    }
    job_start(&ja, c, counts[0], salt + 5, 0);
    MPI_Comm_free(&c);
    MPI_Wait(&ja.req, MPI_STATUS_IGNORE);
    ja.comm = MPI_COMM_WORLD; /* the same members; c is gone */
    job_check(&ja, "a communicator freed with a request in flight");

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    rc = MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL);
    expect(rc != MPI_SUCCESS, "MPI_Allreduce on MPI_COMM_NULL succeeded");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
}

/*
 * Ranks far apart (skew_ms, longer than AGG_COLL_TIMEOUT_MS in the test):
 * rank 0 starts an allreduce and sits in MPI_Recv while rank 1 is busy
 * elsewhere. MPI allows any such delay: a request nobody waits for yet must
 * not time out, though MPI's progress engine polls it all along.
 */
static void skewed(int skew_ms)
{
    job_t j;
    int token = 0;

    job_start(&j, MPI_COMM_WORLD, 1000, 77, 0);
    if (world_rank == 0) {
        MPI_Recv(&token, 1, MPI_INT, 1, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (world_rank == 1) {
        double until = MPI_Wtime() + skew_ms / 1000.0;
        while (MPI_Wtime() < until) {
            usleep(1000); /* busy with something else, not in MPI */
        }
        MPI_Send(&token, 1, MPI_INT, 0, 13, MPI_COMM_WORLD);
    }
    MPI_Wait(&j.req, MPI_STATUS_IGNORE);
    job_check(&j, "a request left waiting longer than the timeout while its rank was elsewhere");
}

/* Several communicators over the same ranks: in turn, then all at once. */
static void competing(int rounds)
{
    MPI_Comm comms[3];
    job_t jobs[3];
    int c, i;

    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &comms[2]);
    for (c = 0; c < 3; ++c) {
        /* a blocking call sets the group up: a non-blocking one never does */
        int32_t s = 0, r = -1;
        MPI_Allreduce(&s, &r, 1, MPI_INT32_T, MPI_SUM, comms[c]);
    }
    for (i = 0; i < rounds; ++i) {
        for (c = 0; c < 3; ++c) {
            job_start(&jobs[c], comms[c], (size_t)(200000 + 4096 * c), 1000 * c + i, i % 2);
            MPI_Wait(&jobs[c].req, MPI_STATUS_IGNORE);
            job_check(&jobs[c], "communicators in turn");
        }
        for (c = 0; c < 3; ++c) {
            job_start(&jobs[c], comms[c], (size_t)(300000 - 999 * c), 7000 * c + i, 0);
        }
        for (c = 2; c >= 0; --c) {
            MPI_Wait(&jobs[c].req, MPI_STATUS_IGNORE);
            job_check(&jobs[c], "communicators at once");
        }
        /* and blocking calls between them, small and large */
        for (c = 0; c < 3; ++c) {
            int32_t s = world_rank + c, r = -1;
            MPI_Allreduce(&s, &r, 1, MPI_INT32_T, MPI_MAX, comms[c]);
            checks++;
            failures += r != world_size - 1 + c;
        }
    }
    for (c = 0; c < 3; ++c) {
        MPI_Comm_free(&comms[c]);
    }
}

/* Counts the elements of got[0..n) that are not want(i); a failure says where. */
static void expect_block(const int32_t *got, size_t n, size_t first, int salt, int sum,
                         int from, const char *how)
{
    size_t i, bad = 0;
    int m;

    for (i = 0; i < n; ++i) {
        int32_t want = 0;

        if (sum) {
            for (m = 0; m < world_size; ++m) {
                want += val(m, first + i, salt);
            }
        } else {
            want = val(from, i, salt);
        }
        bad += got[i] != want;
    }
    checks++;
    if (bad) {
        failures++;
        fprintf(stderr, "rank %d: %s: %zu of %zu wrong\n", world_rank, how, bad, n);
    }
}

/*
 * The other non-blocking collectives the shim offloads: a reduce-scatter
 * (each rank's block of the sum) and an allgather (every rank's block), in
 * place and not, all in flight at once with an allreduce.
 */
static void other_collectives(int salt)
{
    enum { N = 5000 };
    size_t all = (size_t)N * (size_t)world_size, i;
    int32_t *rs = malloc(all * sizeof(int32_t)), *rs_out = malloc(N * sizeof(int32_t));
    int32_t *rs_ip = malloc(all * sizeof(int32_t)), *ag = malloc(N * sizeof(int32_t));
    int32_t *ag_out = malloc(all * sizeof(int32_t)), *ag_ip = malloc(all * sizeof(int32_t));
    /* every other element: a receive layout the shim packs through a buffer of its own */
    int32_t *ag_v = malloc(2 * all * sizeof(int32_t)), *strided = malloc(N * sizeof(int32_t));
    MPI_Datatype vec, every_other;
    MPI_Request reqs[6];
    job_t j;
    int m;

    for (i = 0; i < all; ++i) {
        rs[i] = rs_ip[i] = val(world_rank, i, salt);
        ag_out[i] = ag_ip[i] = -1;
    }
    for (i = 0; i < N; ++i) {
        ag[i] = ag_ip[(size_t)world_rank * N + i] = val(world_rank, i, salt);
    }
    for (i = 0; i < 2 * all; ++i) {
        ag_v[i] = -1;
    }
    MPI_Type_vector(N, 1, 2, MPI_INT32_T, &vec);
    MPI_Type_create_resized(vec, 0, (MPI_Aint)(2 * N * sizeof(int32_t)), &every_other);
    MPI_Type_commit(&every_other);
    MPI_Ireduce_scatter_block(rs, rs_out, N, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &reqs[0]);
    MPI_Ireduce_scatter_block(MPI_IN_PLACE, rs_ip, N, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD,
                              &reqs[1]);
    MPI_Iallgather(ag, N, MPI_INT32_T, ag_out, N, MPI_INT32_T, MPI_COMM_WORLD, &reqs[2]);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag_ip, N, MPI_INT32_T, MPI_COMM_WORLD,
                   &reqs[3]);
    MPI_Iallgather(ag, N, MPI_INT32_T, ag_v, 1, every_other, MPI_COMM_WORLD, &reqs[4]);
    MPI_Type_free(&every_other); /* the program may: the call keeps what it needs */
    MPI_Type_free(&vec);
    job_start(&j, MPI_COMM_WORLD, 4099, salt, 0);
    reqs[5] = j.req;
    MPI_Waitall(6, reqs, MPI_STATUSES_IGNORE);
    job_check(&j, "MPI_Iallreduce beside the others");
    expect_block(rs_out, N, (size_t)world_rank * N, salt, 1, 0, "MPI_Ireduce_scatter_block");
    expect_block(rs_ip, N, (size_t)world_rank * N, salt, 1, 0,
                 "MPI_Ireduce_scatter_block in place");
    for (m = 0; m < world_size; ++m) {
        expect_block(ag_out + (size_t)m * N, N, 0, salt, 0, m, "MPI_Iallgather");
        expect_block(ag_ip + (size_t)m * N, N, 0, salt, 0, m, "MPI_Iallgather in place");
        for (i = 0; i < N; ++i) {
            strided[i] = ag_v[(size_t)m * 2 * N + 2 * i];
        }
        expect_block(strided, N, 0, salt, 0, m, "MPI_Iallgather into every other element");
    }
    for (i = 1; i < 2 * all && ag_v[i] == -1; i += 2) {
        /* the gaps stay as they were */
    }
    checks++;
    if (i < 2 * all) {
        failures++;
        fprintf(stderr, "rank %d: MPI_Iallgather wrote a gap at %zu\n", world_rank, i);
    }
    free(rs);
    free(rs_out);
    free(rs_ip);
    free(ag);
    free(ag_out);
    free(ag_ip);
    free(ag_v);
    free(strided);
}

/* Reduce-scatters with per-rank counts: n + step x rank elements for rank. */
static void reduce_scatter_counts(int salt, int step)
{
    enum { N = 3000 };
    int *counts = calloc((size_t)world_size, sizeof(int)), m;
    size_t all = 0, first = 0, i, mine;
    int32_t *s, *r, *ip;
    MPI_Request req;

    for (m = 0; m < world_size; ++m) {
        counts[m] = N + step * m;
        first += m < world_rank ? (size_t)counts[m] : 0;
        all += (size_t)counts[m];
    }
    mine = (size_t)counts[world_rank];
    s  = malloc(all * sizeof(int32_t));
    ip = malloc(all * sizeof(int32_t));
    r  = malloc(mine * sizeof(int32_t));
    for (i = 0; i < all; ++i) {
        s[i] = ip[i] = val(world_rank, i, salt);
    }
    MPI_Reduce_scatter(s, r, counts, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    expect_block(r, mine, first, salt, 1, 0, step ? "MPI_Reduce_scatter, counts that differ"
                                                  : "MPI_Reduce_scatter, counts alike");
    MPI_Ireduce_scatter(MPI_IN_PLACE, ip, counts, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    expect_block(ip, mine, first, salt, 1, 0,
                 step ? "MPI_Ireduce_scatter in place, counts that differ"
                      : "MPI_Ireduce_scatter in place, counts alike");
    free(counts);
    free(s);
    free(r);
    free(ip);
}

/*
 * Allgathervs: rank m sends n + step x m elements (none for rank 1 when
 * step is not 0), gathered back to back (the tree's own layout), at
 * displacements in reverse rank order with gaps, and into every other
 * element (a type that is not contiguous); blocking and not, in place and
 * not. Every block is checked where it belongs, every gap left as it was.
 */
static void allgatherv_check(int salt, int step)
{
    enum { N = 1500, GAP = 3, KINDS = 5 };
    static const char *const how[KINDS] = {
        "MPI_Allgatherv, packed", "MPI_Allgatherv in place, reversed with gaps",
        "MPI_Iallgatherv in place, packed", "MPI_Iallgatherv, reversed with gaps",
        "MPI_Allgatherv into every other element"};
    int *counts = calloc((size_t)world_size, sizeof(int));
    int *packed = calloc((size_t)world_size, sizeof(int));
    int *gaps = calloc((size_t)world_size, sizeof(int));
    int32_t *mine, *out;
    size_t all = 0, span, i, bad;
    MPI_Datatype every_other;
    MPI_Request req;
    int m, k;

    for (m = 0; m < world_size; ++m) {
        counts[m] = step != 0 && m == 1 ? 0 : N + step * m;
        packed[m] = (int)all;
        all += (size_t)counts[m];
    }
    for (i = 0, m = world_size - 1; m >= 0; --m) {
        gaps[m] = (int)i + GAP;
        i += (size_t)counts[m] + GAP;
    }
    span = 2 * (all + (size_t)GAP * (size_t)world_size + GAP);
    mine = malloc(((size_t)counts[world_rank] + 1) * sizeof(int32_t));
    out  = malloc(span * sizeof(int32_t));
    for (i = 0; i < (size_t)counts[world_rank]; ++i) {
        mine[i] = val(world_rank, i, salt);
    }
    MPI_Type_create_resized(MPI_INT32_T, 0, 2 * sizeof(int32_t), &every_other);
    MPI_Type_commit(&every_other);
    for (k = 0; k < KINDS; ++k) {
        const int *displs = k == 1 || k == 3 ? gaps : packed;
        int stride = k == 4 ? 2 : 1, in_place = k == 1 || k == 2;

        for (i = 0; i < span; ++i) {
            out[i] = -7;
        }
        if (in_place) {
            memcpy(out + displs[world_rank], mine, (size_t)counts[world_rank] * sizeof(int32_t));
        }
        switch (k) {
        case 0:
        case 1:
            MPI_Allgatherv(in_place ? MPI_IN_PLACE : mine, counts[world_rank], MPI_INT32_T, out,
                           counts, displs, MPI_INT32_T, MPI_COMM_WORLD);
            break;
        case 2:
        case 3:
            MPI_Iallgatherv(in_place ? MPI_IN_PLACE : mine, counts[world_rank], MPI_INT32_T,
                            out, counts, displs, MPI_INT32_T, MPI_COMM_WORLD, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            break;
        default:
            MPI_Allgatherv(mine, counts[world_rank], MPI_INT32_T, out, counts, displs,
                           every_other, MPI_COMM_WORLD);
            break;
        }
        for (m = 0; m < world_size; ++m) { /* each block where it belongs */
            for (i = 0, bad = 0; i < (size_t)counts[m]; ++i) {
                bad += out[(size_t)stride * ((size_t)displs[m] + i)] != val(m, i, salt);
            }
            checks++;
            if (bad) {
                failures++;
                fprintf(stderr, "rank %d: %s (step %d): block of %d: %zu of %d wrong\n",
                        world_rank, how[k], step, m, bad, counts[m]);
            }
        }
        for (i = 0, bad = 0; i < span; ++i) { /* the rest as it was */
            int in_block = 0;

            for (m = 0; m < world_size && !in_block; ++m) {
                in_block = i % (size_t)stride == 0 && i / (size_t)stride >= (size_t)displs[m] &&
                           i / (size_t)stride < (size_t)displs[m] + (size_t)counts[m];
            }
            bad += !in_block && out[i] != -7;
        }
        checks++;
        if (bad) {
            failures++;
            fprintf(stderr, "rank %d: %s (step %d): %zu elements outside the blocks written\n",
                    world_rank, how[k], step, bad);
        }
    }
    MPI_Type_free(&every_other);
    free(counts);
    free(packed);
    free(gaps);
    free(mine);
    free(out);
}

/* The first collective on communicators just made is a non-blocking one. */
static void fresh_communicator(int salt)
{
    MPI_Comm dup, split;
    job_t a, b;

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &split);
    job_start(&a, dup, 1000, salt, 0);
    job_start(&b, split, 70000, salt + 1, 1);
    MPI_Wait(&b.req, MPI_STATUS_IGNORE);
    MPI_Wait(&a.req, MPI_STATUS_IGNORE);
    job_check(&a, "MPI_Iallreduce first on a new communicator (dup)");
    job_check(&b, "MPI_Iallreduce first on a new communicator (split), in place");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
}

int main(int argc, char **argv)
{
    long totals[2], sums[2];
    int rounds = 4, skew_ms = 0, i;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--skew-ms") == 0 && i + 1 < argc) {
            skew_ms = atoi(argv[++i]);
        }
    }
    for (i = 0; i < rounds; ++i) {
        out_of_order(MPI_COMM_WORLD, 10 * i);
        with_p2p(i);
        other_collectives(1000 + i);
        fresh_communicator(2000 + i);
        reduce_scatter_counts(3000 + i, 0);
        reduce_scatter_counts(4000 + i, 7);
        allgatherv_check(5000 + i, 0);
        allgatherv_check(6000 + i, 11);
    }
    if (world_size >= 2) {
        semantics(500);
        if (skew_ms > 0) {
            skewed(skew_ms);
        }
    }
    competing(rounds);
    totals[0] = checks;
    totals[1] = failures;
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0) {
        printf("nb_check: %ld passed, %ld failed\n", sums[0] - sums[1], sums[1]);
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
