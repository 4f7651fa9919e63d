/*
 * switchsim's TCP data port (switchsim_net*.c): members on other hosts send their fragments
 * here (agg/net.h) and get each result back. One thread serves every
 * connection from its event loop (agg/loop.h): it reads what arrived, pushes each
 * fragment into the member's leaf with the same engine ranks run on shared
 * memory, and keeps a fragment whose slot is busy (or, reproducible, not its
 * turn yet) at the head of its connection until it goes in, reading no more
 * from that connection meanwhile. A large fragment that is the only one its
 * slot waits for (a leaf with one member) is read straight into the slot's
 * accumulator (agg_dp_claim), not through the connection's buffer. Results
 * go out through the node's MEMBER down ports, from whichever switchsim
 * thread publishes them (this one, or a worker finishing what a local rank
 * left).
 *
 * No thread waits for room on a socket. Every socket this port writes (a
 * member's connection, a link to another switchsim) has a send queue
 * (agg/txq.h): a message goes straight out when the queue is empty and the
 * socket takes it; what the socket does not take waits in the queue, and
 * this thread writes it when poll() says there is room. A queued message's
 * data stay where they are, in the slot's accumulator: a slot is used again
 * for fragment n + 2 x window only (agg_seq_slots), which needs every
 * member's fragment n + window, which a member sends once it has result n,
 * which is still in the queue. A result narrowed to its wire type is
 * narrowed when it starts going out, into the connection's one buffer. A
 * socket whose queue moves nothing for SWITCHSIM_NET_SEND_MS is cut off.
 *
 * A group whose tree spans switchsims has a part here and parts there:
 * this switchsim keeps one outgoing link per other switchsim it sends to
 * (a part's partial up to its parent part, the result down to child parts)
 * and reads what other switchsims send it on the connections they opened,
 * which say so in their HELLO (channel AGG_NET_PEER).
 *
 * Off loopback every connection first proves the shared secret
 * (agg/auth.h). A new connection's proof and HELLO are read by this
 * thread's loop as they come (switchsim__on_joining), with no thread of
 * their own: a peer that says nothing holds only its own connection, closed
 * after connect_timeout_ms, or at once when every connection is taken and
 * a new one comes (the one joining longest makes room). Nothing is
 * allocated per fragment: a connection's buffers are sized for its group's
 * payload when it joins.
 */
#ifndef SWITCHSIM_NET_INT_H
#define SWITCHSIM_NET_INT_H

#include <errno.h>
#include <string.h>

#include "switchsim.h"
#include "agg/auth.h"
#include "agg/fault.h"
#include "agg/loop.h"
#include "agg/net.h"
#include "agg/txq.h"

#define SWITCHSIM_NET_MAX_CONNS 1024
#define SWITCHSIM_NET_MAX_LINKS 64
#define SWITCHSIM_NET_MAX_MSG   (2u * (64u << 20) + 64u) /* a SAT chunk of accumulators */
#define SWITCHSIM_NET_SEND_MS   10000 /* a socket that takes nothing for this long (10 s) is cut off */
#define SWITCHSIM_NET_TXQ_FIRST 64u   /* messages a queue holds at first... */
#define SWITCHSIM_NET_TXQ_MAX   (1u << 16) /* ...and at most, doubling when full */
#define SWITCHSIM_NET_DIRECT_MIN 16384u /* a fragment this large is read straight into its
                                          accumulator when it can be */
#define SWITCHSIM_NET_SERVE_MAX 16    /* fragments read straight in per turn of a connection */

enum { SWITCHSIM_JOIN_PROOF = 1, SWITCHSIM_JOIN_HELLO, SWITCHSIM_JOIN_DONE };

enum {
    SWITCHSIM_CONN_FREE = 0,    /* no socket */
    SWITCHSIM_CONN_JOINING,     /* the secret's proof and the HELLO are read (switchsim__on_joining) */
    SWITCHSIM_CONN_LIVE,        /* joined: the data port's thread serves it */
};

