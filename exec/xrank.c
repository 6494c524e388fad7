/* xrank.c: the per-rank bookkeeping that does not depend on where the compute runs: pools of
 * slots, memory classes and the budget, stage and microbatch addressing, weight versions, the
 * progress flags, where a rank is, and its record (its up-front memory: xrank_arena.c). The CPU worker (worker.c) and the CUDA one
 * (cuda/cuda_walk.c) wrap their compute in the same calls, so their pools, tracked memory and
 * errors are the same by construction (and the CPU worker's tracked peak is the cost model's). */
#include "exec_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- pools, memory */

int exec_pool_get(exec_pool *p) {
    for (int i = 0; i < p->cap; i++)
        if (p->refs[i] == 0) {
            p->refs[i] = 1;
            if (++p->used > p->peak) p->peak = p->used;
            return i;
        }
    return -1;
}

int exec_pool_put(exec_pool *p, int i) {
    if (--p->refs[i] == 0) {
        p->used--;
        return 1;
    }
    return 0;
}

void exec_xrank_model_peak(exec_xrank *x) {
    size_t m = x->cur.weights_bytes + x->cur.grads_bytes + x->cur.optim_bytes + x->cur.stash_bytes - x->pending_in_bytes;
    if (m > x->model_peak_bytes) x->model_peak_bytes = m;
}

int exec_xrank_mem_add(exec_xrank *x, size_t *cls, long long delta, pl_err *e) {
    *cls = (size_t)((long long)*cls + delta);
    x->cur.total_bytes = (size_t)((long long)x->cur.total_bytes + delta);
    if (x->cur.total_bytes > x->peak.total_bytes) x->peak = x->cur;
    exec_xrank_model_peak(x);
    size_t budget = x->cfg->mem_budget_bytes;
    if (delta > 0 && budget && x->cur.total_bytes > budget)
        return pl_errf(e, PL_ENOMEM, "out of its memory budget: %zu bytes in use, budget %zu bytes",
                       x->cur.total_bytes, budget);
    return PL_OK;
}

int exec_xrank_take(exec_xrank *x, exec_pool *p, size_t *cls, const char *what, pl_err *e) {
    int i = exec_pool_get(p);
    if (i < 0) {
        pl_errf(e, PL_EINTERNAL, "no free %s slot (pool of %d)", what, p->cap);
        return -1;
    }
    if (exec_xrank_mem_add(x, cls, (long long)(p->slot_floats * sizeof(float)), e) != PL_OK) return -1;
    return i;
}

void exec_xrank_give(exec_xrank *x, exec_pool *p, int i, size_t *cls) {
    if (exec_pool_put(p, i)) exec_xrank_mem_add(x, cls, -(long long)(p->slot_floats * sizeof(float)), NULL);
}

/* ---------------------------------------------------------------- addressing */

exec_xstage *exec_xrank_local(exec_xrank *x, int s, pl_err *e) {
    if (s < 0 || s >= x->s->stages || x->loc[s] < 0) {
        pl_errf(e, PL_EINPUT, "stage %d is not held by rank %d", s, x->r);
        return NULL;
    }
    return &x->st[x->loc[s]];
}

int exec_xrank_mb_ok(const exec_xrank *x, int mb, pl_err *e) {
    if (mb >= 0 && mb < x->M) return 1;
    pl_errf(e, PL_EINPUT, "microbatch %d out of range 0..%d", mb, x->M - 1);
    return 0;
}

exec_xview exec_xview_of(const exec_xrank *x, const exec_xstage *st, int j) {
    exec_xview v = {st->in_of[j] >= 0 ? exec_pool_slot(&x->in, st->in_of[j]) : NULL,
                    st->act_of[j] >= 0 ? exec_pool_slot(&st->act, st->act_of[j]) : NULL,
                    st->gin_of[j] >= 0 ? exec_pool_slot(&x->gin, st->gin_of[j]) : NULL,
                    st->wg_of[j] >= 0 ? exec_pool_slot(&st->wg, st->wg_of[j]) : NULL,
                    (size_t)x->d.b * x->d.h, (size_t)x->d.b * x->d.f, exec_block_state_floats(&x->d), st->nb};
    return v;
}

/* ---------------------------------------------------------------- the actions' bookkeeping */

