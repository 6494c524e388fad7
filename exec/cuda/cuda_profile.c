/* cuda_profile.c: per-block F, I, W and STEP times on a GPU (CUDA events, median over
 * repetitions), the measurements `pipelab profile --backend cuda` turns into a cost-model profile.
 * The work mirrors the CPU profiler (profile.c): L distinct blocks (their own weights and
 * gradients, so weights are not cache-hot between samples), microbatches in rounds of
 * CX_PROFILE_SLOTS with their own stashed activations, all forwards of a round, then each
 * microbatch's input and weight gradients from the last block down, then a STEP of every block;
 * one untimed round first. With concurrency P > 1, P workers time their rounds side by side, each
 * on its own thread and stream and its own ceil(L / P) blocks, a barrier before every round (a
 * run's P ranks on one GPU compute at once, sharing its memory bandwidth, L2 and launch path):
 * with --sm-split each in the green context of 1/P of the SMs its rank gets, else all sharing
 * the SMs; the medians are over all workers' samples. */
#include "exec_cuda.h"
#include "cuda_exec_int.h"
#include "cuda_int.h"
#include "exec_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CX_PROFILE_SLOTS 4
/* Most profile workers at once (a GPU's ranks). */
#define CX_PROFILE_MAX_WORKERS 64
/* Most GEMMs of a round bracketed by events (a round's later ones run without, as a run's past
 * CX_MAX_TIMED_GEMMS would): 2^18 pairs take about half a second to create. */
#define CX_PROFILE_MAX_GEMM_EVENTS (1 << 18)
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
    size_t nf = exec_block_floats(&q->d), bh = (size_t)q->d.b * q->d.h;
    size_t sf = exec_block_state_floats(&q->d), scr = exec_block_scratch_floats(&q->d);
    size_t L = (size_t)q->L, S = (size_t)q->S;
    size_t opn = cx_blk_bf16_floats(&q->d);
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
    q->g.n_ev = 0; /* the GEMMs' events again (the last round's were synchronized) */
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
        /* I0 (its W has run: it overwrites only the scratch and block 0's stashed state of this
         * slot, which the next round's F writes again) */
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
    if (q->g.ev)
        for (int k = 0; k < 2 * q->g.cap_ev; k++) if (q->g.ev[k]) cudaEventDestroy(q->g.ev[k]);
    free(q->g.ev);
    cx_blas_destroy(q->g.h);
    if (q->st) cudaStreamDestroy(q->st);
    if (q->mem) cudaFree(q->mem);
    cx_green_destroy(&q->green); /* makes the primary context current again first (cuda_common.c) */
    memset(q, 0, sizeof *q);
}

/* What the workers of one profile share: the gate that opens once every worker's thread exists
 * (exec_team_run), the barrier before each round, and whether any failed (each then skips its
 * work, but still meets every barrier). */
typedef struct prof_shared {
    exec_gate gate;
    pthread_barrier_t bar;
    atomic_int failed;
    /* the hand-off's ping-pong between workers 0 and 1 */
    cx_box box[2];                 /* box[i] on worker i, filled by the other */
    size_t bytes[EXEC_P2P_SIZES];  /* its message sizes */
    int rounds;                    /* timed round trips of each size */
    double *rt_s;                  /* [EXEC_P2P_SIZES rounds] worker 0's round trips */
    double spin_s, timeout_s;
} prof_shared;

/* One profiling worker: its device state (made, used and freed on its own thread, in its green
 * context when the SMs are split), and where its samples go in the profile's arrays. */
typedef struct prof_worker {
    prof q;
    const exec_config *cfg;
    prof_shared *sh;  /* NULL: the only worker, on the calling thread */
    int index, workers, rounds;
    double *t;        /* the profile's samples of all workers, kind by kind (prof_sample_at) */
    size_t ns, nstep, ni0; /* one worker's samples of each of F, I, W; of STEP; of I0 */
    int rc;
    int stopped;      /* rc is only the other worker's failure in the hand-off */
    pl_err err;
} prof_worker;

/* Returns where event pair k of round r of worker w goes in w->t: F, I, W (k < FIW S L: kind
 * k / SL) of all workers, then STEP (L a round), then I0 (S a round), each kind's samples worker
 * after worker, so that each kind's median is over one contiguous run of all workers' samples. */
