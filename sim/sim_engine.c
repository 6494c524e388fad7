/* sim_engine.c: the discrete-event engine: a 4-ary heap of (time, insertion order) events
 * drives per-rank compute streams, FIFO links and all-reduces over a lowered schedule.
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
 * - Replicated stages (sim_config.replicas, PipeDream's 1F1B-RR; see sim.h): a rank whose
 *   stages have n > 1 replicas runs n streams, each an engine "rank" (rank_state) walking the
 *   subsequence of the rank's list that belongs to its replica (microbatch k on replica
 *   k mod n; REDUCE_GRAD/STEP without a microbatch on every replica). Per-replica counters
 *   (stash, versions, all-reduces, deferred steps) live in eng.rst; an all-reduce is a
 *   collective of its round's replicas (rstage). Transfers of a replicated boundary use one
 *   link per replica pair and direction. Only the heap engine serves replicated runs.
 * Per-action state: 4 doubles per (stage, microbatch), the trace when asked, and for the flow
 * engine an 8-byte copy of each action (flow_act, one contiguous stream). */
#include "sim.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Tables of times per (stage, mb); -1 = not yet. Key of a wait = table * n_entries + idx. */
enum { T_FDONE, T_IDONE, T_ARRF, T_ARRB, T_N };
/* Event kinds, in the top bits of the payload. */
enum { EV_COMPUTE_END = 0, EV_ARRIVE = 1, EV_REDUCE_END = 2, EV_STEP_END = 3 };

/* The times of one (stage, mb): forward done, input-backward done, forward input arrived,
 * output gradient arrived. Together so that the actions around one microbatch share a line. */
typedef struct cell {
    uint64_t u[T_N]; /* ~bits of the time (times are >= +0.0, so never all ones); 0 = not yet,
                      * so zeroed memory (calloc, fresh mmap pages) needs no initialization */
} cell;

/* Returns the time stored in a cell field, or -1 when not known yet. */
static inline double cell_time(uint64_t u) {
    if (!u) return -1.0;
    u = ~u;
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Returns the cell encoding of time tm (>= 0). */
static inline uint64_t cell_enc(double tm) {
    uint64_t u;
    memcpy(&u, &tm, sizeof u);
    return ~u;
}

__extension__ typedef unsigned __int128 u128;

/* An event: 128-bit key (time bits, insertion number) and what happens. */
typedef struct ev {
    u128 key;
    uint64_t payload; /* kind << 56 | value */
} ev;

/* Everything the engine keeps per stage, in one place (one or two cache lines). */
typedef struct stage_state {
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
} stage_state;

/* One all-reduce collective of a replicated stage: it starts when its `expected` replicas
 * reached it (at the latest of their ready times and the stage's previous collective end). */
typedef struct rround {
    double ready, start, end;
    int32_t arrived, expected;
} rround;

/* The collectives of a replicated stage: REDUCE_GRAD of microbatch k (stash) joins round
 * k / n with the other replicas' microbatches of that round; the i-th REDUCE_GRAD without a
 * microbatch (flush, 2bw) of every replica forms round neg0 + i. */
typedef struct rstage {
    rround *rd;
    int64_t nrd, neg0;
    double last_end;
} rstage;

/* One action in the flow engine's compact stream: 8 bytes instead of 20 (the flow engine
 * hops between ranks, and at thousands of ranks loading the next action is its main miss).
 * ks = kind | stage << 4; an OVERLAP reads its second half from the schedule. */
typedef struct flow_act {
    int32_t mb;
    uint32_t ks;
} flow_act;

typedef struct rank_state {
    const sched_action *acts;
    const flow_act *fa; /* flow engine: this rank's part of the compact stream */
    uint32_t n, pc;
    int32_t id;       /* rank number */
    double coll_free; /* collective stream free at */
    double start_cur; /* start of the running compute */
    int cur_iter;
    int started;      /* 1 once a compute started */
    double last_end;  /* end of the last compute */
    double busy_late_s; /* compute of the actions of iterations >= 1 (the steady-state window's) */
    double cur;       /* flow engine: the rank's own clock (where the heap engine has "now") */
    int inflight;     /* microbatches stashed now */
    int versions;     /* weight versions now (sum over stages) */
    int64_t mem;      /* bytes now */
    int32_t rank, replica; /* the schedule rank this stream belongs to, and its replica */
    const uint32_t *orig;  /* replicated rank: position of each action in the rank's list, else NULL */
    sim_rank_stats st; /* statistics, copied to the result at the end */
} rank_state;

typedef struct eng {
    const sched *s;
    const sim_costs *c;
    const sim_config *cfg;
    sim_result *r;
    int64_t M, n_entries;
    cell *cells;        /* [stages * M] the four times of each (stage, mb), one 32-byte cell */
    size_t cells_bytes;
    int cells_mapped;   /* 1 when cells came from mmap (large), 0 from malloc */
    rank_state *rk;
    /* heap */
    ev *heap;
    size_t hn, hcap;
    uint64_t seq;
    double *link_free;        /* [nlinks] when each link is free */
    int nlinks;
    stage_state *st;          /* [stages] */
    int64_t *blocked;         /* [ranks] key each rank waits for; -1 runnable or running. Dense
                               * (not in rank_state) so waking checks stay in cache */
    int stash_policy;
    gsl_rng *rng;
    double ln_mu, ln_sigma;
    double now;
    int err;
    /* flow engine (see sim_flow below) */
    int *work;                /* [ranks] stack of runnable ranks */
    int nwork;
    uint8_t *queued;          /* [ranks] 1 while on the stack */
    int abort_flow;           /* 1: a cell was written twice; rerun with the heap engine */
    flow_act *fstream;        /* [actions] the compact stream of all ranks, rank by rank */
    size_t fstream_bytes;
    int fstream_mapped;       /* 1 when it came from mmap */
    size_t flow_events;       /* events the heap engine would have processed */
    int mem_overflow;         /* 1: some rank's memory passed INT64_MAX bytes (saturated there) */
    /* replicated stages (all NULL / 0 when nothing is replicated: streams = ranks) */
    int any_rep;              /* 1: some stage has more than one replica */
    int nstream;              /* engine streams (rank_state entries) */
    int *reps;                /* [stages] replicas per stage */
    int *sbase, *swidth;      /* [ranks] first stream of each rank, and its stream count */
    stage_state *rst;         /* per-replica state of replicated stages */
    rstage *rs;               /* [stages] collectives of replicated stages */
    sched_action *sacts;      /* the streams' subsequences of replicated ranks */
    uint32_t *sorig;          /* their positions in the ranks' lists */
    double *link_xfer;        /* [nlinks] transfer time of replica-pair links */
} eng;

/* Returns the state of (stage, replica): the stage's own when it is not replicated. */
static inline stage_state *sst(eng *g, int stage, int replica) {
    stage_state *x = &g->st[stage];
    return x->rep > 1 ? &g->rst[x->rbase + replica] : x;
}

/* Returns the engine stream that runs microbatch mb of stage (its rank when not replicated). */
static inline int stream_of(const eng *g, int stage, int64_t mb) {
    const stage_state *x = &g->st[stage];
    return x->rep > 1 ? x->stream0 + (int)(mb % x->rep) : x->stream0;
}

/* Returns the ordering key of an event at time t (>= 0) inserted as number seq: the bits of a
 * non-negative double order like the double, so (time, insertion order) is one integer. */
static inline u128 ev_key(double t, uint64_t seq) {
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (u128)bits << 64 | seq;
}

/* Pushes an event (4-ary heap: half the levels of a binary one, children share lines);
 * returns 0 or -1 when out of memory. */
static int heap_push(eng *g, double t, uint64_t kind, uint64_t val) {
    if (g->hn == g->hcap) {
        size_t cap = g->hcap ? g->hcap * 2 : 1024;
        ev *nh = pl_reallocarray(g->heap, cap, sizeof *nh);
        if (!nh) return -1;
        g->heap = nh;
        g->hcap = cap;
    }
    if (t == 0) t = 0; /* -0.0 -> +0.0 */
    ev x = {ev_key(t, g->seq++), kind << 56 | val};
    size_t i = g->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (x.key >= g->heap[p].key) break;
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
    ev *h = g->heap;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t m = c;
        if (c + 3 < n) {
            size_t a = h[c + 1].key < h[c].key ? c + 1 : c;
            size_t b = h[c + 3].key < h[c + 2].key ? c + 3 : c + 2;
            m = h[b].key < h[a].key ? b : a;
        } else {
            for (size_t j = c + 1; j < n; j++)
                if (h[j].key < h[m].key) m = j;
        }
        if (h[m].key >= x.key) break;
        h[i] = h[m];
        i = m;
    }
    if (n) h[i] = x;
}

/* Returns the time of an event. */
static inline double ev_time(const ev *x) {
    uint64_t bits = (uint64_t)(x->key >> 64);
    double t;
    memcpy(&t, &bits, sizeof t);
    return t;
}

/* Returns the table index of (stage, mb), or -1 when out of range. */
static inline int64_t entry(const eng *g, int stage, int mb) {
    if (stage < 0 || stage >= g->s->stages || mb < 0 || mb >= g->M) return -1;
    return (int64_t)stage * g->M + mb;
}

