/* cuda_common.c: the CUDA backend's shared pieces: checked calls turned into pl_err messages,
 * the GEMM in fp32/tf32/bf16 through cuBLAS, green contexts (loaded through the runtime's driver
 * entry points, so that nothing links libcuda and a machine without a driver still starts the
 * program), device queries and the cuBLAS rate benchmark. */
#include "exec_cuda.h"
#include "cuda_int.h"
#include "exec_int.h"

#include <cuda.h> /* driver API types only: the functions are fetched at run time */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- errors */

/* Returns the last path component of a source file name (messages carry no build paths). */
static const char *base_name(const char *f) {
    const char *s = strrchr(f, '/');
    return s ? s + 1 : f;
}

int cx_cuda_check(cudaError_t st, const char *what, const char *file, int line, pl_err *e) {
    if (st == cudaSuccess) return PL_OK;
    return pl_errf(e, st == cudaErrorMemoryAllocation ? PL_ENOMEM : PL_EINTERNAL, "%s: CUDA error %s: %s (%s:%d)", what,
                   cudaGetErrorName(st), cudaGetErrorString(st), base_name(file), line);
}

/* ---------------------------------------------------------------- cuBLAS, loaded at run time */

/* Bytes of the reason a run-time load failed; CUDA_VERSION is major x 1000 + minor x 10. */
#define CX_WHY_MAX 512
#define CX_VERSION_MAJOR 1000
#define CX_VERSION_MINOR 10

static struct {
    void *lib;
    char why[CX_WHY_MAX];
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    const char *(*status_name)(cublasStatus_t);
    const char *(*status_string)(cublasStatus_t);
} cb;
static pthread_once_t cb_once = PTHREAD_ONCE_INIT;

