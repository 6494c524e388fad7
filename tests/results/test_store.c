/* test_store.c: round trips, schema creation, migration, refusals, queries and export. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pl_test.h"
#include "util.h"

/* Checks every caller-given field of a written run against the one read back. */
static void check_same_run(const store_run *a, const store_run *b) {
    CU_ASSERT_STRING_EQUAL(a->kind, b->kind);
    CU_ASSERT_STRING_EQUAL(a->tag, b->tag);
    CU_ASSERT_STRING_EQUAL(a->cmdline, b->cmdline);
    CU_ASSERT_STRING_EQUAL(a->schedule, b->schedule);
    CU_ASSERT_EQUAL(a->ranks, b->ranks);
    CU_ASSERT_EQUAL(a->stages, b->stages);
    CU_ASSERT_EQUAL(a->microbatches, b->microbatches);
    CU_ASSERT_EQUAL(a->chunks, b->chunks);
    CU_ASSERT_EQUAL(a->iterations, b->iterations);
    CU_ASSERT_STRING_EQUAL(a->weights_policy, b->weights_policy);
    CU_ASSERT_STRING_EQUAL(a->recompute_policy, b->recompute_policy);
    CU_ASSERT_STRING_EQUAL(a->params_json, b->params_json);
    CU_ASSERT(a->seed == b->seed);
    CU_ASSERT_DOUBLE_EQUAL(a->iteration_time_s, b->iteration_time_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(a->throughput_samples_s, b->throughput_samples_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(a->idle_s, b->idle_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(a->bubble_fraction, b->bubble_fraction, 0);
    CU_ASSERT_DOUBLE_EQUAL(a->zb_bubble_rate, b->zb_bubble_rate, 0);
    CU_ASSERT_DOUBLE_EQUAL(a->comm_time_s, b->comm_time_s, 0);
    CU_ASSERT(a->peak_mem_bytes == b->peak_mem_bytes);
    CU_ASSERT_EQUAL(a->oom, b->oom);
    CU_ASSERT_EQUAL(a->repetitions, b->repetitions);
    CU_ASSERT_DOUBLE_EQUAL(a->iteration_time_stddev_s, b->iteration_time_stddev_s, 0);
}

static void test_run_roundtrip(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "nested/deeper/x.db");
    pl_err e;
    pl_err_clear(&e);
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_schema_version(s), STORE_SCHEMA_VERSION);
    store_run in;
    tr_sample_run(&in, "t1", 3);
    int64_t id = 0;
    CU_ASSERT_EQUAL_FATAL(store_write_run(s, &in, NULL, 0, NULL, 0, &id, &e), PL_OK);
    CU_ASSERT(id > 0);
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)id);
    store_run out;
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, key, &out, &e), PL_OK);
    CU_ASSERT(out.id == id);
    check_same_run(&in, &out);
    /* Defaults filled on write. */
    CU_ASSERT_STRING_EQUAL(out.version, PL_VERSION);
    CU_ASSERT_STRING_EQUAL(out.git_rev, PIPELAB_GIT_REV);
    CU_ASSERT(strlen(out.host) > 0);
    CU_ASSERT_STRING_EQUAL(out.origin, out.host);
    CU_ASSERT_EQUAL(strlen(out.uid), 36);
    CU_ASSERT_EQUAL(strlen(out.utc_time), 20);
    CU_ASSERT_EQUAL(out.utc_time[19], 'Z');
    /* Lookup by uid and by uid prefix gives the same run. */
    store_run byuid, bypre;
    CU_ASSERT_EQUAL(store_get_run(s, out.uid, &byuid, &e), PL_OK);
    CU_ASSERT(byuid.id == id);
    char pre[9];
    memcpy(pre, out.uid, 8);
    pre[8] = '\0';
    CU_ASSERT_EQUAL(store_get_run(s, pre, &bypre, &e), PL_OK);
    CU_ASSERT(bypre.id == id);
    store_run none;
    CU_ASSERT_EQUAL(store_get_run(s, "999999", &none, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "999999"));
    /* Caller-given uid, origin and time are kept; the same uid twice is refused and rolled back. */
    store_run in2;
    tr_sample_run(&in2, "t1", 4);
    in2.uid = "fixed-uid-0001";
    in2.origin = "elsewhere";
    in2.utc_time = "2020-01-02T03:04:05Z";
    store_rank_metric rk[4];
    tr_sample_ranks(rk, 4, 0);
    store_op *ops = tr_sample_ops(100, 4);
    CU_ASSERT_EQUAL(store_write_run(s, &in2, rk, 4, ops, 100, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(store_write_run(s, &in2, rk, 4, ops, 100, NULL, &e), PL_EINPUT);
    store_run got;
    CU_ASSERT_EQUAL(store_get_run(s, "fixed-uid-0001", &got, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(got.origin, "elsewhere");
    CU_ASSERT_STRING_EQUAL(got.utc_time, "2020-01-02T03:04:05Z");
    /* An all-digit uid prefix that is no integer id still finds the run; a shared prefix is ambiguous. */
    store_run d1, d2, amb;
    tr_sample_run(&d1, "digits", 5);
    d1.uid = "12345678-0001";
    CU_ASSERT_EQUAL(store_write_run(s, &d1, NULL, 0, NULL, 0, NULL, &e), PL_OK);
    d1.uid = "12345678-0002";
    CU_ASSERT_EQUAL(store_write_run(s, &d1, NULL, 0, NULL, 0, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(store_get_run(s, "12345678-0002", &d2, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(d2.uid, "12345678-0002");
    store_run_clear(&d2);
    CU_ASSERT_EQUAL(store_get_run(s, "12345678", &amb, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ambiguous"));
    CU_ASSERT_EQUAL(store_get_run(s, "12345678-000", &amb, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(store_get_run(s, "12345678-0001", &d2, &e), PL_OK);
    store_run_clear(&d2);
    /* A bad kind is refused. */
    in2.uid = NULL;
    in2.kind = "guessed";
    CU_ASSERT_EQUAL(store_write_run(s, &in2, rk, 4, NULL, 0, NULL, &e), PL_EINPUT);
    store_close(s);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM runs"), 4);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM ops"), 100);
    CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    CU_ASSERT_EQUAL(tr_partial_runs(path, -1), 3); /* runs 1, 3 and 4 were written without rank rows on purpose */
    free(ops);
    store_run_clear(&out);
    store_run_clear(&byuid);
    store_run_clear(&bypre);
    store_run_clear(&got);
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

static void test_ranks_ops_roundtrip(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "r.db");
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    store_run in;
    tr_sample_run(&in, "ops", 1);
    store_rank_metric rk[4];
    tr_sample_ranks(rk, 4, 7);
    size_t nops = 100000;
    store_op *ops = tr_sample_ops(nops, 4);
    int64_t id = 0;
    double t0 = pl_now_s();
    CU_ASSERT_EQUAL_FATAL(store_write_run(s, &in, rk, 4, ops, nops, &id, &e), PL_OK);
    double dt = pl_now_s() - t0;
    CU_ASSERT(dt < 10.0); /* 100k op rows in one transaction: well under a second without sanitizers */
    store_rank_metric *m = NULL;
    int nm = 0;
    CU_ASSERT_EQUAL_FATAL(store_get_rank_metrics(s, id, &m, &nm, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(nm, 4);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(m[i].rank, rk[i].rank);
        CU_ASSERT_DOUBLE_EQUAL(m[i].busy_s, rk[i].busy_s, 0);
        CU_ASSERT_DOUBLE_EQUAL(m[i].idle_s, rk[i].idle_s, 0);
        CU_ASSERT_DOUBLE_EQUAL(m[i].bubble_fraction, rk[i].bubble_fraction, 0);
        CU_ASSERT_DOUBLE_EQUAL(m[i].comm_s, rk[i].comm_s, 0);
        CU_ASSERT(m[i].peak_mem_bytes == rk[i].peak_mem_bytes);
    }
    store_op *back = NULL;
    size_t nback = 0;
    CU_ASSERT_EQUAL_FATAL(store_get_ops(s, id, &back, &nback, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(nback, nops);
    /* Read back ordered by (rank, seq): match each row to its source by those keys. */
    size_t bad = 0;
    for (size_t i = 0; i < nback; i++) {
        size_t src = (size_t)back[i].seq * 4 + (size_t)back[i].rank;
        if (src >= nops || strcmp(back[i].action, ops[src].action) != 0 || strcmp(back[i].kind, ops[src].kind) != 0 ||
            back[i].stage != ops[src].stage || back[i].mb != ops[src].mb || back[i].start_s != ops[src].start_s ||
            back[i].end_s != ops[src].end_s)
            bad++;
        if (i > 0 && (back[i].rank < back[i - 1].rank ||
                      (back[i].rank == back[i - 1].rank && back[i].seq <= back[i - 1].seq)))
            bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    int64_t cnt = 0;
    CU_ASSERT_EQUAL(store_count_ops(s, id, &cnt, &e), PL_OK);
    CU_ASSERT_EQUAL(cnt, (int64_t)nops);
    store_ops_free(back, nback);
    free(m);
    free(ops);
    store_close(s);
    CU_ASSERT_EQUAL(tr_partial_runs(path, (int64_t)nops), 0);
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

static void test_migration_v1(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "v1.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(path, tr_v1_schema), SQLITE_OK);
    pl_err e;
    store *s = NULL;
    /* Read-only: readable as is, missing columns read as their defaults, file untouched. */
    CU_ASSERT_EQUAL_FATAL(store_open(path, 1, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_schema_version(s), 1);
    store_run r;
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, "old-uid-1", &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.repetitions, 1);
    CU_ASSERT_STRING_EQUAL(r.schedule, "gpipe");
    store_run_clear(&r);
    store_close(s);
    CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), 1);
    /* Writable: migrated to the current version, old run intact, new runs carry the new columns. */
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_schema_version(s), STORE_SCHEMA_VERSION);
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, "1", &r, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(r.uid, "old-uid-1");
    CU_ASSERT_STRING_EQUAL(r.git_rev, "abc123");
    CU_ASSERT_DOUBLE_EQUAL(r.iteration_time_s, 2.5, 0);
    CU_ASSERT_EQUAL(r.repetitions, 1);
    CU_ASSERT_DOUBLE_EQUAL(r.iteration_time_stddev_s, 0.0, 0);
    /* version 1's bubble (idle seconds) and bubble_rate (fraction), renamed by the 2 -> 3 step */
    CU_ASSERT_DOUBLE_EQUAL(r.idle_s, 0.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(r.bubble_fraction, 0.2, 0);
    CU_ASSERT(isnan(r.zb_bubble_rate));
    store_rank_metric *m1 = NULL;
    int nm1 = 0;
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, r.id, &m1, &nm1, &e), PL_OK);
    CU_ASSERT_EQUAL(nm1, 2);
    for (int i = 0; i < nm1; i++) CU_ASSERT_DOUBLE_EQUAL(m1[i].bubble_fraction, 0.5 / 2.5, 1e-15);
    free(m1);
    store_run_clear(&r);
    store_run in;
    tr_sample_run(&in, "new", 2);
    int64_t id = 0;
    CU_ASSERT_EQUAL(store_write_run(s, &in, NULL, 0, NULL, 0, &id, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, "2", &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.repetitions, 5);
    CU_ASSERT_DOUBLE_EQUAL(r.iteration_time_stddev_s, 0.015625, 0);
    store_run_clear(&r);
    store_close(s);
    CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM rank_metrics WHERE run_id = 1"), 2);
    CU_ASSERT(tr_integrity_ok(path));
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

/* Column list (name, type, not null, default, primary key) of a table of the file at path. */
static char *columns(const char *path, const char *table) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT group_concat(name || ' ' || type || ' ' || \"notnull\" || ' ' || ifnull(dflt_value, '-') || ' ' || pk,"
             " ', ') FROM (SELECT * FROM pragma_table_info('%s') ORDER BY cid)", table);
    return tr_sql_text(path, sql);
}

/* Checks the three runs of tr_v2_schema as read through the store (any schema version): the
 * bubble figures under their version 3 names, with the values version 2 meant. */
static void check_v2_runs(store *s) {
    pl_err e;
    store_run r;
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, "v2-sim", &r, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r.idle_s, 12, 0);                  /* was runs.bubble */
    CU_ASSERT_DOUBLE_EQUAL(r.bubble_fraction, 0.111111111111111, 0); /* was runs.bubble_rate */
    CU_ASSERT(isnan(r.zb_bubble_rate));                      /* never stored before version 3 */
    CU_ASSERT_DOUBLE_EQUAL(r.iteration_time_s, 27, 0);
    store_rank_metric *m = NULL;
    int nm = 0;
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, r.id, &m, &nm, &e), PL_OK);
    CU_ASSERT_EQUAL(nm, 4);
    double idle = 0;
    for (int i = 0; i < nm; i++) {
        CU_ASSERT_DOUBLE_EQUAL(m[i].busy_s, 24, 0);
        CU_ASSERT_DOUBLE_EQUAL(m[i].idle_s, 3, 0);
        CU_ASSERT_DOUBLE_EQUAL(m[i].bubble_fraction, 3.0 / 27, 1e-15); /* was 3 (seconds) */
        idle += m[i].idle_s;
    }
    /* the run's figures agree with its ranks' */
    CU_ASSERT_DOUBLE_EQUAL(idle, r.idle_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(idle / (4 * r.iteration_time_s), r.bubble_fraction, 1e-14);
    free(m);
    store_run_clear(&r);
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, "v2-meas", &r, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r.idle_s, 1.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(r.bubble_fraction, 0.3, 0);
    CU_ASSERT(isnan(r.zb_bubble_rate));
    CU_ASSERT_EQUAL(r.repetitions, 5);
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, r.id, &m, &nm, &e), PL_OK);
    CU_ASSERT_EQUAL(nm, 2);
    if (nm == 2) {
        CU_ASSERT_DOUBLE_EQUAL(m[0].bubble_fraction, 0.2, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(m[1].bubble_fraction, 0.4, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(m[1].idle_s, 1.0, 0);
        CU_ASSERT_EQUAL(m[1].peak_mem_bytes, 2048);
    }
    free(m);
    store_run_clear(&r);
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, "v2-zero", &r, &e), PL_OK);
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, r.id, &m, &nm, &e), PL_OK);
    CU_ASSERT_EQUAL(nm, 1);
    if (nm == 1) CU_ASSERT_DOUBLE_EQUAL(m[0].bubble_fraction, 0, 0); /* 0 / 0: no bubble */
    free(m);
    store_run_clear(&r);
}

/* Version 2 -> 3: runs.bubble (idle seconds) becomes idle_s, runs.bubble_rate (the fraction)
 * bubble_fraction, zb_bubble_rate is added (NULL: not recorded), rank_metrics.bubble (idle
 * seconds) becomes bubble_fraction = idle / (busy + idle). A readonly open reads the old file
 * under the new names without touching it; a writable open migrates it to exactly the tables a
 * fresh file has; export names the new columns. */
static void test_migration_v2(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "v2.db"), *fresh = pl_test_path(dir, "fresh.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(path, tr_v2_schema), SQLITE_OK);
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 1, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_schema_version(s), 2);
    check_v2_runs(s);
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(store_export(s, "old2", STORE_CSV, &b, &e), PL_OK);
    CU_ASSERT_PTR_NOT_NULL(b.data && strstr(b.data, ",idle_s,bubble_fraction,zb_bubble_rate,"));
    CU_ASSERT_PTR_NOT_NULL(b.data && strstr(b.data, ",12,0.111111111111111,,")); /* NULL rate: empty cell */
    pl_buf_free(&b);
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(store_export(s, "old2", STORE_JSON, &b, &e), PL_OK);
    CU_ASSERT_PTR_NOT_NULL(b.data && strstr(b.data, "\"idle_s\": 12, \"bubble_fraction\": 0.111111111111111, \"zb_bubble_rate\": null"));
    CU_ASSERT_PTR_NOT_NULL(b.data && strstr(b.data, "\"idle_s\": 1, \"bubble_fraction\": 0.4,"));
    CU_ASSERT_PTR_NULL(b.data && strstr(b.data, "\"bubble\""));
    CU_ASSERT_PTR_NULL(b.data && strstr(b.data, "\"bubble_rate\""));
    pl_buf_free(&b);
    store_close(s);
    CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), 2);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'bubble_rate'"), 1);
    /* writable: migrated in place */
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_schema_version(s), STORE_SCHEMA_VERSION);
    check_v2_runs(s);
    store_run in;
    tr_sample_run(&in, "new", 2);
    in.zb_bubble_rate = 0.0625;
    CU_ASSERT_EQUAL(store_write_run(s, &in, NULL, 0, NULL, 0, NULL, &e), PL_OK);
    store_close(s);
    CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), 3);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM runs"), 4);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM rank_metrics"), 7);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM ops WHERE run_id = 2"), 1);
    CU_ASSERT_EQUAL(tr_sql_double(path, "SELECT zb_bubble_rate FROM runs WHERE uid = 'v2-sim'"), -2); /* NULL */
    CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(path, "SELECT zb_bubble_rate FROM runs WHERE tag = 'new'"), 0.0625, 0);
    CU_ASSERT_DOUBLE_EQUAL(tr_sql_double(path, "SELECT bubble_fraction FROM rank_metrics WHERE run_id = 2 AND rank = 1"),
                           0.4, 1e-15);
    /* the same tables as a file created at version 3 */
    CU_ASSERT_EQUAL_FATAL(store_open(fresh, 0, &s, &e), PL_OK);
    store_close(s);
    const char *tables[] = {"runs", "rank_metrics", "ops"};
    for (int t = 0; t < 3; t++) {
        char *a = columns(path, tables[t]), *f = columns(fresh, tables[t]);
        CU_ASSERT_PTR_NOT_NULL(a);
        CU_ASSERT_PTR_NOT_NULL(f);
        if (a && f) CU_ASSERT_STRING_EQUAL(a, f);
        free(a);
        free(f);
    }
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN "
                                     "('idle_s', 'bubble_fraction', 'zb_bubble_rate')"), 3);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN ('bubble', 'bubble_rate')"), 0);
    CU_ASSERT_EQUAL(tr_sql_int(path, "SELECT count(*) FROM pragma_table_info('rank_metrics') WHERE name = 'bubble'"), 0);
    CU_ASSERT(tr_integrity_ok(path));
    pl_test_rmdir(dir);
    free(path);
    free(fresh);
    free(dir);
}

