/* exec_int.h: internals of the executor shared between its files: the model's math, the data,
 * the per-rank state the workers walk with, and the in-process transport. */
#ifndef EXEC_INT_H
#define EXEC_INT_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exec.h"

/* The most cores the executor reads from the platform (exec_platform_cores). */
#define EXEC_MAX_CORES 4096
/* Bytes of an action's text (sched_action_format) and of where a worker is (exec_xrank_where). */
#define EXEC_ACTION_TEXT_MAX 96
#define EXEC_WHERE_MAX 160
/* Bytes of a cache line: every buffer of a rank's arena, of its profile (exec_lines_alloc), and
 * every rank's state, starts on one. The profile must lay its buffers out as the run does: GEMM
 * operands 16 bytes off a line (calloc's) made the dense block's W 11-17% slower than on aligned
 * ones (width 768, microbatch 16), so a profile on calloc's memory predicted the run's W long. */
#define EXEC_LINE_BYTES 64
/* Floats of a cache line. */
#define EXEC_LINE_FLOATS (EXEC_LINE_BYTES / sizeof(float))
/* Returns n floats rounded up to whole cache lines. */
static inline size_t exec_line_round(size_t n) { return (n + EXEC_LINE_FLOATS - 1) & ~(EXEC_LINE_FLOATS - 1); }
/* Returns n zeroed floats that start on a cache line (free with free), or NULL. One of
 * EXEC_HUGE_MIN_BYTES or more, unless small_pages, starts on a 2 MiB boundary and asks the kernel
 * for transparent huge pages (madvise MADV_HUGEPAGE; the kernel's "madvise" mode grants them
 * only so): a rank's arena and the profile's blocks are tens to hundreds of MiB that the GEMMs
 * stream through, and on 4 KiB pages the passes of wide models (width 768-1024) ran 0.3-9% slower,
 * their mean action 1-7% over the median one against -1 to +3.4% on huge pages
 * (docs/validate_cpu.md, "Huge pages"). */
float *exec_lines_alloc(size_t n, int small_pages);
/* The bytes exec_lines_alloc takes for n floats (whole lines; huge pages rounded up to 2 MiB). */
size_t exec_lines_bytes(size_t n, int small_pages);
#define EXEC_HUGE_BYTES ((size_t)2 << 20)
#define EXEC_HUGE_MIN_BYTES ((size_t)4 << 20)
/* The longest any blocking wait may last by default (exec_config.timeout_s; also where it is 0). */
#define EXEC_DEFAULT_TIMEOUT_S 60.0
/* Receives a rank has posted when its transport first makes room for them (grown by pl_grow). */
#define EXEC_FIRST_POSTS 8
/* Bytes of the description of what a rank waits for (the transports' timeouts and reports). */
#define EXEC_WAIT_TEXT_MAX 200
#define EXEC_NS_PER_S 1000000000L
/* How a transport's error begins when the run was stopped by another rank's failure: such an
 * error is an echo, not a cause (exec_err_aborted). */
#define EXEC_ABORTED "aborted: "

/* ---------------------------------------------------------------- shapes and math (model.c) */

/* The shape of one block and of a microbatch. */
typedef struct exec_dims {
    int h, f, b;    /* width, inner (ffn) width, rows of a microbatch: its samples (mlp), or its
                     * sequences x seq tokens (transformer) */
    int layers;     /* L, scales W2's initial size (0 counts as 1) */
    int block;      /* exec_block_kind (0: the dense block) */
    int heads, seq; /* transformer: attention heads and tokens per sequence (unused by mlp) */
} exec_dims;

/* ---- any block (exec_config.block): what the workers, the reference, the data set and the
 * profiler call, so that both blocks run through the same code. A block reads its input x
 * [b, h] and writes y [b, h]; between its forward and its weight gradient it keeps `state`
 * (exec_block_state_floats: mlp H/dH [b, f] then gelu(H) [b, f]; gpt: gpt.c's layout), which
 * the input-gradient pass turns partly into gradients in place. */

/* Floats of the state one block keeps for a microbatch from its forward to its W. */
size_t exec_block_state_floats(const exec_dims *d);
/* Floats of the scratch the backward of one block needs (none across calls). */
size_t exec_block_scratch_floats(const exec_dims *d);
/* Forward: y [b, h] from x [b, h] with parameters p, filling state. y must not alias x. */
void exec_block_fwd(const exec_dims *d, const float *p, const float *x, float *state, float *y);
/* Input-gradient pass (I): from the output gradient gy, the gradients W needs (into state) and
 * gx [b, h] = dL/dx (skipped when gx is NULL: the model's first block). */
void exec_block_bwd_i(const exec_dims *d, const float *p, const float *x, float *state, const float *gy, float *gx,
                      float *scratch);
/* The input gradient alone after exec_block_bwd_i(gx NULL): bwd_i(gx) = bwd_i(NULL) then this. */
void exec_block_bwd_gx(const exec_dims *d, const float *p, const float *x, const float *state, const float *gy,
                       float *gx);
/* Weight-gradient pass (W): accumulates the block's parameter gradients into gp (p's layout). */
void exec_block_bwd_w(const exec_dims *d, const float *x, const float *state, const float *gy, float *gp);
/* The GEMM FLOPs of one block and microbatch: forward, input gradient, the model's first
 * block's input gradient (no dL/dx), weight gradient (model.c says what is counted). */
void exec_block_flops(const exec_dims *d, double *f, double *i, double *i0, double *w);

/* Checks the block's own numbers (the transformer's heads divide the width, seq >= 1); PL_OK
 * or PL_EINPUT naming the bad one (exec_check_config calls it). */
int exec_check_block(const exec_config *c, pl_err *e);
/* Bytes of a block's description (exec_block_describe) and of a model's name. */
#define EXEC_BLOCK_TEXT_MAX 256
/* Writes what the block is into buf[n] ("dense block (Linear 256->1024, GELU, ...)",
 * "transformer block (width 256, 4 heads, ...)"), as the profile's comments say it. */
void exec_block_describe(const exec_dims *d, char *buf, size_t n);
/* Writes the model's short name into buf[n] (the profile's "name=": mlp_h256_f1024_L8,
 * gpt_h256_a4_s64_L8). */
void exec_model_name(const exec_config *cfg, char *buf, size_t n);

/* ---- the transformer block (gpt.c); layout of its parameters: the dense block's W1, b1, W2,
 * b2 (its MLP, so the dense block's weight gradient serves it), then Wqkv [3h, h], bqkv [3h],
 * Wo [h, h], bo [h], LN1 gain, bias [h], LN2 gain, bias [h]. */
typedef struct exec_gpt_params {
    const float *w1, *w2;      /* the MLP: W1 [f, h], W2 [h, f] (and their biases, the dense block's) */
    const float *wqkv, *bqkv;  /* [3h, h], [3h] */
    const float *wo, *bo;      /* [h, h], [h] */
    const float *g1, *be1, *g2, *be2; /* LayerNorm gains and biases [h] */
} exec_gpt_params;
/* The state of one transformer block for a microbatch of R = b rows (exec_gpt_state_floats). */
typedef struct exec_gpt_state {
    float *hd, *a;      /* [R, f] MLP pre-activation H (dH after I), gelu(H): the dense block's
                         * state first, so its MLP routines read it as theirs */
    float *xn2, *x2;    /* [R, h] LN2's output and input (the attention's residual sum) */
    float *att;         /* [R, h] the heads' outputs, concatenated */
    float *qkv;         /* [R, 3h] Q, K, V (dQ, dK, dV after I) */
    float *xn1;         /* [R, h] LN1's output */
    float *p;           /* [B, A, S, S] softmax probabilities (0 above the diagonal) */
    float *dxn2, *dx2, *dxn1; /* [R, h] gradients at LN2's output, the residual sum, LN1's output:
                         * filled by I, read by W */
    float *mean1, *rstd1, *mean2, *rstd2; /* [R] LayerNorm statistics */
} exec_gpt_state;
/* The layout of one transformer block's parameters at p and of its state at s (either may be
 * NULL: its pointers are then offsets from NULL, unused); both backends address them so. */
exec_gpt_params exec_gpt_params_at(const exec_dims *d, const float *p);
exec_gpt_state exec_gpt_state_at(const exec_dims *d, float *s);

/* What a block is to the dispatch above (model.c): its sizes, its initial weights and its four
 * passes, with the meanings of exec_block_floats, exec_block_init and exec_block_fwd ... _bwd_w. */
