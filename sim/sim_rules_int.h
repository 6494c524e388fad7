/* sim_rules_int.h: the simulator's per-action rules, written once for both engines: when an
 * action is ready, when it starts, what it finishes. The heap engine (sim_heap.c) and the flow
 * engine (sim_flow.c) include it and pass their name (SIM_HEAP, SIM_FLOW) as a constant, so
 * each gets its own inlined copy; they differ only where an end happens: the heap engine pushes
 * an event and processes it at its time, the flow engine (each stream on its own clock, see
 * sim_flow.c) finishes it inline. A rule reads the stream's clock at *now and moves it (the
 * heap engine's clock is the event time: data it finds is never later).
 *
 * Model (decisions, see also sim.h):
 * - Each rank walks its action list in order. A compute starts when the stream is free and
 *   its data is there; the cursor waits while a compute runs.
 * - Overlapped comm (default): SEND starts a transfer on its link at once (buffered, FIFO:
 *   start = max(now, link free)), the link is busy for the whole transfer time (latency +
 *   bytes / bandwidth); RECV only posts, the consuming compute waits for the arrival.
 *   REDUCE_GRAD runs on a per-rank collective stream. STEP: flush waits for the stage's
 *   reduce on the compute stream; stash and 2bw defer it beside the stream (it ends when the
 *   reduce did, plus the step time), stash forwards of that stage wait for it, 2bw's do not.
 * - Blocking comm: SEND holds the stream until its data arrived, RECV until the data is
 *   there, REDUCE_GRAD until the all-reduce ended.
 * - The hand-off's own time (sim_costs.send_hold_s, post_hold_s; sim_eng.hold; heap engine
 *   only): an overlapped SEND holds its stream for the sender's time in it (a SEND that waits
 *   for its arrival holds it anyway); a RECV holds its stream from its post for the receiver's
 *   time, the late one when its message had arrived by then (an arrival at the very time of
 *   the post counts as arrived when its event came first), and under blocking comm then waits
 *   for the data. A hold ends in a SIM_EV_HOLD_END event, after which the stream walks on.
 * - Events are processed in time order, so link FIFO order equals issue order.
 * - Replicated stages (sim_config.replicas, PipeDream's 1F1B-RR; see sim.h and
 *   sim_replicas.c): a rank whose stages have n > 1 replicas runs n streams, each an engine
 *   "rank" (sim_rank_state) walking the subsequence of the rank's list that belongs to its
 *   replica (microbatch k on replica k mod n; REDUCE_GRAD/STEP without a microbatch on every
 *   replica). Per-replica counters (stash, versions, all-reduces, deferred steps) live in
 *   eng.rst; an all-reduce is a collective of its round's replicas (sim_rstage). Transfers of
 *   a replicated boundary use one link per replica pair and direction (sim_links.c). Only the
 *   heap engine serves replicated runs. */
#ifndef SIM_RULES_INT_H
#define SIM_RULES_INT_H

#include <gsl/gsl_randist.h>

#include "sim_queue_int.h"

/* The two engines. */
enum { SIM_HEAP = 0, SIM_FLOW = 1 };

/* A rule inlined into its engine's loop whatever the compiler's size heuristics say: the walk
 * is the engines' hot path, and the engine constant then folds away the other engine's code. */
#define SIM_RULE static inline __attribute__((always_inline))

/* Microbatches ahead of the current one whose cells the flow engine prefetches. */
#define FLOW_PREFETCH_MBS 4

/* What one step of a stream's walk tells its loop: the action is done (on with the next), the
 * stream stops (it waits, or runs a compute), or an allocation failed. */
enum { WALK_NEXT = 0, WALK_STOP = 1, WALK_FAIL = -1 };

/* A wait that can never be satisfied (an action outside the schedule's tables). */
#define WAIT_NEVER (-2)
/* Wait keys beyond the cells: a stage's all-reduces ended, its deferred steps ended, and
 * (replicated) its collective started. */
#define KEY_RG(g, st) ((int64_t)SIM_T_N * (g)->n_entries + (st))
#define KEY_STEP(g, st) ((int64_t)SIM_T_N * (g)->n_entries + (g)->s->stages + (st))
#define KEY_RG_START(g, st) ((int64_t)SIM_T_N * (g)->n_entries + 2 * (int64_t)(g)->s->stages + (st))
/* A stream held by its own part of a hand-off (rule_hold) until its SIM_EV_HOLD_END. */
#define KEY_HOLD(g) ((int64_t)SIM_T_N * (g)->n_entries + 3 * (int64_t)(g)->s->stages)

