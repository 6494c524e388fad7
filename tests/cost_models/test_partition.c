/* test_partition.c: PipeDream's planner and the balancer against brute force, memory limits,
 * ties, known two-level answers, the partition file, and the CLI (when registered). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pl_test.h"

void test_partition_register(void);
void test_calibrate_register(void);

/* Deterministic generator for the random models (xorshift64*). */
static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s ? s : 88172645463325252ull; }
/* Returns a uniform integer in [lo, hi]. */
static int rng_int(int lo, int hi) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t v = rng_state * 2685821657736338717ull;
    return lo + (int)((v >> 33) % (uint64_t)(hi - lo + 1));
}

/* Fills a random model: integer-valued numbers so that sums are exact. */
static void random_layers(cost_part_layer *y, int L) {
    for (int l = 0; l < L; l++) {
        y[l].time_s = rng_int(1, 9);
        y[l].param_bytes = rng_int(0, 5) * 1e6;
        y[l].out_bytes = rng_int(0, 4) * 1e6;
        y[l].stash_bytes = rng_int(0, 6) * 1e6;
    }
}

/* ---------------------------------------------------------------- balance, brute force */

typedef struct bal_best {
    double value;
    int bound[16]; /* stage starts, then L */
    int found;
} bal_best;

/* Balance objective of one stage as documented in cost.h (INFINITY over the capacity). */
static double bal_stage(const cost_part_layer *y, const cost_balance_opts *o, int s, int i, int j) {
    double t = 0, P = 0, S = 0;
    for (int l = i; l < j; l++) t += y[l].time_s, P += y[l].param_bytes, S += y[l].stash_bytes;
    int infl = o->inflight > 0 ? o->inflight : o->stages - s;
    int v = o->weight_versions > 0 ? o->weight_versions : 1;
    double mem = P * v + S * infl;
    if (o->capacity_bytes > 0 && mem > o->capacity_bytes) return INFINITY;
    return o->by_memory ? mem : t;
}

/* Enumerates every split in lexicographic order of boundaries; keeps the first optimum. */
static void bal_enum(const cost_part_layer *y, int L, const cost_balance_opts *o, int s, int i, double cur, int *b,
                     bal_best *best) {
    int p = o->stages;
    if (s == p) {
        if (i != L) return;
        if (cur < INFINITY && (!best->found || cur < best->value)) {
            best->found = 1;
            best->value = cur;
            memcpy(best->bound, b, sizeof best->bound);
        }
        return;
    }
    for (int j = i + 1; j <= L - (p - s - 1); j++) {
        double v = bal_stage(y, o, s, i, j);
        b[s] = i;
        b[s + 1] = j;
        bal_enum(y, L, o, s + 1, j, v > cur ? v : cur, b, best);
    }
}

static void test_balance_bruteforce(void) {
    rng_seed(12345);
    int checked = 0, infeasible = 0;
    for (int trial = 0; trial < 400; trial++) {
        cost_part_layer y[10];
        int L = rng_int(1, 10);
        random_layers(y, L);
        cost_balance_opts o = {0};
        o.stages = rng_int(1, L);
        o.by_memory = rng_int(0, 1);
        o.inflight = rng_int(0, 2);
        o.weight_versions = rng_int(0, 2);
        o.capacity_bytes = rng_int(0, 1) ? rng_int(5, 40) * 1e6 : 0;
        bal_best best = {0};
        int b[16] = {0};
        bal_enum(y, L, &o, 0, 0, 0.0, b, &best);
        cost_partition *p = NULL;
        pl_err e;
        pl_err_clear(&e);
        int rc = cost_plan_balance(y, L, &o, &p, &e);
        if (!best.found) {
            CU_ASSERT_EQUAL(rc, PL_EINPUT);
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "fits in"));
            infeasible++;
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(rc, PL_OK);
        CU_ASSERT_EQUAL(p->stages, o.stages);
        double got = 0;
        for (int s = 0; s < p->stages; s++) {
            CU_ASSERT_EQUAL(p->bound[s], best.bound[s]);
            CU_ASSERT_EQUAL(p->bound[s + 1], best.bound[s + 1]);
            double v = o.by_memory ? p->pred->stage[s].mem_bytes : p->pred->stage[s].compute_s;
            if (v > got) got = v;
            if (o.capacity_bytes > 0) CU_ASSERT(p->pred->stage[s].mem_bytes <= o.capacity_bytes);
        }
        CU_ASSERT_DOUBLE_EQUAL(got, best.value, 1e-9 * (1 + best.value));
        cost_partition_free(p);
        checked++;
    }
    CU_ASSERT(checked > 200);
    CU_ASSERT(infeasible > 5);
}

