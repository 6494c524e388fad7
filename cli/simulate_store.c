/* simulate_store.c: the results database of `pipelab simulate` (simulate_int.h): opened before
 * any work, the run written into it, and a file this command created removed again when the run
 * never reached it (bad input, a failed simulation), so that a failed command leaves nothing
 * behind. An existing database is never removed. */
#ifdef PIPELAB_HAVE_PL_RESULTS
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "simulate_int.h"

/* Stores the run (with per-action rows when traced) in db, opened before simulating so that a
 * database that cannot take the run is refused before any work. Returns an exit code. */
static int store_it(store *db, const report *p, int argc, char **argv) {
    const sched *s = p->s;
    pl_err e;
    pl_err_clear(&e);
    pl_buf cmd, pj;
    pl_buf_init(&cmd);
    pl_buf_init(&pj);
    pl_buf_puts(&cmd, "pipelab");
    for (int i = 0; i < argc; i++) pl_buf_printf(&cmd, " %s", argv[i]);
    simulate_params_json(p->o, &pj);
    store_run run;
    store_rank_metric *rm = pl_calloc((size_t)s->ranks, sizeof *rm);
    cli_op_rows ops = {0};
    int rc = CLI_OK;
    if (!rm) { pl_errf(&e, PL_ENOMEM, "out of memory"); rc = cli_fail(&e); goto out; }
    simulate_store_rows(p, cmd.data, pj.data, &run, rm);
    if (p->r->trace && cli_op_rows_trace(&ops, s, p->r->trace, &e) != PL_OK) { rc = cli_fail(&e); goto out; }
    if (store_write_run(db, &run, rm, s->ranks, ops.ops, ops.n, NULL, &e) != PL_OK) rc = cli_fail(&e);
out:
    free(rm);
    cli_op_rows_free(&ops);
    pl_buf_free(&cmd);
    pl_buf_free(&pj);
    return rc;
}

/* Returns the path o's run is stored in (store_open's default without --db). */
static const char *db_path(const opts *o) { return o->db && *o->db ? o->db : STORE_DEFAULT_PATH; }

/* Returns the length of the prefix of path that names its first missing folder (the one
 * store_open would make first), or 0 when every folder of path exists. */
static size_t missing_dirs_from(const char *path) {
    char *p = strdup(path);
    size_t at = 0;
    for (char *s = p ? strchr(p + 1, '/') : NULL; s; s = strchr(s + 1, '/')) {
        *s = 0;
        struct stat st;
        int missing = stat(p, &st) != 0;
        *s = '/';
        if (missing) {
            at = (size_t)(s - p);
            break;
        }
    }
    free(p);
    return at;
}

/* Removes what opening d made at path: the database file, when it is still the one this command
 * created (same device and inode), then the folders made for it, deepest first (rmdir leaves a
 * folder that is not empty). */
static void remove_created(const simulate_db *d, const char *path) {
    char *p = strdup(path);
    if (!p) return;
    struct stat st;
    if (d->created && stat(p, &st) == 0 && (unsigned long long)st.st_dev == d->dev &&
        (unsigned long long)st.st_ino == d->ino && unlink(p) != 0) {
        free(p);
        return;
    }
    for (char *s = strrchr(p, '/'); d->made_from && s && (size_t)(s - p) >= d->made_from; s = strrchr(p, '/')) {
        *s = 0;
        if (rmdir(p) != 0) break;
    }
    free(p);
}

int simulate_db_open(const opts *o, simulate_db *d) {
    memset(d, 0, sizeof *d);
    if (o->no_db) return CLI_OK;
    const char *path = db_path(o);
    struct stat st;
    int existed = stat(path, &st) == 0;
    d->made_from = existed ? 0 : missing_dirs_from(path);
    pl_err e;
    pl_err_clear(&e);
    int code = store_open(o->db, 0, &d->db, &e);
    /* the file is named by device and inode, so that only the file this command made is removed */
    if (!existed && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        d->created = 1;
        d->dev = (unsigned long long)st.st_dev;
        d->ino = (unsigned long long)st.st_ino;
    }
    if (code == PL_OK) return CLI_OK;
    remove_created(d, path);
    return cli_fail(&e);
}

int simulate_store(simulate_db *d, const report *p, int argc, char **argv) {
    int rc = store_it(d->db, p, argc, argv);
    if (rc == CLI_OK) d->stored = 1;
    return rc;
}

void simulate_db_close(simulate_db *d) {
    if (!d->db) return;
    char *path = d->stored ? NULL : strdup(store_path(d->db));
    store_close(d->db); /* SQLite removes the -wal and -shm files of the last connection */
    d->db = NULL;
    if (path) remove_created(d, path);
    free(path);
}
#endif
