/* test_write.c: what pipelab's writers do to the file they are pointed at (pl_write_file): a
 * symbolic link is written through and stays a link, a FIFO or a device is written in place and
 * stays what it is, a regular file is replaced whole by a renamed copy; and commands that only
 * read a database leave no PATH-wal / PATH-shm beside it and its bytes as they were. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pl_test.h"
#include "store.h"
#include "util.h"

/* The text the writers under test write. */
static const char new_text[] = "new content\n";

/* Returns 1 when the file at dir/name holds exactly want. */
static int holds(const char *dir, const char *name, const char *want) {
    char *p = pl_test_path(dir, name);
    size_t n = 0;
    char *got = tr_slurp(p, &n);
    int ok = got && n == strlen(want) && memcmp(got, want, n) == 0;
    if (!ok) fprintf(stderr, "\n  %s holds \"%s\", not \"%s\"\n", p, got ? got : "(unreadable)", want);
    free(got);
    free(p);
    return ok;
}

/* Writes text to the file at dir/name; returns 0 or -1. */
static int put(const char *dir, const char *name, const char *text) {
    char *p = pl_test_path(dir, name);
    FILE *f = fopen(p, "w");
    int ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    free(p);
    return ok ? 0 : -1;
}

/* Calls pl_write_file(dir/name, new_text); returns its code (its message on stderr). */
static int write_new(const char *dir, const char *name) {
    char *p = pl_test_path(dir, name);
    pl_err e;
    pl_err_clear(&e);
    int code = pl_write_file(p, new_text, strlen(new_text), &e);
    if (code != PL_OK) fprintf(stderr, "\n  %s\n", e.msg);
    free(p);
    return code;
}

/* Returns 1 when dir/name is a symbolic link whose text is target. */
static int is_link_to(const char *dir, const char *name, const char *target) {
    char *p = pl_test_path(dir, name), buf[4096];
    ssize_t n = readlink(p, buf, sizeof buf - 1);
    free(p);
    if (n < 0) return 0;
    buf[n] = '\0';
    return strcmp(buf, target) == 0;
}

/* Returns the lstat mode of dir/name (0 when it does not exist) and its device in *rdev. */
static mode_t mode_of(const char *dir, const char *name, dev_t *rdev) {
    char *p = pl_test_path(dir, name);
    struct stat st;
    int ok = lstat(p, &st) == 0;
    free(p);
    if (rdev) *rdev = ok ? st.st_rdev : 0;
    return ok ? st.st_mode : 0;
}

/* Returns the number of entries of dir (without . and ..), or -1. */
static int entries(const char *dir) {
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    int rc = pl_test_run(cmd, &out);
    int n = rc == 0 && out ? atoi(out) : -1;
    free(out);
    return n;
}

/* A link, relative or absolute, in the same folder or another, is written through: its target
 * gets the content and the link stays a link to it; nothing else is left in the folders. */
static void test_write_through_link(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *sub = pl_test_path(dir, "sub"), *abs = pl_test_path(dir, "abs-target");
    CU_ASSERT_FATAL(mkdir(sub, 0755) == 0);
    CU_ASSERT_FATAL(put(dir, "target", "old\n") == 0 && put(dir, "abs-target", "old\n") == 0);
    char *lnk = pl_test_path(dir, "lnk"), *up = pl_test_path(sub, "up"), *al = pl_test_path(dir, "alnk");
    char *chain = pl_test_path(dir, "chain");
    CU_ASSERT_FATAL(symlink("target", lnk) == 0 && symlink("../target", up) == 0 && symlink(abs, al) == 0);
    CU_ASSERT_FATAL(symlink("lnk", chain) == 0);
    CU_ASSERT(write_new(dir, "lnk") == PL_OK);
    CU_ASSERT(S_ISLNK(mode_of(dir, "lnk", NULL)) && is_link_to(dir, "lnk", "target"));
    CU_ASSERT(holds(dir, "target", new_text));
    CU_ASSERT(put(dir, "target", "old\n") == 0);
    CU_ASSERT(write_new(sub, "up") == PL_OK);
    CU_ASSERT(is_link_to(sub, "up", "../target") && holds(dir, "target", new_text));
    CU_ASSERT(put(dir, "target", "old\n") == 0);
    CU_ASSERT(write_new(dir, "chain") == PL_OK);
    CU_ASSERT(is_link_to(dir, "chain", "lnk") && is_link_to(dir, "lnk", "target") && holds(dir, "target", new_text));
    CU_ASSERT(write_new(dir, "alnk") == PL_OK);
    CU_ASSERT(is_link_to(dir, "alnk", abs) && holds(dir, "abs-target", new_text));
    CU_ASSERT(entries(dir) == 6 && entries(sub) == 1); /* sub target abs-target lnk alnk chain; up */
    free(lnk);
    free(up);
    free(al);
    free(chain);
    free(abs);
    free(sub);
    pl_test_rmdir(dir);
    free(dir);
}

