/*
 * The ibnetdiscover reader, the fat-tree generator and the writer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "aggmgr_topo.h"

#define DATA(_name) AGG_TEST_DATA "/" _name

/* Loads a file that must parse. */
static void load_ok(const char *path, aggmgr_topo_t *topo)
{
    char err[512] = "";
    agg_status_t st = aggmgr_topo_load(path, topo, err, sizeof(err));

    if (st != AGG_OK) {
        print_error("%s\n", err);
    }
    assert_int_equal(st, AGG_OK);
}

/* Loads a file that must fail at `line`, with `what` in the message. */
static void load_bad(const char *path, int line, const char *what)
{
    char err[512] = "", where[600];
    aggmgr_topo_t topo;

    memset(&topo, 0, sizeof(topo));
    assert_int_equal(aggmgr_topo_load(path, &topo, err, sizeof(err)), AGG_ERR_PARSE);
    snprintf(where, sizeof(where), "%s:%d: expected ", path, line);
    if (strncmp(err, where, strlen(where)) != 0 || strstr(err, what) == NULL) {
        print_error("got:  %s\nwant: %s... %s\n", err, where, what);
        fail();
    }
    assert_null(topo.nodes); /* untouched */
}

/* Parses a string that must fail at `line`, with `what` in the message. */
static void parse_bad(const char *text, int line, const char *what)
{
    char err[512] = "", where[64];
    aggmgr_topo_t topo;

    memset(&topo, 0, sizeof(topo));
    assert_int_equal(aggmgr_topo_parse(text, "t", &topo, err, sizeof(err)),
                     AGG_ERR_PARSE);
    snprintf(where, sizeof(where), "t:%d: expected ", line);
    if (strncmp(err, where, strlen(where)) != 0 || strstr(err, what) == NULL) {
        print_error("got:  %s\nwant: %s... %s\n", err, where, what);
        fail();
    }
}

static int find_id(const aggmgr_topo_t *topo, const char *id)
{
    int i;

    for (i = 0; i < topo->num_nodes; i++) {
        if (strcmp(topo->nodes[i].id, id) == 0) {
            return i;
        }
    }
    return -1;
}

/* node[port] is cabled to peer[peer_port], seen from both ends. */
static void assert_link(const aggmgr_topo_t *t, int node, int port, int peer,
                        int peer_port)
{
    assert_true(node >= 0 && peer >= 0);
    assert_int_equal(t->nodes[node].ports[port].peer_node, peer);
    assert_int_equal(t->nodes[node].ports[port].peer_port, peer_port);
    assert_int_equal(t->nodes[peer].ports[peer_port].peer_node, node);
    assert_int_equal(t->nodes[peer].ports[peer_port].peer_port, port);
}

static int cabled_ports(const aggmgr_node_t *n)
{
    int p, k = 0;

    for (p = 1; p <= n->num_ports; p++) {
        k += n->ports[p].peer_node >= 0;
    }
    return k;
}

static void assert_same_topo(const aggmgr_topo_t *a, const aggmgr_topo_t *b)
{
    int i, p;

    assert_int_equal(a->num_nodes, b->num_nodes);
    assert_int_equal(a->num_switches, b->num_switches);
    assert_int_equal(a->num_cas, b->num_cas);
    for (i = 0; i < a->num_nodes; i++) {
        assert_int_equal(a->nodes[i].type, b->nodes[i].type);
        assert_true(a->nodes[i].guid == b->nodes[i].guid);
        assert_string_equal(a->nodes[i].id, b->nodes[i].id);
        assert_string_equal(a->nodes[i].desc, b->nodes[i].desc);
        assert_int_equal(a->nodes[i].num_ports, b->nodes[i].num_ports);
        for (p = 1; p <= a->nodes[i].num_ports; p++) {
            assert_int_equal(a->nodes[i].ports[p].peer_node,
                             b->nodes[i].ports[p].peer_node);
            if (a->nodes[i].ports[p].peer_node >= 0) {
                assert_int_equal(a->nodes[i].ports[p].peer_port,
                                 b->nodes[i].ports[p].peer_port);
            }
        }
    }
    for (i = 0; i < a->num_cas; i++) {
        assert_int_equal(a->cas[i], b->cas[i]);
        assert_int_equal(a->ca_switch[i], b->ca_switch[i]);
    }
}

