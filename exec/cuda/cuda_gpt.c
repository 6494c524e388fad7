/* cuda_gpt.c: the transformer block on a GPU (gpt.c's math: cuBLAS GEMMs, cuda_kernels.cu's
 * LayerNorm, causal softmax and GELU), and the dispatch of any block that the CUDA runs and
 * profiler call (cx_blk_*). Each head's products are GEMMs on strided views of the QKV rows
 * (leading dimension 3h), as on the CPU; the softmax of all heads' scores is one launch. */
#include "cuda_int.h"
#include "exec_int.h"

#include <math.h>

/* The Q, K and V thirds of a QKV row. */
#define CX_QKV 3
/* GEMMs of the transformer block: the MLP's (F 2, I 2, W 2), QKV and output projections (F 2,
 * I 2, W 2), per head and sequence 2 in F and 4 in I; a recomputed F counted again. */
#define CX_GPT_GEMMS_FIXED 16L
#define CX_GPT_GEMMS_PER_HEAD 8L
/* The dense block's: F 2, I 2, W 2, a recomputed F 2. */
#define CX_MLP_GEMMS 8L

size_t cx_blk_bf16_floats(const exec_dims *d) {
    size_t R = (size_t)d->b, h = (size_t)d->h, f = (size_t)d->f, m = R * (f > h ? f : h);
    if (d->block != EXEC_BLOCK_GPT) return m;
    size_t qkv = R * CX_QKV * h, S = (size_t)d->seq, pp = S * S; /* Q, K, V (and their views); one head's P */
    if (qkv > m) m = qkv;
    return pp > m ? pp : m;
}

/* The bf16 copy of weight w of the block whose parameters start at p->w1 (the same layout), or
 * NULL when p has none (cx_gemm converts w). */
static const uint16_t *wbf(const cx_dparams *p, const float *w) { return p->w1b ? p->w1b + (w - p->w1) : NULL; }

long cx_blk_gemms(const exec_dims *d) {
    if (d->block != EXEC_BLOCK_GPT) return CX_MLP_GEMMS;
    return CX_GPT_GEMMS_FIXED + CX_GPT_GEMMS_PER_HEAD * (long)(d->b / d->seq) * d->heads;
}

/* The heads' forward: every head's scores Q K^T into t->p, one causal softmax over all rows,
 * then every head's P V into its columns of t->att. */
static int attention_forward(cx_gemm_ctx *g, const exec_dims *d, const exec_gpt_state *t, pl_err *e) {
    int S = d->seq, A = d->heads, h = d->h, dh = h / A, B = d->b / S, ld = CX_QKV * h;
    for (int n = 0; n < B; n++)
        for (int a = 0; a < A; a++) {
            const float *q = t->qkv + (size_t)n * S * ld + (size_t)a * dh;
            if (cx_gemm(g, 0, 1, S, S, dh, q, NULL, ld, q + h, NULL, ld, 0.0f, t->p + ((size_t)n * A + a) * S * S, S, e))
                return e->code;
        }
    CXC(cxk_softmax_causal(g->st, t->p, B * A * S, S, 1.0f / sqrtf((float)dh)));
    for (int n = 0; n < B; n++)
        for (int a = 0; a < A; a++) {
            const float *v = t->qkv + (size_t)n * S * ld + (size_t)a * dh + 2 * h;
            if (cx_gemm(g, 0, 0, S, dh, S, t->p + ((size_t)n * A + a) * S * S, NULL, S, v, NULL, ld, 0.0f,
                        t->att + (size_t)n * S * h + (size_t)a * dh, h, e))
                return e->code;
        }
    return PL_OK;
}

/* The heads' backward from datt [R, h]: dQ, dK, dV over each head's Q, K, V columns of t->qkv.
 * scr holds S S + 3 S dh floats (one head's dP, dQ, dK, dV). */
