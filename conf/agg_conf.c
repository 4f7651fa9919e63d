/*
 * Settings: loading and precedence for the rows of agg_conf_table. Every
 * loader works on a copy and stores it only when the whole source was
 * valid, so a rejected file or environment leaves the caller's values as
 * they were. Values are parsed in agg_conf_value.c; the dump and the
 * unknown-name warnings are in agg_conf_dump.c.
 */
#include "agg_conf_int.h"
#include "agg/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libconfig.h>

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
        agg_errf(err, errlen, "%s: %s", errprefix, why);
        return AGG_ERR_CONFIG;
    }
    val.source = source;
    snprintf(val.where, sizeof(val.where), "%s", where);
    conf->v[agg_conf_row_id(row)] = val;
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
        agg_errf(err, errlen, "agg_conf_set: invalid argument (id %d)", (int)id);
        return AGG_ERR_INVALID_PARAM;
    }
    if (where == NULL) {
        where = agg__conf_source_name(source);
    }
    snprintf(prefix, sizeof(prefix), "%s: %s=%s", where, agg_conf_table[id].key, text);
    return agg__conf_apply(conf, &agg_conf_table[id], text, source, where, prefix,
                           err, errlen);
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
/* Whether p, on the line starting at text, is inside a string or a comment. */
static int agg__conf_in_text(const char *text, const char *p)
{
    const char *c;
    int in_string = 0;

    for (c = text; c < p; ++c) {
        if (in_string && *c == '\\' && c + 1 < p) {
            ++c;
        } else if (*c == '"') {
            in_string = !in_string;
        } else if (!in_string && (*c == '#' || (c[0] == '/' && c[1] == '/'))) {
            return 1;
        }
    }
    return in_string;
}

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

        if ((p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) ||
            agg__conf_in_text(text, p)) {
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
            agg_errf(err, errlen, "%s: unknown setting '%s' (did you mean '%s'?)",
                          where, name, hint);
        } else {
            agg_errf(err, errlen, "%s: unknown setting '%s' (agg_info -c lists them)",
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
                agg_errf(err, errlen,
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
        agg_errf(err, errlen, "%s: %s: expected %s%s, not %s", where, name, expect,
                      (row->type == AGG_CONF_T_STRING || row->type == AGG_CONF_T_ADDR ||
                       row->type == AGG_CONF_T_ENUM) ? " in double quotes" : "",
                      agg__conf_cfg_type_name(type));
        return AGG_ERR_CONFIG;
    }
    snprintf(prefix, sizeof(prefix),
             type == CONFIG_TYPE_STRING ? "%s: %s = \"%s\"" : "%s: %s = %s", where, name,
             value);
    return agg__conf_apply(conf, row, value, AGG_CONF_SRC_FILE, where, prefix, err, errlen);
}

/* The line of the first @include directive in f, or 0 if none. */
static int agg__conf_find_include(FILE *f)
{
    char line[4096];
    int lineno = 0;
    const char *p;

    while (fgets(line, sizeof(line), f) != NULL) {
        ++lineno;
        for (p = line; *p == ' ' || *p == '\t'; ++p) {
        }
        if (strncmp(p, "@include", 8) == 0) {
            return lineno;
        }
    }
    return 0;
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
        agg_errf(err, errlen, "agg_conf_load_file: no file given");
        return AGG_ERR_INVALID_PARAM;
    }
    /* libconfig 1.5 reports neither the reason nor the name of a file it cannot open. */
    f = fopen(path, "r");
    if (f == NULL) {
        agg_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return AGG_ERR_IO;
    }
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        agg_errf(err, errlen, "%s: is a directory, not a configuration file", path);
        return AGG_ERR_IO;
    }
    /* libconfig 1.5 exits the process on some bad @include targets (a
     * directory, for one): a daemon reloading on SIGHUP must not die of a
     * typo, so settings files do not include others. */
    n = agg__conf_find_include(f);
    fclose(f);
    if (n > 0) {
        agg_errf(err, errlen, "%s:%d: @include is not supported in settings files; "
                 "put every setting in one file", path, n);
        return AGG_ERR_PARSE;
    }

    config_init(&cfg);
    if (config_read_file(&cfg, path) != CONFIG_TRUE) {
        if (config_error_type(&cfg) == CONFIG_ERR_PARSE) {
            agg_errf(err, errlen, "%s:%d: %s",
                          config_error_file(&cfg) ? config_error_file(&cfg) : path,
                          config_error_line(&cfg),
                          config_error_text(&cfg) ? config_error_text(&cfg) : "syntax error");
            status = AGG_ERR_PARSE;
        } else {
            agg_errf(err, errlen, "%s: cannot read: %s", path,
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
        agg_errf(err, errlen, "agg_conf_load_env: no configuration given");
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
        agg_errf(err, errlen, "agg_conf_load: no configuration given");
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

agg_am_target_t agg_conf_am_target(const agg_conf_t *conf)
{
    return (agg_am_target_t){
        .addr       = agg_conf_str(conf, AGG_CONF_AM_ADDR),
        .key_file   = agg_conf_str(conf, AGG_CONF_AM_KEY_FILE),
        .timeout_ms = (int)agg_conf_int(conf, AGG_CONF_CONNECT_TIMEOUT_MS),
    };
}

int agg_conf_reload(agg_conf_t *now, const agg_conf_t *fresh, unsigned scope, const char *who)
{
    int id, changed = 0, applied = 0;

    if (now->v[AGG_CONF_LOG_LEVEL].source != AGG_CONF_SRC_CMDLINE) {
        agg_log_set_level((int)agg_conf_int(fresh, AGG_CONF_LOG_LEVEL)); /* for what follows */
    }
    for (id = 0; id < AGG_CONF__COUNT; ++id) {
        const agg_conf_row_t *row = &agg_conf_table[id];
        agg_conf_value_t *v = &now->v[id];

        if (!(row->scope & scope) || v->source == AGG_CONF_SRC_CMDLINE ||
            strcmp(v->s, fresh->v[id].s) == 0) {
            continue;
        }
        changed++;
        if (row->flags & AGG_CONF_F_RELOADABLE) {
            agg_info("SIGHUP: %s = %s (was %s; %s)", row->key, fresh->v[id].s, v->s,
                     fresh->v[id].where);
            *v = fresh->v[id];
            applied++;
        } else {
            agg_warn("SIGHUP: %s = %s (%s) takes effect only when %s restarts: still %s",
                     row->key, fresh->v[id].s, fresh->v[id].where, who, v->s);
        }
    }
    agg_log_set_level((int)agg_conf_int(now, AGG_CONF_LOG_LEVEL));
    agg_info("SIGHUP: %d settings changed, %d applied%s", changed, applied,
             changed > applied ? ", the others at the next restart" : "");
    return changed;
}
