/* test_exec_run.c: `pipelab run` and `pipelab profile` end to end (one measured and one simulated
 * run with one configuration in the store; a failing run stores nothing; the profile CSV loads in
 * the cost model), the executor's memory against the cost model's, and the MPI transport
 * (threads and MPI give identical weights; a failing or killed rank ends the job quickly). */
#include <dirent.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cost.h"
#include "exec.h"
#include "exec_drive.h"
#include "exec_test.h"
#include "pl_test.h"
#include "pl_sched.h"
#include "store.h"

void exec_test_run_register(void);

/* exec_test.h. */
int sh(const char *cmd, char **out) {
    char *o = NULL;
    /* the caller's pointer itself when it wants the output: passing a local's address whose
     * value is then copied out reads to GCC's -O3 as a pointer to that local escaping */
    if (out) *out = NULL; /* as before when the command could not start */
    int rc = pl_test_run(cmd, out ? out : &o);
    free(o);
    return rc;
}

/* Returns the number of runs in the database at path (0 when it does not exist). */
static size_t count_runs(const char *path) {
    if (!pl_test_exists(path)) return 0;
    store *db = NULL;
    pl_err e;
    if (store_open(path, 1, &db, &e) != PL_OK) return (size_t)-1;
    store_run *runs = NULL;
    size_t n = 0;
    if (store_list_runs(db, NULL, 0, &runs, &n, &e) != PL_OK) n = (size_t)-1;
    store_runs_free(runs, n == (size_t)-1 ? 0 : n);
    store_close(db);
    return n;
}

/* Opens the database at path read-only and lists its runs of tag, which must be exactly one
 * measured and one simulated run: *meas and *sim point into *runs (free with store_runs_free). */
static void open_pair(const char *path, const char *tag, store **s, store_run **runs, const store_run **meas,
                      const store_run **sim) {
    pl_err e;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 1, s, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(store_list_runs(*s, tag, 0, runs, &n, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    *meas = strcmp((*runs)[0].kind, "measured") == 0 ? &(*runs)[0] : &(*runs)[1];
    *sim = *meas == &(*runs)[0] ? &(*runs)[1] : &(*runs)[0];
    CU_ASSERT_STRING_EQUAL((*meas)->kind, "measured");
    CU_ASSERT_STRING_EQUAL((*sim)->kind, "simulated");
}

/* Copies field `name` of CSV line row (header names the fields; no quoted fields) into out[n].
 * Returns 0, or -1 when the header has no such field or the row too few. */
static int csv_field(const char *header, const char *row, const char *name, char *out, size_t n) {
    int col = 0;
    size_t len = strlen(name);
    const char *h = header;
    while (!(strncmp(h, name, len) == 0 && (h[len] == ',' || h[len] == 0 || h[len] == '\n'))) {
        h = strchr(h, ',');
        if (!h) return -1;
        h++;
        col++;
    }
    const char *f = row;
    for (int k = 0; k < col; k++) {
        f = strchr(f, ',');
        if (!f) return -1;
        f++;
    }
    size_t w = strcspn(f, ",\n");
    if (w >= n) return -1;
    memcpy(out, f, w);
    out[w] = 0;
    return 0;
}

/* Returns a copy of the params_json of the one run of tag in the database at path (NULL, through
 * CUnit, when there is not exactly one), and its repetitions in *reps when reps is not NULL. */
static char *one_run_params(const char *path, const char *tag, int *reps) {
    store *s = NULL;
    pl_err e;
    store_run *runs = NULL;
    size_t n = 0;
    char *pj = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 1, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_list_runs(s, tag, 0, &runs, &n, &e), PL_OK);
    CU_ASSERT_EQUAL(n, 1);
    if (n == 1) {
        pj = strdup(runs[0].params_json ? runs[0].params_json : "");
        if (reps) *reps = runs[0].repetitions;
    }
    store_runs_free(runs, n);
    store_close(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pj);
    return pj;
}

/* `pipelab run` times the host probe before the run (CPU: threads, and MPI processes when mpirun
 * is there): the CSV's two columns and the stored params carry the same times, on both ranks'
 * rows; --no-host-probe leaves them out. */
static void test_run_host_probe(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "probe.db");
    char cmd[2048];
    const char *launch[2] = {"", NULL}, *extra[2] = {"", " --transport mpi"};
#ifdef PIPELAB_MPIEXEC
    if (have_mpirun()) launch[1] = MPIENV "timeout 60 " MPIRUN " ";
#endif
    for (int t = 0; t < 2 && launch[t]; t++)
    for (int off = 0; off <= 1; off++) {
        snprintf(cmd, sizeof cmd, "%s%s run --kind gpipe --ranks 2 --microbatches 2 " SMALL " --no-predict --format csv --tag p%d%d --db %s%s%s",
                 launch[t], PIPELAB_BIN, t, off, db, off ? " --no-host-probe" : "", extra[t]);
        char *out = NULL;
        int rc = sh(cmd, &out);
        if (rc != 0) fprintf(stderr, "%s\n", out);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        /* the two columns in the header and in each rank's row: lines 0, 1, 2 */
        char *line[3] = {NULL, NULL, NULL}, *save = NULL;
        for (int k = 0; k < 3; k++) line[k] = strtok_r(k ? NULL : out, "\n", &save);
        CU_ASSERT_FATAL(line[0] && line[1] && line[2]);
        CU_ASSERT(strstr(line[0], ",host_probe_s,host_probe_alone_s,") != NULL);
        double probe[2][2] = {{NAN, NAN}, {NAN, NAN}};
        for (int q = 0; q < 2; q++) {
            char c1[64], c2[64];
            CU_ASSERT_FATAL(csv_field(line[0], line[q + 1], "host_probe_s", c1, sizeof c1) == 0);
            CU_ASSERT_FATAL(csv_field(line[0], line[q + 1], "host_probe_alone_s", c2, sizeof c2) == 0);
            if (off) {
                CU_ASSERT(c1[0] == 0 && c2[0] == 0);
            } else {
                probe[q][0] = strtod(c1, NULL);
                probe[q][1] = strtod(c2, NULL);
            }
        }
        free(out);
        char tag[8];
        snprintf(tag, sizeof tag, "p%d%d", t, off);
        char *pj = one_run_params(db, tag, NULL);
        if (off) {
            CU_ASSERT(strstr(pj, "host_probe") == NULL);
        } else {
            CU_ASSERT(strstr(pj, "\"host_probe\":{\"workers\":2,") != NULL);
            double f = pl_test_json_number(pj, "fwd_s"), a = pl_test_json_number(pj, "alone_fwd_s");
            CU_ASSERT(f > 0 && a > 0);
            for (int q = 0; q < 2; q++) CU_ASSERT(probe[q][0] == f && probe[q][1] == a);
        }
        free(pj);
    }
    free(db);
    free(dir);
}

/* `pipelab run --steady`: a target every run meets times the least passes (--timed), one none
 * meets the most (--timed-max; passes that tie to the clock's resolution meet any), threads and
 * MPI processes alike; the CSV's timed_passes and steadiness columns, the table's line
 * and the stored params ("timed_passes", "steady") say so, and the steadiness is the standard
 * error of the mean pass over the median (iteration_stddev_s over the square root of the passes,
 * over iteration_time_s, where the median pass is the middle one of an odd count); flags that do
 * not go together are usage errors. */
/* One run of test_run_steady's: `launch` before the program (an MPI launcher, or ""), `extra`
 * after its flags, target `target` percent between 3 and 7 timed passes; checks the passes timed
 * (`expect`, or more than the least when they tied to the clock's resolution: `may_tie`), the
 * steadiness against the CSV's spread, and the stored params under tag `tag` in db. */
static void steady_case(const char *launch, const char *extra, const char *target, int expect, int may_tie, const char *tag,
                        const char *db) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s%s run --kind gpipe --ranks 2 --microbatches 2 " SMALL " --timed 3 --steady %s --timed-max 7 "
             "--no-predict --format csv --tag %s --db %s %s", launch, PIPELAB_BIN, target, tag, db, extra);
    char *out = NULL;
    int rc = sh(cmd, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char *save = NULL, *head = strtok_r(out, "\n", &save), *row = strtok_r(NULL, "\n", &save);
    CU_ASSERT_FATAL(head && row);
    char f[64];
    CU_ASSERT_FATAL(csv_field(head, row, "timed_passes", f, sizeof f) == 0);
    int T = atoi(f);
    CU_ASSERT_FATAL(csv_field(head, row, "steadiness", f, sizeof f) == 0);
    double sd = strtod(f, NULL), it, dev;
    /* the most passes, unless the passes timed so far tied to the clock's resolution (under
     * load two short passes did): steady at once */
    CU_ASSERT(T == expect || (may_tie && sd <= 1e-8 && T >= 3));
    CU_ASSERT_FATAL(csv_field(head, row, "iteration_time_s", f, sizeof f) == 0);
    it = strtod(f, NULL);
    CU_ASSERT_FATAL(csv_field(head, row, "iteration_stddev_s", f, sizeof f) == 0);
    dev = strtod(f, NULL);
    CU_ASSERT(fabs(sd - dev / sqrt(T) / it) <= 1e-4 * sd + 1e-12);
    free(out);
    int reps = 0;
    char *pj = one_run_params(db, tag, &reps);
    CU_ASSERT_EQUAL((int)pl_test_json_number(pj, "timed_passes"), T);
    CU_ASSERT_EQUAL((int)pl_test_json_number(pj, "timed_least"), 3);
    CU_ASSERT_EQUAL((int)pl_test_json_number(pj, "timed_most"), 7);
    CU_ASSERT(fabs(pl_test_json_number(pj, "steadiness") - sd) <= 1e-5 * sd + 1e-12);
    CU_ASSERT_EQUAL(reps, T);
    free(pj);
}

static void test_run_steady(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "steady.db");
    char cmd[2048];
    const char *targets[] = {"1000000", "0.000001"};
    const int expect[] = {3, 7};
    for (int k = 0; k < 2; k++) {
        char tag[8];
        snprintf(tag, sizeof tag, "s%d", k);
        steady_case("", "", targets[k], expect[k], k == 1, tag, db);
    }
#ifdef PIPELAB_MPIEXEC
    /* MPI processes decide alike too: each pass's times combined over the ranks (allmax) */
    if (have_mpirun())
        for (int k = 0; k < 2; k++) {
            char tag[8];
            snprintf(tag, sizeof tag, "m%d", k);
            steady_case(MPIENV "timeout 60 " MPIRUN " ", "--transport mpi", targets[k], expect[k], k == 1, tag, db);
        }
#endif
    /* the table says whether the run was steady */
    snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 2 " SMALL " --timed 2 --steady 0.000001 --timed-max 3 --no-predict --no-db",
             PIPELAB_BIN);
    char *out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 0);
    /* (or steady at once, at 0.00%, when the two passes tied to the clock's resolution) */
    CU_ASSERT(out && (strstr(out, "--steady 1e-06%: not steady after 3 timed passes (least 2, most 3)") != NULL ||
                      (strstr(out, "steadiness           0.00% ") != NULL &&
                       strstr(out, "--steady 1e-06%: steady after 2 timed passes (least 2, most 3)") != NULL)));
    free(out);
    /* no "steady" key without --steady */
    snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 2 " SMALL " --timed 2 --no-predict --tag s2 --db %s",
             PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(sh(cmd, NULL), 0);
    char *pj = one_run_params(db, "s2", NULL);
    CU_ASSERT(strstr(pj, "\"steady\"") == NULL);
    free(pj);
    /* usage errors: --timed-max alone, most under least, MPI + CUDA, no target */
    const char *bad[] = {"--timed-max 5", "--timed 4 --steady 1 --timed-max 3", "--steady 1 --backend cuda --transport mpi", "--steady 0"};
    const char *why[] = {"give both", "--timed-max 3 is under --timed 4", "--steady is not for MPI processes on GPUs", "--steady"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 2 " SMALL " --no-predict --no-db %s 2>&1", PIPELAB_BIN, bad[k]);
        out = NULL;
        CU_ASSERT_EQUAL(sh(cmd, &out), 2);
        CU_ASSERT(out && strstr(out, why[k]) != NULL);
        free(out);
    }
    free(db);
    free(dir);
}

/* `pipelab run` writes exactly one measured and one simulated run with the same configuration,
 * with per-rank metrics, and (with --trace) one op row per executed action of the timed passes. */
