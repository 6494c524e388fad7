/* store_overlap.c: compute alone against compute beside the other ranks' (store_overlap_note),
 * from a measured run's traced actions: whether the ranks slow each other down by sharing the
 * machine (memory bandwidth, last-level cache, a GPU's host link), and how much of each class's
 * compute ran while no other rank computed, the time a term for that sharing would reprice. */
#include "store_int.h"

#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An action's share of its span during which the other ranks computed at or below this is
 * "alone", at or above 1 - this "beside". */
#define OVERLAP_EDGE 0.1

const char *const store_overlap_kinds[STORE_OVERLAP_KINDS] = {"F", "B", "I", "W", "STEP"};

int store_class_of(const char *kind) {
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++)
        if (kind && strcmp(kind, store_overlap_kinds[k]) == 0) return k;
    return -1;
}

/* One compute action of the run: its (rank, stage, class) group, alone (1), beside (0) or
 * neither (-1), and its duration. */
typedef struct ov_act {
    int rank, stage, kind, side;
    double dur;
} ov_act;

/* Orders actions by group, then side, then duration. */
static int ov_cmp(const void *pa, const void *pb) {
    const ov_act *a = pa, *b = pb;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->stage != b->stage) return a->stage < b->stage ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->side != b->side) return a->side < b->side ? -1 : 1;
    return (a->dur > b->dur) - (a->dur < b->dur);
}

/* Orders intervals by start. */
static int iv_cmp(const void *pa, const void *pb) {
    const double *a = pa, *b = pb;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Sorts iv[0 .. n) by start and merges overlapping ones into their union (a replicated stage's
 * replicas are folded into one rank and may compute at once); returns the intervals left. */
static size_t iv_union(double (*iv)[2], size_t n) {
    if (n == 0) return 0;
    qsort(iv, n, sizeof *iv, iv_cmp);
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        if (iv[i][0] <= iv[m][1]) {
            if (iv[i][1] > iv[m][1]) iv[m][1] = iv[i][1];
        } else {
            m++;
            iv[m][0] = iv[i][0];
            iv[m][1] = iv[i][1];
        }
    }
    return m + 1;
}

/* Returns the time within [s, e] covered by the intervals iv[0 .. n) (a rank's compute: sorted,
 * disjoint, iv_union). */
static double covered(double (*iv)[2], size_t n, double s, double e) {
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the first interval ending after s */
        size_t mid = lo + (hi - lo) / 2;
        if (iv[mid][1] <= s) lo = mid + 1;
        else hi = mid;
    }
    double c = 0;
    for (size_t i = lo; i < n && iv[i][0] < e; i++) c += fmin(e, iv[i][1]) - fmax(s, iv[i][0]);
    return c;
}

/* The most stages a timeline may name (a larger one is a corrupt row). */
#define OVERLAP_MAX_STAGES (1 << 20)

/* What one run's note works on: its ops, each rank's slice of them (first[r] .. first[r + 1] -
 * 1), each rank's compute as the union of its spans (iv + ivat[r], niv[r] of them), the actions
 * that are alone or beside (a[0 .. na)) and the run's sums before they go into acc. */
typedef struct ov_run {
    const store_op *ops;
    size_t n;
    int ranks, passes, stages;
    size_t *first, *niv, *ivat, na;
    double (*iv)[2];
    ov_act *a;
    store_overlap add;
} ov_run;

/* Sets x->first and x->stages, checking that the ops are in rank order, that every rank's are
 * whole passes and that no stage is absurd. Returns PL_OK or PL_EINPUT. */
static int ov_layout(ov_run *x, pl_err *e) {
    for (size_t i = 0; i < x->n; i++) {
        const store_op *o = &x->ops[i];
        if (o->rank < 0 || o->rank >= x->ranks || (i > 0 && o->rank < x->ops[i - 1].rank))
            return pl_errf(e, PL_EINPUT, "run's actions are not ordered by rank within 0 .. %d", x->ranks - 1);
        if (o->stage >= OVERLAP_MAX_STAGES) return pl_errf(e, PL_EINPUT, "run's action %zu names stage %d", i, o->stage);
        if (o->stage + 1 > x->stages) x->stages = o->stage + 1;
        x->first[o->rank + 1] = i + 1;
    }
    for (int r = 1; r <= x->ranks; r++)
        if (x->first[r] < x->first[r - 1]) x->first[r] = x->first[r - 1];
    for (int r = 0; r < x->ranks; r++) {
        size_t cnt = x->first[r + 1] - x->first[r];
        if (cnt % (size_t)x->passes)
            return pl_errf(e, PL_EINPUT, "rank %d's %zu actions are not %d passes of equal length", r, cnt, x->passes);
    }
    return PL_OK;
}

/* Fills each rank's compute (an overlapped F and B too, and the STEP) as the union of its spans. */
static void ov_busy(ov_run *x) {
    for (int r = 0; r < x->ranks; r++) {
        x->ivat[r] = r == 0 ? 0 : x->ivat[r - 1] + x->niv[r - 1];
        for (size_t i = x->first[r]; i < x->first[r + 1]; i++) {
            const store_op *o = &x->ops[i];
            if (store_class_of(o->kind) < 0 && !store_kind_is_compute(o->kind ? o->kind : "")) continue;
            x->iv[x->ivat[r] + x->niv[r]][0] = o->start_s;
            x->iv[x->ivat[r] + x->niv[r]][1] = o->end_s;
            x->niv[r]++;
        }
        x->niv[r] = iv_union(x->iv + x->ivat[r], x->niv[r]);
    }
}

