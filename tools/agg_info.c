/*
 * agg_info: what this installation is and how it is configured. `agg_info -c`
 * answers "which value is in effect, and why" (the first question when an
 * offload silently does not happen), resolving settings exactly as the
 * programs do: defaults < file < environment.
 */
#include "agg/conf.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/gpu.h"
#include "agg/sock.h"
#include "agg/tls.h"

#define AGG__INFO_VERSION "agg 0.1"

extern char **environ;

static void agg__info_usage(FILE *out)
{
    fprintf(out,
            "usage: agg_info [-c [-s SCOPE[,SCOPE...]] [-f FILE]] [-S] [-g] [-h]\n"
            "  -c          print every setting: value, where it came from, and doc\n"
            "  -S          ask the running aggmgr (am_addr / $AGG_AM_ADDR) for its fabric\n"
            "              and its switchsim's counters: is anything being offloaded?\n"
            "  -s SCOPE    only settings read by SCOPE: client, shim, manager, sim, all\n"
            "              (implies -c)\n"
            "  -f FILE     read FILE (libconfig) instead of $AGG_CONFIG_FILE (implies -c)\n"
            "  -e WHICH    write the example settings file WHICH (aggmgr or libagg) at its\n"
            "              defaults: what conf/aggmgr.conf and conf/libagg.conf hold\n"
            "  -g, --gpu   GPU devices: backend, pointer attributes, device memory from\n"
            "              the host (large BAR), dma-buf export, pinned copy rates, and\n"
            "              what to change for each problem found\n"
            "  -h          this help\n"
            "Settings resolve as default < file < environment. Integers take\n"
            "decimal or 0x hex and a k/m/g/t suffix (powers of 1024).\n");
}

/* "client,shim" -> a scope mask; 0 when a name is unknown. */
static unsigned agg__info_parse_scope(const char *arg)
{
    static const struct {
        const char *name;
        unsigned    mask;
    } names[] = {
        {"client", AGG_CONF_SCOPE_CLIENT},   {"shim", AGG_CONF_SCOPE_SHIM},
        {"manager", AGG_CONF_SCOPE_MANAGER}, {"aggmgr", AGG_CONF_SCOPE_MANAGER},
        {"sim", AGG_CONF_SCOPE_SIM},         {"switchsim", AGG_CONF_SCOPE_SIM},
        {"all", AGG_CONF_SCOPE_ALL},
    };
    unsigned mask = 0;
    size_t i;

    while (*arg != '\0') {
        size_t len   = strcspn(arg, ",");
        unsigned one = 0;

        for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            if (strlen(names[i].name) == len && strncmp(arg, names[i].name, len) == 0) {
                one = names[i].mask;
            }
        }
        if (one == 0) {
            return 0;
        }
        mask |= one;
        arg += len;
        arg += (*arg == ',');
    }
    return mask;
}

/* -S: HELLO to the manager, then STATS (answered by its switchsim). */
static int agg__info_stats(const agg_conf_t *conf)
{
    agg_am_target_t am = agg_conf_am_target(conf);
    const char *addr = am.addr;
    int timeout = am.timeout_ms;
    agg_msg_hello_t hello = {.kind = AGG_PEER_TOOL, .pid = (uint32_t)getpid()};
    agg_msg_hello_reply_t hrep;
    agg_msg_stats_reply_t srep;
    char err[512];
    size_t len;
    int fd, rc = 1;

    if (agg_am_connect(&am, 0, &fd, err, sizeof(err)) != AGG_OK) {
        fprintf(stderr, "agg_info: %s\n", err);
        return 1;
    }
    gethostname(hello.host, sizeof(hello.host) - 1);
    agg_wire_swap(&hello, AGG_FMT_HELLO, 1);
    if (agg_msg_call(fd, AGG_MSG_HELLO, &hello, sizeof(hello), AGG_MSG_HELLO_REPLY, &hrep,
                     sizeof(hrep), &len, timeout) != AGG_OK || len != sizeof(hrep)) {
        fprintf(stderr, "agg_info: %s does not speak the aggregation protocol\n", addr);
        goto out;
    }
    agg_wire_swap(&hrep, AGG_FMT_HELLO_REPLY, 1);
    printf("aggmgr at %s: pid %u, fabric of %u switches and %u host adapters\n", addr,
           hrep.mgr_pid, hrep.num_switches, hrep.num_cas);
    {
        /* what the manager holds: jobs, groups, switches in use, switchsims */
        agg_msg_status_t *state = malloc(sizeof(*state) + AGG_STATE_TEXT_MAX);

        if (state == NULL || agg_msg_call(fd, AGG_MSG_STATE, NULL, 0, AGG_MSG_STATE_REPLY,
                                          state, sizeof(*state) + AGG_STATE_TEXT_MAX, &len,
                                          timeout) != AGG_OK || len < sizeof(*state)) {
            fprintf(stderr, "agg_info: no answer to the state request\n");
            free(state);
            goto out;
        }
        agg_wire_swap(state, AGG_FMT_STATUS, 1);
        if (state->status == AGG_OK && len > sizeof(*state)) {
            ((char *)state)[len - 1] = '\0';
            fputs((const char *)(state + 1), stdout);
        }
        free(state);
    }
    /* aggmgr answers when every switchsim has, or its am_sim_timeout_ms is up */
    if (agg_msg_call(fd, AGG_MSG_STATS, NULL, 0, AGG_MSG_STATS_REPLY, &srep, sizeof(srep),
                     &len, timeout + (int)agg_conf_int(conf, AGG_CONF_AM_SIM_TIMEOUT_MS)) !=
        AGG_OK) {
        fprintf(stderr, "agg_info: no answer to the counters request\n");
        goto out;
    }
    if (len != sizeof(srep)) {
        agg_wire_swap(&srep, AGG_FMT_STATUS, 1);
        printf("switchsim counters: none (%s)\n", agg_status_string(srep.status));
        goto out;
    }
    agg_wire_swap(&srep, AGG_FMT_STATS_REPLY, 1);
    printf("switchsim: %u groups now (%u SAT), %llu since start, %u reduction threads\n",
           srep.groups, srep.sat_groups, (unsigned long long)srep.groups_total, srep.workers);
    agg_wire_stats_print(&srep, stdout);
    rc = 0;
out:
    agg_tls_close(fd);
    return rc;
}

