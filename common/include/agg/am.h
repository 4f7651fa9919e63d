/*
 * Reaching the aggregation manager's control port (common/agg_am.c). The
 * settings give the target (agg_conf_am_target); anything that talks to
 * aggmgr connects through here.
 */
#ifndef AGG_AM_H
#define AGG_AM_H

#include <stddef.h>

#include "agg/status.h"

typedef struct agg_am_target {
    const char *addr;       /* host:port, or [v6addr]:port */
    const char *key_file;   /* the shared secret, asked for off loopback ("" : none) */
    int         timeout_ms; /* one attempt to connect, and the handshake */
} agg_am_target_t;

/*
 * Connects to the aggregation manager within the target's timeout; with
 * retry_ms > 0 keeps trying that long (the manager may still be starting).
 * On failure returns AGG_ERR_SESSION_INIT (AGG_ERR_AUTH when the secret was
 * refused) and writes into err what was tried and what to check.
 */
agg_status_t agg_am_connect(const agg_am_target_t *t, int retry_ms, int *fd, char *err,
                            size_t errlen);

#endif
