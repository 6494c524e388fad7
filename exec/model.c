/* model.c: the executor's trainable model in fp32: one dense block's forward, its split
 * backward (I: input gradient, W: weight gradient), the MSE loss, seeded data and weights. */
#include "exec_int.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
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

/* Pair j of (seed, stream): N(0, 1) elements 2j and 2j + 1, both outputs of one Box-Muller
 * transform of the independent uniforms 2j and 2j + 1 (one log, one sqrt and one sincos for two
 * elements). Any element can still be generated alone (no sequential state: threads and ranks
 * agree). */
static void normal_pair(uint64_t seed, uint64_t stream, uint64_t j, double z[2]) {
    double u1 = uniform_at(seed, stream, 2 * j), u2 = uniform_at(seed, stream, 2 * j + 1);
    double r = sqrt(-2.0 * log(u1)), t = TWO_PI * u2;
    z[0] = r * cos(t);
    z[1] = r * sin(t);
}

float exec_normal_at(uint64_t seed, uint64_t stream, uint64_t i, double std) {
    double z[2];
    normal_pair(seed, stream, i / 2, z);
    return (float)(std * z[i % 2]);
}

/* Fills x[i0 .. i1 - 1] with elements i0 .. i1 - 1 of (seed, stream) (i0 even). */
static void fill_range(uint64_t seed, uint64_t stream, double std, float *x, size_t i0, size_t i1) {
    double z[2];
    size_t i = i0;
    for (; i + 1 < i1; i += 2) {
        normal_pair(seed, stream, i / 2, z);
        x[i] = (float)(std * z[0]);
        x[i + 1] = (float)(std * z[1]);
    }
    if (i < i1) x[i] = exec_normal_at(seed, stream, i, std);
}

/* Threads a fill on this thread splits over (exec_fill_team_set: exec_data_build's, while it
 * fills the target network's blocks, the one setup step no rank thread runs), and the least
 * elements worth a split. Each element depends only on its index: the same values on any. */
static _Thread_local int fill_team = 1;
#define FILL_SPLIT_MIN ((size_t)1 << 16)
#define FILL_MAX_TEAM 16

typedef struct fill_part {
    uint64_t seed, stream;
    double std;
    float *x;
    size_t i0, i1;
} fill_part;

int exec_fill_team_set(int team) {
    int old = fill_team;
    fill_team = team < 1 ? 1 : team;
    return old;
}

/* Runs fn on each of the n (at most FILL_MAX_TEAM) records of `size` bytes at args: the first on
 * this thread, the others on threads of their own (on this one when a thread cannot start);
 * returns when all are done. */
static void team_run(void *(*fn)(void *), void *args, size_t size, int n) {
    pthread_t th[FILL_MAX_TEAM];
    int started[FILL_MAX_TEAM] = {0};
    char *a = args;
    for (int t = 1; t < n; t++) started[t] = pthread_create(&th[t], NULL, fn, a + (size_t)t * size) == 0;
    for (int t = 0; t < n; t++)
        if (!started[t]) fn(a + (size_t)t * size);
    for (int t = 1; t < n; t++)
        if (started[t]) pthread_join(th[t], NULL);
}

static void *fill_part_main(void *arg) {
    const fill_part *f = arg;
    fill_range(f->seed, f->stream, f->std, f->x, f->i0, f->i1);
    return NULL;
}

void exec_fill_normal_std(uint64_t seed, uint64_t stream, double std, float *x, size_t n) {
    int team = fill_team < FILL_MAX_TEAM ? fill_team : FILL_MAX_TEAM;
    if (team <= 1 || n < FILL_SPLIT_MIN) {
        fill_range(seed, stream, std, x, 0, n);
        return;
    }
    fill_part part[FILL_MAX_TEAM];
    size_t per = ((n + (size_t)team - 1) / (size_t)team + 1) & ~(size_t)1; /* even: a pair never splits */
    for (int t = 0; t < team; t++) {
        size_t i0 = (size_t)t * per, i1 = i0 + per < n ? i0 + per : n;
        part[t] = (fill_part){seed, stream, std, x, i0 < n ? i0 : n, i1};
    }
    team_run(fill_part_main, part, sizeof *part, team);
}