static void test_run_stores_pair(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "run.db");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 " SMALL " --trace --tag pair --db %s",
             PIPELAB_BIN, db);
    char *out = NULL;
    int rc = sh(cmd, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT(strstr(out, "iteration_time_s") != NULL && strstr(out, "predicted") != NULL);
    free(out);
    store *s = NULL;
    pl_err e;
    store_run *runs = NULL;
    const store_run *meas = NULL, *sim = NULL;
    size_t n = 2;
    open_pair(db, "pair", &s, &runs, &meas, &sim);
    CU_ASSERT_STRING_EQUAL(meas->schedule, "1f1b");
    CU_ASSERT_STRING_EQUAL(sim->schedule, meas->schedule);
    CU_ASSERT_EQUAL(sim->ranks, 2);
    CU_ASSERT_EQUAL(meas->ranks, 2);
    CU_ASSERT_EQUAL(sim->stages, meas->stages);
    CU_ASSERT_EQUAL(sim->microbatches, 4);
    CU_ASSERT_EQUAL(meas->microbatches, 4);
    CU_ASSERT_EQUAL(sim->chunks, meas->chunks);
    CU_ASSERT_EQUAL(sim->iterations, meas->iterations);
    CU_ASSERT_STRING_EQUAL(sim->weights_policy, meas->weights_policy);
    CU_ASSERT_STRING_EQUAL(sim->recompute_policy, meas->recompute_policy);
    CU_ASSERT_STRING_EQUAL(sim->params_json, meas->params_json);
    CU_ASSERT(strstr(meas->params_json, "\"spec\":\"mlp:width=32,depth=4,microbatch=4,ffn_mult=4\"") != NULL);
    CU_ASSERT(strstr(meas->params_json, "\"interruptions\"") == NULL); /* none priced without --interruptions */
    CU_ASSERT(store_same_config(sim, meas, 0));
    /* the prediction names the run it was made for */
    CU_ASSERT(sim->uid && meas->uid && strncmp(sim->uid, STORE_PREDICTION_PREFIX, strlen(STORE_PREDICTION_PREFIX)) == 0 &&
              strcmp(sim->uid + strlen(STORE_PREDICTION_PREFIX), meas->uid) == 0);
    CU_ASSERT(meas->iteration_time_s > 0 && sim->iteration_time_s > 0);
    CU_ASSERT(meas->throughput_samples_s > 0);
    store_rank_metric *rm = NULL;
    int nr = 0;
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, meas->id, &rm, &nr, &e), PL_OK);
    CU_ASSERT_EQUAL(nr, 2);
    for (int q = 0; q < nr; q++) CU_ASSERT(rm[q].busy_s > 0 && rm[q].peak_mem_bytes > 0);
    free(rm);
    /* ops: every action of both ranks in each of the 2 timed passes */
    sched_gen_opts go = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate("1f1b", &go, &e);
    sched *l = g ? sched_lower(g, &e) : NULL;
    int64_t nops = -1;
    CU_ASSERT_EQUAL(store_count_ops(s, meas->id, &nops, &e), PL_OK);
    if (l) CU_ASSERT_EQUAL(nops, 2 * (int64_t)sched_total_actions(l));
    sched_free(g);
    sched_free(l);
    store_runs_free(runs, n);
    store_close(s);
    free(db);
    free(dir);
}

/* Runs `pipelab run SCHED SMALL --tag TAG --db DB --save-profile CSV --no-jitter-term
 * --no-sharing-term` (its profile between the passes; each action at its mean time and at its
 * profile time alone or beside the other rank, so that the predictions are closed forms of the
 * profile), which must exit 0; returns its output (free it), printed when it failed. */
static char *run_saving_profile(const char *sched, const char *tag, const char *db, const char *csv) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run %s " SMALL " --tag %s --db %s --save-profile %s --no-jitter-term --no-sharing-term", PIPELAB_BIN, sched, tag,
             db, csv);
    char *out = NULL;
    int rc = sh(cmd, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return out;
}

/* Runs as run_saving_profile and returns the saved profile's text (free it) and its length in
 * *len. */
static char *run_profile_text(const char *sched, const char *tag, const char *db, const char *csv, size_t *len) {
    free(run_saving_profile(sched, tag, db, csv));
    char *text = NULL;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(pl_read_file(csv, 1 << 20, &text, len, &e), PL_OK);
    return text;
}

/* Checks that database s holds want[i] runs under tags[i], for each of the n tags. */
static void tag_counts(store *s, const char *const *tags, const size_t *want, size_t n) {
    for (size_t i = 0; i < n; i++) {
        store_run *runs = NULL;
        size_t got = 0;
        pl_err e;
        CU_ASSERT_EQUAL(store_list_runs(s, tags[i], 0, &runs, &got, &e), PL_OK);
        CU_ASSERT_EQUAL(got, want[i]);
        store_runs_free(runs, got);
    }
}

/* `pipelab run` profiles between the passes by default: the saved profile's block rows hold the
 * times of the worker of the rank that holds the block (its "# pipelab-exec worker=" line; the
 * model's first block its I0), the prediction, without the pass-length term by default, has
 * each rank busy exactly what its own rows and STEP give (flush: m x its rows' F + I + W +
 * blocks x STEP), the one stored with it (TAG-passlen) that times the ranks' mean factor at the
 * length of that pass (exec_window_factor_mean of the profile's windows lines: 1 while the
 * samples are too short for a window, as at full speed, other values under the sanitizers), the
 * one stored as TAG-rest each kind times its rank's ratio of a profile round's later microbatches
 * to its time (exec_profile_worker_first), the one stored as TAG-reuse as it is (no backward follows its
 * own forward in gpipe), the one stored as TAG-first the first F and B at the first
 * ratios and the others at the rest ratios, and the run
 * records where its profile came from. Wrong combinations of
 * the profile flags are usage errors. */
static void test_run_profile_between(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "between.db");
    char *csv = pl_test_path(dir, "between.csv");
    char cmd[2048];
    char *out = run_saving_profile("--kind gpipe --ranks 2 --microbatches 4", "between", db, csv);
    CU_ASSERT(strstr(out, "between the passes") != NULL);
    free(out);
    /* each worker's line, then the block rows */
    double wt[2][5] = {{0}}, row[4][3] = {{0}}, win[2 * EXEC_WINDOWS];
    int seen = 0, rows = 0;
    FILE *f = fopen(csv, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        int w, core, k;
        double a, b, c, d, i0;
        char name[64];
        if (sscanf(line, "# pipelab-exec worker=%d core=%d fwd_s=%lf bwd_in_s=%lf bwd_w_s=%lf step_s=%lf bwd_in0_s=%lf", &w,
                   &core, &a, &b, &c, &d, &i0) == 7 && w >= 0 && w < 2) {
            wt[w][0] = a, wt[w][1] = b, wt[w][2] = c, wt[w][3] = d, wt[w][4] = i0;
            seen |= 1 << w;
        } else if (sscanf(line, "%d,%63[^,],%lf,%lf,%lf", &k, name, &a, &b, &c) == 5 && k >= 0 && k < 4) {
            row[k][0] = a, row[k][1] = b, row[k][2] = c;
            rows++;
        }
    }
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(seen, 3);
    CU_ASSERT_EQUAL_FATAL(rows, 4);
    char *text = NULL;
    size_t len = 0;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(pl_read_file(csv, 1 << 20, &text, &len, &e), PL_OK);
    CU_ASSERT_EQUAL(exec_profile_worker_windows(text, len, 2, win, NULL), 0);
    double first[3 * 2], rest[3 * 2], ri[2], rw[2];
    CU_ASSERT_EQUAL(exec_profile_worker_first(text, len, 2, first, rest), 0);
    CU_ASSERT_EQUAL(exec_profile_worker_reuse(text, len, 2, ri, rw), 0);
    free(text);
    /* blocks 0-1: rank 0's worker, 2-3: rank 1's; the model's first block's I is the I0 pass (no
     * input gradient; test_exec's profile test checks that it is faster than a whole I) */
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++) CU_ASSERT_DOUBLE_EQUAL(row[k][j], k == 0 && j == 1 ? wt[0][4] : wt[k / 2][j], 1e-12);
    CU_ASSERT(wt[0][4] > 0);
    store *s = NULL;
    store_run *runs = NULL;
    const store_run *meas = NULL, *sim = NULL;
    size_t n = 2;
    open_pair(db, "between", &s, &runs, &meas, &sim);
    CU_ASSERT(strstr(sim->params_json, "between the passes") != NULL);
    store_run *alt = NULL, *rst = NULL, *one[2] = {NULL, NULL};
    size_t na = 0, nrst = 0, none[2] = {0, 0};
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, "between-passlen", 0, &alt, &na, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(na, 1);
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, "between-rest", 0, &rst, &nrst, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(nrst, 1);
    /* each term alone: the reuse-distance one (TAG-reuse) and the first-touch one (TAG-first) */
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, "between-reuse", 0, &one[0], &none[0], &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(none[0], 1);
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, "between-first", 0, &one[1], &none[1], &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(none[1], 1);
    store_rank_metric *rm = NULL, *ra = NULL, *rr = NULL, *ro[2] = {NULL, NULL};
    int nr = 0, nra = 0, nrr = 0, nro[2] = {0, 0};
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, sim->id, &rm, &nr, &e), PL_OK);
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, alt[0].id, &ra, &nra, &e), PL_OK);
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, rst[0].id, &rr, &nrr, &e), PL_OK);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(store_get_rank_metrics(s, one[k][0].id, &ro[k], &nro[k], &e), PL_OK);
        CU_ASSERT_EQUAL(nro[k], 2);
    }
    CU_ASSERT_EQUAL(nr, 2);
    CU_ASSERT_EQUAL(nra, 2);
    CU_ASSERT_EQUAL(nrr, 2);
    for (int q = 0; q < nr && q < nra && q < nrr && q < nro[0] && q < nro[1] && q < 2; q++) {
        double kind[3];
        for (int c = 0; c < 3; c++) kind[c] = 4 * (row[2 * q][c] + row[2 * q + 1][c]);
        double want = kind[0] + kind[1] + kind[2] + 2 * wt[q][3];
        CU_ASSERT_DOUBLE_EQUAL(rm[q].busy_s, want, 1e-6 * want);
        /* gpipe: one iteration a pass, so the prediction's iteration is its pass */
        double fq = exec_window_factor_mean(win, 2, sim->iteration_time_s);
        CU_ASSERT_DOUBLE_EQUAL(ra[q].busy_s, want * fq, 1e-6 * want * fq);
        /* TAG-rest: each kind times its rank's ratio of a round's later microbatches, the STEP as it is */
        double wr = rest[3 * q] * kind[0] + rest[3 * q + 1] * kind[1] + rest[3 * q + 2] * kind[2] + 2 * wt[q][3];
        CU_ASSERT_DOUBLE_EQUAL(rr[q].busy_s, wr, 1e-6 * wr);
        /* TAG-reuse: gpipe's first B (microbatch 0) follows F of microbatch 3 on every rank, so no
         * backward is at distance 0 and the term leaves the prediction as it is (the ratios read) */
        CU_ASSERT(ri[q] > 0 && rw[q] > 0);
        CU_ASSERT_DOUBLE_EQUAL(ro[0][q].busy_s, want, 1e-6 * want);
        /* TAG-first: the stage's first F and B (microbatch 0) at the first ratio, the other three
         * at the rest ratio */
        double wf = 2 * wt[q][3];
        for (int c = 0; c < 3; c++) wf += (first[3 * q + c] + 3 * rest[3 * q + c]) * kind[c] / 4;
        CU_ASSERT_DOUBLE_EQUAL(ro[1][q].busy_s, wf, 1e-6 * wf);
    }
    free(rm);
    free(ra);
    free(rr);
    for (int k = 0; k < 2; k++) {
        free(ro[k]);
        store_runs_free(one[k], none[k]);
    }
    store_runs_free(alt, na);
    store_runs_free(rst, nrst);
    store_runs_free(runs, n);
    /* --pass-length-term: the prediction with it, the other one without (TAG-nopasslen) */
    snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 4 " SMALL " --tag with --db %s --pass-length-term",
             PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(sh(cmd, NULL), 0);
    /* (no again term: gpipe holds one stage per rank, and its profile times no again samples) */
    static const char *const tags[] = {"with", "with-nopasslen", "with-passlen", "with-rest", "with-reuse", "with-first", "with-noagain",
                                       "with-before", "with-nojitter", "with-jitter"};
    static const size_t want_n[] = {2, 1, 0, 1, 1, 1, 0, 1, 1, 0};
    tag_counts(s, tags, want_n, sizeof tags / sizeof *tags);
    store_close(s);
    /* usage errors: exit 2, nothing run */
    static const char *bad[] = {"--profile-timing later", "--profile-timing between --profile-concurrency 2", "--profile-timing between --no-predict",
                                "--profile-timing between --profile x.csv", "--profile-timing before --profile x.csv",
                                "--save-profile x.csv --no-predict", "--profile-timing between --backend cuda",
                                "--terms --backend cuda", "--pass-length-term --backend cuda"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 4 " SMALL " --no-db %s", PIPELAB_BIN, bad[i]);
        out = NULL;
        CU_ASSERT_EQUAL(sh(cmd, &out), 2);
        CU_ASSERT(out && strstr(out, "profile") != NULL);
        free(out);
    }
    free(db);
    free(csv);
    free(dir);
}

/* Sets busy[2] to each rank's busy time in the one simulated run tagged `tag` of database db. */
static void sim_busy(const char *db, const char *tag, double busy[2]) {
    store *s = NULL;
    store_run *runs = NULL;
    size_t n = 0;
    pl_err e;
    busy[0] = busy[1] = -1;
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, tag, 0, &runs, &n, &e), PL_OK);
    const store_run *sim = NULL;
    int nsim = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(runs[i].kind, "simulated") == 0) sim = &runs[i], nsim++;
    CU_ASSERT_EQUAL(nsim, 1);
    store_rank_metric *rm = NULL;
    int nr = 0;
    if (sim) CU_ASSERT_EQUAL(store_get_rank_metrics(s, sim->id, &rm, &nr, &e), PL_OK);
    CU_ASSERT_EQUAL(nr, 2);
    for (int q = 0; q < nr && q < 2; q++) busy[q] = rm[q].busy_s;
    free(rm);
    store_runs_free(runs, n);
    store_close(s);
}

/* Runs gpipe m 4 on 2 ranks with profile csv under tag, db and flags (--format json); returns
 * its output (free it), NULL when it failed. */
static char *run_json(const char *tag, const char *db, const char *csv, const char *flags) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 4 " SMALL " --tag %s --db %s --profile %s %s --format json",
             PIPELAB_BIN, tag, db, csv, flags);
    char *out = NULL;
    int rc = pl_test_run(cmd, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out ? out : "");
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0) return out;
    free(out);
    return NULL;
}

/* As run_json, and reads how it predicted ("predicted": simulated_runs, jitter_cv, drift_cv,
 * state_rounds); returns the fields read (4 when all). */
