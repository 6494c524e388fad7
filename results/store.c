/* store.c: the results store: opening, schema creation and migration, writing runs atomically. */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Switching a file to WAL mode waits for other processes doing the same: this many tries, this
 * long apart (microseconds), as long in all as the busy timeout. */
#define WAL_RETRY_US 50000
#define WAL_TRIES (STORE_BUSY_TIMEOUT_MS * 1000 / WAL_RETRY_US)
/* The tables every schema version has: runs, rank_metrics, ops. */
#define STORE_NTABLES 3

/* Run ids given to runs stored without one in this process: the counter mixed into each, so
 * that ids stay distinct without /dev/urandom, from any thread. */
static _Atomic unsigned uid_counter;

#define RC(f, t, v, d) {#f, t, offsetof(store_run, f), v, d}
/* Every column of the runs table except id, in table order. */
const store_col store_cols[] = {
    RC(uid, SC_TEXT, 1, "''"),
    RC(origin, SC_TEXT, 1, "''"),
    RC(kind, SC_TEXT, 1, "''"),
    RC(tag, SC_TEXT, 1, "''"),
    RC(cmdline, SC_TEXT, 1, "''"),
    RC(schedule, SC_TEXT, 1, "''"),
    RC(ranks, SC_INT, 1, "0"),
    RC(stages, SC_INT, 1, "0"),
    RC(microbatches, SC_INT, 1, "0"),
    RC(chunks, SC_INT, 1, "0"),
    RC(iterations, SC_INT, 1, "0"),
    RC(weights_policy, SC_TEXT, 1, "''"),
    RC(recompute_policy, SC_TEXT, 1, "''"),
    RC(params_json, SC_TEXT, 1, "''"),
    RC(seed, SC_U64, 1, "0"),
    RC(version, SC_TEXT, 1, "''"),
    RC(git_rev, SC_TEXT, 1, "''"),
    RC(host, SC_TEXT, 1, "''"),
    RC(utc_time, SC_TEXT, 1, "''"),
    RC(iteration_time_s, SC_REAL, 1, "0.0"),
    RC(throughput_samples_s, SC_REAL, 1, "0.0"),
    RC(idle_s, SC_REAL, 3, "bubble"),               /* version 1-2 name */
    RC(bubble_fraction, SC_REAL, 3, "bubble_rate"), /* version 1-2 name */
    RC(zb_bubble_rate, SC_REAL, 3, "NULL"),         /* not recorded before version 3 */
    RC(comm_time_s, SC_REAL, 1, "0.0"),
    RC(peak_mem_bytes, SC_I64, 1, "0"),
    RC(oom, SC_INT, 1, "0"),
    RC(repetitions, SC_INT, 2, "1"),
    RC(iteration_time_stddev_s, SC_REAL, 2, "0.0"),
};
const size_t store_ncols = sizeof store_cols / sizeof store_cols[0];

/* The current schema (version 3). A file created at version 1 or 2 and migrated below ends with
 * the same tables, column for column (tests/results check it); runs.zb_bubble_rate comes last
 * because a migration can only append a column. */
static const char *const schema_runs =
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE,\n"
    "  origin TEXT NOT NULL DEFAULT '',\n"
    "  kind TEXT NOT NULL CHECK(kind IN ('simulated','measured')),\n"
    "  tag TEXT NOT NULL DEFAULT '', cmdline TEXT NOT NULL DEFAULT '',\n"
    "  schedule TEXT NOT NULL DEFAULT '', ranks INTEGER, stages INTEGER, microbatches INTEGER,\n"
    "  chunks INTEGER, iterations INTEGER, weights_policy TEXT, recompute_policy TEXT,\n"
    "  params_json TEXT, seed INTEGER, version TEXT, git_rev TEXT, host TEXT, utc_time TEXT,\n"
    "  iteration_time_s REAL, throughput_samples_s REAL, idle_s REAL, bubble_fraction REAL,\n"
    "  comm_time_s REAL, peak_mem_bytes INTEGER, oom INTEGER,\n"
    "  repetitions INTEGER NOT NULL DEFAULT 1, iteration_time_stddev_s REAL NOT NULL DEFAULT 0,\n"
    "  zb_bubble_rate REAL);\n";

static const char *const schema_tail =
    "CREATE INDEX runs_tag ON runs(tag, utc_time);\n"
    "CREATE TABLE rank_metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  rank INTEGER NOT NULL, busy_s REAL, idle_s REAL, bubble_fraction REAL, comm_s REAL,\n"
    "  peak_mem_bytes INTEGER, PRIMARY KEY(run_id, rank)) WITHOUT ROWID;\n"
    "CREATE TABLE ops(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "  rank INTEGER NOT NULL, seq INTEGER NOT NULL, action TEXT, kind TEXT, stage INTEGER,\n"
    "  mb INTEGER, start_s REAL, end_s REAL);\n"
    "CREATE INDEX ops_run ON ops(run_id, rank, seq);\n";

