/*
 * What the files of the settings code share and nothing outside conf/ sees:
 * conf/include/agg/conf.h is the public interface.
 */
#ifndef AGG_CONF_INT_H
#define AGG_CONF_INT_H

#include "agg/conf.h"

#include <stddef.h>

#define AGG__CONF_FILE_ENV "AGG_CONFIG_FILE" /* names the file agg_conf_load reads */

extern char **environ;

/* Writes what `row` accepts, in words ("an integer in 1..64"), into buf. */
void agg__conf_expect(const agg_conf_row_t *row, char *buf, size_t len);

/*
 * Turns text into a value for `row`, range checked. Returns 0 with *val set,
 * or -1 with `why` saying what was expected ("expected ...").
 */
int agg__conf_parse(const agg_conf_row_t *row, const char *text, agg_conf_value_t *val,
                    char *why, size_t whylen);

/*
 * The key (want_env 0) or environment name (want_env 1) nearest to name,
 * or NULL when even the nearest is too far to be a plausible typo.
 */
const char *agg__conf_nearest(const char *name, int want_env);

#endif
