/*
 * The shared-memory transport: the member maps the group's data-path
 * segment and its switchsim's host segment (both named by its endpoint) and
 * runs the aggregation-node engine on them (agg/dp.h).
 *
 * With rank_progress on (the default) a fragment is pushed straight from
 * the user's buffer into the member's leaf node, and when it is the last
 * contribution a node waited for, this process completes the node; the
 * result is copied out of the group's top node. With it off the fragment is
 * staged in the member's channel (or, for a SAT chunk with zero copy, only
 * described: switchsim reads it from this process and writes the result
 * back) and switchsim's threads do the rest.
 *
 * switchsim is the aggregation nodes: when its process is gone (killed, it
 * could not mark the segment dead itself) the group is gone, whoever does
 * the work. A member that waits for a result looks at most every
 * AGG__SHM_ALIVE_MS whether switchsim still lives (a pidfd where the kernel
 * has them, else kill(pid, 0)); the first to see it gone marks the segment
 * dead for every member, wakes them and unlinks the segment names. Members
 * must agree on each fragment: with staged fragments, or a root in another
 * segment, only switchsim brings results, so one it did not bring fails on
 * every member; where the members complete every node up to the root
 * themselves, a fragment is only failed through the tree (pushed with a
 * failure status once the segment is dead), never by one member alone.
 */
#include "agg_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/shm.h"
#include "agg/sock.h"
#include "agg/wait.h"

typedef struct agg__tl_shm {
    agg_dp_view_t    view;
    agg_dp_seg_t    *seg;
    agg_dp_host_t   *host;
    size_t           host_size;
    uint32_t         member;
    uint32_t         leaf;
    uint32_t         position;
    uint32_t         pid;      /* ours, for zero-copy chunks */
    int              staged;   /* switchsim pushes for us */
    int              finishes; /* the members complete every node up to the root: results are
                                  published here by them, not brought from elsewhere */
    int              zcopy;    /* staged SAT chunks stay in our memory */
    int              rung;     /* staged fragments since the last doorbell */
    agg_dp_driver_t  drv;
    agg_wait_t       wait;
    int              coll_timeout_ms;
    /* switchsim's liveness */
    pid_t            sim_pid;
    int              sim_fd;       /* its pidfd, or -1 */
    uint64_t         alive_next_ns; /* when to look again */
    unsigned         misses;        /* complete() found no result (agg__tl_shm_dead) */
    char             names[2][64]; /* the segment and host segment, unlinked when it is gone */
} agg__tl_shm_t;

#define AGG__SHM_ALIVE_MS 20

/*
 * Whether the members alone complete the whole tree of this segment: its
 * top node is the group's root, and every child of every node is a member
 * or a node here (no child in another segment, whose part switchsim
 * brings).
 */
static int agg__tl_shm_self_contained(const agg_dp_seg_t *seg)
{
    uint32_t i, *kids = calloc(seg->num_nodes ? seg->num_nodes : 1, sizeof(*kids));
    int whole = kids != NULL && agg_dp_node(seg, 0)->up == AGG_DP_UP_ROOT;

    for (i = 0; whole && i < seg->num_members; ++i) {
        const agg_dp_member_t *m = agg_dp_member(seg, i);

        if (m->leaf < seg->num_nodes) {
            kids[m->leaf]++;
        }
    }
    for (i = 1; whole && i < seg->num_nodes; ++i) {
        int32_t p = agg_dp_node(seg, i)->parent;

        if (p >= 0 && (uint32_t)p < seg->num_nodes) {
            kids[p]++;
        }
    }
    for (i = 0; whole && i < seg->num_nodes; ++i) {
        whole = kids[i] == agg_dp_node(seg, i)->expected;
    }
    free(kids);
    return whole;
}

/* A pidfd for switchsim's process where the kernel has them (no reuse of the pid to fool us). */
static int agg__tl_shm_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
#else
    (void)pid;
    return -1;
#endif
}

static int agg__tl_shm_sim_gone(const agg__tl_shm_t *t)
{
    struct pollfd p = {.fd = t->sim_fd, .events = POLLIN};

    if (t->sim_fd >= 0) {
        return poll(&p, 1, 0) > 0; /* readable once the process has exited */
    }
    return t->sim_pid > 0 && kill(t->sim_pid, 0) != 0 && errno == ESRCH;
}