/* A dangling link is written through too: the file its target names is created and the link
 * stays; a link loop is refused and changes nothing. */
static void test_write_dangling_link(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *d = pl_test_path(dir, "dang"), *a = pl_test_path(dir, "a"), *b = pl_test_path(dir, "b");
    CU_ASSERT_FATAL(symlink("made", d) == 0 && symlink("b", a) == 0 && symlink("a", b) == 0);
    CU_ASSERT(write_new(dir, "dang") == PL_OK);
    CU_ASSERT(is_link_to(dir, "dang", "made") && S_ISREG(mode_of(dir, "made", NULL)) && holds(dir, "made", new_text));
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT(pl_write_file(a, new_text, strlen(new_text), &e) == PL_EIO);
    CU_ASSERT(strstr(e.msg, "a: ") == e.msg + strlen(dir) + 1);
    CU_ASSERT(is_link_to(dir, "a", "b") && is_link_to(dir, "b", "a"));
    CU_ASSERT(entries(dir) == 4);
    free(d);
    free(a);
    free(b);
    pl_test_rmdir(dir);
    free(dir);
}

/* A regular file is replaced by a renamed copy, as before: another name of the old file (a
 * hard link, as a reader holding it open) keeps the old content whole, the new file has the
 * old one's permission bits, and no temporary file is left. */
static void test_write_regular_atomic(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *f = pl_test_path(dir, "out.csv"), *h = pl_test_path(dir, "old-name");
    CU_ASSERT_FATAL(put(dir, "out.csv", "old\n") == 0 && chmod(f, 0640) == 0 && link(f, h) == 0);
    struct stat before, after;
    CU_ASSERT_FATAL(stat(f, &before) == 0);
    CU_ASSERT(write_new(dir, "out.csv") == PL_OK);
    CU_ASSERT_FATAL(stat(f, &after) == 0);
    CU_ASSERT(after.st_ino != before.st_ino);
    CU_ASSERT((after.st_mode & 0777) == 0640);
    CU_ASSERT(holds(dir, "out.csv", new_text) && holds(dir, "old-name", "old\n"));
    CU_ASSERT(write_new(dir, "fresh.csv") == PL_OK && holds(dir, "fresh.csv", new_text));
    CU_ASSERT(entries(dir) == 3);
    free(f);
    free(h);
    pl_test_rmdir(dir);
    free(dir);
}

/* A FIFO receives the content (read by a child process) and stays a FIFO. */
static void test_write_fifo(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *fifo = pl_test_path(dir, "fifo"), *got = pl_test_path(dir, "got");
    CU_ASSERT_FATAL(mkfifo(fifo, 0644) == 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) { /* the reader: copies what comes through the FIFO into got (gives up after a while) */
        alarm(30);
        int in = open(fifo, O_RDONLY), out = open(got, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char buf[256];
        ssize_t n;
        while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)n) != n) _exit(1);
        _exit(in >= 0 && out >= 0 && close(out) == 0 ? 0 : 1);
    }
    CU_ASSERT(write_new(dir, "fifo") == PL_OK);
    int status = 0;
    CU_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT(S_ISFIFO(mode_of(dir, "fifo", NULL)));
    CU_ASSERT(holds(dir, "got", new_text));
    CU_ASSERT(entries(dir) == 2);
    free(fifo);
    free(got);
    pl_test_rmdir(dir);
    free(dir);
}

/* Character devices made here (the null and full devices, 1:3 and 1:7; mknod needs root): the
 * null device takes the content, the full one refuses it with an error, and both stay the
 * devices they were. */
