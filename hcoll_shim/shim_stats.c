/*
 * AGG_STATS=1: where every collective went, printed by rank 0 at
 * MPI_Finalize, one line per MPI function the program called:
 *
 *   agg_stats: allreduce calls=N llt=N sat=N recursive_doubling=N
 *              rabenseifner=N ring=N gpu_ring=N mpi=N failed=N[ why: <reason>=N ...]
 *
 * (one line; "iallreduce", "allgatherv", "reduce_scatter_block"...: the
 * function's name without MPI_; failed: forced into the network, which could
 * not have it: an MPI error). The paths add up to calls; the reasons
 * count the calls that were not offloaded (and those SAT would have taken
 * that went to the LLT: lock, the SAT lock busy; sat_flows, the communicator
 * has no SAT group because a switch of its tree served an_sat_flows SAT
 * groups already; no_sat, it has none for another reason, e.g. its job has
 * no SAT tree). These are rank 0's counts: every member of a communicator
 * takes the same path.
 */
#include <stdio.h>

#include "shim.h"

static const char *const shim_path_names[SHIM_PATH__COUNT] = {
    [SHIM_PATH_LLT] = "llt", [SHIM_PATH_SAT] = "sat", [SHIM_PATH_RD] = "recursive_doubling",
    [SHIM_PATH_RAB] = "rabenseifner", [SHIM_PATH_RING] = "ring", [SHIM_PATH_GPU_RING] = "gpu_ring",
    [SHIM_PATH_MPI] = "mpi", [SHIM_PATH_FAILED] = "failed",
};

static const char *const shim_fn_names[SHIM_FN__COUNT] = {
    [SHIM_FN_ALLREDUCE] = "allreduce",
    [SHIM_FN_IALLREDUCE] = "iallreduce",
    [SHIM_FN_REDUCE] = "reduce",
    [SHIM_FN_IREDUCE] = "ireduce",
    [SHIM_FN_BCAST] = "bcast",
    [SHIM_FN_IBCAST] = "ibcast",
    [SHIM_FN_BARRIER] = "barrier",
    [SHIM_FN_IBARRIER] = "ibarrier",
    [SHIM_FN_REDUCE_SCATTER_BLOCK] = "reduce_scatter_block",
    [SHIM_FN_IREDUCE_SCATTER_BLOCK] = "ireduce_scatter_block",
    [SHIM_FN_ALLGATHER] = "allgather",
    [SHIM_FN_IALLGATHER] = "iallgather",
    [SHIM_FN_REDUCE_SCATTER] = "reduce_scatter",
    [SHIM_FN_IREDUCE_SCATTER] = "ireduce_scatter",
    [SHIM_FN_ALLGATHERV] = "allgatherv",
    [SHIM_FN_IALLGATHERV] = "iallgatherv",
};

const char *shim_fn_name(shim_fn_t fn)
{
    return (unsigned)fn < SHIM_FN__COUNT ? shim_fn_names[fn] : "unknown";
}

static const char *const shim_why_names[SHIM_WHY__COUNT] = {
    [SHIM_WHY_NONE] = "none",
    [SHIM_WHY_OFF] = "off",
    [SHIM_WHY_TOO_SMALL] = "too_small",
    [SHIM_WHY_TOO_LARGE] = "too_large",
    [SHIM_WHY_TYPE] = "type",
    [SHIM_WHY_OP] = "op",
    [SHIM_WHY_COMM_SMALL] = "comm_small",
    [SHIM_WHY_RESOURCES] = "resources",
    [SHIM_WHY_LOCK] = "lock",
    [SHIM_WHY_NO_SAT] = "no_sat",
    [SHIM_WHY_NETWORK_ERROR] = "network_error",
    [SHIM_WHY_DERIVED] = "derived",
    [SHIM_WHY_USER_OP] = "user_op",
    [SHIM_WHY_INTERCOMM] = "intercomm",
    [SHIM_WHY_LAZY] = "lazy",
    [SHIM_WHY_LEVEL] = "level",
    [SHIM_WHY_LEADERS] = "leaders",
    [SHIM_WHY_SAT_FLOWS] = "sat_flows",
};

void shim_stats_print(void)
{
    char line[1024];
    int c, p, w, len;
    unsigned long total;

    for (c = 0; c < SHIM_FN__COUNT; ++c) {
        for (total = 0, p = 0; p < SHIM_PATH__COUNT; ++p) {
            total += shim.calls[c][p];
        }
        if (total == 0) {
            continue;
        }
        len = snprintf(line, sizeof(line), "agg_stats: %s calls=%lu",
                       shim_fn_name((shim_fn_t)c), total);
        for (p = 0; p < SHIM_PATH__COUNT; ++p) {
            len += snprintf(line + len, sizeof(line) - (size_t)len, " %s=%lu",
                            shim_path_names[p], shim.calls[c][p]);
        }
        for (w = 1, p = 0; w < SHIM_WHY__COUNT; ++w) {
            if (shim.why[c][w] > 0) {
                len += snprintf(line + len, sizeof(line) - (size_t)len, "%s %s=%lu",
                                p++ ? "" : " why:", shim_why_names[w], shim.why[c][w]);
            }
        }
        printf("%s\n", line);
    }
    fflush(stdout);
}
