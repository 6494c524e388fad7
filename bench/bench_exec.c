/* bench_exec.c: the executor's two overheads, printed side by side (never pass/fail):
 *   1. GEMM throughput of a worker (FLOPs of its F, I and W over its busy time, one rank) against
 *      the same six sgemm calls of a block run alone in a loop on one pinned core (target >= 0.9);
 *   2. executor pass time against the ideal from its own measured action times: the simulator
 *      replays the schedule with each stage's mean measured F, B, I, W and STEP durations and free
 *      communication (schedule overhead; target <= 1.05 for 2 ranks), for gpipe, 1f1b and zb-h1.
 * Usage: bench_exec [WIDTH [MICROBATCH_SIZE [MICROBATCHES]]]   (default 512 32 8) */
#include <gsl/gsl_cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec_int.h"
#include "platform/platform.h"
#include "pl_sched.h"
#include "sim.h"

/* Orders doubles for qsort. */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Returns the FLOP/s of the six GEMMs of one block's F, I and W (model.c's calls, 12 b h f
 * FLOPs), median of reps timings on the calling thread. */
static double blas_alone_flops(int b, int h, int f, int reps) {
    size_t bh = (size_t)b * h, bf = (size_t)b * f, hf = (size_t)h * f;
    float *m = calloc(4 * bh + 4 * bf + 4 * hf, sizeof(float));
    float *x = m, *gy = x + bh, *gx = gy + bh, *y = gx + bh, *hd = y + bh, *act = hd + bf, *scr = act + bf, *dh = scr + bf;
    float *w1 = dh + bf, *w2 = w1 + hf, *g1 = w2 + hf, *g2 = g1 + hf;
    for (size_t i = 0; i < 4 * bh + 4 * bf + 4 * hf; i++) m[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    double *t = calloc((size_t)reps, sizeof(double));
    for (int r = -2; r < reps; r++) {
        double t0 = pl_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, f, h, 1.0f, x, h, w1, h, 1.0f, hd, f);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, h, f, 1.0f, act, f, w2, f, 1.0f, y, h);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, f, h, 1.0f, gy, h, w2, f, 0.0f, scr, f);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, h, f, 1.0f, dh, f, w1, h, 1.0f, gx, h);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, f, h, b, 1.0f, dh, f, x, h, 1.0f, g1, h);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, f, b, 1.0f, gy, h, act, f, 1.0f, g2, f);
        if (r >= 0) t[r] = pl_now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double med = t[reps / 2];
    free(t);
    free(m);
    return 12.0 * b * (double)h * f / med;
}

/* Returns the lowered schedule kind for p ranks and m microbatches (NULL on error, printed). */
static sched *lowered(const char *kind, int p, int m) {
    pl_err e;
    sched_gen_opts o = {p, m, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate(kind, &o, &e);
    sched *l = s ? sched_lower(s, &e) : NULL;
    if (!l) fprintf(stderr, "bench_exec: %s: %s\n", kind, e.msg);
    sched_free(s);
    return l;
}

/* Fills c with the benchmark model: width h, f = 4h, L blocks, b rows, 2 warm-up and 7 timed
 * passes, op records on. */
static void bench_cfg(exec_config *c, int h, int L, int b) {
    exec_config_default(c);
    c->hidden = h;
    c->layers = L;
    c->microbatch_size = b;
    c->warmup_passes = 2;
    c->timed_passes = 7;
    c->record_ops = 1;
    c->dataset_microbatches = 16;
}

/* Returns the ideal pass time of r's schedule s: the simulator with each stage's mean measured
 * F/B/I/W durations, the mean STEP, free communication. */
static double ideal_pass_s(const sched *s, const exec_result *r) {
    int S = s->stages;
    double *sum = calloc((size_t)S * 4, sizeof(double));
    int *cnt = calloc((size_t)S * 4, sizeof(int));
    double step = 0;
    int nstep = 0;
    for (int q = 0; q < r->ranks; q++)
        for (size_t k = 0; k < r->rank[q].n_ops; k++) {
            const exec_op *o = &r->rank[q].ops[k];
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
        fprintf(stderr, "bench_exec: ideal of %s: %s\n", s->kind, e.msg);
    }
    sim_basic_free(&b);
    free(sum);
    free(cnt);
    return ideal;
}

int main(int argc, char **argv) {
    int h = argc > 1 ? atoi(argv[1]) : 512, b = argc > 2 ? atoi(argv[2]) : 32, m = argc > 3 ? atoi(argv[3]) : 8;
    if (h < 1 || b < 1 || m < 1) {
        fprintf(stderr, "usage: bench_exec [WIDTH [MICROBATCH_SIZE [MICROBATCHES]]]\n");
        return 2;
    }
    int f = 4 * h, L = 4;
    const char *blas = exec_blas_init();
    int cpus[1024];
    int ncores = exec_platform_cores(cpus, 1024);
    printf("bench_exec: width %d, ffn %d, microbatch %d rows, %d microbatches, %d blocks; %s, %d cores\n\n", h, f, b, m, L,
           blas, ncores);
    /* 1. GEMM throughput: the BLAS alone on one pinned core, then a 1-rank worker */
    if (ncores > 0) exec_platform_pin_self(cpus[0]);
    double alone = blas_alone_flops(b, h, f, 30);
    exec_config c;
    bench_cfg(&c, h, L, b);
    c.record_ops = 0;
    sched *s1 = lowered("gpipe", 1, m);
    exec_result r;
    pl_err e;
    double worker = 0;
    if (s1 && exec_run(s1, &c, &r, &e) == PL_OK) {
        worker = 12.0 * b * (double)h * f * L * m / r.rank[0].busy_s;
        exec_result_free(&r);
    } else if (s1) {
        fprintf(stderr, "bench_exec: %s\n", e.msg);
    }
    sched_free(s1);
    printf("%-34s %14s %14s %8s %8s\n", "GEMM throughput", "worker GFLOP/s", "BLAS GFLOP/s", "ratio", "target");
    printf("%-34s %14.2f %14.2f %8.3f %8s\n\n", "F+I+W of a block, 1 rank", worker * 1e-9, alone * 1e-9, worker / alone, ">= 0.9");
    /* 2. schedule overhead on 2 ranks */
    printf("%-34s %14s %14s %8s %8s\n", "schedule overhead (2 ranks)", "measured s", "ideal s", "ratio", "target");
    static const char *kinds[] = {"gpipe", "1f1b", "zb-h1"};
    for (int k = 0; k < 3; k++) {
        sched *s = lowered(kinds[k], 2, m);
        if (!s) continue;
        bench_cfg(&c, h, L, b);
        c.oversubscribe = 1;
        if (exec_run(s, &c, &r, &e) != PL_OK) {
            fprintf(stderr, "bench_exec: %s: %s\n", kinds[k], e.msg);
            sched_free(s);
            continue;
        }
        double ideal = ideal_pass_s(s, &r);
        printf("%-34s %14.6g %14.6g %8.3f %8s\n", kinds[k], r.pass_median_s, ideal, ideal > 0 ? r.pass_median_s / ideal : 0,
               "<= 1.05");
        exec_result_free(&r);
        sched_free(s);
    }
    return 0;
}
