/* bench_util.c: what the executor benchmarks share (bench_util.h). */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

sched *bench_lowered(const char *prog, const char *kind, int p, int m) {
    pl_err e;
    sched_gen_opts o = {p, m, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate(kind, &o, &e);
    sched *l = s ? sched_lower(s, &e) : NULL;
    if (!l) fprintf(stderr, "%s: %s: %s\n", prog, kind, e.msg);
    sched_free(s);
    return l;
}

double bench_ideal_pass_s(const char *prog, const sched *s, const exec_result *r, int pass) {
    int S = s->stages;
    double *sum = calloc((size_t)S * 4, sizeof(double));
    int *cnt = calloc((size_t)S * 4, sizeof(int));
    double step = 0;
    int nstep = 0;
    for (int q = 0; q < r->ranks; q++)
        for (size_t k = 0; k < r->rank[q].n_ops; k++) {
            const exec_op *o = &r->rank[q].ops[k];
            if (o->pass != pass) continue;
            int slot = o->act.kind == SCHED_F ? 0 : o->act.kind == SCHED_B ? 1 : o->act.kind == SCHED_I ? 2 : o->act.kind == SCHED_W ? 3 : -1;
            if (slot >= 0) {
                sum[o->act.stage * 4 + slot] += o->end_s - o->start_s;
                cnt[o->act.stage * 4 + slot]++;
            } else if (o->act.kind == SCHED_STEP) {
                step += o->end_s - o->start_s;
                nstep++;
            }
        }
    sim_basic b;
    sim_basic_init(&b);
    b.stages = S;
    b.stage = calloc((size_t)S, sizeof *b.stage);
    b.tstep_s = nstep ? step / nstep : 0;
    b.tcomm_s = 0;
    for (int q = 0; q < S; q++) {
        double *v[4] = {&b.stage[q].tf_s, &b.stage[q].tb_s, &b.stage[q].ti_s, &b.stage[q].tw_s};
        for (int k = 0; k < 4; k++) *v[k] = cnt[q * 4 + k] ? sum[q * 4 + k] / cnt[q * 4 + k] : -1;
        b.stage[q].bytes = b.stage[q].stash_bytes = b.stage[q].w_stash_bytes = b.stage[q].param_bytes = -1;
    }
    sim_costs costs = sim_basic_costs(&b);
    sim_config c;
    sim_config_init(&c);
    sim_result sr;
    pl_err e;
    double ideal = -1;
    if (sim_run(s, &costs, &c, &sr, &e) == PL_OK) {
        ideal = sr.makespan_s;
        sim_result_free(&sr);
    } else {
        fprintf(stderr, "%s: ideal of %s: %s\n", prog, s->kind, e.msg);
    }
    sim_basic_free(&b);
    free(sum);
    free(cnt);
    return ideal;
}
