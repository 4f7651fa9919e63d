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
        .key    = "am_addr",
        .env    = {"AGG_AM_ADDR", NULL},
        .defval = "127.0.0.1:6126",
        .type   = AGG_CONF_T_ADDR,
        .scope  = AGG_CONF_SCOPE_ALL,
        .doc    = "host:port of the aggregation manager's control port. "
                  "aggmgr listens there; clients and switchsim connect there. "
                  "IPv6 addresses are written in brackets, e.g. [::1]:6126.",
    },
    [AGG_CONF_AM_KEY_FILE] = {
        .key    = "am_key_file",
        .env    = {"AGG_AM_KEY_FILE", NULL},
        .defval = "",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_ALL,
        .doc    = "File holding the shared secret (mode 0600); AGG_AM_SECRET, "
                  "when set, is used instead. aggmgr holding one speaks only TLS "
                  "1.3 keyed by it (a pre-shared key), to every peer, local ones "
                  "too; off loopback it must hold one. switchsim's data port off "
                  "loopback asks peers to prove it (HMAC-SHA256 over random "
                  "challenges). The secret never travels. Without one, aggmgr "
                  "serves loopback only, in plain.",
    },
    [AGG_CONF_CONNECT_TIMEOUT_MS] = {
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
        .key    = "enable_sat",
        .env    = {"SHARP_COLL_ENABLE_SAT", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Allow streaming aggregation (SAT): every communicator also "
                  "gets a group on the job's SAT tree, and allreduces of "
                  "sat_threshold bytes and more stream through it in large "
                  "chunks once the group holds the SAT lock.",
    },
    [AGG_CONF_SAT_THRESHOLD] = {
        .key    = "sat_threshold",
        .env    = {"SHARP_COLL_SAT_THRESHOLD", NULL},
        .defval = "16384",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = AGG__KIB * AGG__KIB * AGG__KIB * AGG__KIB, /* 1 TiB */
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Message bytes at and above which an allreduce uses SAT "
                  "(when enable_sat is on and the communicator has a SAT "
                  "group); smaller ones use the LLT.",
    },
    [AGG_CONF_SAT_LOCK_BATCH_SIZE] = {
        .key    = "sat_lock_batch_size",
        .env    = {"SHARP_COLL_SAT_LOCK_BATCH_SIZE", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 1000000000,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "SAT operations a communicator does before it gives the SAT "
                  "lock back; 0 keeps it until the communicator is destroyed. "
                  "1 lets several communicators take turns on the same "
                  "switches, at the price of a lock request per operation.",
    },
    [AGG_CONF_LOCK_ON_COMM_INIT] = {
        .key    = "lock_on_comm_init",
        .env    = {"SHARP_COLL_LOCK_ON_COMM_INIT", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Take the SAT lock when the communicator is created instead "
                  "of at its first SAT operation.",
    },
    [AGG_CONF_SAT_LOCK_RETRIES] = {
        .key    = "sat_lock_retries",
        .env    = {"AGG_SAT_LOCK_RETRIES", NULL},
        .defval = "3",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 1000,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Times a SAT lock request that found the lock held by another "
                  "communicator is repeated before the operation goes to the "
                  "LLT (or, when no LLT group exists, to the host path), with "
                  "the reason logged.",
    },
    [AGG_CONF_SAT_LOCK_RETRY_US] = {
        .key    = "sat_lock_retry_us",
        .env    = {"AGG_SAT_LOCK_RETRY_US", NULL},
        .defval = "100",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 10000000,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Microseconds before the first repeat of a refused SAT lock "
                  "request; each further repeat waits twice as long.",
    },
    [AGG_CONF_PIPELINE_DEPTH] = {
        .key    = "pipeline_depth",
        .env    = {"SHARP_COLL_PIPELINE_DEPTH", NULL},
        .defval = "4",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 64,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "SAT chunks a rank keeps in flight (the SAT group's OSTs).",
    },
    [AGG_CONF_SAT_CHUNK] = {
        .key    = "sat_chunk_size",
        .env    = {"AGG_SAT_CHUNK_SIZE", NULL},
        .defval = "256k",
        .type   = AGG_CONF_T_INT,
        .min    = 4 * AGG__KIB,
        .max    = 64 * AGG__KIB * AGG__KIB,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Bytes of one SAT chunk: a SAT operation streams in chunks "
                  "of this size, not cut to the LLT payload per OST. A "
                  "multiple of 8.",
    },
    [AGG_CONF_SAT_ZCOPY] = {
        .key    = "sat_zcopy",
        .env    = {"AGG_SAT_ZCOPY", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "When switchsim does the reduction (rank_progress off), let "
                  "it read SAT chunks straight from the ranks' buffers and "
                  "write the result there (process_vm_readv/writev) instead of "
                  "the ranks copying them through shared memory. Falls back to "
                  "the copy where the kernel does not allow it. Off by "
                  "default: measured with bench/bench_sat.sh (2 ranks, 2 "
                  "cores) it ran at 0.34x Open MPI from 256 KiB to 4 MiB, "
                  "against 0.89x for the copy.",
    },
    [AGG_CONF_RANK_PROGRESS] = {
        .key    = "rank_progress",
        .env    = {"AGG_RANK_PROGRESS", NULL},
        .defval = "1",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "A rank runs the aggregation node's code on the shared "
                  "segment itself: it adds its fragment into its leaf node, "
                  "and the rank whose fragment completes a node moves it up "
                  "the tree or publishes the result. Off, ranks only stage "
                  "fragments and switchsim's threads do all the node's work "
                  "(costs a wake-up of another process per fragment when no "
                  "core is free).",
    },
    [AGG_CONF_REPRODUCIBLE] = {
        .key    = "reproducible",
        .env    = {"AGG_REPRODUCIBLE", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "Aggregation nodes combine their children in a fixed order "
                  "(ranks in communicator order, then child switches), so "
                  "float results are bitwise the same from run to run "
                  "whatever order the fragments arrive in. Off, children are "
                  "combined as they arrive.",
    },
    [AGG_CONF_PLACEMENT] = {
        .key     = "placement",
        .env     = {"AGG_PLACEMENT", NULL},
        .defval  = "packed",
        .type    = AGG_CONF_T_ENUM,
        .choices = "packed|spread",
        .scope   = AGG_CONF_SCOPE_CLIENT,
        .doc     = "How ranks are placed on the adapters of a fabric that does "
                   "not name the job's hosts (the built-in fat tree): packed "
                   "fills one leaf switch after another, spread deals ranks "
                   "over the leaves in turn (deeper trees with few ranks). "
                   "Where the fabric names the hosts, each rank gets an "
                   "adapter of its own host.",
    },
    [AGG_CONF_COLL_TIMEOUT_MS] = {
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
    [AGG_CONF_TCP_LANES] = {
        .key    = "tcp_lanes",
        .env    = {"AGG_TCP_LANES", NULL},
        .defval = "4",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 8,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "TCP connections a rank opens to a switchsim on another "
                  "host for one SAT group: the chunks of a call of several "
                  "go up on each in turn and their results come back on "
                  "theirs, all driven by the calling thread; a call of one "
                  "chunk takes the first. Several flows move more than one "
                  "(tests/e2e/netns.sh measures both). LLT groups use one.",
    },
    [AGG_CONF_NET_RESEND_MS] = {
        .key    = "net_resend_ms",
        .env    = {"AGG_NET_RESEND_MS", NULL},
        .defval = "100",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 3600000,
        .scope  = AGG_CONF_SCOPE_CLIENT,
        .doc    = "A rank reaching its switchsim over TCP sends a fragment "
                  "again when its result has not come this many milliseconds "
                  "after it went (a message lost on the way, either way; "
                  "switchsim takes a fragment once and sends a result it has "
                  "again), and again after twice as long, up to "
                  "coll_timeout_ms.",
    },
    [AGG_CONF_ENABLE_CUDA] = {
        .key    = "enable_cuda",
        .env    = {"SHARP_COLL_ENABLE_CUDA", NULL},
        .defval = "-1",
        .type   = AGG_CONF_T_INT,
        .min    = -1,
        .max    = 1,
        .scope  = AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM,
        .doc    = "GPU buffers: 1 requires a GPU backend (CUDA or ROCm) and "
                  "fails the context without one; -1 loads one when a runtime "
                  "and a device are there and otherwise takes every buffer as "
                  "host memory; 0 never loads one (a buffer declared as device "
                  "memory is then refused).",
    },
    [AGG_CONF_GPU_DIRECT_RDMA] = {
        .key    = "enable_gpu_direct_rdma",
        .env    = {"SHARP_COLL_ENABLE_GPU_DIRECT_RDMA", NULL},
        .defval = "-1",
        .type   = AGG_CONF_T_INT,
        .min    = -1,
        .max    = 1,
        .scope  = AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM,
        .doc    = "Device memory registered for the network directly (dma-buf "
                  "export) instead of staged through pinned host buffers: 1 "
                  "requires it and fails agg_mem_register on device memory "
                  "that cannot be exported; -1 uses it where the transport "
                  "can and stages otherwise; 0 always stages. The shared-"
                  "memory transport cannot take a dma-buf, so its data is "
                  "staged either way.",
    },
    [AGG_CONF_GPU_BACKEND] = {
        .key     = "gpu_backend",
        .env     = {"AGG_GPU_BACKEND", NULL},
        .defval  = "auto",
        .type    = AGG_CONF_T_ENUM,
        .choices = "auto|cuda|rocm",
        .scope   = AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM,
        .doc     = "Which GPU backend to load (libagg_gpu_cuda.so or "
                   "libagg_gpu_rocm.so, next to libagg): auto tries CUDA, "
                   "then ROCm.",
    },
    [AGG_CONF_GPU_STAGE_CHUNK] = {
        .key    = "gpu_stage_chunk",
        .env    = {"AGG_GPU_STAGE_CHUNK", NULL},
        .defval = "1048576",
        .type   = AGG_CONF_T_INT,
        .min    = 4 * AGG__KIB,
        .max    = 64 * AGG__KIB * AGG__KIB,
        .scope  = AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM,
        .doc    = "Bytes per copy between a device buffer and the pinned host "
                  "buffers it is staged through: the copy of one chunk "
                  "overlaps the aggregation of the one before.",
    },
    [AGG_CONF_GPU_STAGE_DEPTH] = {
        .key    = "gpu_stage_depth",
        .env    = {"AGG_GPU_STAGE_DEPTH", NULL},
        .defval = "4",
        .type   = AGG_CONF_T_INT,
        .min    = 2,
        .max    = 64,
        .scope  = AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM,
        .doc    = "Staging chunks in flight per communicator and device "
                  "(pinned host memory: twice this many gpu_stage_chunk "
                  "bytes).",
    },
    [AGG_CONF_GPU_HOST_REDUCE_MIN] = {
        .key    = "gpu_host_reduce_min",
        .env    = {"AGG_GPU_HOST_REDUCE_MIN", NULL},
        .defval = "16777216",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 1LL << 40,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "An allreduce of device buffers that stays off the network "
                  "and runs the host ring reduces on the device from this "
                  "many bytes; smaller ones are copied to the host and "
                  "reduced there, which is faster while the copies and "
                  "kernel launches cost more than the reduction (even at 16 "
                  "MiB with 2 to 4 ranks sharing one H200).",
    },

    /* ---- hcoll_shim (HCOLL role) ------------------------------------- */
    [AGG_CONF_HCOLL_ENABLE_SHARP] = {
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
                  "whatever its size; 4 as 3, and barriers too (1 to 3 "
                  "offload allreduce, reduce, bcast, reduce-scatter and "
                  "allgather).",
    },
    [AGG_CONF_HCOLL_SHARP_NP] = {
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

    [AGG_CONF_HCOLL_LARGE_ALLREDUCE_ALG] = {
        .key    = "hcoll_large_allreduce_alg",
        .env    = {"HCOLL_BCOL_P2P_LARGE_ALLREDUCE_ALG", NULL},
        .defval = "4",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 5,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "Where large allreduces (sat_threshold bytes and more) go. "
                  "This project's numbering, chosen so the values users' "
                  "scripts set keep their meaning: 4 lets them use SAT when "
                  "enable_sat is on (else the LLT); 2 sends them to Open "
                  "MPI's host algorithm; 1, 3 and 5 are taken as 2.",
    },
    [AGG_CONF_HCOLL_ZCOPY_TUNE] = {
        .key     = "hcoll_allreduce_zcopy_tune",
        .env     = {"HCOLL_ALLREDUCE_ZCOPY_TUNE", NULL},
        .defval  = "static",
        .type    = AGG_CONF_T_ENUM,
        .choices = "static|dynamic",
        .scope   = AGG_CONF_SCOPE_SHIM,
        .doc     = "How the host path's allreduce algorithm is chosen: static "
                   "by message size, or dynamic by measuring (not "
                   "reproducible): a short measurement when the shim first "
                   "sees a communicator picks the sizes at which recursive "
                   "doubling gives way to Rabenseifner, and Rabenseifner to "
                   "ring.",
    },
    [AGG_CONF_HCOLL_SBGP] = {
        .key    = "hcoll_sbgp",
        .env    = {"HCOLL_SBGP", NULL},
        .defval = "basesmsocket,basesmuma,p2p",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "HCOLL's hierarchy levels (subgroups). Accepted so job "
                  "scripts run unchanged; every rank is a member of its "
                  "communicator's group here (the p2p, flat level), whatever "
                  "the value.",
    },
    [AGG_CONF_HCOLL_BCOL] = {
        .key    = "hcoll_bcol",
        .env    = {"HCOLL_BCOL", NULL},
        .defval = "basesmuma,basesmuma,ucx_p2p",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "HCOLL's collective components, one per level of "
                  "hcoll_sbgp. Accepted so job scripts run unchanged; not "
                  "used here.",
    },
    [AGG_CONF_HCOLL_MAIN_IB] = {
        .key    = "hcoll_main_ib",
        .env    = {"HCOLL_MAIN_IB", NULL},
        .defval = "",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_SHIM | AGG_CONF_SCOPE_CLIENT,
        .doc    = "The adapter to use, as device:port (e.g. mlx5_0:1). Ranks "
                  "are placed only on fabric adapters whose description names "
                  "that device (\"host1 mlx5_0\"); empty takes any. The port "
                  "is accepted and not used (one port per adapter here).",
    },
    [AGG_CONF_HCOLL_HYBRID_LB] = {
        .key    = "hcoll_allreduce_hybrid_lb",
        .env    = {"HCOLL_ALLREDUCE_HYBRID_LB", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "Cut offloaded allreduces larger than "
                  "hcoll_hybrid_ar_lb_frag_thresh into fragments of that "
                  "size, all in flight at once, so one rank's late start "
                  "delays only its first fragment.",
    },
    [AGG_CONF_HCOLL_HYBRID_FRAG] = {
        .key    = "hcoll_hybrid_ar_lb_frag_thresh",
        .env    = {"HCOLL_HYBRID_AR_LB_FRAG_THRESH", NULL},
        .defval = "1048576",
        .type   = AGG_CONF_T_INT,
        .min    = 4096,
        .max    = 1LL << 40,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "Fragment size, in bytes, of hcoll_allreduce_hybrid_lb.",
    },
    [AGG_CONF_GROUP_ALLOC_THRESHOLD] = {
        .key    = "group_alloc_threshold",
        .env    = {"SHARP_COLL_NUM_COLL_GROUP_RESOURCE_ALLOC_THRESHOLD", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 1000000,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "When a communicator gets its group on the tree: 0 when it "
                  "is created (MPI_Comm_dup, _split, _create; others at their "
                  "first blocking collective), N after N blocking "
                  "collectives on it, which take the host path. Lets "
                  "programs that make many communicators and use few keep "
                  "the group quota for those they use.",
    },
    [AGG_CONF_NET_RETRY_CALLS] = {
        .key    = "net_retry_calls",
        .env    = {"AGG_NET_RETRY_CALLS", NULL},
        .defval = "1000",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 100000000,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "A communicator whose group the network lost (a switchsim or "
                  "link gone) runs its collectives on the host and makes its "
                  "group again after this many blocking collectives there, "
                  "and again after as many while that fails; 0 never "
                  "(HCOLL_ENABLE_SHARP 1 and 2; at 3 and 4 the calls fail).",
    },
    [AGG_CONF_SHIM_DISABLE] = {
        .key    = "shim_disable",
        .env    = {"AGG_SHIM_DISABLE", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "1 hands every MPI call to Open MPI untouched, as if the "
                  "shim were not preloaded.",
    },
    [AGG_CONF_STATS] = {
        .key    = "stats",
        .env    = {"AGG_STATS", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_BOOL,
        .scope  = AGG_CONF_SCOPE_SHIM,
        .doc    = "1: rank 0 prints at MPI_Finalize one line per collective: "
                  "calls offloaded (LLT, SAT), calls on each host algorithm, "
                  "calls passed to MPI, and why calls were not offloaded.",
    },
    /* ---- aggmgr ------------------------------------------------------- */
    [AGG_CONF_AM_TOPOLOGY] = {
        .key    = "am_topology",
        .env    = {"AGG_AM_TOPOLOGY", NULL},
        .defval = "",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .doc    = "ibnetdiscover output describing the fabric; empty builds "
                  "the fat tree described by the am_fat_tree_* settings.",
    },
    [AGG_CONF_AM_FAT_TREE_LEAVES] = {
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
    [AGG_CONF_AM_SIM_TIMEOUT_MS] = {
        .key    = "am_sim_timeout_ms",
        .env    = {"AGG_AM_SIM_TIMEOUT_MS", NULL},
        .defval = "5000",
        .type   = AGG_CONF_T_INT,
        .min    = 100,
        .max    = 600000,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Milliseconds the manager gives a switchsim to answer a "
                  "request (lay out a group's part, tear it down, its "
                  "counters) before the request fails; the manager serves "
                  "everyone else meanwhile.",
    },
    [AGG_CONF_AM_JOURNAL] = {
        .key    = "am_journal",
        .env    = {"AGG_AM_JOURNAL", NULL},
        .defval = "",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .doc    = "File where the manager writes every job and group it "
                  "admits and ends (append-only, a checksum per record), and "
                  "reads them back when it starts: a manager killed or "
                  "restarted keeps its jobs, groups and counts, and its "
                  "switchsims keep the groups they serve. Empty: no journal; "
                  "a restart forgets everything.",
    },
    [AGG_CONF_AM_JOURNAL_SYNC] = {
        .key     = "am_journal_sync",
        .env     = {"AGG_AM_JOURNAL_SYNC", NULL},
        .defval  = "change",
        .type    = AGG_CONF_T_ENUM,
        .choices = "change|batch|none",
        .scope   = AGG_CONF_SCOPE_MANAGER,
        .flags   = AGG_CONF_F_RELOADABLE,
        .doc     = "When the journal reaches the disk: change (before the "
                   "client hears back, each time), batch (within 100 ms: a "
                   "machine that loses power may lose the last changes, a "
                   "killed manager does not) or none (when the kernel "
                   "writes it).",
    },
    [AGG_CONF_AM_JOURNAL_MAX] = {
        .key    = "am_journal_max",
        .env    = {"AGG_AM_JOURNAL_MAX", NULL},
        .defval = "4m",
        .type   = AGG_CONF_T_INT,
        .min    = 4096,
        .max    = 1LL << 40,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Bytes the journal may grow to before the manager rewrites "
                  "it as the jobs and groups that stand now (into a new "
                  "file, renamed over the old one).",
    },
    [AGG_CONF_AM_RESTORE_GRACE_MS] = {
        .key    = "am_restore_grace_ms",
        .env    = {"AGG_AM_RESTORE_GRACE_MS", NULL},
        .defval = "60000",
        .type   = AGG_CONF_T_INT,
        .min    = 100,
        .max    = 86400000,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Milliseconds a job read back from the journal waits for its "
                  "rank 0 to come back (JOB_ATTACH with the job's key); a job "
                  "nobody claims by then ended while the manager was down, "
                  "and its resources are given back.",
    },
    [AGG_CONF_AM_SIM_GRACE_MS] = {
        .key    = "am_sim_grace_ms",
        .env    = {"AGG_AM_SIM_GRACE_MS", NULL},
        .defval = "10000",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 3600000,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Milliseconds aggmgr keeps the groups of a switchsim whose "
                  "control connection closed, for it to register again (it "
                  "calls back every 200 ms, sim_am_retry_ms): the groups whose "
                  "parts it still serves go on as if nothing happened. Its "
                  "switches take no new group meanwhile. 0: its groups are "
                  "dropped at once.",
    },
    [AGG_CONF_AM_CLIENT_MAX_CONNS] = {
        .key    = "am_client_max_conns",
        .env    = {"AGG_AM_CLIENT_MAX_CONNS", NULL},
        .defval = "256",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 1024,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Control connections the manager keeps from one address "
                  "(every local process counts as one address): past it, the "
                  "quietest of that address's that holds nothing makes room, "
                  "or the new one is refused. One client cannot take the "
                  "1,024 every job needs.",
    },
    [AGG_CONF_AM_CLIENT_MAX_JOBS] = {
        .key    = "am_client_max_jobs",
        .env    = {"AGG_AM_CLIENT_MAX_JOBS", NULL},
        .defval = "16",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 100000,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Jobs whose rank 0 connects from one address, at once: "
                  "one host cannot take every job (am_max_jobs) of the "
                  "cluster.",
    },
    [AGG_CONF_AM_CLIENT_MAX_ADAPTERS] = {
        .key    = "am_client_max_adapters",
        .env    = {"AGG_AM_CLIENT_MAX_ADAPTERS", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 1000000,
        .scope  = AGG_CONF_SCOPE_MANAGER,
        .flags  = AGG_CONF_F_RELOADABLE | AGG_CONF_F_ZERO_OK,
        .doc    = "Host adapters the jobs of one address may hold together; "
                  "0: no limit (a job may take every adapter it has ranks "
                  "for).",
    },
    [AGG_CONF_AN_OSTS] = {
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
    [AGG_CONF_AN_SAT_FLOWS] = {
        .key    = "an_sat_flows",
        .env    = {"AGG_AN_SAT_FLOWS", NULL},
        .defval = "2",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 1024,
        .scope  = AGG_CONF_SCOPE_MANAGER | AGG_CONF_SCOPE_SIM,
        .doc    = "SAT groups each aggregation node serves at once (a switch "
                  "supports about 2). A communicator whose SAT group would "
                  "exceed it on some switch gets none and uses the LLT. Read "
                  "by aggmgr and switchsim; give both the same value.",
    },
    [AGG_CONF_AN_BUFFER_MB] = {
        .key    = "an_buffer_mb",
        .env    = {"AGG_AN_BUFFER_MB", NULL},
        .defval = "1024",
        .type   = AGG_CONF_T_INT,
        .min    = 1,
        .max    = 1048576,
        .scope  = AGG_CONF_SCOPE_SIM,
        .doc    = "MiB of accumulator memory each aggregation node may give "
                  "its groups (shared memory, touched only as used). A group "
                  "that does not fit is refused with \"no resource\".",
    },

    /* ---- switchsim ---------------------------------------------------- */
    [AGG_CONF_SIM_WORKERS] = {
        .key    = "sim_workers",
        .env    = {"AGG_SIM_WORKERS", NULL},
        .defval = "0",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 256,
        .scope  = AGG_CONF_SCOPE_SIM,
        .doc    = "switchsim's reduction threads; 0 = one per core it may run on "
                  "(its CPU affinity) but one, at least one. They do the nodes' work that ranks "
                  "leave to switchsim (all of it with rank_progress off); a "
                  "thread with nothing to do sleeps, and none spins while "
                  "processes outnumber cores.",
    },
    [AGG_CONF_SIM_DATA_ADDR] = {
        .key    = "sim_data_addr",
        .env    = {"AGG_SIM_DATA_ADDR", NULL},
        .defval = "",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_SIM,
        .doc    = "host:port where switchsim takes fragments over TCP from ranks "
                  "on other hosts (an address of this host they can reach; port 0 "
                  "picks one). Empty: shared memory only, ranks of other hosts "
                  "stay on the host path. Off loopback the shared secret "
                  "(am_key_file, AGG_AM_SECRET) is required.",
    },
    [AGG_CONF_SIM_SWITCHES] = {
        .key    = "sim_switches",
        .env    = {"AGG_SIM_SWITCHES", NULL},
        .defval = "all",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_SIM,
        .doc    = "Which switches of the fabric this switchsim hosts, of those no "
                  "other switchsim registered first: \"all\"; \"host\" (the switches "
                  "this host's adapters are cabled to, by the host name in the "
                  "topology's node descriptions); \"guid:G,G,...\"; or "
                  "\"name:PATTERN\" (a shell pattern on the switch's description or "
                  "id). Several switchsims split one fabric this way, linked over "
                  "TCP (sim_data_addr).",
    },
    [AGG_CONF_SIM_FAULTS] = {
        .key    = "sim_faults",
        .env    = {"AGG_SIM_FAULTS", NULL},
        .defval = "",
        .type   = AGG_CONF_T_STRING,
        .scope  = AGG_CONF_SCOPE_SIM,
        .doc    = "Faults injected on purpose on the data port, for tests: "
                  "words as tc-netem's, e.g. \"loss 1% duplicate 1% seed 7\", "
                  "\"delay 5ms 2%\", \"stall 200 at 50\", \"loss at 100\", "
                  "\"kill at 500\"; \"in\" (what it reads), \"out\" (what it "
                  "sends) or \"both\" (default) before the rules they apply "
                  "to. N counts messages that way from 1. On shared memory "
                  "only \"kill at N\" and \"stall T at N\" apply, N counting the "
                  "fragments switchsim's threads take (AGG_RANK_PROGRESS=0: all). "
                  "The same seed and traffic meet the same faults "
                  "(common/include/agg/fault.h).",
    },
    [AGG_CONF_SIM_AM_RETRY_MS] = {
        .key    = "sim_am_retry_ms",
        .env    = {"AGG_SIM_AM_RETRY_MS", NULL},
        .defval = "60000",
        .type   = AGG_CONF_T_INT,
        .min    = 0,
        .max    = 86400000,
        .scope  = AGG_CONF_SCOPE_SIM,
        .flags  = AGG_CONF_F_RELOADABLE,
        .doc    = "Milliseconds switchsim keeps serving its groups and "
                  "calling aggmgr again after its control connection closes "
                  "(the manager restarted, or was killed): it registers "
                  "again, says which groups' parts it serves, and keeps those "
                  "the manager still holds (from its journal). 0: switchsim "
                  "shuts down with its manager.",
    },
};
