/* cuda_kernels.cu: the CUDA backend's small kernels (everything but the GEMMs, which are
 * cuBLAS's): bias + GELU, residual + bias, the GELU backward, bias-gradient column sums, the MSE
 * loss and its gradient, the SGD update, fp32 -> bf16 conversion. Row-major [rows, cols]
 * buffers, the layouts of exec_int.h. Each launcher returns the launch's cudaError_t. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_int.h"

/* Threads per block of the elementwise kernels and of the column sums; the most blocks a
 * grid-stride launch uses. */
#define CXK_THREADS 256u
#define CXK_COLSUM_THREADS 128u
#define CXK_MAX_BLOCKS (65535u * 8u)
/* A uniform double from the top 53 bits of a 64-bit hash (splitmix64, as model.c). */
#define CXK_DOUBLE_SHIFT 11
#define CXK_TWO_POW_53 9007199254740992.0

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

/* tanh by the rational approximation the CPU model uses (model.c), so that both backends
 * compute the same GELU to a few ulp and differ only in the GEMMs' summation order. A mirror,
 * not a copy to remove: model.c is the plain-C reference this kernel is tested against
 * (tests/exec_cuda, DESIGN.md §6), and a __device__ function cannot live in it without making
 * the CPU reference CUDA code; the coefficients must stay equal to model.c's. */
__device__ __forceinline__ static float tanh_fast(float x) {
    const float c = 7.90531110763549805f;
    x = fminf(fmaxf(x, -c), c);
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

__device__ __forceinline__ static float gelu(float x) {
    return 0.5f * x * (1.0f + tanh_fast(GELU_K * (x + GELU_C * x * x * x)));
}

__device__ __forceinline__ static float gelu_grad(float x) {
    float t = tanh_fast(GELU_K * (x + GELU_C * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

/* Returns the grid size for n elements at `threads` per block, capped (grid-stride loops). */
static unsigned grid_for(size_t n, unsigned threads) {
    size_t g = (n + threads - 1) / threads;
    if (g > CXK_MAX_BLOCKS) g = CXK_MAX_BLOCKS;
    return g ? (unsigned)g : 1u;
}

/* hpre [rows, cols] += b [cols]; act = gelu(hpre). */
__global__ static void k_bias_gelu(float *hpre, const float *b, float *act, size_t rows, int cols) {
    size_t n = rows * (size_t)cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = hpre[i] + b[i % (size_t)cols];
        hpre[i] = v;
        act[i] = gelu(v);
    }
}

/* y [rows, cols] = x + b [cols]. */
__global__ static void k_residual_bias(float *y, const float *x, const float *b, size_t rows, int cols) {
    size_t n = rows * (size_t)cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = x[i] + b[i % (size_t)cols];
}

/* hd = da * gelu'(hd), n elements. */
__global__ static void k_gelu_bwd(float *hd, const float *da, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        hd[i] = da[i] * gelu_grad(hd[i]);
}

/* g [cols] += sum over rows of m [rows, cols]: one thread per column, rows in order
 * (deterministic; coalesced across the warp). */
__global__ static void k_colsum_acc(float *g, const float *m, int rows, int cols) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int r = 0; r < rows; r++) s += m[(size_t)r * cols + c];
        g[c] += s;
    }
}

/* Sums v [blockDim.x] (shared) into v[0] in a fixed tree order; blockDim.x a power of two. */
__device__ static void block_tree_sum(double *v) {
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) v[threadIdx.x] += v[threadIdx.x + w];
        __syncthreads();
    }
}

/* y [n] -> 2 (y - t) / n in place, and part[block] = its elements' sum of (y - t)^2 in double.
 * A fixed grid (CXK_MSE_BLOCKS x CXK_MSE_THREADS), each thread its fixed elements in order: the
 * partial sums are the same on every run and GPU. (One block for all n serialized a microbatch's
 * loss on one SM: 1.1 ms for 256 x 2048 on an H200, 10-20 times the block's forward.) */
__global__ static void k_mse_part(float *__restrict__ y, const float *__restrict__ t, size_t n, double *__restrict__ part) {
    __shared__ double v[CXK_MSE_THREADS];
    float scale = 2.0f / (float)n;
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float d = y[i] - t[i];
        s += (double)d * (double)d;
        y[i] = scale * d;
    }
    v[threadIdx.x] = s;
    __syncthreads();
    block_tree_sum(v);
    if (threadIdx.x == 0) part[blockIdx.x] = v[0];
}

/* *loss = (sum of part [CXK_MSE_BLOCKS]) / n, in a fixed order: one block of CXK_MSE_BLOCKS. */
__global__ static void k_mse_sum(const double *part, size_t n, double *loss) {
    __shared__ double v[CXK_MSE_BLOCKS];
    v[threadIdx.x] = part[threadIdx.x];
    __syncthreads();
    block_tree_sum(v);
    if (threadIdx.x == 0) *loss = v[0] / (double)n;
}