typedef struct switchsim_conn {
    struct switchsim_net *net;
    int             state;      /* SWITCHSIM_CONN_* (atomic) */
    int             fd;         /* -1: free */
    uint32_t        gen;        /* bumped at every use, so stale bindings miss */
    pthread_mutex_t tx_lock;    /* results are sent by several threads */
    agg_txq_t       txq;
    size_t          tx_cap;     /* a result's bytes at most (its group's payload) */
    uint32_t        group_id;
    uint8_t         tree;
    uint32_t        part;
    uint32_t        channel;
    uint32_t        lane;       /* which of its member's connections (agg/net.h) */
    uint8_t        *rx;         /* what arrived and is not handled yet */
    size_t          rx_cap, rx_len;
    int             stalled;    /* the head fragment waits for its slot */
    uint64_t        held_until; /* sim_faults: not read until then (ms, monotonic); 0 none */
    unsigned        fault;      /* sim_faults: what befalls the head message (AGG_FAULT_*) */
    int             fault_set;  /* `fault` is decided for the head message */
    int             corrupt_said; /* a message failing its checksum was logged */
    /* a fragment read straight into its slot's accumulator (agg_dp_claim) */
    agg_net_msg_t   dm;         /* its header */
    uint8_t        *dst;        /* where its data go; NULL: none */
    size_t          dst_got;    /* bytes of them in */
    uint64_t        dst_uid;    /* its group (switchsim_group_t.uid) */
    int             hdr_first;  /* the last one went so: read the next header alone */
    int             is_peer;    /* another switchsim: UP and DOWN of any group */
    int             join_step;  /* SWITCHSIM_JOIN_*: what a joining connection must send next */
    int64_t         join_at;    /* when it was accepted (ms, monotonic) */
    uint8_t         join_buf[sizeof(agg_net_msg_t) > sizeof(agg_auth_response_t) ?
                             sizeof(agg_net_msg_t) : sizeof(agg_auth_response_t)];
    size_t          join_got;   /* bytes of this step's message in */
    uint8_t         nonce[AGG_AUTH_NONCE_LEN]; /* the challenge sent (off loopback) */
    int             off_loopback; /* it proves the shared secret first */
    char            peer[64];
} switchsim_conn_t;

/* An outgoing link to another switchsim's data port. */
typedef struct switchsim_link {
    char            addr[AGG_WIRE_NAME_LEN];
    int             fd;         /* -1: broken (sends are dropped; the next group
                                   configured over it reconnects) */
    int             watched;    /* the fd the loop watches for it, -1 none (loop's thread) */
    int32_t         broke;      /* why it broke, until aggmgr is told; 0 none */
    pthread_mutex_t lock;
    agg_txq_t       txq;
} switchsim_link_t;

struct switchsim_net {
    switchsim_t      *sim;
    int               listen_fd;
    int               off_loopback; /* peers prove the shared secret */
    agg_auth_t        auth;
    char              addr[AGG_WIRE_NAME_LEN]; /* advertised "ip:port" */
    agg_loop_t       *loop;     /* its thread's */
    pthread_t         thread;
    int               started;
    switchsim_conn_t  conns[SWITCHSIM_NET_MAX_CONNS];
    switchsim_link_t  links[SWITCHSIM_NET_MAX_LINKS];
    int               num_links;
    agg_dp_counters_t ctr;      /* this thread's driving */
    agg_dp_driver_t   drv;
    uint64_t          evicted;  /* joining connections closed to make room (loop's thread) */
    int               retry;    /* the loop's timer for fragments waiting for their slot */
    int               hold;     /* the loop's timer for connections held (sim_faults) */
    agg_fault_t       faults;   /* sim_faults */
    uint64_t          hold_at;  /* when the hold timer is due (ms, monotonic); 0 not set */
    uint64_t          faults_out; /* messages out met by a fault (atomic: any thread) */
};


/* switchsim__txq_send's how */
#define SWITCHSIM_TX_NARROW 0x1 /* the data are accumulators to narrow to the wire type */
#define SWITCHSIM_TX_SPOIL  0x2 /* sim_faults' corrupt: it goes with pad 1, failing its checksum */

/*
 * Sends a message through a socket's queue (caller holds the queue's lock),
 * sealed: now, or, for a result to narrow, once narrowed (switchsim__narrow).
 */
