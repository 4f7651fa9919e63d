/*
 * aggmgr: the aggregation manager. Owns the topology, the trees, every
 * resource count of every aggregation node, and the jobs and groups that use
 * them. It is never on the data path.
 */
#ifndef AGGMGR_H
#define AGGMGR_H

#include <stdint.h>
#include "agg/auth.h"
#include "agg/conf.h"
#include "agg/loop.h"
#include "agg/txq.h"
#include "agg/wire.h"
#include "aggmgr_topo.h"
#include "aggmgr_tree.h"

#define AGGMGR_MAX_CONNS 1024
#define AGGMGR_IO_TIMEOUT_MS  2000 /* a peer's secret check; a peer whose socket takes
                                      nothing of what waits for this long is dropped */
#define AGGMGR_TX_MAX (16u << 20) /* bytes waiting for one peer at most */
#define AGGMGR_MSG_TIMEOUT_MS 10000 /* a message begun is whole within this, or the peer goes;
                                       a peer's first message comes within it too */
#define AGGMGR_RX_BUDGET (64u << 20) /* bytes of messages being received, all peers */

typedef struct aggmgr_conn {
    int           fd;
    uint32_t      kind;   /* agg_peer_kind_t once known, 0 before */
    uint32_t      pid;
    char          host[AGG_WIRE_NAME_LEN];
    /* the request being received: a slow peer never stalls the others */
    agg_msg_hdr_t rx_hdr; /* decoded once its 16 bytes are in */
    uint8_t      *rx;     /* header then body, as received */
    size_t        rx_len;
    size_t        rx_cap;
    uint64_t      rx_since_ms; /* when the message being received began, or the
                                  connection if none came yet; 0: none expected */
    uint64_t      quiet_since_ms; /* the last complete message (or the connection) */
    uint32_t      attached_job;   /* a job whose key it showed in JOB_ATTACH, 0 none */
    char          peer[64];       /* its address, numeric, without the port ("local":
                                     not IP); per-address limits count by it */
    /* what the socket did not take yet, written by the event loop on POLLOUT:
       a peer that stops reading holds up nobody */
    agg_txq_t     txq;
} aggmgr_conn_t;

/* Resources of one aggregation node (a switch). */
typedef struct aggmgr_an {
    uint32_t osts_cap, osts_used;     /* reserved by jobs */
    uint32_t groups_cap, groups_used; /* reserved by jobs */
    uint32_t sat_flows_cap, sat_flows_used; /* SAT groups served at once */
    unsigned trees_rooted;            /* for balancing roots across trees */
    int      sim;                     /* switches: the switchsim hosting it (index into
                                         sims), -1 none */
} aggmgr_an_t;

/*
 * A part of a group's tree: the switches of one switchsim that hang
 * together. Part 0 holds the root; every other part's top sends its partial
 * up to a node of its parent part, over TCP between the switchsims.
 */
typedef struct aggmgr_part {
    int                 sim;          /* index into sims */
    int                 parent;       /* parent part, -1 for part 0 */
    int                 parent_node;  /* the tree node its top hangs from */
    uint32_t            extra;        /* its index among that node's child parts */
    uint32_t            num_nodes;
    uint32_t            num_members;  /* members whose leaf is in it: channels 0.. */
    uint32_t            ep_here;      /* its endpoints in GROUP_CREATE_REPLY */
    uint32_t            ep_away;      /* (UINT32_MAX: none, no member needs it) */
    agg_wire_endpoint_t here;         /* as switchsim offers them: for members on */
    agg_wire_endpoint_t away;         /*   its host, and for the others */
    int                 configured;
} aggmgr_part_t;

/* A group's part on one tree (LLT or SAT). */
typedef struct aggmgr_gtree {
    agg_status_t        status;   /* AGG_OK when it exists */
    uint32_t            tree_id;
    uint32_t            osts;
    uint32_t            payload;
    aggmgr_tree_t       tree;     /* the job's tree pruned to the members */
    uint32_t            num_parts;
    aggmgr_part_t      *parts;
    int                *node_part;   /* per tree node: its part */
    uint32_t           *node_local;  /* per tree node: its index in its part */
    uint8_t            *remote;      /* per member: on another host than its part's
                                        switchsim: attaches over TCP */
    uint32_t           *channel;     /* per member: its channel in its leaf's part */
    uint32_t            num_eps;
    agg_wire_endpoint_t *eps;        /* per part: shared memory, then TCP if needed */
} aggmgr_gtree_t;

