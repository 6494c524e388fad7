/* partition.c: PipeDream's planner, GPipe-style balancing, and the partition file format.
 *
 * The planner's cost model (PipeDream's optimizer, msr-fiddle/pipedream
 * optimizer/optimizer_graph_hierarchical.py, generalized to a flat placement of consecutive
 * workers on a two-level topology of servers of d devices). All times are per minibatch of the
 * profile (a graph.txt profile's numbers are per profiled minibatch; nothing is rescaled).
 *  - Layer time T_l = forward + backward of the layer on one device. A graph.txt input
 *    pseudo-node ("Input...", no parameters, no backward) gets T = 0: PipeDream's profiler
 *    stores the data-loading wait there and its optimizer zeroes input sources.
 *  - Stage on layers [i, j) replicated on workers [a, a + r): time (C + S) / r with C = sum of T_l
 *    and S the all-reduce of its parameter bytes P (not overlapped with compute, as in the code):
 *      one server:        S = AR(P, r, intra)
 *      s > 1 servers:     S = AR(P, g, intra) + AR(P, s, inter), g = the most replicas one server
 *                         holds (PipeDream's two levels: its level-2 term 4(s-1)P/(sB2) divided
 *                         by the level-1 group size is, once both levels' "/ m" are multiplied
 *                         out, the full-P all-reduce over s servers added to the level-1 one)
 *    with AR(P, m, link) = 4(m-1)P/(mB) (PipeDream's code) or ring 2(m-1)/m P/B + 2(m-1) latency.
 *  - Cut after layer j-1 between a stage on r1 and the next on r2 replicas: 2 (latency +
 *    out_bytes / B) / min(r1, r2), activation and gradient (PipeDream with
 *    --activation_compression_ratio 1 charges 2a/(B m') to both sides' replica counts); the intra
 *    link only when both stages lie in one server.
 *  - Objective: the largest stage time or cut time; exact DP (see cost.h). Data-parallel
 *    baseline: one stage of all layers on all workers under the same rules.
 *  - Memory (only with a capacity): in-flight x (params + stash), in-flight = ceil(workers from
 *    the stage's first to the end / r) (PipeDream's --use_memory_constraint counts
 *    ceil(workers after the stage / r) instead).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition_int.h"

/* Returns 1 when workers a .. b (inclusive) all live in one server. */
static int one_server(const cost_pctx *c, int a, int b) {
    return a / c->topo.devices_per_server == b / c->topo.devices_per_server;
}

/* Returns the all-reduce time of the parameters of layers [i, j) replicated on workers [a, a + r).
 * One server: one all-reduce over r on the intra link. Across s > 1 servers: PipeDream's two
 * levels, an all-reduce over the g replicas sharing a server (g = the most replicas any one server
 * holds) on the intra link plus one over the s servers on the inter link, each of the full
 * parameter bytes (see the cost model at the top of this file). */
static double stage_allreduce_s(const cost_pctx *c, int i, int j, int a, int r) {
    double bytes = c->P[j] - c->P[i];
    if (one_server(c, a, a + r - 1))
        return cost_part_allreduce_s(c->ar, bytes, r, c->topo.intra_bw_Bps, c->topo.intra_latency_s);
    int d = c->topo.devices_per_server, b = a + r - 1;
    int s = b / d - a / d + 1;
    int first = d - a % d, last = b % d + 1;
    int g = s > 2 ? d : (first > last ? first : last);
    return cost_part_allreduce_s(c->ar, bytes, g, c->topo.intra_bw_Bps, c->topo.intra_latency_s) +
           cost_part_allreduce_s(c->ar, bytes, s, c->topo.inter_bw_Bps, c->topo.inter_latency_s);
}

/* Returns the per-minibatch time of layers [i, j) on workers [a, a + r): (compute + sync) / r. */
static double stage_time_s(const cost_pctx *c, int i, int j, int a, int r) {
    return (c->T[j] - c->T[i] + stage_allreduce_s(c, i, j, a, r)) / (double)r;
}

/* Returns the in-flight minibatches of a stage starting at worker a with r replicas. */
static int stage_inflight(const cost_pctx *c, int a, int r) { return cost_part_ceil_div(c->W - a, r); }

/* Returns the per-device memory of layers [i, j) on workers [a, a + r) under the planner's rule. */
static double stage_mem_bytes(const cost_pctx *c, int i, int j, int a, int r) {
    return (double)stage_inflight(c, a, r) * (c->P[j] - c->P[i] + c->S[j] - c->S[i]);
}

/* Returns the transfer time of the cut after layer j - 1 between a stage on workers
 * [a, a + r1) and the next one on [a + r1, a + r1 + r2): activation and gradient, split over the
 * smaller replica count; intra-server only when both stages share one server. */
static double transfer_s(const cost_pctx *c, int j, int a, int r1, int r2) {
    int intra = one_server(c, a, a + r1 + r2 - 1);
    double bw = intra ? c->topo.intra_bw_Bps : c->topo.inter_bw_Bps;
    double lat = intra ? c->topo.intra_latency_s : c->topo.inter_latency_s;
    return cost_part_cut_s(c->lay[j - 1].out_bytes, bw, lat, r1 < r2 ? r1 : r2);
}

/* Frees the prefix arrays of a context. */
void cost_pctx_free(cost_pctx *c) {
    free(c->T);
    free(c->P);
    free(c->S);
    c->T = c->P = c->S = NULL;
}

