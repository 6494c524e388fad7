/* test_gen.c: CUnit suite for the basic generators (gpipe, 1f1b, pipedream, 2bw, interleaved,
 * looped-bfs): validity over a parameter grid, exact orders, in-flight counts, closed forms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"

typedef sched *(*gen_fn)(const sched_gen_opts *, const sched_budget *, pl_err *);

/* The generators under test, with the facts the tests rely on. */
typedef struct gen_case {
    const char *name;
    gen_fn fn;
    int has_chunks;  /* takes chunks > 1 */
    int def_chunks;  /* chunks when 0 is given */
    int def_iters;   /* iterations when 0 is given */
    sched_weights weights;
} gen_case;

static const gen_case GENS[] = {
    {"gpipe", sched_gen_gpipe, 0, 1, 1, SCHED_WEIGHTS_FLUSH},
    {"1f1b", sched_gen_1f1b, 0, 1, 1, SCHED_WEIGHTS_FLUSH},
    {"pipedream", sched_gen_pipedream, 0, 1, 4, SCHED_WEIGHTS_STASH},
    {"2bw", sched_gen_2bw, 0, 1, 4, SCHED_WEIGHTS_2BW},
    {"interleaved", sched_gen_interleaved, 1, 2, 1, SCHED_WEIGHTS_FLUSH},
    {"looped-bfs", sched_gen_looped_bfs, 1, 2, 1, SCHED_WEIGHTS_FLUSH},
};
#define NGENS ((int)(sizeof GENS / sizeof GENS[0]))

/* Failures inside loops are counted and the first few printed, then asserted once. */
static int g_fail;
#define GFAIL(...)                                                                              \
    do {                                                                                        \
        if (g_fail++ < 12) {                                                                    \
            fprintf(stderr, "\n  test_gen: ");                                                  \
            fprintf(stderr, __VA_ARGS__);                                                       \
        }                                                                                       \
    } while (0)

/* Returns the reason a grid point must be refused, or NULL when it must be served. The rule:
 * generators with one stage per rank refuse chunks > 1; interleaved serves every m (groups of
 * p microbatches when p divides m, otherwise the smallest group size Megatron accepts, or one
 * round of m when m < p as in PyTorch); looped-bfs serves every m and v. */
static const char *grid_refusal(const gen_case *g, int p, int m, int v) {
    (void)p;
    (void)m;
    if (!g->has_chunks && v > 1) return "chunks > 1 on a one-stage-per-rank schedule";
    return NULL;
}

/* Returns 1 when every (stage, mb) of the compute-only s has exactly one F and one B, on the
 * rank that holds the stage, and nothing else appears; reports the first problem otherwise. */
static int exact_counts(const sched *s, const char *what) {
    int64_t mbs = (int64_t)s->microbatches * s->iterations;
    size_t n = (size_t)s->stages * (size_t)mbs;
    unsigned char *f = calloc(n, 1), *b = calloc(n, 1);
    int ok = f && b;
    for (int r = 0; ok && r < s->ranks; r++)
        for (size_t i = 0; ok && i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            if ((a->kind != SCHED_F && a->kind != SCHED_B) || a->stage < 0 ||
                a->stage >= s->stages || a->mb < 0 || a->mb >= mbs ||
                s->stage_rank[a->stage] != r) {
                GFAIL("%s: rank %d position %zu: unexpected action kind %d stage %d mb %d", what, r,
                      i, a->kind, a->stage, a->mb);
                ok = 0;
                break;
            }
            unsigned char *c = a->kind == SCHED_F ? f : b;
            c[(size_t)a->stage * (size_t)mbs + (size_t)a->mb]++;
        }
    for (size_t i = 0; ok && i < n; i++)
        if (f[i] != 1 || b[i] != 1) {
            GFAIL("%s: stage %zu mb %zu has %d F and %d B", what, i / (size_t)mbs, i % (size_t)mbs,
                  f[i], b[i]);
            ok = 0;
        }
    free(f);
    free(b);
    return ok;
}

/* Runs the full pipeline of checks on one generated schedule: validate, exact counts, lower,
 * validate the lowered form, dry-run both. Returns 1 when all pass. */
