/* test_partition_hier.c: PipeDream's hierarchical planner against brute force of its
 * level-by-level rules, the exact program on one level, AlexNet on 4x4, bad input and the CLI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pl_test.h"
#include "test_partition.h"

/* ---------------------------------------------------------------- PipeDream's hierarchy */

/* PipeDream's level-by-level rules, written out again for brute force: a level joins `units`
 * units over one link; a server-level stage runs `below` (the best server pipeline of its range). */
typedef struct bf_level {
    int units, unit_devices;
    double bw, lat;
    int two; /* 1: a range's compute is the best level-1 pipeline of it (bf_best over level 1) */
} bf_level;

typedef struct bf_ctx {
    const cost_part_layer *y;
    int L;
    cost_allreduce_model ar;
    bf_level lv1, lv2;
} bf_ctx;

static double bf_best(const bf_ctx *b, const bf_level *lv, int i, int j, int units);

/* Returns the all-reduce of bytes over m units of a link, from the two formulas cost.h documents. */
static double bf_allreduce(cost_allreduce_model ar, double bytes, int m, double bw, double lat) {
    if (m <= 1) return 0;
    if (ar == COST_ALLREDUCE_PIPEDREAM) return 4.0 * (m - 1) * bytes / (m * bw);
    return 2.0 * (m - 1) / m * bytes / bw + 2.0 * (m - 1) * lat;
}

/* Returns one stage's time on a level: (compute + all-reduce) / m; the first stage's all-reduce
 * is divided by the devices of a unit. */
static double bf_stage(const bf_ctx *b, const bf_level *lv, int i, int j, int m, int first) {
    double c = 0, p = 0;
    for (int l = i; l < j; l++) c += b->y[l].time_s, p += b->y[l].param_bytes;
    if (lv->two) c = bf_best(b, &b->lv1, i, j, b->lv1.units);
    double ar = bf_allreduce(b->ar, p, m, lv->bw, lv->lat);
    if (first) ar /= lv->unit_devices;
    return (c + ar) / m;
}

/* Returns a cut's charge to a stage on m units (none at the model's ends). */
static double bf_cut(const bf_ctx *b, const bf_level *lv, int j, int m) {
    if (j <= 0 || j >= b->L) return 0;
    return 2.0 * (lv->lat + b->y[j - 1].out_bytes / lv->bw) / m;
}

/* Returns the value of one pipeline of [bound[0], bound[n]) on a level, stage s on units[s]:
 * each stage's time, its output cut, and its input cut unless it is the first stage. */
static double bf_value(const bf_ctx *b, const bf_level *lv, const int *bound, const int *units, int n) {
    double v = 0;
    for (int s = 0; s < n; s++) {
        v = fmax(v, bf_stage(b, lv, bound[s], bound[s + 1], units[s], s == 0));
        v = fmax(v, bf_cut(b, lv, bound[s + 1], units[s]));
        if (s > 0) v = fmax(v, bf_cut(b, lv, bound[s], units[s]));
    }
    return v;
}

/* Enumerates every pipeline of [bound[n], j) on `left` units and returns the best value. */
static double bf_enum(const bf_ctx *b, const bf_level *lv, int j, int left, int *bound, int *units, int n) {
    if (bound[n] == j || left == 0) return bound[n] == j && left == 0 ? bf_value(b, lv, bound, units, n) : INFINITY;
    double best = INFINITY;
    for (int k = bound[n] + 1; k <= j; k++)
        for (int m = 1; m <= left; m++) {
            bound[n + 1] = k;
            units[n] = m;
            best = fmin(best, bf_enum(b, lv, j, left - m, bound, units, n + 1));
        }
    return best;
}

/* Returns the best pipeline of [i, j) on exactly `units` units of a level, by enumeration. */
static double bf_best(const bf_ctx *b, const bf_level *lv, int i, int j, int units) {
    int bound[16] = {i}, u[16];
    return bf_enum(b, lv, j, units, bound, u, 0);
}

