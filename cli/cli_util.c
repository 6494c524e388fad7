/* cli_util.c: error printing, flag parsing and output helpers shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/magic.h>
#include <sys/vfs.h>
#endif

#include "cost.h"
#include "sim.h"
#include "store.h"

/* cli.h. Returns CLI_EUSER after printing e's message. */
int cli_fail(const pl_err *e) {
    fprintf(stderr, "pipelab: %s\n", e->msg[0] ? e->msg : "unknown error");
    return CLI_EUSER;
}

/* The environment variables an MPI launcher gives each process of a job before MPI starts: its
 * rank, the job's processes and those on its host (Open MPI's; MPICH's Hydra's; PMIx's names
 * the rank alone). NULL: that launcher does not say. */
static const struct { const char *rank, *size, *local; } launcher_vars[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMIX_RANK", NULL, NULL},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"},
};

/* Returns the whole number >= lo in the environment variable name, or -1 when name is NULL,
 * unset or not such a number. */
static int env_count(const char *name, long lo) {
    long v;
    const char *s = name ? getenv(name) : NULL;
    return s && pl_parse_long(s, lo, INT_MAX, &v) == 0 ? (int)v : -1;
}

/* cli.h. Returns the first launcher's view that names a rank, else all -1. */
cli_launch cli_launcher(void) {
    cli_launch l = {-1, -1, -1};
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0] && l.rank < 0; i++) {
        l.rank = env_count(launcher_vars[i].rank, 0);
        l.size = l.rank < 0 ? -1 : env_count(launcher_vars[i].size, 1);
        l.local = l.rank < 0 ? -1 : env_count(launcher_vars[i].local, 1);
    }
    return l;
}

/* The longest a process above rank 0 waits before it ends on an error rank 0 prints for the
 * whole job (cli_fail_alike, cli_usage_error). The launcher ends the job when its first process
 * fails: one above rank 0 failing at once could have rank 0 killed before it printed, and the
 * job's refusal went unprinted (seen under load). Waiting, it is ended by the launcher when rank
 * 0 fails, and the job's status is rank 0's. */
#define CLI_ALIKE_WAIT_S 5

