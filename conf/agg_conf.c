/*
 * Settings: parsing, validation and precedence for the rows of
 * agg_conf_table. Every loader works on a copy and stores it only when the
 * whole source was valid, so a rejected file or environment leaves the
 * caller's values as they were.
 */
#include "agg/conf.h"
#include "agg/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <libconfig.h>

extern char **environ;

#define AGG__CONF_FILE_ENV "AGG_CONFIG_FILE"
#define AGG__CONF_NAME_MAX 128 /* longest name the suggestions compare */
#define AGG__CONF_VALUE_SHOWN 64 /* value characters quoted in a warning */

static void agg__conf_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void agg__conf_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static const char *agg__conf_source_name(agg_conf_source_t source)
{
    switch (source) {
    case AGG_CONF_SRC_DEFAULT: return "default";
    case AGG_CONF_SRC_FILE:    return "file";
    case AGG_CONF_SRC_ENV:     return "environment";
    case AGG_CONF_SRC_CMDLINE: return "command line";
    }
    return "unknown source";
}

/* What a row accepts, in words; the tail of every "expected ..." message. */
static void agg__conf_expect(const agg_conf_row_t *row, char *buf, size_t len)
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

/*
 * host:port or [v6host]:port. On failure `why` says what is wrong and the
 * outputs are untouched.
 */
static agg_status_t agg__conf_addr_parse(const char *addr, char *host, size_t hostlen,
                                         int *port, char *why, size_t whylen)
{
    const char *hbeg = addr, *ptext;
    size_t hlen, i;
    long val = 0;

    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');

        if (close == NULL) {
            snprintf(why, whylen, "missing ']' after an IPv6 address");
            return AGG_ERR_PARSE;
        }
        hbeg = addr + 1;
        hlen = (size_t)(close - hbeg);
        if (close[1] != ':') {
            snprintf(why, whylen, "missing ':port' after ']'");
            return AGG_ERR_PARSE;
        }
        ptext = close + 2;
    } else {
        const char *colon = strrchr(addr, ':');

        if (colon == NULL) {
            snprintf(why, whylen, "missing ':port'");
            return AGG_ERR_PARSE;
        }
        hlen = (size_t)(colon - addr);
        if (memchr(addr, ':', hlen) != NULL) {
            snprintf(why, whylen, "an IPv6 address needs brackets, e.g. [::1]:6126");
            return AGG_ERR_PARSE;
        }
        ptext = colon + 1;
    }
    if (hlen == 0) {
        snprintf(why, whylen, "empty host");
        return AGG_ERR_PARSE;
    }
    for (i = 0; i < hlen; i++) {
        if (isspace((unsigned char)hbeg[i]) || !isprint((unsigned char)hbeg[i])) {
            snprintf(why, whylen, "the host contains a space or control character");
            return AGG_ERR_PARSE;
        }
    }
    if (ptext[0] == '\0' || strlen(ptext) > 5 ||
        strspn(ptext, "0123456789") != strlen(ptext) ||
        (val = strtol(ptext, NULL, 10)) > 65535) {
        snprintf(why, whylen, "port '%.16s' is not a number in 0..65535", ptext);
        return AGG_ERR_PARSE;
    }
    if (host != NULL) {
        if (hlen >= hostlen) {
            snprintf(why, whylen, "host longer than %zu characters",
                     hostlen ? hostlen - 1 : 0);
            return AGG_ERR_INVALID_PARAM;
        }
        memcpy(host, hbeg, hlen);
        host[hlen] = '\0';
    }
    if (port != NULL) {
        *port = (int)val;
    }
    return AGG_OK;
}

