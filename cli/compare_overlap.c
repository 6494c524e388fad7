/* compare_overlap.c: `pipelab compare --overlap`: each class's measured compute alone against
 * beside the other ranks' compute, over the measured runs of a comparison (store_overlap_note):
 * whether the ranks slow each other down by sharing the machine, and how much compute a term
 * for that sharing would reprice. `pipelab compare --tail`: each class's typical action and its
 * tail against the prediction (store_tail_note). `pipelab compare --distance`: each backward's error
 * against its reuse distance (store_distance_note). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifdef PIPELAB_HAVE_PL_RESULTS
#include "store.h"

void cli_compare_overlap(store *db, const store_comparison *c, pl_buf *b) {
    store_overlap acc = {0};
    size_t runs = 0, without = 0, failed = 0;
    pl_err first_err;
    pl_err_clear(&first_err);
    for (size_t i = 0; i < c->n; i++) {
        const store_run *m = &c->pairs[i].meas;
        store_op *ops = NULL;
        size_t n = 0;
        pl_err e;
        pl_err_clear(&e);
        int T = m->repetitions > 0 ? m->repetitions : 1, rc = store_get_ops(db, m->id, &ops, &n, &e);
        if (rc == PL_OK && (n == 0 || m->ranks < 2)) without++;
        else if (rc == PL_OK && (rc = store_overlap_note(ops, n, m->ranks, T, &acc, &e)) == PL_OK) runs++;
        if (rc != PL_OK && failed++ == 0) {
            first_err = e;
            pl_err_prefix(&first_err, "measured run %lld: ", (long long)m->id);
        }
        store_ops_free(ops, n);
    }
    pl_buf_printf(b, "\ncompute alone against beside the other ranks' compute (%zu measured run%s of 2 ranks or more)\n",
                  runs, runs == 1 ? "" : "s");
    pl_buf_puts(b, "ALONE/BESIDE: per rank and stage, the median action while the other ranks computed during at\n"
                   "most a tenth of its span over the median while they computed during at least nine tenths\n"
                   "(a stage's first F, B, I, W of a pass left out: first touch), geometric mean over the groups\n"
                   "with two of each; ALONE SHARE: the class's measured compute time times the other ranks'\n"
                   "idle share (with 2 ranks: its time while the other rank did not compute); REPRICED: that\n"
                   "time's change at the ALONE/BESIDE ratio, over all of the class's time\n");
    pl_buf_printf(b, "%-6s %7s %13s %8s %8s %12s %9s\n", "CLASS", "GROUPS", "ALONE/BESIDE", "LEAST", "LARGEST",
                  "ALONE SHARE", "REPRICED");
    double rep = 0, tot = 0;
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++) {
        const store_overlap_class *x = &acc.c[k];
        if (x->total_s <= 0) continue;
        double share = x->alone_s / x->total_s;
        pl_buf_printf(b, "%-6s %7d ", store_overlap_kinds[k], x->groups);
        if (x->groups > 0) {
            double ratio = exp(x->log_ratio_sum / x->groups);
            pl_buf_printf(b, "%13.4f %8.4f %8.4f %11.2f%% %+8.2f%%\n", ratio, x->least, x->largest, 100 * share,
                          100 * share * (ratio - 1));
            rep += x->alone_s * (ratio - 1);
        } else {
            pl_buf_printf(b, "%13s %8s %8s %11.2f%% %9s\n", "-", "-", "-", 100 * share, "-");
        }
        tot += x->total_s;
    }
    if (tot > 0) pl_buf_printf(b, "all compute: %+.2f%% repriced\n", 100 * rep / tot);
    if (without)
        pl_buf_printf(b, "%zu measured run%s without a timeline of 2 ranks or more (run with --trace)\n", without,
                      without == 1 ? "" : "s");
    if (failed)
        pl_buf_printf(b, "%zu measured run%s left out, their timeline unreadable (the first: %s)\n", failed,
                      failed == 1 ? "" : "s", first_err.msg);
}

/* Appends v as a signed percentage in a column of width w, or "-" when v is NAN. */
static void tail_pct(pl_buf *b, int w, double v) {
    if (isnan(v)) pl_buf_printf(b, " %*s", w, "-");
    else pl_buf_printf(b, " %+*.2f%%", w - 1, 100 * v);
}

/* A walk over a comparison's pairs that carry both timelines (each_traced_pair). */
typedef struct pair_walk {
    size_t pairs, without, skipped, failed;
    pl_err first_err;
} pair_walk;

/* What each_traced_pair calls for each pair with both timelines (so: predicted, mo: measured,
 * `passes` passes). Returns PL_OK or an error, which leaves the pair out. */
typedef int pair_fn(const store_pair *p, const store_op *so, size_t ns, const store_op *mo, size_t nm, int passes,
                    void *ctx, pl_err *e);

