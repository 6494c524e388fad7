/* cli.h: shared pieces of the pipelab program: subcommand entry points, error printing, and the
 * flags and output helpers the subcommands share. */
#ifndef PL_CLI_H
#define PL_CLI_H

#include "pl_common.h"
#include "pl_sched.h"

/* The run-filter flags that compare and plot share (--tag, --sim-tag, --measured-tag,
 * --schedule, --ranks, --stages, --microbatches, --chunks): option values for getopt_long, the
 * entries of its option table, and their parsing into a store_filter. */
enum { CLI_O_TAG = 900, CLI_O_STAG, CLI_O_MTAG, CLI_O_SCHED, CLI_O_RANKS, CLI_O_STAGES, CLI_O_MB, CLI_O_CHUNKS };
#define CLI_FILTER_LONG_OPTS                                                                        \
    {"tag", required_argument, 0, CLI_O_TAG}, {"sim-tag", required_argument, 0, CLI_O_STAG},        \
    {"measured-tag", required_argument, 0, CLI_O_MTAG}, {"schedule", required_argument, 0, CLI_O_SCHED}, \
    {"ranks", required_argument, 0, CLI_O_RANKS}, {"stages", required_argument, 0, CLI_O_STAGES},   \
    {"microbatches", required_argument, 0, CLI_O_MB}, {"chunks", required_argument, 0, CLI_O_CHUNKS}
struct store_filter;
/* Applies filter option c with value arg to f. Returns -1 when c is not a filter option,
 * CLI_OK, or CLI_EUSAGE after printing what is wrong with the value. */
int cli_filter_opt(const char *cmd, int c, const char *arg, struct store_filter *f);

/* The schedule-selection flags that schedule, simulate and run share (--kind, --ranks,
 * --microbatches, --chunks, --iterations, --recompute, --from, --legacy-letters): option values
 * for getopt_long (below the subcommands' own, which start at 1000), the entries of its option
 * table, what they select, and the limits of each command (run's are tighter: its executor
 * starts one thread per rank). */
enum { CLI_O_KIND = 950, CLI_O_SRANKS, CLI_O_SMB, CLI_O_SCHUNKS, CLI_O_ITERS, CLI_O_RECOMP, CLI_O_FROM, CLI_O_LEGACY };
#define CLI_SCHED_LONG_OPTS                                                                         \
    {"kind", required_argument, 0, CLI_O_KIND}, {"ranks", required_argument, 0, CLI_O_SRANKS},      \
    {"microbatches", required_argument, 0, CLI_O_SMB}, {"chunks", required_argument, 0, CLI_O_SCHUNKS}, \
    {"iterations", required_argument, 0, CLI_O_ITERS}, {"recompute", required_argument, 0, CLI_O_RECOMP}, \
    {"from", required_argument, 0, CLI_O_FROM}, {"legacy-letters", no_argument, 0, CLI_O_LEGACY}
typedef struct cli_sched_args {
    const char *kind, *from; /* --kind (generate) or --from (load) */
    int legacy;              /* --legacy-letters */
    sched_gen_opts g;        /* --ranks, --microbatches, --chunks, --iterations, --recompute */
    int have_ranks, have_mb; /* --ranks, --microbatches given (or filled by the layout) */
    int have_chunks, have_iters, have_recompute; /* --chunks, --iterations, --recompute given */
    uint64_t max_memory;     /* --max-memory in bytes (0 = not given) */
    sched_budget budget;     /* the command's memory budget (cli_sched_check fills it) */
} cli_sched_args;
/* The largest value each flag takes (the smallest is 1). */
typedef struct cli_sched_limits { int ranks, microbatches, chunks, iterations; } cli_sched_limits;
/* schedule's and simulate's: what the generators take (SCHED_MAX_RANKS, SCHED_MAX_MICROBATCHES). */
extern const cli_sched_limits cli_sched_gen_limits;
/* Applies schedule option c with value arg to a within lim. Returns -1 when c is not a schedule
 * option, CLI_OK, or CLI_EUSAGE after printing what is wrong with the value. */
int cli_sched_opt(const char *cmd, int c, const char *arg, cli_sched_args *a, const cli_sched_limits *lim);
/* After parsing: exactly one of --kind and --from, and --kind with --ranks and --microbatches;
 * with --from, none of the flags that the file decides (--ranks, --microbatches, --chunks,
 * --iterations, --recompute; --legacy-letters for a file that is not a CSV), and
 * --legacy-letters only with --from; then fills a->budget from --max-memory or else $PIPELAB_MAX_MEMORY (the one place the CLI
 * reads the memory limit; every check of the command is given a->budget). Returns -1 when they
 * hold, else CLI_EUSAGE after printing which does not. */
