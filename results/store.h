/* store.h: the results store: one SQLite file of simulated and measured runs (DESIGN.md §7). */
#ifndef PL_STORE_H
#define PL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "pl_common.h"

/* Default database path, relative to the working directory. */
#define STORE_DEFAULT_PATH "results/out/pipelab.db"
/* The most ranks a stored run may have (the schedules' own limit); a run read back with more, or
 * with none, is a damaged file. */
#define STORE_MAX_RANKS 65536
/* The environment variable naming the gnuplot program `pipelab plot` runs (default: gnuplot
 * on PATH). */
#define STORE_GNUPLOT_ENV "PIPELAB_GNUPLOT"
/* The environment variable bounding how long one gnuplot run may take (seconds, default
 * STORE_GNUPLOT_TIMEOUT_S): past it pipelab plot stops gnuplot and fails, rather than wait on a
 * program that never ends. */
#define STORE_GNUPLOT_TIMEOUT_ENV "PIPELAB_GNUPLOT_TIMEOUT"
#define STORE_GNUPLOT_TIMEOUT_S 600
#define STORE_GNUPLOT_TIMEOUT_MAX_S 1e7 /* the longest it may be set to */
/* How long a statement waits for another connection's lock before giving up (milliseconds):
 * parallel sweeps write one file, each run in a short transaction. */
#define STORE_BUSY_TIMEOUT_MS 10000
/* Schema version written to PRAGMA user_version by this build. History (migrations in store.c):
 *   1  first release;
 *   2  runs.repetitions, runs.iteration_time_stddev_s (stochastic mode);
 *   3  one name per bubble figure: runs.bubble (idle seconds) -> runs.idle_s, runs.bubble_rate
 *      (idle fraction) -> runs.bubble_fraction, new runs.zb_bubble_rate (NULL in older rows),
 *      rank_metrics.bubble (idle seconds, a copy of idle_s) -> rank_metrics.bubble_fraction
 *      = idle_s / (busy_s + idle_s). */
#define STORE_SCHEMA_VERSION 3

/* An open database. Not shared between threads: every thread or process opens its own (any
 * number of handles may write one file at once). */
typedef struct store store;

/* One run: what was run (enough to reproduce it) and its headline metrics.
 * Writing: strings are borrowed from the caller; NULL (or "") means "fill in the default":
 *   uid -> a fresh uuid-like text, origin -> host name, version -> PL_VERSION,
 *   git_rev -> PIPELAB_GIT_REV, host -> gethostname(), utc_time -> now (ISO 8601 "...Z"),
 *   other strings -> "". kind must be "simulated" or "measured".
 * Reading: strings are malloc'd copies owned by the record; free them with store_run_clear. */
typedef struct store_run {
    int64_t id;                   /* integer row id in this file (read only; ignored on write) */
    const char *uid;              /* globally unique id text, kept by merges */
    const char *origin;           /* host that produced it, or source db file */
    const char *kind;             /* "simulated" or "measured" */
    const char *tag;              /* free-form label for grouping sweeps */
    const char *cmdline;          /* the command line that produced the run */
    const char *schedule;         /* schedule kind, e.g. "1f1b", "interleaved", "zb-h1" */
    int ranks, stages, microbatches, chunks, iterations;
    const char *weights_policy;   /* e.g. "stash", "none" */
    const char *recompute_policy; /* e.g. "none", "full", "selective" */
    const char *params_json;      /* free-form JSON: costs, model, hardware parameters */
    uint64_t seed;
    const char *version;          /* pipelab version */
    const char *git_rev;          /* git revision of the build */
    const char *host;             /* host name */
    const char *utc_time;         /* ISO 8601 UTC, e.g. "2026-11-30T05:27:46Z" */
    /* Headline metrics. */
    double iteration_time_s;
    double throughput_samples_s;
    /* Bubble figures (the names sim.h defines, version 3 of the schema on): all three cover the
     * run's bubble window, the window its iteration time is measured over (simulated: the
     * whole run, or an asynchronous schedule's steady state; measured: a timed pass). */
    double idle_s;                /* idle seconds, summed over ranks */
    double bubble_fraction;       /* idle fraction in [0, 1]: 1 - sum busy / (ranks x window) */
    double zb_bubble_rate;        /* Zero Bubble paper's bubble rate (cost - m(TF+TB+TW)) / cost,
                                   * see sim.h; measured runs: of their median pass, from each
                                   * rank's compute span; NAN = not recorded (stored as NULL:
                                   * runs stored before version 3, measured ones before this) */
    double comm_time_s;
    int64_t peak_mem_bytes;       /* max over ranks */
    int oom;                      /* 1 when some rank ran out of memory */
    int repetitions;              /* stochastic mode: repetitions averaged (1 otherwise; 0 -> 1) */
    double iteration_time_stddev_s; /* stochastic mode: stddev of iteration time (0 otherwise) */
} store_run;

