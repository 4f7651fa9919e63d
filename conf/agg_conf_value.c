/*
 * Setting values: the text of a file, the environment or a command line
 * turned into the typed value of a row, and the words for what a row
 * accepts. Kept apart from the loaders so that every source goes through
 * the same checks and says "expected ..." the same way.
 */
#include "agg_conf_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agg/sock.h"

/* What a row accepts, in words; the tail of every "expected ..." message. */
void agg__conf_expect(const agg_conf_row_t *row, char *buf, size_t len)
{
    switch (row->type) {
    case AGG_CONF_T_INT:
        snprintf(buf, len, "%san integer in %lld..%lld",
                 (row->flags & AGG_CONF_F_ZERO_OK) ? "0 or " : "", row->min, row->max);
        break;
    case AGG_CONF_T_BOOL:
        snprintf(buf, len, "a boolean (0/1, y/n, yes/no, true/false, on/off)");
        break;
    case AGG_CONF_T_STRING:
        snprintf(buf, len, "a string");
        break;
    case AGG_CONF_T_ADDR:
        snprintf(buf, len, "host:port with port in 0..65535");
        break;
    case AGG_CONF_T_ENUM:
        snprintf(buf, len, "one of %s", row->choices);
        break;
    }
}

/* The index of `text` among the '|'-separated words of choices, or -1. */
static int agg__conf_parse_enum(const char *choices, const char *text, long long *out)
{
    size_t n = strlen(text), wlen;
    const char *w = choices, *bar;
    int idx = 0;

    while (n > 0 && isspace((unsigned char)text[n - 1])) {
        n--;
    }
    while (isspace((unsigned char)*text) && n > 0) {
        text++;
        n--;
    }
    for (;;) {
        bar  = strchr(w, '|');
        wlen = bar ? (size_t)(bar - w) : strlen(w);
        if (wlen == n && n > 0 && strncasecmp(w, text, n) == 0) {
            *out = idx;
            return 0;
        }
        if (bar == NULL) {
            return -1;
        }
        w = bar + 1;
        idx++;
    }
}

/*
 * Decimal or 0x hex with an optional k/m/g/t suffix (powers of 1024).
 * strtoll alone would take octal for a leading 0 and ignore trailing junk,
 * which turns typos into silently different values.
 */
static int agg__conf_parse_ll(const char *text, long long *out)
{
    const char *p = text;
    unsigned long long mag, mult = 1;
    int neg = 0, base = 10;
    char *end;

    while (isspace((unsigned char)*p)) {
        p++;
    }
    if (*p == '+' || *p == '-') {
        neg = (*p == '-');
        p++;
    }
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    if (!(base == 16 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))) {
        return -1;
    }
    errno = 0;
    mag = strtoull(p, &end, base);
    if (errno == ERANGE) {
        return -1;
    }
    switch (*end) {
    case 'k': case 'K': mult = 1ULL << 10; end++; break;
    case 'm': case 'M': mult = 1ULL << 20; end++; break;
    case 'g': case 'G': mult = 1ULL << 30; end++; break;
    case 't': case 'T': mult = 1ULL << 40; end++; break;
    default: break;
    }
    while (isspace((unsigned char)*end)) {
        end++;
    }
    if (*end != '\0' || mag > ULLONG_MAX / mult) {
        return -1;
    }
    mag *= mult;
    if (mag > (unsigned long long)LLONG_MAX + (unsigned long long)neg) {
        return -1;
    }
    if (neg) {
        *out = (mag == (unsigned long long)LLONG_MAX + 1) ? LLONG_MIN : -(long long)mag;
    } else {
        *out = (long long)mag;
    }
    return 0;
}

static int agg__conf_parse_bool(const char *text, long long *out)
{
    static const char *const yes[] = {"1", "y", "yes", "true", "on"};
    static const char *const no[]  = {"0", "n", "no", "false", "off"};
    char word[8];
    size_t n, i;

    while (isspace((unsigned char)*text)) {
        text++;
    }
    n = strlen(text);
    while (n > 0 && isspace((unsigned char)text[n - 1])) {
        n--;
    }
    if (n == 0 || n >= sizeof(word)) {
        return -1;
    }
    memcpy(word, text, n);
    word[n] = '\0';
    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(word, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(word, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* Turns text into a value for row; on failure `why` says what was expected. */
int agg__conf_parse(const agg_conf_row_t *row, const char *text, agg_conf_value_t *val,
                    char *why, size_t whylen)
{
    char expect[128], detail[128];
    long long i = 0;

    agg__conf_expect(row, expect, sizeof(expect));
    switch (row->type) {
    case AGG_CONF_T_INT:
        if (agg__conf_parse_ll(text, &i) != 0 ||
            (!(i == 0 && (row->flags & AGG_CONF_F_ZERO_OK)) &&
             (i < row->min || i > row->max))) {
            snprintf(why, whylen, "expected %s", expect);
            return -1;
        }
        snprintf(val->s, sizeof(val->s), "%lld", i);
        break;
    case AGG_CONF_T_BOOL:
        if (agg__conf_parse_bool(text, &i) != 0) {
            snprintf(why, whylen, "expected %s", expect);
            return -1;
        }
        snprintf(val->s, sizeof(val->s), "%lld", i);
        break;
    case AGG_CONF_T_ENUM: {
        const char *w = row->choices, *bar;
        long long k;

        if (agg__conf_parse_enum(row->choices, text, &i) != 0) {
            snprintf(why, whylen, "expected %s", expect);
            return -1;
        }
        /* stored in the table's spelling, whatever case it was written in */
        for (k = 0; k < i; ++k) {
            w = strchr(w, '|') + 1;
        }
        bar = strchr(w, '|');
        snprintf(val->s, sizeof(val->s), "%.*s", (int)(bar ? (size_t)(bar - w) : strlen(w)),
                 w);
        break;
    }
    case AGG_CONF_T_ADDR:
        if (agg_sock_addr_parse(text, NULL, 0, NULL, detail, sizeof(detail)) != AGG_OK) {
            snprintf(why, whylen, "expected %s (%s)", expect, detail);
            return -1;
        }
        /* an address is stored like a string */
        /* fall through */
    case AGG_CONF_T_STRING:
        if (strlen(text) >= sizeof(val->s)) {
            snprintf(why, whylen, "expected %s of at most %zu characters", expect,
                     sizeof(val->s) - 1);
            return -1;
        }
        snprintf(val->s, sizeof(val->s), "%s", text);
        break;
    }
    val->i = i;
    return 0;
}
