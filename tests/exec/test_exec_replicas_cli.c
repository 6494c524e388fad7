/* test_exec_replicas_cli.c: `pipelab run` with replicas (and the prediction of the measured links
 * between ranks: the all-reduce, the point-to-point hand-off): threads and MPI processes give
 * byte-identical weights (the all-reduce is exact, so the ring over the mailboxes and
 * MPI_Allreduce agree), a partition file runs as planned, bad input is refused with exit 1 and
 * nothing stored, and a replica that fails or dies at its all-reduce ends the MPI job within
 * seconds, naming the rank and the action. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "exec.h"
#include "exec_drive.h"
#include "exec_int.h"
#include "exec_test.h"
#include "pl_sched.h"
#include "pl_test.h"
#include "platform/platform.h"

void exec_test_replicas_cli_register(void);

/* The small model of these runs and its passes. */
#define RSMALL "--width 32 --depth 4 --microbatch-size 4 --warmup 1 --timed 2"
/* The bound on the time from a fault to the end of the job (seconds, for a loaded machine). */
#define REPL_FAULT_BOUND_S 10.0


/* Returns 1 when the files a and b hold the same bytes (and exist). */
static int __attribute__((unused)) same_file(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    pl_err e;
    int ok = pl_read_file(a, 1 << 24, &x, &nx, &e) == PL_OK && pl_read_file(b, 1 << 24, &y, &ny, &e) == PL_OK &&
             nx == ny && nx > 0 && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return ok;
}

/* Threads and MPI processes give byte-identical weights: pure data parallelism over 2 and 3
 * replicas (3: the association of the replicas' sums differs between the ring and MPI's
 * algorithm, which an inexact reduction would show), PipeDream's 2-1 with 1F1B-RR, and its
 * asynchronous schedule. */
static void test_mpi_replicas_equal_threads(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: threads-vs-MPI replicas not tested");
        return;
    }
#ifdef PIPELAB_MPIEXEC
    static const struct { const char *flags; int np; } cases[] = {
        {"--kind 1f1b --ranks 1 --microbatches 4 --replicas-stage 0=2", 2},
        {"--kind 1f1b --ranks 1 --microbatches 6 --replicas-stage 0=3", 3},
        {"--kind 1f1b --ranks 2 --microbatches 4 --replicas-stage 0=2 --momentum 0.5", 3},
        {"--kind pipedream --ranks 2 --microbatches 4 --iterations 2 --replicas-stage 0=2", 3},
    };
    char *dir = pl_test_tmpdir();
    char *wt = pl_test_path(dir, "wt.bin"), *wm = pl_test_path(dir, "wm.bin");
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "%s run %s " RSMALL " --oversubscribe --no-predict --no-db --dump-weights %s", PIPELAB_BIN,
                 cases[k].flags, wt);
        CU_ASSERT_EQUAL(sh(cmd, NULL), 0);
        /* pipelab's --oversubscribe too: 3 processes may outnumber the cores */
        snprintf(cmd, sizeof cmd, MPIENV "timeout 60 %s -np %d --oversubscribe %s run --transport mpi %s " RSMALL
                 " --oversubscribe --no-predict --no-db --dump-weights %s", PIPELAB_MPIEXEC, cases[k].np, PIPELAB_BIN,
                 cases[k].flags, wm);
        CU_ASSERT_EQUAL(sh(cmd, NULL), 0);
        if (!same_file(wt, wm)) fprintf(stderr, "threads and MPI weights differ: %s\n", cases[k].flags);
        CU_ASSERT(same_file(wt, wm));
    }
    free(wt);
    free(wm);
    free(dir);
#endif
}

/* Writes a partition file of stages over layers with replicas (pipelab partition -o's format)
 * to dir/name; returns its path (free it). */