static int check_valid(const sched *s, const char *what) {
    pl_err e = {0};
    if (sched_validate(s, &e) != PL_OK) {
        GFAIL("%s: validate: %s", what, e.msg);
        return 0;
    }
    if (!exact_counts(s, what)) return 0;
    sched_dryrun_result r;
    memset(&r, 0, sizeof r);
    if (sched_dryrun(s, NULL, &r, &e) != PL_OK) {
        GFAIL("%s: dry run: %s", what, e.msg);
        return 0;
    }
    sched_dryrun_free(&r, s->ranks);
    sched *l = sched_lower(s, &e);
    if (!l) {
        GFAIL("%s: lower: %s", what, e.msg);
        return 0;
    }
    int ok = 1;
    if (!l->lowered) {
        GFAIL("%s: lowered copy not marked lowered", what);
        ok = 0;
    } else if (sched_validate(l, &e) != PL_OK) {
        GFAIL("%s: validate lowered: %s", what, e.msg);
        ok = 0;
    } else {
        memset(&r, 0, sizeof r);
        if (sched_dryrun(l, NULL, &r, &e) != PL_OK) {
            GFAIL("%s: dry run lowered: %s", what, e.msg);
            ok = 0;
        } else {
            sched_dryrun_free(&r, l->ranks);
        }
    }
    sched_free(l);
    return ok;
}

/* Every generator over ranks 1..8, microbatches 1..32, chunks 1..4: refused exactly where
 * grid_refusal says (with a message), otherwise valid, lowerable and deadlock-free. */
static void test_grid(void) {
    g_fail = 0;
    int served = 0, refused = 0;
    for (int gi = 0; gi < NGENS; gi++) {
        const gen_case *g = &GENS[gi];
        for (int p = 1; p <= 8; p++)
            for (int m = 1; m <= 32; m++)
                for (int v = 1; v <= 4; v++) {
                    char what[128];
                    snprintf(what, sizeof what, "%s p=%d m=%d v=%d", g->name, p, m, v);
                    sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = v};
                    pl_err e = {0};
                    sched *s = g->fn(&o, NULL, &e);
                    const char *why = grid_refusal(g, p, m, v);
                    if (why) {
                        if (s) GFAIL("%s: served, but must be refused (%s)", what, why);
                        else if (e.code != PL_EINPUT || !e.msg[0])
                            GFAIL("%s: refused without PL_EINPUT and a message", what);
                        else refused++;
                        sched_free(s);
                        continue;
                    }
                    if (!s) {
                        GFAIL("%s: refused: %s", what, e.msg);
                        continue;
                    }
                    if (check_valid(s, what)) served++;
                    sched_free(s);
                }
    }
    /* several iterations (flushed blocks, or one continuous stream for pipedream and 2bw) */
    static const int ms[] = {1, 3, 8, 13};
    int served_it = 0;
    for (int gi = 0; gi < NGENS; gi++)
        for (int p = 1; p <= 8; p++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (int v = 1; v <= (GENS[gi].has_chunks ? 3 : 1); v++)
                    for (int it = 2; it <= 3; it++) {
                        char what[128];
                        snprintf(what, sizeof what, "%s p=%d m=%d v=%d iterations=%d",
                                 GENS[gi].name, p, ms[mi], v, it);
                        sched_gen_opts o = {.ranks = p, .microbatches = ms[mi], .chunks = v,
                                            .iterations = it};
                        pl_err e = {0};
                        sched *s = GENS[gi].fn(&o, NULL, &e);
                        if (!s) GFAIL("%s: refused: %s", what, e.msg);
                        else if (check_valid(s, what)) served_it++;
                        sched_free(s);
                    }
    CU_ASSERT_EQUAL(g_fail, 0);
    CU_ASSERT_EQUAL(served, 4 * 8 * 32 + 2 * 8 * 32 * 4);
    CU_ASSERT_EQUAL(refused, 4 * 8 * 32 * 3);
    CU_ASSERT_EQUAL(served_it, (4 + 2 * 3) * 8 * 4 * 2);
}

