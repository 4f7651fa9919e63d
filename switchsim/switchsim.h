/*
 * switchsim: aggregation nodes in software. One process hosts the switches
 * aggmgr gives it, each an aggregation-node object (switchsim_an_t) owning
 * that switch's resources and its SAT lock. A group's part of a tree lives in
 * a data-path segment (agg/dp.h) that switchsim creates and the members map;
 * the node engine runs on it in switchsim's worker threads and in the member
 * ranks themselves.
 */
#ifndef SWITCHSIM_H
#define SWITCHSIM_H

#include <pthread.h>
#include <stdint.h>
#include "agg/fault.h"
#include "agg/conf.h"
#include "agg/dp.h"
#include "agg/wire.h"

struct switchsim_group;
struct switchsim;
typedef struct switchsim_net switchsim_net_t;

/* A group's node on a switch: what the switch gave it. */
typedef struct switchsim_gnode {
    struct switchsim_group *group;
    uint32_t                node;      /* index in the group's segment */
    uint32_t                osts;
    uint64_t                buf_bytes; /* accumulator memory */
    struct switchsim_gnode *next;      /* the switch's list */
} switchsim_gnode_t;

/*
 * One hosted switch. Its SAT lock word lives in the host segment, where
 * every driver of the data path on this host can take it; the rest is
 * switchsim's own bookkeeping, changed by the control thread only.
 */
typedef struct switchsim_an {
    uint64_t           guid;
    char               desc[AGG_WIRE_NAME_LEN];
    uint32_t           index;       /* in the host segment's AN table */
    agg_dp_an_t       *shared;
    uint32_t           osts_cap, osts_used;
    uint64_t           buf_cap, buf_used;
    uint32_t           groups_cap, groups_used;
    uint32_t           sat_flows_cap, sat_flows_used;
    switchsim_gnode_t *gnodes;      /* groups with a node here */
} switchsim_an_t;

#define SWITCHSIM_MAX_WORKERS 256 /* sim_workers' range */

typedef struct switchsim_group {
    uint32_t           id;
    uint32_t           part;        /* which part of the group's tree (one per switchsim
                                       segment); 0 holds the root */
    uint32_t           job_id;
    uint64_t           job_key;     /* members joining over TCP show it */
    uint64_t           uid;         /* which group made here this is (groups_total) */
    uint8_t            tree;        /* agg_tree_type_t */
    uint32_t           num_members;
    uint32_t           num_nodes;
    char               shm_name[AGG_WIRE_NAME_LEN];
    agg_dp_view_t      view;
    switchsim_gnode_t *gnodes;      /* one per node */
    switchsim_an_t   **ans;         /* per node: its switch */
    uint32_t           work_seen[SWITCHSIM_MAX_WORKERS]; /* per worker: the segment's
                                       work_gen it handled last (one driver, many groups) */
    uint32_t           net_work_seen; /* the same for the data port's thread */
    /* members on other hosts (TCP): */
    uint8_t           *remote;      /* per member: 1 when it attaches over TCP */
    uint32_t          *member_conn; /* per member and lane (member * AGG_NET_MAX_LANES +
                                       lane): data connection + 1, 0 none (atomic) */
    uint32_t          *member_gen;  /* that connection's use it was bound in */
    uint8_t           *member_lanes; /* per member: its connections (agg/net.h; atomic) */
    uint8_t           *lane_of;     /* per member and n % AGG_NET_LANE_RING: the lane
                                       fragment n came on, for its result (atomic) */
    struct switchsim  *sim;
    agg_dp_net_t       netops;      /* view.net: results to those members, links to
                                       the group's parts in other switchsims */
    uint32_t          *extra;       /* per node: child parts attached below it */
    int               *port_link;   /* per segment port: the link it goes through, -1 */
    uint32_t          *port_part;   /* per segment port: the other part */
    struct switchsim_group *next;
} switchsim_group_t;

/* A reduction thread: its counters are written by it alone. */
typedef struct switchsim_worker {
    struct switchsim  *sim;
    unsigned           index;
    pthread_t          thread;
    agg_dp_counters_t  ctr;
    agg_dp_driver_t    drv;
    uint8_t           *scratch;
} switchsim_worker_t;

typedef struct switchsim {
    agg_conf_t          conf;
    uint32_t            sim_id;
    int                 am_fd;
    char                host_name[AGG_WIRE_NAME_LEN]; /* the host segment */
    agg_dp_host_t      *host;
    size_t              host_size;
    uint32_t            num_ans;
    switchsim_an_t     *ans;         /* sorted by GUID */
    pthread_rwlock_t    lock;        /* the group list: workers read, control writes */
    switchsim_group_t  *groups;
    uint32_t            num_groups;
    uint32_t            members_total;
    uint64_t            groups_total;
    agg_dp_counters_t   retired;     /* counters of ranks of groups now gone */
    unsigned            num_workers;
    switchsim_worker_t *workers;
    volatile int        stop;
    long                num_cpus;
    switchsim_net_t    *net;         /* the TCP data port; NULL without sim_data_addr */
    agg_fault_t         shm_faults;  /* sim_faults' kill and stall, on the fragments the
                                        reduction threads take from shared memory */
} switchsim_t;