typedef struct exec_block_ops {
    size_t (*floats)(const exec_dims *d);
    void (*init)(const exec_dims *d, uint64_t seed, int block, float *p);
    size_t (*state_floats)(const exec_dims *d);
    size_t (*scratch_floats)(const exec_dims *d);
    void (*forward)(const exec_dims *d, const float *p, const float *x, float *state, float *y);
    void (*backward_i)(const exec_dims *d, const float *p, const float *x, float *state, const float *gy, float *gx,
                       float *scratch);
    void (*backward_gx)(const exec_dims *d, const float *p, const float *x, const float *state, const float *gy,
                        float *gx);
    void (*backward_w)(const exec_dims *d, const float *x, const float *state, const float *gy, float *gp);
} exec_block_ops;
/* The transformer block's (gpt.c). */
extern const exec_block_ops exec_gpt_ops;

/* ---- shared by the blocks (model.c) */
/* C [M, N] = A' B' + beta C (row-major, alpha 1; A' = A or A^T by ta, likewise B'), on the
 * calling thread's GEMM clock (exec_gemm_clock). Every GEMM of the model goes through it. */
void exec_gemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc);
/* The dense block's MLP with its input xin and residual xres apart (the dense block: both x;
 * the transformer's second half: LN2(x2) and x2): hpre, act [b, f]; y = xres + act W2^T + b2. */
void exec_mlp_forward(const exec_dims *d, const float *p, const float *xin, const float *xres, float *hpre, float *act,
                      float *y);
/* The dense block's parameters (exec_block_init's for block k: streams from 4 k) from seed,
 * its random streams starting at stream0. */
void exec_mlp_init(const exec_dims *d, uint64_t seed, uint64_t stream0, float *p);
/* The standard deviation of every block's initial biases. */
#define EXEC_BIAS_STD 0.01
/* Returns N(0, std^2) element i of (seed, stream): the generator of every initial weight
 * (elements 2j and 2j + 1 are the two outputs of one Box-Muller transform). */
float exec_normal_at(uint64_t seed, uint64_t stream, uint64_t i, double std);
/* Fills x[0 .. n - 1] with elements 0 .. n - 1 of (seed, stream) at standard deviation std, the
 * values exec_normal_at gives, two at a time. */
void exec_fill_normal_std(uint64_t seed, uint64_t stream, double std, float *x, size_t n);
/* Sets how many threads the calling thread's fills of 2^16 elements or more split over (1: none,
 * the default; at most 16), the same values on any; returns the previous setting. */
int exec_fill_team_set(int team);

/* Floats of one block's parameters: W1 [f, h], b1 [f], W2 [h, f], b2 [h], in that order. */
size_t exec_block_floats(const exec_dims *d);

/* Fills the parameters of block `block` (p[exec_block_floats]) from seed: W1 ~ N(0, 1/h),
 * W2 ~ N(0, 1/(2 L f)) (GPT-2's residual scaling, so L blocks add O(1) to the residual stream),
 * biases ~ N(0, 0.01^2). Depends only on (seed, L, block, element). */
void exec_block_init(const exec_dims *d, uint64_t seed, int block, float *p);

/* Fills n floats with N(0, 1) numbers from (seed, stream) (exec_fill_normal_std at 1). */
void exec_fill_normal(uint64_t seed, uint64_t stream, float *x, size_t n);

/* Forward of one block for b rows: hpre = x W1^T + b1 [b, f]; act = gelu(hpre) [b, f];
 * y = x + act W2^T + b2 [b, h]. y must not alias x. */
void exec_block_forward(const exec_dims *d, const float *p, const float *x, float *hpre,
                        float *act, float *y);
/* Input-gradient half of the backward: in place hd: hpre [b, f] -> dH [b, f]; gx [b, h] =
 * gy + dH W1 (skipped when gx is NULL). scratch holds b x f floats. */
void exec_block_backward_i(const exec_dims *d, const float *p, float *hd, const float *gy,
                           float *gx, float *scratch);
/* The input gradient of exec_block_backward_i alone, after it ran with gx NULL: gx [b, h] =
 * gy + dH W1 from hd = dH. backward_i(gx) = backward_i(NULL) then this. */
void exec_block_backward_gx(const exec_dims *d, const float *p, const float *hd, const float *gy, float *gx);
/* Weight-gradient half: accumulates into gp (the block's gradient, same layout as p):
 * dW1 += dH^T x, db1 += sum dH, dW2 += gy^T act, db2 += sum gy. */
void exec_block_backward_w(const exec_dims *d, const float *x, const float *act, const float *dh,
                           const float *gy, float *gp);
/* Turns y [b, h] in place into dL/dy for the MSE loss against t and returns the loss
 * mean((y - t)^2) (computed in double). */
double exec_mse_grad(const exec_dims *d, float *y, const float *t);
/* The SGD step of n parameters, the executor's STEP (worker.c) and the one its profile times
 * (profile.c): o = w - lr (g scale), or with momentum mom = mu mom + g scale and o = w - lr mom;
 * then g = 0, in the same pass over memory. o may be w (in place). */
void exec_sgd_step(float *o, const float *w, float *g, float *mom, size_t n, float scale, float lr, float mu);

/* The data set: D microbatches of inputs and targets. */
typedef struct exec_data {
    int d;      /* D */
    int n;      /* entries built: 0 .. n - 1 (the microbatches the run reads, up to a whole chunk of
                 * the target network's, at most D); the others stay zero and are never read */
    float *x;   /* [D, b, h] inputs */
    float *t;   /* [D, b, h] targets: the target network's outputs */
} exec_data;

/* Builds the data set for cfg (inputs from data_seed, targets through the L-block target
 * network from target_seed): its first min(D, used) entries, all D when used <= 0 (a run reads
 * global microbatches 0 .. used - 1, entry G mod D: only the first `used` when used < D), the
 * target network's blocks filled and run on as many threads as there are cores (the same values
 * as on one). Returns PL_OK or PL_ENOMEM. */
int exec_data_build(const exec_config *cfg, int used, exec_data *out, pl_err *e);
/* The microbatches a run of `passes` passes of M microbatches each reads (INT_MAX past it). */
static inline int exec_data_used(int passes, int M) {
    long long n = (long long)passes * M;
    return n < INT_MAX ? (int)n : INT_MAX;
}
void exec_data_free(exec_data *dt);
/* The bytes of the data set exec_data_build(cfg, used) writes (its inputs and targets), and in
 * *build what it holds besides while it builds them (the target block, each thread's state). */
double exec_data_bytes(const exec_config *cfg, int used, double *build);
/* Refuses (PL_EINPUT, naming the product) a model whose shape the executor cannot address: a
 * transformer microbatch of more rows (microbatch x seq) than an int holds, or one block's state
 * or parameters beyond 2^60 bytes (its attention scores are microbatch x heads x seq x seq). */
int exec_dims_check(const exec_config *cfg, pl_err *e);

/* Reads the calling thread's GEMM clock: *s = seconds spent inside the model's sgemm calls so
 * far, *flops = their FLOPs (2 M N K each). Differences over an interval give its GEMM time. */
void exec_gemm_clock(double *s, double *flops);

/* Returns the name of the BLAS in use and makes it use one thread per caller. */
const char *exec_blas_init(void);

/* Fills dims from cfg (f = 4h when 0). */
void exec_dims_of(const exec_config *cfg, exec_dims *d);

/* ---------------------------------------------------------------- the in-process transport */

/* Makes p endpoints sharing one set of mailboxes of capacity cap messages of at most
 * max_bytes each per rank; waits give up after timeout_s. Returns the array (free with
 * exec_threads_transport_free) or NULL and e. */
exec_transport *exec_threads_transport_new(int p, int cap, size_t max_bytes, double timeout_s,
                                           pl_err *e);
void exec_threads_transport_free(exec_transport *t, int p);
/* Makes waiting ranks spin up to spin_s on their mailbox (or the barrier) before sleeping; for
 * runs where every rank has a core of its own (0 = sleep at once, the default). */
void exec_threads_transport_spin(exec_transport *t, double spin_s);
/* Longest a waiting rank spins before it sleeps (when each rank has a core; transport_threads.c;
 * -DEXEC_SPIN_S=0 builds the sleeping-only variant, for comparison): exec_run and the profile's
 * all-reduce (profile_ring.c). */
#ifndef EXEC_SPIN_S
#define EXEC_SPIN_S 0.1
#endif
/* Returns 1 and copies the abort reason when the run was aborted. */
int exec_threads_transport_why(exec_transport *t, pl_err *why);

