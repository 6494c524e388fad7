/* dryrun.c: the unit-time dry run: executes a schedule with integer action costs, finds
 * deadlocks (naming the cycle of waiting ranks), and measures steps, bubble and stashes. */
#include "sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Completion-time tables, one entry per (stage, global microbatch), holding time + 1; 0 = not yet. */
enum { T_FDONE, T_IDONE, T_SENDF, T_SENDB, T_RECVF, T_RECVB, T_N };

typedef struct dr {
    const sched *s;
    sched_unit_costs c;
    int64_t M;          /* microbatches over all iterations */
    int64_t n_entries;  /* stages * M */
    int64_t *tab[T_N];  /* NULL when the schedule does not need that table */
    size_t *pc;         /* [ranks] next action */
    int64_t *free_at;   /* [ranks] time the rank becomes free */
    int64_t *blocked;   /* [ranks] key the rank waits for, -1 = runnable */
    int *work;          /* stack of runnable ranks */
    int nwork;
    char *queued;       /* [ranks] 1 when on the work stack */
    sched_dryrun_result *r;
    int record;
} dr;

/* Returns the table index of (stage, mb), or -1 when out of range. */
static int64_t entry(const dr *d, int stage, int mb) {
    if (stage < 0 || stage >= d->s->stages || mb < 0 || mb >= d->M) return -1;
    return (int64_t)stage * d->M + mb;
}

/* Returns the cost in steps of a compute action; under full recomputation (rc) a B or an I runs
 * its forward again first, one F more, as the simulator prices it. */
static int64_t cost_of(const sched_unit_costs *c, const sched_action *a, int rc) {
    int64_t again = rc ? c->f : 0;
    switch (a->kind) {
    case SCHED_F: return c->f;
    case SCHED_B: return c->b + again;
    case SCHED_I: return c->i + again;
    case SCHED_W: return c->w;
    case SCHED_OVERLAP: return c->f + (a->kind2 == SCHED_I ? c->i : c->b) + again;
    default: return 0;
    }
}

/* A dependency of an action: a table key whose time must be known. */
typedef struct dep {
    int t;
    int64_t idx;
} dep;

/* Adds the dependency that (stage, mb)'s forward input is available to deps; returns count. */
static int fwd_input_dep(const dr *d, int stage, int mb, dep *out) {
    const sched *s = d->s;
    if (stage == 0) return 0;
    int local = !s->lowered || s->stage_rank[stage - 1] == s->stage_rank[stage];
    out->t = local ? T_FDONE : T_RECVF;
    out->idx = local ? entry(d, stage - 1, mb) : entry(d, stage, mb);
    return 1;
}

/* Adds the dependencies of a backward (B or I) of (stage, mb): its own forward and the output
 * gradient from stage + 1; returns the count. */
static int bwd_deps(const dr *d, int stage, int mb, dep *out) {
    const sched *s = d->s;
    int n = 0;
    out[n].t = T_FDONE;
    out[n++].idx = entry(d, stage, mb);
    if (stage + 1 < s->stages) {
        int local = !s->lowered || s->stage_rank[stage + 1] == s->stage_rank[stage];
        out[n].t = local ? T_IDONE : T_RECVB;
        out[n++].idx = local ? entry(d, stage + 1, mb) : entry(d, stage, mb);
    }
    return n;
}

/* Fills deps for action a; returns the count (0..4). Entries with idx -1 are out of range. */
static int deps_of(const dr *d, const sched_action *a, dep *out) {
    int n = 0;
    switch (a->kind) {
    case SCHED_F: return fwd_input_dep(d, a->stage, a->mb, out);
    case SCHED_B:
    case SCHED_I: return bwd_deps(d, a->stage, a->mb, out);
    case SCHED_W:
        out[0].t = T_IDONE;
        out[0].idx = entry(d, a->stage, a->mb);
        return 1;
    case SCHED_OVERLAP:
        n = fwd_input_dep(d, a->stage, a->mb, out);
        return n + bwd_deps(d, a->stage2, a->mb2, out + n);
    case SCHED_SEND_F:
        out[0].t = T_FDONE;
        out[0].idx = entry(d, a->stage, a->mb);
        return 1;
    case SCHED_SEND_B:
        out[0].t = T_IDONE;
        out[0].idx = entry(d, a->stage, a->mb);
        return 1;
    case SCHED_RECV_F:
        out[0].t = T_SENDF;
        out[0].idx = entry(d, a->stage - 1, a->mb);
        return 1;
    case SCHED_RECV_B:
        out[0].t = T_SENDB;
        out[0].idx = entry(d, a->stage + 1, a->mb);
        return 1;
    default: return 0;
    }
}

