/* test_merge.c: merging overlapping databases, and the `pipelab db` command line. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "util.h"

static void test_merge_overlap(void) {
    char *dir = pl_test_tmpdir();
    char *a = pl_test_path(dir, "a.db"), *b = pl_test_path(dir, "b.db"), *out = pl_test_path(dir, "out.db");
    CU_ASSERT_EQUAL_FATAL(tr_fill(a, "A", 3, "shared", 12), 3);
    CU_ASSERT_EQUAL_FATAL(tr_fill(b, "B", 2, NULL, 8), 2);
    /* b also holds a copy of a's run shared-0 (same uid); integer ids 1..3 overlap in both. */
    CU_ASSERT_EQUAL_FATAL(tr_fill(b, "A", 1, "shared", 12), 1);
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(b, "UPDATE runs SET origin = '' WHERE tag = 'B'"), SQLITE_OK);
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(out, 0, &s, &e), PL_OK);
    int added = -1, skipped = -1;
    CU_ASSERT_EQUAL(store_merge(s, a, &added, &skipped, &e), PL_OK);
    CU_ASSERT_EQUAL(added, 3);
    CU_ASSERT_EQUAL(skipped, 0);
    CU_ASSERT_EQUAL(store_merge(s, b, &added, &skipped, &e), PL_OK);
    CU_ASSERT_EQUAL(added, 2);
    CU_ASSERT_EQUAL(skipped, 1);
    CU_ASSERT_EQUAL(store_merge(s, a, &added, &skipped, &e), PL_OK); /* the same file again */
    CU_ASSERT_EQUAL(added, 0);
    CU_ASSERT_EQUAL(skipped, 3);
    /* A version 1 file from an older pipelab merges without being migrated or modified. */
    char *v1 = pl_test_path(dir, "v1.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(v1, tr_v1_schema), SQLITE_OK);
    CU_ASSERT_EQUAL(store_merge(s, v1, &added, &skipped, &e), PL_OK);
    CU_ASSERT_EQUAL(added, 1);
    CU_ASSERT_EQUAL(tr_sql_int(v1, "PRAGMA user_version"), 1);
    store_run old;
    CU_ASSERT_EQUAL(store_get_run(s, "old-uid-1", &old, &e), PL_OK);
    CU_ASSERT_EQUAL(old.repetitions, 1);
    CU_ASSERT_STRING_EQUAL(old.origin, "oldhost");
    store_run_clear(&old);
    /* Merging the output into itself changes nothing. */
    CU_ASSERT_EQUAL(store_merge(s, out, &added, &skipped, &e), PL_OK);
    CU_ASSERT_EQUAL(added, 0);
    CU_ASSERT_EQUAL(skipped, 6);
    pl_err_clear(&e);
    char *missing = pl_test_path(dir, "missing.db");
    CU_ASSERT_EQUAL(store_merge(s, missing, &added, &skipped, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, missing));
    store_close(s);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs"), 6);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(DISTINCT uid) FROM runs"), 6);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM rank_metrics"), 5 * 4 + 2);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM ops"), 3 * 12 + 2 * 8);
    CU_ASSERT_EQUAL(tr_partial_runs(out, -1), 0);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs WHERE uid = 'shared-0'"), 1);
    /* Origins: a's runs keep their host; b's runs with an empty origin get b's path. */
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE tag = 'B' AND origin = '%s'", b);
    CU_ASSERT_EQUAL(tr_sql_int(out, sql), 2);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs WHERE tag = 'A' AND origin != '' AND origin = host"), 3);
    /* Sources are not modified. */
    CU_ASSERT_EQUAL(tr_sql_int(a, "SELECT count(*) FROM runs"), 3);
    CU_ASSERT_EQUAL(tr_sql_int(b, "SELECT count(*) FROM runs"), 3);
    CU_ASSERT(tr_integrity_ok(out));
    free(missing);
    free(v1);
    pl_test_rmdir(dir);
    free(a);
    free(b);
    free(out);
    free(dir);
}

/* Writes n runs of machine `host` into path: uids "<host>-<i>", origin and host set, ops rows
 * 3 + i so every run's child rows can be told apart. Returns how many were written. */
