/* interrupt.c: the host's interruptions (exec_interruptions_measure): how much of a busy core's
 * time the host takes away in gaps too short to be a stall and too rare to be in a typical
 * action. A compute action of a few milliseconds meets one of them now and then; a pass, which
 * sums its actions, meets its share of them always. A profile's median over rounds leaves them
 * out, so a prediction from it is short by about their share (docs/validate_cpu.md, "What the
 * tail is made of"). */
#include "exec_int.h"
#include "platform.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One measuring thread and its windows. */
typedef struct intr_thread {
    exec_gate *gate;
    int cpu;            /* its core, or -1 */
    double seconds;
    int nw;             /* windows of win seconds, nw of them in `seconds` */
    double win;
    double *gap_s;      /* [nw] time in gaps of (EXEC_GAP_MIN_S, EXEC_GAP_MAX_S] */
    double *gaps;       /* [nw] their count */
    double all_gap_s, span_s; /* over the whole measurement */
} intr_thread;

/* exec_team_run's body: reads the clock back to back for x->seconds on its core. A gap counts in
 * the window it ends in. */
static void *intr_main(void *arg) {
    intr_thread *x = arg;
    if (!exec_gate_pass(x->gate)) return NULL;
    if (x->cpu >= 0) (void)exec_platform_pin_self(x->cpu); /* unpinned, it still measures its core's share */
    double t0 = pl_now_s(), last = t0, end = t0 + x->seconds;
    while (last < end) {
        double t = pl_now_s(), g = t - last;
        if (g > EXEC_GAP_MIN_S && g <= EXEC_GAP_MAX_S) {
            int w = (int)((t - t0) / x->win);
            w = w < x->nw ? w : x->nw - 1;
            x->gap_s[w] += g;
            x->gaps[w] += 1;
            x->all_gap_s += g;
        }
        last = t;
    }
    x->span_s = last - t0;
    return NULL;
}

/* Returns the median of v[0 .. n) (sorted in place). */
static double median(double *v, int n) {
    gsl_sort(v, 1, (size_t)n);
    return gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
}

int exec_interruptions_measure(int workers, double seconds, exec_interruptions *r, pl_err *e) {
    memset(r, 0, sizeof *r);
    if (workers < 1 || workers > EXEC_INTERRUPTIONS_MAX_WORKERS)
        return pl_errf(e, PL_EINPUT, "the interruptions' measurement takes 1 to %d workers, got %d",
                       EXEC_INTERRUPTIONS_MAX_WORKERS, workers);
    if (!(seconds > 0) || seconds > EXEC_INTERRUPTIONS_MAX_S)
        return pl_errf(e, PL_EINPUT, "the interruptions' measurement takes more than 0 and at most %g s, got %g",
                       EXEC_INTERRUPTIONS_MAX_S, seconds);
    /* about EXEC_INTR_WINDOW_S each (the whole of `seconds` split evenly), one when shorter */
    int nw = seconds < EXEC_INTR_WINDOW_S ? 1 : (int)(seconds / EXEC_INTR_WINDOW_S);
    double win = seconds / nw;
    int cpus[EXEC_INTERRUPTIONS_MAX_WORKERS];
    int ncpu = exec_platform_cores(cpus, EXEC_INTERRUPTIONS_MAX_WORKERS);
    intr_thread *x = pl_calloc((size_t)workers, sizeof *x);
    double *mem = pl_calloc((size_t)workers * 2 * (size_t)nw, sizeof *mem), *v = pl_calloc((size_t)nw, sizeof *v);
    int rc = x && mem && v ? PL_OK : pl_errf(e, PL_ENOMEM, "out of memory");
    exec_gate gate;
    for (int i = 0; rc == PL_OK && i < workers; i++)
        x[i] = (intr_thread){&gate, ncpu > 0 ? cpus[i % ncpu] : -1, seconds, nw, win, mem + (size_t)(2 * i) * (size_t)nw,
                             mem + (size_t)(2 * i + 1) * (size_t)nw, 0, 0};
    if (rc == PL_OK) rc = exec_team_run(workers, intr_main, x, sizeof *x, &gate, "interruption-measuring thread", e);
    if (rc == PL_OK) {
        r->workers = workers;
        r->seconds = seconds;
        r->windows = nw;
        for (int i = 0; i < workers; i++) {
            for (int w = 0; w < nw; w++) v[w] = x[i].gap_s[w] / win;
            r->share += median(v, nw) / workers;
            for (int w = 0; w < nw; w++) v[w] = x[i].gaps[w] / win;
            r->per_s += median(v, nw) / workers;
            if (x[i].span_s > 0) r->share_all += x[i].all_gap_s / x[i].span_s / workers;
        }
    }
    free(x);
    free(mem);
    free(v);
    return rc;
}