/* Returns 1 and the time when key (t, idx) is known; else sets the rank's wait and returns 0. */
static inline int need(eng *g, rank_state *k, int t, int64_t idx, double *latest) {
    if (idx < 0) {
        g->blocked[k->id] = -2; /* never satisfiable */
        return 0;
    }
    double v = cell_time(g->cells[idx].u[t]);
    if (v < 0) {
        g->blocked[k->id] = (int64_t)t * g->n_entries + idx;
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
/* Adds d bytes to rank k's memory, saturating at INT64_MAX and noting the overflow (reported
 * as an error after the run: no real device holds 8 EiB, so such sizes are input mistakes). */
static inline void mem_add(eng *g, rank_state *k, int64_t d) {
    if (__builtin_add_overflow(k->mem, d, &k->mem)) {
        k->mem = INT64_MAX;
        g->mem_overflow = 1;
    }
}

/* Returns a * b, or INT64_MAX (noting the overflow) when it does not fit. */
static inline int64_t mem_mul(eng *g, int64_t a, int64_t b) {
    int64_t x;
    if (__builtin_mul_overflow(a, b, &x)) {
        g->mem_overflow = 1;
        return INT64_MAX;
    }
    return x;
}

static void stash_change(eng *g, rank_state *k, int stage, int d) {
    stage_state *ss = sst(g, stage, k->replica);
    int old = ss->inflight;
    int nw = old + d;
    ss->inflight = nw;
    k->inflight += d;
    int dv = versions_of(g, nw) - versions_of(g, old);
    if (dv) {
        k->versions += dv;
        mem_add(g, k, mem_mul(g, dv, ss->param_b));
    }
}

/* Updates the rank's peaks after memory or stash changed. */
static inline void note_peaks(eng *g, int r, rank_state *k) {
    sim_rank_stats *st = &g->rk[r].st;
    if (k->mem > st->peak_bytes) st->peak_bytes = k->mem;
    if (k->inflight > st->peak_stash_mbs) st->peak_stash_mbs = k->inflight;
    if (k->versions > st->peak_weight_versions) st->peak_weight_versions = k->versions;
}

/* Memory effects at the start of a compute half (kind on stage) on rank k. */
static void mem_start(eng *g, rank_state *k, int kind, int stage) {
    int rec = g->s->recompute == SCHED_RECOMPUTE_FULL;
    if (kind == SCHED_F) {
        stash_change(g, k, stage, +1);
        mem_add(g, k, rec ? g->st[stage].input_b : g->st[stage].stash_b);
    } else if ((kind == SCHED_B || kind == SCHED_I) && rec) {
        mem_add(g, k, g->st[stage].stash_b - g->st[stage].input_b);
    }
}

/* Memory effects at the end of a compute half. */
static void mem_end(eng *g, rank_state *k, int kind, int stage) {
    if (kind == SCHED_B) {
        mem_add(g, k, -g->st[stage].stash_b);
        stash_change(g, k, stage, -1);
    } else if (kind == SCHED_I) {
        mem_add(g, k, -(g->st[stage].stash_b - g->st[stage].wstash_b));
    } else if (kind == SCHED_W) {
        mem_add(g, k, -g->st[stage].wstash_b);
        stash_change(g, k, stage, -1);
    }
}

/* Records that rank r's action at its pc ran [start, end]. */
static inline void trace_put(eng *g, int r, const rank_state *k, uint32_t pc, double start, double end) {
    (void)r;
    if (g->r->trace) {
        sim_slot *sl = &g->r->trace[k->rank][k->orig ? k->orig[pc] : pc];
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

/* Counts d seconds of compute of global microbatch mb towards the steady-state window when mb
 * belongs to iteration 1 or later (see sim.h: the window of asynchronous schedules). */
static inline void busy_late(eng *g, rank_state *k, int64_t mb, double d) {
    if (mb >= g->s->microbatches) k->busy_late_s += d;
}

/* Publishes time tm for (t, idx) and wakes a rank waiting for it (ranks of stage-1..stage+1). */
static void publish(eng *g, int t, int64_t idx, double tm);

/* Wait keys beyond the cells: a stage's all-reduces ended, its deferred steps ended, and
 * (replicated) its collective started. */
#define KEY_RG(g, st) ((int64_t)T_N * (g)->n_entries + (st))
#define KEY_STEP(g, st) ((int64_t)T_N * (g)->n_entries + (g)->s->stages + (st))
#define KEY_RG_START(g, st) ((int64_t)T_N * (g)->n_entries + 2 * (int64_t)(g)->s->stages + (st))

static int advance(eng *g, int r);

/* REDUCE_GRAD a of a replicated stage on stream r: joins its round's collective, which starts
 * once all its replicas joined, at the latest of their ready times (now, or when their
 * collective stream is free) and the stage's previous collective end; it then ends after the
 * stage's all-reduce time on every member, and the members waiting for its start go on.
 * Returns 0 (the stream goes on), 1 (the stream waits: blocking comm) or -1 (out of memory). */
static int reduce_join(eng *g, int r, rank_state *k, const sched_action *a) {
    int st_ = a->stage;
    stage_state *base = &g->st[st_], *me = sst(g, st_, k->replica);
    rstage *rs = &g->rs[st_];
    int64_t ri = a->mb >= 0 ? a->mb / base->rep : rs->neg0 + me->rg_neg++;
    if (ri < 0 || ri >= rs->nrd || rs->rd[ri].expected < 1) {
        g->blocked[k->id] = -2;
        return 1;
    }
    rround *rd = &rs->rd[ri];
    const int blocking = g->cfg->blocking_comm;
    double now = g->now;
    double ready = blocking ? now : (now > k->coll_free ? now : k->coll_free);
    if (rd->arrived == 0 || ready > rd->ready) rd->ready = ready;
    rd->arrived++;
    me->rg_issued++;
    trace_put(g, r, k, k->pc, now, now); /* the collective's times are filled in after the run */
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
            stage_state *m = sst(g, st_, j);
            m->rg_started++;
            m->reduce_end = end;
            rank_state *kj = &g->rk[base->stream0 + j];
            if (end > kj->coll_free) kj->coll_free = end;
        }
        if (heap_push(g, end, EV_REDUCE_END, (uint64_t)st_ | (uint64_t)cnt << 32)) return -1;
        int64_t key = KEY_RG_START(g, st_);
        for (int j = 0; j < cnt; j++) {
            int q = base->stream0 + j;
            if (q != r && g->blocked[q] == key && advance(g, q)) return -1;
        }
    }
    if (blocking) {
        g->blocked[k->id] = KEY_RG(g, st_);
        return 1;
    }
    return 0;
}

/* Runs rank r from its pc at the current time as far as it can; schedules its events. Returns
 * 0, or -1 on an allocation failure. */
static int advance(eng *g, int r) {
    rank_state *k = &g->rk[r];
    const sched *s = g->s;
    const int blocking = g->cfg->blocking_comm;
    double now = g->now;
    g->blocked[k->id] = -1;
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
            if (s->weights == SCHED_WEIGHTS_STASH && (a->kind == SCHED_F || a->kind == SCHED_OVERLAP) &&
                a->stage >= 0 && a->stage < s->stages && sst(g, a->stage, k->replica)->step_pending > 0) {
                g->blocked[k->id] = KEY_STEP(g, a->stage);
                return 0;
            }
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
                g->rk[r].st.first_start_s = now;
            }
            k->start_cur = now;
            g->rk[r].st.busy_s += d;
            busy_late(g, k, a->kind == SCHED_OVERLAP && a->mb2 > a->mb ? a->mb2 : a->mb, d);
            return heap_push(g, now + d, EV_COMPUTE_END, (uint64_t)r << 32 | k->pc);
        }
        case SCHED_SEND_F:
        case SCHED_SEND_B: {
            int fwd = a->kind == SCHED_SEND_F;
            if (!need(g, k, fwd ? T_FDONE : T_IDONE, entry(g, a->stage, a->mb), &lt)) return 0;
            int b = fwd ? a->stage : a->stage - 1; /* boundary b -> b+1 */
            if (b < 0 || b + 1 >= s->stages) { g->blocked[k->id] = -2; return 0; }
            int l = fwd ? g->st[b].link_f : g->st[b].link_b;
            double d;
            if (g->st[b].npair > 0) { /* replicated boundary: the link of this microbatch's replica pair */
                l += (int)(a->mb % g->st[b].npair);
                d = g->link_xfer[l];
            } else {
                d = fwd ? g->st[b].xfer_f_s : g->st[b].xfer_b_s;
            }
            double st = now > g->link_free[l] ? now : g->link_free[l];
            double end = st + d;
            g->link_free[l] = end;
            g->rk[r].st.comm_s += d;
            g->r->comm_s += d;
            int t = fwd ? T_ARRF : T_ARRB;
            int64_t dst = entry(g, fwd ? a->stage + 1 : a->stage - 1, a->mb);
            if (dst < 0) { g->blocked[k->id] = -2; return 0; }
            if (heap_push(g, end, EV_ARRIVE, (uint64_t)t << 48 | (uint64_t)dst)) return -1;
            trace_put(g, r, k, k->pc, st, end);
            k->pc++;
            if (blocking) {
                g->blocked[k->id] = (int64_t)t * g->n_entries + dst;
                return 0;
            }
            break;
        }
        case SCHED_RECV_F:
        case SCHED_RECV_B: {
            int t = a->kind == SCHED_RECV_F ? T_ARRF : T_ARRB;
            int64_t idx = entry(g, a->stage, a->mb);
            if (idx < 0) { g->blocked[k->id] = -2; return 0; }
            const sim_slot *sl = g->r->trace ? &g->r->trace[k->rank][k->orig ? k->orig[k->pc] : k->pc] : NULL;
            if (blocking && !g->cells[idx].u[t]) {
                if (sl && sl->start_s < 0) trace_put(g, r, k, k->pc, now, now);
                g->blocked[k->id] = (int64_t)t * g->n_entries + idx;
                return 0;
            }
            if (!sl || sl->start_s < 0) trace_put(g, r, k, k->pc, now, now);
            k->pc++;
            break;
        }
        case SCHED_REDUCE_GRAD: {
            int st_ = a->stage;
            if (st_ < 0 || st_ >= s->stages) { g->blocked[k->id] = -2; return 0; }
            if (g->st[st_].rep > 1) {
                int jr = reduce_join(g, r, k, a);
                if (jr) return jr < 0 ? -1 : 0;
                break;
            }
            double d = g->st[st_].reduce_s;
            double st = blocking ? now : (now > k->coll_free ? now : k->coll_free);
            double end = st + d;
            k->coll_free = end;
            g->rk[r].st.reduce_s += d;
            g->st[st_].rg_issued++;
            g->st[st_].reduce_end = end;
            if (heap_push(g, end, EV_REDUCE_END, (uint64_t)st_)) return -1;
            trace_put(g, r, k, k->pc, st, end);
            k->pc++;
            if (blocking) {
                g->blocked[k->id] = KEY_RG(g, st_);
                return 0;
            }
            break;
        }
        case SCHED_STEP: {
            int st_ = a->stage;
            double d = st_ >= 0 && st_ < s->stages ? g->c->step_s(g->c->ctx, st_) : 0;
            if (!(d >= 0)) d = 0;
            stage_state *me = st_ >= 0 && st_ < s->stages ? sst(g, st_, k->replica) : NULL;
            if (me && me->rg_done < me->rg_issued) {
                if (!blocking && s->weights != SCHED_WEIGHTS_FLUSH) {
                    /* replicated: the deferred step needs its collective's end, known once
                     * every replica of the round reached it */
                    if (g->st[st_].rep > 1 && me->rg_started < me->rg_issued) {
                        g->blocked[k->id] = KEY_RG_START(g, st_);
                        return 0;
                    }
                    /* stash and 2bw: the update runs beside the compute stream once its
                     * all-reduce ended (its time on the collective stream); stash forwards of
                     * the stage wait for it, 2bw forwards use the other buffer */
                    double end = (me->reduce_end > now ? me->reduce_end : now) + d;
                    if (end > k->coll_free) k->coll_free = end;
                    me->step_pending++;
                    if (heap_push(g, end, EV_STEP_END, (uint64_t)st_ | (uint64_t)k->replica << 32)) return -1;
                    trace_put(g, r, k, k->pc, now, end);
                    iter_note(g, k->cur_iter, end);
                    k->pc++;
                    break;
                }
                g->blocked[k->id] = KEY_RG(g, st_);
                return 0;
            }
            if (d > 0) {
                if (!k->started) {
                    k->started = 1;
                    g->rk[r].st.first_start_s = now;
                }
                k->start_cur = now;
                g->rk[r].st.busy_s += d;
                if (k->cur_iter >= 1) k->busy_late_s += d;
                return heap_push(g, now + d, EV_COMPUTE_END, (uint64_t)r << 32 | k->pc);
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
    g->cells[idx].u[t] = cell_enc(tm);
    int64_t key = (int64_t)t * g->n_entries + idx;
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
 * continues at v = max(now, v); the flow engine takes the same max when the value is known. */

/* Publishes tm for (t, idx) and pushes the ranks (of stage - 1 .. stage + 1) waiting for it. */
static void flow_publish(eng *g, int t, int stage, int64_t idx, double tm) {
    cell *cl = &g->cells[idx];
    if (cl->u[t]) g->abort_flow = 1;
    cl->u[t] = cell_enc(tm);
    int64_t key = (int64_t)t * g->n_entries + idx;
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
                const rank_state *kr = &g->rk[rr];
                __builtin_prefetch(&kr->fa[kr->pc]);
            }
        }
    }
}

