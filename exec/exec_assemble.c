/* exec_assemble.c: the records of the ranks (times on one clock) assembled into an exec_result:
 * pass statistics and the median pass, per-rank figures, losses, weights, the profile between
 * the passes; and the one median rule. */
#include "exec_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void exec_result_free(exec_result *r) {
    if (!r) return;
    free(r->stage_blocks);
    free(r->stage_replicas);
    free(r->pass_s);
    free(r->loss);
    free(r->final_weights);
    if (r->rank)
        for (int q = 0; q < r->ranks; q++) free(r->rank[q].ops);
    free(r->rank);
    free(r->between_profile);
    memset(r, 0, sizeof *r);
}

void exec_rank_record_arrays(exec_rank_record *r) {
    double **arrays[EXEC_REC_ARRAYS] = {&r->pass_start_s, &r->pass_end_s, &r->busy_s, &r->comm_s,
                                        &r->gemm_s, &r->gemm_flops, &r->ready_s, &r->span_s};
    for (int k = 1; k < EXEC_REC_ARRAYS; k++) *arrays[k] = r->pass_start_s + (size_t)k * r->passes;
}

void exec_rank_record_free(exec_rank_record *r) {
    if (!r) return;
    free(r->pass_start_s);
    free(r->ops);
    free(r->loss_mb);
    free(r->weights);
    free(r->round_f);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- the median */

/* A value and its position, sorted by value then position (a stable sort's order). */
typedef struct ranked {
    double v;
    size_t at;
} ranked;

/* Orders ranked values ascending, ties by position, for qsort. */
static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    int c = (x->v > y->v) - (x->v < y->v);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* Fills mid with the positions of v[n]'s middle values in the stable ascending order (the same
 * one twice for an odd n; 0 and 0 for n = 0) without touching v. Returns PL_OK or PL_ENOMEM. */
static int median_positions(const double *v, size_t n, size_t mid[2]) {
    mid[0] = mid[1] = 0;
    if (n == 0) return PL_OK;
    ranked *ord = pl_calloc(n, sizeof *ord);
    if (!ord) return PL_ENOMEM;
    for (size_t t = 0; t < n; t++) ord[t] = (ranked){v[t], t};
    qsort(ord, n, sizeof *ord, cmp_ranked);
    mid[0] = ord[(n - 1) / 2].at;
    mid[1] = ord[n / 2].at;
    free(ord);
    return PL_OK;
}

int exec_median_passes(const double *pass_s, int n, int mid[2]) {
    size_t m[2];
    int rc = median_positions(pass_s, n > 0 ? (size_t)n : 0, m);
    mid[0] = (int)m[0];
    mid[1] = (int)m[1];
    return rc;
}

/* Returns the median of the values at positions a and b (the same for an odd count). */
static double median_of(const double *v, size_t a, size_t b) { return a == b ? v[a] : 0.5 * (v[a] + v[b]); }

double exec_median_at(const double *v, const int mid[2]) { return median_of(v, (size_t)mid[0], (size_t)mid[1]); }

double exec_median(const double *v, size_t n) {
    size_t m[2];
    if (n == 0 || median_positions(v, n, m) != PL_OK) return NAN;
    return median_of(v, m[0], m[1]);
}

double exec_mean_less_stalls(const double *v, size_t n) {
    double med = exec_median(v, n), sum = 0;
    size_t k = 0;
    for (size_t i = 0; !isnan(med) && i < n; i++)
        if (v[i] <= med + EXEC_GAP_MAX_S) {
            sum += v[i];
            k++;
        }
    return k ? sum / (double)k : NAN;
}

double exec_stddev(const double *v, int n) {
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n; i++) {
        sum += v[i];
        sum2 += v[i] * v[i];
    }
    double mean = n > 0 ? sum / n : 0, var = n > 0 ? sum2 / n - mean * mean : 0;
    return var > 0 ? sqrt(var) : 0;
}

