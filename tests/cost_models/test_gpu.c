/* test_gpu.c: the GPU-cluster formulas of cost_gpu.c and cost_comm.c against closed forms:
 * Narayanan et al.'s parameter count (eq. 2) and FLOPs (eq. 3) on the ten rows of Megatron-LM's
 * Table 1, the tree and hierarchical all-reduce, Korthikanti et al.'s activation memory, the GEMM
 * efficiency's tile and wave quantization, streaming at the achievable bandwidth, the attention
 * core against a published measurement of Megatron's, the gradient accumulation, optimizer step
 * and pipeline exchange of Megatron-LM, and the layouts that are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_test.h"

#define REL_TOL 1e-12

/* One row of Table 1 (Narayanan et al., SC21): the model, its layout and the parameter count
 * the paper prints (billions, one decimal). */
typedef struct table1_row {
    double params_b;
    int heads, hidden, layers, tp, pp, gpus, batch;
} table1_row;

static const table1_row rows[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512},      {3.6, 32, 3072, 30, 2, 1, 64, 512},
    {7.5, 32, 4096, 36, 4, 1, 128, 512},     {18.4, 48, 6144, 40, 8, 1, 256, 1024},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536},   {76.1, 80, 10240, 60, 8, 4, 1024, 1792},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304}, {310.1, 128, 16384, 96, 8, 16, 1920, 2160},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520}, {1008.0, 160, 25600, 128, 8, 64, 3072, 3072},
};
#define NROWS (sizeof rows / sizeof rows[0])

/* Fills l with row r of Table 1 (s = 2048, V = 51200, microbatch 1). */
static void row_layout(const table1_row *r, cost_layout *l) {
    cost_layout_init(l);
    l->layers = r->layers;
    l->hidden = r->hidden;
    l->heads = r->heads;
    l->seq = 2048;
    l->vocab = 51200;
    l->tp = r->tp;
    l->pp = r->pp;
    l->dp = r->gpus / (r->tp * r->pp);
    l->global_batch = r->batch;
}

/* Eq. 2 rounds to the paper's parameter count on every row; eq. 3 equals its expanded form
 * 96 B s l h^2 + 16 B s^2 l h + 6 B s h V (and the MFU FLOPs 72 B s l h^2 + 12 B s^2 l h +
 * 6 B s h V; full recomputation's HFU equals eq. 3). */
static void test_table1_formulas(void) {
    for (size_t i = 0; i < NROWS; i++) {
        cost_layout l;
        row_layout(&rows[i], &l);
        double p = cost_gpt_params(&l);
        CU_ASSERT_DOUBLE_EQUAL(round(p / 1e8) / 10, rows[i].params_b, 1e-9);
        double B = l.global_batch, s = l.seq, L = l.layers, h = l.hidden, V = l.vocab;
        double f3 = 96 * B * s * L * h * h + 16 * B * s * s * L * h + 6 * B * s * h * V;
        CU_ASSERT_DOUBLE_EQUAL(cost_gpt_model_flops(&l), f3, f3 * REL_TOL);
        double mfu = 72 * B * s * L * h * h + 12 * B * s * s * L * h + 6 * B * s * h * V;
        CU_ASSERT_DOUBLE_EQUAL(cost_gpt_mfu_flops(&l), mfu, mfu * REL_TOL);
        l.recompute = COST_RC_FULL;
        CU_ASSERT_DOUBLE_EQUAL(cost_gpt_hardware_flops(&l), f3, f3 * REL_TOL);
        CU_ASSERT_EQUAL(cost_layout_check(&l, NULL, NULL), PL_OK);
    }
    /* 1T row: m = B / (b D) = 3072 / 6 = 512 microbatches */
    cost_layout l;
    row_layout(&rows[NROWS - 1], &l);
    CU_ASSERT_EQUAL(cost_layout_microbatches(&l), 512);
}

/* Tree: 2 bytes / bw + 2 ceil(log2 n) latency; hierarchical: the intra ring's two halves around
 * an inter ring all-reduce of the 1/local shard; one node is the intra ring all-reduce. */
