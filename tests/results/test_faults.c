/* test_faults.c: databases that cannot be written (read-only file or folder), corrupt files and
 * files from a future schema: each gets a clear error and is left byte for byte as it was. */
#include <grp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pl_test.h"
#include "util.h"

/* The user a root test drops to, so that permission bits apply (root writes through them). */
enum { NOBODY_UID = 65534, NOBODY_GID = 65534 };

/* Returns a 64-bit FNV-1a hash of the bytes of path mixed with its size, or 0 when unreadable. */
static uint64_t file_hash(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint64_t h = 1469598103934665603ull, n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        h = (h ^ (uint64_t)(unsigned char)c) * 1099511628211ull;
        n++;
    }
    fclose(f);
    return h ^ (n * 0x9e3779b97f4a7c15ull);
}

/* Returns 1 when path-wal or path-shm exists. */
static int has_sidecar(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s-wal", path);
    if (pl_test_exists(buf)) return 1;
    snprintf(buf, sizeof buf, "%s-shm", path);
    return pl_test_exists(buf);
}

/* Runs `pipelab ARGS` (args formatted with one %s, the database path); returns the exit status
 * and the output in *out. */
static const char *g_bin = PIPELAB_BIN;

static int pipelab_db(char **out, const char *fmt, const char *db) {
    char args[1024], cmd[1536];
    snprintf(args, sizeof args, fmt, db);
    snprintf(cmd, sizeof cmd, "%s %s", g_bin, args);
    return pl_test_run(cmd, out);
}

/* Checks one refusal: rc is PL_EINPUT and the message names path and contains `what`. Returns
 * the number of failed checks (for use in a child process, where CUnit asserts do not count). */
static int refused(int rc, const pl_err *e, const char *path, const char *what) {
    int bad = 0;
    if (rc != PL_EINPUT) {
        fprintf(stderr, "expected a refusal of %s (code %d): %s\n", path, rc, rc ? e->msg : "it opened");
        bad++;
    } else if (!strstr(e->msg, path) || !strstr(e->msg, what)) {
        fprintf(stderr, "unclear message for %s (wanted '%s'): %s\n", path, what, e->msg);
        bad++;
    }
    return bad;
}

/* Copies the pipelab program to dst (mode 0755): the build tree may sit below a folder the
 * unprivileged user cannot enter (a private temporary clone), the test folder does not. */
static int copy_program(const char *dst) {
    FILE *in = fopen(PIPELAB_BIN, "rb"), *out = fopen(dst, "wb");
    int ok = in && out;
    char buf[1 << 16];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = 0;
    return ok && chmod(dst, 0755) == 0 ? 0 : -1;
}

/* What an unprivileged user sees of a read-only database: a file without write permission in a
 * writable folder (ro_file), and a writable file in a read-only folder (ro_dir; writing a
 * WAL-mode database needs PATH-wal and PATH-shm beside it). Writing is refused with a message
 * that says read-only; reading works (db list); nothing changes. Returns the failed checks. */