/* Returns the engine stream that runs microbatch mb of stage (its rank when not replicated). */
static inline int stream_of(const sim_eng *g, int stage, int64_t mb) {
    const sim_stage_state *x = &g->st[stage];
    return x->rep > 1 ? x->stream0 + (int)(mb % x->rep) : x->stream0;
}

/* Returns the table index of (stage, mb), or -1 when out of range. */
static inline int64_t entry(const sim_eng *g, int stage, int mb) {
    if (stage < 0 || stage >= g->s->stages || mb < 0 || mb >= g->M) return -1;
    return (int64_t)stage * g->M + mb;
}

/* Returns 1 when stage is one of the schedule's. */
static inline int stage_ok(const sim_eng *g, int stage) { return stage >= 0 && stage < g->s->stages; }

/* Returns the wait key of table t's time of cell idx. */
static inline int64_t cell_key(const sim_eng *g, int t, int64_t idx) { return (int64_t)t * g->n_entries + idx; }

/* Returns 1 and the time when key (t, idx) is known; else sets the rank's wait and returns 0. */
static inline int need(sim_eng *g, sim_rank_state *k, int t, int64_t idx, double *latest) {
    if (idx < 0) {
        g->blocked[k->id] = WAIT_NEVER;
        return 0;
    }
    if (t >= g->ntab) return 1; /* left out of compact cells: never later than the clock (sim_int.h) */
    double v = sim_cell_time(*sim_cell_at(g, t, idx));
    if (v < 0) {
        g->blocked[k->id] = cell_key(g, t, idx);
        return 0;
    }
    if (v > *latest) *latest = v;
    return 1;
}

/* Returns 1 when the forward input of (stage, mb) is there. */
static inline int fwd_ready(sim_eng *g, sim_rank_state *k, int stage, int mb, double *lt) {
    if (stage == 0) return 1;
    if (g->s->stage_rank[stage - 1] == g->s->stage_rank[stage]) return need(g, k, SIM_T_FDONE, entry(g, stage - 1, mb), lt);
    return need(g, k, SIM_T_ARRF, entry(g, stage, mb), lt);
}

/* Returns 1 when a backward (B or I) of (stage, mb) has its forward and output gradient. */
static inline int bwd_ready(sim_eng *g, sim_rank_state *k, int stage, int mb, double *lt) {
    if (!need(g, k, SIM_T_FDONE, entry(g, stage, mb), lt)) return 0;
    if (stage + 1 >= g->s->stages) return 1;
    if (g->s->stage_rank[stage + 1] == g->s->stage_rank[stage]) return need(g, k, SIM_T_IDONE, entry(g, stage + 1, mb), lt);
    return need(g, k, SIM_T_ARRB, entry(g, stage, mb), lt);
}

/* Returns 1 when compute (kind, stage, mb) has its inputs (a: the whole action, read for an
 * OVERLAP's backward half), the latest of their times in *lt; else 0 with the wait set. */
static inline int compute_ready(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb, const sched_action *a,
                                double *lt) {
    if (kind == SCHED_F) return fwd_ready(g, k, stage, mb, lt);
    if (kind == SCHED_W) return need(g, k, SIM_T_IDONE, entry(g, stage, mb), lt);
    if (kind == SCHED_OVERLAP) return fwd_ready(g, k, stage, mb, lt) && bwd_ready(g, k, a->stage2, a->mb2, lt);
    return bwd_ready(g, k, stage, mb, lt);
}

/* Returns the compute time of a (non-overlap) compute kind, with recompute and noise. */
static inline double compute_time(sim_eng *g, int stage, int kind, int mb) {
    double t = g->c->compute_s(g->c->ctx, stage, (sched_kind)kind, mb);
    if (g->s->recompute == SCHED_RECOMPUTE_FULL && (kind == SCHED_B || kind == SCHED_I))
        t += g->c->rerun_s ? g->c->rerun_s(g->c->ctx, stage, mb) : g->c->compute_s(g->c->ctx, stage, SCHED_F, mb);
    if (!(t >= 0)) {
        g->err = PL_EINPUT;
        return 0;
    }
    if (g->ln_sigma > 0) t *= gsl_ran_lognormal(g->rng, g->ln_mu, g->ln_sigma);
    return t;
}

/* Changes a stage's stash count by d on rank k. */
static inline void stash_change(sim_eng *g, sim_rank_state *k, int stage, int d) {
    sim_sst(g, stage, k->replica)->inflight += d;
    k->inflight += d;
}

