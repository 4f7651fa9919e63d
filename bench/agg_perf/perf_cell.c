/*
 * agg_perf's cells: the data a collective runs on, one timed loop of one
 * path, and the check of one more call against the result it must give.
 */
#include <stdint.h>
#include <string.h>

#include "perf.h"

/* --------------------------------------------------------------- the data */

/*
 * What member r holds at element k: small integers, exact in every type,
 * different on every member and element, so a result from the wrong member
 * or offset shows. Sums stay within the type's exact range; products are of
 * 1, -1 and a few 2s.
 */
static double perf_gen(const perf_opts_t *o, int r, size_t k)
{
    size_t h = k * 7 + (size_t)r * 13;

    switch (o->op) {
    case PERF_SUM:
        return (double)(h % o->span) - (o->type->is_signed ? (double)(o->span / 4) : 0);
    case PERF_PROD:
        if ((k + (size_t)r) % 8 == 0) {
            return 2;
        }
        return o->type->is_signed && (k + 3 * (size_t)r) % 5 == 0 ? -1 : 1;
    default:
        return (double)(h % 64) - (o->type->is_signed ? 16 : 0);
    }
}

static double perf_fold(perf_op_id_t op, double a, double b)
{
    switch (op) {
    case PERF_SUM:  return a + b;
    case PERF_PROD: return a * b;
    case PERF_MIN:  return b < a ? b : a;
    default:        return b > a ? b : a;
    }
}

static void perf_set(const perf_type_t *t, void *buf, size_t i, double v)
{
    switch (t->dtype) {
    case AGG_DTYPE_INT8:     ((int8_t *)buf)[i]   = (int8_t)v; break;
    case AGG_DTYPE_UINT8:    ((uint8_t *)buf)[i]  = (uint8_t)v; break;
    case AGG_DTYPE_INT32:    ((int32_t *)buf)[i]  = (int32_t)v; break;
    case AGG_DTYPE_UINT32:   ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case AGG_DTYPE_INT64:    ((int64_t *)buf)[i]  = (int64_t)v; break;
    case AGG_DTYPE_UINT64:   ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case AGG_DTYPE_FLOAT16:  ((uint16_t *)buf)[i] = agg_float_to_half((float)v); break;
    case AGG_DTYPE_BFLOAT16: ((uint16_t *)buf)[i] = agg_float_to_bf16((float)v); break;
    case AGG_DTYPE_FLOAT32:  ((float *)buf)[i]    = (float)v; break;
    default:                 ((double *)buf)[i]   = v; break;
    }
}

static double perf_get(const perf_type_t *t, const void *buf, size_t i)
{
    switch (t->dtype) {
    case AGG_DTYPE_INT8:     return ((const int8_t *)buf)[i];
    case AGG_DTYPE_UINT8:    return ((const uint8_t *)buf)[i];
    case AGG_DTYPE_INT32:    return ((const int32_t *)buf)[i];
    case AGG_DTYPE_UINT32:   return ((const uint32_t *)buf)[i];
    case AGG_DTYPE_INT64:    return (double)((const int64_t *)buf)[i];
    case AGG_DTYPE_UINT64:   return (double)((const uint64_t *)buf)[i];
    case AGG_DTYPE_FLOAT16:  return agg_half_to_float(((const uint16_t *)buf)[i]);
    case AGG_DTYPE_BFLOAT16: return agg_bf16_to_float(((const uint16_t *)buf)[i]);
    case AGG_DTYPE_FLOAT32:  return ((const float *)buf)[i];
    default:                 return ((const double *)buf)[i];
    }
}

perf_shape_t perf_shape(const perf_opts_t *o, const perf_env_t *e, agg_coll_type_t coll,
                        size_t bytes)
{
    size_t ts = agg_dtype_size(o->type->dtype), n = (size_t)e->size;
    perf_shape_t s = {.coll = coll};

    switch (coll) {
    case AGG_COLL_BARRIER:
        break;
    case AGG_COLL_REDUCE_SCATTER:
        s.count   = bytes / ts / n;
        s.in_len  = s.count * n;
        s.out_len = s.count;
        s.bytes   = s.in_len * ts;
        break;
    case AGG_COLL_ALLGATHER:
        s.count   = bytes / ts / n;
        s.in_len  = s.count;
        s.out_len = s.count * n;
        s.bytes   = s.out_len * ts;
        break;
    default:
        s.count   = bytes / ts;
        s.in_len  = s.count;
        s.out_len = coll != AGG_COLL_REDUCE || e->rank == o->root ? s.count : 0;
        s.bytes   = s.count * ts;
        break;
    }
    return s;
}

