/* test_exec_profile_cores.c: `pipelab profile --concurrency P` against this process's cores, by
 * the rule `pipelab run` applies to its ranks (exec_check_cores): more threads than cores are
 * refused (exit 1, no CSV) unless --oversubscribe is given, which then warns; the same for
 * --interruptions; and the rule and its warning themselves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "exec_test.h"
#include "pl_test.h"

void exec_test_profile_cores_register(void);

/* The most cores on which the command lines run (cores + 1 threads stay small). */
#define CORES_TESTED_MAX 8

/* The rule and the warning: W workers fit on N >= W cores; more are refused naming both counts
 * and --oversubscribe, unless oversubscribed, which the warning then says. */
static void test_rule(void) {
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_check_cores(2, 2, 0, "ranks", &e), PL_OK);
    CU_ASSERT_EQUAL(exec_check_cores(3, 2, 1, "ranks", &e), PL_OK);
    CU_ASSERT_EQUAL(exec_check_cores(3, 2, 0, "ranks", &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "3 ranks but only 2 cores available; give --oversubscribe"));
    char w[256] = "untouched";
    CU_ASSERT_EQUAL(exec_oversubscribed(2, 2, "ranks", w, sizeof w), 0);
    CU_ASSERT_STRING_EQUAL(w, "untouched");
    CU_ASSERT_EQUAL(exec_oversubscribed(5, 4, "profiling threads", w, sizeof w), 1);
    CU_ASSERT_STRING_EQUAL(w, "5 profiling threads on 4 cores: oversubscribed, timings measure time-slicing");
}

/* Runs cmd, checks its exit status and that its output holds want (and not refuse when given). */
static void expect(const char *cmd, int code, const char *want, const char *refuse) {
    char *out = NULL;
    int rc = sh(cmd, &out);
    int ok = rc == code && out && (!want || strstr(out, want)) && (!refuse || !strstr(out, refuse));
    if (!ok) fprintf(stderr, "\n%s\nexit %d (want %d):\n%s\n", cmd, rc, code, out ? out : "");
    CU_ASSERT(ok);
    free(out);
}

/* On N cores: --concurrency N + 1 is refused with run's message and writes no CSV; with
 * --oversubscribe it profiles and warns; --concurrency N neither refuses nor warns; and
 * --interruptions follows the same rule. */
static void test_profile_concurrency(void) {
    int n = exec_profile_cores();
    if (n > CORES_TESTED_MAX) {
        pl_test_skip("more than 8 cores: cores + 1 profiling threads would be a large profile");
        return;
    }
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *csv = pl_test_path(dir, "p.csv");
    char cmd[2048], refused[256], warned[256];
    snprintf(refused, sizeof refused, "%d profiling threads (--concurrency) but only %d cores available; give "
             "--oversubscribe", n + 1, n);
    snprintf(warned, sizeof warned, "pipelab profile: warning: %d profiling threads (--concurrency) on %d cores: "
             "oversubscribed", n + 1, n);
    const char *shape = "--width 16 --depth 9 --microbatch-size 2 --reps 2";
    snprintf(cmd, sizeof cmd, "%s profile %s --concurrency %d -o %s", PIPELAB_BIN, shape, n + 1, csv);
    expect(cmd, 1, refused, NULL);
    CU_ASSERT(!pl_test_exists(csv));
    snprintf(cmd, sizeof cmd, "%s profile %s --concurrency %d --oversubscribe -o %s", PIPELAB_BIN, shape, n + 1, csv);
    expect(cmd, 0, warned, NULL);
    CU_ASSERT(pl_test_exists(csv));
    unlink(csv);
    snprintf(cmd, sizeof cmd, "%s profile %s --concurrency %d -o %s", PIPELAB_BIN, shape, n, csv);
    expect(cmd, 0, NULL, "oversubscribed");
    CU_ASSERT(pl_test_exists(csv));
    unlink(csv);
    snprintf(cmd, sizeof cmd, "%s profile --interruptions 0.05 --concurrency %d", PIPELAB_BIN, n + 1);
    expect(cmd, 1, refused, NULL);
    snprintf(cmd, sizeof cmd, "%s profile --interruptions 0.05 --concurrency %d --oversubscribe", PIPELAB_BIN, n + 1);
    expect(cmd, 0, warned, NULL);
    rmdir(dir);
    free(csv);
    free(dir);
}

/* The same rule for run's profile measured before it (--profile-concurrency): N + 1 threads are
 * refused without --oversubscribe (nothing runs), warned with it; N pass quietly. */
static void test_run_profile_concurrency(void) {
    int n = exec_profile_cores();
    if (n > CORES_TESTED_MAX) {
        pl_test_skip("more than 8 cores: cores + 1 profiling threads would be a large profile");
        return;
    }
    char cmd[2048], refused[256], warned[256];
    snprintf(refused, sizeof refused, "%d profiling threads (--profile-concurrency) but only %d cores available; give "
             "--oversubscribe", n + 1, n);
    snprintf(warned, sizeof warned, "pipelab run: warning: %d profiling threads (--profile-concurrency) on %d cores: "
             "oversubscribed", n + 1, n);
    const char *run = "run --kind 1f1b --ranks 1 --microbatches 2 --width 16 --depth 2 --microbatch-size 2 --timed 1 "
                      "--no-db --profile-timing before --profile-reps 2";
    snprintf(cmd, sizeof cmd, "%s %s --profile-concurrency %d", PIPELAB_BIN, run, n + 1);
    expect(cmd, 1, refused, NULL);
    snprintf(cmd, sizeof cmd, "%s %s --profile-concurrency %d --oversubscribe", PIPELAB_BIN, run, n + 1);
    expect(cmd, 0, warned, NULL);
    snprintf(cmd, sizeof cmd, "%s %s --profile-concurrency %d", PIPELAB_BIN, run, n);
    expect(cmd, 0, NULL, "oversubscribed");
}

void exec_test_profile_cores_register(void) {
    static const pl_test_case cases[] = {
        {"more workers than cores: refused, or warned with --oversubscribe (the rule)", test_rule},
        {"pipelab profile --concurrency above the cores: refused without --oversubscribe, warned with it",
         test_profile_concurrency},
        {"pipelab run --profile-concurrency above the cores: the same rule", test_run_profile_concurrency},
        {NULL, NULL}};
    pl_test_suite("exec profile cores", cases);
}