static void test_tree_hier(void) {
    double bw = 1e9, lat = 1e-5, b = 8e6;
    CU_ASSERT_DOUBLE_EQUAL(cost_tree_allreduce_s(8, b, bw, lat), 2 * b / bw + 2 * 3 * lat, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_tree_allreduce_s(9, b, bw, lat), 2 * b / bw + 2 * 4 * lat, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_tree_allreduce_s(1, b, bw, lat), 0, 0);
    double ibw = 4e9, ilat = 2e-6;
    double want = 2 * (7.0 / 8 * b / ibw + 7 * ilat) + 2.0 * 3 / 4 * (b / 8) / bw + 2 * 3 * lat;
    double got = cost_hier_allreduce_s(8, 4, b, ibw, ilat, bw, lat);
    CU_ASSERT_DOUBLE_EQUAL(got, want, want * REL_TOL);
    CU_ASSERT_DOUBLE_EQUAL(cost_hier_allreduce_s(8, 1, b, ibw, ilat, bw, lat), cost_ring_allreduce_s(8, b, ibw, ilat),
                           1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_hier_allreduce_s(1, 4, b, ibw, ilat, bw, lat), cost_ring_allreduce_s(4, b, bw, lat),
                           1e-15);
}

/* A hardware description with a GEMM table and free links. */
static void gpu_hw(cost_hw *hw) {
    cost_hw_init(hw);
    hw->peak_flops[COST_FP16] = 312e12;
    hw->memory_bandwidth_Bps = 2e12;
    hw->memory_bytes = 80e9;
    hw->devices_per_node = 8;
    hw->gemm_max_efficiency = 0.8;
    hw->gemm_units = 108;
    hw->gemm_tile_m = 256;
    hw->gemm_tile_n = 128;
}

/* Tile and wave quantization: 2048 x 3072 is 8 x 24 = 192 tiles on 108 units, two waves, so
 * 0.8 x 192 / 216; a 100-row GEMM uses 100 / 256 of its tiles' rows. */
static void test_gemm_efficiency(void) {
    cost_hw hw;
    gpu_hw(&hw);
    CU_ASSERT_DOUBLE_EQUAL(cost_gemm_efficiency(&hw, 2048, 3072, 1), 0.8 * 192 / 216, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_gemm_efficiency(&hw, 100, 128 * 108, 1), 0.8 * 100 / 256, 1e-15);
    hw.gemm_max_efficiency = 0;
    hw.efficiency = 0.5;
    CU_ASSERT_DOUBLE_EQUAL(cost_gemm_efficiency(&hw, 100, 100, 1), 0.5, 0);
}

/* Activation bytes per transformer layer and microbatch, Korthikanti et al. (2022) Table 2:
 * none sbh (10 + 24/t + 5as/(ht)); sequence parallel sbh (34 + 5as/h) / t; selective drops the
 * 5as/h term; full keeps 2 sbh (2 sbh / t with sequence parallelism) as the checkpoint. */