struct aggmgr;
struct aggmgr_op;
struct aggmgr_job;

/*
 * Where a group is in its life (aggmgr_group.c has the transitions). Its
 * parts are laid out in two rounds, the LLT tree's then the SAT tree's;
 * every state but READY has requests of its own in flight or is about to.
 */
typedef enum aggmgr_group_state {
    AGGMGR_GROUP_NEW,            /* made, its quota held, nothing asked yet */
    AGGMGR_GROUP_LLT_LAYING_OUT, /* its LLT parts' GROUP_CONFIGs are out */
    AGGMGR_GROUP_SAT_LAYING_OUT, /* its LLT part stands; its SAT parts' are out */
    AGGMGR_GROUP_READY,          /* laid out; its creator has heard so */
    AGGMGR_GROUP_GONE,           /* dropped while laid out: out of its job, its quota
                                    back; waits for its answers, undoing their parts */
    AGGMGR_GROUP_FREED,          /* no more (only ever a transition's target) */
    AGGMGR_GROUP_NUM_STATES
} aggmgr_group_state_t;

/* What happens to a group: the columns of its transition table. */
typedef enum aggmgr_group_event {
    AGGMGR_GROUP_EV_NONE,        /* an action's "nothing follows" */
    AGGMGR_GROUP_EV_START,       /* lay it out */
    AGGMGR_GROUP_EV_CONFIGURED,  /* a part's switchsim laid it out */
    AGGMGR_GROUP_EV_REFUSED,     /* a part's switchsim refused it, or went */
    AGGMGR_GROUP_EV_UNANSWERED,  /* a part's switchsim did not answer in time */
    AGGMGR_GROUP_EV_ROUND_OK,    /* the round's last answer: every part laid out */
    AGGMGR_GROUP_EV_ROUND_FAILED,/* the round's last answer: some part is not */
    AGGMGR_GROUP_EV_DROP,        /* its job, its creator, a switchsim or a link went,
                                    or its owner destroyed it */
    AGGMGR_GROUP_NUM_EVENTS
} aggmgr_group_event_t;

typedef struct aggmgr_group {
    uint32_t             id;
    uint32_t             num_members;
    int                  owner_fd;
    aggmgr_group_state_t state;
    struct aggmgr_job   *job;         /* NULL once GONE */
    aggmgr_gtree_t       llt;
    aggmgr_gtree_t       sat;         /* status != AGG_OK: the group has no SAT part;
                                         AGG_INPROGRESS while its switchsims lay it out */
    /* its creation, until its creator has heard back */
    struct aggmgr_op    *op;          /* its creator's request; NULL once answered */
    uint32_t             pending;     /* its GROUP_CONFIGs in flight */
    agg_status_t         status;      /* the round's first failure; AGG_OK so far */
    uint32_t             flags;       /* the request's */
    uint32_t             sat_osts, sat_payload;
    int                 *sel;         /* the members' world ranks */
    int                  journaled;   /* its record is in the journal */
    struct aggmgr_group *next;
} aggmgr_group_t;

/*
 * A client's request that waits on switchsims (a GROUP_CREATE, a STATS):
 * who hears back, by when, and how it went. Whatever does the work finishes
 * it with aggmgr_op_finish, which calls `done` exactly once.
 */
typedef void (*aggmgr_op_done_t)(struct aggmgr *am, struct aggmgr_op *op);

typedef struct aggmgr_op {
    agg_status_t      status;      /* AGG_OK, or why it failed */
    void             *result;      /* with AGG_OK, what it made: GROUP_CREATE the
                                      aggmgr_group_t, STATS the agg_msg_stats_reply_t sum */
    int64_t           deadline_ms; /* of all its requests, every round: its client
                                      hears back within am_sim_timeout_ms */
    int               client_fd;   /* who asked; -1 once it is gone */
    uint32_t          client_txid;
    aggmgr_op_done_t  done;
    void             *arg;
    void             *task;        /* what works for it, freed with it (NULL: none) */
    void            (*task_free)(void *task);
    struct aggmgr_op *next;
} aggmgr_op_t;

/* Which part of which group a request is about: its owner's, handed back as is. */
typedef struct aggmgr_part_ref {
    uint32_t job_id, group_id, tree, part;
} aggmgr_part_ref_t;

