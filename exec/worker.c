/* worker.c: one rank's CPU worker: the interpreter of its lowered action list (the compute of
 * each action between the bookkeeping of xrank.c) and the thread body. */
#include "exec_int.h"
#include "platform.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Returns the parameters of block k of version `ver` of stage st. */
static const float *params(const exec_xrank *x, const exec_xstage *st, int ver, int k) {
    float *w = exec_pool_slot(&st->ver, ver);
    return w ? w + (size_t)k * exec_block_floats(&x->d) : NULL;
}

/* Runs the stage's blocks forward with version ver, from v's input, writing the last block's
 * output to y (the intermediate activations go into v's activation slot). */
static void stage_forward(exec_xrank *x, const exec_xstage *st, int ver, const exec_xview *v, float *y) {
    for (int k = 0; k < st->nb; k++)
        exec_block_fwd(&x->d, params(x, st, ver, k), exec_xv_x(v, k), exec_xv_state(v, k),
                       k == st->nb - 1 ? y : exec_xv_x(v, k + 1));
}

/* ---------------------------------------------------------------- compute actions */

/* F of (s, j): takes the input (stage 0: from the data set), a weight reference and the
 * activations; writes the output to the next local stage's input, a send buffer, or (last
 * stage) turns it into the loss gradient. Returns PL_OK or an error. */
static int do_f(exec_xrank *x, int s, int j, pl_err *e) {
    exec_xf f;
    if (exec_xrank_f_begin(x, s, j, &f, e) != PL_OK) return e->code;
    size_t bh = (size_t)x->d.b * x->d.h;
    if (f.in_new >= 0) memcpy(exec_pool_slot(&x->in, f.in_new), x->data->x + (size_t)f.di * bh, bh * sizeof(float));
    float *y = exec_pool_slot(f.out, f.out_slot);
    exec_xview v = exec_xview_of(x, f.st, j);
    stage_forward(x, f.st, f.ver, &v, y);
    if (f.last) x->loss_mb[f.g] = exec_mse_grad(&x->d, y, x->data->t + (size_t)f.di * bh);
    exec_xrank_f_end(x, &f, j);
    return PL_OK;
}

/* I of (s, j): the input gradient through the stage (recomputing the forward first under full
 * recomputation), sent on to the previous stage's buffer. Returns PL_OK or an error. */
static int do_i(exec_xrank *x, int s, int j, pl_err *e) {
    exec_xi b;
    if (exec_xrank_i_begin(x, s, j, &b, e) != PL_OK) return e->code;
    exec_xstage *st = b.st;
    exec_xview v = exec_xview_of(x, st, j);
    if (b.recompute) {
        float *ys = x->scratch + exec_block_scratch_floats(&x->d);
        stage_forward(x, st, b.ver, &v, ys); /* recomputation */
    }
    float *gx = b.gx ? exec_pool_slot(b.gx, b.gx_slot) : NULL;
    for (int k = st->nb - 1; k >= 0; k--)
        exec_block_bwd_i(&x->d, params(x, st, b.ver, k), exec_xv_x(&v, k), exec_xv_state(&v, k), exec_xv_g(&v, k + 1),
                         k > 0 ? exec_xv_g(&v, k) : gx, x->scratch);
    st->flags[j] |= XS_IDONE;
    return PL_OK;
}

/* W of (s, j): accumulates the weight gradients, then frees everything the microbatch held
 * (activations, input, its weight version reference). Returns PL_OK or an error. */
static int do_w(exec_xrank *x, int s, int j, pl_err *e) {
    exec_xstage *st = exec_xrank_w_begin(x, s, j, e);
    if (!st) return e->code;
    exec_xview v = exec_xview_of(x, st, j);
    size_t nf = exec_block_floats(&x->d);
    for (int k = st->nb - 1; k >= 0; k--)
        exec_block_bwd_w(&x->d, exec_xv_x(&v, k), exec_xv_state(&v, k), exec_xv_g(&v, k + 1), st->grad + (size_t)k * nf);
    exec_xrank_w_end(x, st, j);
    return PL_OK;
}

