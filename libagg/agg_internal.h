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

struct agg_comm {
    agg_context_t     *ctx;
    int                rank;
    int                size;
    void              *oob_ctx;
    uint32_t           group_id;
    uint64_t           leaf_guid;  /* the aggregation node this rank sends to */
    uint32_t           osts;
    uint32_t           payload_per_ost;
    uint32_t           slot_stride;
    agg_shm_group_t   *shm;
    size_t             shm_size;
    agg_shm_bell_t    *bell;
    size_t             bell_size;
    agg_shm_channel_t *chan;       /* this member's channel */
    uint8_t           *send_slots; /* this member's osts send slots */
    uint8_t           *results;    /* the group's osts result slots */
    uint32_t           seq;        /* last fragment sequence posted */
    int                broken;     /* a timeout left the group in an unknown state */
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
