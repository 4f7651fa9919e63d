/* libagg internals shared by its files; not installed. */
#ifndef AGG_INTERNAL_H
#define AGG_INTERNAL_H

#include "agg/agg.h"
#include "agg/conf.h"
#include "agg/wire.h"

struct agg_context {
    agg_conf_t      conf;
    int             world_rank;
    int             world_size;
    agg_oob_colls_t oob;
    void           *oob_ctx;
    int             am_fd;         /* connection to aggmgr, -1 until needed */
    uint64_t        job_key;
    agg_msg_job_create_reply_t job; /* host order, identical on every rank */
    uint32_t        osts_per_group;
    long            spin_count;
    int             coll_timeout_ms;
    int             connect_timeout_ms;
    int             num_comms;     /* communicators created, for the INFO lines */
    uint64_t        frags_sent;
};

/* What the communicator's rank 0 learns from aggmgr and broadcasts. */
typedef struct agg__group_info {
    int32_t  status;
    uint32_t group_id;
    uint32_t osts;
    uint32_t payload_per_ost;
    uint32_t tree_depth;
    uint32_t tree_nodes;
    char     shm_name[AGG_WIRE_NAME_LEN];
    char     bell_name[AGG_WIRE_NAME_LEN];
} agg__group_info_t;

/*
 * A transport carries this member's fragments to its leaf aggregation node
 * and brings the group's results back. It is chosen when the communicator is
 * created; the collectives only see this table. A slot's payload follows its
 * header at AGG_FRAG_HDR_SIZE.
 */
typedef struct agg_tl_ops {
    const char *name;
    /* Joins the group described by info; fills the comm's transport fields. */
    agg_status_t (*attach)(agg_comm_t *comm, const agg__group_info_t *info);
    void (*detach)(agg_comm_t *comm);
    /* Where the payload of fragment `seq` goes before post(). */
    void *(*send_buf)(agg_comm_t *comm, uint32_t seq);
    /* Hands fragment `seq` to the network. */
    void (*post)(agg_comm_t *comm, uint32_t seq, uint16_t op, uint8_t dtype,
                 uint32_t count);
    /* Tells the aggregation node that fragments were posted (once per batch). */
    void (*flush)(agg_comm_t *comm);
    /* The result of `seq` if it has arrived, else NULL; never blocks. */
    const agg_frag_hdr_t *(*result)(agg_comm_t *comm, uint32_t seq);
    /* Blocks until result(seq) is there: AGG_ERR_TIMEOUT, AGG_ERR_SHUTDOWN. */
    agg_status_t (*wait)(agg_comm_t *comm, uint32_t seq);
} agg_tl_ops_t;

/* Shared memory with a switchsim on this host (agg_tl_shm.c). */
extern const agg_tl_ops_t agg_tl_shm_ops;

struct agg_comm {
    agg_context_t     *ctx;
    int                rank;
    int                size;
    void              *oob_ctx;
    uint32_t           group_id;
    uint64_t           leaf_guid;  /* the aggregation node this rank sends to */
    uint32_t           osts;
    uint32_t           payload_per_ost;
    uint32_t           seq;        /* last fragment sequence posted */
    int                broken;     /* a timeout left the group in an unknown state */
    const agg_tl_ops_t *tl;
    /* shared-memory transport state */
    uint32_t           slot_stride;
    agg_shm_group_t   *shm;
    size_t             shm_size;
    agg_shm_bell_t    *bell;
    size_t             bell_size;
    agg_shm_channel_t *chan;       /* this member's channel */
    uint8_t           *send_slots; /* this member's osts send slots */
    uint8_t           *results;    /* the group's osts result slots */
};

/* Connects ctx->am_fd to aggmgr if not yet connected. */
agg_status_t agg__am_connect(agg_context_t *ctx);

/*
 * Every rank passes its own status; all get the first error seen (by rank
 * order) or AGG_OK. Collective over the oob context.
 */
agg_status_t agg__oob_agree(agg_context_t *ctx, void *oob_ctx, int rank, int size,
                            agg_status_t local);

void agg__set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
