/*
 * Waiting for another process on shared memory: spin while the machine has a
 * core to spare, yield a few times, then sleep on a futex word until the
 * other side says something changed. One helper for every waiter on the data
 * path (libagg waiting for results, switchsim's workers waiting for
 * fragments), so the policy is tuned in one place.
 *
 * The waker's side: after publishing what the waiter waits for (a seq_cst
 * store), call agg_wait_wake(): it bumps the word and wakes sleepers only
 * when *sleepers is non-zero, so a run where nobody sleeps makes no system
 * call.
 */
#ifndef AGG_WAIT_H
#define AGG_WAIT_H

#include <stdint.h>

typedef struct agg_wait {
    long spin;     /* polls spent spinning before yielding; 0 = never spin */
    long polls;    /* idle polls since the last progress */
    int  slice_ms; /* longest single sleep, so deadlines and shutdown are seen */
} agg_wait_t;

#define AGG_WAIT_YIELDS   8   /* sched_yield() calls between spinning and sleeping */
#define AGG_WAIT_SLICE_MS 100

static inline void agg_wait_init(agg_wait_t *w, long spin)
{
    w->spin     = spin;
    w->polls    = 0;
    w->slice_ms = AGG_WAIT_SLICE_MS;
}

/* Something happened: the next idle step spins again. */
static inline void agg_wait_reset(agg_wait_t *w)
{
    w->polls = 0;
}

/* Whether the next idle step will sleep (callers ring doorbells first). */
static inline int agg_wait_will_sleep(const agg_wait_t *w)
{
    return w->polls >= w->spin + AGG_WAIT_YIELDS;
}

/*
 * One idle step, after a poll found nothing: a pause while spinning, a
 * sched_yield() after that, then a sleep on `word`: *sleepers is raised,
 * ready(arg) is polled once more (so a wake-up between the caller's poll and
 * the sleep is not lost), and if it is still 0 the thread sleeps while *word
 * is unchanged, at most slice_ms. The caller polls again after every step and
 * checks its own deadline.
 */
void agg_wait_idle(agg_wait_t *w, uint32_t *word, uint32_t *sleepers,
                   int (*ready)(void *arg), void *arg);

/* Wakes every thread asleep on `word`, if any (see above). */
void agg_wait_wake(uint32_t *word, uint32_t *sleepers);

#endif
