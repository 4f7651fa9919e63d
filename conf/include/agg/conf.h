/*
 * Every setting of the stack, declared once in agg_conf_table (conf/agg_conf_table.c).
 * Values are resolved in the order default < libconfig file < environment
 * < command line; each value remembers where it came from.
 */
#ifndef AGG_CONF_H
#define AGG_CONF_H

#include <stdio.h>
#include "agg/am.h"
#include "agg/status.h"

typedef enum agg_conf_id {
    /* shared by every part */
    AGG_CONF_LOG_LEVEL,            /* SHARP_COLL_LOG_LEVEL */
    AGG_CONF_AM_ADDR,              /* AGG_AM_ADDR host:port of aggmgr */
    AGG_CONF_AM_KEY_FILE,          /* AGG_AM_KEY_FILE the shared secret, off loopback */
    AGG_CONF_CONNECT_TIMEOUT_MS,   /* AGG_CONNECT_TIMEOUT_MS */
    AGG_CONF_SPIN_COUNT,           /* AGG_SPIN_COUNT polls before a waiter sleeps */
    /* client library (libsharp_coll role) */
    AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST, /* SHARP_COLL_JOB_QUOTA_PAYLOAD_PER_OST */
    AGG_CONF_JOB_QUOTA_OSTS,       /* SHARP_COLL_JOB_QUOTA_OSTS */
    AGG_CONF_JOB_QUOTA_MAX_GROUPS, /* SHARP_COLL_JOB_QUOTA_MAX_GROUPS */
    AGG_CONF_OSTS_PER_GROUP,       /* SHARP_COLL_OSTS_PER_GROUP */
    AGG_CONF_ENABLE_SAT,           /* SHARP_COLL_ENABLE_SAT */
    AGG_CONF_SAT_THRESHOLD,        /* SHARP_COLL_SAT_THRESHOLD */
    AGG_CONF_SAT_LOCK_BATCH_SIZE,  /* SHARP_COLL_SAT_LOCK_BATCH_SIZE, 0 = unlimited */
    AGG_CONF_LOCK_ON_COMM_INIT,    /* SHARP_COLL_LOCK_ON_COMM_INIT */
    AGG_CONF_SAT_LOCK_RETRIES,     /* AGG_SAT_LOCK_RETRIES */
    AGG_CONF_SAT_LOCK_RETRY_US,    /* AGG_SAT_LOCK_RETRY_US */
    AGG_CONF_PIPELINE_DEPTH,       /* SHARP_COLL_PIPELINE_DEPTH: SAT chunks in flight */
    AGG_CONF_SAT_CHUNK,            /* AGG_SAT_CHUNK_SIZE */
    AGG_CONF_SAT_ZCOPY,            /* AGG_SAT_ZCOPY */
    AGG_CONF_RANK_PROGRESS,        /* AGG_RANK_PROGRESS */
    AGG_CONF_REPRODUCIBLE,         /* AGG_REPRODUCIBLE */
    AGG_CONF_PLACEMENT,            /* AGG_PLACEMENT packed|spread */
    AGG_CONF_COLL_TIMEOUT_MS,      /* AGG_COLL_TIMEOUT_MS */
    AGG_CONF_TCP_LANES,            /* AGG_TCP_LANES connections per SAT member over TCP */
    AGG_CONF_NET_RESEND_MS,        /* AGG_NET_RESEND_MS a fragment unanswered over TCP goes again */
    AGG_CONF_ENABLE_CUDA,          /* SHARP_COLL_ENABLE_CUDA -1 auto, 0, 1 */
    AGG_CONF_GPU_DIRECT_RDMA,      /* SHARP_COLL_ENABLE_GPU_DIRECT_RDMA -1 auto, 0, 1 */
    AGG_CONF_GPU_BACKEND,          /* AGG_GPU_BACKEND auto|cuda|rocm */
    AGG_CONF_GPU_STAGE_CHUNK,      /* AGG_GPU_STAGE_CHUNK bytes per staging copy */
    AGG_CONF_GPU_STAGE_DEPTH,      /* AGG_GPU_STAGE_DEPTH staging chunks in flight */
    AGG_CONF_GPU_HOST_REDUCE_MIN,  /* AGG_GPU_HOST_REDUCE_MIN bytes: host path reduces on the device */
    /* hcoll_shim (HCOLL role) */
    AGG_CONF_HCOLL_ENABLE_SHARP,   /* HCOLL_ENABLE_SHARP 0..4 */
    AGG_CONF_HCOLL_SHARP_NP,       /* HCOLL_SHARP_NP */
    AGG_CONF_HCOLL_ALLREDUCE_SHARP_MAX, /* HCOLL_ALLREDUCE_SHARP_MAX, 0 = no limit */
    AGG_CONF_HCOLL_LARGE_ALLREDUCE_ALG, /* HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG */
    AGG_CONF_HCOLL_ZCOPY_TUNE,     /* HCOLL_ALLREDUCE_ZCOPY_TUNE static|dynamic */
    AGG_CONF_HCOLL_SBGP,           /* HCOLL_SBGP */
    AGG_CONF_HCOLL_BCOL,           /* HCOLL_BCOL */
    AGG_CONF_HCOLL_MAIN_IB,        /* HCOLL_MAIN_IB device:port */
    AGG_CONF_HCOLL_HYBRID_LB,      /* HCOLL_ALLREDUCE_HYBRID_LB */
    AGG_CONF_HCOLL_HYBRID_FRAG,    /* HCOLL_HYBRID_AR_LB_FRAG_THRESH */
    AGG_CONF_GROUP_ALLOC_THRESHOLD, /* SHARP_COLL_NUM_COLL_GROUP_RESOURCE_ALLOC_THRESHOLD */
    AGG_CONF_NET_RETRY_CALLS,      /* AGG_NET_RETRY_CALLS */
    AGG_CONF_SHIM_DISABLE,         /* AGG_SHIM_DISABLE */
    AGG_CONF_STATS,                /* AGG_STATS */
    /* aggmgr */
    AGG_CONF_AM_TOPOLOGY,          /* AGG_AM_TOPOLOGY ibnetdiscover file, "" = built-in fat tree */
    AGG_CONF_AM_FAT_TREE_LEAVES,
    AGG_CONF_AM_FAT_TREE_SPINES,
    AGG_CONF_AM_FAT_TREE_HOSTS_PER_LEAF,
    AGG_CONF_AM_MAX_JOBS,
    AGG_CONF_AM_LLT_QUOTA_PERCENT, /* share of each AN a job gets by default */
    AGG_CONF_AM_SIM_TIMEOUT_MS,    /* how long aggmgr waits for a switchsim's answer */
    AGG_CONF_AM_JOURNAL,           /* AGG_AM_JOURNAL file of jobs and groups, "" = none */
    AGG_CONF_AM_JOURNAL_SYNC,      /* AGG_AM_JOURNAL_SYNC change|batch|none */
    AGG_CONF_AM_JOURNAL_MAX,       /* AGG_AM_JOURNAL_MAX bytes before it is compacted */
    AGG_CONF_AM_RESTORE_GRACE_MS,  /* AGG_AM_RESTORE_GRACE_MS a restored job waits for its client */
    AGG_CONF_AM_SIM_GRACE_MS,      /* AGG_AM_SIM_GRACE_MS a switchsim's groups wait for it */
    AGG_CONF_AM_CLIENT_MAX_CONNS,  /* AGG_AM_CLIENT_MAX_CONNS control connections per address */
    AGG_CONF_AM_CLIENT_MAX_JOBS,   /* AGG_AM_CLIENT_MAX_JOBS jobs per address */
    AGG_CONF_AM_CLIENT_MAX_ADAPTERS, /* AGG_AM_CLIENT_MAX_ADAPTERS adapters per address, 0 = all */
    AGG_CONF_AN_OSTS,              /* OSTs per aggregation node */
    AGG_CONF_AN_PAYLOAD_PER_OST,   /* default (and largest) payload per OST of an AN */
    AGG_CONF_AN_MAX_GROUPS,        /* groups per aggregation node */
    AGG_CONF_AN_SAT_FLOWS,         /* SAT groups an aggregation node serves at once */
    AGG_CONF_AN_BUFFER_MB,         /* accumulator memory of an aggregation node */
    /* switchsim */
    AGG_CONF_SIM_WORKERS,          /* AGG_SIM_WORKERS reduction threads, 0 = one per core */
    AGG_CONF_SIM_DATA_ADDR,        /* AGG_SIM_DATA_ADDR TCP data port for other hosts' ranks */
    AGG_CONF_SIM_SWITCHES,         /* AGG_SIM_SWITCHES which switches this switchsim hosts */
    AGG_CONF_SIM_FAULTS,           /* AGG_SIM_FAULTS faults injected on the data port */
    AGG_CONF_SIM_AM_RETRY_MS,      /* AGG_SIM_AM_RETRY_MS how long switchsim waits for aggmgr's return */
    AGG_CONF__COUNT
} agg_conf_id_t;

