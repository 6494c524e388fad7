/* test_limits.c: sizes at the limits: generator shapes computed without generating, the memory
 * budget (parsing, refusals that say how much), and products that would overflow. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"

static void test_parse_bytes(void) {
    static const struct { const char *text; uint64_t want; } ok[] = {
        {"0", 0}, {"4096", 4096}, {"8e9", 8000000000ull}, {"1.5K", 1536}, {"16GiB", 17179869184ull},
        {"16G", 17179869184ull}, {"512m", 536870912ull}, {"2 TiB", 2199023255552ull}, {"1MB", 1048576},
        {"18446744073709549568", 18446744073709549568ull}, /* the largest double below 2^64 */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 1;
        CU_ASSERT_EQUAL(sched_parse_bytes(ok[i].text, &v), 0);
        CU_ASSERT(v == ok[i].want);
        if (v != ok[i].want) fprintf(stderr, "\n  '%s' -> %llu\n", ok[i].text, (unsigned long long)v);
    }
    static const char *const bad[] = {"", "abc", "-1", "nan", "inf", "1e300", "18446744073709551616",
                                      "8X", "8GiBs", "1e20", NULL};
    for (int i = 0; bad[i]; i++) {
        uint64_t v = 0;
        CU_ASSERT_EQUAL(sched_parse_bytes(bad[i], &v), -1);
    }
}

/* Counts the compute actions (F, B, I, W, OVERLAP) of s. */
static int64_t count_compute(const sched *s) {
    int64_t n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) n += sched_kind_is_compute((sched_kind)s->rank[r].acts[i].kind);
    return n;
}

/* The shape of every generator, over ranks, microbatches, chunks and iterations, matches what it
 * generates: the same ranks, stages and microbatches, and the compute-action bound holds (with
 * equality for every kind but DualPipeV, whose overlapped pairs count once). */
static void test_shapes_match(void) {
    static const int ps[] = {1, 2, 3, 4, 8};
    static const int ms[] = {1, 4, 9, 16};
    for (const sched_generator *g = sched_generators; g->name; g++)
        for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
            for (size_t b = 0; b < sizeof ms / sizeof ms[0]; b++)
                for (int v = 0; v <= 3; v++)
                    for (int it = 0; it <= 2; it++) {
                        sched_gen_opts o = {ps[a], ms[b], v, it, SCHED_RECOMPUTE_NONE};
                        pl_err e1, e2;
                        pl_err_clear(&e1);
                        pl_err_clear(&e2);
                        sched_shape sh;
                        int rc = sched_gen_shape(g->name, &o, &sh, &e1);
                        sched *s = sched_generate(g->name, &o, &e2);
                        /* the same verdict, and the same message when refused */
                        CU_ASSERT_EQUAL(rc == PL_OK, s != NULL);
                        if (!s) {
                            CU_ASSERT_STRING_EQUAL(e1.msg, e2.msg);
                            continue;
                        }
                        int iters = s->iterations > 0 ? s->iterations : 1;
                        int ok = sh.ranks == s->ranks && sh.stages == s->stages &&
                                 sh.microbatches == (int64_t)s->microbatches * iters;
                        int64_t n = count_compute(s);
                        ok = ok && (strcmp(g->name, "dualpipev") == 0 ? n <= sh.compute_actions : n == sh.compute_actions);
                        if (!ok)
                            fprintf(stderr, "\n  %s p=%d m=%d v=%d it=%d: shape %d/%d/%lld/%lld, generated %d/%d/%d x %d/%lld\n",
                                    g->name, ps[a], ms[b], v, it, sh.ranks, sh.stages, (long long)sh.microbatches,
                                    (long long)sh.compute_actions, s->ranks, s->stages, s->microbatches, iters,
                                    (long long)n);
                        CU_ASSERT(ok);
                        sched_free(s);
                    }
    pl_err e;
    sched_shape sh;
    sched_gen_opts o = {4, 8, 0, 0, SCHED_RECOMPUTE_NONE};
    CU_ASSERT_EQUAL(sched_gen_shape("no-such-kind", &o, &sh, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "unknown schedule kind 'no-such-kind'"));
}

/* Products of the largest accepted sizes do not wrap: 65536 ranks x 16 chunks x 2^24
 * microbatches is 2^45 actions, refused with the count; 1,000,000 microbatches x 65536 ranks too. */
