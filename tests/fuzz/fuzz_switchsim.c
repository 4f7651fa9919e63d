/*
 * libFuzzer harness for switchsim's group configuration and data path.
 *
 * The input describes a GROUP_CONFIG as aggmgr would send it (host order,
 * after the length checks of switchsim_ctl.c) followed by fragments that
 * members post into their channels the way libagg does, with fuzzed headers
 * (op, dtype, count, seq) and posted counters. switchsim reads those from
 * shared memory, where ASan sees nothing by itself: the harness poisons
 * every byte of the segment that is not a field or a payload byte, so a read
 * or write outside them is reported like a heap overflow. Each run destroys
 * its group.
 *
 * Input layout (all little-endian, short input ends early):
 *   group_id u8, flags u8, num_nodes u8, num_members u8, osts u16,
 *   payload_per_ost u24,
 *   per node:   guid selector u8, parent u8 (bit 7: raw int8, else i % parent)
 *   per member: leaf u8 (bit 7: raw, else % num_nodes)
 *   then 8-byte fragment records:
 *   member u8, op u8, dtype u8, how u8, count u32
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sanitizer/asan_interface.h>

#include "fuzz.h"
#include "agg/log.h"
#include "agg/shm.h"
#include "switchsim.h"

#define FUZZ_NUM_SWITCHES 8
#define FUZZ_MAX_BYTES    (8u << 20) /* accumulators or segment, per group */

/* how: what the member does with one fragment record */
#define FUZZ_HOW_PROGRESS 0x01u /* run a data-path pass after posting */
#define FUZZ_HOW_BAD_SEQ  0x02u /* write a wrong seq in the header */
#define FUZZ_HOW_NO_SEQ   0x04u /* leave the header's seq as it was */
#define FUZZ_HOW_BUMP     0x08u /* advance posted by (how >> 4), not 1; 15: by count */


static switchsim_t fuzz_sim;
static agg_wire_switch_t fuzz_switches[FUZZ_NUM_SWITCHES];

static void fuzz_cleanup(void)
{
    switchsim_group_destroy_all(&fuzz_sim);
    agg_shm_detach(fuzz_sim.bell, sizeof(agg_shm_bell_t));
    agg_shm_unlink(fuzz_sim.bell_name);
    pthread_mutex_destroy(&fuzz_sim.lock);
}

/* One switchsim hosting switches 0x10..0x80, as tests/unit/test_switchsim.c sets it up. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *lvl = getenv("AGG_FUZZ_LOG_LEVEL");
    int i;

    agg_log_set_level(lvl != NULL ? atoi(lvl) : AGG_LOG_TRACE);
    memset(&fuzz_sim, 0, sizeof(fuzz_sim));
    agg_conf_init(&fuzz_sim.conf);
    pthread_mutex_init(&fuzz_sim.lock, NULL);
    snprintf(fuzz_sim.bell_name, sizeof(fuzz_sim.bell_name), "/agg-fuzz-%d-bell",
             (int)getpid());
    agg_shm_unlink(fuzz_sim.bell_name);
    if (agg_shm_create(fuzz_sim.bell_name, sizeof(agg_shm_bell_t),
                       (void **)&fuzz_sim.bell) != AGG_OK) {
        abort();
    }
    for (i = 0; i < FUZZ_NUM_SWITCHES; i++) {
        fuzz_switches[i].guid = 0x10u * (uint64_t)(i + 1);
    }
    fuzz_sim.switches     = fuzz_switches;
    fuzz_sim.num_switches = FUZZ_NUM_SWITCHES;
    fuzz_sim.spin_count   = 1;
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

static uint8_t *fuzz_channel(const switchsim_group_t *g, uint32_t m)
{
    return (uint8_t *)g->shm + g->shm->channels_offset + (size_t)m * g->shm->channel_stride;
}

static agg_frag_hdr_t *fuzz_send_slot(const switchsim_group_t *g, uint32_t m, uint32_t k)
{
    return (agg_frag_hdr_t *)(fuzz_channel(g, m) + sizeof(agg_shm_channel_t) +
                              (size_t)k * g->shm->slot_stride);
}

static agg_frag_hdr_t *fuzz_result_slot(const switchsim_group_t *g, uint32_t k)
{
    return (agg_frag_hdr_t *)((uint8_t *)g->shm + g->shm->results_offset +
                              (size_t)k * g->shm->slot_stride);
}

/* Header padding and the bytes between payload_per_ost and slot_stride. */
static void fuzz_poison_slot(const switchsim_group_t *g, agg_frag_hdr_t *h, int on)
{
    uint8_t *s = (uint8_t *)h;
    size_t pay = AGG_FRAG_HDR_SIZE + g->payload_per_ost;

    if (on) {
        ASAN_POISON_MEMORY_REGION(s + sizeof(*h), AGG_FRAG_HDR_SIZE - sizeof(*h));
        ASAN_POISON_MEMORY_REGION(s + pay, g->shm->slot_stride - pay);
    } else {
        ASAN_UNPOISON_MEMORY_REGION(s, g->shm->slot_stride);
    }
}