static int readonly_checks(const char *ro_file, const char *ro_dir_db, int nruns) {
    int bad = 0;
    const char *paths[2] = {ro_file, ro_dir_db};
    const char *what[2] = {"the database is read-only", "is read-only"};
    for (int k = 0; k < 2; k++) {
        const char *p = paths[k];
        uint64_t h0 = file_hash(p);
        pl_err e;
        pl_err_clear(&e);
        store *s = NULL;
        int rc = store_open(p, 0, &s, &e);
        bad += refused(rc, &e, p, what[k]);
        store_close(s);
        s = NULL;
        /* Reading works: the runs are all there. */
        rc = store_open(p, 1, &s, &e);
        if (rc != PL_OK) {
            fprintf(stderr, "read-only open of %s failed: %s\n", p, e.msg);
            bad++;
        } else {
            store_run *runs = NULL;
            size_t n = 0;
            if (store_list_runs(s, NULL, 0, &runs, &n, &e) != PL_OK || n != (size_t)nruns) {
                fprintf(stderr, "%s: listed %zu runs of %d: %s\n", p, n, nruns, e.msg);
                bad++;
            }
            store_runs_free(runs, n);
            store_close(s);
        }
        /* The command line: simulate refuses before simulating (exit 1, the message); db list reads. */
        char *o = NULL;
        rc = pipelab_db(&o, "simulate --kind 1f1b --ranks 2 --microbatches 4 --db %s", p);
        if (rc != 1 || !o || !strstr(o, "pipelab: ") || !strstr(o, what[k]) || strstr(o, "makespan")) {
            fprintf(stderr, "pipelab simulate --db %s: exit %d, output:\n%s\n", p, rc, o ? o : "");
            bad++;
        }
        free(o);
        rc = pipelab_db(&o, "db list --db %s --format csv", p);
        if (rc != 0 || !o || !strstr(o, "faults")) {
            fprintf(stderr, "pipelab db list --db %s: exit %d, output:\n%s\n", p, rc, o ? o : "");
            bad++;
        }
        free(o);
        if (file_hash(p) != h0) {
            fprintf(stderr, "%s changed\n", p);
            bad++;
        }
        if (has_sidecar(p)) {
            fprintf(stderr, "%s-wal or -shm was created\n", p);
            bad++;
        }
    }
    return bad;
}

static void test_readonly(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(chmod(dir, 0755) == 0); /* let the unprivileged user in */
    char *fdir = pl_test_path(dir, "rofile"), *ddir = pl_test_path(dir, "rodir");
    CU_ASSERT_FATAL(mkdir(fdir, 0777) == 0 && chmod(fdir, 0777) == 0 && mkdir(ddir, 0755) == 0);
    char *ro_file = pl_test_path(fdir, "a.db"), *ro_dir_db = pl_test_path(ddir, "b.db");
    CU_ASSERT_EQUAL_FATAL(tr_fill(ro_file, "faults", 7, NULL, 10), 7);
    CU_ASSERT_EQUAL_FATAL(tr_fill(ro_dir_db, "faults", 7, NULL, 10), 7);
    CU_ASSERT_FATAL(chmod(ro_file, 0444) == 0 && chmod(ro_dir_db, 0666) == 0 && chmod(ddir, 0555) == 0);
    CU_ASSERT_FALSE(has_sidecar(ro_file) || has_sidecar(ro_dir_db));
    char *bin = pl_test_path(dir, "pipelab");
    CU_ASSERT_EQUAL_FATAL(copy_program(bin), 0);
    g_bin = bin;
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(NOBODY_GID) != 0 || setuid(NOBODY_UID) != 0))
            _exit(77);
        if (access(ro_file, W_OK) == 0) _exit(78); /* permissions do not apply (e.g. CAP_DAC_OVERRIDE) */
        int bad = readonly_checks(ro_file, ro_dir_db, 7);
        _exit(bad > 60 ? 60 : bad);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    g_bin = PIPELAB_BIN;
    free(bin);
    if (code == 77 || code == 78)
        pl_test_skip("its read-only part: no user here whom permissions apply to (the owner's part ran)");
    else
        CU_ASSERT_EQUAL(code, 0);
    CU_ASSERT(chmod(ddir, 0755) == 0);
    /* As the owner (or root), the same files are intact and whole. */
    CU_ASSERT(tr_integrity_ok(ro_file) && tr_integrity_ok(ro_dir_db));
    CU_ASSERT_EQUAL(tr_partial_runs(ro_file, 10), 0);
    CU_ASSERT_EQUAL(tr_sql_int(ro_dir_db, "SELECT count(*) FROM runs"), 7);
    pl_test_rmdir(dir);
    free(ro_file);
    free(ro_dir_db);
    free(fdir);
    free(ddir);
    free(dir);
}

/* Copies src to dst; returns 0 on success. */
static int copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    int rc = in && out ? 0 : -1;
    char buf[65536];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = -1;
    return rc;
}