static char *partition_file(const char *dir, const char *name, const char *stages, int layers) {
    char *p = pl_test_path(dir, name);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "pipelab-partition 1\nmethod pipedream\nmodel mlp\nhardware free-links\nlayers %d\nworkers 3\n%s", layers, stages);
    fclose(f);
    return p;
}

/* A partition file runs as planned (its split and replicas, stored with the run beside the
 * prediction of the same replicas), and bad input is refused with exit 1, a message naming
 * what is wrong, and nothing stored. */
static void test_partition_and_bad_input(void) {
    char *dir = pl_test_tmpdir(), *db = pl_test_path(dir, "r.db"), *out = NULL;
    char *part = partition_file(dir, "p21", "stage 0: layers 0-2 replicas 2 time_s 1e-3\nstage 1: layers 3-3 replicas 1 time_s 1e-3\n", 4);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 4 --partition %s " RSMALL
             " --oversubscribe --profile-reps 3 --db %s --format json", PIPELAB_BIN, part, db);
    CU_ASSERT_EQUAL(sh(cmd, &out), 0);
    CU_ASSERT(out && strstr(out, "\"bounds\":[0,3,4],\"replicas\":[2,1]") != NULL);
    CU_ASSERT(out && strstr(out, "\"predicted\"") != NULL);
    free(out);
    struct { const char *flags, *want; } bad[] = {
        {"--kind 1f1b --ranks 2 --microbatches 4 --partition %s --depth 6", "the last stage must end at layer 6"},
        {"--kind 1f1b --ranks 3 --microbatches 4 --partition %s", "the partition has 2 stages but the schedule"},
        {"--kind 1f1b --ranks 2 --microbatches 4 --replicas-stage 0=3", "stage 0 has 3 replicas but an iteration has 4"},
        {"--kind 1f1b --ranks 2 --microbatches 4 --replicas-stage 5=2", "--replicas-stage 5=2: the schedule has stages 0..1"},
        {"--kind 1f1b --ranks 1 --microbatches 64 --replicas-stage 0=64", "64 ranks but only"},
    };
    int cpus[EXEC_MAX_CORES];
    size_t nbad = sizeof bad / sizeof *bad - (exec_platform_cores(cpus, EXEC_MAX_CORES) >= 64); /* fewer cores than 64 */
    for (size_t k = 0; k < nbad; k++) {
        char flags[512];
        snprintf(flags, sizeof flags, bad[k].flags, part);
        snprintf(cmd, sizeof cmd, "%s run " RSMALL " --profile-reps 3 --db %s %s", PIPELAB_BIN, db, flags);
        CU_ASSERT_EQUAL(sh(cmd, &out), 1);
        if (!out || !strstr(out, bad[k].want)) fprintf(stderr, "%s: %s\n", flags, out ? out : "");
        CU_ASSERT(out && strstr(out, bad[k].want) != NULL);
        free(out);
    }
    /* the PyTorch CSV read-back of a schedule of two iterations (one REDUCE_GRAD each, one STEP)
     * with its stage on 2 replicas: refused before the run (sched_check_replica_reduces), since
     * the second all-reduce would sum the first's microbatches again */
    char *rr = pl_test_path(dir, "rr.csv");
    snprintf(cmd, sizeof cmd, "%s schedule --kind 1f1b --ranks 1 --microbatches 4 --iterations 2 --lowered --to torch-csv "
             "-o %s > /dev/null", PIPELAB_BIN, rr);
    CU_ASSERT_EQUAL(sh(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "%s run --from %s --replicas-stage 0=2 " RSMALL " --profile-reps 3 --db %s", PIPELAB_BIN, rr, db);
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    char want[1024];
    snprintf(want, sizeof want, "%s:1: rank 0, action 18 (0REDUCE_GRAD): stage 0 has 2 replicas and reduced its "
             "gradients at action 9 already, with no STEP between", rr);
    if (!out || !strstr(out, want)) fprintf(stderr, "\nwant %s\ngot %s\n", want, out ? out : "");
    CU_ASSERT(out && strstr(out, want) != NULL);
    free(out);
    free(rr);
    /* nothing more was stored than the good run's ten (measured, predicted, predicted with the
     * reuse-distance terms, with the pass-length term, at the rounds' later microbatches, with
     * the reuse-distance and the first-touch term alone, with the reuse-distance term and the
     * kind before, without the jitter term, with each rank's STEP at its median round) */
    snprintf(cmd, sizeof cmd, "%s db list --db %s --format csv | tail -n +2 | wc -l", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(sh(cmd, &out), 0);
    CU_ASSERT(out && atoi(out) == 10);
    free(out);
#ifdef PIPELAB_MPIEXEC
    if (have_mpirun()) { /* more ranks than the MPI job has processes */
        snprintf(cmd, sizeof cmd, MPIENV "timeout 60 %s -np 2 --oversubscribe %s run --transport mpi --kind 1f1b --ranks 2 "
                 "--microbatches 4 --replicas-stage 0=2 " RSMALL " --no-predict --db %s", PIPELAB_MPIEXEC, PIPELAB_BIN, db);
        CU_ASSERT_NOT_EQUAL(sh(cmd, &out), 0);
        CU_ASSERT(out && strstr(out, "the MPI job has 2 processes, the schedule 3 ranks with its replicas (mpirun -np 3)"));
        free(out);
    }
#endif
    free(part);
    free(db);
    free(dir);
}

/* Returns the 1-based position of the first REDUCE_GRAD in replica `rep` of schedule rank 0's
 * list (the executor rank that replica is) for 1f1b on `ranks` ranks with stage 0 replicated
 * twice, as pipelab run generates it; 0 when there is none. */
static int reduce_action(int ranks, int *exec_rank) {
    int reps[2] = {2, 1};
    sched_gen_opts o = {ranks, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    pl_err e;
    sched *g = sched_gen_replicated("1f1b", &o, reps, NULL, &e), *s = g ? sched_lower(g, &e) : NULL;
    exec_layout L;
    int k = 0;
    if (s && exec_layout_build(s, reps, &L, &e) == PL_OK) {
        *exec_rank = L.base[0] + 1;
        const sched_rank *rk = &L.list[*exec_rank];
        for (size_t i = 0; i < rk->n && !k; i++)
            if (rk->acts[i].kind == SCHED_REDUCE_GRAD) k = (int)i + 1;
    }
    exec_layout_free(&L);
    sched_free(g);
    sched_free(s);
    return k;
}

/* A replica that fails at its all-reduce (threads and MPI), or whose process is killed there
 * while the other replica waits in it (MPI): the run stops within seconds, naming the rank and
 * the action (a killed process cannot speak: mpirun names it, and its partner says it waited in
 * the all-reduce). */
static void test_replica_fails_in_allreduce(void) {
    int er = 0, k = reduce_action(1, &er);
    CU_ASSERT_FATAL(k > 0);
    char cmd[2048], want[128], *out = NULL;
    snprintf(want, sizeof want, "rank %d (replica 1 of schedule rank 0), action %d (0REDUCE_GRAD)", er, k);
    snprintf(cmd, sizeof cmd, "timeout 60 %s run --kind 1f1b --ranks 1 --microbatches 4 --replicas-stage 0=2 " RSMALL
             " --no-predict --no-db --inject-fault error:%d:%d:1", PIPELAB_BIN, er, k);
    double t0 = pl_now_s();
    CU_ASSERT_EQUAL(sh(cmd, &out), 1);
    CU_ASSERT(pl_now_s() - t0 < REPL_FAULT_BOUND_S);
    CU_ASSERT(out && strstr(out, want) != NULL);
    free(out);
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: the MPI replica faults are not tested");
        return;
    }
#ifdef PIPELAB_MPIEXEC
    static const char *kinds[] = {"error", "kill"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, MPIENV "timeout 60 %s -np 2 --oversubscribe %s run --transport mpi --kind 1f1b --ranks 1 "
                 "--microbatches 4 --replicas-stage 0=2 " RSMALL " --no-predict --no-db --timeout 30 --inject-fault %s:%d:%d:1",
                 PIPELAB_MPIEXEC, PIPELAB_BIN, kinds[i], er, k);
        t0 = pl_now_s();
        int rc = sh(cmd, &out);
        double dt = pl_now_s() - t0;
        CU_ASSERT(rc != 0 && rc != 124);
        CU_ASSERT(dt < REPL_FAULT_BOUND_S);
        if (i == 0) CU_ASSERT(out && strstr(out, want) != NULL);
        if (i == 1) CU_ASSERT(out && strstr(out, "rank 0 waits in the all-reduce of stage 0") != NULL);
        if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "%s (%.2f s): %s\n", kinds[i], dt, out ? out : "");
        free(out);
    }
