/* util.h: helpers shared by the results store tests (sample runs, raw SQL checks). */
#ifndef PL_TEST_RESULTS_UTIL_H
#define PL_TEST_RESULTS_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* Fills run with a sample simulated run (tag and seed vary by index). Strings are static. */
void tr_sample_run(store_run *run, const char *tag, int index);
/* Fills ranks[0..n) with sample rank metrics derived from index. */
void tr_sample_ranks(store_rank_metric *ranks, int n, int index);
/* Returns a malloc'd array of n sample ops for `ranks` ranks (actions point to a static table). */
store_op *tr_sample_ops(size_t n, int ranks);
/* Writes n sample runs tagged tag (4 rank rows and nops op rows each; uids "uidp-i" when uidp is
 * not NULL, else fresh) into path; returns how many were stored. */
int tr_fill(const char *path, const char *tag, int n, const char *uidp, int nops);
/* Runs a raw SQL script on path (creating the file); returns the sqlite code. */
int tr_raw_sql(const char *path, const char *sql);
/* Returns the malloc'd bytes of the file at path, NUL-terminated (length in *n when n is not
 * NULL), or NULL. */
char *tr_slurp(const char *path, size_t *n);
/* Runs one integer SQL query directly on the file at path; returns the value or -1 on error. */
int64_t tr_sql_int(const char *path, const char *sql);
/* Runs one SQL query on path; returns its first value as malloc'd text (NULL on error). */
char *tr_sql_text(const char *path, const char *sql);
/* Runs one SQL query on path; returns its first value as a double (-2 for NULL, -1 on error). */
double tr_sql_double(const char *path, const char *sql);
/* Returns 1 when PRAGMA integrity_check on path says "ok". */
int tr_integrity_ok(const char *path);
/* Returns the number of runs in path that lack some rank or op rows (expected_ops per run, or
 * -1 to skip the op check), plus orphan rank/op rows; 0 means every run is whole. */
int64_t tr_partial_runs(const char *path, int64_t expected_ops);
/* A version 1 database (first release schema) holding run 'old-uid-1' with 2 rank rows. */
extern const char tr_v1_schema[];
/* A version 2 database (the last with runs.bubble = idle seconds and runs.bubble_rate = idle
 * fraction) holding runs 'v2-sim', 'v2-meas' and 'v2-zero' (see util.c). */
extern const char tr_v2_schema[];
/* Returns 1 when `pipelab compare --db DIR/DB FLAG --format csv` is a usage error (exit 2) whose
 * message says FLAG prints a table; then removes dir (pl_test_rmdir) and frees it. */
int tr_table_only_then_clean(char *dir, const char *db, const char *flag);
/* Runs a traced `pipelab run --kind KIND --ranks 2 --microbatches M` of a small dense block into
 * DIR/DB under tag TAG, then `pipelab compare --db DIR/DB --tag TAG FLAG`; returns the
 * comparison's output (malloc'd), or NULL when either exits non-zero. */
char *tr_traced_compare(const char *dir, const char *kind, int m, const char *db, const char *tag, const char *flag);

#endif
