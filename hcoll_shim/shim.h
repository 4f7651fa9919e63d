/* hcoll_shim internals, shared by its files. */
#ifndef SHIM_H
#define SHIM_H

#include <mpi.h>
#include "agg/agg.h"
#include "agg/reduce.h"
#include "shim_host.h"

#define SHIM_API __attribute__((visibility("default")))

/* Where a call went (AGG_STATS). */
typedef enum shim_path {
    SHIM_PATH_LLT = 0,
    SHIM_PATH_SAT,
    SHIM_PATH_RD,   /* host: recursive doubling */
    SHIM_PATH_RAB,  /* host: Rabenseifner */
    SHIM_PATH_RING, /* host: ring */
    SHIM_PATH_GPU_RING, /* host: ring, device buffers reduced on the device */
    SHIM_PATH_MPI,  /* Open MPI's own (PMPI_) */
    SHIM_PATH_FAILED, /* forced (HCOLL_ENABLE_SHARP >= 3) and no network: an MPI error */
    SHIM_PATH__COUNT
} shim_path_t;

/*
 * The MPI function a call came in by (AGG_STATS names each): a collective's
 * blocking form is 2 x its agg_coll_type_t, its non-blocking form the next;
 * the forms with per-rank counts come after.
 */
typedef enum shim_fn {
    SHIM_FN_ALLREDUCE = 0,
    SHIM_FN_IALLREDUCE,
    SHIM_FN_REDUCE,
    SHIM_FN_IREDUCE,
    SHIM_FN_BCAST,
    SHIM_FN_IBCAST,
    SHIM_FN_BARRIER,
    SHIM_FN_IBARRIER,
    SHIM_FN_REDUCE_SCATTER_BLOCK,
    SHIM_FN_IREDUCE_SCATTER_BLOCK,
    SHIM_FN_ALLGATHER,
    SHIM_FN_IALLGATHER,
    SHIM_FN_REDUCE_SCATTER, /* with counts */
    SHIM_FN_IREDUCE_SCATTER,
    SHIM_FN_ALLGATHERV,
    SHIM_FN_IALLGATHERV,
    SHIM_FN__COUNT
} shim_fn_t;

_Static_assert(SHIM_FN_REDUCE_SCATTER_BLOCK == 2 * AGG_COLL_REDUCE_SCATTER &&
                   SHIM_FN_ALLGATHER == 2 * AGG_COLL_ALLGATHER &&
                   SHIM_FN_BARRIER == 2 * AGG_COLL_BARRIER &&
                   SHIM_FN_REDUCE_SCATTER == 2 * AGG_COLL__COUNT,
               "shim_fn_t follows agg_coll_type_t");

/* "iallgatherv": the MPI function's name, lower case, without MPI_ (shim_stats.c). */
const char *shim_fn_name(shim_fn_t fn);

/* Why a call was not offloaded (AGG_STATS). */
typedef enum shim_why {
    SHIM_WHY_NONE = 0,
    SHIM_WHY_OFF,           /* HCOLL_ENABLE_SHARP=0, or no network for the job */
    SHIM_WHY_TOO_SMALL,     /* nothing to send (count 0) */
    SHIM_WHY_TOO_LARGE,     /* above HCOLL_ALLREDUCE_SHARP_MAX, or large ones sent to the host */
    SHIM_WHY_TYPE,          /* a datatype the network does not reduce or move */
    SHIM_WHY_OP,            /* an op the network does not do */
    SHIM_WHY_COMM_SMALL,    /* below HCOLL_SHARP_NP */
    SHIM_WHY_RESOURCES,     /* no group: quota or resources exhausted */
    SHIM_WHY_LOCK,          /* SAT lock busy: went to the LLT (still offloaded) */
    SHIM_WHY_NO_SAT,        /* SAT wanted, the communicator has none: went to the LLT */
    SHIM_WHY_NETWORK_ERROR, /* the group or the call failed in the network */
    SHIM_WHY_DERIVED,       /* derived datatype: MPI untouched */
    SHIM_WHY_USER_OP,       /* non-commutative user op: MPI untouched */
    SHIM_WHY_INTERCOMM,     /* intercommunicator: MPI untouched */
    SHIM_WHY_LAZY,          /* the group comes after SHARP_COLL_NUM_COLL_GROUP_..._THRESHOLD calls */
    SHIM_WHY_LEVEL,         /* barrier offload needs HCOLL_ENABLE_SHARP=4 */
    SHIM_WHY_LEADERS,       /* through node leaders: only blocking allreduce, bcast, barrier */
    SHIM_WHY_SAT_FLOWS,     /* SAT wanted, the communicator has none: a switch of its tree
                               served an_sat_flows SAT groups already: went to the LLT */
    SHIM_WHY__COUNT
} shim_why_t;

