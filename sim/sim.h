/* sim.h: the discrete-event simulator: runs a lowered schedule against a cost interface and a
 * topology, and reports time, bubbles, communication, memory per rank and (optionally) traces. */
#ifndef SIM_H
#define SIM_H

#include <stddef.h>
#include <stdint.h>

#include "pl_common.h"
#include "pl_sched.h"

/* ---------------------------------------------------------------- costs
 *
 * The ONE interface between the engine and whatever knows what things cost. The flag-driven
 * implementation below (sim_basic) serves `pipelab simulate`; the cost-model module plugs in
 * by filling the same struct. Every function receives ctx. Times in seconds, sizes in bytes. */
typedef struct sim_costs {
    void *ctx;
    /* Compute time of one action of (stage, mb): kind is SCHED_F, SCHED_B (full backward),
     * SCHED_I (input backward) or SCHED_W (weight backward). Must be >= 0. */
    double (*compute_s)(void *ctx, int stage, sched_kind kind, int mb);
    /* Bytes of the output activation of stage (sent to stage + 1; the gradient sent back from
     * stage + 1 to stage has the same size). */
    int64_t (*boundary_bytes)(void *ctx, int stage);
    /* Activation bytes one microbatch keeps from its forward until its backward. */
    int64_t (*stash_bytes)(void *ctx, int stage);
    /* Part of the stash still held after I until W (split backward). */
    int64_t (*w_stash_bytes)(void *ctx, int stage);
    /* Bytes kept per microbatch under full recomputation (the stage's input). */
    int64_t (*input_bytes)(void *ctx, int stage);
    /* Parameter bytes of a stage (one weight version). */
    int64_t (*param_bytes)(void *ctx, int stage);
    /* Time to move bytes from src_rank to dst_rank over one free link. */
    double (*transfer_s)(void *ctx, int src_rank, int dst_rank, int64_t bytes);
    /* Time of the gradient all-reduce of a stage replicated on `replicas` workers. */
    double (*allreduce_s)(void *ctx, int stage, int replicas, int64_t param_bytes);
    /* Time of the optimizer step of a stage (on the compute stream). */
    double (*step_s)(void *ctx, int stage);
    /* Optional (NULL = transfer_s for every pair): time to move bytes from replica src_replica
     * of src_rank to replica dst_replica of dst_rank over one free link (replicated stages). */
    double (*replica_transfer_s)(void *ctx, int src_rank, int src_replica, int dst_rank, int dst_replica,
                                 int64_t bytes);
    /* Optional (NULL = compute_s of F): the time full recomputation adds to a backward (B or I)
     * of (stage, mb): the forward it runs again first; less than F where part of the forward is
     * not rerun, or where the rerun leaves the backward's first layer less to fetch
     * (sim_model.rerun_next; then it may be negative, and only the backward's sum is checked). */
    double (*rerun_s)(void *ctx, int stage, int mb);
    /* Optional (NULL = none): the sender's own time in a SEND of bytes from src_rank to dst_rank
     * (an executor's copy into its transport), which holds the sender's compute stream while the
     * transfer (transfer_s, which includes it) goes on. Heap engine only (sim_flow_ok). */
    double (*send_hold_s)(void *ctx, int src_rank, int dst_rank, int64_t bytes);
    /* Optional (NULL = none): the receiver's own time in a RECV of bytes from src_rank at
     * dst_rank, which holds its compute stream: posted before the message arrived (arrived 0),
     * or after it did (arrived 1: the copy out of the transport's mailbox). */
    double (*post_hold_s)(void *ctx, int src_rank, int dst_rank, int64_t bytes, int arrived);
} sim_costs;

/* Per-stage values of the flag-driven cost model; negative = "use the uniform value". */
typedef struct sim_stage_cost {
    double tf_s, tb_s, ti_s, tw_s;
    int64_t bytes, stash_bytes, w_stash_bytes, param_bytes;
} sim_stage_cost;

/* The flag-driven cost model of `pipelab simulate`.
 * Compute: uniform tf_s, and either tb_s (full backward) or ti_s + tw_s (split); missing parts
 * are derived: B = I + W; when only B is known, I = W = B / 2. Under recompute the engine adds
 * one forward to every B or I.
 * Communication: fixed tcomm_s per transfer when >= 0; otherwise latency + bytes / bandwidth,
 * with the inter-node pair when the ranks sit on different nodes (ranks_per_node > 0).
 * All-reduce (ring): 2 (n-1)/n * param_bytes / bandwidth + 2 (n-1) latency (0 for a stage
 * without parameters, as cost_allreduce_s), on the inter-node
 * pair when ranks_per_node > 0 and replicas are taken to live on other nodes (allreduce_inter),
 * else the intra-node pair. */
typedef struct sim_basic {
    double tf_s, tb_s, ti_s, tw_s;   /* uniform compute times; tb/ti/tw < 0 = derived */
    double tstep_s;                  /* optimizer step per stage */
    double tcomm_s;                  /* fixed seconds per transfer; < 0 = bandwidth model */
    int64_t bytes;                   /* boundary bytes per stage */
    int64_t stash_bytes;             /* stashed activation bytes per microbatch per stage */
    double w_stash_fraction;         /* part of the stash held from I until W (default 0.5) */
    int64_t param_bytes;             /* parameter bytes per stage */
    double bandwidth_Bps, latency_s; /* intra-node link */
    double inter_bandwidth_Bps, inter_latency_s;
    int ranks_per_node;              /* 0 = all ranks on one node */
    int allreduce_inter;             /* 1: all-reduces cross nodes */
    int stages;
    sim_stage_cost *stage;           /* [stages] overrides, or NULL (owned) */
} sim_basic;

/* Fills b with defaults: tf = 1, backward derived as 2 tf, no communication cost, 0 bytes,
 * w_stash_fraction 0.5, bandwidth 1e30 (free), latency 0. Stage overrides off. */
void sim_basic_init(sim_basic *b);
void sim_basic_free(sim_basic *b);
/* Checks the values (no negative times or sizes, positive bandwidths). Returns PL_OK or
 * PL_EINPUT with a message naming the flag-like field. */
