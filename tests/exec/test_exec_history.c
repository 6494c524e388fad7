/* test_exec_history.c: the history of `validate_cpu.sh --broad` (experiments/validate_history.sh)
 * over real `pipelab run` databases: each grid's runs go into the history of the revision, host
 * and huge page mode that made them, a grid merged again adds nothing, the second grid prints
 * `compare --repeats` over both (the default prediction, then the one with the pass-length term),
 * another revision or another grid (HISTORY_NAME, as --offgrid names its draw) starts its own,
 * and a build of a modified tree keeps no history. The revision comes from a wrapper that answers
 * --version for the real binary, so the test does not depend on the checkout's state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_test.h"
#include "pl_test.h"

void exec_test_history_register(void);

/* Runs history_repeats on grid database db with the wrapper at pl reporting revision rev, the
 * history under out, named hname (HISTORY_NAME; NULL: the grid's NAME); returns its exit status
 * and its output in *o (free it). */
static int history_named(const char *dir, const char *pl, const char *out, const char *db, const char *rev, const char *hname,
                         char **o) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && PL='%s' OUT='%s' NAME=hist DB='%s' PL_TEST_REV='%s' %s%s "
             "bash -c 'source \"%s/../experiments/validate_history.sh\" && history_repeats' 2>&1",
             dir, pl, out, db, rev, hname ? "HISTORY_NAME=" : "", hname ? hname : "", PIPELAB_TESTS_DIR);
    return sh(cmd, o);
}

static int history(const char *dir, const char *pl, const char *out, const char *db, const char *rev, char **o) {
    return history_named(dir, pl, out, db, rev, NULL, o);
}

/* Returns how many history databases under out are named PREFIX-HOST-thp-MODE.db (-1 when
 * the listing fails). */
static int histories(const char *out, const char *prefix) {
    char cmd[2048], *o = NULL;
    snprintf(cmd, sizeof cmd, "ls '%s/history' | grep -c '^%s-.*-thp-.*\\.db$'", out, prefix);
    int rc = sh(cmd, &o), n = o ? atoi(o) : -1;
    free(o);
    return rc == 0 ? n : -1;
}

static void test_history(void) {
    char *dir = pl_test_tmpdir();
    char *pl = pl_test_path(dir, "pl");
    char *out = pl_test_path(dir, "out");
    char *db[2] = {pl_test_path(dir, "g1.db"), pl_test_path(dir, "g2.db")};
    FILE *f = fopen(pl, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "#!/bin/sh\nif [ \"$1\" = --version ]; then echo \"pipelab 0.1.0 ($PL_TEST_REV)\"; exit 0; fi\nexec '%s' \"$@\"\n",
            PIPELAB_BIN);
    fclose(f);
    char cmd[2048], *o = NULL;
    snprintf(cmd, sizeof cmd, "chmod +x '%s'", pl);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    /* two grids of one configuration: each run stores its measured run, its prediction and the
     * other predictions (hist-terms, hist-passlen) */
    for (int g = 0; g < 2; g++) {
        snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 " SMALL " --tag hist --db %s", PIPELAB_BIN,
                 db[g]);
        CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    }
    /* a modified tree: nothing kept */
    CU_ASSERT_EQUAL(history(dir, pl, out, db[0], "abc1234-dirty", &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "history: none kept for a build of revision 'abc1234-dirty'") : NULL);
    free(o);
    snprintf(cmd, sizeof cmd, "test -e '%s/history'", out);
    CU_ASSERT_NOT_EQUAL(sh(cmd, NULL), 0);
    /* the first grid, twice: one grid, no repeats */
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL(history(dir, pl, out, db[0], "abc1234", &o), 0);
        CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "history of the code of revision abc1234") : NULL);
        CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, ": 1 grid(s) in ") : NULL);
        CU_ASSERT_PTR_NULL(o ? strstr(o, "measured again") : NULL);
        free(o);
    }
    CU_ASSERT_EQUAL(histories(out, "hist-abc1234"), 1);
    /* the second: two grids, each configuration's errors over both, the other prediction's too */
    CU_ASSERT_EQUAL(history(dir, pl, out, db[1], "abc1234", &o), 0);
    if (!o || !strstr(o, ": 2 grid(s) in ")) fprintf(stderr, "\n%s\n", o ? o : "");
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, ": 2 grid(s) in ") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "the same configurations measured again") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "1 configuration, 1 measured twice or more") : NULL);
    const char *other = o ? strstr(o, "the same with the pass-length term:\n") : NULL;
    CU_ASSERT_PTR_NOT_NULL(other);
    /* its summary: from the count of configurations on */
    CU_ASSERT_PTR_NOT_NULL(other ? strstr(other, "\n1 configuration, 1 measured twice or more\nrun-to-run") : NULL);
    free(o);
    /* another revision starts its own history */
    CU_ASSERT_EQUAL(history(dir, pl, out, db[1], "def5678", &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, ": 1 grid(s) in ") : NULL);
    free(o);
    /* and so does another grid of the same revision (--offgrid's draw: HISTORY_NAME) */
    CU_ASSERT_EQUAL(history_named(dir, pl, out, db[1], "abc1234", "hist-seed7-n30", &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, ": 1 grid(s) in ") : NULL);
    free(o);
    CU_ASSERT_EQUAL(histories(out, "hist-seed7-n30-abc1234"), 1);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(db[0]);
    free(db[1]);
    free(pl);
    free(out);
    free(dir);
}

