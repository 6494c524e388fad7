/* sim_int.h: internals of the simulator shared between its files: the engine's state (one
 * sim_eng per run) and the helpers that the engines (sim_heap.c, sim_flow.c), the run
 * (sim_run.c) and their set-up (sim_links.c, sim_memory.c, sim_replicas.c, sim_result.c) use.
 * The heap engine's event queue is sim_queue_int.h, the per-action rules sim_rules_int.h. */
#ifndef SIM_INT_H
#define SIM_INT_H

#include <gsl/gsl_rng.h>
#include <stdint.h>
#include <string.h>

#include "sim.h"

/* ---------------------------------------------------------------- times per (stage, mb) */

/* Tables of times per (stage, mb). Key of a wait = table * n_entries + idx. The arrivals come
 * first: a compact cell (SIM_T_COMPACT tables) holds only them. */
enum { SIM_T_ARRF, SIM_T_ARRB, SIM_T_FDONE, SIM_T_IDONE, SIM_T_N };

/* Tables a compact cell holds, and the log2 of the fields of a full cell and of a compact one.
 * A compute-only run of the flow engine without OVERLAPs whose neighbour stages all live on
 * other ranks keeps compact cells (sim_run.c): a forward or backward done is then read only by
 * later actions of the rank that computed it (sched_check_actions orders them), and is never
 * later than that rank's clock there. */
#define SIM_T_COMPACT 2
#define SIM_CELL_SHIFT_FULL 2
#define SIM_CELL_SHIFT_COMPACT 1

/* The times of one (stage, mb): forward input arrived, output gradient arrived, forward done,
 * input-backward done. Together so that the actions around one microbatch share a line. The
 * engines index the fields (sim_cell_at); the struct is a full cell's size. */
typedef struct sim_cell {
    uint64_t u[SIM_T_N]; /* ~bits of the time (times are >= +0.0, so never all ones); 0 = not yet,
                          * so zeroed memory (calloc, fresh mmap pages) needs no initialization */
} sim_cell;

