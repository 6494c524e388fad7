/* test_distance.c: store_distance_note on a hand-made timeline whose backwards' reuse distances
 * and errors are known in closed form; the buckets; its refusals; and `pipelab compare
 * --distance` on a real traced 1F1B run, whose list fixes every backward's distance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "store.h"
#include "util.h"

/* Appends action (kind, stage 0, microbatch mb) of duration d to ops[*n], after its rank's
 * previous one. */
static void put(store_op *ops, size_t *n, int rank, const char *kind, int mb, double d) {
    double s = *n > 0 && ops[*n - 1].rank == rank ? ops[*n - 1].end_s : 0;
    ops[*n] = (store_op){rank, (int)*n, kind, kind, 0, mb, s, s + d};
    (*n)++;
}

/* Rank 0's list: F0 B0 F1 SEND_F F2 I1 W1 STEP I2 B9; rank 1's: F0 B0. Distances: rank 0's B0
 * 0, I1 1 (F2 between; a SEND is not compute), I2 2 (I1 and W1; a STEP is not compute), B9 none
 * (no forward of microbatch 9: left out); rank 1's B0 0. Predicted B 2, I 2, on rank 1 B 1;
 * measured over 3 passes: rank 0's B0 2, 2, 4 (median 2: error 0, mean 8/3), I1 1, 4, 1 (median
 * 1: +1, mean 2), I2 4, 4, 5 (median 4: -1/2, mean 13/3); rank 1's B0 2, 2, 2 (-1/2). */