/* SGD (PyTorch's momentum form) over n parameters: g = grad / nacc; v = mu v + g (with mom);
 * o = w - lr g; grad = 0; obf = bf16(o) when given. o may equal w. */
__global__ static void k_sgd(const float *w, float *o, float *grad, float *mom, uint16_t *obf, size_t n, float scale,
                             float lr, float mu) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i] * scale;
        if (mom) {
            g = mu * mom[i] + g;
            mom[i] = g;
        }
        float v = w[i] - lr * g;
        o[i] = v;
        grad[i] = 0.0f;
        if (obf) {
            obf[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        }
    }
}

/* dst [n] = bf16(src), round to nearest even. */
__global__ static void k_to_bf16(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
    }
}

/* x [n] = a deterministic pseudo-random value in [-1, 1) from (seed, i) (benchmark operands). */
__global__ static void k_fill_uniform(float *x, size_t n, unsigned long long seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long z = seed + 0x9e3779b97f4a7c15ULL * (i + 1);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        x[i] = (float)((double)(z >> CXK_DOUBLE_SHIFT) * (2.0 / CXK_TWO_POW_53) - 1.0);
    }
}

/* ---------------------------------------------------------------- the transformer block's rows */

/* Threads of a row's block (a power of two: the reductions halve it). */
#define CXK_ROW_THREADS 128u
/* LayerNorm's epsilon: gpt.c's. */
#define CXK_LN_EPS 1e-5

/* Returns the sum of v over the thread block (every thread gets it); sh holds blockDim.x doubles. */
__device__ static double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    double s = sh[0];
    __syncthreads();
    return s;
}

/* Returns the maximum of v over the thread block (every thread gets it). */
__device__ static float block_max(float v, float *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + w]);
        __syncthreads();
    }
    float m = sh[0];
    __syncthreads();
    return m;
}

__global__ static void k_ln_fwd(const float *x, const float *g, const float *be, float *y, float *mean, float *rstd, int cols) {
    __shared__ double sh[CXK_ROW_THREADS];
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    double s = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    double mu = block_sum(s, sh) / cols, ss = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) ss += ((double)xr[c] - mu) * ((double)xr[c] - mu);
    float m = (float)mu, rs = (float)(1.0 / sqrt(block_sum(ss, sh) / cols + CXK_LN_EPS));
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = m;
        rstd[blockIdx.x] = rs;
    }
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = g[c] * ((xr[c] - m) * rs) + be[c];
}

__global__ static void k_ln_bwd(const float *x, const float *mean, const float *rstd, const float *g, const float *dy,
                                const float *res, float *gx, int cols) {
    __shared__ double sh[CXK_ROW_THREADS];
    size_t o = (size_t)blockIdx.x * cols;
    float m = mean[blockIdx.x], rs = rstd[blockIdx.x];
    double s1 = 0, s2 = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        double dxh = (double)dy[o + c] * g[c];
        s1 += dxh;
        s2 += dxh * ((x[o + c] - m) * rs);
    }
    float a1 = (float)(block_sum(s1, sh) / cols), a2 = (float)(block_sum(s2, sh) / cols);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float xh = (x[o + c] - m) * rs;
        gx[o + c] = res[o + c] + rs * (dy[o + c] * g[c] - a1 - xh * a2);
    }
}

/* One thread per column, rows in order (deterministic). */
__global__ static void k_ln_bwd_w(const float *x, const float *mean, const float *rstd, const float *dy, float *dg, float *dbe,
                                  int rows, int cols) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        float sg = 0, sb = 0;
        for (int r = 0; r < rows; r++) {
            size_t o = (size_t)r * cols + c;
            sg += dy[o] * ((x[o] - mean[r]) * rstd[r]);
            sb += dy[o];
        }
        dg[c] += sg;
        dbe[c] += sb;
    }
}

__global__ static void k_softmax_causal(float *p, int S, float scale) {
    __shared__ double sh[CXK_ROW_THREADS];
    __shared__ float shm[CXK_ROW_THREADS];
    float *row = p + (size_t)blockIdx.x * S;
    int i = (int)(blockIdx.x % (unsigned)S);
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, row[j] * scale);
    mx = block_max(mx, shm);
    double s = 0;
    for (int j = threadIdx.x; j <= i; j += blockDim.x) s += expf(row[j] * scale - mx);
    float inv = (float)(1.0 / block_sum(s, sh));
    for (int j = threadIdx.x; j < S; j += blockDim.x) row[j] = j <= i ? expf(row[j] * scale - mx) * inv : 0.0f;
}

__global__ static void k_softmax_bwd(const float *p, float *dp, int S, float scale) {
    __shared__ double sh[CXK_ROW_THREADS];
    size_t o = (size_t)blockIdx.x * S;
    double s = 0;
    for (int j = threadIdx.x; j < S; j += blockDim.x) s += (double)p[o + j] * dp[o + j];
    float dot = (float)block_sum(s, sh);
    for (int j = threadIdx.x; j < S; j += blockDim.x) dp[o + j] = p[o + j] * (dp[o + j] - dot) * scale;
}