/* Adds each compute action of x to its class's sums, and lists the alone and beside ones in
 * x->a, except a stage's first F, B, I, W of a pass (seen: nseen bytes, one per stage and class,
 * cleared at each pass). */
static void ov_actions(ov_run *x, unsigned char *seen, size_t nseen) {
    for (int r = 0; r < x->ranks; r++) {
        size_t cnt = x->first[r + 1] - x->first[r], per = cnt / (size_t)x->passes;
        for (size_t j = 0; j < cnt; j++) {
            const store_op *o = &x->ops[x->first[r] + j];
            if (j % per == 0) memset(seen, 0, nseen);
            int k = store_class_of(o->kind);
            if (k < 0 || o->stage < 0) continue;
            /* a stage's first F, B, I, W of a pass reads its weights back (first touch); left
             * out of the groups, so that alone and beside compare like with like */
            unsigned char *sn = &seen[(size_t)o->stage * STORE_OVERLAP_KINDS + (size_t)k];
            int lead = !*sn && k != STORE_OVERLAP_STEP;
            *sn = 1;
            double d = o->end_s - o->start_s;
            if (!(d > 0)) continue;
            double busy = 0;
            for (int q = 0; q < x->ranks; q++)
                if (q != r) busy += covered(x->iv + x->ivat[q], x->niv[q], o->start_s, o->end_s);
            double share = fmin(busy / ((double)(x->ranks - 1) * d), 1); /* the others' mean busy share */
            x->add.c[k].total_s += d;
            x->add.c[k].alone_s += d * (1 - share);
            if (lead) continue;
            int side = share <= OVERLAP_EDGE ? 1 : share >= 1 - OVERLAP_EDGE ? 0 : -1;
            if (side >= 0) x->a[x->na++] = (ov_act){o->rank, o->stage, k, side, d};
        }
    }
}

/* Adds to x->add, per (rank, stage, class) group with two alone and two beside actions or more,
 * the ratio of their medians (tmp: x->na doubles of scratch). */
static void ov_groups(ov_run *x, double *tmp) {
    ov_act *a = x->a;
    qsort(a, x->na, sizeof *a, ov_cmp);
    for (size_t i = 0; i < x->na;) {
        size_t j = i, m = i;
        while (j < x->na && a[j].rank == a[i].rank && a[j].stage == a[i].stage && a[j].kind == a[i].kind) j++;
        while (m < j && a[m].side == 0) m++; /* beside: i .. m - 1, alone: m .. j - 1 */
        if (m - i >= 2 && j - m >= 2) {
            for (size_t t = i; t < j; t++) tmp[t - i] = a[t].dur;
            double beside = gsl_stats_median_from_sorted_data(tmp, 1, m - i);
            double alone = gsl_stats_median_from_sorted_data(tmp + (m - i), 1, j - m);
            store_overlap_class *c = &x->add.c[a[i].kind];
            double ratio = alone / beside;
            if (c->groups == 0 || ratio < c->least) c->least = ratio;
            if (c->groups == 0 || ratio > c->largest) c->largest = ratio;
            c->log_ratio_sum += log(ratio);
            c->groups++;
        }
        i = j;
    }
}

/* Adds one run's sums (add) to acc. */
static void ov_merge(store_overlap *acc, const store_overlap *add) {
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++) {
        store_overlap_class *c = &acc->c[k];
        const store_overlap_class *x = &add->c[k];
        if (x->groups > 0) {
            if (c->groups == 0 || x->least < c->least) c->least = x->least;
            if (c->groups == 0 || x->largest > c->largest) c->largest = x->largest;
        }
        c->groups += x->groups;
        c->log_ratio_sum += x->log_ratio_sum;
        c->alone_s += x->alone_s;
        c->total_s += x->total_s;
    }
}

int store_overlap_note(const store_op *ops, size_t n, int ranks, int passes, store_overlap *acc, pl_err *e) {
    if (ranks < 2 || passes < 1 || n == 0) return PL_OK; /* one rank: every action is alone */
    ov_run x = {.ops = ops, .n = n, .ranks = ranks, .passes = passes};
    x.first = pl_calloc((size_t)ranks + 1, sizeof *x.first);
    x.niv = pl_calloc((size_t)ranks, sizeof *x.niv);
    x.ivat = pl_calloc((size_t)ranks, sizeof *x.ivat);
    x.iv = pl_calloc(n, sizeof *x.iv);
    x.a = pl_calloc(n, sizeof *x.a);
    unsigned char *seen = NULL;
    int rc = x.first && x.niv && x.ivat && x.iv && x.a ? ov_layout(&x, e) : pl_errf(e, PL_ENOMEM, "out of memory");
    size_t nseen = (size_t)(x.stages > 0 ? x.stages : 1) * STORE_OVERLAP_KINDS;
    if (rc == PL_OK && !(seen = pl_calloc(nseen, 1))) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) {
        ov_busy(&x);
        ov_actions(&x, seen, nseen);
        ov_groups(&x, (double *)x.iv); /* the spans are no longer needed: n doubles of scratch */
        ov_merge(acc, &x.add);
    }
    free(x.first);
    free(x.niv);
    free(x.ivat);
    free(x.iv);
    free(x.a);
    free(seen);
    return rc;
}