/* Returns the steadiness of n passes whose standard deviation is sd and median med
 * (exec_steadiness); NAN when the median is not positive. */
static double steadiness_of(double sd, int n, double med) { return med > 0 ? sd / sqrt(n) / med : NAN; }

double exec_steadiness(const double *pass_s, int n) {
    return n > 0 ? steadiness_of(exec_stddev(pass_s, n), n, exec_median(pass_s, (size_t)n)) : NAN;
}

double exec_pass_span(int n, const double *const *start, const double *const *end, int q) {
    double st = start[0][q], en = end[0][q];
    for (int r = 1; r < n; r++) {
        if (start[r][q] < st) st = start[r][q];
        if (end[r][q] > en) en = end[r][q];
    }
    return en - st;
}

int exec_passes_most(const exec_config *c) {
    return c->warmup_passes + (c->timed_passes_max > c->timed_passes ? c->timed_passes_max : c->timed_passes);
}

/* ---------------------------------------------------------------- assembly, step by step */

/* Checks that recs[r] is rank r's record of all passes (of the n executor ranks). Returns PL_OK
 * or PL_EINPUT. */
static int check_records(int n, const exec_config *c, const exec_rank_record *recs, pl_err *e) {
    int P = c->warmup_passes + c->timed_passes;
    for (int r = 0; r < n; r++)
        if (recs[r].passes != P || recs[r].rank != r)
            return pl_errf(e, PL_EINPUT, "record %d is of rank %d with %d passes; expected rank %d with %d", r,
                           recs[r].rank, recs[r].passes, r, P);
    return PL_OK;
}

/* Sets *run to c with the timed passes the records hold: c's own, or, for a run timed until
 * steady (exec_config.timed_passes_max), from timed_passes to timed_passes_max as the workers
 * walked them. Returns PL_OK or PL_EINPUT when rank 0's record holds a count outside them. */
static int passes_walked(const exec_config *c, const exec_rank_record *recs, exec_config *run, pl_err *e) {
    *run = *c;
    if (c->timed_passes_max <= c->timed_passes) return PL_OK;
    int T = recs[0].passes - c->warmup_passes;
    if (T < c->timed_passes || T > c->timed_passes_max)
        return pl_errf(e, PL_EINPUT, "record 0 holds %d timed passes; expected %d to %d", T, c->timed_passes,
                       c->timed_passes_max);
    run->timed_passes = T;
    return PL_OK;
}

/* Fills out's configuration echo and allocates its arrays. Returns PL_OK or the error. */
static int echo_config(const sched *s, const exec_config *c, const exec_dims *d, exec_result *out, pl_err *e) {
    int it = sched_iterations(s), T = c->timed_passes;
    memcpy(out->kind, s->kind, sizeof out->kind);
    out->ranks = s->ranks;
    out->stages = s->stages;
    out->microbatches = s->microbatches;
    out->iterations_per_pass = it;
    out->weights = s->weights;
    out->recompute = s->recompute;
    out->hidden = d->h;
    out->ffn = d->f;
    out->layers = c->layers;
    out->microbatch_size = c->microbatch_size;
    out->block = c->block;
    out->heads = d->heads;
    out->seq = d->block == EXEC_BLOCK_GPT ? d->seq : 0;
    out->lr = c->lr;
    out->momentum = c->momentum;
    out->warmup_passes = c->warmup_passes;
    out->huge_pages = !c->small_pages && c->backend == EXEC_BACKEND_CPU; /* the CUDA backend computes in device memory */
    out->timed_passes = T;
    out->blas = exec_blas_init();
    out->cores = 0; /* the driver fills in what it knows (exec_run: the cores of this process) */
    out->param_bytes = exec_param_count(c) * sizeof(float);
    out->stage_blocks = pl_calloc((size_t)s->stages, sizeof(int));
    out->stage_replicas = pl_calloc((size_t)s->stages, sizeof(int));
    for (int q = 0; out->stage_replicas && q < s->stages; q++) out->stage_replicas[q] = c->replicas ? c->replicas[q] : 1;
    out->pass_s = pl_calloc((size_t)T, sizeof(double));
    out->n_iters = (c->warmup_passes + T) * it;
    out->loss = pl_calloc((size_t)out->n_iters, sizeof(double));
    out->rank = pl_calloc((size_t)s->ranks, sizeof *out->rank);
    if (!out->stage_blocks || !out->stage_replicas || !out->pass_s || !out->loss || !out->rank)
        return pl_errf(e, PL_ENOMEM, "out of memory assembling results");
    return exec_stage_blocks(s, c, out->stage_blocks, e);
}

