/* compare_overlap.c: `pipelab compare --overlap`: each class's measured compute alone against
 * beside the other ranks' compute, over the measured runs of a comparison (store_overlap_note):
 * whether the ranks slow each other down by sharing the machine, and how much compute a term
 * for that sharing would reprice. */
#include <math.h>

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
#endif
