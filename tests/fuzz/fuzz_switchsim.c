/*
 * libFuzzer harness for switchsim's groups and the data-path engine they run
 * (agg/dp.h).
 *
 * The input describes a GROUP_CONFIG as aggmgr would send it (host order,
 * after the length checks of switchsim_ctl.c), then a schedule of member
 * contributions: fragment n of every member carries that round's header
 * (op, dtype, kind, count, flags as a rank would write them, unchecked), or a
 * deviating one, and goes in either staged in the member's channel for
 * agg_dp_scan (AGG_RANK_PROGRESS=0) or pushed by the member itself with
 * agg_dp_push. Members keep the protocol's window: fragment n only after the
 * result of n - window. The group runs on real shared memory, with
 * switchsim's host segment (SAT locks) behind it; the harness is its only
 * driver, so the schedule is the input's.
 *
 * ASan sees nothing of shared memory by itself: every byte of the segment
 * that is neither a field nor a payload byte (header tails, staging and slot
 * tails past the payload, the rest of the last page) is poisoned, so an
 * access outside them is reported like a heap overflow.
 *
 * Checked besides the sanitizers: agg_dp_check accepts the segment and it
 * says what the config said; no result appears before every member's
 * contribution was taken; a published DATA result with status OK has a count
 * that fits the payload; a fragment every member contributed with the same
 * valid header completes, with status OK (bad header: BAD_FRAGMENT; members
 * disagreeing, or one that failed: not OK) and, for integer types, exactly
 * the reduction of what the members sent, also where zero-copy members get it
 * written into their memory; after the group is destroyed no resource stays
 * reserved and no SAT lock stays taken.
 *
 * Input layout (short input ends early):
 *   group_id u8, tree u8 (bit 0: SAT, bit 1: reproducible, bits 4-7 nonzero:
 *   that value as tree), num_nodes u8 (% 17), num_members u8 (% 97),
 *   window u8 (% 17), payload u16 LE (bit 15: raw, else 8 x (1 + v % 128)),
 *   stage mask u8 (member m stages when bit m % 8 is set), rounds u8 (1 + % 48)
 *   per node:   guid selector u8 (% 9: 0x10..0x90, 0x90 not hosted),
 *               parent u8 (bit 7: raw int8, else -1 for node 0 and v % i
 *               for node i)
 *   per member: leaf u8 (bit 7: raw, else % num_nodes)
 *   per round:  op u8, dtype u8, kind u8 (< 0xc0: DATA, else & 3),
 *               flags u8 (bit 0: every member fails it; bits 1-7: member m
 *               uses zero copy when bit 1 + m % 7 is set; bits 2-7 are also
 *               written as they are into the fragment's flags: bit 2 is
 *               AGG_DP_FRAG_EMPTY (the member adds no data, as a bcast's
 *               non-root), the others no flag uses), count u16 LE (x 65537
 *               when kind bit 5 is set)
 *   then steps of 2 bytes: member u8 (% num_members), action u8 (FUZZ_ACT_*
 *   in bits 0-2, a deviation in bits 3-5)
 * The bytes after the rounds also fill the payloads.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sanitizer/asan_interface.h>

#include "fuzz.h"
#include "agg/log.h"
#include "agg/reduce.h"
#include "agg/shm.h"
#include "switchsim.h"
#include "../unit/switchsim_test.h"

#define FUZZ_NUM_SWITCHES 8
#define FUZZ_MAX_BYTES    (8u << 20) /* segment and member buffers, per run */
#define FUZZ_MAX_ROUNDS   48
#define FUZZ_DRAIN_PASSES 10000

enum {
    FUZZ_ACT_NEXT    = 0, /* 0-2: the member contributes its next fragment */
    FUZZ_ACT_DEVIATE = 3, /* its next fragment, with a header of its own */
    FUZZ_ACT_SKIP    = 4, /* it never contributes its next fragment */
    FUZZ_ACT_DUP     = 5, /* it contributes its last one again */
    FUZZ_ACT_SCAN    = 6, /* switchsim scans its channel */
    FUZZ_ACT_PROG    = 7, /* a progress pass, and switchsim reaps SAT locks */
};

