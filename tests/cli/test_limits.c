/* test_limits.c: `pipelab simulate` and `pipelab schedule` with huge or degenerate parameters:
 * each is a clear error (exit 1, or 2 for a malformed or out-of-range flag value) naming what is wrong, never a crash
 * or an overflowed number; and a feasible huge run (1f1b, 4 ranks, 1,000,000 microbatches) works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define CLI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLI_ASAN 1
#endif
#endif

/* One row: environment prefix, arguments, exit code and a piece of the message. */
typedef struct limit_case {
    const char *env;
    const char *args;
    int code;
    const char *want;
} limit_case;

#define SIM "simulate --no-db --kind "
#define MODEL "--model transformer:layers=16,hidden=1024,heads=16,seq=512,vocab=32000,microbatch=4 --hardware h100 "

static const limit_case cases[] = {
    /* sizes */
    {"", SIM "1f1b --ranks 100000 --microbatches 8", 2, "--ranks: needs a whole number between 1 and 65536 (got '100000')"},
    {"", "schedule --check --kind gpipe --ranks 100000 --microbatches 8", 2, "between 1 and 65536 (got '100000')"},
    {"", SIM "1f1b --ranks 4 --microbatches 100000000", 2, "--microbatches: needs a whole number between 1 and 16777216"},
    {"", SIM "1f1b --ranks 65536 --microbatches 1000000", 1, "1f1b: 65536 stages x 1000000 microbatches needs 131072000000 actions, more than the limit of 2147483648"},
    {"", SIM "interleaved --ranks 4096 --chunks 4096 --microbatches 1000000", 1, "16777216 stages exceeds the limit of 1048576"},
    {"", SIM "pipedream --ranks 4 --microbatches 16000000 --iterations 4", 1, "--microbatches 16000000 x --iterations 4 = 64000000 exceeds the limit of 16777216"},
    {"", "schedule --check --kind zbv --ranks 64 --microbatches 1000000 --max-memory 1GiB", 1,
     "zbv (64 ranks, 128 stages, 1000000 microbatches: 384000000 compute actions) needs about 91.6 GiB (98320875520 bytes), more than the 1.0 GiB available (--max-memory)"},
    /* the memory budget: flag, environment, and both refused before any work */
    {"", SIM "1f1b --ranks 4 --microbatches 1000000 --max-memory 100M", 1,
     "simulating 1f1b (4 ranks, 4 stages, 1000000 microbatches: 8000000 compute actions) needs about 1.9 GiB (2064782336 bytes), more than the 100.0 MiB available (--max-memory)"},
    {"", SIM "1f1b --ranks 16 --microbatches 16000000 --max-memory 8GiB", 1, "needs about 122.1 GiB"},
    {"", SIM "1f1b --ranks 4 --microbatches 100000 --trace --max-memory 100MiB", 1, "needs about 1.2 GiB"},
    {"PIPELAB_MAX_MEMORY=1M ", SIM "gpipe --ranks 4 --microbatches 100000", 1, "more than the 1.0 MiB available (PIPELAB_MAX_MEMORY)"},
    {"PIPELAB_MAX_MEMORY=plenty ", SIM "gpipe --ranks 4 --microbatches 8", 1, "PIPELAB_MAX_MEMORY='plenty' is not a size"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --max-memory lots", 2, "--max-memory: needs a size in bytes such as 8e9 or 16GiB (got 'lots')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --max-memory 1e300", 2, "--max-memory: needs a size"},
    {"", "schedule --check --kind gpipe --ranks 4 --microbatches 8 --max-memory 0", 2, "--max-memory: needs a size"},
    /* times: NaN, infinite, negative (malformed flag values: usage errors), zero, overflowing */
    {"", SIM "gpipe --ranks 4 --microbatches 8 --tf nan", 2, "--tf: needs a finite number (got 'nan')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --tb inf", 2, "--tb: needs a finite number (got 'inf')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --tf -1", 2, "--tf: must not be negative (got '-1')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --tf 0", 1, "every action takes zero time (makespan 0 s)"},
    {"", SIM "zb-h1 --ranks 4 --microbatches 8 --tf 0 --ti 0 --tw 0", 1, "zero time"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --tf 1e308", 1, "the simulated time overflowed (makespan inf s)"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --tcomm 1e308", 1, "the simulated time overflowed"},
    /* a finite makespan whose ranks' sum is not: the bubble would be 1 or nan */
    {"", SIM "1f1b --ranks 2 --microbatches 2 --tf 1.2e307", 1, "the simulated time overflowed (window x ranks inf s)"},
    {"", SIM "1f1b --ranks 2 --microbatches 2 --tstep 1e308", 1, "the simulated time overflowed (window x ranks inf s)"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --latency nan", 2, "--latency: needs a finite number (got 'nan')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --cv 1e300", 2, "--cv: must be at most 100 (got '1e300')"},
    /* bandwidths */
    {"", SIM "gpipe --ranks 4 --microbatches 8 --bytes 1e6 --bandwidth 0", 2, "--bandwidth: must be > 0 bytes per second (got '0')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --bytes 1e6 --ranks-per-node 2 --inter-bandwidth 0", 2, "--inter-bandwidth: must be > 0"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --bytes 1e6 --bandwidth inf", 2, "--bandwidth: needs a finite number (got 'inf')"},
    /* memory sizes near the integer limits */
    {"", SIM "gpipe --ranks 4 --microbatches 8 --capacity 1e300", 2, "--capacity: must be at most 9.2e+18 (got '1e300')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --capacity 18446744073709551615", 2, "--capacity: must be at most"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --capacity 9223372036854775807", 2, "--capacity: must be at most"},
    {"", SIM "pipedream --ranks 4 --microbatches 64 --stash-bytes 4e18", 1, "rank 0: its memory passes 2^63 bytes (9.2e18)"},
    {"", SIM "pipedream --ranks 4 --microbatches 64 --param-bytes 9e18", 1, "too large to count in 64 bits"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --param-bytes 1e300", 2, "--param-bytes: must be at most 9.2e+18 (got '1e300')"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --param-bytes 1e9 --optimizer-bytes 1e300", 1, "the optimizer state"},
    {"", SIM "gpipe --ranks 4 --microbatches 8 --param-bytes 1e9 --dtype-bytes 1e-300", 1, "the optimizer state"},
    /* the same through a model and hardware */
    {"", SIM "1f1b --ranks 4 --microbatches 8 " MODEL "--set link.intra.bandwidth=0", 1, "link.intra.bandwidth must be > 0"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 " MODEL "--set link.inter.bandwidth=nan", 1, "link.inter.bandwidth must be a number"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 " MODEL "--set device.memory_bytes=-1", 1, "device.memory_bytes must be >= 0"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 " MODEL "--set device.flops_fp16=inf", 1, "device.flops_fp16 must be a number"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 " MODEL "--set topology.nodes=9999999999", 1, "topology.nodes must be an integer"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 --model uniform:layers=8,fwd_s=nan", 1, "fwd_s must be a non-negative number, got 'nan'"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 --model uniform:layers=8,fwd_s=0", 1, "zero time"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 --model uniform:layers=8,fwd_s=1e308", 1, "too large to add up"},
    /* each stage's and the model's sums finite, the iteration's not */
    {"", SIM "1f1b --ranks 4 --microbatches 32 --model uniform:layers=4,fwd_s=5e306", 1, "the simulated time overflowed"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 --model uniform:layers=8,fwd_s=1e-3,param_bytes=4e18", 1, "too large to count in 64 bits"},
    /* each layer's bytes in 64 bits, a stage's sum not; and a stage's memory */
    {"", SIM "1f1b --ranks 1 --microbatches 1 --model uniform:layers=4,fwd_s=1e-3,param_bytes=4e18", 1,
     "the stage of layers 0-3: its bytes (parameters, activations at this microbatch size) are too large to count in 64 bits"},
    {"", "model --model uniform:layers=4,fwd_s=1e-3,param_bytes=4e18 --stages 1", 1,
     "the stage of layers 0-3: its bytes (parameters, activations at this microbatch size) are too large to count in 64 bits"},
    {"", "model --model uniform:layers=4,fwd_s=1e-3,stash_bytes=4e18 --stages 1", 1, "the stage of layers 0-3: its bytes"},
    {"", "model --model uniform:layers=1,fwd_s=1,param_bytes=4e18 --stages 1", 1,
     "the stage of layers 0-0: its memory with 1 microbatches in flight (weights, gradients, optimizer state, activations) "
     "is too large to count in 64 bits"},
    {"", "model --model uniform:layers=4,fwd_s=1,stash_bytes=1e18 --inflight 1000000 --stages 2", 1,
     "its memory with 1000000 microbatches in flight"},
    {"", SIM "1f1b --ranks 4 --microbatches 8 --model transformer:layers=16,hidden=1000000000,heads=16,seq=512,vocab=32000,microbatch=4 --hardware h100", 1, "sizes overflow"},
    {"", SIM "1f1b --ranks 4 --microbatches 1000000 --model uniform:layers=8,fwd_s=1e-3 --max-memory 1GiB", 1, "simulating 1f1b (4 ranks, 4 stages, 1000000 microbatches"},
    /* a loaded schedule is counted too */
    {"", "schedule --check --from '" PIPELAB_TESTS_DIR "/golden/1f1b_p3_m4.sched' --max-memory 1K", 1,
     "1f1b_p3_m4.sched (3 ranks, 3 stages, 4 microbatches: 24 compute actions) needs about 16.0 MiB"},
    {"", "simulate --no-db --from '" PIPELAB_TESTS_DIR "/golden/zb-h1_p3_m4_comms.csv' --max-memory 1K", 1,
     "simulating "},
    /* the unit-time timeline's text: (ranks + 1) rows of steps cells, refused up front pointing to
     * --no-timeline (it once ran for minutes towards gigabytes); a wide one within the limit is
     * refused past 1000000 steps */
    {"", "schedule --kind 1f1b --ranks 2 --microbatches 100000 --unit-f 1000 --unit-b 1000 --max-memory 500MiB", 1,
     "pipelab: drawing the timeline of 1f1b (2 ranks, 200002000 steps, cells of 7 characters: about 4200046251 bytes of "
     "text) beside the schedule needs about 7.9 GiB"},
    {"", "schedule --kind 1f1b --ranks 2 --microbatches 100000 --unit-f 1000 --unit-b 1000 --max-memory 500MiB", 1,
     "more than the 500.0 MiB available (--max-memory); use fewer microbatches or ranks, or raise the limit with "
     "--max-memory or PIPELAB_MAX_MEMORY; or give --no-timeline for the statistics alone"},
    {"PIPELAB_MAX_MEMORY=50MiB ", "schedule --kind 1f1b --ranks 2 --microbatches 10000 --unit-f 100 --unit-b 100", 1,
     "more than the 50.0 MiB available (PIPELAB_MAX_MEMORY); use fewer microbatches or ranks, or raise the limit with "
     "--max-memory or PIPELAB_MAX_MEMORY; or give --no-timeline"},
    {"", "schedule --kind 1f1b --ranks 2 --microbatches 10000 --unit-f 1000 --unit-b 1000", 1,
     "pipelab: the timeline of 1f1b is 20002000 steps wide, more than the 1000000 drawn at most; give --no-timeline for "
     "the statistics alone, or smaller --unit-f, --unit-b, --unit-i, --unit-w or fewer microbatches"},
    {NULL, NULL, 0, NULL},
};

/* Every row fails with its exit code and message, on stderr, prefixed "pipelab". */
static void test_limit_table(void) {
    for (const limit_case *c = cases; c->args; c++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "( %s'%s' %s >/dev/null )", c->env, PIPELAB_BIN, c->args);
        char *err = NULL;
        int rc = pl_test_run(cmd, &err);
        int ok = rc == c->code && err && strncmp(err, "pipelab", 7) == 0 && strstr(err, c->want);
        if (!ok)
            fprintf(stderr, "\n  pipelab %s: want exit %d and '%s', got exit %d and: %s\n", c->args, c->code, c->want, rc,
                    err ? err : "(nothing)");
        CU_ASSERT(ok);
        free(err);
    }
}

/* Feasible sizes are not refused: 1f1b with 4 ranks and 1,000,000 microbatches (8M compute
 * actions, about 1 GB) simulates to the closed form (m + p - 1)(tF + tB) = 3,000,009 s, and its
 * schedule checks. Under ASan 100,000 microbatches. */
static void test_feasible(void) {
#ifdef CLI_ASAN
    const char *m = "100000", *makespan = "\"makespan_s\":300009,", *acts = "800000 actions";
#else
    const char *m = "1000000", *makespan = "\"makespan_s\":3000009,", *acts = "8000000 actions";
#endif
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' simulate --no-db --kind 1f1b --ranks 4 --microbatches %s --format json", PIPELAB_BIN, m);
    int rc = pl_test_run(cmd, &out);
    if (rc != 0 || !out || !strstr(out, makespan)) fprintf(stderr, "\n  %s: exit %d: %.300s\n", cmd, rc, out ? out : "");
    CU_ASSERT(rc == 0 && out && strstr(out, makespan));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' schedule --check --kind 1f1b --ranks 4 --microbatches %s", PIPELAB_BIN, m);
    rc = pl_test_run(cmd, &out);
    CU_ASSERT(rc == 0 && out && strstr(out, acts));
    free(out);
}

/* The schedule whose timeline is refused gives its statistics with --no-timeline at once, and
 * in CSV (no timeline drawn); a timeline within the limits is drawn. */
static void test_timeline_statistics(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' schedule --kind 1f1b --ranks 2 --microbatches 100000 --unit-f 1000 "
             "--unit-b 1000 --max-memory 500MiB --no-timeline", PIPELAB_BIN);
    int rc = pl_test_run(cmd, &out);
    CU_ASSERT(rc == 0 && out && strstr(out, "unit-time steps 200002000") != NULL && strstr(out, "rank 0 |") == NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' schedule --kind 1f1b --ranks 2 --microbatches 100000 --unit-f 1000 "
             "--unit-b 1000 --max-memory 500MiB --format csv", PIPELAB_BIN);
    rc = pl_test_run(cmd, &out);
    CU_ASSERT(rc == 0 && out && strstr(out, "1f1b,2,2,100000,1,200002000,") != NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' schedule --kind 1f1b --ranks 2 --microbatches 4 --max-memory 20MiB --color never", PIPELAB_BIN);
    rc = pl_test_run(cmd, &out);
    CU_ASSERT(rc == 0 && out && strstr(out, "rank 0 |F0|F1|") != NULL && strstr(out, "unit-time steps 10") != NULL);
    free(out);
}

void test_limits_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"huge and degenerate parameters: clear errors", test_limit_table},
        {"1f1b p=4 m=1,000,000 simulates and checks", test_feasible},
        {"a timeline refused: its statistics with --no-timeline; a small one drawn", test_timeline_statistics},
        {NULL, NULL},
    };
    pl_test_suite("cli limits", tcases);
}
