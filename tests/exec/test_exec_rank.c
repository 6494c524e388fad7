/* test_exec_rank.c: the per-rank entry point an MPI driver uses (exec_run_rank on each rank,
 * exec_assemble on the records) gives the same run as exec_run. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec_int.h"
#include "pl_test.h"

void exec_test_rank_register(void);

/* One rank's thread: runs exec_run_rank over its endpoint. */
typedef struct rank_job {
    const sched *s;
    const exec_config *c;
    exec_transport *t;
    exec_rank_record rec;
    pl_err e;
    int rc;
} rank_job;

/* Thread body: fills the job's record and return code. */
static void *rank_main(void *arg) {
    rank_job *j = arg;
    pl_err_clear(&j->e);
    j->rc = exec_run_rank(j->s, j->c, j->t, &j->rec, &j->e);
    return NULL;
}

/* Changes the records before they are assembled (a test's doctoring), or NULL. */
typedef void (*recs_edit)(exec_rank_record *recs, int ranks, const exec_config *c);

/* Runs s rank by rank over the in-process transport (as an MPI driver would, one rank per
 * process), edits the records (edit != NULL) and returns the assembled result in out, or an
 * error code with the first message. */
static int run_by_ranks_edit(const sched *s, const exec_config *c, exec_result *out, recs_edit edit, pl_err *e) {
    int p = s->ranks;
    exec_transport *t = exec_threads_transport_new(p, 64, (size_t)c->microbatch_size * c->hidden * sizeof(float), 10, e);
    if (!t) return e->code;
    rank_job *jobs = calloc((size_t)p, sizeof *jobs);
    pthread_t *th = calloc((size_t)p, sizeof *th);
    for (int r = 0; r < p; r++) {
        jobs[r].s = s;
        jobs[r].c = c;
        jobs[r].t = &t[r];
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    for (int r = 0; r < p; r++) pthread_join(th[r], NULL);
    int rc = PL_OK;
    pl_err why;
    if (exec_threads_transport_why(t, &why)) {
        rc = why.code ? why.code : PL_EINTERNAL;
        *e = why;
    }
    exec_rank_record *recs = calloc((size_t)p, sizeof *recs);
    for (int r = 0; r < p; r++) {
        if (rc == PL_OK && jobs[r].rc) { rc = jobs[r].rc; *e = jobs[r].e; }
        recs[r] = jobs[r].rec;
    }
    if (rc == PL_OK && edit) edit(recs, p, c);
    if (rc == PL_OK) rc = exec_assemble(s, c, recs, out, e);
    for (int r = 0; r < p; r++) exec_rank_record_free(&recs[r]);
    free(recs);
    free(jobs);
    free(th);
    exec_threads_transport_free(t, p);
    return rc;
}

/* The same without editing. */
static int run_by_ranks(const sched *s, const exec_config *c, exec_result *out, pl_err *e) {
    return run_by_ranks_edit(s, c, out, NULL, e);
}

/* zb-h1 and pipedream, 3 ranks: rank-by-rank runs give bit-identical weights and losses to
 * exec_run, and the same per-rank peak memory. */
static void test_run_rank_equals_run(void) {
    const char *kinds[] = {"zb-h1", "pipedream"};
    for (int k = 0; k < 2; k++) {
        pl_err e;
        pl_err_clear(&e);
        sched_gen_opts o = {3, 6, 0, 0, SCHED_RECOMPUTE_NONE};
        sched *g = sched_generate(kinds[k], &o, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        sched *s = sched_lower(g, &e);
        sched_free(g);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        exec_config c;
        exec_config_default(&c);
        c.hidden = 32;
        c.ffn = 64;
        c.layers = 3;
        c.microbatch_size = 4;
        c.warmup_passes = 1;
        c.timed_passes = 2;
        c.oversubscribe = 1;
        c.return_weights = 1;
        c.record_ops = 1;
        exec_result a, b;
        CU_ASSERT_EQUAL_FATAL(exec_run(s, &c, &a, &e), PL_OK);
        int rc = run_by_ranks(s, &c, &b, &e);
        if (rc) fprintf(stderr, "run_by_ranks: %s\n", e.msg);
        CU_ASSERT_EQUAL_FATAL(rc, PL_OK);
        CU_ASSERT_EQUAL(memcmp(a.final_weights, b.final_weights, a.n_weights * sizeof(float)), 0);
        for (int i = 0; i < a.n_iters; i++) CU_ASSERT_EQUAL(a.loss[i], b.loss[i]);
        for (int r = 0; r < 3; r++) {
            CU_ASSERT_EQUAL(a.rank[r].peak.total_bytes, b.rank[r].peak.total_bytes);
            CU_ASSERT_EQUAL(a.rank[r].n_ops, b.rank[r].n_ops);
        }
        exec_result_free(&a);
        exec_result_free(&b);
        sched_free(s);
    }
}

/* A rank whose setup fails (here: a memory budget) aborts the others instead of leaving them
 * waiting. */
static void test_run_rank_setup_failure(void) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate("1f1b", &o, &e);
    sched *s = sched_lower(g, &e);
    sched_free(g);
    exec_config c;
    exec_config_default(&c);
    c.hidden = 32;
    c.layers = 2;
    c.microbatch_size = 4;
    c.mem_budget_bytes = 1000;
    exec_result b;
    double t0 = pl_now_s();
    CU_ASSERT_EQUAL(run_by_ranks(s, &c, &b, &e), PL_ENOMEM);
    CU_ASSERT(strstr(e.msg, "memory budget") != NULL);
    CU_ASSERT(pl_now_s() - t0 < 5);
    /* the error names its rank (the bookkeeping's): no second "rank R: " before it */
    int r = pl_err_rank(&e);
    CU_ASSERT(r == 0 || r == 1);
    char head[32];
    snprintf(head, sizeof head, "rank %d, ", r);
    CU_ASSERT_EQUAL(strncmp(e.msg, head, strlen(head)), 0);
    /* an error of no rank (the configuration's) gets the failing rank's name */
    c.mem_budget_bytes = 0;
    c.layers = 1;
    CU_ASSERT_EQUAL(run_by_ranks(s, &c, &b, &e), PL_EINPUT);
    r = pl_err_rank(&e);
    CU_ASSERT(r == 0 || r == 1);
    snprintf(head, sizeof head, "rank %d: 1 blocks cannot fill", r);
    CU_ASSERT_EQUAL(strncmp(e.msg, head, strlen(head)), 0);
    sched_free(s);
}

/* An error names its rank by pl_err's field, never by its text: a zero-initialised or new
 * message names none, pl_err_set_rank names one, a prefix keeps it, a clear drops it. */
static void test_err_rank(void) {
    pl_err z = {0};
    CU_ASSERT_EQUAL(pl_err_rank(&z), -1);
    pl_err e;
    pl_errf(&e, PL_EINPUT, "rank 3 looks named but is not");
    CU_ASSERT_EQUAL(pl_err_rank(&e), -1);
    pl_err_set_rank(&e, 0);
    CU_ASSERT_EQUAL(pl_err_rank(&e), 0);
    pl_err_set_rank(&e, 5);
    pl_err_prefix(&e, "rank %d, action 1: ", 5);
    CU_ASSERT_EQUAL(pl_err_rank(&e), 5);
    CU_ASSERT_STRING_EQUAL(e.msg, "rank 5, action 1: rank 3 looks named but is not");
    pl_errf(&e, PL_EINPUT, "another error");
    CU_ASSERT_EQUAL(pl_err_rank(&e), -1);
    pl_err_set_rank(&e, 2);
    pl_err_set_rank(&e, -1);
    CU_ASSERT_EQUAL(pl_err_rank(&e), -1);
    pl_err_set_rank(&e, 2);
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(pl_err_rank(&e), -1);
    CU_ASSERT_EQUAL(pl_err_rank(NULL), -1);
}

/* Runs kind (2 ranks, 4 microbatches; hidden 32, 2 blocks, 1 warm-up and 3 timed passes; the
 * profile between the passes at between_reps repetitions, 0 none) rank by rank with the records
 * edited before assembly; fills a (exec_result_free) and returns the code. */
static int small_run_edited(const char *kind, int between_reps, recs_edit edit, exec_result *a) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate(kind, &o, &e);
    sched *s = g ? sched_lower(g, &e) : NULL;
    sched_free(g);
    if (!s) return e.code ? e.code : PL_EINTERNAL;
    exec_config c;
    exec_config_default(&c);
    c.hidden = 32;
    c.ffn = 64;
    c.layers = 2;
    c.microbatch_size = 4;
    c.warmup_passes = 1;
    c.timed_passes = 3;
    c.oversubscribe = 1;
    c.profile_between_reps = between_reps;
    int rc = run_by_ranks_edit(s, &c, a, edit, &e);
    if (rc) fprintf(stderr, "run_by_ranks %s: %s\n", kind, e.msg);
    sched_free(s);
    return rc;
}

