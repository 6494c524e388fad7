/* test_run_outputs.c: `pipelab run` and where it writes. An output that could not be written
 * after the run (the database, --dump-weights, --save-profile) is refused before it, within a
 * moment, naming the path and what is wrong, and nothing is made; a stored run holds its measured
 * run and its predictions, each prediction naming the measured run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_rows.h"
#include "pl_test.h"

/* A small run; LONG_RUN's timed passes take tens of seconds, so that a refusal after the run,
 * not before it, shows as a slow one. */
#define SMALL_RUN "run --kind 1f1b --ranks 2 --microbatches 4 --width 64 --depth 4"
#define LONG_RUN SMALL_RUN " --timed 100000 --no-host-probe"
/* How long a refusal before the run may take, in seconds (it takes milliseconds). */
#define REFUSE_MAX_S 5.0
/* The user an unprivileged case runs as (root writes through permission bits). */
#define NOBODY "65534"

/* Returns a monotonic time in seconds. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs `as pipelab LONG_RUN args` in dir (as: a prefix such as setpriv's, or ""), expects exit 1
 * within REFUSE_MAX_S with stderr holding want; returns 1 when it did. */
static int refused(const char *dir, const char *as, const char *args, const char *want) {
    char cmd[4096], *err = NULL;
    snprintf(cmd, sizeof cmd, "( cd '%s' && timeout 60 %s '%s' " LONG_RUN " %s >/dev/null )", dir, as, PIPELAB_BIN, args);
    double t0 = now_s();
    int rc = pl_test_run(cmd, &err);
    double dt = now_s() - t0;
    int ok = rc == 1 && dt < REFUSE_MAX_S && err && strncmp(err, "pipelab: ", 9) == 0 && strstr(err, want);
    if (!ok)
        fprintf(stderr, "\n  %s: want exit 1 within %g s and '%s', got exit %d after %.2f s and: %s\n", args, REFUSE_MAX_S,
                want, rc, dt, err ? err : "(nothing)");
    free(err);
    return ok;
}

/* Runs a shell command in dir; returns its exit code. */
static int in_dir(const char *dir, const char *what) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s", dir, what);
    int rc = pl_test_run(cmd, &out);
    free(out);
    return rc;
}

/* A file where the database's folder goes, a missing folder for --dump-weights and
 * --save-profile, a folder where a file goes: each refused before the run, nothing made. */