/* Loads libcublas and its functions (once, from any thread). */
static void cb_load(void) {
#ifndef PIPELAB_CUBLAS_DIR
#define PIPELAB_CUBLAS_DIR "/usr/local/cuda/lib64"
#endif
    const char *names[] = {"libcublas.so." PL_XSTR(CUBLAS_VER_MAJOR), PIPELAB_CUBLAS_DIR "/libcublas.so." PL_XSTR(CUBLAS_VER_MAJOR),
                           "libcublas.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cb.why, sizeof cb.why, "cannot load %s: %s", names[0], dlerror());
        return;
    }
    struct { const char *name; void **fn; } f[] = {
        {"cublasCreate_v2", (void **)&cb.create}, {"cublasDestroy_v2", (void **)&cb.destroy},
        {"cublasSetStream_v2", (void **)&cb.set_stream}, {"cublasSetWorkspace_v2", (void **)&cb.set_workspace},
        {"cublasGemmEx", (void **)&cb.gemm_ex}, {"cublasGetStatusName", (void **)&cb.status_name},
        {"cublasGetStatusString", (void **)&cb.status_string}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (!(*f[i].fn = dlsym(h, f[i].name))) {
            snprintf(cb.why, sizeof cb.why, "%s has no %s", names[0], f[i].name);
            dlclose(h);
            return;
        }
    cb.lib = h;
}

int cx_blas_check(cublasStatus_t st, const char *what, const char *file, int line, pl_err *e) {
    if (st == CUBLAS_STATUS_SUCCESS) return PL_OK;
    return pl_errf(e, st == CUBLAS_STATUS_ALLOC_FAILED ? PL_ENOMEM : PL_EINTERNAL, "%s: cuBLAS error %s: %s (%s:%d)",
                   what, cb.status_name ? cb.status_name(st) : "?", cb.status_string ? cb.status_string(st) : "?",
                   base_name(file), line);
}

int cx_blas_create(cublasHandle_t *h, cudaStream_t st, pl_err *e) {
    *h = NULL;
    pthread_once(&cb_once, cb_load);
    if (!cb.lib) return pl_errf(e, PL_EINPUT, "cuBLAS: %s", cb.why);
    CXB(cb.create(h));
    CXB(cb.set_stream(*h, st));
    return PL_OK;
}

int cx_blas_workspace(cublasHandle_t h, void *ws, size_t bytes, pl_err *e) {
    CXB(cb.set_workspace(h, ws, bytes));
    return PL_OK;
}

void cx_blas_destroy(cublasHandle_t h) {
    if (h && cb.destroy) cb.destroy(h);
}

/* ---------------------------------------------------------------- names */

int exec_cuda_built(void) { return 1; }

/* The library of the NVIDIA driver the CUDA runtime loads, and the device node the driver's
 * kernel module makes. */
#define CX_DRIVER_LIB "libcuda.so.1"
#define CX_DRIVER_NODE "/dev/nvidiactl"
/* The end of every "no usable GPU" message: what runs without one. */
#define CX_USE_CPU "use --backend cpu"

/* Returns 1 when the driver's library is loaded (the runtime loaded it) or can be, else 0. */
static int driver_present(void) {
    void *h = dlopen(CX_DRIVER_LIB, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) h = dlopen(CX_DRIVER_LIB, RTLD_LAZY | RTLD_LOCAL);
    if (!h) return 0;
    dlclose(h);
    return 1;
}

void cx_no_gpu_why(const cx_no_gpu *w, pl_err *e) {
    int dv = w->driver_version, rv = w->runtime_version;
    if (!w->driver) {
        pl_errf(e, PL_EINPUT, "no usable GPU: no NVIDIA driver found (%s is not installed): pipelab's CUDA backend needs "
                "a GPU and its driver; " CX_USE_CPU, CX_DRIVER_LIB);
        return;
    }
    if (w->st == cudaErrorInsufficientDriver && dv > 0 && dv < rv) {
        pl_errf(e, PL_EINPUT, "no usable GPU: the NVIDIA driver supports CUDA up to %d.%d, this pipelab was built with "
                "CUDA %d.%d (cudaErrorInsufficientDriver): install a newer driver, or build pipelab with an older CUDA "
                "toolkit, or " CX_USE_CPU, dv / CX_VERSION_MAJOR, dv % CX_VERSION_MAJOR / CX_VERSION_MINOR,
                rv / CX_VERSION_MAJOR, rv % CX_VERSION_MAJOR / CX_VERSION_MINOR);
        return;
    }
    if (w->st == cudaErrorInsufficientDriver) {
        pl_errf(e, PL_EINPUT, "no usable GPU: the NVIDIA driver (%s) is there but the CUDA runtime cannot use it "
                "(cudaErrorInsufficientDriver: older than CUDA %d.%d, which this pipelab was built with, or not "
                "working): check nvidia-smi, install a newer driver, or " CX_USE_CPU, CX_DRIVER_LIB,
                rv / CX_VERSION_MAJOR, rv % CX_VERSION_MAJOR / CX_VERSION_MINOR);
        return;
    }
    if (w->st == cudaErrorStubLibrary) {
        pl_errf(e, PL_EINPUT, "no usable GPU: the %s loaded is the CUDA toolkit's stub, not the driver's "
                "(cudaErrorStubLibrary: a .../stubs folder on LD_LIBRARY_PATH?): remove it from the library path, or "
                CX_USE_CPU, CX_DRIVER_LIB);
        return;
    }
    if (w->st == cudaSuccess || w->st == cudaErrorNoDevice) { /* the driver is there, it counted no GPU */
        if (w->visible)
            pl_errf(e, PL_EINPUT, "no usable GPU: CUDA_VISIBLE_DEVICES='%s' hides every GPU from the CUDA runtime "
                    "(cudaErrorNoDevice): unset it or name GPUs that exist (nvidia-smi -L lists them), or " CX_USE_CPU,
                    w->visible);
        else if (!w->node)
            pl_errf(e, PL_EINPUT, "no usable GPU: the NVIDIA driver's library is installed but there is no %s (no GPU, "
                    "or a container started without them, e.g. docker run without --gpus): " CX_USE_CPU, CX_DRIVER_NODE);
        else
            pl_errf(e, PL_EINPUT, "no usable GPU: the NVIDIA driver finds no GPU (cudaErrorNoDevice; nvidia-smi says "
                    "more): " CX_USE_CPU);
        return;
    }
    pl_errf(e, PL_EINPUT, "no usable GPU: %s (%s): " CX_USE_CPU, cudaGetErrorString(w->st), cudaGetErrorName(w->st));
}

int exec_cuda_devices(pl_err *e) {
    int n = 0;
    cudaError_t st = cudaGetDeviceCount(&n);
    if (st == cudaSuccess && n > 0) return n;
    (void)cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
    cx_no_gpu w = {.st = st, .driver = driver_present(), .node = access(CX_DRIVER_NODE, F_OK) == 0,
                   .visible = getenv("CUDA_VISIBLE_DEVICES")};
    if (cudaDriverGetVersion(&w.driver_version) != cudaSuccess) w.driver_version = 0;
    if (cudaRuntimeGetVersion(&w.runtime_version) != cudaSuccess) w.runtime_version = CUDART_VERSION;
    (void)cudaGetLastError();
    cx_no_gpu_why(&w, e);
    return 0;
}

int cx_device_props(int dev, char *name, size_t n, int *sms, pl_err *e) {
    struct cudaDeviceProp p;
    CXC(cudaGetDeviceProperties(&p, dev));
    if (name && n) snprintf(name, n, "%s", p.name);
    if (sms) *sms = p.multiProcessorCount;
    return PL_OK;
}

int exec_cuda_device_info(int dev, char *name, size_t n, pl_err *e) {
    int sms = 0;
    if (cx_device_props(dev, name, n, &sms, e) != PL_OK) return -1;
    return sms;
}

/* ---------------------------------------------------------------- GEMMs */

/* Returns the floats a row-major operand of `rows` rows, of which `cols` columns are used, spans
 * at leading dimension ld (a head's strided view of Q, K or V ends before the row's end). */
static size_t span_of(int rows, int cols, int ld) { return rows > 0 ? (size_t)(rows - 1) * (size_t)ld + (size_t)cols : 0; }

/* Returns op for cuBLAS of a row-major transpose flag. */
static cublasOperation_t op_of(int t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }

int cx_gemm(cx_gemm_ctx *g, int ta, int tb, int M, int N, int K, const float *A, const uint16_t *Abf, int lda,
            const float *B, const uint16_t *Bbf, int ldb, float beta, float *C, int ldc, pl_err *e) {
    const float alpha = 1.0f;
    int timed = g->ev && g->n_ev < g->cap_ev; /* the events bracket the product alone, not conversions */
    /* Row-major C = A' B' is column-major C^T = B'^T A'^T: cuBLAS gets B first, then A, with the
     * same transpose flags and the dimensions (N, M, K). */
    if (g->prec == EXEC_PREC_BF16) {
        size_t na = ta ? span_of(K, M, lda) : span_of(M, K, lda), nb = tb ? span_of(N, K, ldb) : span_of(K, N, ldb);
        if (!Abf) {
            if (na > g->bf_cap) return pl_errf(e, PL_EINTERNAL, "bf16 scratch of %zu elements too small for %zu", g->bf_cap, na);
            CXC(cxk_to_bf16(g->st, g->bfa, A, na));
            Abf = g->bfa;
        }
        if (!Bbf) {
            if (nb > g->bf_cap) return pl_errf(e, PL_EINTERNAL, "bf16 scratch of %zu elements too small for %zu", g->bf_cap, nb);
            CXC(cxk_to_bf16(g->st, g->bfb, B, nb));
            Bbf = g->bfb;
        }
        if (timed) CXC(cudaEventRecord(g->ev[2 * g->n_ev], g->st));
        CXB(cb.gemm_ex(g->h, op_of(tb), op_of(ta), N, M, K, &alpha, Bbf, CUDA_R_16BF, ldb, Abf, CUDA_R_16BF, lda, &beta,
                       C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
        cublasComputeType_t ct = g->prec == EXEC_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        if (timed) CXC(cudaEventRecord(g->ev[2 * g->n_ev], g->st));
        CXB(cb.gemm_ex(g->h, op_of(tb), op_of(ta), N, M, K, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C,
                       CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT));
    }
    if (timed) {
        CXC(cudaEventRecord(g->ev[2 * g->n_ev + 1], g->st));
        g->n_ev++;
    }
    g->flops += 2.0 * M * (double)N * K;
    return PL_OK;
}

/* ---------------------------------------------------------------- one block */

int cx_block_forward(cx_gemm_ctx *g, const exec_dims *d, const cx_dparams *p, const float *x, float *hpre, float *act,
                     float *y, pl_err *e) {
    return cx_mlp_forward(g, d, p, x, x, hpre, act, y, e);
}

int cx_mlp_forward(cx_gemm_ctx *g, const exec_dims *d, const cx_dparams *p, const float *xin, const float *xres,
                   float *hpre, float *act, float *y, pl_err *e) {
    int h = d->h, f = d->f, b = d->b;
    /* hpre [b, f] = xin [b, h] . W1^T */
    if (cx_gemm(g, 0, 1, b, f, h, xin, NULL, h, p->w1, p->w1b, h, 0.0f, hpre, f, e)) return e->code;
    CXC(cxk_bias_gelu(g->st, hpre, p->b1, act, b, f));
    CXC(cxk_residual_bias(g->st, y, xres, p->b2, b, h));
    /* y [b, h] += act [b, f] . W2^T */
    if (cx_gemm(g, 0, 1, b, h, f, act, NULL, f, p->w2, p->w2b, f, 1.0f, y, h, e)) return e->code;
    return PL_OK;
}

int cx_block_backward_i(cx_gemm_ctx *g, const exec_dims *d, const cx_dparams *p, float *hd, const float *gy, float *gx,
                        float *da, pl_err *e) {
    int h = d->h, f = d->f, b = d->b;
    /* dA [b, f] = gy [b, h] . W2 [h, f] */
    if (cx_gemm(g, 0, 0, b, f, h, gy, NULL, h, p->w2, p->w2b, f, 0.0f, da, f, e)) return e->code;
    CXC(cxk_gelu_bwd(g->st, hd, da, (size_t)b * f));
    if (!gx) return PL_OK;
    /* gx [b, h] = gy + dH [b, f] . W1 [f, h] */
    CXC(cudaMemcpyAsync(gx, gy, (size_t)b * h * sizeof(float), cudaMemcpyDeviceToDevice, g->st));
    if (cx_gemm(g, 0, 0, b, h, f, hd, NULL, f, p->w1, p->w1b, h, 1.0f, gx, h, e)) return e->code;
    return PL_OK;
}

int cx_block_backward_w(cx_gemm_ctx *g, const exec_dims *d, const float *x, const float *act, const float *dh,
                        const float *gy, float *gp, pl_err *e) {
    int h = d->h, f = d->f, b = d->b;
    size_t hf = (size_t)h * f;
    float *gw1 = gp, *gb1 = gw1 + hf, *gw2 = gb1 + f, *gb2 = gw2 + hf;
    /* dW1 [f, h] += dH^T [f, b] . x [b, h];  dW2 [h, f] += gy^T [h, b] . act [b, f] */
    if (cx_gemm(g, 1, 0, f, h, b, dh, NULL, f, x, NULL, h, 1.0f, gw1, h, e)) return e->code;
    if (cx_gemm(g, 1, 0, h, f, b, gy, NULL, h, act, NULL, f, 1.0f, gw2, f, e)) return e->code;
    CXC(cxk_colsum_acc(g->st, gb1, dh, b, f));
    CXC(cxk_colsum_acc(g->st, gb2, gy, b, h));
    return PL_OK;
}

/* ---------------------------------------------------------------- green contexts */

typedef CUresult (*pfn_get_res)(CUdevice, CUdevResource *, CUdevResourceType);
typedef CUresult (*pfn_split)(CUdevResource *, unsigned int *, const CUdevResource *, CUdevResource *, unsigned int,
                              unsigned int);
typedef CUresult (*pfn_gen_desc)(CUdevResourceDesc *, CUdevResource *, unsigned int);
typedef CUresult (*pfn_green_create)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
typedef CUresult (*pfn_green_destroy)(CUgreenCtx);
typedef CUresult (*pfn_from_green)(CUcontext *, CUgreenCtx);
typedef CUresult (*pfn_set_current)(CUcontext);
typedef CUresult (*pfn_get_current)(CUcontext *);
typedef CUresult (*pfn_green_stream)(CUstream *, CUgreenCtx, unsigned int, int);
typedef CUresult (*pfn_device_get)(CUdevice *, int);

/* The driver functions green contexts need, fetched once. */
static struct {
    int tried, ok;
    char why[CX_WHY_MAX];
    pfn_get_res get_res;
    pfn_split split;
    pfn_gen_desc gen_desc;
    pfn_green_create create;
    pfn_green_destroy destroy;
    pfn_from_green from_green;
    pfn_set_current set_current;
    pfn_get_current get_current;
    pfn_green_stream stream;
    pfn_device_get device_get;
} drv;

/* Fetches one driver entry point in the ABI of the cuda.h this file was compiled with (its types
 * are the ones used here); returns 0 or -1 (drv.why filled). */
static int fetch(const char *sym, void **fn) {
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t st = cudaGetDriverEntryPointByVersion(sym, fn, CUDA_VERSION, cudaEnableDefault, &q);
    if (st != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
        (void)cudaGetLastError();
        snprintf(drv.why, sizeof drv.why, "the CUDA driver has no %s of CUDA %d.%d (green contexts need a driver at least as "
                 "new as the CUDA pipelab was built with, and 12.4 or newer)", sym, CUDA_VERSION / CX_VERSION_MAJOR, CUDA_VERSION % CX_VERSION_MAJOR / CX_VERSION_MINOR);
        return -1;
    }
    return 0;
}

int cx_green_init(pl_err *e) {
    if (!drv.tried) {
        drv.tried = 1;
        drv.ok = !fetch("cuDeviceGetDevResource", (void **)&drv.get_res) &&
                 !fetch("cuDevSmResourceSplitByCount", (void **)&drv.split) &&
                 !fetch("cuDevResourceGenerateDesc", (void **)&drv.gen_desc) &&
                 !fetch("cuGreenCtxCreate", (void **)&drv.create) && !fetch("cuGreenCtxDestroy", (void **)&drv.destroy) &&
                 !fetch("cuCtxFromGreenCtx", (void **)&drv.from_green) &&
                 !fetch("cuCtxSetCurrent", (void **)&drv.set_current) &&
                 !fetch("cuCtxGetCurrent", (void **)&drv.get_current) &&
                 !fetch("cuGreenCtxStreamCreate", (void **)&drv.stream) && !fetch("cuDeviceGet", (void **)&drv.device_get);
    }
    return drv.ok ? PL_OK : pl_errf(e, PL_EINPUT, "--sm-split: %s", drv.why);
}

/* Turns a driver result into e; returns PL_OK or PL_EINTERNAL. */
static int cu_check(CUresult r, const char *what, pl_err *e) {
    if (r == CUDA_SUCCESS) return PL_OK;
    return pl_errf(e, PL_EINTERNAL, "%s: CUDA driver error %d", what, (int)r);
}

int cx_green_create(int dev, int n, int index, cx_green *g, pl_err *e) {
    memset(g, 0, sizeof *g);
    if (cx_green_init(e) != PL_OK) return e->code;
    CXC(cudaSetDevice(dev));
    CXC(cudaFree(0)); /* the primary context exists first (cuGreenCtxCreate's advice) */
    CUdevice d;
    if (cu_check(drv.device_get(&d, dev), "cuDeviceGet", e)) return e->code;
    CUdevResource all;
    memset(&all, 0, sizeof all);
    if (cu_check(drv.get_res(d, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource", e)) return e->code;
    unsigned total = all.sm.smCount, want = n > 0 ? total / (unsigned)n : total;
    unsigned gran = all.sm.smCoscheduledAlignment ? all.sm.smCoscheduledAlignment : 1;
    unsigned minsz = all.sm.minSmPartitionSize ? all.sm.minSmPartitionSize : 1;
    want -= want % gran;
    if (want < minsz)
        return pl_errf(e, PL_EINPUT, "--sm-split: GPU %d has %u SMs, too few for %d ranks of at least %u SMs each", dev,
                       total, n, minsz);
    CUdevResource *grp = pl_calloc((size_t)n, sizeof *grp);
    if (!grp) return pl_errf(e, PL_ENOMEM, "out of memory");
    unsigned ng = (unsigned)n;
    int rc = cu_check(drv.split(grp, &ng, &all, NULL, 0, want), "cuDevSmResourceSplitByCount", e);
    if (rc == PL_OK && ng < (unsigned)n)
        rc = pl_errf(e, PL_EINPUT, "--sm-split: GPU %d's %u SMs split into only %u groups of %u, not %d", dev, total, ng,
                     want, n);
    CUdevResourceDesc desc = NULL;
    if (rc == PL_OK) rc = cu_check(drv.gen_desc(&desc, &grp[index], 1), "cuDevResourceGenerateDesc", e);
    CUgreenCtx gc = NULL;
    if (rc == PL_OK) rc = cu_check(drv.create(&gc, desc, d, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate", e);
    CUcontext c = NULL;
    if (rc == PL_OK) rc = cu_check(drv.from_green(&c, gc), "cuCtxFromGreenCtx", e);
    if (rc == PL_OK) {
        g->gctx = gc;
        g->ctx = c;
        g->sms = (int)grp[index].sm.smCount;
        g->dev = dev;
    } else if (gc) {
        drv.destroy(gc);
    }
    free(grp);
    return rc;
}

int cx_green_make_current(const cx_green *g, pl_err *e) {
    if (!g->gctx) return PL_OK;
    return cu_check(drv.set_current((CUcontext)g->ctx), "cuCtxSetCurrent (green context)", e);
}

int cx_green_stream(const cx_green *g, cudaStream_t *st, pl_err *e) {
    CUstream s = NULL;
    if (cu_check(drv.stream(&s, (CUgreenCtx)g->gctx, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate", e)) return e->code;
    *st = (cudaStream_t)s;
    return PL_OK;
}

void cx_green_destroy(cx_green *g) {
    if (g->gctx && drv.destroy) {
        /* never leave the thread on a destroyed context: later runtime calls on it (a profile's
         * thread goes on to run) would fail; the device's primary context becomes current */
        CUcontext cur = NULL;
        if (drv.get_current(&cur) == CUDA_SUCCESS && cur == (CUcontext)g->ctx) {
            (void)drv.set_current(NULL);
            (void)cudaSetDevice(g->dev);
        }
        drv.destroy((CUgreenCtx)g->gctx);
    }
    memset(g, 0, sizeof *g);
}

/* ---------------------------------------------------------------- the cuBLAS rate */

/* The seeds of exec_cuda_gemm_rate's random operands, and its untimed products. */
#define RATE_SEED_A 11
#define RATE_SEED_B 12
#define RATE_WARMUPS 3

/* The body of exec_cuda_gemm_rate on buffers mem (A, B, C fp32 and bf16 copies). */
static int rate_on(cx_gemm_ctx *g, int m, int n, int k, int reps, float *A, float *B, float *C, uint16_t *Ab,
                   uint16_t *Bb, double *rate, pl_err *e) {
    CXC(cxk_fill_uniform(g->st, A, (size_t)m * k, RATE_SEED_A));
    CXC(cxk_fill_uniform(g->st, B, (size_t)k * n, RATE_SEED_B));
    CXC(cxk_to_bf16(g->st, Ab, A, (size_t)m * k));
    CXC(cxk_to_bf16(g->st, Bb, B, (size_t)k * n));
    double *ms = pl_calloc((size_t)reps, sizeof(double));
    if (!ms) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = PL_OK;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if (cx_cuda_check(cudaEventCreate(&e0), "cudaEventCreate", __FILE__, __LINE__, e) ||
        cx_cuda_check(cudaEventCreate(&e1), "cudaEventCreate", __FILE__, __LINE__, e)) {
        rc = e->code;
        goto out;
    }
    for (int i = 0; i < RATE_WARMUPS && rc == PL_OK; i++) /* warm-up: handle, heuristics, clocks */
        rc = cx_gemm(g, 0, 0, m, n, k, A, Ab, k, B, Bb, n, 0.0f, C, n, e);
    for (int i = 0; i < reps && rc == PL_OK; i++) {
        float t = 0;
        rc = cx_cuda_check(cudaEventRecord(e0, g->st), "cudaEventRecord", __FILE__, __LINE__, e);
        if (rc == PL_OK) rc = cx_gemm(g, 0, 0, m, n, k, A, Ab, k, B, Bb, n, 0.0f, C, n, e);
        if (rc == PL_OK) rc = cx_cuda_check(cudaEventRecord(e1, g->st), "cudaEventRecord", __FILE__, __LINE__, e);
        if (rc == PL_OK) rc = cx_cuda_check(cudaEventSynchronize(e1), "cudaEventSynchronize", __FILE__, __LINE__, e);
        if (rc == PL_OK) rc = cx_cuda_check(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime", __FILE__, __LINE__, e);
        ms[i] = t;
    }
    if (rc == PL_OK) {
        double med = exec_median(ms, (size_t)reps); /* milliseconds */
        *rate = med > 0 ? CX_FLOPS_PER_FMA * m * (double)n * k / (med * CX_S_PER_MS) : 0;
    }
out:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    free(ms);
    return rc;
}

int exec_cuda_gemm_rate(int m, int n, int k, exec_precision prec, int reps, double *flops_per_s, pl_err *e) {
    *flops_per_s = 0;
    if (m < 1 || n < 1 || k < 1 || reps < 1) return pl_errf(e, PL_EINPUT, "gemm rate: sizes and reps must be >= 1");
    if (exec_cuda_devices(e) < 1) return e->code;
    CXC(cudaSetDevice(0));
    size_t fa = (size_t)m * k, fb = (size_t)k * n, fc = (size_t)m * n;
    size_t bytes = (cx_al64(fa) + cx_al64(fb) + cx_al64(fc)) * sizeof(float) + (cx_al64(fa) + cx_al64(fb)) * 2;
    void *mem = NULL;
    CXC(cudaMalloc(&mem, bytes));
    cx_gemm_ctx g;
    memset(&g, 0, sizeof g);
    g.prec = prec;
    int rc = cx_cuda_check(cudaStreamCreateWithFlags(&g.st, cudaStreamNonBlocking), "cudaStreamCreate", __FILE__, __LINE__, e);
    if (rc == PL_OK) rc = cx_blas_create(&g.h, g.st, e);
    if (rc == PL_OK) {
        float *A = mem, *B = A + cx_al64(fa), *C = B + cx_al64(fb);
        uint16_t *Ab = (uint16_t *)(void *)(C + cx_al64(fc)), *Bb = Ab + cx_al64(fa);
        rc = rate_on(&g, m, n, k, reps, A, B, C, Ab, Bb, flops_per_s, e);
    }
    cx_blas_destroy(g.h);
    if (g.st) cudaStreamDestroy(g.st);
    cudaFree(mem);
    return rc;
}
