/*
 * The settings table and its loaders: every row is well formed and
 * round-trips, the sources stack as default < file < environment, and every
 * kind of bad input is reported with where it is and what was expected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agg/conf.h"
#include "agg/sock.h"

#define DATA(_name) AGG_TEST_DATA "/" _name
#define EXAMPLE(_name) AGG_TEST_DATA "/../../conf/" _name

static void assert_contains(const char *text, const char *part)
{
    if (strstr(text, part) == NULL) {
        fail_msg("\"%s\" does not contain \"%s\"", text, part);
    }
}

/* A setting declared in conf.h with no row in the table would be all zeros. */
static void test_table_every_id_has_a_row(void **state)
{
    int id;

    for (id = 0; id < AGG_CONF__COUNT; id++) {
        assert_non_null(agg_conf_table[id].key);
        assert_int_equal(agg_conf_row_id(&agg_conf_table[id]), id);
        assert_ptr_equal(agg_conf_find_key(agg_conf_table[id].key), &agg_conf_table[id]);
    }
}

static void test_table_rows_well_formed(void **state)
{
    static const char *const prefixes[] = {"SHARP_COLL_", "HCOLL_", "AGG_"};
    int a, b, k, l;

    for (a = 0; a < AGG_CONF__COUNT; a++) {
        const agg_conf_row_t *row = &agg_conf_table[a];

        assert_non_null(row->env[0]);
        assert_non_null(row->defval);
        assert_non_null(row->doc);
        assert_true(strlen(row->doc) > 10);
        assert_true(row->scope != 0 && (row->scope & ~(unsigned)AGG_CONF_SCOPE_ALL) == 0);
        if (row->type == AGG_CONF_T_INT) {
            assert_true(row->min <= row->max);
        }
        assert_ptr_equal(agg_conf_find_key(row->key), row);
        for (k = 0; k < 3 && row->env[k] != NULL; k++) {
            size_t p;
            int ok = 0;

            for (p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
                ok |= strncmp(row->env[k], prefixes[p], strlen(prefixes[p])) == 0;
            }
            if (!ok) {
                fail_msg("%s: env name %s has no SHARP_COLL_/HCOLL_/AGG_ prefix", row->key,
                         row->env[k]);
            }
            assert_ptr_equal(agg_conf_find_env(row->env[k]), row);
        }
        assert_null(row->env[2]);
        for (b = a + 1; b < AGG_CONF__COUNT; b++) {
            const agg_conf_row_t *other = &agg_conf_table[b];

            assert_string_not_equal(row->key, other->key);
            for (k = 0; k < 3 && row->env[k] != NULL; k++) {
                for (l = 0; l < 3 && other->env[l] != NULL; l++) {
                    assert_string_not_equal(row->env[k], other->env[l]);
                }
            }
        }
    }
    assert_null(agg_conf_find_key("no_such_key"));
    assert_null(agg_conf_find_env("AGG_CONFIG_FILE"));
}

static void test_defaults_round_trip(void **state)
{
    agg_conf_t conf, again;
    char err[512];
    int id;

    agg_conf_init(&conf);
    agg_conf_init(&again);
    for (id = 0; id < AGG_CONF__COUNT; id++) {
        const agg_conf_row_t *row = &agg_conf_table[id];
        agg_conf_value_t def      = conf.v[id];

        assert_int_equal(def.source, AGG_CONF_SRC_DEFAULT);
        assert_string_equal(def.where, "default");

        /* the default text itself is valid... */
        err[0] = '\0';
        if (agg_conf_set(&again, id, row->defval, AGG_CONF_SRC_CMDLINE, "test", err,
                         sizeof(err)) != AGG_OK) {
            fail_msg("%s: default '%s' rejected: %s", row->key, row->defval, err);
        }
        /* ...and the stored text reads back as the same value */
        assert_int_equal(agg_conf_set(&again, id, def.s, AGG_CONF_SRC_CMDLINE, "test", err,
                                      sizeof(err)),
                         AGG_OK);
        assert_int_equal(again.v[id].i, def.i);
        assert_string_equal(again.v[id].s, def.s);
        assert_int_equal(again.v[id].source, AGG_CONF_SRC_CMDLINE);
        assert_string_equal(again.v[id].where, "test");
    }
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_LOG_LEVEL), 2);
    assert_string_equal(agg_conf_str(&conf, AGG_CONF_AM_ADDR), "127.0.0.1:6126");
    assert_string_equal(agg_conf_str(&conf, AGG_CONF_AM_TOPOLOGY), "");
}

