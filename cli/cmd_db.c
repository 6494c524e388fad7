/* cmd_db.c: `pipelab db`: list, show, export and merge the runs of a results database. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "store.h"

static const char help_text[] =
    "usage: pipelab db SUBCOMMAND [options]   (options may also come before SUBCOMMAND)\n"
    "\n"
    "Reads and combines results databases (default " STORE_DEFAULT_PATH ").\n"
    "\n"
    "subcommands:\n"
    "  list [--tag T] [--limit N] [--format table|csv|json]   recent runs, newest first; the\n"
    "                                 table's UID is the uid's first 8 characters (more where\n"
    "                                 they would name several runs), and p:X the prediction\n"
    "                                 `pipelab run` stored for its measured run X\n"
    "  show RUN [--ops] [--format table|csv|json]\n"
    "                                 one run (RUN = integer id, uid, a uid prefix, or the UID\n"
    "                                 list prints) with its rank metrics; --ops also prints\n"
    "                                 every recorded action\n"
    "  export [--tag T] --format csv|json [-o FILE]          runs with their headline metrics\n"
    "                                 (JSON also carries parameters and per-rank metrics)\n"
    "  trace RUN [-o FILE]            the run's recorded actions (pipelab run --trace: measured\n"
    "                                 and predicted) as a Chrome trace, to open in\n"
    "                                 https://ui.perfetto.dev (default stdout)\n"
    "  merge A.db [B.db ...] -o OUT.db  copy every run into OUT.db exactly once (by uid); all\n"
    "                                 or nothing: a failed merge leaves no new OUT.db, and an\n"
    "                                 existing one as it was; interrupted (Ctrl-C, SIGTERM,\n"
    "                                 SIGHUP), it removes its temporary files\n"
    "\n"
    "options:\n"
    "  --db PATH             database to read (default " STORE_DEFAULT_PATH ")\n"
    "  --tag T               only runs with this tag\n"
    "  --limit N             at most N runs (list; default 20, 0 = all)\n"
    "  --format F            table (list, show), csv or json\n"
    "  -o, --output FILE     where export and trace write (default stdout); merge's target database\n"
    "  --ops                 show: print the recorded actions too\n"
    "  -h, --help            this text\n"
    "\n"
    "exit status: 0 ok, 1 bad input (missing database, unknown run), 2 bad usage\n";

#define LIST_LIMIT 20             /* --limit's default */
#define LIST_MAX_LIMIT 1000000000
#define KEY_MIN_LEN 8             /* the uid characters a listed id shows at least */
#define KEY_LOOKUP_ROWS 16        /* up to this many rows, list_keys asks db show's lookup per row */
#define INT64_DIGITS 19           /* the digits of the largest int64: an id db show reads as a number */
#define HUMAN_BYTES_MAX 32        /* room for human_bytes' text */
#define DB_PATH_MAX 4096          /* room for a database path and a suffix */
#define TMP_SUFFIX_ROOM 16        /* room left for the -wal, -shm, -journal files beside a path */

typedef struct opts {
    const char *db, *tag, *format, *output;
    int limit, have_limit, ops;
    int npos;
    char **pos;
} opts;

enum { O_DB = 1000, O_TAG, O_LIMIT, O_FORMAT, O_OPS, O_HELP };

static const struct option long_opts[] = {
    {"db", required_argument, 0, O_DB},
    {"tag", required_argument, 0, O_TAG},
    {"limit", required_argument, 0, O_LIMIT},
    {"format", required_argument, 0, O_FORMAT},
    {"output", required_argument, 0, 'o'},
    {"ops", no_argument, 0, O_OPS},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* Parses the options of `pipelab db ...` (argv[0] = "db"); positional arguments (the subcommand
 * first) land in o->pos. Returns -1 to continue, or an exit code to return at once. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->limit = LIST_LIMIT;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", long_opts, NULL)) != -1) {
        switch (c) {
        case O_DB: o->db = optarg; break;
        case O_TAG: o->tag = optarg; break;
        case O_LIMIT:
            if (cli_int_arg("db", "--limit", optarg, 0, LIST_MAX_LIMIT, &o->limit) != 0) return CLI_EUSAGE;
            o->have_limit = 1;
            break;
        case O_FORMAT: o->format = optarg; break;
        case 'o': o->output = optarg; break;
        case O_OPS: o->ops = 1; break;
        case 'h': fputs(help_text, stdout); return CLI_OK;
        case ':': return cli_usage_error("db", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("db", "unknown option '%s'", argv[optind - 1]);
        }
    }
    o->pos = argv + optind;
    o->npos = argc - optind;
    return cli_db_flags("db", o->db, 0, NULL, 0);
}

