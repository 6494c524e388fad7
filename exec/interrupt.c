/* interrupt.c: the host's interruptions (exec_interruptions_measure): how much of a busy core's
 * time the host takes away in gaps too short to be a stall, in two bands. The gaps over 0.1 ms
 * are too rare to be in a typical action: one of a few milliseconds meets one of them now and
 * then. The short ones, of microseconds, come often, and an action of tens of microseconds meets
 * one now and then. A pass, which sums its actions, meets its share of both always. A profile's
 * median over rounds of such actions leaves them out, so a prediction from it is short by about
 * their share (docs/validate_cpu.md, "What the tail is made of", "Short gaps"). */
#include "exec_int.h"
#include "platform.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The bands of gaps measured: 0 over EXEC_GAP_MIN_S up to EXEC_GAP_MAX_S, 1 (the short ones)
 * over EXEC_GAP_SHORT_MIN_S up to EXEC_GAP_MIN_S. */
#define INTR_BANDS 2

/* One measuring thread and its windows. */
typedef struct intr_thread {
    exec_gate *gate;
    int cpu;            /* its core, or -1 */
    double seconds;
    int nw;             /* windows of win seconds, nw of them in `seconds` */
    double win;
    double *gap_s[INTR_BANDS]; /* [nw] time in gaps of the band */
    double *gaps[INTR_BANDS];  /* [nw] their count */
    double all_gap_s[INTR_BANDS], span_s; /* over the whole measurement */
    double short_min_s;        /* its short band's floor (exec_interruptions.short_min_s) */
} intr_thread;

/* Readings of the clock that time one: their median over INTR_READ_ROUNDS rounds. */
#define INTR_READS 1000
#define INTR_READ_ROUNDS 9

/* exec.h. */
int exec_gap_band(double g, double short_min_s) {
    if (g > EXEC_GAP_MIN_S) return g <= EXEC_GAP_MAX_S ? 0 : -1;
    return g > short_min_s ? 1 : -1;
}

/* Returns the time of one reading of the clock on this core: the median over rounds of
 * INTR_READS readings back to back, so that a gap in one round does not set it. */
static double read_time(void) {
    double r[INTR_READ_ROUNDS];
    for (int k = 0; k < INTR_READ_ROUNDS; k++) {
        double t0 = pl_now_s(), t = t0;
        for (int i = 0; i < INTR_READS; i++) t = pl_now_s();
        r[k] = (t - t0) / INTR_READS;
    }
    return exec_median(r, INTR_READ_ROUNDS);
}

/* exec_team_run's body: reads the clock back to back for x->seconds on its core. A gap counts in
 * the window it ends in. */
static void *intr_main(void *arg) {
    intr_thread *x = arg;
    if (!exec_gate_pass(x->gate)) return NULL;
    if (x->cpu >= 0) (void)exec_platform_pin_self(x->cpu); /* unpinned, it still measures its core's share */
    const double floor_s = fmax(EXEC_GAP_SHORT_MIN_S, EXEC_GAP_READS * read_time());
    double t0 = pl_now_s(), last = t0, end = t0 + x->seconds, all[INTR_BANDS] = {0, 0};
    while (last < end) {
        double t = pl_now_s(), g = t - last;
        int b = exec_gap_band(g, floor_s);
        if (b >= 0) {
            int w = (int)((t - t0) / x->win);
            w = w < x->nw ? w : x->nw - 1;
            x->gap_s[b][w] += g;
            x->gaps[b][w] += 1;
            all[b] += g;
        }
        last = t;
    }
    for (int b = 0; b < INTR_BANDS; b++) x->all_gap_s[b] = all[b];
    x->span_s = last - t0;
    x->short_min_s = floor_s;
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
    const size_t per = 2 * INTR_BANDS * (size_t)nw; /* a thread's windows: time and count of each band */
    double *mem = pl_calloc((size_t)workers * per, sizeof *mem), *v = pl_calloc((size_t)nw, sizeof *v);
    int rc = x && mem && v ? PL_OK : pl_errf(e, PL_ENOMEM, "out of memory");
    exec_gate gate;
    for (int i = 0; rc == PL_OK && i < workers; i++) {
        x[i] = (intr_thread){.gate = &gate, .cpu = ncpu > 0 ? cpus[i % ncpu] : -1, .seconds = seconds, .nw = nw, .win = win};
        for (int b = 0; b < INTR_BANDS; b++) {
            x[i].gap_s[b] = mem + (size_t)i * per + (size_t)(2 * b) * (size_t)nw;
            x[i].gaps[b] = mem + (size_t)i * per + (size_t)(2 * b + 1) * (size_t)nw;
        }
    }
    if (rc == PL_OK) rc = exec_team_run(workers, intr_main, x, sizeof *x, &gate, "interruption-measuring thread", e);
    if (rc == PL_OK) {
        r->workers = workers;
        r->seconds = seconds;
        r->windows = nw;
        double *share[INTR_BANDS] = {&r->share, &r->short_share}, *per_s[INTR_BANDS] = {&r->per_s, &r->short_per_s},
               *all[INTR_BANDS] = {&r->share_all, &r->short_share_all};
        for (int i = 0; i < workers; i++) r->short_min_s = fmax(r->short_min_s, x[i].short_min_s);
        if (r->short_min_s >= EXEC_GAP_MIN_S) r->short_min_s = EXEC_GAP_MIN_S; /* no band: nothing counted */
        for (int i = 0; i < workers; i++)
            for (int b = 0; b < INTR_BANDS; b++) {
                for (int w = 0; w < nw; w++) v[w] = x[i].gap_s[b][w] / win;
                *share[b] += median(v, nw) / workers;
                for (int w = 0; w < nw; w++) v[w] = x[i].gaps[b][w] / win;
                *per_s[b] += median(v, nw) / workers;
                if (x[i].span_s > 0) *all[b] += x[i].all_gap_s[b] / x[i].span_s / workers;
            }
    }
    free(x);
    free(mem);
    free(v);
    return rc;
}