/* ---------------------------------------------------------------- replicas (exec_replicas.c)
 * Replicated stages, PipeDream's 1F1B-RR (exec_config.replicas). Schedule rank r, whose stages
 * have n replicas, runs as n executor ranks base[r] .. base[r] + n - 1; replica j walks the
 * actions of r's list that sched_replica_of gives it (the simulator's streams walk the same), so
 * microbatch k of stage q runs on replica k mod n, and replica i of stage q sends microbatch k
 * to replica k mod n' of the next stage. Without replicas the layout is the schedule's own.
 *
 * REDUCE_GRAD of a replicated stage is an all-reduce of its replicas' gradient accumulators and
 * counts (stash: one per round of n microbatches; flush and 2bw: once per REDUCE_GRAD without a
 * microbatch, as the lowering places them), so the STEP that follows applies the mean over all
 * the replicas' microbatches. It is exact and so independent of the reduction order: the
 * replicas first agree on the largest binary exponent E of any gradient element (max
 * all-reduce), each element is scaled by 2^S, S = 62 - E - ceil(log2 n), and rounded to an
 * int64 (below 2^62 / n in magnitude), the int64 values are summed (integer addition is
 * associative: the ring, MPI_Allreduce and any other order give the same bits), and the sum is
 * scaled back to fp32. Its error against the exact sum of the fp32 gradients is at most
 * n 2^-(S+1) <= 2^(E-61) per element, below one fp32 ulp of the largest gradient; threads and
 * MPI therefore give identical weights. The threads transport runs a ring over the mailboxes
 * (reduce-scatter then all-gather, 2 (n - 1) steps, pieces of EXEC_RING_PIECE_BYTES); MPI uses
 * MPI_Allreduce on a communicator per replicated stage. */
typedef struct exec_layout {
    int ranks;          /* executor ranks */
    int *reps;          /* [stages] replicas of each stage (1 = not replicated) */
    int *base;          /* [s->ranks] the first executor rank of each schedule rank */
    int *width;         /* [s->ranks] its replicas */
    int *srank, *rep;   /* [ranks] the schedule rank and replica of each executor rank */
    sched_rank *list;   /* [ranks] each executor rank's actions (into acts, or the schedule's own) */
    sched_action *acts;
} exec_layout;

/* Bytes of one message of the ring all-reduce (fewer, larger messages: each costs a lock and a
 * wake-up; on the loaded 2-core machine 64 KiB pieces took about twice as long as 1 MiB ones for
 * 32 MiB). The threads transport's mailbox slots of a replicated run hold at least one, so every
 * slot of every rank's mailbox is that large (ranks x capacity x 256 KiB in all). */
#define EXEC_RING_PIECE_BYTES ((size_t)256 << 10)
/* Builds the layout of s with replicas[stages] (NULL = 1 each) and checks that the executor can
 * run it: every count >= 1, the stages of one rank replicated alike, and each replicated stage's
 * microbatches divisible among its replicas as the schedule needs (a pass's m x iterations for
 * flush and 2bw, the rounds of stash), and each replicated stage reducing its gradients once per
 * update (sched_check_replica_reduces). Returns PL_OK or the error (PL_EINPUT, PL_ENOMEM). Free
 * with exec_layout_free (also after errors). */
int exec_layout_build(const sched *s, const int *replicas, exec_layout *L, pl_err *e);
void exec_layout_free(exec_layout *L);
/* Checks the injected fault (c->fault, tests) against the run's `ranks` executor ranks, whose
 * lists are list[0 .. ranks): its rank one of them, its action in that rank's list, its pass
 * within the run's most passes (a run timed until steady may stop before it), and for the kinds
 * that strike a SEND (RECV) at or after the action, one there. A fault that could never strike
 * would let a test pass without testing anything. Returns PL_OK or PL_EINPUT naming what is
 * wrong. */
int exec_check_fault(const sched_rank *list, int ranks, const exec_config *c, pl_err *e);
/* What a run's executor ranks hold on the host (exec_host_need_of; exec_memory.c's estimate). */
typedef struct exec_host_need {
    double arena; /* bytes: each rank's arena as exec_lines_alloc takes it (weight versions,
                   * stashes, received and sent buffers, scratch, gradients, momentum: the pools
                   * at their dry walk's peaks), its bookkeeping, pass and op records */
    double held;  /* messages that can wait in the ranks' mailboxes at once: at most a pass's
                   * receives, and at most twice the microbatches the ranks' act, in and gin
                   * pools hold at their peaks (a boundary's F output waits only while its
                   * sender stashes it, its gradient only until the receiver's I), and a
                   * replica's ring pieces. The threads transport's mailboxes are calloc'ed to a
                   * pass's receives and fill their lowest free slot, so only these are touched */
    int ranks;    /* executor ranks counted */
} exec_host_need;
/* Fills out for s with cfg and the stage split blocks: every executor rank (srank -1), or the
 * largest of the executor ranks of schedule rank srank (one MPI process runs one). PL_OK or the
 * dry walk's error. */
int exec_host_need_of(const sched *s, const exec_config *cfg, const int *blocks, int srank, exec_host_need *out,
                      pl_err *e);
/* Returns the executor rank that runs stage q's microbatch mb. */
static inline int exec_layout_rank(const exec_layout *L, const sched *s, int q, int64_t mb) {
    int n = L->reps[q];
    return L->base[s->stage_rank[q]] + (n > 1 ? (int)(mb % n) : 0);
}
/* The ring all-reduce over t's send and recv among ranks group0 .. group0 + n - 1 (this rank:
 * group0 + me) of v[count] by sum (or max when max is 1), in messages of at most piece values
 * (tmp holds piece) keyed (EXEC_MSG_REDUCE, stage, *seq + i), *seq advanced past them (every
 * replica's counter moves alike). Returns PL_OK or the transport's error. */
int exec_ring_allreduce(exec_transport *t, int group0, int n, int me, int stage, int64_t *seq, int64_t *v, size_t count,
                        int max, int64_t *tmp, size_t piece, pl_err *e);

/* The all-reduce profile (profile_ring.c): the sizes and repetitions a rank times, its timing
 * loop over any transport and the fit, shared by the threads' ring and MPI's all-reduce. */
#define EXEC_AR_RANKS 2 /* a two-replica all-reduce: the smallest replicated stage */
#define EXEC_AR_SIZES 3 /* one block, half the model, the whole model */
typedef struct exec_ar_plan {
    size_t floats[EXEC_AR_SIZES]; /* gradient floats of each size */
    int reps;                     /* timed repetitions of each, after one warm-up */
    int small_pages;              /* exec_config.small_pages: the gradients as the run holds them */
} exec_ar_plan;
/* Fills pl for cfg's model and reps (at most 15). */
void exec_ar_plan_init(const exec_config *cfg, int reps, exec_ar_plan *pl);
/* Times the all-reduces of rank me of a layout of EXEC_AR_RANKS ranks replicating one stage over
 * t: each size pl->reps times after a warm-up, sync(arg) before each (every rank takes every
 * sync, also after an error); rank 0 records each in t_s[size * reps + rep]. Returns PL_OK or the
 * first error. */
int exec_ar_time_rank(exec_transport *t, const exec_layout *lay, int me, const exec_ar_plan *pl, void (*sync)(void *arg),
                      void *arg, double *t_s, pl_err *e);
/* Fits the medians of rank 0's times t_s (sorted in place) to the ring (cost_ring_allreduce_fit):
 * *latency_s and *bandwidth_Bps. Returns PL_OK or the error, prefixed "profile of the
 * all-reduce: ". */
int exec_ar_fit(const exec_ar_plan *pl, double *t_s, double *latency_s, double *bandwidth_Bps, pl_err *e);

/* The two threads of a profile between two ranks (profile_ring.c, profile_p2p.c): each runs
 * main(&thread[me]) with sh its shared state and fills rc and err. */
typedef struct exec_pair_thread {
    void *sh;
    int me, rc;
    pl_err err;
} exec_pair_thread;
/* Starts EXEC_AR_RANKS threads on main, calls started(sh, ok) once all were tried (ok 0: one did
 * not start; the callback lets the started ones go or stops them), joins them. Returns PL_OK, the
 * error of a thread that did not start, or the first thread's error. */
int exec_pair_run(void *sh, void *(*main)(void *), void (*started)(void *sh, int ok, pl_err *why), const char *what,
                  pl_err *e);

/* The point-to-point profile's plan and fit (profile_p2p.c), shared by the threads transport's
 * (exec_profile_p2p), the MPI transport's (exec_mpi_profile_p2p) and the CUDA hand-off's
 * (cuda_profile.c): EXEC_P2P_SIZES message sizes of
 * 1, 4 and 16 stage boundaries of cfg's model (b x h floats; 1/16, 1/4 and 1 of a boundary above
 * 4 MiB) into bytes, and min(max(reps, 9), 31) timed rounds of each into *rounds; the fit of each
 * size's median time (t_s [EXEC_P2P_SIZES rounds], size after size, rounds at most 31) over
 * `ways` (1 for one-way times, 2 for round trips) to cost_link_s's latency and bandwidth
 * (cost_link_fit). A negative time (its sign bit set) is a one-way round whose receiver came to
 * its wait after the stamp (exec_p2p_side): the median is over the others where at least
 * EXEC_P2P_ON_TIME_MIN of the size's rounds are not, else over all of them as magnitudes. */