static long long set_int(agg_conf_id_t id, const char *text)
{
    agg_conf_t conf;
    char err[512];

    agg_conf_init(&conf);
    if (agg_conf_set(&conf, id, text, AGG_CONF_SRC_CMDLINE, NULL, err, sizeof(err)) !=
        AGG_OK) {
        fail_msg("'%s' rejected: %s", text, err);
    }
    assert_string_equal(conf.v[id].where, "command line");
    return agg_conf_int(&conf, id);
}

static void expect_rejected(agg_conf_id_t id, const char *text, const char *part)
{
    agg_conf_t conf, before;
    char err[512] = "";

    agg_conf_init(&conf);
    before = conf;
    assert_int_equal(agg_conf_set(&conf, id, text, AGG_CONF_SRC_CMDLINE, NULL, err,
                                  sizeof(err)),
                     AGG_ERR_CONFIG);
    assert_contains(err, part);
    assert_memory_equal(&conf, &before, sizeof(conf));
}

static void test_int_parsing(void **state)
{
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "16k"), 16384);
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "16K"), 16384);
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "3m"), 3LL << 20);
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "2G"), 2LL << 30);
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "1t"), 1LL << 40);
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "0x10"), 16);
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "0x4k"), 4096);
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, "010"), 10); /* not octal */
    assert_int_equal(set_int(AGG_CONF_SAT_THRESHOLD, " 7 "), 7);
    assert_int_equal(set_int(AGG_CONF_HCOLL_ALLREDUCE_SHARP_MAX, "1024t"), 1LL << 50);
    assert_int_equal(set_int(AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST, "0"), 0); /* ZERO_OK */
    assert_int_equal(set_int(AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST, "4k"), 4096);

    expect_rejected(AGG_CONF_SAT_THRESHOLD, "12abc", "expected an integer in 0..1099511627776");
    expect_rejected(AGG_CONF_SAT_THRESHOLD, "16kb", "expected an integer");
    expect_rejected(AGG_CONF_SAT_THRESHOLD, "", "expected an integer");
    expect_rejected(AGG_CONF_SAT_THRESHOLD, "0x", "expected an integer");
    expect_rejected(AGG_CONF_SAT_THRESHOLD, "1.5", "expected an integer");
    expect_rejected(AGG_CONF_SAT_THRESHOLD, "2t", "0..1099511627776");
    expect_rejected(AGG_CONF_SAT_THRESHOLD, "99999999999999999999", "expected an integer");
    expect_rejected(AGG_CONF_SAT_THRESHOLD, "16777216t", "expected an integer");
    expect_rejected(AGG_CONF_LOG_LEVEL, "-1", "expected an integer in 0..5");
    expect_rejected(AGG_CONF_LOG_LEVEL, "6", "command line: log_level=6: expected an "
                                             "integer in 0..5");
    expect_rejected(AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST, "64",
                    "expected 0 or an integer in 128..4096");
    expect_rejected(AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST, "8k", "128..4096");
}

static void test_bool_parsing(void **state)
{
    static const char *const yes[] = {"1", "y", "Y", "yes", "YES", "true", "True", "on", "ON"};
    static const char *const no[]  = {"0", "n", "N", "no", "No", "false", "FALSE", "off"};
    size_t i;

    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        assert_int_equal(set_int(AGG_CONF_ENABLE_SAT, yes[i]), 1);
    }
    for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        assert_int_equal(set_int(AGG_CONF_ENABLE_SAT, no[i]), 0);
    }
    expect_rejected(AGG_CONF_ENABLE_SAT, "2", "expected a boolean");
    expect_rejected(AGG_CONF_ENABLE_SAT, "yess", "expected a boolean");
    expect_rejected(AGG_CONF_ENABLE_SAT, "", "expected a boolean");
}