typedef struct fuzz_hdr {
    uint32_t count;
    uint8_t  op, dtype, kind;
    uint8_t  flags; /* AGG_DP_FRAG_*, and bits no flag uses */
    uint8_t  cma;   /* round headers: which members use zero copy (bit 1 + m % 7) */
} fuzz_hdr_t;

/* fuzz_run_t.sent */
#define FUZZ_SENT  1 /* staged, or pushed and refused for now (retried) */
#define FUZZ_TAKEN 2 /* pushed and taken (staged ones: the channel says) */

typedef struct fuzz_run {
    switchsim_group_t *g;
    agg_dp_seg_t      *s;
    uint32_t           members, window, payload, rounds;
    uint8_t            stage_mask;
    uint64_t          *next;      /* per member: its next fragment */
    uint64_t          *pending;   /* per member: a push to retry, 0 if none */
    uint64_t          *last;      /* per member: its last contribution, 0 if none */
    fuzz_hdr_t        *common;    /* per round */
    fuzz_hdr_t        *hdr;       /* per round and member: what it sent */
    uint8_t           *sent;      /* per round and member: FUZZ_SENT, FUZZ_TAKEN */
    uint8_t           *published; /* per round */
    uint8_t           *data;      /* per member and window slot: what it sends */
    uint8_t           *dst;       /* per member and window slot: zero-copy results */
    uint8_t           *expect;    /* payload bytes: what a result must be */
    uint8_t           *out;       /* payload bytes: what it is */
    const uint8_t     *fill;
    size_t             fill_len;
    agg_dp_counters_t  ctr;
    agg_dp_driver_t    drv;
    uint8_t            scratch[4096];
} fuzz_run_t;

static switchsim_t fuzz_sim;
static agg_wire_switch_t fuzz_switches[FUZZ_NUM_SWITCHES];

static void fuzz_cleanup(void)
{
    switchsim_test_fini(&fuzz_sim);
}

/* One switchsim hosting 0x10..0x80, set up as main.c does, without aggmgr or workers. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *lvl = getenv("AGG_FUZZ_LOG_LEVEL");

    agg_log_set_level(lvl != NULL ? atoi(lvl) : AGG_LOG_TRACE);
    switchsim_test_init(&fuzz_sim, 1, 1);
    switchsim_test_switches(fuzz_switches, FUZZ_NUM_SWITCHES);
    if (switchsim_an_init(&fuzz_sim, fuzz_switches, FUZZ_NUM_SWITCHES) != AGG_OK) {
        abort();
    }
    atexit(fuzz_cleanup);
    return 0;
}

typedef struct fuzz_in {
    const uint8_t *p, *end;
} fuzz_in_t;

static int fuzz_take(fuzz_in_t *in, void *out, size_t n)
{
    if ((size_t)(in->end - in->p) < n) {
        return 0;
    }
    memcpy(out, in->p, n);
    in->p += n;
    return 1;
}

/* ---- poisoning what nobody may touch ------------------------------------ */

static void fuzz_poison_range(uint8_t *p, size_t len, int on)
{
    if (on) {
        ASAN_POISON_MEMORY_REGION(p, len);
    } else {
        ASAN_UNPOISON_MEMORY_REGION(p, len);
    }
}