static void test_balance_ties_and_limits(void) {
    cost_part_layer y[6];
    for (int l = 0; l < 6; l++) y[l] = (cost_part_layer){1.0, 10.0, 1.0, 5.0};
    cost_balance_opts o = {.stages = 4};
    cost_partition *p = NULL, *q = NULL;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_plan_balance(y, 6, &o, &p, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(cost_plan_balance(y, 6, &o, &q, &e), PL_OK);
    /* 1,1,2,2: boundaries 0,1,2,4 are the lexicographically smallest among the optimal splits. */
    int want[4] = {0, 1, 2, 4};
    for (int s = 0; s < 4; s++) {
        CU_ASSERT_EQUAL(p->bound[s], want[s]);
        CU_ASSERT_EQUAL(q->bound[s], want[s]);
    }
    CU_ASSERT_DOUBLE_EQUAL(p->pred->bottleneck_s, 2.0, 1e-12);
    cost_partition_free(p);
    cost_partition_free(q);
    /* More stages than layers, and a capacity nothing fits in. */
    o.stages = 7;
    CU_ASSERT_EQUAL(cost_plan_balance(y, 6, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "7 stages"));
    o.stages = 2;
    o.capacity_bytes = 20; /* one layer alone needs 10 + 5 x 2 = 20 on stage 0: 3 layers cannot */
    CU_ASSERT_EQUAL(cost_plan_balance(y, 6, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no split of 6 layers into 2 stages fits in 20 bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "least any split needs on its fullest stage is 60 bytes"));
    /* Memory balancing moves layers off the stage with the most in-flight microbatches. */
    o.capacity_bytes = 0;
    o.by_memory = 1;
    CU_ASSERT_EQUAL_FATAL(cost_plan_balance(y, 6, &o, &p, &e), PL_OK);
    /* stage 0 holds 2 in-flight stashes (20 per layer), stage 1 one (15 per layer): 2 + 4 layers
     * give max(40, 60) = 60, the optimum, and the earliest boundary reaching it. */
    CU_ASSERT_EQUAL(p->bound[1], 2);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->peak_mem_bytes, 60.0, 1e-9);
    cost_partition_free(p);
}

/* ---------------------------------------------------------------- planner, brute force */

/* Returns a partition of n stages starting at first[0..n-1] and ending before first[n], with
 * reps[] replicas each (NULL: 1). */
static cost_partition *mk_part(int n, const int *first, const int *reps) {
    cost_partition *p = cost_partition_new(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int s = 0; s <= n; s++) p->bound[s] = first[s];
    for (int s = 0; s < n; s++) p->replicas[s] = reps ? reps[s] : 1;
    return p;
}

typedef struct pd_best {
    double value;
    int found;
    cost_partition *plan;
} pd_best;

/* Enumerates every composition of layers and workers into k stages; evaluates each with
 * cost_plan_evaluate and keeps the best that fits the capacity. */
static void pd_enum(const cost_part_layer *y, int L, int W, const cost_part_topo *t, const cost_pipedream_opts *o,
                    int *first, int *reps, int s, int layer, int worker, pd_best *best) {
    if (layer == L || worker == W) {
        if (layer != L || worker != W) return;
        first[s] = L;
        cost_partition *p = mk_part(s, first, reps);
        snprintf(p->method, sizeof p->method, "pipedream");
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(p, y, L, t, o->allreduce, NULL, &e), PL_OK);
        int fits = !(o->capacity_bytes > 0) || p->pred->peak_mem_bytes <= o->capacity_bytes;
        if (fits && (!best->found || p->pred->bottleneck_s < best->value)) {
            cost_partition_free(best->plan);
            best->plan = p;
            best->found = 1;
            best->value = p->pred->bottleneck_s;
        } else {
            cost_partition_free(p);
        }
        return;
    }
    for (int j = layer + 1; j <= L; j++)
        for (int r = 1; worker + r <= W; r++) {
            if (o->straight && r > 1) break;
            first[s] = layer;
            reps[s] = r;
            pd_enum(y, L, W, t, o, first, reps, s + 1, j, worker + r, best);
        }
}