/* A version 1 file migrates through 2 to 3 into the same tables a fresh file has. */
static void test_migration_v1_columns(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "v1.db"), *fresh = pl_test_path(dir, "fresh.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(path, tr_v1_schema), SQLITE_OK);
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    store_close(s);
    CU_ASSERT_EQUAL_FATAL(store_open(fresh, 0, &s, &e), PL_OK);
    store_close(s);
    const char *tables[] = {"runs", "rank_metrics", "ops"};
    for (int t = 0; t < 3; t++) {
        char *a = columns(path, tables[t]), *f = columns(fresh, tables[t]);
        CU_ASSERT(a && f && strcmp(a, f) == 0);
        free(a);
        free(f);
    }
    pl_test_rmdir(dir);
    free(path);
    free(fresh);
    free(dir);
}

/* `pipelab simulate --db` stores the bubble figures it prints, under the same names: zb-h2,
 * p = 4, m = 8 (tF 1, I = W = 1) prints bubble_fraction 1/9 and zb_bubble_rate 0 (ZB-H2 has no
 * bubble inside a rank's span; only the staggered start and end, 3 s per rank over the 27 s
 * makespan); the database holds idle_s 12, bubble_fraction 1/9, zb_bubble_rate 0 and per rank
 * 24 s busy, 3 s idle, fraction 1/9. Before version 3 it held bubble 12 and bubble_rate 1/9. */