static size_t prof_sample_at(const prof_worker *w, int r, int k) {
    int L = w->q.L, S = w->q.S, SL = S * L, fiw = EXEC_PROF_FIW * SL, W = w->workers;
    size_t i = (size_t)w->index;
    if (k < fiw) return (size_t)(k / SL) * W * w->ns + i * w->ns + (size_t)r * SL + (size_t)(k % SL);
    size_t step0 = EXEC_PROF_FIW * W * w->ns;
    if (k < fiw + L) return step0 + i * w->nstep + (size_t)r * L + (size_t)(k - fiw);
    return step0 + W * w->nstep + i * w->ni0 + (size_t)r * S + (size_t)(k - fiw - L);
}

/* Returns 1 when worker w runs in a green context of its own (the SMs split among the workers). */
static int prof_green(const prof_worker *w) { return w->cfg->sm_split && w->workers > 1; }

/* Creates a non-blocking stream of worker w (in its green context when it has one). */
static int prof_stream(prof_worker *w, cudaStream_t *st, pl_err *e) {
    if (prof_green(w)) return cx_green_stream(&w->q.green, st, e);
    return cx_cuda_check(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking), "cudaStreamCreate", __FILE__, __LINE__, e);
}

/* Sets up worker w's stream (in green context w->index of w->workers when the SMs are split),
 * cuBLAS, buffers and events. Returns PL_OK or the error. */
static int prof_setup(prof_worker *w, pl_err *e) {
    prof *q = &w->q;
    const exec_config *cfg = w->cfg;
    int rc = cx_cuda_check(cudaSetDevice(0), "cudaSetDevice", __FILE__, __LINE__, e);
    if (rc == PL_OK && prof_green(w)) {
        rc = cx_green_create(0, w->workers, w->index, &q->green, e);
        if (rc == PL_OK) rc = cx_green_make_current(&q->green, e);
    }
    if (rc == PL_OK) rc = prof_stream(w, &q->st, e);
    if (rc == PL_OK) rc = cx_blas_create(&q->g.h, q->st, e);
    q->g.st = q->st;
    if (rc == PL_OK) rc = prof_alloc(q, cfg, e);
    q->npairs = EXEC_PROF_FIW * q->S * q->L + q->L + q->S;
    q->ev = rc == PL_OK ? pl_calloc(2 * (size_t)q->npairs, sizeof *q->ev) : NULL;
    if (rc == PL_OK && !q->ev) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    for (int k = 0; k < 2 * q->npairs && rc == PL_OK; k++)
        rc = cx_cuda_check(cudaEventCreate(&q->ev[k]), "cudaEventCreate", __FILE__, __LINE__, e);
    /* every GEMM between two events, as the run's walk times each of its GEMMs (cuda_mem.c): on
     * blocks small enough that their launches bound their time, the records are part of what an
     * action costs; a round's GEMMs: F, I and W of S L blocks and S I0s */
    long ng = cx_blk_gemms(&q->d) * ((long)q->S * q->L + q->S) + 1;
    if (ng > CX_PROFILE_MAX_GEMM_EVENTS) ng = CX_PROFILE_MAX_GEMM_EVENTS;
    q->g.ev = rc == PL_OK ? pl_calloc(2 * (size_t)ng, sizeof *q->g.ev) : NULL;
    if (rc == PL_OK && !q->g.ev) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) q->g.cap_ev = (int)ng;
    for (int k = 0; k < 2 * q->g.cap_ev && rc == PL_OK; k++)
        rc = cx_cuda_check(cudaEventCreate(&q->g.ev[k]), "cudaEventCreate", __FILE__, __LINE__, e);
    return rc;
}

/* Reads the event pairs of timed round r of worker w into w->t. Returns PL_OK or the error. */
static int prof_read_round(prof_worker *w, int r, pl_err *e) {
    const prof *q = &w->q;
    for (int k = 0; k < q->npairs; k++) {
        float ms = 0;
        int rc = cx_cuda_check(cudaEventElapsedTime(&ms, q->ev[2 * k], q->ev[2 * k + 1]), "cudaEventElapsedTime", __FILE__,
                               __LINE__, e);
        if (rc != PL_OK) return rc;
        w->t[prof_sample_at(w, r, k)] = ms * CX_S_PER_MS;
    }
    return PL_OK;
}

/* ---------------------------------------------------------------- the hand-off */

/* One side of the hand-off's ping-pong: its communication stream, its copy's `arrived` event
 * (the other's box's), the event its copy waits for, its box and data, and (worker 0) an event
 * pair per timed round trip. */
