/*
 * Requests: a collective is an object that is posted, progressed, tested or
 * waited for, and freed (UCC's task shape); a blocking call is post + wait.
 *
 * A communicator keeps its requests in the order they were posted. Each is
 * cut into fragments (LLT) or chunks (SAT) that take consecutive fragment
 * numbers in their group's sequence, at most `window` in flight per group.
 * Every member posts the same requests in the same order, so the numbers
 * must come out the same on every member whatever the timing: a request
 * takes numbers only after every request before it on the same group has
 * taken all of its, and after every request before it knows its group (a
 * SAT request knows it once the SAT lock is granted, or once it has fallen
 * back to the LLT). Results may then come back in any order and requests
 * complete in any order.
 *
 * The SAT lock goes through the SAT group like data: a LOCK fragment that
 * the root grants or refuses for everybody at once, so every member takes
 * the same decision; after sat_lock_batch_size operations an UNLOCK
 * fragment gives it back, once the batch's last chunk has completed.
 */
#include "agg_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/sock.h"

#define AGG__FREE_REQS 8 /* request objects kept per communicator for reuse */

agg_status_t agg__group_init(agg_comm_t *comm, agg__group_t *grp, const agg__tree_info_t *info)
{
    memset(grp, 0, sizeof(*grp));
    grp->comm    = comm;
    grp->info    = *info;
    grp->window  = info->osts;
    grp->payload = info->payload;
    grp->ring    = calloc(info->osts, sizeof(*grp->ring));
    return grp->ring != NULL ? AGG_OK : AGG_ERR_NO_MEMORY;
}

void agg__group_fini(agg__group_t *grp)
{
    if (grp->tl != NULL) {
        grp->tl->detach(grp->tl_priv);
    }
    free(grp->ring);
    memset(grp, 0, sizeof(*grp));
}

static inline int agg__group_full(const agg__group_t *grp)
{
    return !agg_seq_may_post(grp->next_n + 1, grp->done_n, grp->window);
}

/* Takes the next fragment number for a fragment of req (or a lock request). */
static agg__frag_t *agg__assign(agg__group_t *grp, agg_request_t *req, uint8_t kind)
{
    agg__frag_t *e = agg__ring(grp, ++grp->next_n);

    memset(e, 0, sizeof(*e));
    e->req    = req;
    e->f.n    = grp->next_n;
    e->f.desc.kind = kind;
    if (req != NULL) {
        e->f.desc.op    = (uint8_t)req->spec.op;
        e->f.desc.dtype = (uint8_t)req->spec.dtype;
        e->f.desc.coll  = (uint8_t)req->coll;
        e->f.desc.root  = (uint32_t)req->spec.root;
        e->f.desc.total = (uint32_t)req->total;
    }
    return e;
}

/* The a-th fragment's part of the vector: k elements from off. */
static void agg__request_span(const agg_request_t *req, size_t a, size_t *off, size_t *k)
{
    size_t size = (size_t)req->comm->size, at;

    if (req->turns > 0) {
        at   = a / size * req->per_frag; /* within member a % size's block */
        *off = a % size * req->block + at;
        *k   = req->block - at < req->per_frag ? req->block - at : req->per_frag;
        return;
    }
    *off = a * req->per_frag;
    *k   = req->total - *off < req->per_frag ? req->total - *off : req->per_frag;
}

