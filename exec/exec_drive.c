/* exec_drive.c: around the executor: the profile CSV of this machine and the cost model's memory
 * for an executed configuration (exec_drive.h). The simulator's prediction and the store records
 * are cli/run_drive.c's: the executor depends on schedules and cost_models only. */
#include "exec_drive.h"
#include "exec_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The peak rate given to the memory prediction's hardware: only bytes are used there. */
#define MEM_PREDICT_FLOPS 1e12

/* ---------------------------------------------------------------- profile */

/* Writes "#@ KEY=latency KEY=bandwidth" for transport t's link of kind k when it was measured
 * (Bps > 0), under cost_link_key's names. */
static void link_meta(pl_buf *out, cost_link_kind k, int t, double latency_s, double Bps) {
    if (Bps > 0)
        pl_buf_printf(out, "#@ %s=%.9g %s=%.9g\n", cost_link_key(k, (cost_transport)t, 0), latency_s,
                      cost_link_key(k, (cost_transport)t, 1), Bps);
}

int exec_profile_csv_table(const exec_config *cfg, const exec_layer_profile *p, const exec_layer_profile *const *rows,
                           pl_buf *out, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    double ff, fi, fi0, fw;
    exec_block_flops(&d, &ff, &fi, &fi0, &fw);
    char name[EXEC_BLOCK_TEXT_MAX];
    exec_model_name(cfg, name, sizeof name);
    pl_buf_printf(out, "#@ microbatch_size=%d input_bytes=%zu dtype_bytes=4 name=%s\n", cfg->microbatch_size,
                  p->act_out_bytes, name);
    /* each transport's measured all-reduce and point-to-point hand-off, under the keys
     * cost_model_read_csv reads */
    const double ar[COST_TRANSPORTS][2] = {{p->ar_latency_s, p->ar_Bps}, {cfg->mpi_ar_latency_s, cfg->mpi_ar_Bps}};
    for (int t = 0; t < COST_TRANSPORTS; t++) link_meta(out, COST_LINK_ALLREDUCE, t, ar[t][0], ar[t][1]);
    for (int t = 0; t < COST_TRANSPORTS; t++) {
        const exec_p2p *h = t == COST_TRANSPORT_MPI ? &cfg->mpi_p2p : &p->p2p;
        link_meta(out, COST_LINK_P2P, t, h->latency_s, h->Bps);
        link_meta(out, COST_LINK_P2P_SEND, t, h->send_s, h->send_Bps);
        link_meta(out, COST_LINK_P2P_POST, t, h->post_s, h->post_Bps);
    }
    pl_buf_puts(out, "layer,name,fwd_s,bwd_in_s,bwd_w_s,fwd_flops,bwd_in_flops,bwd_w_flops,param_bytes,out_bytes,"
                     "stash_bytes,stash_recompute_bytes,w_stash_bytes\n");
    for (int k = 0; k < cfg->layers; k++) {
        const exec_layer_profile *t = rows ? rows[k] : p;
        /* the model's first block computes no input gradient: its I is I0, one GEMM fewer */
        int first = k == 0 && t->i0_s > 0;
        pl_buf_printf(out, "%d,block%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%zu,%zu,%zu,,%zu\n", k, k, t->f_s, first ? t->i0_s : t->i_s,
                      t->w_s, ff, first ? fi0 : fi, fw, p->param_bytes, p->act_out_bytes, p->stash_bytes, p->stash_bytes);
    }
    if (out->failed) return pl_errf(e, PL_ENOMEM, "out of memory writing the profile");
    return PL_OK;
}

int exec_profile_csv(const exec_config *cfg, int reps, const char *host, pl_buf *out, exec_layer_profile *pp,
                     pl_err *e) {
    if (cfg->layers < 1) return pl_errf(e, PL_EINPUT, "profile needs depth >= 1");
    exec_layer_profile p;
    int rc = exec_profile_layers(cfg, reps, &p, e);
    if (rc) return rc;
    if (pp) *pp = p;
    exec_dims d;
    exec_dims_of(cfg, &d);
    char desc[EXEC_BLOCK_TEXT_MAX];
    exec_block_describe(&d, desc, sizeof desc);
    pl_buf_printf(out, "# pipelab profile: the executor's %s, fp32,\n"
                       "# one worker%s%s, %s, median of %d repetitions per block; every block has this shape.\n",
                  desc, host ? " on " : "", host ? host : "", exec_blas_init(), reps);
    return exec_profile_csv_table(cfg, &p, NULL, out, e);
}

