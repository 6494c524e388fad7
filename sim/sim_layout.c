/* sim_layout.c: a tensor x pipeline x data parallel GPT run on a GPU cluster: one GPU's layer
 * table and Megatron's split fed to the simulator through the model adapter, the data-parallel
 * synchronization and optimizer step on each stage's STEP, and the run's throughput figures. */
#include "sim.h"

#include <stdio.h>
#include <string.h>

/* Returns PL_OK when schedule s is the layout's pipeline (P ranks, P v stages), else PL_EINPUT. */
static int check_schedule(const cost_layout *l, const sched *s, pl_err *e) {
    if (s->ranks != l->pp || s->stages != l->pp * l->chunks)
        return pl_errf(e, PL_EINPUT, "the schedule has %d ranks and %d stages but the layout --pp %d --chunks %d needs "
                       "%d and %d", s->ranks, s->stages, l->pp, l->chunks, l->pp, l->pp * l->chunks);
    return PL_OK;
}

/* Returns the time of the tied embedding's gradient all-reduce between the first and the last
 * pipeline stage (one GPU's vocabulary shard, over the link between the two), 0 for P = 1. */
static double embedding_sync_s(const sim_model_setup *ms, const cost_layout *l) {
    if (l->pp <= 1) return 0;
    int64_t bytes = ms->m->layer[0].param_bytes;
    int inter = cost_ranks_inter(&ms->sm.hw, 0, l->pp - 1);
    return cost_allreduce_s(&ms->sm.hw, inter, 2, bytes);
}

/* Fills the parts of stage q's STEP: its gradient synchronization over D, the embedding's
 * all-reduce when it holds the embedding or the head, and Megatron's optimizer step
 * (cost_gpt_step_s; over 1 / D of the stage's parameters with the distributed optimizer). */
static void step_parts(const sim_model_setup *ms, const cost_layout *l, int q, double *sync_s, double *opt_s,
                       double *emb_s) {
    const sim_model *sm = &ms->sm;
    int64_t pb = sm->stage[q].param_bytes;
    *sync_s = cost_gpt_sync_s(l, &ms->hw, pb);
    *opt_s = cost_gpt_step_s(l, &ms->hw, pb);
    *emb_s = q == 0 || q == sm->stages - 1 ? embedding_sync_s(ms, l) : 0;
}

/* Sets each stage's STEP time to the sum of its parts (step_parts). */
static void set_steps(sim_model_setup *ms, const cost_layout *l) {
    for (int q = 0; q < ms->sm.stages; q++) {
        double sync, opt, emb;
        step_parts(ms, l, q, &sync, &opt, &emb);
        ms->sm.step_s[q] = sync + opt + emb;
    }
}

/* Builds the model side of a layout run (see sim.h); returns PL_OK or an error in e. */
int sim_layout_setup_build(sim_model_setup *ms, const sim_model_spec *spec, const sched *s, pl_err *e) {
    const cost_layout *l = spec->layout;
    if (!spec->hardware)
        return pl_errf(e, PL_EINPUT, "--tp/--dp/--global-batch describe GPUs: give --hardware (e.g. dgx-a100)");
    int rc = sim_setup_load_hardware(spec, ms, e);
    if (rc == PL_OK) rc = check_schedule(l, s, e);
    if (rc != PL_OK) return rc;
    if (!(ms->m = cost_gpt_model(l, &ms->hw, e))) return PL_EINPUT;
    cost_opts_init(&ms->co, ms->m);
    ms->co.precision = l->precision;
    ms->co.optimizer_bytes_per_param = cost_gpt_optimizer_bytes(l);
    if (!(ms->p = cost_gpt_partition(l, e))) return PL_EINPUT;
    ms->psource = "megatron";
    cost_hw pipe = cost_layout_pipeline_hw(&ms->hw, l);
    if ((rc = sim_model_init(&ms->sm, s, ms->m, ms->p, &pipe, &ms->co, e)) != PL_OK) return rc;
    set_steps(ms, l);
    return PL_OK;
}

