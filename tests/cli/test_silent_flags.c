/* test_silent_flags.c: a flag that a command would not act on is a usage error (exit 2) naming
 * it, never a silent exit 0: with --from, the schedule flags that the file decides (schedule,
 * simulate and run alike); schedule's -o without a format, --flavour without a CSV and --check
 * with an output; an empty --db (simulate, run, calibrate, compare, plot, db) and --db beside
 * --no-db; and the parallel layout's settings without the model. The flags that do apply with
 * --from still run (--recompute with a PyTorch CSV, which carries none), and `schedule -o FILE`
 * writes FILE in the format its name says, warning of the policies a CSV cannot carry. An output of
 * simulate, run or calibrate that is the database is refused before anything runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_rows.h"
#include "pl_test.h"

#define SCHED GOLDEN "gpipe_p2_m3.sched"
#define FROM_SAYS(flag, what) flag ": the schedule comes from " SCHED ", which sets its " what "; leave " flag " out"

/* The rows that schedule, simulate and run answer alike, apart from the name: every flag the
 * file decides is refused with --from (the first of them named), the legacy letters on a .sched
 * file and without --from; the flags that do not change the schedule still run. */
#define FROM_ROWS(c, x)                                                                                 \
    {#c, x "--from " SCHED " --ranks 4 --microbatches 16 --recompute full", 2, USAGE(c, FROM_SAYS("--ranks", "ranks"))}, \
    {#c, x "--from " SCHED " --microbatches 16", 2, USAGE(c, FROM_SAYS("--microbatches", "microbatches"))}, \
    {#c, x "--from " SCHED " --chunks 2", 2, USAGE(c, FROM_SAYS("--chunks", "chunks (stages per rank)"))}, \
    {#c, x "--from " SCHED " --iterations 2", 2, USAGE(c, FROM_SAYS("--iterations", "iterations"))},    \
    {#c, x "--from " SCHED " --recompute none", 2, USAGE(c, FROM_SAYS("--recompute", "recomputation"))}, \
    {#c, x "--from " SCHED " --legacy-letters", 2,                                                      \
     USAGE(c, "--legacy-letters: reads the older letters of a PyTorch CSV (.csv), and " SCHED " is read as .sched " \
              "text; leave --legacy-letters out")},                                                     \
    {#c, x "--kind gpipe --ranks 2 --microbatches 2 --legacy-letters", 2,                              \
     USAGE(c, "--legacy-letters reads a PyTorch CSV given with --from: not with --kind")},              \
    {#c, x "--from " SCHED " --max-memory 16GiB", 0, ""},                                            \
    /* a PyTorch CSV carries no recomputation: --recompute gives it one */                           \
    {#c, x "--from " GOLDEN "1f1b_p3_m4.csv --recompute full", 0, ""}

static const cli_row cases[] = {
    FROM_ROWS(schedule, "--check "),
    FROM_ROWS(simulate, SIMX),
    FROM_ROWS(run, RUNX),
    {"simulate", SIMX "--from " SCHED " --tf 2 --tb 4 --tcomm 0.5", 0, ""},
    /* a CSV written of policies it cannot carry: a warning naming them, and still written */
    {"schedule", "--kind 2bw --ranks 2 --microbatches 4 --recompute full --to torch-csv", 0,
     "pipelab schedule: warning: the PyTorch CSV does not carry its 4 iterations (it reads back as one iteration of "
     "16 microbatches), 2bw weights (it reads back as flush), full recomputation (give --recompute full with the "
     "file); .sched keeps them\n"},
    {"schedule", "--kind pipedream --ranks 2 --microbatches 4 --iterations 1 --lowered --to torch-csv-legacy", 0,
     "pipelab schedule: warning: the PyTorch CSV does not carry stash weights (it reads back as flush); .sched keeps "
     "them\n"},
    {"schedule", "--kind 2bw --ranks 2 --microbatches 4 --to sched", 0, ""},
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 4 --to torch-csv", 0, ""},
    /* schedule's outputs: -o needs a format, --flavour a CSV, and --check writes nothing */
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 2 -o x.out", 2,
     USAGE(schedule, "-o x.out: the format is not in its name (.sched or .csv); give --to sched, torch-csv or "
                     "torch-csv-legacy")},
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 2 --flavour compute_only", 2,
     USAGE(schedule, "--flavour is the flavour of the CSV that --to torch-csv or torch-csv-legacy writes (or -o FILE.csv)")},
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 2 --to sched --flavour compute_only -o x.sched", 2,
     USAGE(schedule, "--flavour is the flavour of the CSV that --to torch-csv or torch-csv-legacy writes (or -o "
                     "FILE.csv), not --to sched")},
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 2 --check -o x.sched", 2,
     USAGE(schedule, "--check validates only and writes nothing: not with --to or -o")},
    /* what is printed, given with a conversion, which prints none of it */
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 2 --to sched --format json", 2,
     USAGE(schedule, "--format sets how the timeline and statistics print, and with --to the schedule is written "
                     "instead; leave --format out")},
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 2 --unit-w 2 --no-timeline -o x.sched", 2,
     USAGE(schedule, "--unit-w sets how the timeline and statistics print, and with -o the schedule is written "
                     "instead; leave --unit-w out")},
    {"schedule", "--kind 1f1b --ranks 2 --microbatches 2 --check --to sched", 2,
     USAGE(schedule, "--check validates only and writes nothing: not with --to or -o")},
    /* an output that cannot be written is refused before any work (profile's took seconds) */
    {"profile", "--width 8 --depth 2 -o ''", 2, USAGE(profile, "-o: needs a file name (got '')")},
    {"profile", "--width 8 --depth 2 -o nodir/p.csv", 1, "pipelab: -o nodir/p.csv: the folder nodir does not exist\n"},
    {"profile", "--width 8 --depth 2 -o .", 1, "pipelab: -o .: . is a folder, not a file\n"},
    {"partition", "--model uniform:layers=4,fwd_s=1 --workers 2 -o ''", 2, USAGE(partition, "-o: needs a file name (got '')")},
    {"model", "--model uniform:layers=4,fwd_s=1 --to-csv ''", 2, USAGE(model, "--to-csv: needs a file name (got '')")},
    {"model", "--model uniform:layers=4,fwd_s=1 --to-csv nodir/m.csv", 1,
     "pipelab: --to-csv nodir/m.csv: the folder nodir does not exist\n"},
    {"simulate", SIMX "--kind 1f1b --ranks 2 --microbatches 2 --trace-json ''", 2,
     USAGE(simulate, "--trace-json: needs a file name (got '')")},
    {"compare", "--db nodb.db -o .", 1, "pipelab: -o .: . is a folder, not a file\n"},
    /* the database flags */
    {"simulate", "--kind 1f1b --ranks 2 --microbatches 2 --db ''", 2, USAGE(simulate, "--db: needs a file name (got '')")},
    {"simulate", "--kind 1f1b --ranks 2 --microbatches 2 --no-db --db x.db", 2,
     USAGE(simulate, "give --db or --no-db, not both")},
    {"run", "--no-predict --oversubscribe --width 8 --warmup 0 --timed 1 --kind 1f1b --ranks 2 --microbatches 2 --db ''",
     2, USAGE(run, "--db: needs a file name (got '')")},
    {"run", RUNX "--kind 1f1b --ranks 2 --microbatches 2 --db x.db", 2, USAGE(run, "give --db or --no-db, not both")},
    {"calibrate", "--db '' --run 1 --model uniform:layers=2,fwd_s=1e-3", 2, USAGE(calibrate, "--db: needs a file name (got '')")},
    {"compare", "--db ''", 2, USAGE(compare, "--db: needs a file name (got '')")},
    {"compare", "--db '' -o x.out", 2, USAGE(compare, "--db: needs a file name (got '')")},
    {"plot", "bubble --db ''", 2, USAGE(plot, "--db: needs a file name (got '')")},
    {"db", "list --db ''", 2, USAGE(db, "--db: needs a file name (got '')")},
    {"db", "export --format csv --db ''", 2, USAGE(db, "--db: needs a file name (got '')")},
    /* list and show print to the terminal: an -o was ignored, with nothing written */
    {"db", "list -o l.txt", 2, USAGE(db, "-o applies to export, trace and merge: list prints to the terminal (redirect it "
                                         "to keep it)")},
    {"db", "show 1 -o s.txt", 2, USAGE(db, "-o applies to export, trace and merge: show prints to the terminal (redirect "
                                           "it to keep it)")},
    /* --ops was ignored by list, as export and trace refuse it */
    {"db", "list --ops", 2, USAGE(db, "--ops applies to show only")},
    {"db", "export --ops --format csv", 2, USAGE(db, "--ops applies to show only")},
    /* the layout's settings: the model first, then what the layout decides */
    {"simulate", SIMX "--kind 1f1b --ranks 2 --microbatches 2 --sequence-parallel", 2,
     USAGE(simulate, "--sequence-parallel is a setting of the parallel layout, which needs the model: --model "
                     "transformer:layers=L,hidden=H,heads=A,seq=S,vocab=V (or --megatron)")},
    {"simulate", SIMX "--kind 1f1b --ranks 2 --microbatches 2 --flash-attention --sequence-parallel", 2,
     USAGE(simulate, "--flash-attention is a setting of the parallel layout, which needs the model: --model "
                     "transformer:layers=L,hidden=H,heads=A,seq=S,vocab=V (or --megatron)")},
    {"simulate", SIMX "--model transformer:layers=4,hidden=64,heads=2,seq=8,vocab=128 --hardware dgx-a100 --kind 1f1b "
                      "--ranks 2 --microbatches 2 --distributed-optimizer", 2,
     USAGE(simulate, "--distributed-optimizer asks for the parallel layout, whose microbatches are --global-batch / "
                     "(--microbatch-size x --dp): leave --microbatches out")},
    {NULL, NULL, 0, NULL},
};

/* Every row, run in a folder of its own: its exit code and exact stderr; and no row leaves a
 * file there (the default database, an -o file). */
static void test_silent_table(void) {
    int exec = cli_test_have_run();
    char *dir = pl_test_tmpdir();
    for (const cli_row *c = cases; c->cmd; c++) {
        if (!exec && (strcmp(c->cmd, "run") == 0 || strcmp(c->cmd, "profile") == 0)) continue;
        cli_test_check_row(dir, c);
    }
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "?", ""); /* results/out/pipelab.db, x.out, x.sched: none */
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
    if (!exec) pl_test_skip("this build has no executor: the `pipelab run` rows were not run");
}

