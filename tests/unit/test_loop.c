/*
 * The daemons' event loop and send queues (agg/loop.h, agg/txq.h) on real
 * sockets and threads: callbacks run on the loop's thread, fds removed in a
 * round are not called, timers come back when they say, work handed to a
 * thread comes back, and a queue keeps every byte in order through a peer
 * that reads slowly, copies what the caller may reuse, and cuts off a peer
 * that reads nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "agg/loop.h"
#include "agg/sock.h"
#include "agg/txq.h"

typedef struct seen {
    pthread_t loop_thread;
    int       calls, wrong_thread, stop;
    int       fds[2];
    char      got[64];
    size_t    got_len;
} seen_t;

static void on_readable(agg_loop_t *loop, int fd, short revents, void *arg)
{
    seen_t *s = arg;
    ssize_t n = read(fd, s->got + s->got_len, sizeof(s->got) - s->got_len);

    s->wrong_thread += !pthread_equal(pthread_self(), s->loop_thread);
    if (n > 0) {
        s->got_len += (size_t)n;
    }
    if (n == 0 || (revents & POLLHUP)) {
        agg_loop_del(loop, fd, s); /* gone: never called again */
    }
    s->calls++;
}

static void test_fd_callbacks(void **state)
{
    agg_loop_t *loop;
    seen_t s = {.loop_thread = pthread_self()};
    int i;

    (void)state;
    assert_int_equal(agg_loop_create(&loop, 2), AGG_OK);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, s.fds), 0);
    assert_int_equal(agg_loop_add(loop, s.fds[0], POLLIN, NULL, on_readable, &s), AGG_OK);
    assert_int_equal(agg_loop_add(loop, s.fds[0], POLLIN, NULL, on_readable, &s), AGG_OK);
    assert_int_equal(agg_loop_add(loop, s.fds[0], POLLIN, NULL, on_readable, &s),
                     AGG_ERR_NO_RESOURCE); /* max_fds */
    agg_loop_del(loop, s.fds[0], &s);
    assert_int_equal(agg_loop_once(loop, 0), AGG_OK);
    assert_int_equal(agg_loop_add(loop, s.fds[0], POLLIN, NULL, on_readable, &s), AGG_OK);
    /* nothing to read: the round times out without a call */
    assert_int_equal(agg_loop_once(loop, 20), AGG_OK);
    assert_int_equal(s.calls, 0);
    assert_int_equal(write(s.fds[1], "hello", 5), 5);
    assert_int_equal(agg_loop_once(loop, 1000), AGG_OK);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.got_len, 5);
    assert_memory_equal(s.got, "hello", 5);
    /* a hang-up removes it; later rounds do not call it */
    close(s.fds[1]);
    for (i = 0; i < 3; ++i) {
        assert_int_equal(agg_loop_once(loop, 10), AGG_OK);
    }
    assert_int_equal(s.calls, 2);
    assert_int_equal(s.wrong_thread, 0);
    close(s.fds[0]);
    agg_loop_destroy(loop);
}

typedef struct ticks {
    int     n, again, other;
    int64_t at[4];
} ticks_t;

static int on_tick(agg_loop_t *loop, void *arg)
{
    ticks_t *t = arg;

    (void)loop;
    if (t->n < 4) {
        t->at[t->n] = agg_time_ms();
    }
    t->n++;
    return t->n < 3 ? t->again : -1; /* three times, then never again */
}

static void test_timers(void **state)
{
    agg_loop_t *loop;
    ticks_t t = {.again = 30};
    int64_t start = agg_time_ms();
    int id, i;

    (void)state;
    assert_int_equal(agg_loop_create(&loop, 1), AGG_OK);
    id = agg_loop_timer(loop, 30, on_tick, &t);
    assert_true(id >= 0);
    for (i = 0; i < 100 && t.n < 3; ++i) {
        assert_int_equal(agg_loop_once(loop, 1000), AGG_OK);
    }
    assert_int_equal(t.n, 3);
    /* each came no sooner than asked (the loop waited for it, not in a spin) */
    assert_true(t.at[0] - start >= 30);
    assert_true(t.at[1] - t.at[0] >= 30);
    assert_true(t.at[2] - t.at[1] >= 30);
    assert_true(i <= 10);
    for (i = 0; i < 3; ++i) {
        assert_int_equal(agg_loop_once(loop, 40), AGG_OK);
    }
    assert_int_equal(t.n, 3); /* it said never again */
    /* set again from outside its callback: runs in the next round */
    agg_loop_timer_set(loop, id, 0);
    assert_int_equal(agg_loop_once(loop, 1000), AGG_OK);
    assert_int_equal(t.n, 4);
    agg_loop_destroy(loop);
}

typedef struct posted {
    agg_loop_t *loop;
    pthread_t   loop_thread;
    int         runs, wrong_thread, worked_elsewhere, done;
    int64_t     posted_ms;
} posted_t;

static void on_posted(agg_loop_t *loop, void *arg)
{
    posted_t *p = arg;

    (void)loop;
    p->wrong_thread += !pthread_equal(pthread_self(), p->loop_thread);
    p->runs++;
}

