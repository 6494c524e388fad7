/* sim_engine.c: the discrete-event engine: a binary heap of (time, insertion order) events
 * drives per-rank compute streams, FIFO links and all-reduces over a lowered schedule.
 *
 * Model (decisions, see also sim.h):
 * - Each rank walks its action list in order. A compute starts when the stream is free and
 *   its data is there; the cursor waits while a compute runs.
 * - Overlapped comm (default): SEND starts a transfer on its link at once (buffered, FIFO:
 *   start = max(now, link free)), the link is busy for the whole transfer time (latency +
 *   bytes / bandwidth); RECV only posts, the consuming compute waits for the arrival.
 *   REDUCE_GRAD runs on a per-rank collective stream; STEP waits for the stage's reduce.
 * - Blocking comm: SEND holds the stream until its data arrived, RECV until the data is
 *   there, REDUCE_GRAD until the all-reduce ended.
 * - Events are processed in time order, so link FIFO order equals issue order.
 * Per-action state: none beyond 4 doubles per (stage, microbatch) and the trace when asked. */
#include "sim.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tables of times per (stage, mb); -1 = not yet. Key of a wait = table * n_entries + idx. */
enum { T_FDONE, T_IDONE, T_ARRF, T_ARRB, T_N };
/* Event kinds, in the top bits of the payload. */
enum { EV_COMPUTE_END = 0, EV_ARRIVE = 1, EV_REDUCE_END = 2 };

typedef struct ev {
    double t;
    uint64_t seq;
    uint64_t payload; /* kind << 56 | value */
} ev;

typedef struct rank_state {
    const sched_action *acts;
    uint32_t n, pc;
    int64_t blocked;  /* key waited for; -1 runnable / running */
    double coll_free; /* collective stream free at */
    double start_cur; /* start of the running compute */
    int cur_iter;
    int started;      /* 1 once a compute started */
    double last_end;  /* end of the last compute */
    int inflight;     /* microbatches stashed now */
    int versions;     /* weight versions now (sum over stages) */
    int64_t mem;      /* bytes now */
} rank_state;

typedef struct eng {
    const sched *s;
    const sim_costs *c;
    const sim_config *cfg;
    sim_result *r;
    int64_t M, n_entries;
    double *tab[T_N];
    rank_state *rk;
    /* heap */
    ev *heap;
    size_t hn, hcap;
    uint64_t seq;
    /* links */
    int32_t *link_f, *link_b; /* [stages] link of the boundary s -> s+1 and back */
    double *xfer_f_s, *xfer_b_s;
    double *link_free;
    int nlinks;
    /* per stage */
    int *inflight_stage;      /* [stages] */
    int *rg_issued, *rg_done; /* [stages] all-reduces started / finished */
    int64_t *stash_b, *wstash_b, *input_b, *param_b; /* [stages] */
    double *reduce_s;         /* [stages] */
    int stash_policy;
    gsl_rng *rng;
    double ln_mu, ln_sigma;
    double now;
    int err;
} eng;

/* Returns 1 when event a comes before b (time, then insertion order). */
static inline int ev_less(const ev *a, const ev *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

/* Pushes an event; returns 0 or -1 when out of memory. */
static int heap_push(eng *g, double t, uint64_t kind, uint64_t val) {
    if (g->hn == g->hcap) {
        size_t cap = g->hcap ? g->hcap * 2 : 1024;
        ev *nh = pl_reallocarray(g->heap, cap, sizeof *nh);
        if (!nh) return -1;
        g->heap = nh;
        g->hcap = cap;
    }
    ev x = {t, g->seq++, kind << 56 | val};
    size_t i = g->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&x, &g->heap[p])) break;
        g->heap[i] = g->heap[p];
        i = p;
    }
    g->heap[i] = x;
    return 0;
}

/* Pops the earliest event into *out. */
static void heap_pop(eng *g, ev *out) {
    *out = g->heap[0];
    ev x = g->heap[--g->hn];
    size_t i = 0, n = g->hn;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t m = l + 1 < n && ev_less(&g->heap[l + 1], &g->heap[l]) ? l + 1 : l;
        if (!ev_less(&g->heap[m], &x)) break;
        g->heap[i] = g->heap[m];
        i = m;
    }
    if (n) g->heap[i] = x;
}

/* Returns the table index of (stage, mb), or -1 when out of range. */
static inline int64_t entry(const eng *g, int stage, int mb) {
    if (stage < 0 || stage >= g->s->stages || mb < 0 || mb >= g->M) return -1;
    return (int64_t)stage * g->M + mb;
}

