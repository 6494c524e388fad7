/* test_tail.c: store_tail_note on hand-made timelines whose typical actions, tails and each
 * class's part of the compute's error are known in closed form; its refusals; and `pipelab
 * compare --tail` on a real traced run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "store.h"
#include "util.h"

/* Appends one op of duration d to ops[*n], right after the previous one of its rank. */
static void put(store_op *ops, size_t *n, int rank, const char *kind, double d) {
    double s = *n > 0 && ops[*n - 1].rank == rank ? ops[*n - 1].end_s : 0;
    ops[*n] = (store_op){rank, (int)*n, kind, kind, rank, 0, s, s + d};
    (*n)++;
}

/* The predicted pass: rank 0 F 1, F 1, SEND_F 0, B 3, STEP 1; rank 1 F 1, W 1. Measured, two
 * passes: rank 0 F 1, F 1, B 3, STEP 1, then F 1, F 4 (an interruption), B 3, STEP 2; rank 1
 * F 2, W 1, then F 2, W 3. Rank 0's F: median 1, mean 1.75, predicted 1 (typical 0, mean -3/7,
 * tail 0.75); rank 1's F: median = mean = 2 (-1/2, -1/2, 0); the class's medians are the two
 * ranks' midpoints. STEP: measured 1 and 2 (-1/3, -1/3, 0); B exact; W -1/2, -1/2, 0. LEAN:
 * rank 0's measured compute 8 a pass (F 3.5, B 3, STEP 1.5), rank 1's 4 (F 2, W 2): F (2 - 3.5)
 * / 8 and (1 - 2) / 4 over the 2 groups, -0.21875; STEP -0.03125; W -0.125; B 0; together
 * -0.375, the mean of the ranks' compute errors -1/4 and -1/2. */
static void test_tail_closed_form(void) {
    store_op pred[8], meas[16];
    size_t np = 0, nm = 0;
    put(pred, &np, 0, "F", 1);
    put(pred, &np, 0, "F", 1);
    put(pred, &np, 0, "SEND_F", 0);
    put(pred, &np, 0, "B", 3);
    put(pred, &np, 0, "STEP", 1);
    put(pred, &np, 1, "F", 1);
    put(pred, &np, 1, "W", 1);
    const double r0[2][5] = {{1, 1, 0, 3, 1}, {1, 4, 0, 3, 2}};
    const char *k0[5] = {"F", "F", "SEND_F", "B", "STEP"};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 5; i++) put(meas, &nm, 0, k0[i], r0[t][i]);
    const double r1[2][2] = {{2, 1}, {2, 3}};
    for (int t = 0; t < 2; t++) {
        put(meas, &nm, 1, "F", r1[t][0]);
        put(meas, &nm, 1, "W", r1[t][1]);
    }
    store_tail acc;
    memset(&acc, 0, sizeof acc);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(store_tail_note(pred, np, meas, nm, 2, 2, &acc, &e), PL_OK);
    CU_ASSERT_EQUAL(acc.groups, 2);
    double m[3];
    CU_ASSERT_EQUAL(acc.c[0].n, 2);
    store_tail_medians(&acc.c[0], m);
    CU_ASSERT_DOUBLE_EQUAL(m[0], -0.25, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m[1], (-3.0 / 7 - 0.5) / 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m[2], 0.375, 1e-12);
    CU_ASSERT_EQUAL(acc.c[1].n, 1); /* B: rank 0 alone */
    store_tail_medians(&acc.c[1], m);
    for (int j = 0; j < 3; j++) CU_ASSERT_DOUBLE_EQUAL(m[j], 0, 1e-12);
    CU_ASSERT_EQUAL(acc.c[2].n, 0); /* I: on neither timeline */
    store_tail_medians(&acc.c[2], m);
    CU_ASSERT(isnan(m[0]) && isnan(m[1]) && isnan(m[2]));
    store_tail_medians(&acc.c[3], m);
    CU_ASSERT_DOUBLE_EQUAL(m[0], -0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m[2], 0, 1e-12);
    store_tail_medians(&acc.c[STORE_OVERLAP_STEP], m);
    CU_ASSERT_DOUBLE_EQUAL(m[0], -1.0 / 3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m[1], -1.0 / 3, 1e-12);
    const double lean[STORE_OVERLAP_KINDS] = {-0.21875, 0, 0, -0.125, -0.03125};
    double sum = 0;
    for (int k = 0; k < STORE_OVERLAP_KINDS; k++) {
        CU_ASSERT_DOUBLE_EQUAL(acc.c[k].lean_sum / (double)acc.groups, lean[k], 1e-12);
        sum += acc.c[k].lean_sum / (double)acc.groups;
    }
    CU_ASSERT_DOUBLE_EQUAL(sum, -0.375, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(acc.meas_s[0], 5.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(acc.meas_s[STORE_OVERLAP_KINDS], 12, 1e-12);
    store_tail_free(&acc);
    CU_ASSERT_PTR_NULL(acc.c[0].typical);
}

/* A measured timeline that is not whole passes of the predicted one, or out of rank order, is
 * refused with PL_EINPUT and adds nothing to what an earlier pair noted. */
static void test_tail_refusals(void) {
    store_op pred[2], meas[6];
    size_t np = 0, nm = 0;
    put(pred, &np, 0, "F", 1);
    put(pred, &np, 1, "F", 1);
    for (int t = 0; t < 2; t++) put(meas, &nm, 0, "F", 2);
    for (int t = 0; t < 2; t++) put(meas, &nm, 1, "F", 2);
    store_tail acc;
    memset(&acc, 0, sizeof acc);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(store_tail_note(pred, np, meas, nm, 2, 2, &acc, &e), PL_OK);
    CU_ASSERT_EQUAL(acc.c[0].n, 2);
    /* three passes asked of two */
    CU_ASSERT_EQUAL(store_tail_note(pred, np, meas, nm, 2, 3, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not 3 passes"));
    /* rank 1's measured actions before rank 0's: the same count, out of order */
    store_op swap[4] = {meas[2], meas[3], meas[0], meas[1]};
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_tail_note(pred, np, swap, nm, 2, 2, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank order"));
    /* a rank beyond the count given */
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_tail_note(pred, np, meas, nm, 1, 2, &acc, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(acc.c[0].n, 2);
    CU_ASSERT_EQUAL(acc.groups, 2);
    store_tail_free(&acc);
}

/* A real traced 1F1B run on 2 ranks: both ranks have F and B on both timelines, so each row
 * counts 2; --tail with --format csv is a usage error. */
static void test_compare_tail_cli(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *out = tr_traced_compare(dir, "1f1b", 4, "t.db", "tl", "--tail");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(1 pair with both timelines)"));
    int ranks = -1;
    const char *f = strstr(out, "\nF ");
    CU_ASSERT_TRUE(f && sscanf(f, " F %d", &ranks) == 1 && ranks == 2);
    f = strstr(out, "\nB ");
    CU_ASSERT_TRUE(f && sscanf(f, " B %d", &ranks) == 1 && ranks == 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "the classes' LEANs together"));
    free(out);
    CU_ASSERT(tr_table_only_then_clean(dir, "t.db", "--tail"));
}

void test_tail_register(void) {
    static const pl_test_case cases[] = {
        {"store_tail_note: typical, mean, tail and each class's lean, closed form", test_tail_closed_form},
        {"store_tail_note: refusals", test_tail_refusals},
        {"compare --tail: a real traced 1F1B run", test_compare_tail_cli},
        {NULL, NULL},
    };
    pl_test_suite("tail", cases);
}