typedef enum agg_conf_type {
    AGG_CONF_T_INT,    /* integer with [min, max]; optionally 0 allowed besides */
    AGG_CONF_T_BOOL,   /* 0/1, also accepts y/n, yes/no, true/false, on/off */
    AGG_CONF_T_STRING, /* free text */
    AGG_CONF_T_ADDR,   /* host:port, port 0..65535 */
    AGG_CONF_T_ENUM,   /* one of the words in `choices`; i is its index */
} agg_conf_type_t;

/* Which programs read a setting (a bit mask); the dump groups by it. */
enum {
    AGG_CONF_SCOPE_CLIENT  = 1u << 0,
    AGG_CONF_SCOPE_SHIM    = 1u << 1,
    AGG_CONF_SCOPE_MANAGER = 1u << 2,
    AGG_CONF_SCOPE_SIM     = 1u << 3,
    AGG_CONF_SCOPE_ALL     = 0xfu,
};

enum {
    AGG_CONF_F_RELOADABLE = 1u << 0, /* takes effect on SIGHUP in the daemons */
    AGG_CONF_F_ZERO_OK    = 1u << 1, /* 0 ("default") allowed outside [min, max] */
};

typedef struct agg_conf_row { /* agg_conf_table[id]: its id is its index */
    const char     *key;        /* name in libconfig files, e.g. "log_level" */
    const char     *env[3];     /* environment names, NULL-terminated */
    const char     *defval;     /* default, as a string */
    agg_conf_type_t type;
    long long       min, max;   /* for AGG_CONF_T_INT */
    const char     *choices;    /* for AGG_CONF_T_ENUM: "word|word|...", case-insensitive */
    unsigned        scope;
    unsigned        flags;
    const char     *doc;
} agg_conf_row_t;

