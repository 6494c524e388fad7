/* store_compare.c: pairs measured runs with the simulated runs that predict them (pipelab compare). */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

/* Deepest nesting of a JSON value skip_value follows, so that a hostile file cannot exhaust the
 * stack. */
#define JSON_MAX_DEPTH 64

const char *const store_match_params[] = {
    "model.spec", "hardware.name", "microbatch_size", "precision", "partition.bounds", "partition.replicas", NULL,
};

/* Returns p past JSON whitespace. */
static const char *ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Returns the end of the JSON string starting at p (on its opening quote), or NULL. */
static const char *skip_string(const char *p) {
    for (p++; *p; p++) {
        if (*p == '\\') {
            if (!p[1]) return NULL;
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* Returns the end of the JSON value starting at p, or NULL when it is malformed or nested
 * deeper than JSON_MAX_DEPTH. */
static const char *skip_value(const char *p, int depth) {
    p = ws(p);
    if (depth > JSON_MAX_DEPTH) return NULL;
    if (*p == '"') return skip_string(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (*p != '"' || !(p = skip_string(p))) return NULL;
                p = ws(p);
                if (*p != ':') return NULL;
                p++;
            }
            if (!(p = skip_value(p, depth + 1))) return NULL;
            p = ws(p);
            if (*p == ',') {
                p = ws(p + 1);
                continue;
            }
            return *p == close ? p + 1 : NULL;
        }
    }
    const char *q = p;
    while (*q && !strchr(",}] \t\r\n", *q)) q++;
    return q > p ? q : NULL;
}

/* Finds the value at a dotted path of a JSON object; returns 1 with *val, *len pointing into
 * json, or 0 when it is absent or json is malformed. */
int store_json_get(const char *json, const char *path, const char **val, size_t *len) {
    if (!json || !path) return 0;
    const char *p = ws(json);
    while (*path) {
        const char *dot = strchr(path, '.');
        size_t klen = dot ? (size_t)(dot - path) : strlen(path);
        if (*p != '{') return 0;
        p = ws(p + 1);
        int found = 0;
        while (*p == '"') {
            const char *kend = skip_string(p);
            if (!kend) return 0;
            int match = (size_t)(kend - p - 2) == klen && strncmp(p + 1, path, klen) == 0;
            p = ws(kend);
            if (*p != ':') return 0;
            p = ws(p + 1);
            if (match) {
                found = 1;
                break;
            }
            if (!(p = skip_value(p, 0))) return 0;
            p = ws(p);
            if (*p == ',') p = ws(p + 1);
        }
        if (!found) return 0;
        path += klen + (dot ? 1 : 0);
    }
    const char *end = skip_value(p, 0);
    if (!end) return 0;
    *val = p;
    *len = (size_t)(end - p);
    return 1;
}

/* Returns 1 when two JSON value texts are equal ignoring whitespace outside strings. */
static int json_text_equal(const char *a, size_t na, const char *b, size_t nb) {
    size_t i = 0, j = 0;
    int in_a = 0, in_b = 0;
    for (;;) {
        while (i < na && !in_a && strchr(" \t\r\n", a[i])) i++;
        while (j < nb && !in_b && strchr(" \t\r\n", b[j])) j++;
        if (i == na || j == nb) return i == na && j == nb;
        if (a[i] != b[j]) return 0;
        if (a[i] == '"' && (i == 0 || a[i - 1] != '\\')) in_a = !in_a;
        if (b[j] == '"' && (j == 0 || b[j - 1] != '\\')) in_b = !in_b;
        i++;
        j++;
    }
}

/* Returns 1 when both strings are equal, NULL counting as "". */
static int str_eq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

/* Returns 1 when a and b share the run columns and, unless loose, store_match_params. */
int store_same_config(const store_run *a, const store_run *b, int loose) {
    if (!str_eq(a->schedule, b->schedule) || a->ranks != b->ranks || a->stages != b->stages ||
        a->microbatches != b->microbatches || a->chunks != b->chunks || a->iterations != b->iterations ||
        !str_eq(a->weights_policy, b->weights_policy) || !str_eq(a->recompute_policy, b->recompute_policy))
        return 0;
    if (loose) return 1;
    for (const char *const *k = store_match_params; *k; k++) {
        const char *va, *vb;
        size_t la, lb;
        if (store_json_get(a->params_json, *k, &va, &la) && store_json_get(b->params_json, *k, &vb, &lb) &&
            !json_text_equal(va, la, vb, lb))
            return 0;
    }
    return 1;
}

/* Returns 1 when run r passes the filter for its kind. */
static int selected(const store_filter *f, const store_run *r) {
    const char *tag = f->tag;
    if (strcmp(r->kind, "simulated") == 0 && f->sim_tag) tag = f->sim_tag;
    if (strcmp(r->kind, "measured") == 0 && f->measured_tag) tag = f->measured_tag;
    if (tag && !str_eq(tag, r->tag)) return 0;
    if (f->schedule && !str_eq(f->schedule, r->schedule)) return 0;
    if (f->ranks && f->ranks != r->ranks) return 0;
    if (f->stages && f->stages != r->stages) return 0;
    if (f->microbatches && f->microbatches != r->microbatches) return 0;
    if (f->chunks && f->chunks != r->chunks) return 0;
    return 1;
}

/* Reads the runs f (and kind) select, oldest first; returns PL_OK and *runs, or the error. */
int store_select_runs(store *s, const store_filter *f, const char *kind, store_run **runs, size_t *n, pl_err *e) {
    store_filter none;
    memset(&none, 0, sizeof none);
    if (!f) f = &none;
    /* One tag for every kind can be pushed into the query; per-kind tags filter afterwards. */
    const char *tag = f->sim_tag || f->measured_tag ? NULL : f->tag;
    store_run *all = NULL;
    size_t nall = 0;
    int code = store_list_runs(s, tag, 0, &all, &nall, e);
    if (code != PL_OK) return code;
    size_t k = 0;
    for (size_t i = 0; i < nall; i++) {
        if (selected(f, &all[i]) && (!kind || strcmp(all[i].kind, kind) == 0)) all[k++] = all[i];
        else store_run_clear(&all[i]);
    }
    /* store_list_runs gives newest first: reverse into oldest first. */
    for (size_t i = 0; i < k / 2; i++) {
        store_run t = all[i];
        all[i] = all[k - 1 - i];
        all[k - 1 - i] = t;
    }
    *runs = all;
    *n = k;
    return PL_OK;
}

/* Returns (pred - meas) / meas, or NAN when meas is 0 or either is not finite. */
static double rel_err(double pred, double meas) {
    if (meas == 0 || !isfinite(pred) || !isfinite(meas)) return NAN;
    return (pred - meas) / meas;
}

/* Adds one error to a running summary (mape holds the sum of |err| until finish). */
static void stat_add(store_err_stats *st, double err) {
    if (isnan(err)) return;
    st->mape += fabs(err);
    if (st->n == 0 || fabs(err) > fabs(st->max_err)) st->max_err = err;
    st->n++;
}

/* Turns the sum of |err| into the mean. */
static void stat_finish(store_err_stats *st) {
    st->mape = st->n ? st->mape / st->n : NAN;
    if (!st->n) st->max_err = NAN;
}

/* Returns 1 when sim's uid names it a prediction made for measured run uid muid: its own (alt 0:
 * STORE_PREDICTION_PREFIX and muid), or another (alt 1: STORE_PREDICTION_PREFIX, a tag,
 * STORE_PREDICTION_ALT_SEP and muid). */
static int made_for(const store_run *sim, const char *muid, int alt) {
    size_t pl = strlen(STORE_PREDICTION_PREFIX), ml = strlen(muid), ul = sim->uid ? strlen(sim->uid) : 0;
    if (!sim->uid || strncmp(sim->uid, STORE_PREDICTION_PREFIX, pl) != 0) return 0;
    if (!alt) return strcmp(sim->uid + pl, muid) == 0;
    return ul > pl + ml && sim->uid[ul - ml - 1] == STORE_PREDICTION_ALT_SEP && strcmp(sim->uid + ul - ml, muid) == 0;
}

/* Returns the simulated run of sims[nsim] (oldest first) that predicts measured run m: its own
 * prediction (STORE_PREDICTION_PREFIX) when it is of m's configuration, else another prediction
 * made for it (STORE_PREDICTION_ALT_SEP; the filter's tags choose which), else the newest run of
 * that configuration, else NULL. When m has predictions of its own (own: its
 * STORE_PREDICTION_PREFIX run is in the database, under any tag), that last choice leaves out
 * the predictions made for other measured runs: each comes from its run's own profile, taken on
 * the host as it was then, and `pipelab run` stores some of them only where the profile measured
 * their term; paired with m, it would read the host's change between the two runs as its error. */
static const store_run *prediction_of(const store_run *sims, size_t nsim, const store_run *m, int loose, int own) {
    for (int alt = 0; alt < 2; alt++)
        for (size_t j = 0; j < nsim && m->uid; j++)
            if (made_for(&sims[j], m->uid, alt) && store_same_config(&sims[j], m, loose)) return &sims[j];
    size_t pl = strlen(STORE_PREDICTION_PREFIX);
    for (size_t j = nsim; j-- > 0;) {
        int made = sims[j].uid && strncmp(sims[j].uid, STORE_PREDICTION_PREFIX, pl) == 0;
        if (!(own && made) && store_same_config(&sims[j], m, loose)) return &sims[j];
    }
    return NULL;
}

/* Fills the errors of pair p (its runs already copied in) and adds them to the summaries of c. */
static void pair_errors(store_pair *p, store_comparison *c) {
    const store_run *sim = &p->sim, *meas = &p->meas;
    p->err_iter = rel_err(sim->iteration_time_s, meas->iteration_time_s);
    p->err_thr = rel_err(sim->throughput_samples_s, meas->throughput_samples_s);
    /* a fraction: the difference, not a relative error (that of a small bubble explodes) */
    p->err_bubble_fraction = isnan(sim->bubble_fraction) || isnan(meas->bubble_fraction)
                                 ? NAN : sim->bubble_fraction - meas->bubble_fraction;
    p->err_mem = rel_err((double)sim->peak_mem_bytes, (double)meas->peak_mem_bytes);
    stat_add(&c->iter, p->err_iter);
    stat_add(&c->thr, p->err_thr);
    stat_add(&c->bubble_fraction, p->err_bubble_fraction);
    stat_add(&c->mem, p->err_mem);
}

/* Pairs every measured run of meas[nmeas] with its prediction among sims[nsim] into out (pairs
 * allocated for all of them); returns PL_OK or PL_ENOMEM. */
static int pair_runs(store *s, const store_run *sims, size_t nsim, const store_run *meas, size_t nmeas, int loose,
                     store_comparison *out, pl_err *e) {
    out->simulated = nsim;
    out->pairs = pl_calloc(nmeas ? nmeas : 1, sizeof *out->pairs);
    if (!out->pairs) return pl_errf(e, PL_ENOMEM, "out of memory pairing %zu runs", nmeas);
    for (size_t i = 0; i < nmeas; i++) {
        int own = 0;
        char uid[256]; /* a uid longer than that names no prediction `pipelab run` stored */
        int n = meas[i].uid ? snprintf(uid, sizeof uid, "%s%s", STORE_PREDICTION_PREFIX, meas[i].uid) : -1;
        if (n > 0 && (size_t)n < sizeof uid && (own = store_has_uid(s, uid, e)) < 0) return e->code;
        const store_run *best = prediction_of(sims, nsim, &meas[i], loose, own);
        if (!best) {
            out->unmatched_measured++;
            continue;
        }
        store_pair *p = &out->pairs[out->n++];
        if (store_run_copy(&p->sim, best) != PL_OK || store_run_copy(&p->meas, &meas[i]) != PL_OK)
            return pl_errf(e, PL_ENOMEM, "out of memory pairing %zu runs", nmeas);
        pair_errors(p, out);
    }
    stat_finish(&out->iter);
    stat_finish(&out->thr);
    stat_finish(&out->bubble_fraction);
    stat_finish(&out->mem);
    return PL_OK;
}

/* Pairs the measured runs f selects with their predictions into out; returns PL_OK or the
 * error (out freed). */
int store_compare(store *s, const store_filter *f, int loose, store_comparison *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    store_run *sims = NULL, *meas = NULL;
    size_t nsim = 0, nmeas = 0;
    int code = store_select_runs(s, f, "simulated", &sims, &nsim, e);
    if (code == PL_OK) code = store_select_runs(s, f, "measured", &meas, &nmeas, e);
    if (code == PL_OK) code = pair_runs(s, sims, nsim, meas, nmeas, loose, out, e);
    store_runs_free(sims, nsim);
    store_runs_free(meas, nmeas);
    if (code != PL_OK) store_comparison_free(out);
    return code;
}

/* Frees the pairs of c and zeroes it. */
void store_comparison_free(store_comparison *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        store_run_clear(&c->pairs[i].sim);
        store_run_clear(&c->pairs[i].meas);
    }
    free(c->pairs);
    memset(c, 0, sizeof *c);
}

