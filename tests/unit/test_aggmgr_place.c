/*
 * Rank placement (aggmgr_place): free adapters packed leaf after leaf or
 * spread over the leaves on a fabric that does not name the job's hosts; each
 * rank on an adapter of its own host, in turn, where the fabric does; the
 * device filter; adapters of other jobs never used; running out is an answer
 * with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aggmgr.h"

#define MAX_HOSTS 4

/*
 * spine1 over leaf1 and leaf2. nodeA has two adapters, one under each leaf;
 * nodeB one, under leaf1. CAs in file order: nodeA mlx5_0, nodeA mlx5_1,
 * nodeB mlx5_0.
 */
static const char hosts_fabric[] =
    "# written for test_aggmgr_place\n"
    "switchguid=0x100(100)\n"
    "Switch\t3 \"S-0000000000000100\"\t\t# \"spine1\" base port 0 lid 1 lmc 0\n"
    "[1]\t\"S-0000000000000200\"[3]\t\t# \"leaf1\" lid 2 4xEDR\n"
    "[2]\t\"S-0000000000000300\"[3]\t\t# \"leaf2\" lid 3 4xEDR\n"
    "\n"
    "switchguid=0x200(200)\n"
    "Switch\t3 \"S-0000000000000200\"\t\t# \"leaf1\" base port 0 lid 2 lmc 0\n"
    "[1]\t\"H-0000000000001000\"[1](1001) \t\t# \"nodeA mlx5_0\" lid 4 4xEDR\n"
    "[2]\t\"H-0000000000003000\"[1](3001) \t\t# \"nodeB mlx5_0\" lid 6 4xEDR\n"
    "[3]\t\"S-0000000000000100\"[1]\t\t# \"spine1\" lid 1 4xEDR\n"
    "\n"
    "switchguid=0x300(300)\n"
    "Switch\t3 \"S-0000000000000300\"\t\t# \"leaf2\" base port 0 lid 3 lmc 0\n"
    "[1]\t\"H-0000000000002000\"[1](2001) \t\t# \"nodeA mlx5_1\" lid 5 4xEDR\n"
    "[3]\t\"S-0000000000000100\"[2]\t\t# \"spine1\" lid 1 4xEDR\n"
    "\n"
    "caguid=0x1000\n"
    "Ca\t1 \"H-0000000000001000\"\t\t# \"nodeA mlx5_0\"\n"
    "[1](1001) \t\"S-0000000000000200\"[1]\t\t# lid 4 lmc 0 \"leaf1\" lid 2 4xEDR\n"
    "\n"
    "caguid=0x2000\n"
    "Ca\t1 \"H-0000000000002000\"\t\t# \"nodeA mlx5_1\"\n"
    "[1](2001) \t\"S-0000000000000300\"[1]\t\t# lid 5 lmc 0 \"leaf2\" lid 3 4xEDR\n"
    "\n"
    "caguid=0x3000\n"
    "Ca\t1 \"H-0000000000003000\"\t\t# \"nodeB mlx5_0\"\n"
    "[1](3001) \t\"S-0000000000000200\"[2]\t\t# lid 6 lmc 0 \"leaf1\" lid 2 4xEDR\n";

static aggmgr_t *mgr_alloc(void)
{
    aggmgr_t *am = calloc(1, sizeof(*am));

    assert_non_null(am);
    agg_conf_init(&am->conf);
    am->listen_fd = -1;
    return am;
}

static void mgr_finish(aggmgr_t *am)
{
    am->ans     = calloc((size_t)am->topo.num_nodes, sizeof(*am->ans));
    am->ca_busy = calloc((size_t)am->topo.num_cas + 1, 1);
    assert_non_null(am->ans);
    assert_non_null(am->ca_busy);
    aggmgr_resources_init(am);
}

static aggmgr_t *mgr_fat_tree(int leaves, int spines, int hosts)
{
    aggmgr_t *am = mgr_alloc();

    assert_int_equal(aggmgr_topo_fat_tree(leaves, spines, hosts, &am->topo), AGG_OK);
    mgr_finish(am);
    return am;
}

static aggmgr_t *mgr_hosts(void)
{
    aggmgr_t *am = mgr_alloc();
    char err[512] = "";

    if (aggmgr_topo_parse(hosts_fabric, "hosts.topo", &am->topo, err, sizeof(err)) !=
        AGG_OK) {
        print_error("%s\n", err);
        fail();
    }
    assert_int_equal(am->topo.num_cas, 3);
    assert_int_equal(am->topo.num_switches, 3);
    mgr_finish(am);
    return am;
}

static void mgr_free(aggmgr_t *am)
{
    aggmgr_topo_free(&am->topo);
    free(am->ans);
    free(am->ca_busy);
    free(am);
}

