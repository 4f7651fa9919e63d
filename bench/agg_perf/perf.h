/*
 * agg_perf's internal header: the types the parts share and what each part
 * offers the others. The tool itself is described in perf_main.c.
 */
#ifndef AGG_PERF_PERF_H
#define AGG_PERF_PERF_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#include "agg/agg.h"
#include "shim_host.h"

/*
 * Default iteration counts: enough calls that small sizes are not timer
 * noise, few enough that 16 MiB on 4 ranks over 2 cores, four paths and
 * three rounds, stays within a few minutes.
 */
#define PERF_ITER_BYTES  (64u << 20) /* bytes per timed loop, when -n is not given */
#define PERF_ITERS_MIN   5
#define PERF_ITERS_MAX   500
#define PERF_WARMUP_MIN  1
#define PERF_WARMUP_MAX  20
#define PERF_DEPTH_MAX   64 /* -W: non-blocking calls in flight */
#define PERF_ROUNDS_MAX  99

typedef enum perf_path_id {
    PERF_MPI, PERF_HOST, PERF_LLT, PERF_SAT, PERF_PATH__COUNT
} perf_path_id_t;
typedef enum perf_op_id { PERF_SUM, PERF_PROD, PERF_MIN, PERF_MAX, PERF_OP__COUNT } perf_op_id_t;

typedef struct perf_type {
    const char   *name;   /* nccl-tests' name */
    agg_dtype_t   dtype;
    int           is_signed;
    double        exact;  /* largest sum the type holds exactly */
    MPI_Datatype (*mpi)(void); /* NULL: MPI has no such type */
} perf_type_t;

typedef struct perf_op {
    const char *name;
    agg_op_t    agg;
    MPI_Op    (*mpi)(void);
} perf_op_t;

typedef struct perf_opts {
    size_t             min_bytes, max_bytes;
    size_t             factor;    /* 0: add `increment` instead */
    size_t             increment;
    int                iters, warmup; /* -1: by size */
    int                check, blocking, root, depth, rounds, use_min;
    const perf_type_t *type;
    perf_op_id_t       op;
    unsigned           colls;     /* bit per agg_coll_type_t */
    unsigned           paths;     /* bit per perf_path_id_t */
    const char        *png, *table;
    const char        *prof;      /* -P: each rank's profile of the timed loops, to prof.RANK */
    size_t             span;      /* values of a sum stay below this (perf_gen) */
} perf_opts_t;

/* What the run holds: communicators, libagg handles, buffers. */
typedef struct perf_env {
    int               rank, size, local_size;
    MPI_Comm          ctl;   /* timing barriers and agreement, never timed */
    MPI_Comm          mpi;   /* the mpi path */
    MPI_Comm          host;  /* the host path (shim_host_allreduce wants a private one) */
    MPI_Comm          oob;   /* libagg's out-of-band channel */
    shim_host_tune_t  tune;
    agg_context_t    *actx;
    agg_comm_t       *acomm;
    unsigned          have;  /* paths that can run, bit per perf_path_id_t */
    char             *sbuf, *rbuf, *ebuf; /* input, output, expected output */
    FILE             *table;
} perf_env_t;

/* One call's arguments, as every path needs them. */
typedef struct perf_call {
    agg_coll_type_t    coll;
    const perf_type_t *type;
    perf_op_id_t       op;
    int                root;
    int                in_place;
    const void        *sbuf;
    void              *rbuf;
    size_t             count; /* elements per member (allgather, reduce_scatter: one block) */
} perf_call_t;

typedef union perf_req {
    MPI_Request    mpi;
    agg_request_t *agg;
} perf_req_t;

/*
 * A path: says why it cannot run a collective (NULL: it can), starts a call
 * (blocking when req is NULL, else leaves a request in *req) and waits for a
 * request. start and wait return 0, a negative agg_status_t or a positive
 * MPI error code.
 */
typedef struct perf_path_ops {
    const char *(*skip)(const perf_env_t *e, agg_coll_type_t coll, const perf_type_t *t);
    int         (*start)(perf_env_t *e, const perf_call_t *c, perf_req_t *req);
    int         (*wait)(perf_env_t *e, perf_req_t *req);
} perf_path_ops_t;

/* One (path, size, mode) measurement. */
typedef struct perf_cell {
    double    usec;  /* < 0: not run */
    long long wrong; /* -1: not checked */
    int       rc;
} perf_cell_t;

/* One printed row (rank 0 keeps them for -g). */
typedef struct perf_row {
    agg_coll_type_t coll;
    perf_path_id_t  path;
    size_t          bytes, count;
    perf_cell_t     cell[2]; /* out-of-place, in-place */
} perf_row_t;