static void test_addr(void **state)
{
    char host[64];
    int port = -1;

    assert_int_equal(agg_sock_addr_parse("127.0.0.1:6126", host, sizeof(host), &port, NULL, 0), AGG_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6126);
    assert_int_equal(agg_sock_addr_parse("node-17.cluster:0", host, sizeof(host), &port, NULL, 0),
                     AGG_OK);
    assert_string_equal(host, "node-17.cluster");
    assert_int_equal(port, 0);
    assert_int_equal(agg_sock_addr_parse("[::1]:65535", host, sizeof(host), &port, NULL, 0), AGG_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 65535);

    /* outputs stay as they were on failure */
    port = 42;
    strcpy(host, "unchanged");
    assert_int_equal(agg_sock_addr_parse("host", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse(":80", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("host:", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("host:65536", host, sizeof(host), &port, NULL, 0),
                     AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("host:-1", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("host:80x", host, sizeof(host), &port, NULL, 0),
                     AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("::1:80", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("[::1:80", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("[]:80", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("a b:80", host, sizeof(host), &port, NULL, 0), AGG_ERR_PARSE);
    assert_int_equal(agg_sock_addr_parse("longhostname:80", host, 4, &port, NULL, 0),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(port, 42);
    assert_string_equal(host, "unchanged");

    expect_rejected(AGG_CONF_AM_ADDR, "localhost", "expected host:port with port in 0..65535");
    expect_rejected(AGG_CONF_AM_ADDR, "localhost:99999", "port '99999'");
    expect_rejected(AGG_CONF_AM_ADDR, ":6126", "empty host");
    expect_rejected(AGG_CONF_AM_ADDR, "::1:6126", "brackets");
}

static void test_precedence(void **state)
{
    char *envp[] = {"SHARP_COLL_LOG_LEVEL=4", "AGG_AM_MAX_JOBS=0x20", "PATH=/bin", NULL};
    agg_conf_t conf;
    char err[512] = "";

    /* file over defaults */
    agg_conf_init(&conf);
    if (agg_conf_load_file(&conf, DATA("conf_valid.conf"), err, sizeof(err)) != AGG_OK) {
        fail_msg("%s", err);
    }
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_LOG_LEVEL), 3);
    assert_int_equal(conf.v[AGG_CONF_LOG_LEVEL].source, AGG_CONF_SRC_FILE);
    assert_string_equal(conf.v[AGG_CONF_LOG_LEVEL].where, DATA("conf_valid.conf") ":2");
    assert_string_equal(agg_conf_str(&conf, AGG_CONF_AM_ADDR), "10.0.0.1:7000");
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_JOB_QUOTA_PAYLOAD_PER_OST), 2048);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_ENABLE_SAT), 1);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_SAT_THRESHOLD), 65536);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_SPIN_COUNT), 256);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_HCOLL_ALLREDUCE_SHARP_MAX), 1LL << 50);
    assert_string_equal(agg_conf_str(&conf, AGG_CONF_AM_TOPOLOGY), "/etc/agg/fabric.topo");
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_HCOLL_ENABLE_SHARP), 2);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_AM_MAX_JOBS), 64);
    assert_int_equal(conf.v[AGG_CONF_AM_MAX_JOBS].source, AGG_CONF_SRC_DEFAULT);

    /* environment over the file */
    assert_int_equal(agg_conf_load_env(&conf, envp, err, sizeof(err)), AGG_OK);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_LOG_LEVEL), 4);
    assert_int_equal(conf.v[AGG_CONF_LOG_LEVEL].source, AGG_CONF_SRC_ENV);
    assert_string_equal(conf.v[AGG_CONF_LOG_LEVEL].where, "env SHARP_COLL_LOG_LEVEL");
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_AM_MAX_JOBS), 32);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_SAT_THRESHOLD), 65536);

    /* the whole sequence, the file named by the path... */
    assert_int_equal(agg_conf_load(&conf, DATA("conf_valid.conf"), envp, err, sizeof(err)),
                     AGG_OK);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_LOG_LEVEL), 4);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_SPIN_COUNT), 256);

    /* ...or by AGG_CONFIG_FILE, which starts over from the defaults */
    {
        char *envp_file[] = {"AGG_CONFIG_FILE=" DATA("conf_valid.conf"), NULL};
        char *envp_none[] = {"AGG_CONFIG_FILE=", NULL};

        conf.v[AGG_CONF_AM_MAX_JOBS].i = 5;
        assert_int_equal(agg_conf_load(&conf, NULL, envp_file, err, sizeof(err)), AGG_OK);
        assert_int_equal(agg_conf_int(&conf, AGG_CONF_LOG_LEVEL), 3);
        assert_int_equal(agg_conf_int(&conf, AGG_CONF_AM_MAX_JOBS), 64);
        assert_int_equal(agg_conf_load(&conf, NULL, envp_none, err, sizeof(err)), AGG_OK);
        assert_int_equal(agg_conf_int(&conf, AGG_CONF_LOG_LEVEL), 2);
    }
}

