/* test_sim_db.c: `pipelab simulate --db F` on bad input leaves nothing behind: no new database
 * file (nor its SQLite side files, nor the folders made for it) when F did not exist, and an
 * existing database unchanged (same runs, same bytes). And what --repeat stores: the median
 * run's seed beside its rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"

/* A schedule with a --model that is neither a generator nor a file: refused before simulating. */
#define BAD_MODEL "--kind 1f1b --ranks 2 --microbatches 4 --model nosuch:layers=2"
/* What the refusal names. */
#define BAD_MODEL_WANT "model 'nosuch:layers=2' is neither a generator"

/* Runs simulate with args and --db db; returns its exit code and (malloc'd) stderr alone. */
static int simulate_db(const char *args, const char *db, char **err) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "( '%s' simulate %s --db '%s' >/dev/null )", PIPELAB_BIN, args, db);
    return pl_test_run(cmd, err);
}

/* Returns the number of runs in db (pipelab db list, CSV rows after the header), or -1. */
static int run_count(const char *db) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' db list --limit 0 --format csv --db '%s' 2>/dev/null", PIPELAB_BIN, db);
    char *out = NULL;
    int rc = pl_test_run(cmd, &out);
    int rows = -1;
    if (rc == 0 && out)
        for (const char *p = out; *p; p++) rows += *p == '\n';
    free(out);
    return rows;
}

/* Runs the shell command `what 'a' ['b']` (b may be NULL), its output dropped; returns its exit
 * code. */
static int shell(const char *what, const char *a, const char *b) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s '%s' %s%s%s", what, a, b ? "'" : "", b ? b : "", b ? "'" : "");
    int rc = pl_test_run(cmd, &out);
    free(out);
    return rc;
}

/* Checks a refusal: exit 1 and one "pipelab: " line that says what is wrong. */
static void expect_refused(int rc, const char *err) {
    int ok = rc == 1 && err && strncmp(err, "pipelab: ", 9) == 0 && strstr(err, BAD_MODEL_WANT);
    if (!ok) fprintf(stderr, "\n  want exit 1 and '%s', got exit %d and: %s\n", BAD_MODEL_WANT, rc, err ? err : "(nothing)");
    CU_ASSERT(ok);
}

/* A bad --model with --db of a new path (in folders that do not exist yet either): exit 1 naming
 * the model, and no database, side file or folder left. */
static void test_bad_model_new_db(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "new.db"), *nested = pl_test_path(dir, "a/b/new.db"), *a = pl_test_path(dir, "a");
    const char *paths[] = {db, nested};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        char *err = NULL;
        int rc = simulate_db(BAD_MODEL, paths[k], &err);
        expect_refused(rc, err);
        free(err);
        char side[4096];
        CU_ASSERT(!pl_test_exists(paths[k]));
        snprintf(side, sizeof side, "%s-wal", paths[k]);
        CU_ASSERT(!pl_test_exists(side));
        snprintf(side, sizeof side, "%s-shm", paths[k]);
        CU_ASSERT(!pl_test_exists(side));
    }
    CU_ASSERT(!pl_test_exists(a));
    /* the same command with a good model stores its run there (the refusal above was the model's) */
    char *err = NULL;
    CU_ASSERT_EQUAL(simulate_db("--kind 1f1b --ranks 2 --microbatches 4 --model uniform:layers=2,fwd_s=1e-3", db, &err), 0);
    CU_ASSERT_EQUAL(run_count(db), 1);
    free(err);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(a);
    free(nested);
    free(db);
    free(dir);
}

/* A bad --model with --db of an existing database: exit 1, and the database is neither removed
 * nor changed (same run count, same bytes). */
static void test_bad_model_existing_db(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "old.db"), *copy = pl_test_path(dir, "old.copy"), *err = NULL;
    CU_ASSERT_EQUAL_FATAL(simulate_db("--kind gpipe --ranks 2 --microbatches 2", db, &err), 0);
    free(err);
    err = NULL;
    CU_ASSERT_EQUAL_FATAL(simulate_db("--kind 1f1b --ranks 2 --microbatches 2", db, &err), 0);
    free(err);
    CU_ASSERT_EQUAL(run_count(db), 2);
    CU_ASSERT_EQUAL(shell("cp", db, copy), 0);
    err = NULL;
    int rc = simulate_db(BAD_MODEL, db, &err);
    expect_refused(rc, err);
    free(err);
    CU_ASSERT(pl_test_exists(db));
    CU_ASSERT_EQUAL(run_count(db), 2);
    CU_ASSERT_EQUAL(shell("cmp -s", db, copy), 0);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(copy);
    free(db);
    free(dir);
}

/* simulate --cv --repeat 5 stores the median run (its rows, its bubble) with its seed: the same
 * bubble as that seed's single run, stored alone; and its JSON names that seed. */
static void test_repeat_stores_median_seed(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "r.db"), *err = NULL, *out = NULL;
    const char *cfg = "--kind pipedream --ranks 4 --microbatches 4 --cv 0.3 --tcomm 0.1";
    char args[512], cmd[4096];
    snprintf(args, sizeof args, "%s --seed 7 --repeat 5 --tag rep", cfg);
    CU_ASSERT_EQUAL_FATAL(simulate_db(args, db, &err), 0);
    free(err);
    snprintf(cmd, sizeof cmd, "'%s' simulate %s --seed 7 --repeat 5 --no-db --format json", PIPELAB_BIN, cfg);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    int seed = (int)pl_test_json_number(out, "seed");
    double bubble = pl_test_json_number(out, "bubble_fraction");
    free(out);
    CU_ASSERT(seed >= 7 && seed <= 11);
    snprintf(cmd, sizeof cmd, "'%s' simulate %s --seed %d --no-db --format json", PIPELAB_BIN, cfg, seed);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_DOUBLE_EQUAL(pl_test_json_number(out, "bubble_fraction"), bubble, 1e-9);
    CU_ASSERT_EQUAL((int)pl_test_json_number(out, "seed"), seed);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' db show 1 --format json --db '%s'", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    char want[64];
    snprintf(want, sizeof want, "\"seed\": %d", seed);
    if (!out || !strstr(out, want)) fprintf(stderr, "\n  want %s in: %.400s\n", want, out ? out : "(nothing)");
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want) : NULL);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(db);
    free(dir);
}

void test_sim_db_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"bad --model, new --db: nothing is left behind", test_bad_model_new_db},
        {"bad --model, existing --db: the database is unchanged", test_bad_model_existing_db},
        {"--repeat stores the median run's seed", test_repeat_stores_median_seed},
        {NULL, NULL},
    };
    pl_test_suite("simulate leaves no database on bad input", tcases);
}