/*
 * The control thread takes the group list's write lock through this; the
 * lock prefers writers, so the workers, which re-take the read lock after
 * every pass, let it in promptly.
 */
static inline void switchsim_ctl_wrlock(switchsim_t *sim)
{
    pthread_rwlock_wrlock(&sim->lock);
}

/* ---- switches (switchsim_an.c) ---- */

/*
 * Creates the AN objects and the host segment for the switches aggmgr gave
 * (sorted by GUID), with each switch's capacities from the settings.
 */
agg_status_t switchsim_an_init(switchsim_t *sim, const agg_wire_switch_t *sw, uint32_t n);
void switchsim_an_fini(switchsim_t *sim);

switchsim_an_t *switchsim_an_find(switchsim_t *sim, uint64_t guid);

/*
 * Reserves a group's resources on one switch (its node's OSTs and buffer, a
 * group slot, a SAT flow for a SAT group). AGG_ERR_NO_RESOURCE when the
 * switch has none left, with the reason logged.
 */
agg_status_t switchsim_an_reserve(switchsim_an_t *an, switchsim_gnode_t *gn, uint8_t tree);
void switchsim_an_release(switchsim_an_t *an, switchsim_gnode_t *gn, uint8_t tree);

/*
 * Gives back SAT locks whose holder is gone: a group that no longer exists,
 * or one with a member process that died (its segment is marked dead so the
 * others stop waiting). Caller holds the write lock. Returns locks freed.
 */
unsigned switchsim_an_reap_locks(switchsim_t *sim);

/* ---- groups (switchsim_group.c) ---- */

/*
 * Validates a GROUP_CONFIG body (host order already applied), reserves the
 * switches' resources, creates the group's segment and adds it to the list.
 */
agg_status_t switchsim_group_create(switchsim_t *sim, const agg_msg_group_config_t *cfg,
                                    const agg_wire_tree_node_t *nodes,
                                    const agg_wire_member_t *members,
                                    const agg_wire_port_t *ports,
                                    switchsim_group_t **group_out);

/* Removes a group's part on one tree, gives back its locks and resources. */
agg_status_t switchsim_group_destroy(switchsim_t *sim, uint32_t group_id, uint8_t tree,
                                     uint32_t part);

/* A group's part by its identity (caller holds the list's lock), or NULL. */
switchsim_group_t *switchsim_group_find(switchsim_t *sim, uint32_t id, uint8_t tree,
                                        uint32_t part);

void switchsim_group_destroy_all(switchsim_t *sim);

/* ---- reduction threads (switchsim_worker.c) ---- */

agg_status_t switchsim_workers_start(switchsim_t *sim);
void switchsim_workers_stop(switchsim_t *sim);

/* Wakes the workers (a group appeared, shutdown). */
void switchsim_workers_kick(switchsim_t *sim);

/* Every driver's counters added up: workers, live groups' ranks, retired ranks. */
void switchsim_stats(switchsim_t *sim, agg_dp_counters_t *sum);

/* The counters as a STATS_REPLY (host order): for aggmgr and the stats file. */
void switchsim_stats_reply(switchsim_t *sim, agg_msg_stats_reply_t *rep);

/* ---- the TCP data port (switchsim_net.c) ---- */

/* Listens on sim_data_addr, if set, and starts the thread serving it. */
agg_status_t switchsim_net_start(switchsim_t *sim);
void switchsim_net_stop(switchsim_t *sim);

/* The address ranks on other hosts are told ("" without a data port). */
const char *switchsim_net_addr(const switchsim_t *sim);

/* Points a new group's view at the data port (results to members over TCP). */
void switchsim_net_group_init(switchsim_t *sim, switchsim_group_t *g);

/*
 * The link to another switchsim's data port, connecting (and proving the
 * shared secret) the first time; returns its index, or -1 with the reason
 * logged. Control thread only.
 */
int switchsim_net_link(switchsim_t *sim, const char *addr);

/*
 * A link to another switchsim that broke since the last call: its address
 * and why (then forgotten), 1; 0 when none did. Control thread only.
 */
int switchsim_net_broken(switchsim_t *sim, char *addr, size_t len, int32_t *why);

/* Adds the data port thread's counters. */
void switchsim_net_stats(switchsim_t *sim, agg_dp_counters_t *sum);

/* ---- control link to aggmgr (switchsim_ctl.c) ---- */

agg_status_t switchsim_ctl_register(switchsim_t *sim, int timeout_ms);

/* Tells aggmgr what it should know unasked (SIM_REPORT): links that broke. */
void switchsim_ctl_report(switchsim_t *sim);

/* Reads and answers one message from aggmgr. AGG_ERR_IO when it hung up. */
agg_status_t switchsim_ctl_handle(switchsim_t *sim);

#endif
