/* hcoll_shim internals, shared by its files. */
#ifndef SHIM_H
#define SHIM_H

#include <mpi.h>
#include "agg/agg.h"
#include "agg/reduce.h"

#define SHIM_API __attribute__((visibility("default")))

typedef enum shim_comm_state {
    SHIM_COMM_READY = 1, /* offloaded */
    SHIM_COMM_HOST  = 2, /* decided once: host path for this communicator */
} shim_comm_state_t;

typedef struct shim_comm {
    shim_comm_state_t state;
    MPI_Comm          oob;   /* private duplicate for libagg's out-of-band calls */
    agg_comm_t       *agg;
    struct shim_comm *next;
} shim_comm_t;

/* A non-blocking allreduce in the network, behind a generalized MPI request. */
typedef struct shim_req {
    agg_request_t   *agg;
    MPI_Request      greq;
    shim_comm_t     *sc;
    int              error;  /* MPI error class once done with an error */
    struct shim_req *next;
} shim_req_t;

typedef struct shim_state {
    int            level;       /* HCOLL_ENABLE_SHARP */
    long long      np;          /* HCOLL_SHARP_NP */
    long long      max_bytes;   /* HCOLL_ALLREDUCE_SHARP_MAX, 0 = no limit */
    long long      large_bytes; /* sat_threshold: what "large" means for the next one */
    int            large_host;  /* HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG != 4: large ones on the host */
    int            world_rank;
    int            world_size;
    MPI_Comm       world_oob;
    int            keyval;
    agg_context_t *ctx;
    shim_comm_t   *comms;
    shim_req_t    *active;      /* non-blocking requests still in the network */
    int            progressing; /* shim_progress is on the stack, or the list is being changed */
    int          (*opal_progress)(void);                  /* Open MPI's, when it has one */
    int          (*opal_unregister)(int (*cb)(void));
    int            registered;  /* shim_progress is one of Open MPI's progress callbacks */
    unsigned long  offloaded, offloaded_nb, host_calls, fallbacks;
} shim_state_t;

extern shim_state_t shim;

/* The agg datatype of a predefined MPI datatype; -1 if none (derived, long double...). */
int shim_map_dtype(MPI_Datatype dtype);

/* The agg op of a predefined MPI op; -1 for user ops and REPLACE/NO_OP. */
int shim_map_op(MPI_Op op);

/* The offload state of `comm`, creating its group at first use; collective. */
shim_comm_t *shim_comm_get(MPI_Comm comm);

/* The offload state of `comm` if it has one already, else NULL; not collective. */
shim_comm_t *shim_comm_peek(MPI_Comm comm);

/*
 * Posts spec on sc as a non-blocking allreduce and gives the caller a
 * generalized MPI request that completes with it. MPI_SUCCESS, or an error
 * before anything was sent (the caller then takes the host path).
 */
int shim_ireq_start(shim_comm_t *sc, const agg_reduce_spec_t *spec, MPI_Request *request);

/* Completes every request of sc still in the network (before sc goes). */
void shim_requests_finish(shim_comm_t *sc);

/*
 * Moves every non-blocking request on; completes the MPI requests of
 * finished ones. Registered with Open MPI's progress engine, so that a rank
 * blocked in any MPI call (an MPI_Recv, say) still moves its requests on, as
 * it would with a network that needs no host; a no-op when re-entered.
 */
int shim_progress(void);

/* The same, where the program waits for (or tests) reqs[0 .. n): only those may time out. */
int shim_progress_for(const MPI_Request *reqs, int n);

/* Drops the network side of the requests still active (MPI_Finalize). */
void shim_requests_abandon(void);

#endif
