/* test_exec_cuda.c: the CUDA backend against the CPU backend, which is its oracle: one block's
 * F, I and W on fresh random inputs in fp32, tf32 and bf16 (relative error bounds of
 * METHOD-style norms, every output element written), whole runs against the CPU executor on
 * the same seed, every schedule against the sequential reference (as the CPU tests do), the
 * memory bookkeeping equal to the CPU's, the Zero Bubble rate from the recorded actions, faults
 * naming rank and action, the SM split, the profiler. Without a usable GPU no test is registered
 * and the binary exits 77 (CTest: skipped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "cuda_int.h"
#include "exec.h"
#include "exec_cuda.h"
#include "exec_int.h"
#include "pl_sched.h"
#include "pl_test.h"
#include "test_cuda_ctx.h"
#include "test_exec_cuda.h"

/* ---------------------------------------------------------------- helpers */

/* Relative error bounds per precision (METHOD: fp32 far under 1e-3, tf32 near 3e-4 per
 * product, bf16 operands 1e-3..1e-2): for one block's outputs, and for whole runs' weight
 * updates (w_final - w_initial, several steps through several blocks) and losses. A wrong
 * transpose, offset, missing bias or update gives errors of order 1. */
const double BLOCK_TOL[3] = {1e-5, 3e-3, 2e-2};
const double UPDATE_TOL[3] = {1e-3, 2e-2, 8e-2};
const double LOSS_TOL[3] = {1e-4, 5e-3, 3e-2};

/* Returns the model configuration of the run tests: h 64, f 128, b 8, 3 timed passes. */
exec_config run_cfg(int layers) {
    exec_config c;
    exec_config_default(&c);
    c.hidden = 64;
    c.ffn = 128;
    c.layers = layers;
    c.microbatch_size = 8;
    c.dataset_microbatches = 16;
    c.lr = 0.1;
    c.warmup_passes = 0;
    c.timed_passes = 3;
    c.oversubscribe = 1;
    c.return_weights = 1;
    c.timeout_s = 60;
    c.backend = EXEC_BACKEND_CUDA;
    return c;
}

/* Returns the lowered schedule of a generator (NULL reported through CUnit). */
static sched *lowered_rc(const char *kind, int p, int m, int v, int iters, sched_recompute rc) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, v, iters, rc};
    sched *s = sched_generate(kind, &o, &e);
    if (s) s->recompute = rc;
    sched *l = s ? sched_lower(s, &e) : NULL;
    if (!l) fprintf(stderr, "schedule %s: %s\n", kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(l);
    sched_free(s);
    return l;
}

/* The same without recomputation. */
static sched *lowered(const char *kind, int p, int m, int v, int iters) {
    return lowered_rc(kind, p, m, v, iters, SCHED_RECOMPUTE_NONE);
}

/* Returns ||a - b|| / ||b - base|| (base NULL: / ||b||) over n floats. */
double rel_norm(const float *a, const float *b, const float *base, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i], r = base ? (double)b[i] - (double)base[i] : (double)b[i];
        if (isnan(d)) return INFINITY; /* NaN never passes */
        num += d * d;
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

/* The initial weights of cfg's model. */
static float *initial_weights(const exec_config *c) {
    exec_dims d;
    exec_dims_of(c, &d);
    size_t nf = exec_block_floats(&d);
    float *w = calloc((size_t)c->layers * nf, sizeof(float));
    for (int l = 0; l < c->layers; l++) exec_block_init(&d, c->init_seed, l, w + (size_t)l * nf);
    return w;
}

/* Runs s with c on the GPU; returns rc (message printed on failure). */
static int gpu_run(const sched *s, const exec_config *c, exec_result *r) {
    pl_err e;
    pl_err_clear(&e);
    int rc = exec_cuda_run(s, c, r, &e);
    if (rc) fprintf(stderr, "exec_cuda_run %s: %s\n", s->kind, e.msg);
    return rc;
}

/* ---------------------------------------------------------------- one block against model.c */

/* Device buffers of the block test. */
typedef struct blk {
    float *p, *x, *gy, *hd, *a, *y, *gx, *gp, *da;
    uint16_t *pb;
} blk;

/* Copies n floats to the device (asserting). */
static float *up(const float *h, size_t n) {
    float *d = NULL;
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&d, n * sizeof(float)), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

