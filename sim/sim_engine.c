/* sim_engine.c: the discrete-event engine: events in time order (sim_queue.c) drive per-rank
 * compute streams, FIFO links and all-reduces over a lowered schedule; and the flow engine,
 * which gives the same results without events where the order cannot matter.
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
 * - Events are processed in time order, so link FIFO order equals issue order.
 * - Replicated stages (sim_config.replicas, PipeDream's 1F1B-RR; see sim.h and
 *   sim_replicas.c): a rank whose stages have n > 1 replicas runs n streams, each an engine
 *   "rank" (sim_rank_state) walking the subsequence of the rank's list that belongs to its
 *   replica (microbatch k on replica k mod n; REDUCE_GRAD/STEP without a microbatch on every
 *   replica). Per-replica counters (stash, versions, all-reduces, deferred steps) live in
 *   eng.rst; an all-reduce is a collective of its round's replicas (sim_rstage). Transfers of
 *   a replicated boundary use one link per replica pair and direction (sim_links.c). Only the
 *   heap engine serves replicated runs.
 * Per-action state: 4 doubles per (stage, microbatch), the trace when asked, and for the flow
 * engine an 8-byte copy of each action (sim_flow_act, one contiguous stream). */
#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdlib.h>

#include "sim_queue_int.h"

/* Actions the flow engine walks between two moves of the progress bar, and events the heap
 * engine processes between two (powers of two: the test is a mask). */
#define SIM_FLOW_PROGRESS_STEPS 4096u
#define SIM_HEAP_PROGRESS_EVENTS 65536u
/* Microbatches ahead of the current one whose cells the flow engine prefetches. */
#define FLOW_PREFETCH_MBS 4
/* Events the heap engine prefetches for: the root and its children. */
#define HEAP_PREFETCH_EVENTS 5
/* Actions after a compute end whose cells the heap engine prefetches. */
#define HEAP_PREFETCH_ACTIONS 3
/* Stuck ranks named in a deadlock message (the rest are counted). */
#define STUCK_NAMED 4

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
    double v = sim_cell_time(g->cells[idx].u[t]);
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
static double compute_time(sim_eng *g, int stage, int kind, int mb) {
    double t = g->c->compute_s(g->c->ctx, stage, (sched_kind)kind, mb);
    if (g->s->recompute == SCHED_RECOMPUTE_FULL && (kind == SCHED_B || kind == SCHED_I))
        t += g->c->compute_s(g->c->ctx, stage, SCHED_F, mb);
    if (!(t >= 0)) {
        g->err = PL_EINPUT;
        return 0;
    }
    if (g->rng) t *= gsl_ran_lognormal(g->rng, g->ln_mu, g->ln_sigma);
    return t;
}

