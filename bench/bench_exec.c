/* bench_exec.c: the executor's two overheads, printed side by side (never pass/fail):
 *   1. GEMM throughput of a worker against the BLAS alone on the same core: the time a 1-rank
 *      gpipe worker spends inside its sgemm calls (the model's GEMM clock, exec_gemm_clock: the
 *      GEMMs of its F, I and W) against exactly the same sgemm calls, in the same order, on
 *      buffers of the same shapes and footprint (L distinct blocks of weights and gradients, m
 *      microbatches of activations, so weights are as cold or warm as in the worker), run alone,
 *      timed the same way (target >= 0.9). The worker's other compute (bias + GELU, residual
 *      copies, the loss, bias gradients, STEP) is measured and printed beside it, not hidden in
 *      the ratio; the whole busy time as a throughput is printed too.
 *   2. executor pass time against the ideal from its own measured action times: the simulator
 *      replays the schedule with each stage's mean measured F, B, I, W and STEP durations and free
 *      communication (schedule overhead; target <= 1.05 for 2 ranks), for gpipe, 1f1b, zb-h1 and
 *      interleaved (2 chunks).
 * Each timed pass is compared with the ideal made from that pass's own action times, and a run's
 * ratio is the median over its passes (measured s and ideal s: the medians). Each case runs 3
 * times (the machine is noisy): GEMM rows take each side's best; schedule rows show the run with
 * the lowest pass time, and the ratios of all three runs.
 * Usage: bench_exec [WIDTH [MICROBATCH_SIZE [MICROBATCHES [dump]]]]   (default 512 32 8; dump
 * prints the timeline of each schedule's shown run) */
#include <gsl/gsl_cblas.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec_int.h"
#include "platform/platform.h"
#include "pl_sched.h"
#include "sim.h"
#include "bench_util.h"

enum { WARMUP = 2, TIMED = 7, RUNS = 3 };

/* Fills c with the benchmark model: width h, f = 4h, L blocks, b rows, 2 warm-up and 7 timed
 * passes, op records on. */
static void bench_cfg(exec_config *c, int h, int L, int b) {
    exec_config_default(c);
    c->hidden = h;
    c->layers = L;
    c->microbatch_size = b;
    c->warmup_passes = WARMUP;
    c->timed_passes = TIMED;
    c->record_ops = 1;
    c->dataset_microbatches = 16;
}

/* Returns the time at which the data the compute action a of rank q reads from another rank
 * was sent (sent[]: -1 not yet), 0 when it reads none: the input of an F of a stage whose
 * previous stage is elsewhere, the output gradient of an I or B whose next stage is elsewhere,
 * both for an overlapped pair. As the executor does, a RECV only posts; the compute waits. */
static double input_sent_s(const sched *s, const double *sent, int M, int q, int kind, int st, int mb) {
    if (kind == SCHED_F && st > 0 && s->stage_rank[st - 1] != q) return sent[(size_t)st * M + mb];
    if ((kind == SCHED_I || kind == SCHED_B) && st + 1 < s->stages && s->stage_rank[st + 1] != q)
        return sent[((size_t)s->stages + st) * M + mb];
    return 0;
}

/* Returns the exact ideal of timed pass `pass` of r (schedule s): each rank walks its actions
 * in their order, every compute action (F, B, I, W, STEP, ...) taking exactly the time it took
 * in that pass, every SEND instant and every compute that reads another rank's data starting
 * no sooner than that data's SEND (a RECV only posts, as in the executor): the pass's critical
 * path through its own actions. What the measured pass adds to it is the executor's overhead
 * (message copies, wake-ups, gaps between actions). -1 when a rank's records do not walk
 * (cannot happen for a run that succeeded). */
