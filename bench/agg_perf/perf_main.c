/*
 * agg_perf: collective latency and bandwidth in the nccl-tests format, for
 * several implementations of each collective measured side by side in one
 * run, on the same ranks, buffers and sizes (the paths: perf_path.c).
 *
 * The libagg paths need aggmgr and switchsim: run under build/bin/aggrun.
 * Without them those paths are skipped with the reason, and the others run.
 *
 * For each size the paths take turns: path A's cells, path B's, ... and that
 * again -R times, the first path rotating, so slow phases of a noisy machine
 * hit every path alike; a row shows each path's median (or minimum) time.
 *
 * Exits 1 when an element was wrong or a call failed, 2 on a bad option.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

int perf_rank;

static void perf_vsay(FILE *out, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Only rank 0 speaks: every rank reaches the same notes and errors. */
static void perf_vsay(FILE *out, const char *prefix, const char *fmt, va_list ap)
{
    if (perf_rank != 0) {
        return;
    }
    fputs(prefix, out);
    vfprintf(out, fmt, ap);
}

void perf_note(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    perf_vsay(stdout, "", fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void perf_arg_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    perf_vsay(stderr, "agg_perf: ", fmt, ap);
    va_end(ap);
}

/* -------------------------------------------------------------- set-up */

/* The run's first lines: the job, the sizes, the settings. */
static void perf_note_run(const perf_opts_t *o, const perf_env_t *e)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    PMPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = '\0';
    perf_note("# agg_perf: %d ranks (%d on this host, %ld cores), %s\n", e->size,
              e->local_size, sysconf(_SC_NPROCESSORS_ONLN), lib);
    perf_note("# minBytes %zu maxBytes %zu step: %zu(%s)", o->min_bytes, o->max_bytes,
              o->factor ? o->factor : o->increment, o->factor ? "factor" : "bytes");
    perf_note(" warmup iters: %s iters: %s validation: %d blocking: %d%s\n",
              o->warmup >= 0 ? "fixed" : "by size", o->iters >= 0 ? "fixed" : "by size",
              o->check, o->blocking, o->blocking ? "" : " (-W in flight)");
    perf_note("# type %s, op %s, root %d, %d rounds per cell with the paths taking turns, "
              "%s shown\n#\n# paths:\n", o->type->name, perf_ops[o->op].name, o->root,
              o->rounds, o->use_min ? "minimum" : "median");
}