int cli_sched_check(const char *cmd, cli_sched_args *a);
/* After getopt_long: no argument left over (optind), then cli_sched_check. Returns -1 when both
 * hold, else CLI_EUSAGE after printing which does not. */
int cli_sched_args_end(const char *cmd, int argc, char **argv, cli_sched_args *a);
/* An output file a command writes: the flag that names it ("--trace-json") and its path (NULL:
 * not given). */
typedef struct cli_output { const char *flag, *path; } cli_output;
/* The results-database flags of a command and its outputs, checked in one place after parsing,
 * before anything runs: --db PATH (NULL: the default database) and --no-db (simulate, run; 0
 * elsewhere), and the n output files outs[n] the command writes beside the database it reads
 * or writes (simulate's --trace-json, run's --dump-weights and --save-profile, calibrate's -o,
 * compare's -o). Refuses an empty --db (it would name no file), --db beside --no-db, an output
 * that cannot be written (cli_outputs_check), and, unless
 * --no-db, an output that is the database file or its -wal / -shm (store_check_output), which
 * writing would destroy. Returns -1 when they hold, else CLI_EUSAGE after printing which does
 * not (CLI_EUSER when out of memory). */
int cli_db_flags(const char *cmd, const char *db, int no_db, const cli_output *outs, size_t n);
/* Checks, before any work, that each output of outs[n] given (a path other than "-", standard
 * output) can be written (cli_check_output, its folders there): so that a long command does not
 * fail at its end. Returns -1 when they can, else CLI_EUSAGE (an empty name) or CLI_EUSER after
 * printing why. cli_db_flags calls it. */
int cli_outputs_check(const char *cmd, const cli_output *outs, size_t n);
/* Returns -1 when format is one of the output formats table, csv and json, else CLI_EUSAGE after
 * printing "--format must be table, csv or json". */
int cli_format_arg(const char *cmd, const char *format);
/* Generates (--kind) or loads (--from) the schedule, refusing up front one whose memory under
 * sched_check_command_memory's mode (SCHED_MEM_*) passes a->budget, and validates it. NULL and e on error. */
sched *cli_sched_get(const cli_sched_args *a, int mem_mode, pl_err *e);
/* cli_sched_get without the validation: for callers that lower the schedule next (lowering
 * validates a compute-only schedule with the same checks and messages). NULL and e on error. */
sched *cli_sched_load(const cli_sched_args *a, int mem_mode, pl_err *e);

/* Exit codes of every subcommand. */
enum { CLI_OK = 0, CLI_EUSER = 1, CLI_EUSAGE = 2 };