static void test_simulate_stores_what_it_prints(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "sim.db");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s simulate --kind zb-h2 --ranks 4 --microbatches 8 --format json --db %s --tag zb",
             PIPELAB_BIN, db);
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    double frac = pl_test_json_number(out, "bubble_fraction"), idle = pl_test_json_number(out, "idle_s"),
           zb = pl_test_json_number(out, "zb_bubble_rate");
    CU_ASSERT_DOUBLE_EQUAL(frac, 1.0 / 9, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(idle, 12, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(zb, 0, 1e-12);
    CU_ASSERT_PTR_NULL(out && strstr(out, "\"bubble\":"));
    CU_ASSERT_PTR_NULL(out && strstr(out, "\"bubble_rate\":"));
    free(out);
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    store_run r;
    CU_ASSERT_EQUAL_FATAL(store_get_run(s, "1", &r, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r.bubble_fraction, frac, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.idle_s, idle, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.zb_bubble_rate, zb, 1e-12);
    store_rank_metric *m = NULL;
    int nm = 0;
    CU_ASSERT_EQUAL(store_get_rank_metrics(s, r.id, &m, &nm, &e), PL_OK);
    CU_ASSERT_EQUAL(nm, 4);
    for (int i = 0; i < nm; i++) {
        CU_ASSERT_DOUBLE_EQUAL(m[i].busy_s, 24, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(m[i].idle_s, 3, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(m[i].bubble_fraction, 1.0 / 9, 1e-9);
    }
    free(m);
    store_run_clear(&r);
    store_close(s);
    pl_test_rmdir(dir);
    free(db);
    free(dir);
}

static void test_future_version_refused(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "future.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(path, "CREATE TABLE runs(id INTEGER PRIMARY KEY, hologram BLOB);"
                                        "INSERT INTO runs VALUES(1, x'00ff');PRAGMA user_version = 99;"), SQLITE_OK);
    size_t n0 = 0, n1 = 0;
    char *before = tr_slurp(path, &n0);
    pl_err e;
    pl_err_clear(&e);
    store *s = NULL;
    CU_ASSERT_EQUAL(store_open(path, 0, &s, &e), PL_EINPUT);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "99"));
    CU_ASSERT_EQUAL(store_open(path, 1, &s, &e), PL_EINPUT);
    char *after = tr_slurp(path, &n1);
    CU_ASSERT_FATAL(before && after);
    CU_ASSERT_EQUAL(n0, n1);
    CU_ASSERT(n0 == n1 && memcmp(before, after, n0) == 0);
    CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), 99);
    free(before);
    free(after);
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

