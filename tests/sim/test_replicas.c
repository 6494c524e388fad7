/* test_replicas.c: replicated stages (PipeDream's 1F1B-RR): a replica group shares its stage's
 * compute (microbatch k on replica k mod n), closed form of a balanced replicated pipeline,
 * replicas all 1 bit-identical to no replicas, and the simulator against PipeDream's planner. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"
#include "sim.h"

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-9 * (1.0 + fabs((double)(b))))

/* Returns the lowered kind on p ranks, m microbatches, `iters` iterations, generated with the
 * replicas' warm-up (rep NULL: sched_generate's). */
static sched *gen_lowered(const char *kind, int p, int m, int iters, const int *rep) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, 0, iters, SCHED_RECOMPUTE_NONE};
    sched *s = sched_gen_replicated(kind, &o, rep, NULL, &e);
    if (!s || sched_validate(s, &e) != PL_OK) {
        fprintf(stderr, "generate %s: %s\n", kind, e.msg);
        CU_FAIL("generate");
        sched_free(s);
        return NULL;
    }
    sched *l = sched_lower(s, &e);
    sched_free(s);
    if (!l) fprintf(stderr, "lower %s: %s\n", kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

/* Simulates s on model m with partition part, hardware hw (NULL: free links) and options o
 * (NULL: the model's) as sim_model_config configures it: sm and r filled (free both); returns
 * the costs the run used. A failure ends the test. */
static sim_costs run_on_model(const sched *s, const cost_model *m, const cost_partition *part, const cost_hw *hw,
                              const cost_opts *o, sim_model *sm, sim_result *r) {
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(sim_model_init(sm, s, m, part, hw, o, &e), PL_OK);
    sim_costs c = sim_model_costs(sm);
    sim_config cfg;
    sim_config_init(&cfg);
    sim_model_config(sm, &cfg);
    CU_ASSERT_EQUAL_FATAL(sim_run(s, &c, &cfg, r, &e), PL_OK);
    return c;
}

/* Fills bc with per-stage costs sc: stage q has forward f[q] and backward b[q], no
 * communication (bc->stage points at the caller's array; not freed). */
static void two_stage_costs(sim_basic *bc, sim_stage_cost *sc, int stages, const double *f, const double *b) {
    sim_basic_init(bc);
    for (int q = 0; q < stages; q++) sc[q] = (sim_stage_cost){f[q], b[q], -1, -1, -1, -1, -1, -1};
    bc->stages = stages;
    bc->stage = sc;
}

/* Runs s with per-stage costs (f, b) and replicas rep (NULL: none); returns PL_OK or the error. */
static int run_costs(const sched *s, const double *f, const double *b, const int *rep, int trace, sim_result *r) {
    sim_basic bc;
    sim_stage_cost sc[8];
    two_stage_costs(&bc, sc, s->stages, f, b);
    sim_costs c = sim_basic_costs(&bc);
    sim_config cfg;
    sim_config_init(&cfg);
    cfg.replicas = rep;
    cfg.record_trace = trace;
    pl_err e;
    pl_err_clear(&e);
    int rc = sim_run(s, &c, &cfg, r, &e);
    if (rc != PL_OK) fprintf(stderr, "sim_run: %s\n", e.msg);
    return rc;
}

/* Two replicated boundaries in a row (3-2-1: stage 0 on 3 replicas feeds stage 1 on 2, which
 * feeds stage 1 unreplicated), as a planner's 12-2-1-1 gives: link setup must cover every
 * replica pair of both boundaries (it once read past its table here: a crash, or a heap overflow
 * under ASan). Balanced groups (stage q costs 3-q per replica, so F/n = 1 for each group)
 * and no communication: the unreplicated last stage bounds every iteration from below by
 * m (f + b) of its own, and the bubble window holds every rank's work. */
static void test_two_replicated_boundaries(void) {
    const int m = 12, rep[3] = {3, 2, 1};
    const double f[3] = {3, 2, 1}, b[3] = {6, 4, 2};
    sched *s = gen_lowered("pipedream", 3, m, 8, rep);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_result r;
    memset(&r, 0, sizeof r);
    CU_ASSERT_EQUAL_FATAL(run_costs(s, f, b, rep, 0, &r), PL_OK);
    CU_ASSERT(r.iteration_time_s >= m * (f[2] + b[2]) - 1e-9);
    CU_ASSERT(r.iteration_time_s < m * (f[0] + b[0])); /* stage 0's group shares its work */
    for (int q = 0; q < s->ranks; q++) CU_ASSERT(r.rank[q].busy_s > 0);
    sim_result_free(&r);
    sched_free(s);
}

/* Closed form. Two stages, pipedream (1F1B, weight stashing), no communication; stage 1 costs
 * F = f, B = b (b >= f); stage 0 costs 2f, 2b and is replicated 2 ways, so its group has stage
 * 1's throughput. PipeDream's warm-up (workers 3): replica j of stage 0 runs
 * F_j F_{j+2} B_j F_{j+4} B_{j+2} ..., stage 1 runs F_0 B_0 F_1 B_1 ...; a round of stage 0's
 * all-reduce (zero time here) pairs B_2i and B_2i+1, and replica j's next forward waits for its
 * step, i.e. for that round. Claim: stage 1 never waits, F_k starting at 2f + k(f+b); so B_k
 * ends (stage 1's gradient of k arrives) at t_k = 2f + (k+1)(f+b).
 *   Start: both replicas' first forwards end at 2f, the second at 4f <= t_0 = 3f + b (b >= f),
 *   so round 0 ends at c_0 = max(t_0, 4f) ... replica 1's B_1 starts at t_1 = 4f + 2b >= 4f:
 *   c_0 = t_1 + 2b (B_0 ended earlier). Both replicas then run their next forward, ready at
 *   c_0 + 2f = 2f + 4(f+b) = stage 1's start of F_4 (F_2, F_3 were ready at 4f).
 *   Induction: after round i (B_2i, B_2i+1) ends at c_i = t_{2i+1} + 2b, both replicas are free
 *   at c_i + 2f = t_{2i+3}; the gradients of round i+1 arrive at t_{2i+2} < t_{2i+3} and
 *   t_{2i+3}, so c_{i+1} = t_{2i+3} + 2b, and the next forwards are ready at c_{i+1} + 2f =
 *   2f + (2i+6)(f+b), exactly when stage 1 starts F_{2i+6} (F_{2i+7} is needed f+b later).
 * Stage 0's last action of iteration i is B of microbatch (i+1)m - 1 (m even), ending at
 * c = t_{(i+1)m-1} + 2b = 2f + (i+1)m(f+b) + 2b, after stage 1's. So every iteration takes
 * exactly m(f+b): a balanced two-stage pipeline of stage 1's cost; unreplicated, stage 0 is
 * the bottleneck at 2m(f+b). */
static void test_closed_form_two_stages(void) {
    const double fb[][2] = {{1, 2}, {1.5, 3.25}, {0.5, 0.5}};
    for (size_t k = 0; k < sizeof fb / sizeof fb[0]; k++) {
        double f = fb[k][0], b = fb[k][1];
        const int m = 4, iters = 6;
        const double F[2] = {2 * f, f}, B[2] = {2 * b, b};
        const int rep[2] = {2, 1};
        sched *s = gen_lowered("pipedream", 2, m, iters, rep);
        if (!s) return;
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(run_costs(s, F, B, rep, 0, &r), PL_OK);
        CU_ASSERT_EQUAL(r.iterations, iters);
        for (int i = 0; i < iters; i++) NEAR(r.iter_end_s[i], 2 * f + (i + 1) * m * (f + b) + 2 * b);
        NEAR(r.iteration_time_s, m * (f + b));
        NEAR(r.throughput, 1 / (f + b));
        /* stage 1 never idles in the window, each replica of stage 0 neither */
        CU_ASSERT_EQUAL(r.steady_cycle, 1); /* lcm(2 stages, 2 replicas) = 2 divides m */
        CU_ASSERT(r.steady_last >= 1 && r.steady_last <= iters - 2);
        NEAR(r.rank[1].busy_s, r.steady_last * m * (f + b)); /* the window's iterations 1..L */
        NEAR(r.rank[0].busy_s, r.steady_last * m * (f + b));
        NEAR(r.bubble_fraction, 0);
        /* the balanced two-stage pipeline of stage 1's cost has the same iteration time */
        const double F1[2] = {f, f}, B1[2] = {b, b};
        sched *u = gen_lowered("pipedream", 2, m, iters, NULL);
        sim_result r1;
        CU_ASSERT_EQUAL_FATAL(run_costs(u, F1, B1, NULL, 0, &r1), PL_OK);
        NEAR(r1.iteration_time_s, r.iteration_time_s);
        /* unreplicated stage 0 (the old model charged replicas nothing but the all-reduce, so it
         * gave this for the replicated run too): 2m(f+b) per iteration between the fill and the
         * last iteration's drain (whose backwards no longer wait behind forwards) */
        sim_result r2;
        CU_ASSERT_EQUAL_FATAL(run_costs(u, F, B, NULL, 0, &r2), PL_OK);
        for (int i = 0; i + 2 < iters; i++) NEAR(r2.iter_end_s[i + 1] - r2.iter_end_s[i], 2 * m * (f + b));
        CU_ASSERT(r2.iteration_time_s > 1.9 * r.iteration_time_s);
        /* memory: each replica stashes its own microbatches, PipeDream's per-replica NOAM 2 */
        CU_ASSERT_EQUAL(r.rank[0].peak_stash_mbs, 2);
        CU_ASSERT_EQUAL(r.rank[1].peak_stash_mbs, 1);
        sim_result_free(&r);
        sim_result_free(&r1);
        sim_result_free(&r2);
        sched_free(s);
        sched_free(u);
    }
}

/* 3-1 against 1-1: stage 0 three times stage 1's cost. Replicated 3 ways its group keeps up with
 * stage 1, so an iteration takes m(f+b), stage 1's time, three times less than unreplicated
 * (3m(f+b), between fill and drain). The old engine gave 3-1 the 1-1 time. */
static void test_three_one_vs_one_one(void) {
    const double f = 1, b = 2, F[2] = {3 * f, f}, B[2] = {3 * b, b};
    const int m = 6, iters = 12, rep[2] = {3, 1};
    sched *s = gen_lowered("pipedream", 2, m, iters, rep);
    sched *u = gen_lowered("pipedream", 2, m, iters, NULL);
    if (!s || !u) {
        sched_free(s);
        sched_free(u);
        return;
    }
    sim_result r3, r1;
    CU_ASSERT_EQUAL_FATAL(run_costs(s, F, B, rep, 0, &r3), PL_OK);
    CU_ASSERT_EQUAL_FATAL(run_costs(u, F, B, NULL, 0, &r1), PL_OK);
    for (int i = 0; i + 2 < iters; i++) {
        NEAR(r1.iter_end_s[i + 1] - r1.iter_end_s[i], 3 * m * (f + b));
        NEAR(r3.iter_end_s[i + 1] - r3.iter_end_s[i], m * (f + b));
    }
    NEAR(r3.throughput, 1 / (f + b));
    CU_ASSERT(r3.throughput > 2.9 * r1.throughput);
    fprintf(stderr, "\n  3-1: %.6f samples/s, 1-1: %.6f samples/s", r3.throughput, r1.throughput);
    sim_result_free(&r3);
    sim_result_free(&r1);
    sched_free(s);
    sched_free(u);
}

/* The flag-driven all-reduce of a replicated stage (ring, 2(n-1)/n P/B + 2(n-1) latency) runs
 * once per round of n microbatches and is counted once per collective in reduce_s; with a
 * flush schedule every replica joins the one REDUCE_GRAD of the iteration. */
static void test_allreduce_rounds(void) {
    const int rep[2] = {2, 1};
    sched *s = gen_lowered("pipedream", 2, 4, 2, rep);
    if (!s) return;
    sim_basic bc;
    sim_basic_init(&bc);
    bc.param_bytes = 1000;
    bc.bandwidth_Bps = 1000;
    sim_costs c = sim_basic_costs(&bc);
    sim_config cfg;
    sim_config_init(&cfg);
    cfg.replicas = rep;
    cfg.record_trace = 1;
    sim_result r;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(sim_run(s, &c, &cfg, &r, &e), PL_OK);
    double ar = 2.0 * 1 / 2 * 1000 / 1000; /* n = 2 */
    NEAR(r.rank[0].reduce_s, 4 * ar);     /* 8 microbatches, 4 rounds */
    NEAR(r.rank[1].reduce_s, 0);
    /* the trace of each REDUCE_GRAD of stage 0 shows its round's collective: the pair of a round
     * has the same times, and the collective takes ar */
    int seen = 0;
    double st[8] = {0}, en[8] = {0};
    for (size_t i = 0; i < s->rank[0].n; i++) {
        const sched_action *a = &s->rank[0].acts[i];
        if (a->kind != SCHED_REDUCE_GRAD) continue;
        st[a->mb] = r.trace[0][i].start_s;
        en[a->mb] = r.trace[0][i].end_s;
        seen++;
    }
    CU_ASSERT_EQUAL(seen, 8);
    for (int k = 0; k < 8; k += 2) {
        NEAR(st[k], st[k + 1]);
        NEAR(en[k] - st[k], ar);
    }
    sim_result_free(&r);
    sched_free(s);
    /* 1f1b (flush): one REDUCE_GRAD per iteration on every replica, one collective */
    s = gen_lowered("1f1b", 2, 4, 3, rep);
    if (!s) return;
    cfg.record_trace = 0;
    CU_ASSERT_EQUAL_FATAL(sim_run(s, &c, &cfg, &r, &e), PL_OK);
    NEAR(r.rank[0].reduce_s, 3 * ar);
    sim_result_free(&r);
    sched_free(s);
}

/* Replicas all 1 give bit-identical results to no replicas (both engines: the flow engine
 * serves the flush kinds, the heap engine pipedream, 2bw and the stochastic run). */
static void test_ones_bit_identical(void) {
    const char *kinds[] = {"1f1b", "gpipe", "pipedream", "2bw", "zb-h1", "interleaved"};
    int ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        pl_err e;
        pl_err_clear(&e);
        int v = strcmp(kinds[k], "interleaved") == 0 ? 2 : 0;
        sched_gen_opts o = {4, 8, v, 0, SCHED_RECOMPUTE_NONE};
        sched *g = sched_generate(kinds[k], &o, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        sched *s = sched_lower(g, &e);
        sched_free(g);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        for (int cv = 0; cv < 2; cv++) {
            sim_basic bc;
            sim_basic_init(&bc);
            bc.tf_s = 1.25;
            bc.tb_s = 2.5;
            bc.param_bytes = 4000;
            bc.stash_bytes = 100;
            bc.bytes = 500;
            bc.bandwidth_Bps = 1000;
            bc.latency_s = 0.01;
            sim_costs c = sim_basic_costs(&bc);
            sim_config cfg;
            sim_config_init(&cfg);
            cfg.record_trace = 1;
            cfg.cv = cv ? 0.2 : 0;
            cfg.seed = 7;
            sim_result a, b;
            CU_ASSERT_EQUAL_FATAL(sim_run(s, &c, &cfg, &a, &e), PL_OK);
            cfg.replicas = ones;
            CU_ASSERT_EQUAL_FATAL(sim_run(s, &c, &cfg, &b, &e), PL_OK);
            CU_ASSERT(a.makespan_s == b.makespan_s && a.iteration_time_s == b.iteration_time_s);
            CU_ASSERT(a.bubble_fraction == b.bubble_fraction && a.comm_s == b.comm_s && a.events == b.events);
            CU_ASSERT(memcmp(a.rank, b.rank, (size_t)s->ranks * sizeof *a.rank) == 0);
            for (int q = 0; q < s->ranks; q++)
                CU_ASSERT(memcmp(a.trace[q], b.trace[q], s->rank[q].n * sizeof(sim_slot)) == 0);
            sim_result_free(&a);
            sim_result_free(&b);
        }
        sched_free(s);
    }
    /* the replicated generator with all ones is sched_generate's schedule */
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {4, 8, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *a = sched_generate("pipedream", &o, &e), *b = sched_gen_replicated("pipedream", &o, ones, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (int q = 0; q < 4; q++) {
        CU_ASSERT_EQUAL(a->rank[q].n, b->rank[q].n);
        if (a->rank[q].n == b->rank[q].n)
            CU_ASSERT(memcmp(a->rank[q].acts, b->rank[q].acts, a->rank[q].n * sizeof(sched_action)) == 0);
    }
    sched_free(a);
    sched_free(b);
}

/* `pipelab partition` and `pipelab simulate` agree: VGG-16 on cluster-a, 16 workers. The planner
 * (cost_models/partition.c) predicts the time per minibatch as the slowest of (stage compute F+B
 * + its all-reduce) / replicas and the cut transfers 2 (latency + bytes/B) / min(r1, r2). The
 * simulator runs PipeDream's 1F1B-RR on the chosen 14-2 partition and measures the steady state
 * over the middle iterations (the steady-state figure of sim_result also counts the fill's
 * head start and the last iteration's drain: -2% here over 40 iterations). The two cost models
 * differ in two places, both outside the engine:
 *  - stage 0's compute: the simulator's stage costs (cost_partition_eval) count the graph's
 *    Input pseudo-node (17.97 ms of data loading per minibatch), which the planner zeroes as
 *    PipeDream's optimizer does: +1.28 ms per minibatch over 14 replicas (+2.7%);
 *  - the all-reduce: the planner's is hierarchical across servers (a ring over the replicas of
 *    a server on the intra link plus one over the servers on the inter link), the simulator's
 *    (cost_allreduce_s) a flat ring over the whole group on the inter link once the group spans
 *    two servers: 46.7 against 39.9 ms per round, +0.49 ms per minibatch (+1.0%).
 * Beyond them the engine adds the optimizer step and the collective's barrier (replicas that
 * finish a round early wait for the others). So the simulator is checked against the planner's
 * formula evaluated with the simulator's own stage costs (within 1%), and that formula against
 * the planner's prediction, the difference being exactly the two items above. */
static void test_vgg16_partition_vs_simulate(void) {
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
    cost_part_topo t;
    cost_part_topo_from_hw(&hw, &t);
    cost_pipedream_opts po = {.workers = 16, .allreduce = COST_ALLREDUCE_RING};
    cost_partition *part = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, m->n, &t, &po, &part, &e), PL_OK);
    const cost_partition_pred *p = part->pred;
    CU_ASSERT_EQUAL_FATAL(part->stages, 2);
    const int mb = 16, iters = 40;
    sched *s = gen_lowered("pipedream", part->stages, mb, iters, part->replicas);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_model sm;
    sim_result r;
    sim_costs c = run_on_model(s, m, part, &hw, NULL, &sm, &r);
    double per_mb = (r.iter_end_s[30] - r.iter_end_s[10]) / (20.0 * mb);
    /* the planner's formula with the simulator's stage costs and all-reduce */
    double slowest = 0, explained = 0;
    for (int q = 0; q < part->stages; q++) {
        int n = part->replicas[q];
        double ar = c.allreduce_s(c.ctx, q, n, sm.stage[q].param_bytes);
        double tq = (sm.stage[q].f_s + sm.stage[q].b_s + ar) / n;
        /* the planner's stage time plus the two differences (Input node, all-reduce) */
        const cost_layer *L0 = &m->layer[0];
        double input_s = part->bound[q] == 0 && y[0].time_s == 0
                             ? L0->fwd_s + (L0->bwd_in_s > 0 ? L0->bwd_in_s : 0) + (L0->bwd_w_s > 0 ? L0->bwd_w_s : 0)
                             : 0;
        double eq = p->stage[q].time_s + (input_s + ar - p->stage[q].allreduce_s) / n;
        NEAR(tq, eq);
        if (tq > slowest) {
            slowest = tq;
            explained = eq;
        }
    }
    CU_ASSERT(explained > p->bottleneck_s);
    fprintf(stderr, "\n  vgg16 cluster-a 16: planner %.3f ms, planner's formula with the simulator's stage costs "
            "%.3f ms, simulator %.3f ms per minibatch (%+.2f%%)",
            p->bottleneck_s * 1e3, slowest * 1e3, per_mb * 1e3, 100 * (per_mb / p->bottleneck_s - 1));
    CU_ASSERT(per_mb >= slowest * (1 - 1e-9));
    CU_ASSERT(per_mb < slowest * 1.01);
    CU_ASSERT(fabs(per_mb / p->bottleneck_s - 1) < 0.05);
    sim_result_free(&r);
    sim_model_free(&sm);
    sched_free(s);
    cost_partition_free(part);
    free(y);
    cost_model_free(m);
}

/* The simulator's per-rank peak memory of replicated configurations against the cost model's
 * replica-aware memory (cost_schedule_memory_replicas: each replica holds the rank's weights,
 * gradients, optimizer state and its own microbatches' stashes), byte for byte: 1F1B-RR 2-1 and
 * 1-2, gpipe 2-2 and pipedream 2-1 (weight versions of each replica's own microbatches in
 * flight); and a replicated first stage predicts less stash than the same rank unreplicated (all
 * microbatches on one device). */
static void test_replicated_memory_vs_cost(void) {
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open("uniform:layers=4,fwd_s=1,param_bytes=4000,stash_bytes=1000,out_bytes=100", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    cost_opts o;
    cost_opts_init(&o, m);
    o.optimizer_bytes_per_param = 8;
    static const int r21[] = {2, 1}, r12[] = {1, 2}, r22[] = {2, 2};
    struct { const char *kind; const int *rep; int iters; } cases[] = {
        {"1f1b", r21, 0}, {"1f1b", r12, 0}, {"gpipe", r22, 0}, {"pipedream", r21, 4}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sched *s = gen_lowered(cases[k].kind, 2, 8, cases[k].iters, cases[k].rep);
        if (!s) continue;
        cost_partition *part = cost_partition_even(m->n, 2, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(part);
        for (int q = 0; q < 2; q++) part->replicas[q] = cases[k].rep[q];
        sim_model sm;
        sim_result r;
        run_on_model(s, m, part, NULL, &o, &sm, &r);
        cost_memory mem[2], whole[2];
        CU_ASSERT_EQUAL_FATAL(cost_schedule_memory_replicas(s, sm.stage, part->replicas, m, &o, mem, &e), PL_OK);
        CU_ASSERT_EQUAL_FATAL(cost_schedule_memory(s, sm.stage, m, &o, whole, &e), PL_OK);
        for (int q = 0; q < 2; q++) {
            if (r.rank[q].peak_bytes != mem[q].total_bytes)
                fprintf(stderr, "%s %d-%d rank %d: sim %lld cost %lld (without replicas %lld)\n", cases[k].kind,
                        cases[k].rep[0], cases[k].rep[1], q, (long long)r.rank[q].peak_bytes, (long long)mem[q].total_bytes,
                        (long long)whole[q].total_bytes);
            CU_ASSERT_EQUAL(r.rank[q].peak_bytes, mem[q].total_bytes);
            /* fewer stashes on a replica, but for the last stage, which 1F1B keeps at one anyway */
            CU_ASSERT(mem[q].activation_bytes <= whole[q].activation_bytes);
            if (cases[k].rep[q] > 1 && q == 0) CU_ASSERT(mem[q].activation_bytes < whole[q].activation_bytes);
        }
        sim_result_free(&r);
        sim_model_free(&sm);
        cost_partition_free(part);
        sched_free(s);
    }
    cost_model_free(m);
}

/* Registers the suite (called from test_sim.c's pl_test_register). */
void sim_replicas_tests_register(void) {
    static const pl_test_case cases[] = {
        {"closed form: 2-1 balanced", test_closed_form_two_stages},
        {"3-1 vs 1-1 throughput", test_three_one_vs_one_one},
        {"two replicated boundaries in a row (3-2-1)", test_two_replicated_boundaries},
        {"all-reduce rounds", test_allreduce_rounds},
        {"replicas 1 bit-identical", test_ones_bit_identical},
        {"vgg16: partition vs simulate", test_vgg16_partition_vs_simulate},
        {"replicated memory: simulator = cost model", test_replicated_memory_vs_cost},
        {NULL, NULL},
    };
    pl_test_suite("sim_replicas", cases);
}