/* A job of `world` ranks; hosts[] and host_of[] are filled by the caller. */
typedef struct job {
    agg_msg_job_create_t req;
    char                 hosts[MAX_HOSTS * AGG_WIRE_NAME_LEN];
    uint32_t             host_of[64];
    int                  cas[64];
    char                 why[512];
} job_t;

/* All ranks on one host named `host`. */
static void job_init(job_t *j, uint32_t world, uint32_t flags, const char *device,
                     const char *host)
{
    uint32_t r;

    assert_true(world <= 64);
    memset(j, 0, sizeof(*j));
    j->req.world_size = world;
    j->req.flags      = flags;
    j->req.num_hosts  = 1;
    snprintf(j->req.host, sizeof(j->req.host), "%s", host);
    snprintf(j->req.device, sizeof(j->req.device), "%s", device);
    snprintf(j->hosts, AGG_WIRE_NAME_LEN, "%s", host);
    for (r = 0; r < world; ++r) {
        j->host_of[r] = 0;
        j->cas[r]     = -2; /* never an adapter index: shows a rank left unplaced */
    }
}

static void job_add_host(job_t *j, const char *host)
{
    assert_true(j->req.num_hosts < MAX_HOSTS);
    snprintf(j->hosts + (size_t)j->req.num_hosts * AGG_WIRE_NAME_LEN, AGG_WIRE_NAME_LEN,
             "%s", host);
    j->req.num_hosts++;
}

static agg_status_t place(const aggmgr_t *am, job_t *j)
{
    return aggmgr_place(am, &j->req, j->hosts, j->host_of, j->cas, j->why, sizeof(j->why));
}

/* The description of the leaf switch adapter `ca` is cabled to. */
static const char *leaf_of(const aggmgr_t *am, int ca)
{
    assert_in_range(ca, 0, am->topo.num_cas - 1);
    assert_in_range(am->topo.ca_switch[ca], 0, am->topo.num_nodes - 1);
    return am->topo.nodes[am->topo.ca_switch[ca]].desc;
}

static const char *desc_of(const aggmgr_t *am, int ca)
{
    assert_in_range(ca, 0, am->topo.num_cas - 1);
    return am->topo.nodes[am->topo.cas[ca]].desc;
}

static int ca_by_desc(const aggmgr_t *am, const char *desc)
{
    int ca;

    for (ca = 0; ca < am->topo.num_cas; ++ca) {
        if (strcmp(am->topo.nodes[am->topo.cas[ca]].desc, desc) == 0) {
            return ca;
        }
    }
    fail_msg("no adapter '%s' in the fabric", desc);
    return -1;
}

static void assert_distinct(const job_t *j)
{
    uint32_t a, b;

    for (a = 0; a < j->req.world_size; ++a) {
        for (b = 0; b < a; ++b) {
            if (j->cas[a] == j->cas[b]) {
                fail_msg("ranks %u and %u share adapter %d", b, a, j->cas[a]);
            }
        }
    }
}

static void assert_why(const job_t *j, const char *part)
{
    if (strstr(j->why, part) == NULL) {
        fail_msg("message '%s' does not say '%s'", j->why, part);
    }
}

/* ---- fabrics that do not name the job's hosts ---------------------------- */

static void test_packed_fat_tree(void **state)
{
    aggmgr_t *am = mgr_fat_tree(3, 2, 2);
    job_t j;

    job_init(&j, 4, 0, "", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);
    assert_string_equal(leaf_of(am, j.cas[0]), "leaf1");
    assert_string_equal(leaf_of(am, j.cas[1]), "leaf1");
    assert_string_equal(leaf_of(am, j.cas[2]), "leaf2");
    assert_string_equal(leaf_of(am, j.cas[3]), "leaf2");
    assert_distinct(&j);
    /* the fat tree's adapters in order: host1..host4 */
    assert_string_equal(desc_of(am, j.cas[0]), "host1 mlx5_0");
    assert_string_equal(desc_of(am, j.cas[3]), "host4 mlx5_0");

    /* the device part of "mlx5_0:1" keeps every adapter of the fat tree */
    job_init(&j, 6, 0, "mlx5_0:1", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);
    assert_string_equal(leaf_of(am, j.cas[4]), "leaf3");
    assert_string_equal(leaf_of(am, j.cas[5]), "leaf3");
    assert_distinct(&j);
    mgr_free(am);
}

