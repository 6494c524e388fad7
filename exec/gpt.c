/* gpt.c: the executor's transformer block in fp32 (exec_config.block = EXEC_BLOCK_GPT): a GPT-2
 * decoder block (pre-LayerNorm, causal multi-head self-attention, GELU MLP, two residuals), its
 * forward, its backward split into I (input gradient) and W (weight gradient), on OpenBLAS GEMMs
 * (exec_gemm, on the worker's GEMM clock) and plain loops for LayerNorm, softmax and GELU.
 *
 * A microbatch is B sequences of S tokens: R = B S rows of width h (row n S + t is token t of
 * sequence n). Heads A of dh = h / A channels: head a of sequence n reads columns a dh .. of the
 * Q, K and V thirds of the QKV projection's rows n S .. n S + S - 1, in place (leading dimension
 * 3h), so no head is ever gathered or scattered. */
#include "exec_int.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* LayerNorm's epsilon (GPT-2's and PyTorch's default). */
#define GPT_LN_EPS 1e-5
/* The random streams of a block's parameters beyond its MLP's (which take the first
 * GPT_MLP_STREAMS: exec_mlp_init's four). */
enum { GPT_MLP_STREAMS = 4, GPT_STREAM_WQKV = GPT_MLP_STREAMS, GPT_STREAM_BQKV, GPT_STREAM_WO, GPT_STREAM_BO, GPT_STREAMS };
/* The Q, K and V thirds of a QKV row. */
#define GPT_QKV 3

/* The parameter and state layouts (exec_int.h), shared with the CUDA backend. */
typedef exec_gpt_params gpt_params;
typedef exec_gpt_state gpt_state;

exec_gpt_params exec_gpt_params_at(const exec_dims *d, const float *p) {
    size_t h = (size_t)d->h, f = (size_t)d->f;
    uintptr_t base = (uintptr_t)p;
#define AT(n) ((const float *)(base + (n) * sizeof(float)))
    gpt_params w;
    size_t o = 2 * h * f + f + h;
    w.w1 = AT(0);
    w.w2 = AT(h * f + f);
    w.wqkv = AT(o);
    w.bqkv = AT(o += GPT_QKV * h * h);
    w.wo = AT(o += GPT_QKV * h);
    w.bo = AT(o += h * h);
    w.g1 = AT(o += h);
    w.be1 = AT(o += h);
    w.g2 = AT(o += h);
    w.be2 = AT(o += h);
#undef AT
    return w;
}

exec_gpt_state exec_gpt_state_at(const exec_dims *d, float *s) {
    size_t R = (size_t)d->b, h = (size_t)d->h, f = (size_t)d->f, S = (size_t)d->seq;
    size_t B = R / S, A = (size_t)d->heads, o = 0;
    uintptr_t base = (uintptr_t)s;
#define AT(n) ((float *)(base + (n) * sizeof(float)))
    gpt_state t;
    t.hd = AT(o);
    t.a = AT(o += R * f);
    t.xn2 = AT(o += R * f);
    t.x2 = AT(o += R * h);
    t.att = AT(o += R * h);
    t.qkv = AT(o += R * h);
    t.xn1 = AT(o += GPT_QKV * R * h);
    t.p = AT(o += R * h);
    t.dxn2 = AT(o += B * A * S * S);
    t.dx2 = AT(o += R * h);
    t.dxn1 = AT(o += R * h);
    t.mean1 = AT(o += R * h);
    t.rstd1 = AT(o += R);
    t.mean2 = AT(o += R);
    t.rstd2 = AT(o += R);
#undef AT
    return t;
}

/* exec_block_floats for the transformer block. */
static size_t gpt_floats(const exec_dims *d) {
    /* the end of the layout (MLP 2hf + f + h; QKV 3h^2 + 3h; output projection h^2 + h; two
     * LayerNorms 4h): the last field's offset and its h floats */
    return (size_t)((uintptr_t)exec_gpt_params_at(d, NULL).be2 / sizeof(float)) + (size_t)d->h;
}

/* exec_block_state_floats for the transformer block. */
static size_t gpt_state_floats(const exec_dims *d) {
    /* the end of the layout: the last field's offset and its R floats */
    return (size_t)((uintptr_t)exec_gpt_state_at(d, NULL).rstd2 / sizeof(float)) + (size_t)d->b;
}

/* exec_block_scratch_floats: the MLP's dA, or the heads' backward (dAtt and one head's dP,
 * dQ, dK, dV), whichever is larger. */
static size_t gpt_scratch_floats(const exec_dims *d) {
    size_t R = (size_t)d->b, h = (size_t)d->h, f = (size_t)d->f, S = (size_t)d->seq, dh = h / (size_t)d->heads;
    size_t mlp = R * f;                              /* dA of the MLP's backward */
    size_t attn = R * h + S * S + GPT_QKV * S * dh;  /* dAtt, one head's dP and dQ, dK, dV */
    return mlp > attn ? mlp : attn;
}

