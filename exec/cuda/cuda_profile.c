/* cuda_profile.c: per-block F, I, W and STEP times on a GPU (CUDA events, median over
 * repetitions), the measurements `pipelab profile --backend cuda` turns into a cost-model profile.
 * The work mirrors the CPU profiler (profile.c): L distinct blocks (their own weights and
 * gradients, so weights are not cache-hot between samples), microbatches in rounds of
 * CX_PROFILE_SLOTS with their own stashed activations, all forwards of a round, then each
 * microbatch's input and weight gradients from the last block down, then a STEP of every block;
 * one untimed round first. With --sm-split and concurrency > 1 it runs in a green context holding
 * the SM share each of that many ranks gets. */
#include "exec_cuda.h"
#include "cuda_int.h"
#include "exec_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CX_PROFILE_SLOTS 4
/* Most bytes of distinct block weights, bf16 copies and gradients profiled. */
#define CX_PROFILE_MAX_BYTES ((size_t)2 << 30)

/* Blocks profiled: all L, a rank's share ceil(L / conc) when conc ranks share the GPU, at most
 * CX_PROFILE_MAX_BYTES of them. */
static int prof_blocks(const exec_config *cfg, size_t nf, int conc) {
    size_t fit = CX_PROFILE_MAX_BYTES / (nf * (2 * sizeof(float) + 2 + (cfg->momentum != 0 ? sizeof(float) : 0)));
    size_t L = cfg->layers < 1 ? 1 : (size_t)cfg->layers;
    if (conc > 1) L = (L + (size_t)conc - 1) / (size_t)conc;
    return (int)(L <= fit ? L : fit > 0 ? fit : 1);
}

/* The device state of a profile. */
typedef struct prof {
    exec_dims d;
    int L, S, mom;
    cx_gemm_ctx g;
    cudaStream_t st;
    cx_green green;
    char *mem;
    float *w, *gr, *m, *x, *state, *out, *gb, *t, *scratch; /* see prof_alloc */
    double *loss;     /* [1 + CXK_MSE_BLOCKS] the loss, then its partial sums */
    uint16_t *wb;
    cudaEvent_t *ev;  /* [2 npairs] */
    int npairs;
} prof;

/* Lays out and allocates: w, gr, m [L nf]; wb [L nf] bf16; per slot s and block l the block's
 * input x [b h] and state [sf] (exec_block_state_floats); out [S, b h] outputs; gb [(L+1), b h]
 * boundary gradients; t [b h] targets; the backward's scratch; the loss and its partial sums; bf16
 * operand scratch. */
static int prof_alloc(prof *q, const exec_config *cfg, pl_err *e) {
    size_t nf = exec_block_floats(&q->d), bh = (size_t)q->d.b * q->d.h, bf = (size_t)q->d.b * q->d.f;
    size_t sf = exec_block_state_floats(&q->d), scr = exec_block_scratch_floats(&q->d);
    size_t L = (size_t)q->L, S = (size_t)q->S;
    size_t opn = bf > bh ? bf : bh;
    size_t n_f = cx_al64(L * nf) * (2 + (size_t)q->mom) + cx_al64(S * L * bh) + cx_al64(S * L * sf) +
                 cx_al64(S * bh) + cx_al64((L + 1) * bh) + cx_al64(bh) + cx_al64(scr) +
                 cx_al64(2 * (1 + CXK_MSE_BLOCKS)); /* the loss and its partial sums, in doubles */
    size_t bytes = n_f * sizeof(float) + (cx_al64(L * nf) + 2 * cx_al64(opn)) * 2;
    void *mem = NULL;
    cudaError_t st = cudaMalloc(&mem, bytes);
    if (st != cudaSuccess) {
        (void)cudaGetLastError();
        return pl_errf(e, PL_ENOMEM, "profile: cannot allocate %zu bytes on the GPU: %s", bytes, cudaGetErrorString(st));
    }
    q->mem = mem;
    float *p = mem;
    q->w = p; p += cx_al64(L * nf);
    q->gr = p; p += cx_al64(L * nf);
    q->m = NULL;
    if (q->mom) { q->m = p; p += cx_al64(L * nf); }
    q->x = p; p += cx_al64(S * L * bh);
    q->state = p; p += cx_al64(S * L * sf);
    q->out = p; p += cx_al64(S * bh);
    q->gb = p; p += cx_al64((L + 1) * bh);
    q->t = p; p += cx_al64(bh);
    q->scratch = p; p += cx_al64(scr);
    q->loss = (double *)(void *)p; p += cx_al64(2 * (1 + CXK_MSE_BLOCKS));
    uint16_t *h = (uint16_t *)(void *)p;
    q->wb = h; h += cx_al64(L * nf);
    q->g.bfa = h; h += cx_al64(opn);
    q->g.bfb = h;
    q->g.bf_cap = opn;
    /* contents: the model's initial weights (block l of init_seed), zero gradients and momentum,
     * random inputs and targets (never zeros) */
    float *hw = pl_calloc(nf, sizeof(float));
    if (!hw) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = PL_OK;
    for (size_t l = 0; l < L && rc == PL_OK; l++) {
        exec_block_init(&q->d, cfg->init_seed, (int)l, hw);
        /* on q->st, not cudaMemcpy's legacy stream: a pageable copy returns once the host buffer
         * is staged, before the data lands, and q->st (non-blocking) would not wait for it */
        rc = cx_cuda_check(cudaMemcpyAsync(q->w + l * nf, hw, nf * sizeof(float), cudaMemcpyHostToDevice, q->st),
                           "cudaMemcpyAsync (weights)", __FILE__, __LINE__, e);
    }
    free(hw);
    if (rc) return rc;
    CXC(cudaMemsetAsync(q->gr, 0, L * nf * sizeof(float), q->st));
    if (q->m) CXC(cudaMemsetAsync(q->m, 0, L * nf * sizeof(float), q->st));
    CXC(cxk_to_bf16(q->st, q->wb, q->w, L * nf));
    CXC(cxk_fill_uniform(q->st, q->x, S * L * bh, cfg->data_seed + 1));
    CXC(cxk_fill_uniform(q->st, q->t, bh, cfg->data_seed + 2));
    CXC(cudaStreamSynchronize(q->st));
    return PL_OK;
}