/* Shape and policies: kind, stages, placement, chunks, iterations (defaults and given),
 * weights, recomputation, compute-only, and the total number of actions. */
static void test_shape_policies(void) {
    for (int gi = 0; gi < NGENS; gi++) {
        const gen_case *g = &GENS[gi];
        for (int it = 0; it <= 3; it++) {
            sched_gen_opts o = {.ranks = 3, .microbatches = 6, .chunks = 0, .iterations = it,
                                .recompute = it % 2 ? SCHED_RECOMPUTE_FULL : SCHED_RECOMPUTE_NONE};
            pl_err e = {0};
            sched *s = g->fn(&o, NULL, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            int iters = it ? it : g->def_iters;
            CU_ASSERT_STRING_EQUAL(s->kind, g->name);
            CU_ASSERT_EQUAL(s->ranks, 3);
            CU_ASSERT_EQUAL(s->chunks, g->def_chunks);
            CU_ASSERT_EQUAL(s->stages, 3 * g->def_chunks);
            CU_ASSERT_EQUAL(s->microbatches, 6);
            CU_ASSERT_EQUAL(s->iterations, iters);
            CU_ASSERT_EQUAL(s->weights, g->weights);
            CU_ASSERT_EQUAL(s->recompute, o.recompute);
            CU_ASSERT_EQUAL(s->placement, SCHED_PLACE_LOOP);
            CU_ASSERT_EQUAL(s->lowered, 0);
            for (int st = 0; st < s->stages; st++) CU_ASSERT_EQUAL(s->stage_rank[st], st % 3);
            CU_ASSERT_EQUAL(sched_total_actions(s), (size_t)2 * s->stages * 6 * iters);
            g_fail = 0;
            CU_ASSERT(exact_counts(s, g->name));
            sched_free(s);
        }
    }
}

/* Formats rank r of s as space-separated actions ("0F1 2B0 ..."), in a static buffer. */
static const char *rank_text(const sched *s, int r) {
    static char buf[4096];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->rank[r].n && len + 24 < sizeof buf; i++) {
        const sched_action *a = &s->rank[r].acts[i];
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d%s%d", i ? " " : "", a->stage,
                                a->kind == SCHED_F ? "F" : a->kind == SCHED_B ? "B" : "?", a->mb);
    }
    return buf;
}

/* Generates name with (p, m, v, iterations) and asserts each rank's order against want[]. */
static void expect_order(gen_fn fn, int p, int m, int v, int it, const char *const *want) {
    sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = v, .iterations = it};
    pl_err e = {0};
    sched *s = fn(&o, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int r = 0; r < p; r++) {
        const char *got = rank_text(s, r);
        if (strcmp(got, want[r]) != 0)
            fprintf(stderr, "\n  %s rank %d:\n    got  %s\n    want %s", s->kind, r, got, want[r]);
        CU_ASSERT_STRING_EQUAL(got, want[r]);
    }
    sched_free(s);
}

/* Small cases written out by hand from the published rules. */
static void test_exact_orders(void) {
    static const char *const gpipe[] = {"0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1F1 1F2 1B0 1B1 1B2"};
    expect_order(sched_gen_gpipe, 2, 3, 0, 0, gpipe);
    static const char *const gpipe2[] = {"0F0 0F1 0B0 0B1 0F2 0F3 0B2 0B3",
                                         "1F0 1F1 1B0 1B1 1F2 1F3 1B2 1B3"};
    expect_order(sched_gen_gpipe, 2, 2, 0, 2, gpipe2);
    static const char *const f1b1[] = {"0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3",
                                       "1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
                                       "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3"};
    expect_order(sched_gen_1f1b, 3, 4, 1, 0, f1b1);
    /* flush per iteration: the second block starts with a fresh warm-up */
    static const char *const f1b1_it[] = {"0F0 0F1 0B0 0B1 0F2 0F3 0B2 0B3",
                                          "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"};
    expect_order(sched_gen_1f1b, 2, 2, 0, 2, f1b1_it);
    /* no flush: one warm-up, then steady state across the iteration boundary */
    static const char *const pd[] = {"0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3",
                                     "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"};
    expect_order(sched_gen_pipedream, 2, 2, 0, 2, pd);
    expect_order(sched_gen_2bw, 2, 2, 0, 2, pd);
    /* Megatron, p=2 m=4 v=2: groups of 2; rank 0 warms up 2*(2-0-1) + (2-1)*2 = 4 */
    static const char *const il[] = {"0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
                                     "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"};
    expect_order(sched_gen_interleaved, 2, 4, 2, 0, il);
    static const char *const bfs[] = {"0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0",
                                      "1F0 1F1 3F0 3F1 3B1 3B0 1B1 1B0"};
    expect_order(sched_gen_looped_bfs, 2, 2, 2, 0, bfs);
}

