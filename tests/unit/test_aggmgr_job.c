/*
 * aggmgr's jobs and resource counts on generated fabrics: quotas are
 * reserved on every node of a job's tree and given back, hosts are not
 * shared between jobs, roots spread over spines, and running out is an
 * ordinary answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "aggmgr.h"

static aggmgr_t *make_mgr(int leaves, int spines, int hosts)
{
    aggmgr_t *am = calloc(1, sizeof(*am));

    assert_non_null(am);
    agg_conf_init(&am->conf);
    assert_int_equal(aggmgr_topo_fat_tree(leaves, spines, hosts, &am->topo), AGG_OK);
    am->ans     = calloc((size_t)am->topo.num_nodes, sizeof(*am->ans));
    am->ca_busy = calloc((size_t)am->topo.num_cas, 1);
    am->sim.fd  = -1;
    am->listen_fd = -1;
    aggmgr_resources_init(am);
    return am;
}

static void free_mgr(aggmgr_t *am)
{
    aggmgr_server_close(am); /* destroys every job */
    aggmgr_topo_free(&am->topo);
    free(am->ans);
    free(am->ca_busy);
    free(am);
}

static agg_msg_job_create_t request(uint32_t world, uint32_t osts)
{
    agg_msg_job_create_t req = {.world_size = world, .quota_osts = osts, .osts_per_group = 8};

    snprintf(req.host, sizeof(req.host), "test");
    return req;
}

static uint32_t used_osts(const aggmgr_t *am)
{
    uint32_t sum = 0;
    int i;

    for (i = 0; i < am->topo.num_nodes; ++i) {
        sum += am->ans[i].osts_used;
    }
    return sum;
}

static void test_default_quota(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t rep = {0};

    assert_int_equal(aggmgr_job_create(am, 5, &req, &rep), AGG_OK);
    /* 20 % of a node's 1024 OSTs and 256 groups; the node's 4096-byte payload */
    assert_int_equal(rep.osts, 204);
    assert_int_equal(rep.max_groups, 51);
    assert_int_equal(rep.payload_per_ost, 4096);
    /* 4 hosts on 2 leaves under one spine: 3 switches */
    assert_int_equal(rep.tree_depth, 2);
    assert_int_equal(rep.tree_nodes, 3);
    assert_int_equal(used_osts(am), 3 * 204);
    assert_int_equal(aggmgr_job_destroy(am, rep.job_id), AGG_OK);
    assert_int_equal(used_osts(am), 0);
    assert_int_equal(aggmgr_job_destroy(am, rep.job_id), AGG_ERR_NO_JOB);
    free_mgr(am);
}

static void test_hosts_not_shared_roots_spread(void **state)
{
    aggmgr_t *am = make_mgr(4, 2, 2);
    agg_msg_job_create_t req = request(4, 0);
    agg_msg_job_create_reply_t a = {0}, b = {0}, c = {0};

    assert_int_equal(aggmgr_job_create(am, 5, &req, &a), AGG_OK);
    assert_int_equal(aggmgr_job_create(am, 6, &req, &b), AGG_OK);
    assert_int_not_equal(a.root_guid, b.root_guid); /* one tree per spine */
    /* all 8 hosts are taken now */
    req.world_size = 1;
    assert_int_equal(aggmgr_job_create(am, 7, &req, &c), AGG_ERR_NO_RESOURCE);
    /* the owner of job a goes away: its hosts come back */
    aggmgr_conn_release(am, 5);
    assert_int_equal(aggmgr_job_create(am, 7, &req, &c), AGG_OK);
    free_mgr(am);
}

static void test_quota_exhaustion(void **state)
{
    aggmgr_t *am = make_mgr(1, 1, 8);
    agg_msg_job_create_t req = request(2, 600);
    agg_msg_job_create_reply_t a = {0}, b = {0};

    assert_int_equal(aggmgr_job_create(am, 5, &req, &a), AGG_OK);
    assert_int_equal(a.tree_nodes, 1); /* both hosts under the one leaf */
    /* 600 more do not fit in the leaf's remaining 424 */
    assert_int_equal(aggmgr_job_create(am, 6, &req, &b), AGG_ERR_NO_RESOURCE);
    req.quota_osts = 424;
    assert_int_equal(aggmgr_job_create(am, 6, &req, &b), AGG_OK);
    assert_int_equal(aggmgr_job_destroy(am, a.job_id), AGG_OK);
    assert_int_equal(aggmgr_job_destroy(am, b.job_id), AGG_OK);
    assert_int_equal(used_osts(am), 0);
    free_mgr(am);
}

static void test_bad_requests(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 2);
    agg_msg_job_create_t req = request(5, 0);
    agg_msg_job_create_reply_t rep = {0};
    agg_msg_group_create_reply_t grep;
    uint64_t leaves[2];
    uint32_t ranks[2] = {0, 1};

    /* more hosts than the fabric has */
    assert_int_equal(aggmgr_job_create(am, 5, &req, &rep), AGG_ERR_NO_RESOURCE);
    /* a payload larger than the nodes offer */
    req = request(2, 0);
    req.quota_payload_per_ost = 8192;
    assert_int_equal(aggmgr_job_create(am, 5, &req, &rep), AGG_ERR_QUOTA);
    req.quota_payload_per_ost = 0;
    assert_int_equal(aggmgr_job_create(am, 5, &req, &rep), AGG_OK);
    /* groups need a switchsim, a known job and members of the job */
    assert_int_equal(aggmgr_group_create(am, 5, rep.job_id, ranks, 2, 0, &grep, leaves),
                     AGG_ERR_NO_SWITCHSIM);
    assert_int_equal(aggmgr_group_create(am, 5, 999, ranks, 2, 0, &grep, leaves),
                     AGG_ERR_NO_JOB);
    am->sim.fd = 1000; /* checks below fail before anything is sent */
    ranks[1] = 7;
    assert_int_equal(aggmgr_group_create(am, 5, rep.job_id, ranks, 2, 0, &grep, leaves),
                     AGG_ERR_INVALID_PARAM);
    ranks[1] = 0;
    assert_int_equal(aggmgr_group_create(am, 5, rep.job_id, ranks, 2, 0, &grep, leaves),
                     AGG_ERR_INVALID_PARAM);
    /* a group asking for more OSTs than the job holds */
    ranks[1] = 1;
    assert_int_equal(aggmgr_group_create(am, 5, rep.job_id, ranks, 2, 100000, &grep, leaves),
                     AGG_ERR_QUOTA);
    am->sim.fd = -1;
    free_mgr(am);
}

static void test_max_jobs(void **state)
{
    aggmgr_t *am = make_mgr(2, 1, 4);
    agg_msg_job_create_t req = request(1, 1);
    agg_msg_job_create_reply_t rep;
    char err[256];
    int i;

    assert_int_equal(agg_conf_set(&am->conf, AGG_CONF_AM_MAX_JOBS, "3", AGG_CONF_SRC_CMDLINE,
                                  "test", err, sizeof(err)), AGG_OK);
    for (i = 0; i < 3; ++i) {
        assert_int_equal(aggmgr_job_create(am, 10 + i, &req, &rep), AGG_OK);
    }
    assert_int_equal(aggmgr_job_create(am, 20, &req, &rep), AGG_ERR_NO_RESOURCE);
    free_mgr(am);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_quota),
        cmocka_unit_test(test_hosts_not_shared_roots_spread),
        cmocka_unit_test(test_quota_exhaustion),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_max_jobs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
