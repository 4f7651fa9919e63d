/* libagg internals shared by its files; not installed. */
#ifndef AGG_INTERNAL_H
#define AGG_INTERNAL_H

#include <pthread.h>

#include "agg/agg.h"
#include "agg/auth.h"
#include "agg/conf.h"
#include "agg/dp.h"
#include "agg/wire.h"

struct agg__group;

/*
 * The settings behind the per-call choices every member must make alike
 * (SAT or LLT, when to give the SAT lock back, how long to retry it): rank
 * 0's hold for the whole job (agg_context_init broadcasts them).
 */
typedef struct agg__alike {
    uint64_t sat_threshold;
    int32_t  enable_sat;
    uint32_t sat_chunk;
    uint32_t sat_depth;
    uint32_t sat_batch;      /* 0 = keep the lock */
    int32_t  sat_retries;
    int32_t  sat_retry_us;
    int32_t  lock_on_init;
    int32_t  reproducible;
    uint32_t osts_per_group;
    int32_t  coll_timeout_ms; /* one rank giving up alone would leave the others waiting */
} agg__alike_t;

struct agg_context {
    agg_conf_t      conf;
    int             world_rank;
    int             world_size;
    agg_oob_colls_t oob;
    void           *oob_ctx;
    int             am_fd;         /* connection to aggmgr, -1 until needed */
    uint64_t        job_key;
    agg_msg_job_create_reply_t job; /* host order, identical on every rank */
    agg__alike_t    alike;
    long            spin_count;
    int             connect_timeout_ms;
    uint32_t        tcp_lanes;     /* connections per SAT member over TCP */
    int             net_resend_ms; /* a fragment unanswered over TCP goes again after this */
    int             num_groups;    /* groups created (LLT and SAT), for the INFO lines */
    struct agg_comm *comms;        /* every communicator, so a wait moves them all */
    int           (*progress)(void *arg); /* the caller's progress engine, or NULL */
    void           *progress_arg;
    uint64_t        frags_sent;    /* atomic */
    struct agg__rcache *rcache;    /* registrations (agg_mem.c), made at the first one */
    int             mt;            /* thread_safe asked for: the locks below are used */
    pthread_mutex_t lock;          /* comms list, num_groups */
    pthread_mutex_t am_lock;       /* am_fd (agg_am_link.c), always taken */
    pthread_cond_t  am_cond;       /* wakes the watcher to stop */
    pthread_t       am_watch;      /* rank 0: claims the job again after a restart */
    int             am_watching;
    int             am_watch_stop; /* under am_lock */
    /* this rank's own, read once */
    int             rank_progress;
    int             sat_zcopy;
    agg_auth_t      auth;          /* the shared secret, for switchsims off loopback */
};

/* Endpoints a tree of a group of n members may have (parts of it times transports). */
#define AGG__MAX_EPS(n) (4 * (n) + 16)

/* One tree of a group as this member sees it (from GROUP_CREATE_REPLY). */
typedef struct agg__tree_info {
    int32_t             status;    /* AGG_OK: the group has this part */
    uint32_t            tree;      /* agg_tree_type_t */
    uint32_t            tree_id;
    uint32_t            osts;      /* fragments in flight */
    uint32_t            payload;   /* bytes per fragment (LLT) or chunk (SAT) */
    uint32_t            depth;
    uint32_t            nodes;
    uint64_t            root_guid;
    uint32_t            channel;   /* this member's channel at its endpoint */
    uint64_t            leaf_guid;
    agg_wire_endpoint_t ep;        /* this member's endpoint */
} agg__tree_info_t;

/* What a transport is handed: one fragment, where it is and where the result goes. */
typedef struct agg_tl_frag {
    uint64_t       n;       /* fragment number in the group's sequence */
    agg_frag_desc_t desc;
    uint8_t        empty;   /* this member adds no data (src unused) */
    int32_t        status;  /* not AGG_OK: the member gave up; the fragment fails for all */
    const void    *src;     /* count elements (NULL when count is 0 or status is set); */
    uint32_t       src_off; /*   ALLGATHER: src_len elements, at src_off of the fragment */
    uint32_t       src_len;
    agg_mem_type_t src_mem;
    void          *dst;     /* where elements dst_off .. + dst_len of the result go */
    uint32_t       dst_off; /*   (dst NULL: nowhere) */
    uint32_t       dst_len;
    agg_mem_type_t dst_mem;
    uint8_t        at_complete; /* the result lands in dst at complete() and only then, even
                                   where the transport could land it as it arrives */
} agg_tl_frag_t;

/* What a transport can do (agg_tl_ops_t.query). */
typedef struct agg_tl_attr {
    unsigned mem_types;           /* 1u << agg_mem_type_t for each memory it moves itself
                                     (others are staged through host memory) */
    int      results_at_complete; /* results land in dst only at complete(); 0: they may land
                                     as they arrive, and forget() must stop that */
} agg_tl_attr_t;