/* Ends a compute action a of rank r that ran [start, end] (the heap engine's compute_end). */
static inline void flow_compute_end(eng *g, int r, rank_state *k, int kind, int stage, int mb, double start,
                                    double end) {
    int it = -1;
    switch (kind) {
    case SCHED_F:
        trace_put(g, r, k, k->pc, start, end);
        k->pc++;
        flow_publish(g, T_FDONE, stage, entry(g, stage, mb), end);
        it = mb;
        break;
    case SCHED_B:
    case SCHED_I:
    case SCHED_W:
        mem_end(g, k, kind, stage);
        trace_put(g, r, k, k->pc, start, end);
        k->pc++;
        if (kind != SCHED_W) flow_publish(g, T_IDONE, stage, entry(g, stage, mb), end);
        it = mb;
        break;
    case SCHED_OVERLAP: {
        const sched_action *a = &k->acts[k->pc];
        mem_end(g, k, a->kind2, a->stage2);
        trace_put(g, r, k, k->pc, start, end);
        k->pc++;
        flow_publish(g, T_FDONE, a->stage, entry(g, a->stage, a->mb), end);
        flow_publish(g, T_IDONE, a->stage2, entry(g, a->stage2, a->mb2), end);
        it = a->mb > a->mb2 ? a->mb : a->mb2;
        break;
    }
    default: /* STEP with a cost */
        trace_put(g, r, k, k->pc, start, end);
        k->pc++;
        break;
    }
    if (it >= 0) k->cur_iter = (int)(it / g->s->microbatches);
    k->last_end = end;
    iter_note(g, k->cur_iter, end);
}

/* Runs rank r on its own clock as far as its data allows (the heap engine's advance plus
 * compute_end, fused). */