/* Fills out->pass_s: each timed pass from its first start to its last end over all ranks (one
 * clock). Returns the start of the first timed pass, the origin of the op records' times. */
static int pass_times(int n, const exec_config *c, const exec_rank_record *recs, exec_result *out, double *base,
                      pl_err *e) {
    int W = c->warmup_passes;
    const double **start = pl_calloc(2 * (size_t)n, sizeof *start), **end = start + n;
    if (!start) return pl_errf(e, PL_ENOMEM, "out of memory assembling results");
    *base = recs[0].pass_start_s[W];
    for (int r = 0; r < n; r++) {
        start[r] = recs[r].pass_start_s;
        end[r] = recs[r].pass_end_s;
        if (start[r][W] < *base) *base = start[r][W];
    }
    for (int t = 0; t < c->timed_passes; t++) out->pass_s[t] = exec_pass_span(n, start, end, W + t);
    free(start);
    return PL_OK;
}

/* Fills the statistics of out->pass_s: min, max, standard deviation, the median passes and the
 * median, the iteration time and the throughput. Returns PL_OK or PL_ENOMEM. */
static int pass_stats(const sched *s, exec_result *out, pl_err *e) {
    int T = out->timed_passes, it = out->iterations_per_pass;
    out->pass_min_s = out->pass_max_s = out->pass_s[0];
    for (int t = 0; t < T; t++) {
        double v = out->pass_s[t];
        if (v < out->pass_min_s) out->pass_min_s = v;
        if (v > out->pass_max_s) out->pass_max_s = v;
    }
    out->pass_stddev_s = exec_stddev(out->pass_s, T);
    /* one sort of the pass times gives the median passes, and the median is theirs */
    if (exec_median_passes(out->pass_s, T, out->median_pass) != PL_OK)
        return pl_errf(e, PL_ENOMEM, "out of memory assembling results");
    out->pass_median_s = exec_median_at(out->pass_s, out->median_pass);
    out->iter_median_s = out->pass_median_s / it;
    out->steadiness = steadiness_of(out->pass_stddev_s, T, out->pass_median_s);
    out->throughput_samples_s =
        out->pass_median_s > 0 ? (double)s->microbatches * out->microbatch_size * it / out->pass_median_s : 0;
    return PL_OK;
}

/* Fills rank rr's times from its record rec over the median pass(es) (the middle one, or the
 * middle two averaged), as the iteration time is: busy + idle is then the pass time, and one
 * slow pass cannot inflate the idle time and bubble of an otherwise typical run. Raises
 * out->zb_bubble_rate to the rank's Zero Bubble rate (the worst rank's idle share of its span). */
static void rank_times(const exec_rank_record *rec, int W, exec_result *out, exec_rank_result *rr) {
    const int *mid = out->median_pass;
    int nmid = out->timed_passes % 2 ? 1 : 2;
    double busy = 0, comm = 0, tot = 0, gs = 0, gf = 0, span = 0;
    for (int k = 0; k < nmid; k++) {
        int t = mid[k];
        busy += rec->busy_s[W + t];
        span += rec->span_s ? rec->span_s[W + t] : 0;
        comm += rec->comm_s[W + t];
        gs += rec->gemm_s[W + t];
        gf += rec->gemm_flops[W + t];
        tot += out->pass_s[t];
    }
    rr->busy_s = busy / nmid;
    rr->comm_s = comm / nmid;
    rr->gemm_s = gs / nmid;
    rr->gemm_flops = gf / nmid;
    rr->idle_s = (tot - busy) / nmid;
    rr->bubble_fraction = tot > 0 ? (tot - busy) / tot : 0;
    if (span > 0) {
        double rate = (span - busy) / span;
        if (rate < 0) rate = 0;
        if (isnan(out->zb_bubble_rate) || rate > out->zb_bubble_rate) out->zb_bubble_rate = rate;
    }
}