/* Returns s, or "-" when it is empty, for table cells. */
static const char *or_dash(const char *s) { return s && *s ? s : "-"; }

/* Returns the malloc'd id `db list` shows for a run with this uid whose first flen characters
 * are needed to name it (NULL when out of memory): a prediction stored by `pipelab run` (uid
 * STORE_PREDICTION_PREFIX + the measured run's uid) shows as CLI_PREDICTION_MARK + the part
 * after the prefix, so it sits beside its measured run instead of reading "predicti". */
static char *format_key(const char *uid, size_t flen) {
    size_t pl = strlen(STORE_PREDICTION_PREFIX);
    int pred = strncmp(uid, STORE_PREDICTION_PREFIX, pl) == 0 && uid[pl] && flen > pl;
    size_t n = strlen(CLI_PREDICTION_MARK) + flen + 1;
    char *key = malloc(n);
    if (key) snprintf(key, n, "%s%.*s", pred ? CLI_PREDICTION_MARK : "", (int)(pred ? flen - pl : flen), pred ? uid + pl : uid);
    return key;
}

/* The shortest key length `db list` starts from: 8 characters of the uid (after the prediction
 * prefix for a prediction). */
static size_t min_key_len(const char *uid) {
    size_t pl = strlen(STORE_PREDICTION_PREFIX), len = strlen(uid);
    size_t want = (strncmp(uid, STORE_PREDICTION_PREFIX, pl) == 0 && uid[pl] ? pl : 0) + KEY_MIN_LEN;
    return want < len ? want : len;
}

/* Returns the number of leading characters a and b share. */
static size_t common_prefix(const char *a, const char *b) {
    size_t k = 0;
    while (a[k] && a[k] == b[k]) k++;
    return k;
}

/* Orders uid pointers by strcmp, for qsort and bsearch. */
static int cmp_uid(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Fills keys[i] (malloc'd; NULL when out of memory) with the id `db list` shows for runs[i]: the
 * uid's first 8 characters, or more until `db show` finds that run by it alone (no other uid
 * starts with it, and it is not all digits, which db show reads as an integer id first). A few
 * rows ask db show's own lookup; more rows compare with every uid of the database at once (one
 * read instead of one table scan per row). Returns PL_OK or an error code. */
static int list_keys(store *s, const store_run *runs, size_t n, char **keys, pl_err *e) {
    if (n <= KEY_LOOKUP_ROWS) {
        for (size_t i = 0; i < n; i++) {
            const char *uid = runs[i].uid;
            size_t len = min_key_len(uid), full = strlen(uid);
            for (;; len++) {
                keys[i] = format_key(uid, len);
                if (!keys[i] || len >= full) break;
                char lookup[CLI_RUN_KEY_MAX];
                store_run got;
                pl_err ignored;
                int found = store_get_run(s, cli_run_key(keys[i], lookup, sizeof lookup), &got, &ignored) == PL_OK &&
                            got.id == runs[i].id;
                store_run_clear(&got);
                if (found) break;
                free(keys[i]);
            }
        }
        return PL_OK;
    }
    store_run *all = NULL;
    size_t na = 0;
    int code = store_list_runs(s, NULL, 0, &all, &na, e);
    const char **uids = code == PL_OK ? pl_calloc(na ? na : 1, sizeof *uids) : NULL;
    if (code == PL_OK && !uids) code = pl_errf(e, PL_ENOMEM, "out of memory");
    if (code == PL_OK) {
        for (size_t j = 0; j < na; j++) uids[j] = all[j].uid;
        qsort(uids, na, sizeof *uids, cmp_uid);
        for (size_t i = 0; i < n; i++) {
            const char *uid = runs[i].uid, **at = bsearch(&uid, uids, na, sizeof *uids, cmp_uid);
            size_t len = min_key_len(uid), full = strlen(uid), need = 0;
            if (at && at > uids) need = common_prefix(uid, at[-1]) + 1;
            if (at && at + 1 < uids + na && common_prefix(uid, at[1]) + 1 > need) need = common_prefix(uid, at[1]) + 1;
            if (need > len) len = need;
            while (len < full && len < INT64_DIGITS && len > 0 && strspn(uid, "0123456789") >= len) len++;
            keys[i] = format_key(uid, len < full ? len : full);
        }
    }
    free(uids);
    store_runs_free(all, na);
    return code;
}

