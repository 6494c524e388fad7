/* test_lower.c: validation errors, the dry run (deadlocks, closed forms) and lowering. */
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"

/* Builds a compute-only schedule from one string per rank ("0F0 0B0 ..."), loop placement. */
static sched *build(int ranks, int stages, int mb, const char *const *rows) {
    pl_err e;
    sched *s = sched_new(ranks, stages, mb, SCHED_PLACE_LOOP, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int r = 0; r < ranks; r++) {
        char *dup = strdup(rows[r]), *save = NULL;
        for (char *t = strtok_r(dup, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            sched_action a;
            size_t col;
            CU_ASSERT_EQUAL_FATAL(sched_action_parse(t, strlen(t), SCHED_LETTERS_CURRENT, &a, &col, &e), PL_OK);
            if (a.kind >= SCHED_SEND_F && a.kind <= SCHED_RECV_B) s->lowered = 1;
            sched_push(s, r, a);
        }
        free(dup);
    }
    return s;
}

/* Asserts that validation fails with every substring in subs (NULL-terminated). */
static void expect_invalid(sched *s, const char *const *subs) {
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(sched_validate(s, &e), PL_EINPUT);
    for (int i = 0; subs[i]; i++) {
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, subs[i]));
        if (!strstr(e.msg, subs[i])) fprintf(stderr, "\nwanted '%s' in '%s'\n", subs[i], e.msg);
    }
    sched_free(s);
}

static void test_validate_errors(void) {
    const char *missing_f[] = {"0F0 0B0", "1B0 1F1 1B1"};
    expect_invalid(build(2, 2, 2, missing_f), (const char *[]){"rank 1, action 1 (1B0)", "before its forward", NULL});
    const char *missing_f2[] = {"0F0 0F1 0B0 0B1", "1F0 1B0"};
    expect_invalid(build(2, 2, 2, missing_f2), (const char *[]){"stage 1 microbatch 1", "missing its forward", NULL});
    const char *dup_b[] = {"0F0 0B0 0B0", "1F0 1B0"};
    expect_invalid(build(2, 2, 1, dup_b), (const char *[]){"rank 0, action 3 (0B0)", "duplicate backward", NULL});
    const char *w_before_i[] = {"0F0 0W0 0I0", "1F0 1B0"};
    expect_invalid(build(2, 2, 1, w_before_i), (const char *[]){"action 2 (0W0)", "W before I", NULL});
    const char *no_w[] = {"0F0 0I0", "1F0 1B0"};
    expect_invalid(build(2, 2, 1, no_w), (const char *[]){"missing its weight backward", NULL});
    const char *two_ranks[] = {"0F0 0B0 1F0", "1B0"};
    expect_invalid(build(2, 2, 1, two_ranks), (const char *[]){"rank 0, action 3 (1F0)", "two ranks", NULL});
    const char *range[] = {"0F0 0B0 0F5", "1F0 1B0"};
    expect_invalid(build(2, 2, 1, range), (const char *[]){"microbatch 5 does not exist", NULL});
    const char *empty[] = {"", ""};
    expect_invalid(build(2, 2, 1, empty), (const char *[]){"no actions", NULL});
}

