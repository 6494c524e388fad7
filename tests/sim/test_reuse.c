/* test_reuse.c: the reuse-distance term (sim/sim_reuse.c): which backward of a small schedule runs
 * at distance 0 (closed forms read off the generators' lists), the time it then gets, and a run
 * over the cost-model adapter whose busy times follow (ratio 1 leaves every result unchanged). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_test.h"
#include "pl_sched.h"
#include "sim.h"
#include "sim_test.h"

void sim_reuse_tests_register(void);

/* Returns the lowered schedule of a generator on 2 ranks, m = 4, v stages per rank (0: the
 * kind's default) (NULL reported through CUnit). */
static sched *lowered_v(const char *kind, int v, sched_recompute rc) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {2, 4, v, 0, rc};
    sched *s = sched_generate(kind, &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    s->recompute = rc;
    sched *l = sched_lower(s, &e);
    sched_free(s);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

/* The same with the kind's default stages per rank. */
static sched *lowered4(const char *kind, sched_recompute rc) {
    return lowered_v(kind, 0, rc);
}

/* Checks that every microbatch of stage 0 has flags f0 and every one of stage 1 flags f1. */
static void expect_flags(const char *kind, sched_recompute rc, int f0, int f1) {
    sched *s = lowered4(kind, rc);
    if (!s) return;
    sim_reuse r;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
    for (int mb = 0; mb < 4; mb++) {
        int hot = SIM_HOT_I | SIM_HOT_W, g0 = sim_reuse_flags(&r, 0, mb) & hot, g1 = sim_reuse_flags(&r, 1, mb) & hot;
        if (g0 != f0 || g1 != f1) fprintf(stderr, "%s mb %d: flags %d %d, expected %d %d\n", kind, mb, g0, g1, f0, f1);
        CU_ASSERT_EQUAL(g0, f0);
        CU_ASSERT_EQUAL(g1, f1);
    }
    sim_reuse_free(&r);
    sched_free(s);
}

/* 1F1B: rank 0 runs F0 F1 B0 F2 B1 F3 B2 B3 (every B after another microbatch's work), rank 1
 * F0 B0 F1 B1 ... (every B right after its F). GPipe: every B after all forwards, none at
 * distance 0; with full recomputation all are. ZB-H1: rank 0 runs F0 F1 I0 W0 F2 I1 W1 F3 I2
 * W2 I3 W3 (no I right after its F, so no W hot either), rank 1 F0 I0 F1 I1 W0 F2 I2 W1 F3 I3 W2
 * W3 (each I right after its F, no W right after its I); with full recomputation every I is
 * hot, and so is each W of rank 0 (right after its I). */
static void test_flags(void) {
    expect_flags("1f1b", SCHED_RECOMPUTE_NONE, 0, SIM_HOT_I);
    expect_flags("gpipe", SCHED_RECOMPUTE_NONE, 0, 0);
    expect_flags("gpipe", SCHED_RECOMPUTE_FULL, SIM_HOT_I, SIM_HOT_I);
    expect_flags("zb-h1", SCHED_RECOMPUTE_NONE, 0, SIM_HOT_I);
    expect_flags("zb-h1", SCHED_RECOMPUTE_FULL, SIM_HOT_I | SIM_HOT_W, SIM_HOT_I);
}

/* Returns a stage whose F, I, W, B take 1, 2, 3 and 5 s. */
static cost_stage stage_1235(void) {
    cost_stage st;
    memset(&st, 0, sizeof st);
    st.f_s = 1;
    st.i_s = 2;
    st.w_s = 3;
    st.b_s = 5;
    return st;
}

/* The time of a distance-0 I, W or B is the stage's scaled by the ratios; the rest unchanged. */
static void test_time(void) {
    sched *s = lowered4("zb-h1", SCHED_RECOMPUTE_FULL); /* stage 0: I and W hot; stage 1: I hot */
    sched *g = lowered4("gpipe", SCHED_RECOMPUTE_NONE);  /* nothing hot */
    sim_reuse r, c;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&c, g, &e), PL_OK);
    c.i_ratio[0] = c.w_ratio[0] = 0.5;
    r.i_ratio[0] = r.i_ratio[1] = 0.5;
    r.w_ratio[0] = r.w_ratio[1] = 0.8;
    cost_stage st = stage_1235();
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_I, 1), 1.0, 1e-15);  /* stage 0: I hot */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_W, 1), 2.4, 1e-15);  /* W hot */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_I, 2), 1.0, 1e-15);  /* stage 1: I hot */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_W, 2), 3.0, 1e-15);  /* W cold */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_B, 2), 1.0 + 2.4, 1e-15); /* both parts */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&c, &st, 0, SCHED_B, 2), 5.0, 1e-15);  /* cold: unchanged */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&c, &st, 0, SCHED_I, 2), 2.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_F, 2), 1.0, 1e-15);
    CU_ASSERT_EQUAL(sim_reuse_flags(&r, 1, 6), sim_reuse_flags(&r, 1, 2)); /* modulo the schedule's */
    sim_reuse_free(&r);
    sim_reuse_free(&c);
    sched_free(s);
    sched_free(g);
}