static void test_distance_closed_form(void) {
    static const char *k0[] = {"F", "B", "F", "SEND_F", "F", "I", "W", "STEP", "I", "B"};
    static const int mb0[] = {0, 0, 1, 1, 2, 1, 1, -1, 2, 9};
    static const double p0[] = {1, 2, 1, 0, 1, 2, 1, 1, 2, 2};
    static const double m0[3][10] = {{1, 2, 1, 0, 1, 1, 1, 1, 4, 2}, {1, 2, 1, 0, 1, 4, 1, 1, 4, 2},
                                     {1, 4, 1, 0, 1, 1, 1, 1, 5, 2}};
    store_op pred[12], meas[36];
    size_t np = 0, nm = 0;
    for (int i = 0; i < 10; i++) put(pred, &np, 0, k0[i], mb0[i], p0[i]);
    put(pred, &np, 1, "F", 0, 1);
    put(pred, &np, 1, "B", 0, 1);
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 10; i++) put(meas, &nm, 0, k0[i], mb0[i], m0[t][i]);
    for (int t = 0; t < 3; t++) {
        put(meas, &nm, 1, "F", 0, 1);
        put(meas, &nm, 1, "B", 0, 2);
    }
    store_distance acc;
    memset(&acc, 0, sizeof acc);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(store_distance_note(pred, np, meas, nm, 2, 3, &acc, &e), PL_OK);
    double med, mean;
    store_distance_cell *b0 = &acc.c[0][0], *i1 = &acc.c[1][1], *i2 = &acc.c[1][2];
    CU_ASSERT_EQUAL(b0->n, 2);
    CU_ASSERT_EQUAL(b0->pairs, 1);
    store_distance_stats(b0, &med, &mean);
    CU_ASSERT_DOUBLE_EQUAL(med, -0.25, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(mean, -0.25, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(b0->meas_s, 8.0 / 3 + 2, 1e-12);
    CU_ASSERT_EQUAL(i1->n, 1);
    store_distance_stats(i1, &med, &mean);
    CU_ASSERT_DOUBLE_EQUAL(med, 1, 1e-12);
    CU_ASSERT_EQUAL(i2->n, 1);
    store_distance_stats(i2, &med, &mean);
    CU_ASSERT_DOUBLE_EQUAL(med, -0.5, 1e-12);
    for (int b = 1; b < STORE_DISTANCE_BUCKETS; b++) CU_ASSERT_EQUAL(acc.c[0][b].n, 0); /* B9 left out */
    CU_ASSERT_EQUAL(acc.c[1][0].n, 0);
    CU_ASSERT_DOUBLE_EQUAL(acc.class_s[0], 8.0 / 3 + 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(acc.class_s[1], 2 + 13.0 / 3, 1e-12);
    store_distance_stats(&acc.c[0][5], &med, &mean);
    CU_ASSERT(isnan(med) && isnan(mean));
    /* a second pair counts once more in each bucket it has */
    CU_ASSERT_EQUAL_FATAL(store_distance_note(pred, np, meas, nm, 2, 3, &acc, &e), PL_OK);
    CU_ASSERT_EQUAL(acc.c[0][0].n, 4);
    CU_ASSERT_EQUAL(acc.c[0][0].pairs, 2);
    store_distance_free(&acc);
    CU_ASSERT_PTR_NULL(acc.c[0][0].err);
}

/* Distances 0, 1, 2-3, 4-7, 8-15 and 16 or more. */
static void test_distance_buckets(void) {
    static const long d[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 1000};
    static const int b[] = {0, 1, 2, 2, 3, 3, 4, 4, 5, 5};
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(store_distance_bucket(d[i]), b[i]);
    static const long from[] = {0, 1, 2, 4, 8, 16};
    for (int i = 0; i < STORE_DISTANCE_BUCKETS; i++) CU_ASSERT_EQUAL(store_distance_bucket_from(i), from[i]);
}

/* Appends action (kind, stage 0, microbatch mb) of rank `rank` from s0 to s1 to ops[*n]. */
static void at(store_op *ops, size_t *n, int rank, const char *kind, int mb, double s0, double s1) {
    ops[*n] = (store_op){rank, (int)*n, kind, kind, 0, mb, s0, s1};
    (*n)++;
}

/* What runs beside each backward, on one measured pass whose spans are set by hand:
 * - rank 0's B0 [2, 4] beside rank 1's F0 [2, 4]: beside F, distance 0, predicted 2.2 (+0.1);
 * - rank 0's B1 [6, 8] and rank 1's B0 [6, 8] beside each other: beside backward, distance 0,
 *   predicted 2 and 3 (0 and +0.5: median and mean 0.25);
 * - rank 0's B2 [10, 12], F4 between it and its F2 (distance 1), beside rank 1's F2 [11.6, 12]
 *   alone (a fifth of its span, under a quarter), predicted 1.8 (-0.1);
 * - rank 0's I3 [14, 18] beside rank 1's F1 [14, 16] and W1 [16, 18]: mixed, distance 0,
 *   predicted 4.4 (+0.1). */
static void test_distance_beside(void) {
    static const char *k0[] = {"F", "B", "F", "B", "F", "F", "B", "F", "I"}, *k1[] = {"F", "B", "F", "F", "W"};
    static const int mb0[] = {0, 0, 1, 1, 2, 4, 2, 3, 3}, mb1[] = {0, 0, 2, 1, 1};
    static const double s0[] = {0, 2, 4, 6, 8, 9, 10, 12, 14, 18};
    static const double s1[][2] = {{2, 4}, {6, 8}, {11.6, 12}, {14, 16}, {16, 18}};
    static const double p0[] = {2, 2.2, 2, 2, 1, 1, 1.8, 2, 4.4}, p1[] = {2, 3, 0.4, 2, 2};
    store_op pred[14], meas[14];
    size_t np = 0, nm = 0;
    for (int i = 0; i < 9; i++) put(pred, &np, 0, k0[i], mb0[i], p0[i]);
    for (int i = 0; i < 5; i++) put(pred, &np, 1, k1[i], mb1[i], p1[i]);
    for (int i = 0; i < 9; i++) at(meas, &nm, 0, k0[i], mb0[i], s0[i], s0[i + 1]);
    for (int i = 0; i < 5; i++) at(meas, &nm, 1, k1[i], mb1[i], s1[i][0], s1[i][1]);
    store_distance acc;
    memset(&acc, 0, sizeof acc);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(store_distance_note(pred, np, meas, nm, 2, 1, &acc, &e), PL_OK);
    double med, mean;
    store_distance_cell *bf = &acc.beside[0][STORE_BESIDE_F][0], *bb = &acc.beside[0][STORE_BESIDE_BACKWARD][0];
    store_distance_cell *ba = &acc.beside[0][STORE_BESIDE_ALONE][1], *im = &acc.beside[1][STORE_BESIDE_MIXED][0];
    CU_ASSERT_EQUAL(bf->n, 1);
    store_distance_stats(bf, &med, &mean);
    CU_ASSERT_DOUBLE_EQUAL(med, 0.1, 1e-12);
    CU_ASSERT_EQUAL(bb->n, 2);
    CU_ASSERT_EQUAL(bb->pairs, 1);
    CU_ASSERT_DOUBLE_EQUAL(bb->meas_s, 4, 1e-12);
    store_distance_stats(bb, &med, &mean);
    CU_ASSERT_DOUBLE_EQUAL(med, 0.25, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(mean, 0.25, 1e-12);
    CU_ASSERT_EQUAL(ba->n, 1);
    store_distance_stats(ba, &med, &mean);
    CU_ASSERT_DOUBLE_EQUAL(med, -0.1, 1e-12);
    CU_ASSERT_EQUAL(im->n, 1);
    store_distance_stats(im, &med, &mean);
    CU_ASSERT_DOUBLE_EQUAL(med, 0.1, 1e-12);
    size_t all = 0;
    for (int c = 0; c < STORE_DISTANCE_CLASSES; c++)
        for (int k = 0; k < STORE_BESIDE_KINDS; k++) all += acc.beside[c][k][0].n + acc.beside[c][k][1].n;
    CU_ASSERT_EQUAL(all, 5); /* nothing else: W1 is not a backward of the table */
    /* by distance the same five: B at 0 three times, at 1 once, I at 0 once */
    CU_ASSERT_EQUAL(acc.c[0][0].n, 3);
    CU_ASSERT_EQUAL(acc.c[0][1].n, 1);
    CU_ASSERT_EQUAL(acc.c[1][0].n, 1);
    store_distance_free(&acc);
    CU_ASSERT_PTR_NULL(acc.beside[0][STORE_BESIDE_BACKWARD][0].err);
}

/* A replicated stage's replicas are stored as one rank whose ops overlap: beside a backward they
 * count their union, at most its span. Rank 0's B0 [1, 11] beside rank 1's two replicas' F0 and
 * F1, both [1, 2.5]: 1.5 of 10, alone (summed, 3 of 10 would have read beside F); its B1
 * [11, 21] beside rank 1's F2 [11, 21] and F3 [11, 16]: the whole span, beside F. */
static void test_distance_beside_folded(void) {
    store_op pred[8], meas[8];
    size_t np = 0, nm = 0;
    static const char *k0[] = {"F", "B", "F", "B"};
    static const int mb0[] = {0, 0, 1, 1};
    static const double s0[][2] = {{0, 1}, {1, 11}, {11, 11}, {11, 21}};
    static const double s1[][2] = {{1, 2.5}, {1, 2.5}, {11, 21}, {11, 16}};
    for (int i = 0; i < 4; i++) put(pred, &np, 0, k0[i], mb0[i], s0[i][1] - s0[i][0] > 0 ? s0[i][1] - s0[i][0] : 1);
    for (int i = 0; i < 4; i++) put(pred, &np, 1, "F", i, 1);
    for (int i = 0; i < 4; i++) at(meas, &nm, 0, k0[i], mb0[i], s0[i][0], s0[i][1]);
    for (int i = 0; i < 4; i++) at(meas, &nm, 1, "F", i, s1[i][0], s1[i][1]);
    store_distance acc;
    memset(&acc, 0, sizeof acc);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(store_distance_note(pred, np, meas, nm, 2, 1, &acc, &e), PL_OK);
    CU_ASSERT_EQUAL(acc.beside[0][STORE_BESIDE_ALONE][0].n, 1);
    CU_ASSERT_EQUAL(acc.beside[0][STORE_BESIDE_F][0].n, 1);
    store_distance_free(&acc);
}

/* A measured pass whose action is not the predicted one at the same place, or a timeline that
 * is not whole passes, is refused with PL_EINPUT and adds nothing. */
static void test_distance_refusals(void) {
    store_op pred[2], meas[4];
    size_t np = 0, nm = 0;
    put(pred, &np, 0, "F", 0, 1);
    put(pred, &np, 0, "B", 0, 1);
    put(meas, &nm, 0, "F", 0, 1);
    put(meas, &nm, 0, "B", 0, 1);
    put(meas, &nm, 0, "F", 0, 1);
    put(meas, &nm, 0, "B", 1, 1); /* another microbatch */
    store_distance acc;
    memset(&acc, 0, sizeof acc);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_distance_note(pred, np, meas, nm, 1, 2, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is not the predicted one"));
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_distance_note(pred, np, meas, 3, 1, 2, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not 2 passes"));
    for (int k = 0; k < STORE_DISTANCE_CLASSES; k++)
        for (int b = 0; b < STORE_DISTANCE_BUCKETS; b++) CU_ASSERT_EQUAL(acc.c[k][b].n, 0);
    meas[3].mb = 0;
    CU_ASSERT_EQUAL(store_distance_note(pred, np, meas, nm, 1, 2, &acc, &e), PL_OK);
    CU_ASSERT_EQUAL(acc.c[0][0].n, 1);
    store_distance_free(&acc);
}

/* Returns the ACTIONS count of the row of class B at distance `range` in out, or -1. */
static int b_actions(const char *out, const char *range) {
    char key[32];
    snprintf(key, sizeof key, "\n%-6s %8s ", "B", range); /* as the table lays a row out */
    const char *r = strstr(out, key);
    int n = -1;
    return r && sscanf(r + strlen(key), "%d", &n) == 1 ? n : -1;
}

/* A real traced 1F1B run, 2 ranks, 4 microbatches: rank 1 runs each B right after its F
 * (distance 0, 4 of them); rank 0 runs F0 F1 B0 F2 B1 F3 B2 B3: B0 and B3 at distance 1, B1 and
 * B2 at 2. --distance with --format csv is a usage error. */
static void test_compare_distance_cli(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *out = tr_traced_compare(dir, "1f1b", 4, "t.db", "tl", "--distance");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(1 pair with both timelines)"));
    CU_ASSERT_EQUAL(b_actions(out, "0"), 4);
    CU_ASSERT_EQUAL(b_actions(out, "1"), 2);
    CU_ASSERT_EQUAL(b_actions(out, "2-3"), 2);
    CU_ASSERT_EQUAL(b_actions(out, "4-7"), -1);
    /* the beside table holds the same 8: 4 at distance 0, 4 beyond */
    int near = 0, far = 0;
    for (int k = 0; k < STORE_BESIDE_KINDS; k++) {
        char key[48];
        int n;
        for (int d = 0; d < 2; d++) {
            snprintf(key, sizeof key, "\n%-6s %8s %8s ", "B", store_beside_names[k], d ? "1+" : "0");
            const char *r = strstr(out, key);
            if (r && sscanf(r + strlen(key), "%d", &n) == 1) *(d ? &far : &near) += n;
        }
    }
    CU_ASSERT_EQUAL(near, 4);
    CU_ASSERT_EQUAL(far, 4);
    free(out);
    CU_ASSERT(tr_table_only_then_clean(dir, "t.db", "--distance"));
}

void test_distance_register(void) {
    static const pl_test_case cases[] = {
        {"store_distance_note: distances and errors, closed form", test_distance_closed_form},
        {"store_distance_bucket: the buckets", test_distance_buckets},
        {"store_distance_note: refusals", test_distance_refusals},
        {"store_distance_note: what runs beside each backward, closed form", test_distance_beside},
        {"store_distance_note: a replicated stage's overlapping ops count once beside", test_distance_beside_folded},
        {"compare --distance: a real traced 1F1B run", test_compare_distance_cli},
        {NULL, NULL},
    };
    pl_test_suite("distance", cases);
}