#endif
}

/* The small model of the prediction test: 2 blocks, so that profiling it is quick. */
#define PSMALL "--width 32 --depth 2 --microbatch-size 4"
/* The all-reduce link the prediction test writes into its profile (alpha, beta). */
#define PRED_LAT_S 1.5e-3
#define PRED_BPS 2.0e7

/* Writes to path the profile text without its "#@ allreduce" and "#@ p2p" lines (its measured
 * links), followed by extra (NULL for none) before the header; returns 0 when written. */
static int profile_variant(const char *text, const char *path, const char *extra) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (const char *l = text; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l + 1) : strlen(l);
        if (extra && strncmp(l, "layer,", 6) == 0) fputs(extra, f);
        if (strncmp(l, "#@ allreduce_", 13) != 0 && strncmp(l, "#@ p2p_", 7) != 0) fwrite(l, 1, n, f);
        l += n;
    }
    return fclose(f);
}

/* Returns the predicted iteration time of `pipelab run --format json` output, -1 when absent. */
static double predicted_iteration(const char *json) {
    const char *p = json ? strstr(json, "\"predicted\"") : NULL;
    p = p ? strstr(p, "\"iteration_time_s\"") : NULL;
    p = p ? strchr(p, ':') : NULL;
    return p ? strtod(p + 1, NULL) : -1;
}