/* Changes a stage's stash count by d on rank k and adjusts weight-version memory. */
static void stash_change(sim_eng *g, sim_rank_state *k, int stage, int d) {
    sim_stage_state *ss = sim_sst(g, stage, k->replica);
    int old = ss->inflight;
    int nw = old + d;
    ss->inflight = nw;
    k->inflight += d;
    int dv = sim_versions_of(g, nw) - sim_versions_of(g, old);
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

/* Memory effects at the start of a compute half (kind on stage) on rank k: cost_mem_delta's. */
static void mem_start(sim_eng *g, sim_rank_state *k, int kind, int stage) {
    const sim_stage_state *ss = &g->st[stage];
    cost_mem_sizes z = {ss->stash_b, ss->wstash_b, ss->input_b}; /* capped in sim_memory.c */
    if (kind == SCHED_F) stash_change(g, k, stage, +1);
    sim_mem_add(g, k, cost_mem_delta(&z, (sched_kind)kind, 0, g->s->recompute == SCHED_RECOMPUTE_FULL));
}

/* Memory effects at the end of a compute half: cost_mem_delta's. */
static void mem_end(sim_eng *g, sim_rank_state *k, int kind, int stage) {
    const sim_stage_state *ss = &g->st[stage];
    cost_mem_sizes z = {ss->stash_b, ss->wstash_b, ss->input_b};
    sim_mem_add(g, k, cost_mem_delta(&z, (sched_kind)kind, 1, g->s->recompute == SCHED_RECOMPUTE_FULL));
    if (kind == SCHED_B || kind == SCHED_W) stash_change(g, k, stage, -1);
}

/* Returns the duration of compute (kind, stage, mb; a: the whole action, read for an
 * OVERLAP's backward half) on stream k, and applies its memory at the start. */
static inline double compute_begin(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb, const sched_action *a) {
    double d;
    if (kind == SCHED_OVERLAP) {
        d = compute_time(g, stage, SCHED_F, mb) + compute_time(g, a->stage2, a->kind2, a->mb2);
        mem_start(g, k, SCHED_F, stage);
        mem_start(g, k, a->kind2, a->stage2);
    } else {
        d = compute_time(g, stage, kind, mb);
        mem_start(g, k, kind, stage);
    }
    note_peaks(k);
    return d;
}

/* Notes that stream k starts d seconds of compute at now: its first start, its busy time. */
static inline void busy_start(sim_rank_state *k, double now, double d) {
    if (!k->started) {
        k->started = 1;
        k->st.first_start_s = now;
    }
    k->st.busy_s += d;
}

/* Counts d seconds of compute of global microbatch mb towards the steady-state window when mb
 * belongs to iteration 1 or later (see sim.h: the window of asynchronous schedules). */
static inline void busy_late(sim_eng *g, sim_rank_state *k, int64_t mb, double d) {
    if (mb >= g->s->microbatches) k->busy_late_s += d;
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
        mem_end(g, k, kind, stage);
        it = mb;
    } else if (kind == SCHED_OVERLAP) {
        mem_end(g, k, a->kind2, a->stage2);
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
    if (it >= 0) k->cur_iter = (int)(it / g->s->microbatches);
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

/* ---------------------------------------------------------------- heap engine */

static int advance(sim_eng *g, int r);

/* REDUCE_GRAD a of a replicated stage on stream r: joins its round's collective, which starts
 * once all its replicas joined, at the latest of their ready times (now, or when their
 * collective stream is free) and the stage's previous collective end; it then ends after the
 * stage's all-reduce time on every member, and the members waiting for its start go on.
 * Returns WALK_NEXT (the stream goes on), WALK_STOP (it waits: blocking comm) or WALK_FAIL
 * (out of memory). */
static int reduce_join(sim_eng *g, int r, sim_rank_state *k, const sched_action *a) {
    int st_ = a->stage;
    sim_stage_state *base = &g->st[st_], *me = sim_sst(g, st_, k->replica);
    sim_rstage *rs = &g->rs[st_];
    int64_t ri = a->mb >= 0 ? a->mb / base->rep : rs->neg0 + me->rg_neg++;
    if (ri < 0 || ri >= rs->nrd || rs->rd[ri].expected < 1) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    sim_round *rd = &rs->rd[ri];
    const int blocking = g->cfg->blocking_comm;
    double now = g->now;
    double ready = blocking ? now : (now > k->coll_free ? now : k->coll_free);
    if (rd->arrived == 0 || ready > rd->ready) rd->ready = ready;
    rd->arrived++;
    me->rg_issued++;
    trace_put(g, k, k->pc, now, now); /* the collective's times are filled in after the run */
    k->pc++;
    if (rd->arrived == rd->expected) {
        double d = base->reduce_s;
        double start = rd->ready > rs->last_end ? rd->ready : rs->last_end;
        double end = start + d;
        rd->start = start;
        rd->end = end;
        rs->last_end = end;
        g->rk[base->stream0].st.reduce_s += d; /* once per collective */
        int cnt = a->mb >= 0 ? rd->expected : base->rep;
        for (int j = 0; j < cnt; j++) {
            sim_stage_state *m = sim_sst(g, st_, j);
            m->rg_started++;
            m->reduce_end = end;
            sim_rank_state *kj = &g->rk[base->stream0 + j];
            if (end > kj->coll_free) kj->coll_free = end;
        }
        if (sim_ev_push(g, end, sim_ev_pack(SIM_EV_REDUCE_END, (uint32_t)cnt, (uint32_t)st_))) return WALK_FAIL;
        int64_t key = KEY_RG_START(g, st_);
        for (int j = 0; j < cnt; j++) {
            int q = base->stream0 + j;
            if (q != r && g->blocked[q] == key && advance(g, q)) return WALK_FAIL;
        }
    }
    if (blocking) {
        g->blocked[k->id] = KEY_RG(g, st_);
        return WALK_STOP;
    }
    return WALK_NEXT;
}

/* Returns 1 when stream k's forward (or overlap) a must wait for a deferred optimizer step of
 * its stage: weight stashing updates the weights that forward reads. */
static inline int step_blocks(sim_eng *g, const sim_rank_state *k, const sched_action *a) {
    return g->s->weights == SCHED_WEIGHTS_STASH && (a->kind == SCHED_F || a->kind == SCHED_OVERLAP) &&
           stage_ok(g, a->stage) && sim_sst(g, a->stage, k->replica)->step_pending > 0;
}

/* F, B, I, W or OVERLAP a on stream r at now: starts when its data is there (and no deferred
 * step holds its stage), its end an event. Returns WALK_STOP or WALK_FAIL. */
static inline int walk_compute(sim_eng *g, int r, sim_rank_state *k, const sched_action *a) {
    double lt = 0, now = g->now;
    if (step_blocks(g, k, a)) {
        g->blocked[k->id] = KEY_STEP(g, a->stage);
        return WALK_STOP;
    }
    if (!compute_ready(g, k, a->kind, a->stage, a->mb, a, &lt)) return WALK_STOP;
    double d = compute_begin(g, k, a->kind, a->stage, a->mb, a);
    busy_start(k, now, d);
    k->start_cur = now;
    busy_late(g, k, a->kind == SCHED_OVERLAP && a->mb2 > a->mb ? a->mb2 : a->mb, d);
    return sim_ev_push(g, now + d, sim_ev_pack(SIM_EV_COMPUTE_END, (uint32_t)r, k->pc)) ? WALK_FAIL : WALK_STOP;
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

/* SEND_F or SEND_B a on stream k at now: once its data is there, a transfer on the link
 * (FIFO) whose arrival is an event; blocking comm waits for it. Returns WALK_NEXT, WALK_STOP
 * or WALK_FAIL. */
static inline int walk_send(sim_eng *g, sim_rank_state *k, const sched_action *a) {
    int fwd = a->kind == SCHED_SEND_F;
    double lt = 0, now = g->now;
    if (!need(g, k, fwd ? SIM_T_FDONE : SIM_T_IDONE, entry(g, a->stage, a->mb), &lt)) return WALK_STOP;
    int b = fwd ? a->stage : a->stage - 1; /* boundary b -> b+1 */
    if (b < 0 || b + 1 >= g->s->stages) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    double d, st;
    int l = send_link(g, b, fwd, a->mb, &d);
    double end = link_send(g, k, l, d, now, &st);
    int t = fwd ? SIM_T_ARRF : SIM_T_ARRB;
    int64_t dst = entry(g, fwd ? a->stage + 1 : a->stage - 1, a->mb);
    if (dst < 0) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    if (sim_ev_push(g, end, sim_ev_pack_arrive(t, dst))) return WALK_FAIL;
    trace_put(g, k, k->pc, st, end);
    k->pc++;
    if (g->cfg->blocking_comm) {
        g->blocked[k->id] = cell_key(g, t, dst);
        return WALK_STOP;
    }
    return WALK_NEXT;
}

/* RECV_F or RECV_B a on stream k at now: posts (the consumer waits for the data); blocking
 * comm waits here for the arrival. Traced from its first visit. Returns WALK_NEXT or
 * WALK_STOP. */
static inline int walk_recv(sim_eng *g, sim_rank_state *k, const sched_action *a) {
    int t = a->kind == SCHED_RECV_F ? SIM_T_ARRF : SIM_T_ARRB;
    double now = g->now;
    int64_t idx = entry(g, a->stage, a->mb);
    if (idx < 0) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    const sim_slot *sl = g->r->trace ? &g->r->trace[k->rank][k->orig ? k->orig[k->pc] : k->pc] : NULL;
    if (g->cfg->blocking_comm && !g->cells[idx].u[t]) {
        if (sl && sl->start_s < 0) trace_put(g, k, k->pc, now, now);
        g->blocked[k->id] = cell_key(g, t, idx);
        return WALK_STOP;
    }
    if (!sl || sl->start_s < 0) trace_put(g, k, k->pc, now, now);
    k->pc++;
    return WALK_NEXT;
}

/* REDUCE_GRAD a on stream r at now: a replicated stage's joins its collective (reduce_join);
 * else the all-reduce runs on the collective stream, its end an event; blocking comm waits for
 * it. Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
static inline int walk_reduce(sim_eng *g, int r, sim_rank_state *k, const sched_action *a) {
    int st_ = a->stage;
    if (!stage_ok(g, st_)) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    if (g->st[st_].rep > 1) return reduce_join(g, r, k, a);
    double st, end = reduce_begin(g, k, st_, g->now, &st);
    if (sim_ev_push(g, end, sim_ev_pack(SIM_EV_REDUCE_END, 0, (uint32_t)st_))) return WALK_FAIL;
    trace_put(g, k, k->pc, st, end);
    k->pc++;
    if (g->cfg->blocking_comm) {
        g->blocked[k->id] = KEY_RG(g, st_);
        return WALK_STOP;
    }
    return WALK_NEXT;
}

/* STEP of stage st_ (its state me) on stream k at now, before the stage's all-reduces ended:
 * stash and 2bw under overlapped comm defer the update beside the compute stream, from the
 * all-reduce's end (its time on the collective stream), its end an event; stash forwards of
 * the stage wait for it, 2bw forwards use the other buffer. A replicated stage first waits for
 * its collective to start (its end is known then). Flush, and blocking comm, wait for the
 * all-reduce. Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
static int walk_step_deferred(sim_eng *g, sim_rank_state *k, int st_, sim_stage_state *me, double d) {
    double now = g->now;
    if (g->cfg->blocking_comm || g->s->weights == SCHED_WEIGHTS_FLUSH) {
        g->blocked[k->id] = KEY_RG(g, st_);
        return WALK_STOP;
    }
    if (g->st[st_].rep > 1 && me->rg_started < me->rg_issued) {
        g->blocked[k->id] = KEY_RG_START(g, st_);
        return WALK_STOP;
    }
    double end = (me->reduce_end > now ? me->reduce_end : now) + d;
    if (end > k->coll_free) k->coll_free = end;
    me->step_pending++;
    if (sim_ev_push(g, end, sim_ev_pack(SIM_EV_STEP_END, (uint32_t)k->replica, (uint32_t)st_))) return WALK_FAIL;
    trace_put(g, k, k->pc, now, end);
    iter_note(g, k->cur_iter, end);
    k->pc++;
    return WALK_NEXT;
}

/* STEP a on stream r at now: after the stage's all-reduces (walk_step_deferred when they have
 * not all ended), the update runs on the compute stream, its end an event; a free one passes.
 * Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
static inline int walk_step(sim_eng *g, int r, sim_rank_state *k, const sched_action *a) {
    int st_ = a->stage;
    double now = g->now, d = step_time(g, st_);
    sim_stage_state *me = stage_ok(g, st_) ? sim_sst(g, st_, k->replica) : NULL;
    if (me && me->rg_done < me->rg_issued) return walk_step_deferred(g, k, st_, me, d);
    if (d > 0) {
        busy_start(k, now, d);
        k->start_cur = now;
        if (k->cur_iter >= 1) k->busy_late_s += d;
        return sim_ev_push(g, now + d, sim_ev_pack(SIM_EV_COMPUTE_END, (uint32_t)r, k->pc)) ? WALK_FAIL : WALK_STOP;
    }
    pass_step(g, k, now);
    return WALK_NEXT;
}

/* Walks stream r's action a at the current time. Returns WALK_NEXT, WALK_STOP or WALK_FAIL. */
static inline int walk(sim_eng *g, int r, sim_rank_state *k, const sched_action *a) {
    switch (a->kind) {
    case SCHED_F:
    case SCHED_B:
    case SCHED_I:
    case SCHED_W:
    case SCHED_OVERLAP: return walk_compute(g, r, k, a);
    case SCHED_SEND_F:
    case SCHED_SEND_B: return walk_send(g, k, a);
    case SCHED_RECV_F:
    case SCHED_RECV_B: return walk_recv(g, k, a);
    case SCHED_REDUCE_GRAD: return walk_reduce(g, r, k, a);
    case SCHED_STEP: return walk_step(g, r, k, a);
    default: pass_action(g, k, g->now); return WALK_NEXT;
    }
}

/* Runs rank r from its pc at the current time as far as it can; schedules its events. Returns
 * 0, or -1 on an allocation failure. */
static int advance(sim_eng *g, int r) {
    sim_rank_state *k = &g->rk[r];
    g->blocked[k->id] = -1;
    while (k->pc < k->n) {
        int w = walk(g, r, k, &k->acts[k->pc]);
        if (w != WALK_NEXT) return w == WALK_FAIL ? -1 : 0;
    }
    return 0;
}

/* Publishes time tm for (t, idx) and wakes a rank waiting for it (ranks of stage-1..stage+1). */
static void publish(sim_eng *g, int t, int64_t idx, double tm) {
    g->cells[idx].u[t] = sim_cell_enc(tm);
    int64_t key = cell_key(g, t, idx);
    int stage = (int)(idx / g->M);
    int64_t mb = idx - (int64_t)stage * g->M;
    const sched *s = g->s;
    for (int d = -1; d <= 1; d++) {
        int q = stage + d;
        if (q < 0 || q >= s->stages) continue;
        int rr = stream_of(g, q, mb);
        if (g->blocked[rr] == key && advance(g, rr)) g->err = PL_ENOMEM;
    }
}

/* Handles the end of rank r's running compute (or STEP): publishes its outputs, moves on.
 * Returns 0, or -1 on an allocation failure. */
static int compute_end(sim_eng *g, int r) {
    sim_rank_state *k = &g->rk[r];
    const sched_action *a = &k->acts[k->pc];
    double now = g->now;
    int it = compute_finish(g, k, a->kind, a->stage, a->mb, a, k->start_cur, now);
    if (a->kind == SCHED_F || a->kind == SCHED_OVERLAP) publish(g, SIM_T_FDONE, entry(g, a->stage, a->mb), now);
    if (a->kind == SCHED_B || a->kind == SCHED_I) publish(g, SIM_T_IDONE, entry(g, a->stage, a->mb), now);
    if (a->kind == SCHED_OVERLAP) publish(g, SIM_T_IDONE, entry(g, a->stage2, a->mb2), now);
    compute_after(g, k, it, now);
    return advance(g, r);
}

/* The end of stream rp's deferred step of stage st: a stash forward waiting for it goes on.
 * Returns 0, or -1 on an allocation failure. */
static int step_end(sim_eng *g, int st, int rp) {
    sim_sst(g, st, rp)->step_pending--;
    int rr = g->st[st].stream0 + rp;
    return g->blocked[rr] == KEY_STEP(g, st) ? advance(g, rr) : 0;
}

/* The end of an all-reduce of stage st (cnt members of a replicated collective; 0: not
 * replicated): the streams waiting for it go on. Returns 0, or -1 on an allocation failure. */
static int reduce_end(sim_eng *g, int st, int cnt) {
    if (cnt == 0) {
        g->st[st].rg_done++;
        int rr = g->st[st].stream0;
        return g->blocked[rr] == KEY_RG(g, st) ? advance(g, rr) : 0;
    }
    for (int j = 0; j < cnt; j++) sim_sst(g, st, j)->rg_done++;
    int fail = 0;
    for (int j = 0; j < cnt && !fail; j++) {
        int rr = g->st[st].stream0 + j;
        if (g->blocked[rr] == KEY_RG(g, st)) fail = advance(g, rr);
    }
    return fail;
}

/* Handles event x at its time (g->now) and wakes the streams waiting for it. Returns 0, or
 * nonzero on an allocation failure. */
static int handle_event(sim_eng *g, const sim_ev *x) {
    uint64_t p = x->payload;
    switch (sim_ev_kind(p)) {
    case SIM_EV_COMPUTE_END: return compute_end(g, (int)sim_ev_hi(p));
    case SIM_EV_ARRIVE: publish(g, sim_ev_table(p), sim_ev_index(p), g->now); return 0;
    case SIM_EV_STEP_END: return step_end(g, (int)sim_ev_lo(p), (int)sim_ev_hi(p));
    default: return reduce_end(g, (int)sim_ev_lo(p), (int)sim_ev_hi(p));
    }
}

/* ---------------------------------------------------------------- flow engine
 *
 * The heap engine processes events in global time order. For most runs that order does not
 * change any result: every time is a max of known times plus a duration, computed along each
 * rank's list in order. The flow engine exploits that: each rank runs "until blocked" on its
 * own clock (cur), data it produces is published at once with its time (an arrival is
 * published by the SEND with its arrival time), and a rank blocked on a missing cell is pushed
 * on a work stack when the cell is published. No heap, no events, and a rank keeps running
 * while its state is in cache.
 *
 * It gives bit-identical results when the order of processing cannot matter; sim_flow_ok
 * checks that before the run, and a cell written twice aborts it (then the heap engine runs):
 * - no stochastic factors (the draws follow the global order of compute starts);
 * - flush weights (stash/2bw defer a STEP depending on whether an all-reduce that ends exactly
 *   now was already processed: a tie the heap breaks by insertion order);
 * - no shared inter-node links (several ranks' FIFO order on one link);
 * - every action's stage lives on the rank that runs it (so each link has one sender, whose
 *   sends are in list order, and every wait is woken by the heap engine as well);
 * - all non-zero transfer times equal (the global sum comm_s is then order-free).
 * A rank blocked in the heap engine at time now and resumed at the time v of a publication
 * continues at v = max(now, v); the flow engine takes the same max when the value is known.
 *
 * Each flow_walk_* step reads the rank's clock at *now and moves it. */

/* Publishes tm for (t, idx) and pushes the ranks (of stage - 1 .. stage + 1) waiting for it. */
static void flow_publish(sim_eng *g, int t, int stage, int64_t idx, double tm) {
    sim_cell *cl = &g->cells[idx];
    if (cl->u[t]) g->abort_flow = 1;
    cl->u[t] = sim_cell_enc(tm);
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
                __builtin_prefetch(&kr->fa[kr->pc]);
            }
        }
    }
}