/* The measured Zero Bubble rate: each rank's compute span holds its busy time (span >= busy,
 * by construction of both from the same clock reads), and the run's rate is exactly the worst
 * rank's (span - busy) / span of the median pass, recomputed here from the records. */
static double g_span[2][5], g_busy2[2][5];

static void keep_spans(exec_rank_record *recs, int ranks, const exec_config *c) {
    for (int r = 0; r < ranks; r++)
        for (int t = 0; t < c->timed_passes; t++) {
            g_span[r][t] = recs[r].span_s[c->warmup_passes + t];
            g_busy2[r][t] = recs[r].busy_s[c->warmup_passes + t];
        }
}

static void test_zb_bubble_rate_measured(void) {
    exec_result a;
    CU_ASSERT_EQUAL_FATAL(small_run_edited("zb-h1", 0, keep_spans, &a), PL_OK);
    /* the median pass the executor chose (3 passes: the middle one), which two passes of one
     * time would leave ambiguous to a search by value */
    int med = a.median_pass[0];
    CU_ASSERT_FATAL(med >= 0 && med < 3 && a.median_pass[1] == med);
    CU_ASSERT_EQUAL(a.pass_s[med], a.pass_median_s);
    double worst = 0;
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < 3; t++) {
            CU_ASSERT(g_span[r][t] >= g_busy2[r][t] && g_span[r][t] > 0);
            if (t == med && (g_span[r][t] - g_busy2[r][t]) / g_span[r][t] > worst)
                worst = (g_span[r][t] - g_busy2[r][t]) / g_span[r][t];
        }
    CU_ASSERT_DOUBLE_EQUAL(a.zb_bubble_rate, worst, 1e-12);
    if (fabs(a.zb_bubble_rate - worst) > 1e-12)
        for (int r = 0; r < 2; r++)
            fprintf(stderr, "\n  rank %d, median pass %d: span %.9g s, busy %.9g s; run's rate %.12g, recomputed %.12g\n", r,
                    med, g_span[r][med], g_busy2[r][med], a.zb_bubble_rate, worst);
    CU_ASSERT(a.zb_bubble_rate >= 0 && a.zb_bubble_rate < 1);
    exec_result_free(&a);
}

