/*
 * aggmgr: the aggregation manager daemon.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/sock.h"
#include "aggmgr.h"

extern char **environ;

static volatile int aggmgr_stop_flag;
static volatile int aggmgr_reload_flag;

static void aggmgr_on_signal(int sig)
{
    if (sig == SIGHUP) {
        aggmgr_reload_flag = 1;
    } else {
        aggmgr_stop_flag = 1;
    }
}

static void aggmgr_usage(FILE *out)
{
    fprintf(out,
            "usage: aggmgr [-c FILE] [--topology FILE | --fat-tree L:S:H] [--listen HOST:PORT]\n"
            "              [--ready-fd N] [--print-topology]\n"
            "  -c, --config FILE   libconfig file (settings: agg_info -c -s manager)\n"
            "  --topology FILE     fabric in ibnetdiscover format (setting am_topology)\n"
            "  --fat-tree L:S:H    built-in two-level fat tree: L leaves, S spines, H hosts per leaf\n"
            "  --listen HOST:PORT  control address (setting am_addr; port 0 picks a free one)\n"
            "  --ready-fd N        write \"HOST:PORT\\n\" to fd N once listening\n"
            "  --print-topology    print the fabric in ibnetdiscover format and exit\n");
}

static agg_status_t aggmgr_load_topology(aggmgr_t *am)
{
    const char *path = agg_conf_str(&am->conf, AGG_CONF_AM_TOPOLOGY);
    char err[512];
    agg_status_t st;

    if (path[0] != '\0') {
        st = aggmgr_topo_load(path, &am->topo, err, sizeof(err));
        if (st != AGG_OK) {
            fprintf(stderr, "aggmgr: %s\n", err);
            return st;
        }
    } else {
        st = aggmgr_topo_fat_tree((int)agg_conf_int(&am->conf, AGG_CONF_AM_FAT_TREE_LEAVES),
                                  (int)agg_conf_int(&am->conf, AGG_CONF_AM_FAT_TREE_SPINES),
                                  (int)agg_conf_int(&am->conf,
                                                    AGG_CONF_AM_FAT_TREE_HOSTS_PER_LEAF),
                                  &am->topo);
        if (st != AGG_OK) {
            fprintf(stderr, "aggmgr: cannot build the default fat tree: %s\n",
                    agg_status_string(st));
            return st;
        }
    }
    if (am->topo.num_switches == 0 || am->topo.num_cas == 0) {
        fprintf(stderr, "aggmgr: topology %s has %d switches and %d host adapters; "
                "it needs at least one of each\n", am->topo.source, am->topo.num_switches,
                am->topo.num_cas);
        return AGG_ERR_TOPOLOGY;
    }
    return AGG_OK;
}

static int aggmgr_set(aggmgr_t *am, agg_conf_id_t id, const char *val, const char *flag)
{
    char err[512];

    if (agg_conf_set(&am->conf, id, val, AGG_CONF_SRC_CMDLINE, flag, err, sizeof(err)) !=
        AGG_OK) {
        fprintf(stderr, "aggmgr: %s: %s\n", flag, err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"topology", required_argument, NULL, 't'},
        {"fat-tree", required_argument, NULL, 'f'},
        {"listen", required_argument, NULL, 'l'},
        {"ready-fd", required_argument, NULL, 'r'},
        {"print-topology", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static aggmgr_t am;
    const char *topology = NULL, *fat_tree = NULL, *listen_addr = NULL;
    struct sigaction sa = {0};
    int ready_fd = -1, print_topo = 0, c, port, rc = 1;
    char err[512], ready[300];

    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': am.config_path = optarg; break;
        case 't': topology = optarg; break;
        case 'f': fat_tree = optarg; break;
        case 'l': listen_addr = optarg; break;
        case 'r': ready_fd = atoi(optarg); break;
        case 'p': print_topo = 1; break;
        case 'h': aggmgr_usage(stdout); return 0;
        default: aggmgr_usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "aggmgr: unexpected argument '%s'\n", argv[optind]);
        aggmgr_usage(stderr);
        return 2;
    }
    agg_log_set_prefix("aggmgr");
    if (agg_conf_load(&am.conf, am.config_path, environ, err, sizeof(err)) != AGG_OK) {
        fprintf(stderr, "aggmgr: %s\n", err);
        return 2;
    }
    if ((topology && aggmgr_set(&am, AGG_CONF_AM_TOPOLOGY, topology, "--topology")) ||
        (listen_addr && aggmgr_set(&am, AGG_CONF_AM_ADDR, listen_addr, "--listen"))) {
        return 2;
    }
    if (fat_tree != NULL) {
        char l[32], s[32], h[32];
        if (sscanf(fat_tree, "%31[^:]:%31[^:]:%31s", l, s, h) != 3 ||
            aggmgr_set(&am, AGG_CONF_AM_FAT_TREE_LEAVES, l, "--fat-tree") ||
            aggmgr_set(&am, AGG_CONF_AM_FAT_TREE_SPINES, s, "--fat-tree") ||
            aggmgr_set(&am, AGG_CONF_AM_FAT_TREE_HOSTS_PER_LEAF, h, "--fat-tree")) {
            fprintf(stderr, "aggmgr: --fat-tree expects LEAVES:SPINES:HOSTS_PER_LEAF, "
                    "got '%s'\n", fat_tree);
            return 2;
        }
        if (aggmgr_set(&am, AGG_CONF_AM_TOPOLOGY, "", "--fat-tree")) {
            return 2;
        }
    }
    agg_log_set_level((int)agg_conf_int(&am.conf, AGG_CONF_LOG_LEVEL));
    agg_conf_check_env(environ, NULL, NULL);

    if (aggmgr_load_topology(&am) != AGG_OK) {
        return 2;
    }
    if (print_topo) {
        aggmgr_topo_write(&am.topo, stdout);
        aggmgr_topo_free(&am.topo);
        return 0;
    }
    am.ans     = calloc((size_t)am.topo.num_nodes, sizeof(*am.ans));
    am.ca_busy = calloc((size_t)am.topo.num_cas, 1);
    am.listen_fd = -1;
    if (am.ans == NULL || am.ca_busy == NULL) {
        fprintf(stderr, "aggmgr: out of memory\n");
        goto out;
    }
    aggmgr_resources_init(&am);
    if (aggmgr_journal_open(&am, err, sizeof(err)) != AGG_OK) {
        fprintf(stderr, "aggmgr: %s\n", err);
        rc = 2;
        goto out;
    }

    /* a descriptor for every connection it may keep, where the hard limit allows */
    agg_sock_fd_limit(AGGMGR_MAX_CONNS + 64);
    sa.sa_handler = aggmgr_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (aggmgr_server_listen(&am, &port) != AGG_OK) {
        fprintf(stderr, "aggmgr: cannot listen on %s (set AGG_AM_ADDR or --listen)\n",
                agg_conf_str(&am.conf, AGG_CONF_AM_ADDR));
        goto out;
    }
    agg_info("aggmgr listening on %s; fabric %s: %d switches, %d host adapters",
             am.listen_addr, am.topo.source, am.topo.num_switches, am.topo.num_cas);
    if (ready_fd >= 0) {
        int n = snprintf(ready, sizeof(ready), "%s\n", am.listen_addr);
        if (write(ready_fd, ready, (size_t)n) != n) {
            agg_warn("cannot write to --ready-fd %d: %s", ready_fd, strerror(errno));
        }
        close(ready_fd);
    }
    rc = aggmgr_server_run(&am, &aggmgr_stop_flag, &aggmgr_reload_flag) == AGG_OK ? 0 : 1;
    agg_info("aggmgr shutting down");

out:
    aggmgr_server_close(&am);
    aggmgr_topo_free(&am.topo);
    free(am.ans);
    free(am.ca_busy);
    return rc;
}