int exec_xrank_f_begin(exec_xrank *x, int s, int j, exec_xf *f, pl_err *e) {
    exec_xstage *st = exec_xrank_local(x, s, e);
    if (!st || !exec_xrank_mb_ok(x, j, e)) return PL_EINPUT;
    if (st->flags[j] & XS_FDONE) return pl_errf(e, PL_EINPUT, "second forward of microbatch %d", j);
    f->st = st;
    f->g = x->goff + j;
    f->di = x->data ? (int)(f->g % x->data->d) : 0;
    if (x->data && f->di >= x->data->n)
        return pl_errf(e, PL_EINTERNAL, "microbatch %lld reads data set entry %d, past the %d built for the run's passes",
                       (long long)f->g, f->di, x->data->n);
    f->in_new = -1;
    if (s == 0) {
        if (st->in_of[j] >= 0) return pl_errf(e, PL_EINPUT, "input of stage 0 microbatch %d already present", j);
        int i = exec_xrank_take(x, &x->in, &x->cur.stash_bytes, "input", e);
        if (i < 0) return e->code;
        st->in_of[j] = i;
        f->in_new = i;
    } else if (st->in_of[j] < 0) {
        return x->s->stage_rank[s - 1] != x->sr
                   ? pl_errf(e, PL_EINPUT, "forward of stage %d microbatch %d before its input arrived (the activations rank %d sends "
                             "were not received: no %dRECV_F%d ran)", s, j, x->s->stage_rank[s - 1], s, j)
                   : pl_errf(e, PL_EINPUT, "forward of stage %d microbatch %d before its input arrived", s, j);
    } else {
        x->pending_in_bytes -= x->in.slot_floats * sizeof(float); /* now the microbatch's stash */
        exec_xrank_model_peak(x);
    }
    int ver = st->cur;
    st->ver.refs[ver]++;
    st->ver_of[j] = ver;
    f->ver = ver;
    int a = exec_xrank_take(x, &st->act, &x->cur.stash_bytes, "activation", e);
    if (a < 0) return e->code;
    st->act_of[j] = a;
    f->last = s == x->s->stages - 1;
    if (f->last) {
        int gi = exec_xrank_take(x, &x->gin, &x->cur.bwd_bytes, "output gradient", e);
        if (gi < 0) return e->code;
        st->gin_of[j] = gi;
        f->out = &x->gin; /* the output, turned into the loss gradient in place */
        f->out_slot = gi;
    } else if (x->loc[s + 1] >= 0) {
        exec_xstage *nx = &x->st[x->loc[s + 1]];
        if (nx->in_of[j] >= 0) return pl_errf(e, PL_EINPUT, "input of stage %d microbatch %d already present", s + 1, j);
        x->pending_in_bytes += x->in.slot_floats * sizeof(float);
        int i = exec_xrank_take(x, &x->in, &x->cur.stash_bytes, "input", e);
        if (i < 0) return e->code;
        nx->in_of[j] = i;
        f->out = &x->in; /* handed over without a copy */
        f->out_slot = i;
    } else {
        int o = exec_xrank_take(x, &x->out, &x->cur.comm_bytes, "send", e);
        if (o < 0) return e->code;
        st->out_f[j] = o;
        f->out = &x->out;
        f->out_slot = o;
    }
    return PL_OK;
}

void exec_xrank_f_end(exec_xrank *x, const exec_xf *f, int j) {
    exec_xstage *st = f->st;
    if (f->last) st->flags[j] |= XS_GOUT;
    if (x->s->recompute == SCHED_RECOMPUTE_FULL) {
        exec_xrank_give(x, &st->act, st->act_of[j], &x->cur.stash_bytes);
        st->act_of[j] = -1;
    }
    st->flags[j] |= XS_FDONE;
}