/* Copies rank rr's memory, core and op records (times from base on) from its record rec.
 * Returns PL_OK or PL_ENOMEM. */
static int rank_copy(const exec_rank_record *rec, double base, exec_rank_result *rr, pl_err *e) {
    rr->peak = rec->peak;
    rr->allocated_bytes = rec->allocated_bytes;
    rr->model_peak_bytes = rec->model_peak_bytes;
    rr->core = rec->core;
    if (!rec->n_ops) return PL_OK;
    rr->ops = pl_calloc(rec->n_ops, sizeof *rr->ops);
    if (!rr->ops) return pl_errf(e, PL_ENOMEM, "out of memory copying the op records");
    rr->n_ops = rec->n_ops;
    for (size_t k = 0; k < rr->n_ops; k++) {
        rr->ops[k] = rec->ops[k];
        rr->ops[k].start_s -= base;
        rr->ops[k].end_s -= base;
    }
    return PL_OK;
}

void exec_iteration_losses(const double *loss_mb, int n_iters, int m, double *loss) {
    for (int i = 0; i < n_iters; i++) {
        double l = 0;
        for (int j = 0; j < m; j++) l += loss_mb[(size_t)i * m + j];
        loss[i] = l / m;
    }
}

int exec_record_weights(const exec_config *c, int stages) {
    if (c->return_weights) return 1; /* final_weights */
    for (int q = 0; c->replicas && q < stages; q++)
        if (c->replicas[q] > 1) return 1; /* replicas_agree */
    return 0;
}

/* Fills out->final_weights with every block's weights, each from the rank of its stage (its
 * first replica). Returns PL_OK or PL_ENOMEM. */
static int final_weights(const sched *s, const exec_layout *L, const exec_dims *d, const exec_rank_record *recs,
                         exec_result *out, pl_err *e) {
    out->final_weights = pl_calloc(out->n_weights, sizeof(float));
    if (!out->final_weights) return pl_errf(e, PL_ENOMEM, "out of memory copying weights");
    size_t nf = exec_block_floats(d);
    for (int q = 0, b0 = 0; q < s->stages; b0 += out->stage_blocks[q], q++) {
        const float *src = recs[exec_layout_rank(L, s, q, 0)].weights + (size_t)b0 * nf;
        memcpy(out->final_weights + (size_t)b0 * nf, src, (size_t)out->stage_blocks[q] * nf * sizeof(float));
    }
    return PL_OK;
}

/* Checks that the replicas of every stage end with the same weights, bit for bit (they apply
 * the same exact all-reduced updates). Returns PL_OK or PL_EINTERNAL naming the stage. */
static int replicas_agree(const sched *s, const exec_layout *L, const exec_dims *d, const exec_result *out,
                          const exec_rank_record *recs, pl_err *e) {
    size_t nf = exec_block_floats(d);
    for (int q = 0, b0 = 0; q < s->stages; b0 += out->stage_blocks[q], q++)
        for (int j = 1; j < L->reps[q]; j++) {
            const float *a = recs[exec_layout_rank(L, s, q, 0)].weights + (size_t)b0 * nf;
            const float *b = recs[exec_layout_rank(L, s, q, j)].weights + (size_t)b0 * nf;
            if (memcmp(a, b, (size_t)out->stage_blocks[q] * nf * sizeof(float)) != 0)
                return pl_errf(e, PL_EINTERNAL, "the replicas of stage %d ended with different weights (replica 0 and %d)", q, j);
        }
    return PL_OK;
}