typedef enum shim_comm_state {
    SHIM_COMM_READY = 1, /* offloaded */
    SHIM_COMM_HOST  = 2, /* decided: host path for this communicator (why says why) */
    SHIM_COMM_LATER = 3, /* host path until the group is made (lazy allocation) */
    SHIM_COMM_FAILED = 4, /* forced (HCOLL_ENABLE_SHARP >= 3) and no group: its collectives
                             that the network would take fail */
} shim_comm_state_t;

typedef struct shim_comm {
    shim_comm_state_t state;
    shim_why_t        why;   /* state != READY: the reason */
    agg_status_t      fail;  /* FAILED: why the group was not made */
    int               fail_said; /* the error was logged for this communicator */
    unsigned long     net_failures; /* calls the network failed here (the first is logged) */
    int               inter; /* an intercommunicator: everything to MPI */
    int               rank;
    int               size;
    MPI_Comm          pcomm; /* private duplicate: libagg's out-of-band calls, host algorithms */
    agg_comm_t       *agg;
    shim_host_tune_t  tune;
    unsigned long     calls; /* blocking collectives seen, for the lazy group */
    unsigned long     net_seq; /* blocking collectives put in the network here (members
                                  count alike: shim_comm_agree) */
    int               regroup; /* LATER because the network lost its group: made again
                                  after shim.retry_calls blocking collectives */
    void             *scratch; /* in-place reduce-scatter's input copy, a leader's */
    size_t            scratch_size; /* partial: grown as needed */
    size_t           *blocks; /* size: a call's blocks as libagg takes them (shim_blocks) */
    /* node leaders (shim_hier.c): `agg` is the leaders' group, on leaders only */
    unsigned long     nb_seq;    /* non-blocking calls put in the network here */
    int               nb_host;   /* a non-blocking call found the group gone: the later
                                    ones go to the host at once (blocking ones still take
                                    the network's word, so that every member leaves the
                                    tree at the same call); until the group is made again */
    /* before the first of a failure's non-blocking calls is redone, the members
       agree from which call on every one of them failed (shim_request.c) */
    int               nb_agree;      /* 0: not yet, 1: under way, 2: done */
    MPI_Request       nb_agree_req;
    long              nb_agree_v[2]; /* this member's first failed call, negated too */
    long              nb_agree_all[2]; /* the lowest and the highest, negated */
    unsigned long     nb_redo_from;  /* calls before it failed here, done elsewhere */
    int               broken;    /* its members failed different calls: every collective
                                    of it fails from then on (MPI cannot match them again) */
    int               hier;      /* collectives go through one leader per host */
    int               leader;    /* this rank is its host's leader */
    MPI_Comm          node;      /* the members on this host */
    MPI_Comm          leaders;   /* the leaders (MPI_COMM_NULL elsewhere) */
    int              *leader_of; /* per rank: its host leader's rank among the leaders */
    int              *node_rank; /* per rank: its rank on its host */
    struct shim_comm *next;
} shim_comm_t;