/* Fills g's statistics from the defined iteration-time errors of its pairs (err[n]). */
static void group_stats(store_repeat_group *g, const double *err, int n) {
    g->n = n;
    g->mean = g->sd = g->min = g->max = g->t = NAN;
    g->biased = 0;
    if (n == 0) return;
    g->mean = gsl_stats_mean(err, 1, (size_t)n);
    if (n >= 2) g->sd = gsl_stats_sd_m(err, 1, (size_t)n, g->mean);
    gsl_stats_minmax(&g->min, &g->max, err, 1, (size_t)n);
}

/* Fills r's t_crit, each group's t and biased mark, the counts of biased groups and the standard
 * error of the signed mean of the groups' means (store_repeats), from r's groups and pooled
 * spread of dof degrees of freedom; scratch holds at least r->n doubles. */
static void bias_beyond_spread(store_repeats *r, double dof, double *scratch) {
    size_t m = 0;
    for (size_t g = 0; g < r->n; g++)
        if (r->groups[g].n >= 1) scratch[m++] = r->groups[g].mean;
    if (m >= 2) r->signed_mean_se = gsl_stats_sd(scratch, 1, m) / sqrt((double)m);
    if (!(dof > 0) || !(r->pooled_sd > 0)) return;
    r->t_crit = gsl_cdf_tdist_Qinv(STORE_REPEATS_ALPHA / 2, dof);
    for (size_t g = 0; g < r->n; g++) {
        store_repeat_group *G = &r->groups[g];
        if (G->n < 1) continue;
        G->t = G->mean / (r->pooled_sd / sqrt((double)G->n));
        G->biased = fabs(G->t) > r->t_crit;
        r->biased += G->biased;
        r->biased_short += G->biased && G->mean < 0;
    }
}