/* STEP of stage s: the newest version minus lr times the (momentum of the) average gradient
 * accumulated since the last STEP; in place when no microbatch in flight uses the newest
 * version, else into a new version slot. Returns PL_OK or an error. */
static int do_step(exec_xrank *x, int s, pl_err *e) {
    exec_xstage *st;
    int dst;
    if (exec_xrank_step_begin(x, s, &st, &dst, e) != PL_OK) return e->code;
    if (!st) return PL_OK;
    float scale = 1.0f / (float)st->nacc, lr = (float)x->cfg->lr, mu = (float)x->cfg->momentum;
    const float *w = exec_pool_slot(&st->ver, st->cur);
    float *o = exec_pool_slot(&st->ver, dst);
    exec_sgd_step(o, w, st->grad, st->mom, st->pfloats, scale, lr, mu);
    exec_xrank_step_end(st, dst);
    return PL_OK;
}

/* ---------------------------------------------------------------- communication actions */

/* Returns the rank that holds stage q's microbatch mb: its schedule rank, or the replica that
 * runs mb (exec_layout). */
static int peer(const exec_xrank *x, int q, int mb) {
    return x->lay ? exec_layout_rank(x->lay, x->s, q, mb) : x->s->stage_rank[q];
}

/* What an injected fault does to an action (fault_at's result, do_comm's `fault`). */
enum { SEND_OK = 0, SEND_SHORT = 1, SEND_DROP = 2, SEND_TWICE = 3, SKIP_ACTION = 4, SEND_LATE = 5 };

/* How late an EXEC_FAULT_DELAY_SEND sends (seconds). */
#define SEND_DELAY_S 0.25

/* Applies a SEND or RECV action (an injected fault makes a SEND send one float short, nothing,
 * twice, or late: SEND_*). A SEND returns once the transport has its copy. A RECV takes the
 * slot its message lands in (the bookkeeping and memory of the old blocking receive, at the same
 * point of the list) and posts the receive without waiting for it (exec_xpend): the compute
 * that needs the data waits for it (await_inputs). Returns PL_OK or an error. */
static int do_comm(exec_xrank *x, const sched_action *a, int fault, pl_err *e) {
    int s = a->stage;
    size_t bh = (size_t)x->d.b * x->d.h, bytes = bh * sizeof(float);
    int64_t g = x->goff + a->mb;
    if (a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B) {
        int *slotp = exec_xrank_send_begin(x, a, e);
        if (!slotp) return e->code;
        int fwd = a->kind == SCHED_SEND_F, to = fwd ? s + 1 : s - 1;
        int rc = PL_OK;
        if (fault == SEND_LATE) {
            struct timespec ts = {0, (long)(SEND_DELAY_S * EXEC_NS_PER_S)};
            while (nanosleep(&ts, &ts) != 0) {}
        }
        if (fault != SEND_DROP) {
            exec_msg_key k = {fwd ? EXEC_MSG_ACT : EXEC_MSG_GRAD, to, g};
            float *src = exec_pool_slot(&x->out, *slotp);
            int dst = peer(x, to, a->mb);
            rc = x->t->send(x->t, dst, k, src, fault == SEND_SHORT ? bytes - sizeof(float) : bytes, e);
            if (rc == PL_OK && fault == SEND_TWICE) rc = x->t->send(x->t, dst, k, src, bytes, e);
        }
        exec_xrank_send_end(x, slotp);
        return rc;
    }
    if (a->kind != SCHED_RECV_F && a->kind != SCHED_RECV_B) return pl_errf(e, PL_EINTERNAL, "not a communication action");
    exec_pool *pool;
    int i = exec_xrank_recv_begin(x, a, &pool, e);
    if (i < 0) return e->code;
    if (x->n_pend >= x->cap_pend) return pl_errf(e, PL_EINTERNAL, "more receives pending than the list has RECVs");
    int fwd = a->kind == SCHED_RECV_F;
    exec_xpend *p = &x->pend[x->n_pend];
    *p = (exec_xpend){a->kind, s, a->mb, x->at, 0, exec_pool_slot(pool, i)};
    if (x->t->post_recv && x->t->wait_recv) {
        exec_msg_key k = {fwd ? EXEC_MSG_ACT : EXEC_MSG_GRAD, s, g};
        int rc = x->t->post_recv(x->t, peer(x, fwd ? s - 1 : s + 1, a->mb), k, p->data, bytes, e);
        if (rc != PL_OK) return rc;
        p->posted = 1;
    }
    x->n_pend++;
    return PL_OK;
}