/*
 * A non-blocking call's buffer of its own, freed with its request: a bcast's
 * or allgather's data in another layout than the program's type (packed
 * before it starts, unpacked into the program's buffer when it completes),
 * an in-place reduce-scatter's input moved aside.
 */
typedef struct shim_ipack {
    void        *buf;    /* the packed bytes (freed with the request), or NULL */
    void        *ubuf;   /* unpack into: NULL for nothing to unpack */
    int          ucount;
    MPI_Datatype utype;
    MPI_Comm     ucomm;
    int          bytes;
} shim_ipack_t;

/* Where a non-blocking call of the network is (shim_request.c). */
typedef enum shim_req_state {
    SHIM_REQ_NET,    /* in the network */
    SHIM_REQ_REDO,   /* the network failed it: to be posted on the host, in its
                        communicator's order, outside MPI's progress */
    SHIM_REQ_HOSTED, /* posted on the host (hreq) */
} shim_req_state_t;

/* A non-blocking collective in the network, behind a generalized MPI request. */
typedef struct shim_req {
    agg_request_t   *agg;
    shim_ipack_t     pack;
    MPI_Request      greq;
    shim_comm_t     *sc;
    shim_fn_t        fn;
    int              error;  /* MPI error class once done with an error */
    int              completed; /* set (release) after the last write of the shim to it or
                                   to the program's buffers; MPI's side reads it (acquire) */
    shim_req_state_t state;  /* NET: the only state MPI's progress callback touches */
    unsigned long    seq;    /* its place among its communicator's non-blocking calls */
    int              path;   /* shim_path_t it was counted on */
    struct shim_call *call;  /* the program's arguments, to redo it on the host */
    MPI_Request      hreq;   /* HOSTED: MPI's own request for it */
    int              lost;   /* HOSTED without hreq: other members had its result */
    struct shim_req *next;
} shim_req_t;

typedef struct shim_state {
    int            on;          /* MPI_Init has run, AGG_SHIM_DISABLE is not set */
    int            level;       /* HCOLL_ENABLE_SHARP */
    long long      np;          /* HCOLL_SHARP_NP */
    long long      max_bytes;   /* HCOLL_ALLREDUCE_SHARP_MAX, 0 = no limit */
    long long      large_bytes; /* sat_threshold: what "large" means for the next one */
    int            large_host;  /* HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG != 4: large ones on the host */
    int            dynamic;     /* HCOLL_ALLREDUCE_ZCOPY_TUNE=dynamic */
    long long      lazy;        /* SHARP_COLL_NUM_COLL_GROUP_RESOURCE_ALLOC_THRESHOLD */
    long long      retry_calls; /* AGG_NET_RETRY_CALLS */
    long long      hybrid_frag; /* HCOLL_ALLREDUCE_HYBRID_LB: fragment bytes, 0 = off */
    int            stats;       /* AGG_STATS */
    int            sbgp_sm;     /* HCOLL_SBGP has a shared-memory level (basesmuma...) */
    int            leaders;     /* ... and ranks share adapters: node leaders talk to the tree */
    shim_why_t     off_why;     /* why the network is off for every communicator */
    int            world_rank;
    int            world_size;
    int            keyval;
    agg_context_t *ctx;
    shim_comm_t   *comms;
    shim_req_t    *active;      /* non-blocking requests still in the network */
    int            redoing;     /* of them, redone on the host (REDO, HOSTED): the wait and
                                   test calls look for those only when there are some */
    int          (*opal_progress)(void);                  /* Open MPI's, when it has one */
    int          (*opal_unregister)(int (*cb)(void));
    int            registered;  /* shim_progress is one of Open MPI's progress callbacks */
    unsigned long  offloaded_nb; /* non-blocking calls offloaded */
    unsigned long  calls[SHIM_FN__COUNT][SHIM_PATH__COUNT];
    unsigned long  why[SHIM_FN__COUNT][SHIM_WHY__COUNT];
} shim_state_t;

