/* test_compare_plot.c: pipelab compare's pairing and errors; pipelab plot's figures and data. */
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_test.h"
#include "store.h"
#include "util.h"

/* Writes one run with `ranks` rank rows; returns its id (or -1). */
static int64_t put_run(store *s, const char *kind, const char *tag, const char *sched, int m, const char *params,
                       double iter_s, double thr, double bubble, int64_t mem) {
    store_run r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.tag = tag;
    r.schedule = sched;
    r.ranks = 4;
    r.stages = 4;
    r.microbatches = m;
    r.chunks = 1;
    r.iterations = 1;
    r.weights_policy = "flush";
    r.recompute_policy = "none";
    r.params_json = params;
    r.iteration_time_s = iter_s;
    r.throughput_samples_s = thr;
    r.bubble_fraction = bubble;
    r.peak_mem_bytes = mem;
    store_rank_metric rm[4];
    for (int q = 0; q < 4; q++) rm[q] = (store_rank_metric){q, 1, 0, 0, 0, mem - q * 1000};
    int64_t id = -1;
    pl_err e;
    pl_err_clear(&e);
    if (store_write_run(s, &r, rm, 4, NULL, 0, &id, &e) != PL_OK) fprintf(stderr, "write: %s\n", e.msg);
    return id;
}

static const char P_A[] = "{\"costs\":\"model\",\"model\":{\"spec\":\"mlp:width=64,depth=8\",\"layers\":8},"
                          "\"hardware\":{\"name\":\"cpu\"},\"microbatch_size\":4}";
static const char P_A_MEAS[] = "{\"model\": {\"spec\": \"mlp:width=64,depth=8\"}, \"threads\": 4, \"microbatch_size\": 4}";
static const char P_B_MEAS[] = "{\"model\":{\"spec\":\"mlp:width=128,depth=8\"},\"microbatch_size\":4}";

/* The hand-made database of the compare tests: returns its path (malloc'd) in dir. */
static char *make_compare_db(const char *dir) {
    char *path = pl_test_path(dir, "cmp.db");
    store *s = NULL;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_open(path, 0, &s, &e) == PL_OK);
    /* An older prediction of 1f1b m=8 that the newer one replaces. */
    put_run(s, "simulated", "acc", "1f1b", 8, P_A, 5.0, 1.0, 0.5, 1000000);
    put_run(s, "simulated", "acc", "1f1b", 8, P_A, 1.0, 8.0, 0.30, 1100000);
    put_run(s, "simulated", "acc", "gpipe", 8, P_A, 2.0, 4.0, 0.25, 2000000);
    put_run(s, "simulated", "other", "gpipe", 16, P_A, 3.0, 4.0, 0.25, 2000000);
    put_run(s, "measured", "acc", "1f1b", 8, P_A_MEAS, 1.1, 7.0, 0.25, 1000000);
    put_run(s, "measured", "acc", "gpipe", 8, P_A_MEAS, 1.6, 5.0, 0.0, 0);
    put_run(s, "measured", "acc", "zb-h1", 8, P_A_MEAS, 1.0, 8.0, 0.1, 1000000);  /* no prediction */
    put_run(s, "measured", "acc", "1f1b", 8, P_B_MEAS, 1.2, 7.0, 0.25, 1000000);  /* another model */
    store_close(s);
    return path;
}

static void test_json_get(void) {
    const char *v;
    size_t n;
    const char *j = "{\"a\": 1, \"b\": {\"c\": [1, {\"x\": \"}\"}], \"d\": \"q\\\"r\"}, \"e\": true}";
    CU_ASSERT(store_json_get(j, "a", &v, &n) && n == 1 && v[0] == '1');
    CU_ASSERT(store_json_get(j, "b.d", &v, &n) && n == 6 && strncmp(v, "\"q\\\"r\"", 6) == 0);
    CU_ASSERT(store_json_get(j, "b.c", &v, &n) && n == 15);
    CU_ASSERT(store_json_get(j, "e", &v, &n) && n == 4 && strncmp(v, "true", 4) == 0);
    CU_ASSERT(!store_json_get(j, "b.x", &v, &n));
    CU_ASSERT(!store_json_get(j, "a.b", &v, &n));
    CU_ASSERT(!store_json_get("{\"a\": [1, 2", "b", &v, &n));
    CU_ASSERT(!store_json_get("", "a", &v, &n));
}

/* Opens path read-only into *s and pairs its runs tagged tag (strict matching) into *c, f the
 * filter it used. */
static void open_compared(const char *path, const char *tag, store **s, store_filter *f, store_comparison *c, pl_err *e) {
    pl_err_clear(e);
    CU_ASSERT_FATAL(store_open(path, 1, s, e) == PL_OK);
    memset(f, 0, sizeof *f);
    f->tag = tag;
    CU_ASSERT_FATAL(store_compare(*s, f, 0, c, e) == PL_OK);
}