static void test_korthikanti(void) {
    cost_hw hw;
    gpu_hw(&hw);
    cost_layout l;
    row_layout(&rows[4], &l); /* 39.1B: h 8192, a 64, T 8, P 2 */
    l.microbatch = 4;
    l.dp = 1;
    l.global_batch = 0;
    double s = 2048, b = 4, h = 8192, a = 64, t = 8, sbh = s * b * h;
    struct { cost_recompute rc; int sp; double stash, ckpt; } cases[] = {
        {COST_RC_NONE, 0, sbh * (10 + 24 / t + 5 * a * s / (h * t)), 2 * sbh},
        {COST_RC_NONE, 1, sbh * (34 + 5 * a * s / h) / t, 2 * sbh / t},
        {COST_RC_SELECTIVE, 0, sbh * (10 + 24 / t), 2 * sbh},
        {COST_RC_SELECTIVE, 1, sbh * 34 / t, 2 * sbh / t},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        l.recompute = cases[k].rc;
        l.sequence_parallel = cases[k].sp;
        cost_model *m = cost_gpt_model(&l, &hw, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_DOUBLE_EQUAL((double)m->layer[2].stash_bytes, cases[k].stash, 1);
        CU_ASSERT_DOUBLE_EQUAL((double)m->layer[2].stash_recompute_bytes, cases[k].ckpt, 1);
        CU_ASSERT_EQUAL(m->layer[2].param_bytes, (int64_t)((12 * h * h + 7 * h) / t + 6 * h) * 2);
        CU_ASSERT_EQUAL(m->layer[2].out_bytes, (int64_t)(2 * sbh / t));
        cost_model_free(m);
        l.no_scatter_gather = 1; /* the whole boundary from every tensor rank, unless sequence parallel */
        m = cost_gpt_model(&l, &hw, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL(m->layer[2].out_bytes, (int64_t)(2 * sbh / (cases[k].sp ? t : 1)));
        cost_model_free(m);
        l.no_scatter_gather = 0;
    }
    /* full: every layer keeps its checkpoint; the first layer of each of the 2 stages also the
     * working set of one layer's rebuilt activations */
    l.recompute = COST_RC_FULL;
    l.sequence_parallel = 0;
    cost_model *m = cost_gpt_model(&l, &hw, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    double whole = sbh * (10 + 24 / t + 5 * a * s / (h * t));
    CU_ASSERT_DOUBLE_EQUAL((double)m->layer[1].stash_bytes, 2 * sbh + whole, 1);
    CU_ASSERT_DOUBLE_EQUAL((double)m->layer[2].stash_bytes, 2 * sbh, 1);
    CU_ASSERT_DOUBLE_EQUAL((double)m->layer[25].stash_bytes, 2 * sbh + whole, 1);
    cost_model_free(m);
}

/* A flash kernel: the attention forward is 4 b s^2 h / t FLOPs at gemm.attention_efficiency,
 * its backward 2.5 times that, and the s^2 tensors leave the stash (Korthikanti's 5as/h term). */
static void test_flash(void) {
    cost_hw hw;
    gpu_hw(&hw);
    hw.gemm_attention_efficiency = 0.5;
    cost_layout l;
    row_layout(&rows[4], &l);
    l.dp = 1;
    l.global_batch = 0;
    l.flash_attention = 1;
    cost_gpt_parts parts;
    cost_gpt_layer_parts(&l, &hw, &parts);
    double s = 2048, h = 8192, t = 8, flops = 4 * s * s * h / t;
    double want = flops / (312e12 * 0.5) + hw.launch_s;
    CU_ASSERT_DOUBLE_EQUAL(parts.f[COST_PART_ATTENTION], want, want * REL_TOL);
    double want_b = 2.5 * flops / (312e12 * 0.5) + hw.launch_s;
    CU_ASSERT_DOUBLE_EQUAL(parts.i[COST_PART_ATTENTION], want_b, want_b * REL_TOL);
    cost_model *m = cost_gpt_model(&l, &hw, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_DOUBLE_EQUAL((double)m->layer[2].stash_bytes, s * h * (10 + 24 / t), 1);
    cost_model_free(m);
    /* HFU: the backward's score product again, 2 B s^2 l h */
    l.global_batch = 8;
    cost_layout nf = l;
    nf.flash_attention = 0;
    CU_ASSERT_DOUBLE_EQUAL(cost_gpt_hardware_flops(&l) - cost_gpt_hardware_flops(&nf), 2 * 8 * s * s * 48 * h, 1e3);
}

/* The memory delta of each action kind, and the caps of w_stash and checkpoint at the stash. */
static void test_mem_delta(void) {
    cost_mem_sizes z = cost_mem_sizes_make(100, 30, 10);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_F, 0, 0), 100);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_F, 0, 1), 10);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_B, 0, 0), 0);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_B, 0, 1), 90);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_B, 1, 1), -100);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_I, 1, 0), -70);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_W, 1, 0), -30);
    CU_ASSERT_EQUAL(cost_mem_delta(&z, SCHED_W, 0, 1), 0);
    z = cost_mem_sizes_make(10, 30, 50);
    CU_ASSERT_EQUAL(z.w_stash, 10);
    CU_ASSERT_EQUAL(z.checkpoint, 10);
}

