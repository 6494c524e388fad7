/* test_exec_cuda_gpt.c: the transformer block on the GPU (cuda_gpt.c) against the CPU's
 * (gpt.c), which is its oracle: one block's forward, I and W on fresh inputs in fp32 and tf32
 * and bf16 (the relative error bounds of test_exec_cuda.c), pipelines against the sequential
 * reference (fp32) and the CPU executor (bf16), the memory bookkeeping equal to the CPU's, and
 * the profile. Registered
 * only with a usable GPU (test_exec_cuda.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"
#include "exec.h"
#include "exec_cuda.h"
#include "exec_int.h"
#include "pl_sched.h"
#include "pl_test.h"
#include "test_cuda_ctx.h"
#include "test_exec_cuda.h"

/* Whole runs against the sequential reference in fp32: test_exec_cuda.c's update and loss. */
#define GPT_UPDATE_TOL 1e-3
#define GPT_LOSS_TOL 1e-4

/* A transformer of an uneven shape on run_cfg's run settings: width 96, 3 heads of 32, sequences
 * of 12 tokens, 2 per microbatch (24 rows), ffn 4h. */
static exec_config gpt_cfg(int layers) {
    exec_config c = run_cfg(layers);
    c.block = EXEC_BLOCK_GPT;
    c.hidden = 96;
    c.ffn = 0;
    c.heads = 3;
    c.seq = 12;
    c.microbatch_size = 2;
    return c;
}

/* A device copy of h[n] (poisoned with NaN when h is NULL). */
static float *dev(const float *h, size_t n) {
    float *d = NULL, *nan = NULL;
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&d, n * sizeof(float)), cudaSuccess);
    if (!h) {
        nan = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) nan[i] = NAN;
        h = nan;
    }
    CU_ASSERT_EQUAL(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    free(nan);
    return d;
}

/* Returns the host copy of d[n] (caller frees). */
static float *host(const float *d, size_t n) {
    float *h = malloc(n * sizeof(float));
    CU_ASSERT(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
}

/* One block's F, I (with the input gradient) and W on the GPU against gpt.c. */
static void gpt_block_case(exec_precision prec, uint64_t seed) {
    exec_config cfg = gpt_cfg(2);
    exec_dims d;
    exec_dims_of(&cfg, &d);
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, sf = exec_block_state_floats(&d);
    size_t ns = exec_block_scratch_floats(&d);
    float *p = calloc(nf, sizeof(float)), *x = calloc(bh, sizeof(float)), *gy = calloc(bh, sizeof(float));
    float *st = calloc(sf, sizeof(float)), *y = calloc(bh, sizeof(float)), *gx = calloc(bh, sizeof(float));
    float *gp = calloc(nf, sizeof(float)), *scr = calloc(ns, sizeof(float));
    exec_block_init(&d, seed, 1, p);
    exec_fill_normal(seed + 1, 0, x, bh);
    exec_fill_normal(seed + 1, 1, gy, bh);
    float *dp = dev(p, nf), *dx = dev(x, bh), *dgy = dev(gy, bh), *dgp = dev(gp, nf);
    float *dst = dev(NULL, sf), *dy = dev(NULL, bh), *dgx = dev(NULL, bh), *dscr = dev(NULL, ns);
    uint16_t *dpb = NULL; /* bf16: the weights' bf16 copy, as a run's version slots have */
    exec_blas_init();
    exec_block_fwd(&d, p, x, st, y);
    exec_block_bwd_i(&d, p, x, st, gy, gx, scr);
    exec_block_bwd_w(&d, x, st, gy, gp);
    pl_err e;
    pl_err_clear(&e);
    cx_gemm_ctx c;
    test_cuda_ctx_init(&c, prec, cx_blk_bf16_floats(&d), &e);
    size_t hf = (size_t)d.h * d.f;
    cx_dparams q = {dp, dp + hf, dp + hf + d.f, dp + 2 * hf + d.f, NULL, NULL};
    if (prec == EXEC_PREC_BF16) {
        CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&dpb, nf * 2), cudaSuccess);
        CU_ASSERT_EQUAL(cxk_to_bf16(c.st, dpb, dp, nf), cudaSuccess);
        q.w1b = dpb;
        q.w2b = dpb + hf + d.f;
    }
    CU_ASSERT_EQUAL(cx_blk_forward(&c, &d, &q, dx, dst, dy, &e), PL_OK);
    CU_ASSERT_EQUAL(cx_blk_backward_i(&c, &d, &q, dx, dst, dgy, dgx, dscr, &e), PL_OK);
    CU_ASSERT_EQUAL(cx_blk_backward_w(&c, &d, dx, dst, dgy, dgp, &e), PL_OK);
    CU_ASSERT_EQUAL(cudaStreamSynchronize(c.st), cudaSuccess);
    if (e.code) fprintf(stderr, "gpt block: %s\n", e.msg);
    float *y2 = host(dy, bh), *gx2 = host(dgx, bh), *gp2 = host(dgp, nf);
    double ey = rel_norm(y2, y, x, bh), egx = rel_norm(gx2, gx, gy, bh), egp = rel_norm(gp2, gp, NULL, nf);
    double tol = BLOCK_TOL[prec];
    if (getenv("PIPELAB_TEST_VERBOSE") || ey > tol || egx > tol || egp > tol)
        fprintf(stderr, "gpt block %s: rel err y - x %.2e, gx - gy %.2e, grad %.2e (tol %.0e)\n", exec_precision_name(prec), ey,
                egx, egp, tol);
    /* y - x and gx - gy: the residual streams pass x and gy through exactly; the block's own
     * contribution is what is compared */
    CU_ASSERT(ey <= tol && egx <= tol && egp <= tol);
    test_cuda_ctx_free(&c);
    float *bufs[] = {dp, dx, dgy, dgp, dst, dy, dgx, dscr};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cudaFree(bufs[i]);
    if (dpb) cudaFree(dpb);
    free(p); free(x); free(gy); free(st); free(y); free(gx); free(gp); free(scr); free(y2); free(gx2); free(gp2);
}