static void fuzz_poison(const fuzz_run_t *r, int on)
{
    agg_dp_seg_t *s = r->s;
    long page = sysconf(_SC_PAGESIZE);
    size_t end = (s->total_size + (size_t)page - 1) / (size_t)page * (size_t)page;
    uint32_t m, k, i;

    for (m = 0; m < s->num_members; m++) {
        uint8_t *ch = (uint8_t *)agg_dp_chan(s, m);

        fuzz_poison_range(ch + 16, 48, on); /* after consumed and scan_lock */
        for (k = 0; k < s->window; k++) {
            uint8_t *f = ch + sizeof(agg_dp_chan_t) + (size_t)k * s->stage_stride;

            fuzz_poison_range(f + sizeof(agg_dp_frag_t), AGG_DP_FRAG_SIZE - sizeof(agg_dp_frag_t),
                              on);
            fuzz_poison_range(f + AGG_DP_FRAG_SIZE + s->payload,
                              s->stage_stride - AGG_DP_FRAG_SIZE - s->payload, on);
        }
    }
    for (i = 0; i < s->num_nodes; i++) {
        const agg_dp_node_t *node = agg_dp_node(s, i);
        size_t used = AGG_DP_SLOT_HDR + (size_t)AGG_DP_ACC_FACTOR * s->payload;

        for (k = 0; k < s->num_slots; k++) {
            uint8_t *slot = (uint8_t *)s + node->slots_off + (size_t)k * s->slot_stride;

            fuzz_poison_range(slot + used, s->slot_stride - used, on);
        }
    }
    fuzz_poison_range((uint8_t *)s + s->total_size, end - s->total_size, on);
}

/* ---- what the harness knows of each round ------------------------------- */

static size_t fuzz_ix(const fuzz_run_t *r, uint64_t n, uint32_t m)
{
    return (size_t)(n - 1) * r->members + m;
}

static uint8_t *fuzz_data(const fuzz_run_t *r, uint32_t m, uint64_t n)
{
    return r->data + ((size_t)m * r->window + agg_seq_slot(n, r->window)) * r->payload;
}

static uint8_t *fuzz_dst(const fuzz_run_t *r, uint32_t m, uint64_t n)
{
    return r->dst + ((size_t)m * r->window + agg_seq_slot(n, r->window)) * r->payload;
}

static int fuzz_staged(const fuzz_run_t *r, uint32_t m)
{
    return (r->stage_mask >> (m % 8)) & 1;
}

/* Has the engine taken member m's fragment n? */
static int fuzz_taken(const fuzz_run_t *r, uint64_t n, uint32_t m)
{
    uint8_t sent = r->sent[fuzz_ix(r, n, m)];

    if (fuzz_staged(r, m)) {
        return sent != 0 && __atomic_load_n(&agg_dp_chan(r->s, m)->consumed,
                                            __ATOMIC_ACQUIRE) >= n;
    }
    return sent == FUZZ_TAKEN;
}

/* What the engine should take as a contribution at all (agg_dp_push's rules). */
static int fuzz_valid(const fuzz_run_t *r, const fuzz_hdr_t *h)
{
    if (h->kind >= AGG_DP_KIND__COUNT ||
        (h->kind != AGG_DP_KIND_DATA && r->s->tree != AGG_TREE_SAT)) {
        return 0; /* only a SAT group has a lock to ask for */
    }
    if (h->kind != AGG_DP_KIND_DATA || h->count == 0) {
        return 1;
    }
    return agg_reduce_fn(h->dtype, h->op) != NULL &&
           (uint64_t)h->count * agg_dtype_size(h->dtype) <= r->payload;
}

static int fuzz_same(const fuzz_hdr_t *a, const fuzz_hdr_t *b)
{
    return a->count == b->count && a->op == b->op && a->dtype == b->dtype &&
           a->kind == b->kind;
}

