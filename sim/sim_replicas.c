/* sim_replicas.c: replicated stages (PipeDream's 1F1B-RR, see sim.h): the engine streams of a
 * rank (one per replica), the subsequence of the rank's list each walks, the collectives of
 * each replicated stage, and the statistics and trace of a replicated rank after the run. The
 * rules that run them (reduce_join, the deferred steps) are the heap engine's (sim_heap.c, sim_rules_int.h). */
#include <stdlib.h>

#include "sim_int.h"

int sim_setup_streams(sim_eng *g, pl_err *e) {
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
        if (n > SIM_MAX_STREAMS)
            return pl_errf(e, PL_EINPUT, "too many replicas: %lld streams from rank %d on (at most %d in all)",
                           (long long)n, r, SIM_MAX_STREAMS);
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
static int route(const sim_eng *g, const sched_action *a, int w) {
    int st = a->stage;
    if (st < 0 || st >= g->s->stages) return 0;
    return sched_replica_of(a, g->reps[st] < w ? g->reps[st] : w);
}

/* Returns the entries the streams of replicated ranks take in all (an action of every replica
 * counts once per replica). */
static size_t split_total(const sim_eng *g) {
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
    return total;
}

/* Gives the w streams of rank q their parts of sacts and sorig from *off on (sized by counting
 * the actions each gets), and fills them in the rank's order. */
static void split_rank(sim_eng *g, int q, size_t *off) {
    const sched_rank *rk = &g->s->rank[q];
    int w = g->swidth[q];
    sim_rank_state *k0 = &g->rk[g->sbase[q]];
    for (int j = 0; j < w; j++) k0[j].n = 0;
    for (size_t i = 0; i < rk->n; i++) {
        int j = route(g, &rk->acts[i], w);
        if (j >= 0) k0[j].n++;
        else
            for (int x = 0; x < -j; x++) k0[x].n++;
    }
    for (int j = 0; j < w; j++) {
        k0[j].acts = g->sacts + *off;
        k0[j].orig = g->sorig + *off;
        k0[j].fa = NULL;
        *off += k0[j].n;
        k0[j].n = 0;
    }
    for (size_t i = 0; i < rk->n; i++) {
        const sched_action *a = &rk->acts[i];
        int j = route(g, a, w), lo = j >= 0 ? j : 0, hi = j >= 0 ? j + 1 : -j;
        for (int x = lo; x < hi; x++) {
            sim_rank_state *k = &k0[x];
            ((sched_action *)k->acts)[k->n] = *a;
            ((uint32_t *)k->orig)[k->n] = (uint32_t)i;
            k->n++;
        }
    }
}

int sim_split_streams(sim_eng *g, pl_err *e) {
    size_t total = split_total(g);
    g->sacts = malloc((total ? total : 1) * sizeof *g->sacts);
    g->sorig = malloc((total ? total : 1) * sizeof *g->sorig);
    if (!g->sacts || !g->sorig) return pl_errf(e, PL_ENOMEM, "out of memory for the replicas' action lists");
    size_t off = 0;
    for (int q = 0; q < g->s->ranks; q++)
        if (g->swidth[q] > 1) split_rank(g, q, &off);
    return PL_OK;
}

/* Sets up the collectives of stage q (n > 1 replicas) from the REDUCE_GRADs on its rank's
 * list: a round per n microbatches (stash), then one per REDUCE_GRAD without a microbatch.
 * Returns PL_OK, PL_ENOMEM, or PL_EINPUT when a round's microbatches are not those of its
 * first replicas. */
static int stage_rounds(sim_eng *g, int q, pl_err *e) {
    int n = g->reps[q];
    const sched_rank *rk = &g->s->rank[g->s->stage_rank[q]];
    int64_t maxmb = -1, nneg = 0;
    for (size_t i = 0; i < rk->n; i++) {
        const sched_action *a = &rk->acts[i];
        if (a->kind != SCHED_REDUCE_GRAD || a->stage != q) continue;
        if (a->mb >= 0) { if (a->mb > maxmb) maxmb = a->mb; }
        else nneg++;
    }
    sim_rstage *rs = &g->rs[q];
    rs->neg0 = maxmb >= 0 ? maxmb / n + 1 : 0;
    rs->nrd = rs->neg0 + nneg;
    rs->rd = pl_calloc((size_t)(rs->nrd ? rs->nrd : 1), sizeof *rs->rd);
    int32_t *top = pl_calloc((size_t)(rs->neg0 ? rs->neg0 : 1), sizeof *top); /* largest replica + 1 per round */
    int rc = PL_OK;
    if (!rs->rd || !top) rc = pl_errf(e, PL_ENOMEM, "out of memory for the all-reduces of stage %d", q);
    for (size_t i = 0; i < rk->n && rc == PL_OK; i++) {
        const sched_action *a = &rk->acts[i];
        if (a->kind != SCHED_REDUCE_GRAD || a->stage != q || a->mb < 0) continue;
        rs->rd[a->mb / n].expected++;
        if ((int32_t)(a->mb % n) + 1 > top[a->mb / n]) top[a->mb / n] = (int32_t)(a->mb % n) + 1;
    }
    for (int64_t i = 0; i < rs->neg0 && rc == PL_OK; i++)
        if (rs->rd[i].expected != top[i])
            rc = pl_errf(e, PL_EINPUT,
                         "stage %d (%d replicas): the all-reduces of microbatches %lld..%lld are not those of "
                         "replicas 0..%d: each replicated round needs its first replicas' microbatches",
                         q, n, (long long)(i * n), (long long)(i * n + n - 1), top[i] - 1);
    free(top);
    for (int64_t i = rs->neg0; i < rs->nrd && rc == PL_OK; i++) rs->rd[i].expected = n;
    return rc;
}

int sim_setup_rounds(sim_eng *g, pl_err *e) {
    int S = g->s->stages;
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
        if (g->reps[q] <= 1) continue;
        int rc = stage_rounds(g, q, e);
        if (rc != PL_OK) return rc;
    }
    return PL_OK;
}

/* (sim_int.h) busy is the mean over the replicas; communication and all-reduce time are summed
 * (each collective counted once); memory, stash and versions are the largest of one replica
 * (one device); the span runs from the first replica's first compute to the last one's end. */
void sim_rank_of_replicas(const sim_eng *g, int q, sim_rank_stats *st) {
    int w = g->swidth[q];
    const sim_rank_state *k0 = &g->rk[g->sbase[q]];
    double busy = 0, comm = 0, red = 0, first = 0, last = 0;
    int started = 0;
    sim_rank_stats a = k0->st;
    for (int j = 0; j < w; j++) {
        const sim_rank_state *k = &k0[j];
        busy += g->r->steady_state ? sim_busy_window(g, k) : k->st.busy_s;
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

void sim_trace_rounds(sim_eng *g) {
    const sched *s = g->s;
    sim_result *r = g->r;
    for (int q = 0; q < s->stages; q++) {
        if (g->reps[q] <= 1) continue;
        int rr = s->stage_rank[q];
        int64_t neg = 0;
        for (size_t i = 0; i < s->rank[rr].n; i++) {
            const sched_action *a = &s->rank[rr].acts[i];
            if (a->kind != SCHED_REDUCE_GRAD || a->stage != q) continue;
            int64_t ri = a->mb >= 0 ? a->mb / g->reps[q] : g->rs[q].neg0 + neg++;
            if (ri >= 0 && ri < g->rs[q].nrd) {
                r->trace[rr][i].start_s = g->rs[q].rd[ri].start;
                r->trace[rr][i].end_s = g->rs[q].rd[ri].end;
            }
        }
    }
}