/* Executes one action (fault: what happens to a SEND, SEND_*); returns PL_OK or an error
 * (without context; the caller adds it). */
static int do_action(exec_xrank *x, const sched_action *a, int fault, pl_err *e) {
    switch (a->kind) {
    case SCHED_F: return do_f(x, a->stage, a->mb, e);
    case SCHED_I: return do_i(x, a->stage, a->mb, e);
    case SCHED_W: return do_w(x, a->stage, a->mb, e);
    case SCHED_B: {
        int rc = do_i(x, a->stage, a->mb, e);
        return rc ? rc : do_w(x, a->stage, a->mb, e);
    }
    case SCHED_OVERLAP: {
        int rc = do_f(x, a->stage, a->mb, e);
        if (rc == PL_OK) rc = do_i(x, a->stage2, a->mb2, e);
        if (rc == PL_OK && a->kind2 == SCHED_B) rc = do_w(x, a->stage2, a->mb2, e);
        return rc;
    }
    case SCHED_SEND_F:
    case SCHED_SEND_B:
    case SCHED_RECV_F:
    case SCHED_RECV_B: return do_comm(x, a, fault, e);
    case SCHED_REDUCE_GRAD: {
        exec_xstage *st = exec_xrank_local(x, a->stage, e);
        return st ? exec_xrank_reduce(x, st, e) : PL_EINPUT; /* an all-reduce of the stage's replicas */
    }
    case SCHED_STEP: return do_step(x, a->stage, e);
    case SCHED_UNSHARD:
    case SCHED_RESHARD: return PL_OK;
    default: return pl_errf(e, PL_EINPUT, "unknown action kind %d", a->kind);
    }
}

/* ---------------------------------------------------------------- pending receives */

/* Completes pending receive i (exec_xpend; removed from the list): waits for its data and adds
 * the wait to *comm (communication time, as the whole of a blocking RECV was). The op records
 * keep their list order and never overlap: the RECV's row is its post, at its place in the list
 * (short), and the wait is the gap before the row of the compute that needed the data, as in the
 * simulator's timeline (a RECV of no duration, the compute starting when its data arrived).
 * While it waits the rank is "at" the RECV (deadlock and launcher reports); an error names the
 * RECV (rank, action, pass) and leaves x->at there. Returns PL_OK or the error (in x->err). */
static int pend_complete(exec_xrank *x, int i, double *comm) {
    exec_xpend p = x->pend[i];
    memmove(&x->pend[i], &x->pend[i + 1], (size_t)(x->n_pend - i - 1) * sizeof *x->pend);
    x->n_pend--;
    long at = x->at;
    x->at = p.at;
    int fwd = p.kind == SCHED_RECV_F;
    int src = peer(x, fwd ? p.stage - 1 : p.stage + 1, p.mb);
    exec_msg_key k = {fwd ? EXEC_MSG_ACT : EXEC_MSG_GRAD, p.stage, x->goff + p.mb};
    size_t bytes = (size_t)x->d.b * x->d.h * sizeof(float);
    double w0 = pl_now_s();
    int rc = p.posted ? x->t->wait_recv(x->t, src, k, &x->err) : x->t->recv(x->t, src, k, p.data, bytes, &x->err);
    double w1 = pl_now_s();
    *comm += w1 - w0;
    if (rc != PL_OK) {
        if (!exec_err_aborted(&x->err)) exec_xrank_at(x, (size_t)p.at, &x->err);
        return rc;
    }
    x->at = at;
    return PL_OK;
}

/* Completes the pending receive of RECV kind `kind` of (stage, mb), if there is one. */
static int pend_need(exec_xrank *x, int kind, int stage, int mb, double *comm) {
    for (int i = 0; i < x->n_pend; i++)
        if (x->pend[i].kind == kind && x->pend[i].stage == stage && x->pend[i].mb == mb) return pend_complete(x, i, comm);
    return PL_OK;
}

