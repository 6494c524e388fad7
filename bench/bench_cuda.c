/* bench_cuda.c: the CUDA backend's figures, printed side by side (never pass/fail):
 *   1. the cuBLAS peak measured on this GPU (8192^3 products, fp32, tf32, bf16, random operands,
 *      median of 10), and the rate of the model's own GEMM shapes (b x f x h) alone;
 *   2. for gpipe, 1f1b and zb-h1 with 4 ranks on one GPU, ranks sharing its SMs and (--sm-split)
 *      each on its own quarter: the executor's pass time against
 *        - the ideal: the simulator replaying the schedule with each stage's mean measured F, B,
 *          I, W and STEP durations of the same pass and free communication (the schedule's own
 *          bubbles, no executor overhead), median over the timed passes;
 *        - the prediction: the simulator driven by a GPU profile of one block (4 workers at once,
 *          sharing the SMs or each in its rank's share), as `pipelab run --backend cuda` predicts;
 *      and the GEMM rate the run achieved (its GEMM FLOPs over the time inside its GEMMs, events)
 *      against the peak.
 * A table comes last. Usage: bench_cuda [WIDTH [ROWS [MICROBATCHES [LAYERS [PRECISION]]]]]
 * (default 2048 256 8 4 bf16). Exits 77 without a usable GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "exec.h"
#include "exec_cuda.h"
#include "exec_drive.h"
#include "exec_int.h"
#include "pl_sched.h"
#include "sim.h"
#include "bench_util.h"

enum { WARMUP = 2, TIMED = 5, RANKS = 4 };

/* The simulator's iteration time for s and cfg from profile model m (as `pipelab run`'s
 * prediction: SEND/RECV on the profile's hand-off between two ranks on the GPU, the profile's
 * STEP per block), or -1. */
static double predict_s(const sched *s, const exec_config *cfg, const cost_model *m, double step_s) {
    pl_err e;
    cost_partition *p = exec_cost_partition(s, cfg, &e);
    if (!p) return -1;
    cost_opts o;
    exec_cost_opts(m, cfg, &o);
    sim_model sm;
    memset(&sm, 0, sizeof sm);
    double t = -1;
    if (sim_model_init(&sm, s, m, p, NULL, &o, &e) == PL_OK) {
        for (int q = 0; q < sm.stages; q++) sm.step_s[q] = step_s * (sm.bound[q + 1] - sm.bound[q]);
        cost_model_p2p_link(m, COST_TRANSPORT_THREADS, &sm.hw); /* the ranks' hand-off, when profiled */
        sim_config c;
        sim_config_init(&c);
        sim_model_config(&sm, &c);
        sim_config_executor(&c, s, 1); /* the CUDA compute stream waits at each RECV */
        sim_costs costs = sim_model_costs(&sm);
        sim_result r;
        if (sim_run(s, &costs, &c, &r, &e) == PL_OK) {
            t = r.iteration_time_s;
            sim_result_free(&r);
        }
    }
    if (t < 0) fprintf(stderr, "bench_cuda: prediction of %s: %s\n", s->kind, e.msg);
    sim_model_free(&sm);
    cost_partition_free(p);
    return t;
}

/* One row of the final table. */
typedef struct row {
    char kind[16], mode[8];
    double meas_s, ideal_s, pred_s, gemm_rate, loss0, loss1;
} row;

/* The benchmark's arguments: width h, rows b, microbatches m, blocks L, precision. */
typedef struct args { int h, b, m, L; exec_precision prec; } args;

/* Reads argv into *a; returns 0, or 2 after printing the usage. */
static int parse_args(int argc, char **argv, args *a) {
    enum { DEFAULT_WIDTH = 2048, DEFAULT_ROWS = 256, DEFAULT_MICROBATCHES = 8, DEFAULT_LAYERS = 4 };
    *a = (args){argc > 1 ? atoi(argv[1]) : DEFAULT_WIDTH, argc > 2 ? atoi(argv[2]) : DEFAULT_ROWS,
                argc > 3 ? atoi(argv[3]) : DEFAULT_MICROBATCHES, argc > 4 ? atoi(argv[4]) : DEFAULT_LAYERS, EXEC_PREC_BF16};
    if (argc > 5 && exec_precision_parse(argv[5], &a->prec)) {
        fprintf(stderr, "bench_cuda: precision must be fp32, tf32 or bf16\n");
        return 2;
    }
    if (a->h < 1 || a->b < 1 || a->m < 1 || a->L < RANKS) {
        fprintf(stderr, "usage: bench_cuda [WIDTH [ROWS [MICROBATCHES [LAYERS>=4 [fp32|tf32|bf16]]]]]\n");
        return 2;
    }
    return 0;
}