#define EXEC_P2P_SIZES 3
#define EXEC_P2P_ON_TIME_MIN 3
void exec_p2p_plan(const exec_config *cfg, int reps, size_t *bytes, int *rounds);
int exec_p2p_fit(const size_t *bytes, const double *t_s, int rounds, double ways, double *latency_s, double *bandwidth_Bps,
                 pl_err *e);
/* What exec_p2p_side times (its rt_s holds EXEC_P2P_SERIES series of EXEC_P2P_SIZES x rounds, in
 * this order): the one-way times (or round trips), rank 0's send calls, and rank 0's posts of a
 * receive whose message already came (one-way rounds only; else zeros). */
enum { EXEC_P2P_TRIP = 0, EXEC_P2P_SEND = 1, EXEC_P2P_POST = 2, EXEC_P2P_SERIES = 3 };
/* Fits exec_p2p_side's series (rt_s, rounds per size) to out: the trips (one way when one_way,
 * else round trips) to its link, the send calls to its send part, and the posts, which only
 * one-way rounds time, to its post part (else left 0). Returns PL_OK or the fit's error. */
int exec_p2p_fit_all(const size_t *bytes, const double *rt_s, int rounds, int one_way, exec_p2p *out, pl_err *e);
/* What a rank of the hand-off's profile streams through between two hand-offs (p, n floats): as
 * many bytes as the weights and gradients of a rank of a 2-rank run of the model
 * (exec_p2p_sweep_floats: ceil(L / 2) blocks, twice), which a run's forwards and backwards
 * stream through between its hand-offs. In a run a hand-off comes after compute that pushed the
 * transport's code, its buffers and the boundary's memory out of the caches; a hand-off between
 * ranks that did nothing else finds them all there. On the MPI transport of a 2-core host that
 * was most of what a run's hand-off costs: the profile's fits at width 256 read 5 us for a post
 * whose message was there after no compute, 27 us after a sweep of 16 MiB on each rank and 43
 * us after 32 MiB (a one-way trip 6, 10 and 27 us), where runs of that width read 31-62 us for
 * such a post (docs/validate_cpu.md, "The hand-off after compute"). */
typedef struct exec_p2p_sweep {
    float *p;
    size_t n;
} exec_p2p_sweep;
size_t exec_p2p_sweep_floats(const exec_config *cfg);
/* Rank me's (0 or 1) side of the ping-pong over transport t: rank 0 sends an activation and
 * waits for the gradient that rank 1 sends back on receiving it, one untimed round trip per
 * size, then `rounds` timed ones; rank 0 writes their times to rt_s (EXEC_P2P_SERIES series,
 * each size after size): with one_way (both ranks read one clock: threads, or MPI processes on
 * one host) the one-way time of each activation (rank 0 stamps it; rank 1 returns what it saw,
 * from the stamp to its receive's completion; where rank 1 came to its wait after the stamp,
 * still computing, the time from that wait, negated, which exec_p2p_fit leaves out),
 * rank 0 computing meanwhile as a run's sender does (it sweeps sw, then spins on the clock,
 * out of the transport, until twice the size's untimed round trip has passed); else each round
 * trip. In one_way rounds each rank sweeps sw before the hand-off, as a run computes before
 * it: rank 0 before each timed send, rank 1 after its gradient's send and before it waits for
 * the next timed activation. Beside them rank 0's own
 * time in each send call, and in one_way rounds in its post of the gradient's receive, which
 * it makes after the spin, the gradient there by then (a post that takes its message out of
 * the mailbox). Rank 1 posts each activation's receive a
 * round ahead, as the run's workers post theirs, where t can (post_recv); buf holds twice the
 * largest size (what it sends, then what it receives). The threads' profile (exec_profile_p2p)
 * and the MPI transport's (exec_mpi_profile_p2p) run it. Returns PL_OK or the transport's
 * error. */
int exec_p2p_side(exec_transport *t, int me, const size_t *bytes, int rounds, int one_way, void *buf, exec_p2p_sweep *sw,
                  double *rt_s, pl_err *e);
/* Whether exec_p2p_side times one way: both ranks read one clock (one_clock) and the smallest
 * message has room for the stamps (a model of width 1 on one row has not: round trips). */
int exec_p2p_one_way(int one_clock, const size_t *bytes);

/* The start gate of a team of threads (exec_team_run): none runs its body before all exist, so
 * that a barrier they meet at fills, or all return when one could not be started. */
typedef struct exec_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state; /* 0 closed, 1 open, -1 return at once */
} exec_gate;
/* Waits at g until the team's threads all exist. Returns 1 to run, 0 to return at once (one of
 * them could not be started: a barrier for all would never fill). */
int exec_gate_pass(exec_gate *g);
/* Runs main(args + i size) on n threads, each calling exec_gate_pass(g) first: starts them, opens
 * g (or tells them to return when one could not start), joins them. Returns PL_OK or
 * PL_EINTERNAL naming the thread of `what` that could not be started. */
int exec_team_run(int n, void *(*main)(void *), void *args, size_t size, exec_gate *g, const char *what, pl_err *e);

/* Initializes MPI (threads: funneled) unless somebody has; exec_mpi_finalize finalizes it then
 * (transport_mpi.c; MPI builds only). */
int exec_mpi_init(pl_err *e);
/* Test only (tests/exec/test_exec_faults.c): "R:barrier" makes MPI rank R stop itself (SIGSTOP)
 * as it enters its second barrier between passes, "R:wait" inside its first wait for a message
 * after that barrier; "R:probe", "R:join", "R:allreduce", "R:steady", "R:gather", "R:profile"
 * where it enters the host probe, the run's set-up, its first all-reduce of a replicated stage
 * after that barrier, the steady rule's exchange of pass times, the gathering of the records,
 * the first MPI profile after the run (mpi_wait.h, EXEC_MTS_*): as a process stopped or starved
 * of CPU would. The others must time out naming it, and the job end (transport_mpi.c). */
#define EXEC_MPI_TEST_STOP_ENV "PIPELAB_MPI_TEST_STOP"

/* Folds the results each[0 .. w) of the w replicas of schedule rank r into out, as the simulator
 * reports a replicated rank (sim.h, "Replicated stages"): busy, idle, bubble and GEMM figures the
 * mean over the replicas, communication summed, memory that of the replica with the largest
 * peak, core replica 0's, and the op records in the order of r's list, each action's from the
 * replica that ran it (replica 0's for an action of all replicas); the ops move out of each.
 * Returns PL_OK or PL_ENOMEM. */
int exec_fold_replicas(const exec_layout *L, const sched *s, int r, exec_rank_result *each, exec_rank_result *out,
                       pl_err *e);

/* ---------------------------------------------------------------- a rank's state (xrank.c, xrank_arena.c) */

/* A pool of equal slots with reference counts; slot i is free when refs[i] == 0. */
typedef struct exec_pool {
    int cap;            /* slots */
    int used, peak;     /* slots in use now, and at most */
    int *refs;          /* [cap] */
    float *base;        /* [cap, stride], NULL in the dry walk */
    size_t slot_floats; /* floats of one slot (what a taken slot counts in memory) */
    size_t stride;      /* slot_floats rounded up to 16 floats: every slot starts on 64 bytes */
} exec_pool;

/* Per (stage, microbatch) progress flags. */
enum { XS_FDONE = 1, XS_GOUT = 2, XS_IDONE = 4 };

/* One stage held by a rank. */
typedef struct exec_xstage {
    int stage, block0, nb;  /* global stage, first block, blocks */
    size_t pfloats;         /* nb x block floats */
    exec_pool ver;          /* weight versions [cap, pfloats] */
    int cur;                /* the newest version */
    float *grad;            /* [pfloats] accumulated since the last STEP */
    float *mom;             /* [pfloats] momentum, NULL without */
    int nacc;               /* backward passes accumulated in grad */
    int steps, steps_new;   /* STEPs so far, and those of them into a new weight version */
    exec_pool act;          /* activations [cap, act floats]: x[1..nb-1] [b,h], then each
                             * block's state [nb][exec_block_state_floats] */
    exec_pool wg;           /* inner gradients from I until W [cap, (nb-1) b h]: g[1..nb-1] [b,h] */
    int *in_of, *gin_of, *act_of, *wg_of, *ver_of, *out_f, *out_b; /* [M] slot of each local
                             * microbatch in its pool, -1 none */
    unsigned char *flags;   /* [M] XS_* */
} exec_xstage;

/* A receive a RECV posted and no compute has needed yet (worker.c). A RECV takes the slot its
 * message lands in and posts the receive (exec_transport.post_recv; without it, nothing is asked
 * of the transport yet); the compute that needs the data completes it first (F of (stage, mb):
 * its RECV_F; I or B: its RECV_B; an overlap both), and the end of the pass completes any left. */