/* Fills out->loss from the microbatch losses of the last stage's replicas (each holds those of
 * its own microbatches). Returns PL_OK or PL_ENOMEM. */
static int losses(const sched *s, const exec_layout *L, const exec_rank_record *recs, exec_result *out, pl_err *e) {
    int q = s->stages - 1, n = L->reps[q];
    int64_t M = sched_total_microbatches(s), N = (int64_t)out->n_iters * s->microbatches;
    double *lm = pl_calloc((size_t)(N ? N : 1), sizeof *lm);
    if (!lm) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int64_t i = 0; i < N; i++) lm[i] = recs[exec_layout_rank(L, s, q, (i % M) % n)].loss_mb[i];
    exec_iteration_losses(lm, out->n_iters, s->microbatches, out->loss);
    free(lm);
    return PL_OK;
}

/* Returns the ranks' drift over the w workers' records (exec_drift_of on their rounds' F), 0
 * where a record has no rounds; -1 out of memory. */
static double records_drift(const exec_rank_record *recs, int w) {
    const double **means = pl_calloc((size_t)w, sizeof *means);
    size_t *n = pl_calloc((size_t)w, sizeof *n), most = 0;
    for (int r = 0; means && n && r < w; r++) {
        means[r] = recs[r].round_f;
        n[r] = recs[r].round_f ? recs[r].n_round_f : 0;
        if (n[r] > most) most = n[r];
    }
    double *scratch = pl_calloc(2 * most + 1, sizeof *scratch);
    double drift = means && n && scratch ? exec_drift_of(means, n, w, scratch) : -1;
    free(means);
    free(n);
    free(scratch);
    return drift;
}

/* Fills out->between_profile when every rank profiled between its passes: each worker's own
 * ([1 + r]), and over all of them the median of theirs and the ranks' drift over their rounds
 * ([0]; the in-process executor replaces it by the median over all their rounds, and the same
 * drift). Returns PL_OK or PL_ENOMEM. */
static int between_profile(const exec_config *c, const exec_dims *d, const exec_layout *L, const exec_rank_record *recs,
                           exec_result *out, pl_err *e) {
    int p = out->ranks, profiled = p > 0, w = L->ranks;
    for (int r = 0; r < w; r++) profiled = profiled && recs[r].has_prof;
    if (!profiled) return PL_OK;
    out->between_profile = pl_calloc((size_t)p + 1, sizeof *out->between_profile);
    double *v = pl_calloc((size_t)w, sizeof *v);
    if (!out->between_profile || !v) {
        free(v);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    out->between_reps = c->profile_between_reps;
    for (int k = 0; k < EXEC_PROF_KINDS; k++) {
        for (int r = 0; r < w; r++) v[r] = recs[r].prof_s[k];
        *exec_prof_kind(&out->between_profile[0], k) = exec_median(v, (size_t)w);
    }
    free(v);
    out->between_profile[0].drift = records_drift(recs, w);
    if (out->between_profile[0].drift < 0) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int r = 0; r <= p; r++) {
        exec_layer_profile *lp = &out->between_profile[r];
        for (int k = 0; r > 0 && k < EXEC_PROF_KINDS; k++) *exec_prof_kind(lp, k) = recs[L->base[r - 1]].prof_s[k];
        if (r > 0) { /* the worker's pass-length factors and the states term's rounds */
            const exec_rank_record *rec = &recs[L->base[r - 1]];
            memcpy(lp->window, rec->window, sizeof lp->window);
            lp->n_round_f = rec->round_f ? (int)(rec->n_round_f < EXEC_STATE_ROUNDS ? rec->n_round_f : EXEC_STATE_ROUNDS) : 0;
            if (lp->n_round_f) memcpy(lp->round_f, rec->round_f, (size_t)lp->n_round_f * sizeof *lp->round_f);
            if (lp->n_round_f) memcpy(lp->round_b, rec->round_f + rec->n_round_f, (size_t)lp->n_round_f * sizeof *lp->round_b);
        }
        lp->concurrency = w;
        exec_profile_sizes(d, lp);
    }
    return PL_OK;
}