/* The shape of a collective at one size, on this member. */
typedef struct perf_shape {
    agg_coll_type_t coll;
    size_t          bytes;   /* the size column: all members' data for allgather, reduce_scatter */
    size_t          count;   /* elements per member, the count column */
    size_t          in_len;  /* input elements this member holds */
    size_t          out_len; /* result elements it checks (0: none) */
} perf_shape_t;

/* What rank 0 gathers over the run, for the summaries, the plot and the exit code. */
typedef struct perf_results {
    perf_row_t *rows;
    size_t      n, cap;
    double      bw[AGG_COLL__COUNT][PERF_PATH__COUNT];
    int         bw_n[AGG_COLL__COUNT][PERF_PATH__COUNT];
    long long   wrong[AGG_COLL__COUNT][PERF_PATH__COUNT];
    int         failed;
} perf_results_t;

extern int perf_rank; /* this process's rank: only rank 0 prints */
extern const char *const perf_path_names[PERF_PATH__COUNT];
extern const char *const perf_coll_names[AGG_COLL__COUNT];
extern const perf_op_t perf_ops[PERF_OP__COUNT];
extern const perf_path_ops_t perf_paths[PERF_PATH__COUNT];

/* perf_main.c */

/* Prints on stdout from rank 0; every rank calls it at the same point. */
void perf_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "agg_perf: " and the message on stderr from rank 0. */
void perf_arg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* perf_opts.c */

/*
 * Fills *o from the command line (nranks bounds -r). Returns 0 to run, 1 to
 * exit successfully (-h), -1 on a bad option (said on stderr by rank 0).
 */
int perf_parse_args(int argc, char **argv, int nranks, perf_opts_t *o);

/* perf_path.c */

/* Whether coll reduces (allreduce, reduce, reduce_scatter) rather than moves data. */
int perf_is_reduction(agg_coll_type_t coll);

/* Whether path p has an in-place form of coll. */
int perf_has_in_place(perf_path_id_t p, agg_coll_type_t coll);

/* Describes a start/wait return code into buf (len bytes); returns buf. */
const char *perf_rc_string(int rc, char *buf, size_t len);

/* Sets up libagg for the llt and sat paths asked for; marks in e->have those that can run. */
void perf_agg_setup(const perf_opts_t *o, perf_env_t *e);

/* perf_cell.c */

/* The shape of coll at `bytes` requested bytes; count 0: too small to run. */
perf_shape_t perf_shape(const perf_opts_t *o, const perf_env_t *e, agg_coll_type_t coll,
                        size_t bytes);

/* Fills sbuf with this member's input and ebuf with the result it must see. */
void perf_shape_fill(const perf_opts_t *o, perf_env_t *e, const perf_shape_t *s);

/* Times one (path, in_place) cell and, when `check`, checks one more call. Collective. */
perf_cell_t perf_cell_run(const perf_opts_t *o, perf_env_t *e, perf_path_id_t p,
                          const perf_shape_t *s, int in_place, int check);

/* The cell of the median (or least) time of n runs, wrong elements added up; reorders runs. */
perf_cell_t perf_cell_pick(perf_cell_t *runs, int n, int use_min);

/* perf_print.c */

/* A row's bus bandwidth in GB/s, mode m (0: out-of-place, 1: in-place), on n ranks. */
double perf_busbw(const perf_row_t *r, int m, int n);

/* The column headings of coll's table. */
void perf_print_table_header(agg_coll_type_t coll);

/* Prints row r on stdout and in e->table; mpi: the mpi path's row at that size, or NULL. */
void perf_print_row(const perf_opts_t *o, const perf_env_t *e, const perf_row_t *r,
                    const perf_row_t *mpi);

/* The wrong-value and bandwidth summary lines of coll, for the paths in `paths`. */
void perf_print_summary(const perf_opts_t *o, agg_coll_type_t coll, unsigned paths,
                        const perf_results_t *res);

/* Whether prog is an executable in $PATH. */
int perf_in_path(const char *prog);

/* Draws time and busbw against size for the rows into o->png with gnuplot (-g). */
/*
 * The sampling profile (-P, perf_prof.c): start it (-1 where it cannot run),
 * take samples only between sampling(1) and sampling(0), write FILE.RANK.
 */
int perf_prof_start(void);
void perf_prof_sampling(int on);
int perf_prof_write(const char *file, int rank);

void perf_plot(const perf_opts_t *o, const perf_env_t *e, const perf_row_t *rows,
               size_t nrows);

#endif