/* Waits CLI_ALIKE_WAIT_S seconds (a process that leaves rank 0 to print an error). */
static void alike_wait(void) {
    struct timespec ts = {CLI_ALIKE_WAIT_S, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* cli.h. Returns CLI_EUSER, after printing e's message unless another process prints it. */
int cli_fail_alike(const pl_err *e) {
    cli_launch l = cli_launcher();
    /* one host: the same files, memory and cores (unknown sizes: maybe several hosts) */
    if (l.rank > 0 && l.size > 0 && l.local == l.size) {
        alike_wait();
        return CLI_EUSER;
    }
    return cli_fail(e);
}

/* cli.h. Returns CLI_EUSAGE after printing the message and where help is (an MPI job's rank 0
 * alone: every process has the same arguments). */
int cli_usage_error(const char *cmd, const char *fmt, ...) {
    if (cli_launcher().rank > 0) {
        alike_wait();
        return CLI_EUSAGE;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pipelab %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'pipelab %s --help')\n", cmd);
    return CLI_EUSAGE;
}

/* Returns 1 when val is a number in strtod's syntax that pl_parse_double refuses for being
 * too close to 0 (strtod's underflow: ERANGE with a result below DBL_MIN in size), else 0. */
static int underflows(const char *val) {
    if (!val || !*val) return 0;
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    return errno == ERANGE && !*end && end != val && fabs(v) < DBL_MIN;
}

/* cli.h. Returns 0 with *out set, or -1 after printing what is wrong with val. */
int cli_num_arg(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out) {
    double v;
    if (pl_parse_double(val, &v) != 0) {
        if (underflows(val))
            cli_usage_error(cmd, "%s: too close to 0 (below %.2g, the smallest normal double): give 0 or a larger value "
                            "(got '%s')", flag, DBL_MIN, val);
        else cli_usage_error(cmd, "%s: needs a finite number (got '%s')", flag, val ? val : "");
        return -1;
    }
    if (v < lo) {
        if (lo == 0) cli_usage_error(cmd, "%s: must not be negative (got '%s')", flag, val);
        else cli_usage_error(cmd, "%s: must be at least %g (got '%s')", flag, lo, val);
        return -1;
    }
    if (v > hi) {
        cli_usage_error(cmd, "%s: must be at most %g (got '%s')", flag, hi, val);
        return -1;
    }
    *out = v;
    return 0;
}

/* cli.h. Returns 0 with *out set, or -1 after printing what is wrong with val. */
int cli_long_arg(const char *cmd, const char *flag, const char *val, long lo, long hi, long *out) {
    if (pl_parse_long(val, lo, hi, out) != 0) {
        cli_usage_error(cmd, "%s: needs a whole number between %ld and %ld (got '%s')", flag, lo, hi, val ? val : "");
        return -1;
    }
    return 0;
}

/* cli.h. Returns 0 with *out set, or -1 after printing what is wrong with val. */
int cli_int_arg(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out) {
    long v;
    if (cli_long_arg(cmd, flag, val, lo, hi, &v) != 0) return -1;
    *out = (int)v;
    return 0;
}

/* cli.h. Returns 0, or -1 after printing what is wrong with val. */
int cli_set_arg(const char *cmd, const char *val) {
    const char *eq = val ? strchr(val, '=') : NULL;
    if (eq && eq != val) return 0;
    cli_usage_error(cmd, "--set needs KEY=VALUE (got '%s')", val ? val : "");
    return -1;
}

/* The longest S of a --replicas-stage S=N value read (a longer one is refused). */
#define REPL_STAGE_TEXT_MAX 32

/* cli.h. Returns 0, or -1 after printing what is wrong with val. */
int cli_replicas_stage_arg(const char *cmd, const char *val, int *stages, int *ns, int count) {
    const char *eq = strchr(val, '=');
    long st, cnt;
    char stage_text[REPL_STAGE_TEXT_MAX];
    if (!eq || (size_t)(eq - val) >= sizeof stage_text) {
        cli_usage_error(cmd, "--replicas-stage: needs S=N (got '%s')", val);
        return -1;
    }
    memcpy(stage_text, val, (size_t)(eq - val));
    stage_text[eq - val] = '\0';
    if (pl_parse_long(stage_text, 0, SCHED_MAX_STAGES, &st) || pl_parse_long(eq + 1, 1, CLI_MAX_REPLICAS, &cnt)) {
        cli_usage_error(cmd, "--replicas-stage: needs S=N with S >= 0 and N >= 1 (got '%s')", val);
        return -1;
    }
    for (int i = 0; i < count; i++)
        if (stages[i] == (int)st) {
            cli_usage_error(cmd, "--replicas-stage %s: stage %ld is given twice (first %d=%d)", val, st, stages[i], ns[i]);
            return -1;
        }
    stages[count] = (int)st;
    ns[count] = (int)cnt;
    return 0;
}

/* cli.h. Returns 0 once the size is noted, or -1 after printing what is wrong with val. */
int cli_max_memory_arg(const char *cmd, const char *val, cli_sched_args *a) {
    uint64_t v = 0;
    if (sched_parse_bytes(val, &v) != 0 || v == 0) {
        cli_usage_error(cmd, "--max-memory: needs a size in bytes such as 8e9 or 16GiB (got '%s')", val);
        return -1;
    }
    a->max_memory = v;
    return 0;
}

/* cli.h. Returns the store key of a RUN argument: buf for "p:X", else arg. */
const char *cli_run_key(const char *arg, char *buf, size_t n) {
    size_t m = strlen(CLI_PREDICTION_MARK);
    if (!arg || strncmp(arg, CLI_PREDICTION_MARK, m) != 0) return arg;
    int len = snprintf(buf, n, "%s%s", STORE_PREDICTION_PREFIX, arg + m);
    return len >= 0 && (size_t)len < n ? buf : arg;
}

/* cli.h. Returns isatty's answer for fd. */
int cli_isatty(int fd) { return isatty(fd); }

/* cli.h. Returns PL_OK with room for n rows, or PL_ENOMEM with o holding none. */
int cli_op_rows_alloc(cli_op_rows *o, size_t n, pl_err *e) {
    size_t room = n ? n : 1;
    memset(o, 0, sizeof *o);
    o->ops = pl_calloc(room, sizeof *o->ops);
    o->names = pl_calloc(room, CLI_ACTION_TEXT_MAX);
    if (!o->ops || !o->names) {
        cli_op_rows_free(o);
        return pl_errf(e, PL_ENOMEM, "out of memory for %zu op rows", n);
    }
    o->n = n;
    return PL_OK;
}

/* cli.h. Fills row k; its action text goes to the row's own slot of names. */
void cli_op_rows_set(cli_op_rows *o, size_t k, int rank, int seq, const sched_action *a, double start_s, double end_s) {
    char *name = o->names + k * CLI_ACTION_TEXT_MAX;
    sched_action_format(a, name, CLI_ACTION_TEXT_MAX);
    o->ops[k] = (store_op){rank, seq, name, sched_kind_name((sched_kind)a->kind), a->stage, a->mb, start_s, end_s};
}

/* cli.h. Returns PL_OK with one row per action of s, or PL_ENOMEM. */
int cli_op_rows_trace(cli_op_rows *o, const sched *s, sim_slot *const *trace, pl_err *e) {
    int rc = cli_op_rows_alloc(o, sched_total_actions(s), e);
    if (rc != PL_OK) return rc;
    size_t k = 0;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++, k++)
            cli_op_rows_set(o, k, q, (int)i, &s->rank[q].acts[i], trace[q][i].start_s, trace[q][i].end_s);
    return PL_OK;
}

/* cli.h. Frees the rows; o holds none after. */
void cli_op_rows_free(cli_op_rows *o) {
    free(o->ops);
    free(o->names);
    memset(o, 0, sizeof *o);
}

/* cli.h. Fills the schedule's fields of run; the others are the caller's. */
void cli_store_run_sched(store_run *run, const sched *s) {
    run->schedule = s->kind;
    run->ranks = s->ranks;
    run->stages = s->stages;
    run->microbatches = s->microbatches;
    run->chunks = s->chunks;
    run->weights_policy = sched_weights_name(s->weights);
    run->recompute_policy = sched_recompute_name(s->recompute);
}

/* cli.h. Returns CLI_OK once b is written, or CLI_EUSER after printing why it is not. */
int cli_write_output(const char *path, const pl_buf *b) {
    if (b->failed) {
        fprintf(stderr, "pipelab: out of memory building the output\n");
        return CLI_EUSER;
    }
    if (!path || strcmp(path, "-") == 0) {
        if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len) {
            fprintf(stderr, "pipelab: cannot write to standard output\n");
            return CLI_EUSER;
        }
        if (fflush(stdout) != 0) {
            fprintf(stderr, "pipelab: cannot write to standard output: %s\n", strerror(errno));
            return CLI_EUSER;
        }
        return CLI_OK;
    }
    pl_err e;
    pl_err_clear(&e);
    if (pl_write_file(path, b->data ? b->data : "", b->len, &e) != PL_OK) return cli_fail(&e);
    return CLI_OK;
}