/* Streaming at the achievable bandwidth: bytes / (bandwidth x memory_efficiency), efficiency 1
 * when unset; a GEMM's memory roof and the attention core's batched GEMMs at
 * gemm.attention_bandwidth of the bandwidth (a memory-bound shape: time = bytes / that + launch). */
static void test_stream(void) {
    cost_hw hw;
    gpu_hw(&hw);
    CU_ASSERT_DOUBLE_EQUAL(cost_stream_s(&hw, 1e9), 1e9 / 2e12, 1e-18);
    hw.memory_efficiency = 0.5;
    CU_ASSERT_DOUBLE_EQUAL(cost_stream_s(&hw, 1e9), 1e9 / 1e12, 1e-18);
    hw.launch_s = 4e-6;
    /* 128 heads of 2048 x 2048 x 64 (Q K^T): 2 (2 s d + s^2) bytes a head, memory-bound */
    double s = 2048, d = 64, bytes = 2 * (2 * s * d + s * s) * 128;
    double want = bytes / 1e12 + 4e-6;
    CU_ASSERT_DOUBLE_EQUAL(cost_gemm_s(&hw, COST_FP16, s, s, d, 128), want, want * REL_TOL);
    CU_ASSERT_DOUBLE_EQUAL(cost_attention_gemm_s(&hw, COST_FP16, s, s, d, 128), want, want * REL_TOL);
    hw.gemm_attention_bandwidth = 0.25;
    want = bytes / (2e12 * 0.25) + 4e-6;
    CU_ASSERT_DOUBLE_EQUAL(cost_attention_gemm_s(&hw, COST_FP16, s, s, d, 128), want, want * REL_TOL);
    /* compute-bound (k = 4096): the roof is the FLOPs at the tile-quantized efficiency */
    double eff = cost_gemm_efficiency(&hw, 4096, 4096, 1);
    want = 2 * 4096.0 * 4096 * 4096 / (312e12 * eff) + 4e-6;
    CU_ASSERT_DOUBLE_EQUAL(cost_attention_gemm_s(&hw, COST_FP16, 4096, 4096, 4096, 1), want, want * REL_TOL);
    pl_err e;
    hw.memory_efficiency = 1.5;
    CU_ASSERT_EQUAL(cost_hw_check(&hw, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "device.memory_efficiency must be in (0, 1]"));
}

/* The attention core of the dgx-a100 preset against Megatron's attention measured on an A100
 * 40 GB (1555 GB/s) by Dao et al. (FlashAttention, 2022, Tables 15-17: batch 16, 8 heads of
 * 64, s = 2048, fp16, dropout 0.1): forward 6.56 ms, backward 10.80 ms, within 5%; and its
 * parts: 9 bytes a score forward (softmax 4, dropout 5), 11 backward, the permute copies,
 * two GEMMs forward and four backward. */
static void test_attention_measured(void) {
    cost_hw hw;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_hw_load(&hw, "dgx-a100", &e), PL_OK);
    hw.memory_bandwidth_Bps = 1555e9;
    cost_layout l;
    cost_layout_init(&l);
    l.layers = 1, l.heads = 8, l.hidden = 8 * 64, l.seq = 2048, l.vocab = 512; /* 8 heads of 64 */
    l.microbatch = 16;
    double f = cost_gpt_attention_fwd_s(&l, &hw), b = cost_gpt_attention_bwd_s(&l, &hw);
    CU_ASSERT(fabs(f / 6.56e-3 - 1) < 0.05);
    CU_ASSERT(fabs(b / 10.80e-3 - 1) < 0.05);
    double s = 2048, d = 64, heads = 128, scores = heads * s * s, perm = 4 * 16 * s * 512;
    double gq = cost_attention_gemm_s(&hw, COST_FP16, s, s, d, heads);
    double gv = cost_attention_gemm_s(&hw, COST_FP16, s, d, s, heads);
    double L = hw.launch_s;
    double wf = gq + gv + cost_stream_s(&hw, 4 * scores) + cost_stream_s(&hw, 5 * scores) + cost_stream_s(&hw, perm) + 3 * L;
    double wb = gq + 3 * gv + cost_stream_s(&hw, 5 * scores) + cost_stream_s(&hw, 6 * scores) + cost_stream_s(&hw, perm) + 3 * L;
    CU_ASSERT_DOUBLE_EQUAL(f, wf, wf * REL_TOL);
    CU_ASSERT_DOUBLE_EQUAL(b, wb, wb * REL_TOL);
    /* selective recomputation adds the forward to the input backward */
    cost_gpt_parts parts;
    l.recompute = COST_RC_SELECTIVE;
    cost_gpt_layer_parts(&l, &hw, &parts);
    CU_ASSERT_DOUBLE_EQUAL(parts.i[COST_PART_ATTENTION], b + f, (b + f) * REL_TOL);
}

