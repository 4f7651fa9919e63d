/*
 * Faults injected on purpose (switchsim's sim_faults), so that every test of
 * a lossy or broken network is repeatable. A spec reads like tc-netem's:
 *
 *   [in|out|both] loss P% | duplicate P% | corrupt P% | delay T [P%] |
 *   stall T at N | loss at N | duplicate at N | corrupt at N | kill at N |
 *   seed S
 *
 * P a percentage (decimals allowed), T milliseconds ("5" or "5ms"), N the
 * N-th message (from 1) going that way through the data port: `in` what it
 * reads (a member's fragment, a peer switchsim's partial or result), `out`
 * what it sends (results, partials); `both` (the default) either. A
 * direction word applies to the rules after it. `delay` holds a message
 * (and, TCP being in order, what follows it on its connection) T ms;
 * `corrupt` flips a bit of a message read (not of its magic or length:
 * its framing stays) and spoils the checksum of one sent;
 * `stall` holds the connection of the N-th message T ms; `kill` ends the
 * process (SIGKILL) as that message comes. On shared memory (no messages)
 * `kill` and `stall` count the fragments switchsim's reduction threads take
 * from ranks' channels, `in`; the other rules have nothing to act on there.
 * Whether a message meets a
 * probability rule depends only on the seed, the direction, the rule and
 * the message's number, so a run with the same traffic meets the same faults.
 */
#ifndef AGG_FAULT_H
#define AGG_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include "agg/status.h"

#define AGG_FAULT_MAX_RULES 16

enum { AGG_FAULT_IN = 0, AGG_FAULT_OUT = 1 };

/* what befalls a message (agg_fault_next) */
#define AGG_FAULT_LOSS  0x01u
#define AGG_FAULT_DUP   0x02u
#define AGG_FAULT_HOLD  0x04u /* delay or stall: *hold_ms */
#define AGG_FAULT_KILL  0x08u
#define AGG_FAULT_CORRUPT 0x10u /* in: a bit flipped; out: sent with a wrong checksum */

typedef struct agg_fault_rule {
    uint8_t  what;  /* one AGG_FAULT_* */
    uint8_t  dirs;  /* 1 << AGG_FAULT_IN | 1 << AGG_FAULT_OUT */
    uint32_t ppm;   /* parts per million of messages; 0: `at` decides */
    uint64_t at;    /* that message alone */
    uint32_t ms;    /* HOLD: how long */
} agg_fault_rule_t;

typedef struct agg_fault {
    unsigned         num;   /* rules; 0: no fault */
    agg_fault_rule_t rule[AGG_FAULT_MAX_RULES];
    uint64_t         seed;
    uint64_t         seen[2]; /* messages counted each way (atomic) */
} agg_fault_t;

/*
 * Parses a spec (NULL or blank: no fault). AGG_ERR_PARSE with why saying
 * which word is wrong and why; *f is then untouched.
 */
agg_status_t agg_fault_parse(agg_fault_t *f, const char *spec, char *why, size_t whylen);

/*
 * Counts one message going way `dir` and says what befalls it: AGG_FAULT_*
 * bits (0: nothing), *hold_ms for AGG_FAULT_HOLD. Thread-safe; lock-free.
 */
unsigned agg_fault_next(agg_fault_t *f, int dir, uint32_t *hold_ms);

/* Whether any rule applies to way `dir`. */
static inline int agg_fault_on(const agg_fault_t *f, int dir)
{
    unsigned i;

    for (i = 0; i < f->num; ++i) {
        if (f->rule[i].dirs & (1u << dir)) {
            return 1;
        }
    }
    return 0;
}

#endif
