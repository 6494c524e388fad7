/* profile.c: per-block F, I, W and STEP times (the median over rounds of repetitions of each
 * round's mean), the measurements `pipelab profile` and `pipelab run` turn into a cost-model
 * profile: on the calling thread, on threads of its own (exec_profile_layers_n), or on a run's
 * own workers between its passes (exec_prof_worker_*, exec_config.profile_between_reps).
 *
 * The input gradient of the model's first block is also timed alone (I0): the executor's first
 * stage computes no gradient for the model's input, one GEMM fewer; the profile CSV gives block 0
 * that time. The loss gradient of each microbatch is the run's (MSE against a target), and the
 * STEP updates with a learning rate of 0, so that every value keeps the magnitudes of a real
 * model (a fixed N(0, 1) loss gradient and real updates made the weights overflow within two
 * rounds, and the rounds after timed arithmetic on infinities and NaNs).
 *
 * The timed work has the working set of a real run, not of one block in a loop: the L blocks of
 * the model are distinct (their own weights and gradient accumulators, as the ranks of a run
 * hold them together in the shared caches; at most PROFILE_MAX_BYTES of them or a thread's
 * share of twice the last-level cache, so that wide models still fit), and microbatches go
 * through them in rounds of PROFILE_SLOTS, each with its own stashed activations: all forwards
 * of a round (block 0 to L-1), then the input gradients (block L-1 to 0) and the weight
 * gradients of each microbatch, so every backward reads activations stashed several
 * microbatch-passes earlier, as in a pipeline. On a run's workers, F and I read the weights
 * where the rank's passes read them, in its arena, and in each gap W and the STEP work there too
 * on the rank's gradients, weights and momentum, which the rank's last STEP left (exec_prof_worker_lend;
 * the run trains as it would without the rounds). A first round is untimed (page faults, BLAS warm-up). Every sample is one block,
 * one microbatch; each kind's time is the median over the rounds of the mean sample of each
 * round (round_medians says why not the median sample). Timing one block on hot
 * buffers instead under-predicted the executor's per-block times: on the 2-core development VM
 * (32 MB L3), width 256 and 8 blocks, it gave F 0.45, I 0.45, W 0.29 ms where a traced run's
 * actions took 0.68-0.87, 0.51-0.74 and 0.45-0.70 ms per block, and this profile 0.64-0.83,
 * 0.59-0.76, 0.43-0.65 (docs/validate_cpu.md).
 *
 * Concurrency (exec_profile_layers_n): a run computes on all its P ranks at once, which share
 * the last-level cache and the memory bandwidth, so the profile can time the same work on P
 * threads at once, pinned to the cores the executor's ranks use, each on its own ceil(L / P)
 * blocks (a rank's share of the model) and its own buffers, a barrier before every round; the
 * medians are over all threads' rounds. It also times the optimizer STEP of one block (the
 * executor's SGD loop, momentum when cfg has it) after every round, and one more microbatch
 * per round whose I runs right after its F and whose W right after that I (reuse distance 0:
 * IH, WH; its F, right after the round's backwards, FB; sim/sim_reuse.c). F, I and W are also summarized by slot: the round's first
 * microbatch, the first F, I, W of the blocks since the round began (after the previous round's
 * STEP, or after a run's pass and prof_restore), against the others (first-touch term,
 * sim/sim_reuse.c). Reading the CSV's comment lines back: profile_lines.c. */
#include "exec_int.h"
#include "platform.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Microbatches in flight in one profiling round (exec.h). */
#define PROFILE_SLOTS EXEC_PROFILE_SLOTS
/* Microbatches of a round's again samples (prof_again): a streak on the same blocks, the last one
 * timed. Fewer than PROFILE_SLOTS (they take slots 1 ..). */
#define PROFILE_AGAIN_MBS 3
/* Most bytes of distinct block weights and gradients profiled (fewer blocks when they are wide),
 * unless a thread's share of twice the last-level cache is more (prof_max_bytes). */
#define PROFILE_MAX_BYTES ((size_t)256 << 20)

/* Most cores the concurrent profile uses. */
#define PROFILE_MAX_THREADS 256

/* What the profiling threads share. */
typedef struct prof_shared {
    const exec_config *cfg;
    int reps, threads, pin;
    int cpus[PROFILE_MAX_THREADS], ncpus;
    pthread_barrier_t bar;
    exec_gate gate;      /* threads wait until all exist (exec_team_run) */
} prof_shared;

/* One profiling thread: its blocks and buffers, its samples and outcome. The concurrent profile
 * runs one per thread of its own (prof_main); a run profiled between its passes gives one to each
 * worker, which calls its rounds in the gaps (exec_prof_worker_*). */
struct exec_prof_worker {
    prof_shared *sh;   /* NULL for a worker's */
    const exec_config *cfg;
    int tid, threads;
    exec_dims d;
    int L;             /* blocks held */
    int next;          /* the next timed round, 0 .. rounds - 1 */
    int opens;         /* a gap's timed rounds open with an untimed one (exec_prof_opens) */
    size_t ns, nstep;  /* samples of each of F, I, W; of STEP */
    size_t ni0;        /* samples of I without the input gradient (block 0's, one per microbatch) */
    size_t nhot;       /* samples of each of IH and WH: one more microbatch per round through every
                        * block, its I right after its F and its W right after that I */
    int ga;            /* blocks of the again samples (exec_prof_again_blocks) */
    size_t nagain;     /* samples of each of FA, IA, WA: per round, ga blocks' F for the last of a
                        * streak of PROFILE_AGAIN_MBS microbatches right after the others', then
                        * each one's I and W (prof_again) */
    size_t nver;       /* samples of each of FT, IT, WT, FO, IO, WO: per round, every block's of the
                        * last microbatch of the cycle on two weight versions and in place
                        * (prof_versions), in the rounds of a gap where the rank's STEPs go into a
                        * new version; 0 in the other rounds */
    size_t nshare;     /* samples of each of FL, FS, FX, BL, BS and BX (the sharing term's,
                        * exec_prof_worker_share): per round, every block's F or backward of one
                        * microbatch; 0 with one worker */
    int share_r;       /* the round the sharing term's phases record into: the last timed one, -1
                        * after an untimed one */
    size_t rounds;     /* timed rounds: each holds ns / rounds samples of F, I, W, nstep / rounds of
                        * STEP, ni0 / rounds of I0, nhot / rounds of IH and of WH, nagain /
                        * rounds of FA, IA and WA, nver / rounds of FT .. WO and nshare / rounds
                        * of FL .. BX */
    size_t nt;         /* samples of each of F, I, W taken so far */
    double *t;         /* [3 ns + nstep + ni0 + 3 nhot + 3 nagain + 6 nver + 6 nshare]: F, I, W, STEP,
                        * I0, IH, WH, FA, IA, WA, FB, FT, IT, WT, FO, IO, WO, FL, FS, FX, BL, BS, BX */
    float *mem;        /* the blocks and the slots (NULL after a failed allocation) */
    const float **wk;  /* [L] the weights block k's F and I read: the k-th block its rank holds, in
                        * the run's arena (exec_xrank_held_block), else its own copy in mem */
    float **sk, **ok, **gk, **mk; /* [L] block k's weights the STEP reads, and where it writes
                        * them (in place, or a new version as the rank's), gradients W accumulates
                        * and the STEP reads and clears, momentum (NULL without): its own in mem,
                        * or in a gap the rank's (exec_prof_worker_lend) */
    int lent;          /* blocks lent by the rank for this gap (their momentum kept in mem's) */
    int each_step;     /* 1 when every stage of the lending rank steps after each of its backwards
                        * (sched_stage_steps_each_backward): the cycle prof_versions runs */
    int rc;
    pl_err err;
};
typedef struct exec_prof_worker prof_thread;

/* The most bytes of weights and gradients each of `threads` profiling threads holds:
 * PROFILE_MAX_BYTES, or the thread's share of twice the last-level cache the system reports
 * where that is more. The cap only bounds the profile's memory; below it the profile holds a
 * rank's whole share, so that its blocks leave the caches between two uses as the rank's do. A
 * host whose last-level cache holds a rank's wide blocks (a 508 MiB one was seen) would otherwise
 * time fewer blocks than the rank streams: 3 of a stage's 4 dense blocks of width 1024, the
 * weights of 3 staying cached where 4 did not. The share keeps many threads on one large cache
 * within twice that cache in all. */
static size_t prof_max_bytes(int threads) {
    long long llc = exec_platform_llc_bytes();
    size_t share = llc > 0 ? 2 * (size_t)llc / (size_t)(threads > 1 ? threads : 1) : 0;
    return share > PROFILE_MAX_BYTES ? share : PROFILE_MAX_BYTES;
}

/* Blocks one profiling thread holds: all L alone, a rank's share ceil(L / P) of P threads, at
 * most prof_max_bytes(threads) of weights and gradients. */
static int prof_blocks(const exec_config *cfg, const exec_dims *d, int threads) {
    size_t nf = exec_block_floats(d);
    size_t fit = prof_max_bytes(threads) / (2 * nf * sizeof(float));
    size_t L = cfg->layers < 1 ? 1 : (size_t)cfg->layers;
    if (threads > 1) L = (L + (size_t)threads - 1) / (size_t)threads;
    return (int)(L <= fit ? L : fit > 0 ? fit : 1);
}

int exec_prof_blocks(const exec_config *cfg, int threads) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    return prof_blocks(cfg, &d, threads);
}

/* Waits at the barrier of the threads (none alone). */
static void prof_wait(prof_shared *sh) {
    if (sh->threads > 1) pthread_barrier_wait(&sh->bar);
}

int exec_prof_again_blocks(const exec_config *cfg, int blocks, int stages) {
    if (stages < 1) return 0;
    int layers = cfg->layers < 1 ? 1 : cfg->layers, g = (layers + stages / 2) / stages;
    return g < 1 ? 1 : g > blocks ? (blocks < 1 ? 1 : blocks) : g;
}

int exec_prof_again_stages(const sched *s) {
    return s && s->stages > s->ranks ? s->stages : 0;
}

int exec_prof_rounds(int reps) {
    return reps < 1 ? 0 : (reps + PROFILE_SLOTS - 1) / PROFILE_SLOTS;
}

