/*
 * agg_perf's output: the nccl-tests-style table on stdout, the same rows as
 * a data file (-T) and the gnuplot figure (-g). Rank 0 only.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf.h"

/* nccl-tests' bus bandwidth factors: what a link of an optimal algorithm carries. */
static double perf_bus_factor(agg_coll_type_t coll, int n)
{
    switch (coll) {
    case AGG_COLL_ALLREDUCE:      return 2.0 * (n - 1) / n;
    case AGG_COLL_REDUCE_SCATTER:
    case AGG_COLL_ALLGATHER:      return (double)(n - 1) / n;
    case AGG_COLL_BARRIER:        return 0;
    default:                      return 1;
    }
}

static double perf_algbw(const perf_row_t *r, int m)
{
    return r->cell[m].usec > 0 ? (double)r->bytes / r->cell[m].usec / 1e3 : 0;
}

double perf_busbw(const perf_row_t *r, int m, int n)
{
    return perf_algbw(r, m) * perf_bus_factor(r->coll, n);
}

/* mpi's out-of-place time over this row's; < 0 when either did not run. */
static double perf_vs_mpi(const perf_row_t *r, const perf_row_t *mpi)
{
    if (mpi != NULL && mpi->cell[0].usec > 0 && r->cell[0].usec > 0) {
        return mpi->cell[0].usec / r->cell[0].usec;
    }
    return -1;
}

/* nccl-tests prints fewer decimals as times grow, to keep the column width. */
static void perf_print_cell(const perf_row_t *r, int m, int n)
{
    const perf_cell_t *c = &r->cell[m];
    char t[32], wrong[24];

    if (c->usec < 0) {
        printf("  %8s  %6s  %6s  %6s", c->rc != 0 ? "err" : "N/A", "N/A", "N/A", "N/A");
        return;
    }
    snprintf(t, sizeof(t), c->usec >= 10000.0 ? "%.0f" : c->usec >= 100.0 ? "%.1f" : "%.2f",
             c->usec);
    if (c->wrong < 0) {
        snprintf(wrong, sizeof(wrong), "N/A");
    } else {
        snprintf(wrong, sizeof(wrong), "%lld", c->wrong);
    }
    printf("  %8s  %6.2f  %6.2f  %6s", t, perf_algbw(r, m), perf_busbw(r, m, n), wrong);
}

