/* The daemons' event loop (agg/loop.h). */
#include "agg/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "agg/log.h"
#include "agg/sock.h"
#include "agg/tls.h"

typedef struct agg__watch {
    int            fd;       /* -1: removed in this round, compacted after it */
    short          events;
    const int     *want_out;
    agg_loop_fd_cb cb;
    void          *arg;
} agg__watch_t;

typedef struct agg__timer {
    int64_t           due_ms; /* -1: stopped */
    agg_loop_timer_cb cb;
    void             *arg;
} agg__timer_t;

/* A call posted to the loop's thread; a spawned thread's own node is in its job. */
typedef struct agg__post {
    struct agg__post *next;
    agg_loop_cb       cb;
    void             *arg;
    int               owned; /* freed once run */
} agg__post_t;

typedef struct agg__spawn {
    agg__post_t  post; /* first: the done call, posted when work returns */
    agg_loop_t  *loop;
    agg_loop_cb  work, done;
    void        *arg;
} agg__spawn_t;

struct agg_loop {
    pthread_t       owner;      /* the thread running it (set by agg_loop_once) */
    int             owned;
    unsigned        max_fds, num, removed;
    agg__watch_t   *w;
    struct pollfd  *pfds;       /* [0] the wake-up, then one per watch */
    unsigned       *widx;       /* pfds[i] is watch widx[i] */
    agg__timer_t   *timers;
    unsigned        num_timers;
    pthread_mutex_t lock;       /* the posted calls */
    agg__post_t    *head, **tail;
    int             wake_fd;    /* an eventfd */
    int             woken;      /* written and not read yet (atomic) */
    unsigned        spawned;    /* the loop's thread only */
};

static void agg__loop_posted(agg_loop_t *l);