/* Checks the layer table and builds the prefix sums; returns PL_OK or an error. */
int cost_pctx_init(cost_pctx *c, const cost_part_layer *layers, int nlayers, int workers, const cost_part_topo *topo,
                     cost_allreduce_model ar, pl_err *e) {
    memset(c, 0, sizeof *c);
    if (!layers || nlayers < 1) return pl_errf(e, PL_EINPUT, "partition: the model has no layers");
    if (nlayers > COST_PART_MAX_LAYERS)
        return pl_errf(e, PL_EINPUT, "partition: %d layers is more than the %d supported", nlayers, COST_PART_MAX_LAYERS);
    if (workers < 1 || workers > COST_PART_MAX_WORKERS)
        return pl_errf(e, PL_EINPUT, "partition: workers must be between 1 and %d (got %d)", COST_PART_MAX_WORKERS, workers);
    for (int l = 0; l < nlayers; l++) {
        const cost_part_layer *y = &layers[l];
        if (!(y->time_s >= 0) || !(y->param_bytes >= 0) || !(y->out_bytes >= 0) || !(y->stash_bytes >= 0) ||
            !isfinite(y->time_s) || !isfinite(y->param_bytes) || !isfinite(y->out_bytes) || !isfinite(y->stash_bytes))
            return pl_errf(e, PL_EINPUT, "partition: layer %d has a negative or non-finite time or size", l);
    }
    if (topo) {
        c->topo = *topo;
        if (topo->devices_per_server < 1 || topo->servers < 1)
            return pl_errf(e, PL_EINPUT, "partition: the topology needs at least one server and one device per server");
        if (!(topo->intra_bw_Bps > 0) || !(topo->inter_bw_Bps > 0) || !(topo->intra_latency_s >= 0) ||
            !(topo->inter_latency_s >= 0))
            return pl_errf(e, PL_EINPUT, "partition: link bandwidths must be positive and latencies non-negative");
        if ((long long)topo->devices_per_server * topo->servers < workers)
            return pl_errf(e, PL_EINPUT, "partition: %d workers do not fit on %d server(s) of %d device(s)", workers,
                           topo->servers, topo->devices_per_server);
    } else {
        c->topo = (cost_part_topo){workers, 1, INFINITY, 0.0, INFINITY, 0.0};
    }
    c->L = nlayers;
    c->W = workers;
    c->lay = layers;
    c->ar = ar;
    c->T = pl_calloc((size_t)nlayers + 1, sizeof(double));
    c->P = pl_calloc((size_t)nlayers + 1, sizeof(double));
    c->S = pl_calloc((size_t)nlayers + 1, sizeof(double));
    if (!c->T || !c->P || !c->S) {
        cost_pctx_free(c);
        return pl_errf(e, PL_ENOMEM, "partition: out of memory");
    }
    for (int l = 0; l < nlayers; l++) {
        c->T[l + 1] = c->T[l] + layers[l].time_s;
        c->P[l + 1] = c->P[l] + layers[l].param_bytes;
        c->S[l + 1] = c->S[l] + layers[l].stash_bytes;
    }
    return PL_OK;
}

void cost_plan_config(const cost_partition *p, pl_buf *b) {
    for (int s = 0; s < p->stages; s++) pl_buf_printf(b, "%s%d", s ? "-" : "", p->replicas[s]);
}

/* Checks that p's stages cover c's layers contiguously on c's workers; returns PL_OK or PL_EINPUT. */
static int check_cover(const cost_partition *p, const cost_pctx *c, pl_err *e) {
    if (p->stages < 1) return pl_errf(e, PL_EINPUT, "partition: no stages");
    int next = 0, a = 0;
    for (int s = 0; s < p->stages; s++) {
        int first = p->bound[s], last = p->bound[s + 1] - 1;
        if (first != next || last < first || last >= c->L)
            return pl_errf(e, PL_EINPUT, "partition: stage %d covers layers %d-%d but should start at layer %d and end before %d",
                           s, first, last, next, c->L);
        if (p->replicas[s] < 1) return pl_errf(e, PL_EINPUT, "partition: stage %d has %d replicas", s, p->replicas[s]);
        next = last + 1;
        a += p->replicas[s];
    }
    if (next != c->L) return pl_errf(e, PL_EINPUT, "partition: the stages cover layers 0-%d of %d", next - 1, c->L);
    if (a != c->W) return pl_errf(e, PL_EINPUT, "partition: the stages use %d workers, not %d", a, c->W);
    return PL_OK;
}

/* Fills the predictions of p from the context (pipedream rule, or balance rule when bo != NULL),
 * attaching a block when p has none. Returns PL_OK, PL_EINPUT when the stages are not a
 * contiguous cover, or PL_ENOMEM. */
