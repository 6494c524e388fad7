/* model.c: the executor's trainable model in fp32: one dense block's forward, its split
 * backward (I: input gradient, W: weight gradient), the MSE loss, seeded data and weights. */
#include "exec_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cblas.h> /* the standard CBLAS declarations; OpenBLAS exports the same ABI */

#include "platform.h"

/* ---------------------------------------------------------------- random numbers */

/* A uniform double from the top 53 bits of a 64-bit hash. */
#define DOUBLE_SHIFT 11
#define TWO_POW_53 9007199254740992.0
#define TWO_PI 6.283185307179586
/* The default ffn width per unit of width (f = 4h), and the random streams of a block's
 * parameters (W1, b1, W2, b2) with the standard deviation of its biases. */
#define FFN_MULT 4
enum { STREAM_W1, STREAM_B1, STREAM_W2, STREAM_B2, BLOCK_STREAMS };
#define BIAS_STD 0.01

/* Returns the splitmix64 successor hash of z: a well-mixed 64-bit value. */
static uint64_t splitmix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Returns a uniform number in (0, 1) from the 53 high bits of a hash of (seed, stream, i). */
static double uniform_at(uint64_t seed, uint64_t stream, uint64_t i) {
    uint64_t z = splitmix64(seed ^ splitmix64(stream ^ splitmix64(i)));
    return ((double)(z >> DOUBLE_SHIFT) + 0.5) * (1.0 / TWO_POW_53);
}

/* Returns N(0, 1) element i of (seed, stream) by Box-Muller on two independent uniforms, so
 * any element can be generated alone (no sequential state: threads and ranks agree). */
static double normal_at(uint64_t seed, uint64_t stream, uint64_t i) {
    double u1 = uniform_at(seed, stream, 2 * i), u2 = uniform_at(seed, stream, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2);
}

void exec_fill_normal(uint64_t seed, uint64_t stream, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = (float)normal_at(seed, stream, i);
}

/* ---------------------------------------------------------------- shapes, weights */

void exec_dims_of(const exec_config *cfg, exec_dims *d) {
    d->h = cfg->hidden;
    d->f = cfg->ffn > 0 ? cfg->ffn : FFN_MULT * cfg->hidden;
    d->b = cfg->microbatch_size;
    d->layers = cfg->layers;
}

size_t exec_block_floats(const exec_dims *d) {
    return 2 * (size_t)d->h * (size_t)d->f + (size_t)d->f + (size_t)d->h;
}

void exec_block_init(const exec_dims *d, uint64_t seed, int block, float *p) {
    size_t hf = (size_t)d->h * (size_t)d->f;
    uint64_t st = BLOCK_STREAMS * (uint64_t)block;
    float *w1 = p, *b1 = w1 + hf, *w2 = b1 + d->f, *b2 = w2 + hf;
    double s1 = 1.0 / sqrt((double)d->h);
    double s2 = 1.0 / sqrt(2.0 * (d->layers > 0 ? d->layers : 1) * (double)d->f);
    for (size_t i = 0; i < hf; i++) w1[i] = (float)(s1 * normal_at(seed, st + STREAM_W1, i));
    for (int i = 0; i < d->f; i++) b1[i] = (float)(BIAS_STD * normal_at(seed, st + STREAM_B1, (uint64_t)i));
    for (size_t i = 0; i < hf; i++) w2[i] = (float)(s2 * normal_at(seed, st + STREAM_W2, i));
    for (int i = 0; i < d->h; i++) b2[i] = (float)(BIAS_STD * normal_at(seed, st + STREAM_B2, (uint64_t)i));
}

/* ---------------------------------------------------------------- GEMM clock */

/* The calling thread's GEMM clock: seconds spent inside cblas_sgemm and the FLOPs done there.
 * Every GEMM of the model goes through gemm() below, so a worker can tell its GEMM time from the
 * rest of its compute (GELU, biases, copies, the loss, STEP) and bench_exec can compare it with
 * the same sgemm calls run alone. Two clock reads per GEMM (tens of ns against >= microseconds). */