/* The FLOPs of a round under which a gap's timed rounds open with an untimed one: the switch from
 * a pass's work to the profile's costs about a millisecond (a round right after a pass took 10-40%
 * longer than one after a round at 3.5 ms a round, and a pass right after the rounds 1.2x at
 * under 5 ms a pass, 1.02-1.05x at 5-20 ms, nothing visible at 20-100 ms: docs/validate_cpu.md,
 * "The gap's opening round"), so a round of 8 GFLOP, 0.2-0.4 s on the development VM's cores,
 * takes it as under 0.5% of its time, while an opening round would add a whole round to each gap. */
#define PROFILE_OPEN_MAX_FLOPS 8e9

double exec_prof_round_flops(const exec_config *cfg, int threads, int again_stages) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    double f, i, i0, w;
    exec_block_flops(&d, &f, &i, &i0, &w);
    int L = prof_blocks(cfg, &d, threads);
    /* the slots' microbatches and the reuse-distance-0 one through every block, the again
     * samples' streak of PROFILE_AGAIN_MBS through the first blocks, a stage's worth */
    return ((double)L * (PROFILE_SLOTS + 1) + (double)PROFILE_AGAIN_MBS * exec_prof_again_blocks(cfg, L, again_stages)) * (f + i + w);
}

int exec_prof_opens(const exec_config *cfg, int threads, int again_stages) {
    return exec_prof_round_flops(cfg, threads, again_stages) < PROFILE_OPEN_MAX_FLOPS;
}

int exec_prof_gap_rounds(int reps, int gaps, int g, int warm, int opens, int *untimed) {
    long long R = exec_prof_rounds(reps), G = gaps;
    int timed = g >= 0 && G > 0 ? (int)(R * (g + 1) / G - R * g / G) : 0;
    /* the warm-up round opens the first gap; any later gap with timed rounds opens with one
     * untimed round of its own when the rounds are short (opens) */
    *untimed = warm || (timed > 0 && opens);
    return timed;
}

/* Floats from block k's input in a slot to block k + 1's: the input [b, h], then the block's
 * state, each on a cache line (as the run's arena keeps them when b h and the state fill whole
 * lines: exec_int.h, EXEC_LINE_BYTES). */
static size_t prof_block_stride(const exec_dims *d) {
    return exec_line_round((size_t)d->b * d->h) + exec_line_round(exec_block_state_floats(d));
}

/* Returns block input xk's state in a slot: the line after its input [b, h]. */
static float *prof_state_of(const exec_dims *d, float *xk) { return xk + exec_line_round((size_t)d->b * d->h); }

/* Floats of one slot: each of x's blocks' input and state, then the output y [b, h]. */
static size_t prof_per_slot(const prof_thread *x) {
    return (size_t)x->L * prof_block_stride(&x->d) + exec_line_round((size_t)x->d.b * x->d.h);
}

/* Where thread x's buffers start, in floats from x->mem, each on a cache line: the weights w,
 * gradients g and momentum mo [L nf] (mo when used), the PROFILE_SLOTS slots, the gradients at
 * the L + 1 block boundaries gb [L + 1, b h], the backward's scratch, the target tg [b, h];
 * `all`: the floats of them all. */
typedef struct prof_layout {
    size_t w, g, mo, slots, gb, scr, tg, all;
} prof_layout;

static prof_layout prof_layout_of(const prof_thread *x) {
    const exec_dims *d = &x->d;
    size_t wl = exec_line_round((size_t)x->L * exec_block_floats(d)), bh = (size_t)d->b * d->h;
    prof_layout o;
    o.w = 0;
    o.g = wl;
    o.mo = 2 * wl;
    o.slots = o.mo + (x->cfg->momentum != 0.0 ? wl : 0);
    o.gb = o.slots + (size_t)PROFILE_SLOTS * prof_per_slot(x);
    o.scr = o.gb + exec_line_round((size_t)(x->L + 1) * bh);
    o.tg = o.scr + exec_line_round(exec_block_scratch_floats(d));
    o.all = o.tg + exec_line_round(bh);
    return o;
}

/* exec_int.h. prof_init's allocations: mem (prof_layout_of), the samples t, wk and sk. */
double exec_prof_worker_bytes(const exec_config *cfg, int threads, int rounds, int again_stages) {
    prof_thread x;
    memset(&x, 0, sizeof x);
    x.cfg = cfg;
    exec_dims_of(cfg, &x.d);
    x.L = prof_blocks(cfg, &x.d, threads);
    double R = rounds > 0 ? rounds : 0, L = x.L, ga = exec_prof_again_blocks(cfg, x.L, again_stages);
    double samples = EXEC_PROF_FIW * R * PROFILE_SLOTS * L + R * L + R * PROFILE_SLOTS + 3 * R * L + 3 * R * ga +
                     6 * R * L + (threads > 1 ? 6 * R * L : 0) + 1;
    return (double)exec_lines_bytes(prof_layout_of(&x).all, cfg->small_pages) + samples * sizeof(double) +
           5 * L * sizeof(float *);
}

/* Points x's W and STEP at its own weights, gradients and momentum in mem. */
static void prof_own(prof_thread *x) {
    prof_layout o = prof_layout_of(x);
    size_t nf = exec_block_floats(&x->d);
    for (int k = 0; k < x->L; k++) {
        x->sk[k] = x->ok[k] = x->mem + o.w + (size_t)k * nf;
        x->gk[k] = x->mem + o.g + (size_t)k * nf;
        x->mk[k] = x->cfg->momentum != 0.0 ? x->mem + o.mo + (size_t)k * nf : NULL;
    }
}

/* Prepares thread tid of `threads` for `rounds` timed rounds (after the warm-up round): its
 * blocks, slots and sample arrays. Sets x->rc and x->err on failure (x->mem NULL then). */
static void prof_init(prof_thread *x, const exec_config *cfg, int tid, int threads, int rounds, int again_stages,
                      const exec_xrank *from) {
    x->cfg = cfg;
    x->tid = tid;
    x->threads = threads;
    x->next = 0; /* the next timed round */
    exec_dims_of(cfg, &x->d);
    const exec_dims *d = &x->d;
    x->L = prof_blocks(cfg, d, threads);
    const int S = PROFILE_SLOTS, L = x->L;
    size_t nf = exec_block_floats(d), bh = (size_t)d->b * d->h;
    prof_layout o = prof_layout_of(x);
    x->rounds = (size_t)(rounds > 0 ? rounds : 0);
    x->ns = x->rounds * S * (size_t)L;
    x->nstep = x->rounds * (size_t)L;
    x->ni0 = x->rounds * S;
    x->nhot = x->rounds * (size_t)L;
    x->ga = exec_prof_again_blocks(cfg, L, again_stages);
    x->opens = exec_prof_opens(cfg, threads, again_stages);
    x->nagain = x->rounds * (size_t)x->ga;
    x->nver = x->rounds * (size_t)L;
    x->nshare = threads > 1 ? x->rounds * (size_t)L : 0;
    x->share_r = -1;
    x->mem = exec_lines_alloc(o.all, cfg->small_pages);
    x->t = pl_calloc(EXEC_PROF_FIW * x->ns + x->nstep + x->ni0 + 3 * x->nhot + 3 * x->nagain + 6 * x->nver + 6 * x->nshare + 1,
                     sizeof(double));
    x->wk = pl_calloc((size_t)L, sizeof *x->wk);
    x->sk = pl_calloc(4 * (size_t)L, sizeof *x->sk);
    if (!x->mem || !x->t || !x->wk || !x->sk) {
        x->rc = pl_errf(&x->err, PL_ENOMEM, "out of memory profiling %d blocks of width %d", L, d->h);
        free(x->mem);
        x->mem = NULL;
        return;
    }
    float *w = x->mem + o.w, *slots = x->mem + o.slots, *tg = x->mem + o.tg;
    x->ok = x->sk + L;
    x->gk = x->ok + L;
    x->mk = x->gk + L;
    x->lent = 0;
    prof_own(x);
    /* thread x holds blocks x L .. x L + L - 1 of the model (its rank's share), copied from its
     * rank's arena when the rank holds them */
    for (int k = 0; k < L; k++) {
        const float *w0 = from ? exec_xrank_initial_block(from, tid * L + k) : NULL;
        if (w0) memcpy(w + (size_t)k * nf, w0, nf * sizeof(float));
        else exec_block_init(d, cfg->init_seed, tid * L + k, w + (size_t)k * nf);
        /* F and I stream the weights from where the rank's passes stream them: the run's arena
         * (each gap then lends its newest version, with the gradients and momentum W and the
         * STEP work on: exec_prof_worker_lend). Copies of the same weights elsewhere streamed
         * 3-4% faster for wide blocks on few rows, and the profile read them low against the
         * passes (docs/validate_cpu.md, "The profile's weights where the run keeps them") */
        const float *held = from ? exec_xrank_held_block(from, k) : NULL;
        x->wk[k] = held ? held : w + (size_t)k * nf;
    }
    for (int s = 0; s < S; s++) exec_fill_normal(cfg->data_seed, (uint64_t)s, slots + (size_t)s * prof_per_slot(x), bh);
    exec_fill_normal(cfg->target_seed, (uint64_t)tid, tg, bh); /* what the outputs are trained towards */
}

/* Times round r's microbatch at reuse distance 0 through x's blocks (x->wk, x->gk):
 * its forward from slot 0's input x0 (block k's input and state at + k prof_block_stride), the output
 * at y; FB: it runs right after the round's backwards of another microbatch on the same blocks,
 * as a 1F1B stage's forward follows its backward, where the round's F follow forwards), then at
 * once its I from the last block to the first (IH, the first block's with the input gradient,
 * as I's samples), then its W (WH). In the round's other microbatches 1 to 3 forwards come
 * between a block's F and its I, as in most of a pipeline's backwards; here none does, as on a
 * stage whose backward follows its own forward (sim_reuse.c). */