agg_status_t agg_loop_create(agg_loop_t **out, unsigned max_fds)
{
    agg_loop_t *l = calloc(1, sizeof(*l));

    *out = NULL;
    if (l == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    l->max_fds = max_fds;
    l->w       = calloc(max_fds ? max_fds : 1, sizeof(*l->w));
    l->pfds    = calloc((size_t)max_fds + 1, sizeof(*l->pfds));
    l->widx    = calloc((size_t)max_fds + 1, sizeof(*l->widx));
    l->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    l->tail    = &l->head;
    pthread_mutex_init(&l->lock, NULL);
    if (l->w == NULL || l->pfds == NULL || l->widx == NULL || l->wake_fd < 0) {
        agg_loop_destroy(l);
        return AGG_ERR_NO_MEMORY;
    }
    *out = l;
    return AGG_OK;
}

int agg_loop_destroy(agg_loop_t *l)
{
    int64_t deadline = agg_time_ms() + 10000;
    agg__post_t *p;

    if (l == NULL) {
        return 0;
    }
    /* a thread still working holds the loop: its done must run first (the
       owner's fds are not looked at any more: they may be closed) */
    while (l->spawned > 0 && agg_time_ms() < deadline) {
        agg__loop_posted(l);
        if (l->spawned > 0) {
            usleep(10000);
        }
    }
    if (l->spawned > 0) {
        agg_warn("%u threads of the event loop still run after 10 s; leaving them be",
                 l->spawned);
        return -1;
    }
    while ((p = l->head) != NULL) {
        l->head = p->next;
        if (p->owned) {
            free(p);
        }
    }
    if (l->wake_fd >= 0) {
        close(l->wake_fd);
    }
    pthread_mutex_destroy(&l->lock);
    free(l->w);
    free(l->pfds);
    free(l->widx);
    free(l->timers);
    free(l);
    return 0;
}

int agg_loop_is_mine(const agg_loop_t *l)
{
    return __atomic_load_n(&l->owned, __ATOMIC_ACQUIRE) &&
           pthread_equal(__atomic_load_n(&l->owner, __ATOMIC_RELAXED), pthread_self());
}

agg_status_t agg_loop_add(agg_loop_t *l, int fd, short events, const int *want_out,
                          agg_loop_fd_cb cb, void *arg)
{
    if (l->num >= l->max_fds) {
        return AGG_ERR_NO_RESOURCE;
    }
    l->w[l->num++] = (agg__watch_t){fd, events, want_out, cb, arg};
    return AGG_OK;
}

void agg_loop_del(agg_loop_t *l, int fd, const void *arg)
{
    unsigned i;

    for (i = 0; i < l->num; ++i) {
        if (l->w[i].fd == fd && l->w[i].arg == arg) {
            l->w[i].fd = -1;
            l->removed++;
        }
    }
}

int agg_loop_timer(agg_loop_t *l, int first_ms, agg_loop_timer_cb cb, void *arg)
{
    agg__timer_t *t = realloc(l->timers, (l->num_timers + 1) * sizeof(*t));

    if (t == NULL) {
        return -1;
    }
    l->timers = t;
    t[l->num_timers] = (agg__timer_t){first_ms < 0 ? -1 : agg_time_ms() + first_ms, cb, arg};
    return (int)l->num_timers++;
}

void agg_loop_timer_set(agg_loop_t *l, int id, int ms)
{
    if (id >= 0 && (unsigned)id < l->num_timers) {
        l->timers[id].due_ms = ms < 0 ? -1 : agg_time_ms() + ms;
    }
}

void agg_loop_wake(agg_loop_t *l)
{
    uint64_t one = 1;

    if (agg_loop_is_mine(l) || __atomic_exchange_n(&l->woken, 1, __ATOMIC_ACQ_REL)) {
        return; /* it looks at its fds again anyway, or was woken already */
    }
    if (write(l->wake_fd, &one, sizeof(one)) < 0) {
        __atomic_store_n(&l->woken, 0, __ATOMIC_RELEASE); /* it looks within a round */
    }
}

static void agg__loop_push(agg_loop_t *l, agg__post_t *p)
{
    p->next = NULL;
    pthread_mutex_lock(&l->lock);
    *l->tail = p;
    l->tail  = &p->next;
    /* under the lock: once the loop takes the call (a thread's done), the
       loop may go, and nothing here may touch it after */
    agg_loop_wake(l);
    pthread_mutex_unlock(&l->lock);
}

agg_status_t agg_loop_post(agg_loop_t *l, agg_loop_cb cb, void *arg)
{
    agg__post_t *p = malloc(sizeof(*p));

    if (p == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    *p = (agg__post_t){.cb = cb, .arg = arg, .owned = 1};
    agg__loop_push(l, p);
    return AGG_OK;
}

static void agg__loop_spawn_done(agg_loop_t *l, void *arg)
{
    agg__spawn_t *s = arg;

    l->spawned--;
    s->done(l, s->arg);
    free(s);
}

static void *agg__loop_spawn_main(void *arg)
{
    agg__spawn_t *s = arg;

    s->work(s->loop, s->arg);
    agg__loop_push(s->loop, &s->post); /* needs no memory: it cannot fail */
    return NULL;
}

agg_status_t agg_loop_spawn(agg_loop_t *l, unsigned max, agg_loop_cb work, agg_loop_cb done,
                            void *arg)
{
    agg__spawn_t *s;
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    if (l->spawned >= max) {
        return AGG_ERR_NO_RESOURCE;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    *s = (agg__spawn_t){.post = {.cb = agg__loop_spawn_done, .arg = s}, .loop = l,
                        .work = work, .done = done, .arg = arg};
    l->spawned++;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, agg__loop_spawn_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        l->spawned--;
        free(s);
        return AGG_ERR_NO_RESOURCE;
    }
    return AGG_OK;
}

unsigned agg_loop_spawned(const agg_loop_t *l)
{
    return l->spawned;
}

/* Milliseconds until the nearest timer, at most max_wait. */
static int agg__loop_wait(const agg_loop_t *l, int max_wait, int64_t now)
{
    int64_t wait = max_wait;
    unsigned i;

    for (i = 0; i < l->num_timers; ++i) {
        if (l->timers[i].due_ms >= 0 && l->timers[i].due_ms - now < wait) {
            wait = l->timers[i].due_ms - now;
        }
    }
    return wait < 0 ? 0 : (int)wait;
}

static void agg__loop_timers(agg_loop_t *l)
{
    int64_t now = agg_time_ms();
    unsigned i;

    /* a timer's callback may add timers: the array may move */
    for (i = 0; i < l->num_timers; ++i) {
        if (l->timers[i].due_ms >= 0 && l->timers[i].due_ms <= now) {
            int next = l->timers[i].cb(l, l->timers[i].arg);

            l->timers[i].due_ms = next < 0 ? -1 : agg_time_ms() + next;
        }
    }
}

static void agg__loop_posted(agg_loop_t *l)
{
    agg__post_t *p, *next;

    pthread_mutex_lock(&l->lock);
    p       = l->head;
    l->head = NULL;
    l->tail = &l->head;
    pthread_mutex_unlock(&l->lock);
    for (; p != NULL; p = next) {
        next = p->next;
        if (p->owned) {
            agg_loop_cb cb = p->cb;
            void *arg = p->arg;

            free(p);
            cb(l, arg);
        } else {
            p->cb(l, p->arg); /* may free the node */
        }
    }
}

static void agg__loop_compact(agg_loop_t *l)
{
    unsigned i, k = 0;

    for (i = 0; i < l->num; ++i) {
        if (l->w[i].fd >= 0) {
            l->w[k++] = l->w[i];
        }
    }
    l->num     = k;
    l->removed = 0;
}

agg_status_t agg_loop_once(agg_loop_t *l, int max_wait_ms)
{
    unsigned i, n = 1, polled;
    int wait, rc, tls_ready = 0;

    if (!agg_loop_is_mine(l)) {
        __atomic_store_n(&l->owner, pthread_self(), __ATOMIC_RELAXED);
        __atomic_store_n(&l->owned, 1, __ATOMIC_RELEASE);
    }
    l->pfds[0] = (struct pollfd){.fd = l->wake_fd, .events = POLLIN};
    for (i = 0; i < l->num; ++i) {
        short ev = l->w[i].events;

        if (l->w[i].want_out != NULL && __atomic_load_n(l->w[i].want_out, __ATOMIC_ACQUIRE)) {
            ev |= POLLOUT;
        }
        l->pfds[n]   = (struct pollfd){.fd = l->w[i].fd, .events = ev};
        l->widx[n++] = i;
        /* bytes a TLS session decrypted already are readable, unseen by poll */
        tls_ready |= (ev & POLLIN) && agg_tls_pending(l->w[i].fd) > 0;
    }
    polled = n;
    pthread_mutex_lock(&l->lock);
    wait = l->head != NULL || tls_ready ? 0 : agg__loop_wait(l, max_wait_ms, agg_time_ms());
    pthread_mutex_unlock(&l->lock);
    rc = poll(l->pfds, polled, wait);
    if (rc < 0 && errno != EINTR) {
        agg_error("event loop: poll failed: %s", strerror(errno));
        return AGG_ERR_IO;
    }
    for (i = 1; tls_ready && rc >= 0 && i < polled; ++i) {
        if ((l->pfds[i].events & POLLIN) && agg_tls_pending(l->pfds[i].fd) > 0) {
            l->pfds[i].revents |= POLLIN;
            rc = rc > 0 ? rc : 1;
        }
    }
    if (rc > 0 && (l->pfds[0].revents & POLLIN)) {
        uint64_t v;

        __atomic_store_n(&l->woken, 0, __ATOMIC_RELEASE);
        if (read(l->wake_fd, &v, sizeof(v)) < 0) {
            /* EAGAIN: nothing written since */
        }
    }
    for (i = 1; rc > 0 && i < polled; ++i) {
        const agg__watch_t *w = &l->w[l->widx[i]];

        /* removed in this round (its fd number may be someone's already) */
        if (l->pfds[i].revents != 0 && w->fd == l->pfds[i].fd) {
            w->cb(l, w->fd, l->pfds[i].revents, w->arg);
        }
    }
    agg__loop_timers(l);
    agg__loop_posted(l);
    if (l->removed > 0) {
        agg__loop_compact(l);
    }
    return AGG_OK;
}

agg_status_t agg_loop_run(agg_loop_t *l, const volatile int *stop)
{
    agg_status_t st = AGG_OK;

    while (st == AGG_OK && !__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
        st = agg_loop_once(l, AGG_LOOP_MAX_WAIT_MS);
    }
    return st;
}