struct aggmgr_simreq;

/*
 * The outcome of a request to a switchsim: st AGG_OK with the answer (type:
 * the reply or AGG_MSG_ERROR_REPLY; body: len bytes as received), or why
 * there is none (AGG_ERR_TIMEOUT, AGG_ERR_NO_SWITCHSIM; type 0, no body).
 */
typedef void (*aggmgr_simreq_cb_t)(struct aggmgr *am, const struct aggmgr_simreq *req,
                                   agg_status_t st, uint16_t type, void *body, size_t len);

/* A request to a switchsim awaiting its reply, found by its txid. */
typedef struct aggmgr_simreq {
    uint32_t           txid;
    int                sim;          /* index into sims */
    uint16_t           type;         /* what was asked */
    int64_t            deadline_ms;  /* agg_time_ms() past which it has failed */
    aggmgr_simreq_cb_t cb;           /* who hears the outcome; NULL: nobody */
    void              *owner;        /* the cb's */
    aggmgr_part_ref_t  ref;          /* the cb's */
} aggmgr_simreq_t;

typedef struct aggmgr_job {
    uint32_t        id;
    uint64_t        key;
    int             owner_fd;
    uint32_t        world_size;
    uint32_t        osts;             /* reserved on every node of the tree */
    uint32_t        osts_used;        /* by its groups */
    uint32_t        max_groups;
    uint32_t        num_groups;
    uint32_t        payload_per_ost;
    uint32_t        osts_per_group;
    int            *cas;              /* world rank -> index into topo.cas */
    char          (*rank_host)[AGG_WIRE_NAME_LEN]; /* world rank -> the host it runs on */
    uint32_t        num_cas;          /* distinct adapters it holds */
    int            *held;             /* those adapters */
    aggmgr_tree_t   tree;
    uint32_t        tree_id;
    uint32_t        sat_tree_id;      /* 0: no SAT tree */
    uint32_t        owner_pid;        /* rank 0's, as it said in JOB_CREATE */
    char            owner_host[AGG_WIRE_NAME_LEN];
    int64_t         restored_until_ms; /* read from the journal: released at this time
                                          unless rank 0 attaches first; 0 otherwise */
    int             ending;           /* being destroyed: its groups' ends are its own */
    uint32_t        num_down;         /* switches its tree was built around (down then) */
    uint32_t       *down;             /* their topo node indices */
    aggmgr_group_t *groups;
    struct aggmgr_job *next;
} aggmgr_job_t;

#define AGGMGR_MAX_SIMS 64

/* The journal (aggmgr_journal.c): where it is, how big, whether it needs an fsync. */
typedef struct aggmgr_journal {
    int      fd;         /* -1: no journal, or closed */
    char     path[4096];
    uint64_t size;       /* bytes in the file */
    int      dirty;      /* written since the last fsync */
    int      failed;     /* a write failed: said once, changes since are not kept */
    int      replaying;  /* reading it back: nothing is written */
} aggmgr_journal_t;

typedef struct aggmgr_sim {
    int      fd;                      /* -1: this slot is free */
    uint32_t id;
    uint32_t pid;
    uint32_t an_osts, an_payload_per_ost, an_max_groups, an_sat_flows, workers;
    char     host[AGG_WIRE_NAME_LEN];
    char     data_addr[AGG_WIRE_NAME_LEN]; /* TCP data port, "" none */
    uint32_t reports;                 /* SIM_REPORTs it sent */
    agg_msg_group_ref_t *served;      /* the parts it said it serves (SIM_PARTS), for
                                         the groups read back from the journal */
    uint32_t num_served;
    int64_t  away_until_ms;           /* fd -1, not 0: its control connection closed while
                                         it served groups, kept till then for it to come
                                         back (am_sim_grace_ms) */
    int      back;                    /* registered in the slot it was away from: its
                                         SIM_PARTS decides which kept groups stay */
} aggmgr_sim_t;

