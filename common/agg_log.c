#include "agg/log.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int agg_log_level_current = AGG_LOG_WARN;
static char agg__log_prefix[96];

static const char *const agg__log_tags[] = {
    "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE",
};

void agg_log_set_level(int level)
{
    if (level < AGG_LOG_FATAL) {
        level = AGG_LOG_FATAL;
    } else if (level > AGG_LOG_TRACE) {
        level = AGG_LOG_TRACE;
    }
    agg_log_level_current = level;
}

void agg_log_set_prefix(const char *prefix)
{
    snprintf(agg__log_prefix, sizeof(agg__log_prefix), "%s", prefix ? prefix : "");
}

void agg_log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    const char *base = strrchr(file, '/');
    struct timeval tv;
    struct tm tm;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    if (level < 0) {
        level = 0;
    } else if (level > AGG_LOG_TRACE) {
        level = AGG_LOG_TRACE;
    }
    /* One fprintf per line so lines of concurrent processes do not interleave. */
    fprintf(stderr, "[%s:%d - %s:%d][%02d:%02d:%02d.%06ld] %s %s\n",
            agg__log_prefix[0] ? agg__log_prefix : "agg", (int)getpid(),
            base ? base + 1 : file, line, tm.tm_hour, tm.tm_min, tm.tm_sec,
            (long)tv.tv_usec, agg__log_tags[level], msg);
}
