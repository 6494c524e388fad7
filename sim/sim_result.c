/* sim_result.c: what a run reports: the summary metrics from the streams' statistics (the
 * iteration time, the bubble window and the figures over it, memory and the OOM verdict),
 * statistics over repeated stochastic runs, and freeing a result. */
#include <math.h>
#include <stdlib.h>

#include "sim_int.h"

void sim_result_free(sim_result *r) {
    if (!r) return;
    if (r->trace)
        for (int q = 0; q < r->ranks; q++) free(r->trace[q]);
    free(r->trace);
    free(r->rank);
    free(r->iter_end_s);
    memset(r, 0, sizeof *r);
}

/* Returns the makespan: the last end among the collective streams, the iterations and the
 * links. */
static double makespan(const sim_eng *g) {
    const sim_result *r = g->r;
    double mk = 0;
    for (int q = 0; q < g->nstream; q++) {
        if (g->rk[q].coll_free > mk) mk = g->rk[q].coll_free;
    }
    for (int it = 0; it < r->iterations; it++)
        if (r->iter_end_s[it] > mk) mk = r->iter_end_s[it];
    for (size_t l = 0; l < (size_t)g->nlinks; l++)
        if (g->link_free[l] > mk) mk = g->link_free[l];
    return mk;
}

int sim_steady_last(int iterations, int cycle, int drain) {
    int last = iterations - 2;
    if (drain - 1 < last) last = drain - 1;
    if (last < 1) return 0;
    return cycle > 1 && last >= cycle ? last - last % cycle : last;
}

/* Most periods the window's search tries (choose_window). */
#define PERIOD_SEARCH_MAX 4096

/* Returns 1 when gaps a and b between iteration ends are equal within a relative 1e-9. */
static int same_gap(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-300; }

double sim_busy_window(const sim_eng *g, const sim_rank_state *k) {
    double b = 0;
    size_t n = (size_t)g->r->iterations, base = (size_t)(k - g->rk) * n;
    for (int it = g->r->steady_first; g->busy_it && it <= g->r->steady_last; it++) b += g->busy_it[base + (size_t)it];
    return b;
}

/* Finds the period of the gaps between the iteration ends (gap i = end[i] - end[i - 1]) over
 * gaps 1..last: for each d up to half of them, the earliest gap from which the gaps repeat every
 * d up to the last; keeps the d whose repetition starts earliest (then the smallest d) when it
 * holds sched_async_span(d) gaps (two periods, and two comparisons: two equal gaps in a row are
 * not a period of 1) and half the `range` gaps at least (range >= last: the gaps the window could
 * have held). Sets *d and *start (0 and 1 when none). */
static void find_period(const double *end, int last, int range, int *d_out, int *start) {
    int best_d = 0, best_s = 0;
    for (int d = 1; last >= 2 && 2 * d <= last && d <= PERIOD_SEARCH_MAX && best_s != 1; d++) {
        int st = last - d + 1; /* gaps st..last repeat every d from st on */
        while (st > 1 && same_gap(end[st - 1] - end[st - 2], end[st - 1 + d] - end[st - 2 + d])) st--;
        int len = last - st + 1; /* two periods, and half the iterations at least: not a coincidence */
        if (len >= sched_async_span(d) && 2 * len >= range && (!best_d || st < best_s)) {
            best_d = d;
            best_s = st;
        }
    }
    *d_out = best_d;
    *start = best_d ? best_s : 1;
}

/* Chooses an asynchronous run's window once its iterations ended, among iterations 1 to the last
 * before the drain (sim_steady_last): the gaps between their ends settle, after a transient the
 * fill can leave, into a period (find_period); the window is whole periods from where the
 * repetition starts. The drain's first iteration is an estimate (drain_first), and a drain that
 * starts sooner (a replicated stage's streams pace one another: 2BW, p 2, m 1, stage 0 twice ends
 * its last iteration before the drain 2 s after the one before it, the others 3 s apart) leaves
 * gaps at the end of the range that do not repeat: so where the whole range holds no period, the
 * search drops its last gaps, one at a time, up to the drain's ceil((W - 1) / m) iterations,
 * the repetition still holding half the whole range (with the half of what is left, a short
 * chance repetition near the fill passed: 2BW, p 12, m 10, two replicas a stage, 1 s transfers,
 * gaps 25, 23, 25, 25, 23, ... repeating every 12, read a period of 2 in gaps 4..9).
 * Sets r->steady_first, r->steady_cycle (0 when no gaps repeat twice: a stochastic run, too few
 * iterations) and r->steady_need, and returns the window's last iteration, 0 when the fill and
 * the drain leave none. */