/* Returns 1 and the time when key (t, idx) is known; else sets the rank's wait and returns 0. */
static inline int need(eng *g, rank_state *k, int t, int64_t idx, double *latest) {
    if (idx < 0) {
        k->blocked = -2; /* never satisfiable */
        return 0;
    }
    double v = g->tab[t][idx];
    if (v < 0) {
        k->blocked = (int64_t)t * g->n_entries + idx;
        return 0;
    }
    if (v > *latest) *latest = v;
    return 1;
}

/* Returns 1 when the forward input of (stage, mb) is there. */
static inline int fwd_ready(eng *g, rank_state *k, int stage, int mb, double *lt) {
    if (stage == 0) return 1;
    if (g->s->stage_rank[stage - 1] == g->s->stage_rank[stage]) return need(g, k, T_FDONE, entry(g, stage - 1, mb), lt);
    return need(g, k, T_ARRF, entry(g, stage, mb), lt);
}

/* Returns 1 when a backward (B or I) of (stage, mb) has its forward and output gradient. */
static inline int bwd_ready(eng *g, rank_state *k, int stage, int mb, double *lt) {
    if (!need(g, k, T_FDONE, entry(g, stage, mb), lt)) return 0;
    if (stage + 1 >= g->s->stages) return 1;
    if (g->s->stage_rank[stage + 1] == g->s->stage_rank[stage]) return need(g, k, T_IDONE, entry(g, stage + 1, mb), lt);
    return need(g, k, T_ARRB, entry(g, stage, mb), lt);
}