/* Calls fn for each pair of c whose two runs carry their timelines, skipping (w->skipped) those
 * `keep` refuses (NULL: none); counts into w the pairs noted, those without timelines, and those
 * left out by an error (the first kept in w->first_err). */
static void each_traced_pair(store *db, const store_comparison *c, int (*keep)(const store_pair *), pair_fn *fn,
                             void *ctx, pair_walk *w) {
    memset(w, 0, sizeof *w);
    pl_err_clear(&w->first_err);
    for (size_t i = 0; i < c->n; i++) {
        const store_pair *p = &c->pairs[i];
        if (keep && !keep(p)) {
            w->skipped++;
            continue;
        }
        store_op *so = NULL, *mo = NULL;
        size_t ns = 0, nm = 0;
        pl_err e;
        pl_err_clear(&e);
        int T = p->meas.repetitions > 0 ? p->meas.repetitions : 1;
        int rc = store_get_ops(db, p->sim.id, &so, &ns, &e);
        if (rc == PL_OK) rc = store_get_ops(db, p->meas.id, &mo, &nm, &e);
        if (rc == PL_OK && (ns == 0 || nm == 0)) w->without++;
        else if (rc == PL_OK && (rc = fn(p, so, ns, mo, nm, T, ctx, &e)) == PL_OK) w->pairs++;
        if (rc != PL_OK && w->failed++ == 0) {
            w->first_err = e;
            pl_err_prefix(&w->first_err, "pair of measured run %lld: ", (long long)p->meas.id);
        }
        store_ops_free(so, ns);
        store_ops_free(mo, nm);
    }
}

/* Appends the lines on the pairs each_traced_pair did not note. */
static void pair_walk_report(pl_buf *b, const pair_walk *w) {
    if (w->without)
        pl_buf_printf(b, "%zu pair%s without both timelines (run with --trace)\n", w->without, w->without == 1 ? "" : "s");
    if (w->failed)
        pl_buf_printf(b, "%zu pair%s left out, their timelines unreadable or not lined up (the first: %s)\n", w->failed,
                      w->failed == 1 ? "" : "s", w->first_err.msg);
}

/* pair_fn of --tail. */
static int tail_pair_fn(const store_pair *p, const store_op *so, size_t ns, const store_op *mo, size_t nm, int passes,
                        void *ctx, pl_err *e) {
    return store_tail_note(so, ns, mo, nm, p->meas.ranks, passes, ctx, e);
}

void cli_compare_tail(store *db, const store_comparison *c, pl_buf *b) {
    store_tail acc;
    memset(&acc, 0, sizeof acc);
    pair_walk w;
    each_traced_pair(db, c, NULL, tail_pair_fn, &acc, &w);
    pl_buf_printf(b, "\neach class's typical action and its tail, against the prediction (%zu pair%s with both timelines)\n",
                  w.pairs, w.pairs == 1 ? "" : "s");
    pl_buf_puts(b, "TYPICAL: the predicted mean action against the measured median one; MEAN: against the\n"
                   "measured mean one, what a pass sums; TAIL: the measured mean action over the median one\n"
                   "(each the median over the pairs' ranks); SHARE: the class's share of the measured compute;\n"
                   "LEAN: its predicted minus measured time per pass over the rank's measured compute, the mean\n"
                   "over the pairs' ranks (where no action overlaps a forward and a backward, the classes' LEANs\n"
                   "add up to the mean signed error of a rank's compute)\n");
    pl_buf_printf(b, "%-6s %6s %9s %9s %9s %8s %9s\n", "CLASS", "RANKS", "TYPICAL", "MEAN", "TAIL", "SHARE", "LEAN");
    double lean = 0, all = acc.meas_s[STORE_OVERLAP_KINDS];
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++) {
        store_tail_class *x = &acc.c[k];
        if (x->n == 0 && acc.meas_s[k] <= 0) continue;
        double m[3];
        store_tail_medians(x, m);
        double l = acc.groups ? x->lean_sum / (double)acc.groups : NAN;
        pl_buf_printf(b, "%-6s %6zu", store_overlap_kinds[k], x->n);
        for (int j = 0; j < 3; j++) tail_pct(b, 9, m[j]);
        pl_buf_printf(b, " %7.1f%%", all > 0 ? 100 * acc.meas_s[k] / all : 0.0);
        tail_pct(b, 9, l);
        pl_buf_putc(b, '\n');
        if (!isnan(l)) lean += l;
    }
    if (acc.groups) pl_buf_printf(b, "the classes' LEANs together: %+.2f%% of the measured compute\n", 100 * lean);
    pair_walk_report(b, &w);
    store_tail_free(&acc);
}