typedef struct exec_xpend {
    int kind, stage, mb;    /* the RECV's */
    long at;                /* its index in the rank's list */
    int posted;             /* 1: posted (wait_recv completes it); 0: recv when needed */
    float *data;            /* the slot it fills */
} exec_xpend;

/* The state of one rank's worker. Everything is allocated up front in `arena`. */
typedef struct exec_xrank {
    _Alignas(EXEC_LINE_BYTES) int r; /* 64-byte aligned and sized: the ranks' states, which their threads
                             * write at every action, share no cache line */
    const sched *s;
    const exec_layout *lay; /* the executor's ranks (replicas); r is an executor rank */
    int sr, rep;            /* the schedule rank x runs (a replica of), and which replica */
    const sched_rank *list; /* the actions x walks: the schedule rank's, or its replica's share */
    int64_t *red;           /* [red_n] the all-reduce's integers (replicated stages only) */
    size_t red_n;
    int64_t *red_seq;       /* [nst] messages of each stage's ring so far (its keys) */
    const exec_config *cfg;
    exec_dims d;
    int M;                  /* microbatches per pass: iterations x m */
    int nst;
    exec_xstage *st;        /* [nst] */
    int *loc;               /* [stages] local index of a stage, -1 elsewhere */
    exec_pool in;           /* stage inputs x0 [b,h] */
    exec_pool gin;          /* stage output gradients gout [b,h] */
    exec_pool out;          /* send staging [b,h] */
    float *scratch;         /* [exec_block_scratch_floats + b*h]: the backward's, a throw-away output */
    const exec_data *data;
    double *loss_mb;        /* [passes * M] shared; written only for the last stage */
    exec_transport *t;
    int pass;
    int64_t goff;           /* global microbatch of local mb 0 in this pass */
    exec_mem cur, peak;
    size_t pending_in_bytes;  /* stage inputs present before their F (received or handed over):
                               * buffers, not yet the cost model's stash */
    size_t model_peak_bytes;  /* most of weights + grads + optimizer + stash - pending_in_bytes at
                               * once: what the cost model's memory counts (exec_mem_predict) */
    float *arena;           /* the one float allocation */
    size_t arena_bytes;
    void *ints_mem;         /* bookkeeping (slot indices, references, flags) */
    int core;               /* pinned core, -1 none */
    /* measurement */
    double *pass_start_s, *pass_end_s, *busy_s, *comm_s; /* [passes] */
    double *gemm_s, *gemm_flops; /* [passes] inside the model's sgemm calls (exec_gemm_clock) */
    double *ready_s;  /* [passes] done with what precedes the pass (exec_rank_record) */
    double *span_s;   /* [passes] first compute start to last compute end (exec_rank_record) */
    exec_op *ops;
    size_t n_ops, cap_ops;
    pl_err err;
    int rc;
    struct exec_prof_worker *prof; /* the profile measured between the passes (owned), NULL without */
    exec_xpend *pend;       /* [cap_pend] receives posted and not completed, in list order */
    int n_pend, cap_pend;   /* cap_pend: the RECVs of the rank's list */
    int passes;             /* the passes walked (exec_xrank_record's; fewer than
                             * exec_passes_most when the run was steady before) */
    const struct exec_xrank *const *peers; /* [npeers] every rank of a run in this process
                             * (threads; the CUDA backend's rank threads), whose pass times decide
                             * when it is steady (exec_config.timed_passes_max); NULL in one MPI
                             * process */
    int npeers;
    double *steady_v;       /* [timed passes most] the pass times of the steady rule (owned) */
    const double **steady_p;/* [2 npeers]: each rank's pass starts, then ends (in steady_v's block) */
    long at;                /* the action being executed (0-based), -1 between actions: where
                             * a stopped or vanished worker was (exec_run's messages) */
} exec_xrank;

/* ---------------------------------------------------------------- profiling between passes (profile.c)
 * The profile's rounds (exec_profile_layers_n) timed on a run's own worker threads, in the gaps
 * between its passes (exec_config.profile_between_reps). */
typedef struct exec_prof_worker exec_prof_worker;
/* Fills the sizes of one block of shape d in p: parameters, the output that crosses a stage
 * boundary, the stash from F to the backward and from I to W (every profiler's). */
void exec_profile_sizes(const exec_dims *d, exec_layer_profile *p);
/* Blocks each of `threads` profiling workers holds (a rank's share of the model, bounded). */
int exec_prof_blocks(const exec_config *cfg, int threads);
/* Timed rounds (of the profile's microbatches) that give at least reps samples of every block. */
int exec_prof_rounds(int reps);
/* Bytes one profile worker of `threads` takes for cfg (exec_prof_worker_new's or the concurrent
 * profile's: its blocks, slots, gradients and scratch as exec_lines_alloc takes them, and its
 * sample arrays for `rounds` timed rounds, with the again samples for a schedule of
 * `again_stages` stages, none at 0). */
double exec_prof_worker_bytes(const exec_config *cfg, int threads, int rounds, int again_stages);
/* Bytes the all-reduce profile (exec_profile_allreduce) and the point-to-point profile
 * (exec_profile_p2p) take for cfg at once: each its two threads' buffers and its mailboxes. */
double exec_ar_profile_bytes(const exec_config *cfg, int reps);
double exec_p2p_profile_bytes(const exec_config *cfg, int reps);
/* Blocks of a profile worker's again samples (FA, IA, WA) when it holds `blocks`, for a schedule
 * of `stages` stages: a stage's worth, cfg's layers over the stages (rounded to the nearest, at
 * least 1, at most `blocks`); 0 at stages 0 (no again samples). A streak of one stage's actions
 * finds the caches holding that stage's blocks alone: the one-block stages of a 4-chunk
 * schedule run faster than a streak through two blocks (docs/validate_cpu.md, "The again
 * samples through a stage's blocks"). */
int exec_prof_again_blocks(const exec_config *cfg, int blocks, int stages);
/* The stages for a profile that knows no schedule (`pipelab profile`, the concurrent profile) on
 * `threads` workers: a 2-chunk schedule's, whose stage is half a worker's blocks. */
#define EXEC_PROF_AGAIN_ANY_STAGES(threads) (2 * ((threads) > 1 ? (threads) : 1))
/* Buffers and sample space of worker tid of `threads` for `rounds` timed rounds (after one
 * untimed warm-up round), with the again samples for a schedule of `again_stages` stages
 * (exec_prof_again_blocks; at 0 their times stay 0); its blocks' initial weights copied from
 * rank `weights` where it holds them, just set up (the same values as exec_block_init's, without
 * drawing them again), else drawn. NULL and e when out of memory. */
exec_prof_worker *exec_prof_worker_new(const exec_config *cfg, int tid, int threads, int rounds, int again_stages,
                                       const exec_xrank *weights, pl_err *e);
/* The FLOPs of one round of a profile worker of `threads` for cfg (with the again samples for a
 * schedule of `again_stages` stages, none at 0), and whether its gaps open with an untimed
 * round (exec_prof_gap_rounds): 1 when the round is short, under PROFILE_OPEN_MAX_FLOPS
 * (profile.c). The same on every rank: all decide
 * alike, and each round is followed by a barrier. */
double exec_prof_round_flops(const exec_config *cfg, int threads, int again_stages);
int exec_prof_opens(const exec_config *cfg, int threads, int again_stages);
/* The rounds of gap g (0 .. gaps - 1: before timed pass g; negative: before a warm-up pass; gaps
 * or more: before a pass that a run timed until steady added, the same spread continued) of
 * a run profiled between its passes with `reps` repetitions over `gaps` timed passes: returns
 * its timed rounds, the exec_prof_rounds(reps) spread evenly over the gaps, and sets *untimed
 * to the untimed round that opens it: 1 in the first gap (warm: the warm-up round) and, when
 * `opens` (exec_prof_opens), in any gap with timed rounds, else 0. The opening round takes the
 * switch from the pass's work to the profile's: on a host whose cores slow down after such a
 * switch, a round right after a pass timed 10-40% over one after a round while the passes, most
 * of which followed a pass, did not pay it, and the short iterations, whose rounds all follow a
 * pass, were predicted that much long (docs/validate_cpu.md, "The gap's opening round"). The
 * switch is a fixed cost, which a long round takes as a small part of its time. */
int exec_prof_gap_rounds(int reps, int gaps, int g, int warm, int opens, int *untimed);
/* Runs w's next timed round on the calling thread (none after the last), or an untimed one
 * (exec_prof_gap_rounds); after: 1 when other work (the run's pass) ran on the thread since w's
 * previous round. */