/* Returns -1 when fmt is table, csv or json, else CLI_EUSAGE after printing that it is not. */
static int check_format(const char *fmt) {
    if (strcmp(fmt, "table") != 0 && strcmp(fmt, "csv") != 0 && strcmp(fmt, "json") != 0)
        return cli_usage_error("db", "--format must be table, csv or json (got '%s')", fmt);
    return -1;
}

/* Frees the n keys of list_keys and their array. */
static void free_keys(char **keys, size_t n) {
    for (size_t i = 0; keys && i < n; i++) free(keys[i]);
    free(keys);
}

/* Appends the table of `db list`: one line per run, the id keys[i] (NULL: the uid) shows. */
static void list_table(const store_run *runs, size_t n, char *const *keys, pl_buf *b) {
    char mem[HUMAN_BYTES_MAX];
    pl_buf_printf(b, "%5s  %-10s  %-20s  %-9s  %-14s  %-12s  %3s %3s %4s %2s  %12s  %12s  %8s  %10s\n", "ID", "UID",
                  "TIME (UTC)", "KIND", "TAG", "SCHEDULE", "P", "S", "M", "V", "ITER (s)", "SAMPLES/s", "BUBBLE %",
                  "PEAK MEM");
    for (size_t i = 0; i < n; i++) {
        const store_run *r = &runs[i];
        const char *key = keys[i];
        pl_buf_printf(b, "%5lld  %-10s  %-20s  %-9s  %-14s  %-12s  %3d %3d %4d %2d  %12.6g  %12.6g  %7.2f%%  %10s%s\n",
                      (long long)r->id, key ? key : r->uid, r->utc_time, r->kind, or_dash(r->tag), or_dash(r->schedule),
                      r->ranks, r->stages, r->microbatches, r->chunks, r->iteration_time_s, r->throughput_samples_s,
                      100.0 * r->bubble_fraction, pl_human_bytes((double)r->peak_mem_bytes, mem, sizeof mem), r->oom ? " OOM" : "");
    }
    if (n == 0) pl_buf_puts(b, "(no runs)\n");
}

/* Appends the CSV of `db list`: a header, then one row per run. */
static void list_csv(const store_run *runs, size_t n, pl_buf *b) {
    pl_buf_puts(b, "id,uid,utc_time,kind,tag,schedule,ranks,stages,microbatches,chunks,iteration_time_s,"
                   "throughput_samples_s,bubble_fraction,zb_bubble_rate,peak_mem_bytes,oom\n");
    for (size_t i = 0; i < n; i++) {
        const store_run *r = &runs[i];
        pl_buf_printf(b, "%lld,", (long long)r->id);
        const char *text[] = {r->uid, r->utc_time, r->kind}; /* a uid holds the tag, which may hold a comma */
        for (size_t k = 0; k < sizeof text / sizeof text[0]; k++) {
            pl_buf_csv_field(b, text[k]);
            pl_buf_putc(b, ',');
        }
        pl_buf_csv_field(b, r->tag);
        pl_buf_putc(b, ',');
        pl_buf_csv_field(b, r->schedule);
        pl_buf_printf(b, ",%d,%d,%d,%d,%.15g,%.15g,%.15g,", r->ranks, r->stages, r->microbatches, r->chunks,
                      r->iteration_time_s, r->throughput_samples_s, r->bubble_fraction);
        pl_buf_number(b, r->zb_bubble_rate, 0);
        pl_buf_printf(b, ",%lld,%d\n", (long long)r->peak_mem_bytes, r->oom);
    }
}