static void test_write_char_device(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *null = pl_test_path(dir, "mynull"), *full = pl_test_path(dir, "myfull");
    if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) != 0 || mknod(full, S_IFCHR | 0666, makedev(1, 7)) != 0) {
        char why[256];
        snprintf(why, sizeof why, "cannot make a character device: %s", strerror(errno));
        pl_test_skip(why);
    } else {
        dev_t rdev = 0;
        CU_ASSERT(write_new(dir, "mynull") == PL_OK);
        CU_ASSERT(S_ISCHR(mode_of(dir, "mynull", &rdev)) && rdev == makedev(1, 3));
        pl_err e;
        pl_err_clear(&e);
        CU_ASSERT(pl_write_file(full, new_text, strlen(new_text), &e) == PL_EIO);
        CU_ASSERT(strstr(e.msg, strerror(ENOSPC)) != NULL);
        CU_ASSERT(S_ISCHR(mode_of(dir, "myfull", &rdev)) && rdev == makedev(1, 7));
        /* through a link, the device is written and both stay */
        char *l = pl_test_path(dir, "to-null");
        CU_ASSERT(symlink("mynull", l) == 0 && write_new(dir, "to-null") == PL_OK);
        CU_ASSERT(is_link_to(dir, "to-null", "mynull") && S_ISCHR(mode_of(dir, "mynull", NULL)));
        CU_ASSERT(entries(dir) == 3);
        free(l);
    }
    free(null);
    free(full);
    pl_test_rmdir(dir);
    free(dir);
}

/* A writer's output option goes through the same helper: `db export -o LINK` writes the file
 * the link names and leaves the link. */
static void test_export_through_link(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *db = pl_test_path(dir, "r.db"), *l = pl_test_path(dir, "lnk");
    CU_ASSERT_FATAL(tr_fill(db, "w", 1, "w", 0) == 1);
    CU_ASSERT_FATAL(put(dir, "runs.csv", "old\n") == 0 && symlink("runs.csv", l) == 0);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' db export --db '%s' --format csv -o '%s'", PIPELAB_BIN, db, l);
    CU_ASSERT(pl_test_run(cmd, &out) == 0);
    free(out);
    CU_ASSERT(is_link_to(dir, "lnk", "runs.csv") && S_ISREG(mode_of(dir, "runs.csv", NULL)));
    char *csv = pl_test_path(dir, "runs.csv"), *text = tr_slurp(csv, NULL);
    CU_ASSERT(text && strstr(text, "w-0") != NULL);
    free(text);
    free(csv);
    free(db);
    free(l);
    pl_test_rmdir(dir);
    free(dir);
}

/* Copies the file at from to to byte for byte; returns 0 or -1. */
static int copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *data = tr_slurp(from, &n);
    pl_err e;
    int rc = data && pl_write_file(to, data, n, &e) == PL_OK ? 0 : -1;
    free(data);
    return rc;
}

/* Returns 1 when neither path-wal nor path-shm exists. */
static int no_side_files(const char *path) {
    char wal[1024], shm[1024];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    int ok = !pl_test_exists(wal) && !pl_test_exists(shm);
    if (!ok) fprintf(stderr, "\n  %s-wal or -shm left behind\n", path);
    return ok;
}

/* Returns 1 when the bytes of the file at path are data[0..n). */
static int same_bytes(const char *path, const char *data, size_t n) {
    size_t m = 0;
    char *now = tr_slurp(path, &m);
    int ok = now && m == n && memcmp(now, data, n) == 0;
    free(now);
    return ok;
}

/* Commands that only read a WAL-mode database (and a foreign or damaged one they refuse) leave
 * no PATH-wal / PATH-shm beside it and its bytes as they were. */