/* Ends stream k's compute (kind, stage, mb; a: the action, read for an OVERLAP) that ran
 * [start, end] (the heap engine's compute_end). */
static inline void flow_compute_end(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb,
                                    const sched_action *a, double start, double end) {
    int it = compute_finish(g, k, kind, stage, mb, a, start, end);
    if (kind == SCHED_F || kind == SCHED_OVERLAP) flow_publish(g, SIM_T_FDONE, stage, entry(g, stage, mb), end);
    if (kind == SCHED_B || kind == SCHED_I) flow_publish(g, SIM_T_IDONE, stage, entry(g, stage, mb), end);
    if (kind == SCHED_OVERLAP) flow_publish(g, SIM_T_IDONE, a->stage2, entry(g, a->stage2, a->mb2), end);
    compute_after(g, k, it, end);
}

/* Prefetches the cells this rank and its neighbours touch a few microbatches on: a row of the
 * cells is walked in microbatch order, too many rows at once for the hardware. */
static inline void flow_prefetch(const sim_eng *g, int kind, int stage, int mb) {
    int64_t pi = (int64_t)stage * g->M + mb + FLOW_PREFETCH_MBS, pj = kind == SCHED_F ? pi + g->M : pi - g->M;
    if (pi >= 0 && pi < g->n_entries) __builtin_prefetch(&g->cells[pi]);
    if (pj >= 0 && pj < g->n_entries) __builtin_prefetch(&g->cells[pj]);
}