/* Migrations: entry v brings a file from version v to v + 1, inside upgrade's transaction.
 * 2 -> 3: versions 1-2 stored runs.bubble = idle seconds summed over ranks, runs.bubble_rate =
 * the idle fraction, rank_metrics.bubble = the rank's idle seconds again (every writer stored
 * idle_s there); the columns are renamed to what they hold, and the rank column becomes the
 * rank's fraction, idle / (busy + idle), busy + idle being the window both were measured over
 * (the makespan of a simulated run, the pass time of a measured one). The Zero Bubble paper's
 * rate was not stored: NULL. */
static const char *const migrations[] = {
    NULL,
    "ALTER TABLE runs ADD COLUMN repetitions INTEGER NOT NULL DEFAULT 1;\n"
    "ALTER TABLE runs ADD COLUMN iteration_time_stddev_s REAL NOT NULL DEFAULT 0;\n",
    "ALTER TABLE runs RENAME COLUMN bubble TO idle_s;\n"
    "ALTER TABLE runs RENAME COLUMN bubble_rate TO bubble_fraction;\n"
    "ALTER TABLE runs ADD COLUMN zb_bubble_rate REAL;\n"
    "ALTER TABLE rank_metrics RENAME COLUMN bubble TO bubble_fraction;\n"
    "UPDATE rank_metrics SET bubble_fraction = CASE WHEN busy_s + idle_s > 0\n"
    "  THEN idle_s / (busy_s + idle_s) ELSE 0.0 END;\n",
};
_Static_assert(sizeof migrations / sizeof migrations[0] == STORE_SCHEMA_VERSION, "one migration per version step");

/* Fills e with "PATH: what: SQLite's message"; returns code. */
int store_sqlerr(store *s, pl_err *e, int code, const char *what) {
    return pl_errf(e, code, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

/* Executes sql (no result rows); returns the sqlite code. */
int store_exec(store *s, const char *sql) { return sqlite3_exec(s->db, sql, NULL, NULL, NULL); }

/* Prepares sql into *st the first time, resets it afterwards; returns PL_OK or PL_EIO. */
int store_prepare(store *s, sqlite3_stmt **st, const char *sql, pl_err *e) {
    if (*st) {
        sqlite3_reset(*st);
        sqlite3_clear_bindings(*st);
        return PL_OK;
    }
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        return store_sqlerr(s, e, PL_EIO, "cannot prepare a statement");
    return PL_OK;
}

/* Makes the missing folders above path; returns 0, or errno with *failed the folder (store_int.h). */
int store_make_parents(const char *path, char **failed) {
    *failed = NULL;
    char *p = strdup(path);
    if (!p) return ENOMEM;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            *failed = p;
            return errno;
        }
        *q = '/';
    }
    free(p);
    return 0;
}

/* Creates the missing parent folders of the database at path; returns PL_OK, or PL_EIO naming
 * the folder that could not be made. */
static int make_parents(const char *path, pl_err *e) {
    char *failed;
    int err = store_make_parents(path, &failed);
    if (err == 0) return PL_OK;
    if (!failed) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = pl_errf(e, PL_EIO, "%s: cannot create folder %s: %s", path, failed, strerror(err));
    free(failed);
    return rc;
}

/* Sets what every connection of the store uses: plain result codes (the error paths compare
 * them) and the busy timeout. */
static void set_connection_defaults(store *s) {
    sqlite3_extended_result_codes(s->db, 0);
    sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
}

/* Reads one integer from a single-value query; returns the sqlite code. */
static int query_int(store *s, const char *sql, int64_t *out) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            *out = 0;
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Reads the schema version and the number of schema objects in one statement (one snapshot, so
 * a schema another process commits meanwhile is seen whole or not at all); returns the sqlite code. */
static int read_header(store *s, int64_t *version, int64_t *nobjects) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT (SELECT user_version FROM pragma_user_version), "
                                "(SELECT count(*) FROM sqlite_master)", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *version = sqlite3_column_int64(st, 0);
            *nobjects = sqlite3_column_int64(st, 1);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* Explains why an existing file cannot be used; returns PL_EINPUT with the path. */
static int not_a_db(store *s, pl_err *e, int rc) {
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
        return pl_errf(e, PL_EINPUT, "%s: not a pipelab database (not an SQLite file, or corrupt): %s",
                       s->path, sqlite3_errmsg(s->db));
    return store_sqlerr(s, e, PL_EIO, "cannot read the database");
}

/* Bytes kept of SQLite's message on why a file is refused. */
#define STORE_WHY_MAX 256

/* Appends to b the "id, columns" select list of runs in a file of schema version v: each column
 * of store_cols, or its default where v predates it. */
static void select_list(pl_buf *b, int64_t v) {
    pl_buf_puts(b, "id");
    for (size_t i = 0; i < store_ncols; i++) {
        if (v >= store_cols[i].since) pl_buf_printf(b, ", %s", store_cols[i].name);
        else pl_buf_printf(b, ", %s AS %s", store_cols[i].dflt, store_cols[i].name);
    }
}