/* Returns the stdout of `pipelab schedule ARGS` run in dir (malloc'd), its exit code in *rc. */
static char *schedule(const char *dir, const char *args, int *rc) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "( cd '%s' && '%s' schedule %s 2>/dev/null )", dir, PIPELAB_BIN, args);
    *rc = pl_test_run(cmd, &out);
    return out;
}

/* Returns the text of the file name in dir (malloc'd), or NULL. */
static char *slurp(const char *dir, const char *name) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "cat '%s/%s'", dir, name);
    if (pl_test_run(cmd, &out) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Standard output that cannot be written (a full disk) is an error saying so, with exit 1, for
 * a command whose whole output is one buffer (schedule, db list) as for the others. */
static void test_stdout_full(void) {
    static const char *const args[] = {"schedule --kind 1f1b --ranks 2 --microbatches 2",
                                       "schedule --kind 1f1b --ranks 2 --microbatches 2 --format json",
                                       "simulate --no-db --kind 1f1b --ranks 2 --microbatches 2"};
    for (size_t k = 0; k < sizeof args / sizeof args[0]; k++) {
        char cmd[1024], *out = NULL;
        snprintf(cmd, sizeof cmd, "( '%s' %s 2>&1 >/dev/full )", PIPELAB_BIN, args[k]);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "pipelab: cannot write to standard output"));
        if (!out || !strstr(out, "cannot write")) fprintf(stderr, "\n%s: %s\n", args[k], out ? out : "");
        free(out);
    }
}