static int fill_machine(const char *path, const char *host, int n) {
    pl_err e;
    store *s = NULL;
    if (store_open(path, 0, &s, &e) != PL_OK) return 0;
    store_rank_metric rk[4];
    store_op *ops = tr_sample_ops((size_t)n + 3, 4);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        store_run r;
        char uid[64];
        tr_sample_run(&r, host, i);
        snprintf(uid, sizeof uid, "%s-%d", host, i);
        r.uid = uid;
        r.host = host;
        r.origin = host;
        tr_sample_ranks(rk, 4, i);
        ok += store_write_run(s, &r, rk, 4, ops, (size_t)i + 3, NULL, &e) == PL_OK;
    }
    free(ops);
    store_close(s);
    return ok;
}

/* Checks a merge of machines A (40 runs) and B (30 of its own, plus 25 of A's copied earlier):
 * 70 runs, each uid once, each with its machine as origin and exactly its own child rows. */
static void check_merged(const char *out) {
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs"), 70);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(DISTINCT uid) FROM runs"), 70);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs WHERE uid LIKE 'hostA-%' AND origin = 'hostA'"), 40);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs WHERE uid LIKE 'hostB-%' AND origin = 'hostB'"), 30);
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM rank_metrics"), 70 * 4);
    /* ops: run i of a machine has 3 + i rows; sum over A's 40 and B's 30 */
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM ops"), (40 * 3 + 39 * 40 / 2) + (30 * 3 + 29 * 30 / 2));
    CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs r WHERE (SELECT count(*) FROM ops o WHERE o.run_id = r.id)"
                                    " != 3 + CAST(substr(r.uid, 7) AS INTEGER)"), 0);
    CU_ASSERT_EQUAL(tr_partial_runs(out, -1), 0);
    CU_ASSERT(tr_integrity_ok(out));
}

/* Two machines whose databases overlap: B holds copies of 25 of A's runs (same uids, from an
 * earlier merge), and both files number their runs 1, 2, 3, ... Merged in either order, by the
 * command line, and merged again: every run exactly once, with its origin. */
static void test_merge_machines(void) {
    char *dir = pl_test_tmpdir();
    char *a = pl_test_path(dir, "hostA.db"), *b = pl_test_path(dir, "hostB.db"), *part = pl_test_path(dir, "partA.db");
    char *ab = pl_test_path(dir, "ab.db"), *ba = pl_test_path(dir, "ba.db");
    CU_ASSERT_EQUAL_FATAL(fill_machine(part, "hostA", 25), 25);
    CU_ASSERT_EQUAL_FATAL(fill_machine(b, "hostB", 30), 30);
    pl_err e;
    store *s = NULL;
    int added = 0, skipped = 0;
    CU_ASSERT_EQUAL_FATAL(store_open(b, 0, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_merge(s, part, &added, &skipped, &e), PL_OK);
    CU_ASSERT_EQUAL(added, 25);
    store_close(s);
    /* A keeps working after B copied part of it: its first 25 runs are the ones B has. */
    CU_ASSERT_EQUAL_FATAL(fill_machine(a, "hostA", 40), 40);
    CU_ASSERT_EQUAL(tr_sql_int(a, "SELECT min(id) FROM runs"), tr_sql_int(b, "SELECT min(id) FROM runs"));
    char *o = NULL;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s db merge %s %s -o %s", PIPELAB_BIN, a, b, ab);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "25 already present"));
    free(o);
    snprintf(cmd, sizeof cmd, "%s db merge %s %s -o %s", PIPELAB_BIN, b, a, ba);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &o), 0);
    free(o);
    check_merged(ab);
    check_merged(ba);
    /* Merging the same inputs again, and each output into the other, adds nothing. */
    snprintf(cmd, sizeof cmd, "%s db merge %s %s %s -o %s", PIPELAB_BIN, a, b, ba, ab);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &o), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "0 runs added"));
    free(o);
    check_merged(ab);
    CU_ASSERT_EQUAL(tr_sql_int(a, "SELECT count(*) FROM runs"), 40);
    CU_ASSERT_EQUAL(tr_sql_int(b, "SELECT count(*) FROM runs"), 55);
    pl_test_rmdir(dir);
    free(a);
    free(b);
    free(part);
    free(ab);
    free(ba);
    free(dir);
}

/* Runs the pipelab program with a formatted argument string (three %s); returns its exit status. */
static int pipelab(char **output, const char *fmt, const char *x, const char *y, const char *z) {
    char cmd[2048];
    char args[1536];
    snprintf(args, sizeof args, fmt, x, y, z);
    snprintf(cmd, sizeof cmd, "%s %s", PIPELAB_BIN, args);
    return pl_test_run(cmd, output);
}