/* The request's next data fragment. */
static void agg__assign_data(agg__group_t *grp, agg_request_t *req)
{
    agg__frag_t *e = agg__assign(grp, req, AGG_DP_KIND_DATA);
    size_t off, k, lo, hi;

    agg__request_span(req, req->assigned, &off, &k);
    e->f.desc.count = (uint32_t)k;
    req->assigned++;
    if (req->abandoned) {
        /* the others still get this fragment, as an error, never as garbage */
        e->f.status = AGG_ERR_TIMEOUT;
        return;
    }
    /* the part of the fragment this member adds, and the part it takes */
    lo = off > req->src_lo ? off : req->src_lo;
    hi = off + k < req->src_hi ? off + k : req->src_hi;
    if (lo < hi) {
        e->f.src     = agg__stage_src(req, lo);
        e->f.src_off = (uint32_t)(lo - off);
        e->f.src_len = (uint32_t)(hi - lo);
        e->f.src_mem = AGG_MEM_HOST; /* device buffers are staged */
    } else {
        e->f.empty = 1;
    }
    lo = off > req->dst_lo ? off : req->dst_lo;
    hi = off + k < req->dst_hi ? off + k : req->dst_hi;
    if (req->own_there && req->stage.gd == NULL && off >= req->src_lo && off + k <= req->src_hi) {
        return; /* a fragment of this member's own block, in place: there already */
    }
    if (lo < hi) {
        e->f.dst     = agg__stage_dst(req, lo);
        e->f.dst_off = (uint32_t)(lo - off);
        e->f.dst_len = (uint32_t)(hi - lo);
        e->f.dst_mem = AGG_MEM_HOST;
        e->f.at_complete = (uint8_t)req->ordered;
    }
}

/*
 * A request this member gives up on (it timed out): the caller is told
 * now and may reuse the buffers, so nothing is read from or written to them
 * any more; its fragments still go through the tree, failing, so that every
 * member stays in step and none takes a partial result for a right one.
 */
void agg__request_abandon(agg_request_t *req, agg_status_t why)
{
    agg__group_t *grp = req->grp;
    uint64_t n;

    agg__stage_abandon(req);
    req->abandoned = 1;
    req->status    = why;
    for (n = grp->done_n + 1; n <= grp->next_n; ++n) {
        agg__frag_t *e = agg__ring(grp, n);

        if (e->req == req) {
            if (e->posted && !grp->tl_attr.results_at_complete) {
                grp->tl->forget(grp->tl_priv, &e->f);
            }
            e->f.dst = NULL;
            if (!e->posted) {
                e->f.src    = NULL;
                e->f.status = why;
            }
        }
    }
}

/*
 * Which group a request's fragments go to, and how big they are. A
 * reduce-scatter or allgather of blocks alike takes its members' blocks in
 * turns, a fragment of each (member 0's first, member 1's first, ...,
 * member 0's second...): in vector order the member whose block is being
 * gathered copies in while the others only wait to copy out (or, for a
 * reduce-scatter, only it copies out), block after block; in turns every
 * member does its share at once. Blocks smaller than an LLT fragment keep
 * vector order: in turns each would be a fragment of its own (8 ranks, 64 B
 * to 8 KiB: 14-17 us against 4-11 in vector order on the 16-core host). On
 * the SAT, blocks from that size go in turns too, a chunk each at most:
 * a call of one chunk would not pipeline (8 ranks, 128 KiB allgather: 34 us
 * in turns, 81-87 as one chunk).
 * Staged device buffers keep vector order (their chunks are staged in it).
 */
static void agg__request_route(agg_request_t *req, agg__group_t *grp)
{
    req->grp      = grp;
    req->written  = 0;
    req->ordered  = req->coll == AGG_COLL_ALLREDUCE && req->src != NULL &&
                    req->src == req->dst && req->stage.gd == NULL &&
                    !(grp == &req->comm->sat && req->comm->ctx->sat_zcopy); /* switchsim writes */
    req->per_frag = grp->payload / req->esize;
    req->nfrags   = (req->total + req->per_frag - 1) / req->per_frag;
    req->turns    = 0;
    if (req->block * req->esize >= req->comm->llt.payload && req->comm->size > 1 &&
        req->stage.gd == NULL) {
        req->turns  = (req->block + req->per_frag - 1) / req->per_frag;
        req->nfrags = req->turns * (size_t)req->comm->size;
    }
    if (req->coll == AGG_COLL_BARRIER) {
        req->nfrags = 1; /* one empty fragment: complete once every member sent it */
    }
}

