/* test_zb.c: CUnit suite for the split-backward generators (zb-h1, zb-h2, zbv, dualpipev). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"

typedef sched *(*gen_fn)(const sched_gen_opts *, const sched_budget *, pl_err *);

/* The generators under test and the facts the tests rely on. */
typedef struct zb_case {
    const char *name;
    gen_fn fn;
    int v;     /* stages per rank */
    int min_m; /* 0: every m >= 1 is served; otherwise m >= min_m * ranks */
} zb_case;

static const zb_case ZB[] = {
    {"zb-h1", sched_gen_zb_h1, 1, 0},
    {"zb-h2", sched_gen_zb_h2, 1, 0},
    {"zbv", sched_gen_zbv, 2, 0},
    {"dualpipev", sched_gen_dualpipev, 2, 2},
};
#define NZB ((int)(sizeof ZB / sizeof ZB[0]))

/* Failures inside loops are counted and the first few printed, then asserted once. */
static int z_fail;
#define ZFAIL(...)                                                                              \
    do {                                                                                        \
        if (z_fail++ < 12) {                                                                    \
            fprintf(stderr, "\n  test_zb: ");                                                   \
            fprintf(stderr, __VA_ARGS__);                                                       \
        }                                                                                       \
    } while (0)

/* Returns the reason a grid point must be refused, or NULL when it must be served. The rule:
 * zb-h1 and zb-h2 take chunks 0 or 1, zbv and dualpipev chunks 0 or 2; dualpipev needs
 * m >= 2p (PyTorch's ScheduleDualPipeV rule); everything else is served. */
static const char *grid_refusal(const zb_case *g, int p, int m, int chunks) {
    if (g->v == 1 && chunks != 0 && chunks != 1) return "chunks other than 0/1";
    if (g->v == 2 && chunks != 0 && chunks != 2) return "chunks other than 0/2";
    if (g->min_m && m < g->min_m * p) return "m < 2p";
    return NULL;
}

/* Counts one compute half: F into f, B into b, I into i, W into w (indexed by stage, mb). */
static void count_half(unsigned char *f, unsigned char *b, unsigned char *i, unsigned char *w,
                       size_t mbs, int kind, int stage, int mb) {
    size_t k = (size_t)stage * mbs + (size_t)mb;
    if (kind == SCHED_F) f[k]++;
    else if (kind == SCHED_B) b[k]++;
    else if (kind == SCHED_I) i[k]++;
    else if (kind == SCHED_W) w[k]++;
}

/* Returns 1 when the compute-only s has, for every (stage, mb), exactly one F and either one
 * B or one I and one W, each on the rank holding the stage, with nothing but compute actions
 * (the halves of an overlap count); reports the first problem otherwise. */
static int exact_counts(const sched *s, const char *what) {
    size_t mbs = (size_t)s->microbatches * (size_t)s->iterations;
    size_t n = (size_t)s->stages * mbs;
    unsigned char *f = calloc(n, 1), *b = calloc(n, 1), *in = calloc(n, 1), *w = calloc(n, 1);
    int ok = f && b && in && w;
    for (int r = 0; ok && r < s->ranks; r++)
        for (size_t k = 0; ok && k < s->rank[r].n; k++) {
            const sched_action *a = &s->rank[r].acts[k];
            int bad = !sched_kind_is_compute((sched_kind)a->kind) || a->stage < 0 ||
                      a->stage >= s->stages || a->mb < 0 || (size_t)a->mb >= mbs ||
                      s->stage_rank[a->stage] != r;
            if (!bad && a->kind == SCHED_OVERLAP)
                bad = (a->kind2 != SCHED_B && a->kind2 != SCHED_I) || a->stage2 < 0 ||
                      a->stage2 >= s->stages || a->mb2 < 0 || (size_t)a->mb2 >= mbs ||
                      s->stage_rank[a->stage2] != r;
            if (bad) {
                ZFAIL("%s: rank %d position %zu: unexpected action kind %d stage %d mb %d", what,
                      r, k, a->kind, a->stage, a->mb);
                ok = 0;
                break;
            }
            if (a->kind == SCHED_OVERLAP) {
                count_half(f, b, in, w, mbs, SCHED_F, a->stage, a->mb);
                count_half(f, b, in, w, mbs, a->kind2, a->stage2, a->mb2);
            } else {
                count_half(f, b, in, w, mbs, a->kind, a->stage, a->mb);
            }
        }
    for (size_t k = 0; ok && k < n; k++)
        if (f[k] != 1 || !((b[k] == 1 && !in[k] && !w[k]) || (!b[k] && in[k] == 1 && w[k] == 1))) {
            ZFAIL("%s: stage %zu mb %zu has %d F, %d B, %d I, %d W", what, k / mbs, k % mbs, f[k],
                  b[k], in[k], w[k]);
            ok = 0;
        }
    free(f);
    free(b);
    free(in);
    free(w);
    return ok;
}

