/* test_layout.c: a GPU-cluster layout run (sim_layout.c) against the pipeline-only simulation of
 * the same layer table: with T = D = 1 they agree exactly once the plain run's STEPs are the
 * layout's (Megatron's optimizer step and the tied embedding's all-reduce); D replicas add
 * their gradient synchronization to the STEPs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "pl_sched.h"
#include "pl_test.h"
#include "sim.h"

/* Returns the lowered 1f1b schedule of p ranks and m microbatches, full recomputation or none. */
static sched *lowered(int p, int m, sched_recompute rc) {
    sched_gen_opts o = {p, m, 1, 0, rc};
    sched *s = sched_generate("1f1b", &o, NULL);
    if (!s) return NULL;
    sched *l = sched_lower(s, NULL);
    sched_free(s);
    return l;
}

/* Fills spec and layout for a small GPT on dgx-a100: P ranks, T and D as given, 8 microbatches. */
static void small(cost_layout *l, sim_model_spec *spec, int pp, int tp, int dp) {
    cost_layout_init(l);
    l->layers = 8;
    l->hidden = 1024;
    l->heads = 16;
    l->seq = 1024;
    l->vocab = 51200;
    l->tp = tp;
    l->pp = pp;
    l->dp = dp;
    l->global_batch = 8 * dp;
    l->recompute = COST_RC_FULL;
    sim_model_spec_init(spec);
    spec->model = "gpt";
    spec->hardware = "dgx-a100";
    spec->layout = l;
}

/* Runs s on ms's costs; returns the iteration time and fills *peak with rank 0's peak memory. */
static double run(const sched *s, sim_model *sm, int64_t *peak) {
    sim_config c;
    sim_config_init(&c);
    sim_model_config(sm, &c);
    sim_costs costs = sim_model_costs(sm);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &r, NULL), PL_OK);
    double t = r.iteration_time_s;
    *peak = r.rank[0].peak_bytes;
    sim_result_free(&r);
    return t;
}

/* T = D = 1: the layout run equals the model-driven pipeline simulation of the same layer table,
 * split and hardware, once the plain run's STEPs are Megatron's optimizer step plus the
 * embedding all-reduce of the end stages. */
static void test_t1_d1(void) {
    cost_layout l;
    sim_model_spec spec;
    small(&l, &spec, 2, 1, 1);
    sched *s = lowered(2, 8, SCHED_RECOMPUTE_FULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_model_setup ms;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_model_setup_build(&ms, &spec, s, &e), PL_OK);
    int64_t peak_layout, peak_plain;
    double t_layout = run(s, &ms.sm, &peak_layout);
    sim_model plain;
    CU_ASSERT_EQUAL_FATAL(sim_model_init(&plain, s, ms.m, ms.p, &ms.sm.hw, &ms.co, &e), PL_OK);
    double emb = cost_allreduce_s(&ms.sm.hw, cost_ranks_inter(&ms.sm.hw, 0, 1), 2, ms.m->layer[0].param_bytes);
    CU_ASSERT(emb > 0);
    for (int q = 0; q < 2; q++) /* the layout's STEP: Megatron's optimizer step and the all-reduce */
        plain.step_s[q] = cost_gpt_step_s(&l, &ms.hw, plain.stage[q].param_bytes) + emb;
    double t_plain = run(s, &plain, &peak_plain);
    CU_ASSERT_DOUBLE_EQUAL(t_layout, t_plain, 0);
    CU_ASSERT_EQUAL(peak_layout, peak_plain);
    sim_model_free(&plain);
    sim_model_setup_free(&ms);
    /* D = 4: every STEP also carries the gradient synchronization of its stage */
    small(&l, &spec, 2, 1, 4);
    CU_ASSERT_EQUAL_FATAL(sim_model_setup_build(&ms, &spec, s, &e), PL_OK);
    for (int q = 0; q < 2; q++) {
        double sync = cost_gpt_sync_s(&l, &ms.hw, ms.sm.stage[q].param_bytes);
        CU_ASSERT(sync > 0);
        double want = sync + emb + cost_gpt_step_s(&l, &ms.hw, ms.sm.stage[q].param_bytes);
        CU_ASSERT_DOUBLE_EQUAL(ms.sm.step_s[q], want, want * 1e-12);
    }
    sim_model_setup_free(&ms);
    sched_free(s);
}

/* Rank 0's iteration by part (sim_layout_report_fill) on an interleaved run, T = 2, P = 2,
 * v = 2, m = 8, full recomputation: the blocking exchanges are two a stage and microbatch
 * (forward and backward; recomputation does not rerun them), 2 m v cost_gpt_exchange_s; the
 * idle time is the simulated rank 0's; and what the named parts leave is exactly the embedding's
 * three passes per microbatch and the tied embedding's all-reduce in the STEP. */
static void test_rank0_parts(void) {
    cost_layout l;
    sim_model_spec spec;
    small(&l, &spec, 2, 2, 1);
    l.chunks = 2;
    sched_gen_opts o = {2, 8, 2, 0, SCHED_RECOMPUTE_FULL};
    sched *g = sched_generate("interleaved", &o, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    sched *s = sched_lower(g, NULL);
    sched_free(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_model_setup ms;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_model_setup_build(&ms, &spec, s, &e), PL_OK);
    sim_config c;
    sim_config_init(&c);
    sim_model_config(&ms.sm, &c);
    sim_costs costs = sim_model_costs(&ms.sm);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &r, NULL), PL_OK);
    sim_layout_report rep;
    sim_layout_report_fill(&ms, &l, &r, &rep);
    double x = cost_gpt_exchange_s(&l, &ms.hw);
    CU_ASSERT(x > 0);
    CU_ASSERT_DOUBLE_EQUAL(rep.exchange_s, 2 * 8 * 2 * x, x * 1e-9);
    CU_ASSERT(r.rank[0].idle_s > 0);
    CU_ASSERT_DOUBLE_EQUAL(rep.idle_s, r.rank[0].idle_s, 0);
    const cost_layer *emb = &ms.m->layer[0];
    double sync = cost_allreduce_s(&ms.sm.hw, cost_ranks_inter(&ms.sm.hw, 0, 1), 2, emb->param_bytes);
    double want = 8 * (emb->fwd_s + emb->bwd_in_s + emb->bwd_w_s) + sync;
    CU_ASSERT_DOUBLE_EQUAL(rep.other_s, want, rep.iteration_time_s * 1e-9);
    sim_result_free(&r);
    sim_model_setup_free(&ms);
    sched_free(s);
}

/* The layout's schedule must be its pipeline: P ranks and P v stages. */
static void test_wrong_schedule(void) {
    cost_layout l;
    sim_model_spec spec;
    small(&l, &spec, 4, 1, 1);
    sched *s = lowered(2, 8, SCHED_RECOMPUTE_FULL);
    sim_model_setup ms;
    pl_err e;
    CU_ASSERT_EQUAL(sim_model_setup_build(&ms, &spec, s, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "the layout --pp 4 --chunks 1 needs 4 and 4"));
    sim_model_setup_free(&ms);
    sched_free(s);
}

void sim_layout_tests_register(void) {
    static const pl_test_case cases[] = {
        {"T = D = 1 equals the pipeline-only simulation", test_t1_d1},
        {"a schedule that is not the layout's pipeline is refused", test_wrong_schedule},
        {"rank 0's iteration by part: exchanges, idle time and the embedding", test_rank0_parts},
        {NULL, NULL},
    };
    pl_test_suite("sim GPU-cluster layouts", cases);
}