__global__ static void k_rows_bias(float *y, const float *bias, size_t rows, int cols) {
    size_t n = rows * (size_t)cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = bias[i % (size_t)cols];
}

extern "C" {

cudaError_t cxk_ln_fwd(cudaStream_t st, const float *x, const float *g, const float *be, float *y, float *mean, float *rstd,
                       int rows, int cols) {
    k_ln_fwd<<<(unsigned)rows, CXK_ROW_THREADS, 0, st>>>(x, g, be, y, mean, rstd, cols);
    return cudaGetLastError();
}

cudaError_t cxk_ln_bwd(cudaStream_t st, const float *x, const float *mean, const float *rstd, const float *g,
                       const float *dy, const float *res, float *gx, int rows, int cols) {
    k_ln_bwd<<<(unsigned)rows, CXK_ROW_THREADS, 0, st>>>(x, mean, rstd, g, dy, res, gx, cols);
    return cudaGetLastError();
}

cudaError_t cxk_ln_bwd_w(cudaStream_t st, const float *x, const float *mean, const float *rstd, const float *dy, float *dg,
                         float *dbe, int rows, int cols) {
    k_ln_bwd_w<<<grid_for((size_t)cols, CXK_COLSUM_THREADS), CXK_COLSUM_THREADS, 0, st>>>(x, mean, rstd, dy, dg, dbe, rows, cols);
    return cudaGetLastError();
}

cudaError_t cxk_softmax_causal(cudaStream_t st, float *p, int rows, int S, float scale) {
    k_softmax_causal<<<(unsigned)rows, CXK_ROW_THREADS, 0, st>>>(p, S, scale);
    return cudaGetLastError();
}

cudaError_t cxk_softmax_bwd(cudaStream_t st, const float *p, float *dp, int rows, int S, float scale) {
    k_softmax_bwd<<<(unsigned)rows, CXK_ROW_THREADS, 0, st>>>(p, dp, S, scale);
    return cudaGetLastError();
}

cudaError_t cxk_rows_bias(cudaStream_t st, float *y, const float *bias, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    k_rows_bias<<<grid_for(n, CXK_THREADS), CXK_THREADS, 0, st>>>(y, bias, (size_t)rows, cols);
    return cudaGetLastError();
}


cudaError_t cxk_bias_gelu(cudaStream_t st, float *hpre, const float *b, float *act, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    k_bias_gelu<<<grid_for(n, CXK_THREADS), CXK_THREADS, 0, st>>>(hpre, b, act, (size_t)rows, cols);
    return cudaGetLastError();
}

cudaError_t cxk_residual_bias(cudaStream_t st, float *y, const float *x, const float *b, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    k_residual_bias<<<grid_for(n, CXK_THREADS), CXK_THREADS, 0, st>>>(y, x, b, (size_t)rows, cols);
    return cudaGetLastError();
}

cudaError_t cxk_gelu_bwd(cudaStream_t st, float *hd, const float *da, size_t n) {
    k_gelu_bwd<<<grid_for(n, CXK_THREADS), CXK_THREADS, 0, st>>>(hd, da, n);
    return cudaGetLastError();
}

cudaError_t cxk_colsum_acc(cudaStream_t st, float *g, const float *m, int rows, int cols) {
    k_colsum_acc<<<grid_for((size_t)cols, CXK_COLSUM_THREADS), CXK_COLSUM_THREADS, 0, st>>>(g, m, rows, cols);
    return cudaGetLastError();
}

cudaError_t cxk_mse_grad(cudaStream_t st, float *y, const float *t, size_t n, double *part, double *loss) {
    k_mse_part<<<CXK_MSE_BLOCKS, CXK_MSE_THREADS, 0, st>>>(y, t, n, part);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    k_mse_sum<<<1, CXK_MSE_BLOCKS, 0, st>>>(part, n, loss);
    return cudaGetLastError();
}

cudaError_t cxk_sgd(cudaStream_t st, const float *w, float *o, float *grad, float *mom, uint16_t *obf, size_t n,
                    float scale, float lr, float mu) {
    k_sgd<<<grid_for(n, CXK_THREADS), CXK_THREADS, 0, st>>>(w, o, grad, mom, obf, n, scale, lr, mu);
    return cudaGetLastError();
}

cudaError_t cxk_to_bf16(cudaStream_t st, uint16_t *dst, const float *src, size_t n) {
    k_to_bf16<<<grid_for(n, CXK_THREADS), CXK_THREADS, 0, st>>>(dst, src, n);
    return cudaGetLastError();
}

cudaError_t cxk_fill_uniform(cudaStream_t st, float *x, size_t n, unsigned long long seed) {
    k_fill_uniform<<<grid_for(n, CXK_THREADS), CXK_THREADS, 0, st>>>(x, n, seed);
    return cudaGetLastError();
}

} /* extern "C" */