static int run_json_prediction(const char *tag, const char *db, const char *csv, const char *flags, int *runs, double *cv,
                               double *dcv, int *rounds) {
    char *out = run_json(tag, db, csv, flags);
    const char *pj = out ? strstr(out, "\"simulated_runs\":") : NULL;
    int got = pj ? sscanf(pj, "\"simulated_runs\":%d,\"jitter_cv\":%lf,\"drift_cv\":%lf,\"state_rounds\":%d", runs, cv, dcv, rounds) : 0;
    free(out);
    return got;
}

/* The jitter and drift terms in the default. A run's saved profile (one round: no drift
 * measured; under --no-jitter-term, so its jitter term alone is stored beside as TAG-jitter and
 * nothing under TAG-drift), with rank_drift set to 0.05 and read back with --profile, once by
 * default and once under --no-jitter-term: the default prediction is exactly the other's
 * TAG-drift (the same seeds), its TAG-nodrift the other's TAG-jitter, and its TAG-nojitter the
 * other's own; with the drift's seeds the ranks are busy otherwise than with the jitter alone.
 * At rank_drift 0 the default is the jitter term alone: nothing under TAG-nodrift or TAG-drift.
 * The JSON output says how each predicted: 31 simulated runs, the jitter's cv and the drift's,
 * or one run and both 0. */
static void test_run_drift(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "drift.db");
    char *csv = pl_test_path(dir, "drift.csv");
    char *csv2 = pl_test_path(dir, "drift2.csv");
    free(run_saving_profile("--kind gpipe --ranks 2 --microbatches 4", "d0", db, csv));
    char cmd[2048];
    static const char *const drifts[] = {"0.05", "0.05", "0"}, *const names[] = {"d1", "d1x", "d2"},
                             *const flags[] = {"", "--no-jitter-term", ""};
    for (int k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "sed 's/rank_drift=[^ ]*$/rank_drift=%s/' %s > %s && grep -q 'rank_drift=%s$' %s", drifts[k],
                 csv, csv2, drifts[k], csv2);
        CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
        /* the JSON says how it predicted: 31 runs with the terms, one without */
        int runs = 0, rounds = -1;
        double cv = -1, dcv = -1;
        CU_ASSERT(run_json_prediction(names[k], db, csv2, flags[k], &runs, &cv, &dcv, &rounds) == 4);
        CU_ASSERT_EQUAL(runs, k == 1 ? 1 : 31); /* CLI_RUN_JITTER_RUNS */
        CU_ASSERT(k == 1 ? cv == 0 : cv > 0);
        CU_ASSERT_DOUBLE_EQUAL(dcv, k == 0 ? 0.05 : 0, 1e-12);
        CU_ASSERT_EQUAL(rounds, 0); /* the saved profile's few rounds: no states term */
    }
    store *s = NULL;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    static const char *const tags[] = {"d0-drift", "d0-jitter", "d1-nojitter", "d1-nodrift", "d1-drift", "d1x-drift",
                                       "d1x-jitter", "d1x-nojitter", "d2-nojitter", "d2-nodrift"};
    static const size_t want_n[] = {0, 1, 1, 1, 0, 1, 1, 0, 1, 0};
    tag_counts(s, tags, want_n, sizeof tags / sizeof *tags);
    store_close(s);
    static const char *const same[][2] = {{"d1", "d1x-drift"}, {"d1-nodrift", "d1x-jitter"}, {"d1-nojitter", "d1x"}};
    for (int k = 0; k < 3; k++) {
        double a[2], b[2];
        sim_busy(db, same[k][0], a);
        sim_busy(db, same[k][1], b);
        for (int q = 0; q < 2; q++) CU_ASSERT(a[q] > 0 && a[q] == b[q]);
    }
    double bd[2], bj[2];
    sim_busy(db, "d1", bd);
    sim_busy(db, "d1-nodrift", bj);
    CU_ASSERT(bd[0] > 0 && bj[0] > 0 && (bd[0] != bj[0] || bd[1] != bj[1]));
    free(csv2);
    free(csv);
    free(db);
    free(dir);
}

/* Returns the simulated iteration time stored under tag in db (0 when none). */
static double sim_iteration(const char *db, const char *tag) {
    store *s = NULL;
    pl_err e;
    store_run *runs = NULL;
    size_t n = 0;
    double it = 0;
    if (store_open(db, 1, &s, &e) != PL_OK) return 0;
    if (store_list_runs(s, tag, 0, &runs, &n, &e) == PL_OK) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(runs[i].kind, "simulated") == 0) it = runs[i].iteration_time_s;
        store_runs_free(runs, n);
    }
    store_close(s);
    return it;
}

/* The sharing term, in the default. A run on 2 workers profiled between its passes times
 * each worker's F alone (the other waiting) and beside the other (its worker lines' fwd_alone_s
 * and fwd_side_s, both positive), and per class its backward alone, beside the other's backward
 * and beside its forwards, and an F beside the other's backward. A copy of that profile whose
 * lines give F and the backward alone at half their time beside on both workers, and each class
 * beside the other at its time beside its own, predicts with ratio 0.5 (its JSON's share_alone;
 * its params' share_class [1, 0.5, 1]) and stores the prediction without the term beside
 * (TAG-noshare) and the one per class (TAG-classshare, here the same prediction). Every action's
 * factor lies between 0.5 and 1, so the prediction lies between half the one without and the one
 * without (GPipe's pass is a sum of its actions' times along a path), and below it: the pass's
 * fill and drain run alone. Under --no-sharing-term the JSON says 0, the prediction is the
 * other's TAG-noshare (the same profile and seeds), and the term lands beside as TAG-share, the
 * other's prediction. Both store the measured ratios. Under --sharing-per-class, from lines whose
 * backward alone takes a quarter of its time beside, the prediction differs from the one ratio's
 * (test_sim checks which way against closed forms), its JSON says share_class [1, 0.25, 1], and
 * the one ratio lands beside (TAG-oneshare) as the first run's prediction; without the flag the
 * same lines predict the one ratio's and store the per-class one beside (TAG-classshare).
 * Over MPI (where mpirun is there) the term is off by default: share_alone 0, TAG-share beside. */
static void test_run_sharing(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "share.db");
    char *csv = pl_test_path(dir, "share.csv");
    char *half = pl_test_path(dir, "half.csv");
    char *quarter = pl_test_path(dir, "quarter.csv");
    size_t len = 0;
    char *text = run_profile_text("--kind gpipe --ranks 2 --microbatches 4", "h0", db, csv, &len);
    double measured[2] = {0, 0};
    CU_ASSERT_EQUAL(exec_profile_worker_share(text, len, 2, measured), 0);
    CU_ASSERT(measured[0] > 0 && measured[1] > 0);
    double cls[6] = {0};
    CU_ASSERT_EQUAL(exec_profile_worker_share_class(text, len, 2, cls), 0);
    free(text);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "awk '/ worker=/ { for (i = 1; i <= NF; i++) { if ($i ~ /^fwd_side_s=/) s = substr($i, 12);"
             " if ($i ~ /^bwd_side_s=/) b = substr($i, 12) }"
             " for (i = 1; i <= NF; i++) { if ($i ~ /^fwd_alone_s=/) $i = sprintf(\"fwd_alone_s=%%.17g\", s / 2);"
             " if ($i ~ /^fwd_cross_s=/) $i = sprintf(\"fwd_cross_s=%%.17g\", s);"
             " if ($i ~ /^bwd_alone_s=/) $i = sprintf(\"bwd_alone_s=%%.17g\", b / 2);"
             " if ($i ~ /^bwd_cross_s=/) $i = sprintf(\"bwd_cross_s=%%.17g\", b) } } { print }' %s > %s",
             csv, half);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd,
             "awk '/ worker=/ { for (i = 1; i <= NF; i++) if ($i ~ /^bwd_side_s=/) b = substr($i, 12);"
             " for (i = 1; i <= NF; i++) if ($i ~ /^bwd_alone_s=/) $i = sprintf(\"bwd_alone_s=%%.17g\", b / 4) } { print }'"
             " %s > %s",
             half, quarter);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    double ratio[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        char *out = run_json(k ? "h2" : "h1", db, half, k ? "--no-sharing-term" : "");
        const char *pj = out ? strstr(out, "\"share_alone\":") : NULL;
        CU_ASSERT(pj && sscanf(pj, "\"share_alone\":%lf", &ratio[k]) == 1);
        /* the measured ratio, stored with the run whether the prediction took it or not */
        const char *pa = out ? strstr(out, "\"params\":") : NULL;
        double stored = 0;
        pa = pa ? strstr(pa, "\"share_alone\":") : NULL;
        CU_ASSERT(pa && sscanf(pa, "\"share_alone\":%lf", &stored) == 1 && fabs(stored - 0.5) < 1e-6);
        double sc[3] = {0, 0, 0};
        pa = pa ? strstr(pa, "\"share_class\":") : NULL;
        CU_ASSERT(pa && sscanf(pa, "\"share_class\":[%lf,%lf,%lf]", &sc[0], &sc[1], &sc[2]) == 3);
        CU_ASSERT(fabs(sc[0] - 1) < 1e-6 && fabs(sc[1] - 0.5) < 1e-6 && fabs(sc[2] - 1) < 1e-6);
        /* the prediction's: the one ratio, no share_class of its own */
        pj = out ? strstr(out, "\"predicted\":") : NULL;
        const char *pc = pj ? strstr(pj, "\"share_class\":") : NULL;
        const char *end = pj ? strstr(pj, "}") : NULL;
        CU_ASSERT(pj && end && (!pc || pc > end));
        if (out && !pj) fprintf(stderr, "%s\n", out);
        free(out);
    }
    CU_ASSERT_DOUBLE_EQUAL(ratio[0], 0.5, 1e-6);
    CU_ASSERT_EQUAL(ratio[1], 0);
    store *s = NULL;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    static const char *const tags[] = {"h0-share", "h1-noshare", "h1-share", "h2-share", "h2-noshare", "h1-classshare",
                                       "h2-classshare", "h1-oneshare"};
    static const size_t want_n[] = {1, 1, 0, 1, 0, 1, 0, 0};
    tag_counts(s, tags, want_n, sizeof tags / sizeof *tags);
    store_close(s);
    double with = sim_iteration(db, "h1"), without = sim_iteration(db, "h1-noshare");
    CU_ASSERT(with > 0 && without > 0);
    CU_ASSERT(with >= 0.5 * without * (1 - 1e-9) && with < without);
    if (!(with >= 0.5 * without * (1 - 1e-9) && with < without))
        fprintf(stderr, "sharing term at 0.5: %g s against %g s without it\n", with, without);
    double off = sim_iteration(db, "h2");
    CU_ASSERT(off > 0 && off == without);
    CU_ASSERT(sim_iteration(db, "h2-share") == with); /* the term beside is the default's */
    /* per class: the backwards alone at F's 0.5 too and each class beside the other at 1, which
     * is what the one ratio gives: the same prediction */
    double per1 = sim_iteration(db, "h1-classshare");
    CU_ASSERT(per1 > 0 && fabs(per1 - with) <= 1e-9 * with);
    /* per class with the backwards alone at 0.25; the one ratio beside is h1's */
    char *out3 = run_json("h3", db, quarter, "--sharing-per-class");
    const char *p3 = out3 ? strstr(out3, "\"predicted\":") : NULL, *e3 = p3 ? strstr(p3, "}") : NULL;
    double sc3[3] = {0, 0, 0};
    p3 = p3 ? strstr(p3, "\"share_class\":") : NULL;
    CU_ASSERT(p3 && e3 && p3 < e3); /* in the prediction's own object, not the params' */
    CU_ASSERT(p3 && sscanf(p3, "\"share_class\":[%lf,%lf,%lf]", &sc3[0], &sc3[1], &sc3[2]) == 3);
    CU_ASSERT(fabs(sc3[0] - 1) < 1e-6 && fabs(sc3[1] - 0.25) < 1e-6 && fabs(sc3[2] - 1) < 1e-6);
    free(out3);
    double per = sim_iteration(db, "h3"), one = sim_iteration(db, "h3-oneshare");
    /* the class ratios took part. Which way they move this prediction depends on the profile's
     * times: a faster backward alone shifts which actions meet, and at ratios this far from the
     * one ratio's a backward beside another costs more than two alone in turn (measured: mostly
     * shorter, at times longer, with one microbatch too). The term's arithmetic is test_sim's,
     * against closed forms. */
    CU_ASSERT(per > 0 && per != with);
    CU_ASSERT(one > 0 && fabs(one - with) <= 1e-9 * with);
    /* the same lines without the flag: the one ratio, and per class beside as h3's */
    free(run_json("h4", db, quarter, ""));
    CU_ASSERT(fabs(sim_iteration(db, "h4") - with) <= 1e-9 * with);
    CU_ASSERT(fabs(sim_iteration(db, "h4-classshare") - per) <= 1e-9 * per);
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    static const char *const tags3[] = {"h3-oneshare", "h3-classshare", "h3-noshare", "h4-classshare", "h4-oneshare"};
    static const size_t want3[] = {1, 0, 1, 1, 0};
    tag_counts(s, tags3, want3, sizeof tags3 / sizeof *tags3);
    store_close(s);
#ifdef PIPELAB_MPIEXEC
    /* over MPI the term is off by default, stored beside as TAG-share */
    if (have_mpirun()) {
        snprintf(cmd, sizeof cmd,
                 MPIENV "timeout 60 " MPIRUN " %s run --transport mpi --kind gpipe --ranks 2 --microbatches 4 " SMALL
                        " --tag hm --db %s --profile %s --format json",
                 PIPELAB_BIN, db, half);
        char *out = NULL;
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
        const char *pj = out ? strstr(out, "\"share_alone\":") : NULL;
        double v = -1;
        CU_ASSERT(pj && sscanf(pj, "\"share_alone\":%lf", &v) == 1 && v == 0);
        if (!pj && out) fprintf(stderr, "%s\n", out);
        free(out);
        CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
        static const char *const mtags[] = {"hm-share", "hm-noshare", "hm-classshare"};
        static const size_t mwant[] = {1, 0, 0};
        tag_counts(s, mtags, mwant, 3);
        store_close(s);
    }