static inline agg_status_t switchsim__txq_send(agg_txq_t *q, int fd, const agg_net_msg_t *m,
                                               const void *data, unsigned how)
{
    agg_net_msg_t h = *m;

    h.pad = 0;
    if (!(how & SWITCHSIM_TX_NARROW)) {
        agg_net_seal(&h, data);
    }
    h.pad = (how & SWITCHSIM_TX_SPOIL) ? 1 : 0;
    return agg_txq_send(q, fd, &h, sizeof(h), data, h.bytes,
                        (how & SWITCHSIM_TX_NARROW) ? AGG_TXQ_PREP : 0);
}

/* ---- the port (switchsim_net.c): the loop, joining, the send queues ----- */

/* A queue for a socket whose results may be narrowed into narrow_cap bytes. */
agg_status_t switchsim__txq_init(switchsim_net_t *net, agg_txq_t *q, size_t narrow_cap);

/* On the data port's thread: reads nothing from c for ms (sim_faults' delay and stall). */
void switchsim__conn_hold(switchsim_net_t *net, switchsim_conn_t *c, uint32_t ms);

/* sim_faults' kill: says at which message, then SIGKILL (the process dies here). */
void switchsim__fault_kill(switchsim_net_t *net, int dir);

/*
 * sim_faults on a message going out: 0 send it, 1 lost (send nothing), 2
 * send it twice, 3 send it spoilt (SWITCHSIM_TX_SPOIL). Any thread.
 */
int switchsim__net_fault_out(switchsim_net_t *net);

/* On the data port's thread: closes a connection (why NULL: says nothing). */
void switchsim__conn_close(switchsim_net_t *net, switchsim_conn_t *c, const char *why);

/* ---- members (switchsim_net_member.c): fragments in, results out -------- */

/* A connection's turn: reads and pushes what it can (readable: poll said so). */
void switchsim__net_serve(switchsim_net_t *net, switchsim_conn_t *c, int readable);

/* The connection goes with a fragment half read straight in: its slot is given back. */
void switchsim__direct_drop(switchsim_net_t *net, switchsim_conn_t *c);

/* A MEMBER down port (or a NET one, through the link): a result goes out. */
agg_status_t switchsim__net_down(void *ctx, uint32_t port, const agg_dp_slot_t *slot);

/* ---- links between switchsims (switchsim_net_link.c) -------------------- */

/* Whether this part has fragment n done or sent up (a copy of it came again). */
static inline int switchsim__part_seen(switchsim_group_t *g, uint64_t n)
{
    const agg_dp_slot_t *slot = agg_dp_slot(g->view.seg, agg_dp_node(g->view.seg, 0), n);

    return __atomic_load_n(&slot->done, __ATOMIC_ACQUIRE) == n ||
           __atomic_load_n(&slot->moved, __ATOMIC_ACQUIRE) == n;
}

/*
 * Fragment n came to this part again, from a member (through member_port,
 * its MEMBER port) or from a child part (member_port -1): something was
 * lost on the way. When the part has its result, the result goes again
 * (to that member; to every child part); when it sent its partial up and
 * waits, the partial goes up again. 1 when something went (counted as
 * `resent`); 0 when the slot is busy or n is not there (caller holds
 * sim->lock). The slot holds n still: it is used again only after every
 * member below posted a fragment a window later, which the one asking has
 * not.
 */
int switchsim__part_again(switchsim_net_t *net, switchsim_group_t *g, uint64_t n,
                          int member_port);

/* A NET up port: this part's partial to its parent part in another switchsim. */
agg_status_t switchsim__net_up(void *ctx, uint32_t port, const agg_dp_contrib_t *c);

/* A NET down port: the result to a child part in another switchsim. */
agg_status_t switchsim__net_down_part(switchsim_group_t *g, uint32_t port,
                                      const agg_dp_slot_t *slot);

/* A message another switchsim sent (UP or DOWN); 1 done, 0 slot busy, -1 drop it. */
int switchsim__net_peer(switchsim_net_t *net, switchsim_conn_t *c, const agg_net_msg_t *m,
                        const uint8_t *data);

/* On the loop's thread: the loop watches the link's socket of now. */
void switchsim__link_watch(agg_loop_t *loop, void *arg);

/* The loop's callback of a link's socket: what waits goes out; a stuck link breaks. */
void switchsim__on_link(agg_loop_t *loop, int fd, short revents, void *arg);

#endif
