/* test_sim_model.c: the simulator over the cost-model module (sim_model): a uniform model equals
 * the flag-driven costs, intra- vs inter-node links, memory against cost_schedule_memory,
 * partition errors, the balanced split, and `pipelab simulate --model`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_test.h"
#include "pl_sched.h"
#include "sim.h"
#include "sim_test.h"

void sim_model_tests_register(void);

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-9 * (1.0 + fabs((double)(b))))

/* Returns the lowered schedule of a generator (NULL on failure, reported through CUnit). */
static sched *gen_lowered(const char *kind, int p, int m, int v, sched_recompute rc) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, v, 0, rc};
    sched *s = sched_generate(kind, &o, &e);
    if (!s) {
        fprintf(stderr, "generate %s: %s\n", kind, e.msg);
        CU_FAIL("generate");
        return NULL;
    }
    sched *l = sched_lower(s, &e);
    sched_free(s);
    if (!l) fprintf(stderr, "lower %s: %s\n", kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

/* Returns the model of a spec (NULL on failure, reported through CUnit). */
static cost_model *open_model(const char *spec) {
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open(spec, &e);
    if (!m) fprintf(stderr, "model %s: %s\n", spec, e.msg);
    CU_ASSERT_PTR_NOT_NULL(m);
    return m;
}

/* Runs s over the adapter of (m, p, hw, o) with the config sim_model_config gives; returns PL_OK
 * or the error (printed). cfg_out, when not NULL, receives the config used. */
static int run_model(const sched *s, const cost_model *m, const cost_partition *p, const cost_hw *hw,
                     const cost_opts *o, sim_result *r, sim_config *cfg_out) {
    pl_err e;
    pl_err_clear(&e);
    sim_model sm;
    int rc = sim_model_init(&sm, s, m, p, hw, o, &e);
    if (rc == PL_OK) {
        sim_config c;
        sim_config_init(&c);
        sim_model_config(&sm, &c);
        sim_costs costs = sim_model_costs(&sm);
        rc = sim_run(s, &costs, &c, r, &e);
        if (cfg_out) {
            *cfg_out = c;
            cfg_out->replicas = NULL; /* owned by sm, freed below */
        }
    }
    if (rc != PL_OK) fprintf(stderr, "sim_model: %s\n", e.msg);
    sim_model_free(&sm);
    return rc;
}

/* Runs s over flag-driven costs b (default config); returns PL_OK or the error (printed). */
static int run_basic(const sched *s, sim_basic *b, sim_result *r) {
    pl_err e;
    pl_err_clear(&e);
    sim_config c;
    sim_config_init(&c);
    sim_costs costs = sim_basic_costs(b);
    int rc = sim_run(s, &costs, &c, r, &e);
    if (rc != PL_OK) fprintf(stderr, "sim_basic: %s\n", e.msg);
    return rc;
}

/* A uniform model of 8 layers (F 0.5 s, I = W = 0.625 s per layer) evenly split over 4 stages is
 * per stage tF = 1, tB = 2.5: the adapter gives bit-for-bit the iteration time of sim_basic with
 * those times, and gpipe / 1f1b meet (m + p - 1)(tF + tB); zb-h1 (split backward) matches
 * sim_basic with ti / tw. An uneven --split (1, 2, 3, 2 layers) matches per-stage overrides. */
static void test_uniform_equals_basic(void) {
    cost_model *m = open_model("uniform:layers=8,fwd_s=0.5,bwd_s=1.25");
    if (!m) return;
    int p = 4, mb = 8;
    const char *kinds[] = {"gpipe", "1f1b", "zb-h1", "interleaved"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int v = strcmp(kinds[k], "interleaved") == 0 ? 2 : 0;
        sched *s = gen_lowered(kinds[k], p, mb, v, SCHED_RECOMPUTE_NONE);
        if (!s) continue;
        double tf = 8 * 0.5 / s->stages, ti = 8 * 0.625 / s->stages;
        sim_result a, b;
        CU_ASSERT_EQUAL_FATAL(run_model(s, m, NULL, NULL, NULL, &a, NULL), PL_OK);
        sim_basic bb;
        sim_basic_init(&bb);
        bb.tf_s = tf;
        bb.ti_s = ti;
        bb.tw_s = ti;
        CU_ASSERT_EQUAL_FATAL(run_basic(s, &bb, &b), PL_OK);
        CU_ASSERT_DOUBLE_EQUAL(a.iteration_time_s, b.iteration_time_s, 0);
        CU_ASSERT_DOUBLE_EQUAL(a.makespan_s, b.makespan_s, 0);
        CU_ASSERT_DOUBLE_EQUAL(a.bubble_fraction, b.bubble_fraction, 0);
        for (int q = 0; q < p; q++) CU_ASSERT_DOUBLE_EQUAL(a.rank[q].busy_s, b.rank[q].busy_s, 0);
        if (k < 2) NEAR(a.iteration_time_s, (mb + p - 1) * (1.0 + 2.5));
        sim_result_free(&a);
        sim_result_free(&b);
        sim_basic_free(&bb);
        sched_free(s);
    }
    /* uneven split: stage q has n_q layers, so tF = 0.5 n_q, tB = 1.25 n_q */
    sched *s = gen_lowered("1f1b", p, mb, 0, SCHED_RECOMPUTE_NONE);
    if (s) {
        pl_err e;
        pl_err_clear(&e);
        cost_partition *part = cost_partition_parse("0,1,3,6,8", m->n, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(part);
        sim_basic bb;
        sim_basic_init(&bb);
        bb.stages = p;
        bb.stage = calloc((size_t)p, sizeof *bb.stage);
        CU_ASSERT_PTR_NOT_NULL_FATAL(bb.stage);
        int nl[] = {1, 2, 3, 2};
        for (int q = 0; q < p; q++)
            bb.stage[q] = (sim_stage_cost){0.5 * nl[q], 1.25 * nl[q], 0.625 * nl[q], 0.625 * nl[q], -1, -1, -1, -1};
        sim_result a, b;
        CU_ASSERT_EQUAL_FATAL(run_model(s, m, part, NULL, NULL, &a, NULL), PL_OK);
        CU_ASSERT_EQUAL_FATAL(run_basic(s, &bb, &b), PL_OK);
        CU_ASSERT_DOUBLE_EQUAL(a.iteration_time_s, b.iteration_time_s, 0);
        CU_ASSERT(a.iteration_time_s > (mb + p - 1) * 3.5); /* the 3-layer stage is the bottleneck */
        sim_result_free(&a);
        sim_result_free(&b);
        sim_basic_free(&bb);
        cost_partition_free(part);
        sched_free(s);
    }
    cost_model_free(m);
}

/* Full recomputation on the uniform model (per stage tF = 1, tB = 2.5, I of a layer 0.625): GPipe
 * meets (m + p - 1)(tF + tB + rerun) with the rerun tF, and with sim_model.rerun_next at ratio r
 * the rerun is tF less (1 - r) times its stage's last layer's I, 0.625: at r = 0.6, 0.75; at r = 1
 * bit for bit the time without the term. A stage's own ratio moves only its own backwards: 1F1B's
 * last stage at r = 0.6 alone busies its rank 0.25 s less per microbatch, the others not at all. */
static void test_rerun_next(void) {
    cost_model *m = open_model("uniform:layers=8,fwd_s=0.5,bwd_s=1.25");
    if (!m) return;
    const int p = 4, mb = 8;
    const char *kinds[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++) {
        sched *s = gen_lowered(kinds[k], p, mb, 0, SCHED_RECOMPUTE_FULL);
        if (!s) continue;
        pl_err e;
        pl_err_clear(&e);
        sim_model sm;
        CU_ASSERT_EQUAL_FATAL(sim_model_init(&sm, s, m, NULL, NULL, NULL, &e), PL_OK);
        NEAR(sm.stage[p - 1].i_last_s, 0.625);
        sim_config c;
        sim_config_init(&c);
        sim_model_config(&sm, &c);
        double busy[3][4], iter[3];
        const double all[4] = {0.6, 0.6, 0.6, 0.6}, one[4] = {1, 1, 1, 0.6}, ones[4] = {1, 1, 1, 1};
        const double *ratio[4] = {NULL, k ? one : all, ones};
        for (int t = 0; t < 3; t++) {
            sm.rerun_next = ratio[t];
            sim_costs costs = sim_model_costs(&sm);
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &r, &e), PL_OK);
            iter[t] = r.iteration_time_s;
            for (int q = 0; q < p; q++) busy[t][q] = r.rank[q].busy_s;
            sim_result_free(&r);
        }
        if (k == 0) {
            NEAR(iter[0], (mb + p - 1) * (1.0 + 2.5 + 1.0));
            NEAR(iter[1], (mb + p - 1) * (1.0 + 2.5 + 0.75));
        } else {
            for (int q = 0; q < p - 1; q++) CU_ASSERT_DOUBLE_EQUAL(busy[1][q], busy[0][q], 0);
            NEAR(busy[0][p - 1] - busy[1][p - 1], mb * 0.25);
        }
        CU_ASSERT_DOUBLE_EQUAL(iter[2], iter[0], 0);
        sm.rerun_next = NULL;
        sim_model_free(&sm);
        sched_free(s);
    }
    cost_model_free(m);
}

