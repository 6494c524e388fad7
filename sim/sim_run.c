/* sim_run.c: a run of the simulator, in steps: check the input, allocate and set up the
 * engine's tables (streams, links, memory, collectives), run an engine (the flow engine,
 * sim_flow.c, where it gives the heap engine's results, else the heap engine, sim_heap.c),
 * check how the run ended, complete the trace, compute the metrics.
 * Per-action state: 4 times per (stage, microbatch) (2 in a compute-only run of the flow
 * engine whose neighbour stages live on other ranks: the arrivals, see sim_int.h), the trace
 * when asked, and for the flow engine an 8-byte copy of each action (sim_flow_act, one
 * contiguous stream) unless the run is compute-only. */
#include <math.h>
#include <stdlib.h>

#include "sim_rules_int.h"

/* Stuck ranks named in a deadlock message (the rest are counted). */
#define STUCK_NAMED 4

/* sim_int.h. Moves the progress bar (if any) to the actions the streams have walked. */
void sim_show_progress(const sim_eng *g) {
    if (!g->cfg->progress) return;
    uint64_t done = 0;
    for (int q = 0; q < g->nstream; q++) done += g->rk[q].pc;
    pl_progress_set(g->cfg->progress, g->cfg->progress_base + done);
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

void sim_config_executor(sim_config *c, const sched *s, int stream_waits_at_recv) {
    c->blocking_comm = stream_waits_at_recv || s->weights != SCHED_WEIGHTS_FLUSH;
    c->async_send = stream_waits_at_recv;
    c->whole_run = 1;
}

/* Frees the engine's arrays. */
static void eng_free(sim_eng *g) {
    sched_big_free(g->cells, g->cells_bytes, g->cells_mapped);
    free(g->rk);
    free(g->heap);
    free(g->link_free);
    free(g->st);
    free(g->blocked);
    free(g->work);
    free(g->queued);
    sched_big_free(g->fstream, g->fstream_bytes, g->fstream_mapped);
    sched_marks_free(&g->marks);
    free(g->after);
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
    free(g->hold);
    for (int i = 0; i < g->nvers; i++) sched_versions_free(&g->vers[i]);
    free(g->vers);
    free(g->busy_it);
}

/* Returns PL_OK when s is lowered and the values of cfg make sense (cv, bytes per parameter,
 * capacity, replicas per stage), else PL_EINPUT saying which. */
static int check_input(const sched *s, const sim_config *cfg, pl_err *e) {
    if (!s->lowered && cfg->record_trace)
        return pl_errf(e, PL_EINPUT, "the simulator's trace needs a lowered schedule (call sched_lower first)");
    if (!(cfg->cv >= 0 && cfg->cv <= COST_CV_MAX))
        return pl_errf(e, PL_EINPUT, "the coefficient of variation must be in [0, %d] (got %g)", COST_CV_MAX, cfg->cv);
    if (!(cfg->rank_cv >= 0 && cfg->rank_cv <= COST_CV_MAX))
        return pl_errf(e, PL_EINPUT, "the ranks' coefficient of variation must be in [0, %d] (got %g)", COST_CV_MAX,
                       cfg->rank_cv);
    const double *draws[2] = {cfg->speed_draws, cfg->speed_draws ? cfg->speed_draws_b : NULL};
    for (int b = 0; b < 2; b++)
        for (int j = 0; draws[b] && j < cfg->speed_draws_n * s->ranks; j++)
            if (!(draws[b][j] > 0) || !isfinite(draws[b][j]))
                return pl_errf(e, PL_EINPUT, "the ranks' %sspeed draws must be finite and > 0 (row %d, rank %d: %g)",
                               b ? "backward " : "", j / s->ranks, j % s->ranks, draws[b][j]);
    if (cfg->act_scale && !s->lowered)
        return pl_errf(e, PL_EINPUT, "the sharing term's factors need a lowered schedule (call sched_lower first)");
    for (int q = 0; cfg->act_scale && q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++)
            if (!(cfg->act_scale[q][i] > 0) || !isfinite(cfg->act_scale[q][i]))
                return pl_errf(e, PL_EINPUT, "the sharing term's factors must be finite and > 0 (rank %d, action %zu: %g)", q,
                               i + 1, cfg->act_scale[q][i]);
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
 * entries after the last action) unless the run is compute-only. */
static int flow_stream_alloc(sim_eng *g, int try_flow) {
    const sim_config *cfg = g->cfg;
    if (g->any_rep) return 0; /* replicated runs: the heap engine's streams (see the top) */
    if (!try_flow || cfg->cv > 0 || cfg->rank_cv > 0 || sim_config_draws(cfg) || cfg->act_scale || g->s->weights != SCHED_WEIGHTS_FLUSH || (cfg->shared_inter_link && cfg->ranks_per_node > 0))
        return 0;
    if (g->implied) return 1; /* the compute-only lists are walked as they are: no copy */
    g->fstream_bytes = (sched_total_actions(g->s) + SIM_FLOW_SLACK) * sizeof(sim_flow_act);
    g->fstream = sched_big_calloc(g->fstream_bytes, &g->fstream_mapped);
    return g->fstream != NULL;
}

/* One pass over the actions: fills the flow engine's compact stream (when allocated), raises M
 * to the largest microbatch any action names, clears *try_flow when an action's kind does not
 * fit the stream or its stage does not live on the rank that runs it, and sets *overlaps when
 * an action is an OVERLAP. */
static void scan_actions(sim_eng *g, int *try_flow, int *overlaps) {
    const sched *s = g->s;
    sim_flow_act *fo = g->fstream;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            if (fo) {
                fo->mb = a->mb;
                fo->ks = (uint32_t)a->kind | (uint32_t)a->stage << SIM_FLOW_KIND_BITS;
                fo++;
            }
            if (a->kind > SIM_FLOW_KIND_MASK) *try_flow = 0;
            if (a->mb >= g->M) g->M = (int64_t)a->mb + 1;
            if (a->kind == SCHED_OVERLAP) *overlaps = 1;
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
    g->cells_bytes = ((size_t)g->n_entries << g->cshift) * sizeof *g->cells;
    g->cells = sched_big_calloc(g->cells_bytes, &g->cells_mapped);
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

/* Returns the first iteration of the drain: the least iteration of a compute that some stream
 * runs after its own last forward and after the compute right after it (that one still follows a
 * forward, as in the steady state; the later ones follow backwards alone, so they run sooner
 * than the steady state would), or the run's iterations when there is none. */
static int drain_first(const sim_eng *g) {
    int64_t m = g->s->microbatches, first = g->r->iterations;
    for (int q = 0; q < g->nstream; q++) {
        const sim_rank_state *k = &g->rk[q];
        uint32_t last_f = k->n;
        for (uint32_t i = 0; i < k->n; i++)
            if (k->acts[i].kind == SCHED_F || k->acts[i].kind == SCHED_OVERLAP) last_f = i;
        int paced = 1; /* the compute right after the last forward */
        for (uint32_t i = last_f + 1; last_f < k->n && i < k->n; i++) {
            const sched_action *a = &k->acts[i];
            if (!sched_kind_is_compute((sched_kind)a->kind) || a->mb < 0) continue;
            if (paced) {
                paced = 0;
                continue;
            }
            if (a->mb / m < first) first = a->mb / m;
        }
    }
    return (int)first;
}

/* Sets up what the engines read: links, stage sizes and static memory, the replicated stages'
 * collectives, the streams' first peaks, the steady-state window's last iteration, and the
 * random factors of a stochastic run (mean 1). Returns PL_OK or an error. */
static int setup_run(sim_eng *g, pl_err *e) {
    int n = g->r->iterations, async = g->s->weights != SCHED_WEIGHTS_FLUSH && n >= 2 && !g->cfg->whole_run;
    g->drain = async ? drain_first(g) : n;
    if (async && !(g->busy_it = pl_calloc((size_t)g->nstream * (size_t)n, sizeof *g->busy_it)))
        return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = sim_setup_links(g, e);
    if (rc == PL_OK) rc = sim_setup_stage_memory(g, e);
    if (rc == PL_OK && g->any_rep) rc = sim_setup_rounds(g, e);
    if (rc == PL_OK) rc = sim_setup_versions(g, e);
    if (rc != PL_OK) return rc;
    for (int q = 0; q < g->nstream; q++) {
        note_peaks(&g->rk[q]);
        g->rk[q].speed = g->rk[q].speed_b = 1;
    }
    double cv = g->cfg->cv, rcv = g->cfg->rank_cv;
    if (sim_config_draws(g->cfg)) { /* the states term: one row of the ranks' speeds */
        const size_t at = (size_t)(g->cfg->seed % (uint64_t)g->cfg->speed_draws_n) * (size_t)g->s->ranks;
        const double *row = g->cfg->speed_draws + at, *row_b = g->cfg->speed_draws_b ? g->cfg->speed_draws_b + at : row;
        for (int q = 0; q < g->nstream; q++) {
            g->rk[q].speed = row[g->rk[q].rank];
            g->rk[q].speed_b = row_b[g->rk[q].rank];
        }
        rcv = 0;
    }
    if (cv <= 0 && rcv <= 0) return PL_OK;
    g->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!g->rng) return pl_errf(e, PL_ENOMEM, "out of memory for the random generator");
    gsl_rng_set(g->rng, (unsigned long)g->cfg->seed);
    if (rcv > 0) { /* each stream's speed first, in stream order: mean factor 1 */
        double sigma = sqrt(log(1.0 + rcv * rcv));
        for (int q = 0; q < g->nstream; q++) g->rk[q].speed = g->rk[q].speed_b = gsl_ran_lognormal(g->rng, -0.5 * sigma * sigma, sigma);
    }
    if (cv <= 0) return PL_OK;
    g->ln_sigma = sqrt(log(1.0 + cv * cv));
    g->ln_mu = -0.5 * g->ln_sigma * g->ln_sigma; /* mean factor 1 */
    return PL_OK;
}

/* Room in eng.after beyond one STEP per stage: two sends, a REDUCE_GRAD and a STEP. */
#define SIM_AFTER_SLACK 4

/* Runs the simulation with the flow engine when try_flow and sim_flow_ok allow it, else
 * (giving the compact stream back) with the heap engine. Sets *rerun when the flow engine met
 * a case it cannot serve (a cell written twice): its results are void, run again with the heap
 * engine. Returns PL_OK or an error. */
static int run_engine(sim_eng *g, int try_flow, int *rerun, pl_err *e) {
    if (try_flow && sim_flow_ok(g)) {
        g->work = pl_calloc((size_t)g->s->ranks, sizeof *g->work);
        g->queued = pl_calloc((size_t)g->s->ranks, 1);
        if (!g->work || !g->queued) return pl_errf(e, PL_ENOMEM, "out of memory");
        if (g->implied) {
            int rc = sched_marks_find(g->s, &g->marks, e);
            if (rc != PL_OK) return rc;
            g->after = pl_calloc((size_t)g->s->stages + SIM_AFTER_SLACK, sizeof *g->after);
            if (!g->after) return pl_errf(e, PL_ENOMEM, "out of memory");
        }
        sim_flow_run(g);
        *rerun = g->abort_flow;
        g->r->events = g->flow_events;
        g->r->actions += g->implied_actions;
        g->r->actions -= g->dropped_actions;
        return PL_OK;
    }
    if (g->implied) { /* a compute-only schedule that the flow engine cannot serve: lower it */
        *rerun = 1;
        return PL_OK;
    }
    sched_big_free(g->fstream, g->fstream_bytes, g->fstream_mapped);
    g->fstream = NULL;
    g->fstream_bytes = 0;
    return sim_heap_run(g, e);
}

/* Returns PL_OK when the run ended well, else its error: out of memory, a negative compute
 * time, streams that never finished (stuck), memory past 64 bits. */
static int check_ended(sim_eng *g, pl_err *e) {
    if (g->err == PL_ENOMEM) return pl_errf(e, PL_ENOMEM, "out of memory in the event queue");
    if (g->err) return pl_errf(e, PL_EINPUT, "a compute time is negative or not a number");
    for (int q = 0; q < g->nstream; q++)
        if (g->rk[q].pc < g->rk[q].n) {
            /* a compute-only schedule was not dry-run: the dry run names the waiting cycle */
            if (g->implied && sched_validate(g->s, e) != PL_OK) return PL_EINPUT;
            return report_stuck(g, e);
        }
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
            double arr = sim_cell_time(*sim_cell_at(g, a->kind == SCHED_RECV_F ? SIM_T_ARRF : SIM_T_ARRB, entry(g, a->stage, a->mb)));
            if (arr > g->r->trace[q][i].end_s) g->r->trace[q][i].end_s = arr;
        }
}

