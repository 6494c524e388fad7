/* test_db_cli.c: `pipelab db` and `pipelab plot` from the command line: a failed merge leaves no
 * new file and an existing output byte for byte as it was; the ids `db list` prints name their
 * runs (predictions as p:X, longer prefixes where 8 characters are shared) and `db show` takes
 * them; and plot writes the format its output's extension names (.png, .svg, .pdf) or refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_test.h"
#include "store.h"
#include "util.h"

/* Runs a shell command line; returns its exit status and (if out) its output. */
static int sh(char **out, const char *cmd) {
    char *o = NULL;
    int rc = pl_test_run(cmd, &o);
    if (out) *out = o;
    else free(o);
    return rc;
}

/* Number of runs in the database at path (-1 on error). */
static int count_runs(const char *path) {
    store *s = NULL;
    pl_err e;
    store_run *runs = NULL;
    size_t n = 0;
    if (store_open(path, 1, &s, &e) != PL_OK) return -1;
    int ok = store_list_runs(s, NULL, 0, &runs, &n, &e) == PL_OK;
    store_runs_free(runs, n);
    store_close(s);
    return ok ? (int)n : -1;
}

/* Writes one small run with this uid and kind (and nops of ops, NULL for none) into the
 * database at path; returns 0 or -1. */
static int put_run_ops(const char *path, const char *uid, const char *kind, const store_op *ops, size_t nops) {
    store *s = NULL;
    pl_err e;
    if (store_open(path, 0, &s, &e) != PL_OK) return -1;
    store_run r;
    memset(&r, 0, sizeof r);
    r.uid = uid;
    r.kind = kind;
    r.schedule = "1f1b";
    r.ranks = r.stages = 2;
    r.microbatches = 4;
    r.chunks = r.iterations = 1;
    r.iteration_time_s = 1;
    r.throughput_samples_s = 4;
    store_rank_metric m[2] = {{.rank = 0, .busy_s = 1, .peak_mem_bytes = 1024}, {.rank = 1, .busy_s = 1, .peak_mem_bytes = 1024}};
    int code = store_write_run(s, &r, m, 2, ops, nops, NULL, &e);
    if (code != PL_OK) fprintf(stderr, "\n  %s\n", e.msg);
    store_close(s);
    return code == PL_OK ? 0 : -1;
}

/* The same without ops. */
static int put_run(const char *path, const char *uid, const char *kind) { return put_run_ops(path, uid, kind, NULL, 0); }

/* Returns 1 when dir holds no entry other than the names in keep (NULL-terminated) and the
 * -wal / -shm files SQLite may keep beside them. */
static int only_these(const char *dir, const char *const *keep) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    if (sh(&out, cmd) != 0) return 0;
    int ok = 1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        int known = 0;
        size_t n = strlen(line);
        if (n > 4 && (strcmp(line + n - 4, "-wal") == 0 || strcmp(line + n - 4, "-shm") == 0)) line[n - 4] = '\0';
        for (const char *const *k = keep; *k; k++) known |= strcmp(line, *k) == 0;
        if (!known) {
            fprintf(stderr, "\n  left behind: %s/%s\n", dir, line);
            ok = 0;
        }
    }
    free(out);
    return ok;
}

/* A merge that fails, by a bad input after good ones, creates no OUT (nor a temporary file
 * beside it) and leaves an existing OUT byte for byte as it was; the same merge without the
 * bad input succeeds, all at once. */
