/*
 * Everything two processes of the stack say to each other.
 *
 * Control messages travel over TCP between aggmgr and its peers (libagg,
 * switchsim, tools). Each is a 16-byte agg_msg_hdr_t followed by `length`
 * bytes of body. Every multi-byte field on TCP is big-endian; the structs
 * below are the exact wire layout (naturally aligned, no padding) and are
 * converted with agg_wire_* functions. Strings are fixed-size, NUL-padded.
 *
 * Variable parts follow a fixed part and are counted in it; a receiver checks
 * every count against the body length before it reads an element.
 *
 * The data path is shared memory on one host, laid out in agg/dp.h (the
 * engine, dp/): segments created by switchsim, in host byte order.
 * Members learn where to attach from the endpoints in GROUP_CREATE_REPLY.
 *
 * tests/unit/test_wire.c pins every size and offset.
 */
#ifndef AGG_WIRE_H
#define AGG_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "agg/status.h"

#define AGG_WIRE_MAGIC    0x4147474du /* "AGGM" */
#define AGG_WIRE_VERSION  6
#define AGG_WIRE_MAX_BODY (1u << 20)   /* larger bodies are a protocol error */
#define AGG_WIRE_NAME_LEN 64

typedef enum agg_msg_type {
    AGG_MSG_HELLO              = 1,  /* any -> mgr: who am I; reply HELLO_REPLY */
    AGG_MSG_HELLO_REPLY        = 2,
    AGG_MSG_SIM_REGISTER       = 3,  /* switchsim -> mgr */
    AGG_MSG_SIM_REGISTER_REPLY = 4,  /* mgr -> switchsim: the switches to host */
    AGG_MSG_GROUP_CONFIG       = 5,  /* mgr -> switchsim: build a group's tree */
    AGG_MSG_GROUP_CONFIG_REPLY = 6,
    AGG_MSG_GROUP_TEARDOWN     = 7,  /* mgr -> switchsim */
    AGG_MSG_GROUP_TEARDOWN_REPLY = 8,
    AGG_MSG_JOB_CREATE         = 9,  /* libagg rank 0 -> mgr */
    AGG_MSG_JOB_CREATE_REPLY   = 10,
    AGG_MSG_JOB_DESTROY        = 11,
    AGG_MSG_JOB_DESTROY_REPLY  = 12,
    AGG_MSG_GROUP_CREATE       = 13, /* libagg communicator leader -> mgr */
    AGG_MSG_GROUP_CREATE_REPLY = 14,
    AGG_MSG_GROUP_DESTROY      = 15,
    AGG_MSG_GROUP_DESTROY_REPLY = 16,
    AGG_MSG_STATS              = 17, /* any -> switchsim via mgr: counters */
    AGG_MSG_STATS_REPLY        = 18,
    AGG_MSG_ERROR_REPLY        = 19, /* a request that could not be parsed */
    AGG_MSG_SIM_REPORT         = 20, /* switchsim -> mgr on its own: txid 0, no reply */
    AGG_MSG_STATE              = 21, /* any -> mgr: its jobs, groups and counts, as text */
    AGG_MSG_STATE_REPLY        = 22,
    AGG_MSG_JOB_ATTACH         = 23, /* libagg -> mgr: a job's client again, after a restart */
    AGG_MSG_JOB_ATTACH_REPLY   = 24,
    AGG_MSG_SIM_PARTS          = 25, /* switchsim -> mgr after registering again: what it serves */
    AGG_MSG_SIM_PARTS_REPLY    = 26,
    AGG_MSG__MAX
} agg_msg_type_t;

typedef struct agg_msg_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t length; /* body bytes after this header */
    uint32_t txid;   /* echoed in the reply */
} agg_msg_hdr_t;

/* Every reply body starts with a status (agg_status_t, two's complement). */
typedef struct agg_msg_status {
    int32_t status;
} agg_msg_status_t;

typedef enum agg_peer_kind {
    AGG_PEER_CLIENT = 1,
    AGG_PEER_SIM    = 2,
    AGG_PEER_TOOL   = 3,
} agg_peer_kind_t;