/* Adds dv weight versions of a stage to rank k's count and memory. */
static inline void versions_change(sim_eng *g, sim_rank_state *k, const sim_stage_state *ss, int dv) {
    if (dv) {
        k->versions += dv;
        sim_mem_add(g, k, sim_mem_mul(g, dv, ss->param_b));
    }
}

/* Updates the stream's peaks after memory or stash changed. */
static inline void note_peaks(sim_rank_state *k) {
    sim_rank_stats *st = &k->st;
    if (k->mem > st->peak_bytes) st->peak_bytes = k->mem;
    if (k->inflight > st->peak_stash_mbs) st->peak_stash_mbs = k->inflight;
    if (k->versions > st->peak_weight_versions) st->peak_weight_versions = k->versions;
}

/* Memory effects at the start of a compute half (kind on stage, microbatch mb) on rank k:
 * cost_mem_delta's; a forward uses the stage's newest weight version (sched_versions). */
static inline void mem_start(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb) {
    const sim_stage_state *ss = &g->st[stage];
    cost_mem_sizes z = {ss->stash_b, ss->wstash_b, ss->input_b}; /* capped in sim_memory.c */
    if (kind == SCHED_F) {
        stash_change(g, k, stage, +1);
        sched_versions *v = sim_sst(g, stage, k->replica)->vers;
        if (v) sched_versions_forward(v, mb);
    }
    sim_mem_add(g, k, cost_mem_delta(&z, (sched_kind)kind, 0, g->s->recompute == SCHED_RECOMPUTE_FULL));
}

/* Memory effects at the end of a compute half: cost_mem_delta's; the end of a backward releases
 * its weight version (sched_versions). */
static inline void mem_end(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb) {
    const sim_stage_state *ss = &g->st[stage];
    cost_mem_sizes z = {ss->stash_b, ss->wstash_b, ss->input_b};
    sim_mem_add(g, k, cost_mem_delta(&z, (sched_kind)kind, 1, g->s->recompute == SCHED_RECOMPUTE_FULL));
    if (kind == SCHED_B || kind == SCHED_W) {
        stash_change(g, k, stage, -1);
        sched_versions *v = sim_sst(g, stage, k->replica)->vers;
        if (v) versions_change(g, k, ss, sched_versions_backward(v, mb));
    }
}

/* Memory effects of a STEP of stage on rank k as it starts: a new weight version when one of the
 * stage's microbatches in flight uses the newest (sched_versions). */
static inline void mem_step(sim_eng *g, sim_rank_state *k, int stage) {
    sched_versions *v = sim_sst(g, stage, k->replica)->vers;
    if (v) {
        versions_change(g, k, &g->st[stage], sched_versions_step(v));
        note_peaks(k);
    }
}

/* Returns the sharing term's factor (sim_config.act_scale) of stream k's current action, 1 when off. */
static inline double act_scale(const sim_eng *g, const sim_rank_state *k) {
    const double *const *m = g->cfg->act_scale;
    return m ? m[k->rank][k->orig ? k->orig[k->pc] : k->pc] : 1;
}

/* Returns the duration of compute (kind, stage, mb; a: the whole action, read for an
 * OVERLAP's backward half) on stream k, and applies its memory at the start. */
static inline double compute_begin(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb, const sched_action *a) {
    double d;
    if (kind == SCHED_OVERLAP) { /* its F half at the forwards' speed, the other at the backwards' */
        d = compute_time(g, stage, SCHED_F, mb) * k->speed + compute_time(g, a->stage2, a->kind2, a->mb2) * k->speed_b;
        mem_start(g, k, SCHED_F, stage, mb);
        mem_start(g, k, a->kind2, a->stage2, a->mb2);
    } else {
        d = compute_time(g, stage, kind, mb) * (kind == SCHED_F ? k->speed : k->speed_b);
        mem_start(g, k, kind, stage, mb);
    }
    note_peaks(k);
    return d * act_scale(g, k);
}

/* Notes that stream k starts d seconds of compute at now: its first start, its busy time. */
static inline void busy_start(sim_rank_state *k, double now, double d) {
    if (!k->started) {
        k->started = 1;
        k->st.first_start_s = now;
    }
    k->st.busy_s += d;
}

/* Counts d seconds of compute of global microbatch mb towards its iteration's share of stream
 * k's compute (eng.busy_it: the steady-state window of asynchronous schedules, sim.h). */