static void test_outputs_refused(void) {
    if (!cli_test_have_run()) {
        pl_test_skip("this build has no executor (pipelab run)");
        return;
    }
    char *dir = pl_test_tmpdir();
    CU_ASSERT_EQUAL_FATAL(in_dir(dir, "mkdir results && touch results/out"), 0);
    /* the default database, results/out/pipelab.db, and one below it */
    CU_ASSERT(refused(dir, "", "", "--db results/out/pipelab.db: results/out is a file, not a folder"));
    CU_ASSERT(refused(dir, "", "--db results/out/a/x.db", "--db results/out/a/x.db: results/out is a file, not a folder"));
    CU_ASSERT(refused(dir, "", "--db results", "--db results: results is a folder, not a file"));
    CU_ASSERT(refused(dir, "", "--no-db --dump-weights nodir/w.bin", "--dump-weights nodir/w.bin: the folder nodir does not exist"));
    CU_ASSERT(refused(dir, "", "--no-db --dump-weights results/out/w.bin",
                      "--dump-weights results/out/w.bin: results/out is a file, not a folder"));
    CU_ASSERT(refused(dir, "", "--no-db --save-profile results", "--save-profile results: results is a folder, not a file"));
    if (pl_test_exists("/proc/self"))
        CU_ASSERT(refused(dir, "", "--no-db --save-profile /proc/nope/p.csv",
                          "--save-profile /proc/nope/p.csv: the folder /proc/nope does not exist"));
    /* nothing made: only what the test put there */
    CU_ASSERT_EQUAL(in_dir(dir, "test \"$(find . | sort | tr '\\n' ' ')\" = '. ./results ./results/out '"), 0);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* A folder this user cannot write (root: run as nobody, where setpriv can): the database's, new
 * or below missing folders, and --dump-weights' are refused before the run. */
static void test_outputs_read_only_folder(void) {
    if (!cli_test_have_run()) {
        pl_test_skip("this build has no executor (pipelab run)");
        return;
    }
    const char *as = "";
    char probe[2048], *out = NULL;
    if (geteuid() == 0) {
        as = "setpriv --reuid " NOBODY " --regid " NOBODY " --clear-groups";
        snprintf(probe, sizeof probe, "%s '%s' run --help", as, PIPELAB_BIN);
        int rc = pl_test_run(probe, &out);
        free(out);
        if (rc != 0) {
            pl_test_skip("root without setpriv, or the build out of nobody's reach: read-only folder not tested");
            return;
        }
    }
    char *dir = pl_test_tmpdir();
    CU_ASSERT_EQUAL_FATAL(chmod(dir, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(in_dir(dir, "mkdir -p results/out ro && chmod 555 results/out ro"), 0);
    CU_ASSERT(refused(dir, as, "", "--db results/out/pipelab.db: the folder results/out is read-only"));
    CU_ASSERT(refused(dir, as, "--db ro/a/b/x.db", "--db ro/a/b/x.db: the folder ro is read-only"));
    CU_ASSERT(refused(dir, as, "--no-db --dump-weights ro/w.bin", "--dump-weights ro/w.bin: the folder ro is read-only"));
    CU_ASSERT_EQUAL(in_dir(dir, "test \"$(find . | sort | tr '\\n' ' ')\" = '. ./results ./results/out ./ro '"), 0);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* A run stored in a new database (in folders that do not exist yet) holds one measured run and
 * its predictions beside it: its own (uid "prediction-" and the measured run's) and the others
 * (each uid ending in '@' and the measured run's), all simulated. */
static void test_run_stores_all(void) {
    if (!cli_test_have_run()) {
        pl_test_skip("this build has no executor (pipelab run)");
        return;
    }
    char *dir = pl_test_tmpdir();
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && timeout 60 '%s' " SMALL_RUN " --timed 2 --db a/b/r.db >/dev/null && '%s' db list --limit 0 --format csv "
             "--db a/b/r.db",
             dir, PIPELAB_BIN, PIPELAB_BIN);
    int rc = pl_test_run(cmd, &out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    /* the rows: id,uid,utc_time,kind,... */
    char measured[256] = "";
    int n_measured = 0, n_sim = 0, n_own = 0, n_linked = 0;
    char *save = NULL;
    char *rows = strchr(out, '\n'); /* after the header */
    for (char *line = rows ? strtok_r(rows, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
        char uid[256] = "", kind[32] = "";
        if (sscanf(line, "%*[^,],%255[^,],%*[^,],%31[^,]", uid, kind) != 2) continue;
        if (strcmp(kind, "measured") == 0 && ++n_measured == 1) snprintf(measured, sizeof measured, "%s", uid);
        n_sim += strcmp(kind, "simulated") == 0;
    }
    save = NULL;
    char *again = NULL;
    snprintf(cmd, sizeof cmd, "'%s' db list --limit 0 --format csv --db '%s/a/b/r.db'", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &again), 0); /* the first walk cut out into pieces */
    for (char *line = again ? strtok_r(again, "\n", &save) : NULL; line && measured[0]; line = strtok_r(NULL, "\n", &save)) {
        char uid[256] = "", kind[32] = "", own[300];
        if (sscanf(line, "%*[^,],%255[^,],%*[^,],%31[^,]", uid, kind) != 2 || strcmp(kind, "simulated") != 0) continue;
        snprintf(own, sizeof own, "prediction-%s", measured);
        n_own += strcmp(uid, own) == 0;
        size_t lu = strlen(uid), lm = strlen(measured);
        n_linked += lu > lm + 1 && strcmp(uid + lu - lm, measured) == 0 && uid[lu - lm - 1] == '@';
    }
    if (n_measured != 1 || n_own != 1 || n_sim < 2 || n_own + n_linked != n_sim)
        fprintf(stderr, "\n  stored: %d measured, %d simulated (%d its own, %d others linked)\n", n_measured, n_sim, n_own,
                n_linked);
    CU_ASSERT_EQUAL(n_measured, 1);
    CU_ASSERT_EQUAL(n_own, 1);
    CU_ASSERT(n_sim >= 2);
    CU_ASSERT_EQUAL(n_own + n_linked, n_sim);
    free(again);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

void test_run_outputs_cli_register(void) {
    static const pl_test_case cases[] = {
        {"run: outputs refused before the run", test_outputs_refused},
        {"run: a read-only folder refused before the run", test_outputs_read_only_folder},
        {"run: the measured run stored with its predictions", test_run_stores_all},
        {NULL, NULL},
    };
    pl_test_suite("cli run outputs", cases);
}
