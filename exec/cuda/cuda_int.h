/* cuda_int.h: internals of the CUDA backend shared by its files: the kernels' launchers
 * (cuda_kernels.cu), checked CUDA/cuBLAS calls that fill a pl_err, the GEMM in the selected
 * precision, and green contexts through the driver entry points. */
#ifndef EXEC_CUDA_INT_H
#define EXEC_CUDA_INT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "pl_common.h"

#define CXK_MSE_THREADS 256
/* Blocks of the loss's first stage (cxk_mse_grad): fixed, so that the order of its partial sums,
 * and the loss, are the same on every GPU. */
#define CXK_MSE_BLOCKS 128
/* Seconds of a millisecond (CUDA events measure milliseconds), and the FLOPs of a multiply-add. */
#define CX_S_PER_MS 1e-3
#define CX_FLOPS_PER_FMA 2.0
/* Bytes of a GPU's name, and of the description of the GPUs a run used (exec_result.device). */
#define CX_NAME_MAX 96
#define CX_DEVICE_TEXT_MAX 256

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- kernels (cuda_kernels.cu) */

/* hpre [rows, cols] += b [cols]; act = gelu(hpre). */
cudaError_t cxk_bias_gelu(cudaStream_t st, float *hpre, const float *b, float *act, int rows, int cols);
/* y [rows, cols] = x + b [cols]. */
cudaError_t cxk_residual_bias(cudaStream_t st, float *y, const float *x, const float *b, int rows, int cols);
/* hd [n] = da * gelu'(hd). */
cudaError_t cxk_gelu_bwd(cudaStream_t st, float *hd, const float *da, size_t n);
/* g [cols] += column sums of m [rows, cols]. */
cudaError_t cxk_colsum_acc(cudaStream_t st, float *g, const float *m, int rows, int cols);
/* y [n] -> dL/dy = 2 (y - t) / n in place; *loss = mean (y - t)^2 (device double); part: device
 * scratch of CXK_MSE_BLOCKS doubles (the blocks' partial sums). */
cudaError_t cxk_mse_grad(cudaStream_t st, float *y, const float *t, size_t n, double *part, double *loss);
/* o = w - lr (mu m + grad * scale) (m updated when not NULL); grad = 0; obf = bf16(o) if not NULL. */
cudaError_t cxk_sgd(cudaStream_t st, const float *w, float *o, float *grad, float *mom, uint16_t *obf, size_t n,
                    float scale, float lr, float mu);
/* dst [n] = bf16(src). */
cudaError_t cxk_to_bf16(cudaStream_t st, uint16_t *dst, const float *src, size_t n);
/* x [n] = pseudo-random values in [-1, 1) from seed. */
cudaError_t cxk_fill_uniform(cudaStream_t st, float *x, size_t n, unsigned long long seed);
/* The transformer block's kernels (gpt.c's loops on the GPU; one thread block per row, sums in
 * double as the CPU's). LayerNorm forward: y [rows, cols] = g (x - mean) rstd + be, keeping each
 * row's mean and rstd = 1 / sqrt(var + eps). */
cudaError_t cxk_ln_fwd(cudaStream_t st, const float *x, const float *g, const float *be, float *y, float *mean, float *rstd,
                       int rows, int cols);
/* LayerNorm input gradient: gx = res + rstd (dy g - mean(dy g) - xh mean(dy g xh)). */
cudaError_t cxk_ln_bwd(cudaStream_t st, const float *x, const float *mean, const float *rstd, const float *g,
                       const float *dy, const float *res, float *gx, int rows, int cols);
/* LayerNorm gain and bias gradients: dg [cols] += sum_r dy xh, dbe [cols] += sum_r dy. */
cudaError_t cxk_ln_bwd_w(cudaStream_t st, const float *x, const float *mean, const float *rstd, const float *dy, float *dg,
                         float *dbe, int rows, int cols);
/* Causal softmax in place over rows score rows of S entries (row r is query r mod S): p = exp(s
 * scale - max) / sum over j <= i, 0 for j > i. */
cudaError_t cxk_softmax_causal(cudaStream_t st, float *p, int rows, int S, float scale);
/* Its backward in place: dp -> p (dp - sum_j p dp) scale (row by row, p from the forward). */
cudaError_t cxk_softmax_bwd(cudaStream_t st, const float *p, float *dp, int rows, int S, float scale);
/* y [rows, cols] = bias [cols] in every row. */
cudaError_t cxk_rows_bias(cudaStream_t st, float *y, const float *bias, int rows, int cols);

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include <cublas_v2.h>

