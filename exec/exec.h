/* exec.h: the real executor: runs a lowered schedule on a trainable fp32 model, one worker per
 * rank, measures it, and a sequential reference of the same training for the tests. */
#ifndef EXEC_H
#define EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "pl_common.h"
#include "pl_sched.h"

/* ---------------------------------------------------------------- the model
 *
 * A stack of L blocks of width h: by default dense blocks  y = x + W2 . gelu(W1 . x + b1) + b2,  with
 * W1 [f, h], b1 [f], W2 [h, f], b2 [h] (f = 4h by default), GELU in its tanh form. Stage s of the
 * schedule holds a contiguous range of blocks. Microbatches of b rows; the input rows are
 * N(0, 1); the target is the output of a fixed random network of the same shape (another seed);
 * the loss of a microbatch is the mean squared error over its b x h outputs. SGD, optionally with
 * momentum (PyTorch's form: v = mu v + g; w -= lr v), applied at STEP to the average of the
 * gradients accumulated since the previous STEP of that stage.
 *
 * Data: a fixed data set of D microbatches generated from data_seed (inputs) and target_seed
 * (the target network); global microbatch G (= pass * iterations * m + the schedule's mb) reads
 * entry G mod D. Every run therefore sees the same data for the same (iteration, microbatch). */

/* Injected faults, for the tests of failure handling (README: "Executor faults"). Each one
 * strikes the first time `rank` reaches `action` in pass `pass`, after the checks and the setup,
 * so that it behaves as a bug or a crash in the middle of a run would. */
typedef enum exec_fault_kind {
    EXEC_FAULT_NONE = 0,
    EXEC_FAULT_ERROR,     /* the action fails with an error */
    EXEC_FAULT_BAD_SIZE,  /* a SEND sends a message one float short (the receiver must notice) */
    EXEC_FAULT_EXIT,      /* the worker vanishes at the action without reporting: its thread ends
                           * (pthread_exit), as a crashed thread would; the run must notice and
                           * name the rank and the action it was on */
    EXEC_FAULT_KILL,      /* the worker's process kills itself with SIGKILL at the action (with
                           * MPI: one rank's process dies; with threads: the whole run dies) */
    EXEC_FAULT_DROP_RECV, /* the rank skips its first RECV at or after the action, as a buggy
                           * schedule or tool would: a message is sent to a rank that never
                           * receives it */
    EXEC_FAULT_DROP_SEND, /* the rank skips the transfer of its first SEND at or after the
                           * action: a rank waits for a message that never comes */
    EXEC_FAULT_EXTRA_SEND,/* the rank's first SEND at or after the action is sent twice, as a
                           * schedule with a SEND that no RECV matches would: the second copy goes
                           * to a rank that never receives it */
    EXEC_FAULT_DELAY_SEND /* the rank's first SEND at or after the action is sent 0.25 s late (the
                           * sender sleeps inside the SEND): not a failure; the run must complete
                           * and the receiver must not stall before the compute that needs it */
} exec_fault_kind;

typedef struct exec_fault {
    exec_fault_kind kind;
    int rank;      /* the rank that misbehaves */
    int action;    /* 0-based index in that rank's lowered list (BAD_SIZE, DROP_*, EXTRA_SEND:
                    * the first matching action at or after it) */
    int pass;      /* the pass in which it happens (0 = first) */
} exec_fault;

/* Returns the name of a fault kind ("error", "size", "exit", "kill", "drop-recv", "drop-send",
 * "extra-send", "delay-send"), or NULL for EXEC_FAULT_NONE and unknown kinds. */
const char *exec_fault_name(exec_fault_kind k);
/* Returns the kind named name, or EXEC_FAULT_NONE when no kind has that name. */
exec_fault_kind exec_fault_parse(const char *name);

/* Where the executor runs (exec_config.backend) and in which GEMM precision. */
typedef enum exec_backend { EXEC_BACKEND_CPU = 0, EXEC_BACKEND_CUDA = 1 } exec_backend;
typedef enum exec_precision { EXEC_PREC_FP32 = 0, EXEC_PREC_TF32 = 1, EXEC_PREC_BF16 = 2 } exec_precision;

/* The block the model stacks (exec_config.block; README: "Models"):
 *   EXEC_BLOCK_MLP  the dense block  y = x + W2 gelu(W1 x + b1) + b2  (above);
 *   EXEC_BLOCK_GPT  a GPT-2 decoder block on b sequences of `seq` tokens (b seq rows of width h):
 *                   x2 = x + Wo attn(LN1(x)) + bo, causal multi-head self-attention with `heads`
 *                   heads of h / heads channels (one QKV projection Wqkv [3h, h] + bqkv);
 *                   y = x2 + W2 gelu(W1 LN2(x2) + b1) + b2 (f = 4h). LayerNorms with gain and
 *                   bias (eps 1e-5). No embedding or head: the loss is the MSE against the same
 *                   block stack with the target seed, as the dense model's. */
typedef enum exec_block_kind { EXEC_BLOCK_MLP = 0, EXEC_BLOCK_GPT = 1 } exec_block_kind;

/* The point-to-point hand-off of a stage boundary between two ranks, as a profile measures it
 * (exec_profile_p2p, exec_mpi_profile_p2p): each part latency + bytes / bandwidth (cost_p2p_s),
 * under the profile CSV's keys (cost.h) p2p_*, p2p_send_* and p2p_post_* (p2p_mpi_* for MPI):
 *   latency_s, Bps       the one-way link: from the sender's call to the receiver's completion
 *   send_s, send_Bps     the sender's own time in its send call (its copy into the transport)
 *   post_s, post_Bps     the receiver's own time posting a receive whose message already came
 *                        (its copy out); one posted before its message costs post_s
 * Bps 0 = that part not measured. */
typedef struct exec_p2p {
    double latency_s, Bps;
    double send_s, send_Bps;
    double post_s, post_Bps;
} exec_p2p;

