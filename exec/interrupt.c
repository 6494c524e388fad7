/* interrupt.c: the host's interruptions (exec_interruptions_measure): how much of a busy core's
 * time the host takes away in gaps too short to be a stall and too rare to be in a typical
 * action. A compute action of a few milliseconds meets one of them now and then; a pass, which
 * sums its actions, meets its share of them always. A profile's median over rounds leaves them
 * out, so a prediction from it is short by about their share (docs/validate_cpu.md, "What the
 * tail is made of"). */
#include "exec_int.h"
#include "platform.h"

#include <stdlib.h>
#include <string.h>

/* One measuring thread. */
typedef struct intr_thread {
    exec_gate *gate;
    int cpu;            /* its core, or -1 */
    double seconds;
    double gap_s;       /* time in gaps of (EXEC_GAP_MIN_S, EXEC_GAP_MAX_S] */
    long gaps;
    double span_s;      /* time measured */
} intr_thread;

/* exec_team_run's body: reads the clock back to back for x->seconds on its core. */
static void *intr_main(void *arg) {
    intr_thread *x = arg;
    if (!exec_gate_pass(x->gate)) return NULL;
    if (x->cpu >= 0) (void)exec_platform_pin_self(x->cpu); /* unpinned, it still measures its core's share */
    double t0 = pl_now_s(), last = t0, end = t0 + x->seconds;
    while (last < end) {
        double t = pl_now_s(), g = t - last;
        if (g > EXEC_GAP_MIN_S && g <= EXEC_GAP_MAX_S) {
            x->gap_s += g;
            x->gaps++;
        }
        last = t;
    }
    x->span_s = last - t0;
    return NULL;
}

int exec_interruptions_measure(int workers, double seconds, exec_interruptions *r, pl_err *e) {
    memset(r, 0, sizeof *r);
    if (workers < 1 || workers > EXEC_INTERRUPTIONS_MAX_WORKERS)
        return pl_errf(e, PL_EINPUT, "the interruptions' measurement takes 1 to %d workers, got %d",
                       EXEC_INTERRUPTIONS_MAX_WORKERS, workers);
    if (!(seconds > 0) || seconds > EXEC_INTERRUPTIONS_MAX_S)
        return pl_errf(e, PL_EINPUT, "the interruptions' measurement takes more than 0 and at most %g s, got %g",
                       EXEC_INTERRUPTIONS_MAX_S, seconds);
    int cpus[EXEC_INTERRUPTIONS_MAX_WORKERS];
    int ncpu = exec_platform_cores(cpus, EXEC_INTERRUPTIONS_MAX_WORKERS);
    intr_thread *x = pl_calloc((size_t)workers, sizeof *x);
    if (!x) return pl_errf(e, PL_ENOMEM, "out of memory");
    exec_gate gate;
    for (int i = 0; i < workers; i++) x[i] = (intr_thread){&gate, ncpu > 0 ? cpus[i % ncpu] : -1, seconds, 0, 0, 0};
    int rc = exec_team_run(workers, intr_main, x, sizeof *x, &gate, "interruption-measuring thread", e);
    if (rc == PL_OK) {
        r->workers = workers;
        r->seconds = seconds;
        for (int i = 0; i < workers; i++) {
            if (!(x[i].span_s > 0)) continue;
            r->share += x[i].gap_s / x[i].span_s / workers;
            r->per_s += (double)x[i].gaps / x[i].span_s / workers;
        }
    }
    free(x);
    return rc;
}
