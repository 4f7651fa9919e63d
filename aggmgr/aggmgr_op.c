/*
 * A client's request that switchsims must act on before it is answered (a
 * GROUP_CREATE, a STATS). The work is its task's (a group's state machine,
 * the sum of the counters); the op is the promise to the client: answered
 * exactly once, or not at all when the client has gone meanwhile.
 */
#include "aggmgr.h"

#include <stdlib.h>

aggmgr_op_t *aggmgr_op_new(aggmgr_op_done_t done, void *arg)
{
    aggmgr_op_t *op = calloc(1, sizeof(*op));

    if (op != NULL) {
        op->done      = done;
        op->arg       = arg;
        op->client_fd = -1;
    }
    return op;
}

void aggmgr_op_free(aggmgr_op_t *op)
{
    if (op != NULL && op->task_free != NULL) {
        op->task_free(op->task);
    }
    free(op);
}

void aggmgr_op_start(aggmgr_t *am, aggmgr_op_t *op)
{
    op->next = am->ops;
    am->ops  = op;
}

void aggmgr_op_finish(aggmgr_t *am, aggmgr_op_t *op)
{
    aggmgr_op_t **pp;

    for (pp = &am->ops; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    }
    op->done(am, op);
    aggmgr_op_free(op);
}

void aggmgr_ops_forget_client(aggmgr_t *am, int fd)
{
    aggmgr_op_t *op;

    for (op = am->ops; op != NULL; op = op->next) {
        if (op->client_fd == fd) {
            op->client_fd = -1;
        }
    }
}
