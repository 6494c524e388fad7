/* test_flag_values.c: a malformed or out-of-range numeric flag value is a usage error on every
 * command (DESIGN.md §8: exit 2), reported as "pipelab CMD: --flag: what is wrong" followed by
 * the --help hint, before any work; and values in range are accepted (the row then fails later,
 * on a usage error of its own, which shows the value parsed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"

/* One row: the command line after the program, the exit code, the exact first line of stderr
 * (without the command's name prefix, added from cmd) and the command, for the hint line. */
typedef struct value_case {
    const char *cmd;
    const char *args;
    int code;
    const char *first_line;
} value_case;

#define SIM "--no-db --kind gpipe --ranks 2 --microbatches 4 "
#define RUN "--no-db --no-predict --oversubscribe --kind gpipe --ranks 2 --microbatches 2 --width 8 --warmup 0 --timed 1 "
#define MODEL "--model uniform:layers=8,fwd_s=1e-3 "
/* run's usage error for --interruptions VALUE */
#define INTR_USAGE(value)                                                                                              \
    "--interruptions: needs SHARE,RATE or SHARE,RATE,SHORT_SHARE,SHORT_RATE with each share from 0 to 0.5 (the two "  \
    "together too) and each rate from 0 to 1e+06 a second (got '" value "'; `pipelab profile --interruptions S` "      \
    "measures them)"

static const value_case cases[] = {
    /* the audit's examples: malformed, negative and overflowing times are usage errors now */
    {"simulate", SIM "--tf abc", 2, "--tf: needs a finite number (got 'abc')"},
    {"simulate", SIM "--tf -1", 2, "--tf: must not be negative (got '-1')"},
    {"simulate", SIM "--tf 1e400", 2, "--tf: needs a finite number (got '1e400')"},
    {"simulate", SIM "--tf nan", 2, "--tf: needs a finite number (got 'nan')"},
    {"simulate", SIM "--tb inf", 2, "--tb: needs a finite number (got 'inf')"},
    {"simulate", SIM "--tw ''", 2, "--tw: needs a finite number (got '')"},
    {"simulate", SIM "--tcomm 1ms", 2, "--tcomm: needs a finite number (got '1ms')"},
    /* a value too close to 0 for a double (strtod's underflow) is named so, not as not a number */
    {"simulate", SIM "--tf 1e-320", 2,
     "--tf: too close to 0 (below 2.2e-308, the smallest normal double): give 0 or a larger value (got '1e-320')"},
    {"simulate", SIM "--latency -4e-324", 2,
     "--latency: too close to 0 (below 2.2e-308, the smallest normal double): give 0 or a larger value (got '-4e-324')"},
    {"simulate", "--no-db --kind gpipe --ranks 2 --microbatches 8x", 2,
     "--microbatches: needs a whole number between 1 and 16777216 (got '8x')"},
    {"simulate", SIM "--latency -0.5", 2, "--latency: must not be negative (got '-0.5')"},
    {"simulate", SIM "--bandwidth 0", 2,
     "--bandwidth: must be > 0 bytes per second (got '0'): a link of bandwidth 0 never delivers; for free transfers "
     "leave it out or give --tcomm 0"},
    {"simulate", SIM "--inter-bandwidth -1", 2, "--inter-bandwidth: must not be negative (got '-1')"},
    {"simulate", SIM "--capacity 1e300", 2, "--capacity: must be at most 9.2e+18 (got '1e300')"},
    {"simulate", SIM "--param-bytes 12GB", 2, "--param-bytes: needs a finite number (got '12GB')"},
    {"simulate", SIM "--w-stash-fraction 1.5", 2, "--w-stash-fraction: must be at most 1 (got '1.5')"},
    {"simulate", SIM "--cv 1e300", 2, "--cv: must be at most 100 (got '1e300')"},
    {"simulate", SIM "--dtype-bytes 0", 2, "--dtype-bytes: must be > 0"},
    {"simulate", SIM "--seed -1", 2, "--seed: needs a whole number between 0 and 9223372036854775807 (got '-1')"},
    {"simulate", SIM "--repeat 0", 2, "--repeat: needs a whole number between 1 and 1000000 (got '0')"},
    {"simulate", SIM "--seed 9223372036854775807 --repeat 2", 2,
     "--seed 9223372036854775807 with --repeat 2: the runs' seeds (--seed to --seed + 1) must stay within "
     "9223372036854775807"},
    {"simulate", SIM "--ranks-per-node x", 2, "--ranks-per-node: needs a whole number between 0 and 65536 (got 'x')"},
    {"simulate", SIM "--replicas-stage 0=0", 2, "--replicas-stage: needs S=N with S >= 0 and N >= 1 (got '0=0')"},
    {"simulate", SIM "--max-memory lots", 2, "--max-memory: needs a size in bytes such as 8e9 or 16GiB (got 'lots')"},
    /* in range: parsed, and the later --format check is what fails */
    {"simulate", SIM "--tf 1e-3 --tb 0 --ti 2.3e-308 --latency 0 --bandwidth 1e9 --cv 100 --w-stash-fraction 1 --capacity 9e18 --format x",
     2, "--format must be table, csv or json"},
    /* the other commands */
    {"schedule", "--check --kind gpipe --ranks 2 --microbatches 4 --unit-f -1", 2,
     "--unit-f: needs a whole number between 0 and 1000 (got '-1')"},
    {"schedule", "--check --kind gpipe --ranks 2.5 --microbatches 4", 2,
     "--ranks: needs a whole number between 1 and 65536 (got '2.5')"},
    {"model", MODEL "--stages 0", 2, "--stages: needs a whole number between 1 and 1048576 (got '0')"},
    {"model", MODEL "--microbatch 1e3", 2, "--microbatch: needs a whole number between 1 and 1073741824 (got '1e3')"},
    {"partition", MODEL "--workers 0", 2, "--workers: needs a whole number between 1 and 4096 (got '0')"},
    {"partition", MODEL "--workers 2 --capacity -5", 2, "--capacity: needs a positive number of bytes or 'device' (got '-5')"},
    {"calibrate", "--observations x.csv --microbatch 0", 2, "--microbatch: needs a whole number between 1 and 16777216 (got '0')"},
    /* --name goes into the hardware file written, which must read back */
    {"calibrate", "--observations x.csv --name \"$(printf 'a\\tb')\"", 2,
     "--name has a character that is not printable ASCII (the [hardware] name of the file written)"},
    {"calibrate", "--observations x.csv --name 'lab;2'", 2,
     "--name has one of ; # = [ ], which the hardware file's syntax uses (the [hardware] name of the file written)"},
    {"calibrate", "--observations x.csv --name ' lab'", 2, "--name begins or ends with a space (the [hardware] name of the file written)"},
    {"calibrate", "--observations x.csv --name ''", 2, "--name is empty (the [hardware] name of the file written)"},
    {"calibrate", "--observations x.csv --name 0123456789012345678901234567890123456789012345678901234567890123", 2,
     "--name is longer than 63 characters (the [hardware] name of the file written)"},
    {"db", "list --limit -1", 2, "--limit: needs a whole number between 0 and 1000000000 (got '-1')"},
    {"compare", "--ranks many", 2, "--ranks: needs a whole number between 1 and 1048576 (got 'many')"},
    {"plot", "bubble --microbatches 0", 2, "--microbatches: needs a whole number between 1 and 1073741824 (got '0')"},
    {NULL, NULL, 0, NULL},
};

