/* test_concurrency.c: several processes writing one file, and writers killed mid-transaction. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pl_test.h"
#include "util.h"

enum { NPROC = 4, RUNS_PER_PROC = 50, OPS_PER_RUN = 40 };

/* Child body: waits for the start signal (EOF on gate), then writes RUNS_PER_PROC runs tagged
 * "p<k>"; exits 0 when all were written. */
static void writer_child(const char *path, int k, int gate) {
    char c;
    while (read(gate, &c, 1) > 0) {
    }
    close(gate);
    pl_err e;
    store *s = NULL;
    if (store_open(path, 0, &s, &e) != PL_OK) {
        fprintf(stderr, "child %d: %s\n", k, e.msg);
        _exit(3);
    }
    char tag[16];
    snprintf(tag, sizeof tag, "p%d", k);
    store_rank_metric rk[4];
    store_op *ops = tr_sample_ops(OPS_PER_RUN, 4);
    for (int i = 0; i < RUNS_PER_PROC; i++) {
        store_run r;
        tr_sample_run(&r, tag, i);
        tr_sample_ranks(rk, 4, i);
        if (store_write_run(s, &r, rk, 4, ops, OPS_PER_RUN, NULL, &e) != PL_OK) {
            fprintf(stderr, "child %d run %d: %s\n", k, i, e.msg);
            _exit(4);
        }
    }
    free(ops);
    store_close(s);
    _exit(0);
}

static void test_parallel_writers(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "out/par.db"); /* the file and folder do not exist yet */
    pid_t pids[NPROC];
    int gate[2];
    CU_ASSERT_FATAL(pipe(gate) == 0);
    for (int k = 0; k < NPROC; k++) {
        pids[k] = fork();
        CU_ASSERT_FATAL(pids[k] >= 0);
        if (pids[k] == 0) {
            close(gate[1]);
            writer_child(path, k, gate[0]);
        }
    }
    close(gate[0]);
    close(gate[1]); /* every child starts creating the same new file at once */
    int ok = 0;
    for (int k = 0; k < NPROC; k++) {
        int st = 0;
        waitpid(pids[k], &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CU_ASSERT_EQUAL(ok, NPROC);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM runs"), NPROC * RUNS_PER_PROC);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(DISTINCT uid) FROM runs"), NPROC * RUNS_PER_PROC);
    for (int k = 0; k < NPROC; k++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE tag = 'p%d'", k);
        CU_ASSERT_EQUAL(tr_sql_int(path, sql), RUNS_PER_PROC);
    }
    CU_ASSERT_EQUAL(tr_partial_runs(path, OPS_PER_RUN), 0);
    CU_ASSERT(tr_integrity_ok(path));
    tr_rmdir(dir);
    free(path);
    free(dir);
}

enum { KILL_OPS = 100000, KILL_REPS = 20 };

static void test_killed_writer(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "kill.db");
    store_op *ops = tr_sample_ops(KILL_OPS, 4);
    store_rank_metric rk[4];
    tr_sample_ranks(rk, 4, 0);
    /* Time one full write to spread the kills over the length of a transaction. */
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    store_run r;
    tr_sample_run(&r, "kill", 0);
    double t0 = pl_now_s();
    CU_ASSERT_EQUAL_FATAL(store_write_run(s, &r, rk, 4, ops, KILL_OPS, NULL, &e), PL_OK);
    double tw = pl_now_s() - t0;
    if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "one write of %d ops: %.3f s\n", KILL_OPS, tw);
    store_close(s);
    srand((unsigned)time(NULL));
    int killed = 0;
    for (int rep = 0; rep < KILL_REPS; rep++) {
        int fds[2];
        CU_ASSERT_FATAL(pipe(fds) == 0);
        pid_t pid = fork();
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            store *cs = NULL;
            pl_err ce;
            if (store_open(path, 0, &cs, &ce) != PL_OK) _exit(3);
            if (write(fds[1], "r", 1) != 1) _exit(5);
            for (int i = 1;; i++) { /* write until killed */
                store_run cr;
                tr_sample_run(&cr, "kill", i);
                if (store_write_run(cs, &cr, rk, 4, ops, KILL_OPS, NULL, &ce) != PL_OK) _exit(4);
            }
        }
        close(fds[1]);
        char c;
        CU_ASSERT(read(fds[0], &c, 1) == 1);
        close(fds[0]);
        double delay = tw * (0.02 + 1.1 * (double)rand() / RAND_MAX);
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
        killed += WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    }
    CU_ASSERT_EQUAL(killed, KILL_REPS);
    int64_t nruns = tr_sql_int(path, "SELECT count(*) FROM runs");
    CU_ASSERT(nruns >= 1);
    CU_ASSERT_EQUAL(tr_partial_runs(path, KILL_OPS), 0);
    CU_ASSERT(tr_integrity_ok(path));
    /* The file still opens and takes writes after all the crashes. */
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    tr_sample_run(&r, "after", 1);
    CU_ASSERT_EQUAL(store_write_run(s, &r, rk, 4, ops, 10, NULL, &e), PL_OK);
    store_close(s);
    CU_ASSERT(tr_integrity_ok(path));
    free(ops);
    tr_rmdir(dir);
    free(path);
    free(dir);
}

void test_concurrency_register(void) {
    static const pl_test_case cases[] = {
        {"4 processes x 50 runs into one new file", test_parallel_writers},
        {"writers killed mid-run leave no partial run", test_killed_writer},
        {NULL, NULL},
    };
    pl_test_suite("concurrency", cases);
}