#endif
    free(half);
    free(quarter);
    free(csv);
    free(db);
    free(dir);
}

/* Writes to `out` the saved profile `csv` with rank_drift 0.05, the hand-off's times (p2p_*_s)
 * at 0.1 us, and, in place of its rounds lines, worker 0's and worker 1's rounds as given (after
 * "worker=W "); returns the shell's status. A profile saved on a loaded machine (ctest -j2) can
 * time the hand-off at milliseconds, which then hide a slow rank's compute in the pass: the
 * simulated runs tie, and the median run was once one with both ranks at speed. */
static int with_rounds(const char *csv, const char *out, const char *w0, const char *w1) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "grep -v 'rounds worker=' %s | sed 's/rank_drift=[^ ]*$/rank_drift=0.05/; s/\\(p2p_[a-z]*_s\\)=[^ ]*/\\1=1e-07/g' > %s && "
             "echo '# pipelab-exec rounds worker=0 %s' >> %s && echo '# pipelab-exec rounds worker=1 %s' >> %s",
             csv, out, w0, out, w1, out);
    return sh(cmd, NULL);
}

/* Checks that the simulated run of tag `slow` has a rank busy over 4 times its time in that of tag
 * `ref` (compute and STEP), and a longer pass, which waits on it. */
static void slow_rank_beside(const char *db, const char *slow_tag, const char *ref_tag) {
    double a[2], b[2];
    sim_busy(db, slow_tag, a);
    sim_busy(db, ref_tag, b);
    double slow = 0;
    for (int q = 0; q < 2; q++)
        if (b[q] > 0 && a[q] / b[q] > slow) slow = a[q] / b[q];
    CU_ASSERT(slow > 4);
    double it[2] = {sim_iteration(db, slow_tag), sim_iteration(db, ref_tag)};
    CU_ASSERT(it[0] > it[1] && it[1] > 0);
    if (!(slow > 4) || !(it[0] > it[1]))
        fprintf(stderr, "%s: %g s against %g s of %s, the slow rank busy %g times\n", slow_tag, it[0], it[1], ref_tag, slow);
}

/* The states term in the default: a profile whose rounds lines give 8 rounds, 3 in which rank 0
 * runs 16 times as slow, 3 others rank 1, 2 with both at speed (each rank's median round at
 * speed), predicts the median of 32 simulated runs (each of the 8 rounds 4 times:
 * CLI_RUN_JITTER_RUNS at least) and says so in the JSON (state_rounds 8, no drift): the runs of
 * the 2 rounds at speed are 8 of 32, so the median run has one rank 16 times as slow, busy over
 * 4 times its time in the prediction without the term stored beside (TAG-nostates, the drift
 * term at 5%), and the pass, which waits on it, longer. The busy time is checked rather than the
 * pass: a profile saved on a loaded machine (ctest -j2) can time the ranks' hand-off at
 * milliseconds, a pass of which this small model's compute is a few percent. Under
 * --no-jitter-term the terms land beside as TAG-drift, equal to the default, and the states term
 * alone as TAG-states. Those lines time F alone, so nothing lands as TAG-bstates. Per class: a
 * profile whose rounds keep F at speed on both ranks and put the 16-times slow rounds in the
 * backwards (b=) predicts, by default (F's speeds on all compute), what it predicts without them,
 * and beside it, as TAG-bstates, a slow rank busy over 4 times its default time, and a longer
 * pass. */
static void test_run_states(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "states.db");
    char *csv = pl_test_path(dir, "states.csv");
    char *csv2 = pl_test_path(dir, "states2.csv");
    free(run_saving_profile("--kind gpipe --ranks 2 --microbatches 4", "s0", db, csv));
    char cmd[2048];
    CU_ASSERT_EQUAL_FATAL(with_rounds(csv, csv2, "f=16,1,1,16,1,1,16,1", "f=1,16,1,1,16,1,1,16"), 0);
    static const char *const names[] = {"s1", "s1x"}, *const flags[] = {"", "--no-jitter-term"};
    for (int k = 0; k < 2; k++) {
        int runs = 0, rounds = -1;
        double cv = -1, dcv = -1;
        CU_ASSERT(run_json_prediction(names[k], db, csv2, flags[k], &runs, &cv, &dcv, &rounds) == 4);
        CU_ASSERT_EQUAL(runs, k == 0 ? 32 : 1);
        CU_ASSERT_EQUAL(rounds, k == 0 ? 8 : 0);
        CU_ASSERT_DOUBLE_EQUAL(dcv, 0, 1e-12);
    }
    store *s = NULL;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    static const char *const tags[] = {"s1-nostates", "s1-states", "s1x-states", "s1x-nostates", "s1x-drift"};
    static const size_t want_n[] = {1, 0, 1, 0, 1};
    tag_counts(s, tags, want_n, sizeof tags / sizeof *tags);
    store_close(s);
    double a[2], b[2];
    sim_busy(db, "s1", a);
    sim_busy(db, "s1x-drift", b);
    for (int q = 0; q < 2; q++) CU_ASSERT(a[q] > 0 && a[q] == b[q]);
    /* the median run's slow rank: its busy time (compute and STEP) over 4 times its time without
     * the states term; and the pass, which waits on it, longer */
    slow_rank_beside(db, "s1", "s1-nostates");
    /* per class: F at speed in every round, the backwards slow by turns */
    char *csv3 = pl_test_path(dir, "states3.csv");
    CU_ASSERT_EQUAL_FATAL(with_rounds(csv, csv3, "f=1,1,1,1,1,1,1,1 b=16,1,1,16,1,1,16,1", "f=1,1,1,1,1,1,1,1 b=1,16,1,1,16,1,1,16"), 0);
    int runs = 0, rounds = -1;
    double cv = -1, dcv = -1;
    CU_ASSERT(run_json_prediction("s2", db, csv3, "", &runs, &cv, &dcv, &rounds) == 4);
    CU_ASSERT_EQUAL(rounds, 8);
    slow_rank_beside(db, "s2-bstates", "s2");
    double bf[2];
    sim_busy(db, "s2", bf);
    /* the default takes F's speeds alone: its busy times are those of the same profile without
     * the rounds lines' b= */
    char *csv4 = pl_test_path(dir, "states4.csv");
    snprintf(cmd, sizeof cmd, "sed 's/ b=.*$//' %s > %s", csv3, csv4);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    CU_ASSERT(run_json_prediction("s3", db, csv4, "", &runs, &cv, &dcv, &rounds) == 4);
    double b3[2];
    sim_busy(db, "s3", b3);
    for (int q = 0; q < 2; q++) CU_ASSERT(b3[q] > 0 && b3[q] == bf[q]);
    free(csv4);
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    static const char *const none[] = {"s1-bstates", "s1x-bstates", "s3-bstates", "s2-bstates"};
    static const size_t zero[] = {0, 0, 0, 1};
    tag_counts(s, none, zero, 4);
    store_close(s);
    free(csv3);
    free(csv2);
    free(csv);
    free(db);
    free(dir);
}

/* Sets v[w] to the value of key on worker w's line of a saved profile's text (w 0 and 1; -1
 * where the line or the key is missing). */
static void worker_key(const char *text, const char *key, double v[2]) {
    v[0] = v[1] = -1;
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    for (const char *l = text; (l = strstr(l, "# pipelab-exec worker=")) != NULL; l++) {
        int w;
        const char *end = strchr(l, '\n'), *k = strstr(l, pat);
        if (sscanf(l, "# pipelab-exec worker=%d", &w) == 1 && w >= 0 && w < 2 && k && (!end || k < end))
            v[w] = strtod(k + strlen(pat), NULL);
    }
}

/* Sets row[k] to the F, I and W of block row k (k < 4) of a saved profile's text; returns how
 * many such rows it holds. */
static int block_rows(const char *text, double row[4][3]) {
    int rows = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        int k;
        double a, b, c;
        char name[64];
        if (sscanf(l, "%d,%63[^,],%lf,%lf,%lf", &k, name, &a, &b, &c) == 5 && k >= 0 && k < 4) {
            row[k][0] = a, row[k][1] = b, row[k][2] = c;
            rows++;
        }
    }
    return rows;
}

/* Runs SCHED under TAG into the database dir/NAME.db (set in *db; free it), saving its profile
 * to dir/NAME.csv, and returns the profile's text (free it) with its length in *len and its 4
 * block rows in row (block_rows). */
static char *saved_rows(const char *dir, const char *name, const char *sched, const char *tag, char **db, size_t *len,
                        double row[4][3]) {
    char file[64];
    snprintf(file, sizeof file, "%s.db", name);
    *db = pl_test_path(dir, file);
    snprintf(file, sizeof file, "%s.csv", name);
    char *csv = pl_test_path(dir, file);
    char *text = run_profile_text(sched, tag, *db, csv, len);
    free(csv);
    CU_ASSERT_EQUAL(block_rows(text, row), 4);
    return text;
}

/* The again term in every prediction where a rank holds several stages, and the prediction
 * without it stored beside (TAG-noagain). looped-bfs on 2 ranks, m 4, two stages a rank of one
 * block each (stage q is block q, on rank q mod 2): on each stage the F of microbatches 1-3
 * follows the F of the one before on the same stage, and the B of microbatches 2, 1, 0 the B of
 * the microbatch after it (B3 B2 B1 B0; test_reuse, "again"). Each of those takes its rank's
 * again ratios (the profile's fwd_again_s / fwd_s, bwd_in_again_s / bwd_in_s and bwd_w_again_s /
 * bwd_w_s: exec_profile_worker_again) of its block row's F, I and W; the other F and B keep the
 * row's times. So TAG-noagain has each rank busier than the run's own prediction by exactly, over its
 * two stages, 3 (1 - aF) F + 3 ((1 - aI) I + (1 - aW) W) of each stage's row (stage 0's I its
 * I0). */
static void test_run_again_default(void) {
    char *dir = pl_test_tmpdir(), *db = NULL;
    size_t len = 0;
    double ag[3 * 2], row[4][3] = {{0}};
    char *text = saved_rows(dir, "again", "--kind looped-bfs --chunks 2 --ranks 2 --microbatches 4", "ag", &db, &len, row);
    CU_ASSERT_EQUAL(exec_profile_worker_again(text, len, 2, ag), 0);
    free(text);
    double bm[2], bo[2];
    sim_busy(db, "ag", bm);
    sim_busy(db, "ag-noagain", bo);
    for (int r = 0; r < 2; r++) {
        const double *a = ag + 3 * r;
        CU_ASSERT(a[0] > 0 && a[1] > 0 && a[2] > 0 && (a[0] != 1 || a[1] != 1 || a[2] != 1) && bm[r] > 0 && bo[r] > 0);
        double want = 0;
        for (int q = r; q < 4; q += 2)
            want += 3 * ((1 - a[0]) * row[q][0] + (1 - a[1]) * row[q][1] + (1 - a[2]) * row[q][2]);
        CU_ASSERT_DOUBLE_EQUAL(bo[r] - bm[r], want, 1e-6 * bm[r]);
    }
    free(db);
    free(dir);
}

/* The version term in every prediction where a rank's STEPs go into a new weight version, and
 * the prediction without it stored beside (TAG-noversions). PipeDream on 2 ranks, m 4, two
 * blocks a stage: rank 0 has a microbatch in flight at each of its STEPs, so they write a new
 * version and its worker times the cycle on two versions; rank 1 runs each backward right after
 * its forward and steps in place, so its line has the cycle's six times 0 and ratios 1
 * (exec_profile_worker_versions). Each of rank 0's F and B then takes its stage's F, I and W at
 * its ratios: TAG-noversions has rank 0 busier than the prediction by exactly nF (rF - 1) F +
 * nB ((rI - 1) I + (rW - 1) W), with nF and nB its F and B in the lowered schedule and F, I, W
 * the sums of its block rows (block 0's I the I0 pass), and rank 1 exactly as busy. */
static void test_run_versions(void) {
    char *dir = pl_test_tmpdir(), *db = NULL;
    size_t len = 0;
    double vr[3 * 2], row[4][3] = {{0}};
    char *text = saved_rows(dir, "versions", "--kind pipedream --ranks 2 --microbatches 4", "vs", &db, &len, row);
    CU_ASSERT_EQUAL(exec_profile_worker_versions(text, len, 2, vr), 1);
    free(text);
    pl_err e;
    sched_gen_opts go = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate("pipedream", &go, &e);
    sched *l = g ? sched_lower(g, &e) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    double nf = 0, nb = 0;
    for (size_t i = 0; i < l->rank[0].n; i++) {
        nf += l->rank[0].acts[i].kind == SCHED_F;
        nb += l->rank[0].acts[i].kind == SCHED_B;
    }
    sched_free(g);
    sched_free(l);
    CU_ASSERT(nf > 0 && nb > 0);
    double bm[2], bo[2];
    sim_busy(db, "vs", bm);
    sim_busy(db, "vs-noversions", bo);
    const double *a = vr;
    CU_ASSERT(a[0] > 0 && a[1] > 0 && a[2] > 0 && (a[0] != 1 || a[1] != 1 || a[2] != 1));
    for (int c = 0; c < 3; c++) CU_ASSERT_EQUAL(vr[3 + c], 1.0);
    double f = row[0][0] + row[1][0], in = row[0][1] + row[1][1], w = row[0][2] + row[1][2];
    double want = nf * (a[0] - 1) * f + nb * ((a[1] - 1) * in + (a[2] - 1) * w);
    CU_ASSERT(bm[0] > 0 && bo[0] > 0);
    CU_ASSERT_DOUBLE_EQUAL(bm[0] - bo[0], want, 1e-6 * bm[0]);
    CU_ASSERT_DOUBLE_EQUAL(bm[1], bo[1], 1e-12 * bm[1]);
    free(db);
    free(dir);
}