void exec_prof_worker_round(exec_prof_worker *w, int after, int untimed);
/* The sharing term's phases after w's timed round (exec_prof_worker_round), on P workers, in
 * three parts, in each of which the workers take turns, worker q's turn being q (P - 1 - q
 * every other time):
 * - phase 0, every worker at once, runs one microbatch's F through the worker's blocks untimed;
 * - phase 1 + q, the worker of turn q alone (the others wait), the same F timed (FL); phase
 *   P + 1, every worker at once, the same F timed (FS);
 * - in even rounds only (in odd rounds every worker waits through these phases): phase P + 2 + q, the worker of turn
 *   q alone runs the F untimed and then that microbatch's backward (I then W of every block, W
 *   into the profile's own gradients, never the rank's lent ones) timed (BL); phase 2 P + 2,
 *   every worker at once, the F and the backward (BS);
 * - phase 2 P + 3 + q, the worker of turn q runs the F and the backward (BX) while every other
 *   runs the F and then F after F for 1.25 times its own BS of the round, the first of which
 *   worker (q + 1) mod P, by id, times (FX). A worker's own BS is the cover: on stages of
 *   unequal cost a lighter worker's forwards can end before a heavier one's backward does.
 * Each timed F follows the worker's own F of the same blocks, and each backward its own F, so
 * that a kind's samples differ in the other workers' compute beside them and in nothing else.
 * Runs phase `phase` on the calling thread (nothing after an untimed round, or one worker) and
 * returns the count of phases, 3 P + 3, the same on every worker in every round: its caller runs
 * them all, each followed by a barrier of all the workers, which the alone phases need. */
int exec_prof_worker_share(exec_prof_worker *w, int phase);
/* The profile over the n workers' rounds in p, and each one's alone in each[n] (when not NULL). */
int exec_prof_worker_collect(exec_prof_worker *const *w, int n, const exec_config *cfg, exec_layer_profile *p,
                             exec_layer_profile *each, pl_err *e);
void exec_prof_worker_free(exec_prof_worker *w);
/* Whether worker w's gaps open with an untimed round (exec_prof_opens of its configuration). */
int exec_prof_worker_opens(const exec_prof_worker *w);
/* Worker w's blocks' weights (*blocks of them, exec_block_floats each), for the tests. */
const float *exec_prof_worker_weights(const exec_prof_worker *w, int *blocks);
/* The weights worker w's F and I read for its block k (exec_xrank_held_block of its rank, or
 * its own copy), for the tests. */
const float *exec_prof_worker_block(const exec_prof_worker *w, int k);
/* For one gap of rank x's passes: worker w's F, I, W and STEP work on the rank's newest weights,
 * gradients and momentum for each block the rank holds with no gradient accumulated
 * (exec_xrank_held_state), where the run's passes do, keeping a copy of the momentum; on what
 * they had before for the others. exec_prof_worker_unlend puts the momentum back and returns
 * w to its own memory; the rounds between leave the gradients zero (each round ends with its
 * STEP) and the weights as they were (the STEP's learning rate is 0), so that the run trains as
 * it would without the rounds. Returns the blocks lent. */
int exec_prof_worker_lend(exec_prof_worker *w, const exec_xrank *x);
void exec_prof_worker_unlend(exec_prof_worker *w);
/* The gradients worker w's W accumulates block k's into, and the weights its STEP writes, now
 * (the tests). */
const float *exec_prof_worker_grad(const exec_prof_worker *w, int k);
const float *exec_prof_worker_step_out(const exec_prof_worker *w, int k);
/* Fills g[EXEC_WINDOWS] with the pass-length factors of a worker's n units in the order it ran
 * them (a[i] the unit's time, c[i] its time by the profile's medians; profile_windows.c); all 0
 * when none has a clean time or out of memory (the term is then off). */
void exec_window_factors(const double *a, const double *c, size_t n, double *g);
/* Returns the stretch of work over which profile p's times are medians, for a worker of `blocks`
 * blocks: the mean over F, I and W of one round's samples of the kind (profile.c); the
 * pass-length factors are relative to a window this long. */
double exec_window_reference_s(const exec_layer_profile *p, int blocks);
/* Appends p's times as worker `worker`'s line to out ("# pipelab-exec worker=W core=C fwd_s=T
 * ...", core -1: not pinned; profile_lines.c, whose readers take it back). */
void exec_worker_line(const exec_layer_profile *p, int worker, int core, pl_buf *out);
/* Appends p's windows line for worker `worker` to out ("# pipelab-exec windows worker=..."):
 * 1, or 0 when p has no factors (nothing written). */
int exec_window_line(const exec_layer_profile *p, int worker, pl_buf *out);
/* Writes p's rounds line of worker `worker` (exec_profile_worker_rounds) to out when p has rounds;
 * returns 1 when written, 0 when not. */
int exec_rounds_line(const exec_layer_profile *p, int worker, pl_buf *out);
/* Gives rank x its worker of the profile between the passes (x->prof; the profile's blocks of
 * its share, `threads` workers in all). Returns PL_OK or the error, naming the rank. */
int exec_xrank_prof_new(exec_xrank *x, const exec_config *cfg, int threads, pl_err *e);
/* The initial weights of global block b on rank x, just set up (before any STEP), or NULL when
 * none of its stages holds b. */
const float *exec_xrank_initial_block(const exec_xrank *x, int b);
/* The k-th block rank x holds (its stages in order, each stage's blocks in order) where its
 * passes stream it: in its first weight-version slot; NULL when it holds k blocks or fewer. */
const float *exec_xrank_held_block(const exec_xrank *x, int k);
/* Where the k-th block rank x holds keeps what a STEP goes through, between two passes: its
 * newest weights (the version the next pass's first F reads), gradients and momentum (NULL
 * without) in *w, *g, *mom, and in *out where its STEP writes: *w (in place), or a free weight
 * version slot when most of its stage's STEPs so far went into a new version (weights in flight:
 * PipeDream's stashing, 2BW), whose next STEP overwrites all of it.
 * Returns 1 when x holds that block and its stage has accumulated no gradient since its last
 * STEP (its gradients all zero, as that STEP left them), else 0 (nothing set). */
int exec_xrank_held_state(const exec_xrank *x, int k, float **w, float **out, float **g, float **mom);
/* Returns 1 when every stage rank x holds steps after each of its backwards
 * (sched_stage_steps_each_backward), else 0. */
int exec_xrank_steps_each_backward(const exec_xrank *x);
/* The kinds of exec_rank_record.prof_s and of the profilers' samples, in order: F, I and W of a
 * block and microbatch (EXEC_PROF_FIW of them, whose samples come first), STEP of a block, the
 * first block's I (I0), and I and W of a block at reuse distance 0 (IH, WH: right after their
 * forward, resp. their I), then F, I, W of a round's first microbatch (FF, IF, WF) and of its
 * others (FR, IR, WR): the samples of F, I, W by slot; then F, I, W again on the same blocks
 * right after the same kind for other microbatches (FA, IA, WA: the last of a streak of
 * PROFILE_AGAIN_MBS, each's I and W back to back as a B's); then the IH sample of the worker's
 * last block alone, which follows that block's forward with nothing between (IN); then F of a
 * block right after another microbatch's backwards on the worker's blocks (FB); then the
 * forward's jitter (FSD, exec_layer_profile.f_sd_s: a spread of the F samples, not a kind of
 * sample of its own); then F, I, W of the cycle on two weight versions (FT, IT, WT) and of the
 * same cycle in place (FO, IO, WO), where the worker's STEPs go into a new version (prof_versions);
 * then the STEP's mean over the rounds (STA, exec_layer_profile.step_mean_s: the STEP's samples,
 * another estimate of them, exec_mean_less_stalls; STEP itself is their median round); then F of
 * the worker's blocks with the other workers waiting and with all at once (FL, FS: the sharing
 * term's, exec_prof_worker_share), F beside another worker's backward (FX), and a backward of
 * the worker's blocks alone, beside the others' backwards and beside their forwards (BL, BS, BX:
 * the sharing term per class). */
enum { EXEC_PROF_F, EXEC_PROF_I, EXEC_PROF_W, EXEC_PROF_STEP, EXEC_PROF_I0, EXEC_PROF_IH, EXEC_PROF_WH,
       EXEC_PROF_FF, EXEC_PROF_IF, EXEC_PROF_WF, EXEC_PROF_FR, EXEC_PROF_IR, EXEC_PROF_WR,
       EXEC_PROF_FA, EXEC_PROF_IA, EXEC_PROF_WA, EXEC_PROF_IN, EXEC_PROF_FB, EXEC_PROF_FSD,
       EXEC_PROF_FT, EXEC_PROF_IT, EXEC_PROF_WT, EXEC_PROF_FO, EXEC_PROF_IO, EXEC_PROF_WO, EXEC_PROF_STA,
       EXEC_PROF_FL, EXEC_PROF_FS, EXEC_PROF_FX, EXEC_PROF_BL, EXEC_PROF_BS, EXEC_PROF_BX };
