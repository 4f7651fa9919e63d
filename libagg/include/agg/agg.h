/*
 * libagg: the client library of the in-network aggregation stack (the role
 * of libsharp_coll). A process creates one context per job, one
 * communicator per group of ranks, and runs collectives on it; the
 * reductions happen in the aggregation nodes, not on the hosts.
 *
 * Every rank makes the same calls in the same order (they are collective
 * over the job or the communicator), and every decision that could differ
 * between ranks is taken by one rank and broadcast, so ranks never disagree
 * on whether the network is used.
 */
#ifndef AGG_AGG_H
#define AGG_AGG_H

#include <stddef.h>
#include <stdint.h>
#include "agg/reduce.h"
#include "agg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AGG_API __attribute__((visibility("default")))

/*
 * Out-of-band collectives supplied by the caller (e.g. over MPI). Each
 * returns 0 on success. `ctx` is the oob_ctx of the context or communicator.
 */
typedef struct agg_oob_colls {
    int (*bcast)(void *ctx, void *buf, size_t size, int root);
    int (*barrier)(void *ctx);
    int (*gather)(void *ctx, int root, const void *sbuf, void *rbuf, size_t size);
} agg_oob_colls_t;

typedef struct agg_context_spec {
    int             world_rank;
    int             world_size;
    int             local_size;  /* ranks of the job on this host; 0 = unknown */
    agg_oob_colls_t oob;
    void           *oob_ctx;   /* for the whole job */
    const char     *config_file; /* NULL: $AGG_CONFIG_FILE if set */
} agg_context_spec_t;

typedef struct agg_context agg_context_t;
typedef struct agg_comm agg_comm_t;

typedef struct agg_caps {
    uint32_t dtypes;          /* bit per agg_dtype_t */
    uint32_t ops;             /* bit per agg_op_t */
    uint32_t max_osts;        /* granted to the job on every tree node */
    uint32_t payload_per_ost; /* bytes per fragment */
    uint32_t max_groups;
    uint32_t osts_per_group;
    uint32_t tree_depth;
} agg_caps_t;

typedef struct agg_comm_spec {
    int             rank;        /* in the communicator */
    int             size;
    const int      *world_ranks; /* size entries: world rank of each member */
    void           *oob_ctx;     /* the context's oob callbacks run on this */
} agg_comm_spec_t;

typedef struct agg_reduce_spec {
    const void *sbuf;   /* may equal rbuf (in place) */
    void       *rbuf;
    size_t      count;  /* elements */
    agg_dtype_t dtype;
    agg_op_t    op;
} agg_reduce_spec_t;

/*
 * Creates the job: rank 0 connects to aggmgr (AGG_AM_ADDR) and creates it,
 * then broadcasts the answer. Collective over the job. On failure no
 * context is returned and every rank gets the same status.
 * AGG_ERR_SESSION_INIT means the manager could not be reached;
 * agg_context_last_error() says where it was looked for.
 */
AGG_API agg_status_t agg_context_init(const agg_context_spec_t *spec,
                                      agg_context_t **ctx);

/* Destroys the job (rank 0 tells aggmgr). Collective. */
AGG_API agg_status_t agg_context_finalize(agg_context_t *ctx);

AGG_API agg_status_t agg_caps_query(agg_context_t *ctx, agg_caps_t *caps);

/*
 * Creates a group for the communicator's members on the job's tree.
 * Collective over the communicator. AGG_ERR_QUOTA / AGG_ERR_NO_RESOURCE are
 * ordinary answers: the caller falls back to host collectives.
 */
AGG_API agg_status_t agg_comm_init(agg_context_t *ctx, const agg_comm_spec_t *spec,
                                   agg_comm_t **comm);

/* Destroys the group. Collective over the communicator. */
AGG_API agg_status_t agg_comm_destroy(agg_comm_t *comm);

/*
 * Frees this process's side of a communicator without talking to anyone;
 * the group itself is released with the job by agg_context_finalize. For
 * shutdown paths where the members cannot meet any more.
 */
AGG_API void agg_comm_abandon(agg_comm_t *comm);

/*
 * Blocking allreduce through the aggregation tree. The buffer is cut into
 * fragments of the job's payload per OST, never more in flight than the
 * group's OSTs. Supported: agg_reduce_fn(dtype, op) != NULL.
 */
AGG_API agg_status_t agg_allreduce(agg_comm_t *comm, const agg_reduce_spec_t *spec);

/* Fragments this process has sent through the tree since the context began. */
AGG_API uint64_t agg_context_fragments_sent(const agg_context_t *ctx);

/* The last error message of a failed init on this process ("" if none). */
AGG_API const char *agg_context_last_error(void);

/* Re-exported helpers. */
AGG_API const char *agg_strerror(agg_status_t status);

#ifdef __cplusplus
}
#endif

#endif