void exec_fill_normal(uint64_t seed, uint64_t stream, float *x, size_t n) { exec_fill_normal_std(seed, stream, 1.0, x, n); }

/* ---------------------------------------------------------------- shapes, weights */

void exec_dims_of(const exec_config *cfg, exec_dims *d) {
    int gpt = cfg->block == EXEC_BLOCK_GPT;
    d->h = cfg->hidden;
    d->f = cfg->ffn > 0 ? cfg->ffn : FFN_MULT * cfg->hidden;
    long long rows = (long long)cfg->microbatch_size * (gpt ? cfg->seq : 1);
    d->b = rows <= INT_MAX ? (int)rows : 0; /* more rows than an int holds: exec_dims_check refuses it */
    d->layers = cfg->layers;
    d->block = (int)cfg->block;
    d->heads = gpt ? cfg->heads : 0;
    d->seq = gpt ? cfg->seq : 1;
}

/* The dense block's parameters: W1 [f, h], b1 [f], W2 [h, f], b2 [h]. */
static size_t mlp_floats(const exec_dims *d) {
    return 2 * (size_t)d->h * (size_t)d->f + (size_t)d->f + (size_t)d->h;
}

/* The dense block's initial weights of block `block` (its streams from BLOCK_STREAMS block). */
static void mlp_init(const exec_dims *d, uint64_t seed, int block, float *p) {
    exec_mlp_init(d, seed, BLOCK_STREAMS * (uint64_t)block, p);
}

void exec_mlp_init(const exec_dims *d, uint64_t seed, uint64_t st, float *p) {
    size_t hf = (size_t)d->h * (size_t)d->f;
    float *w1 = p, *b1 = w1 + hf, *w2 = b1 + d->f, *b2 = w2 + hf;
    double s1 = 1.0 / sqrt((double)d->h);
    double s2 = 1.0 / sqrt(2.0 * (d->layers > 0 ? d->layers : 1) * (double)d->f);
    exec_fill_normal_std(seed, st + STREAM_W1, s1, w1, hf);
    exec_fill_normal_std(seed, st + STREAM_B1, EXEC_BIAS_STD, b1, (size_t)d->f);
    exec_fill_normal_std(seed, st + STREAM_W2, s2, w2, hf);
    exec_fill_normal_std(seed, st + STREAM_B2, EXEC_BIAS_STD, b2, (size_t)d->h);
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

/* exec_int.h (trans_a, trans_b: 1 = transposed). */
void exec_gemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc) {
    double t0 = pl_now_s();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                A, lda, B, ldb, beta, C, ldc);
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
    exec_mlp_forward(d, p, x, x, hpre, act, y);
}

void exec_mlp_forward(const exec_dims *d, const float *p, const float *xin, const float *xres, float *hpre, float *act,
                      float *y) {
    int h = d->h, f = d->f, b = d->b;
    size_t hf = (size_t)h * (size_t)f;
    const float *w1 = p, *b1 = w1 + hf, *w2 = b1 + f, *b2 = w2 + hf;
    /* hpre [b, f] = xin [b, h] . W1^T [h, f] */
    exec_gemm(0, 1, b, f, h, xin, h, w1, h, 0.0f, hpre, f);
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
        for (int c = 0; c < h; c++) y[(size_t)r * h + c] = xres[(size_t)r * h + c] + b2[c];
    /* y [b, h] += act [b, f] . W2^T [f, h] */
    exec_gemm(0, 1, b, h, f, act, f, w2, f, 1.0f, y, h);
}