static void prof_hot(prof_thread *x, int r, float *x0, float *st0, float *y, float *gb, float *scr,
                     const float *tg) {
    const exec_dims *d = &x->d;
    const int L = x->L;
    size_t bh = (size_t)d->b * d->h, xs = prof_block_stride(d);
    double *ih = x->t + EXEC_PROF_FIW * x->ns + x->nstep + x->ni0 + (size_t)r * L, *wh = ih + x->nhot;
    double *fb = x->t + EXEC_PROF_FIW * x->ns + x->nstep + x->ni0 + 2 * x->nhot + 3 * x->nagain + (size_t)r * L;
#define HX(k) (x0 + (size_t)(k) * xs)
#define HS(k) (st0 + (size_t)(k) * xs)
    for (int k = 0; k < L; k++) {
        double t0 = pl_now_s();
        exec_block_fwd(d, x->wk[k], HX(k), HS(k), k + 1 < L ? HX(k + 1) : y);
        fb[k] = pl_now_s() - t0;
    }
    memcpy(gb + (size_t)L * bh, y, bh * sizeof(float));
    exec_mse_grad(d, gb + (size_t)L * bh, tg);
    for (int k = L - 1; k >= 0; k--) {
        double t0 = pl_now_s();
        if (k > 0) {
            exec_block_bwd_i(d, x->wk[k], HX(k), HS(k), gb + (size_t)(k + 1) * bh, gb + (size_t)k * bh, scr);
        } else {
            exec_block_bwd_i(d, x->wk[0], HX(0), HS(0), gb + bh, NULL, scr);
            exec_block_bwd_gx(d, x->wk[0], HX(0), HS(0), gb + bh, gb);
        }
        ih[k] = pl_now_s() - t0;
    }
    for (int k = L - 1; k >= 0; k--) {
        double t0 = pl_now_s();
        exec_block_bwd_w(d, HX(k), HS(k), gb + (size_t)(k + 1) * bh, x->gk[k]);
        wh[k] = pl_now_s() - t0;
    }
#undef HX
#undef HS
}

/* Times round r's F, I and W again on x's first ga blocks (exec_prof_again_blocks), from the
 * PROFILE_AGAIN_MBS slots whose first block's input is at in[0], in[1], ... (block k's input and
 * state at + k prof_block_stride): a streak of microbatches on the same blocks, as a rank
 * holding several stages runs its consecutive actions on one of them (looped-bfs, interleaved,
 * V schedules; sim_reuse.c). The blocks' F for each in turn (the last timed, FA); then for each
 * in turn its I from the last block to the first and its W (the last's timed, IA and WA), as a
 * streak of B's runs them. The last of the streak finds the weights (and gradients) the others
 * just used in cache when ga blocks fit, where the round's own F, I, W come with all x's blocks
 * between two uses of a block.
 *
 * Two measured choices (docs/validate_cpu.md, "The again samples: a streak, and a B's order"):
 * the timed microbatch is the third of its streak, not the second, because a run's streak of
 * forwards on small blocks keeps speeding up after its second (looped-bfs, width 320, 4 rows:
 * 350, 296, 271, 265, 259, 250 us a block), the caches filling with the stage's weights over
 * several passes; and each microbatch's I and W run back to back, not all I's then all W's,
 * because a streak of B's puts a W and its gradients between two I's (transformer 512, seq 32,
 * one block a stage: with the I's back to back the again I + W read 0.91-0.93 of the round's
 * I + W, where the run's streak of B's ran at 0.93-1.07 of it; with each I and W back to back,
 * 0.98-1.01). The forwards recompute the slots' activations and state, which their round's I and
 * W have used. gb's gradient at block ga's input is whatever the round left there (the run's
 * magnitudes). */
static void prof_again(prof_thread *x, int r, float *const *in, float *gb, float *scr) {
    const exec_dims *d = &x->d;
    const int G = x->ga, last = PROFILE_AGAIN_MBS - 1;
    size_t bh = (size_t)d->b * d->h, stride = prof_block_stride(d);
    double *ta = x->t + EXEC_PROF_FIW * x->ns + x->nstep + x->ni0 + 2 * x->nhot + (size_t)r * G;
    for (int m = 0; m < PROFILE_AGAIN_MBS; m++)
        for (int k = 0; k < G; k++) {
            /* block k's output is block k + 1's input, the slot's output after the last block */
            float *xk = in[m] + (size_t)k * stride;
            double t0 = pl_now_s();
            exec_block_fwd(d, x->wk[k], xk, prof_state_of(d, xk), xk + stride);
            if (m == last) ta[k] = pl_now_s() - t0;
        }
    for (int m = 0; m < PROFILE_AGAIN_MBS; m++) {
        for (int k = G - 1; k >= 0; k--) {
            float *xk = in[m] + (size_t)k * stride;
            double t0 = pl_now_s();
            if (k > 0) {
                exec_block_bwd_i(d, x->wk[k], xk, prof_state_of(d, xk), gb + (size_t)(k + 1) * bh, gb + (size_t)k * bh, scr);
            } else {
                exec_block_bwd_i(d, x->wk[0], xk, prof_state_of(d, xk), gb + bh, NULL, scr);
                exec_block_bwd_gx(d, x->wk[0], xk, prof_state_of(d, xk), gb + bh, gb);
            }
            if (m == last) ta[x->nagain + (size_t)k] = pl_now_s() - t0;
        }
        for (int k = G - 1; k >= 0; k--) {
            float *xk = in[m] + (size_t)k * stride;
            double t0 = pl_now_s();
            exec_block_bwd_w(d, xk, prof_state_of(d, xk), gb + (size_t)(k + 1) * bh, x->gk[k]);
            if (m == last) ta[2 * x->nagain + (size_t)k] = pl_now_s() - t0;
        }
    }
}

/* Returns 1 when every one of x's blocks is lent by a rank whose STEPs go into a new weight
 * version (the STEP writes another slot than it reads: exec_xrank_held_state) and follow each of
 * its backwards (PipeDream's stashing; not 2BW's, one every m microbatches), else 0. */
static int prof_two_versions(const prof_thread *x) {
    if (!x->lent || !x->each_step) return 0;
    for (int k = 0; k < x->L; k++)
        if (x->ok[k] == x->sk[k]) return 0;
    return 1;
}

/* Times round r's cycle of a stage whose STEPs go into a new weight version, through all of x's
 * blocks, twice: with every STEP in place (FO, IO, WO), then on two versions (FT, IT, WT). A
 * cycle runs the forward of the microbatch in slot 0 (in[0]), then for the microbatches in slots
 * 1 .. PROFILE_SLOTS - 1 in turn: a STEP (learning rate 0, as prof_step) from weights A into B,
 * that microbatch's F on B, then the I and W of the microbatch before it on A; then A and B trade
 * places. On two versions A and B are the rank's newest weights and the slot its next STEP
 * writes (x->sk, x->ok), so each backward reads the version its forward read and the STEP before
 * it read, and each forward the one that STEP wrote, as a PipeDream stage with a microbatch in
 * flight at every STEP runs them: three tensors of the stage's size in each cycle where a stage
 * stepping in place has two. In place A and B are both x->sk. The last microbatch's F, I and W
 * are timed per block. With a learning rate of 0 the two versions hold the same values after the
 * first STEP, and the round's own STEP (prof_step) clears the gradients the cycle's Ws add. */
static void prof_versions(prof_thread *x, int r, float *const *in, float *gb, float *scr, const float *tg) {
    static volatile float lr_zero = 0.0f;
    const float lr = lr_zero, mu = (float)x->cfg->momentum, scale = 1.0f / (float)PROFILE_SLOTS;
    const exec_dims *d = &x->d;
    const int S = PROFILE_SLOTS, L = x->L;
    size_t bh = (size_t)d->b * d->h, stride = prof_block_stride(d), nf = exec_block_floats(d);
    double *tv = x->t + EXEC_PROF_FIW * x->ns + x->nstep + x->ni0 + 3 * x->nhot + 3 * x->nagain + (size_t)r * L;
    for (int two = 0; two < 2; two++) {
        double *tk = tv + (size_t)(two ? 0 : 3) * x->nver; /* FT, IT, WT; or FO, IO, WO */
        for (int k = 0; k < L; k++) {
            float *xk = in[0] + (size_t)k * stride;
            exec_block_fwd(d, x->sk[k], xk, prof_state_of(d, xk), xk + stride);
        }
        for (int m = 1; m < S; m++) {
            const int flip = two && m % 2 == 0, last = m == S - 1;
#define VA(k) (flip ? x->ok[k] : x->sk[k])                  /* what the STEP reads, the backward too */
#define VB(k) (two ? (flip ? x->sk[k] : x->ok[k]) : x->sk[k]) /* what the STEP writes, the forward reads */
            for (int k = 0; k < L; k++) exec_sgd_step(VB(k), VA(k), x->gk[k], x->mk[k], nf, scale, lr, mu);
            for (int k = 0; k < L; k++) {
                float *xk = in[m] + (size_t)k * stride;
                double t0 = pl_now_s();
                exec_block_fwd(d, VB(k), xk, prof_state_of(d, xk), xk + stride);
                if (last) tk[k] = pl_now_s() - t0;
            }
            /* the microbatch before: its loss gradient (untimed), its I from the last block to the
             * first (the first block's with the input gradient, as the round's I), then its W */
            float *prev = in[m - 1];
            memcpy(gb + (size_t)L * bh, prev + (size_t)L * stride, bh * sizeof(float));
            exec_mse_grad(d, gb + (size_t)L * bh, tg);
            for (int k = L - 1; k >= 0; k--) {
                float *xk = prev + (size_t)k * stride;
                double t0 = pl_now_s();
                exec_block_bwd_i(d, VA(k), xk, prof_state_of(d, xk), gb + (size_t)(k + 1) * bh, k > 0 ? gb + (size_t)k * bh : NULL, scr);
                if (k == 0) exec_block_bwd_gx(d, VA(0), xk, prof_state_of(d, xk), gb + bh, gb);
                if (last) tk[x->nver + (size_t)k] = pl_now_s() - t0;
            }
            for (int k = L - 1; k >= 0; k--) {
                float *xk = prev + (size_t)k * stride;
                double t0 = pl_now_s();
                exec_block_bwd_w(d, xk, prof_state_of(d, xk), gb + (size_t)(k + 1) * bh, x->gk[k]);
                if (last) tk[2 * x->nver + (size_t)k] = pl_now_s() - t0;
            }
#undef VA
#undef VB
        }
    }
}

/* Reads back, untimed, what x's STEP went through last (its blocks' weights, gradients and
 * momentum): after other work on the thread (a run's pass), its next round
 * then starts from the caches its own previous round left, as the run's pass starts after the
 * worker's restore_after_profile (worker.c). Returns the sum read. */
