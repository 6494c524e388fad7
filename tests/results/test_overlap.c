/* test_overlap.c: store_overlap_note on hand-made timelines whose alone and beside actions, and
 * the share of each class's time spent alone, are known in closed form; its refusals; and
 * `pipelab compare --overlap` on a real traced run where no two ranks ever compute at once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "store.h"
#include "util.h"

/* Appends one op to ops[*n] at [s, e] (seconds) of pass `pass` (100 s apart). */
static void put(store_op *ops, size_t *n, int rank, int pass, const char *kind, int stage, double s, double e) {
    int seq = (int)*n;
    ops[*n] = (store_op){rank, seq, kind, kind, stage, 0, 100.0 * pass + s, 100.0 * pass + e};
    (*n)++;
}

/* Zeroes acc and e, then notes ops[0 .. n) into acc (store_overlap_note); returns its code. */
static int note_fresh(const store_op *ops, size_t n, int ranks, int passes, store_overlap *acc, pl_err *e) {
    memset(acc, 0, sizeof *acc);
    pl_err_clear(e);
    return store_overlap_note(ops, n, ranks, passes, acc, e);
}

/* Two ranks, two passes. Rank 0 (stage 0) per pass: F [0,1] (its first: left out of the
 * groups), F [1,2] alone, F [2,4] beside, F [4,5] alone, F [5,7] beside, STEP [7,8] alone, B
 * [10,12] half beside; rank 1 (stage 1): F [2,4], F [5,7], STEP [8,9], W [11,12]. Rank 0's F
 * group: alone 1 s, beside 2 s, ratio 0.5; no other group has two of each. Alone time: F 3 s of
 * rank 0's 7 and none of rank 1's 4 a pass; STEP all 2 s; B 1 s of 2; W none of 1. */