void exec_block_backward_i(const exec_dims *d, const float *p, float *hd, const float *gy,
                           float *gx, float *scratch) {
    int h = d->h, f = d->f, b = d->b;
    size_t hf = (size_t)h * (size_t)f, bf = (size_t)b * (size_t)f;
    const float *w1 = p, *w2 = w1 + hf + f;
    /* dA [b, f] = gy [b, h] . W2 [h, f] */
    exec_gemm(0, 0, b, f, h, gy, h, w2, f, 0.0f, scratch, f);
    /* dH = dA * gelu'(H), in place over H (H is not needed after this) */
    for (size_t i = 0; i < bf; i++) hd[i] = scratch[i] * gelu_grad(hd[i]);
    if (gx) exec_block_backward_gx(d, p, hd, gy, gx);
}

void exec_block_backward_gx(const exec_dims *d, const float *p, const float *hd, const float *gy, float *gx) {
    int h = d->h, f = d->f, b = d->b;
    /* gx [b, h] = gy (residual) + dH [b, f] . W1 [f, h] */
    memcpy(gx, gy, (size_t)b * h * sizeof(float));
    exec_gemm(0, 0, b, h, f, hd, f, p, h, 1.0f, gx, h);
}

void exec_block_backward_w(const exec_dims *d, const float *x, const float *act, const float *dh,
                           const float *gy, float *gp) {
    int h = d->h, f = d->f, b = d->b;
    size_t hf = (size_t)h * (size_t)f;
    float *gw1 = gp, *gb1 = gw1 + hf, *gw2 = gb1 + f, *gb2 = gw2 + hf;
    /* dW1 [f, h] += dH^T [f, b] . x [b, h]   (beta = 1 accumulates in place, no temporary) */
    exec_gemm(1, 0, f, h, b, dh, f, x, h, 1.0f, gw1, h);
    /* dW2 [h, f] += gy^T [h, b] . act [b, f] */
    exec_gemm(1, 0, h, f, b, gy, h, act, f, 1.0f, gw2, f);
    for (int r = 0; r < b; r++) {
        const float *dr = dh + (size_t)r * f, *gr = gy + (size_t)r * h;
        for (int c = 0; c < f; c++) gb1[c] += dr[c];
        for (int c = 0; c < h; c++) gb2[c] += gr[c];
    }
}

/* ---------------------------------------------------------------- any block */

/* The dense block's state: H/dH [b, f], then gelu(H) [b, f]; its backward's scratch: dA [b, f]. */
static size_t mlp_state_floats(const exec_dims *d) { return 2 * (size_t)d->b * (size_t)d->f; }
static size_t mlp_scratch_floats(const exec_dims *d) { return (size_t)d->b * (size_t)d->f; }

/* The dense block's passes over its state (H/dH, then A). */
static void mlp_fwd(const exec_dims *d, const float *p, const float *x, float *state, float *y) {
    exec_block_forward(d, p, x, state, state + (size_t)d->b * d->f, y);
}
static void mlp_bwd_i(const exec_dims *d, const float *p, const float *x, float *state, const float *gy, float *gx,
                      float *scratch) {
    (void)x;
    exec_block_backward_i(d, p, state, gy, gx, scratch);
}
static void mlp_bwd_gx(const exec_dims *d, const float *p, const float *x, const float *state, const float *gy, float *gx) {
    (void)x;
    exec_block_backward_gx(d, p, state, gy, gx);
}
static void mlp_bwd_w(const exec_dims *d, const float *x, const float *state, const float *gy, float *gp) {
    exec_block_backward_w(d, x, state + (size_t)d->b * d->f, state, gy, gp);
}

static const exec_block_ops mlp_ops = {mlp_floats, mlp_init, mlp_state_floats, mlp_scratch_floats,
                                       mlp_fwd, mlp_bwd_i, mlp_bwd_gx, mlp_bwd_w};

/* Returns the operations of d's block. */
static const exec_block_ops *ops_of(const exec_dims *d) { return d->block == EXEC_BLOCK_GPT ? &exec_gpt_ops : &mlp_ops; }