/* Returns the compute time of a (non-overlap) compute kind, with recompute and noise. */
static double compute_time(eng *g, int stage, int kind, int mb) {
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

/* Returns the weight versions a stage holds with `inflight` microbatches stashed. */
static inline int versions_of(const eng *g, int inflight) {
    if (g->s->weights == SCHED_WEIGHTS_STASH) return inflight > 1 ? inflight : 1;
    return g->s->weights == SCHED_WEIGHTS_2BW ? 2 : 1;
}

/* Changes a stage's stash count by d on rank k and adjusts weight-version memory. */
static void stash_change(eng *g, rank_state *k, int stage, int d) {
    int old = g->inflight_stage[stage];
    int nw = old + d;
    g->inflight_stage[stage] = nw;
    k->inflight += d;
    int dv = versions_of(g, nw) - versions_of(g, old);
    if (dv) {
        k->versions += dv;
        k->mem += (int64_t)dv * g->param_b[stage];
    }
}

/* Updates the rank's peaks after memory or stash changed. */
static inline void note_peaks(eng *g, int r, rank_state *k) {
    sim_rank_stats *st = &g->r->rank[r];
    if (k->mem > st->peak_bytes) st->peak_bytes = k->mem;
    if (k->inflight > st->peak_stash_mbs) st->peak_stash_mbs = k->inflight;
    if (k->versions > st->peak_weight_versions) st->peak_weight_versions = k->versions;
}

/* Memory effects at the start of a compute half (kind on stage) on rank k. */
static void mem_start(eng *g, rank_state *k, int kind, int stage) {
    int rec = g->s->recompute == SCHED_RECOMPUTE_FULL;
    if (kind == SCHED_F) {
        stash_change(g, k, stage, +1);
        k->mem += rec ? g->input_b[stage] : g->stash_b[stage];
    } else if ((kind == SCHED_B || kind == SCHED_I) && rec) {
        k->mem += g->stash_b[stage] - g->input_b[stage];
    }
}

/* Memory effects at the end of a compute half. */
static void mem_end(eng *g, rank_state *k, int kind, int stage) {
    if (kind == SCHED_B) {
        k->mem -= g->stash_b[stage];
        stash_change(g, k, stage, -1);
    } else if (kind == SCHED_I) {
        k->mem -= g->stash_b[stage] - g->wstash_b[stage];
    } else if (kind == SCHED_W) {
        k->mem -= g->wstash_b[stage];
        stash_change(g, k, stage, -1);
    }
}

/* Records that rank r's action at its pc ran [start, end]. */
static inline void trace_put(eng *g, int r, const rank_state *k, uint32_t pc, double start, double end) {
    if (g->r->trace) {
        sim_slot *sl = &g->r->trace[r][pc];
        sl->start_s = start;
        sl->end_s = end;
        sl->mem_bytes = k->mem;
    }
}

/* Notes the end of an action of iteration it. */
static inline void iter_note(eng *g, int it, double t) {
    if (it >= g->r->iterations) it = g->r->iterations - 1;
    if (it >= 0 && t > g->r->iter_end_s[it]) g->r->iter_end_s[it] = t;
}

/* Publishes time tm for (t, idx) and wakes a rank waiting for it (ranks of stage-1..stage+1). */
static void publish(eng *g, int t, int64_t idx, double tm);

/* Runs rank r from its pc at the current time as far as it can; schedules its events. Returns
 * 0, or -1 on an allocation failure. */
static int advance(eng *g, int r) {
    rank_state *k = &g->rk[r];
    const sched *s = g->s;
    const int blocking = g->cfg->blocking_comm;
    double now = g->now;
    k->blocked = -1;
    while (k->pc < k->n) {
        const sched_action *a = &k->acts[k->pc];
        double lt = 0;
        switch (a->kind) {
        case SCHED_F:
        case SCHED_B:
        case SCHED_I:
        case SCHED_W:
        case SCHED_OVERLAP: {
            int ok;
            if (a->kind == SCHED_F) ok = fwd_ready(g, k, a->stage, a->mb, &lt);
            else if (a->kind == SCHED_W) ok = need(g, k, T_IDONE, entry(g, a->stage, a->mb), &lt);
            else if (a->kind == SCHED_OVERLAP) ok = fwd_ready(g, k, a->stage, a->mb, &lt) && bwd_ready(g, k, a->stage2, a->mb2, &lt);
            else ok = bwd_ready(g, k, a->stage, a->mb, &lt);
            if (!ok) return 0;
            double d;
            if (a->kind == SCHED_OVERLAP) {
                d = compute_time(g, a->stage, SCHED_F, a->mb) + compute_time(g, a->stage2, a->kind2, a->mb2);
                mem_start(g, k, SCHED_F, a->stage);
                mem_start(g, k, a->kind2, a->stage2);
            } else {
                d = compute_time(g, a->stage, a->kind, a->mb);
                mem_start(g, k, a->kind, a->stage);
            }
            note_peaks(g, r, k);
            if (!k->started) {
                k->started = 1;
                g->r->rank[r].first_start_s = now;
            }
            k->start_cur = now;
            g->r->rank[r].busy_s += d;
            return heap_push(g, now + d, EV_COMPUTE_END, (uint64_t)r);
        }
        case SCHED_SEND_F:
        case SCHED_SEND_B: {
            int fwd = a->kind == SCHED_SEND_F;
            if (!need(g, k, fwd ? T_FDONE : T_IDONE, entry(g, a->stage, a->mb), &lt)) return 0;
            int b = fwd ? a->stage : a->stage - 1; /* boundary b -> b+1 */
            if (b < 0 || b + 1 >= s->stages) { k->blocked = -2; return 0; }
            int l = fwd ? g->link_f[b] : g->link_b[b];
            double d = fwd ? g->xfer_f_s[b] : g->xfer_b_s[b];
            double st = now > g->link_free[l] ? now : g->link_free[l];
            double end = st + d;
            g->link_free[l] = end;
            g->r->rank[r].comm_s += d;
            g->r->comm_s += d;
            int t = fwd ? T_ARRF : T_ARRB;
            int64_t dst = entry(g, fwd ? a->stage + 1 : a->stage - 1, a->mb);
            if (dst < 0) { k->blocked = -2; return 0; }
            if (heap_push(g, end, EV_ARRIVE, (uint64_t)t << 48 | (uint64_t)dst)) return -1;
            trace_put(g, r, k, k->pc, st, end);
            k->pc++;
            if (blocking) {
                k->blocked = (int64_t)t * g->n_entries + dst;
                return 0;
            }
            break;
        }
        case SCHED_RECV_F:
        case SCHED_RECV_B: {
            int t = a->kind == SCHED_RECV_F ? T_ARRF : T_ARRB;
            int64_t idx = entry(g, a->stage, a->mb);
            if (idx < 0) { k->blocked = -2; return 0; }
            if (blocking && g->tab[t][idx] < 0) {
                if (g->r->trace && g->r->trace[r][k->pc].start_s < 0) trace_put(g, r, k, k->pc, now, now);
                k->blocked = (int64_t)t * g->n_entries + idx;
                return 0;
            }
            if (!g->r->trace || g->r->trace[r][k->pc].start_s < 0) trace_put(g, r, k, k->pc, now, now);
            k->pc++;
            break;
        }
        case SCHED_REDUCE_GRAD: {
            int st_ = a->stage;
            if (st_ < 0 || st_ >= s->stages) { k->blocked = -2; return 0; }
            double d = g->reduce_s[st_];
            double st = blocking ? now : (now > k->coll_free ? now : k->coll_free);
            double end = st + d;
            k->coll_free = end;
            g->r->rank[r].reduce_s += d;
            g->rg_issued[st_]++;
            if (heap_push(g, end, EV_REDUCE_END, (uint64_t)st_)) return -1;
            trace_put(g, r, k, k->pc, st, end);
            k->pc++;
            if (blocking) {
                k->blocked = (int64_t)T_N * g->n_entries + st_;
                return 0;
            }
            break;
        }
        case SCHED_STEP: {
            int st_ = a->stage;
            if (st_ >= 0 && st_ < s->stages && g->rg_done[st_] < g->rg_issued[st_]) {
                k->blocked = (int64_t)T_N * g->n_entries + st_;
                return 0;
            }
            double d = st_ >= 0 && st_ < s->stages ? g->c->step_s(g->c->ctx, st_) : 0;
            if (d > 0) {
                if (!k->started) {
                    k->started = 1;
                    g->r->rank[r].first_start_s = now;
                }
                k->start_cur = now;
                g->r->rank[r].busy_s += d;
                return heap_push(g, now + d, EV_COMPUTE_END, (uint64_t)r);
            }
            trace_put(g, r, k, k->pc, now, now);
            iter_note(g, k->cur_iter, now);
            k->pc++;
            break;
        }
        default:
            trace_put(g, r, k, k->pc, now, now);
            k->pc++;
            break;
        }
    }
    return 0;
}

static void publish(eng *g, int t, int64_t idx, double tm) {
    g->tab[t][idx] = tm;
    int64_t key = (int64_t)t * g->n_entries + idx;
    int stage = (int)(idx / g->M);
    const sched *s = g->s;
    for (int d = -1; d <= 1; d++) {
        int q = stage + d;
        if (q < 0 || q >= s->stages) continue;
        int rr = s->stage_rank[q];
        if (g->rk[rr].blocked == key && advance(g, rr)) g->err = PL_ENOMEM;
    }
}

/* Handles the end of rank r's running compute (or STEP): publishes its outputs, moves on. */
static int compute_end(eng *g, int r) {
    rank_state *k = &g->rk[r];
    const sched_action *a = &k->acts[k->pc];
    double now = g->now;
    int it = -1;
    switch (a->kind) {
    case SCHED_F:
        mem_end(g, k, SCHED_F, a->stage);
        trace_put(g, r, k, k->pc, k->start_cur, now);
        k->pc++;
        publish(g, T_FDONE, entry(g, a->stage, a->mb), now);
        it = a->mb;
        break;
    case SCHED_B:
    case SCHED_I:
    case SCHED_W:
        mem_end(g, k, a->kind, a->stage);
        trace_put(g, r, k, k->pc, k->start_cur, now);
        k->pc++;
        if (a->kind != SCHED_W) publish(g, T_IDONE, entry(g, a->stage, a->mb), now);
        it = a->mb;
        break;
    case SCHED_OVERLAP:
        mem_end(g, k, a->kind2, a->stage2);
        trace_put(g, r, k, k->pc, k->start_cur, now);
        k->pc++;
        publish(g, T_FDONE, entry(g, a->stage, a->mb), now);
        publish(g, T_IDONE, entry(g, a->stage2, a->mb2), now);
        it = a->mb > a->mb2 ? a->mb : a->mb2;
        break;
    default: /* STEP with a cost */
        trace_put(g, r, k, k->pc, k->start_cur, now);
        k->pc++;
        break;
    }
    if (it >= 0) k->cur_iter = (int)(it / g->s->microbatches);
    k->last_end = now;
    iter_note(g, k->cur_iter, now);
    return advance(g, r);
}

/* Fills e with a report of the ranks that cannot proceed. Returns PL_EINPUT. */
static int report_stuck(eng *g, pl_err *e) {
    pl_buf b;
    pl_buf_init(&b);
    int n = 0;
    for (int r = 0; r < g->s->ranks; r++) {
        rank_state *k = &g->rk[r];
        if (k->pc >= k->n) continue;
        if (n < 4) {
            char act[96];
            sched_action_format(&k->acts[k->pc], act, sizeof act);
            pl_buf_printf(&b, "%srank %d at action %u (%s)", n ? "; " : "", r, k->pc + 1, act);
        }
        n++;
    }
    pl_errf(e, PL_EINPUT, "simulation stuck (deadlock or missing data): %s%s [%d ranks blocked]",
            b.data ? b.data : "", n > 4 ? "; ..." : "", n);
    pl_buf_free(&b);
    return PL_EINPUT;
}

/* Orders link keys (src, dst) for deduplication. */
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Returns the link key of a transfer src -> dst: a rank pair, or a node pair when shared. */
static int64_t link_key(const eng *g, int src, int dst) {
    int rpn = g->cfg->ranks_per_node;
    if (g->cfg->shared_inter_link && rpn > 0 && src / rpn != dst / rpn)
        return ((int64_t)1 << 62) | ((int64_t)(src / rpn) << 31) | (dst / rpn);
    return ((int64_t)src << 31) | dst;
}

/* Sets up links of every stage boundary and their transfer times. Returns PL_OK or an error. */
static int setup_links(eng *g, pl_err *e) {
    const sched *s = g->s;
    int S = s->stages;
    size_t nb = S > 1 ? (size_t)(S - 1) : 0;
    g->link_f = pl_calloc(nb + 1, sizeof *g->link_f);
    g->link_b = pl_calloc(nb + 1, sizeof *g->link_b);
    g->xfer_f_s = pl_calloc(nb + 1, sizeof(double));
    g->xfer_b_s = pl_calloc(nb + 1, sizeof(double));
    int64_t *keys = pl_calloc(2 * nb + 1, sizeof *keys);
    if (!g->link_f || !g->link_b || !g->xfer_f_s || !g->xfer_b_s || !keys) {
        free(keys);
        return pl_errf(e, PL_ENOMEM, "out of memory setting up links");
    }
    for (size_t b = 0; b < nb; b++) {
        keys[2 * b] = link_key(g, s->stage_rank[b], s->stage_rank[b + 1]);
        keys[2 * b + 1] = link_key(g, s->stage_rank[b + 1], s->stage_rank[b]);
    }
    qsort(keys, 2 * nb, sizeof *keys, cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < 2 * nb; i++)
        if (u == 0 || keys[u - 1] != keys[i]) keys[u++] = keys[i];
    g->nlinks = (int)u;
    g->link_free = pl_calloc(u + 1, sizeof(double));
    if (!g->link_free) {
        free(keys);
        return pl_errf(e, PL_ENOMEM, "out of memory setting up links");
    }
    for (size_t b = 0; b < nb; b++) {
        int src = s->stage_rank[b], dst = s->stage_rank[b + 1];
        int64_t kf = link_key(g, src, dst), kb = link_key(g, dst, src);
        g->link_f[b] = (int32_t)((int64_t *)bsearch(&kf, keys, u, sizeof *keys, cmp_i64) - keys);
        g->link_b[b] = (int32_t)((int64_t *)bsearch(&kb, keys, u, sizeof *keys, cmp_i64) - keys);
        int64_t bytes = g->c->boundary_bytes(g->c->ctx, (int)b);
        g->xfer_f_s[b] = src == dst ? 0 : g->c->transfer_s(g->c->ctx, src, dst, bytes);
        g->xfer_b_s[b] = src == dst ? 0 : g->c->transfer_s(g->c->ctx, dst, src, bytes);
        if (!(g->xfer_f_s[b] >= 0) || !(g->xfer_b_s[b] >= 0) || bytes < 0) {
            free(keys);
            return pl_errf(e, PL_EINPUT, "negative transfer time or size at the boundary of stage %zu", b);
        }
    }
    free(keys);
    return PL_OK;
}

/* Sets up per-stage sizes, all-reduce times and each rank's static memory. Returns PL_OK. */
static int setup_stages(eng *g, pl_err *e) {
    const sched *s = g->s;
    int S = s->stages;
    g->inflight_stage = pl_calloc((size_t)S, sizeof(int));
    g->rg_issued = pl_calloc((size_t)S, sizeof(int));
    g->rg_done = pl_calloc((size_t)S, sizeof(int));
    g->stash_b = pl_calloc((size_t)S, sizeof(int64_t));
    g->wstash_b = pl_calloc((size_t)S, sizeof(int64_t));
    g->input_b = pl_calloc((size_t)S, sizeof(int64_t));
    g->param_b = pl_calloc((size_t)S, sizeof(int64_t));
    g->reduce_s = pl_calloc((size_t)S, sizeof(double));
    if (!g->inflight_stage || !g->rg_issued || !g->rg_done || !g->stash_b || !g->wstash_b || !g->input_b ||
        !g->param_b || !g->reduce_s)
        return pl_errf(e, PL_ENOMEM, "out of memory setting up stages");
    const sim_config *cfg = g->cfg;
    for (int q = 0; q < S; q++) {
        void *x = g->c->ctx;
        g->stash_b[q] = g->c->stash_bytes(x, q);
        g->wstash_b[q] = g->c->w_stash_bytes(x, q);
        g->input_b[q] = g->c->input_bytes(x, q);
        g->param_b[q] = g->c->param_bytes(x, q);
        if (g->stash_b[q] < 0 || g->wstash_b[q] < 0 || g->input_b[q] < 0 || g->param_b[q] < 0)
            return pl_errf(e, PL_EINPUT, "stage %d: negative memory size", q);
        if (g->wstash_b[q] > g->stash_b[q]) g->wstash_b[q] = g->stash_b[q];
        if (g->input_b[q] > g->stash_b[q]) g->input_b[q] = g->stash_b[q];
        int rep = cfg->replicas ? cfg->replicas[q] : 1;
        if (rep < 1) return pl_errf(e, PL_EINPUT, "stage %d: replicas must be at least 1 (got %d)", q, rep);
        g->reduce_s[q] = rep > 1 ? g->c->allreduce_s(x, q, rep, g->param_b[q]) : 0;
        if (!(g->reduce_s[q] >= 0)) return pl_errf(e, PL_EINPUT, "stage %d: negative all-reduce time", q);
        rank_state *k = &g->rk[s->stage_rank[q]];
        double params = cfg->dtype_bytes > 0 ? (double)g->param_b[q] / cfg->dtype_bytes : 0;
        int64_t stat = g->param_b[q] /* gradients */ + (int64_t)(params * cfg->optimizer_bytes_per_param);
        int v = versions_of(g, 0);
        g->r->rank[s->stage_rank[q]].static_bytes += stat + g->param_b[q];
        k->mem += stat + (int64_t)v * g->param_b[q];
        k->versions += v;
    }
    return PL_OK;
}

void sim_config_init(sim_config *c) {
    memset(c, 0, sizeof *c);
    c->dtype_bytes = 4;
    c->optimizer_bytes_per_param = 8;
    c->microbatch_size = 1;
}

void sim_result_free(sim_result *r) {
    if (!r) return;
    if (r->trace)
        for (int q = 0; q < r->ranks; q++) free(r->trace[q]);
    free(r->trace);
    free(r->rank);
    free(r->iter_end_s);
    memset(r, 0, sizeof *r);
}

/* Frees the engine's arrays. */
static void eng_free(eng *g) {
    for (int t = 0; t < T_N; t++) free(g->tab[t]);
    free(g->rk);
    free(g->heap);
    free(g->link_f);
    free(g->link_b);
    free(g->xfer_f_s);
    free(g->xfer_b_s);
    free(g->link_free);
    free(g->inflight_stage);
    free(g->rg_issued);
    free(g->rg_done);
    free(g->stash_b);
    free(g->wstash_b);
    free(g->input_b);
    free(g->param_b);
    free(g->reduce_s);
    if (g->rng) gsl_rng_free(g->rng);
}

/* Computes the summary metrics once every rank finished. */
static void finish_metrics(eng *g) {
    sim_result *r = g->r;
    const sched *s = g->s;
    double mk = 0;
    for (int q = 0; q < s->ranks; q++) {
        if (g->rk[q].coll_free > mk) mk = g->rk[q].coll_free;
    }
    for (int it = 0; it < r->iterations; it++)
        if (r->iter_end_s[it] > mk) mk = r->iter_end_s[it];
    for (size_t l = 0; l < (size_t)g->nlinks; l++)
        if (g->link_free[l] > mk) mk = g->link_free[l];
    r->makespan_s = mk;
    double busy = 0, idle = 0;
    r->bubble_rate = 0;
    for (int q = 0; q < s->ranks; q++) {
        sim_rank_stats *st = &r->rank[q];
        st->span_s = g->rk[q].started ? g->rk[q].last_end - st->first_start_s : 0;
        if (st->busy_s > 0) {
            double rate = (st->span_s - st->busy_s) / st->busy_s;
            if (rate > r->bubble_rate) r->bubble_rate = rate;
        }
        st->idle_s = mk - st->busy_s;
        if (st->idle_s < 0) st->idle_s = 0;
        st->bubble = mk > 0 ? st->idle_s / mk : 0;
        busy += st->busy_s;
        idle += st->idle_s;
        if (st->peak_bytes > r->peak_bytes) r->peak_bytes = st->peak_bytes;
        if (g->cfg->capacity_bytes > 0 && st->peak_bytes > g->cfg->capacity_bytes) st->oom = r->oom = 1;
    }
    r->bubble_s = idle;
    r->bubble = mk > 0 ? 1.0 - busy / (mk * s->ranks) : 0;
    int n = r->iterations;
    r->iteration_time_s = n >= 2 ? (r->iter_end_s[n - 1] - r->iter_end_s[0]) / (n - 1) : mk;
    int mbs = g->cfg->microbatch_size > 0 ? g->cfg->microbatch_size : 1;
    r->throughput = r->iteration_time_s > 0 ? (double)s->microbatches * mbs / r->iteration_time_s : 0;
}

int sim_run(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e) {
    memset(r, 0, sizeof *r);
    if (!s->lowered) return pl_errf(e, PL_EINPUT, "the simulator runs lowered schedules (call sched_lower first)");
    if (cfg->cv < 0 || !isfinite(cfg->cv)) return pl_errf(e, PL_EINPUT, "the coefficient of variation must be >= 0 (got %g)", cfg->cv);
    eng g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.c = c;
    g.cfg = cfg;
    g.r = r;
    int iters = s->iterations > 0 ? s->iterations : 1;
    g.M = (int64_t)s->microbatches * iters;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            if (a->mb >= g.M) g.M = (int64_t)a->mb + 1;
            if (a->kind == SCHED_OVERLAP && a->mb2 >= g.M) g.M = (int64_t)a->mb2 + 1;
        }
    g.n_entries = (int64_t)s->stages * g.M;
    int rc = PL_OK;
    r->ranks = s->ranks;
    r->iterations = (int)((g.M + s->microbatches - 1) / s->microbatches);
    r->rank = pl_calloc((size_t)s->ranks, sizeof *r->rank);
    r->iter_end_s = pl_calloc((size_t)r->iterations, sizeof(double));
    g.rk = pl_calloc((size_t)s->ranks, sizeof *g.rk);
    if (!r->rank || !r->iter_end_s || !g.rk) { rc = pl_errf(e, PL_ENOMEM, "out of memory"); goto out; }
    for (int t = 0; t < T_N; t++) {
        g.tab[t] = malloc((size_t)g.n_entries * sizeof(double));
        if (!g.tab[t]) { rc = pl_errf(e, PL_ENOMEM, "out of memory: %lld table entries", (long long)g.n_entries); goto out; }
        for (int64_t i = 0; i < g.n_entries; i++) g.tab[t][i] = -1.0;
    }
    if (cfg->record_trace) {
        r->trace = pl_calloc((size_t)s->ranks, sizeof *r->trace);
        if (!r->trace) { rc = pl_errf(e, PL_ENOMEM, "out of memory for the trace"); goto out; }
        for (int q = 0; q < s->ranks; q++) {
            r->trace[q] = malloc((s->rank[q].n ? s->rank[q].n : 1) * sizeof(sim_slot));
            if (!r->trace[q]) { rc = pl_errf(e, PL_ENOMEM, "out of memory for the trace"); goto out; }
            for (size_t i = 0; i < s->rank[q].n; i++) r->trace[q][i] = (sim_slot){-1, -1, 0};
        }
    }
    for (int q = 0; q < s->ranks; q++) {
        if (s->rank[q].n > UINT32_MAX) { rc = pl_errf(e, PL_EINPUT, "too many actions on rank %d", q); goto out; }
        g.rk[q].acts = s->rank[q].acts;
        g.rk[q].n = (uint32_t)s->rank[q].n;
        g.rk[q].blocked = -1;
        r->actions += s->rank[q].n;
    }
    if ((rc = setup_links(&g, e)) != PL_OK) goto out;
    if ((rc = setup_stages(&g, e)) != PL_OK) goto out;
    for (int q = 0; q < s->ranks; q++) note_peaks(&g, q, &g.rk[q]);
    if (cfg->cv > 0) {
        g.rng = gsl_rng_alloc(gsl_rng_mt19937);
        if (!g.rng) { rc = pl_errf(e, PL_ENOMEM, "out of memory for the random generator"); goto out; }
        gsl_rng_set(g.rng, (unsigned long)cfg->seed);
        g.ln_sigma = sqrt(log(1.0 + cfg->cv * cfg->cv));
        g.ln_mu = -0.5 * g.ln_sigma * g.ln_sigma; /* mean factor 1 */
    }
    g.now = 0;
    for (int q = 0; q < s->ranks; q++)
        if (advance(&g, q)) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the event queue"); goto out; }
    while (g.hn > 0 && !g.err) {
        ev x;
        heap_pop(&g, &x);
        g.now = x.t;
        r->events++;
        uint64_t kind = x.payload >> 56, val = x.payload & (((uint64_t)1 << 56) - 1);
        int fail = 0;
        if (kind == EV_COMPUTE_END) {
            fail = compute_end(&g, (int)val);
        } else if (kind == EV_ARRIVE) {
            publish(&g, (int)(val >> 48), (int64_t)(val & (((uint64_t)1 << 48) - 1)), x.t);
        } else {
            int st = (int)val;
            g.rg_done[st]++;
            int rr = s->stage_rank[st];
            if (g.rk[rr].blocked == (int64_t)T_N * g.n_entries + st) fail = advance(&g, rr);
        }
        if (fail) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the event queue"); goto out; }
    }
    if (g.err == PL_ENOMEM) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the event queue"); goto out; }
    if (g.err) { rc = pl_errf(e, PL_EINPUT, "a compute time is negative or not a number"); goto out; }
    for (int q = 0; q < s->ranks; q++)
        if (g.rk[q].pc < g.rk[q].n) { rc = report_stuck(&g, e); goto out; }
    /* receives end when their data arrived */
    if (r->trace)
        for (int q = 0; q < s->ranks; q++)
            for (size_t i = 0; i < s->rank[q].n; i++) {
                const sched_action *a = &s->rank[q].acts[i];
                if (a->kind != SCHED_RECV_F && a->kind != SCHED_RECV_B) continue;
                double arr = g.tab[a->kind == SCHED_RECV_F ? T_ARRF : T_ARRB][entry(&g, a->stage, a->mb)];
                if (arr > r->trace[q][i].end_s) r->trace[q][i].end_s = arr;
            }
    finish_metrics(&g);
    r->state_bytes = (size_t)T_N * (size_t)g.n_entries * sizeof(double) + g.hcap * sizeof(ev) +
                     (size_t)s->ranks * (sizeof(rank_state) + sizeof(sim_rank_stats)) +
                     (size_t)g.nlinks * sizeof(double) +
                     (size_t)s->stages * (2 * sizeof(int32_t) + 3 * sizeof(double) + 3 * sizeof(int) + 4 * sizeof(int64_t)) +
                     (size_t)r->iterations * sizeof(double);
out:
    eng_free(&g);
    if (rc != PL_OK) sim_result_free(r);
    return rc;
}