/* Runs bash script body after sourcing experiments/interruptions.sh in dir, with PL=pl and a
 * quiet_try that sets OTHERS from the file `others` in dir (validate_cpu.sh's CPU accounting,
 * which reads the whole machine, stands in as that file); returns its exit status and its output
 * in *o (free it). */
static int intr_script(const char *dir, const char *pl, const char *body, char **o) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && PL='%s' DB='%s/g.db' INTR_SETTLE_S=0 bash -c '"
             "quiet_try() { OTHERS=$(cat others); \"$@\"; }; run_contended() { [ \"$1\" -ge 3 ]; }; "
             "source \"%s/../experiments/interruptions.sh\" && %s' 2>&1",
             dir, pl, dir, PIPELAB_TESTS_DIR, body);
    return sh(cmd, o);
}

/* The interruption share sampled across a grid (experiments/interruptions.sh): each run is priced
 * at the medians of the share and the rate of each band (the gaps over 0.1 ms, the short ones)
 * over the samples so far, so one sample in an unusual
 * state moves the price only until others outvote it; a contended sample after the first is
 * logged and left out; the real `pipelab profile --interruptions` line parses. */
static void test_intr_samples(void) {
    char *dir = pl_test_tmpdir();
    char *pl = pl_test_path(dir, "pl");
    FILE *f = fopen(pl, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    /* answers the n-th `profile --interruptions` with the n-th line of `lines`, as the real one
     * words it */
    fprintf(f, "#!/bin/sh\nn=$(($(cat n) + 1)); echo $n > n\nsed -n \"${n}p\" lines | { read -r share rate ss sr; "
               "echo \"interruptions      share $share (x%% of the time in gaps over 0.1 ms up to 20 ms, $rate a second), "
               "2 workers at once, 1 s; medians over 1 windows, over the whole time x%%\"; "
               "echo \"short gaps         share $ss (x%% of the time in gaps over 0.001 ms up to 0.1 ms, $sr a second), "
               "the same medians, over the whole time x%%\"; }\n");
    fclose(f);
    char cmd[2048], *o = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && chmod +x pl && echo 0 > n && echo 0 > others && "
             "printf '0.0296 23.5 0.03 1200\\n0.005 10 0.02 1000\\n0.004 8 0.025 1100\\n0.05 30 0.4 9000\\n"
             "0.006 12 0.021 1300\\n' > lines",
             dir);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    /* five samples, the fourth contended: after each, the price */
    CU_ASSERT_EQUAL(intr_script(dir, pl,
                                "INTR_EVERY=3600; for k in 1 2 3 4 5; do [ $k != 4 ] || echo 50 > others; "
                                "intr_sample 1; echo 0 > others; echo \"price $k $INTR\"; done; "
                                "intr_due || echo not due; INTR_EVERY=0; intr_due && echo due; intr_summary",
                                &o),
                    0);
    if (!o || !strstr(o, "price 5 ")) fprintf(stderr, "\n%s\n", o ? o : "");
    /* the first alone; two: their mean; three: the middle one */
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "price 1 0.0296,23.5,0.03,1200\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "price 2 0.0173,16.75,0.025,1100\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "price 3 0.005,10,0.025,1100\n") : NULL);
    /* the contended one leaves the price as it was, and says so */
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "interruptions sample left out: other processes took 50% of the CPUs") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "price 4 0.005,10,0.025,1100\n") : NULL);
    /* four kept: the mean of the middle two */
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "price 5 0.0055,11,0.023,1150\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "not due\ndue\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "interruptions: 4 samples, share 0.4% to 2.96%, short gaps 2% to 3%, the last "
                                         "runs priced at share 0.0055, 11 a second; short gaps 0.023, 1150 a second\n")
                             : NULL);
    free(o);
    /* a contended first sample prices the runs while it is the only one, and the first clean
     * one replaces it */
    snprintf(cmd, sizeof cmd, "cd '%s' && echo 0 > n && echo 40 > others", dir);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    CU_ASSERT_EQUAL(intr_script(dir, pl, "intr_sample 1; echo \"price 1 $INTR\"; echo 0 > others; intr_sample 1; echo \"price 2 $INTR\"", &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "during the first sample; kept until a clean one comes") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "price 1 0.0296,23.5,0.03,1200\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "the first sample, taken while other processes used the CPUs, dropped") : NULL);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "price 2 0.005,10,0.02,1000\n") : NULL);
    free(o);
    /* the defaults pass; a sampling period that is not a whole number of seconds is refused
     * before any sample */
    CU_ASSERT_EQUAL(intr_script(dir, pl, "echo reached", &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "reached") : NULL);
    free(o);
    snprintf(cmd, sizeof cmd, "cd '%s' && echo 0 > n && INTR_EVERY=1.5 bash -c 'source \"%s/../experiments/interruptions.sh\"; echo reached' 2>&1",
             dir, PIPELAB_TESTS_DIR);
    CU_ASSERT_NOT_EQUAL(sh(cmd, &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "INTR_EVERY wants a whole number of seconds, got '1.5'") : NULL);
    CU_ASSERT_PTR_NULL(o ? strstr(o, "reached") : NULL);
    free(o);
    /* a line it cannot read (echo's of its arguments) stops the grid */
    snprintf(cmd, sizeof cmd, "cd '%s' && echo 0 > others", dir);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    CU_ASSERT_NOT_EQUAL(intr_script(dir, "/bin/echo", "intr_sample 1; echo reached", &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "cannot read the interruptions from") : NULL);
    CU_ASSERT_PTR_NULL(o ? strstr(o, "reached") : NULL);
    free(o);
    /* the real measurement's line parses (it measures both cores: two at least) */
    if (exec_profile_cores() < 2) {
        pl_test_skip("the real interruption measurement takes 2 cores");
        CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
        free(pl);
        free(dir);
        return;
    }
    CU_ASSERT_EQUAL(intr_script(dir, PIPELAB_BIN, "intr_sample 0.3; echo \"price $INTR\"", &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o ? strstr(o, "\nprice ") : NULL);
    const char *p = o ? strstr(o, "\nprice ") : NULL;
    double share = -1, rate = -1, ss = -1, sr = -1;
    CU_ASSERT_TRUE(p && sscanf(p, "\nprice %lf,%lf,%lf,%lf", &share, &rate, &ss, &sr) == 4 && share >= 0 && share < 0.5 &&
                   rate >= 0 && ss >= 0 && ss < 0.5 && sr >= 0);
    free(o);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(pl);
    free(dir);
}

void exec_test_history_register(void) {
    static const pl_test_case cases[] = {
        {"validate_cpu.sh --broad keeps a history per grid and revision and prints its repeats", test_history},
        {"validate_cpu.sh prices each run at the median of the interruption samples before it", test_intr_samples},
        {NULL, NULL}};
    pl_test_suite("exec validation history", cases);
}