/* The executor's flags (only where this build has `pipelab run` and `pipelab profile`). */
static const value_case exec_cases[] = {
    {"run", RUN "--lr abc", 2, "--lr: needs a finite number (got 'abc')"},
    {"run", RUN "--momentum -0.9", 2, "--momentum: must not be negative (got '-0.9')"},
    {"run", RUN "--momentum 2", 2, "--momentum: must be below 1 (got '2')"},
    {"run", RUN "--momentum 1", 2, "--momentum: must be below 1 (got '1')"},
    {"run", RUN "--timeout 0", 2, "--timeout: must be > 0 (got '0')"},
    {"run", RUN "--timeout 1e400", 2, "--timeout: needs a finite number (got '1e400')"},
    {"run", RUN "--mem-budget 1e300", 2, "--mem-budget: must be at most 9.2e+18 (got '1e300')"},
    {"run", RUN "--width 0", 2, "--width: needs a whole number between 1 and 65536 (got '0')"},
    {"run", RUN "--seed x", 2, "--seed: needs a whole number between 0 and 9223372036854775805 (got 'x')"},
    {"run", RUN "--stage-blocks 1,,2", 2, "--stage-blocks: needs whole numbers >= 1 separated by commas (got '1,,2')"},
    {"run", RUN "--tag 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789X", 2,
     "--tag: at most 200 characters (got 201): the predictions stored beside the run take its tag with a suffix"},
    {"run", RUN "--stage-blocks 1,1,", 2, "--stage-blocks: needs whole numbers >= 1 separated by commas (got '1,1,')"},
    {"run", RUN "--interruptions 0.01", 2, INTR_USAGE("0.01")},
    {"run", RUN "--interruptions 0.01,5,0.02", 2, INTR_USAGE("0.01,5,0.02")},
    {"run", RUN "--interruptions 0.01,,5", 2, INTR_USAGE("0.01,,5")},
    {"run", RUN "--interruptions 0.01,5,", 2, INTR_USAGE("0.01,5,")},
    {"run", RUN "--interruptions 0.3,5,0.3,5", 2, INTR_USAGE("0.3,5,0.3,5")},
    {"run", RUN "--interruptions 0.01,5,0.02,-1", 2, INTR_USAGE("0.01,5,0.02,-1")},
    {"run", RUN "--interruptions 0.01,5,0.02,5,1", 2, INTR_USAGE("0.01,5,0.02,5,1")},
    {"run", RUN "--interruptions ' 0.01,5'", 2, INTR_USAGE(" 0.01,5")},
    {"run", RUN "--interruptions '0.01, 5,0.02,5'", 2, INTR_USAGE("0.01, 5,0.02,5")},
    {"run", RUN "--interruptions ,0.01,5,0.02", 2, INTR_USAGE(",0.01,5,0.02")},
    {"run", RUN "--interruptions 0.01,x", 2, INTR_USAGE("0.01,x")},
    {"run", RUN "--inject-fault 1", 2, "--inject-fault: needs [KIND:]RANK:ACTION[:PASS] (got '1')"},
    {"run", RUN "--inject-fault 1:2:3:4", 2, "--inject-fault: needs [KIND:]RANK:ACTION[:PASS] (got '1:2:3:4')"},
    {"run", RUN "--inject-fault 1:2:x", 2, "--inject-fault: rank >= 0, action >= 1 (1-based), pass >= 0 (got '1:2:x')"},
    {"run", RUN "--inject-fault 99999999999:1", 2,
     "--inject-fault: rank >= 0, action >= 1 (1-based), pass >= 0 (got '99999999999:1')"},
    {"run", RUN "--inject-fault error:1:0", 2, "--inject-fault: rank >= 0, action >= 1 (1-based), pass >= 0 (got 'error:1:0')"},
    {"run", RUN "--interruptions 0.01,5,0.02,1200 --format x", 2, "--format must be table, csv or json"},
    {"run", RUN "--lr 0.5 --momentum 0 --timeout 10 --inject-fault error:1:3:0 --format x", 2,
     "--format must be table, csv or json"},
    {"profile", "--reps 0", 2, "--reps: needs a whole number between 1 and 16777216 (got '0')"},
    {"profile", "--seed 1.5", 2, "--seed: needs a whole number between 0 and 9223372036854775805 (got '1.5')"},
    /* --set's KEY=VALUE: a value without a key, or no '=', is a usage error on every command */
    {"simulate", SIM MODEL "--hardware h100 --set =3", 2, "--set needs KEY=VALUE (got '=3')"},
    {"simulate", SIM MODEL "--hardware h100 --set device.efficiency", 2, "--set needs KEY=VALUE (got 'device.efficiency')"},
    {"model", MODEL "--hardware h100 --set =3", 2, "--set needs KEY=VALUE (got '=3')"},
    {"partition", MODEL "--workers 2 --hardware h100 --set =3", 2, "--set needs KEY=VALUE (got '=3')"},
    {"calibrate", "--observations x.csv --hardware h100 --set device.efficiency", 2,
     "--set needs KEY=VALUE (got 'device.efficiency')"},
    {NULL, NULL, 0, NULL},
};