/* Block l's parameters. */
static cx_dparams prof_params(const prof *q, int l) {
    size_t nf = exec_block_floats(&q->d), hf = (size_t)q->d.h * q->d.f;
    const float *w = q->w + (size_t)l * nf;
    cx_dparams p = {w, w + hf, w + hf + q->d.f, w + 2 * hf + q->d.f, NULL, NULL};
    if (q->g.prec == EXEC_PREC_BF16) {
        const uint16_t *b = q->wb + (size_t)l * nf;
        p.w1b = b;
        p.w2b = b + hf + q->d.f;
    }
    return p;
}

/* One round: S microbatches forward through the L blocks, then each one's I and W from the
 * last block down, each microbatch's I of block 0 again as a model's first block runs it (I0:
 * no input gradient, as the run's stage 0 skips it), then a STEP of every block; event pairs in
 * the order F (S L), I (S L), W (S L), STEP (L), I0 (S). */
static int prof_round(prof *q, const exec_config *cfg, pl_err *e) {
    size_t nf = exec_block_floats(&q->d), bh = (size_t)q->d.b * q->d.h, sf = exec_block_state_floats(&q->d);
    int L = q->L, S = q->S, k = 0, SL = S * L;
    for (int s = 0; s < S; s++)
        for (int l = 0; l < L; l++) {
            cx_dparams p = prof_params(q, l);
            size_t at = (size_t)s * L + (size_t)l;
            float *y = l == L - 1 ? q->out + (size_t)s * bh : q->x + (at + 1) * bh;
            CXC(cudaEventRecord(q->ev[2 * k], q->st));
            if (cx_blk_forward(&q->g, &q->d, &p, q->x + at * bh, q->state + at * sf, y, e)) return e->code;
            CXC(cudaEventRecord(q->ev[2 * k + 1], q->st));
            k++;
        }
    int ki = EXEC_PROF_I * SL, kw = EXEC_PROF_W * SL;
    for (int s = 0; s < S; s++) {
        CXC(cudaMemcpyAsync(q->gb + (size_t)L * bh, q->out + (size_t)s * bh, bh * sizeof(float), cudaMemcpyDeviceToDevice, q->st));
        CXC(cxk_mse_grad(q->st, q->gb + (size_t)L * bh, q->t, bh, q->loss + 1, q->loss));
        for (int l = L - 1; l >= 0; l--) {
            cx_dparams p = prof_params(q, l);
            size_t at = (size_t)s * L + (size_t)l;
            CXC(cudaEventRecord(q->ev[2 * ki], q->st));
            if (cx_blk_backward_i(&q->g, &q->d, &p, q->x + at * bh, q->state + at * sf, q->gb + (size_t)(l + 1) * bh,
                                  q->gb + (size_t)l * bh, q->scratch, e))
                return e->code;
            CXC(cudaEventRecord(q->ev[2 * ki + 1], q->st));
            ki++;
            CXC(cudaEventRecord(q->ev[2 * kw], q->st));
            if (cx_blk_backward_w(&q->g, &q->d, q->x + at * bh, q->state + at * sf, q->gb + (size_t)(l + 1) * bh,
                                  q->gr + (size_t)l * nf, e))
                return e->code;
            CXC(cudaEventRecord(q->ev[2 * kw + 1], q->st));
            kw++;
        }
        /* I0: it writes only the scratch, which the next I overwrites */
        cx_dparams p0 = prof_params(q, 0);
        int k0 = EXEC_PROF_FIW * SL + L + s;
        CXC(cudaEventRecord(q->ev[2 * k0], q->st));
        if (cx_blk_backward_i(&q->g, &q->d, &p0, q->x + (size_t)s * L * bh, q->state + (size_t)s * L * sf, q->gb + bh, NULL,
                              q->scratch, e))
            return e->code;
        CXC(cudaEventRecord(q->ev[2 * k0 + 1], q->st));
    }
    int ks = EXEC_PROF_FIW * SL;
    for (int l = 0; l < L; l++, ks++) {
        float *w = q->w + (size_t)l * nf;
        uint16_t *wb = q->g.prec == EXEC_PREC_BF16 ? q->wb + (size_t)l * nf : NULL;
        CXC(cudaEventRecord(q->ev[2 * ks], q->st));
        CXC(cxk_sgd(q->st, w, w, q->gr + (size_t)l * nf, q->m ? q->m + (size_t)l * nf : NULL, wb, nf, 1.0f / (float)S,
                    (float)cfg->lr, (float)cfg->momentum));
        CXC(cudaEventRecord(q->ev[2 * ks + 1], q->st));
    }
    CXC(cudaStreamSynchronize(q->st));
    return PL_OK;
}