int cost_pctx_fill(cost_partition *p, const cost_pctx *c, const cost_balance_opts *bo, pl_err *e) {
    int rc = check_cover(p, c, e);
    if (rc != PL_OK) return rc;
    if (!p->pred && !cost_partition_attach_pred(p)) return pl_errf(e, PL_ENOMEM, "partition: out of memory");
    cost_partition_pred *pr = p->pred;
    pr->bottleneck_s = 0;
    pr->peak_mem_bytes = 0;
    int a = 0;
    for (int s = 0; s < p->stages; s++) {
        cost_stage_pred *st = &pr->stage[s];
        int i = p->bound[s], j = p->bound[s + 1], r = p->replicas[s];
        st->first_worker = a;
        st->compute_s = c->T[j] - c->T[i];
        st->allreduce_s = stage_allreduce_s(c, i, j, a, r);
        st->time_s = stage_time_s(c, i, j, a, r);
        st->param_bytes = c->P[j] - c->P[i];
        st->stash_bytes = c->S[j] - c->S[i];
        if (bo) {
            int v = bo->weight_versions > 0 ? bo->weight_versions : 1;
            st->inflight = bo->inflight > 0 ? bo->inflight : p->stages - s;
            st->mem_bytes = st->param_bytes * v + st->stash_bytes * st->inflight;
        } else {
            st->inflight = stage_inflight(c, a, r);
            st->mem_bytes = stage_mem_bytes(c, i, j, a, r);
        }
        st->transfer_in_s = s == 0 ? 0.0 : transfer_s(c, i, pr->stage[s - 1].first_worker, p->replicas[s - 1], r);
        if (st->time_s > pr->bottleneck_s) pr->bottleneck_s = st->time_s;
        if (st->transfer_in_s > pr->bottleneck_s) pr->bottleneck_s = st->transfer_in_s;
        if (st->mem_bytes > pr->peak_mem_bytes) pr->peak_mem_bytes = st->mem_bytes;
        a += r;
    }
    pr->one_worker_s = c->T[c->L];
    pr->data_parallel_s = stage_time_s(c, 0, c->L, 0, c->W);
    pr->speedup_vs_one = pr->bottleneck_s > 0 ? pr->one_worker_s / pr->bottleneck_s : 0.0;
    pr->speedup_vs_dp = pr->bottleneck_s > 0 ? pr->data_parallel_s / pr->bottleneck_s : 0.0;
    return PL_OK;
}

int cost_plan_evaluate(cost_partition *p, const cost_part_layer *layers, int nlayers, const cost_part_topo *topo,
                       cost_allreduce_model ar, const cost_balance_opts *o_balance, pl_err *e) {
    int W = 0;
    if (!p || p->stages < 1) return pl_errf(e, PL_EINPUT, "partition: no stages");
    for (int s = 0; s < p->stages; s++) {
        if (p->replicas[s] < 1 || p->replicas[s] > COST_PART_MAX_WORKERS)
            return pl_errf(e, PL_EINPUT, "partition: stage %d has %d replicas", s, p->replicas[s]);
        W += p->replicas[s];
    }
    if (p->bound[p->stages] != nlayers)
        return pl_errf(e, PL_EINPUT, "partition: the stages end at layer %d but the model has %d layers",
                       p->bound[p->stages] - 1, nlayers);
    cost_pctx c;
    int rc = cost_pctx_init(&c, layers, nlayers, W, topo, ar, e);
    if (rc != PL_OK) return rc;
    const cost_balance_opts *bo = o_balance;
    cost_balance_opts dflt = {0};
    if (!bo && strcmp(p->method, "balance") == 0) bo = &dflt;
    rc = cost_pctx_fill(p, &c, bo, e);
    cost_pctx_free(&c);
    return rc;
}

/* ---------------------------------------------------------------- PipeDream's planner */

enum { OBJ_TIME = 0, OBJ_MEM = 1 };

/* The DP tables: value, and the back pointer (start layer and replicas of the previous stage). */
typedef struct pdtab {
    double *v;
    int *prev_i;
    int *prev_r;
} pdtab;

/* Runs the planner's DP for one objective (time or memory) under a capacity (0 = none), and
 * returns the best value (INFINITY when nothing fits) with its stages in *out when out != NULL.
 * *status gets PL_OK, or PL_ENOMEM on allocation failure. */
static double pipedream_dp(const cost_pctx *c, int objective, double cap, int straight, cost_partition **out,
                           int *status) {
    const int L = c->L, W = c->W, W1 = W + 1;
    size_t cells = (size_t)(L + 1) * (size_t)W1 * (size_t)W1;
    pdtab t = {pl_calloc(cells, sizeof(double)), pl_calloc(cells, sizeof(int)), pl_calloc(cells, sizeof(int))};
    *status = PL_OK;
    if (!t.v || !t.prev_i || !t.prev_r) {
        free(t.v);
        free(t.prev_i);
        free(t.prev_r);
        *status = PL_ENOMEM;
        return INFINITY;
    }
#define IDX(j, m, r) (((size_t)(j) * (size_t)W1 + (size_t)(m)) * (size_t)W1 + (size_t)(r))
    for (size_t k = 0; k < cells; k++) t.v[k] = INFINITY;
    int rmax = straight ? 1 : W;
    for (int j = 1; j <= L; j++) {
        for (int m = 1; m <= W; m++) {
            for (int r = 1; r <= m && r <= rmax; r++) {
                int a = m - r; /* first worker of the last stage */
                double best = INFINITY;
                int bi = -1, br = -1;
                for (int i = 0; i < j; i++) {
                    if ((i == 0) != (a == 0)) continue; /* the first stage starts at layer 0 and worker 0 */
                    double mem = stage_mem_bytes(c, i, j, a, r);
                    if (cap > 0 && mem > cap) continue;
                    double own = objective == OBJ_TIME ? stage_time_s(c, i, j, a, r) : mem;
                    if (i == 0) {
                        if (own < best) best = own, bi = 0, br = 0;
                        continue;
                    }
                    if (own >= best) continue; /* cannot improve strictly: same result, less work */
                    for (int rp = 1; rp <= a && rp <= rmax; rp++) {
                        double prev = t.v[IDX(i, a, rp)];
                        if (prev >= best) continue;
                        double val = prev > own ? prev : own;
                        if (objective == OBJ_TIME) {
                            double x = transfer_s(c, i, a - rp, rp, r);
                            if (x > val) val = x;
                        }
                        if (val < best) best = val, bi = i, br = rp;
                    }
                }
                t.v[IDX(j, m, r)] = best;
                t.prev_i[IDX(j, m, r)] = bi;
                t.prev_r[IDX(j, m, r)] = br;
            }
        }
    }
    double best = INFINITY;
    int best_r = -1;
    for (int r = 1; r <= W && r <= rmax; r++)
        if (t.v[IDX(L, W, r)] < best) best = t.v[IDX(L, W, r)], best_r = r;
    if (out && best < INFINITY) {
        int n = 0;
        for (int j = L, m = W, r = best_r; j > 0;) {
            int pi = t.prev_i[IDX(j, m, r)], pr = t.prev_r[IDX(j, m, r)];
            n++;
            m -= r, j = pi, r = pr;
        }
        cost_partition *p = *out = cost_partition_new(n);
        if (!p) {
            *status = PL_ENOMEM;
        } else {
            p->bound[n] = L;
            int s = n - 1;
            for (int j = L, m = W, r = best_r; j > 0; s--) {
                int pi = t.prev_i[IDX(j, m, r)], pr = t.prev_r[IDX(j, m, r)];
                p->bound[s] = pi;
                p->replicas[s] = r;
                m -= r, j = pi, r = pr;
            }
        }
    }
#undef IDX
    free(t.v);
    free(t.prev_i);
    free(t.prev_r);
    return best;
}