/* Fills the time parts of pipeline rank 0 over one iteration (r: the run): its transformer
 * layers' GEMMs, attention core, elementwise work and tensor-parallel collectives (m
 * microbatches, the recomputed forward included), its STEPs' synchronization and optimizer, its
 * pipeline exchanges (two a stage and microbatch: recomputation does not rerun them), its idle
 * time, and the rest of the iteration (embedding, the embedding all-reduce). */
static void time_parts(const sim_model_setup *ms, const cost_layout *l, const sim_result *r, sim_layout_report *out) {
    cost_gpt_parts lp;
    cost_gpt_layer_parts(l, &ms->hw, &lp);
    double m = out->microbatches, known = 0;
    int layers = 0, stages = 0;
    for (int q = 0; q < ms->sm.stages; q++) {
        if (ms->sm.stage_device[q] != ms->sm.device[0]) continue;
        stages++;
        for (int y = ms->sm.bound[q]; y < ms->sm.bound[q + 1]; y++) layers += y >= 1 && y <= l->layers;
        double sync, opt, emb;
        step_parts(ms, l, q, &sync, &opt, &emb);
        out->dp_sync_s += sync;
        out->optimizer_s += opt;
    }
    int full = l->recompute == COST_RC_FULL;
    for (int k = 0; k < COST_NPARTS; k++) {
        out->part_s[k] = m * layers * (lp.f[k] * (1 + full) + lp.i[k] + lp.w[k]);
        known += out->part_s[k];
    }
    out->exchange_s = 2 * m * stages * cost_gpt_exchange_s(l, &ms->hw);
    out->idle_s = r->ranks > 0 ? r->rank[0].idle_s : 0;
    out->other_s = out->iteration_time_s - known - out->dp_sync_s - out->optimizer_s - out->exchange_s - out->idle_s;
}

/* Fills out from a finished run of the layout: throughput figures (Narayanan et al.'s model
 * FLOPs, MFU and HFU against the device's peak) and the memory of the rank that peaks highest,
 * by part (activations: its peak less its weights, gradients and optimizer state). */
void sim_layout_report_fill(const sim_model_setup *ms, const cost_layout *l, const sim_result *r,
                            sim_layout_report *out) {
    memset(out, 0, sizeof *out);
    double peak = ms->hw.peak_flops[l->precision];
    out->gpus = cost_layout_gpus(l);
    out->iteration_time_s = r->iteration_time_s;
    out->microbatches = cost_layout_microbatches(l);
    out->params = cost_gpt_params(l);
    out->model_flops = cost_gpt_model_flops(l);
    double per_gpu_s = r->iteration_time_s * out->gpus;
    if (per_gpu_s > 0) {
        out->tflops_per_gpu = out->model_flops / per_gpu_s / 1e12;
        out->mfu = peak > 0 ? cost_gpt_mfu_flops(l) / per_gpu_s / peak : 0;
        out->hfu = peak > 0 ? cost_gpt_hardware_flops(l) / per_gpu_s / peak : 0;
    }
    int q = 0;
    for (int k = 1; k < r->ranks; k++)
        if (r->rank[k].peak_bytes > r->rank[q].peak_bytes) q = k;
    int64_t params = 0;
    for (int st = 0; st < ms->sm.stages; st++)
        if (ms->sm.stage_device[st] == ms->sm.device[q]) params += ms->sm.stage[st].param_bytes;
    out->peak_rank = q;
    out->mem = cost_gpt_static_memory(l, params);
    out->mem.total_bytes = r->ranks > 0 ? (double)r->rank[q].peak_bytes : 0;
    out->mem.activation_bytes =
        out->mem.total_bytes - out->mem.weights_bytes - out->mem.grad_bytes - out->mem.optimizer_bytes;
    out->capacity_bytes = ms->hw.memory_bytes;
    time_parts(ms, l, r, out);
    out->oom = out->capacity_bytes > 0 && out->mem.total_bytes > out->capacity_bytes;
}