/* Per-rank metrics of one run. */
typedef struct store_rank_metric {
    int rank;
    double busy_s, idle_s;        /* compute and idle seconds in the run's bubble window */
    double bubble_fraction;       /* idle_s / (busy_s + idle_s), in [0, 1] */
    double comm_s;
    int64_t peak_mem_bytes;
} store_rank_metric;

/* One executed action, for timelines. Writing: strings borrowed; reading: owned (store_ops_free). */
typedef struct store_op {
    int rank;
    int seq;                      /* position in the rank's action list */
    const char *action;           /* PyTorch notation, e.g. "0F1" */
    const char *kind;             /* e.g. "F", "B", "W", "SEND_F", "RECV_B" */
    int stage, mb;
    double start_s, end_s;
} store_op;

/* Output formats of store_export. */
typedef enum store_format { STORE_CSV = 0, STORE_JSON = 1 } store_format;

/* Opens (readonly = 0: creating parent directories, the file and the schema, migrating an
 * older schema) the database at path (NULL -> STORE_DEFAULT_PATH). WAL mode, 10 s busy timeout.
 * Refused with PL_EINPUT (message names the path) and without modifying the file: a newer schema
 * version, a non-SQLite or foreign SQLite file, and for writing: a file this user cannot write or
 * one in a folder where PATH-wal / PATH-shm cannot be created ("read-only"), and a corrupt file
 * (PRAGMA quick_check before anything is written: about 1 s per 350 MB of database). Readonly
 * opens of older schema versions work (missing columns read as defaults), and so do readonly
 * opens of a file in a read-only folder or of a file this user cannot write (read as immutable
 * when its WAL is empty). A readonly open changes nothing: not the journal mode, and it leaves no
 * PATH-wal / PATH-shm it made behind once closed (a writable file is opened read-write under
 * PRAGMA query_only, so that its last close removes them). Returns PL_OK and *out, or an error
 * code with e filled. */
int store_open(const char *path, int readonly, store **out, pl_err *e);
/* Refuses an output file that would overwrite the database a command reads, at db_path (NULL ->
 * STORE_DEFAULT_PATH): path (NULL: none) reaching the database file, or the PATH-wal / PATH-shm
 * beside it, by identity (device and inode: through a symbolic link or
 * another relative path too). what names the output in the message ("-o"). Returns PL_OK (also
 * when either file does not exist) or PL_EINPUT naming both, which the command reports as a
 * usage error before it reads or writes anything. */
int store_check_output(const char *db_path, const char *what, const char *path, pl_err *e);
/* Closes the database and frees everything it holds; NULL is allowed. */
void store_close(store *s);
/* Returns the path the store was opened with. */
const char *store_path(const store *s);
/* Returns the schema version of the open file (STORE_SCHEMA_VERSION unless readonly + older). */
int store_schema_version(const store *s);