/* Sets *ops, *n to the predicted timeline of the one simulated run tagged `tag` in db. */
static void sim_ops(const char *db, const char *tag, store_op **ops, size_t *n) {
    store *s = NULL;
    store_run *runs = NULL;
    size_t nr = 0;
    pl_err e;
    *ops = NULL;
    *n = 0;
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, tag, 0, &runs, &nr, &e), PL_OK);
    for (size_t i = 0; i < nr; i++)
        if (strcmp(runs[i].kind, "simulated") == 0) CU_ASSERT_EQUAL(store_get_ops(s, runs[i].id, ops, n, &e), PL_OK);
    store_runs_free(runs, nr);
    store_close(s);
}

/* Checks the interruption term of `pipelab run --interruptions VALUE` (1F1B on 2 ranks, m 4,
 * traced, each action at its mean time): the prediction's timeline has the actions of the one
 * stored beside without the term (TAG-nointerrupt), each F, B and STEP `f` times as long; the one
 * stored beside with each rank's STEP at the mean over its rounds (TAG-stepmean) has the
 * prediction's F and B and each STEP its worker's step_mean_s / step_s times the one without the
 * term: the mean holds the gaps, and the term leaves it. Both runs' params record the four
 * values given (0 for the two a VALUE of SHARE,RATE leaves out). */
static void interruption_case(const char *dir, const char *value, double f) {
    char *db = pl_test_path(dir, "intr.db"), *csv = pl_test_path(dir, "intr.csv"), flags[128];
    snprintf(flags, sizeof flags, "--kind 1f1b --ranks 2 --microbatches 4 --trace --interruptions %s", value);
    size_t len = 0;
    char *text = run_profile_text(flags, "it", db, csv, &len);
    double st[2], sta[2];
    worker_key(text, "step_s", st);
    worker_key(text, "step_mean_s", sta);
    free(text);
    CU_ASSERT(st[0] > 0 && st[1] > 0 && sta[0] > 0 && sta[1] > 0);
    store_op *a = NULL, *b = NULL, *c = NULL;
    size_t na = 0, nb = 0, nc = 0;
    sim_ops(db, "it-nointerrupt", &a, &na);
    sim_ops(db, "it", &b, &nb);
    sim_ops(db, "it-stepmean", &c, &nc);
    CU_ASSERT_EQUAL_FATAL(na, nb);
    CU_ASSERT_EQUAL_FATAL(nc, nb);
    int seen[2] = {0, 0};
    for (size_t i = 0; i < na; i++) {
        CU_ASSERT_STRING_EQUAL(a[i].kind, b[i].kind);
        CU_ASSERT_STRING_EQUAL(c[i].kind, b[i].kind);
        int step = !strcmp(a[i].kind, "STEP"), fwd_bwd = !strcmp(a[i].kind, "F") || !strcmp(a[i].kind, "B");
        if (!step && !fwd_bwd) continue;
        int r = a[i].rank;
        CU_ASSERT_FATAL(r >= 0 && r < 2);
        double da = a[i].end_s - a[i].start_s, db_ = b[i].end_s - b[i].start_s, dc = c[i].end_s - c[i].start_s;
        double want = da * f, want_c = step ? da * sta[r] / st[r] : db_;
        CU_ASSERT(da > 0);
        CU_ASSERT_DOUBLE_EQUAL(db_, want, 1e-9 * want);
        CU_ASSERT_DOUBLE_EQUAL(dc, want_c, 1e-9 * want_c);
        seen[step]++;
    }
    CU_ASSERT(seen[0] == 16 && seen[1] == 2); /* 4 F and 4 B on each rank; a STEP each */
    store_ops_free(a, na);
    store_ops_free(b, nb);
    store_ops_free(c, nc);
    double v[4] = {0, 0, 0, 0};
    CU_ASSERT(sscanf(value, "%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3]) >= 2);
    char want_pj[160];
    snprintf(want_pj, sizeof want_pj, "\"interruptions\":{\"share\":%.9g,\"rate\":%.9g,\"short_share\":%.9g,\"short_rate\":%.9g}",
             v[0], v[1], v[2], v[3]);
    store *s = NULL;
    store_run *runs = NULL;
    const store_run *meas = NULL, *sim = NULL;
    open_pair(db, "it", &s, &runs, &meas, &sim);
    CU_ASSERT(strstr(meas->params_json, want_pj) != NULL);
    CU_ASSERT_STRING_EQUAL(sim->params_json, meas->params_json);
    store_runs_free(runs, 2);
    store_close(s);
    unlink(db);
    unlink(csv);
    free(db);
    free(csv);
}

/* `pipelab profile --interruptions S` on 2 workers prints a line whose share is a fraction of
 * the time (in [0, 1), the same in percent) and whose rate is not negative, then the same of the
 * short gaps, and writes no CSV;
 * with -o, or a time under 20 ms, it is a usage error (exit 2). */
static void test_profile_interruptions(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s profile --interruptions 0.2 --concurrency 2 --oversubscribe", PIPELAB_BIN);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    double share = -1, pct = -1, rate = -1;
    int workers = 0;
    const char *l = out ? strstr(out, "interruptions") : NULL;
    int got = l ? sscanf(l, "interruptions share %lf (%lf%% of the time in gaps over 0.1 ms up to 20 ms, %lf a second), %d",
                         &share, &pct, &rate, &workers)
                : 0;
    CU_ASSERT_EQUAL_FATAL(got, 4);
    CU_ASSERT(share >= 0 && share < 1 && rate >= 0 && workers == 2);
    CU_ASSERT_DOUBLE_EQUAL(pct, 100 * share, 0.006);
    /* and the short gaps' on the next line, the same way */
    double ss = -1, spct = -1, srate = -1;
    const char *sl = out ? strstr(out, "\nshort gaps ") : NULL;
    double floor_ms = -1;
    got = sl ? sscanf(sl, "\nshort gaps share %lf (%lf%% of the time in gaps over %lf ms up to 0.1 ms, %lf a second)", &ss,
                      &spct, &floor_ms, &srate)
             : 0;
    CU_ASSERT_EQUAL(got, 4);
    /* the floor: a microsecond, or 20 readings of the clock where they take longer */
    CU_ASSERT(ss >= 0 && ss < 1 && srate >= 0 && floor_ms >= 0.001 && floor_ms <= 0.1);
    CU_ASSERT_DOUBLE_EQUAL(spct, 100 * ss, 0.006);
    CU_ASSERT_PTR_NULL(strstr(out, "layer,"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s profile --interruptions 1 -o /dev/null", PIPELAB_BIN);
    char *junk = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &junk), 2);
    free(junk);
    junk = NULL;
    snprintf(cmd, sizeof cmd, "%s profile --interruptions 0.001", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &junk), 2);
    free(junk);
}

/* The interruption term under --interruptions, the prediction without it stored beside
 * (TAG-nointerrupt). At a rate of 0 gaps a second no profile round holds one, so every F, I, W and
 * STEP takes 1 / (1 - share) its time; at a million a second every round's part of each kind (a
 * microsecond at least) holds them at its median, and the band prices nothing. With the short
 * gaps too, each band by its own rate: both shares, or the one whose rate is 0 alone. The STEP at
 * the rounds' mean (TAG-stepmean) holds them at any rate. */
static void test_run_interruptions(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    interruption_case(dir, "0.01,0", 1 / 0.99);
    interruption_case(dir, "0.01,1e6", 1);
    interruption_case(dir, "0.01,0,0.02,0", 1 / 0.97);
    interruption_case(dir, "0.01,1e6,0.02,0", 1 / 0.98);
    interruption_case(dir, "0.01,0,0.02,1e6", 1 / 0.99);
    rmdir(dir);
    free(dir);
}

/* The interruption term's rule is per kind: 1F1B on 2 ranks, m 4, two blocks a rank, predicted
 * again from the saved profile of a first run (each kind's part of a profile round then known:
 * 4 microbatches of 16 rows through the rank's blocks' F, I or W rows, and the STEPs, its
 * worker's step_s a block) with only the short band, at a rate between the parts: every STEP part holds under ln 2
 * gaps at it and every F, I and W part more. So each STEP takes 1 / 0.98 its time without the
 * term and every F and B its time alone; a rule that took one kind's part for another's, or
 * priced the kinds alike, fails. Skipped where the profile's STEP parts are not well below its
 * other parts (a sanitizer build's timing). */
static void test_run_interruption_parts(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *db = pl_test_path(dir, "parts.db"), *csv = pl_test_path(dir, "parts.csv"), cmd[2048], *out = NULL;
    /* 16 rows a microbatch: each kind's part of a round several times the STEPs' */
#define PARTS_RUN "%s run --kind 1f1b --ranks 2 --microbatches 4 --width 32 --depth 4 --microbatch-size 16 --warmup 1 " \
                  "--timed 2 --profile-reps 3 --db %s --no-jitter-term --no-sharing-term "
    snprintf(cmd, sizeof cmd, PARTS_RUN "--tag pa --save-profile %s", PIPELAB_BIN, db, csv);
    int rc = sh(cmd, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    free(out);
    out = NULL;
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char *text = NULL;
    size_t len = 0;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(pl_read_file(csv, 1 << 20, &text, &len, &e), PL_OK);
    double row[4][3], st[2];
    CU_ASSERT_EQUAL_FATAL(block_rows(text, row), 4);
    worker_key(text, "step_s", st);
    free(text);
    double lo = 0, hi = HUGE_VAL;
    for (int r = 0; r < 2; r++) {
        CU_ASSERT_FATAL(st[r] > 0);
        lo = fmax(lo, 2 * st[r]);
        for (int k = 0; k < 3; k++) hi = fmin(hi, EXEC_PROFILE_SLOTS * (row[2 * r][k] + row[2 * r + 1][k]));
    }
    if (!(hi > 1.2 * lo)) {
        pl_test_skip("the profile's STEP parts are not well below its F, I and W parts");
    } else {
        double rate = M_LN2 / sqrt(lo * hi);
        snprintf(cmd, sizeof cmd, PARTS_RUN "--trace --tag pb --profile %s --interruptions 0,0,0.02,%.9g", PIPELAB_BIN, db,
                 csv, rate);
        rc = sh(cmd, &out);
        if (rc != 0) fprintf(stderr, "%s\n", out);
        free(out);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        store_op *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        sim_ops(db, "pb-nointerrupt", &a, &na);
        sim_ops(db, "pb", &b, &nb);
        CU_ASSERT_EQUAL_FATAL(na, nb);
        int seen[2] = {0, 0};
        for (size_t i = 0; i < na; i++) {
            int step = !strcmp(a[i].kind, "STEP");
            if (!step && strcmp(a[i].kind, "F") && strcmp(a[i].kind, "B")) continue;
            double da = a[i].end_s - a[i].start_s, want = da * (step ? 1 / 0.98 : 1);
            CU_ASSERT(da > 0);
            CU_ASSERT_DOUBLE_EQUAL(b[i].end_s - b[i].start_s, want, 1e-9 * want);
            seen[step]++;
        }
        CU_ASSERT(seen[0] == 16 && seen[1] == 2);
        store_ops_free(a, na);
        store_ops_free(b, nb);
    }
#undef PARTS_RUN
    unlink(db);
    unlink(csv);
    free(db);
    free(csv);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* The reuse-distance term with the kind before, in a prediction stored beside (TAG-before),
 * against the reuse-distance term alone (TAG-reuse). 1F1B on 2 ranks, m 4, two blocks a stage:
 * rank 0 runs F0 F1 B0 F2 B1 F3 B2 B3, so B0-B2 follow an F of its stage (their I at its
 * worker's bwd_in_hot_s / bwd_in_s) and F2, F3 a B (at fwd_back_s / fwd_s); rank 1's B all
 * follow their own F (at distance 0 in both) and its F1-F3 a B. So rank 0 is busier in
 * TAG-before by 3 (ri - 1) I + 2 (fb - 1) F of its stage, rank 1 by 3 (fb - 1) F of its stage,
 * with the stage's F and I the sums of its block rows (block 0's I the I0 pass). */
static void test_run_kind_before(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "before.db");
    char *csv = pl_test_path(dir, "before.csv");
    size_t len = 0;
    char *text = run_profile_text("--kind 1f1b --ranks 2 --microbatches 4", "kb", db, csv, &len);
    double ri[2], rw[2], fb[2], f[2] = {0, 0}, in[2] = {0, 0};
    CU_ASSERT_EQUAL(exec_profile_worker_reuse(text, len, 2, ri, rw), 0);
    CU_ASSERT_EQUAL(exec_profile_worker_back(text, len, 2, fb), 0);
    /* the jitter term's coefficient of variation: each worker line's fwd_sd_s over its fwd_s, a
     * spread from one microbatch to the next, positive (a few percent on an idle machine; no
     * upper bound here: under ctest -j2 another test's process shares the cores, and this
     * profile's few rounds of microsecond forwards read 0.5 and more) */
    double cv[2] = {0, 0}, fw[2], sd[2];
    CU_ASSERT_EQUAL(exec_profile_worker_jitter(text, len, 2, cv), 0);
    worker_key(text, "fwd_s", fw);
    worker_key(text, "fwd_sd_s", sd);
    for (int q = 0; q < 2; q++) {
        CU_ASSERT(cv[q] > 0 && isfinite(cv[q]) && fw[q] > 0);
        CU_ASSERT_DOUBLE_EQUAL(cv[q], sd[q] / fw[q], 1e-12);
    }
    /* the stages' F and I: the block rows, blocks 0-1 on rank 0, 2-3 on rank 1 */
    double row[4][3] = {{0}};
    int rows = block_rows(text, row);
    for (int k = 0; k < 4; k++) {
        f[k / 2] += row[k][0];
        in[k / 2] += row[k][1];
    }
    free(text);
    CU_ASSERT_EQUAL_FATAL(rows, 4);
    double rb[2], rr[2];
    sim_busy(db, "kb-before", rb);
    sim_busy(db, "kb-reuse", rr);
    for (int q = 0; q < 2; q++) CU_ASSERT(ri[q] > 0 && fb[q] > 0 && fb[q] != 1 && f[q] > 0 && in[q] > 0 && rr[q] > 0);
    double want[2] = {3 * (ri[0] - 1) * in[0] + 2 * (fb[0] - 1) * f[0], 3 * (fb[1] - 1) * f[1]};
    for (int q = 0; q < 2; q++) CU_ASSERT_DOUBLE_EQUAL(rb[q] - rr[q], want[q], 1e-6 * rr[q]);
    free(db);
    free(csv);
    free(dir);
}

/* A model that does not fit is refused before the run and its profile with exit 1, saying what
 * it needs, and writes no database. */
static void test_run_model_too_big(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "big.db");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "PIPELAB_MAX_MEMORY=32MiB %s run --kind 1f1b --ranks 2 --microbatches 4 --width 512 --depth 4 --db %s",
             PIPELAB_BIN, db);
    char *out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(out && strstr(out, "does not fit") != NULL && strstr(out, "32.0 MiB available (PIPELAB_MAX_MEMORY)") != NULL);
    free(out);
    CU_ASSERT(!pl_test_exists(db));
    /* the same limit given as a flag, and a bad one */
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 --width 512 --depth 4 --max-memory 32MiB --db %s",
             PIPELAB_BIN, db);
    out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(out && strstr(out, "32.0 MiB available (--max-memory)") != NULL);
    free(out);
    CU_ASSERT(!pl_test_exists(db));
    /* refused before the profile measured before the run: a million repetitions would take
     * minutes (exit 124 from timeout) */
    snprintf(cmd, sizeof cmd, "timeout 60 %s run --kind 1f1b --ranks 2 --microbatches 4 --width 512 --depth 4 --max-memory 32MiB "
             "--profile-timing before --profile-reps 1000000 --db %s", PIPELAB_BIN, db);
    out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(out && strstr(out, "does not fit") != NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 --max-memory lots --db %s", PIPELAB_BIN, db);
    out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 2);
    CU_ASSERT(out && strstr(out, "--max-memory: needs a size in bytes") != NULL);
    free(out);
    free(db);
    free(dir);
}