/* The most symbolic links cli_check_output follows (pl_write_file's and Linux's limit). */
#define CHECK_MAX_LINKS 40

/* Follows path while it is a symbolic link, as pl_write_file does, to the file a write through
 * it reaches (none yet, for a dangling link). Returns it malloc'd in *out with PL_OK, or an
 * error naming `what` and path. */
static int output_target(const char *what, const char *path, char **out, pl_err *e) {
    char *cur = strdup(path), target[PATH_MAX];
    struct stat st;
    for (int hops = 0; cur && lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
        ssize_t n = hops < CHECK_MAX_LINKS ? readlink(cur, target, sizeof target - 1) : -1;
        if (n < 0) {
            int rc = pl_errf(e, PL_EINPUT, "%s %s: cannot follow the link %s: %s", what, path, cur,
                             strerror(hops < CHECK_MAX_LINKS ? errno : ELOOP));
            free(cur);
            return rc;
        }
        target[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dl = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dl + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dl);
            memcpy(next + dl, target, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    if (!cur) return pl_errf(e, PL_ENOMEM, "out of memory");
    *out = cur;
    return PL_OK;
}

/* Returns 1 when the folder dir is on a kernel's file system of its own (/proc, /sys, cgroups),
 * where nobody, root included, makes a file, else 0. */
static int kernel_fs(const char *dir) {
#ifdef __linux__
    struct statfs fs;
    if (statfs(dir, &fs) != 0) return 0;
    unsigned long t = (unsigned long)fs.f_type;
    return t == PROC_SUPER_MAGIC || t == SYSFS_MAGIC || t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC;
#else
    (void)dir;
    return 0;
#endif
}

/* Checks the folders above file (the path output_target reached; path as given, for the
 * messages): each one there must be a folder, each missing one is an error unless make_folders,
 * and the deepest one there must take a new file (write and search permission, not on a
 * read-only file system nor on the kernel's). Returns PL_OK or PL_EINPUT naming the folder and
 * what is wrong. */
static int check_output_folders(const char *what, const char *path, const char *file, int make_folders, pl_err *e) {
    const char *slash = strrchr(file, '/');
    size_t n = slash ? (size_t)(slash - file) : 0;
    char *dir = malloc(n + 2);
    if (!dir) return pl_errf(e, PL_ENOMEM, "out of memory");
    memcpy(dir, file, n);
    dir[n] = '\0';
    size_t deepest = 0; /* the length of the deepest folder there; 0: "/" or "." */
    int rc = PL_OK;
    struct stat st;
    for (size_t i = 1; rc == PL_OK && i <= n; i++) {
        if (i < n && dir[i] != '/') continue;
        if (dir[i - 1] == '/') continue; /* "a//b": no component of its own */
        char c = dir[i];
        dir[i] = '\0';
        int there = stat(dir, &st) == 0, err = errno;
        if (there && !S_ISDIR(st.st_mode)) rc = pl_errf(e, PL_EINPUT, "%s %s: %s is a file, not a folder", what, path, dir);
        else if (!there && err != ENOENT)
            rc = pl_errf(e, PL_EINPUT, "%s %s: cannot reach the folder %s: %s", what, path, dir, strerror(err));
        else if (!there && !make_folders) rc = pl_errf(e, PL_EINPUT, "%s %s: the folder %s does not exist", what, path, dir);
        dir[i] = c;
        if (rc != PL_OK || !there) break; /* missing, to be made: the ones below it too */
        deepest = i;
    }
    if (rc == PL_OK) {
        if (deepest) dir[deepest] = '\0';
        else strcpy(dir, file[0] == '/' ? "/" : ".");
        struct statvfs fs;
        if (access(dir, W_OK | X_OK) != 0)
            rc = pl_errf(e, PL_EINPUT, "%s %s: the folder %s is read-only (%s): no file can be made in it", what, path, dir,
                         strerror(errno));
        else if (statvfs(dir, &fs) == 0 && (fs.f_flag & ST_RDONLY))
            rc = pl_errf(e, PL_EINPUT, "%s %s: the folder %s is on a read-only file system", what, path, dir);
        else if (kernel_fs(dir))
            rc = pl_errf(e, PL_EINPUT, "%s %s: the folder %s is the kernel's (/proc, /sys): no file can be made in it", what,
                         path, dir);
    }
    free(dir);
    return rc;
}

/* cli.h. Returns PL_OK when a write of path can go through, else PL_EINPUT saying why. */
int cli_check_output(const char *what, const char *path, int make_folders, pl_err *e) {
    if (!path || !*path) return pl_errf(e, PL_EINPUT, "%s: needs a file name (got '')", what);
    char *file = NULL;
    int rc = output_target(what, path, &file, e);
    if (rc != PL_OK) return rc;
    struct stat st;
    if (stat(file, &st) == 0) {
        if (S_ISDIR(st.st_mode)) rc = pl_errf(e, PL_EINPUT, "%s %s: %s is a folder, not a file", what, path, file);
        /* a device or a FIFO is written in place; a regular file replaced by a new one beside it */
        else if (!S_ISREG(st.st_mode) && access(file, W_OK) != 0)
            rc = pl_errf(e, PL_EINPUT, "%s %s: cannot be written (%s)", what, path, strerror(errno));
        else if (S_ISREG(st.st_mode)) rc = check_output_folders(what, path, file, make_folders, e);
    } else if (errno == ENOENT || errno == ENOTDIR) {
        rc = check_output_folders(what, path, file, make_folders, e);
    } else {
        rc = pl_errf(e, PL_EINPUT, "%s %s: cannot reach it: %s", what, path, strerror(errno));
    }
    free(file);
    return rc;
}

/* cli.h. Returns -1 for another option, CLI_OK once applied, CLI_EUSAGE after printing a bad value. */
int cli_filter_opt(const char *cmd, int c, const char *arg, store_filter *f) {
    switch (c) {
    case CLI_O_TAG: f->tag = arg; return CLI_OK;
    case CLI_O_STAG: f->sim_tag = arg; return CLI_OK;
    case CLI_O_MTAG: f->measured_tag = arg; return CLI_OK;
    case CLI_O_SCHED: f->schedule = arg; return CLI_OK;
    case CLI_O_RANKS: return cli_int_arg(cmd, "--ranks", arg, 1, 1 << 20, &f->ranks) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_STAGES: return cli_int_arg(cmd, "--stages", arg, 1, 1 << 20, &f->stages) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_MB: return cli_int_arg(cmd, "--microbatches", arg, 1, 1 << 30, &f->microbatches) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_CHUNKS: return cli_int_arg(cmd, "--chunks", arg, 1, 1 << 20, &f->chunks) ? CLI_EUSAGE : CLI_OK;
    default: return -1;
    }
}

const cli_sched_limits cli_sched_gen_limits = {SCHED_MAX_RANKS, SCHED_MAX_MICROBATCHES, 4096, 1 << 20};

/* cli.h. Returns -1 for another option, CLI_OK once applied, CLI_EUSAGE after printing a bad value. */
int cli_sched_opt(const char *cmd, int c, const char *arg, cli_sched_args *a, const cli_sched_limits *lim) {
    switch (c) {
    case CLI_O_KIND: a->kind = arg; return CLI_OK;
    case CLI_O_SRANKS:
        if (cli_int_arg(cmd, "--ranks", arg, 1, lim->ranks, &a->g.ranks)) return CLI_EUSAGE;
        a->have_ranks = 1;
        return CLI_OK;
    case CLI_O_SMB:
        if (cli_int_arg(cmd, "--microbatches", arg, 1, lim->microbatches, &a->g.microbatches)) return CLI_EUSAGE;
        a->have_mb = 1;
        return CLI_OK;
    case CLI_O_SCHUNKS:
        if (cli_int_arg(cmd, "--chunks", arg, 1, lim->chunks, &a->g.chunks)) return CLI_EUSAGE;
        a->have_chunks = 1;
        return CLI_OK;
    case CLI_O_ITERS:
        if (cli_int_arg(cmd, "--iterations", arg, 1, lim->iterations, &a->g.iterations)) return CLI_EUSAGE;
        a->have_iters = 1;
        return CLI_OK;
    case CLI_O_RECOMP: {
        int r = sched_recompute_parse(arg);
        if (r < 0) return cli_usage_error(cmd, "--recompute must be none or full (got '%s')", arg);
        a->g.recompute = (sched_recompute)r;
        a->have_recompute = 1;
        return CLI_OK;
    }
    case CLI_O_FROM: a->from = arg; return CLI_OK;
    case CLI_O_LEGACY: a->legacy = 1; return CLI_OK;
    default: return -1;
    }
}

/* Refuses, with --from, the first flag given that the file decides (a loaded schedule keeps its
 * own ranks, microbatches, chunks, iterations and recomputation; --legacy-letters changes how a
 * CSV is read, and nothing else), and --legacy-letters without --from. A PyTorch CSV carries no
 * recomputation (PyTorch sets activation checkpointing outside the schedule), so --recompute
 * gives it one (cli_sched_load). Returns -1 when none is given, else CLI_EUSAGE after naming it. */
static int sched_source_flags(const char *cmd, const cli_sched_args *a) {
    if (!a->from) {
        if (a->legacy) return cli_usage_error(cmd, "--legacy-letters reads a PyTorch CSV given with --from: not with --kind");
        return -1;
    }
    const struct { int given; const char *flag, *what; } decided[] = {
        {a->have_ranks, "--ranks", "ranks"},
        {a->have_mb, "--microbatches", "microbatches"},
        {a->have_chunks, "--chunks", "chunks (stages per rank)"},
        {a->have_iters, "--iterations", "iterations"},
        {a->have_recompute && !sched_path_is_csv(a->from), "--recompute", "recomputation"},
    };
    for (size_t k = 0; k < sizeof decided / sizeof decided[0]; k++)
        if (decided[k].given)
            return cli_usage_error(cmd, "%s: the schedule comes from %s, which sets its %s; leave %s out", decided[k].flag,
                                   a->from, decided[k].what, decided[k].flag);
    if (a->legacy && !sched_path_is_csv(a->from))
        return cli_usage_error(cmd, "--legacy-letters: reads the older letters of a PyTorch CSV (.csv), and %s is read as "
                               ".sched text; leave --legacy-letters out", a->from);
    return -1;
}

/* cli.h. Returns -1 when the schedule flags name one schedule (the budget then filled), else
 * CLI_EUSAGE. */
int cli_sched_check(const char *cmd, cli_sched_args *a) {
    if (!a->kind == !a->from) return cli_usage_error(cmd, "give either --kind or --from");
    if (a->kind && (!a->have_ranks || !a->have_mb)) return cli_usage_error(cmd, "--kind needs --ranks and --microbatches");
    int rc = sched_source_flags(cmd, a);
    if (rc >= 0) return rc;
    sched_budget_init(&a->budget, a->max_memory, getenv(SCHED_MAX_MEMORY_ENV));
    return -1;
}

/* cli.h. Returns -1 when argv is used up and the schedule flags hold, else CLI_EUSAGE. */
int cli_sched_args_end(const char *cmd, int argc, char **argv, cli_sched_args *a) {
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    return cli_sched_check(cmd, a);
}

/* cli.h. Returns -1 when every output named can be written, else CLI_EUSAGE (an empty name) or
 * CLI_EUSER after printing why. */
int cli_outputs_check(const char *cmd, const cli_output *outs, size_t n) {
    for (size_t k = 0; k < n; k++) {
        const char *path = outs[k].path;
        if (!path || strcmp(path, "-") == 0) continue; /* none, or standard output */
        if (!*path) return cli_usage_error(cmd, "%s: needs a file name (got '')", outs[k].flag);
        pl_err e;
        pl_err_clear(&e);
        if (cli_check_output(outs[k].flag, path, 0, &e) != PL_OK) return cli_fail(&e);
    }
    return -1;
}

/* cli.h. Returns -1 when the database flags go together and no output is the database, else
 * CLI_EUSAGE (CLI_EUSER when out of memory). */
int cli_db_flags(const char *cmd, const char *db, int no_db, const cli_output *outs, size_t n) {
    if (db && !*db) return cli_usage_error(cmd, "--db: needs a file name (got '')");
    if (db && no_db) return cli_usage_error(cmd, "give --db or --no-db, not both");
    int rc = cli_outputs_check(cmd, outs, n);
    if (rc >= 0 || no_db) return rc;
    pl_err e;
    pl_err_clear(&e);
    for (size_t k = 0; k < n; k++) {
        int code = store_check_output(db, outs[k].flag, outs[k].path, &e);
        if (code == PL_ENOMEM) return cli_fail(&e);
        if (code != PL_OK) return cli_usage_error(cmd, "%s", e.msg);
    }
    return -1;
}

/* cli.h. Returns -1 for table, csv or json, else CLI_EUSAGE. */
int cli_format_arg(const char *cmd, const char *format) {
    if (strcmp(format, "table") && strcmp(format, "csv") && strcmp(format, "json"))
        return cli_usage_error(cmd, "--format must be table, csv or json");
    return -1;
}

/* cli.h. Returns the schedule, not validated (the caller frees it), or NULL with e filled. */
sched *cli_sched_load(const cli_sched_args *a, int mem_mode, pl_err *e) {
    sched_shape sh;
    /* the memory of the whole command, before the schedule is generated */
    if (a->kind && (sched_gen_shape(a->kind, &a->g, &sh, e) != PL_OK ||
                    sched_check_command_memory(a->kind, &sh, mem_mode, &a->budget, e) != PL_OK))
        return NULL;
    sched *s = a->from ? sched_load(a->from, a->legacy ? SCHED_LETTERS_LEGACY : SCHED_LETTERS_CURRENT, e)
                       : sched_generate_within(a->kind, &a->g, &a->budget, e);
    if (!s) return NULL;
    if (a->from && a->have_recompute) s->recompute = a->g.recompute; /* a CSV's (sched_source_flags) */
    if (a->from) { /* a loaded schedule: its actions, counted as compute actions (an upper bound) */
        sh = (sched_shape){s->ranks, s->stages, sched_total_microbatches(s),
                           (int64_t)sched_total_actions(s)};
        if (sched_check_command_memory(a->from, &sh, mem_mode, &a->budget, e) != PL_OK) {
            sched_free(s);
            return NULL;
        }
    }
    return s;
}

/* cli.h. Returns the validated schedule (the caller frees it), or NULL with e filled. */
sched *cli_sched_get(const cli_sched_args *a, int mem_mode, pl_err *e) {
    sched *s = cli_sched_load(a, mem_mode, e);
    if (s && sched_validate(s, e) != PL_OK) {
        sched_free(s);
        return NULL;
    }
    return s;
}

/* FNV-1a, 64 bits: the offset basis and the prime of the digest of an input file. */
#define FNV1A64_OFFSET 0xcbf29ce484222325ull
#define FNV1A64_PRIME 0x100000001b3ull
/* The largest input file whose digest a stored run records, in bytes. */
#define INPUT_READ_MAX ((size_t)1 << 30)

/* Returns 1 when t[0..n) is plain ASCII text (tabs, line ends and printable characters): text
 * that any JSON reader takes back unchanged. */
static int plain_text(const char *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c >= 0x7f || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) return 0;
    }
    return 1;
}

