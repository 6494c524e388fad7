/* cli.h: shared pieces of the pipelab program: subcommand entry points and error printing. */
#ifndef PL_CLI_H
#define PL_CLI_H

#include "pl_common.h"

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

/* Prints "pipelab: <message>" on stderr and returns CLI_EUSER (or CLI_EUSAGE). */
int cli_fail(const pl_err *e);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses an int flag value in [lo, hi]; on error prints a usage error and returns -1. */
int cli_int_arg(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out);
/* Returns 1 when stdout (fd 1) or stderr (fd 2) is a terminal. */
int cli_isatty(int fd);
/* Writes a buffer to path, or to stdout when path is NULL or "-"; returns an exit code. */
int cli_write_output(const char *path, const pl_buf *b);

#endif