typedef struct aggmgr {
    agg_conf_t     conf;
    const char    *config_path;
    aggmgr_topo_t  topo;
    aggmgr_an_t   *ans;               /* per topo node (only switches used) */
    uint8_t       *ca_busy;           /* per entry of topo.cas */
    int            listen_fd;
    char           listen_addr[280];
    int            off_loopback;      /* peers prove the shared secret before they talk */
    agg_auth_t     auth;
    agg_loop_t    *loop;              /* the server's event loop (aggmgr_server.c) */
    volatile int  *reload;            /* set by SIGHUP */
    aggmgr_conn_t  conns[AGGMGR_MAX_CONNS];
    int            num_conns;
    size_t         rx_bytes;          /* receive buffers of every connection */
    unsigned long  dropped[5];        /* peers dropped, by AGGMGR_DROP_* (logged with counts) */
    aggmgr_sim_t   sims[AGGMGR_MAX_SIMS];
    int            num_sims;          /* slots in use or freed: 0 .. num_sims-1 */
    uint32_t       next_sim_id;
    aggmgr_job_t  *jobs;
    uint32_t       num_jobs;
    uint32_t       next_job_id;
    uint32_t       next_group_id;
    uint32_t       next_tree_id;
    aggmgr_simreq_t *reqs;            /* requests to switchsims in flight */
    uint32_t       num_reqs, cap_reqs;
    uint32_t       next_txid;
    aggmgr_op_t   *ops;               /* operations waiting on them */
    aggmgr_journal_t journal;
    int            keep_parts;        /* exiting with a journal: the switchsims keep the
                                         groups' parts (no teardowns go out) */
} aggmgr_t;

/* ---- jobs and the resources behind them (aggmgr_job.c) ---- */

void aggmgr_resources_init(aggmgr_t *am);

/*
 * Creates a job: places its ranks on adapters (aggmgr_place), builds its
 * LLT tree (and the paired SAT tree when asked), reserves its quota.
 * hosts: num_hosts names of AGG_WIRE_NAME_LEN bytes; host_of: per world rank.
 */
agg_status_t aggmgr_job_create(aggmgr_t *am, int owner_fd,
                               const agg_msg_job_create_t *req, const char *hosts,
                               const uint32_t *host_of, agg_msg_job_create_reply_t *rep);
agg_status_t aggmgr_job_destroy(aggmgr_t *am, uint32_t job_id);

/*
 * A job as the journal recorded it (aggmgr_journal.c decodes the record):
 * its adapters and its tree's root as they were, its quota held again, no
 * connection owning it until rank 0 attaches (or am_restore_grace_ms pass).
 */
typedef struct aggmgr_job_rec {
    uint32_t    id, world_size, osts, max_groups, payload_per_ost, osts_per_group;
    uint32_t    tree_id, sat_tree_id, root, owner_pid, num_hosts, num_down;
    uint64_t    key;
    const uint32_t *down;     /* num_down topo nodes its tree avoids */
    const char *owner_host;   /* AGG_WIRE_NAME_LEN bytes */
    const int32_t  *cas;      /* world_size entries, indexes into topo.cas */
    const uint32_t *host_of;  /* world_size entries, indexes into hosts */
    const char     *hosts;    /* num_hosts names of AGG_WIRE_NAME_LEN bytes */
} aggmgr_job_rec_t;

agg_status_t aggmgr_job_restore(aggmgr_t *am, const aggmgr_job_rec_t *rec, char *why,
                                size_t whylen);

/*
 * The job's tree has a switch that is down (no switchsim serves it): its
 * tree is built again through the switches that are up, where the fabric
 * has such a tree and the quota fits on it, under new tree ids; the job's
 * groups from now on use it. AGG_OK when the job's tree is whole (it was,
 * or is now); else why not (the tree stays as it was).
 */
agg_status_t aggmgr_job_reroute(aggmgr_t *am, aggmgr_job_t *job);

/* The journal's JOB_TREE: the job's tree as a reroute left it. */
agg_status_t aggmgr_job_retree(aggmgr_t *am, uint32_t job_id, uint32_t root, uint32_t tree_id,
                               uint32_t sat_tree_id, const uint32_t *down, uint32_t num_down,
                               char *why, size_t whylen);

/* A client proved with its key that it belongs to the job (JOB_ATTACH). */
agg_status_t aggmgr_job_attach(aggmgr_t *am, int fd, const agg_msg_job_attach_t *req);

/* Releases the restored jobs nobody attached to in time; ms to the next deadline, -1 none. */
int aggmgr_jobs_expire(aggmgr_t *am);

/* The job of that ID, or NULL. */
aggmgr_job_t *aggmgr_job_find(aggmgr_t *am, uint32_t job_id);

/* Drops every job and group owned by a closed connection. */
void aggmgr_conn_release(aggmgr_t *am, int fd);