/* Interleaved, written independently in PyTorch's ScheduleInterleaved1F1B style (per-stage
 * microbatch counters, round = m / max(1, m / p)), wherever PyTorch serves the parameters
 * (m divisible by its number of rounds). Returns 1 when s's rank r equals it. */
static int matches_pytorch_interleaved(const sched *s, int r, int p, int m, int v) {
    int rounds = m / p > 1 ? m / p : 1;
    int per = m / rounds;
    int total = m * v;
    int warm = (v - 1) * per + 2 * (p - 1 - r);
    if (warm > total) warm = total;
    int *fmb = calloc((size_t)v, sizeof(int)), *bmb = calloc((size_t)v, sizeof(int));
    size_t k = 0;
    int ok = 1;
    const sched_rank *R = &s->rank[r];
#define EXPECT(kind_, local_, counter_)                                                         \
    do {                                                                                        \
        int st_ = (local_) * p + r, mb_ = counter_[local_]++;                                   \
        if (k >= R->n || R->acts[k].kind != (kind_) || R->acts[k].stage != st_ ||               \
            R->acts[k].mb != mb_)                                                               \
            ok = 0;                                                                             \
        k++;                                                                                    \
    } while (0)
    for (int op = 0; op < total && ok; op++) {
        if (op < warm) {
            EXPECT(SCHED_F, (op / per) % v, fmb);
        } else {
            EXPECT(SCHED_F, (op / per) % v, fmb);
            EXPECT(SCHED_B, v - 1 - ((op - warm) / per) % v, bmb);
        }
    }
    for (int op = total; op < total + warm && ok; op++) EXPECT(SCHED_B, v - 1 - ((op - warm) / per) % v, bmb);
#undef EXPECT
    if (k != R->n) ok = 0;
    free(fmb);
    free(bmb);
    return ok;
}

/* Megatron's checks on microbatch_group_size_per_vp_stage n for m microbatches on p ranks:
 * p <= n <= m, and the last group (m mod n) empty or at least p. Returns 1 when n passes. */
static int megatron_accepts(int n, int m, int p) {
    if (n < p || n > m) return 0;
    int last = m % n;
    return !(last > 0 && last < p);
}

/* Megatron's forward_backward_pipelining_with_interleaving order for rank r, written from its
 * schedule table (groups of n microbatches, every chunk per group; backward reverses the
 * chunk) and warm-up 2(p-r-1) + (v-1)n. Returns 1 when s's rank r equals it. */
static int matches_megatron_interleaved(const sched *s, int r, int p, int m, int v, int n) {
    int total = m * v;
    int *tmb = calloc((size_t)total, sizeof(int)), *tch = calloc((size_t)total, sizeof(int));
    int t = 0;
    for (int lo = 0; lo < m; lo += n) {
        int hi = lo + n >= m ? m : lo + n;
        for (int c = 0; c < v; c++)
            for (int mb = lo; mb < hi; mb++) { tmb[t] = mb; tch[t] = c; t++; }
    }
    int warm = 2 * (p - r - 1) + (v - 1) * n;
    if (warm > total) warm = total;
    const sched_rank *R = &s->rank[r];
    size_t k = 0;
    int ok = t == total;
#define AT(kind_, stage_, mb_)                                                                  \
    do {                                                                                        \
        if (k >= R->n || R->acts[k].kind != (kind_) || R->acts[k].stage != (stage_) ||          \
            R->acts[k].mb != (mb_))                                                             \
            ok = 0;                                                                             \
        k++;                                                                                    \
    } while (0)
    for (int i = 0; i < warm && ok; i++) AT(SCHED_F, tch[i] * p + r, tmb[i]);
    for (int i = 0; i < total - warm && ok; i++) {
        AT(SCHED_F, tch[warm + i] * p + r, tmb[warm + i]);
        AT(SCHED_B, (v - 1 - tch[i]) * p + r, tmb[i]);
    }
    for (int i = total - warm; i < total && ok; i++) AT(SCHED_B, (v - 1 - tch[i]) * p + r, tmb[i]);
#undef AT
    if (k != R->n) ok = 0;
    free(tmb);
    free(tch);
    return ok;
}

