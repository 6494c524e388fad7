/* store_query.c: reading runs back, exporting them (CSV, JSON) and merging databases. */
#include "store_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First capacities of the arrays read back: runs, rank rows, ops (doubled as they fill). */
enum { FIRST_RUNS = 16, FIRST_RANKS = 8, FIRST_OPS = 64 };

/* Returns a pointer to the string field at offset off of run. */
static const char **str_field(store_run *run, size_t off) { return (const char **)((char *)run + off); }

/* Reads a row selected with select_cols into run (strings copied; NULL REAL as NAN); returns
 * PL_OK or PL_ENOMEM with run cleared. */
int store_read_run_row(sqlite3_stmt *st, store_run *run) {
    memset(run, 0, sizeof *run);
    run->id = sqlite3_column_int64(st, 0);
    int oom = 0;
    for (size_t i = 0; i < store_ncols; i++) {
        char *p = (char *)run + store_cols[i].off;
        int col = (int)i + 1;
        switch (store_cols[i].type) {
        case SC_TEXT: {
            const unsigned char *t = sqlite3_column_text(st, col);
            char *copy = strdup(t ? (const char *)t : "");
            if (!copy) oom = 1;
            *str_field(run, store_cols[i].off) = copy;
            break;
        }
        case SC_INT: *(int *)p = sqlite3_column_int(st, col); break;
        case SC_I64: *(int64_t *)p = sqlite3_column_int64(st, col); break;
        case SC_U64: *(uint64_t *)p = (uint64_t)sqlite3_column_int64(st, col); break;
        case SC_REAL: /* NULL: not recorded (zb_bubble_rate before version 3, of measured runs) */
            *(double *)p = sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
            break;
        }
    }
    if (oom) {
        store_run_clear(run);
        return PL_ENOMEM;
    }
    return PL_OK;
}

/* Frees the strings of run and zeroes it. */
void store_run_clear(store_run *run) {
    if (!run) return;
    for (size_t i = 0; i < store_ncols; i++)
        if (store_cols[i].type == SC_TEXT) free((void *)*str_field(run, store_cols[i].off));
    memset(run, 0, sizeof *run);
}

/* Copies src into dst with its own strings; returns PL_OK or PL_ENOMEM (dst cleared). */
int store_run_copy(store_run *dst, const store_run *src) {
    *dst = *src;
    int oom = 0;
    for (size_t i = 0; i < store_ncols; i++) {
        if (store_cols[i].type != SC_TEXT) continue;
        const char **f = str_field(dst, store_cols[i].off);
        if (*f && !(*f = strdup(*f))) oom = 1;
    }
    if (!oom) return PL_OK;
    store_run_clear(dst);
    return PL_ENOMEM;
}

/* Frees n read runs and the array. */
void store_runs_free(store_run *runs, size_t n) {
    if (!runs) return;
    for (size_t i = 0; i < n; i++) store_run_clear(&runs[i]);
    free(runs);
}

/* Frees n read ops and the array. */
void store_ops_free(store_op *ops, size_t n) {
    if (!ops) return;
    for (size_t i = 0; i < n; i++) {
        free((void *)ops[i].action);
        free((void *)ops[i].kind);
    }
    free(ops);
}

/* What collect_rows reads: the size of an element and the array's first capacity, how to read
 * one row into an element (PL_OK, or PL_ENOMEM with nothing of it left allocated), how to free
 * n elements read and their array, and what a read error says. */
typedef struct row_kind {
    size_t size, first;
    int (*read)(sqlite3_stmt *st, void *elt);
    void (*free_rows)(void *rows, size_t n);
    const char *what;
} row_kind;

/* Steps the prepared query st to its end, reading every row as k says into a malloc'd array;
 * returns PL_OK and *out, *n, or PL_EIO / PL_ENOMEM with nothing left allocated. The caller
 * finalizes st. */