/* The I next to its recomputed forward under a reuse term: that I takes its own ratio r in place
 * of the factor the term gives the backward's other I. GPipe on a uniform model whose forward is
 * short (per stage tF = 0.1, I and W 1.25, the last layer's I 0.625), every I and W at 0.1 by the
 * first-touch term and r = 0.01: each backward is 0.125 (I) + 0.125 (W) + 0.1 (the rerun) less
 * (0.1 - 0.01) 0.625, and the iteration (m + p - 1)(tF + that). Less (1 - r) 0.625 instead, the
 * backward would be negative and the prediction fail. */
static void test_rerun_next_terms(void) {
    cost_model *m = open_model("uniform:layers=8,fwd_s=0.05,bwd_s=1.25");
    sched *s = gen_lowered("gpipe", 4, 8, 0, SCHED_RECOMPUTE_FULL);
    if (!m || !s) goto out;
    const int p = 4, mb = 8;
    pl_err e;
    pl_err_clear(&e);
    sim_model sm;
    CU_ASSERT_EQUAL_FATAL(sim_model_init(&sm, s, m, NULL, NULL, NULL, &e), PL_OK);
    sim_reuse reuse;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&reuse, s, &e), PL_OK);
    reuse.hot_on = 0;
    reuse.first_on = 1;
    for (int q = 0; q < p; q++)
        for (int c = 0; c < SIM_FIRST_KINDS; c++)
            reuse.first[SIM_FIRST_KINDS * q + c] = reuse.rest[SIM_FIRST_KINDS * q + c] = c ? 0.1 : 1;
    const double r[4] = {0.01, 0.01, 0.01, 0.01};
    sm.reuse = &reuse;
    sm.rerun_next = r;
    sim_result res;
    CU_ASSERT_EQUAL_FATAL(sim_test_run_model(s, &sm, &res, &e), PL_OK);
    NEAR(res.iteration_time_s, (mb + p - 1) * (0.1 + 0.125 + 0.125 + 0.1 - (0.1 - 0.01) * 0.625));
    sim_result_free(&res);
    sm.rerun_next = NULL;
    sm.reuse = NULL;
    sim_reuse_free(&reuse);
    sim_model_free(&sm);