/* cli.h. Appends the array to b; a file that cannot be read is named with its error. */
void cli_inputs_json(pl_buf *b, const char *const *roles, const char *const *paths, int n) {
    pl_buf_puts(b, "\"inputs\":[");
    int first = 1;
    for (int k = 0; k < n; k++) {
        if (!paths[k]) continue;
        pl_buf_puts(b, first ? "{\"role\":\"" : ",{\"role\":\"");
        first = 0;
        pl_buf_json_body(b, roles[k], strlen(roles[k]));
        pl_buf_puts(b, "\",\"path\":\"");
        pl_buf_json_body(b, paths[k], strlen(paths[k]));
        pl_buf_putc(b, '"');
        char *text = NULL;
        size_t len = 0;
        pl_err e;
        if (pl_read_file(paths[k], INPUT_READ_MAX, &text, &len, &e) != PL_OK) {
            pl_buf_puts(b, ",\"error\":\"");
            pl_buf_json_body(b, e.msg, strlen(e.msg));
            pl_buf_puts(b, "\"}");
            continue;
        }
        uint64_t h = FNV1A64_OFFSET;
        for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * FNV1A64_PRIME;
        pl_buf_printf(b, ",\"bytes\":%zu,\"fnv1a64\":\"%016llx\"", len, (unsigned long long)h);
        if (len <= CLI_INPUT_TEXT_MAX && plain_text(text, len)) {
            pl_buf_puts(b, ",\"text\":\"");
            pl_buf_json_body(b, text, len);
            pl_buf_putc(b, '"');
        }
        pl_buf_putc(b, '}');
        free(text);
    }
    pl_buf_putc(b, ']');
}

