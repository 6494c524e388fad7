/* sim_share.c: the sharing term (sim.h): the ranks of a run slow each other down while they
 * compute at once, and an action alone runs f_alone (a forward) or b_alone (a backward) times as
 * long as one beside the others running its own class. A run's busy spans give, at every
 * moment, how many ranks run each class (a sweep over all their starts and ends); an action's
 * factor is its span over the integral of 1 / g of its class across it. */
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One change of the count of ranks computing a class: at time t, +1 (a start) or -1 (an end) of
 * an action of class b (1: the backward class). */
typedef struct share_edge {
    double t;
    int d, b;
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

/* Returns 1 for the backward class (B, I, W), 0 for the forward class (the other busy kinds). */
static int backward_class(const sched_action *a) {
    return a->kind == SCHED_B || a->kind == SCHED_I || a->kind == SCHED_W;
}

double sim_share_f_cross(double measured, double f_alone, int ranks) {
    /* gF at kf = P - 2, kb = 1: f_alone + (1 - f_alone)(P - 2)/(P - 1) + (f_cross - f_alone)/(P - 1) */
    if (ranks <= 2) return measured;
    return f_alone + (ranks - 1) * (measured - f_alone) - (1 - f_alone) * (ranks - 2);
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

/* The ratios of q with its zeros for the one-ratio term (sim.h). */
static sim_share_ratios share_ratios_of(const sim_share_ratios *q) {
    sim_share_ratios r = *q;
    if (r.f_cross == 0) r.f_cross = 1;
    if (r.b_alone == 0) r.b_alone = r.f_alone;
    if (r.b_cross == 0) r.b_cross = 1;
    return r;
}

/* Returns 1 / gF (b 0) or 1 / gB (b 1) with kf and kb of the others (P - 1 of them, `others`)
 * computing forwards and backwards (sim.h). */
static double share_rate(const sim_share_ratios *q, int b, int kf, int kb, double others) {
    /* the one-ratio term's own expression where the class ratios are one (per class at ratios of
     * one gives the one ratio's results to the bit) */
    const int one = q->f_cross == 1 && q->b_cross == 1 && q->b_alone == q->f_alone;
    double g = one ? q->f_alone + (1 - q->f_alone) * (kf + kb) / others
               : b ? q->b_alone + (q->b_cross - q->b_alone) * kf / others + (1 - q->b_alone) * kb / others
                   : q->f_alone + (1 - q->f_alone) * kf / others + (q->f_cross - q->f_alone) * kb / others;
    return g > 0 ? 1 / g : 0;
}

/* Sets rows[r][i] (r < s->ranks, i < the rank's actions) to the sharing factor of each compute
 * action and STEP of the traced run tr (sim.h), 1 elsewhere, at the ratios q (share_ratios_of's).
 * Returns the largest change |new - old| over all places, or -1 out of memory (rows unchanged). */
static double share_factors(const sched *s, const sim_result *tr, const sim_share_ratios *q, double **rows) {
    size_t n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) n += busy_span(&s->rank[r].acts[i], &tr->trace[r][i]);
    share_edge *ed = pl_calloc(2 * n + 1, sizeof *ed);
    double *bt = pl_calloc(2 * n + 1, sizeof *bt), *h = pl_calloc(4 * (n + 1), sizeof *h), *w = pl_calloc(4 * (n + 1), sizeof *w);
    double moved = -1;
    if (ed && bt && h && w) {
        double *hb = h + 2 * (n + 1), *wb = w + 2 * (n + 1); /* the backward class's */
        size_t m = 0;
        for (int r = 0; r < s->ranks; r++)
            for (size_t i = 0; i < s->rank[r].n; i++) {
                const sched_action *a = &s->rank[r].acts[i];
                const sim_slot *sl = &tr->trace[r][i];
                if (!busy_span(a, sl)) continue;
                ed[m++] = (share_edge){sl->start_s, +1, backward_class(a)};
                ed[m++] = (share_edge){sl->end_s, -1, backward_class(a)};
            }
        qsort(ed, m, sizeof *ed, edge_cmp);
        /* breakpoints: the distinct times of the edges, with the counts cf, cb of ranks running
         * each class after each; the piece after breakpoint j runs a forward at rate w[j] =
         * 1 / gF(cf - 1, cb) and a backward at wb[j] = 1 / gB(cf, cb - 1) (the action itself is
         * one of its class's count; none of the class: rate 0, never integrated), and h, hb
         * integrate the rates up to it */
        const double others = s->ranks > 1 ? s->ranks - 1 : 1; /* one rank: only k = 0 */
        size_t nb = 0;
        int cf = 0, cb = 0;
        for (size_t j = 0; j < m; j++) {
            if (ed[j].b) cb += ed[j].d;
            else cf += ed[j].d;
            if (j + 1 < m && ed[j + 1].t == ed[j].t) continue;
            bt[nb] = ed[j].t;
            h[nb] = nb ? h[nb - 1] + (bt[nb] - bt[nb - 1]) * w[nb - 1] : 0;
            hb[nb] = nb ? hb[nb - 1] + (bt[nb] - bt[nb - 1]) * wb[nb - 1] : 0;
            w[nb] = cf >= 1 ? share_rate(q, 0, cf - 1, cb, others) : 0;
            wb[nb] = cb >= 1 ? share_rate(q, 1, cf, cb - 1, others) : 0;
            nb++;
        }
        moved = 0;
        for (int r = 0; r < s->ranks; r++)
            for (size_t i = 0; i < s->rank[r].n; i++) {
                const sched_action *a = &s->rank[r].acts[i];
                const sim_slot *sl = &tr->trace[r][i];
                double f = 1;
                if (busy_span(a, sl)) {
                    const int b = backward_class(a);
                    double in = nb ? integral(bt, b ? hb : h, b ? wb : w, nb, sl->start_s, sl->end_s) : 0;
                    if (in > 0) f = (sl->end_s - sl->start_s) / in;
                }
                double d = fabs(f - rows[r][i]);
                if (d > moved) moved = d;
                rows[r][i] = f;
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

int sim_share_solve(const sched *s, const sim_costs *c, const sim_config *cfg, const sim_share_ratios *ratios, double ***scale,
                    int *iters, pl_err *e) {
    *scale = NULL;
    *iters = 0;
    if (!(ratios->f_alone > 0) || !isfinite(ratios->f_alone))
        return pl_errf(e, PL_EINPUT, "the sharing term's ratio alone / beside must be finite and > 0 (got %g)", ratios->f_alone);
    const double more[3] = {ratios->f_cross, ratios->b_alone, ratios->b_cross};
    for (int j = 0; j < 3; j++)
        if (!(more[j] >= 0) || !isfinite(more[j]))
            return pl_errf(e, PL_EINPUT, "the sharing term's %s ratio must be finite and >= 0 (got %g; 0: the one-ratio term)",
                           j == 0 ? "forward-beside-backwards" : j == 1 ? "backward-alone" : "backward-beside-forwards", more[j]);
    const sim_share_ratios rq = share_ratios_of(ratios);
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
        double moved = share_factors(s, &tr, &rq, rows);
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