/* Copies n floats back from the device. */
static void down(float *h, const float *d, size_t n) {
    CU_ASSERT_EQUAL(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
}

/* Returns 1 when all n floats are finite (every element was written over the NaN poison). */
static int all_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* One block of an awkward shape (h 96, f 200, b 7) forward, I and W on the GPU in precision
 * prec against model.c's fp32 functions on the same fresh random inputs, outputs poisoned with
 * NaN before. */
static void block_case(exec_precision prec, uint64_t seed) {
    exec_dims d = {.h = 96, .f = 200, .b = 7, .layers = 3};
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, bf = (size_t)d.b * d.f;
    float *p = calloc(nf, sizeof(float)), *x = calloc(bh, sizeof(float)), *gy = calloc(bh, sizeof(float));
    float *hd = calloc(bf, sizeof(float)), *a = calloc(bf, sizeof(float)), *y = calloc(bh, sizeof(float));
    float *gx = calloc(bh, sizeof(float)), *gp = calloc(nf, sizeof(float)), *scr = calloc(bf, sizeof(float));
    float *nan = malloc((nf > bf ? nf : bf) * sizeof(float));
    for (size_t i = 0; i < (nf > bf ? nf : bf); i++) nan[i] = NAN;
    exec_block_init(&d, seed, 1, p);
    exec_fill_normal(seed + 1, 0, x, bh);
    exec_fill_normal(seed + 1, 1, gy, bh);
    exec_fill_normal(seed + 1, 2, gp, nf); /* W accumulates into an existing gradient */
    for (size_t i = 0; i < nf; i++) gp[i] *= 0.1f;
    blk g;
    g.p = up(p, nf);
    g.x = up(x, bh);
    g.gy = up(gy, bh);
    g.gp = up(gp, nf);
    g.hd = up(nan, bf);
    g.a = up(nan, bf);
    g.y = up(nan, bh);
    g.gx = up(nan, bh);
    g.da = up(nan, bf);
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&g.pb, nf * 2), cudaSuccess);
    /* the CPU side */
    exec_blas_init();
    exec_block_forward(&d, p, x, hd, a, y);
    float *hd_f = malloc(bf * sizeof(float));
    memcpy(hd_f, hd, bf * sizeof(float));
    exec_block_backward_i(&d, p, hd, gy, gx, scr);
    exec_block_backward_w(&d, x, a, hd, gy, gp);
    /* the GPU side */
    pl_err e;
    pl_err_clear(&e);
    cx_gemm_ctx c;
    test_cuda_ctx_init(&c, prec, cx_blk_bf16_floats(&d), &e);
    size_t hf = (size_t)d.h * d.f;
    cx_dparams q = {g.p, g.p + hf, g.p + hf + d.f, g.p + 2 * hf + d.f, NULL, NULL};
    if (prec == EXEC_PREC_BF16) {
        CU_ASSERT_EQUAL(cxk_to_bf16(c.st, g.pb, g.p, nf), cudaSuccess);
        q.w1b = g.pb;
        q.w2b = g.pb + hf + d.f;
    }
    CU_ASSERT_EQUAL(cx_block_forward(&c, &d, &q, g.x, g.hd, g.a, g.y, &e), PL_OK);
    float *y2 = malloc(bh * sizeof(float)), *hd2 = malloc(bf * sizeof(float)), *a2 = malloc(bf * sizeof(float));
    CU_ASSERT_EQUAL(cudaStreamSynchronize(c.st), cudaSuccess);
    down(y2, g.y, bh);
    down(hd2, g.hd, bf);
    down(a2, g.a, bf);
    CU_ASSERT_EQUAL(cx_block_backward_i(&c, &d, &q, g.hd, g.gy, g.gx, g.da, &e), PL_OK);
    CU_ASSERT_EQUAL(cx_block_backward_w(&c, &d, g.x, g.a, g.hd, g.gy, g.gp, &e), PL_OK);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(c.st), cudaSuccess);
    if (e.code) fprintf(stderr, "block %s: %s\n", exec_precision_name(prec), e.msg);
    float *gx2 = malloc(bh * sizeof(float)), *dh2 = malloc(bf * sizeof(float)), *gp2 = malloc(nf * sizeof(float));
    down(gx2, g.gx, bh);
    down(dh2, g.hd, bf);
    down(gp2, g.gp, nf);
    CU_ASSERT(all_finite(y2, bh) && all_finite(hd2, bf) && all_finite(a2, bf) && all_finite(gx2, bh) &&
              all_finite(dh2, bf) && all_finite(gp2, nf));
    double tol = BLOCK_TOL[prec];
    double ey = rel_norm(y2, y, NULL, bh), eh = rel_norm(hd2, hd_f, NULL, bf), ea = rel_norm(a2, a, NULL, bf);
    double egx = rel_norm(gx2, gx, NULL, bh), edh = rel_norm(dh2, hd, NULL, bf), egp = rel_norm(gp2, gp, NULL, nf);
    if (getenv("PIPELAB_TEST_VERBOSE") || ey > tol || eh > tol || ea > tol || egx > tol || edh > tol || egp > tol)
        fprintf(stderr, "block %s: rel err y %.2e H %.2e A %.2e gx %.2e dH %.2e grad %.2e (tol %.0e)\n",
                exec_precision_name(prec), ey, eh, ea, egx, edh, egp, tol);
    CU_ASSERT(ey <= tol && eh <= tol && ea <= tol && egx <= tol && edh <= tol && egp <= tol);
    test_cuda_ctx_free(&c);
    float *bufs[] = {g.p, g.x, g.gy, g.hd, g.a, g.y, g.gx, g.gp, g.da};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cudaFree(bufs[i]);
    cudaFree(g.pb);
    free(p); free(x); free(gy); free(hd); free(a); free(y); free(gx); free(gp); free(scr); free(nan);
    free(hd_f); free(y2); free(hd2); free(a2); free(gx2); free(dh2); free(gp2);
}