static void test_merge_failure(void) {
    char *dir = pl_test_tmpdir(), cmd[4096];
    char *a = pl_test_path(dir, "a.db"), *b = pl_test_path(dir, "b.db"), *bad = pl_test_path(dir, "notdb.db");
    char *fresh = pl_test_path(dir, "m2.db"), *old = pl_test_path(dir, "old.db");
    CU_ASSERT_EQUAL_FATAL(put_run(a, "run-a-1", "simulated") | put_run(a, "run-a-2", "measured"), 0);
    CU_ASSERT_EQUAL_FATAL(put_run(b, "run-b-1", "simulated"), 0);
    CU_ASSERT_EQUAL_FATAL(put_run(old, "run-old-1", "simulated"), 0);
    FILE *f = fopen(bad, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("this is not a database\n", f);
    fclose(f);
    size_t n0 = 0, n1 = 0;
    char *before = tr_slurp(old, &n0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);

    /* the audit's case: one bad input, a new OUT */
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' db merge '%s' -o '%s'", PIPELAB_BIN, bad, fresh);
    CU_ASSERT_EQUAL(sh(&out, cmd), 1);
    CU_ASSERT(out && strstr(out, "notdb.db") && strstr(out, "not a pipelab database"));
    free(out);
    CU_ASSERT(!pl_test_exists(fresh));
    /* good inputs, then the bad one: still no OUT */
    snprintf(cmd, sizeof cmd, "'%s' db merge '%s' '%s' '%s' -o '%s'", PIPELAB_BIN, a, b, bad, fresh);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 1);
    CU_ASSERT(!pl_test_exists(fresh));
    /* an existing OUT: not one run of a or b was added, the file is unchanged */
    snprintf(cmd, sizeof cmd, "'%s' db merge '%s' '%s' '%s' -o '%s'", PIPELAB_BIN, a, b, bad, old);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 1);
    char *after = tr_slurp(old, &n1);
    CU_ASSERT(after && n1 == n0 && memcmp(before, after, n0) == 0);
    CU_ASSERT_EQUAL(count_runs(old), 1);
    free(after);
    /* a missing input, and OUT that is no database: refused the same way */
    snprintf(cmd, sizeof cmd, "'%s' db merge '%s' '%s/absent.db' -o '%s'", PIPELAB_BIN, a, dir, fresh);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 1);
    CU_ASSERT(!pl_test_exists(fresh));
    snprintf(cmd, sizeof cmd, "'%s' db merge '%s' -o '%s'", PIPELAB_BIN, a, bad);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 1);
    static const char *const files[] = {"a.db", "b.db", "notdb.db", "old.db", NULL};
    CU_ASSERT(only_these(dir, files));

    /* without the bad input: a new OUT with the three runs, the old one with four */
    snprintf(cmd, sizeof cmd, "'%s' db merge '%s' '%s' -o '%s'", PIPELAB_BIN, a, b, fresh);
    CU_ASSERT_EQUAL(sh(&out, cmd), 0);
    CU_ASSERT(out && strstr(out, "m2.db: 3 runs added"));
    free(out);
    CU_ASSERT_EQUAL(count_runs(fresh), 3);
    snprintf(cmd, sizeof cmd, "'%s' db merge '%s' '%s' -o '%s'", PIPELAB_BIN, a, b, old);
    CU_ASSERT_EQUAL(sh(&out, cmd), 0);
    CU_ASSERT(out && strstr(out, "old.db: 3 runs added"));
    free(out);
    CU_ASSERT_EQUAL(count_runs(old), 4);
    static const char *const files2[] = {"a.db", "b.db", "notdb.db", "old.db", "m2.db", NULL};
    CU_ASSERT(only_these(dir, files2));

    free(before);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(a), free(b), free(bad), free(fresh), free(old), free(dir);
}

/* The uids of the listing test: predictions of measured runs, two measured runs sharing their
 * first 8 characters (and their predictions), an all-digit prefix, and a short uid. */
static const char *const list_uids[] = {
    "1a2b3c4d-0000-4000-8000-000000000001", "prediction-1a2b3c4d-0000-4000-8000-000000000001",
    "5e6f7a8b-1111-4000-8000-000000000002", "5e6f7a8b-2222-4000-8000-000000000003",
    "prediction-5e6f7a8b-1111-4000-8000-000000000002", "prediction-5e6f7a8b-2222-4000-8000-000000000003",
    "00000002-3333-4000-8000-000000000004", "short",
    NULL,
};

/* Lists the database with limit (a few rows: db show's lookup per row; many: one read of all
 * uids) and checks every row: its printed id names that run for `db show`, predictions show as
 * p:, and each of list_uids shows as expected. Returns the number of rows checked. */