/* For every m >= p, interleaved is Megatron's schedule with the smallest group size Megatron
 * accepts (p whenever p divides m, its default). */
static void test_interleaved_megatron(void) {
    g_fail = 0;
    int compared = 0;
    for (int p = 1; p <= 8; p++)
        for (int m = p; m <= 32; m++) {
            int n = p;
            while (!megatron_accepts(n, m, p)) n++;
            if (m % p == 0 && n != p) GFAIL("p=%d m=%d: Megatron's default group p refused?", p, m);
            for (int v = 2; v <= 4; v++) {
                sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = v};
                pl_err e = {0};
                sched *s = sched_gen_interleaved(&o, NULL, &e);
                if (!s) {
                    GFAIL("interleaved p=%d m=%d v=%d refused: %s", p, m, v, e.msg);
                    continue;
                }
                for (int r = 0; r < p; r++)
                    if (!matches_megatron_interleaved(s, r, p, m, v, n))
                        GFAIL("interleaved p=%d m=%d v=%d (group %d) rank %d differs from "
                              "Megatron's order: %s", p, m, v, n, r, rank_text(s, r));
                compared++;
                sched_free(s);
            }
        }
    CU_ASSERT_EQUAL(g_fail, 0);
    CU_ASSERT_EQUAL(compared, 3 * (32 + 31 + 30 + 29 + 28 + 27 + 26 + 25));
}

/* Interleaved equals PyTorch's order wherever PyTorch accepts m (including m < p), and with
 * v = 1 it equals 1f1b exactly. */
static void test_interleaved_reference(void) {
    g_fail = 0;
    int compared = 0;
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 32; m++) {
            int rounds = m / p > 1 ? m / p : 1;
            for (int v = 2; v <= 4 && m % rounds == 0; v++) {
                sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = v};
                pl_err e = {0};
                sched *s = sched_gen_interleaved(&o, NULL, &e);
                if (!s) {
                    GFAIL("interleaved p=%d m=%d v=%d refused: %s", p, m, v, e.msg);
                    continue;
                }
                for (int r = 0; r < p; r++)
                    if (!matches_pytorch_interleaved(s, r, p, m, v))
                        GFAIL("interleaved p=%d m=%d v=%d rank %d differs from PyTorch's order: %s",
                              p, m, v, r, rank_text(s, r));
                compared++;
                sched_free(s);
            }
            sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = 1, .iterations = 2};
            pl_err e = {0};
            sched *a = sched_gen_interleaved(&o, NULL, &e), *b = sched_gen_1f1b(&(sched_gen_opts){
                                                           .ranks = p, .microbatches = m, .iterations = 2}, NULL, &e);
            if (!a || !b) GFAIL("v=1 p=%d m=%d: refused: %s", p, m, e.msg);
            else
                for (int r = 0; r < p; r++)
                    if (a->rank[r].n != b->rank[r].n ||
                        memcmp(a->rank[r].acts, b->rank[r].acts, a->rank[r].n * sizeof(sched_action)))
                        GFAIL("interleaved v=1 p=%d m=%d rank %d differs from 1f1b", p, m, r);
            sched_free(a);
            sched_free(b);
        }
    CU_ASSERT_EQUAL(g_fail, 0);
    CU_ASSERT(compared > 300);
}

