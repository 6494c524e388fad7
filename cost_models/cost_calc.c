/* cost_calc.c: the one definition of costs: per-stage compute times and bytes, optimizer
 * step, memory per stage and per rank, and partitions of a layer table. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_int.h"

/* Optimizer state per parameter: Adam's m and v in fp32, and for 2-byte models the fp32 master
 * weights too. */
#define ADAM_STATE_BYTES (2 * COST_FP32_BYTES)
#define MASTER_WEIGHT_BYTES COST_FP32_BYTES
/* The part of a layer's stash that W keeps when the layer does not say. */
#define DEFAULT_W_STASH_FRACTION 0.5

/* Returns m's bytes per parameter element: its dtype_bytes, or fp32's when m is NULL or does
 * not say; parameter counts divide parameter bytes by it. */
static int dtype_bytes(const cost_model *m) { return m && m->dtype_bytes > 0 ? m->dtype_bytes : COST_FP32_BYTES; }

/* Fills o with defaults for model m: the model's microbatch size; fp16 and 12 optimizer bytes per
 * parameter (fp32 master weights, Adam m and v) for 2-byte models, else fp32 and 8 (Adam m, v);
 * gradients in the model's dtype; seconds preferred over FLOPs; half the stash kept for W. */
void cost_opts_init(cost_opts *o, const cost_model *m) {
    memset(o, 0, sizeof *o);
    int dtype = dtype_bytes(m);
    int half = dtype == COST_FP16_BYTES;
    o->microbatch_size = m ? m->microbatch_size : 1;
    o->precision = half ? COST_FP16 : COST_FP32;
    o->prefer_flops = 0;
    o->grad_bytes_per_param = dtype;
    o->optimizer_bytes_per_param = half ? ADAM_STATE_BYTES + MASTER_WEIGHT_BYTES : ADAM_STATE_BYTES;
    o->w_stash_fraction = DEFAULT_W_STASH_FRACTION;
}

/* Returns how much bigger the requested microbatch is than the one the model describes. */
static double mb_scale(const cost_model *m, const cost_opts *o) {
    int base = m->microbatch_size > 0 ? m->microbatch_size : 1;
    int want = o->microbatch_size > 0 ? o->microbatch_size : base;
    return (double)want / base;
}

/* Byte counts at or above this do not fit in 64 bits once they come back from a double (2^63
 * rounded down). */
#define BYTES_MAX_D 9.2e18

/* Returns v rounded to a whole byte; sets *over (and returns 0) when it does not fit in 64 bits. */
static int64_t bytes_of(double v, int *over) {
    if (!(v < BYTES_MAX_D)) {
        *over = 1;
        return 0;
    }
    return (int64_t)llround(v);
}

/* Scales bytes by the microbatch ratio, rounding to a whole byte; *over as bytes_of. */
static int64_t scale_bytes(int64_t b, double scale, int *over) {
    return scale == 1.0 ? b : bytes_of((double)b * scale, over);
}

/* Adds v to *acc; sets *over when the sum does not fit in 64 bits. */
static void add_bytes(int64_t *acc, int64_t v, int *over) {
    if (__builtin_add_overflow(*acc, v, acc)) *over = 1;
}

/* The error of a stage whose bytes do not count in 64 bits. */
static int bytes_overflow(const cost_model *m, int first, int end, const char *what, pl_err *e) {
    return pl_errf(e, PL_EINPUT, "model %s, the stage of layers %d-%d: its %s too large to count in 64 bits; check "
                   "the model's parameter, activation and microbatch sizes", m->name, first, end - 1, what);
}

/* Returns PL_OK and one compute time: measured seconds (scaled) unless FLOPs are preferred or the
 * seconds are unknown; FLOPs become flops / (peak * efficiency) + launch overhead. */