/* Returns the rank that produces the entry (t, idx): the rank of the stage it belongs to. */
static int producer_rank(const dr *d, int t, int64_t idx) {
    (void)t;
    return d->s->stage_rank[idx / d->M];
}

/* Pushes rank r on the work stack unless it is already there. */
static void wake(dr *d, int r) {
    if (d->queued[r]) return;
    d->queued[r] = 1;
    d->work[d->nwork++] = r;
}

/* Records time tm for (t, idx) and wakes the ranks that may be waiting for it. */
static void publish(dr *d, int t, int64_t idx, int64_t tm) {
    if (idx < 0 || !d->tab[t]) return;
    d->tab[t][idx] = tm + 1; /* stored + 1: 0 = not yet, so calloc'ed tables need no fill */
    int64_t key = (int64_t)t * d->n_entries + idx;
    int stage = (int)(idx / d->M);
    int cand[3], nc = 0;
    const sched *s = d->s;
    cand[nc++] = s->stage_rank[stage];
    if (stage + 1 < s->stages) cand[nc++] = s->stage_rank[stage + 1];
    if (stage > 0) cand[nc++] = s->stage_rank[stage - 1];
    for (int i = 0; i < nc; i++)
        if (d->blocked[cand[i]] == key) {
            d->blocked[cand[i]] = -1;
            wake(d, cand[i]);
        }
}

/* Runs rank r as far as its dependencies allow. */
static void run_rank(dr *d, int r) {
    const sched_rank *rk = &d->s->rank[r];
    while (d->pc[r] < rk->n) {
        const sched_action *a = &rk->acts[d->pc[r]];
        dep dp[4];
        int nd = deps_of(d, a, dp);
        int64_t start = d->free_at[r];
        for (int i = 0; i < nd; i++) {
            if (dp[i].idx < 0 || !d->tab[dp[i].t]) {
                /* out of range: never satisfiable; validation reports it precisely */
                d->blocked[r] = -2;
                return;
            }
            int64_t tm = d->tab[dp[i].t][dp[i].idx] - 1;
            if (tm < 0) {
                d->blocked[r] = (int64_t)dp[i].t * d->n_entries + dp[i].idx;
                return;
            }
            if (tm > start) start = tm;
        }
        int64_t end = start + cost_of(&d->c, a, d->s->recompute == SCHED_RECOMPUTE_FULL);
        if (d->record) {
            d->r->slot[r][d->pc[r]].start = start;
            d->r->slot[r][d->pc[r]].end = end;
        }
        if (sched_kind_is_compute((sched_kind)a->kind)) d->r->busy[r] += end - start;
        d->free_at[r] = end;
        d->pc[r]++;
        switch (a->kind) {
        case SCHED_F: publish(d, T_FDONE, entry(d, a->stage, a->mb), end); break;
        case SCHED_B:
        case SCHED_I: publish(d, T_IDONE, entry(d, a->stage, a->mb), end); break;
        case SCHED_OVERLAP:
            publish(d, T_FDONE, entry(d, a->stage, a->mb), end);
            publish(d, T_IDONE, entry(d, a->stage2, a->mb2), end);
            break;
        case SCHED_SEND_F: publish(d, T_SENDF, entry(d, a->stage, a->mb), end); break;
        case SCHED_SEND_B: publish(d, T_SENDB, entry(d, a->stage, a->mb), end); break;
        case SCHED_RECV_F: publish(d, T_RECVF, entry(d, a->stage, a->mb), end); break;
        case SCHED_RECV_B: publish(d, T_RECVB, entry(d, a->stage, a->mb), end); break;
        default: break;
        }
    }
}