static _Thread_local double gemm_s_tl, gemm_flops_tl;

void exec_gemm_clock(double *s, double *flops) {
    *s = gemm_s_tl;
    *flops = gemm_flops_tl;
}

/* C [M, N] = A' B' + beta C (row-major, alpha 1; A' = A or A^T by ta, B' likewise), timed on the
 * thread's GEMM clock. */
static void gemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
    double t0 = pl_now_s();
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    gemm_s_tl += pl_now_s() - t0;
    gemm_flops_tl += 2.0 * M * (double)N * K;
}

/* ---------------------------------------------------------------- GELU (tanh form) */

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* Returns tanh(x) in float by a [13/6] rational minimax approximation on [-7.905, 7.905] (the
 * one of Eigen's ptanh_float; outside, tanh is 1 to float precision): max error 4e-7 absolute,
 * 3e-7 relative near 0, i.e. a few ulp. Branch-free, so the GELU loops vectorize; libm's
 * tanhf, called per element, made GELU a fifth of a worker's compute. cuda/cuda_kernels.cu
 * mirrors it as a device function on purpose: this file is the CPU reference the CUDA backend
 * is tested against (DESIGN.md §6), and stays plain C. */
static inline float tanh_fast(float x) {
    const float c = 7.90531110763549805f;
    x = x > c ? c : x;
    x = x < -c ? -c : x;
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

/* Returns gelu(x) = 0.5 x (1 + tanh(k (x + c x^3))). */
static inline float gelu(float x) {
    return 0.5f * x * (1.0f + tanh_fast(GELU_K * (x + GELU_C * x * x * x)));
}

/* Returns d gelu / dx at x. */
static inline float gelu_grad(float x) {
    float t = tanh_fast(GELU_K * (x + GELU_C * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

/* ---------------------------------------------------------------- one block */

void exec_block_forward(const exec_dims *d, const float *p, const float *x, float *hpre,
                        float *act, float *y) {
    int h = d->h, f = d->f, b = d->b;
    size_t hf = (size_t)h * (size_t)f;
    const float *w1 = p, *b1 = w1 + hf, *w2 = b1 + f, *b2 = w2 + hf;
    /* hpre [b, f] = x [b, h] . W1^T [h, f] */
    gemm(CblasNoTrans, CblasTrans, b, f, h, x, h, w1, h, 0.0f, hpre, f);
    /* one pass: hpre += b1; act = gelu(hpre) */
    for (int r = 0; r < b; r++) {
        float *hr = hpre + (size_t)r * f, *ar = act + (size_t)r * f;
        for (int c = 0; c < f; c++) {
            float v = hr[c] + b1[c];
            hr[c] = v;
            ar[c] = gelu(v);
        }
    }
    for (int r = 0; r < b; r++)
        for (int c = 0; c < h; c++) y[(size_t)r * h + c] = x[(size_t)r * h + c] + b2[c];
    /* y [b, h] += act [b, f] . W2^T [f, h] */
    gemm(CblasNoTrans, CblasTrans, b, h, f, act, f, w2, f, 1.0f, y, h);
}

void exec_block_backward_i(const exec_dims *d, const float *p, float *hd, const float *gy,
                           float *gx, float *scratch) {
    int h = d->h, f = d->f, b = d->b;
    size_t hf = (size_t)h * (size_t)f, bf = (size_t)b * (size_t)f;
    const float *w1 = p, *w2 = w1 + hf + f;
    /* dA [b, f] = gy [b, h] . W2 [h, f] */
    gemm(CblasNoTrans, CblasNoTrans, b, f, h, gy, h, w2, f, 0.0f, scratch, f);
    /* dH = dA * gelu'(H), in place over H (H is not needed after this) */
    for (size_t i = 0; i < bf; i++) hd[i] = scratch[i] * gelu_grad(hd[i]);
    if (gx) exec_block_backward_gx(d, p, hd, gy, gx);
}

void exec_block_backward_gx(const exec_dims *d, const float *p, const float *hd, const float *gy, float *gx) {
    int h = d->h, f = d->f, b = d->b;
    /* gx [b, h] = gy (residual) + dH [b, f] . W1 [f, h] */
    memcpy(gx, gy, (size_t)b * h * sizeof(float));
    gemm(CblasNoTrans, CblasNoTrans, b, h, f, hd, f, p, h, 1.0f, gx, h);
}

void exec_block_backward_w(const exec_dims *d, const float *x, const float *act, const float *dh,
                           const float *gy, float *gp) {
    int h = d->h, f = d->f, b = d->b;
    size_t hf = (size_t)h * (size_t)f;
    float *gw1 = gp, *gb1 = gw1 + hf, *gw2 = gb1 + f, *gb2 = gw2 + hf;
    /* dW1 [f, h] += dH^T [f, b] . x [b, h]   (beta = 1 accumulates in place, no temporary) */
    gemm(CblasTrans, CblasNoTrans, f, h, b, dh, f, x, h, 1.0f, gw1, h);
    /* dW2 [h, f] += gy^T [h, b] . act [b, f] */
    gemm(CblasTrans, CblasNoTrans, h, f, b, gy, h, act, f, 1.0f, gw2, f);
    for (int r = 0; r < b; r++) {
        const float *dr = dh + (size_t)r * f, *gr = gy + (size_t)r * h;
        for (int c = 0; c < f; c++) gb1[c] += dr[c];
        for (int c = 0; c < h; c++) gb2[c] += gr[c];
    }
}

double exec_mse_grad(const exec_dims *d, float *y, const float *t) {
    size_t n = (size_t)d->b * (size_t)d->h;
    double loss = 0.0;
    float scale = 2.0f / (float)n;
    for (size_t i = 0; i < n; i++) {
        float diff = y[i] - t[i];
        loss += (double)diff * (double)diff;
        y[i] = scale * diff;
    }
    return loss / (double)n;
}

/* ---------------------------------------------------------------- data */

int exec_data_build(const exec_config *cfg, exec_data *out, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    memset(out, 0, sizeof *out);
    out->d = exec_dataset_microbatches(cfg);
    size_t bh = (size_t)d.b * (size_t)d.h, bf = (size_t)d.b * (size_t)d.f;
    size_t nb = exec_block_floats(&d);
    out->x = pl_calloc((size_t)out->d * bh, sizeof(float));  /* [D, b, h] */
    out->t = pl_calloc((size_t)out->d * bh, sizeof(float));  /* [D, b, h] */
    float *p = pl_calloc(nb, sizeof(float));                 /* one target block */
    float *work = pl_calloc(2 * bf + bh, sizeof(float));     /* hpre [b, f], act [b, f], y [b, h] */
    if (!out->x || !out->t || !p || !work) {
        free(p);
        free(work);
        exec_data_free(out);
        return pl_errf(e, PL_ENOMEM, "out of memory building a data set of %d microbatches", out->d);
    }
    for (int k = 0; k < out->d; k++) exec_fill_normal(cfg->data_seed, (uint64_t)k, out->x + (size_t)k * bh, bh);
    memcpy(out->t, out->x, (size_t)out->d * bh * sizeof(float));
    /* the target network: block by block over the whole data set */
    for (int l = 0; l < cfg->layers; l++) {
        exec_block_init(&d, cfg->target_seed, l, p);
        for (int k = 0; k < out->d; k++) {
            float *t = out->t + (size_t)k * bh;
            exec_block_forward(&d, p, t, work, work + bf, work + 2 * bf);
            memcpy(t, work + 2 * bf, bh * sizeof(float));
        }
    }
    free(p);
    free(work);
    return PL_OK;
}

void exec_data_free(exec_data *dt) {
    free(dt->x);
    free(dt->t);
    dt->x = dt->t = NULL;
}

const char *exec_blas_init(void) { return exec_platform_blas_init(); }