static int collect_rows(store *s, sqlite3_stmt *st, const row_kind *k, void **out, size_t *n, pl_err *e) {
    char *rows = NULL;
    size_t len = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char *nr = pl_grow(rows, &cap, len, k->first, k->size);
        if (nr) rows = nr;
        if (!nr || k->read(st, rows + len * k->size) != PL_OK) {
            k->free_rows(rows, len);
            return pl_errf(e, PL_ENOMEM, "out of memory");
        }
        len++;
    }
    if (rc != SQLITE_DONE) {
        k->free_rows(rows, len);
        return store_sqlerr(s, e, PL_EIO, k->what);
    }
    *out = rows;
    *n = len;
    return PL_OK;
}

/* collect_rows' callbacks for runs, rank rows and ops: each reads one row (the columns of the
 * queries below, in order) or frees what was read. */

/* Reads a runs row (select_cols) into the store_run at elt; returns PL_OK or PL_ENOMEM. */
static int read_run(sqlite3_stmt *st, void *elt) { return store_read_run_row(st, elt); }
/* Frees n runs read and their array. */
static void free_runs(void *rows, size_t n) { store_runs_free(rows, n); }

/* Reads a rank row (rank, busy_s, idle_s, bubble_fraction, comm_s, peak_mem_bytes) into the
 * store_rank_metric at elt; returns PL_OK. */
static int read_rank(sqlite3_stmt *st, void *elt) {
    store_rank_metric *r = elt;
    r->rank = sqlite3_column_int(st, 0);
    r->busy_s = sqlite3_column_double(st, 1);
    r->idle_s = sqlite3_column_double(st, 2);
    r->bubble_fraction = sqlite3_column_double(st, 3);
    r->comm_s = sqlite3_column_double(st, 4);
    r->peak_mem_bytes = sqlite3_column_int64(st, 5);
    return PL_OK;
}
/* Frees an array of rank rows (they own nothing). */
static void free_ranks(void *rows, size_t n) {
    (void)n;
    free(rows);
}

/* Reads an ops row (rank, seq, action, kind, stage, mb, start_s, end_s) into the store_op at
 * elt; returns PL_OK, or PL_ENOMEM with none of its text left allocated. */
static int read_op(sqlite3_stmt *st, void *elt) {
    store_op *o = elt;
    memset(o, 0, sizeof *o);
    /* a value of another type (text, NULL) is kept as one no op has, for ops_check to refuse */
    for (int c = 0; c < 8; c++) {
        int t = sqlite3_column_type(st, c);
        int number = t == SQLITE_INTEGER || (c >= 6 && t == SQLITE_FLOAT);
        if (c != 2 && c != 3 && !number) o->seq = -1;
    }
    if (o->seq == -1) {
        o->action = strdup("");
        o->kind = strdup("");
        if (!o->action || !o->kind) {
            free((void *)o->action);
            free((void *)o->kind);
            return PL_ENOMEM;
        }
        return PL_OK;
    }
    o->rank = sqlite3_column_int(st, 0);
    o->seq = sqlite3_column_int(st, 1);
    const unsigned char *a = sqlite3_column_text(st, 2), *k = sqlite3_column_text(st, 3);
    o->action = strdup(a ? (const char *)a : "");
    o->kind = strdup(k ? (const char *)k : "");
    if (!o->action || !o->kind) {
        free((void *)o->action);
        free((void *)o->kind);
        return PL_ENOMEM;
    }
    o->stage = sqlite3_column_int(st, 4);
    o->mb = sqlite3_column_int(st, 5);
    o->start_s = sqlite3_column_double(st, 6);
    o->end_s = sqlite3_column_double(st, 7);
    return PL_OK;
}
/* Frees n ops read and their array. */
static void free_ops(void *rows, size_t n) { store_ops_free(rows, n); }

/* The three kinds of rows read back. */

static const row_kind run_rows = {sizeof(store_run), FIRST_RUNS, read_run, free_runs, "cannot read runs"};
static const row_kind rank_rows = {sizeof(store_rank_metric), FIRST_RANKS, read_rank, free_ranks, "cannot read rank metrics"};
static const row_kind op_rows = {sizeof(store_op), FIRST_OPS, read_op, free_ops, "cannot read ops"};

