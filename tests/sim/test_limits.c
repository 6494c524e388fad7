/* test_limits.c: the simulator at its limits: memory budget estimates (checked against measured
 * peaks), refusals that say how much, sizes past 64 bits, overflowing and degenerate times, and
 * a feasible huge run (1f1b, 4 ranks, 1,000,000 microbatches) that must just work. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pl_test.h"
#include "pl_sched.h"
#include "sim.h"

#if defined(__SANITIZE_ADDRESS__)
#define LIMITS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LIMITS_ASAN 1
#endif
#endif

/* Generates and lowers kind; NULL on failure (reported). */
static sched *make(const char *kind, int p, int m, int v, int iters) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, v, iters, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate(kind, &o, &e);
    sched *l = s ? sched_lower(s, &e) : NULL;
    sched_free(s);
    if (!l) fprintf(stderr, "\n  %s: %s\n", kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

/* Runs s under flag costs b and config c; returns the code and the message in e. */
static int run_basic(const sched *s, sim_basic *b, const sim_config *c, sim_result *r, pl_err *e) {
    sim_costs costs = sim_basic_costs(b);
    pl_err_clear(e);
    int rc = sim_run(s, &costs, c, r, e);
    if (rc != PL_OK) memset(r, 0, sizeof *r);
    return rc;
}

static void test_estimate_refusals(void) {
    pl_err e;
    pl_err_clear(&e);
    /* 1f1b, 16 ranks, 16M microbatches: 512M compute actions x 256 bytes */
    sched_shape sh = {16, 16, 16000000, 512000000};
    sched_budget gib8, all;
    sched_budget_init(&gib8, (uint64_t)8 << 30, NULL);
    CU_ASSERT_EQUAL(sched_check_command_memory("1f1b", &sh, SCHED_MEM_SIMULATE, &gib8, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "simulating 1f1b (16 ranks, 16 stages, 16000000 microbatches: 512000000 compute actions) needs about 122.1 GiB"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than the 8.0 GiB available (--max-memory)"));
    CU_ASSERT(sched_command_memory(&sh, SCHED_MEM_SIMULATE) == 512000000ull * 256 + (16u << 20) + 16 * 1024 + 16 * 256);
    /* the trace costs more; the estimate of 4 ranks x 1,000,000 microbatches fits 8 GiB */
    sched_shape feasible = {4, 4, 1000000, 8000000};
    CU_ASSERT_EQUAL(sched_check_command_memory("1f1b", &feasible, SCHED_MEM_SIMULATE, &gib8, &e), PL_OK);
    CU_ASSERT(sched_command_memory(&feasible, SCHED_MEM_TRACE) > sched_command_memory(&feasible, SCHED_MEM_SIMULATE));
    /* counts that overflow 64 bits, or are negative, are refused, not wrapped */
    sched_shape huge = {65536, 1 << 20, INT64_MAX / 2, INT64_MAX};
    CU_ASSERT(sched_command_memory(&huge, SCHED_MEM_SIMULATE) == UINT64_MAX);
    sched_budget_init(&all, UINT64_MAX, NULL);
    CU_ASSERT_EQUAL(sched_check_command_memory("x", &huge, SCHED_MEM_TRACE, &all, &e), PL_EINPUT);
    sched_shape neg = {4, 4, 8, -1};
    CU_ASSERT_EQUAL(sched_check_command_memory("x", &neg, SCHED_MEM_SIMULATE, &all, &e), PL_EINPUT);
    /* the engine checks its own tables before allocating them */
    sched *s = make("1f1b", 4, 20000, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_basic b;
    sim_basic_init(&b);
    sim_config c;
    sim_config_init(&c);
    c.record_trace = 1;
    sim_result r;
    sched_budget_init(&c.budget, (uint64_t)1 << 20, NULL);
    CU_ASSERT_EQUAL(run_basic(s, &b, &c, &r, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "simulating 1f1b (4 ranks, 4 stages, 20000 microbatches, "));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "actions, with the trace) needs about"));
    c.budget = (sched_budget){0, NULL, NULL}; /* the automatic one */
    CU_ASSERT_EQUAL(run_basic(s, &b, &c, &r, &e), PL_OK);
    sim_result_free(&r);
    sim_basic_free(&b);
    sched_free(s);
}

/* Memory sizes whose sums pass 2^63 bytes, times that overflow to infinity, zero times and
 * nonsense configuration values: each a clear PL_EINPUT, never a wrapped number (the UBSan
 * build traps on any signed overflow or out-of-range conversion here). */
static void test_degenerate_values(void) {
    sched *s = make("pipedream", 4, 64, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_err e;
    sim_result r;
    sim_config c;
    sim_basic b;
    struct { int64_t stash, param; double opt, dtype, cv, tf; int64_t cap; const char *want; } cases[] = {
        {(int64_t)4e18, 0, 8, 4, 0, 1, 0, "memory passes 2^63 bytes"},       /* 4 in flight x 4e18 */
        {INT64_MAX, 0, 8, 4, 0, 1, 0, "memory passes 2^63 bytes"},
        {0, (int64_t)9e18, 8, 4, 0, 1, 0, "too large to count in 64 bits"},  /* gradients + weights */
        {0, (int64_t)3e18, 8, 4, 0, 1, 0, "too large to count in 64 bits"},  /* optimizer 6e18 + 2 x 3e18 */
        {0, 1000, 1e300, 4, 0, 1, 0, "optimizer state"},
        {0, 1000, 8, 1e-300, 0, 1, 0, "optimizer state"},                   /* 1e303 parameters */
        {0, 1000, NAN, 4, 0, 1, 0, "must be finite"},
        {0, 1000, 8, INFINITY, 0, 1, 0, "must be finite"},
        {0, 0, 8, 4, NAN, 1, 0, "coefficient of variation"},
        {0, 0, 8, 4, 1e300, 1, 0, "coefficient of variation"},
        {0, 0, 8, 4, 0, 1e308, 0, "the simulated time overflowed"},
        {0, 0, 8, 4, 0, 0, 0, "zero time"},
        {0, 0, 8, 4, 0, 1, -1, "capacity must be >= 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sim_basic_init(&b);
        sim_config_init(&c);
        b.stash_bytes = cases[i].stash;
        b.param_bytes = cases[i].param;
        b.tf_s = cases[i].tf;
        c.optimizer_bytes_per_param = cases[i].opt;
        c.dtype_bytes = cases[i].dtype;
        c.cv = cases[i].cv;
        c.capacity_bytes = cases[i].cap;
        int rc = run_basic(s, &b, &c, &r, &e);
        CU_ASSERT_EQUAL(rc, PL_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].want));
        if (rc != PL_EINPUT || !strstr(e.msg, cases[i].want))
            fprintf(stderr, "\n  case %zu: want '%s', got %d: %s\n", i, cases[i].want, rc, rc ? e.msg : "ok");
        if (rc == PL_OK) sim_result_free(&r);
        sim_basic_free(&b);
    }
    /* the largest sizes that do fit are counted exactly: 4 in flight on rank 0 x 2^61 bytes
     * passes 2^63; x 2^60 it is 2^62 */
    sim_basic_init(&b);
    sim_config_init(&c);
    b.stash_bytes = (int64_t)1 << 60;
    CU_ASSERT_EQUAL_FATAL(run_basic(s, &b, &c, &r, &e), PL_OK);
    CU_ASSERT(r.rank[0].peak_bytes == 4 * ((int64_t)1 << 60));
    CU_ASSERT(r.rank[0].peak_stash_mbs == 4);
    sim_result_free(&r);
    b.stash_bytes = (int64_t)1 << 61;
    CU_ASSERT_EQUAL(run_basic(s, &b, &c, &r, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0: its memory passes 2^63 bytes"));
    sim_result_free(&r);
    /* flag-driven costs: zero and non-finite bandwidths and times are refused by the check */
    sim_basic_init(&b);
    b.bandwidth_Bps = 0;
    CU_ASSERT_EQUAL(sim_basic_check(&b, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--bandwidth must be a finite number of bytes per second > 0 (got 0)"));
    b.bandwidth_Bps = 1e9;
    b.inter_bandwidth_Bps = INFINITY;
    CU_ASSERT_EQUAL(sim_basic_check(&b, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--inter-bandwidth"));
    b.inter_bandwidth_Bps = 1e9;
    b.tb_s = NAN;
    CU_ASSERT_EQUAL(sim_basic_check(&b, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--tb must be a finite time"));
    sim_basic_free(&b);
    sched_free(s);
}

/* 1f1b with 4 ranks and 1,000,000 microbatches (8M compute actions, 20M lowered) is feasible
 * and runs to the closed form (m + p - 1)(tF + tB); under ASan 100,000 microbatches. Where this
 * machine's memory budget refuses that many, the largest power-of-two fraction of it that the
 * budget allows runs to the same closed form (the refusal is printed); a budget that refuses
 * even 1/64 of it skips the test, reported as such. */
static void test_feasible_million(void) {
#ifdef LIMITS_ASAN
    int m = 100000;
#else
    int m = 1000000;
#endif
    pl_err e;
    sched_shape sh;
    int fits = 0;
    for (int halvings = 0; halvings <= 6 && !fits; halvings++, m /= 2) {
        sched_gen_opts o = {4, m, 0, 0, SCHED_RECOMPUTE_NONE};
        CU_ASSERT_EQUAL_FATAL(sched_gen_shape("1f1b", &o, &sh, &e), PL_OK);
        CU_ASSERT_EQUAL(sh.compute_actions, 8LL * m);
        fits = sched_check_command_memory("1f1b", &sh, SCHED_MEM_SIMULATE, NULL, &e) == PL_OK;
        if (!fits) fprintf(stderr, "\n  m = %d refused: %s\n", m, e.msg);
        else break;
    }
    if (!fits) {
        pl_test_skip("this machine's memory budget refuses 1f1b at m = 1/64 of the test's");
        return;
    }
    sched *s = make("1f1b", 4, m, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_basic b;
    sim_basic_init(&b);
    sim_config c;
    sim_config_init(&c);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run_basic(s, &b, &c, &r, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(r.makespan_s, (m + 3) * 3.0, 1e-6);
    CU_ASSERT_EQUAL(r.actions, sched_total_actions(s));
    sim_result_free(&r);
    sim_basic_free(&b);
    sched_free(s);
}

/* Returns the value in bytes of a "Name:   123 kB" line of /proc/self/status, or 0. */
static uint64_t status_bytes(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    size_t n = strlen(name);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && sscanf(line + n, " %llu", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* Resets the peak resident size of this process (VmHWM) to the current one; returns 0 on success. */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Generates kind, validates and lowers it, then either simulates it (mode SCHED_MEM_SIMULATE or
 * SCHED_MEM_TRACE, the latter keeping the trace) or validates the lowered form and runs the dry
 * run with its slots (SCHED_MEM_SCHEDULE), as `pipelab simulate` and `pipelab schedule --lowered`
 * do. Returns the peak resident bytes the work added (0 on failure). Run in a fresh process:
 * in one that freed memory before, new allocations reuse resident pages and hide. */
static uint64_t peak_of_work(const char *kind, int p, int m, int mode) {
    if (reset_peak() != 0) {
        fprintf(stderr, "cannot reset the peak resident size (/proc/self/clear_refs)\n");
        return 0;
    }
    uint64_t before = status_bytes("VmRSS:");
    pl_err e;
    sched_gen_opts o = {p, m, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate(kind, &o, &e);
    sched *l = s && sched_validate(s, &e) == PL_OK ? sched_lower(s, &e) : NULL;
    sched_free(s);
    int ok = l != NULL;
    if (ok && mode == SCHED_MEM_SCHEDULE) {
        sched_dryrun_result dr;
        ok = sched_validate(l, &e) == PL_OK && sched_dryrun(l, NULL, &dr, &e) == PL_OK;
        if (ok) sched_dryrun_free(&dr, l->ranks);
    } else if (ok) {
        sim_basic b;
        sim_basic_init(&b);
        sim_config c;
        sim_config_init(&c);
        c.record_trace = mode == SCHED_MEM_TRACE;
        sim_costs costs = sim_basic_costs(&b);
        sim_result r;
        ok = sim_run(l, &costs, &c, &r, &e) == PL_OK;
        if (ok) sim_result_free(&r);
    }
    sched_free(l);
    uint64_t peak = status_bytes("VmHWM:");
    if (!ok) fprintf(stderr, "%s: %s\n", kind, e.msg);
    return ok ? (peak > before ? peak - before : 1) : 0;
}

/* When this test binary is started with PIPELAB_LIMITS_CHILD="kind p m mode", it measures
 * peak_of_work in this fresh process, prints the bytes and exits before the tests run. */
__attribute__((constructor)) static void limits_child(void) {
    const char *spec = getenv("PIPELAB_LIMITS_CHILD");
    if (!spec) return;
    char kind[32];
    int p = 0, m = 0, mode = 0;
    if (sscanf(spec, "%31s %d %d %d", kind, &p, &m, &mode) != 4) _exit(2);
    printf("%llu\n", (unsigned long long)peak_of_work(kind, p, m, mode));
    fflush(stdout);
    _exit(0);
}

#ifndef LIMITS_ASAN
/* Measures peak_of_work in a fresh copy of this binary; returns the bytes (0 on failure). */
static uint64_t measured_peak(const char *kind, int p, int m, int mode) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "PIPELAB_LIMITS_CHILD='%s %d %d %d' /proc/%d/exe", kind, p, m, mode, (int)getpid());
    char *out = NULL;
    int rc = pl_test_run(cmd, &out);
    unsigned long long used = 0;
    if (rc != 0 || !out || sscanf(out, "%llu", &used) != 1) used = 0;
    if (!used) fprintf(stderr, "\n  %s: exit %d: %s\n", cmd, rc, out ? out : "");
    free(out);
    return used;
}
#endif

/* The estimate is an upper bound of what the work really takes: for every generator, about
 * 400,000 compute actions, the simulate pipeline, the schedule pipeline and (for two kinds) the
 * simulate pipeline with the trace peak below it; and it is not absurdly large (within 4x of
 * the measured peak plus 32 MiB, without the trace, whose estimate also covers the printed
 * timeline and the stored op rows of the command line). */
static void test_estimate_bounds_peak(void) {
#ifdef LIMITS_ASAN
    pl_test_skip("under ASan, whose shadow memory inflates the resident size");
#else
    for (const sched_generator *g = sched_generators; g->name; g++) {
        int two = strcmp(g->name, "interleaved") == 0 || strcmp(g->name, "looped-bfs") == 0 ||
                  strcmp(g->name, "zbv") == 0 || strcmp(g->name, "dualpipev") == 0;
        int split = strncmp(g->name, "zb", 2) == 0 || strcmp(g->name, "dualpipev") == 0;
        int iters = strcmp(g->name, "pipedream") == 0 || strcmp(g->name, "2bw") == 0 ? 4 : 1;
        int m = 400000 / (4 * (two ? 2 : 1) * (split ? 3 : 2) * iters);
        for (int mode = 0; mode < 3; mode++) {
            if (mode == SCHED_MEM_TRACE && strcmp(g->name, "1f1b") != 0 && strcmp(g->name, "pipedream") != 0) continue;
            sched_gen_opts o = {4, m, 0, 0, SCHED_RECOMPUTE_NONE};
            sched_shape sh;
            pl_err e;
            CU_ASSERT_EQUAL_FATAL(sched_gen_shape(g->name, &o, &sh, &e), PL_OK);
            uint64_t est = sched_command_memory(&sh, mode);
            uint64_t used = measured_peak(g->name, 4, m, mode);
            int ok = used > 0 && used <= est && (mode == SCHED_MEM_TRACE || est <= 4 * used + ((uint64_t)32 << 20));
            if (!ok || getenv("PIPELAB_TEST_VERBOSE"))
                fprintf(stderr, "\n  %s p=4 m=%d %s: peak %.1f MiB, estimate %.1f MiB (%lld compute actions, %.0f bytes each)",
                        g->name, m, mode == SCHED_MEM_SCHEDULE ? "schedule" : mode == SCHED_MEM_TRACE ? "simulate+trace" : "simulate",
                        used / 1048576.0, est / 1048576.0, (long long)sh.compute_actions, (double)used / (double)sh.compute_actions);
            CU_ASSERT(ok);
        }
    }
#endif
}

void sim_limits_tests_register(void) {
    static const pl_test_case cases[] = {
        {"memory estimates refuse what does not fit, saying how much", test_estimate_refusals},
        {"sizes past 64 bits, overflowing and zero times, bad config: clear errors", test_degenerate_values},
        {"1f1b p=4 m=1,000,000 is feasible and exact", test_feasible_million},
        {"the memory estimate bounds the measured peak of every generator", test_estimate_bounds_peak},
        {NULL, NULL},
    };
    pl_test_suite("sim limits", cases);
}