static void test_block_fp32(void) { block_case(EXEC_PREC_FP32, 21); block_case(EXEC_PREC_FP32, 22); }
static void test_block_tf32(void) { block_case(EXEC_PREC_TF32, 23); }
static void test_block_bf16(void) { block_case(EXEC_PREC_BF16, 24); }

/* ---------------------------------------------------------------- runs against the CPU */

/* The GPU run of kind in precision prec against the CPU executor on the same seed: the weight
 * update and every iteration's loss within the precision's bounds. */
static void against_cpu(const char *kind, int p, int m, exec_precision prec) {
    sched *s = lowered(kind, p, m, 0, 0);
    if (!s) return;
    exec_config c = run_cfg(2 * p);
    c.precision = prec;
    exec_config cc = c;
    cc.backend = EXEC_BACKEND_CPU;
    exec_result rg, rc;
    pl_err e;
    if (gpu_run(s, &c, &rg) != PL_OK) { CU_FAIL("exec_cuda_run"); sched_free(s); return; }
    int ok = exec_run(s, &cc, &rc, &e);
    if (ok) fprintf(stderr, "exec_run: %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(ok, PL_OK);
    float *w0 = initial_weights(&c);
    size_t n = exec_param_count(&c);
    double du = rel_norm(rg.final_weights, rc.final_weights, w0, n);
    double dl = 0;
    for (int i = 0; i < rg.n_iters; i++) {
        double d = fabs(rg.loss[i] - rc.loss[i]) / fabs(rc.loss[i]);
        if (!(d <= dl)) dl = isnan(d) ? INFINITY : d;
    }
    if (getenv("PIPELAB_TEST_VERBOSE") || du > UPDATE_TOL[prec] || dl > LOSS_TOL[prec])
        fprintf(stderr, "%s p=%d %s vs CPU: update rel err %.2e (tol %.0e), loss rel err %.2e (tol %.0e)\n", kind, p,
                exec_precision_name(prec), du, UPDATE_TOL[prec], dl, LOSS_TOL[prec]);
    CU_ASSERT(du <= UPDATE_TOL[prec]);
    CU_ASSERT(dl <= LOSS_TOL[prec]);
    CU_ASSERT(rel_norm(rc.final_weights, w0, NULL, n) > 1e-4); /* it trained */
    CU_ASSERT_STRING_EQUAL(rg.backend, "cuda");
    CU_ASSERT_STRING_EQUAL(rg.precision, exec_precision_name(prec));
    free(w0);
    exec_result_free(&rg);
    exec_result_free(&rc);
    sched_free(s);
}

static void test_cpu_fp32(void) { against_cpu("1f1b", 2, 4, EXEC_PREC_FP32); }
static void test_cpu_tf32(void) { against_cpu("1f1b", 2, 4, EXEC_PREC_TF32); }
static void test_cpu_bf16(void) { against_cpu("zb-h1", 2, 4, EXEC_PREC_BF16); }

/* ---------------------------------------------------------------- sequential equivalence */

/* The GPU run of kind (fp32) against the CPU sequential reference of its weight policy. */
static void against_reference_rc(const char *kind, int p, int m, int v, int iters, double momentum,
                                 sched_recompute rcp) {
    sched *s = lowered_rc(kind, p, m, v, iters, rcp);
    if (!s) return;
    exec_config c = run_cfg(s->stages);
    c.momentum = momentum;
    exec_result r;
    if (gpu_run(s, &c, &r) != PL_OK) { CU_FAIL("exec_cuda_run"); sched_free(s); return; }
    size_t n = exec_param_count(&c);
    int it = s->iterations > 0 ? s->iterations : 1;
    float *w = calloc(n, sizeof(float));
    double *loss = calloc((size_t)c.timed_passes * it, sizeof(double));
    pl_err e;
    int rrc = exec_reference(s, &c, c.timed_passes, w, n, loss, &e);
    if (rrc) fprintf(stderr, "reference: %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rrc, PL_OK);
    float *w0 = initial_weights(&c);
    double du = rel_norm(r.final_weights, w, w0, n), dl = 0;
    for (int i = 0; i < r.n_iters; i++) {
        double d = fabs(r.loss[i] - loss[i]) / fabs(loss[i]);
        if (!(d <= dl)) dl = isnan(d) ? INFINITY : d;
    }
    if (getenv("PIPELAB_TEST_VERBOSE") || du > UPDATE_TOL[0] || dl > LOSS_TOL[0])
        fprintf(stderr, "%s p=%d m=%d on GPU vs sequential: update rel err %.2e, loss rel err %.2e\n", kind, p, m, du, dl);
    CU_ASSERT(du <= UPDATE_TOL[0]);
    CU_ASSERT(dl <= LOSS_TOL[0]);
    free(w0);
    free(w);
    free(loss);
    exec_result_free(&r);
    sched_free(s);
}

/* A run timed until steady (exec_config.timed_passes_max, all ranks reading each other's pass
 * times): a target every run meets stops at the least timed passes (2), one none meets at the
 * most (5; fewer only when the passes tied to the clock's resolution); its record says so, and
 * the weights and losses are the sequential reference's over the passes it walked. */
static void test_steady(void) {
    sched *s = lowered("1f1b", 2, 4, 0, 0);
    if (!s) return;
    const double target[2] = {1e6, 1e-12};
    for (int k = 0; k < 2; k++) {
        exec_config c = run_cfg(s->stages);
        c.timed_passes = 2;
        c.timed_passes_max = 5;
        c.steady_max = target[k];
        exec_result r;
        if (gpu_run(s, &c, &r) != PL_OK) { CU_FAIL("exec_cuda_run"); break; }
        int T = r.timed_passes;
        CU_ASSERT(k == 0 ? T == 2 : (T == 5 || (T >= 2 && r.steadiness <= 1e-12)));
        CU_ASSERT_EQUAL(r.timed_passes_least, 2);
        CU_ASSERT_EQUAL(r.timed_passes_most, 5);
        size_t n = exec_param_count(&c);
        int it = s->iterations > 0 ? s->iterations : 1;
        float *w = calloc(n, sizeof(float)), *w0 = initial_weights(&c);
        double *loss = calloc((size_t)T * it, sizeof(double));
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(exec_reference(s, &c, T, w, n, loss, &e), PL_OK);
        CU_ASSERT(rel_norm(r.final_weights, w, w0, n) <= UPDATE_TOL[0]);
        CU_ASSERT_EQUAL(r.n_iters, T * it);
        for (int i = 0; i < r.n_iters && i < T * it; i++) CU_ASSERT(fabs(r.loss[i] - loss[i]) <= LOSS_TOL[0] * fabs(loss[i]));
        free(w);
        free(w0);
        free(loss);
        exec_result_free(&r);
    }
    sched_free(s);
}

/* The same without recomputation. */
static void against_reference(const char *kind, int p, int m, int v, int iters, double momentum) {
    against_reference_rc(kind, p, m, v, iters, momentum, SCHED_RECOMPUTE_NONE);
}

static void test_seq_gpipe(void) { against_reference("gpipe", 4, 8, 0, 0, 0); }
static void test_seq_1f1b(void) { against_reference("1f1b", 4, 8, 0, 0, 0.9); }
static void test_seq_interleaved(void) { against_reference("interleaved", 2, 4, 2, 0, 0); }
static void test_seq_zb(void) {
    against_reference("zb-h1", 4, 8, 0, 0, 0);
    against_reference("zb-h2", 4, 8, 0, 0, 0);
    against_reference("zbv", 2, 4, 0, 0, 0);
}
static void test_seq_dualpipev(void) { against_reference("dualpipev", 2, 4, 0, 0, 0); }
static void test_seq_pipedream(void) { against_reference("pipedream", 2, 4, 0, 2, 0); }
static void test_seq_2bw(void) { against_reference("2bw", 2, 4, 0, 3, 0.9); }
static void test_seq_recompute(void) {
    against_reference_rc("zb-h2", 2, 4, 0, 0, 0, SCHED_RECOMPUTE_FULL);
    against_reference_rc("pipedream", 3, 3, 0, 2, 0, SCHED_RECOMPUTE_FULL);
}

/* Two synchronous schedules of the same model on the GPU: the same GEMMs and the same
 * microbatch order of gradient accumulation, so the same weights (to rounding). */
static void test_gpipe_equals_1f1b(void) {
    sched *a = lowered("gpipe", 4, 8, 0, 0), *b = lowered("1f1b", 4, 8, 0, 0);
    if (!a || !b) { sched_free(a); sched_free(b); return; }
    exec_config c = run_cfg(4);
    exec_result ra, rb;
    CU_ASSERT_EQUAL_FATAL(gpu_run(a, &c, &ra), PL_OK);
    CU_ASSERT_EQUAL_FATAL(gpu_run(b, &c, &rb), PL_OK);
    double d = rel_norm(ra.final_weights, rb.final_weights, NULL, ra.n_weights);
    if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "gpipe vs 1f1b on GPU: rel diff %.2e\n", d);
    CU_ASSERT(d <= 1e-6);
    exec_result_free(&ra);
    exec_result_free(&rb);
    sched_free(a);
    sched_free(b);
}

/* ---------------------------------------------------------------- memory, times, faults */

/* The GPU worker keeps the CPU worker's bookkeeping: the same peaks, exactly; the one device
 * allocation holds them; the event times nest (GEMMs inside compute, ops ordered); the per-pass
 * compute spans give the Zero Bubble rate. */
static void test_memory_and_times(void) {
    sched *s = lowered("1f1b", 4, 8, 0, 0);
    if (!s) return;
    exec_config c = run_cfg(8);
    c.record_ops = 1;
    exec_config cc = c;
    cc.backend = EXEC_BACKEND_CPU;
    exec_result rg, rc;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(gpu_run(s, &c, &rg), PL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_run(s, &cc, &rc, &e), PL_OK);
    for (int q = 0; q < s->ranks; q++) {
        const exec_rank_result *g = &rg.rank[q], *h = &rc.rank[q];
        CU_ASSERT_EQUAL(g->model_peak_bytes, h->model_peak_bytes);
        CU_ASSERT_EQUAL(g->peak.total_bytes, h->peak.total_bytes);
        CU_ASSERT(g->allocated_bytes >= g->peak.total_bytes);
        CU_ASSERT(g->busy_s > 0);
        /* the same GEMMs on the same shapes: both backends count 2 M N K per call */
        CU_ASSERT(g->gemm_flops > 0);
        CU_ASSERT_DOUBLE_EQUAL(g->gemm_flops, h->gemm_flops, 1e-9 * h->gemm_flops);
        CU_ASSERT(g->gemm_s > 0 && g->gemm_s <= g->busy_s + 1e-5);
        CU_ASSERT(g->n_ops == s->rank[q].n * (size_t)c.timed_passes);
        double last = -1e30; /* the previous compute action's end in this pass */
        for (size_t k = 0; k < g->n_ops; k++) {
            const exec_op *o = &g->ops[k];
            CU_ASSERT(o->end_s >= o->start_s);
            if (k > 0 && o->pass != g->ops[k - 1].pass) last = -1e30;
            /* compute actions run one after the other, in list order, on one stream */
            if (sched_kind_is_compute((sched_kind)o->act.kind)) {
                CU_ASSERT(o->start_s >= last - 1e-6);
                last = o->end_s;
            }
        }
    }
    CU_ASSERT(rg.pass_median_s > 0);
    /* the Zero Bubble rate: each rank's busy span of a pass (first compute or STEP start to last
     * end) holds its busy time (compute and STEP, sched_kind_is_busy), and the run's rate is the
     * worst rank's (span - busy) / span over the median pass(es) (exec_median_passes), recomputed
     * here from the recorded actions */
    int T = c.timed_passes, mid[2], nmid = T % 2 ? 1 : 2;
    CU_ASSERT_EQUAL_FATAL(exec_median_passes(rg.pass_s, T, mid), PL_OK);
    double worst = -1;
    for (int q = 0; q < s->ranks; q++) {
        const exec_rank_result *g = &rg.rank[q];
        double span = 0, busy = 0;
        for (int k = 0; k < nmid; k++) {
            double b = 0, first = 0, last = 0;
            int seen = 0;
            for (size_t i = 0; i < g->n_ops; i++) {
                const exec_op *o = &g->ops[i];
                if (o->pass != mid[k] || !sched_kind_is_busy((sched_kind)o->act.kind)) continue;
                b += o->end_s - o->start_s;
                if (!seen) first = o->start_s;
                last = o->end_s;
                seen = 1;
            }
            CU_ASSERT(seen && last - first >= b - 1e-9 && b > 0);
            span += last - first;
            busy += b;
        }
        if (span > 0 && (span - busy) / span > worst) worst = (span - busy) / span;
    }
    CU_ASSERT(isfinite(rg.zb_bubble_rate) && rg.zb_bubble_rate >= 0 && rg.zb_bubble_rate < 1);
    CU_ASSERT_DOUBLE_EQUAL(rg.zb_bubble_rate, worst < 0 ? 0 : worst, 1e-6);
    /* the CPU run measures it too */
    CU_ASSERT(isfinite(rc.zb_bubble_rate) && rc.zb_bubble_rate >= 0 && rc.zb_bubble_rate < 1);
    exec_result_free(&rg);
    exec_result_free(&rc);
    sched_free(s);
}

/* An injected error stops the run and names the rank and action; the GPU is usable after. A
 * memory budget or limit too small and a profile between the passes are refused with a message. */
static void test_fault(void) {
    sched *s = lowered("1f1b", 2, 4, 0, 0);
    if (!s) return;
    exec_config c = run_cfg(2);
    c.fault.kind = EXEC_FAULT_ERROR;
    c.fault.rank = 1;
    c.fault.action = 3;
    c.fault.pass = 1;
    exec_result r;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_NOT_EQUAL(exec_cuda_run(s, &c, &r, &e), PL_OK);
    CU_ASSERT(strstr(e.msg, "rank 1 (GPU") != NULL);
    CU_ASSERT(strstr(e.msg, "action 4") != NULL);
    CU_ASSERT(strstr(e.msg, "injected fault") != NULL);
    c.fault.kind = EXEC_FAULT_NONE;
    CU_ASSERT_EQUAL(gpu_run(s, &c, &r), PL_OK);
    exec_result_free(&r);
    /* a budget below what the rank needs fails naming it */
    c.mem_budget_bytes = 1000;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_cuda_run(s, &c, &r, &e), PL_ENOMEM);
    CU_ASSERT(strstr(e.msg, "budget") != NULL);
    /* a model whose host side exceeds the memory limit (--max-memory) is refused up front, as on
     * the CPU: here 2 blocks of 16.6k floats with gradients and the data set, ~400 KB */
    c.mem_budget_bytes = 0;
    sched_budget_init(&c.budget, 100000, NULL);
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_cuda_run(s, &c, &r, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "does not fit") != NULL && strstr(e.msg, "host memory") != NULL);
    sched_budget_init(&c.budget, 64u << 20, NULL);
    CU_ASSERT_EQUAL(gpu_run(s, &c, &r), PL_OK);
    exec_result_free(&r);
    sched_budget_init(&c.budget, 0, NULL);
    /* profiling between the passes is the CPU executor's: refused, not ignored */
    c.profile_between_reps = 5;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_cuda_run(s, &c, &r, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "between the passes") != NULL);
    sched_free(s);
}