/* Frees q's device state. */
static void prof_free(prof *q) {
    if (q->ev)
        for (int k = 0; k < 2 * q->npairs; k++) if (q->ev[k]) cudaEventDestroy(q->ev[k]);
    free(q->ev);
    cx_blas_destroy(q->g.h);
    if (q->st) cudaStreamDestroy(q->st);
    if (q->mem) cudaFree(q->mem);
    cx_green_destroy(&q->green); /* makes the primary context current again first (cuda_common.c) */
    memset(q, 0, sizeof *q);
}

int exec_cuda_profile_layers(const exec_config *cfg, int reps, int concurrency, exec_layer_profile *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    if (reps < 1) return pl_errf(e, PL_EINPUT, "profile repetitions must be at least 1");
    if (concurrency < 1) return pl_errf(e, PL_EINPUT, "profile concurrency must be at least 1");
    if (cfg->hidden < 1 || cfg->microbatch_size < 1 || cfg->layers < 1 || cfg->ffn < 0)
        return pl_errf(e, PL_EINPUT, "profile: width, depth and microbatch size must be at least 1");
    if (!exec_precision_name(cfg->precision)) return pl_errf(e, PL_EINPUT, "unknown precision %d", (int)cfg->precision);
    prof q;
    memset(&q, 0, sizeof q);
    exec_dims_of(cfg, &q.d);
    if (cx_check_block(&q.d, (int)cfg->precision, e) != PL_OK) return e->code;
    if (exec_cuda_devices(e) < 1) return e->code;
    size_t nf = exec_block_floats(&q.d);
    q.S = CX_PROFILE_SLOTS;
    q.L = prof_blocks(cfg, nf, concurrency);
    q.mom = cfg->momentum != 0;
    q.g.prec = cfg->precision;
    int rc = cx_cuda_check(cudaSetDevice(0), "cudaSetDevice", __FILE__, __LINE__, e);
    if (rc == PL_OK && cfg->sm_split && concurrency > 1) {
        rc = cx_green_create(0, concurrency, 0, &q.green, e);
        if (rc == PL_OK) rc = cx_green_make_current(&q.green, e);
        if (rc == PL_OK) rc = cx_green_stream(&q.green, &q.st, e);
    } else if (rc == PL_OK) {
        rc = cx_cuda_check(cudaStreamCreateWithFlags(&q.st, cudaStreamNonBlocking), "cudaStreamCreate", __FILE__, __LINE__, e);
    }
    if (rc == PL_OK) rc = cx_blas_create(&q.g.h, q.st, e);
    q.g.st = q.st;
    if (rc == PL_OK) rc = prof_alloc(&q, cfg, e);
    int SL = q.S * q.L, rounds = (reps + q.S - 1) / q.S;
    q.npairs = EXEC_PROF_FIW * SL + q.L + q.S;
    q.ev = pl_calloc(2 * (size_t)q.npairs, sizeof *q.ev);
    size_t ns = (size_t)rounds * SL, nstep = (size_t)rounds * q.L, ni0 = (size_t)rounds * q.S;
    double *t = pl_calloc(EXEC_PROF_FIW * ns + nstep + ni0, sizeof(double));
    if (rc == PL_OK && (!q.ev || !t)) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    for (int k = 0; k < 2 * q.npairs && rc == PL_OK; k++)
        rc = cx_cuda_check(cudaEventCreate(&q.ev[k]), "cudaEventCreate", __FILE__, __LINE__, e);
    if (rc == PL_OK) rc = prof_round(&q, cfg, e); /* untimed: module load, cuBLAS heuristics, clocks */
    for (int r = 0; r < rounds && rc == PL_OK; r++) {
        rc = prof_round(&q, cfg, e);
        for (int k = 0; k < q.npairs && rc == PL_OK; k++) {
            float ms = 0;
            rc = cx_cuda_check(cudaEventElapsedTime(&ms, q.ev[2 * k], q.ev[2 * k + 1]), "cudaEventElapsedTime", __FILE__,
                               __LINE__, e);
            int fiw = EXEC_PROF_FIW * SL;
            size_t at;
            if (k < fiw) /* F, I, W: kind k / SL, sample k % SL */
                at = (size_t)(k / SL) * ns + (size_t)r * SL + (size_t)(k % SL);
            else if (k < fiw + q.L) /* STEP of block k - fiw */
                at = EXEC_PROF_FIW * ns + (size_t)r * q.L + (size_t)(k - fiw);
            else /* I0 of slot k - fiw - L */
                at = EXEC_PROF_FIW * ns + nstep + (size_t)r * q.S + (size_t)(k - fiw - q.L);
            t[at] = ms * CX_S_PER_MS;
        }
    }
    if (rc == PL_OK) {
        out->f_s = exec_median(t + EXEC_PROF_F * ns, ns);
        out->i_s = exec_median(t + EXEC_PROF_I * ns, ns);
        out->w_s = exec_median(t + EXEC_PROF_W * ns, ns);
        out->step_s = exec_median(t + EXEC_PROF_STEP * ns, nstep);
        out->i0_s = exec_median(t + EXEC_PROF_FIW * ns + nstep, ni0);
        out->concurrency = concurrency;
        exec_profile_sizes(&q.d, out);
    }
    free(t);
    prof_free(&q);
    return rc;
}