/* Returns the brute-force value of the plan p returned by the hierarchical planner, level by
 * level: each server-level stage's own server pipeline must be a best one of its range. */
static double bf_plan_value(const bf_ctx *b, const cost_partition *p) {
    int bound2[16], units2[16], n2 = 0;
    for (int s = 0; s < p->stages;) {
        int g = p->pred->stage[s].server_stage, n1 = 0, bound1[16], units1[16];
        bound2[n2] = p->bound[s];
        units2[n2] = p->pred->stage[s].servers;
        for (; s < p->stages && p->pred->stage[s].server_stage == g; s++, n1++) {
            bound1[n1] = p->bound[s];
            units1[n1] = p->replicas[s] / p->pred->stage[s].servers;
        }
        bound1[n1] = p->bound[s];
        CU_ASSERT_DOUBLE_EQUAL(bf_value(b, &b->lv1, bound1, units1, n1),
                               bf_best(b, &b->lv1, bound1[0], bound1[n1], b->lv1.units), 1e-12);
        n2++;
    }
    bound2[n2] = b->L;
    return bf_value(b, &b->lv2, bound2, units2, n2);
}

/* Two levels on random small models: the planner's time per stage is the brute-force optimum of
 * PipeDream's level-by-level rules, its plan reaches it, and the flat form adds up. */
void test_hierarchy_bruteforce(void) {
    rng_seed(4242);
    int checked = 0, multi = 0, interleaved = 0;
    for (int trial = 0; trial < 200; trial++) {
        cost_part_layer y[6];
        int L = rng_int(2, 5), d = rng_int(2, 3), S = rng_int(2, 3);
        random_layers(y, L);
        cost_part_topo t = {d, S, rng_int(1, 50) * 1e6, rng_int(0, 3) * 1e-3, rng_int(1, 10) * 1e5, rng_int(0, 3) * 1e-2};
        cost_pipedream_opts o = {.workers = d * S, .hierarchy = COST_HIERARCHY_PIPEDREAM};
        o.allreduce = rng_int(0, 1) ? COST_ALLREDUCE_PIPEDREAM : COST_ALLREDUCE_RING;
        bf_ctx b = {y, L, o.allreduce, {d, 1, t.intra_bw_Bps, t.intra_latency_s, 0},
                    {S, d, t.inter_bw_Bps, t.inter_latency_s, 1}};
        double want = bf_best(&b, &b.lv2, 0, L, S);
        cost_partition *p = NULL;
        pl_err e;
        pl_err_clear(&e);
        CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, L, &t, &o, &p, &e), PL_OK);
        CU_ASSERT_STRING_EQUAL(p->pred->hierarchy, "pipedream");
        CU_ASSERT_DOUBLE_EQUAL(p->pred->hier_time_s, want, 1e-9 * (1 + want));
        CU_ASSERT_DOUBLE_EQUAL(bf_plan_value(&b, p), p->pred->hier_time_s, 1e-9 * (1 + want));
        int sum = 0;
        for (int s = 0; s < p->stages; s++) {
            sum += p->replicas[s];
            CU_ASSERT(p->pred->stage[s].servers >= 1 && p->replicas[s] % p->pred->stage[s].servers == 0);
        }
        CU_ASSERT_EQUAL(sum, d * S);
        CU_ASSERT_EQUAL(p->bound[p->stages] - 1, L - 1);
        if (p->stages > 1) multi++;
        if (!cost_plan_hier_consecutive(p)) interleaved++;
        cost_partition_free(p);
        checked++;
    }
    CU_ASSERT_EQUAL(checked, 200);
    CU_ASSERT(multi > 40);
    CU_ASSERT(interleaved > 5);
}

/* One level (the workers fit in a server, or servers of one device): the pipedream hierarchy is
 * the exact program, same time (and PipeDream's time per stage is the flat prediction). */