/* Ranks sharing one GPU with their SMs split (green contexts) train as the reference does. */
static void test_sm_split(void) {
    pl_err e;
    pl_err_clear(&e);
    if (cx_green_init(&e) != PL_OK) {
        pl_test_skip(e.msg);
        return;
    }
    sched *s = lowered("1f1b", 4, 8, 0, 0);
    if (!s) return;
    exec_config c = run_cfg(4);
    c.sm_split = 1;
    c.cuda_devices = 1;
    exec_result r;
    if (gpu_run(s, &c, &r) == PL_OK) {
        CU_ASSERT(strstr(r.device, "SMs split") != NULL);
        size_t n = exec_param_count(&c);
        float *w = calloc(n, sizeof(float)), *w0 = initial_weights(&c);
        double *loss = calloc(3, sizeof(double));
        CU_ASSERT_EQUAL(exec_reference(s, &c, c.timed_passes, w, n, loss, &e), PL_OK);
        CU_ASSERT(rel_norm(r.final_weights, w, w0, n) <= UPDATE_TOL[0]);
        free(w);
        free(w0);
        free(loss);
        exec_result_free(&r);
    } else {
        CU_FAIL("sm-split run");
    }
    sched_free(s);
}

/* Reads a whole file of floats; returns the count (0 on failure) and *out (malloc'd). */
static size_t read_floats(const char *path, float **out) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc(n > 0 ? (size_t)n : 1);
    size_t got = n > 0 ? fread(*out, 1, (size_t)n, f) : 0;
    fclose(f);
    return got / sizeof(float);
}