/* Section 1: prints the cuBLAS peaks into peak[precision] and the model's GEMM shapes alone.
 * Each part goes on after a failure (reported): returns 1 when any failed, else 0. */
static int peaks_section(const args *a, double peak[3]) {
    enum { PEAK_N = 8192, PEAK_REPS = 10, SHAPE_REPS = 50 };
    pl_err e;
    int failed = 0;
    for (int q = 0; q < 3; q++) {
        peak[q] = 0;
        if (exec_cuda_gemm_rate(PEAK_N, PEAK_N, PEAK_N, (exec_precision)q, PEAK_REPS, &peak[q], &e) != PL_OK) {
            fprintf(stderr, "bench_cuda: peak %s: %s\n", exec_precision_name((exec_precision)q), e.msg);
            failed = 1;
            continue;
        }
        printf("cuBLAS peak %-5s 8192^3            %8.1f TFLOP/s\n", exec_precision_name((exec_precision)q), peak[q] / 1e12);
    }
    int h = a->h, b = a->b;
    int shapes[3][3] = {{b, 4 * h, h}, {b, h, 4 * h}, {4 * h, h, b}}; /* F/I: b x f x h, b x h x f; W: f x h x b */
    for (int q = 0; q < 3; q++) {
        double rt = 0;
        if (exec_cuda_gemm_rate(shapes[q][0], shapes[q][1], shapes[q][2], a->prec, SHAPE_REPS, &rt, &e) != PL_OK) {
            fprintf(stderr, "bench_cuda: shape: %s\n", e.msg);
            failed = 1;
            continue;
        }
        printf("model GEMM %-5s %5d x %5d x %5d %8.1f TFLOP/s  (%.0f%% of peak)\n", exec_precision_name(a->prec),
               shapes[q][0], shapes[q][1], shapes[q][2], rt / 1e12, 100 * rt / peak[a->prec]);
    }
    return failed;
}

/* Fills c for the schedules' runs: 4 ranks on GPU 0, the model of a, ops recorded. */
static void run_config(const args *a, exec_config *c) {
    exec_config_default(c);
    c->hidden = a->h;
    c->layers = a->L;
    c->microbatch_size = a->b;
    c->dataset_microbatches = 4; /* the data set is built on the CPU: keep it small */
    c->lr = 1e-3;
    c->warmup_passes = WARMUP;
    c->timed_passes = TIMED;
    c->record_ops = 1;
    c->backend = EXEC_BACKEND_CUDA;
    c->precision = a->prec;
    c->cuda_devices = 1;
    c->timeout_s = 120;
}

/* Fills row w from run r of s (measured, ideal, predicted from profile pm, GEMM rate, loss)
 * and prints the run's line. */
static void fill_row(row *w, const char *kind, int split, const sched *s, const exec_config *c, const exec_result *r,
                     const cost_model *pm, double step_s) {
    double ideal[TIMED];
    for (int p = 0; p < TIMED; p++) ideal[p] = bench_ideal_pass_s("bench_cuda", s, r, p);
    double gs = 0, gf = 0;
    for (int q = 0; q < r->ranks; q++) {
        gs += r->rank[q].gemm_s;
        gf += r->rank[q].gemm_flops;
    }
    snprintf(w->kind, sizeof w->kind, "%s", kind);
    snprintf(w->mode, sizeof w->mode, "%s", split ? "split" : "shared");
    w->meas_s = r->pass_median_s;
    w->ideal_s = exec_median(ideal, TIMED);
    w->pred_s = pm ? predict_s(s, c, pm, step_s) : -1;
    w->gemm_rate = gs > 0 ? gf / gs : 0;
    w->loss0 = r->loss[0];
    w->loss1 = r->loss[r->n_iters - 1];
    printf("run %-6s %-6s pass %.3f ms (min %.3f, max %.3f); busy per rank", kind, w->mode, r->pass_median_s * 1e3,
           r->pass_min_s * 1e3, r->pass_max_s * 1e3);
    for (int q = 0; q < r->ranks; q++) printf(" %.3f", r->rank[q].busy_s * 1e3);
    printf(" ms; %s\n", r->device);
}

/* Section 2 for one SM mode (split: green contexts, a quarter of the SMs per rank): profiles
 * one block, then runs gpipe, 1f1b and zb-h1, appending a row each to rows[*nrow]. Returns 1
 * when any part failed (reported), else 0. */
