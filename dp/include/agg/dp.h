/*
 * The data path on one host: the shared-memory part of the wire format and
 * the aggregation-node engine that runs on it.
 *
 * A group's part of an aggregation tree that one switchsim hosts is one
 * shared segment (agg_dp_seg_t). It holds, for every node of that part, the
 * node's slot states (one per fragment in flight, agg_dp_slot_t) with their
 * accumulators, and, for every member rank whose leaf is in it, a channel.
 * Every process that maps the segment runs the same engine on it
 * (agg_dp_push and friends): switchsim's worker threads, and member ranks,
 * which push their own fragments into their leaf themselves and, when theirs
 * is the last contribution a node waited for, complete the node: forward its
 * partial result to the parent, or publish the group's result. On a machine
 * with no core to spare this is what keeps a small allreduce from waiting for
 * another process to be scheduled.
 *
 * A node slot combines one fragment from each of the node's children: member
 * ranks below it (positions 0..k-1, in member order) and child nodes (next
 * positions, in node order). A child pushes its contribution under the slot's
 * lock: the first is copied into the accumulator, the others are reduced into
 * it, and a bitmap records which children have been seen (a child seen twice,
 * e.g. a retransmission, is ignored). By default children are combined in the
 * order they arrive; with AGG_DP_F_REPRODUCIBLE a child may push only in its
 * turn (position order), so float results are bitwise the same whatever the
 * arrival order. The child that completes a node forwards the accumulator to
 * the parent through the node's up port: LOCAL (a node of this segment) or SHM
 * (a node in another switchsim's segment on this host, which that switchsim
 * maps). The root publishes the result in place: members read node 0's slot
 * once its `done` says their fragment (the software form of SHARP's multicast
 * result); node 0 of a segment whose top has a parent elsewhere receives the
 * result through that parent's down port.
 *
 * Accumulators hold agg_dtype_acc(dtype) elements: 16-bit floats are combined
 * in float32 inside the tree and rounded once, when a member copies out.
 *
 * Every field is in host byte order: both ends share the machine. Offsets are
 * from the segment start, so each process maps the segment where it likes.
 * tests/unit/test_wire.c pins the sizes and offsets of these structs.
 */
#ifndef AGG_DP_H
#define AGG_DP_H

#include <stddef.h>
#include <stdint.h>

#include "agg/seq.h"
#include "agg/frag.h"
#include "agg/status.h"
#include "agg/wire.h"

#define AGG_DP_MAGIC      0x50444741u /* "AGDP" */
#define AGG_DP_HOST_MAGIC 0x54534841u /* "AHST" */
#define AGG_DP_VERSION    7
#define AGG_DP_LINE       64
#define AGG_DP_NAME_LEN   64

/* What a fragment asks of the tree. */
typedef enum agg_dp_kind {
    AGG_DP_KIND_DATA   = 0, /* reduce `count` elements */
    AGG_DP_KIND_LOCK   = 1, /* take the SAT lock on every node of the tree */
    AGG_DP_KIND_UNLOCK = 2, /* give it back */
    AGG_DP_KIND__COUNT
} agg_dp_kind_t;

/*
 * Which collective a fragment belongs to; the values travel on the wire and
 * equal libagg's agg_coll_type_t. The node does what each needs:
 * - ALLREDUCE, REDUCE, REDUCE_SCATTER, BARRIER: reduce every child's data;
 *   the members read (all of, the root only, each its own block of, none
 *   of) the result.
 * - BCAST: only the root's data is non-empty; the node passes it on.
 * - ALLGATHER: each child's data covers a part of the fragment (its block);
 *   the node places the parts side by side.
 * Every member must send the same collective, root and count for a
 * fragment, or the fragment fails for all of them.
 */
typedef enum agg_dp_coll {
    AGG_DP_COLL_ALLREDUCE      = 0,
    AGG_DP_COLL_REDUCE         = 1,
    AGG_DP_COLL_BCAST          = 2,
    AGG_DP_COLL_BARRIER        = 3,
    AGG_DP_COLL_REDUCE_SCATTER = 4,
    AGG_DP_COLL_ALLGATHER      = 5,
    AGG_DP_COLL__COUNT
} agg_dp_coll_t;

/* agg_dp_seg_t.flags */
#define AGG_DP_F_REPRODUCIBLE 0x01u /* children are combined in position order */