void perf_shape_fill(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s)
{
    const perf_type_t *t = o->type;
    int src = s->coll == AGG_COLL_BCAST ? o->root : e->rank, r;
    size_t k, base = s->coll == AGG_COLL_REDUCE_SCATTER ? (size_t)e->rank * s->count : 0;
    double acc;

    for (k = 0; k < s->in_len; ++k) {
        perf_set(t, e->sbuf, k, perf_gen(o, src, k));
    }
    for (k = 0; k < s->out_len; ++k) {
        switch (s->coll) {
        case AGG_COLL_BCAST:
            acc = perf_gen(o, o->root, k);
            break;
        case AGG_COLL_ALLGATHER:
            acc = perf_gen(o, (int)(k / s->count), k % s->count);
            break;
        default:
            acc = perf_gen(o, 0, base + k);
            for (r = 1; r < e->size; ++r) {
                acc = perf_fold(o->op, acc, perf_gen(o, r, base + k));
            }
            break;
        }
        perf_set(t, e->ebuf, k, acc);
    }
}

/* This member's block of rbuf: where an in-place allgather takes its input. */
static char *perf_own_block(const perf_opts_t *o, const perf_env_t *e, const perf_shape_t *s)
{
    return e->rbuf + (size_t)e->rank * s->count * agg_dtype_size(o->type->dtype);
}

/*
 * The input that a call reads from rbuf whatever the data: bcast's root
 * sends from it, an in-place allgather sends its own block. Returns 0 where
 * rbuf holds no such input (the caller fills an in-place input itself).
 */
static int perf_fill_rbuf_input(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                                int in_place)
{
    size_t ts = agg_dtype_size(o->type->dtype);

    if (s->coll == AGG_COLL_BCAST && e->rank == o->root) {
        memcpy(e->rbuf, e->sbuf, s->in_len * ts);
    } else if (in_place && s->coll == AGG_COLL_ALLGATHER) {
        memcpy(perf_own_block(o, e, s), e->sbuf, s->count * ts);
    } else {
        return 0;
    }
    return 1;
}

/* Input for the timed loop: in place, data the op leaves as it is (x + 0, x * 1, min(x, x)). */
static void perf_fill_timed(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                            int in_place)
{
    size_t ts = agg_dtype_size(o->type->dtype), k;

    if (perf_fill_rbuf_input(o, e, s, in_place) || !in_place) {
        return;
    }
    if (o->op == PERF_SUM) {
        memset(e->rbuf, 0, s->in_len * ts);
    } else if (o->op == PERF_PROD) {
        for (k = 0; k < s->in_len; ++k) {
            perf_set(o->type, e->rbuf, k, 1);
        }
    } else {
        memcpy(e->rbuf, e->sbuf, s->in_len * ts);
    }
}

/* Input for the checked call: the result area holds the complement of what it must become. */
static void perf_fill_check(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                            int in_place)
{
    size_t ts = agg_dtype_size(o->type->dtype), k;

    for (k = 0; k < s->out_len * ts; ++k) {
        e->rbuf[k] = (char)~e->ebuf[k];
    }
    if (!perf_fill_rbuf_input(o, e, s, in_place) && in_place) {
        memcpy(e->rbuf, e->sbuf, s->in_len * ts);
    }
}

/* Wrong elements of this member's result; the first one is described on stderr. */
static long long perf_verify(const perf_opts_t *o, const perf_env_t *e, const perf_shape_t *s,
                             perf_path_id_t p, int in_place)
{
    size_t ts = agg_dtype_size(o->type->dtype), k, first = 0;
    long long wrong = 0;

    if (memcmp(e->rbuf, e->ebuf, s->out_len * ts) == 0) {
        return 0;
    }
    for (k = 0; k < s->out_len; ++k) {
        if (memcmp(e->rbuf + k * ts, e->ebuf + k * ts, ts) != 0 && wrong++ == 0) {
            first = k;
        }
    }
    fprintf(stderr, "rank %d: %s %s %s %zu B %s %s: %lld wrong, first at element %zu (got %g, "
            "expected %g)\n", e->rank, perf_path_names[p], perf_coll_names[s->coll],
            in_place ? "in-place" : "out-of-place", s->bytes, o->type->name,
            perf_ops[o->op].name, wrong, first, perf_get(o->type, e->rbuf, first),
            perf_get(o->type, e->ebuf, first));
    return wrong;
}

/* --------------------------------------------------------------- measuring */