static inline void busy_late(sim_eng *g, sim_rank_state *k, int64_t mb, double d) {
    if (!g->busy_it || mb < 0) return;
    int64_t it = mb / g->s->microbatches, n = g->r->iterations;
    if (it < n) g->busy_it[(size_t)(k - g->rk) * (size_t)n + (size_t)it] += d;
}

/* Records that stream k's action at pc ran [start, end]. */
static inline void trace_put(sim_eng *g, const sim_rank_state *k, uint32_t pc, double start, double end) {
    if (g->r->trace) {
        sim_slot *sl = &g->r->trace[k->rank][k->orig ? k->orig[pc] : pc];
        sl->start_s = start;
        sl->end_s = end;
        sl->mem_bytes = k->mem;
    }
}

/* Notes the end of an action of iteration it. */
static inline void iter_note(sim_eng *g, int it, double t) {
    if (it >= g->r->iterations) it = g->r->iterations - 1;
    if (it >= 0 && t > g->r->iter_end_s[it]) g->r->iter_end_s[it] = t;
}

/* Passes stream k's current action, which takes no time: traced as [now, now]. */
static inline void pass_action(sim_eng *g, sim_rank_state *k, double now) {
    trace_put(g, k, k->pc, now, now);
    k->pc++;
}

/* Passes a STEP that costs nothing: it also ends the stream's iteration at now. */
static inline void pass_step(sim_eng *g, sim_rank_state *k, double now) {
    trace_put(g, k, k->pc, now, now);
    iter_note(g, k->cur_iter, now);
    k->pc++;
}

/* Ends stream k's compute of (kind, stage, mb) that ran [start, end] (a: the whole action, read
 * for an OVERLAP), and passes it: returns the microbatch of the newest iteration it touched
 * (-1 for a STEP), whose outputs the caller publishes. */
static inline int compute_finish(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb, const sched_action *a,
                                 double start, double end) {
    int it = -1;
    if (kind == SCHED_B || kind == SCHED_I || kind == SCHED_W) {
        mem_end(g, k, kind, stage, mb);
        it = mb;
    } else if (kind == SCHED_OVERLAP) {
        mem_end(g, k, a->kind2, a->stage2, a->mb2);
        it = a->mb > a->mb2 ? a->mb : a->mb2;
    } else if (kind == SCHED_F) {
        it = mb;
    }
    trace_put(g, k, k->pc, start, end);
    k->pc++;
    return it;
}

/* Moves stream k on after a compute that ended at end and touched microbatch it (-1: none):
 * its iteration, its last end, the iteration's end. */
static inline void compute_after(sim_eng *g, sim_rank_state *k, int it, double end) {
    if (it >= 0) k->cur_iter = g->r->iterations == 1 ? 0 : (int)(it / g->s->microbatches); /* no division per compute */
    k->last_end = end;
    iter_note(g, k->cur_iter, end);
}

/* Starts a transfer of d seconds on link l at now, or when the link is free (FIFO); counts it
 * on stream k. Returns its end; *start gets its start. */
static inline double link_send(sim_eng *g, sim_rank_state *k, int l, double d, double now, double *start) {
    double st = now > g->link_free[l] ? now : g->link_free[l];
    double end = st + d;
    g->link_free[l] = end;
    k->st.comm_s += d;
    g->r->comm_s += d;
    *start = st;
    return end;
}

/* Starts the all-reduce of (unreplicated) stage st_ on stream k at now: at once under blocking
 * comm, else when k's collective stream is free. Returns its end; *start gets its start. */
static inline double reduce_begin(sim_eng *g, sim_rank_state *k, int st_, double now, double *start) {
    double d = g->st[st_].reduce_s;
    double st = g->cfg->blocking_comm ? now : (now > k->coll_free ? now : k->coll_free);
    double end = st + d;
    k->coll_free = end;
    k->st.reduce_s += d;
    g->st[st_].rg_issued++;
    g->st[st_].reduce_end = end;
    *start = st;
    return end;
}

/* Returns the optimizer step time of stage st_ (0 for a stage outside the schedule, or a
 * negative or undefined time). */
static inline double step_time(sim_eng *g, int st_) {
    double d = stage_ok(g, st_) ? g->c->step_s(g->c->ctx, st_) : 0;
    return d >= 0 ? d : 0;
}

/* ---------------------------------------------------------------- where the engines differ */

/* Heap engine (sim_heap.c): publishes tm for (t, idx) and runs the streams waiting for it. */
void sim_heap_publish(sim_eng *g, int t, int64_t idx, double tm);
/* Heap engine: runs stream r from its pc at the current time; 0, or -1 when out of memory. */
int sim_heap_advance(sim_eng *g, int r);
/* Heap engine: REDUCE_GRAD a of a replicated stage on stream r joins its collective. */
int sim_heap_reduce_join(sim_eng *g, int r, sim_rank_state *k, const sched_action *a);