/* Gradient accumulation (6 bytes a parameter and a launch a tensor, in every layer's W),
 * Megatron's optimizer step (52 bytes a parameter updated, 6 on every gradient, 7 launches),
 * and the blocking pipeline exchange: 0 for P = 1; else the link transfer of b s h / T halves
 * at the link's collective efficiency, plus the all-gather over T and the list all_gather's
 * copy out (read and write the gathered b s h halves, a launch a piece), at their closed forms. */
static void test_megatron_terms(void) {
    cost_hw hw;
    gpu_hw(&hw);
    hw.launch_s = 1e-6;
    double want = 6 * 1e9 / 2e12 + 12e-6;
    CU_ASSERT_DOUBLE_EQUAL(cost_gpt_grad_accum_s(&hw, 1e9, 12), want, want * REL_TOL);
    cost_layout l;
    row_layout(&rows[4], &l);
    cost_gpt_parts parts;
    cost_gpt_layer_parts(&l, &hw, &parts);
    double h = 8192, t = 8, params = (12 * h * h + 7 * h) / t + 6 * h, qkv = 2048 * 3 * h / t;
    want = cost_gpt_grad_accum_s(&hw, params, 12) + 2 * qkv / 2e12 + 1e-6; /* and the QKV bias' gradient */
    CU_ASSERT_DOUBLE_EQUAL(parts.w[COST_PART_ELEMENTWISE], want, want * REL_TOL);
    want = 58 * 1e9 / 2e12 + 7e-6;
    CU_ASSERT_DOUBLE_EQUAL(cost_gpt_step_s(&l, &hw, 2000000000), want, want * REL_TOL);
    l.distributed_optimizer = 1; /* D = 32 */
    want = (52 * 1e9 / 32 + 6 * 1e9) / 2e12 + 7e-6;
    CU_ASSERT_DOUBLE_EQUAL(cost_gpt_step_s(&l, &hw, 2000000000), want, want * REL_TOL);
    l.distributed_optimizer = 0;
    hw.intra_bandwidth_Bps = 300e9;
    hw.intra_latency_s = 3e-6;
    hw.inter_bandwidth_Bps = 25e9;
    hw.inter_latency_s = 5e-6;
    hw.coll_intra_efficiency = 0.7;
    hw.coll_inter_efficiency = 0.85;
    double whole = 2 * 4 * 2048 * h; /* b = 4 */
    l.microbatch = 4;
    want = 5e-6 + whole / t / (25e9 * 0.85) + 7 * 3e-6 + 7.0 / 8 * whole / (300e9 * 0.7) + 2 * whole / 2e12 + 8e-6;
    CU_ASSERT_DOUBLE_EQUAL(cost_gpt_exchange_s(&l, &hw), want, want * REL_TOL);
    l.no_scatter_gather = 1;
    want = 5e-6 + whole / (25e9 * 0.85);
    CU_ASSERT_DOUBLE_EQUAL(cost_gpt_exchange_s(&l, &hw), want, want * REL_TOL);
    l.pp = 1;
    CU_ASSERT_EQUAL(cost_gpt_exchange_s(&l, &hw), 0);
    /* a stage's first layer carries it, forward and input backward; the others do not */
    l.pp = 2;
    l.no_scatter_gather = 0;
    l.dp = 1;
    l.global_batch = 0;
    cost_model *m = cost_gpt_model(&l, &hw, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    double x = cost_gpt_exchange_s(&l, &hw);
    CU_ASSERT(x > 0);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].fwd_s - m->layer[2].fwd_s, x, x * 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[25].bwd_in_s - m->layer[2].bwd_in_s, x, x * 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[26].fwd_s, m->layer[2].fwd_s, 0);
    cost_model_free(m);
}