static float prof_restore(const prof_thread *x) {
    size_t nf = exec_block_floats(&x->d);
    float sum = 0;
    for (int k = 0; k < x->L; k++)
        for (size_t i = 0; i < nf; i++)
            sum += x->sk[k][i] + x->gk[k][i] + (x->mk[k] ? x->mk[k][i] : 0.0f) + (x->ok[k] != x->sk[k] ? x->ok[k][i] : 0.0f);
    return sum;
}

/* Times round r's optimizer step of each of x's blocks (weights x->sk, gradients x->gk, momentum
 * x->mk): the executor's SGD loop (exec_sgd_step), into x->ok (in place, or in a gap into a new
 * weight version where the rank's STEPs mostly go: exec_xrank_held_state), with a learning rate of 0 (read
 * through a volatile, so the update is computed): a profile times the blocks, it does not train
 * them, and its weights must stay those of an initialized model (or the run's, lent) whatever
 * the run's --lr and --momentum. */
static void prof_step(prof_thread *x, int r) {
    static volatile float lr_zero = 0.0f;
    const float lr = lr_zero, mu = (float)x->cfg->momentum, scale = 1.0f / (float)PROFILE_SLOTS;
    const int L = x->L;
    size_t nf = exec_block_floats(&x->d);
    for (int k = 0; k < L; k++) {
        double t0 = pl_now_s();
        exec_sgd_step(x->ok[k], x->sk[k], x->gk[k], x->mk[k], nf, scale, lr, mu);
        double t1 = pl_now_s();
        if (r >= 0) x->t[EXEC_PROF_FIW * x->ns + (size_t)r * L + k] = t1 - t0;
    }
}

/* Runs x's next timed round, or an untimed one when untimed (the warm-up: page faults, caches,
 * the BLAS; a gap's opening round: exec_prof_gap_rounds); no timed one once all are done, and
 * nothing after a failed allocation. after: 1 when other work (a run's pass) ran on the thread
 * since its previous round (prof_restore first). */
static void prof_round(prof_thread *x, int after, int untimed) {
    x->share_r = -1;
    if (!x->mem || (!untimed && x->next >= (int)x->rounds)) return;
    if (after) {
        volatile float sink = prof_restore(x);
        (void)sink;
    }
    const exec_dims *d = &x->d;
    const int S = PROFILE_SLOTS, L = x->L, r = untimed ? -1 : x->next++;
    size_t bh = (size_t)d->b * d->h, ns = x->ns;
    size_t per_slot = prof_per_slot(x), xs = prof_block_stride(d), nt = x->nt;
    double *t = x->t;
    prof_layout o = prof_layout_of(x);
    float *slots = x->mem + o.slots;
    float *gb = x->mem + o.gb, *scr = x->mem + o.scr, *tg = x->mem + o.tg;
#define X(s, k) (slots + (size_t)(s) * per_slot + (size_t)(k) * xs)
#define ST(s, k) prof_state_of(d, X(s, k))
#define Y(s) (slots + (size_t)(s) * per_slot + (size_t)L * xs)
    for (int s = 0; s < S; s++)
        for (int k = 0; k < L; k++) {
            float *y = k + 1 < L ? X(s, k + 1) : Y(s);
            double t0 = pl_now_s();
            exec_block_fwd(d, x->wk[k], X(s, k), ST(s, k), y);
            double t1 = pl_now_s();
            if (r >= 0) t[nt + (size_t)s * L + k] = t1 - t0;
        }
    for (int s = 0; s < S; s++) {
        /* the loss gradient of this microbatch (untimed): the run's MSE against a target, so that
         * the gradients, the weights' updates and every value stay of the run's magnitudes (a
         * fixed N(0, 1) gradient made the weights overflow within two rounds, and the profile
         * timed arithmetic on infinities and NaNs) */
        memcpy(gb + (size_t)L * bh, Y(s), bh * sizeof(float));
        exec_mse_grad(d, gb + (size_t)L * bh, tg);
        /* the input gradients from the last block to the first, then the weight gradients */
        for (int k = L - 1; k >= 0; k--) {
            double t0 = pl_now_s(), tm = 0;
            if (k > 0) {
                exec_block_bwd_i(d, x->wk[k], X(s, k), ST(s, k), gb + (size_t)(k + 1) * bh, gb + (size_t)k * bh, scr);
            } else {
                /* in two parts: the first block of a model has no input gradient to compute (the
                 * executor's stage 0 skips it), so its I is the first part alone (I0) */
                exec_block_bwd_i(d, x->wk[0], X(s, 0), ST(s, 0), gb + bh, NULL, scr);
                tm = pl_now_s();
                exec_block_bwd_gx(d, x->wk[0], X(s, 0), ST(s, 0), gb + bh, gb);
            }
            double t1 = pl_now_s();
            if (r >= 0) t[EXEC_PROF_I * ns + nt + (size_t)s * L + k] = t1 - t0;
            if (r >= 0 && k == 0) t[EXEC_PROF_FIW * ns + x->nstep + (size_t)r * S + s] = tm - t0;
        }
        for (int k = L - 1; k >= 0; k--) {
            double t0 = pl_now_s();
            exec_block_bwd_w(d, X(s, k), ST(s, k), gb + (size_t)(k + 1) * bh, x->gk[k]);
            double t1 = pl_now_s();
            if (r >= 0) t[EXEC_PROF_W * ns + nt + (size_t)s * L + k] = t1 - t0;
        }
    }
    if (r >= 0) prof_hot(x, r, X(0, 0), ST(0, 0), Y(0), gb, scr, tg);
    if (r >= 0 && S > PROFILE_AGAIN_MBS && x->ga > 0) {
        float *in[PROFILE_AGAIN_MBS];
        for (int m = 0; m < PROFILE_AGAIN_MBS; m++) in[m] = X(1 + m, 0);
        prof_again(x, r, in, gb, scr);
    }
    if (r >= 0 && prof_two_versions(x)) {
        float *in[PROFILE_SLOTS];
        for (int s = 0; s < S; s++) in[s] = X(s, 0);
        prof_versions(x, r, in, gb, scr, tg);
    }
    prof_step(x, r);
    if (r >= 0) x->nt += (size_t)S * L;
    x->share_r = r;
    /* the next round starts from the same inputs (X(s, 0) is only read) */
#undef X
#undef ST
#undef Y
}

/* The part of a backward beside forwards (BX) that the other workers' forwards cover: they run
 * F after F for this many times their own backward beside backwards of the round (BS), so that
 * the backward runs beside forwards to its end (a single F, about half of it, left its second
 * half alone). */
#define SHARE_COVER 1.25
/* The backward parts of the phases run in one round of this many (waits in the others, so that
 * every worker's count of phases stays the same), to keep their cost down; one in four left
 * their ratios noisier, and the broad grid took as long (967 s of runs against 975 s). */
#define SHARE_CLASS_EVERY 2

/* What worker x does in phase `phase` of the sharing term's (exec_prof_worker_share, whose
 * comment gives the phases) of round r: returns 0 (wait), 1 (an F), 2 (an F untimed, then a
 * backward) or 3 (an F untimed, then F after F for SHARE_COVER times its BS), and sets *kind to
 * the samples it times (EXEC_PROF_FL .. BX: the F, the backward, or the second F), or -1 none.
 * The backward parts run in one round of SHARE_CLASS_EVERY. */
static int share_role(const prof_thread *x, int phase, int r, int *kind) {
    const int P = x->threads, part = (phase - 1) / (P + 1), j = (phase - 1) % (P + 1);
    /* the workers take their turns in order, and in reverse order every other time, so that each
     * one's alone phase follows the others' waits as often as not */
    const int flip = part == 0 ? r % 2 : (r / SHARE_CLASS_EVERY) % 2, turn = flip ? P - 1 - j : j, mine = turn == x->tid;
    *kind = -1;
    if (phase == 0) return 1;
    if (part == 0) return j == P ? (*kind = EXEC_PROF_FS, 1) : mine ? (*kind = EXEC_PROF_FL, 1) : 0;
    if (r % SHARE_CLASS_EVERY) return 0;
    if (part == 1) return j == P ? (*kind = EXEC_PROF_BS, 2) : mine ? (*kind = EXEC_PROF_BL, 2) : 0;
    if (mine) return *kind = EXEC_PROF_BX, 2;
    if (x->tid == (turn + 1) % P) *kind = EXEC_PROF_FX; /* one F beside each backward is timed */
    return 3;
}

/* Runs one microbatch's F from slot 0's input through x's blocks into slot 0's stash (the round
 * that used it is over, and the next one recomputes it; every F of the phases computes the same
 * values), each block's time into t[k] when t is not NULL; returns the time it took. */
static double share_fwd(prof_thread *x, double *t) {
    const exec_dims *d = &x->d;
    const int L = x->L;
    size_t xs = prof_block_stride(d);
    float *slot = x->mem + prof_layout_of(x).slots;
    double all = 0;
    for (int k = 0; k < L; k++) {
        float *xk = slot + (size_t)k * xs, *y = k + 1 < L ? xk + xs : slot + (size_t)L * xs;
        double t0 = pl_now_s();
        exec_block_fwd(d, x->wk[k], xk, prof_state_of(d, xk), y);
        double dt = pl_now_s() - t0;
        if (t) t[k] = dt;
        all += dt;
    }
    return all;
}

/* Runs the backward of the microbatch whose F share_fwd left in slot 0's stash, from the round's
 * last output gradient: I down the blocks into the profile's gradient buffers, then W into the
 * profile's own weight gradients (never the rank's lent ones), each block's I + W into t[k]. The
 * backward consumes the stash (a block's I overwrites its state in place). */