/* F, B, I, W or OVERLAP (kind, stage, mb) on stream k: starts once its data is there, and
 * ends at once (its outputs published with their time). Returns WALK_NEXT or WALK_STOP. */
static inline int flow_walk_compute(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb, double *now) {
    double lt = *now;
    const sched_action *a = kind == SCHED_OVERLAP ? &k->acts[k->pc] : NULL;
    if (!compute_ready(g, k, kind, stage, mb, a, &lt)) return WALK_STOP;
    *now = lt;
    flow_prefetch(g, kind, stage, mb);
    double d = compute_begin(g, k, kind, stage, mb, a);
    busy_start(k, *now, d);
    busy_late(g, k, a && a->mb2 > mb ? a->mb2 : mb, d);
    double end = *now + d;
    g->flow_events++;
    flow_compute_end(g, k, kind, stage, mb, a, *now, end);
    *now = end;
    return WALK_NEXT;
}

/* SEND_F or SEND_B (kind, stage, mb) on stream k: once its data is there, a transfer on the
 * link (FIFO) whose arrival is published at once; blocking comm waits for it. Returns
 * WALK_NEXT or WALK_STOP. */
static inline int flow_walk_send(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb, double *now) {
    int fwd = kind == SCHED_SEND_F;
    double lt = *now;
    if (!need(g, k, fwd ? SIM_T_FDONE : SIM_T_IDONE, entry(g, stage, mb), &lt)) return WALK_STOP;
    *now = lt;
    int b = fwd ? stage : stage - 1;
    if (b < 0 || b + 1 >= g->s->stages) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    int l = fwd ? g->st[b].link_f : g->st[b].link_b;
    double st, end = link_send(g, k, l, fwd ? g->st[b].xfer_f_s : g->st[b].xfer_b_s, *now, &st);
    int t = fwd ? SIM_T_ARRF : SIM_T_ARRB;
    int64_t dst = entry(g, fwd ? stage + 1 : stage - 1, mb);
    if (dst < 0) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    g->flow_events++;
    flow_publish(g, t, fwd ? stage + 1 : stage - 1, dst, end);
    trace_put(g, k, k->pc, st, end);
    k->pc++;
    if (g->cfg->blocking_comm && end > *now) *now = end; /* waits for its arrival */
    return WALK_NEXT;
}

/* RECV_F or RECV_B (kind, stage, mb) on stream k: posts; blocking comm waits for the data.
 * Returns WALK_NEXT or WALK_STOP. */