extern const agg_conf_row_t agg_conf_table[AGG_CONF__COUNT];

static inline agg_conf_id_t agg_conf_row_id(const agg_conf_row_t *row)
{
    return (agg_conf_id_t)(row - agg_conf_table);
}

typedef enum agg_conf_source {
    AGG_CONF_SRC_DEFAULT,
    AGG_CONF_SRC_FILE,
    AGG_CONF_SRC_ENV,
    AGG_CONF_SRC_CMDLINE,
} agg_conf_source_t;

typedef struct agg_conf_value {
    long long         i;          /* INT and BOOL */
    char              s[256];     /* STRING and ADDR, and the text of every value */
    agg_conf_source_t source;
    char              where[256]; /* "file.conf:12", "env SHARP_COLL_LOG_LEVEL", ... */
} agg_conf_value_t;

typedef struct agg_conf {
    agg_conf_value_t v[AGG_CONF__COUNT];
} agg_conf_t;

/*
 * A daemon's SIGHUP: the settings of `scope` that differ in `fresh` (the
 * file and environment read again) from `now` are each named and logged:
 * reloadable ones (AGG_CONF_F_RELOADABLE) applied to `now` (the log level
 * first), the others a warning that `who` must restart for them; the
 * command line's values hold. Returns how many changed.
 */