/* Writes `topo` out and reads it back: the same fabric. */
static void assert_round_trip(const aggmgr_topo_t *topo)
{
    char *text = NULL, err[512] = "";
    size_t len = 0;
    aggmgr_topo_t back;
    FILE *f = open_memstream(&text, &len);

    assert_non_null(f);
    assert_int_equal(aggmgr_topo_write(topo, f), 0);
    assert_int_equal(fclose(f), 0);
    if (aggmgr_topo_parse(text, "written", &back, err, sizeof(err)) != AGG_OK) {
        print_error("%s\n%s\n", err, text);
        fail();
    }
    assert_same_topo(topo, &back);
    aggmgr_topo_free(&back);
    free(text);
}

static void test_parse_fabric(void **state)
{
    aggmgr_topo_t t;
    int spine1, spine2, leaf1, leaf2, leaf3, n1, n6, i;

    (void)state;
    load_ok(DATA("fabric_2l.topo"), &t);
    assert_int_equal(t.num_nodes, 11);
    assert_int_equal(t.num_switches, 5);
    assert_int_equal(t.num_cas, 6);
    assert_string_equal(t.source, DATA("fabric_2l.topo"));

    spine1 = find_id(&t, "S-e41d2d030003e450");
    spine2 = find_id(&t, "S-e41d2d030003e470");
    leaf1  = find_id(&t, "S-7cfe900300a1b200");
    leaf2  = find_id(&t, "S-7cfe900300a1b220");
    leaf3  = find_id(&t, "S-7cfe900300a1b240");
    n1     = find_id(&t, "H-e41d2d0300fb7e50");
    n6     = find_id(&t, "H-e41d2d0300fb7ea0");
    /* File order. */
    assert_int_equal(spine1, 0);
    assert_int_equal(spine2, 1);
    assert_int_equal(leaf1, 2);
    assert_int_equal(leaf3, 4);
    assert_int_equal(n1, 5);
    assert_int_equal(n6, 10);

    assert_int_equal(t.nodes[spine1].type, AGGMGR_NODE_SWITCH);
    assert_true(t.nodes[spine1].guid == 0xe41d2d030003e450ull);
    assert_int_equal(t.nodes[spine1].num_ports, 36);
    assert_string_equal(t.nodes[spine1].desc, "spine1 SwitchIB Mellanox Technologies");
    assert_int_equal(t.nodes[spine1].src_line, 13);
    assert_int_equal(t.nodes[n1].type, AGGMGR_NODE_CA);
    assert_true(t.nodes[n1].guid == 0xe41d2d0300fb7e50ull);
    assert_string_equal(t.nodes[n1].desc, "node01 mlx5_0");
    assert_int_equal(t.nodes[n6].num_ports, 2);
    assert_int_equal(aggmgr_topo_find_guid(&t, 0x7cfe900300a1b240ull), leaf3);
    assert_int_equal(aggmgr_topo_find_guid(&t, 0x1234), -1);

    assert_link(&t, leaf1, 35, spine1, 1);
    assert_link(&t, leaf1, 33, spine1, 5); /* the second cable */
    assert_link(&t, leaf1, 36, spine2, 1);
    assert_link(&t, leaf2, 35, spine1, 2);
    assert_link(&t, leaf3, 36, spine2, 3);
    assert_link(&t, leaf1, 1, n1, 1);
    assert_link(&t, leaf3, 2, n6, 2);
    assert_int_equal(t.nodes[n6].ports[1].peer_node, -1);
    assert_int_equal(cabled_ports(&t.nodes[spine1]), 4);
    assert_int_equal(cabled_ports(&t.nodes[leaf2]), 4);
    assert_int_equal(t.nodes[leaf2].ports[3].peer_node, -1);

    /* CAs in file order, each with the switch of its first cabled port. */
    for (i = 0; i < 6; i++) {
        assert_int_equal(t.cas[i], 5 + i);
        assert_int_equal(t.ca_switch[i], leaf1 + i / 2);
    }
    assert_round_trip(&t);
    aggmgr_topo_free(&t);
    aggmgr_topo_free(&t); /* twice is harmless */
}

