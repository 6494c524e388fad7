/* test_concurrency.c: several processes, or threads of one, writing one file, and writers killed
 * mid-transaction. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pl_test.h"
#include "util.h"

/* The numbers: 16 processes x 1000 runs each, at once, into one new file. Runs are small
 * (4 rank rows, 8 op rows) so the test measures contention, not bulk writing. Under ASan every
 * process writes 250 runs instead (the sanitizer makes each SQLite call several times slower);
 * the process count and every check stay the same. */
#if defined(__SANITIZE_ADDRESS__)
#define PL_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PL_TEST_ASAN 1
#endif
#endif
#ifdef PL_TEST_ASAN
enum { NPROC = 16, RUNS_PER_PROC = 250, OPS_PER_RUN = 8 };
#else
enum { NPROC = 16, RUNS_PER_PROC = 1000, OPS_PER_RUN = 8 };
#endif

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
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE tag = 'p%d'", k);
        CU_ASSERT_EQUAL(tr_sql_int(path, sql), RUNS_PER_PROC);
        /* every run of every writer arrived: microbatches 8 + i for i = 0..RUNS_PER_PROC-1 */
        snprintf(sql, sizeof sql, "SELECT count(DISTINCT microbatches) FROM runs WHERE tag = 'p%d'", k);
        CU_ASSERT_EQUAL(tr_sql_int(path, sql), RUNS_PER_PROC);
    }
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM rank_metrics"), (int64_t)NPROC * RUNS_PER_PROC * 4);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM ops"), (int64_t)NPROC * RUNS_PER_PROC * OPS_PER_RUN);
    CU_ASSERT_EQUAL(tr_partial_runs(path, OPS_PER_RUN), 0);
    CU_ASSERT(tr_integrity_ok(path));
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

/* Two threads of one process storing at once, each with its own handle: on one file (WAL; the
 * write lock takes their transactions in turn), and on two files (nothing orders them: a
 * statement text shared by the process was built by both at once, and one of them could
 * prepare half of it). The threads open their handles, meet, then store THREAD_RUNS runs each,
 * so their first runs, the first of the process, start at the same moment: a fresh (forked)
 * process per round, THREAD_ROUNDS rounds. */
enum { NTHREADS = 2, THREAD_RUNS = 50, THREAD_ROUNDS = 8, THREAD_OPS = 8 };

/* One writer thread: its handle's file, its tag, the meeting point, and what it managed. */
typedef struct thread_writer {
    const char *path;
    char tag[16];
    pthread_barrier_t *start;
    int written;
    pl_err e;
} thread_writer;

/* Thread body: opens its own handle, waits for the other thread, stores THREAD_RUNS runs;
 * returns NULL, leaving the count written and the first error in w. */
static void *thread_writer_main(void *arg) {
    thread_writer *w = arg;
    store *s = NULL;
    int opened = store_open(w->path, 0, &s, &w->e) == PL_OK;
    pthread_barrier_wait(w->start);
    store_rank_metric rk[4];
    store_op *ops = tr_sample_ops(THREAD_OPS, 4);
    for (int i = 0; opened && i < THREAD_RUNS; i++) {
        store_run r;
        tr_sample_run(&r, w->tag, i);
        tr_sample_ranks(rk, 4, i);
        if (store_write_run(s, &r, rk, 4, ops, THREAD_OPS, NULL, &w->e) != PL_OK) break;
        w->written++;
    }
    free(ops);
    store_close(s);
    return NULL;
}

/* Child body of one round: runs NTHREADS writer threads tagged "r<round>t<k>", thread k on
 * paths[k % npaths], and exits 0 when every one stored all its runs (else prints the first
 * error and exits 4). */
static void threads_child(char *const *paths, int npaths, int round) {
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    thread_writer w[NTHREADS];
    pthread_t th[NTHREADS];
    memset(w, 0, sizeof w);
    for (int k = 0; k < NTHREADS; k++) {
        w[k].path = paths[k % npaths];
        w[k].start = &start;
        snprintf(w[k].tag, sizeof w[k].tag, "r%dt%d", round, k);
        if (pthread_create(&th[k], NULL, thread_writer_main, &w[k]) != 0) _exit(3);
    }
    int ok = 1;
    for (int k = 0; k < NTHREADS; k++) {
        pthread_join(th[k], NULL);
        if (w[k].written != THREAD_RUNS) {
            fprintf(stderr, "round %d, thread %d: %d of %d runs stored: %s\n", round, k, w[k].written, THREAD_RUNS,
                    w[k].e.msg);
            ok = 0;
        }
    }
    pthread_barrier_destroy(&start);
    _exit(ok ? 0 : 4);
}