/* exec_block_init for the transformer block (README of exec/: its initial weights). */
static void gpt_init(const exec_dims *d, uint64_t seed, int block, float *p) {
    size_t h = (size_t)d->h;
    uint64_t st = GPT_STREAMS * (uint64_t)block;
    exec_mlp_init(d, seed, st, p);
    gpt_params w = exec_gpt_params_at(d, p);
    float *wqkv = (float *)w.wqkv, *bqkv = (float *)w.bqkv, *wo = (float *)w.wo, *bo = (float *)w.bo;
    double sq = 1.0 / sqrt((double)h), so = 1.0 / sqrt(2.0 * (d->layers > 0 ? d->layers : 1) * (double)h);
    exec_fill_normal_std(seed, st + GPT_STREAM_WQKV, sq, wqkv, GPT_QKV * h * h);
    exec_fill_normal_std(seed, st + GPT_STREAM_BQKV, EXEC_BIAS_STD, bqkv, GPT_QKV * h);
    exec_fill_normal_std(seed, st + GPT_STREAM_WO, so, wo, h * h);
    exec_fill_normal_std(seed, st + GPT_STREAM_BO, EXEC_BIAS_STD, bo, h);
    /* LayerNorms start as the identity map of the normalized rows: gains 1, biases 0 */
    for (size_t i = 0; i < h; i++) {
        ((float *)w.g1)[i] = ((float *)w.g2)[i] = 1.0f;
        ((float *)w.be1)[i] = ((float *)w.be2)[i] = 0.0f;
    }
}

/* ---------------------------------------------------------------- LayerNorm */

/* y [R, h] = g (x - mean) rstd + be per row, keeping each row's mean and 1 / sqrt(var + eps)
 * (sums in double). */
static void ln_forward(int R, int h, const float *x, const float *g, const float *be, float *y, float *mean, float *rstd) {
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * h;
        double s = 0, ss = 0;
        for (int c = 0; c < h; c++) s += xr[c];
        double mu = s / h;
        for (int c = 0; c < h; c++) ss += ((double)xr[c] - mu) * ((double)xr[c] - mu);
        float m = (float)mu, rs = (float)(1.0 / sqrt(ss / h + GPT_LN_EPS));
        mean[r] = m;
        rstd[r] = rs;
        float *yr = y + (size_t)r * h;
        for (int c = 0; c < h; c++) yr[c] = g[c] * ((xr[c] - m) * rs) + be[c];
    }
}

/* gx [R, h] = res + dL/dx of LayerNorm from dy (its output gradient): with xh = (x - mean) rstd
 * and dxh = dy g, dx = rstd (dxh - mean(dxh) - xh mean(dxh xh)) (sums in double). */
static void ln_backward(int R, int h, const float *x, const float *mean, const float *rstd, const float *g,
                        const float *dy, const float *res, float *gx) {
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * h, *dr = dy + (size_t)r * h, *rr = res + (size_t)r * h;
        float m = mean[r], rs = rstd[r];
        double s1 = 0, s2 = 0;
        for (int c = 0; c < h; c++) {
            double dxh = (double)dr[c] * g[c];
            s1 += dxh;
            s2 += dxh * ((xr[c] - m) * rs);
        }
        float a1 = (float)(s1 / h), a2 = (float)(s2 / h);
        float *gr = gx + (size_t)r * h;
        for (int c = 0; c < h; c++) {
            float xh = (xr[c] - m) * rs;
            gr[c] = rr[c] + rs * (dr[c] * g[c] - a1 - xh * a2);
        }
    }
}

/* Accumulates LayerNorm's gain and bias gradients: dg += sum_r dy xh, dbe += sum_r dy. */
static void ln_backward_w(int R, int h, const float *x, const float *mean, const float *rstd, const float *dy, float *dg,
                          float *dbe) {
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * h, *dr = dy + (size_t)r * h;
        float m = mean[r], rs = rstd[r];
        for (int c = 0; c < h; c++) {
            dg[c] += dr[c] * ((xr[c] - m) * rs);
            dbe[c] += dr[c];
        }
    }
}

/* ---------------------------------------------------------------- attention */

/* Causal softmax in place over row i of an S x S score block: p_ij = exp(s_ij scale - max) / sum
 * for j <= i, 0 for j > i (the masked future). */
static void softmax_causal_row(float *row, int i, int S, float scale) {
    float mx = -INFINITY;
    for (int j = 0; j <= i; j++) {
        row[j] *= scale;
        if (row[j] > mx) mx = row[j];
    }
    float sum = 0;
    for (int j = 0; j <= i; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j <= i; j++) row[j] *= inv;
    for (int j = i + 1; j < S; j++) row[j] = 0.0f;
}