static void test_parse_grouped_and_router(void **state)
{
    aggmgr_topo_t t;
    int sw;

    (void)state;
    load_ok(DATA("fabric_grouped.topo"), &t);
    assert_int_equal(t.num_nodes, 3); /* the router is dropped */
    assert_int_equal(t.num_switches, 1);
    assert_int_equal(t.num_cas, 2);
    sw = find_id(&t, "S-0002c90300000001");
    assert_int_equal(sw, 0);
    assert_string_equal(t.nodes[sw].desc, "sw1");
    assert_string_equal(t.nodes[2].desc, "host2 mlx5_0");
    assert_link(&t, sw, 1, 1, 1);
    assert_link(&t, sw, 2, 2, 1);
    assert_int_equal(t.nodes[sw].ports[8].peer_node, -1);
    assert_int_equal(find_id(&t, "R-0002c90300200000"), -1);
    assert_int_equal(t.ca_switch[0], sw);
    assert_int_equal(t.ca_switch[1], sw);
    aggmgr_topo_free(&t);
}

/* Real ibnetdiscover output (captured under ibsim): two switches cabled twice. */
static void test_parse_ibsim_capture(void **state)
{
    aggmgr_topo_t t;

    (void)state;
    load_ok(DATA("ibsim_2sw2path4hca.topo"), &t);
    assert_int_equal(t.num_switches, 2);
    assert_int_equal(t.num_cas, 4);
    assert_string_equal(t.nodes[0].desc, "Switch2");
    assert_true(t.nodes[0].guid == 0x200001);
    assert_string_equal(t.nodes[5].desc, "Hca1");
    assert_int_equal(t.nodes[5].num_ports, 2);
    assert_link(&t, 0, 3, 1, 3);
    assert_link(&t, 0, 5, 1, 5);
    assert_link(&t, 1, 1, 5, 1);
    assert_int_equal(cabled_ports(&t.nodes[0]), 4);
    assert_int_equal(t.cas[0], 2);
    assert_int_equal(t.ca_switch[0], 0);
    assert_int_equal(t.ca_switch[1], 0);
    assert_int_equal(t.ca_switch[2], 1);
    assert_int_equal(t.ca_switch[3], 1);
    assert_round_trip(&t);
    aggmgr_topo_free(&t);
}

/* Ids need not be GUIDs when a guid line names the node; CRLF line ends;
 * CA-to-CA cables; a CA cabled to nothing. */
static void test_parse_plain_ids(void **state)
{
    static const char text[] =
        "switchguid=0x10\r\n"
        "Switch 4 \"edge\" # \"edge switch\" base port 0 lid 1 lmc 0\r\n"
        "[1] \"hostA\"[2] # \"a\"\r\n"
        "\r\n"
        "caguid=0x20\r\n"
        "Ca 2 \"hostA\" # \"a \"quoted\" name\"\r\n"
        "[1] \"hostB\"[1]\r\n"
        "[2] \"edge\"[1]\r\n"
        "caguid=0x30\n"
        "Ca 1 \"hostB\" # \"b\"\n"
        "[1] \"hostA\"[1]\n"
        "Ca 1 \"H-40\"\n";
    aggmgr_topo_t t;
    char err[256] = "";

    (void)state;
    assert_int_equal(aggmgr_topo_parse(text, "plain", &t, err, sizeof(err)), AGG_OK);
    assert_int_equal(t.num_nodes, 4);
    assert_true(t.nodes[0].guid == 0x10);
    assert_true(t.nodes[3].guid == 0x40);
    assert_string_equal(t.nodes[0].desc, "edge switch");
    assert_string_equal(t.nodes[1].desc, "a \"quoted\" name");
    assert_string_equal(t.nodes[3].desc, "");
    assert_link(&t, 1, 1, 2, 1);
    assert_int_equal(t.ca_switch[0], 0); /* port 2: port 1 goes to a CA */
    assert_int_equal(t.ca_switch[1], -1);
    assert_int_equal(t.ca_switch[2], -1);
    assert_string_equal(t.source, "plain");
    assert_round_trip(&t);
    aggmgr_topo_free(&t);
}

