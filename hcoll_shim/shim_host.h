/*
 * The shim's own host allreduce: recursive doubling, Rabenseifner and a
 * pipelined ring over PMPI point-to-point, for the calls that stay on the
 * host. Independent of libagg, so a benchmark can compile it on its own.
 */
#ifndef SHIM_HOST_H
#define SHIM_HOST_H

#include <mpi.h>
#include <stddef.h>

/* The one tag of every message the host algorithms send on their communicator. */
#define SHIM_HOST_TAG 0x5348

typedef enum shim_host_alg {
    SHIM_ALG_RECURSIVE_DOUBLING = 0,
    SHIM_ALG_RABENSEIFNER       = 1,
    SHIM_ALG_RING               = 2,
    SHIM_ALG__COUNT
} shim_host_alg_t;

/* "recursive_doubling", "rabenseifner", "ring"; "unknown" out of range. */
const char *shim_host_alg_name(shim_host_alg_t alg);

/* Size thresholds: bytes < rd_max -> recursive doubling; < rab_max -> Rabenseifner; else ring. */
typedef struct shim_host_tune {
    size_t rd_max;
    size_t rab_max;
} shim_host_tune_t;

/* Fills t with the thresholds measured for comm_size ranks on shared memory. */
void shim_host_tune_static(shim_host_tune_t *t, int comm_size);

/*
 * Collective over comm: times the three algorithms at a few sizes (a few ms
 * in all); rank 0 decides and broadcasts, so every rank gets the same t.
 * Returns an MPI error code; t is set only on MPI_SUCCESS.
 */
int shim_host_tune_dynamic(shim_host_tune_t *t, MPI_Comm comm);

/* The algorithm t gives for a message of `bytes` bytes on comm_size ranks. */
shim_host_alg_t shim_host_choose(const shim_host_tune_t *t, size_t bytes, int comm_size);

/*
 * Allreduce of count elements of a PREDEFINED contiguous datatype. The
 * caller guarantees: not derived, commutative op, intracommunicator, `comm`
 * a private duplicate used only for these calls. sbuf may be MPI_IN_PLACE.
 * Every rank ends with the same bits. Returns an MPI error code.
 */
int shim_host_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype,
                        MPI_Op op, MPI_Comm comm, shim_host_alg_t alg);

/*
 * The ring with the data on a device (shim_gpu.c): the same messages as
 * shim_host_allreduce's ring (so ranks whose buffers are on the host take
 * part unchanged), through mirror, a host buffer of count elements that
 * stands for the device result. The device side moves and reduces through
 * dev's calls; each returns an MPI error code. Offsets and counts are in
 * elements.
 */
typedef struct shim_host_dev {
    void *arg;
    /* The result starts as this rank's data, and its [off, +cnt) is in mirror on return. */
    int (*own)(void *arg, int off, int cnt);
    /* mirror's [off, +cnt) has arrived: result op= it (may return before it is done). */
    int (*reduce)(void *arg, int off, int cnt);
    /* The result's [off, +cnt) into mirror; every earlier call done on return. */
    int (*fetch)(void *arg, int off, int cnt);
    /* mirror's [off, +cnt) into the result (done by the next fetch). */
    int (*put)(void *arg, int off, int cnt);
} shim_host_dev_t;

int shim_host_ring_dev(void *mirror, int count, MPI_Datatype dtype, MPI_Op op, MPI_Comm comm,
                       const shim_host_dev_t *dev);

/* Frees the calling thread's scratch buffer (at MPI_Finalize). */
void shim_host_cleanup(void);

#endif
