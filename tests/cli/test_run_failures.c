/* test_run_failures.c: `pipelab run` and `pipelab profile` where they refuse or fail: under
 * mpirun a refusal every process meets alike is printed once, by rank 0, while a rank's own
 * failure is still printed by that rank; profile's MPI processes beyond the host's cores are
 * refused as run's ranks are; a store that fails after the run still prints the measured report,
 * then says it was not stored, and stores nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_rows.h"
#include "pl_test.h"

/* A small run (test_run_outputs.c's). */
#define SMALL_RUN "run --kind 1f1b --ranks 2 --microbatches 4 --width 64 --depth 4"
/* mpirun as root, as the tests run it. */
#define MPIRUN "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun"
/* The most MPI processes the core-check case starts (a host with more cores is not tested). */
#define MPI_CORES_TEST_MAX 16
/* The file-size limit of the failing store, in bytes. */
#define STORE_FILE_LIMIT_BYTES (40 * 1024)


/* Returns the times needle occurs in hay (0 for NULL). */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay ? strstr(hay, needle) : NULL; p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Returns 1 when pipelab run is built and mpirun is on PATH, else skips the test and returns 0. */
static int have_mpirun(void) {
    if (!cli_test_have_run()) {
        pl_test_skip("this build has no executor (pipelab run)");
        return 0;
    }
    char *out = NULL;
    int rc = pl_test_run("command -v mpirun >/dev/null", &out);
    free(out);
    if (rc != 0) pl_test_skip("mpirun is not on PATH");
    return rc == 0;
}

/* Runs `mpirun -np np pipelab args` in /tmp; returns its exit status and its output in *out. */
static int mpirun_pipelab(const char *mpi_flags, int np, const char *args, char **out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd /tmp && " MPIRUN " %s -np %d '%s' %s </dev/null", mpi_flags, np, PIPELAB_BIN, args);
    return pl_test_run(cmd, out);
}

/* Expects `mpirun -np 2 pipelab args` to exit with want_rc and print `message` exactly once. */
static void expect_once(const char *args, int want_rc, const char *message) {
    char *out = NULL;
    int rc = mpirun_pipelab("", 2, args, &out);
    int n = count_of(out, message);
    if (rc != want_rc || n != 1)
        fprintf(stderr, "\n  mpirun -np 2 pipelab %s: want exit %d and '%s' once, got exit %d and it %d times:\n%s\n", args,
                want_rc, message, rc, n, out ? out : "(nothing)");
    CU_ASSERT_EQUAL(rc, want_rc);
    CU_ASSERT_EQUAL(n, 1);
    free(out);
}

/* A usage error, a schedule that cannot be made, a bad --profile file and the job's processes
 * against the schedule's ranks: every process meets each alike, rank 0 alone prints it, and the
 * job exits with its status. */
static void test_mpi_refusal_once(void) {
    if (!have_mpirun()) return;
    expect_once(SMALL_RUN " --transport mpi --no-db --momentum 2", 2, "--momentum: must be below 1 (got '2')");
    expect_once("run --kind nope --ranks 2 --microbatches 4 --transport mpi --no-db", 1, "unknown schedule kind 'nope'");
    expect_once(SMALL_RUN " --transport mpi --no-db --profile /nonexistent/p.csv", 1, "/nonexistent/p.csv");
    expect_once("run --kind 1f1b --ranks 1 --microbatches 4 --width 64 --depth 2 --transport mpi --no-db --no-predict "
                "--no-host-probe",
                1, "the MPI job has 2 processes, the schedule 1 ranks");
}

/* A failure of rank 1 alone is printed by rank 1, naming it, and fails the job. */
static void test_mpi_own_failure_printed(void) {
    if (!have_mpirun()) return;
    char *out = NULL;
    int rc = mpirun_pipelab("", 2, SMALL_RUN " --transport mpi --no-db --no-predict --no-host-probe --inject-fault 1:1", &out);
    int n = count_of(out, "pipelab: run failed: rank 1, action 1");
    if (rc == 0 || n != 1) fprintf(stderr, "\n  injected fault on rank 1: exit %d, output:\n%s\n", rc, out ? out : "(nothing)");
    CU_ASSERT_NOT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(n, 1);
    free(out);
}