/* Fills r->kinds from r's groups: each schedule kind's lean (store_kind_lean); scratch holds at
 * least r->n doubles. PL_OK or PL_ENOMEM. */
static int kind_leans(const store_comparison *c, store_repeats *r, double *scratch, pl_err *e) {
    r->kinds = pl_calloc(r->n ? r->n : 1, sizeof *r->kinds);
    if (!r->kinds) return pl_errf(e, PL_ENOMEM, "out of memory grouping %zu configurations by kind", r->n);
    for (size_t g = 0; g < r->n; g++) {
        const char *kind = c->pairs[r->groups[g].first].meas.schedule;
        size_t k = 0;
        while (k < r->n_kinds && strcmp(c->pairs[r->kinds[k].first].meas.schedule, kind) != 0) k++;
        if (k < r->n_kinds) continue; /* counted with the kind's first group */
        store_kind_lean *K = &r->kinds[r->n_kinds++];
        K->first = r->groups[g].first;
        size_t m = 0;
        for (size_t h = g; h < r->n; h++)
            if (r->groups[h].n >= 1 && strcmp(c->pairs[r->groups[h].first].meas.schedule, kind) == 0)
                scratch[m++] = r->groups[h].mean;
        K->configs = (int)m;
        K->mean = m ? gsl_stats_mean(scratch, 1, m) : NAN;
        K->se = K->t = K->t_crit = NAN;
        if (m < 2) continue;
        K->se = gsl_stats_sd_m(scratch, 1, m, K->mean) / sqrt((double)m);
        K->t_crit = gsl_cdf_tdist_Qinv(STORE_REPEATS_ALPHA / 2, (double)(m - 1));
        if (!(K->se > 0)) continue;
        K->t = K->mean / K->se;
        K->beyond = fabs(K->t) > K->t_crit;
        r->kinds_beyond += K->beyond;
    }
    return PL_OK;
}