static void share_bwd(prof_thread *x, double *t) {
    const exec_dims *d = &x->d;
    const int L = x->L;
    size_t xs = prof_block_stride(d), bh = (size_t)d->b * d->h, nf = exec_block_floats(d);
    prof_layout o = prof_layout_of(x);
    float *slot = x->mem + o.slots, *gb = x->mem + o.gb, *scr = x->mem + o.scr, *g = x->mem + o.g;
    for (int k = L - 1; k >= 0; k--) {
        float *xk = slot + (size_t)k * xs;
        double t0 = pl_now_s();
        exec_block_bwd_i(d, x->wk[k], xk, prof_state_of(d, xk), gb + (size_t)(k + 1) * bh, gb + (size_t)k * bh, scr);
        t[k] = pl_now_s() - t0;
    }
    for (int k = L - 1; k >= 0; k--) {
        float *xk = slot + (size_t)k * xs;
        double t0 = pl_now_s();
        exec_block_bwd_w(d, xk, prof_state_of(d, xk), gb + (size_t)(k + 1) * bh, g + (size_t)k * nf);
        t[k] += pl_now_s() - t0;
    }
}

/* Phase `phase` of the sharing term's after x's last round (exec_prof_worker_share): share_role's
 * work, timed into the round's samples of its kind, each block's F or I + W at the block's place.
 * Every backward follows an untimed F of its own microbatch (the one before consumed the stash),
 * and every timed F follows an F, as the run's do in a forward streak. Returns the count of
 * phases. */
static void kind_samples(const prof_thread *x, int k, size_t *per, size_t *off, size_t *lo, size_t *hi);
static int prof_share(prof_thread *x, int phase) {
    const int phases = x->threads > 1 ? 3 * x->threads + 3 : 0, r = x->share_r;
    if (!x->mem || !x->nshare || r < 0 || phase < 0 || phase >= phases) return phases;
    int kind, role = share_role(x, phase, r, &kind);
    if (!role) return phases;
    const size_t L = (size_t)x->L;
    size_t k0 = 0, per, lo, hi;
    if (kind >= 0) kind_samples(x, kind, &per, &k0, &lo, &hi);
    double *t = kind >= 0 ? x->t + k0 + (size_t)r * L : NULL;
    if (role == 1) {
        share_fwd(x, t);
        return phases;
    }
    share_fwd(x, NULL);
    if (role == 2) {
        share_bwd(x, t);
        return phases;
    }
    /* beside another worker's backward: F after F for SHARE_COVER times this worker's own
     * backward beside backwards of the round (one F where it has none) */
    kind_samples(x, EXEC_PROF_BS, &per, &k0, &lo, &hi);
    double bs = 0;
    for (size_t k = 0; k < L; k++) bs += x->t[k0 + (size_t)r * L + k];
    double done = share_fwd(x, t);
    while (done < SHARE_COVER * bs) done += share_fwd(x, NULL);
    return phases;
}

/* Returns 1 when every weight of x's blocks is finite (0 after a failed allocation too). A
 * profile that timed arithmetic on infinities or NaNs would not time the run's. */
static int prof_finite(const prof_thread *x) {
    if (!x->mem) return 0;
    size_t n = (size_t)x->L * exec_block_floats(&x->d);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x->mem[i])) return 0;
    return 1;
}

/* Times this thread's rounds into x->t; every thread runs the same number of rounds and meets
 * the others at the barrier before each, also after an allocation failure (then untimed). */
static void *prof_main(void *arg) {
    prof_thread *x = arg;
    prof_shared *sh = x->sh;
    if (sh->threads > 1 && !exec_gate_pass(&sh->gate)) return NULL; /* another thread could not start */
    if (sh->pin && sh->ncpus > 0) exec_platform_pin_self(sh->cpus[x->tid % sh->ncpus]);
    const int rounds = exec_prof_rounds(sh->reps); /* timed rounds of S microbatches: >= reps samples per block */
    const int ag = sh->cfg->profile_again_stages;
    prof_init(x, sh->cfg, x->tid, sh->threads, rounds, ag > 0 ? ag : EXEC_PROF_AGAIN_ANY_STAGES(sh->threads), NULL);
    for (int r = -1; r < rounds; r++) {
        prof_wait(sh);
        prof_round(x, 0, r < 0);
        for (int ph = 0, n = 1; r >= 0 && ph < n; ph++) { /* the sharing term's phases */
            prof_wait(sh);
            n = prof_share(x, ph);
        }
    }
    if (x->rc == PL_OK && !prof_finite(x))
        x->rc = pl_errf(&x->err, PL_EINTERNAL, "the profile's blocks diverged (weights not finite)");
    free(x->mem);
    x->mem = NULL;
    return NULL;
}

exec_prof_worker *exec_prof_worker_new(const exec_config *cfg, int tid, int threads, int rounds, int again_stages,
                                       const exec_xrank *weights, pl_err *e) {
    prof_thread *x = pl_calloc(1, sizeof *x);
    if (!x) {
        pl_errf(e, PL_ENOMEM, "out of memory");
        return NULL;
    }
    prof_init(x, cfg, tid, threads, rounds, again_stages, weights);
    if (x->rc) {
        *e = x->err;
        exec_prof_worker_free(x);
        return NULL;
    }
    return x;
}

int exec_xrank_prof_new(exec_xrank *x, const exec_config *cfg, int threads, pl_err *e) {
    /* the again samples only serve a schedule with a rank that holds several stages, and stream
     * through a stage's worth of blocks */
    int again = exec_prof_again_stages(x->s);
    /* a run timed until steady may add gaps past its timed_passes, each with the same share of
     * rounds (exec_prof_gap_rounds): room for them all */
    long long R = exec_prof_rounds(cfg->profile_between_reps), most = exec_passes_most(cfg) - cfg->warmup_passes;
    x->prof = exec_prof_worker_new(cfg, x->r, threads, (int)(R * most / cfg->timed_passes), again, x, e);
    if (x->prof) return PL_OK;
    pl_err_prefix(e, "rank %d, the profile between the passes: ", x->r);
    pl_err_set_rank(e, x->r);
    return e->code;
}

int exec_prof_worker_opens(const exec_prof_worker *w) { return w && w->opens; }

const float *exec_prof_worker_weights(const exec_prof_worker *w, int *blocks) {
    *blocks = w->L;
    return w->mem ? w->mem + prof_layout_of(w).w : NULL;
}

const float *exec_prof_worker_block(const exec_prof_worker *w, int k) {
    return w->mem && w->wk && k >= 0 && k < w->L ? w->wk[k] : NULL;
}

int exec_prof_worker_lend(exec_prof_worker *w, const exec_xrank *x) {
    if (!w || !w->mem || !x) return 0;
    exec_prof_worker_unlend(w);
    size_t nf = exec_block_floats(&w->d), mo = prof_layout_of(w).mo;
    for (int k = 0; k < w->L; k++) {
        float *sw, *out, *g, *m;
        if (!exec_xrank_held_state(x, k, &sw, &out, &g, &m)) continue;
        /* lr 0 leaves the weights and the STEP clears the gradients as the rank's last STEP left
         * them; the momentum it moves is put back from here (exec_prof_worker_unlend) */
        if (m && w->mk[k]) memcpy(w->mem + mo + (size_t)k * nf, m, nf * sizeof(float));
        w->wk[k] = w->sk[k] = sw;
        w->ok[k] = out;
        w->gk[k] = g;
        w->mk[k] = w->mk[k] ? m : NULL; /* a rank and its profile share the configuration */
        w->lent++;
    }
    w->each_step = exec_xrank_steps_each_backward(x);
    return w->lent;
}

void exec_prof_worker_unlend(exec_prof_worker *w) {
    if (!w || !w->mem || !w->lent) return;
    size_t nf = exec_block_floats(&w->d);
    prof_layout o = prof_layout_of(w);
    for (int k = 0; k < w->L; k++) {
        float *own = w->mem + o.mo + (size_t)k * nf;
        if (w->mk[k] && w->mk[k] != own) memcpy(w->mk[k], own, nf * sizeof(float));
    }
    w->lent = 0;
    w->each_step = 0;
    prof_own(w);
}

const float *exec_prof_worker_grad(const exec_prof_worker *w, int k) {
    return w->mem && w->gk && k >= 0 && k < w->L ? w->gk[k] : NULL;
}

const float *exec_prof_worker_step_out(const exec_prof_worker *w, int k) {
    return w->mem && w->ok && k >= 0 && k < w->L ? w->ok[k] : NULL;
}

void exec_prof_worker_round(exec_prof_worker *w, int after, int untimed) {
    if (w) prof_round(w, after, untimed);
}

int exec_prof_worker_share(exec_prof_worker *w, int phase) {
    return w ? prof_share(w, phase) : 0;
}

void exec_prof_worker_free(exec_prof_worker *w) {
    if (!w) return;
    free(w->mem);
    free(w->t);
    free(w->wk);
    free(w->sk);
    free(w);
}

/* Returns the timed rounds thread x ran: all its rounds, or fewer in a run timed until steady that
 * was steady before its most passes (exec_config.timed_passes_max), whose room holds the rounds
 * of every gap it might have added. */
static size_t prof_done(const prof_thread *x) {
    return (size_t)x->next < x->rounds ? (size_t)x->next : x->rounds;
}

/* Sets *per to thread x's samples of kind k (EXEC_PROF_*) and *off to where they start in x->t;
 * *lo and *hi to the part of each round's samples that kind k takes: all of them, or for the
 * first-touch kinds (FF .. WR) those of the round's first microbatch (its L blocks, which come
 * first in a round: slot s's block j at s L + j) or of the others, or for IN the IH sample of
 * the last block. */
