/* test_shard.c: an experiment's sweep split into shards (experiments/lib.sh --shard, run through
 * the Slurm example's shard.sbatch) and merged (merge.sbatch: `pipelab db merge`, then the tables)
 * equals the same sweep run whole, run for run; each shard writes its own points and nothing
 * else; and the flags lib.sh and the Slurm scripts refuse. Everything runs from a temporary
 * directory, so the scripts' relative paths are checked to follow the caller's directory. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "util.h"

/* The sweep under test: zero_bubble.sh's 36 simulations take about a second. */
#define EXPERIMENT PIPELAB_TESTS_DIR "/../experiments/zero_bubble.sh"
#define SLURM_DIR PIPELAB_TESTS_DIR "/../experiments/slurm"
#define SHARDS 3
/* The database folder (PIPELAB_OUT), relative to the temporary directory the scripts run in. */
#define OUT_DIR "out"
/* Where the stderr of commands whose stdout is compared goes, in the temporary directory. */
#define STDERR_LOG "stderr.log"

/* The rows of the experiment's published table (its lines not starting with '#'), or -1. */
static int table_rows(void) {
    FILE *f = fopen(PIPELAB_TESTS_DIR "/../experiments/published/zero_bubble_tables_5_9.tsv", "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#') n++;
    fclose(f);
    return n;
}

/* Columns of `db list --format csv` that differ between two runs of the same point. */
static const char *const ignored_columns[] = {"id", "uid", "utc_time", "host", "origin", NULL};

/* Runs cmd in dir with the test's pipelab and PIPELAB_OUT=out; when quiet its stderr goes to
 * dir/STDERR_LOG (kept for a failure), so that *out is its stdout alone. Returns the exit
 * status and the output in *out (malloc'd, or freed when out is NULL). */
static int run_in(const char *dir, int quiet, char **out, const char *cmd) {
    size_t n = strlen(dir) + strlen(cmd) + strlen(PIPELAB_BIN) + 128;
    char *full = malloc(n);
    snprintf(full, n, "cd '%s' && (export PIPELAB='%s' PIPELAB_OUT=%s; { %s; }%s)", dir, PIPELAB_BIN, OUT_DIR, cmd,
             quiet ? " 2>>" STDERR_LOG : "");
    char *o = NULL;
    int rc = pl_test_run(full, &o);
    if (rc != 0 && quiet) fprintf(stderr, "\n  `%s` exited %d (its stderr: %s/" STDERR_LOG ")\n", full, rc, dir);
    free(full);
    if (out) *out = o;
    else free(o);
    return rc;
}

/* Returns 1 when name is one of the ignored columns. */
static int is_ignored(const char *name) {
    for (const char *const *c = ignored_columns; *c; c++)
        if (strcmp(name, *c) == 0) return 1;
    return 0;
}

/* Splits line (modified in place) at commas into fields[0..max); returns the count. */
static int split_csv(char *line, char **fields, int max) {
    int n = 0;
    for (char *f = line; f && n < max; n++) {
        fields[n] = f;
        f = strchr(f, ',');
        if (f) *f++ = '\0';
    }
    return n;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Returns the runs `db list --format csv` prints for db (relative to dir) as sorted lines of
 * the kept columns, joined by newlines (malloc'd; NULL on failure), and their count in *runs.
 * *header_ok says whether the kept columns include the configuration and the metrics. */
static char *run_set(const char *dir, const char *db, int *runs, int *header_ok) {
    enum { MAX_COLUMNS = 128 };
    char cmd[512], *csv = NULL;
    snprintf(cmd, sizeof cmd, "\"$PIPELAB\" db list --db '%s' --limit 0 --format csv", db);
    *runs = -1;
    if (run_in(dir, 1, &csv, cmd) != 0) { free(csv); return NULL; }
    size_t lines = 1;
    for (const char *p = csv; *p; p++) lines += *p == '\n';
    char **rows = calloc(lines, sizeof *rows), *fields[MAX_COLUMNS], *save = NULL;
    int keep[MAX_COLUMNS] = {0}, columns = -1, n = 0, bad = 0;
    size_t total = 1;
    for (char *line = strtok_r(csv, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int nf = split_csv(line, fields, MAX_COLUMNS);
        if (columns < 0) { /* the header */
            columns = nf;
            int config = 0, metric = 0;
            for (int i = 0; i < nf; i++) {
                keep[i] = !is_ignored(fields[i]);
                config += strcmp(fields[i], "microbatches") == 0 || strcmp(fields[i], "schedule") == 0;
                metric += strcmp(fields[i], "iteration_time_s") == 0 || strcmp(fields[i], "bubble_fraction") == 0;
            }
            *header_ok = config == 2 && metric == 2;
            continue;
        }
        bad += nf != columns; /* a quoted comma would shift the columns */
        size_t len = 1;
        for (int i = 0; i < nf; i++) len += strlen(fields[i]) + 1;
        char *row = malloc(len), *w = row;
        for (int i = 0; i < nf; i++)
            if (keep[i]) w += sprintf(w, "%s,", fields[i]);
        *w = '\0';
        rows[n++] = row;
        total += (size_t)(w - row) + 1;
    }
    qsort(rows, (size_t)n, sizeof *rows, cmp_str);
    char *set = malloc(total), *w = set;
    *w = '\0';
    for (int i = 0; i < n; i++) {
        w += sprintf(w, "%s\n", rows[i]);
        free(rows[i]);
    }
    free(rows);
    free(csv);
    *runs = bad ? -1 : n;
    return set;
}

/* Returns the number of database files (not -wal/-shm, not folders) in dir/OUT_DIR. */
static int db_files(const char *dir) {
    char *out = pl_test_path(dir, OUT_DIR);
    DIR *d = opendir(out);
    int n = 0;
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        size_t len = strlen(e->d_name);
        n += len > 3 && strcmp(e->d_name + len - 3, ".db") == 0;
    }
    if (d) closedir(d);
    free(out);
    return n;
}

/* Runs shard i of SHARDS as a job array task would; returns the exit status. */
static int run_shard(const char *dir, int i) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "SLURM_ARRAY_TASK_ID=%d SLURM_ARRAY_TASK_COUNT=%d '%s/shard.sbatch' '%s' >/dev/null",
             i, SHARDS, SLURM_DIR, EXPERIMENT);
    return run_in(dir, 1, NULL, cmd);
}

static void test_shards_merged_equal_whole(void) {
    char *dir = pl_test_tmpdir();
    char name[128], *path;
    /* Each shard writes its own database and nothing else. */
    for (int i = 0; i < SHARDS; i++) {
        CU_ASSERT_EQUAL_FATAL(run_shard(dir, i), 0);
        snprintf(name, sizeof name, OUT_DIR "/zero_bubble.shard-%d-of-%d.db", i, SHARDS);
        path = pl_test_path(dir, name);
        CU_ASSERT(pl_test_exists(path));
        free(path);
        CU_ASSERT_EQUAL(db_files(dir), i + 1);
    }
    path = pl_test_path(dir, OUT_DIR "/figures");
    CU_ASSERT(!pl_test_exists(path));
    free(path);
    /* The whole sweep into whole.db, relative to the caller's directory. */
    char *whole_table = NULL, *merged_table = NULL, cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --db whole.db", EXPERIMENT);
    CU_ASSERT_EQUAL_FATAL(run_in(dir, 1, &whole_table, cmd), 0);
    path = pl_test_path(dir, "whole.db");
    CU_ASSERT(pl_test_exists(path));
    free(path);
    /* The follow-up job: merge into out/zero_bubble.db, then the tables from it. */
    snprintf(cmd, sizeof cmd, "'%s/merge.sbatch' %d '%s'", SLURM_DIR, SHARDS, EXPERIMENT);
    CU_ASSERT_EQUAL_FATAL(run_in(dir, 1, &merged_table, cmd), 0);
    CU_ASSERT_STRING_EQUAL(merged_table, whole_table);
    /* Run for run: the same multiset of configurations and metrics. */
    int whole_runs, merged_runs, header_ok = 0;
    char *whole = run_set(dir, "whole.db", &whole_runs, &header_ok);
    CU_ASSERT(header_ok);
    char *merged = run_set(dir, OUT_DIR "/zero_bubble.db", &merged_runs, &header_ok);
    CU_ASSERT_FATAL(whole && merged);
    /* one simulation per row of the published table and per kind (1f1b, zb-h1, zb-h2) */
    CU_ASSERT_EQUAL(whole_runs, 3 * table_rows());
    CU_ASSERT_EQUAL(merged_runs, whole_runs);
    CU_ASSERT_STRING_EQUAL(merged, whole);
    /* Shard i holds the points whose index modulo SHARDS is i. */
    for (int i = 0; i < SHARDS; i++) {
        int runs = -1;
        snprintf(name, sizeof name, OUT_DIR "/zero_bubble.shard-%d-of-%d.db", i, SHARDS);
        free(run_set(dir, name, &runs, &header_ok));
        CU_ASSERT_EQUAL(runs, (whole_runs - i + SHARDS - 1) / SHARDS);
    }
    free(whole);
    free(merged);
    free(whole_table);
    free(merged_table);
    pl_test_rmdir(dir);
    free(dir);
}

/* Runs cmd in dir; returns 1 when it exits with rc and its output names what (else says why). */
static int exits_naming(const char *dir, const char *cmd, int rc, const char *what) {
    char *o = NULL;
    int got = run_in(dir, 0, &o, cmd);
    int ok = got == rc && strstr(o, what) != NULL;
    if (!ok) fprintf(stderr, "\n  `%s`: exit %d (wanted %d), output without '%s':\n%s\n", cmd, got, rc, what, o);
    free(o);
    return ok;
}

static void test_shard_flags(void) {
    char *dir = pl_test_tmpdir();
    static const struct { const char *flags, *names; } usage[] = {
        {"--shard 3/3", "--shard"}, {"--shard x/y", "--shard"}, {"--shard 2", "--shard"},
        {"--shard", "--shard"},     {"--merge 0", "--merge"},   {"--shard 0/2 --plot-only", "--shard"},
        {"--db", "--db"},           {"--nonsense", "--nonsense"},
    };
    char cmd[1024];
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", EXPERIMENT, usage[i].flags);
        CU_ASSERT(exits_naming(dir, cmd, 2, usage[i].names));
    }
    /* Merging shards that never ran names the first missing one and writes nothing. */
    snprintf(cmd, sizeof cmd, "'%s/merge.sbatch' 2 '%s'", SLURM_DIR, EXPERIMENT);
    CU_ASSERT(exits_naming(dir, cmd, 1, "zero_bubble.shard-0-of-2.db"));
    CU_ASSERT_EQUAL(db_files(dir), 0);
    /* Under --db FILE a shard writes FILE's shard name (3 of zero_bubble's 36 points in 12
     * shards), and --merge with the same flags looks for the others beside it. */
    snprintf(cmd, sizeof cmd, "'%s' --shard 0/12 --db sub/sweep.db >/dev/null", EXPERIMENT);
    CU_ASSERT_EQUAL(run_in(dir, 1, NULL, cmd), 0);
    int runs = -1, header_ok = 0;
    free(run_set(dir, "sub/sweep.shard-0-of-12.db", &runs, &header_ok));
    CU_ASSERT_EQUAL(runs, 3);
    snprintf(cmd, sizeof cmd, "'%s' --merge 12 --db sub/sweep.db", EXPERIMENT);
    CU_ASSERT(exits_naming(dir, cmd, 1, "sub/sweep.shard-1-of-12.db not found"));
    CU_ASSERT_EQUAL(db_files(dir), 0);
    /* A task outside a job array, or of an array that does not start at 0. */
    snprintf(cmd, sizeof cmd, "'%s/shard.sbatch' '%s'", SLURM_DIR, EXPERIMENT);
    CU_ASSERT(exits_naming(dir, cmd, 2, "SLURM_ARRAY_TASK_ID"));
    snprintf(cmd, sizeof cmd,
             "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=2 "
             "'%s/shard.sbatch' '%s'", SLURM_DIR, EXPERIMENT);
    CU_ASSERT(exits_naming(dir, cmd, 2, "0-1"));
    CU_ASSERT_EQUAL(db_files(dir), 0);
    /* --help from another directory prints the script's own header and the common flags. */
    snprintf(cmd, sizeof cmd, "'%s' --help", EXPERIMENT);
    CU_ASSERT(exits_naming(dir, cmd, 0, "zero_bubble.sh: bubble rates"));
    CU_ASSERT(exits_naming(dir, cmd, 0, "--shard I/N"));
    pl_test_rmdir(dir);
    free(dir);
}

void test_shard_register(void) {
    static const pl_test_case cases[] = {
        {"a sweep in shards, merged, equals the whole sweep run for run", test_shards_merged_equal_whole},
        {"shard and merge flags are checked", test_shard_flags},
        {NULL, NULL},
    };
    pl_test_suite("shard", cases);
}