/* A switchsim went away (index into sims): the groups with a part on it go with it. */
void aggmgr_sim_lost(aggmgr_t *am, int sim);

/* Every 100 ms: a switchsim away past am_sim_grace_ms loses its groups. */
void aggmgr_sims_away_expire(aggmgr_t *am);

/*
 * A switchsim back in the slot it was away from said what it serves
 * (SIM_PARTS, in its served list): a kept group that has a part there it
 * does not serve is dropped. Logs the outcome.
 */
void aggmgr_sim_back(aggmgr_t *am, int sim);

/*
 * May the client on connection fd destroy this job (it created it)? AGG_OK,
 * AGG_ERR_NO_JOB when there is none, AGG_ERR_AUTH when it is another's.
 */
agg_status_t aggmgr_job_owned(aggmgr_t *am, uint32_t job_id, int fd);

/* ---- a group's life (aggmgr_group.c) ---- */

/*
 * Starts a group of `n` world ranks of a job: its LLT part, then its SAT
 * part when req asks and the job has a SAT tree (a SAT part that cannot be
 * had leaves the LLT part standing, with the reason in its status), each
 * laid out by the switchsims hosting its switches. A request that cannot be
 * met is refused at once (op untouched, the caller frees it); otherwise
 * AGG_INPROGRESS: op (from aggmgr_op_new) is aggmgr's, and its `done` sees
 * op->status and, with AGG_OK, the group in op->result when the switchsims
 * have answered.
 */
agg_status_t aggmgr_group_create(aggmgr_t *am, int owner_fd, const agg_msg_group_create_t *req,
                                 const uint32_t *world_ranks, aggmgr_op_t *op);
agg_status_t aggmgr_group_destroy(aggmgr_t *am, uint32_t job_id, uint32_t group_id);

/*
 * Feeds an event from outside (START, DROP) to a group's state machine: the
 * row for its state and ev runs, and whatever that row's action says
 * follows (g may be freed). `why` is what a DROP tells a creator still
 * waiting (AGG_ERR_NO_JOB, AGG_ERR_NO_SWITCHSIM). The other events come
 * from the group's own answers only. AGG_ERR_INVALID_PARAM, logged, the
 * group untouched: another event, or no row for it in g's state.
 */
agg_status_t aggmgr_group_event(aggmgr_t *am, aggmgr_group_t *g, aggmgr_group_event_t ev,
                                agg_status_t why);

/* The state a row of the table leads to from `from` on ev; -1 when there is none. */
int aggmgr_group_transition(aggmgr_group_state_t from, aggmgr_group_event_t ev);

/* A group as the journal recorded it: ready, its quota held, its parts where they were. */
typedef struct aggmgr_group_rec {
    uint32_t       job_id, id, num_members, flags, llt_osts;
    int32_t        sat_status;         /* AGG_OK: it has a SAT part */
    uint32_t       sat_osts, sat_payload;
    const int32_t *members;            /* world ranks */
} aggmgr_group_rec_t;

agg_status_t aggmgr_group_restore(aggmgr_t *am, const aggmgr_group_rec_t *rec, char *why,
                                  size_t whylen);

const char *aggmgr_group_state_name(aggmgr_group_state_t state);
const char *aggmgr_group_event_name(aggmgr_group_event_t ev);

/*
 * May the client on connection fd destroy this group (it asked for it, or
 * created its job)? AGG_OK, AGG_ERR_NO_JOB / AGG_ERR_GROUP_ID when there is
 * none, AGG_ERR_AUTH when it is another's.
 */
agg_status_t aggmgr_group_owned(aggmgr_t *am, uint32_t job_id, uint32_t group_id, int fd);

/*
 * Groups with parts on both switchsims a and b (indexes into sims): their
 * count, and "job/group" of the first few in list (len 0: none). With
 * drop, they go (a link between a and b broke; a == b: switchsim a went):
 * their parts are torn down everywhere.
 */
unsigned aggmgr_groups_across(aggmgr_t *am, int a, int b, int drop, char *list, size_t len);

/*
 * A switchsim registered (again, or for the first time since the manager
 * started): the groups read back whose switches all have their switchsims
 * now get their parts (aggmgr_gtree_rejoin); one with a part its switchsim
 * does not serve (it restarted meanwhile) is dropped, and what the others
 * serve of it torn down.
 */