static void test_pipedream_bruteforce(void) {
    rng_seed(777);
    int checked = 0, infeasible = 0, replicated = 0, multi = 0;
    for (int trial = 0; trial < 300; trial++) {
        cost_part_layer y[7];
        int L = rng_int(1, 6), W = rng_int(1, 6);
        random_layers(y, L);
        cost_part_topo t = {rng_int(1, 3), 0, rng_int(1, 50) * 1e6, rng_int(0, 3) * 1e-3, rng_int(1, 10) * 1e5,
                            rng_int(0, 3) * 1e-2};
        t.servers = (W + t.devices_per_server - 1) / t.devices_per_server;
        cost_pipedream_opts o = {.workers = W};
        o.allreduce = rng_int(0, 1) ? COST_ALLREDUCE_PIPEDREAM : COST_ALLREDUCE_RING;
        o.capacity_bytes = rng_int(0, 2) ? 0 : rng_int(5, 60) * 1e6;
        o.straight = rng_int(0, 5) == 0;
        if (o.straight && W > L) o.straight = 0;
        int first[9], reps[8];
        pd_best best = {0};
        pd_enum(y, L, W, &t, &o, first, reps, 0, 0, 0, &best);
        cost_partition *p = NULL;
        pl_err e;
        pl_err_clear(&e);
        int rc = cost_plan_pipedream(y, L, &t, &o, &p, &e);
        if (!best.found) {
            CU_ASSERT_EQUAL(rc, PL_EINPUT);
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "fits in"));
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "the least any configuration needs"));
            infeasible++;
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(rc, PL_OK);
        CU_ASSERT_DOUBLE_EQUAL(p->pred->bottleneck_s, best.value, 1e-9 * (1 + best.value));
        CU_ASSERT_EQUAL(cost_partition_workers(p), W);
        int sum = 0;
        for (int s = 0; s < p->stages; s++) {
            sum += p->replicas[s];
            if (p->replicas[s] > 1) replicated++;
            if (o.straight) CU_ASSERT_EQUAL(p->replicas[s], 1);
            if (o.capacity_bytes > 0) CU_ASSERT(p->pred->stage[s].mem_bytes <= o.capacity_bytes);
        }
        if (p->stages > 1) multi++;
        CU_ASSERT_EQUAL(sum, W);
        CU_ASSERT_EQUAL(cost_partition_noam(p), (W + p->replicas[0] - 1) / p->replicas[0]);
        /* Re-evaluating the returned plan gives the same prediction. */
        cost_partition *q = mk_part(p->stages, p->bound, p->replicas);
        CU_ASSERT_EQUAL(cost_plan_evaluate(q, y, L, &t, o.allreduce, NULL, &e), PL_OK);
        CU_ASSERT_DOUBLE_EQUAL(q->pred->bottleneck_s, p->pred->bottleneck_s, 1e-12 * (1 + p->pred->bottleneck_s));
        cost_partition_free(q);
        cost_partition_free(p);
        cost_partition_free(best.plan);
        checked++;
    }
    CU_ASSERT(checked > 150);
    CU_ASSERT(infeasible > 5);
    CU_ASSERT(replicated > 20);
    CU_ASSERT(multi > 20);
}

