/*
 * Building and checking data-path segments (agg/dp.h). The creator
 * (switchsim) lays a segment out from the shape of its part of a group's
 * tree; every process that maps it checks it first, since it was written by
 * another process and one bad offset would have it read or write anywhere.
 */
#include "agg/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGG_DP_MAX_MEMBERS 65536
#define AGG_DP_MAX_NODES   4096
#define AGG_DP_MAX_WINDOW  4096
#define AGG_DP_MAX_PAYLOAD (64u << 20)
#define AGG_DP_MAX_PORTS   4096

static uint64_t agg__dp_align(uint64_t v)
{
    return (v + AGG_DP_LINE - 1) / AGG_DP_LINE * AGG_DP_LINE;
}

/* Children of node i: its members, its child nodes, and `extra` ones elsewhere. */
static void agg__dp_expected(const agg_dp_shape_t *sh, uint32_t *expected)
{
    uint32_t i;

    for (i = 0; i < sh->num_nodes; ++i) {
        expected[i] = sh->nodes[i].extra;
    }
    for (i = 0; i < sh->num_members; ++i) {
        expected[sh->member_leaf[i]]++;
    }
    for (i = 1; i < sh->num_nodes; ++i) {
        expected[sh->nodes[i].parent]++;
    }
}

static int agg__dp_shape_ok(const agg_dp_shape_t *sh, char *why, size_t whylen)
{
    uint32_t i;

    if (sh->num_nodes == 0 || sh->num_nodes > AGG_DP_MAX_NODES ||
        sh->num_members > AGG_DP_MAX_MEMBERS || sh->window == 0 ||
        sh->window > AGG_DP_MAX_WINDOW || sh->payload < 8 ||
        sh->payload > AGG_DP_MAX_PAYLOAD || sh->payload % 8 != 0 ||
        sh->num_ports > AGG_DP_MAX_PORTS || sh->tree > AGG_TREE_SAT) {
        agg_errf(why, whylen, "bad shape: %u nodes, %u members, window %u, payload %u, "
                 "%u ports", sh->num_nodes, sh->num_members, sh->window, sh->payload,
                 sh->num_ports);
        return 0;
    }
    for (i = 0; i < sh->num_nodes; ++i) {
        const agg_dp_node_desc_t *d = &sh->nodes[i];

        if ((i == 0) != (d->parent == -1) ||
            (i > 0 && (d->parent < 0 || (uint32_t)d->parent >= i))) {
            agg_errf(why, whylen, "node %u has parent %d; parents must come first", i,
                     d->parent);
            return 0;
        }
        if ((i == 0 && d->up != AGG_DP_UP_ROOT && d->up != AGG_DP_UP_SHM &&
             d->up != AGG_DP_UP_NET) ||
            (i > 0 && d->up != AGG_DP_UP_LOCAL) ||
            ((d->up == AGG_DP_UP_SHM || d->up == AGG_DP_UP_NET) && d->port >= sh->num_ports) ||
            d->down_first + (uint64_t)d->num_down > sh->num_ports) {
            agg_errf(why, whylen, "node %u: bad up port %u / down ports %u+%u", i, d->up,
                     d->down_first, d->num_down);
            return 0;
        }
    }
    for (i = 0; i < sh->num_members; ++i) {
        if (sh->member_leaf[i] >= sh->num_nodes) {
            agg_errf(why, whylen, "member %u has leaf %u of %u nodes", i, sh->member_leaf[i],
                     sh->num_nodes);
            return 0;
        }
    }
    return 1;
}