/* One MPI process per rank with NCCL (2 GPUs needed) trains as the in-process GPU run does:
 * the same GEMMs on the same data, so the same weights to rounding. */
static void test_mpi_nccl(void) {
    pl_err e;
    int n = exec_cuda_devices(&e);
#ifdef PIPELAB_MPIEXEC
    const char *mpiexec = PIPELAB_MPIEXEC;
#else
    const char *mpiexec = NULL;
#endif
    if (!exec_cuda_mpi_available() || n < 2 || !mpiexec || !pl_test_exists(mpiexec)) {
        char why[160];
        snprintf(why, sizeof why, "needs the MPI build, mpirun and 2 GPUs; %d GPU%s here", n, n == 1 ? "" : "s");
        pl_test_skip(why);
        return;
    }
    char *dir = pl_test_tmpdir(), cmd[2048], *log = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    const char *model = "--width 64 --ffn 128 --depth 4 --microbatch-size 8 --lr 0.1 --warmup 0 --timed 3 --no-db --no-predict";
    snprintf(cmd, sizeof cmd, "%s run --backend cuda --kind 1f1b --ranks 2 --microbatches 4 %s --dump-weights %s/t.bin",
             PIPELAB_BIN, model, dir);
    int rc = pl_test_run(cmd, &log);
    if (rc) fprintf(stderr, "%s\n%s\n", cmd, log);
    CU_ASSERT_EQUAL(rc, 0);
    free(log);
    snprintf(cmd, sizeof cmd, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 %s -np 2 "
             "--oversubscribe %s run --backend cuda --transport mpi --kind 1f1b --ranks 2 --microbatches 4 %s "
             "--dump-weights %s/m.bin", mpiexec, PIPELAB_BIN, model, dir);
    rc = pl_test_run(cmd, &log);
    if (rc) fprintf(stderr, "%s\n%s\n", cmd, log);
    CU_ASSERT_EQUAL(rc, 0);
    free(log);
    char pa[1100], pb[1100];
    snprintf(pa, sizeof pa, "%s/t.bin", dir);
    snprintf(pb, sizeof pb, "%s/m.bin", dir);
    float *a = NULL, *b = NULL;
    size_t na = read_floats(pa, &a), nb = read_floats(pb, &b);
    CU_ASSERT(na > 0 && na == nb);
    if (na > 0 && na == nb) CU_ASSERT(rel_norm(b, a, NULL, na) <= 1e-6);
    free(a);
    free(b);
    remove(pa);
    remove(pb);
    rmdir(dir);
    free(dir);
}

