/* partition_hier.c: PipeDream's hierarchical planner (`pipelab partition --hierarchy pipedream`).
 *
 * PipeDream's optimizer (msr-fiddle/pipedream optimizer/optimizer_graph_hierarchical.py) plans a
 * two-level topology level by level, on pipelab's layer table and cost terms (partition.c):
 *  - Level 1, the d devices of a server on the intra link: for every layer range [i, j), the best
 *    pipeline of it on exactly d devices, R1(i, j). A stage [k, j) on m devices takes
 *    (C + AR(P, m, intra)) / m, C its layers' compute and P their parameter bytes.
 *  - Level 2, the W / d servers on the inter link: the best pipeline of all layers, where a stage
 *    [k, j) on s servers runs R1(k, j) on each of them and synchronizes its parameters across
 *    them: (R1(k, j) + AR(P, s, inter)) / s. On the first stage PipeDream divides that all-reduce
 *    by d (its single-stage case divides by the devices of a server; its split case does not),
 *    and so does this planner. The result reads "3x(4) ; 1x(2-1-1)": 3 servers each running the
 *    first range on one stage of 4 devices, then one server running 2-1-1.
 *  - Cuts: cost_part_cut_s on the level's link over the stage's own units, charged to each stage
 *    for both of its cuts (so a cut costs as with the smaller unit count, as in the exact planner;
 *    PipeDream charges the first stage's output side to the next stage alone). The last cut of a
 *    level-1 range is charged on the intra link too, as PipeDream does; the model's ends carry none.
 *  - Every level's program is exact for its level; ties keep the single stage, then split points
 *    from the earliest layer and fewer units first (PipeDream's order over split points is that of
 *    a Python set; its answers on ties vary).
 *  - Workers that fit in one server, or servers of one device, make one level: the exact
 *    planner's optimum. Otherwise the workers must be whole servers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition_int.h"

/* Largest tables and step counts the level-by-level search takes on. */
#define HIER_MAX_CELLS 2e7
#define HIER_MAX_STEPS 2e10

/* One level of the hierarchy: units joined by one link. */
typedef struct hlevel {
    int units;            /* units at this level: the devices of a server, or servers */
    int unit_devices;     /* devices in one unit: 1, or a server's devices at the server level */
    int rmax;             /* most units one stage may take (1: a straight pipeline) */
    double bw_Bps, lat_s; /* the link between two units */
    const double *below;  /* NULL: a range computes for its layers' time; else the level below's
                             pipeline time of [i, j) at below[i * (L + 1) + j] */
} hlevel;

/* One level's program for ranges from a fixed first layer: for each end j and units m, the best
 * time of the range on exactly m units, and its last stage's first layer (-1: one stage) and units.
 * Room for the widest level; `units` is the level last filled in. */
typedef struct htab {
    int units;
    double *v;
    int *k, *r;
} htab;

#define HT(t, j, m) ((size_t)(j) * (size_t)(t)->units + (size_t)(m) - 1)

/* Returns the time per minibatch of layers [i, j) as one stage on m units of level lv: the range's
 * compute (its layers, or the level below's pipeline of it) plus the all-reduce of its parameters
 * over the m units, over m; `first` divides the all-reduce by the devices of a unit (PipeDream's
 * single-stage case). INFINITY when the level below cannot run the range. */
static double h_stage_s(const cost_pctx *c, const hlevel *lv, int i, int j, int m, int first) {
    double compute = lv->below ? lv->below[(size_t)i * (size_t)(c->L + 1) + (size_t)j] : c->T[j] - c->T[i];
    if (compute == INFINITY) return INFINITY;
    double ar = cost_part_allreduce_s(c->ar, c->P[j] - c->P[i], m, lv->bw_Bps, lv->lat_s);
    if (first) ar /= (double)lv->unit_devices;
    return (compute + ar) / (double)m;
}

/* Returns the transfer time of the cut before layer j charged to a stage on m units of level lv;
 * 0 at the model's ends. */
static double h_cut_s(const cost_pctx *c, const hlevel *lv, int j, int m) {
    if (j <= 0 || j >= c->L) return 0.0;
    return cost_part_cut_s(c->lay[j - 1].out_bytes, lv->bw_Bps, lv->lat_s, m);
}

/* Fills t for the ranges [i, j), i < j <= jmax, of level lv: a pipeline is one stage, or the best
 * pipeline of [i, k) on m - r units followed by the stage [k, j) on r units, each stage charged
 * its own time and its two cuts. Candidates come per (j, m) in the order of the ties (see the
 * top), the last stage's cost once per (k, j, r); only a strictly better time replaces. */