/* How to run. exec_config_default fills sensible values; every field can be overridden. */
typedef struct exec_config {
    /* model */
    int hidden;              /* h */
    int ffn;                 /* f; 0 = 4h */
    int layers;              /* L blocks in the whole model */
    int microbatch_size;     /* b rows (mlp) or sequences (transformer) per microbatch */
    exec_block_kind block;   /* the block of the model: EXEC_BLOCK_MLP (default) or EXEC_BLOCK_GPT */
    int heads;               /* transformer: attention heads (divides h) */
    int seq;                 /* transformer: tokens per sequence (a microbatch is b x seq rows) */
    const int *stage_blocks; /* [stages] blocks of each stage, NULL = L split evenly (first stages
                              * take the remainder); not owned */
    uint64_t init_seed;      /* the trained model's initial weights */
    uint64_t target_seed;    /* the target network */
    uint64_t data_seed;      /* the inputs */
    int dataset_microbatches;/* D distinct microbatches (0 = EXEC_DEFAULT_DATASET_MICROBATCHES) */
    /* optimizer */
    double lr;               /* learning rate */
    double momentum;         /* 0 = plain SGD (no optimizer state) */
    /* run */
    int warmup_passes;       /* walks of the lowered schedule before timing (each pass covers the
                              * schedule's `iterations` optimizer iterations) */
    int timed_passes;        /* timed walks (the least, with timed_passes_max) */
    int timed_passes_max;    /* > timed_passes: after timed_passes, time more passes, up to this
                              * many in all, until the run is steady: the timed passes'
                              * exec_steadiness within steady_max (every rank decides alike before
                              * each pass, from all ranks' pass times); with a profile between
                              * the passes, the gaps past timed_passes hold rounds as the planned
                              * ones do (exec_prof_gap_rounds: the same share each), so that the
                              * profile sees the machine at the moments the passes do. CPU
                              * threads only. 0 = exactly timed_passes (default) */
    double steady_max;       /* with timed_passes_max: the steadiness to reach (a fraction, > 0) */
    int pin;                 /* 1 = pin each worker thread to a core (default 1) */
    int small_pages;         /* 1 = leave the large buffers (a rank's arena, the profile's blocks)
                              * on the kernel's default pages: no MADV_HUGEPAGE (exec_lines_alloc) */
    int oversubscribe;       /* 1 = allow more ranks than cores (a warning goes in the result) */
    double timeout_s;        /* longest any blocking wait may last before the run fails (default 60) */
    size_t mem_budget_bytes; /* per rank; 0 = unlimited. Exceeding it fails the run */
    sched_budget budget;     /* host memory limit of exec_check_memory (zeroed: the automatic one) */
    int mailbox_capacity;    /* messages a rank's mailbox holds; 0 = what one pass needs */
    int record_ops;          /* 1 = keep start/end of every action of the timed passes */
    int return_weights;      /* 1 = copy the final weights of all blocks into the result */
    exec_fault fault;        /* injected fault (tests) */
    const int *replicas;     /* [stages] data-parallel replicas of each stage (PipeDream's 1F1B-RR),
                              * NULL = 1 each; not owned. A schedule rank whose stages have n
                              * replicas runs as n ranks of the executor (threads or MPI
                              * processes), replica j walking the actions sched_replica_of gives
                              * it; REDUCE_GRAD is an exact all-reduce of the replicas'
                              * gradients (exec_int.h: "Replicas"). CPU backend only */
    int profile_between_reps;/* > 0: profile the block (exec_profile_layers_n's rounds, this many
                              * repetitions) on the workers' own threads in the gaps between the
                              * passes (before each timed pass), interleaved with the run, so that
                              * prediction and measurement see the machine at the same moments
                              * (exec_result.between_profile). Outside the pass times and the
                              * memory budget (each worker holds the profile's blocks besides its
                              * own); a pass then starts with the profile's data in the caches.
                              * CPU only (the CUDA backend refuses it). 0 = no (default) */
    int profile_again_stages;/* a CPU profile measured apart from a run's passes (exec_profile_csv_n,
                              * exec_profile_layers_n): the stages of the schedule its again
                              * samples stand for (exec_prof_again_stages), whose streak runs
                              * through a stage's worth of blocks; 0 = none known, a 2-chunk
                              * schedule's stage (half a worker's blocks). The profile between
                              * the passes takes the run's own schedule */
    pl_progress *progress;   /* CPU threads: rank 0's worker reports the actions it walked over
                              * all passes (of passes x its list length); NULL = no bar */
    double pred_step_s;      /* the optimizer STEP of one block measured by the profile, for the
                              * prediction only (cli_run_predict; 0 = unknown: no STEP time) */
    double mpi_ar_latency_s, mpi_ar_Bps; /* the MPI all-reduce's link measured beforehand
                              * (exec_mpi_profile_allreduce), which the profile CSV records beside
                              * the threads' ring (allreduce_mpi_* metadata); Bps 0 = not measured */
    exec_p2p mpi_p2p;        /* the MPI transport's point-to-point hand-off measured beforehand
                              * (exec_mpi_profile_p2p), recorded as p2p_mpi_* beside the threads'
                              * (p2p_*); Bps 0 = not measured */
    /* the CUDA backend (exec/cuda/exec_cuda.h; the CPU executor ignores these) */
    exec_backend backend;    /* EXEC_BACKEND_CPU (default) or EXEC_BACKEND_CUDA */
    exec_precision precision;/* GEMM operands: fp32 (default), tf32, or bf16; accumulation fp32 */
    int sm_split;            /* 1 = ranks sharing a GPU each get a fixed, equal share of its SMs
                              * (green contexts) */
    int cuda_devices;        /* GPUs to use (0 = all visible); rank r runs on GPU r mod devices */
} exec_config;

/* The environment variable that makes the CUDA backend synchronize after every action ("1"), so
 * that a failing kernel is named at its action (debugging; slower). */
#define EXEC_CUDA_SYNC_ENV "PIPELAB_CUDA_SYNC"

/* The model's default width and rows per microbatch: exec_config_default's, which the command
 * line (pipelab run, profile) shares; and the data set's size when dataset_microbatches is 0. */
#define EXEC_DEFAULT_HIDDEN 256
#define EXEC_DEFAULT_MICROBATCH_SIZE 16
#define EXEC_DEFAULT_DATASET_MICROBATCHES 64

/* Fills c with defaults: h EXEC_DEFAULT_HIDDEN (256), f 4h, L 4, b EXEC_DEFAULT_MICROBATCH_SIZE
 * (16), seeds 1/2/3, D 64, lr 0.05, momentum 0, 1 warm-up and 5 timed passes, pinning on,
 * timeout 60 s, no budget, no records. */
void exec_config_default(exec_config *c);

/* ---------------------------------------------------------------- results */

/* Memory of one rank, in bytes, by what it holds. "peak" is the largest total in use at once. */
typedef struct exec_mem {
    size_t weights_bytes;  /* weight versions in use (x versions) */
    size_t grads_bytes;    /* gradient accumulators */
    size_t optim_bytes;    /* optimizer state (momentum) */
    size_t stash_bytes;    /* activations kept from F to the backward: the stage input and each
                            * block's input, H and gelu(H) (none); the stage input (full) */
    size_t bwd_bytes;      /* backward buffers: a microbatch's output gradient (received, or the
                            * loss gradient) and its inner gradients, held until its W */
    size_t comm_bytes;     /* send staging buffers in use */
    size_t scratch_bytes;  /* fixed per-rank workspace */
    size_t total_bytes;    /* the sum */
} exec_mem;

/* One executed action. */
typedef struct exec_op {
    sched_action act;
    int32_t pass;          /* timed pass (0-based) */
    double start_s, end_s; /* since the start of the first timed pass, same clock on all ranks */
} exec_op;

/* Per-rank measurements, of the timed pass whose time is the median (the middle two averaged
 * for an even count), as iteration time is: busy_s + idle_s = pass_median_s. */
