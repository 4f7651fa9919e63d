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
    /*
     * The caller's own progress engine (MPI's), or NULL. A wait in libagg
     * calls it whenever its own poll moved nothing, so that the messages
     * other members need from this process keep moving while it waits (a
     * peer's synchronous send, the caller's own non-blocking requests).
     * libagg's waits then sleep at most 1 ms at a time.
     */
    int           (*progress)(void *arg);
    void           *progress_arg;
    /*
     * Non-zero: calls on different communicators of this context may come
     * from different threads at once (MPI_THREAD_MULTIPLE). Calls on one
     * communicator are still one at a time, as MPI requires of the
     * collectives on a communicator; a request may be tested or waited for
     * from any thread.
     */
    int             thread_safe;
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
    uint32_t features;        /* AGG_FEATURE_* */
    uint32_t sat_chunk;       /* bytes per SAT chunk */
    uint64_t sat_threshold;   /* bytes from which an allreduce may use SAT (rank 0's) */
    uint32_t op_mask[AGG_DTYPE__COUNT]; /* per dtype: bit per agg_op_t the tree reduces */
    uint32_t colls;           /* bit per agg_coll_type_t */
} agg_caps_t;

#define AGG_FEATURE_LLT          0x1u
#define AGG_FEATURE_REPRODUCIBLE 0x2u
#define AGG_FEATURE_SAT          0x4u /* the job has SAT trees */
#define AGG_FEATURE_SAT_LOCK     0x8u /* exclusive SAT lock per switch */
#define AGG_FEATURE_SHARED_ADAPTER 0x10u /* some ranks of a host share an adapter */

typedef struct agg_comm_spec {
    int             rank;        /* in the communicator */
    int             size;
    const int      *world_ranks; /* size entries: world rank of each member */
    void           *oob_ctx;     /* the context's oob callbacks run on this */
} agg_comm_spec_t;

/*
 * Where a buffer lives. Device buffers (and managed memory) are staged
 * through pinned host buffers on their way to the tree, the copies
 * pipelined with the aggregation. libagg asks the GPU runtime what every
 * buffer is (cached by allocation), so a mislabelled one is still handled
 * right; with no GPU backend loaded (SHARP_COLL_ENABLE_CUDA=0, or no
 * runtime or device) a buffer declared CUDA or ROCm is refused with
 * AGG_ERR_NOT_SUPPORTED and never read.
 */
typedef enum agg_mem_type {
    AGG_MEM_HOST = 0,
    AGG_MEM_CUDA = 1,
    AGG_MEM_ROCM = 2,
} agg_mem_type_t;

/*
 * What p points to, as the loaded GPU backend says (AGG_MEM_HOST when none
 * is loaded, for host and pinned host memory, and for NULL); *device (may be
 * NULL) gets its device or -1. A backend is loaded by agg_context_init.
 */
AGG_API agg_mem_type_t agg_mem_query(const void *p, int *device);

/* Which tree an operation uses (SHARP's aggregation mode). */
typedef enum agg_aggr_mode {
    AGG_AGGR_AUTO = 0, /* SAT from sat_threshold bytes when enabled and available, else LLT */
    AGG_AGGR_LLT  = 1, /* the low-latency tree, pipelined in fragments ("datagram") */
    AGG_AGGR_SAT  = 2, /* streaming; AGG_ERR_SAT_UNAVAILABLE / _LOCK_BUSY when it cannot */
} agg_aggr_mode_t;

/*
 * One reduction. Zero-initialise it: the fields after `op` default to host
 * memory and the automatic choice of tree.
 */
typedef struct agg_reduce_spec {
    const void     *sbuf;   /* may equal rbuf (in place) */
    void           *rbuf;
    size_t          count;  /* elements */
    agg_dtype_t     dtype;
    agg_op_t        op;
    agg_mem_type_t  sbuf_mem;
    agg_mem_type_t  rbuf_mem;
    agg_aggr_mode_t mode;
    int             root;   /* agg_reduce: the member that gets the result */
    const size_t   *counts; /* reduce_scatter: member i's block is counts[i] elements, the
                               blocks back to back in member order (count is then unused);
                               NULL: count each. Read during the call only. */
} agg_reduce_spec_t;

/*
 * A collective that moves bytes rather than reducing them (bcast,
 * allgather). Zero-initialise it.
 */
typedef struct agg_data_spec {
    const void     *sbuf;   /* allgather: this member's block (may be in rbuf, at its place) */
    void           *rbuf;   /* bcast: the buffer (read at the root, written elsewhere);
                               allgather: size x bytes, member i's block at i x bytes */
    size_t          bytes;  /* bcast: the message; allgather: one member's block */
    int             root;   /* bcast */
    agg_mem_type_t  sbuf_mem;
    agg_mem_type_t  rbuf_mem;
    const size_t   *counts; /* allgather: member i's block is counts[i] bytes, the blocks
                               back to back in member order (bytes is then unused); NULL:
                               bytes each. Read during the call only. */
} agg_data_spec_t;

