/* cli_rows.h: the tables of CLI rows that test_sched_flags.c and test_silent_flags.c run (a
 * command, its arguments, the exit code and the exact stderr), and what the cli tests share. */
#ifndef CLI_ROWS_H
#define CLI_ROWS_H

#define GOLDEN PIPELAB_TESTS_DIR "/golden/"
#define BAD PIPELAB_TESTS_DIR "/bad/"

/* A usage error's whole stderr, as pipelab prints it for command c. */
#define USAGE(c, msg) "pipelab " #c ": " msg "\n(see 'pipelab " #c " --help')\n"
/* simulate without the database; run small, fast and unstored */
#define SIMX "--no-db "
#define RUNX "--no-db --no-predict --oversubscribe --width 8 --warmup 0 --timed 1 "

/* One row: the subcommand, its arguments, the exit code and the exact stderr (NULL: any one
 * "pipelab: " line). */
typedef struct cli_row {
    const char *cmd;
    const char *args;
    int code;
    const char *err;
} cli_row;

/* Returns 1 when this build has the executor (`pipelab run`). */
int cli_test_have_run(void);
/* Runs row c in the folder dir and asserts its exit code and stderr (stdout is dropped). */
void cli_test_check_row(const char *dir, const cli_row *c);

#endif