static void test_deadlock_named(void) {
    /* rank 0 needs 0B0 (from 1B0) before it sends F1; rank 1 needs F1 before its B0 */
    const char *rows[] = {"0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"};
    sched *s = build(2, 2, 2, rows);
    pl_err e;
    sched_dryrun_result r;
    CU_ASSERT_EQUAL(sched_dryrun(s, NULL, &r, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "deadlock"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0 at action 2 (0B0)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 1 at action 1 (1F1)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cycle"));
    expect_invalid(s, (const char *[]){"deadlock", NULL});
    /* a lowered schedule whose receive never comes */
    const char *lowered[] = {"0F0 0RECV_B0 0SEND_F0 0B0 0STEP", "1RECV_F0 1F0 1B0 1SEND_B0 1STEP"};
    s = build(2, 2, 1, lowered);
    expect_invalid(s, (const char *[]){"deadlock", "0RECV_B0", NULL});
}

static void test_dryrun_hand_case(void) {
    /* gpipe p=2 m=2 by hand: F0 F1 at 0,1 on rank 0; rank 1 F0@1 F1@2 B0@3 B1@4;
     * rank 0 B0@4 B1@5 -> 6 steps, busy 4 each, bubble 1 - 8/12 */
    const char *rows[] = {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"};
    sched *s = build(2, 2, 2, rows);
    pl_err e;
    sched_dryrun_result r;
    CU_ASSERT_EQUAL_FATAL(sched_dryrun(s, NULL, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.steps, 6);
    CU_ASSERT_EQUAL(r.busy[0], 4);
    CU_ASSERT_DOUBLE_EQUAL(r.bubble_fraction, 1.0 - 8.0 / 12.0, 1e-12);
    CU_ASSERT_EQUAL(r.slot[0][2].start, 4);
    CU_ASSERT_EQUAL(r.slot[1][2].start, 3);
    CU_ASSERT_EQUAL(r.max_inflight[0], 2);
    sched_dryrun_free(&r, 2);
    /* with B twice as long: (m + p - 1)(tF + tB) = 3 * 3 = 9 */
    sched_unit_costs c = {1, 2, 1, 1};
    CU_ASSERT_EQUAL_FATAL(sched_dryrun(s, &c, &r, &e), PL_OK);
    CU_ASSERT_EQUAL(r.steps, 9);
    sched_dryrun_free(&r, 2);
    sched_free(s);
}

/* Counts actions of kind k over all ranks. */
static size_t count_kind(const sched *s, int k) {
    size_t n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) n += s->rank[r].acts[i].kind == k;
    return n;
}

/* Returns the position of the first action of kind k, stage, mb on rank r (or -1). */
static long pos_of(const sched *s, int r, int k, int stage, int mb) {
    for (size_t i = 0; i < s->rank[r].n; i++) {
        const sched_action *a = &s->rank[r].acts[i];
        if (a->kind == k && a->stage == stage && a->mb == mb) return (long)i;
    }
    return -1;
}

static void test_lower_1f1b(void) {
    pl_err e;
    sched_gen_opts o = {4, 8, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate("1f1b", &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sched *l = sched_lower(s, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_TRUE(l->lowered);
    CU_ASSERT_EQUAL(sched_validate(l, &e), PL_OK);
    /* one SEND and one RECV per boundary and microbatch, each direction */
    CU_ASSERT_EQUAL(count_kind(l, SCHED_SEND_F), 3 * 8);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_RECV_F), 3 * 8);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_SEND_B), 3 * 8);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_RECV_B), 3 * 8);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_REDUCE_GRAD), 4);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_STEP), 4);
    /* each receive precedes the compute that uses it; each send follows its compute */
    for (int r = 1; r < 4; r++)
        for (int mb = 0; mb < 8; mb++) {
            CU_ASSERT_TRUE(pos_of(l, r, SCHED_RECV_F, r, mb) >= 0);
            CU_ASSERT_TRUE(pos_of(l, r, SCHED_RECV_F, r, mb) < pos_of(l, r, SCHED_F, r, mb));
            CU_ASSERT_TRUE(pos_of(l, r - 1, SCHED_SEND_F, r - 1, mb) == pos_of(l, r - 1, SCHED_F, r - 1, mb) + 1);
        }
    /* REDUCE_GRAD after the last backward, STEP last */
    for (int r = 0; r < 4; r++) {
        const sched_rank *rk = &l->rank[r];
        CU_ASSERT_EQUAL(rk->acts[rk->n - 1].kind, SCHED_STEP);
        CU_ASSERT_TRUE(pos_of(l, r, SCHED_REDUCE_GRAD, r, -1) > pos_of(l, r, SCHED_B, r, 7));
    }
    /* the lowered schedule takes the same unit time, under any costs stays deadlock-free */
    sched_dryrun_result a, b;
    CU_ASSERT_EQUAL_FATAL(sched_dryrun(s, NULL, &a, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(sched_dryrun(l, NULL, &b, &e), PL_OK);
    CU_ASSERT_EQUAL(a.steps, b.steps);
    CU_ASSERT_EQUAL(b.steps, 2 * (8 + 4 - 1));
    sched_dryrun_free(&a, 4);
    sched_dryrun_free(&b, 4);
    sched_unit_costs c = {3, 1, 1, 1};
    CU_ASSERT_EQUAL(sched_dryrun(l, &c, &b, &e), PL_OK);
    sched_dryrun_free(&b, 4);
    /* lowering a lowered schedule is a copy */
    sched *l2 = sched_lower(l, &e);
    CU_ASSERT_TRUE(sched_equal(l, l2));
    sched_free(l2);
    sched_free(l);
    sched_free(s);
}

static void test_lower_local_handoff(void) {
    /* V placement: stages 1 and 2 sit on rank 1, so no comm actions between them */
    pl_err e;
    sched *s = sched_new(2, 4, 1, SCHED_PLACE_V, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const char *r0 = "0F0 3F0 3B0 0B0", *r1 = "1F0 2F0 2B0 1B0";
    const char *rows[2] = {r0, r1};
    for (int r = 0; r < 2; r++) {
        char *dup = strdup(rows[r]), *save = NULL;
        for (char *t = strtok_r(dup, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            sched_action a;
            size_t col;
            sched_action_parse(t, strlen(t), SCHED_LETTERS_CURRENT, &a, &col, &e);
            sched_push(s, r, a);
        }
        free(dup);
    }
    sched *l = sched_lower(s, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_EQUAL(pos_of(l, 1, SCHED_SEND_F, 1, 0), -1);
    CU_ASSERT_EQUAL(pos_of(l, 1, SCHED_RECV_F, 2, 0), -1);
    CU_ASSERT_TRUE(pos_of(l, 0, SCHED_SEND_F, 0, 0) >= 0);
    CU_ASSERT_TRUE(pos_of(l, 0, SCHED_RECV_F, 3, 0) >= 0);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_SEND_F), 2);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_SEND_B), 2);
    CU_ASSERT_EQUAL(sched_validate(l, &e), PL_OK);
    sched_free(l);
    sched_free(s);
}