typedef struct exec_rank_result {
    double busy_s;         /* compute and STEP actions per pass (sched_kind_is_busy) */
    double comm_s;         /* SEND/RECV actions (including the wait) and all-reduces (REDUCE_GRAD of
                            * a replicated stage) per pass */
    double gemm_s;         /* per pass, inside the model's sgemm calls (part of busy_s; the rest of
                            * busy_s is GELU, biases, copies, the loss and STEP) */
    double gemm_flops;     /* per pass, the FLOPs of those calls */
    double idle_s;         /* pass time minus busy */
    double bubble_fraction; /* idle / pass time */
    exec_mem peak;         /* the bytes in use at the moment of the largest total */
    size_t allocated_bytes;/* what the rank allocated up front (weights pool, grads, stashes...) */
    size_t model_peak_bytes; /* largest weights + grads + optimizer + stash of microbatches whose F
                            * ran (inputs not yet forwarded left out): the part the cost model's
                            * memory describes; equals exec_mem_predict (see README) */
    int core;              /* the core the worker was pinned to, -1 = not pinned */
    double start_after_ready_s; /* the least, over the timed passes, of this rank's pass start
                            * less the time the last rank was ready for that pass (ready_s of
                            * exec_rank_record): >= 0 when every pass starts on every rank after
                            * all are ready; NAN when the workers record no ready time (no
                            * profile between the passes) */
    exec_op *ops;          /* [n_ops] when record_ops, else NULL (owned) */
    size_t n_ops;
} exec_rank_result;

/* What a run produced: enough for a run record in the database. Free with exec_result_free. */
typedef struct exec_result {
    /* configuration echo */
    char kind[32];         /* schedule generator name */
    int ranks, stages, microbatches, iterations_per_pass;
    sched_weights weights;
    sched_recompute recompute;
    int hidden, ffn, layers, microbatch_size; /* microbatch_size: samples (rows or sequences) */
    exec_block_kind block;  /* the model's block, with the transformer's heads and seq (0 for mlp) */
    int heads, seq;
    int *stage_blocks;     /* [stages] blocks per stage (owned) */
    int *stage_replicas;   /* [stages] replicas per stage (exec_config.replicas; owned) */
    double lr, momentum;
    int warmup_passes, timed_passes;
    const char *blas;      /* "openblas" or "gslcblas" */
    int cores;             /* cores available to the process */
    size_t param_bytes;    /* the whole model's parameters */
    /* time */
    double pass_median_s, pass_min_s, pass_max_s, pass_stddev_s; /* per timed pass */
    double iter_median_s;  /* pass_median_s / iterations_per_pass */
    double steadiness;     /* exec_steadiness of the timed passes */
    int timed_passes_least, timed_passes_most; /* exec_config.timed_passes and timed_passes_max:
                            * timed_passes between them when the run timed passes until it was
                            * steady (most > least); else most is 0 */
    double steady_max;     /* exec_config.steady_max when most > least, else 0 */
    double throughput_samples_s; /* microbatches * b * iterations_per_pass / pass_median_s */
    double zb_bubble_rate; /* the Zero Bubble paper's rate of the median pass: the largest over
                            * ranks of (span - busy) / span, span from the rank's first compute
                            * start to its last compute end (sim.h); NAN when not measured */
    double *pass_s;        /* [timed_passes] (owned) */
    int median_pass[2];    /* the timed passes whose time is the median (exec_median_passes): the
                            * per-rank figures come from them; equal for an odd count */
    /* training */
    int n_iters;           /* (warmup + timed) * iterations_per_pass */
    double *loss;          /* [n_iters] mean microbatch loss of each iteration (owned) */
    float *final_weights;  /* [n_weights] all blocks in order when return_weights (owned) */
    size_t n_weights;
    /* per rank */
    exec_rank_result *rank;/* [ranks] (owned); a rank with replicas (exec_config.replicas) is
                            * reported as the simulator reports it: busy, GEMM and span the mean
                            * over its replicas, communication summed, memory the largest of one
                            * replica, op records those of the replica that ran each action of
                            * the rank's list (replica 0 for one all replicas run) */
    int workers;           /* ranks of the executor that ran: the schedule's, each as many times
                            * as its replicas */
    char warning[256];     /* e.g. oversubscription; empty when none */
    /* the backend that ran (NULL from the CPU executor means "cpu", "fp32") */
    const char *backend;   /* "cpu" or "cuda" (static string) */
    const char *precision; /* "fp32", "tf32" or "bf16" (static string) */
    char device[128];      /* e.g. "NVIDIA H200 x1, 4 ranks per GPU"; empty for the CPU */
    /* the profile measured between the passes (exec_config.profile_between_reps), NULL without:
     * [0] over all workers (in one process the median over all their rounds; over MPI processes
     * the median of the workers' own), [1 + r] rank r's worker alone (owned) */
    struct exec_layer_profile *between_profile;
    int between_reps;      /* its repetitions */
    int huge_pages;        /* 1: the CPU executor's large buffers asked for transparent huge pages
                            * (exec_config.small_pages 0) */
} exec_result;

void exec_result_free(exec_result *r);
/* Writes the model spec of r's model into buf[n], in the cost models' spec form that `pipelab
 * run --model` reads and `pipelab compare` matches on: "mlp:width=256,depth=8,microbatch=16,
 * ffn_mult=4" (ffn=F when F is no multiple of the width) or "transformer:layers=4,hidden=256,
 * heads=4,seq=64,microbatch=2". */
void exec_model_spec(const exec_result *r, char *buf, size_t n);
/* Bytes that exec_model_spec needs at most. */
#define EXEC_MODEL_SPEC_MAX 160
/* Fills mid with the timed passes (0-based) whose time is the median of pass_s[n]: the middle
 * one twice for an odd n, the two middle ones (shorter first) for an even n; ties keep pass
 * order. The one rule for "the median pass": the run's per-rank figures come from these passes,
 * and a measured timeline draws mid[0]. Returns PL_OK or PL_ENOMEM. */
int exec_median_passes(const double *pass_s, int n, int mid[2]);
/* Returns the median of v by the passes mid of exec_median_passes: v[mid[0]] for an odd count,
 * the mean of v[mid[0]] and v[mid[1]] for an even one (exec_result.pass_median_s). */
double exec_median_at(const double *v, const int mid[2]);

/* ---------------------------------------------------------------- transports
 *
 * A worker talks to the others only through this interface, so the in-process transport and an
 * MPI one (one process per rank) run the same worker code. Each worker holds its own endpoint.
 * Messages are keyed by (kind, stage, global microbatch); a recv blocks until the message with
 * that key from src arrives, or the run is aborted, or the timeout passes. Sizes are checked:
 * a message of another size than the receiver expects is an error. */
typedef enum exec_msg_kind { EXEC_MSG_ACT = 0, EXEC_MSG_GRAD = 1, EXEC_MSG_REDUCE = 2 } exec_msg_kind;

typedef struct exec_msg_key {
    int32_t kind;  /* exec_msg_kind */
    int32_t stage; /* the receiving stage */
    int64_t mb;    /* global microbatch */
} exec_msg_key;