static inline int flow_walk_recv(sim_eng *g, sim_rank_state *k, int kind, int stage, int mb, double *now) {
    int t = kind == SCHED_RECV_F ? SIM_T_ARRF : SIM_T_ARRB;
    int64_t idx = entry(g, stage, mb);
    if (idx < 0) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    if (!g->r->trace || g->r->trace[k->rank][k->pc].start_s < 0) trace_put(g, k, k->pc, *now, *now);
    if (g->cfg->blocking_comm) {
        uint64_t u = g->cells[idx].u[t];
        if (!u) {
            g->blocked[k->id] = cell_key(g, t, idx);
            return WALK_STOP;
        }
        double v = sim_cell_time(u);
        if (v > *now) *now = v;
    }
    k->pc++;
    return WALK_NEXT;
}

/* REDUCE_GRAD of stage on stream k: the all-reduce on the collective stream; blocking comm
 * waits for it. Returns WALK_NEXT or WALK_STOP. */
static inline int flow_walk_reduce(sim_eng *g, sim_rank_state *k, int stage, double *now) {
    if (!stage_ok(g, stage)) {
        g->blocked[k->id] = WAIT_NEVER;
        return WALK_STOP;
    }
    double st, end = reduce_begin(g, k, stage, *now, &st);
    g->flow_events++;
    trace_put(g, k, k->pc, st, end);
    k->pc++;
    if (g->cfg->blocking_comm && end > *now) *now = end;
    return WALK_NEXT;
}

/* STEP of stage on stream k: flush waits for the stage's all-reduces (all issued earlier on
 * this rank), then the update runs on the compute stream; a free one passes. Returns
 * WALK_NEXT. */
static inline int flow_walk_step(sim_eng *g, sim_rank_state *k, int stage, int mb, double *now) {
    double d = step_time(g, stage);
    if (stage_ok(g, stage) && g->st[stage].rg_issued > 0 && g->st[stage].reduce_end > *now)
        *now = g->st[stage].reduce_end;
    if (d > 0) {
        busy_start(k, *now, d);
        if (k->cur_iter >= 1) k->busy_late_s += d;
        double end = *now + d;
        g->flow_events++;
        flow_compute_end(g, k, SCHED_STEP, stage, mb, NULL, *now, end);
        *now = end;
        return WALK_NEXT;
    }
    pass_step(g, k, *now);
    return WALK_NEXT;
}

/* Walks stream k's action x on its clock *now. Returns WALK_NEXT or WALK_STOP. */
static inline int flow_walk(sim_eng *g, sim_rank_state *k, sim_flow_act x, double *now) {
    const int kind = (int)(x.ks & SIM_FLOW_KIND_MASK), stage = (int)(x.ks >> SIM_FLOW_KIND_BITS), mb = x.mb;
    switch (kind) {
    case SCHED_F:
    case SCHED_B:
    case SCHED_I:
    case SCHED_W:
    case SCHED_OVERLAP: return flow_walk_compute(g, k, kind, stage, mb, now);
    case SCHED_SEND_F:
    case SCHED_SEND_B: return flow_walk_send(g, k, kind, stage, mb, now);
    case SCHED_RECV_F:
    case SCHED_RECV_B: return flow_walk_recv(g, k, kind, stage, mb, now);
    case SCHED_REDUCE_GRAD: return flow_walk_reduce(g, k, stage, now);
    case SCHED_STEP: return flow_walk_step(g, k, stage, mb, now);
    default: pass_action(g, k, *now); return WALK_NEXT;
    }
}

/* Runs rank r on its own clock as far as its data allows (the heap engine's advance plus
 * compute_end, fused). */
static void flow_advance(sim_eng *g, int r) {
    sim_rank_state *k = &g->rk[r];
    double now = k->cur;
    g->blocked[r] = -1;
    while (k->pc < k->n && !g->err) {
        const sim_flow_act x = k->fa[k->pc];
        __builtin_prefetch(&k->fa[k->pc + SIM_FLOW_SLACK]); /* the stream has slack entries at its end */
        if (flow_walk(g, k, x, &now) == WALK_STOP) break;
    }
    k->cur = now;
}

/* Returns 1 when the flow engine gives the heap engine's results for this run (see above). */
static int sim_flow_ok(const sim_eng *g) {
    const sched *s = g->s;
    const sim_config *cfg = g->cfg;
    if (cfg->cv > 0 || s->weights != SCHED_WEIGHTS_FLUSH || g->any_rep) return 0;
    if (cfg->shared_inter_link && cfg->ranks_per_node > 0) return 0;
    double dx = 0;
    for (int b = 0; b + 1 < s->stages; b++) {
        const double x[2] = {g->st[b].xfer_f_s, g->st[b].xfer_b_s};
        for (int j = 0; j < 2; j++) {
            if (x[j] == 0) continue;
            if (dx == 0) dx = x[j];
            else if (x[j] != dx) return 0;
        }
    }
    return 1;
}

/* Moves the progress bar (if any) to the actions the streams have walked. */
static void show_progress(const sim_eng *g) {
    if (!g->cfg->progress) return;
    uint64_t done = 0;
    for (int q = 0; q < g->nstream; q++) done += g->rk[q].pc;
    pl_progress_set(g->cfg->progress, g->cfg->progress_base + done);
}

/* Runs the whole simulation with the flow engine. */
static void sim_flow(sim_eng *g) {
    const sched *s = g->s;
    for (int q = s->ranks - 1; q >= 0; q--) {
        g->queued[q] = 1;
        g->work[g->nwork++] = q;
    }
    uint64_t steps = 0;
    while (g->nwork > 0 && !g->err && !g->abort_flow) {
        int q = g->work[--g->nwork];
        g->queued[q] = 0;
        flow_advance(g, q);
        if (++steps % SIM_FLOW_PROGRESS_STEPS == 0) show_progress(g);
    }
}

/* ---------------------------------------------------------------- running the heap engine */

/* Prefetches what the next event will touch (its rank's state and actions, or the cell an
 * arrival writes), so that its cache misses overlap the current event's work. Large pipelines
 * interleave thousands of ranks and every event lands on a cold rank otherwise. */
static inline void prefetch_event(const sim_eng *g, const sim_ev *x) {
    uint64_t p = x->payload;
    int kind = sim_ev_kind(p);
    if (kind == SIM_EV_COMPUTE_END) {
        int r = (int)sim_ev_hi(p);
        uint32_t pc = sim_ev_lo(p);
        __builtin_prefetch(&g->rk[r]);
        __builtin_prefetch(&g->rk[r].acts[pc]);
        __builtin_prefetch(&g->rk[r].acts[pc + 1]);
    } else if (kind == SIM_EV_ARRIVE) {
        int64_t idx = sim_ev_index(p);
        const sim_rank_state *k = &g->rk[g->st[idx / g->M].stream0];
        __builtin_prefetch(&g->cells[idx]);
        __builtin_prefetch(&k->acts[k->pc]);
    }
}

