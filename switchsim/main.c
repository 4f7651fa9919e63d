/*
 * switchsim: hosts aggregation nodes in software. Registers with aggmgr,
 * then serves group configuration on the control link while a data thread
 * reduces fragments arriving through shared memory.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/loop.h"
#include "agg/shm.h"
#include "agg/sock.h"
#include "agg/tls.h"
#include "switchsim.h"

#define SWITCHSIM_REAP_MS 200 /* how often SAT locks of dead holders are looked for */

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
    agg_msg_stats_reply_t rep;
    FILE *f;

    switchsim_stats_reply(sim, &rep);
    f = fopen(path, "w");
    if (f == NULL) {
        agg_error("cannot write stats file %s: %s", path, strerror(errno));
        return;
    }
    agg_wire_stats_print(&rep, f);
    fclose(f);
}

/* The control link's loop: aggmgr's requests, SIGHUP, locks of dead holders. */
typedef struct switchsim_ctl_loop {
    switchsim_t *sim;
    const char  *config, *am; /* how the settings were given, for a reload */
    int64_t      reaped_ms;
    int64_t      lost_ms;     /* when the control connection closed; 0 while it stands */
    int64_t      tried_ms;    /* the last call to aggmgr since */
    agg_status_t st;          /* why the loop stopped */
} switchsim_ctl_loop_t;

static void switchsim_on_ctl(agg_loop_t *loop, int fd, short revents, void *arg);

/*
 * The control connection closed: the groups go on being served while
 * aggmgr is called again (sim_am_retry_ms), or switchsim stops with it.
 */
static void switchsim_ctl_lost(switchsim_ctl_loop_t *cl, agg_loop_t *loop)
{
    switchsim_t *sim = cl->sim;
    long long retry = agg_conf_int(&sim->conf, AGG_CONF_SIM_AM_RETRY_MS);

    agg_loop_del(loop, sim->am_fd, cl);
    agg_tls_close(sim->am_fd);
    sim->am_fd = -1;
    if (retry == 0) {
        agg_error("aggmgr closed the control connection; shutting down (sim_am_retry_ms 0)");
        cl->st = AGG_ERR_IO;
        switchsim_stop_flag = 1;
        return;
    }
    agg_warn("aggmgr closed the control connection; serving the %u groups' parts here and "
             "calling it again for %lld ms", sim->num_groups, retry);
    cl->lost_ms  = agg_time_ms();
    cl->tried_ms = 0;
}

/* Called from the tick while the control connection is down. */
static void switchsim_ctl_again(switchsim_ctl_loop_t *cl, agg_loop_t *loop)
{
    switchsim_t *sim = cl->sim;
    agg_am_target_t target = agg_conf_am_target(&sim->conf);
    long long retry = agg_conf_int(&sim->conf, AGG_CONF_SIM_AM_RETRY_MS);
    int64_t now = agg_time_ms();
    char err[512];
    agg_status_t st;

    if (now - cl->tried_ms < 150) { /* every tick (200 ms) */
        return;
    }
    cl->tried_ms = now;
    if (agg_am_connect(&target, 0, &sim->am_fd, err, sizeof(err)) != AGG_OK) {
        sim->am_fd = -1;
        if (now - cl->lost_ms >= retry) {
            agg_error("aggmgr did not come back within sim_am_retry_ms (%lld ms): %s; "
                      "shutting down", retry, err);
            cl->st = AGG_ERR_NO_SWITCHSIM;
            switchsim_stop_flag = 1;
        }
        return;
    }
    st = switchsim_ctl_register(sim, (int)agg_conf_int(&sim->conf, AGG_CONF_CONNECT_TIMEOUT_MS));
    if (st == AGG_OK) {
        st = agg_loop_add(loop, sim->am_fd, POLLIN, NULL, switchsim_on_ctl, cl);
    }
    if (st != AGG_OK) {
        agg_tls_close(sim->am_fd);
        sim->am_fd = -1;
        if (st == AGG_ERR_TOPOLOGY || now - cl->lost_ms >= retry) {
            agg_error("registering with aggmgr again failed: %s; shutting down",
                      agg_status_string(st));
            cl->st = st;
            switchsim_stop_flag = 1;
        }
        return;
    }
    agg_info("back with aggmgr %lld ms after the control connection closed",
             (long long)(now - cl->lost_ms));
    cl->lost_ms = 0;
}

static void switchsim_on_ctl(agg_loop_t *loop, int fd, short revents, void *arg)
{
    switchsim_ctl_loop_t *cl = arg;
    agg_status_t st = switchsim_ctl_handle(cl->sim);

    (void)fd;
    (void)revents;
    if (st == AGG_ERR_IO) {
        switchsim_ctl_lost(cl, loop);
    } else if (st != AGG_OK) {
        agg_error("control message failed: %s", agg_status_string(st));
    }
}

