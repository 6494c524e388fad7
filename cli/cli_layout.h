/* cli_layout.h: the parallel-layout flags of simulate (--tp, --dp, --pp, --global-batch,
 * --sequence-parallel, --recompute none|selective|full, --distributed-optimizer, --megatron) and
 * the throughput and memory figures a layout run prints and stores. */
#ifndef PL_CLI_LAYOUT_H
#define PL_CLI_LAYOUT_H

#include "cli.h"
#include "cost.h"
#include "sim.h"

/* Option values (between the shared ones at 900-999 and the subcommands' own from 1000). */
enum { CLI_O_TP = 970, CLI_O_DP, CLI_O_PP, CLI_O_GBATCH, CLI_O_SEQPAR, CLI_O_DISTOPT, CLI_O_MEGATRON, CLI_O_GPUS, CLI_O_FLASH, CLI_O_NOSG };
#define CLI_LAYOUT_LONG_OPTS                                                                           \
    {"tp", required_argument, 0, CLI_O_TP}, {"dp", required_argument, 0, CLI_O_DP},                  \
    {"pp", required_argument, 0, CLI_O_PP}, {"global-batch", required_argument, 0, CLI_O_GBATCH},    \
    {"sequence-parallel", no_argument, 0, CLI_O_SEQPAR},                                              \
    {"distributed-optimizer", no_argument, 0, CLI_O_DISTOPT}, {"megatron", required_argument, 0, CLI_O_MEGATRON},        \
    {"gpus", required_argument, 0, CLI_O_GPUS}, {"flash-attention", no_argument, 0, CLI_O_FLASH}, \
    {"no-scatter-gather", no_argument, 0, CLI_O_NOSG}

/* The layout flags as given, and the layout they make. */
typedef struct cli_layout {
    cost_layout l;
    int active;               /* some layout flag was given (or --recompute selective) */
    const char *first;        /* the first of them ("--sequence-parallel"), for the refusals */
    int tp, dp, pp, gbatch;   /* 0 = not given */
    int gpus;                 /* --gpus: D = gpus / (T P); 0 = not given */
    int seqpar, distopt, flash, nosg;
    int recompute;            /* -1 = not given, else a cost_recompute */
    const char *megatron;     /* --megatron's text, or NULL */
} cli_layout;

void cli_layout_init(cli_layout *lo);
/* Applies option c (value v) when it is a layout flag, or --recompute (which takes selective
 * too; the schedule gets full or none). Returns -1 when c is neither, CLI_OK or CLI_EUSAGE. */
int cli_layout_opt(const char *cmd, int c, const char *v, cli_layout *lo, cli_sched_args *a);
/* After the flags: when a layout was asked for, refuses it without the model (--model or
 * --megatron), with --from or with --microbatches (naming the flag that asked for it), merges --megatron's settings with the flags
 * (contradictions refused), reads the transformer from spec->model, checks the layout, and fills
 * the schedule's ranks (P), chunks, kind (interleaved when v > 1, else 1f1b, unless --kind) and
 * microbatches (B / (b D)), and spec->layout. mbs: --microbatch-size (0 = not given).
 * Returns -1 to go on, CLI_EUSAGE (bad flags) or CLI_EUSER (a layout that does not divide). */
int cli_layout_finish(const char *cmd, cli_layout *lo, cli_sched_args *a, sim_model_spec *spec, int mbs);
/* Appends the layout's figures (sim_layout_report) in format fmt ("table", "csv" header or row,
 * "json" object) to b: for csv, header = 1 writes the column names. */
void cli_layout_table(const sim_layout_report *r, const cost_layout *l, pl_buf *b);
void cli_layout_csv(const sim_layout_report *r, int header, pl_buf *b);
void cli_layout_json(const sim_layout_report *r, const cost_layout *l, pl_buf *b);

#endif
