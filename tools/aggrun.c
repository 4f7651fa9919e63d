/*
 * aggrun: runs a command under a private aggregation fabric on this machine.
 * Starts aggmgr (default fat tree or --topology) and one switchsim on
 * loopback, exports AGG_AM_ADDR so the command's ranks find the manager,
 * runs the command, stops both daemons (also on Ctrl-C or SIGTERM) and exits
 * with the command's status.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agg/conf.h"
#include "agg/sock.h"

#define AGGRUN_START_TIMEOUT_MS 10000
#define AGGRUN_STOP_TIMEOUT_MS  5000

extern char **environ;

static volatile sig_atomic_t aggrun_signal;

static void aggrun_on_signal(int sig)
{
    aggrun_signal = sig;
}

static void aggrun_usage(FILE *out)
{
    fprintf(out,
            "usage: aggrun [options] -- COMMAND [ARGS...]\n"
            "Runs COMMAND with aggmgr and switchsim started on loopback; the ranks it\n"
            "launches find the manager through AGG_AM_ADDR, which aggrun exports.\n"
            "  --topology FILE     fabric in ibnetdiscover format (default: built-in fat tree)\n"
            "  --fat-tree L:S:H    size of the built-in fat tree (leaves:spines:hosts per leaf)\n"
            "  --stats-file PATH   switchsim writes its counters there when it stops\n"
            "  --config FILE       libconfig file passed to aggmgr and switchsim\n"
            "  -h, --help          this text\n");
}

static int64_t aggrun_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads one line from fd within the timeout; 0 on success. */
static int aggrun_read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
    int64_t deadline = aggrun_now_ms() + timeout_ms;
    size_t len = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ssize_t n;

    while (len + 1 < cap) {
        int left = (int)(deadline - aggrun_now_ms());
        if (left <= 0 || poll(&pfd, 1, left) <= 0) {
            if (errno == EINTR && left > 0) {
                continue;
            }
            return -1;
        }
        n = read(fd, buf + len, 1);
        if (n <= 0) {
            return -1;
        }
        if (buf[len] == '\n') {
            buf[len] = '\0';
            return 0;
        }
        ++len;
    }
    return -1;
}

