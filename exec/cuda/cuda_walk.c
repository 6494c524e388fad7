/* cuda_walk.c: the rank walker of the CUDA executor (cuda_exec_int.h): the barrier and abort the
 * rank threads share, each action's compute enqueued on the rank's CUDA stream (worker.c's
 * compute, on the GPU, through xrank.c's bookkeeping), SENDs copied into the receiver's slot on
 * the communication stream, RECVs waiting for the copy's event, and the pass loop that times
 * every action and GEMM with CUDA events. Passes end with the rank's streams drained and a
 * barrier, so receive slots are reused safely from pass to pass. */
#undef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "exec_cuda.h"
#include "cuda_exec_int.h"
#include "cuda_int.h"
#include "exec_int.h"
#include "platform.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A rank waiting for a message polls its slot CX_WAIT_SPINS times at least and for up to the
 * run's spin time (cx_spin_s; the clock read once every CX_WAIT_CLOCK_MASK + 1 polls), then naps
 * CX_WAIT_NAP_NS between polls. */
#define CX_WAIT_SPINS 2000
#define CX_WAIT_CLOCK_MASK 255ul
#define CX_WAIT_NAP_NS 20000L

/* ---------------------------------------------------------------- barrier and abort */

/* Stops the run: every waiting or later wait fails with why's message. */
void cx_abort(cx_shared *sh, const pl_err *why) {
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
void cx_exit_wait(cx_shared *sh, int n) {
    pthread_mutex_lock(&sh->mu);
    sh->exit_count += n;
    pthread_cond_broadcast(&sh->cv);
    while (sh->exit_count < sh->p) pthread_cond_wait(&sh->cv, &sh->mu);
    pthread_mutex_unlock(&sh->mu);
}

/* Counts n ranks that never started as done with their GPU work (wakes the others). */
void cx_exit_wait_none(cx_shared *sh, int n) {
    pthread_mutex_lock(&sh->mu);
    sh->exit_count += n;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* ---------------------------------------------------------------- addressing (bookkeeping: xrank.c) */


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
    if (f.last)
        CXC(cxk_mse_grad(c->cs, y, c->d_t + (size_t)f.di * bh, bh, c->d_loss_part, c->d_loss + (size_t)x->pass * x->M + j));
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

/* ---------------------------------------------------------------- the hand-off (cuda_exec_int.h) */

int cx_box_copy(const cx_box *b, const float *src, int src_dev, size_t bytes, cudaStream_t ms, pl_err *e) {
    if (b->dev == src_dev) CXC(cudaMemcpyAsync(b->dptr, src, bytes, cudaMemcpyDeviceToDevice, ms));
    else CXC(cudaMemcpyPeerAsync(b->dptr, b->dev, src, src_dev, bytes, ms));
    return PL_OK;
}

void cx_box_publish(cx_box *b, int seq) { atomic_store_explicit(&b->seq, seq, memory_order_release); }

int cx_box_wait(cx_box *b, int seq, _Atomic int *aborted, double spin_s, double timeout_s) {
    double t0 = pl_now_s();
    int nap = 0;
    for (unsigned long i = 1; atomic_load_explicit(&b->seq, memory_order_acquire) != seq; i++) {
        if (atomic_load_explicit(aborted, memory_order_relaxed)) return CX_WAIT_ABORTED;
        if (!nap) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            /* the clock once every CX_WAIT_CLOCK_MASK + 1 polls, after CX_WAIT_SPINS at least */
            if (i > CX_WAIT_SPINS && (i & CX_WAIT_CLOCK_MASK) == 0) nap = pl_now_s() - t0 >= spin_s;
            continue;
        }
        struct timespec ts = {0, CX_WAIT_NAP_NS};
        nanosleep(&ts, NULL);
        if (pl_now_s() - t0 > timeout_s) return CX_WAIT_TIMEOUT;
    }
    return CX_WAIT_OK;
}

int cx_box_take(const cx_box *b, float *dst, size_t bytes, cudaStream_t cs, pl_err *e) {
    CXC(cudaStreamWaitEvent(cs, b->arrived, 0));
    CXC(cudaMemcpyAsync(dst, b->dptr, bytes, cudaMemcpyDeviceToDevice, cs));
    return PL_OK;
}

double cx_spin_s(int threads) {
    int *cpus = pl_calloc(threads > 0 ? (size_t)threads : 1, sizeof *cpus);
    int n = cpus ? exec_platform_cores(cpus, threads) : 0;
    free(cpus);
    return threads > 0 && n >= threads ? EXEC_SPIN_S : 0;
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
    if (cx_box_copy(b, dslot(c, &x->out, o), c->dev, bytes, c->ms, e)) return e->code;
    CXC(cudaEventRecord(c->ev_send[k], c->ms));
    CXC(cudaEventRecord(c->ev_out[o], c->ms));
    CXC(cudaEventRecord(c->ev_act[2 * k + 1], c->ms));
    c->out_busy[o] = 1;
    cx_box_publish(b, x->pass + 1);
    exec_xrank_send_end(x, slotp);
    return PL_OK;
}

/* Waits on the host until the sender of receive slot `slot` has enqueued this pass's copy. */
static int wait_box(cx_rank *c, cx_box *b, const sched_action *a, pl_err *e) {
    int w = cx_box_wait(b, c->x.pass + 1, &c->sh->aborted, c->sh->spin_s, c->sh->timeout_s);
    if (w == CX_WAIT_ABORTED) return aborted_err(c->sh, e);
    if (w == CX_WAIT_TIMEOUT) {
        int from = a->kind == SCHED_RECV_F ? a->stage - 1 : a->stage + 1;
        return pl_errf(e, PL_EINTERNAL, "timed out after %g s: rank %d waits for %s of stage %d microbatch %d from rank %d",
                       c->sh->timeout_s, c->x.r, a->kind == SCHED_RECV_F ? "activations" : "gradients", a->stage, a->mb,
                       c->x.s->stage_rank[from]);
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
    return cx_box_take(b, dst, bytes, c->cs, e);
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

/* Pass `pass`: barrier, then (*stop set, nothing run) the end of a run timed until steady, else
 * the start event, every action with its events, drain, times. */
static int run_pass(cx_rank *c, int pass, int *stop, pl_err *e) {
    exec_xrank *x = &c->x;
    const exec_config *cfg = x->cfg;
    const sched_rank *rk = &x->s->rank[x->r];
#ifdef PIPELAB_CUDA_NCCL
    int rc = c->nccl ? cx_nccl_barrier(c, e) : cx_barrier(c->sh, x->r, e);
#else
    int rc = cx_barrier(c->sh, x->r, e);
#endif
    if (rc == PL_OK) rc = exec_xrank_steady_done(x, pass, stop); /* every rank's last pass times are in */
    if (rc || *stop) return rc;
    exec_xrank_pass_begin(x, pass);
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
    int P = exec_passes_most(cfg), stop = 0; /* all of them, unless steady before (run_pass) */
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
    x->passes = 0;
    for (int pass = 0; pass < P && c->rc == PL_OK && !stop; pass++) c->rc = run_pass(c, pass, &stop, e);
    if (c->rc == PL_OK) {
        /* results: every stage's newest weights into the host arena's version slot, the losses */
        for (int q = 0; q < x->nst && c->rc == PL_OK; q++) {
            exec_xstage *st = &x->st[q];
            c->rc = cx_cuda_check(cudaMemcpy(st->ver.base + (size_t)st->cur * st->ver.stride, dslot(c, &st->ver, st->cur),
                                             st->pfloats * sizeof(float), cudaMemcpyDeviceToHost),
                                  "cudaMemcpy (weights to the host)", __FILE__, __LINE__, e);
        }
        if (c->rc == PL_OK && x->loc[x->s->stages - 1] >= 0)
            c->rc = cx_cuda_check(cudaMemcpy(x->loss_mb, c->d_loss, (size_t)x->passes * x->M * sizeof(double), cudaMemcpyDeviceToHost),
                                  "cudaMemcpy (losses to the host)", __FILE__, __LINE__, e);
        if (c->rc) {
            pl_err_prefix(e, "rank %d (GPU %d), results: ", x->r, c->dev);
            pl_err_set_rank(e, x->r);
        }
    }
    return c->rc;
}
