/*
 * libFuzzer harness for the settings loaders.
 *
 * The input is read twice: as a libconfig file (agg_conf_load_file and the
 * whole agg_conf_load sequence; libconfig reads only from a path, so the
 * input goes to one temporary file rewritten each run) and, line by line, as
 * an environment (agg_conf_load_env, agg_conf_check_env). A loader must
 * either fail with a terminated message and the configuration untouched, or
 * succeed with every value inside its row's range.
 *
 * Inputs with "@include" are skipped: libconfig would open whatever path
 * they name (/dev/stdin, /dev/zero), which tests the machine, not our code.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "agg/conf.h"
#include "agg/log.h"
#include "agg/sock.h"

#define FUZZ_MAX_ENV 64


/*
 * libconfig 1.5 (Debian 12) leaks the buffer of a string token that error
 * recovery throws away (hyperrealm/libconfig#142, fixed in 1.7.3); nothing a
 * caller can free. Only the scanner's allocations of token text are ignored:
 * strbuf_append for a string, libconfig_yylex itself for an empty one.
 */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:strbuf_append\nleak:libconfig_yylex\n";
}

static char fuzz_path[64];
static int  fuzz_fd = -1;

static void fuzz_cleanup(void)
{
    if (fuzz_fd >= 0) {
        close(fuzz_fd);
        unlink(fuzz_path);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *lvl = getenv("AGG_FUZZ_LOG_LEVEL");

    agg_log_set_level(lvl != NULL ? atoi(lvl) : AGG_LOG_TRACE);
    snprintf(fuzz_path, sizeof(fuzz_path), "/tmp/agg-fuzz-conf-XXXXXX");
    fuzz_fd = mkstemp(fuzz_path);
    if (fuzz_fd < 0) {
        perror("mkstemp");
        abort();
    }
    atexit(fuzz_cleanup);
    return 0;
}

/* Every value a loader accepted is one its row allows. */
static void fuzz_check_conf(const agg_conf_t *conf)
{
    const agg_conf_row_t *row;
    const agg_conf_value_t *v;
    int id;

    for (id = 0; id < AGG_CONF__COUNT; id++) {
        row = &agg_conf_table[id];
        v   = &conf->v[id];
        FUZZ_CHECK(memchr(v->s, '\0', sizeof(v->s)) != NULL);
        FUZZ_CHECK(memchr(v->where, '\0', sizeof(v->where)) != NULL);
        switch (row->type) {
        case AGG_CONF_T_INT:
            FUZZ_CHECK((v->i >= row->min && v->i <= row->max) ||
                       (v->i == 0 && (row->flags & AGG_CONF_F_ZERO_OK)));
            break;
        case AGG_CONF_T_BOOL:
            FUZZ_CHECK(v->i == 0 || v->i == 1);
            break;
        case AGG_CONF_T_ADDR: {
            char host[256];
            int port = -1;

            FUZZ_CHECK(agg_sock_addr_parse(v->s, host, sizeof(host), &port, NULL, 0) == AGG_OK);
            FUZZ_CHECK(port >= 0 && port <= 65535);
            break;
        }
        case AGG_CONF_T_STRING:
            break;
        case AGG_CONF_T_ENUM: {
            long long words = 1;

            for (const char *c = row->choices; *c != '\0'; c++) {
                words += *c == '|';
            }
            FUZZ_CHECK(v->i >= 0 && v->i < words);
            break;
        }
        }
    }
}

static void fuzz_warn(const char *msg, void *arg)
{
    (void)arg;
    FUZZ_CHECK(msg != NULL && strlen(msg) < 512);
}

/* Splits a copy of the input into NUL-terminated lines, at most FUZZ_MAX_ENV. */
static int fuzz_envp(char *text, size_t size, char **envp)
{
    char *s = text, *nl;
    int n = 0;

    while (s < text + size && n < FUZZ_MAX_ENV) {
        nl = memchr(s, '\n', (size_t)(text + size - s));
        if (nl != NULL) {
            *nl = '\0';
        }
        envp[n++] = s;
        if (nl == NULL) {
            break;
        }
        s = nl + 1;
    }
    envp[n] = NULL;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *envp[FUZZ_MAX_ENV + 1];
    char err[512], *text;
    agg_conf_t conf, before;
    agg_status_t st;
    int i, n;

    if (memmem(data, size, "@include", 8) != NULL) {
        return 0;
    }

    /* the file */
    if (ftruncate(fuzz_fd, 0) != 0 || pwrite(fuzz_fd, data, size, 0) != (ssize_t)size) {
        perror(fuzz_path);
        abort();
    }
    agg_conf_init(&conf);
    before = conf;
    memset(err, 'x', sizeof(err));
    st = agg_conf_load_file(&conf, fuzz_path, err, sizeof(err));
    if (st == AGG_OK) {
        fuzz_check_conf(&conf);
    } else {
        FUZZ_CHECK(st == AGG_ERR_PARSE || st == AGG_ERR_CONFIG || st == AGG_ERR_IO);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(memcmp(&conf, &before, sizeof(conf)) == 0);
    }

    /* the environment */
    text = malloc(size + 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    n = fuzz_envp(text, size, envp);
    before = conf;
    memset(err, 'x', sizeof(err));
    st = agg_conf_load_env(&conf, envp, err, sizeof(err));
    if (st == AGG_OK) {
        fuzz_check_conf(&conf);
    } else {
        FUZZ_CHECK(st == AGG_ERR_CONFIG);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(memcmp(&conf, &before, sizeof(conf)) == 0);
    }
    FUZZ_CHECK(agg_conf_check_env(envp, fuzz_warn, NULL) <= n);
    for (i = 0; i < n; i++) {
        char host[64];
        int port;

        (void)agg_sock_addr_parse(envp[i], host, sizeof(host), &port, NULL, 0);
        (void)agg_conf_find_key(envp[i]);
    }

    /* file then environment, as the programs load them */
    memset(err, 'x', sizeof(err));
    st = agg_conf_load(&conf, fuzz_path, envp, err, sizeof(err));
    if (st == AGG_OK) {
        char *out = NULL;
        size_t len = 0;
        FILE *f;

        fuzz_check_conf(&conf);
        f = open_memstream(&out, &len);
        FUZZ_CHECK(f != NULL);
        agg_conf_dump(&conf, AGG_CONF_SCOPE_ALL, f);
        fclose(f);
        free(out);
    } else {
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    }
    free(text);
    return 0;
}