/* Largest table and step count the exact program takes on. */
#define EXACT_MAX_CELLS 2e7
#define EXACT_MAX_STEPS 2e10

/* The exact program over all workers: fills out's stages; returns PL_OK, or PL_EINPUT when the
 * search is too large or nothing fits the capacity (saying the least memory any plan needs). */
static int plan_exact(const cost_pctx *c, const cost_pipedream_opts *o, cost_partition **out, pl_err *e) {
    double W1 = (double)o->workers + 1;
    double cells = ((double)c->L + 1) * W1 * W1;
    double work = (double)c->L * c->L * W1 * W1 * W1 / 12.0;
    if (cells > EXACT_MAX_CELLS || work > EXACT_MAX_STEPS)
        return pl_errf(e, PL_EINPUT, "partition: %d layers on %d workers is too large for the planner's exact search "
                       "(about %.0f table cells and %.1e steps); merge layers or use fewer workers",
                       c->L, o->workers, cells, work);
    int st;
    double best = pipedream_dp(c, OBJ_TIME, o->capacity_bytes, o->straight, out, &st);
    if (st != PL_OK) return pl_errf(e, st, "partition: out of memory in the planner");
    if (best == INFINITY) {
        double least = pipedream_dp(c, OBJ_MEM, 0.0, o->straight, NULL, &st);
        if (st != PL_OK) return pl_errf(e, st, "partition: out of memory in the planner");
        return pl_errf(e, PL_EINPUT,
                       "partition: no %s configuration of %d workers fits in %.0f bytes per device: the least any "
                       "configuration needs on its fullest device is %.0f bytes (in-flight minibatches x "
                       "(parameters + stashed activations))",
                       o->straight ? "straight-pipeline" : "pipeline", o->workers, o->capacity_bytes, least);
    }
    return PL_OK;
}