/* Whether the runs table of a file of version v has the columns of v (select_list prepares):
 * SQLITE_OK, SQLITE_ERROR when one is missing (another program's table of that name), or
 * SQLITE_NOMEM; why (msg, n bytes) gets SQLite's message, which names the column. */
static int runs_columns(store *s, int64_t v, char *msg, size_t n) {
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_puts(&b, "SELECT ");
    select_list(&b, v);
    pl_buf_puts(&b, " FROM runs LIMIT 0");
    if (b.failed || !b.data) {
        pl_buf_free(&b);
        return SQLITE_NOMEM;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, b.data, -1, &st, NULL);
    snprintf(msg, n, "%s", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    pl_buf_free(&b);
    return rc;
}

/* Refuses a file of a newer schema, and a foreign SQLite file before anything (even WAL)
 * touches it: one with objects but no version, a negative version, or a version of ours
 * without the tables every version has, or with a runs table that lacks that version's columns
 * (another program's user_version and tables). Returns PL_OK, or PL_EINPUT naming the path
 * (PL_EIO when the tables cannot be read). */
static int check_version(store *s, int64_t v, int64_t nobjects, pl_err *e) {
    if (v > STORE_SCHEMA_VERSION)
        return pl_errf(e, PL_EINPUT, "%s: schema version %lld is newer than this pipelab's (%d); use a newer pipelab",
                       s->path, (long long)v, STORE_SCHEMA_VERSION);
    int64_t ntables = STORE_NTABLES;
    int rc;
    if (v > 0 && (rc = query_int(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                    "name IN ('runs', 'rank_metrics', 'ops')", &ntables)) != SQLITE_OK)
        return not_a_db(s, e, rc);
    if (v < 0 || (v == 0 && nobjects > 0) || ntables != STORE_NTABLES)
        return pl_errf(e, PL_EINPUT, "%s: an SQLite file but not a pipelab database", s->path);
    char why[STORE_WHY_MAX];
    if (v > 0 && (rc = runs_columns(s, v, why, sizeof why)) != SQLITE_OK) {
        if (rc == SQLITE_NOMEM) return pl_errf(e, PL_ENOMEM, "out of memory");
        return pl_errf(e, PL_EINPUT, "%s: an SQLite file but not a pipelab database: its runs table lacks the columns of "
                                     "schema version %lld (%s)", s->path, (long long)v, why);
    }
    return PL_OK;
}

/* Moves the text of b into *out; returns PL_OK, or PL_ENOMEM when building it failed. */
static int take_text(pl_buf *b, char **out, pl_err *e) {
    if (b->failed || !b->data) {
        pl_buf_free(b);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    *out = b->data;
    return PL_OK;
}

/* Builds the statements of this handle that follow from store_cols: the "id, columns" select
 * list for this file's schema version, and the INSERT of a run (one per handle, so threads
 * with handles of their own never share it). Returns PL_OK or PL_ENOMEM. */
static int build_statements(store *s, pl_err *e) {
    pl_buf b;
    pl_buf_init(&b);
    select_list(&b, s->version);
    int code = take_text(&b, &s->select_cols, e);
    if (code != PL_OK) return code;
    pl_buf_init(&b);
    pl_buf_puts(&b, "INSERT INTO runs(");
    for (size_t i = 0; i < store_ncols; i++) pl_buf_printf(&b, "%s%s", i ? "," : "", store_cols[i].name);
    pl_buf_puts(&b, ") VALUES(");
    for (size_t i = 0; i < store_ncols; i++) pl_buf_puts(&b, i ? ",?" : "?");
    pl_buf_puts(&b, ")");
    return take_text(&b, &s->insert_sql, e);
}

/* Creates or migrates the schema inside one IMMEDIATE transaction (another process may be doing
 * the same); returns PL_OK or an error. */
static int upgrade(store *s, pl_err *e) {
    int rc = store_exec(s, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) return store_sqlerr(s, e, PL_EIO, "cannot lock the database");
    int64_t v = 0, nobjects = 0;
    int code;
    if ((rc = read_header(s, &v, &nobjects)) != SQLITE_OK) goto fail;
    code = check_version(s, v, nobjects, e); /* again: another process may have changed it */
    if (code != PL_OK) {
        store_exec(s, "ROLLBACK");
        return code;
    }
    if (v == 0) {
        if ((rc = store_exec(s, schema_runs)) != SQLITE_OK) goto fail;
        if ((rc = store_exec(s, schema_tail)) != SQLITE_OK) goto fail;
    } else {
        for (int64_t from = v; from < STORE_SCHEMA_VERSION; from++)
            if ((rc = store_exec(s, migrations[from])) != SQLITE_OK) goto fail;
    }
    if (v != STORE_SCHEMA_VERSION) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION);
        if ((rc = store_exec(s, sql)) != SQLITE_OK) goto fail;
    }
    if ((rc = store_exec(s, "COMMIT")) != SQLITE_OK) goto fail;
    s->version = STORE_SCHEMA_VERSION;
    return PL_OK;
fail:
    code = not_a_db(s, e, rc);
    pl_err_prefix(e, "schema %s: ", v == 0 ? "creation" : "migration");
    store_exec(s, "ROLLBACK");
    return code;
}