static int mode_section(const args *a, exec_config *c, int split, row *rows, int *nrow) {
    enum { PROFILE_REPS = 40 };
    static const char *const kinds[3] = {"gpipe", "1f1b", "zb-h1"};
    pl_err e;
    c->sm_split = split;
    pl_buf t;
    pl_buf_init(&t);
    exec_layer_profile lp;
    if (exec_cuda_profile_csv(c, PROFILE_REPS, RANKS, NULL, &t, &lp, &e) != PL_OK) {
        fprintf(stderr, "bench_cuda: profile (%s): %s\n", split ? "split" : "shared", e.msg);
        pl_buf_free(&t);
        return 1; /* split: a driver without green contexts; the shared rows stand */
    }
    cost_model *pm = cost_model_read_csv("gpu profile", t.data, t.len, &e);
    pl_buf_free(&t);
    if (!pm) fprintf(stderr, "bench_cuda: profile: %s (no predictions)\n", e.msg);
    printf("profile (%s) F %.3f ms, I %.3f ms, W %.3f ms, STEP %.3f ms per block\n", split ? "4 at once, 1/4 SMs each" : "4 at once, sharing",
           lp.f_s * 1e3, lp.i_s * 1e3, lp.w_s * 1e3, lp.step_s * 1e3);
    int failed = 0;
    for (int k = 0; k < 3; k++) {
        sched *s = bench_lowered("bench_cuda", kinds[k], RANKS, a->m);
        exec_result r;
        if (!s || exec_cuda_run(s, c, &r, &e) != PL_OK) {
            if (s) fprintf(stderr, "bench_cuda: %s (%s): %s\n", kinds[k], split ? "split" : "shared", e.msg);
            sched_free(s);
            failed = 1;
            continue;
        }
        fill_row(&rows[(*nrow)++], kinds[k], split, s, c, &r, pm, lp.step_s);
        exec_result_free(&r);
        sched_free(s);
    }
    if (pm) cost_model_free(pm);
    return failed;
}

/* Prints the final table of the n rows against the peak of precision prec. */
static void print_table(const row *rows, int n, const double peak[3], exec_precision prec) {
    printf("\n%-6s %-6s %11s %11s %10s %11s %10s %12s %8s %s\n", "kind", "ranks", "measured_ms", "ideal_ms", "meas/ideal",
           "predict_ms", "pred/meas", "gemm_TFLOP/s", "of_peak", "loss first -> last");
    for (int i = 0; i < n; i++) {
        const row *w = &rows[i];
        printf("%-6s %-6s %11.3f %11.3f %10.3f %11.3f %10.3f %12.1f %7.0f%% %.4g -> %.4g\n", w->kind, w->mode, w->meas_s * 1e3,
               w->ideal_s * 1e3, w->meas_s / w->ideal_s, w->pred_s * 1e3, w->pred_s / w->meas_s, w->gemm_rate / 1e12,
               100 * w->gemm_rate / peak[prec], w->loss0, w->loss1);
    }
    printf("(4 ranks on one GPU; shared = their streams share all SMs, split = green contexts, 1/4 of the SMs each;\n"
           " ideal = the schedule replayed with the pass's own mean action times and free communication;\n"
           " predict = the simulator from the GPU profile; peak = cuBLAS %s 8192^3 on this GPU)\n", exec_precision_name(prec));
}

int main(int argc, char **argv) {
    /* line by line even into a file: a run stopped by a time limit keeps every figure it printed */
    setvbuf(stdout, NULL, _IOLBF, 0);
    args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    pl_err e;
    if (exec_cuda_devices(&e) < 1) {
        printf("bench_cuda: skipped: %s\n", e.msg);
        return 77;
    }
    char name[96];
    int sms = exec_cuda_device_info(0, name, sizeof name, &e);
    printf("bench_cuda: %s, %d SMs; model width %d, ffn %d, %d blocks, %d rows per microbatch, %d microbatches, %s\n",
           name, sms, a.h, 4 * a.h, a.L, a.b, a.m, exec_precision_name(a.prec));
    /* each part goes on after a failure (reported, the exit status says so at the end): the one
     * device check must bring back every figure it can */
    double peak[3];
    int failed = peaks_section(&a, peak);
    exec_config c;
    run_config(&a, &c);
    row rows[6];
    int nrow = 0;
    for (int split = 0; split < 2; split++) failed |= mode_section(&a, &c, split, rows, &nrow);
    print_table(rows, nrow, peak, a.prec);
    return failed;
}