/* Flow engine: publishes tm for (t, idx; a cell of stage) and puts the streams (of stage - 1 ..
 * stage + 1) waiting for it on the work stack. A cell written twice aborts the flow run. */
static inline void flow_publish(sim_eng *g, int t, int stage, int64_t idx, double tm) {
    if (t >= g->ntab) return; /* left out of compact cells: nothing reads it (sim_int.h) */
    uint64_t *cl = sim_cell_at(g, t, idx);
    /* compact cells: the actions were checked, each is written once (and the store then
     * does not wait for the cold line) */
    if (g->ntab == SIM_T_N && *cl) g->abort_flow = 1;
    *cl = sim_cell_enc(tm);
    int64_t key = cell_key(g, t, idx);
    const sched *s = g->s;
    for (int d = -1; d <= 1; d++) {
        int q = stage + d;
        if (q < 0 || q >= s->stages) continue;
        int rr = s->stage_rank[q];
        if (g->blocked[rr] == key) {
            g->blocked[rr] = -1;
            if (!g->queued[rr]) {
                g->queued[rr] = 1;
                g->work[g->nwork++] = rr;
                /* its next action: the stack pops it soon, after this rank blocks */
                const sim_rank_state *kr = &g->rk[rr];
                if (kr->fa) __builtin_prefetch(&kr->fa[kr->pc]);
                else __builtin_prefetch(&kr->acts[kr->pc]);
            }
        }
    }
}

/* Publishes tm, the time a compute of stage finished, for (t, idx). */
SIM_RULE void rule_publish(sim_eng *g, const int flow, int t, int stage, int64_t idx, double tm) {
    if (flow) flow_publish(g, t, stage, idx, tm);
    else sim_heap_publish(g, t, idx, tm);
}

/* An end at time t that nothing waits for by key (payload p in the heap engine). The heap
 * engine pushes its event; the flow engine only counts it. Returns 0, or -1 when out of memory. */
SIM_RULE int rule_end_at(sim_eng *g, const int flow, double t, uint64_t p) {
    if (flow) {
        g->flow_events++;
        return 0;
    }
    return sim_ev_push(g, t, p);
}

/* The arrival at time tm of a transfer into (t, idx), a cell of stage. Returns 0, or -1 when out
 * of memory. */
SIM_RULE int rule_arrive(sim_eng *g, const int flow, int t, int stage, int64_t idx, double tm) {
    if (!flow) return sim_ev_push(g, tm, sim_ev_pack_arrive(t, idx));
    g->flow_events++;
    flow_publish(g, t, stage, idx, tm);
    return 0;
}

/* Stream k waits for something that ends at time tm under wait key key: the heap engine stops
 * the stream until its event (WALK_STOP); the flow engine, which already knows tm, moves the
 * clock there (WALK_NEXT). */
SIM_RULE int rule_wait(sim_eng *g, const int flow, sim_rank_state *k, int64_t key, double tm, double *now) {
    if (!flow) {
        g->blocked[k->id] = key;
        return WALK_STOP;
    }
    if (tm > *now) *now = tm;
    return WALK_NEXT;
}

/* Returns 1 while some all-reduce of a stage (its state me) has not ended at *now: the heap
 * engine counts their end events; the flow engine, which ran them inline, compares the latest
 * end with its clock. */
static inline int rule_reduces_pending(const int flow, const sim_stage_state *me, double now) {
    return flow ? me->rg_issued > 0 && me->reduce_end > now : me->rg_done < me->rg_issued;
}

/* ---------------------------------------------------------------- the rules */

/* Ends stream k's compute (kind, stage, mb; a: the whole action, read for an OVERLAP) that ran
 * [start, end]: its memory, its trace, its outputs published, the stream moved on. */
SIM_RULE void rule_compute_end(sim_eng *g, const int flow, sim_rank_state *k, int kind, int stage, int mb,
                                    const sched_action *a, double start, double end) {
    int it = compute_finish(g, k, kind, stage, mb, a, start, end);
    if (kind == SCHED_F || kind == SCHED_OVERLAP) rule_publish(g, flow, SIM_T_FDONE, stage, entry(g, stage, mb), end);
    if (kind == SCHED_B || kind == SCHED_I) rule_publish(g, flow, SIM_T_IDONE, stage, entry(g, stage, mb), end);
    if (kind == SCHED_OVERLAP) rule_publish(g, flow, SIM_T_IDONE, a->stage2, entry(g, a->stage2, a->mb2), end);
    compute_after(g, k, it, end);
}

