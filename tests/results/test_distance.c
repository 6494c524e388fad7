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
    free(out);
    CU_ASSERT(tr_table_only_then_clean(dir, "t.db", "--distance"));
}

void test_distance_register(void) {
    static const pl_test_case cases[] = {
        {"store_distance_note: distances and errors, closed form", test_distance_closed_form},
        {"store_distance_bucket: the buckets", test_distance_buckets},
        {"store_distance_note: refusals", test_distance_refusals},
        {"compare --distance: a real traced 1F1B run", test_compare_distance_cli},
        {NULL, NULL},
    };
    pl_test_suite("distance", cases);
}