/* The profiler's medians are positive, the first block's I (no input gradient: one GEMM fewer)
 * is under a whole I, and its sizes are the CPU profiler's; with 2 workers at once (sharing the
 * SMs, and each in its green context where the driver has them) it gives the same sizes. */
static void test_profile(void) {
    exec_config c = run_cfg(2);
    exec_layer_profile g, h;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(exec_cuda_profile_layers(&c, 8, 1, &g, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_profile_layers(&c, 3, &h, &e), PL_OK);
    CU_ASSERT(g.f_s > 0 && g.i_s > 0 && g.w_s > 0 && g.step_s > 0);
    CU_ASSERT(g.i0_s > 0 && g.i0_s < g.i_s);
    CU_ASSERT_EQUAL(g.p2p.Bps, 0); /* one worker: no hand-off between ranks on the GPU to time */
    if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "profile: I %.3g s, I0 %.3g s\n", g.i_s, g.i0_s);
    CU_ASSERT_EQUAL(g.param_bytes, h.param_bytes);
    CU_ASSERT_EQUAL(g.act_out_bytes, h.act_out_bytes);
    CU_ASSERT_EQUAL(g.stash_bytes, h.stash_bytes);
    for (int split = 0; split < 2; split++) {
        exec_config c2 = c;
        c2.sm_split = split;
        exec_layer_profile g2;
        int rc = exec_cuda_profile_layers(&c2, 8, 2, &g2, &e);
        if (split && rc == PL_EINPUT && strstr(e.msg, "--sm-split") != NULL) {
            pl_test_skip(e.msg); /* its green-context part; the rest of the test ran */
            continue;
        }
        CU_ASSERT_EQUAL(rc, PL_OK);
        if (rc != PL_OK) continue;
        CU_ASSERT(g2.f_s > 0 && g2.i_s > 0 && g2.w_s > 0 && g2.step_s > 0 && g2.i0_s > 0);
        CU_ASSERT_EQUAL(g2.concurrency, 2);
        CU_ASSERT_EQUAL(g2.param_bytes, h.param_bytes);
        /* two workers time the hand-off between them: a link whose boundary takes a positive time */
        CU_ASSERT(g2.p2p.Bps > 0 && g2.p2p.latency_s >= 0);
        CU_ASSERT(cost_p2p_s(g2.p2p.latency_s, g2.p2p.Bps, (double)g2.act_out_bytes) > 0);
        if (getenv("PIPELAB_TEST_VERBOSE"))
            fprintf(stderr, "profile, 2 workers %s: F %.3g s, I %.3g s, W %.3g s (1 worker: F %.3g s); hand-off %.3g s + %.3g GB/s\n",
                    split ? "in green contexts" : "sharing the SMs", g2.f_s, g2.i_s, g2.w_s, g.f_s, g2.p2p.latency_s,
                    g2.p2p.Bps / 1e9);
    }
    double rate = 0;
    CU_ASSERT_EQUAL(exec_cuda_gemm_rate(512, 512, 512, EXEC_PREC_BF16, 5, &rate, &e), PL_OK);
    CU_ASSERT(rate > 0);
}