#define EXEC_PROF_FIW EXEC_PROF_STEP
/* Returns p's time of kind k, in the order of exec_rank_record.prof_s (EXEC_PROF_*). */
static inline double *exec_prof_kind(exec_layer_profile *p, int k) {
    double *const kind[EXEC_PROF_KINDS] = {&p->f_s,       &p->i_s,       &p->w_s,       &p->step_s,   &p->i0_s,
                                           &p->i_hot_s,   &p->w_hot_s,   &p->f_first_s, &p->i_first_s, &p->w_first_s,
                                           &p->f_rest_s,  &p->i_rest_s,  &p->w_rest_s,  &p->f_again_s,
                                           &p->i_again_s, &p->w_again_s, &p->i_next_s,  &p->f_back_s,
                                           &p->f_sd_s,    &p->f_two_s,   &p->i_two_s,   &p->w_two_s,
                                           &p->f_one_s,   &p->i_one_s,   &p->w_one_s,   &p->step_mean_s,
                                           &p->f_alone_s, &p->f_side_s, &p->f_cross_s, &p->b_alone_s,
                                           &p->b_side_s,  &p->b_cross_s};
    return kind[k];
}

/* ---------------------------------------------------------------- per-rank bookkeeping (xrank.c)
 * What every backend's worker does to its exec_xrank around the compute of an action. The CPU
 * worker (worker.c) and the CUDA worker (cuda/cuda_walk.c) call the same functions: their pools,
 * memory classes, peaks and errors are the same by construction. */

/* Returns a free slot (lowest index) with one reference, or -1 when all are taken. */
int exec_pool_get(exec_pool *p);
/* Drops one reference of slot i; returns 1 when the slot became free. */
int exec_pool_put(exec_pool *p, int i);
/* Returns slot i's floats (NULL in the dry walk). */
static inline float *exec_pool_slot(const exec_pool *p, int i) {
    return p->base ? p->base + (size_t)i * p->stride : NULL;
}
/* Records the largest "model" total (the classes the cost model counts: weights, gradients,
 * optimizer state and the stash of microbatches whose F ran, without their pending inputs). */
void exec_xrank_model_peak(exec_xrank *x);
/* Adds delta bytes to one class of x's memory and to the total; records the peaks; returns
 * PL_ENOMEM when the budget is exceeded. */
int exec_xrank_mem_add(exec_xrank *x, size_t *cls, long long delta, pl_err *e);
/* Takes a slot of p and counts its bytes in class cls; returns the slot or -1 with e. */
int exec_xrank_take(exec_xrank *x, exec_pool *p, size_t *cls, const char *what, pl_err *e);
/* Releases slot i of p and uncounts its bytes from cls. */
void exec_xrank_give(exec_xrank *x, exec_pool *p, int i, size_t *cls);
/* Returns the local stage for global stage s, or NULL with e when it is not on this rank. */
exec_xstage *exec_xrank_local(exec_xrank *x, int s, pl_err *e);
/* Returns 1 when mb is a valid local microbatch, else fills e. */
int exec_xrank_mb_ok(const exec_xrank *x, int mb, pl_err *e);
/* Begins pass `pass` on x: its index, its data set offset (goff) and the passes x's record holds
 * (exec_xrank_record), this one included. Both backends' pass loops call it, so that the record's
 * count follows the walk. */
void exec_xrank_pass_begin(exec_xrank *x, int pass);
/* Decides, before pass `pass` of a run timed until steady (exec_config.timed_passes_max),
 * whether it stops there: *stop = 1 when it has timed timed_passes or more and their steadiness
 * (exec_steadiness of the passes' times over all ranks, exec_pass_span) is within steady_max.
 * Called after the barrier that ends the previous pass, so every rank decides alike: ranks in
 * one process (threads; the CUDA backend's rank threads) read every rank's pass times (peers),
 * which all wrote before it; MPI ranks combine the pass just timed over all ranks
 * (exec_transport.allmax: the earliest start (negated) and the latest end, by max, on each process's
 * clock: CLOCK_MONOTONIC, the same on one host) and keep its span. Returns PL_OK or the
 * transport's error. */
int exec_xrank_steady_done(exec_xrank *x, int pass, int *stop);
/* Checks that a pass left nothing in flight; returns PL_OK or an error. */
int exec_xrank_pass_end_check(const exec_xrank *x, pl_err *e);

/* Pointers into the buffers of one microbatch of a stage (host addresses of x's arena; NULL
 * where nothing is held): its input slot, activation slot, output-gradient slot, inner-gradient
 * slot. A backend whose data lives elsewhere maps them (same offsets). */
typedef struct exec_xview {
    float *in, *act, *gin, *wg;
    size_t bh, bf; /* b h, b f */
    size_t sf;     /* floats of one block's state (exec_block_state_floats) */
    int nb;        /* the stage's blocks */
} exec_xview;
/* Returns the view of local microbatch j of stage st. */
exec_xview exec_xview_of(const exec_xrank *x, const exec_xstage *st, int j);
/* Block k's input x(k) (k = 0: the stage input), H/dH(k), A(k), and the gradient g(k) at block
 * k's input (k = nb: the stage output's gradient); NULL where the microbatch holds none. */
static inline float *exec_xv_x(const exec_xview *v, int k) {
    if (!v->in) return NULL;
    return k == 0 ? v->in : v->act + (size_t)(k - 1) * v->bh;
}
static inline float *exec_xv_state(const exec_xview *v, int k) {
    return v->act ? v->act + (size_t)(v->nb - 1) * v->bh + (size_t)k * v->sf : NULL;
}
/* The dense block's state: H/dH(k) [b, f], then A(k) = gelu(H) [b, f]. */
static inline float *exec_xv_hd(const exec_xview *v, int k) { return exec_xv_state(v, k); }
static inline float *exec_xv_a(const exec_xview *v, int k) {
    return v->act ? exec_xv_state(v, k) + v->bf : NULL;
}
static inline float *exec_xv_g(const exec_xview *v, int k) {
    if (k == v->nb) return v->gin;
    return v->wg ? v->wg + (size_t)(k - 1) * v->bh : NULL;
}

/* The bookkeeping of an F, filled by exec_xrank_f_begin. */
typedef struct exec_xf {
    exec_xstage *st;
    int ver;          /* the weight version the forward uses (one reference taken) */
    int in_new;       /* stage 0: the input slot taken, to fill from the data set; else -1 */
    exec_pool *out;   /* where the stage's output goes: an output-gradient slot (the last stage:
                       * turned into the loss gradient in place), the next stage's input slot
                       * (on this rank: handed over without a copy), or a send slot */
    int out_slot;
    int last;         /* the last stage */
    int64_t g;        /* the global microbatch */
    int di;           /* its microbatch of the data set */
} exec_xf;
/* F of (s, j) before its compute: checks, takes the input (stage 0), a weight reference, the
 * activations and the output slot. Returns PL_OK or an error. */
int exec_xrank_f_begin(exec_xrank *x, int s, int j, exec_xf *f, pl_err *e);
/* After the compute: flags; under full recomputation the activations are given back. */
void exec_xrank_f_end(exec_xrank *x, const exec_xf *f, int j);

/* The bookkeeping of an I, filled by exec_xrank_i_begin. */
typedef struct exec_xi {
    exec_xstage *st;
    int ver;          /* the version the forward used */
    int recompute;    /* 1: activation slot taken anew: the backend reruns the forward first */
    exec_pool *gx;    /* where the input gradient goes (the previous stage's output-gradient slot
                       * on this rank, or a send slot); NULL for stage 0 */
    int gx_slot;
} exec_xi;
/* I of (s, j) before its compute: checks, takes the activations (recomputation), the inner
 * gradients (nb > 1) and the input gradient's slot. Returns PL_OK or an error. The caller sets
 * XS_IDONE once the compute is issued. */
int exec_xrank_i_begin(exec_xrank *x, int s, int j, exec_xi *b, pl_err *e);
/* W of (s, j) before its compute: returns the stage, or NULL with e. */
exec_xstage *exec_xrank_w_begin(exec_xrank *x, int s, int j, pl_err *e);
/* After W's compute: counts the gradient, frees what the microbatch held (activations, input,
 * gradients, its weight version reference). */
void exec_xrank_w_end(exec_xrank *x, exec_xstage *st, int j);
/* STEP of stage s before its compute: *stp = NULL when nothing was accumulated, else the stage
 * and in *dst the version slot to write (the newest in place, or a new slot when microbatches
 * in flight use the newest). Returns PL_OK or an error. */