static void test_pairing_and_errors(void) {
    char *dir = pl_test_tmpdir();
    char *path = make_compare_db(dir);
    store *s = NULL;
    pl_err e;
    store_filter f;
    store_comparison c;
    open_compared(path, "acc", &s, &f, &c, &e);
    /* 1f1b and gpipe pair; zb-h1 has no prediction; the other model's 1f1b run does not match. */
    CU_ASSERT_EQUAL(c.n, 2);
    CU_ASSERT_EQUAL(c.unmatched_measured, 2);
    CU_ASSERT_EQUAL(c.simulated, 3);
    if (c.n == 2) {
        CU_ASSERT_STRING_EQUAL(c.pairs[0].meas.schedule, "1f1b");
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[0].sim.iteration_time_s, 1.0, 0); /* the newest prediction */
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[0].err_iter, (1.0 - 1.1) / 1.1, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[0].err_thr, (8.0 - 7.0) / 7.0, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[0].err_bubble_fraction, 0.30 - 0.25, 1e-12); /* a difference */
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[0].err_mem, 0.1, 1e-15);
        CU_ASSERT_STRING_EQUAL(c.pairs[1].meas.schedule, "gpipe");
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[1].err_iter, 0.25, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[1].err_bubble_fraction, c.pairs[1].sim.bubble_fraction, 1e-12); /* measured 0 */
        CU_ASSERT(isnan(c.pairs[1].err_mem));
    }
    double mape = (fabs((1.0 - 1.1) / 1.1) + 0.25) / 2;
    CU_ASSERT_DOUBLE_EQUAL(c.iter.mape, mape, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(c.iter.max_err, 0.25, 1e-15);
    CU_ASSERT_EQUAL(c.iter.n, 2);
    CU_ASSERT_EQUAL(c.bubble_fraction.n, 2); /* differences: defined for a measured 0 too */
    CU_ASSERT_DOUBLE_EQUAL(c.bubble_fraction.mape, (0.05 + 0.25) / 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(c.bubble_fraction.max_err, 0.25, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(c.thr.max_err, (4.0 - 5.0) / 5.0, 1e-15); /* |-0.2| > 1/7 */
    store_comparison_free(&c);
    /* Loose matching ignores the model: the width-128 run pairs too. */
    CU_ASSERT_FATAL(store_compare(s, &f, 1, &c, &e) == PL_OK);
    CU_ASSERT_EQUAL(c.n, 3);
    CU_ASSERT_EQUAL(c.unmatched_measured, 1);
    store_comparison_free(&c);
    /* Filters: only gpipe. */
    f.schedule = "gpipe";
    CU_ASSERT_FATAL(store_compare(s, &f, 0, &c, &e) == PL_OK);
    CU_ASSERT_EQUAL(c.n, 1);
    store_comparison_free(&c);
    store_close(s);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* Writes a 1f1b, 2-rank, 4-microbatch run of kind with uid (NULL: a fresh one) and tag "rep". */
static void put_rep(store *s, const char *kind, const char *uid, double iter_s) {
    store_run r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.uid = uid;
    r.tag = "rep";
    r.schedule = "1f1b";
    r.ranks = r.stages = 2;
    r.microbatches = 4;
    r.chunks = r.iterations = 1;
    r.params_json = P_A;
    r.iteration_time_s = iter_s;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_write_run(s, &r, NULL, 0, NULL, 0, NULL, &e) == PL_OK);
}

/* A measured run pairs with its own prediction (uid STORE_PREDICTION_PREFIX + its uid), not with a
 * newer one of the same configuration; a measured run without one pairs with the newest. Three
 * repetitions of one configuration, as `pipelab run` stores them, and one measured run alone.
 * Under a tag that holds a prediction for one of them only, the others that have predictions of
 * their own pair with nothing: another run's prediction is that run's alone. */
static void test_pairing_own_prediction(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "own.db");
    store *s = NULL;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_open(path, 0, &s, &e) == PL_OK);
    static const char *muid[3] = {"run-a", "run-b", "run-c"};
    const double meas_s[3] = {1.0, 2.0, 4.0}, pred_s[3] = {1.1, 1.8, 4.4};
    for (int k = 0; k < 3; k++) {
        put_rep(s, "measured", muid[k], meas_s[k]);
        char uid[64];
        snprintf(uid, sizeof uid, "%s%s", STORE_PREDICTION_PREFIX, muid[k]);
        put_rep(s, "simulated", uid, pred_s[k]);
    }
    put_rep(s, "measured", NULL, 5.0);
    store_filter f;
    memset(&f, 0, sizeof f);
    f.tag = "rep";
    store_comparison c;
    CU_ASSERT_FATAL(store_compare(s, &f, 0, &c, &e) == PL_OK);
    CU_ASSERT_EQUAL_FATAL(c.n, 4);
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[k].meas.iteration_time_s, meas_s[k], 0);
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[k].sim.iteration_time_s, pred_s[k], 0);
        CU_ASSERT_DOUBLE_EQUAL(c.pairs[k].err_iter, (pred_s[k] - meas_s[k]) / meas_s[k], 1e-15);
    }
    CU_ASSERT_DOUBLE_EQUAL(c.pairs[3].sim.iteration_time_s, 4.4, 0); /* the lone run: the newest */
    CU_ASSERT_DOUBLE_EQUAL(c.iter.max_err, (4.4 - 5.0) / 5.0, 1e-15);
    store_comparison_free(&c);
    /* another prediction (tag rep-x) made for run-a only: run-a pairs with it; run-b and run-c,
     * which have predictions of their own (under rep), pair with none; the lone run, which has
     * none, still with the newest of its configuration */
    store_run x;
    memset(&x, 0, sizeof x);
    x.kind = "simulated";
    x.uid = "prediction-rep-x@run-a";
    x.tag = "rep-x";
    x.schedule = "1f1b";
    x.ranks = x.stages = 2;
    x.microbatches = 4;
    x.chunks = x.iterations = 1;
    x.params_json = P_A;
    x.iteration_time_s = 0.9;
    CU_ASSERT_FATAL(store_write_run(s, &x, NULL, 0, NULL, 0, NULL, &e) == PL_OK);
    f.tag = NULL;
    f.measured_tag = "rep";
    f.sim_tag = "rep-x";
    CU_ASSERT_FATAL(store_compare(s, &f, 0, &c, &e) == PL_OK);
    CU_ASSERT_EQUAL_FATAL(c.n, 2);
    CU_ASSERT_EQUAL(c.unmatched_measured, 2);
    CU_ASSERT_DOUBLE_EQUAL(c.pairs[0].meas.iteration_time_s, 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(c.pairs[0].sim.iteration_time_s, 0.9, 0);
    CU_ASSERT_DOUBLE_EQUAL(c.pairs[1].meas.iteration_time_s, 5.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(c.pairs[1].sim.iteration_time_s, 0.9, 0);
    store_comparison_free(&c);
    store_close(s);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* Writes a 1f1b, 2-rank run of kind with uid (NULL: a fresh one), tag and m microbatches. */
static void put_cfg(store *s, const char *kind, const char *uid, const char *tag, int m, double iter_s) {
    store_run r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.uid = uid;
    r.tag = tag;
    r.schedule = "1f1b";
    r.ranks = r.stages = 2;
    r.microbatches = m;
    r.chunks = r.iterations = 1;
    r.weights_policy = "flush";
    r.recompute_policy = "none";
    r.params_json = P_A;
    r.iteration_time_s = iter_s;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_write_run(s, &r, NULL, 0, NULL, 0, NULL, &e) == PL_OK);
}

/* Three configurations (m 4, 8, 16) measured 3, 2 and 1 times, each with its own prediction and
 * another one (tag rep-alt, uid STORE_PREDICTION_PREFIX "rep-alt" STORE_PREDICTION_ALT_SEP and
 * the measured uid) whose errors differ: the groups' statistics by hand, and every other
 * prediction pairs with its own measured run, not with the newest of its configuration. */
#define REP_RUNS 6
static const int rep_m[REP_RUNS] = {4, 8, 4, 16, 8, 4};
static const double rep_err[REP_RUNS] = {0.10, -0.10, 0.20, 0.05, 0.10, 0.30}, rep_alt_err[REP_RUNS] = {1, 2, 3, 4, 5, 6};

static char *make_repeats_db(const char *dir) {
    char *path = pl_test_path(dir, "rep.db");
    store *s = NULL;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_open(path, 0, &s, &e) == PL_OK);
    for (int k = 0; k < REP_RUNS; k++) {
        char muid[32], uid[96];
        snprintf(muid, sizeof muid, "meas-%d", k);
        put_cfg(s, "measured", muid, "rep", rep_m[k], 2.0);
        snprintf(uid, sizeof uid, "%s%s", STORE_PREDICTION_PREFIX, muid);
        put_cfg(s, "simulated", uid, "rep", rep_m[k], 2.0 * (1 + rep_err[k]));
        snprintf(uid, sizeof uid, "%srep-alt%c%s", STORE_PREDICTION_PREFIX, STORE_PREDICTION_ALT_SEP, muid);
        put_cfg(s, "simulated", uid, "rep-alt", rep_m[k], 2.0 * (1 + rep_alt_err[k]));
    }
    store_close(s);
    return path;
}