static void test_bad_files(void **state)
{
    (void)state;
    load_bad(DATA("bad_link_mismatch.topo"), 15,
             "\"S-0002c90300000001\"[2] as line 7 says, found "
             "'\"S-0002c90300000001\"[3]'");
    load_bad(DATA("bad_port_range.topo"), 6,
             "a port in 1..8 of \"S-0002c90300000001\" (line 4), found '[9]'");
    load_bad(DATA("bad_dup_id.topo"), 12,
             "a unique node id (line 8 declares it already), "
             "found '\"H-0002c90300100010\"'");
    load_bad(DATA("bad_undeclared.topo"), 6,
             "a peer declared by a Switch, Ca or Rt line, "
             "found '\"H-0002c90300100030\"[1]'");
    load_bad(DATA("bad_oneside.topo"), 6,
             "\"H-0002c90300100020\" (line 13) to declare its port 1 back to "
             "\"S-0002c90300000001\"[2]");
    load_bad(DATA("bad_garbage.topo"), 6,
             "found 'port 2 is cabled to host2'");
}

static void test_bad_strings(void **state)
{
    static const char sw[] = "Switch 4 \"S-1\" # \"s\"\n"; /* line 1 */
    char buf[512];

    (void)state;

    /* The later side of a disagreeing link is blamed, quoting the earlier. */
    parse_bad("Switch 4 \"S-1\"\n[1] \"H-2\"[1]\n"
              "Ca 1 \"H-2\"\n[1] \"S-1\"[1]\n"
              "Ca 1 \"H-3\"\n[1] \"S-1\"[1]\n",
              6, "a port free for \"H-3\"[1], but line 2 cables \"S-1\"[1] to "
                 "\"H-2\"[1], found '\"S-1\"[1]'");
    /* Peer port beyond the peer's port count. */
    snprintf(buf, sizeof(buf), "%s[1] \"H-2\"[2]\nCa 1 \"H-2\"\n[1] \"S-1\"[1]\n", sw);
    parse_bad(buf, 2, "a port in 1..1 of \"H-2\" (line 3), found '\"H-2\"[2]'");
    /* Port 0 and a port line before any node. */
    snprintf(buf, sizeof(buf), "%s[0] \"H-2\"[1]\n", sw);
    parse_bad(buf, 2, "a port in 1..4 of \"S-1\"");
    parse_bad("# c\n[1] \"H-2\"[1]\n", 2, "a Switch, Ca or Rt line before port lines");
    parse_bad("vendid=0x2c9\n[1] \"H-2\"[1]\n", 2, "a Switch, Ca or Rt line");
    /* The same port twice; a port cabled to itself. */
    snprintf(buf, sizeof(buf), "%s[1] \"S-1\"[2]\n[2] \"S-1\"[1]\n[1] \"S-1\"[3]\n", sw);
    parse_bad(buf, 4, "one line per port (port 1 of \"S-1\" is on line 2)");
    snprintf(buf, sizeof(buf), "%s[1] \"S-1\"[1]\n", sw);
    parse_bad(buf, 2, "a peer other than the port itself");
    /* Headers. */
    parse_bad("Switch 0 \"S-1\"\n", 1, "a port count in 1..255, found '0 \"S-1\"'");
    parse_bad("Switch 256 \"S-1\"\n", 1, "a port count in 1..255");
    parse_bad("Switch 4 S-1\n", 1, "a quoted node id");
    parse_bad("Switch 4 \"S-1\" junk\n", 1, "'#' and the node description, found 'junk'");
    parse_bad("Switch 4 \"H-1\"\n", 1, "an id starting with \"S-\" on a Switch line");
    parse_bad("Switch 4 \"sw\"\n", 1, "a switchguid= line before this node");
    parse_bad("caguid=0x5\nSwitch 4 \"S-5\"\n", 2, "a Ca line after the caguid= line 1");
    parse_bad("switchguid=0x5\nSwitch 4 \"S-6\"\n", 2,
              "an id matching GUID 0x0000000000000005 of line 1");
    parse_bad("switchguid=0x5\n", 1, "a Switch line after this line, found end of file");
    parse_bad("switchguid=0x5\ncaguid=0x6\n", 2, "a Switch line for the GUID of line 1");
    parse_bad("switchguid=0x5\nSwitch 4 \"a\"\nswitchguid=0x5\nSwitch 4 \"b\"\n", 4,
              "a unique GUID (0x0000000000000005 is \"a\" of line 2), found '\"b\"'");
    /* Key=value lines and port line syntax. */
    parse_bad("vendid=xyz\n", 1, "a hexadecimal value, found 'xyz'");
    parse_bad("color=0x1\n", 1, "vendid=, devid=");
    parse_bad("devid=0x1 x\n", 1, "'#' or the end of the line, found 'x'");
    snprintf(buf, sizeof(buf), "%s[1] H-2[1]\n", sw);
    parse_bad(buf, 2, "a quoted peer id");
    snprintf(buf, sizeof(buf), "%s[1] \"H-2\"\n", sw);
    parse_bad(buf, 2, "a peer port number in 1..255 in brackets, found end of line");
    snprintf(buf, sizeof(buf), "%s[1] \"H-2\"[1] x\n", sw);
    parse_bad(buf, 2, "'#' or the end of the port line, found 'x'");
    snprintf(buf, sizeof(buf), "%s[1][ext] \"H-2\"[1]\n", sw);
    parse_bad(buf, 2, "\"[ext N]\" or a port GUID");
    snprintf(buf, sizeof(buf), "%s[1](zz) \"H-2\"[1]\n", sw);
    parse_bad(buf, 2, "\"[ext N]\" or a port GUID");
    parse_bad("", 1, "at least one Switch or Ca line, found end of file");
    parse_bad("# only a comment\n\n", 2, "at least one Switch or Ca line");
    /* found by fuzz_topo: routers are dropped, so this used to load as an
     * empty fabric */
    parse_bad("rtguid=0x1\nRt 1 \"R-1\" # \"r\"\n", 2, "at least one Switch or Ca line");
}