static void test_lower_policies(void) {
    pl_err e;
    /* stash: an update per microbatch and stage; 2bw: one per stage per iteration */
    sched_gen_opts o = {3, 4, 0, 2, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate("pipedream", &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->weights, SCHED_WEIGHTS_STASH);
    sched *l = sched_lower(s, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_STEP), 3 * 4 * 2);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_REDUCE_GRAD), 3 * 4 * 2);
    sched_free(l);
    sched_free(s);
    s = sched_generate("2bw", &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    l = sched_lower(s, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_STEP), 3 * 2);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_REDUCE_GRAD), 3 * 2);
    sched_free(l);
    sched_free(s);
    /* flush over two iterations: STEPs close each iteration, before the next forward */
    s = sched_generate("gpipe", &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    l = sched_lower(s, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_EQUAL(count_kind(l, SCHED_STEP), 3 * 2);
    for (int r = 0; r < 3; r++) {
        long step = -1;
        for (size_t i = 0; i < l->rank[r].n; i++)
            if (l->rank[r].acts[i].kind == SCHED_STEP) { step = (long)i; break; }
        CU_ASSERT_TRUE(step > pos_of(l, r, SCHED_B, r, 3));
        CU_ASSERT_TRUE(step < pos_of(l, r, SCHED_F, r, 4));
    }
    sched_free(l);
    sched_free(s);
}

/* Returns 1 when action a completes a weight gradient (B, W, an overlap's B half); *stage and
 * *mb receive which. */
static int closes_backward(const sched_action *a, int *stage, int *mb) {
    if (a->kind == SCHED_B || a->kind == SCHED_W) { *stage = a->stage; *mb = a->mb; return 1; }
    if (a->kind == SCHED_OVERLAP && a->kind2 == SCHED_B) { *stage = a->stage2; *mb = a->mb2; return 1; }
    return 0;
}

/* Returns a copy of compute-only s with the REDUCE_GRADs that recent PyTorch puts in its
 * compute-only orders: after the backward that completes a weight version of the stage (the
 * iteration's last of the stage; under stash every backward, naming its microbatch). With
 * early, each goes first on its rank's list instead (misplaced: lowering places its own). */
static sched *with_reduces(const sched *s, int early) {
    sched *c = sched_clone(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    int it = sched_iterations(s), stash = s->weights == SCHED_WEIGHTS_STASH;
    int *seen = calloc((size_t)s->stages * (size_t)it, sizeof *seen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seen);
    for (int r = 0; r < s->ranks; r++) {
        c->rank[r].n = 0;
        for (size_t i = 0; i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            int st, mb;
            if (!early || i > 0) CU_ASSERT_EQUAL(sched_push(c, r, *a), PL_OK);
            if (!closes_backward(a, &st, &mb)) continue;
            int k = mb / s->microbatches < it ? mb / s->microbatches : it - 1;
            sched_action rg = sched_act(SCHED_REDUCE_GRAD, st, stash ? mb : -1);
            if (!stash && ++seen[(size_t)st * it + k] < s->microbatches) continue;
            CU_ASSERT_EQUAL(sched_push(c, r, rg), PL_OK);
            if (early) { /* move it to the front */
                sched_rank *rk = &c->rank[r];
                memmove(rk->acts + 1, rk->acts, (rk->n - 1) * sizeof *rk->acts);
                rk->acts[0] = rg;
            }
        }
        if (early && s->rank[r].n) { /* the action skipped above, after the REDUCE_GRADs */
            size_t n0 = c->rank[r].n;
            CU_ASSERT_EQUAL(sched_push(c, r, s->rank[r].acts[0]), PL_OK);
            sched_rank *rk = &c->rank[r];
            size_t reds = 0;
            while (reds < n0 && rk->acts[reds].kind == SCHED_REDUCE_GRAD) reds++;
            memmove(rk->acts + reds + 1, rk->acts + reds, (n0 - reds) * sizeof *rk->acts);
            rk->acts[reds] = s->rank[r].acts[0];
        }
    }
    free(seen);
    return c;
}

/* Checks that lowered l has exactly one REDUCE_GRAD per stage and weight version (per
 * iteration; per microbatch under stash), each after the stage's backwards of its version and
 * before the STEP that applies it, and that it validates. */
static void check_one_reduce_per_version(const sched *l, const char *what) {
    pl_err e;
    pl_err_clear(&e);
    int rc = sched_validate(l, &e);
    if (rc) fprintf(stderr, "\n  %s: %s\n", what, e.msg);
    CU_ASSERT_EQUAL(rc, PL_OK);
    int stash = l->weights == SCHED_WEIGHTS_STASH;
    int64_t versions = stash ? sched_total_microbatches(l) : sched_iterations(l);
    for (int q = 0; q < l->stages; q++) {
        const sched_rank *rk = &l->rank[l->stage_rank[q]];
        int64_t reduces = 0, bwd = 0, steps = 0;
        int ok = 1, last_mb = -1;
        for (size_t i = 0; i < rk->n; i++) {
            const sched_action *a = &rk->acts[i];
            int st, mb;
            if (closes_backward(a, &st, &mb) && st == q) {
                bwd++;
                last_mb = mb;
            }
            if (a->stage != q) continue;
            if (a->kind == SCHED_REDUCE_GRAD) {
                reduces++;
                /* it closes version reduces - 1: all of that version's backwards are done */
                if (bwd != (stash ? reduces : reduces * l->microbatches)) ok = 0;
                if (stash && a->mb != last_mb) ok = 0;
            }
            if (a->kind == SCHED_STEP && ++steps > reduces) ok = 0; /* a STEP before its reduce */
        }
        if (reduces != versions || !ok)
            fprintf(stderr, "\n  %s: stage %d has %lld REDUCE_GRADs (want %lld)%s\n", what, q, (long long)reduces,
                    (long long)versions, ok ? "" : ", misplaced");
        CU_ASSERT_EQUAL(reduces, versions);
        CU_ASSERT_TRUE(ok);
    }
}

/* A compute-only schedule that already carries REDUCE_GRADs (recent PyTorch's compute_only
 * orders put one after each stage's last backward) lowers to exactly one per stage and weight
 * version, the same schedule as without them; misplaced ones too. */
static void test_lower_input_reduces(void) {
    pl_err e;
    pl_err_clear(&e);
    const char *plain[] = {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"};
    const char *torch[] = {"0F0 0F1 0B0 0B1 0REDUCE_GRAD", "1F0 1B0 1F1 1B1 1REDUCE_GRAD"};
    const char *early[] = {"0REDUCE_GRAD 0F0 0F1 0B0 0B1", "1F0 1REDUCE_GRAD 1B0 1F1 1B1"};
    sched *s = build(2, 2, 2, plain), *t = build(2, 2, 2, torch), *x = build(2, 2, 2, early);
    CU_ASSERT_EQUAL(sched_validate(t, &e), PL_OK);
    CU_ASSERT_EQUAL(sched_validate(x, &e), PL_OK);
    sched *ls = sched_lower(s, &e), *lt = sched_lower(t, &e), *lx = sched_lower(x, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lx);
    CU_ASSERT_EQUAL(count_kind(lt, SCHED_REDUCE_GRAD), 2);
    CU_ASSERT_EQUAL(count_kind(lt, SCHED_STEP), 2);
    for (int r = 0; r < 2; r++) {
        /* REDUCE_GRAD once, after the last backward, STEP after it and last */
        const sched_rank *rk = &lt->rank[r];
        CU_ASSERT_EQUAL(rk->acts[rk->n - 2].kind, SCHED_REDUCE_GRAD);
        CU_ASSERT_EQUAL(rk->acts[rk->n - 1].kind, SCHED_STEP);
        CU_ASSERT_TRUE(pos_of(lt, r, SCHED_REDUCE_GRAD, r, -1) > pos_of(lt, r, SCHED_B, r, 1));
    }
    CU_ASSERT_TRUE(sched_equal(ls, lt));
    CU_ASSERT_TRUE(sched_equal(ls, lx));
    check_one_reduce_per_version(lt, "hand-made");
    check_one_reduce_per_version(lx, "hand-made, early");
    sched_free(lx);
    sched_free(lt);
    sched_free(ls);
    sched_free(x);
    sched_free(t);
    sched_free(s);

    /* every weight policy, over several iterations, split backwards, overlapped pairs, one rank */
    static const struct { const char *kind; int p, m, v, it; } cases[] = {
        {"gpipe", 3, 4, 0, 2}, {"1f1b", 4, 8, 0, 1}, {"1f1b", 1, 3, 0, 2}, {"pipedream", 3, 4, 0, 2},
        {"2bw", 3, 4, 0, 2},   {"interleaved", 2, 4, 2, 1}, {"zb-h1", 3, 6, 0, 1}, {"zbv", 2, 4, 0, 2},
        {"dualpipev", 4, 10, 0, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sched_gen_opts o = {cases[k].p, cases[k].m, cases[k].v, cases[k].it, SCHED_RECOMPUTE_NONE};
        char what[96];
        snprintf(what, sizeof what, "%s p=%d m=%d it=%d", cases[k].kind, cases[k].p, cases[k].m, cases[k].it);
        s = sched_generate(cases[k].kind, &o, &e);
        if (!s) fprintf(stderr, "\n  %s: %s\n", what, e.msg);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        ls = sched_lower(s, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ls);
        for (int ear = 0; ear < 2; ear++) {
            t = with_reduces(s, ear);
            int64_t versions = s->weights == SCHED_WEIGHTS_STASH ? sched_total_microbatches(s) : sched_iterations(s);
            CU_ASSERT_EQUAL(count_kind(t, SCHED_REDUCE_GRAD), (size_t)(versions * s->stages));
            lt = sched_lower(t, &e);
            if (!lt) fprintf(stderr, "\n  %s: lower: %s\n", what, e.msg);
            CU_ASSERT_PTR_NOT_NULL(lt);
            if (lt) {
                if (!sched_equal(ls, lt)) fprintf(stderr, "\n  %s%s: lowered form differs\n", what, ear ? " early" : "");
                CU_ASSERT_TRUE(sched_equal(ls, lt));
                check_one_reduce_per_version(lt, what);
                /* and stays deadlock-free under uneven costs */
                sched_dryrun_result r;
                sched_unit_costs c = {1, 3, 2, 1};
                CU_ASSERT_EQUAL(sched_dryrun(lt, &c, &r, &e), PL_OK);
                sched_dryrun_free(&r, lt->ranks);
            }
            sched_free(lt);
            sched_free(t);
        }
        check_one_reduce_per_version(ls, what);
        sched_free(ls);
        sched_free(s);
    }
}

/* Returns the most weight versions stage q of lowered s holds at once (sched_versions over its
 * rank's actions in order: F, the end of B or W, STEP), or -1 when the count cannot start. */
static int most_versions(const sched *s, int q) {
    sched_versions v;
    if (sched_versions_init(&v, sched_total_microbatches(s)) != PL_OK) return -1;
    int most = v.held;
    const sched_rank *rk = &s->rank[s->stage_rank[q]];
    for (size_t i = 0; i < rk->n; i++) {
        const sched_action *a = &rk->acts[i];
        if (a->stage != q) continue;
        if (a->kind == SCHED_F) sched_versions_forward(&v, a->mb);
        if (a->kind == SCHED_B || a->kind == SCHED_W) sched_versions_backward(&v, a->mb);
        if (a->kind == SCHED_STEP) sched_versions_step(&v);
        if (v.held > most) most = v.held;
    }
    CU_ASSERT_EQUAL(v.held, 1); /* every microbatch done: the newest alone */
    sched_versions_free(&v);
    return most;
}

/* Weight versions in closed form: one throughout a flush schedule; PipeDream's p - q on stage q
 * once the pipeline is full (a version per microbatch in flight); 2BW's 2, and 1 on the last
 * stage, whose backward follows its forward; with m = 1 < p, PipeDream's first stage runs its p
 * early forwards on the initial version, so it holds 2 at most (the initial one and the one its
 * first STEP writes), not p. */
static void test_versions_closed_forms(void) {
    pl_err e;
    for (int p = 2; p <= 6; p++) {
        static const char *kinds[] = {"gpipe", "1f1b", "pipedream", "2bw"};
        for (int k = 0; k < 4; k++) {
            sched_gen_opts o = {p, 2 * p, 0, 4, SCHED_RECOMPUTE_NONE};
            sched *g = sched_generate(kinds[k], &o, &e), *s = g ? sched_lower(g, &e) : NULL;
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            for (int q = 0; q < p; q++) {
                int want = k < 2 ? 1 : k == 2 ? p - q : (q < p - 1 ? 2 : 1);
                int got = most_versions(s, q);
                if (got != want) fprintf(stderr, "\n  %s p=%d stage %d: %d versions, want %d\n", kinds[k], p, q, got, want);
                CU_ASSERT_EQUAL(got, want);
            }
            sched_free(s);
            sched_free(g);
        }
        sched_gen_opts o = {p, 1, 0, p, SCHED_RECOMPUTE_NONE};
        sched *g = sched_generate("pipedream", &o, &e), *s = g ? sched_lower(g, &e) : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_EQUAL(most_versions(s, 0), 2);
        sched_free(s);
        sched_free(g);
    }
    /* a STEP after no backward writes nothing; one while the newest is in use writes a version */
    sched_versions v;
    CU_ASSERT_EQUAL_FATAL(sched_versions_init(&v, 3), PL_OK);
    sched_versions_forward(&v, 0);
    CU_ASSERT_EQUAL(sched_versions_step(&v), 0);
    sched_versions_forward(&v, 1);
    CU_ASSERT_EQUAL(sched_versions_backward(&v, 0), 0);
    CU_ASSERT_EQUAL(sched_versions_step(&v), 1); /* microbatch 1 uses the newest */
    CU_ASSERT_EQUAL(v.held, 2);
    sched_versions_forward(&v, 2);
    CU_ASSERT_EQUAL(sched_versions_backward(&v, 1), -1); /* the last user of the old version */
    CU_ASSERT_EQUAL(sched_versions_backward(&v, 2), 0);
    CU_ASSERT_EQUAL(sched_versions_step(&v), 0); /* nothing in flight: in place */
    CU_ASSERT_EQUAL(v.held, 1);
    sched_versions_free(&v);
}

/* A compute-only schedule holds no STEP: validation refuses it, so lowering does too (its own
 * STEPs would make it a second). */
static void test_lower_refuses_input_step(void) {
    const char *rows[] = {"0F0 0F1 0B0 0B1 0REDUCE_GRAD 0STEP", "1F0 1B0 1F1 1B1 1STEP"};
    sched *s = build(2, 2, 2, rows);
    pl_err e;
    pl_err_clear(&e);
    sched *l = sched_lower(s, &e);
    CU_ASSERT_PTR_NULL(l);
    CU_ASSERT_EQUAL(e.code, PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0, action 6 (0STEP)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "compute-only"));
    sched_free(l);
    expect_invalid(s, (const char *[]){"STEP in a schedule marked compute-only", NULL});
}

static void test_render(void) {
    const char *rows[] = {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"};
    sched *s = build(2, 2, 2, rows);
    pl_err e;
    sched_dryrun_result r;
    CU_ASSERT_EQUAL_FATAL(sched_dryrun(s, NULL, &r, &e), PL_OK);
    pl_buf b;
    pl_buf_init(&b);
    sched_render_timeline(s, &r, 0, &b);
    const char *want =
        "  step  0" "              " "5  \n"
        "rank 0 |F0|F1|..|..|B0|B1|\n"
        "rank 1 |..|F0|F1|B0|B1|..|\n";
    CU_ASSERT_STRING_EQUAL(b.data, want);
    if (strcmp(b.data, want)) fprintf(stderr, "\n%s", b.data);
    pl_buf_free(&b);
    sched_dryrun_free(&r, 2);
    sched_free(s);
}

void test_lower_register(void) {
    static const pl_test_case cases[] = {
        {"validation errors name rank, action and reason", test_validate_errors},
        {"deadlock names the cycle", test_deadlock_named},
        {"dry run by hand", test_dryrun_hand_case},
        {"lowering 1f1b", test_lower_1f1b},
        {"lowering: local hand-off", test_lower_local_handoff},
        {"lowering: update policies", test_lower_policies},
        {"lowering: an input's REDUCE_GRADs are not doubled", test_lower_input_reduces},
        {"lowering: a compute-only STEP is refused", test_lower_refuses_input_step},
        {"weight versions in closed form", test_versions_closed_forms},
        {"timeline rendering", test_render},
        {NULL, NULL},
    };
    pl_test_suite("schedules/lower", cases);
}