/* The ranks' drift over the records (exec_assemble), as an MPI run's rank 0 sets them side by
 * side: each record carries its worker's rounds' F, then their backwards (40 repetitions of the
 * profile between the passes: 10 rounds, every one whole); replaced by two series whose ratio
 * holds e^a for 12 rounds and then e^-a (the backwards' series after them, at 3), the assembled
 * profile's drift is exec_drift_of's sqrt(22 a^2 / 23 / 2), read from the F series alone. */
#define DRIFT_A 0.03
static size_t g_rounds[2];
static int g_rounds_whole[2];

static void drift_series(exec_rank_record *recs, int ranks, const exec_config *c) {
    (void)c;
    for (int r = 0; r < ranks && r < 2; r++) {
        g_rounds[r] = recs[r].has_prof ? recs[r].n_round_f : 0;
        g_rounds_whole[r] = 1;
        for (size_t k = 0; k < g_rounds[r]; k++) g_rounds_whole[r] &= recs[r].round_f[k] > 0;
        double *v = realloc(recs[r].round_f, 2 * 24 * sizeof *v);
        if (!v) continue;
        for (int k = 0; k < 24; k++) v[k] = r == 0 ? 2.0 : 2.0 * exp(k < 12 ? -DRIFT_A : DRIFT_A);
        for (int k = 24; k < 48; k++) v[k] = 3.0;
        recs[r].round_f = v;
        recs[r].n_round_f = 24;
    }
}

