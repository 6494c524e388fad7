/* exec_drive.c: around the executor: the profile CSV of this machine and the cost model's memory
 * for an executed configuration (exec_drive.h). The simulator's prediction and the store records
 * are cli/run_drive.c's: the executor depends on schedules and cost_models only. */
#include "exec_drive.h"
#include "exec_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FLOPs of a block's forward per b h f: two GEMMs of b h f multiply-adds, two FLOPs each. */
#define FLOPS_PER_BHF 4.0
/* The peak rate given to the memory prediction's hardware: only bytes are used there. */
#define MEM_PREDICT_FLOPS 1e12

/* ---------------------------------------------------------------- profile */

int exec_profile_csv_table(const exec_config *cfg, const exec_layer_profile *p, const exec_layer_profile *const *rows,
                           pl_buf *out, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    double flops = FLOPS_PER_BHF * d.b * (double)d.h * d.f;
    pl_buf_printf(out, "#@ microbatch_size=%d input_bytes=%zu dtype_bytes=4 name=mlp_h%d_f%d_L%d\n", d.b, p->act_out_bytes,
                  d.h, d.f, cfg->layers);
    pl_buf_puts(out, "layer,name,fwd_s,bwd_in_s,bwd_w_s,fwd_flops,bwd_in_flops,bwd_w_flops,param_bytes,out_bytes,"
                     "stash_bytes,stash_recompute_bytes,w_stash_bytes\n");
    for (int k = 0; k < cfg->layers; k++) {
        const exec_layer_profile *t = rows ? rows[k] : p;
        /* the model's first block computes no input gradient: its I is I0, one GEMM fewer */
        double ti = k == 0 && t->i0_s > 0 ? t->i0_s : t->i_s, fi = k == 0 && t->i0_s > 0 ? flops / 2 : flops;
        pl_buf_printf(out, "%d,block%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%zu,%zu,%zu,,%zu\n", k, k, t->f_s, ti, t->w_s, flops,
                      fi, flops, p->param_bytes, p->act_out_bytes, p->stash_bytes, p->stash_bytes);
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
    pl_buf_printf(out, "# pipelab profile: the executor's dense block (Linear %d->%d, GELU, Linear %d->%d, residual), fp32,\n"
                       "# one worker%s%s, %s, median of %d repetitions per block; every block has this shape.\n",
                  d.h, d.f, d.f, d.h, host ? " on " : "", host ? host : "", exec_blas_init(), reps);
    return exec_profile_csv_table(cfg, &p, NULL, out, e);
}

int exec_profile_check(const cost_model *m, const exec_config *cfg, const char *path, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (m->n != cfg->layers)
        return pl_errf(e, PL_EINPUT, "%s: the profile has %d layers, the model %d blocks (profile with --depth %d)", path,
                       m->n, cfg->layers, cfg->layers);
    int64_t pb = (int64_t)(exec_block_floats(&d) * sizeof(float));
    int64_t ob = (int64_t)m->microbatch_size * d.h * (int64_t)sizeof(float);
    for (int k = 0; k < m->n; k++)
        if (m->layer[k].param_bytes != pb || m->layer[k].out_bytes != ob)
            return pl_errf(e, PL_EINPUT,
                           "%s: layer %d has %lld parameter and %lld output bytes; a block of width %d and ffn %d has "
                           "%lld and %lld (profile this model)", path, k, (long long)m->layer[k].param_bytes,
                           (long long)m->layer[k].out_bytes, d.h, d.f, (long long)pb, (long long)ob);
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
    if (d.f % d.h == 0) {
        cost_mlp_opts mo = {d.h, cfg->layers, d.b, d.f / d.h};
        m = cost_model_mlp(&mo, e);
        /* the executor's full recomputation keeps the stage input only (not every block's
         * input, cost_model_mlp's checkpoint): the cost model's "stage input rule" */
        for (int k = 0; m && k < m->n; k++) m->layer[k].stash_recompute_bytes = -1;
        /* W needs every stashed tensor: the executor holds the whole stash from I until W */
        for (int k = 0; m && k < m->n; k++) m->layer[k].w_stash_bytes = m->layer[k].stash_bytes;
    } else {
        /* no integer ffn multiple: the profile format with the executor's sizes */
        pl_buf t;
        pl_buf_init(&t);
        pl_buf_printf(&t, "#@ microbatch_size=%d input_bytes=%zu\nlayer,name,fwd_flops,bwd_in_flops,bwd_w_flops,param_bytes,"
                          "out_bytes,stash_bytes,w_stash_bytes\n", d.b, (size_t)d.b * d.h * sizeof(float));
        size_t stash = ((size_t)d.b * d.h + 2 * (size_t)d.b * d.f) * sizeof(float); /* x, H, gelu(H) */
        for (int k = 0; k < cfg->layers; k++)
            pl_buf_printf(&t, "%d,block%d,1,1,1,%zu,%zu,%zu,%zu\n", k, k, exec_block_floats(&d) * sizeof(float),
                          (size_t)d.b * d.h * sizeof(float), stash, stash);
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
    if (rc == PL_OK) rc = cost_schedule_memory(s, st, m, &o, out, e);
    free(st);
    cost_partition_free(p);
    cost_model_free(m);
    return rc;
}
