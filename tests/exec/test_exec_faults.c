/* test_exec_faults.c: the executor under faults, on both transports. Every fault (an error, a
 * message of the wrong size, a memory budget, a worker that vanishes, a killed process, a send
 * that no receive matches, a receive missing from a list, a message never sent) must stop the
 * run within seconds with a non-zero exit and a message naming the rank and the action (or the
 * sender, receiver and message), store nothing, and leave no thread running and no leak (ASan's
 * leak check runs in the CLI processes of the threads transport). */
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec.h"
#include "exec_drive.h"
#include "exec_int.h"
#include "exec_test.h"
#include "pl_sched.h"
#include "pl_test.h"
#include "platform/platform.h"
#include "store.h"

void exec_test_faults_register(void);

/* The bound on the time from a fault to the end of the run (seconds; generous for a loaded
 * 2-core machine: the runs here stop in well under a second, MPI ones in about one). */
#define FAULT_BOUND_S 10.0

/* The small run every CLI case uses: 1f1b on 2 ranks, 4 microbatches, a model of width 32 and
 * depth 4 (messages of 4 x 32 floats = 512 bytes), 1 warm-up and 2 timed passes. */
#define RUN_ARGS "run --kind 1f1b --ranks 2 --microbatches 4 --width 32 --depth 4 --microbatch-size 4 " \
                 "--warmup 1 --timed 2 --no-predict"



/* Returns the number of runs in the database at path, -1 when it cannot be read. */
static long count_runs(const char *path) {
    sqlite3 *db = NULL;
    long n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM runs", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

/* Returns 1 when PRAGMA integrity_check of the database at path says "ok". */
static int db_intact(const char *path) {
    sqlite3 *db = NULL;
    int ok = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            ok = strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return ok;
}

/* Makes a database holding one good measured run (so a failing run has something to spoil);
 * returns its path (free it) or NULL. */
static char *db_with_one_run(const char *dir) {
    char *db = pl_test_path(dir, "faults.db");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s " RUN_ARGS " --db %s", PIPELAB_BIN, db);
    char *out = NULL;
    int rc = pl_test_run(cmd, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out);
    free(out);
    if (rc != 0 || count_runs(db) != 1) {
        free(db);
        return NULL;
    }
    return db;
}

/* One fault of the CLI matrix: the flags that cause it and what the message must say. */
typedef struct fault_case {
    const char *name;
    const char *flags;     /* added to RUN_ARGS */
    const char *says[3];   /* substrings the output must hold (NULL ends) */
    const char *threads;   /* one more for the threads transport only, or NULL */
    const char *mpi;       /* one more for MPI only, or NULL */
    int killed;            /* 1: a process dies with SIGKILL (no message from it) */
    const char *mpi_or;    /* MPI: this one will do instead of `mpi` (which rank times out first
                            * depends on when each started waiting), or NULL */
} fault_case;

static const fault_case cases[] = {
    {"an injected error", "--inject-fault error:1:3",
     {"rank 1, action 3 (1RECV_F1), pass 0: injected fault", NULL}, NULL, NULL, 0, NULL},
    {"a message of the wrong size", "--inject-fault size:0:1",
     {"rank 1, action 1 (1RECV_F0), pass 0: message from rank 0 has 508 bytes, expected 512", NULL}, NULL, NULL, 0, NULL},
    /* rank 0 needs 154624 bytes at its second F (two microbatches in flight), rank 1 less: the
     * budget stops rank 0 alone, and rank 1 must not wait for it */
    {"a memory budget", "--mem-budget 150000",
     {"rank 0, action 3 (0F1), pass 0: out of its memory budget: 154624 bytes in use, budget 150000 bytes", NULL},
     NULL, NULL, 0, NULL},
    {"a worker that vanishes", "--inject-fault exit:1:4:1",
     {"rank 1, action 4 (1B0), pass 1: the worker thread ended in the middle of its list without reporting", NULL}, NULL, NULL, 0, NULL},
    /* a send that no receive matches: found at the next barrier or at the end of the run */
    {"a send no receive matches", "--inject-fault extra-send:0:1",
     {"rank 0 sent activations of stage 1 microbatch 0 to rank 1, which never received them", NULL},
     "(1 message left in its mailbox at the barrier between passes)", "(5 sent, 4 received, at the barrier between passes)", 0, NULL},
    {"a send no receive matches, last pass", "--inject-fault extra-send:1:1:2",
     {"rank 1 sent gradients of stage 0 microbatch 8 to rank 0, which never received them", "at the end of the run", NULL},
     NULL, NULL, 0, NULL},
    /* a receive missing from the receiver's list: its compute finds the input missing */
    {"a receive missing from the list", "--inject-fault drop-recv:1:1",
     {"rank 1, action 2 (1F0), pass 0: forward of stage 1 microbatch 0 before its input arrived (the activations rank 0 "
      "sends were not received: no 1RECV_F0 ran)", NULL}, NULL, NULL, 0, NULL},
    /* threads: every rank waits, found at once (the timeout is 30 s) and both named; MPI: the
     * first rank whose wait reaches the timeout (2 s) names itself and its action */
    {"a message that is never sent", "--inject-fault drop-send:0:1",
     {"rank 1 waits for activations of stage 1 microbatch 0 from rank 0", NULL},
     "cannot make progress (every running rank waits): rank 0 waits for gradients of stage 0 microbatch 0 from rank 1; "
     "rank 1 waits for activations of stage 1 microbatch 0 from rank 0 [rank 0 at action 5 (0RECV_B0) of pass 0; rank 1 "
     "at action 1 (1RECV_F0) of pass 0]",
     "rank 1, action 1 (1RECV_F0), pass 0: timed out after 2 s", 0,
     "rank 0, action 5 (0RECV_B0), pass 0: timed out after 2 s: rank 0 waits for gradients of stage 0 microbatch 0 from rank 1"},
    /* MPI: mpirun names the dead rank; the survivor, terminated by mpirun, says what it waited
     * for (a killed process cannot say which action it was on). Threads: the whole run dies. */
    {"a rank killed with SIGKILL", "--inject-fault kill:1:4:1", {NULL}, NULL,
     "process rank 1 with PID", 1, NULL},
};

/* Runs one case on one transport against db (holding `before` runs) and checks the exit, the
 * message, the time and the database. */
static void run_case(const fault_case *fc, int mpi, const char *db, long before) {
    char cmd[4096];
#ifdef PIPELAB_MPIEXEC
    if (mpi)
        snprintf(cmd, sizeof cmd, MPIENV "timeout 60 " MPIRUN " %s " RUN_ARGS " --transport mpi --timeout 2 %s --db %s",
                 PIPELAB_BIN, fc->flags, db);
    else
#endif
        snprintf(cmd, sizeof cmd, "timeout 60 %s " RUN_ARGS " --timeout 30 %s --db %s", PIPELAB_BIN, fc->flags, db);
    char *out = NULL;
    double t0 = pl_now_s();
    int rc = pl_test_run(cmd, &out);
    double dt = pl_now_s() - t0;
    const char *tr = mpi ? "mpi" : "threads";
    int ok = 1;
    if (fc->killed && !mpi) ok = rc == 137 || rc == -1; /* the whole run died (no message) */
    else if (mpi) ok = rc != 0 && rc != 124;
    else ok = rc == 1; /* a failed run; not a crash, a leak report (ASan) or the timeout */
    for (int i = 0; i < 3 && fc->says[i]; i++) ok &= out && strstr(out, fc->says[i]) != NULL;
    const char *extra = mpi ? fc->mpi : fc->threads;
    if (extra) ok &= out && (strstr(out, extra) != NULL || (mpi && fc->mpi_or && strstr(out, fc->mpi_or) != NULL));
    if (fc->killed && mpi)
        ok &= out && strstr(out, "pipelab: rank 0 terminated by the MPI launcher while it waited: rank 0 waits for "
                                 "gradients of stage 0 microbatch 4 from rank 1") != NULL;
    ok &= dt < FAULT_BOUND_S;
    long after = count_runs(db);
    ok &= after == before && db_intact(db);
    if (!ok || getenv("PIPELAB_TEST_VERBOSE"))
        fprintf(stderr, "%s, %s: exit %d after %.2f s, %ld runs stored (before %ld):\n%s\n", fc->name, tr, rc, dt, after,
                before, out ? out : "");
    CU_ASSERT(ok);
    free(out);
}

/* Returns the 0-based index in rank r's lowered list of the action of kind k, stage st and
 * microbatch mb, -1 when there is none. */
static long find_action(const sched *s, int r, sched_kind k, int st, int mb) {
    for (size_t i = 0; i < s->rank[r].n; i++) {
        const sched_action *a = &s->rank[r].acts[i];
        if (a->kind == (int)k && a->stage == st && a->mb == mb) return (long)i;
    }
    return -1;
}

/* Reads start and end of the first timed pass's op `action` of rank r from the database at path
 * (its only run); returns 1 when found. */
static int op_times(const char *path, int r, const char *action, double *start, double *end) {
    sqlite3 *db = NULL;
    int ok = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT start_s, end_s FROM ops WHERE rank = ?1 AND action = ?2 ORDER BY seq LIMIT 1", -1, &st,
                               NULL) == SQLITE_OK) {
            sqlite3_bind_int(st, 1, r);
            sqlite3_bind_text(st, 2, action, -1, SQLITE_STATIC);
            if (sqlite3_step(st) == SQLITE_ROW) {
                *start = sqlite3_column_double(st, 0);
                *end = sqlite3_column_double(st, 1);
                ok = 1;
            }
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return ok;
}