static void test_overlap_closed_form(void) {
    store_op ops[32];
    size_t n = 0;
    for (int t = 0; t < 2; t++) {
        put(ops, &n, 0, t, "F", 0, 0, 1);
        put(ops, &n, 0, t, "F", 0, 1, 2);
        put(ops, &n, 0, t, "SEND_F", 0, 2, 2);
        put(ops, &n, 0, t, "F", 0, 2, 4);
        put(ops, &n, 0, t, "F", 0, 4, 5);
        put(ops, &n, 0, t, "F", 0, 5, 7);
        put(ops, &n, 0, t, "STEP", 0, 7, 8);
        put(ops, &n, 0, t, "B", 0, 10, 12);
    }
    for (int t = 0; t < 2; t++) {
        put(ops, &n, 1, t, "F", 1, 2, 4);
        put(ops, &n, 1, t, "F", 1, 5, 7);
        put(ops, &n, 1, t, "STEP", 1, 8, 9);
        put(ops, &n, 1, t, "W", 1, 11, 12);
    }
    store_overlap acc;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(note_fresh(ops, n, 2, 2, &acc, &e), PL_OK);
    const store_overlap_class *F = &acc.c[0], *B = &acc.c[1], *I = &acc.c[2], *W = &acc.c[3], *S = &acc.c[4];
    CU_ASSERT_EQUAL(F->groups, 1);
    CU_ASSERT_DOUBLE_EQUAL(exp(F->log_ratio_sum), 0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(F->least, 0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(F->largest, 0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(F->alone_s, 6, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(F->total_s, 22, 1e-9);
    CU_ASSERT_EQUAL(S->groups, 0);
    CU_ASSERT_DOUBLE_EQUAL(S->alone_s, 4, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(S->total_s, 4, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(B->alone_s, 2, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(B->total_s, 4, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(W->alone_s, 0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(W->total_s, 2, 1e-9);
    CU_ASSERT_EQUAL(I->groups, 0);
    CU_ASSERT_DOUBLE_EQUAL(I->total_s, 0, 0);
    /* a second run adds to the same sums: another group of ratio 0.5 */
    CU_ASSERT_EQUAL_FATAL(store_overlap_note(ops, n, 2, 2, &acc, &e), PL_OK);
    CU_ASSERT_EQUAL(F->groups, 2);
    CU_ASSERT_DOUBLE_EQUAL(exp(F->log_ratio_sum / F->groups), 0.5, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(F->total_s, 44, 1e-9);
}

/* Three ranks: an action's alone time is its span times the other ranks' mean idle share. Rank
 * 0's F [0,2], with rank 1 computing throughout and rank 2 half of it: busy share 3/4, 0.5 s
 * alone, neither alone nor beside; rank 1's F likewise; rank 2's F [1,2]: both others busy, none
 * alone. */
static void test_overlap_three_ranks(void) {
    store_op ops[3];
    size_t n = 0;
    put(ops, &n, 0, 0, "F", 0, 0, 2);
    put(ops, &n, 1, 0, "F", 1, 0, 2);
    put(ops, &n, 2, 0, "F", 2, 1, 2);
    store_overlap acc;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(note_fresh(ops, n, 3, 1, &acc, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(acc.c[0].alone_s, 1, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(acc.c[0].total_s, 5, 1e-9);
    CU_ASSERT_EQUAL(acc.c[0].groups, 0);
}

/* A rank's compute is the union of its spans: two replicas folded into rank 1 (listed out of start
 * order, [1,3] then [0,2]) cover 3 s of rank 0's F [0,4], which is 1 s alone, not none; rank 1's
 * two F, beside rank 0's, none. An overlapped F and B counts as compute: rank 1's F [10,12]
 * beside rank 0's OVERLAP_F_B [10,12] is not alone, and the pair itself is in no class. */
static void test_overlap_union(void) {
    store_op ops[5];
    size_t n = 0;
    put(ops, &n, 0, 0, "F", 0, 0, 4);
    put(ops, &n, 0, 0, "OVERLAP_F_B", 0, 10, 12);
    put(ops, &n, 1, 0, "F", 1, 1, 3);
    put(ops, &n, 1, 0, "F", 1, 0, 2);
    put(ops, &n, 1, 0, "F", 1, 10, 12);
    store_overlap acc;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(note_fresh(ops, n, 2, 1, &acc, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(acc.c[0].alone_s, 1, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(acc.c[0].total_s, 10, 1e-9);
    for (int k = 1; k < STORE_OVERLAP_KINDS; k++) CU_ASSERT_DOUBLE_EQUAL(acc.c[k].total_s, 0, 0);
}

/* A timeline out of rank order, or whose rank's actions are not whole passes, or that names an
 * absurd stage, is refused with PL_EINPUT and adds nothing (an uneven rank 1 after a whole rank
 * 0 included); one rank adds nothing (every action alone, nothing to compare). */
static void test_overlap_refusals(void) {
    store_op ops[5];
    size_t n = 0;
    put(ops, &n, 1, 0, "F", 1, 0, 1);
    put(ops, &n, 0, 0, "F", 0, 1, 2);
    store_overlap acc;
    pl_err e;
    CU_ASSERT_EQUAL(note_fresh(ops, n, 2, 1, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ordered by rank"));
    n = 0;
    put(ops, &n, 0, 0, "F", 0, 0, 1);
    put(ops, &n, 0, 0, "F", 0, 1, 2);
    put(ops, &n, 0, 0, "F", 0, 2, 3);
    put(ops, &n, 1, 0, "F", 1, 0, 1);
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_overlap_note(ops, n, 2, 2, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "passes of equal length"));
    CU_ASSERT_EQUAL(store_overlap_note(ops, n, 1, 1, &acc, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(acc.c[0].total_s, 0, 0);
    /* rank 0 whole (2 passes of 1), rank 1 not (3 actions): nothing of rank 0 is added */
    n = 0;
    put(ops, &n, 0, 0, "F", 0, 0, 1);
    put(ops, &n, 0, 1, "F", 0, 0, 1);
    put(ops, &n, 1, 0, "F", 1, 1, 2);
    put(ops, &n, 1, 0, "F", 1, 2, 3);
    put(ops, &n, 1, 1, "F", 1, 1, 2);
    CU_ASSERT_EQUAL(note_fresh(ops, n, 2, 2, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 1's 3 actions"));
    CU_ASSERT_DOUBLE_EQUAL(acc.c[0].total_s, 0, 0);
    n = 0;
    put(ops, &n, 0, 0, "F", 1 << 24, 0, 1);
    put(ops, &n, 1, 0, "F", 1, 0, 1);
    CU_ASSERT_EQUAL(note_fresh(ops, n, 2, 1, &acc, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "names stage"));
}

/* GPipe with one microbatch on 2 ranks: each rank's F and the last rank's B run while the other
 * rank waits for them, so the F row reads 100.00% alone, in a real traced run; --overlap with
 * --format csv is a usage error. */
static void test_compare_overlap_cli(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *out = tr_traced_compare(dir, "gpipe", 1, "o.db", "ov", "--overlap");
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(1 measured run of 2 ranks or more)"));
    const char *f = strstr(out, "\nF ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int groups = -1;
    char share[32] = "";
    CU_ASSERT_EQUAL(sscanf(f, " F %d - - - %31s", &groups, share), 2);
    CU_ASSERT_EQUAL(groups, 0);
    CU_ASSERT_STRING_EQUAL(share, "100.00%");
    free(out);
    CU_ASSERT(tr_table_only_then_clean(dir, "o.db", "--overlap"));
}

void test_overlap_register(void) {
    static const pl_test_case cases[] = {
        {"store_overlap_note: alone against beside, closed form", test_overlap_closed_form},
        {"store_overlap_note: three ranks, the others' mean busy share", test_overlap_three_ranks},
        {"store_overlap_note: a rank's compute is the union of its spans, overlapped pairs included", test_overlap_union},
        {"store_overlap_note: refusals", test_overlap_refusals},
        {"compare --overlap: GPipe m 1 computes alone throughout", test_compare_overlap_cli},
        {NULL, NULL},
    };
    pl_test_suite("overlap", cases);
}
