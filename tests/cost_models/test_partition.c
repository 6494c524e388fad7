/* test_partition.c: the partition suite: PipeDream's planner and the balancer against brute force,
 * memory limits, ties and known two-level answers here, with the helpers the suite's files share
 * (test_partition.h); the partition file, real profiles and the CLI in test_partition_io.c, the
 * hierarchy in test_partition_hier.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pl_test.h"
#include "test_partition.h"

void test_partition_register(void);
void test_calibrate_register(void);

/* Deterministic generator for the random models (xorshift64*). */
static uint64_t rng_state;
void rng_seed(uint64_t s) { rng_state = s ? s : 88172645463325252ull; }
/* Returns a uniform integer in [lo, hi]. */
int rng_int(int lo, int hi) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t v = rng_state * 2685821657736338717ull;
    return lo + (int)((v >> 33) % (uint64_t)(hi - lo + 1));
}

/* Fills a random model: integer-valued numbers so that sums are exact. */
void random_layers(cost_part_layer *y, int L) {
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
cost_partition *mk_part(int n, const int *first, const int *reps) {
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
    /* Closed form (ring, zero latency, one server: intra link): the one stage holds all 4 layers
     * (C = 4 s, P = 4 bytes) on 4 replicas, S = 2 (4-1)/4 x 4 B / 1e10 B/s = 6e-10 s, stage time
     * (4 + 6e-10) / 4 = 1 + 1.5e-10 s (no cut, so the bottleneck); one worker runs C = 4 s, so
     * speedup_vs_one = 4 / (1 + 1.5e-10). The tolerance is 1e-12 relative: 1e-9 could not tell
     * the all-reduce term (1.5e-10 relative) from a free one. */
    CU_ASSERT_DOUBLE_EQUAL(p->pred->bottleneck_s, 1 + 1.5e-10, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->speedup_vs_one, 4 / (1 + 1.5e-10), 4e-12);
    cost_partition_free(p);
    /* Expensive all-reduce (huge weights), tiny activations: a straight pipeline. */
    for (int l = 0; l < 4; l++) y[l] = (cost_part_layer){1.0, 1e12, 1.0, 0};
    CU_ASSERT_EQUAL_FATAL(plan_config(y, 4, &one, 4, &p, cfg, sizeof cfg), PL_OK);
    CU_ASSERT_STRING_EQUAL(cfg, "1-1-1-1");
    CU_ASSERT_EQUAL(cost_partition_noam(p), 4);
    /* Closed form: each stage is one layer on one replica (1 s, no all-reduce), each cut
     * 2 x (0 + 1 B / 1e10 B/s) = 2e-10 s, so the bottleneck is 1 s. Data parallelism: all 4 layers
     * (C = 4 s, P = 4e12 B) on the 4 workers of one server, ring S = 2 (4-1)/4 x 4e12 / 1e10 =
     * 600 s, time (4 + 600) / 4 = 151 s; speedup_vs_dp = 151 / 1 = 151 (1e-9 relative). */
    CU_ASSERT_DOUBLE_EQUAL(p->pred->bottleneck_s, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->data_parallel_s, 151.0, 151e-9);
    CU_ASSERT_DOUBLE_EQUAL(p->pred->speedup_vs_dp, 151.0, 151e-9);
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

/* ---------------------------------------------------------------- CLI */

/* Returns 1 when the pipelab binary knows the subcommand (the lead registers it in main.c). */
int cli_has(const char *cmd) {
    char line[512];
    snprintf(line, sizeof line, "%s %s --help", PIPELAB_BIN, cmd);
    char *out = NULL;
    int rc = pl_test_run(line, &out);
    int ok = rc == 0 && out && strstr(out, "usage: pipelab");
    free(out);
    return ok;
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