/* A receive waits where its data is needed, not where the list has the RECV. zb-h1 on 2 ranks
 * lists rank 0's 0RECV_B1 before 0F2, which does not need that gradient; rank 1 sends it
 * (1SEND_B1) 0.25 s late (delay-send, in the first timed pass). Rank 0 must have finished F2
 * before that message could exist (before 1SEND_B1's start + 0.25 s, on the run's one clock),
 * where a receive that blocks in list order could start F2 only after the message arrived; the
 * compute that needs it (0I1) starts after it. An ordering with a margin of the whole delay, not
 * a speed: the run is traced (--trace) and read back from the database. */
static void late_message_case(int mpi) {
    pl_err e;
    sched_gen_opts o = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate("zb-h1", &o, &e);
    sched *s = g ? sched_lower(g, &e) : NULL;
    sched_free(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    long recv = find_action(s, 0, SCHED_RECV_B, 0, 1), f2 = find_action(s, 0, SCHED_F, 0, 2),
         i1 = find_action(s, 0, SCHED_I, 0, 1), send = find_action(s, 1, SCHED_SEND_B, 1, 1);
    sched_free(s);
    /* the premise: the list has the receive before a compute that does not need it */
    CU_ASSERT_FATAL(recv >= 0 && f2 > recv && i1 > f2 && send >= 0);
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, mpi ? "late-mpi.db" : "late.db");
    char cmd[4096], args[512];
    snprintf(args, sizeof args, "run --kind zb-h1 --ranks 2 --microbatches 4 --width 32 --depth 4 --microbatch-size 4 --warmup 1 "
             "--timed 2 --no-predict --trace --inject-fault delay-send:1:%ld:1 --db %s", send + 1, db);
#ifdef PIPELAB_MPIEXEC
    if (mpi) snprintf(cmd, sizeof cmd, MPIENV "timeout 60 " MPIRUN " %s %s --transport mpi", PIPELAB_BIN, args);
    else
#endif
        snprintf(cmd, sizeof cmd, "timeout 60 %s %s", PIPELAB_BIN, args);
    char *out = NULL;
    int rc = pl_test_run(cmd, &out);
    if (rc != 0) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    double s0 = 0, s1 = 0, f0 = 0, f1 = 0, r0 = 0, r1 = 0, b0 = 0, b1 = 0;
    CU_ASSERT_FATAL(op_times(db, 1, "1SEND_B1", &s0, &s1) && op_times(db, 0, "0F2", &f0, &f1) &&
                    op_times(db, 0, "0RECV_B1", &r0, &r1) && op_times(db, 0, "0I1", &b0, &b1));
    int ok = s1 - s0 >= 0.25 /* the delay happened */ && r1 <= f0 && f1 < s0 + 0.25 && b0 >= s0 + 0.25;
    if (!ok || getenv("PIPELAB_TEST_VERBOSE"))
        fprintf(stderr, "%s: 1SEND_B1 [%.4f, %.4f], 0RECV_B1 [%.4f, %.4f], 0F2 [%.4f, %.4f], 0I1 [%.4f, %.4f]\n",
                mpi ? "mpi" : "threads", s0, s1, r0, r1, f0, f1, b0, b1);
    CU_ASSERT(ok);
    free(db);
    free(dir);
}