int cost_plan_pipedream(const cost_part_layer *layers, int nlayers, const cost_part_topo *topo,
                        const cost_pipedream_opts *o, cost_partition **out, pl_err *e) {
    *out = NULL;
    if (!o) return pl_errf(e, PL_EINPUT, "partition: no planner options");
    if (!(o->capacity_bytes >= 0)) return pl_errf(e, PL_EINPUT, "partition: the memory capacity must be non-negative");
    if (o->allreduce != COST_ALLREDUCE_RING && o->allreduce != COST_ALLREDUCE_PIPEDREAM)
        return pl_errf(e, PL_EINPUT, "partition: unknown all-reduce model %d", (int)o->allreduce);
    int hier = o->hierarchy == COST_HIERARCHY_PIPEDREAM;
    if (!hier && o->hierarchy != COST_HIERARCHY_EXACT)
        return pl_errf(e, PL_EINPUT, "partition: unknown hierarchy %d", (int)o->hierarchy);
    if (hier && o->capacity_bytes > 0)
        return pl_errf(e, PL_EINPUT, "partition: the pipedream hierarchy plans without a memory capacity (PipeDream's "
                       "level-by-level memory rule is not modelled); the exact hierarchy takes one");
    cost_pctx c;
    int rc = cost_pctx_init(&c, layers, nlayers, o->workers, topo, o->allreduce, e);
    if (rc != PL_OK) return rc;
    if (o->straight && o->workers > nlayers) {
        cost_pctx_free(&c);
        return pl_errf(e, PL_EINPUT, "partition: a straight pipeline of %d workers needs at least %d layers (the model has %d)",
                       o->workers, o->workers, nlayers);
    }
    rc = hier ? cost_pctx_plan_hier(&c, o, out, e) : plan_exact(&c, o, out, e);
    if (rc == PL_OK) {
        snprintf((*out)->method, sizeof (*out)->method, "pipedream");
        rc = cost_pctx_fill(*out, &c, NULL, e);
    }
    if (rc == PL_OK) snprintf((*out)->pred->hierarchy, sizeof (*out)->pred->hierarchy, "%s", hier ? "pipedream" : "exact");
    cost_pctx_free(&c);
    if (rc != PL_OK) {
        cost_partition_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---------------------------------------------------------------- GPipe-style balancing */

/* Returns the balance objective of layers [i, j) as stage s of p (INFINITY over the capacity). */
static double balance_cost(const cost_pctx *c, const cost_balance_opts *o, int s, int i, int j) {
    int v = o->weight_versions > 0 ? o->weight_versions : 1;
    int inflight = o->inflight > 0 ? o->inflight : o->stages - s;
    double mem = (c->P[j] - c->P[i]) * v + (c->S[j] - c->S[i]) * inflight;
    if (o->capacity_bytes > 0 && mem > o->capacity_bytes) return INFINITY;
    return o->by_memory ? mem : c->T[j] - c->T[i];
}

/* Fills g[(p + 1) x (L + 1)] with g(s, i), the best largest cost of splitting layers [i, L)
 * into stages s .. p-1 (INFINITY when none fits), and returns g(0, 0): the exact split's
 * dynamic program. */
static double balance_table(const cost_pctx *c, const cost_balance_opts *o, double *g, int p) {
    const int L = c->L;
#define G(s, i) g[(size_t)(s) * (size_t)(L + 1) + (size_t)(i)]
    for (int s = p; s >= 0; s--)
        for (int i = 0; i <= L; i++) {
            if (s == p) { G(s, i) = i == L ? 0.0 : INFINITY; continue; }
            double best = INFINITY;
            for (int j = i + 1; j <= L - (p - s - 1); j++) {
                double v = balance_cost(c, o, s, i, j), rest = G(s + 1, j);
                if (rest > v) v = rest;
                if (v < best) best = v;
            }
            G(s, i) = best;
        }
    return G(0, 0);
#undef G
}

/* Returns the least memory any split of the layers needs on its fullest stage (capacity ignored). */
static double balance_least_mem(const cost_pctx *c, const cost_balance_opts *o, double *g, int p) {
    cost_balance_opts m = *o;
    m.by_memory = 1;
    m.capacity_bytes = 0;
    return balance_table(c, &m, g, p);
}

/* Fills out's p stages from the table g of the optimum opt: the lexicographically smallest
 * boundaries, each stage ending as early as the optimum allows. Returns PL_OK or the error. */
static int balance_bounds(const cost_pctx *c, const cost_balance_opts *o, const double *g, int p, double opt,
                          cost_partition **out, pl_err *e) {
    const int L = c->L;
    cost_partition *q = *out = cost_partition_new(p);
    if (!q) return pl_errf(e, PL_ENOMEM, "partition: out of memory");
    q->bound[p] = L;
    for (int s = 0, i = 0; s < p; s++) {
        int pick = -1;
        for (int j = i + 1; j <= L - (p - s - 1) && pick < 0; j++) {
            double v = balance_cost(c, o, s, i, j), rest = g[(size_t)(s + 1) * (size_t)(L + 1) + (size_t)j];
            if (rest > v) v = rest;
            if (v <= opt) pick = j;
        }
        if (pick < 0) /* cannot happen: the optimum is reachable */
            return pl_errf(e, PL_EINTERNAL, "partition: internal error rebuilding the balanced split");
        q->bound[s] = i;
        i = pick;
    }
    return PL_OK;
}

/* Checks the balance options for nlayers layers; returns PL_OK or the error. */
static int balance_check(int nlayers, const cost_balance_opts *o, pl_err *e) {
    if (!o) return pl_errf(e, PL_EINPUT, "partition: no balance options");
    const int p = o->stages;
    if (p < 1 || p > nlayers)
        return pl_errf(e, PL_EINPUT, "partition: cannot split %d layers into %d stages (each stage needs a layer)", nlayers, p);
    if (!(o->capacity_bytes >= 0) || o->inflight < 0 || o->weight_versions < 0)
        return pl_errf(e, PL_EINPUT, "partition: capacity, in-flight count and weight versions must be non-negative");
    if ((double)nlayers * nlayers * p > 4e10)
        return pl_errf(e, PL_EINPUT, "partition: %d layers into %d stages is too large for the exact split", nlayers, p);
    return PL_OK;
}

int cost_plan_balance(const cost_part_layer *layers, int nlayers, const cost_balance_opts *o, cost_partition **out,
                      pl_err *e) {
    *out = NULL;
    int rc = balance_check(nlayers, o, e);
    if (rc != PL_OK) return rc;
    const int p = o->stages, L = nlayers;
    cost_pctx c;
    rc = cost_pctx_init(&c, layers, nlayers, p, NULL, COST_ALLREDUCE_RING, e);
    if (rc != PL_OK) return rc;
    double *g = pl_calloc((size_t)(p + 1) * (size_t)(L + 1), sizeof(double));
    if (!g) {
        cost_pctx_free(&c);
        return pl_errf(e, PL_ENOMEM, "partition: out of memory");
    }
    double opt = balance_table(&c, o, g, p);
    if (opt == INFINITY)
        rc = pl_errf(e, PL_EINPUT,
                     "partition: no split of %d layers into %d stages fits in %.0f bytes per device: the least any "
                     "split needs on its fullest stage is %.0f bytes (parameters x versions + stashed activations x "
                     "in-flight microbatches)",
                     L, p, o->capacity_bytes, balance_least_mem(&c, o, g, p));
    else
        rc = balance_bounds(&c, o, g, p, opt, out, e);
    free(g);
    if (rc == PL_OK) {
        snprintf((*out)->method, sizeof (*out)->method, "balance");
        rc = cost_pctx_fill(*out, &c, o, e);
    }
    cost_pctx_free(&c);
    if (rc != PL_OK) {
        cost_partition_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---------------------------------------------------------------- partition file */

void cost_partition_write(const cost_partition *p, pl_buf *b) {
    const cost_partition_pred *pr = p->pred;
    pl_buf_puts(b, "pipelab-partition 1\n");
    pl_buf_printf(b, "method %s\n", p->method[0] ? p->method : "manual");
    if (p->model[0]) pl_buf_printf(b, "model %s\n", p->model);
    if (p->hardware[0]) pl_buf_printf(b, "hardware %s\n", p->hardware);
    pl_buf_printf(b, "layers %d\n", cost_partition_layers(p));
    pl_buf_printf(b, "workers %d\n", cost_partition_workers(p));
    pl_buf_puts(b, "# config ");
    cost_plan_config(p, b);
    pl_buf_printf(b, ", predicted %.9g s per minibatch, NOAM %d\n", pr ? pr->bottleneck_s : 0.0, cost_partition_noam(p));
    if (pr && strcmp(pr->hierarchy, "pipedream") == 0) {
        pl_buf_puts(b, "# pipedream hierarchy ");
        cost_plan_hier_config(p, b);
        pl_buf_printf(b, ", %.9g s per stage (PipeDream's cost model)\n", pr->hier_time_s);
    }
    for (int s = 0; s < p->stages; s++) {
        pl_buf_printf(b, "stage %d: layers %d-%d replicas %d", s, p->bound[s], p->bound[s + 1] - 1, p->replicas[s]);
        if (pr && pr->stage[s].time_s > 0) pl_buf_printf(b, " time_s %.9g", pr->stage[s].time_s);
        pl_buf_putc(b, '\n');
    }
}

/* Splits a line into at most max whitespace-separated words (modifies it); returns the count,
 * or max + 1 when there are more. */
static int split_words(char *s, char **w, int max) {
    int n = 0;
    while (*s) {
        while (*s && isspace((unsigned char)*s)) *s++ = '\0';
        if (!*s) break;
        if (n == max) return max + 1;
        w[n++] = s;
        while (*s && !isspace((unsigned char)*s)) s++;
    }
    return n;
}

/* Joins a "key value" provenance word list back with single spaces into dst; returns -1 when
 * it does not fit (the value is refused, never cut: a cut value would not read back the same). */
static int join_words(char **w, int from, int n, char *dst, size_t cap) {
    dst[0] = '\0';
    size_t len = 0;
    for (int k = from; k < n; k++) {
        int wrote = snprintf(dst + len, cap - len, "%s%s", k > from ? " " : "", w[k]);
        if (wrote < 0 || (size_t)wrote >= cap - len) return -1;
        len += (size_t)wrote;
    }
    return 0;
}

/* Returns the first control character of a line (tab and carriage return allowed), or -1. */
static int control_char(const char *line) {
    for (const unsigned char *c = (const unsigned char *)line; *c; c++)
        if ((*c < 0x20 && *c != '\t' && *c != '\r') || *c == 0x7f) return *c;
    return -1;
}

/* State of one partition file being read: what has been seen and declared, for the checks; the
 * stages read so far (bound[0 .. n], reps[n], time[n]) and the provenance lines (in head). */
typedef struct part_reader {
    const char *path;
    int lineno, last_line;
    int have_magic, have_layers, have_workers, have_method;
    int declared_layers, declared_workers, cap;
    int n, workers;
    int *bound, *reps;
    double *time;
    cost_partition head;
    pl_err *e;
} part_reader;

/* Reads the magic line 'pipelab-partition 1'; returns PL_OK or the error. */
static int read_magic(part_reader *r, char **w, int n) {
    if (strcmp(w[0], "pipelab-partition") != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: not a partition file (the first line must be 'pipelab-partition 1')",
                       r->path, r->lineno);
    if (n != 2 || strcmp(w[1], "1") != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: unsupported partition file version '%s' (this build reads 1)", r->path,
                       r->lineno, n > 1 ? w[1] : "");
    r->have_magic = 1;
    return PL_OK;
}

/* Reads a 'method', 'model' or 'hardware' line into its text field; returns PL_OK or the error. */
static int read_text_key(part_reader *r, char **w, int n) {
    cost_partition *out = &r->head;
    if (n < 2) return pl_errf(r->e, PL_EINPUT, "%s:%d: '%s' needs a value", r->path, r->lineno, w[0]);
    char *dst = w[0][1] == 'e' ? out->method : w[0][1] == 'o' ? out->model : out->hardware;
    size_t dcap = w[0][1] == 'e' ? sizeof out->method : w[0][1] == 'o' ? sizeof out->model : sizeof out->hardware;
    if (dst[0] || (dst == out->method && r->have_method))
        return pl_errf(r->e, PL_EINPUT, "%s:%d: duplicate '%s' line", r->path, r->lineno, w[0]);
    if (join_words(w, 1, n, dst, dcap) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: '%s' value longer than %zu characters", r->path, r->lineno, w[0], dcap - 1);
    if (dst == out->method) r->have_method = 1;
    return PL_OK;
}

/* Reads a 'layers N' or 'workers N' line (checked against the stages at the end); returns
 * PL_OK or the error. */
static int read_count_key(part_reader *r, char **w, int n) {
    int is_layers = w[0][0] == 'l';
    if (is_layers ? r->have_layers : r->have_workers)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: duplicate '%s' line", r->path, r->lineno, w[0]);
    long hi = is_layers ? COST_PART_MAX_LAYERS : COST_PART_MAX_WORKERS, v;
    if (n != 2 || pl_parse_long(w[1], 1, hi, &v) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: '%s' needs one whole number between 1 and %ld", r->path, r->lineno, w[0], hi);
    if (is_layers) r->have_layers = 1, r->declared_layers = (int)v;
    else r->have_workers = 1, r->declared_workers = (int)v;
    return PL_OK;
}

/* Reads the layer range FIRST-LAST of a stage line into *a, *b: contiguous with the stage
 * before and not empty. Returns PL_OK or the error. */
static int read_layer_range(part_reader *r, char *range, long *a, long *b) {
    char *dash = strchr(range, '-');
    if (!dash) return pl_errf(r->e, PL_EINPUT, "%s:%d: layer range '%s' must be FIRST-LAST", r->path, r->lineno, range);
    *dash = '\0';
    if (pl_parse_long(range, 0, COST_PART_MAX_LAYERS - 1, a) != 0 ||
        pl_parse_long(dash + 1, 0, COST_PART_MAX_LAYERS - 1, b) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: layer range must be two whole numbers FIRST-LAST", r->path, r->lineno);
    if (*b < *a) return pl_errf(r->e, PL_EINPUT, "%s:%d: layer range %ld-%ld is empty", r->path, r->lineno, *a, *b);
    int expect = r->n ? r->bound[r->n] : 0;
    if (*a != expect)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: stage %d starts at layer %ld but must start at layer %d (stages are contiguous)",
                       r->path, r->lineno, r->n, *a, expect);
    return PL_OK;
}

/* Appends a stage of layers a..b on r replicas taking time_s t; returns PL_OK or the error. */
static int push_stage(part_reader *r, long a, long b, long reps, double t) {
    if (r->n == r->cap) {
        int nc = r->cap ? r->cap * 2 : 8;
        int *nb = pl_reallocarray(r->bound, (size_t)nc + 1, sizeof *nb);
        if (nb) r->bound = nb;
        int *nr = pl_reallocarray(r->reps, (size_t)nc, sizeof *nr);
        if (nr) r->reps = nr;
        double *nt = pl_reallocarray(r->time, (size_t)nc, sizeof *nt);
        if (nt) r->time = nt;
        if (!nb || !nr || !nt) return pl_errf(r->e, PL_ENOMEM, "%s:%d: out of memory", r->path, r->lineno);
        r->cap = nc;
    }
    r->bound[r->n] = (int)a;
    r->bound[r->n + 1] = (int)b + 1;
    r->reps[r->n] = (int)reps;
    r->time[r->n++] = t;
    if (r->workers + (int)reps > COST_PART_MAX_WORKERS)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: more than %d workers in all", r->path, r->lineno, COST_PART_MAX_WORKERS);
    r->workers += (int)reps;
    return PL_OK;
}

/* Reads a line 'stage K: layers FIRST-LAST replicas R [time_s T]'; returns PL_OK or the error. */
static int read_stage(part_reader *r, char **w, int n) {
    size_t kl = n > 1 ? strlen(w[1]) : 0;
    if (n < 6 || kl < 2 || w[1][kl - 1] != ':' || strcmp(w[2], "layers") != 0 || strcmp(w[4], "replicas") != 0 ||
        (n != 6 && n != 8) || (n == 8 && strcmp(w[6], "time_s") != 0))
        return pl_errf(r->e, PL_EINPUT, "%s:%d: expected 'stage K: layers FIRST-LAST replicas R [time_s T]'", r->path,
                       r->lineno);
    w[1][kl - 1] = '\0';
    long k, a, b, reps;
    if (pl_parse_long(w[1], 0, COST_PART_MAX_LAYERS, &k) != 0 || k != r->n)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: stage number '%s' out of order (expected %d)", r->path, r->lineno, w[1],
                       r->n);
    int rc = read_layer_range(r, w[3], &a, &b);
    if (rc != PL_OK) return rc;
    if (pl_parse_long(w[5], 1, COST_PART_MAX_WORKERS, &reps) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: replicas must be a whole number between 1 and %d (got '%s')", r->path,
                       r->lineno, COST_PART_MAX_WORKERS, w[5]);
    double t = 0;
    if (n == 8 && (pl_parse_double(w[7], &t) != 0 || t < 0))
        return pl_errf(r->e, PL_EINPUT, "%s:%d: time_s must be a non-negative number (got '%s')", r->path, r->lineno, w[7]);
    return push_stage(r, a, b, reps, t);
}

/* Reads one line (comments already cut off); returns PL_OK or the error. */
static int read_line(part_reader *r, char *line) {
    enum { MAX_WORDS = 15 };
    char *w[MAX_WORDS + 1];
    int n = split_words(line, w, MAX_WORDS);
    if (n == 0) return PL_OK;
    r->last_line = r->lineno;
    if (n > MAX_WORDS) return pl_errf(r->e, PL_EINPUT, "%s:%d: too many words on the line", r->path, r->lineno);
    if (!r->have_magic) return read_magic(r, w, n);
    if (strcmp(w[0], "method") == 0 || strcmp(w[0], "model") == 0 || strcmp(w[0], "hardware") == 0)
        return read_text_key(r, w, n);
    if (strcmp(w[0], "layers") == 0 || strcmp(w[0], "workers") == 0) return read_count_key(r, w, n);
    if (strcmp(w[0], "stage") == 0) return read_stage(r, w, n);
    return pl_errf(r->e, PL_EINPUT, "%s:%d: unknown key '%s' (expected method, model, hardware, layers, workers or stage)",
                   r->path, r->lineno, w[0]);
}

/* Checks the whole file once read: a magic line, stages, and the declared layer and worker
 * counts. Returns PL_OK or the error. */
static int check_read(const part_reader *r) {
    if (!r->have_magic) return pl_errf(r->e, PL_EINPUT, "%s:1: empty file, expected 'pipelab-partition 1'", r->path);
    if (r->n == 0) return pl_errf(r->e, PL_EINPUT, "%s:%d: no 'stage' lines", r->path, r->last_line);
    int last = r->bound[r->n] - 1;
    if (r->have_layers && last + 1 != r->declared_layers)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: the stages cover layers 0-%d but the file says 'layers %d'", r->path,
                       r->last_line, last, r->declared_layers);
    if (r->have_workers && r->workers != r->declared_workers)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: the stages use %d workers but the file says 'workers %d'", r->path,
                       r->last_line, r->workers, r->declared_workers);
    return PL_OK;
}

/* Builds the partition read: stages, provenance (method "manual" when the file names none), and
 * the stage times as predictions with their maximum as the bottleneck. Returns PL_OK or PL_ENOMEM. */
static int finish_read(const part_reader *r, cost_partition **out) {
    cost_partition *p = cost_partition_new(r->n);
    if (!p || !cost_partition_attach_pred(p)) {
        cost_partition_free(p);
        return pl_errf(r->e, PL_ENOMEM, "%s: out of memory", r->path);
    }
    memcpy(p->bound, r->bound, ((size_t)r->n + 1) * sizeof *p->bound);
    memcpy(p->replicas, r->reps, (size_t)r->n * sizeof *p->replicas);
    memcpy(p->method, r->head.method, sizeof p->method);
    memcpy(p->model, r->head.model, sizeof p->model);
    memcpy(p->hardware, r->head.hardware, sizeof p->hardware);
    if (!r->have_method) snprintf(p->method, sizeof p->method, "manual");
    for (int s = 0, a = 0; s < p->stages; a += p->replicas[s++]) {
        p->pred->stage[s].first_worker = a;
        p->pred->stage[s].time_s = r->time[s];
        if (r->time[s] > p->pred->bottleneck_s) p->pred->bottleneck_s = r->time[s];
    }
    *out = p;
    return PL_OK;
}

int cost_partition_parse_text(const char *text, const char *path, cost_partition **out, pl_err *e) {
    *out = NULL;
    part_reader r = {.path = path ? path : "<partition>", .last_line = 1, .e = e};
    char *copy = strdup(text ? text : "");
    if (!copy) return pl_errf(e, PL_ENOMEM, "%s: out of memory", r.path);
    int rc = PL_OK;
    for (char *line = copy, *nl; line && rc == PL_OK; line = nl) {
        nl = strchr(line, '\n');
        if (nl) *nl++ = '\0';
        r.lineno++;
        int cc = control_char(line);
        if (cc >= 0) {
            rc = pl_errf(e, PL_EINPUT, "%s:%d: control character 0x%02x in the line (a partition file is text)", r.path,
                         r.lineno, cc);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        rc = read_line(&r, line);
    }
    free(copy);
    if (rc == PL_OK) rc = check_read(&r);
    if (rc == PL_OK) rc = finish_read(&r, out);
    free(r.bound);
    free(r.reps);
    free(r.time);
    return rc;
}

int cost_partition_read(const char *path, cost_partition **out, pl_err *e) {
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = pl_read_file(path, (size_t)64 << 20, &text, &len, e);
    if (rc != PL_OK) return rc;
    if (memchr(text, '\0', len)) {
        free(text);
        return pl_errf(e, PL_EINPUT, "%s:1: not a text file (contains NUL bytes)", path);
    }
    rc = cost_partition_parse_text(text, path, out, e);
    free(text);
    return rc;
}

/* ---------------------------------------------------------------- adapters */

/* Returns 1 when layer l of a graph.txt model is PipeDream's input pseudo-node: a node named
 * "Input..." with no parameters and no backward. PipeDream's profiler stores the data-loading
 * wait of an iteration there as its forward time (profiler/image_classification/main.py), and
 * its optimizer zeroes such sources before planning (optimizer_graph_hierarchical.py, main()). */
static int input_pseudo_layer(const cost_model *m, int l) {
    const cost_layer *y = &m->layer[l];
    return strcmp(m->source, "graph") == 0 && y->name && strncmp(y->name, "Input", 5) == 0 && y->param_bytes == 0 &&
           !(y->bwd_in_s > 0) && !(y->bwd_w_s > 0);
}

int cost_part_layers_from_model(const cost_model *m, const cost_hw *hw, const cost_opts *o, cost_part_layer **out,
                                pl_err *e) {
    *out = NULL;
    if (!m || m->n < 1) return pl_errf(e, PL_EINPUT, "partition: the model has no layers");
    cost_opts dflt;
    if (!o) {
        cost_opts_init(&dflt, m);
        o = &dflt;
    }
    double scale = (double)(o->microbatch_size > 0 ? o->microbatch_size : m->microbatch_size) /
                   (double)(m->microbatch_size > 0 ? m->microbatch_size : 1);
    cost_part_layer *L = pl_calloc((size_t)m->n, sizeof *L);
    if (!L) return pl_errf(e, PL_ENOMEM, "partition: out of memory");
    for (int l = 0; l < m->n; l++) {
        double f, i, w;
        int rc = cost_layer_times(m, l, hw, o, &f, &i, &w, e);
        if (rc != PL_OK) {
            free(L);
            return rc;
        }
        L[l].time_s = input_pseudo_layer(m, l) ? 0.0 : f + i + w;
        L[l].param_bytes = (double)m->layer[l].param_bytes;
        L[l].out_bytes = (double)(m->cut_bytes ? m->cut_bytes[l + 1] : m->layer[l].out_bytes) * scale;
        L[l].stash_bytes = (double)m->layer[l].stash_bytes * scale;
    }
    *out = L;
    return PL_OK;
}

void cost_part_topo_from_hw(const cost_hw *hw, cost_part_topo *t) {
    t->devices_per_server = hw->devices_per_node;
    t->servers = hw->nodes;
    t->intra_bw_Bps = hw->intra_bandwidth_Bps;
    t->intra_latency_s = hw->intra_latency_s;
    t->inter_bw_Bps = hw->inter_bandwidth_Bps;
    t->inter_latency_s = hw->inter_latency_s;
}
