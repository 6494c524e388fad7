/* cost_comm.c: the one home of link and collective costs (point-to-point, ring all-reduce and its
 * halves, PipeDream's all-reduce) that the planner, the simulator and the cost model call. */
#include <math.h>

#include "cost_int.h"

/* Ring all-reduce steps per replica beyond the first: a reduce-scatter pass and an all-gather pass,
 * each n - 1 steps. */
#define RING_PASSES 2.0
/* PipeDream's optimizer charges 4 (m - 1) |w| / (m B) for the synchronization of |w| bytes. */
#define PIPEDREAM_AR_FACTOR 4.0

/* Returns latency + bytes / bandwidth: one message on one link (no guard: 0 bytes still pays the
 * latency, as the flag-driven simulator charges it). */
double cost_p2p_s(double latency_s, double bandwidth_Bps, double bytes) {
    return latency_s + bytes / bandwidth_Bps;
}

/* Returns the ring all-reduce time over n replicas: 2 (n - 1) / n * bytes / bandwidth +
 * 2 (n - 1) latency (a reduce-scatter then an all-gather, n - 1 steps each); n <= 1 costs 0. */
double cost_ring_allreduce_s(int n, double bytes, double bandwidth_Bps, double latency_s) {
    if (n <= 1) return 0.0;
    double nm1 = (double)(n - 1);
    return RING_PASSES * nm1 / (double)n * bytes / bandwidth_Bps + RING_PASSES * nm1 * latency_s;
}

/* Returns one pass of the ring (n - 1 steps, each moving bytes / n): (n - 1) / n * bytes /
 * bandwidth + (n - 1) latency, half the all-reduce; n <= 1 costs 0. */
static double ring_pass_s(int n, double bytes, double bandwidth_Bps, double latency_s) {
    if (n <= 1) return 0.0;
    double nm1 = (double)(n - 1);
    return nm1 / (double)n * bytes / bandwidth_Bps + nm1 * latency_s;
}

/* Returns the ring reduce-scatter time of bytes over n replicas: the all-reduce's first half. */
double cost_ring_reduce_scatter_s(int n, double bytes, double bandwidth_Bps, double latency_s) {
    return ring_pass_s(n, bytes, bandwidth_Bps, latency_s);
}

/* Returns the ring all-gather time of bytes (the gathered total) over n replicas: the
 * all-reduce's second half. */
double cost_ring_allgather_s(int n, double bytes, double bandwidth_Bps, double latency_s) {
    return ring_pass_s(n, bytes, bandwidth_Bps, latency_s);
}

/* Returns PipeDream's all-reduce time (its optimizer's 4 (n - 1) bytes / (n bandwidth), no
 * latency); n <= 1 costs 0. */
double cost_pipedream_allreduce_s(int n, double bytes, double bandwidth_Bps) {
    if (n <= 1) return 0.0;
    return PIPEDREAM_AR_FACTOR * (double)(n - 1) * bytes / ((double)n * bandwidth_Bps);
}

/* Returns the all-reduce time of `bytes` over r replicas on one link under the planner's model m
 * (ring or PipeDream's); 0 when r <= 1. */
double cost_part_allreduce_s(cost_allreduce_model m, double bytes, int r, double bw_Bps, double lat_s) {
    if (m == COST_ALLREDUCE_PIPEDREAM) return cost_pipedream_allreduce_s(r, bytes, bw_Bps);
    return cost_ring_allreduce_s(r, bytes, bw_Bps, lat_s);
}

/* Returns 1 when the two ranks sit on different nodes (rank / devices_per_node differs). */
int cost_ranks_inter(const cost_hw *hw, int a, int b) {
    int d = hw->devices_per_node > 0 ? hw->devices_per_node : 1;
    return a / d != b / d;
}