/*
 * A transport carries this member's fragments to its leaf aggregation node
 * and brings the group's results back. Chosen per group by the type of the
 * endpoint aggmgr gave (agg__tl_for); the request engine only sees this
 * table. A new transport is one file with these ops and one line in
 * agg_tl.c; switchsim offers its endpoint (switchsim_ctl.c).
 */
typedef struct agg_tl_ops {
    const char *name;
    uint32_t    type; /* agg_tl_type_t: the endpoints it attaches to */
    void (*query)(agg_tl_attr_t *attr);
    /* Joins the group at the endpoint in info; *tl is the transport's state. */
    agg_status_t (*attach)(agg_context_t *ctx, const agg__tree_info_t *info, int rank,
                           void **tl);
    void (*detach)(void *tl);
    /* Hands a fragment to the network, reading f->src; AGG_INPROGRESS: busy, post again. */
    agg_status_t (*post)(void *tl, const agg_tl_frag_t *f);
    /* The fragments posted since the last flush may need someone woken. */
    void (*flush)(void *tl);
    /*
     * If f's result is there: writes it to f->dst, returns AGG_OK or the
     * error the tree saw. AGG_INPROGRESS while it is not; AGG_ERR_SHUTDOWN
     * when the group is gone. Never blocks.
     */
    agg_status_t (*complete)(void *tl, const agg_tl_frag_t *f);
    /* Does work the transport may owe the group (a node's deferred forwards). */
    unsigned (*progress)(void *tl);
    /* Sleeps a little while nothing can happen to f; the caller re-polls. */
    void (*idle)(void *tl, const agg_tl_frag_t *f);
    /* Something else is already known to be in progress: reset the idle policy. */
    void (*busy)(void *tl);
    /*
     * The member gave up on posted fragment f (it timed out) and may reuse
     * its buffers: the transport must not write its result there any more.
     * Called only when results do not wait for complete() (agg_tl_attr_t).
     */
    void (*forget)(void *tl, const agg_tl_frag_t *f);
} agg_tl_ops_t;

/* Shared memory with a switchsim on this host (agg_tl_shm.c). */
extern const agg_tl_ops_t agg_tl_shm_ops;

/* TCP to a switchsim on another host (agg_tl_tcp.c). */
extern const agg_tl_ops_t agg_tl_tcp_ops;

/* The transport for an endpoint type (agg_tl.c); NULL when this build has none. */
const agg_tl_ops_t *agg__tl_for(uint32_t type);

/* A fragment in flight: who it belongs to and what the transport got. */
typedef struct agg__frag {
    agg_request_t *req;    /* NULL: a lock request */
    agg_tl_frag_t  f;
    uint8_t        posted; /* the transport took it */
} agg__frag_t;

/* The SAT lock, as this communicator holds it. */
typedef enum agg__lock_state {
    AGG__LOCK_NONE = 0,   /* not held */
    AGG__LOCK_ASKING,     /* a lock request is in flight */
    AGG__LOCK_HELD,
    AGG__LOCK_RELEASING,  /* batch done: give it back once its last chunk completes */
} agg__lock_state_t;

/* A group on one tree: its transport, its window of fragments in flight. */
typedef struct agg__group {
    struct agg_comm     *comm;
    agg__tree_info_t     info;
    const agg_tl_ops_t  *tl;
    void                *tl_priv;
    agg_tl_attr_t        tl_attr;
    uint32_t             window;
    uint32_t             payload;
    uint64_t             next_n;    /* fragments assigned so far */
    uint64_t             done_n;    /* fragments consumed so far (in order) */
    agg__frag_t         *ring;      /* window entries, by (n - 1) % window */
    agg__lock_state_t    lock;
    uint32_t             batch_left;
} agg__group_t;

/* What a communicator did, per collective and tree (agg_comm_stats). */
typedef struct agg__comm_counts {
    uint64_t calls[AGG_COLL__COUNT][2]; /* [coll][0 LLT, 1 SAT] */
    uint64_t bytes[AGG_COLL__COUNT];
    uint64_t errors[AGG_COLL__COUNT];
} agg__comm_counts_t;