/* Each subcommand gets argv with argv[0] = subcommand name; returns an exit code. */
int cli_schedule(int argc, char **argv);
int cli_model(int argc, char **argv);
int cli_db(int argc, char **argv);
int cli_simulate(int argc, char **argv);
int cli_partition(int argc, char **argv);
int cli_calibrate(int argc, char **argv);
int cli_compare(int argc, char **argv);
int cli_plot(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_profile(int argc, char **argv);

/* Prints "pipelab: <message>" of e on stderr and returns CLI_EUSER. */
int cli_fail(const pl_err *e);
/* This process in an MPI job as its launcher (mpirun) told it in the environment, before MPI
 * starts: its rank, the job's processes and those on this host; -1 each where the launcher did
 * not say (no launcher: all -1). */
typedef struct cli_launch { int rank, size, local; } cli_launch;
cli_launch cli_launcher(void);
/* cli_fail for an error that every process of an MPI job meets alike (made of the arguments and
 * of the files, memory and cores they all see): printed once, by the launcher's rank 0, where the
 * launcher says the whole job is on this host; the other processes return CLI_EUSER silently.
 * Elsewhere (no launcher, several hosts or unknown) it prints as cli_fail. An error that one
 * process meets alone (its own failure) goes through cli_fail, printed by that process. The
 * silent processes first wait a few seconds, in which the launcher ends them when rank 0 fails,
 * so that none ends the job before rank 0 printed. */
int cli_fail_alike(const pl_err *e);
/* Prints "pipelab CMD: <message>" and where the help is on stderr and returns CLI_EUSAGE. A usage
 * error is made of the arguments alone, which every process of an MPI job shares: on the
 * processes its launcher ranks above 0 (cli_launcher) it prints nothing, so that the job prints
 * it once, and waits as cli_fail_alike's do. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses an int flag value in [lo, hi]; on error prints a usage error ("pipelab CMD: FLAG: ...")
 * and returns -1. Every numeric flag of cli/ goes through these parsers: a malformed or
 * out-of-range value is a usage error (exit 2, DESIGN.md §8). */
int cli_int_arg(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out);
/* The most replicas one --replicas or --replicas-stage flag gives a stage. */
#define CLI_MAX_REPLICAS (1 << 20)
/* Parses --replicas-stage's S=N (stage S >= 0, N >= 1 replicas; simulate and run) into
 * stages[count] and ns[count], refusing a stage that stages[0..count) already names. Returns 0,
 * or -1 after printing a usage error. */
int cli_replicas_stage_arg(const char *cmd, const char *val, int *stages, int *ns, int count);
/* Checks a --set value's shape, KEY=VALUE with a KEY (simulate, model, partition, calibrate; the
 * hardware's cost_hw_set_kv checks the key and value). Returns 0, or -1 after printing a usage
 * error. */
int cli_set_arg(const char *cmd, const char *val);
/* The same for a long (seeds). */
int cli_long_arg(const char *cmd, const char *flag, const char *val, long lo, long hi, long *out);
/* Parses a finite number in [lo, hi] (e.g. lo 0: not negative); on error prints a usage error
 * "pipelab CMD: FLAG: what is wrong" and returns -1: a value that is not a finite number, or
 * one too close to 0 for a double (below DBL_MIN, which strtod can only round). */
int cli_num_arg(const char *cmd, const char *flag, const char *val, double lo, double hi, double *out);
/* Parses --max-memory's size ("8e9", "16GiB") into a->max_memory (cli_sched_check makes it the
 * command's budget); on error prints a usage error and returns -1. */
int cli_max_memory_arg(const char *cmd, const char *val, cli_sched_args *a);
/* The largest input file whose text a stored run carries (cli_inputs_json), in bytes. */
#define CLI_INPUT_TEXT_MAX (64 * 1024)
/* Appends "inputs":[...] to b: for each of the n files a run read (paths[k] NULL = none), an
 * object {"role", "path", "bytes", "fnv1a64", "text"}: its size, its FNV-1a 64-bit digest and,
 * for text of at most CLI_INPUT_TEXT_MAX bytes, the text itself, so that a stored run carries
 * the schedule, model, hardware, partition or profile file it was made from (a file that cannot
 * be read any more gets "error" instead). */
void cli_inputs_json(pl_buf *b, const char *const *roles, const char *const *paths, int n);
/* What the short run id `pipelab db list` prints starts with for a prediction: a run `pipelab
 * run` stored as the prediction of measured run X (uid "prediction-X") shows as "p:" and X's
 * short id (the uid's first 8 characters, or more where needed to name one run). */
#define CLI_PREDICTION_MARK "p:"
/* Every RUN argument (db show, plot timeline, calibrate --run) takes that id: turns "p:X" back
 * into "prediction-X" (into buf[n]); returns arg itself when it is not of that form, or when buf
 * is too small. */
const char *cli_run_key(const char *arg, char *buf, size_t n);
/* Room for the key cli_run_key makes of a RUN argument (a longer one passes as it is). */
#define CLI_RUN_KEY_MAX 512
/* The characters of the widest int32 in decimal ("-2147483648"). */
#define CLI_INT32_TEXT_MAX (sizeof "-2147483648" - 1)
/* The room one action's text takes (sched_action_format), NUL included: its longest form is an
 * overlapped pair "(SF M;SB M)OVERLAP_F_B" with four int32 values at their widest; a plain
 * action ("SREDUCE_GRADM" at most) is shorter. */
#define CLI_ACTION_TEXT_MAX (4 * CLI_INT32_TEXT_MAX + sizeof "(F;B)OVERLAP_F_B")
struct store;
struct store_comparison;
/* Appends `pipelab compare --overlap`'s table to b: over the measured runs of c that carry their
 * timelines, each compute class's actions alone against beside the other ranks' compute
 * (store_overlap_note), and the share of its time spent alone (compare_overlap.c). */
void cli_compare_overlap(struct store *db, const struct store_comparison *c, pl_buf *b);
/* Appends `pipelab compare --tail`'s table to b: over the pairs of c that carry both timelines,
 * each compute class's typical action and its tail against the prediction (store_tail_note)
 * (compare_overlap.c). */
void cli_compare_tail(struct store *db, const struct store_comparison *c, pl_buf *b);
/* Appends `pipelab compare --distance`'s table to b: over the pairs of c that carry both
 * timelines (not under full recomputation), each B and I's error by its reuse distance
 * (store_distance_note). */
void cli_compare_distance(struct store *db, const struct store_comparison *c, pl_buf *b);

/* The op rows of a stored run (store_write_run's ops, nops) and the action texts they point at:
 * ops[k].action is names + k * CLI_ACTION_TEXT_MAX. A zeroed value holds no rows. */
struct store_op;
struct sim_slot;
typedef struct cli_op_rows {
    struct store_op *ops; /* [n] */
    char *names;          /* [n][CLI_ACTION_TEXT_MAX] */
    size_t n;
} cli_op_rows;
/* Makes room for n rows (at least one, so an empty run has valid pointers). Returns PL_OK or
 * PL_ENOMEM in e. */
int cli_op_rows_alloc(cli_op_rows *o, size_t n, pl_err *e);
/* Fills row k: action a at position seq of rank's list, run from start_s to end_s. */
void cli_op_rows_set(cli_op_rows *o, size_t k, int rank, int seq, const sched_action *a, double start_s, double end_s);
/* One row per action of s, rank by rank, timed by a simulator trace ([ranks][actions], as
 * sim_result.trace). Returns PL_OK or PL_ENOMEM in e. */
int cli_op_rows_trace(cli_op_rows *o, const sched *s, struct sim_slot *const *trace, pl_err *e);
/* Frees the rows and zeroes o. */
void cli_op_rows_free(cli_op_rows *o);
/* Fills the fields of a stored run that its schedule s gives: the schedule's kind, its ranks,
 * stages, microbatches and chunks, and its weights and recompute policies (not iterations: a
 * run counts its own). */
struct store_run;
void cli_store_run_sched(struct store_run *run, const sched *s);
/* Room for this machine's name (gethostname) where a command records or prints it. */
#define CLI_HOST_MAX 256
/* Returns 1 when stdout (fd 1) or stderr (fd 2) is a terminal. */
int cli_isatty(int fd);
/* Writes a buffer to path, or to stdout when path is NULL or "-"; returns an exit code. */
int cli_write_output(const char *path, const pl_buf *b);
/* Checks, before a command spends its time, that it will be able to write the file at path
 * when it is done, and refuses now what would make that write fail: a folder where the file
 * goes; a file of the folder path (named: "results/out is a file, not a folder"); a missing
 * folder, unless make_folders (the writer makes the missing folders above the file, as the
 * results store does; pl_write_file does not); the deepest folder there without write and search
 * permission, on a read-only file system or on the kernel's (/proc, /sys): a new file, or
 * pl_write_file's replacement beside an old one, is made in it; a device or FIFO this user
 * cannot write. Links are followed as pl_write_file follows them. Creates nothing. what names
 * the flag in the message ("--dump-weights PATH: ..."). Root passes the permission bits (a
 * read-only mount still stops it). Returns PL_OK, or PL_EINPUT (PL_ENOMEM) with e naming path
 * and what is wrong. */
int cli_check_output(const char *what, const char *path, int make_folders, pl_err *e);

/* The all-reduce link REDUCE_GRAD is priced on, for run, simulate and partition. */
struct cost_model;
struct cost_hw;
/* --allreduce-link's values: the profile's measurement on a transport (cost_transport), or
 * CLI_AR_HARDWARE: the hardware's links whatever the profile measured. */
#define CLI_AR_HARDWARE (-1)
#define CLI_AR_LINK_HELP                                                                              \
    "  --allreduce-link threads|mpi|hardware  what prices REDUCE_GRAD when the profile CSV carries\n"  \
    "                        measured all-reduces (pipelab profile): its threads ring (default),\n"   \
    "                        its MPI_Allreduce (falling back to the threads' when it has none), or\n" \
    "                        the hardware's links (the profile's measurement ignored)\n"
/* Parses --allreduce-link's value into *out (a cost_transport or CLI_AR_HARDWARE). Returns 0, or
 * CLI_EUSAGE after printing what is wrong. */
int cli_allreduce_link_arg(const char *cmd, const char *val, int *out);
/* The one rule of pricing REDUCE_GRAD from a profile: m's all-reduce measured on transport want
 * (cost_model_allreduce_link; want CLI_AR_HARDWARE: none). Returns the cost_transport whose
 * measurement fills link, else -1.
 * When replicated (the configuration has replicated stages) says on stderr, once, what is used
 * instead of the measurement asked for: the threads' for an MPI one the profile lacks, or,
 * without any, `fallback` ("0 (free links)", "the hardware's links"). */
int cli_allreduce_link(const char *cmd, const struct cost_model *m, int want, int replicated, const char *fallback,
                       struct cost_hw *link);

#endif
