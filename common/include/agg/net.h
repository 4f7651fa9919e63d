/*
 * The data path between hosts: fragments and results over TCP, between a
 * rank and a switchsim on another host, and (later) between switchsim
 * processes.
 *
 * A connection opens with HELLO (after the shared-secret challenge of
 * agg/auth.h when the listener is not on loopback): the rank names the
 * group's part it joins (group, tree, part) and its channel there, and the
 * switchsim answers HELLO with a status. Then the rank sends PUSH messages,
 * one per fragment, and the switchsim answers each fragment's result with a
 * RESULT, in the order results complete (not necessarily the order sent).
 * A switchsim hosting part of a group's tree opens a connection to each
 * switchsim it sends to (HELLO with channel AGG_NET_PEER) and sends UP (a
 * part's partial result, to its parent part) and DOWN (the result, to a
 * child part); those carry accumulator elements (16-bit floats widened).
 *
 * Every message is one 72-byte agg_net_msg_t followed by `bytes` of data:
 * a PUSH carries the rank's elements in their wire type, a RESULT the
 * result narrowed to the wire type (count elements). Header fields and
 * elements are little-endian, the byte order of every host this runs on; a
 * peer whose magic reads byte-swapped is refused at HELLO. `csum` is the
 * CRC32C (ISA-L's crc32_iscsi) of the header, csum read as 0, and then of
 * the data: a message that does not match it is taken for lost (the
 * member sends its fragment again), since its length may be all that is
 * right in it; a HELLO that does not match is refused.
 *
 * tests/unit/test_wire.c pins the layout.
 */
#ifndef AGG_NET_H
#define AGG_NET_H

#include <stddef.h>
#include <stdint.h>

#include "agg/frag.h"
#include "agg/status.h"
#include "agg/wire.h"

#define AGG_NET_MAGIC 0x334e4741u /* "AGN3": the layout below (AGN2 before the checksum) */

typedef enum agg_net_type {
    AGG_NET_HELLO  = 1, /* rank -> switchsim: join; switchsim -> rank: status */
    AGG_NET_PUSH   = 2, /* a member's contribution to fragment n */
    AGG_NET_RESULT = 3, /* fragment n's result, to a member */
    /* between switchsims (HELLO with channel AGG_NET_PEER): */
    AGG_NET_UP     = 4, /* a part's partial, to node `channel` of part `part` */
    AGG_NET_DOWN   = 5, /* fragment n's result, to part `part` */
} agg_net_type_t;

#define AGG_NET_PEER 0xffffffffu /* HELLO.channel of a switchsim */
/*
 * A member may join with up to AGG_NET_MAX_LANES connections ("lanes"), one
 * HELLO each: HELLO.root is the lane, HELLO.len the member's lanes (0 reads
 * as 1). The member sends each fragment on the lane it likes, and its
 * result comes down on the lane it went up on: several TCP flows carry one
 * member's stream, which one flow's ordering and window would hold back.
 * A member with lanes keeps fewer than AGG_NET_LANE_RING fragments
 * unanswered (switchsim remembers each one's lane by n % AGG_NET_LANE_RING).
 */
#define AGG_NET_MAX_LANES 8u
#define AGG_NET_LANE_RING 128u

/* agg_net_msg_t.flags */
#define AGG_NET_F_EMPTY 0x01u /* PUSH: the member adds no data (a bcast's non-root) */

typedef struct agg_net_msg {
    uint32_t magic;
    uint8_t  type;     /* agg_net_type_t */
    uint8_t  tree;     /* agg_tree_type_t */
    uint8_t  flags;    /* AGG_NET_F_* */
    uint8_t  reserved;
    uint32_t group_id;
    uint32_t part;     /* which part of the group's tree (one per switchsim segment) */
    uint32_t channel;  /* the member's channel in that part */
    int32_t  status;   /* PUSH: not AGG_OK when the member gave up; RESULT: the tree's */
    uint64_t n;        /* fragment number; a member's HELLO: its job's key */
    agg_frag_desc_t desc; /* HELLO: desc.count the OSTs, desc.total the payload, desc.root
                             the lane (above) */
    uint32_t extra;    /* UP: the sending part's index among the node's child parts */
    uint32_t off;      /* ALLGATHER PUSH: the data are elements off .. off + len */
    uint32_t len;
    uint32_t bytes;    /* data bytes that follow */
    uint32_t csum;     /* CRC32C of the header (this field as 0) and the data */
    uint32_t pad;      /* 0 */
} agg_net_msg_t;

/* Where a member reaches a group's part over TCP: "host:port/g<group>/t<tree>/p<part>". */
typedef struct agg_net_ep {
    char     host[64];
    int      port;
    uint32_t group_id;
    uint32_t tree;
    uint32_t part;
} agg_net_ep_t;

/* The endpoint of a group's part at switchsim's data port addr; AGG_ERR_PARSE: too long. */
agg_status_t agg_net_ep_format(agg_wire_endpoint_t *ep, const char *addr, uint32_t group_id,
                               uint32_t tree, uint32_t part);

/* Parses one (len bytes, NUL within); AGG_ERR_PARSE with why saying what is wrong. */
agg_status_t agg_net_ep_parse(const void *buf, size_t len, agg_net_ep_t *ep, char *why,
                              size_t whylen);

/*
 * Sends a message and its data (one sendmsg when the socket takes it all),
 * sealed (its csum set), waiting at most timeout_ms for room; the socket
 * may be non-blocking.
 * While it waits, `readable` (when not NULL) is called whenever the socket
 * has something to read, and every 10 ms besides (it may read other sockets
 * of the same peer), so a peer that answers on the same connection is never
 * left waiting for room itself; a negative return ends the send with
 * AGG_ERR_IO.
 */
agg_status_t agg_net_send(int fd, const agg_net_msg_t *m, const void *data, int timeout_ms,
                          int (*readable)(void *arg), void *arg);

/* The checksum a message with these data should carry (m->bytes of them). */
uint32_t agg_net_csum(const agg_net_msg_t *m, const void *data);

static inline void agg_net_seal(agg_net_msg_t *m, const void *data)
{
    m->csum = agg_net_csum(m, data);
}

static inline int agg_net_intact(const agg_net_msg_t *m, const void *data)
{
    return m->csum == agg_net_csum(m, data);
}

/* Larger socket buffers and no Nagle delay: a window of fragments fits in flight. */
void agg_net_tune(int fd);

#endif
