/*
 * The daemons' event loop (aggmgr; switchsim's control link and its TCP
 * data port): file descriptors with a callback each, timers, and work
 * handed to a thread of its own and back. A loop belongs to the thread that
 * runs it: every callback runs there, and only there may fds and timers be
 * added or removed. Other threads reach it through agg_loop_post (a call
 * to make on the loop's thread) and agg_loop_wake (look at the fds again,
 * e.g. a send queue another thread filled).
 *
 * Nothing waits forever: a round waits at most for the nearest timer (or
 * AGG_LOOP_MAX_WAIT_MS), so stop flags set by signal handlers are seen.
 * Sending without waiting on a peer is agg/txq.h's job; a socket whose
 * queue has something waiting is polled for POLLOUT (agg_loop_add's
 * want_out).
 */
#ifndef AGG_LOOP_H
#define AGG_LOOP_H

#include <poll.h>
#include <stdint.h>

#include "agg/status.h"

#define AGG_LOOP_MAX_WAIT_MS 500

typedef struct agg_loop agg_loop_t;

/* An fd had events (POLLIN, POLLOUT, POLLHUP, POLLERR) for its watcher. */
typedef void (*agg_loop_fd_cb)(agg_loop_t *loop, int fd, short revents, void *arg);

/* A call made on the loop's thread (posted, a thread's work done). */
typedef void (*agg_loop_cb)(agg_loop_t *loop, void *arg);

/* A timer: does its work, returns the milliseconds until it wants to run again. */
typedef int (*agg_loop_timer_cb)(agg_loop_t *loop, void *arg);

/* A loop for the calling thread, for at most max_fds watched descriptors. */
agg_status_t agg_loop_create(agg_loop_t **loop, unsigned max_fds);

/*
 * Waits (at most 10 s) for the threads started with agg_loop_spawn to end,
 * running their done callbacks (not the fds'), then frees the loop. Closes
 * no watched fd. -1 when a thread still runs: the loop (and what its
 * callbacks touch) must stay.
 */
int agg_loop_destroy(agg_loop_t *loop);

/*
 * Watches fd for `events`; cb runs when any of them (or POLLHUP/POLLERR)
 * happen. want_out, when not NULL, is a flag (read atomically, e.g. a send
 * queue's pending) that adds POLLOUT while it is set. AGG_ERR_NO_RESOURCE
 * when max_fds are watched already.
 */
agg_status_t agg_loop_add(agg_loop_t *loop, int fd, short events, const int *want_out,
                          agg_loop_fd_cb cb, void *arg);

/*
 * Stops watching fd for the watcher with this arg (a callback may remove any
 * watch, its own included; an fd number closed and taken again by another
 * watcher keeps that one's watch).
 */
void agg_loop_del(agg_loop_t *loop, int fd, const void *arg);

/*
 * Calls cb after first_ms (negative: not until agg_loop_timer_set), then
 * after whatever it returns (0: in the next round, without waiting;
 * negative: not again until agg_loop_timer_set). Returns the timer's id
 * (for agg_loop_timer_set), or -1 when out of memory.
 */
int agg_loop_timer(agg_loop_t *loop, int first_ms, agg_loop_timer_cb cb, void *arg);

/* On the loop's thread: timer id runs after ms instead (0: in the next round). */
void agg_loop_timer_set(agg_loop_t *loop, int id, int ms);

/*
 * From any thread: cb(arg) runs on the loop's thread in its next round (the
 * loop is woken). The loop's own thread may post too: a call that has more
 * to do comes back at once, after the fds were looked at.
 */
agg_status_t agg_loop_post(agg_loop_t *loop, agg_loop_cb cb, void *arg);

/* From any thread: the loop looks at its fds again (a want_out flag changed). */
void agg_loop_wake(agg_loop_t *loop);

/*
 * Runs work(arg) on a thread of its own (something that may block a while:
 * a peer proving the shared secret), then done(arg) on the loop's thread.
 * At most `max` such threads at once: AGG_ERR_NO_RESOURCE beyond, and
 * neither callback runs.
 */
agg_status_t agg_loop_spawn(agg_loop_t *loop, unsigned max, agg_loop_cb work,
                            agg_loop_cb done, void *arg);

/* Threads started by agg_loop_spawn whose done has not run yet. */
unsigned agg_loop_spawned(const agg_loop_t *loop);

/*
 * One round: waits for events at most max_wait_ms (less when a timer is due
 * sooner, none when something was posted), then runs the callbacks of what
 * happened, the timers due and what was posted. AGG_ERR_IO when poll fails.
 */
agg_status_t agg_loop_once(agg_loop_t *loop, int max_wait_ms);

/* Rounds until *stop is set (by a signal handler or a callback). */
agg_status_t agg_loop_run(agg_loop_t *loop, const volatile int *stop);

/* Whether the calling thread is this loop's (sends decide whether to wake it). */
int agg_loop_is_mine(const agg_loop_t *loop);

#endif