/* Runs 1F1B (2 ranks, m = 4, one layer per stage: F 1 s, B 2 s) over the adapter with the term's
 * ratios (NULL: no term) and returns the result in out. */
static void run_1f1b(double ratio, int with, sim_result *out) {
    sched *s = lowered4("1f1b", SCHED_RECOMPUTE_NONE);
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open("uniform:layers=2,fwd_s=1,bwd_in_s=1,bwd_w_s=1", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    sim_model sm;
    sim_reuse r;
    CU_ASSERT_EQUAL_FATAL(sim_model_init(&sm, s, m, NULL, NULL, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
    for (int q = 0; q < 2; q++) r.i_ratio[q] = r.w_ratio[q] = ratio;
    if (with) sm.reuse = &r;
    CU_ASSERT_EQUAL(sim_test_run_model(s, &sm, out, &e), PL_OK);
    sim_reuse_free(&r);
    sim_model_free(&sm);
    cost_model_free(m);
    sched_free(s);
}

/* With ratio 1 the term changes nothing (bit for bit); with ratio 0.5 rank 1's four B (each right
 * after its F) take 1 s instead of 2: busy 4 x 1 + 4 x 1 = 8 s, rank 0's stays 4 + 4 x 2 = 12 s. */
static void test_run(void) {
    sim_result a, b, h;
    run_1f1b(1.0, 0, &a);
    run_1f1b(1.0, 1, &b);
    run_1f1b(0.5, 1, &h);
    CU_ASSERT(a.iteration_time_s == b.iteration_time_s);
    CU_ASSERT(a.bubble_fraction == b.bubble_fraction);
    CU_ASSERT_DOUBLE_EQUAL(a.iteration_time_s, 15.0, 1e-12); /* (m + p - 1)(F + B) */
    CU_ASSERT_DOUBLE_EQUAL(h.rank[0].busy_s, 12.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(h.rank[1].busy_s, 8.0, 1e-12);
    sim_result_free(&a);
    sim_result_free(&b);
    sim_result_free(&h);
}

/* sim_model_scale_stage: 1F1B on 2 ranks, m = 4 (F 1 s, B 2 s a stage). Scaling stage 1 by 1.5
 * gives its rank busy 4 x 1.5 + 4 x 3 = 18 s and leaves rank 0's 12 s; both stages by 2 double
 * the iteration time (30 s) and the STEP. */
static void test_scale_stage(void) {
    sched *s = lowered4("1f1b", SCHED_RECOMPUTE_NONE);
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open("uniform:layers=2,fwd_s=1,bwd_in_s=1,bwd_w_s=1", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const double f[2][2] = {{1, 1.5}, {2, 2}};
    for (int k = 0; k < 2; k++) {
        sim_model sm;
        CU_ASSERT_EQUAL_FATAL(sim_model_init(&sm, s, m, NULL, NULL, NULL, &e), PL_OK);
        sm.step_s[0] = sm.step_s[1] = 0.25;
        for (int q = 0; q < 2; q++) sim_model_scale_stage(&sm, q, f[k][q]);
        CU_ASSERT_DOUBLE_EQUAL(sm.step_s[1], 0.25 * f[k][1], 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(sm.stage[1].b_recompute_s, 3 * f[k][1], 1e-12); /* B and the rerun F */
        sm.step_s[0] = sm.step_s[1] = 0;
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(sim_test_run_model(s, &sm, &r, &e), PL_OK);
        if (k == 0) {
            CU_ASSERT_DOUBLE_EQUAL(r.rank[0].busy_s, 12.0, 1e-12);
            CU_ASSERT_DOUBLE_EQUAL(r.rank[1].busy_s, 18.0, 1e-12);
        } else {
            CU_ASSERT_DOUBLE_EQUAL(r.iteration_time_s, 30.0, 1e-12); /* 2 (m + p - 1)(F + B) */
        }
        sim_result_free(&r);
        sim_model_free(&sm);
    }
    cost_model_free(m);
    sched_free(s);
}

/* The first F, I (B) and W (B) of each stage in its rank's list are marked, no other: on 2 ranks,
 * m = 4, every generator here starts each stage with microbatch 0, so microbatch 0 carries
 * all three marks of its kinds and microbatches 1 to 3 none. */
static void test_first_flags(void) {
    const char *kinds[] = {"gpipe", "1f1b", "zb-h1"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        sched *s = lowered4(kinds[k], SCHED_RECOMPUTE_NONE);
        if (!s) continue;
        sim_reuse r;
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
        int all = SIM_FIRST_F | SIM_FIRST_I | SIM_FIRST_W;
        for (int q = 0; q < s->stages; q++)
            for (int mb = 0; mb < 4; mb++) CU_ASSERT_EQUAL(sim_reuse_flags(&r, q, mb) & all, mb == 0 ? all : 0);
        CU_ASSERT_EQUAL(r.first_on, 0);
        sim_reuse_free(&r);
        sched_free(s);
    }
}

/* With the first-touch term, microbatch 0's F, I, W and B take the first ratios and the others
 * the rest ratios (F 1 s, I 2 s, W 3 s, B 5 s); a distance-0 B keeps its hot ratios, times
 * first / rest when it is the first of its stage. */
static void test_first_time(void) {
    sched *g = lowered4("gpipe", SCHED_RECOMPUTE_NONE);
    sched *o = lowered4("1f1b", SCHED_RECOMPUTE_NONE); /* stage 1: every B hot */
    sim_reuse r, h;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, g, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&h, o, &e), PL_OK);
    cost_stage st = stage_1235();
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 0), 1.0, 0); /* off: unchanged */
    sim_reuse *x[2] = {&r, &h};
    for (int j = 0; j < 2; j++) {
        x[j]->first_on = 1;
        for (int q = 0; q < 2; q++) {
            double f[3] = {1.5, 1.25, 2}, rs[3] = {0.75, 0.5, 0.25};
            memcpy(x[j]->first + 3 * q, f, sizeof f);
            memcpy(x[j]->rest + 3 * q, rs, sizeof rs);
        }
    }
    h.i_ratio[1] = h.w_ratio[1] = 0.1;
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 0), 1.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_F, 3), 0.75, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_B, 0), 2 * 1.25 + 3 * 2, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_B, 2), 2 * 0.5 + 3 * 0.25, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_I, 0), 2.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_W, 1), 0.75, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&h, &st, 1, SCHED_B, 1), 0.2 + 0.3, 1e-15); /* hot */
    /* the first hot B of its stage: first / rest on top of the hot ratios */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&h, &st, 1, SCHED_B, 0), 0.2 * (1.25 / 0.5) + 0.3 * (2 / 0.25), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&h, &st, 0, SCHED_B, 1), 2 * 0.5 + 3 * 0.25, 1e-15);
    h.hot_on = 0; /* only the first-touch term: the hot B is one like the others */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&h, &st, 1, SCHED_B, 1), 2 * 0.5 + 3 * 0.25, 1e-15);
    sim_reuse_free(&r);
    sim_reuse_free(&h);
    sched_free(g);
    sched_free(o);
}