/* Turns text into a value for row; on failure `why` says what was expected. */
static int agg__conf_parse(const agg_conf_row_t *row, const char *text,
                           agg_conf_value_t *val, char *why, size_t whylen)
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
    case AGG_CONF_T_ADDR:
        if (agg__conf_addr_parse(text, NULL, 0, NULL, detail, sizeof(detail)) != AGG_OK) {
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

/*
 * Validates text for row and stores it in conf; errors read
 * "<errprefix>: expected ...".
 */
static agg_status_t agg__conf_apply(agg_conf_t *conf, const agg_conf_row_t *row,
                                    const char *text, agg_conf_source_t source,
                                    const char *where, const char *errprefix,
                                    char *err, size_t errlen)
{
    agg_conf_value_t val;
    char why[512];

    memset(&val, 0, sizeof(val));
    if (agg__conf_parse(row, text, &val, why, sizeof(why)) != 0) {
        agg__conf_err(err, errlen, "%s: %s", errprefix, why);
        return AGG_ERR_CONFIG;
    }
    val.source = source;
    snprintf(val.where, sizeof(val.where), "%s", where);
    conf->v[row->id] = val;
    return AGG_OK;
}

void agg_conf_init(agg_conf_t *conf)
{
    char why[512];
    int id;

    memset(conf, 0, sizeof(*conf));
    for (id = 0; id < AGG_CONF__COUNT; id++) {
        const agg_conf_row_t *row = &agg_conf_table[id];
        agg_conf_value_t *val     = &conf->v[id];

        if (agg__conf_parse(row, row->defval, val, why, sizeof(why)) != 0) {
            /* A table bug, caught by the unit test; keep the text anyway. */
            snprintf(val->s, sizeof(val->s), "%s", row->defval);
        }
        val->source = AGG_CONF_SRC_DEFAULT;
        snprintf(val->where, sizeof(val->where), "default");
    }
}

agg_status_t agg_conf_set(agg_conf_t *conf, agg_conf_id_t id, const char *text,
                          agg_conf_source_t source, const char *where,
                          char *err, size_t errlen)
{
    char prefix[512];

    if (conf == NULL || text == NULL || (unsigned)id >= AGG_CONF__COUNT) {
        agg__conf_err(err, errlen, "agg_conf_set: invalid argument (id %d)", (int)id);
        return AGG_ERR_INVALID_PARAM;
    }
    if (where == NULL) {
        where = agg__conf_source_name(source);
    }
    snprintf(prefix, sizeof(prefix), "%s: %s=%s", where, agg_conf_table[id].key, text);
    return agg__conf_apply(conf, &agg_conf_table[id], text, source, where, prefix,
                           err, errlen);
}

/* Edit distance, case-insensitive: how far a typo is from a real name. */
static size_t agg__conf_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i, j;
    size_t row[AGG__CONF_NAME_MAX + 1];

    if (la > AGG__CONF_NAME_MAX || lb > AGG__CONF_NAME_MAX) {
        return SIZE_MAX;
    }
    for (j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t up   = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;

            if (up + 1 < best) {
                best = up + 1;
            }
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            row[j] = best;
            diag   = up;
        }
    }
    return row[lb];
}

/*
 * The key (want_env 0) or environment name (want_env 1) nearest to name,
 * or NULL when even the nearest is too far to be a plausible typo.
 */
static const char *agg__conf_nearest(const char *name, int want_env)
{
    size_t best = SIZE_MAX, limit = strlen(name) / 3;
    const char *found = NULL;
    int id, k;

    for (id = 0; id < AGG_CONF__COUNT; id++) {
        const agg_conf_row_t *row = &agg_conf_table[id];
        const char *const *cands  = want_env ? row->env : &row->key;
        int ncands                = want_env ? 3 : 1;

        for (k = 0; k < ncands && cands[k] != NULL; k++) {
            size_t d = agg__conf_distance(name, cands[k]);

            if (d < best) {
                best  = d;
                found = cands[k];
            }
        }
    }
    if (limit < 2) {
        limit = 2;
    }
    return best <= limit ? found : NULL;
}

const agg_conf_row_t *agg_conf_find_key(const char *key)
{
    int id;

    for (id = 0; key != NULL && id < AGG_CONF__COUNT; id++) {
        if (strcmp(agg_conf_table[id].key, key) == 0) {
            return &agg_conf_table[id];
        }
    }
    return NULL;
}