/* agg_dp_node_t.up */
typedef enum agg_dp_up {
    AGG_DP_UP_ROOT  = 0, /* the group's root: publishes the result */
    AGG_DP_UP_LOCAL = 1, /* parent is node `parent` of this segment */
    AGG_DP_UP_SHM   = 2, /* parent is in another segment: port table entry `port` */
    AGG_DP_UP_NET   = 3, /* parent is in another switchsim process, reached over the
                            network: port table entry `port`, sent by the view's `net` */
} agg_dp_up_t;

/* agg_dp_port_t.kind */
typedef enum agg_dp_port_kind {
    AGG_DP_PORT_SHM    = 0, /* a segment of this host, mapped by name */
    AGG_DP_PORT_NET    = 1, /* a part of the group in another switchsim process */
    AGG_DP_PORT_MEMBER = 2, /* down only: member `node` of this segment, attached over
                               the network: the result is sent to it */
} agg_dp_port_kind_t;

/* ---- the segment ------------------------------------------------------ */

typedef struct agg_dp_seg {
    /* line 0: the layout, written once by the creator before `magic` */
    uint32_t magic;
    uint32_t version;
    uint32_t group_id;
    uint8_t  tree;         /* agg_tree_type_t */
    uint8_t  flags;        /* AGG_DP_F_* */
    uint16_t reserved0;
    uint32_t num_members;
    uint32_t num_nodes;
    uint32_t window;       /* fragments a member may have in flight */
    uint32_t num_slots;    /* agg_seq_slots(window) slot states per node */
    uint32_t payload;      /* largest fragment, bytes of wire data */
    uint32_t slot_stride;  /* a node slot: agg_dp_slot_t + accumulator */
    uint32_t stage_stride; /* a staging slot: agg_dp_frag_t + payload */
    uint32_t chan_stride;  /* a channel: agg_dp_chan_t + window staging slots */
    uint64_t members_off;  /* num_members agg_dp_member_t */
    uint64_t chans_off;    /* num_members channels */
    /* line 1 */
    uint64_t nodes_off;    /* num_nodes agg_dp_node_t */
    uint64_t ports_off;    /* num_ports agg_dp_port_t */
    uint64_t slots_off;    /* every node's slots, node by node */
    uint64_t bitmaps_off;  /* seen-bitmaps of nodes with more than 64 children */
    uint64_t total_size;
    uint32_t num_ports;
    uint32_t dead;         /* set when the group is torn down */
    uint8_t  pad1[16];
    /* line 2: written on the data path */
    uint32_t sleepers;     /* members asleep waiting for a result */
    uint32_t result_gen;   /* futex word: bumped when a result came while someone slept */
    uint8_t  pad2[56];
    /* line 3 */
    uint32_t work_gen;     /* bumped when a completed slot could not be forwarded at once */
    uint8_t  pad3[60];
} agg_dp_seg_t;

typedef struct agg_dp_member {
    uint32_t leaf;         /* node index of the member's leaf */
    uint32_t position;     /* its child position there */
    uint32_t pid;          /* written by the member when it attaches */
    uint32_t reserved;
    uint64_t leaf_guid;
    uint64_t reserved2;
} agg_dp_member_t;

/*
 * What a driver of the data path counts, one set per driver (a switchsim
 * worker thread, or a member rank pushing its own fragments) so that no
 * counter is ever written by two threads. Readers add them up.
 */
typedef struct agg_dp_counters {
    uint64_t llt_fragments_in; /* LLT fragments received from ranks */
    uint64_t sat_chunks_in;    /* SAT chunks received from ranks */
    uint64_t bytes_in;         /* payload bytes received from ranks, both trees */
    uint64_t sat_bytes_in;     /* of which on the SAT */
    uint64_t reductions;       /* contributions combined into an accumulator */
    uint64_t results_out;      /* results published to a group */
    uint64_t errors;           /* malformed or mismatched fragments */
    uint64_t duplicates;       /* contributions of a child already seen */
    uint64_t locks_granted;    /* SAT lock requests granted */
    uint64_t locks_busy;       /* SAT lock requests refused: held by another group */
    uint64_t zcopy_bytes;      /* bytes moved straight from/to rank buffers (CMA) */
    uint64_t faults;           /* messages met by an injected fault (sim_faults) */
    uint64_t resent;           /* results sent again: a member sent its fragment again */
    uint64_t corrupt;          /* messages that failed their checksum (taken for lost) */
    uint64_t reserved[2];
} agg_dp_counters_t;