/* A result just seen: what it must be, given what the members sent. */
static void fuzz_check_result(fuzz_run_t *r, uint64_t n, const agg_dp_slot_t *res)
{
    const fuzz_hdr_t *h0 = &r->hdr[fuzz_ix(r, n, 0)];
    size_t bytes = (size_t)h0->count * agg_dtype_size(h0->dtype);
    int same = 1, failed = 0, cma = 0;
    uint32_t m;

    for (m = 0; m < r->members; m++) {
        const fuzz_hdr_t *h = &r->hdr[fuzz_ix(r, n, m)];

        /* every child of every node had to push: no result before */
        FUZZ_CHECK(fuzz_taken(r, n, m));
        same   &= fuzz_same(h, h0);
        failed |= (h->flags & AGG_DP_FRAG_FAILED) != 0;
        cma    |= (h->flags & AGG_DP_FRAG_CMA) != 0;
    }
    if (res->status == AGG_OK && res->desc.kind == AGG_DP_KIND_DATA) {
        FUZZ_CHECK((uint64_t)res->desc.count * agg_dtype_size(res->desc.dtype) <= r->payload);
    }
    if (failed || !same) {
        FUZZ_CHECK(res->status != AGG_OK);
        return;
    }
    FUZZ_CHECK(res->desc.count == h0->count && res->desc.op == h0->op &&
               res->desc.dtype == h0->dtype && res->desc.kind == h0->kind);
    if (!fuzz_valid(r, h0)) {
        FUZZ_CHECK(res->status == AGG_ERR_BAD_FRAGMENT);
        return;
    }
    if (!cma) {
        FUZZ_CHECK(res->status == AGG_OK); /* zero copy may fail on its own */
    }
    if (res->status != AGG_OK || h0->kind != AGG_DP_KIND_DATA || h0->count == 0 ||
        h0->dtype > AGG_DTYPE_UINT64) {
        return;
    }
    /* integers reduce exactly in any order: the tree must give the reduction
       of the members that added data (none: nothing to compare) */
    int filled = 0;

    for (m = 0; m < r->members; m++) {
        if (r->hdr[fuzz_ix(r, n, m)].flags & AGG_DP_FRAG_EMPTY) {
            continue;
        }
        if (filled++ == 0) {
            memcpy(r->expect, fuzz_data(r, m, n), bytes);
        } else {
            agg_reduce_fn(h0->dtype, h0->op)(r->expect, fuzz_data(r, m, n), h0->count);
        }
    }
    if (filled == 0) {
        return;
    }
    memset(r->out, 0, r->payload);
    agg_dp_copy_out(res, r->out);
    FUZZ_CHECK(memcmp(r->out, r->expect, bytes) == 0);
    for (m = 0; r->s->tree == AGG_TREE_SAT && m < r->members; m++) {
        if (fuzz_staged(r, m) && (r->hdr[fuzz_ix(r, n, m)].flags & AGG_DP_FRAG_CMA)) {
            FUZZ_CHECK(memcmp(fuzz_dst(r, m, n), r->expect, bytes) == 0);
        }
    }
}

/* Looks for results not seen yet (one is only overwritten window fragments later). */
static void fuzz_observe(fuzz_run_t *r)
{
    const agg_dp_slot_t *res;
    uint64_t n;

    for (n = 1; n <= r->rounds; n++) {
        if (!r->published[n - 1] && (res = agg_dp_result(r->s, n)) != NULL) {
            r->published[n - 1] = 1;
            fuzz_check_result(r, n, res);
        }
    }
}

/* ---- members ------------------------------------------------------------ */

static agg_status_t fuzz_push(fuzz_run_t *r, uint32_t m, uint64_t n)
{
    const fuzz_hdr_t *h = &r->hdr[fuzz_ix(r, n, m)];
    const agg_dp_member_t *mem = agg_dp_member(r->s, m);
    agg_dp_contrib_t c = {
        .n      = n,
        .desc   = {.count = h->count, .op = h->op, .dtype = h->dtype, .kind = h->kind},
        .status = (h->flags & AGG_DP_FRAG_FAILED) ? AGG_ERR_TIMEOUT : AGG_OK,
        .empty  = (h->flags & AGG_DP_FRAG_EMPTY) != 0,
        .data   = fuzz_data(r, m, n),
    };
    agg_status_t st;

    if (h->flags & AGG_DP_FRAG_CMA) { /* read from this process, as from a rank's */
        c.data  = NULL;
        c.pid   = (uint32_t)getpid();
        c.raddr = (uint64_t)(uintptr_t)fuzz_data(r, m, n);
    }
    st = agg_dp_push(&r->g->view, mem->leaf, mem->position, &c, &r->drv);
    FUZZ_CHECK(st == AGG_OK || st == AGG_INPROGRESS);
    return st;
}