/* Everything of the segment that is not a field or a payload byte, and the
 * rest of its last page. */
static void fuzz_poison(const switchsim_group_t *g, int on)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t end = (g->shm_size + (size_t)page - 1) / (size_t)page * (size_t)page;
    uint32_t m, k;

    for (m = 0; m < g->num_members; m++) {
        for (k = 0; k < g->osts; k++) {
            fuzz_poison_slot(g, fuzz_send_slot(g, m, k), on);
        }
    }
    for (k = 0; k < g->osts; k++) {
        fuzz_poison_slot(g, fuzz_result_slot(g, k), on);
    }
    if (on) {
        ASAN_POISON_MEMORY_REGION((uint8_t *)g->shm + g->shm_size, end - g->shm_size);
    } else {
        ASAN_UNPOISON_MEMORY_REGION((uint8_t *)g->shm + g->shm_size, end - g->shm_size);
    }
}

/* What every published result must look like. */
static void fuzz_check_results(const switchsim_group_t *g)
{
    const agg_frag_hdr_t *r;
    uint32_t k;

    for (k = 0; k < g->osts; k++) {
        r = fuzz_result_slot(g, k);
        if (r->seq == 0) {
            continue;
        }
        FUZZ_CHECK((r->seq - 1) % g->osts == k);
        if (r->status == AGG_OK) {
            FUZZ_CHECK(agg_reduce_fn(r->dtype, r->op) != NULL);
            FUZZ_CHECK((size_t)r->count * agg_dtype_size(r->dtype) <= g->payload_per_ost);
        }
    }
}