typedef struct agg_msg_hello {
    uint32_t kind;    /* agg_peer_kind_t */
    uint32_t pid;
    char     host[AGG_WIRE_NAME_LEN];
} agg_msg_hello_t;

typedef struct agg_msg_hello_reply {
    int32_t  status;
    uint32_t mgr_pid;
    uint32_t num_switches;
    uint32_t num_cas;
} agg_msg_hello_reply_t;

typedef struct agg_msg_sim_register {
    uint32_t pid;
    uint32_t an_osts;            /* capacity of each hosted node */
    uint32_t an_payload_per_ost;
    uint32_t an_max_groups;
    uint32_t an_sat_flows;       /* SAT groups a node serves at once */
    uint32_t workers;            /* reduction threads */
    char     host[AGG_WIRE_NAME_LEN];      /* the host it runs on (gethostname) */
    char     data_addr[AGG_WIRE_NAME_LEN]; /* "ip:port" where ranks of other hosts and
                                              other switchsims reach it over TCP
                                              (sim_data_addr); "" none */
    /* optionally followed by the switches it asks for (sim_switches, NUL-terminated):
       "all", "host", "guid:G,G,..." or "name:PATTERN"; none means "all" */
} agg_msg_sim_register_t;

typedef struct agg_msg_sim_register_reply {
    int32_t  status;
    uint32_t sim_id;
    uint32_t num_switches;       /* followed by that many agg_wire_switch_t */
    uint32_t reserved;
} agg_msg_sim_register_reply_t;

typedef struct agg_wire_switch {
    uint64_t guid;
    char     desc[AGG_WIRE_NAME_LEN];
} agg_wire_switch_t;

/*
 * Where a member reaches its leaf aggregation node: a transport and an
 * address only that transport reads (for AGG_TL_SHM: the group segment's
 * name, then the host segment's, NUL-terminated). Carried per member, so a
 * group can span transports and hosts.
 */
typedef enum agg_tl_type {
    AGG_TL_SHM = 1, /* shared memory with a switchsim on this host */
    AGG_TL_TCP = 2, /* TCP to a switchsim on another host: "ip:port/g<group>/t<tree>/p<part>" */
} agg_tl_type_t;

#define AGG_WIRE_EP_ADDR_LEN (2 * AGG_WIRE_NAME_LEN)

typedef struct agg_wire_endpoint {
    uint32_t transport;          /* agg_tl_type_t */
    uint32_t length;             /* bytes of addr in use */
    uint8_t  addr[AGG_WIRE_EP_ADDR_LEN];
} agg_wire_endpoint_t;

/* Group config flags (also in GROUP_CREATE) */
#define AGG_GROUP_F_SAT          0x01u /* GROUP_CREATE: a SAT group too */
#define AGG_GROUP_F_REPRODUCIBLE 0x02u /* nodes combine children in a fixed order */

typedef struct agg_msg_group_config {
    uint32_t group_id;
    uint32_t job_id;
    uint32_t num_members;
    uint32_t num_nodes;          /* tree nodes, parents first, root at 0 */
    uint32_t osts;               /* fragments a member may have in flight */
    uint32_t payload;            /* bytes per fragment (LLT) or chunk (SAT) */
    uint32_t tree;               /* agg_tree_type_t */
    uint32_t flags;              /* AGG_GROUP_F_REPRODUCIBLE */
    uint32_t part;               /* which part of the group's tree: the switches of one
                                    switchsim that hang together; part 0 holds the root */
    uint32_t num_ports;          /* links to the other parts */
    uint64_t job_key;            /* members joining over TCP must show it */
    /* followed by num_nodes agg_wire_tree_node_t (the part's, parents first, its top at
       0), num_members agg_wire_member_t (the members whose leaf is in the part, in
       group order: their channels) and num_ports agg_wire_port_t */
} agg_msg_group_config_t;