size_t exec_block_floats(const exec_dims *d) { return ops_of(d)->floats(d); }
void exec_block_init(const exec_dims *d, uint64_t seed, int block, float *p) { ops_of(d)->init(d, seed, block, p); }
size_t exec_block_state_floats(const exec_dims *d) { return ops_of(d)->state_floats(d); }
size_t exec_block_scratch_floats(const exec_dims *d) { return ops_of(d)->scratch_floats(d); }

void exec_block_fwd(const exec_dims *d, const float *p, const float *x, float *state, float *y) {
    ops_of(d)->forward(d, p, x, state, y);
}

void exec_block_bwd_i(const exec_dims *d, const float *p, const float *x, float *state, const float *gy, float *gx,
                      float *scratch) {
    ops_of(d)->backward_i(d, p, x, state, gy, gx, scratch);
}

void exec_block_bwd_gx(const exec_dims *d, const float *p, const float *x, const float *state, const float *gy,
                       float *gx) {
    ops_of(d)->backward_gx(d, p, x, state, gy, gx);
}

void exec_block_bwd_w(const exec_dims *d, const float *x, const float *state, const float *gy, float *gp) {
    ops_of(d)->backward_w(d, x, state, gy, gp);
}

/* The FLOPs of one block's GEMMs for a microbatch of R = b rows: the MLP's two GEMMs are 2 R h f
 * each in F, I (dA, dx) and W (dW1, dW2); the model's first block skips I's dx GEMM. The
 * transformer adds QKV (6 R h^2) and the output projection (2 R h^2) in F and W and their input
 * gradients in I, and attention's products as computed (full S x S, the causal half included):
 * scores and values 2 R S h each in F, and dP, dV, dQ, dK in I (8 R S h); its first block keeps
 * every GEMM (W needs LN1's output gradient). With f = 4h: F 24 R h^2 + 4 R S h, I 24 R h^2 +
 * 8 R S h, W 24 R h^2 (Megatron; Zero Bubble's Table 1). */
void exec_block_flops(const exec_dims *d, double *f, double *i, double *i0, double *w) {
    double R = d->b, h = d->h, ff = d->f, mlp = 2 * R * h * ff;
    if (d->block != EXEC_BLOCK_GPT) {
        *f = *i = *w = 2 * mlp;
        *i0 = mlp;
        return;
    }
    double proj = 8 * R * h * h, att = 2 * R * d->seq * h;
    *f = 2 * mlp + proj + 2 * att;
    *i = *i0 = 2 * mlp + proj + 4 * att;
    *w = 2 * mlp + proj;
}

/* ---------------------------------------------------------------- checks, names */

/* The largest tokens per sequence and heads the transformer block accepts. */
#define EXEC_MAX_SEQ 65536
#define EXEC_MAX_HEADS 4096

int exec_check_block(const exec_config *c, pl_err *e) {
    if (c->block == EXEC_BLOCK_MLP) return PL_OK;
    if (c->block != EXEC_BLOCK_GPT) return pl_errf(e, PL_EINPUT, "unknown block kind %d", (int)c->block);
    if (c->seq < 1 || c->seq > EXEC_MAX_SEQ)
        return pl_errf(e, PL_EINPUT, "transformer: seq %d out of range 1..%d", c->seq, EXEC_MAX_SEQ);
    if (c->heads < 1 || c->heads > EXEC_MAX_HEADS || c->hidden % c->heads != 0)
        return pl_errf(e, PL_EINPUT, "transformer: heads %d must be at least 1 and divide the width %d", c->heads, c->hidden);
    if ((long long)c->microbatch_size * c->seq > INT_MAX / 4)
        return pl_errf(e, PL_EINPUT, "transformer: %d sequences of %d tokens per microbatch are too many rows",
                       c->microbatch_size, c->seq);
    return PL_OK;
}

/* ---------------------------------------------------------------- names */