/* -o FILE without --to writes what --to writes for FILE's name: .sched text or (any case) the
 * PyTorch CSV, with --flavour; and the file reads back as the same schedule. */
static void test_output_by_name(void) {
    char *dir = pl_test_tmpdir();
    int rc;
    const char *gen = "--kind 1f1b --ranks 2 --microbatches 3 --lowered ";
    char args[1024];
    snprintf(args, sizeof args, "%s-o x.sched", gen);
    char *out = schedule(dir, args, &rc);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "?", ""); /* the file takes it all */
    free(out);
    snprintf(args, sizeof args, "%s--to sched", gen);
    char *want = schedule(dir, args, &rc), *got = slurp(dir, "x.sched");
    CU_ASSERT(want && got && strcmp(want, got) == 0);
    free(want);
    free(got);
    snprintf(args, sizeof args, "%s--flavour compute_only -o y.CSV", gen);
    free(schedule(dir, args, &rc));
    CU_ASSERT_EQUAL(rc, 0);
    snprintf(args, sizeof args, "%s--to torch-csv --flavour compute_only", gen);
    want = schedule(dir, args, &rc);
    got = slurp(dir, "y.CSV");
    CU_ASSERT(want && got && strcmp(want, got) == 0);
    free(want);
    free(got);
    out = schedule(dir, "--from y.CSV --check", &rc);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ok: y.CSV: 2 ranks, 2 stages, 3 microbatches"));
    free(out);
    /* the warning of what the CSV cannot carry names the file, which is written all the same */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "( cd '%s' && '%s' schedule --kind 2bw --ranks 2 --microbatches 2 -o z.csv 2>&1 >/dev/null )",
             dir, PIPELAB_BIN);
    out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "?", "pipelab schedule: warning: z.csv does not carry its 4 iterations (it reads "
                                            "back as one iteration of 8 microbatches), 2bw weights (it reads back as "
                                            "flush); .sched keeps them\n");
    free(out);
    out = schedule(dir, "--from z.csv --check", &rc);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ok: z.csv: 2 ranks, 2 stages, 8 microbatches"));
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