extern shim_state_t shim;

/* Counts a call of fn that took path, for why (SHIM_WHY_NONE when offloaded). */
static inline void shim_count(shim_fn_t fn, shim_path_t path, shim_why_t why)
{
    __atomic_fetch_add(&shim.calls[fn][path], 1, __ATOMIC_RELAXED);
    if (why != SHIM_WHY_NONE) {
        __atomic_fetch_add(&shim.why[fn][why], 1, __ATOMIC_RELAXED);
    }
}

/* Where a call goes, as its arguments and communicator say (set once, before the walk). */
typedef enum shim_route {
    SHIM_ROUTE_NET,  /* the aggregation tree (directly or through node leaders) */
    SHIM_ROUTE_HOST, /* the shim's host algorithms (blocking allreduce); MPI for the others */
    SHIM_ROUTE_MPI,  /* Open MPI untouched */
    SHIM_ROUTE_FAIL, /* forced, and the network cannot have it: an MPI error (shim_call_fail) */
} shim_route_t;

/*
 * One intercepted collective. Its entry point fills the program's side
 * (coll to request); shim_call fills the rest and walks the collective's
 * paths with it (shim_call.c). Buffers and counts are the program's, in
 * MPI's terms; smem and rmem say where the buffers are, so nothing after
 * the entry point asks again (a staged copy is host memory whatever the
 * GPU runtime's cache would say of its address).
 */
typedef struct shim_call {
    agg_coll_type_t coll;
    shim_fn_t       fn;      /* set by shim_call */
    const void     *sbuf;    /* MPI_IN_PLACE as the program gave it; NULL for bcast, barrier */
    void           *rbuf;    /* bcast: the buffer */
    int             count;   /* elements of dtype: reduce-scatter's per block, allgather's
                                received per rank */
    const int      *counts;  /* MPI_Reduce_scatter's per rank; MPI_Allgatherv's received */
    const int      *displs;  /* MPI_Allgatherv's, in extents of dtype */
    MPI_Datatype    dtype;   /* allgather: the receive type */
    int             scount;  /* allgather: elements of stype sent */
    MPI_Datatype    stype;
    MPI_Op          op;
    int             root;
    MPI_Comm        comm;
    MPI_Request    *request; /* the non-blocking form's; NULL for the blocking form */
    agg_mem_type_t  smem;    /* where sbuf and rbuf are */
    agg_mem_type_t  rmem;
    /* decided by shim_call before the walk; why and route change when the network fails */
    shim_comm_t    *sc;      /* NULL: no state (the shim makes it for blocking calls only) */
    shim_route_t    route;
    shim_why_t      why;     /* counted with the path that runs it */
    agg_status_t    fail;    /* ROUTE_FAIL after the network failed the call: its status */
    long long       bytes;   /* bcast: the data's bytes; allgather: this rank's block's */
    long long       total;   /* reduce-scatter: the elements of every block; allgather: the
                                bytes of every block */
    int             mine;    /* reduce-scatter, allgather: the elements of this rank's block */
    int             esize;   /* allgather: the bytes of one element of dtype (its signature) */
    int             uneven;  /* counts differ: libagg gets them (else count, each) */
    union {
        agg_reduce_spec_t red;  /* allreduce, reduce, reduce-scatter */
        agg_data_spec_t   data; /* bcast, allgather */
    } spec;                  /* for the network, once route is NET */
} shim_call_t;

/* A path's run: the walk goes on to the next path (c->why says why). */
#define SHIM_CALL_NEXT (-1)

/*
 * A way a call may run. The walk offers the call to each path of its
 * collective's list in turn; the first that takes it runs it.
 */
typedef struct shim_call_path_ops {
    const char *name;
    int (*take)(shim_call_t *c); /* 1: this path runs c; 0: not this one */
    int (*run)(shim_call_t *c);  /* an MPI result, or SHIM_CALL_NEXT */
} shim_call_path_ops_t;