out:
    sched_free(s);
    cost_model_free(m);
}

/* Two ranks, 1F1B, one microbatch: F0 | transfer | F1 B1 | transfer | B0, makespan
 * 2 tF + 2 tB + 2 t. With 1e6 boundary bytes, intra link (1e9 B/s, 1 ms) t = 2 ms, inter link
 * (1e8 B/s, 2 ms) t = 12 ms: devices_per_node 2 (one node) vs 1 (two nodes) differ by 20 ms.
 * All-reduce: replicas 2-1 put rank 0 on devices 0-1 and rank 1 on device 2, so with 2 devices
 * per node stage 0 reduces on the intra link and the boundary crosses nodes. */
static void test_transfer_topology(void) {
    cost_model *m = open_model("uniform:layers=2,fwd_s=1,bwd_s=2,out_bytes=1e6,param_bytes=4e6");
    sched *s = gen_lowered("1f1b", 2, 1, 0, SCHED_RECOMPUTE_NONE);
    if (!m || !s) goto out;
    cost_hw hw;
    cost_hw_init(&hw);
    snprintf(hw.name, sizeof hw.name, "test");
    hw.intra_bandwidth_Bps = 1e9;
    hw.intra_latency_s = 1e-3;
    hw.inter_bandwidth_Bps = 1e8;
    hw.inter_latency_s = 2e-3;
    double mk[2];
    for (int dpn = 1; dpn <= 2; dpn++) {
        hw.devices_per_node = dpn;
        hw.nodes = 3 - dpn;
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(run_model(s, m, NULL, &hw, NULL, &r, NULL), PL_OK);
        mk[dpn - 1] = r.makespan_s;
        double t = dpn == 2 ? 1e-3 + 1e6 / 1e9 : 2e-3 + 1e6 / 1e8;
        NEAR(r.makespan_s, 2 * 1 + 2 * 2 + 2 * t);
        NEAR(r.comm_s, 2 * t);
        sim_result_free(&r);
    }
    NEAR(mk[0] - mk[1], 2 * ((2e-3 + 1e-2) - (1e-3 + 1e-3)));
    /* placement with replicas: 2-1 on 2 nodes of 2 devices */
    pl_err e;
    pl_err_clear(&e);
    cost_partition *part = cost_partition_even(2, 2, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(part);
    part->replicas[0] = 2;
    hw.devices_per_node = 2;
    hw.nodes = 2;
    sim_model sm;
    CU_ASSERT_EQUAL(sim_model_init(&sm, s, m, part, &hw, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(sm.devices, 3);
    CU_ASSERT_EQUAL(sm.device[0], 0);
    CU_ASSERT_EQUAL(sm.device[1], 2);
    sim_costs c = sim_model_costs(&sm);
    NEAR(c.transfer_s(c.ctx, 0, 1, 1000000), 2e-3 + 1e6 / 1e8);            /* device 0 -> 2: inter */
    NEAR(c.allreduce_s(c.ctx, 0, 2, 4000000), cost_allreduce_s(&hw, 0, 2, 4000000)); /* devices 0-1 */
    NEAR(c.allreduce_s(c.ctx, 0, 2, 4000000), 2.0 * 1 / 2 * 4e6 / 1e9 + 2 * 1e-3);
    CU_ASSERT_EQUAL(c.boundary_bytes(c.ctx, 0), 1000000);
    CU_ASSERT_EQUAL(c.param_bytes(c.ctx, 1), 4000000);
    sim_model_free(&sm);
    /* one device per node: the replica group spans nodes, so the inter link */
    hw.devices_per_node = 1;
    hw.nodes = 3;
    CU_ASSERT_EQUAL(sim_model_init(&sm, s, m, part, &hw, NULL, &e), PL_OK);
    c = sim_model_costs(&sm);
    NEAR(c.allreduce_s(c.ctx, 0, 2, 4000000), cost_allreduce_s(&hw, 1, 2, 4000000));
    sim_model_free(&sm);
    /* too few devices: a clear error */
    hw.nodes = 2;
    CU_ASSERT_EQUAL(sim_model_init(&sm, s, m, part, &hw, NULL, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "needs 3 devices"));
    sim_model_free(&sm);
    cost_partition_free(part);
out:
    cost_model_free(m);
    sched_free(s);
}

/* Peak memory per rank of the simulator against cost_schedule_memory for the same schedule,
 * model and opts (sim_config from sim_model_config): equal, byte for byte, for gpipe, 1f1b, zb-h1
 * (split backward) and interleaved (two chunks per rank), with and without full recomputation,
 * and for pipedream and 2bw with m = 8, 2 and 1 (weight versions that follow the schedule:
 * sched_versions), whose most versions at once agree too: both walk the rank's actions with the
 * one memory delta, cost_mem_delta, and the one version rule. (The rel 1 and 2 relations, an
 * offset and an upper bound, are kept for cases that would need them.) */
static void test_memory_matches_cost(void) {
    const char *specs[] = {"transformer:layers=6,hidden=256,heads=4,seq=128,vocab=1000,microbatch=2",
                           "uniform:layers=8,fwd_s=1,param_bytes=4000,stash_bytes=1000,out_bytes=100"};
    cost_hw hw;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(cost_hw_load(&hw, "h100", &e), PL_OK);
    for (size_t i = 0; i < 2; i++) {
        cost_model *m = open_model(specs[i]);
        if (!m) continue;
        cost_opts o;
        cost_opts_init(&o, m);
        struct { const char *kind; int v; sched_recompute rc; int rel, m; } cases[] = {
            {"gpipe", 0, SCHED_RECOMPUTE_NONE, 0, 8}, {"1f1b", 0, SCHED_RECOMPUTE_NONE, 0, 8},
            {"gpipe", 0, SCHED_RECOMPUTE_FULL, 0, 8}, {"1f1b", 0, SCHED_RECOMPUTE_FULL, 0, 8},
            {"zb-h1", 0, SCHED_RECOMPUTE_NONE, 0, 8}, {"interleaved", 2, SCHED_RECOMPUTE_NONE, 0, 8},
            {"zb-h1", 0, SCHED_RECOMPUTE_FULL, 0, 8}, {"interleaved", 2, SCHED_RECOMPUTE_FULL, 0, 8},
            {"pipedream", 0, SCHED_RECOMPUTE_NONE, 0, 8}, {"pipedream", 0, SCHED_RECOMPUTE_FULL, 0, 2},
            {"pipedream", 0, SCHED_RECOMPUTE_NONE, 0, 1}, {"2bw", 0, SCHED_RECOMPUTE_NONE, 0, 8},
            {"2bw", 0, SCHED_RECOMPUTE_FULL, 0, 2}, {"2bw", 0, SCHED_RECOMPUTE_NONE, 0, 1},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            int p = 4, mb = cases[k].m;
            sched *s = gen_lowered(cases[k].kind, p, mb, cases[k].v, cases[k].rc);
            if (!s) continue;
            sim_model sm;
            CU_ASSERT_EQUAL_FATAL(sim_model_init(&sm, s, m, NULL, &hw, &o, &e), PL_OK);
            cost_memory mem[4];
            CU_ASSERT_EQUAL_FATAL(cost_schedule_memory(s, sm.stage, m, &o, mem, &e), PL_OK);
            sim_result r;
            sim_config cfg;
            CU_ASSERT_EQUAL_FATAL(run_model(s, m, NULL, &hw, &o, &r, &cfg), PL_OK);
            CU_ASSERT_EQUAL(cfg.capacity_bytes, 80000000000LL);
            for (int q = 0; q < p; q++) {
                int64_t sim_b = r.rank[q].peak_bytes, cost_b = mem[q].total_bytes;
                CU_ASSERT_EQUAL(r.rank[q].peak_weight_versions, mem[q].versions);
                if (cases[k].rel == 0) {
                    CU_ASSERT_EQUAL(sim_b, cost_b);
                } else if (cases[k].rel == 1) {
                    CU_ASSERT_EQUAL(sim_b, cost_b - sm.stage[q].stash_recompute_bytes);
                } else {
                    CU_ASSERT(sim_b <= cost_b);
                    CU_ASSERT(sim_b > mem[q].weights_bytes + mem[q].grad_bytes + mem[q].optimizer_bytes);
                }
                if ((cases[k].rel == 0 && sim_b != cost_b))
                    fprintf(stderr, "%s %s rank %d: sim %lld cost %lld\n", specs[i], cases[k].kind, q, (long long)sim_b,
                            (long long)cost_b);
            }
            sim_result_free(&r);
            sim_model_free(&sm);
            sched_free(s);
        }
        cost_model_free(m);
    }
}

/* A partition whose stage count differs from the schedule's, or that does not cover the model,
 * is refused with a message saying so; an even split needs at least one layer per stage. */
static void test_partition_errors(void) {
    cost_model *m = open_model("uniform:layers=8,fwd_s=1");
    sched *s = gen_lowered("1f1b", 4, 4, 0, SCHED_RECOMPUTE_NONE);
    sched *s16 = gen_lowered("1f1b", 16, 4, 0, SCHED_RECOMPUTE_NONE);
    if (!m || !s || !s16) goto out;
    pl_err e;
    pl_err_clear(&e);
    cost_partition *p3 = cost_partition_parse("0,2,5,8", 8, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p3);
    sim_model sm;
    CU_ASSERT_EQUAL(sim_model_init(&sm, s, m, p3, NULL, NULL, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "the partition has 3 stages but the schedule (1f1b, 4 ranks) has 4 stages"));
    sim_model_free(&sm);
    cost_partition_free(p3);
    cost_model *m6 = open_model("uniform:layers=6,fwd_s=1");
    cost_partition *p4 = cost_partition_parse("0,2,4,6,8", 8, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p4);
    if (m6) {
        CU_ASSERT_EQUAL(sim_model_init(&sm, s, m6, p4, NULL, NULL, &e), PL_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "6 layers"));
        sim_model_free(&sm);
    }
    cost_partition_free(p4);
    cost_model_free(m6);
    CU_ASSERT_EQUAL(sim_model_init(&sm, s16, m, NULL, NULL, NULL, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cannot split 8 layers into 16"));
    sim_model_free(&sm);
out:
    cost_model_free(m);
    sched_free(s);
    sched_free(s16);
}

/* The balanced split of a transformer (an embedding without compute, a heavy head) has a
 * slowest stage no slower than the even split's, and covers the layers in p stages. */
static void test_balance(void) {
    cost_model *m = open_model("transformer:layers=8,hidden=256,heads=4,seq=128,vocab=30000,microbatch=1");
    if (!m) return;
    cost_hw hw;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(cost_hw_load(&hw, "h100", &e), PL_OK);
    cost_opts o;
    cost_opts_init(&o, m);
    cost_partition *bal = sim_model_balance(m, &hw, &o, 4, &e);
    cost_partition *even = cost_partition_even(m->n, 4, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bal);
    CU_ASSERT_PTR_NOT_NULL_FATAL(even);
    CU_ASSERT_EQUAL(cost_partition_check(bal, m->n, &e), PL_OK);
    double worst[2] = {0, 0};
    const cost_partition *ps[2] = {bal, even};
    for (int k = 0; k < 2; k++)
        for (int q = 0; q < 4; q++) {
            cost_stage st;
            CU_ASSERT_EQUAL(cost_stage_eval(m, ps[k]->bound[q], ps[k]->bound[q + 1], &hw, &o, &st, &e), PL_OK);
            if (st.f_s + st.b_s > worst[k]) worst[k] = st.f_s + st.b_s;
        }
    CU_ASSERT(worst[0] <= worst[1] * (1 + 1e-12));
    CU_ASSERT(sim_model_balance(m, &hw, &o, m->n + 1, &e) == NULL);
    cost_partition_free(bal);
    cost_partition_free(even);
    cost_model_free(m);
}

/* Runs `pipelab simulate ARGS`; returns the exit status and leaves the output in *out. */
static int simulate(const char *args, char **out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s simulate %s", PIPELAB_BIN, args);
    int rc = pl_test_run(cmd, out);
    return rc;
}

/* The CLI: a transformer on an H100 node runs and prints sane numbers; a partition file with the
 * wrong stage count, an unknown --set key and a missing model file exit 1 with a message; mixing
 * the flag-driven costs with --model is a usage error (2). */
static void test_cli_model(void) {
    const char *tm = "--model transformer:layers=8,hidden=1024,heads=16,seq=1024,vocab=50257,microbatch=1";
    char args[2048];
    char *out = NULL;
    snprintf(args, sizeof args, "--kind 1f1b --ranks 4 --microbatches 8 %s --hardware h100 --no-db", tm);
    int rc = simulate(args, &out);
    if (rc != 0) fprintf(stderr, "\n%s -> %d\n%s\n", args, rc, out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "on h100 (1 x 8 devices)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "partition          even: bounds 0,3,6,8,10"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "capacity 80000000000: fits"));
    const char *it = strstr(out, "iteration_time_s");
    double t = it ? strtod(it + strlen("iteration_time_s"), NULL) : 0;
    CU_ASSERT(t > 1e-4 && t < 10); /* milliseconds per iteration, not seconds or nanoseconds */
    free(out);
    /* JSON records the model, hardware and partition */
    snprintf(args, sizeof args, "--kind 1f1b --ranks 4 --microbatches 8 %s --hardware h100 --set topology.nodes=2 "
             "--split 0,2,5,8,10 --format json --no-db", tm);
    rc = simulate(args, &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"costs\":\"model\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"set\":[\"topology.nodes=2\"]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"source\":\"split\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"bounds\":[0,2,5,8,10]"));
    free(out);
    /* a partition file of 3 stages against a 4-stage schedule */
    char *dir = pl_test_tmpdir();
    char *pf = pl_test_path(dir, "p3.part");
    FILE *f = fopen(pf, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("pipelab-partition 1\nmethod balance\nlayers 10\nworkers 3\nstage 0: layers 0-3 replicas 1\n"
          "stage 1: layers 4-6 replicas 1\nstage 2: layers 7-9 replicas 1\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--kind 1f1b --ranks 4 --microbatches 8 %s --hardware h100 --partition %s --no-db", tm, pf);
    rc = simulate(args, &out);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "the partition has 3 stages but the schedule (1f1b, 4 ranks) has 4 stages"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, pf));
    free(out);
    /* the same file fits a 3-rank schedule */
    snprintf(args, sizeof args, "--kind 1f1b --ranks 3 --microbatches 8 %s --hardware h100 --partition %s --no-db", tm, pf);
    rc = simulate(args, &out);
    if (rc != 0) fprintf(stderr, "\n%s -> %d\n%s\n", args, rc, out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "bounds 0,4,7,10"));
    free(out);
    remove(pf);
    free(pf);
    remove(dir);
    free(dir);
    struct { const char *args; int rc; const char *msg; } cases[] = {
        {"--hardware h100 --set device.nosuch=1", 1, "unknown hardware key 'device.nosuch'"},
        {"--hardware nosuch-machine", 1, "nosuch-machine"},
        {"--tf 2", 2, "--tf is a flag-driven cost"},
        {"--split 0,5,10", 1, "the partition has 2 stages"},
        {"--split 0,5,12,13,14", 1, "partition '0,5,12,13,14'"},
        {"--balance --split 0,2,4,6,10", 2, "at most one"},
        {"--precision fp8", 2, "--precision"},
        {"--hardware h100 --capacity 1000 --fail-on-oom", 1, "out of memory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "--kind 1f1b --ranks 4 --microbatches 8 %s %s --no-db", tm, cases[i].args);
        rc = simulate(args, &out);
        if (rc != cases[i].rc || !strstr(out, cases[i].msg)) fprintf(stderr, "\n%s -> %d\n%s\n", args, rc, out);
        CU_ASSERT_EQUAL(rc, cases[i].rc);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, cases[i].msg));
        free(out);
    }
    struct { const char *args; int rc; const char *msg; } more[] = {
        {"--model /nonexistent/profile.csv", 1, "/nonexistent/profile.csv"},
        {"--hardware h100", 2, "--hardware needs --model"},
        {"--set device.efficiency=0.4", 2, "--set needs --model"},
        {"--model uniform:layers=8,fwd_s=1e-3,bwd_s=2e-3 --set device.efficiency=0.4", 2, "--set needs --hardware"},
        {"--model uniform:layers=8,fwd_s=1e-3,bwd_s=2e-3 --balance", 0, "partition          balance: bounds 0,2,4,6,8"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        snprintf(args, sizeof args, "--kind 1f1b --ranks 4 --microbatches 8 %s --no-db", more[i].args);
        rc = simulate(args, &out);
        if (rc != more[i].rc || !strstr(out, more[i].msg)) fprintf(stderr, "\n%s -> %d\n%s\n", args, rc, out);
        CU_ASSERT_EQUAL(rc, more[i].rc);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, more[i].msg));
        free(out);
    }
}

