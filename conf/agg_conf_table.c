/*
 * The settings of the whole stack, one row each. Parsing, validation, the
 * agg_info dump, the example configuration files and the unit test that
 * round-trips every default all work from this table, so a new setting
 * needs one row here, one id in conf.h, and nothing else.
 *
 * Names follow what users of SHARP and HCOLL already type: a SHARP_COLL_ or
 * HCOLL_ variable keeps its documented meaning and default unless the doc
 * says otherwise; settings this project adds are called AGG_*.
 */
#include "agg/conf.h"

#define AGG__KIB 1024LL

const agg_conf_row_t agg_conf_table[AGG_CONF__COUNT] = {
    /* ---- shared by every part ---------------------------------------- */
    [AGG_CONF_LOG_LEVEL] = {
        .id     = AGG_CONF_LOG_LEVEL,
        .key    = "log_level",
        .env    = {"SHARP_COLL_LOG_LEVEL", NULL},
        .defval = "2",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 5,
        .scope  = AGG_CONF_SCOPE_ALL,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Log verbosity: 0 fatal, 1 error, 2 warn, 3 info, 4 debug, "
                  "5 trace.",
    },
    [AGG_CONF_AM_ADDR] = {
        .id     = AGG_CONF_AM_ADDR,
        .key    = "am_addr",
        .env    = {"AGG_AM_ADDR", NULL},
        .defval = "127.0.0.1:6126",
        .type   = AGG_CONF_T_ADDR,
        .scope  = AGG_CONF_SCOPE_ALL,
        .doc    = "host:port of the aggregation manager's control port. "
                  "aggmgr listens there; clients and switchsim connect there. "
                  "IPv6 addresses are written in brackets, e.g. [::1]:6126.",
    },
    [AGG_CONF_CONNECT_TIMEOUT_MS] = {
        .id     = AGG_CONF_CONNECT_TIMEOUT_MS,
        .key    = "connect_timeout_ms",
        .env    = {"AGG_CONNECT_TIMEOUT_MS", NULL},
        .defval = "3000",
        .type   = AGG_CONF_T_INT,
        .min    = 10,
        .max    = 600000,
        .scope  = AGG_CONF_SCOPE_ALL,
        .doc    = "Milliseconds to wait for a connection to the aggregation "
                  "manager before giving up with \"cannot connect to the "
                  "manager\" (AGG_ERR_SESSION_INIT).",
    },
    [AGG_CONF_SPIN_COUNT] = {
        .id     = AGG_CONF_SPIN_COUNT,
        .key    = "spin_count",
        .env    = {"AGG_SPIN_COUNT", NULL},
        .defval = "512",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 100000000,
        .scope  = AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SIM,
        .doc    = "Polls of a shared-memory slot before the waiter sleeps on "
                  "a futex. Higher values lower latency and burn a core; 0 "
                  "sleeps at once.",
    },

    /* ---- client library (libsharp_coll role) ------------------------- */
    [AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST] = {
        .id     = AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST,
        .key    = "job_quota_payload_per_ost",
        .env    = {"SHARP_COLL_JOB_QUOTA_PAYLOAD_PER_OST", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 128,
        .max    = 4096,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .flags  = AGG_CONF_F_ZERO_OK,
        .doc    = "LLT payload bytes per OST the job asks for; 0 takes the "
                  "aggregation node's default (an_payload_per_ost). Larger "
                  "messages are cut into fragments of this size and "
                  "pipelined.",
    },
    [AGG_CONF_JOB_QUOTA_OSTS] = {
        .id     = AGG_CONF_JOB_QUOTA_OSTS,
        .key    = "job_quota_osts",
        .env    = {"SHARP_COLL_JOB_QUOTA_OSTS", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 65535,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "OSTs the job asks for on each aggregation node; 0 takes "
                  "the manager's default share (am_llt_quota_percent).",
    },
    [AGG_CONF_JOB_QUOTA_MAX_GROUPS] = {
        .id     = AGG_CONF_JOB_QUOTA_MAX_GROUPS,
        .key    = "job_quota_max_groups",
        .env    = {"SHARP_COLL_JOB_QUOTA_MAX_GROUPS", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 65535,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Groups (offloaded communicators) the job asks for; 0 "
                  "takes the manager's default share "
                  "(am_llt_quota_percent).",
    },
    [AGG_CONF_OSTS_PER_GROUP] = {
        .id     = AGG_CONF_OSTS_PER_GROUP,
        .key    = "osts_per_group",
        .env    = {"SHARP_COLL_OSTS_PER_GROUP", NULL},
        .defval = "8",
        .type   = AGG_CONF_T_INT,
        .min    = 2,
        .max    = 512,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "OSTs each group takes from the job's quota: how many "
                  "fragments of one communicator can be in flight at once.",
    },
    [AGG_CONF_ENABLE_SAT] = {
        .id     = AGG_CONF_ENABLE_SAT,
        .key    = "enable_sat",
        .env    = {"SHARP_COLL_ENABLE_SAT", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Allow streaming aggregation (SAT) for large messages. "
                  "SAT is not built yet: the setting is accepted so job "
                  "scripts keep working, but every size uses the LLT.",
    },
    [AGG_CONF_SAT_THRESHOLD] = {
        .id     = AGG_CONF_SAT_THRESHOLD,
        .key    = "sat_threshold",
        .env    = {"SHARP_COLL_SAT_THRESHOLD", NULL},
        .defval = "16384",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = AGG__KIB * AGG__KIB * AGG__KIB * AGG__KIB, /* 1 TiB */
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Message bytes at and above which SAT would be used when "
                  "enable_sat is on. SAT is not built yet, so this has no "
                  "effect: every size uses the LLT.",
    },
    [AGG_CONF_COLL_TIMEOUT_MS] = {
        .id     = AGG_CONF_COLL_TIMEOUT_MS,
        .key    = "coll_timeout_ms",
        .env    = {"AGG_COLL_TIMEOUT_MS", NULL},
        .defval = "30000",
        .type   = AGG_CONF_T_INT,
        .min    = 100,
        .max    = 3600000,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "A collective that sees no progress for this many "
                  "milliseconds fails with a timeout instead of hanging.",
    },

    /* ---- hcoll_shim (HCOLL role) ------------------------------------- */
    [AGG_CONF_HCOLL_ENABLE_SHARP] = {
        .id     = AGG_CONF_HCOLL_ENABLE_SHARP,
        .key    = "hcoll_enable_sharp",
        .env    = {"HCOLL_ENABLE_SHARP", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 4,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "0 off; 1 use the network when available (one warning and "
                  "the host path otherwise); 2 as 1, but an unavailable "
                  "manager is an error; 3 force on every communicator, "
                  "whatever its size; 4 as 3 (barrier offload arrives "
                  "later).",
    },
    [AGG_CONF_HCOLL_SHARP_NP] = {
        .id     = AGG_CONF_HCOLL_SHARP_NP,
        .key    = "hcoll_sharp_np",
        .env    = {"HCOLL_SHARP_NP", NULL},
        .defval = "4",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 1000000,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "Smallest communicator offloaded when hcoll_enable_sharp is "
                  "1 or 2. HCOLL counts hosts; here it counts ranks, since "
                  "every rank has its own simulated HCA.",
    },
    [AGG_CONF_HCOLL_ALLREDUCE_SHARP_MAX] = {
        .id     = AGG_CONF_HCOLL_ALLREDUCE_SHARP_MAX,
        .key    = "hcoll_allreduce_sharp_max",
        .env    = {"HCOLL_ALLREDUCE_SHARP_MAX", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 1LL << 50,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "Largest allreduce, in bytes, sent to the network; larger "
                  "ones take the host path. 0 = no limit: this project "
                  "pipelines any size through the LLT (HCOLL's default is "
                  "OSTs x payload per OST).",
    },

    /* ---- aggmgr ------------------------------------------------------- */
    [AGG_CONF_AM_TOPOLOGY] = {
        .id     = AGG_CONF_AM_TOPOLOGY,
        .key    = "am_topology",
        .env    = {"AGG_AM_TOPOLOGY", NULL},
        .defval = "",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .doc    = "ibnetdiscover output describing the fabric; empty builds "
                  "the fat tree described by the am_fat_tree_* settings.",
    },
    [AGG_CONF_AM_FAT_TREE_LEAVES] = {
        .id     = AGG_CONF_AM_FAT_TREE_LEAVES,
        .key    = "am_fat_tree_leaves",
        .env    = {"AGG_AM_FAT_TREE_LEAVES", NULL},
        .defval = "32",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 4096,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .doc    = "Leaf switches of the built-in fat tree (used when "
                  "am_topology is empty).",
    },
    [AGG_CONF_AM_FAT_TREE_SPINES] = {
        .id     = AGG_CONF_AM_FAT_TREE_SPINES,
        .key    = "am_fat_tree_spines",
        .env    = {"AGG_AM_FAT_TREE_SPINES", NULL},
        .defval = "4",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 4096,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .doc    = "Spine switches of the built-in fat tree (used when "
                  "am_topology is empty).",
    },
    [AGG_CONF_AM_FAT_TREE_HOSTS_PER_LEAF] = {
        .id     = AGG_CONF_AM_FAT_TREE_HOSTS_PER_LEAF,
        .key    = "am_fat_tree_hosts_per_leaf",
        .env    = {"AGG_AM_FAT_TREE_HOSTS_PER_LEAF", NULL},
        .defval = "2",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 4096,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .doc    = "Hosts (simulated HCAs) under each leaf switch of the "
                  "built-in fat tree.",
    },
    [AGG_CONF_AM_MAX_JOBS] = {
        .id     = AGG_CONF_AM_MAX_JOBS,
        .key    = "am_max_jobs",
        .env    = {"AGG_AM_MAX_JOBS", NULL},
        .defval = "64",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 100000,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .doc    = "Jobs the manager serves at once.",
    },
    [AGG_CONF_AM_LLT_QUOTA_PERCENT] = {
        .id     = AGG_CONF_AM_LLT_QUOTA_PERCENT,
        .key    = "am_llt_quota_percent",
        .env    = {"AGG_AM_LLT_QUOTA_PERCENT", NULL},
        .defval = "20",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 100,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Share, in percent, of each aggregation node's OSTs and "
                  "groups a job gets when it asks for the default quota.",
    },
    [AGG_CONF_AN_OSTS] = {
        .id     = AGG_CONF_AN_OSTS,
        .key    = "an_osts",
        .env    = {"AGG_AN_OSTS", NULL},
        .defval = "1024",
        .type   = AGG_CONF_T_INT,
        .min    = 2,
        .max    = 1000000,
        .scope  = AGG_CONF_SCOPE_MANAGER | AGG_CONF_SCOPE_SIM,
        .doc    = "OSTs (outstanding operation slots) of each aggregation "
                  "node. Read by aggmgr and switchsim; give both the same "
                  "value.",
    },
    [AGG_CONF_AN_PAYLOAD_PER_OST] = {
        .id     = AGG_CONF_AN_PAYLOAD_PER_OST,
        .key    = "an_payload_per_ost",
        .env    = {"AGG_AN_PAYLOAD_PER_OST", NULL},
        .defval = "4096",
        .type   = AGG_CONF_T_INT,
        .min    = 128,
        .max    = 4096,
        .scope  = AGG_CONF_SCOPE_MANAGER | AGG_CONF_SCOPE_SIM,
        .doc    = "Default, and largest, payload bytes per OST of each "
                  "aggregation node. Read by aggmgr and switchsim; give both "
                  "the same value. 4096 rather than a switch ASIC's 256-2048: "
                  "a software node has the memory, and fewer, larger "
                  "fragments halve the 32 KiB allreduce time (docs/"
                  "architecture.md).",
    },
    [AGG_CONF_AN_MAX_GROUPS] = {
        .id     = AGG_CONF_AN_MAX_GROUPS,
        .key    = "an_max_groups",
        .env    = {"AGG_AN_MAX_GROUPS", NULL},
        .defval = "256",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 100000,
        .scope  = AGG_CONF_SCOPE_MANAGER | AGG_CONF_SCOPE_SIM,
        .doc    = "Groups each aggregation node can hold at once, over all "
                  "jobs. Read by aggmgr and switchsim; give both the same "
                  "value.",
    },
};