/* Writes one run with its rank metrics and optional ops in ONE transaction (BEGIN IMMEDIATE,
 * ROLLBACK on any error), so a crash never leaves half a run. Inside a batch (store_begin) the
 * run joins the batch's transaction instead, under a savepoint: a failing write leaves nothing
 * of its run in the batch (the runs before it stay in it), and nothing is stored before
 * store_commit. *run_id (may be NULL) gets the integer id (of a batch's run: valid once
 * committed). A uid already present is an error (PL_EINPUT). Returns PL_OK or an error code. */
int store_write_run(store *s, const store_run *run, const store_rank_metric *ranks, int nranks,
                    const store_op *ops, size_t nops, int64_t *run_id, pl_err *e);
/* A batch: several runs stored all or none (a measured run and its predictions). store_begin
 * opens one IMMEDIATE transaction (holding the file's write lock until the batch ends: keep it
 * short), which the store_write_run calls until store_commit join; store_commit stores them all
 * at once, store_rollback (or store_close, or a crash) none of them. Use one batch at a time
 * per handle, and no store_merge inside one. store_begin returns PL_OK, PL_EINTERNAL (a
 * read-only store, a batch already open) or PL_EIO (the lock not had within the busy timeout);
 * store_commit PL_OK, PL_EINTERNAL when no batch is open (a write's failure SQLite answered by
 * rolling the whole batch back) or PL_EIO, after which nothing of the batch is stored.
 * store_rollback does nothing without a batch; NULL is allowed. */
int store_begin(store *s, pl_err *e);
int store_commit(store *s, pl_err *e);
void store_rollback(store *s);

/* Lists runs newest first (tag NULL = all; limit <= 0 = no limit) into a malloc'd array.
 * Free with store_runs_free. Returns PL_OK or an error code. */
int store_list_runs(store *s, const char *tag, int limit, store_run **runs, size_t *n, pl_err *e);
/* Finds one run by integer id text or uid (a unique uid prefix of >= 4 characters also works).
 * Returns PL_OK, PL_EINPUT when there is no such run, or another error code.
 * Free the record with store_run_clear. */
int store_get_run(store *s, const char *id_or_uid, store_run *run, pl_err *e);
/* Reads the rank metrics of a run (ordered by rank) into a malloc'd array (free()). */
int store_get_rank_metrics(store *s, int64_t run_id, store_rank_metric **out, int *n, pl_err *e);
/* Reads the ops of a run (ordered by rank, seq) into a malloc'd array; free with store_ops_free. */
int store_get_ops(store *s, int64_t run_id, store_op **out, size_t *n, pl_err *e);
/* Counts the ops of a run. */
int store_count_ops(store *s, int64_t run_id, int64_t *n, pl_err *e);

/* Frees the strings of one read record and zeroes it. */
void store_run_clear(store_run *run);
/* Frees an array from store_list_runs. */
void store_runs_free(store_run *runs, size_t n);
/* Writes the ops of run r (from store_get_ops) as a Chrome trace (JSON; opens in Perfetto and
 * chrome://tracing): one process per rank with a compute and a comm thread, one complete
 * event per op (microseconds; args stage, mb, seq), named after the run (kind, schedule, uid).
 * Returns PL_OK, PL_EINPUT when there are no ops, or PL_ENOMEM. */
int store_ops_chrome(const store_run *r, const store_op *ops, size_t n, pl_buf *out, pl_err *e);
/* Frees an array from store_get_ops. */
void store_ops_free(store_op *ops, size_t n);

/* Appends runs (tag NULL = all, oldest first) with their headline metrics to out: CSV with a
 * header line, or a JSON array of objects that also carry "params" and per-rank "ranks". */
int store_export(store *s, const char *tag, store_format fmt, pl_buf *out, pl_err *e);

/* Appends one run read with store_get_run / store_list_runs: CSV (header + one line) or one JSON
 * object (same fields as store_export's elements) and a newline. */
