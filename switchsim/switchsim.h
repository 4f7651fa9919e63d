/*
 * switchsim: aggregation nodes in software. One process hosts the switches
 * aggmgr gives it; for each group it holds the group's tree of nodes and the
 * shared-memory segment through which the member ranks send fragments and
 * read results.
 */
#ifndef SWITCHSIM_H
#define SWITCHSIM_H

#include <pthread.h>
#include <stdint.h>
#include "agg/conf.h"
#include "agg/reduce.h"
#include "agg/wire.h"

/* One OST of one node of one group: the partial result being built. */
typedef struct switchsim_slot {
    uint32_t seq;      /* fragment sequence being reduced, 0 when idle */
    uint32_t arrived;  /* children that have contributed */
    uint32_t count;
    uint16_t op;
    uint8_t  dtype;
    int32_t  status;
    uint8_t *acc;      /* payload_per_ost bytes */
} switchsim_slot_t;

/* A switch's part in one group's tree. */
typedef struct switchsim_gnode {
    uint64_t          guid;
    int               parent;    /* index in group->nodes, -1 at the root */
    uint32_t          expected;  /* children: member ranks below it + child nodes */
    switchsim_slot_t *slots;     /* osts of them */
} switchsim_gnode_t;

typedef struct switchsim_group {
    uint32_t           id;
    uint32_t           job_id;
    uint32_t           num_members;
    uint32_t           osts;
    uint32_t           payload_per_ost;
    uint32_t           num_nodes;
    switchsim_gnode_t *nodes;
    uint32_t          *member_leaf; /* per member: index in nodes */
    uint64_t          *consumed;    /* per member: fragments taken so far */
    uint8_t           *acc_mem;     /* every slot's accumulator, one allocation */
    int                published;   /* results written in this pass */
    char               shm_name[AGG_WIRE_NAME_LEN];
    agg_shm_group_t   *shm;
    size_t             shm_size;
    struct switchsim_group *next;
} switchsim_group_t;

typedef struct switchsim_stats {
    uint64_t fragments_in;
    uint64_t fragments_reduced;
    uint64_t results_out;
    uint64_t bytes_in;
    uint64_t errors;
    uint64_t groups_total;
} switchsim_stats_t;

typedef struct switchsim {
    agg_conf_t         conf;
    uint32_t           sim_id;
    int                am_fd;
    char               bell_name[AGG_WIRE_NAME_LEN];
    agg_shm_bell_t    *bell;
    uint32_t           num_switches;
    agg_wire_switch_t *switches;    /* sorted by GUID */
    pthread_mutex_t    lock;        /* guards the group list */
    uint32_t           ctl_waiting; /* the control thread wants the lock */
    switchsim_group_t *groups;
    uint32_t           num_groups;
    pthread_t          dp_thread;
    int                dp_running;
    volatile int       dp_stop;
    long               spin_count;     /* AGG_SPIN_COUNT */
    int                spin_explicit;  /* set by the user: never adjusted */
    long               spin_effective; /* 0 while processes outnumber cores */
    long               num_cpus;
    uint32_t           members_total;  /* members of all groups */
    switchsim_stats_t  stats;       /* written by the data thread only */
} switchsim_t;

/*
 * The control thread takes sim->lock through these, so the data thread,
 * which re-takes it after every pass, lets it in promptly.
 */
void switchsim_ctl_lock(switchsim_t *sim);
void switchsim_ctl_unlock(switchsim_t *sim);

/* ---- groups (switchsim_group.c) ---- */

/*
 * Validates a GROUP_CONFIG body (host order already applied to the fixed
 * part and arrays), creates the group's segment and adds it to the list.
 */
agg_status_t switchsim_group_create(switchsim_t *sim, const agg_msg_group_config_t *cfg,
                                    const agg_wire_tree_node_t *nodes,
                                    const agg_wire_member_t *members,
                                    switchsim_group_t **group_out);

/* Removes a group from the list, marks its segment dead, frees it. */
agg_status_t switchsim_group_destroy(switchsim_t *sim, uint32_t group_id);

void switchsim_group_destroy_all(switchsim_t *sim);

/* ---- data path (switchsim_dp.c) ---- */

agg_status_t switchsim_dp_start(switchsim_t *sim);
void switchsim_dp_stop(switchsim_t *sim);

/*
 * Recomputes how long the data thread spins: not at all when the members of
 * all groups plus switchsim outnumber the cores, so that spinning never
 * steals the CPU from the ranks it waits for. Caller holds sim->lock.
 */
void switchsim_dp_tune(switchsim_t *sim);

/* Wakes the data thread (after the group list changed). */
void switchsim_dp_kick(switchsim_t *sim);

/* One pass over every group; returns fragments handled. Caller holds sim->lock. */
unsigned switchsim_dp_progress(switchsim_t *sim);

/* ---- control link to aggmgr (switchsim_ctl.c) ---- */

agg_status_t switchsim_ctl_register(switchsim_t *sim, int timeout_ms);

/* Reads and answers one message from aggmgr. AGG_ERR_IO when it hung up. */
agg_status_t switchsim_ctl_handle(switchsim_t *sim);

void switchsim_stats_snapshot(switchsim_t *sim, switchsim_stats_t *out);

#endif
