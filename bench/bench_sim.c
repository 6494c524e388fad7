/* bench_sim.c: simulator speed and memory per action for 1f1b, interleaved and zb-h1 from
 * small to very large pipelines; prints lowering (wall) and simulation (thread CPU) time
 * separately. B/act: engine state per action; B/act+IR: plus the lowered schedule itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched.h"
#include "sim.h"

typedef struct shape { int p, m; } shape;

/* Returns the CPU time of this thread in seconds (less sensitive to other load than wall time). */
static double cpu_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Returns 0 after benchmarking one (kind, p, m, v), printing a row; *ns_per_action gets the
 * simulation time per action. Returns -1 when the schedule could not be built. */
static int bench_one(const char *kind, int p, int m, int v, double *ns_per_action) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, v, 0, SCHED_RECOMPUTE_NONE};
    double t0 = pl_now_s();
    sched *g = sched_generate(kind, &o, &e);
    if (!g) { fprintf(stderr, "%s p=%d m=%d: %s\n", kind, p, m, e.msg); return -1; }
    double t1 = pl_now_s();
    sched *s = sched_lower(g, &e);
    double t2 = pl_now_s();
    sched_free(g);
    if (!s) { fprintf(stderr, "lower %s: %s\n", kind, e.msg); return -1; }
    size_t compute = 0, total = sched_total_actions(s);
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) compute += sched_kind_is_compute((sched_kind)s->rank[q].acts[i].kind);
    sim_basic b;
    sim_basic_init(&b);
    b.ti_s = 0.5;
    b.tw_s = 0.5;
    b.tcomm_s = 0.01;
    sim_costs c = sim_basic_costs(&b);
    sim_config cfg;
    sim_config_init(&cfg);
    sim_result r;
    double best = 1e30;
    int reps = total < 2000000 ? 5 : 1;
    for (int k = 0; k < reps; k++) {
        double a = cpu_now_s();
        if (sim_run(s, &c, &cfg, &r, &e) != PL_OK) { fprintf(stderr, "sim %s: %s\n", kind, e.msg); sched_free(s); return -1; }
        double d = cpu_now_s() - a;
        if (d < best) best = d;
        if (k + 1 < reps) sim_result_free(&r);
    }
    *ns_per_action = best * 1e9 / (double)total;
    printf("%-12s %5d %6d %3d %10zu %10zu %9.3f %9.3f %9.3f %10.2f %8.1f %8.1f %10.4f\n", kind, p, m, v, compute, total,
           t1 - t0, t2 - t1, best, total / best / 1e6, (double)r.state_bytes / total,
           (double)(r.state_bytes + total * sizeof(sched_action)) / total, r.bubble);
    sim_result_free(&r);
    sched_free(s);
    return 0;
}

int main(int argc, char **argv) {
    int max_p = argc > 1 ? atoi(argv[1]) : 1024; /* ./bench_sim 64 skips the largest */
    const char *only = argc > 2 ? argv[2] : NULL; /* ./bench_sim 1024 zb-h1: one kind */
    const shape shapes[] = {{8, 64}, {64, 1024}, {1024, 8192}};
    const char *kinds[] = {"1f1b", "interleaved", "zb-h1"};
    printf("%-12s %5s %6s %3s %10s %10s %9s %9s %9s %10s %8s %8s %10s\n", "kind", "p", "m", "v", "compute", "actions",
           "gen_s", "lower_s", "sim_s", "Mact/s", "B/act", "B/act+IR", "bubble");
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
        if (lo > 0) printf("%-12s time per action largest / smallest: %.2f\n", kinds[k], hi / lo);
    }
    return 0;
}