static void flow_advance(eng *g, int r) {
    rank_state *k = &g->rk[r];
    const sched *s = g->s;
    const int blocking = g->cfg->blocking_comm;
    double now = k->cur;
    g->blocked[r] = -1;
    while (k->pc < k->n && !g->err) {
        const flow_act x = k->fa[k->pc];
        __builtin_prefetch(&k->fa[k->pc + 8]); /* the stream has 8 slack entries at its end */
        const int kind = (int)(x.ks & 15), stage = (int)(x.ks >> 4), mb = x.mb;
        double lt = now;
        switch (kind) {
        case SCHED_F:
        case SCHED_B:
        case SCHED_I:
        case SCHED_W:
        case SCHED_OVERLAP: {
            int ok;
            const sched_action *a = kind == SCHED_OVERLAP ? &k->acts[k->pc] : NULL;
            if (kind == SCHED_F) ok = fwd_ready(g, k, stage, mb, &lt);
            else if (kind == SCHED_W) ok = need(g, k, T_IDONE, entry(g, stage, mb), &lt);
            else if (a) ok = fwd_ready(g, k, stage, mb, &lt) && bwd_ready(g, k, a->stage2, a->mb2, &lt);
            else ok = bwd_ready(g, k, stage, mb, &lt);
            if (!ok) { k->cur = now; return; }
            now = lt;
            /* the cells this rank and its neighbours touch a few microbatches on: a row of the
             * cells is walked in microbatch order, too many rows at once for the hardware */
            int64_t pi = (int64_t)stage * g->M + mb + 4, pj = kind == SCHED_F ? pi + g->M : pi - g->M;
            if (pi >= 0 && pi < g->n_entries) __builtin_prefetch(&g->cells[pi]);
            if (pj >= 0 && pj < g->n_entries) __builtin_prefetch(&g->cells[pj]);
            double d;
            if (a) {
                d = compute_time(g, stage, SCHED_F, mb) + compute_time(g, a->stage2, a->kind2, a->mb2);
                mem_start(g, k, SCHED_F, stage);
                mem_start(g, k, a->kind2, a->stage2);
            } else {
                d = compute_time(g, stage, kind, mb);
                mem_start(g, k, kind, stage);
            }
            note_peaks(g, r, k);
            if (!k->started) {
                k->started = 1;
                k->st.first_start_s = now;
            }
            k->st.busy_s += d;
            busy_late(g, k, a && a->mb2 > mb ? a->mb2 : mb, d);
            double end = now + d;
            g->flow_events++;
            flow_compute_end(g, r, k, kind, stage, mb, now, end);
            now = end;
            break;
        }
        case SCHED_SEND_F:
        case SCHED_SEND_B: {
            int fwd = kind == SCHED_SEND_F;
            if (!need(g, k, fwd ? T_FDONE : T_IDONE, entry(g, stage, mb), &lt)) { k->cur = now; return; }
            now = lt;
            int b = fwd ? stage : stage - 1;
            if (b < 0 || b + 1 >= s->stages) { g->blocked[r] = -2; k->cur = now; return; }
            int l = fwd ? g->st[b].link_f : g->st[b].link_b;
            double d = fwd ? g->st[b].xfer_f_s : g->st[b].xfer_b_s;
            double st = now > g->link_free[l] ? now : g->link_free[l];
            double end = st + d;
            g->link_free[l] = end;
            k->st.comm_s += d;
            g->r->comm_s += d;
            int t = fwd ? T_ARRF : T_ARRB;
            int64_t dst = entry(g, fwd ? stage + 1 : stage - 1, mb);
            if (dst < 0) { g->blocked[r] = -2; k->cur = now; return; }
            g->flow_events++;
            flow_publish(g, t, fwd ? stage + 1 : stage - 1, dst, end);
            trace_put(g, r, k, k->pc, st, end);
            k->pc++;
            if (blocking && end > now) now = end; /* waits for its arrival */
            break;
        }
        case SCHED_RECV_F:
        case SCHED_RECV_B: {
            int t = kind == SCHED_RECV_F ? T_ARRF : T_ARRB;
            int64_t idx = entry(g, stage, mb);
            if (idx < 0) { g->blocked[r] = -2; k->cur = now; return; }
            if (!g->r->trace || g->r->trace[r][k->pc].start_s < 0) trace_put(g, r, k, k->pc, now, now);
            if (blocking) {
                uint64_t u = g->cells[idx].u[t];
                if (!u) {
                    g->blocked[r] = (int64_t)t * g->n_entries + idx;
                    k->cur = now;
                    return;
                }
                double v = cell_time(u);
                if (v > now) now = v;
            }
            k->pc++;
            break;
        }
        case SCHED_REDUCE_GRAD: {
            int st_ = stage;
            if (st_ < 0 || st_ >= s->stages) { g->blocked[r] = -2; k->cur = now; return; }
            double d = g->st[st_].reduce_s;
            double st = blocking ? now : (now > k->coll_free ? now : k->coll_free);
            double end = st + d;
            k->coll_free = end;
            k->st.reduce_s += d;
            g->st[st_].rg_issued++;
            g->st[st_].reduce_end = end;
            g->flow_events++;
            trace_put(g, r, k, k->pc, st, end);
            k->pc++;
            if (blocking && end > now) now = end;
            break;
        }
        case SCHED_STEP: {
            int st_ = stage;
            double d = st_ >= 0 && st_ < s->stages ? g->c->step_s(g->c->ctx, st_) : 0;
            if (!(d >= 0)) d = 0;
            /* flush: waits for the stage's all-reduces, all issued earlier on this rank */
            if (st_ >= 0 && st_ < s->stages && g->st[st_].rg_issued > 0 && g->st[st_].reduce_end > now)
                now = g->st[st_].reduce_end;
            if (d > 0) {
                if (!k->started) {
                    k->started = 1;
                    k->st.first_start_s = now;
                }
                k->st.busy_s += d;
                if (k->cur_iter >= 1) k->busy_late_s += d;
                double end = now + d;
                g->flow_events++;
                flow_compute_end(g, r, k, kind, stage, mb, now, end);
                now = end;
                break;
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
    k->cur = now;
}

/* Returns 1 when the flow engine gives the heap engine's results for this run (see above). */
static int sim_flow_ok(const eng *g) {
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
static void show_progress(const eng *g) {
    if (!g->cfg->progress) return;
    uint64_t done = 0;
    for (int q = 0; q < g->nstream; q++) done += g->rk[q].pc;
    pl_progress_set(g->cfg->progress, g->cfg->progress_base + done);
}

/* Runs the whole simulation with the flow engine. */
static void sim_flow(eng *g) {
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
        if ((++steps & 4095) == 0) show_progress(g);
    }
}

/* Prefetches what the next event will touch (its rank's state and actions, or the cell an
 * arrival writes), so that its cache misses overlap the current event's work. Large pipelines
 * interleave thousands of ranks and every event lands on a cold rank otherwise. */
static inline void prefetch_event(const eng *g, const ev *x) {
    uint64_t p = x->payload;
    uint64_t kind = p >> 56, val = p & (((uint64_t)1 << 56) - 1);
    if (kind == EV_COMPUTE_END) {
        int r = (int)(val >> 32);
        uint32_t pc = (uint32_t)val;
        __builtin_prefetch(&g->rk[r]);
        __builtin_prefetch(&g->rk[r].acts[pc]);
        __builtin_prefetch(&g->rk[r].acts[pc + 1]);
    } else if (kind == EV_ARRIVE) {
        int64_t idx = (int64_t)(val & (((uint64_t)1 << 48) - 1));
        const rank_state *k = &g->rk[g->st[idx / g->M].stream0];
        __builtin_prefetch(&g->cells[idx]);
        __builtin_prefetch(&k->acts[k->pc]);
    }
}

/* Prefetches the cell of (stage, mb) when it exists. */
static inline void prefetch_cell(const eng *g, int stage, int mb) {
    int64_t idx = entry(g, stage, mb);
    if (idx >= 0) __builtin_prefetch(&g->cells[idx]);
}

/* For the next event (a compute end), reads the rank's next few actions (their lines were
 * prefetched one event earlier, when the event was a child of the root) and prefetches the
 * cells those computes will read: the second stage of a two-stage prefetch pipeline. */
static inline void prefetch_deps(const eng *g, const ev *x) {
    uint64_t p = x->payload;
    if (p >> 56 != EV_COMPUTE_END) return;
    int r = (int)((p >> 32) & 0xffffff);
    uint32_t pc = (uint32_t)p;
    const rank_state *rk = &g->rk[r];
    for (uint32_t j = pc + 1; j < pc + 4 && j < rk->n; j++) {
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
static inline void prefetch_next(const eng *g) {
    size_t n = g->hn < 5 ? g->hn : 5;
    prefetch_deps(g, &g->heap[0]);
    for (size_t i = 0; i < n; i++) prefetch_event(g, &g->heap[i]);
}

/* Fills e with a report of the ranks that cannot proceed. Returns PL_EINPUT. */
static int report_stuck(eng *g, pl_err *e) {
    pl_buf b;
    pl_buf_init(&b);
    int n = 0;
    for (int r = 0; r < g->nstream; r++) {
        rank_state *k = &g->rk[r];
        if (k->pc >= k->n) continue;
        if (n < 4) {
            char act[96], rp[32] = "";
            sched_action_format(&k->acts[k->pc], act, sizeof act);
            if (g->swidth && g->swidth[k->rank] > 1) snprintf(rp, sizeof rp, " (replica %d)", k->replica);
            pl_buf_printf(&b, "%srank %d%s at action %u (%s)", n ? "; " : "", k->rank, rp,
                          (k->orig ? k->orig[k->pc] : k->pc) + 1, act);
        }
        n++;
    }
    pl_errf(e, PL_EINPUT, "simulation stuck (deadlock or missing data): %s%s [%d %s blocked]",
            b.data ? b.data : "", n > 4 ? "; ..." : "", n, g->any_rep ? "ranks or replicas" : "ranks");
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
    int64_t *keys = pl_calloc(2 * nb + 1, sizeof *keys);
    if (!keys) {
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
    /* replicated boundaries between two ranks: one link per replica pair and direction, the
     * pair of microbatch k being k mod lcm(n1, n2) (at most one per microbatch) */
    size_t extra = 0;
    for (size_t b = 0; b < nb; b++) {
        int r1 = g->reps[b], r2 = g->reps[b + 1];
        g->st[b].npair = 0;
        if ((r1 > 1 || r2 > 1) && s->stage_rank[b] != s->stage_rank[b + 1]) {
            int64_t x = r1, y = r2;
            while (y) { int64_t t = x % y; x = y; y = t; }
            int64_t l = (int64_t)r1 / x * r2;
            if (l > g->M) l = g->M;
            if (l < 1) l = 1;
            g->st[b].npair = (int32_t)l;
            extra += 2 * (size_t)l;
        }
    }
    if (u + extra > (size_t)INT32_MAX) {
        free(keys);
        return pl_errf(e, PL_EINPUT, "too many links (%zu replica pairs)", extra);
    }
    g->nlinks = (int)(u + extra);
    g->link_free = pl_calloc(u + extra + 1, sizeof(double));
    if (extra) g->link_xfer = pl_calloc(u + extra + 1, sizeof(double));
    if (!g->link_free || (extra && !g->link_xfer)) {
        free(keys);
        return pl_errf(e, PL_ENOMEM, "out of memory setting up links");
    }
    const size_t nkeys = u; /* u runs on below as the first free replica-pair link */
    for (size_t b = 0; b < nb; b++) {
        int src = s->stage_rank[b], dst = s->stage_rank[b + 1];
        int64_t kf = link_key(g, src, dst), kb = link_key(g, dst, src);
        g->st[b].link_f = (int32_t)((int64_t *)bsearch(&kf, keys, nkeys, sizeof *keys, cmp_i64) - keys);
        g->st[b].link_b = (int32_t)((int64_t *)bsearch(&kb, keys, nkeys, sizeof *keys, cmp_i64) - keys);
        int64_t bytes = g->c->boundary_bytes(g->c->ctx, (int)b);
        g->st[b].xfer_f_s = src == dst ? 0 : g->c->transfer_s(g->c->ctx, src, dst, bytes);
        g->st[b].xfer_b_s = src == dst ? 0 : g->c->transfer_s(g->c->ctx, dst, src, bytes);
        if (!(g->st[b].xfer_f_s >= 0) || !(g->st[b].xfer_b_s >= 0) || bytes < 0) {
            free(keys);
            return pl_errf(e, PL_EINPUT, "negative transfer time or size at the boundary of stage %zu", b);
        }
        if (g->st[b].npair > 0) {
            int l = g->st[b].npair, r1 = g->reps[b], r2 = g->reps[b + 1];
            g->st[b].link_f = (int32_t)u;
            g->st[b].link_b = (int32_t)u + l;
            for (int p = 0; p < l; p++) {
                int i = p % r1, j = p % r2; /* replica i of stage b sends to replica j of b + 1 */
                double tf, tb;
                if (g->c->replica_transfer_s) {
                    tf = g->c->replica_transfer_s(g->c->ctx, src, i, dst, j, bytes);
                    tb = g->c->replica_transfer_s(g->c->ctx, dst, j, src, i, bytes);
                } else {
                    tf = g->st[b].xfer_f_s;
                    tb = g->st[b].xfer_b_s;
                }
                if (!(tf >= 0) || !(tb >= 0)) {
                    free(keys);
                    return pl_errf(e, PL_EINPUT, "negative transfer time at the boundary of stage %zu (replicas %d -> %d)",
                                   b, i, j);
                }
                g->link_xfer[u + (size_t)p] = tf;
                g->link_xfer[u + (size_t)l + (size_t)p] = tb;
            }
            u += 2 * (size_t)l;
        }
    }
    free(keys);
    return PL_OK;
}

/* Sets up per-stage sizes, all-reduce times and each rank's static memory. Returns PL_OK. */
static int setup_stages(eng *g, pl_err *e) {
    const sched *s = g->s;
    int S = s->stages;
    const sim_config *cfg = g->cfg;
    for (int q = 0; q < S; q++) {
        void *x = g->c->ctx;
        g->st[q].stash_b = g->c->stash_bytes(x, q);
        g->st[q].wstash_b = g->c->w_stash_bytes(x, q);
        g->st[q].input_b = g->c->input_bytes(x, q);
        g->st[q].param_b = g->c->param_bytes(x, q);
        if (g->st[q].stash_b < 0 || g->st[q].wstash_b < 0 || g->st[q].input_b < 0 || g->st[q].param_b < 0)
            return pl_errf(e, PL_EINPUT, "stage %d: negative memory size", q);
        if (g->st[q].wstash_b > g->st[q].stash_b) g->st[q].wstash_b = g->st[q].stash_b;
        if (g->st[q].input_b > g->st[q].stash_b) g->st[q].input_b = g->st[q].stash_b;
        int rep = g->reps[q];
        g->st[q].reduce_s = rep > 1 ? g->c->allreduce_s(x, q, rep, g->st[q].param_b) : 0;
        if (!(g->st[q].reduce_s >= 0)) return pl_errf(e, PL_EINPUT, "stage %d: negative all-reduce time", q);
        double params = cfg->dtype_bytes > 0 ? (double)g->st[q].param_b / cfg->dtype_bytes : 0;
        double opt_b = params * cfg->optimizer_bytes_per_param;
        if (!(opt_b < 0x1p62))
            return pl_errf(e, PL_EINPUT,
                           "stage %d: the optimizer state (%.6g parameters x %g bytes = %.6g bytes) is too large "
                           "to count in 64 bits; check the parameter, dtype and optimizer sizes",
                           q, params, cfg->optimizer_bytes_per_param, opt_b);
        int64_t stat0 = mem_mul(g, 1, g->st[q].param_b) /* gradients */;
        int64_t one_version = g->st[q].param_b;
        int v = versions_of(g, 0);
        /* every replica (a device of its own) holds the stage's weights, gradients and state */
        for (int j = 0; j < rep; j++) {
            rank_state *k = &g->rk[g->st[q].stream0 + j];
            int64_t stat = stat0;
            if (__builtin_add_overflow(stat, (int64_t)opt_b, &stat) ||
                __builtin_add_overflow(k->st.static_bytes, stat, &k->st.static_bytes) ||
                __builtin_add_overflow(k->st.static_bytes, one_version, &k->st.static_bytes))
                return pl_errf(e, PL_EINPUT,
                               "rank %d: its static memory (parameters %lld bytes per stage, gradients, optimizer "
                               "state) is too large to count in 64 bits",
                               s->stage_rank[q], (long long)g->st[q].param_b);
            mem_add(g, k, stat);
            mem_add(g, k, mem_mul(g, v, one_version));
            k->versions += v;
        }
    }
    if (!g->any_rep) return PL_OK;
    /* per-replica copies of the replicated stages' state, and their collectives */
    size_t nr = 0;
    for (int q = 0; q < S; q++)
        if (g->reps[q] > 1) {
            g->st[q].rbase = (int32_t)nr;
            nr += (size_t)g->reps[q];
        }
    g->rst = pl_calloc(nr ? nr : 1, sizeof *g->rst);
    g->rs = pl_calloc((size_t)S, sizeof *g->rs);
    if (!g->rst || !g->rs) return pl_errf(e, PL_ENOMEM, "out of memory for replicated stages");
    for (int q = 0; q < S; q++)
        for (int j = 0; j < (g->reps[q] > 1 ? g->reps[q] : 0); j++) g->rst[g->st[q].rbase + j] = g->st[q];
    for (int q = 0; q < S; q++) {
        int n = g->reps[q];
        if (n <= 1) continue;
        const sched_rank *rk = &s->rank[s->stage_rank[q]];
        int64_t maxmb = -1, nneg = 0;
        for (size_t i = 0; i < rk->n; i++) {
            const sched_action *a = &rk->acts[i];
            if (a->kind != SCHED_REDUCE_GRAD || a->stage != q) continue;
            if (a->mb >= 0) { if (a->mb > maxmb) maxmb = a->mb; }
            else nneg++;
        }
        rstage *rs = &g->rs[q];
        rs->neg0 = maxmb >= 0 ? maxmb / n + 1 : 0;
        rs->nrd = rs->neg0 + nneg;
        rs->rd = pl_calloc((size_t)(rs->nrd ? rs->nrd : 1), sizeof *rs->rd);
        int32_t *top = pl_calloc((size_t)(rs->neg0 ? rs->neg0 : 1), sizeof *top); /* largest replica + 1 per round */
        if (!rs->rd || !top) {
            free(top);
            return pl_errf(e, PL_ENOMEM, "out of memory for the all-reduces of stage %d", q);
        }
        for (size_t i = 0; i < rk->n; i++) {
            const sched_action *a = &rk->acts[i];
            if (a->kind != SCHED_REDUCE_GRAD || a->stage != q || a->mb < 0) continue;
            rs->rd[a->mb / n].expected++;
            if ((int32_t)(a->mb % n) + 1 > top[a->mb / n]) top[a->mb / n] = (int32_t)(a->mb % n) + 1;
        }
        for (int64_t i = 0; i < rs->neg0; i++)
            if (rs->rd[i].expected != top[i]) {
                int t = top[i];
                free(top);
                return pl_errf(e, PL_EINPUT,
                               "stage %d (%d replicas): the all-reduces of microbatches %lld..%lld are not those of "
                               "replicas 0..%d: each replicated round needs its first replicas' microbatches",
                               q, n, (long long)(i * n), (long long)(i * n + n - 1), t - 1);
            }
        free(top);
        for (int64_t i = rs->neg0; i < rs->nrd; i++) rs->rd[i].expected = n;
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

/* Returns n zeroed bytes (at least 1): from calloc when small, else from an anonymous mapping
 * with transparent huge pages (*mapped = 1). NULL when out of memory. */
static void *big_calloc(size_t n, int *mapped) {
    *mapped = 0;
    if (n < ((size_t)8 << 20)) return calloc(n ? n : 1, 1);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *mapped = 1;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

/* Frees what big_calloc returned. */
static void big_free(void *p, size_t n, int mapped) {
    if (p && mapped) munmap(p, n);
    else free(p);
}

/* Frees the engine's arrays. */
static void eng_free(eng *g) {
    if (g->cells && g->cells_mapped) munmap(g->cells, g->cells_bytes);
    else free(g->cells);
    free(g->rk);
    free(g->heap);
    free(g->link_free);
    free(g->st);
    free(g->blocked);
    free(g->work);
    free(g->queued);
    big_free(g->fstream, g->fstream_bytes, g->fstream_mapped);
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

/* Fills st, the statistics of rank q, from its replicas' streams (sim.h): busy is the mean over
 * the replicas; communication and all-reduce time are summed (each collective counted once);
 * memory, stash and versions are the largest of one replica (one device); the span runs from
 * the first replica's first compute to the last one's last end. */
static void rank_of_replicas(const eng *g, int q, sim_rank_stats *st) {
    int w = g->swidth[q];
    const rank_state *k0 = &g->rk[g->sbase[q]];
    double busy = 0, comm = 0, red = 0, first = 0, last = 0;
    int started = 0;
    sim_rank_stats a = k0->st;
    for (int j = 0; j < w; j++) {
        const rank_state *k = &k0[j];
        busy += g->r->steady_state ? k->busy_late_s : k->st.busy_s;
        comm += k->st.comm_s;
        red += k->st.reduce_s;
        if (k->started) {
            if (!started || k->st.first_start_s < first) first = k->st.first_start_s;
            if (!started || k->last_end > last) last = k->last_end;
            started = 1;
        }
        if (k->st.peak_bytes > a.peak_bytes) a.peak_bytes = k->st.peak_bytes;
        if (k->st.static_bytes > a.static_bytes) a.static_bytes = k->st.static_bytes;
        if (k->st.peak_stash_mbs > a.peak_stash_mbs) a.peak_stash_mbs = k->st.peak_stash_mbs;
        if (k->st.peak_weight_versions > a.peak_weight_versions) a.peak_weight_versions = k->st.peak_weight_versions;
    }
    a.busy_s = busy / w;
    a.comm_s = comm;
    a.reduce_s = red;
    a.first_start_s = started ? first : 0;
    a.span_s = started ? last - first : 0;
    *st = a;
}

/* Computes the summary metrics once every rank finished. */
static void finish_metrics(eng *g) {
    sim_result *r = g->r;
    const sched *s = g->s;
    double mk = 0;
    for (int q = 0; q < g->nstream; q++) {
        if (g->rk[q].coll_free > mk) mk = g->rk[q].coll_free;
    }
    for (int it = 0; it < r->iterations; it++)
        if (r->iter_end_s[it] > mk) mk = r->iter_end_s[it];
    for (size_t l = 0; l < (size_t)g->nlinks; l++)
        if (g->link_free[l] > mk) mk = g->link_free[l];
    r->makespan_s = mk;
    int n = r->iterations;
    r->iteration_time_s = n >= 2 && !g->cfg->whole_run ? (r->iter_end_s[n - 1] - r->iter_end_s[0]) / (n - 1) : n > 1 ? mk / n : mk;
    /* the bubble window (sim.h): an asynchronous schedule's steady state over iterations
     * 1..N-1, the window its iteration time is measured over; else the whole run */
    r->steady_state = s->weights != SCHED_WEIGHTS_FLUSH && n >= 2 && !g->cfg->whole_run;
    double win = r->steady_state ? r->iter_end_s[n - 1] - r->iter_end_s[0] : mk;
    if (r->steady_state && !(win > 0)) { /* no time between the ends (zero-cost iterations) */
        r->steady_state = 0;
        win = mk;
    }
    r->window_s = win;
    double busy = 0, idle = 0;
    r->zb_bubble_rate = 0;
    for (int q = 0; q < s->ranks; q++) {
        const rank_state *k0 = &g->rk[g->sbase[q]];
        r->rank[q] = k0->st;
        sim_rank_stats *st = &r->rank[q];
        st->span_s = k0->started ? k0->last_end - st->first_start_s : 0;
        if (r->steady_state) st->busy_s = k0->busy_late_s;
        if (g->swidth[q] > 1) rank_of_replicas(g, q, st);
        st->idle_s = win - st->busy_s;
        if (st->idle_s < 0) st->idle_s = 0;
        st->bubble_fraction = win > 0 ? st->idle_s / win : 0;
        if (r->steady_state) {
            /* the paper's (cost - compute) / cost of one steady-state iteration, worst rank */
            if (st->bubble_fraction > r->zb_bubble_rate) r->zb_bubble_rate = st->bubble_fraction;
        } else if (st->span_s > 0) {
            double rate = (st->span_s - st->busy_s) / st->span_s;
            if (rate > r->zb_bubble_rate) r->zb_bubble_rate = rate;
        }
        busy += st->busy_s;
        idle += st->idle_s;
        if (st->peak_bytes > r->peak_bytes) r->peak_bytes = st->peak_bytes;
        if (g->cfg->capacity_bytes > 0 && st->peak_bytes > g->cfg->capacity_bytes) st->oom = r->oom = 1;
    }
    r->idle_s = idle;
    r->bubble_fraction = win > 0 ? 1.0 - busy / (win * s->ranks) : 0;
    if (r->bubble_fraction < 0) r->bubble_fraction = 0;
    int mbs = g->cfg->microbatch_size > 0 ? g->cfg->microbatch_size : 1;
    r->throughput = r->iteration_time_s > 0 ? (double)s->microbatches * mbs / r->iteration_time_s : 0;
}

/* Returns PL_OK when the engine's tables for s fit the memory budget, else PL_EINPUT with the
 * bytes needed: per action the flow engine's stream entry (and a trace slot), per (stage,
 * microbatch) a cell, per rank and stage their state, plus the event heap (at most one event
 * per action in flight per rank, counted as one per rank and stage). mbs = microbatches over
 * all iterations. Overflow-checked: a product that does not fit 64 bits is refused as well. */
static int sim_state_check(const sched *s, int64_t mbs, int trace, pl_err *e) {
    uint64_t acts = sched_total_actions(s), per_act = sizeof(flow_act) + (trace ? sizeof(sim_slot) : 0);
    uint64_t cells = 0, a = 0, c = 0, total = 0;
    uint64_t fixed = (uint64_t)s->ranks * (sizeof(sim_rank_stats) + sizeof(rank_state) + 64) +
                     (uint64_t)s->stages * (sizeof(stage_state) + 64);
    int over = __builtin_mul_overflow((uint64_t)s->stages, (uint64_t)(mbs > 0 ? mbs : 0), &cells) ||
               __builtin_mul_overflow(cells, (uint64_t)sizeof(cell), &c) ||
               __builtin_mul_overflow(acts, per_act, &a) || __builtin_add_overflow(a, c, &total) ||
               __builtin_add_overflow(total, fixed, &total);
    char what[192];
    snprintf(what, sizeof what, "simulating %s (%d ranks, %d stages, %lld microbatches, %llu actions%s)", s->kind,
             s->ranks, s->stages, (long long)mbs, (unsigned long long)acts, trace ? ", with the trace" : "");
    return sched_memory_check(over ? UINT64_MAX : total, what, e);
}

/* Bytes per compute action (2 per stage and microbatch, 3 with split backward) that `pipelab
 * simulate` needs at its peak: the compute-only schedule, its validation and lowering (about
 * three lowered actions per compute action), and the engine's tables. Measured on every
 * generator (tests/sim/test_limits.c keeps it an upper bound): at most 160 bytes, 1200 with the
 * trace (timeline slots, the printed table, the Chrome JSON, the stored op rows). */
#define SIM_BYTES_PER_ACTION 256u
#define SIM_TRACE_BYTES_PER_ACTION 1536u
/* The same for `pipelab schedule` (generation, validation, lowering, the dry run): at most 160. */
#define SIM_SCHED_BYTES_PER_ACTION 256u

uint64_t sim_memory_estimate(const sched_shape *sh, int mode) {
    uint64_t per = mode == SIM_MEM_TRACE ? SIM_TRACE_BYTES_PER_ACTION
                   : mode == SIM_MEM_SCHEDULE ? SIM_SCHED_BYTES_PER_ACTION : SIM_BYTES_PER_ACTION;
    uint64_t bytes = 0;
    uint64_t fixed = ((uint64_t)16 << 20) + (uint64_t)(sh->ranks > 0 ? sh->ranks : 0) * 1024 +
                     (uint64_t)(sh->stages > 0 ? sh->stages : 0) * 256;
    int over = sh->compute_actions < 0 ||
               __builtin_mul_overflow((uint64_t)sh->compute_actions, per, &bytes) ||
               __builtin_add_overflow(bytes, fixed, &bytes);
    return over ? UINT64_MAX : bytes;
}

int sim_check_memory(const char *kind, const sched_shape *sh, int mode, pl_err *e) {
    uint64_t bytes = sim_memory_estimate(sh, mode);
    char what[192];
    snprintf(what, sizeof what, "%s%s (%d ranks, %d stages, %lld microbatches: %lld compute actions)",
             mode == SIM_MEM_SCHEDULE ? "" : "simulating ", kind ? kind : "the schedule", sh->ranks, sh->stages,
             (long long)sh->microbatches, (long long)sh->compute_actions);
    return sched_memory_check(bytes, what, e);
}

/* Sets the replicas per stage, the streams of each rank (as many as the most replicas among its
 * stages) and each stage's first stream. Returns PL_OK or an error. */
static int setup_streams(eng *g, pl_err *e) {
    const sched *s = g->s;
    g->reps = pl_calloc((size_t)s->stages, sizeof *g->reps);
    g->sbase = pl_calloc((size_t)s->ranks, sizeof *g->sbase);
    g->swidth = pl_calloc((size_t)s->ranks, sizeof *g->swidth);
    if (!g->reps || !g->sbase || !g->swidth) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int r = 0; r < s->ranks; r++) g->swidth[r] = 1;
    for (int q = 0; q < s->stages; q++) {
        g->reps[q] = g->cfg->replicas ? g->cfg->replicas[q] : 1;
        int rr = s->stage_rank[q];
        if (rr >= 0 && rr < s->ranks && g->reps[q] > g->swidth[rr]) g->swidth[rr] = g->reps[q];
    }
    int64_t n = 0;
    for (int r = 0; r < s->ranks; r++) {
        g->sbase[r] = (int)n;
        n += g->swidth[r];
        if (n > ((int64_t)1 << 22))
            return pl_errf(e, PL_EINPUT, "too many replicas: %lld streams from rank %d on (at most %d in all)",
                           (long long)n, r, 1 << 22);
    }
    g->nstream = (int)n;
    for (int q = 0; q < s->stages; q++) {
        int rr = s->stage_rank[q];
        g->st[q].rep = g->reps[q];
        g->st[q].stream0 = rr >= 0 && rr < s->ranks ? g->sbase[rr] : 0;
    }
    return PL_OK;
}

/* Returns the replica of a rank of w streams that runs a: microbatch k of a stage of n replicas
 * on replica k mod n; -n for an action of every replica 0..n-1 (REDUCE_GRAD and STEP without a
 * microbatch); 0 for the rest. */
static int route(const eng *g, const sched_action *a, int w) {
    int st = a->stage;
    if (st < 0 || st >= g->s->stages) return 0;
    int n = g->reps[st] < w ? g->reps[st] : w;
    if (n <= 1) return 0;
    if (a->mb < 0) return a->kind == SCHED_REDUCE_GRAD || a->kind == SCHED_STEP ? -n : 0;
    return (int)(a->mb % n);
}

/* Gives each stream of a replicated rank its subsequence of the rank's list (and the positions
 * in that list, for the trace). Returns PL_OK or PL_ENOMEM. */
static int split_streams(eng *g, pl_err *e) {
    const sched *s = g->s;
    size_t total = 0;
    for (int q = 0; q < s->ranks; q++) {
        int w = g->swidth[q];
        if (w <= 1) continue;
        for (size_t i = 0; i < s->rank[q].n; i++) {
            int j = route(g, &s->rank[q].acts[i], w);
            total += j >= 0 ? 1 : (size_t)-j;
        }
    }
    g->sacts = malloc((total ? total : 1) * sizeof *g->sacts);
    g->sorig = malloc((total ? total : 1) * sizeof *g->sorig);
    if (!g->sacts || !g->sorig) return pl_errf(e, PL_ENOMEM, "out of memory for the replicas' action lists");
    size_t off = 0;
    for (int q = 0; q < s->ranks; q++) {
        int w = g->swidth[q];
        if (w <= 1) continue;
        rank_state *k0 = &g->rk[g->sbase[q]];
        for (int j = 0; j < w; j++) k0[j].n = 0;
        for (size_t i = 0; i < s->rank[q].n; i++) {
            int j = route(g, &s->rank[q].acts[i], w);
            if (j >= 0) k0[j].n++;
            else
                for (int x = 0; x < -j; x++) k0[x].n++;
        }
        for (int j = 0; j < w; j++) {
            k0[j].acts = g->sacts + off;
            k0[j].orig = g->sorig + off;
            k0[j].fa = NULL;
            off += k0[j].n;
            k0[j].n = 0;
        }
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            int j = route(g, a, w), lo = j >= 0 ? j : 0, hi = j >= 0 ? j + 1 : -j;
            for (int x = lo; x < hi; x++) {
                rank_state *k = &k0[x];
                ((sched_action *)k->acts)[k->n] = *a;
                ((uint32_t *)k->orig)[k->n] = (uint32_t)i;
                k->n++;
            }
        }
    }
    return PL_OK;
}

/* Internal return of sim_run_with: the flow engine met a case it cannot serve; rerun. */
#define SIM_RERUN_HEAP 1000

/* Runs the simulation, with the flow engine when try_flow and the run allows it. */
static int sim_run_with(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e,
                        int try_flow) {
    memset(r, 0, sizeof *r);
    int rc0;
    if (!s->lowered) return pl_errf(e, PL_EINPUT, "the simulator runs lowered schedules (call sched_lower first)");
    /* above 100 the lognormal factors are mostly below 1e-4 (mu = -ln(1 + cv^2) / 2): times vanish */
    if (!(cfg->cv >= 0 && cfg->cv <= 100))
        return pl_errf(e, PL_EINPUT, "the coefficient of variation must be in [0, 100] (got %g)", cfg->cv);
    if (!(cfg->dtype_bytes >= 0) || !isfinite(cfg->dtype_bytes) || !(cfg->optimizer_bytes_per_param >= 0) ||
        !isfinite(cfg->optimizer_bytes_per_param))
        return pl_errf(e, PL_EINPUT, "bytes per parameter (%g) and optimizer bytes per parameter (%g) must be finite and >= 0",
                       cfg->dtype_bytes, cfg->optimizer_bytes_per_param);
    if (cfg->capacity_bytes < 0)
        return pl_errf(e, PL_EINPUT, "the device capacity must be >= 0 bytes (got %lld)", (long long)cfg->capacity_bytes);
    eng g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.c = c;
    g.cfg = cfg;
    g.r = r;
    int iters = sched_iterations(s);
    g.M = (int64_t)s->microbatches * iters;
    if ((rc0 = sim_state_check(s, g.M, cfg->record_trace, e)) != PL_OK) return rc0;
    /* the flow engine's compact stream, built in the same pass (the cheap part of sim_flow_ok
     * decides whether it may be needed); 8 slack entries let the engine prefetch past the end */
    flow_act *fo = NULL;
    if (cfg->replicas)
        for (int q = 0; q < s->stages; q++) {
            if (cfg->replicas[q] < 1)
                return pl_errf(e, PL_EINPUT, "stage %d: replicas must be at least 1 (got %d)", q, cfg->replicas[q]);
            if (cfg->replicas[q] > 1) g.any_rep = 1;
        }
    if (g.any_rep) try_flow = 0; /* replicated runs: the heap engine's streams (see the top) */
    if (try_flow && cfg->cv <= 0 && s->weights == SCHED_WEIGHTS_FLUSH && !(cfg->shared_inter_link && cfg->ranks_per_node > 0)) {
        g.fstream_bytes = (sched_total_actions(s) + 8) * sizeof(flow_act);
        g.fstream = big_calloc(g.fstream_bytes, &g.fstream_mapped);
        fo = g.fstream;
    }
    if (!fo) try_flow = 0;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            if (fo) {
                fo->mb = a->mb;
                fo->ks = (uint32_t)a->kind | (uint32_t)a->stage << 4;
                fo++;
                if (a->kind > 15) try_flow = 0;
            }
            if (a->mb >= g.M) g.M = (int64_t)a->mb + 1;
            if (a->kind == SCHED_OVERLAP && a->mb2 >= g.M) g.M = (int64_t)a->mb2 + 1;
            /* the flow engine needs every action's stage(s) on the rank that runs it */
            if (a->stage < 0 || a->stage >= s->stages || s->stage_rank[a->stage] != q) try_flow = 0;
            if (a->kind == SCHED_OVERLAP && (a->stage2 < 0 || a->stage2 >= s->stages || s->stage_rank[a->stage2] != q))
                try_flow = 0;
        }
    g.n_entries = (int64_t)s->stages * g.M;
    int rc = PL_OK;
    if (g.M > (int64_t)s->microbatches * iters && (rc = sim_state_check(s, g.M, cfg->record_trace, e)) != PL_OK) goto out;
    r->ranks = s->ranks;
    r->iterations = (int)((g.M + s->microbatches - 1) / s->microbatches);
    r->rank = pl_calloc((size_t)s->ranks, sizeof *r->rank);
    r->iter_end_s = pl_calloc((size_t)r->iterations, sizeof(double));
    g.st = pl_calloc((size_t)s->stages, sizeof *g.st);
    if ((rc = setup_streams(&g, e)) != PL_OK) goto out;
    g.rk = pl_calloc((size_t)g.nstream, sizeof *g.rk);
    g.blocked = pl_calloc((size_t)g.nstream, sizeof *g.blocked);
    if (!r->rank || !r->iter_end_s || !g.rk || !g.st || !g.blocked) { rc = pl_errf(e, PL_ENOMEM, "out of memory"); goto out; }
    /* anonymous mapping with transparent huge pages: the cells are touched by every rank at
     * once, and 4 KiB pages would make most accesses TLB misses on large pipelines */
    g.cells_bytes = (size_t)g.n_entries * sizeof(cell);
    if (g.cells_bytes < ((size_t)8 << 20)) {
        g.cells = calloc(g.cells_bytes ? g.cells_bytes : 1, 1);
    } else {
        g.cells = mmap(NULL, g.cells_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (g.cells == MAP_FAILED) g.cells = NULL;
        else g.cells_mapped = 1;
    }
    if (!g.cells) {
        rc = pl_errf(e, PL_ENOMEM, "out of memory: %lld stage-microbatch cells", (long long)g.n_entries);
        goto out;
    }
#ifdef MADV_HUGEPAGE
    if (g.cells_mapped) madvise(g.cells, g.cells_bytes, MADV_HUGEPAGE);
#endif
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
        int b = g.sbase[q];
        g.rk[b].acts = s->rank[q].acts;
        g.rk[b].fa = g.fstream ? g.fstream + r->actions : NULL;
        g.rk[b].n = (uint32_t)s->rank[q].n;
        r->actions += s->rank[q].n;
    }
    for (int q = 0; q < g.nstream; q++) {
        g.blocked[q] = -1;
        g.rk[q].id = q;
    }
    for (int q = 0; q < s->ranks; q++)
        for (int j = 0; j < g.swidth[q]; j++) {
            g.rk[g.sbase[q] + j].rank = q;
            g.rk[g.sbase[q] + j].replica = j;
        }
    if (g.any_rep && (rc = split_streams(&g, e)) != PL_OK) goto out;
    if ((rc = setup_links(&g, e)) != PL_OK) goto out;
    if ((rc = setup_stages(&g, e)) != PL_OK) goto out;
    for (int q = 0; q < g.nstream; q++) note_peaks(&g, q, &g.rk[q]);
    if (cfg->cv > 0) {
        g.rng = gsl_rng_alloc(gsl_rng_mt19937);
        if (!g.rng) { rc = pl_errf(e, PL_ENOMEM, "out of memory for the random generator"); goto out; }
        gsl_rng_set(g.rng, (unsigned long)cfg->seed);
        g.ln_sigma = sqrt(log(1.0 + cfg->cv * cfg->cv));
        g.ln_mu = -0.5 * g.ln_sigma * g.ln_sigma; /* mean factor 1 */
    }
    if (try_flow && sim_flow_ok(&g)) {
        g.work = pl_calloc((size_t)s->ranks, sizeof *g.work);
        g.queued = pl_calloc((size_t)s->ranks, 1);
        if (!g.work || !g.queued) { rc = pl_errf(e, PL_ENOMEM, "out of memory"); goto out; }
        sim_flow(&g);
        if (g.abort_flow) { rc = SIM_RERUN_HEAP; goto out; }
        r->events = g.flow_events;
        goto done;
    }
    big_free(g.fstream, g.fstream_bytes, g.fstream_mapped);
    g.fstream = NULL;
    g.fstream_bytes = 0;
    g.now = 0;
    for (int q = 0; q < g.nstream; q++)
        if (advance(&g, q)) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the event queue"); goto out; }
    while (g.hn > 0 && !g.err) {
        ev x;
        heap_pop(&g, &x);
        g.now = ev_time(&x);
        if ((++r->events & 65535) == 0) show_progress(&g);
        uint64_t kind = x.payload >> 56, val = x.payload & (((uint64_t)1 << 56) - 1);
        int fail = 0;
        if (g.hn > 0) prefetch_next(&g);
        if (kind == EV_COMPUTE_END) {
            fail = compute_end(&g, (int)(val >> 32));
        } else if (kind == EV_ARRIVE) {
            publish(&g, (int)(val >> 48), (int64_t)(val & (((uint64_t)1 << 48) - 1)), g.now);
        } else if (kind == EV_STEP_END) {
            int st = (int)(uint32_t)val, rp = (int)(val >> 32); /* stage, replica */
            sst(&g, st, rp)->step_pending--;
            int rr = g.st[st].stream0 + rp;
            if (g.blocked[rr] == KEY_STEP(&g, st)) fail = advance(&g, rr);
        } else {
            int st = (int)(uint32_t)val, cnt = (int)(val >> 32); /* stage, members (0: not replicated) */
            if (cnt == 0) {
                g.st[st].rg_done++;
                int rr = g.st[st].stream0;
                if (g.blocked[rr] == KEY_RG(&g, st)) fail = advance(&g, rr);
            } else {
                for (int j = 0; j < cnt; j++) sst(&g, st, j)->rg_done++;
                for (int j = 0; j < cnt && !fail; j++) {
                    int rr = g.st[st].stream0 + j;
                    if (g.blocked[rr] == KEY_RG(&g, st)) fail = advance(&g, rr);
                }
            }
        }
        if (fail) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the event queue"); goto out; }
    }
done:
    if (g.err == PL_ENOMEM) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the event queue"); goto out; }
    if (g.err) { rc = pl_errf(e, PL_EINPUT, "a compute time is negative or not a number"); goto out; }
    for (int q = 0; q < g.nstream; q++)
        if (g.rk[q].pc < g.rk[q].n) { rc = report_stuck(&g, e); goto out; }
    if (g.mem_overflow) {
        int q = 0;
        while (q + 1 < g.nstream && g.rk[q].st.peak_bytes != INT64_MAX) q++;
        rc = pl_errf(e, PL_EINPUT,
                     "rank %d: its memory passes 2^63 bytes (9.2e18), more than 64-bit counters hold: the "
                     "stash, parameter or optimizer sizes are too large", g.rk[q].rank);
        goto out;
    }
    /* receives end when their data arrived */
    if (r->trace)
        for (int q = 0; q < s->ranks; q++)
            for (size_t i = 0; i < s->rank[q].n; i++) {
                const sched_action *a = &s->rank[q].acts[i];
                if (a->kind != SCHED_RECV_F && a->kind != SCHED_RECV_B) continue;
                double arr = cell_time(g.cells[entry(&g, a->stage, a->mb)].u[a->kind == SCHED_RECV_F ? T_ARRF : T_ARRB]);
                if (arr > r->trace[q][i].end_s) r->trace[q][i].end_s = arr;
            }
    /* REDUCE_GRAD of replicated stages: the times of their collective */
    if (r->trace && g.any_rep)
        for (int q = 0; q < s->stages; q++) {
            if (g.reps[q] <= 1) continue;
            int rr = s->stage_rank[q];
            int64_t neg = 0;
            for (size_t i = 0; i < s->rank[rr].n; i++) {
                const sched_action *a = &s->rank[rr].acts[i];
                if (a->kind != SCHED_REDUCE_GRAD || a->stage != q) continue;
                int64_t ri = a->mb >= 0 ? a->mb / g.reps[q] : g.rs[q].neg0 + neg++;
                if (ri >= 0 && ri < g.rs[q].nrd) {
                    r->trace[rr][i].start_s = g.rs[q].rd[ri].start;
                    r->trace[rr][i].end_s = g.rs[q].rd[ri].end;
                }
            }
        }
    finish_metrics(&g);
    if (!isfinite(r->makespan_s)) {
        rc = pl_errf(e, PL_EINPUT,
                     "the simulated time overflowed (makespan %g s): compute or transfer times too large to add up", r->makespan_s);
        goto out;
    }
    if (r->makespan_s <= 0 && r->actions > 0) {
        rc = pl_errf(e, PL_EINPUT,
                     "every action takes zero time (makespan 0 s), so throughput and bubbles are undefined: give "
                     "positive compute times (e.g. --tf) or transfer costs");
        goto out;
    }
    r->state_bytes = g.cells_bytes + g.hcap * sizeof(ev) +
                     (size_t)g.nstream * sizeof(rank_state) + (size_t)s->ranks * sizeof(sim_rank_stats) +
                     (size_t)g.nlinks * sizeof(double) + (size_t)s->stages * sizeof(stage_state) +
                     (size_t)r->iterations * sizeof(double) + (g.work ? (size_t)s->ranks * (sizeof(int) + 1) : 0) +
                     g.fstream_bytes;
out:
    eng_free(&g);
    if (rc != PL_OK) sim_result_free(r);
    return rc;
}

int sim_run(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e) {
    int rc = sim_run_with(s, c, cfg, r, e, 1);
    if (rc == SIM_RERUN_HEAP) rc = sim_run_with(s, c, cfg, r, e, 0);
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
        cf.progress_base = cfg->progress_base + (uint64_t)k * sched_total_actions(s);
        if (k > 0) cf.record_trace = 0;
        sim_result r;
        int rc = sim_run(s, c, &cf, &r, e);
        if (rc != PL_OK) return rc;
        double it = r.iteration_time_s;
        si += it;
        si2 += it * it;
        stp += r.throughput;
        stp2 += r.throughput * r.throughput;
        sb += r.bubble_fraction;
        sb2 += r.bubble_fraction * r.bubble_fraction;
        if (k == 0 || it < st->iter_min_s) st->iter_min_s = it;
        if (k == 0 || it > st->iter_max_s) st->iter_max_s = it;
        if (k == 0 && first) *first = r;
        else sim_result_free(&r);
    }
    double n = repeat;
    st->iter_mean_s = si / n;
    st->thr_mean = stp / n;
    st->bubble_fraction_mean = sb / n;
    /* sample standard deviations (0 for one repetition) */
    st->iter_sd_s = repeat > 1 ? sqrt(fmax(0, (si2 - si * si / n) / (n - 1))) : 0;
    st->thr_sd = repeat > 1 ? sqrt(fmax(0, (stp2 - stp * stp / n) / (n - 1))) : 0;
    st->bubble_fraction_sd = repeat > 1 ? sqrt(fmax(0, (sb2 - sb * sb / n) / (n - 1))) : 0;
    return PL_OK;
}
