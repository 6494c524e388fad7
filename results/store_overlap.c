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

/* Returns the time within [s, e] covered by the intervals iv[0 .. n) (each rank's compute, in
 * start order, disjoint). */
static double covered(const double (*iv)[2], size_t n, double s, double e) {
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

int store_overlap_note(const store_op *ops, size_t n, int ranks, int passes, store_overlap *acc, pl_err *e) {
    if (ranks < 2 || passes < 1 || n == 0) return PL_OK; /* one rank: every action is alone */
    int rc = PL_ENOMEM;
    size_t *first = pl_calloc((size_t)ranks + 1, sizeof *first);
    double(*iv)[2] = pl_calloc(n, sizeof *iv);
    size_t *niv = pl_calloc((size_t)ranks, sizeof *niv), *ivat = pl_calloc((size_t)ranks, sizeof *ivat);
    ov_act *a = pl_calloc(n, sizeof *a);
    unsigned char *seen = NULL;
    if (!first || !iv || !niv || !ivat || !a) goto out;
    /* ops come ordered by rank, then seq: rank r's are first[r] .. first[r + 1] - 1, its passes
     * in turn, the same count of actions each */
    for (size_t i = 0; i < n; i++) {
        if (ops[i].rank < 0 || ops[i].rank >= ranks || (i > 0 && ops[i].rank < ops[i - 1].rank)) {
            rc = pl_errf(e, PL_EINPUT, "run's actions are not ordered by rank within 0 .. %d", ranks - 1);
            goto out;
        }
        first[ops[i].rank + 1] = i + 1;
    }
    for (int r = 1; r <= ranks; r++)
        if (first[r] < first[r - 1]) first[r] = first[r - 1];
    /* each rank's compute intervals, in start order */
    for (int r = 0; r < ranks; r++) {
        ivat[r] = r == 0 ? 0 : ivat[r - 1] + niv[r - 1];
        for (size_t i = first[r]; i < first[r + 1]; i++)
            if (overlap_kind(ops[i].kind) >= 0) {
                iv[ivat[r] + niv[r]][0] = ops[i].start_s;
                iv[ivat[r] + niv[r]][1] = ops[i].end_s;
                niv[r]++;
            }
    }
    int stages = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].stage + 1 > stages) stages = ops[i].stage + 1;
    /* seen[(stage * classes + class)]: met in the current pass of the current rank */
    seen = pl_calloc((size_t)(stages > 0 ? stages : 1) * STORE_OVERLAP_KINDS, 1);
    if (!seen) goto out;
    size_t na = 0;
    for (int r = 0; r < ranks; r++) {
        size_t cnt = first[r + 1] - first[r], per = cnt / (size_t)passes;
        if (cnt % (size_t)passes) {
            rc = pl_errf(e, PL_EINPUT, "rank %d's %zu actions are not %d passes of equal length", r, cnt, passes);
            goto out;
        }
        for (size_t j = 0; j < cnt; j++) {
            const store_op *o = &ops[first[r] + j];
            if (per && j % per == 0) memset(seen, 0, (size_t)(stages > 0 ? stages : 1) * STORE_OVERLAP_KINDS);
            int k = overlap_kind(o->kind);
            double d = o->end_s - o->start_s;
            if (k < 0 || !(d > 0) || o->stage < 0) continue;
            double busy = 0;
            for (int q = 0; q < ranks; q++)
                if (q != r) busy += covered(iv + ivat[q], niv[q], o->start_s, o->end_s);
            double share = busy / ((double)(ranks - 1) * d); /* the others' mean busy share */
            acc->c[k].total_s += d;
            acc->c[k].alone_s += d * (1 - fmin(share, 1));
            /* a stage's first F, B, I, W of a pass reads its weights back (first touch); left
             * out of the groups, so that alone and beside compare like with like */
            unsigned char *s = &seen[(size_t)o->stage * STORE_OVERLAP_KINDS + (size_t)k];
            int lead = !*s && k != STORE_OVERLAP_STEP;
            *s = 1;
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
            store_overlap_class *c = &acc->c[a[i].kind];
            double ratio = alone / beside;
            if (c->groups == 0 || ratio < c->least) c->least = ratio;
            if (c->groups == 0 || ratio > c->largest) c->largest = ratio;
            c->log_ratio_sum += log(ratio);
            c->groups++;
        }
        i = j;
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
