/* test_compare.c: `pipelab compare --actions` on a traced `pipelab run`: the SEND/RECV row is the
 * rank's span outside its compute and all-reduces on both timelines, and the per-class summary
 * averages the rows it printed; the run's predicted peak memory is its measured one; the
 * prediction with the measured terms is stored beside it under TAG-terms (the run's own has
 * none of them, unless --terms). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"

/* The classes of one rank's rows of the breakdown (ms per pass), predicted and measured. */
enum { R_F, R_B, R_I, R_W, R_OVERLAP, R_STEP, R_COMM, R_REDUCE, R_COMPUTE, R_SPAN, R_N };
static const char *const row_name[R_N] = {"F",    "B",         "I",           "W",       "OVERLAP",
                                          "STEP", "SEND/RECV", "REDUCE_GRAD", "compute", "span"};

/* Reads the rows of rank r of the k-th pair's breakdown (0 = the first) into pred[], meas[] (0
 * for a class without a row) and, when err is not NULL, their ERR column in percent into err[]
 * (NaN for a class without a row or an ERR). Returns the number of rows read. */
static int rank_rows(const char *out, int k, int r, double *pred, double *meas, double *err) {
    memset(pred, 0, R_N * sizeof *pred);
    memset(meas, 0, R_N * sizeof *meas);
    for (int c = 0; err && c < R_N; c++) err[c] = NAN;
    const char *p = out;
    for (int i = 0; i <= k && p; i++) p = strstr(i ? p + 1 : p, "RANK  ACTIONS");
    int n = 0;
    for (const char *nl = p ? strchr(p, '\n') : NULL; nl; nl = strchr(nl + 1, '\n')) {
        const char *line = nl + 1;
        if (*line == '\n' || *line == '\0') break; /* the blank line that ends the pair */
        int rank;
        char name[32];
        double a, b, e = NAN;
        int got = sscanf(line, "%d %31s %lf %lf %lf%%", &rank, name, &a, &b, &e);
        if (got < 4 || rank != r) continue;
        for (int c = 0; c < R_N; c++)
            if (strcmp(name, row_name[c]) == 0) {
                pred[c] = a;
                meas[c] = b;
                if (err) err[c] = got == 5 ? e : NAN;
                n++;
            }
    }
    return n;
}

/* Runs a traced run of schedule `kind` on 2 ranks (a small dense model, 4 microbatches) under each
 * recompute policy of the space-separated list `policies` into DIR/TAG.db with tag TAG, then
 * `compare --actions` over them. Returns its output (malloc'd), or NULL when a run or the
 * comparison failed. */
static char *traced_actions(const char *dir, const char *kind, const char *policies, const char *tag) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "for r in %s; do '%s' run --kind %s --ranks 2 --microbatches 4 --recompute $r "
             "--model mlp:width=32,depth=4,microbatch=4 --timed 3 --profile-timing between --profile-reps 4 --trace "
             "--oversubscribe --tag %s --db %s/%s.db --format csv >/dev/null 2>%s/%s.err || { cat %s/%s.err; exit 1; }; done "
             "&& '%s' compare --db %s/%s.db --tag %s --actions 2>&1",
             policies, PIPELAB_BIN, kind, tag, dir, tag, dir, tag, dir, tag, PIPELAB_BIN, dir, tag, tag);
    char *out = NULL;
    if (pl_test_run(cmd, &out) != 0) {
        fprintf(stderr, "traced_actions(%s, %s): failed:\n%s\n", kind, policies, out ? out : "(no output)");
        free(out);
        return NULL;
    }
    return out;
}

/* A traced 1F1B run on 2 ranks (a small dense model): every rank's SEND/RECV row is its span
 * minus compute and all-reduces, predicted and measured (to the printed 1e-4 ms); the summary
 * lists F, B and STEP over both ranks; peak memory is predicted exactly. */