static void test_late_message_threads(void) { late_message_case(0); }

static void test_late_message_mpi(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: the late message is not tested on MPI");
        return;
    }
    late_message_case(1);
}

/* Every fault on the threads transport through `pipelab run --db`. */
static void test_cli_faults_threads(void) {
    char *dir = pl_test_tmpdir();
    char *db = db_with_one_run(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(db);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], 0, db, 1);
    free(db);
    free(dir);
}

/* Every fault on the MPI transport (2 processes) through `mpirun ... pipelab run --db`. */
static void test_cli_faults_mpi(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: MPI faults not tested");
        return;
    }
    char *dir = pl_test_tmpdir();
    char *db = db_with_one_run(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(db);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], 1, db, 1);
    free(db);
    free(dir);
}

/* One stalled MPI rank (EXEC_MPI_TEST_STOP_ENV): where it stops itself, the run, and what the
 * other rank's timeout must say. */
typedef struct stall_case {
    const char *stop;     /* "R:point" (exec/mpi_wait.h, EXEC_MTS_*) */
    int stopped;          /* R */
    const char *args;     /* pipelab's arguments but the transport, the timeout and the database */
    int timeout_s;        /* --timeout; 0: none given (the default, EXEC_DEFAULT_TIMEOUT_S) */
    const char *says[3];  /* substrings the output must hold (NULL ends) */
    int np;               /* MPI processes; 0: 2 */
} stall_case;

#ifdef PIPELAB_MPIEXEC
/* Returns how many times s occurs in text (0 when text is NULL). */
static int occurrences(const char *text, const char *s) {
    int n = 0;
    for (const char *p = text ? strstr(text, s) : NULL; p; p = strstr(p + 1, s)) n++;
    return n;
}
#endif

/* Runs c on its MPI processes (2 unless c->np) with the database db (one run in it) and checks
 * that a wait of another rank times out and names the silent rank, in one line only (with 3
 * processes the two others wait for it: the lower one says so, transport_mpi.c's meet_defer), the
 * job ends with exit 1 (MPI_Abort) within the timeout and FAULT_BOUND_S more, no MPI error
 * (cancelling a collective would be one), nothing stored; the stopped rank, continued and
 * terminated by the launcher, never says that it waited, and says it stood still when its report
 * comes. */
static void stall_check(const stall_case *c, const char *db) {
#ifdef PIPELAB_MPIEXEC
    char cmd[4096], self[64], other[64], tmo[32] = "";
    double timeout_s = c->timeout_s > 0 ? c->timeout_s : EXEC_DEFAULT_TIMEOUT_S;
    if (c->timeout_s > 0) snprintf(tmo, sizeof tmo, " --timeout %d", c->timeout_s);
    snprintf(cmd, sizeof cmd, MPIENV EXEC_MPI_TEST_STOP_ENV "=%s timeout %d " PIPELAB_MPIEXEC " -np %d --oversubscribe %s %s "
             "--transport mpi%s --db %s", c->stop, (int)(timeout_s + 2 * FAULT_BOUND_S), c->np > 0 ? c->np : 2, PIPELAB_BIN,
             c->args, tmo, db);
    char *out = NULL;
    double t0 = pl_now_s();
    int rc = pl_test_run(cmd, &out);
    double dt = pl_now_s() - t0;
    int ok = rc == 1 && out && dt < timeout_s + FAULT_BOUND_S;
    for (int i = 0; i < 3 && c->says[i]; i++) ok &= out && strstr(out, c->says[i]) != NULL;
    ok &= occurrences(out, "timed out after") == 1;
    /* the silent rank never names itself as the one waiting */
    snprintf(self, sizeof self, "rank %d waits", c->stopped);
    ok &= out && strstr(out, self) == NULL && strstr(out, "MPI_ERR") == NULL && strstr(out, "MPI_Cancel") == NULL;
    /* when its report comes through the launcher, it says it stood still */
    snprintf(other, sizeof other, "pipelab: rank %d terminated by the MPI launcher ", c->stopped);
    const char *rep = out ? strstr(out, other) : NULL;
    ok &= !rep || strncmp(rep + strlen(other), "after it stood still for ", 25) == 0;
    long after = count_runs(db);
    ok &= after == 1 && db_intact(db);
    if (!ok || getenv("PIPELAB_TEST_VERBOSE"))
        fprintf(stderr, "stalled rank %s (%s): exit %d after %.2f s, %ld runs stored:\n%s\n", c->stop, c->args, rc, dt, after,
                out ? out : "");
    CU_ASSERT(ok);
    free(out);
#else
    (void)c;
    (void)db;
#endif
}