const agg_conf_row_t *agg_conf_find_env(const char *name)
{
    int id, k;

    for (id = 0; name != NULL && id < AGG_CONF__COUNT; id++) {
        for (k = 0; k < 3 && agg_conf_table[id].env[k] != NULL; k++) {
            if (strcmp(agg_conf_table[id].env[k], name) == 0) {
                return &agg_conf_table[id];
            }
        }
    }
    return NULL;
}

/*
 * libconfig 1.5 keeps only the low 32 bits of an integer written without an
 * L suffix, so "sat_threshold = 8589934592;" would silently read as 0. Read
 * the literal back from the source line and report 1 when it disagrees with
 * what libconfig returned; 0 when it agrees or cannot be found.
 */
static int agg__conf_int_truncated(const char *file, unsigned line, const char *key,
                                   long long got, char *literal, size_t litlen)
{
    char *text = NULL, *p;
    size_t cap = 0, klen = strlen(key);
    unsigned n = 0;
    int truncated = 0;
    FILE *f;

    f = fopen(file, "r");
    if (f == NULL) {
        return 0;
    }
    while (n < line && getline(&text, &cap, f) >= 0) {
        n++;
    }
    for (p = (n == line) ? text : NULL; p != NULL && (p = strstr(p, key)) != NULL; p += klen) {
        unsigned long long lit;
        const char *q = p + klen;
        char *end;
        int neg = 0;

        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) {
            continue;
        }
        q += strspn(q, " \t");
        if (*q != '=' && *q != ':') {
            continue;
        }
        q++;
        q += strspn(q, " \t");
        if (*q == '-' || *q == '+') {
            neg = (*q == '-');
            q++;
        }
        if (!isdigit((unsigned char)*q)) {
            break;
        }
        errno = 0;
        /* libconfig reads "010" as ten, so no octal here either */
        if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) {
            lit = strtoull(q + 2, &end, 16);
        } else {
            lit = strtoull(q, &end, 10);
        }
        if (*end == 'L' || *end == 'l') {
            break; /* a 64-bit literal, read exactly */
        }
        truncated = errno == ERANGE || lit > (unsigned long long)LLONG_MAX ||
                    (neg ? -(long long)lit : (long long)lit) != got;
        snprintf(literal, litlen, "%s%.*s", neg ? "-" : "", (int)(end - q), q);
        break;
    }
    free(text);
    fclose(f);
    return truncated;
}

static const char *agg__conf_cfg_type_name(int type)
{
    switch (type) {
    case CONFIG_TYPE_GROUP:  return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:  return "an integer";
    case CONFIG_TYPE_FLOAT:  return "a floating-point number";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL:   return "a boolean";
    case CONFIG_TYPE_ARRAY:  return "an array";
    case CONFIG_TYPE_LIST:   return "a list";
    }
    return "an unknown type";
}