static void test_overflowing_products(void) {
    static const struct { const char *kind; int p, m, v, it; const char *want; } cases[] = {
        {"interleaved", 65536, 1 << 24, 16, 1, "35184372088832 actions"},
        {"1f1b", 65536, 1000000, 0, 1, "131072000000 actions"},
        {"zbv", 65536, 1000000, 0, 1, "393216000000 actions"},
        {"pipedream", 4, 1 << 23, 0, 4, "exceeds the limit of 16777216"},
        {"looped-bfs", 65536, 8, 65536, 1, "4294967296 stages exceeds the limit"},
        {"gpipe", 100000, 8, 0, 1, "--ranks 100000 exceeds the limit of 65536"},
        {"gpipe", 4, 0, 0, 1, "--microbatches 0 must be >= 1"},
        {"gpipe", 4, -2147483647 - 1, 0, 1, "must be >= 1"},
        {"interleaved", 4, 8, 2147483647, 1, "stages exceeds the limit"},
        {"2bw", 4, 2147483647, 0, 2147483647, "exceeds the limit of 16777216"},
        {NULL, 0, 0, 0, 0, NULL},
    };
    for (int i = 0; cases[i].kind; i++) {
        sched_gen_opts o = {cases[i].p, cases[i].m, cases[i].v, cases[i].it, SCHED_RECOMPUTE_NONE};
        pl_err e;
        pl_err_clear(&e);
        sched_shape sh;
        CU_ASSERT_EQUAL(sched_gen_shape(cases[i].kind, &o, &sh, &e), PL_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].want));
        if (!strstr(e.msg, cases[i].want)) fprintf(stderr, "\n  %s: want '%s', got: %s\n", cases[i].kind, cases[i].want, e.msg);
        pl_err_clear(&e);
        CU_ASSERT_PTR_NULL(sched_generate(cases[i].kind, &o, &e));
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].want));
    }
}

/* With a small budget the generator and the lowering refuse before allocating, saying how many
 * bytes they need and where the limit comes from; a feasible size still works. */
static void test_budget_refusals(void) {
    pl_err e;
    pl_err_clear(&e);
    sched_budget mib, large, bad, env, automatic;
    sched_budget_init(&mib, (uint64_t)1 << 20, "lots"); /* the flag wins over the variable */
    const char *src = NULL;
    CU_ASSERT(sched_memory_limit(&mib, &src) == (uint64_t)1 << 20);
    CU_ASSERT_STRING_EQUAL(src, "--max-memory");
    sched_gen_opts o = {4, 1000000, 0, 0, SCHED_RECOMPUTE_NONE};
    CU_ASSERT_PTR_NULL(sched_generate_within("1f1b", &o, &mib, &e));
    /* 8,000,000 actions x 20 bytes x 1.5 + 1 MiB */
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "1f1b: 4 stages x 1000000 microbatches (8000000 actions) needs about 229.9 MiB (241048576 bytes)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than the 1.0 MiB available (--max-memory)"));
    /* lowering: a schedule that generated under a larger budget is refused under a smaller one */
    sched_budget_init(&large, (uint64_t)64 << 20, NULL);
    sched_gen_opts small = {4, 20000, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate_within("1f1b", &small, &large, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_err_clear(&e);
    CU_ASSERT_PTR_NULL(sched_lower_within(s, &mib, &e));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "lowering 1f1b (4 ranks, 4 stages, 20000 microbatches, 160000 actions) needs about"));
    sched *l = sched_lower(s, &e);
    CU_ASSERT_PTR_NOT_NULL(l);
    sched_free(l);
    sched_free(s);
    /* the environment variable's value, and a bad value of it (refused by every check) */
    sched_budget_init(&env, 0, "2GiB");
    CU_ASSERT(sched_memory_limit(&env, &src) == (uint64_t)2 << 30);
    CU_ASSERT_STRING_EQUAL(src, "PIPELAB_MAX_MEMORY");
    CU_ASSERT_EQUAL(sched_memory_check(&env, (uint64_t)2 << 30, "x", &e), PL_OK);
    CU_ASSERT_EQUAL(sched_memory_check(&env, ((uint64_t)2 << 30) + 1, "x", &e), PL_EINPUT);
    sched_budget_init(&bad, 0, "lots");
    CU_ASSERT_EQUAL(sched_memory_check(&bad, 1, "x", &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "PIPELAB_MAX_MEMORY='lots' is not a size"));
    sched_budget_init(&bad, 0, "0");
    CU_ASSERT_EQUAL(sched_memory_check(&bad, 1, "x", &e), PL_EINPUT);
    /* the automatic limit (no flag, the variable unset or empty): no more than the physical
     * memory; UINT64_MAX bytes never fit */
    sched_budget_init(&automatic, 0, "");
    CU_ASSERT(sched_memory_limit(&automatic, &src) > 0);
    CU_ASSERT(sched_memory_limit(NULL, NULL) == sched_memory_limit(&automatic, NULL));
    CU_ASSERT_EQUAL(sched_memory_check(NULL, UINT64_MAX, "everything", &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "everything needs about 16.0 EiB (18446744073709551615 bytes)"));
}

void test_limits_register(void) {
    static const pl_test_case cases[] = {
        {"sizes parse (8e9, 16GiB, 512M); bad ones refused", test_parse_bytes},
        {"generator shapes match what the generators make", test_shapes_match},
        {"products of the largest sizes refused, never wrapped", test_overflowing_products},
        {"memory budget: generator and lowering refuse, saying how much", test_budget_refusals},
        {NULL, NULL},
    };
    pl_test_suite("limits", cases);
}