/* Prefetches the cell of (stage, mb) when it exists. */
static inline void prefetch_cell(const sim_eng *g, int stage, int mb) {
    int64_t idx = entry(g, stage, mb);
    if (idx >= 0) __builtin_prefetch(&g->cells[idx]);
}

/* For the next event (a compute end), reads the rank's next few actions (their lines were
 * prefetched one event earlier, when the event was a child of the root) and prefetches the
 * cells those computes will read: the second stage of a two-stage prefetch pipeline. */
static inline void prefetch_deps(const sim_eng *g, const sim_ev *x) {
    uint64_t p = x->payload;
    if (sim_ev_kind(p) != SIM_EV_COMPUTE_END) return;
    int r = (int)sim_ev_hi(p);
    uint32_t pc = sim_ev_lo(p);
    const sim_rank_state *rk = &g->rk[r];
    for (uint32_t j = pc + 1; j < pc + 1 + HEAP_PREFETCH_ACTIONS && j < rk->n; j++) {
        const sched_action *a = &rk->acts[j];
        switch (a->kind) {
        case SCHED_F: prefetch_cell(g, a->stage > 0 ? a->stage - 1 : 0, a->mb); prefetch_cell(g, a->stage, a->mb); return;
        case SCHED_B:
        case SCHED_I: prefetch_cell(g, a->stage, a->mb); prefetch_cell(g, a->stage + 1, a->mb); return;
        case SCHED_W: prefetch_cell(g, a->stage, a->mb); return;
        default: break;
        }
    }
}

/* Prefetches for the next event (the heap's root) and the likely ones after (its children). */
static inline void prefetch_next(const sim_eng *g) {
    size_t n = g->hn < HEAP_PREFETCH_EVENTS ? g->hn : HEAP_PREFETCH_EVENTS;
    prefetch_deps(g, &g->heap[0]);
    for (size_t i = 0; i < n; i++) prefetch_event(g, &g->heap[i]);
}

/* Runs the whole simulation with the heap engine: every stream from its start, then the
 * events in time order. Returns PL_OK or PL_ENOMEM. */
static int sim_heap(sim_eng *g, pl_err *e) {
    g->now = 0;
    for (int q = 0; q < g->nstream; q++)
        if (advance(g, q)) return pl_errf(e, PL_ENOMEM, "out of memory in the event queue");
    while (g->hn > 0 && !g->err) {
        sim_ev x;
        sim_ev_pop(g, &x);
        g->now = sim_ev_time(&x);
        if (++g->r->events % SIM_HEAP_PROGRESS_EVENTS == 0) show_progress(g);
        if (g->hn > 0) prefetch_next(g);
        if (handle_event(g, &x)) return pl_errf(e, PL_ENOMEM, "out of memory in the event queue");
    }
    return PL_OK;
}

/* Fills e with a report of the ranks that cannot proceed. Returns PL_EINPUT. */
static int report_stuck(sim_eng *g, pl_err *e) {
    pl_buf b;
    pl_buf_init(&b);
    int n = 0;
    for (int r = 0; r < g->nstream; r++) {
        sim_rank_state *k = &g->rk[r];
        if (k->pc >= k->n) continue;
        if (n < STUCK_NAMED) {
            char act[96], rp[32] = "";
            sched_action_format(&k->acts[k->pc], act, sizeof act);
            if (g->swidth && g->swidth[k->rank] > 1) snprintf(rp, sizeof rp, " (replica %d)", k->replica);
            pl_buf_printf(&b, "%srank %d%s at action %u (%s)", n ? "; " : "", k->rank, rp,
                          (k->orig ? k->orig[k->pc] : k->pc) + 1, act);
        }
        n++;
    }
    pl_errf(e, PL_EINPUT, "simulation stuck (deadlock or missing data): %s%s [%d %s blocked]",
            b.data ? b.data : "", n > STUCK_NAMED ? "; ..." : "", n, g->any_rep ? "ranks or replicas" : "ranks");
    pl_buf_free(&b);
    return PL_EINPUT;
}

/* ---------------------------------------------------------------- a run */

void sim_config_init(sim_config *c) {
    memset(c, 0, sizeof *c);
    c->dtype_bytes = 4;
    c->optimizer_bytes_per_param = 8;
    c->microbatch_size = 1;
}

/* Frees the engine's arrays. */
static void eng_free(sim_eng *g) {
    sim_big_free(g->cells, g->cells_bytes, g->cells_mapped);
    free(g->rk);
    free(g->heap);
    free(g->link_free);
    free(g->st);
    free(g->blocked);
    free(g->work);
    free(g->queued);
    sim_big_free(g->fstream, g->fstream_bytes, g->fstream_mapped);
    if (g->rng) gsl_rng_free(g->rng);
    if (g->rs)
        for (int q = 0; q < g->s->stages; q++) free(g->rs[q].rd);
    free(g->rs);
    free(g->rst);
    free(g->reps);
    free(g->sbase);
    free(g->swidth);
    free(g->sacts);
    free(g->sorig);
    free(g->link_xfer);
}

/* Largest coefficient of variation: above 100 the lognormal factors are mostly below 1e-4
 * (mu = -ln(1 + cv^2) / 2), so times vanish. */
#define SIM_CV_MAX 100

/* Returns PL_OK when s is lowered and the values of cfg make sense (cv, bytes per parameter,
 * capacity, replicas per stage), else PL_EINPUT saying which. */
static int check_input(const sched *s, const sim_config *cfg, pl_err *e) {
    if (!s->lowered) return pl_errf(e, PL_EINPUT, "the simulator runs lowered schedules (call sched_lower first)");
    if (!(cfg->cv >= 0 && cfg->cv <= SIM_CV_MAX))
        return pl_errf(e, PL_EINPUT, "the coefficient of variation must be in [0, %d] (got %g)", SIM_CV_MAX, cfg->cv);
    if (!(cfg->dtype_bytes >= 0) || !isfinite(cfg->dtype_bytes) || !(cfg->optimizer_bytes_per_param >= 0) ||
        !isfinite(cfg->optimizer_bytes_per_param))
        return pl_errf(e, PL_EINPUT, "bytes per parameter (%g) and optimizer bytes per parameter (%g) must be finite and >= 0",
                       cfg->dtype_bytes, cfg->optimizer_bytes_per_param);
    if (cfg->capacity_bytes < 0)
        return pl_errf(e, PL_EINPUT, "the device capacity must be >= 0 bytes (got %lld)", (long long)cfg->capacity_bytes);
    return PL_OK;
}