/* One top-level setting of a file, checked against the table. */
static agg_status_t agg__conf_apply_setting(agg_conf_t *conf, const config_setting_t *s,
                                            const char *path, char *err, size_t errlen)
{
    const char *name = config_setting_name(s);
    const char *file = config_setting_source_file(s);
    unsigned line    = config_setting_source_line(s);
    int type         = config_setting_type(s);
    const agg_conf_row_t *row;
    char where[256], text[64], expect[128], prefix[600];
    const char *value = NULL;

    snprintf(where, sizeof(where), "%s:%u", file ? file : path, line);
    row = agg_conf_find_key(name);
    if (row == NULL) {
        const agg_conf_row_t *env_row = agg_conf_find_env(name);
        const char *hint = env_row ? env_row->key : agg__conf_nearest(name, 0);

        if (hint != NULL) {
            agg__conf_err(err, errlen, "%s: unknown setting '%s' (did you mean '%s'?)",
                          where, name, hint);
        } else {
            agg__conf_err(err, errlen, "%s: unknown setting '%s' (agg_info -c lists them)",
                          where, name);
        }
        return AGG_ERR_CONFIG;
    }

    switch (type) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        if (row->type == AGG_CONF_T_INT || row->type == AGG_CONF_T_BOOL) {
            long long i = config_setting_get_int64(s);
            char literal[40];

            if (type == CONFIG_TYPE_INT &&
                agg__conf_int_truncated(file ? file : path, line, name, i, literal,
                                        sizeof(literal))) {
                agg__conf_err(err, errlen,
                              "%s: %s = %s: libconfig keeps only 32 bits of a number; write "
                              "%sL, or a string with a suffix such as \"8g\"",
                              where, name, literal, literal);
                return AGG_ERR_CONFIG;
            }
            snprintf(text, sizeof(text), "%lld", i);
            value = text;
        }
        break;
    case CONFIG_TYPE_BOOL:
        if (row->type == AGG_CONF_T_BOOL) {
            value = config_setting_get_bool(s) ? "1" : "0";
        }
        break;
    case CONFIG_TYPE_STRING:
        value = config_setting_get_string(s);
        break;
    default:
        break;
    }
    if (value == NULL) {
        agg__conf_expect(row, expect, sizeof(expect));
        agg__conf_err(err, errlen, "%s: %s: expected %s%s, not %s", where, name, expect,
                      (row->type == AGG_CONF_T_STRING || row->type == AGG_CONF_T_ADDR)
                          ? " in double quotes" : "",
                      agg__conf_cfg_type_name(type));
        return AGG_ERR_CONFIG;
    }
    snprintf(prefix, sizeof(prefix),
             type == CONFIG_TYPE_STRING ? "%s: %s = \"%s\"" : "%s: %s = %s", where, name,
             value);
    return agg__conf_apply(conf, row, value, AGG_CONF_SRC_FILE, where, prefix, err, errlen);
}

agg_status_t agg_conf_load_file(agg_conf_t *conf, const char *path, char *err,
                                 size_t errlen)
{
    agg_status_t status = AGG_OK;
    config_setting_t *root;
    struct stat st;
    agg_conf_t tmp;
    config_t cfg;
    FILE *f;
    int i, n;

    if (conf == NULL || path == NULL) {
        agg__conf_err(err, errlen, "agg_conf_load_file: no file given");
        return AGG_ERR_INVALID_PARAM;
    }
    /* libconfig 1.5 reports neither the reason nor the name of a file it cannot open. */
    f = fopen(path, "r");
    if (f == NULL) {
        agg__conf_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return AGG_ERR_IO;
    }
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        agg__conf_err(err, errlen, "%s: is a directory, not a configuration file", path);
        return AGG_ERR_IO;
    }
    fclose(f);

    config_init(&cfg);
    if (config_read_file(&cfg, path) != CONFIG_TRUE) {
        if (config_error_type(&cfg) == CONFIG_ERR_PARSE) {
            agg__conf_err(err, errlen, "%s:%d: %s",
                          config_error_file(&cfg) ? config_error_file(&cfg) : path,
                          config_error_line(&cfg),
                          config_error_text(&cfg) ? config_error_text(&cfg) : "syntax error");
            status = AGG_ERR_PARSE;
        } else {
            agg__conf_err(err, errlen, "%s: cannot read: %s", path,
                          config_error_text(&cfg) ? config_error_text(&cfg) : "I/O error");
            status = AGG_ERR_IO;
        }
        goto out;
    }

    tmp  = *conf;
    root = config_root_setting(&cfg);
    n    = config_setting_length(root);
    for (i = 0; i < n; i++) {
        status = agg__conf_apply_setting(&tmp, config_setting_get_elem(root, (unsigned)i),
                                         path, err, errlen);
        if (status != AGG_OK) {
            goto out;
        }
    }
    *conf = tmp;
out:
    config_destroy(&cfg);
    return status;
}

/* getenv() over an explicit environment; the first definition wins, as in libc. */
static const char *agg__conf_getenv(char *const *envp, const char *name)
{
    size_t len = strlen(name);

    for (; envp != NULL && *envp != NULL; envp++) {
        if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=') {
            return *envp + len + 1;
        }
    }
    return NULL;
}