static void kind_samples(const prof_thread *x, int k, size_t *per, size_t *off, size_t *lo, size_t *hi) {
    size_t fiw = EXEC_PROF_FIW * x->ns, L = (size_t)x->L;
    *lo = 0;
    *hi = (size_t)-1;
    if (k >= EXEC_PROF_FF && k <= EXEC_PROF_WR) {
        int first = k < EXEC_PROF_FR;
        *lo = first ? 0 : L;
        *hi = first ? L : (size_t)-1;
        k = EXEC_PROF_F + (k - (first ? EXEC_PROF_FF : EXEC_PROF_FR)); /* the samples of F, I or W */
    }
    switch (k) {
    case EXEC_PROF_STEP: case EXEC_PROF_STA: *per = x->nstep; *off = fiw; break;
    case EXEC_PROF_I0: *per = x->ni0; *off = fiw + x->nstep; break;
    case EXEC_PROF_IH: *per = x->nhot; *off = fiw + x->nstep + x->ni0; break;
    case EXEC_PROF_IN: /* IH of the last block, the first prof_hot times (its samples: block k at k) */
        *per = x->nhot;
        *off = fiw + x->nstep + x->ni0;
        *lo = L - 1;
        *hi = L;
        break;
    case EXEC_PROF_WH: *per = x->nhot; *off = fiw + x->nstep + x->ni0 + x->nhot; break;
    case EXEC_PROF_FA: case EXEC_PROF_IA: case EXEC_PROF_WA:
        *per = x->nagain;
        *off = fiw + x->nstep + x->ni0 + 2 * x->nhot + (size_t)(k - EXEC_PROF_FA) * x->nagain;
        break;
    case EXEC_PROF_FB: *per = x->nhot; *off = fiw + x->nstep + x->ni0 + 2 * x->nhot + 3 * x->nagain; break;
    case EXEC_PROF_FT: case EXEC_PROF_IT: case EXEC_PROF_WT: case EXEC_PROF_FO: case EXEC_PROF_IO: case EXEC_PROF_WO:
        *per = x->nver;
        *off = fiw + x->nstep + x->ni0 + 3 * x->nhot + 3 * x->nagain + (size_t)(k - EXEC_PROF_FT) * x->nver;
        break;
    case EXEC_PROF_FL: case EXEC_PROF_FS: case EXEC_PROF_FX: case EXEC_PROF_BL: case EXEC_PROF_BS: case EXEC_PROF_BX:
        *per = x->nshare;
        *off = fiw + x->nstep + x->ni0 + 3 * x->nhot + 3 * x->nagain + 6 * x->nver + (size_t)(k - EXEC_PROF_FL) * x->nshare;
        break;
    default: *per = x->ns; *off = (size_t)k * x->ns; break; /* F, I, W */
    }
}

/* Fills p's F, I, W, STEP, I0, IH and WH times from the threads' samples: for each kind, the mean over the
 * samples of each round of each thread (the rounds it ran, prof_done), then the median over all
 * those rounds (scratch holds at least as many doubles as rounds in all). A run's pass is a sum
 * of actions, so what predicts it is the mean time of an action, interruptions included (the
 * kernel's, the hypervisor's, other processes'), and the median over passes on the measured side is matched by the median over
 * rounds here. The median of single samples, which this replaced, left out every sample that an
 * interruption hit: with other processes on the cores it read 0.92 ms per forward where the
 * rounds' means were 3.2 ms. The STEP's samples also give their mean less the host's stalls
 * (STA, exec_mean_less_stalls), for the prediction stored beside: its speed on a core switches
 * between states 1.6-1.8 times apart that last seconds, the median round takes the state of most
 * rounds, and a pass's STEPs, summed, the mix of them; yet on the broad grid the mean priced the
 * STEP worse than the median (docs/validate_cpu.md, "The STEP's two speeds"). */
static void round_medians(const prof_thread *const *x, int threads, double *scratch, exec_layer_profile *p) {
    for (int k = 0; k < EXEC_PROF_KINDS; k++) {
        if (k == EXEC_PROF_FSD) continue; /* a spread, not a kind of sample: fwd_jitter */
        size_t n = 0;
        for (int i = 0; i < threads; i++) {
            size_t rounds = x[i]->rounds, per, off, lo, hi;
            kind_samples(x[i], k, &per, &off, &lo, &hi);
            if (rounds == 0 || per == 0 || !x[i]->t) continue;
            size_t each = per / rounds; /* samples of this kind in one round */
            if (hi > each) hi = each;
            if (lo >= hi) continue; /* one microbatch per round: no others */
            const double *t = x[i]->t + off;
            for (size_t r = 0; r < prof_done(x[i]); r++) {
                double sum = 0;
                for (size_t j = lo; j < hi; j++) sum += t[r * each + j];
                if (k >= EXEC_PROF_FT && sum == 0) continue; /* a round without the cycle (prof_versions) or the sharing phases */
                scratch[n++] = sum / (double)(hi - lo);
            }
        }
        *exec_prof_kind(p, k) = !n ? 0 : k == EXEC_PROF_STA ? exec_mean_less_stalls(scratch, n) : exec_median(scratch, n);
    }
}

/* Sets p's kind `num` (FL, FX; BL, BX) to its kind `den` (FS; BS) times the median over the
 * threads' rounds of each round's num over den: the phases of a round run within milliseconds
 * of each other (exec_prof_worker_share), so their ratio leaves out the host's speed from one
 * round to the next (its states, seconds long: "The ranks' states"), which the ratio of the two
 * kinds' medians, each over all rounds, keeps. p's den stays the median over the rounds
 * (round_medians); p's num is left as round_medians set it where no round has both. scratch
 * holds at least as many doubles as rounds in all. */
static void share_pair(const prof_thread *const *x, int threads, double *scratch, int num, int den, exec_layer_profile *p) {
    size_t n = 0;
    for (int i = 0; i < threads; i++) {
        size_t per, ol, os, lo, hi;
        kind_samples(x[i], num, &per, &ol, &lo, &hi);
        kind_samples(x[i], den, &per, &os, &lo, &hi);
        if (!x[i]->t || x[i]->rounds == 0 || per == 0) continue;
        size_t each = per / x[i]->rounds;
        for (size_t r = 0; r < prof_done(x[i]); r++) {
            double a = 0, b = 0;
            for (size_t j = 0; j < each; j++) {
                a += x[i]->t[ol + r * each + j];
                b += x[i]->t[os + r * each + j];
            }
            if (a > 0 && b > 0) scratch[n++] = a / b;
        }
    }
    if (n && *exec_prof_kind(p, den) > 0) *exec_prof_kind(p, num) = *exec_prof_kind(p, den) * exec_median(scratch, n);
}

/* share_pair for each of the sharing term's kinds: FL and FX over FS, BL and BX over BS. */
static void share_paired(const prof_thread *const *x, int threads, double *scratch, exec_layer_profile *p) {
    share_pair(x, threads, scratch, EXEC_PROF_FL, EXEC_PROF_FS, p);
    share_pair(x, threads, scratch, EXEC_PROF_FX, EXEC_PROF_FS, p);
    share_pair(x, threads, scratch, EXEC_PROF_BL, EXEC_PROF_BS, p);
    share_pair(x, threads, scratch, EXEC_PROF_BX, EXEC_PROF_BS, p);
}

/* Relative deviations of one round pooled from a slot's F (all L blocks, one microbatch): at
 * most PROFILE_SLOTS - 1 a round, the round's first microbatch left out. */
#define FSD_PER_ROUND (PROFILE_SLOTS - 1)

/* Sets a[s] for s in 1 .. PROFILE_SLOTS - 1 to thread x's time of kinds first .. last (of F, I,
 * W, which share one layout) of round r's microbatch in slot s, summed over its blocks, and
 * returns their mean; 0 when x has no whole round of samples. */
static double round_kinds(const prof_thread *x, size_t r, int first, int last, double *a) {
    size_t L = (size_t)x->L, rounds = x->rounds, S = PROFILE_SLOTS;
    if (rounds == 0 || !x->t || x->ns / rounds < S * L || r >= prof_done(x)) return 0;
    size_t each = x->ns / rounds; /* samples of a kind in a round: slot s's block k at s L + k */
    double mean = 0;
    for (size_t s = 1; s < S; s++) {
        a[s] = 0;
        for (int c = first; c <= last; c++)
            for (size_t k = 0; k < L; k++) a[s] += x->t[(size_t)c * x->ns + r * each + s * L + k];
        mean += a[s] / (double)(S - 1);
    }
    return mean;
}

/* round_kinds of F: thread x's forward of round r (and its microbatches' in a). */
static double round_fwd(const prof_thread *x, size_t r, double *a) { return round_kinds(x, r, EXEC_PROF_F, EXEC_PROF_F, a); }

/* Returns the forward's jitter relative to the forward (exec_layer_profile.f_sd_s / f_s) over
 * the threads' F samples: per round, each of its microbatches after the first summed over the
 * thread's blocks (round_fwd), and each sum's deviation from their mean relative to it; over all
 * those deviations 1.4826 times the median absolute one (the standard deviation of normal ones,
 * unmoved by the rare interruption of several times an action), times sqrt(n / (n - 1)) for the
 * mean taken out of n sums. Within a round the microbatches run back to back on the same blocks,
 * so what spreads them is what varies from one action to the next in a run, not the host's drift
 * between rounds (which the ranks share, and which sets no rank waiting on another). 0 without
 * one whole round. scratch holds at least FSD_PER_ROUND times the threads' rounds doubles. */
static double fwd_jitter_rel(const prof_thread *const *x, int threads, double *scratch) {
    const size_t n_sum = PROFILE_SLOTS - 1;
    size_t n = 0;
    for (int i = 0; i < threads; i++)
        for (size_t r = 0; r < prof_done(x[i]); r++) {
            double a[PROFILE_SLOTS], mean = round_fwd(x[i], r, a);
            for (size_t s = 1; s <= n_sum && mean > 0; s++) scratch[n++] = fabs(a[s] / mean - 1);
        }
    if (n < n_sum) return 0;
    return 1.4826 * exec_median(scratch, n) * sqrt((double)n_sum / (double)(n_sum - 1));
}

/* Sets p->f_sd_s, the forward's jitter, from the threads' F samples: fwd_jitter_rel times p's
 * f_s. */
static void fwd_jitter(const prof_thread *const *x, int threads, double *scratch, exec_layer_profile *p) {
    p->f_sd_s = fwd_jitter_rel(x, threads, scratch) * p->f_s;
}

/* exec_int.h. */
double exec_lag1_variance(double *d, size_t n, double *tmp) {
    double mid = exec_median(d, n), mu = 0, c0 = 0, c1 = 0;
    for (size_t k = 0; k < n; k++) tmp[k] = fabs(d[k] - mid);
    double lim = 3 * 1.4826 * exec_median(tmp, n);
    for (size_t k = 0; k < n; k++) {
        d[k] = d[k] - mid > lim ? mid + lim : d[k] - mid < -lim ? mid - lim : d[k];
        mu += d[k] / (double)n;
    }
    for (size_t k = 0; k < n; k++) c0 += (d[k] - mu) * (d[k] - mu) / (double)(n - 1);
    for (size_t k = 0; k + 1 < n; k++) c1 += (d[k] - mu) * (d[k + 1] - mu) / (double)(n - 1);
    /* taking out the series' own mean biases c1 by -c0 / n (of independent values, exactly: their
     * variance over n), as much as the drift of a few percent that 8 rounds measure; c0 / n puts
     * it back, so that independent values read 0 in expectation */
    return c1 + c0 / (double)n;
}