static void test_garbage_refused(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "garbage.db");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 300; i++) fprintf(f, "this is not a database, line %d\n", i);
    fclose(f);
    size_t n0 = 0, n1 = 0;
    char *before = tr_slurp(path, &n0);
    pl_err e;
    pl_err_clear(&e);
    store *s = NULL;
    CU_ASSERT_EQUAL(store_open(path, 0, &s, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not a pipelab database"));
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_open(path, 1, &s, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, path));
    char *after = tr_slurp(path, &n1);
    CU_ASSERT(n0 == n1 && before && after && memcmp(before, after, n0) == 0);
    free(before);
    free(after);
    /* An SQLite file of some other program is refused too. */
    char *other = pl_test_path(dir, "other.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(other, "CREATE TABLE recipes(name TEXT);"), SQLITE_OK);
    char *obefore = tr_slurp(other, &n0);
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_open(other, 0, &s, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, other));
    char *oafter = tr_slurp(other, &n1);
    CU_ASSERT(n0 == n1 && obefore && oafter && memcmp(obefore, oafter, n0) == 0); /* not even switched to WAL */
    CU_ASSERT_EQUAL(tr_sql_int(other, "SELECT count(*) FROM sqlite_master"), 1);
    free(obefore);
    free(oafter);
    /* A missing file opened read-only is an error naming it, and is not created. */
    char *missing = pl_test_path(dir, "missing.db");
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_open(missing, 1, &s, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, missing));
    CU_ASSERT_FALSE(pl_test_exists(missing));
    free(missing);
    /* A folder or a pipe (as /dev/null is a device) is refused before SQLite sees it, which would
     * fail on it and leave PATH-journal beside it. */
    char *fifo = pl_test_path(dir, "pipe.db"), *journal = pl_test_path(dir, "pipe.db-journal");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    const char *const odd[] = {dir, fifo};
    const char *const says[] = {"is a folder, not a database file", "is a device, pipe or socket, not a database file"};
    for (int k = 0; k < 2; k++)
        for (int ro = 0; ro < 2; ro++) {
            pl_err_clear(&e);
            CU_ASSERT_EQUAL(store_open(odd[k], ro, &s, &e), PL_EINPUT);
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, says[k]));
        }
    CU_ASSERT_FALSE(pl_test_exists(journal));
    free(fifo);
    free(journal);
    free(other);
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

