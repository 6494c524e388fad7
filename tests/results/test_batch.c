/* test_batch.c: a batch of runs (store_begin, store_commit, store_rollback) is stored all or
 * none: a write failing in the middle, a rollback, a close or a crash before the commit leave
 * none of its runs; a failing write inside a batch leaves nothing of its own run; readers see the
 * batch only once committed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pl_test.h"
#include "util.h"

/* The rank rows of a sample run (tr_sample_run: 4 ranks). */
enum { BATCH_RANKS = 4 };

/* Writes sample run `index` under uid into s (with its 4 rank rows, or rank 0 twice when
 * bad_ranks); returns store_write_run's code. */
static int write_one(store *s, const char *uid, int index, int bad_ranks, int64_t *id, pl_err *e) {
    store_run r;
    tr_sample_run(&r, "batch", index);
    r.uid = uid;
    store_rank_metric m[BATCH_RANKS];
    tr_sample_ranks(m, BATCH_RANKS, index);
    if (bad_ranks) m[1].rank = m[0].rank;
    return store_write_run(s, &r, m, BATCH_RANKS, NULL, 0, id, e);
}

/* Returns the number of runs in path (-1 on error). */
static int64_t count_runs(const char *path) { return tr_sql_int(path, "SELECT count(*) FROM runs"); }

/* Opens a fresh database dir/name for writing into *s; returns its malloc'd path. */
static char *fresh(const char *dir, const char *name, store **s) {
    char *path = pl_test_path(dir, name);
    pl_err e;
    pl_err_clear(&e);
    *s = NULL;
    CU_ASSERT_EQUAL(store_open(path, 0, s, &e), PL_OK);
    return path;
}

/* A committed batch stores every run, whole, under the ids its writes gave. */
static void test_batch_commit(void) {
    char *dir = pl_test_tmpdir();
    store *s;
    char *path = fresh(dir, "commit.db", &s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_err e;
    pl_err_clear(&e);
    int64_t id[3] = {0, 0, 0};
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "c-measured", 1, 0, &id[0], &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "prediction-c-measured", 2, 0, &id[1], &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "prediction-x@c-measured", 4, 0, &id[2], &e), PL_OK);
    CU_ASSERT_EQUAL(store_commit(s, &e), PL_OK);
    store_close(s);
    CU_ASSERT_EQUAL(count_runs(path), 3);
    CU_ASSERT_EQUAL(tr_partial_runs(path, -1), 0);
    CU_ASSERT(id[0] > 0 && id[1] > id[0] && id[2] > id[1]);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT id FROM runs WHERE uid = 'prediction-c-measured'"), id[1]);
    CU_ASSERT(tr_integrity_ok(path));
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* The second write of a batch failing (its uid already stored by the first) leaves none of the
 * batch once rolled back, and the store takes a new write or batch afterwards. */
static void test_batch_failure_stores_none(void) {
    char *dir = pl_test_tmpdir();
    store *s;
    char *path = fresh(dir, "fail.db", &s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(write_one(s, "before", 0, 0, NULL, &e), PL_OK); /* an earlier run stays */
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "f-measured", 1, 0, NULL, &e), PL_OK);
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(write_one(s, "f-measured", 2, 0, NULL, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "already stored"));
    store_rollback(s);
    CU_ASSERT_EQUAL(count_runs(path), 1);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM runs WHERE uid = 'f-measured'"), 0);
    CU_ASSERT_EQUAL(tr_partial_runs(path, -1), 0);
    /* the handle goes on: a plain write, then a batch */
    CU_ASSERT_EQUAL(write_one(s, "after", 3, 0, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "f-measured", 1, 0, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(store_commit(s, &e), PL_OK);
    store_close(s);
    CU_ASSERT_EQUAL(count_runs(path), 3);
    CU_ASSERT(tr_integrity_ok(path));
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* A write that fails after its runs row went in (a rank given twice) leaves nothing of its run
 * in the batch: committing the rest stores the runs before it, whole. */
static void test_batch_failed_run_undone(void) {
    char *dir = pl_test_tmpdir();
    store *s;
    char *path = fresh(dir, "savepoint.db", &s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "s-1", 1, 0, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "s-2", 2, 1, NULL, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(store_commit(s, &e), PL_OK);
    store_close(s);
    CU_ASSERT_EQUAL(count_runs(path), 1);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM runs WHERE uid = 's-2'"), 0);
    CU_ASSERT_EQUAL(tr_partial_runs(path, -1), 0);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* Another handle sees nothing of an open batch, and all of it once committed; closing a handle
 * with its batch open stores none of it. */
static void test_batch_visibility_and_close(void) {
    char *dir = pl_test_tmpdir();
    store *s;
    char *path = fresh(dir, "visible.db", &s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "v-1", 1, 0, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "v-2", 2, 0, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(count_runs(path), 0);
    CU_ASSERT_EQUAL(store_commit(s, &e), PL_OK);
    CU_ASSERT_EQUAL(count_runs(path), 2);
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_OK);
    CU_ASSERT_EQUAL(write_one(s, "v-3", 3, 0, NULL, &e), PL_OK);
    store_close(s); /* the batch still open */
    CU_ASSERT_EQUAL(count_runs(path), 2);
    CU_ASSERT(tr_integrity_ok(path));
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* A process killed in the middle of a batch (one run written, the next not yet) leaves none of
 * it, and a sound file. */
static void test_batch_killed(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "killed.db");
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        pl_err e;
        store *s = NULL;
        if (store_open(path, 0, &s, &e) != PL_OK || store_begin(s, &e) != PL_OK ||
            write_one(s, "k-measured", 1, 0, NULL, &e) != PL_OK)
            _exit(3);
        raise(SIGKILL);
        _exit(4);
    }
    int st = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CU_ASSERT_EQUAL(count_runs(path), 0);
    CU_ASSERT(tr_integrity_ok(path));
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

/* What a batch refuses: a second one open, a commit without one, one on a read-only handle;
 * store_rollback without a batch (or a store) does nothing. */
static void test_batch_misuse(void) {
    char *dir = pl_test_tmpdir();
    store *s;
    char *path = fresh(dir, "misuse.db", &s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_commit(s, &e), PL_EINTERNAL);
    store_rollback(s);
    store_rollback(NULL);
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_begin(s, &e), PL_EINTERNAL);
    CU_ASSERT_EQUAL(store_commit(s, &e), PL_OK); /* the first one, still open */
    store_close(s);
    store *r = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 1, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(store_begin(r, &e), PL_EINTERNAL);
    store_close(r);
    CU_ASSERT_EQUAL(count_runs(path), 0);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

void test_batch_register(void) {
    static const pl_test_case cases[] = {
        {"batch_commit", test_batch_commit},
        {"batch_failure_stores_none", test_batch_failure_stores_none},
        {"batch_failed_run_undone", test_batch_failed_run_undone},
        {"batch_visibility_and_close", test_batch_visibility_and_close},
        {"batch_killed", test_batch_killed},
        {"batch_misuse", test_batch_misuse},
        {NULL, NULL},
    };
    pl_test_suite("results batch", cases);
}