size_t agg_dp_layout(const agg_dp_shape_t *sh, agg_dp_seg_t *L, char *why, size_t whylen)
{
    uint32_t expected[AGG_DP_MAX_NODES];
    uint64_t off, slot_bytes;
    uint32_t i;

    memset(L, 0, sizeof(*L));
    if (!agg__dp_shape_ok(sh, why, whylen)) {
        return 0;
    }
    agg__dp_expected(sh, expected);
    for (i = 0; i < sh->num_nodes; ++i) {
        if (expected[i] == 0) {
            agg_errf(why, whylen, "node %u (0x%016llx) has no child", i,
                     (unsigned long long)sh->nodes[i].guid);
            return 0;
        }
    }
    L->group_id     = sh->group_id;
    L->tree         = sh->tree;
    L->flags        = sh->flags;
    L->num_members  = sh->num_members;
    L->num_nodes    = sh->num_nodes;
    L->num_ports    = sh->num_ports;
    L->window       = sh->window;
    L->num_slots    = agg_seq_slots(sh->window);
    L->payload      = sh->payload;
    L->slot_stride  = (uint32_t)agg__dp_align(AGG_DP_SLOT_HDR +
                                              (uint64_t)AGG_DP_ACC_FACTOR * sh->payload);
    L->stage_stride = (uint32_t)agg__dp_align(AGG_DP_FRAG_SIZE + (uint64_t)sh->payload);
    L->chan_stride  = (uint32_t)(sizeof(agg_dp_chan_t) +
                                 (uint64_t)sh->window * L->stage_stride);
    if (L->slot_stride < AGG_DP_SLOT_HDR || (uint64_t)sh->window * L->stage_stride >
                                                (uint64_t)UINT32_MAX - sizeof(agg_dp_chan_t)) {
        agg_errf(why, whylen, "window %u x payload %u does not fit a channel", sh->window,
                 sh->payload);
        return 0;
    }
    off            = agg__dp_align(sizeof(agg_dp_seg_t));
    L->members_off = off;
    off            = agg__dp_align(off + (uint64_t)sh->num_members * sizeof(agg_dp_member_t));
    L->chans_off   = off;
    off           += (uint64_t)sh->num_members * L->chan_stride;
    L->nodes_off   = off;
    off            = agg__dp_align(off + (uint64_t)sh->num_nodes * sizeof(agg_dp_node_t));
    L->ports_off   = off;
    off            = agg__dp_align(off + (uint64_t)sh->num_ports * sizeof(agg_dp_port_t));
    L->slots_off   = off;
    slot_bytes     = (uint64_t)L->num_slots * L->slot_stride;
    off           += (uint64_t)sh->num_nodes * slot_bytes;
    L->bitmaps_off = off;
    for (i = 0; i < sh->num_nodes; ++i) {
        if (expected[i] > 64) {
            off += (uint64_t)L->num_slots * ((expected[i] + 63) / 64) * sizeof(uint64_t);
        }
    }
    L->total_size = agg__dp_align(off);
    return (size_t)L->total_size;
}

agg_status_t agg_dp_init(void *mem, size_t size, const agg_dp_shape_t *sh)
{
    uint32_t expected[AGG_DP_MAX_NODES], next_pos[AGG_DP_MAX_NODES];
    agg_dp_seg_t L, *s = mem;
    uint64_t bitmap_off;
    uint32_t i;

    if (agg_dp_layout(sh, &L, NULL, 0) != size || size < sizeof(agg_dp_seg_t)) {
        return AGG_ERR_INVALID_PARAM;
    }
    agg__dp_expected(sh, expected);
    memcpy(s, &L, sizeof(L));
    s->magic   = 0;
    s->version = AGG_DP_VERSION;
    memset(next_pos, 0, sizeof(uint32_t) * sh->num_nodes);
    /* positions: members first, in member order, then child nodes, then extra */
    for (i = 0; i < sh->num_members; ++i) {
        agg_dp_member_t *m = agg_dp_member(s, i);

        m->leaf      = sh->member_leaf[i];
        m->position  = next_pos[m->leaf]++;
        m->leaf_guid = sh->nodes[m->leaf].guid;
    }
    bitmap_off = L.bitmaps_off;
    for (i = 0; i < sh->num_nodes; ++i) {
        agg_dp_node_t *n = agg_dp_node(s, i);
        const agg_dp_node_desc_t *d = &sh->nodes[i];

        n->guid       = d->guid;
        n->parent     = d->parent;
        n->position   = i > 0 ? next_pos[d->parent]++ : 0;
        n->expected   = expected[i];
        n->an         = d->an;
        n->up         = d->up;
        n->port       = d->port;
        n->num_down   = d->num_down;
        n->down_first = d->down_first;
        n->slots_off  = L.slots_off + (uint64_t)i * L.num_slots * L.slot_stride;
        if (expected[i] > 64) {
            n->bitmap_words = (expected[i] + 63) / 64;
            n->bitmap_off   = bitmap_off;
            bitmap_off     += (uint64_t)L.num_slots * n->bitmap_words * sizeof(uint64_t);
        }
    }
    if (sh->num_ports > 0) {
        memcpy(agg_dp_port(s, 0), sh->ports, (size_t)sh->num_ports * sizeof(agg_dp_port_t));
    }
    __atomic_store_n(&s->magic, AGG_DP_MAGIC, __ATOMIC_RELEASE);
    return AGG_OK;
}