/* Before compute action a: completes the receives whose data it reads (F: its RECV_F; I, B: its
 * RECV_B; an overlap both). A compute whose RECV did not run finds its input missing itself (the
 * bookkeeping's checks). Returns PL_OK or the error (x->err, naming the RECV). */
static int await_inputs(exec_xrank *x, const sched_action *a, double *comm) {
    if (x->n_pend == 0) return PL_OK;
    switch (a->kind) {
    case SCHED_F: return pend_need(x, SCHED_RECV_F, a->stage, a->mb, comm);
    case SCHED_I:
    case SCHED_B: return pend_need(x, SCHED_RECV_B, a->stage, a->mb, comm);
    case SCHED_OVERLAP: {
        int rc = pend_need(x, SCHED_RECV_F, a->stage, a->mb, comm);
        return rc ? rc : pend_need(x, SCHED_RECV_B, a->stage2, a->mb2, comm);
    }
    default: return PL_OK;
    }
}

/* ---------------------------------------------------------------- the thread */

/* Cleanup handler of the worker thread: runs only when the thread ends in the middle of its
 * walk (pthread_exit between two actions; workers are not cancellable, so a thread never ends
 * inside the transport's lock), which no code path of the worker does except an injected
 * EXEC_FAULT_EXIT: names the rank and the action it was on, stops the run and counts the rank as
 * finished, so the others stop at once instead of waiting for its messages until the timeout. */
static void worker_vanished(void *arg) {
    exec_xrank *x = arg;
    pl_errf(&x->err, PL_EINTERNAL, "the worker thread ended in the middle of its list without reporting");
    if (x->at >= 0) exec_xrank_at(x, (size_t)x->at, &x->err);
    else {
        pl_err_prefix(&x->err, "rank %d, between actions of pass %d: ", x->r, x->pass);
        pl_err_set_rank(&x->err, x->r);
    }
    x->rc = PL_EINTERNAL;
    x->t->abort(x->t, &x->err);
    if (x->t->finished) x->t->finished(x->t);
}

/* Applies an injected fault that strikes rank x at action k (cfg->fault): returns the SEND_*
 * treatment of the action (SEND_LATE: DELAY_SEND), SKIP_ACTION (DROP_RECV), or -1 with x->rc
 * set (ERROR). EXIT and KILL do not return. armed: 1 while the fault has not struck yet in this
 * pass. */
static int fault_at(exec_xrank *x, size_t k, const sched_action *a, int *armed) {
    const exec_fault *f = &x->cfg->fault;
    if (!*armed || f->rank != x->r || f->pass != x->pass || (size_t)f->action > k) return SEND_OK;
    int send = a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B, recv = a->kind == SCHED_RECV_F || a->kind == SCHED_RECV_B;
    switch (f->kind) {
    case EXEC_FAULT_ERROR:
        *armed = 0;
        x->rc = pl_errf(&x->err, PL_EINPUT, "injected fault");
        return -1;
    case EXEC_FAULT_EXIT: pthread_exit(NULL); /* worker_vanished reports */
    case EXEC_FAULT_KILL:
        raise(SIGKILL);
        pthread_exit(NULL); /* not reached */
    case EXEC_FAULT_BAD_SIZE: if (send) { *armed = 0; return SEND_SHORT; } return SEND_OK;
    case EXEC_FAULT_DROP_SEND: if (send) { *armed = 0; return SEND_DROP; } return SEND_OK;
    case EXEC_FAULT_DROP_RECV: if (recv) { *armed = 0; return SKIP_ACTION; } return SEND_OK;
    case EXEC_FAULT_EXTRA_SEND: if (send) { *armed = 0; return SEND_TWICE; } return SEND_OK;
    case EXEC_FAULT_DELAY_SEND: if (send) { *armed = 0; return SEND_LATE; } return SEND_OK;
    default: return SEND_OK;
    }
}

/* Runs the rounds of the profile between the passes (exec_config.profile_between_reps) that fall
 * in one gap (exec_prof_gap_rounds): its untimed opening round (the warm-up round when warm; one
 * before the timed rounds of any gap when the rounds are short, exec_prof_opens),
 * then the timed rounds of gap g (0 .. T - 1: before timed pass g; negative: a warm-up pass,
 * none). A barrier follows each round, so that the ranks' workers compute their rounds together,
 * as the ranks do, and the pass starts on all ranks at once; after each timed round, one follows
 * each of the sharing term's phases (exec_prof_worker_share), whose alone phases need them. */
