/* sim_heap.c: the heap engine: events in time order (sim_queue_int.h) drive the streams' walks
 * (the rules of sim_rules_int.h), the collectives of replicated stages, and the wake-ups of the
 * streams waiting for a time. It serves every run (the flow engine, sim_flow.c, serves the runs
 * where the order of events cannot matter, faster). */
#include "sim_rules_int.h"

/* Events the heap engine processes between two moves of the progress bar (a power of two). */
#define SIM_HEAP_PROGRESS_EVENTS 65536u
/* Events the heap engine prefetches for: the root and its children. */
#define HEAP_PREFETCH_EVENTS 5
/* Actions after a compute end whose cells the heap engine prefetches. */
#define HEAP_PREFETCH_ACTIONS 3

/* sim_rules_int.h. REDUCE_GRAD a of a replicated stage on stream r: joins its round's collective, which starts
 * once all its replicas joined, at the latest of their ready times (now, or when their
 * collective stream is free) and the stage's previous collective end; it then ends after the
 * stage's all-reduce time on every member, and the members waiting for its start go on.
 * Returns WALK_NEXT (the stream goes on), WALK_STOP (it waits: blocking comm) or WALK_FAIL
 * (out of memory). */
int sim_heap_reduce_join(sim_eng *g, int r, sim_rank_state *k, const sched_action *a) {
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
            if (q != r && g->blocked[q] == key && sim_heap_advance(g, q)) return WALK_FAIL;
        }
    }
    if (blocking) {
        g->blocked[k->id] = KEY_RG(g, st_);
        return WALK_STOP;
    }
    return WALK_NEXT;
}


/* sim_rules_int.h. Runs stream r from its pc at the current time as far as it can; its ends
 * become events. Returns 0, or -1 on an allocation failure. */
int sim_heap_advance(sim_eng *g, int r) {
    sim_rank_state *k = &g->rk[r];
    g->blocked[k->id] = -1;
    while (k->pc < k->n) {
        const sched_action *a = &k->acts[k->pc];
        double now = g->now;
        int w = rule_walk(g, SIM_HEAP, r, k, a->kind, a->stage, a->mb, a, &now);
        if (w != WALK_NEXT) return w == WALK_FAIL ? -1 : 0;
    }
    return 0;
}


/* sim_rules_int.h. Publishes time tm for (t, idx) and wakes a rank waiting for it (ranks of stage-1..stage+1). */
void sim_heap_publish(sim_eng *g, int t, int64_t idx, double tm) {
    *sim_cell_at(g, t, idx) = sim_cell_enc(tm);
    int64_t key = cell_key(g, t, idx);
    int stage = (int)(idx / g->M);
    int64_t mb = idx - (int64_t)stage * g->M;
    const sched *s = g->s;
    for (int d = -1; d <= 1; d++) {
        int q = stage + d;
        if (q < 0 || q >= s->stages) continue;
        int rr = stream_of(g, q, mb);
        if (g->blocked[rr] == key && sim_heap_advance(g, rr)) g->err = PL_ENOMEM;
    }
}

/* Handles the end of stream r's running compute (or STEP): publishes its outputs, moves on.
 * Returns 0, or -1 on an allocation failure. */
static int compute_end(sim_eng *g, int r) {
    sim_rank_state *k = &g->rk[r];
    const sched_action *a = &k->acts[k->pc];
    rule_compute_end(g, SIM_HEAP, k, a->kind, a->stage, a->mb, a, k->start_cur, g->now);
    return sim_heap_advance(g, r);
}

/* The end of stream rp's deferred step of stage st: a stash forward waiting for it goes on.
 * Returns 0, or -1 on an allocation failure. */
static int step_end(sim_eng *g, int st, int rp) {
    sim_sst(g, st, rp)->step_pending--;
    int rr = g->st[st].stream0 + rp;
    return g->blocked[rr] == KEY_STEP(g, st) ? sim_heap_advance(g, rr) : 0;
}

/* The end of an all-reduce of stage st (cnt members of a replicated collective; 0: not
 * replicated): the streams waiting for it go on. Returns 0, or -1 on an allocation failure. */
static int reduce_end(sim_eng *g, int st, int cnt) {
    if (cnt == 0) {
        g->st[st].rg_done++;
        int rr = g->st[st].stream0;
        return g->blocked[rr] == KEY_RG(g, st) ? sim_heap_advance(g, rr) : 0;
    }
    for (int j = 0; j < cnt; j++) sim_sst(g, st, j)->rg_done++;
    int fail = 0;
    for (int j = 0; j < cnt && !fail; j++) {
        int rr = g->st[st].stream0 + j;
        if (g->blocked[rr] == KEY_RG(g, st)) fail = sim_heap_advance(g, rr);
    }
    return fail;
}

/* Handles event x at its time (g->now) and wakes the streams waiting for it. Returns 0, or
 * nonzero on an allocation failure. */
static int handle_event(sim_eng *g, const sim_ev *x) {
    uint64_t p = x->payload;
    switch (sim_ev_kind(p)) {
    case SIM_EV_COMPUTE_END: return compute_end(g, (int)sim_ev_hi(p));
    case SIM_EV_ARRIVE: sim_heap_publish(g, sim_ev_table(p), sim_ev_index(p), g->now); return 0;
    case SIM_EV_STEP_END: return step_end(g, (int)sim_ev_lo(p), (int)sim_ev_hi(p));
    case SIM_EV_HOLD_END: return sim_heap_advance(g, (int)sim_ev_hi(p));
    default: return reduce_end(g, (int)sim_ev_lo(p), (int)sim_ev_hi(p));
    }
}


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
        __builtin_prefetch(sim_cell_at(g, 0, idx));
        __builtin_prefetch(&k->acts[k->pc]);
    }
}

/* Prefetches the cell of (stage, mb) when it exists. */
static inline void prefetch_cell(const sim_eng *g, int stage, int mb) {
    int64_t idx = entry(g, stage, mb);
    if (idx >= 0) __builtin_prefetch(sim_cell_at(g, 0, idx));
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
int sim_heap_run(sim_eng *g, pl_err *e) {
    g->now = 0;
    for (int q = 0; q < g->nstream; q++)
        if (sim_heap_advance(g, q)) return pl_errf(e, PL_ENOMEM, "out of memory in the event queue");
    while (g->hn > 0 && !g->err) {
        sim_ev x;
        sim_ev_pop(g, &x);
        g->now = sim_ev_time(&x);
        if (++g->r->events % SIM_HEAP_PROGRESS_EVENTS == 0) sim_show_progress(g);
        if (g->hn > 0) prefetch_next(g);
        if (handle_event(g, &x)) return pl_errf(e, PL_ENOMEM, "out of memory in the event queue");
    }
    return PL_OK;
}