agg_status_t agg_conf_load_env(agg_conf_t *conf, char *const *envp, char *err,
                                size_t errlen)
{
    char where[256], prefix[512];
    agg_status_t status;
    agg_conf_t tmp;
    int id, k;

    if (conf == NULL) {
        agg__conf_err(err, errlen, "agg_conf_load_env: no configuration given");
        return AGG_ERR_INVALID_PARAM;
    }
    if (envp == NULL) {
        envp = environ;
    }
    tmp = *conf;
    for (id = 0; id < AGG_CONF__COUNT; id++) {
        const agg_conf_row_t *row = &agg_conf_table[id];

        /* Names are tried in the row's order; the first one set wins. */
        for (k = 0; k < 3 && row->env[k] != NULL; k++) {
            const char *value = agg__conf_getenv(envp, row->env[k]);

            if (value == NULL) {
                continue;
            }
            snprintf(where, sizeof(where), "env %s", row->env[k]);
            snprintf(prefix, sizeof(prefix), "%s=%s", row->env[k], value);
            status = agg__conf_apply(&tmp, row, value, AGG_CONF_SRC_ENV, where, prefix,
                                     err, errlen);
            if (status != AGG_OK) {
                return status;
            }
            break;
        }
    }
    *conf = tmp;
    return AGG_OK;
}

agg_status_t agg_conf_load(agg_conf_t *conf, const char *path, char *const *envp,
                           char *err, size_t errlen)
{
    int from_env = 0;
    agg_status_t status;
    agg_conf_t tmp;

    if (conf == NULL) {
        agg__conf_err(err, errlen, "agg_conf_load: no configuration given");
        return AGG_ERR_INVALID_PARAM;
    }
    if (envp == NULL) {
        envp = environ;
    }
    if (path == NULL) {
        path     = agg__conf_getenv(envp, AGG__CONF_FILE_ENV);
        from_env = 1;
        if (path != NULL && path[0] == '\0') {
            path = NULL;
        }
    }

    agg_conf_init(&tmp);
    if (path != NULL) {
        status = agg_conf_load_file(&tmp, path, err, errlen);
        if (status == AGG_ERR_IO && from_env && err != NULL && errlen > 0) {
            size_t used = strlen(err);

            snprintf(err + used, errlen - used, " (named by %s)", AGG__CONF_FILE_ENV);
        }
        if (status != AGG_OK) {
            return status;
        }
    }
    status = agg_conf_load_env(&tmp, envp, err, errlen);
    if (status != AGG_OK) {
        return status;
    }
    *conf = tmp;
    return AGG_OK;
}

long long agg_conf_int(const agg_conf_t *conf, agg_conf_id_t id)
{
    return ((unsigned)id < AGG_CONF__COUNT) ? conf->v[id].i : 0;
}

const char *agg_conf_str(const agg_conf_t *conf, agg_conf_id_t id)
{
    return ((unsigned)id < AGG_CONF__COUNT) ? conf->v[id].s : "";
}

int agg_conf_check_env(char *const *envp, void (*warn)(const char *msg, void *arg),
                       void *arg)
{
    static const char *const prefixes[] = {"SHARP_COLL_", "HCOLL_", "AGG_"};
    char name[AGG__CONF_NAME_MAX + 1], msg[512];
    int unknown = 0;
    size_t p;

    if (envp == NULL) {
        envp = environ;
    }
    for (; *envp != NULL; envp++) {
        const char *entry = *envp;
        const char *eq    = strchr(entry, '=');
        size_t len        = eq ? (size_t)(eq - entry) : strlen(entry);
        const char *hint;
        int ours = 0;

        for (p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
            ours |= strncmp(entry, prefixes[p], strlen(prefixes[p])) == 0;
        }
        if (!ours) {
            continue;
        }
        if (len > AGG__CONF_NAME_MAX) {
            len = AGG__CONF_NAME_MAX;
        }
        memcpy(name, entry, len);
        name[len] = '\0';
        if (strcmp(name, AGG__CONF_FILE_ENV) == 0 || agg_conf_find_env(name) != NULL) {
            continue;
        }
        unknown++;
        hint = agg__conf_nearest(name, 1);
        snprintf(msg, sizeof(msg), "unknown variable %s=%.*s%s ignored%s%s%s", name,
                 AGG__CONF_VALUE_SHOWN, eq ? eq + 1 : "",
                 (eq && strlen(eq + 1) > AGG__CONF_VALUE_SHOWN) ? "..." : "",
                 hint ? "; did you mean " : "", hint ? hint : "", hint ? "?" : "");
        if (warn != NULL) {
            warn(msg, arg);
        } else {
            agg_warn("%s", msg);
        }
    }
    return unknown;
}