typedef struct prof_hand {
    cudaStream_t ms;
    cudaEvent_t ready, arrived;
    cudaEvent_t *rt;  /* [2 EXEC_P2P_SIZES rounds] */
    int nrt;
    float *box, *data; /* [largest size] each, one allocation */
} prof_hand;

static void hand_free(prof_hand *h) {
    for (int k = 0; k < h->nrt; k++) if (h->rt[k]) cudaEventDestroy(h->rt[k]);
    free(h->rt);
    if (h->ready) cudaEventDestroy(h->ready);
    if (h->arrived) cudaEventDestroy(h->arrived);
    if (h->ms) cudaStreamDestroy(h->ms);
    if (h->box) cudaFree(h->box);
    memset(h, 0, sizeof *h);
}

/* Makes worker w's side (w->index 0 or 1) and publishes its box and its copy's event. */
static int hand_setup(prof_worker *w, prof_hand *h, pl_err *e) {
    prof_shared *sh = w->sh;
    size_t big = sh->bytes[EXEC_P2P_SIZES - 1];
    if (prof_stream(w, &h->ms, e)) return e->code;
    void *mem = NULL;
    CXC(cudaMalloc(&mem, 2 * big));
    h->box = mem;
    h->data = h->box + big / sizeof(float);
    CXC(cudaMemsetAsync(h->box, 0, 2 * big, h->ms));
    CXC(cudaStreamSynchronize(h->ms));
    CXC(cudaEventCreateWithFlags(&h->ready, cudaEventDisableTiming));
    CXC(cudaEventCreateWithFlags(&h->arrived, cudaEventDisableTiming));
    if (w->index == 0) {
        h->rt = pl_calloc(2 * EXEC_P2P_SIZES * (size_t)sh->rounds, sizeof *h->rt);
        if (!h->rt) return pl_errf(e, PL_ENOMEM, "out of memory");
        h->nrt = 2 * EXEC_P2P_SIZES * sh->rounds;
        for (int k = 0; k < h->nrt; k++) CXC(cudaEventCreate(&h->rt[k]));
    }
    cx_box *mine = &sh->box[w->index];
    mine->dptr = h->box;
    mine->dev = 0;
    sh->box[1 - w->index].arrived = h->arrived;
    return PL_OK;
}

/* Sends message seq (bytes of h's data, once the compute stream's work so far is done) into
 * the other worker's box, as the walk's SEND does. */
static int hand_send(prof_worker *w, prof_hand *h, size_t bytes, int seq, pl_err *e) {
    cx_box *to = &w->sh->box[1 - w->index];
    CXC(cudaEventRecord(h->ready, w->q.st));
    CXC(cudaStreamWaitEvent(h->ms, h->ready, 0));
    if (cx_box_copy(to, h->data, 0, bytes, h->ms, e)) return e->code;
    CXC(cudaEventRecord(h->arrived, h->ms));
    cx_box_publish(to, seq);
    return PL_OK;
}

/* Receives message seq from the other worker into h's data, as the walk's RECV does. */
static int hand_recv(prof_worker *w, prof_hand *h, size_t bytes, int seq, pl_err *e) {
    prof_shared *sh = w->sh;
    cx_box *b = &sh->box[w->index];
    int r = cx_box_wait(b, seq, &sh->failed, sh->spin_s, sh->timeout_s);
    if (r == CX_WAIT_ABORTED) {
        w->stopped = 1;
        return pl_errf(e, PL_EINTERNAL, "stopped: the other worker of the hand-off failed");
    }
    if (r == CX_WAIT_TIMEOUT)
        return pl_errf(e, PL_EINTERNAL, "timed out after %g s waiting for message %d of the hand-off", sh->timeout_s, seq);
    return cx_box_take(b, h->data, bytes, w->q.st, e);
}

/* The ping-pong: for each size an untimed round trip, then the timed ones, worker 0 sending
 * first and timing each round trip on its compute stream; worker 0 then reads them into
 * sh->rt_s. */
