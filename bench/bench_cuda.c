/* bench_cuda.c: the CUDA backend's figures, printed side by side (never pass/fail):
 *   1. the cuBLAS peak measured on this GPU (8192^3 products, fp32, tf32, bf16, random operands,
 *      median of 10), and the rate of the model's own GEMM shapes (b x f x h) alone;
 *   2. for gpipe, 1f1b and zb-h1 with 4 ranks on one GPU, ranks sharing its SMs and (--sm-split)
 *      each on its own quarter: the executor's pass time against
 *        - the ideal: the simulator replaying the schedule with each stage's mean measured F, B,
 *          I, W and STEP durations of the same pass and free communication (the schedule's own
 *          bubbles, no executor overhead), median over the timed passes;
 *        - the prediction: the simulator driven by a GPU profile of one block (whole GPU, or the
 *          SM share of one of the 4 ranks), as `pipelab run --backend cuda` predicts;
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
 * prediction: free links, the profile's STEP per block), or -1. */
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
        sim_config c;
        sim_config_init(&c);
        sim_model_config(&sm, &c);
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

int main(int argc, char **argv) {
    /* line by line even into a file: a run stopped by a time limit keeps every figure it printed */
    setvbuf(stdout, NULL, _IOLBF, 0);
    int h = argc > 1 ? atoi(argv[1]) : 2048, b = argc > 2 ? atoi(argv[2]) : 256, m = argc > 3 ? atoi(argv[3]) : 8;
    int L = argc > 4 ? atoi(argv[4]) : 4;
    exec_precision prec = EXEC_PREC_BF16;
    if (argc > 5 && exec_precision_parse(argv[5], &prec)) {
        fprintf(stderr, "bench_cuda: precision must be fp32, tf32 or bf16\n");
        return 2;
    }
    if (h < 1 || b < 1 || m < 1 || L < RANKS) {
        fprintf(stderr, "usage: bench_cuda [WIDTH [ROWS [MICROBATCHES [LAYERS>=4 [fp32|tf32|bf16]]]]]\n");
        return 2;
    }
    pl_err e;
    if (exec_cuda_devices(&e) < 1) {
        printf("bench_cuda: skipped: %s\n", e.msg);
        return 77;
    }
    char name[96];
    int sms = exec_cuda_device_info(0, name, sizeof name, &e);
    printf("bench_cuda: %s, %d SMs; model width %d, ffn %d, %d blocks, %d rows per microbatch, %d microbatches, %s\n",
           name, sms, h, 4 * h, L, b, m, exec_precision_name(prec));
    /* 1. the peaks and the model's GEMM shapes alone */
    /* each part goes on after a failure (reported, the exit status says so at the end): the one
     * device check must bring back every figure it can */
    int failed = 0;
    double peak[3] = {0, 0, 0};
    for (int q = 0; q < 3; q++) {
        if (exec_cuda_gemm_rate(8192, 8192, 8192, (exec_precision)q, 10, &peak[q], &e) != PL_OK) {
            fprintf(stderr, "bench_cuda: peak %s: %s\n", exec_precision_name((exec_precision)q), e.msg);
            failed = 1;
            continue;
        }
        printf("cuBLAS peak %-5s 8192^3            %8.1f TFLOP/s\n", exec_precision_name((exec_precision)q), peak[q] / 1e12);
    }
    int shapes[3][3] = {{b, 4 * h, h}, {b, h, 4 * h}, {4 * h, h, b}}; /* F/I: b x f x h, b x h x f; W: f x h x b */
    for (int q = 0; q < 3; q++) {
        double rt = 0;
        if (exec_cuda_gemm_rate(shapes[q][0], shapes[q][1], shapes[q][2], prec, 50, &rt, &e) != PL_OK) {
            fprintf(stderr, "bench_cuda: shape: %s\n", e.msg);
            failed = 1;
            continue;
        }
        printf("model GEMM %-5s %5d x %5d x %5d %8.1f TFLOP/s  (%.0f%% of peak)\n", exec_precision_name(prec), shapes[q][0],
               shapes[q][1], shapes[q][2], rt / 1e12, 100 * rt / peak[prec]);
    }
    /* 2. the schedules, 4 ranks on GPU 0 */
    exec_config c;
    exec_config_default(&c);
    c.hidden = h;
    c.layers = L;
    c.microbatch_size = b;
    c.dataset_microbatches = 4; /* the data set is built on the CPU: keep it small */
    c.lr = 1e-3;
    c.warmup_passes = WARMUP;
    c.timed_passes = TIMED;
    c.record_ops = 1;
    c.backend = EXEC_BACKEND_CUDA;
    c.precision = prec;
    c.cuda_devices = 1;
    c.timeout_s = 120;
    const char *kinds[3] = {"gpipe", "1f1b", "zb-h1"};
    row rows[6];
    int nrow = 0;
    for (int split = 0; split < 2; split++) {
        c.sm_split = split;
        pl_buf t;
        pl_buf_init(&t);
        exec_layer_profile lp;
        if (exec_cuda_profile_csv(&c, 40, split ? RANKS : 1, NULL, &t, &lp, &e) != PL_OK) {
            fprintf(stderr, "bench_cuda: profile (%s): %s\n", split ? "split" : "shared", e.msg);
            pl_buf_free(&t);
            failed = 1;
            continue; /* split: a driver without green contexts; the shared rows stand */
        }
        cost_model *pm = cost_model_read_csv("gpu profile", t.data, t.len, &e);
        pl_buf_free(&t);
        if (!pm) fprintf(stderr, "bench_cuda: profile: %s (no predictions)\n", e.msg);
        printf("profile (%s) F %.3f ms, I %.3f ms, W %.3f ms, STEP %.3f ms per block\n", split ? "1/4 SMs" : "whole GPU",
               lp.f_s * 1e3, lp.i_s * 1e3, lp.w_s * 1e3, lp.step_s * 1e3);
        for (int k = 0; k < 3; k++) {
            sched *s = bench_lowered("bench_cuda", kinds[k], RANKS, m);
            if (!s) {
                failed = 1;
                continue;
            }
            exec_result r;
            if (exec_cuda_run(s, &c, &r, &e) != PL_OK) {
                fprintf(stderr, "bench_cuda: %s (%s): %s\n", kinds[k], split ? "split" : "shared", e.msg);
                sched_free(s);
                failed = 1;
                continue;
            }
            double ideal[TIMED];
            for (int p = 0; p < TIMED; p++) ideal[p] = bench_ideal_pass_s("bench_cuda", s, &r, p);
            double gs = 0, gf = 0;
            for (int q = 0; q < r.ranks; q++) {
                gs += r.rank[q].gemm_s;
                gf += r.rank[q].gemm_flops;
            }
            row *w = &rows[nrow++];
            snprintf(w->kind, sizeof w->kind, "%s", kinds[k]);
            snprintf(w->mode, sizeof w->mode, "%s", split ? "split" : "shared");
            w->meas_s = r.pass_median_s;
            w->ideal_s = exec_median(ideal, TIMED);
            w->pred_s = pm ? predict_s(s, &c, pm, lp.step_s) : -1;
            w->gemm_rate = gs > 0 ? gf / gs : 0;
            w->loss0 = r.loss[0];
            w->loss1 = r.loss[r.n_iters - 1];
            printf("run %-6s %-6s pass %.3f ms (min %.3f, max %.3f); busy per rank", kinds[k], w->mode, r.pass_median_s * 1e3,
                   r.pass_min_s * 1e3, r.pass_max_s * 1e3);
            for (int q = 0; q < r.ranks; q++) printf(" %.3f", r.rank[q].busy_s * 1e3);
            printf(" ms; %s\n", r.device);
            exec_result_free(&r);
            sched_free(s);
        }
        if (pm) cost_model_free(pm);
    }
    printf("\n%-6s %-6s %11s %11s %10s %11s %10s %12s %8s %s\n", "kind", "ranks", "measured_ms", "ideal_ms", "meas/ideal",
           "predict_ms", "pred/meas", "gemm_TFLOP/s", "of_peak", "loss first -> last");
    for (int i = 0; i < nrow; i++) {
        const row *w = &rows[i];
        printf("%-6s %-6s %11.3f %11.3f %10.3f %11.3f %10.3f %12.1f %7.0f%% %.4g -> %.4g\n", w->kind, w->mode, w->meas_s * 1e3,
               w->ideal_s * 1e3, w->meas_s / w->ideal_s, w->pred_s * 1e3, w->pred_s / w->meas_s, w->gemm_rate / 1e12,
               100 * w->gemm_rate / peak[prec], w->loss0, w->loss1);
    }
    printf("(4 ranks on one GPU; shared = their streams share all SMs, split = green contexts, 1/4 of the SMs each;\n"
           " ideal = the schedule replayed with the pass's own mean action times and free communication;\n"
           " predict = the simulator from the GPU profile; peak = cuBLAS %s 8192^3 on this GPU)\n", exec_precision_name(prec));
    return failed;
}