/* Runs stream k's compute (kind, stage, mb; a: the whole action, read for an OVERLAP) or STEP
 * for d seconds from *now on the compute stream: the heap engine pushes its end, for which the
 * stream waits (WALK_STOP); the flow engine finishes it inline and moves the clock to its end
 * (WALK_NEXT). Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
SIM_RULE int rule_run(sim_eng *g, const int flow, int r, sim_rank_state *k, int kind, int stage, int mb,
                      const sched_action *a, double d, double *now) {
    double end = *now + d;
    if (!flow) {
        k->start_cur = *now;
        return sim_ev_push(g, end, sim_ev_pack(SIM_EV_COMPUTE_END, (uint32_t)r, k->pc)) ? WALK_FAIL : WALK_STOP;
    }
    g->flow_events++;
    rule_compute_end(g, flow, k, kind, stage, mb, a, *now, end);
    *now = end;
    return WALK_NEXT;
}

/* Prefetches the cells this rank and its neighbours touch a few microbatches on: a row of the
 * cells is walked in microbatch order, too many rows at once for the hardware. */
static inline void flow_prefetch(const sim_eng *g, int kind, int stage, int mb) {
    int64_t pi = (int64_t)stage * g->M + mb + FLOW_PREFETCH_MBS, pj = kind == SCHED_F ? pi + g->M : pi - g->M;
    if (pi >= 0 && pi < g->n_entries) __builtin_prefetch(sim_cell_at(g, 0, pi));
    if (pj >= 0 && pj < g->n_entries) __builtin_prefetch(sim_cell_at(g, 0, pj));
}

/* Returns 1 when stream k's forward (or overlap) of stage must wait for a deferred optimizer
 * step of the stage: weight stashing updates the weights that forward reads. */
static inline int step_blocks(sim_eng *g, const sim_rank_state *k, int kind, int stage) {
    return g->s->weights == SCHED_WEIGHTS_STASH && (kind == SCHED_F || kind == SCHED_OVERLAP) && stage_ok(g, stage) &&
           sim_sst(g, stage, k->replica)->step_pending > 0;
}

/* F, B, I, W or OVERLAP (kind, stage, mb; a: the whole action, read for an OVERLAP) on stream r:
 * starts once its data is there (and no deferred step holds its stage); its end is an event
 * (WALK_STOP: the stream waits for it) or, in the flow engine, finished inline. Returns
 * WALK_NEXT, WALK_STOP or WALK_FAIL. */
SIM_RULE int rule_compute(sim_eng *g, const int flow, int r, sim_rank_state *k, int kind, int stage, int mb,
                               const sched_action *a, double *now) {
    double lt = *now;
    if (step_blocks(g, k, kind, stage)) {
        g->blocked[k->id] = KEY_STEP(g, stage);
        return WALK_STOP;
    }
    if (!compute_ready(g, k, kind, stage, mb, a, &lt)) return WALK_STOP;
    *now = lt;
    if (flow) flow_prefetch(g, kind, stage, mb);
    double d = compute_begin(g, k, kind, stage, mb, a);
    busy_start(k, *now, d);
    busy_late(g, k, kind == SCHED_OVERLAP && a->mb2 > mb ? a->mb2 : mb, d);
    return rule_run(g, flow, r, k, kind, stage, mb, a, d, now);
}

/* Returns the link of a transfer of microbatch mb over boundary b (forward when fwd), and its
 * time in *d: the boundary's, or at a replicated boundary that of the link of the
 * microbatch's replica pair. */
static inline int send_link(const sim_eng *g, int b, int fwd, int mb, double *d) {
    const sim_stage_state *x = &g->st[b];
    int l = fwd ? x->link_f : x->link_b;
    if (x->npair > 0) {
        l += mb % x->npair;
        *d = g->link_xfer[l];
    } else {
        *d = fwd ? x->xfer_f_s : x->xfer_b_s;
    }
    return l;
}

/* Holds stream k (heap engine) for h > 0 seconds from *now: the executor's own time in a
 * hand-off (sim_eng.hold), after which the stream walks on from its pc. Returns WALK_STOP or
 * WALK_FAIL. */
