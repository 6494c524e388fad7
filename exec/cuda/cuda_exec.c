/* cuda_exec.c: exec_cuda_run: the lowered schedule on GPUs, one host thread per rank. Each rank
 * walks its action list as the CPU worker does (worker.c) through the same bookkeeping (pools
 * of slots, weight versions, memory classes: exec_xrank, sized by exec_xrank_init's dry walk,
 * kept by xrank.c's calls around each action's compute), but its compute is enqueued on a CUDA
 * stream and its data lives in one device allocation laid out like the CPU arena. SENDs copy with cudaMemcpyPeerAsync on a second stream into a receive
 * slot of the receiving rank (one per RECV action of its list), so communication overlaps
 * compute; the receiver's compute stream waits for the copy's event. CUDA events around every
 * action and every GEMM give the times. Passes end with the rank's streams drained and a
 * barrier, so receive slots are reused safely from pass to pass. */
#undef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "exec_cuda.h"
#include "cuda_exec_int.h"
#include "cuda_int.h"
#include "exec_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A rank waiting for a message polls its slot CX_WAIT_SPINS times, then naps CX_WAIT_NAP_NS
 * between polls. */
#define CX_WAIT_SPINS 2000
#define CX_WAIT_NAP_NS 20000L
/* The most GEMMs of a pass that are timed (events are made for each). */
#define CX_MAX_TIMED_GEMMS (1 << 26)
/* The per-action tables of a rank: send_rank, send_slot, recv_slot. */
#define CX_ACTION_TABLES 3

/* ---------------------------------------------------------------- barrier and abort */