int sim_basic_check(const sim_basic *b, pl_err *e);
/* Reads per-stage overrides from a CSV file: a header line naming columns among
 * stage,tf,tb,ti,tw,bytes,stash_bytes,w_stash_bytes,param_bytes (stage required, any order),
 * then one row per stage; an empty cell keeps the uniform value; '#' lines are comments.
 * Errors are "path:line: what is wrong". Returns PL_OK or an error code. */
int sim_basic_load_csv(sim_basic *b, const char *path, int stages, pl_err *e);
/* Returns the sim_costs view of b (b must outlive it). */
sim_costs sim_basic_costs(sim_basic *b);
/* What the uniform flag values describe (pipelab simulate --time-per):
 *   SIM_TIME_PER_RANK   a rank's share of the model, split evenly over the stages (chunks) the
 *                       rank holds: each stage gets ranks/stages of it. Schedules with different
 *                       chunk counts then simulate one fixed model, as the papers compare them
 *                       (Megatron's interleaved stage runs tF/v);
 *   SIM_TIME_PER_STAGE  each stage, whatever the chunk count. */
typedef enum { SIM_TIME_PER_RANK, SIM_TIME_PER_STAGE } sim_time_per;
/* Returns "rank" or "stage"; sim_time_per_parse returns 0 and sets *t for those names, else -1. */
const char *sim_time_per_name(sim_time_per t);
int sim_time_per_parse(const char *name, sim_time_per *t);
/* Returns the factor each stage's uniform values get under t for a pipeline of ranks ranks and
 * stages stages (1 per stage; ranks/stages per rank). */
double sim_time_per_share(sim_time_per t, int ranks, int stages);
/* Returns b with its uniform work scaled by share: F, B, I, W and step times, stashed activation
 * and parameter bytes. Boundary bytes (one stage's output, whatever its size), links and the
 * per-stage overrides (which name their stage) are kept. The result shares b's overrides. */
sim_basic sim_basic_scaled(const sim_basic *b, double share);

/* ---------------------------------------------------------------- configuration */

typedef struct sim_config {
    int blocking_comm;        /* 1: SEND/RECV/REDUCE_GRAD hold the compute stream */
    int async_send;           /* 1 (with blocking_comm): a SEND does not hold it, its transfer
                               * still takes the link and arrives when it ends: a copy on a
                               * stream of its own, as the CUDA backend's */
    int ranks_per_node;       /* topology: 0 = one node; decides which links are inter-node */
    int shared_inter_link;    /* 1: one link per (node, node) direction shared by its ranks */
    const int *replicas;      /* [stages] data-parallel replicas per stage, or NULL (all 1); see
                               * "Replicated stages" below */
    int64_t capacity_bytes;   /* device memory; 0 = no OOM verdict */
    double dtype_bytes;       /* bytes per parameter (to count parameters), default 4 */
    double optimizer_bytes_per_param; /* optimizer state per parameter, default 8 (Adam m, v) */
    int microbatch_size;      /* samples per microbatch, for throughput; default 1 */
    double cv;                /* stochastic mode: coefficient of variation of compute (0 = off) */
    double rank_cv;           /* stochastic mode: coefficient of variation of each stream's speed:
                               * all of a stream's compute times one lognormal factor of mean 1,
                               * drawn once per run (a worker slower or faster than its profile
                               * for the whole run; 0 = off) */
    const double *speed_draws; /* stochastic mode, the states term: speed_draws_n rows of one
                               * speed factor per rank (row j at speed_draws[ranks j + rank]); a
                               * run of seed k takes row k mod speed_draws_n, each stream its
                               * rank's factor on all its compute, instead of rank_cv's draw (the
                               * ranks' speeds as they were, side by side, in the rounds of a
                               * profile; NULL or 0 rows = off) */
    const double *speed_draws_b; /* the same rows' factors for the backwards (B, I, W, an OVERLAP's
                               * backward half), where speed_draws then holds the forwards' (F, an
                               * OVERLAP's F half); NULL: speed_draws' on all compute */
    int speed_draws_n;
    const double *const *act_scale; /* the sharing term (sim_share_solve): [ranks][actions of the
                               * rank's lowered list], a factor on the time of each compute
                               * action and STEP at that place (others ignored), on top of every
                               * other factor; needs a lowered schedule; NULL = off (the flow
                               * engine declines it) */
    uint64_t seed;            /* seed of the lognormal factors */
    int record_trace;         /* 1: keep start/end/memory of every action */
    int whole_run;            /* 1: iteration time = makespan / iterations and the bubble window
                               * the whole run, for asynchronous schedules too: what a measured
                               * pass of N iterations gives (pipelab run's prediction) */
    pl_progress *progress;    /* NULL, or a bar the engine moves, now and then, to progress_base
                               * + the actions walked so far (sim_repeat adds each run's) */
    uint64_t progress_base;
    sched_budget budget;      /* memory budget of the engine's tables (zeroed: the automatic one) */
} sim_config;