/* Loads a file that must fail; checks the status, the message and that nothing changed. */
static void expect_file_error(const char *path, agg_status_t status, const char *part1,
                              const char *part2)
{
    agg_conf_t conf, before;
    char err[512] = "";

    agg_conf_init(&conf);
    before = conf;
    assert_int_equal(agg_conf_load_file(&conf, path, err, sizeof(err)), status);
    assert_contains(err, part1);
    assert_contains(err, part2);
    assert_memory_equal(&conf, &before, sizeof(conf));
}

/* A setting's name inside an earlier string on the same line is not the setting. */
static void test_key_in_string(void **state)
{
    agg_conf_t conf;
    char err[512] = "";

    agg_conf_init(&conf);
    assert_int_equal(agg_conf_load_file(&conf, DATA("conf_key_in_string.conf"), err,
                                        sizeof(err)), AGG_OK);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_LOG_LEVEL), 3);
    assert_string_equal(agg_conf_str(&conf, AGG_CONF_AM_TOPOLOGY), "log_level=9");
}

static void test_file_errors(void **state)
{
    /* libconfig would exit the process on @include "." */
    expect_file_error(DATA("conf_include.conf"), AGG_ERR_PARSE,
                      DATA("conf_include.conf") ":3: @include is not supported",
                      "put every setting in one file");
    expect_file_error(DATA("conf_syntax.conf"), AGG_ERR_PARSE, DATA("conf_syntax.conf") ":4: ",
                      "syntax error");
    expect_file_error(DATA("conf_unknown_key.conf"), AGG_ERR_CONFIG,
                      DATA("conf_unknown_key.conf") ":3: unknown setting 'log_levle'",
                      "(did you mean 'log_level'?)");
    expect_file_error(DATA("conf_env_name.conf"), AGG_ERR_CONFIG,
                      DATA("conf_env_name.conf") ":2: unknown setting 'SHARP_COLL_LOG_LEVEL'",
                      "did you mean 'log_level'?");
    /* the valid line before the bad one is not applied either */
    expect_file_error(DATA("conf_range.conf"), AGG_ERR_CONFIG,
                      DATA("conf_range.conf") ":3: osts_per_group = 1: ",
                      "expected an integer in 2..512");
    expect_file_error(DATA("conf_type.conf"), AGG_ERR_CONFIG, DATA("conf_type.conf") ":2: ",
                      "expected host:port with port in 0..65535 in double quotes, not an "
                      "integer");
    expect_file_error(DATA("conf_int32.conf"), AGG_ERR_CONFIG, DATA("conf_int32.conf") ":2: ",
                      "sat_threshold = 8589934592: libconfig keeps only 32 bits of a "
                      "number; write 8589934592L");
    expect_file_error(DATA("no_such_file.conf"), AGG_ERR_IO, DATA("no_such_file.conf"),
                      "cannot open");
    expect_file_error(AGG_TEST_DATA, AGG_ERR_IO, AGG_TEST_DATA, "directory");
}

static void test_load_errors(void **state)
{
    char *envp_missing[] = {"AGG_CONFIG_FILE=/nonexistent/agg.conf", NULL};
    char *envp_bad[]     = {"AGG_SPIN_COUNT=7", "SHARP_COLL_LOG_LEVEL=9", NULL};
    agg_conf_t conf, before;
    char err[512] = "";

    agg_conf_init(&conf);
    before = conf;
    assert_int_equal(agg_conf_load_env(&conf, envp_bad, err, sizeof(err)), AGG_ERR_CONFIG);
    assert_string_equal(err, "SHARP_COLL_LOG_LEVEL=9: expected an integer in 0..5");
    assert_memory_equal(&conf, &before, sizeof(conf));

    assert_int_equal(agg_conf_load(&conf, NULL, envp_missing, err, sizeof(err)), AGG_ERR_IO);
    assert_contains(err, "/nonexistent/agg.conf: cannot open");
    assert_contains(err, "AGG_CONFIG_FILE");
    assert_int_equal(agg_conf_load(&conf, DATA("conf_valid.conf"), envp_bad, err, sizeof(err)),
                     AGG_ERR_CONFIG);
    assert_memory_equal(&conf, &before, sizeof(conf));
    assert_int_equal(agg_conf_load(&conf, DATA("conf_range.conf"), envp_missing, err,
                                   sizeof(err)),
                     AGG_ERR_CONFIG);
    assert_contains(err, "2..512");
    assert_memory_equal(&conf, &before, sizeof(conf));
}

typedef struct {
    int  calls;
    char msgs[4][512];
} warnings_t;