/* Dry-runs s with f = b = 1; returns 0 and fills r, or reports and returns -1. */
static int unit_run(const sched *s, sched_dryrun_result *r, const char *what) {
    sched_unit_costs c = {1, 1, 1, 1};
    pl_err e = {0};
    memset(r, 0, sizeof *r);
    if (sched_dryrun(s, &c, r, &e) != PL_OK) {
        GFAIL("%s: dry run: %s", what, e.msg);
        return -1;
    }
    return 0;
}

/* Microbatches in flight: 1f1b holds min(p-r, m) on rank r (also over several iterations,
 * each flushed), pipedream min(p-r, m*k), gpipe m on every rank. */
static void test_inflight(void) {
    g_fail = 0;
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 32; m++) {
            struct { gen_fn fn; int it; int mbs; int gpipe; } runs[] = {
                {sched_gen_1f1b, 1, m, 0}, {sched_gen_1f1b, 3, m, 0},
                {sched_gen_pipedream, 2, 2 * m, 0}, {sched_gen_2bw, 2, 2 * m, 0},
                {sched_gen_gpipe, 1, m, 1}, {sched_gen_gpipe, 2, m, 1}};
            for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
                sched_gen_opts o = {.ranks = p, .microbatches = m, .iterations = runs[k].it};
                pl_err e = {0};
                sched *s = runs[k].fn(&o, NULL, &e);
                char what[128];
                snprintf(what, sizeof what, "%s p=%d m=%d it=%d", s ? s->kind : "?", p, m, runs[k].it);
                sched_dryrun_result r;
                if (!s || unit_run(s, &r, what) != 0) {
                    if (!s) GFAIL("%s: refused: %s", what, e.msg);
                    sched_free(s);
                    continue;
                }
                for (int q = 0; q < p; q++) {
                    int want = runs[k].gpipe ? m : (runs[k].mbs < p - q ? runs[k].mbs : p - q);
                    if (r.max_inflight[q] != want)
                        GFAIL("%s rank %d: %d microbatches in flight, want %d", what, q,
                              r.max_inflight[q], want);
                }
                sched_dryrun_free(&r, p);
                sched_free(s);
            }
        }
    CU_ASSERT_EQUAL(g_fail, 0);
}

/* Asserts steps == want and bubble == 1 - busy/(p*steps) with busy = work per rank. */
static void expect_steps(const sched *s, int64_t want, double want_bubble, const char *what) {
    sched_dryrun_result r;
    if (unit_run(s, &r, what) != 0) return;
    if (r.steps != want) GFAIL("%s: %lld steps, want %lld", what, (long long)r.steps, (long long)want);
    if (fabs(r.bubble_fraction - want_bubble) > 1e-12)
        GFAIL("%s: bubble %.15f, want %.15f", what, r.bubble_fraction, want_bubble);
    sched_dryrun_free(&r, s->ranks);
}

/* Unit-time closed forms (f = b = 1):
 * gpipe, 1f1b: steps = 2(m+p-1), bubble = (p-1)/(m+p-1);
 * pipedream, 2bw over k iterations: steps = 2(mk+p-1) (no bubble in steady state);
 * interleaved with m >= p (p | m in Megatron's own terms, and every other m >= p with the
 * group size we pick): each rank works 2mv chunk-steps and idles 2(p-1), so
 * steps = 2(mv+p-1), bubble = (p-1)/(mv+p-1), i.e. bubble/ideal = (p-1)/(vm) as in the
 * Megatron paper; with m < p the single round is bound by one microbatch's path through all
 * vp stages: steps = 2(vp+m-1). looped-bfs has the same makespans in unit time. */