/* A run with an injected fault exits 1 naming the rank and action, and stores nothing. */
static void test_run_fault_stores_nothing(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "fault.db");
    char cmd[2048];
    /* a run that works first, so the database exists */
    snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 4 " SMALL " --db %s", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    /* the measured run, its prediction, the prediction with the reuse-distance terms, the one
     * with the pass-length term, the one at the rounds' later microbatches (TAG-rest) and the
     * reuse-distance and first-touch terms alone (no again term with one stage per rank) and the
     * reuse-distance term with the kind before, the one without the jitter term, the one with
     * each rank's STEP at its median round, the one without the sharing term and the one with
     * it per class (TAG-classshare) */
    CU_ASSERT_EQUAL(count_runs(db), 12);
    snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 4 " SMALL " --db %s --inject-fault 1:3:1",
             PIPELAB_BIN, db);
    char *out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(out && strstr(out, "rank 1, action 3") != NULL && strstr(out, "injected fault") != NULL);
    free(out);
    CU_ASSERT_EQUAL(count_runs(db), 12);
    free(db);
    free(dir);
}

/* A run whose training diverges (a learning rate of 1e30): the run stands, its warning says from
 * which iteration the loss is not finite, and its JSON stays JSON (null, never nan). */
static void test_run_diverged(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run --kind gpipe --ranks 2 --microbatches 4 " SMALL " --no-db --no-predict --lr 1e30 "
             "--format json", PIPELAB_BIN);
    char *out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"loss_last\":null,\"warning\":\"the loss is not finite from iteration "));
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, " on: the training diverged (lower --lr)\""));
    CU_ASSERT_PTR_NULL(out ? strstr(out, "nan") : "nan");
    if (!out || strstr(out, "nan")) fprintf(stderr, "\n%s\n", out ? out : "");
    free(out);
}

/* `pipelab profile` writes a CSV that the cost model reads: depth rows, positive times, the
 * block's sizes; and `pipelab run --profile` accepts it (and refuses one of another model, and
 * one with a malformed executor, worker, pass-length or rounds line). */
static void test_profile_csv_loads(void) {
    char *dir = pl_test_tmpdir();
    char *csv = pl_test_path(dir, "prof.csv");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s profile --width 32 --depth 4 --microbatch-size 4 --reps 5 -o %s", PIPELAB_BIN, csv);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    char *text = NULL;
    size_t len = 0;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(pl_read_file(csv, 1 << 20, &text, &len, &e), PL_OK);
    cost_model *m = cost_model_read_csv(csv, text, len, &e);
    if (!m) fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->n, 4);
    CU_ASSERT_EQUAL(m->microbatch_size, 4);
    for (int k = 0; k < m->n; k++) {
        CU_ASSERT(m->layer[k].fwd_s > 0 && m->layer[k].bwd_in_s > 0 && m->layer[k].bwd_w_s > 0);
        CU_ASSERT_EQUAL(m->layer[k].param_bytes, 4 * (2 * 32 * 128 + 128 + 32));
        CU_ASSERT_EQUAL(m->layer[k].out_bytes, 4 * 4 * 32);
        CU_ASSERT_EQUAL(m->layer[k].stash_bytes, 4 * (4 * 32 + 2 * 4 * 128));
    }
    exec_config c;
    exec_config_default(&c);
    c.hidden = 32;
    c.layers = 4;
    c.microbatch_size = 4;
    CU_ASSERT_EQUAL(exec_profile_check(m, &c, csv, &e), PL_OK);
    c.hidden = 64;
    CU_ASSERT_EQUAL(exec_profile_check(m, &c, csv, &e), PL_EINPUT);
    cost_model_free(m);
    /* the same profile with malformed worker, pass-length or rounds lines first: refused before
     * the run (exec_profile_lines_check), naming file, line and what is wrong */
    static const struct {
        const char *lines, *want;
    } bad_lines[] = {
        {"# pipelab-exec windows worker=0 first_ms=1 factors=1,2\n", ":1: a malformed pass-length line"},
        {"# pipelab-exec worker=0 core=0 fwd_s=nan bwd_in_s=2 bwd_w_s=3 step_s=4\n",
         ":1: fwd_s must be a finite number >= 0 (got 'nan')"},
        {"# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3\n", ":1: missing key 'step_s'"},
        /* a forward's jitter past what the simulator draws: refused here, not by the prediction
         * without a file */
        {"# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=2 bwd_in_hot_s=2 bwd_w_hot_s=3 "
         "fwd_first_s=1 bwd_in_first_s=2 bwd_w_first_s=3 fwd_rest_s=1 bwd_in_rest_s=2 bwd_w_rest_s=3 fwd_again_s=1 "
         "bwd_in_again_s=2 bwd_w_again_s=3 bwd_in_next_s=2 fwd_back_s=1 fwd_sd_s=1e300\n",
         ":1: fwd_sd_s must be at most 100 times fwd_s (got 1e+300 against 1)"},
        {"# pipelab-exec rounds worker=1 f=1,x\n", ":1: a malformed rounds line"},
        {"# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n"
         "# pipelab-exec worker=0 core=1 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n",
         ":2: a second worker line of worker 0 (the first is line 1)"}};
    char *bad = pl_test_path(dir, "bad_lines.csv");
    for (size_t k = 0; k < sizeof bad_lines / sizeof *bad_lines; k++) {
        FILE *bf = fopen(bad, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(bf);
        fprintf(bf, "%s%.*s", bad_lines[k].lines, (int)len, text);
        fclose(bf);
        char *out = NULL, want[1024];
        snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 " SMALL " --no-db --profile %s",
                 PIPELAB_BIN, bad);
        CU_ASSERT_EQUAL(sh(cmd, &out), 1);
        snprintf(want, sizeof want, "%s%s", bad, bad_lines[k].want);
        if (!out || !strstr(out, want)) fprintf(stderr, "\nwant %s\ngot %s\n", want, out ? out : "");
        CU_ASSERT(out && strstr(out, want) != NULL);
        free(out);
    }
    free(bad);
    /* its executor line with a STEP of nan or -1, or a concurrency of 0: refused, naming file, line
     * and value (exec_profile_lines_check), not read as a profile without a STEP */
    const char *meta = strstr(text, "\n# " EXEC_PROFILE_META " concurrency=");
    CU_ASSERT_PTR_NOT_NULL_FATAL(meta);
    int meta_line = 2;
    for (const char *q = text; q < meta; q++) meta_line += *q == '\n';
    static const struct {
        const char *sed, *want;
    } bad_meta[] = {{"s/ step_s=[^ ]*/ step_s=nan/", "step_s must be a finite number >= 0 (got 'nan')"},
                    {"s/ step_s=[^ ]*/ step_s=-1/", "step_s must be a finite number >= 0 (got '-1')"},
                    {"s/concurrency=[0-9]*/concurrency=0/", "concurrency must be an integer >= 1 (got '0')"},
                    {"s/ rank_drift=[^ ]*/ rank_drift=nan/", "rank_drift must be a finite number >= 0 (got 'nan')"},
                    {"s/ rank_drift=[^ ]*/ rank_drift=1e300/", "rank_drift must be at most 100 (got '1e300')"}};
    char *bad_exec = pl_test_path(dir, "bad_exec.csv");
    for (size_t k = 0; k < sizeof bad_meta / sizeof *bad_meta; k++) {
        char *out = NULL, want[1024];
        snprintf(cmd, sizeof cmd, "sed '/^# pipelab-exec concurrency=/%s' %s > %s && %s run --kind 1f1b --ranks 2 "
                 "--microbatches 4 " SMALL " --no-db --profile %s", bad_meta[k].sed, csv, bad_exec, PIPELAB_BIN, bad_exec);
        CU_ASSERT_EQUAL(sh(cmd, &out), 1);
        snprintf(want, sizeof want, "%s:%d: %s", bad_exec, meta_line, bad_meta[k].want);
        if (!out || !strstr(out, want)) fprintf(stderr, "\nwant %s\ngot %s\n", want, out ? out : "");
        CU_ASSERT(out && strstr(out, want) != NULL);
        free(out);
    }
    free(bad_exec);
    free(text);
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 " SMALL " --no-db --profile %s", PIPELAB_BIN, csv);
    CU_ASSERT_EQUAL(sh(cmd, &out), 0);
    CU_ASSERT(out && strstr(out, csv) != NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 --width 64 --depth 4 --no-db --profile %s",
             PIPELAB_BIN, csv);
    CU_ASSERT_EQUAL(sh(cmd, NULL), 1);
    free(csv);
    free(dir);
}

/* The prediction of an asynchronous run covers what the run measures: a pass of N iterations,
 * fill and drain included (iteration time = pass / N), not the simulator's steady state, so
 * each rank's busy + idle is N iteration times (the steady-state window would be N - 1). */
static void test_run_async_prediction_whole_pass(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "async.db");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run --kind pipedream --ranks 2 --microbatches 4 --iterations 3 " SMALL " --tag a --db %s",
             PIPELAB_BIN, db);
    char *out = NULL;
    int rc = sh(cmd, &out);
    if (rc) fprintf(stderr, "%s\n", out);
    free(out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    store *s = NULL;
    store_run *runs = NULL;
    const store_run *meas = NULL, *sim = NULL;
    open_pair(db, "a", &s, &runs, &meas, &sim);
    CU_ASSERT_EQUAL(sim->iterations, 3);
    store_rank_metric *rm = NULL;
    int nr = 0;
    pl_err e;
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, sim->id, &rm, &nr, &e), PL_OK);
    CU_ASSERT_EQUAL(nr, 2);
    for (int q = 0; q < nr; q++) {
        double win = rm[q].busy_s + rm[q].idle_s, want = 3 * sim->iteration_time_s;
        CU_ASSERT(fabs(win - want) <= 1e-9 * want);
    }
    free(rm);
    store_runs_free(runs, 2);
    store_close(s);
    free(db);
    free(dir);
}

/* A stored run carries the files it was made from: the schedule (--from) and the profile
 * (--profile), each with its size, its FNV-1a digest and its text, so that the stored text
 * loads back to the same schedule. */