static int choose_window(const sim_eng *g) {
    sim_result *r = g->r;
    int n = r->iterations, most = sim_steady_last(n, 1, g->drain), best_d = 0, best_s = 1, upto = most;
    int64_t w = 0; /* the workers, for the drain's iterations: the first stage's warm-up of w - 1 */
    for (int q = 0; q < g->s->stages; q++) w += g->reps && g->reps[q] > 1 ? g->reps[q] : 1;
    int64_t m = g->s->microbatches, depth = (w - 1 + m - 1) / m, guess = sched_async_cycle(g->s->stages, (int)m, g->reps);
    for (int64_t cut = 0; !best_d && cut <= (depth > 1 ? depth : 1) && most - cut >= 2; cut++) {
        upto = most - (int)cut;
        find_period(r->iter_end_s, upto, most, &best_d, &best_s);
    }
    r->steady_cycle = best_d;
    r->steady_first = best_s;
    int64_t need = 1 + (depth > 1 ? depth : 1) + sched_async_span(best_d ? best_d : guess) + (best_s > 1 ? best_s - 1 : 0);
    if (!best_d && need <= n) need = 2 * (int64_t)n; /* this run was long enough for the guess */
    r->steady_need = need > INT32_MAX ? INT32_MAX : (int)need;
    if (most < 1) return 0;
    return best_d ? best_s - 1 + (upto - best_s + 1) / best_d * best_d : most;
}

/* Sets the makespan, the iteration time and the bubble window (sim.h): an asynchronous
 * schedule's steady state over iterations steady_first..steady_last (choose_window), the window
 * its iteration time is measured over; else the whole run. */
static void set_window(const sim_eng *g) {
    sim_result *r = g->r;
    double mk = makespan(g);
    r->makespan_s = mk;
    int n = r->iterations, async = g->s->weights != SCHED_WEIGHTS_FLUSH && n >= 2 && !g->cfg->whole_run;
    r->steady_first = 1;
    int last = async ? choose_window(g) : 0; /* the window: from the end of iteration first - 1 to last's */
    int first = r->steady_first;
    r->steady_state = async && last >= first;
    r->iteration_time_s = r->steady_state ? (r->iter_end_s[last] - r->iter_end_s[first - 1]) / (last - first + 1)
                          : n > 1         ? mk / n
                                          : mk;
    double win = r->steady_state ? r->iter_end_s[last] - r->iter_end_s[first - 1] : mk;
    if (r->steady_state && !(win > 0)) { /* no time between the ends (zero-cost iterations) */
        r->steady_state = 0;
        r->iteration_time_s = n > 1 ? mk / n : mk;
        win = mk;
    }
    r->steady_last = r->steady_state ? last : 0;
    if (!r->steady_state) r->steady_first = 0;
    r->window_s = win;
}

/* Fills rank q's statistics over the window win from its streams (its replicas' when it has
 * several), and raises the run's Zero Bubble rate to the rank's. */
static void rank_stats(const sim_eng *g, int q, double win) {
    sim_result *r = g->r;
    const sim_rank_state *k0 = &g->rk[g->sbase[q]];
    r->rank[q] = k0->st;
    sim_rank_stats *st = &r->rank[q];
    st->span_s = k0->started ? k0->last_end - st->first_start_s : 0;
    if (r->steady_state) st->busy_s = sim_busy_window(g, k0);
    if (g->swidth[q] > 1) sim_rank_of_replicas(g, q, st);
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
}

void sim_finish_metrics(const sim_eng *g) {
    sim_result *r = g->r;
    const sched *s = g->s;
    set_window(g);
    double win = r->window_s, idle = 0;
    r->zb_bubble_rate = 0;
    for (int q = 0; q < s->ranks; q++) {
        rank_stats(g, q, win);
        sim_rank_stats *st = &r->rank[q];
        idle += st->idle_s;
        if (st->peak_bytes > r->peak_bytes) r->peak_bytes = st->peak_bytes;
        if (g->cfg->capacity_bytes > 0 && st->peak_bytes > g->cfg->capacity_bytes) st->oom = r->oom = 1;
    }
    r->idle_s = idle;
    /* idle over the ranks' window: 1 - busy / (ranks x window) where no rank's busy passes the
     * window, and never counting a rank's busy past it as the others' idle */
    r->bubble_fraction = win > 0 ? idle / (win * s->ranks) : 0;
    int mbs = g->cfg->microbatch_size > 0 ? g->cfg->microbatch_size : 1;
    r->throughput = r->iteration_time_s > 0 ? (double)s->microbatches * mbs / r->iteration_time_s : 0;
}