/*
 * A member's channel. Only used when switchsim pushes the member's fragments
 * for it (AGG_RANK_PROGRESS=0): the member stages a fragment in staging slot
 * (n - 1) % window and switchsim's scan takes it. `drv` holds the member's
 * own counters when it pushes for itself.
 */
typedef struct agg_dp_chan {
    uint64_t          consumed;  /* fragments taken by the scanner, ever */
    uint32_t          scan_lock; /* one scanner at a time */
    uint8_t           pad0[52];
    agg_dp_counters_t drv;
} agg_dp_chan_t;

/* agg_dp_frag_t.flags */
#define AGG_DP_FRAG_CMA    0x01u /* data and result stay in the rank's memory (src/dst) */
#define AGG_DP_FRAG_FAILED 0x02u /* the rank gave up on it: it fails for every member */
#define AGG_DP_FRAG_EMPTY  0x04u /* the rank adds no data to it (a bcast's non-root) */

/* A staged fragment, at the start of a staging slot; payload at AGG_DP_FRAG_SIZE. */
typedef struct agg_dp_frag {
    uint64_t        n;     /* fragment number; written last (release) */
    agg_frag_desc_t desc;
    uint8_t         flags; /* AGG_DP_FRAG_* */
    uint8_t         reserved[3];
    uint32_t        pid;   /* CMA: the rank's process */
    uint64_t        src;   /* CMA: where the data is in that process */
    uint64_t        dst;   /* CMA: where the result goes */
    uint32_t        off;   /* ALLGATHER: the staged data are elements off .. off + len */
    uint32_t        len;   /*   of the fragment */
} agg_dp_frag_t;

#define AGG_DP_FRAG_SIZE AGG_DP_LINE

typedef struct agg_dp_node {
    uint64_t guid;
    int32_t  parent;       /* up == LOCAL: node index of the parent; else -1 */
    uint32_t position;     /* this node's child position at its parent */
    uint32_t expected;     /* children: members below it, then child nodes */
    uint32_t an;           /* index of the switch in the host segment's AN table */
    uint8_t  up;           /* agg_dp_up_t */
    uint8_t  reserved[3];
    uint32_t port;         /* up == SHM: port table index */
    uint64_t slots_off;    /* num_slots slots of slot_stride bytes */
    uint64_t bitmap_off;   /* expected > 64: num_slots bitmaps of bitmap_words; else 0 */
    uint32_t bitmap_words;
    uint32_t num_down;     /* down ports: segments the result is copied into */
    uint32_t down_first;   /* their first port table index */
    uint32_t reserved2;
} agg_dp_node_t;

/*
 * A link to a node in another segment (another switchsim on this host): an
 * up port names the parent (node, and this node's position there), a down
 * port a child segment whose node 0 receives the result.
 */
typedef struct agg_dp_port {
    char     seg[AGG_DP_NAME_LEN]; /* SHM: the other segment's shared-memory name */
    uint32_t node;                 /* MEMBER: the member's channel */
    uint32_t position;
    uint8_t  kind;                 /* agg_dp_port_kind_t */
    uint8_t  pad[55];
} agg_dp_port_t;

#define AGG_DP_SLOT_LOCKED 0x80000000u /* agg_dp_slot_t.state */

/* agg_dp_slot_t.flags */
#define AGG_DP_SLOT_PENDING 0x01u /* complete; moving it on (forward, result down) is still to do */
#define AGG_DP_SLOT_FILLED  0x02u /* the accumulator holds data (some child sent any) */

/* One fragment being combined at one node; the accumulator follows at AGG_DP_SLOT_HDR. */
typedef struct agg_dp_slot {
    uint32_t state;  /* AGG_DP_SLOT_LOCKED | children pushed in this use */
    int32_t  status; /* AGG_OK, or what went wrong (every member sees it) */
    uint64_t done;   /* last fragment completed here (release): a result is read when done == n */
    uint64_t cur;    /* fragment being combined */
    agg_frag_desc_t desc; /* as the first child sent it: the others must agree */
    uint8_t  flags;  /* AGG_DP_SLOT_* */
    uint8_t  pad[7];
    uint64_t seen;   /* children seen, when the node has at most 64 */
    uint64_t moved;  /* last fragment this slot moved on (forwarded or published) */
} agg_dp_slot_t;

#define AGG_DP_SLOT_HDR 64
#define AGG_DP_ACC_FACTOR 2 /* accumulator bytes per payload byte (16-bit floats in float32) */

