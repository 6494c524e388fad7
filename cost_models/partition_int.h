/* partition_int.h: private helpers shared by partition.c, partition_hier.c, calibrate.c and their CLI/tests. */
#ifndef PL_PARTITION_INT_H
#define PL_PARTITION_INT_H

#include "cost.h"

/* Ceiling of a / b for positive ints. */
static inline int cost_part_ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Returns the time a cut of `bytes` takes per minibatch when split over r replicas: activation
 * forward and gradient back, each latency + bytes / bandwidth. */
static inline double cost_part_cut_s(double bytes, double bw_Bps, double lat_s, int r) {
    return 2.0 * cost_p2p_s(lat_s, bw_Bps, bytes) / (double)r;
}

/* Prefix sums of the layer table plus everything a cost evaluation needs. */
typedef struct cost_pctx {
    int L, W;
    const cost_part_layer *lay;
    double *T, *P, *S; /* [L + 1] prefix sums of time_s, param_bytes, stash_bytes */
    cost_part_topo topo;
    cost_allreduce_model ar;
    cost_ar_link ar_link; /* Bps > 0: a measured link every replicated stage's all-reduce runs on
                           * (cost_pipedream_opts.ar_link); else topo's links */
} cost_pctx;

/* Checks the layer table (and topo; NULL = one server, free links) and builds the prefix sums;
 * returns PL_OK or an error. */
int cost_pctx_init(cost_pctx *c, const cost_part_layer *layers, int nlayers, int workers, const cost_part_topo *topo,
                   cost_allreduce_model ar, pl_err *e);
/* Frees the prefix arrays of a context. */
void cost_pctx_free(cost_pctx *c);
/* Fills the predictions of p under the flat planner's cost model (balance memory rule when bo
 * != NULL), attaching a block when p has none; returns PL_OK, PL_EINPUT when the stages are not a
 * contiguous cover, or PL_ENOMEM. */
int cost_pctx_fill(cost_partition *p, const cost_pctx *c, const cost_balance_opts *bo, pl_err *e);
/* PipeDream's hierarchical planner (partition_hier.c): returns PL_OK and *out (flat form, its
 * prediction block holding server_stage, servers and hier_time_s), or an error. */
int cost_pctx_plan_hier(const cost_pctx *c, const cost_pipedream_opts *o, cost_partition **out, pl_err *e);

#endif