void test_hierarchy_flat_agrees(void) {
    rng_seed(99);
    int checked = 0;
    for (int trial = 0; trial < 300; trial++) {
        cost_part_layer y[7];
        int L = rng_int(1, 6), W = rng_int(1, 6);
        random_layers(y, L);
        int kind = rng_int(0, 2); /* 0: one server; 1: servers of one device; 2: W <= d of several */
        int d = kind == 1 ? 1 : W + (kind == 2 ? rng_int(0, 2) : 0);
        cost_part_topo t = {d, kind == 0 ? 1 : (W + d - 1) / d + rng_int(0, 1), rng_int(1, 50) * 1e6,
                            rng_int(0, 3) * 1e-3, rng_int(1, 10) * 1e5, rng_int(0, 3) * 1e-2};
        cost_pipedream_opts o = {.workers = W, .straight = rng_int(0, 5) == 0 && W <= L};
        o.allreduce = rng_int(0, 1) ? COST_ALLREDUCE_PIPEDREAM : COST_ALLREDUCE_RING;
        cost_partition *a = NULL, *h = NULL;
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, L, &t, &o, &a, &e), PL_OK);
        o.hierarchy = COST_HIERARCHY_PIPEDREAM;
        CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, L, &t, &o, &h, &e), PL_OK);
        CU_ASSERT_STRING_EQUAL(a->pred->hierarchy, "exact");
        CU_ASSERT_DOUBLE_EQUAL(h->pred->bottleneck_s, a->pred->bottleneck_s, 1e-12 * (1 + a->pred->bottleneck_s));
        CU_ASSERT_DOUBLE_EQUAL(h->pred->hier_time_s, a->pred->bottleneck_s, 1e-12 * (1 + a->pred->bottleneck_s));
        CU_ASSERT_EQUAL(h->pred->stage[0].servers, 0);
        pl_buf b1, b2;
        pl_buf_init(&b1);
        pl_buf_init(&b2);
        cost_plan_config(h, &b1);
        cost_plan_hier_config(h, &b2);
        CU_ASSERT_STRING_EQUAL(b1.data, b2.data); /* one level: PipeDream prints "2-1-1" too */
        pl_buf_free(&b1);
        pl_buf_free(&b2);
        cost_partition_free(a);
        cost_partition_free(h);
        checked++;
    }
    CU_ASSERT_EQUAL(checked, 300);
}

/* AlexNet (PipeDream's profile) on 4 servers of 4 devices, 4 GB/s inside a server and 1 GB/s
 * between, PipeDream's all-reduce, no latency: PipeDream's optimizer_graph_hierarchical.py (with
 * --activation_compression_ratio 1, splits tried from the earliest) answers 3x(4) ; 1x(2-1-1) at
 * 18.874368 ms per stage. That time is the cut between the two server-level stages: the 9 MiB
 * output of the last MaxPool, both ways over one server's 1 GB/s link, 2 x 9437184 B / 1e9 B/s.
 * The exact program over all 16 workers finds 12-3-1 at 9.17 ms instead. */