/* GPipe over the adapter (2 ranks, m = 4, F 1 s, I 1 s, W 1 s per stage) with first ratios 2 and
 * rest ratios 0.5 on every kind: each rank's busy time is F 2 + 3 x 0.5 plus B 2 x 2 + 3 x 2 x
 * 0.5, 3.5 + 7 = 10.5 s instead of 4 + 8 = 12 s; with the term off, bit for bit the run without. */
static void test_first_run(void) {
    sched *s = lowered4("gpipe", SCHED_RECOMPUTE_NONE);
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_open("uniform:layers=2,fwd_s=1,bwd_in_s=1,bwd_w_s=1", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    sim_result res[3];
    for (int v = 0; v < 3; v++) { /* no term object; the term off; on */
        sim_model sm;
        sim_reuse r;
        CU_ASSERT_EQUAL_FATAL(sim_model_init(&sm, s, m, NULL, NULL, NULL, &e), PL_OK);
        CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
        r.hot_on = 0;
        r.first_on = v == 2;
        for (int i = 0; i < 6; i++) {
            r.first[i] = 2;
            r.rest[i] = 0.5;
        }
        if (v) sm.reuse = &r;
        CU_ASSERT_EQUAL(sim_test_run_model(s, &sm, &res[v], &e), PL_OK);
        sim_reuse_free(&r);
        sim_model_free(&sm);
    }
    CU_ASSERT(res[0].iteration_time_s == res[1].iteration_time_s);
    CU_ASSERT(res[0].rank[1].busy_s == res[1].rank[1].busy_s);
    CU_ASSERT_DOUBLE_EQUAL(res[0].rank[0].busy_s, 12.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(res[2].rank[0].busy_s, 10.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(res[2].rank[1].busy_s, 10.5, 1e-12);
    for (int v = 0; v < 3; v++) sim_result_free(&res[v]);
    cost_model_free(m);
    sched_free(s);
}

/* Again: looped-bfs on 2 ranks, v = 2, m = 4 runs on rank 0 0F0 0F1 0F2 0F3 2F0 .. 2F3 2B3 2B2
 * 2B1 2B0 0B3 0B2 0B1 0B0 (rank 1 the same with stages 1 and 3): every F but microbatch 0's
 * follows an F of its own stage, every B but microbatch 3's a B of its own (2B3 follows 2F3,
 * another kind, and 0B3 follows 2B0, another stage). A rank with one stage (1F1B) has none. */
static void test_again_flags(void) {
    sched *s = lowered_v("looped-bfs", 2, SCHED_RECOMPUTE_NONE);
    sched *o = lowered4("1f1b", SCHED_RECOMPUTE_NONE);
    if (!s || !o) return;
    sim_reuse r, n;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&n, o, &e), PL_OK);
    const int ag = SIM_AGAIN_F | SIM_AGAIN_I | SIM_AGAIN_W;
    for (int q = 0; q < 4; q++)
        for (int mb = 0; mb < 4; mb++) {
            int want = (mb > 0 ? SIM_AGAIN_F : 0) | (mb < 3 ? SIM_AGAIN_I | SIM_AGAIN_W : 0);
            if ((sim_reuse_flags(&r, q, mb) & ag) != want)
                fprintf(stderr, "looped-bfs stage %d mb %d: again flags %d, expected %d\n", q, mb, sim_reuse_flags(&r, q, mb) & ag, want);
            CU_ASSERT_EQUAL(sim_reuse_flags(&r, q, mb) & ag, want);
        }
    for (int q = 0; q < 2; q++)
        for (int mb = 0; mb < 4; mb++) CU_ASSERT_EQUAL(sim_reuse_flags(&n, q, mb) & ag, 0);
    CU_ASSERT_EQUAL(r.again_on, 0);
    sim_reuse_free(&r);
    sim_reuse_free(&n);
    sched_free(s);
    sched_free(o);
    /* zbv on 2 ranks, m = 4, rank 0: 0F0 0F1 0F2 3F0 ... 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 ... 0I2
     * 0W2 0I3 0W3. 0F1 and 0F2 follow an F of their stage (again); 0I0 follows 0F3, another kind,
     * its W an I, 0I3 a W and 0W3 an I (none again); 0F3 follows 3W1 (another stage); 3I2 and
     * 3W2 follow their own F and I at distance 0 (hot, and so not again either way). */
    sched *z = lowered_v("zbv", 0, SCHED_RECOMPUTE_NONE);
    if (!z) return;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, z, &e), PL_OK);
    CU_ASSERT_EQUAL(sim_reuse_flags(&r, 0, 0) & ag, 0);
    CU_ASSERT_EQUAL(sim_reuse_flags(&r, 0, 1) & ag, SIM_AGAIN_F);
    CU_ASSERT_EQUAL(sim_reuse_flags(&r, 0, 2) & ag, SIM_AGAIN_F);
    CU_ASSERT_EQUAL(sim_reuse_flags(&r, 0, 3) & ag, 0);
    CU_ASSERT_EQUAL(sim_reuse_flags(&r, 3, 2) & (SIM_HOT_I | SIM_HOT_W), SIM_HOT_I | SIM_HOT_W);
    sim_reuse_free(&r);
    sched_free(z);
}

