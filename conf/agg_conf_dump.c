/*
 * Settings shown to a person: the dump behind agg_info -c, and the warnings
 * for names that are almost, but not quite, a setting. The suggestions live
 * here because they are about talking to the user, not about loading.
 */
#include "agg_conf_int.h"

#include "agg/auth.h"
#include "agg/log.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define AGG__CONF_NAME_MAX 128 /* longest name the suggestions compare */
#define AGG__CONF_VALUE_SHOWN 64 /* value characters quoted in a warning */

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

const char *agg__conf_nearest(const char *name, int want_env)
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
        /* the shared secret is read where it is used (agg/auth.h), never shown */
        if (strcmp(name, AGG__CONF_FILE_ENV) == 0 || strcmp(name, AGG_AUTH_ENV) == 0 ||
            agg_conf_find_env(name) != NULL) {
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

/* Prints text as lines of at most `width` columns, each starting with `prefix`. */
static void agg__conf_dump_wrapped(const char *text, const char *prefix, int width, FILE *out)
{
    int col = 0, plen = (int)strlen(prefix);

    while (*text != '\0') {
        int wlen = (int)strcspn(text, " ");

        if (col > 0 && col + 1 + wlen > width) {
            fputc('\n', out);
            col = 0;
        }
        if (col == 0) {
            fprintf(out, "%s%.*s", prefix, wlen, text);
            col = plen + wlen;
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
        int quoted = row->type == AGG_CONF_T_STRING || row->type == AGG_CONF_T_ADDR ||
                     row->type == AGG_CONF_T_ENUM;

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
        agg__conf_dump_wrapped(row->doc, "    ", 78, out);
        agg__conf_expect(row, expect, sizeof(expect));
        snprintf(line, sizeof(line), "Takes %s; default %s%s%s%s", expect,
                 quoted ? "\"" : "", row->defval, quoted ? "\"" : "",
                 (row->flags & AGG_CONF_F_RELOADABLE) ? "; reloadable (SIGHUP)" : "");
        agg__conf_dump_wrapped(line, "    ", 78, out);
        printed = 1;
    }
}

/* "---- read by X ---...", padded to the width the example files use. */
static void agg__conf_example_section(unsigned scope, FILE *out)
{
    char buf[128];
    FILE *mem = fmemopen(buf, sizeof(buf), "w");
    size_t n;

    if (mem == NULL) {
        return;
    }
    agg__conf_dump_scope(scope, mem);
    fclose(mem);
    buf[sizeof(buf) - 1] = '\0';
    n = strcspn(buf, "\n");
    /* agg__conf_dump_scope wrote "# read by ..."; frame it as a section rule */
    fprintf(out, "# ---- %.*s ", (int)(n - 2), buf + 2);
    for (n += 6; n < 66; ++n) {
        fputc('-', out);
    }
    fputc('\n', out);
}

void agg_conf_write_example(unsigned scope_mask, const char *header, FILE *out)
{
    char expect[128], line[1536], envs[128];
    unsigned last_scope = 0;
    int id, k;

    fputs(header, out);
    for (id = 0; id < AGG_CONF__COUNT; id++) {
        const agg_conf_row_t *row = &agg_conf_table[id];
        /* libconfig reads "16k" only as a string */
        int quoted = row->type == AGG_CONF_T_STRING || row->type == AGG_CONF_T_ADDR ||
                     row->type == AGG_CONF_T_ENUM ||
                     strspn(row->defval, "0123456789-") != strlen(row->defval);

        if (!(row->scope & scope_mask)) {
            continue;
        }
        if (row->scope != last_scope) {
            fputc('\n', out);
            agg__conf_example_section(row->scope, out);
            last_scope = row->scope;
        }
        envs[0] = '\0';
        for (k = 0; k < 3 && row->env[k] != NULL; k++) {
            snprintf(envs + strlen(envs), sizeof(envs) - strlen(envs), "%s%s", k ? ", " : "",
                     row->env[k]);
        }
        agg__conf_expect(row, expect, sizeof(expect));
        snprintf(line, sizeof(line), "%s Takes %s%s. Environment: %s.", row->doc, expect,
                 (row->flags & AGG_CONF_F_RELOADABLE) ? "; reloadable (SIGHUP)" : "", envs);
        fputc('\n', out);
        agg__conf_dump_wrapped(line, "# ", 78, out);
        fprintf(out, "%s = %s%s%s;\n", row->key, quoted ? "\"" : "", row->defval,
                quoted ? "\"" : "");
    }
}