static int hand_pingpong(prof_worker *w, prof_hand *h, pl_err *e) {
    prof_shared *sh = w->sh;
    int seq = 0;
    for (int k = 0; k < EXEC_P2P_SIZES; k++)
        for (int j = -1; j < sh->rounds; j++) {
            size_t n = sh->bytes[k];
            int at = k * sh->rounds + j;
            seq++;
            if (w->index == 1) {
                if (hand_recv(w, h, n, seq, e) || hand_send(w, h, n, seq, e)) return e->code;
                continue;
            }
            if (j >= 0) CXC(cudaEventRecord(h->rt[2 * at], w->q.st));
            if (hand_send(w, h, n, seq, e) || hand_recv(w, h, n, seq, e)) return e->code;
            if (j >= 0) CXC(cudaEventRecord(h->rt[2 * at + 1], w->q.st));
        }
    CXC(cudaStreamSynchronize(w->q.st));
    CXC(cudaStreamSynchronize(h->ms));
    for (int k = 0; k < h->nrt / 2; k++) {
        float ms = 0;
        CXC(cudaEventElapsedTime(&ms, h->rt[2 * k], h->rt[2 * k + 1]));
        sh->rt_s[k] = ms * CX_S_PER_MS;
    }
    return PL_OK;
}

/* Worker w's part in the hand-off's profile (every worker meets its two barriers; workers 0 and
 * 1 play): set up, barrier, the ping-pong, both streams drained, barrier (no box is freed while
 * the other's copy may still write it), freed. */
static void prof_handoff(prof_worker *w) {
    prof_shared *sh = w->sh;
    prof_hand h;
    memset(&h, 0, sizeof h);
    int plays = w->index < 2;
    if (plays && w->rc == PL_OK) w->rc = hand_setup(w, &h, &w->err);
    if (w->rc) atomic_store(&sh->failed, 1);
    pthread_barrier_wait(&sh->bar);
    if (plays && !atomic_load(&sh->failed)) {
        w->rc = hand_pingpong(w, &h, &w->err);
        if (w->rc) atomic_store(&sh->failed, 1);
    }
    if (plays && w->q.st) (void)cudaStreamSynchronize(w->q.st);
    if (plays && h.ms) (void)cudaStreamSynchronize(h.ms);
    pthread_barrier_wait(&sh->bar);
    hand_free(&h);
}

/* Worker w's body: setup, the untimed round, then its timed rounds, each after a barrier with
 * the other workers (so that they time their rounds side by side, as a run's ranks compute at
 * once), then teardown on the same thread (its green context is current there). */
static void *prof_main(void *arg) {
    prof_worker *w = arg;
    pl_err *e = &w->err;
    if (w->sh && !exec_gate_pass(&w->sh->gate)) return NULL; /* another worker could not start */
    w->rc = prof_setup(w, e);
    for (int r = -1; r < w->rounds; r++) { /* round -1: untimed (module load, cuBLAS heuristics, clocks) */
        if (w->sh) {
            if (w->rc) atomic_store(&w->sh->failed, 1);
            pthread_barrier_wait(&w->sh->bar);
            if (atomic_load(&w->sh->failed)) continue;
        }
        if (w->rc) continue;
        w->rc = prof_round(&w->q, w->cfg, e);
        if (w->rc == PL_OK && r >= 0) w->rc = prof_read_round(w, r, e);
    }
    if (w->sh) prof_handoff(w);
    if (w->rc && w->workers > 1) pl_err_prefix(e, "profile worker %d of %d: ", w->index + 1, w->workers);
    prof_free(&w->q);
    return NULL;
}

