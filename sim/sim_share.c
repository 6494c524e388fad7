/* sim_share.c: the sharing term (sim.h): the ranks of a run slow each other down while they
 * compute at once, and an action alone runs `alone` times as long as one beside all the others.
 * A run's busy spans give, at every moment, how many ranks compute (a sweep over all their
 * starts and ends); an action's factor is its span over the integral of 1 / g(k) across it. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One change of the count of computing ranks: at time t, +1 (a start) or -1 (an end). */
typedef struct share_edge {
    double t;
    int d;
} share_edge;

static int edge_cmp(const void *a, const void *b) {
    const share_edge *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->d - y->d; /* ends before starts at one instant: back-to-back spans do not overlap */
}

/* Returns 1 when action a of a traced run counts: a compute or a STEP that took time. */
static int busy_span(const sched_action *a, const sim_slot *sl) {
    return sched_kind_is_busy((sched_kind)a->kind) && sl->end_s > sl->start_s;
}

/* Returns the index of the last breakpoint at or before t (0 when t is before them all). */
static size_t point_at(const double *bt, size_t n, double t) {
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (bt[mid] <= t) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Returns the integral of 1 / g over [s, e]: the prefix integral H at the breakpoints bt (n of
 * them), the piece's rate w after each. */
static double integral(const double *bt, const double *h, const double *w, size_t n, double s, double e) {
    size_t i = point_at(bt, n, s), j = point_at(bt, n, e);
    double hs = h[i] + (s - bt[i]) * w[i], he = h[j] + (e - bt[j]) * w[j];
    return he - hs;
}

/* Sets rows[r][i] (r < s->ranks, i < the rank's actions) to the sharing factor of each compute
 * action and STEP of the traced run tr (sim.h), 1 elsewhere. Returns the largest change |new -
 * old| over all places, or -1 out of memory (rows unchanged). */
static double share_factors(const sched *s, const sim_result *tr, double alone, double **rows) {
    size_t n = 0;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) n += busy_span(&s->rank[q].acts[i], &tr->trace[q][i]);
    share_edge *ed = pl_calloc(2 * n + 1, sizeof *ed);
    double *bt = pl_calloc(2 * n + 1, sizeof *bt), *h = pl_calloc(2 * n + 1, sizeof *h), *w = pl_calloc(2 * n + 1, sizeof *w);
    double moved = -1;
    if (ed && bt && h && w) {
        size_t m = 0;
        for (int q = 0; q < s->ranks; q++)
            for (size_t i = 0; i < s->rank[q].n; i++) {
                const sim_slot *sl = &tr->trace[q][i];
                if (!busy_span(&s->rank[q].acts[i], sl)) continue;
                ed[m++] = (share_edge){sl->start_s, +1};
                ed[m++] = (share_edge){sl->end_s, -1};
            }
        qsort(ed, m, sizeof *ed, edge_cmp);
        /* breakpoints: the distinct times of the edges, with the count c after each; the piece
         * after breakpoint j runs at rate w[j] = 1 / g(c - 1) (the action itself is one of the
         * c; no rank computing: rate 0, never integrated) and h[j] integrates the rate up to it */
        const double others = s->ranks > 1 ? s->ranks - 1 : 1; /* one rank: only k = 0 */
        size_t nb = 0;
        int c = 0;
        for (size_t j = 0; j < m; j++) {
            c += ed[j].d;
            if (j + 1 < m && ed[j + 1].t == ed[j].t) continue;
            bt[nb] = ed[j].t;
            h[nb] = nb ? h[nb - 1] + (bt[nb] - bt[nb - 1]) * w[nb - 1] : 0;
            w[nb] = c >= 1 ? 1 / (alone + (1 - alone) * (c - 1) / others) : 0;
            nb++;
        }
        moved = 0;
        for (int q = 0; q < s->ranks; q++)
            for (size_t i = 0; i < s->rank[q].n; i++) {
                const sim_slot *sl = &tr->trace[q][i];
                double f = 1;
                if (busy_span(&s->rank[q].acts[i], sl)) {
                    double in = nb ? integral(bt, h, w, nb, sl->start_s, sl->end_s) : 0;
                    if (in > 0) f = (sl->end_s - sl->start_s) / in;
                }
                double d = fabs(f - rows[q][i]);
                if (d > moved) moved = d;
                rows[q][i] = f;
            }
    }
    free(ed);
    free(bt);
    free(h);
    free(w);
    return moved;
}

void sim_share_free(const sched *s, double **scale) {
    for (int q = 0; scale && q < s->ranks; q++) free(scale[q]);
    free(scale);
}

int sim_share_solve(const sched *s, const sim_costs *c, const sim_config *cfg, double alone, double ***scale, int *iters,
                    pl_err *e) {
    *scale = NULL;
    *iters = 0;
    if (!(alone > 0) || !isfinite(alone))
        return pl_errf(e, PL_EINPUT, "the sharing term's ratio alone / beside must be finite and > 0 (got %g)", alone);
    if (s->ranks < 2) return pl_errf(e, PL_EINPUT, "the sharing term needs at least 2 ranks (got %d)", s->ranks);
    for (int q = 0; cfg->replicas && q < s->stages; q++)
        if (cfg->replicas[q] > 1) return pl_errf(e, PL_EINPUT, "the sharing term does not serve replicated stages");
    double **rows = pl_calloc((size_t)s->ranks, sizeof *rows);
    int rc = rows ? PL_OK : pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0; rc == PL_OK && q < s->ranks; q++) {
        rows[q] = pl_calloc(s->rank[q].n ? s->rank[q].n : 1, sizeof *rows[q]);
        if (!rows[q]) rc = pl_errf(e, PL_ENOMEM, "out of memory");
        for (size_t i = 0; rows[q] && i < s->rank[q].n; i++) rows[q][i] = 1;
    }
    sim_config d = *cfg;
    d.cv = d.rank_cv = 0;
    d.speed_draws = d.speed_draws_b = NULL;
    d.speed_draws_n = 0;
    d.record_trace = 1;
    d.progress = NULL;
    d.act_scale = (const double *const *)rows;
    for (int it = 0; rc == PL_OK && it < SIM_SHARE_ITERS; it++) {
        sim_result tr;
        rc = sim_run(s, c, &d, &tr, e);
        if (rc != PL_OK) break;
        double moved = share_factors(s, &tr, alone, rows);
        sim_result_free(&tr);
        if (moved < 0) rc = pl_errf(e, PL_ENOMEM, "out of memory");
        *iters = it + 1;
        if (rc == PL_OK && moved <= SIM_SHARE_TOL) break;
    }
    if (rc != PL_OK) {
        sim_share_free(s, rows);
        return rc;
    }
    *scale = rows;
    return PL_OK;
}