/* Full recomputation reruns the checkpointed transformer layers only: not the embedding, not the
 * head with its loss (Megatron checkpoints transformer layers; eq. 3 counts the head 3 times),
 * and not a stage's blocking pipeline exchange. */
static void test_rerun(void) {
    cost_hw hw;
    gpu_hw(&hw);
    hw.inter_bandwidth_Bps = 25e9;
    cost_layout l;
    row_layout(&rows[4], &l); /* 48 layers on P = 2: stages [0, 25) and [25, 50) */
    l.dp = 1;
    l.global_batch = 0;
    cost_model *m = cost_gpt_model(&l, &hw, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(m->n, 50);
    cost_opts o;
    cost_opts_init(&o, m);
    double x = cost_gpt_exchange_s(&l, &hw);
    CU_ASSERT(x > 0);
    cost_stage first, last;
    CU_ASSERT_EQUAL(cost_stage_eval(m, 0, 25, &hw, &o, &first, NULL), PL_OK);
    CU_ASSERT_EQUAL(cost_stage_eval(m, 25, 50, &hw, &o, &last, NULL), PL_OK);
    double layers = 0;
    for (int i = 1; i <= 24; i++) layers += m->layer[i].fwd_s;
    CU_ASSERT_DOUBLE_EQUAL(first.rerun_s, layers - x, layers * 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(first.f_s - first.rerun_s, m->layer[0].fwd_s + x, first.f_s * 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(last.f_s - last.rerun_s, m->layer[49].fwd_s + x, last.f_s * 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(last.b_recompute_s, last.b_s + last.rerun_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(last.i_recompute_s, last.i_s + last.rerun_s, 0);
    cost_model_free(m);
}

/* Refused layouts name what does not divide. */
static void test_refused(void) {
    cost_layout l;
    row_layout(&rows[4], &l);
    pl_err e;
    l.heads = 60;
    l.hidden = 7680;
    CU_ASSERT_EQUAL(cost_layout_check(&l, NULL, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "60 attention heads do not divide over --tp 8"));
    row_layout(&rows[4], &l);
    l.global_batch = 1000;
    CU_ASSERT_EQUAL(cost_layout_check(&l, NULL, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--global-batch 1000 is not a multiple"));
    row_layout(&rows[4], &l);
    l.chunks = 5;
    CU_ASSERT_EQUAL(cost_layout_check(&l, NULL, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "48 layers do not split into 2 pipeline stages x 5 chunks"));
    cost_hw hw;
    gpu_hw(&hw);
    row_layout(&rows[4], &l);
    l.tp = 16;
    l.heads = 64;
    CU_ASSERT_EQUAL(cost_layout_check(&l, &hw, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "tensor parallelism stays within a node"));
}

void test_gpu_register(void) {
    static const pl_test_case cases[] = {
        {"Table 1: eq. 2 parameters and eq. 3 FLOPs on every row", test_table1_formulas},
        {"tree and hierarchical all-reduce closed forms", test_tree_hier},
        {"GEMM efficiency: tile and wave quantization", test_gemm_efficiency},
        {"activation memory per layer: Korthikanti et al.", test_korthikanti},
        {"flash attention: time, backward, stash, HFU", test_flash},
        {"memory delta of each action", test_mem_delta},
        {"refused layouts", test_refused},
        {"streaming at the achievable bandwidth; attention GEMMs' bandwidth", test_stream},
        {"attention core against Megatron's measured attention (FlashAttention paper)", test_attention_measured},
        {"gradient accumulation, Megatron's optimizer step, blocking exchange", test_megatron_terms},
        {"full recomputation reruns the transformer layers only", test_rerun},
        {NULL, NULL},
    };
    pl_test_suite("cost_models GPU clusters", cases);
}