/* Describes the action that produces table entry (t, idx) into buf. */
static void describe_entry(const dr *d, int t, int64_t idx, char *buf, size_t n) {
    int stage = (int)(idx / d->M), mb = (int)(idx % d->M);
    static const char *const what[T_N] = {"F", "B", "SEND_F", "SEND_B", "RECV_F", "RECV_B"};
    int r = d->s->stage_rank[stage];
    if (t == T_IDONE)
        snprintf(buf, n, "%dB%d or %dI%d on rank %d", stage, mb, stage, mb, r);
    else
        snprintf(buf, n, "%d%s%d on rank %d", stage, what[t], mb, r);
}

/* Fills e with a deadlock report: the cycle of waiting ranks when there is one, else the
 * blocked ranks and what they wait for. Returns PL_EINPUT. */
static int report_deadlock(dr *d, pl_err *e) {
    const sched *s = d->s;
    pl_buf b;
    pl_buf_init(&b);
    int first = -1;
    for (int r = 0; r < s->ranks; r++)
        if (d->pc[r] < s->rank[r].n) { first = r; break; }
    /* follow waits-for edges from the first blocked rank to find a cycle */
    int *seen = pl_calloc((size_t)s->ranks, sizeof *seen);
    int cyc = -1;
    if (seen) {
        int r = first, step = 1;
        while (r >= 0 && !seen[r] && d->blocked[r] >= 0) {
            seen[r] = step++;
            int t = (int)(d->blocked[r] / d->n_entries);
            int64_t idx = d->blocked[r] % d->n_entries;
            int q = producer_rank(d, t, idx);
            if (d->pc[q] >= s->rank[q].n) break; /* producer finished: the action never comes */
            r = q;
        }
        if (r >= 0 && seen[r]) cyc = r;
    }
    pl_buf_puts(&b, "deadlock: ");
    int r = cyc >= 0 ? cyc : first, count = 0;
    do {
        char act[96], waits[96];
        sched_action_format(&s->rank[r].acts[d->pc[r]], act, sizeof act);
        if (d->blocked[r] >= 0) {
            int t = (int)(d->blocked[r] / d->n_entries);
            describe_entry(d, t, d->blocked[r] % d->n_entries, waits, sizeof waits);
        } else {
            snprintf(waits, sizeof waits, "an action that is out of range");
        }
        if (count) pl_buf_puts(&b, cyc >= 0 ? " -> " : "; ");
        pl_buf_printf(&b, "rank %d at action %zu (%s) waits for %s", r, d->pc[r] + 1, act, waits);
        count++;
        if (cyc < 0) break;
        int t = (int)(d->blocked[r] / d->n_entries);
        r = producer_rank(d, t, d->blocked[r] % d->n_entries);
    } while (r != cyc && count < 64);
    if (cyc >= 0) pl_buf_printf(&b, " -> rank %d (a cycle)", cyc);
    else pl_buf_puts(&b, ", which never happens");
    int nb = 0;
    for (int q = 0; q < s->ranks; q++) nb += d->pc[q] < s->rank[q].n;
    pl_buf_printf(&b, " [%d rank%s blocked]", nb, nb == 1 ? "" : "s");
    pl_errf(e, PL_EINPUT, "%s", b.data ? b.data : "deadlock");
    pl_buf_free(&b);
    free(seen);
    return PL_EINPUT;
}

/* Frees the arrays of a dry-run result. */
void sched_dryrun_free(sched_dryrun_result *r, int ranks) {
    if (!r) return;
    if (r->slot)
        for (int i = 0; i < ranks; i++) free(r->slot[i]);
    free(r->slot);
    free(r->busy);
    free(r->max_inflight);
    memset(r, 0, sizeof *r);
}

/* Counts, along each rank's list, the most (stage, mb) pairs whose forward ran and whose
 * stash is not released yet (released by B, or by W when the backward is split). */
static void count_inflight(const sched *s, int *out) {
    for (int r = 0; r < s->ranks; r++) {
        int cur = 0, mx = 0;
        const sched_rank *rk = &s->rank[r];
        for (size_t i = 0; i < rk->n; i++) {
            const sched_action *a = &rk->acts[i];
            if (a->kind == SCHED_F) cur++;
            else if (a->kind == SCHED_B || a->kind == SCHED_W) cur--;
            else if (a->kind == SCHED_OVERLAP) {
                cur++;
                if (cur > mx) mx = cur;
                if (a->kind2 == SCHED_B) cur--;
            }
            if (cur > mx) mx = cur;
        }
        out[r] = mx;
    }
}