int store_export_run(store *s, const store_run *run, store_format fmt, pl_buf *out, pl_err *e);

/* Copies into dst every run of the database at src_path whose uid dst lacks, with its rank
 * metrics and ops, in one transaction; runs without an origin get src_path as origin. src is
 * opened readonly and never modified. *added / *skipped (may be NULL) get the counts. */
int store_merge(store *dst, const char *src_path, int *added, int *skipped, pl_err *e);

/* ---- compare and plot (store_compare.c, plot.c) ---- */

/* Which runs to consider; NULL / 0 fields match anything. tag applies to both kinds unless
 * sim_tag / measured_tag are given. */
typedef struct store_filter {
    const char *tag, *sim_tag, *measured_tag;
    const char *schedule;
    int ranks, stages, microbatches, chunks;
} store_filter;

/* The parameters of params_json that must agree (where both runs carry them) for a simulated and
 * a measured run to be paired, beside the run columns schedule, ranks, stages, microbatches,
 * chunks, iterations, weights_policy and recompute_policy. NULL-terminated dotted paths. */
extern const char *const store_match_params[];

/* One measured run and the simulated run that predicts it. Errors are signed and relative,
 * (predicted - measured) / measured; NAN when the measured value is 0 (then left out of MAPE);
 * but the bubble fraction's is the difference predicted - measured of the two fractions (0.02
 * = 2 percentage points): relative to a small bubble, a small difference reads as a large error. */
typedef struct store_pair {
    store_run sim, meas;          /* owned copies (store_comparison_free frees them) */
    double err_iter, err_thr, err_bubble_fraction, err_mem;
} store_pair;

/* Summary of one metric over the pairs: mean absolute percentage error and the signed error of
 * largest magnitude (both as fractions: 0.05 = 5%), over the n pairs where it is defined; for the
 * bubble fraction, the mean absolute difference and the largest difference (fractions too). */
typedef struct store_err_stats { double mape, max_err; int n; } store_err_stats;

typedef struct store_comparison {
    store_pair *pairs;
    size_t n;
    size_t unmatched_measured;    /* measured runs with no simulated run of their configuration */
    size_t simulated;             /* simulated runs considered */
    store_err_stats iter, thr, bubble_fraction, mem;
} store_comparison;

/* A simulated run whose uid is STORE_PREDICTION_PREFIX followed by a measured run's uid is that
 * run's own prediction (pipelab run stores each measured run with the prediction made for it);
 * STORE_PREDICTION_PREFIX, a tag, STORE_PREDICTION_ALT_SEP and the measured run's uid, another
 * prediction made for it (`pipelab run`'s TAG-terms, TAG-nopasslen, ...), so that each pairs with
 * its own measured run in a database holding several measurements of one configuration. */
#define STORE_PREDICTION_PREFIX "prediction-"
#define STORE_PREDICTION_ALT_SEP '@'
/* Writes a fresh uuid-like run uid (what store_write_run gives a run without one) to buf[n >= 37]. */
void store_new_uid(char *buf, size_t n);

/* Pairs every measured run selected by f with its own prediction (STORE_PREDICTION_PREFIX) when
 * f selects one of the same configuration too, else with the newest simulated run of the same
 * configuration that was not made for a measured run (several measured runs may then share one
 * prediction; one made for another measured run is that run's alone); loose = 1 ignores
 * params_json. Pairs come oldest measured run first. Returns PL_OK and *out (free with
 * store_comparison_free). */
int store_compare(store *s, const store_filter *f, int loose, store_comparison *out, pl_err *e);
/* Frees what store_compare filled and zeroes it. */
void store_comparison_free(store_comparison *c);

/* One configuration measured several times (store_compare_repeats): the pairs of a comparison
 * whose measured runs share a configuration (store_same_config), with the spread of their
 * signed iteration-time errors (fractions). */