/* Returns PL_OK when the run's times make its figures defined, else PL_EINPUT: a makespan that
 * overflowed, or zero time for actions. */
static int check_times(const sim_result *r, int ranks, pl_err *e) {
    if (cost_time_check(r->makespan_s, "makespan", e, "the simulated time") != PL_OK) return PL_EINPUT;
    /* the bubble divides the ranks' busy time by the window's on every rank: both must add up */
    if (cost_time_check(r->window_s * ranks, "window x ranks", e, "the simulated time") != PL_OK ||
        cost_time_check(r->idle_s, "idle time of all ranks", e, "the simulated time") != PL_OK)
        return PL_EINPUT;
    if (!isfinite(r->bubble_fraction))
        return pl_errf(e, PL_EINPUT, "the simulated time overflowed (the bubble fraction is not a number): compute or "
                       "transfer times too large to add up");
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
           (g->work ? (size_t)s->ranks * (sizeof(int) + 1) : 0) + g->fstream_bytes +
           (size_t)g->nvers * (sizeof(sched_versions) + 2 * ((size_t)g->M + 1) * sizeof(int32_t)) +
           (g->busy_it ? (size_t)g->nstream * (size_t)g->r->iterations * sizeof(double) : 0);
}

/* Returns 1 when two neighbour stages of s live on one rank (a done time is then read there). */
static int same_rank_neighbours(const sched *s) {
    for (int q = 0; q + 1 < s->stages; q++)
        if (s->stage_rank[q] == s->stage_rank[q + 1]) return 1;
    return 0;
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
    int overlaps = 0;
    scan_actions(g, try_flow, &overlaps);
    g->ntab = SIM_T_N;
    g->cshift = SIM_CELL_SHIFT_FULL;
    /* compact cells: only the flow engine reads them; an OVERLAP's halves may name one cell */
    if (g->implied && *try_flow && !overlaps && !same_rank_neighbours(s)) {
        g->ntab = SIM_T_COMPACT;
        g->cshift = SIM_CELL_SHIFT_COMPACT;
    }
    g->n_entries = (int64_t)s->stages * g->M;
    if (g->M > mbs && (rc = sim_state_check(s, g->M, g->cfg->record_trace, &g->cfg->budget, e)) != PL_OK) return rc;
    if ((rc = alloc_tables(g, e)) == PL_OK && (rc = init_streams(g, e)) == PL_OK) rc = setup_run(g, e);
    return rc;
}

