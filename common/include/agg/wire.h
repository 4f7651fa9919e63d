/*
 * Everything two processes of the stack say to each other.
 *
 * Control messages travel over TCP between aggmgr and its peers (libagg,
 * switchsim, tools). Each is a 16-byte agg_msg_hdr_t followed by `length`
 * bytes of body. Every multi-byte field on TCP is big-endian; the structs
 * below are the exact wire layout (naturally aligned, no padding) and are
 * converted with agg_wire_* functions. Strings are fixed-size, NUL-padded.
 *
 * The data path is shared memory on one host: a group segment created by
 * switchsim holds every member's send slots and the group's result slots.
 * Its fields are in host byte order (both ends share the machine).
 *
 * tests/unit/test_wire.c pins every size and offset.
 */
#ifndef AGG_WIRE_H
#define AGG_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "agg/status.h"

#define AGG_WIRE_MAGIC    0x4147474du /* "AGGM" */
#define AGG_WIRE_VERSION  1
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
    char     host[AGG_WIRE_NAME_LEN];
    char     bell_shm[AGG_WIRE_NAME_LEN]; /* the doorbell segment ranks map */
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

typedef struct agg_msg_group_config {
    uint32_t group_id;
    uint32_t job_id;
    uint32_t num_members;
    uint32_t num_nodes;          /* tree nodes, parents first, root at 0 */
    uint32_t osts;
    uint32_t payload_per_ost;
    /* followed by num_nodes agg_wire_tree_node_t, then num_members agg_wire_member_t */
} agg_msg_group_config_t;

typedef struct agg_wire_tree_node {
    uint64_t guid;
    int32_t  parent;             /* index in the node list, -1 for the root */
    uint32_t reserved;
} agg_wire_tree_node_t;

typedef struct agg_wire_member {
    uint32_t leaf;               /* index of the member's leaf in the node list */
} agg_wire_member_t;

typedef struct agg_msg_group_config_reply {
    int32_t  status;
    uint32_t group_id;
    char     shm_name[AGG_WIRE_NAME_LEN];
} agg_msg_group_config_reply_t;

typedef struct agg_msg_group_ref {
    uint32_t job_id;
    uint32_t group_id;
} agg_msg_group_ref_t;

typedef struct agg_msg_job_create {
    uint64_t job_key;            /* random, drawn by rank 0, same on every rank */
    uint32_t world_size;
    uint32_t pid;
    uint32_t quota_osts;         /* 0 = default share */
    uint32_t quota_payload_per_ost; /* 0 = node default */
    uint32_t quota_max_groups;   /* 0 = default share */
    uint32_t osts_per_group;
    char     host[AGG_WIRE_NAME_LEN];
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
} agg_msg_job_create_reply_t;

typedef struct agg_msg_job_ref {
    uint32_t job_id;
    uint32_t reserved;
} agg_msg_job_ref_t;

typedef struct agg_msg_group_create {
    uint32_t job_id;
    uint32_t num_members;        /* followed by num_members uint32_t world ranks */
    uint32_t osts;               /* OSTs the group asks for */
    uint32_t reserved;
} agg_msg_group_create_t;

typedef struct agg_msg_group_create_reply {
    int32_t  status;
    uint32_t group_id;
    uint32_t osts;
    uint32_t payload_per_ost;
    uint32_t num_members;
    uint32_t tree_depth;
    uint32_t tree_nodes;
    uint32_t reserved;
    char     shm_name[AGG_WIRE_NAME_LEN];
    char     bell_name[AGG_WIRE_NAME_LEN];
    /* followed by num_members uint64_t leaf switch GUIDs, in member order */
} agg_msg_group_create_reply_t;

typedef struct agg_msg_stats_reply {
    int32_t  status;
    uint32_t groups;             /* groups configured now */
    uint64_t fragments_in;       /* fragments received from ranks */
    uint64_t fragments_reduced;  /* reductions performed, all nodes */
    uint64_t results_out;        /* results returned to groups */
    uint64_t bytes_in;           /* payload bytes received from ranks */
    uint64_t errors;             /* malformed or mismatched fragments */
    uint64_t groups_total;       /* groups configured since start */
} agg_msg_stats_reply_t;

/* ---- shared-memory data path (host byte order) ---------------------- */