int sim_repeat(const sched *s, const sim_costs *c, const sim_config *cfg, int repeat, sim_repeat_stats *st,
               sim_result *first, pl_err *e) {
    memset(st, 0, sizeof *st);
    if (repeat < 1) return pl_errf(e, PL_EINPUT, "--repeat must be at least 1");
    st->repeat = repeat;
    double si = 0, si2 = 0, stp = 0, stp2 = 0, sb = 0, sb2 = 0;
    for (int k = 0; k < repeat; k++) {
        sim_config cf = *cfg;
        cf.seed = cfg->seed + (uint64_t)k;
        if (k > 0) cf.record_trace = 0;
        sim_result r;
        int rc = sim_run(s, c, &cf, &r, e);
        if (rc != PL_OK) return rc;
        double it = r.iteration_time_s;
        si += it;
        si2 += it * it;
        stp += r.throughput;
        stp2 += r.throughput * r.throughput;
        sb += r.bubble;
        sb2 += r.bubble * r.bubble;
        if (k == 0 || it < st->iter_min_s) st->iter_min_s = it;
        if (k == 0 || it > st->iter_max_s) st->iter_max_s = it;
        if (k == 0 && first) *first = r;
        else sim_result_free(&r);
    }
    double n = repeat;
    st->iter_mean_s = si / n;
    st->thr_mean = stp / n;
    st->bubble_mean = sb / n;
    /* sample standard deviations (0 for one repetition) */
    st->iter_sd_s = repeat > 1 ? sqrt(fmax(0, (si2 - si * si / n) / (n - 1))) : 0;
    st->thr_sd = repeat > 1 ? sqrt(fmax(0, (stp2 - stp * stp / n) / (n - 1))) : 0;
    st->bubble_sd = repeat > 1 ? sqrt(fmax(0, (sb2 - sb * sb / n) / (n - 1))) : 0;
    return PL_OK;
}
