/*
 * Fragment numbers on the data path. Every group numbers its fragments
 * 1, 2, 3, ... in the order its members post them (the same order on every
 * member, since collectives on a communicator are issued in the same order
 * everywhere), as 64-bit counters that never wrap in practice. Fragment n of
 * a group with `slots` slot states lives in slot agg_seq_slot(n, slots).
 *
 * A member never has more than `window` fragments in flight: it posts n only
 * after it has consumed the result of n - window. A group keeps
 * slots = 2 x window slot states, so the slot of n was last used by
 * n - 2 x window, whose result every member has consumed by then (each of
 * them posted n - window, which it does only after consuming n - 2 x window).
 * That is what lets a result stay readable in place while later fragments
 * fill the other slots.
 */
#ifndef AGG_SEQ_H
#define AGG_SEQ_H

#include <stdint.h>

/* 0 is never a fragment number: a slot that has completed nothing holds 0. */
#define AGG_SEQ_NONE 0u

static inline uint32_t agg_seq_slot(uint64_t n, uint32_t slots)
{
    return (uint32_t)((n - 1u) % slots);
}

/* Slot states a group needs for a window of `window` fragments in flight. */
static inline uint32_t agg_seq_slots(uint32_t window)
{
    return 2u * window;
}

/* May fragment n be posted when every fragment up to `consumed` is done? */
static inline int agg_seq_may_post(uint64_t n, uint64_t consumed, uint32_t window)
{
    return n <= consumed + window;
}

#endif
