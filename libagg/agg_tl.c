/*
 * The transports a member can reach its leaf aggregation node over: one row
 * each. The endpoint aggmgr hands a member names its transport's type.
 */
#include "agg_internal.h"

static const agg_tl_ops_t *const agg__tls[] = {
    &agg_tl_shm_ops, /* shared memory with a switchsim on this host */
    &agg_tl_tcp_ops, /* TCP to a switchsim on another host */
};

const agg_tl_ops_t *agg__tl_for(uint32_t type)
{
    size_t i;

    for (i = 0; i < sizeof(agg__tls) / sizeof(agg__tls[0]); ++i) {
        if (agg__tls[i]->type == type) {
            return agg__tls[i];
        }
    }
    return NULL;
}