/* Returns PL_OK when run's shape is one pipelab writes (ranks from 1 to STORE_MAX_RANKS, at
 * least one stage and microbatch, no negative count), else PL_EINPUT naming the run of s's file
 * as damaged: readers size their tables by it. */
static int run_shape_check(const store *s, const store_run *r, pl_err *e) {
    const char *what = r->ranks < 1 || r->ranks > STORE_MAX_RANKS ? "ranks"
                       : r->stages < 1                             ? "stages"
                       : r->microbatches < 1                       ? "microbatches"
                       : r->chunks < 0                             ? "chunks"
                       : r->iterations < 0                         ? "iterations"
                                                                   : NULL;
    if (!what) return PL_OK;
    int v = what[0] == 'r' ? r->ranks : what[0] == 's' ? r->stages : what[0] == 'm' ? r->microbatches
                                                       : what[0] == 'c' ? r->chunks : r->iterations;
    return pl_errf(e, PL_EINPUT, "%s: run %lld has %d %s: the database is damaged", s->path, (long long)r->id, v, what);
}

/* Collects every row of a prepared runs query; returns PL_OK or an error (a run whose shape is
 * damaged: run_shape_check). */
static int collect_runs(store *s, sqlite3_stmt *st, store_run **out, size_t *n, pl_err *e) {
    void *rows = NULL;
    int code = collect_rows(s, st, &run_rows, &rows, n, e);
    for (size_t i = 0; code == PL_OK && i < *n; i++) code = run_shape_check(s, (store_run *)rows + i, e);
    if (code != PL_OK) {
        if (rows) store_runs_free(rows, *n);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return code;
}

/* Prepares "SELECT cols FROM runs <tail>" for this file; returns PL_OK or an error. */
static int prepare_select(store *s, const char *tail, sqlite3_stmt **st, pl_err *e) {
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_printf(&b, "SELECT %s FROM runs %s", s->select_cols, tail);
    if (b.failed) {
        pl_buf_free(&b);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    int rc = sqlite3_prepare_v2(s->db, b.data, -1, st, NULL);
    pl_buf_free(&b);
    if (rc != SQLITE_OK) return store_sqlerr(s, e, PL_EIO, "cannot query runs");
    return PL_OK;
}

/* Lists runs (tag filter, newest or oldest first, limit); shared by list and export. */
static int select_runs(store *s, const char *tag, int limit, int newest_first, store_run **runs, size_t *n,
                       pl_err *e) {
    *runs = NULL;
    *n = 0;
    char tail[160];
    snprintf(tail, sizeof tail, "%s ORDER BY utc_time %s, id %s LIMIT ?", tag ? "WHERE tag = ?" : "",
             newest_first ? "DESC" : "ASC", newest_first ? "DESC" : "ASC");
    sqlite3_stmt *st = NULL;
    int code = prepare_select(s, tail, &st, e);
    if (code != PL_OK) return code;
    int k = 1;
    if (tag) sqlite3_bind_text(st, k++, tag, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, k, limit > 0 ? limit : -1);
    code = collect_runs(s, st, runs, n, e);
    sqlite3_finalize(st);
    return code;
}

/* Lists runs newest first (tag, limit); returns PL_OK and *runs, or the error. */
int store_list_runs(store *s, const char *tag, int limit, store_run **runs, size_t *n, pl_err *e) {
    return select_runs(s, tag, limit, 1, runs, n, e);
}

/* Finds a run by id, uid or unique uid prefix; returns PL_OK, or PL_EINPUT when there is no
 * such run or the prefix is ambiguous. */
int store_get_run(store *s, const char *key, store_run *run, pl_err *e) {
    memset(run, 0, sizeof *run);
    if (!key || !*key) return pl_errf(e, PL_EINPUT, "empty run id");
    int numeric = 1;
    for (const char *p = key; *p; p++)
        if (!isdigit((unsigned char)*p)) numeric = 0;
    numeric = numeric && strlen(key) < 19;
    sqlite3_stmt *st = NULL;
    /* An integer id wins, then an exact uid, then a unique uid prefix. */
    int code = prepare_select(s, "WHERE id = ?1 OR uid = ?2 OR (length(?2) >= 4 AND substr(uid, 1, length(?2)) = ?2) "
                                 "ORDER BY id IS ?1 DESC, uid = ?2 DESC LIMIT 3", &st, e);
    if (code != PL_OK) return code;
    if (numeric) sqlite3_bind_int64(st, 1, strtoll(key, NULL, 10));
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    store_run *runs = NULL;
    size_t n = 0;
    code = collect_runs(s, st, &runs, &n, e);
    sqlite3_finalize(st);
    if (code != PL_OK) return code;
    if (n == 0) code = pl_errf(e, PL_EINPUT, "%s: no run '%s'", s->path, key);
    else if (n > 1 && strcmp(runs[0].uid, key) != 0 && !(numeric && runs[0].id == strtoll(key, NULL, 10)))
        code = pl_errf(e, PL_EINPUT, "%s: run id prefix '%s' is ambiguous", s->path, key);
    else {
        *run = runs[0];
        memset(&runs[0], 0, sizeof runs[0]);
    }
    store_runs_free(runs, n);
    return code;
}

/* Reads the rank rows of a run, by rank (older files: the fraction computed as the migration
 * does); returns PL_OK and *out, or the error. */
int store_get_rank_metrics(store *s, int64_t run_id, store_rank_metric **out, int *n, pl_err *e) {
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    /* before version 3 the column held idle seconds (a copy of idle_s): read it as the
     * fraction the migration to version 3 computes */
    const char *sql = s->version >= 3
                          ? "SELECT rank, busy_s, idle_s, bubble_fraction, comm_s, peak_mem_bytes FROM rank_metrics "
                            "WHERE run_id = ? ORDER BY rank"
                          : "SELECT rank, busy_s, idle_s, CASE WHEN busy_s + idle_s > 0 THEN idle_s / (busy_s + idle_s) "
                            "ELSE 0.0 END, comm_s, peak_mem_bytes FROM rank_metrics WHERE run_id = ? ORDER BY rank";
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return store_sqlerr(s, e, PL_EIO, "cannot query rank metrics");
    sqlite3_bind_int64(st, 1, run_id);
    void *rows = NULL;
    size_t len = 0;
    int code = collect_rows(s, st, &rank_rows, &rows, &len, e);
    sqlite3_finalize(st);
    if (code != PL_OK) return code;
    *out = rows;
    *n = (int)len;
    return PL_OK;
}

/* Returns PL_OK when the n ops of run run_id are ones pipelab writes: numbers where numbers go
 * (read_op), a rank of the run's, a position, a kind, finite times that end no earlier than they
 * start. Else PL_EINPUT naming the run and the op as damaged. */
static int ops_check(store *s, int64_t run_id, const store_op *ops, size_t n, pl_err *e) {
    int ranks = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT ranks FROM runs WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
        return store_sqlerr(s, e, PL_EIO, "cannot query runs");
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW) ranks = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    for (size_t i = 0; i < n; i++) {
        const store_op *o = &ops[i];
        const char *why = o->seq < 0                                           ? "a value that is not a number"
                          : o->rank < 0 || o->rank >= ranks                    ? "a rank the run does not have"
                          : !*o->kind                                          ? "no kind"
                          : !isfinite(o->start_s) || !isfinite(o->end_s)       ? "a time that is not a number"
                          : o->end_s < o->start_s                              ? "an end before its start"
                                                                               : NULL;
        if (why)
            return pl_errf(e, PL_EINPUT, "%s: run %lld, its action %zu (rank %d, %s): %s: the database is damaged",
                           s->path, (long long)run_id, i + 1, o->rank, *o->action ? o->action : "?", why);
    }
    return PL_OK;
}

/* Reads the ops of a run by rank and position; returns PL_OK and *out, or the error. */
int store_get_ops(store *s, int64_t run_id, store_op **out, size_t *n, pl_err *e) {
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT rank, seq, action, kind, stage, mb, start_s, end_s FROM ops "
                           "WHERE run_id = ? ORDER BY rank, seq", -1, &st, NULL) != SQLITE_OK)
        return store_sqlerr(s, e, PL_EIO, "cannot query ops");
    sqlite3_bind_int64(st, 1, run_id);
    void *rows = NULL;
    int code = collect_rows(s, st, &op_rows, &rows, n, e);
    sqlite3_finalize(st);
    if (code == PL_OK) code = ops_check(s, run_id, rows, *n, e);
    if (code != PL_OK) {
        store_ops_free(rows, *n);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return code;
}