/* Runs every check on one generated schedule: validate, exact counts, dry run, lower, validate
 * and dry-run the lowered form. Returns 1 when all pass. */
static int check_valid(const sched *s, const char *what) {
    pl_err e = {0};
    if (s->lowered) {
        ZFAIL("%s: generator output is marked lowered", what);
        return 0;
    }
    if (sched_validate(s, &e) != PL_OK) {
        ZFAIL("%s: validate: %s", what, e.msg);
        return 0;
    }
    if (!exact_counts(s, what)) return 0;
    sched_dryrun_result r;
    memset(&r, 0, sizeof r);
    if (sched_dryrun(s, NULL, &r, &e) != PL_OK) {
        ZFAIL("%s: dry run: %s", what, e.msg);
        return 0;
    }
    sched_dryrun_free(&r, s->ranks);
    sched *l = sched_lower(s, &e);
    if (!l) {
        ZFAIL("%s: lower: %s", what, e.msg);
        return 0;
    }
    int ok = 1;
    if (!l->lowered) {
        ZFAIL("%s: lowered copy not marked lowered", what);
        ok = 0;
    } else if (sched_validate(l, &e) != PL_OK) {
        ZFAIL("%s: validate lowered: %s", what, e.msg);
        ok = 0;
    } else {
        memset(&r, 0, sizeof r);
        if (sched_dryrun(l, NULL, &r, &e) != PL_OK) {
            ZFAIL("%s: dry run lowered: %s", what, e.msg);
            ok = 0;
        } else {
            sched_dryrun_free(&r, l->ranks);
        }
    }
    sched_free(l);
    return ok;
}

/* Every generator over ranks 1..8, microbatches 1..32, chunks 0..3: refused exactly where
 * grid_refusal says (PL_EINPUT, a message naming the generator), otherwise valid, lowerable
 * and deadlock-free; plus 2 and 3 iterations on a smaller grid. */
static void test_zb_grid(void) {
    z_fail = 0;
    int served = 0, refused = 0, want_served = 0, want_refused = 0;
    for (int gi = 0; gi < NZB; gi++) {
        const zb_case *g = &ZB[gi];
        for (int p = 1; p <= 8; p++)
            for (int m = 1; m <= 32; m++)
                for (int c = 0; c <= 3; c++) {
                    char what[128];
                    snprintf(what, sizeof what, "%s p=%d m=%d chunks=%d", g->name, p, m, c);
                    sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = c};
                    pl_err e = {0};
                    sched *s = g->fn(&o, NULL, &e);
                    const char *why = grid_refusal(g, p, m, c);
                    if (why) {
                        want_refused++;
                        if (s) ZFAIL("%s: served, but must be refused (%s)", what, why);
                        else if (e.code != PL_EINPUT || strncmp(e.msg, g->name, strlen(g->name)))
                            ZFAIL("%s: refused without PL_EINPUT and a named message: %s", what,
                                  e.msg);
                        else refused++;
                        sched_free(s);
                        continue;
                    }
                    want_served++;
                    if (!s) {
                        ZFAIL("%s: refused: %s", what, e.msg);
                        continue;
                    }
                    if (check_valid(s, what)) served++;
                    sched_free(s);
                }
    }
    static const int ms[] = {1, 5, 9, 16};
    int served_it = 0, want_it = 0;
    for (int gi = 0; gi < NZB; gi++)
        for (int p = 1; p <= 8; p++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (int it = 2; it <= 3; it++) {
                    if (grid_refusal(&ZB[gi], p, ms[mi], 0)) continue;
                    want_it++;
                    char what[128];
                    snprintf(what, sizeof what, "%s p=%d m=%d iterations=%d", ZB[gi].name, p,
                             ms[mi], it);
                    sched_gen_opts o = {.ranks = p, .microbatches = ms[mi], .iterations = it};
                    pl_err e = {0};
                    sched *s = ZB[gi].fn(&o, NULL, &e);
                    if (!s) ZFAIL("%s: refused: %s", what, e.msg);
                    else if (check_valid(s, what)) served_it++;
                    sched_free(s);
                }
    CU_ASSERT_EQUAL(z_fail, 0);
    /* the rule itself: per generator 8 x 32 points x 2 accepted chunk values, minus the
     * dualpipev points with m < 2p (sum over p of 2p - 1 = 64) */
    CU_ASSERT_EQUAL(want_served, 4 * 8 * 32 * 2 - 64 * 2);
    CU_ASSERT_EQUAL(want_refused, 4 * 8 * 32 * 2 + 64 * 2);
    CU_ASSERT_EQUAL(served, want_served);
    CU_ASSERT_EQUAL(refused, want_refused);
    CU_ASSERT_EQUAL(served_it, want_it);
}