/* Member m posts its next fragment, or something else when `how` says so. */
static void fuzz_post(switchsim_group_t *g, uint32_t *next_seq, uint32_t m, uint8_t op,
                      uint8_t dtype, uint8_t how, uint32_t count, const uint8_t *fill,
                      size_t fill_len)
{
    agg_shm_channel_t *ch = (agg_shm_channel_t *)fuzz_channel(g, m);
    uint32_t seq          = next_seq[m];
    agg_frag_hdr_t *h     = fuzz_send_slot(g, m, (seq - 1) % g->osts);
    uint8_t *payload      = (uint8_t *)h + AGG_FRAG_HDR_SIZE;
    size_t bytes          = (size_t)count * agg_dtype_size(dtype), i;
    uint32_t bump         = 1;

    if (how & FUZZ_HOW_BUMP) {
        bump = (how >> 4) == 15 ? count : (uint32_t)(how >> 4);
    }
    if (bytes > g->payload_per_ost) {
        bytes = g->payload_per_ost; /* the member lies about count, not about memory */
    }
    for (i = 0; i < bytes; i++) {
        payload[i] = fill_len ? fill[i % fill_len] : (uint8_t)i;
    }
    h->op    = op;
    h->dtype = dtype;
    h->count = count;
    if (!(how & FUZZ_HOW_NO_SEQ)) {
        __atomic_store_n(&h->seq, (how & FUZZ_HOW_BAD_SEQ) ? seq + 1 : seq,
                         __ATOMIC_RELEASE);
    }
    /* seq runs 1..2^32-1, then 1 again, as in libagg */
    next_seq[m] = (uint32_t)(((uint64_t)next_seq[m] - 1 + bump) % 0xffffffffu) + 1;
    __atomic_store_n(&ch->posted, ch->posted + bump, __ATOMIC_RELEASE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agg_msg_group_config_t cfg;
    agg_wire_tree_node_t *nodes = NULL;
    agg_wire_member_t *members  = NULL;
    switchsim_group_t *g        = NULL, *dup = NULL;
    fuzz_in_t in                = {data, data + size};
    uint8_t hdr[9], b[2], rec[8];
    uint32_t *next_seq = NULL, i, count;
    size_t seg;
    agg_status_t st;

    if (!fuzz_take(&in, hdr, sizeof(hdr))) {
        return 0;
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.group_id        = hdr[0];
    cfg.job_id          = 1;
    cfg.num_nodes       = hdr[2];
    cfg.num_members     = hdr[3];
    cfg.osts            = (uint32_t)hdr[4] | (uint32_t)hdr[5] << 8;
    cfg.payload_per_ost = (uint32_t)hdr[6] | (uint32_t)hdr[7] << 8 | (uint32_t)hdr[8] << 16;
    /* The checks come before any allocation; sizes they allow but this
     * machine should not spend on one run are skipped after them. */
    seg = (size_t)cfg.osts * (cfg.payload_per_ost + 2 * AGG_FRAG_HDR_SIZE);
    if ((cfg.osts != 0 && cfg.osts <= 4096 && cfg.payload_per_ost <= 65536) &&
        ((size_t)cfg.num_nodes * seg > FUZZ_MAX_BYTES ||
         ((size_t)cfg.num_members + 1) * seg > FUZZ_MAX_BYTES)) {
        return 0;
    }
    nodes    = calloc(cfg.num_nodes + 1u, sizeof(*nodes));
    members  = calloc(cfg.num_members + 1u, sizeof(*members));
    next_seq = calloc(cfg.num_members + 1u, sizeof(*next_seq));
    if (nodes == NULL || members == NULL || next_seq == NULL) {
        goto out;
    }
    for (i = 0; i < cfg.num_nodes; i++) {
        if (!fuzz_take(&in, b, 2)) {
            goto out;
        }
        /* seven of eight hosted here; 0x90 is not */
        nodes[i].guid   = 0x10u * (uint64_t)(b[0] % (FUZZ_NUM_SWITCHES + 1) + 1);
        nodes[i].parent = (b[1] & 0x80) ? (int8_t)b[1] : i == 0 ? -1 : (int32_t)(b[1] % i);
    }
    for (i = 0; i < cfg.num_members; i++) {
        if (!fuzz_take(&in, b, 1)) {
            goto out;
        }
        members[i].leaf = (b[0] & 0x80 || cfg.num_nodes == 0) ? b[0] : b[0] % cfg.num_nodes;
    }

    st = switchsim_group_create(&fuzz_sim, &cfg, nodes, members, &g);
    if (st != AGG_OK) {
        FUZZ_CHECK(g == NULL);
        goto out;
    }
    FUZZ_CHECK(g != NULL && g->shm != NULL);
    FUZZ_CHECK(g->shm->results_offset + (size_t)g->osts * g->shm->slot_stride ==
               g->shm_size);
    if (hdr[1] & 1) {
        FUZZ_CHECK(switchsim_group_create(&fuzz_sim, &cfg, nodes, members, &dup) ==
                   AGG_ERR_GROUP_ID);
    }
    for (i = 0; i < cfg.num_members; i++) {
        next_seq[i] = 1;
    }
    fuzz_poison(g, 1);
    while (fuzz_take(&in, rec, sizeof(rec))) {
        memcpy(&count, rec + 4, sizeof(count));
        fuzz_post(g, next_seq, rec[0] % cfg.num_members, rec[1], rec[2], rec[3], count,
                  in.p, (size_t)(in.end - in.p));
        if (rec[3] & FUZZ_HOW_PROGRESS) {
            switchsim_dp_progress(&fuzz_sim);
            fuzz_check_results(g);
        }
    }
    switchsim_dp_progress(&fuzz_sim);
    fuzz_check_results(g);
    fuzz_poison(g, 0);
    FUZZ_CHECK(switchsim_group_destroy(&fuzz_sim, cfg.group_id) == AGG_OK);
    FUZZ_CHECK(fuzz_sim.groups == NULL && fuzz_sim.num_groups == 0);

out:
    free(nodes);
    free(members);
    free(next_seq);
    return 0;
}