static void collect_warning(const char *msg, void *arg)
{
    warnings_t *w = arg;

    if (w->calls < 4) {
        snprintf(w->msgs[w->calls], sizeof(w->msgs[0]), "%s", msg);
    }
    w->calls++;
}

static void test_check_env(void **state)
{
    char *envp[] = {
        "SHARP_COLL_LOG_LEVLE=3",           /* typo: suggest the real name */
        "AGG_CONFIG_FILE=/etc/agg.conf",    /* known, not a setting */
        "SHARP_COLL_LOG_LEVEL=2",           /* known */
        "PATH=/bin:/usr/bin",               /* not ours */
        "HCOLL_QUUX_ZORP=1",                /* ours, nothing close */
        "AGG_AM_ADR=10.0.0.1:1",            /* typo */
        "HOME=/root",
        NULL,
    };
    warnings_t w;

    memset(&w, 0, sizeof(w));
    assert_int_equal(agg_conf_check_env(envp, collect_warning, &w), 3);
    assert_int_equal(w.calls, 3);
    assert_string_equal(w.msgs[0], "unknown variable SHARP_COLL_LOG_LEVLE=3 ignored; did you "
                                   "mean SHARP_COLL_LOG_LEVEL?");
    assert_string_equal(w.msgs[1], "unknown variable HCOLL_QUUX_ZORP=1 ignored");
    assert_contains(w.msgs[2], "did you mean AGG_AM_ADDR?");

    {
        char *clean[] = {"SHARP_COLL_ENABLE_SAT=1", "HCOLL_ENABLE_SHARP=3", NULL};

        memset(&w, 0, sizeof(w));
        assert_int_equal(agg_conf_check_env(clean, collect_warning, &w), 0);
        assert_int_equal(w.calls, 0);
    }
}

static char *dump_to_string(const agg_conf_t *conf, unsigned scope)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f    = open_memstream(&text, &len);

    assert_non_null(f);
    agg_conf_dump(conf, scope, f);
    fclose(f);
    return text;
}

static void test_dump(void **state)
{
    char *envp[] = {"HCOLL_ENABLE_SHARP=3", NULL};
    agg_conf_t conf;
    char err[512];
    char *text;
    int id;

    assert_int_equal(agg_conf_load(&conf, DATA("conf_valid.conf"), envp, err, sizeof(err)),
                     AGG_OK);
    text = dump_to_string(&conf, AGG_CONF_SCOPE_ALL);
    for (id = 0; id < AGG_CONF__COUNT; id++) {
        assert_contains(text, agg_conf_table[id].key);
        assert_contains(text, agg_conf_table[id].env[0]);
    }
    assert_contains(text, "log_level = 3   (source: " DATA("conf_valid.conf") ":2)");
    assert_contains(text, "hcoll_enable_sharp = 3   (source: env HCOLL_ENABLE_SHARP)");
    assert_contains(text, "am_max_jobs = 64   (source: default)");
    assert_contains(text, "am_addr = \"10.0.0.1:7000\"");
    assert_contains(text, "Takes an integer in 0..5; default 2; reloadable");
    assert_contains(text, "placement = \"packed\"   (source: default)");
    assert_contains(text, "Takes one of packed|spread");
    free(text);

    text = dump_to_string(&conf, AGG_CONF_SCOPE_MANAGER);
    assert_contains(text, "am_llt_quota_percent = 20");
    assert_contains(text, "log_level"); /* every program reads it */
    assert_null(strstr(text, "enable_sat"));
    assert_null(strstr(text, "hcoll_"));
    free(text);
}

/* The example files list every key of their scope, at its default. */
static void check_example(const char *path, unsigned scope)
{
    agg_conf_t conf;
    char err[512] = "";
    int id;

    agg_conf_init(&conf);
    if (agg_conf_load_file(&conf, path, err, sizeof(err)) != AGG_OK) {
        fail_msg("%s", err);
    }
    for (id = 0; id < AGG_CONF__COUNT; id++) {
        const agg_conf_row_t *row = &agg_conf_table[id];
        agg_conf_t def;

        if (!(row->scope & scope)) {
            continue;
        }
        agg_conf_init(&def);
        if (conf.v[id].source != AGG_CONF_SRC_FILE) {
            fail_msg("%s does not list %s", path, row->key);
        }
        if (strcmp(conf.v[id].s, def.v[id].s) != 0) {
            fail_msg("%s: %s = %s, but the default is %s", path, row->key, conf.v[id].s,
                     def.v[id].s);
        }
    }
}