/* An SQLite file whose user_version is negative, or one of pipelab's versions (1..3) while its
 * tables are another program's (other names, or pipelab's three names with other columns), is
 * refused as not a pipelab database and left byte for byte as it was (not even switched to WAL),
 * by the library (read and write opens) and by simulate --db (exit 1; a negative version had
 * indexed the migrations out of bounds: a crash, or junk run as SQL; pipelab's table names at
 * version 3 were switched to WAL and written to until an insert failed). A genuine version 1 or
 * 2 file still migrates (test_migration_v1, test_migration_v2). */
static void test_foreign_versions_refused(void) {
    char *dir = pl_test_tmpdir();
    /* table 0: none; 1: another name; 2: pipelab's three names, other columns */
    static const char *const tables[] = {"", "CREATE TABLE contacts(name TEXT);",
                                         "CREATE TABLE runs(name TEXT); CREATE TABLE rank_metrics(name TEXT); "
                                         "CREATE TABLE ops(name TEXT);"};
    static const struct { int version; int table; } cases[] = {
        {-100000000, 0}, {-5, 0}, {-1, 0}, {-1, 1}, {1, 1}, {2, 1}, {3, 1}, {2, 0}, {1, 2}, {2, 2}, {3, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64], sql[256], cmd[2048];
        snprintf(name, sizeof name, "foreign%zu.db", i);
        char *path = pl_test_path(dir, name);
        snprintf(sql, sizeof sql, "%sPRAGMA user_version = %d;", tables[cases[i].table], cases[i].version);
        CU_ASSERT_EQUAL_FATAL(tr_raw_sql(path, sql), SQLITE_OK);
        size_t n0 = 0, n1 = 0;
        char *before = tr_slurp(path, &n0);
        char *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s' simulate --kind 1f1b --ranks 2 --microbatches 2 --db '%s'", PIPELAB_BIN, path);
        int rc = pl_test_run(cmd, &out);
        CU_ASSERT_EQUAL(rc, 1);
        CU_ASSERT(out && strstr(out, "not a pipelab database"));
        free(out);
        pl_err e;
        store *s = NULL;
        /* a write open in this process too, of a negative version only where the command refused
         * it (where it crashed, so would this process) */
        for (int readonly = cases[i].version > 0 || rc == 1 ? 0 : 1; readonly <= 1; readonly++) {
            pl_err_clear(&e);
            CU_ASSERT_EQUAL(store_open(path, readonly, &s, &e), PL_EINPUT);
            CU_ASSERT_PTR_NULL(s);
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, path));
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not a pipelab database"));
        }
        char *after = tr_slurp(path, &n1);
        CU_ASSERT(before && after && n0 == n1 && memcmp(before, after, n0) == 0);
        CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), cases[i].version);
        free(before);
        free(after);
        free(path);
    }
    pl_test_rmdir(dir);
    free(dir);
}

