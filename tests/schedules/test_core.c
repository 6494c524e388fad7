/* test_core.c: the IR itself: action text round trips, letters, parse errors, placements. */
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"

/* Parses text with the given letters; asserts success and returns the action. */
static sched_action parse_ok(const char *text, sched_letters l) {
    sched_action a;
    pl_err e;
    size_t col = 99;
    int rc = sched_action_parse(text, strlen(text), l, &a, &col, &e);
    CU_ASSERT_EQUAL(rc, PL_OK);
    if (rc) fprintf(stderr, "\nparse '%s' failed: %s\n", text, e.msg);
    return a;
}

static void test_action_round_trip(void) {
    const char *texts[] = {"0F1", "2I0", "3W7", "1SEND_F0", "0RECV_B3", "0REDUCE_GRAD", "4STEP",
                           "2STEP5", "1B12", "5UNSHARD", "5RESHARD", "7RECV_F2", "6SEND_B9",
                           "(0F7;7B3)OVERLAP_F_B", "(1F6;6I2)OVERLAP_F_B", "0REDUCE_GRAD3", NULL};
    for (int i = 0; texts[i]; i++) {
        sched_action a = parse_ok(texts[i], SCHED_LETTERS_CURRENT);
        char buf[64];
        int n = sched_action_format(&a, buf, sizeof buf);
        CU_ASSERT_EQUAL((size_t)n, strlen(texts[i]));
        CU_ASSERT_STRING_EQUAL(buf, texts[i]);
    }
}

static void test_action_fields(void) {
    sched_action a = parse_ok("12SEND_B345", SCHED_LETTERS_CURRENT);
    CU_ASSERT_EQUAL(a.kind, SCHED_SEND_B);
    CU_ASSERT_EQUAL(a.stage, 12);
    CU_ASSERT_EQUAL(a.mb, 345);
    a = parse_ok("(0F7;7B3)OVERLAP_F_B", SCHED_LETTERS_CURRENT);
    CU_ASSERT_EQUAL(a.kind, SCHED_OVERLAP);
    CU_ASSERT_EQUAL(a.stage, 0);
    CU_ASSERT_EQUAL(a.mb, 7);
    CU_ASSERT_EQUAL(a.kind2, SCHED_B);
    CU_ASSERT_EQUAL(a.stage2, 7);
    CU_ASSERT_EQUAL(a.mb2, 3);
    a = parse_ok("3REDUCE_GRAD", SCHED_LETTERS_CURRENT);
    CU_ASSERT_EQUAL(a.kind, SCHED_REDUCE_GRAD);
    CU_ASSERT_EQUAL(a.mb, -1);
}

static void test_legacy_letters(void) {
    /* older PyTorch: B is the input backward, BW the full backward */
    CU_ASSERT_EQUAL(parse_ok("2B0", SCHED_LETTERS_LEGACY).kind, SCHED_I);
    CU_ASSERT_EQUAL(parse_ok("2BW0", SCHED_LETTERS_LEGACY).kind, SCHED_B);
    CU_ASSERT_EQUAL(parse_ok("2W0", SCHED_LETTERS_LEGACY).kind, SCHED_W);
    CU_ASSERT_EQUAL(parse_ok("2B0", SCHED_LETTERS_CURRENT).kind, SCHED_B);
    /* BW is not a current letter, I is not a legacy one */
    sched_action a;
    pl_err e;
    size_t col;
    CU_ASSERT_EQUAL(sched_action_parse("2BW0", 4, SCHED_LETTERS_CURRENT, &a, &col, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "legacy"));
    CU_ASSERT_EQUAL(sched_action_parse("2I0", 3, SCHED_LETTERS_LEGACY, &a, &col, &e), PL_EINPUT);
}

/* Asserts that text fails to parse with the error at column col and a message containing sub. */
static void parse_bad(const char *text, size_t want_col, const char *sub) {
    sched_action a;
    pl_err e;
    size_t col = 999;
    pl_err_clear(&e);
    int rc = sched_action_parse(text, strlen(text), SCHED_LETTERS_CURRENT, &a, &col, &e);
    CU_ASSERT_EQUAL(rc, PL_EINPUT);
    CU_ASSERT_EQUAL(col, want_col);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, sub));
    if (col != want_col || !strstr(e.msg, sub)) fprintf(stderr, "\n'%s': col %zu msg '%s'\n", text, col, e.msg);
}