/* The heads' forward: for every sequence n and head a, P = softmax(Q K^T / sqrt(dh), causal)
 * [S, S] into t->p, and the head's output P V into its columns of t->att. */
static void attention_forward(const exec_dims *d, const gpt_state *t) {
    int S = d->seq, A = d->heads, h = d->h, dh = h / A, B = d->b / S, ld = GPT_QKV * h;
    float scale = 1.0f / sqrtf((float)dh);
    for (int n = 0; n < B; n++)
        for (int a = 0; a < A; a++) {
            const float *q = t->qkv + (size_t)n * S * ld + (size_t)a * dh, *k = q + h, *v = q + 2 * h;
            float *p = t->p + ((size_t)n * A + a) * S * S;
            exec_gemm(0, 1, S, S, dh, q, ld, k, ld, 0.0f, p, S);
            for (int i = 0; i < S; i++) softmax_causal_row(p + (size_t)i * S, i, S, scale);
            exec_gemm(0, 0, S, dh, S, p, S, v, ld, 0.0f, t->att + (size_t)n * S * h + (size_t)a * dh, h);
        }
}

/* The heads' backward: from datt [R, h] (the gradient at their concatenated outputs), dQ, dK and
 * dV over Q, K and V in t->qkv (each head's own columns, after it has read them). scr holds
 * S S + 3 S dh floats. */
static void attention_backward(const exec_dims *d, const gpt_state *t, const float *datt, float *scr) {
    int S = d->seq, A = d->heads, h = d->h, dh = h / A, B = d->b / S, ld = GPT_QKV * h;
    float scale = 1.0f / sqrtf((float)dh);
    float *dp = scr, *dq = dp + (size_t)S * S, *dk = dq + (size_t)S * dh, *dv = dk + (size_t)S * dh;
    for (int n = 0; n < B; n++)
        for (int a = 0; a < A; a++) {
            float *q = t->qkv + (size_t)n * S * ld + (size_t)a * dh, *k = q + h, *v = q + 2 * h;
            const float *p = t->p + ((size_t)n * A + a) * S * S, *dO = datt + (size_t)n * S * h + (size_t)a * dh;
            exec_gemm(0, 1, S, S, dh, dO, h, v, ld, 0.0f, dp, S);  /* dP = dO V^T */
            exec_gemm(1, 0, S, dh, S, p, S, dO, h, 0.0f, dv, dh);  /* dV = P^T dO */
            /* dS = P (dP - rowsum(P dP)) scale: the softmax's Jacobian (0 where masked, P = 0) */
            for (int i = 0; i < S; i++) {
                const float *pr = p + (size_t)i * S;
                float *dr = dp + (size_t)i * S, dot = 0;
                for (int j = 0; j <= i; j++) dot += pr[j] * dr[j];
                for (int j = 0; j < S; j++) dr[j] = pr[j] * (dr[j] - dot) * scale;
            }
            exec_gemm(0, 0, S, dh, S, dp, S, k, ld, 0.0f, dq, dh); /* dQ = dS K */
            exec_gemm(1, 0, S, dh, S, dp, S, q, ld, 0.0f, dk, dh); /* dK = dS^T Q */
            for (int i = 0; i < S; i++) {
                size_t o = (size_t)i * ld, s = (size_t)i * dh;
                memcpy(q + o, dq + s, (size_t)dh * sizeof(float));
                memcpy(k + o, dk + s, (size_t)dh * sizeof(float));
                memcpy(v + o, dv + s, (size_t)dh * sizeof(float));
            }
        }
}

/* ---------------------------------------------------------------- the block */

/* y [R, n] = bias (every row), before a GEMM adds to it with beta 1. */
static void rows_set(int R, int n, const float *bias, float *y) {
    for (int r = 0; r < R; r++) memcpy(y + (size_t)r * n, bias, (size_t)n * sizeof(float));
}

/* y [R, n] = res + bias (every row). */
static void rows_add(int R, int n, const float *res, const float *bias, float *y) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < n; c++) y[(size_t)r * n + c] = res[(size_t)r * n + c] + bias[c];
}

/* Accumulates the column sums of x [R, n] into s [n] (a bias's gradient). */
static void col_sums(int R, int n, const float *x, float *s) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < n; c++) s[c] += x[(size_t)r * n + c];
}