static int check_listing(const char *db, int limit) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' db list --db '%s' --limit %d", PIPELAB_BIN, db, limit);
    CU_ASSERT_EQUAL_FATAL(sh(&out, cmd), 0);
    int rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long long id;
        char key[128], kind[32];
        if (sscanf(line, "%lld %127s %*s %31s", &id, key, kind) != 3) continue; /* the header */
        rows++;
        CU_ASSERT(strncmp(key, "predicti", 8) != 0);
        if (id > 8) CU_ASSERT(strncmp(key, "p:", 2) != 0);
        char *shown = NULL;
        snprintf(cmd, sizeof cmd, "'%s' db show '%s' --db '%s' | head -1", PIPELAB_BIN, key, db);
        CU_ASSERT_EQUAL(sh(&shown, cmd), 0);
        char want[64];
        snprintf(want, sizeof want, "run %lld ", id);
        int ok = shown && strncmp(shown, want, strlen(want)) == 0;
        if (!ok) fprintf(stderr, "\n  db list shows run %lld as '%s'; db show '%s' says: %s", id, key, key, shown ? shown : "");
        CU_ASSERT(ok);
        free(shown);
        /* the expected ids of the crafted runs */
        static const char *const want_key[] = {"1a2b3c4d", "p:1a2b3c4d", "5e6f7a8b-1", "5e6f7a8b-2", "p:5e6f7a8b-1",
                                               "p:5e6f7a8b-2", "00000002-", "short"};
        if (id >= 1 && id <= 8) {
            if (strcmp(key, want_key[id - 1]) != 0) fprintf(stderr, "\n  run %lld: want '%s', got '%s'\n", id, want_key[id - 1], key);
            CU_ASSERT_STRING_EQUAL(key, want_key[id - 1]);
        }
    }
    free(out);
    return rows;
}

/* db list's ids: unique, p:X for predictions, accepted by db show; the same through both ways
 * of finding them (a few rows, many rows). */
static void test_list_ids(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "ids.db");
    /* ids 1..8 in list_uids' order: measured runs odd, their predictions even (but "short") */
    for (int i = 0; list_uids[i]; i++)
        CU_ASSERT_EQUAL_FATAL(put_run(db, list_uids[i], strncmp(list_uids[i], "prediction-", 11) == 0 ? "simulated" : "measured"), 0);
    CU_ASSERT_EQUAL(check_listing(db, 0), 8);
    /* 30 more runs: now --limit 0 takes the other way */
    char uid[64];
    for (int i = 0; i < 30; i++) {
        snprintf(uid, sizeof uid, "%08x-fill-%d", 0xabc00000u + (unsigned)i, i);
        CU_ASSERT_EQUAL_FATAL(put_run(db, uid, "measured"), 0);
    }
    CU_ASSERT_EQUAL(check_listing(db, 0), 38);
    CU_ASSERT_EQUAL(check_listing(db, 5), 5);
    /* an ambiguous prefix is still refused, naming it */
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' db show p:5e6f7a8b --db '%s'", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(sh(&out, cmd), 1);
    CU_ASSERT(out && strstr(out, "ambiguous"));
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(db);
    free(dir);
}

/* Returns 1 when gnuplot runs and lists the terminal. */
static int gnuplot_has(const char *terminal) {
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "${PIPELAB_GNUPLOT:-gnuplot} -e 'set terminal' 2>&1");
    int ok = sh(&out, cmd) == 0 && out && strstr(out, terminal);
    free(out);
    return ok;
}

/* plot's format follows the output's extension: %PDF for .pdf, an SVG document for .svg, PNG's
 * signature for .png; any other name is a usage error that writes nothing. */