/* ---- the host segment: one per switchsim ------------------------------ */

/* One hosted switch: the state of it that every driver on the host may touch. */
typedef struct agg_dp_an {
    uint64_t guid;
    uint32_t sat_lock;       /* group id holding the switch's SAT lock; 0 = free */
    uint32_t reserved;
    uint64_t sat_lock_taken; /* times it was taken */
    uint8_t  pad[40];
} agg_dp_an_t;

typedef struct agg_dp_host {
    uint32_t magic;
    uint32_t version;
    uint32_t num_ans;
    uint32_t workers;    /* switchsim's worker threads */
    uint32_t pid;
    uint8_t  pad0[44];
    /* line 1: written on the data path */
    uint32_t doorbell;   /* futex word: bumped when switchsim has work */
    uint32_t sleeping;   /* switchsim workers asleep on it */
    uint8_t  pad1[56];
    /* then num_ans agg_dp_an_t */
} agg_dp_host_t;

static inline agg_dp_an_t *agg_dp_host_an(agg_dp_host_t *h, uint32_t i)
{
    return (agg_dp_an_t *)(h + 1) + i;
}

static inline size_t agg_dp_host_size(uint32_t num_ans)
{
    return sizeof(agg_dp_host_t) + (size_t)num_ans * sizeof(agg_dp_an_t);
}

/* ---- accessors (the segment has been checked by agg_dp_check) -------- */

static inline agg_dp_member_t *agg_dp_member(const agg_dp_seg_t *s, uint32_t m)
{
    return (agg_dp_member_t *)((uint8_t *)s + s->members_off) + m;
}

static inline agg_dp_chan_t *agg_dp_chan(const agg_dp_seg_t *s, uint32_t m)
{
    return (agg_dp_chan_t *)((uint8_t *)s + s->chans_off + (size_t)m * s->chan_stride);
}

static inline agg_dp_frag_t *agg_dp_stage(const agg_dp_seg_t *s, uint32_t m, uint64_t n)
{
    return (agg_dp_frag_t *)((uint8_t *)agg_dp_chan(s, m) + sizeof(agg_dp_chan_t) +
                             (size_t)agg_seq_slot(n, s->window) * s->stage_stride);
}

static inline void *agg_dp_frag_data(agg_dp_frag_t *f)
{
    return (uint8_t *)f + AGG_DP_FRAG_SIZE;
}

static inline agg_dp_node_t *agg_dp_node(const agg_dp_seg_t *s, uint32_t i)
{
    return (agg_dp_node_t *)((uint8_t *)s + s->nodes_off) + i;
}

static inline agg_dp_port_t *agg_dp_port(const agg_dp_seg_t *s, uint32_t i)
{
    return (agg_dp_port_t *)((uint8_t *)s + s->ports_off) + i;
}

static inline agg_dp_slot_t *agg_dp_slot(const agg_dp_seg_t *s, const agg_dp_node_t *node,
                                         uint64_t n)
{
    return (agg_dp_slot_t *)((uint8_t *)s + node->slots_off +
                             (size_t)agg_seq_slot(n, s->num_slots) * s->slot_stride);
}

static inline void *agg_dp_acc(agg_dp_slot_t *slot)
{
    return (uint8_t *)slot + AGG_DP_SLOT_HDR;
}

/* The slot of node 0 holding fragment n's result, or NULL while it is not there. */
static inline agg_dp_slot_t *agg_dp_result(const agg_dp_seg_t *s, uint64_t n)
{
    agg_dp_slot_t *slot = agg_dp_slot(s, agg_dp_node(s, 0), n);

    return __atomic_load_n(&slot->done, __ATOMIC_ACQUIRE) == n ? slot : NULL;
}

/* ---- building a segment (switchsim, tests) ----------------------------- */

/* One node of the part of a tree a segment holds, parents first (node 0 on top). */
typedef struct agg_dp_node_desc {
    uint64_t guid;
    int32_t  parent;   /* index among these nodes; -1 for node 0 */
    uint32_t an;       /* AN table index in the host segment */
    uint8_t  up;       /* node 0: AGG_DP_UP_ROOT or AGG_DP_UP_SHM; others LOCAL */
    uint32_t port;     /* up == SHM: port index */
    uint32_t extra;    /* children in other segments (pushing through their up
                          ports), at the positions after members and child nodes */
    uint32_t num_down; /* down ports of this node: ports[down_first .. +num_down) */
    uint32_t down_first;
} agg_dp_node_desc_t;