typedef struct agg_wire_tree_node {
    uint64_t guid;
    int32_t  parent;             /* index in the node list, -1 for the part's top */
    uint32_t extra;              /* child parts (other switchsims) attached below it */
} agg_wire_tree_node_t;

/* agg_wire_port_t.kind */
#define AGG_WIRE_PORT_UP   1u /* the part's top sends its partial to node `node` of part
                                 `part`, as that node's extra child `extra` */
#define AGG_WIRE_PORT_DOWN 2u /* the part's top sends each result to part `part` */

/* A link from a group's part to another part, in another switchsim. */
typedef struct agg_wire_port {
    uint32_t kind;
    uint32_t part;
    uint32_t node;
    uint32_t extra;
    char     addr[AGG_WIRE_NAME_LEN]; /* that switchsim's data port, "ip:port" */
} agg_wire_port_t;

/* agg_wire_member_t.flags */
#define AGG_MEMBER_F_REMOTE 0x01u /* on another host: attaches over TCP, gets results sent */

typedef struct agg_wire_member {
    uint32_t leaf;               /* index of the member's leaf in the node list */
    uint32_t flags;              /* AGG_MEMBER_F_* */
} agg_wire_member_t;

typedef struct agg_msg_group_config_reply {
    int32_t             status;
    uint32_t            group_id;
    uint32_t            tree;
    uint32_t            reserved;
    /* where the members attach, as switchsim offers: its own host's members at
       `here`, the others at `away` (transport 0: it has no data port) */
    agg_wire_endpoint_t here;
    agg_wire_endpoint_t away;
} agg_msg_group_config_reply_t;

/* agg_msg_sim_report_t.what */
#define AGG_SIM_REPORT_LINK_DOWN 1u /* its data link to the switchsim at `addr` broke */

typedef struct agg_msg_sim_report {
    uint32_t what;
    int32_t  status;             /* why */
    char     addr[AGG_WIRE_NAME_LEN];
} agg_msg_sim_report_t;

typedef struct agg_msg_group_ref {
    uint32_t job_id;
    uint32_t group_id;
    uint32_t tree;               /* GROUP_TEARDOWN: which tree's part */
    uint32_t part;               /* GROUP_TEARDOWN: which part of it */
} agg_msg_group_ref_t;

/* Job flags */
#define AGG_JOB_F_SAT    0x01u /* build the paired SAT trees too */
#define AGG_JOB_F_SPREAD 0x02u /* spread ranks over leaf switches (default: packed) */

typedef struct agg_msg_job_create {
    uint64_t job_key;            /* random, drawn by rank 0, same on every rank */
    uint32_t world_size;
    uint32_t pid;
    uint32_t quota_osts;         /* 0 = default share */
    uint32_t quota_payload_per_ost; /* 0 = node default */
    uint32_t quota_max_groups;   /* 0 = default share */
    uint32_t osts_per_group;
    uint32_t flags;              /* AGG_JOB_F_* */
    uint32_t num_hosts;          /* distinct hosts of the job's ranks */
    char     host[AGG_WIRE_NAME_LEN];   /* rank 0's host */
    char     device[AGG_WIRE_NAME_LEN]; /* adapters to use (HCOLL_MAIN_IB device), "" any */
    /* followed by num_hosts host names (AGG_WIRE_NAME_LEN bytes each), then
       world_size uint32_t: each world rank's index into them */
} agg_msg_job_create_t;

typedef struct agg_msg_job_create_reply {
    int32_t  status;
    uint32_t job_id;
    uint32_t tree_id;
    uint32_t tree_depth;
    uint32_t tree_nodes;
    uint32_t osts;               /* granted on every node of the tree */
    uint32_t payload_per_ost;
    uint32_t max_groups;
    uint64_t root_guid;
    uint32_t sat_tree_id;        /* the paired SAT tree; 0 when the job has none */
    uint32_t sat_flows;          /* SAT groups each of its nodes serves at once */
    uint32_t shared_adapters;    /* 1: some ranks share an adapter (fewer adapters than
                                    ranks on a host): their host's ranks may elect a leader */
    uint32_t reserved;
} agg_msg_job_create_reply_t;