static void test_parse_errors(void) {
    parse_bad("", 0, "empty");
    parse_bad("F0", 0, "stage");
    parse_bad("0X1", 1, "unknown action kind");
    parse_bad("0F", 2, "needs a microbatch");
    parse_bad("0F1x", 3, "unexpected text");
    parse_bad("2FX0", 2, "needs a microbatch");
    parse_bad("0F99999999999", 2, "too large");
    parse_bad("99999999999F0", 0, "too large");
    parse_bad("0UNSHARD3", 8, "takes no microbatch");
    parse_bad("(0F1;1B0", 8, "OVERLAP_F_B");
    parse_bad("(0B1;1B0)OVERLAP_F_B", 1, "forward");
    parse_bad("(0F1;1W0)OVERLAP_F_B", 5, "backward");
    parse_bad("(0F1,1B0)OVERLAP_F_B", 4, "';'");
}

static void test_placements(void) {
    int sr[12];
    CU_ASSERT_EQUAL(sched_place(SCHED_PLACE_LOOP, 4, 8, sr, NULL), PL_OK);
    int loop[8] = {0, 1, 2, 3, 0, 1, 2, 3};
    CU_ASSERT_EQUAL(memcmp(sr, loop, sizeof loop), 0);
    CU_ASSERT_EQUAL(sched_place(SCHED_PLACE_V, 4, 8, sr, NULL), PL_OK);
    int v[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    CU_ASSERT_EQUAL(memcmp(sr, v, sizeof v), 0);
    CU_ASSERT_EQUAL(sched_place(SCHED_PLACE_V, 3, 9, sr, NULL), PL_OK);
    int v3[9] = {0, 1, 2, 2, 1, 0, 0, 1, 2};
    CU_ASSERT_EQUAL(memcmp(sr, v3, sizeof v3), 0);
}

static void test_new_limits(void) {
    pl_err e;
    CU_ASSERT_PTR_NULL(sched_new(0, 1, 1, SCHED_PLACE_LOOP, NULL, &e));
    CU_ASSERT_PTR_NULL(sched_new(SCHED_MAX_RANKS + 1, SCHED_MAX_RANKS + 1, 1, SCHED_PLACE_LOOP, NULL, &e));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ranks"));
    CU_ASSERT_PTR_NULL(sched_new(2, 2, 0, SCHED_PLACE_LOOP, NULL, &e));
    int bad[2] = {0, 5};
    CU_ASSERT_PTR_NULL(sched_new(2, 2, 1, SCHED_PLACE_EXPLICIT, bad, &e));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 5"));
}

static void test_clone_equal(void) {
    pl_err e;
    sched *s = sched_new(2, 2, 2, SCHED_PLACE_LOOP, NULL, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sched_push(s, 0, sched_act(SCHED_F, 0, 0));
    sched_push(s, 1, sched_overlap(1, 0, SCHED_B, 1, 0));
    sched *c = sched_clone(s);
    CU_ASSERT_TRUE(sched_equal(s, c));
    c->rank[1].acts[0].mb2 = 1;
    CU_ASSERT_FALSE(sched_equal(s, c));
    sched_free(c);
    sched_free(s);
}

/* Generates 1f1b over 2 ranks and m microbatches (its lists in one block), grows rank 1 past
 * its reserved room, and checks that the grown list moved out with its actions and the new
 * one, the other rank untouched; freeing it must neither leak nor free inside the block (ASan). */
static void check_block_growth(int m, int mapped) {
    pl_err e;
    sched_gen_opts o = {.ranks = 2, .microbatches = m};
    sched *s = sched_generate("1f1b", &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL(s->block);
    CU_ASSERT_EQUAL(s->block_mapped, mapped);
    CU_ASSERT_EQUAL(s->rank[1].n, s->rank[1].cap); /* the reserve is exact: 2 m per rank */
    CU_ASSERT_PTR_EQUAL(s->rank[1].acts, s->block + s->rank[0].cap);
    sched *c = sched_clone(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(sched_push(s, 1, sched_act(SCHED_STEP, 1, -1)), PL_OK);
    CU_ASSERT_PTR_NOT_EQUAL(s->rank[1].acts, s->block + s->rank[0].cap);
    CU_ASSERT_EQUAL(s->rank[1].n, c->rank[1].n + 1);
    CU_ASSERT_EQUAL(memcmp(s->rank[1].acts, c->rank[1].acts, c->rank[1].n * sizeof(sched_action)), 0);
    CU_ASSERT_EQUAL(s->rank[1].acts[c->rank[1].n].kind, SCHED_STEP);
    CU_ASSERT_EQUAL(memcmp(s->rank[0].acts, c->rank[0].acts, c->rank[0].n * sizeof(sched_action)), 0);
    sched_free(c);
    sched_free(s);
}

/* A generator's lists share one table: calloc'd when small, a huge-page mapping from
 * SCHED_MAP_MIN_BYTES on (2 ranks x 2 m actions of 20 bytes). */
static void test_list_block(void) {
    check_block_growth(4, 0);
    check_block_growth((int)(SCHED_MAP_MIN_BYTES / sizeof(sched_action) / 4) + 1, 1);
}

/* common's text writers (tested here, in the lowest module's suite): UTF-8 passes through JSON
 * strings and CSV fields, a byte that starts no well-formed UTF-8 sequence (a lone continuation
 * byte, a cut sequence, an overlong form, a surrogate) becomes U+FFFD; pl_human_bytes' one form
 * of sizes; and pl_clean_name's names for files' lines. */
static void test_common_text(void) {
    static const struct { const char *in, *json, *csv; } cases[] = {
        {"abc", "\"abc\"", "abc"},
        {"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", "\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"", "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80"},
        {"a\xff" "b", "\"a\\ufffd" "b\"", "a\xef\xbf\xbd" "b"},
        {"x\xc3", "\"x\\ufffd\"", "x\xef\xbf\xbd"},                       /* cut at the end */
        {"\xc0\xaf", "\"\\ufffd\\ufffd\"", "\xef\xbf\xbd\xef\xbf\xbd"},   /* overlong '/' */
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"q\"\xff,", "\"q\\\"\\ufffd,\"", "\"q\"\"\xef\xbf\xbd,\""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pl_buf j, c;
        pl_buf_init(&j);
        pl_buf_init(&c);
        pl_buf_json_string(&j, cases[k].in);
        pl_buf_csv_field(&c, cases[k].in);
        pl_buf_putc(&j, 0);
        pl_buf_putc(&c, 0);
        CU_ASSERT_STRING_EQUAL(j.data, cases[k].json);
        CU_ASSERT_STRING_EQUAL(c.data, cases[k].csv);
        pl_buf_free(&j);
        pl_buf_free(&c);
    }
    char h[32];
    CU_ASSERT_STRING_EQUAL(pl_human_bytes(1000, h, sizeof h), "1000 bytes");
    CU_ASSERT_STRING_EQUAL(pl_human_bytes(1536, h, sizeof h), "1.5 KiB");
    CU_ASSERT_STRING_EQUAL(pl_human_bytes(32.0 * 1024 * 1024, h, sizeof h), "32.0 MiB");
    CU_ASSERT_STRING_EQUAL(pl_human_bytes(1.5 * 1024 * 1024 * 1024 * 1024, h, sizeof h), "1.5 TiB");
    /* pl_clean_name: what a file's line can carry and read back; cut at a character's boundary */
    char nm[8];
    CU_ASSERT_STRING_EQUAL(pl_clean_name(nm, sizeof nm, "a\nb;c#", 7), "a_b_c_");
    CU_ASSERT_STRING_EQUAL(pl_clean_name(nm, sizeof nm, "x y=[1]", 7), "x y__1_");
    CU_ASSERT_STRING_EQUAL(pl_clean_name(nm, sizeof nm, "\xff" "ab", 3), "_ab");
    CU_ASSERT_STRING_EQUAL(pl_clean_name(nm, sizeof nm, "xxxxx\xc3\xa9", 7), "xxxxx\xc3\xa9");
    CU_ASSERT_STRING_EQUAL(pl_clean_name(nm, sizeof nm, "xxxxxx\xc3\xa9", 8), "xxxxxx"); /* not half of é */
    CU_ASSERT_STRING_EQUAL(pl_clean_name(nm, sizeof nm, "ab.csv", 2), "ab");
}

void test_core_register(void) {
    static const pl_test_case cases[] = {
        {"action text round trip", test_action_round_trip},
        {"action fields", test_action_fields},
        {"legacy letters", test_legacy_letters},
        {"parse errors with columns", test_parse_errors},
        {"placements", test_placements},
        {"size limits", test_new_limits},
        {"clone and equal", test_clone_equal},
        {"generated lists in one block", test_list_block},
        {"common's JSON and CSV text: UTF-8 kept, other bytes U+FFFD; sizes", test_common_text},
        {NULL, NULL},
    };
    pl_test_suite("schedules/core", cases);
}
