/*
 * The aggregation-node engine's parts for SAT (dp/agg_dp_sat.c), shared
 * with the core (dp/agg_dp_node.c): the SAT lock taken and given back
 * on a segment's switches, and zero-copy chunks read from and written to a
 * member's own memory (process_vm_readv/writev).
 */
#ifndef AGG_DP_INT_H
#define AGG_DP_INT_H

#include "agg/dp.h"

/*
 * A contribution that stays in the rank's memory: read it in scratch-sized
 * pieces and combine each into acc (the first one copied, widened).
 */
agg_status_t agg__dp_combine_remote(void *acc, const agg_dp_contrib_t *c, int first,
                                    agg_dp_driver_t *drv);

/* A LOCK or UNLOCK fragment passing a segment's top: its switches' part. */
void agg__dp_lock_step(agg_dp_view_t *v, agg_dp_slot_t *slot, agg_dp_driver_t *drv);

/* Gives back the SAT lock of every switch of the segment, where the group holds it. */
void agg__dp_unlock_sat(agg_dp_view_t *v);

/* Writes a SAT result to the members that left their chunk in their memory. */
agg_status_t agg__dp_deliver_cma(agg_dp_view_t *v, agg_dp_slot_t *slot,
                                 agg_dp_driver_t *drv);

#endif