typedef struct store_repeat_group {
    size_t first;                 /* the group's first pair in store_comparison.pairs */
    int n;                        /* its pairs with a defined iteration-time error */
    double mean, sd, min, max;    /* of those errors; sd (sample, n - 1) NAN when n < 2 */
    double t;                     /* mean / (pooled_sd / sqrt n): the mean in standard errors of the
                                   * host's run-to-run spread; NAN without a pooled spread */
    int biased;                   /* 1 when |t| > the repeats' t_crit: a mean beyond the spread */
} store_repeat_group;

/* One schedule kind's lean over the groups (configurations) of that kind: whether a model that
 * is right on average over a grid leans one way for one kind, as over-predicting every zb-h2
 * would. mean is the mean of its groups' mean errors; se their sample standard deviation over
 * sqrt configs, which holds the configurations' own biases as well as the host's run-to-run
 * spread; t = mean / se against t_crit, the two-sided (1 - STORE_REPEATS_ALPHA) quantile of
 * Student's t with configs - 1 degrees of freedom (se, t and t_crit NAN below 2 configurations). */
typedef struct store_kind_lean {
    size_t first;                 /* the kind's first pair in store_comparison.pairs */
    int configs;                  /* its groups with a mean error */
    double mean, se, t, t_crit;
    int beyond;                   /* 1 when |t| > t_crit */
} store_kind_lean;

/* The groups of a comparison, oldest first, and what they say about noise against bias:
 * pooled_sd, the run-to-run standard deviation of one configuration's error, pooled over the
 * groups measured at least twice (sqrt of sum (n - 1) sd^2 over sum (n - 1)); over every group's
 * mean error, the MAPE, the signed mean and the largest; and largest_median, the median of the
 * largest |error| of one run of each group that an unbiased prediction would show if each error
 * were normal with standard deviation pooled_sd: pooled_sd Phi^-1((1 + 0.5^(1/groups)) / 2).
 * Bias apart from noise: t_crit, the two-sided 95% quantile of Student's t with the pooled
 * spread's degrees of freedom (sum of n - 1); each group's t against it (store_repeat_group), and
 * how many groups lie beyond it (biased; biased_short of them with a negative mean, the
 * prediction short), where an unbiased prediction puts 5% of them by chance; and the standard
 * error of signed_mean_of_means over the groups (the sample standard deviation of their means
 * over sqrt groups), whether the lean of them all is more than their spread. The runs of one grid
 * share the host's state of that grid, which the test takes as independent draws. Then each
 * schedule kind's lean over its groups (kinds, store_kind_lean). */
/* The level of store_repeats' test: a group is biased when its mean lies beyond the two-sided
 * (1 - STORE_REPEATS_ALPHA) quantile of Student's t, where an unbiased prediction puts
 * STORE_REPEATS_ALPHA of the groups by chance. */
#define STORE_REPEATS_ALPHA 0.05
typedef struct store_repeats {
    store_repeat_group *groups;
    size_t n;
    int repeated;                 /* groups with n >= 2 */
    double pooled_sd, mape_of_means, signed_mean_of_means, largest_mean, largest_median;
    int dof;                      /* the pooled spread's degrees of freedom: sum of n - 1 */
    double meas_sd, pred_sd;      /* how far apart the runs of one configuration ran, and their
                                   * predictions: the standard deviation of the natural log of
                                   * the measured (predicted) iteration time about its group's
                                   * mean, pooled as pooled_sd is (store_track); NAN as pooled_sd */
    double track_corr;            /* the correlation of those two deviations, pooled over the
                                   * groups: near 1 when each run's prediction follows its host's
                                   * state from run to run; NAN where either spread is 0 */
    double t_crit;                /* NAN without a pooled spread */
    int biased, biased_short;
    double signed_mean_se;        /* NAN with fewer than two groups */
    store_kind_lean *kinds;       /* [n_kinds] each schedule kind's lean, in the order the kinds
                                   * first appear among the groups */
    size_t n_kinds;
    int kinds_beyond;             /* kinds whose lean lies beyond their spread (store_kind_lean) */
} store_repeats;