/* Shape and policies: kind, placement, stages, chunks, iterations, weights, recomputation. */
static void test_zb_shape(void) {
    for (int gi = 0; gi < NZB; gi++)
        for (int it = 0; it <= 2; it++) {
            sched_gen_opts o = {.ranks = 3, .microbatches = 7, .iterations = it,
                                .recompute = it == 1 ? SCHED_RECOMPUTE_FULL : SCHED_RECOMPUTE_NONE};
            pl_err e = {0};
            sched *s = ZB[gi].fn(&o, NULL, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            CU_ASSERT_STRING_EQUAL(s->kind, ZB[gi].name);
            CU_ASSERT_EQUAL(s->ranks, 3);
            CU_ASSERT_EQUAL(s->chunks, ZB[gi].v);
            CU_ASSERT_EQUAL(s->stages, 3 * ZB[gi].v);
            CU_ASSERT_EQUAL(s->placement, ZB[gi].v == 2 ? SCHED_PLACE_V : SCHED_PLACE_LOOP);
            CU_ASSERT_EQUAL(s->microbatches, 7);
            CU_ASSERT_EQUAL(s->iterations, it ? it : 1);
            CU_ASSERT_EQUAL(s->weights, SCHED_WEIGHTS_FLUSH);
            CU_ASSERT_EQUAL(s->recompute, o.recompute);
            CU_ASSERT_EQUAL(s->lowered, 0);
            if (ZB[gi].v == 2) {
                static const int want[6] = {0, 1, 2, 2, 1, 0};
                for (int st = 0; st < 6; st++) CU_ASSERT_EQUAL(s->stage_rank[st], want[st]);
            }
            sched_free(s);
        }
}

/* Asserts that fn refuses o with PL_EINPUT and a message starting with name and containing
 * the fragment why. */
static void expect_refused(const char *name, gen_fn fn, const sched_gen_opts *o, const char *why) {
    pl_err e = {0};
    sched *s = fn(o, NULL, &e);
    CU_ASSERT_PTR_NULL(s);
    sched_free(s);
    CU_ASSERT_EQUAL(e.code, PL_EINPUT);
    CU_ASSERT_EQUAL(strncmp(e.msg, name, strlen(name)), 0);
    if (!strstr(e.msg, why)) {
        fprintf(stderr, "\n  test_zb: %s: message lacks '%s': %s", name, why, e.msg);
        CU_FAIL("refusal message");
    }
}

/* Refusals with their reasons: missing options, ranks, microbatches, chunks, iterations,
 * recomputation, the size limits (before anything is allocated), and dualpipev's m >= 2p. */
static void test_zb_refusals(void) {
    for (int gi = 0; gi < NZB; gi++) {
        const char *nm = ZB[gi].name;
        gen_fn fn = ZB[gi].fn;
        pl_err e = {0};
        CU_ASSERT_PTR_NULL(fn(NULL, NULL, &e));
        CU_ASSERT_EQUAL(e.code, PL_EINPUT);
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = 0, .microbatches = 8}, "--ranks 0");
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = -3, .microbatches = 8}, "--ranks -3");
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = SCHED_MAX_RANKS + 1, .microbatches = 8},
                       "limit");
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = 2, .microbatches = 0}, "--microbatches 0");
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = 2, .microbatches = 8, .chunks = 3},
                       "--chunks 3");
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = 2, .microbatches = 8, .chunks = -1},
                       "--chunks -1");
        expect_refused(nm, fn,
                       &(sched_gen_opts){.ranks = 2, .microbatches = 8, .chunks = ZB[gi].v == 1 ? 2 : 1},
                       ZB[gi].v == 1 ? "so --chunks is 1" : "so --chunks is 2");
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = 2, .microbatches = 8, .iterations = -1},
                       "--iterations -1");
        expect_refused(nm, fn,
                       &(sched_gen_opts){.ranks = 2, .microbatches = 8, .recompute = (sched_recompute)7},
                       "recomputation");
        /* 2^24 microbatches x 2 iterations: over the microbatch limit */
        expect_refused(nm, fn,
                       &(sched_gen_opts){.ranks = 2, .microbatches = SCHED_MAX_MICROBATCHES,
                                         .iterations = 2},
                       "exceeds the limit");
        /* 65536 ranks x 2^20 microbatches: more actions than SCHED_MAX_ACTIONS; refused at
         * once, without allocating */
        expect_refused(nm, fn, &(sched_gen_opts){.ranks = SCHED_MAX_RANKS, .microbatches = 1 << 20},
                       "actions");
    }
    for (int p = 1; p <= 8; p++) {
        expect_refused("dualpipev", sched_gen_dualpipev,
                       &(sched_gen_opts){.ranks = p, .microbatches = 2 * p - 1},
                       "as many microbatches as stages");
        pl_err e = {0};
        sched *s = sched_gen_dualpipev(&(sched_gen_opts){.ranks = p, .microbatches = 2 * p}, NULL, &e);
        CU_ASSERT_PTR_NOT_NULL(s);
        sched_free(s);
    }
}