/* Overwrites len bytes of path at offset off with a pattern; returns 0 on success. */
static int scribble(const char *path, long off, size_t len, unsigned char pattern) {
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    int rc = fseek(f, off, SEEK_SET);
    for (size_t i = 0; rc == 0 && i < len; i++)
        if (putc((int)(unsigned char)(pattern + 7 * i), f) == EOF) rc = -1;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

/* A pipelab database damaged in four ways: its header, an interior page of the runs table, the
 * first page of the ops table, and cut short. A write open refuses each one (the message names
 * the file and says corrupt or not a pipelab database), the command line exits 1 without
 * simulating, and the file is byte for byte what it was. */
static void test_corrupt(void) {
    char *dir = pl_test_tmpdir();
    char *good = pl_test_path(dir, "good.db");
    CU_ASSERT_EQUAL_FATAL(tr_fill(good, "faults", 60, NULL, 300), 60);
    long size = 0;
    {
        struct stat st;
        CU_ASSERT_FATAL(stat(good, &st) == 0);
        size = (long)st.st_size;
    }
    int64_t page = tr_sql_int(good, "PRAGMA page_size");
    int64_t runs_root = tr_sql_int(good, "SELECT rootpage FROM sqlite_master WHERE name = 'runs'");
    int64_t ops_root = tr_sql_int(good, "SELECT rootpage FROM sqlite_master WHERE name = 'ops'");
    CU_ASSERT_FATAL(page > 0 && runs_root > 1 && ops_root > 1 && size > 40 * page);
    const char *names[] = {"header.db", "runs-page.db", "ops-page.db", "short.db"};
    for (int k = 0; k < 4; k++) {
        char *p = pl_test_path(dir, names[k]);
        CU_ASSERT_FATAL(copy_file(good, p) == 0);
        int rc = 0;
        switch (k) {
        case 0: rc = scribble(p, 0, 16, 0x41); break;                          /* "SQLite format 3" gone */
        case 1: rc = scribble(p, (long)((runs_root - 1) * page), 12, 0xa5); break; /* b-tree page header */
        case 2: rc = scribble(p, (long)((ops_root - 1) * page), 12, 0x5a); break;
        case 3: rc = truncate(p, size / 2); break;
        }
        CU_ASSERT_FATAL(rc == 0);
        uint64_t h0 = file_hash(p);
        pl_err e;
        pl_err_clear(&e);
        store *s = NULL;
        rc = store_open(p, 0, &s, &e);
        CU_ASSERT_EQUAL(rc, PL_EINPUT);
        CU_ASSERT_PTR_NULL(s);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, p));
        CU_ASSERT(strstr(e.msg, "corrupt") || strstr(e.msg, "not a pipelab database"));
        if (rc != PL_EINPUT) fprintf(stderr, "\n  %s: %s\n", names[k], rc ? e.msg : "opened for writing");
        store_close(s);
        /* Reading either refuses at open or reports the damage when it reaches it; never a crash. */
        s = NULL;
        pl_err_clear(&e);
        if (store_open(p, 1, &s, &e) == PL_OK) {
            store_run *runs = NULL;
            size_t n = 0;
            pl_buf b;
            pl_buf_init(&b);
            int lr = store_list_runs(s, NULL, 0, &runs, &n, &e);
            if (lr == PL_OK) lr = store_export(s, NULL, STORE_JSON, &b, &e);
            if (lr != PL_OK) CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, p));
            pl_buf_free(&b);
            store_runs_free(runs, n);
            store_close(s);
        } else {
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, p));
        }
        char *o = NULL;
        CU_ASSERT_EQUAL(pipelab_db(&o, "simulate --kind gpipe --ranks 2 --microbatches 2 --db %s", p), 1);
        CU_ASSERT(o && strstr(o, "pipelab: ") && strstr(o, p) && !strstr(o, "makespan"));
        free(o);
        /* a real run is refused before it runs, not after: the fault injected at its first action
         * must not be what stops it */
        o = NULL;
        CU_ASSERT_EQUAL(pipelab_db(&o, "run --kind gpipe --ranks 2 --microbatches 2 --no-predict --oversubscribe --inject-fault error:0:1 --db %s", p), 1);
        CU_ASSERT(o && strstr(o, "pipelab: ") && strstr(o, p) && !strstr(o, "injected fault"));
        if (o && !strstr(o, p)) fprintf(stderr, "\n  pipelab run --db %s: %s\n", p, o);
        free(o);
        CU_ASSERT(file_hash(p) == h0);
        free(p);
    }
    CU_ASSERT(tr_integrity_ok(good));
    pl_test_rmdir(dir);
    free(good);
    free(dir);
}

