/* partition.c: PipeDream's planner and GPipe-style balancing (the partition file: partition_file.c).
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
    if (c->ar_link.Bps > 0) return cost_part_allreduce_s(c->ar, bytes, r, c->ar_link.Bps, c->ar_link.latency_s);
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
    c->ar_link = (cost_ar_link){0, 0}; /* the topology's links (cost_plan_pipedream may set it) */
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
    if (cost_time_check(c->T[nlayers], "sum", e, "partition: the time of all %d layers", nlayers) != PL_OK) {
        cost_pctx_free(c);
        return PL_EINPUT;
    }
    return PL_OK;
}

int cost_partition_noam(const cost_partition *p) {
    return cost_part_ceil_div(cost_partition_workers(p), p->replicas[0]);
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
    if (!hier && o->ar_link.Bps > 0) c.ar_link = o->ar_link;
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
        if ((rc = cost_time_check(L[l].time_s, "F + I + W", e, "partition: layer %d: its time", l)) != PL_OK) {
            free(L);
            return rc;
        }
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