/* With the again term (F 1 s, I 2 s, W 3 s, B 5 s; again ratios 0.5, 0.25, 0.75): a marked F or
 * B takes them, instead of the first-touch factor when that is on too; an unmarked one keeps
 * its time; a distance-0 B keeps its hot ratios (2B3 follows 2F3); off: unchanged. */
static void test_again_time(void) {
    sched *s = lowered_v("looped-bfs", 2, SCHED_RECOMPUTE_NONE);
    if (!s) return;
    sim_reuse r;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
    cost_stage st = stage_1235();
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 1), 1.0, 0); /* off */
    r.again_on = 1;
    for (int q = 0; q < 4; q++) {
        double a[3] = {0.5, 0.25, 0.75};
        memcpy(r.again + 3 * q, a, sizeof a);
        r.i_ratio[q] = 0.1;
        r.w_ratio[q] = 0.2;
    }
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 1), 0.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 0), 1.0, 1e-15);          /* first F of stage 0 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_B, 0), 2 * 0.25 + 3 * 0.75, 1e-15); /* 0B0 after 0B1 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_B, 3), 5.0, 1e-15);          /* 0B3 after 2B0 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 2, SCHED_B, 3), 2 * 0.1 + 3 * 0.2, 1e-15); /* hot */
    r.first_on = 1;
    for (int i = 0; i < 12; i++) r.first[i] = 4, r.rest[i] = 2;
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 2), 0.5, 1e-15);          /* again, not rest */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 0), 4.0, 1e-15);          /* first */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_B, 3), 2 * 4 + 3 * 4, 1e-15); /* the first B of stage 0 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_F, 0), 4.0, 1e-15);          /* first, not again */
    sim_reuse_free(&r);
    sched_free(s);
}

