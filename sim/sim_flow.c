/* sim_flow.c: the flow engine: the rules of sim_rules_int.h on each stream's own clock, with
 * every end finished inline, for the runs where the order of events cannot change a result.
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
 * - all non-zero transfer times equal (the global sum comm_s is then order-free);
 * - no hand-off holds (sim_eng.hold): a RECV's hold depends on whether its message has arrived
 *   at the post, which a rank on its own clock cannot know before the sender got that far.
 * A rank blocked in the heap engine at time now and resumed at the time v of a publication
 * continues at v = max(now, v); the flow engine takes the same max when the value is known. */
#include "sim_rules_int.h"

/* Actions the flow engine walks between two moves of the progress bar (a power of two). */
#define SIM_FLOW_PROGRESS_STEPS 4096u

/* Compute-only run: walks what lowering puts right after compute c that stream k (rank r)
 * just finished, at the same point of the rank's walk as the lowered run: its sends, then its
 * updates (the rules never wait there: the data was just produced, and the flow engine knows
 * every end). Their receives only post; they are counted. */
static void flow_implied(sim_eng *g, int r, sim_rank_state *k, const sched_action *c, double *now) {
    const uint32_t next = k->pc; /* the rules pass each action; the rank's place is its compute list */
    size_t n = sched_lower_after(g->s, &g->marks, r, next - 1, c, g->after);
    for (size_t j = 0; j < n; j++) {
        const sched_action *a = &g->after[j];
        rule_walk(g, SIM_FLOW, r, k, a->kind, a->stage, a->mb, a, now);
        if (a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B) g->implied_actions++; /* its receive */
    }
    g->implied_actions += n;
    k->pc = next;
}

/* Walks stream k's action x on its clock *now (and, on a compute-only schedule, what follows a
 * compute). Returns WALK_NEXT or WALK_STOP. */
static inline int flow_walk(sim_eng *g, int r, sim_rank_state *k, sim_flow_act x, double *now) {
    const int kind = (int)(x.ks & SIM_FLOW_KIND_MASK), stage = (int)(x.ks >> SIM_FLOW_KIND_BITS);
    const sched_action *a = kind == SCHED_OVERLAP ? &k->acts[k->pc] : NULL; /* its second half */
    const uint32_t pc = k->pc;
    if (g->implied && kind == SCHED_REDUCE_GRAD) { /* lowering drops it and places its own after */
        k->pc++;                                   /* the stage's last backward (flow_implied) */
        g->dropped_actions++;
        return WALK_NEXT;
    }
    int w = rule_walk(g, SIM_FLOW, r, k, kind, stage, x.mb, a, now);
    /* the action in the rank's list, not a copy: a copy's fields stored one by one and read
     * together stall on store forwarding */
    if (g->implied && w == WALK_NEXT && sched_kind_is_compute((sched_kind)kind)) flow_implied(g, r, k, &k->acts[pc], now);
    return w;
}

/* Runs rank r on its own clock as far as its data allows (the heap engine's advance plus
 * compute_end, fused), reading its actions from the compact stream when compact, else (a
 * compute-only run: fewer actions, no copy) from its list. */
SIM_RULE void flow_advance_from(sim_eng *g, int r, const int compact) {
    sim_rank_state *k = &g->rk[r];
    double now = k->cur;
    g->blocked[r] = -1;
    while (k->pc < k->n && !g->err) {
        sim_flow_act x;
        if (compact) {
            x = k->fa[k->pc];
            __builtin_prefetch(&k->fa[k->pc + SIM_FLOW_SLACK]); /* the stream has slack entries at its end */
        } else {
            const sched_action *a = &k->acts[k->pc];
            x = (sim_flow_act){a->mb, (uint32_t)a->kind | (uint32_t)a->stage << SIM_FLOW_KIND_BITS};
            if (k->pc + SIM_FLOW_SLACK < k->n) __builtin_prefetch(a + SIM_FLOW_SLACK);
        }
        if (flow_walk(g, r, k, x, &now) != WALK_NEXT) break;
    }
    k->cur = now;
}

/* Runs rank r on its own clock as far as its data allows. */
static void flow_advance(sim_eng *g, int r) {
    if (g->fstream) flow_advance_from(g, r, 1);
    else flow_advance_from(g, r, 0);
}

/* sim_int.h. Returns 1 when the flow engine gives the heap engine's results for this run (see above). */
int sim_flow_ok(const sim_eng *g) {
    const sched *s = g->s;
    const sim_config *cfg = g->cfg;
    /* the hand-off's holds (sim_eng.hold): a RECV's depends on whether its message arrived,
     * which a rank on its own clock does not know yet */
    if (cfg->cv > 0 || cfg->rank_cv > 0 || sim_config_draws(cfg) || s->weights != SCHED_WEIGHTS_FLUSH || g->any_rep || g->hold) return 0;
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

/* sim_int.h. Runs the whole simulation with the flow engine. */
void sim_flow_run(sim_eng *g) {
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
        if (++steps % SIM_FLOW_PROGRESS_STEPS == 0) sim_show_progress(g);
    }
}
