/*
 * What the switchsim tests share: a switchsim_t set up and torn down as
 * switchsim/main.c does (without aggmgr, the control link or a config file),
 * the switches it hosts, and GROUP_CONFIG bodies as switchsim_ctl.c hands them
 * on. No cmocka in here: the fuzz harness (tests/fuzz/fuzz_switchsim.c) uses
 * it too.
 */
#ifndef SWITCHSIM_TEST_H
#define SWITCHSIM_TEST_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "switchsim.h"

/*
 * Clears sim and sets it up as main.c does before it hosts any switch: default
 * settings, the group-list lock, no aggmgr link. num_cpus and num_workers are
 * what main.c would have taken from the machine and the settings.
 */
static inline void switchsim_test_init(switchsim_t *sim, long num_cpus, unsigned num_workers)
{
    pthread_rwlockattr_t attr;

    memset(sim, 0, sizeof(*sim));
    agg_conf_init(&sim->conf);
    /* the control thread must get in between the workers' passes */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&sim->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    sim->am_fd       = -1;
    sim->num_cpus    = num_cpus;
    sim->num_workers = num_workers;
}

/* Fills n switch records: guids 0x10, 0x20, ... (sorted, as registration leaves
 * them), named sw1, sw2, ... */
static inline void switchsim_test_switches(agg_wire_switch_t *sw, uint32_t n)
{
    uint32_t i;

    for (i = 0; i < n; ++i) {
        sw[i].guid = 0x10u * (uint64_t)(i + 1);
        snprintf(sw[i].desc, sizeof(sw[i].desc), "sw%u", i + 1);
    }
}

/* Undoes switchsim_test_init and what came after it, in main.c's order:
 * workers, groups, switches. */
static inline void switchsim_test_fini(switchsim_t *sim)
{
    switchsim_workers_stop(sim);
    switchsim_group_destroy_all(sim);
    switchsim_an_fini(sim);
    pthread_rwlock_destroy(&sim->lock);
}

/* A GROUP_CONFIG body in host order, as switchsim_ctl.c hands it on. */
typedef struct switchsim_test_cfg {
    agg_msg_group_config_t cfg;
    agg_wire_tree_node_t   nodes[3];
    agg_wire_member_t      members[4];
} switchsim_test_cfg_t;

/* Root `root` with leaves root+0x10 (members 0, 1) and root+0x20 (members 2, 3). */
static inline switchsim_test_cfg_t switchsim_test_tree3(uint32_t id, uint8_t tree, uint64_t root,
                                                        uint32_t osts, uint32_t payload)
{
    switchsim_test_cfg_t t = {
        .cfg     = {.group_id = id, .job_id = 1, .num_members = 4, .num_nodes = 3,
                    .osts = osts, .payload = payload, .tree = tree},
        .nodes   = {{root, -1, 0}, {root + 0x10, 0, 0}, {root + 0x20, 0, 0}},
        .members = {{.leaf = 1}, {.leaf = 1}, {.leaf = 2}, {.leaf = 2}},
    };

    return t;
}

#endif