/* Runs the stall cases cs[n] against one database (stall_check). */
static void stall_cases(const stall_case *cs, size_t n) {
    char *dir = pl_test_tmpdir();
    char *db = db_with_one_run(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(db);
    for (size_t k = 0; k < n; k++) stall_check(&cs[k], db);
    free(db);
    free(dir);
}

/* A rank that stops responding (SIGSTOP, as a stopped or starved process) in its compute before
 * the barrier between passes, or inside its wait for a message: the other rank's wait times out
 * (2 s) and names the silent rank (stall_check). */
static void test_mpi_stalled_rank(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: a stalled MPI rank not tested");
        return;
    }
    static const stall_case cs[] = {
        {"1:barrier", 1, RUN_ARGS, 2, {"pipelab: run failed: rank 0: timed out after 2 s: rank 0 waits at the barrier between "
                                       "passes for rank 1\n", NULL}, 2},
        {"0:barrier", 0, RUN_ARGS, 2, {"pipelab: run failed: rank 1: timed out after 2 s: rank 1 waits at the barrier between "
                                       "passes for rank 0\n", NULL}, 2},
        /* rank 1 stops in whichever of its waits comes first in pass 1, and rank 0 runs on until it
         * needs what rank 1 has not sent: which microbatch that is depends on the two processes' timing */
        {"1:wait", 1, RUN_ARGS, 2, {"pipelab: run failed: rank 0, action ", "pass 1: timed out after 2 s: rank 0 waits for "
                                    "gradients of stage 0 microbatch ", " from rank 1\n"}, 2},
        /* likewise rank 0: where its first wait that waits comes after its last send of the pass,
         * rank 1 finishes the pass and times out at the barrier after it ("rank 1 waits at the
         * barrier between passes for rank 0"), else waiting for activations ("... from rank 0");
         * a loaded machine (ctest -j2) gave the first */
        {"0:wait", 0, RUN_ARGS, 2, {"pipelab: run failed: rank 1", "timed out after 2 s: rank 1 waits ", " rank 0\n"}, 2},
    };
    stall_cases(cs, sizeof cs / sizeof *cs);
}

/* RUN_ARGS with stage 0 (the whole model) on 2 replicas, one rank each. */
#define REPLICA_ARGS "run --kind 1f1b --ranks 1 --microbatches 4 --replicas-stage 0=2 --width 32 --depth 4 " \
                     "--microbatch-size 4 --warmup 1 --timed 2"

/* A rank that stands still where the others wait in a collective (the host probe, the run's
 * set-up, the steady rule's exchange of the pass times, the replicas' all-reduce, the gathering
 * of the records, the MPI profiles after the run): the other rank's wait times out (2 s) naming
 * the silent rank and where it waited, and the job ends (stall_check). Before these waits were
 * timed, each of these runs hung until `timeout` killed it (exit 124). One stopped rank each: the
 * waits are the same code on every rank (the barrier's cases above stop either). */
static void test_mpi_stalled_collective(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: a stalled MPI rank not tested");
        return;
    }
    static const stall_case cs[] = {
        {"1:probe", 1, RUN_ARGS, 2,
         {"pipelab: host probe: rank 0: timed out after 2 s: rank 0 waits in the host probe for rank 1\n", NULL}, 2},
        {"1:join", 1, RUN_ARGS " --no-host-probe", 2,
         {"pipelab: run failed: rank 0: timed out after 2 s: rank 0 waits at the start of the run for rank 1\n", NULL}, 2},
        {"1:steady", 1, RUN_ARGS " --no-host-probe --steady 0.0001 --timed-max 6", 2,
         {"pipelab: run failed: rank 0: timed out after 2 s: rank 0 waits at the exchange of the pass times for rank 1\n",
          NULL}, 2},
        {"1:allreduce", 1, REPLICA_ARGS " --no-predict --no-host-probe", 2,
         {"pipelab: run failed: rank 0 (replica 0 of schedule rank 0), action 5 (0REDUCE_GRAD), pass 1: timed out after 2 s: "
          "rank 0 waits in the all-reduce of stage 0's replicas for rank 1\n", NULL}, 2},
        {"1:gather", 1, RUN_ARGS " --no-host-probe", 2,
         {"pipelab: run failed: rank 0: timed out after 2 s: rank 0 waits at the gathering of the records for rank 1\n",
          NULL}, 2},
        /* the prediction's profiles, after the run: the hand-off's; a replicated run's all-reduce first */
        {"1:profile", 1, "run --kind 1f1b --ranks 2 --microbatches 4 --width 32 --depth 4 --microbatch-size 4 --warmup 1 "
                         "--timed 2 --no-host-probe", 2,
         {"pipelab: profile of the MPI hand-off: rank 0: timed out after 2 s: rank 0 waits in the hand-off profile for "
          "rank 1\n", NULL}, 2},
        {"1:profile", 1, REPLICA_ARGS " --no-host-probe", 2,
         {"pipelab: profile of the MPI all-reduce: rank 0: timed out after 2 s: rank 0 waits in the all-reduce profile for "
          "rank 1\n", NULL}, 2},
    };
    stall_cases(cs, sizeof cs / sizeof *cs);
}

/* RUN_ARGS on 3 ranks (3 processes on 2 cores: pipelab's --oversubscribe). */
#define RUN3_ARGS "run --kind 1f1b --ranks 3 --microbatches 4 --width 32 --depth 4 --microbatch-size 4 --warmup 1 " \
                  "--timed 2 --no-predict --oversubscribe"

/* With 3 processes, the two that wait for the one that stands still both time out; one line
 * names it, the lowest-numbered one's (stall_check): rank 1's where rank 0 stands still at the
 * barrier between passes; rank 0's, returned through the CLI, where rank 1 stands still in the
 * host probe. Before, rank 2 printed its own timeout line beside it. */
static void test_mpi_stalled_three(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: a stalled MPI rank among 3 not tested");
        return;
    }
    static const stall_case cs[] = {
        {"0:barrier", 0, RUN3_ARGS " --no-host-probe", 2, {"pipelab: run failed: rank 1: timed out after 2 s: rank 1 waits "
                                                           "at the barrier between passes for rank 0\n", NULL}, 3},
        {"1:probe", 1, RUN3_ARGS, 2,
         {"pipelab: host probe: rank 0: timed out after 2 s: rank 0 waits in the host probe for rank 1\n", NULL}, 3},
    };
    stall_cases(cs, sizeof cs / sizeof *cs);
}

/* A rank that holds a meeting the others do not (EXEC_MPI_TEST_STOP_ENV's "extra", before its
 * second barrier between passes): its token meets the others' barrier, a meeting of another
 * kind, and the job names both meetings, by place and kind, as an internal error, at once (no
 * timeout), in one line (both processes find it; the lower-numbered says so, the other defers),
 * exit 1, nothing stored. Before the tokens carried their meeting, the two waited for tokens of
 * the wrong kind until the timeout named a rank that was there. */