static void test_run_stores_inputs(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "in.db"), *sch = pl_test_path(dir, "my \"one\".sched"), *csv = pl_test_path(dir, "p.csv");
    pl_err e;
    sched_gen_opts go = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate("zb-h1", &go, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pl_buf t;
    pl_buf_init(&t);
    sched_write_text(g, &t);
    CU_ASSERT_EQUAL_FATAL(pl_write_file(sch, t.data, t.len, &e), PL_OK);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s profile --width 32 --depth 4 --microbatch-size 4 --reps 3 -o %s", PIPELAB_BIN, csv);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "%s run --from '%s' " SMALL " --profile %s --tag in --db %s", PIPELAB_BIN, sch, csv, db);
    char *out = NULL;
    int rc = sh(cmd, &out);
    if (rc) fprintf(stderr, "%s\n", out);
    free(out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    store *s = NULL;
    store_run *runs = NULL;
    const store_run *meas = NULL, *sim = NULL;
    open_pair(db, "in", &s, &runs, &meas, &sim);
    const char *pj = meas->params_json;
    char *role = pl_test_json_string(pj, "\"inputs\":[", "role");
    char *path = pl_test_json_string(pj, "\"inputs\":[", "path");
    char *text = pl_test_json_string(pj, "\"role\":\"schedule\"", "text");
    char *digest = pl_test_json_string(pj, "\"role\":\"schedule\"", "fnv1a64");
    char *ptext = pl_test_json_string(pj, "\"role\":\"profile\"", "text");
    CU_ASSERT_STRING_EQUAL(role ? role : "", "schedule");
    CU_ASSERT_STRING_EQUAL(path ? path : "", sch);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_STRING_EQUAL(text, t.data);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < t.len; i++) h = (h ^ (unsigned char)t.data[i]) * 0x100000001b3ull;
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)h);
    CU_ASSERT_STRING_EQUAL(digest ? digest : "", want);
    char *ptrue = NULL;
    size_t plen = 0;
    CU_ASSERT_EQUAL(pl_read_file(csv, 1 << 20, &ptrue, &plen, &e), PL_OK);
    CU_ASSERT(ptext && ptrue && strcmp(ptext, ptrue) == 0);
    sched *back = sched_read_text("stored", text, strlen(text), &e);
    CU_ASSERT(back && sched_equal(back, g));
    CU_ASSERT_STRING_EQUAL(sim->params_json, meas->params_json);
    sched_free(back);
    free(ptrue);
    free(role);
    free(path);
    free(text);
    free(digest);
    free(ptext);
    store_runs_free(runs, 2);
    store_close(s);
    pl_buf_free(&t);
    sched_free(g);
    free(db);
    free(sch);
    free(csv);
    free(dir);
}

/* The cases the memory test covers (all must agree exactly). */
enum { MEM_EQUAL, MEM_RECOMPUTE_B, MEM_RECOMPUTE_SPLIT };

/* The executor's tracked weights + gradients + optimizer + activation stash at its peak against
 * the cost model's cost_schedule_memory (cost_model_mlp with the executor's stage-input
 * checkpoint and whole-stash W part, the same split), rank by rank, exactly equal:
 *   MEM_EQUAL: no recomputation; one or several stages per rank;
 *   MEM_RECOMPUTE_B: full recomputation, whole backwards: (k - 1) inputs + one rebuilt stash;
 *   MEM_RECOMPUTE_SPLIT: full recomputation with I and W apart (zb-h1, zbv): rebuilt stashes
 *     held from I until W, several at once, which the cost model's walk over the rank's
 *     actions counts. */
static void mem_case_v(const char *kind, int p, int m, int v, sched_recompute rcp, double momentum, int expect) {
    pl_err e;
    sched_gen_opts go = {p, m, v, 0, rcp};
    sched *g = sched_generate(kind, &go, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    sched *s = sched_lower(g, &e);
    sched_free(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    exec_config c;
    exec_config_default(&c);
    c.hidden = 16;
    c.layers = 2 * s->stages;
    c.microbatch_size = 2;
    c.warmup_passes = 0;
    c.timed_passes = 1;
    c.oversubscribe = 1;
    c.momentum = momentum;
    exec_result r;
    int rc = exec_run(s, &c, &r, &e);
    if (rc) fprintf(stderr, "%s: %s\n", kind, e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, PL_OK);
    cost_memory *mem = calloc((size_t)p, sizeof *mem);
    CU_ASSERT_EQUAL_FATAL(exec_mem_predict(s, &c, mem, &e), PL_OK);
    /* MEM_RECOMPUTE_B with one stage per rank (gpipe, 1f1b), in closed form: at its peak the
     * rank holds its k - 1 other in-flight microbatches' stage inputs (microbatch x hidden
     * floats each) and one rebuilt stash, the stash that the same schedule without
     * recomputation holds k of (k = m under gpipe, min(m, p - rank) under 1f1b). */
    cost_memory *none = NULL;
    if (expect == MEM_RECOMPUTE_B && v == 0) {
        go.recompute = SCHED_RECOMPUTE_NONE;
        sched *gn = sched_generate(kind, &go, &e), *sn = gn ? sched_lower(gn, &e) : NULL;
        sched_free(gn);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sn);
        none = calloc((size_t)p, sizeof *none);
        CU_ASSERT_EQUAL_FATAL(exec_mem_predict(sn, &c, none, &e), PL_OK);
        sched_free(sn);
    }
    for (int q = 0; q < p; q++) {
        int64_t x = (int64_t)r.rank[q].model_peak_bytes;
        int ok = x == mem[q].total_bytes;
        if (none) {
            int64_t k = strcmp(kind, "gpipe") == 0 ? m : (m < p - q ? m : p - q);
            int64_t stash = none[q].activation_bytes / k;
            int64_t input = (int64_t)c.microbatch_size * c.hidden * (int64_t)sizeof(float);
            int64_t fixed = none[q].weights_bytes + none[q].grad_bytes + none[q].optimizer_bytes;
            CU_ASSERT_EQUAL(none[q].activation_bytes, k * stash);
            CU_ASSERT(stash > input);
            if (x != fixed + (k - 1) * input + stash)
                fprintf(stderr, "%s p=%d rank %d recompute: executor %lld, closed form %lld\n", kind, p, q, (long long)x,
                        (long long)(fixed + (k - 1) * input + stash));
            CU_ASSERT_EQUAL(x, fixed + (k - 1) * input + stash);
        }
        if (!ok)
            fprintf(stderr, "%s p=%d v=%d recompute %d rank %d: executor %lld, cost model %lld\n", kind, p, v, (int)rcp, q,
                    (long long)x, (long long)mem[q].total_bytes);
        CU_ASSERT(ok);
        CU_ASSERT(r.rank[q].peak.total_bytes >= r.rank[q].model_peak_bytes);
    }
    free(none);
    free(mem);
    exec_result_free(&r);
    sched_free(s);
}

static void mem_case(const char *kind, int p, int m, double momentum) {
    mem_case_v(kind, p, m, 0, SCHED_RECOMPUTE_NONE, momentum, MEM_EQUAL);
}

/* gpipe and 1f1b for p = 2..4 (and zb-h1, and momentum's optimizer state); pipedream and 2bw. */
static void test_memory_equals_cost_model(void) {
    for (int p = 2; p <= 4; p++) {
        mem_case("gpipe", p, 2 * p, 0.0);
        mem_case("1f1b", p, 2 * p, 0.0);
    }
    mem_case("1f1b", 3, 6, 0.9);
    mem_case("zb-h1", 2, 4, 0.0);
    /* several stages per rank (interleaved: 2 chunks per rank; zbv: the V placement), and full
     * recomputation for every kind */
    static const char *kinds[] = {"gpipe", "1f1b", "zb-h1", "interleaved", "zbv"};
    for (int k = 0; k < 5; k++) {
        int split = strcmp(kinds[k], "zb-h1") == 0 || strcmp(kinds[k], "zbv") == 0;
        int v = strcmp(kinds[k], "interleaved") == 0 ? 2 : 0;
        for (int p = 2; p <= 3; p++) {
            mem_case_v(kinds[k], p, 2 * p, v, SCHED_RECOMPUTE_NONE, 0.0, MEM_EQUAL);
            mem_case_v(kinds[k], p, 2 * p, v, SCHED_RECOMPUTE_FULL, 0.0, split ? MEM_RECOMPUTE_SPLIT : MEM_RECOMPUTE_B);
        }
    }
    mem_case_v("interleaved", 2, 4, 2, SCHED_RECOMPUTE_NONE, 0.9, MEM_EQUAL);
    /* weight versions that follow the schedule (sched_versions): pipedream's one per microbatch
     * in flight, 2bw's two (one on the last rank), and fewer while m < p keeps the first ranks'
     * early forwards on one version; the peak of versions and stash together */
    static const char *async[] = {"pipedream", "2bw"};
    for (int k = 0; k < 2; k++)
        for (int p = 2; p <= 4; p++) {
            mem_case(async[k], p, 1, 0.0);
            mem_case(async[k], p, p, 0.0);
            mem_case_v(async[k], p, 2 * p, 0, SCHED_RECOMPUTE_NONE, 0.9, MEM_EQUAL);
            mem_case_v(async[k], p, 2, 0, SCHED_RECOMPUTE_FULL, 0.0, MEM_EQUAL);
        }
}

/* ---------------------------------------------------------------- MPI */

/* exec_test.h. */
int have_mpirun(void) {
#ifdef PIPELAB_MPIEXEC
    return exec_mpi_available() && pl_test_exists(PIPELAB_MPIEXEC);
#else
    return 0;
#endif
}


/* Threads and MPI (2 processes on loopback) give byte-identical final weights; the MPI run
 * stores one measured and one simulated run; a failing rank ends the job with exit != 0 naming
 * the rank and action and stores nothing. */
static void test_mpi_equals_threads(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: MPI equivalence not tested");
        return;
    }
#ifdef PIPELAB_MPIEXEC
    char *dir = pl_test_tmpdir();
    char *wt = pl_test_path(dir, "w_threads.bin"), *wm = pl_test_path(dir, "w_mpi.bin"), *db = pl_test_path(dir, "mpi.db");
    char cmd[4096];
    static const char *kinds[] = {"1f1b", "zb-h1"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "%s run --kind %s --ranks 2 --microbatches 4 " SMALL " --momentum 0.5 --no-db --dump-weights %s",
                 PIPELAB_BIN, kinds[k], wt);
        CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
        snprintf(cmd, sizeof cmd, MPIENV "timeout 60 " MPIRUN " %s run --transport mpi --kind %s --ranks 2 --microbatches 4 " SMALL
                 " --momentum 0.5 --db %s --dump-weights %s", PIPELAB_BIN, kinds[k], db, wm);
        char *out = NULL;
        int rc = sh(cmd, &out);
        if (rc != 0) fprintf(stderr, "%s\n", out);
        CU_ASSERT_EQUAL(rc, 0);
        free(out);
        char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(pl_read_file(wt, 1 << 24, &a, &na, &e), PL_OK);
        CU_ASSERT_EQUAL_FATAL(pl_read_file(wm, 1 << 24, &b, &nb, &e), PL_OK);
        CU_ASSERT_EQUAL(na, 4 * 4 * (size_t)(2 * 32 * 128 + 128 + 32));
        CU_ASSERT(na == nb && memcmp(a, b, na) == 0);
        free(a);
        free(b);
    }
    CU_ASSERT_EQUAL(count_runs(db), 22); /* per run: measured, predicted, with the reuse terms, with the pass-length
                                         * term, at the rounds' later microbatches, with the reuse-distance and the
                                         * first-touch term alone, with the reuse-distance term and the kind
                                         * before, without the jitter term, with each rank's STEP at its
                                         * median round, with the sharing term */
    /* each MPI rank's worker profiles between the passes too; rank 0 gathers their times: the
     * saved profile has one worker line per rank and the prediction says where it came from (40
     * repetitions: 10 rounds, whose F each rank sends to rank 0 for the ranks' drift) */
    char *csv = pl_test_path(dir, "mpi_profile.csv");
    snprintf(cmd, sizeof cmd, MPIENV "timeout 60 " MPIRUN " %s run --transport mpi --kind 1f1b --ranks 2 --microbatches 4 " SMALL
             " --profile-reps 40 --no-db --save-profile %s", PIPELAB_BIN, csv);
    char *pout = NULL;
    int prc = sh(cmd, &pout);
    if (prc != 0) fprintf(stderr, "%s\n", pout);
    CU_ASSERT_EQUAL(prc, 0);
    CU_ASSERT(pout && strstr(pout, "between the passes") != NULL);
    free(pout);
    char *text = NULL;
    size_t len = 0;
    pl_err pe;
    CU_ASSERT_EQUAL_FATAL(pl_read_file(csv, 1 << 20, &text, &len, &pe), PL_OK);
    double steps[2] = {0, 0};
    CU_ASSERT_EQUAL(exec_profile_worker_steps(text, len, 2, steps), 0);
    CU_ASSERT(steps[0] > 0 && steps[1] > 0);
    /* and each rank's pass-length factors, sent to rank 0 with its record */
    double win[2 * EXEC_WINDOWS];
    CU_ASSERT_EQUAL(exec_profile_worker_windows(text, len, 2, win, NULL), 0);
    CU_ASSERT(win[0] > 0 && win[2 * EXEC_WINDOWS - 1] > 0);
    /* and the ranks' drift over their rounds (0 where the rounds' ratio did not persist) */
    const char *dl = strstr(text, " rank_drift=");
    double drift = -1;
    CU_ASSERT(dl && sscanf(dl, " rank_drift=%lf", &drift) == 1 && drift >= 0 && isfinite(drift));
    /* and each rank's rounds, F and the backwards, sent to rank 0 with its record: the states
     * term reads both series back, the backwards' apart from F's */
    double sf[2 * EXEC_STATE_ROUNDS], sb[2 * EXEC_STATE_ROUNDS];
    int kept = exec_profile_worker_rounds(text, len, 2, sf, sb, NULL);
    CU_ASSERT(kept >= EXEC_STATE_MIN_ROUNDS);
    int apart = 0;
    for (int k = 0; k < 2 * kept; k++) apart = apart || sb[k] != sf[k];
    CU_ASSERT(apart);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, " b="));
    free(text);
    free(csv);
    /* a failing rank */
    snprintf(cmd, sizeof cmd, MPIENV "timeout 60 " MPIRUN " %s run --transport mpi --kind 1f1b --ranks 2 --microbatches 4 " SMALL
             " --db %s --inject-fault 1:2:1", PIPELAB_BIN, db);
    char *out = NULL;
    double t0 = pl_now_s();
    int rc = sh(cmd, &out);
    CU_ASSERT(rc != 0 && rc != 124);
    CU_ASSERT(pl_now_s() - t0 < 10);
    CU_ASSERT(out && strstr(out, "rank 1, action 2") != NULL && strstr(out, "injected fault") != NULL);
    free(out);
    CU_ASSERT_EQUAL(count_runs(db), 22);
    free(wt);
    free(wm);
    free(db);
    free(dir);