void perf_print_table_header(agg_coll_type_t coll)
{
    printf("#\n# Collective: %s%s\n#\n", perf_coll_names[coll],
           coll == AGG_COLL_REDUCE_SCATTER || coll == AGG_COLL_ALLGATHER
           ? " (size: all members' data; count: one member's block)" : "");
    printf("#%58s%-34s%-34s\n", "", "          out-of-place", "            in-place");
    printf("#%11s  %12s  %8s  %6s  %6s  %5s", "size", "count", "type", "redop", "root", "path");
    printf("  %8s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
    printf("  %8s  %6s  %6s  %6s  %6s\n", "time", "algbw", "busbw", "#wrong", "vsMPI");
    printf("#%11s  %12s  %8s  %6s  %6s  %5s", "(B)", "(elements)", "", "", "", "");
    printf("  %8s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("  %8s  %6s  %6s  %6s  %6s\n", "(us)", "(GB/s)", "(GB/s)", "", "(x)");
    fflush(stdout);
}

/* The same row in the data file (-T): nan where the table says N/A. */
static void perf_table_row(const perf_opts_t *o, const perf_env_t *e, const perf_row_t *r,
                           const char *redop, int root, double vs)
{
    int m;

    fprintf(e->table, "%s %s %zu %zu %s %s %d", perf_coll_names[r->coll],
            perf_path_names[r->path], r->bytes, r->count, o->type->name, redop, root);
    for (m = 0; m < 2; ++m) {
        if (r->cell[m].usec < 0) {
            fprintf(e->table, " nan nan nan %d", -1);
        } else {
            fprintf(e->table, " %.3f %.6g %.6g %lld", r->cell[m].usec, perf_algbw(r, m),
                    perf_busbw(r, m, e->size), r->cell[m].wrong);
        }
    }
    if (vs >= 0) {
        fprintf(e->table, " %.4f\n", vs);
    } else {
        fprintf(e->table, " nan\n");
    }
    fflush(e->table);
}

void perf_print_row(const perf_opts_t *o, const perf_env_t *e, const perf_row_t *r,
                    const perf_row_t *mpi)
{
    const char *redop = perf_is_reduction(r->coll) ? perf_ops[o->op].name : "none";
    int root  = r->coll == AGG_COLL_REDUCE || r->coll == AGG_COLL_BCAST ? o->root : -1;
    double vs = perf_vs_mpi(r, mpi);

    printf("%12zu  %12zu  %8s  %6s  %6d  %5s", r->bytes, r->count,
           r->coll == AGG_COLL_BARRIER ? "none" : o->type->name, redop, root,
           perf_path_names[r->path]);
    perf_print_cell(r, 0, e->size);
    perf_print_cell(r, 1, e->size);
    if (vs >= 0) {
        printf("  %6.2f\n", vs);
    } else {
        printf("  %6s\n", "N/A");
    }
    if (e->table != NULL) {
        perf_table_row(o, e, r, redop, root, vs);
    }
    fflush(stdout);
}

void perf_print_summary(const perf_opts_t *o, agg_coll_type_t coll, unsigned paths,
                        const perf_results_t *res)
{
    int p;

    for (p = 0; p < PERF_PATH__COUNT; ++p) {
        if (paths & (1u << p)) {
            printf("# Out of bounds values : %lld %s  %s %s\n", res->wrong[coll][p],
                   !o->check || coll == AGG_COLL_BARRIER ? "(not checked)" :
                   res->wrong[coll][p] ? "FAILED" : "OK",
                   perf_path_names[p], perf_coll_names[coll]);
        }
    }
    for (p = 0; p < PERF_PATH__COUNT; ++p) {
        if (paths & (1u << p)) {
            printf("# Avg bus bandwidth    : %.6g  %s %s\n", res->bw_n[coll][p]
                   ? res->bw[coll][p] / res->bw_n[coll][p] : 0.0, perf_path_names[p],
                   perf_coll_names[coll]);
        }
    }
    fflush(stdout);
}

/* ------------------------------------------------------------ the plot (-g) */

int perf_in_path(const char *prog)
{
    const char *path = getenv("PATH");
    char dir[4096], file[4352];
    size_t len;

    while (path != NULL && *path != '\0') {
        len = strcspn(path, ":");
        snprintf(dir, sizeof(dir), "%.*s", (int)len, path);
        snprintf(file, sizeof(file), "%s/%s", len ? dir : ".", prog);
        if (access(file, X_OK) == 0) {
            return 1;
        }
        path += len + (path[len] == ':');
    }
    return 0;
}

/* Writes `s` as a gnuplot single-quoted string. */
static void perf_gp_quote(FILE *gp, const char *s)
{
    fputc('\'', gp);
    for (; *s != '\0'; ++s) {
        if (*s == '\'') {
            fputc('\'', gp);
        }
        fputc(*s, gp);
    }
    fputc('\'', gp);
}

/* The collectives with a timed row that has a size axis, a bit each; *n: how many. */
static unsigned perf_plot_colls(const perf_row_t *rows, size_t nrows, int *n)
{
    unsigned colls = 0;
    size_t i;

    *n = 0;
    for (i = 0; i < nrows; ++i) {
        if (rows[i].coll != AGG_COLL_BARRIER && rows[i].cell[0].usec > 0) {
            *n += !(colls & (1u << rows[i].coll));
            colls |= 1u << rows[i].coll;
        }
    }
    return colls;
}

/* One data block per (collective, path), $d_<coll>_<path>: size, time, busbw. */
static void perf_plot_data(FILE *gp, const perf_env_t *e, const perf_row_t *rows,
                           size_t nrows, unsigned colls)
{
    int coll, p, open;
    size_t i;

    for (coll = 0; coll < AGG_COLL__COUNT; ++coll) {
        for (p = 0; p < PERF_PATH__COUNT && (colls & (1u << coll)); ++p) {
            for (open = 0, i = 0; i < nrows; ++i) {
                if ((int)rows[i].coll != coll || (int)rows[i].path != p) {
                    continue;
                }
                if (!open) {
                    fprintf(gp, "$d_%d_%d << EOD\n", coll, p);
                    open = 1;
                }
                if (rows[i].cell[0].usec > 0) {
                    fprintf(gp, "%zu %.4f %.6g\n", rows[i].bytes, rows[i].cell[0].usec,
                            perf_busbw(&rows[i], 0, e->size));
                }
            }
            if (open) {
                fprintf(gp, "EOD\n");
            }
        }
    }
}

/* Two panels per collective (time, busbw), a line per path with rows of it. */
static void perf_plot_panels(FILE *gp, const perf_row_t *rows, size_t nrows, unsigned colls)
{
    unsigned paths;
    int coll, p, panel;
    size_t i;

    for (coll = 0; coll < AGG_COLL__COUNT; ++coll) {
        if (!(colls & (1u << coll))) {
            continue;
        }
        for (panel = 0; panel < 2; ++panel) {
            fprintf(gp, "set title '%s: %s'\nset ylabel '%s'\nplot ",
                    perf_coll_names[coll], panel ? "bus bandwidth" : "time",
                    panel ? "busbw (GB/s)" : "time (us)");
            for (paths = 0, i = 0; i < nrows; ++i) {
                p = rows[i].path;
                if ((int)rows[i].coll != coll || (paths & (1u << p))) {
                    continue;
                }
                /* a path keeps its colour in every panel */
                fprintf(gp, "%s$d_%d_%d using 1:%d with linespoints lt %d lw 2 title '%s'",
                        paths ? ", " : "", coll, p, panel ? 3 : 2, p + 1, perf_path_names[p]);
                paths |= 1u << p;
            }
            fprintf(gp, "\n");
        }
    }
}

/* Out-of-place only, log-log; barrier has no size: it stays in the table. */
void perf_plot(const perf_opts_t *o, const perf_env_t *e, const perf_row_t *rows,
               size_t nrows)
{
    int ncolls, status;
    unsigned colls = perf_plot_colls(rows, nrows, &ncolls);
    char title[256];
    FILE *gp;

    if (ncolls == 0) {
        fprintf(stderr, "agg_perf: -g %s: nothing to plot (barrier has no size axis)\n",
                o->png);
        return;
    }
    if (!perf_in_path("gnuplot")) {
        fprintf(stderr, "agg_perf: warning: -g %s: gnuplot not found in PATH; no plot written "
                "(apt-get install gnuplot-nox)\n", o->png);
        return;
    }
    gp = popen("gnuplot", "w");
    if (gp == NULL) {
        fprintf(stderr, "agg_perf: warning: -g %s: cannot start gnuplot\n", o->png);
        return;
    }
    fprintf(gp, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) "
                "{ set terminal pngcairo noenhanced size 1200,%d font ',10' } "
                "else { set terminal png noenhanced size 1200,%d }\n", 60 + 400 * ncolls,
            60 + 400 * ncolls);
    fprintf(gp, "set output ");
    perf_gp_quote(gp, o->png);
    fprintf(gp, "\n");
    perf_plot_data(gp, e, rows, nrows, colls);
    snprintf(title, sizeof(title), "agg_perf: %d ranks, %s %s, out-of-place, %s of %d "
             "rounds, %s calls", e->size, o->type->name, perf_ops[o->op].name,
             o->use_min ? "min" : "median", o->rounds, o->blocking ? "blocking" : "non-blocking");
    fprintf(gp, "set multiplot layout %d,2 title '%s'\n", ncolls, title);
    /* x: a tick every 8x, labelled 8, 64, 512, 4ki, ... 16Mi; the range is the data's */
    fprintf(gp, "set logscale xy\nset xtics 8\nset format x '%%.0b%%B'\n"
                "set autoscale xfix\nset xlabel 'size (B)'\n"
                "set grid\nset key top left\nset datafile missing 'nan'\n");
    perf_plot_panels(gp, rows, nrows, colls);
    fprintf(gp, "unset multiplot\n");
    status = pclose(gp);
    if (status != 0) {
        fprintf(stderr, "agg_perf: warning: gnuplot failed writing %s (status %d)\n", o->png,
                status);
    } else {
        printf("# plot written to %s\n", o->png);
    }
}