static void test_spread_fat_tree(void **state)
{
    aggmgr_t *am = mgr_fat_tree(3, 2, 2);
    static const char *const want[6] = {"leaf1", "leaf2", "leaf3", "leaf1", "leaf2", "leaf3"};
    job_t j;
    uint32_t r;

    job_init(&j, 6, AGG_JOB_F_SPREAD, "", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);
    for (r = 0; r < 6; ++r) {
        assert_string_equal(leaf_of(am, j.cas[r]), want[r]);
        if (r > 0) {
            assert_string_not_equal(leaf_of(am, j.cas[r]), leaf_of(am, j.cas[r - 1]));
        }
    }
    assert_distinct(&j);

    /* two ranks: one on each of the first two leaves, not both under leaf1 */
    job_init(&j, 2, AGG_JOB_F_SPREAD, "", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);
    assert_string_equal(leaf_of(am, j.cas[0]), "leaf1");
    assert_string_equal(leaf_of(am, j.cas[1]), "leaf2");
    mgr_free(am);
}

static void test_busy_never_used(void **state)
{
    aggmgr_t *am = mgr_fat_tree(3, 2, 2);
    job_t j;
    uint32_t r;

    /* host1 and host4 belong to another job */
    am->ca_busy[0] = 1;
    am->ca_busy[3] = 1;
    job_init(&j, 4, 0, "", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);
    for (r = 0; r < 4; ++r) {
        assert_false(am->ca_busy[j.cas[r]]);
    }
    /* packed: what is left of leaf1, of leaf2, then leaf3 */
    assert_int_equal(j.cas[0], 1);
    assert_int_equal(j.cas[1], 2);
    assert_int_equal(j.cas[2], 4);
    assert_int_equal(j.cas[3], 5);

    /* spread: leaf1 has only host2 left, leaf2 only host3 */
    job_init(&j, 4, AGG_JOB_F_SPREAD, "", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);
    for (r = 0; r < 4; ++r) {
        assert_false(am->ca_busy[j.cas[r]]);
    }
    assert_int_equal(j.cas[0], 1);
    assert_int_equal(j.cas[1], 2);
    assert_int_equal(j.cas[2], 4);
    assert_int_equal(j.cas[3], 5); /* leaf1 and leaf2 are used up: leaf3 again */
    assert_distinct(&j);

    /* leaf1 all busy: spreading starts at leaf2 */
    am->ca_busy[1] = 1;
    job_init(&j, 2, AGG_JOB_F_SPREAD, "", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);
    assert_string_equal(leaf_of(am, j.cas[0]), "leaf2");
    assert_string_equal(leaf_of(am, j.cas[1]), "leaf3");
    mgr_free(am);
}

static void test_too_many_ranks(void **state)
{
    aggmgr_t *am = mgr_fat_tree(3, 2, 2);
    job_t j;

    job_init(&j, 7, 0, "", "launcher");
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "7 ranks");
    assert_why(&j, "fat-tree 3:2:2");
    assert_why(&j, "6 free adapters");

    job_init(&j, 7, AGG_JOB_F_SPREAD, "", "launcher");
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "7 ranks");
    assert_why(&j, "6 free adapters");

    /* busy adapters do not count as free */
    am->ca_busy[2] = 1;
    job_init(&j, 6, 0, "", "launcher");
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "5 free adapters");
    job_init(&j, 5, 0, "", "launcher");
    assert_int_equal(place(am, &j), AGG_OK);

    /* the fat tree has no mlx5_1 */
    job_init(&j, 1, 0, "mlx5_1:1", "launcher");
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "0 free adapters");
    assert_why(&j, "mlx5_1");
    mgr_free(am);
}

/* A fat tree names its adapters "hostN mlx5_0": a job on host3 uses host3's. */
static void test_fat_tree_named_host(void **state)
{
    aggmgr_t *am = mgr_fat_tree(3, 2, 2);
    job_t j;

    job_init(&j, 2, 0, "", "host3");
    assert_int_equal(place(am, &j), AGG_OK);
    assert_string_equal(desc_of(am, j.cas[0]), "host3 mlx5_0");
    assert_string_equal(desc_of(am, j.cas[1]), "host3 mlx5_0");
    mgr_free(am);
}

/* ---- fabrics that name the job's hosts ------------------------------------ */

