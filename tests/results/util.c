/* util.c: helpers shared by the results store tests (sample runs, raw SQL checks). */
#include "util.h"

#include "pl_test.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tr_sample_run(store_run *r, const char *tag, int index) {
    memset(r, 0, sizeof *r);
    r->kind = index % 2 ? "measured" : "simulated";
    r->tag = tag;
    r->cmdline = "pipelab simulate --kind 1f1b --ranks 4 --microbatches 8 --tag \"x,y\"";
    r->schedule = "1f1b";
    r->ranks = 4;
    r->stages = 4;
    r->microbatches = 8 + index;
    r->chunks = 1;
    r->iterations = 3;
    r->weights_policy = "stash";
    r->recompute_policy = "none";
    r->params_json = "{\"model\":{\"layers\":32},\"hw\":\"h200\"}";
    r->seed = 0xfedcba9876543210ull + (uint64_t)index;
    r->iteration_time_s = 1.25 + index;
    r->throughput_samples_s = 64.5 * (index + 1);
    r->idle_s = 0.375;
    r->bubble_fraction = 0.1875;
    r->zb_bubble_rate = 0.125;
    r->comm_time_s = 0.0625;
    r->peak_mem_bytes = (int64_t)80 << 30;
    r->oom = index % 3 == 0;
    r->repetitions = 5;
    r->iteration_time_stddev_s = 0.015625;
}

void tr_sample_ranks(store_rank_metric *m, int n, int index) {
    for (int i = 0; i < n; i++) {
        m[i].rank = i;
        m[i].busy_s = 1.0 + i + index;
        m[i].idle_s = 0.5 * i;
        m[i].bubble_fraction = m[i].idle_s / (m[i].busy_s + m[i].idle_s);
        m[i].comm_s = 0.125 * i;
        m[i].peak_mem_bytes = ((int64_t)1 << 33) + i;
    }
}

store_op *tr_sample_ops(size_t n, int ranks) {
    static const char *const actions[] = {"0F0", "0F1", "0B0", "0W0", "1F0", "1I0"};
    static const char *const kinds[] = {"F", "F", "B", "W", "F", "I"};
    store_op *ops = calloc(n ? n : 1, sizeof *ops);
    for (size_t i = 0; i < n; i++) {
        ops[i].rank = (int)(i % (size_t)ranks);
        ops[i].seq = (int)(i / (size_t)ranks);
        ops[i].action = actions[i % 6];
        ops[i].kind = kinds[i % 6];
        ops[i].stage = ops[i].rank;
        ops[i].mb = (int)(i % 7);
        ops[i].start_s = 0.001 * (double)i;
        ops[i].end_s = 0.001 * (double)i + 0.0005;
    }
    return ops;
}

/* The first row of a query run directly on a file: the connection and the statement on it. */
typedef struct first_row {
    sqlite3 *db;
    sqlite3_stmt *st;
} first_row;

/* Opens path read-only (waiting for writers as the store does) and steps sql to its first row;
 * returns 1 with r on it, else 0 (no row, or an error). row_close r either way. */
static int row_open(const char *path, const char *sql, first_row *r) {
    r->db = NULL;
    r->st = NULL;
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return 0;
    sqlite3_busy_timeout(r->db, STORE_BUSY_TIMEOUT_MS);
    return sqlite3_prepare_v2(r->db, sql, -1, &r->st, NULL) == SQLITE_OK && sqlite3_step(r->st) == SQLITE_ROW;
}

/* Finalizes the statement and closes the connection of r. */
static void row_close(first_row *r) {
    sqlite3_finalize(r->st);
    sqlite3_close(r->db);
}

int tr_fill(const char *path, const char *tag, int n, const char *uidp, int nops) {
    pl_err e;
    store *s = NULL;
    if (store_open(path, 0, &s, &e) != PL_OK) return 0;
    store_rank_metric rk[4];
    store_op *ops = tr_sample_ops((size_t)nops, 4);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        store_run r;
        char uid[64];
        tr_sample_run(&r, tag, i);
        if (uidp) {
            snprintf(uid, sizeof uid, "%s-%d", uidp, i);
            r.uid = uid;
        }
        tr_sample_ranks(rk, 4, i);
        ok += store_write_run(s, &r, rk, 4, ops, (size_t)nops, NULL, &e) == PL_OK;
    }
    free(ops);
    store_close(s);
    return ok;
}