/* Replicated stages (PipeDream's 1F1B-RR). A stage replicated n ways runs on n devices (the
 * replicas) of its rank; microbatch k runs on replica k mod n. The rank becomes n compute
 * streams (n = the most replicas among its stages), stream j walking, in order, the actions of
 * the rank's list that belong to replica j: F/B/I/W/OVERLAP and SEND/RECV of microbatch k (by
 * the stage of the action), and REDUCE_GRAD/STEP of microbatch k (stash); an action without a
 * microbatch (REDUCE_GRAD and STEP of flush and 2bw) belongs to every replica of its stage.
 * The rank's list must carry the replicas' warm-up: sched_gen_replicated interleaves
 * PipeDream's per-replica 1F1B, and `pipelab simulate` regenerates 1f1b, pipedream and 2bw with
 * it when a stage is replicated.
 *  - All-reduce: a collective of the replicas. REDUCE_GRAD of microbatch k joins round k / n
 *    with the replicas' other microbatches of that round; the i-th REDUCE_GRAD without
 *    microbatch is one round of all replicas. A round starts when its last replica joined, at
 *    the latest of the members' ready times (their collective streams) and the stage's
 *    previous round end, and lasts allreduce_s; reduce_s counts each round once. STEP runs on
 *    each replica (stash: once its round started, deferred as without replicas).
 *  - Transfers: replica i of stage s sends microbatch k to replica k mod n' of stage s + 1 over
 *    a link of its own per (replica pair, direction) and boundary, FIFO, at replica_transfer_s
 *    (the replicas' devices; transfer_s when NULL). --shared-inter-link does not apply to them.
 *  - Memory per device: each replica holds the stage's weights, gradients and optimizer state,
 *    and stashes only its own microbatches (weight versions per replica).
 *  - Statistics of a replicated rank (sim_rank_stats): busy_s is the MEAN over its replicas (so
 *    idle_s and bubble_fraction are the group's idle time over n x window, and the run's
 *    bubble_fraction stays 1 - sum busy / (ranks x window)); comm_s and reduce_s are the
 *    group's totals; peak_bytes, static_bytes, peak_stash_mbs and peak_weight_versions are the
 *    largest of one replica (one device, for the OOM verdict); first_start_s and span_s run
 *    from the first replica's first compute to the last one's end.
 * Only the heap engine serves replicated runs (the flow engine declines them). With every stage
 * at 1 replica (or replicas NULL) results are bit-identical to the unreplicated engine's. */

/* Fills c with defaults (overlapped comm, one node, no capacity, dtype 4, optimizer 8,
 * microbatch size 1, deterministic, no trace). */
void sim_config_init(sim_config *c);
/* 1 when c takes each run's ranks' speeds from its rows (sim_config.speed_draws), else 0. */
static inline int sim_config_draws(const sim_config *c) { return c->speed_draws && c->speed_draws_n > 0; }
/* Sets c to predict a run of the executor on schedule s: its iteration time over the whole run
 * (a measured pass of N iterations gives pass / N, fill and drain included, also for stash and
 * 2bw), and blocking SEND/RECV where the executor's compute waits at a receive's place in the
 * list (stream_waits_at_recv: the CUDA backend's compute stream, whose SENDs are copies on the
 * communication stream: async_send) or where s's STEP follows its
 * all-reduce in list order (stash and 2bw weights). Elsewhere the CPU executor's RECV posts its
 * receive and the compute that needs the data waits for it, a SEND returns once its copy is
 * made: the default mode, where the lowering's early receives (zb-h1: 0RECV_B1 before 0F2;
 * interleaved) do not stall the compute listed after them. */
void sim_config_executor(sim_config *c, const sched *s, int stream_waits_at_recv);

/* ---------------------------------------------------------------- results */

/* One executed action of the trace. */
typedef struct sim_slot {
    double start_s, end_s;
    int64_t mem_bytes; /* memory of the rank right after the action */
} sim_slot;

typedef struct sim_rank_stats {
    /* busy_s, idle_s and bubble_fraction cover the bubble window (sim_result.window_s) */
    double busy_s;            /* compute time in the window */
    double comm_s;            /* time of transfers this rank sent (link busy time), whole run */
    double reduce_s;          /* all-reduce time, whole run */
    double idle_s;            /* window_s - busy_s, seconds */
    double bubble_fraction;   /* idle_s / window_s, in [0, 1] */
    double first_start_s;     /* start of the rank's first compute */
    double span_s;            /* last compute end - first compute start */
    int64_t peak_bytes;       /* peak memory */
    int64_t static_bytes;     /* gradients + optimizer state + one weight version */
    int peak_stash_mbs;       /* most microbatches stashed at once (over the rank's stages) */
    int peak_weight_versions; /* most weight versions at once (summed over the rank's stages) */
    int oom;                  /* peak_bytes > capacity */
} sim_rank_stats;

/* Bubble figures, one name per quantity everywhere in pipelab (simulate, run, the database,
 * compare, plots):
 *   idle_s           idle seconds: window_s - busy_s per rank, summed over ranks for a run;
 *   bubble_fraction  the idle FRACTION of the window: idle_s / (ranks x window_s), which is
 *                    1 - sum busy_s / (ranks x window_s) where no rank is busy past the window;
 *   zb_bubble_rate   the Zero Bubble paper's bubble rate (Qi et al. 2023, arXiv 2401.10241, §5
 *                    and Table 5): (cost - m (TF + TB + TW)) / cost, where cost is the largest
 *                    execution time of a stage; pipelab evaluates it as the max over ranks of
 *                    (span_s - busy_s) / span_s, span_s running from the rank's first compute
 *                    start to its last compute end (so the staggered start of a parallelogram is
 *                    no bubble: ZB-H2 reaches 0). In the steady-state window of an asynchronous
 *                    schedule (below) it is the max over ranks of the rank's bubble_fraction.
 * The window (window_s) is the time those figures cover, the same one the iteration time is
 * measured over:
 *   synchronous schedules (weights flush), and any schedule run for 1 iteration: the whole run,
 *     [0, makespan_s];
 *   asynchronous schedules (weights stash or 2bw: PipeDream, PipeDream-2BW) over N >= 3
 *     iterations: the steady state [end of iteration F - 1, end of iteration L]: within iterations 1
 *     to sim_steady_last(N, 1, drain) (N - 2, or the iteration before the drain's first when
 *     m < p - 1 spreads the drain over several; fewer where the gaps before that show the drain
 *     sooner), whole periods of the gaps between the iteration ends from F on, once they repeat
 *     twice over sched_async_span's gaps (steady_cycle, the period;
 *     F = steady_first, 1 unless the fill left a transient; see choose_window in sim_result.c);
 *     its length is (L - F + 1) x iteration_time_s; when the fill and the drain leave no
 *     iteration between them (always at N = 2) there is no steady state and the window is the
 *     whole run (makespan / N);
 *     busy_s then counts the compute of iterations F..L (the work that window completes), so the
 *     pipeline's fill (iteration 0) and its drain (the last iteration, which ends early: no later
 *     microbatches hold the slowest stage, which shows with unequal stages) are left out as they
 *     are from the iteration time, and idle_s = window_s - busy_s (>= 0). */