int sched_dryrun_core(const sched *s, const sched_unit_costs *costs, sched_dryrun_result *r,
                      int record, pl_err *e) {
    memset(r, 0, sizeof *r);
    dr d;
    memset(&d, 0, sizeof d);
    d.s = s;
    d.r = r;
    d.record = record;
    d.c = costs ? *costs : (sched_unit_costs){1, 1, 1, 1};
    if (d.c.f < 0 || d.c.b < 0 || d.c.i < 0 || d.c.w < 0) return pl_errf(e, PL_EINPUT, "dry-run costs must not be negative");
    d.M = sched_total_microbatches(s);
    /* find the largest microbatch used so that files with more iterations still index well */
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            if (a->mb >= d.M) d.M = (int64_t)a->mb + 1;
            if (a->kind == SCHED_OVERLAP && a->mb2 >= d.M) d.M = (int64_t)a->mb2 + 1;
        }
    d.n_entries = (int64_t)s->stages * d.M;
    if (d.n_entries > ((int64_t)1 << 34)) return pl_errf(e, PL_ENOMEM, "schedule too large for the dry run: %lld stage-microbatch pairs", (long long)d.n_entries);
    int ntab = s->lowered ? T_N : 2;
    int rc = PL_OK;
    for (int t = 0; t < ntab; t++) {
        d.tab[t] = calloc((size_t)d.n_entries, sizeof(int64_t));
        if (!d.tab[t]) { rc = pl_errf(e, PL_ENOMEM, "out of memory: the dry run needs %lld bytes", (long long)(d.n_entries * 8 * ntab)); goto out; }
    }
    d.pc = pl_calloc((size_t)s->ranks, sizeof *d.pc);
    d.free_at = pl_calloc((size_t)s->ranks, sizeof *d.free_at);
    d.blocked = pl_calloc((size_t)s->ranks, sizeof *d.blocked);
    d.work = pl_calloc((size_t)s->ranks, sizeof *d.work);
    d.queued = pl_calloc((size_t)s->ranks, 1);
    r->busy = pl_calloc((size_t)s->ranks, sizeof *r->busy);
    r->max_inflight = pl_calloc((size_t)s->ranks, sizeof *r->max_inflight);
    r->slot = record ? pl_calloc((size_t)s->ranks, sizeof *r->slot) : NULL;
    if (!d.pc || !d.free_at || !d.blocked || !d.work || !d.queued || !r->busy || !r->max_inflight || (record && !r->slot)) {
        rc = pl_errf(e, PL_ENOMEM, "out of memory in the dry run");
        goto out;
    }
    if (record)
        for (int q = 0; q < s->ranks; q++) {
            r->slot[q] = pl_calloc(s->rank[q].n ? s->rank[q].n : 1, sizeof(sched_slot));
            if (!r->slot[q]) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the dry run"); goto out; }
        }
    for (int q = s->ranks - 1; q >= 0; q--) {
        d.blocked[q] = -1;
        wake(&d, q);
    }
    while (d.nwork > 0) {
        int q = d.work[--d.nwork];
        d.queued[q] = 0;
        run_rank(&d, q);
    }
    for (int q = 0; q < s->ranks; q++)
        if (d.pc[q] < s->rank[q].n) { rc = report_deadlock(&d, e); goto out; }
    int64_t steps = 0, busy = 0;
    for (int q = 0; q < s->ranks; q++) {
        if (d.free_at[q] > steps) steps = d.free_at[q];
        busy += r->busy[q];
    }
    r->steps = steps;
    r->bubble_fraction = steps > 0 ? 1.0 - (double)busy / ((double)steps * s->ranks) : 0.0;
    count_inflight(s, r->max_inflight);
out:
    for (int t = 0; t < T_N; t++) free(d.tab[t]);
    free(d.pc);
    free(d.free_at);
    free(d.blocked);
    free(d.work);
    free(d.queued);
    if (rc != PL_OK) sched_dryrun_free(r, s->ranks);
    return rc;
}

int sched_dryrun(const sched *s, const sched_unit_costs *costs, sched_dryrun_result *r, pl_err *e) {
    return sched_dryrun_core(s, costs, r, 1, e);
}