/* Communicators of every rank, the three buffers, and every path asked for that can run. */
static void perf_setup(const perf_opts_t *o, perf_env_t *e)
{
    size_t alloc = (o->max_bytes + 63) / 64 * 64 + 64;
    MPI_Comm local;

    PMPI_Comm_dup(MPI_COMM_WORLD, &e->ctl);
    PMPI_Comm_dup(MPI_COMM_WORLD, &e->mpi);
    PMPI_Comm_dup(MPI_COMM_WORLD, &e->host);
    PMPI_Comm_dup(MPI_COMM_WORLD, &e->oob);
    PMPI_Comm_set_errhandler(e->mpi, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(e->host, MPI_ERRORS_RETURN);
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    PMPI_Comm_size(local, &e->local_size);
    PMPI_Comm_free(&local);
    e->sbuf = aligned_alloc(64, alloc);
    e->rbuf = aligned_alloc(64, alloc);
    e->ebuf = aligned_alloc(64, alloc);
    if (e->sbuf == NULL || e->rbuf == NULL || e->ebuf == NULL) {
        fprintf(stderr, "agg_perf: rank %d: cannot allocate 3 x %zu bytes\n", e->rank, alloc);
        PMPI_Abort(MPI_COMM_WORLD, 2);
    }
    perf_note_run(o, e);
    if (o->paths & (1u << PERF_MPI)) {
        e->have |= 1u << PERF_MPI;
        perf_note("#   mpi   Open MPI's own collectives (PMPI_*)\n");
    }
    if (o->paths & (1u << PERF_HOST)) {
        e->have |= 1u << PERF_HOST;
        shim_host_tune_static(&e->tune, e->size);
        perf_note("#   host  shim_host_allreduce: %s < %zu B <= %s < %zu B <= %s (static "
                  "tuning)%s\n", shim_host_alg_name(SHIM_ALG_RECURSIVE_DOUBLING),
                  e->tune.rd_max, shim_host_alg_name(SHIM_ALG_RABENSEIFNER), e->tune.rab_max,
                  shim_host_alg_name(SHIM_ALG_RING), o->blocking ? "" : "; always blocking");
    }
    perf_agg_setup(o, e);
    perf_note("#\n# time: the slowest rank's mean time per call; algbw = size / time; busbw = "
              "algbw x 2(n-1)/n (allreduce),\n#   (n-1)/n (reduce_scatter, allgather), 1 "
              "(bcast, reduce); GB/s = 1e9 B/s\n# #wrong: wrong elements over all ranks in "
              "one checked call per cell (first round)\n# vsMPI: mpi's out-of-place time / "
              "this path's (> 1: faster than Open MPI)\n");
}

static void perf_teardown(perf_env_t *e)
{
    if (e->acomm != NULL) {
        agg_comm_destroy(e->acomm);
    }
    if (e->actx != NULL) {
        agg_context_finalize(e->actx);
    }
    shim_host_cleanup();
    if (e->table != NULL) {
        fclose(e->table);
    }
    free(e->sbuf);
    free(e->rbuf);
    free(e->ebuf);
    PMPI_Comm_free(&e->oob);
    PMPI_Comm_free(&e->host);
    PMPI_Comm_free(&e->mpi);
    PMPI_Comm_free(&e->ctl);
}

/* --------------------------------------------------------------- the run */

/* Rank 0 keeps the row for the summary and the plot. */
static void perf_keep(perf_results_t *res, const perf_row_t *r, int nranks)
{
    perf_row_t *grown;
    int m;

    for (m = 0; m < 2; ++m) {
        if (r->cell[m].usec > 0) {
            res->bw[r->coll][r->path] += perf_busbw(r, m, nranks);
            res->bw_n[r->coll][r->path]++;
        }
        res->wrong[r->coll][r->path] += r->cell[m].wrong > 0 ? r->cell[m].wrong : 0;
        res->failed |= r->cell[m].rc != 0 || r->cell[m].wrong > 0;
    }
    if (res->n == res->cap) {
        grown = realloc(res->rows, (res->cap ? res->cap * 2 : 64) * sizeof(*grown));
        if (grown == NULL) {
            return; /* the plot misses rows; the table is printed already */
        }
        res->rows = grown;
        res->cap  = res->cap ? res->cap * 2 : 64;
    }
    res->rows[res->n++] = *r;
}

/* Every round of every path's cells at one size; who goes first rotates. */
static void perf_run_rounds(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                            const perf_path_id_t *order, int np,
                            perf_cell_t runs[][2][PERF_ROUNDS_MAX])
{
    perf_path_id_t p;
    int r, k, m;

    for (r = 0; r < o->rounds; ++r) {
        for (k = 0; k < np; ++k) {
            p = order[(k + r) % np];
            for (m = 0; m < 2; ++m) {
                runs[p][m][r] = (perf_cell_t){.usec = -1, .wrong = -1};
                if (m == 0 || perf_has_in_place(p, s->coll)) {
                    runs[p][m][r] = perf_cell_run(o, e, p, s, m, o->check && r == 0);
                }
            }
        }
    }
}

/* One size of one collective: every path, every round, then the rows. */
static void perf_run_size(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s,
                          unsigned paths, perf_results_t *res)
{
    static perf_cell_t runs[PERF_PATH__COUNT][2][PERF_ROUNDS_MAX];
    perf_path_id_t order[PERF_PATH__COUNT];
    perf_row_t rows[PERF_PATH__COUNT];
    char why[MPI_MAX_ERROR_STRING];
    int np = 0, k, m, p;

    for (p = 0; p < PERF_PATH__COUNT; ++p) {
        if (paths & (1u << p)) {
            order[np++] = (perf_path_id_t)p;
        }
    }
    perf_shape_fill(o, e, s);
    perf_run_rounds(o, e, s, order, np, runs);
    for (k = 0; k < np; ++k) {
        p       = order[k];
        rows[k] = (perf_row_t){.coll = s->coll, .path = (perf_path_id_t)p, .bytes = s->bytes,
                               .count = s->count};
        for (m = 0; m < 2; ++m) {
            rows[k].cell[m] = perf_cell_pick(runs[p][m], o->rounds, o->use_min);
            if (rows[k].cell[m].rc != 0) {
                perf_note("# %s %s %s %zu B: %s\n", perf_path_names[p], perf_coll_names[s->coll],
                          m ? "in-place" : "out-of-place", s->bytes,
                          perf_rc_string(rows[k].cell[m].rc, why, sizeof(why)));
            }
        }
    }
    if (e->rank != 0) {
        return;
    }
    for (k = 0; k < np; ++k) {
        perf_print_row(o, e, &rows[k], order[0] == PERF_MPI ? &rows[0] : NULL);
        perf_keep(res, &rows[k], e->size);
    }
}

/* The paths that can run coll, a bit each; each one that cannot says why. */
static unsigned perf_coll_paths(const perf_opts_t *o, const perf_env_t *e,
                                agg_coll_type_t coll)
{
    unsigned paths = 0;
    const char *why;
    int p;

    for (p = 0; p < PERF_PATH__COUNT; ++p) {
        if (!(e->have & (1u << p))) {
            continue;
        }
        why = perf_paths[p].skip(e, coll, o->type);
        if (why != NULL) {
            perf_note("#   (%s: skipped for %s: %s)\n", perf_path_names[p],
                      perf_coll_names[coll], why);
            continue;
        }
        paths |= 1u << p;
    }
    return paths;
}

static void perf_run_coll(const perf_opts_t *o, perf_env_t *e, agg_coll_type_t coll,
                          perf_results_t *res)
{
    unsigned paths = perf_coll_paths(o, e, coll);
    perf_shape_t s;
    size_t bytes, next;

    if (paths == 0) {
        perf_note("# %s: no path can run it\n", perf_coll_names[coll]);
        return;
    }
    if (e->rank == 0) {
        perf_print_table_header(coll);
    }
    for (bytes = o->min_bytes; bytes <= o->max_bytes; bytes = next) {
        s = perf_shape(o, e, coll, bytes);
        if (s.count > 0 || coll == AGG_COLL_BARRIER) {
            perf_run_size(o, e, &s, paths, res);
        }
        next = !o->factor ? bytes + o->increment : bytes ? bytes * o->factor : 1;
        if (coll == AGG_COLL_BARRIER || next <= bytes) {
            break; /* barrier has one size; the others stop before overflowing */
        }
    }
    if (e->rank == 0) {
        perf_print_summary(o, coll, paths, res);
    }
}

/* Rank 0 opens the -T file; every rank learns whether it could. */
static int perf_open_table(const perf_opts_t *o, perf_env_t *e)
{
    int rc = 0;

    if (e->rank == 0 && o->table != NULL && (e->table = fopen(o->table, "w")) == NULL) {
        perror(o->table);
        rc = 1;
    }
    PMPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc == 0 && e->table != NULL) {
        fprintf(e->table, "# agg_perf: %d ranks; time in us, bandwidths in GB/s; nan: not run\n"
                "# coll path size count type redop root oop_time oop_algbw oop_busbw "
                "oop_wrong ip_time ip_algbw ip_busbw ip_wrong vs_mpi\n", e->size);
    }
    return rc;
}

