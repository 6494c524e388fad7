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

/* Returns the class (0 .. STORE_OVERLAP_KINDS - 1) of an op kind, or -1 (not compute). */
static int overlap_kind(const char *kind) {
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

int store_overlap_note(const store_op *ops, size_t n, int ranks, int passes, store_overlap *acc, pl_err *e) {
    if (ranks < 2 || passes < 1 || n == 0) return PL_OK; /* one rank: every action is alone */
    int rc = PL_ENOMEM;
    size_t *first = pl_calloc((size_t)ranks + 1, sizeof *first);
    double(*iv)[2] = pl_calloc(n, sizeof *iv);
    size_t *niv = pl_calloc((size_t)ranks, sizeof *niv), *ivat = pl_calloc((size_t)ranks, sizeof *ivat);
    ov_act *a = pl_calloc(n, sizeof *a);
    unsigned char *seen = NULL;
    store_overlap add;
    memset(&add, 0, sizeof add);
    if (!first || !iv || !niv || !ivat || !a) goto out;
    /* ops come ordered by rank, then seq: rank r's are first[r] .. first[r + 1] - 1, its passes
     * in turn, the same count of actions each; all checked before anything is added */
    int stages = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].rank < 0 || ops[i].rank >= ranks || (i > 0 && ops[i].rank < ops[i - 1].rank)) {
            rc = pl_errf(e, PL_EINPUT, "run's actions are not ordered by rank within 0 .. %d", ranks - 1);
            goto out;
        }
        if (ops[i].stage >= OVERLAP_MAX_STAGES) {
            rc = pl_errf(e, PL_EINPUT, "run's action %zu names stage %d", i, ops[i].stage);
            goto out;
        }
        if (ops[i].stage + 1 > stages) stages = ops[i].stage + 1;
        first[ops[i].rank + 1] = i + 1;
    }
    for (int r = 1; r <= ranks; r++)
        if (first[r] < first[r - 1]) first[r] = first[r - 1];
    for (int r = 0; r < ranks; r++)
        if ((first[r + 1] - first[r]) % (size_t)passes) {
            rc = pl_errf(e, PL_EINPUT, "rank %d's %zu actions are not %d passes of equal length", r, first[r + 1] - first[r],
                         passes);
            goto out;
        }
    /* each rank's compute (an overlapped F and B too, and the STEP), as the union of its spans */
    for (int r = 0; r < ranks; r++) {
        ivat[r] = r == 0 ? 0 : ivat[r - 1] + niv[r - 1];
        for (size_t i = first[r]; i < first[r + 1]; i++)
            if (overlap_kind(ops[i].kind) >= 0 || store_kind_is_compute(ops[i].kind ? ops[i].kind : "")) {
                iv[ivat[r] + niv[r]][0] = ops[i].start_s;
                iv[ivat[r] + niv[r]][1] = ops[i].end_s;
                niv[r]++;
            }
        niv[r] = iv_union(iv + ivat[r], niv[r]);
    }
    /* seen[(stage * classes + class)]: met in the current pass of the current rank */
    size_t nseen = (size_t)(stages > 0 ? stages : 1) * STORE_OVERLAP_KINDS;
    seen = pl_calloc(nseen, 1);
    if (!seen) goto out;
    size_t na = 0;
    for (int r = 0; r < ranks; r++) {
        size_t cnt = first[r + 1] - first[r], per = cnt / (size_t)passes;
        for (size_t j = 0; j < cnt; j++) {
            const store_op *o = &ops[first[r] + j];
            if (j % per == 0) memset(seen, 0, nseen);
            int k = overlap_kind(o->kind);
            if (k < 0 || o->stage < 0) continue;
            /* a stage's first F, B, I, W of a pass reads its weights back (first touch); left
             * out of the groups, so that alone and beside compare like with like */
            unsigned char *sn = &seen[(size_t)o->stage * STORE_OVERLAP_KINDS + (size_t)k];
            int lead = !*sn && k != STORE_OVERLAP_STEP;
            *sn = 1;
            double d = o->end_s - o->start_s;
            if (!(d > 0)) continue;
            double busy = 0;
            for (int q = 0; q < ranks; q++)
                if (q != r) busy += covered(iv + ivat[q], niv[q], o->start_s, o->end_s);
            double share = fmin(busy / ((double)(ranks - 1) * d), 1); /* the others' mean busy share */
            add.c[k].total_s += d;
            add.c[k].alone_s += d * (1 - share);
            if (lead) continue;
            int side = share <= OVERLAP_EDGE ? 1 : share >= 1 - OVERLAP_EDGE ? 0 : -1;
            if (side >= 0) a[na++] = (ov_act){o->rank, o->stage, k, side, d};
        }
    }
    /* per group: the median alone over the median beside, where each has two actions or more */
    qsort(a, na, sizeof *a, ov_cmp);
    double *tmp = (double *)iv; /* n doubles at least: reused for the durations */
    for (size_t i = 0; i < na;) {
        size_t j = i, m = i;
        while (j < na && a[j].rank == a[i].rank && a[j].stage == a[i].stage && a[j].kind == a[i].kind) j++;
        while (m < j && a[m].side == 0) m++; /* beside: i .. m - 1, alone: m .. j - 1 */
        if (m - i >= 2 && j - m >= 2) {
            for (size_t t = i; t < j; t++) tmp[t - i] = a[t].dur;
            double beside = gsl_stats_median_from_sorted_data(tmp, 1, m - i);
            double alone = gsl_stats_median_from_sorted_data(tmp + (m - i), 1, j - m);
            store_overlap_class *c = &add.c[a[i].kind];
            double ratio = alone / beside;
            if (c->groups == 0 || ratio < c->least) c->least = ratio;
            if (c->groups == 0 || ratio > c->largest) c->largest = ratio;
            c->log_ratio_sum += log(ratio);
            c->groups++;
        }
        i = j;
    }
    /* the run's sums into acc, all at once */
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++) {
        store_overlap_class *c = &acc->c[k];
        const store_overlap_class *x = &add.c[k];
        if (x->groups > 0) {
            if (c->groups == 0 || x->least < c->least) c->least = x->least;
            if (c->groups == 0 || x->largest > c->largest) c->largest = x->largest;
        }
        c->groups += x->groups;
        c->log_ratio_sum += x->log_ratio_sum;
        c->alone_s += x->alone_s;
        c->total_s += x->total_s;
    }
    rc = PL_OK;
out:
    if (rc == PL_ENOMEM) pl_errf(e, PL_ENOMEM, "out of memory");
    free(first);
    free(iv);
    free(niv);
    free(ivat);
    free(a);
    free(seen);
    return rc;
}