static int attention_backward(cx_gemm_ctx *g, const exec_dims *d, const exec_gpt_state *t, const float *datt, float *scr,
                              pl_err *e) {
    int S = d->seq, A = d->heads, h = d->h, dh = h / A, B = d->b / S, ld = CX_QKV * h;
    float *dp = scr, *dq = dp + (size_t)S * S, *dk = dq + (size_t)S * dh, *dv = dk + (size_t)S * dh;
    for (int n = 0; n < B; n++)
        for (int a = 0; a < A; a++) {
            float *q = t->qkv + (size_t)n * S * ld + (size_t)a * dh, *k = q + h, *v = q + 2 * h;
            const float *p = t->p + ((size_t)n * A + a) * S * S, *dO = datt + (size_t)n * S * h + (size_t)a * dh;
            if (cx_gemm(g, 0, 1, S, S, dh, dO, NULL, h, v, NULL, ld, 0.0f, dp, S, e)) return e->code;  /* dP = dO V^T */
            if (cx_gemm(g, 1, 0, S, dh, S, p, NULL, S, dO, NULL, h, 0.0f, dv, dh, e)) return e->code;  /* dV = P^T dO */
            CXC(cxk_softmax_bwd(g->st, p, dp, S, S, 1.0f / sqrtf((float)dh)));
            if (cx_gemm(g, 0, 0, S, dh, S, dp, NULL, S, k, NULL, ld, 0.0f, dq, dh, e)) return e->code; /* dQ = dS K */
            if (cx_gemm(g, 1, 0, S, dh, S, dp, NULL, S, q, NULL, ld, 0.0f, dk, dh, e)) return e->code; /* dK = dS^T Q */
            size_t pitch = (size_t)ld * sizeof(float), row = (size_t)dh * sizeof(float);
            CXC(cudaMemcpy2DAsync(q, pitch, dq, row, row, (size_t)S, cudaMemcpyDeviceToDevice, g->st));
            CXC(cudaMemcpy2DAsync(k, pitch, dk, row, row, (size_t)S, cudaMemcpyDeviceToDevice, g->st));
            CXC(cudaMemcpy2DAsync(v, pitch, dv, row, row, (size_t)S, cudaMemcpyDeviceToDevice, g->st));
        }
    return PL_OK;
}

/* gpt.c's exec_gpt_forward. */
static int gpt_forward(cx_gemm_ctx *g, const exec_dims *d, const cx_dparams *mp, const float *x, float *state, float *y,
                       pl_err *e) {
    int R = d->b, h = d->h, h3 = CX_QKV * d->h;
    exec_gpt_params w = exec_gpt_params_at(d, mp->w1);
    exec_gpt_state t = exec_gpt_state_at(d, state);
    CXC(cxk_ln_fwd(g->st, x, w.g1, w.be1, t.xn1, t.mean1, t.rstd1, R, h));
    CXC(cxk_rows_bias(g->st, t.qkv, w.bqkv, R, h3));
    if (cx_gemm(g, 0, 1, R, h3, h, t.xn1, NULL, h, w.wqkv, wbf(mp, w.wqkv), h, 1.0f, t.qkv, h3, e)) return e->code;
    if (attention_forward(g, d, &t, e)) return e->code;
    CXC(cxk_residual_bias(g->st, t.x2, x, w.bo, R, h));
    if (cx_gemm(g, 0, 1, R, h, h, t.att, NULL, h, w.wo, wbf(mp, w.wo), h, 1.0f, t.x2, h, e)) return e->code;
    CXC(cxk_ln_fwd(g->st, t.x2, w.g2, w.be2, t.xn2, t.mean2, t.rstd2, R, h));
    return cx_mlp_forward(g, d, mp, t.xn2, t.x2, t.hd, t.a, y, e);
}