void exec_block_describe(const exec_dims *d, char *buf, size_t n) {
    if (d->block == EXEC_BLOCK_GPT)
        snprintf(buf, n, "transformer block (width %d, %d heads, %d tokens per sequence: LayerNorm, causal attention, "
                 "LayerNorm, Linear %d->%d, GELU, Linear %d->%d, residuals)", d->h, d->heads, d->seq, d->h, d->f, d->f, d->h);
    else
        snprintf(buf, n, "dense block (Linear %d->%d, GELU, Linear %d->%d, residual)", d->h, d->f, d->f, d->h);
}

void exec_model_name(const exec_config *cfg, char *buf, size_t n) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (d.block == EXEC_BLOCK_GPT) snprintf(buf, n, "gpt_h%d_a%d_s%d_L%d", d.h, d.heads, d.seq, cfg->layers);
    else snprintf(buf, n, "mlp_h%d_f%d_L%d", d.h, d.f, cfg->layers);
}

void exec_model_spec(const exec_result *r, char *buf, size_t n) {
    if (r->block == EXEC_BLOCK_GPT)
        snprintf(buf, n, "transformer:layers=%d,hidden=%d,heads=%d,seq=%d,microbatch=%d", r->layers, r->hidden, r->heads,
                 r->seq, r->microbatch_size);
    else if (r->ffn % r->hidden == 0)
        snprintf(buf, n, "mlp:width=%d,depth=%d,microbatch=%d,ffn_mult=%d", r->hidden, r->layers, r->microbatch_size,
                 r->ffn / r->hidden);
    else
        snprintf(buf, n, "mlp:width=%d,depth=%d,microbatch=%d,ffn=%d", r->hidden, r->layers, r->microbatch_size, r->ffn);
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

void exec_sgd_step(float *o, const float *w, float *g, float *mom, size_t n, float scale, float lr, float mu) {
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * scale;
        if (mom) gi = mom[i] = mu * mom[i] + gi;
        o[i] = w[i] - lr * gi;
        g[i] = 0.0f;
    }
}

/* ---------------------------------------------------------------- data */

/* The target network runs over the data set DATA_ROWS rows at a time (or one microbatch, when it
 * has more): one GEMM over many microbatches rather than one per microbatch, whose rows (8 in a
 * small dense microbatch) leave the weights' packing the larger part of the work. */
#define DATA_ROWS 256

/* Most threads the data set is built on (team_run's). */
#define DATA_MAX_THREADS FILL_MAX_TEAM

/* One thread's share of a target block's forward over the data set: chunks first, first + step,
 * ... of c microbatches (entries [k, k + c) from k = chunk * c), with its own state buffer. */
typedef struct data_share {
    const exec_dims *d;
    const float *p;
    float *t, *work;
    size_t sf;
    int n, c, first, step;
} data_share;

static void *data_share_main(void *arg) {
    const data_share *u = arg;
    size_t bh = (size_t)u->d->b * u->d->h;
    for (int k = u->first * u->c; k < u->n; k += u->step * u->c) {
        int n = u->n - k < u->c ? u->n - k : u->c;
        exec_dims dn = *u->d;
        dn.b = n * u->d->b;
        float *t = u->t + (size_t)k * bh;
        exec_block_fwd(&dn, u->p, t, u->work, u->work + u->sf);
        memcpy(t, u->work + u->sf, (size_t)n * bh * sizeof(float));
    }
    return NULL;
}