/* Switches the file to WAL mode (retrying while another process holds it); returns PL_OK. */
static int set_wal(store *s, pl_err *e) {
    for (int tries = 0; tries < WAL_TRIES; tries++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(st);
        int ok = rc == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
        sqlite3_finalize(st);
        if (ok) return PL_OK;
        if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED && rc != SQLITE_ROW) return not_a_db(s, e, rc);
        usleep(WAL_RETRY_US);
    }
    return store_sqlerr(s, e, PL_EIO, "cannot switch to WAL mode");
}

/* Returns a malloc'd copy of the folder part of path ("." when there is none), or NULL. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* Refuses, before SQLite touches anything, a write open that cannot work: a database file this
 * user may not write (permissions, read-only file system) or a folder where SQLite cannot create
 * the PATH-wal and PATH-shm files a WAL-mode writer needs. Returns PL_OK or PL_EINPUT saying
 * which and what to do. */
static int check_writable(const char *path, pl_err *e) {
    if (access(path, F_OK) == 0 && access(path, W_OK) != 0)
        return pl_errf(e, PL_EINPUT,
                       "%s: the database is read-only (%s): pipelab cannot store runs in it; make it "
                       "writable or choose another --db (commands that only read it still work)",
                       path, strerror(errno));
    char *dir = dir_of(path);
    if (!dir) return pl_errf(e, PL_ENOMEM, "out of memory");
    int code = PL_OK;
    if (access(dir, F_OK) == 0 && access(dir, W_OK | X_OK) != 0)
        code = pl_errf(e, PL_EINPUT,
                       "%s: the folder %s is read-only (%s): writing needs the files %s-wal and %s-shm "
                       "beside the database; make the folder writable or choose another --db",
                       path, dir, strerror(errno), path, path);
    free(dir);
    return code;
}

/* The files SQLite keeps beside a WAL-mode database PATH, as suffixes of PATH. */
static const char *const beside_suffixes[] = {"-wal", "-shm"};
#define WAL_SUFFIX (beside_suffixes[0])

/* Returns the malloc'd path of the file suffix names beside path (PATH-wal), or NULL. */
static char *beside_path(const char *path, const char *suffix) {
    size_t n = strlen(path), m = strlen(suffix);
    char *p = malloc(n + m + 1);
    if (!p) return NULL;
    memcpy(p, path, n);
    memcpy(p + n, suffix, m + 1);
    return p;
}

/* Returns 1 when the WAL file beside path is missing or empty, i.e. the database file alone holds
 * every committed run. */
static int wal_empty(const char *path) {
    char *wal = beside_path(path, WAL_SUFFIX);
    if (!wal) return 0;
    struct stat st;
    int empty = stat(wal, &st) != 0 || st.st_size == 0;
    free(wal);
    return empty;
}

/* Returns 1 when a and b are one existing file (same device and inode), else 0. */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* store.h. Returns PL_OK, or PL_EINPUT naming the output and the database file it is. */
int store_check_output(const char *db_path, const char *what, const char *path, pl_err *e) {
    if (!path) return PL_OK;
    if (!db_path || !*db_path) db_path = STORE_DEFAULT_PATH;
    if (same_file(db_path, path))
        return pl_errf(e, PL_EINPUT, "%s %s and --db %s are the same file: writing there would destroy the "
                       "database; choose another output", what, path, db_path);
    int code = PL_OK;
    for (size_t i = 0; i < sizeof beside_suffixes / sizeof beside_suffixes[0] && code == PL_OK; i++) {
        char *beside = beside_path(db_path, beside_suffixes[i]);
        if (!beside) return pl_errf(e, PL_ENOMEM, "out of memory");
        if (same_file(beside, path))
            code = pl_errf(e, PL_EINPUT, "%s %s is %s, part of the database --db %s: writing there would destroy "
                           "runs it holds; choose another output", what, path, beside, db_path);
        free(beside);
    }
    return code;
}

/* Opens path read-only as an immutable file (no -shm needed, no locks): the way to read a WAL-mode
 * database in a folder this user cannot write, valid only while the WAL is empty. Returns the
 * sqlite code. */