/* Takes req out of the communicator's list of posted requests, if it is there. */
static void agg__request_unlink(agg_request_t *req)
{
    agg_comm_t *comm = req->comm;
    agg_request_t **pp;

    for (pp = &comm->head; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == req) {
            *pp = req->next;
            break;
        }
    }
    if (comm->head == NULL) {
        comm->tail = NULL;
    } else if (comm->tail == req) {
        for (comm->tail = comm->head; comm->tail->next != NULL; comm->tail = comm->tail->next) {
        }
    }
    req->next = NULL;
}

static void agg__request_recycle(agg_request_t *req)
{
    agg_comm_t *comm = req->comm;

    agg__request_unlink(req);
    if (comm->num_free >= AGG__FREE_REQS) {
        free(req);
        return;
    }
    req->next       = comm->free_reqs;
    comm->free_reqs = req;
    comm->num_free++;
}

static void agg__request_finish(agg_request_t *req)
{
    agg__comm_counts_t *k = &req->comm->counts;

    if (req->nfrags > 0) {
        k->calls[req->coll][req->grp == &req->comm->sat]++;
        k->bytes[req->coll] += req->total * req->esize;
        k->errors[req->coll] += req->status != AGG_OK;
    }
    req->state = AGG__REQ_DONE;
    if (req->freed) {
        agg__request_recycle(req);
    }
}

/* A SAT request that cannot stream goes to the LLT, or fails when it must be SAT. */
static void agg__request_fall_back(agg_request_t *req, agg_status_t why)
{
    agg_comm_t *comm = req->comm;

    comm->sat_fallbacks++;
    if (req->spec.mode == AGG_AGGR_SAT) {
        req->status = why;
        agg__request_finish(req);
        return;
    }
    if (!comm->sat_fallback_logged && comm->ctx->world_rank == 0) {
        agg_info("communicator of %d ranks (group %u): an %s of %zu x %s goes to the "
                 "LLT instead of SAT: %s (logged once; SHARP_COLL_SAT_LOCK_BATCH_SIZE=1 "
                 "lets communicators take turns)", comm->size, comm->group_id,
                 agg_coll_name(req->coll), req->spec.count, agg_dtype_name(req->spec.dtype),
                 agg_status_string(why));
    } else {
        agg_debug("%s of %zu elements goes to the LLT: %s", agg_coll_name(req->coll),
                  req->spec.count, agg_status_string(why));
    }
    comm->sat_fallback_logged = 1;
    req->why_llt = why;
    agg__request_route(req, &comm->llt);
    if (req->stage.gd != NULL) {
        agg__stage_start(req); /* nothing was staged yet: it ran only once locked */
    }
    req->state = AGG__REQ_RUNNING;
}

/* A fragment's result came back. */
static void agg__deliver(agg__group_t *grp, agg__frag_t *e, agg_status_t st)
{
    agg_comm_t *comm = grp->comm;
    agg_request_t *req = e->req;

    if (e->f.desc.kind == AGG_DP_KIND_UNLOCK) {
        return;
    }
    if (e->f.desc.kind == AGG_DP_KIND_LOCK) {
        if (st == AGG_OK) {
            grp->lock       = AGG__LOCK_HELD;
            grp->batch_left = comm->ctx->alike.sat_batch;
            req->state      = AGG__REQ_RUNNING;
            return;
        }
        grp->lock = AGG__LOCK_NONE;
        if (st == AGG_ERR_SAT_LOCK_BUSY && req->lock_tries++ < comm->ctx->alike.sat_retries) {
            /* every member sees the same refusal and repeats the same request */
            req->retry_at = (int64_t)(agg_time_ns() / 1000u) +
                            ((int64_t)comm->ctx->alike.sat_retry_us << (req->lock_tries - 1));
            req->state = AGG__REQ_QUEUED;
            return;
        }
        agg__request_fall_back(req, st);
        return;
    }
    if (st != AGG_OK && req->status == AGG_OK && !req->abandoned) {
        req->status = st;
    }
    if (st == AGG_OK && req->status == AGG_OK && e->f.dst != NULL) {
        req->written += e->f.dst_len; /* ordered: in order, from rbuf's start */
    }
    if (++req->done == req->nfrags && req->stage.gd == NULL) {
        agg__request_finish(req); /* a staged one once its results are copied out */
    }
}