int main(int argc, char **argv)
{
    perf_env_t e = {0};
    perf_results_t res = {0};
    perf_opts_t o;
    int rc, coll, failed;

    PMPI_Init(&argc, &argv);
    PMPI_Comm_rank(MPI_COMM_WORLD, &e.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &e.size);
    perf_rank = e.rank;
    /* every rank parses the same argv, so every rank takes the same exit */
    rc = perf_parse_args(argc, argv, e.size, &o);
    if (rc != 0) {
        PMPI_Finalize();
        return rc > 0 ? 0 : 2;
    }
    if (e.rank == 0 && o.png != NULL && !perf_in_path("gnuplot")) {
        fprintf(stderr, "agg_perf: warning: -g %s: gnuplot not found in PATH; the plot will "
                "be skipped (apt-get install gnuplot-nox)\n", o.png);
    }
    if (perf_open_table(&o, &e) != 0) {
        PMPI_Finalize();
        return 2;
    }
    if (o.prof != NULL && perf_prof_start() != 0 && e.rank == 0) {
        fprintf(stderr, "agg_perf: warning: -P %s: no profile on this host (no timer "
                "signals, or not x86-64)\n", o.prof);
    }
    perf_setup(&o, &e);
    if (e.have == 0) {
        perf_note("# no path can run: nothing measured\n");
        res.failed = 1;
    }
    for (coll = 0; coll < AGG_COLL__COUNT && e.have != 0; ++coll) {
        if (o.colls & (1u << coll)) {
            perf_run_coll(&o, &e, (agg_coll_type_t)coll, &res);
        }
    }
    if (e.rank == 0 && o.png != NULL) {
        perf_plot(&o, &e, res.rows, res.n);
    }
    failed = res.failed;
    if (o.prof != NULL && perf_prof_write(o.prof, e.rank) == 0 && e.rank == 0) {
        fprintf(stderr, "agg_perf: profile in %s.RANK (tools/prof_report.sh %s.*)\n", o.prof,
                o.prof);
    }
    PMPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(res.rows);
    perf_teardown(&e);
    PMPI_Finalize();
    return failed ? 1 : 0;
}