int exec_xrank_i_begin(exec_xrank *x, int s, int j, exec_xi *b, pl_err *e) {
    exec_xstage *st = exec_xrank_local(x, s, e);
    if (!st || !exec_xrank_mb_ok(x, j, e)) return PL_EINPUT;
    if (!(st->flags[j] & XS_FDONE)) return pl_errf(e, PL_EINPUT, "backward of stage %d microbatch %d before its forward", s, j);
    if (st->flags[j] & XS_IDONE) return pl_errf(e, PL_EINPUT, "second input backward of microbatch %d", j);
    if (!(st->flags[j] & XS_GOUT)) {
        if (s + 1 < x->s->stages && x->s->stage_rank[s + 1] != x->sr)
            return pl_errf(e, PL_EINPUT, "backward of stage %d microbatch %d before its output gradient arrived (the gradients "
                           "rank %d sends were not received: no %dRECV_B%d ran)", s, j, x->s->stage_rank[s + 1], s, j);
        return pl_errf(e, PL_EINPUT, "backward of stage %d microbatch %d before its output gradient arrived", s, j);
    }
    b->st = st;
    b->ver = st->ver_of[j];
    b->recompute = 0;
    b->gx = NULL;
    b->gx_slot = -1;
    if (st->act_of[j] < 0) {
        int a = exec_xrank_take(x, &st->act, &x->cur.stash_bytes, "activation", e);
        if (a < 0) return e->code;
        st->act_of[j] = a;
        b->recompute = 1;
    }
    if (st->nb > 1) {
        int w = exec_xrank_take(x, &st->wg, &x->cur.bwd_bytes, "inner gradient", e);
        if (w < 0) return e->code;
        st->wg_of[j] = w;
    }
    if (s > 0 && x->loc[s - 1] >= 0) {
        exec_xstage *pv = &x->st[x->loc[s - 1]];
        if (pv->in_of[j] < 0 || pv->gin_of[j] >= 0)
            return pl_errf(e, PL_EINPUT, "stage %d microbatch %d cannot take an output gradient now", s - 1, j);
        int gi = exec_xrank_take(x, &x->gin, &x->cur.bwd_bytes, "output gradient", e);
        if (gi < 0) return e->code;
        pv->gin_of[j] = gi;
        b->gx = &x->gin; /* handed over without a copy */
        b->gx_slot = gi;
        pv->flags[j] |= XS_GOUT;
    } else if (s > 0) {
        int o = exec_xrank_take(x, &x->out, &x->cur.comm_bytes, "send", e);
        if (o < 0) return e->code;
        st->out_b[j] = o;
        b->gx = &x->out;
        b->gx_slot = o;
    }
    return PL_OK;
}

exec_xstage *exec_xrank_w_begin(exec_xrank *x, int s, int j, pl_err *e) {
    exec_xstage *st = exec_xrank_local(x, s, e);
    if (!st || !exec_xrank_mb_ok(x, j, e)) return NULL;
    if (!(st->flags[j] & XS_IDONE)) {
        pl_errf(e, PL_EINPUT, "weight backward of stage %d microbatch %d before its input backward", s, j);
        return NULL;
    }
    return st;
}

void exec_xrank_w_end(exec_xrank *x, exec_xstage *st, int j) {
    st->nacc++;
    exec_xrank_give(x, &st->act, st->act_of[j], &x->cur.stash_bytes);
    exec_xrank_give(x, &x->in, st->in_of[j], &x->cur.stash_bytes);
    exec_xrank_give(x, &x->gin, st->gin_of[j], &x->cur.bwd_bytes);
    if (st->wg_of[j] >= 0) exec_xrank_give(x, &st->wg, st->wg_of[j], &x->cur.bwd_bytes);
    if (exec_pool_put(&st->ver, st->ver_of[j]))
        exec_xrank_mem_add(x, &x->cur.weights_bytes, -(long long)(st->pfloats * sizeof(float)), NULL);
    st->act_of[j] = st->in_of[j] = st->ver_of[j] = st->gin_of[j] = st->wg_of[j] = -1;
    st->flags[j] = 0;
}

int exec_xrank_step_begin(exec_xrank *x, int s, exec_xstage **stp, int *dst, pl_err *e) {
    *stp = NULL;
    exec_xstage *st = exec_xrank_local(x, s, e);
    if (!st) return PL_EINPUT;
    if (st->nacc == 0) return PL_OK;
    *dst = st->cur;
    if (st->ver.refs[st->cur] > 1) {
        *dst = exec_xrank_take(x, &st->ver, &x->cur.weights_bytes, "weight version", e);
        if (*dst < 0) return e->code;
        st->steps_new++;
    }
    st->steps++;
    *stp = st;
    return PL_OK;
}

void exec_xrank_step_end(exec_xstage *st, int dst) {
    if (dst != st->cur) {
        exec_pool_put(&st->ver, st->cur); /* no longer the newest; freed by its last microbatch */
        st->cur = dst;
    }
    st->nacc = 0;
}

int *exec_xrank_send_begin(exec_xrank *x, const sched_action *a, pl_err *e) {
    int s = a->stage, j = a->mb;
    exec_xstage *st = exec_xrank_local(x, s, e);
    if (!st || !exec_xrank_mb_ok(x, j, e)) return NULL;
    int fwd = a->kind == SCHED_SEND_F;
    int *slotp = fwd ? &st->out_f[j] : &st->out_b[j];
    int to = fwd ? s + 1 : s - 1;
    if (to < 0 || to >= x->s->stages) {
        pl_errf(e, PL_EINPUT, "no stage %d to send to", to);
        return NULL;
    }
    if (*slotp < 0) {
        pl_errf(e, PL_EINPUT, "nothing to send: the %s of stage %d microbatch %d was not computed", fwd ? "forward" : "input backward", s, j);
        return NULL;
    }
    return slotp;
}