/* Groups the pairs of c by their measured runs' configuration (loose as for store_compare) into
 * out; returns PL_OK or PL_ENOMEM (out freed). */
int store_compare_repeats(const store_comparison *c, int loose, store_repeats *out, pl_err *e);
/* Frees what store_compare_repeats filled and zeroes it. */
void store_repeats_free(store_repeats *r);

/* Compute alone against compute beside the other ranks' (store_overlap_note), per class: F, B,
 * I, W, STEP. An action's busy share is the share of its span during which the other ranks
 * computed (their mean, with more than two ranks; a rank's replicas count as that rank, an
 * overlapped F and B as compute); it is alone when that share is at most a tenth, beside when it
 * is at least nine tenths. */
enum { STORE_OVERLAP_STEP = 4, STORE_OVERLAP_KINDS = 5 };
extern const char *const store_overlap_kinds[STORE_OVERLAP_KINDS];
typedef struct store_overlap_class {
    int groups;                   /* (rank, stage) groups with two alone and two beside actions or more */
    double log_ratio_sum;         /* sum over them of log(median alone / median beside) */
    double least, largest;        /* the least and largest of those ratios */
    double alone_s, total_s;      /* the class's compute time times the other ranks' idle share (with
                                   * two ranks: its time while the other rank did not compute), and
                                   * all of it */
} store_overlap_class;
typedef struct store_overlap {
    store_overlap_class c[STORE_OVERLAP_KINDS];
} store_overlap;
/* Adds to acc the compute actions of one measured run's timeline: ops[0 .. n) ordered by rank
 * then seq (store_get_ops), `passes` passes of equal length per rank. A group's ratio leaves
 * out each stage's first F, B, I and W of a pass (they read the stage back into the caches:
 * first touch). Fewer than 2 ranks: nothing. Returns PL_OK; PL_EINPUT, acc unchanged, when the
 * ops are not in rank order, a rank's are not whole passes of equal length, or a stage number is
 * out of range; or PL_ENOMEM. */
int store_overlap_note(const store_op *ops, size_t n, int ranks, int passes, store_overlap *acc, pl_err *e);

/* Each compute class's typical action against its tail (store_tail_note), per class of
 * store_overlap_kinds: what the prediction prices and what a pass sums. Per (pair, rank) that
 * has the class on both timelines: the predicted mean action p, the measured median action m and
 * the measured mean action a (over all the measured passes' actions of the class). */
typedef struct store_tail_class {
    double *typical;              /* [n] p / m - 1: the prediction against the typical action */
    double *mean;                 /* [n] p / a - 1: against the mean action, what a pass sums */
    double *tail;                 /* [n] a / m - 1: the measured actions' tail */
    size_t n, cap;
    double lean_sum;              /* sum over the groups of the class's predicted minus measured
                                   * time per pass over the rank's measured compute per pass (the
                                   * STEP and an overlapped F and B included) */
} store_tail_class;
typedef struct store_tail {
    store_tail_class c[STORE_OVERLAP_KINDS];
    size_t groups;                /* (pair, rank) groups noted: lean_sum / groups is the class's
                                   * part of the mean signed error of a rank's compute */
    double meas_s[STORE_OVERLAP_KINDS + 1]; /* measured time per pass of each class, and of all */
} store_tail;
/* Adds to acc the ranks of one pair: pred[0 .. np) its predicted timeline (one pass), meas[0 ..
 * nm) its measured one (`passes` passes of the same actions), both ordered by rank then seq
 * (store_get_ops). A class a rank has on one timeline and not the other, or fewer than two
 * measured actions of, is left out of the ratios. Returns PL_OK; PL_EINPUT, acc unchanged, when
 * the timelines do not line up (ranks out of order, a rank's measured actions not `passes` times
 * its predicted ones); or PL_ENOMEM. */