/* Starts argv[0] in its own process group with a ready pipe on fd 3. */
static pid_t aggrun_spawn(char *const argv[], int *ready_fd)
{
    int p[2];
    pid_t pid;

    if (pipe2(p, O_CLOEXEC) != 0) {
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* Ctrl-C goes to the command; aggrun stops the daemons */
        if (dup2(p[1], 3) < 0) {
            _exit(127);
        }
        execv(argv[0], argv);
        fprintf(stderr, "aggrun: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    *ready_fd = p[0];
    return pid;
}

/* SIGTERM, then SIGKILL after the timeout; returns the exit status. */
static int aggrun_stop(pid_t pid, const char *name)
{
    int64_t deadline;
    int status = 0;

    if (pid <= 0) {
        return 0;
    }
    kill(pid, SIGTERM);
    deadline = aggrun_now_ms() + AGGRUN_STOP_TIMEOUT_MS;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) {
            break;
        }
        if (aggrun_now_ms() > deadline) {
            fprintf(stderr, "aggrun: %s (pid %d) did not stop; killing it\n", name, (int)pid);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    return status;
}

/* Whether host:port can be bound now (nobody listens there). */
static int aggrun_addr_free(const char *addr)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    char host[256];
    int port, fd, ok, one = 1;

    if (agg_sock_addr_parse(addr, host, sizeof(host), &port, NULL, 0) != 0 ||
        inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        return 1; /* not an IPv4 literal: let aggmgr try and report */
    }
    sa.sin_port = htons((uint16_t)port);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

static void aggrun_self_dir(char *dir, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
    char *slash;

    if (n <= 0) {
        snprintf(dir, cap, ".");
        return;
    }
    dir[n] = '\0';
    slash  = strrchr(dir, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
}

int main(int argc, char **argv)
{
    const char *topology = NULL, *fat_tree = NULL, *stats = NULL, *config = NULL;
    char dir[PATH_MAX], mgr_path[PATH_MAX + 16], sim_path[PATH_MAX + 16];
    char addr[300], line[300];
    char *mgr_argv[12], *sim_argv[10];
    pid_t mgr = -1, sim = -1, child = -1;
    struct sigaction sa = {0};
    int i, cmd = -1, fd, m, s, status = 0, rc = 1;
    agg_conf_t conf;
    char err[512];

    for (i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--") == 0) {
            cmd = i + 1;
            break;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            aggrun_usage(stdout);
            return 0;
        } else if (i + 1 < argc && strcmp(argv[i], "--topology") == 0) {
            topology = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--fat-tree") == 0) {
            fat_tree = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--stats-file") == 0) {
            stats = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--config") == 0) {
            config = argv[++i];
        } else {
            fprintf(stderr, "aggrun: unknown or incomplete option '%s'\n", argv[i]);
            aggrun_usage(stderr);
            return 2;
        }
    }
    if (cmd < 0 || cmd >= argc) {
        fprintf(stderr, "aggrun: no command given after --\n");
        aggrun_usage(stderr);
        return 2;
    }
    if (agg_conf_load(&conf, config, environ, err, sizeof(err)) != 0) {
        fprintf(stderr, "aggrun: %s\n", err);
        return 2;
    }
    aggrun_self_dir(dir, sizeof(dir));
    snprintf(mgr_path, sizeof(mgr_path), "%s/aggmgr", dir);
    snprintf(sim_path, sizeof(sim_path), "%s/switchsim", dir);

    sa.sa_handler = aggrun_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    /* The configured address (users and docs expect it) if it is free; when
     * another aggrun holds it, any free loopback port: the command learns it
     * from AGG_AM_ADDR either way. */
    snprintf(addr, sizeof(addr), "%s", agg_conf_str(&conf, AGG_CONF_AM_ADDR));
    if (!aggrun_addr_free(addr)) {
        snprintf(addr, sizeof(addr), "127.0.0.1:0");
    }
again:
    m = 0;
    mgr_argv[m++] = mgr_path;
    mgr_argv[m++] = "--listen";
    mgr_argv[m++] = addr;
    mgr_argv[m++] = "--ready-fd";
    mgr_argv[m++] = "3";
    if (config) {
        mgr_argv[m++] = "--config";
        mgr_argv[m++] = (char *)config;
    }
    if (topology) {
        mgr_argv[m++] = "--topology";
        mgr_argv[m++] = (char *)topology;
    } else if (fat_tree) {
        mgr_argv[m++] = "--fat-tree";
        mgr_argv[m++] = (char *)fat_tree;
    }
    mgr_argv[m] = NULL;
    mgr = aggrun_spawn(mgr_argv, &fd);
    if (mgr < 0) {
        fprintf(stderr, "aggrun: cannot start %s: %s\n", mgr_path, strerror(errno));
        return 1;
    }
    if (aggrun_read_line(fd, line, sizeof(line), AGGRUN_START_TIMEOUT_MS) != 0) {
        close(fd);
        aggrun_stop(mgr, "aggmgr");
        mgr = -1;
    } else {
        close(fd);
        snprintf(addr, sizeof(addr), "%s", line);
    }
    if (mgr < 0 && strcmp(addr, "127.0.0.1:0") != 0) {
        /* another launcher may have taken the address between the probe and the bind */
        fprintf(stderr, "aggrun: aggmgr did not start on %s; trying again on any free "
                "loopback port\n", addr);
        snprintf(addr, sizeof(addr), "127.0.0.1:0");
        goto again;
    }
    if (mgr < 0) {
        fprintf(stderr, "aggrun: aggmgr did not start (see its messages above)\n");
        return 1;
    }

    s = 0;
    sim_argv[s++] = sim_path;
    sim_argv[s++] = "--am";
    sim_argv[s++] = addr;
    sim_argv[s++] = "--ready-fd";
    sim_argv[s++] = "3";
    if (config) {
        sim_argv[s++] = "--config";
        sim_argv[s++] = (char *)config;
    }
    if (stats) {
        sim_argv[s++] = "--stats-file";
        sim_argv[s++] = (char *)stats;
    }
    sim_argv[s] = NULL;
    sim = aggrun_spawn(sim_argv, &fd);
    if (sim < 0 || aggrun_read_line(fd, line, sizeof(line), AGGRUN_START_TIMEOUT_MS) != 0) {
        fprintf(stderr, "aggrun: switchsim did not register with aggmgr at %s\n", addr);
        if (sim >= 0) {
            close(fd);
        }
        goto out;
    }
    close(fd);

    setenv("AGG_AM_ADDR", addr, 1);
    child = fork();
    if (child == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execvp(argv[cmd], &argv[cmd]);
        fprintf(stderr, "aggrun: cannot run %s: %s\n", argv[cmd], strerror(errno));
        _exit(127);
    }
    if (child < 0) {
        fprintf(stderr, "aggrun: fork failed: %s\n", strerror(errno));
        goto out;
    }
    for (;;) {
        pid_t r = waitpid(child, &status, 0);
        if (r == child) {
            break;
        }
        if (r < 0 && errno != EINTR) {
            status = 1 << 8;
            break;
        }
        if (aggrun_signal) {
            /* forward once; the command decides how to end */
            kill(child, aggrun_signal == SIGHUP ? SIGTERM : aggrun_signal);
            aggrun_signal = 0;
        }
    }
    rc = WIFEXITED(status) ? WEXITSTATUS(status) :
         WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;

out:
    aggrun_stop(sim, "switchsim");
    aggrun_stop(mgr, "aggmgr");
    return rc;
}