static void test_load_errors(void **state)
{
    char err[512] = "", path[] = "/tmp/test_topo_XXXXXX";
    aggmgr_topo_t t;
    FILE *f;
    int fd;

    (void)state;
    memset(&t, 0, sizeof(t));
    assert_int_equal(aggmgr_topo_load(DATA("no_such.topo"), &t, err, sizeof(err)),
                     AGG_ERR_IO);
    assert_non_null(strstr(err, "no_such.topo: cannot open"));
    assert_int_equal(aggmgr_topo_load(DATA("no_such.topo"), &t, NULL, 0), AGG_ERR_IO);

    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fwrite("# a\n# b\nSwi\0tch\n", 1, 16, f);
    fclose(f);
    assert_int_equal(aggmgr_topo_load(path, &t, err, sizeof(err)), AGG_ERR_PARSE);
    assert_non_null(strstr(err, ":3: expected text, found a NUL byte"));
    unlink(path);
    assert_int_equal(aggmgr_topo_parse(NULL, "x", &t, err, sizeof(err)),
                     AGG_ERR_INVALID_PARAM);
}

static void test_fat_tree(void **state)
{
    aggmgr_topo_t t;
    int l, s, h, ca, leaf;

    (void)state;
    assert_int_equal(aggmgr_topo_fat_tree(4, 2, 3, &t), AGG_OK);
    assert_int_equal(t.num_switches, 6);
    assert_int_equal(t.num_cas, 12);
    assert_int_equal(t.num_nodes, 18);
    assert_string_equal(t.source, "fat-tree 4:2:3");
    assert_string_equal(t.nodes[0].desc, "spine1");
    assert_string_equal(t.nodes[1].desc, "spine2");
    assert_string_equal(t.nodes[2].desc, "leaf1");
    assert_string_equal(t.nodes[5].desc, "leaf4");
    assert_string_equal(t.nodes[6].desc, "host1 mlx5_0");
    assert_string_equal(t.nodes[17].desc, "host12 mlx5_0");
    assert_true(t.nodes[0].guid == 0x0002c90300000001ull);
    assert_string_equal(t.nodes[0].id, "S-0002c90300000001");
    assert_true(t.nodes[6].guid == 0x0002c90300100010ull);
    assert_string_equal(t.nodes[6].id, "H-0002c90300100010");
    assert_int_equal(t.nodes[0].num_ports, 4);
    assert_int_equal(t.nodes[2].num_ports, 5);
    assert_int_equal(t.nodes[6].num_ports, 1);
    assert_int_equal(aggmgr_topo_find_guid(&t, t.nodes[9].guid), 9);
    for (l = 0; l < 4; l++) {
        leaf = 2 + l;
        assert_int_equal(t.nodes[leaf].type, AGGMGR_NODE_SWITCH);
        for (h = 0; h < 3; h++) {
            ca = l * 3 + h;
            assert_int_equal(t.cas[ca], 6 + ca);
            assert_int_equal(t.ca_switch[ca], leaf);
            assert_int_equal(t.nodes[6 + ca].type, AGGMGR_NODE_CA);
            assert_link(&t, leaf, h + 1, 6 + ca, 1);
        }
        for (s = 0; s < 2; s++) {
            assert_link(&t, leaf, 3 + s + 1, s, l + 1);
        }
    }
    assert_round_trip(&t);
    aggmgr_topo_free(&t);

    /* One leaf and no spine is a single switch; no hosts is fine too. */
    assert_int_equal(aggmgr_topo_fat_tree(1, 0, 4, &t), AGG_OK);
    assert_int_equal(t.num_nodes, 5);
    assert_round_trip(&t);
    aggmgr_topo_free(&t);
    assert_int_equal(aggmgr_topo_fat_tree(3, 2, 0, &t), AGG_OK);
    assert_int_equal(t.num_cas, 0);
    assert_round_trip(&t);
    aggmgr_topo_free(&t);

    /* A large one round-trips too. */
    assert_int_equal(aggmgr_topo_fat_tree(200, 36, 36, &t), AGG_OK);
    assert_int_equal(t.num_cas, 7200);
    assert_round_trip(&t);
    aggmgr_topo_free(&t);

    assert_int_equal(aggmgr_topo_fat_tree(0, 2, 2, &t), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_topo_fat_tree(2, -1, 2, &t), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_topo_fat_tree(1, 0, 0, &t), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_topo_fat_tree(256, 2, 2, &t), AGG_ERR_INVALID_PARAM);
    assert_int_equal(aggmgr_topo_fat_tree(2, 200, 56, &t), AGG_ERR_INVALID_PARAM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fabric),
        cmocka_unit_test(test_parse_grouped_and_router),
        cmocka_unit_test(test_parse_ibsim_capture),
        cmocka_unit_test(test_parse_plain_ids),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_strings),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_fat_tree),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