void exec_xrank_send_end(exec_xrank *x, int *slotp) {
    exec_xrank_give(x, &x->out, *slotp, &x->cur.comm_bytes);
    *slotp = -1;
}

int exec_xrank_recv_begin(exec_xrank *x, const sched_action *a, exec_pool **pool, pl_err *e) {
    int s = a->stage, j = a->mb;
    exec_xstage *st = exec_xrank_local(x, s, e);
    if (!st || !exec_xrank_mb_ok(x, j, e)) return -1;
    if (a->kind == SCHED_RECV_F) {
        if (s == 0) return pl_errf(e, PL_EINPUT, "stage 0 has no forward input to receive"), -1;
        if (st->in_of[j] >= 0) return pl_errf(e, PL_EINPUT, "input of stage %d microbatch %d already present", s, j), -1;
        x->pending_in_bytes += x->in.slot_floats * sizeof(float);
        int i = exec_xrank_take(x, &x->in, &x->cur.stash_bytes, "input", e);
        if (i < 0) return -1;
        st->in_of[j] = i;
        *pool = &x->in;
        return i;
    }
    if (s + 1 >= x->s->stages) return pl_errf(e, PL_EINPUT, "the last stage has no gradient to receive"), -1;
    if (st->in_of[j] < 0) return pl_errf(e, PL_EINPUT, "gradient of stage %d microbatch %d arrives before its forward", s, j), -1;
    if (st->gin_of[j] >= 0) return pl_errf(e, PL_EINPUT, "second output gradient of stage %d microbatch %d", s, j), -1;
    int gi = exec_xrank_take(x, &x->gin, &x->cur.bwd_bytes, "output gradient", e);
    if (gi < 0) return -1;
    st->gin_of[j] = gi;
    st->flags[j] |= XS_GOUT;
    *pool = &x->gin;
    return gi;
}

void exec_xrank_pass_begin(exec_xrank *x, int pass) {
    x->pass = pass;
    x->goff = (int64_t)pass * x->M;
    x->passes = pass + 1;
}

int exec_xrank_pass_end_check(const exec_xrank *x, pl_err *e) {
    if (!x->in.used && !x->out.used && !x->gin.used) return PL_OK;
    pl_errf(e, PL_EINPUT, "rank %d: %d microbatch buffers still in use at the end of pass %d", x->r,
            x->in.used + x->out.used + x->gin.used, x->pass);
    pl_err_set_rank(e, x->r);
    return PL_EINPUT;
}

/* ---------------------------------------------------------------- where a rank is, its results */

void exec_xrank_at(const exec_xrank *x, size_t k, pl_err *e) {
    char t[EXEC_ACTION_TEXT_MAX];
    sched_action_format(&x->list->acts[k], t, sizeof t);
    if (x->lay && x->lay->width[x->sr] > 1) /* k counts in the replica's share of the list */
        pl_err_prefix(e, "rank %d (replica %d of schedule rank %d), action %zu (%s), pass %d: ", x->r, x->rep, x->sr, k + 1,
                      t, x->pass);
    else
        pl_err_prefix(e, "rank %d, action %zu (%s), pass %d: ", x->r, k + 1, t, x->pass);
    pl_err_set_rank(e, x->r);
}

void exec_xrank_where(const exec_xrank *x, char *buf, size_t n) {
    if (x->at >= 0 && x->list && (size_t)x->at < x->list->n) {
        char t[EXEC_ACTION_TEXT_MAX];
        sched_action_format(&x->list->acts[x->at], t, sizeof t);
        snprintf(buf, n, "action %ld (%s) of pass %d", x->at + 1, t, x->pass);
    } else {
        snprintf(buf, n, "between actions of pass %d", x->pass);
    }
}