typedef struct agg_dp_shape {
    uint32_t                  group_id;
    uint8_t                   tree;
    uint8_t                   flags;
    uint32_t                  window;
    uint32_t                  payload;     /* bytes, a multiple of 8 */
    uint32_t                  num_nodes;
    const agg_dp_node_desc_t *nodes;
    uint32_t                  num_members;
    const uint32_t           *member_leaf; /* per member: node index */
    uint32_t                  num_ports;
    const agg_dp_port_t      *ports;
} agg_dp_shape_t;

/*
 * Fills *layout (a header with every size and offset) for the shape and
 * returns the segment size, or 0 when the shape is invalid (why says what).
 */
size_t agg_dp_layout(const agg_dp_shape_t *shape, agg_dp_seg_t *layout, char *why,
                     size_t whylen);

/*
 * Writes a segment for the shape into zero-filled memory of agg_dp_layout()
 * bytes: header, members (leaf and position), nodes (children counted,
 * positions assigned), ports; `magic` last (release).
 */
agg_status_t agg_dp_init(void *mem, size_t size, const agg_dp_shape_t *shape);

/*
 * Checks a mapped segment before anyone trusts a field of it: magic,
 * version, and that every offset, stride and count stays inside `size`.
 * Returns AGG_ERR_GROUP_JOIN with why saying what is wrong.
 */
agg_status_t agg_dp_check(const void *mem, size_t size, char *why, size_t whylen);

/* Checks a mapped host segment the same way (AGG_ERR_GROUP_JOIN). */
agg_status_t agg_dp_host_check(const void *mem, size_t size, char *why, size_t whylen);

/*
 * The endpoint (AGG_TL_SHM) a member on switchsim's host attaches to: the
 * group segment's shared-memory name, then the host segment's, each with
 * its NUL. AGG_ERR_PARSE: the names do not fit.
 */
agg_status_t agg_dp_ep_format(agg_wire_endpoint_t *ep, const char *seg, const char *host);

/* The two names of such an endpoint, pointing into it; AGG_ERR_PARSE with why. */
agg_status_t agg_dp_ep_parse(const agg_wire_endpoint_t *ep, const char **seg,
                             const char **host, char *why, size_t whylen);

/* ---- driving it ------------------------------------------------------- */

/*
 * A process's view of a mapped segment: the segment, its host segment (the
 * AN table with the SAT locks; NULL when the group has no switchsim behind
 * it, as in unit tests: locks are then always granted), and the segments its
 * ports lead to, where this process maps them (NULL where it does not: a
 * forward through such a port is left for a process that does).
 */
typedef struct agg_dp_view {
    agg_dp_seg_t        *seg;
    size_t               size;
    agg_dp_host_t       *host;
    struct agg_dp_view **peers; /* num_ports entries, or NULL */
    const struct agg_dp_net *net; /* NET and MEMBER ports; NULL: not this process's */
} agg_dp_view_t;

/* Who is driving: one per thread. */
typedef struct agg_dp_driver {
    agg_dp_counters_t *ctr;          /* this driver's counters (single writer) */
    void              *scratch;      /* CMA staging, scratch_size bytes */
    size_t             scratch_size;
    uint32_t           work_seen;    /* last work_gen of work_seg this driver handled */
    const agg_dp_seg_t *work_seg;    /* the segment work_seen is about (a driver may push
                                        into other segments, through ports) */
    int                in_progress;  /* agg_dp_progress is on the stack */
} agg_dp_driver_t;

/* One child's contribution to a fragment. */
typedef struct agg_dp_contrib {
    uint64_t    n;
    agg_frag_desc_t desc;
    uint8_t     empty;  /* no data from this child (a bcast's non-root, an empty subtree) */
    int32_t     status; /* a child that failed passes its error up */
    uint32_t    off;    /* ALLGATHER from a member: data are elements off .. off + len */
    uint32_t    len;    /*   of the fragment (a child node's partial covers all of it) */
    const void *data;   /* count (or len) elements; NULL with pid: read them from pid at raddr */
    uint32_t    pid;
    uint64_t    raddr;
    int         in_acc; /* data holds accumulator elements (a child node's partial) */
    int         in_place; /* data are in the slot's accumulator already (agg_dp_claim) */
} agg_dp_contrib_t;