static int prof_gap(exec_xrank *x, int warm, int g) {
    const exec_config *c = x->cfg;
    int open, n = exec_prof_gap_rounds(c->profile_between_reps, c->timed_passes, g, warm, exec_prof_worker_opens(x->prof), &open);
    n += open;
    /* the rounds' W and STEP work where the rank's do (the rank's gradients, cleared by its last
     * STEP, weights and momentum), not on buffers of the profile's own: two buffers of one size
     * can stream at speeds 10-20% apart for as long as they live (docs/validate_cpu.md, "The
     * profile's weights where the run keeps them") */
    exec_prof_worker_lend(x->prof, x);
    int rc = PL_OK;
    for (int i = 0; i < n && rc == PL_OK; i++) {
        exec_prof_worker_round(x->prof, i == 0, i < open); /* the first of a gap follows the run's pass */
        rc = x->t->barrier(x->t, &x->err);
        for (int ph = 0, phases = i < open ? 0 : 1; ph < phases && rc == PL_OK; ph++) {
            phases = exec_prof_worker_share(x->prof, ph);
            rc = phases ? x->t->barrier(x->t, &x->err) : PL_OK;
        }
    }
    exec_prof_worker_unlend(x->prof);
    return rc;
}

/* After the profile's rounds in a gap (prof_gap): reads back what the rank's last STEP went
 * through, each local stage's newest weights, gradients and momentum, in the STEP's order, so
 * that the pass starts with the caches a pass has after the previous one's STEP rather than with
 * the profile's own blocks in them. The profile between the passes is a measuring device: its
 * rounds touch 2-3 MB of their own (width 128), and without this the first F and B of each stage
 * in every timed pass read their weights and gradients back from memory, 40-75 us over the
 * second ones at width 128, which a pass without the rounds (a saved profile) did not pay
 * (docs/validate_cpu.md, "First touch"). Returns the sum of what it read (so it is read). */
static float restore_after_profile(const exec_xrank *x) {
    float sum = 0;
    for (int i = 0; i < x->nst; i++) {
        const exec_xstage *st = &x->st[i];
        const float *w = exec_pool_slot(&st->ver, st->cur);
        for (size_t k = 0; w && k < st->pfloats; k++) sum += w[k] + st->grad[k] + (st->mom ? st->mom[k] : 0.0f);
    }
    return sum;
}

/* Opens pass `pass`: the barrier between passes, then with a profile between the passes its
 * rounds of this gap (prof_gap), the read-back (restore_after_profile), the rank's ready time and
 * one more barrier. The ranks' read-backs take different times, so the pass starts on all ranks
 * at once only after that barrier (else the rank that read back last starts late, and the pass,
 * first start to last end, counts its lateness). Sets *stop (and opens nothing) when the run was
 * steady before it (exec_xrank_steady_done). Returns PL_OK or the transport's error. */
static int pass_gap(exec_xrank *x, int pass, int *stop) {
    int rc = x->t->barrier(x->t, &x->err);
    *stop = 0;
    if (rc == PL_OK) rc = exec_xrank_steady_done(x, pass, stop);
    if (rc != PL_OK || *stop || !x->prof) return rc;
    rc = prof_gap(x, pass == 0, pass - x->cfg->warmup_passes);
    volatile float sink = restore_after_profile(x);
    (void)sink;
    x->ready_s[pass] = pl_now_s();
    return rc == PL_OK ? x->t->barrier(x->t, &x->err) : rc;
}

/* Keeps the record of timed action a (from s0 to s1), while there is room. */
static void record_op(exec_xrank *x, const sched_action *a, double s0, double s1) {
    if (x->n_ops >= x->cap_ops) return;
    exec_op *op = &x->ops[x->n_ops++];
    op->act = *a;
    op->pass = x->pass - x->cfg->warmup_passes;
    op->start_s = s0;
    op->end_s = s1;
}