/* Which collective a request is (agg_request_info, agg_comm_stats). */
typedef enum agg_coll_type {
    AGG_COLL_ALLREDUCE      = 0,
    AGG_COLL_REDUCE         = 1,
    AGG_COLL_BCAST          = 2,
    AGG_COLL_BARRIER        = 3,
    AGG_COLL_REDUCE_SCATTER = 4,
    AGG_COLL_ALLGATHER      = 5,
    AGG_COLL__COUNT
} agg_coll_type_t;

/* A collective in flight (agg_iallreduce); test, wait and free it. */
typedef struct agg_request agg_request_t;

/* How a request went (agg_request_info): for logs and counters. */
typedef struct agg_request_info {
    agg_coll_type_t coll;
    agg_aggr_mode_t tree;    /* AGG_AGGR_LLT or AGG_AGGR_SAT: the tree that carried it */
    agg_status_t    why_llt; /* a call that would have gone to SAT but went to the LLT: why
                                (AGG_ERR_SAT_LOCK_BUSY; the communicator has no SAT group:
                                AGG_ERR_NO_RESOURCE when a switch's SAT flows were all
                                taken, AGG_ERR_SAT_UNAVAILABLE or another reason
                                otherwise); else AGG_OK */
    size_t          fragments;
    size_t          written; /* an in-place allreduce on host memory, failed or not: the
                                elements at rbuf's start that hold the result; the rest
                                holds the input still. SIZE_MAX where that is not known (out
                                of place, device memory, SAT zero copy) */
} agg_request_info_t;

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
 * Blocking allreduce through the aggregation tree: agg_iallreduce, then
 * agg_request_wait. Supported: agg_reduce_fn(dtype, op) != NULL.
 */
AGG_API agg_status_t agg_allreduce(agg_comm_t *comm, const agg_reduce_spec_t *spec);

/*
 * Starts an allreduce and returns at once with a request. Requests on a
 * communicator share its window of fragments in flight and may be completed
 * (tested, waited for) in any order; every member posts them in the same
 * order. The buffers belong to the request until it completes.
 */
AGG_API agg_status_t agg_iallreduce(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                    agg_request_t **req);

/*
 * Persistent requests: agg_allreduce_init checks spec and makes a request
 * that is not started; each agg_request_post starts it (the tree is chosen
 * then, as for agg_iallreduce), and once it completes (test or wait says so)
 * it may be posted again, with whatever the buffers hold then. Test and wait
 * on a request not posted return AGG_OK at once. Free such requests before
 * their communicator is destroyed. agg_iallreduce is init + post.
 */
AGG_API agg_status_t agg_allreduce_init(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                        agg_request_t **req);

/* Starts a request; AGG_ERR_INVALID_PARAM while it is still in flight. */
AGG_API agg_status_t agg_request_post(agg_request_t *req);

/*
 * Drives the request's communicator, never blocking. AGG_OK: complete and
 * right; AGG_INPROGRESS: not yet; an error: complete and failed (the
 * communicator stays usable for the next ones).
 */
AGG_API agg_status_t agg_request_test(agg_request_t *req);

/*
 * Like agg_request_test, but never times out: for a progress engine that
 * polls every request in flight whether or not anybody waits for it yet
 * (MPI allows any delay between the members of a non-blocking collective).
 * agg_request_test and agg_request_wait fail a request that saw no progress
 * for coll_timeout_ms (rank 0's value) while they were called.
 */
AGG_API agg_status_t agg_request_poll(agg_request_t *req);

/* Drives until the request completes or coll_timeout_ms pass with no progress. */
AGG_API agg_status_t agg_request_wait(agg_request_t *req);

/*
 * Lets go of a request. One still in flight completes in the background (its
 * result is still written to rbuf); its buffers must stay valid until then.
 */
AGG_API void agg_request_free(agg_request_t *req);

/*
 * The other collectives, each in three forms like allreduce: blocking,
 * non-blocking (a request), and persistent (_init, then agg_request_post).
 * Every member calls them with the same count, type, op and root; a member
 * whose call differs makes the call fail on every member
 * (AGG_ERR_DATA_MISMATCH), never return garbage.
 *
 * reduce: spec->count elements reduced into the root's rbuf (rbuf is not
 *   written on the other members and may be NULL there).
 * reduce_scatter: sbuf holds size x spec->count elements; member i gets
 *   the reduction of block i in rbuf (spec->count elements). With
 *   spec->counts, block i is counts[i] elements and sbuf holds their sum
 *   (MPI_Reduce_scatter's form). sbuf and rbuf must not overlap.
 * bcast: spec->bytes of the root's rbuf into every member's rbuf.
 * allgather: every member's spec->bytes block into every member's rbuf, in
 *   member order; with spec->counts, member i's block is counts[i] bytes
 *   (MPI_Allgatherv's, the blocks back to back).
 * barrier: returns once every member has called it.
 */