/* `pipelab profile --transport mpi` with more processes than the host's cores: refused without
 * pipelab's --oversubscribe (mpirun's alone is not enough), once, before anything is measured. */
static void test_mpi_profile_cores(void) {
    if (!have_mpirun()) return;
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncores < 1 || ncores + 1 > MPI_CORES_TEST_MAX) {
        pl_test_skip("too many cores for a job of one process more than the cores");
        return;
    }
    char *out = NULL, want[256];
    int np = (int)ncores + 1;
    int rc = mpirun_pipelab("--oversubscribe", np, "profile --transport mpi --width 64 --depth 2 --reps 3", &out);
    snprintf(want, sizeof want, "pipelab: %d MPI processes but only %ld cores available; give --oversubscribe", np, ncores);
    int n = count_of(out, want);
    if (rc != 1 || n != 1) fprintf(stderr, "\n  profile on %d processes: exit %d, output:\n%s\n", np, rc, out ? out : "(nothing)");
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_PTR_NULL(strstr(out ? out : "", "layer,name")); /* no profile written */
    free(out);
}

/* A store that fails after the run (here: a file-size limit, RLIMIT_FSIZE, below what the run's
 * write-ahead log needs, so SQLite's write fails as on a full disk) prints the measured report
 * in --format csv all the same, then the error saying it was not stored, exits 1, and leaves
 * the database as it was. */
static void test_store_failure_prints(void) {
    if (!cli_test_have_run()) {
        pl_test_skip("this build has no executor (pipelab run)");
        return;
    }
    char *out = NULL;
    if (pl_test_run("command -v prlimit >/dev/null", &out) != 0) {
        free(out);
        pl_test_skip("prlimit (util-linux) is not on PATH");
        return;
    }
    free(out);
    char *dir = pl_test_tmpdir(), cmd[4096], *before = NULL, *after = NULL;
    /* a database with one run in it (its schema made) */
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout 60 '%s' " SMALL_RUN " --timed 2 --no-host-probe --db r.db >/dev/null",
             dir, PIPELAB_BIN);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' db list --limit 0 --format csv --db '%s/r.db'", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &before), 0);
    /* files of 40 KiB at most (prlimit's bytes; a shell's ulimit -f counts blocks of 512 or
     * 1024 bytes): room for SQLite's shared-memory file (32 KiB), not for a traced run's log;
     * SIGXFSZ ignored, so that the write fails with EFBIG rather than killing the process */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && trap '' XFSZ && timeout 60 prlimit --fsize=%d '%s' " SMALL_RUN
             " --timed 2 --no-host-probe --trace --db r.db --format csv",
             dir, STORE_FILE_LIMIT_BYTES, PIPELAB_BIN);
    out = NULL;
    int rc = pl_test_run(cmd, &out);
    const char *text = out ? out : "";
    const char *header = strstr(text, "kind,ranks,stages,microbatches");
    const char *row0 = strstr(text, "\n1f1b,2,2,4,"); /* rank 0's row */
    const char *err = strstr(text, "pipelab: the run's results were printed but not stored in r.db (nothing of the run "
                                   "was written): ");
    if (rc != 1 || !header || !row0 || !err || err < row0)
        fprintf(stderr, "\n  failing store: exit %d, output:\n%s\n", rc, text);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_PTR_NOT_NULL(header);
    CU_ASSERT_PTR_NOT_NULL(row0);
    CU_ASSERT_PTR_NOT_NULL(err);
    CU_ASSERT(err && row0 && err > row0); /* the report first, then the error */
    CU_ASSERT_EQUAL(count_of(text, "pipelab:"), 1);
    /* nothing of the failed run stored */
    snprintf(cmd, sizeof cmd, "'%s' db list --limit 0 --format csv --db '%s/r.db'", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &after), 0);
    CU_ASSERT(before && after && strcmp(before, after) == 0);
    free(before);
    free(after);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

void test_run_failures_cli_register(void) {
    static const pl_test_case cases[] = {
        {"run under mpirun: a refusal of every process printed once", test_mpi_refusal_once},
        {"run under mpirun: a rank's own failure printed by it", test_mpi_own_failure_printed},
        {"profile under mpirun: more processes than cores refused", test_mpi_profile_cores},
        {"run: a failed store prints the report, stores nothing", test_store_failure_prints},
        {NULL, NULL},
    };
    pl_test_suite("cli run failures", cases);
}
