/*
 * Injected faults: the spec's parser and the per-message decision
 * (agg/fault.h).
 */
#include "agg/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGG_FAULT_MAX_MS 600000u
#define AGG_FAULT_WORDS  64

/* splitmix64: a well-mixed hash of the message's coordinates */
static uint64_t agg__fault_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* "1%", "0.5%": parts per million; -1 when it is not a percentage of 0 to 100 */
static long agg__fault_percent(const char *w)
{
    char *end;
    double p;

    errno = 0;
    p     = strtod(w, &end);
    if (errno != 0 || end == w || strcmp(end, "%") != 0 || !(p >= 0 && p <= 100)) {
        return -1;
    }
    return (long)(p * 10000.0 + 0.5);
}

/* "5" or "5ms": milliseconds; -1 when not 1 .. AGG_FAULT_MAX_MS */
static long agg__fault_ms(const char *w)
{
    char *end;
    unsigned long v;

    if (*w < '0' || *w > '9') {
        return -1;
    }
    errno = 0;
    v     = strtoul(w, &end, 10);
    if (errno != 0 || (*end != '\0' && strcmp(end, "ms") != 0) || v == 0 ||
        v > AGG_FAULT_MAX_MS) {
        return -1;
    }
    return (long)v;
}

/* a message number from 1; 0 when it is not one */
static uint64_t agg__fault_count(const char *w)
{
    char *end;
    unsigned long long v;

    if (*w < '0' || *w > '9') {
        return 0;
    }
    errno = 0;
    v     = strtoull(w, &end, 10);
    return errno != 0 || *end != '\0' ? 0 : (uint64_t)v;
}

agg_status_t agg_fault_parse(agg_fault_t *f, const char *spec, char *why, size_t whylen)
{
    char buf[512], *words[AGG_FAULT_WORDS], *save = NULL, *w;
    agg_fault_t out = {.seed = 1};
    unsigned nw = 0, i = 0;
    uint8_t dirs = 3;

    if (spec == NULL) {
        spec = "";
    }
    if (strlen(spec) >= sizeof(buf)) {
        snprintf(why, whylen, "longer than %zu characters", sizeof(buf) - 1);
        return AGG_ERR_PARSE;
    }
    strcpy(buf, spec);
    for (w = strtok_r(buf, " \t,", &save); w != NULL; w = strtok_r(NULL, " \t,", &save)) {
        if (nw == AGG_FAULT_WORDS) {
            snprintf(why, whylen, "more than %d words", AGG_FAULT_WORDS);
            return AGG_ERR_PARSE;
        }
        words[nw++] = w;
    }
#define NEXT(what)                                                                        \
    do {                                                                                  \
        if (++i >= nw) {                                                                  \
            snprintf(why, whylen, "'%s' wants %s after it", words[i - 1], what);          \
            return AGG_ERR_PARSE;                                                         \
        }                                                                                 \
    } while (0)
    for (i = 0; i < nw; ++i) {
        const char *kw = words[i];
        agg_fault_rule_t r = {.dirs = dirs};
        long v;

        if (strcmp(kw, "in") == 0 || strcmp(kw, "out") == 0 || strcmp(kw, "both") == 0) {
            dirs = kw[0] == 'i' ? 1u << AGG_FAULT_IN : kw[0] == 'o' ? 1u << AGG_FAULT_OUT : 3;
            continue;
        }
        if (strcmp(kw, "seed") == 0) {
            NEXT("a number");
            out.seed = agg__fault_count(words[i]);
            if (out.seed == 0) {
                snprintf(why, whylen, "seed '%s' is not a number from 1", words[i]);
                return AGG_ERR_PARSE;
            }
            continue;
        }
        if (strcmp(kw, "loss") == 0 || strcmp(kw, "duplicate") == 0 ||
            strcmp(kw, "corrupt") == 0 || strcmp(kw, "kill") == 0) {
            r.what = kw[0] == 'l' ? AGG_FAULT_LOSS : kw[0] == 'd' ? AGG_FAULT_DUP :
                     kw[0] == 'c' ? AGG_FAULT_CORRUPT : AGG_FAULT_KILL;
        } else if (strcmp(kw, "delay") == 0 || strcmp(kw, "stall") == 0) {
            r.what = AGG_FAULT_HOLD;
            NEXT("milliseconds");
            if ((v = agg__fault_ms(words[i])) < 0) {
                snprintf(why, whylen, "%s '%s': not milliseconds from 1 to %u", kw, words[i],
                         AGG_FAULT_MAX_MS);
                return AGG_ERR_PARSE;
            }
            r.ms = (uint32_t)v;
            if (kw[0] == 'd' && (i + 1 == nw || strcmp(words[i + 1], "at") != 0)) {
                r.ppm = 1000000; /* every message, unless a percentage follows */
                if (i + 1 < nw && (v = agg__fault_percent(words[i + 1])) >= 0) {
                    r.ppm = (uint32_t)v;
                    ++i;
                }
                goto add;
            }
        } else {
            snprintf(why, whylen, "'%s' is not a fault (loss, duplicate, corrupt, delay, stall, "
                     "kill, seed, in, out, both)", kw);
            return AGG_ERR_PARSE;
        }
        NEXT(r.what != AGG_FAULT_KILL && r.what != AGG_FAULT_HOLD ? "a percentage or 'at N'"
                                                                 : "'at N'");
        if (strcmp(words[i], "at") == 0) {
            NEXT("a message number");
            if ((r.at = agg__fault_count(words[i])) == 0) {
                snprintf(why, whylen, "%s at '%s': not a message number from 1", kw, words[i]);
                return AGG_ERR_PARSE;
            }
        } else if ((r.what != AGG_FAULT_KILL && r.what != AGG_FAULT_HOLD) &&
                   (v = agg__fault_percent(words[i])) >= 0) {
            r.ppm = (uint32_t)v;
        } else {
            snprintf(why, whylen, "%s '%s': %s", kw, words[i],
                     r.what != AGG_FAULT_KILL && r.what != AGG_FAULT_HOLD
                         ? "not a percentage from 0% to 100% nor 'at N'" : "wants 'at N'");
            return AGG_ERR_PARSE;
        }
add:
        if (out.num == AGG_FAULT_MAX_RULES) {
            snprintf(why, whylen, "more than %d faults", AGG_FAULT_MAX_RULES);
            return AGG_ERR_PARSE;
        }
        out.rule[out.num++] = r;
    }
#undef NEXT
    *f = out;
    return AGG_OK;
}

unsigned agg_fault_next(agg_fault_t *f, int dir, uint32_t *hold_ms)
{
    uint64_t k;
    unsigned i, what = 0;

    *hold_ms = 0;
    if (f->num == 0) {
        return 0;
    }
    k = __atomic_add_fetch(&f->seen[dir], 1, __ATOMIC_RELAXED);
    for (i = 0; i < f->num; ++i) {
        const agg_fault_rule_t *r = &f->rule[i];
        int hit;

        if (!(r->dirs & (1u << dir))) {
            continue;
        }
        if (r->ppm == 0) {
            hit = r->at == k;
        } else {
            uint64_t h = agg__fault_mix(f->seed ^ agg__fault_mix(k * 2 + (uint64_t)dir) ^
                                        ((uint64_t)i << 56));
            hit = h % 1000000u < r->ppm;
        }
        if (hit) {
            what |= r->what;
            if (r->what == AGG_FAULT_HOLD && r->ms > *hold_ms) {
                *hold_ms = r->ms;
            }
        }
    }
    return what;
}