void aggmgr_groups_rejoin(aggmgr_t *am);

/*
 * Does the manager hold the part switchsim `sim` says it serves? A group
 * read back whose parts are not cut yet (a switchsim it needs has not come
 * back) holds every part of its trees.
 */
int aggmgr_part_held(aggmgr_t *am, int sim, const agg_msg_group_ref_t *ref);

/* ---- a group's part on one tree, on the switchsims (aggmgr_gtree.c) ---- */

/*
 * Cuts g's tree gt into parts, one per set of connected switches that one
 * switchsim hosts, and asks each part's switchsim to lay it out (cb hears
 * each answer, with g as owner and the part in ref; g->pending counts them).
 * AGG_OK: every request went out; otherwise whatever went out is still
 * answered (the caller frees the parts).
 */
agg_status_t aggmgr_gtree_lay_out(aggmgr_t *am, aggmgr_group_t *g, aggmgr_gtree_t *gt,
                                  uint32_t tree, aggmgr_simreq_cb_t cb);

/*
 * Decodes a switchsim's answer to GROUP_CONFIG (st: the request's outcome)
 * into rep; AGG_OK when it laid the part out and offers usable endpoints.
 */
agg_status_t aggmgr_gtree_config_decode(agg_status_t st, void *body, size_t len,
                                        agg_msg_group_config_reply_t *rep);

/*
 * Every part laid out: the endpoints its members attach to, per part the one
 * switchsim offers to its own host, and the one for other hosts when some
 * member of it is on another host.
 */
agg_status_t aggmgr_gtree_eps(aggmgr_t *am, const aggmgr_group_t *g, aggmgr_gtree_t *gt);

/* Asks switchsim `sim` to undo the part ref; nobody waits for the answer. */
void aggmgr_gtree_part_teardown(aggmgr_t *am, int sim, const aggmgr_part_ref_t *ref);

/*
 * A group read back from the journal: once every switch of gt has its
 * switchsim registered again, its parts are cut as when it was laid out and
 * taken as standing (their switchsims serve them). 1 when gt has its parts.
 */
int aggmgr_gtree_rejoin(aggmgr_t *am, const aggmgr_group_t *g, aggmgr_gtree_t *gt);

/* Undoes every part of gt laid out, and frees what describes them. */
void aggmgr_gtree_release(aggmgr_t *am, const aggmgr_group_t *g, aggmgr_gtree_t *gt,
                          uint32_t tree);

/* ---- the journal (aggmgr_journal.c) ---- */

/*
 * Reads am_journal back (jobs and groups restored, the ids they used never
 * handed out again) and opens it for appending; no journal set: nothing.
 * A damaged tail (a record cut short or failing its checksum) is logged,
 * copied to PATH.damaged and cut off; a journal written for another fabric,
 * or whose records contradict each other, is an error (nothing is changed).
 */
agg_status_t aggmgr_journal_open(aggmgr_t *am, char *err, size_t errlen);

/* Records what changed (nothing while replaying, or without a journal). */
void aggmgr_journal_job(aggmgr_t *am, const aggmgr_job_t *job);
void aggmgr_journal_job_end(aggmgr_t *am, uint32_t job_id);
void aggmgr_journal_job_tree(aggmgr_t *am, const aggmgr_job_t *job);
void aggmgr_journal_group(aggmgr_t *am, aggmgr_group_t *g);
void aggmgr_journal_group_end(aggmgr_t *am, const aggmgr_group_t *g);

/* am_journal_sync batch: the fsync that is due (the server's tick). */
void aggmgr_journal_flush(aggmgr_t *am);

void aggmgr_journal_close(aggmgr_t *am);

/* ---- what the manager holds, as text (aggmgr_state.c) ---- */

/* STATE's text: jobs, groups, switches in use, switchsims; the bytes written. */
size_t aggmgr_state_text(const aggmgr_t *am, char *buf, size_t cap);

/* ---- rank placement (aggmgr_place.c) ---- */

/*
 * Gives each world rank an adapter (index into topo.cas): one of its own
 * host's when the fabric names the job's hosts (ranks of a host share them,
 * `device` non-empty keeps only adapters of that device), else free adapters
 * packed leaf after leaf or spread over the leaves. Adapters of other jobs
 * are never used. On failure why says what is missing.
 */