int exec_profile_check(const cost_model *m, const exec_config *cfg, const char *path, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (m->n != cfg->layers)
        return pl_errf(e, PL_EINPUT, "%s: the profile has %d layers, the model %d blocks (profile with --depth %d)", path,
                       m->n, cfg->layers, cfg->layers);
    int64_t pb = (int64_t)(exec_block_floats(&d) * sizeof(float));
    int64_t ob = (int64_t)m->microbatch_size * d.seq * d.h * (int64_t)sizeof(float); /* rows of its samples */
    char desc[EXEC_BLOCK_TEXT_MAX];
    exec_block_describe(&d, desc, sizeof desc);
    for (int k = 0; k < m->n; k++)
        if (m->layer[k].param_bytes != pb || m->layer[k].out_bytes != ob)
            return pl_errf(e, PL_EINPUT,
                           "%s: layer %d has %lld parameter and %lld output bytes; the %s has "
                           "%lld and %lld (profile this model)", path, k, (long long)m->layer[k].param_bytes,
                           (long long)m->layer[k].out_bytes, desc, (long long)pb, (long long)ob);
    return PL_OK;
}

/* ---------------------------------------------------------------- the cost model's view */

void exec_cost_opts(const cost_model *m, const exec_config *cfg, cost_opts *o) {
    cost_opts_init(o, m);
    o->microbatch_size = cfg->microbatch_size;
    o->grad_bytes_per_param = sizeof(float);
    o->optimizer_bytes_per_param = cfg->momentum != 0.0 ? sizeof(float) : 0;
}

cost_partition *exec_cost_partition(const sched *s, const exec_config *cfg, pl_err *e) {
    cost_partition *p = cost_partition_new(s->stages);
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    if (!p || !blocks) {
        cost_partition_free(p);
        free(blocks);
        pl_errf(e, PL_ENOMEM, "out of memory");
        return NULL;
    }
    if (exec_stage_blocks(s, cfg, blocks, e) != PL_OK) {
        cost_partition_free(p);
        free(blocks);
        return NULL;
    }
    p->bound[0] = 0;
    for (int q = 0; q < s->stages; q++) {
        p->bound[q + 1] = p->bound[q] + blocks[q];
        p->replicas[q] = cfg->replicas ? cfg->replicas[q] : 1;
    }
    free(blocks);
    return p;
}

int exec_mem_predict(const sched *s, const exec_config *cfg, cost_memory *out, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    cost_model *m = NULL;
    if (d.block == EXEC_BLOCK_MLP && d.f % d.h == 0) {
        cost_mlp_opts mo = {d.h, cfg->layers, d.b, d.f / d.h};
        m = cost_model_mlp(&mo, e);
        /* the executor's full recomputation keeps the stage input only (not every block's
         * input, cost_model_mlp's checkpoint): the cost model's "stage input rule" */
        for (int k = 0; m && k < m->n; k++) m->layer[k].stash_recompute_bytes = -1;
        /* W needs every stashed tensor: the executor holds the whole stash from I until W */
        for (int k = 0; m && k < m->n; k++) m->layer[k].w_stash_bytes = m->layer[k].stash_bytes;
    } else {
        /* the transformer, or no integer ffn multiple: the profile format with the executor's
         * sizes (exec_profile_sizes: the block's input and state, kept until its W) */
        exec_layer_profile sz;
        exec_profile_sizes(&d, &sz);
        pl_buf t;
        pl_buf_init(&t);
        pl_buf_printf(&t, "#@ microbatch_size=%d input_bytes=%zu\nlayer,name,fwd_flops,bwd_in_flops,bwd_w_flops,param_bytes,"
                          "out_bytes,stash_bytes,w_stash_bytes\n", cfg->microbatch_size, sz.act_out_bytes);
        for (int k = 0; k < cfg->layers; k++)
            pl_buf_printf(&t, "%d,block%d,1,1,1,%zu,%zu,%zu,%zu\n", k, k, sz.param_bytes, sz.act_out_bytes, sz.stash_bytes,
                          sz.stash_bytes);
        m = t.failed ? NULL : cost_model_read_csv("mlp", t.data, t.len, e);
        pl_buf_free(&t);
    }
    if (!m) return e->code ? e->code : PL_ENOMEM;
    cost_hw hw;
    cost_hw_init(&hw);
    hw.peak_flops[COST_FP32] = MEM_PREDICT_FLOPS; /* only the bytes are used here; times need some rate */
    cost_opts o;
    exec_cost_opts(m, cfg, &o);
    cost_partition *p = exec_cost_partition(s, cfg, e);
    cost_stage *st = pl_calloc((size_t)s->stages, sizeof *st);
    int rc = p && st ? PL_OK : (p ? pl_errf(e, PL_ENOMEM, "out of memory") : e->code);
    for (int q = 0; q < s->stages && rc == PL_OK; q++) rc = cost_stage_eval(m, p->bound[q], p->bound[q + 1], &hw, &o, &st[q], e);
    if (rc == PL_OK) rc = cost_schedule_memory_replicas(s, st, p->replicas, m, &o, out, e);
    free(st);
    cost_partition_free(p);
    cost_model_free(m);
    return rc;
}