/* Returns the time stored in a cell field, or -1 when not known yet. */
static inline double sim_cell_time(uint64_t u) {
    if (!u) return -1.0;
    u = ~u;
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Returns the cell encoding of time tm (>= 0). */
static inline uint64_t sim_cell_enc(double tm) {
    uint64_t u;
    memcpy(&u, &tm, sizeof u);
    return ~u;
}

/* An event of the heap engine (sim_queue_int.h). */
typedef struct sim_ev sim_ev;

/* ---------------------------------------------------------------- engine state */

/* The hand-off's own times a boundary keeps (sim_eng.hold, sim_links.c): each direction's
 * SEND, and its RECV posted before its message arrived or after (the copy out). */
enum { SIM_HOLD_SEND_F, SIM_HOLD_SEND_B, SIM_HOLD_POST_F, SIM_HOLD_POST_F_LATE, SIM_HOLD_POST_B, SIM_HOLD_POST_B_LATE,
       SIM_HOLDS };

/* Everything the engine keeps per stage, in one place (one or two cache lines). */
typedef struct sim_stage_state {
    int64_t stash_b, wstash_b, input_b, param_b; /* memory sizes */
    double xfer_f_s, xfer_b_s;  /* transfer times over the boundary stage -> stage+1 and back */
    double reduce_s;            /* all-reduce time */
    int32_t link_f, link_b;     /* links of the boundary stage -> stage+1 and back */
    int32_t inflight;           /* microbatches stashed now */
    int32_t rg_issued, rg_done; /* all-reduces started / finished */
    int32_t step_pending;       /* deferred optimizer steps not finished (stash, 2bw) */
    double reduce_end;          /* end of the latest all-reduce */
    int32_t rep;                /* replicas of the stage (1: not replicated) */
    int32_t rbase;              /* replicated: index of replica 0's state in eng.rst */
    int32_t stream0;            /* engine stream of replica 0 (the rank when nothing is replicated) */
    int32_t npair;              /* replicated boundary stage -> stage+1: links per direction (the
                                 * pair of microbatch k is k mod npair), at link_f and link_b; 0 = one */
    int32_t rg_started;         /* replicated: this replica's all-reduces whose collective started */
    int32_t rg_neg;             /* replicated: REDUCE_GRADs without microbatch this replica reached */
    sched_versions *vers;       /* the weight versions of this stage (replica), in eng.vers; NULL
                                 * under a flush schedule, which holds one throughout */
} sim_stage_state;

/* One all-reduce collective of a replicated stage: it starts when its `expected` replicas
 * reached it (at the latest of their ready times and the stage's previous collective end). */
typedef struct sim_round {
    double ready, start, end;
    int32_t arrived, expected;
} sim_round;

/* The collectives of a replicated stage: REDUCE_GRAD of microbatch k (stash) joins round
 * k / n with the other replicas' microbatches of that round; the i-th REDUCE_GRAD without a
 * microbatch (flush, 2bw) of every replica forms round neg0 + i. */
typedef struct sim_rstage {
    sim_round *rd;
    int64_t nrd, neg0;
    double last_end;
} sim_rstage;

/* One action in the flow engine's compact stream: 8 bytes instead of 20 (the flow engine
 * hops between ranks, and at thousands of ranks loading the next action is its main miss).
 * ks = kind | stage << SIM_FLOW_KIND_BITS; an OVERLAP reads its second half from the schedule. */
typedef struct sim_flow_act {
    int32_t mb;
    uint32_t ks;
} sim_flow_act;
#define SIM_FLOW_KIND_BITS 4
#define SIM_FLOW_KIND_MASK ((1u << SIM_FLOW_KIND_BITS) - 1)
/* Entries past the end of the compact stream, so that the flow engine prefetches ahead freely. */
#define SIM_FLOW_SLACK 8

/* One engine stream: a rank, or one replica of a rank with replicated stages. */
typedef struct sim_rank_state {
    const sched_action *acts;
    const sim_flow_act *fa; /* flow engine: this rank's part of the compact stream */
    uint32_t n, pc;
    int32_t id;       /* rank number */
    double coll_free; /* collective stream free at */
    double start_cur; /* start of the running compute */
    int cur_iter;
    int started;      /* 1 once a compute started */
    int held;         /* heap engine: 1 once the RECV at pc held the stream for its post */
    double last_end;  /* end of the last compute */
    double cur;       /* flow engine: the rank's own clock (where the heap engine has "now") */
    int inflight;     /* microbatches stashed now */
    int versions;     /* weight versions now (sum over stages) */
    int64_t mem;      /* bytes now */
    int32_t rank, replica; /* the schedule rank this stream belongs to, and its replica */
    double speed;     /* factor on its compute times: 1, or drawn once per run (sim_config.rank_cv) */
    double speed_b;   /* the same on its backwards (B, I, W): speed, or the states term's own
                       * (sim_config.speed_draws_b) */
    const uint32_t *orig;  /* replicated rank: position of each action in the rank's list, else NULL */
    sim_rank_stats st; /* statistics, copied to the result at the end */
} sim_rank_state;

typedef struct sim_eng {
    const sched *s;
    const sim_costs *c;
    const sim_config *cfg;
    sim_result *r;
    int64_t M, n_entries;
    /* an asynchronous schedule's steady-state window (sim.h): the first iteration of its drain
     * (drain_first in sim_run.c), and each stream's compute by iteration, [nstream x
     * iterations], from which the window's is summed once the run chose it (sim_busy_window);
     * NULL for a flush schedule or a whole-run window */
    int drain;
    double *busy_it;
    uint64_t *cells;    /* [stages * M << cshift] the times of each (stage, mb), one cell of ntab */
    int ntab, cshift;   /* tables a cell holds (SIM_T_N, or SIM_T_COMPACT) and log2 of its fields */
    size_t cells_bytes;
    int cells_mapped;   /* 1 when cells came from mmap (large), 0 from malloc */
    sim_rank_state *rk;
    /* heap */
    sim_ev *heap;
    size_t hn, hcap;
    uint64_t seq;
    double *link_free;        /* [nlinks] when each link is free */
    int nlinks;
    sim_stage_state *st;      /* [stages] */
    int64_t *blocked;         /* [ranks] key each rank waits for; -1 runnable or running. Dense
                               * (not in rank_state) so waking checks stay in cache */
    int stash_policy;
    gsl_rng *rng;
    double ln_mu, ln_sigma;
    double now;
    int err;
    /* flow engine (sim_flow.c) */
    int *work;                /* [ranks] stack of runnable ranks */
    int nwork;
    uint8_t *queued;          /* [ranks] 1 while on the stack */
    int abort_flow;           /* 1: a cell was written twice; rerun with the heap engine */
    sim_flow_act *fstream;    /* [actions] the compact stream of all ranks, rank by rank */
    size_t fstream_bytes;
    int fstream_mapped;       /* 1 when it came from mmap */
    size_t flow_events;       /* events the heap engine would have processed */
    /* compute-only schedule (flow engine only): after each compute, what lowering would put
     * after it (sched_lower_after) runs at once; its receives only post (counted) */
    int implied;              /* 1: s is compute-only, transfers and updates implied */
    sched_marks marks;        /* where lowering puts the updates */
    sched_action *after;      /* [stages + 4] the actions after the current compute */
    uint64_t implied_actions; /* lowered actions the run implied (sends, receives, updates) */
    uint64_t dropped_actions; /* a compute-only list's own REDUCE_GRADs, which lowering replaces */
    int mem_overflow;         /* 1: some rank's memory passed INT64_MAX bytes (saturated there) */
    /* replicated stages (all NULL / 0 when nothing is replicated: streams = ranks) */
    int any_rep;              /* 1: some stage has more than one replica */
    int nstream;              /* engine streams (rank_state entries) */
    int *reps;                /* [stages] replicas per stage */
    int *sbase, *swidth;      /* [ranks] first stream of each rank, and its stream count */
    sim_stage_state *rst;     /* per-replica state of replicated stages */
    sim_rstage *rs;           /* [stages] collectives of replicated stages */
    sched_action *sacts;      /* the streams' subsequences of replicated ranks */
    uint32_t *sorig;          /* their positions in the ranks' lists */
    double *link_xfer;        /* [nlinks] transfer time of replica-pair links */
    double *hold;             /* [(stages - 1) * SIM_HOLDS] the hand-off's own times at each
                               * boundary (sim_costs.send_hold_s, post_hold_s); NULL = none */
    sched_versions *vers;     /* [nvers] the stages' and replicas' weight versions (stash, 2bw) */
    int nvers;
} sim_eng;

/* Returns the field of table t (< g->ntab) in the cell of index idx. */
static inline uint64_t *sim_cell_at(const sim_eng *g, int t, int64_t idx) {
    return &g->cells[((size_t)idx << g->cshift) + (size_t)t];
}

/* Returns the state of (stage, replica): the stage's own when it is not replicated. */
static inline sim_stage_state *sim_sst(sim_eng *g, int stage, int replica) {
    sim_stage_state *x = &g->st[stage];
    return x->rep > 1 ? &g->rst[x->rbase + replica] : x;
}

/* Adds d bytes to rank k's memory, saturating at INT64_MAX and noting the overflow (reported
 * as an error after the run: no real device holds 8 EiB, so such sizes are input mistakes). */
static inline void sim_mem_add(sim_eng *g, sim_rank_state *k, int64_t d) {
    if (__builtin_add_overflow(k->mem, d, &k->mem)) {
        k->mem = INT64_MAX;
        g->mem_overflow = 1;
    }
}

/* Returns a * b, or INT64_MAX (noting the overflow) when it does not fit. */
static inline int64_t sim_mem_mul(sim_eng *g, int64_t a, int64_t b) {
    int64_t x;
    if (__builtin_mul_overflow(a, b, &x)) {
        g->mem_overflow = 1;
        return INT64_MAX;
    }
    return x;
}

/* ---------------------------------------------------------------- memory (sim_memory.c) */

/* Returns PL_OK when the engine's tables for s (mbs microbatches over all iterations, the
 * trace when trace) fit budget b, else PL_EINPUT with the bytes needed. */
int sim_state_check(const sched *s, int64_t mbs, int trace, const sched_budget *b, pl_err *e);
/* Sets each stage's memory sizes and all-reduce time, and each stream's static memory (weights,
 * gradients, optimizer state per replica). Returns PL_OK or PL_EINPUT naming the stage or rank. */
int sim_setup_stage_memory(sim_eng *g, pl_err *e);
/* Gives each stage, and each replica of a replicated one, its weight versions (sched_versions)
 * under stash and 2bw; nothing under flush. Returns PL_OK or PL_ENOMEM. */
int sim_setup_versions(sim_eng *g, pl_err *e);
/* Returns stream k's compute inside the steady-state window (iterations 1..r->steady_last). */
double sim_busy_window(const sim_eng *g, const sim_rank_state *k);

/* ---------------------------------------------------------------- engines (sim_heap.c, sim_flow.c) */

/* Runs the whole simulation with the heap engine: every stream from its start, then the events
 * in time order. Returns PL_OK or PL_ENOMEM. */
int sim_heap_run(sim_eng *g, pl_err *e);
/* Returns 1 when the flow engine gives the heap engine's results for this run. */
int sim_flow_ok(const sim_eng *g);
/* Runs the whole simulation with the flow engine (g->abort_flow set: it could not). */
void sim_flow_run(sim_eng *g);
/* Moves the progress bar (if any) to the actions the streams have walked (sim_run.c). */
void sim_show_progress(const sim_eng *g);

/* ---------------------------------------------------------------- results (sim_result.c) */

/* Computes the summary metrics of g's result once every stream finished: makespan, iteration
 * time, the bubble window and the figures over it per rank and for the run, peak memory and
 * the OOM verdict, throughput. */
void sim_finish_metrics(const sim_eng *g);

/* ---------------------------------------------------------------- links (sim_links.c) */

/* Sets up the links of every stage boundary and their transfer times. Returns PL_OK or an
 * error. */
int sim_setup_links(sim_eng *g, pl_err *e);

/* ---------------------------------------------------------------- replicated stages (sim_replicas.c) */

/* The most engine streams a run may have (replicas of all ranks together). */
#define SIM_MAX_STREAMS (1 << 22)
/* Sets the replicas per stage, the streams of each rank and each stage's first stream. Returns
 * PL_OK or an error. */
int sim_setup_streams(sim_eng *g, pl_err *e);
/* Gives each stream of a replicated rank its subsequence of the rank's list. Returns PL_OK or
 * PL_ENOMEM. */
int sim_split_streams(sim_eng *g, pl_err *e);
/* Sets up the per-replica state and the collectives of the replicated stages. Returns PL_OK or
 * an error. */
int sim_setup_rounds(sim_eng *g, pl_err *e);
/* Fills st, the statistics of replicated rank q, from its replicas' streams. */
void sim_rank_of_replicas(const sim_eng *g, int q, sim_rank_stats *st);
/* Puts the times of their collectives on the REDUCE_GRADs of replicated stages in the trace. */
void sim_trace_rounds(sim_eng *g);

#endif