static void test_cli(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "cli.db"), *db2 = pl_test_path(dir, "cli2.db");
    char *merged = pl_test_path(dir, "m/merged.db"), *missing = pl_test_path(dir, "missing.db");
    CU_ASSERT_EQUAL_FATAL(tr_fill(db, "sweep-x", 3, "cliuid", 6), 3);
    CU_ASSERT_EQUAL_FATAL(tr_fill(db2, "sweep-y", 2, NULL, 0), 2);
    char *o = NULL;
    CU_ASSERT_EQUAL(pipelab(&o, "db list --db %s%s%s", db, "", ""), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "sweep-x"));
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "cliuid-2"));
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "1f1b"));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db list --db %s --format csv --limit 2%s%s", db, "", ""), 0);
    int lines = 0;
    for (char *p = o; p && *p; p++) lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 3);
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db show cliuid-1 --db %s --ops%s%s", db, "", ""), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "uid cliuid-1"));
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "0F1"));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db show cliuid-0 --db %s --format json%s%s", db, "", ""), 0);
    CU_ASSERT(o && o[0] == '{' && strstr(o, "\"uid\": \"cliuid-0\"") && strstr(o, "\"per_rank\": [{") && !strstr(o, "\"ranks\": ["));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db show 1 --db %s%s%s", missing, "", ""), 1);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "pipelab: "));
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, missing));
    CU_ASSERT_FALSE(pl_test_exists(missing));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db show 77 --db %s%s%s", db, "", ""), 1);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "no run '77'"));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db export --db %s --format json --tag sweep-x%s%s", db, "", ""), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "\"per_rank\": [{\"rank\": 0"));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db merge %s %s -o %s", db, db2, merged), 0);
    free(o);
    CU_ASSERT_EQUAL(tr_sql_int(merged, "SELECT count(*) FROM runs"), 5);
    CU_ASSERT_EQUAL(pipelab(&o, "db list --bogus --db %s%s%s", db, "", ""), 2);
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db export --db %s%s%s", db, "", ""), 2); /* --format is required */
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db --help%s%s%s", "", "", ""), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "usage: pipelab db"));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db --db %s list --tag sweep-y%s%s", db2, "", ""), 0); /* --db first */
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "sweep-y"));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db frobnicate --db %s%s%s", db, "", ""), 2);
    free(o);
    pl_test_rmdir(dir);
    free(db);
    free(db2);
    free(merged);
    free(missing);
    free(dir);
}

/* `pipelab db merge` of a version 2 file (bubble = idle seconds, bubble_rate = fraction) into a
 * new file and into a version 3 file holding runs: the old runs arrive under the version 3
 * names with the values version 2 meant, the source is neither migrated nor modified, and
 * `db list` / `db show` / `db export` print them under the new names. */