agg_status_t aggmgr_place(const aggmgr_t *am, const agg_msg_job_create_t *req,
                          const char *hosts, const uint32_t *host_of, int *cas, char *why,
                          size_t whylen);

/*
 * Sends a message to the peer on fd without waiting: what its socket does
 * not take now waits in the connection's queue for the event loop. AGG_OK,
 * or AGG_ERR_IO when the peer is gone or has let AGGMGR_TX_MAX bytes pile
 * up (the loop then drops it). A socket that is not one of the loop's
 * connections gets a plain blocking send.
 */
agg_status_t aggmgr_conn_send(aggmgr_t *am, int fd, uint16_t type, uint32_t txid,
                              const void *body, size_t len);

/* The address of the peer on fd ("" when none is known). */
const char *aggmgr_conn_peer(const aggmgr_t *am, int fd);

/* Did the client on fd show the job's key (JOB_ATTACH)? */
int aggmgr_conn_attached(const aggmgr_t *am, int fd, uint32_t job_id);

/* The switchsim whose control connection is fd, or -1. */
int aggmgr_sim_of_fd(const aggmgr_t *am, int fd);

/* Registered switchsims. */
int aggmgr_sims_live(const aggmgr_t *am);

/* ---- the control server (aggmgr_server.c) ---- */

agg_status_t aggmgr_server_listen(aggmgr_t *am, int *bound_port);

/*
 * The event loop with its timers (and the listener, if listening), ready for
 * agg_loop_once or agg_loop_run; aggmgr_server_run is this and a run.
 */
agg_status_t aggmgr_server_start(aggmgr_t *am);

/* Serves a connected socket as a peer that passed any secret check (the control fuzzer). */
void aggmgr_server_adopt(aggmgr_t *am, int fd);

/* Runs until *stop becomes non-zero; reloads settings when *reload is set. */
agg_status_t aggmgr_server_run(aggmgr_t *am, volatile int *stop, volatile int *reload);

void aggmgr_server_close(aggmgr_t *am);

/* ---- a client's requests that wait on switchsims (aggmgr_op.c) ---- */

aggmgr_op_t *aggmgr_op_new(aggmgr_op_done_t done, void *arg);

/* Frees op and the task working for it. */
void aggmgr_op_free(aggmgr_op_t *op);

/* Tracks op until it finishes (a client that goes is forgotten). */
void aggmgr_op_start(aggmgr_t *am, aggmgr_op_t *op);

/* op is over (op->status, op->result say how): `done` runs, then op is freed. */
void aggmgr_op_finish(aggmgr_t *am, aggmgr_op_t *op);

/* A client went away: its operations finish without answering it. */
void aggmgr_ops_forget_client(aggmgr_t *am, int fd);

/*
 * STATS: asks every switchsim for its counters and finishes op (tracked
 * from now on) with their sum once all have answered, or with the first
 * failure.
 */
void aggmgr_stats_start(aggmgr_t *am, aggmgr_op_t *op);

/* ---- requests to switchsims (aggmgr_simreq.c) ---- */

/*
 * Sends a message to switchsim `what->sim` (index into sims) and records it
 * under a fresh txid with what->cb, ->owner and ->ref, which hear its
 * outcome. Never waits for the answer: aggmgr_sim_message hands it over,
 * aggmgr_sims_expire fails it at its deadline: *deadline_ms (set to
 * am_sim_timeout_ms from now when 0, so later requests share it), or
 * am_sim_timeout_ms from now when deadline_ms is NULL.
 */
agg_status_t aggmgr_sim_request(aggmgr_t *am, const aggmgr_simreq_t *what, const void *body,
                                size_t len, int64_t *deadline_ms);

/* A message from switchsim `sim`: the answer to one of our requests. */
agg_status_t aggmgr_sim_message(aggmgr_t *am, int sim, const agg_msg_hdr_t *hdr,
                                uint8_t *body);

/* Fails what is past its deadline; returns ms until the next one (-1: none). */
int aggmgr_sims_expire(aggmgr_t *am);

/* Fails every request in flight to switchsim `sim` with `st` (it went away). */
void aggmgr_sim_fail_all(aggmgr_t *am, int sim, agg_status_t st);

/*
 * Without the event loop (tests, shutdown): reads the switchsims' answers
 * until nothing is in flight or timeout_ms pass. 0 when nothing is left.
 */
int aggmgr_sims_settle(aggmgr_t *am, int timeout_ms);

#endif
