/*
 * What one fragment of a collective is: the part of its header that every
 * member's contribution carries and on which they must all agree. It is
 * embedded wherever a fragment is described: staged in shared memory
 * (agg_dp_frag_t), combined at a node (agg_dp_slot_t, agg_dp_contrib_t),
 * sent over TCP (agg_net_msg_t), handed to a transport (libagg's
 * agg_tl_frag_t). A node compares it whole (agg_frag_desc_same): a member
 * whose fragment differs fails the fragment for every member.
 */
#ifndef AGG_FRAG_H
#define AGG_FRAG_H

#include <stdint.h>
#include <string.h>

typedef struct agg_frag_desc {
    uint32_t count; /* elements of the fragment */
    uint32_t root;  /* the collective's root (member index), 0 if it has none */
    uint32_t total; /* elements of the whole collective (low 32 bits) */
    uint8_t  op;    /* agg_op_t */
    uint8_t  dtype; /* agg_dtype_t */
    uint8_t  kind;  /* agg_dp_kind_t: data, or the SAT lock taken or given back */
    uint8_t  coll;  /* agg_dp_coll_t */
} agg_frag_desc_t;

_Static_assert(sizeof(agg_frag_desc_t) == 16, "agg_frag_desc_t has no padding");

/* Whether two members' fragments agree (no padding: compared as bytes). */
static inline int agg_frag_desc_same(const agg_frag_desc_t *a, const agg_frag_desc_t *b)
{
    return memcmp(a, b, sizeof(*a)) == 0;
}

#endif