static int one_time(const cost_model *m, int layer, const char *what, double sec, double flops,
                    const cost_hw *hw, const cost_opts *o, double scale, double *out, pl_err *e) {
    if (sec >= 0 && (!o->prefer_flops || flops < 0)) {
        *out = sec * scale;
        return PL_OK;
    }
    if (flops < 0)
        return pl_errf(e, PL_EINPUT, "model %s, layer %d (%s): %s time unknown (no seconds, no FLOPs)",
                       m->name, layer, m->layer[layer].name ? m->layer[layer].name : "?", what);
    if (!hw)
        return pl_errf(e, PL_EINPUT, "model %s, layer %d: %s is given in FLOPs: a hardware description is "
                       "needed", m->name, layer, what);
    double peak = hw->peak_flops[o->precision];
    if (!(peak > 0))
        return pl_errf(e, PL_EINPUT, "hardware %s has no %s peak (device.flops_%s) for FLOP-based times",
                       hw->name[0] ? hw->name : "?", cost_precision_name(o->precision),
                       cost_precision_name(o->precision));
    *out = flops * scale / (peak * hw->efficiency) + hw->launch_s;
    return PL_OK;
}

/* cost.h. */
int cost_time_check(double t_s, const char *label, pl_err *e, const char *fmt, ...) {
    if (isfinite(t_s)) return PL_OK;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return pl_errf(e, PL_EINPUT, "%s overflowed (%s %g s): compute or transfer times too large to add up", what, label,
                   t_s);
}

/* The names of a stage's times in cost_time_check's messages, in the order of stage_times. */
static const char *const stage_time_label[] = {"F", "I", "W", "B", "B with recomputation", "I with recomputation"};
#define STAGE_TIMES (sizeof stage_time_label / sizeof *stage_time_label)

/* Puts st's times into t[STAGE_TIMES], in stage_time_label's order. */
static void stage_times(const cost_stage *st, double *t) {
    const double v[STAGE_TIMES] = {st->f_s, st->i_s, st->w_s, st->b_s, st->b_recompute_s, st->i_recompute_s};
    memcpy(t, v, sizeof v);
}

/* Returns PL_OK and the F, I, W seconds of one layer for one microbatch under hw and o. */
int cost_layer_times(const cost_model *m, int layer, const cost_hw *hw, const cost_opts *o,
                     double *f_s, double *i_s, double *w_s, pl_err *e) {
    if (layer < 0 || layer >= m->n) return pl_errf(e, PL_EINPUT, "layer %d out of range [0, %d)", layer, m->n);
    const cost_layer *l = &m->layer[layer];
    double scale = mb_scale(m, o);
    if (one_time(m, layer, "forward", l->fwd_s, l->fwd_flops, hw, o, scale, f_s, e) != PL_OK ||
        one_time(m, layer, "input-backward", l->bwd_in_s, l->bwd_in_flops, hw, o, scale, i_s, e) != PL_OK ||
        one_time(m, layer, "weight-backward", l->bwd_w_s, l->bwd_w_flops, hw, o, scale, w_s, e) != PL_OK)
        return PL_EINPUT;
    const double t[] = {*f_s, *i_s, *w_s};
    for (int k = 0; k < 3; k++)
        if (cost_time_check(t[k], stage_time_label[k], e, "model %s, layer %d: its time", m->name, layer) != PL_OK)
            return PL_EINPUT;
    return PL_OK;
}

/* Returns the W stash of a layer: its own value, or w_stash_fraction of its stash. */
static int64_t layer_w_stash(const cost_layer *l, const cost_opts *o) {
    if (l->w_stash_bytes >= 0) return l->w_stash_bytes;
    return (int64_t)llround((double)l->stash_bytes * o->w_stash_fraction);
}

/* Fills the byte fields of st that follow from the layer range (unscaled sums, then scaled);
 * sets *over when one does not fit in 64 bits. */
static void stage_bytes(const cost_model *m, int first, int end, int64_t param, int64_t stash,
                        int64_t wst, int64_t rc_rest, double scale, cost_stage *st, int *over) {
    st->param_bytes = param;
    st->in_bytes = scale_bytes(m->cut_bytes[first], scale, over);
    st->out_bytes = scale_bytes(m->cut_bytes[end], scale, over);
    st->stash_bytes = scale_bytes(stash, scale, over);
    st->w_stash_bytes = scale_bytes(wst, scale, over);
    int64_t rc0 = m->layer[first].stash_recompute_bytes;
    int64_t rc = rc0 >= 0 ? rc0 : m->cut_bytes[first];
    add_bytes(&rc, rc_rest, over);
    st->stash_recompute_bytes = scale_bytes(rc, scale, over);
}