/* Fills the bandwidth (bytes/s) and latency (s) of the intra- or inter-node links of hw. */
static void link_params(const cost_hw *hw, int inter, double *bw_Bps, double *lat_s) {
    *bw_Bps = inter ? hw->inter_bandwidth_Bps : hw->intra_bandwidth_Bps;
    *lat_s = inter ? hw->inter_latency_s : hw->intra_latency_s;
}

/* Returns latency + bytes / bandwidth of one link of hw; nothing to send costs nothing. */
double cost_link_s(const cost_hw *hw, int inter, int64_t bytes) {
    if (bytes <= 0) return 0;
    double bw, lat;
    link_params(hw, inter, &bw, &lat);
    return cost_p2p_s(lat, bw, (double)bytes);
}

/* Returns the time to send bytes from src_rank to dst_rank (0 on the same rank). */
double cost_transfer_s(const cost_hw *hw, int src_rank, int dst_rank, int64_t bytes) {
    if (src_rank == dst_rank) return 0;
    return cost_link_s(hw, cost_ranks_inter(hw, src_rank, dst_rank), bytes);
}

/* Returns the ring all-reduce time of bytes over replicas on hw's intra or inter link; nothing to
 * reduce costs nothing. */
double cost_allreduce_s(const cost_hw *hw, int inter, int replicas, int64_t bytes) {
    if (replicas <= 1 || bytes <= 0) return 0;
    double bw, lat;
    link_params(hw, inter, &bw, &lat);
    return cost_ring_allreduce_s(replicas, (double)bytes, bw, lat);
}

/* cost.h. Returns the name, "?" for a value out of range. */
const char *cost_transport_name(cost_transport t) {
    static const char *const names[COST_TRANSPORTS] = {"threads", "mpi"};
    return t >= 0 && t < COST_TRANSPORTS ? names[t] : "?";
}

/* cost.h. Returns 1 with link filled from the measurement, 0 when the profile has none. */
int cost_model_allreduce_link(const cost_model *m, cost_transport want, cost_hw *link, cost_transport *used) {
    cost_transport t = want;
    if (t < 0 || t >= COST_TRANSPORTS || !(m->allreduce[t].Bps > 0)) t = COST_TRANSPORT_THREADS;
    if (!(m->allreduce[t].Bps > 0)) return 0;
    cost_hw_init(link);
    link->intra_bandwidth_Bps = m->allreduce[t].Bps;
    link->intra_latency_s = m->allreduce[t].latency_s;
    if (used) *used = t;
    return 1;
}

/* cost.h. */
int cost_model_p2p_link(const cost_model *m, cost_transport tr, cost_hw *hw) {
    if (tr < 0 || tr >= COST_TRANSPORTS || !(m->p2p[tr].Bps > 0)) return 0;
    hw->intra_bandwidth_Bps = m->p2p[tr].Bps;
    hw->intra_latency_s = m->p2p[tr].latency_s;
    return 1;
}

/* Returns the pipelined (double binary) tree all-reduce time over n replicas: the buffer goes up
 * the tree (reduce) and down again (broadcast), each link carrying it once per direction, so
 * 2 bytes / bandwidth, plus 2 ceil(log2 n) latencies for the depth; n <= 1 costs 0. */
double cost_tree_allreduce_s(int n, double bytes, double bandwidth_Bps, double latency_s) {
    if (n <= 1) return 0.0;
    int depth = 0;
    while ((1 << depth) < n) depth++;
    return RING_PASSES * bytes / bandwidth_Bps + RING_PASSES * depth * latency_s;
}

/* Returns the hierarchical all-reduce time of bytes over local x nodes replicas (local on each
 * node): a ring reduce-scatter inside each node, then each of the local ranks all-reduces its
 * 1 / local shard with its peers on the other nodes (a ring on the inter link, all shards at
 * once over their own links), then a ring all-gather inside each node. */
double cost_hier_allreduce_s(int local, int nodes, double bytes, double intra_Bps, double intra_lat_s,
                             double inter_Bps, double inter_lat_s) {
    if (local < 1) local = 1;
    double shard = bytes / (double)local;
    return ring_pass_s(local, bytes, intra_Bps, intra_lat_s) +
           cost_ring_allreduce_s(nodes, shard, inter_Bps, inter_lat_s) +
           ring_pass_s(local, bytes, intra_Bps, intra_lat_s);
}