static void test_plot_formats(void) {
    if (!gnuplot_has("pngcairo")) {
        pl_test_skip("gnuplot (with pngcairo) is not installed");
        return;
    }
    char *dir = pl_test_tmpdir(), cmd[4096], *out = NULL;
    char *db = pl_test_path(dir, "p.db");
    for (int m = 2; m <= 8; m *= 2) {
        snprintf(cmd, sizeof cmd, "'%s' simulate --kind gpipe --ranks 2 --microbatches %d --db '%s' >/dev/null", PIPELAB_BIN, m, db);
        CU_ASSERT_EQUAL_FATAL(sh(NULL, cmd), 0);
    }
    static const struct { const char *name; const char *magic; size_t len; const char *terminal; } fmts[] = {
        {"fig.png", "\x89PNG", 4, "pngcairo"}, {"fig.svg", "<?xml", 5, "svg"}, {"fig.pdf", "%PDF", 4, "pdfcairo"},
    };
    for (size_t k = 0; k < sizeof fmts / sizeof fmts[0]; k++) {
        if (!gnuplot_has(fmts[k].terminal)) {
            fprintf(stderr, "\n  (gnuplot has no %s terminal: %s not drawn)\n", fmts[k].terminal, fmts[k].name);
            continue;
        }
        char *fig = pl_test_path(dir, fmts[k].name);
        snprintf(cmd, sizeof cmd, "'%s' plot bubble --db '%s' -o '%s'", PIPELAB_BIN, db, fig);
        CU_ASSERT_EQUAL(sh(&out, cmd), 0);
        free(out);
        size_t n = 0;
        char *data = tr_slurp(fig, &n);
        int ok = data && n > fmts[k].len && memcmp(data, fmts[k].magic, fmts[k].len) == 0;
        if (!ok) fprintf(stderr, "\n  %s does not start with '%s'\n", fmts[k].name, fmts[k].magic);
        CU_ASSERT(ok);
        free(data);
        free(fig);
    }
    static const char *const refused[] = {"fig.jpg", "fig", "fig.PDF", "figpdf", NULL};
    for (const char *const *r = refused; *r; r++) {
        char *fig = pl_test_path(dir, *r);
        snprintf(cmd, sizeof cmd, "'%s' plot bubble --db '%s' -o '%s'", PIPELAB_BIN, db, fig);
        CU_ASSERT_EQUAL(sh(&out, cmd), 2);
        CU_ASSERT(out && strstr(out, "pipelab plot: --output: ") && strstr(out, "should end in .png, .svg or .pdf"));
        free(out);
        CU_ASSERT(!pl_test_exists(fig));
        free(fig);
    }
    /* --svg with a name of another format is a contradiction */
    snprintf(cmd, sizeof cmd, "'%s' plot bubble --db '%s' --svg -o '%s/x.png'", PIPELAB_BIN, db, dir);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 2);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(db);
    free(dir);
}

/* `pipelab db trace RUN` writes the run's recorded actions as a Chrome trace: one complete
 * event per op in microseconds, compute on thread 0 and communication on thread 1 of the
 * rank's process (golden lines); a run without ops, or no RUN, is refused. */