static void h_level_dp(const cost_pctx *c, const hlevel *lv, int i, int jmax, htab *t) {
    t->units = lv->units;
    for (int j = i + 1; j <= jmax; j++) {
        for (int m = 1; m <= lv->units; m++) {
            size_t x = HT(t, j, m);
            t->v[x] = m <= lv->rmax ? fmax(h_stage_s(c, lv, i, j, m, 1), h_cut_s(c, lv, j, m)) : INFINITY;
            t->k[x] = -1;
            t->r[x] = m;
        }
        for (int k = i + 1; k < j; k++) {
            for (int r = 1; r < lv->units && r <= lv->rmax; r++) {
                double last = fmax(h_stage_s(c, lv, k, j, r, 0), fmax(h_cut_s(c, lv, k, r), h_cut_s(c, lv, j, r)));
                for (int m = r + 1; m <= lv->units; m++) {
                    size_t x = HT(t, j, m);
                    double val = fmax(t->v[HT(t, k, m - r)], last);
                    if (val < t->v[x]) t->v[x] = val, t->k[x] = k, t->r[x] = r;
                }
            }
        }
    }
}

/* One stage as the level-by-level search finds it (layers first..last), before the partition. */
typedef struct hstage {
    int first_layer, last_layer, replicas, servers, server_stage;
} hstage;

/* Appends to st[*n] the stages of the best pipeline of [i, j) on m units that t holds, in order,
 * each with its units x mult replicas and the given server-level stage and servers. */
static void h_unwind(const htab *t, int i, int j, int m, int mult, int server_stage, int servers,
                     hstage *st, int *n) {
    int k = t->k[HT(t, j, m)], r = t->r[HT(t, j, m)];
    if (k >= 0) h_unwind(t, i, k, m - r, mult, server_stage, servers, st, n);
    hstage *s = &st[(*n)++];
    s->first_layer = k >= 0 ? k : i;
    s->last_layer = j - 1;
    s->replicas = r * mult;
    s->servers = servers;
    s->server_stage = server_stage;
}

/* Sets lv[] to the levels of PipeDream's hierarchy for c's workers: one level when they fit in
 * one server or a server holds one device (the link between them), else the devices of a server
 * (intra link) under the servers (inter link). Returns the level count, or 0 with e when the
 * workers are not whole servers. */
static int h_levels(const cost_pctx *c, const cost_pipedream_opts *o, hlevel lv[2], pl_err *e) {
    int d = c->topo.devices_per_server, W = c->W, rmax = o->straight ? 1 : W;
    hlevel intra = {W < d ? W : d, 1, rmax, c->topo.intra_bw_Bps, c->topo.intra_latency_s, NULL};
    hlevel inter = {W / d, d, rmax, c->topo.inter_bw_Bps, c->topo.inter_latency_s, NULL};
    if (W <= d || d == 1) {
        lv[0] = W <= d ? intra : inter;
        lv[0].unit_devices = 1;
        return 1;
    }
    if (W % d != 0) {
        pl_errf(e, PL_EINPUT, "partition: the pipedream hierarchy replicates whole servers: %d workers is not a "
                "multiple of the %d devices of a server", W, d);
        return 0;
    }
    lv[0] = intra;
    lv[1] = inter;
    return 2;
}

/* Returns PL_OK when the search fits the planner's limits, else PL_EINPUT saying why. */
static int h_check_size(const cost_pctx *c, const hlevel *lv, int nlev, pl_err *e) {
    double L1 = (double)c->L + 1, u = lv[0].units;
    double cells = L1 * (nlev == 2 ? L1 : 0.0) + L1 * lv[nlev - 1].units;
    double steps = nlev == 2 ? L1 * L1 * L1 * u * u / 12.0 + L1 * L1 * lv[1].units * lv[1].units / 4.0
                             : L1 * L1 * u * u / 4.0;
    if (cells > HIER_MAX_CELLS || steps > HIER_MAX_STEPS)
        return pl_errf(e, PL_EINPUT, "partition: %d layers on %d workers is too large for the level-by-level search "
                       "(about %.0f table cells and %.1e steps); merge layers or use fewer workers",
                       c->L, c->W, cells, steps);
    return PL_OK;
}

/* Fills below[i * (L + 1) + j] with the best time of [i, j) on all units of level lv (INFINITY
 * for j <= i or when nothing fits), using t as scratch. */
static void h_fill_below(const cost_pctx *c, const hlevel *lv, htab *t, double *below) {
    const int L = c->L;
    for (size_t k = 0; k < (size_t)(L + 1) * (size_t)(L + 1); k++) below[k] = INFINITY;
    for (int i = 0; i < L; i++) {
        h_level_dp(c, lv, i, L, t);
        for (int j = i + 1; j <= L; j++) below[(size_t)i * (size_t)(L + 1) + (size_t)j] = t->v[HT(t, j, lv->units)];
    }
}

/* Returns the partition of the n stages st (placement in its prediction block, with PipeDream's
 * time per stage hier_s), or NULL on ENOMEM. */