extern const shim_call_path_ops_t shim_path_net;      /* the tree (shim_coll.c) */
extern const shim_call_path_ops_t shim_path_gpu_ring; /* host ring reduced on the device */
extern const shim_call_path_ops_t shim_path_stage;    /* device buffers through host copies */
extern const shim_call_path_ops_t shim_path_leaders;  /* node leaders (shim_hier.c) */
extern const shim_call_path_ops_t shim_path_host;     /* host algorithms (shim_allreduce.c) */
extern const shim_call_path_ops_t shim_path_mpi;      /* Open MPI's (shim_call.c) */

/*
 * Whether HCOLL_ENABLE_SHARP forces coll into the network on every
 * communicator (3: every collective it offloads but barrier; 4: barrier too):
 * where the network cannot have it, the call fails instead of running on the
 * host.
 */
static inline int shim_forced(agg_coll_type_t coll)
{
    return shim.level >= 3 && (coll != AGG_COLL_BARRIER || shim.level >= 4);
}

/*
 * A forced call the network cannot take (shim_forced): counted, said once
 * per communicator, and MPI_ERR_OTHER through the communicator's error
 * handler (every member fails it alike).
 */
int shim_call_fail(shim_call_t *c);

/*
 * A call the network failed on sc: the first on a communicator is a
 * warning (what failed, and what happens now), the others are counted in
 * AGG_STATS and logged at debug level only.
 */
void shim_net_warn(shim_comm_t *sc, const shim_call_t *c, agg_status_t st, const char *then);

/* Runs an intercepted collective (its entry point filled coll to request). */
int shim_call(shim_call_t *c);

/* Walks c's paths from the first: shim_call's second half, and a staged call's. */
int shim_call_walk(shim_call_t *c);

/* The network's part of an allreduce (shim_allreduce.c), for shim_path_net. */
int shim_allreduce_net(shim_call_t *c);

/*
 * Node leaders (shim_hier.c). shim_hier_setup decides, collectively over
 * the communicator, whether its collectives go through one leader per host
 * (shim.leaders and a host with several of its ranks), and sets it up.
 */
void shim_hier_setup(shim_comm_t *sc);
void shim_hier_free(shim_comm_t *sc);
/* The leaders' group (on leaders); every member gets the same status. */
agg_status_t shim_hier_group(shim_comm_t *sc);

/* MPI's counts (sc->size of them) of `unit` each as libagg takes them, in sc->blocks. */
const size_t *shim_blocks(shim_comm_t *sc, const int *counts, size_t unit);

/* sc's scratch buffer of at least `bytes`, or NULL. */
void *shim_scratch(shim_comm_t *sc, size_t bytes);

/*
 * A bcast's data in the bytes the network moves: c->spec.data.rbuf is the
 * program's buffer or, for a non-contiguous type, sc's scratch, packed at
 * the root. shim_bcast_unpack puts it in the program's buffer elsewhere.
 */
void shim_bcast_pack(shim_call_t *c);
int shim_bcast_unpack(shim_call_t *c);

/*
 * Device buffers (shim_gpu.c). shim_gpu_mem: where p is, host unless it is
 * device or managed memory of the loaded GPU backend.
 */
struct agg_conf;
void shim_gpu_setup(const struct agg_conf *conf);
void shim_gpu_cleanup(void);
agg_mem_type_t shim_gpu_mem(const void *p);

/* Prints the AGG_STATS lines (rank 0, MPI_Finalize). */
void shim_stats_print(void);

/* The agg datatype of a predefined MPI datatype; -1 if none (derived, long double...). */
int shim_map_dtype(MPI_Datatype dtype);

/* The agg op of a predefined MPI op; -1 for user ops and REPLACE/NO_OP. */
int shim_map_op(MPI_Op op);

/* Whether dtype is predefined (named), not derived. */
int shim_dtype_named(MPI_Datatype dtype);