/* Returns the kind-before flags (SIM_WARM_I, SIM_BACK_F) of stage q's microbatch mb. */
static int before_flags(const sim_reuse *r, int q, int mb) {
    return sim_reuse_flags(r, q, mb) & (SIM_WARM_I | SIM_BACK_F);
}

/* The kind before, read off the generators' lists (2 ranks, m = 4). 1F1B rank 0: F0 F1 B0 F2 B1
 * F3 B2 B3: B0, B1, B2 follow an F of stage 0 (warm), B3 a B; F2 and F3 follow a B (back), F0
 * and F1 do not. Rank 1: F0 B0 F1 B1 ...: every B follows its own F (warm too), F1-F3 a B.
 * ZB-H1 rank 0: F0 F1 I0 W0 F2 I1 W1 F3 I2 W2 I3 W3: I0-I2 warm, F2 and F3 back (after a W);
 * rank 1: F0 I0 F1 I1 W0 F2 I2 W1 F3 I3 W2 W3: every I warm, F1 follows an I (not back), F2
 * and F3 a W. GPipe: each rank's first B follows its last F (warm), no F follows a backward. */
static void test_before_flags(void) {
    const int W = SIM_WARM_I, K = SIM_BACK_F;
    sched *o = lowered4("1f1b", SCHED_RECOMPUTE_NONE), *z = lowered4("zb-h1", SCHED_RECOMPUTE_NONE);
    sched *g = lowered4("gpipe", SCHED_RECOMPUTE_NONE);
    if (!o || !z || !g) return;
    sim_reuse r;
    pl_err e;
    const int want_1f1b[2][4] = {{W, W, W | K, K}, {W, W | K, W | K, W | K}};
    const int want_zb[2][4] = {{W, W, W | K, K}, {W, W, W | K, W | K}};
    const sched *const sc[2] = {o, z};
    const int (*const want[2])[4] = {want_1f1b, want_zb};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, sc[i], &e), PL_OK);
        CU_ASSERT_EQUAL(r.before_on, 0);
        for (int q = 0; q < 2; q++)
            for (int mb = 0; mb < 4; mb++) {
                if (before_flags(&r, q, mb) != want[i][q][mb])
                    fprintf(stderr, "%s stage %d mb %d: kind-before flags %d, expected %d\n", i ? "zb-h1" : "1f1b", q, mb,
                            before_flags(&r, q, mb), want[i][q][mb]);
                CU_ASSERT_EQUAL(before_flags(&r, q, mb), want[i][q][mb]);
            }
        sim_reuse_free(&r);
    }
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, g, &e), PL_OK);
    for (int q = 0; q < 2; q++) {
        int warm = 0, back = 0;
        for (int mb = 0; mb < 4; mb++) {
            warm += (before_flags(&r, q, mb) & W) != 0;
            back += (before_flags(&r, q, mb) & K) != 0;
        }
        CU_ASSERT_EQUAL(warm, 1);
        CU_ASSERT_EQUAL(back, 0);
    }
    sim_reuse_free(&r);
    sched_free(o);
    sched_free(z);
    sched_free(g);
}

