/* test_costs.c: compute times (seconds and FLOPs, microbatch scaling), stage bytes and the
 * recomputation rule, prefix sums, transfer, all-reduce, step and memory costs by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_test.h"

#define FIX PIPELAB_TESTS_DIR "/cost_models/fixtures"

/* A small machine with round numbers: 4 devices per node. */
static void small_hw(cost_hw *hw) {
    cost_hw_init(hw);
    hw->peak_flops[COST_FP32] = 1e12;
    hw->efficiency = 0.5;
    hw->launch_s = 1e-6;
    hw->nodes = 2;
    hw->devices_per_node = 4;
    hw->intra_bandwidth_Bps = 10e9;
    hw->intra_latency_s = 1e-5;
    hw->inter_bandwidth_Bps = 1e9;
    hw->inter_latency_s = 1e-4;
    hw->memory_bandwidth_Bps = 1e9;
}

/* Loads the CSV fixture (3 layers, microbatch 4; layer 1 given in FLOPs). */
static cost_model *fixture(void) {
    pl_err e = {0};
    cost_model *m = cost_model_open(FIX "/profile.csv", &e);
    if (!m) fprintf(stderr, "\n  %s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL(m);
    return m;
}

/* Loads the fixture with small_hw in hw and the fixture's default options in o; NULL on failure. */
static cost_model *fixture_on(cost_hw *hw, cost_opts *o) {
    small_hw(hw);
    cost_model *m = fixture();
    if (m) cost_opts_init(o, m);
    return m;
}

/* Seconds as given; FLOPs over peak x efficiency plus launch; doubling the microbatch doubles both. */
static void test_stage_times(void) {
    cost_hw hw;
    cost_opts o;
    cost_model *m = fixture_on(&hw, &o);
    if (!m) return;
    cost_stage st;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 3, &hw, &o, &st, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(st.f_s, 0.001 + 0.002001 + 0.004, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.i_s, 0.002 + 0.004001 + 0.001, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.w_s, 0.003 + 0.006001 + 0.001, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.b_s, st.i_s + st.w_s, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(st.b_recompute_s, st.b_s + st.f_s, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(st.i_recompute_s, st.i_s + st.f_s, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(st.i_last_s, 0.001, 1e-12); /* layer 2's I: the backward's first */
    o.microbatch_size = 8;
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 3, &hw, &o, &st, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(st.f_s, 0.002 + 0.004001 + 0.008, 1e-12);
    CU_ASSERT_EQUAL(st.in_bytes, 128);
    CU_ASSERT_EQUAL(st.param_bytes, 1200); /* parameters do not scale */
    /* FLOPs need a peak for the precision */
    o.microbatch_size = 4;
    o.precision = COST_FP16;
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 3, &hw, &o, &st, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "device.flops_fp16") != NULL);
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 3, NULL, &o, &st, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(cost_stage_eval(m, 2, 2, &hw, &o, &st, &e), PL_EINPUT);
    cost_model_free(m);
}

/* Boundary, stash, W-stash and recompute bytes of stages, and the same from prefix sums. */
static void test_stage_bytes(void) {
    cost_hw hw;
    cost_opts o;
    cost_model *m = fixture_on(&hw, &o);
    if (!m) return;
    cost_stage st;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_stage_eval(m, 1, 3, &hw, &o, &st, &e), PL_OK);
    CU_ASSERT_EQUAL(st.in_bytes, 64);
    CU_ASSERT_EQUAL(st.out_bytes, 0);
    CU_ASSERT_EQUAL(st.stash_bytes, 544);
    CU_ASSERT_EQUAL(st.stash_recompute_bytes, 64); /* layer 1's own checkpoint, layer 2 none */
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 2, &hw, &o, &st, &e), PL_OK);
    CU_ASSERT_EQUAL(st.stash_recompute_bytes, 64 + 64); /* unknown first layer: the stage input */
    CU_ASSERT_EQUAL(st.w_stash_bytes, 384);             /* half of 768 */
    cost_prefix p;
    CU_ASSERT_EQUAL(cost_prefix_init(&p, m, &hw, &o, &e), PL_OK);
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b <= 3; b++) {
            cost_stage x, y;
            CU_ASSERT_EQUAL(cost_stage_eval(m, a, b, &hw, &o, &x, &e), PL_OK);
            cost_prefix_stage(&p, a, b, &y);
            CU_ASSERT_DOUBLE_EQUAL(x.f_s, y.f_s, 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(x.i_s, y.i_s, 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(x.w_s, y.w_s, 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(x.i_last_s, y.i_last_s, 1e-12);
            CU_ASSERT_EQUAL(x.param_bytes, y.param_bytes);
            CU_ASSERT_EQUAL(x.in_bytes, y.in_bytes);
            CU_ASSERT_EQUAL(x.out_bytes, y.out_bytes);
            CU_ASSERT_EQUAL(x.stash_bytes, y.stash_bytes);
            CU_ASSERT_EQUAL(x.w_stash_bytes, y.w_stash_bytes);
            CU_ASSERT_EQUAL(x.stash_recompute_bytes, y.stash_recompute_bytes);
        }
    cost_prefix_free(&p);
    cost_model_free(m);
}

/* The branchy graph: a stage boundary between the branches carries both (110 bytes). */
static void test_branch_boundary(void) {
    pl_err e = {0};
    cost_model *m = cost_model_open(FIX "/branchy.graph.txt", &e);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (!m) return;
    cost_opts o;
    cost_opts_init(&o, m);
    cost_partition *p = cost_partition_parse("0,2,5", m->n, &e);
    CU_ASSERT_PTR_NOT_NULL(p);
    cost_stage st[2];
    if (p) {
        CU_ASSERT_EQUAL(cost_partition_eval(p, m, NULL, &o, st, &e), PL_OK);
        CU_ASSERT_EQUAL(st[0].out_bytes, 110);
        CU_ASSERT_EQUAL(st[1].in_bytes, 110);
        CU_ASSERT_EQUAL(st[1].stash_recompute_bytes, 110);
        CU_ASSERT_DOUBLE_EQUAL(st[0].f_s, 0.003, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(st[1].w_s, 0.001, 1e-12); /* only Out has weights */
    }
    cost_partition_free(p);
    cost_model_free(m);
}

/* alpha + bytes / bandwidth, intra or inter by rank / devices_per_node; ring all-reduce. */
static void test_transfer_allreduce(void) {
    cost_hw hw;
    small_hw(&hw);
    CU_ASSERT_DOUBLE_EQUAL(cost_transfer_s(&hw, 0, 1, 1000000), 1e-5 + 1e-4, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_transfer_s(&hw, 3, 4, 1000000), 1e-4 + 1e-3, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_transfer_s(&hw, 4, 7, 1000000), 1e-5 + 1e-4, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_transfer_s(&hw, 2, 2, 1000000), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(cost_link_s(&hw, 1, 0), 0, 0);
    CU_ASSERT_EQUAL(cost_ranks_inter(&hw, 3, 4), 1);
    CU_ASSERT_EQUAL(cost_ranks_inter(&hw, 0, 3), 0);
    /* 2 (n-1)/n bytes/bw + 2 (n-1) latency, n = 4, 8 MB over 1 GB/s: 0.012 + 0.0006 */
    CU_ASSERT_DOUBLE_EQUAL(cost_allreduce_s(&hw, 1, 4, 8000000), 0.0126, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(cost_allreduce_s(&hw, 0, 2, 8000000), 8e-4 + 2e-5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(cost_allreduce_s(&hw, 1, 1, 8000000), 0, 0);
    /* optimizer step of 100 fp32 parameters: (2*400 + 400 + 2*800) bytes at 1 GB/s */
    cost_opts o;
    cost_opts_init(&o, NULL);
    CU_ASSERT_DOUBLE_EQUAL(cost_step_s(&hw, &o, NULL, 400), 2.8e-6, 1e-18);
}

/* Memory of a stage under each weight policy and recomputation, by hand. */
static void test_stage_memory(void) {
    cost_model *m = fixture();
    if (!m) return;
    cost_opts o;
    cost_opts_init(&o, m);
    cost_stage st;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 2, NULL, &o, &st, &e), PL_EINPUT); /* layer 1 needs hw */
    cost_hw hw;
    small_hw(&hw);
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 2, &hw, &o, &st, &e), PL_OK);
    /* 1200 parameter bytes = 300 fp32 parameters; stash 768; recompute stash 128 */
    cost_memory r;
    CU_ASSERT_EQUAL(cost_stage_memory(&st, m, &o, SCHED_WEIGHTS_FLUSH, SCHED_RECOMPUTE_NONE, 3, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.versions, 1);
    CU_ASSERT_EQUAL(r.weights_bytes, 1200);
    CU_ASSERT_EQUAL(r.grad_bytes, 1200);
    CU_ASSERT_EQUAL(r.optimizer_bytes, 2400);
    CU_ASSERT_EQUAL(r.activation_bytes, 3 * 768);
    CU_ASSERT_EQUAL(r.total_bytes, 1200 + 1200 + 2400 + 3 * 768);
    CU_ASSERT_EQUAL(cost_stage_memory(&st, m, &o, SCHED_WEIGHTS_STASH, SCHED_RECOMPUTE_NONE, 3, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.versions, 3);
    CU_ASSERT_EQUAL(r.weights_bytes, 3600);
    CU_ASSERT_EQUAL(cost_stage_memory(&st, m, &o, SCHED_WEIGHTS_2BW, SCHED_RECOMPUTE_NONE, 3, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.weights_bytes, 2400);
    /* one microbatch in flight (a last stage): none crosses a STEP, one version */
    CU_ASSERT_EQUAL(cost_stage_memory(&st, m, &o, SCHED_WEIGHTS_2BW, SCHED_RECOMPUTE_NONE, 1, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.weights_bytes, 1200);
    CU_ASSERT_EQUAL(cost_stage_memory(&st, m, &o, SCHED_WEIGHTS_FLUSH, SCHED_RECOMPUTE_FULL, 3, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.activation_bytes, 2 * 128 + 768);
    /* bytes past 64 bits are an error naming the stage, not a wrapped count */
    cost_stage big = st;
    big.param_bytes = (int64_t)4e18;
    CU_ASSERT_EQUAL(cost_stage_memory(&big, m, &o, SCHED_WEIGHTS_STASH, SCHED_RECOMPUTE_NONE, 3, &r, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "the stage of layers 0-1: its memory with 3 microbatches in flight"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "too large to count in 64 bits"));
    CU_ASSERT_EQUAL(cost_stage_memory(&big, m, &o, SCHED_WEIGHTS_FLUSH, SCHED_RECOMPUTE_NONE, 1, &r, &e), PL_EINPUT);
    big = st;
    big.stash_bytes = (int64_t)1e18;
    CU_ASSERT_EQUAL(cost_stage_memory(&big, m, &o, SCHED_WEIGHTS_FLUSH, SCHED_RECOMPUTE_NONE, 10, &r, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(cost_stage_memory(&big, m, &o, SCHED_WEIGHTS_FLUSH, SCHED_RECOMPUTE_NONE, 9, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.activation_bytes, (int64_t)9e18);
    cost_model_free(m);
}

/* Memory per rank of a 1F1B schedule: rank 0 holds 2 microbatches, rank 1 holds 1. */
static void test_schedule_memory(void) {
    cost_hw hw;
    cost_opts o;
    cost_model *m = fixture_on(&hw, &o);
    if (!m) return;
    pl_err e = {0};
    cost_partition *p = cost_partition_parse("=2,1", m->n, &e);
    CU_ASSERT_PTR_NOT_NULL(p);
    sched_gen_opts g = {.ranks = 2, .microbatches = 4};
    sched *s = sched_generate("1f1b", &g, &e);
    CU_ASSERT_PTR_NOT_NULL(s);
    cost_stage st[2];
    cost_memory mem[2];
    if (p && s) {
        CU_ASSERT_EQUAL(cost_partition_eval(p, m, &hw, &o, st, &e), PL_OK);
        CU_ASSERT_EQUAL(cost_schedule_memory(s, st, m, &o, mem, &e), PL_OK);
        cost_memory r0 = {0};
        CU_ASSERT_EQUAL(cost_stage_memory(&st[0], m, &o, SCHED_WEIGHTS_FLUSH, SCHED_RECOMPUTE_NONE, 2, &r0, &e), PL_OK);
        cost_memory r1 = {0};
        CU_ASSERT_EQUAL(cost_stage_memory(&st[1], m, &o, SCHED_WEIGHTS_FLUSH, SCHED_RECOMPUTE_NONE, 1, &r1, &e), PL_OK);
        CU_ASSERT_EQUAL(mem[0].total_bytes, r0.total_bytes);
        CU_ASSERT_EQUAL(mem[1].total_bytes, r1.total_bytes);
        CU_ASSERT_EQUAL(mem[0].activation_bytes, 2 * 768);
    }
    sched_free(s);
    cost_partition_free(p);
    cost_model_free(m);
}

/* Partition text forms, the even split, and bad partitions. */
static void test_partitions(void) {
    pl_err e = {0};
    cost_partition *a = cost_partition_parse("0,3,7,10", 10, &e);
    cost_partition *b = cost_partition_parse("=3,4,3", 10, &e);
    cost_partition *c = cost_partition_even(10, 3, &e);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(b);
    CU_ASSERT_PTR_NOT_NULL(c);
    if (a && b && c) {
        CU_ASSERT_EQUAL(a->stages, 3);
        for (int k = 0; k <= 3; k++) CU_ASSERT_EQUAL(a->bound[k], b->bound[k]);
        CU_ASSERT_EQUAL(c->bound[1], 4);
        CU_ASSERT_EQUAL(c->bound[2], 7);
        CU_ASSERT_EQUAL(a->replicas[2], 1);
    }
    cost_partition_free(a);
    cost_partition_free(b);
    cost_partition_free(c);
    CU_ASSERT_PTR_NULL(cost_partition_parse("0,3,3,10", 10, &e));
    CU_ASSERT(strstr(e.msg, "stage 1 is empty") != NULL);
    CU_ASSERT_PTR_NULL(cost_partition_parse("0,3,9", 10, &e));
    CU_ASSERT(strstr(e.msg, "must end at layer 10") != NULL);
    CU_ASSERT_PTR_NULL(cost_partition_parse("0,x,10", 10, &e));
    CU_ASSERT_PTR_NULL(cost_partition_even(2, 3, &e));
}

void test_costs_register(void) {
    static const pl_test_case cases[] = {
        {"stage compute times", test_stage_times},
        {"stage bytes and prefix sums", test_stage_bytes},
        {"branch activations cross the cut", test_branch_boundary},
        {"transfer, all-reduce, step", test_transfer_allreduce},
        {"stage memory by policy", test_stage_memory},
        {"rank memory of a schedule", test_schedule_memory},
        {"partitions", test_partitions},
        {NULL, NULL},
    };
    pl_test_suite("cost calculations", cases);
}