/* Completes, in order, the fragments whose results are back; posts what waits. */
static unsigned agg__group_progress(agg__group_t *grp)
{
    unsigned steps = 0;
    uint64_t n;
    int posted = 0;
    agg_status_t st;

    if (grp->tl == NULL) {
        return 0;
    }
    for (n = grp->done_n + 1; n <= grp->next_n; ++n) {
        agg__frag_t *e = agg__ring(grp, n);

        if (!e->posted) {
            st = grp->tl->post(grp->tl_priv, &e->f);
            if (st != AGG_OK) {
                continue; /* the slot is busy: the next pass */
            }
            e->posted = 1;
            posted++;
            steps++;
        }
    }
    if (posted > 0) {
        grp->tl->flush(grp->tl_priv);
        agg__count_sent(grp->comm->ctx, (uint64_t)posted);
    }
    steps += grp->tl->progress(grp->tl_priv);
    while (grp->done_n < grp->next_n) {
        agg__frag_t *e = agg__ring(grp, grp->done_n + 1);

        if (!e->posted) {
            break;
        }
        if (e->req != NULL && e->req->ordered && e->req->status != AGG_OK) {
            e->f.dst = NULL; /* after a failure, nothing more of an ordered request lands */
        }
        st = grp->tl->complete(grp->tl_priv, &e->f);
        if (st == AGG_INPROGRESS) {
            break;
        }
        grp->done_n++;
        agg__deliver(grp, e, st);
        steps++;
    }
    return steps;
}

/* Gives out fragment numbers, in post order (see the top of the file). */
static unsigned agg__schedule(agg_comm_t *comm)
{
    agg__group_t *sat = &comm->sat;
    int blocked_llt = 0, blocked_sat = 0;
    unsigned steps = 0;
    agg_request_t *r, *next;
    int64_t now_us = 0;

    if (sat->lock == AGG__LOCK_RELEASING && sat->done_n == sat->next_n) {
        agg__assign(sat, NULL, AGG_DP_KIND_UNLOCK);
        sat->lock = AGG__LOCK_NONE;
        steps++;
    }
    for (r = comm->head; r != NULL; r = next) {
        next = r->next;
        if (r->state == AGG__REQ_DONE) {
            continue;
        }
        if (r->state == AGG__REQ_QUEUED && r->grp == sat && !blocked_sat) {
            /* under the lock this member holds now, or asking for it: decided
               only once every SAT request before it has all its numbers */
            if (sat->lock == AGG__LOCK_HELD) {
                r->state = AGG__REQ_RUNNING;
            } else if (sat->lock == AGG__LOCK_NONE && !agg__group_full(sat)) {
                if (now_us == 0) {
                    now_us = (int64_t)(agg_time_ns() / 1000u);
                }
                if (now_us >= r->retry_at) {
                    agg__assign(sat, r, AGG_DP_KIND_LOCK);
                    sat->lock = AGG__LOCK_ASKING;
                    r->state  = AGG__REQ_LOCKING;
                    steps++;
                }
            }
        } else if (r->state == AGG__REQ_QUEUED && r->grp != sat) {
            r->state = AGG__REQ_RUNNING;
        }
        if (r->state != AGG__REQ_RUNNING) {
            break; /* its group is not known yet: nobody behind it may take numbers */
        }
        if (r->stage.gd != NULL) {
            steps += agg__stage_step(r);
            if (r->done == r->nfrags && agg__stage_drained(r)) {
                agg__request_finish(r);
                continue;
            }
        }
        if (r->grp == sat ? blocked_sat : blocked_llt) {
            continue;
        }
        while (r->assigned < agg__stage_assignable(r) && !agg__group_full(r->grp)) {
            agg__assign_data(r->grp, r);
            steps++;
            /* the batch's last operation: the lock goes back once it completes */
            if (r->assigned == r->nfrags && r->grp == sat && sat->lock == AGG__LOCK_HELD &&
                comm->ctx->alike.sat_batch > 0 && --sat->batch_left == 0) {
                sat->lock = AGG__LOCK_RELEASING;
            }
        }
        if (r->assigned < r->nfrags) {
            if (r->grp == sat) {
                blocked_sat = 1;
            } else {
                blocked_llt = 1;
            }
        }
        if (r->nfrags == 0 && r->state != AGG__REQ_DONE) {
            agg__request_finish(r); /* a bare lock request, or nothing to reduce */
        }
    }
    return steps;
}

