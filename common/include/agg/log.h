/*
 * Logging. The level comes from SHARP_COLL_LOG_LEVEL (0 fatal .. 5 trace);
 * the macros test the level before any argument is formatted.
 */
#ifndef AGG_LOG_H
#define AGG_LOG_H

#include <stdarg.h>

typedef enum agg_log_level {
    AGG_LOG_FATAL = 0,
    AGG_LOG_ERROR = 1,
    AGG_LOG_WARN  = 2,
    AGG_LOG_INFO  = 3,
    AGG_LOG_DEBUG = 4,
    AGG_LOG_TRACE = 5,
} agg_log_level_t;

extern int agg_log_level_current;

/* Sets the level; values outside 0..5 are clamped. */
void agg_log_set_level(int level);

/* Sets the prefix printed after the level tag, e.g. "aggmgr" or "host:3". */
void agg_log_set_prefix(const char *prefix);

void agg_log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define agg_log(_level, ...)                                                  \
    do {                                                                      \
        if ((_level) <= agg_log_level_current) {                              \
            agg_log_write((_level), __FILE__, __LINE__, __VA_ARGS__);         \
        }                                                                     \
    } while (0)

#define agg_fatal(...) agg_log(AGG_LOG_FATAL, __VA_ARGS__)
#define agg_error(...) agg_log(AGG_LOG_ERROR, __VA_ARGS__)
#define agg_warn(...)  agg_log(AGG_LOG_WARN, __VA_ARGS__)
#define agg_info(...)  agg_log(AGG_LOG_INFO, __VA_ARGS__)
#define agg_debug(...) agg_log(AGG_LOG_DEBUG, __VA_ARGS__)
#define agg_trace(...) agg_log(AGG_LOG_TRACE, __VA_ARGS__)

#endif