/* Reads the row "RANK CLASS PREDICTED MEASURED" of `pipelab compare --actions` output for rank
 * r and class name; returns 1 and the two numbers (ms per pass), 0 when absent. */
static int actions_row(const char *out, int r, const char *name, double *pred, double *meas) {
    char key[64];
    snprintf(key, sizeof key, "\n%4d  %-10s ", r, name);
    const char *p = strstr(out, key);
    if (!p) return 0;
    char *end;
    *pred = strtod(p + strlen(key), &end);
    *meas = strtod(end, NULL);
    return 1;
}

/* `pipelab run --trace` stores the predicted timeline beside the measured one, and `pipelab
 * compare --actions` breaks the pair down per rank: the predicted time per pass of each class is
 * the profile's per-block time x blocks x microbatches (closed form for a profile file with
 * known times), and the measured one is positive. Skipped when the build has no executor. */
static void test_cli_compare_actions(void) {
    char *dir = pl_test_tmpdir();
    char *csv = pl_test_path(dir, "known.csv");
    char *db = pl_test_path(dir, "actions.db");
    FILE *f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    /* the executor's block at width 32, ffn 128, microbatch 4: F 1 ms, I 0.75 ms, W 0.5 ms per
     * block, STEP 0.25 ms per block */
    fputs("# pipelab-exec concurrency=2 step_s=0.00025\n"
          "#@ microbatch_size=4 input_bytes=512 dtype_bytes=4 name=mlp_h32_f128_L4\n"
          "layer,name,fwd_s,bwd_in_s,bwd_w_s,fwd_flops,bwd_in_flops,bwd_w_flops,param_bytes,out_bytes,stash_bytes,"
          "stash_recompute_bytes,w_stash_bytes\n", f);
    for (int k = 0; k < 4; k++)
        fprintf(f, "%d,block%d,0.001,0.00075,0.0005,65536,65536,65536,33408,512,4608,,4608\n", k, k);
    fclose(f);
    char cmd[4096];
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 --width 32 --depth 4 --microbatch-size 4 "
             "--warmup 1 --timed 3 --profile %s --trace --tag act --db %s", PIPELAB_BIN, csv, db);
    int rc = pl_test_run(cmd, &out);
    if (rc != 0 && out && strstr(out, "no executor")) {
        pl_test_skip("this build has no executor");
        free(out);
        goto done;
    }
    if (rc != 0) fprintf(stderr, "\n%s -> %d\n%s\n", cmd, rc, out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag act --actions", PIPELAB_BIN, db);
    rc = pl_test_run(cmd, &out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NULL(strstr(out, "without both timelines"));
    /* 2 blocks per stage, 4 microbatches: F 8 ms, B 4 x 2 x 1.25 = 10 ms, STEP 2 x 0.25 = 0.5 ms */
    const struct { const char *name; double ms; } want[] = {{"F", 8.0}, {"B", 10.0}, {"STEP", 0.5}};
    for (int r = 0; r < 2; r++)
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
            double pred = -1, meas = -1;
            CU_ASSERT_FATAL(actions_row(out, r, want[k].name, &pred, &meas));
            CU_ASSERT_DOUBLE_EQUAL(pred, want[k].ms, 1e-3);
            CU_ASSERT(meas > 0);
        }
    /* rank 0's predicted span is the whole iteration, (m + p - 1)(F + B) of a stage plus its
     * STEP: 5 x 4.5 + 0.5 = 23 ms (free links) */
    double pred = -1, meas = -1;
    CU_ASSERT(actions_row(out, 0, "span", &pred, &meas));
    CU_ASSERT_DOUBLE_EQUAL(pred, 23.0, 1e-3);
    CU_ASSERT(meas > 0);
    free(out);
    /* --actions prints a table only */
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag act --actions --format csv", PIPELAB_BIN, db);
    rc = pl_test_run(cmd, &out);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--actions prints a table"));
    free(out);
done:
    remove(csv);
    remove(db);
    char side[4200];
    snprintf(side, sizeof side, "%s-wal", db);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", db);
    remove(side);
    remove(dir);
    free(csv);
    free(db);
    free(dir);
}

/* Registers the suite (called from test_sim.c's pl_test_register). */
void sim_model_tests_register(void) {
    static const pl_test_case cases[] = {
        {"uniform model equals flag costs", test_uniform_equals_basic},
        {"full recomputation: the rerun less what it saves the next I", test_rerun_next},
        {"full recomputation: the next I in place of a reuse term's factor", test_rerun_next_terms},
        {"transfer topology", test_transfer_topology},
        {"memory matches cost_schedule_memory", test_memory_matches_cost},
        {"partition errors", test_partition_errors},
        {"balanced split", test_balance},
        {"cli --model", test_cli_model},
        {"run --trace and compare --actions", test_cli_compare_actions},
        {NULL, NULL},
    };
    pl_test_suite("sim_model", cases);
}