/* Asserts kind lean K: its first pair, configurations, mean, standard error (NAN: none) and
 * t_crit (to 1e-4 of a published table's), its t the mean over the standard error and its mark
 * whether |t| exceeds t_crit. */
static void assert_kind(const store_kind_lean *K, size_t first, int configs, double mean, double se, double t_crit) {
    CU_ASSERT_EQUAL(K->first, first);
    CU_ASSERT_EQUAL(K->configs, configs);
    CU_ASSERT_DOUBLE_EQUAL(K->mean, mean, 1e-12);
    if (isnan(se)) {
        CU_ASSERT(isnan(K->se) && isnan(K->t) && isnan(K->t_crit) && !K->beyond);
        return;
    }
    CU_ASSERT_DOUBLE_EQUAL(K->se, se, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(K->t, mean / se, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(K->t_crit, t_crit, 1e-4);
    CU_ASSERT_EQUAL(K->beyond, fabs(mean / se) > t_crit);
}

static void test_repeats(void) {
    char *dir = pl_test_tmpdir();
    char *path = make_repeats_db(dir);
    store *s = NULL;
    pl_err e;
    store_filter f;
    store_comparison c;
    open_compared(path, "rep", &s, &f, &c, &e);
    CU_ASSERT_EQUAL_FATAL(c.n, REP_RUNS);
    store_repeats r;
    CU_ASSERT_FATAL(store_compare_repeats(&c, 0, &r, &e) == PL_OK);
    CU_ASSERT_EQUAL_FATAL(r.n, 3);
    CU_ASSERT_EQUAL(r.repeated, 2);
    /* m 4: +0.1, +0.2, +0.3; m 8: -0.1, +0.1; m 16: +0.05 alone */
    CU_ASSERT_EQUAL(r.groups[0].first, 0);
    CU_ASSERT_EQUAL(r.groups[0].n, 3);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[0].mean, 0.2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[0].sd, 0.1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[0].min, 0.1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[0].max, 0.3, 1e-12);
    CU_ASSERT_EQUAL(r.groups[1].first, 1);
    CU_ASSERT_EQUAL(r.groups[1].n, 2);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[1].mean, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[1].sd, sqrt(0.02), 1e-12);
    CU_ASSERT_EQUAL(r.groups[2].n, 1);
    CU_ASSERT(isnan(r.groups[2].sd));
    double pooled = sqrt((2 * 0.01 + 1 * 0.02) / 3.0);
    CU_ASSERT_DOUBLE_EQUAL(r.pooled_sd, pooled, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.mape_of_means, (0.2 + 0.0 + 0.05) / 3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.signed_mean_of_means, (0.2 + 0.0 + 0.05) / 3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.largest_mean, 0.2, 1e-12);
    /* the median of the largest |error| of 3 normal errors of sd pooled: P(max <= x) = 1/2 */
    CU_ASSERT_DOUBLE_EQUAL(pow(2 * gsl_cdf_ugaussian_P(r.largest_median / pooled) - 1, 3), 0.5, 1e-9);
    /* bias beyond the spread: each mean over pooled / sqrt n, against Student's t at 97.5% with
     * 3 degrees of freedom (3.182446, from the published table); the means' own spread */
    CU_ASSERT_EQUAL(r.dof, 3);
    CU_ASSERT_DOUBLE_EQUAL(r.t_crit, 3.182446, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[0].t, 3.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[1].t, 0.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[2].t, 0.05 / pooled, 1e-9);
    CU_ASSERT_EQUAL(r.biased, 0);
    CU_ASSERT_EQUAL(r.groups[0].biased, 0);
    CU_ASSERT_DOUBLE_EQUAL(r.signed_mean_se, sqrt((pow(0.2 - 0.25 / 3, 2) + pow(0.25 / 3, 2) + pow(0.05 - 0.25 / 3, 2)) / 2 / 3),
                           1e-12);
    /* one kind, 1f1b: its lean is the grid's, against Student's t at 97.5% with 2 degrees of
     * freedom (4.302653, from the published table) */
    CU_ASSERT_EQUAL_FATAL(r.n_kinds, 1);
    assert_kind(&r.kinds[0], 0, 3, 0.25 / 3, r.signed_mean_se, 4.302653);
    CU_ASSERT_EQUAL(r.kinds_beyond, 0);
    store_repeats_free(&r);
    /* m 16 as another kind: 1f1b's two configurations at +0.2 and 0 lean 0.1 with a standard
     * error of 0.1 (t 1, against 12.7062 at 1 degree of freedom); zbv's one has no spread */
    const char *kept = c.pairs[3].meas.schedule;
    c.pairs[3].meas.schedule = "zbv";
    CU_ASSERT_FATAL(store_compare_repeats(&c, 0, &r, &e) == PL_OK);
    c.pairs[3].meas.schedule = kept;
    CU_ASSERT_EQUAL_FATAL(r.n_kinds, 2);
    assert_kind(&r.kinds[0], 0, 2, 0.1, 0.1, 12.7062);
    assert_kind(&r.kinds[1], 3, 1, 0.05, NAN, NAN);
    store_repeats_free(&r);
    /* three configurations of one kind at +0.10, +0.11, +0.12: a lean of 0.11 with a standard
     * error of 0.01 / sqrt 3, 19 of them, beyond */
    const double leaning[REP_RUNS] = {0.10, 0.11, 0.10, 0.12, 0.11, 0.10};
    for (int k = 0; k < REP_RUNS; k++) c.pairs[k].err_iter = leaning[k];
    CU_ASSERT_FATAL(store_compare_repeats(&c, 0, &r, &e) == PL_OK);
    assert_kind(&r.kinds[0], 0, 3, 0.11, 0.01 / sqrt(3), 4.302653);
    CU_ASSERT(r.kinds[0].beyond);
    CU_ASSERT_EQUAL(r.kinds_beyond, 1);
    store_repeats_free(&r);
    /* m 4 at +0.3, +0.4, +0.5 and m 8 at -0.5, -0.3: the same spreads, means 6 and -4.9 standard
     * errors away, both beyond; one predicted short */
    const double moved[REP_RUNS] = {0.3, -0.5, 0.4, 0.05, -0.3, 0.5};
    for (int k = 0; k < REP_RUNS; k++) c.pairs[k].err_iter = moved[k];
    CU_ASSERT_FATAL(store_compare_repeats(&c, 0, &r, &e) == PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r.pooled_sd, pooled, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[0].t, 6.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.groups[1].t, -0.4 / (pooled / sqrt(2)), 1e-9);
    CU_ASSERT(r.groups[0].biased && r.groups[1].biased && !r.groups[2].biased);
    CU_ASSERT_EQUAL(r.biased, 2);
    CU_ASSERT_EQUAL(r.biased_short, 1);
    /* every run measured 2.0 s: no spread of the measured runs, and no correlation to read */
    CU_ASSERT_DOUBLE_EQUAL(r.meas_sd, 0.0, 1e-12);
    CU_ASSERT(r.pred_sd > 0);
    CU_ASSERT(isnan(r.track_corr));
    store_repeats_free(&r);
    /* how far apart the runs ran, and their predictions: m 4's runs at ln 0, 1, 2 (measured) and
     * 0, 2, 4 (predicted), deviations -1, 0, 1 and -2, 0, 2; m 8's at ln 0, 1 and 1, 0, deviations
     * -0.5, 0.5 and 0.5, -0.5; m 16's one run has no spread (its times change nothing). Sums of
     * squares 2 + 0.5 and 8 + 0.5, of products 4 - 0.5, over 3 degrees of freedom */
    const double ln_meas[REP_RUNS] = {0, 0, 1, 5, 1, 2}, ln_pred[REP_RUNS] = {0, 1, 2, -7, 0, 4};
    for (int k = 0; k < REP_RUNS; k++) {
        c.pairs[k].meas.iteration_time_s = exp(ln_meas[k]);
        c.pairs[k].sim.iteration_time_s = exp(ln_pred[k]);
    }
    CU_ASSERT_FATAL(store_compare_repeats(&c, 0, &r, &e) == PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r.meas_sd, sqrt(2.5 / 3), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.pred_sd, sqrt(8.5 / 3), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.track_corr, 3.5 / sqrt(2.5 * 8.5), 1e-12);
    store_repeats_free(&r);
    /* a pair without an error drops out of its group: m 8 is then measured once */
    c.pairs[4].err_iter = NAN;
    CU_ASSERT_FATAL(store_compare_repeats(&c, 0, &r, &e) == PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r.meas_sd, sqrt(2.0 / 2), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.pred_sd, sqrt(8.0 / 2), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.track_corr, 1.0, 1e-12);
    store_repeats_free(&r);
    store_comparison_free(&c);
    /* the other predictions, each with its own measured run */
    f.tag = NULL;
    f.measured_tag = "rep";
    f.sim_tag = "rep-alt";
    CU_ASSERT_FATAL(store_compare(s, &f, 0, &c, &e) == PL_OK);
    CU_ASSERT_EQUAL_FATAL(c.n, REP_RUNS);
    for (int k = 0; k < REP_RUNS; k++) CU_ASSERT_DOUBLE_EQUAL(c.pairs[k].err_iter, rep_alt_err[k], 1e-12);
    store_comparison_free(&c);
    store_close(s);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag rep --repeats", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "3 configurations, 2 measured twice or more"));
    char want[128];
    snprintf(want, sizeof want, "pooled: %.2f points", 100 * pooled);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "MAPE 8.33%, signed mean +8.33% (standard error 6.01 points), largest +20.00%"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "beyond 3.18\n(*: Student's t, 95%, 3 degrees of freedom): 0 of 3 configurations"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n1f1b               3    +8.33%   6.01 pt   +1.4 \n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "with CONFIGS - 1 degrees of freedom: 0 of 1 kinds"));
    if (!strstr(out, want)) fprintf(stderr, "\n%s\n", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag rep --repeats --format csv", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1f1b,2,2,4,1,none,\"mlp:width=64,depth=8\",3,0.2,0.1,0.1,0.3,3,0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1f1b,2,2,16,1,none,\"mlp:width=64,depth=8\",1,0.05,,0.05,0.05,0.433012702,0\n"));
    if (!strstr(out, ",3,0.2,0.1,0.1,0.3,3,0\n")) fprintf(stderr, "\n%s\n", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag rep --repeats --format json", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
    free(out);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

static void test_compare_cli(void) {
    char *dir = pl_test_tmpdir();
    char *path = make_compare_db(dir);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag acc --format csv", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    /* Header + 2 pairs; gpipe's iteration error is exactly +0.25. */
    int lines = 0;
    for (char *p = out; *p; p++) lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "gpipe,4,4,8,1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ",2,1.6,0.25,"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag acc --format json", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    char want[128];
    snprintf(want, sizeof want, "\"iteration_time\": {\"mape\": %.9g, \"max_err\": 0.25, \"pairs\": 2}",
             (fabs((1.0 - 1.1) / 1.1) + 0.25) / 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"unmatched_measured\": 2"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag acc", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    const char *want_row = "iteration time      17.05%    +25.00%      2";
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want_row));
    if (!strstr(out, want_row)) fprintf(stderr, "\n%s\n", out);
    free(out);
    /* a run whose file holds no bubble fraction: "-" where it read "nan%" */
    CU_ASSERT_EQUAL(tr_raw_sql(path, "UPDATE runs SET bubble_fraction = NULL WHERE kind = 'measured'"), 0);
    snprintf(cmd, sizeof cmd, "%s compare --db %s --tag acc", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT(out && strstr(out, "nan") == NULL && strstr(out, " 30.00%       -         -") != NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare --db %s --format xml", PIPELAB_BIN, path);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
    free(out);
    snprintf(cmd, sizeof cmd, "%s compare --db %s/missing.db", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    free(out);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* Returns 1 when the file starts with the PNG signature and holds more than it. */
static int is_png(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char sig[8];
    size_t n = fread(sig, 1, 8, f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    return n == 8 && memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0 && size > 1000;
}

/* Returns 1 when gnuplot is on PATH (the figure tests need it; they pass vacuously without). */
static int have_gnuplot(void) { return pl_test_run("command -v gnuplot >/dev/null", NULL) == 0; }

/* Builds the small figure database: traced simulations and measured runs. Returns its path. */
static char *make_plot_db(const char *dir) {
    char *path = pl_test_path(dir, "fig.db");
    char cmd[1024];
    const char *kinds[] = {"gpipe", "1f1b", "zb-h1"};
    for (int k = 0; k < 3; k++)
        for (int m = 2; m <= 8; m *= 2) {
            snprintf(cmd, sizeof cmd,
                     "%s simulate --kind %s --ranks 2 --microbatches %d --tf 1 --ti 1 --tw 1 --param-bytes 1e6 "
                     "--stash-bytes 1e5 --tag fig --db %s%s",
                     PIPELAB_BIN, kinds[k], m, path, k == 1 && m == 2 ? " --trace" : "");
            CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
        }
    snprintf(cmd, sizeof cmd, "%s simulate --kind 1f1b --ranks 4 --microbatches 4 --tf 1 --tb 2 --tag fig --db %s",
             PIPELAB_BIN, path);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    /* Measured runs of the simulated configurations (as pipelab run would write them). */
    store *s = NULL;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_open(path, 0, &s, &e) == PL_OK);
    store_run *runs = NULL;
    size_t n = 0;
    CU_ASSERT_FATAL(store_list_runs(s, "fig", 0, &runs, &n, &e) == PL_OK);
    for (size_t i = 0; i < n; i++) {
        store_run r = runs[i];
        r.uid = NULL;
        r.kind = "measured";
        r.iteration_time_s *= 1.0 + 0.01 * (double)(i % 7) - 0.03;
        r.host = r.utc_time = r.origin = r.version = r.git_rev = NULL;
        store_rank_metric rm[4] = {{0, 1, 0, 0, 0, 10}, {1, 1, 0, 0, 0, 10}, {2, 1, 0, 0, 0, 10}, {3, 1, 0, 0, 0, 10}};
        CU_ASSERT(store_write_run(s, &r, rm, r.ranks, NULL, 0, NULL, &e) == PL_OK);
    }
    store_runs_free(runs, n);
    store_close(s);
    return path;
}

/* One data block of a figure's .dat file (curves_write: "# block i: KEY", then "x y" lines). */
#define DAT_MAX_PTS 256
typedef struct dat_block {
    char key[160];
    double x[DAT_MAX_PTS], y[DAT_MAX_PTS];
    int n;
} dat_block;

/* Reads the blocks of dir/name into b[max]; returns how many (-1 when the file cannot be read). */
static int read_dat(const char *dir, const char *name, dat_block *b, int max) {
    char *path = pl_test_path(dir, name);
    FILE *f = fopen(path, "r");
    free(path);
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "# block ", 8) == 0) {
            const char *k = strstr(line, ": ");
            if (n == max || !k) break;
            memset(&b[n], 0, sizeof b[n]);
            snprintf(b[n].key, sizeof b[n].key, "%s", k + 2);
            b[n].key[strcspn(b[n].key, "\n")] = 0;
            n++;
        } else if (n > 0 && line[0] != '#' && line[0] != '\n' && b[n - 1].n < DAT_MAX_PTS) {
            dat_block *c = &b[n - 1];
            if (sscanf(line, "%lf %lf", &c->x[c->n], &c->y[c->n]) == 2) c->n++;
        }
    }
    fclose(f);
    return n;
}

/* Returns the occ-th (0-based, in file order) block keyed key among b[n], or NULL. */
static const dat_block *dat_find(const dat_block *b, int n, const char *key, int occ) {
    for (int i = 0; i < n; i++)
        if (strcmp(b[i].key, key) == 0 && occ-- == 0) return &b[i];
    return NULL;
}

/* Returns the y at x of the occ-th block keyed key (NAN when absent). */
static double dat_y(const dat_block *b, int n, const char *key, int occ, double x) {
    const dat_block *c = dat_find(b, n, key, occ);
    for (int i = 0; c && i < c->n; i++)
        if (fabs(c->x[i] - x) <= 1e-9 * fabs(x)) return c->y[i];
    return NAN;
}

/* 1 when x is within 1e-9 relative of want (the files print 10 significant digits). */
static int dat_near(double x, double want) { return fabs(x - want) <= 1e-9 * fabs(want); }

/* Checks the bubble, throughput, memory and accuracy data of make_plot_db's runs in dir.
 * The runs (tag fig): simulated gpipe, 1f1b and zb-h1 on p = 2 ranks, m = 2, 4, 8, with
 * tF = tI = tW = 1 s (tB = tI + tW = 2 s), 1e6 parameter and 1e5 stash bytes per stage; a
 * 1f1b run of p = 4, m = 4, tF = 1, tB = 2; and a measured copy of each (store_list_runs lists
 * newest first: the copy of the i-th listed run has its iteration time times 0.97 + 0.01 (i mod
 * 7), every other number as simulated, and 10 peak bytes on every rank). Microbatches hold one
 * sample. */
static void check_plot_data(const char *dir) {
    dat_block *b = calloc(32, sizeof *b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    static const char *const sim_meas[2] = {"", " (measured)"};
    char key[64];
    /* Bubble (bubble_fraction = idle / (ranks x window)). gpipe and 1f1b with uniform passes:
     * each rank idles (p-1)(tF+tB) of an iteration of (m+p-1)(tF+tB): (p-1)/(m+p-1), 1/(m+1) at
     * p = 2, 3/7 for p = 4, m = 4. ZB-H1 (Qi et al., Zero Bubble): idle (p-1)(tF+tI-tW) = 1 s of
     * m (tF+tI+tW) + 1 = 3m + 1 s: 1/(3m+1). The measured copies carry the same fractions. The
     * analytic curve (p-1)/(m+p-1) spans m = 2 .. 8 in each panel (p = 2, then p = 4). */
    int n = read_dat(dir, "bubble.dat", b, 32);
    CU_ASSERT(n >= 10);
    for (int k = 0; k < 2; k++) {
        for (int m = 2; m <= 8; m *= 2) {
            snprintf(key, sizeof key, "gpipe%s", sim_meas[k]);
            CU_ASSERT(dat_near(dat_y(b, n, key, 0, m), 1.0 / (m + 1)));
            snprintf(key, sizeof key, "1f1b%s", sim_meas[k]);
            CU_ASSERT(dat_near(dat_y(b, n, key, 0, m), 1.0 / (m + 1)));
            snprintf(key, sizeof key, "zb-h1%s", sim_meas[k]);
            CU_ASSERT(dat_near(dat_y(b, n, key, 0, m), 1.0 / (3 * m + 1)));
        }
        snprintf(key, sizeof key, "1f1b%s", sim_meas[k]);
        CU_ASSERT(dat_near(dat_y(b, n, key, 1, 4), 3.0 / 7)); /* the p = 4 panel */
    }
    const char *an = "gpipe, 1f1b analytic (p-1)/(m+p-1)";
    CU_ASSERT(dat_near(dat_y(b, n, an, 0, 2), 1.0 / 3) && dat_near(dat_y(b, n, an, 0, 8), 1.0 / 9));
    CU_ASSERT(dat_near(dat_y(b, n, an, 1, 2), 3.0 / 5) && dat_near(dat_y(b, n, an, 1, 8), 3.0 / 11));
    /* Throughput against m (p = 2), samples/s = m / iteration: gpipe and 1f1b m / (3 (m+1)),
     * zb-h1 m / (3m + 1); the measured copies keep the simulated throughput. */
    n = read_dat(dir, "throughput.dat", b, 32);
    CU_ASSERT_EQUAL(n, 6);
    for (int k = 0; k < 2; k++)
        for (int m = 2; m <= 8; m *= 2) {
            snprintf(key, sizeof key, "gpipe%s", sim_meas[k]);
            CU_ASSERT(dat_near(dat_y(b, n, key, 0, m), m / (3.0 * (m + 1))));
            snprintf(key, sizeof key, "1f1b%s", sim_meas[k]);
            CU_ASSERT(dat_near(dat_y(b, n, key, 0, m), m / (3.0 * (m + 1))));
            snprintf(key, sizeof key, "zb-h1%s", sim_meas[k]);
            CU_ASSERT(dat_near(dat_y(b, n, key, 0, m), m / (3.0 * m + 1)));
        }
    /* Memory (p = 2, m = 8), one bar per rank in rank order, in MiB (the largest peak is over
     * 2^20 bytes). A rank holds weights 1e6 + gradients 1e6 + optimizer state 8 bytes per 4-byte
     * parameter 2e6 = 4e6 bytes, plus 1e5 per stashed microbatch: gpipe stashes all 8 forwards on
     * both ranks (4.8e6); 1f1b stashes p - s (2 on rank 0: 4.2e6, 1 on rank 1: 4.1e6). The
     * measured runs' bars are their stored 10 bytes. (zb-h1's deferred W holds half a stash
     * longer; not pinned here.) */
    n = read_dat(dir, "memory.dat", b, 32);
    CU_ASSERT_EQUAL(n, 6);
    const double MiB = 1024.0 * 1024.0;
    const dat_block *g = dat_find(b, n, "gpipe", 0), *o = dat_find(b, n, "1f1b", 0);
    CU_ASSERT_FATAL(g && o && g->n == 2 && o->n == 2);
    CU_ASSERT(dat_near(g->y[0], 4.8e6 / MiB) && dat_near(g->y[1], 4.8e6 / MiB));
    CU_ASSERT(dat_near(o->y[0], 4.2e6 / MiB) && dat_near(o->y[1], 4.1e6 / MiB));
    for (int i = 0; i < n; i++)
        if (strstr(b[i].key, "(measured)")) CU_ASSERT(b[i].n == 2 && dat_near(b[i].y[0], 10 / MiB) && dat_near(b[i].y[1], 10 / MiB));
    /* Accuracy: (measured, simulated) iteration time in s per pair, keyed by schedule. Simulated
     * 3 (m+1) s for gpipe/1f1b at p = 2, (4+3) x 3 = 21 s for 1f1b p = 4, 3m + 1 for zb-h1; listed
     * newest first, the p = 4 run is i = 0, zb-h1 m = 8, 4, 2 are i = 1..3, 1f1b m = 8, 4, 2
     * i = 4..6, gpipe m = 8, 4, 2 i = 7..9 (factors 0.97 .. 1.03, then 0.97, 0.98, 0.99). */
    n = read_dat(dir, "accuracy.dat", b, 32);
    CU_ASSERT_EQUAL(n, 3);
    static const struct { const char *key; double meas, sim; } acc[] = {
        {"gpipe", 0.99 * 9, 9},     {"gpipe", 0.98 * 15, 15},  {"gpipe", 0.97 * 27, 27},
        {"1f1b", 1.03 * 9, 9},      {"1f1b", 1.02 * 15, 15},   {"1f1b", 1.01 * 27, 27}, {"1f1b", 0.97 * 21, 21},
        {"zb-h1", 1.00 * 7, 7},     {"zb-h1", 0.99 * 13, 13}, {"zb-h1", 0.98 * 25, 25},
    };
    for (size_t i = 0; i < sizeof acc / sizeof acc[0]; i++)
        CU_ASSERT(dat_near(dat_y(b, n, acc[i].key, 0, acc[i].meas), acc[i].sim));
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(b[i].n, strcmp(b[i].key, "1f1b") == 0 ? 4 : 3);
    free(b);
}

static void test_plot_kinds(void) {
    if (!have_gnuplot()) {
        pl_test_skip("gnuplot is not on PATH");
        return;
    }
    char *dir = pl_test_tmpdir();
    char *db = make_plot_db(dir);
    char cmd[2048], *out = NULL;
    /* The traced run is run 4 (1f1b, m = 2). */
    const char *figs[][2] = {
        {"timeline 4", "timeline.png"},
        {"bubble --tag fig", "bubble.png"},
        {"throughput --tag fig --x microbatches --ranks 2", "throughput.png"},
        {"memory --tag fig --ranks 2 --microbatches 8", "memory.png"},
        {"accuracy --tag fig", "accuracy.png"},
    };
    for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++) {
        char *png = pl_test_path(dir, figs[i][1]);
        snprintf(cmd, sizeof cmd, "%s plot %s --db %s -o %s", PIPELAB_BIN, figs[i][0], db, png);
        int rc = pl_test_run(cmd, &out);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc != 0) fprintf(stderr, "\n%s\n%s\n", cmd, out);
        CU_ASSERT(is_png(png));
        free(out);
        free(png);
    }
    check_plot_data(dir);
    /* a title, tag or path with backquotes (a merged database's tag, say) is text: gnuplot runs
     * `...` in a double-quoted string as a shell command */
    char *png = pl_test_path(dir, "t`touch pwned-o`.png"), *pwned = pl_test_path(dir, "pwned");
    snprintf(cmd, sizeof cmd, "cd %s && %s plot bubble --tag fig --db %s --title 'T`touch pwned`' -o '%s'", dir, PIPELAB_BIN,
             db, png);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    free(out);
    CU_ASSERT(is_png(png));
    CU_ASSERT_EQUAL(access(pwned, F_OK), -1);
    free(pwned);
    pwned = pl_test_path(dir, "pwned-o");
    CU_ASSERT_EQUAL(access(pwned, F_OK), -1);
    free(pwned);
    free(png);
    /* a newline in the output's path: the script's first line is a comment naming it, which a
     * newline would end, running the rest as commands */
    snprintf(cmd, sizeof cmd, "cd %s && %s plot bubble --tag fig --db %s -o \"$(printf 'n\\nsystem(\"touch pwned-n\")\\n.png')\"",
             dir, PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    if (!out || strstr(out, "rror")) fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    pwned = pl_test_path(dir, "pwned-n");
    CU_ASSERT_EQUAL(access(pwned, F_OK), -1);
    free(pwned);
    /* a database whose runs lost their iteration times (edited by hand): a clear error, not a
     * script gnuplot fails on ("undefined variable: inf") */
    char *bad = pl_test_path(dir, "notimes.db");
    snprintf(cmd, sizeof cmd, "cp %s %s", db, bad);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(bad, "UPDATE runs SET iteration_time_s = NULL"), SQLITE_OK);
    snprintf(cmd, sizeof cmd, "%s plot accuracy --tag fig --db %s -o %s/acc.png", PIPELAB_BIN, bad, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "pairs has a positive iteration time in both runs: the database is damaged"));
    if (!out || !strstr(out, "damaged")) fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
    free(bad);
    /* The timeline's data: 2 ranks x 2 microbatches x (F, B) = 8 compute rows in block 0, in
     * seconds (the iteration takes 9 s); rank 0's first F spans [0, 1]. */
    char *datpath = pl_test_path(dir, "timeline.dat");
    FILE *f = fopen(datpath, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[256];
    int block = 0, rows[2] = {0, 0}, blank = 0, first_f = 0, b_rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '\n') {
            if (++blank == 2) block++;
            continue;
        }
        blank = 0;
        if (line[0] == '#') continue;
        if (block < 2) rows[block]++;
        if (block == 0 && strcmp(line, "0 0.5 0.5 5142951 \"0\" 16777215 \"0F0\"\n") == 0) first_f = 1;
        if (block == 0 && strstr(line, " 1 14767961 ")) b_rows++; /* B: half width 1, colour 0xE15759 */
    }
    fclose(f);
    CU_ASSERT_EQUAL(rows[0], 8);
    CU_ASSERT(rows[1] >= 1);
    CU_ASSERT(first_f);
    CU_ASSERT_EQUAL(b_rows, 4);
    free(datpath);
    /* SVG on request; a run without ops is a clear error. */
    char *svg = pl_test_path(dir, "t.svg");
    snprintf(cmd, sizeof cmd, "%s plot timeline 4 --db %s -o %s", PIPELAB_BIN, db, svg);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    free(out);
    f = fopen(svg, "r");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f) {
        size_t n = fread(line, 1, sizeof line - 1, f);
        line[n] = 0;
        CU_ASSERT_PTR_NOT_NULL(strstr(line, "<svg"));
        fclose(f);
    }
    free(svg);
    snprintf(cmd, sizeof cmd, "%s plot timeline 1 --db %s -o %s/x.png", PIPELAB_BIN, db, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--trace"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s plot memory --tag fig --db %s -o %s/x.png", PIPELAB_BIN, db, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1); /* 2 and 4 ranks: choose one */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--ranks"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s plot pie --db %s", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
    free(out);
    free(db);
    pl_test_rmdir(dir);
    free(dir);
}

static void test_plot_no_gnuplot(void) {
    char *dir = pl_test_tmpdir();
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "PATH= PIPELAB_GNUPLOT= %s plot bubble --db %s/none.db -o %s/b.png", PIPELAB_BIN, dir, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "gnuplot not found"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "apt-get install gnuplot-nox"));
    free(out);
    pl_test_rmdir(dir);
    free(dir);
}

void test_compare_plot_register(void) {
    static const pl_test_case cases[] = {
        {"json_get", test_json_get},
        {"pairing_and_errors", test_pairing_and_errors},
        {"pairing with each run's own prediction", test_pairing_own_prediction},
        {"repeats: configurations measured again, other predictions paired by uid", test_repeats},
        {"compare_cli", test_compare_cli},
        {"plot_kinds", test_plot_kinds},
        {"plot_no_gnuplot", test_plot_no_gnuplot},
        {NULL, NULL},
    };
    pl_test_suite("compare_plot", cases);
}