/* Dry-runs s with costs (NULL = all ones) into r; returns 1 on success, reporting otherwise. */
static int run(const sched *s, const sched_unit_costs *c, sched_dryrun_result *r,
               const char *what) {
    pl_err e = {0};
    memset(r, 0, sizeof *r);
    if (sched_dryrun(s, c, r, &e) != PL_OK) {
        ZFAIL("%s: dry run: %s", what, e.msg);
        return 0;
    }
    return 1;
}

/* Returns the idle steps of rank q between the start of its first action and the end of its
 * last one: the per-worker bubble the Zero Bubble paper counts. */
static int64_t rank_idle(const sched *s, const sched_dryrun_result *r, int q) {
    if (s->rank[q].n == 0) return 0;
    int64_t first = r->slot[q][0].start, last = 0;
    for (size_t k = 0; k < s->rank[q].n; k++)
        if (r->slot[q][k].end > last) last = r->slot[q][k].end;
    return last - first - r->busy[q];
}

/* Returns the most microbatches rank q holds activations for along its list: F adds one, B or
 * I releases one (an overlap adds its forward first). This is the memory the paper counts in
 * M_B; the dry run's max_inflight also keeps a microbatch until its W. */
static int activations(const sched *s, int q) {
    int cur = 0, mx = 0;
    for (size_t k = 0; k < s->rank[q].n; k++) {
        const sched_action *a = &s->rank[q].acts[k];
        if (a->kind == SCHED_F || a->kind == SCHED_OVERLAP) cur++;
        if (cur > mx) mx = cur;
        if (a->kind == SCHED_B || a->kind == SCHED_I || a->kind == SCHED_OVERLAP) cur--;
    }
    return mx;
}

/* Returns the smaller of a and b. */
static int imin(int a, int b) { return a < b ? a : b; }

/* Microbatches in flight per rank, against the Zero Bubble paper (Section 2): ZB-H1 keeps
 * 1F1B's activations (p-r on rank r) and, by delaying W by r repetitions, the same min(m, p)
 * microbatches in flight (F done, W not done) on every rank; ZB-H2 holds 2p-1 on the first rank
 * (2(p-r)-1 activations on rank r) and 2p-1 in flight on every rank when m >= 2p-1; ZB-V holds
 * 2p chunk activations (1F1B's memory in half-size chunks) when m >= 2p-1. */