/* Stops the run: every waiting or later wait fails with why's message. */
static void cx_abort(cx_shared *sh, const pl_err *why) {
    pthread_mutex_lock(&sh->mu);
    if (!atomic_load(&sh->aborted)) {
        sh->why = *why;
        atomic_store(&sh->aborted, 1);
    }
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* Fills e with "aborted: <first failure>" and returns its code. */
static int aborted_err(cx_shared *sh, pl_err *e) {
    pthread_mutex_lock(&sh->mu);
    int code = sh->why.code ? sh->why.code : PL_EINTERNAL;
    pl_errf(e, code, EXEC_ABORTED "%s", sh->why.msg);
    pthread_mutex_unlock(&sh->mu);
    return code;
}

/* Waits for every rank; fails when the run is aborted or the wait outlasts the timeout. */
static int cx_barrier(cx_shared *sh, int r, pl_err *e) {
    pthread_mutex_lock(&sh->mu);
    if (atomic_load(&sh->aborted)) {
        pthread_mutex_unlock(&sh->mu);
        return aborted_err(sh, e);
    }
    int gen = sh->bar_gen;
    if (++sh->bar_count == sh->p) {
        sh->bar_count = 0;
        sh->bar_gen++;
        pthread_cond_broadcast(&sh->cv);
        pthread_mutex_unlock(&sh->mu);
        return PL_OK;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double t = (double)until.tv_sec + until.tv_nsec / (double)EXEC_NS_PER_S + sh->timeout_s;
    until.tv_sec = (time_t)t;
    until.tv_nsec = (long)((t - (double)until.tv_sec) * EXEC_NS_PER_S);
    int timed_out = 0;
    while (sh->bar_gen == gen && !atomic_load(&sh->aborted) && !timed_out)
        timed_out = pthread_cond_timedwait(&sh->cv, &sh->mu, &until) != 0 && sh->bar_gen == gen;
    int ab = atomic_load(&sh->aborted);
    pthread_mutex_unlock(&sh->mu);
    if (ab) return aborted_err(sh, e);
    if (!timed_out) return PL_OK;
    pl_errf(e, PL_EINTERNAL, "rank %d timed out after %g s at the barrier between passes", r, sh->timeout_s);
    pl_err_set_rank(e, r);
    return PL_EINTERNAL;
}

/* Waits until every rank has drained its GPU work (n arrivals, abort or not): no rank frees memory
 * that a peer's copy may still touch. */
static void cx_exit_wait(cx_shared *sh, int n) {
    pthread_mutex_lock(&sh->mu);
    sh->exit_count += n;
    pthread_cond_broadcast(&sh->cv);
    while (sh->exit_count < sh->p) pthread_cond_wait(&sh->cv, &sh->mu);
    pthread_mutex_unlock(&sh->mu);
}

/* Counts n ranks that never started as done with their GPU work (wakes the others). */
static void cx_exit_wait_none(cx_shared *sh, int n) {
    pthread_mutex_lock(&sh->mu);
    sh->exit_count += n;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* ---------------------------------------------------------------- addressing (bookkeeping: xrank.c) */

/* Returns the device floats of slot i of host pool p. */
static float *dslot(const cx_rank *c, const exec_pool *p, int i) {
    return c->d_arena + (p->base - c->x.arena) + (size_t)i * p->stride;
}

/* Returns the device address of host arena address h (NULL stays NULL). */
static float *dev_of(const cx_rank *c, float *h) { return h ? c->d_arena + (h - c->x.arena) : NULL; }

/* The view of one microbatch's buffers of a stage (exec_xview_of), on the GPU. */
static exec_xview dview_of(const cx_rank *c, const exec_xstage *st, int j) {
    exec_xview v = exec_xview_of(&c->x, st, j);
    v.in = dev_of(c, v.in);
    v.act = dev_of(c, v.act);
    v.gin = dev_of(c, v.gin);
    v.wg = dev_of(c, v.wg);
    return v;
}

/* Block k of version ver of stage st: its fp32 parameters and (bf16 runs) their bf16 copy. */
static cx_dparams params(const cx_rank *c, const exec_xstage *st, int ver, int k) {
    const exec_dims *d = &c->x.d;
    size_t nf = exec_block_floats(d), hf = (size_t)d->h * d->f;
    size_t off = (size_t)ver * st->ver.stride + (size_t)k * nf;
    const float *p = dslot(c, &st->ver, 0) + off;
    cx_dparams q = {p, p + hf, p + hf + d->f, p + 2 * hf + d->f, NULL, NULL};
    if (c->d_verbf) {
        const uint16_t *b = c->d_verbf[c->x.loc[st->stage]] + off;
        q.w1b = b;
        q.w2b = b + hf + d->f;
    }
    return q;
}

/* ---------------------------------------------------------------- the model on the GPU */

static int block_forward(cx_rank *c, const cx_dparams *p, const float *x, float *state, float *y, pl_err *e) {
    return cx_blk_forward(&c->g, &c->x.d, p, x, state, y, e);
}

static int block_backward_i(cx_rank *c, const cx_dparams *p, const float *x, float *state, const float *gy, float *gx,
                            pl_err *e) {
    float *scr = c->d_arena + (c->x.scratch - c->x.arena); /* the rank's scratch (the block's backward's) */
    return cx_blk_backward_i(&c->g, &c->x.d, p, x, state, gy, gx, scr, e);
}

static int block_backward_w(cx_rank *c, const float *x, const float *state, const float *gy, float *gp, pl_err *e) {
    return cx_blk_backward_w(&c->g, &c->x.d, x, state, gy, gp, e);
}

/* The stage's blocks forward with version ver from v's input; the last output goes to y. */
static int stage_forward(cx_rank *c, const exec_xstage *st, int ver, const exec_xview *v, float *y, pl_err *e) {
    for (int k = 0; k < st->nb; k++) {
        cx_dparams p = params(c, st, ver, k);
        if (block_forward(c, &p, exec_xv_x(v, k), exec_xv_state(v, k), k == st->nb - 1 ? y : exec_xv_x(v, k + 1), e))
            return e->code;
    }
    return PL_OK;
}

/* Makes the compute stream wait until send slot o's last copy has read it. */
static int out_ready(cx_rank *c, int o, pl_err *e) {
    if (c->out_busy[o]) {
        CXC(cudaStreamWaitEvent(c->cs, c->ev_out[o], 0));
        c->out_busy[o] = 0;
    }
    return PL_OK;
}

/* The rank's scratch as a device pointer: the backward's (exec_block_scratch_floats), then a
 * throw-away [b h]. */
static float *dscratch(const cx_rank *c) { return c->d_arena + (c->x.scratch - c->x.arena); }

/* ---------------------------------------------------------------- compute actions (worker.c's compute, on the GPU) */

/* F of (s, j). */
static int do_f(cx_rank *c, int s, int j, pl_err *e) {
    exec_xrank *x = &c->x;
    exec_xf f;
    if (exec_xrank_f_begin(x, s, j, &f, e) != PL_OK) return e->code;
    size_t bh = (size_t)x->d.b * x->d.h;
    if (f.in_new >= 0)
        CXC(cudaMemcpyAsync(dslot(c, &x->in, f.in_new), c->d_x + (size_t)f.di * bh, bh * sizeof(float), cudaMemcpyDeviceToDevice, c->cs));
    if (f.out == &x->out && out_ready(c, f.out_slot, e)) return e->code;
    float *y = dslot(c, f.out, f.out_slot);
    exec_xview v = dview_of(c, f.st, j);
    if (stage_forward(c, f.st, f.ver, &v, y, e)) return e->code;
    if (f.last) CXC(cxk_mse_grad(c->cs, y, c->d_t + (size_t)f.di * bh, bh, c->d_loss + (size_t)x->pass * x->M + j));
    exec_xrank_f_end(x, &f, j);
    return PL_OK;
}

/* I of (s, j). */
static int do_i(cx_rank *c, int s, int j, pl_err *e) {
    exec_xrank *x = &c->x;
    exec_xi b;
    if (exec_xrank_i_begin(x, s, j, &b, e) != PL_OK) return e->code;
    exec_xstage *st = b.st;
    exec_xview v = dview_of(c, st, j);
    if (b.recompute && stage_forward(c, st, b.ver, &v, dscratch(c) + exec_block_scratch_floats(&x->d), e))
        return e->code; /* recomputation */
    if (b.gx == &x->out && out_ready(c, b.gx_slot, e)) return e->code;
    float *gx = b.gx ? dslot(c, b.gx, b.gx_slot) : NULL;
    for (int k = st->nb - 1; k >= 0; k--) {
        cx_dparams p = params(c, st, b.ver, k);
        if (block_backward_i(c, &p, exec_xv_x(&v, k), exec_xv_state(&v, k), exec_xv_g(&v, k + 1), k > 0 ? exec_xv_g(&v, k) : gx, e))
            return e->code;
    }
    st->flags[j] |= XS_IDONE;
    return PL_OK;
}

/* W of (s, j): accumulates the weight gradients and frees what the microbatch held. */
static int do_w(cx_rank *c, int s, int j, pl_err *e) {
    exec_xrank *x = &c->x;
    exec_xstage *st = exec_xrank_w_begin(x, s, j, e);
    if (!st) return e->code;
    exec_xview v = dview_of(c, st, j);
    size_t nf = exec_block_floats(&x->d);
    float *grad = dev_of(c, st->grad);
    for (int k = st->nb - 1; k >= 0; k--)
        if (block_backward_w(c, exec_xv_x(&v, k), exec_xv_state(&v, k), exec_xv_g(&v, k + 1), grad + (size_t)k * nf, e))
            return e->code;
    exec_xrank_w_end(x, st, j);
    return PL_OK;
}

/* STEP of stage s: SGD on the newest version, in place or into a new version slot. */
static int do_step(cx_rank *c, int s, pl_err *e) {
    exec_xrank *x = &c->x;
    exec_xstage *st;
    int dst;
    if (exec_xrank_step_begin(x, s, &st, &dst, e) != PL_OK) return e->code;
    if (!st) return PL_OK;
    float scale = 1.0f / (float)st->nacc, lr = (float)x->cfg->lr, mu = (float)x->cfg->momentum;
    uint16_t *obf = c->d_verbf ? c->d_verbf[x->loc[s]] + (size_t)dst * st->ver.stride : NULL;
    CXC(cxk_sgd(c->cs, dslot(c, &st->ver, st->cur), dslot(c, &st->ver, dst), dev_of(c, st->grad), dev_of(c, st->mom), obf,
                st->pfloats, scale, lr, mu));
    exec_xrank_step_end(st, dst);
    return PL_OK;
}

/* ---------------------------------------------------------------- communication actions */

/* SEND of action k: the copy on the communication stream into the receiver's slot. */
static int do_send(cx_rank *c, size_t k, const sched_action *a, pl_err *e) {
    exec_xrank *x = &c->x;
    int *slotp = exec_xrank_send_begin(x, a, e);
    if (!slotp) return e->code;
    int o = *slotp;
    size_t bytes = (size_t)x->d.b * x->d.h * sizeof(float);
#ifdef PIPELAB_CUDA_NCCL
    if (c->nccl) {
        if (cx_nccl_send(c, k, dslot(c, &x->out, o), bytes / sizeof(float), o, e)) return e->code;
        exec_xrank_send_end(x, slotp);
        return PL_OK;
    }
#endif
    cx_box *b = &c->sh->box[c->send_rank[k]][c->send_slot[k]];
    CXC(cudaEventRecord(c->ev_tmp, c->cs));           /* the data is ready when the compute so far is */
    CXC(cudaStreamWaitEvent(c->ms, c->ev_tmp, 0));
    CXC(cudaEventRecord(c->ev_act[2 * k], c->ms));
    if (b->dev == c->dev) CXC(cudaMemcpyAsync(b->dptr, dslot(c, &x->out, o), bytes, cudaMemcpyDeviceToDevice, c->ms));
    else CXC(cudaMemcpyPeerAsync(b->dptr, b->dev, dslot(c, &x->out, o), c->dev, bytes, c->ms));
    CXC(cudaEventRecord(c->ev_send[k], c->ms));
    CXC(cudaEventRecord(c->ev_out[o], c->ms));
    CXC(cudaEventRecord(c->ev_act[2 * k + 1], c->ms));
    c->out_busy[o] = 1;
    atomic_store_explicit(&b->seq, x->pass + 1, memory_order_release);
    exec_xrank_send_end(x, slotp);
    return PL_OK;
}

/* Waits on the host until the sender of receive slot `slot` has enqueued this pass's copy. */
static int wait_box(cx_rank *c, cx_box *b, const sched_action *a, pl_err *e) {
    int want = c->x.pass + 1;
    double t0 = pl_now_s();
    for (long spins = 0; atomic_load_explicit(&b->seq, memory_order_acquire) != want; spins++) {
        if (atomic_load(&c->sh->aborted)) return aborted_err(c->sh, e);
        if (spins > CX_WAIT_SPINS) {
            struct timespec ts = {0, CX_WAIT_NAP_NS};
            nanosleep(&ts, NULL);
            if (pl_now_s() - t0 > c->sh->timeout_s) {
                int from = a->kind == SCHED_RECV_F ? a->stage - 1 : a->stage + 1;
                return pl_errf(e, PL_EINTERNAL, "timed out after %g s: rank %d waits for %s of stage %d microbatch %d from rank %d",
                               c->sh->timeout_s, c->x.r, a->kind == SCHED_RECV_F ? "activations" : "gradients", a->stage,
                               a->mb, c->x.s->stage_rank[from]);
            }
        }
    }
    return PL_OK;
}

/* RECV of action k: the compute stream waits for the copy, then moves the slot's data into the
 * input (or output-gradient) buffer. */
static int do_recv(cx_rank *c, size_t k, const sched_action *a, pl_err *e) {
    exec_xrank *x = &c->x;
    size_t bytes = (size_t)x->d.b * x->d.h * sizeof(float);
    exec_pool *pool;
    int i = exec_xrank_recv_begin(x, a, &pool, e);
    if (i < 0) return e->code;
    float *dst = dslot(c, pool, i);
#ifdef PIPELAB_CUDA_NCCL
    if (c->nccl) return cx_nccl_recv(c, k, dst, bytes / sizeof(float), e);
#endif
    cx_box *b = &c->sh->box[x->r][c->recv_slot[k]];
    if (wait_box(c, b, a, e)) return e->code;
    CXC(cudaStreamWaitEvent(c->cs, b->arrived, 0));
    CXC(cudaMemcpyAsync(dst, b->dptr, bytes, cudaMemcpyDeviceToDevice, c->cs));
    return PL_OK;
}

/* Executes action k; returns PL_OK or an error (the caller adds rank and action). */
static int do_action(cx_rank *c, size_t k, const sched_action *a, pl_err *e) {
    switch (a->kind) {
    case SCHED_F: return do_f(c, a->stage, a->mb, e);
    case SCHED_I: return do_i(c, a->stage, a->mb, e);
    case SCHED_W: return do_w(c, a->stage, a->mb, e);
    case SCHED_B: {
        int rc = do_i(c, a->stage, a->mb, e);
        return rc ? rc : do_w(c, a->stage, a->mb, e);
    }
    case SCHED_OVERLAP: {
        int rc = do_f(c, a->stage, a->mb, e);
        if (rc == PL_OK) rc = do_i(c, a->stage2, a->mb2, e);
        if (rc == PL_OK && a->kind2 == SCHED_B) rc = do_w(c, a->stage2, a->mb2, e);
        return rc;
    }
    case SCHED_SEND_F:
    case SCHED_SEND_B: return do_send(c, k, a, e);
    case SCHED_RECV_F:
    case SCHED_RECV_B: return do_recv(c, k, a, e);
    case SCHED_REDUCE_GRAD: return exec_xrank_local(&c->x, a->stage, e) ? PL_OK : PL_EINPUT;
    case SCHED_STEP: return do_step(c, a->stage, e);
    case SCHED_UNSHARD:
    case SCHED_RESHARD: return PL_OK;
    default: return pl_errf(e, PL_EINPUT, "unknown action kind %d", a->kind);
    }
}

/* Adds "rank R (GPU D), action K (text), pass P: " before e's message. */
static void where(const cx_rank *c, size_t k, pl_err *e) {
    char t[EXEC_ACTION_TEXT_MAX];
    sched_action_format(&c->x.s->rank[c->x.r].acts[k], t, sizeof t);
    pl_err_prefix(e, "rank %d (GPU %d), action %zu (%s), pass %d: ", c->x.r, c->dev, k + 1, t, c->x.pass);
    pl_err_set_rank(e, c->x.r);
}

/* ---------------------------------------------------------------- setup */

/* Counts an upper bound of the GEMMs rank r issues in one pass (for the GEMM timing events). */
static int gemm_bound(const cx_rank *c) {
    const exec_xrank *x = &c->x;
    const sched_rank *rk = &x->s->rank[x->r];
    long n = 1;
    for (size_t k = 0; k < rk->n; k++) {
        const sched_action *a = &rk->acts[k];
        if (!sched_kind_is_compute((sched_kind)a->kind)) continue;
        int nb = 0;
        if (a->stage >= 0 && a->stage < x->s->stages && x->loc[a->stage] >= 0) nb += x->st[x->loc[a->stage]].nb;
        if (a->kind == SCHED_OVERLAP && a->stage2 >= 0 && a->stage2 < x->s->stages && x->loc[a->stage2] >= 0)
            nb += x->st[x->loc[a->stage2]].nb;
        n += cx_blk_gemms(&x->d) * nb;
    }
    return n > CX_MAX_TIMED_GEMMS ? CX_MAX_TIMED_GEMMS : (int)n;
}

/* Bytes every part of a rank's device allocation is rounded up to (cudaMalloc's alignment). */
#define CX_ALLOC_ALIGN ((size_t)256)
/* Bytes of a bf16 element. */
#define CX_BF16_BYTES ((size_t)2)
/* The bf16 operand scratch buffers of a GEMM (A and B, cx_gemm_ctx.bfa and bfb). */
#define CX_BF16_OPERANDS 2
#define CX_GIB (1024.0 * 1024.0 * 1024.0)

/* Returns n rounded up to CX_ALLOC_ALIGN bytes. */
static size_t al256(size_t n) { return (n + CX_ALLOC_ALIGN - 1) & ~(CX_ALLOC_ALIGN - 1); }

/* The parts of a rank's one device allocation, in bytes (each rounded up by al256). */
typedef struct cx_parts {
    size_t arena, verbf, op, x, t, loss, mbox;
    size_t opn; /* floats of one bf16 operand scratch buffer */
} cx_parts;

/* Creates the rank's streams (in its green context when it has one) on its device. Returns
 * PL_OK or an error. */
static int cx_streams(cx_rank *c, pl_err *e) {
    CXC(cudaSetDevice(c->dev));
    if (c->green_n > 1) {
        if (cx_green_create(c->dev, c->green_n, c->green_i, &c->green, e)) return e->code;
        if (cx_green_make_current(&c->green, e)) return e->code;
        if (cx_green_stream(&c->green, &c->cs, e) || cx_green_stream(&c->green, &c->ms, e)) return e->code;
    } else {
        CXC(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
        CXC(cudaStreamCreateWithFlags(&c->ms, cudaStreamNonBlocking));
    }
    return PL_OK;
}

/* Returns the sizes of the parts of rank c's allocation: arena image, bf16 version copies, bf16
 * operand scratch, data, losses, receive slots. */
static cx_parts cx_parts_of(const cx_rank *c, const exec_data *data) {
    const exec_xrank *x = &c->x;
    const exec_config *cfg = x->cfg;
    size_t bh = (size_t)x->d.b * x->d.h, bf = (size_t)x->d.b * x->d.f;
    int P = cfg->warmup_passes + cfg->timed_passes, bf16 = cfg->precision == EXEC_PREC_BF16;
    int first = x->loc[0] >= 0, lastst = x->loc[x->s->stages - 1] >= 0;
    size_t D = (size_t)data->d, nrecv = (size_t)c->sh->nrecv[x->r];
    cx_parts z = {0};
    z.arena = al256(x->arena_bytes);
    if (bf16)
        for (int q = 0; q < x->nst; q++) z.verbf += al256((size_t)x->st[q].ver.cap * x->st[q].ver.stride * CX_BF16_BYTES);
    z.opn = bf > bh ? bf : bh;
    z.op = bf16 ? CX_BF16_OPERANDS * al256(z.opn * CX_BF16_BYTES) : 0;
    z.x = first ? al256(D * bh * sizeof(float)) : 0;
    z.t = lastst ? al256(D * bh * sizeof(float)) : 0;
    z.loss = al256((size_t)P * x->M * sizeof(double));
    z.mbox = al256(nrecv * cx_al64(bh) * sizeof(float));
    return z;
}

/* Makes the rank's one device allocation (the parts z, then the cuBLAS workspace) and points
 * its buffers into it; *ws = the workspace. Returns PL_OK or an error. */
static int cx_alloc(cx_rank *c, const cx_parts *z, void **ws, pl_err *e) {
    exec_xrank *x = &c->x;
    c->dmem_bytes = z->arena + z->verbf + z->op + z->x + z->t + z->loss + z->mbox + CX_BLAS_WS_BYTES;
    void *mem = NULL;
    cudaError_t ast = cudaMalloc(&mem, c->dmem_bytes);
    if (ast != cudaSuccess) {
        (void)cudaGetLastError();
        /* cx_rank_body names the rank and GPU */
        return pl_errf(e, PL_ENOMEM, "cannot allocate its %zu bytes (%.2f GiB: weights, gradients, stashes, buffers, data) "
                       "on the GPU: %s; use a smaller --width, --ffn, --depth or --microbatch-size, or more GPUs",
                       c->dmem_bytes, (double)c->dmem_bytes / CX_GIB, cudaGetErrorString(ast));
    }
    c->dmem = mem;
    char *p = c->dmem;
    c->d_arena = (float *)(void *)p;
    p += z->arena;
    if (x->cfg->precision == EXEC_PREC_BF16) {
        c->d_verbf = pl_calloc((size_t)x->nst, sizeof *c->d_verbf);
        if (!c->d_verbf) return pl_errf(e, PL_ENOMEM, "out of memory");
        for (int q = 0; q < x->nst; q++) {
            c->d_verbf[q] = (uint16_t *)(void *)p;
            p += al256((size_t)x->st[q].ver.cap * x->st[q].ver.stride * CX_BF16_BYTES);
        }
        c->g.bfa = (uint16_t *)(void *)p;
        c->g.bfb = (uint16_t *)(void *)(p + al256(z->opn * CX_BF16_BYTES));
        c->g.bf_cap = z->opn;
        p += z->op;
    }
    c->d_x = z->x ? (float *)(void *)p : NULL;
    p += z->x;
    c->d_t = z->t ? (float *)(void *)p : NULL;
    p += z->t;
    c->d_loss = (double *)(void *)p;
    p += z->loss;
    c->d_mbox = (float *)(void *)p;
    p += z->mbox;
    *ws = p;
    return PL_OK;
}

/* Uploads the arena as exec_xrank_init laid it out (initial weights, zeroed gradients), the
 * data the rank's stages read, zeroed losses and the bf16 version copies; waits for them.
 * Returns PL_OK or an error. */
static int cx_upload(cx_rank *c, const exec_data *data, const cx_parts *z, pl_err *e) {
    exec_xrank *x = &c->x;
    size_t xbytes = (size_t)data->d * (size_t)x->d.b * x->d.h * sizeof(float);
    CXC(cudaMemcpyAsync(c->d_arena, x->arena, x->arena_bytes, cudaMemcpyHostToDevice, c->cs));
    if (c->d_x) CXC(cudaMemcpyAsync(c->d_x, data->x, xbytes, cudaMemcpyHostToDevice, c->cs));
    if (c->d_t) CXC(cudaMemcpyAsync(c->d_t, data->t, xbytes, cudaMemcpyHostToDevice, c->cs));
    CXC(cudaMemsetAsync(c->d_loss, 0, z->loss, c->cs));
    if (c->d_verbf)
        for (int q = 0; q < x->nst; q++)
            CXC(cxk_to_bf16(c->cs, c->d_verbf[q], dslot(c, &x->st[q].ver, 0), (size_t)x->st[q].ver.cap * x->st[q].ver.stride));
    CXC(cudaStreamSynchronize(c->cs));
    return PL_OK;
}

/* Creates the rank's events: start and end of each action, SEND arrivals, send slots' copies,
 * GEMM timing, pass start and end. Returns PL_OK or an error. */
static int cx_events(cx_rank *c, pl_err *e) {
    exec_xrank *x = &c->x;
    const sched_rank *rk = &x->s->rank[x->r];
    size_t n = rk->n;
    c->ev_act = pl_calloc(2 * (n ? n : 1), sizeof *c->ev_act);
    c->ev_send = pl_calloc(n ? n : 1, sizeof *c->ev_send);
    c->ev_out = pl_calloc((size_t)x->out.cap, sizeof *c->ev_out);
    c->out_busy = pl_calloc((size_t)x->out.cap, sizeof *c->out_busy);
    c->cap_gemm = gemm_bound(c);
    c->ev_gemm = pl_calloc(2 * (size_t)c->cap_gemm, sizeof *c->ev_gemm);
    if (!c->ev_act || !c->ev_send || !c->ev_out || !c->out_busy || !c->ev_gemm) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (size_t k = 0; k < 2 * n; k++) CXC(cudaEventCreate(&c->ev_act[k]));
    for (size_t k = 0; k < n; k++)
        if (rk->acts[k].kind == SCHED_SEND_F || rk->acts[k].kind == SCHED_SEND_B)
            CXC(cudaEventCreateWithFlags(&c->ev_send[k], cudaEventDisableTiming));
    for (int o = 0; o < x->out.cap; o++) CXC(cudaEventCreateWithFlags(&c->ev_out[o], cudaEventDisableTiming));
    for (int k = 0; k < 2 * c->cap_gemm; k++) CXC(cudaEventCreate(&c->ev_gemm[k]));
    CXC(cudaEventCreate(&c->ev_p0));
    CXC(cudaEventCreate(&c->ev_end));
    CXC(cudaEventCreateWithFlags(&c->ev_tmp, cudaEventDisableTiming));
    CXC(cudaEventCreateWithFlags(&c->ev_join, cudaEventDisableTiming));
    c->g.ev = c->ev_gemm;
    c->g.cap_ev = c->cap_gemm;
    return PL_OK;
}

/* Publishes this rank's receive slots, and the events of its sends in its receivers' slots. */
static void cx_publish(cx_rank *c) {
    exec_xrank *x = &c->x;
    const sched_rank *rk = &x->s->rank[x->r];
    size_t bh = (size_t)x->d.b * x->d.h;
    for (size_t k = 0; k < rk->n; k++) {
        const sched_action *a = &rk->acts[k];
        if (a->kind == SCHED_RECV_F || a->kind == SCHED_RECV_B) {
            cx_box *b = &c->sh->box[x->r][c->recv_slot[k]];
            b->dptr = c->d_mbox + (size_t)c->recv_slot[k] * cx_al64(bh);
            b->dev = c->dev;
        } else if (a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B) {
            c->sh->box[c->send_rank[k]][c->send_slot[k]].arrived = c->ev_send[k];
        }
    }
}

/* Creates the rank's streams (in its green context when it has one), cuBLAS handle and events,
 * makes its one device allocation, uploads the initial weights and the data it needs, and
 * publishes its receive slots. Runs on the rank's thread. Returns PL_OK or an error. */
static int cx_setup(cx_rank *c, const exec_data *data, pl_err *e) {
    if (cx_streams(c, e) != PL_OK) return e->code;
    cx_parts z = cx_parts_of(c, data);
    void *ws = NULL;
    if (cx_alloc(c, &z, &ws, e) != PL_OK || cx_upload(c, data, &z, e) != PL_OK) return e->code;
    /* cuBLAS on the compute stream, with its workspace from the allocation */
    if (cx_blas_create(&c->blas, c->cs, e) || cx_blas_workspace(c->blas, ws, CX_BLAS_WS_BYTES, e)) return e->code;
    c->g.h = c->blas;
    c->g.st = c->cs;
    c->g.prec = c->x.cfg->precision;
    if (cx_events(c, e) != PL_OK) return e->code;
#ifdef PIPELAB_CUDA_NCCL
    if (c->nccl) return cx_nccl_setup(c, e); /* no shared slots: NCCL moves the data */
#endif
    cx_publish(c);
    return PL_OK;
}

void cx_teardown(cx_rank *c) {
    size_t n = c->x.s ? c->x.s->rank[c->x.r].n : 0;
    if (c->ev_act)
        for (size_t k = 0; k < 2 * n; k++) if (c->ev_act[k]) cudaEventDestroy(c->ev_act[k]);
    if (c->ev_send)
        for (size_t k = 0; k < n; k++) if (c->ev_send[k]) cudaEventDestroy(c->ev_send[k]);
    if (c->ev_out)
        for (int o = 0; o < c->x.out.cap; o++) if (c->ev_out[o]) cudaEventDestroy(c->ev_out[o]);
    if (c->ev_gemm)
        for (int k = 0; k < 2 * c->cap_gemm; k++) if (c->ev_gemm[k]) cudaEventDestroy(c->ev_gemm[k]);
    cudaEvent_t ev[] = {c->ev_p0, c->ev_end, c->ev_tmp, c->ev_join};
    for (size_t k = 0; k < sizeof ev / sizeof *ev; k++) if (ev[k]) cudaEventDestroy(ev[k]);
#ifdef PIPELAB_CUDA_NCCL
    if (c->nccl) cx_nccl_teardown(c);
#endif
    cx_blas_destroy(c->blas);
    if (c->cs) cudaStreamDestroy(c->cs);
    if (c->ms) cudaStreamDestroy(c->ms);
    if (c->dmem) cudaFree(c->dmem);
    cx_green_destroy(&c->green);
    free(c->ev_act);
    free(c->ev_send);
    free(c->ev_out);
    free(c->out_busy);
    free(c->ev_gemm);
    free(c->d_verbf);
    c->ev_act = c->ev_send = c->ev_out = c->ev_gemm = NULL;
    c->out_busy = NULL;
    c->d_verbf = NULL;
    c->blas = NULL;
    c->cs = c->ms = NULL;
    c->dmem = NULL;
}

/* Returns milliseconds from a to b (both completed), or 0 on error (e filled, rc set). */
static double ms_between(cudaEvent_t a, cudaEvent_t b, int *rc, pl_err *e) {
    float t = 0;
    if (*rc == PL_OK) *rc = cx_cuda_check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime", __FILE__, __LINE__, e);
    return t;
}

/* ---------------------------------------------------------------- the pass loop */

/* Drains the rank's streams at the end of pass and reads its event times into the measurement
 * arrays (th0: host time of the pass's start event). Returns PL_OK or an error. */
static int pass_times(cx_rank *c, double th0, pl_err *e) {
    exec_xrank *x = &c->x;
    const exec_config *cfg = x->cfg;
    const sched_rank *rk = &x->s->rank[x->r];
    CXC(cudaEventRecord(c->ev_join, c->ms));
    CXC(cudaStreamWaitEvent(c->cs, c->ev_join, 0));
#ifdef PIPELAB_CUDA_NCCL
    if (c->nccl && cx_nccl_join(c, e)) return e->code;
#endif
    CXC(cudaEventRecord(c->ev_end, c->cs));
    cudaError_t st = cudaEventSynchronize(c->ev_end);
    if (st != cudaSuccess) {
        pl_errf(e, PL_EINTERNAL, "rank %d (GPU %d), pass %d: the GPU reported an error in the pass's work: %s: %s "
                                 "(PIPELAB_CUDA_SYNC=1 names the action)", x->r, c->dev, x->pass,
                cudaGetErrorName(st), cudaGetErrorString(st));
        pl_err_set_rank(e, x->r);
        return PL_EINTERNAL;
    }
    int rc = PL_OK, timed = x->pass >= cfg->warmup_passes;
    double busy = 0, comm = 0, gs = 0, first = -1, last = -1;
    for (size_t k = 0; k < rk->n && rc == PL_OK; k++) {
        const sched_action *a = &rk->acts[k];
        double t0 = ms_between(c->ev_p0, c->ev_act[2 * k], &rc, e) * CX_S_PER_MS;
        double t1 = ms_between(c->ev_p0, c->ev_act[2 * k + 1], &rc, e) * CX_S_PER_MS;
        /* busy: compute and STEP, as the simulator counts a rank's bubble */
        if (sched_kind_is_busy((sched_kind)a->kind)) {
            busy += t1 - t0;
            if (first < 0) first = t0;
            last = t1;
        } else if (sched_kind_is_comm((sched_kind)a->kind)) {
            comm += t1 - t0;
        }
        if (timed && cfg->record_ops && x->n_ops < x->cap_ops) {
            exec_op *op = &x->ops[x->n_ops++];
            op->act = *a;
            op->pass = x->pass - cfg->warmup_passes;
            op->start_s = th0 + t0;
            op->end_s = th0 + t1;
        }
    }
    for (int i = 0; i < c->g.n_ev && rc == PL_OK; i++) gs += ms_between(c->ev_gemm[2 * i], c->ev_gemm[2 * i + 1], &rc, e) * CX_S_PER_MS;
    double tend = ms_between(c->ev_p0, c->ev_end, &rc, e) * CX_S_PER_MS;
    if (rc) return rc;
    x->pass_start_s[x->pass] = th0;
    x->pass_end_s[x->pass] = th0 + tend;
    x->busy_s[x->pass] = busy;
    x->comm_s[x->pass] = comm;
    x->gemm_s[x->pass] = gs;
    x->gemm_flops[x->pass] = c->g.flops;
    x->span_s[x->pass] = first >= 0 ? last - first : 0;
    return PL_OK;
}

/* One pass: barrier, start event, every action with its events, drain, times. */
static int run_pass(cx_rank *c, pl_err *e) {
    exec_xrank *x = &c->x;
    const exec_config *cfg = x->cfg;
    const sched_rank *rk = &x->s->rank[x->r];
    x->goff = (int64_t)x->pass * x->M;
#ifdef PIPELAB_CUDA_NCCL
    int rc = c->nccl ? cx_nccl_barrier(c, e) : cx_barrier(c->sh, x->r, e);
#else
    int rc = cx_barrier(c->sh, x->r, e);
#endif
    if (rc) return rc;
    c->g.n_ev = 0;
    c->g.flops = 0;
    for (int o = 0; o < x->out.cap; o++) c->out_busy[o] = 0; /* the last pass drained every copy */
    CXC(cudaEventRecord(c->ev_p0, c->cs));
    CXC(cudaEventSynchronize(c->ev_p0)); /* the stream is idle: the event's time is now */
    double th0 = pl_now_s();
    for (size_t k = 0; k < rk->n; k++) {
        const sched_action *a = &rk->acts[k];
        int send = a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B;
        if (cfg->fault.kind == EXEC_FAULT_ERROR && cfg->fault.rank == x->r && cfg->fault.pass == x->pass &&
            (size_t)cfg->fault.action == k)
            rc = pl_errf(e, PL_EINPUT, "injected fault");
        if (rc == PL_OK && !send) rc = cx_cuda_check(cudaEventRecord(c->ev_act[2 * k], c->cs), "cudaEventRecord", __FILE__, __LINE__, e);
        if (rc == PL_OK) rc = do_action(c, k, a, e);
        if (rc == PL_OK && !send) rc = cx_cuda_check(cudaEventRecord(c->ev_act[2 * k + 1], c->cs), "cudaEventRecord", __FILE__, __LINE__, e);
        if (rc == PL_OK && c->sync_each) {
            rc = cx_cuda_check(cudaStreamSynchronize(c->cs), "the action's kernels (compute stream)", __FILE__, __LINE__, e);
            if (rc == PL_OK) rc = cx_cuda_check(cudaStreamSynchronize(c->ms), "the action's copies (communication stream)", __FILE__, __LINE__, e);
        }
        if (rc != PL_OK) {
            if (!exec_err_aborted(e)) where(c, k, e);
            return rc;
        }
    }
    rc = pass_times(c, th0, e);
    if (rc == PL_OK) rc = exec_xrank_pass_end_check(&c->x, e);
    return rc;
}

int cx_rank_body(cx_rank *c, const exec_data *data) {
    exec_xrank *x = &c->x;
    const exec_config *cfg = x->cfg;
    int P = cfg->warmup_passes + cfg->timed_passes;
    pl_err *e = &c->err;
    pl_err_clear(e);
    c->rc = cx_setup(c, data, e);
    if (c->rc) {
        pl_err_prefix(e, "rank %d (GPU %d), setup: ", x->r, c->dev);
        pl_err_set_rank(e, x->r);
    }
#ifdef PIPELAB_CUDA_NCCL
    if (c->rc == PL_OK) c->rc = c->nccl ? cx_nccl_barrier(c, e) : cx_barrier(c->sh, x->r, e);
#else
    if (c->rc == PL_OK) c->rc = cx_barrier(c->sh, x->r, e);
#endif
    for (x->pass = 0; x->pass < P && c->rc == PL_OK; x->pass++) c->rc = run_pass(c, e);
    if (c->rc == PL_OK) {
        /* results: every stage's newest weights into the host arena's version slot, the losses */
        for (int q = 0; q < x->nst && c->rc == PL_OK; q++) {
            exec_xstage *st = &x->st[q];
            c->rc = cx_cuda_check(cudaMemcpy(st->ver.base + (size_t)st->cur * st->ver.stride, dslot(c, &st->ver, st->cur),
                                             st->pfloats * sizeof(float), cudaMemcpyDeviceToHost),
                                  "cudaMemcpy (weights to the host)", __FILE__, __LINE__, e);
        }
        if (c->rc == PL_OK && x->loc[x->s->stages - 1] >= 0)
            c->rc = cx_cuda_check(cudaMemcpy(x->loss_mb, c->d_loss, (size_t)P * x->M * sizeof(double), cudaMemcpyDeviceToHost),
                                  "cudaMemcpy (losses to the host)", __FILE__, __LINE__, e);
        if (c->rc) {
            pl_err_prefix(e, "rank %d (GPU %d), results: ", x->r, c->dev);
            pl_err_set_rank(e, x->r);
        }
    }
    return c->rc;
}

/* What a rank thread needs. */
typedef struct cx_arg {
    cx_rank *c;
    const exec_data *data;
} cx_arg;

/* The rank thread of the in-process driver: the rank's body, then (after every rank has drained
 * its GPU work) its teardown. */
static void *cx_main(void *arg) {
    cx_arg *ca = arg;
    cx_rank *c = ca->c;
    cx_rank_body(c, ca->data);
    if (c->rc && !exec_err_aborted(&c->err)) cx_abort(c->sh, &c->err);
    if (c->cs) (void)cudaStreamSynchronize(c->cs);
    if (c->ms) (void)cudaStreamSynchronize(c->ms);
    (void)cudaGetLastError();
    cx_exit_wait(c->sh, 1);
    cx_teardown(c);
    return NULL;
}

/* ---------------------------------------------------------------- the run */

int cx_check_config(const exec_config *c, pl_err *e) {
    int rc = exec_check_config(c, e);
    if (rc) return rc;
    if (!exec_precision_name(c->precision)) return pl_errf(e, PL_EINPUT, "unknown precision %d", (int)c->precision);
    if (c->cuda_devices < 0) return pl_errf(e, PL_EINPUT, "the number of GPUs must be >= 0");
    if (c->profile_between_reps > 0)
        return pl_errf(e, PL_EINPUT, "profiling between the passes is the CPU executor's (profile the GPU before the run)");
    if (c->replicas) /* the CUDA worker's REDUCE_GRAD reduces nothing: refuse rather than train unsynchronized */
        return pl_errf(e, PL_EINPUT, "replicated stages (exec_config.replicas) run on the CPU executor only");
    exec_dims d;
    exec_dims_of(c, &d);
    return cx_check_block(&d, (int)c->precision, e);
}

/* Pairs every SEND with its RECV: the receiving rank and the receive slot (the RECV's index
 * among the receiver's RECVs); every RECV gets its slot. Returns PL_OK or PL_EINPUT. */
static int plan_comm(const sched *s, cx_rank *cr, cx_shared *sh, pl_err *e) {
    for (int r = 0; r < s->ranks; r++) {
        const sched_rank *rk = &s->rank[r];
        int n = 0;
        for (size_t k = 0; k < rk->n; k++) {
            cr[r].recv_slot[k] = -1;
            if (rk->acts[k].kind == SCHED_RECV_F || rk->acts[k].kind == SCHED_RECV_B) cr[r].recv_slot[k] = n++;
        }
        sh->nrecv[r] = n;
        sh->box[r] = pl_calloc(n ? (size_t)n : 1, sizeof(cx_box));
        if (!sh->box[r]) return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    for (int r = 0; r < s->ranks; r++) {
        const sched_rank *rk = &s->rank[r];
        for (size_t k = 0; k < rk->n; k++) {
            const sched_action *a = &rk->acts[k];
            cr[r].send_rank[k] = cr[r].send_slot[k] = -1;
            if (a->kind != SCHED_SEND_F && a->kind != SCHED_SEND_B) continue;
            int fwd = a->kind == SCHED_SEND_F, to = fwd ? a->stage + 1 : a->stage - 1;
            if (to < 0 || to >= s->stages) {
                pl_errf(e, PL_EINPUT, "rank %d, action %zu: no stage %d to send to", r, k + 1, to);
                pl_err_set_rank(e, r);
                return PL_EINPUT;
            }
            int dst = s->stage_rank[to];
            const sched_rank *rd = &s->rank[dst];
            for (size_t q = 0; q < rd->n; q++) {
                const sched_action *b = &rd->acts[q];
                if (b->kind == (fwd ? SCHED_RECV_F : SCHED_RECV_B) && b->stage == to && b->mb == a->mb) {
                    cr[r].send_rank[k] = dst;
                    cr[r].send_slot[k] = cr[dst].recv_slot[q];
                    break;
                }
            }
            if (cr[r].send_rank[k] < 0) {
                pl_errf(e, PL_EINPUT, "rank %d, action %zu: rank %d never receives this message", r, k + 1, dst);
                pl_err_set_rank(e, r);
                return PL_EINPUT;
            }
        }
    }
    return PL_OK;
}

int cx_record_of(cx_rank *c, const double *loss_mb, exec_rank_record *rec, pl_err *e) {
    return exec_xrank_record(&c->x, loss_mb, c->dmem_bytes, rec, e); /* core -1: none pinned */
}

int cx_setup_rank(cx_rank *c, int r, const sched *s, const exec_config *cfg, const int *blocks,
                  const exec_data *data, double *loss_mb, pl_err *e) {
    int rc = exec_xrank_setup(&c->x, r, s, cfg, blocks, data, loss_mb, e);
    if (rc) return rc;
    size_t n = s->rank[r].n ? s->rank[r].n : 1;
    c->send_rank = pl_calloc(CX_ACTION_TABLES * n, sizeof(int));
    if (!c->send_rank) return pl_errf(e, PL_ENOMEM, "out of memory");
    c->send_slot = c->send_rank + n;
    c->recv_slot = c->send_rank + 2 * n;
    const char *sync = getenv(EXEC_CUDA_SYNC_ENV);
    c->sync_each = sync && sync[0] == '1';
    return PL_OK;
}

void cx_free_rank(cx_rank *c) {
    exec_xrank_free(&c->x);
    free(c->send_rank);
    c->send_rank = NULL;
}
/* Lets every pair of GPUs in use reach each other's memory directly where the hardware can
 * (cudaMemcpyPeerAsync works either way; without peer access it is staged through the host). */
static int enable_peers(int G, pl_err *e) {
    for (int a = 0; a < G; a++) {
        CXC(cudaSetDevice(a));
        for (int b = 0; b < G; b++) {
            int can = 0;
            if (a == b) continue;
            CXC(cudaDeviceCanAccessPeer(&can, a, b));
            if (!can) continue;
            cudaError_t st = cudaDeviceEnablePeerAccess(b, 0);
            if (st == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
            else CXC(st);
        }
    }
    return PL_OK;
}

void cx_result_device(exec_result *out, const exec_config *cfg, const char *desc) {
    out->backend = "cuda";
    out->precision = exec_precision_name(cfg->precision);
    out->blas = "cublas";
    size_t dl = strlen(desc) < sizeof out->device ? strlen(desc) : sizeof out->device - 1;
    memcpy(out->device, desc, dl);
    out->device[dl] = '\0';
}

/* What exec_cuda_run holds while it runs: the GPUs, the split, the shared data and losses, the
 * ranks, their records and threads, and what the rank threads share. */
typedef struct cx_run {
    int p, G;              /* ranks, GPUs used */
    int *blocks;           /* [stages] */
    exec_data data;
    double *loss_mb;       /* [passes * iterations * m] */
    cx_rank *cr;           /* [p] */
    cx_arg *args;          /* [p] */
    exec_rank_record *recs;/* [p] */
    pthread_t *th;         /* [p] */
    cx_shared sh;
} cx_run;

/* The checks before anything is allocated: a lowered, valid schedule, the configuration, the
 * GPUs (run->G), green contexts when asked, the split and the host memory. PL_OK or the error. */
static int cx_run_check(const sched *s, const exec_config *cfg, cx_run *run, pl_err *e) {
    if (!s->lowered) return pl_errf(e, PL_EINPUT, "the executor runs lowered schedules (lower it first)");
    int rc = cx_check_config(cfg, e);
    if (rc) return rc;
    if (sched_validate(s, e) != PL_OK) return e->code;
    int ndev = exec_cuda_devices(e);
    if (ndev < 1) return e->code;
    if (cfg->cuda_devices > ndev)
        return pl_errf(e, PL_EINPUT, "%d GPUs asked for, %d visible", cfg->cuda_devices, ndev);
    run->G = cfg->cuda_devices > 0 ? cfg->cuda_devices : ndev;
    if (run->G > run->p) run->G = run->p;
    if (cfg->sm_split && run->p > run->G && cx_green_init(e) != PL_OK) return e->code;
    run->blocks = pl_calloc((size_t)s->stages, sizeof *run->blocks);
    if (!run->blocks) return pl_errf(e, PL_ENOMEM, "out of memory");
    rc = exec_stage_blocks(s, cfg, run->blocks, e);
    if (rc == PL_OK) rc = exec_check_memory(s, cfg, run->blocks, -1, e);
    return rc;
}

/* Allocates the run's arrays and shared state, builds the data set, sets up every rank on its
 * GPU (and SM share) and plans the transfers. Returns PL_OK or the error. */
static int cx_run_setup(const sched *s, const exec_config *cfg, cx_run *run, pl_err *e) {
    int p = run->p, G = run->G, P = cfg->warmup_passes + cfg->timed_passes, M = s->microbatches * sched_iterations(s);
    run->loss_mb = pl_calloc((size_t)P * (size_t)M, sizeof(double));
    run->cr = aligned_alloc(_Alignof(cx_rank), (size_t)p * sizeof *run->cr);
    if (run->cr) memset(run->cr, 0, (size_t)p * sizeof *run->cr);
    run->args = pl_calloc((size_t)p, sizeof *run->args);
    run->recs = pl_calloc((size_t)p, sizeof *run->recs);
    run->th = pl_calloc((size_t)p, sizeof *run->th);
    cx_shared *sh = &run->sh;
    sh->p = p;
    sh->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : EXEC_DEFAULT_TIMEOUT_S;
    sh->box = pl_calloc((size_t)p, sizeof *sh->box);
    sh->nrecv = pl_calloc((size_t)p, sizeof *sh->nrecv);
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->cv, NULL);
    if (!run->loss_mb || !run->cr || !run->args || !run->recs || !run->th || !sh->box || !sh->nrecv)
        return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = exec_data_build(cfg, &run->data, e);
    for (int r = 0; r < p && rc == PL_OK; r++) {
        cx_rank *c = &run->cr[r];
        rc = cx_setup_rank(c, r, s, cfg, run->blocks, &run->data, run->loss_mb, e);
        c->sh = sh;
        c->dev = r % G;
        int share = p / G + (r % G < p % G ? 1 : 0); /* ranks on this GPU */
        c->green_n = cfg->sm_split && share > 1 ? share : 0;
        c->green_i = r / G;
    }
    if (rc == PL_OK) rc = plan_comm(s, run->cr, sh, e);
    if (rc == PL_OK) rc = enable_peers(G, e);
    return rc;
}

/* Starts one thread per rank and joins them; returns PL_OK when every rank finished, else the
 * first failure's code and message (the abort reason, or a rank's own error). */
static int cx_run_threads(cx_run *run, pl_err *e) {
    int p = run->p, started = 0;
    for (int r = 0; r < p; r++) {
        run->args[r].c = &run->cr[r];
        run->args[r].data = &run->data;
        if (pthread_create(&run->th[r], NULL, cx_main, &run->args[r]) != 0) {
            pl_err why;
            pl_errf(&why, PL_EINTERNAL, "cannot start the thread of rank %d", r);
            cx_abort(&run->sh, &why);
            cx_exit_wait_none(&run->sh, p - r); /* the ranks never started count as done */
            break;
        }
        started++;
    }
    for (int r = 0; r < started; r++) pthread_join(run->th[r], NULL);
    if (atomic_load(&run->sh.aborted)) {
        int rc = run->sh.why.code ? run->sh.why.code : PL_EINTERNAL;
        pl_errf(e, rc, "%s", run->sh.why.msg);
        pl_err_set_rank(e, pl_err_rank(&run->sh.why));
        return rc;
    }
    for (int r = 0; r < p; r++)
        if (run->cr[r].rc) {
            *e = run->cr[r].err;
            return run->cr[r].rc;
        }
    return PL_OK;
}

/* Assembles the ranks' records into out and describes the GPUs that ran it. PL_OK or the error. */
static int cx_run_results(const sched *s, const exec_config *cfg, cx_run *run, exec_result *out, pl_err *e) {
    int p = run->p, G = run->G, rc = PL_OK;
    for (int r = 0; r < p && rc == PL_OK; r++) rc = cx_record_of(&run->cr[r], run->loss_mb, &run->recs[r], e);
    if (rc == PL_OK) rc = exec_assemble(s, cfg, run->recs, out, e);
    if (rc != PL_OK) return rc;
    char name[CX_NAME_MAX] = "";
    int sms = 0;
    pl_err ig;
    cx_device_props(0, name, sizeof name, &sms, &ig);
    int per = (p + G - 1) / G;
    char dv[CX_DEVICE_TEXT_MAX];
    snprintf(dv, sizeof dv, "%.64s x%d, %d SMs each, %d rank%s per GPU%s", name, G, sms, per, per == 1 ? "" : "s",
             cfg->sm_split && per > 1 ? ", SMs split (green contexts)" : "");
    cx_result_device(out, cfg, dv);
    out->cores = 0;
    if (per > 1 && !cfg->sm_split)
        snprintf(out->warning, sizeof out->warning,
                 "%d ranks share each GPU without --sm-split: their kernels compete for the same SMs", per);
    return PL_OK;
}

/* Frees what the run held (its mutex and condition variable once set up). */
static void cx_run_free(cx_run *run, int shared) {
    int p = run->p;
    if (run->cr)
        for (int r = 0; r < p; r++) cx_free_rank(&run->cr[r]);
    if (run->recs)
        for (int r = 0; r < p; r++) exec_rank_record_free(&run->recs[r]);
    if (run->sh.box)
        for (int r = 0; r < p; r++) free(run->sh.box[r]);
    free(run->sh.box);
    free(run->sh.nrecv);
    if (shared) {
        pthread_mutex_destroy(&run->sh.mu);
        pthread_cond_destroy(&run->sh.cv);
    }
    exec_data_free(&run->data);
    free(run->cr);
    free(run->args);
    free(run->recs);
    free(run->th);
    free(run->loss_mb);
    free(run->blocks);
}

int exec_cuda_run(const sched *s, const exec_config *cfg, exec_result *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    cx_run run;
    memset(&run, 0, sizeof run);
    run.p = s->ranks;
    int rc = cx_run_check(s, cfg, &run, e);
    if (rc) {
        cx_run_free(&run, 0);
        return rc;
    }
    exec_blas_init();
    rc = cx_run_setup(s, cfg, &run, e);
    if (rc == PL_OK) rc = cx_run_threads(&run, e);
    if (rc == PL_OK) rc = cx_run_results(s, cfg, &run, out, e);
    cx_run_free(&run, 1);
    if (rc != PL_OK) exec_result_free(out);
    return rc;
}