static int open_immutable(store *s) {
    pl_buf uri;
    pl_buf_init(&uri);
    pl_buf_puts(&uri, "file:");
    for (const unsigned char *c = (const unsigned char *)s->path; *c; c++) {
        if (*c == '?' || *c == '#' || *c == '%' || *c <= ' ' || *c >= 0x7f) pl_buf_printf(&uri, "%%%02X", *c);
        else pl_buf_printf(&uri, "%c", *c);
    }
    pl_buf_puts(&uri, "?immutable=1");
    if (uri.failed) {
        pl_buf_free(&uri);
        return SQLITE_NOMEM;
    }
    sqlite3_close_v2(s->db);
    s->db = NULL;
    int rc = sqlite3_open_v2(uri.data, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    pl_buf_free(&uri);
    if (rc == SQLITE_OK) set_connection_defaults(s);
    return rc;
}

/* Checks the structure of the whole file (PRAGMA quick_check: every b-tree page, no index
 * comparison) before a write open changes anything, so a corrupt file is refused untouched
 * instead of having runs appended to it. Returns PL_OK or PL_EINPUT quoting SQLite's first
 * complaint. */
static int check_structure(store *s, pl_err *e) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int code = PL_OK;
    if (rc == SQLITE_ROW) {
        const char *msg = (const char *)sqlite3_column_text(st, 0);
        if (!msg || strcmp(msg, "ok") != 0)
            code = pl_errf(e, PL_EINPUT,
                           "%s: the database is corrupt (%s); it was left as it is: recover what it "
                           "holds with 'sqlite3 %s .recover' or choose another --db",
                           s->path, msg ? msg : "?", s->path);
    } else if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) {
        code = pl_errf(e, PL_EINPUT, "%s: the database is corrupt (%s); it was left as it is", s->path,
                       sqlite3_errmsg(s->db));
    } else {
        code = store_sqlerr(s, e, PL_EIO, "cannot check the database");
    }
    sqlite3_finalize(st);
    return code;
}

/* Allocates a store for path with its host name; returns PL_OK or PL_ENOMEM. */
static int store_alloc(const char *path, int readonly, store **out, pl_err *e) {
    store *s = pl_calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    s->readonly = readonly;
    if (gethostname(s->host, sizeof s->host - 1) != 0 || !s->host[0]) strcpy(s->host, "unknown");
    *out = s;
    return PL_OK;
}

/* Checks path before SQLite sees it: a reader needs the file, a writer its folders (made here)
 * and write access. Returns PL_OK or the error naming the path. */
static int check_path(const char *path, int readonly, pl_err *e) {
    struct stat st;
    if (readonly && stat(path, &st) != 0)
        return pl_errf(e, PL_EINPUT, "%s: no such database: %s", path, strerror(errno));
    /* a folder, a device (/dev/null), a pipe: SQLite would fail on it, leaving PATH-journal beside */
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return pl_errf(e, PL_EINPUT, "%s: is %s, not a database file", path,
                       S_ISDIR(st.st_mode) ? "a folder" : "a device, pipe or socket");
    if (readonly) return PL_OK;
    int code = make_parents(path, e);
    return code != PL_OK ? code : check_writable(path, e);
}

/* Returns the flags a connection to s's file opens with: a writer's may create it; a reader's
 * are read-write where this user may write the file, made read-only by PRAGMA query_only
 * (open_connection). A connection SQLite opened read-only cannot checkpoint a WAL-mode file, so
 * when it is the last to close one it leaves the PATH-wal and PATH-shm that reading made beside
 * it; a read-write one, the last, checkpoints (nothing, unless another process left changes in
 * PATH-wal: they are folded in) and removes them, leaving the file as it found it. A reader that
 * may not write the file opens it read-only (read_version then reads it as immutable). */
static int open_flags(const store *s) {
    if (!s->readonly) return SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    return access(s->path, W_OK) == 0 ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
}

/* Opens the connection (a writer creating the file, a reader unable to change it), and refuses
 * a writer a file SQLite opened read-only. Returns PL_OK or an error naming the path. */