static void test_read_leaves_no_side_files(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *orig = pl_test_path(dir, "a.db"), *copy = pl_test_path(dir, "copy.db");
    char *foreign = pl_test_path(dir, "foreign.db"), *cut = pl_test_path(dir, "cut.db");
    CU_ASSERT_FATAL(tr_fill(orig, "r", 2, "r", 3) == 2);
    CU_ASSERT_FATAL(copy_file(orig, copy) == 0);
    CU_ASSERT_FATAL(tr_raw_sql(foreign, "PRAGMA journal_mode=WAL; CREATE TABLE x(a); INSERT INTO x VALUES(1);") == 0);
    size_t n = 0, fn = 0;
    char *bytes = tr_slurp(copy, &n), *fbytes = NULL;
    CU_ASSERT_FATAL(bytes != NULL && n > 100 && bytes[18] == 2 && bytes[19] == 2); /* a WAL-mode file */
    CU_ASSERT_FATAL((fbytes = tr_slurp(foreign, &fn)) != NULL && fbytes[18] == 2);
    pl_err e;
    CU_ASSERT_FATAL(pl_write_file(cut, bytes, n / 2, &e) == PL_OK);
    static const char *const reads[] = {"db list --db %s", "db show r-0 --db %s", "db export --format csv --db %s",
                                        "compare --db %s", "db merge %s -o %s/merged.db", NULL};
    for (const char *const *r = reads; *r; r++) {
        char args[1024], cmd[2048], *out = NULL;
        snprintf(args, sizeof args, *r, copy, dir);
        snprintf(cmd, sizeof cmd, "'%s' %s", PIPELAB_BIN, args);
        int rc = pl_test_run(cmd, &out);
        if (rc != 0) fprintf(stderr, "\n  %s: exit %d: %s\n", cmd, rc, out);
        CU_ASSERT(rc == 0);
        free(out);
        CU_ASSERT(no_side_files(copy));
        CU_ASSERT(same_bytes(copy, bytes, n));
    }
    const char *const refused[] = {foreign, cut};
    for (size_t k = 0; k < 2; k++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "'%s' db list --db %s", PIPELAB_BIN, refused[k]);
        CU_ASSERT(pl_test_run(cmd, NULL) == 1);
        CU_ASSERT(no_side_files(refused[k]));
    }
    CU_ASSERT(same_bytes(foreign, fbytes, fn));
    free(bytes);
    free(fbytes);
    free(orig);
    free(copy);
    free(foreign);
    free(cut);
    pl_test_rmdir(dir);
    free(dir);
}

/* A reader that opens and closes a database while a writer holds it leaves the writer's
 * PATH-wal / PATH-shm in place, and the writer's runs, before and after, are all there. */
static void test_read_beside_writer(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_FATAL(dir != NULL);
    char *path = pl_test_path(dir, "w.db"), wal[1024];
    snprintf(wal, sizeof wal, "%s-wal", path);
    store *w = NULL, *r = NULL;
    pl_err e;
    CU_ASSERT_FATAL(store_open(path, 0, &w, &e) == PL_OK);
    store_run run;
    store_rank_metric rk[4];
    tr_sample_run(&run, "both", 0);
    tr_sample_ranks(rk, 4, 0);
    CU_ASSERT(store_write_run(w, &run, rk, 4, NULL, 0, NULL, &e) == PL_OK);
    CU_ASSERT_FATAL(store_open(path, 1, &r, &e) == PL_OK);
    store_run *runs = NULL;
    size_t n = 0;
    CU_ASSERT(store_list_runs(r, NULL, 0, &runs, &n, &e) == PL_OK && n == 1);
    store_runs_free(runs, n);
    store_close(r);
    CU_ASSERT(pl_test_exists(wal));
    tr_sample_run(&run, "both", 1);
    CU_ASSERT(store_write_run(w, &run, rk, 4, NULL, 0, NULL, &e) == PL_OK);
    store_close(w);
    CU_ASSERT(no_side_files(path));
    CU_ASSERT(tr_sql_int(path, "SELECT count(*) FROM runs") == 2);
    free(path);
    pl_test_rmdir(dir);
    free(dir);
}

void test_write_register(void) {
    static const pl_test_case cases[] = {
        {"write_through_link", test_write_through_link},
        {"write_dangling_link", test_write_dangling_link},
        {"write_regular_atomic", test_write_regular_atomic},
        {"write_fifo", test_write_fifo},
        {"write_char_device", test_write_char_device},
        {"export_through_link", test_export_through_link},
        {"read_leaves_no_side_files", test_read_leaves_no_side_files},
        {"read_beside_writer", test_read_beside_writer},
        {NULL, NULL},
    };
    pl_test_suite("write", cases);
}