/* Walks the passes (the body of exec_worker_main, inside its cleanup handler). */
static void worker_walk(exec_xrank *x) {
    const exec_config *c = x->cfg;
    const sched_rank *rk = x->list;
    int passes = exec_passes_most(c), stop = 0;
    x->passes = 0;
    for (int pass = 0; pass < passes && x->rc == PL_OK; pass++) {
        x->pass = pass; /* the gap's messages name it */
        x->rc = pass_gap(x, pass, &stop);
        if (x->rc != PL_OK || stop) break;
        exec_xrank_pass_begin(x, pass);
        int timed = x->pass >= c->warmup_passes;
        double busy = 0, comm = 0, g0_s, g0_f, g1_s, g1_f, first = -1, last = -1;
        exec_gemm_clock(&g0_s, &g0_f);
        double t0 = pl_now_s();
        x->pass_start_s[x->pass] = t0;
        int armed = c->fault.kind != EXEC_FAULT_NONE;
        for (size_t k = 0; k < rk->n; k++) {
            const sched_action *a = &rk->acts[k];
            x->at = (long)k;
            int fault = fault_at(x, k, a, &armed);
            if (fault == SKIP_ACTION) continue; /* a dropped receive */
            /* a compute first waits for the data it reads (communication time, outside its row) */
            int named = 0;
            if (x->rc == PL_OK && sched_kind_is_compute((sched_kind)a->kind)) {
                x->rc = await_inputs(x, a, &comm);
                named = x->rc != PL_OK; /* the message names the RECV */
            }
            double s0 = pl_now_s();
            if (x->rc == PL_OK) x->rc = do_action(x, a, fault, &x->err);
            double s1 = pl_now_s();
            if (x->rc != PL_OK) {
                if (!exec_err_aborted(&x->err)) {
                    if (!named) exec_xrank_at(x, k, &x->err);
                    x->t->abort(x->t, &x->err);
                }
                break;
            }
            if (x->r == 0) pl_progress_set(c->progress, (uint64_t)pass * rk->n + k + 1);
            /* busy: compute and STEP, as the simulator counts a rank's bubble */
            if (sched_kind_is_busy((sched_kind)a->kind)) {
                busy += s1 - s0;
                if (first < 0) first = s0;
                last = s1;
            }
            else if (sched_kind_is_comm((sched_kind)a->kind) || a->kind == SCHED_REDUCE_GRAD) comm += s1 - s0;
            if (timed && c->record_ops) record_op(x, a, s0, s1);
        }
        /* receives no compute needed (a list the dry walk would have refused): completed here,
         * so that the transport's accounting stays exact; the pass-end check below then fails
         * on the buffers they hold */
        while (x->rc == PL_OK && x->n_pend > 0) {
            x->rc = pend_complete(x, 0, &comm);
            if (x->rc != PL_OK && !exec_err_aborted(&x->err)) x->t->abort(x->t, &x->err);
        }
        x->n_pend = 0;
        if (x->rc == PL_OK) x->at = -1;
        x->pass_end_s[x->pass] = pl_now_s();
        x->busy_s[x->pass] = busy;
        x->comm_s[x->pass] = comm;
        x->span_s[x->pass] = first >= 0 ? last - first : 0;
        exec_gemm_clock(&g1_s, &g1_f);
        x->gemm_s[x->pass] = g1_s - g0_s;
        x->gemm_flops[x->pass] = g1_f - g0_f;
        if (x->rc == PL_OK) {
            x->rc = exec_xrank_pass_end_check(x, &x->err);
            if (x->rc != PL_OK) x->t->abort(x->t, &x->err);
        }
    }
}

void *exec_worker_main(void *arg) {
    exec_xrank *x = arg;
    pl_err_clear(&x->err);
    x->rc = PL_OK;
    x->at = -1;
    if (x->core >= 0 && exec_platform_pin_self(x->core) != 0) x->core = -1;
    int old_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_state); /* see worker_vanished */
    pthread_cleanup_push(worker_vanished, x);
    worker_walk(x);
    pthread_cleanup_pop(0);
    pthread_setcancelstate(old_state, NULL);
    if (x->t->finished) x->t->finished(x->t);
    return NULL;
}