static void test_by_host_in_turn(void **state)
{
    aggmgr_t *am = mgr_hosts();
    int a0 = ca_by_desc(am, "nodeA mlx5_0"), a1 = ca_by_desc(am, "nodeA mlx5_1");
    int b0 = ca_by_desc(am, "nodeB mlx5_0");
    job_t j;

    /* ranks 0, 1, 3 on nodeA, rank 2 on nodeB; nodeB listed first */
    job_init(&j, 4, 0, "", "nodeB");
    job_add_host(&j, "nodeA");
    j.host_of[0] = 1;
    j.host_of[1] = 1;
    j.host_of[2] = 0;
    j.host_of[3] = 1;
    assert_int_equal(place(am, &j), AGG_OK);
    assert_int_equal(j.cas[0], a0);
    assert_int_equal(j.cas[1], a1);
    assert_int_equal(j.cas[2], b0);
    assert_int_equal(j.cas[3], a0); /* nodeA's adapters in turn, again */

    /* spreading does not take a rank off its host */
    j.req.flags = AGG_JOB_F_SPREAD;
    assert_int_equal(place(am, &j), AGG_OK);
    assert_int_equal(j.cas[2], b0);
    assert_int_equal(j.cas[0], a0);
    assert_int_equal(j.cas[1], a1);
    mgr_free(am);
}

static void test_by_host_device(void **state)
{
    aggmgr_t *am = mgr_hosts();
    int a0 = ca_by_desc(am, "nodeA mlx5_0"), a1 = ca_by_desc(am, "nodeA mlx5_1");
    job_t j;
    uint32_t r;

    job_init(&j, 3, 0, "mlx5_1:1", "nodeA");
    assert_int_equal(place(am, &j), AGG_OK);
    for (r = 0; r < 3; ++r) {
        assert_int_equal(j.cas[r], a1);
    }
    /* a device without a port */
    job_init(&j, 3, 0, "mlx5_0", "nodeA");
    assert_int_equal(place(am, &j), AGG_OK);
    for (r = 0; r < 3; ++r) {
        assert_int_equal(j.cas[r], a0);
    }
    /* nodeB has no mlx5_1: the message names the host and the device */
    job_init(&j, 2, 0, "mlx5_1:1", "nodeA");
    job_add_host(&j, "nodeB");
    j.host_of[1] = 1;
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "nodeB");
    assert_why(&j, "mlx5_1");
    assert_why(&j, "rank 1");
    mgr_free(am);
}

static void test_by_host_unknown(void **state)
{
    aggmgr_t *am = mgr_hosts();
    int a0 = ca_by_desc(am, "nodeA mlx5_0");
    job_t j;

    job_init(&j, 3, 0, "", "nodeA");
    job_add_host(&j, "nodeZ");
    j.host_of[2] = 1;
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "nodeZ");
    assert_why(&j, "hosts.topo");
    assert_why(&j, "rank 2");

    /* the unknown host listed first, its rank last: the same answer */
    job_init(&j, 2, 0, "", "nodeZ");
    job_add_host(&j, "nodeA");
    j.host_of[0] = 1;
    j.host_of[1] = 0;
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "nodeZ");
    assert_why(&j, "rank 1");

    /* only known hosts: placed */
    job_init(&j, 1, 0, "", "nodeA");
    assert_int_equal(place(am, &j), AGG_OK);
    assert_int_equal(j.cas[0], a0);
    mgr_free(am);
}

static void test_by_host_busy(void **state)
{
    aggmgr_t *am = mgr_hosts();
    int a0 = ca_by_desc(am, "nodeA mlx5_0"), a1 = ca_by_desc(am, "nodeA mlx5_1");
    int b0 = ca_by_desc(am, "nodeB mlx5_0");
    job_t j;
    uint32_t r;

    am->ca_busy[a0] = 1;
    job_init(&j, 3, 0, "", "nodeA");
    assert_int_equal(place(am, &j), AGG_OK);
    for (r = 0; r < 3; ++r) {
        assert_int_equal(j.cas[r], a1);
    }
    /* the only adapter of the device asked for is busy */
    job_init(&j, 1, 0, "mlx5_0:1", "nodeA");
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "nodeA");
    /* nodeA all busy */
    am->ca_busy[a1] = 1;
    job_init(&j, 2, 0, "", "nodeB");
    job_add_host(&j, "nodeA");
    j.host_of[1] = 1;
    assert_int_equal(place(am, &j), AGG_ERR_NO_RESOURCE);
    assert_why(&j, "no free adapter");
    assert_why(&j, "nodeA");
    /* nodeB is still free */
    job_init(&j, 2, 0, "", "nodeB");
    assert_int_equal(place(am, &j), AGG_OK);
    assert_int_equal(j.cas[0], b0);
    assert_int_equal(j.cas[1], b0);
    mgr_free(am);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_fat_tree),
        cmocka_unit_test(test_spread_fat_tree),
        cmocka_unit_test(test_busy_never_used),
        cmocka_unit_test(test_too_many_ranks),
        cmocka_unit_test(test_fat_tree_named_host),
        cmocka_unit_test(test_by_host_in_turn),
        cmocka_unit_test(test_by_host_device),
        cmocka_unit_test(test_by_host_unknown),
        cmocka_unit_test(test_by_host_busy),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
