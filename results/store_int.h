/* store_int.h: internals shared by the results store's source files (not for other modules). */
#ifndef PL_STORE_INT_H
#define PL_STORE_INT_H

#include <sqlite3.h>

#include "store.h"

/* Column types of the runs table, used to bind, read and print a store_run generically. */
typedef enum store_coltype { SC_TEXT, SC_INT, SC_I64, SC_U64, SC_REAL } store_coltype;

/* One column of the runs table: its name, type, place in store_run, the schema version that
 * added it (or gave it its name) and the SQL expression files of older versions read instead:
 * a literal, or the column's older name. */
typedef struct store_col {
    const char *name;
    store_coltype type;
    size_t off;
    int since;
    const char *dflt;
} store_col;

extern const store_col store_cols[];
extern const size_t store_ncols;

struct store {
    sqlite3 *db;
    char *path;
    int readonly;
    int version;             /* schema version of the file */
    char host[256];
    sqlite3_stmt *ins_run, *ins_rank, *ins_op, *has_uid;
    char *select_cols;       /* "id, c1, c2, ..." with defaults for columns the file lacks */
    char *insert_sql;        /* "INSERT INTO runs(c1, ...) VALUES(?, ...)" of store_cols */
};

/* Fills e with "PATH: what: sqlite message" and returns code. */
int store_sqlerr(store *s, pl_err *e, int code, const char *what);
/* Prepares sql into *st once (kept until store_close); returns PL_OK or an error. */
int store_prepare(store *s, sqlite3_stmt **st, const char *sql, pl_err *e);
/* Copies src into dst with copies of its strings (owned by dst, freed by store_run_clear);
 * returns PL_OK, or PL_ENOMEM with dst cleared. */
int store_run_copy(store_run *dst, const store_run *src);
/* Reads the run columns of a row selected with s->select_cols into run (strings malloc'd). */
int store_read_run_row(sqlite3_stmt *st, store_run *run);
/* Inserts one run and its rows inside the caller's transaction. */
int store_insert_run(store *s, const store_run *run, const store_rank_metric *ranks, int nranks,
                     const store_op *ops, size_t nops, int64_t *run_id, pl_err *e);
/* Executes a statement with no result rows; returns the sqlite code. */
int store_exec(store *s, const char *sql);
/* Creates the missing parent folders of path (mkdir -p of its folder part). Returns 0, or the
 * errno of the first folder that could not be made with *failed its malloc'd path (NULL, with
 * ENOMEM, when even that copy failed), so each caller words the error its own way. */
int store_make_parents(const char *path, char **failed);
/* Returns 1 when an op kind is compute a timeline draws as a box (F, B, I, W, OVERLAP_F_B; not
 * STEP, not communication): plot.c. */
int store_kind_is_compute(const char *kind);
/* Returns the compute class (0 .. STORE_OVERLAP_KINDS - 1: store_overlap_kinds) of an op kind,
 * or -1 (not one of them; an OVERLAP is neither; store_overlap.c). */
int store_class_of(const char *kind);
/* What store_each_rank calls for each rank r with actions: pred[0 .. n) its predicted pass,
 * meas[0 .. passes n) its measured passes. Returns PL_OK, or an error that stops the walk. */
typedef int store_rank_fn(int r, const store_op *pred, size_t n, const store_op *meas, void *ctx, pl_err *e);
/* Walks the ranks 0 .. ranks - 1 of a pair's timelines (pred: one pass; meas: `passes` passes of
 * the same actions; both ordered by rank then seq), calling fn for each rank that has actions.
 * Returns PL_OK; PL_EINPUT when they do not line up (meas not `passes` times pred, overall or on
 * a rank, ranks out of order or beyond the count); or fn's error (store_tail.c). */
int store_each_rank(const store_op *pred, size_t np, const store_op *meas, size_t nm, int ranks, int passes,
                    store_rank_fn *fn, void *ctx, pl_err *e);

/* Returns 1 when s holds a run with this uid, 0 when not, -1 on error (in e). */
int store_has_uid(store *s, const char *uid, pl_err *e);

#endif