static const char agg__info_aggmgr_header[] =
    "# aggmgr.conf: every setting the aggregation manager reads, at its default.\n"
    "# Written by agg_info -e aggmgr from the settings table.\n"
    "#\n"
    "# libconfig syntax: \"key = value;\" at the top level, \"#\" starts a comment.\n"
    "# Strings and host:port addresses go in double quotes; integers may be written\n"
    "# as strings with a k/m/g/t suffix (\"4k\"). A key left out keeps its default;\n"
    "# the environment variable named with each key overrides the file.\n"
    "# The an_* settings are read by switchsim too: give it the same values.\n"
    "# Check what is in effect with: agg_info -c -s manager -f aggmgr.conf\n";

static const char agg__info_libagg_header[] =
    "# libagg.conf: every setting the client library and the hcoll shim read, at its default.\n"
    "# Written by agg_info -e libagg from the settings table.\n"
    "#\n"
    "# Name this file in $AGG_CONFIG_FILE for every rank of a job.\n"
    "# libconfig syntax: \"key = value;\" at the top level, \"#\" starts a comment.\n"
    "# Strings and host:port addresses go in double quotes; integers may be written\n"
    "# as strings with a k/m/g/t suffix (\"16k\"). A key left out keeps its default;\n"
    "# the environment variable named with each key (SHARP_COLL_*, HCOLL_*, AGG_*)\n"
    "# overrides the file, so job scripts written for SHARP keep working.\n"
    "# Check what is in effect with: agg_info -c -s client,shim -f libagg.conf\n";

/* -e: an example settings file, straight from the table. */
static int agg__info_example(const char *which)
{
    if (strcmp(which, "aggmgr") == 0) {
        agg_conf_write_example(AGG_CONF_SCOPE_MANAGER, agg__info_aggmgr_header, stdout);
    } else if (strcmp(which, "libagg") == 0) {
        agg_conf_write_example(AGG_CONF_SCOPE_CLIENT | AGG_CONF_SCOPE_SHIM,
                               agg__info_libagg_header, stdout);
    } else {
        fprintf(stderr, "agg_info: -e '%s': expected aggmgr or libagg\n", which);
        return 2;
    }
    return 0;
}

static void agg__info_warn(const char *msg, void *arg)
{
    fprintf((FILE *)arg, "agg_info: warning: %s\n", msg);
}

int main(int argc, char **argv)
{
    unsigned scope   = AGG_CONF_SCOPE_ALL;
    const char *file = NULL;
    int show_conf    = 0;
    int show_stats   = 0;
    int show_gpu     = 0;
    static const struct option longs[] = {{"gpu", no_argument, NULL, 'g'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    agg_conf_t conf;
    char err[1024];
    int opt;

    while ((opt = getopt_long(argc, argv, "chs:f:Se:g", longs, NULL)) != -1) {
        switch (opt) {
        case 'g':
            show_gpu = 1;
            break;
        case 'e':
            return agg__info_example(optarg);
        case 'S':
            show_stats = 1;
            break;
        case 'c':
            show_conf = 1;
            break;
        case 's':
            scope = agg__info_parse_scope(optarg);
            if (scope == 0) {
                fprintf(stderr, "agg_info: unknown scope '%s'; expected client, shim, "
                                "manager, sim or all\n", optarg);
                return 2;
            }
            show_conf = 1;
            break;
        case 'f':
            file      = optarg;
            show_conf = 1;
            break;
        case 'h':
            agg__info_usage(stdout);
            return 0;
        default:
            agg__info_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "agg_info: unexpected argument '%s'\n", argv[optind]);
        agg__info_usage(stderr);
        return 2;
    }

    if (!show_conf && !show_stats && !show_gpu) {
        printf("%s\n\n", AGG__INFO_VERSION);
        agg__info_usage(stdout);
        return 0;
    }

    agg_conf_check_env(environ, agg__info_warn, stderr);
    if (agg_conf_load(&conf, file, environ, err, sizeof(err)) != AGG_OK) {
        fprintf(stderr, "agg_info: %s\n", err);
        return 1;
    }
    if (show_gpu) {
        return agg_gpu_report(stdout, &conf);
    }
    if (show_stats) {
        return agg__info_stats(&conf);
    }
    printf("# %s settings: default < file < environment\n", AGG__INFO_VERSION);
    agg_conf_dump(&conf, scope, stdout);
    return 0;
}