static void test_zb_inflight(void) {
    z_fail = 0;
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 32; m++) {
            sched_gen_opts o = {.ranks = p, .microbatches = m};
            pl_err e = {0};
            char what[96];
            sched_dryrun_result r;
            sched *s = sched_gen_zb_h1(&o, NULL, &e);
            snprintf(what, sizeof what, "zb-h1 p=%d m=%d", p, m);
            if (s && run(s, NULL, &r, what)) {
                for (int q = 0; q < p; q++) {
                    if (r.max_inflight[q] != imin(m, p))
                        ZFAIL("%s rank %d: %d in flight, want %d", what, q, r.max_inflight[q],
                              imin(m, p));
                    if (activations(s, q) != imin(m, p - q))
                        ZFAIL("%s rank %d: %d activations, want %d", what, q, activations(s, q),
                              imin(m, p - q));
                }
                sched_dryrun_free(&r, p);
            } else if (!s) {
                ZFAIL("%s: %s", what, e.msg);
            }
            sched_free(s);
            s = sched_gen_zb_h2(&o, NULL, &e);
            snprintf(what, sizeof what, "zb-h2 p=%d m=%d", p, m);
            if (s && run(s, NULL, &r, what)) {
                for (int q = 0; q < p; q++) {
                    int want = imin(m, 2 * p - 1), want_act = imin(m, 2 * (p - q) - 1);
                    if (r.max_inflight[q] != want)
                        ZFAIL("%s rank %d: %d in flight, want %d", what, q, r.max_inflight[q],
                              want);
                    if (activations(s, q) != want_act)
                        ZFAIL("%s rank %d: %d activations, want %d", what, q, activations(s, q),
                              want_act);
                }
                sched_dryrun_free(&r, p);
            } else if (!s) {
                ZFAIL("%s: %s", what, e.msg);
            }
            sched_free(s);
            if (m >= 2 * p - 1) {
                s = sched_gen_zbv(&o, NULL, &e);
                snprintf(what, sizeof what, "zbv p=%d m=%d", p, m);
                if (s && run(s, NULL, &r, what)) {
                    for (int q = 0; q < p; q++)
                        if (r.max_inflight[q] != 2 * p || activations(s, q) != 2 * p)
                            ZFAIL("%s rank %d: %d in flight, %d activations, want %d", what, q,
                                  r.max_inflight[q], activations(s, q), 2 * p);
                    sched_dryrun_free(&r, p);
                } else if (!s) {
                    ZFAIL("%s: %s", what, e.msg);
                }
                sched_free(s);
            }
        }
    CU_ASSERT_EQUAL(z_fail, 0);
}

/* Unit-time bubbles. With f = i = w = 1 the ideal per rank is 3m steps (6m for the two chunks
 * of ZB-V). ZB-H1 (m >= p): makespan 3m + p - 1, rank r idles p-1-r steps between its first
 * and last action, so the first rank's bubble is the paper's (p-1)(tF+tB-tW) = p-1. ZB-H2
 * (m >= 2p-1): the same makespan, but every rank is busy without a gap (the parallelogram):
 * the paper's (p-1)(tF+tB-2tW) = 0; two iterations tile into 6m + p - 1. ZB-V (m >= 2p-1):
 * makespan 6m + p - 1, no gap on any rank. DualPipeV (m >= 2p, b = 2, an overlap costs F + B):
 * makespan 6m + 2(p-1). With other costs (w <= f, w <= i) the first rank's bubble is
 * (p-1)(f+i-w) for ZB-H1 and (p-1)max(0, f+i-2w) for ZB-H2, the paper's formulas. */