typedef struct sim_result {
    int ranks, iterations;
    double makespan_s;        /* last event */
    double iteration_time_s;  /* makespan / 1 iteration, or steady state over iterations F..L */
    double throughput;        /* samples / s = microbatches * microbatch_size / iteration time */
    double window_s;          /* the bubble window (above): makespan_s, or L iteration_time_s */
    int steady_state;         /* 1 when the window is an asynchronous schedule's steady state */
    int steady_first;         /* then the window's first iteration: 1, or later where the fill
                               * left a transient before the gaps repeat; else 0 */
    int steady_last;          /* then L, the window's last iteration; else 0 */
    int steady_cycle;         /* the period, in iterations, with which the steady state's
                               * iteration gaps repeat in this run (the window holds whole ones,
                               * from steady_first); 0 when none repeats twice before the drain,
                               * or no steady state */
    int steady_need;          /* iterations to try for a window of two whole cycles: 1 + the
                               * drain's ceil((W - 1) / m) + sched_async_span of the period found
                               * + the transient before it (steady_first - 1), or of
                               * sched_async_cycle's when none was (a guess: the period depends
                               * on the costs), or twice this run's iterations when the guess
                               * asks for no more than it ran */
    double bubble_fraction;   /* idle_s / (ranks * window_s) */
    double zb_bubble_rate;    /* Zero Bubble paper's bubble rate (above) */
    double idle_s;            /* sum over ranks of idle time in the window, seconds */
    double comm_s;            /* sum of transfer times */
    int64_t peak_bytes;       /* max over ranks */
    int oom;                  /* some rank over capacity */
    size_t actions, events;   /* actions executed, events processed */
    size_t state_bytes;       /* bytes the engine allocated (tables, heap, links; no trace) */
    double *iter_end_s;       /* [iterations] when each iteration's last action ended */
    sim_rank_stats *rank;     /* [ranks] */
    sim_slot **trace;         /* [ranks][actions of the rank] when record_trace, else NULL */
} sim_result;

/* Simulates a schedule: a lowered one (sched_lower's output), or a compute-only one (checked
 * with sched_check_actions at least) when no trace is asked, which the flow engine runs with
 * the transfers and updates that lowering would add implied, and which is lowered here (within
 * cfg->budget) when the flow engine cannot serve the run; the result is the lowered schedule's
 * either way. Returns PL_OK and fills r (free with sim_result_free), or PL_EINPUT (a trace of a
 * compute-only schedule, negative cost, a deadlock naming the waiting cycle or the stuck ranks,
 * tables larger than the memory budget cfg->budget, checked before they are allocated), or
 * PL_ENOMEM. Deterministic: the same inputs give the same result and trace. */
int sim_run(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e);
/* Returns L, the last iteration of an asynchronous schedule's steady-state window over N
 * iterations (sim_result) whose iteration gaps repeat every `cycle` iterations (found in the
 * run; 0 or 1: none) and whose drain starts at iteration `drain` (the least iteration of a
 * compute that a rank runs after the one its last forward paces): from N = 3 on, N - 2 or
 * drain - 1 when less, the drain left out, less its remainder modulo the cycle when it holds one
 * cycle or more (the window then holds whole cycles), and 0 when no iteration is left (no steady
 * state: N < 3, or a drain that starts by iteration 1). */
int sim_steady_last(int iterations, int cycle, int drain);
void sim_result_free(sim_result *r);

/* Statistics over repeated stochastic runs (seeds seed, seed + 1, ...). */
typedef struct sim_repeat_stats {
    int repeat;
    double iter_mean_s, iter_sd_s, iter_min_s, iter_max_s;
    double thr_mean, thr_sd;
    double bubble_fraction_mean, bubble_fraction_sd;
    int64_t median_seed;      /* the seed of the median run (sim_repeat; cfg->seed + repeat - 1
                               * must stay within INT64_MAX) */
} sim_repeat_stats;

/* Runs sim_run `repeat` times with seeds cfg->seed + k (k < repeat) and summarizes them in *st;
 * *median (may be NULL) receives the median run: with one run that run, else the runs ordered
 * by iteration time (ties by seed) and the one in the middle, the lower of the two middle ones
 * for an even count, run again (with cfg's trace), so that it is one whole run whose iteration
 * time is the runs' median (free it). Returns PL_OK or an error code. */
int sim_repeat(const sched *s, const sim_costs *c, const sim_config *cfg, int repeat,
               sim_repeat_stats *st, sim_result *median, pl_err *e);

/* sim_repeat's median run of `runs` stochastic runs (cfg->cv or cfg->rank_cv > 0), without the
 * summary. The measured side's iteration time is the median over passes
 * (exec_result.iter_median_s); a prediction that prices the ranks' jitter is matched by this.
 * Returns PL_OK (r to free) or an error code. */
int sim_run_median(const sched *s, const sim_costs *c, const sim_config *cfg, int runs, sim_result *r, pl_err *e);

/* ---------------------------------------------------------------- the sharing term
 * The ranks of a run share their host: on a VM whose cores slow each other down (a host that
 * gives two busy vCPUs less than two cores), an action that runs while the other ranks wait
 * takes `alone` times as long as one beside all of them, which is how the profile times it (its
 * workers run the same rounds at once). With k of the other P - 1 ranks computing, an action
 * runs at speed 1 / g(k), g(k) = alone + (1 - alone) k / (P - 1), in units of its lockstep time.
 * A run's own times then depend on its overlaps, which depend on its times: sim_share_solve
 * finds the fixed point. From a run at the lockstep times (cfg without its random factors, a
 * trace), each compute action and STEP of rank r at list place i takes factor
 * m = (e - s) / integral over [s, e] of dt / g(k(t)), the time its work takes at the speeds its
 * span saw (processor sharing, exact where the overlaps stay as they were), the run is
 * simulated again with those factors (sim_config.act_scale), and so on, until no factor moves
 * by more than SIM_SHARE_TOL or after SIM_SHARE_ITERS runs. alone = 1 gives factors of 1. */