AGG_API agg_status_t agg_reduce(agg_comm_t *comm, const agg_reduce_spec_t *spec);
AGG_API agg_status_t agg_ireduce(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                 agg_request_t **req);
AGG_API agg_status_t agg_reduce_init(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                     agg_request_t **req);
AGG_API agg_status_t agg_reduce_scatter(agg_comm_t *comm, const agg_reduce_spec_t *spec);
AGG_API agg_status_t agg_ireduce_scatter(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                         agg_request_t **req);
AGG_API agg_status_t agg_reduce_scatter_init(agg_comm_t *comm, const agg_reduce_spec_t *spec,
                                             agg_request_t **req);
AGG_API agg_status_t agg_bcast(agg_comm_t *comm, const agg_data_spec_t *spec);
AGG_API agg_status_t agg_ibcast(agg_comm_t *comm, const agg_data_spec_t *spec,
                                agg_request_t **req);
AGG_API agg_status_t agg_bcast_init(agg_comm_t *comm, const agg_data_spec_t *spec,
                                    agg_request_t **req);
AGG_API agg_status_t agg_allgather(agg_comm_t *comm, const agg_data_spec_t *spec);
AGG_API agg_status_t agg_iallgather(agg_comm_t *comm, const agg_data_spec_t *spec,
                                    agg_request_t **req);
AGG_API agg_status_t agg_allgather_init(agg_comm_t *comm, const agg_data_spec_t *spec,
                                        agg_request_t **req);
AGG_API agg_status_t agg_barrier(agg_comm_t *comm);
AGG_API agg_status_t agg_ibarrier(agg_comm_t *comm, agg_request_t **req);

/* What a communicator did since it was created. */
typedef struct agg_comm_stats {
    uint64_t calls[AGG_COLL__COUNT][2]; /* completed, [coll][0: LLT, 1: SAT] */
    uint64_t bytes[AGG_COLL__COUNT];    /* of the tree's vector (allgather: all blocks) */
    uint64_t errors[AGG_COLL__COUNT];   /* completed with an error */
    uint64_t sat_fallbacks;             /* SAT requests that went to the LLT */
} agg_comm_stats_t;

AGG_API agg_status_t agg_comm_stats(const agg_comm_t *comm, agg_comm_stats_t *stats);

/* Logs the communicator's stats at INFO: one line per collective it ran. */
AGG_API void agg_comm_dump_stats(const agg_comm_t *comm);

/* Name of a collective ("allreduce", "reduce_scatter", ...). */
AGG_API const char *agg_coll_name(agg_coll_type_t coll);

/* Which tree carried a request, and why a SAT one went to the LLT. */
AGG_API void agg_request_info(const agg_request_t *req, agg_request_info_t *info);

/* Drives every request of the communicator once; returns how many steps were made. */
AGG_API unsigned agg_comm_progress(agg_comm_t *comm);

/* Whether the communicator has a SAT group (SHARP_COLL_ENABLE_SAT and a SAT flow). */
AGG_API int agg_comm_has_sat(const agg_comm_t *comm);

/*
 * Memory registration (SHARP's reg_mr / dereg_mr) with a registration
 * cache: registering a buffer inside one already registered is a cache hit,
 * and a deregistered buffer stays cached (up to 256 registrations, least
 * recently used unheld ones evicted first). Host memory is checked to be
 * mapped (AGG_ERR_INVALID_PARAM otherwise) and locked in RAM where
 * RLIMIT_MEMLOCK allows. Device memory (AGG_MEM_CUDA/ROCM) must be one
 * allocation of the loaded GPU backend's; with
 * SHARP_COLL_ENABLE_GPU_DIRECT_RDMA not 0 it is exported as a dma-buf for a
 * transport that imports one (agg_mem_stats_t.dmabuf counts them; =1 makes
 * a failed export an error). Registration is optional for the collectives.
 */
typedef struct agg_mem_reg agg_mem_reg_t;

typedef struct agg_mem_stats {
    uint64_t hits;         /* registrations answered from the cache */
    uint64_t misses;       /* registrations made */
    uint64_t evictions;    /* cached registrations dropped for room */
    uint64_t locked_bytes; /* bytes locked in RAM, over all registrations made */
    uint32_t cached;       /* registrations in the cache now */
    uint32_t held;         /* of which registered and not yet deregistered */
    uint64_t dmabuf;       /* device registrations exported as dma-buf (GPU-direct) */
} agg_mem_stats_t;

AGG_API agg_status_t agg_mem_register(agg_context_t *ctx, const void *addr, size_t length,
                                      agg_mem_type_t mem, agg_mem_reg_t **reg);
AGG_API agg_status_t agg_mem_deregister(agg_context_t *ctx, agg_mem_reg_t *reg);
AGG_API agg_status_t agg_mem_stats(agg_context_t *ctx, agg_mem_stats_t *stats);

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