static void test_zb_bubbles(void) {
    z_fail = 0;
    sched_unit_costs unit = {1, 2, 1, 1};
    for (int p = 1; p <= 8; p++)
        for (int m = 1; m <= 32; m++) {
            sched_gen_opts o = {.ranks = p, .microbatches = m};
            pl_err e = {0};
            char what[96];
            sched_dryrun_result r;
            if (m >= p) {
                sched *s = sched_gen_zb_h1(&o, NULL, &e);
                snprintf(what, sizeof what, "zb-h1 p=%d m=%d", p, m);
                if (s && run(s, &unit, &r, what)) {
                    if (r.steps != 3 * m + p - 1)
                        ZFAIL("%s: %lld steps, want %d", what, (long long)r.steps, 3 * m + p - 1);
                    for (int q = 0; q < p; q++)
                        if (rank_idle(s, &r, q) != p - 1 - q)
                            ZFAIL("%s rank %d: idle %lld, want %d", what, q,
                                  (long long)rank_idle(s, &r, q), p - 1 - q);
                    sched_dryrun_free(&r, p);
                }
                sched_free(s);
            }
            if (m >= 2 * p - 1) {
                for (int it = 1; it <= 2; it++) {
                    o.iterations = it;
                    sched *s = sched_gen_zb_h2(&o, NULL, &e);
                    snprintf(what, sizeof what, "zb-h2 p=%d m=%d iterations=%d", p, m, it);
                    if (s && run(s, &unit, &r, what)) {
                        if (r.steps != 3 * m * it + p - 1)
                            ZFAIL("%s: %lld steps, want %d", what, (long long)r.steps,
                                  3 * m * it + p - 1);
                        for (int q = 0; q < p; q++)
                            if (rank_idle(s, &r, q) != 0)
                                ZFAIL("%s rank %d: idle %lld, want 0", what, q,
                                      (long long)rank_idle(s, &r, q));
                        sched_dryrun_free(&r, p);
                    }
                    sched_free(s);
                }
                o.iterations = 0;
                sched *s = sched_gen_zbv(&o, NULL, &e);
                snprintf(what, sizeof what, "zbv p=%d m=%d", p, m);
                if (s && run(s, &unit, &r, what)) {
                    if (r.steps != 6 * m + p - 1)
                        ZFAIL("%s: %lld steps, want %d", what, (long long)r.steps, 6 * m + p - 1);
                    for (int q = 0; q < p; q++)
                        if (rank_idle(s, &r, q) != 0)
                            ZFAIL("%s rank %d: idle %lld, want 0", what, q,
                                  (long long)rank_idle(s, &r, q));
                    sched_dryrun_free(&r, p);
                }
                sched_free(s);
            }
            if (m >= 2 * p) {
                sched *s = sched_gen_dualpipev(&o, NULL, &e);
                snprintf(what, sizeof what, "dualpipev p=%d m=%d", p, m);
                if (s && run(s, &unit, &r, what)) {
                    if (r.steps != 6 * m + 2 * (p - 1))
                        ZFAIL("%s: %lld steps, want %d", what, (long long)r.steps,
                              6 * m + 2 * (p - 1));
                    sched_dryrun_free(&r, p);
                }
                sched_free(s);
            }
        }
    /* other costs: the paper's first-worker bubble formulas */
    static const sched_unit_costs costs[] = {{2, 3, 2, 1}, {1, 3, 2, 1}, {2, 2, 1, 1},
                                             {3, 4, 2, 2}, {2, 4, 3, 1}, {1, 3, 1, 2}};
    for (size_t ci = 0; ci < sizeof costs / sizeof costs[0]; ci++)
        for (int p = 2; p <= 8; p++) {
            const sched_unit_costs *c = &costs[ci];
            int m = 3 * p;
            sched_gen_opts o = {.ranks = p, .microbatches = m};
            pl_err e = {0};
            char what[128];
            sched_dryrun_result r;
            if (c->w <= c->f && c->w <= c->i) {
                sched *s = sched_gen_zb_h1(&o, NULL, &e);
                snprintf(what, sizeof what, "zb-h1 p=%d m=%d f=%d i=%d w=%d", p, m, c->f, c->i,
                         c->w);
                if (s && run(s, c, &r, what)) {
                    int64_t want = (int64_t)(p - 1) * (c->f + c->i - c->w);
                    if (rank_idle(s, &r, 0) != want)
                        ZFAIL("%s: first-rank bubble %lld, want %lld", what,
                              (long long)rank_idle(s, &r, 0), (long long)want);
                    if (r.steps != (int64_t)m * (c->f + c->i + c->w) + want)
                        ZFAIL("%s: %lld steps, want %lld", what, (long long)r.steps,
                              (long long)(m * (c->f + c->i + c->w) + want));
                    sched_dryrun_free(&r, p);
                }
                sched_free(s);
            }
            sched *s = sched_gen_zb_h2(&o, NULL, &e);
            snprintf(what, sizeof what, "zb-h2 p=%d m=%d f=%d i=%d w=%d", p, m, c->f, c->i, c->w);
            if (s && run(s, c, &r, what)) {
                int64_t d = c->f + c->i - 2 * c->w, want = (int64_t)(p - 1) * (d > 0 ? d : 0);
                if (rank_idle(s, &r, 0) != want)
                    ZFAIL("%s: first-rank bubble %lld, want %lld", what,
                          (long long)rank_idle(s, &r, 0), (long long)want);
                sched_dryrun_free(&r, p);
            }
            sched_free(s);
        }
    CU_ASSERT_EQUAL(z_fail, 0);
}

/* Returns rank r of s as comma-separated action text (static buffer). */
static const char *rank_text(const sched *s, int r) {
    static char buf[8192];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < s->rank[r].n && len + 64 < sizeof buf; k++) {
        if (k) buf[len++] = ',';
        len += (size_t)sched_action_format(&s->rank[r].acts[k], buf + len, sizeof buf - len);
    }
    return buf;
}