struct agg_comm {
    agg_context_t  *ctx;
    int             rank;
    int             size;
    void           *oob_ctx;
    uint32_t        group_id;
    unsigned long   stalls;     /* calls timed out here (the first is logged, by rank 0) */
    uint64_t        leaf_guid;  /* the aggregation node this rank sends to */
    agg__group_t    llt;
    agg__group_t    sat;        /* sat.tl == NULL: no SAT group */
    agg_status_t    sat_why;    /* why not, as aggmgr (or the join) said: AGG_ERR_NO_RESOURCE
                                   (a switch's SAT flows taken), AGG_ERR_SAT_UNAVAILABLE... */
    agg_request_t  *head;       /* requests in the order they were posted */
    agg_request_t  *tail;
    agg_request_t  *free_reqs;  /* a few kept for reuse */
    unsigned        num_free;
    int             sat_fallback_logged;
    uint64_t        sat_fallbacks;
    agg__comm_counts_t counts;
    struct agg__gpu_dev *gpu[16]; /* per device: stream and staging (AGG_GPU_MAX_DEV) */
    pthread_mutex_t lock;       /* ctx->mt: requests and progress, recursive */
    struct agg_comm *next;      /* the context's list */
};

/* A request's device buffers staged through pinned host memory (agg_gpu_stage.c). */
struct agg__gpu_dev;
typedef struct agg__stage {
    struct agg__gpu_dev *gd;   /* NULL: host buffers, nothing staged */
    const uint8_t *dsrc;       /* device source (element src_lo at dsrc), or NULL */
    uint8_t       *ddst;       /* device result (element dst_lo at ddst), or NULL */
    size_t         frags;      /* fragments per chunk */
    size_t         chunk;      /* elements per chunk */
    size_t         nchunks;
    size_t         issued;     /* chunks whose source copy was started */
    size_t         ready;      /* ... and is done: their fragments may go out */
    size_t         uploaded;   /* chunks whose result copy was started */
    size_t         retired;    /* ... and is done: their slot is free */
    agg_status_t   status;     /* a GPU call failed */
} agg__stage_t;

typedef enum agg__req_state {
    AGG__REQ_QUEUED = 0,   /* waiting for the requests before it */
    AGG__REQ_LOCKING,      /* SAT: waiting for the lock */
    AGG__REQ_RUNNING,      /* fragments being assigned and completed */
    AGG__REQ_DONE,
    AGG__REQ_INACTIVE,     /* made by agg_allreduce_init, not posted yet */
} agg__req_state_t;

/*
 * Every collective is a run of fragments over one vector of `total`
 * elements that the tree combines; a member adds elements src_lo .. src_hi
 * of it (element x at src + (x - src_lo) * esize) and takes back dst_lo ..
 * dst_hi (to dst + (x - dst_lo) * esize). Allreduce adds and takes all of
 * it, reduce-scatter takes its block, allgather adds its block, bcast's root
 * adds all and takes nothing, a barrier is one empty fragment.
 */
struct agg_request {
    agg_comm_t        *comm;
    agg__group_t      *grp;       /* where its fragments go, once decided */
    agg_reduce_spec_t  spec;      /* bcast, allgather: bytes as UINT8 (count = bytes) */
    agg_coll_type_t    coll;
    size_t             total;
    size_t             src_lo, src_hi;
    size_t             dst_lo, dst_hi;
    const uint8_t     *src;
    uint8_t           *dst;
    size_t             esize;
    size_t             per_frag;
    size_t             block;     /* reduce-scatter, allgather, blocks alike: one member's
                                     elements, whose fragments go in turns
                                     (agg__request_route) */
    size_t             turns;     /* fragments per block taken in turns; 0: in vector order */
    int                own_there; /* allgather in place: this member's block is in rbuf at
                                     its place, so a fragment of it alone is not copied out */
    int                ordered;   /* in-place allreduce on host memory: results are written in
                                     fragment order, none after the first failure, so that
                                     `written` says what of rbuf holds results */
    size_t             written;   /* ordered: elements of results written from rbuf's start */
    size_t             nfrags;
    size_t             assigned;
    size_t             done;
    agg__req_state_t   state;
    agg_status_t       status;    /* first error */
    agg_status_t       why_llt;   /* why a SAT request went to the LLT, AGG_OK if not */
    int                freed;     /* the caller let go: recycle once drained */
    int                abandoned; /* timed out: its fragments fail, nothing is written */
    int                lock_tries;
    int64_t            retry_at;  /* us: next lock request not before */
    int64_t            seen_ms;   /* stall clock started (0: not running), for the timeout */
    int64_t            waited_ms; /* last timed test or wait */
    agg__stage_t       stage;
    agg_request_t     *next;
};

/* ---- device buffers (agg_gpu_stage.c) ---- */

/* Finds where req's buffers live; device ones get the communicator's staging. */
agg_status_t agg__stage_prepare(agg_request_t *req);
/* Cuts a staged request into chunks for the group it was routed to. */
void agg__stage_start(agg_request_t *req);
/* Moves the copies on; the number of things that happened. */
unsigned agg__stage_step(agg_request_t *req);
/* How many of req's fragments may have numbers now (their source is staged). */
size_t agg__stage_assignable(const agg_request_t *req);
/* Every result copy of a staged request is done (or it has none). */
int agg__stage_drained(const agg_request_t *req);
/* A copy is running that nothing but the GPU will finish: poll, don't sleep. */
int agg__stage_busy(const agg_request_t *req);
/* Where element x of the vector is read from and its result written to. */
const uint8_t *agg__stage_src(const agg_request_t *req, size_t x);
uint8_t *agg__stage_dst(const agg_request_t *req, size_t x);
/* The request is abandoned: waits until no copy touches its buffers. */
void agg__stage_abandon(agg_request_t *req);
/* Frees the communicator's streams and staging buffers. */
void agg__stage_comm_free(agg_comm_t *comm);