int exec_xrank_record(exec_xrank *x, const double *loss_mb, size_t allocated_bytes, exec_rank_record *rec,
                      pl_err *e) {
    const exec_config *c = x->cfg;
    int P = x->passes, most = exec_passes_most(c);
    size_t nl = (size_t)P * (size_t)x->M, np = exec_param_count(c), nf = exec_block_floats(&x->d);
    memset(rec, 0, sizeof *rec);
    rec->rank = x->r;
    rec->passes = P;
    /* one block of EXEC_REC_ARRAYS P doubles: each array moved up to follow the previous one's
     * P when the run was steady before its most passes */
    rec->pass_start_s = x->pass_start_s;
    for (int k = 1; k < EXEC_REC_ARRAYS && P < most; k++)
        memmove(rec->pass_start_s + (size_t)k * P, rec->pass_start_s + (size_t)k * most, (size_t)P * sizeof(double));
    exec_rank_record_arrays(rec);
    x->pass_start_s = NULL;
    rec->peak = x->peak;
    rec->allocated_bytes = allocated_bytes;
    rec->model_peak_bytes = x->model_peak_bytes;
    rec->core = x->core;
    rec->ops = x->ops;
    rec->n_ops = x->n_ops;
    x->ops = NULL;
    if (!exec_record_weights(c, x->s->stages)) np = 0; /* nothing reads them: no copy of the model */
    rec->loss_mb = pl_calloc(nl, sizeof(double));
    rec->weights = pl_calloc(np ? np : 1, sizeof(float));
    if (!rec->loss_mb || !rec->weights) {
        exec_rank_record_free(rec);
        return pl_errf(e, PL_ENOMEM, "out of memory recording rank %d", x->r);
    }
    rec->n_weights = np;
    if (x->loc[x->s->stages - 1] >= 0) memcpy(rec->loss_mb, loss_mb, nl * sizeof(double));
    for (int q = 0; q < x->nst && np > 0; q++) {
        const exec_xstage *st = &x->st[q];
        memcpy(rec->weights + (size_t)st->block0 * nf, st->ver.base + (size_t)st->cur * st->ver.stride,
               st->pfloats * sizeof(float));
    }
    if (x->prof) {
        /* this worker's own profile between the passes */
        exec_layer_profile lp;
        exec_prof_worker *w = x->prof;
        int rc = exec_prof_worker_collect(&w, 1, c, &lp, NULL, e);
        if (rc != PL_OK) {
            exec_rank_record_free(rec);
            pl_err_prefix(e, "rank %d: ", x->r);
            pl_err_set_rank(e, x->r);
            return rc;
        }
        rec->has_prof = 1;
        for (int k = 0; k < EXEC_PROF_KINDS; k++) rec->prof_s[k] = *exec_prof_kind(&lp, k);
        memcpy(rec->window, lp.window, sizeof rec->window);
        size_t nr = exec_prof_worker_round_fwd(w, NULL);
        rec->round_f = pl_calloc(nr ? 2 * nr : 1, sizeof *rec->round_f);
        if (!rec->round_f) {
            exec_rank_record_free(rec);
            return pl_errf(e, PL_ENOMEM, "out of memory recording rank %d", x->r);
        }
        rec->n_round_f = exec_prof_worker_round_fwd(w, rec->round_f);
        exec_prof_worker_round_bwd(w, rec->round_f + rec->n_round_f);
    }
    return PL_OK;
}

/* exec_int.h. */
int exec_xrank_steady_done(exec_xrank *x, int pass, int *stop) {
    const exec_config *c = x->cfg;
    int W = c->warmup_passes, T = pass - W;
    *stop = 0;
    if (c->timed_passes_max <= c->timed_passes || T < 1 || !x->steady_v) return PL_OK;
    const double **start = x->steady_p, **end = x->steady_p + x->npeers;
    if (x->peers) {
        if (T < c->timed_passes) return PL_OK;
        for (int r = 0; r < x->npeers; r++) {
            start[r] = x->peers[r]->pass_start_s;
            end[r] = x->peers[r]->pass_end_s;
        }
        for (int t = 0; t < T; t++) x->steady_v[t] = exec_pass_span(x->npeers, start, end, W + t);
    } else if (x->t && x->t->allmax) {
        double v[2] = {-x->pass_start_s[pass - 1], x->pass_end_s[pass - 1]};
        int rc = x->t->allmax(x->t, v, 2, &x->err);
        if (rc != PL_OK) return rc;
        double st = -v[0], en = v[1];
        const double *sp = &st, *ep = &en;
        x->steady_v[T - 1] = exec_pass_span(1, &sp, &ep, 0);
        if (T < c->timed_passes) return PL_OK;
    } else {
        return PL_OK;
    }
    *stop = exec_steadiness(x->steady_v, T) <= c->steady_max;
    return PL_OK;
}