static void *poster_main(void *arg)
{
    posted_t *p = arg;

    usleep(50000); /* the loop is asleep in poll by now */
    p->posted_ms = agg_time_ms();
    agg_loop_post(p->loop, on_posted, p);
    return NULL;
}

static void work_elsewhere(agg_loop_t *loop, void *arg)
{
    posted_t *p = arg;

    (void)loop;
    usleep(20000);
    __atomic_fetch_add(&p->worked_elsewhere, !pthread_equal(pthread_self(), p->loop_thread),
                       __ATOMIC_RELAXED);
}

static void work_done(agg_loop_t *loop, void *arg)
{
    posted_t *p = arg;

    (void)loop;
    p->wrong_thread += !pthread_equal(pthread_self(), p->loop_thread);
    p->done++;
}

static void test_post_and_spawn(void **state)
{
    posted_t p = {.loop_thread = pthread_self()};
    pthread_t th;
    int64_t woke;
    int i;

    (void)state;
    assert_int_equal(agg_loop_create(&p.loop, 1), AGG_OK);
    /* another thread's post wakes a loop that would wait 5 s */
    assert_int_equal(pthread_create(&th, NULL, poster_main, &p), 0);
    assert_int_equal(agg_loop_once(p.loop, 5000), AGG_OK);
    woke = agg_time_ms();
    if (p.runs == 0) { /* woken by the eventfd, the call runs in the next round */
        assert_int_equal(agg_loop_once(p.loop, 5000), AGG_OK);
    }
    pthread_join(th, NULL);
    assert_int_equal(p.runs, 1);
    assert_true(woke - p.posted_ms < 2000);
    /* the loop's own thread posts: runs in the next round, which does not wait */
    assert_int_equal(agg_loop_post(p.loop, on_posted, &p), AGG_OK);
    assert_int_equal(agg_loop_once(p.loop, 5000), AGG_OK);
    assert_int_equal(p.runs, 2);
    /* work on threads of their own, at most two at once; done back on the loop */
    assert_int_equal(agg_loop_spawn(p.loop, 2, work_elsewhere, work_done, &p), AGG_OK);
    assert_int_equal(agg_loop_spawn(p.loop, 2, work_elsewhere, work_done, &p), AGG_OK);
    assert_int_equal(agg_loop_spawn(p.loop, 2, work_elsewhere, work_done, &p),
                     AGG_ERR_NO_RESOURCE);
    assert_int_equal(agg_loop_spawned(p.loop), 2);
    for (i = 0; i < 100 && p.done < 2; ++i) {
        assert_int_equal(agg_loop_once(p.loop, 100), AGG_OK);
    }
    assert_int_equal(p.done, 2);
    assert_int_equal(agg_loop_spawned(p.loop), 0);
    assert_int_equal(p.worked_elsewhere, 2);
    /* destroy waits for a thread still working, and runs its done */
    assert_int_equal(agg_loop_spawn(p.loop, 2, work_elsewhere, work_done, &p), AGG_OK);
    agg_loop_destroy(p.loop);
    assert_int_equal(p.done, 3);
    assert_int_equal(p.wrong_thread, 0);
}

/* ---- send queues ----------------------------------------------------------- */

typedef struct pump {
    agg_txq_t q;
    int       fd;
    int       broken;
} pump_t;

static void on_writable(agg_loop_t *loop, int fd, short revents, void *arg)
{
    pump_t *p = arg;
    const char *why;

    if (agg_txq_poll(&p->q, fd, revents, 60000, &why) != 0) {
        p->broken = 1;
        agg_loop_del(loop, fd, p);
    }
}