/* Appends the JSON of `db list`: an array of one object per run. */
static void list_json(const store_run *runs, size_t n, pl_buf *b) {
    pl_buf_puts(b, "[");
    for (size_t i = 0; i < n; i++) {
        const store_run *r = &runs[i];
        pl_buf_printf(b, "%s\n  {\"id\": %lld, \"uid\": ", i ? "," : "", (long long)r->id);
        pl_buf_json_string(b, r->uid);
        pl_buf_puts(b, ", \"utc_time\": ");
        pl_buf_json_string(b, r->utc_time);
        pl_buf_puts(b, ", \"kind\": ");
        pl_buf_json_string(b, r->kind);
        pl_buf_puts(b, ", \"tag\": ");
        pl_buf_json_string(b, r->tag);
        pl_buf_puts(b, ", \"schedule\": ");
        pl_buf_json_string(b, r->schedule);
        pl_buf_printf(b, ", \"ranks\": %d, \"stages\": %d, \"microbatches\": %d, \"chunks\": %d", r->ranks, r->stages,
                      r->microbatches, r->chunks);
        const struct { const char *key; double v; } num[] = {{"iteration_time_s", r->iteration_time_s},
                                                             {"throughput_samples_s", r->throughput_samples_s},
                                                             {"bubble_fraction", r->bubble_fraction},
                                                             {"zb_bubble_rate", r->zb_bubble_rate}};
        for (size_t k = 0; k < sizeof num / sizeof num[0]; k++) {
            pl_buf_printf(b, ", \"%s\": ", num[k].key);
            pl_buf_number(b, num[k].v, 1); /* null where the file holds none (or not a number) */
        }
        pl_buf_printf(b, ", \"peak_mem_bytes\": %lld, \"oom\": %s}", (long long)r->peak_mem_bytes, r->oom ? "true" : "false");
    }
    pl_buf_puts(b, n ? "\n]\n" : "]\n");
}

/* Appends the runs in format fmt to b (the table with the ids list_keys gives). Returns PL_OK or
 * an error in e. */
static int list_runs(store *s, const store_run *runs, size_t n, const char *fmt, pl_buf *b, pl_err *e) {
    if (strcmp(fmt, "csv") == 0) list_csv(runs, n, b);
    else if (strcmp(fmt, "json") == 0) list_json(runs, n, b);
    else if (n == 0) list_table(runs, n, NULL, b);
    if (strcmp(fmt, "table") != 0 || n == 0) return PL_OK;
    char **keys = pl_calloc(n, sizeof *keys);
    int code = keys ? list_keys(s, runs, n, keys, e) : pl_errf(e, PL_ENOMEM, "out of memory");
    if (code == PL_OK) list_table(runs, n, keys, b);
    free_keys(keys, n);
    return code;
}

/* `db list`: prints recent runs; returns an exit code. */
static int db_list(const opts *o) {
    const char *fmt = o->format ? o->format : "table";
    int rc = check_format(fmt);
    if (rc >= 0) return rc;
    if (o->npos > 0) return cli_usage_error("db", "list takes no arguments (got '%s')", o->pos[0]);
    pl_err e;
    pl_err_clear(&e);
    store *s = NULL;
    if (store_open(o->db, 1, &s, &e) != PL_OK) return cli_fail(&e);
    store_run *runs = NULL;
    size_t n = 0;
    pl_buf b;
    pl_buf_init(&b);
    int code = store_list_runs(s, o->tag, o->limit, &runs, &n, &e);
    if (code == PL_OK) code = list_runs(s, runs, n, fmt, &b, &e);
    store_runs_free(runs, n);
    store_close(s);
    rc = code == PL_OK ? cli_write_output(NULL, &b) : cli_fail(&e);
    pl_buf_free(&b);
    return rc;
}