typedef struct exec_transport exec_transport;
struct exec_transport {
    void *impl;
    /* Returns this endpoint's rank, and the number of ranks. */
    int (*rank)(const exec_transport *t);
    int (*size)(const exec_transport *t);
    /* Sends bytes to dst (copied; returns once the buffer may be reused). PL_OK or an error
     * (aborted, timeout, full mailbox past the timeout). */
    int (*send)(exec_transport *t, int dst, exec_msg_key key, const void *data, size_t bytes,
                pl_err *e);
    /* Receives the message key from src into data, which holds exactly bytes. */
    int (*recv)(exec_transport *t, int src, exec_msg_key key, void *data, size_t bytes, pl_err *e);
    /* Waits for every rank; fails when the run is aborted. */
    int (*barrier)(exec_transport *t, pl_err *e);
    /* Stops the whole run: every blocked or later call on any rank fails with why's message. */
    void (*abort)(exec_transport *t, const pl_err *why);
    /* Tells the transport this rank walked its whole list (used to detect waits that can never
     * be served); may be NULL. */
    void (*finished)(exec_transport *t);
    /* Optional (both NULL: a worker calls recv where the data is needed). post_recv posts the
     * receive of key from src into data (exactly bytes; the caller leaves data alone until
     * wait_recv returned), taking the message at once when it is already there, and returns
     * without waiting: PL_OK, or an error (a message of the wrong size). wait_recv completes
     * the receive posted for (src, key): waits (timed, abortable, as recv) until its message is
     * in data; PL_OK or an error. A rank has at most one receive posted per (src, key). */
    int (*post_recv)(exec_transport *t, int src, exec_msg_key key, void *data, size_t bytes, pl_err *e);
    int (*wait_recv)(exec_transport *t, int src, exec_msg_key key, pl_err *e);
    /* Optional (NULL: the ring over send and recv, exec_int.h "Replicas"): combines v[count] in
     * place over the replicas of `stage` (every one calls it, in the same order), by sum, or by
     * max when max is 1. Timed and abortable like recv; PL_OK or an error. */
    int (*allreduce)(exec_transport *t, int stage, int64_t *v, size_t count, int max, pl_err *e);
    /* Optional (NULL: the ranks read each other's pass times, threads in one process): combines
     * v[count] in place by max over every rank (all call it, in the same order). PL_OK or an
     * error. The MPI transport's steady rule gathers the pass times with it. */
    int (*allmax)(exec_transport *t, double *v, size_t count, pl_err *e);
};

/* ---------------------------------------------------------------- running */

/* Returns the most passes, warm-up and timed, a run of c walks: warmup_passes plus timed_passes,
 * or timed_passes_max when that is more (a run timed until steady). */
int exec_passes_most(const exec_config *c);
/* Returns the steadiness of n pass times: the standard error of their mean (their standard
 * deviation, over n, divided by the square root of n) over their median, as a fraction; how far
 * the mean of so many passes may lie from the run's true mean, for n passes that scatter alike.
 * 0 for a single pass; NAN when n is 0, the median is not positive, or out of memory. */
double exec_steadiness(const double *pass_s, int n);

/* Runs the lowered schedule s (sched_lower output; validated again here) with one worker thread
 * per rank, warm-up then timed passes, and fills out. Returns PL_OK, or an error naming the rank
 * and the action that failed (PL_EINPUT for a bad schedule or configuration, PL_ENOMEM for a
 * memory budget, PL_EINTERNAL for a transport failure); on error out holds nothing to free. */
int exec_run(const sched *s, const exec_config *cfg, exec_result *out, pl_err *e);

/* What one rank's worker measured and holds at the end: the pieces exec_run assembles. An MPI
 * driver runs exec_run_rank in each process, sends the records to rank 0 (after shifting each
 * rank's times onto rank 0's clock) and calls exec_assemble there. */
#define EXEC_REC_ARRAYS 8
/* The kinds of times a profile between the passes gives (exec_rank_record.prof_s). */
#define EXEC_PROF_KINDS 32
/* The pass-length term (exec/profile_windows.c): window j lasts EXEC_WINDOW_FIRST_S 2^j. */
#define EXEC_WINDOWS 13
/* The most rounds of one worker a profile keeps for the states term (exec_layer_profile.round_f;
 * a run's profile between 20 passes holds 8 to 100). */
#define EXEC_STATE_ROUNDS 128
#define EXEC_WINDOW_FIRST_S 1e-3
/* Returns window j's length in seconds. */
double exec_window_length_s(int j);

typedef struct exec_rank_record {
    int rank;
    int passes;               /* warm-up + timed */
    double *pass_start_s;     /* [passes] this rank's start of each pass (absolute, monotonic) */
    double *pass_end_s;       /* [passes] */
    double *busy_s, *comm_s;  /* [passes] compute (and STEP) and SEND/RECV time in each pass */
    double *gemm_s, *gemm_flops; /* [passes] time inside the model's sgemm calls and their FLOPs
                               * (part of busy_s) */
    double *ready_s;          /* [passes] when the rank had done what precedes its pass (with a
                               * profile between the passes: the gap's rounds and the read-back
                               * after them); 0 = not recorded */
    double *span_s;           /* [passes] from the start of the rank's first compute action to the
                               * end of its last (the Zero Bubble paper's per-rank cost); all
                               * EXEC_REC_ARRAYS arrays are one block of EXEC_REC_ARRAYS x passes */
    exec_mem peak;
    size_t allocated_bytes;
    size_t model_peak_bytes;  /* see exec_rank_result */
    int core;                 /* pinned core, -1 none */
    exec_op *ops;             /* [n_ops] timed passes' actions, absolute times (when record_ops) */
    size_t n_ops;
    double *loss_mb;          /* [passes * iterations * m] microbatch losses; filled only on the
                               * rank that holds the last stage (zeros elsewhere) */
    float *weights;           /* [n_weights] final weights of this rank's blocks (others 0) */
    size_t n_weights;         /* exec_param_count, or 0 where the run reads no weights back (the
                               * CPU ranks, without return_weights or replicas) */
    int has_prof;             /* 1: profiled between the passes (exec_config.profile_between_reps): */
    double prof_s[EXEC_PROF_KINDS]; /* its worker's F, I, W, STEP, I0, IH, WH, then F, I, W of a
                               * round's first microbatch and of its others, then F, I, W again on
                               * the same blocks (FA, IA, WA), then I next to its forward (IN), then
                               * F right after the backwards of the same blocks (FB), of one block
                               * (medians over its rounds), then the forward's jitter (FSD), then
                               * F, I, W of the cycle on two weight versions and in place (FT, IT,
                               * WT, FO, IO, WO), then the STEP's mean over the rounds (STA), then
                               * F alone and F beside the other workers (FL, FS), then F beside
                               * a backward, the backward alone, beside backwards and beside
                               * forwards (FX, BL, BS, BX) */
    double window[EXEC_WINDOWS]; /* its worker's pass-length factors (exec_layer_profile.window) */
    double *round_f;          /* [2 n_round_f] its worker's F per timed round (the mean over the
                               * round's microbatches after its first, summed over the worker's
                               * blocks; 0: no whole round), which rank 0 sets beside the others'
                               * for the ranks' drift (exec_layer_profile.drift), also over MPI;
                               * then its backward (I + W) per round, alike */
    size_t n_round_f;
} exec_rank_record;

void exec_rank_record_free(exec_rank_record *r);

/* Runs the worker of rank t->rank(t) on the calling thread over transport t (every rank must
 * call it with the same s and cfg), and fills rec. Returns PL_OK or the error naming the rank
 * and action (after aborting the run through t). */