/* The planner's cost model on numbers computed by hand (cost.h documents the formulas). */
static void test_plan_costs_by_hand(void) {
    cost_part_layer y[3] = {{1, 1e6, 1e5, 1e3}, {2, 2e6, 2e5, 2e3}, {3, 3e6, 3e5, 3e3}};
    cost_part_topo t = {2, 2, 1e10, 1e-6, 1e9, 1e-5};
    cost_partition *p = mk_part(2, (const int[]){0, 1, 3}, (const int[]){1, 3});
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(p, y, 3, &t, COST_ALLREDUCE_RING, NULL, &e), PL_OK);
    const cost_stage_pred *st = p->pred->stage;
    CU_ASSERT_DOUBLE_EQUAL(st[0].time_s, 1.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(st[0].mem_bytes, 4 * 1.001e6, 1e-6); /* 4 in flight x (params + stash) */
    CU_ASSERT_EQUAL(st[1].first_worker, 1);
    /* workers 1-3 span both servers (1 + 2 replicas): PipeDream's two levels, a ring over the
     * g = 2 replicas of server 1 on the intra link plus a ring over the s = 2 servers on the
     * inter link, each of the full 5e6 bytes */
    CU_ASSERT_DOUBLE_EQUAL(st[1].allreduce_s, (5e6 / 1e10 + 2 * 1e-6) + (5e6 / 1e9 + 2 * 1e-5), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(st[1].time_s, (5 + st[1].allreduce_s) / 3, 1e-15);
    CU_ASSERT_EQUAL(st[1].inflight, 1);
    CU_ASSERT_DOUBLE_EQUAL(st[1].transfer_in_s, 2 * (1e-5 + 1e5 / 1e9) / 1, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->bottleneck_s, st[1].time_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->one_worker_s, 6.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->data_parallel_s, (6 + (6e6 / 1e10 + 2 * 1e-6) + (6e6 / 1e9 + 2 * 1e-5)) / 4, 1e-15);
    CU_ASSERT_EQUAL(cost_partition_noam(p), 4);
    CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(p, y, 3, &t, COST_ALLREDUCE_PIPEDREAM, NULL, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(st[1].allreduce_s, 4.0 * 1 * 5e6 / (2 * 1e10) + 4.0 * 1 * 5e6 / (2 * 1e9), 1e-15);
    /* 1-1-2: the first cut stays in server 0 (intra), the second crosses servers, the last stage's
     * two replicas share server 1. Transfers split over the smaller replica count. */
    cost_partition *q = mk_part(3, (const int[]){0, 1, 2, 3}, (const int[]){1, 1, 2});
    CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(q, y, 3, &t, COST_ALLREDUCE_RING, NULL, &e), PL_OK);
    const cost_stage_pred *s3 = q->pred->stage;
    CU_ASSERT_DOUBLE_EQUAL(s3[1].transfer_in_s, 2 * (1e-6 + 1e5 / 1e10), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(s3[2].transfer_in_s, 2 * (1e-5 + 2e5 / 1e9), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(s3[2].allreduce_s, 2.0 * 1 / 2 * 3e6 / 1e10 + 2 * 1e-6, 1e-15);
    CU_ASSERT_EQUAL(s3[0].inflight, 4);
    CU_ASSERT_EQUAL(s3[1].inflight, 3);
    CU_ASSERT_EQUAL(s3[2].inflight, 1);
    CU_ASSERT_DOUBLE_EQUAL(s3[2].mem_bytes, 3.003e6, 1e-6);
    CU_ASSERT_EQUAL(cost_partition_noam(q), 4);
    /* 2-1 then 2-2 on the same cut: the transfer is divided by the smaller replica count. */
    cost_partition *r = mk_part(2, (const int[]){0, 2, 3}, (const int[]){2, 1});
    CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(r, y, 3, &t, COST_ALLREDUCE_RING, NULL, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r->pred->stage[1].transfer_in_s, 2 * (1e-5 + 2e5 / 1e9) / 1, 1e-15); /* min(2, 1) = 1, spans */
    r->replicas[1] = 2;
    CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(r, y, 3, &t, COST_ALLREDUCE_RING, NULL, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r->pred->stage[1].transfer_in_s, 2 * (1e-5 + 2e5 / 1e9) / 2, 1e-15);
    CU_ASSERT_EQUAL(cost_partition_noam(r), 2);
    cost_partition_free(p);
    cost_partition_free(q);
    cost_partition_free(r);
}

/* Runs the planner and returns its "15-1" configuration string in buf. */
static int plan_config(const cost_part_layer *y, int L, const cost_part_topo *t, int W, cost_partition **p, char *buf,
                       size_t n) {
    cost_pipedream_opts o = {.workers = W};
    pl_err e;
    pl_err_clear(&e);
    int rc = cost_plan_pipedream(y, L, t, &o, p, &e);
    if (rc != PL_OK) {
        fprintf(stderr, "\n  planner error: %s\n", e.msg);
        snprintf(buf, n, "error");
        return rc;
    }
    pl_buf b;
    pl_buf_init(&b);
    cost_plan_config(*p, &b);
    snprintf(buf, n, "%s", b.data ? b.data : "");
    pl_buf_free(&b);
    return rc;
}

static void test_pipedream_known_answers(void) {
    cost_part_layer y[4];
    cost_partition *p = NULL;
    char cfg[64];
    /* One server of 4, cheap all-reduce (tiny weights), huge activations: pure data parallelism. */
    cost_part_topo one = {4, 1, 1e10, 0, 1e9, 0};
    for (int l = 0; l < 4; l++) y[l] = (cost_part_layer){1.0, 1.0, 1e12, 0};
    CU_ASSERT_EQUAL_FATAL(plan_config(y, 4, &one, 4, &p, cfg, sizeof cfg), PL_OK);
    CU_ASSERT_STRING_EQUAL(cfg, "4");
    CU_ASSERT_EQUAL(cost_partition_noam(p), 1);
    CU_ASSERT(p->pred->speedup_vs_one > 3.99);
    cost_partition_free(p);
    /* Expensive all-reduce (huge weights), tiny activations: a straight pipeline. */
    for (int l = 0; l < 4; l++) y[l] = (cost_part_layer){1.0, 1e12, 1.0, 0};
    CU_ASSERT_EQUAL_FATAL(plan_config(y, 4, &one, 4, &p, cfg, sizeof cfg), PL_OK);
    CU_ASSERT_STRING_EQUAL(cfg, "1-1-1-1");
    CU_ASSERT_EQUAL(cost_partition_noam(p), 4);
    CU_ASSERT(p->pred->speedup_vs_dp > 100);
    cost_partition_free(p);
    /* Two servers of 2: fast inside a server, slow between: replicate inside each server. */
    cost_part_topo two = {2, 2, 1e12, 0, 1e6, 0};
    cost_part_layer z[2] = {{2.0, 1e6, 1e3, 0}, {2.0, 1e6, 1e3, 0}};
    CU_ASSERT_EQUAL_FATAL(plan_config(z, 2, &two, 4, &p, cfg, sizeof cfg), PL_OK);
    CU_ASSERT_STRING_EQUAL(cfg, "2-2");
    CU_ASSERT_EQUAL((p->bound[0 + 1] - 1), 0);
    CU_ASSERT_EQUAL(cost_partition_noam(p), 2);
    cost_partition_free(p);
    /* Same model, fast links everywhere, cuts slower than compute (transfers overlap compute, so
     * they must exceed a stage time to matter): one stage over both servers. */
    cost_part_topo fast = {2, 2, 1e12, 0, 1e12, 0};
    z[0].out_bytes = z[1].out_bytes = 4e12;
    CU_ASSERT_EQUAL_FATAL(plan_config(z, 2, &fast, 4, &p, cfg, sizeof cfg), PL_OK);
    CU_ASSERT_STRING_EQUAL(cfg, "4");
    cost_partition_free(p);
    /* Two servers, heavy weights: a straight pipeline across both. */
    cost_part_topo slow = {2, 2, 1e10, 0, 1e9, 0};
    for (int l = 0; l < 4; l++) y[l] = (cost_part_layer){1.0, 1e9, 1e3, 0};
    CU_ASSERT_EQUAL_FATAL(plan_config(y, 4, &slow, 4, &p, cfg, sizeof cfg), PL_OK);
    CU_ASSERT_STRING_EQUAL(cfg, "1-1-1-1");
    cost_partition_free(p);
    /* A VGG-like shape: heavy compute with light weights first, a light head with heavy weights:
     * 15-1 on 4 servers of 4 (the PipeDream paper's VGG-16 configuration). */
    cost_part_topo c4 = {4, 4, 1e11, 0, 1.25e9, 0};
    cost_part_layer v[2] = {{15.0, 1e6, 1e6, 0}, {1.0, 5e8, 1e3, 0}};
    CU_ASSERT_EQUAL_FATAL(plan_config(v, 2, &c4, 16, &p, cfg, sizeof cfg), PL_OK);
    CU_ASSERT_STRING_EQUAL(cfg, "15-1");
    CU_ASSERT_EQUAL(cost_partition_noam(p), 2);
    cost_partition_free(p);
    /* Ties are broken the same way every time. */
    cost_partition *a = NULL, *b = NULL;
    for (int l = 0; l < 4; l++) y[l] = (cost_part_layer){1.0, 0, 0, 0};
    cost_pipedream_opts o = {.workers = 4};
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, 4, &one, &o, &a, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, 4, &one, &o, &b, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(a->stages, b->stages);
    for (int s = 0; s < a->stages; s++) {
        CU_ASSERT_EQUAL(a->bound[s], b->bound[s]);
        CU_ASSERT_EQUAL(a->replicas[s], b->replicas[s]);
    }
    cost_partition_free(a);
    cost_partition_free(b);
}

static void test_pipedream_memory(void) {
    /* 4 layers of 1 GB params; capacity 2.5 GB; the 1-1-1-1 pipeline holds 4,3,2,1 versions of
     * 1 GB on its stages: stage 0 needs 4 GB. Replicating stage 0 lowers its in-flight count. */
    cost_part_layer y[4];
    for (int l = 0; l < 4; l++) y[l] = (cost_part_layer){1.0, 1e9, 1e3, 0};
    cost_part_topo t = {4, 1, 1e12, 0, 1e12, 0};
    cost_pipedream_opts o = {.workers = 4, .capacity_bytes = 2.5e9, .straight = 1};
    cost_partition *p = NULL;
    pl_err e;
    CU_ASSERT_EQUAL(cost_plan_pipedream(y, 4, &t, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no straight-pipeline configuration of 4 workers fits in 2500000000 bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "4000000000 bytes"));
    o.straight = 0;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, 4, &t, &o, &p, &e), PL_OK);
    CU_ASSERT(p->pred->peak_mem_bytes <= 2.5e9);
    cost_partition_free(p);
    o.capacity_bytes = 1e9; /* one layer on a lone last stage needs 1 GB; stage 0 needs more */
    CU_ASSERT_EQUAL(cost_plan_pipedream(y, 4, &t, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no pipeline configuration"));
    /* Bad input. */
    o.capacity_bytes = 0;
    o.workers = 5;
    CU_ASSERT_EQUAL(cost_plan_pipedream(y, 4, &t, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "do not fit on 1 server"));
    y[2].time_s = -1;
    o.workers = 2;
    CU_ASSERT_EQUAL(cost_plan_pipedream(y, 4, &t, &o, &p, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layer 2"));
}

/* ---------------------------------------------------------------- partition file */

/* Writes text to dir/name and returns the malloc'd path. */
static char *write_tmp(const char *dir, const char *name, const char *text) {
    char *path = pl_test_path(dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_partition_file(void) {
    cost_part_layer y[5];
    for (int l = 0; l < 5; l++) y[l] = (cost_part_layer){1.0 + l, 1e6, 1e5, 1e5};
    cost_part_topo t = {2, 2, 1e10, 1e-6, 1e9, 1e-5};
    cost_pipedream_opts o = {.workers = 4};
    cost_partition *p = NULL, *q = NULL;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, 5, &t, &o, &p, &e), PL_OK);
    snprintf(p->model, sizeof p->model, "toy five");
    snprintf(p->hardware, sizeof p->hardware, "cluster-a");
    pl_buf b;
    pl_buf_init(&b);
    cost_partition_write(p, &b);
    CU_ASSERT_EQUAL_FATAL(cost_partition_parse_text(b.data, "x.part", &q, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(q->method, "pipedream");
    CU_ASSERT_STRING_EQUAL(q->model, "toy five");
    CU_ASSERT_STRING_EQUAL(q->hardware, "cluster-a");
    CU_ASSERT_EQUAL(cost_partition_layers(q), 5);
    CU_ASSERT_EQUAL(cost_partition_workers(q), 4);
    CU_ASSERT_EQUAL_FATAL(q->stages, p->stages);
    for (int s = 0; s < p->stages; s++) {
        CU_ASSERT_EQUAL(q->bound[s], p->bound[s]);
        CU_ASSERT_EQUAL((q->bound[s + 1] - 1), (p->bound[s + 1] - 1));
        CU_ASSERT_EQUAL(q->replicas[s], p->replicas[s]);
        CU_ASSERT_DOUBLE_EQUAL(q->pred->stage[s].time_s, p->pred->stage[s].time_s, 1e-8 * p->pred->stage[s].time_s);
    }
    /* Writing what was read gives the same text back. */
    CU_ASSERT_EQUAL(cost_plan_evaluate(q, y, 5, &t, COST_ALLREDUCE_RING, NULL, &e), PL_OK);
    pl_buf b2;
    pl_buf_init(&b2);
    cost_partition_write(q, &b2);
    CU_ASSERT_STRING_EQUAL(b2.data, b.data);
    /* What was read is what the simulator takes, as it is. */
    CU_ASSERT_EQUAL(cost_partition_check(q, 5, &e), PL_OK);
    pl_buf_free(&b);
    pl_buf_free(&b2);
    cost_partition_free(p);
    cost_partition_free(q);

    /* A hand-written file with comments, and bad files naming file:line. */
    char *dir = pl_test_tmpdir();
    char *ok = write_tmp(dir, "ok.part",
                         "# comment\n\npipelab-partition 1\nmodel vgg16   # provenance\nstage 0: layers 0-12 replicas 15\n"
                         "stage 1: layers 13-40 replicas 1\n");
    CU_ASSERT_EQUAL_FATAL(cost_partition_read(ok, &q, &e), PL_OK);
    CU_ASSERT_EQUAL(cost_partition_workers(q), 16);
    CU_ASSERT_EQUAL(cost_partition_layers(q), 41);
    CU_ASSERT_EQUAL(cost_partition_noam(q), 2);
    CU_ASSERT_STRING_EQUAL(q->method, "manual");
    cost_partition_free(q);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"", "bad.part:1: empty file"},
        {"pipelab-schedule 1\n", "bad.part:1: not a partition file"},
        {"pipelab-partition 2\n", "bad.part:1: unsupported partition file version '2'"},
        {"pipelab-partition 1\n", "bad.part:1: no 'stage' lines"},
        {"pipelab-partition 1\nstage 0: layers 0-3 replicas 2\nstage 1: layers 5-6 replicas 1\n",
         "bad.part:3: stage 1 starts at layer 5 but must start at layer 4"},
        {"pipelab-partition 1\nstage 1: layers 0-3 replicas 2\n", "bad.part:2: stage number '1' out of order"},
        {"pipelab-partition 1\nstage 0: layers 0-3 replicas 0\n", "bad.part:2: replicas must be"},
        {"pipelab-partition 1\nstage 0: layers 3-1 replicas 1\n", "bad.part:2: layer range 3-1 is empty"},
        {"pipelab-partition 1\nstage 0: layers 0-x replicas 1\n", "bad.part:2: layer range must be"},
        {"pipelab-partition 1\nstage 0 layers 0-3 replicas 1\n", "bad.part:2: expected 'stage K:"},
        {"pipelab-partition 1\ncolour blue\n", "bad.part:2: unknown key 'colour'"},
        {"pipelab-partition 1\nlayers 4\nlayers 4\n", "bad.part:3: duplicate 'layers' line"},
        {"pipelab-partition 1\nlayers 9\nstage 0: layers 0-3 replicas 1\n", "bad.part:3: the stages cover layers 0-3 but the file says 'layers 9'"},
        {"pipelab-partition 1\nworkers 3\nstage 0: layers 0-3 replicas 2\n", "bad.part:3: the stages use 2 workers but the file says 'workers 3'"},
        {"pipelab-partition 1\nstage 0: layers 0-3 replicas 1 time_s -2\n", "bad.part:2: time_s must be"},
        {"pipelab-partition 1\nmethod\n", "bad.part:2: 'method' needs a value"},
        {NULL, NULL},
    };
    for (int k = 0; bad[k].text; k++) {
        char *path = write_tmp(dir, "bad.part", bad[k].text);
        pl_err_clear(&e);
        int rc = cost_partition_read(path, &q, &e);
        CU_ASSERT_EQUAL(rc, PL_EINPUT);
        const char *slash = strrchr(e.msg, '/');
        if (!slash || !strstr(slash, bad[k].want)) {
            fprintf(stderr, "\ncase %d: want '%s' got '%s'\n", k, bad[k].want, e.msg);
            CU_FAIL("bad partition file message");
        }
        remove(path);
        free(path);
    }
    CU_ASSERT_EQUAL(cost_partition_read("/nonexistent/x.part", &q, &e), PL_EIO);
    remove(ok);
    free(ok);
    rmdir(dir);
    free(dir);
}

/* ---------------------------------------------------------------- real profile */

static void test_vgg16_cluster(void) {
    const char *path = PIPELAB_PIPEDREAM_DIR "/vgg16.graph.txt";
    CU_ASSERT_FATAL(pl_test_exists(path));
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open(path, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    cost_hw hw;
    cost_hw_init(&hw);
    hw.devices_per_node = 4;
    hw.nodes = 4;
    hw.intra_bandwidth_Bps = 12e9;  /* PCIe */
    hw.inter_bandwidth_Bps = 1.25e9; /* 10 Gbps */
    cost_part_layer *y = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_part_layers_from_model(m, &hw, NULL, &y, &e), PL_OK);
    cost_part_topo t;
    cost_part_topo_from_hw(&hw, &t);
    cost_pipedream_opts o = {.workers = 16};
    cost_partition *p = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, m->n, &t, &o, &p, &e), PL_OK);
    int sum = 0;
    for (int s = 0; s < p->stages; s++) sum += p->replicas[s];
    CU_ASSERT_EQUAL(sum, 16);
    CU_ASSERT_EQUAL(p->bound[p->stages] - 1 + 1, m->n);
    CU_ASSERT(p->pred->speedup_vs_one > 1.0);
    CU_ASSERT(p->pred->speedup_vs_dp >= 1.0 - 1e-12); /* pure data parallelism is one of the candidates */
    pl_buf b;
    pl_buf_init(&b);
    cost_plan_config(p, &b);
    fprintf(stderr, "\n  vgg16 on 4x4 (10 Gbps): config %s, NOAM %d, %.3f ms per minibatch, %.2fx one worker, %.2fx DP\n",
            b.data, cost_partition_noam(p), p->pred->bottleneck_s * 1e3, p->pred->speedup_vs_one, p->pred->speedup_vs_dp);
    pl_buf_free(&b);
    cost_partition_free(p);
    free(y);
    cost_model_free(m);
}

/* PipeDream's input pseudo-node carries the data-loading wait as forward time: no compute. */
static void test_input_pseudo_layer(void) {
    const char *text =
        "node1 -- Input -- forward_compute_time=600.000, backward_compute_time=0.000, activation_size=100.0, parameter_size=0.000\n"
        "node2 -- Linear(4, 8) -- forward_compute_time=2.000, backward_compute_time=4.000, activation_size=200.0, parameter_size=160.000\n"
        "node3 -- Inputish -- forward_compute_time=1.000, backward_compute_time=1.000, activation_size=200.0, parameter_size=0.000\n"
        "\tnode1 -- node2\n\tnode2 -- node3\n";
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_read_graph("in.txt", text, strlen(text), 1, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[0].fwd_s, 0.6, 1e-12); /* the reader keeps what the file says */
    cost_part_layer *y = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_part_layers_from_model(m, NULL, NULL, &y, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(y[0].time_s, 0.0, 0);        /* the planner drops it, as PipeDream does */
    CU_ASSERT_DOUBLE_EQUAL(y[0].out_bytes, 100.0, 0);   /* its bytes still cross a cut after it */
    CU_ASSERT_DOUBLE_EQUAL(y[1].time_s, 0.006, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(y[2].time_s, 0.002, 1e-12);  /* has a backward: a real layer */
    free(y);
    cost_model_free(m);
}

/* VGG-16 on the cluster-a preset, 16 workers. The PipeDream paper (SOSP'19 Table 1) ran 15-1
 * (stage 1 = the three Linear layers, msr-fiddle/pipedream runtime/image_classification/models/
 * vgg16/gpus=16). Under PipeDream's cost model on this published profile our planner finds 14-2
 * (conv5 block + classifier on two replicas), with 15-1 within a few percent: pinned here so that
 * a change of the cost model that moves the answer is seen. */
static void test_vgg16_cluster_a_preset(void) {
    const char *path = PIPELAB_PIPEDREAM_DIR "/vgg16.graph.txt";
    CU_ASSERT_FATAL(pl_test_exists(path));
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open(path, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    cost_hw hw;
    CU_ASSERT_EQUAL_FATAL(cost_hw_load(&hw, "cluster-a", &e), PL_OK);
    cost_part_layer *y = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_part_layers_from_model(m, &hw, NULL, &y, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(m->n, 41);
    CU_ASSERT_DOUBLE_EQUAL(y[0].time_s, 0.0, 0); /* Input: 17.972 ms of data loading dropped */
    cost_part_topo t;
    cost_part_topo_from_hw(&hw, &t);
    static const cost_allreduce_model ars[2] = {COST_ALLREDUCE_RING, COST_ALLREDUCE_PIPEDREAM};
    for (int k = 0; k < 2; k++) {
        cost_pipedream_opts o = {.workers = 16, .allreduce = ars[k]};
        cost_partition *p = NULL;
        CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, m->n, &t, &o, &p, &e), PL_OK);
        pl_buf b;
        pl_buf_init(&b);
        cost_plan_config(p, &b);
        CU_ASSERT_STRING_EQUAL(b.data, "14-2");
        CU_ASSERT_EQUAL(p->bound[1], k == 0 ? 25 : 26);
        CU_ASSERT_DOUBLE_EQUAL(p->pred->one_worker_s, 0.672535, 1e-9);
        CU_ASSERT(p->pred->speedup_vs_dp > (k == 0 ? 1.8 : 2.4));
        /* The paper's 15-1: every conv layer on 15 replicas, the classifier (34-40) on one. */
        cost_partition *q = mk_part(2, (const int[]){0, 34, 41}, (const int[]){15, 1});
        CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(q, y, m->n, &t, ars[k], NULL, &e), PL_OK);
        CU_ASSERT(q->pred->bottleneck_s >= p->pred->bottleneck_s);
        CU_ASSERT(q->pred->bottleneck_s < 1.1 * p->pred->bottleneck_s);
        fprintf(stderr, "\n  vgg16 cluster-a 16 (%s): %s %.3f ms (%.2fx DP); 15-1 %.3f ms (%.2fx DP)",
                k ? "pipedream" : "ring", b.data, p->pred->bottleneck_s * 1e3, p->pred->speedup_vs_dp, q->pred->bottleneck_s * 1e3,
                q->pred->speedup_vs_dp);
        pl_buf_free(&b);
        cost_partition_free(p);
        cost_partition_free(q);
    }
    free(y);
    cost_model_free(m);
}

/* ---------------------------------------------------------------- CLI */

/* Returns 1 when the pipelab binary knows the subcommand (the lead registers it in main.c). */
static int cli_has(const char *cmd) {
    char line[512];
    snprintf(line, sizeof line, "%s %s --help", PIPELAB_BIN, cmd);
    char *out = NULL;
    int rc = pl_test_run(line, &out);
    int ok = rc == 0 && out && strstr(out, "usage: pipelab");
    free(out);
    return ok;
}

static void test_partition_cli(void) {
    CU_ASSERT_FATAL(cli_has("partition"));
    char *dir = pl_test_tmpdir();
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "%s partition --model 'uniform:layers=8,fwd_s=1e-3,bwd_s=2e-3,param_bytes=1000000,out_bytes=1000,"
             "stash_bytes=1000' --set topology.nodes=2 --set topology.devices_per_node=2 --workers 4 "
             "--method balance -o %s/p.part",
             PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "stage"));
    free(out);
    char *part = pl_test_path(dir, "p.part");
    cost_partition *q = NULL;
    pl_err e;
    CU_ASSERT_EQUAL(cost_partition_read(part, &q, &e), PL_OK);
    CU_ASSERT_EQUAL(q->stages, 4);
    CU_ASSERT_EQUAL(q->bound[1], 2);
    cost_partition_free(q);
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=8' --workers 4 --format json", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"config\""));
    free(out);
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=8' --workers 4 --method nope", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
    free(out);
    snprintf(cmd, sizeof cmd,
             "%s partition --model 'uniform:layers=8,param_bytes=1000000' --workers 4 --capacity 10", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "fits in 10 bytes"));
    free(out);
    /* without --capacity a plan may exceed the device: a note says so (here 4 GB of weights
     * on one stage, with versions and gradients, against a 1 GB device); within it, none */
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=2,param_bytes=2e9' --set device.memory_bytes=1e9 "
             "--workers 2 --method balance", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "more than the 0.9 GiB of a") && strstr(out, "--capacity device"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=2,param_bytes=1e3' --set device.memory_bytes=1e9 "
             "--workers 2 --method balance", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT(out == NULL || strstr(out, "note:") == NULL);
    free(out);
    remove(part);
    free(part);
    rmdir(dir);
    free(dir);
}

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
static void test_hierarchy_bruteforce(void) {
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
static void test_hierarchy_flat_agrees(void) {
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
static void test_hierarchy_alexnet_4x4(void) {
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
static void test_hierarchy_limits_and_cli(void) {
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

void test_partition_register(void) {
    static const pl_test_case cases[] = {
        {"balance = brute force (random models, ties, capacity)", test_balance_bruteforce},
        {"balance ties, limits, memory balancing", test_balance_ties_and_limits},
        {"pipedream = brute force (random models and topologies)", test_pipedream_bruteforce},
        {"planner cost model by hand", test_plan_costs_by_hand},
        {"pipedream known answers (replicate vs straight, two-level)", test_pipedream_known_answers},
        {"pipedream memory capacity and bad input", test_pipedream_memory},
        {"partition file round trip and file:line errors", test_partition_file},
        {"vgg16 on 16 workers (PipeDream profile)", test_vgg16_cluster},
        {"input pseudo-layer carries no compute", test_input_pseudo_layer},
        {"vgg16 on the cluster-a preset, 16 workers (PipeDream profile)", test_vgg16_cluster_a_preset},
        {"pipelab partition (CLI)", test_partition_cli},
        {"pipedream hierarchy = brute force of its level-by-level rules", test_hierarchy_bruteforce},
        {"pipedream hierarchy = exact program on one level", test_hierarchy_flat_agrees},
        {"pipedream hierarchy: AlexNet on 4x4 gives PipeDream's 3x(4) ; 1x(2-1-1)", test_hierarchy_alexnet_4x4},
        {"pipedream hierarchy: bad input, notation, CLI", test_hierarchy_limits_and_cli},
        {NULL, NULL},
    };
    pl_test_suite("partition", cases);
    test_calibrate_register();
}