/* Appends the description of run r (nops actions recorded) that `db show` prints first. */
static void show_run(const store_run *r, int64_t nops, pl_buf *b) {
    char mem[HUMAN_BYTES_MAX];
    pl_buf_printf(b, "run %lld  uid %s\n", (long long)r->id, r->uid);
    pl_buf_printf(b, "  kind            %s\n  tag             %s\n  origin          %s\n", r->kind, r->tag, r->origin);
    pl_buf_printf(b, "  time (UTC)      %s\n  host            %s\n  pipelab         %s (%s)\n", r->utc_time, r->host,
                  r->version, r->git_rev);
    pl_buf_printf(b, "  command         %s\n", or_dash(r->cmdline));
    pl_buf_printf(b, "  schedule        %s  ranks %d  stages %d  microbatches %d  chunks %d  iterations %d\n",
                  r->schedule, r->ranks, r->stages, r->microbatches, r->chunks, r->iterations);
    pl_buf_printf(b, "  policies        weights %s  recompute %s\n", or_dash(r->weights_policy),
                  or_dash(r->recompute_policy));
    pl_buf_printf(b, "  seed            %" PRIu64 "\n  parameters      %s\n", r->seed, or_dash(r->params_json));
    pl_buf_printf(b, "  iteration time  %.6g s", r->iteration_time_s);
    if (r->repetitions > 1) pl_buf_printf(b, "  (stddev %.3g s over %d repetitions)", r->iteration_time_stddev_s, r->repetitions);
    pl_buf_printf(b, "\n  throughput      %.6g samples/s\n  bubble_fraction %.6g  (%.2f%%; idle_s %.6g s over the ranks)\n",
                  r->throughput_samples_s, r->bubble_fraction, 100.0 * r->bubble_fraction, r->idle_s);
    if (isnan(r->zb_bubble_rate)) pl_buf_puts(b, "  zb_bubble_rate  n/a (not recorded)\n");
    else pl_buf_printf(b, "  zb_bubble_rate  %.6g  (Zero Bubble paper's bubble rate)\n", r->zb_bubble_rate);
    pl_buf_printf(b, "  communication   %.6g s\n  peak memory     %s (%lld bytes)%s\n  ops recorded    %lld\n",
                  r->comm_time_s, pl_human_bytes((double)r->peak_mem_bytes, mem, sizeof mem),
                  (long long)r->peak_mem_bytes,
                  r->oom ? "  OUT OF MEMORY" : "", (long long)nops);
}

/* Appends the rank metrics m[nm] and the actions ops[nop] of `db show` (each table only when it
 * has rows). */
static void show_rows(const store_rank_metric *m, int nm, const store_op *ops, size_t nop, pl_buf *b) {
    char mem[HUMAN_BYTES_MAX];
    if (nm > 0) {
        pl_buf_printf(b, "\n%5s  %12s  %12s  %12s  %12s  %12s\n", "RANK", "BUSY (s)", "IDLE (s)", "BUBBLE FRAC",
                      "COMM (s)", "PEAK MEM");
        for (int i = 0; i < nm; i++)
            pl_buf_printf(b, "%5d  %12.6g  %12.6g  %12.6g  %12.6g  %12s\n", m[i].rank, m[i].busy_s, m[i].idle_s,
                          m[i].bubble_fraction, m[i].comm_s, pl_human_bytes((double)m[i].peak_mem_bytes, mem, sizeof mem));
    }
    if (nop > 0) {
        pl_buf_printf(b, "\n%5s  %6s  %-12s  %-8s  %5s  %5s  %12s  %12s\n", "RANK", "SEQ", "ACTION", "KIND", "STAGE",
                      "MB", "START (s)", "END (s)");
        for (size_t i = 0; i < nop; i++)
            pl_buf_printf(b, "%5d  %6d  %-12s  %-8s  %5d  %5d  %12.6g  %12.6g\n", ops[i].rank, ops[i].seq,
                          ops[i].action, ops[i].kind, ops[i].stage, ops[i].mb, ops[i].start_s, ops[i].end_s);
    }
}

/* Appends `db show`'s table of run r to b: the run, its rank metrics and (with ops) its actions.
 * Returns PL_OK or an error in e. */