/* Counts the ops of a run; returns PL_OK and *n, or PL_EIO. */
int store_count_ops(store *s, int64_t run_id, int64_t *n, pl_err *e) {
    sqlite3_stmt *st = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM ops WHERE run_id = ?", -1, &st, NULL) != SQLITE_OK)
        return store_sqlerr(s, e, PL_EIO, "cannot count ops");
    sqlite3_bind_int64(st, 1, run_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? PL_OK : store_sqlerr(s, e, PL_EIO, "cannot count ops");
}

/* Appends the value of column c of run (CSV field or JSON value). */
static void put_value(pl_buf *b, const store_run *run, const store_col *c, int json) {
    const char *p = (const char *)run + c->off;
    switch (c->type) {
    case SC_TEXT: {
        const char *t = *(const char *const *)p;
        if (json) pl_buf_json_string(b, t ? t : "");
        else pl_buf_csv_field(b, t ? t : "");
        break;
    }
    case SC_INT: pl_buf_printf(b, "%d", *(const int *)p); break;
    case SC_I64: pl_buf_printf(b, "%lld", (long long)*(const int64_t *)p); break;
    case SC_U64: pl_buf_printf(b, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case SC_REAL: pl_buf_number(b, *(const double *)p, json); break;
    }
}

/* Returns 1 when text is valid JSON (SQLite's json_valid), 0 otherwise. */
static int json_ok(store *s, const char *text) {
    if (!text || !*text) return 0;
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (sqlite3_prepare_v2(s->db, "SELECT json_valid(?)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) ok = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return ok;
}

/* Appends the CSV header line of the runs table. */
static void put_csv_header(pl_buf *out) {
    pl_buf_puts(out, "id");
    for (size_t c = 0; c < store_ncols; c++) pl_buf_printf(out, ",%s", store_cols[c].name);
    pl_buf_putc(out, '\n');
}

/* Appends one run: a CSV line, or a JSON object (indent spaces before it) with its parameters
 * and per-rank metrics. Returns PL_OK or the error of reading the rank metrics. */
static int put_run(store *s, const store_run *r, int json, const char *indent, pl_buf *out, pl_err *e) {
    if (!json) {
        pl_buf_printf(out, "%lld", (long long)r->id);
        for (size_t c = 0; c < store_ncols; c++) {
            pl_buf_putc(out, ',');
            put_value(out, r, &store_cols[c], 0);
        }
        pl_buf_putc(out, '\n');
        return PL_OK;
    }
    store_rank_metric *m = NULL;
    int nm = 0;
    int code = store_get_rank_metrics(s, r->id, &m, &nm, e);
    if (code != PL_OK) return code;
    pl_buf_printf(out, "%s{\"id\": %lld", indent, (long long)r->id);
    for (size_t c = 0; c < store_ncols; c++) {
        if (strcmp(store_cols[c].name, "params_json") == 0) continue;
        pl_buf_printf(out, ", \"%s\": ", store_cols[c].name);
        put_value(out, r, &store_cols[c], 1);
    }
    pl_buf_puts(out, ", \"params\": ");
    if (json_ok(s, r->params_json)) pl_buf_puts(out, r->params_json);
    else if (r->params_json && *r->params_json) pl_buf_json_string(out, r->params_json);
    else pl_buf_puts(out, "null");
    /* per_rank, as simulate's and run's JSON name it: "ranks" is the run's count, above */
    pl_buf_printf(out, ",\n%s \"per_rank\": [", indent);
    for (int k = 0; k < nm; k++) {
        pl_buf_printf(out, "%s{\"rank\": %d, \"busy_s\": ", k ? ", " : "", m[k].rank);
        pl_buf_number(out, m[k].busy_s, 1);
        pl_buf_puts(out, ", \"idle_s\": ");
        pl_buf_number(out, m[k].idle_s, 1);
        pl_buf_puts(out, ", \"bubble_fraction\": ");
        pl_buf_number(out, m[k].bubble_fraction, 1);
        pl_buf_puts(out, ", \"comm_s\": ");
        pl_buf_number(out, m[k].comm_s, 1);
        pl_buf_printf(out, ", \"peak_mem_bytes\": %lld}", (long long)m[k].peak_mem_bytes);
    }
    free(m);
    pl_buf_puts(out, "]}");
    return PL_OK;
}

/* Appends the runs (tag, oldest first) as CSV or a JSON array; returns PL_OK or the error. */
int store_export(store *s, const char *tag, store_format fmt, pl_buf *out, pl_err *e) {
    store_run *runs = NULL;
    size_t n = 0;
    int code = select_runs(s, tag, 0, 0, &runs, &n, e);
    if (code != PL_OK) return code;
    int json = fmt == STORE_JSON;
    if (json) pl_buf_puts(out, "[");
    else put_csv_header(out);
    for (size_t i = 0; i < n && code == PL_OK; i++) {
        if (json) pl_buf_puts(out, i ? ",\n" : "\n");
        code = put_run(s, &runs[i], json, json ? "  " : "", out, e);
    }
    if (json && code == PL_OK) pl_buf_puts(out, n ? "\n]\n" : "]\n");
    store_runs_free(runs, n);
    if (code == PL_OK && out->failed) code = pl_errf(e, PL_ENOMEM, "out of memory");
    return code;
}

/* Appends one run as CSV (with its header) or a JSON object; returns PL_OK or the error. */
int store_export_run(store *s, const store_run *run, store_format fmt, pl_buf *out, pl_err *e) {
    if (fmt != STORE_JSON) put_csv_header(out);
    int code = put_run(s, run, fmt == STORE_JSON, "", out, e);
    if (code == PL_OK && fmt == STORE_JSON) pl_buf_putc(out, '\n');
    if (code == PL_OK && out->failed) code = pl_errf(e, PL_ENOMEM, "out of memory");
    return code;
}

/* store_int.h. */
int store_has_uid(store *dst, const char *uid, pl_err *e) {
    if (store_prepare(dst, &dst->has_uid, "SELECT 1 FROM runs WHERE uid = ?", e) != PL_OK) return -1;
    sqlite3_bind_text(dst->has_uid, 1, uid, -1, SQLITE_STATIC);
    int rc = sqlite3_step(dst->has_uid);
    sqlite3_reset(dst->has_uid);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) return 0;
    store_sqlerr(dst, e, PL_EIO, "cannot look up a run");
    return -1;
}

/* Copies the runs of src_path that dst lacks in one transaction; returns PL_OK and the counts,
 * or the error (nothing copied). */
int store_merge(store *dst, const char *src_path, int *added, int *skipped, pl_err *e) {
    if (added) *added = 0;
    if (skipped) *skipped = 0;
    if (dst->readonly) return pl_errf(e, PL_EINTERNAL, "%s: opened read-only", dst->path);
    store *src = NULL;
    int code = store_open(src_path, 1, &src, e);
    if (code != PL_OK) return code;
    store_run *runs = NULL;
    size_t n = 0;
    code = select_runs(src, NULL, 0, 0, &runs, &n, e);
    if (code != PL_OK) {
        store_close(src);
        return code;
    }
    if (store_exec(dst, "BEGIN IMMEDIATE") != SQLITE_OK) {
        code = store_sqlerr(dst, e, PL_EIO, "cannot lock the database");
        goto done;
    }
    int nadd = 0, nskip = 0;
    for (size_t i = 0; i < n && code == PL_OK; i++) {
        store_run *r = &runs[i];
        int h = store_has_uid(dst, r->uid, e);
        if (h < 0) {
            code = PL_EIO;
            break;
        }
        if (h == 1) {
            nskip++;
            continue;
        }
        store_rank_metric *m = NULL;
        int nm = 0;
        store_op *ops = NULL;
        size_t nops = 0;
        code = store_get_rank_metrics(src, r->id, &m, &nm, e);
        if (code == PL_OK) code = store_get_ops(src, r->id, &ops, &nops, e);
        if (code == PL_OK) {
            store_run copy = *r;
            if (!copy.origin || !*copy.origin) copy.origin = src_path;
            code = store_insert_run(dst, &copy, m, nm, ops, nops, NULL, e);
        }
        free(m);
        store_ops_free(ops, nops);
        if (code == PL_OK) nadd++;
    }
    if (code == PL_OK && store_exec(dst, "COMMIT") != SQLITE_OK) code = store_sqlerr(dst, e, PL_EIO, "cannot commit the merge");
    if (code != PL_OK) {
        store_exec(dst, "ROLLBACK");
        pl_err_prefix(e, "merging %s: ", src_path);
    } else {
        if (added) *added = nadd;
        if (skipped) *skipped = nskip;
    }
done:
    store_runs_free(runs, n);
    store_close(src);
    return code;
}

/* Appends the ops of r as a Chrome trace; returns PL_OK, PL_EINPUT when there are none, or
 * PL_ENOMEM. */
int store_ops_chrome(const store_run *r, const store_op *ops, size_t n, pl_buf *out, pl_err *e) {
    if (n == 0)
        return pl_errf(e, PL_EINPUT, "run %lld has no recorded actions (pipelab run --trace, pipelab simulate --trace "
                       "--db store them)", (long long)r->id);
    pl_buf_puts(out, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"run\":");
    pl_buf_printf(out, "%lld,\"kind\":", (long long)r->id);
    pl_buf_json_string(out, r->kind);
    pl_buf_puts(out, ",\"schedule\":");
    pl_buf_json_string(out, r->schedule);
    pl_buf_puts(out, ",\"uid\":");
    pl_buf_json_string(out, r->uid);
    pl_buf_puts(out, "},\"traceEvents\":[");
    int last_rank = -1;
    for (size_t i = 0; i < n; i++) {
        const store_op *o = &ops[i];
        if (o->rank != last_rank) { /* ops come ordered by rank: name its process and threads */
            last_rank = o->rank;
            pl_buf_printf(out, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},"
                               "\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}},"
                               "\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"comm\"}}",
                          i ? "," : "", o->rank, o->rank, o->rank, o->rank);
        }
        const char *k = o->kind ? o->kind : "";
        int comm = !strncmp(k, "SEND", 4) || !strncmp(k, "RECV", 4) || !strncmp(k, "REDUCE", 6);
        double dur = o->end_s - o->start_s;
        pl_buf_puts(out, ",\n{\"name\":");
        pl_buf_json_string(out, o->action);
        pl_buf_puts(out, ",\"cat\":");
        pl_buf_json_string(out, k);
        pl_buf_printf(out, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.6f,\"dur\":%.6f,\"args\":{\"stage\":%d,\"mb\":%d,"
                           "\"seq\":%d}}",
                      o->rank, comm, o->start_s * 1e6, dur > 0 ? dur * 1e6 : 0, o->stage, o->mb, o->seq);
    }
    pl_buf_puts(out, "\n]}\n");
    return out->failed ? pl_errf(e, PL_ENOMEM, "out of memory writing the trace") : PL_OK;
}