static void test_closed_forms(void) {
    g_fail = 0;
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 32; m++) {
            char what[128];
            for (int gi = 0; gi < 2; gi++) {
                sched_gen_opts o = {.ranks = p, .microbatches = m};
                pl_err e = {0};
                sched *s = GENS[gi].fn(&o, NULL, &e);
                snprintf(what, sizeof what, "%s p=%d m=%d", GENS[gi].name, p, m);
                if (!s) { GFAIL("%s refused: %s", what, e.msg); continue; }
                expect_steps(s, 2 * (int64_t)(m + p - 1), (double)(p - 1) / (m + p - 1), what);
                sched_free(s);
                /* under full recomputation each B runs its forward again: (m+p-1)(2f+b) = 3(m+p-1)
                 * steps, as the simulator prices it, and the same bubble */
                o.recompute = SCHED_RECOMPUTE_FULL;
                s = GENS[gi].fn(&o, NULL, &e);
                snprintf(what, sizeof what, "%s p=%d m=%d recompute full", GENS[gi].name, p, m);
                if (!s) { GFAIL("%s refused: %s", what, e.msg); continue; }
                expect_steps(s, 3 * (int64_t)(m + p - 1), (double)(p - 1) / (m + p - 1), what);
                sched_free(s);
            }
            for (int k = 1; k <= 4; k++)
                for (int gi = 2; gi < 4; gi++) {
                    sched_gen_opts o = {.ranks = p, .microbatches = m, .iterations = k};
                    pl_err e = {0};
                    sched *s = GENS[gi].fn(&o, NULL, &e);
                    snprintf(what, sizeof what, "%s p=%d m=%d k=%d", GENS[gi].name, p, m, k);
                    if (!s) { GFAIL("%s refused: %s", what, e.msg); continue; }
                    int64_t mk = (int64_t)m * k;
                    expect_steps(s, 2 * (mk + p - 1), (double)(p - 1) / (double)(mk + p - 1), what);
                    sched_free(s);
                }
            for (int v = 1; v <= 4; v++)
                for (int gi = 4; gi < 6; gi++) {
                    sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = v};
                    pl_err e = {0};
                    sched *s = GENS[gi].fn(&o, NULL, &e);
                    snprintf(what, sizeof what, "%s p=%d m=%d v=%d", GENS[gi].name, p, m, v);
                    if (!s) { GFAIL("%s refused: %s", what, e.msg); continue; }
                    int64_t work = 2 * (int64_t)m * v;
                    int64_t steps = m >= p ? 2 * ((int64_t)m * v + p - 1) : 2 * ((int64_t)v * p + m - 1);
                    double bubble = 1.0 - (double)work / (double)steps;
                    expect_steps(s, steps, bubble, what);
                    if (m >= p) {
                        /* Megatron's ratio of bubble time to ideal time: (p-1)/(v m) */
                        double ratio = (double)(steps - work) / (double)work;
                        if (fabs(ratio - (double)(p - 1) / ((double)v * m)) > 1e-12)
                            GFAIL("%s: bubble/ideal %.15f != (p-1)/(vm)", what, ratio);
                    }
                    sched_free(s);
                }
        }
    CU_ASSERT_EQUAL(g_fail, 0);
}

/* Asserts that generating with o is refused with PL_EINPUT and a message naming the
 * generator. */
static void expect_refused(const gen_case *g, sched_gen_opts o, const char *why) {
    pl_err e = {0};
    sched *s = g->fn(&o, NULL, &e);
    if (s || e.code != PL_EINPUT || !e.msg[0] || !strstr(e.msg, g->name))
        fprintf(stderr, "\n  %s (%s): got %s, code %d, message \"%s\"", g->name, why,
                s ? "a schedule" : "NULL", e.code, e.msg);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(e.code, PL_EINPUT);
    CU_ASSERT(e.msg[0] != '\0');
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, g->name));
    sched_free(s);
}

/* Bad parameters are refused with PL_EINPUT and a message, before anything is allocated
 * (the size cases would need tens of GiB otherwise). */