static void test_merge_v2_into_v3(void) {
    char *dir = pl_test_tmpdir();
    char *v2 = pl_test_path(dir, "v2.db"), *fresh = pl_test_path(dir, "fresh.db"), *cur = pl_test_path(dir, "cur.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(v2, tr_v2_schema), SQLITE_OK);
    CU_ASSERT_EQUAL_FATAL(tr_fill(cur, "now", 2, "cur", 4), 2);
    char *o = NULL;
    CU_ASSERT_EQUAL(pipelab(&o, "db merge %s -o %s%s", v2, fresh, ""), 0);
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db merge %s %s -o %s", cur, v2, cur), 0);
    free(o);
    const char *outs[] = {fresh, cur};
    for (int k = 0; k < 2; k++) {
        const char *out = outs[k];
        CU_ASSERT_EQUAL(tr_sql_int(out, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
        CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM runs"), k ? 5 : 3);
        CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(out, "SELECT idle_s FROM runs WHERE uid = 'v2-sim'"), 12, 0);
        CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(out, "SELECT bubble_fraction FROM runs WHERE uid = 'v2-sim'"),
                               0.111111111111111, 0);
        CU_ASSERT_EQUAL(tr_sql_double(out, "SELECT zb_bubble_rate FROM runs WHERE uid = 'v2-sim'"), -2); /* NULL */
        CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(out, "SELECT max(abs(m.bubble_fraction - 3.0 / 27)) FROM rank_metrics m "
                                                  "JOIN runs r ON r.id = m.run_id WHERE r.uid = 'v2-sim'"), 0, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(out, "SELECT m.bubble_fraction FROM rank_metrics m JOIN runs r ON "
                                                  "r.id = m.run_id WHERE r.uid = 'v2-meas' AND m.rank = 1"), 0.4, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(out, "SELECT idle_s FROM runs WHERE uid = 'v2-meas'"), 1.5, 0);
        CU_ASSERT_EQUAL(tr_sql_int(out, "SELECT count(*) FROM ops o JOIN runs r ON r.id = o.run_id WHERE r.uid = 'v2-meas'"), 1);
        CU_ASSERT(tr_integrity_ok(out));
    }
    /* the version 3 file's own runs keep their rate */
    CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(cur, "SELECT zb_bubble_rate FROM runs WHERE uid = 'cur-0'"), 0.125, 0);
    /* the source is still a version 2 file with its old columns and values */
    CU_ASSERT_EQUAL(tr_sql_int(v2, "PRAGMA user_version"), 2);
    CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(v2, "SELECT bubble FROM rank_metrics WHERE run_id = 1 AND rank = 0"), 3, 0);
    CU_ASSERT_EQUAL(pipelab(&o, "db list --db %s --format csv%s%s", fresh, "", ""), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, ",bubble_fraction,"));
    CU_ASSERT_PTR_NULL(o && strstr(o, ",bubble_rate"));
    free(o);
    CU_ASSERT_EQUAL(pipelab(&o, "db show v2-sim --db %s%s%s", fresh, "", ""), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "bubble_fraction 0.111111  (11.11%; idle_s 12 s over the ranks)"));
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, "zb_bubble_rate  n/a"));
    free(o);
    /* an old file is read under the new names as well, without migrating it */
    CU_ASSERT_EQUAL(pipelab(&o, "db export --db %s --format csv%s%s", v2, "", ""), 0);
    CU_ASSERT_PTR_NOT_NULL(o && strstr(o, ",iteration_time_s,throughput_samples_s,idle_s,bubble_fraction,zb_bubble_rate,"));
    free(o);
    CU_ASSERT_EQUAL(tr_sql_int(v2, "PRAGMA user_version"), 2);
    pl_test_rmdir(dir);
    free(v2);
    free(fresh);
    free(cur);
    free(dir);
}

/* A merge ended by SIGTERM or SIGHUP while its temporary database exists (three traced runs of
 * 32 ranks: a merge of a quarter second or so, killed once the temporary file shows) leaves no
 * temporary file behind and no OUT, and ends by the signal (exit 128 + signal). */
static void test_merge_interrupted(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for i in 1 2 3; do '%s' simulate --kind 1f1b --ranks 32 --microbatches 256 --trace --db big.db "
             "--tag t$i >/dev/null || exit 1; done",
             dir, PIPELAB_BIN);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    const char *sig[] = {"TERM", "HUP"}; /* a background job ignores SIGINT, and the merge leaves it so */
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && { '%s' db merge big.db -o new.db 2>/dev/null & pid=$!; seen=0; "
                 "for i in $(seq 2000); do ls new.db.merge-* >/dev/null 2>&1 && { seen=1; break; }; sleep 0.001; done; "
                 "kill -%s $pid; wait $pid; st=$?; echo \"seen=$seen status=$st\"; ls; }",
                 dir, PIPELAB_BIN, sig[k]);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
        int seen = -1, st = -1;
        const char *at = out ? strstr(out, "seen=") : NULL;
        CU_ASSERT_FATAL(at && sscanf(at, "seen=%d status=%d", &seen, &st) == 2);
        if (seen == 1) { /* killed while the temporary files existed */
            CU_ASSERT_EQUAL(st, 128 + (k ? 1 : 15));
            CU_ASSERT(strstr(out, "merge-") == NULL);
            CU_ASSERT(strstr(out, "new.db") == NULL);
        } else {
            fprintf(stderr, "merge finished before its temporary file was seen: nothing to interrupt\n");
        }
        free(out);
        out = NULL;
    }
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

void test_merge_register(void) {
    static const pl_test_case cases[] = {
        {"merge of overlapping databases keeps each run once", test_merge_overlap},
        {"pipelab db list, show, export, merge", test_cli},
        {"a version 2 file merges into version 3 files under the new names", test_merge_v2_into_v3},
        {"two machines' overlapping databases merge to each run once, with its origin", test_merge_machines},
        {"an interrupted merge leaves no temporary files", test_merge_interrupted},
        {NULL, NULL},
    };
    pl_test_suite("merge", cases);
}