static double exact_ideal_s(const sched *s, const exec_result *r, int pass) {
    int p = r->ranks, M = (int)sched_total_microbatches(s);
    size_t nkey = 2 * (size_t)s->stages * (size_t)M;
    double *sent = malloc(nkey * sizeof *sent);          /* [F/B][dest stage][mb]: time sent, -1 not yet */
    size_t *pc = calloc((size_t)p, sizeof *pc), *first = calloc((size_t)p, sizeof *first), *last = calloc((size_t)p, sizeof *last);
    double *t = calloc((size_t)p, sizeof *t);
    for (size_t i = 0; i < nkey; i++) sent[i] = -1;
    for (int q = 0; q < p; q++) { /* this pass's records of rank q: [first, last) */
        first[q] = last[q] = r->rank[q].n_ops;
        for (size_t k = 0; k < r->rank[q].n_ops; k++)
            if (r->rank[q].ops[k].pass == pass) {
                if (first[q] == r->rank[q].n_ops) first[q] = k;
                last[q] = k + 1;
            }
        pc[q] = first[q];
    }
    int progress = 1, left = 1;
    while (progress && left) {
        progress = left = 0;
        for (int q = 0; q < p; q++) {
            for (; pc[q] < last[q]; pc[q]++) {
                const exec_op *o = &r->rank[q].ops[pc[q]];
                int k = o->act.kind, st = o->act.stage, mb = o->act.mb;
                if (k == SCHED_SEND_F || k == SCHED_SEND_B) {
                    int to = k == SCHED_SEND_F ? st + 1 : st - 1;
                    sent[((size_t)(k == SCHED_SEND_B) * s->stages + to) * M + mb] = t[q];
                } else if (k == SCHED_RECV_F || k == SCHED_RECV_B) {
                    /* posts only */
                } else {
                    double at = k == SCHED_OVERLAP ? input_sent_s(s, sent, M, q, SCHED_F, st, mb) : input_sent_s(s, sent, M, q, k, st, mb);
                    double at2 = k == SCHED_OVERLAP ? input_sent_s(s, sent, M, q, o->act.kind2, o->act.stage2, o->act.mb2) : 0;
                    if (at < 0 || at2 < 0) break; /* its data has not been sent yet */
                    if (at > t[q]) t[q] = at;
                    if (at2 > t[q]) t[q] = at2;
                    t[q] += o->end_s - o->start_s;
                }
                progress = 1;
            }
            if (pc[q] < last[q]) left = 1;
        }
    }
    double ideal = -1;
    if (!left) {
        ideal = 0;
        for (int q = 0; q < p; q++)
            if (t[q] > ideal) ideal = t[q];
    } else {
        fprintf(stderr, "bench_exec: the records of %s do not replay\n", s->kind);
    }
    free(sent); free(pc); free(first); free(last); free(t);
    return ideal;
}

/* ---------------------------------------------------------------- the GEMMs alone */

/* Buffers of the replay, shaped like a 1-rank worker's: weights and gradients of L blocks
 * (W1 [f,h], b1, W2 [h,f], b2 each), and per microbatch the block inputs x(0..L) [b,h] (x(L) =
 * the output), H and A [L][b,f], the gradients g(0..L) [b,h]; dA scratch [b,f]. 64-byte aligned. */
typedef struct replay {
    int b, h, f, L, m;
    size_t nf, per_mb;
    float *mem, *w, *g, *mbs, *scr;
} replay;