static void test_refusals(void) {
    for (int gi = 0; gi < NGENS; gi++) {
        const gen_case *g = &GENS[gi];
        sched_gen_opts ok = {.ranks = 4, .microbatches = 8};
        sched_gen_opts o;
        o = ok; o.ranks = 0; expect_refused(g, o, "ranks 0");
        o = ok; o.ranks = -3; expect_refused(g, o, "ranks < 0");
        o = ok; o.ranks = SCHED_MAX_RANKS + 1; expect_refused(g, o, "too many ranks");
        o = ok; o.microbatches = 0; expect_refused(g, o, "microbatches 0");
        o = ok; o.microbatches = -1; expect_refused(g, o, "microbatches < 0");
        o = ok; o.chunks = -1; expect_refused(g, o, "chunks < 0");
        o = ok; o.iterations = -2; expect_refused(g, o, "iterations < 0");
        o = ok; o.recompute = (sched_recompute)7; expect_refused(g, o, "unknown recompute");
        o = ok; o.microbatches = SCHED_MAX_MICROBATCHES / 2 + 1; o.iterations = 2;
        expect_refused(g, o, "microbatches x iterations over the limit");
        o = ok; o.microbatches = SCHED_MAX_MICROBATCHES + 1; expect_refused(g, o, "microbatches over the limit");
        /* 2 * 65536 stages * 2^15 microbatches = 2^32 actions > SCHED_MAX_ACTIONS */
        o = ok; o.ranks = SCHED_MAX_RANKS; o.microbatches = 1 << 15; o.iterations = 1;
        expect_refused(g, o, "action count overflow");
        if (!g->has_chunks) {
            o = ok; o.chunks = 2; expect_refused(g, o, "chunks on a one-stage-per-rank schedule");
        } else {
            o = ok; o.chunks = SCHED_MAX_STAGES + 1; expect_refused(g, o, "chunks over the limit");
            o = ok; o.ranks = 2048; o.chunks = 1024; expect_refused(g, o, "stages over the limit");
            o = ok; o.ranks = 4096; o.chunks = 256; o.microbatches = 1 << 11;
            expect_refused(g, o, "action count overflow with chunks");
        }
        /* the smallest pipeline is served */
        o = ok; o.ranks = 1; o.microbatches = 1; o.iterations = 1;
        pl_err e = {0};
        sched *s = g->fn(&o, NULL, &e);
        CU_ASSERT_PTR_NOT_NULL(s);
        sched_free(s);
    }
}

/* The generator table finds these generators by name and calls these functions. */
static void test_table(void) {
    for (int gi = 0; gi < NGENS; gi++) {
        const sched_generator *t = sched_find_generator(GENS[gi].name);
        CU_ASSERT_PTR_NOT_NULL(t);
        if (t) CU_ASSERT_PTR_EQUAL(t->gen, GENS[gi].fn);
    }
}

/* sched_stage_steps_each_backward on the lowered lists: PipeDream's stages step after each
 * backward (p x m STEPs over its iterations), 2BW's once every m microbatches, 1F1B's and ZB-H1's
 * once an iteration; the unlowered lists have no STEP; a stage out of range has none. */
static void test_steps_each_backward(void) {
    const struct { gen_fn fn; int want; } runs[] = {
        {sched_gen_pipedream, 1}, {sched_gen_2bw, 0}, {sched_gen_1f1b, 0}, {sched_gen_gpipe, 0}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++)
        for (int p = 2; p <= 4; p++) {
            sched_gen_opts o = {.ranks = p, .microbatches = 2 * p, .iterations = 2};
            pl_err e = {0};
            sched *s = runs[k].fn(&o, NULL, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            sched *l = sched_lower(s, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(l);
            for (int q = 0; q < p; q++) {
                CU_ASSERT_EQUAL(sched_stage_steps_each_backward(l, q), runs[k].want);
                CU_ASSERT_EQUAL(sched_stage_steps_each_backward(s, q), 0);
            }
            CU_ASSERT_EQUAL(sched_stage_steps_each_backward(l, p), 0);
            sched_free(l);
            sched_free(s);
        }
}

void test_gen_register(void) {
    static const pl_test_case cases[] = {
        {"grid: refused exactly by the rule, otherwise valid, lowered, no deadlock", test_grid},
        {"shape, policies and defaults", test_shape_policies},
        {"exact orders of small cases", test_exact_orders},
        {"interleaved equals PyTorch's order and 1f1b at v=1", test_interleaved_reference},
        {"interleaved equals Megatron's order for every m >= p", test_interleaved_megatron},
        {"microbatches in flight", test_inflight},
        {"which stages step after each backward", test_steps_each_backward},
        {"unit-time closed forms", test_closed_forms},
        {"bad parameters refused", test_refusals},
        {"generator table", test_table},
        {NULL, NULL},
    };
    pl_test_suite("gen_basic", cases);
}