/* exec_int.h. Every worker runs the same rounds in the same gaps, so the log of a round's ratio
 * between two workers leaves out what the host does to both; the persistent part of its variance
 * (exec_lag1_variance) is what holds over a stretch of work as long as a round, half of it one
 * worker's if both drift alike. */
double exec_drift_of(const double *const *means, const size_t *n, int workers, double *scratch) {
    double var = 0;
    int pairs = 0;
    for (int i = 0; i < workers; i++)
        for (int j = i + 1; j < workers; j++) {
            size_t R = n[i] < n[j] ? n[i] : n[j], k = 0;
            for (size_t r = 0; r < R; r++)
                if (means[i][r] > 0 && means[j][r] > 0) scratch[k++] = log(means[i][r] / means[j][r]);
            if (k < EXEC_DRIFT_MIN_ROUNDS) return 0;
            double v = exec_lag1_variance(scratch, k, scratch + k);
            var += v > 0 ? v / 2 : 0;
            pairs++;
        }
    return pairs ? sqrt(var / pairs) : 0;
}

/* exec_int.h: round_fwd's mean of each round the worker ran. */
size_t exec_prof_worker_round_fwd(const exec_prof_worker *w, double *out) {
    size_t R = w ? prof_done(w) : 0;
    for (size_t r = 0; out && r < R; r++) {
        double a[PROFILE_SLOTS];
        out[r] = round_fwd(w, r, a);
    }
    return R;
}

/* exec_int.h: round_kinds' mean of I + W of each round the worker ran. */
size_t exec_prof_worker_round_bwd(const exec_prof_worker *w, double *out) {
    size_t R = w ? prof_done(w) : 0;
    for (size_t r = 0; out && r < R; r++) {
        double a[PROFILE_SLOTS];
        out[r] = round_kinds(w, r, EXEC_PROF_I, EXEC_PROF_W, a); /* as round_fwd takes F */
    }
    return R;
}

/* Sets p->drift, the ranks' speeds drifting apart (exec_layer_profile.drift), from the threads'
 * F samples, round r of each thread beside round r of the others (exec_drift_of). scratch holds
 * the threads' rounds, then twice the most rounds of any thread. */
static void rank_drift(const prof_thread *const *x, int threads, double *scratch, exec_layer_profile *p) {
    const double *means[PROFILE_MAX_THREADS] = {NULL}; /* set below for each thread read; zeroed so that */
    size_t n[PROFILE_MAX_THREADS] = {0};               /* no inlining leaves a compiler in doubt */
    double *at = scratch;
    for (int i = 0; i < threads && i < PROFILE_MAX_THREADS; i++) {
        means[i] = at;
        n[i] = exec_prof_worker_round_fwd(x[i], at);
        at += n[i];
    }
    p->drift = exec_drift_of(means, n, threads < PROFILE_MAX_THREADS ? threads : PROFILE_MAX_THREADS, at);
}

/* Adds to a[*n], c[*n] the unit of thread x's round r of kind k (EXEC_PROF_*): its samples lo ..
 * lo + cnt - 1 of the round (fewer when the round has fewer), their time and their time by p's
 * median of the kind. */
static void window_unit(const prof_thread *x, exec_layer_profile *p, int k, size_t r, size_t lo, size_t cnt,
                        double *a, double *c, size_t *n) {
    size_t per, off, klo, khi;
    kind_samples(x, k, &per, &off, &klo, &khi);
    size_t each = x->rounds ? per / x->rounds : 0;
    if (lo >= each) return;
    if (cnt > each - lo) cnt = each - lo;
    double sum = 0;
    for (size_t j = 0; j < cnt; j++) sum += x->t[off + r * each + lo + j];
    a[*n] = sum;
    c[(*n)++] = (double)cnt * *exec_prof_kind(p, k);
}

/* Fills p->window with the pass-length factors of thread x (exec_window_factors): its samples
 * in the order a round runs them (the forwards slot by slot, each slot's I then its W, the
 * distance-0 and again samples, the STEP), each sample's clean time p's median of its kind; then
 * divides them by the factor at exec_window_reference_s, the scale of p's own medians, so that a
 * pass that long keeps them. */
static void prof_windows(const prof_thread *x, exec_layer_profile *p) {
    const size_t R = prof_done(x), L = (size_t)x->L, S = PROFILE_SLOTS, per_round = 3 * S + 7;
    memset(p->window, 0, sizeof p->window);
    if (!x->t || R == 0) return;
    double *a = pl_calloc(2 * R * per_round, sizeof *a);
    if (!a) return; /* the term stays off */
    double *c = a + R * per_round;
    size_t n = 0;
    for (size_t r = 0; r < R; r++) {
        for (size_t s = 0; s < S; s++) window_unit(x, p, EXEC_PROF_F, r, s * L, L, a, c, &n);
        for (size_t s = 0; s < S; s++) {
            window_unit(x, p, EXEC_PROF_I, r, s * L, L, a, c, &n);
            window_unit(x, p, EXEC_PROF_W, r, s * L, L, a, c, &n);
        }
        const int tail[] = {EXEC_PROF_FB, EXEC_PROF_IH, EXEC_PROF_WH, EXEC_PROF_FA, EXEC_PROF_IA, EXEC_PROF_WA, EXEC_PROF_STEP};
        for (size_t k = 0; k < sizeof tail / sizeof *tail; k++) window_unit(x, p, tail[k], r, 0, (size_t)-1, a, c, &n);
    }
    exec_window_factors(a, c, n, p->window);
    free(a);
    /* relative to the stretch each of p's medians was taken over */
    double ref = exec_window_factor(p->window, exec_window_reference_s(p, x->L));
    for (int j = 0; j < EXEC_WINDOWS && ref > 0; j++) p->window[j] /= ref;
}

double exec_window_reference_s(const exec_layer_profile *p, int blocks) {
    return PROFILE_SLOTS * blocks * (p->f_s + p->i_s + p->w_s) / 3;
}

/* Fills p from the samples of the n threads x[n] (round_medians), its sizes from cfg, and when
 * each is not NULL each[i] from thread i's rounds alone. PL_OK or PL_ENOMEM. */
static int prof_collect(const prof_thread *const *x, int n, const exec_config *cfg, exec_layer_profile *p,
                        exec_layer_profile *each, pl_err *e) {
    size_t all_n = 1;
    /* fwd_jitter's FSD_PER_ROUND a round; rank_drift's rounds and twice the most again */
    for (int i = 0; i < n; i++) all_n += (FSD_PER_ROUND > 3 ? FSD_PER_ROUND : 3) * x[i]->rounds;
    double *all = pl_calloc(all_n, sizeof(double)); /* >= all rounds */
    if (!all) return pl_errf(e, PL_ENOMEM, "out of memory");
    exec_dims d;
    exec_dims_of(cfg, &d);
    memset(p, 0, sizeof *p);
    round_medians(x, n, all, p);
    share_paired(x, n, all, p);
    fwd_jitter(x, n, all, p);
    rank_drift(x, n, all, p);
    if (n == 1) prof_windows(x[0], p); /* one worker's own (a run's rank record) */
    for (int i = 0; each && i < n; i++) {
        memset(&each[i], 0, sizeof each[i]);
        round_medians(&x[i], 1, all, &each[i]);
        share_paired(&x[i], 1, all, &each[i]);
        fwd_jitter(&x[i], 1, all, &each[i]);
        prof_windows(x[i], &each[i]);
        size_t nr = exec_prof_worker_round_fwd(x[i], all); /* the states term's rounds */
        each[i].n_round_f = nr < EXEC_STATE_ROUNDS ? (int)nr : EXEC_STATE_ROUNDS;
        memcpy(each[i].round_f, all, (size_t)each[i].n_round_f * sizeof *all);
        exec_prof_worker_round_bwd(x[i], all);
        memcpy(each[i].round_b, all, (size_t)each[i].n_round_f * sizeof *all);
        each[i].concurrency = n;
    }
    p->concurrency = n;
    exec_profile_sizes(&d, p);
    free(all);
    return PL_OK;
}

void exec_profile_sizes(const exec_dims *d, exec_layer_profile *p) {
    size_t nf = exec_block_floats(d), bh = (size_t)d->b * d->h, sf = exec_block_state_floats(d);
    p->param_bytes = nf * sizeof(float);
    p->act_out_bytes = bh * sizeof(float);
    p->stash_bytes = (bh + sf) * sizeof(float);
    p->w_stash_bytes = (2 * bh + sf) * sizeof(float);
}

int exec_prof_worker_collect(exec_prof_worker *const *w, int n, const exec_config *cfg, exec_layer_profile *p,
                             exec_layer_profile *each, pl_err *e) {
    for (int i = 0; i < n; i++) {
        if (!w[i]) return pl_errf(e, PL_EINTERNAL, "worker %d has no profile", i);
        if (!prof_finite(w[i])) return pl_errf(e, PL_EINTERNAL, "worker %d: the profile's blocks diverged (weights not finite)", i);
    }
    return prof_collect((const prof_thread *const *)w, n, cfg, p, each, e);
}

/* exec_profile_layers_n, and when each is not NULL: each worker's own times in each[concurrency]
 * (its rounds only) and the core it was pinned to in core[concurrency] (-1: not pinned). */