static int open_connection(store *s, pl_err *e) {
    if (sqlite3_open_v2(s->path, &s->db, open_flags(s) | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return pl_errf(e, s->db ? PL_EIO : PL_ENOMEM, "%s: cannot open: %s", s->path,
                       s->db ? sqlite3_errmsg(s->db) : "out of memory");
    set_connection_defaults(s);
    if (s->readonly && store_exec(s, "PRAGMA query_only=1") != SQLITE_OK)
        return store_sqlerr(s, e, PL_EIO, "cannot open read-only");
    if (!s->readonly && sqlite3_db_readonly(s->db, "main") == 1)
        return pl_errf(e, PL_EINPUT, "%s: the database is read-only: pipelab cannot store runs in it; make it "
                       "writable or choose another --db", s->path);
    return PL_OK;
}

/* Reads the schema version and the number of schema objects, a reader of a file it cannot
 * write reading it as immutable where that is exact (its WAL empty). Returns PL_OK or an error
 * naming the path. */
static int read_version(store *s, int64_t *v, int64_t *nobjects, pl_err *e) {
    int rc;
    /* Reading a file this user cannot write: when its WAL is empty, read it as immutable, so that
     * no PATH-wal / PATH-shm owned by this user is left beside someone else's database. */
    if (s->readonly && access(s->path, W_OK) != 0 && wal_empty(s->path) && (rc = open_immutable(s)) != SQLITE_OK)
        return pl_errf(e, PL_EIO, "%s: cannot open: %s", s->path, sqlite3_errmsg(s->db));
    rc = read_header(s, v, nobjects);
    if (s->readonly && (rc == SQLITE_CANTOPEN || rc == SQLITE_READONLY)) {
        /* A WAL-mode file in a folder this user cannot write: SQLite cannot create PATH-shm. When
         * the WAL is empty the file alone is the database, and reading it as immutable is exact. */
        if (!wal_empty(s->path))
            return pl_errf(e, PL_EINPUT,
                           "%s: cannot read: %s-wal holds changes not yet in the database and the folder is "
                           "read-only, so SQLite cannot open it; open it once where the folder is writable "
                           "(any pipelab db command) to fold them in", s->path, s->path);
        if ((rc = open_immutable(s)) == SQLITE_OK) rc = read_header(s, v, nobjects);
    }
    return rc == SQLITE_OK ? PL_OK : not_a_db(s, e, rc);
}

/* A reader takes the file as it is: it must hold a schema (check_version checked its tables).
 * Returns PL_OK or PL_EINPUT. */
static int finish_reader(store *s, int64_t v, pl_err *e) {
    if (v == 0) return pl_errf(e, PL_EINPUT, "%s: not a pipelab database (no runs table)", s->path);
    s->version = (int)v;
    return PL_OK;
}

/* A writer checks an existing file's structure, brings its schema to this version and switches
 * it to WAL mode, in that order: a migration that fails rolls back and leaves the file as it
 * was, journal mode included. Returns PL_OK or an error. */
static int finish_writer(store *s, int64_t v, pl_err *e) {
    int code;
    if (v > 0 && (code = check_structure(s, e)) != PL_OK) return code;
    if (v != STORE_SCHEMA_VERSION && (code = upgrade(s, e)) != PL_OK) return code;
    if ((code = set_wal(s, e)) != PL_OK) return code;
    s->version = STORE_SCHEMA_VERSION;
    store_exec(s, "PRAGMA synchronous=NORMAL");
    store_exec(s, "PRAGMA foreign_keys=ON");
    return PL_OK;
}

/* Opens the database at path for reading or writing, as a list of steps (see store.h for
 * what each refuses); returns PL_OK and *out, or the first step's error. */
int store_open(const char *path, int readonly, store **out, pl_err *e) {
    *out = NULL;
    if (!path || !*path) path = STORE_DEFAULT_PATH;
    store *s = NULL;
    int code = store_alloc(path, readonly, &s, e);
    if (code != PL_OK) return code;
    int64_t v = 0, nobjects = 0;
    if ((code = check_path(path, readonly, e)) == PL_OK && (code = open_connection(s, e)) == PL_OK &&
        (code = read_version(s, &v, &nobjects, e)) == PL_OK && (code = check_version(s, v, nobjects, e)) == PL_OK)
        code = readonly ? finish_reader(s, v, e) : finish_writer(s, v, e);
    if (code == PL_OK) code = build_statements(s, e);
    if (code != PL_OK) {
        store_close(s);
        return code;
    }
    *out = s;
    return PL_OK;
}

/* Finalizes the statements, closes the connection and frees s (NULL is fine). */
void store_close(store *s) {
    if (!s) return;
    sqlite3_finalize(s->ins_run);
    sqlite3_finalize(s->ins_rank);
    sqlite3_finalize(s->ins_op);
    sqlite3_finalize(s->has_uid);
    if (s->db) sqlite3_close_v2(s->db);
    free(s->select_cols);
    free(s->insert_sql);
    free(s->path);
    free(s);
}

/* Returns the path s was opened with. */
const char *store_path(const store *s) { return s->path; }
/* Returns the schema version of the open file. */
int store_schema_version(const store *s) { return s->version; }

/* Fills buf with a fresh uuid-like (version 4 layout) id from /dev/urandom; the clock, pid and a
 * counter are mixed in so ids stay distinct even without /dev/urandom. */
void store_new_uid(char *buf, size_t n) {
    unsigned char r[16];
    memset(r, 0, sizeof r);
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = read(fd, r, sizeof r);
        (void)got;
        close(fd);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mix = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12) ^ ++uid_counter;
    for (int i = 0; i < 8; i++) r[8 + i] ^= (unsigned char)(mix >> (8 * i));
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    snprintf(buf, n, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
             r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
}

/* Returns the string at field offset off of run, or NULL. */
static const char *run_str(const store_run *run, size_t off) {
    return *(const char *const *)((const char *)run + off);
}

/* The text a run stored without a uid or time gets: filled by fill_defaults, alive as long as
 * the run that points into it. */
typedef struct run_texts {
    char uid[64];
    char utc[32];
} run_texts;

/* Fills in r the defaults store.h promises for what the caller left empty (uid, time, host,
 * origin, version, git revision, one repetition); new texts live in t. */
static void fill_defaults(const store *s, store_run *r, run_texts *t) {
    if (!r->uid || !*r->uid) {
        store_new_uid(t->uid, sizeof t->uid);
        r->uid = t->uid;
    }
    if (!r->utc_time || !*r->utc_time) {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(t->utc, sizeof t->utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
        r->utc_time = t->utc;
    }
    if (!r->host || !*r->host) r->host = s->host;
    if (!r->origin || !*r->origin) r->origin = r->host;
    if (!r->version || !*r->version) r->version = PL_VERSION;
    if (!r->git_rev || !*r->git_rev) r->git_rev = PIPELAB_GIT_REV;
    if (r->repetitions <= 0) r->repetitions = 1;
}

/* Writes the runs row of r, every column of store_cols bound by its type; returns PL_OK and
 * *id, PL_EINPUT when its uid is already stored, or PL_EIO. */
static int insert_run_row(store *s, const store_run *r, int64_t *id, pl_err *e) {
    int code = store_prepare(s, &s->ins_run, s->insert_sql, e);
    if (code != PL_OK) return code;
    for (size_t i = 0; i < store_ncols; i++) {
        const char *p = (const char *)r + store_cols[i].off;
        int col = (int)i + 1;
        switch (store_cols[i].type) {
        case SC_TEXT: {
            const char *t = run_str(r, store_cols[i].off);
            sqlite3_bind_text(s->ins_run, col, t ? t : "", -1, SQLITE_STATIC);
            break;
        }
        case SC_INT: sqlite3_bind_int(s->ins_run, col, *(const int *)p); break;
        case SC_I64: sqlite3_bind_int64(s->ins_run, col, *(const int64_t *)p); break;
        case SC_U64: sqlite3_bind_int64(s->ins_run, col, (sqlite3_int64) * (const uint64_t *)p); break;
        case SC_REAL: sqlite3_bind_double(s->ins_run, col, *(const double *)p); break;
        }
    }
    int rc = sqlite3_step(s->ins_run);
    sqlite3_reset(s->ins_run);
    if (rc == SQLITE_CONSTRAINT) return pl_errf(e, PL_EINPUT, "%s: run %s is already stored", s->path, r->uid);
    if (rc != SQLITE_DONE) return store_sqlerr(s, e, PL_EIO, "cannot write a run");
    *id = sqlite3_last_insert_rowid(s->db);
    return PL_OK;
}

/* Writes the rank_metrics rows of run id; returns PL_OK, PL_EINPUT for a rank given twice, or
 * PL_EIO. */
static int insert_ranks(store *s, int64_t id, const store_rank_metric *ranks, int nranks, pl_err *e) {
    int code = store_prepare(s, &s->ins_rank,
                             "INSERT INTO rank_metrics(run_id,rank,busy_s,idle_s,bubble_fraction,comm_s,peak_mem_bytes) "
                             "VALUES(?,?,?,?,?,?,?)", e);
    if (code != PL_OK) return code;
    for (int i = 0; i < nranks; i++) {
        sqlite3_stmt *st = s->ins_rank;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, ranks[i].rank);
        sqlite3_bind_double(st, 3, ranks[i].busy_s);
        sqlite3_bind_double(st, 4, ranks[i].idle_s);
        sqlite3_bind_double(st, 5, ranks[i].bubble_fraction);
        sqlite3_bind_double(st, 6, ranks[i].comm_s);
        sqlite3_bind_int64(st, 7, ranks[i].peak_mem_bytes);
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc == SQLITE_CONSTRAINT) return pl_errf(e, PL_EINPUT, "rank %d appears twice in the rank metrics", ranks[i].rank);
        if (rc != SQLITE_DONE) return store_sqlerr(s, e, PL_EIO, "cannot write rank metrics");
    }
    return PL_OK;
}

/* Writes the ops rows of run id (none prepares nothing); returns PL_OK or PL_EIO. */
static int insert_ops(store *s, int64_t id, const store_op *ops, size_t nops, pl_err *e) {
    if (nops == 0) return PL_OK;
    int code = store_prepare(s, &s->ins_op,
                             "INSERT INTO ops(run_id,rank,seq,action,kind,stage,mb,start_s,end_s) "
                             "VALUES(?,?,?,?,?,?,?,?,?)", e);
    if (code != PL_OK) return code;
    for (size_t i = 0; i < nops; i++) {
        sqlite3_stmt *st = s->ins_op;
        const store_op *o = &ops[i];
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int(st, 2, o->rank);
        sqlite3_bind_int(st, 3, o->seq);
        sqlite3_bind_text(st, 4, o->action ? o->action : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, o->kind ? o->kind : "", -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 6, o->stage);
        sqlite3_bind_int(st, 7, o->mb);
        sqlite3_bind_double(st, 8, o->start_s);
        sqlite3_bind_double(st, 9, o->end_s);
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) return store_sqlerr(s, e, PL_EIO, "cannot write ops");
    }
    return PL_OK;
}