static inline int rule_hold(sim_eng *g, sim_rank_state *k, double h, double *now) {
    g->blocked[k->id] = KEY_HOLD(g);
    return sim_ev_push(g, *now + h, sim_ev_pack(SIM_EV_HOLD_END, (uint32_t)k->id, 0)) ? WALK_FAIL : WALK_STOP;
}

/* SEND_F or SEND_B (kind, stage, mb) on stream k: once its data is there, a transfer on the
 * link (FIFO) whose arrival is an event; blocking comm waits for it, unless the send is
 * asynchronous (its copy on a stream of its own). The sender's own time in the hand-off
 * (sim_eng.hold; part of the transfer's) then holds the stream, unless it waits for the
 * arrival anyway. Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
SIM_RULE int rule_send(sim_eng *g, const int flow, sim_rank_state *k, int kind, int stage, int mb, double *now) {
    int fwd = kind == SCHED_SEND_F;
    double lt = *now;
    if (!need(g, k, fwd ? SIM_T_FDONE : SIM_T_IDONE, entry(g, stage, mb), &lt)) return WALK_STOP;
    *now = lt;
    int b = fwd ? stage : stage - 1; /* boundary b -> b+1 */
    if (b < 0 || b + 1 >= g->s->stages) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    double d, st;
    int l = send_link(g, b, fwd, mb, &d);
    double end = link_send(g, k, l, d, *now, &st);
    int t = fwd ? SIM_T_ARRF : SIM_T_ARRB, dst_stage = fwd ? stage + 1 : stage - 1;
    int64_t dst = entry(g, dst_stage, mb);
    if (dst < 0) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    if (rule_arrive(g, flow, t, dst_stage, dst, end)) return WALK_FAIL;
    trace_put(g, k, k->pc, st, end);
    k->pc++;
    if (g->cfg->blocking_comm && !g->cfg->async_send) return rule_wait(g, flow, k, cell_key(g, t, dst), end, now);
    double h = !flow && g->hold ? g->hold[(size_t)b * SIM_HOLDS + (fwd ? SIM_HOLD_SEND_F : SIM_HOLD_SEND_B)] : 0;
    return h > 0 ? rule_hold(g, k, h, now) : WALK_NEXT;
}

/* Returns 1 when stream k's current action has a time in the trace (or there is no trace). */
static inline int traced(const sim_eng *g, const sim_rank_state *k) {
    return !g->r->trace || g->r->trace[k->rank][k->orig ? k->orig[k->pc] : k->pc].start_s >= 0;
}

/* The receiver's own time posting the RECV of (t, idx; a cell of stage) at *now (sim_eng.hold):
 * with the copy out when its message already arrived. 0 at a boundary without one. */
static inline double post_hold(const sim_eng *g, int t, int stage, int64_t idx, double now) {
    int fwd = t == SIM_T_ARRF, b = fwd ? stage - 1 : stage; /* the boundary b -> b+1 it crosses */
    if (b < 0 || b + 1 >= g->s->stages) return 0;
    double v = t < g->ntab ? sim_cell_time(*sim_cell_at(g, t, idx)) : -1;
    int late = v >= 0 && v <= now;
    return g->hold[(size_t)b * SIM_HOLDS + (fwd ? SIM_HOLD_POST_F : SIM_HOLD_POST_B) + late];
}