/*
 * Whether the group is dead: marked so, or its switchsim found gone now
 * (looked at no more often than every AGG__SHM_ALIVE_MS). While the waiter
 * spins, the clock is read every 64th miss only: a read per miss was 11-15 %
 * of a small call's samples (4 ranks, 16-core host); once it yields or
 * sleeps, every miss.
 */
static int agg__tl_shm_dead(agg__tl_shm_t *t)
{
    uint64_t now;

    if (__atomic_load_n(&t->seg->dead, __ATOMIC_ACQUIRE)) {
        return 1;
    }
    if (!agg_wait_will_sleep(&t->wait) && (++t->misses & 63u) != 0) {
        return 0;
    }
    now = agg_time_ns();
    if (now < t->alive_next_ns) {
        return 0;
    }
    t->alive_next_ns = now + AGG__SHM_ALIVE_MS * 1000000ull;
    if (!agg__tl_shm_sim_gone(t)) {
        return 0;
    }
    if (__atomic_exchange_n(&t->seg->dead, 1, __ATOMIC_ACQ_REL) == 0) {
        agg_error("group %u: its switchsim (pid %d) is gone: the calls in flight fail, and "
                  "the group with them", t->seg->group_id, (int)t->sim_pid);
        agg_shm_unlink(t->names[0]);
        agg_shm_unlink(t->names[1]);
    }
    __atomic_fetch_add(&t->seg->result_gen, 1, __ATOMIC_SEQ_CST);
    agg_dp_wake_members(t->seg);
    return 1;
}

/* May switchsim (another process of ours) read and write our memory? */
static int agg__tl_shm_cma_ok(const agg_dp_host_t *host)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = 0;

    if (f != NULL) {
        if (fscanf(f, "%d", &scope) != 1) {
            scope = 0;
        }
        fclose(f);
    }
    if (scope >= 3 || (scope == 2 && geteuid() != 0)) {
        return 0;
    }
    /* scope 1: only a declared tracer may, so declare switchsim one */
    return scope == 0 || geteuid() == 0 ||
           prctl(PR_SET_PTRACER, (unsigned long)host->pid, 0, 0, 0) == 0;
}