#define AGG_SHM_GROUP_MAGIC 0x47475341u /* "ASGG" */
#define AGG_SHM_BELL_MAGIC  0x4c424741u /* "AGBL" */
#define AGG_SHM_VERSION     3
#define AGG_CACHE_LINE      64

/*
 * One fragment header, at the start of every send and result slot. `seq`
 * is written last (release) by the producer and read first (acquire) by the
 * consumer; 0 means empty.
 */
typedef struct agg_frag_hdr {
    uint32_t seq;
    uint16_t op;     /* agg_op_t */
    uint8_t  dtype;  /* agg_dtype_t */
    uint8_t  flags;
    uint32_t count;  /* elements in this fragment */
    int32_t  status; /* result slots: AGG_OK or the error the tree saw */
} agg_frag_hdr_t;

/*
 * The doorbell segment, one per switchsim: ranks bump `doorbell` after
 * posting a fragment and wake switchsim only when it sleeps.
 */
typedef struct agg_shm_bell {
    uint32_t magic;
    uint32_t version;
    uint32_t doorbell;  /* futex word */
    uint32_t sleeping;  /* switchsim is (about to be) in futex_wait */
    uint8_t  pad[AGG_CACHE_LINE - 16];
} agg_shm_bell_t;

/*
 * A group segment: this header, then num_members channels, then osts
 * result slots. A channel is one cache line of counters followed by osts
 * send slots; a slot is an agg_frag_hdr_t padded to slot_stride bytes with
 * payload_per_ost bytes of data after the header.
 */
typedef struct agg_shm_group {
    uint32_t magic;
    uint32_t version;
    uint32_t group_id;
    uint32_t num_members;
    uint32_t osts;
    uint32_t payload_per_ost;
    uint32_t slot_stride;     /* bytes per slot, header included, cache-line multiple */
    uint32_t channel_stride;  /* bytes per channel */
    uint64_t channels_offset;
    uint64_t results_offset;
    uint64_t total_size;
    uint32_t dead;            /* set by switchsim when the group is torn down */
    uint32_t reserved;
    /* second line: written on the data path, kept off the read-mostly line */
    uint32_t waiters;         /* ranks asleep on result_gen */
    uint32_t result_gen;      /* futex word: bumped after results were published */
    uint8_t  pad[AGG_CACHE_LINE - 8];
} agg_shm_group_t;

typedef struct agg_shm_channel {
    uint32_t posted;    /* fragments posted by the member, ever */
    uint32_t reserved;
    uint64_t leaf_guid; /* the aggregation node this member's fragments enter */
    uint8_t  pad[AGG_CACHE_LINE - 16];
} agg_shm_channel_t;

#define AGG_FRAG_HDR_SIZE AGG_CACHE_LINE /* payload starts one cache line in */

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
#define AGG_FMT_SIM_REGISTER       "llllss"
#define AGG_FMT_SIM_REGISTER_REPLY "llll"
#define AGG_FMT_SWITCH             "qs"
#define AGG_FMT_GROUP_CONFIG       "llllll"
#define AGG_FMT_TREE_NODE          "qll"
#define AGG_FMT_MEMBER             "l"
#define AGG_FMT_GROUP_CONFIG_REPLY "lls"
#define AGG_FMT_GROUP_REF          "ll"
#define AGG_FMT_JOB_CREATE         "qlllllls"
#define AGG_FMT_JOB_CREATE_REPLY   "llllllllq"
#define AGG_FMT_JOB_REF            "ll"
#define AGG_FMT_GROUP_CREATE       "llll"
#define AGG_FMT_GROUP_CREATE_REPLY "llllllllss"
#define AGG_FMT_STATS_REPLY        "llqqqqqq"

/* Bytes a layout covers. */
size_t agg_wire_fmt_size(const char *fmt);

/*
 * Converts `count` consecutive structs of layout `fmt` between host and wire
 * order in place (the conversion is its own inverse). Returns bytes covered.
 */
size_t agg_wire_swap(void *s, const char *fmt, size_t count);

/* Encodes the 16-byte header into wire order. */
void agg_wire_hdr_encode(agg_msg_hdr_t *out, uint16_t type, uint32_t length,
                         uint32_t txid);

/*
 * Decodes a received header in place and checks magic, version and that the
 * length is at most AGG_WIRE_MAX_BODY.
 */
agg_status_t agg_wire_hdr_decode(agg_msg_hdr_t *hdr);

const char *agg_msg_type_name(unsigned type);

#endif