int exec_cuda_profile_layers(const exec_config *cfg, int reps, int concurrency, exec_layer_profile *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    if (reps < 1) return pl_errf(e, PL_EINPUT, "profile repetitions must be at least 1");
    if (concurrency < 1 || concurrency > CX_PROFILE_MAX_WORKERS)
        return pl_errf(e, PL_EINPUT, "profile concurrency must be in [1, %d], got %d", CX_PROFILE_MAX_WORKERS, concurrency);
    if (cfg->hidden < 1 || cfg->microbatch_size < 1 || cfg->layers < 1 || cfg->ffn < 0)
        return pl_errf(e, PL_EINPUT, "profile: width, depth and microbatch size must be at least 1");
    if (!exec_precision_name(cfg->precision)) return pl_errf(e, PL_EINPUT, "unknown precision %d", (int)cfg->precision);
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (exec_cuda_devices(e) < 1) return e->code;
    if (cfg->sm_split && concurrency > 1 && cx_green_init(e) != PL_OK) return e->code; /* once, before the workers */
    size_t nf = exec_block_floats(&d);
    int W = concurrency, S = CX_PROFILE_SLOTS, L = prof_blocks(cfg, nf, concurrency), rounds = (reps + S - 1) / S;
    size_t ns = (size_t)rounds * S * L, nstep = (size_t)rounds * L, ni0 = (size_t)rounds * S;
    double *t = pl_calloc((size_t)W * (EXEC_PROF_FIW * ns + nstep + ni0), sizeof(double));
    prof_worker *w = pl_calloc((size_t)W, sizeof *w);
    prof_shared sh;
    memset(&sh, 0, sizeof sh);
    if (W > 1) { /* the hand-off between two of the workers */
        exec_p2p_plan(cfg, reps, sh.bytes, &sh.rounds);
        sh.rt_s = pl_calloc(EXEC_P2P_SIZES * (size_t)sh.rounds, sizeof *sh.rt_s);
        sh.spin_s = cx_spin_s(W); /* as the run's ranks wait */
        sh.timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : EXEC_DEFAULT_TIMEOUT_S;
    }
    int rc = t && w && (W == 1 || sh.rt_s) ? PL_OK : pl_errf(e, PL_ENOMEM, "out of memory");
    for (int i = 0; i < W && rc == PL_OK; i++) {
        prof_worker *x = &w[i];
        x->q.d = d;
        x->q.S = S;
        x->q.L = L;
        x->q.mom = cfg->momentum != 0;
        x->q.g.prec = cfg->precision;
        x->cfg = cfg;
        x->sh = W > 1 ? &sh : NULL;
        x->index = i;
        x->workers = W;
        x->rounds = rounds;
        x->t = t;
        x->ns = ns;
        x->nstep = nstep;
        x->ni0 = ni0;
    }
    if (rc == PL_OK && W == 1) {
        prof_main(&w[0]);
    } else if (rc == PL_OK) {
        atomic_init(&sh.failed, 0);
        if (pthread_barrier_init(&sh.bar, NULL, (unsigned)W) != 0) rc = pl_errf(e, PL_EINTERNAL, "cannot make the profile's barrier");
        if (rc == PL_OK) {
            /* the barrier needs every worker: none starts before all exist, or all return */
            rc = exec_team_run(W, prof_main, w, sizeof *w, &sh.gate, "profile worker", e);
            pthread_barrier_destroy(&sh.bar);
        }
    }
    /* the first failure that is not only a worker stopped by its partner's */
    for (int pass = 0; pass < 2 && rc == PL_OK; pass++)
        for (int i = 0; i < W && rc == PL_OK; i++)
            if (w[i].rc && (pass || !w[i].stopped)) {
                *e = w[i].err;
                rc = w[i].rc;
            }
    if (rc == PL_OK && W > 1) {
        rc = exec_p2p_fit(sh.bytes, sh.rt_s, sh.rounds, 2, &out->p2p.latency_s, &out->p2p.Bps, e); /* round trips */
        if (rc) pl_err_prefix(e, "profile of the hand-off between two ranks on the GPU: ");
    }
    if (rc == PL_OK) {
        size_t step0 = EXEC_PROF_FIW * (size_t)W * ns;
        out->f_s = exec_median(t + EXEC_PROF_F * W * ns, (size_t)W * ns);
        out->i_s = exec_median(t + EXEC_PROF_I * W * ns, (size_t)W * ns);
        out->w_s = exec_median(t + EXEC_PROF_W * W * ns, (size_t)W * ns);
        out->step_s = exec_median(t + step0, (size_t)W * nstep);
        out->i0_s = exec_median(t + step0 + (size_t)W * nstep, (size_t)W * ni0);
        out->concurrency = concurrency;
        exec_profile_sizes(&d, out);
    }
    free(t);
    free(w);
    free(sh.rt_s);
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
    char who[96] = "";
    if (concurrency > 1)
        snprintf(who, sizeof who, ", %d workers at once%s", concurrency,
                 cfg->sm_split ? " each in a green context of 1/N of the SMs" : " sharing its SMs");
    pl_buf_printf(out, "# pipelab profile: the executor's %s, %s GEMMs\n"
                       "# (fp32 weights and accumulation), CUDA backend on %s (%d SMs)%s%s%s, CUDA events, median of %d\n"
                       "# repetitions per block; every block has this shape.\n",
                  desc, exec_precision_name(cfg->precision), name, sms, who, host ? " on " : "", host ? host : "", reps);
    pl_buf_printf(out, "# " EXEC_PROFILE_META " concurrency=%d step_s=%.9g\n", concurrency, p.step_s);
    return exec_profile_csv_table(cfg, &p, NULL, out, e);
}