/* Sets *m and *p to pair q's ln measured and ln predicted iteration time; returns 1 when it has
 * both and an error (the pairs store_track reads), else 0. */
static int track_logs(const store_pair *q, double *m, double *p) {
    if (isnan(q->err_iter) || !(q->meas.iteration_time_s > 0) || !(q->sim.iteration_time_s > 0)) return 0;
    *m = log(q->meas.iteration_time_s);
    *p = log(q->sim.iteration_time_s);
    return 1;
}

/* Fills r's meas_sd, pred_sd and track_corr (store_repeats) from the groups with two such pairs
 * or more (track_logs), group_of[i] naming pair i's group: each pair's logs about their means
 * over its group, the squares and the products summed over the groups, over the degrees of
 * freedom sum (n - 1). */
static void store_track(const store_comparison *c, store_repeats *r, const size_t *group_of) {
    double ssm = 0, ssp = 0, smp = 0, dof = 0, m, p;
    for (size_t g = 0; g < r->n; g++) {
        double lm = 0, lp = 0;
        int n = 0;
        for (size_t i = r->groups[g].first; i < c->n; i++)
            if (group_of[i] == g && track_logs(&c->pairs[i], &m, &p)) lm += m, lp += p, n++;
        if (n < 2) continue; /* a group measured once has no spread */
        lm /= n;
        lp /= n;
        dof += n - 1;
        for (size_t i = r->groups[g].first; i < c->n; i++)
            if (group_of[i] == g && track_logs(&c->pairs[i], &m, &p)) {
                ssm += (m - lm) * (m - lm);
                ssp += (p - lp) * (p - lp);
                smp += (m - lm) * (p - lp);
            }
    }
    if (!(dof > 0)) return;
    r->meas_sd = sqrt(ssm / dof);
    r->pred_sd = sqrt(ssp / dof);
    if (ssm > 0 && ssp > 0) r->track_corr = smp / sqrt(ssm * ssp);
}

