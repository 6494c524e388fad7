/* bench_sim.c: simulator speed and memory per action for 1f1b, interleaved (v = 2) and zb-h1
 * at (p, m) = (8, 64), (64, 1024), (1024, 8192), against the targets of the simulator issue:
 * at least 10 M simulated actions/s on one core, under 64 bytes of memory per action, and time
 * per action growing at most 1.5x from the smallest case to the largest.
 *
 * Each case is lowered and simulated at least 3 times (small cases more, until 0.2 s of
 * simulation), keeping the best: lowering in wall time, simulation in thread CPU time (less
 * sensitive to other load). Actions are all actions of the lowered schedule (compute, SEND,
 * RECV, REDUCE_GRAD, STEP). B/act is the engine's state (sim_result.state_bytes) per action;
 * B/act+IR adds the lowered schedule itself (sizeof(sched_action) per action).
 * Usage: bench_sim [max_p [kind]]   (bench_sim 64 skips the largest case). Printed, not asserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_sched.h"
#include "sim.h"

#define TARGET_MACT_S 10.0
#define TARGET_B_ACT 64.0
#define TARGET_RATIO 1.5

typedef struct shape { int p, m; } shape;

/* Returns the CPU time of this thread in seconds. */
static double cpu_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *mark(int ok) { return ok ? "ok" : "MISS"; }

/* Benchmarks one (kind, p, m, v) and prints a row; *ns_per_action gets the simulation time per
 * action. Returns 0, or -1 when the schedule could not be built or simulated. */
static int bench_one(const char *kind, int p, int m, int v, double *ns_per_action) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, v, 0, SCHED_RECOMPUTE_NONE};
    sched *s = NULL;
    double lower_best = 1e30;
    for (int k = 0; k < 3; k++) {
        sched *g = sched_generate(kind, &o, &e);
        if (!g) { fprintf(stderr, "%s p=%d m=%d: %s\n", kind, p, m, e.msg); sched_free(s); return -1; }
        double t0 = pl_now_s();
        sched *l = sched_lower(g, &e);
        double t1 = pl_now_s();
        sched_free(g);
        if (!l) { fprintf(stderr, "lower %s: %s\n", kind, e.msg); sched_free(s); return -1; }
        if (t1 - t0 < lower_best) lower_best = t1 - t0;
        sched_free(s);
        s = l;
    }
    size_t total = sched_total_actions(s);
    sim_basic b;
    sim_basic_init(&b);
    b.ti_s = 0.5;
    b.tw_s = 0.5;
    b.tcomm_s = 0.01;
    sim_costs c = sim_basic_costs(&b);
    sim_config cfg;
    sim_config_init(&cfg);
    sim_result r;
    double best = 1e30, spent = 0;
    size_t state = 0;
    double bubble = 0;
    for (int k = 0; k < 3 || (spent < 0.2 && k < 10000); k++) {
        double a = cpu_now_s();
        if (sim_run(s, &c, &cfg, &r, &e) != PL_OK) { fprintf(stderr, "sim %s: %s\n", kind, e.msg); sched_free(s); return -1; }
        double d = cpu_now_s() - a;
        spent += d;
        if (d < best) best = d;
        state = r.state_bytes;
        bubble = r.bubble_fraction;
        sim_result_free(&r);
    }
    *ns_per_action = best * 1e9 / (double)total;
    double mact = total / best / 1e6, bpa = (double)state / total;
    char name[48];
    snprintf(name, sizeof name, "%s p=%d m=%d", kind, p, m);
    printf("%-26s %11zu %9.3f %9.4f %8.2f %-4s %8.1f %-4s %9.1f %8.4f\n", name, total, lower_best, best, mact,
           mark(mact >= TARGET_MACT_S), bpa, mark(bpa < TARGET_B_ACT),
           (double)(state + total * sizeof(sched_action)) / total, bubble);
    sched_free(s);
    return 0;
}

int main(int argc, char **argv) {
    int max_p = argc > 1 ? atoi(argv[1]) : 1024;
    const char *only = argc > 2 ? argv[2] : NULL;
    const shape shapes[] = {{8, 64}, {64, 1024}, {1024, 8192}};
    const char *kinds[] = {"1f1b", "interleaved", "zb-h1"};
    printf("targets: >= %.0f M actions/s (simulation, one core); < %.0f bytes/action; time/action largest/smallest <= %.1fx\n",
           TARGET_MACT_S, TARGET_B_ACT, TARGET_RATIO);
    printf("%-26s %11s %9s %9s %8s %-4s %8s %-4s %9s %8s\n", "case", "actions", "lower_s", "sim_s", "Mact/s", "", "B/act",
           "", "B/act+IR", "bubble");
    double ratio[3] = {0, 0, 0};
    for (size_t k = 0; k < 3; k++) {
        if (only && strcmp(only, kinds[k]) != 0) continue;
        double lo = 0, hi = 0;
        for (size_t i = 0; i < 3; i++) {
            if (shapes[i].p > max_p) continue;
            double ns;
            int v = strcmp(kinds[k], "interleaved") == 0 ? 2 : 0;
            if (bench_one(kinds[k], shapes[i].p, shapes[i].m, v, &ns) != 0) continue;
            if (i == 0) lo = ns;
            hi = ns;
        }
        if (lo > 0) ratio[k] = hi / lo;
    }
    printf("\ntime per action, largest case / smallest case (target <= %.1f):\n", TARGET_RATIO);
    for (size_t k = 0; k < 3; k++)
        if (ratio[k] > 0) printf("  %-12s %5.2f  %s\n", kinds[k], ratio[k], mark(ratio[k] <= TARGET_RATIO));
    return 0;
}