int exec_run_rank(const sched *s, const exec_config *cfg, exec_transport *t, exec_rank_record *rec,
                  pl_err *e);

/* Assembles the records of all s->ranks ranks (recs[r] of rank r, times on one clock) into out.
 * Returns PL_OK or PL_ENOMEM. */
int exec_assemble(const sched *s, const exec_config *cfg, const exec_rank_record *recs,
                  exec_result *out, pl_err *e);

/* Returns the blocks of each stage for cfg and s in blocks[stages]: cfg->stage_blocks, or L
 * split evenly. PL_EINPUT when L < stages or the explicit split does not sum to L. */
int exec_stage_blocks(const sched *s, const exec_config *cfg, int *blocks, pl_err *e);
/* Refuses up front a run whose host memory in this process (rank: the one rank it runs, -1: all
 * of them) would exceed the limit of c->budget (the CLI's --max-memory or $PIPELAB_MAX_MEMORY,
 * else the physical memory and the ulimits), and a model the executor cannot address
 * (exec_dims_check). The estimate is what the run allocates, an upper bound of its peak: each
 * rank's arena at the pool sizes its dry walk gives (weight versions, gradients, momentum, the
 * stashed activations of the microbatches in flight, which for the transformer hold the
 * attention scores, microbatch x heads x seq x seq floats per block, and the scratch, with one
 * head's scores again), the messages that can wait in the mailboxes, the profile's workers
 * between the passes (each with EXEC_PROFILE_SLOTS microbatches' stashes of its blocks), the
 * data set and, while it is built, the target network's block and states. Blocks from
 * exec_stage_blocks. Both backends and the CLI (before it spends time on a profile) call it.
 * Returns PL_OK or PL_EINPUT ("the model does not fit: ... needs about N MiB (B bytes: ...),
 * more than the L MiB available (source); ..."), or the dry walk's error. */
int exec_check_memory(const sched *s, const exec_config *c, const int *blocks, int rank, pl_err *e);
/* Refuses up front (PL_EINPUT, "the profile does not fit: ... needs about N MiB (B bytes: ...),
 * more than the L MiB available (source); ...") a CPU profile (exec_profile_csv_n,
 * exec_profile_layers_n) of reps repetitions on `concurrency` workers whose buffers would exceed
 * c->budget: each worker's blocks, EXEC_PROFILE_SLOTS microbatches' stashes, gradients and
 * scratch, or the all-reduce's or hand-off's profile after it; and a model the executor cannot
 * address (exec_dims_check), on either backend. */
int exec_check_profile_memory(const exec_config *c, int reps, int concurrency, pl_err *e);

/* ---------------------------------------------------------------- the sequential reference */

/* Trains the same model on the same data on one worker, sequentially, with the update semantics
 * of s's weight policy over `passes` walks of s (flush: average of the m microbatch gradients,
 * then a step; stash and 2bw: each microbatch's forward and backward use the weight version its
 * forward used in s, each STEP applies the average of the gradients since the previous STEP of
 * that stage to the newest version, in the order s gives). Fills weights[n_weights] (all blocks
 * in order) and loss[passes * s->iterations] (mean microbatch loss per iteration). */
int exec_reference(const sched *s, const exec_config *cfg, int passes, float *weights,
                   size_t n_weights, double *loss, pl_err *e);

/* Returns the number of floats of all blocks' parameters (the size of final_weights). */
size_t exec_param_count(const exec_config *cfg);

/* ---------------------------------------------------------------- profiling */

/* Per-block times of one worker, the median over repetitions. */
typedef struct exec_layer_profile {
    double f_s, i_s, w_s;      /* forward, input-gradient, weight-gradient of one block, one microbatch */
    double i0_s;               /* the input-gradient pass of the model's first block, which has no
                                * input gradient to compute (dA and dH only: one GEMM fewer);
                                * 0 = not measured (then i_s) */
    double i_hot_s, w_hot_s;   /* I of a block right after its microbatch's forward, W right after
                                * its I (reuse distance 0: the activations in cache; i_s and w_s
                                * are timed with 4 microbatches in flight); 0 = not measured */
    double f_first_s, i_first_s, w_first_s; /* F, I, W of a round's first microbatch: the first
                                * touch of the blocks' weights, gradients and buffers since other
                                * work (the run's pass, the optimizer step) went through the caches */
    double f_rest_s, i_rest_s, w_rest_s; /* F, I, W of the round's other microbatches (the first's
                                * data still in cache); all six 0 = not measured */
    double f_again_s, i_again_s, w_again_s; /* F, I, W of a block when the same blocks ran the
                                * same kind for another microbatch just before, over a stage's
                                * worth of the worker's blocks (exec_prof_again_blocks): their
                                * weights (and gradients) still in cache, as on a rank whose consecutive
                                * actions are on one of its several stages; the other times
                                * are timed with all the worker's blocks between two uses of a
                                * block; all three 0 = not measured */
    double i_next_s;           /* I of the worker's last block right after that block's own
                                * forward, nothing between: its weights and activations in cache,
                                * as the I of the last block of a stage whose backward starts by
                                * running its forward again (full recomputation); the round's
                                * I (i_s) has other blocks' work between; 0 = not measured */
    double f_back_s;           /* F of a block right after the backwards (I, then W) of another
                                * microbatch on the same blocks, as a 1F1B stage runs its forwards
                                * after its backwards; the round's F (f_s) runs right after the
                                * forward of another microbatch, as GPipe's do; 0 = not measured */
    double f_sd_s;             /* the jitter of a forward: within a round, the spread of a
                                * microbatch's F over all the worker's blocks about the round's
                                * mean (the round's first microbatch left out), robustly (1.4826
                                * times the median absolute relative deviation, corrected for the
                                * mean taken out), times f_s: f_sd_s / f_s is the coefficient of
                                * variation of an action from one microbatch to the next, apart
                                * from the host's drift between rounds; 0 = not measured */
    double f_two_s, i_two_s, w_two_s; /* F, I, W of a block in a stashing stage's cycle on two
                                * weight versions, where the STEP writes the new version into
                                * another slot, the next microbatch's F reads it, and the
                                * backward of the one before reads the old version (a PipeDream
                                * stage with microbatches in flight at its STEPs, 2BW): the third
                                * microbatch of such a cycle over all the worker's blocks; only a
                                * worker of a run whose rank's STEPs go into a new version times
                                * it, in its gaps; all three 0 = not measured */
    double f_one_s, i_one_s, w_one_s; /* the same cycle with its STEPs in place, in the same
                                * round: what f_two_s .. w_two_s are set against (the version
                                * term, exec_profile_worker_versions); 0 = not measured */
    double f_alone_s, f_side_s; /* the sharing term's F of a block (one microbatch through all the
                                * worker's blocks, the second time in a row): with the other
                                * workers waiting at a barrier, and with all workers at once, in
                                * the same rounds (exec_profile_worker_share); f_side_s the median
                                * over the rounds, f_alone_s it times the median over the rounds of
                                * each round's alone over beside (the pair a millisecond apart);
                                * 0 = not measured (one worker) */
    double f_cross_s, b_alone_s, b_side_s, b_cross_s; /* the sharing term per class, in the same
                                * phases: the F of f_alone_s while another worker runs a backward
                                * (and the others F); a backward (I then W of every block, W into
                                * the profile's own gradients) of the microbatch of that F, with
                                * the others waiting, with all workers' backwards at once, and
                                * with the others' F; b_side_s the median over the rounds, the
                                * others it or f_side_s times the median of each round's ratio
                                * (exec_profile_worker_share_class); 0 = not measured */
    double drift;              /* the ranks' speeds drifting apart, over all workers' rounds side by
                                * side (two or more workers, threads or MPI ranks): per pair
                                * of workers, the log of the ratio of their F round means (the
                                * microbatches after each round's first), round by round; the part
                                * of its variance that holds from one round to the next (its
                                * autocovariance at lag 1, values clipped to 3 robust standard
                                * deviations), half of it one worker's; drift is the square root of
                                * that over the pairs' mean: the coefficient of variation of a
                                * worker's speed, over stretches of a round or more, that the other
                                * workers do not share; 0 = not measured (one worker, fewer than 8
                                * rounds) */
    size_t param_bytes;        /* one block's parameters */
    size_t act_out_bytes;      /* what crosses a stage boundary: b x h floats */
    size_t stash_bytes;        /* what one block keeps from F to the backward: its input and its
                                * state (dense: x, H, gelu(H); exec_block_state_floats) */
    size_t w_stash_bytes;      /* what one block keeps from I until W: x, dH, gelu(H) and the
                                * gradient at its output */
    double step_s;             /* the optimizer STEP of one block's parameters (SGD, momentum when
                                * configured) */
    double step_mean_s;        /* from a profile's rounds, the STEP's mean over them, the host's
                                * stalls left out (exec_mean_less_stalls), where step_s is their
                                * median: a streaming loop's speed on one core switches between
                                * states seconds long and up to 1.8 times apart, and a pass sums its
                                * STEPs over them (the prediction stored beside as TAG-stepmean;
                                * docs/validate_cpu.md, "The STEP's two speeds"); 0 = not measured */
    int concurrency;           /* workers that computed at once while it was measured */
    double ar_latency_s, ar_Bps; /* the replica all-reduce's fitted link (exec_profile_allreduce);
                                  * ar_Bps 0 = not measured */
    exec_p2p p2p;              /* the threads' point-to-point hand-off (exec_profile_p2p); Bps 0 =
                                * not measured */
    double window[EXEC_WINDOWS]; /* the pass-length term: the factor from these times to a stretch
                                  * of work exec_window_length_s(j) long (the median over such
                                  * stretches of the worker's rounds); all 0 = not measured */
    double round_f[EXEC_STATE_ROUNDS]; /* the states term: its worker's F of each round (the mean
                                  * over the round's microbatches after its first, summed over the
                                  * worker's blocks; 0: no whole round), round r of every worker
                                  * in the same gap; the first n_round_f of its rounds */
    double round_b[EXEC_STATE_ROUNDS]; /* the same rounds' backward (I + W), alike; all 0 = not
                                  * measured (the states term then gives the backwards F's speeds) */
    int n_round_f;
} exec_layer_profile;