static int show_table(store *s, const store_run *r, int ops, pl_buf *b, pl_err *e) {
    store_rank_metric *m = NULL;
    int nm = 0;
    int64_t nops = 0;
    store_op *op = NULL;
    size_t nop = 0;
    int code = store_get_rank_metrics(s, r->id, &m, &nm, e);
    if (code == PL_OK) code = store_count_ops(s, r->id, &nops, e);
    if (code == PL_OK && ops) code = store_get_ops(s, r->id, &op, &nop, e);
    if (code == PL_OK) {
        show_run(r, nops, b);
        show_rows(m, nm, op, nop, b);
    }
    store_ops_free(op, nop);
    free(m);
    return code;
}

/* `db show RUN`: prints one run, its rank metrics and (with --ops) its actions; returns an exit code. */
static int db_show(const opts *o) {
    if (o->npos != 1) return cli_usage_error("db", "show needs exactly one RUN (integer id or uid)");
    const char *fmt = o->format ? o->format : "table";
    int rc = check_format(fmt);
    if (rc >= 0) return rc;
    if (o->ops && strcmp(fmt, "table") != 0) return cli_usage_error("db", "--ops prints a table only");
    pl_err e;
    pl_err_clear(&e);
    store *s = NULL;
    if (store_open(o->db, 1, &s, &e) != PL_OK) return cli_fail(&e);
    store_run r;
    char key[CLI_RUN_KEY_MAX]; /* "p:X", as db list shows a prediction */
    if (store_get_run(s, cli_run_key(o->pos[0], key, sizeof key), &r, &e) != PL_OK) {
        store_close(s);
        return cli_fail(&e);
    }
    pl_buf b;
    pl_buf_init(&b);
    int code = strcmp(fmt, "table") == 0 ? show_table(s, &r, o->ops, &b, &e)
                                         : store_export_run(s, &r, strcmp(fmt, "json") == 0 ? STORE_JSON : STORE_CSV, &b, &e);
    store_run_clear(&r);
    store_close(s);
    rc = code == PL_OK ? cli_write_output(NULL, &b) : cli_fail(&e);
    pl_buf_free(&b);
    return rc;
}

/* `db export`: writes runs as CSV or JSON; returns an exit code. */
static int db_export(const opts *o) {
    if (!o->format) return cli_usage_error("db", "export needs --format csv|json");
    store_format f;
    if (strcmp(o->format, "csv") == 0) f = STORE_CSV;
    else if (strcmp(o->format, "json") == 0) f = STORE_JSON;
    else return cli_usage_error("db", "export --format must be csv or json (got '%s')", o->format);
    if (o->npos > 0) return cli_usage_error("db", "export takes no arguments (got '%s')", o->pos[0]);
    pl_err e;
    pl_err_clear(&e);
    if (store_check_output(o->db, "-o", o->output, &e) != PL_OK) return cli_usage_error("db", "%s", e.msg);
    store *s = NULL;
    if (store_open(o->db, 1, &s, &e) != PL_OK) return cli_fail(&e);
    pl_buf b;
    pl_buf_init(&b);
    int code = store_export(s, o->tag, f, &b, &e);
    store_close(s);
    int rc = code == PL_OK ? cli_write_output(o->output, &b) : cli_fail(&e);
    pl_buf_free(&b);
    return rc;
}

/* `db trace RUN [-o FILE]`: the run's ops as a Chrome trace; returns an exit code. */
static int db_trace(const opts *o) {
    if (o->npos != 1) return cli_usage_error("db", "trace needs exactly one RUN (integer id or uid)");
    if (o->format) return cli_usage_error("db", "trace writes a Chrome trace (JSON): no --format");
    pl_err e;
    pl_err_clear(&e);
    if (store_check_output(o->db, "-o", o->output, &e) != PL_OK) return cli_usage_error("db", "%s", e.msg);
    store *s = NULL;
    if (store_open(o->db, 1, &s, &e) != PL_OK) return cli_fail(&e);
    store_run r;
    char key[CLI_RUN_KEY_MAX];
    if (store_get_run(s, cli_run_key(o->pos[0], key, sizeof key), &r, &e) != PL_OK) {
        store_close(s);
        return cli_fail(&e);
    }
    store_op *ops = NULL;
    size_t n = 0;
    pl_buf b;
    pl_buf_init(&b);
    int code = store_get_ops(s, r.id, &ops, &n, &e);
    if (code == PL_OK) code = store_ops_chrome(&r, ops, n, &b, &e);
    store_ops_free(ops, n);
    store_run_clear(&r);
    store_close(s);
    int rc = code == PL_OK ? cli_write_output(o->output, &b) : cli_fail(&e);
    pl_buf_free(&b);
    return rc;
}