typedef struct agg_msg_job_ref {
    uint32_t job_id;
    uint32_t reserved;
} agg_msg_job_ref_t;

/*
 * A client proves it belongs to a job by its key (a manager restored from
 * its journal knows no connection of it). World rank 0 owns the job again;
 * any rank may then destroy the groups restored with it.
 */
typedef struct agg_msg_job_attach {
    uint64_t job_key;
    uint32_t job_id;
    uint32_t world_rank;
} agg_msg_job_attach_t;

/*
 * A switchsim that registers again (its manager restarted, or the control
 * connection broke) says which groups' parts it serves: num_parts
 * agg_msg_group_ref_t follow. The manager answers with a status, then tears
 * down the parts of groups it does not hold.
 */
typedef struct agg_msg_sim_parts {
    uint32_t num_parts;
    uint32_t reserved;
} agg_msg_sim_parts_t;

/* STATE_REPLY: a status, then the manager's state as NUL-terminated text. */
#define AGG_STATE_TEXT_MAX (AGG_WIRE_MAX_BODY - 8)

typedef struct agg_msg_group_create {
    uint32_t job_id;
    uint32_t num_members;        /* followed by num_members uint32_t world ranks */
    uint32_t osts;               /* LLT OSTs the group asks for */
    uint32_t flags;              /* AGG_GROUP_F_* */
    uint32_t sat_osts;           /* SAT chunks in flight */
    uint32_t sat_payload;        /* SAT chunk bytes */
    uint64_t job_key;            /* the job's key: only its ranks make its groups */
} agg_msg_group_create_t;

/*
 * The reply: a header, then num_trees (LLT first, then SAT when asked for)
 * blocks of one agg_wire_group_tree_t, its num_endpoints agg_wire_endpoint_t
 * and num_members agg_wire_member_ep_t (in member order). A tree whose status
 * is not AGG_OK has no endpoints and no members.
 */
typedef struct agg_msg_group_create_reply {
    int32_t  status;
    uint32_t group_id;
    uint32_t num_members;
    uint32_t num_trees;
} agg_msg_group_create_reply_t;

typedef struct agg_wire_group_tree {
    int32_t  status;             /* the SAT group may be refused while the LLT one stands */
    uint32_t tree;               /* agg_tree_type_t */
    uint32_t tree_id;
    uint32_t osts;
    uint32_t payload;
    uint32_t depth;
    uint32_t nodes;
    uint32_t num_endpoints;
    uint64_t root_guid;
} agg_wire_group_tree_t;

typedef struct agg_wire_member_ep {
    uint32_t endpoint;           /* index into the tree's endpoints */
    uint32_t channel;            /* the member's channel there */
    uint64_t leaf_guid;          /* the switch its fragments enter */
} agg_wire_member_ep_t;

typedef struct agg_msg_stats_reply {
    int32_t  status;
    uint32_t groups;             /* groups configured now */
    uint64_t fragments_in;       /* fragments and chunks received from ranks */
    uint64_t fragments_reduced;  /* reductions performed, all nodes */
    uint64_t results_out;        /* results returned to groups */
    uint64_t bytes_in;           /* payload bytes received from ranks */
    uint64_t errors;             /* malformed or mismatched fragments */
    uint64_t groups_total;       /* groups configured since start */
    uint64_t llt_fragments_in;   /* of fragments_in, on LLT trees */
    uint64_t sat_chunks_in;      /* of fragments_in, on SAT trees */
    uint64_t sat_bytes_in;       /* of bytes_in, on SAT trees */
    uint64_t duplicates;         /* contributions seen twice and ignored */
    uint64_t locks_granted;      /* SAT lock requests granted */
    uint64_t locks_busy;         /* SAT lock requests refused */
    uint64_t zcopy_bytes;        /* bytes read/written straight in rank memory */
    uint64_t faults;             /* messages met by an injected fault (sim_faults) */
    uint64_t resent;             /* results sent again to a member that sent its fragment again */
    uint64_t corrupt;            /* messages that failed their checksum (taken for lost) */
    uint32_t sat_groups;         /* SAT groups configured now */
    uint32_t workers;            /* reduction threads */
} agg_msg_stats_reply_t;