/* Checks the replicas per stage (at least 1 each) and notes whether any stage is replicated.
 * Returns PL_OK or PL_EINPUT. */
static int check_replicas(sim_eng *g, pl_err *e) {
    const int *rep = g->cfg->replicas;
    if (!rep) return PL_OK;
    for (int q = 0; q < g->s->stages; q++) {
        if (rep[q] < 1) return pl_errf(e, PL_EINPUT, "stage %d: replicas must be at least 1 (got %d)", q, rep[q]);
        if (rep[q] > 1) g->any_rep = 1;
    }
    return PL_OK;
}

/* Returns whether the flow engine may serve the run as far as the configuration tells (the rest
 * of sim_flow_ok needs the links), and then allocates its compact stream (with SIM_FLOW_SLACK
 * entries after the last action). */
static int flow_stream_alloc(sim_eng *g, int try_flow) {
    const sim_config *cfg = g->cfg;
    if (g->any_rep) return 0; /* replicated runs: the heap engine's streams (see the top) */
    if (!try_flow || cfg->cv > 0 || g->s->weights != SCHED_WEIGHTS_FLUSH || (cfg->shared_inter_link && cfg->ranks_per_node > 0))
        return 0;
    g->fstream_bytes = (sched_total_actions(g->s) + SIM_FLOW_SLACK) * sizeof(sim_flow_act);
    g->fstream = sim_big_calloc(g->fstream_bytes, &g->fstream_mapped);
    return g->fstream != NULL;
}

/* One pass over the actions: fills the flow engine's compact stream (when allocated), raises M
 * to the largest microbatch any action names, and clears *try_flow when an action's kind does
 * not fit the stream or its stage does not live on the rank that runs it. */
static void scan_actions(sim_eng *g, int *try_flow) {
    const sched *s = g->s;
    sim_flow_act *fo = g->fstream;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            if (fo) {
                fo->mb = a->mb;
                fo->ks = (uint32_t)a->kind | (uint32_t)a->stage << SIM_FLOW_KIND_BITS;
                fo++;
                if (a->kind > SIM_FLOW_KIND_MASK) *try_flow = 0;
            }
            if (a->mb >= g->M) g->M = (int64_t)a->mb + 1;
            if (a->kind == SCHED_OVERLAP && a->mb2 >= g->M) g->M = (int64_t)a->mb2 + 1;
            if (!stage_ok(g, a->stage) || s->stage_rank[a->stage] != q) *try_flow = 0;
            if (a->kind == SCHED_OVERLAP && (!stage_ok(g, a->stage2) || s->stage_rank[a->stage2] != q)) *try_flow = 0;
        }
}

/* Allocates the result's tables, the streams (sim_setup_streams), the stage states, the wait
 * keys, the cells and the trace (every slot not yet run: -1). Returns PL_OK or PL_ENOMEM. */
static int alloc_tables(sim_eng *g, pl_err *e) {
    const sched *s = g->s;
    sim_result *r = g->r;
    r->ranks = s->ranks;
    r->iterations = (int)((g->M + s->microbatches - 1) / s->microbatches);
    r->rank = pl_calloc((size_t)s->ranks, sizeof *r->rank);
    r->iter_end_s = pl_calloc((size_t)r->iterations, sizeof(double));
    g->st = pl_calloc((size_t)s->stages, sizeof *g->st);
    int rc = sim_setup_streams(g, e);
    if (rc != PL_OK) return rc;
    g->rk = pl_calloc((size_t)g->nstream, sizeof *g->rk);
    g->blocked = pl_calloc((size_t)g->nstream, sizeof *g->blocked);
    if (!r->rank || !r->iter_end_s || !g->rk || !g->st || !g->blocked) return pl_errf(e, PL_ENOMEM, "out of memory");
    g->cells_bytes = (size_t)g->n_entries * sizeof(sim_cell);
    g->cells = sim_big_calloc(g->cells_bytes, &g->cells_mapped);
    if (!g->cells) return pl_errf(e, PL_ENOMEM, "out of memory: %lld stage-microbatch cells", (long long)g->n_entries);
    if (!g->cfg->record_trace) return PL_OK;
    r->trace = pl_calloc((size_t)s->ranks, sizeof *r->trace);
    if (!r->trace) return pl_errf(e, PL_ENOMEM, "out of memory for the trace");
    for (int q = 0; q < s->ranks; q++) {
        r->trace[q] = malloc((s->rank[q].n ? s->rank[q].n : 1) * sizeof(sim_slot));
        if (!r->trace[q]) return pl_errf(e, PL_ENOMEM, "out of memory for the trace");
        for (size_t i = 0; i < s->rank[q].n; i++) r->trace[q][i] = (sim_slot){-1, -1, 0};
    }
    return PL_OK;
}

/* Gives each rank's first stream the rank's list (and its part of the compact stream), each
 * stream its number, rank and replica, and the streams of replicated ranks their
 * subsequences. Counts the result's actions. Returns PL_OK or an error. */
static int init_streams(sim_eng *g, pl_err *e) {
    const sched *s = g->s;
    for (int q = 0; q < s->ranks; q++) {
        if (s->rank[q].n > UINT32_MAX) return pl_errf(e, PL_EINPUT, "too many actions on rank %d", q);
        sim_rank_state *k = &g->rk[g->sbase[q]];
        k->acts = s->rank[q].acts;
        k->fa = g->fstream ? g->fstream + g->r->actions : NULL;
        k->n = (uint32_t)s->rank[q].n;
        g->r->actions += s->rank[q].n;
    }
    for (int q = 0; q < g->nstream; q++) {
        g->blocked[q] = -1;
        g->rk[q].id = q;
    }
    for (int q = 0; q < s->ranks; q++)
        for (int j = 0; j < g->swidth[q]; j++) {
            g->rk[g->sbase[q] + j].rank = q;
            g->rk[g->sbase[q] + j].replica = j;
        }
    return g->any_rep ? sim_split_streams(g, e) : PL_OK;
}

/* Sets up what the engines read: links, stage sizes and static memory, the replicated stages'
 * collectives, the streams' first peaks, and the random factors of a stochastic run (mean 1).
 * Returns PL_OK or an error. */
static int setup_run(sim_eng *g, pl_err *e) {
    int rc = sim_setup_links(g, e);
    if (rc == PL_OK) rc = sim_setup_stage_memory(g, e);
    if (rc == PL_OK && g->any_rep) rc = sim_setup_rounds(g, e);
    if (rc != PL_OK) return rc;
    for (int q = 0; q < g->nstream; q++) note_peaks(&g->rk[q]);
    double cv = g->cfg->cv;
    if (cv <= 0) return PL_OK;
    g->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!g->rng) return pl_errf(e, PL_ENOMEM, "out of memory for the random generator");
    gsl_rng_set(g->rng, (unsigned long)g->cfg->seed);
    g->ln_sigma = sqrt(log(1.0 + cv * cv));
    g->ln_mu = -0.5 * g->ln_sigma * g->ln_sigma; /* mean factor 1 */
    return PL_OK;
}