/* Asserts the exact per-rank orders of fn for p ranks and m microbatches. */
static void expect_order(gen_fn fn, int p, int m, const char *const *want) {
    pl_err e = {0};
    sched *s = fn(&(sched_gen_opts){.ranks = p, .microbatches = m}, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int r = 0; r < p; r++) {
        const char *got = rank_text(s, r);
        if (strcmp(got, want[r]) != 0) {
            fprintf(stderr, "\n  test_zb: %s p=%d m=%d rank %d:\n    got  %s\n    want %s", s->kind,
                    p, m, r, got, want[r]);
            CU_FAIL("order differs");
        }
    }
    sched_free(s);
}

/* Exact orders for small cases: ZB-H1 and ZB-H2 as in the paper's Fig. 3 (p = 4, m = 8: the
 * delayed W on later ranks; ZB-H2's 7 warm-up forwards and the 7 trailing W of the last
 * rank), ZB-V for p = 2, m = 4 (PyTorch's ScheduleZBVZeroBubble order). */
static void test_zb_exact_orders(void) {
    static const char *const h1[] = {
        "0F0,0F1,0F2,0F3,0I0,0W0,0F4,0I1,0W1,0F5,0I2,0W2,0F6,0I3,0W3,0F7,0I4,0W4,0I5,0W5,0I6,"
        "0W6,0I7,0W7",
        "1F0,1F1,1F2,1I0,1F3,1I1,1W0,1F4,1I2,1W1,1F5,1I3,1W2,1F6,1I4,1W3,1F7,1I5,1W4,1I6,1W5,"
        "1I7,1W6,1W7",
        "2F0,2F1,2I0,2F2,2I1,2F3,2I2,2W0,2F4,2I3,2W1,2F5,2I4,2W2,2F6,2I5,2W3,2F7,2I6,2W4,2I7,"
        "2W5,2W6,2W7",
        "3F0,3I0,3F1,3I1,3F2,3I2,3F3,3I3,3W0,3F4,3I4,3W1,3F5,3I5,3W2,3F6,3I6,3W3,3F7,3I7,3W4,"
        "3W5,3W6,3W7",
    };
    expect_order(sched_gen_zb_h1, 4, 8, h1);
    static const char *const h2[] = {
        "0F0,0F1,0F2,0F3,0F4,0F5,0F6,0I0,0W0,0F7,0I1,0W1,0I2,0W2,0I3,0W3,0I4,0W4,0I5,0W5,0I6,"
        "0W6,0I7,0W7",
        "1F0,1F1,1F2,1F3,1F4,1I0,1W0,1F5,1I1,1F6,1I2,1F7,1I3,1W1,1I4,1W2,1I5,1W3,1I6,1W4,1I7,"
        "1W5,1W6,1W7",
        "2F0,2F1,2F2,2I0,2W0,2F3,2I1,2F4,2I2,2F5,2I3,2F6,2I4,2F7,2I5,2W1,2I6,2W2,2I7,2W3,2W4,"
        "2W5,2W6,2W7",
        "3F0,3I0,3W0,3F1,3I1,3F2,3I2,3F3,3I3,3F4,3I4,3F5,3I5,3F6,3I6,3F7,3I7,3W1,3W2,3W3,3W4,"
        "3W5,3W6,3W7",
    };
    expect_order(sched_gen_zb_h2, 4, 8, h2);
    static const char *const v[] = {
        "0F0,0F1,0F2,3F0,3I0,3W0,3F1,3I1,3W1,0F3,0I0,0W0,3F2,3I2,3W2,0I1,0W1,3F3,3I3,3W3,0I2,"
        "0W2,0I3,0W3",
        "1F0,2F0,1F1,2F1,2I0,2W0,1F2,1I0,1W0,2F2,2I1,2W1,1F3,1I1,1W1,2F3,2I2,2W2,1I2,2I3,1I3,"
        "1W2,2W3,1W3",
    };
    expect_order(sched_gen_zbv, 2, 4, v);
}

/* Reads the PyTorch DualPipeV CSV at path into rows of parsed actions: returns the number of
 * rows (at most max_rows), row lengths in len[], or -1 when the file is missing or bad. */
