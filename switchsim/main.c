/*
 * switchsim: hosts aggregation nodes in software. Registers with aggmgr,
 * then serves group configuration on the control link while a data thread
 * reduces fragments arriving through shared memory.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/shm.h"
#include "agg/sock.h"
#include "switchsim.h"

extern char **environ;

static volatile sig_atomic_t switchsim_stop_flag;
static volatile sig_atomic_t switchsim_reload_flag;

static void switchsim_on_signal(int sig)
{
    if (sig == SIGHUP) {
        switchsim_reload_flag = 1;
    } else {
        switchsim_stop_flag = 1;
    }
}

static void switchsim_usage(FILE *out)
{
    fprintf(out,
            "usage: switchsim [-c FILE] [--am HOST:PORT] [--ready-fd N] [--stats-file PATH]\n"
            "  -c, --config FILE     libconfig file (default: $AGG_CONFIG_FILE)\n"
            "  --am HOST:PORT        aggmgr control address (default: setting am_addr)\n"
            "  --ready-fd N          write \"ready\\n\" to fd N once registered\n"
            "  --stats-file PATH     write the counters to PATH on exit\n"
            "Settings: agg_info -c -s sim\n");
}

static void switchsim_write_stats(switchsim_t *sim, const char *path)
{
    switchsim_stats_t s;
    FILE *f;

    switchsim_stats_snapshot(sim, &s);
    f = fopen(path, "w");
    if (f == NULL) {
        agg_error("cannot write stats file %s: %s", path, strerror(errno));
        return;
    }
    fprintf(f, "fragments_in %llu\nfragments_reduced %llu\nresults_out %llu\n"
               "bytes_in %llu\nerrors %llu\ngroups_total %llu\n",
            (unsigned long long)s.fragments_in, (unsigned long long)s.fragments_reduced,
            (unsigned long long)s.results_out, (unsigned long long)s.bytes_in,
            (unsigned long long)s.errors, (unsigned long long)s.groups_total);
    fclose(f);
}

static agg_status_t switchsim_connect(switchsim_t *sim)
{
    const char *addr = agg_conf_str(&sim->conf, AGG_CONF_AM_ADDR);
    int timeout = (int)agg_conf_int(&sim->conf, AGG_CONF_CONNECT_TIMEOUT_MS);
    int64_t deadline = agg_time_ms() + timeout;
    char host[256];
    int port;
    agg_status_t st;

    st = agg_conf_addr_split(addr, host, sizeof(host), &port);
    if (st != AGG_OK) {
        return st;
    }
    /* aggmgr may still be starting: retry until the connect timeout. */
    do {
        st = agg_sock_connect(host, port, timeout, &sim->am_fd);
        if (st == AGG_OK) {
            return AGG_OK;
        }
        usleep(20000);
    } while (agg_time_ms() < deadline && !switchsim_stop_flag);
    agg_error("cannot connect to aggmgr at %s within %d ms (is aggmgr running? "
              "set AGG_AM_ADDR or --am)", addr, timeout);
    return AGG_ERR_SESSION_INIT;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"am", required_argument, NULL, 'a'},
        {"ready-fd", required_argument, NULL, 'r'},
        {"stats-file", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static switchsim_t sim;
    const char *config = NULL, *am = NULL, *stats_file = NULL;
    struct sigaction sa = {0};
    char err[512];
    int ready_fd = -1, c, rc = 1;
    agg_status_t st;

    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': config = optarg; break;
        case 'a': am = optarg; break;
        case 'r': ready_fd = atoi(optarg); break;
        case 's': stats_file = optarg; break;
        case 'h': switchsim_usage(stdout); return 0;
        default: switchsim_usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "switchsim: unexpected argument '%s'\n", argv[optind]);
        switchsim_usage(stderr);
        return 2;
    }
    agg_log_set_prefix("switchsim");
    if (agg_conf_load(&sim.conf, config, environ, err, sizeof(err)) != AGG_OK ||
        (am != NULL && agg_conf_set(&sim.conf, AGG_CONF_AM_ADDR, am, AGG_CONF_SRC_CMDLINE,
                                    "--am", err, sizeof(err)) != AGG_OK)) {
        fprintf(stderr, "switchsim: %s\n", err);
        return 2;
    }
    agg_log_set_level((int)agg_conf_int(&sim.conf, AGG_CONF_LOG_LEVEL));
    sim.spin_count     = (long)agg_conf_int(&sim.conf, AGG_CONF_SPIN_COUNT);
    sim.spin_explicit  = sim.conf.v[AGG_CONF_SPIN_COUNT].source != AGG_CONF_SRC_DEFAULT;
    sim.num_cpus       = sysconf(_SC_NPROCESSORS_ONLN);
    sim.spin_effective = sim.spin_count;
    sim.am_fd      = -1;
    pthread_mutex_init(&sim.lock, NULL);

    sa.sa_handler = switchsim_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    snprintf(sim.bell_name, sizeof(sim.bell_name), "/agg-%d-bell", (int)getpid());
    agg_shm_unlink(sim.bell_name);
    st = agg_shm_create(sim.bell_name, sizeof(agg_shm_bell_t), (void **)&sim.bell);
    if (st != AGG_OK) {
        goto out;
    }
    sim.bell->magic   = AGG_SHM_BELL_MAGIC;
    sim.bell->version = AGG_SHM_VERSION;

    if (switchsim_connect(&sim) != AGG_OK ||
        switchsim_ctl_register(&sim, (int)agg_conf_int(&sim.conf,
                                                       AGG_CONF_CONNECT_TIMEOUT_MS)) != AGG_OK ||
        switchsim_dp_start(&sim) != AGG_OK) {
        goto out;
    }
    if (ready_fd >= 0) {
        if (write(ready_fd, "ready\n", 6) != 6) {
            agg_warn("cannot write to --ready-fd %d: %s", ready_fd, strerror(errno));
        }
        close(ready_fd);
    }

    rc = 0;
    while (!switchsim_stop_flag) {
        struct pollfd pfd = {.fd = sim.am_fd, .events = POLLIN};

        if (switchsim_reload_flag) {
            switchsim_reload_flag = 0;
            if (agg_conf_load(&sim.conf, config, environ, err, sizeof(err)) == AGG_OK) {
                agg_log_set_level((int)agg_conf_int(&sim.conf, AGG_CONF_LOG_LEVEL));
                agg_info("configuration reloaded");
            } else {
                agg_error("reload failed, keeping the old settings: %s", err);
            }
        }
        if (poll(&pfd, 1, 200) <= 0) {
            continue;
        }
        st = switchsim_ctl_handle(&sim);
        if (st == AGG_ERR_IO) {
            agg_error("aggmgr closed the control connection; shutting down");
            rc = 1;
            break;
        } else if (st != AGG_OK) {
            agg_error("control message failed: %s", agg_status_string(st));
        }
    }

out:
    switchsim_dp_stop(&sim);
    if (stats_file != NULL) {
        switchsim_write_stats(&sim, stats_file);
    }
    switchsim_group_destroy_all(&sim);
    if (sim.am_fd >= 0) {
        close(sim.am_fd);
    }
    if (sim.bell != NULL) {
        agg_shm_detach(sim.bell, sizeof(agg_shm_bell_t));
        agg_shm_unlink(sim.bell_name);
    }
    free(sim.switches);
    pthread_mutex_destroy(&sim.lock);
    agg_info("switchsim exiting with status %d", rc);
    return rc;
}