/* Internal return of sim_run_with: the flow engine met a case it cannot serve; rerun. */
#define SIM_RERUN_HEAP 1000

/* Runs the simulation with the flow engine when try_flow and sim_flow_ok allow it, else
 * (giving the compact stream back) with the heap engine. Returns PL_OK, SIM_RERUN_HEAP or an
 * error. */
static int run_engine(sim_eng *g, int try_flow, pl_err *e) {
    if (try_flow && sim_flow_ok(g)) {
        g->work = pl_calloc((size_t)g->s->ranks, sizeof *g->work);
        g->queued = pl_calloc((size_t)g->s->ranks, 1);
        if (!g->work || !g->queued) return pl_errf(e, PL_ENOMEM, "out of memory");
        sim_flow(g);
        if (g->abort_flow) return SIM_RERUN_HEAP;
        g->r->events = g->flow_events;
        return PL_OK;
    }
    sim_big_free(g->fstream, g->fstream_bytes, g->fstream_mapped);
    g->fstream = NULL;
    g->fstream_bytes = 0;
    return sim_heap(g, e);
}

/* Returns PL_OK when the run ended well, else its error: out of memory, a negative compute
 * time, streams that never finished (stuck), memory past 64 bits. */
static int check_ended(sim_eng *g, pl_err *e) {
    if (g->err == PL_ENOMEM) return pl_errf(e, PL_ENOMEM, "out of memory in the event queue");
    if (g->err) return pl_errf(e, PL_EINPUT, "a compute time is negative or not a number");
    for (int q = 0; q < g->nstream; q++)
        if (g->rk[q].pc < g->rk[q].n) return report_stuck(g, e);
    if (!g->mem_overflow) return PL_OK;
    int q = 0;
    while (q + 1 < g->nstream && g->rk[q].st.peak_bytes != INT64_MAX) q++;
    return pl_errf(e, PL_EINPUT,
                   "rank %d: its memory passes 2^63 bytes (9.2e18), more than 64-bit counters hold: the "
                   "stash, parameter or optimizer sizes are too large", g->rk[q].rank);
}

/* Ends the receives of the trace when their data arrived. */
static void trace_recv_ends(sim_eng *g) {
    const sched *s = g->s;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            if (a->kind != SCHED_RECV_F && a->kind != SCHED_RECV_B) continue;
            double arr = sim_cell_time(g->cells[entry(g, a->stage, a->mb)].u[a->kind == SCHED_RECV_F ? SIM_T_ARRF : SIM_T_ARRB]);
            if (arr > g->r->trace[q][i].end_s) g->r->trace[q][i].end_s = arr;
        }
}

/* Returns PL_OK when the run's times make its figures defined, else PL_EINPUT: a makespan that
 * overflowed, or zero time for actions. */
static int check_times(const sim_result *r, pl_err *e) {
    if (!isfinite(r->makespan_s))
        return pl_errf(e, PL_EINPUT,
                       "the simulated time overflowed (makespan %g s): compute or transfer times too large to add up",
                       r->makespan_s);
    if (r->makespan_s <= 0 && r->actions > 0)
        return pl_errf(e, PL_EINPUT,
                       "every action takes zero time (makespan 0 s), so throughput and bubbles are undefined: give "
                       "positive compute times (e.g. --tf) or transfer costs");
    return PL_OK;
}

/* Returns the bytes the engine allocated (tables, heap, links; no trace). */
static size_t state_bytes(const sim_eng *g) {
    const sched *s = g->s;
    return g->cells_bytes + g->hcap * sizeof(sim_ev) + (size_t)g->nstream * sizeof(sim_rank_state) +
           (size_t)s->ranks * sizeof(sim_rank_stats) + (size_t)g->nlinks * sizeof(double) +
           (size_t)s->stages * sizeof(sim_stage_state) + (size_t)g->r->iterations * sizeof(double) +
           (g->work ? (size_t)s->ranks * (sizeof(int) + 1) : 0) + g->fstream_bytes;
}

/* Sets up the engine of a run of s: the tables sized by the actions' largest microbatch, the
 * streams, links, memory and collectives. *try_flow is cleared when the flow engine cannot
 * serve it. Returns PL_OK or an error. */
static int eng_init(sim_eng *g, int *try_flow, pl_err *e) {
    const sched *s = g->s;
    int64_t mbs = sched_total_microbatches(s);
    g->M = mbs;
    int rc = sim_state_check(s, g->M, g->cfg->record_trace, &g->cfg->budget, e);
    if (rc == PL_OK) rc = check_replicas(g, e);
    if (rc != PL_OK) return rc;
    *try_flow = flow_stream_alloc(g, *try_flow);
    scan_actions(g, try_flow);
    g->n_entries = (int64_t)s->stages * g->M;
    if (g->M > mbs && (rc = sim_state_check(s, g->M, g->cfg->record_trace, &g->cfg->budget, e)) != PL_OK) return rc;
    if ((rc = alloc_tables(g, e)) == PL_OK && (rc = init_streams(g, e)) == PL_OK) rc = setup_run(g, e);
    return rc;
}

/* Runs the simulation, with the flow engine when try_flow and the run allows it. */
static int sim_run_with(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e,
                        int try_flow) {
    memset(r, 0, sizeof *r);
    int rc = check_input(s, cfg, e);
    if (rc != PL_OK) return rc;
    sim_eng g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.c = c;
    g.cfg = cfg;
    g.r = r;
    if ((rc = eng_init(&g, &try_flow, e)) == PL_OK && (rc = run_engine(&g, try_flow, e)) == PL_OK)
        rc = check_ended(&g, e);
    if (rc == PL_OK && r->trace) trace_recv_ends(&g);
    if (rc == PL_OK && r->trace && g.any_rep) sim_trace_rounds(&g);
    if (rc == PL_OK) {
        sim_finish_metrics(&g);
        rc = check_times(r, e);
    }
    if (rc == PL_OK) r->state_bytes = state_bytes(&g);
    eng_free(&g);
    if (rc != PL_OK) sim_result_free(r);
    return rc;
}

int sim_run(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e) {
    int rc = sim_run_with(s, c, cfg, r, e, 1);
    if (rc == SIM_RERUN_HEAP) rc = sim_run_with(s, c, cfg, r, e, 0);
    return rc;
}