static int read_csv_rows(const char *path, sched_action rows[][256], int len[], int max_rows) {
    char *text = NULL;
    size_t n = 0;
    pl_err e = {0};
    if (pl_read_file(path, 1 << 20, &text, &n, &e) != PL_OK) return -1;
    int nrows = 0;
    const char *p = text, *end = text + n;
    while (p < end && nrows < max_rows) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *q = eol;
        while (q > p && (q[-1] == '\r' || q[-1] == ' ')) q--;
        if (q > p) {
            len[nrows] = 0;
            const char *c = p;
            while (c <= q && len[nrows] < 256) {
                const char *comma = memchr(c, ',', (size_t)(q - c));
                if (!comma) comma = q;
                size_t col = 0;
                if (comma > c &&
                    sched_action_parse(c, (size_t)(comma - c), SCHED_LETTERS_CURRENT,
                                       &rows[nrows][len[nrows]++], &col, &e) != PL_OK) {
                    fprintf(stderr, "\n  test_zb: %s: %s", path, e.msg);
                    free(text);
                    return -1;
                }
                c = comma + 1;
            }
            nrows++;
        }
        p = eol + 1;
    }
    free(text);
    return nrows;
}

/* DualPipeV for p = 4, m = 10 equals PyTorch's ScheduleDualPipeV output (the shared CSV,
 * compute only, one row per rank, kept in schedules/examples/torch/) action by action. */
static void test_dualpipev_pytorch(void) {
    pl_err e = {0};
    sched *s = sched_gen_dualpipev(&(sched_gen_opts){.ranks = 4, .microbatches = 10}, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    /* properties that hold without the file: overlaps pair the two chunks of a rank, and rank
     * r has 2(m-2p+r+1) of them in the steady phase (one fewer on the last rank, whose first
     * pair starts plain) plus p-r-1 in the phase after: p(2m-3p+1) + p(p-1)/2 - 1 = 41 */
    int overlaps = 0;
    for (int r = 0; r < 4; r++)
        for (size_t k = 0; k < s->rank[r].n; k++) {
            const sched_action *a = &s->rank[r].acts[k];
            if (a->kind != SCHED_OVERLAP) continue;
            overlaps++;
            CU_ASSERT_EQUAL(a->kind2, SCHED_B);
            CU_ASSERT_EQUAL(a->stage + a->stage2, 7);
        }
    CU_ASSERT_EQUAL(overlaps, 4 * (2 * 10 - 3 * 4 + 1) + 4 * 3 / 2 - 1);
    char *path = pl_test_path(PIPELAB_TORCH_DIR, "pytorch_dualpipev_4rank_10mb.csv");
    CU_ASSERT_FATAL(pl_test_exists(path));
    static sched_action rows[8][256];
    int len[8] = {0};
    int nrows = read_csv_rows(path, rows, len, 8);
    CU_ASSERT_EQUAL(nrows, 4);
    for (int r = 0; r < 4 && r < nrows; r++) {
        CU_ASSERT_EQUAL((size_t)len[r], s->rank[r].n);
        for (size_t k = 0; k < s->rank[r].n && k < (size_t)len[r]; k++) {
            const sched_action *a = &s->rank[r].acts[k], *b = &rows[r][k];
            int same = a->kind == b->kind && a->stage == b->stage && a->mb == b->mb;
            if (same && a->kind == SCHED_OVERLAP)
                same = a->kind2 == b->kind2 && a->stage2 == b->stage2 && a->mb2 == b->mb2;
            if (!same) {
                char x[64], y[64];
                sched_action_format(a, x, sizeof x);
                sched_action_format(b, y, sizeof y);
                fprintf(stderr, "\n  test_zb: dualpipev rank %d action %zu: %s, PyTorch %s", r, k,
                        x, y);
                CU_FAIL("dualpipev differs from PyTorch");
                break;
            }
        }
    }
    free(path);
    sched_free(s);
}

/* Adds the schedules/zb suite to the CUnit registry. */
void test_zb_register(void) {
    static const pl_test_case cases[] = {
        {"grid: refused by rule or valid, lowerable, deadlock-free", test_zb_grid},
        {"shape and policies", test_zb_shape},
        {"refusals name the rule", test_zb_refusals},
        {"in flight per rank (paper counts)", test_zb_inflight},
        {"unit-time bubbles (paper formulas)", test_zb_bubbles},
        {"exact orders", test_zb_exact_orders},
        {"dualpipev equals PyTorch (p=4, m=10)", test_dualpipev_pytorch},
        {NULL, NULL},
    };
    pl_test_suite("schedules/zb", cases);
}