void pl_test_register(void) {
    pl_err e;
    pl_err_clear(&e);
    if (exec_cuda_devices(&e) < 1) {
        fprintf(stderr, "test_exec_cuda: skipped: %s\n", e.msg);
        return; /* nothing registered: the runner exits 77, CTest's skip */
    }
    static const pl_test_case block[] = {
        {"one block fp32 = model.c", test_block_fp32},
        {"one block tf32 ~ model.c", test_block_tf32},
        {"one block bf16 ~ model.c", test_block_bf16},
        {NULL, NULL}};
    static const pl_test_case cpu[] = {
        {"1f1b fp32 = CPU executor", test_cpu_fp32},
        {"1f1b tf32 ~ CPU executor", test_cpu_tf32},
        {"zb-h1 bf16 ~ CPU executor", test_cpu_bf16},
        {NULL, NULL}};
    static const pl_test_case seq[] = {
        {"gpipe = sequential", test_seq_gpipe},
        {"1f1b with momentum = sequential", test_seq_1f1b},
        {"interleaved = sequential", test_seq_interleaved},
        {"zb-h1, zb-h2, zbv = sequential", test_seq_zb},
        {"dualpipev = sequential", test_seq_dualpipev},
        {"pipedream = stash reference", test_seq_pipedream},
        {"2bw with momentum = 2bw reference", test_seq_2bw},
        {"full recomputation = sequential", test_seq_recompute},
        {"gpipe = 1f1b on the GPU", test_gpipe_equals_1f1b},
        {"timed until steady = sequential over its passes", test_steady},
        {NULL, NULL}};
    static const pl_test_case misc[] = {
        {"memory bookkeeping = CPU, times nest", test_memory_and_times},
        {"fault names rank and action", test_fault},
        {"sm split (green contexts)", test_sm_split},
        {"profile and GEMM rate", test_profile},
        {"MPI processes with NCCL = threads", test_mpi_nccl},
        {NULL, NULL}};
    pl_test_suite("cuda block", block);
    pl_test_suite("cuda vs cpu", cpu);
    pl_test_suite("cuda sequential", seq);
    pl_test_suite("cuda misc", misc);
    exec_cuda_test_gpt_register(); /* test_exec_cuda_gpt.c */
}