/* each_traced_pair's keep of --distance: a pair not under full recomputation, whose backwards
 * recompute their forward first (distance 0 by construction). */
static int not_full_recompute(const store_pair *p) {
    const char *rc = p->meas.recompute_policy;
    return !(rc && !strcmp(rc, "full"));
}

/* pair_fn of --distance. */
static int distance_pair_fn(const store_pair *p, const store_op *so, size_t ns, const store_op *mo, size_t nm,
                            int passes, void *ctx, pl_err *e) {
    return store_distance_note(so, ns, mo, nm, p->meas.ranks, passes, ctx, e);
}

/* Writes bucket d's distances ("0", "2-3", "16+") into out. */
static void distance_range(int d, char *out, size_t cap) {
    long lo = store_distance_bucket_from(d);
    long hi = d + 1 < STORE_DISTANCE_BUCKETS ? store_distance_bucket_from(d + 1) - 1 : -1;
    if (hi < 0) snprintf(out, cap, "%ld+", lo);
    else if (hi == lo) snprintf(out, cap, "%ld", lo);
    else snprintf(out, cap, "%ld-%ld", lo, hi);
}

void cli_compare_distance(store *db, const store_comparison *c, pl_buf *b) {
    store_distance acc;
    memset(&acc, 0, sizeof acc);
    pair_walk w;
    each_traced_pair(db, c, not_full_recompute, distance_pair_fn, &acc, &w);
    pl_buf_printf(b, "\neach backward against its reuse distance (%zu pair%s with both timelines)\n", w.pairs,
                  w.pairs == 1 ? "" : "s");
    pl_buf_puts(b, "DISTANCE: the compute actions its rank runs between the microbatch's forward on the stage\n"
                   "and the backward; per action, its predicted time over its measured one (the median over the\n"
                   "passes) - 1, and over the bucket's actions their MEDIAN and MEAN; PAIRS: the pairs with one\n"
                   "there; SHARE: the bucket's share of the class's measured time. A prediction that prices the\n"
                   "distance reads alike in every bucket\n");
    pl_buf_printf(b, "%-6s %8s %8s %6s %9s %9s %8s\n", "CLASS", "DISTANCE", "ACTIONS", "PAIRS", "MEDIAN", "MEAN", "SHARE");
    for (int k = 0; k < STORE_DISTANCE_CLASSES; k++)
        for (int d = 0; d < STORE_DISTANCE_BUCKETS; d++) {
            store_distance_cell *x = &acc.c[k][d];
            if (x->n == 0) continue;
            char range[48];
            distance_range(d, range, sizeof range);
            double med, mean;
            store_distance_stats(x, &med, &mean);
            pl_buf_printf(b, "%-6s %8s %8zu %6zu", store_distance_classes[k], range, x->n, x->pairs);
            tail_pct(b, 9, med);
            tail_pct(b, 9, mean);
            pl_buf_printf(b, " %7.1f%%\n", acc.class_s[k] > 0 ? 100 * x->meas_s / acc.class_s[k] : 0.0);
        }
    pl_buf_puts(b, "the same backwards by what the other ranks computed during each (its measured span, the\n"
                   "mean over the passes): alone (under a quarter of it), beside F (forwards at least three\n"
                   "quarters of what they computed), beside backward (B, I, W, OVERLAP at least three quarters),\n"
                   "mixed; at distance 0 and beyond. A prediction that prices what runs beside reads alike\n"
                   "in every row\n");
    pl_buf_printf(b, "%-6s %8s %8s %8s %6s %9s %9s %8s\n", "CLASS", "BESIDE", "DISTANCE", "ACTIONS", "PAIRS", "MEDIAN", "MEAN",
                  "SHARE");
    for (int k = 0; k < STORE_DISTANCE_CLASSES; k++)
        for (int s = 0; s < STORE_BESIDE_KINDS; s++)
            for (int n = 0; n < 2; n++) {
                store_distance_cell *x = &acc.beside[k][s][n];
                if (x->n == 0) continue;
                double med, mean;
                store_distance_stats(x, &med, &mean);
                pl_buf_printf(b, "%-6s %8s %8s %8zu %6zu", store_distance_classes[k], store_beside_names[s], n ? "1+" : "0",
                              x->n, x->pairs);
                tail_pct(b, 9, med);
                tail_pct(b, 9, mean);
                pl_buf_printf(b, " %7.1f%%\n", acc.class_s[k] > 0 ? 100 * x->meas_s / acc.class_s[k] : 0.0);
            }
    if (w.skipped)
        pl_buf_printf(b, "%zu pair%s under full recomputation left out (each backward recomputes its forward first)\n",
                      w.skipped, w.skipped == 1 ? "" : "s");
    pair_walk_report(b, &w);
    store_distance_free(&acc);
}
#endif