/* Frees the requests kept for reuse and those still queued (comm teardown). */
void agg__comm_requests_free(agg_comm_t *comm);

/* Frees the registration cache (agg_context_finalize). */
void agg__rcache_free(agg_context_t *ctx);

/* Connects ctx->am_fd to aggmgr if not yet connected (am_lock held, or no thread yet). */
agg_status_t agg__am_connect(agg_context_t *ctx);

/*
 * A request to aggmgr and its answer (agg_msg_call's arguments). A
 * connection the manager closed is made again, the job claimed with its key,
 * and the request sent once more (agg_am_link.c).
 */
agg_status_t agg__am_call(agg_context_t *ctx, uint16_t type, const void *body, size_t len,
                          uint16_t reply_type, void *reply, size_t cap, size_t *reply_len,
                          int timeout_ms);
/* The same for a request answered with a bare status: that status. */
agg_status_t agg__am_call_status(agg_context_t *ctx, uint16_t type, const void *body,
                                 size_t len, uint16_t reply_type, int timeout_ms);

/* Rank 0, its job made: a thread claims it again whenever the manager comes back. */
void agg__am_watch_start(agg_context_t *ctx);
void agg__am_watch_stop(agg_context_t *ctx);

/*
 * Every rank passes its own status; all get the first error seen (by rank
 * order) or AGG_OK. Collective over the oob context.
 */
agg_status_t agg__oob_agree(agg_context_t *ctx, void *oob_ctx, int rank, int size,
                            agg_status_t local);

void agg__set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- groups and requests (agg_request.c) ---- */

/* Sets a group up for its transport (window ring); AGG_OK or NO_MEMORY. */
agg_status_t agg__group_init(agg_comm_t *comm, agg__group_t *grp, const agg__tree_info_t *info);
void agg__group_fini(agg__group_t *grp);

/* A request object for the collective on comm, inactive (not posted). */
agg_status_t agg__request_new(agg_comm_t *comm, agg_coll_type_t coll,
                              const agg_reduce_spec_t *spec, agg_request_t **out);

/* Posts an inactive or completed request to grp, behind the ones posted before it. */
void agg__request_start(agg_request_t *req, agg__group_t *grp);

/* The window entry of fragment n. */
static inline agg__frag_t *agg__ring(agg__group_t *grp, uint64_t n)
{
    return &grp->ring[agg_seq_slot(n, grp->window)];
}

/*
 * Gives up on a request (it timed out): the caller may reuse its buffers at
 * once; its fragments still go through the tree, failing.
 */
void agg__request_abandon(agg_request_t *req, agg_status_t why);

/* Drives every request of the communicator as far as it goes without waiting. */
unsigned agg__comm_progress(agg_comm_t *comm);

/* Takes the SAT lock now, blocking (lock_on_comm_init). */
agg_status_t agg__sat_lock_now(agg_comm_t *comm);

/* Fragments posted, for the counters. */
static inline void agg__count_sent(agg_context_t *ctx, uint64_t n)
{
    __atomic_fetch_add(&ctx->frags_sent, n, __ATOMIC_RELAXED);
}

/*
 * Locks when the context is thread-safe (agg_context_spec_t.thread_safe).
 * A thread holds at most one lock it waited for; any other it only tries
 * (moving another communicator on while waiting, MPI's progress calling
 * back into libagg), so two threads never wait for each other.
 */
static inline void agg__ctx_lock(agg_context_t *ctx)
{
    if (ctx->mt) {
        pthread_mutex_lock(&ctx->lock);
    }
}

static inline void agg__ctx_unlock(agg_context_t *ctx)
{
    if (ctx->mt) {
        pthread_mutex_unlock(&ctx->lock);
    }
}

static inline void agg__comm_lock(agg_comm_t *comm)
{
    if (comm->ctx->mt) {
        pthread_mutex_lock(&comm->lock);
    }
}

/* 1 when taken (always, in a single-threaded context). */
static inline int agg__comm_trylock(agg_comm_t *comm)
{
    return !comm->ctx->mt || pthread_mutex_trylock(&comm->lock) == 0;
}

static inline void agg__comm_unlock(agg_comm_t *comm)
{
    if (comm->ctx->mt) {
        pthread_mutex_unlock(&comm->lock);
    }
}

#endif