static int agg__dp_in(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

agg_status_t agg_dp_check(const void *mem, size_t size, char *why, size_t whylen)
{
    const agg_dp_seg_t *s = mem;
    uint32_t i, *children = NULL;
    agg_status_t st = AGG_ERR_GROUP_JOIN;

    if (size < sizeof(*s) || __atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != AGG_DP_MAGIC ||
        s->version != AGG_DP_VERSION) {
        agg_errf(why, whylen, "not a data-path segment of version %d", AGG_DP_VERSION);
        return st;
    }
    if (s->total_size != size || s->num_nodes == 0 || s->num_nodes > AGG_DP_MAX_NODES ||
        s->num_members > AGG_DP_MAX_MEMBERS || s->window == 0 ||
        s->window > AGG_DP_MAX_WINDOW || s->num_slots != agg_seq_slots(s->window) ||
        s->payload < 8 || s->payload > AGG_DP_MAX_PAYLOAD || s->tree > AGG_TREE_SAT ||
        s->num_ports > AGG_DP_MAX_PORTS ||
        s->slot_stride < AGG_DP_SLOT_HDR + (uint64_t)AGG_DP_ACC_FACTOR * s->payload ||
        s->stage_stride < AGG_DP_FRAG_SIZE + (uint64_t)s->payload ||
        s->chan_stride < sizeof(agg_dp_chan_t) + (uint64_t)s->window * s->stage_stride ||
        !agg__dp_in(s->members_off, (uint64_t)s->num_members * sizeof(agg_dp_member_t), size) ||
        !agg__dp_in(s->chans_off, (uint64_t)s->num_members * s->chan_stride, size) ||
        !agg__dp_in(s->nodes_off, (uint64_t)s->num_nodes * sizeof(agg_dp_node_t), size) ||
        !agg__dp_in(s->ports_off, (uint64_t)s->num_ports * sizeof(agg_dp_port_t), size) ||
        s->members_off % 8 || s->chans_off % 8 || s->nodes_off % 8 || s->ports_off % 8 ||
        s->slot_stride % 8 || s->stage_stride % 8 || s->chan_stride % 8) {
        agg_errf(why, whylen, "segment header of group %u is inconsistent (size %zu)",
                 s->group_id, size);
        return st;
    }
    /* count each node's children again and compare: a node that waits for a
       child nobody will push would hang every member */
    children = calloc(s->num_nodes, sizeof(*children));
    if (children == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < s->num_nodes; ++i) {
        const agg_dp_node_t *n = agg_dp_node(s, i);

        if ((i == 0) != (n->parent == -1) || (i > 0 && (n->parent < 0 ||
                                                        (uint32_t)n->parent >= i)) ||
            n->expected == 0 || n->expected > AGG_DP_MAX_MEMBERS + AGG_DP_MAX_NODES ||
            (i == 0 && n->up != AGG_DP_UP_ROOT && n->up != AGG_DP_UP_SHM &&
             n->up != AGG_DP_UP_NET) ||
            (i > 0 && n->up != AGG_DP_UP_LOCAL) ||
            ((n->up == AGG_DP_UP_SHM || n->up == AGG_DP_UP_NET) && n->port >= s->num_ports) ||
            n->down_first + (uint64_t)n->num_down > s->num_ports ||
            n->slots_off % 8 ||
            !agg__dp_in(n->slots_off, (uint64_t)s->num_slots * s->slot_stride, size) ||
            (n->expected > 64 &&
             (n->bitmap_words != (n->expected + 63) / 64 || n->bitmap_off % 8 ||
              !agg__dp_in(n->bitmap_off, (uint64_t)s->num_slots * n->bitmap_words * 8,
                          size)))) {
            agg_errf(why, whylen, "node %u of group %u is inconsistent", i, s->group_id);
            goto out;
        }
        if (i > 0) {
            if (n->position >= agg_dp_node(s, (uint32_t)n->parent)->expected) {
                agg_errf(why, whylen, "node %u has position %u", i, n->position);
                goto out;
            }
            children[n->parent]++;
        }
    }
    for (i = 0; i < s->num_members; ++i) {
        const agg_dp_member_t *m = agg_dp_member(s, i);

        if (m->leaf >= s->num_nodes || m->position >= agg_dp_node(s, m->leaf)->expected) {
            agg_errf(why, whylen, "member %u has leaf %u position %u", i, m->leaf,
                     m->position);
            goto out;
        }
        children[m->leaf]++;
    }
    for (i = 0; i < s->num_nodes; ++i) {
        if (children[i] > agg_dp_node(s, i)->expected) {
            agg_errf(why, whylen, "node %u has %u children but expects %u", i, children[i],
                     agg_dp_node(s, i)->expected);
            goto out;
        }
    }
    st = AGG_OK;
out:
    free(children);
    return st;
}

agg_status_t agg_dp_host_check(const void *mem, size_t size, char *why, size_t whylen)
{
    const agg_dp_host_t *h = mem;

    if (size < sizeof(*h) || h->magic != AGG_DP_HOST_MAGIC || h->version != AGG_DP_VERSION ||
        h->num_ans > AGG_DP_MAX_NODES * 16u || agg_dp_host_size(h->num_ans) > size) {
        agg_errf(why, whylen, "not a host segment of version %d", AGG_DP_VERSION);
        return AGG_ERR_GROUP_JOIN;
    }
    return AGG_OK;
}

void agg_dp_counters_add(agg_dp_counters_t *sum, const agg_dp_counters_t *c)
{
    const uint64_t *src = (const uint64_t *)c;
    uint64_t *dst = (uint64_t *)sum;
    size_t i;

    for (i = 0; i < sizeof(*c) / sizeof(uint64_t); ++i) {
        dst[i] += __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    }
}

agg_status_t agg_dp_ep_format(agg_wire_endpoint_t *ep, const char *seg, const char *host)
{
    size_t a = strlen(seg) + 1, b = strlen(host) + 1;

    if (a + b > sizeof(ep->addr)) {
        return AGG_ERR_PARSE;
    }
    memcpy(ep->addr, seg, a);
    memcpy(ep->addr + a, host, b);
    ep->transport = AGG_TL_SHM;
    ep->length    = (uint32_t)(a + b);
    return AGG_OK;
}

agg_status_t agg_dp_ep_parse(const agg_wire_endpoint_t *ep, const char **seg,
                             const char **host, char *why, size_t whylen)
{
    const char *a = (const char *)ep->addr, *b;
    size_t len = ep->length;

    if (len < 4 || len > sizeof(ep->addr) || memchr(a, '\0', len) == NULL) {
        snprintf(why, whylen, "an endpoint of %zu bytes is not a shared-memory address", len);
        return AGG_ERR_PARSE;
    }
    b = a + strlen(a) + 1;
    if ((size_t)(b - a) >= len || memchr(b, '\0', len - (size_t)(b - a)) == NULL) {
        snprintf(why, whylen, "the endpoint names no host segment");
        return AGG_ERR_PARSE;
    }
    *seg  = a;
    *host = b;
    return AGG_OK;
}