int exec_data_build(const exec_config *cfg, int used, exec_data *out, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    memset(out, 0, sizeof *out);
    out->d = exec_dataset_microbatches(cfg);
    size_t bh = (size_t)d.b * (size_t)d.h;
    size_t nb = exec_block_floats(&d);
    /* c microbatches a forward: the rows of c microbatches are c b rows of one block's input
     * (rows and sequences are independent in both blocks); the entries built are whole chunks,
     * those of the whole set (a GEMM's rounding may depend on its rows: the same chunks give
     * every entry the same bits whatever the run reads) */
    int c = d.b >= DATA_ROWS ? 1 : DATA_ROWS / d.b;
    if (c > out->d) c = out->d;
    int chunks = (out->d + c - 1) / c, cpus[DATA_MAX_THREADS];
    if (used > 0 && (used + c - 1) / c < chunks) chunks = (used + c - 1) / c;
    out->n = chunks * c < out->d ? chunks * c : out->d;
    int cores = exec_platform_cores(cpus, DATA_MAX_THREADS);
    if (cores < 1) cores = 1;
    int T = cores < chunks ? cores : chunks;
    exec_blas_init(); /* each thread's GEMMs on its own thread */
    exec_dims dc = d;
    dc.b = c * d.b;
    size_t sf = exec_block_state_floats(&dc), ch = (size_t)c * bh, wf = exec_line_round(sf + ch);
    out->x = pl_calloc((size_t)out->d * bh, sizeof(float));  /* [D, b, h] */
    out->t = pl_calloc((size_t)out->d * bh, sizeof(float));  /* [D, b, h] */
    float *p = pl_calloc(nb, sizeof(float));                 /* one target block */
    float *work = pl_calloc((size_t)T * wf, sizeof(float));  /* each thread's block state, y [c b, h] */
    if (!out->x || !out->t || !p || !work) {
        free(p);
        free(work);
        exec_data_free(out);
        return pl_errf(e, PL_ENOMEM, "out of memory building a data set of %d microbatches", out->d);
    }
    for (int k = 0; k < out->n; k++) exec_fill_normal(cfg->data_seed, (uint64_t)k, out->x + (size_t)k * bh, bh);
    memcpy(out->t, out->x, (size_t)out->n * bh * sizeof(float));
    /* the target network: block by block over the entries built, each block's weights filled on
     * every core and its chunks run on T threads (the same values as on one thread: each chunk is
     * the same GEMMs) */
    data_share u[DATA_MAX_THREADS];
    for (int i = 0; i < T; i++) u[i] = (data_share){&d, p, out->t, work + (size_t)i * wf, sf, out->n, c, i, T};
    for (int l = 0; l < cfg->layers; l++) {
        int team = exec_fill_team_set(cores);
        exec_block_init(&d, cfg->target_seed, l, p);
        exec_fill_team_set(team);
        team_run(data_share_main, u, sizeof *u, T);
    }
    free(p);
    free(work);
    return PL_OK;
}

/* exec_int.h. exec_data_build's allocations: x and t (calloc'ed, only the n entries it builds
 * written), then while it builds, one target block and each thread's state. */
double exec_data_bytes(const exec_config *cfg, int used, double *build) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    int D = exec_dataset_microbatches(cfg), cpus[DATA_MAX_THREADS];
    int c = d.b >= DATA_ROWS ? 1 : DATA_ROWS / (d.b > 0 ? d.b : 1);
    if (c > D) c = D;
    int chunks = (D + c - 1) / c;
    if (used > 0 && (used + c - 1) / c < chunks) chunks = (used + c - 1) / c;
    int n = chunks * c < D ? chunks * c : D, cores = exec_platform_cores(cpus, DATA_MAX_THREADS);
    int T = cores < 1 ? 1 : cores < chunks ? cores : chunks;
    exec_dims dc = d;
    dc.b = c * d.b;
    double bh = (double)d.b * d.h;
    *build = sizeof(float) * ((double)exec_block_floats(&d) +
                              (double)T * (double)exec_line_round(exec_block_state_floats(&dc) + (size_t)c * (size_t)bh));
    return 2.0 * sizeof(float) * n * bh;
}

void exec_data_free(exec_data *dt) {
    free(dt->x);
    free(dt->t);
    dt->x = dt->t = NULL;
}

const char *exec_blas_init(void) { return exec_platform_blas_init(); }