int tr_raw_sql(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* The largest file a test reads back whole. */
#define TR_MAX_FILE_BYTES ((size_t)1 << 30)

char *tr_slurp(const char *path, size_t *n) {
    char *data = NULL;
    size_t len = 0;
    pl_err e;
    if (pl_read_file(path, TR_MAX_FILE_BYTES, &data, &len, &e) != PL_OK) return NULL;
    if (n) *n = len;
    return data;
}

int64_t tr_sql_int(const char *path, const char *sql) {
    first_row r;
    int64_t v = row_open(path, sql, &r) ? sqlite3_column_int64(r.st, 0) : -1;
    row_close(&r);
    return v;
}

char *tr_sql_text(const char *path, const char *sql) {
    first_row r;
    char *v = NULL;
    if (row_open(path, sql, &r)) {
        const unsigned char *t = sqlite3_column_text(r.st, 0);
        v = strdup(t ? (const char *)t : "");
    }
    row_close(&r);
    return v;
}

double tr_sql_double(const char *path, const char *sql) {
    first_row r;
    double v = -1;
    if (row_open(path, sql, &r)) v = sqlite3_column_type(r.st, 0) == SQLITE_NULL ? -2 : sqlite3_column_double(r.st, 0);
    row_close(&r);
    return v;
}

int tr_integrity_ok(const char *path) {
    first_row r;
    int ok = row_open(path, "PRAGMA integrity_check", &r) && strcmp((const char *)sqlite3_column_text(r.st, 0), "ok") == 0;
    row_close(&r);
    return ok;
}

int64_t tr_partial_runs(const char *path, int64_t expected_ops) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT (SELECT count(*) FROM runs r WHERE ranks != (SELECT count(*) FROM rank_metrics WHERE run_id = r.id)"
             " OR (%lld >= 0 AND %lld != (SELECT count(*) FROM ops WHERE run_id = r.id)))"
             " + (SELECT count(*) FROM rank_metrics WHERE run_id NOT IN (SELECT id FROM runs))"
             " + (SELECT count(*) FROM ops WHERE run_id NOT IN (SELECT id FROM runs))",
             (long long)expected_ops, (long long)expected_ops);
    return tr_sql_int(path, sql);
}