static void fuzz_stage(fuzz_run_t *r, uint32_t m, uint64_t n)
{
    const fuzz_hdr_t *h = &r->hdr[fuzz_ix(r, n, m)];
    agg_dp_frag_t *f = agg_dp_stage(r->s, m, n);

    f->desc  = (agg_frag_desc_t){.count = h->count, .op = h->op, .dtype = h->dtype,
                                 .kind = h->kind};
    f->flags = h->flags;
    if (h->flags & AGG_DP_FRAG_CMA) {
        f->pid = (uint32_t)getpid();
        f->src = (uint64_t)(uintptr_t)fuzz_data(r, m, n);
        f->dst = (uint64_t)(uintptr_t)fuzz_dst(r, m, n);
    } else {
        memcpy(agg_dp_frag_data(f), fuzz_data(r, m, n), r->payload);
    }
    __atomic_store_n(&f->n, n, __ATOMIC_RELEASE);
}

/* Member m sends its next fragment (deviating from the round's header when dev != 0). */
static void fuzz_contribute(fuzz_run_t *r, uint32_t m, unsigned dev)
{
    uint64_t n = r->next[m];
    fuzz_hdr_t *h;
    size_t i;
    uint8_t *d;

    if (r->pending[m] != 0) { /* a member retries before it goes on */
        if (fuzz_push(r, m, r->pending[m]) == AGG_OK) {
            r->sent[fuzz_ix(r, r->pending[m], m)] = FUZZ_TAKEN;
            r->pending[m] = 0;
        }
        return;
    }
    if (n > r->rounds || (n > r->window && !r->published[n - r->window - 1])) {
        return; /* done, or the window is full */
    }
    h  = &r->hdr[fuzz_ix(r, n, m)];
    *h = r->common[n - 1];
    h->flags |= (h->cma >> (1 + m % 7)) & 1 ? AGG_DP_FRAG_CMA : 0;
    switch (dev) {
    case 0: break;
    case 1: h->op++; break;
    case 2: h->dtype++; break;
    case 3: h->count++; break;
    case 4: h->kind ^= 1; break;
    default: h->flags |= AGG_DP_FRAG_FAILED; break;
    }
    d = fuzz_data(r, m, n);
    for (i = 0; i < r->payload; i++) {
        d[i] = (uint8_t)(r->fill_len ? r->fill[(i + m * 7 + n * 13) % r->fill_len] ^ m : i + m);
    }
    memset(fuzz_dst(r, m, n), 0xa5, r->payload);
    r->next[m] = n + 1;
    r->last[m] = n;
    if (fuzz_staged(r, m)) {
        r->sent[fuzz_ix(r, n, m)] = FUZZ_SENT;
        fuzz_stage(r, m, n);
    } else if (fuzz_push(r, m, n) == AGG_OK) {
        r->sent[fuzz_ix(r, n, m)] = FUZZ_TAKEN;
    } else {
        r->sent[fuzz_ix(r, n, m)] = FUZZ_SENT;
        r->pending[m]             = n;
    }
}

/* Everything that can still move, moves: scans, retried pushes, forwards. */
static void fuzz_drain(fuzz_run_t *r)
{
    unsigned moved = 1, pass;
    uint32_t m;

    for (pass = 0; moved != 0 && pass < FUZZ_DRAIN_PASSES; pass++) {
        moved = 0;
        for (m = 0; m < r->members; m++) {
            if (fuzz_staged(r, m)) {
                moved += agg_dp_scan(&r->g->view, m, &r->drv);
            } else if (r->pending[m] != 0 && fuzz_push(r, m, r->pending[m]) == AGG_OK) {
                r->sent[fuzz_ix(r, r->pending[m], m)] = FUZZ_TAKEN;
                r->pending[m] = 0;
                moved++;
            }
        }
        moved += agg_dp_progress(&r->g->view, &r->drv);
        fuzz_observe(r);
    }
}

