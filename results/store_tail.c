/* store_tail.c: each compute class's typical action against its tail (store_tail_note). A pass
 * sums its actions, so what it takes is their mean; a profile's median over rounds prices the
 * typical action. Set apart, the two say whether a class's error is its typical time (the cost
 * model) or the interruptions now and then that a long pass always holds and a profile round at
 * its median does not (docs/validate_cpu.md, "Typical and tail"). */
#include "store_int.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Appends one group's ratios to class c; returns PL_OK or PL_ENOMEM (c unchanged). */
static int tail_push(store_tail_class *c, double typical, double mean, double tail, pl_err *e) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        double *t = pl_reallocarray(c->typical, cap, sizeof *t), *m = t ? pl_reallocarray(c->mean, cap, sizeof *m) : NULL;
        if (t) c->typical = t;
        if (m) c->mean = m;
        double *a = m ? pl_reallocarray(c->tail, cap, sizeof *a) : NULL;
        if (!a) return pl_errf(e, PL_ENOMEM, "out of memory");
        c->tail = a;
        c->cap = cap;
    }
    c->typical[c->n] = typical;
    c->mean[c->n] = mean;
    c->tail[c->n] = tail;
    c->n++;
    return PL_OK;
}

/* Returns `from`, where rank r's ops in ops[0 .. n) start when every earlier rank's ended
 * before it, and sets *cnt to how many follow (0 when r has none); -1 when an earlier rank's op
 * is still there (not in rank order). */
static long rank_slice(const store_op *ops, size_t n, size_t from, int r, size_t *cnt) {
    size_t i = from;
    if (i < n && ops[i].rank < r) return -1;
    *cnt = 0;
    while (i + *cnt < n && ops[i + *cnt].rank == r) (*cnt)++;
    return (long)i;
}

int store_each_rank(const store_op *pred, size_t np, const store_op *meas, size_t nm, int ranks, int passes,
                    store_rank_fn *fn, void *ctx, pl_err *e) {
    if (nm != (size_t)passes * np)
        return pl_errf(e, PL_EINPUT, "the measured timeline has %zu actions, not %d passes of the predicted %zu", nm, passes, np);
    size_t s0 = 0, m0 = 0;
    for (int r = 0; r < ranks; r++) {
        size_t n = 0, nmr = 0;
        long ps = rank_slice(pred, np, s0, r, &n), ms = rank_slice(meas, nm, m0, r, &nmr);
        if (ps < 0 || ms < 0 || nmr != (size_t)passes * n)
            return pl_errf(e, PL_EINPUT, "rank %d's actions are out of rank order, or its measured ones are not %d passes of "
                           "its predicted ones", r, passes);
        s0 += n;
        m0 += nmr;
        if (n == 0) continue;
        int rc = fn(r, pred + ps, n, meas + ms, ctx, e);
        if (rc != PL_OK) return rc;
    }
    if (s0 != np || m0 != nm) return pl_errf(e, PL_EINPUT, "a timeline names a rank outside 0 .. %d", ranks - 1);
    return PL_OK;
}

/* One group of store_tail_note: a class's ratios on one rank. */
typedef struct tail_group {
    int k;
    double typical, mean, tail;
} tail_group;

/* store_tail_note's sums over one pair, into acc once every rank is checked. */
typedef struct tail_pair {
    int passes;
    double *d;                    /* [passes n] room for a rank's measured durations */
    double lean[STORE_OVERLAP_KINDS], meas_all[STORE_OVERLAP_KINDS + 1];
    size_t groups;
    tail_group *g;                /* [ranks STORE_OVERLAP_KINDS] */
    size_t ng;
} tail_pair;

/* store_rank_fn: rank r's groups and lean. */
static int tail_rank(int r, const store_op *pred, size_t n, const store_op *meas, void *ctx, pl_err *e) {
    (void)r;
    (void)e;
    tail_pair *t = ctx;
    size_t nmr = (size_t)t->passes * n;
    double *d = t->d, pred_s[STORE_OVERLAP_KINDS] = {0}, meas_s[STORE_OVERLAP_KINDS] = {0}, comp = 0;
    for (size_t i = 0; i < nmr; i++)
        if (store_class_of(meas[i].kind) >= 0 || store_kind_is_compute(meas[i].kind ? meas[i].kind : ""))
            comp += meas[i].end_s - meas[i].start_s;
    comp /= t->passes;
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++) {
        size_t pc = 0, mc = 0;
        for (size_t i = 0; i < n; i++)
            if (store_class_of(pred[i].kind) == k) {
                pred_s[k] += pred[i].end_s - pred[i].start_s;
                pc++;
            }
        for (size_t i = 0; i < nmr; i++)
            if (store_class_of(meas[i].kind) == k) d[mc++] = meas[i].end_s - meas[i].start_s;
        for (size_t i = 0; i < mc; i++) meas_s[k] += d[i];
        meas_s[k] /= t->passes;
        t->meas_all[k] += meas_s[k];
        if (pc == 0 || mc < 2) continue;
        gsl_sort(d, 1, mc);
        double p = pred_s[k] / (double)pc, med = gsl_stats_median_from_sorted_data(d, 1, mc), a = gsl_stats_mean(d, 1, mc);
        if (!(med > 0) || !(a > 0)) continue;
        t->g[t->ng++] = (tail_group){k, p / med - 1, p / a - 1, a / med - 1};
    }
    t->meas_all[STORE_OVERLAP_KINDS] += comp;
    if (comp > 0) {
        for (int k = 0; k < STORE_OVERLAP_KINDS; k++) t->lean[k] += (pred_s[k] - meas_s[k]) / comp;
        t->groups++;
    }
    return PL_OK;
}

int store_tail_note(const store_op *pred, size_t np, const store_op *meas, size_t nm, int ranks, int passes,
                    store_tail *acc, pl_err *e) {
    if (ranks < 1 || passes < 1 || np == 0) return PL_OK;
    tail_pair t = {.passes = passes};
    t.d = pl_calloc(nm > 0 ? nm : 1, sizeof *t.d);
    t.g = pl_calloc((size_t)ranks * STORE_OVERLAP_KINDS, sizeof *t.g);
    int rc = t.d && t.g ? store_each_rank(pred, np, meas, nm, ranks, passes, tail_rank, &t, e)
                        : pl_errf(e, PL_ENOMEM, "out of memory");
    /* all checked: into acc */
    for (size_t i = 0; rc == PL_OK && i < t.ng; i++)
        rc = tail_push(&acc->c[t.g[i].k], t.g[i].typical, t.g[i].mean, t.g[i].tail, e);
    if (rc == PL_OK) {
        for (int k = 0; k < STORE_OVERLAP_KINDS; k++) acc->c[k].lean_sum += t.lean[k];
        for (int k = 0; k <= STORE_OVERLAP_KINDS; k++) acc->meas_s[k] += t.meas_all[k];
        acc->groups += t.groups;
    }
    free(t.d);
    free(t.g);
    return rc;
}

void store_tail_medians(store_tail_class *c, double m[3]) {
    double *v[3] = {c->typical, c->mean, c->tail};
    for (int j = 0; j < 3; j++) {
        m[j] = NAN;
        if (c->n == 0) continue;
        gsl_sort(v[j], 1, c->n);
        m[j] = gsl_stats_median_from_sorted_data(v[j], 1, c->n);
    }
}

void store_tail_free(store_tail *t) {
    if (!t) return;
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++) {
        free(t->c[k].typical);
        free(t->c[k].mean);
        free(t->c[k].tail);
    }
    memset(t, 0, sizeof *t);
}
