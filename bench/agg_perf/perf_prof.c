/*
 * -P FILE: a sampling profile of the timed loops of the paths named in
 * -P's list, for hosts without perf (the GPU machine runs under gVisor, where
 * perf_event_open does not exist). A CLOCK_MONOTONIC timer sends SIGPROF
 * every 100 us (a high-resolution timer: the CPU-time ones move at the
 * kernel's tick, 4 ms); the handler keeps the interrupted instruction's
 * address while a profiled loop runs, so time spent waiting in a system
 * call shows as that call. At the end each rank writes FILE.RANK,
 * one line per address: samples, the object it lies in, its offset there
 * (tools/prof_report.sh turns them into functions with addr2line).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include "perf.h"

#define PERF_PROF_MAX      (1u << 22) /* samples kept: 7 minutes at 10 kHz */
#define PERF_PROF_INTERVAL 100        /* us between samples */

static uintptr_t *perf_prof_pc;
static timer_t perf_prof_timer;
static volatile sig_atomic_t perf_prof_on;
static volatile size_t perf_prof_n;

static void perf_prof_sample(int sig, siginfo_t *si, void *ucv)
{
#if defined(__x86_64__)
    const ucontext_t *uc = ucv;

    if (perf_prof_on && perf_prof_n < PERF_PROF_MAX) {
        perf_prof_pc[perf_prof_n] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        perf_prof_n               = perf_prof_n + 1;
    }
#endif
    (void)sig;
    (void)si;
    (void)ucv;
}

int perf_prof_start(void)
{
    struct sigaction sa;
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGPROF};
    struct itimerspec it = {{0, PERF_PROF_INTERVAL * 1000}, {0, PERF_PROF_INTERVAL * 1000}};

#if !defined(__x86_64__)
    return -1; /* the interrupted address is read from x86-64's registers */
#endif
    perf_prof_pc = malloc(PERF_PROF_MAX * sizeof(*perf_prof_pc));
    if (perf_prof_pc == NULL) {
        return -1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = perf_prof_sample;
    sa.sa_flags     = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0 ||
        timer_create(CLOCK_MONOTONIC, &ev, &perf_prof_timer) != 0) {
        free(perf_prof_pc);
        perf_prof_pc = NULL;
        return -1;
    }
    if (timer_settime(perf_prof_timer, 0, &it, NULL) != 0) {
        timer_delete(perf_prof_timer);
        free(perf_prof_pc);
        perf_prof_pc = NULL;
        return -1;
    }
    return 0;
}

void perf_prof_sampling(int on)
{
    perf_prof_on = perf_prof_pc != NULL && on;
}

static int perf_prof_cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

    return x < y ? -1 : x > y;
}

int perf_prof_write(const char *file, int rank)
{
    char name[4096];
    size_t n = perf_prof_n, i, j;
    FILE *f;

    if (perf_prof_pc == NULL) {
        return -1;
    }
    perf_prof_on = 0;
    timer_delete(perf_prof_timer);
    snprintf(name, sizeof(name), "%s.%d", file, rank);
    f = fopen(name, "w");
    if (f == NULL) {
        return -1;
    }
    qsort(perf_prof_pc, n, sizeof(*perf_prof_pc), perf_prof_cmp);
    for (i = 0; i < n; i = j) {
        Dl_info info;

        for (j = i; j < n && perf_prof_pc[j] == perf_prof_pc[i]; ++j) {
        }
        if (dladdr((void *)perf_prof_pc[i], &info) != 0 && info.dli_fname != NULL &&
            info.dli_fname[0] != '\0') {
            fprintf(f, "%zu %s 0x%lx\n", j - i, info.dli_fname,
                    (unsigned long)(perf_prof_pc[i] - (uintptr_t)info.dli_fbase));
        } else {
            fprintf(f, "%zu [unknown] 0x%lx\n", j - i, (unsigned long)perf_prof_pc[i]);
        }
    }
    free(perf_prof_pc);
    perf_prof_pc = NULL;
    return fclose(f);
}