#endif
}

#ifdef PIPELAB_MPIEXEC /* the helpers of the killed-rank test, which needs mpirun */
/* Lists the pids of processes named pipelab whose parent is ppid into pids (at most max);
 * returns how many. */
static int children_named_pipelab(pid_t ppid, pid_t *pids, int max) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (!open || !close) continue;
        int pp = 0;
        char st;
        if (sscanf(close + 1, " %c %d", &st, &pp) != 2) continue;
        if (pp == ppid && strncmp(open + 1, "pipelab", 7) == 0) pids[n++] = (pid_t)atoi(de->d_name);
    }
    closedir(d);
    return n;
}

/* Returns the CPU time (user + system, seconds) process pid used so far, -1 when unknown. */
static double cpu_time_s(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Returns the MPI rank of process pid (OMPI_COMM_WORLD_RANK in its environment), -1 unknown. */
static int mpi_rank_of(pid_t pid) {
    char path[64], buf[65536];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, "OMPI_COMM_WORLD_RANK=", 21) == 0) return atoi(buf + i + 21);
    return -1;
}
#endif

/* Killing one rank's process (SIGKILL) of a long MPI run makes mpirun exit non-zero within
 * seconds (bound: 10 s), naming the killed rank and the signal; the other rank, terminated by
 * mpirun, says where it stood; nothing is stored. (A killed process cannot say which action it
 * was on; test_exec_faults.c kills a rank at a given action.) */
static void test_mpi_killed_rank(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: killed-rank test skipped");
        return;
    }
#ifdef PIPELAB_MPIEXEC
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "killed.db"), *log = pl_test_path(dir, "killed.log");
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        FILE *f = freopen(log, "w", stdout);
        if (f) dup2(fileno(stdout), 2);
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        execl(PIPELAB_MPIEXEC, PIPELAB_MPIEXEC, "-np", "2", "--oversubscribe", PIPELAB_BIN, "run", "--transport", "mpi",
              "--kind", "1f1b", "--ranks", "2", "--microbatches", "4", "--width", "32", "--depth", "4", "--microbatch-size",
              "4", "--warmup", "0", "--timed", "1000000", "--no-predict", "--db", db, (char *)NULL);
        _exit(127);
    }
    /* wait for both ranks, then a moment for MPI to start and the passes to run */
    pid_t ranks[4];
    int n = 0;
    double t0 = pl_now_s();
    while ((n = children_named_pipelab(pid, ranks, 4)) < 2 && pl_now_s() - t0 < 20) usleep(20000);
    CU_ASSERT_EQUAL(n, 2);
    /* running passes: each rank used half a second of CPU (MPI start and setup take less) */
    for (double tc = pl_now_s(); n == 2 && pl_now_s() - tc < 30; usleep(20000))
        if (cpu_time_s(ranks[0]) >= 0.5 && cpu_time_s(ranks[1]) >= 0.5) break;
    CU_ASSERT(n == 2 && cpu_time_s(ranks[0]) >= 0.5 && cpu_time_s(ranks[1]) >= 0.5);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, WNOHANG), 0); /* still running */
    int killed = n >= 1 ? mpi_rank_of(ranks[n - 1]) : -1;
    CU_ASSERT(killed == 0 || killed == 1);
    double tk = pl_now_s();
    if (n >= 1) kill(ranks[n - 1], SIGKILL);
    pid_t w = 0;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && pl_now_s() - tk < 30) usleep(20000);
    double dt = pl_now_s() - tk;
    if (w == 0) { /* it hung: end our own process group */
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CU_ASSERT(w == pid);
    CU_ASSERT(dt < 10);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char *text = NULL, want[128];
    size_t len = 0;
    pl_err e;
    snprintf(want, sizeof want, "process rank %d ", killed);
    CU_ASSERT_EQUAL(pl_read_file(log, 1 << 20, &text, &len, &e), PL_OK);
    CU_ASSERT(text && strstr(text, want) != NULL && strstr(text, "signal 9") != NULL);
    snprintf(want, sizeof want, "pipelab: rank %d terminated by the MPI launcher while it", 1 - killed);
    CU_ASSERT(text && strstr(text, want) != NULL); /* the survivor says where it stood */
    if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "mpirun exited %.2f s after the kill of rank %d:\n%s\n", dt, killed, text ? text : "");
    free(text);
    CU_ASSERT_EQUAL(count_runs(db), 0);
    free(db);
    free(log);
    free(dir);
#endif
}

/* Runs `pipelab ARGS` (args: a shell word list) with its output dropped and returns its exit
 * status, its peak resident memory in bytes in *peak (wait4's ru_maxrss: that process alone). */
static int peak_of(const char *args, double *peak) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec '%s' %s >/dev/null 2>&1", PIPELAB_BIN, args);
    *peak = 0;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid) return -1;
    *peak = (double)ru.ru_maxrss * 1024.0; /* kilobytes on Linux */
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The estimate in a refusal "... needs about 1.2 GiB (1302332400 bytes...": the bytes, 0 when
 * none. */
static double refusal_bytes(const char *out) {
    const char *p = out ? strstr(out, "needs about ") : NULL;
    p = p ? strchr(p, '(') : NULL;
    return p ? strtod(p + 1, NULL) : 0;
}

/* Whether an up-front estimate est (bytes) holds a measured peak resident size: at least it and
 * within 1.5 times it; under AddressSanitizer, whose shadow memory and allocator inflate the
 * resident size, only the upper bound. */
#if defined(__SANITIZE_ADDRESS__)
#define ESTIMATE_HOLDS(est, peak) ((est) <= 1.5 * (peak))
#else
#define ESTIMATE_HOLDS(est, peak) ((est) >= (peak) && (est) <= 1.5 * (peak))
#endif

/* Checks the estimate of the command args (its refusal under limit, a budget below any run's)
 * against the peak the same command reaches when let through. */
static void check_estimate(const char *args, const char *limit) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' %s --max-memory %s", PIPELAB_BIN, args, limit);
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    double est = refusal_bytes(out), peak = 0;
    free(out);
    CU_ASSERT_EQUAL(peak_of(args, &peak), 0);
    if (!ESTIMATE_HOLDS(est, peak) || getenv("PIPELAB_TEST_VERBOSE"))
        fprintf(stderr, "\n  %s: estimate %.0f bytes, peak %.0f bytes (%.2f)\n", args, est, peak, est / peak);
    CU_ASSERT(ESTIMATE_HOLDS(est, peak));
}

/* The up-front memory estimate of a run with the transformer counts the attention scores
 * (microbatch x heads x seq x seq floats a block, in every stash in flight, the scratch and the
 * profile's slots): a long sequence is refused under a limit that its weights alone would pass,
 * and for several shapes the estimate is at least the run's measured peak and within 1.5 times
 * it; the same for the profile, which reads --max-memory and $PIPELAB_MAX_MEMORY too. */
static void test_memory_estimate_transformer(void) {
    char cmd[2048], *out = NULL;
    const char *run = "run --kind 1f1b --ranks 2 --microbatches 2 --no-db --timed 1 --no-host-probe --profile-reps 2";
    /* the audit's case: it peaked at about 1.2 GiB, which 200 MiB let through */
    snprintf(cmd, sizeof cmd, "'%s' %s --model transformer:layers=2,hidden=64,heads=1,seq=4096,microbatch=1 --max-memory 200MiB",
             PIPELAB_BIN, run);
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(out && strstr(out, "pipelab: the model does not fit: the run needs about 1.2 GiB (") != NULL &&
              strstr(out, "attention scores") != NULL && strstr(out, "more than the 200.0 MiB available (--max-memory)") != NULL);
    double est = refusal_bytes(out);
    CU_ASSERT(est > 1.2e9 && est < 1.5e9);
    free(out);
    static const char *const shapes[] = {"layers=2,hidden=64,heads=4,seq=1024,microbatch=1",
                                         "layers=2,hidden=64,heads=1,seq=256,microbatch=2", NULL};
    for (int k = 0; shapes[k]; k++) {
        char args[1024];
        snprintf(args, sizeof args, "%s --model transformer:%s", run, shapes[k]);
        /* the estimate: the refusal under a limit the schedule passes (its own check: 16 MiB) */
        check_estimate(args, "17MiB");
    }
    /* the profile: refused from the variable and from the flag, nothing written */
    char *dir = pl_test_tmpdir();
    char *csv = pl_test_path(dir, "tp.csv");
    const char *prof = "profile --reps 1 --model transformer:layers=1,hidden=64,heads=1,seq=8192,microbatch=1";
    snprintf(cmd, sizeof cmd, "PIPELAB_MAX_MEMORY=300MiB '%s' %s -o %s", PIPELAB_BIN, prof, csv);
    out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(out && strstr(out, "pipelab: the profile does not fit: profiling 1 blocks of width 64 and ffn 256 on 1 worker "
                                 "at once needs about 1.4 GiB (") != NULL &&
              strstr(out, "more than the 300.0 MiB available (PIPELAB_MAX_MEMORY)") != NULL);
    free(out);
    CU_ASSERT(!pl_test_exists(csv));
    snprintf(cmd, sizeof cmd, "'%s' %s --max-memory 300MiB -o %s", PIPELAB_BIN, prof, csv);
    out = NULL;
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(out && strstr(out, "more than the 300.0 MiB available (--max-memory)") != NULL);
    free(out);
    CU_ASSERT(!pl_test_exists(csv));
    /* its estimate against its peak */
    char args[1024];
    snprintf(args, sizeof args, "profile --reps 1 --model transformer:layers=1,hidden=64,heads=2,seq=2048,microbatch=1 -o %s", csv);
    check_estimate(args, "1MiB");
    free(csv);
    free(dir);
}

/* A transformer whose products overflow what the executor addresses is refused naming the
 * product, in run and in profile (not "hidden and microbatch size >= 1"). */
static void test_transformer_products_too_large(void) {
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"profile --reps 1 --model transformer:layers=1,hidden=65536,heads=1,seq=1048576,microbatch=1048576",
         "pipelab: the transformer's microbatch of 1048576 sequences of 1048576 tokens is 1099511627776 rows (microbatch x "
         "seq), more than the executor's 2147483647; use a smaller microbatch or seq"},
        {"run --kind 1f1b --ranks 2 --microbatches 2 --no-db --model "
         "transformer:layers=2,hidden=65536,heads=1,seq=1048576,microbatch=1048576",
         "is 1099511627776 rows (microbatch x seq), more than the executor's 2147483647"},
        {"profile --reps 1 --model transformer:layers=1,hidden=65536,heads=65536,seq=1048576,microbatch=64",
         "pipelab: the transformer block's attention scores for one microbatch (microbatch x heads x seq x seq = 64 x 65536 "
         "x 1048576 x 1048576 floats) are 1.84e+19 bytes, more than the executor can address"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd, "timeout 60 '%s' %s", PIPELAB_BIN, cases[k].args);
        int rc = sh(cmd, &out);
        if (rc != 1 || !out || !strstr(out, cases[k].want)) fprintf(stderr, "\n  %s: exit %d: %s\n", cmd, rc, out ? out : "");
        CU_ASSERT(rc == 1 && out && strstr(out, cases[k].want) != NULL);
        free(out);
    }
}

void exec_test_run_register(void) {
    static const pl_test_case cases[] = {
        {"pipelab run stores one measured and one simulated run", test_run_stores_pair},
        {"a failing run exits 1 and stores nothing", test_run_fault_stores_nothing},
        {"a diverging run: its warning, and JSON without nan", test_run_diverged},
        {"a model that does not fit is refused up front", test_run_model_too_big},
        {"the transformer's memory estimate: its attention scores, against the peak; profile's too",
         test_memory_estimate_transformer},
        {"a transformer's products too large for the executor are named", test_transformer_products_too_large},
        {"pipelab run profiles between its passes, each rank on its own core", test_run_profile_between},
        {"the again term in the prediction, the one without it stored beside", test_run_again_default},
        {"the version term in the prediction, the one without it stored beside", test_run_versions},
        {"the interruption term under --interruptions, the one without stored beside", test_run_interruptions},
        {"the interruption term prices each kind by its own part of a profile round", test_run_interruption_parts},
        {"profile --interruptions: two lines, each share a fraction", test_profile_interruptions},
        {"the kind before: a prediction stored beside, against the reuse-distance term alone", test_run_kind_before},
        {"the jitter and drift terms in the default; the other predictions beside", test_run_drift},
        {"the states term in the default: the profile's rounds side by side; without it beside", test_run_states},
        {"the sharing term in the default: the profile's ratio; without it beside", test_run_sharing},
        {"pipelab profile writes a CSV the cost model reads", test_profile_csv_loads},
        {"a stored run carries its schedule and profile files", test_run_stores_inputs},
        {"a run's host probe: CSV columns and stored params agree", test_run_host_probe},
        {"pipelab run --steady: least and most passes, CSV, table, params", test_run_steady},
        {"an asynchronous run is predicted over whole passes", test_run_async_prediction_whole_pass},
        {"tracked memory equals the cost model (gpipe, 1f1b, p=2..4)", test_memory_equals_cost_model},
        {"MPI and threads give identical weights; a failing rank", test_mpi_equals_threads},
        {"a killed MPI rank ends the job within seconds", test_mpi_killed_rank},
        {NULL, NULL}};
    pl_test_suite("exec run, profile, MPI", cases);
}