static cost_partition *h_partition(const hstage *st, int n, double hier_s) {
    cost_partition *p = cost_partition_new(n);
    if (!p || !cost_partition_attach_pred(p)) {
        cost_partition_free(p);
        return NULL;
    }
    for (int s = 0; s < n; s++) {
        p->bound[s] = st[s].first_layer;
        p->replicas[s] = st[s].replicas;
        p->pred->stage[s].servers = st[s].servers;
        p->pred->stage[s].server_stage = st[s].server_stage;
    }
    p->bound[n] = st[n - 1].last_layer + 1;
    p->pred->hier_time_s = hier_s;
    return p;
}

/* Plans the top level, then each of its stages' pipeline one level down, into *out (flat form: a
 * level-1 stage of r devices under a server-level stage of s servers has r x s replicas), using
 * st[c->W] as scratch. Returns PL_OK or PL_EINPUT when no pipeline exists. */
static int h_plan(const cost_pctx *c, const hlevel *lv, int nlev, htab *t, hstage *st, cost_partition **out,
                  pl_err *e) {
    const hlevel *top = &lv[nlev - 1];
    h_level_dp(c, top, 0, c->L, t);
    double hier_s = t->v[HT(t, c->L, top->units)];
    if (hier_s == INFINITY)
        return pl_errf(e, PL_EINPUT, "partition: no pipeline of %d layers on %d workers in the pipedream hierarchy",
                       c->L, c->W);
    int n = 0;
    h_unwind(t, 0, c->L, top->units, 1, 0, 0, st, &n);
    if (nlev == 2) {
        hstage *tops = pl_calloc((size_t)n, sizeof *tops);
        if (!tops) return pl_errf(e, PL_ENOMEM, "partition: out of memory");
        memcpy(tops, st, (size_t)n * sizeof *tops);
        int ntop = n;
        n = 0;
        for (int g = 0; g < ntop; g++) {
            int a = tops[g].first_layer, b = tops[g].last_layer + 1;
            h_level_dp(c, &lv[0], a, b, t);
            h_unwind(t, a, b, lv[0].units, tops[g].replicas, g, tops[g].replicas, st, &n);
        }
        free(tops);
    }
    *out = h_partition(st, n, hier_s);
    return *out ? PL_OK : pl_errf(e, PL_ENOMEM, "partition: out of memory");
}

int cost_pctx_plan_hier(const cost_pctx *c, const cost_pipedream_opts *o, cost_partition **out, pl_err *e) {
    hlevel lv[2];
    int nlev = h_levels(c, o, lv, e);
    if (nlev == 0) return PL_EINPUT;
    int rc = h_check_size(c, lv, nlev, e);
    if (rc != PL_OK) return rc;
    int units = lv[nlev - 1].units > lv[0].units ? lv[nlev - 1].units : lv[0].units;
    size_t cells = (size_t)(c->L + 1) * (size_t)units;
    htab t = {units, pl_calloc(cells, sizeof(double)), pl_calloc(cells, sizeof(int)), pl_calloc(cells, sizeof(int))};
    double *below = nlev == 2 ? pl_calloc((size_t)(c->L + 1) * (size_t)(c->L + 1), sizeof(double)) : NULL;
    hstage *st = pl_calloc((size_t)c->W, sizeof *st);
    if (!t.v || !t.k || !t.r || !st || (nlev == 2 && !below)) {
        rc = pl_errf(e, PL_ENOMEM, "partition: out of memory in the planner");
    } else {
        if (nlev == 2) {
            h_fill_below(c, &lv[0], &t, below);
            lv[1].below = below;
        }
        rc = h_plan(c, lv, nlev, &t, st, out, e);
    }
    free(st);
    free(t.v);
    free(t.k);
    free(t.r);
    free(below);
    return rc;
}

void cost_plan_hier_config(const cost_partition *p, pl_buf *b) {
    const cost_stage_pred *st = p->pred ? p->pred->stage : NULL;
    if (p->stages < 1 || !st || st[0].servers < 1) {
        cost_plan_config(p, b);
        return;
    }
    for (int s = 0; s < p->stages; s++) {
        int opens = s == 0 || st[s].server_stage != st[s - 1].server_stage;
        int closes = s == p->stages - 1 || st[s].server_stage != st[s + 1].server_stage;
        if (opens) pl_buf_printf(b, "%s%dx(", s ? " ; " : "", st[s].servers);
        pl_buf_printf(b, "%s%d", opens ? "" : "-", p->replicas[s] / st[s].servers);
        if (closes) pl_buf_putc(b, ')');
    }
}

int cost_plan_hier_consecutive(const cost_partition *p) {
    const cost_stage_pred *st = p->pred ? p->pred->stage : NULL;
    for (int s = 1; st && s < p->stages; s++)
        if (st[s].servers > 1 && st[s].server_stage == st[s - 1].server_stage) return 0;
    return 1;
}