/* ---- one run ------------------------------------------------------------ */

/* What switchsim built is what the config said, and agg_dp_check takes it. */
static void fuzz_check_segment(const switchsim_group_t *g, const agg_msg_group_config_t *cfg,
                               const agg_wire_tree_node_t *nodes,
                               const agg_wire_member_t *members)
{
    const agg_dp_seg_t *s = g->view.seg;
    uint32_t i, children;
    char why[256];

    FUZZ_CHECK(agg_dp_check(s, g->view.size, why, sizeof(why)) == AGG_OK);
    FUZZ_CHECK(s->total_size == g->view.size && s->group_id == cfg->group_id &&
               s->tree == cfg->tree && s->num_nodes == cfg->num_nodes &&
               s->num_members == cfg->num_members && s->window == cfg->osts &&
               s->payload == cfg->payload && s->dead == 0);
    for (i = 0; i < cfg->num_members; i++) {
        uint32_t k, before = 0;

        for (k = 0; k < i; k++) {
            before += members[k].leaf == members[i].leaf;
        }
        /* members first at their leaf, in member order */
        FUZZ_CHECK(agg_dp_member(s, i)->leaf == members[i].leaf &&
                   agg_dp_member(s, i)->position == before &&
                   agg_dp_member(s, i)->leaf_guid == nodes[members[i].leaf].guid);
    }
    for (i = 0; i < cfg->num_nodes; i++) {
        const agg_dp_node_t *node = agg_dp_node(s, i);
        uint32_t k;

        FUZZ_CHECK(node->guid == nodes[i].guid && node->parent == nodes[i].parent);
        FUZZ_CHECK(agg_dp_host_an(fuzz_sim.host, node->an)->guid == node->guid);
        for (children = 0, k = 0; k < cfg->num_members; k++) {
            children += members[k].leaf == i;
        }
        for (k = i + 1; k < cfg->num_nodes; k++) {
            children += nodes[k].parent == (int32_t)i;
        }
        FUZZ_CHECK(node->expected == children);
    }
}

/* After the group: nothing reserved, no lock held, no group left. */
static void fuzz_check_clean(void)
{
    uint32_t k;

    switchsim_ctl_wrlock(&fuzz_sim);
    switchsim_an_reap_locks(&fuzz_sim); /* a lock an LLT group took goes here */
    pthread_rwlock_unlock(&fuzz_sim.lock);
    FUZZ_CHECK(fuzz_sim.groups == NULL && fuzz_sim.num_groups == 0 &&
               fuzz_sim.members_total == 0);
    for (k = 0; k < fuzz_sim.num_ans; k++) {
        const switchsim_an_t *an = &fuzz_sim.ans[k];

        FUZZ_CHECK(an->osts_used == 0 && an->buf_used == 0 && an->groups_used == 0 &&
                   an->sat_flows_used == 0 && an->gnodes == NULL);
        FUZZ_CHECK(an->shared->sat_lock == 0);
    }
}

static void fuzz_free(fuzz_run_t *r)
{
    free(r->next);
    free(r->pending);
    free(r->last);
    free(r->common);
    free(r->hdr);
    free(r->sent);
    free(r->published);
    free(r->data);
    free(r->dst);
    free(r->expect);
    free(r->out);
}

