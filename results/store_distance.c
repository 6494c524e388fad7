/* store_distance.c: each backward's error against its reuse distance (store_distance_note): how
 * many compute actions its rank ran between the microbatch's forward on the stage and the
 * backward. A backward reads the activations its forward stashed; if its cost grew with the
 * distance (the stash falling out of the caches), a prediction that prices every backward at
 * the profile's one distance would err by distance, short on far backwards and long on near ones.
 * Matching each predicted action to the same action in every measured pass sets the distance
 * apart from the schedule kind, the block and the host (docs/validate_cpu.md, "Reuse distance
 * in the runs"). */
#include "store_int.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const store_distance_classes[STORE_DISTANCE_CLASSES] = {"B", "I"};
const char *const store_beside_names[STORE_BESIDE_KINDS] = {"alone", "F", "backward", "mixed"};

int store_distance_bucket(long d) {
    int b = 0;
    while (b < STORE_DISTANCE_BUCKETS - 1 && d >= store_distance_bucket_from(b + 1)) b++;
    return b;
}

long store_distance_bucket_from(int b) {
    return b <= 0 ? 0 : 1L << (b - 1);
}

/* Returns the class of a backward kind in store_distance_classes, or -1. */
static int distance_class(const char *kind) {
    for (int c = 0; kind && c < STORE_DISTANCE_CLASSES; c++)
        if (!strcmp(kind, store_distance_classes[c])) return c;
    return -1;
}

/* Appends err to cell x; returns PL_OK or PL_ENOMEM (x unchanged). */
static int cell_push(store_distance_cell *x, double err, pl_err *e) {
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 16;
        double *v = pl_reallocarray(x->err, cap, sizeof *v);
        if (!v) return pl_errf(e, PL_ENOMEM, "out of memory");
        x->err = v;
        x->cap = cap;
    }
    x->err[x->n++] = err;
    return PL_OK;
}

/* One backward of a pair, kept until the whole pair is checked: its class, distance bucket, what
 * ran beside it (STORE_BESIDE_*) and whether its distance is 0. */
typedef struct dist_item {
    int c, b, beside, near;
    double err, meas_s;
} dist_item;

/* Returns 1 when two ops name the same action (kind, stage, microbatch). */
static int same_action(const store_op *a, const store_op *b) {
    return a->stage == b->stage && a->mb == b->mb && a->kind && b->kind && !strcmp(a->kind, b->kind);
}

/* store_distance_note's backwards of one pair, kept until every rank is checked. */
typedef struct dist_pair {
    int passes;
    double *d;                    /* [passes] one action's measured durations */
    dist_item *it;                /* [np] */
    size_t ni;
    const store_op *meas;         /* [nm] every rank's measured passes, ordered by rank */
    size_t nm;
    int ranks;
    size_t *lo, *hi;              /* [ranks] each rank's first and one past its last op in meas */
    int *folded;                  /* [ranks] 1 where a rank's ops overlap one another: a replicated
                                   * stage's replicas, stored as one rank */
    struct beside_iv *iv;         /* [nm] room for one rank's clipped spans (a folded rank's) */
    struct beside_ix *ix;         /* [nm] a folded rank's ops by start, at its slice's places */
    double *longest;              /* [ranks] a folded rank's longest op */
} dist_pair;

/* One op of a folded rank, for its ops sorted by start: the start and the op's index in meas. */
typedef struct beside_ix {
    double start;
    size_t j;
} beside_ix;

static int ix_cmp(const void *x, const void *y) {
    const beside_ix *p = x, *q = y;
    return p->start < q->start ? -1 : p->start > q->start;
}

/* One clipped span of another rank's compute: [a, b), forward (1) or backward (0). */
typedef struct beside_iv {
    double a, b;
    int fwd;
} beside_iv;