/* Sums of a figure and of its squares over the repetitions. */
typedef struct sums {
    double x, x2;
} sums;

/* Adds x to the sums. */
static void sums_add(sums *s, double x) {
    s->x += x;
    s->x2 += x * x;
}

/* Returns the sample standard deviation of n values (0 for one). */
static double sums_sd(const sums *s, int n) {
    return n > 1 ? sqrt(fmax(0, (s->x2 - s->x * s->x / n) / (n - 1))) : 0;
}

/* One stochastic run's iteration time and seed offset, ordered by time, then offset. */
typedef struct median_key {
    double it;
    int k;
} median_key;

static int median_key_cmp(const void *a, const void *b) {
    const median_key *x = a, *y = b;
    if (x->it != y->it) return x->it < y->it ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

int sim_repeat(const sched *s, const sim_costs *c, const sim_config *cfg, int repeat, sim_repeat_stats *st,
               sim_result *median, pl_err *e) {
    memset(st, 0, sizeof *st);
    if (median) memset(median, 0, sizeof *median);
    if (repeat < 1) return pl_errf(e, PL_EINPUT, "--repeat must be at least 1");
    median_key *key = pl_calloc((size_t)repeat, sizeof *key);
    if (!key) return pl_errf(e, PL_ENOMEM, "out of memory");
    st->repeat = repeat;
    sums it_s = {0, 0}, thr = {0, 0}, bub = {0, 0};
    int rc = PL_OK;
    for (int k = 0; rc == PL_OK && k < repeat; k++) {
        sim_config cf = *cfg;
        cf.seed = cfg->seed + (uint64_t)k;
        cf.progress_base = cfg->progress_base + (uint64_t)k * sched_total_actions(s);
        if (repeat > 1) cf.record_trace = 0; /* the median run, run again, keeps it */
        sim_result r;
        rc = sim_run(s, c, &cf, &r, e);
        if (rc != PL_OK) break;
        double it = r.iteration_time_s;
        key[k].it = it;
        key[k].k = k;
        sums_add(&it_s, it);
        sums_add(&thr, r.throughput);
        sums_add(&bub, r.bubble_fraction);
        if (k == 0 || it < st->iter_min_s) st->iter_min_s = it;
        if (k == 0 || it > st->iter_max_s) st->iter_max_s = it;
        if (repeat == 1) st->median_seed = (int64_t)cf.seed;
        if (repeat == 1 && median) *median = r;
        else sim_result_free(&r);
    }
    if (rc == PL_OK && repeat > 1) {
        qsort(key, (size_t)repeat, sizeof *key, median_key_cmp);
        sim_config cf = *cfg;
        cf.seed = cfg->seed + (uint64_t)key[(repeat - 1) / 2].k; /* the lower middle: a run that happened */
        st->median_seed = (int64_t)cf.seed;
        cf.progress_base = cfg->progress_base + (uint64_t)repeat * sched_total_actions(s);
        if (median) rc = sim_run(s, c, &cf, median, e);
    }
    free(key);
    if (rc != PL_OK) return rc;
    double n = repeat;
    st->iter_mean_s = it_s.x / n;
    st->thr_mean = thr.x / n;
    st->bubble_fraction_mean = bub.x / n;
    st->iter_sd_s = sums_sd(&it_s, repeat);
    st->thr_sd = sums_sd(&thr, repeat);
    st->bubble_fraction_sd = sums_sd(&bub, repeat);
    return PL_OK;
}

int sim_run_median(const sched *s, const sim_costs *c, const sim_config *cfg, int runs, sim_result *r, pl_err *e) {
    sim_repeat_stats st;
    if (runs < 1) {
        memset(r, 0, sizeof *r);
        return pl_errf(e, PL_EINPUT, "the median run needs at least one run (got %d)", runs);
    }
    return sim_repeat(s, c, cfg, runs, &st, r, e);
}