int store_tail_note(const store_op *pred, size_t np, const store_op *meas, size_t nm, int ranks, int passes,
                    store_tail *acc, pl_err *e);
/* Sets m[0], m[1], m[2] to the medians over class c's groups of its typical, mean and tail
 * ratios (sorting each in place: a group's three no longer line up); NAN without groups. */
void store_tail_medians(store_tail_class *c, double m[3]);
/* Frees what store_tail_note filled and zeroes it. */
void store_tail_free(store_tail *t);

/* Each backward's error against its reuse distance (store_distance_note): per pair and rank,
 * each B and I of the predicted pass (the classes of store_distance_classes) with the number of
 * compute actions its rank's list runs between the microbatch's forward on the same stage and
 * it, matched to the same action in every measured pass. Distances fall into the buckets 0, 1,
 * 2-3, 4-7, 8-15 and 16 or more (store_distance_bucket). */
enum { STORE_DISTANCE_CLASSES = 2, STORE_DISTANCE_BUCKETS = 6 };
extern const char *const store_distance_classes[STORE_DISTANCE_CLASSES];
typedef struct store_distance_cell {
    double *err;                  /* [n] per action: predicted over measured (its median over the
                                   * passes) - 1 */
    size_t n, cap;
    size_t pairs;                 /* pairs with an action here */
    double meas_s;                /* the actions' measured time per pass (their mean over the passes) */
} store_distance_cell;
/* What the other ranks computed during a backward's measured span (its shares averaged over the
 * passes): STORE_BESIDE_ALONE under a quarter of the span; else STORE_BESIDE_F when forwards took
 * at least three quarters of what they computed, STORE_BESIDE_BACKWARD when backwards (B, I, W,
 * OVERLAP) did, STORE_BESIDE_MIXED otherwise. A STEP or a transfer counts as not computing. */
enum { STORE_BESIDE_ALONE, STORE_BESIDE_F, STORE_BESIDE_BACKWARD, STORE_BESIDE_MIXED, STORE_BESIDE_KINDS };
extern const char *const store_beside_names[STORE_BESIDE_KINDS];
typedef struct store_distance {
    store_distance_cell c[STORE_DISTANCE_CLASSES][STORE_DISTANCE_BUCKETS];
    double class_s[STORE_DISTANCE_CLASSES]; /* each class's meas_s over all buckets */
    /* the same backwards by what the other ranks computed beside them, at distance 0 ([0]) and
     * beyond ([1]) */
    store_distance_cell beside[STORE_DISTANCE_CLASSES][STORE_BESIDE_KINDS][2];
} store_distance;
/* Returns the bucket of distance d (>= 0): the least b with d < store_distance_bucket_from(b + 1),
 * the last bucket holding every larger distance. */
int store_distance_bucket(long d);
/* Returns the least distance of bucket b: 0, 1, 2, 4, 8, 16. */
long store_distance_bucket_from(int b);
/* Adds to acc the backwards of one pair (by distance, and by what the other ranks computed beside
 * each, acc->beside), as store_tail_note takes it: pred[0 .. np) one
 * predicted pass, meas[0 .. nm) `passes` measured passes of the same actions, ordered by rank then
 * seq. A backward without a forward of its microbatch on its stage earlier in its rank's list
 * (an overlapped one's) is left out. Returns PL_OK; PL_EINPUT, acc unchanged, when the timelines
 * do not line up (as store_tail_note, or a measured pass's action not the predicted one at the
 * same place); or PL_ENOMEM. */
int store_distance_note(const store_op *pred, size_t np, const store_op *meas, size_t nm, int ranks, int passes,
                        store_distance *acc, pl_err *e);