char *tr_traced_compare(const char *dir, const char *kind, int m, const char *db, const char *tag, const char *flag) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' run --kind %s --ranks 2 --microbatches %d --model mlp:width=32,depth=4,microbatch=4 --timed 3 "
             "--trace --oversubscribe --tag %s --db %s/%s --format csv >/dev/null 2>&1 "
             "&& '%s' compare --db %s/%s --tag %s %s 2>&1",
             PIPELAB_BIN, kind, m, tag, dir, db, PIPELAB_BIN, dir, db, tag, flag);
    char *out = NULL;
    if (pl_test_run(cmd, &out) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

int tr_table_only_then_clean(char *dir, const char *db, const char *flag) {
    char cmd[1024], want[64];
    snprintf(cmd, sizeof cmd, "'%s' compare --db %s/%s %s --format csv 2>&1", PIPELAB_BIN, dir, db, flag);
    snprintf(want, sizeof want, "%s prints a table", flag);
    char *out = NULL;
    int ok = pl_test_run(cmd, &out) == 2 && out && strstr(out, want);
    free(out);
    pl_test_rmdir(dir);
    free(dir);
    return ok;
}

/* The schema of version 1, as the first release wrote it (no stochastic-mode columns). */
const char tr_v1_schema[] =
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE, origin TEXT NOT NULL DEFAULT '',"
    " kind TEXT NOT NULL CHECK(kind IN ('simulated','measured')), tag TEXT NOT NULL DEFAULT '',"
    " cmdline TEXT NOT NULL DEFAULT '', schedule TEXT NOT NULL DEFAULT '', ranks INTEGER, stages INTEGER,"
    " microbatches INTEGER, chunks INTEGER, iterations INTEGER, weights_policy TEXT, recompute_policy TEXT,"
    " params_json TEXT, seed INTEGER, version TEXT, git_rev TEXT, host TEXT, utc_time TEXT,"
    " iteration_time_s REAL, throughput_samples_s REAL, bubble REAL, bubble_rate REAL, comm_time_s REAL,"
    " peak_mem_bytes INTEGER, oom INTEGER);"
    "CREATE INDEX runs_tag ON runs(tag, utc_time);"
    "CREATE TABLE rank_metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " rank INTEGER NOT NULL, busy_s REAL, idle_s REAL, bubble REAL, comm_s REAL, peak_mem_bytes INTEGER,"
    " PRIMARY KEY(run_id, rank)) WITHOUT ROWID;"
    "CREATE TABLE ops(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, rank INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, action TEXT, kind TEXT, stage INTEGER, mb INTEGER, start_s REAL, end_s REAL);"
    "CREATE INDEX ops_run ON ops(run_id, rank, seq);"
    "INSERT INTO runs VALUES(1,'old-uid-1','oldhost','measured','legacy','pipelab run','gpipe',2,2,4,1,1,"
    " 'stash','none','{}',42,'0.0.9','abc123','oldhost','2025-01-01T00:00:00Z',2.5,10.0,0.5,0.2,0.1,1000,0);"
    "INSERT INTO rank_metrics VALUES(1,0,2.0,0.5,0.25,0.05,1000),(1,1,2.0,0.5,0.25,0.05,900);"
    "PRAGMA user_version = 1;";

/* The schema of version 2, as pipelab wrote it before version 3 (store.c's DDL of that release,
 * then the 1 -> 2 columns in the CREATE): runs.bubble held idle SECONDS summed over ranks,
 * runs.bubble_rate the idle FRACTION, rank_metrics.bubble the rank's idle seconds (a copy of
 * idle_s). Run 'v2-sim' is what `pipelab simulate --kind zb-h2 --ranks 4 --microbatches 8 --db`
 * stored (tF 1, I = W = 1: 24 s busy and 3 s idle per rank over a 27 s makespan, bubble 12 s,
 * bubble_rate 1/9); run 'v2-meas' a measured run of 2 ranks (idle 0.5 and 1.0 s of 2.5 s
 * passes: fractions 0.2 and 0.4, their mean 0.3) with one op row; run 'v2-zero' has ranks that
 * did nothing (busy + idle = 0). */
const char tr_v2_schema[] =
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE,\n"
    "  origin TEXT NOT NULL DEFAULT '',\n"
    "  kind TEXT NOT NULL CHECK(kind IN ('simulated','measured')),\n"
    "  tag TEXT NOT NULL DEFAULT '', cmdline TEXT NOT NULL DEFAULT '',\n"
    "  schedule TEXT NOT NULL DEFAULT '', ranks INTEGER, stages INTEGER, microbatches INTEGER,\n"
    "  chunks INTEGER, iterations INTEGER, weights_policy TEXT, recompute_policy TEXT,\n"
    "  params_json TEXT, seed INTEGER, version TEXT, git_rev TEXT, host TEXT, utc_time TEXT,\n"
    "  iteration_time_s REAL, throughput_samples_s REAL, bubble REAL, bubble_rate REAL,\n"
    "  comm_time_s REAL, peak_mem_bytes INTEGER, oom INTEGER,\n"
    "  repetitions INTEGER NOT NULL DEFAULT 1, iteration_time_stddev_s REAL NOT NULL DEFAULT 0);\n"
    "CREATE INDEX runs_tag ON runs(tag, utc_time);\n"
    "CREATE TABLE rank_metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  rank INTEGER NOT NULL, busy_s REAL, idle_s REAL, bubble REAL, comm_s REAL,\n"
    "  peak_mem_bytes INTEGER, PRIMARY KEY(run_id, rank)) WITHOUT ROWID;\n"
    "CREATE TABLE ops(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  rank INTEGER NOT NULL, seq INTEGER NOT NULL, action TEXT, kind TEXT, stage INTEGER,\n"
    "  mb INTEGER, start_s REAL, end_s REAL);\n"
    "CREATE INDEX ops_run ON ops(run_id, rank, seq);\n"
    "INSERT INTO runs VALUES(1,'v2-sim','host2','simulated','old2','pipelab simulate --kind zb-h2','zb-h2',4,4,8,1,1,"
    " 'flush','none','{}',0,'0.1.0','def456','host2','2026-01-01T00:00:00Z',27,0.296296296296296,12,"
    " 0.111111111111111,0,0,0,1,0);"
    "INSERT INTO rank_metrics VALUES(1,0,24,3,3,0,0),(1,1,24,3,3,0,0),(1,2,24,3,3,0,0),(1,3,24,3,3,0,0);"
    "INSERT INTO runs VALUES(2,'v2-meas','host2','measured','old2','pipelab run --kind gpipe','gpipe',2,2,4,1,1,"
    " 'flush','none','{}',7,'0.1.0','def456','host2','2026-01-02T00:00:00Z',2.5,1.6,1.5,0.3,0.25,4096,0,5,0.01);"
    "INSERT INTO rank_metrics VALUES(2,0,2.0,0.5,0.5,0.125,4096),(2,1,1.5,1.0,1.0,0.125,2048);"
    "INSERT INTO ops VALUES(2,0,0,'0F0','F',0,0,0.0,0.25);"
    "INSERT INTO runs VALUES(3,'v2-zero','host2','simulated','old2','','gpipe',1,1,1,1,1,"
    " 'flush','none','{}',0,'0.1.0','def456','host2','2026-01-03T00:00:00Z',0,0,0,0,0,0,0,1,0);"
    "INSERT INTO rank_metrics VALUES(3,0,0,0,0,0,0);"
    "PRAGMA user_version = 2;";