/* Fills the times of st that follow from its F, I and W: B = I + W, and both backwards under
 * recomputation (the forward runs again first, less rc_skip_s: the part of it that recomputation
 * does not run again). */
static void stage_times_derive(cost_stage *st, double rc_skip_s) {
    st->rerun_s = st->f_s - rc_skip_s;
    st->b_s = st->i_s + st->w_s;
    st->b_recompute_s = st->b_s + st->rerun_s;
    st->i_recompute_s = st->i_s + st->rerun_s;
}

/* Fills st for layers [first, end); returns PL_OK or PL_EINPUT (bad range or unknown time). */
int cost_stage_eval(const cost_model *m, int first, int end, const cost_hw *hw, const cost_opts *o,
                    cost_stage *st, pl_err *e) {
    if (first < 0 || end > m->n || first >= end)
        return pl_errf(e, PL_EINPUT, "stage layers [%d, %d) are not a non-empty range of [0, %d)", first, end, m->n);
    memset(st, 0, sizeof *st);
    st->first = first;
    st->end = end;
    int64_t param = 0, stash = 0, wst = 0, rc_rest = 0;
    int over = 0;
    double skip = 0;
    for (int i = first; i < end; i++) {
        double f = 0, ib = 0, w = 0;
        if (cost_layer_times(m, i, hw, o, &f, &ib, &w, e) != PL_OK) return PL_EINPUT;
        st->f_s += f;
        st->i_s += ib;
        st->w_s += w;
        st->i_last_s = ib;
        const cost_layer *l = &m->layer[i];
        skip += l->rc_skip_s;
        add_bytes(&param, l->param_bytes, &over);
        add_bytes(&stash, l->stash_bytes, &over);
        add_bytes(&wst, layer_w_stash(l, o), &over);
        if (i > first && l->stash_recompute_bytes > 0) add_bytes(&rc_rest, l->stash_recompute_bytes, &over);
    }
    stage_times_derive(st, skip);
    stage_bytes(m, first, end, param, stash, wst, rc_rest, mb_scale(m, o), st, &over);
    if (over) return bytes_overflow(m, first, end, "bytes (parameters, activations at this microbatch size) are", e);
    double t[STAGE_TIMES];
    stage_times(st, t);
    for (size_t k = 0; k < STAGE_TIMES; k++)
        if (cost_time_check(t[k], stage_time_label[k], e, "model %s, the stage of layers %d-%d: its time", m->name, first,
                            end - 1) != PL_OK)
            return PL_EINPUT;
    return PL_OK;
}

/* Frees the prefix arrays. */
void cost_prefix_free(cost_prefix *p) {
    free(p->f_s);
    free(p->i_s);
    free(p->w_s);
    free(p->param_bytes);
    free(p->stash_bytes);
    free(p->w_stash_bytes);
    free(p->rc_bytes);
    free(p->rc_skip_s);
    memset(p, 0, sizeof *p);
}