/* Sets *median and *mean of cell x's errors (sorting them in place); NAN without actions. */
void store_distance_stats(store_distance_cell *x, double *median, double *mean);
/* Frees what store_distance_note filled and zeroes it. */
void store_distance_free(store_distance *t);
/* Returns 1 when the two runs share a configuration (see store_match_params). */
int store_same_config(const store_run *a, const store_run *b, int loose);
/* Finds the raw JSON text of the value at a dotted path ("model.spec") of a JSON object;
 * returns 1 and *val, *len (pointing into json), or 0 when it is absent or json is malformed. */
int store_json_get(const char *json, const char *path, const char **val, size_t *len);
/* Reads the runs selected by f (kind NULL = both kinds; the tag used is f->tag for both, or
 * sim_tag / measured_tag per kind) oldest first into a malloc'd array (store_runs_free). */
int store_select_runs(store *s, const store_filter *f, const char *kind, store_run **runs, size_t *n, pl_err *e);

/* Figures (plot.c). Each writes a gnuplot data file DATA and a script SCRIPT that draws it into
 * OUTPUT (pngcairo, or svg when svg = 1); store_plot_gnuplot runs the script. */
typedef enum store_plot_kind {
    STORE_PLOT_TIMELINE, STORE_PLOT_BUBBLE, STORE_PLOT_THROUGHPUT, STORE_PLOT_MEMORY, STORE_PLOT_ACCURACY
} store_plot_kind;

/* The throughput figure's x axis: the pipeline depth p (ranks), the stages (p x chunks per
 * rank), or the microbatches per iteration. */
typedef enum store_plot_x { STORE_X_RANKS, STORE_X_STAGES, STORE_X_MICROBATCHES } store_plot_x;

typedef struct store_plot_opts {
    store_plot_kind kind;
    const char *output;           /* figure path (.png or .svg) */
    const char *data;             /* data file path written for gnuplot */
    const char *script;           /* gnuplot script path */
    int svg;
    const char *title;            /* NULL = a title from the data */
    const char *run;              /* timeline: the run (id, uid or uid prefix) */
    int all_passes;               /* timeline of a measured run: every timed pass (default: the
                                   * median pass, params_json's median_passes[0]) */
    store_filter filter;          /* the other kinds: which runs */
    store_plot_x x;               /* throughput: the x axis (default: ranks) */
    int loose;                    /* accuracy: ignore params_json when pairing */
} store_plot_opts;

/* Exports the data and writes the script for o (files at o->data and o->script). Returns PL_OK,
 * or PL_EINPUT when there is nothing to plot (the message says what is missing). */
int store_plot_prepare(store *s, const store_plot_opts *o, pl_err *e);
/* Returns a malloc'd path of the gnuplot program: $PIPELAB_GNUPLOT, else "gnuplot" searched on
 * PATH; NULL with e filled (PL_EINPUT, naming the install command) when there is none. */
char *store_gnuplot_find(pl_err *e);
/* Reads $PIPELAB_GNUPLOT_TIMEOUT into *seconds (unset or empty: STORE_GNUPLOT_TIMEOUT_S).
 * Returns PL_OK, or PL_EINPUT with e for a value that is not a number of seconds above 0 and at
 * most STORE_GNUPLOT_TIMEOUT_MAX_S. */
int store_gnuplot_timeout(double *seconds, pl_err *e);
/* Runs gnuplot (path from store_gnuplot_find) on script, its input /dev/null, in a process group
 * of its own, and checks that output was written and is not empty. A gnuplot still running after
 * limit_s seconds (store_gnuplot_timeout), or when pipelab gets SIGINT, SIGTERM or SIGHUP, is
 * killed with its group, and output removed; a gnuplot killed by a signal leaves no output
 * either. Returns PL_OK or an error code (gnuplot's messages go to stderr). */
int store_plot_gnuplot(const char *gnuplot, const char *script, const char *output, double limit_s, pl_err *e);

#endif