/* ---------------------------------------------------------------- checked calls (cuda_common.c) */

/* Returns PL_OK when st is cudaSuccess, else fills e with "what: CUDA error NAME: text (file:line)"
 * and returns PL_ENOMEM for an allocation failure, PL_EINTERNAL otherwise. */
int cx_cuda_check(cudaError_t st, const char *what, const char *file, int line, pl_err *e);
/* The same for a cuBLAS status. */
int cx_blas_check(cublasStatus_t st, const char *what, const char *file, int line, pl_err *e);

/* cuBLAS is loaded at run time (dlopen of libcublas.so.<major of the cublas_api.h compiled
 * against>, once): a program that never computes on a GPU does not pay for mapping it (about
 * 0.2 s and 200 MB per process start). Creates a handle bound to stream st. */
int cx_blas_create(cublasHandle_t *h, cudaStream_t st, pl_err *e);
/* Gives handle h its workspace (256-byte aligned) instead of one it would allocate. */
int cx_blas_workspace(cublasHandle_t h, void *ws, size_t bytes, pl_err *e);
void cx_blas_destroy(cublasHandle_t h);

/* Return e->code from the enclosing function (which has `pl_err *e`) when the call fails. */
#define CXC(call) do { if (cx_cuda_check((call), #call, __FILE__, __LINE__, e) != PL_OK) return e->code; } while (0)
#define CXB(call) do { if (cx_blas_check((call), #call, __FILE__, __LINE__, e) != PL_OK) return e->code; } while (0)

/* ---------------------------------------------------------------- GEMMs */

/* What a GEMM needs: the handle (bound to the stream), the precision, bf16 scratch for operands
 * that have no bf16 copy, and optional event timing. */
typedef struct cx_gemm_ctx {
    cublasHandle_t h;
    cudaStream_t st;
    int prec;               /* exec_precision */
    uint16_t *bfa, *bfb;    /* [bf_cap] bf16 scratch for A and B (bf16 only) */
    size_t bf_cap;
    cudaEvent_t *ev;        /* [2 cap_ev] start/end events of the timed GEMMs, NULL = untimed */
    int n_ev, cap_ev;
    double flops;           /* FLOPs issued (2 M N K each) */
} cx_gemm_ctx;

/* C [M, N] = A' B' + beta C, row-major (A' = A^T when ta, B' likewise), alpha 1, in g->prec:
 * fp32 (FP32 compute), tf32 (FP32 with TF32 tensor cores) or bf16 (operands rounded to bf16;
 * Abf/Bbf are their bf16 copies when the caller has them, else they are converted into g's
 * scratch), accumulation and C in fp32. Returns PL_OK or an error. */
int cx_gemm(cx_gemm_ctx *g, int ta, int tb, int M, int N, int K, const float *A, const uint16_t *Abf, int lda,
            const float *B, const uint16_t *Bbf, int ldb, float beta, float *C, int ldc, pl_err *e);

/* ---------------------------------------------------------------- one block of the model */

/* Device pointers to one block's parameters (exec_int.h's layout: W1 [f, h], b1 [f], W2 [h, f],
 * b2 [h]) and, in bf16 runs, to W1 and W2 in the bf16 copy of the same layout (else NULL). */
typedef struct cx_dparams {
    const float *w1, *b1, *w2, *b2;
    const uint16_t *w1b, *w2b;
} cx_dparams;

struct exec_dims;
/* The model.c math on g's stream (g->st): forward hpre = x W1^T + b1, act = gelu(hpre),
 * y = x + act W2^T + b2 (y must not alias x). */
int cx_block_forward(cx_gemm_ctx *g, const struct exec_dims *d, const cx_dparams *p, const float *x, float *hpre,
                     float *act, float *y, pl_err *e);
/* Input gradient: da [b f] = gy W2 (scratch); hd: H -> dH = da gelu'(H) in place;
 * gx = gy + dH W1 (skipped when gx is NULL). */
int cx_block_backward_i(cx_gemm_ctx *g, const struct exec_dims *d, const cx_dparams *p, float *hd, const float *gy,
                        float *gx, float *da, pl_err *e);
/* Weight gradient, accumulated into gp (the block's layout): dW1 += dH^T x, db1 += sum dH,
 * dW2 += gy^T act, db2 += sum gy. */
int cx_block_backward_w(cx_gemm_ctx *g, const struct exec_dims *d, const float *x, const float *act, const float *dh,
                        const float *gy, float *gp, pl_err *e);