static agg_status_t agg__tl_shm_attach(agg_context_t *ctx, const agg__tree_info_t *info,
                                       int rank, void **out)
{
    const char *seg_name, *host_name;
    agg__tl_shm_t *t;
    size_t seg_size;
    char why[256];
    agg_status_t st;

    if (agg_dp_ep_parse(&info->ep, &seg_name, &host_name, why, sizeof(why)) != AGG_OK) {
        agg_error("group endpoint: %s", why);
        return AGG_ERR_GROUP_JOIN;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    st = agg_shm_attach(seg_name, (void **)&t->seg, &seg_size);
    if (st == AGG_OK) {
        st = agg_shm_attach(host_name, (void **)&t->host, &t->host_size);
    }
    if (st != AGG_OK) {
        goto err;
    }
    /* never trust a field of a segment before checking it */
    st = agg_dp_check(t->seg, seg_size, why, sizeof(why));
    if (st == AGG_OK) {
        st = agg_dp_host_check(t->host, t->host_size, why, sizeof(why));
    }
    if (st == AGG_OK && (t->seg->tree != info->tree || info->channel >= t->seg->num_members ||
                         t->seg->window != info->osts || t->seg->payload < info->payload ||
                         agg_dp_member(t->seg, info->channel)->leaf_guid != info->leaf_guid)) {
        snprintf(why, sizeof(why), "it does not match what aggmgr said (tree %u, channel %u, "
                 "window %u, payload %u)", info->tree, info->channel, info->osts,
                 info->payload);
        st = AGG_ERR_GROUP_JOIN;
    }
    for (uint32_t i = 0; st == AGG_OK && i < t->seg->num_nodes; ++i) {
        if (agg_dp_node(t->seg, i)->an >= t->host->num_ans) {
            snprintf(why, sizeof(why), "node %u names switch %u of %u", i,
                     agg_dp_node(t->seg, i)->an, t->host->num_ans);
            st = AGG_ERR_GROUP_JOIN;
        }
    }
    if (st != AGG_OK) {
        agg_error("group segment %s: %s", seg_name, why);
        goto err;
    }
    t->view.seg        = t->seg;
    t->view.size       = seg_size;
    t->view.host       = t->host;
    t->member          = info->channel;
    t->leaf            = agg_dp_member(t->seg, t->member)->leaf;
    t->position        = agg_dp_member(t->seg, t->member)->position;
    t->staged          = !ctx->rank_progress;
    t->finishes        = !t->staged && agg__tl_shm_self_contained(t->seg);
    t->zcopy           = t->staged && ctx->sat_zcopy && info->tree == AGG_TREE_SAT &&
                         agg__tl_shm_cma_ok(t->host);
    t->drv.ctr         = &agg_dp_chan(t->seg, t->member)->drv;
    t->coll_timeout_ms = ctx->alike.coll_timeout_ms;
    t->pid             = (uint32_t)getpid();
    t->sim_pid         = (pid_t)t->host->pid;
    t->sim_fd          = agg__tl_shm_pidfd(t->sim_pid);
    snprintf(t->names[0], sizeof(t->names[0]), "%s", seg_name);
    snprintf(t->names[1], sizeof(t->names[1]), "%s", host_name);
    agg_wait_init(&t->wait, ctx->spin_count);
    if (ctx->progress != NULL) {
        t->wait.slice_ms = 1; /* the caller's progress engine runs between sleeps */
    }
    __atomic_store_n(&agg_dp_member(t->seg, t->member)->pid, t->pid, __ATOMIC_RELAXED);
    agg_debug("rank %d: %s group %u channel %u, leaf switch 0x%016llx, %s", rank,
              info->tree == AGG_TREE_SAT ? "SAT" : "LLT", t->seg->group_id, t->member,
              (unsigned long long)info->leaf_guid,
              !t->staged ? "pushing its own fragments" :
              t->zcopy ? "zero-copy chunks for switchsim" : "staging for switchsim");
    *out = t;
    return AGG_OK;

err:
    if (t->seg != NULL) {
        agg_shm_detach(t->seg, seg_size);
    }
    if (t->host != NULL) {
        agg_shm_detach(t->host, t->host_size);
    }
    free(t);
    return st == AGG_ERR_IO ? AGG_ERR_GROUP_JOIN : st;
}

static void agg__tl_shm_detach(void *tlp)
{
    agg__tl_shm_t *t = tlp;

    if (t != NULL) {
        agg_shm_detach(t->seg, t->view.size);
        agg_shm_detach(t->host, t->host_size);
        if (t->sim_fd >= 0) {
            close(t->sim_fd);
        }
        free(t);
    }
}

/*
 * Does switchsim read and write this fragment in our memory? Only SAT
 * allreduce chunks: every member then takes the whole result.
 */
static int agg__tl_shm_cma(const agg__tl_shm_t *t, const agg_tl_frag_t *f)
{
    return t->zcopy && f->desc.kind == AGG_DP_KIND_DATA && f->desc.count > 0 &&
           f->desc.coll == AGG_DP_COLL_ALLREDUCE;
}

/* The part of a fragment a member adds, as the engine takes it. */
static void agg__tl_shm_contrib(const agg_tl_frag_t *f, agg_dp_contrib_t *c)
{
    *c = (agg_dp_contrib_t){
        .n = f->n, .desc = f->desc, .empty = f->empty, .status = f->status,
        .data = f->src, .off = f->src_off, .len = f->src_len,
    };
}

/* Leaves the fragment for switchsim in our channel. */
static void agg__tl_shm_stage(agg__tl_shm_t *t, const agg_tl_frag_t *f)
{
    agg_dp_frag_t *fr = agg_dp_stage(t->seg, t->member, f->n);
    size_t esize = agg_dtype_size(f->desc.dtype);
    size_t bytes =
        (size_t)(f->desc.coll == AGG_DP_COLL_ALLGATHER ? f->src_len : f->desc.count) * esize;

    fr->desc  = f->desc;
    fr->off   = f->src_off;
    fr->len   = f->src_len;
    fr->flags = 0;
    if (f->status != AGG_OK) {
        fr->flags = AGG_DP_FRAG_FAILED;
    } else if (f->empty) {
        fr->flags = AGG_DP_FRAG_EMPTY;
    } else if (agg__tl_shm_cma(t, f)) {
        fr->flags = AGG_DP_FRAG_CMA;
        fr->pid   = t->pid;
        fr->src   = (uint64_t)(uintptr_t)f->src;
        fr->dst   = (uint64_t)(uintptr_t)f->dst;
    } else if (bytes > 0) {
        memcpy(agg_dp_frag_data(fr), f->src, bytes);
    }
    __atomic_store_n(&fr->n, f->n, __ATOMIC_RELEASE);
    t->rung++;
}

static agg_status_t agg__tl_shm_post(void *tlp, const agg_tl_frag_t *f)
{
    agg__tl_shm_t *t = tlp;
    agg_dp_contrib_t c;
    agg_status_t st;

    agg__tl_shm_contrib(f, &c);
    if (__atomic_load_n(&t->seg->dead, __ATOMIC_ACQUIRE)) {
        if (!t->finishes) {
            return AGG_OK; /* taken, to fail at complete(): nobody moves it any more */
        }
        /* the ranks still complete the nodes: the fragment goes through them failing, so
           that every member sees the same outcome for it (one member's data may be in) */
        c.status = AGG_ERR_SHUTDOWN;
        c.empty  = 1;
        c.data   = NULL;
    } else if (t->staged) {
        agg__tl_shm_stage(t, f);
        return AGG_OK;
    }
    st = agg_dp_push(&t->view, t->leaf, t->position, &c, &t->drv);
    if (st == AGG_OK) {
        agg_dp_count_in(&t->drv, t->seg->tree, &c);
    }
    return st;
}

static void agg__tl_shm_flush(void *tlp)
{
    agg__tl_shm_t *t = tlp;

    if (t->rung > 0) {
        t->rung = 0;
        __atomic_fetch_add(&t->host->doorbell, 1, __ATOMIC_SEQ_CST);
        agg_wait_wake(&t->host->doorbell, &t->host->sleeping);
    }
}

static agg_status_t agg__tl_shm_complete(void *tlp, const agg_tl_frag_t *f)
{
    agg__tl_shm_t *t = tlp;
    agg_dp_slot_t *res = agg_dp_result(t->seg, f->n);

    if (res == NULL) {
        /* staged, or with the root elsewhere: switchsim alone brings results, and a dead
           segment gets none; where the members finish the tree themselves every member's
           push still completes the fragment (failing, once they know) and only then is
           its outcome known to all alike */
        return agg__tl_shm_dead(t) && !t->finishes ? AGG_ERR_SHUTDOWN : AGG_INPROGRESS;
    }
    agg_wait_reset(&t->wait);
    if (res->status == AGG_OK && f->dst != NULL && !agg__tl_shm_cma(t, f)) {
        agg_dp_copy_out_part(res, f->dst_off, f->dst_len, f->dst);
    }
    return res->status;
}

static unsigned agg__tl_shm_progress(void *tlp)
{
    agg__tl_shm_t *t = tlp;

    return agg_dp_progress(&t->view, &t->drv);
}

typedef struct agg__tl_shm_ready {
    agg__tl_shm_t *t;
    uint64_t       n;
} agg__tl_shm_ready_t;

static int agg__tl_shm_ready(void *arg)
{
    agg__tl_shm_ready_t *r = arg;

    return agg_dp_result(r->t->seg, r->n) != NULL ||
           __atomic_load_n(&r->t->seg->dead, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&r->t->seg->work_gen, __ATOMIC_ACQUIRE) != r->t->drv.work_seen ||
           r->t->drv.work_seg != r->t->seg;
}

static void agg__tl_shm_idle(void *tlp, const agg_tl_frag_t *f)
{
    agg__tl_shm_t *t = tlp;
    agg__tl_shm_ready_t r = {t, f->n};

    if (t->staged && agg_wait_will_sleep(&t->wait)) {
        /* about to sleep: make sure switchsim is awake for what we staged */
        __atomic_fetch_add(&t->host->doorbell, 1, __ATOMIC_SEQ_CST);
        agg_wait_wake(&t->host->doorbell, &t->host->sleeping);
    }
    agg_wait_idle(&t->wait, &t->seg->result_gen, &t->seg->sleepers, agg__tl_shm_ready, &r);
}

static void agg__tl_shm_busy(void *tlp)
{
    agg_wait_reset(&((agg__tl_shm_t *)tlp)->wait);
}

/* The rank's host memory only; results are copied out at complete(). */
static void agg__tl_shm_query(agg_tl_attr_t *attr)
{
    *attr = (agg_tl_attr_t){.mem_types = 1u << AGG_MEM_HOST, .results_at_complete = 1};
}

const agg_tl_ops_t agg_tl_shm_ops = {
    .name     = "shm",
    .type     = AGG_TL_SHM,
    .query    = agg__tl_shm_query,
    .attach   = agg__tl_shm_attach,
    .detach   = agg__tl_shm_detach,
    .post     = agg__tl_shm_post,
    .flush    = agg__tl_shm_flush,
    .complete = agg__tl_shm_complete,
    .progress = agg__tl_shm_progress,
    .idle     = agg__tl_shm_idle,
    .busy     = agg__tl_shm_busy,
};