/* cli.h. Returns 0 or CLI_EUSAGE. */
int cli_allreduce_link_arg(const char *cmd, const char *val, int *out) {
    for (int t = 0; t < COST_TRANSPORTS; t++)
        if (strcmp(val, cost_transport_name((cost_transport)t)) == 0) {
            *out = t;
            return 0;
        }
    if (strcmp(val, "hardware") == 0) {
        *out = CLI_AR_HARDWARE;
        return 0;
    }
    return cli_usage_error(cmd, "--allreduce-link must be threads, mpi or hardware (got '%s')", val);
}

/* cli.h. Returns the transport of the measurement in link, else -1 (none, or none asked). */
int cli_allreduce_link(const char *cmd, const cost_model *m, int want, int replicated, const char *fallback, cost_hw *link) {
    if (want == CLI_AR_HARDWARE) return -1;
    cost_transport used = COST_TRANSPORT_THREADS;
    int have = cost_model_allreduce_link(m, (cost_transport)want, link, &used);
    const char *src = m->src_path ? m->src_path : "(in-process)";
    int csv = strcmp(m->source, "csv") == 0; /* a profile: the analytic models measure nothing */
    if (replicated && csv && !have)
        fprintf(stderr, "pipelab %s: profile %s has no all-reduce measurements: REDUCE_GRAD priced on %s; rerun pipelab "
                        "profile\n", cmd, src, fallback);
    else if (replicated && (int)used != want)
        fprintf(stderr, "pipelab %s: profile %s has no %s all-reduce measurement: REDUCE_GRAD priced on its %s one "
                        "(mpirun -np 2 pipelab profile --transport mpi measures it)\n", cmd, src,
                cost_transport_name((cost_transport)want), cost_transport_name(used));
    return have ? (int)used : -1;
}