#define MODEL "transformer:layers=4,hidden=64,heads=2,seq=8,vocab=128"
#define DEFAULT_DB "results/out/pipelab.db"
#define SAME_FILE(c, flag, path, db)                                                                   \
    USAGE(c, flag " " path " and --db " db " are the same file: writing there would destroy the database; " \
             "choose another output")

/* The outputs of simulate (--trace-json), run (--dump-weights, --save-profile) and calibrate
 * (-o) that are the database the command reads or writes: named alike, by another path, or the
 * default database when --db is left out. */
static const cli_row db_outputs[] = {
    {"simulate", "--kind 1f1b --ranks 2 --microbatches 2 --db s.db --trace-json s.db", 2,
     SAME_FILE(simulate, "--trace-json", "s.db", "s.db")},
    {"simulate", "--kind 1f1b --ranks 2 --microbatches 2 --trace-json " DEFAULT_DB, 2,
     SAME_FILE(simulate, "--trace-json", DEFAULT_DB, DEFAULT_DB)},
    {"run", "--no-predict --oversubscribe --width 8 --warmup 0 --timed 1 --kind 1f1b --ranks 2 --microbatches 2 "
            "--db s.db --dump-weights ./s.db", 2, SAME_FILE(run, "--dump-weights", "./s.db", "s.db")},
    {"run", "--oversubscribe --width 8 --warmup 0 --timed 1 --profile-reps 1 --kind 1f1b --ranks 2 --microbatches 2 "
            "--db s.db --save-profile s.db", 2, SAME_FILE(run, "--save-profile", "s.db", "s.db")},
    {"run", "--no-predict --oversubscribe --width 8 --warmup 0 --timed 1 --kind 1f1b --ranks 2 --microbatches 2 "
            "--dump-weights " DEFAULT_DB, 2, SAME_FILE(run, "--dump-weights", DEFAULT_DB, DEFAULT_DB)},
    {"calibrate", "--db s.db --run 1 --model " MODEL " --hardware dgx-a100 -o s.db", 2,
     SAME_FILE(calibrate, "-o", "s.db", "s.db")},
    {NULL, NULL, 0, NULL},
};

/* Each row of db_outputs, run in a folder that holds s.db (a simulated run with its actions, which
 * calibrate fits) and the default database: its exit code and exact stderr; and both databases
 * are byte for byte as they were (no trace, weights, profile or INI written over them). */
static void test_output_is_db(void) {
    int exec = cli_test_have_run();
    char *dir = pl_test_tmpdir(), cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' simulate --model " MODEL " --hardware dgx-a100 --kind 1f1b --ranks 2 --microbatches 2 "
             "--trace --db s.db && '%s' simulate --kind 1f1b --ranks 2 --microbatches 2 && cp s.db s.orig && "
             "cp " DEFAULT_DB " default.orig",
             dir, PIPELAB_BIN, PIPELAB_BIN);
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    free(out);
    for (const cli_row *c = db_outputs; c->cmd; c++) {
        if (!exec && strcmp(c->cmd, "run") == 0) continue;
        cli_test_check_row(dir, c);
        snprintf(cmd, sizeof cmd, "cd '%s' && cmp s.db s.orig && cmp " DEFAULT_DB " default.orig", dir);
        out = NULL;
        int same = pl_test_run(cmd, &out) == 0;
        if (!same) fprintf(stderr, "\n  pipelab %s %s changed a database: %s\n", c->cmd, c->args, out ? out : "");
        CU_ASSERT(same);
        free(out);
        if (!same) { /* the next rows start from the databases as they were */
            snprintf(cmd, sizeof cmd, "cd '%s' && rm -f s.db-wal s.db-shm " DEFAULT_DB "-wal " DEFAULT_DB "-shm && "
                     "cp s.orig s.db && cp default.orig " DEFAULT_DB, dir);
            out = NULL;
            CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
            free(out);
        }
    }
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
    if (!exec) pl_test_skip("this build has no executor: the `pipelab run` rows were not run");
}

void test_silent_flags_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"flags a command would not act on are usage errors", test_silent_table},
        {"schedule -o FILE writes the format FILE's name says", test_output_by_name},
        {"standard output on a full disk: an error, exit 1", test_stdout_full},
        {"an output that is the database is refused, the database untouched", test_output_is_db},
        {NULL, NULL},
    };
    pl_test_suite("cli flags never silently ignored", tcases);
}