/* A version 2 file whose runs table is pipelab's but whose rank_metrics lacks the column the
 * migration to version 3 renames: the migration fails and rolls back, and the file is left byte
 * for byte as it was, still in its rollback-journal mode (the switch to WAL comes after the
 * migration; it came before). The message names the file and the migration. */
static void test_failed_migration_untouched(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "v2bad.db");
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(path, tr_v2_schema), SQLITE_OK);
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(path, "ALTER TABLE rank_metrics RENAME COLUMN bubble TO idle_share;"), SQLITE_OK);
    size_t n0 = 0, n1 = 0;
    char *before = tr_slurp(path, &n0);
    CU_ASSERT_FATAL(before && n0 > 18 && before[18] == 1); /* byte 18: 1 rollback journal, 2 WAL */
    pl_err e;
    store *s = NULL;
    CU_ASSERT_NOT_EQUAL(store_open(path, 0, &s, &e), PL_OK);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "schema migration"));
    char *after = tr_slurp(path, &n1);
    CU_ASSERT(after && n0 == n1 && memcmp(before, after, n0) == 0);
    CU_ASSERT_EQUAL(tr_sql_int(path, "PRAGMA user_version"), 2);
    free(before);
    free(after);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

static void test_list_and_export(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "l.db");
    pl_err e;
    store *s = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 0, &s, &e), PL_OK);
    const char *times[] = {"2026-01-01T00:00:03Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z",
                           "2026-01-01T00:00:04Z", "2026-01-01T00:00:05Z"};
    for (int i = 0; i < 5; i++) {
        store_run r;
        tr_sample_run(&r, i < 3 ? "a" : "b", i);
        r.utc_time = times[i];
        store_rank_metric rk[4];
        tr_sample_ranks(rk, 4, i);
        CU_ASSERT_EQUAL(store_write_run(s, &r, rk, 4, NULL, 0, NULL, &e), PL_OK);
    }
    store_run *runs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, "a", 0, &runs, &n, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_STRING_EQUAL(runs[0].utc_time, times[0]); /* newest first */
    CU_ASSERT_STRING_EQUAL(runs[2].utc_time, times[1]);
    store_runs_free(runs, n);
    CU_ASSERT_EQUAL_FATAL(store_list_runs(s, NULL, 2, &runs, &n, &e), PL_OK);
    CU_ASSERT_EQUAL(n, 2);
    if (n == 2) CU_ASSERT_STRING_EQUAL(runs[0].tag, "b");
    store_runs_free(runs, n);
    CU_ASSERT_EQUAL(store_list_runs(s, "nope", 0, &runs, &n, &e), PL_OK);
    CU_ASSERT_EQUAL(n, 0);
    store_runs_free(runs, n);

    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(store_export(s, "b", STORE_CSV, &b, &e), PL_OK);
    int lines = 0;
    for (size_t i = 0; i < b.len; i++) lines += b.data[i] == '\n';
    CU_ASSERT_EQUAL(lines, 3); /* header + 2 runs */
    CU_ASSERT(b.len > 0 && strncmp(b.data, "id,uid,origin,kind,tag", 22) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\"pipelab simulate --kind 1f1b --ranks 4 --microbatches 8 --tag \"\"x,y\"\"\""));
    pl_buf_free(&b);
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(store_export(s, NULL, STORE_JSON, &b, &e), PL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\"params\": {\"model\":{\"layers\":32},\"hw\":\"h200\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\"per_rank\": [{\"rank\": 0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "--tag \\\"x,y\\\""));
    pl_buf_free(&b);
    store_close(s);
    /* The JSON export is valid JSON with 5 runs (checked by SQLite's own JSON parser). */
    store *ro = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(path, 1, &ro, &e), PL_OK);
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(store_export(ro, NULL, STORE_JSON, &b, &e), PL_OK);
    store_close(ro);
    sqlite3 *db = NULL;
    sqlite3_open(":memory:", &db);
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db, "SELECT json_valid(?1) * json_array_length(?1)", -1, &st, NULL);
    sqlite3_bind_text(st, 1, b.data, -1, SQLITE_STATIC);
    CU_ASSERT_EQUAL(sqlite3_step(st), SQLITE_ROW);
    CU_ASSERT_EQUAL(sqlite3_column_int(st, 0), 5);
    sqlite3_finalize(st);
    sqlite3_close(db);
    pl_buf_free(&b);
    pl_test_rmdir(dir);
    free(path);
    free(dir);
}

void test_store_register(void) {
    static const pl_test_case cases[] = {
        {"run round trip, defaults, lookups, refusals", test_run_roundtrip},
        {"rank metrics and 100k ops round trip", test_ranks_ops_roundtrip},
        {"v1 file migrates to the current schema", test_migration_v1},
        {"simulate stores the bubble figures it prints", test_simulate_stores_what_it_prints},
        {"v1 file migrates to the tables of a fresh file", test_migration_v1_columns},
        {"v2 file: bubble columns renamed and converted, readonly and migrated", test_migration_v2},
        {"future schema version refused, file unchanged", test_future_version_refused},
        {"garbage, foreign and missing files refused", test_garbage_refused},
        {"foreign files with a negative or pipelab's version refused, unchanged", test_foreign_versions_refused},
        {"a failed migration leaves the file as it was, not in WAL mode", test_failed_migration_untouched},
        {"list filters and orders; export csv and json", test_list_and_export},
        {NULL, NULL},
    };
    pl_test_suite("store", cases);
}