int exec_xrank_step_begin(exec_xrank *x, int s, exec_xstage **stp, int *dst, pl_err *e);
/* After it: dst becomes the newest version (the old one is freed by its last microbatch). */
void exec_xrank_step_end(exec_xstage *st, int dst);
/* SEND a: checks; returns the pointer to the send slot's index in the stage (NULL with e). */
int *exec_xrank_send_begin(exec_xrank *x, const sched_action *a, pl_err *e);
/* After the send is issued: the send slot is given back. */
void exec_xrank_send_end(exec_xrank *x, int *slotp);
/* RECV a: checks, takes the slot the message lands in (*pool: x->in or x->gin); returns it, or
 * -1 with e. */
int exec_xrank_recv_begin(exec_xrank *x, const sched_action *a, exec_pool **pool, pl_err *e);

/* Moves what a finished rank measured into rec (its arrays change owner), with the newest
 * weights of its stages from the host arena when exec_record_weights says they are read;
 * allocated_bytes: what the rank allocated. Returns PL_OK or PL_ENOMEM. */
int exec_xrank_record(exec_xrank *x, const double *loss_mb, size_t allocated_bytes, exec_rank_record *rec,
                      pl_err *e);
/* 1 when the ranks' records must carry their final weights: the run returns them
 * (return_weights) or checks that the replicas of a stage agree. */
int exec_record_weights(const exec_config *c, int stages);
/* Adds "rank R, action K (text), pass P: " before e's message: rank x failed at its action k. */
void exec_xrank_at(const exec_xrank *x, size_t k, pl_err *e);
/* Writes "action K (text) of pass P" (or "between actions of pass P") for where x is into buf. */
void exec_xrank_where(const exec_xrank *x, char *buf, size_t n);

/* ---------------------------------------------------------------- a rank's arena (xrank_arena.c) */

/* Sets up rank r, whatever backend computes: walks its list once without data (the bookkeeping
 * of each action alone: checking the list and sizing every pool), then allocates once and
 * writes the initial weights. Returns PL_OK, or an error naming the rank and action. */
int exec_xrank_init(exec_xrank *x, int r, const sched *s, const exec_config *cfg,
                    const int *blocks, const exec_data *data, double *loss_mb, pl_err *e);
/* exec_xrank_init, then the measurement arrays (and op records when cfg asks); core -1. */
int exec_xrank_setup(exec_xrank *x, int r, const sched *s, const exec_config *cfg, const int *blocks,
                     const exec_data *data, double *loss_mb, pl_err *e);
/* exec_xrank_setup for executor rank r of layout L (NULL: the schedule's ranks). */
int exec_xrank_setup_in(exec_xrank *x, int r, const exec_layout *L, const sched *s, const exec_config *c,
                        const int *blocks, const exec_data *data, double *loss_mb, pl_err *e);
/* REDUCE_GRAD of stage st on x: the exact all-reduce of its gradient and count over the stage's
 * replicas (nothing without replicas). Returns PL_OK or the error. */
int exec_xrank_reduce(exec_xrank *x, exec_xstage *st, pl_err *e);
/* Gives x (set up in layout x->lay) the all-reduce's buffer when one of its stages is
 * replicated. Returns PL_OK or PL_ENOMEM. */
int exec_xrank_reduce_setup(exec_xrank *x, pl_err *e);
void exec_xrank_free(exec_xrank *x);

/* ---------------------------------------------------------------- the CPU worker (worker.c) */

/* The worker thread's body: warm-up and timed passes over the list (arg: exec_xrank *). A worker
 * whose thread ends early (pthread_exit between actions: EXEC_FAULT_EXIT) reports it from a
 * cleanup handler: x->rc, x->err naming the action it was on, the run aborted, the rank
 * finished. The thread is not cancellable while it walks. x stays with its owner (exec_run frees
 * it after the join; a rank that vanishes inside exec_run_rank never returns, so its state is
 * lost with the thread, as a crashed process's would be). */
void *exec_worker_main(void *arg);

/* ---------------------------------------------------------------- the run's helpers */

/* Returns timed pass q's time over n ranks whose pass starts and ends (one clock) are start[r]
 * and end[r]: from its first start to its last end (exec_assemble.c; the iteration time's, and
 * the steady rule's, exec_config.timed_passes_max). */
double exec_pass_span(int n, const double *const *start, const double *const *end, int q);
/* Returns the standard deviation of v[n] over n (the run's pass_stddev_s; 0 for n < 2). */
double exec_stddev(const double *v, int n);
/* Returns the median of v[n] by exec_median_passes' rule (the middle value, or the mean of the
 * middle two) without touching v; NAN when n is 0 or out of memory (exec_assemble.c). */
double exec_median(const double *v, size_t n);
/* Returns the mean of v[n] over the values within EXEC_GAP_MAX_S of their median (exec_median):
 * the host's stalls left out, its shorter interruptions kept at their share, as a pass holds
 * them; NAN when n is 0 or out of memory. The profile's exec_layer_profile.step_mean_s. */
double exec_mean_less_stalls(const double *v, size_t n);

/* Returns the persistent part of the variance of d[n] (n >= 2): its autocovariance at lag 1
 * about the series' mean, plus its variance over n (the bias that taking out the mean gives the
 * first: -variance / n for independent values), after each value is clipped to 3 robust
 * standard deviations (1.4826 times the median absolute deviation) about the median, so that one
 * interrupted round moves it little; d is clipped in place. What varies from one value to the
 * next alone (an action's jitter, a single interruption) adds nothing to it in expectation; what
 * holds over consecutive values adds its variance. tmp holds n doubles. The ranks' drift (exec_layer_profile.drift) is half of it over
 * the log ratios of two workers' rounds. */
double exec_lag1_variance(double *d, size_t n, double *tmp);
/* The ranks' drift (exec_layer_profile.drift) from `workers` workers' per-round F means
 * (means[i][r] of round r of worker i, n[i] rounds; 0: no whole round, left out): for each pair
 * of workers, their rounds side by side, the lag-1 variance of the log ratios of their means
 * (negative counts as 0), half of it one worker's; the square root of the mean over the pairs.
 * 0 with fewer than two workers, or where a pair has fewer than EXEC_DRIFT_MIN_ROUNDS rounds side
 * by side. scratch holds at least twice the most rounds of any worker. */
#define EXEC_DRIFT_MIN_ROUNDS 8
double exec_drift_of(const double *const *means, const size_t *n, int workers, double *scratch);
/* Writes worker w's per-round F means (the mean over each timed round's microbatches after its
 * first of their F summed over the worker's blocks; 0 for a round without its F samples) to out
 * when out is not NULL; returns how many rounds it ran. */
size_t exec_prof_worker_round_fwd(const exec_prof_worker *w, double *out);
/* The backward's counterpart: each round's I + W, the mean over its microbatches after its first,
 * summed over the worker's blocks, into out (when not NULL); returns the rounds it ran. */
size_t exec_prof_worker_round_bwd(const exec_prof_worker *w, double *out);
/* Writes the cost-model part of a profile CSV (the "#@" metadata line, the header, one row per
 * block with p's sizes, and p's times, or block k's rows[k] when rows is not NULL) to out;
 * every profiler's CSV ends with it (exec_drive.c). Returns PL_OK or PL_ENOMEM. */
int exec_profile_csv_table(const exec_config *cfg, const exec_layer_profile *p, const exec_layer_profile *const *rows,
                           pl_buf *out, pl_err *e);
/* Checks the configuration's numbers; returns PL_OK or PL_EINPUT naming the bad one
 * (exec_config.c). */
int exec_check_config(const exec_config *c, pl_err *e);
/* Checks what every entry point checks: a lowered, valid schedule and a sane configuration;
 * fills blocks[stages] (exec_stage_blocks). Returns PL_OK or the error. */
int exec_check_run(const sched *s, const exec_config *c, int *blocks, pl_err *e);
/* Returns D, the data set's microbatches: cfg's, or EXEC_DEFAULT_DATASET_MICROBATCHES when 0. */
int exec_dataset_microbatches(const exec_config *cfg);
/* Fills loss[n_iters] with each iteration's mean microbatch loss from loss_mb[n_iters m] (the
 * run's and the reference's). */
void exec_iteration_losses(const double *loss_mb, int n_iters, int m, double *loss);
/* Points r's per-pass arrays (pass_end_s ... span_s) into the one block at r->pass_start_s of
 * EXEC_REC_ARRAYS x r->passes doubles, in exec_rank_record's order (exec_assemble.c). */
void exec_rank_record_arrays(exec_rank_record *r);
/* Returns what a message of kind k carries, for messages about it. */
static inline const char *exec_msg_what(int k) {
    return k == EXEC_MSG_ACT ? "activations" : k == EXEC_MSG_GRAD ? "gradients" : "all-reduce values";
}
/* Returns 1 when e is the echo of a run stopped by another failure (EXEC_ABORTED), else 0. */
static inline int exec_err_aborted(const pl_err *e) {
    return strncmp(e->msg, EXEC_ABORTED, sizeof EXEC_ABORTED - 1) == 0;
}

#endif