/* Reads n bytes from fd while the loop writes what waits. */
static void drain(agg_loop_t *loop, int fd, uint8_t *out, size_t n)
{
    size_t got = 0;
    int rounds = 0;

    while (got < n) {
        ssize_t r = recv(fd, out + got, n - got, MSG_DONTWAIT);

        if (r > 0) {
            got += (size_t)r;
        } else {
            assert_true(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        }
        assert_int_equal(agg_loop_once(loop, 10), AGG_OK);
        assert_true(++rounds < 100000);
    }
}

static void narrow_prep(agg_txq_t *q, agg_txe_t *e)
{
    /* as switchsim narrows accumulators: the tail's data, through the scratch */
    const uint16_t *in = e->data;
    size_t i;

    assert_true(e->len <= q->scratch_cap);
    for (i = 0; i < e->len; ++i) {
        q->scratch[i] = (uint8_t)in[i];
    }
    e->data = q->scratch;
}

static void test_txq_order_copy_prep(void **state)
{
    enum { MSGS = 400, DATA = 1000 };
    static uint8_t data[MSGS][DATA], got[MSGS * (8 + DATA)];
    static uint16_t wide[MSGS][DATA];
    agg_loop_t *loop;
    pump_t p = {0};
    int fds[2], sndbuf = 4096, i, j;
    uint8_t hdr[8], mine[DATA], want;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    assert_int_equal(setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    assert_int_equal(agg_loop_create(&loop, 1), AGG_OK);
    assert_int_equal(agg_txq_init(&p.q, 4, 1024, 0, loop, narrow_prep, DATA), AGG_OK);
    p.fd = fds[0];
    assert_int_equal(agg_loop_add(loop, fds[0], 0, &p.q.pending, on_writable, &p), AGG_OK);
    /* far more than the socket takes: most wait, the ring grows */
    for (i = 0; i < MSGS; ++i) {
        memset(hdr, i & 0xff, sizeof(hdr));
        if (i % 3 == 0) { /* the caller's buffer, reused at once: copied */
            memset(mine, (i * 7) & 0xff, sizeof(mine));
            assert_int_equal(agg_txq_send(&p.q, fds[0], hdr, sizeof(hdr), mine, DATA,
                                          AGG_TXQ_COPY), AGG_OK);
            memset(mine, 0xee, sizeof(mine));
        } else if (i % 3 == 1) { /* accumulators, narrowed as they go (stay put too) */
            for (j = 0; j < DATA; ++j) {
                wide[i][j] = (uint16_t)(0x100 | ((i * 7) & 0xff));
            }
            assert_int_equal(agg_txq_send(&p.q, fds[0], hdr, sizeof(hdr), wide[i], DATA,
                                          AGG_TXQ_PREP), AGG_OK);
        } else { /* data that stay put */
            memset(data[i], (i * 7) & 0xff, DATA);
            assert_int_equal(agg_txq_send(&p.q, fds[0], hdr, sizeof(hdr), data[i], DATA, 0),
                             AGG_OK);
        }
    }
    assert_true(agg_txq_pending(&p.q));
    assert_true(p.q.cap > 4);
    drain(loop, fds[1], got, MSGS * (8 + DATA));
    for (i = 0; i < MSGS; ++i) {
        const uint8_t *m = got + (size_t)i * (8 + DATA);

        for (j = 0; j < 8; ++j) {
            assert_int_equal(m[j], i & 0xff);
        }
        want = (uint8_t)((i * 7) & 0xff);
        for (j = 0; j < DATA; ++j) {
            if (m[8 + j] != want) {
                fail_msg("message %d byte %d is 0x%02x, expected 0x%02x", i, j, m[8 + j], want);
            }
        }
    }
    /* everything went: the loop stops asking for room */
    assert_int_equal(agg_loop_once(loop, 0), AGG_OK);
    assert_false(agg_txq_pending(&p.q));
    assert_int_equal(p.q.bytes, 0);
    assert_int_equal(p.broken, 0);
    agg_txq_free(&p.q);
    agg_loop_destroy(loop);
    close(fds[0]);
    close(fds[1]);
}

/* A peer that reads nothing: the queue fills to its limit, then it is cut off. */
static void test_txq_limits(void **state)
{
    static uint8_t data[64 << 10];
    agg_txq_t q = {0};
    const char *why = NULL;
    int fds[2], sndbuf = 4096, i, r = 0;
    uint8_t hdr[16] = {0};
    agg_status_t st = AGG_OK;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    assert_int_equal(setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    assert_int_equal(agg_txq_init(&q, 4, 8, 1 << 20, NULL, NULL, 0), AGG_OK);
    /* at most 8 entries... */
    for (i = 0; i < 100 && st == AGG_OK; ++i) {
        st = agg_txq_send(&q, fds[0], hdr, sizeof(hdr), data, 1000, 0);
    }
    assert_int_equal(st, AGG_ERR_NO_RESOURCE);
    assert_int_equal(q.head - q.tail, 8);
    agg_txq_drop(&q);
    assert_false(agg_txq_pending(&q));
    /* ...and at most 1 MiB waiting */
    assert_int_equal(agg_txq_init(&q, 4, 1024, 1 << 20, NULL, NULL, 0), AGG_OK);
    for (i = 0, st = AGG_OK; i < 100 && st == AGG_OK; ++i) {
        st = agg_txq_send(&q, fds[0], hdr, sizeof(hdr), data, sizeof(data), 0);
    }
    assert_int_equal(st, AGG_ERR_NO_RESOURCE);
    assert_true(q.bytes <= 1 << 20);
    assert_true(q.bytes + sizeof(hdr) + sizeof(data) > 1 << 20);
    /* nothing moves for longer than the owner allows: the socket must go */
    assert_int_equal(agg_txq_poll(&q, fds[0], POLLOUT, 60000, &why), 0);
    usleep(60000);
    r = agg_txq_poll(&q, fds[0], POLLOUT, 50, &why);
    assert_int_equal(r, -1);
    assert_non_null(why);
    assert_non_null(strstr(why, "took nothing"));
    /* a broken socket is said at once */
    close(fds[1]);
    r = agg_txq_poll(&q, fds[0], POLLOUT, 60000, &why);
    assert_int_equal(r, -1);
    agg_txq_free(&q);
    assert_null(q.e);
    close(fds[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_callbacks),
        cmocka_unit_test(test_timers),
        cmocka_unit_test(test_post_and_spawn),
        cmocka_unit_test(test_txq_order_copy_prep),
        cmocka_unit_test(test_txq_limits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