int exec_cuda_profile_csv(const exec_config *cfg, int reps, int concurrency, const char *host, pl_buf *out,
                          exec_layer_profile *pp, pl_err *e) {
    if (cfg->layers < 1) return pl_errf(e, PL_EINPUT, "profile needs depth >= 1");
    exec_layer_profile p;
    int rc = exec_cuda_profile_layers(cfg, reps, concurrency, &p, e);
    if (rc) return rc;
    if (pp) *pp = p;
    exec_dims d;
    exec_dims_of(cfg, &d);
    char name[CX_NAME_MAX] = "GPU";
    pl_err ig;
    int sms = exec_cuda_device_info(0, name, sizeof name, &ig);
    char desc[EXEC_BLOCK_TEXT_MAX];
    exec_block_describe(&d, desc, sizeof desc);
    pl_buf_printf(out, "# pipelab profile: the executor's %s, %s GEMMs\n"
                       "# (fp32 weights and accumulation), CUDA backend on %s (%d SMs)%s%s%s, CUDA events, median of %d\n"
                       "# repetitions per block; every block has this shape.\n",
                  desc, exec_precision_name(cfg->precision), name, sms,
                  cfg->sm_split && concurrency > 1 ? ", in a green context of 1/N of the SMs" : "", host ? " on " : "",
                  host ? host : "", reps);
    pl_buf_printf(out, "# " EXEC_PROFILE_META " concurrency=%d step_s=%.9g\n", concurrency, p.step_s);
    return exec_profile_csv_table(cfg, &p, NULL, out, e);
}