/* Returns 1 when `pipelab CMD --help` works in this build. */
static int have_cmd(const char *cmd) {
    char line[1024], *out = NULL;
    snprintf(line, sizeof line, "'%s' %s --help", PIPELAB_BIN, cmd);
    int rc = pl_test_run(line, &out);
    free(out);
    return rc == 0;
}

/* Runs every row of t: exit code and the exact stderr "pipelab CMD: LINE\n(see ...)\n". */
static void run_table(const value_case *t) {
    for (const value_case *c = t; c->cmd; c++) {
        char line[2048], want[1024];
        snprintf(line, sizeof line, "( cd /tmp && '%s' %s %s >/dev/null )", PIPELAB_BIN, c->cmd, c->args);
        snprintf(want, sizeof want, "pipelab %s: %s\n(see 'pipelab %s --help')\n", c->cmd, c->first_line, c->cmd);
        char *err = NULL;
        int rc = pl_test_run(line, &err);
        int ok = rc == c->code && err && strcmp(err, want) == 0;
        if (!ok) fprintf(stderr, "\n  pipelab %s %s: want exit %d and\n%s  got exit %d and\n%s", c->cmd, c->args, c->code, want, rc, err ? err : "(nothing)\n");
        CU_ASSERT(ok);
        free(err);
    }
}

static void test_values(void) { run_table(cases); }

static void test_exec_values(void) {
    if (!have_cmd("run") || !have_cmd("profile")) {
        pl_test_skip("this build has no executor (pipelab run, pipelab profile)");
        return;
    }
    run_table(exec_cases);
}

void test_flag_values_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"numeric flag values: usage errors (exit 2) on every command", test_values},
        {"numeric flag values of run and profile", test_exec_values},
        {NULL, NULL},
    };
    pl_test_suite("cli numeric flag values", tcases);
}