static void fuzz_run(fuzz_run_t *r, fuzz_in_t *in)
{
    uint8_t b[6];
    uint32_t m;
    uint64_t n;

    for (n = 0; n < r->rounds; n++) {
        fuzz_hdr_t *h = &r->common[n];

        if (!fuzz_take(in, b, sizeof(b))) {
            return;
        }
        h->op    = b[0];
        h->dtype = b[1];
        h->kind  = b[2] < 0xc0 ? AGG_DP_KIND_DATA : (uint8_t)(b[2] & 3);
        h->flags = (uint8_t)((b[3] & 0xfc) | ((b[3] & 1) ? AGG_DP_FRAG_FAILED : 0));
        h->cma   = b[3];
        h->count = (uint32_t)b[4] | (uint32_t)b[5] << 8;
        if (b[2] & 0x20) {
            h->count *= 65537u;
        }
    }
    r->fill     = in->p;
    r->fill_len = (size_t)(in->end - in->p);
    fuzz_poison(r, 1);
    while (fuzz_take(in, b, 2)) {
        m = b[0] % r->members;
        switch (b[1] & 7) {
        case FUZZ_ACT_DEVIATE:
            fuzz_contribute(r, m, 1 + ((b[1] >> 3) & 7) % 5);
            break;
        case FUZZ_ACT_SKIP:
            if (r->pending[m] == 0 && r->next[m] <= r->rounds) {
                r->next[m]++;
            }
            break;
        case FUZZ_ACT_DUP:
            if (r->last[m] != 0 && !fuzz_staged(r, m) && r->pending[m] == 0 &&
                r->sent[fuzz_ix(r, r->last[m], m)] == FUZZ_TAKEN) {
                (void)fuzz_push(r, m, r->last[m]); /* ignored, or refused for now */
            }
            break;
        case FUZZ_ACT_SCAN:
            agg_dp_scan(&r->g->view, m, &r->drv);
            break;
        case FUZZ_ACT_PROG:
            agg_dp_progress(&r->g->view, &r->drv);
            switchsim_ctl_wrlock(&fuzz_sim);
            switchsim_an_reap_locks(&fuzz_sim);
            pthread_rwlock_unlock(&fuzz_sim.lock);
            break;
        default:
            fuzz_contribute(r, m, 0);
            break;
        }
        fuzz_observe(r);
    }
    fuzz_drain(r);
    /* a fragment every member gave with the same header has completed */
    for (n = 1; n <= r->rounds; n++) {
        int all = 1, same = 1;

        for (m = 0; m < r->members; m++) {
            all  &= fuzz_taken(r, n, m);
            same &= all && fuzz_same(&r->hdr[fuzz_ix(r, n, m)], &r->hdr[fuzz_ix(r, n, 0)]);
        }
        if (all && same) {
            FUZZ_CHECK(r->published[n - 1]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agg_msg_group_config_t cfg;
    agg_wire_tree_node_t *nodes = NULL;
    agg_wire_member_t *members  = NULL;
    switchsim_group_t *g = NULL, *dup = NULL;
    fuzz_in_t in = {data, data + size};
    fuzz_run_t *r = NULL;
    uint8_t hdr[9], b[2];
    uint32_t i, payload_raw;
    uint64_t bytes;
    agg_status_t st;

    if (!fuzz_take(&in, hdr, sizeof(hdr))) {
        return 0;
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.group_id    = hdr[0];
    cfg.job_id      = 1;
    cfg.tree        = (hdr[1] >> 4) ? (uint32_t)(hdr[1] >> 4) : (hdr[1] & 1u);
    cfg.flags       = (hdr[1] & 2) ? AGG_GROUP_F_REPRODUCIBLE : 0;
    cfg.num_nodes   = hdr[2] % 17u;
    cfg.num_members = hdr[3] % 97u;
    cfg.osts        = hdr[4] % 17u;
    payload_raw     = (uint32_t)hdr[5] | (uint32_t)hdr[6] << 8;
    cfg.payload     = (payload_raw & 0x8000) ? payload_raw & 0x7fff : 8u * (1 + hdr[5] % 128u);
    /* what a run may spend: the segment, and the members' buffers */
    bytes = (uint64_t)cfg.num_members * (256 + 3ull * cfg.osts * (128 + cfg.payload)) +
            (uint64_t)cfg.num_nodes * 2 * cfg.osts * (64 + 2ull * cfg.payload);
    if (bytes > FUZZ_MAX_BYTES) {
        return 0;
    }
    nodes   = calloc(cfg.num_nodes + 1u, sizeof(*nodes));
    members = calloc(cfg.num_members + 1u, sizeof(*members));
    r       = calloc(1, sizeof(*r));
    if (nodes == NULL || members == NULL || r == NULL) {
        goto out;
    }
    for (i = 0; i < cfg.num_nodes; i++) {
        if (!fuzz_take(&in, b, 2)) {
            goto out;
        }
        /* eight of nine hosted here; 0x90 is not */
        nodes[i].guid   = 0x10u * (uint64_t)(b[0] % (FUZZ_NUM_SWITCHES + 1) + 1);
        nodes[i].parent = (b[1] & 0x80) ? (int8_t)b[1] : i == 0 ? -1 : (int32_t)(b[1] % i);
    }
    for (i = 0; i < cfg.num_members; i++) {
        if (!fuzz_take(&in, b, 1)) {
            goto out;
        }
        members[i].leaf = (b[0] & 0x80 || cfg.num_nodes == 0) ? b[0] : b[0] % cfg.num_nodes;
    }

    st = switchsim_group_create(&fuzz_sim, &cfg, nodes, members, NULL, &g);
    if (st != AGG_OK) {
        FUZZ_CHECK(g == NULL);
        fuzz_check_clean();
        goto out;
    }
    FUZZ_CHECK(g != NULL && g->view.seg != NULL && g->view.host == fuzz_sim.host);
    fuzz_check_segment(g, &cfg, nodes, members);
    FUZZ_CHECK(switchsim_group_create(&fuzz_sim, &cfg, nodes, members, NULL, &dup) ==
               AGG_ERR_GROUP_ID && dup == NULL);

    r->g          = g;
    r->s          = g->view.seg;
    r->members    = cfg.num_members;
    r->window     = cfg.osts;
    r->payload    = cfg.payload;
    r->rounds     = 1 + hdr[8] % FUZZ_MAX_ROUNDS;
    r->stage_mask = hdr[7];
    r->drv        = (agg_dp_driver_t){.ctr = &r->ctr, .scratch = r->scratch,
                                      .scratch_size = sizeof(r->scratch)};
    r->next      = calloc(r->members, sizeof(*r->next));
    r->pending   = calloc(r->members, sizeof(*r->pending));
    r->last      = calloc(r->members, sizeof(*r->last));
    r->common    = calloc(r->rounds, sizeof(*r->common));
    r->hdr       = calloc((size_t)r->rounds * r->members, sizeof(*r->hdr));
    r->sent      = calloc((size_t)r->rounds * r->members, 1);
    r->published = calloc(r->rounds, 1);
    r->data      = calloc((size_t)r->members * r->window, r->payload);
    r->dst       = calloc((size_t)r->members * r->window, r->payload);
    r->expect    = calloc(1, r->payload);
    r->out       = calloc(1, r->payload);
    if (r->next != NULL && r->pending != NULL && r->last != NULL && r->common != NULL &&
        r->hdr != NULL && r->sent != NULL && r->published != NULL && r->data != NULL &&
        r->dst != NULL && r->expect != NULL && r->out != NULL) {
        for (i = 0; i < r->members; i++) {
            r->next[i] = 1;
        }
        fuzz_run(r, &in);
        fuzz_poison(r, 0);
    }
    FUZZ_CHECK(switchsim_group_destroy(&fuzz_sim, cfg.group_id, (uint8_t)cfg.tree, cfg.part) ==
               AGG_OK);
    fuzz_check_clean();

out:
    if (r != NULL) {
        fuzz_free(r);
    }
    free(r);
    free(nodes);
    free(members);
    return 0;
}