static void test_gpt_block(void) {
    gpt_block_case(EXEC_PREC_FP32, 31);
    gpt_block_case(EXEC_PREC_TF32, 32);
    gpt_block_case(EXEC_PREC_BF16, 33);
}

/* The lowered schedule of kind under o (fatal when it does not generate). */
static sched *gpt_sched(const char *kind, const sched_gen_opts *o) {
    pl_err e;
    sched *g = sched_generate(kind, o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    sched *s = sched_lower(g, &e);
    sched_free(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    return s;
}

/* The GPU run of kind against the CPU's sequential reference, with and without recomputation;
 * the tracked memory peaks equal the CPU executor's. */
static void gpt_against_reference(const char *kind, int p, int m, int v, int iters) {
    for (int rcp = SCHED_RECOMPUTE_NONE; rcp <= SCHED_RECOMPUTE_FULL; rcp++) {
        pl_err e;
        sched_gen_opts o = {p, m, v, iters, (sched_recompute)rcp};
        sched *s = gpt_sched(kind, &o);
        exec_config c = gpt_cfg(s->stages), cc = c;
        cc.backend = EXEC_BACKEND_CPU;
        exec_result r, rc;
        int rg = exec_cuda_run(s, &c, &r, &e);
        if (rg) fprintf(stderr, "exec_cuda_run %s: %s\n", kind, e.msg);
        CU_ASSERT_EQUAL_FATAL(rg, PL_OK);
        CU_ASSERT_EQUAL_FATAL(exec_run(s, &cc, &rc, &e), PL_OK);
        size_t n = exec_param_count(&c);
        int it = s->iterations > 0 ? s->iterations : 1;
        float *w = calloc(n, sizeof(float)), *w0 = calloc(n, sizeof(float));
        double *loss = calloc((size_t)c.timed_passes * it, sizeof(double));
        CU_ASSERT_EQUAL_FATAL(exec_reference(s, &c, c.timed_passes, w, n, loss, &e), PL_OK);
        exec_dims d;
        exec_dims_of(&c, &d);
        for (int l = 0; l < c.layers; l++) exec_block_init(&d, c.init_seed, l, w0 + (size_t)l * exec_block_floats(&d));
        double du = rel_norm(r.final_weights, w, w0, n), dl = 0;
        for (int i = 0; i < r.n_iters; i++) {
            double di = fabs(r.loss[i] - loss[i]) / fabs(loss[i]);
            if (!(di <= dl)) dl = isnan(di) ? INFINITY : di; /* a NaN loss never passes */
        }
        if (getenv("PIPELAB_TEST_VERBOSE") || du > GPT_UPDATE_TOL || !(dl <= GPT_LOSS_TOL))
            fprintf(stderr, "gpt %s recompute %d on GPU vs sequential: update %.2e, loss %.2e\n", kind, rcp, du, dl);
        CU_ASSERT(du <= GPT_UPDATE_TOL && dl <= GPT_LOSS_TOL);
        for (int q = 0; q < s->ranks; q++) CU_ASSERT_EQUAL(r.rank[q].peak.total_bytes, rc.rank[q].peak.total_bytes);
        free(w); free(w0); free(loss);
        exec_result_free(&r);
        exec_result_free(&rc);
        sched_free(s);
    }
}

static void test_gpt_schedules(void) {
    gpt_against_reference("1f1b", 2, 4, 0, 0);
    gpt_against_reference("zb-h1", 2, 4, 0, 0);
    gpt_against_reference("interleaved", 2, 4, 2, 0);
    gpt_against_reference("pipedream", 2, 4, 0, 2);
}

/* A bf16 run of the transformer against the CPU executor (fp32) on the same seed: the weight
 * update and every iteration's loss within test_exec_cuda.c's bf16 bounds; it trained. */
static void test_gpt_bf16_run(void) {
    pl_err e;
    sched_gen_opts o = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *s = gpt_sched("zb-h1", &o);
    exec_config c = gpt_cfg(s->stages), cc = c;
    c.precision = EXEC_PREC_BF16;
    cc.backend = EXEC_BACKEND_CPU;
    exec_result r, rc;
    int rg = exec_cuda_run(s, &c, &r, &e);
    if (rg) fprintf(stderr, "exec_cuda_run bf16: %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rg, PL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_run(s, &cc, &rc, &e), PL_OK);
    size_t n = exec_param_count(&c);
    float *w0 = calloc(n, sizeof(float));
    exec_dims d;
    exec_dims_of(&c, &d);
    for (int l = 0; l < c.layers; l++) exec_block_init(&d, c.init_seed, l, w0 + (size_t)l * exec_block_floats(&d));
    double du = rel_norm(r.final_weights, rc.final_weights, w0, n), dl = 0;
    for (int i = 0; i < r.n_iters; i++) {
        double di = fabs(r.loss[i] - rc.loss[i]) / fabs(rc.loss[i]);
        if (!(di <= dl)) dl = isnan(di) ? INFINITY : di;
    }
    double tu = UPDATE_TOL[EXEC_PREC_BF16], tl = LOSS_TOL[EXEC_PREC_BF16];
    if (getenv("PIPELAB_TEST_VERBOSE") || du > tu || !(dl <= tl))
        fprintf(stderr, "gpt zb-h1 bf16 vs CPU: update rel err %.2e (tol %.0e), loss rel err %.2e (tol %.0e)\n", du, tu, dl, tl);
    CU_ASSERT(du <= tu && dl <= tl);
    CU_ASSERT(rel_norm(rc.final_weights, w0, NULL, n) > 1e-4); /* it trained */
    CU_ASSERT_STRING_EQUAL(r.precision, "bf16");
    free(w0);
    exec_result_free(&r);
    exec_result_free(&rc);
    sched_free(s);
}

/* The profile of the transformer block (sizes equal to the CPU profiler's), in fp32 and bf16. */
static void test_gpt_profile_and_bf16(void) {
    exec_config c = gpt_cfg(4);
    exec_layer_profile g, h;
    pl_err e;
    CU_ASSERT_EQUAL(exec_cuda_profile_layers(&c, 4, 1, &g, &e), PL_OK);
    CU_ASSERT(g.f_s > 0 && g.i_s > 0 && g.w_s > 0);
    exec_dims d;
    exec_dims_of(&c, &d);
    exec_profile_sizes(&d, &h);
    CU_ASSERT_EQUAL(g.stash_bytes, h.stash_bytes);
    c.precision = EXEC_PREC_BF16;
    CU_ASSERT_EQUAL(exec_cuda_profile_layers(&c, 4, 1, &g, &e), PL_OK);
    CU_ASSERT(g.f_s > 0 && g.i_s > 0 && g.w_s > 0 && g.step_s > 0);
    CU_ASSERT_EQUAL(g.stash_bytes, h.stash_bytes);
}

void exec_cuda_test_gpt_register(void) {
    static const pl_test_case cases[] = {
        {"transformer block fp32 = gpt.c, tf32 ~ gpt.c", test_gpt_block},
        {"transformer: 1f1b, zb-h1, interleaved, pipedream = sequential; memory = CPU", test_gpt_schedules},
        {"transformer: zb-h1 bf16 ~ CPU executor", test_gpt_bf16_run},
        {"transformer: profile, fp32 and bf16", test_gpt_profile_and_bf16},
        {NULL, NULL}};
    pl_test_suite("cuda transformer", cases);
}