int store_compare_repeats(const store_comparison *c, int loose, store_repeats *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    out->pooled_sd = out->mape_of_means = out->signed_mean_of_means = out->largest_mean = out->largest_median = NAN;
    out->meas_sd = out->pred_sd = out->track_corr = NAN;
    out->t_crit = out->signed_mean_se = NAN;
    size_t *group_of = pl_calloc(c->n ? c->n : 1, sizeof *group_of);
    double *err = pl_calloc(c->n ? c->n : 1, sizeof *err);
    out->groups = pl_calloc(c->n ? c->n : 1, sizeof *out->groups);
    if (!group_of || !err || !out->groups) {
        free(group_of);
        free(err);
        store_repeats_free(out);
        return pl_errf(e, PL_ENOMEM, "out of memory grouping %zu pairs", c->n);
    }
    for (size_t i = 0; i < c->n; i++) {
        size_t g = 0;
        while (g < out->n && !store_same_config(&c->pairs[out->groups[g].first].meas, &c->pairs[i].meas, loose)) g++;
        if (g == out->n) out->groups[out->n++].first = i;
        group_of[i] = g;
    }
    double ss = 0, dof = 0, abs_sum = 0, sum = 0;
    size_t with_mean = 0;
    for (size_t g = 0; g < out->n; g++) {
        int n = 0;
        for (size_t i = out->groups[g].first; i < c->n; i++)
            if (group_of[i] == g && !isnan(c->pairs[i].err_iter)) err[n++] = c->pairs[i].err_iter;
        store_repeat_group *G = &out->groups[g];
        group_stats(G, err, n);
        if (n >= 2) {
            out->repeated++;
            ss += (n - 1) * G->sd * G->sd;
            dof += n - 1;
        }
        if (n >= 1) {
            with_mean++;
            abs_sum += fabs(G->mean);
            sum += G->mean;
            if (isnan(out->largest_mean) || fabs(G->mean) > fabs(out->largest_mean)) out->largest_mean = G->mean;
        }
    }
    if (with_mean) {
        out->mape_of_means = abs_sum / (double)with_mean;
        out->signed_mean_of_means = sum / (double)with_mean;
    }
    if (dof > 0) {
        out->pooled_sd = sqrt(ss / dof);
        /* P(max of N |X| <= x) = (2 Phi(x / sd) - 1)^N = 1/2 */
        if (with_mean)
            out->largest_median = out->pooled_sd * gsl_cdf_ugaussian_Pinv((1 + pow(0.5, 1.0 / (double)with_mean)) / 2);
    }
    out->dof = (int)dof;
    store_track(c, out, group_of);
    bias_beyond_spread(out, dof, err);
    int rc = kind_leans(c, out, err, e);
    free(group_of);
    free(err);
    if (rc != PL_OK) store_repeats_free(out);
    return rc;
}

void store_repeats_free(store_repeats *r) {
    if (!r) return;
    free(r->groups);
    free(r->kinds);
    memset(r, 0, sizeof *r);
}