static int iv_cmp(const void *x, const void *y) {
    const beside_iv *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

/* Returns the length of the union of the spans of iv[0 .. n) (sorted by start) whose kind is
 * `fwd` (0 or 1), or of all of them (fwd < 0). */
static double iv_union(const beside_iv *iv, size_t n, int fwd) {
    double sum = 0, a = 0, b = 0;
    int open = 0;
    for (size_t i = 0; i < n; i++) {
        if (fwd >= 0 && iv[i].fwd != fwd) continue;
        if (open && iv[i].a <= b) {
            if (iv[i].b > b) b = iv[i].b;
            continue;
        }
        if (open) sum += b - a;
        a = iv[i].a;
        b = iv[i].b;
        open = 1;
    }
    return open ? sum + b - a : sum;
}

/* Returns 1 for the kinds that count as a backward beside another rank's action. */
static int is_backward(const char *kind) {
    return kind && (!strcmp(kind, "B") || !strcmp(kind, "I") || !strcmp(kind, "W") || !strcmp(kind, "OVERLAP"));
}

/* Adds to *f and *b the shares of [s0, s1) in which the ranks other than r ran forwards and
 * backwards (their overlap summed, over the span times the other ranks). A rank's ops follow
 * one another in time (its list, pass after pass), so each rank's search starts at its first op
 * that ends after s0 (a binary search) and stops at the first that starts at s1 or later. A
 * folded rank's (replicas' ops that overlap) counts the union of its spans, split between
 * forwards and backwards as their own unions are, so that it computes for at most the span. */
static void beside_shares(const dist_pair *t, int r, double s0, double s1, double *f, double *b) {
    if (!(s1 > s0) || t->ranks < 2) return;
    double span = (s1 - s0) * (t->ranks - 1);
    for (int q = 0; q < t->ranks; q++) {
        if (q == r) continue;
        if (t->folded[q]) {
            /* its ops by start: those that can overlap [s0, s1) start in [s0 - longest, s1) */
            size_t n = 0, a = t->lo[q], z = t->hi[q];
            while (a < z) {
                size_t mid = a + (z - a) / 2;
                if (t->ix[mid].start >= s0 - t->longest[q]) z = mid;
                else a = mid + 1;
            }
            for (size_t i = a; i < t->hi[q] && t->ix[i].start < s1; i++) {
                const store_op *o = &t->meas[t->ix[i].j];
                double lo = o->start_s > s0 ? o->start_s : s0, hi = o->end_s < s1 ? o->end_s : s1;
                int fwd = o->kind && !strcmp(o->kind, "F");
                if (hi > lo && (fwd || is_backward(o->kind))) t->iv[n++] = (beside_iv){lo, hi, fwd};
            }
            qsort(t->iv, n, sizeof *t->iv, iv_cmp);
            double all = iv_union(t->iv, n, -1), uf = iv_union(t->iv, n, 1), ub = iv_union(t->iv, n, 0);
            if (uf + ub > 0) {
                *f += all * uf / (uf + ub) / span;
                *b += all * ub / (uf + ub) / span;
            }
            continue;
        }
        size_t a = t->lo[q], z = t->hi[q];
        while (a < z) {
            size_t mid = a + (z - a) / 2;
            if (t->meas[mid].end_s > s0) z = mid;
            else a = mid + 1;
        }
        for (size_t j = a; j < t->hi[q] && t->meas[j].start_s < s1; j++) {
            const store_op *o = &t->meas[j];
            double lo = o->start_s > s0 ? o->start_s : s0, hi = o->end_s < s1 ? o->end_s : s1;
            if (!o->kind || !(hi > lo)) continue;
            if (!strcmp(o->kind, "F")) *f += (hi - lo) / span;
            else if (is_backward(o->kind)) *b += (hi - lo) / span;
        }
    }
}

/* Returns the STORE_BESIDE_* of a backward whose span the other ranks spent a share f in
 * forwards and b in backwards. */
static int beside_kind(double f, double b) {
    if (f + b < 0.25) return STORE_BESIDE_ALONE;
    if (f >= 0.75 * (f + b)) return STORE_BESIDE_F;
    if (b >= 0.75 * (f + b)) return STORE_BESIDE_BACKWARD;
    return STORE_BESIDE_MIXED;
}

/* store_rank_fn: rank r's backwards, pred[0 .. n) its predicted list, meas its measured passes. */
static int dist_rank(int r, const store_op *pred, size_t n, const store_op *meas, void *ctx, pl_err *e) {
    dist_pair *t = ctx;
    for (size_t i = 0; i < n; i++) {
        for (int p = 0; p < t->passes; p++)
            if (!same_action(&pred[i], &meas[(size_t)p * n + i]))
                return pl_errf(e, PL_EINPUT, "rank %d's action %zu of measured pass %d is not the predicted one", r, i, p + 1);
        int c = distance_class(pred[i].kind);
        if (c < 0) continue;
        /* the latest forward of the same microbatch on the same stage, earlier in the list */
        long between = -1, computes = 0;
        for (size_t j = i; j-- > 0;) {
            const store_op *f = &pred[j];
            if (f->kind && !strcmp(f->kind, "F") && f->stage == pred[i].stage && f->mb == pred[i].mb) {
                between = computes;
                break;
            }
            if (store_kind_is_compute(f->kind ? f->kind : "")) computes++;
        }
        if (between < 0) continue;
        double fs = 0, bs = 0;
        for (int p = 0; p < t->passes; p++) {
            const store_op *m = &meas[(size_t)p * n + i];
            t->d[p] = m->end_s - m->start_s;
            beside_shares(t, r, m->start_s, m->end_s, &fs, &bs);
        }
        gsl_sort(t->d, 1, (size_t)t->passes);
        double med = gsl_stats_median_from_sorted_data(t->d, 1, (size_t)t->passes), pr = pred[i].end_s - pred[i].start_s;
        if (!(med > 0) || !(pr > 0)) continue;
        t->it[t->ni++] = (dist_item){c, store_distance_bucket(between), beside_kind(fs / t->passes, bs / t->passes),
                                     between == 0, pr / med - 1, gsl_stats_mean(t->d, 1, (size_t)t->passes)};
    }
    return PL_OK;
}

int store_distance_note(const store_op *pred, size_t np, const store_op *meas, size_t nm, int ranks, int passes,
                        store_distance *acc, pl_err *e) {
    if (ranks < 1 || passes < 1 || np == 0) return PL_OK;
    dist_pair t = {.passes = passes, .meas = meas, .nm = nm, .ranks = ranks};
    t.d = pl_calloc((size_t)passes, sizeof *t.d);
    t.it = pl_calloc(np, sizeof *t.it);
    t.lo = pl_calloc((size_t)ranks, sizeof *t.lo);
    t.hi = pl_calloc((size_t)ranks, sizeof *t.hi);
    t.folded = pl_calloc((size_t)ranks, sizeof *t.folded);
    t.iv = pl_calloc(nm ? nm : 1, sizeof *t.iv);
    t.ix = pl_calloc(nm ? nm : 1, sizeof *t.ix);
    t.longest = pl_calloc((size_t)ranks, sizeof *t.longest);
    int ok = t.d && t.it && t.lo && t.hi && t.folded && t.iv && t.ix && t.longest;
    /* each rank's slice of meas (store_each_rank checks that the slices follow one another), and
     * whether its ops overlap */
    for (size_t j = nm; ok && j-- > 0;)
        if (meas[j].rank >= 0 && meas[j].rank < ranks) {
            if (!t.hi[meas[j].rank]) t.hi[meas[j].rank] = j + 1;
            t.lo[meas[j].rank] = j;
        }
    for (int q = 0; ok && q < ranks; q++)
        for (size_t j = t.lo[q] + 1; j < t.hi[q]; j++)
            if (meas[j].start_s < meas[j - 1].end_s) t.folded[q] = 1;
    for (int q = 0; ok && q < ranks; q++) {
        if (!t.folded[q]) continue;
        for (size_t j = t.lo[q]; j < t.hi[q]; j++) {
            t.ix[j] = (beside_ix){meas[j].start_s, j};
            double d = meas[j].end_s - meas[j].start_s;
            if (d > t.longest[q]) t.longest[q] = d;
        }
        qsort(t.ix + t.lo[q], t.hi[q] - t.lo[q], sizeof *t.ix, ix_cmp);
    }
    int rc = ok ? store_each_rank(pred, np, meas, nm, ranks, passes, dist_rank, &t, e) : pl_errf(e, PL_ENOMEM, "out of memory");
    /* all checked: into acc */
    int seen[STORE_DISTANCE_CLASSES][STORE_DISTANCE_BUCKETS] = {{0}};
    int seen_b[STORE_DISTANCE_CLASSES][STORE_BESIDE_KINDS][2] = {{{0}}};
    for (size_t i = 0; rc == PL_OK && i < t.ni; i++) {
        const dist_item *x = &t.it[i];
        store_distance_cell *cell = &acc->c[x->c][x->b], *side = &acc->beside[x->c][x->beside][!x->near];
        if ((rc = cell_push(cell, x->err, e)) != PL_OK || (rc = cell_push(side, x->err, e)) != PL_OK) break;
        cell->meas_s += x->meas_s;
        side->meas_s += x->meas_s;
        acc->class_s[x->c] += x->meas_s;
        if (!seen[x->c][x->b]++) cell->pairs++;
        if (!seen_b[x->c][x->beside][!x->near]++) side->pairs++;
    }
    free(t.d);
    free(t.it);
    free(t.lo);
    free(t.hi);
    free(t.folded);
    free(t.iv);
    free(t.ix);
    free(t.longest);
    return rc;
}

void store_distance_stats(store_distance_cell *x, double *median, double *mean) {
    *median = *mean = NAN;
    if (x->n == 0) return;
    gsl_sort(x->err, 1, x->n);
    *median = gsl_stats_median_from_sorted_data(x->err, 1, x->n);
    *mean = gsl_stats_mean(x->err, 1, x->n);
}

void store_distance_free(store_distance *t) {
    if (!t) return;
    for (int c = 0; c < STORE_DISTANCE_CLASSES; c++) {
        for (int b = 0; b < STORE_DISTANCE_BUCKETS; b++) free(t->c[c][b].err);
        for (int k = 0; k < STORE_BESIDE_KINDS; k++)
            for (int n = 0; n < 2; n++) free(t->beside[c][k][n].err);
    }
    memset(t, 0, sizeof *t);
}