/* A database from a newer pipelab (user_version 3 with an extra column, in WAL mode like ours):
 * writing, reading, merging from it and merging into it are all refused with the version in the
 * message, and the file is unchanged. */
static void test_future(void) {
    char *dir = pl_test_tmpdir();
    char *fut = pl_test_path(dir, "future.db"), *ok = pl_test_path(dir, "ok.db");
    CU_ASSERT_EQUAL_FATAL(tr_fill(fut, "faults", 3, NULL, 5), 3);
    char sql[128];
    snprintf(sql, sizeof sql, "ALTER TABLE runs ADD COLUMN energy_j REAL; PRAGMA user_version = %d;",
             STORE_SCHEMA_VERSION + 1);
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(fut, sql), SQLITE_OK);
    CU_ASSERT_EQUAL_FATAL(tr_fill(ok, "faults", 2, NULL, 5), 2);
    uint64_t h0 = file_hash(fut), hok = file_hash(ok);
    char ver[16];
    snprintf(ver, sizeof ver, "%d", STORE_SCHEMA_VERSION + 1);
    for (int ro = 0; ro < 2; ro++) {
        pl_err e;
        pl_err_clear(&e);
        store *s = NULL;
        CU_ASSERT_EQUAL(store_open(fut, ro, &s, &e), PL_EINPUT);
        CU_ASSERT(strstr(e.msg, fut) && strstr(e.msg, "newer") && strstr(e.msg, ver));
        store_close(s);
    }
    char *o = NULL;
    CU_ASSERT_EQUAL(pipelab_db(&o, "simulate --kind gpipe --ranks 2 --microbatches 2 --db %s", fut), 1);
    CU_ASSERT(o && strstr(o, "newer") && !strstr(o, "makespan"));
    free(o);
    CU_ASSERT_EQUAL(pipelab_db(&o, "db list --db %s", fut), 1);
    CU_ASSERT(o && strstr(o, "newer"));
    free(o);
    /* Merging it into a good database: refused, the good one keeps its 2 runs. */
    char args[1024];
    snprintf(args, sizeof args, "db merge %s -o %s", fut, ok);
    CU_ASSERT_EQUAL(pipelab_db(&o, "%s", args), 1);
    CU_ASSERT(o && strstr(o, "newer"));
    free(o);
    CU_ASSERT_EQUAL(tr_sql_int(ok, "SELECT count(*) FROM runs"), 2);
    /* Merging a good database into it: refused too. */
    snprintf(args, sizeof args, "db merge %s -o %s", ok, fut);
    CU_ASSERT_EQUAL(pipelab_db(&o, "%s", args), 1);
    CU_ASSERT(o && strstr(o, "newer"));
    free(o);
    CU_ASSERT(file_hash(fut) == h0);
    CU_ASSERT(file_hash(ok) == hok);
    CU_ASSERT_EQUAL(tr_sql_int(fut, "PRAGMA user_version"), STORE_SCHEMA_VERSION + 1);
    pl_test_rmdir(dir);
    free(fut);
    free(ok);
    free(dir);
}

void test_faults_register(void) {
    static const pl_test_case cases[] = {
        {"read-only file and read-only folder: writes refused clearly, reads work, nothing changes", test_readonly},
        {"corrupt files (header, pages, truncated) refused and left unchanged", test_corrupt},
        {"future schema refused for write, read and merge, file unchanged", test_future},
        {NULL, NULL},
    };
    pl_test_suite("faults", cases);
}