#define SIM_SHARE_ITERS 60
#define SIM_SHARE_TOL 1e-9
/* Per class: a backward (B, I, W: the backward class) and every other busy action (F, OVERLAP,
 * STEP: the forward class) slow each other down by their own amounts ("A third host": two
 * backwards slow each other more than a backward and a forward do). Each class's unit is its
 * time beside the other ranks running its own class, which is how the profile's rounds time it.
 * With kf of the other P - 1 ranks running forwards and kb backwards, an action of the forward
 * class runs at speed 1 / gF and one of the backward class at 1 / gB,
 *   gF = f_alone + (1 - f_alone) kf / (P - 1) + (f_cross - f_alone) kb / (P - 1),
 *   gB = b_alone + (b_cross - b_alone) kf / (P - 1) + (1 - b_alone) kb / (P - 1),
 * so that on 2 ranks an F alone takes f_alone, beside a backward f_cross, and a backward alone
 * b_alone, beside a forward b_cross. f_cross = b_cross = 1 and b_alone = f_alone is the one-ratio
 * term above (gF = gB = g(kf + kb)): the zeros of a sim_share_ratios ask for it. */
typedef struct sim_share_ratios {
    double f_alone; /* a forward-class action alone over beside forwards (> 0) */
    double f_cross; /* beside backwards only over beside forwards; 0: 1 */
    double b_alone; /* a backward alone over beside backwards; 0: f_alone */
    double b_cross; /* beside forwards only over beside backwards; 0: 1 */
} sim_share_ratios;
/* Returns f_cross from an F timed beside one backward and P - 2 forwards (the profile's phase
 * on P workers) over its time beside P - 1 forwards, `measured`, by gF above: on 2 ranks itself. */
double sim_share_f_cross(double measured, double f_alone, int ranks);
/* Solves the sharing term for s (lowered, at least 2 ranks, no replicated stage) on costs c
 * and configuration cfg (its cv, rank_cv, speed draws, act_scale and trace left out), the ratios
 * q (each finite, f_alone > 0, the others >= 0, 0 for the one-ratio default). Returns PL_OK with
 * *scale set ([ranks] rows, free with sim_share_free) and *iters the runs it took, or PL_EINPUT /
 * PL_ENOMEM (the simulator's errors too). */
int sim_share_solve(const sched *s, const sim_costs *c, const sim_config *cfg, const sim_share_ratios *q, double ***scale,
                    int *iters, pl_err *e);
void sim_share_free(const sched *s, double **scale);

/* ---------------------------------------------------------------- traces */

/* Chrome trace JSON (Perfetto): one process per rank, thread 0 compute, thread 1 communication
 * (SEND/RECV/REDUCE_GRAD), plus a memory counter. Needs a result with a trace. */
int sim_trace_chrome(const sched *s, const sim_result *r, pl_buf *out, pl_err *e);
/* Text table: rank, seq, action, start_s, end_s, dur_s, mem_bytes. */
int sim_trace_table(const sched *s, const sim_result *r, pl_buf *out, pl_err *e);

/* ---------------------------------------------------------------- costs from the cost-model module
 * (sim_model.c) The adapter that fills sim_costs from a cost_model (layer table), a
 * cost_partition (stage -> layer range, replicas), a cost_hw (devices, topology, links) and
 * cost_opts (microbatch size, precision): the same definitions (cost_stage_eval,
 * cost_transfer_s, cost_allreduce_s, cost_step_s) the executor and the partitioners use.
 *
 * Placement: schedule rank r occupies devices [device[r], device[r] + width(r)), where width(r)
 * is the largest replica count among the stages r holds and ranks take devices in order (so a
 * PipeDream "15-1" on 2 ranks puts rank 0 on devices 0..14 and rank 1 on device 15; without
 * replication device[r] = r). A device's node is device / devices_per_node.
 *   compute_s       F = f_s, B = b_s (I + W), I = i_s, W = w_s of the stage's layer range
 *   boundary_bytes  out_bytes of the stage (cut_bytes at its end; branches counted)
 *   stash_bytes, w_stash_bytes, param_bytes   the stage's cost_stage values
 *   input_bytes     stash_recompute_bytes (what a microbatch keeps under full recomputation)
 *   transfer_s      cost_transfer_s between the two ranks' first devices (intra or inter link)
 *   replica_transfer_s  cost_transfer_s between replica i's device (device[rank] + i) and j's
 *   allreduce_s     cost_allreduce_s over the stage's replica group, on the inter link when the
 *                   group spans two nodes (on allreduce_link's intra link when that is set)
 *   step_s          cost_step_s of the stage's parameters (0 when memory bandwidth is unknown)
 * Memory agrees with cost_schedule_memory when sim_model_config fills the sim_config (dtype and
 * optimizer bytes from the model and opts; gradients in the model's dtype, as cost_opts_init
 * sets them): byte for byte, split backward, several chunks per rank and full recomputation
 * included, since the engine and cost_schedule_memory walk a rank's actions with the one memory
 * delta (cost_mem_delta; tests/sim/test_sim_model.c). */
#include "cost.h"