/* RECV_F or RECV_B (kind, stage, mb) on stream k: posts (the consumer waits for the data),
 * the post holding the stream for the receiver's own time in the hand-off (sim_eng.hold, heap
 * engine: once, k->held); blocking comm then waits here for the arrival. Traced from its first
 * visit. Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
SIM_RULE int rule_recv(sim_eng *g, const int flow, sim_rank_state *k, int kind, int stage, int mb, double *now) {
    int t = kind == SCHED_RECV_F ? SIM_T_ARRF : SIM_T_ARRB;
    int64_t idx = entry(g, stage, mb);
    if (idx < 0) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    double h = !flow && g->hold && !k->held ? post_hold(g, t, stage, idx, *now) : 0;
    if (!traced(g, k)) trace_put(g, k, k->pc, *now, *now + h);
    if (h > 0) {
        k->held = 1;
        return rule_hold(g, k, h, now);
    }
    if (g->cfg->blocking_comm) {
        double lt = *now;
        if (!need(g, k, t, idx, &lt)) return WALK_STOP;
        *now = lt;
    }
    k->held = 0;
    k->pc++;
    return WALK_NEXT;
}

/* REDUCE_GRAD a (of stage) on stream r: a replicated stage's joins its collective (heap engine
 * only); else the all-reduce runs on the collective stream; blocking comm waits for it.
 * Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
SIM_RULE int rule_reduce(sim_eng *g, const int flow, int r, sim_rank_state *k, int stage, const sched_action *a,
                              double *now) {
    if (!stage_ok(g, stage)) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    if (!flow && g->st[stage].rep > 1) return sim_heap_reduce_join(g, r, k, a);
    double st, end = reduce_begin(g, k, stage, *now, &st);
    if (rule_end_at(g, flow, end, sim_ev_pack(SIM_EV_REDUCE_END, 0, (uint32_t)stage))) return WALK_FAIL;
    trace_put(g, k, k->pc, st, end);
    k->pc++;
    return g->cfg->blocking_comm ? rule_wait(g, flow, k, KEY_RG(g, stage), end, now) : WALK_NEXT;
}

/* STEP of a stage (its state me) whose all-reduces have not all ended, under stash or 2bw with
 * overlapped comm: the update is deferred beside the compute stream, from the all-reduce's end
 * (its time on the collective stream), its end an event; stash forwards of the stage wait for
 * it, 2bw forwards use the other buffer. A replicated stage first waits for its collective to
 * start (its end is known then). Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
static inline int rule_step_deferred(sim_eng *g, sim_rank_state *k, int stage, sim_stage_state *me, double d,
                                     double now) {
    if (g->st[stage].rep > 1 && me->rg_started < me->rg_issued) {
        g->blocked[k->id] = KEY_RG_START(g, stage);
        return WALK_STOP;
    }
    mem_step(g, k, stage);
    double end = (me->reduce_end > now ? me->reduce_end : now) + d;
    if (end > k->coll_free) k->coll_free = end;
    me->step_pending++;
    if (sim_ev_push(g, end, sim_ev_pack(SIM_EV_STEP_END, (uint32_t)k->replica, (uint32_t)stage))) return WALK_FAIL;
    trace_put(g, k, k->pc, now, end);
    iter_note(g, k->cur_iter, end);
    k->pc++;
    return WALK_NEXT;
}

/* STEP (stage, mb) on stream r: after the stage's all-reduces (deferred under stash and 2bw
 * with overlapped comm, see rule_step_deferred; the flow engine serves flush only), the update
 * runs on the compute stream, its end an event; a free one passes. Returns WALK_NEXT,
 * WALK_STOP or WALK_FAIL. */
SIM_RULE int rule_step(sim_eng *g, const int flow, int r, sim_rank_state *k, int stage, int mb, double *now) {
    double d = step_time(g, stage) * act_scale(g, k);
    sim_stage_state *me = stage_ok(g, stage) ? sim_sst(g, stage, k->replica) : NULL;
    if (me && rule_reduces_pending(flow, me, *now)) {
        if (!flow && !g->cfg->blocking_comm && g->s->weights != SCHED_WEIGHTS_FLUSH)
            return rule_step_deferred(g, k, stage, me, d, *now);
        if (rule_wait(g, flow, k, KEY_RG(g, stage), me->reduce_end, now) == WALK_STOP) return WALK_STOP;
    }
    if (stage_ok(g, stage)) mem_step(g, k, stage);
    if (!(d > 0)) {
        pass_step(g, k, *now);
        return WALK_NEXT;
    }
    busy_start(k, *now, d);
    if (k->cur_iter >= 0) busy_late(g, k, (int64_t)k->cur_iter * g->s->microbatches, d);
    return rule_run(g, flow, r, k, SCHED_STEP, stage, mb, NULL, d, now);
}

/* Walks stream r's action (kind, stage, mb; a: the whole action, read for OVERLAP and a
 * replicated REDUCE_GRAD) on its clock *now. Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
SIM_RULE int rule_walk(sim_eng *g, const int flow, int r, sim_rank_state *k, int kind, int stage, int mb,
                            const sched_action *a, double *now) {
    switch (kind) {
    case SCHED_F:
    case SCHED_B:
    case SCHED_I:
    case SCHED_W:
    case SCHED_OVERLAP: return rule_compute(g, flow, r, k, kind, stage, mb, a, now);
    case SCHED_SEND_F:
    case SCHED_SEND_B: return rule_send(g, flow, k, kind, stage, mb, now);
    case SCHED_RECV_F:
    case SCHED_RECV_B: return rule_recv(g, flow, k, kind, stage, mb, now);
    case SCHED_REDUCE_GRAD: return rule_reduce(g, flow, r, k, stage, a, now);
    case SCHED_STEP: return rule_step(g, flow, r, k, stage, mb, now);
    default: pass_action(g, k, *now); return WALK_NEXT;
    }
}

#endif