/* The files SQLite keeps beside a database, and the database itself (""). */
static const char *const db_file_sfx[] = {"", "-wal", "-shm", "-journal"};
#define DB_FILES (sizeof db_file_sfx / sizeof db_file_sfx[0])

/* Removes the temporary database path and the files SQLite keeps beside it. */
static void remove_db_files(const char *path) {
    char buf[DB_PATH_MAX];
    for (size_t k = 0; k < DB_FILES; k++) {
        snprintf(buf, sizeof buf, "%s%s", path, db_file_sfx[k]);
        unlink(buf);
    }
}

/* A merge's temporary files, which a SIGINT, SIGTERM or SIGHUP removes before the process ends
 * as the signal would end it (unlink is async-signal-safe); set while merge_armed. */
static char merge_tmp[DB_FILES][DB_PATH_MAX];
static volatile sig_atomic_t merge_armed;
static const int merge_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define MERGE_SIGNALS (sizeof merge_signals / sizeof merge_signals[0])

static void merge_on_signal(int sig) {
    if (merge_armed)
        for (size_t k = 0; k < DB_FILES; k++) unlink(merge_tmp[k]);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Arms (saving the handlers in old) or disarms (restoring them) the removal of tmp's files on
 * the signals; a signal the process was started ignoring (a background job's SIGINT) stays
 * ignored. */
static void merge_guard(const char *tmp, struct sigaction *old, int arm) {
    if (arm) {
        for (size_t k = 0; k < DB_FILES; k++) snprintf(merge_tmp[k], sizeof merge_tmp[k], "%s%s", tmp, db_file_sfx[k]);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = merge_on_signal;
        sigemptyset(&sa.sa_mask);
        merge_armed = 1;
        for (size_t k = 0; k < MERGE_SIGNALS; k++)
            if (sigaction(merge_signals[k], &sa, &old[k]) == 0 && old[k].sa_handler == SIG_IGN)
                sigaction(merge_signals[k], &old[k], NULL);
    } else {
        for (size_t k = 0; k < MERGE_SIGNALS; k++) sigaction(merge_signals[k], &old[k], NULL);
        merge_armed = 0;
    }
}

static int merge_into(const opts *o, const char *tmp);

/* `db merge A.db ... -o OUT.db`: copies every run of the inputs into OUT.db once (by uid), all or
 * nothing. The inputs are merged first into a fresh temporary database beside OUT (one
 * transaction per input); then that file becomes OUT when there was none, or is merged into an
 * existing OUT in ONE transaction. So a failed merge leaves no new file behind and an existing
 * OUT as it was (a bad third input does not leave the first two merged); an interrupted one
 * (SIGINT, SIGTERM, SIGHUP) removes its temporary files too. Returns an exit code. */
static int db_merge(const opts *o) {
    if (!o->output) return cli_usage_error("db", "merge needs -o OUT.db");
    if (o->npos < 1) return cli_usage_error("db", "merge needs at least one database to read");
    if (o->db) return cli_usage_error("db", "merge reads its inputs as arguments; --db does not apply");
    pl_err e;
    pl_err_clear(&e);
    char tmp[DB_PATH_MAX];
    struct stat st;
    int n = snprintf(tmp, sizeof tmp, "%s.merge-%ld", o->output, (long)getpid());
    for (int k = 1; n > 0 && (size_t)n < sizeof tmp - TMP_SUFFIX_ROOM && lstat(tmp, &st) == 0; k++)
        n = snprintf(tmp, sizeof tmp, "%s.merge-%ld-%d", o->output, (long)getpid(), k);
    if (n < 0 || (size_t)n >= sizeof tmp - TMP_SUFFIX_ROOM) {
        pl_errf(&e, PL_EINPUT, "%s: path too long", o->output);
        return cli_fail(&e);
    }
    struct sigaction old[MERGE_SIGNALS];
    merge_guard(tmp, old, 1);
    int rc = merge_into(o, tmp);
    merge_guard(tmp, old, 0);
    return rc;
}

/* db_merge's work with its temporary database path tmp. Returns an exit code. */
static int merge_into(const opts *o, const char *tmp) {
    pl_err e;
    pl_err_clear(&e);
    struct stat st;
    store *t = NULL;
    if (store_open(tmp, 0, &t, &e) != PL_OK) {
        remove_db_files(tmp);
        char why[sizeof e.msg];
        snprintf(why, sizeof why, "%s", e.msg);
        pl_errf(&e, e.code, "%s: cannot create a temporary database beside it: %s", o->output, why);
        return cli_fail(&e);
    }
    int total = 0;
    for (int i = 0; i < o->npos; i++) {
        int added = 0, skipped = 0;
        if (store_merge(t, o->pos[i], &added, &skipped, &e) != PL_OK) {
            store_close(t);
            remove_db_files(tmp);
            return cli_fail(&e);
        }
        total += added;
        fprintf(stderr, "pipelab: %s: %d run%s, %d already present in the inputs before it\n", o->pos[i], added,
                added == 1 ? "" : "s", skipped);
    }
    store_close(t);
    /* a new OUT: the temporary file becomes it (a hard link, so an OUT created meanwhile is not
     * replaced but merged into) */
    if (lstat(o->output, &st) != 0 && errno == ENOENT) {
        if (link(tmp, o->output) == 0 || (errno != EEXIST && rename(tmp, o->output) == 0)) {
            remove_db_files(tmp);
            printf("%s: %d run%s added\n", o->output, total, total == 1 ? "" : "s");
            return CLI_OK;
        }
        if (errno != EEXIST) {
            pl_errf(&e, PL_EIO, "%s: cannot create it: %s", o->output, strerror(errno));
            remove_db_files(tmp);
            return cli_fail(&e);
        }
    }
    /* an existing OUT: everything in one transaction */
    store *dst = NULL;
    int added = 0, skipped = 0;
    int code = store_open(o->output, 0, &dst, &e);
    if (code == PL_OK) code = store_merge(dst, tmp, &added, &skipped, &e);
    store_close(dst);
    remove_db_files(tmp);
    if (code != PL_OK) return cli_fail(&e);
    fprintf(stderr, "pipelab: %s: %d run%s added, %d already present\n", o->output, added, added == 1 ? "" : "s", skipped);
    printf("%s: %d run%s added\n", o->output, added, added == 1 ? "" : "s");
    return CLI_OK;
}

/* Entry point of `pipelab db` (argv[0] = "db"); returns the exit code of the subcommand. */
int cli_db(int argc, char **argv) {
    if (argc < 2) {
        fputs(help_text, stderr);
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "help") == 0) {
        fputs(help_text, stdout);
        return CLI_OK;
    }
    /* Options may come before or after the subcommand: the first argument left is the subcommand. */
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (o.npos < 1) return cli_usage_error("db", "missing subcommand (list, show, export, trace, merge)");
    const char *sub = o.pos[0];
    o.pos++;
    o.npos--;
    if (o.output && (strcmp(sub, "list") == 0 || strcmp(sub, "show") == 0))
        return cli_usage_error("db", "-o applies to export, trace and merge: %s prints to the terminal (redirect it to "
                               "keep it)", sub);
    if (o.ops && strcmp(sub, "list") == 0) return cli_usage_error("db", "--ops applies to show only");
    if (strcmp(sub, "list") == 0) return db_list(&o);
    if (o.have_limit) return cli_usage_error("db", "--limit applies to list only");
    if (o.ops && strcmp(sub, "show") != 0) return cli_usage_error("db", "--ops applies to show only");
    if (strcmp(sub, "show") == 0) return db_show(&o);
    if (strcmp(sub, "export") == 0) return db_export(&o);
    if (strcmp(sub, "merge") == 0) return db_merge(&o);
    if (strcmp(sub, "trace") == 0) return db_trace(&o);
    return cli_usage_error("db", "unknown subcommand '%s' (list, show, export, trace, merge)", sub);
}