static void agg__conf_dump_scope(unsigned scope, FILE *out)
{
    static const char *const names[] = {"client library", "hcoll shim", "aggmgr",
                                        "switchsim"};
    const char *sep = "";
    unsigned bit;

    if ((scope & AGG_CONF_SCOPE_ALL) == AGG_CONF_SCOPE_ALL) {
        fprintf(out, "# read by every program\n");
        return;
    }
    fprintf(out, "# read by ");
    for (bit = 0; bit < 4; bit++) {
        if (scope & (1u << bit)) {
            fprintf(out, "%s%s", sep, names[bit]);
            sep = ", ";
        }
    }
    fprintf(out, "\n");
}

/* Prints text as indented lines of at most `width` columns. */
static void agg__conf_dump_wrapped(const char *text, int indent, int width, FILE *out)
{
    int col = 0;

    while (*text != '\0') {
        int wlen = (int)strcspn(text, " ");

        if (col > 0 && col + 1 + wlen > width) {
            fputc('\n', out);
            col = 0;
        }
        if (col == 0) {
            fprintf(out, "%*s%.*s", indent, "", wlen, text);
            col = indent + wlen;
        } else {
            fprintf(out, " %.*s", wlen, text);
            col += 1 + wlen;
        }
        text += wlen;
        text += strspn(text, " ");
    }
    if (col > 0) {
        fputc('\n', out);
    }
}

void agg_conf_dump(const agg_conf_t *conf, unsigned scope_mask, FILE *out)
{
    unsigned last_scope = 0;
    char expect[128], line[512];
    int id, k, printed = 0;

    for (id = 0; id < AGG_CONF__COUNT; id++) {
        const agg_conf_row_t *row   = &agg_conf_table[id];
        const agg_conf_value_t *val = &conf->v[id];
        int quoted = row->type == AGG_CONF_T_STRING || row->type == AGG_CONF_T_ADDR;

        if (!(row->scope & scope_mask)) {
            continue;
        }
        if (row->scope != last_scope) {
            fprintf(out, "%s", printed ? "\n" : "");
            agg__conf_dump_scope(row->scope, out);
            last_scope = row->scope;
        }
        fprintf(out, "\n%s = %s%s%s   (source: %s)\n", row->key, quoted ? "\"" : "", val->s,
                quoted ? "\"" : "", val->where);
        fprintf(out, "    env:");
        for (k = 0; k < 3 && row->env[k] != NULL; k++) {
            fprintf(out, "%s %s", k ? "," : "", row->env[k]);
        }
        fprintf(out, "\n");
        agg__conf_dump_wrapped(row->doc, 4, 78, out);
        agg__conf_expect(row, expect, sizeof(expect));
        snprintf(line, sizeof(line), "Takes %s; default %s%s%s%s", expect,
                 quoted ? "\"" : "", row->defval, quoted ? "\"" : "",
                 (row->flags & AGG_CONF_F_RELOADABLE) ? "; reloadable (SIGHUP)" : "");
        agg__conf_dump_wrapped(line, 4, 78, out);
        printed = 1;
    }
}

agg_status_t agg_conf_addr_split(const char *addr, char *host, size_t hostlen,
                                 int *port)
{
    char why[128];

    if (addr == NULL || host == NULL || port == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    return agg__conf_addr_parse(addr, host, hostlen, port, why, sizeof(why));
}