/* Times F, I and W of one block (cfg's h, f, b) reps times on the calling thread and fills p
 * with the medians. Returns PL_OK or an error. */
int exec_profile_layers(const exec_config *cfg, int reps, exec_layer_profile *p, pl_err *e);

/* As exec_profile_layers, on `concurrency` threads at once (1: the calling thread, the same as
 * exec_profile_layers), pinned to the cores the executor's ranks use (when cfg->pin), each on its
 * own ceil(L / concurrency) blocks and buffers, a barrier before every round of microbatches;
 * the medians are over all threads' samples. A run computes on all its ranks at once, sharing
 * caches and memory bandwidth: profile with concurrency = ranks to predict it. */
int exec_profile_layers_n(const exec_config *cfg, int reps, int concurrency, exec_layer_profile *p, pl_err *e);

/* The host probe: a fixed piece of work timed to read how fast this machine runs at a moment,
 * which `pipelab run` records beside its timings (params_json "host_probe";
 * docs/validate_cpu.md, "A slowed host"). On a host whose cores and caches other guests share, the same run can take 1.1-2x
 * longer from one minute to the next, and neither the run's own numbers nor /proc/stat show why;
 * the probes of many runs give the host's own speed (a low percentile of them), and each run's
 * probe over it its slowdown. The work: the F of one block of exec_config_default's dense model
 * (width EXEC_DEFAULT_HIDDEN, inner 4 times that, EXEC_DEFAULT_MICROBATCH_SIZE rows), timed by
 * exec_profile_layers_n with EXEC_HOST_PROBE_REPS repetitions, by `workers` pinned threads at
 * once, a block each (fwd_s: the ranks' cores all busy), and by the calling thread alone
 * (alone_fwd_s). */
#define EXEC_HOST_PROBE_REPS 5
typedef struct exec_host_probe {
    int workers;        /* threads at once (1: fwd_s is the lone thread's) */
    double fwd_s;       /* F of one block, all workers at once */
    double alone_fwd_s; /* F of one block, one thread alone */
} exec_host_probe;
/* Measures the host probe on `workers` threads (at least 1) into p. Returns PL_OK or the
 * profile's error. */
int exec_host_probe_measure(int workers, exec_host_probe *p, pl_err *e);

/* The host's interruptions (interrupt.c): `workers` threads, pinned to the cores the ranks use,
 * read the clock back to back for `seconds`; a gap between two readings over EXEC_GAP_MIN_S (a
 * hundred times a reading) and up to EXEC_GAP_MAX_S is time the host took the core away. Longer
 * gaps are the host's stalls, rare and about 100 ms each (bench/bench_host), which no term
 * prices. The share and the rate are medians over windows of about EXEC_INTR_WINDOW_S (the
 * time split evenly; one window when shorter), so that an episode of the host's in one window does not set them: one 20 s
 * measurement read 3.35% by its total while its neighbours read 0.5-0.7%, and a grid priced
 * with it predicted 3.3% long. On the development VM, with both cores busy, the gaps took 0.4-0.6% of the time, 9-19
 * a second of 0.13-0.15 ms at the median; with one core busy, 0.1% (docs/validate_cpu.md, "What
 * the tail is made of"). Shorter gaps, from EXEC_GAP_SHORT_MIN_S up to EXEC_GAP_MIN_S, are measured
 * apart (short_share, short_per_s): on the AMD VM of sessions 74-77 the host took 2.5-3.5% of a
 * busy core in gaps of 10-30 us, about 1 200 a second, which actions of tens of microseconds meet
 * in their tail and a profile round of them holds none of at its median ("Short gaps", 7
 * December 2026). */
#define EXEC_GAP_MIN_S 1e-4
#define EXEC_GAP_SHORT_MIN_S 1e-6
/* A short gap must also exceed this many times one reading of the clock (short_min_s): where a
 * reading takes a microsecond (a clock without a fast path), every reading would count. */