unsigned agg__comm_progress(agg_comm_t *comm)
{
    unsigned steps = agg__schedule(comm);

    steps += agg__group_progress(&comm->llt);
    steps += agg__group_progress(&comm->sat);
    if (steps > 0) {
        steps += agg__schedule(comm);
    }
    return steps;
}

agg_status_t agg__request_new(agg_comm_t *comm, agg_coll_type_t coll,
                              const agg_reduce_spec_t *spec, agg_request_t **out)
{
    agg_request_t *req = comm->free_reqs;

    if (req != NULL) {
        comm->free_reqs = req->next;
        comm->num_free--;
    } else {
        req = malloc(sizeof(*req));
        if (req == NULL) {
            return AGG_ERR_NO_MEMORY;
        }
    }
    memset(req, 0, sizeof(*req));
    req->comm   = comm;
    req->spec   = *spec;
    req->coll   = coll;
    req->esize  = agg_dtype_size(spec->dtype);
    req->state  = AGG__REQ_INACTIVE;
    req->status = AGG_OK;
    *out = req;
    return AGG_OK;
}

void agg__request_start(agg_request_t *req, agg__group_t *grp)
{
    agg_comm_t *comm = req->comm;

    agg__request_unlink(req); /* a persistent request posted again */
    req->state      = AGG__REQ_QUEUED;
    req->status     = AGG_OK;
    req->abandoned  = 0;
    req->why_llt    = AGG_OK;
    req->assigned   = 0;
    req->done       = 0;
    req->lock_tries = 0;
    req->retry_at   = 0;
    req->seen_ms    = 0;
    req->waited_ms  = 0;
    agg__request_route(req, grp);
    if (req->stage.gd != NULL) {
        agg__stage_start(req);
    }
    if (comm->tail != NULL) {
        comm->tail->next = req;
    } else {
        comm->head = req;
    }
    comm->tail = req;
}

void agg_request_free(agg_request_t *req)
{
    agg_comm_t *comm;

    if (req == NULL) {
        return;
    }
    comm = req->comm;
    agg__comm_lock(comm);
    if (req->state == AGG__REQ_DONE || req->state == AGG__REQ_INACTIVE) {
        agg__request_recycle(req);
    } else {
        req->freed = 1; /* recycled when its last fragment completes */
    }
    agg__comm_unlock(comm);
}

void agg_request_info(const agg_request_t *req, agg_request_info_t *info)
{
    memset(info, 0, sizeof(*info));
    if (req != NULL && req->grp != NULL) {
        info->coll      = req->coll;
        info->tree      = req->grp == &req->comm->sat ? AGG_AGGR_SAT : AGG_AGGR_LLT;
        info->why_llt   = req->why_llt;
        info->fragments = req->nfrags;
        info->written   = req->ordered ? req->written : SIZE_MAX;
    }
}

unsigned agg_comm_progress(agg_comm_t *comm)
{
    unsigned steps;

    if (comm == NULL) {
        return 0;
    }
    agg__comm_lock(comm);
    steps = agg__comm_progress(comm);
    agg__comm_unlock(comm);
    return steps;
}

void agg__comm_requests_free(agg_comm_t *comm)
{
    agg_request_t *r;

    while ((r = comm->head) != NULL) {
        comm->head = r->next;
        free(r);
    }
    while ((r = comm->free_reqs) != NULL) {
        comm->free_reqs = r->next;
        free(r);
    }
    comm->num_free = 0;
    comm->tail     = NULL;
}
