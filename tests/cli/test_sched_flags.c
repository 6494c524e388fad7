/* test_sched_flags.c: the schedule-selection flags (--kind, --ranks, --microbatches, --chunks,
 * --iterations, --recompute, --from, --legacy-letters) that `pipelab schedule`, `simulate` and
 * `run` share: the same bad and good values on each command, with each command's exit code and
 * its exact message. `run` has tighter limits (one thread per rank): --ranks up to 4096,
 * --microbatches up to 2^20, --iterations up to 2^16. A value at a limit is shown accepted by a
 * later usage error (--format bogus), which is reported only once the flags parsed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_rows.h"
#include "pl_test.h"

/* The rows that every command answers alike, apart from its name. */
#define COMMON_ROWS(c, x)                                                                            \
    {#c, x "", 2, USAGE(c, "give either --kind or --from")},                                         \
    {#c, x "--kind gpipe --from " GOLDEN "gpipe_p2_m3.sched", 2, USAGE(c, "give either --kind or --from")}, \
    {#c, x "--ranks 2 --microbatches 4", 2, USAGE(c, "give either --kind or --from")},                \
    {#c, x "--kind gpipe --ranks 2", 2, USAGE(c, "--kind needs --ranks and --microbatches")},         \
    {#c, x "--kind gpipe --microbatches 4", 2, USAGE(c, "--kind needs --ranks and --microbatches")},  \
    {#c, x "--kind gpipe", 2, USAGE(c, "--kind needs --ranks and --microbatches")},                  \
    {#c, x "--ranks 0", 2, USAGE(c, "--ranks: needs a whole number between 1 and " c##_RANKS " (got '0')")}, \
    {#c, x "--ranks abc --kind gpipe", 2, USAGE(c, "--ranks: needs a whole number between 1 and " c##_RANKS " (got 'abc')")}, \
    {#c, x "--ranks -3", 2, USAGE(c, "--ranks: needs a whole number between 1 and " c##_RANKS " (got '-3')")}, \
    {#c, x "--ranks " c##_RANKS_OVER, 2, USAGE(c, "--ranks: needs a whole number between 1 and " c##_RANKS " (got '" c##_RANKS_OVER "')")}, \
    {#c, x "--microbatches 0", 2, USAGE(c, "--microbatches: needs a whole number between 1 and " c##_MB " (got '0')")}, \
    {#c, x "--microbatches " c##_MB_OVER, 2, USAGE(c, "--microbatches: needs a whole number between 1 and " c##_MB " (got '" c##_MB_OVER "')")}, \
    {#c, x "--chunks 0", 2, USAGE(c, "--chunks: needs a whole number between 1 and 4096 (got '0')")},  \
    {#c, x "--chunks 4097", 2, USAGE(c, "--chunks: needs a whole number between 1 and 4096 (got '4097')")}, \
    {#c, x "--iterations 0", 2, USAGE(c, "--iterations: needs a whole number between 1 and " c##_IT " (got '0')")}, \
    {#c, x "--iterations " c##_IT_OVER, 2, USAGE(c, "--iterations: needs a whole number between 1 and " c##_IT " (got '" c##_IT_OVER "')")}, \
    {#c, x "--recompute some", 2, USAGE(c, "--recompute must be " c##_RECOMPUTE " (got 'some')")},        \
    {#c, x "--recompute", 2, USAGE(c, "unknown or incomplete option '--recompute'")},                \
    {#c, x "--kind gpipe --ranks 2 --microbatches", 2, USAGE(c, "unknown or incomplete option '--microbatches'")}, \
    {#c, x "--from", 2, USAGE(c, "unknown or incomplete option '--from'")},                          \
    {#c, x "--legacy-letters=yes --from x.csv", 2, USAGE(c, "unknown or incomplete option '--legacy-letters=yes'")}, \
    /* the first bad flag is the one reported */                                                    \
    {#c, x "--chunks 0 --ranks 0", 2, USAGE(c, "--chunks: needs a whole number between 1 and 4096 (got '0')")}, \
    /* values at the limits are accepted: the later --format check is what fails */               \
    {#c, x "--kind gpipe --ranks " c##_RANKS " --microbatches " c##_MB " --chunks 4096 --iterations " c##_IT \
          " --recompute full --format bogus", 2, USAGE(c, "--format must be table, csv or json")},  \
    {#c, x "--kind gpipe --ranks 1 --microbatches 1 --chunks 1 --iterations 1 --recompute none --format bogus", 2, \
     USAGE(c, "--format must be table, csv or json")},                                               \
    {#c, x "--from " GOLDEN "gpipe_p2_m3.sched --legacy-letters --ranks 0", 2,                       \
     USAGE(c, "--ranks: needs a whole number between 1 and " c##_RANKS " (got '0')")},                 \
    /* errors past the parser */                                                                     \
    {#c, x "--kind nosuch --ranks 2 --microbatches 4", 1, NULL},                                     \
    {#c, x "--from " BAD "absent.sched", 1, NULL},                                                   \
    {#c, x "--from " BAD "legacy_letters.csv", 1, NULL},                                             \
    /* good: generated, loaded, and loaded with the older letters */                                \
    {#c, x "--kind 1f1b --ranks 2 --microbatches 4", 0, ""},                                         \
    {#c, x "--kind interleaved --ranks 2 --microbatches 4 --chunks 2 --recompute full", 0, ""},      \
    {#c, x "--kind pipedream --ranks 2 --microbatches 4 --iterations 2", 0, ""},                     \
    {#c, x "--from " GOLDEN "1f1b_p3_m4.csv", 0, ""},                                                \
    {#c, x "--from " GOLDEN "1f1b_p3_m4.sched", 0, ""},                                              \
    {#c, x "--from " BAD "legacy_letters.csv --legacy-letters", 0, ""}

#define schedule_RANKS "65536"
#define schedule_RANKS_OVER "65537"
#define schedule_MB "16777216"
#define schedule_MB_OVER "16777217"
#define schedule_IT "1048576"
#define schedule_IT_OVER "1048577"
#define simulate_RANKS schedule_RANKS
#define simulate_RANKS_OVER schedule_RANKS_OVER
#define simulate_MB schedule_MB
#define simulate_MB_OVER schedule_MB_OVER
#define simulate_IT schedule_IT
#define simulate_IT_OVER schedule_IT_OVER
/* simulate's --recompute also takes selective (the GPU-cluster layout's) */
#define schedule_RECOMPUTE "none or full"
#define simulate_RECOMPUTE "none, selective or full"
#define run_RECOMPUTE "none or full"
#define run_RANKS "4096"
#define run_RANKS_OVER "4097"
#define run_MB "1048576"
#define run_MB_OVER "1048577"
#define run_IT "65536"
#define run_IT_OVER "65537"

static const cli_row cases[] = {
    COMMON_ROWS(schedule, "--check "),
    COMMON_ROWS(simulate, SIMX),
    COMMON_ROWS(run, RUNX),
    /* run's own limits, which schedule and simulate accept (--format bogus: an accepted value
     * fails fast instead of running) */
    {"run", RUNX "--kind gpipe --ranks 65536 --microbatches 4 --format bogus", 2,
     USAGE(run, "--ranks: needs a whole number between 1 and 4096 (got '65536')")},
    {"run", RUNX "--kind gpipe --ranks 2 --microbatches 16777216 --format bogus", 2,
     USAGE(run, "--microbatches: needs a whole number between 1 and 1048576 (got '16777216')")},
    {"run", RUNX "--kind gpipe --ranks 2 --microbatches 4 --iterations 1048576 --format bogus", 2,
     USAGE(run, "--iterations: needs a whole number between 1 and 65536 (got '1048576')")},
    {NULL, NULL, 0, NULL},
};

/* cli_rows.h */
int cli_test_have_run(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' run --help", PIPELAB_BIN);
    int rc = pl_test_run(cmd, &out);
    free(out);
    return rc == 0;
}

/* Every row: its exit code, and its exact stderr (NULL: any one "pipelab" error line). */
static void test_flag_table(void) {
    int exec = cli_test_have_run();
    for (const cli_row *c = cases; c->cmd; c++) {
        if (!exec && strcmp(c->cmd, "run") == 0) continue;
        cli_test_check_row("/tmp", c);
    }
    if (!exec) pl_test_skip("this build has no executor: the `pipelab run` rows were not run");
}

/* cli_rows.h */
void cli_test_check_row(const char *dir, const cli_row *c) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "( cd '%s' && '%s' %s %s >/dev/null )", dir, PIPELAB_BIN, c->cmd, c->args);
    char *err = NULL;
    int rc = pl_test_run(cmd, &err);
    const char *got = err ? err : "";
    int ok = rc == c->code && (c->err ? strcmp(got, c->err) == 0
                                      : strncmp(got, "pipelab: ", 9) == 0 && strchr(got, '\n') == got + strlen(got) - 1);
    if (!ok)
        fprintf(stderr, "\n  pipelab %s %s: want exit %d and '%s', got exit %d and '%s'\n", c->cmd, c->args, c->code,
                c->err ? c->err : "(one pipelab: line)", rc, got);
    CU_ASSERT(ok);
    free(err);
}

void test_sched_flags_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"schedule, simulate and run parse the schedule flags alike", test_flag_table},
        {NULL, NULL},
    };
    pl_test_suite("cli schedule flags", tcases);
}