#define EXEC_GAP_READS 20
/* Microbatches in flight in one round of the profile (profile.c): what each block keeps
 * stashed at once, and how many of a kind a round times back to back. */
#define EXEC_PROFILE_SLOTS 4
#define EXEC_GAP_MAX_S 0.02
#define EXEC_INTR_WINDOW_S 1.0
#define EXEC_INTERRUPTIONS_MAX_WORKERS 256
#define EXEC_INTERRUPTIONS_MAX_S 3600.0
typedef struct exec_interruptions {
    int workers;
    double seconds;
    int windows;        /* windows per worker */
    double share;       /* the time in such gaps over a window's, median over the windows, mean
                         * over the workers */
    double per_s;       /* such gaps a second: the same median and mean */
    double share_all;   /* the time in such gaps over the whole time measured, mean over the workers */
    /* the same three of the short gaps, over short_min_s up to EXEC_GAP_MIN_S */
    double short_share, short_per_s, short_share_all;
    /* the short gaps' floor: EXEC_GAP_SHORT_MIN_S, or EXEC_GAP_READS readings of the clock where
     * that is longer (the slowest worker's); at EXEC_GAP_MIN_S the band is not measured (0) */
    double short_min_s;
} exec_interruptions;
/* The band of a gap of g seconds between two readings of the clock: 0 over EXEC_GAP_MIN_S up to
 * EXEC_GAP_MAX_S, 1 (short) over short_min_s up to EXEC_GAP_MIN_S, else -1. */
int exec_gap_band(double g, double short_min_s);
/* Measures r. Returns PL_OK; PL_EINPUT for workers outside 1 .. EXEC_INTERRUPTIONS_MAX_WORKERS
 * or seconds outside (0, EXEC_INTERRUPTIONS_MAX_S]; PL_ENOMEM; or PL_EINTERNAL when a thread
 * could not start. */
int exec_interruptions_measure(int workers, double seconds, exec_interruptions *r, pl_err *e);

/* The comment key of the profile CSV's executor line "# pipelab-exec concurrency=P step_s=S"
 * (not "#@" metadata, which the cost model's reader limits to its own keys). */
#define EXEC_PROFILE_META "pipelab-exec"

/* Times the executor's replica all-reduce (REDUCE_GRAD's exact integer all-reduce over the
 * threads transport's ring) between 2 ranks on threads pinned and spinning as exec_run's, at
 * sizes spanning cfg's stages (one block to all blocks), min(reps, 15) times each after a
 * warm-up, and fits the medians with cost_ring_allreduce_fit: *latency_s (alpha) and
 * *bandwidth_Bps (beta, bytes of fp32 gradient per second). Returns PL_OK or the error. */
int exec_profile_allreduce(const exec_config *cfg, int reps, double *latency_s, double *bandwidth_Bps, pl_err *e);
/* Times the threads transport's point-to-point hand-off between two ranks placed as exec_run
 * places them: a ping-pong of 1, 4 and 16 stage boundaries' activation (b x h floats; 1/16, 1/4
 * and 1 of a boundary above 4 MiB), min(max(reps, 9), 31) round trips each after a warm-up, and
 * fits the medians with cost_link_fit (exec_p2p_fit_all): the one-way times to out's link, the
 * sender's send calls to its send part, the receiver's posts of a message already there to its
 * post part. Returns PL_OK or the error. */
int exec_profile_p2p(const exec_config *cfg, int reps, exec_p2p *out, pl_err *e);
/* exec_profile_csv (exec_drive.h) measured with exec_profile_layers_n: the profile CSV of this
 * machine, with the executor line (concurrency, STEP of one block) among its comments. */
int exec_profile_csv_n(const exec_config *cfg, int reps, int concurrency, const char *host, pl_buf *out,
                       exec_layer_profile *pp, pl_err *e);
/* The stages a profile's again samples stand for in a run of schedule s (exec_config.
 * profile_again_stages): its stage count where a rank holds several, else 0 (NULL: 0). */
int exec_prof_again_stages(const sched *s);

/* The profile CSV (as exec_profile_csv_n writes it) of the profile run r of schedule s with cfg
 * measured between its passes (r->between_profile): the row of each block holds the times of
 * the worker of the rank that held it (its own core), the executor line the STEP over all
 * workers and each worker's line its own. PL_EINPUT when r has none. */
int exec_profile_csv_between(const sched *s, const exec_config *cfg, const exec_result *r, pl_buf *out, pl_err *e);

/* Returns the cores this process may run on (those the executor pins its ranks to). */
int exec_profile_cores(void);
/* The rule of workers against cores, for a run's ranks and a profile's threads alike: PL_OK when
 * workers fit on ncores cores or oversubscribe is set, else PL_EINPUT with "W WHAT but only N
 * cores available; give --oversubscribe ..." (what: "ranks", "profiling threads"). */
int exec_check_cores(int workers, int ncores, int oversubscribe, const char *what, pl_err *e);
/* When workers exceed ncores, writes the warning "W WHAT on N cores: oversubscribed, timings
 * measure time-slicing" to buf[n] and returns 1; else returns 0 and leaves buf. */
int exec_oversubscribed(int workers, int ncores, const char *what, char *buf, size_t n);

/* Reads the per-worker lines of a profile CSV's text[len] ("# pipelab-exec worker=W ... step_s=S"):
 * 0 and worker w's STEP of one block in step_s[w] when there is exactly one worker per rank
 * (w in [0, ranks), all present), else -1 (no such lines, another count, a malformed line). */
int exec_profile_worker_steps(const char *text, size_t len, int ranks, double *step_s);

/* Reads the STEP's mean over the rounds of the same per-worker lines (step_mean_s,
 * exec_layer_profile.step_mean_s): 0 and worker w's in step_mean_s[w] when every rank's line has
 * it, else -1. */
int exec_profile_worker_step_means(const char *text, size_t len, int ranks, double *step_mean_s);
/* Reads the sharing term's ratio of the same per-worker lines (fwd_alone_s over fwd_side_s,
 * exec_layer_profile.f_alone_s and f_side_s): 0 and worker w's in ratio[w] when every rank's line
 * has both positive, else -1 (the term is then off). */
int exec_profile_worker_share(const char *text, size_t len, int ranks, double *ratio);
/* Reads the sharing term's ratios per class of the same per-worker lines (fwd_cross_s over
 * fwd_side_s, bwd_alone_s and bwd_cross_s over bwd_side_s, exec_layer_profile.f_cross_s ..
 * b_cross_s): 0 and worker w's in ratio[3 w + c] (c: 0 an F beside another worker's backward, 1
 * a backward alone, 2 a backward beside the others' forwards) when every rank's line has them
 * all positive, else -1 (the term then takes the one ratio of exec_profile_worker_share). */
int exec_profile_worker_share_class(const char *text, size_t len, int ranks, double *ratio);

/* Reads the reuse-distance times of the same per-worker lines (bwd_in_hot_s, bwd_w_hot_s, which a
 * profile between a run's passes and `pipelab profile --concurrency P` write): 0 and, for worker
 * w, the ratio of its I at reuse distance 0 to its I (i_ratio[w]) and of its W right after such
 * an I to its W (w_ratio[w]) when every rank's line has them, else -1 (the term is then off). */
