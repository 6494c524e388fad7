/* compare_overlap.c: `pipelab compare --overlap`: each class's measured compute alone against
 * beside the other ranks' compute, over the measured runs of a comparison (store_overlap_note):
 * whether the ranks slow each other down by sharing the machine, and how much compute a term
 * for that sharing would reprice. `pipelab compare --tail`: each class's typical action and its
 * tail against the prediction (store_tail_note). */
#include <math.h>
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

void cli_compare_tail(store *db, const store_comparison *c, pl_buf *b) {
    store_tail acc;
    memset(&acc, 0, sizeof acc);
    size_t pairs = 0, without = 0, failed = 0;
    pl_err first_err;
    pl_err_clear(&first_err);
    for (size_t i = 0; i < c->n; i++) {
        const store_pair *p = &c->pairs[i];
        store_op *so = NULL, *mo = NULL;
        size_t ns = 0, nm = 0;
        pl_err e;
        pl_err_clear(&e);
        int T = p->meas.repetitions > 0 ? p->meas.repetitions : 1;
        int rc = store_get_ops(db, p->sim.id, &so, &ns, &e);
        if (rc == PL_OK) rc = store_get_ops(db, p->meas.id, &mo, &nm, &e);
        if (rc == PL_OK && (ns == 0 || nm == 0)) without++;
        else if (rc == PL_OK && (rc = store_tail_note(so, ns, mo, nm, p->meas.ranks, T, &acc, &e)) == PL_OK) pairs++;
        if (rc != PL_OK && failed++ == 0) {
            first_err = e;
            pl_err_prefix(&first_err, "pair of measured run %lld: ", (long long)p->meas.id);
        }
        store_ops_free(so, ns);
        store_ops_free(mo, nm);
    }
    pl_buf_printf(b, "\neach class's typical action and its tail, against the prediction (%zu pair%s with both timelines)\n",
                  pairs, pairs == 1 ? "" : "s");
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
    if (without)
        pl_buf_printf(b, "%zu pair%s without both timelines (run with --trace)\n", without, without == 1 ? "" : "s");
    if (failed)
        pl_buf_printf(b, "%zu pair%s left out, their timelines unreadable or not lined up (the first: %s)\n", failed,
                      failed == 1 ? "" : "s", first_err.msg);
    store_tail_free(&acc);
}
#endif