/* Runs pipelab profile of the PSMALL model into pf; returns its model (NULL on failure) and its
 * text in *text (free both). */
static cost_model *small_profile(const char *pf, char **text) {
    char cmd[2048];
    size_t len = 0;
    pl_err e = {0};
    *text = NULL;
    snprintf(cmd, sizeof cmd, "%s profile " PSMALL " --reps 3 -o %s", PIPELAB_BIN, pf);
    if (sh(cmd, NULL) != 0 || pl_read_file(pf, 1 << 20, text, &len, &e) != PL_OK) return NULL;
    return cost_model_read_csv(pf, *text, len, &e);
}

/* pipelab profile measures the replica all-reduce (its file carries the fitted link); a replicated
 * run predicted from a profile with the link gets a REDUCE_GRAD of cost_ring_allreduce_s of the
 * stage's gradient bytes over its 2 replicas (the only difference from the same profile without
 * the link: one stage, so the collective ends the iteration before the STEP), and without it
 * predicts 0 and says so. */
static void test_prediction_allreduce(void) {
    char *dir = pl_test_tmpdir();
    char *pf = pl_test_path(dir, "p.csv"), *p0 = pl_test_path(dir, "p0.csv"), *p1 = pl_test_path(dir, "p1.csv");
    char *err = pl_test_path(dir, "err.txt");
    char cmd[2048], *text = NULL, *out0 = NULL, *out1 = NULL;
    pl_err e = {0};
    cost_model *m = small_profile(pf, &text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(m->allreduce[COST_TRANSPORT_THREADS].Bps > 0 && m->allreduce[COST_TRANSPORT_THREADS].latency_s >= 0);
    char extra[128];
    snprintf(extra, sizeof extra, "#@ allreduce_latency_s=%.17g allreduce_Bps=%.17g\n", PRED_LAT_S, PRED_BPS);
    CU_ASSERT_EQUAL(profile_variant(text, p0, NULL), 0);
    CU_ASSERT_EQUAL(profile_variant(text, p1, extra), 0);
    const char *run = "run --kind 1f1b --ranks 1 --replicas-stage 0=2 --microbatches 4 " PSMALL
                      " --warmup 0 --timed 1 --no-db --format json";
    snprintf(cmd, sizeof cmd, "{ %s %s --profile %s 2>%s; }", PIPELAB_BIN, run, p0, err);
    CU_ASSERT_EQUAL(sh(cmd, &out0), 0);
    snprintf(cmd, sizeof cmd, "%s %s --profile %s", PIPELAB_BIN, run, p1);
    CU_ASSERT_EQUAL(sh(cmd, &out1), 0);
    int64_t bytes = 0;
    for (int k = 0; k < m->n; k++) bytes += m->layer[k].param_bytes;
    double want = cost_ring_allreduce_s(2, (double)bytes, PRED_BPS, PRED_LAT_S);
    double t0 = predicted_iteration(out0), t1 = predicted_iteration(out1);
    CU_ASSERT(t0 > 0 && t1 > 0);
    CU_ASSERT(fabs((t1 - t0) - want) <= 1e-6 * t1);
    /* compare --actions shows REDUCE_GRAD as a class of its own: predicted the ring, measured
     * positive, with its signed error in percent and in ms */
    char *db = pl_test_path(dir, "ar.db"), *cmp = NULL;
    snprintf(cmd, sizeof cmd, "%s %s --profile %s --trace --db %s --tag ar >/dev/null && %s compare --db %s --tag ar --actions",
             PIPELAB_BIN, run, p1, db, PIPELAB_BIN, db);
    char *nodb = strstr(cmd, " --no-db");
    if (nodb) memmove(nodb, nodb + strlen(" --no-db"), strlen(nodb + strlen(" --no-db")) + 1);
    CU_ASSERT_EQUAL(sh(cmd, &cmp), 0);
    const char *row = cmp ? strstr(cmp, "\n   0  REDUCE_GRAD ") : NULL;
    CU_ASSERT_PTR_NOT_NULL(row);
    if (row) {
        char *end;
        double pred = strtod(row + strlen("\n   0  REDUCE_GRAD "), &end), meas = strtod(end, &end);
        double err = strtod(end, &end), diff = strtod(end + 1, NULL); /* past the % sign */
        CU_ASSERT_DOUBLE_EQUAL(pred, 1e3 * want, 1e-3);
        CU_ASSERT(meas > 0);
        CU_ASSERT_DOUBLE_EQUAL(err, 100 * (pred - meas) / meas, 0.01 + 1e-3 * fabs(err));
        CU_ASSERT_DOUBLE_EQUAL(diff, pred - meas, 2e-4);
    }
    free(cmp);
    free(db);
    CU_ASSERT(out1 && !strstr(out1, "no all-reduce measurements"));
    char *warn = NULL;
    size_t wl = 0;
    CU_ASSERT(pl_read_file(err, 1 << 20, &warn, &wl, &e) == PL_OK && warn &&
              strstr(warn, "has no all-reduce measurements: REDUCE_GRAD priced on 0 (free links); rerun pipelab profile"));
    free(warn);
    cost_model_free(m);
    free(text);
    free(out0);
    free(out1);
    free(pf);
    free(p0);
    free(p1);
    free(err);
    free(dir);
}

/* The threads' and MPI's measured links of the MPI test (different, so that which one priced
 * REDUCE_GRAD shows in the prediction). */
#define PRED_MPI_LAT_S 4.0e-3
#define PRED_MPI_BPS 5.0e6

/* Runs `pipelab run` of the replicated configuration run with --profile prof, on threads or (np
 * > 0) as np MPI processes, stderr to err (NULL: kept); returns the predicted iteration time, -1
 * when the run failed. */
static double mpi_case_predicted(const char *run, const char *prof, int np, const char *err) {
    char cmd[2048], *out = NULL;
    char redir[1024] = "";
    if (err) snprintf(redir, sizeof redir, " 2>%s", err);
#ifdef PIPELAB_MPIEXEC
    if (np > 0)
        snprintf(cmd, sizeof cmd, "{ " MPIENV "timeout 60 %s -np %d --oversubscribe %s %s --transport mpi --profile %s%s; }",
                 PIPELAB_MPIEXEC, np, PIPELAB_BIN, run, prof, redir);
    else
#else
    (void)np; /* no MPI in this build: the threads' run */
#endif
        snprintf(cmd, sizeof cmd, "{ %s %s --profile %s%s; }", PIPELAB_BIN, run, prof, redir);
    double t = sh(cmd, &out) == 0 ? predicted_iteration(out) : -1;
    free(out);
    return t;
}

/* The point-to-point link the hand-off prediction test writes (alpha, beta): slow, so that the
 * term stands far above the compute's noise. */
#define P2P_LAT_S 2e-3
#define P2P_BPS 1e7

/* pipelab profile times the threads' hand-off between two ranks (its file carries the fitted
 * link, and no MPI one); a two-stage pipeline of one microbatch predicted from a profile with
 * the link takes exactly its two hand-offs on the critical path more (the activation forward,
 * its gradient back: each cost_link_s of the stage boundary's bytes) than from the same profile
 * without it, for gpipe and 1f1b. Under mpirun the same holds for MPI's link (p2p_mpi_*), which
 * a threads run ignores, as an MPI run ignores the threads' link. */
static void test_prediction_p2p(void) {
    char *dir = pl_test_tmpdir();
    char *pf = pl_test_path(dir, "p.csv"), *p0 = pl_test_path(dir, "p0.csv"), *p1 = pl_test_path(dir, "p1.csv");
    char cmd[2048], *text = NULL;
    cost_model *m = small_profile(pf, &text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(m->p2p[COST_TRANSPORT_THREADS].Bps > 0 && m->p2p[COST_TRANSPORT_THREADS].latency_s >= 0);
    CU_ASSERT(m->p2p[COST_TRANSPORT_MPI].Bps == 0);
    char extra[128];
    snprintf(extra, sizeof extra, "#@ p2p_latency_s=%.17g p2p_Bps=%.17g\n", P2P_LAT_S, P2P_BPS);
    CU_ASSERT_EQUAL(profile_variant(text, p0, NULL), 0);
    CU_ASSERT_EQUAL(profile_variant(text, p1, extra), 0);
    double want = 2 * (P2P_LAT_S + (double)m->cut_bytes[1] / P2P_BPS); /* the boundary after block 0 */
    static const char *const kinds[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++) {
        double t[2] = {-1, -1};
        for (int with = 0; with < 2; with++) {
            char *out = NULL;
            snprintf(cmd, sizeof cmd, "%s run --kind %s --ranks 2 --microbatches 1 " PSMALL
                     " --warmup 0 --timed 1 --no-db --format json --profile %s 2>/dev/null", PIPELAB_BIN, kinds[k],
                     with ? p1 : p0);
            CU_ASSERT_EQUAL(sh(cmd, &out), 0);
            t[with] = predicted_iteration(out);
            free(out);
        }
        CU_ASSERT(t[0] > 0 && t[1] > 0);
        CU_ASSERT(fabs((t[1] - t[0]) - want) <= 1e-6 * t[1]);
    }
    if (have_mpirun()) {
        /* p1: the threads' link only; p2: MPI's only */
        char *p2 = pl_test_path(dir, "p2.csv");
        snprintf(extra, sizeof extra, "#@ p2p_mpi_latency_s=%.17g p2p_mpi_Bps=%.17g\n", P2P_LAT_S, P2P_BPS);
        CU_ASSERT_EQUAL(profile_variant(text, p2, extra), 0);
        const char *run = "run --kind gpipe --ranks 2 --microbatches 1 " PSMALL " --warmup 0 --timed 1 --no-db --format json";
        double m0 = mpi_case_predicted(run, p0, 2, NULL), m1 = mpi_case_predicted(run, p1, 2, NULL);
        double m2 = mpi_case_predicted(run, p2, 2, NULL), h2 = mpi_case_predicted(run, p2, 0, NULL);
        double h0 = mpi_case_predicted(run, p0, 0, NULL);
        CU_ASSERT(m0 > 0 && m1 > 0 && m2 > 0 && h0 > 0 && h2 > 0);
        CU_ASSERT(fabs((m2 - m0) - want) <= 1e-6 * m2);
        CU_ASSERT(fabs(m1 - m0) <= 1e-9 * m0);
        CU_ASSERT(fabs(h2 - h0) <= 1e-9 * h0);
        free(p2);
    }
    cost_model_free(m);
    free(text);
    free(pf);
    free(p0);
    free(p1);
    free(dir);
}

/* An MPI run is predicted from the MPI all-reduce: `mpirun -np 2 pipelab profile --transport
 * mpi` records both links; with a profile carrying different threads and MPI links, the MPI
 * run's prediction exceeds the threads run's by exactly the difference of the two rings of the
 * stage's gradient bytes over 2 replicas (everything else is the same profile), and an MPI run
 * whose profile has only the threads' link is predicted from it, saying so. */
static void test_prediction_allreduce_mpi(void) {
    if (!have_mpirun()) {
        pl_test_skip("mpirun or the MPI transport is absent: the MPI all-reduce prediction not tested");
        return;
    }
#ifdef PIPELAB_MPIEXEC
    char *dir = pl_test_tmpdir();
    char *pf = pl_test_path(dir, "p.csv"), *pt = pl_test_path(dir, "pt.csv"), *pb = pl_test_path(dir, "pb.csv");
    char *err = pl_test_path(dir, "err.txt");
    char cmd[2048], *text = NULL;
    size_t len = 0;
    pl_err e = {0};
    snprintf(cmd, sizeof cmd, MPIENV "timeout 60 %s -np 2 --oversubscribe %s profile " PSMALL " --reps 3 --transport mpi -o %s",
             PIPELAB_MPIEXEC, PIPELAB_BIN, pf);
    CU_ASSERT_EQUAL_FATAL(sh(cmd, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pl_read_file(pf, 1 << 20, &text, &len, &e), PL_OK);
    cost_model *m = cost_model_read_csv(pf, text, len, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(m->allreduce[COST_TRANSPORT_MPI].Bps > 0 && m->allreduce[COST_TRANSPORT_MPI].latency_s >= 0);
    CU_ASSERT(m->allreduce[COST_TRANSPORT_THREADS].Bps > 0);
    CU_ASSERT(m->p2p[COST_TRANSPORT_MPI].Bps > 0 && m->p2p[COST_TRANSPORT_MPI].latency_s >= 0); /* MPI's hand-off */
    CU_ASSERT(m->p2p[COST_TRANSPORT_THREADS].Bps > 0);
    char thr[128], both[256];
    snprintf(thr, sizeof thr, "#@ allreduce_latency_s=%.17g allreduce_Bps=%.17g\n", PRED_LAT_S, PRED_BPS);
    snprintf(both, sizeof both, "%s#@ allreduce_mpi_latency_s=%.17g allreduce_mpi_Bps=%.17g\n", thr, PRED_MPI_LAT_S,
             PRED_MPI_BPS);
    CU_ASSERT_EQUAL(profile_variant(text, pt, thr), 0);
    CU_ASSERT_EQUAL(profile_variant(text, pb, both), 0);
    const char *run = "run --kind 1f1b --ranks 1 --replicas-stage 0=2 --microbatches 4 " PSMALL
                      " --warmup 0 --timed 1 --no-db --format json";
    double t_thr = mpi_case_predicted(run, pb, 0, NULL), t_mpi = mpi_case_predicted(run, pb, 2, NULL);
    double t_fallback = mpi_case_predicted(run, pt, 2, err);
    int64_t bytes = 0;
    for (int k = 0; k < m->n; k++) bytes += m->layer[k].param_bytes;
    double want = cost_ring_allreduce_s(2, (double)bytes, PRED_MPI_BPS, PRED_MPI_LAT_S) -
                  cost_ring_allreduce_s(2, (double)bytes, PRED_BPS, PRED_LAT_S);
    CU_ASSERT(t_thr > 0 && t_mpi > 0 && t_fallback > 0);
    CU_ASSERT(fabs((t_mpi - t_thr) - want) <= 1e-6 * t_mpi);
    CU_ASSERT(fabs(t_fallback - t_thr) <= 1e-9 * t_thr);
    char *warn = NULL;
    size_t wl = 0;
    CU_ASSERT(pl_read_file(err, 1 << 20, &warn, &wl, &e) == PL_OK && warn &&
              strstr(warn, "has no mpi all-reduce measurement: REDUCE_GRAD priced on its threads one"));
    free(warn);
    cost_model_free(m);
    free(text);
    free(pf);
    free(pt);
    free(pb);
    free(err);
    free(dir);
#endif
}

/* The CUDA backend has no all-reduce between GPUs: replicas with --backend cuda are refused before
 * anything runs, exit 2 (a flag combination) with a message saying why, also from a partition
 * file; and profile's MPI all-reduce is the CPU executor's. */
static void test_cuda_refuses_replicas(void) {
    char *dir = pl_test_tmpdir();
    char *part = partition_file(dir, "p.partition", "stage 0: layers 0-1 replicas 2 time_s 1e-3\n", 2);
    static const char *const flags[] = {"--replicas-stage 0=2", "--partition"};
    for (int k = 0; k < 2; k++) {
        char cmd[2048], *out = NULL;
        snprintf(cmd, sizeof cmd, "%s run --backend cuda --kind 1f1b --ranks 1 --microbatches 4 " PSMALL " %s%s%s --no-db 2>&1",
                 PIPELAB_BIN, flags[k], k ? " " : "", k ? part : "");
        CU_ASSERT_EQUAL(sh(cmd, &out), 2);
        CU_ASSERT(out && strstr(out, "run on the CPU backend (not --backend cuda): the CUDA backend has no gradient "
                                     "all-reduce between GPUs"));
        free(out);
    }
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s profile --backend cuda --transport mpi " PSMALL " 2>&1", PIPELAB_BIN);
    CU_ASSERT_EQUAL(sh(cmd, &out), 2);
    CU_ASSERT(out && strstr(out, "--transport mpi profiles the CPU executor's all-reduce"));
    free(out);
    free(part);
    free(dir);
}

void exec_test_replicas_cli_register(void) {
    static const pl_test_case cases[] = {
        {"threads and MPI give identical weights with replicas", test_mpi_replicas_equal_threads},
        {"a partition file runs; bad input is refused", test_partition_and_bad_input},
        {"a replica that fails or dies at its all-reduce", test_replica_fails_in_allreduce},
        {"the all-reduce is profiled and predicted", test_prediction_allreduce},
        {"an MPI run is predicted from the MPI all-reduce", test_prediction_allreduce_mpi},
        {"the hand-off between ranks is profiled and predicted", test_prediction_p2p},
        {"the CUDA backend refuses replicas", test_cuda_refuses_replicas},
        {NULL, NULL}};
    pl_test_suite("pipelab run with replicas", cases);
}
