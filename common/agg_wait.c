/*
 * The spin / yield / sleep policy of the data path (agg/wait.h).
 */
#include "agg/wait.h"

#include <sched.h>

#include "agg/shm.h"

void agg_wait_idle(agg_wait_t *w, uint32_t *word, uint32_t *sleepers,
                   int (*ready)(void *arg), void *arg)
{
    uint32_t seen;

    if (w->polls < w->spin) {
        w->polls++;
        agg_cpu_relax();
        return;
    }
    if (w->polls < w->spin + AGG_WAIT_YIELDS) {
        w->polls++;
        sched_yield(); /* with more processes than cores, let the other side run */
        return;
    }
    seen = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
    if (!ready(arg)) {
        agg_futex_wait(word, seen, w->slice_ms);
    }
    __atomic_fetch_sub(sleepers, 1, __ATOMIC_SEQ_CST);
    /* after a sleep: poll, yield once, and sleep again if still nothing */
    w->polls = w->spin + AGG_WAIT_YIELDS - 1;
}

void agg_wait_wake(uint32_t *word, uint32_t *sleepers)
{
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) {
        __atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
        agg_futex_wake(word, 0);
    }
}