/* Returns n rounded up to 16 floats. */
static size_t r16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Allocates and fills rp (N(0,1) activations, weights scaled like the model's), on memory from
 * the worker's own allocator (exec_lines_alloc: cache lines, huge pages from 4 MiB), so that both
 * sides of the ratio stream through the same kind of pages. Returns 0 or -1. */
static int replay_init(replay *rp, int b, int h, int f, int L, int m) {
    size_t bh = (size_t)b * h, bf = (size_t)b * f;
    *rp = (replay){b, h, f, L, m, r16(2 * (size_t)h * f + f + h), 0, NULL, NULL, NULL, NULL, NULL};
    rp->per_mb = 2 * (size_t)(L + 1) * r16(bh) + 2 * (size_t)L * r16(bf);
    size_t n = 2 * (size_t)L * rp->nf + (size_t)m * rp->per_mb + r16(bf);
    rp->mem = exec_lines_alloc(n, 0);
    if (!rp->mem) return -1;
    exec_fill_normal(7, 0, rp->mem, n);
    rp->w = rp->mem;
    rp->g = rp->w + (size_t)L * rp->nf;
    rp->mbs = rp->g + (size_t)L * rp->nf;
    rp->scr = rp->mbs + (size_t)m * rp->per_mb;
    for (size_t i = 0; i < (size_t)L * rp->nf; i++) rp->w[i] *= (float)(1.0 / sqrt((double)f));
    memset(rp->g, 0, (size_t)L * rp->nf * sizeof(float));
    return 0;
}

/* Returns the buffers of microbatch j: x(k), H(k), A(k), g(k). */
static float *rx(const replay *rp, int j, int k) { return rp->mbs + (size_t)j * rp->per_mb + (size_t)k * r16((size_t)rp->b * rp->h); }
static float *rg(const replay *rp, int j, int k) { return rx(rp, j, rp->L + 1 + k); }
static float *rH(const replay *rp, int j, int k) {
    return rx(rp, j, 2 * (rp->L + 1)) + (size_t)k * r16((size_t)rp->b * rp->f);
}
static float *rA(const replay *rp, int j, int k) { return rH(rp, j, rp->L + k); }

/* One timed sgemm (the worker's clock pattern: a clock read on each side). */
static void tgemm(double *t_s, double *flops, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    double t0 = pl_now_s();
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    *t_s += pl_now_s() - t0;
    *flops += 2.0 * M * (double)N * K;
}

/* Runs the sgemm calls of rank 0's pass of the 1-rank schedule s, in its order, exactly as
 * model.c issues them (F: blocks up, I and W: blocks down, no input gradient out of block 0 of
 * stage 0); adds their time and FLOPs to *t_s and *flops. */
static void replay_pass(const replay *rp, const sched *s, double *t_s, double *flops) {
    int b = rp->b, h = rp->h, f = rp->f, L = rp->L;
    size_t hf = (size_t)h * f;
    const sched_rank *rk = &s->rank[0];
    for (size_t a = 0; a < rk->n; a++) {
        int kind = rk->acts[a].kind, j = rk->acts[a].mb;
        if (kind == SCHED_F)
            for (int k = 0; k < L; k++) {
                const float *w1 = rp->w + (size_t)k * rp->nf, *w2 = w1 + hf + f;
                tgemm(t_s, flops, CblasNoTrans, CblasTrans, b, f, h, rx(rp, j, k), h, w1, h, 0.0f, rH(rp, j, k), f);
                tgemm(t_s, flops, CblasNoTrans, CblasTrans, b, h, f, rA(rp, j, k), f, w2, f, 1.0f, rx(rp, j, k + 1), h);
            }
        if (kind == SCHED_I || kind == SCHED_B)
            for (int k = L - 1; k >= 0; k--) {
                const float *w1 = rp->w + (size_t)k * rp->nf, *w2 = w1 + hf + f;
                tgemm(t_s, flops, CblasNoTrans, CblasNoTrans, b, f, h, rg(rp, j, k + 1), h, w2, f, 0.0f, rp->scr, f);
                if (k > 0) tgemm(t_s, flops, CblasNoTrans, CblasNoTrans, b, h, f, rH(rp, j, k), f, w1, h, 1.0f, rg(rp, j, k), h);
            }
        if (kind == SCHED_W || kind == SCHED_B)
            for (int k = L - 1; k >= 0; k--) {
                float *g1 = rp->g + (size_t)k * rp->nf, *g2 = g1 + hf + f;
                tgemm(t_s, flops, CblasTrans, CblasNoTrans, f, h, b, rH(rp, j, k), f, rx(rp, j, k), h, 1.0f, g1, h);
                tgemm(t_s, flops, CblasTrans, CblasNoTrans, h, f, b, rg(rp, j, k + 1), h, rA(rp, j, k), f, 1.0f, g2, f);
            }
    }
}

/* Returns the GFLOP/s of the replay alone: WARMUP passes, then the FLOPs over the time inside
 * sgemm of TIMED passes (as the worker's figure is made); *flops_pass gets one pass's FLOPs. */
static double alone_gflops(const replay *rp, const sched *s, double *flops_pass) {
    double t = 0, fl = 0;
    for (int p = 0; p < WARMUP; p++) replay_pass(rp, s, &t, &fl);
    t = fl = 0;
    for (int p = 0; p < TIMED; p++) replay_pass(rp, s, &t, &fl);
    *flops_pass = fl / TIMED;
    return fl / t * 1e-9;
}

/* Returns the total time of the actions of kind k in r's timed passes, per pass. */
static double kind_s(const exec_result *r, int k) {
    double t = 0;
    for (int q = 0; q < r->ranks; q++)
        for (size_t i = 0; i < r->rank[q].n_ops; i++)
            if (r->rank[q].ops[i].act.kind == k) t += r->rank[q].ops[i].end_s - r->rank[q].ops[i].start_s;
    return t / r->timed_passes;
}

/* Prints the timeline of r (one line per action, times from the first timed pass's start). */
static void dump_ops(const exec_result *r) {
    for (int q = 0; q < r->ranks; q++)
        for (size_t i = 0; i < r->rank[q].n_ops; i++) {
            const exec_op *o = &r->rank[q].ops[i];
            char t[64];
            sched_action_format(&o->act, t, sizeof t);
            printf("  rank %d pass %d %-14s %10.6f %10.6f %9.6f\n", q, o->pass, t, o->start_s, o->end_s, o->end_s - o->start_s);
        }
}

/* The benchmark's shape: width h, ffn f, microbatch rows b, microbatches m, blocks L. */
typedef struct shape { int h, f, b, m, L, dump; } shape;

/* The best of RUNS of the 1-rank GEMM section: the worker's and the replay's throughput. */
typedef struct gemm_best { double alone, worker, flops_alone, busy, gemm, step, flops_w; } gemm_best;

/* Runs the 1-rank gpipe worker and its GEMMs alone RUNS times each into *g (the best of each).
 * Returns 0, or 1 after printing the error. */
static int gemm_runs(const shape *z, gemm_best *g) {
    sched *s1 = bench_lowered("bench_exec", "gpipe", 1, z->m);
    replay rp;
    if (!s1 || replay_init(&rp, z->b, z->h, z->f, z->L, z->m) != 0) return 1;
    exec_config c;
    exec_result r;
    pl_err e;
    memset(g, 0, sizeof *g);
    int rc = 0;
    for (int run = 0; run < RUNS && rc == 0; run++) {
        double fa, a = alone_gflops(&rp, s1, &fa);
        if (a > g->alone) { g->alone = a; g->flops_alone = fa; }
        bench_cfg(&c, z->h, z->L, z->b);
        if (exec_run(s1, &c, &r, &e) != PL_OK) {
            fprintf(stderr, "bench_exec: %s\n", e.msg);
            rc = 1;
            break;
        }
        double w = r.rank[0].gemm_flops / r.rank[0].gemm_s * 1e-9;
        if (w > g->worker) {
            g->worker = w;
            g->busy = r.rank[0].busy_s;
            g->gemm = r.rank[0].gemm_s;
            g->flops_w = r.rank[0].gemm_flops;
            g->step = kind_s(&r, SCHED_STEP);
        }
        exec_result_free(&r);
    }
    free(rp.mem);
    sched_free(s1);
    return rc;
}

/* Prints section 1: GEMM throughput of a 1-rank worker against its GEMMs alone. Returns 0 or 1. */
static int gemm_section(const shape *z) {
    gemm_best g;
    if (gemm_runs(z, &g) != 0) return 1;
    printf("%-44s %14s %14s %8s %8s\n", "GEMM throughput (1 rank, gpipe)", "worker GFLOP/s", "alone GFLOP/s", "ratio", "target");
    printf("%-44s %14.2f %14.2f %8.3f %8s\n", "time inside sgemm in F, I, W vs same calls", g.worker, g.alone,
           g.worker / g.alone, ">= 0.9");
    if (fabs(g.flops_w - g.flops_alone) > 1e-6 * g.flops_alone)
        printf("  WARNING: the replay does %.6g FLOPs per pass, the worker %.6g\n", g.flops_alone, g.flops_w);
    double other = g.busy - g.gemm - g.step;
    printf("  worker compute per pass %.4f s: GEMMs %.4f s (%.1f%%), bias/GELU/copies/loss/bias grads in F, I, W %.4f s "
           "(%.1f%%), STEP %.4f s (%.1f%%)\n", g.busy, g.gemm, 100 * g.gemm / g.busy, other, 100 * other / g.busy, g.step,
           100 * g.step / g.busy);
    printf("  whole busy time as GEMM throughput: %.2f GFLOP/s, %.3f of alone (includes the non-GEMM work above)\n\n",
           g.flops_w / g.busy * 1e-9, g.flops_w / g.busy * 1e-9 / g.alone);
    return 0;
}

/* The best of RUNS runs of one schedule on 2 ranks, against its ideals. */
typedef struct overhead_best {
    double meas, ideal, ratio, rmean, ratios[RUNS];
    exec_result r; /* the best run's result (owned) */
} overhead_best;

/* Folds run `run`'s result r into *o: each timed pass against the ideal made from its own
 * action times (the same noise on both sides), the median over the passes; keeps the fastest
 * run's result and frees the other. */
static void overhead_fold(const sched *s, exec_result *r, int run, overhead_best *o) {
    double rat[TIMED], idl[TIMED], rmean[TIMED];
    for (int t = 0; t < TIMED; t++) {
        idl[t] = exact_ideal_s(s, r, t);
        rat[t] = idl[t] > 0 ? r->pass_s[t] / idl[t] : 0;
        double im = bench_ideal_pass_s("bench_exec", s, r, t);
        rmean[t] = im > 0 ? r->pass_s[t] / im : 0;
    }
    o->ratios[run] = exec_median(rat, TIMED);
    if (run == 0 || r->pass_median_s < o->meas) {
        o->meas = r->pass_median_s;
        o->ideal = exec_median(idl, TIMED);
        o->ratio = o->ratios[run];
        o->rmean = exec_median(rmean, TIMED);
        exec_result_free(&o->r);
        o->r = *r;
    } else {
        exec_result_free(r);
    }
}

/* Prints one row of section 2: schedule kind on 2 ranks, RUNS runs, measured against ideal. */
static void overhead_row(const shape *z, const char *kind) {
    sched *s = bench_lowered("bench_exec", kind, 2, z->m);
    if (!s) return;
    overhead_best o;
    memset(&o, 0, sizeof o);
    int ok = 1;
    for (int run = 0; run < RUNS && ok; run++) {
        exec_config c;
        exec_result r;
        pl_err e;
        bench_cfg(&c, z->h, z->L, z->b); /* not oversubscribed: one core per rank, or the run is refused */
        if (exec_run(s, &c, &r, &e) != PL_OK) {
            fprintf(stderr, "bench_exec: %s: %s\n", kind, e.msg);
            ok = 0;
            break;
        }
        overhead_fold(s, &r, run, &o);
    }
    if (ok) {
        char label[64]; /* with its chunks when a rank holds several stages: "interleaved v=2" */
        if (s->stages > s->ranks) snprintf(label, sizeof label, "%s v=%d", kind, s->stages / s->ranks);
        else snprintf(label, sizeof label, "%s", kind);
        printf("%-44s %14.6g %14.6g %8.3f %8s  ", label, o.meas, o.ideal, o.ratio, "<= 1.05");
        for (int run = 0; run < RUNS; run++) printf(" %.3f", o.ratios[run]);
        printf("   %.3f\n", o.rmean);
        if (z->dump) dump_ops(&o.r);
    }
    exec_result_free(&o.r);
    sched_free(s);
}

int main(int argc, char **argv) {
    enum { MAX_CORES = 1024, DEFAULT_WIDTH = 512, DEFAULT_ROWS = 32, DEFAULT_MICROBATCHES = 8, BLOCKS = 4 };
    shape z = {argc > 1 ? atoi(argv[1]) : DEFAULT_WIDTH, 0, argc > 2 ? atoi(argv[2]) : DEFAULT_ROWS,
               argc > 3 ? atoi(argv[3]) : DEFAULT_MICROBATCHES, BLOCKS, argc > 4 && strcmp(argv[4], "dump") == 0};
    if (z.h < 1 || z.b < 1 || z.m < 1) {
        fprintf(stderr, "usage: bench_exec [WIDTH [MICROBATCH_SIZE [MICROBATCHES [dump]]]]\n");
        return 2;
    }
    z.f = 4 * z.h;
    const char *blas = exec_blas_init();
    int cpus[MAX_CORES];
    int ncores = exec_platform_cores(cpus, MAX_CORES);
    printf("bench_exec: width %d, ffn %d, microbatch %d rows, %d microbatches, %d blocks; %s, %d cores; %d warm-up + %d timed "
           "passes, best of %d runs\n\n", z.h, z.f, z.b, z.m, z.L, blas, ncores, WARMUP, TIMED, RUNS);
    /* 1. GEMM throughput: a 1-rank worker (pinned to the first core), and its GEMMs alone on it */
    cpu_set_t all;
    if (pthread_getaffinity_np(pthread_self(), sizeof all, &all) != 0) CPU_ZERO(&all);
    if (ncores > 0) exec_platform_pin_self(cpus[0]);
    if (gemm_section(&z) != 0) return 1;
    /* 2. schedule overhead on 2 ranks: unpin this thread first, or the executor would see one
     * core (it places workers on the cores the calling thread may use) */
    pthread_setaffinity_np(pthread_self(), sizeof all, &all);
    printf("%-44s %14s %14s %8s %8s   %-20s %s\n", "schedule overhead (2 ranks)", "measured s", "ideal s", "ratio", "target",
           "ratios of the 3 runs", "vs mean-time ideal");
    /* interleaved (2 chunks: a block a stage) hands over twice as often as the others: its row
     * shows what the hand-offs cost beside the compute */
    static const char *const kinds[] = {"gpipe", "1f1b", "zb-h1", "interleaved"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) overhead_row(&z, kinds[k]);
    return 0;
}