/* Which tree a group lives on. The values travel on the wire. */
typedef enum agg_tree_type {
    AGG_TREE_LLT = 0, /* low latency: small fragments, payload per OST */
    AGG_TREE_SAT = 1, /* streaming: large chunks, needs the SAT lock */
} agg_tree_type_t;

/* ---- encoding -------------------------------------------------------- */

/*
 * Field layouts of the structs above, one letter per field in order:
 * 'h' 16-bit, 'l' 32-bit, 'q' 64-bit integer, 's' AGG_WIRE_NAME_LEN-byte
 * string. agg_wire_swap() uses them to convert a struct between host and
 * wire (big-endian) order; the test checks each matches its struct.
 */
#define AGG_FMT_HDR                "lhhll"
#define AGG_FMT_STATUS             "l"
#define AGG_FMT_HELLO              "lls"
#define AGG_FMT_HELLO_REPLY        "llll"
#define AGG_FMT_SIM_REGISTER       "llllllss"
#define AGG_FMT_SIM_REGISTER_REPLY "llll"
#define AGG_FMT_SWITCH             "qs"
#define AGG_FMT_ENDPOINT           "llss"
#define AGG_FMT_GROUP_CONFIG       "llllllllllq"
#define AGG_FMT_TREE_NODE          "qll"
#define AGG_FMT_PORT               "lllls"
#define AGG_FMT_SIM_REPORT         "lls"
#define AGG_FMT_MEMBER             "ll"
#define AGG_FMT_GROUP_CONFIG_REPLY "llllllssllss"
#define AGG_FMT_GROUP_REF          "llll"
#define AGG_FMT_JOB_CREATE         "qllllllllss"
#define AGG_FMT_JOB_CREATE_REPLY   "llllllllqllll"
#define AGG_FMT_JOB_REF            "ll"
#define AGG_FMT_JOB_ATTACH         "qll"
#define AGG_FMT_SIM_PARTS          "ll"
#define AGG_FMT_GROUP_CREATE       "llllllq"
#define AGG_FMT_GROUP_CREATE_REPLY "llll"
#define AGG_FMT_GROUP_TREE         "llllllllq"
#define AGG_FMT_MEMBER_EP          "llq"
#define AGG_FMT_STATS_REPLY        "llqqqqqqqqqqqqqqqqll"

/* Bytes a layout covers. */
size_t agg_wire_fmt_size(const char *fmt);

/*
 * Converts `count` consecutive structs of layout `fmt` between host and wire
 * order in place (the conversion is its own inverse). Returns bytes covered.
 */
size_t agg_wire_swap(void *s, const char *fmt, size_t count);

/*
 * A reply that is either a bare status (a refusal) or the whole struct of
 * `full` bytes and layout `fmt`, whose first field is a status: converts it
 * to host order and returns that status. A bare AGG_OK, or any other
 * length, is AGG_ERR_PROTOCOL.
 */
agg_status_t agg_wire_reply_decode(void *rep, size_t len, size_t full, const char *fmt);

/* Encodes the 16-byte header into wire order. */
void agg_wire_hdr_encode(agg_msg_hdr_t *out, uint16_t type, uint32_t length,
                         uint32_t txid);

/*
 * Decodes a received header in place and checks magic, version and that the
 * length is at most AGG_WIRE_MAX_BODY.
 */
agg_status_t agg_wire_hdr_decode(agg_msg_hdr_t *hdr);

const char *agg_msg_type_name(unsigned type);

/*
 * Writes switchsim's counters (a STATS_REPLY in host order) as "name value"
 * lines: the format of switchsim's --stats-file and of agg_info -S.
 */
void agg_wire_stats_print(const agg_msg_stats_reply_t *s, void *file);

#endif