static void test_db_trace(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "t.db"), *js = pl_test_path(dir, "t.json");
    const store_op ops[3] = {{0, 0, "0F0", "F", 0, 0, 0.0, 0.001},
                             {0, 1, "0SEND_F0", "SEND_F", 0, 0, 0.001, 0.0015},
                             {1, 0, "1F0", "F", 1, 0, 0.001, 0.0035}};
    CU_ASSERT_EQUAL_FATAL(put_run_ops(db, "aaaa1111", "measured", ops, 3), 0);
    CU_ASSERT_EQUAL_FATAL(put_run(db, "bbbb2222", "simulated"), 0);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' db trace aaaa1111 --db '%s' -o '%s'", PIPELAB_BIN, db, js);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 0);
    size_t n = 0;
    char *t = tr_slurp(js, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    int events = 0;
    for (const char *p = t; (p = strstr(p, "\"ph\":\"X\"")); p++) events++;
    CU_ASSERT_EQUAL(events, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "{\"name\":\"0F0\",\"cat\":\"F\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0.000000,"
                                     "\"dur\":1000.000000,\"args\":{\"stage\":0,\"mb\":0,\"seq\":0}}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "{\"name\":\"0SEND_F0\",\"cat\":\"SEND_F\",\"ph\":\"X\",\"pid\":0,\"tid\":1,"
                                     "\"ts\":1000.000000,\"dur\":500.000000,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "{\"name\":\"1F0\",\"cat\":\"F\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":1000.000000,"
                                     "\"dur\":2500.000000,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"rank 1\"}}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\"uid\":\"aaaa1111\""));
    CU_ASSERT(n > 2 && strcmp(t + n - 3, "]}\n") == 0);
    free(t);
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' db trace bbbb2222 --db '%s'", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(sh(&out, cmd), 1);
    CU_ASSERT(out && strstr(out, "has no recorded actions") != NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' db trace --db '%s'", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 2);
    free(db), free(js), free(dir);
}

/* An output that is the database a command reads (the same file, through another relative path
 * or a symbolic link too, or the PATH-wal beside it) is a usage error naming both that leaves the
 * database byte for byte as it was: db export, db trace, compare, and plot's figure and the data
 * file it writes beside it; another output is written as before. */
static void test_output_is_db(void) {
    char *dir = pl_test_tmpdir(), cmd[4096];
    char *db = pl_test_path(dir, "o.db"), *dat = pl_test_path(dir, "fig.dat"), *wal = pl_test_path(dir, "o.db-wal");
    char *link_csv = pl_test_path(dir, "link.csv"), *link_png = pl_test_path(dir, "link.png");
    char *other = pl_test_path(dir, "other.csv");
    const store_op ops[1] = {{0, 0, "0F0", "F", 0, 0, 0.0, 0.001}};
    CU_ASSERT_EQUAL_FATAL(put_run_ops(db, "aaaa1111", "measured", ops, 1), 0);
    CU_ASSERT_EQUAL_FATAL(put_run(dat, "bbbb2222", "simulated"), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("o.db", link_csv) | symlink("o.db", link_png), 0);
    size_t n0 = 0, d0 = 0;
    char *before = tr_slurp(db, &n0), *dat_before = tr_slurp(dat, &d0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dat_before);
    static const struct { const char *args, *want; } cases[] = {
        {"db export --db o.db --format csv -o o.db", "pipelab db: -o o.db and --db o.db are the same file"},
        {"db export --format json --db ./o.db -o link.csv", "-o link.csv and --db ./o.db are the same file"},
        {"db trace aaaa1111 --db o.db -o ./o.db", "pipelab db: -o ./o.db and --db o.db are the same file"},
        {"compare --db o.db -o o.db", "pipelab compare: -o o.db and --db o.db are the same file"},
        {"plot bubble --db o.db -o link.png", "pipelab plot: -o link.png and --db o.db are the same file"},
        {"plot bubble --db fig.dat -o fig.png", "-o fig.png's data file fig.dat and --db fig.dat are the same file"},
        {"db export --db o.db --format csv -o o.db-wal", "-o o.db-wal is o.db-wal, part of the database --db o.db"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int with_wal = strstr(cases[i].args, "-wal") != NULL;
        if (with_wal) { /* a WAL file beside the database (an empty one: SQLite's when no change is pending) */
            FILE *f = fopen(wal, "w");
            CU_ASSERT_PTR_NOT_NULL_FATAL(f);
            fclose(f);
        }
        char *out = NULL;
        snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s", dir, PIPELAB_BIN, cases[i].args);
        int rc = sh(&out, cmd);
        if (rc != 2 || !out || !strstr(out, cases[i].want)) fprintf(stderr, "\n  %s -> %d: %s\n", cases[i].args, rc, out ? out : "");
        CU_ASSERT_EQUAL(rc, 2);
        CU_ASSERT(out && strstr(out, cases[i].want) && strstr(out, "choose another output"));
        free(out);
        size_t n1 = 0, d1 = 0;
        char *after = tr_slurp(db, &n1), *dat_after = tr_slurp(dat, &d1);
        CU_ASSERT(after && n1 == n0 && memcmp(before, after, n0) == 0);
        CU_ASSERT(dat_after && d1 == d0 && memcmp(dat_before, dat_after, d0) == 0);
        free(after);
        free(dat_after);
        if (with_wal) {
            struct stat st;
            CU_ASSERT(stat(wal, &st) == 0 && st.st_size == 0);
            unlink(wal);
        }
    }
    CU_ASSERT_EQUAL(count_runs(db), 1);
    /* another output: written as before */
    snprintf(cmd, sizeof cmd, "'%s' db export --db '%s' --format csv -o '%s'", PIPELAB_BIN, db, other);
    CU_ASSERT_EQUAL(sh(NULL, cmd), 0);
    char *csv = tr_slurp(other, NULL);
    CU_ASSERT(csv && strstr(csv, "aaaa1111"));
    free(csv);
    free(before), free(dat_before), free(other), free(link_png), free(link_csv), free(wal), free(dat), free(db);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* `pipelab simulate --db` stores the files the run read: the schedule (--from) and the model
 * (a PipeDream graph file), each with its size and its text, which equal the files'; a
 * hardware preset is no file and is not listed. */
static void test_simulate_stores_inputs(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "in.db"), *sch = pl_test_path(dir, "s.sched");
    char *graph = pl_test_path(PIPELAB_PIPEDREAM_DIR, "alexnet.graph.txt");
    CU_ASSERT_FATAL(pl_test_exists(graph));
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' schedule --kind 1f1b --ranks 2 --microbatches 4 --to sched -o '%s'", PIPELAB_BIN, sch);
    CU_ASSERT_EQUAL_FATAL(sh(NULL, cmd), 0);
    snprintf(cmd, sizeof cmd, "'%s' simulate --from '%s' --model '%s' --hardware cluster-a --tag in --db '%s'", PIPELAB_BIN,
             sch, graph, db);
    char *out = NULL;
    int rc = sh(&out, cmd);
    if (rc) fprintf(stderr, "%s\n", out);
    free(out);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    store *s = NULL;
    pl_err e;
    store_run *runs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, "in", 0, &runs, &n, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    const char *pj = runs[0].params_json;
    size_t slen = 0, glen = 0;
    char *stext = tr_slurp(sch, &slen), *gtext = tr_slurp(graph, &glen);
    char *got_s = pl_test_json_string(pj, "\"role\":\"schedule\"", "text");
    char *got_g = pl_test_json_string(pj, "\"role\":\"model\"", "text");
    char *got_p = pl_test_json_string(pj, "\"role\":\"model\"", "path");
    CU_ASSERT(got_s && stext && strcmp(got_s, stext) == 0);
    CU_ASSERT(got_g && gtext && strcmp(got_g, gtext) == 0);
    CU_ASSERT_EQUAL(pl_test_json_number(strstr(pj, "\"role\":\"schedule\""), "bytes"), (double)slen);
    CU_ASSERT_EQUAL(pl_test_json_number(strstr(pj, "\"role\":\"model\""), "bytes"), (double)glen);
    CU_ASSERT(slen > 0 && glen > 0);
    CU_ASSERT_STRING_EQUAL(got_p ? got_p : "", graph);
    CU_ASSERT(strstr(pj, "\"role\":\"hardware\"") == NULL);
    free(got_s), free(got_g), free(got_p), free(stext), free(gtext);
    store_runs_free(runs, n);
    store_close(s);
    free(graph), free(db), free(sch), free(dir);
}

void test_db_cli_register(void) {
    static const pl_test_case cases[] = {
        {"db merge: a failed merge leaves no new file and the old one unchanged", test_merge_failure},
        {"db list ids (p:X for predictions, unique prefixes) work in db show", test_list_ids},
        {"plot: the output's extension chooses png, svg or pdf", test_plot_formats},
        {"simulate --db stores the files it read", test_simulate_stores_inputs},
        {"db trace writes a run's actions as a Chrome trace", test_db_trace},
        {"an output that is the database is refused, the database unchanged", test_output_is_db},
        {NULL, NULL},
    };
    pl_test_suite("db and plot from the command line", cases);
}