int agg_conf_reload(agg_conf_t *now, const agg_conf_t *fresh, unsigned scope, const char *who);

/* Fills every value with its default. Cannot fail: the table's defaults are tested. */
void agg_conf_init(agg_conf_t *conf);

/*
 * Reads a libconfig file over the current values. Unknown keys, wrong types
 * and out-of-range values fail; err receives "FILE:LINE: what was expected".
 * Returns AGG_ERR_IO (cannot open), AGG_ERR_PARSE (syntax) or AGG_ERR_CONFIG
 * (a bad setting); on any error conf is left unchanged.
 */
agg_status_t agg_conf_load_file(agg_conf_t *conf, const char *path, char *err,
                                 size_t errlen);

/*
 * Applies the environment (envp: NULL-terminated "NAME=value" strings, e.g.
 * environ; NULL means environ) over the current values. An invalid value
 * fails with AGG_ERR_CONFIG and err naming the variable, the value and what
 * was expected; conf is then left unchanged.
 */
agg_status_t agg_conf_load_env(agg_conf_t *conf, char *const *envp, char *err,
                                size_t errlen);

/*
 * Sets one value from text (e.g. a command-line flag); validates like the
 * others. where (e.g. "--listen") is recorded in value.where; NULL records the
 * source's name. Returns AGG_ERR_CONFIG for invalid text (conf unchanged),
 * AGG_ERR_INVALID_PARAM for an unknown id.
 */
agg_status_t agg_conf_set(agg_conf_t *conf, agg_conf_id_t id, const char *text,
                          agg_conf_source_t source, const char *where,
                          char *err, size_t errlen);

/*
 * The usual sequence for a program: defaults, then the file named by
 * `path` or, when path is NULL, by AGG_CONFIG_FILE in envp if set and not
 * empty, then the environment (envp, NULL meaning environ). conf is replaced
 * only when everything was valid.
 */
agg_status_t agg_conf_load(agg_conf_t *conf, const char *path, char *const *envp,
                           char *err, size_t errlen);

long long   agg_conf_int(const agg_conf_t *conf, agg_conf_id_t id);
const char *agg_conf_str(const agg_conf_t *conf, agg_conf_id_t id);

/* The row of a key or an environment name; NULL if none. */
const agg_conf_row_t *agg_conf_find_key(const char *key);
const agg_conf_row_t *agg_conf_find_env(const char *name);

/*
 * For every variable in envp that starts with SHARP_COLL_, HCOLL_ or AGG_ and
 * is not declared (AGG_CONFIG_FILE is known), calls warn() once with a
 * message such as: "unknown variable SHARP_COLL_LOG_LEVLE=3 ignored; did you
 * mean SHARP_COLL_LOG_LEVEL?". envp NULL means environ; warn NULL logs the
 * message with agg_warn(). Returns how many were unknown.
 */
int agg_conf_check_env(char *const *envp, void (*warn)(const char *msg, void *arg),
                       void *arg);

/*
 * Prints every setting of the given scopes: key, environment names, current
 * value, where it came from, and its doc (with range and default).
 */
void agg_conf_dump(const agg_conf_t *conf, unsigned scope_mask, FILE *out);

/* Where the settings say the aggregation manager is (agg/am.h). */
agg_am_target_t agg_conf_am_target(const agg_conf_t *conf);

/*
 * Writes an example libconfig file: `header` (comment lines), then every
 * setting of the scopes at its default, each after its doc as a comment.
 * conf/aggmgr.conf and conf/libagg.conf are written by this (agg_info -e).
 */
void agg_conf_write_example(unsigned scope_mask, const char *header, FILE *out);

#endif