/* The dense block's MLP with its input and residual apart (exec_mlp_forward on the GPU):
 * hpre = xin W1^T + b1, act = gelu(hpre), y = xres + act W2^T + b2. cx_block_forward is it
 * with xin = xres = x. */
int cx_mlp_forward(cx_gemm_ctx *g, const struct exec_dims *d, const cx_dparams *p, const float *xin, const float *xres,
                   float *hpre, float *act, float *y, pl_err *e);

/* Any block (exec_config.block) on g's stream, with the CPU's state layout (exec_block_state_
 * floats; the transformer's: exec_gpt_state_at) and scratch (exec_block_scratch_floats): what
 * the runs and the profiler call (cuda_gpt.c). p->w1 is the block's first parameter, p->w1b (bf16
 * runs; NULL: the weights are converted for each GEMM) the first of its bf16 copy, of the same
 * layout. */
int cx_blk_forward(cx_gemm_ctx *g, const struct exec_dims *d, const cx_dparams *p, const float *x, float *state, float *y,
                   pl_err *e);
int cx_blk_backward_i(cx_gemm_ctx *g, const struct exec_dims *d, const cx_dparams *p, const float *x, float *state,
                      const float *gy, float *gx, float *scratch, pl_err *e);
int cx_blk_backward_w(cx_gemm_ctx *g, const struct exec_dims *d, const float *x, const float *state, const float *gy,
                      float *gp, pl_err *e);
/* Upper bound of the GEMMs one block issues for a microbatch in F, I and W together, with a
 * recomputed F (the GEMM timing events). */
long cx_blk_gemms(const struct exec_dims *d);
/* The floats of the largest operand a bf16 GEMM of the block converts (cx_gemm's scratch, one
 * each for A and B): its activations, the heads' strided views and score matrices; not its
 * weights, whose bf16 copies the callers pass. */
size_t cx_blk_bf16_floats(const struct exec_dims *d);

/* ---------------------------------------------------------------- green contexts */

/* A share of one GPU's SMs: a green context made current on the calling thread, and streams in
 * it. Opaque handles so that this header needs no driver API types. */
typedef struct cx_green {
    void *gctx;     /* CUgreenCtx */
    void *ctx;      /* CUcontext converted from it */
    int sms;        /* SMs it holds */
    int dev;        /* its GPU */
} cx_green;

/* Loads the driver's green-context functions (once; call it on one thread before the ranks
 * start). Returns PL_OK, or PL_EINPUT when the driver has none (older than CUDA 12.4). */
int cx_green_init(pl_err *e);
/* Splits GPU dev's SMs into n equal groups (the driver rounds to its granularity, 8 SMs on
 * Hopper) and creates green context `index` of them in g. Returns PL_OK, or PL_EINPUT with the
 * reason (driver older than CUDA 12.4, too few SMs for n groups). */
int cx_green_create(int dev, int n, int index, cx_green *g, pl_err *e);
/* Makes g current on the calling thread (runtime calls then run in its SM share). */
int cx_green_make_current(const cx_green *g, pl_err *e);
/* Creates a non-blocking stream inside g. */
int cx_green_stream(const cx_green *g, cudaStream_t *st, pl_err *e);
void cx_green_destroy(cx_green *g);

/* Returns the name of a cudaDeviceProp-visible device, its SM count in *sms. */
int cx_device_props(int dev, char *name, size_t n, int *sms, pl_err *e);

/* What exec_cuda_devices found when the runtime gave it no GPU: the status of cudaGetDeviceCount
 * (cudaSuccess: it counted none), whether the driver's library (libcuda.so.1) loads and its
 * device node (/dev/nvidiactl) exists, CUDA_VISIBLE_DEVICES (NULL: unset), and the CUDA versions
 * of the driver (0: unknown) and of the runtime (major x 1000 + minor x 10). */
typedef struct cx_no_gpu {
    cudaError_t st;
    int driver, node;
    const char *visible;
    int driver_version, runtime_version;
} cx_no_gpu;
/* Fills e (PL_EINPUT) with why w leaves no usable GPU, "no usable GPU: ...", and what to do:
 * no driver installed, a driver too old, every GPU hidden by CUDA_VISIBLE_DEVICES, no device,
 * or the runtime's own words; each ends in "use --backend cpu". */
void cx_no_gpu_why(const cx_no_gpu *w, pl_err *e);

/* Rounds n up to a multiple of 64 floats (256 bytes). */
static inline size_t cx_al64(size_t n) { return (n + 63) & ~(size_t)63; }

#endif /* !__CUDACC__ */

#endif