/* The kind before's times (F 1 s, I 2 s, W 3 s, B 5 s; distance-0 ratios 0.5 and 0.8, back 1.25)
 * on 1F1B: off, nothing changes but the distance-0 B of rank 1; on, a warm B's I part takes the
 * distance-0 ratio and its W part keeps its time, a back F takes 1.25, the others keep theirs. */
static void test_before_time(void) {
    sched *s = lowered4("1f1b", SCHED_RECOMPUTE_NONE);
    if (!s) return;
    sim_reuse r;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(sim_reuse_init(&r, s, &e), PL_OK);
    for (int q = 0; q < 2; q++) {
        r.i_ratio[q] = 0.5;
        r.w_ratio[q] = 0.8;
        r.back[q] = 1.25;
    }
    cost_stage st = stage_1235();
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_B, 0), 5.0, 0);  /* off */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 2), 1.0, 0);
    r.before_on = 1;
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_B, 0), 2 * 0.5 + 3, 1e-15); /* 0B0 after 0F1 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_B, 3), 5.0, 1e-15);         /* 0B3 after 0B2 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 2), 1.25, 1e-15);        /* 0F2 after 0B0 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 0, SCHED_F, 1), 1.0, 1e-15);         /* 0F1 after 0F0 */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_B, 1), 2 * 0.5 + 3 * 0.8, 1e-15); /* distance 0 */
    r.hot_on = 0; /* the distance-0 term off: rank 1's B after its own F is warm alone */
    CU_ASSERT_DOUBLE_EQUAL(sim_reuse_time(&r, &st, 1, SCHED_B, 1), 2 * 0.5 + 3, 1e-15);
    sim_reuse_free(&r);
    sched_free(s);
}

void sim_reuse_tests_register(void) {
    static const pl_test_case cases[] = {
        {"reuse distance: which backwards run right after their forward", test_flags},
        {"reuse distance: the time of a distance-0 I, W, B", test_time},
        {"reuse distance: a run's busy times; ratio 1 changes nothing", test_run},
        {"a stage scaled by a factor (the pass-length term)", test_scale_stage},
        {"first touch: the first F, I, W of each stage", test_first_flags},
        {"first touch: the times of the first and the later ones", test_first_time},
        {"first touch: a run's busy times; off changes nothing", test_first_run},
        {"again: the actions after one on the same stage", test_again_flags},
        {"again: their times", test_again_time},
        {"the kind before: an I after an F of its stage, an F after its backwards", test_before_flags},
        {"the kind before: their times", test_before_time},
        {NULL, NULL},
    };
    pl_test_suite("sim reuse distance", cases);
}
