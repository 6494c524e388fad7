/* run_opts.h: the flags of `pipelab run` (run_opts.c parses them and prints --help) and what
 * they select, for cmd_run.c, which runs them. Only cli/ includes it. */
#ifndef PL_RUN_OPTS_H
#define PL_RUN_OPTS_H

#include <stdint.h>

#include "cli.h"
#include "run_drive.h"

#define MAX_SPLIT 4096                   /* the most stages --stage-blocks gives */
#define MAX_REPL_FLAGS 256               /* the most --replicas-stage flags */

/* What the flags of `pipelab run` select. */
typedef struct run_opts {
    cli_sched_args a;
    cli_exec_args x; /* --width, --depth, --ffn, --microbatch-size, --seed, --backend, --precision */
    const char *transport, *profile, *save_profile, *format, *dump, *tag, *db;
    const char *ptiming;
    int cuda, between;
    int preps, pconc, no_predict, trace, no_db, mpi;
    int no_host_probe;               /* --no-host-probe */
    double steady_pct;               /* --steady PCT (0 = not given) */
    int timed_max;                   /* --timed-max N (0 = not given) */
    int terms;                       /* --terms: the measured terms in the prediction */
    int pass_length;                 /* --pass-length-term: the prediction with it (off by default) */
    int jitter;                      /* the jitter and drift terms in the prediction (1; 0: --no-jitter-term) */
    int sharing;                     /* the sharing term in the prediction (by default 1 on threads, 0 over
                                      * MPI; --sharing-term 1, --no-sharing-term 0) */
    int share_class;                 /* --sharing-per-class: the sharing term per class where the
                                      * profile measured the backwards' phases (0: the forwards'
                                      * one ratio on every class) */
    double intr_share, intr_rate;    /* --interruptions SHARE,RATE (0, 0: not given) */
    double intr_short_share, intr_short_rate; /* its SHORT_SHARE,SHORT_RATE (0, 0: not given) */
    int nsplit, split[MAX_SPLIT];
    const char *partition;           /* --partition FILE */
    int nrepl, repl_stage[MAX_REPL_FLAGS], repl_n[MAX_REPL_FLAGS]; /* --replicas-stage S=N, in order */
    int *replicas;                   /* [stages] what o->c.replicas points to (owned), or NULL */
    uint64_t seed;
    exec_config c;
} run_opts;

/* Parses argv into o: the executor's defaults (exec_config_default), then the flags. Returns -1
 * to continue, or an exit code (CLI_OK after --help, CLI_EUSAGE or CLI_EUSER after printing what
 * is wrong). */
int run_opts_parse(int argc, char **argv, run_opts *o);

#endif
