/* simulate_int.h: what the files of `pipelab simulate` share: the flags it parsed
 * (simulate_opts.c), the parameters stored with a run (simulate_params.c), the run every output
 * reports and its metric tables and outputs (simulate_out.c), and the database the run goes into
 * (simulate_store.c); cmd_simulate.c drives them. Only cli/ includes it. */
#ifndef PL_SIMULATE_INT_H
#define PL_SIMULATE_INT_H

#include "cli.h"
#include "cli_layout.h"
#include "cost.h"
#include "pl_sched.h"
#include "sim.h"
#include "store.h" /* the stored columns the metric table names */

#define MAX_REPL_FLAGS 256
#define MAX_SET_FLAGS 256

typedef struct opts {
    cli_sched_args a;
    const char *stage_costs, *trace_json, *format, *tag, *db;
    sim_basic b;
    sim_time_per time_per; /* what the uniform flag values describe */
    double share;          /* the part of them each stage gets (sim_time_per_share) */
    sim_config c;
    int repl_stage[MAX_REPL_FLAGS], repl_n[MAX_REPL_FLAGS]; /* --replicas-stage S=N, in order */
    int fail_on_oom, repeat, trace, no_db, have_cap;
    /* the long names (without "--") of the first flag-driven cost flag and of the first flag
     * that needs --model, for the refusals of check_opts */
    const char *basic_flag, *model_flag;
    const char *sets[MAX_SET_FLAGS];
    /* --model and the flags that go with it; its replicas (--replicas, --replicas-stage) serve
     * flag runs too, and point at repl_stage and repl_n */
    sim_model_spec spec;
    const sim_model_setup *ms; /* set once the model side is built (params_json, table) */
    cli_layout lo;             /* --tp, --dp, --pp, --global-batch, ... (cli_layout.c) */
    sim_layout_report lr;      /* a layout run's figures, once simulated (have_lr) */
    int have_lr;
    int ar_link;               /* --allreduce-link: a cost_transport or CLI_AR_HARDWARE */
    int ar_used;               /* the transport whose measured all-reduce prices REDUCE_GRAD, or -1 */
} opts;

/* What every output of a run reads. */
typedef struct report {
    const opts *o;
    const sched *s;
    const sim_result *r;           /* the first run's result */
    const sim_repeat_stats *st;    /* statistics over the --repeat runs */
} report;

/* Parses argv into o; returns -1 to continue, or an exit code (--help: CLI_OK). */
int simulate_parse(int argc, char **argv, opts *o);

/* Appends the JSON object of the cost and hardware parameters (stored with the run), with the
 * files the run read (cli_inputs_json) as its last key. */
void simulate_params_json(const opts *o, pl_buf *b);

/* Prints the run in the chosen format (with the trace table under --trace) and writes the
 * Chrome trace of --trace-json. Returns an exit code. */
int simulate_write_outputs(const report *p);

/* The results database of a run, and whether this command created its file. */
typedef struct simulate_db {
    store *db;   /* NULL with --no-db */
    int created; /* 1: the file did not exist before simulate_db_open; dev and ino name it */
    unsigned long long dev, ino;
    size_t made_from; /* > 0: the folders of its path from this length on did not exist either */
    int stored;  /* 1: the run was written to it */
} simulate_db;

#ifdef PIPELAB_HAVE_PL_RESULTS
/* Fills run and rm[ranks] with what the metric tables store, and run with what describes the
 * run (command line cmdline, parameters pj). */
void simulate_store_rows(const report *p, const char *cmdline, const char *pj, store_run *run, store_rank_metric *rm);

/* Opens o's database unless --no-db, before any work: a read-only, corrupt or newer database is
 * refused up front. Returns CLI_OK, or an exit code after printing why. */
int simulate_db_open(const opts *o, simulate_db *d);
/* Stores the run (with per-action rows when traced) in d, the command line being argc and argv.
 * Returns an exit code. */
int simulate_store(simulate_db *d, const report *p, int argc, char **argv);
/* Closes d; when nothing was stored, the file (and folders) this command created are removed,
 * so that bad input leaves no empty database behind (an existing database is never removed). */
void simulate_db_close(simulate_db *d);
#endif

#endif