/* Inserts one run, its defaults filled in, with its rank and op rows inside the caller's
 * transaction; returns PL_OK and *run_id, or the first error. */
int store_insert_run(store *s, const store_run *in, const store_rank_metric *ranks, int nranks,
                     const store_op *ops, size_t nops, int64_t *run_id, pl_err *e) {
    if (!in->kind || (strcmp(in->kind, "simulated") != 0 && strcmp(in->kind, "measured") != 0))
        return pl_errf(e, PL_EINPUT, "run kind must be 'simulated' or 'measured' (got '%s')", in->kind ? in->kind : "");
    if (nranks < 0 || (nranks > 0 && !ranks) || (nops > 0 && !ops))
        return pl_errf(e, PL_EINTERNAL, "store_write_run: bad rank or op arrays");
    store_run r = *in;
    run_texts texts;
    fill_defaults(s, &r, &texts);
    int64_t id = 0;
    int code = insert_run_row(s, &r, &id, e);
    if (code == PL_OK) code = insert_ranks(s, id, ranks, nranks, e);
    if (code == PL_OK) code = insert_ops(s, id, ops, nops, e);
    if (code == PL_OK && run_id) *run_id = id;
    return code;
}

/* Returns 1 while s has a transaction open (a batch: store_begin), else 0. */
static int in_batch(store *s) { return s->db && !sqlite3_get_autocommit(s->db); }