typedef struct sim_model {
    const cost_model *m;  /* the layer table (not owned; must outlive the adapter) */
    cost_hw hw;           /* copy of the hardware */
    cost_opts o;          /* copy of the options */
    int stages, ranks;
    cost_stage *stage;    /* [stages] per-stage costs of one microbatch */
    int *bound;           /* [stages + 1] layer bounds: stage q holds [bound[q], bound[q + 1]) */
    int *replicas;        /* [stages] replicas per stage (give it to sim_config.replicas) */
    int *device;          /* [ranks] first device of each schedule rank */
    int *stage_device;    /* [stages] first device of the stage's replica group (its rank's) */
    int devices;          /* devices used in all */
    double *step_s;       /* [stages] optimizer step per stage */
    const cost_hw *allreduce_link; /* NULL = all-reduces on hw's links; else on this hardware's
                                    * intra link (a measured one: the executor's profiled ring,
                                    * cli_run_predict); set after sim_model_init, not owned */
    cost_ar_link send_hold, post_hold; /* the hand-off's own time on the sender and on the
                                    * receiver (the profile's p2p_send and p2p_post, cost.h;
                                    * send_hold_s and post_hold_s of sim_costs); Bps 0 = none */
    const double *rerun_next;      /* [stages] NULL = none; else the ratio of the I of stage q's
                                    * last layer right after that layer's own forward to its time
                                    * (cost_stage.i_last_s): under full recomputation a backward
                                    * starts by running the stage's forward again, and the I of
                                    * the last layer follows it with nothing between (weights and
                                    * activations in cache), so the rerun callback prices the
                                    * rerun less (f - rerun_next[q]) i_last_s, f the factor the
                                    * reuse terms give that backward's I (1 without them; the
                                    * profile's bwd_in_next_s; cli_run_predict); set after
                                    * sim_model_init, not owned */
    const struct sim_reuse *reuse; /* NULL = one time per kind; else the reuse-distance term
                                    * (sim_reuse.c) picks each backward's time; set after
                                    * sim_model_init, not owned */
} sim_model;

/* ---------------------------------------------------------------- reuse distance (sim_reuse.c)
 *
 * A backward that runs right after its own microbatch's forward on the same stage (no other
 * compute between them on the rank: distance 0) finds the activations in cache, and a W right
 * after such an I likewise (F, I, W back to back); others read them back from memory. sim_reuse marks, for every
 * (stage, microbatch) of a lowered schedule, whether its I (or B) and its W run at distance 0
 * (under full recomputation every I and B does: it follows its own recomputed forward), and
 * scales those by the stage's hot / far time ratios (the profile measures both per rank;
 * cli_run_predict). An OVERLAP counts as its backward half for what follows it.
 *
 * First touch: the first F, the first I (or B's input part) and the first W (or B's weight
 * part) of each stage in a rank's list find that stage's weights, gradients and buffers out of
 * cache (other work went through it before the pass: the optimizer step, the profile's rounds
 * between a run's passes, other stages), the later ones in cache. With `first_on`, each F, I, W
 * and B that is not at distance 0 takes its stage's time times first[3 q + c] when it is the
 * first of its kind on its stage, else times rest[3 q + c] (c: 0 F, 1 I, 2 W; the profile times a
 * round's first microbatch and its others, exec_profile_worker_first); a distance-0 one that is
 * the first of its kind takes first / rest on top of its distance-0 ratio.
 *
 * Again: on a rank that holds several stages, an F, I or W (a B: both parts) whose rank's
 * previous compute was the same kind on the same stage (an I or W after a B too) finds that
 * stage's weights (and gradients) in cache, as the profile's rounds do not: they run all of a
 * worker's blocks between two uses of a block, as a rank with one stage does. An F right after
 * the stage's B is not again: the runs show it no faster. With `again_on`, each such action that
 * is not at distance 0 takes its stage's time times again[3 q + c] instead of its first-touch
 * factor (the profile times the kind right after the same kind for another microbatch over
 * a stage's worth of the worker's blocks, after its round: warm, as the round's later
 * microbatches, exec_profile_worker_again).
 * A rank with one stage has no such actions.
 *
 * The kind before: what the rank computed last on the same stage decides which of the stage's
 * data the caches hold. An I (a B: its input part) right after an F of another microbatch on
 * its stage (SIM_WARM_I) reads the weights that F just streamed, as the distance-0 I does
 * (rank 0 of 1F1B, whose B follows the next microbatch's F; the activations, a few rows, are
 * the small part); its W part keeps its time. An F right after a B or a W on its stage
 * (SIM_BACK_F) follows work that streamed the gradients and activations through the caches,
 * where the profile's F follow forwards (GPipe's order). With `before_on`, a SIM_WARM_I I takes
 * its stage's time times i_ratio (the distance-0 ratio), and a SIM_BACK_F F times back[q] (the
 * profile's F right after the backwards of another microbatch over its F,
 * exec_profile_worker_back), each instead of its first-touch or again factor. An OVERLAP's
 * halves are not marked. */
enum { SIM_HOT_I = 1, SIM_HOT_W = 2, SIM_FIRST_F = 4, SIM_FIRST_I = 8, SIM_FIRST_W = 16, SIM_FIRST_KINDS = 3,
       SIM_AGAIN_F = 32, SIM_AGAIN_I = 64, SIM_AGAIN_W = 128, SIM_WARM_I = 256, SIM_BACK_F = 512 };
typedef struct sim_reuse {
    int stages;
    int64_t mbs;              /* the schedule's microbatches over all its iterations */
    uint16_t *hot;            /* [stages x mbs] SIM_HOT_I | SIM_HOT_W | SIM_FIRST_* | SIM_AGAIN_* |
                               * SIM_WARM_I | SIM_BACK_F */
    double *i_ratio, *w_ratio; /* [stages] time at distance 0 / the cost model's time (1 = none) */
    int hot_on;               /* 1 (sim_reuse_init): distance-0 backwards take i_ratio, w_ratio */
    int first_on;             /* 0 (sim_reuse_init): 1 = the first-touch term, first and rest */
    double *first, *rest;     /* [3 stages] F, I, W time of the first of its kind on the stage,
                               * of the others / the cost model's time (1 = none) */
    int again_on;             /* 0 (sim_reuse_init): 1 = the again term */
    double *again;            /* [3 stages] F, I, W time right after the same stage / the cost
                               * model's time (1 = none) */
    int before_on;            /* 0 (sim_reuse_init): 1 = the kind-before term (SIM_WARM_I I at
                               * i_ratio, SIM_BACK_F F at back) */
    double *back;             /* [stages] F time right after a B or W of the stage / the cost
                               * model's time (1 = none) */
} sim_reuse;
/* Marks the distance-0 backwards, the first of each kind per stage, the actions after one on
 * the same stage of a rank with several (again) and the kind before of s; ratios 1, hot_on 1,
 * first_on, again_on and before_on 0. PL_OK or PL_ENOMEM. Free with sim_reuse_free. */