/* Runs `iters` calls; returns the first failure (0: none). */
static int perf_loop(perf_env_t *e, const perf_opts_t *o, perf_path_id_t p,
                     const perf_call_t *c, int iters)
{
    const perf_path_ops_t *ops = &perf_paths[p];
    perf_req_t req[PERF_DEPTH_MAX];
    int i, rc = 0, st, posted = 0, done = 0;

    if (o->blocking) {
        for (i = 0; i < iters && rc == 0; ++i) {
            rc = ops->start(e, c, NULL);
        }
        return rc;
    }
    for (i = 0; i < iters && rc == 0; ++i) {
        if (posted - done == o->depth) {
            rc = ops->wait(e, &req[done++ % o->depth]);
            if (rc != 0) {
                break;
            }
        }
        rc = ops->start(e, c, &req[posted % o->depth]);
        posted += rc == 0;
    }
    while (done < posted) {
        st = ops->wait(e, &req[done++ % o->depth]);
        rc = rc != 0 ? rc : st;
    }
    return rc;
}

/*
 * Every rank's verdict on a step: 0 when it went well everywhere, else one
 * failure (libagg's, negative, before MPI's, positive), the same on every rank.
 */
static int perf_agree(perf_env_t *e, int rc)
{
    int mine[2] = {rc < 0 ? rc : 0, rc > 0 ? -rc : 0}, all[2];

    PMPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, e->ctl);
    return all[0] != 0 ? all[0] : -all[1];
}

/* Calls per loop: -n or -w when given, else about PERF_ITER_BYTES' worth (1/16 when warming up). */
static int perf_iters(const perf_opts_t *o, size_t bytes, int warmup)
{
    static const size_t lo[2] = {PERF_ITERS_MIN, PERF_WARMUP_MIN};
    static const size_t hi[2] = {PERF_ITERS_MAX, PERF_WARMUP_MAX};
    int fixed = warmup ? o->warmup : o->iters;
    size_t v  = bytes == 0 ? hi[warmup] : PERF_ITER_BYTES / (warmup ? 16 : 1) / bytes;

    if (fixed >= 0) {
        return fixed;
    }
    return (int)(v < lo[warmup] ? lo[warmup] : v > hi[warmup] ? hi[warmup] : v);
}

perf_cell_t perf_cell_run(const perf_opts_t *o, perf_env_t *e, perf_path_id_t p,
                          const perf_shape_t *s, int in_place, int check)
{
    perf_call_t c = {.coll = s->coll, .type = o->type, .op = o->op, .root = o->root,
                     .in_place = in_place, .sbuf = e->sbuf, .rbuf = e->rbuf,
                     .count = s->count};
    perf_cell_t cell = {.usec = -1, .wrong = -1};
    int rc, iters = perf_iters(o, s->bytes, 0);
    double t0, local, slowest;
    long long wrong = 0;

    if (in_place) {
        c.sbuf = s->coll == AGG_COLL_ALLGATHER ? perf_own_block(o, e, s) : e->rbuf;
    }
    perf_fill_timed(o, e, s, in_place);
    rc = perf_agree(e, perf_loop(e, o, p, &c, perf_iters(o, s->bytes, 1)));
    if (rc == 0) {
        PMPI_Barrier(e->ctl);
        perf_prof_sampling(1);
        t0    = PMPI_Wtime();
        rc    = perf_loop(e, o, p, &c, iters);
        local = (PMPI_Wtime() - t0) / iters;
        perf_prof_sampling(0);
        PMPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, e->ctl);
        rc        = perf_agree(e, rc);
        cell.usec = slowest * 1e6;
    }
    if (rc == 0 && check && s->coll != AGG_COLL_BARRIER) {
        perf_fill_check(o, e, s, in_place);
        rc    = perf_agree(e, perf_loop(e, o, p, &c, 1));
        wrong = rc == 0 ? perf_verify(o, e, s, p, in_place) : 0;
        PMPI_Allreduce(&wrong, &cell.wrong, 1, MPI_LONG_LONG, MPI_SUM, e->ctl);
    }
    cell.rc = rc;
    return cell;
}

perf_cell_t perf_cell_pick(perf_cell_t *runs, int n, int use_min)
{
    perf_cell_t t, best = {.usec = -1, .wrong = -1};
    int i, j, ok = 0;

    for (i = 0; i < n; ++i) {
        if (runs[i].wrong >= 0) {
            best.wrong = (best.wrong < 0 ? 0 : best.wrong) + runs[i].wrong;
        }
        if (runs[i].rc != 0 && best.rc == 0) {
            best.rc = runs[i].rc;
        }
        if (runs[i].usec >= 0) {
            runs[ok++] = runs[i];
        }
    }
    for (i = 0; i < ok; ++i) {
        for (j = i + 1; j < ok; ++j) {
            if (runs[j].usec < runs[i].usec) {
                t       = runs[i];
                runs[i] = runs[j];
                runs[j] = t;
            }
        }
    }
    if (ok > 0) {
        best.usec = runs[use_min ? 0 : ok / 2].usec;
    }
    return best;
}