/*
 * The bytes of count elements of dtype when they are one contiguous block
 * (a named type whose extent is its size); -1 otherwise.
 */
long long shim_dtype_bytes(MPI_Datatype dtype, int count);

/* Whether count dtype are `bytes` contiguous bytes (else they are packed). */
static inline int shim_contig(MPI_Datatype dtype, int count, long long bytes)
{
    return shim_dtype_bytes(dtype, count) == bytes;
}

/*
 * The shim's state of `comm`, made at first use (collective: only blocking
 * calls may make it), with its group once due; NULL for MPI_COMM_NULL or
 * when the shim is off. Counts the call toward a lazy group.
 */
shim_comm_t *shim_comm_get(MPI_Comm comm);

/* The state of `comm` if it has one already, else NULL; not collective. */
shim_comm_t *shim_comm_peek(MPI_Comm comm);

/*
 * A blocking call on sc failed in the network with st, alike on every
 * member: where st says the group is gone (a switchsim or link lost) and
 * HCOLL_ENABLE_SHARP allows the host path, the group goes and the
 * communicator runs on the host until it makes its group again
 * (AGG_NET_RETRY_CALLS blocking collectives later).
 */
void shim_comm_lost(shim_comm_t *sc, agg_status_t st);

/*
 * A blocking call the network failed (levels 1-2), before it is redone on
 * the host: MPI_SUCCESS when every member failed this same call; else an
 * error on each member (MPI_ERR_OTHER, through the error handler), said once,
 * and the communicator broken.
 */
int shim_comm_agree(shim_comm_t *sc, shim_call_t *c);

/* Its members failed `what` at calls first .. last: broken, said once (rank 0). */
void shim_comm_break(shim_comm_t *sc, const char *what, long first, long last);

/* Makes the state of a communicator just created (Comm_dup, _split, _create). */
void shim_comm_created(MPI_Comm comm);

/*
 * Whether coll can be offloaded on sc now: the reason it cannot otherwise.
 * Only checks the communicator and the level, not the call's arguments.
 */
shim_why_t shim_comm_why(const shim_comm_t *sc, agg_coll_type_t coll);

/*
 * Hands a started libagg request to the program as a generalized MPI
 * request that completes with it (pack, if not NULL, is unpacked and freed
 * then). The network has the call already, so it never falls back: without
 * memory for the generalized request, it waits for the call and hands back
 * a request that is complete.
 */
void shim_ireq_start(const struct shim_call *c, agg_request_t *req, const shim_ipack_t *pack);

/*
 * Non-blocking calls the network failed, at HCOLL_ENABLE_SHARP 1 and 2 and
 * where their input is intact, are redone on the host: posted there (Open
 * MPI's own non-blocking collective with the program's arguments) by every
 * member in its communicator's order, each once every earlier call of its
 * communicator has left the network, and never from inside MPI's progress.
 * shim_requests_redo posts what can be and completes the MPI requests of
 * what the host finished; the wait and test calls and every collective's
 * entry call it. Returns how many moved.
 */
int shim_requests_redo(void);

/*
 * Before a call of sc goes to the host: waits until no earlier non-blocking
 * call of sc is in the network and every one to redo is posted, so that the
 * host sees sc's calls in the program's order on every member.
 */
void shim_requests_drain(shim_comm_t *sc);

/* Open MPI's own collective (blocking or not), with c's arguments. */
int shim_call_pmpi(const struct shim_call *c);

/* Waits for a started libagg request, counts its path (not for SHIM_FN__COUNT), frees it. */
agg_status_t shim_net_wait(shim_fn_t fn, agg_request_t *req);

/* The same, and what agg_request_info said of it once done. */
agg_status_t shim_net_wait_info(shim_fn_t fn, agg_request_t *req, agg_request_info_t *info);

/*
 * Completes every request of sc still in the network, or posts it on the
 * host where it is to be redone (before sc goes).
 */
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
