/* bench_layout.c: wall time to simulate the largest rows of Megatron-LM's Table 1 (Narayanan et
 * al., SC21) as `pipelab simulate` does them: the 1T model on 3,072 A100s (T 8, P 64, D 6,
 * 512 microbatches, 1f1b) and the 530B model (T 8, P 35, v 3, D 9, 280 microbatches,
 * interleaved), against the target of well under a second. Each phase (generate + lower, model
 * setup, simulation) is timed over 5 runs; the table gives the best and the median in
 * milliseconds and the total's ratio to 1 s. Printed, not asserted. Usage: bench_layout */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_sched.h"
#include "sim.h"

#define RUNS 5
#define TARGET_S 1.0

/* One row: the model and its layout. */
typedef struct row {
    const char *name, *kind;
    int layers, hidden, heads, tp, pp, chunks, gpus, mbs, batch;
} row;

static const row rows[] = {
    {"1T, 3072 GPUs", "1f1b", 128, 25600, 160, 8, 64, 1, 3072, 1, 3072},
    {"530B, 2520 GPUs", "interleaved", 105, 20480, 128, 8, 35, 3, 2520, 1, 2520},
};

/* Returns the i-th smallest of n values (sorted in place). */
static double nth(double *v, int n, int i) {
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
            double t = v[b];
            v[b] = v[b - 1];
            v[b - 1] = t;
        }
    return v[i];
}

/* Times one run of row r's three phases into t[3]; returns 0, or -1 after printing an error. */
static int run_once(const row *r, double *t, double *iter_s) {
    pl_err e;
    pl_err_clear(&e);
    cost_layout l;
    cost_layout_init(&l);
    l.layers = r->layers, l.hidden = r->hidden, l.heads = r->heads, l.seq = 2048, l.vocab = 51200;
    l.tp = r->tp, l.pp = r->pp, l.chunks = r->chunks, l.dp = r->gpus / (r->tp * r->pp);
    l.microbatch = r->mbs, l.global_batch = r->batch, l.recompute = COST_RC_FULL;
    double t0 = pl_now_s();
    sched_gen_opts o = {l.pp, cost_layout_microbatches(&l), l.chunks, 0, SCHED_RECOMPUTE_FULL};
    sched *g = sched_generate(r->kind, &o, &e), *s = g ? sched_lower(g, &e) : NULL;
    sched_free(g);
    double t1 = pl_now_s();
    sim_model_spec spec;
    sim_model_spec_init(&spec);
    spec.model = "gpt";
    spec.hardware = "dgx-a100";
    spec.layout = &l;
    sim_model_setup ms;
    memset(&ms, 0, sizeof ms);
    int rc = s ? sim_model_setup_build(&ms, &spec, s, &e) : PL_EINPUT;
    double t2 = pl_now_s();
    sim_result res;
    memset(&res, 0, sizeof res);
    if (rc == PL_OK) {
        sim_config c;
        sim_config_init(&c);
        sim_model_config(&ms.sm, &c);
        sim_costs costs = sim_model_costs(&ms.sm);
        rc = sim_run(s, &costs, &c, &res, &e);
    }
    double t3 = pl_now_s();
    if (rc != PL_OK) fprintf(stderr, "bench_layout: %s: %s\n", r->name, e.msg);
    t[0] = t1 - t0, t[1] = t2 - t1, t[2] = t3 - t2;
    *iter_s = res.iteration_time_s;
    sim_result_free(&res);
    sim_model_setup_free(&ms);
    sched_free(s);
    return rc == PL_OK ? 0 : -1;
}

int main(void) {
    printf("%-16s %22s %22s %22s %22s %8s %10s\n", "row", "schedule ms best/med", "setup ms best/med",
           "simulate ms best/med", "total ms best/med", "/ 1 s", "iter s");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        double ph[3][RUNS], tot[RUNS], iter = 0;
        for (int i = 0; i < RUNS; i++) {
            double t[3];
            if (run_once(&rows[k], t, &iter)) return 1;
            for (int p = 0; p < 3; p++) ph[p][i] = t[p];
            tot[i] = t[0] + t[1] + t[2];
        }
        printf("%-16s", rows[k].name);
        for (int p = 0; p < 3; p++) printf(" %10.2f /%10.2f", 1e3 * nth(ph[p], RUNS, 0), 1e3 * nth(ph[p], RUNS, RUNS / 2));
        double med = nth(tot, RUNS, RUNS / 2);
        printf(" %10.2f /%10.2f %8.3f %10.3f\n", 1e3 * nth(tot, RUNS, 0), 1e3 * med, med / TARGET_S, iter);
    }
    return 0;
}