/* The committed file is exactly what the table writes (agg_info -e). */
static void check_written(const char *path, unsigned scope, const char *first_line)
{
    char *want = NULL, *got = NULL;
    size_t want_len = 0, got_len = 0;
    FILE *mem, *f;
    char line[256];

    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof(line), f));
    assert_contains(line, first_line);
    fclose(f);
    /* the header is the file's own comment block, up to its first section */
    mem = open_memstream(&want, &want_len);
    f   = fopen(path, "r");
    while (fgets(line, sizeof(line), f) != NULL && strncmp(line, "# ----", 6) != 0 &&
           strcmp(line, "\n") != 0) {
        fputs(line, mem);
    }
    fclose(f);
    fclose(mem);
    mem = open_memstream(&got, &got_len);
    agg_conf_write_example(scope, want, mem);
    fclose(mem);
    free(want);
    f = fopen(path, "r");
    want     = calloc(1, got_len + 2);
    want_len = fread(want, 1, got_len + 1, f);
    fclose(f);
    if (want_len != got_len || memcmp(want, got, got_len) != 0) {
        fail_msg("%s is not what the settings table writes: run agg_info -e > %s", path, path);
    }
    free(want);
    free(got);
}

static void test_example_files(void **state)
{
    check_example(EXAMPLE("aggmgr.conf"), AGG_CONF_SCOPE_MANAGER);
    check_example(EXAMPLE("libagg.conf"), AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM);
    check_written(EXAMPLE("aggmgr.conf"), AGG_CONF_SCOPE_MANAGER, "aggmgr.conf");
    check_written(EXAMPLE("libagg.conf"), AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM,
                  "libagg.conf");
}

/* Enumerations: any case in, the table's spelling stored, a clear error otherwise. */
static void test_enum(void **state)
{
    agg_conf_t conf;
    char err[256] = "";

    agg_conf_init(&conf);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_PLACEMENT), 0);
    assert_int_equal(agg_conf_set(&conf, AGG_CONF_PLACEMENT, " Spread ", AGG_CONF_SRC_CMDLINE,
                                  NULL, err, sizeof(err)), AGG_OK);
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_PLACEMENT), 1);
    assert_string_equal(agg_conf_str(&conf, AGG_CONF_PLACEMENT), "spread");
    assert_int_equal(agg_conf_set(&conf, AGG_CONF_PLACEMENT, "spreadx", AGG_CONF_SRC_CMDLINE,
                                  NULL, err, sizeof(err)), AGG_ERR_CONFIG);
    assert_contains(err, "expected one of packed|spread");
    assert_int_equal(agg_conf_int(&conf, AGG_CONF_PLACEMENT), 1); /* unchanged */
    assert_int_equal(agg_conf_set(&conf, AGG_CONF_HCOLL_ZCOPY_TUNE, "DYNAMIC",
                                  AGG_CONF_SRC_ENV, NULL, err, sizeof(err)), AGG_OK);
    assert_string_equal(agg_conf_str(&conf, AGG_CONF_HCOLL_ZCOPY_TUNE), "dynamic");
    assert_int_equal(agg_conf_set(&conf, AGG_CONF_HCOLL_ZCOPY_TUNE, "", AGG_CONF_SRC_ENV,
                                  NULL, err, sizeof(err)), AGG_ERR_CONFIG);
}

static void test_set_invalid_id(void **state)
{
    agg_conf_t conf;
    char err[128] = "";

    agg_conf_init(&conf);
    assert_int_equal(agg_conf_set(&conf, AGG_CONF__COUNT, "1", AGG_CONF_SRC_CMDLINE, NULL, err,
                                  sizeof(err)),
                     AGG_ERR_INVALID_PARAM);
    assert_int_equal(agg_conf_set(&conf, AGG_CONF_LOG_LEVEL, "1", AGG_CONF_SRC_CMDLINE, NULL,
                                  NULL, 0),
                     AGG_OK);
    assert_int_equal(agg_conf_set(&conf, AGG_CONF_LOG_LEVEL, "x", AGG_CONF_SRC_CMDLINE, NULL,
                                  NULL, 0),
                     AGG_ERR_CONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_every_id_has_a_row),
        cmocka_unit_test(test_table_rows_well_formed),
        cmocka_unit_test(test_defaults_round_trip),
        cmocka_unit_test(test_int_parsing),
        cmocka_unit_test(test_bool_parsing),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_key_in_string),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_check_env),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_example_files),
        cmocka_unit_test(test_enum),
        cmocka_unit_test(test_set_invalid_id),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
