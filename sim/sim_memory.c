/* sim_memory.c: the simulator's memory: the budget of a run (checked before anything is
 * allocated), the large tables, and each stage's sizes and static memory per device. */
#include <stdio.h>
#include <stdlib.h>

#include "sim_int.h"

/* What the allocator adds to each per-rank and per-stage allocation, counted in the budget. */
#define ALLOC_SLACK_BYTES 64

/* The bytes counted: per action the flow engine's stream entry (and a trace slot), per (stage,
 * microbatch) a cell (and, under stash and 2bw, its weight-version entries: sched_versions),
 * per rank and stage their state, plus the event heap (at most one event per action in flight
 * per rank, counted as one per rank and stage). Overflow-checked: a product that does not fit
 * 64 bits is refused as well. */
int sim_state_check(const sched *s, int64_t mbs, int trace, const sched_budget *b, pl_err *e) {
    uint64_t acts = sched_total_actions(s), per_act = sizeof(sim_flow_act) + (trace ? sizeof(sim_slot) : 0);
    uint64_t cells = 0, a = 0, c = 0, total = 0;
    uint64_t fixed = (uint64_t)s->ranks * (sizeof(sim_rank_stats) + sizeof(sim_rank_state) + ALLOC_SLACK_BYTES) +
                     (uint64_t)s->stages * (sizeof(sim_stage_state) + ALLOC_SLACK_BYTES);
    int over = __builtin_mul_overflow((uint64_t)s->stages, (uint64_t)(mbs > 0 ? mbs : 0), &cells) ||
               __builtin_mul_overflow(cells, (uint64_t)sizeof(sim_cell) + (s->weights != SCHED_WEIGHTS_FLUSH ? 8u : 0u), &c) ||
               __builtin_mul_overflow(acts, per_act, &a) || __builtin_add_overflow(a, c, &total) ||
               __builtin_add_overflow(total, fixed, &total);
    char what[192];
    snprintf(what, sizeof what, "simulating %s (%d ranks, %d stages, %lld microbatches, %llu actions%s)", s->kind,
             s->ranks, s->stages, (long long)mbs, (unsigned long long)acts, trace ? ", with the trace" : "");
    return sched_memory_check(b, over ? UINT64_MAX : total, what, e);
}

/* Optimizer state bytes that count safely in 64 bits (with the other static bytes added). */
#define OPT_BYTES_MAX 0x1p62

/* Reads stage q's memory sizes (stash, its part kept until W, the recomputation input and the
 * parameters, the last two at most the stash) and its all-reduce time. Returns PL_OK or
 * PL_EINPUT for a negative size or time. */
static int stage_sizes(sim_eng *g, int q, pl_err *e) {
    void *x = g->c->ctx;
    sim_stage_state *st = &g->st[q];
    st->stash_b = g->c->stash_bytes(x, q);
    st->wstash_b = g->c->w_stash_bytes(x, q);
    st->input_b = g->c->input_bytes(x, q);
    st->param_b = g->c->param_bytes(x, q);
    if (st->stash_b < 0 || st->wstash_b < 0 || st->input_b < 0 || st->param_b < 0)
        return pl_errf(e, PL_EINPUT, "stage %d: negative memory size", q);
    cost_mem_sizes z = cost_mem_sizes_make(st->stash_b, st->wstash_b, st->input_b); /* the walks' caps */
    st->wstash_b = z.w_stash;
    st->input_b = z.checkpoint;
    int rep = g->reps[q];
    st->reduce_s = rep > 1 ? g->c->allreduce_s(x, q, rep, st->param_b) : 0;
    if (!(st->reduce_s >= 0)) return pl_errf(e, PL_EINPUT, "stage %d: negative all-reduce time", q);
    return PL_OK;
}

/* Adds stage q's static memory to each of its replicas' streams (a device of its own each):
 * the gradients and optimizer state, and one weight version, counted in static_bytes; the
 * versions the run adds are sched_versions' (sim_setup_versions). Returns PL_OK or PL_EINPUT
 * when the bytes do not count in 64 bits. */
static int stage_static(sim_eng *g, int q, pl_err *e) {
    const sim_config *cfg = g->cfg;
    const sim_stage_state *st = &g->st[q];
    double params = cfg->dtype_bytes > 0 ? (double)st->param_b / cfg->dtype_bytes : 0;
    double opt_b = params * cfg->optimizer_bytes_per_param;
    if (!(opt_b < OPT_BYTES_MAX))
        return pl_errf(e, PL_EINPUT,
                       "stage %d: the optimizer state (%.6g parameters x %g bytes = %.6g bytes) is too large "
                       "to count in 64 bits; check the parameter, dtype and optimizer sizes",
                       q, params, cfg->optimizer_bytes_per_param, opt_b);
    int64_t stat0 = sim_mem_mul(g, 1, st->param_b) /* gradients */;
    int64_t one_version = st->param_b;
    for (int j = 0; j < g->reps[q]; j++) {
        sim_rank_state *k = &g->rk[st->stream0 + j];
        int64_t stat = stat0;
        if (__builtin_add_overflow(stat, (int64_t)opt_b, &stat) ||
            __builtin_add_overflow(k->st.static_bytes, stat, &k->st.static_bytes) ||
            __builtin_add_overflow(k->st.static_bytes, one_version, &k->st.static_bytes))
            return pl_errf(e, PL_EINPUT,
                           "rank %d: its static memory (parameters %lld bytes per stage, gradients, optimizer "
                           "state) is too large to count in 64 bits",
                           g->s->stage_rank[q], (long long)st->param_b);
        sim_mem_add(g, k, stat);
        sim_mem_add(g, k, one_version);
        k->versions++;
    }
    return PL_OK;
}

int sim_setup_stage_memory(sim_eng *g, pl_err *e) {
    for (int q = 0; q < g->s->stages; q++) {
        int rc = stage_sizes(g, q, e);
        if (rc == PL_OK) rc = stage_static(g, q, e);
        if (rc != PL_OK) return rc;
    }
    return PL_OK;
}

int sim_setup_versions(sim_eng *g, pl_err *e) {
    if (g->s->weights == SCHED_WEIGHTS_FLUSH) return PL_OK;
    int S = g->s->stages, n = S;
    for (int q = 0; q < S; q++)
        if (g->reps[q] > 1) n += g->reps[q];
    g->vers = pl_calloc((size_t)n, sizeof *g->vers);
    if (!g->vers) return pl_errf(e, PL_ENOMEM, "out of memory for the weight versions");
    for (int q = 0; q < S; q++)
        for (int j = 0; j < g->reps[q]; j++) {
            sim_stage_state *ss = sim_sst(g, q, j);
            sched_versions *v = &g->vers[g->nvers];
            if (sched_versions_init(v, g->M) != PL_OK)
                return pl_errf(e, PL_ENOMEM, "out of memory for the weight versions of stage %d", q);
            g->nvers++;
            ss->vers = v;
        }
    return PL_OK;
}