/* gpt.c's exec_gpt_backward_i. */
static int gpt_backward_i(cx_gemm_ctx *g, const exec_dims *d, const cx_dparams *mp, const float *x, float *state,
                          const float *gy, float *gx, float *scratch, pl_err *e) {
    int R = d->b, h = d->h, f = d->f, h3 = CX_QKV * d->h;
    exec_gpt_params w = exec_gpt_params_at(d, mp->w1);
    exec_gpt_state t = exec_gpt_state_at(d, state);
    if (cx_block_backward_i(g, d, mp, t.hd, gy, NULL, scratch, e)) return e->code;
    if (cx_gemm(g, 0, 0, R, h, f, t.hd, NULL, f, w.w1, wbf(mp, w.w1), h, 0.0f, t.dxn2, h, e)) return e->code;
    CXC(cxk_ln_bwd(g->st, t.x2, t.mean2, t.rstd2, w.g2, t.dxn2, gy, t.dx2, R, h));
    float *datt = scratch;
    if (cx_gemm(g, 0, 0, R, h, h, t.dx2, NULL, h, w.wo, wbf(mp, w.wo), h, 0.0f, datt, h, e)) return e->code;
    if (attention_backward(g, d, &t, datt, scratch + (size_t)R * h, e)) return e->code;
    if (cx_gemm(g, 0, 0, R, h, h3, t.qkv, NULL, h3, w.wqkv, wbf(mp, w.wqkv), h, 0.0f, t.dxn1, h, e)) return e->code;
    if (gx) CXC(cxk_ln_bwd(g->st, x, t.mean1, t.rstd1, w.g1, t.dxn1, t.dx2, gx, R, h));
    return PL_OK;
}

/* gpt.c's exec_gpt_backward_w. */
static int gpt_backward_w(cx_gemm_ctx *g, const exec_dims *d, const float *x, const float *state, const float *gy, float *gp,
                          pl_err *e) {
    int R = d->b, h = d->h, h3 = CX_QKV * d->h;
    exec_gpt_params q = exec_gpt_params_at(d, gp);
    exec_gpt_state t = exec_gpt_state_at(d, (float *)state);
    if (cx_block_backward_w(g, d, t.xn2, t.a, t.hd, gy, gp, e)) return e->code;
    CXC(cxk_ln_bwd_w(g->st, t.x2, t.mean2, t.rstd2, t.dxn2, (float *)q.g2, (float *)q.be2, R, h));
    if (cx_gemm(g, 1, 0, h, h, R, t.dx2, NULL, h, t.att, NULL, h, 1.0f, (float *)q.wo, h, e)) return e->code;
    CXC(cxk_colsum_acc(g->st, (float *)q.bo, t.dx2, R, h));
    if (cx_gemm(g, 1, 0, h3, h, R, t.qkv, NULL, h3, t.xn1, NULL, h, 1.0f, (float *)q.wqkv, h, e)) return e->code;
    CXC(cxk_colsum_acc(g->st, (float *)q.bqkv, t.qkv, R, h3));
    CXC(cxk_ln_bwd_w(g->st, x, t.mean1, t.rstd1, t.dxn1, (float *)q.g1, (float *)q.be1, R, h));
    return PL_OK;
}

int cx_blk_forward(cx_gemm_ctx *g, const exec_dims *d, const cx_dparams *p, const float *x, float *state, float *y,
                   pl_err *e) {
    if (d->block == EXEC_BLOCK_GPT) return gpt_forward(g, d, p, x, state, y, e);
    return cx_block_forward(g, d, p, x, state, state + (size_t)d->b * d->f, y, e);
}

int cx_blk_backward_i(cx_gemm_ctx *g, const exec_dims *d, const cx_dparams *p, const float *x, float *state,
                      const float *gy, float *gx, float *scratch, pl_err *e) {
    if (d->block == EXEC_BLOCK_GPT) return gpt_backward_i(g, d, p, x, state, gy, gx, scratch, e);
    return cx_block_backward_i(g, d, p, state, gy, gx, scratch, e);
}

int cx_blk_backward_w(cx_gemm_ctx *g, const exec_dims *d, const float *x, const float *state, const float *gy,
                      float *gp, pl_err *e) {
    if (d->block == EXEC_BLOCK_GPT) return gpt_backward_w(g, d, x, state, gy, gp, e);
    return cx_block_backward_w(g, d, x, state + (size_t)d->b * d->f, state, gy, gp, e);
}