/* Builds prefix sums of per-layer times and bytes; returns PL_OK or an error (unknown time). */
int cost_prefix_init(cost_prefix *p, const cost_model *m, const cost_hw *hw, const cost_opts *o, pl_err *e) {
    memset(p, 0, sizeof *p);
    size_t n1 = (size_t)m->n + 1;
    p->n = m->n;
    p->m = m;
    p->o = *o;
    p->f_s = pl_calloc(n1, sizeof *p->f_s);
    p->i_s = pl_calloc(n1, sizeof *p->i_s);
    p->w_s = pl_calloc(n1, sizeof *p->w_s);
    p->param_bytes = pl_calloc(n1, sizeof *p->param_bytes);
    p->stash_bytes = pl_calloc(n1, sizeof *p->stash_bytes);
    p->w_stash_bytes = pl_calloc(n1, sizeof *p->w_stash_bytes);
    p->rc_bytes = pl_calloc(n1, sizeof *p->rc_bytes);
    p->rc_skip_s = pl_calloc(n1, sizeof *p->rc_skip_s);
    if (!p->f_s || !p->i_s || !p->w_s || !p->param_bytes || !p->stash_bytes || !p->w_stash_bytes || !p->rc_bytes ||
        !p->rc_skip_s) {
        cost_prefix_free(p);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    int64_t maxcut = 0;
    for (int i = 0; i < m->n; i++) {
        double f = 0, ib = 0, w = 0;
        if (cost_layer_times(m, i, hw, o, &f, &ib, &w, e) != PL_OK) {
            cost_prefix_free(p);
            return PL_EINPUT;
        }
        const cost_layer *l = &m->layer[i];
        p->f_s[i + 1] = p->f_s[i] + f;
        p->i_s[i + 1] = p->i_s[i] + ib;
        p->w_s[i + 1] = p->w_s[i] + w;
        int over = 0;
        p->param_bytes[i + 1] = p->param_bytes[i];
        p->stash_bytes[i + 1] = p->stash_bytes[i];
        p->w_stash_bytes[i + 1] = p->w_stash_bytes[i];
        p->rc_bytes[i + 1] = p->rc_bytes[i];
        add_bytes(&p->param_bytes[i + 1], l->param_bytes, &over);
        add_bytes(&p->stash_bytes[i + 1], l->stash_bytes, &over);
        add_bytes(&p->w_stash_bytes[i + 1], layer_w_stash(l, o), &over);
        add_bytes(&p->rc_bytes[i + 1], l->stash_recompute_bytes > 0 ? l->stash_recompute_bytes : 0, &over);
        p->rc_skip_s[i + 1] = p->rc_skip_s[i] + l->rc_skip_s;
        /* a range's scaled bytes are at most the whole's, and a cut's at most the largest cut's
         * plus the recomputation checkpoints (stage_bytes): checked once here */
        double scale = mb_scale(m, o);
        if (m->cut_bytes[i] > maxcut) maxcut = m->cut_bytes[i];
        if (m->cut_bytes[i + 1] > maxcut) maxcut = m->cut_bytes[i + 1];
        int64_t cut = maxcut;
        add_bytes(&cut, p->rc_bytes[i + 1], &over);
        (void)scale_bytes(cut, scale, &over);
        (void)scale_bytes(p->stash_bytes[i + 1], scale, &over);
        (void)scale_bytes(p->w_stash_bytes[i + 1], scale, &over);
        if (over) {
            cost_prefix_free(p);
            return bytes_overflow(m, 0, i + 1, "bytes (parameters, activations at this microbatch size) are", e);
        }
    }
    const double t[] = {p->f_s[m->n], p->i_s[m->n], p->w_s[m->n]};
    for (int k = 0; k < 3; k++)
        if (cost_time_check(t[k], stage_time_label[k], e, "model %s: the time of all its layers", m->name) != PL_OK) {
            cost_prefix_free(p);
            return PL_EINPUT;
        }
    return PL_OK;
}

/* Fills st for [first, end) from the prefix sums in O(1); the range must be valid. */
void cost_prefix_stage(const cost_prefix *p, int first, int end, cost_stage *st) {
    memset(st, 0, sizeof *st);
    st->first = first;
    st->end = end;
    st->f_s = p->f_s[end] - p->f_s[first];
    st->i_s = p->i_s[end] - p->i_s[first];
    st->w_s = p->w_s[end] - p->w_s[first];
    st->i_last_s = p->i_s[end] - p->i_s[end - 1];
    stage_times_derive(st, p->rc_skip_s[end] - p->rc_skip_s[first]);
    int over = 0; /* cost_prefix_init checked the sums and their scaling */
    stage_bytes(p->m, first, end, p->param_bytes[end] - p->param_bytes[first],
                p->stash_bytes[end] - p->stash_bytes[first], p->w_stash_bytes[end] - p->w_stash_bytes[first],
                p->rc_bytes[end] - p->rc_bytes[first + 1], mb_scale(p->m, &p->o), st, &over);
}

/* ---------------------------------------------------------------- optimizer step
 * (link and collective costs live in cost_comm.c) */

/* Returns the memory-bound optimizer step: (2 weights + gradients + 2 optimizer state) bytes
 * streamed at the achievable bandwidth (cost_stream_s); 0 when the bandwidth is unknown. */
double cost_step_s(const cost_hw *hw, const cost_opts *o, const cost_model *m, int64_t param_bytes) {
    if (!hw) return 0;
    double params = (double)param_bytes / dtype_bytes(m);
    double bytes = 2.0 * (double)param_bytes + params * o->grad_bytes_per_param +
                   2.0 * params * o->optimizer_bytes_per_param;
    return cost_stream_s(hw, bytes);
}

/* ---------------------------------------------------------------- memory */

/* Fills *out with the memory of one stage holding `inflight` microbatches (see cost.h for the
 * rules); returns PL_OK, or PL_EINPUT when a part does not count in 64 bits. */
int cost_stage_memory(const cost_stage *st, const cost_model *m, const cost_opts *o, sched_weights weights,
                      sched_recompute rc, int inflight, cost_memory *out, pl_err *e) {
    cost_memory r = {0};
    int over = 0;
    if (inflight < 0) inflight = 0;
    double params = (double)st->param_bytes / dtype_bytes(m);
    r.versions = weights == SCHED_WEIGHTS_STASH ? (inflight > 1 ? inflight : 1)
                 : weights == SCHED_WEIGHTS_2BW ? (inflight > 1 ? 2 : 1)
                                                : 1;
    if (__builtin_mul_overflow(st->param_bytes, (int64_t)r.versions, &r.weights_bytes)) over = 1;
    r.grad_bytes = bytes_of(params * o->grad_bytes_per_param, &over);
    r.optimizer_bytes = bytes_of(params * o->optimizer_bytes_per_param, &over);
    /* Full recomputation: k microbatches in flight keep their checkpoints, and the one whose
     * backward runs holds its rebuilt full stash instead of its checkpoint: (k - 1) x
     * checkpoint + one full stash. (Split backward can hold several rebuilt stashes from I to
     * W; this formula then is a lower bound.) */
    if (rc == SCHED_RECOMPUTE_FULL) {
        if (inflight > 0 && !__builtin_mul_overflow((int64_t)(inflight - 1), st->stash_recompute_bytes, &r.activation_bytes))
            add_bytes(&r.activation_bytes, st->stash_bytes, &over);
        else if (inflight > 0)
            over = 1;
    } else if (__builtin_mul_overflow((int64_t)inflight, st->stash_bytes, &r.activation_bytes)) {
        over = 1;
    }
    r.total_bytes = r.weights_bytes;
    add_bytes(&r.total_bytes, r.grad_bytes, &over);
    add_bytes(&r.total_bytes, r.optimizer_bytes, &over);
    add_bytes(&r.total_bytes, r.activation_bytes, &over);
    if (over) {
        char what[160];
        snprintf(what, sizeof what, "memory with %d microbatches in flight (weights, gradients, optimizer state, "
                 "activations) is", inflight);
        return bytes_overflow(m, st->first, st->end, what, e);
    }
    *out = r;
    return PL_OK;
}

/* Returns 1 when replica j of its stage runs action a (sched_replica_of over the stage's reps[]
 * replicas: microbatch k on replica k mod n, an action without one on every replica); every
 * action is replica 0's when reps is NULL. */
static int replica_runs(const sched *s, const int *reps, const sched_action *a, int j) {
    int n = reps && a->stage >= 0 && a->stage < s->stages ? reps[a->stage] : 1;
    int k = sched_replica_of(a, n);
    return k >= 0 ? k == j : j < -k;
}

/* The peak of one rank's walk (rank_peak): the largest sum of weight versions and activations
 * at once, its two parts at that moment, and the most versions held at once. */
typedef struct rank_walk {
    int64_t weights, activations, total;
    int versions;
} rank_walk;

/* Walks replica j of rank k (the whole rank: reps NULL, j 0) over its actions in order: each
 * compute half applies cost_mem_delta at its start, then at its end, where a backward's end also
 * releases its weight version; a STEP may write a new version (sched_versions, one per stage;
 * a flush schedule holds one throughout). Fills *w with the peak. Returns PL_OK, or PL_ENOMEM;
 * sets *over when a count passes 64 bits. */
static int rank_peak(const sched *s, const cost_stage *stages, int k, const int *reps, int j, rank_walk *w, int *over) {
    int rc = s->recompute == SCHED_RECOMPUTE_FULL, track = s->weights != SCHED_WEIGHTS_FLUSH;
    int64_t act = 0, wts = 0;
    int held = 0;
    sched_versions *v = track ? pl_calloc((size_t)s->stages, sizeof *v) : NULL;
    if (track && !v) return PL_ENOMEM;
    for (int st = 0; st < s->stages; st++) {
        if (s->stage_rank[st] != k) continue;
        if (track && sched_versions_init(&v[st], sched_total_microbatches(s)) != PL_OK) {
            for (int q = 0; q < st; q++) sched_versions_free(&v[q]);
            free(v);
            return PL_ENOMEM;
        }
        add_bytes(&wts, stages[st].param_bytes, over);
        held++;
    }
    memset(w, 0, sizeof *w);
    w->weights = w->total = wts;
    w->versions = held;
    const sched_rank *rk = &s->rank[k];
    for (size_t i = 0; i < rk->n; i++) {
        const sched_action *a = &rk->acts[i];
        if (!replica_runs(s, reps, a, j)) continue;
        for (int half = 0; half < (a->kind == SCHED_OVERLAP ? 2 : 1); half++) {
            sched_kind kind = a->kind == SCHED_OVERLAP ? (half ? a->kind2 : SCHED_F) : a->kind;
            int st = half ? a->stage2 : a->stage;
            int64_t mb = half ? a->mb2 : a->mb;
            if (st < 0 || st >= s->stages) continue;
            const cost_stage *c = &stages[st];
            int dv = 0;
            if (track && kind == SCHED_F) sched_versions_forward(&v[st], mb);
            if (track && kind == SCHED_STEP) dv = sched_versions_step(&v[st]);
            cost_mem_sizes z = cost_mem_sizes_make(c->stash_bytes, c->w_stash_bytes, c->stash_recompute_bytes);
            for (int at_end = 0; at_end < 2; at_end++) {
                add_bytes(&act, cost_mem_delta(&z, kind, at_end, rc), over);
                if (at_end && track && (kind == SCHED_B || kind == SCHED_W)) dv = sched_versions_backward(&v[st], mb);
                if (dv) {
                    add_bytes(&wts, dv * c->param_bytes, over);
                    held += dv;
                    dv = 0;
                }
                int64_t tot = wts;
                add_bytes(&tot, act, over);
                if (tot > w->total) {
                    w->total = tot;
                    w->weights = wts;
                    w->activations = act;
                }
                if (held > w->versions) w->versions = held;
            }
        }
    }
    for (int st = 0; track && st < s->stages; st++)
        if (s->stage_rank[st] == k) sched_versions_free(&v[st]);
    free(v);
    return PL_OK;
}

/* Fills *out with the memory of replica j of rank k (see cost_schedule_memory_replicas): its
 * stages' gradients and optimizer state, and the peak of its weight versions and activations
 * (rank_peak). Returns PL_OK, PL_ENOMEM, or PL_EINPUT when it does not count in 64 bits. */
static int replica_memory(const sched *s, const cost_stage *stages, const cost_model *m, const cost_opts *o, int k,
                          const int *reps, int j, cost_memory *out, pl_err *e) {
    cost_memory acc = {0};
    int over = 0;
    for (int st = 0; st < s->stages; st++) {
        if (s->stage_rank[st] != k) continue;
        cost_memory sm = {0}; /* set on every path, which -O3's inliner cannot tell */
        if (cost_stage_memory(&stages[st], m, o, SCHED_WEIGHTS_FLUSH, s->recompute, 0, &sm, e) != PL_OK) return PL_EINPUT;
        add_bytes(&acc.grad_bytes, sm.grad_bytes, &over);
        add_bytes(&acc.optimizer_bytes, sm.optimizer_bytes, &over);
    }
    rank_walk w;
    if (rank_peak(s, stages, k, reps, j, &w, &over) != PL_OK) return pl_errf(e, PL_ENOMEM, "out of memory");
    acc.weights_bytes = w.weights;
    acc.activation_bytes = w.activations;
    acc.versions = w.versions;
    acc.total_bytes = w.total;
    add_bytes(&acc.total_bytes, acc.grad_bytes, &over);
    add_bytes(&acc.total_bytes, acc.optimizer_bytes, &over);
    if (over)
        return pl_errf(e, PL_EINPUT, "model %s: the memory of rank %d (its stages' weights, gradients, optimizer "
                       "state and activations) is too large to count in 64 bits", m->name, k);
    *out = acc;
    return PL_OK;
}

/* Fills out[ranks] with the memory of each rank under schedule s, each replica of a replicated
 * rank on its own share of the microbatches (see cost.h); returns PL_OK or the dry run's error. */
int cost_schedule_memory_replicas(const sched *s, const cost_stage *stages, const int *replicas, const cost_model *m,
                                  const cost_opts *o, cost_memory *out, pl_err *e) {
    sched_dryrun_result r;
    memset(&r, 0, sizeof r);
    if (sched_dryrun(s, NULL, &r, e) != PL_OK) return e ? e->code : PL_EINPUT;
    for (int k = 0; k < s->ranks; k++) {
        int w = 1; /* the rank's replicas: its stages' most */
        for (int st = 0; replicas && st < s->stages; st++)
            if (s->stage_rank[st] == k && replicas[st] > w) w = replicas[st];
        for (int j = 0; j < w; j++) {
            cost_memory x;
            int rc = replica_memory(s, stages, m, o, k, w > 1 ? replicas : NULL, j, &x, e);
            if (rc != PL_OK) {
                sched_dryrun_free(&r, s->ranks);
                return rc;
            }
            if (j == 0 || x.total_bytes > out[k].total_bytes) out[k] = x;
        }
    }
    sched_dryrun_free(&r, s->ranks);
    return PL_OK;
}

/* Fills out[ranks] with the memory of each rank under schedule s, no stage replicated. */
int cost_schedule_memory(const sched *s, const cost_stage *stages, const cost_model *m, const cost_opts *o,
                         cost_memory *out, pl_err *e) {
    return cost_schedule_memory_replicas(s, stages, NULL, m, o, out, e);
}

/* ---------------------------------------------------------------- partitions */

/* Returns a partition of `stages` stages with zero bounds and one replica each, or NULL. */
cost_partition *cost_partition_new(int stages) {
    if (stages < 1 || stages > COST_MAX_LAYERS) return NULL;
    cost_partition *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->stages = stages;
    p->bound = pl_calloc((size_t)stages + 1, sizeof *p->bound);
    p->replicas = pl_calloc((size_t)stages, sizeof *p->replicas);
    if (!p->bound || !p->replicas) {
        cost_partition_free(p);
        return NULL;
    }
    for (int s = 0; s < stages; s++) p->replicas[s] = 1;
    return p;
}

/* Frees a partition; NULL is fine. */
void cost_partition_free(cost_partition *p) {
    if (!p) return;
    free(p->bound);
    free(p->replicas);
    free(p->pred);
    free(p);
}

cost_partition_pred *cost_partition_attach_pred(cost_partition *p) {
    cost_partition_pred *d = calloc(1, sizeof *d + (size_t)p->stages * sizeof d->stage[0]);
    if (!d) return NULL;
    free(p->pred);
    p->pred = d;
    return d;
}

int cost_partition_layers(const cost_partition *p) { return p->bound[p->stages]; }

int cost_partition_workers(const cost_partition *p) {
    int w = 0;
    for (int s = 0; s < p->stages; s++) w += p->replicas[s];
    return w;
}

/* Returns PL_OK when bounds go 0 = b0 < b1 < ... < b_stages = n and replicas are >= 1. */
int cost_partition_check(const cost_partition *p, int n, pl_err *e) {
    if (p->stages < 1) return pl_errf(e, PL_EINPUT, "a partition needs at least one stage");
    if (p->bound[0] != 0) return pl_errf(e, PL_EINPUT, "partition: the first stage must start at layer 0");
    if (p->bound[p->stages] != n)
        return pl_errf(e, PL_EINPUT, "partition: the last stage must end at layer %d (the model has %d layers), "
                       "not %d", n, n, p->bound[p->stages]);
    for (int s = 0; s < p->stages; s++) {
        if (p->bound[s + 1] <= p->bound[s])
            return pl_errf(e, PL_EINPUT, "partition: stage %d is empty or reversed ([%d, %d))", s, p->bound[s],
                           p->bound[s + 1]);
        if (p->replicas && p->replicas[s] < 1)
            return pl_errf(e, PL_EINPUT, "partition: stage %d has %d replicas", s, p->replicas[s]);
    }
    return PL_OK;
}

/* Returns cost_partition_new(stages), or NULL with e saying it is out of memory. */
static cost_partition *partition_alloc(int stages, pl_err *e) {
    cost_partition *p = cost_partition_new(stages);
    if (!p) pl_errf(e, PL_ENOMEM, "out of memory");
    return p;
}

/* Returns an even split: n / stages layers each, the first n % stages stages one more. */
cost_partition *cost_partition_even(int n, int stages, pl_err *e) {
    if (stages < 1 || stages > n) {
        pl_errf(e, PL_EINPUT, "cannot split %d layers into %d non-empty stages", n, stages);
        return NULL;
    }
    cost_partition *p = partition_alloc(stages, e);
    if (!p) return NULL;
    int q = n / stages, r = n % stages;
    for (int s = 0; s < stages; s++) p->bound[s + 1] = p->bound[s] + q + (s < r ? 1 : 0);
    return p;
}

/* Parses "0,4,8,12" (bounds) or "=4,4,4" (sizes) against n layers; NULL and e on error. */
cost_partition *cost_partition_parse(const char *text, int n, pl_err *e) {
    int sizes = text[0] == '=';
    const char *s = text + sizes;
    int count = 1;
    for (const char *c = s; *c; c++) count += *c == ',';
    int stages = sizes ? count : count - 1;
    if (stages < 1 || stages > COST_MAX_LAYERS) {
        pl_errf(e, PL_EINPUT, "partition '%s': give bounds 0,..,%d or sizes =a,b,..", text, n);
        return NULL;
    }
    cost_partition *p = partition_alloc(stages, e);
    if (!p) return NULL;
    int k = 0;
    while (k < count) {
        size_t len = strcspn(s, ",");
        char buf[32];
        long v;
        if (len == 0 || len >= sizeof buf) goto bad;
        memcpy(buf, s, len);
        buf[len] = 0;
        if (pl_parse_long(buf, 0, COST_MAX_LAYERS, &v) != 0) goto bad;
        if (sizes)
            p->bound[k + 1] = p->bound[k] + (int)v;
        else
            p->bound[k] = (int)v;
        k++;
        s += len;
        if (*s == ',') s++;
    }
    if (cost_partition_check(p, n, e) != PL_OK) {
        pl_err_prefix(e, "partition '%s': ", text);
        cost_partition_free(p);
        return NULL;
    }
    return p;
bad:
    pl_errf(e, PL_EINPUT, "partition '%s': entry %d is not a whole number from 0 to %d", text, k + 1, COST_MAX_LAYERS);
    cost_partition_free(p);
    return NULL;
}

/* Fills st[stages] for a checked partition; returns PL_OK or the first stage's error. */
int cost_partition_eval(const cost_partition *p, const cost_model *m, const cost_hw *hw, const cost_opts *o,
                        cost_stage *st, pl_err *e) {
    if (cost_partition_check(p, m->n, e) != PL_OK) return PL_EINPUT;
    for (int s = 0; s < p->stages; s++)
        if (cost_stage_eval(m, p->bound[s], p->bound[s + 1], hw, o, &st[s], e) != PL_OK) return PL_EINPUT;
    return PL_OK;
}