int sim_reuse_init(sim_reuse *r, const sched *s, pl_err *e);
void sim_reuse_free(sim_reuse *r);
/* Returns the SIM_HOT_* flags of stage q's microbatch mb (taken modulo the schedule's). */
int sim_reuse_flags(const sim_reuse *r, int q, int64_t mb);
/* Returns stage q's time of kind k for microbatch mb: st's, with a distance-0 I or W scaled by
 * the stage's ratio (a distance-0 B: both parts), and with first_on the others by their
 * first-touch or later ratio (a B: each part by its own), and with again_on those that follow
 * the same stage by the again ratio instead of the first-touch one; with before_on an I (a B's I)
 * right after another microbatch's F of its stage by the distance-0 ratio and an F right after
 * a B or W of its stage by back. */
double sim_reuse_time(const sim_reuse *r, const cost_stage *st, int q, sched_kind k, int64_t mb);

/* Builds the adapter for schedule s (lowered or not: only stages, ranks and stage_rank are
 * read). p NULL = an even split of the layers over s->stages (cost_partition_even); hw NULL =
 * one node holding every device with free links and no FLOP rates; o NULL = cost_opts_init(m).
 * Returns PL_OK, or PL_EINPUT when the partition's stage count differs from the schedule's
 * ("the partition has 3 stages but the schedule has 4"), the partition does not cover the
 * model's layers, a time cannot be derived (FLOPs without a peak), or the hardware has fewer
 * devices than the placement needs; PL_ENOMEM. Free with sim_model_free (also after errors). */
int sim_model_init(sim_model *sm, const sched *s, const cost_model *m, const cost_partition *p,
                   const cost_hw *hw, const cost_opts *o, pl_err *e);
void sim_model_free(sim_model *sm);
/* Returns the sim_costs view of sm (sm must outlive it). */
sim_costs sim_model_costs(sim_model *sm);
/* Multiplies stage q's compute times (F, I, W, B and the recomputed forward) and its STEP by f:
 * its device running slower or faster by that factor (the pass-length term, cli_run_predict). */
void sim_model_scale_stage(sim_model *sm, int q, double f);
/* Multiplies stage q's forward by r[0], its input backward by r[1] and its weight backward by
 * r[2], and what is made of them with them: B (I + W), the recomputed forward (as F), and the
 * backward and the I under recomputation; its STEP stays (the version term, cli_run_predict). */
void sim_model_scale_fiw(sim_model *sm, int q, const double r[3]);
/* Fills the model-dependent fields of c: replicas (sm's array), dtype_bytes (the model's),
 * optimizer_bytes_per_param (the opts'), microbatch_size (the opts'), ranks_per_node (the
 * hardware's devices_per_node; exact for --shared-inter-link only without replication), and
 * capacity_bytes = the device memory when c has none yet. */
void sim_model_config(const sim_model *sm, sim_config *c);
/* Returns the GPipe-style balanced partition of m into `stages` stages (cost_plan_balance:
 * exact contiguous split minimizing the slowest stage's F + I + W under hw and o), or NULL and
 * e (more stages than layers, a time that cannot be derived, ENOMEM). */
cost_partition *sim_model_balance(const cost_model *m, const cost_hw *hw, const cost_opts *o, int stages,
                                  pl_err *e);

/* ---------------------------------------------------------------- setting up a run (sim_setup.c)
 * What a simulation decides before sim_run, for `pipelab simulate` and any other caller: the
 * replicas per stage, the iteration count and warm-up of a schedule with replicated stages, and
 * the model side of a run (model, hardware, partition and the sim_model adapter over them). */

/* Replicas per stage asked for (--replicas and --replicas-stage): every stage `all` times
 * (0 = not asked), then stage[i] count[i] times, in order. */
typedef struct sim_replica_spec {
    int all;
    int n;
    const int *stage, *count; /* [n] */
} sim_replica_spec;

/* Applies spec to replicas[stages] (values not asked for stay as they are). Returns PL_OK, or
 * PL_EINPUT "--replicas-stage 5=2: the schedule has stages 0..1" for a stage past the
 * schedule's (replicas may then be partly written). */
int sim_replicas_apply(const sim_replica_spec *spec, int stages, int *replicas, pl_err *e);

/* Replicated stages settle slowly: over the generators' few default iterations the steady-state
 * figure of an asynchronous schedule with replicated stages is biased by the fill's head start
 * and the drain, and reads too fast. Unless the iterations are given, such a schedule runs
 * SIM_REPLICATED_ITERS_PER_REPLICA iterations per replica of its widest stage, and at least
 * SIM_REPLICATED_ITERS_MIN (README's "Simulating" section has the figures on VGG-16). */
#define SIM_REPLICATED_ITERS_MIN 16
#define SIM_REPLICATED_ITERS_PER_REPLICA 2
/* Returns the iteration count to generate a schedule of weights policy `weights` with:
 * iterations when given (> 0), when the weights are flushed (a synchronous schedule has no
 * steady state to wait for) or when no stage is replicated; else the most of
 * SIM_REPLICATED_ITERS_MIN, SIM_REPLICATED_ITERS_PER_REPLICA x the most replicas of any of the
 * stages, and sched_async_iterations (a whole cycle of the steady state, the drain apart). */
int sim_replicated_iterations(int iterations, sched_weights weights, const int *replicas, int stages,
                              int microbatches);
/* A generated asynchronous schedule (kind: pipedream, 2bw; NULL for a loaded one, which is kept
 * as it is) whose iterations were not given (g->iterations 0) is generated again, lowered when *s
 * was, with `iterations` of them (0: sched_async_iterations' count), within memory budget b, so
 * that `pipelab simulate`'s steady-state window holds its cycle; other schedules are left.
 * Returns PL_OK or an error in e (*s is then unchanged). */