static int prof_measure(const exec_config *cfg, int reps, int concurrency, exec_layer_profile *p,
                        exec_layer_profile *each, int *core, pl_err *e) {
    if (reps < 1) return pl_errf(e, PL_EINPUT, "profile repetitions must be at least 1");
    if (concurrency < 1 || concurrency > PROFILE_MAX_THREADS)
        return pl_errf(e, PL_EINPUT, "profile concurrency must be in [1, %d], got %d", PROFILE_MAX_THREADS, concurrency);
    if (exec_dims_check(cfg, e) != PL_OK) return e->code;
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (d.h < 1 || d.b < 1) return pl_errf(e, PL_EINPUT, "profile needs hidden and microbatch size >= 1");
    exec_blas_init();
    prof_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.cfg = cfg;
    sh.reps = reps;
    sh.threads = concurrency;
    sh.ncpus = exec_platform_cores(sh.cpus, PROFILE_MAX_THREADS);
    /* alone: the calling thread, unpinned, as before; together: pinned like the executor's ranks */
    sh.pin = concurrency > 1 && cfg->pin;
    prof_thread *x = pl_calloc((size_t)concurrency, sizeof *x);
    if (!x) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = PL_OK;
    if (concurrency > 1 && pthread_barrier_init(&sh.bar, NULL, (unsigned)concurrency) != 0)
        rc = pl_errf(e, PL_EINTERNAL, "cannot make the profile's barrier");
    for (int i = 0; i < concurrency; i++) {
        x[i].sh = &sh;
        x[i].tid = i;
    }
    if (rc == PL_OK && concurrency == 1) {
        prof_main(&x[0]);
    } else if (rc == PL_OK) {
        /* the barrier needs every thread, so none starts timing before all exist */
        rc = exec_team_run(concurrency, prof_main, x, sizeof *x, &sh.gate, "profiling thread", e);
        pthread_barrier_destroy(&sh.bar);
    }
    for (int i = 0; i < concurrency && rc == PL_OK; i++)
        if (x[i].rc) {
            *e = x[i].err;
            rc = x[i].rc;
        }
    const prof_thread **xp = rc == PL_OK ? pl_calloc((size_t)concurrency, sizeof *xp) : NULL;
    if (rc == PL_OK && !xp) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    for (int i = 0; rc == PL_OK && i < concurrency; i++) xp[i] = &x[i];
    if (rc == PL_OK) rc = prof_collect(xp, concurrency, cfg, p, each, e);
    for (int i = 0; rc == PL_OK && core && i < concurrency; i++) core[i] = sh.pin && sh.ncpus > 0 ? sh.cpus[i % sh.ncpus] : -1;
    free(xp);
    for (int i = 0; i < concurrency; i++) {
        free(x[i].t);
        free(x[i].wk);
        free(x[i].sk);
    }
    free(x);
    return rc;
}

int exec_profile_layers_n(const exec_config *cfg, int reps, int concurrency, exec_layer_profile *p, pl_err *e) {
    return prof_measure(cfg, reps, concurrency, p, NULL, NULL, e);
}

int exec_profile_layers(const exec_config *cfg, int reps, exec_layer_profile *p, pl_err *e) {
    return exec_profile_layers_n(cfg, reps, 1, p, e);
}

/* Writes the profile CSV of p (measured with `reps` repetitions on `concurrency` workers, each[i]
 * and core[i] each one's own; between: by a run's own workers between its passes, block k's row
 * rows[k]) to out. */
static int prof_csv(const exec_config *cfg, int reps, int concurrency, const char *host, int between,
                    const exec_layer_profile *p, const exec_layer_profile *each, const int *core,
                    const exec_layer_profile *const *rows, pl_buf *out, pl_err *e) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    char desc[EXEC_BLOCK_TEXT_MAX];
    exec_block_describe(&d, desc, sizeof desc);
    if (between)
        pl_buf_printf(out, "# pipelab profile: the executor's %s, fp32,\n"
                           "# measured by the %d workers of a run on their own threads and cores, each on its own %d\n"
                           "# blocks, in the gaps between its passes, %s, %d repetitions; per block: the median over the\n"
                           "# rounds of %d microbatches (each round's mean) of the worker of the rank that holds it (its\n"
                           "# STEP: that worker's line below); every block has this shape.\n",
                      desc, concurrency, prof_blocks(cfg, &d, concurrency), exec_blas_init(), reps, PROFILE_SLOTS);
    else if (concurrency > 1)
        pl_buf_printf(out, "# pipelab profile: the executor's %s, fp32,\n"
                           "# %d workers at once (pinned threads, each on its own %d blocks)%s%s, %s, %d repetitions;\n"
                           "# per block: the median over all workers' rounds of %d microbatches of each round's mean;\n"
                           "# every block has this shape.\n",
                      desc, concurrency, prof_blocks(cfg, &d, concurrency), host ? " on " : "",
                      host ? host : "", exec_blas_init(), reps, PROFILE_SLOTS);
    else
        pl_buf_printf(out, "# pipelab profile: the executor's %s, fp32,\n"
                           "# one worker%s%s, %s, %d repetitions; per block: the median over rounds of %d microbatches\n"
                           "# of each round's mean; every block has this shape.\n",
                      desc, host ? " on " : "", host ? host : "", exec_blas_init(), reps, PROFILE_SLOTS);
    /* not "#@" metadata: the cost model's reader accepts only its own keys there */
    pl_buf_printf(out, "# " EXEC_PROFILE_META " concurrency=%d step_s=%.9g rank_drift=%.9g\n", concurrency, p->step_s,
                  p->drift);
    /* each worker's own times (its core's speed; the rows below are over all workers) */
    for (int i = 0; concurrency > 1 && i < concurrency; i++) exec_worker_line(&each[i], i, core[i], out);
    for (int i = 0; concurrency > 1 && i < concurrency; i++) exec_window_line(&each[i], i, out);
    for (int i = 0; concurrency > 1 && i < concurrency; i++) exec_rounds_line(&each[i], i, out);
    return exec_profile_csv_table(cfg, p, rows, out, e);
}

int exec_profile_csv_n(const exec_config *cfg, int reps, int concurrency, const char *host, pl_buf *out,
                       exec_layer_profile *pp, pl_err *e) {
    if (cfg->layers < 1) return pl_errf(e, PL_EINPUT, "profile needs depth >= 1");
    exec_layer_profile p;
    if (concurrency < 1 || concurrency > PROFILE_MAX_THREADS)
        return pl_errf(e, PL_EINPUT, "profile concurrency must be in [1, %d], got %d", PROFILE_MAX_THREADS, concurrency);
    exec_layer_profile *each = pl_calloc((size_t)concurrency, sizeof *each);
    int *core = pl_calloc((size_t)concurrency, sizeof *core);
    int rc = each && core ? prof_measure(cfg, reps, concurrency, &p, each, core, e) : pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) rc = exec_profile_allreduce(cfg, reps, &p.ar_latency_s, &p.ar_Bps, e);
    if (rc == PL_OK) rc = exec_profile_p2p(cfg, reps, &p.p2p, e);
    if (rc) {
        free(each);
        free(core);
        return rc;
    }
    if (pp) *pp = p;
    rc = prof_csv(cfg, reps, concurrency, host, 0, &p, each, core, NULL, out, e);
    free(each);
    free(core);
    return rc;
}

int exec_profile_csv_between(const sched *s, const exec_config *cfg, const exec_result *r, pl_buf *out, pl_err *e) {
    if (!r->between_profile || r->between_reps < 1)
        return pl_errf(e, PL_EINPUT, "the run was not profiled between its passes");
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (s->ranks != r->ranks || s->stages != r->stages || cfg->layers != r->layers || d.h != r->hidden || d.f != r->ffn ||
        cfg->microbatch_size != r->microbatch_size || cfg->block != r->block || d.heads != r->heads ||
        (d.block == EXEC_BLOCK_GPT && d.seq != r->seq))
        return pl_errf(e, PL_EINPUT, "the schedule or model is not the run's");
    int *core = pl_calloc((size_t)r->ranks, sizeof *core);
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    const exec_layer_profile **rows = pl_calloc((size_t)cfg->layers, sizeof *rows);
    int rc = core && blocks && rows ? exec_stage_blocks(s, cfg, blocks, e) : pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) {
        for (int q = 0; q < r->ranks; q++) core[q] = r->rank[q].core;
        /* block k is timed by the worker of the rank that holds its stage */
        for (int q = 0, k = 0; q < s->stages; q++)
            for (int j = 0; j < blocks[q] && k < cfg->layers; j++) rows[k++] = &r->between_profile[1 + s->stage_rank[q]];
        /* the passes time compute only: a pipelined CPU run's hand-off between ranks is timed now
         * (on the threads transport; an MPI run's prediction does not read it) */
        exec_layer_profile p = r->between_profile[0];
        if (r->ranks > 1 && cfg->backend == EXEC_BACKEND_CPU) rc = exec_profile_p2p(cfg, r->between_reps, &p.p2p, e);
        if (rc == PL_OK)
            rc = prof_csv(cfg, r->between_reps, r->ranks, NULL, 1, &p, r->between_profile + 1, core, rows, out, e);
    }
    free(core);
    free(blocks);
    free(rows);
    return rc;
}

int exec_profile_cores(void) {
    int cpus[PROFILE_MAX_THREADS];
    return exec_platform_cores(cpus, PROFILE_MAX_THREADS);
}

int exec_check_cores(int workers, int ncores, int oversubscribe, const char *what, pl_err *e) {
    if (workers <= ncores || oversubscribe) return PL_OK;
    return pl_errf(e, PL_EINPUT, "%d %s but only %d cores available; give --oversubscribe (exec_config.oversubscribe) "
                   "to run anyway (timings would then measure time-slicing)", workers, what, ncores);
}

int exec_oversubscribed(int workers, int ncores, const char *what, char *buf, size_t n) {
    if (workers <= ncores) return 0;
    snprintf(buf, n, "%d %s on %d cores: oversubscribed, timings measure time-slicing", workers, what, ncores);
    return 1;
}

int exec_host_probe_measure(int workers, exec_host_probe *p, pl_err *e) {
    memset(p, 0, sizeof *p);
    if (workers < 1) return pl_errf(e, PL_EINPUT, "the host probe needs at least one worker, got %d", workers);
    exec_config c;
    exec_config_default(&c);
    exec_layer_profile lp;
    p->workers = workers;
    int rc = PL_OK;
    if (workers > 1) {
        c.layers = workers; /* a block each */
        rc = exec_profile_layers_n(&c, EXEC_HOST_PROBE_REPS, workers, &lp, e);
        if (rc == PL_OK) p->fwd_s = lp.f_s;
    }
    if (rc != PL_OK) return rc;
    c.layers = 1;
    rc = exec_profile_layers_n(&c, EXEC_HOST_PROBE_REPS, 1, &lp, e);
    if (rc != PL_OK) return rc;
    p->alone_fwd_s = lp.f_s;
    if (workers == 1) p->fwd_s = lp.f_s;
    return PL_OK;
}