static void test_actions_comm_rows(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char cmd[2048];
    char *out = traced_actions(dir, "1f1b", "none", "cmp");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    for (int r = 0; r < 2; r++) {
        double pred[R_N], meas[R_N];
        CU_ASSERT(rank_rows(out, 0, r, pred, meas, NULL) >= 5);
        const double *v[2] = {pred, meas};
        for (int k = 0; k < 2; k++) {
            double w = v[k][R_SPAN] - v[k][R_COMPUTE] - v[k][R_REDUCE];
            CU_ASSERT(v[k][R_SPAN] > 0 && v[k][R_COMPUTE] > 0);
            CU_ASSERT_DOUBLE_EQUAL(v[k][R_COMM], w > 0 ? w : 0, 3e-4);
        }
    }
    const char *sum = strstr(out, "per class over all pairs and ranks");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
    int n;
    CU_ASSERT(strstr(sum, "\nF ") && sscanf(strstr(sum, "\nF ") + 1, "F %d", &n) == 1 && n == 2);
    CU_ASSERT(strstr(sum, "\nSTEP ") != NULL);
    CU_ASSERT(strstr(sum, "\nREDUCE_GRAD") == NULL); /* a no-op without replicas: left out */
    /* and its rank rows, where the executor's bookkeeping shows, carry no relative error */
    for (const char *row = strstr(out, " REDUCE_GRAD "); row && row < sum; row = strstr(row + 1, " REDUCE_GRAD ")) {
        double a, b;
        char err[32];
        CU_ASSERT(sscanf(row, " REDUCE_GRAD %lf %lf %31s", &a, &b, err) == 3 && a == 0 && strcmp(err, "-") == 0);
    }
    free(out);
    /* the predicted peak memory is the measured one (the executor's walk) */
    snprintf(cmd, sizeof cmd, "'%s' compare --db %s/cmp.db --format csv 2>&1", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    const char *row = out ? strchr(out, '\n') : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    /* the columns by name: the header's fields counted up to each */
    int col_pred = -1, col_meas = -1, col = 0;
    for (const char *h = out; h < row; col++) {
        size_t len = strcspn(h, ",\n");
        if (len == strlen("peak_mem_pred_bytes") && strncmp(h, "peak_mem_pred_bytes", len) == 0) col_pred = col;
        if (len == strlen("peak_mem_meas_bytes") && strncmp(h, "peak_mem_meas_bytes", len) == 0) col_meas = col;
        h += len + (h[len] == ',');
        if (h[-1] != ',') break;
    }
    CU_ASSERT_FATAL(col_pred >= 0 && col_meas >= 0);
    double pred = -1, meas = -2;
    col = 0;
    for (const char *f = row + 1; *f && *f != '\n'; col++) {
        if (col == col_pred) pred = atof(f);
        if (col == col_meas) meas = atof(f);
        f += strcspn(f, ",\n");
        if (*f == ',') f++;
    }
    CU_ASSERT(pred > 0 && meas > 0);
    CU_ASSERT_EQUAL(pred, meas);
    free(out);
    /* the prediction with the measured terms, stored beside under cmp-terms */
    snprintf(cmd, sizeof cmd, "'%s' compare --db %s/cmp.db --measured-tag cmp --sim-tag cmp-terms --actions 2>&1", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT(out && strstr(out, "\n1 pair;") != NULL && strstr(out, "per class over all pairs") != NULL);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* A traced dualpipev run, whose lists overlap forwards with backwards in one action: each rank's
 * predicted compute row is the sum of its compute classes, OVERLAP among them (a timeline's
 * rows add up; the measured ones are each a median), and its SEND/RECV the span outside them. */
static void test_actions_overlap(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *out = traced_actions(dir, "dualpipev", "none", "ovl");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    int overlaps = 0;
    for (int r = 0; r < 2; r++) {
        double pred[R_N], meas[R_N];
        CU_ASSERT(rank_rows(out, 0, r, pred, meas, NULL) >= 5);
        double sum = 0;
        for (int c = R_F; c <= R_STEP; c++) sum += pred[c];
        CU_ASSERT_DOUBLE_EQUAL(pred[R_COMPUTE], sum, 4e-4); /* six rows printed to 1e-4 ms */
        overlaps += pred[R_OVERLAP] > 0 && meas[R_OVERLAP] > 0;
        for (int k = 0; k < 2; k++) {
            const double *v = k ? meas : pred;
            double w = v[R_SPAN] - v[R_COMPUTE] - v[R_REDUCE];
            CU_ASSERT_DOUBLE_EQUAL(v[R_COMM], w > 0 ? w : 0, 3e-4);
        }
    }
    CU_ASSERT(overlaps >= 1);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* Returns the compute cell's signed error (percent) of one row of the per-model table: its policy
 * and pairs, then per class "-" or a signed error and its bracketed MAPE, compute the sixth; NaN
 * when the row does not read so. */
static double model_row_compute(const char *row) {
    char line[1024];
    size_t n = strcspn(row, "\n");
    if (n >= sizeof line) return NAN;
    memcpy(line, row, n);
    line[n] = '\0';
    char *save = NULL, *tok = strtok_r(line, " ", &save);
    for (int i = 0; i < 2 && tok; i++) tok = strtok_r(NULL, " ", &save); /* policy, pairs */
    double v = NAN;
    for (int k = 0; k < 6 && tok; k++) {
        v = strcmp(tok, "-") == 0 ? NAN : atof(tok);
        if (strcmp(tok, "-") != 0) tok = strtok_r(NULL, " ", &save); /* its MAPE */
        tok = strtok_r(NULL, " ", &save);
    }
    return v;
}

/* Two traced runs of one model, without and with full recomputation: the per-model table has a
 * row for each, with one pair, and its F cell is the mean of that pair's two ranks' F errors,
 * its MAPE the mean of their magnitudes (to the printed hundredths). */
static void test_actions_per_model(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *out = traced_actions(dir, "1f1b", "none full", "cmm");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    const char *tab = strstr(out, "per model and recompute policy");
    CU_ASSERT_PTR_NOT_NULL_FATAL(tab);
    const char *policy[2] = {"none", "full"};
    for (int k = 0; k < 2; k++) {
        double pred[R_N], meas[R_N], e0[R_N], e1[R_N];
        CU_ASSERT_FATAL(rank_rows(out, k, 0, pred, meas, e0) >= 3 && rank_rows(out, k, 1, pred, meas, e1) >= 3);
        const double err[2] = {e0[R_F], e1[R_F]};
        CU_ASSERT(isfinite(err[0]) && isfinite(err[1]));
        char want[16];
        snprintf(want, sizeof want, "\n%s ", policy[k]);
        const char *row = strstr(tab, want);
        CU_ASSERT_PTR_NOT_NULL_FATAL(row);
        char rc[16];
        int pairs;
        double mean, mape;
        CU_ASSERT_EQUAL_FATAL(sscanf(row + 1, "%15s %d %lf%% (%lf%%)", rc, &pairs, &mean, &mape), 4);
        CU_ASSERT_EQUAL(pairs, 1);
        CU_ASSERT_DOUBLE_EQUAL(mean, 0.5 * (err[0] + err[1]), 0.011);
        CU_ASSERT_DOUBLE_EQUAL(mape, 0.5 * (fabs(err[0]) + fabs(err[1])), 0.011);
        CU_ASSERT(strstr(row + 1, "mlp:width=32,depth=4,microbatch=4") != NULL);
    }
    /* one row per model and policy, the most under-predicted compute first */
    const char *nl = strchr(strchr(tab, '\n') + 1, '\n'); /* the end of the header line */
    int nrows = 0;
    double prev = -INFINITY;
    for (; nl && nl[1] && nl[1] != '\n'; nl = strchr(nl + 1, '\n')) {
        double comp = model_row_compute(nl + 1);
        CU_ASSERT(isfinite(comp) && comp >= prev);
        prev = comp;
        nrows++;
    }
    CU_ASSERT_EQUAL(nrows, 2);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* Counts the fields of each record of CSV text s (RFC 4180: a quoted field may hold commas,
 * doubled quotes and line breaks) into counts[0 .. max); returns the records. */
static int csv_records(const char *s, int *counts, int max) {
    int rec = 0, fields = 1, quoted = 0;
    for (const char *c = s; *c; c++) {
        if (quoted) {
            if (*c == '"' && c[1] == '"') c++;
            else if (*c == '"') quoted = 0;
        } else if (*c == '"') quoted = 1;
        else if (*c == ',') fields++;
        else if (*c == '\n') {
            if (rec < max) counts[rec] = fields;
            rec++;
            fields = 1;
        }
    }
    return rec;
}

/* A tag holding a comma, a quote and a line break: `db list --format csv` and `compare --format
 * csv` keep every text field whole (the uids of a run's predictions hold the tag), so that each
 * record has the header's fields. */
static void test_csv_odd_tag(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "'%s' run --kind 1f1b --ranks 2 --microbatches 4 --width 16 --microbatch-size 2 --timed 2 --no-host-probe "
             "--oversubscribe --db '%s/c.db' --tag \"$(printf 'g,%%sv%%s\\nx' '\"' '\"')\" >/dev/null 2>&1",
             PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    /* compare pairs the run with the prediction stored beside it without the sharing term, whose
     * uid holds the tag */
    const char *list[] = {"db list --limit 0",
                          "compare --measured-tag \"$(printf 'g,%sv%s\\nx' '\"' '\"')\" --sim-tag "
                          "\"$(printf 'g,%sv%s\\nx-noshare' '\"' '\"')\""};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s --format csv --db '%s/c.db'", PIPELAB_BIN, list[i], dir);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
        int counts[64], n = out ? csv_records(out, counts, 64) : 0;
        CU_ASSERT(n >= 2 && n <= 64 && counts[0] >= 16);
        for (int r = 1; r < n && r < 64; r++) CU_ASSERT_EQUAL(counts[r], counts[0]);
        CU_ASSERT(out && strstr(out, "g,\"\"v\"\"\nx") != NULL); /* the tag (in the uids too), quoted */
        free(out);
        out = NULL;
    }
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

void test_compare_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"compare --actions: SEND/RECV is the span outside compute, a summary per class", test_actions_comm_rows},
        {"compare --actions: dualpipev's overlapped actions are compute of their own class", test_actions_overlap},
        {"compare --actions: per model and recompute policy, each class's mean error over its pairs", test_actions_per_model},
        {"db list and compare as CSV: a tag's comma, quote and line break stay in one field", test_csv_odd_tag},
        {NULL, NULL},
    };
    pl_test_suite("cli compare", tcases);
}