/* Fits the least-squares line t = c0 + c1 bytes over k >= 2 distinct sizes; a negative c0, or a
 * slope that is not positive (small messages, where the latency and the noise of a shared machine
 * hide the bandwidth), is taken as the line through the origin: it still gives the measured
 * times' scale at the measured sizes. With flat, a slope that is not positive gives the flat line
 * at the mean time instead (c1 = 0: all latency), a negative c0 still the line through the origin.
 * what names the fit in messages. Returns PL_OK or PL_EINPUT. */
static int line_fit(const double *bytes, const double *t, int k, const char *what, int flat, double *c0_out,
                    double *c1_out, pl_err *e) {
    if (k < 2) return pl_errf(e, PL_EINPUT, "%s fit needs 2 sizes", what);
    double sx = 0, sy = 0;
    for (int i = 0; i < k; i++) {
        sx += bytes[i];
        sy += t[i];
    }
    double mx = sx / k, my = sy / k, sxx = 0, sxy = 0, sx2 = 0, sxt = 0;
    for (int i = 0; i < k; i++) {
        sxx += (bytes[i] - mx) * (bytes[i] - mx);
        sxy += (bytes[i] - mx) * (t[i] - my);
        sx2 += bytes[i] * bytes[i];
        sxt += bytes[i] * t[i];
    }
    if (!(sxx > 0)) return pl_errf(e, PL_EINPUT, "%s fit needs distinct sizes", what);
    double c1 = sxy / sxx, c0 = my - c1 * mx;
    if (flat && !(c1 > 0) && my > 0 && isfinite(my)) {
        *c0_out = my;
        *c1_out = 0;
        return PL_OK;
    }
    if (c0 < 0 || !(c1 > 0)) {
        c0 = 0;
        c1 = sxt / sx2;
    }
    if (!(c1 > 0) || !isfinite(c1)) return pl_errf(e, PL_EINPUT, "%s times are not positive (no bandwidth to fit)", what);
    *c0_out = c0;
    *c1_out = c1;
    return PL_OK;
}

/* cost.h. cost_link_s is t = alpha + bytes / beta: the line itself; a flat line (the sizes' copy
 * hidden in the noise) is all latency on a free link. */
int cost_link_fit(const double *bytes, const double *t, int k, double *latency_s, double *bandwidth_Bps, pl_err *e) {
    double c0, c1;
    int rc = line_fit(bytes, t, k, "a point-to-point", 1, &c0, &c1, e);
    if (rc) return rc;
    *latency_s = c0;
    *bandwidth_Bps = c1 > 0 ? 1.0 / c1 : COST_FREE_LINK_BPS;
    return PL_OK;
}

/* cost.h. The ring's time is linear in its two causes: t = A alpha + B bytes / beta, where
 * A = cost_ring_allreduce_s(n, 0, 1, 1) and B = cost_ring_allreduce_s(n, 1, 1, 0), so the fit
 * is the least-squares line t = c0 + c1 bytes, alpha = c0 / A and beta = B / c1. */
int cost_ring_allreduce_fit(int n, const double *bytes, const double *t, int k, double *latency_s,
                            double *bandwidth_Bps, pl_err *e) {
    if (n < 2 || k < 2) return pl_errf(e, PL_EINPUT, "an all-reduce fit needs n >= 2 replicas and 2 sizes");
    double A = cost_ring_allreduce_s(n, 0, 1, 1), B = cost_ring_allreduce_s(n, 1, 1, 0);
    double c0, c1;
    int rc = line_fit(bytes, t, k, "the all-reduce", 0, &c0, &c1, e);
    if (rc) return rc;
    *latency_s = c0 / A;
    *bandwidth_Bps = B / c1;
    return PL_OK;
}