/* Runs THREAD_ROUNDS rounds of NTHREADS threads on npaths new files in a fresh folder, and
 * checks that every thread stored every run, whole, into its file. */
static void check_parallel_threads(int npaths) {
    char *dir = pl_test_tmpdir();
    char *paths[NTHREADS];
    for (int f = 0; f < npaths; f++) {
        char name[32];
        snprintf(name, sizeof name, "threads-%d.db", f);
        paths[f] = pl_test_path(dir, name);
    }
    int ok = 0;
    for (int round = 0; round < THREAD_ROUNDS; round++) {
        pid_t pid = fork();
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) threads_child(paths, npaths, round);
        int st = 0;
        waitpid(pid, &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CU_ASSERT_EQUAL(ok, THREAD_ROUNDS);
    for (int round = 0; round < THREAD_ROUNDS; round++)
        for (int k = 0; k < NTHREADS; k++) {
            char sql[160];
            snprintf(sql, sizeof sql, "SELECT count(DISTINCT microbatches) FROM runs WHERE tag = 'r%dt%d'", round, k);
            CU_ASSERT_EQUAL(tr_sql_int(paths[k % npaths], sql), THREAD_RUNS);
        }
    for (int f = 0; f < npaths; f++) {
        CU_ASSERT_EQUAL(tr_sql_int(paths[f], "SELECT count(*) FROM runs"), THREAD_ROUNDS * NTHREADS / npaths * THREAD_RUNS);
        CU_ASSERT_EQUAL(tr_partial_runs(paths[f], THREAD_OPS), 0);
        CU_ASSERT(tr_integrity_ok(paths[f]));
        free(paths[f]);
    }
    pl_test_rmdir(dir);
    free(dir);
}

static void test_threads_one_file(void) { check_parallel_threads(1); }
static void test_threads_two_files(void) { check_parallel_threads(NTHREADS); }

/* Writers killed with SIGKILL at random points, KILL_REPS times: during open and schema creation
 * of a new file (every tenth kill), in the middle of a run's transaction, during the commit,
 * between runs. After EVERY kill the file must pass PRAGMA integrity_check and every run in it
 * must be whole (its 4 rank rows and KILL_OPS op rows) or absent. The seed is printed with
 * PIPELAB_TEST_VERBOSE and can be fixed with PIPELAB_TEST_SEED to replay a failure. */
enum { KILL_OPS = 400, KILL_REPS = 220 };

/* Child body: opens path, says so on fd ready, then writes runs until killed. */
static void killed_writer_child(const char *path, int ready, const store_op *ops, const store_rank_metric *rk) {
    store *cs = NULL;
    pl_err ce;
    if (store_open(path, 0, &cs, &ce) != PL_OK) _exit(3);
    if (write(ready, "r", 1) != 1) _exit(5);
    for (int i = 1;; i++) {
        store_run cr;
        tr_sample_run(&cr, "kill", i);
        if (store_write_run(cs, &cr, rk, 4, ops, KILL_OPS, NULL, &ce) != PL_OK) _exit(4);
    }
}

/* Sleeps for delay_s seconds. */
static void sleep_s(double delay_s) {
    struct timespec ts = {(time_t)delay_s, (long)((delay_s - (double)(time_t)delay_s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void test_killed_writer(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "kill.db");
    store_op *ops = tr_sample_ops(KILL_OPS, 4);
    store_rank_metric rk[4];
    tr_sample_ranks(rk, 4, 0);
    /* Time one full write to spread the kills over the length of a few transactions. */
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    store_run r;
    tr_sample_run(&r, "kill", 0);
    double t0 = pl_now_s();
    for (int i = 0; i < 5; i++) {
        char uid[32];
        snprintf(uid, sizeof uid, "timing-%d", i);
        r.uid = uid;
        CU_ASSERT_EQUAL_FATAL(store_write_run(s, &r, rk, 4, ops, KILL_OPS, NULL, &e), PL_OK);
    }
    double tw = (pl_now_s() - t0) / 5;
    store_close(s);
    unsigned seed = getenv("PIPELAB_TEST_SEED") ? (unsigned)strtoul(getenv("PIPELAB_TEST_SEED"), NULL, 10)
                                                : (unsigned)time(NULL) ^ (unsigned)getpid();
    if (getenv("PIPELAB_TEST_VERBOSE"))
        fprintf(stderr, "one write of %d ops: %.4f s; kill seed %u\n", KILL_OPS, tw, seed);
    srand(seed);
    int killed = 0, bad_integrity = 0, bad_runs = 0, fresh = 0, fresh_ok = 0;
    for (int rep = 0; rep < KILL_REPS; rep++) {
        /* Every tenth kill hits a writer that is creating a brand-new file. */
        int new_file = rep % 10 == 5;
        char *target = path;
        char fresh_name[32];
        if (new_file) {
            snprintf(fresh_name, sizeof fresh_name, "fresh-%d.db", rep);
            target = pl_test_path(dir, fresh_name);
        }
        int fds[2];
        CU_ASSERT_FATAL(pipe(fds) == 0);
        pid_t pid = fork();
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            killed_writer_child(target, fds[1], ops, rk);
        }
        close(fds[1]);
        double delay;
        if (new_file) {
            delay = 0.004 * (double)rand() / RAND_MAX; /* somewhere in open / schema creation */
        } else {
            char c;
            CU_ASSERT(read(fds[0], &c, 1) == 1);
            delay = tw * (3.0 * (double)rand() / RAND_MAX);
        }
        /* the read end stays open until the writer is gone: a writer killed during creation may
         * not have said "ready" yet, and a closed pipe would end it with SIGPIPE, not SIGKILL */
        sleep_s(delay);
        kill(pid, SIGKILL);
        int st = 0;
        waitpid(pid, &st, 0);
        close(fds[0]);
        int was_killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
        killed += was_killed;
        if (!was_killed) fprintf(stderr, "kill %d: the writer ended by itself (status %d)\n", rep, st);
        if (new_file) {
            fresh++;
            /* The file may not exist yet; when it does, it must be usable (opens, takes a run). */
            if (pl_test_exists(target)) {
                store *fs = NULL;
                pl_err fe;
                store_run fr;
                tr_sample_run(&fr, "fresh", 0);
                int ok = store_open(target, 0, &fs, &fe) == PL_OK &&
                         store_write_run(fs, &fr, rk, 4, ops, 4, NULL, &fe) == PL_OK;
                if (!ok) fprintf(stderr, "kill %d (new file): %s\n", rep, fe.msg);
                store_close(fs);
                ok = ok && tr_integrity_ok(target) && tr_partial_runs(target, -1) == 0;
                fresh_ok += ok;
            } else {
                fresh_ok++;
            }
            free(target);
            continue;
        }
        if (!tr_integrity_ok(path)) {
            bad_integrity++;
            fprintf(stderr, "kill %d (seed %u): integrity_check failed\n", rep, seed);
        }
        if (tr_partial_runs(path, KILL_OPS) != 0) {
            bad_runs++;
            fprintf(stderr, "kill %d (seed %u): a partial run\n", rep, seed);
        }
    }
    CU_ASSERT_EQUAL(killed, KILL_REPS);
    CU_ASSERT_EQUAL(bad_integrity, 0);
    CU_ASSERT_EQUAL(bad_runs, 0);
    CU_ASSERT_EQUAL(fresh_ok, fresh);
    int64_t nruns = tr_sql_int(path, "SELECT count(*) FROM runs");
    if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "%lld whole runs survived %d kills\n", (long long)nruns, killed);
    CU_ASSERT(nruns >= 5);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM runs"), tr_sql_int(path, "SELECT count(DISTINCT uid) FROM runs"));
    /* The file still opens and takes writes after all the crashes. */
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    tr_sample_run(&r, "after", 1);
    CU_ASSERT_EQUAL(store_write_run(s, &r, rk, 4, ops, 10, NULL, &e), PL_OK);
    store_close(s);
    CU_ASSERT(tr_integrity_ok(path));
    free(ops);
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

void test_concurrency_register(void) {
    static const pl_test_case cases[] = {
        {"16 processes x 1000 runs (250 under ASan) into one new file", test_parallel_writers},
        {"2 threads, a handle each, storing at once into one file (8 fresh processes)", test_threads_one_file},
        {"2 threads, a handle each, storing at once into two files (8 fresh processes)", test_threads_two_files},
        {"220 writers SIGKILLed at random points: no partial run, no corruption", test_killed_writer},
        {NULL, NULL},
    };
    pl_test_suite("concurrency", cases);
}