int exec_profile_worker_reuse(const char *text, size_t len, int ranks, double *i_ratio, double *w_ratio);

/* Reads the first-touch times of the same per-worker lines (fwd_first_s .. bwd_w_rest_s): 0 and,
 * for worker w and kind c (0 F, 1 I, 2 W), the ratio of its time on a round's first microbatch to
 * its time (first[3 w + c]) and of its time on the round's others to its time (rest[3 w + c]) when
 * every rank's line has them, else -1 (the term is then off). */
int exec_profile_worker_first(const char *text, size_t len, int ranks, double *first, double *rest);

/* Reads the again times of the same per-worker lines (fwd_again_s, bwd_in_again_s,
 * bwd_w_again_s): 0 and, for worker w and kind c (0 F, 1 I, 2 W), the ratio of its time right
 * after the same kind on the same blocks for another microbatch to its time (again[3 w + c])
 * when every rank's line has them, else -1 (the term is then off). */
int exec_profile_worker_again(const char *text, size_t len, int ranks, double *again);

/* Reads the cycle on two weight versions of the same per-worker lines (fwd_two_s .. bwd_w_one_s):
 * for worker w and kind c (0 F, 1 I, 2 W), the ratio of its time in the cycle on two versions to
 * its time in the same cycle in place (ratio[3 w + c]), or 1 where the worker's line has all six
 * 0 (its rank's STEPs go in place); returns how many workers time the cycle, or -1 where none
 * does, a line lacks the fields, or a line has some of the six and not all (the term is then off). */
int exec_profile_worker_versions(const char *text, size_t len, int ranks, double *ratio);

/* Reads the I next to its forward of the same per-worker lines (bwd_in_next_s): 0 and, for worker
 * w, the ratio of the I of its last block right after that block's own forward to its I
 * (ratio[w]) when every rank's line has it, else -1 (the term is then off). */
int exec_profile_worker_next(const char *text, size_t len, int ranks, double *ratio);

/* Reads the F after the backwards of the same per-worker lines (fwd_back_s): 0 and, for worker w,
 * the ratio of its F right after another microbatch's backwards on the same blocks to its F
 * (ratio[w]) when every rank's line has it, else -1 (the term is then off). */
int exec_profile_worker_back(const char *text, size_t len, int ranks, double *ratio);

/* Reads the forward's jitter of the same per-worker lines (fwd_sd_s): 0 and, for worker w, its
 * coefficient of variation from one microbatch to the next (fwd_sd_s / fwd_s, cv[w]) when every
 * rank's line has a positive one, else -1 (the term is then off). */
int exec_profile_worker_jitter(const char *text, size_t len, int ranks, double *cv);

/* Reads the ranks' drift of a profile CSV's text[len] (its line "# pipelab-exec concurrency=P
 * step_s=S rank_drift=D", exec_layer_profile.drift): 0 and *drift = D when the line has a
 * positive one, else -1 (the term is then off). */
int exec_profile_drift(const char *text, size_t len, double *drift);

/* Reads the pass-length term of a profile CSV's text[len] (its lines "# pipelab-exec windows
 * worker=W first_ms=1 factors=G0,...", one per worker, which a profile between a run's passes and
 * `pipelab profile --concurrency P` write): 0 and worker w's factors in g[EXEC_WINDOWS w + j]
 * when every rank has such a line; -1 when there are none or another count of workers (the term
 * is then off); -2 and the line's number (1-based) in *bad_line (when not NULL) for a malformed
 * line (a worker number, first window or factor that is not a number, a factor <= 0, another
 * count of factors). */
int exec_profile_worker_windows(const char *text, size_t len, int ranks, double *g, int *bad_line);
/* Reads the states term of a profile CSV's text[len] (its lines "# pipelab-exec rounds worker=W
 * f=F0,F1,... b=B0,B1,...", one per worker, which a profile between a run's passes and `pipelab
 * profile --concurrency P` write: each round's F of worker W, 0 for a round it did not finish,
 * and its backward, I + W; b= is optional): the rounds that every rank finished, as speed
 * factors, rank r's in round k at speed[ranks k + r] over its median round (rounds up to
 * EXEC_STATE_ROUNDS, speed[ranks EXEC_STATE_ROUNDS]), and, when speed_b is not NULL, the
 * backwards' alike in speed_b (F's where a line of those rounds has no b=); returns their
 * count, 0 when a rank has no line or the ranks finished fewer than EXEC_STATE_MIN_ROUNDS rounds
 * together (the term is then off), -2 and the line's number (1-based) in *bad_line (when not
 * NULL) for a malformed line (a worker number or time that is not a number, a time < 0, more than
 * EXEC_STATE_ROUNDS, a b= of another count than f=). */
int exec_profile_worker_rounds(const char *text, size_t len, int ranks, double *speed, double *speed_b, int *bad_line);
/* The fewest rounds the states term draws from. */
#define EXEC_STATE_MIN_ROUNDS 8
/* Returns the factor of factors g[EXEC_WINDOWS] at a pass of pass_s seconds: linear in log2 of
 * the length between two windows, the first or last window's beyond them (1 for pass_s <= 0). */
double exec_window_factor(const double *g, double pass_s);
/* Returns the mean over the workers w < workers of exec_window_factor(g + EXEC_WINDOWS w, pass_s):
 * the pass-length factor a run's prediction gives every rank. The workers profile side by side,
 * so each one's series samples the same host's interruptions, and the mean of theirs halves
 * the variance of one; a rank's own factor predicts its busy time no better (docs/validate_cpu.md,
 * "Seven grids"). 1 for workers <= 0. */
double exec_window_factor_mean(const double *g, int workers, double pass_s);

/* Reads the executor line of a profile CSV's text[len]: 0 and the values, -1 when it has none
 * (or a malformed one, which exec_profile_lines_check refuses). */
int exec_profile_meta(const char *text, size_t len, int *concurrency, double *step_s);
/* Checks every executor line of the profile CSV `path`'s text[len] as the cost model's reader
 * checks "#@" metadata, so that a prediction never quietly drops a term its file spoils:
 * - the executor line ("# pipelab-exec concurrency=P step_s=S rank_drift=D"), once: each field
 *   key=value, each key known and once, concurrency an integer >= 1, step_s and rank_drift
 *   finite numbers >= 0, concurrency and step_s present;
 * - each worker line ("# pipelab-exec worker=W core=C fwd_s=T ..."): its keys in the order
 *   pipelab writes them, through step_s at least, W from 0 to SCHED_MAX_RANKS - 1, C >= -1, each
 *   time a finite number >= 0;
 * - each pass-length and rounds line, as exec_profile_worker_windows and
 *   exec_profile_worker_rounds read them;
 * - no worker with two lines of one kind.
 * A file that starts with a UTF-8 byte order mark is read past it (pl_bom_len), by this check
 * and the readers of these lines alike, as the cost model reads the CSV.
 * Returns PL_OK, or PL_EINPUT with "path:line: KEY must be ... (got 'V')" or the like in e. */
int exec_profile_lines_check(const char *path, const char *text, size_t len, pl_err *e);

#endif