static void test_drift_over_records(void) {
    exec_result a;
    CU_ASSERT_EQUAL_FATAL(small_run_edited("1f1b", 40, drift_series, &a), PL_OK);
    for (int r = 0; r < 2; r++) {
        CU_ASSERT_EQUAL(g_rounds[r], 10);
        CU_ASSERT(g_rounds_whole[r]);
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(a.between_profile);
    CU_ASSERT_DOUBLE_EQUAL(a.between_profile[0].drift, sqrt(22 * DRIFT_A * DRIFT_A / 23 / 2), 1e-12);
    /* each worker's rounds go to its own profile, F's and the backwards' series apart */
    for (int r = 1; r <= 2; r++) {
        CU_ASSERT_EQUAL(a.between_profile[r].n_round_f, 24);
        CU_ASSERT_DOUBLE_EQUAL(a.between_profile[r].round_f[23], r == 1 ? 2.0 : 2.0 * exp(DRIFT_A), 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(a.between_profile[r].round_b[0], 3.0, 0);
        CU_ASSERT_DOUBLE_EQUAL(a.between_profile[r].round_b[23], 3.0, 0);
    }
    exec_result_free(&a);
}

/* The timed pass the test makes slow, and by how much (seconds). */
#define SLOW_PASS 1
#define SLOW_BY 1.0
/* The per-rank busy time of each timed pass, as recorded (filled by slow_pass). */
static double g_busy[2][5];

/* Makes timed pass SLOW_PASS end SLOW_BY later on the last rank (a pass the machine stalled
 * in), and keeps each rank's recorded busy time per pass. */
static void slow_pass(exec_rank_record *recs, int ranks, const exec_config *c) {
    for (int r = 0; r < ranks; r++)
        for (int t = 0; t < c->timed_passes; t++) g_busy[r][t] = recs[r].busy_s[c->warmup_passes + t];
    recs[ranks - 1].pass_end_s[c->warmup_passes + SLOW_PASS] += SLOW_BY;
}

/* Per-rank figures come from the median pass, as the iteration time does: with one pass
 * stalled for a second, busy + idle is still the median pass time on every rank, busy is the
 * median pass's own, and the bubble stays below 1 (averaged over all passes, the idle time
 * would include a third of the stall, far more than a whole pass of this small run). */
static void test_rank_figures_of_median_pass(void) {
    exec_result a;
    CU_ASSERT_EQUAL_FATAL(small_run_edited("1f1b", 0, slow_pass, &a), PL_OK);
    CU_ASSERT(a.pass_s[SLOW_PASS] >= SLOW_BY);
    CU_ASSERT(a.pass_median_s < SLOW_BY);
    int med = -1; /* the median pass: the other two are the fast ones, the median the slower */
    for (int t = 0; t < 3; t++)
        if (t != SLOW_PASS && a.pass_s[t] == a.pass_median_s) med = t;
    CU_ASSERT_FATAL(med >= 0);
    CU_ASSERT_EQUAL(a.pass_median_s, exec_median_at(a.pass_s, a.median_pass));
    CU_ASSERT_EQUAL(a.pass_median_s, exec_median(a.pass_s, 3));
    for (int r = 0; r < 2; r++) {
        CU_ASSERT_DOUBLE_EQUAL(a.rank[r].busy_s + a.rank[r].idle_s, a.pass_median_s, 1e-12);
        CU_ASSERT_EQUAL(a.rank[r].busy_s, g_busy[r][med]);
        CU_ASSERT(a.rank[r].idle_s >= 0);
        CU_ASSERT(a.rank[r].bubble_fraction >= 0 && a.rank[r].bubble_fraction < 1);
        CU_ASSERT_DOUBLE_EQUAL(a.rank[r].bubble_fraction, a.rank[r].idle_s / a.pass_median_s, 1e-12);
    }
    exec_result_free(&a);
}

/* Checks exec_median_passes and exec_median on v[n] against the expected middle positions and
 * median, and that neither touches v. */
static void median_case(const double *v, int n, int mid0, int mid1, double median) {
    double copy[16];
    CU_ASSERT_FATAL(n <= 16);
    memcpy(copy, v, (size_t)n * sizeof *v);
    int mid[2] = {-1, -1};
    CU_ASSERT_EQUAL(exec_median_passes(v, n, mid), PL_OK);
    CU_ASSERT_EQUAL(mid[0], mid0);
    CU_ASSERT_EQUAL(mid[1], mid1);
    CU_ASSERT_EQUAL(exec_median_at(v, mid), median);
    CU_ASSERT_EQUAL(exec_median(v, (size_t)n), median);
    CU_ASSERT_EQUAL(memcmp(copy, v, (size_t)n * sizeof *v), 0);
}

/* The profile's STEP mean (exec_mean_less_stalls): the mean of the values within EXEC_GAP_MAX_S of
 * their median. Two states 1.8 times apart, the slow one in 3 rounds of 8: the mean holds both
 * at their shares, where the median is the fast one's; a stall of 100 ms in one round is left
 * out, and a shorter interruption (up to 20 ms over the median) is kept. The values untouched. */
static void test_mean_less_stalls(void) {
    double v[8] = {0.0065, 0.0117, 0.0064, 0.0066, 0.0118, 0.0063, 0.0119, 0.0065};
    double mean = (0.0065 + 0.0117 + 0.0064 + 0.0066 + 0.0118 + 0.0063 + 0.0119 + 0.0065) / 8;
    CU_ASSERT_DOUBLE_EQUAL(exec_median(v, 8), 0.5 * (0.0065 + 0.0066), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(exec_mean_less_stalls(v, 8), mean, 1e-15);
    double stalled[9];
    memcpy(stalled, v, sizeof v);
    stalled[8] = 0.0065 + 0.1; /* a stall: left out */
    CU_ASSERT_DOUBLE_EQUAL(exec_mean_less_stalls(stalled, 9), mean, 1e-15);
    stalled[8] = 0.0065 + 0.019; /* an interruption within EXEC_GAP_MAX_S of the median: kept */
    CU_ASSERT_DOUBLE_EQUAL(exec_mean_less_stalls(stalled, 9), (8 * mean + stalled[8]) / 9, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(stalled[8], 0.0065 + 0.019, 0);
    CU_ASSERT(isnan(exec_mean_less_stalls(NULL, 0)));
}

/* Orders doubles ascending (the reference median's sort). */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The one median rule: the middle pass of an odd count, the middle two (shorter first) of an
 * even one, ties in pass order; exec_median is their value (the mean of the two) and leaves
 * the caller's array as it was. */
static void test_median_rule(void) {
    median_case((const double[]){3, 1, 2}, 3, 2, 2, 2);
    median_case((const double[]){9}, 1, 0, 0, 9);
    median_case((const double[]){4, 1, 3, 2}, 4, 3, 2, 2.5);
    median_case((const double[]){2, 1, 1, 2}, 4, 2, 0, 1.5); /* ties: pass order */
    median_case((const double[]){5, 5, 5, 5}, 4, 1, 2, 5);
    median_case((const double[]){7, 3, 7, 3, 7}, 5, 0, 0, 7);
    median_case((const double[]){0.1, 0.3}, 2, 0, 1, 0.5 * (0.1 + 0.3));
    int mid[2] = {-1, -1};
    CU_ASSERT_EQUAL(exec_median_passes(NULL, 0, mid), PL_OK);
    CU_ASSERT(mid[0] == 0 && mid[1] == 0);
    CU_ASSERT(isnan(exec_median(NULL, 0)));
    /* many values with ties, odd and even counts: the median of a sorted copy, v untouched */
    enum { N = 1001 };
    double *v = malloc(N * sizeof *v), *orig = malloc(N * sizeof *v), *sorted = malloc(N * sizeof *v);
    CU_ASSERT_FATAL(v && orig && sorted);
    for (int n = N - 1; n <= N; n++) {
        uint32_t x = 12345;
        for (int i = 0; i < n; i++) v[i] = (double)((x = x * 1103515245u + 12345u) >> 24); /* 0..255 */
        memcpy(orig, v, (size_t)n * sizeof *v);
        memcpy(sorted, v, (size_t)n * sizeof *v);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
        double want = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
        CU_ASSERT_EQUAL(exec_median(v, (size_t)n), want);
        CU_ASSERT_EQUAL(exec_median_passes(v, n, mid), PL_OK);
        CU_ASSERT_EQUAL(exec_median_at(v, mid), want);
        CU_ASSERT(v[mid[0]] < v[mid[1]] || mid[0] <= mid[1]); /* equal times: pass order */
        CU_ASSERT_EQUAL(memcmp(v, orig, (size_t)n * sizeof *v), 0);
    }
    free(v);
    free(orig);
    free(sorted);
}

void exec_test_rank_register(void) {
    static const pl_test_case cases[] = {
        {"exec_run_rank + exec_assemble = exec_run", test_run_rank_equals_run},
        {"a rank's setup failure stops the others", test_run_rank_setup_failure},
        {"an error names its rank by its field", test_err_rank},
        {"per-rank figures come from the median pass", test_rank_figures_of_median_pass},
        {"the measured Zero Bubble rate", test_zb_bubble_rate_measured},
        {"the ranks' drift over the records", test_drift_over_records},
        {"the median rule: odd, even, ties, the caller's array untouched", test_median_rule},
        {"the profile's STEP mean: the rounds less the stalls", test_mean_less_stalls},
        {NULL, NULL}};
    pl_test_suite("exec per-rank entry", cases);
}