static void test_mpi_meetings_out_of_step(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: meetings out of step not tested");
        return;
    }
#ifdef PIPELAB_MPIEXEC
    char *dir = pl_test_tmpdir();
    char *db = db_with_one_run(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(db);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, MPIENV EXEC_MPI_TEST_STOP_ENV "=1:extra timeout 60 " MPIRUN " %s " RUN_ARGS " --no-host-probe "
             "--transport mpi --timeout 5 --db %s", PIPELAB_BIN, db);
    double t0 = pl_now_s();
    int rc = pl_test_run(cmd, &out);
    double dt = pl_now_s() - t0;
    int ok = rc == 1 && dt < 5 && out && strstr(out, "timed out") == NULL && strstr(out, "MPI_ERR") == NULL;
    /* rank 0's barrier got the extra meeting's token (or, should rank 0 not end the job within
     * the deferral, rank 1's extra meeting the barrier's) */
    ok &= out && (strstr(out, "rank 0: internal error: meetings out of step: rank 0 meets at the barrier between passes "
                              "(meeting 'barrier'), rank 1's token came from its meeting at the test hook's extra meeting "
                              "(meeting 'test-extra')") != NULL ||
                  strstr(out, "rank 1: internal error: meetings out of step: rank 1 meets at the test hook's extra meeting "
                              "(meeting 'test-extra'), rank 0's token came from its meeting at the barrier between passes "
                              "(meeting 'barrier')") != NULL);
    int lines = 0;
    for (const char *p = out; p && (p = strstr(p, "meetings out of step")) != NULL; p++) lines++;
    ok &= lines == 1;
    ok &= out && strstr(out, "at the test hook's extra meeting") && strstr(out, "at the barrier between passes");
    long after = count_runs(db);
    ok &= after == 1 && db_intact(db);
    if (!ok || getenv("PIPELAB_TEST_VERBOSE"))
        fprintf(stderr, "meetings out of step: exit %d after %.2f s, %ld runs stored:\n%s\n", rc, dt, after, out ? out : "");
    CU_ASSERT(ok);
    free(out);
    free(db);
    free(dir);
#endif
}

/* A process that waits while others work is not timed out (exec_mpi_meet_patient): 3 processes,
 * a replicated stage, so that ranks 0 and 1 profile the all-reduce for several seconds after the
 * run while rank 2 waits; with --timeout 1 the job still ends well and predicts. Before such
 * waits were patient, rank 2 gave up after 1 s ("rank 2 waits in the all-reduce profile for
 * ranks 0, 1") and ended the healthy job. */
static void test_mpi_bystander_patient(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: a waiting MPI process not tested");
        return;
    }
#if defined(__SANITIZE_ADDRESS__)
    /* a test of when a wait gives up, on 3 processes of a model large enough to profile for
     * seconds: its memory paths are the stall tests' above */
    pl_test_skip("AddressSanitizer build: the waiting process is tested in the plain build");
    return;
#endif
#ifdef PIPELAB_MPIEXEC
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, MPIENV "timeout 120 " PIPELAB_MPIEXEC " -np 3 --oversubscribe %s run --kind 1f1b --ranks 2 "
             "--replicas-stage 0=2 --microbatches 4 --width 256 --depth 8 --microbatch-size 4 --warmup 1 --timed 2 "
             "--no-host-probe --transport mpi --oversubscribe --timeout 1 --no-db", PIPELAB_BIN);
    int rc = pl_test_run(cmd, &out);
    int ok = rc == 0 && out && strstr(out, "timed out") == NULL && strstr(out, "iteration_time_s") != NULL;
    if (!ok) fprintf(stderr, "3 processes, rank 2 waiting for the all-reduce profile: exit %d:\n%s\n", rc, out ? out : "");
    CU_ASSERT(ok);
    free(out);
#endif
}

/* The MPI job's processes against their cores, as the threads' ranks: 2 processes on one core
 * (taskset, no binding by mpirun) are refused without pipelab's --oversubscribe, naming both
 * counts and the flag, and nothing is stored; with it the run warns as the threads transport
 * does and reports 1 core; 2 processes bound to cores of their own (mpirun's default) on a host
 * of 2 cores or more run without a warning and report the cores they had. */