/* The steps after an engine ran: how it ended, the trace's receive ends and collectives, the
 * metrics and whether their times are defined, the state's size. Returns PL_OK or an error. */
static int finish_run(sim_eng *g, pl_err *e) {
    sim_result *r = g->r;
    int rc = check_ended(g, e);
    if (rc != PL_OK) return rc;
    if (r->trace) trace_recv_ends(g);
    if (r->trace && g->any_rep) sim_trace_rounds(g);
    sim_finish_metrics(g);
    if ((rc = check_times(r, g->s->ranks, e)) != PL_OK) return rc;
    r->state_bytes = state_bytes(g);
    return PL_OK;
}

/* Runs the simulation once, with the flow engine when try_flow and the run allows it: check,
 * allocate and set up, run, finish (trace, metrics). Sets *rerun (and returns nothing in r)
 * when the flow engine could not serve it. Returns PL_OK or an error. */
static int sim_run_with(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e,
                        int try_flow, int *rerun) {
    memset(r, 0, sizeof *r);
    *rerun = 0;
    int rc = check_input(s, cfg, e);
    if (rc != PL_OK) return rc;
    sim_eng g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.c = c;
    g.cfg = cfg;
    g.r = r;
    g.implied = !s->lowered;
    rc = eng_init(&g, &try_flow, e);
    if (rc == PL_OK) rc = run_engine(&g, try_flow, rerun, e);
    if (rc == PL_OK && !*rerun) rc = finish_run(&g, e);
    eng_free(&g);
    if (rc != PL_OK || *rerun) sim_result_free(r);
    return rc;
}

/* Runs compute-only schedule s lowered (for the runs that the flow engine cannot serve with its
 * transfers implied). Returns PL_OK or an error. */
static int run_lowered(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e) {
    sched *l = sched_lower_within(s, &cfg->budget, e);
    if (!l) return e->code ? e->code : PL_EINPUT;
    int rc = sim_run(l, c, cfg, r, e);
    sched_free(l);
    return rc;
}

int sim_run(const sched *s, const sim_costs *c, const sim_config *cfg, sim_result *r, pl_err *e) {
    int rerun;
    int rc = sim_run_with(s, c, cfg, r, e, 1, &rerun);
    if (rc != PL_OK || !rerun) return rc;
    return s->lowered ? sim_run_with(s, c, cfg, r, e, 0, &rerun) : run_lowered(s, c, cfg, r, e);
}