/*
 * How a process that owns network links (switchsim) moves fragments through
 * NET ports: `up` sends a completed node's partial to its parent in another
 * switchsim, `down` a published result to a child part or a member attached
 * over the network. Both may block briefly (a full socket) but never for
 * long; an error is logged by them and the fragment is dropped there (the
 * members then time out). A process with no `net` (a rank) leaves those moves
 * to switchsim, as with SHM ports it does not map.
 */
typedef struct agg_dp_net {
    agg_status_t (*up)(void *ctx, uint32_t port, const agg_dp_contrib_t *c);
    agg_status_t (*down)(void *ctx, uint32_t port, const agg_dp_slot_t *slot);
    void *ctx;
} agg_dp_net_t;

/*
 * Takes a result that came down from the parent part over the network into
 * node 0 of this segment (switchsim's receiving thread): writes the slot,
 * passes it on through node 0's down ports, gives back this part's SAT locks
 * when it is a refused lock, then lets the members read it. A copy of a
 * result it has (sent again), or of one older than the slot's, changes
 * nothing (AGG_OK); AGG_ERR_BAD_FRAGMENT: not a fragment this node sent up.
 */
agg_status_t agg_dp_result_in(agg_dp_view_t *v, const agg_dp_slot_t *hdr, const void *acc);

/*
 * Pushes a child's contribution to fragment c->n into node `node` at child
 * `position`. When it is the last one the node waited for, completes the node
 * (forward up, or publish the result). Never blocks: AGG_INPROGRESS means the
 * slot is busy (or, in reproducible mode, it is not this child's turn yet);
 * push again later. AGG_OK: taken (a duplicate is taken and ignored).
 * A contribution that does not match the others (op, type, count, kind) or
 * is malformed makes the fragment's result an error every member sees.
 */
agg_status_t agg_dp_push(agg_dp_view_t *v, uint32_t node, uint32_t position,
                         const agg_dp_contrib_t *c, agg_dp_driver_t *drv);

/*
 * For a fragment that is the only one its node waits for (a leaf with one
 * member), of a type the node accumulates as it is: claims the slot it goes
 * to, so that its data can be read straight into the accumulator (one copy
 * fewer). Returns the accumulator, count elements of c->dtype, or NULL when
 * the slot is busy or the fragment cannot go that way (then agg_dp_push it).
 * c needs no data. The slot stays locked until agg_dp_push_claimed, with
 * the data in, or agg_dp_unclaim, without.
 */
void *agg_dp_claim(agg_dp_view_t *v, uint32_t node, const agg_dp_contrib_t *c);
agg_status_t agg_dp_push_claimed(agg_dp_view_t *v, uint32_t node, const agg_dp_contrib_t *c,
                                 agg_dp_driver_t *drv);
void agg_dp_unclaim(agg_dp_view_t *v, uint32_t node, uint64_t n);

/*
 * Finishes what completed nodes left to do (forwards that found the parent
 * busy); cheap when there is nothing (one load). Returns how many were done.
 */
unsigned agg_dp_progress(agg_dp_view_t *v, agg_dp_driver_t *drv);

/*
 * switchsim's side of a channel: pushes member m's staged fragments into its
 * leaf, at most `window` of them; returns how many it took.
 */
unsigned agg_dp_scan(agg_dp_view_t *v, uint32_t member, agg_dp_driver_t *drv);

/* Counts a contribution received from a rank (by the driver that pushed it). */
void agg_dp_count_in(agg_dp_driver_t *drv, uint8_t tree, const agg_dp_contrib_t *c);

/*
 * Copies fragment n's result (slot from agg_dp_result) into dst: count
 * elements of the wire type, rounded from the accumulator type. (A member
 * that staged its chunk for zero copy has its result written by the node.)
 */
void agg_dp_copy_out(const agg_dp_slot_t *slot, void *dst);

/* The same for elements off .. off + len of the result only. */
void agg_dp_copy_out_part(const agg_dp_slot_t *slot, uint32_t off, uint32_t len, void *dst);

/* Wakes members asleep on the segment's results. */
void agg_dp_wake_members(agg_dp_seg_t *s);

/* Adds one counter set to another (readers sum every driver's). */
void agg_dp_counters_add(agg_dp_counters_t *sum, const agg_dp_counters_t *c);

/* Single-writer counter increment that readers in other threads may load. */
static inline void agg_dp_count(uint64_t *ctr, uint64_t v)
{
    __atomic_store_n(ctr, __atomic_load_n(ctr, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

#endif