/* exec_block_fwd for the transformer block. */
static void gpt_forward(const exec_dims *d, const float *p, const float *x, float *state, float *y) {
    int R = d->b, h = d->h, h3 = GPT_QKV * d->h;
    gpt_params w = exec_gpt_params_at(d, p);
    gpt_state t = exec_gpt_state_at(d, state);
    ln_forward(R, h, x, w.g1, w.be1, t.xn1, t.mean1, t.rstd1);
    rows_set(R, h3, w.bqkv, t.qkv);
    exec_gemm(0, 1, R, h3, h, t.xn1, h, w.wqkv, h, 1.0f, t.qkv, h3); /* qkv = xn1 Wqkv^T + bqkv */
    attention_forward(d, &t);
    rows_add(R, h, x, w.bo, t.x2);
    exec_gemm(0, 1, R, h, h, t.att, h, w.wo, h, 1.0f, t.x2, h);      /* x2 = x + att Wo^T + bo */
    ln_forward(R, h, t.x2, w.g2, w.be2, t.xn2, t.mean2, t.rstd2);
    exec_mlp_forward(d, p, t.xn2, t.x2, t.hd, t.a, y);               /* y = x2 + MLP(xn2) */
}

static void gpt_backward_gx(const exec_dims *d, const float *p, const float *x, const float *state, const float *gy,
                            float *gx);

/* exec_block_bwd_i (exec_int.h) for the transformer block. */
static void gpt_backward_i(const exec_dims *d, const float *p, const float *x, float *state, const float *gy, float *gx,
                         float *scratch) {
    int R = d->b, h = d->h, f = d->f, h3 = GPT_QKV * d->h;
    gpt_params w = exec_gpt_params_at(d, p);
    gpt_state t = exec_gpt_state_at(d, state);
    /* the MLP: dH over H (the dense block's I without its input gradient), then dxn2 = dH W1 */
    exec_block_backward_i(d, p, t.hd, gy, NULL, scratch);
    exec_gemm(0, 0, R, h, f, t.hd, f, w.w1, h, 0.0f, t.dxn2, h);
    ln_backward(R, h, t.x2, t.mean2, t.rstd2, w.g2, t.dxn2, gy, t.dx2); /* dx2 = gy + LN2'(dxn2) */
    float *datt = scratch;
    exec_gemm(0, 0, R, h, h, t.dx2, h, w.wo, h, 0.0f, datt, h);          /* datt = dx2 Wo */
    attention_backward(d, &t, datt, scratch + (size_t)R * h);
    exec_gemm(0, 0, R, h, h3, t.qkv, h3, w.wqkv, h, 0.0f, t.dxn1, h);    /* dxn1 = dqkv Wqkv */
    if (gx) gpt_backward_gx(d, p, x, state, gy, gx);
}

/* exec_block_bwd_gx for the transformer block. */
static void gpt_backward_gx(const exec_dims *d, const float *p, const float *x, const float *state, const float *gy,
                          float *gx) {
    (void)gy; /* the residual's share of it is in dx2 */
    gpt_params w = exec_gpt_params_at(d, p);
    gpt_state t = exec_gpt_state_at(d, (float *)state);
    ln_backward(d->b, d->h, x, t.mean1, t.rstd1, w.g1, t.dxn1, t.dx2, gx); /* gx = dx2 + LN1'(dxn1) */
}

/* exec_block_bwd_w for the transformer block. */
static void gpt_backward_w(const exec_dims *d, const float *x, const float *state, const float *gy, float *gp) {
    int R = d->b, h = d->h, h3 = GPT_QKV * d->h;
    gpt_params g = exec_gpt_params_at(d, gp);
    gpt_state t = exec_gpt_state_at(d, (float *)state);
    float *gwqkv = (float *)g.wqkv, *gbqkv = (float *)g.bqkv, *gwo = (float *)g.wo, *gbo = (float *)g.bo;
    exec_block_backward_w(d, t.xn2, t.a, t.hd, gy, gp);                    /* the MLP's W1, b1, W2, b2 */
    ln_backward_w(R, h, t.x2, t.mean2, t.rstd2, t.dxn2, (float *)g.g2, (float *)g.be2);
    exec_gemm(1, 0, h, h, R, t.dx2, h, t.att, h, 1.0f, gwo, h);           /* dWo += dx2^T att */
    col_sums(R, h, t.dx2, gbo);
    exec_gemm(1, 0, h3, h, R, t.qkv, h3, t.xn1, h, 1.0f, gwqkv, h);       /* dWqkv += dqkv^T xn1 */
    col_sums(R, h3, t.qkv, gbqkv);
    ln_backward_w(R, h, x, t.mean1, t.rstd1, t.dxn1, (float *)g.g1, (float *)g.be1);
}

const exec_block_ops exec_gpt_ops = {gpt_floats, gpt_init, gpt_state_floats, gpt_scratch_floats,
                                     gpt_forward, gpt_backward_i, gpt_backward_gx, gpt_backward_w};