void test_hierarchy_alexnet_4x4(void) {
    const char *path = PIPELAB_PIPEDREAM_DIR "/alexnet.graph.txt";
    CU_ASSERT_FATAL(pl_test_exists(path));
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open(path, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    cost_part_layer *y = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_part_layers_from_model(m, NULL, NULL, &y, &e), PL_OK);
    cost_part_topo t = {4, 4, 4e9, 0, 1e9, 0};
    cost_pipedream_opts o = {.workers = 16, .allreduce = COST_ALLREDUCE_PIPEDREAM, .hierarchy = COST_HIERARCHY_PIPEDREAM};
    cost_partition *p = NULL, *x = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, m->n, &t, &o, &p, &e), PL_OK);
    pl_buf b;
    pl_buf_init(&b);
    cost_plan_hier_config(p, &b);
    CU_ASSERT_STRING_EQUAL(b.data, "3x(4) ; 1x(2-1-1)");
    b.len = 0;
    cost_plan_config(p, &b);
    CU_ASSERT_STRING_EQUAL(b.data, "12-2-1-1");
    int cut = p->bound[1]; /* the first stage of the second server-level stage */
    CU_ASSERT_EQUAL(p->pred->stage[1].server_stage, 1);
    CU_ASSERT_DOUBLE_EQUAL(y[cut - 1].out_bytes, 9437184.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->hier_time_s, 2 * 9437184.0 / 1e9, 1e-15);
    CU_ASSERT(cost_plan_hier_consecutive(p)); /* 12 consecutive devices = 3 whole servers */
    o.hierarchy = COST_HIERARCHY_EXACT;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, m->n, &t, &o, &x, &e), PL_OK);
    b.len = 0;
    cost_plan_config(x, &b);
    CU_ASSERT_STRING_EQUAL(b.data, "12-3-1");
    CU_ASSERT(x->pred->bottleneck_s < 0.0092 && x->pred->bottleneck_s <= p->pred->bottleneck_s); /* the exact optimum rates lower */
    pl_buf_free(&b);
    cost_partition_free(p);
    cost_partition_free(x);
    free(y);
    cost_model_free(m);
}

/* Bad input for the hierarchy, the notation of a hand-made plan, and the CLI. */
void test_hierarchy_limits_and_cli(void) {
    cost_part_layer y[4];
    for (int l = 0; l < 4; l++) y[l] = (cost_part_layer){1.0, 1e6, 1e3, 0};
    cost_part_topo t = {4, 2, 1e10, 0, 1e9, 0};
    cost_pipedream_opts o = {.workers = 6, .hierarchy = COST_HIERARCHY_PIPEDREAM};
    cost_partition *p = NULL;
    pl_err e;
    CU_ASSERT_EQUAL(cost_plan_pipedream(y, 4, &t, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "6 workers is not a multiple of the 4 devices"));
    o.workers = 8;
    o.capacity_bytes = 1e9;
    CU_ASSERT_EQUAL(cost_plan_pipedream(y, 4, &t, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "without a memory capacity"));
    cost_partition *h = mk_part(3, (const int[]){0, 1, 2, 3}, (const int[]){6, 3, 3});
    CU_ASSERT_PTR_NOT_NULL_FATAL(cost_partition_attach_pred(h));
    h->pred->stage[0] = (cost_stage_pred){.servers = 3, .server_stage = 0};
    h->pred->stage[1] = (cost_stage_pred){.servers = 3, .server_stage = 0};
    h->pred->stage[2] = (cost_stage_pred){.servers = 1, .server_stage = 1};
    pl_buf b;
    pl_buf_init(&b);
    cost_plan_hier_config(h, &b);
    CU_ASSERT_STRING_EQUAL(b.data, "3x(2-1) ; 1x(3)");
    CU_ASSERT_FALSE(cost_plan_hier_consecutive(h));
    cost_partition_free(h);
    pl_buf_free(&b);
    char cmd[1024], *out = NULL;
    const char *alexnet = PIPELAB_PIPEDREAM_DIR "/alexnet.graph.txt";
    snprintf(cmd, sizeof cmd, "%s partition --graph %s --set topology.nodes=4 --set topology.devices_per_node=4 "
             "--set link.intra.bandwidth=4e9 --set link.inter.bandwidth=1e9 --allreduce pipedream --workers 16 "
             "--hierarchy pipedream", PIPELAB_BIN, alexnet);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "config 12-2-1-1 "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "pipedream config 3x(4) ; 1x(2-1-1)   time per stage 18.8744 ms"));
    free(out);
    static const char *const usage[] = {"--hierarchy flat", "--hierarchy pipedream --method balance",
                                        "--hierarchy pipedream --capacity 1e9", NULL};
    for (int k = 0; usage[k]; k++) {
        snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=8' --workers 4 %s", PIPELAB_BIN, usage[k]);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
        free(out);
    }
}