/* Returns worker r's start_after_ready_s (exec_rank_result) from the n workers' records. */
static double start_after_ready(int n, int r, const exec_config *c, const exec_rank_record *recs) {
    double least = NAN;
    for (int t = 0; t < c->timed_passes; t++) {
        int q = c->warmup_passes + t;
        double ready = 0;
        for (int k = 0; k < n; k++) ready = fmax(ready, recs[k].ready_s[q]);
        double lead = recs[r].pass_start_s[q] - ready;
        if (ready > 0 && !(lead >= least)) least = lead;
    }
    return least;
}

/* Fills out->rank from the n executor ranks' records: each one's figures over the median
 * pass(es), folded per schedule rank over its replicas (exec_fold_replicas). PL_OK or PL_ENOMEM. */
static int ranks_of(const sched *s, const exec_layout *L, const exec_config *c, const exec_rank_record *recs, double base,
                    exec_result *out, pl_err *e) {
    exec_rank_result *each = pl_calloc((size_t)L->ranks, sizeof *each);
    int rc = each ? PL_OK : pl_errf(e, PL_ENOMEM, "out of memory assembling results");
    for (int r = 0; r < L->ranks && rc == PL_OK; r++) {
        rank_times(&recs[r], c->warmup_passes, out, &each[r]);
        each[r].start_after_ready_s = start_after_ready(L->ranks, r, c, recs);
        rc = rank_copy(&recs[r], base, &each[r], e);
    }
    for (int r = 0; r < s->ranks && rc == PL_OK; r++) rc = exec_fold_replicas(L, s, r, each + L->base[r], &out->rank[r], e);
    for (int r = 0; each && r < L->ranks; r++) free(each[r].ops);
    free(each);
    return rc;
}

int exec_assemble(const sched *s, const exec_config *cfg, const exec_rank_record *recs, exec_result *out,
                  pl_err *e) {
    memset(out, 0, sizeof *out);
    exec_layout L;
    exec_config run = *cfg;
    const exec_config *c = &run; /* cfg with the timed passes the workers walked */
    int rc = exec_layout_build(s, cfg->replicas, &L, e);
    if (rc == PL_OK) rc = passes_walked(cfg, recs, &run, e);
    if (rc == PL_OK) rc = check_records(L.ranks, c, recs, e);
    exec_dims d;
    exec_dims_of(c, &d);
    if (rc == PL_OK) rc = echo_config(s, c, &d, out, e);
    out->timed_passes_least = cfg->timed_passes;
    out->timed_passes_most = cfg->timed_passes_max > cfg->timed_passes ? cfg->timed_passes_max : 0;
    out->steady_max = out->timed_passes_most ? cfg->steady_max : 0;
    out->workers = L.ranks;
    double base = 0;
    if (rc == PL_OK) rc = pass_times(L.ranks, c, recs, out, &base, e);
    if (rc == PL_OK) rc = pass_stats(s, out, e);
    out->zb_bubble_rate = NAN;
    if (rc == PL_OK) rc = ranks_of(s, &L, c, recs, base, out, e);
    if (rc == PL_OK) rc = losses(s, &L, recs, out, e); /* from the rank(s) of the last stage */
    out->n_weights = exec_param_count(c);
    if (rc == PL_OK) rc = replicas_agree(s, &L, &d, out, recs, e);
    if (rc == PL_OK && c->return_weights) rc = final_weights(s, &L, &d, recs, out, e);
    if (rc == PL_OK) rc = between_profile(c, &d, &L, recs, out, e);
    exec_layout_free(&L);
    if (rc) exec_result_free(out);
    return rc;
}