static void test_mpi_oversubscribed(void) {
    if (!have_mpirun() || pl_test_run("command -v taskset", NULL) != 0) {
        pl_test_skip("mpirun, taskset or the MPI transport is absent: MPI oversubscription not tested");
        return;
    }
#ifdef PIPELAB_MPIEXEC
    char *dir = pl_test_tmpdir();
    char *db = db_with_one_run(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(db);
    char cmd[4096];
    char *out = NULL;
    snprintf(cmd, sizeof cmd, MPIENV "timeout 60 taskset -c 0 " MPIRUN " --bind-to none %s " RUN_ARGS " --transport mpi --db %s",
             PIPELAB_BIN, db);
    int rc = pl_test_run(cmd, &out);
    int ok = rc != 0 && rc != 124 && out &&
             strstr(out, "pipelab: 2 ranks (MPI processes) on host ") != NULL &&
             strstr(out, " but only 1 cores available to them; give pipelab's --oversubscribe") != NULL &&
             count_runs(db) == 1;
    if (!ok) fprintf(stderr, "2 processes on 1 core: exit %d:\n%s\n", rc, out ? out : "");
    CU_ASSERT(ok);
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, MPIENV "timeout 60 taskset -c 0 " MPIRUN " --bind-to none %s " RUN_ARGS
             " --transport mpi --oversubscribe --no-db --format json", PIPELAB_BIN);
    rc = pl_test_run(cmd, &out);
    ok = rc == 0 && out && strstr(out, "\"warning\":\"2 ranks on 1 cores: oversubscribed, timings measure time-slicing\"") &&
         strstr(out, "\"cores\":1");
    if (!ok) fprintf(stderr, "2 processes on 1 core, --oversubscribe: exit %d:\n%s\n", rc, out ? out : "");
    CU_ASSERT(ok);
    free(out);
    int cpus[EXEC_MAX_CORES];
    if (exec_platform_cores(cpus, EXEC_MAX_CORES) >= 2) {
        out = NULL;
        snprintf(cmd, sizeof cmd, MPIENV "timeout 60 " PIPELAB_MPIEXEC " -np 2 %s " RUN_ARGS " --transport mpi --no-db --format json",
                 PIPELAB_BIN);
        rc = pl_test_run(cmd, &out);
        ok = rc == 0 && out && strstr(out, "\"warning\":\"\"") && !strstr(out, "\"cores\":1,") && !strstr(out, "\"cores\":1}");
        if (!ok) fprintf(stderr, "2 processes on 2 cores: exit %d:\n%s\n", rc, out ? out : "");
        CU_ASSERT(ok);
        free(out);
    }
    free(db);
    free(dir);
#endif
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
    if (!p) return -1;
    unsigned long ut = 0, st = 0;
    /* after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The whole `pipelab run --db` process killed with SIGKILL while it computes: the database
 * keeps exactly the runs it had and passes PRAGMA integrity_check (each run is written in one
 * transaction, after the run). */
static void test_killed_process_db_intact(void) {
    char *dir = pl_test_tmpdir();
    char *db = db_with_one_run(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(db);
    char *log = pl_test_path(dir, "killed.log");
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (f) dup2(fileno(stdout), 2);
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
        execl(PIPELAB_BIN, PIPELAB_BIN, "run", "--kind", "1f1b", "--ranks", "2", "--microbatches", "4", "--width", "32",
              "--depth", "4", "--microbatch-size", "4", "--warmup", "0", "--timed", "1000000", "--no-predict", "--oversubscribe",
              "--db", db, (char *)NULL);
        _exit(127);
    }
    /* computing: it used half a second of CPU (its setup takes milliseconds) */
    double t0 = pl_now_s(), cpu = 0;
    int status = 0;
    while ((cpu = cpu_time_s(pid)) < 0.5 && pl_now_s() - t0 < 30 && waitpid(pid, &status, WNOHANG) == 0) usleep(20000);
    CU_ASSERT(cpu >= 0.5);
    CU_ASSERT_EQUAL(waitpid(pid, &status, WNOHANG), 0); /* still running */
    kill(pid, SIGKILL);
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CU_ASSERT_EQUAL(count_runs(db), 1);
    CU_ASSERT(db_intact(db));
    /* and the database still takes runs */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s " RUN_ARGS " --db %s", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, NULL), 0);
    CU_ASSERT_EQUAL(count_runs(db), 2);
    free(log);
    free(db);
    free(dir);
}

/* ---------------------------------------------------------------- exec_run (threads) */

/* Returns the lowered schedule of kind on p ranks with m microbatches. */
static sched *lowered(const char *kind, int p, int m) {
    pl_err e;
    sched_gen_opts o = {p, m, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate(kind, &o, &e);
    sched *s = g ? sched_lower(g, &e) : NULL;
    sched_free(g);
    if (!s) fprintf(stderr, "%s: %s\n", kind, e.msg);
    return s;
}

/* Returns the small configuration of these tests with fault f. */
static exec_config cfg_with(exec_fault f, double timeout_s) {
    exec_config c;
    exec_config_default(&c);
    c.hidden = 32;
    c.layers = 4;
    c.microbatch_size = 4;
    c.warmup_passes = 1;
    c.timed_passes = 2;
    c.oversubscribe = 1;
    c.timeout_s = timeout_s;
    c.fault = f;
    return c;
}

/* Returns the number of threads of this process (/proc/self/status), -1 when unknown. */
static int threads_now(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    fclose(f);
    return n;
}

/* Returns the threads of this process once a run has initialized everything it keeps (the BLAS):
 * what a run, failed or not, must leave behind. Joined threads leave the count only once the
 * kernel has reaped them, which under load (the sanitizer build beside other tests) took long
 * enough for a count taken at once to include an earlier test's workers: the count is taken once
 * it has held for 200 ms (3 s at most). */
static int threads_at_rest(void) {
    static int n = -2;
    if (n == -2) {
        sched *s = lowered("gpipe", 2, 2);
        exec_config c = cfg_with((exec_fault){EXEC_FAULT_NONE, 0, 0, 0}, 30);
        exec_result r;
        pl_err e;
        if (s && exec_run(s, &c, &r, &e) == PL_OK) exec_result_free(&r);
        sched_free(s);
        n = threads_now();
        for (double t0 = pl_now_s(), held = t0; pl_now_s() - t0 < 3 && pl_now_s() - held < 0.2; usleep(1000)) {
            int now = threads_now();
            if (now != n) {
                n = now;
                held = pl_now_s();
            }
        }
    }
    return n;
}

/* Runs kind on p ranks with fault f and checks: the code, the message holds each of says, the
 * run stopped within the bound (well within timeout_s where the detection is exact), and no
 * thread of it is left. */
static void lib_case(const char *kind, int p, exec_fault f, double timeout_s, int code, const char *const *says) {
    sched *s = lowered(kind, p, 2 * p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    exec_config c = cfg_with(f, timeout_s);
    exec_result r;
    pl_err e;
    pl_err_clear(&e);
    int rest = threads_at_rest();
    double t0 = pl_now_s();
    int rc = exec_run(s, &c, &r, &e);
    double dt = pl_now_s() - t0;
    /* joined threads leave the process's count once the kernel has reaped them: allow it 2 s */
    int left = threads_now();
    for (double tw = pl_now_s(); left > rest && pl_now_s() - tw < 2; left = threads_now()) usleep(1000);
    CU_ASSERT(rest > 0 && left == rest);
    int ok = rc == code && dt < FAULT_BOUND_S && dt < timeout_s;
    for (int i = 0; says[i]; i++) ok &= strstr(e.msg, says[i]) != NULL;
    if (!ok || left != rest || getenv("PIPELAB_TEST_VERBOSE"))
        fprintf(stderr, "%s p=%d fault %s: code %d after %.3f s, threads %d (at rest %d): %s\n", kind, p,
                exec_fault_name(f.kind), rc, dt, left, rest, e.msg);
    CU_ASSERT(ok);
    if (rc == PL_OK) exec_result_free(&r);
    sched_free(s);
}

/* A worker thread that ends in the middle of its list (pthread_exit, as a crashed or cancelled
 * thread would) is noticed at once: the run names the rank and the action it was on, and
 * exec_run returns (all threads joined) long before the timeout. On 2 and 4 ranks, in the first
 * action of the first pass and in the middle of a later one. */
static void test_vanished_thread(void) {
    const char *a[] = {"rank 1, action 4 (1B0), pass 1: the worker thread ended in the middle of its list without reporting", NULL};
    lib_case("1f1b", 2, (exec_fault){EXEC_FAULT_EXIT, 1, 3, 1}, 30, PL_EINTERNAL, a);
    const char *b[] = {"rank 0, action 1 (0F0), pass 0: the worker thread ended", NULL};
    lib_case("gpipe", 4, (exec_fault){EXEC_FAULT_EXIT, 0, 0, 0}, 30, PL_EINTERNAL, b);
    const char *c[] = {"rank 3, action 9 (", "), pass 2: the worker thread ended", NULL};
    lib_case("zb-h1", 4, (exec_fault){EXEC_FAULT_EXIT, 3, 8, 2}, 30, PL_EINTERNAL, c);
}

/* A receive dropped from a rank's list (past validation, as a buggy tool would do): the
 * message sent to it is never received; the receiving rank's compute finds its input missing
 * and the run stops naming the rank and the action. Forward (RECV_F) and backward (RECV_B). */
static void test_dropped_receive(void) {
    const char *a[] = {"rank 1, action 2 (1F0), pass 0: forward of stage 1 microbatch 0 before its input arrived (the "
                       "activations rank 0 sends were not received: no 1RECV_F0 ran)", NULL};
    lib_case("1f1b", 2, (exec_fault){EXEC_FAULT_DROP_RECV, 1, 0, 0}, 30, PL_EINPUT, a);
    /* rank 0 of 1f1b on 2 ranks: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 ...: action 5 is RECV_B0 */
    const char *b[] = {"rank 0, action 6 (0B0), pass 1: backward of stage 0 microbatch 0 before its output gradient arrived "
                       "(the gradients rank 1 sends were not received: no 0RECV_B0 ran)", NULL};
    lib_case("1f1b", 2, (exec_fault){EXEC_FAULT_DROP_RECV, 0, 0, 1}, 30, PL_EINPUT, b);
}

/* A SEND that no RECV matches (sent twice, as a schedule with an unmatched SEND would): the copy
 * nobody receives stops the run at the next barrier, or at the end in the last pass, naming the
 * sender, the receiver and the message. */
static void test_unmatched_send(void) {
    const char *a[] = {"rank 0 sent activations of stage 1 microbatch 0 to rank 1, which never received them",
                       "at the barrier between passes", NULL};
    lib_case("1f1b", 2, (exec_fault){EXEC_FAULT_EXTRA_SEND, 0, 0, 0}, 30, PL_EINPUT, a);
    const char *b[] = {"rank 2 sent activations of stage 3 microbatch 18 to rank 3, which never received them",
                       "at the end of the run", NULL};
    lib_case("1f1b", 4, (exec_fault){EXEC_FAULT_EXTRA_SEND, 2, 10, 2}, 30, PL_EINPUT, b);
}

/* A send that never happens: every rank ends up waiting, which the in-process transport sees
 * at once (no timeout: it is 30 s here), naming what each rank waits for and the action it is
 * on. */
static void test_never_sent_is_deadlock(void) {
    const char *a[] = {"cannot make progress", "rank 1 waits for activations of stage 1 microbatch 0 from rank 0",
                       "rank 1 at action 1 (1RECV_F0) of pass 0", "rank 0 at action 5 (0RECV_B0) of pass 0", NULL};
    lib_case("1f1b", 2, (exec_fault){EXEC_FAULT_DROP_SEND, 0, 0, 0}, 30, PL_EINPUT, a);
    /* a timeout past what a deadline holds (--timeout 1e30) waits as the longest one does: the
     * waits block (they once failed at once and spun), and the deadlock is still found */
    lib_case("1f1b", 2, (exec_fault){EXEC_FAULT_DROP_SEND, 0, 0, 0}, 1e30, PL_EINPUT, a);
    /* 4 ranks, a gradient lost in the middle of pass 1: the others finish or wait behind it */
    const char *b[] = {"cannot make progress", "waits for gradients of stage 1", "rank 1 at action", NULL};
    lib_case("1f1b", 4, (exec_fault){EXEC_FAULT_DROP_SEND, 2, 0, 1}, 30, PL_EINPUT, b);
}

/* The faults test_exec.c covers once, here on 4 ranks with the time bound: an error in the
 * middle of a pass, a short message, and a budget that only the first rank exceeds. */
static void test_faults_bounded(void) {
    const char *a[] = {"rank 2, action 6 (", "), pass 1: injected fault", NULL};
    lib_case("1f1b", 4, (exec_fault){EXEC_FAULT_ERROR, 2, 5, 1}, 30, PL_EINPUT, a);
    const char *b[] = {"rank 3, action ", "RECV_F", "has 508 bytes, expected 512", NULL};
    lib_case("gpipe", 4, (exec_fault){EXEC_FAULT_BAD_SIZE, 2, 0, 1}, 30, PL_EINPUT, b);
}

/* A fault that could never strike (a rank the run lacks, an action past the rank's list, a
 * pass past the run's) is refused before the run, named: a test that injects it would pass
 * without testing anything. The run has 1 warm-up and 2 timed passes; rank 1 of gpipe on 2 ranks
 * with 4 microbatches holds 18 actions (`pipelab schedule --lower`). */
static void test_fault_out_of_range(void) {
    const char *a[] = {"the injected fault's rank 2 is not in the run (ranks 0..1)", NULL};
    lib_case("gpipe", 2, (exec_fault){EXEC_FAULT_ERROR, 2, 0, 0}, 30, PL_EINPUT, a);
    const char *b[] = {"the injected fault's action 19 is past rank 1's 18 actions", NULL};
    lib_case("gpipe", 2, (exec_fault){EXEC_FAULT_ERROR, 1, 18, 0}, 30, PL_EINPUT, b);
    const char *c[] = {"the injected fault's pass 3 is past the run's 3 passes (0..2)", NULL};
    lib_case("gpipe", 2, (exec_fault){EXEC_FAULT_EXIT, 0, 0, 3}, 30, PL_EINPUT, c);
    /* the last action of the last pass is in range, and strikes */
    const char *d[] = {"rank 1, action 18 (1STEP), pass 2: injected fault", NULL};
    lib_case("gpipe", 2, (exec_fault){EXEC_FAULT_ERROR, 1, 17, 2}, 30, PL_EINPUT, d);
    /* a kind that strikes a SEND (RECV) needs one at or after its action: rank 1's list ends
     * 1B3 1SEND_B3 REDUCE_GRAD STEP (actions 15-18), rank 0's has no RECV after its 4 RECV_B */
    const char *f[] = {"the injected fault 'drop-send' strikes a SEND, and rank 1 has none at or after its action 17", NULL};
    lib_case("gpipe", 2, (exec_fault){EXEC_FAULT_DROP_SEND, 1, 16, 0}, 30, PL_EINPUT, f);
    const char *g[] = {"the injected fault 'drop-recv' strikes a RECV, and rank 0 has none at or after its action 17", NULL};
    lib_case("gpipe", 2, (exec_fault){EXEC_FAULT_DROP_RECV, 0, 16, 0}, 30, PL_EINPUT, g);
}

/* One rank's barrier on its own thread (for the undelivered-message test). */
typedef struct bar_job {
    exec_transport *t;
    int rc;
    pl_err e;
} bar_job;

static void *bar_main(void *arg) {
    bar_job *j = arg;
    j->rc = j->t->barrier(j->t, &j->e);
    return NULL;
}

/* The in-process transport refuses messages nobody received: one left in a mailbox when both
 * ranks reach the barrier between passes stops the run at that barrier (both ranks fail, at once,
 * naming the sender, the receiver and the message); one left when every rank finished makes the
 * run fail too. An empty mailbox passes both. */
static void test_undelivered_message(void) {
    pl_err e;
    float buf[8] = {0};
    exec_msg_key k = {EXEC_MSG_ACT, 1, 3};
    const char *says = "rank 0 sent activations of stage 1 microbatch 3 to rank 1, which never received them";
    exec_transport *t = exec_threads_transport_new(2, 2, sizeof buf, 30, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    /* a clean barrier, then one with a message left */
    for (int round = 0; round < 2; round++) {
        if (round == 1) CU_ASSERT_EQUAL(t[0].send(&t[0], 1, k, buf, sizeof buf, &e), PL_OK);
        bar_job j = {&t[1], -1, {0}};
        pthread_t th;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, bar_main, &j), 0);
        pl_err e0;
        pl_err_clear(&e0);
        double t0 = pl_now_s();
        int rc0 = t[0].barrier(&t[0], &e0);
        pthread_join(th, NULL);
        CU_ASSERT(pl_now_s() - t0 < FAULT_BOUND_S);
        if (round == 0) {
            CU_ASSERT(rc0 == PL_OK && j.rc == PL_OK);
        } else {
            CU_ASSERT(rc0 != PL_OK && j.rc != PL_OK);
            CU_ASSERT(strstr(e0.msg, says) != NULL && strstr(j.e.msg, says) != NULL);
            CU_ASSERT(strstr(e0.msg, "at the barrier between passes") != NULL);
        }
    }
    exec_threads_transport_free(t, 2);
    /* at the end of the run */
    t = exec_threads_transport_new(2, 2, sizeof buf, 30, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t[0].send(&t[0], 1, k, buf, sizeof buf, &e), PL_OK);
    t[0].finished(&t[0]);
    t[1].finished(&t[1]);
    pl_err why;
    CU_ASSERT_FATAL(exec_threads_transport_why(t, &why));
    CU_ASSERT(strstr(why.msg, says) != NULL && strstr(why.msg, "at the end of the run") != NULL);
    exec_threads_transport_free(t, 2);
    t = exec_threads_transport_new(2, 2, sizeof buf, 30, &e);
    t[0].finished(&t[0]);
    t[1].finished(&t[1]);
    CU_ASSERT_FALSE(exec_threads_transport_why(t, &why));
    exec_threads_transport_free(t, 2);
}

void exec_test_faults_register(void) {
    static const pl_test_case cs[] = {
        {"a vanished worker thread is named at once", test_vanished_thread},
        {"a dropped receive stops the run", test_dropped_receive},
        {"a never-sent message is a deadlock found at once", test_never_sent_is_deadlock},
        {"a message nobody received stops the run", test_undelivered_message},
        {"a send no receive matches stops the run", test_unmatched_send},
        {"errors and short messages stop 4 ranks quickly", test_faults_bounded},
        {"a fault that could never strike is refused, named", test_fault_out_of_range},
        {"pipelab run under every fault, threads", test_cli_faults_threads},
        {"pipelab run under every fault, MPI", test_cli_faults_mpi},
        {"a late message stalls only the compute that needs it, threads", test_late_message_threads},
        {"a late message stalls only the compute that needs it, MPI", test_late_message_mpi},
        {"a SIGKILLed pipelab run leaves the database intact", test_killed_process_db_intact},
        {"a stalled MPI rank times out, named, and ends the job", test_mpi_stalled_rank},
        {"a rank stalled in an MPI collective times out, named, and ends the job", test_mpi_stalled_collective},
        {"of 3 MPI processes, the two waiting for a stalled one print one line", test_mpi_stalled_three},
        {"MPI meetings out of step are named, both, at once", test_mpi_meetings_out_of_step},
        {"a process waiting while others profile is not timed out", test_mpi_bystander_patient},
        {"MPI processes beyond their cores: refused, or warned with --oversubscribe", test_mpi_oversubscribed},
        {NULL, NULL}};
    pl_test_suite("exec faults, both transports", cs);
}