/* Writes one run inside the open batch under a savepoint, undone on any error, so that the batch
 * never holds half a run; returns PL_OK or the error. */
static int write_in_batch(store *s, const store_run *run, const store_rank_metric *ranks, int nranks,
                          const store_op *ops, size_t nops, int64_t *run_id, pl_err *e) {
    if (store_exec(s, "SAVEPOINT store_write_run") != SQLITE_OK) return store_sqlerr(s, e, PL_EIO, "cannot write a run");
    int code = store_insert_run(s, run, ranks, nranks, ops, nops, run_id, e);
    if (code != PL_OK) store_exec(s, "ROLLBACK TO store_write_run");
    /* an error SQLite answered by rolling the whole transaction back leaves no savepoint: the
     * release then fails, and store_commit says that the batch is gone */
    if (store_exec(s, "RELEASE store_write_run") != SQLITE_OK && code == PL_OK)
        code = store_sqlerr(s, e, PL_EIO, "cannot write a run");
    return code;
}

/* Writes one run in one IMMEDIATE transaction, rolled back on any error, so that a crash never
 * leaves half a run; inside a batch (store_begin), as part of it. Returns PL_OK or the error. */
int store_write_run(store *s, const store_run *run, const store_rank_metric *ranks, int nranks,
                    const store_op *ops, size_t nops, int64_t *run_id, pl_err *e) {
    if (s->readonly) return pl_errf(e, PL_EINTERNAL, "%s: opened read-only", s->path);
    if (in_batch(s)) return write_in_batch(s, run, ranks, nranks, ops, nops, run_id, e);
    if (store_exec(s, "BEGIN IMMEDIATE") != SQLITE_OK) return store_sqlerr(s, e, PL_EIO, "cannot lock the database");
    int code = store_insert_run(s, run, ranks, nranks, ops, nops, run_id, e);
    if (code == PL_OK && store_exec(s, "COMMIT") != SQLITE_OK)
        code = store_sqlerr(s, e, PL_EIO, "cannot commit a run");
    if (code != PL_OK) store_exec(s, "ROLLBACK");
    return code;
}

/* store.h. Opens a batch: one IMMEDIATE transaction that the writes until store_commit join.
 * Returns PL_OK, PL_EINTERNAL for a read-only store or one with a batch open, or PL_EIO. */
int store_begin(store *s, pl_err *e) {
    if (s->readonly) return pl_errf(e, PL_EINTERNAL, "%s: opened read-only", s->path);
    if (in_batch(s)) return pl_errf(e, PL_EINTERNAL, "%s: a batch of runs is already open", s->path);
    if (store_exec(s, "BEGIN IMMEDIATE") != SQLITE_OK) return store_sqlerr(s, e, PL_EIO, "cannot lock the database");
    return PL_OK;
}

/* store.h. Commits the open batch: every run written since store_begin, or none (rolled back
 * when the commit fails). Returns PL_OK, PL_EINTERNAL when no batch is open, or PL_EIO. */
int store_commit(store *s, pl_err *e) {
    if (!in_batch(s)) return pl_errf(e, PL_EINTERNAL, "%s: no batch of runs is open (nothing was stored)", s->path);
    if (store_exec(s, "COMMIT") == SQLITE_OK) return PL_OK;
    int code = store_sqlerr(s, e, PL_EIO, "cannot commit the runs");
    store_exec(s, "ROLLBACK");
    return code;
}

/* store.h. Drops the open batch, if any: none of its runs is stored. */
void store_rollback(store *s) {
    if (s && in_batch(s)) store_exec(s, "ROLLBACK");
}