static void switchsim_reload(switchsim_ctl_loop_t *cl)
{
    static agg_conf_t fresh;
    char err[512];

    if (agg_conf_load(&fresh, cl->config, environ, err, sizeof(err)) == AGG_OK &&
        (cl->am == NULL || agg_conf_set(&fresh, AGG_CONF_AM_ADDR, cl->am, AGG_CONF_SRC_CMDLINE,
                                        "--am", err, sizeof(err)) == AGG_OK)) {
        switchsim_ctl_wrlock(cl->sim);
        agg_conf_reload(&cl->sim->conf, &fresh, AGG_CONF_SCOPE_SIM, "switchsim");
        pthread_rwlock_unlock(&cl->sim->lock);
    } else {
        agg_error("reload failed, keeping the old settings: %s", err);
    }
}

static int switchsim_on_tick(agg_loop_t *loop, void *arg)
{
    switchsim_ctl_loop_t *cl = arg;
    switchsim_t *sim = cl->sim;

    if (switchsim_reload_flag) {
        switchsim_reload_flag = 0;
        switchsim_reload(cl);
    }
    /* a SAT lock whose holder died goes back, at most this much later, however
       busy the control link is; not waiting for the lock while a round or ten
       may pass: a writer waiting holds up every reader behind it, among them a
       thread sending on a full socket's behalf */
    if (pthread_rwlock_trywrlock(&sim->lock) == 0 ||
        (agg_time_ms() - cl->reaped_ms >= 10 * SWITCHSIM_REAP_MS &&
         pthread_rwlock_wrlock(&sim->lock) == 0)) {
        switchsim_an_reap_locks(sim);
        pthread_rwlock_unlock(&sim->lock);
        cl->reaped_ms = agg_time_ms();
    }
    if (sim->am_fd < 0) {
        switchsim_ctl_again(cl, loop);
    } else {
        switchsim_ctl_report(sim);
    }
    return SWITCHSIM_REAP_MS;
}

static agg_status_t switchsim_ctl_run(switchsim_ctl_loop_t *cl)
{
    agg_loop_t *loop;
    agg_status_t st = agg_loop_create(&loop, 1);

    if (st == AGG_OK) {
        st = agg_loop_add(loop, cl->sim->am_fd, POLLIN, NULL, switchsim_on_ctl, cl);
    }
    if (st == AGG_OK && agg_loop_timer(loop, 0, switchsim_on_tick, cl) < 0) {
        st = AGG_ERR_NO_MEMORY;
    }
    if (st == AGG_OK) {
        st = agg_loop_run(loop, &switchsim_stop_flag);
    }
    agg_loop_destroy(loop);
    return st != AGG_OK ? st : cl->st;
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
    agg_am_target_t target;
    char err[512];
    int ready_fd = -1, c, rc = 1;

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
    {
        /* the cores this process may run on (taskset, cgroups), not the machine's */
        cpu_set_t set;

        sim.num_cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) :
                       sysconf(_SC_NPROCESSORS_ONLN);
    }
    sim.num_workers = (unsigned)agg_conf_int(&sim.conf, AGG_CONF_SIM_WORKERS);
    if (sim.num_workers == 0) {
        sim.num_workers = sim.num_cpus > 2 ? (unsigned)sim.num_cpus - 1 : 1;
        if (sim.num_workers > SWITCHSIM_MAX_WORKERS) {
            sim.num_workers = SWITCHSIM_MAX_WORKERS;
        }
    }
    sim.am_fd = -1;
    {
        pthread_rwlockattr_t attr;

        /* the control thread must get in between the workers' passes */
        pthread_rwlockattr_init(&attr);
        pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&sim.lock, &attr);
        pthread_rwlockattr_destroy(&attr);
    }

    sa.sa_handler = switchsim_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* aggmgr may still be starting: keep trying for the connect timeout */
    target = agg_conf_am_target(&sim.conf);
    if (agg_am_connect(&target, target.timeout_ms, &sim.am_fd, err, sizeof(err)) != AGG_OK) {
        agg_error("%s", err);
        goto out;
    }
    if (switchsim_net_start(&sim) != AGG_OK) {
        goto out;
    }
    if (switchsim_ctl_register(&sim, (int)agg_conf_int(&sim.conf,
                                                       AGG_CONF_CONNECT_TIMEOUT_MS)) != AGG_OK ||
        switchsim_workers_start(&sim) != AGG_OK) {
        goto out;
    }
    if (ready_fd >= 0) {
        if (write(ready_fd, "ready\n", 6) != 6) {
            agg_warn("cannot write to --ready-fd %d: %s", ready_fd, strerror(errno));
        }
        close(ready_fd);
    }

    {
        switchsim_ctl_loop_t cl = {.sim = &sim, .config = config, .am = am};

        rc = switchsim_ctl_run(&cl) == AGG_OK ? 0 : 1;
    }

out:
    switchsim_workers_stop(&sim);
    switchsim_net_stop(&sim);
    if (stats_file != NULL) {
        switchsim_write_stats(&sim, stats_file);
    }
    switchsim_group_destroy_all(&sim);
    if (sim.am_fd >= 0) {
        agg_tls_close(sim.am_fd);
    }
    switchsim_an_fini(&sim);
    pthread_rwlock_destroy(&sim.lock);
    agg_info("switchsim exiting with status %d", rc);
    return rc;
}