int sim_async_schedule(const char *kind, const sched_gen_opts *g, const sched_budget *b, int iterations, sched **s,
                       pl_err *e);
/* A generated schedule (kind; NULL for a loaded one, which is kept as it is) with a replicated
 * stage is generated again from g with PipeDream's per-replica warm-up (sched_gen_replicated)
 * and sim_replicated_iterations' count, validated and lowered into *s (the old one is freed),
 * within memory budget b (NULL: the automatic one). Returns PL_OK (also when nothing changes)
 * or an error in e (*s is then unchanged). */
int sim_replicated_schedule(const char *kind, const sched_gen_opts *g, const sched_budget *b, const int *replicas,
                            sched **s, pl_err *e);

/* The model side of a run, as flags name it (`pipelab simulate --model ...`). */
typedef struct sim_model_spec {
    const char *model;        /* cost_model_open's spec or file */
    const char *hardware;     /* a preset or an INI file; NULL = one node, free links, no FLOP rates */
    const char *const *sets;  /* [nsets] KEY=VALUE hardware overrides (cost_hw_set_kv) */
    int nsets;
    const char *partition;    /* a partition file (pipelab partition -o), or NULL */
    const char *split;        /* layer bounds "0,4,8" or sizes "=4,4", or NULL */
    int balance;              /* 1: the balanced split (sim_model_balance) */
    const char *precision;    /* fp32 tf32 fp16 bf16, or NULL = cost_opts_init's */
    int microbatch_size;      /* samples per microbatch; 0 = the model's */
    double optimizer_bytes_per_param; /* < 0 = cost_opts_init's */
    double w_stash_fraction;  /* < 0 = cost_opts_init's; else at most 1 */
    sim_replica_spec replicas; /* over the partition's own */
    const cost_layout *layout; /* tensor x pipeline x data parallel GPT run, or NULL (sim_layout.c) */
} sim_model_spec;
/* Reads the partition file path (pipelab partition -o) for schedule s and a model of `layers`
 * layers named `model` (layers <= 0: as many as the partition covers): its layer bounds and
 * replicas, checked against the schedule's stage count and the layers, every error naming the file. Returns it (cost_partition_free) or NULL and e. */
cost_partition *sim_partition_read(const char *path, const sched *s, int layers, const char *model, pl_err *e);
/* Fills spec with "nothing asked": every pointer NULL, every number the default's. */
void sim_model_spec_init(sim_model_spec *spec);

/* What sim_model_setup_build made: the model, the hardware, the cost options, the partition and
 * the adapter over them (sm: give sim_model_costs(&sm) to the engine). */
typedef struct sim_model_setup {
    cost_model *m;
    cost_hw hw;
    int have_hw;              /* spec named hardware */
    cost_opts co;
    cost_partition *p;        /* the partition simulated, replicas applied */
    const char *psource;      /* where p came from: "even", "balance", "split" or "file" */
    sim_model sm;
} sim_model_setup;
/* Builds the model side of schedule s (its stages and ranks; the schedule itself is not kept):
 * opens the model, loads the hardware with its overrides, sets the cost options, picks the
 * partition (the file, the split, the balanced split, else an even one over s->stages; it must
 * have s->stages stages), applies the replicas and builds the adapter. Returns PL_OK or an error
 * in e whose message names what was wrong (the file, the flag); ms holds what was made either
 * way: free it with sim_model_setup_free. */
int sim_model_setup_build(sim_model_setup *ms, const sim_model_spec *spec, const sched *s, pl_err *e);
/* Frees what sim_model_setup_build made and zeroes ms; safe on a zeroed ms. */
void sim_model_setup_free(sim_model_setup *ms);

/* ---------------------------------------------------------------- GPU-cluster layouts (sim_layout.c)
 * A tensor x pipeline x data parallel GPT run (spec->layout, with spec->hardware): the pipeline
 * is simulated once, each schedule rank a tensor group of T GPUs (so the hardware seen by the
 * pipeline has devices_per_node / (T D) ranks per node, Megatron's rank order putting the D
 * replicas between pipeline neighbours), costs from cost_gpt_model (one GPU's share), the split
 * from cost_gpt_partition; the D replicas are symmetric: each stage's STEP carries its
 * data-parallel gradient synchronization (cost_gpt_sync_s), the tied embedding's all-reduce
 * between the first and last stage, and the optimizer step over the GPU's share. */

/* Loads spec's hardware (preset or file, --set overrides, checked) into ms; PL_OK when none. */
int sim_setup_load_hardware(const sim_model_spec *spec, sim_model_setup *ms, pl_err *e);
/* Builds the model side of a layout run (what sim_model_setup_build does for spec->layout). The
 * schedule must have P ranks and P v stages. Returns PL_OK or an error in e. */
int sim_layout_setup_build(sim_model_setup *ms, const sim_model_spec *spec, const sched *s, pl_err *e);
/* Results of a layout run, from the simulated iteration time and per-rank memory. */
typedef struct sim_layout_report {
    double iteration_time_s, model_flops, tflops_per_gpu, mfu, hfu, params, gpus;
    int microbatches;
    cost_gpt_memory mem;  /* the rank with the highest peak: its parts */
    int peak_rank;
    double capacity_bytes;
    int oom;
    /* pipeline rank 0's iteration by part: its layers' GEMMs, attention core, elementwise work
     * and TP collectives (cost_gpt_layer_parts x layers x m, recomputation included), its
     * gradient synchronization and optimizer step, its blocking pipeline exchanges
     * (cost_gpt_exchange_s, forward and backward of each of its stages and microbatches), its
     * idle time (the bubble and waits for data), and the rest (embedding or head, the embedding
     * all-reduce) */
    double part_s[COST_NPARTS], dp_sync_s, optimizer_s, exchange_s, idle_s, other_s;
} sim_layout_report;
void sim_layout_report_fill(const sim_model_setup *ms, const cost_layout *l, const sim_result *r,
                            sim_layout_report *out);

#endif
