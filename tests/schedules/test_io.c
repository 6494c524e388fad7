/* test_io.c: the .sched and PyTorch CSV formats: round trips, golden files, real PyTorch files, errors. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"

#define GOLDEN_DIR PIPELAB_TESTS_DIR "/golden"
#define TORCH_DIR PIPELAB_TORCH_DIR

/* ---------------------------------------------------------------- helpers */

/* Returns a generated schedule (NULL with a test failure when the generator refuses). */
static sched *gen(const char *name, int p, int m, int v) {
    sched_gen_opts o = {.ranks = p, .microbatches = m, .chunks = v};
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_generate(name, &o, &e);
    if (!s) fprintf(stderr, "\n  generate %s p=%d m=%d v=%d: %s\n", name, p, m, v, e.msg);
    CU_ASSERT_PTR_NOT_NULL(s);
    return s;
}

/* Returns the lowered copy of s (NULL with a test failure on error). */
static sched *lowered(const sched *s) {
    pl_err e;
    pl_err_clear(&e);
    sched *l = sched_lower(s, &e);
    if (!l) fprintf(stderr, "\n  lower %s: %s\n", s->kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

/* Returns the .sched text of s (malloc'd, NUL-terminated). */
static char *to_text(const sched *s) {
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(sched_write_text(s, &b), PL_OK);
    return b.data;
}

/* Returns the CSV text of s in flavour fl (malloc'd), NULL with a failure on error. */
static char *to_csv(const sched *s, sched_csv_flavour fl) {
    pl_buf b;
    pl_buf_init(&b);
    pl_err e;
    pl_err_clear(&e);
    int rc = sched_write_torch_csv(s, fl, &b, &e);
    if (rc) fprintf(stderr, "\n  write csv %s: %s\n", s->kind, e.msg);
    CU_ASSERT_EQUAL(rc, PL_OK);
    if (rc) { pl_buf_free(&b); return NULL; }
    return b.data;
}

/* Returns 1 when a and b carry the same actions, ranks, stages, microbatches, placement and
 * lowered flag: what a CSV round trip preserves. */
static int csv_same(const sched *a, const sched *b) {
    if (a->ranks != b->ranks || a->stages != b->stages || a->lowered != b->lowered ||
        a->placement != b->placement ||
        (long long)a->microbatches * a->iterations != (long long)b->microbatches * b->iterations)
        return 0;
    if (memcmp(a->stage_rank, b->stage_rank, (size_t)a->stages * sizeof(int)) != 0) return 0;
    /* the CSV carries no STEP: reading puts back a flush schedule's, so a stash or 2bw
     * schedule's STEPs come back as one per stage, and only the other actions compare */
    int skip_step = a->weights != SCHED_WEIGHTS_FLUSH;
    for (int r = 0; r < a->ranks; r++) {
        size_t i = 0, j = 0;
        for (;;) {
            while (skip_step && i < a->rank[r].n && a->rank[r].acts[i].kind == SCHED_STEP) i++;
            while (skip_step && j < b->rank[r].n && b->rank[r].acts[j].kind == SCHED_STEP) j++;
            if (i == a->rank[r].n || j == b->rank[r].n) break;
            const sched_action *x = &a->rank[r].acts[i++], *y = &b->rank[r].acts[j++];
            if (x->kind != y->kind || x->stage != y->stage || x->mb != y->mb) return 0;
            if (x->kind == SCHED_OVERLAP &&
                (x->kind2 != y->kind2 || x->stage2 != y->stage2 || x->mb2 != y->mb2))
                return 0;
        }
        if (i != a->rank[r].n || j != b->rank[r].n) return 0;
    }
    return 1;
}

/* Checks that s survives .sched write -> read exactly (sched_equal, kind, chunks) and that
 * writing again gives the same bytes. */
static void check_text_roundtrip(const sched *s) {
    char *t1 = to_text(s);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t1);
    pl_err e;
    pl_err_clear(&e);
    sched *r = sched_read_text("rt.sched", t1, strlen(t1), &e);
    if (!r) fprintf(stderr, "\n  read back %s: %s\n", s->kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r) {
        CU_ASSERT(sched_equal(s, r));
        CU_ASSERT_STRING_EQUAL(s->kind, r->kind);
        CU_ASSERT_EQUAL(s->chunks, r->chunks);
        CU_ASSERT_PTR_NOT_NULL(r->src_path);
        CU_ASSERT_PTR_NOT_NULL(r->src_line);
        if (r->src_line) CU_ASSERT_EQUAL(r->src_line[0], 13); /* after 12 header lines */
        char *t2 = to_text(r);
        CU_ASSERT_STRING_EQUAL(t1, t2);
        free(t2);
        sched_free(r);
    }
    free(t1);
}

/* Checks that s survives CSV write -> read in flavour fl (csv_same) and that writing the
 * result again gives the same bytes. */
static void check_csv_roundtrip(const sched *s, sched_csv_flavour fl) {
    char *c1 = to_csv(s, fl);
    if (!c1) return;
    pl_err e;
    pl_err_clear(&e);
    sched *r = sched_read_torch_csv("rt.csv", c1, strlen(c1), SCHED_LETTERS_CURRENT, &e);
    if (!r) fprintf(stderr, "\n  read back csv %s: %s\n", s->kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r) {
        if (!csv_same(s, r)) fprintf(stderr, "\n  csv round trip of %s differs\n", s->kind);
        CU_ASSERT(csv_same(s, r));
        CU_ASSERT_STRING_EQUAL(r->kind, "file");
        CU_ASSERT_EQUAL(r->iterations, 1);
        CU_ASSERT_EQUAL(r->weights, SCHED_WEIGHTS_FLUSH);
        char *c2 = to_csv(r, fl);
        if (c2) CU_ASSERT_STRING_EQUAL(c1, c2);
        free(c2);
        sched_free(r);
    }
    free(c1);
}

/* Reads text; expects failure whose message starts with want_pos ("t.sched:L:C:") and
 * contains want. */
static void expect_text_error(const char *text, const char *want_pos, const char *want) {
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_read_text("t.sched", text, strlen(text), &e);
    int ok = !s && e.code == PL_EINPUT && strncmp(e.msg, want_pos, strlen(want_pos)) == 0 &&
             strstr(e.msg, want);
    if (!ok)
        fprintf(stderr, "\n  text error: want '%s ... %s', got '%s'\n", want_pos, want,
                s ? "(no error)" : e.msg);
    CU_ASSERT(ok);
    sched_free(s);
}

/* Reads CSV text with letters; expects failure starting with want_pos and containing want. */
static void expect_csv_error(const char *text, sched_letters letters, const char *want_pos,
                             const char *want) {
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_read_torch_csv("t.csv", text, strlen(text), letters, &e);
    int ok = !s && e.code == PL_EINPUT && strncmp(e.msg, want_pos, strlen(want_pos)) == 0 &&
             strstr(e.msg, want);
    if (!ok)
        fprintf(stderr, "\n  csv error: want '%s ... %s', got '%s'\n", want_pos, want,
                s ? "(no error)" : e.msg);
    CU_ASSERT(ok);
    sched_free(s);
}

/* Returns the schedule read from CSV text (NULL with a failure on error). */
static sched *csv(const char *text, sched_letters letters) {
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_read_torch_csv("t.csv", text, strlen(text), letters, &e);
    if (!s) fprintf(stderr, "\n  csv: %s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL(s);
    return s;
}

/* Returns the contents of a file (malloc'd) or NULL. */
static char *slurp(const char *path, size_t *len) {
    char *d = NULL;
    pl_err e;
    if (pl_read_file(path, (size_t)64 << 20, &d, len, &e) != PL_OK) return NULL;
    return d;
}

/* Writes data to dir/name and returns the malloc'd path. */
static char *put_file(const char *dir, const char *name, const char *data, size_t len) {
    char *p = pl_test_path(dir, name);
    FILE *f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    if (len) CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
    return p;
}

/* A small generator set for round trips: name, ranks, microbatches, chunks. */
typedef struct gcase {
    const char *name;
    int p, m, v;
} gcase;

static const gcase gcases[] = {
    {"gpipe", 2, 3, 0},       {"gpipe", 4, 8, 0},      {"1f1b", 3, 4, 0},
    {"1f1b", 4, 2, 0},        {"pipedream", 3, 4, 0},  {"2bw", 2, 4, 0},
    {"interleaved", 2, 4, 2}, {"interleaved", 3, 6, 3}, {"looped-bfs", 2, 3, 2},
    {"zb-h1", 3, 4, 0},       {"zb-h2", 4, 8, 0},      {"zbv", 2, 4, 0},
    {"dualpipev", 4, 10, 0},  {NULL, 0, 0, 0},
};

/* ---------------------------------------------------------------- .sched */

/* A hand-built schedule using every feature of the format: explicit placement, policies,
 * overlap pairs, a rank without actions, multi-iteration microbatches. */
static sched *handmade(void) {
    int place[4] = {1, 0, 0, 1};
    pl_err e;
    sched *s = sched_new(3, 4, 2, SCHED_PLACE_EXPLICIT, place, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    snprintf(s->kind, sizeof s->kind, "hand-made");
    s->iterations = 2;
    s->chunks = 1;
    s->weights = SCHED_WEIGHTS_2BW;
    s->recompute = SCHED_RECOMPUTE_FULL;
    s->lowered = 1;
    CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_UNSHARD, 1, -1)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_F, 1, 0)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_SEND_F, 1, 0)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 0, sched_overlap(2, 3, SCHED_I, 1, 2)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_W, 2, 3)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_REDUCE_GRAD, 1, -1)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_STEP, 2, 3)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 1, sched_act(SCHED_RECV_B, 3, 1)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 1, sched_act(SCHED_B, 0, 0)), PL_OK);
    CU_ASSERT_EQUAL(sched_push(s, 1, sched_act(SCHED_RESHARD, 3, -1)), PL_OK);
    return s;
}

/* Generated schedules, compute-only and lowered, survive the .sched round trip exactly. */
static void test_text_roundtrip_generated(void) {
    for (const gcase *g = gcases; g->name; g++) {
        sched *s = gen(g->name, g->p, g->m, g->v);
        if (!s) continue;
        check_text_roundtrip(s);
        sched *l = lowered(s);
        if (l) check_text_roundtrip(l);
        sched_free(l);
        sched_free(s);
    }
}

/* A schedule using every feature of the format survives the round trip; ranks without
 * actions are written "rank R:". */
static void test_text_roundtrip_handmade(void) {
    sched *s = handmade();
    check_text_roundtrip(s);
    char *t = to_text(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nplacement explicit 1 0 0 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nrank 0: 1UNSHARD 1F0 1SEND_F0 (2F3;1I2)OVERLAP_F_B 2W3 "
                                     "1REDUCE_GRAD 2STEP3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nrank 2:\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nweights 2bw\nrecompute full\nlowered yes\n"));
    free(t);
    /* a kind name the format cannot hold is written with '_' for the odd characters */
    snprintf(s->kind, sizeof s->kind, "my \"kind\"");
    t = to_text(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nkind my__kind_\n"));
    free(t);
    s->kind[0] = '\0';
    t = to_text(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "\nkind custom\n"));
    free(t);
    sched_free(s);
}

static const char canonical[] =
    "# pipelab schedule\n"
    "pipelab-schedule 1\n"
    "kind 1f1b\n"
    "ranks 2\n"
    "stages 2\n"
    "microbatches 2\n"
    "iterations 1\n"
    "chunks 1\n"
    "placement loop\n"
    "weights flush\n"
    "recompute none\n"
    "lowered no\n"
    "rank 0: 0F0 0F1 0B0 0B1\n"
    "rank 1: 1F0 1B0 1F1 1B1\n";

/* Canonical text reads and writes back to the same bytes; the source lines are recorded. */
static void test_text_canonical(void) {
    pl_err e;
    sched *s = sched_read_text("c.sched", canonical, strlen(canonical), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->ranks, 2);
    CU_ASSERT_EQUAL(s->rank[1].n, 4);
    CU_ASSERT_STRING_EQUAL(s->src_path, "c.sched");
    CU_ASSERT_EQUAL(s->src_line[0], 13);
    CU_ASSERT_EQUAL(s->src_line[1], 14);
    char *t = to_text(s);
    CU_ASSERT_STRING_EQUAL(t, canonical);
    free(t);
    sched_free(s);
    /* read without a path: no source recorded */
    s = sched_read_text(NULL, canonical, strlen(canonical), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NULL(s->src_path);
    sched_free(s);
}

/* Comments, blank lines, CRLF, tabs, a byte order mark, extra blanks and keys in any order
 * are accepted and give the same schedule as the canonical text. */
static void test_text_tolerant(void) {
    static const char loose[] =
        "\xEF\xBB\xBF# a comment\r\n"
        "\r\n"
        "   # indented comment with UTF-8: \xC3\xA9\r\n"
        "pipelab-schedule\t1\r\n"
        "lowered no\r\n"
        "ranks   2\r\n"
        "kind 1f1b\r\n"
        "microbatches 2\r\n"
        "stages 2 \r\n"
        "iterations 1\r\n"
        "\tchunks 1\r\n"
        "placement loop\r\n"
        "recompute none\r\n"
        "weights flush\r\n"
        "# ranks follow\r\n"
        "rank 0:  0F0\t0F1 0B0 0B1  \r\n"
        "\r\n"
        "rank 1: 1F0 1B0 1F1 1B1";
    pl_err e;
    sched *a = sched_read_text("c.sched", canonical, strlen(canonical), &e);
    sched *b = sched_read_text("l.sched", loose, strlen(loose), &e);
    if (!b) fprintf(stderr, "\n  loose: %s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT(sched_equal(a, b));
    CU_ASSERT_EQUAL(b->src_line[0], 16);
    CU_ASSERT_EQUAL(b->src_line[1], 18);
    char *t = to_text(b);
    CU_ASSERT_STRING_EQUAL(t, canonical);
    free(t);
    sched_free(a);
    sched_free(b);
}

/* Returns canonical with the first occurrence of from replaced by to (static buffer). */
static const char *edit(const char *from, const char *to) {
    static char buf[4096];
    const char *at = strstr(canonical, from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    size_t pre = (size_t)(at - canonical);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)pre, canonical, to, at + strlen(from));
    return buf;
}

/* Every kind of bad .sched input gives PL_EINPUT with the right line:col and reason. */
static void test_text_errors(void) {
    expect_text_error("", "t.sched:", "empty file");
    expect_text_error("# only a comment\n\n", "t.sched:", "no schedule");
    expect_text_error(edit("pipelab-schedule 1", "pipelab-schedul 1"), "t.sched:2:1:",
                      "expected 'pipelab-schedule 1'");
    expect_text_error(edit("pipelab-schedule 1", "pipelab-schedule 2"), "t.sched:2:18:",
                      "unsupported format version '2'");
    expect_text_error(edit("pipelab-schedule 1", "pipelab-schedule"), "t.sched:2:17:",
                      "format version");
    expect_text_error(edit("pipelab-schedule 1", "pipelab-schedule 1 x"), "t.sched:2:20:",
                      "unexpected 'x'");
    expect_text_error(edit("kind 1f1b\n", "kind 1f1b\ncolour blue\n"), "t.sched:4:1:",
                      "unknown header key 'colour'");
    expect_text_error(edit("stages 2\n", "stages 2\nranks 3\n"), "t.sched:6:1:",
                      "duplicate header key 'ranks' (first given on line 4)");
    expect_text_error(edit("stages 2\n", ""), "t.sched:12:1:", "missing header key 'stages'");
    expect_text_error("pipelab-schedule 1\nranks 2\n", "t.sched:2:8:", "missing header key 'kind'");
    expect_text_error(edit("microbatches 2", "microbatches 99999999999999999999"), "t.sched:6:14:",
                      "microbatches 99999999999999999999 is out of range (1..16777216)");
    expect_text_error(edit("ranks 2", "ranks 0"), "t.sched:4:7:", "ranks 0 is out of range");
    expect_text_error(edit("ranks 2", "ranks -1"), "t.sched:4:7:", "'-1' is not a whole number");
    expect_text_error(edit("ranks 2", "ranks 2x"), "t.sched:4:7:", "'2x' is not a whole number");
    expect_text_error(edit("ranks 2", "ranks"), "t.sched:4:6:", "header key 'ranks' needs a value");
    expect_text_error(edit("ranks 2", "ranks 2 3"), "t.sched:4:9:", "unexpected '3'");
    expect_text_error(edit("chunks 1", "chunks 3"), "t.sched:8:8:", "chunks 3 is out of range (1..2)");
    expect_text_error(edit("chunks 1", "chunks 2"), "t.sched:8:8:",
                      "chunks 2 does not match stages 2 (line 5) and ranks 2 (line 4): chunks is the stages per "
                      "rank, stages / ranks = 1");
    expect_text_error("pipelab-schedule 1\nkind x\nranks 2\nstages 3\nmicrobatches 1\niterations 1\nchunks 2\n"
                      "placement explicit 0 1 1\nweights flush\nrecompute none\nlowered no\n"
                      "rank 0: 0F0 0B0\nrank 1: 1F0 2F0 2B0 1B0\n",
                      "t.sched:7:8:", "stages is not a multiple of ranks, so chunks must be 1");
    expect_text_error(edit("iterations 1", "iterations 9000000"), "t.sched:7:12:",
                      "exceeds the limit");
    expect_text_error(edit("placement loop", "placement zigzag"), "t.sched:9:11:",
                      "unknown placement 'zigzag'");
    expect_text_error(edit("placement loop", "placement loop 0 1"), "t.sched:9:16:",
                      "unexpected '0'");
    expect_text_error(edit("placement loop", "placement explicit 0"), "t.sched:9:21:",
                      "lists 1 rank, but there are 2 stages");
    expect_text_error(edit("placement loop", "placement explicit 0 1 0"), "t.sched:9:24:",
                      "more ranks than the 2 stages");
    expect_text_error(edit("placement loop", "placement explicit 0 2"), "t.sched:9:22:",
                      "rank of stage 1 2 is out of range (0..1)");
    expect_text_error(edit("weights flush", "weights sometimes"), "t.sched:10:9:",
                      "unknown weights 'sometimes' (expected flush, stash or 2bw)");
    expect_text_error(edit("recompute none", "recompute half"), "t.sched:11:11:",
                      "unknown recompute 'half'");
    expect_text_error(edit("lowered no", "lowered maybe"), "t.sched:12:9:", "unknown lowered 'maybe'");
    expect_text_error(edit("kind 1f1b", "kind abcdefghijklmnopqrstuvwxyz0123456789"), "t.sched:3:6:",
                      "longer than 31 characters");
    expect_text_error(edit("kind 1f1b", "kind 1f\x01" "1b"), "t.sched:3:8:", "unexpected byte 0x01");
    expect_text_error(edit("kind 1f1b", "kind 1f\"1b"), "t.sched:3:8:", "character '\"' is not allowed");
    expect_text_error(edit("rank 1: 1F0 1B0 1F1 1B1\n", ""), "t.sched:13:24:",
                      "missing the line 'rank 1:'");
    expect_text_error(edit("rank 1: 1F0 1B0 1F1 1B1\n", "rank 1: 1F0 1B0 1F1 1B1\nrank 2: 1F0\n"),
                      "t.sched:15:1:", "extra rank line: all 2 ranks already have their line");
    expect_text_error(edit("rank 1:", "rank 5:"), "t.sched:14:6:", "rank 5 is out of range (ranks 2)");
    expect_text_error(edit("rank 1:", "rank 99999999999999999999:"), "t.sched:14:6:",
                      "rank 99999999999999999999 is out of range (ranks 2)");
    expect_text_error(edit("rank 1:", "rank 0:"), "t.sched:14:6:",
                      "second line for rank 0 (the first is line 13)");
    expect_text_error(edit("rank 0:", "rank 1:"), "t.sched:13:6:", "expected the line 'rank 0:'");
    expect_text_error(edit("rank 0:", "rank 0"), "t.sched:13:7:", "expected ':' after 'rank 0'");
    expect_text_error(edit("rank 0:", "rank :"), "t.sched:13:6:", "expected a rank number");
    expect_text_error(edit("rank 0:", "rank0:"), "t.sched:13:1:", "expected 'rank <number>:'");
    expect_text_error(edit("rank 1: 1F0 1B0 1F1 1B1\n", "rank 1: 1F0 1B0 1F1 1B1\nranks 2\n"),
                      "t.sched:15:1:", "header key 'ranks' after the rank lines");
    expect_text_error(edit("rank 1: 1F0 1B0 1F1 1B1\n", "rank 1: 1F0 1B0 1F1 1B1\nhello\n"),
                      "t.sched:15:1:", "unexpected 'hello' after the rank lines");
    /* action errors: the column points into the action */
    expect_text_error(edit("0F1 0B0", "0F1 0X0"), "t.sched:13:18:", "cannot parse action '0X0': unknown action kind");
    expect_text_error(edit("0F1 0B0", "0F1 0FX0"), "t.sched:13:19:", "cannot parse action '0FX0': F needs a microbatch");
    expect_text_error(edit("1F1 1B1", "1F1 1B"), "t.sched:14:23:", "cannot parse action '1B': B needs a microbatch");
    expect_text_error(edit("0F1 0B0", "0F1 0F99999999999"), "t.sched:13:19:", "microbatch number is too large");
    expect_text_error(edit("0F1 0B0", "0F1 5F0"), "t.sched:13:17:",
                      "action '5F0': stage 5 is out of range (stages 2)");
    expect_text_error(edit("0F1 0B0", "0F1 0F2"), "t.sched:13:17:",
                      "action '0F2': microbatch 2 is out of range (microbatches 2 x iterations 1 = 2)");
    expect_text_error(edit("0F1 0B0", "0F1 1F0"), "t.sched:13:17:",
                      "belongs to stage 1, which the placement (loop) puts on rank 1");
    expect_text_error(edit("0F1 0B0", "0F1 (0F0;1B0)OVERLAP_F_B"), "t.sched:13:17:",
                      "belongs to stage 1");
    expect_text_error(edit("0F1 0B0", "0F1 0SEND_F0"), "t.sched:13:17:", "'lowered no'");
}

/* ---------------------------------------------------------------- CSV */

/* Generated schedules survive the CSV round trip: compute_only for compute-only ones, both
 * flavours for lowered ones (compute_only of a lowered schedule equals compute_only of the
 * compute actions). */
static void test_csv_roundtrip_generated(void) {
    for (const gcase *g = gcases; g->name; g++) {
        sched *s = gen(g->name, g->p, g->m, g->v);
        if (!s) continue;
        check_csv_roundtrip(s, SCHED_CSV_COMPUTE_ONLY);
        check_csv_roundtrip(s, SCHED_CSV_AUTO);
        sched *l = lowered(s);
        if (l) {
            check_csv_roundtrip(l, SCHED_CSV_COMPUTE_COMMS);
            check_csv_roundtrip(l, SCHED_CSV_AUTO);
            /* compute_only of the lowered form keeps exactly the compute actions */
            char *c = to_csv(l, SCHED_CSV_COMPUTE_ONLY);
            pl_err e;
            sched *r = c ? sched_read_torch_csv("c.csv", c, strlen(c), SCHED_LETTERS_CURRENT, &e) : NULL;
            CU_ASSERT_PTR_NOT_NULL(r);
            if (r) {
                CU_ASSERT_EQUAL(r->lowered, 0);
                for (int k = 0; k < r->ranks; k++)
                    for (size_t i = 0; i < r->rank[k].n; i++)
                        CU_ASSERT(sched_kind_is_compute((sched_kind)r->rank[k].acts[i].kind));
            }
            sched_free(r);
            free(c);
        }
        sched_free(l);
        sched_free(s);
    }
}

/* sched_csv_losses names a policy exactly when the CSV read-back changes it: every generator,
 * with 1 and 3 iterations and both recomputation policies, against what the read-back says. And
 * its words for 2bw's four default iterations of 4 microbatches, with recomputation. */
static void test_csv_losses(void) {
    for (const gcase *g = gcases; g->name; g++)
        for (int it = 1; it <= 3; it += 2)
            for (int rc = 0; rc < 2; rc++) {
                sched_gen_opts o = {.ranks = g->p, .microbatches = g->m, .chunks = g->v, .iterations = it,
                                    .recompute = (sched_recompute)rc};
                pl_err e;
                sched *s = sched_generate(g->name, &o, &e);
                CU_ASSERT_PTR_NOT_NULL_FATAL(s);
                char *c = to_csv(s, SCHED_CSV_COMPUTE_ONLY);
                sched *r = c ? sched_read_torch_csv("l.csv", c, strlen(c), SCHED_LETTERS_CURRENT, &e) : NULL;
                CU_ASSERT_PTR_NOT_NULL_FATAL(r);
                int changed = (sched_iterations(r) != sched_iterations(s)) + (r->weights != s->weights) +
                              (r->recompute != s->recompute);
                pl_buf b;
                pl_buf_init(&b);
                int n = sched_csv_losses(s, &b);
                if (n != changed) fprintf(stderr, "\n  %s it=%d rc=%d: losses %d (%s), read-back changed %d\n", g->name, it, rc, n,
                                          b.data ? b.data : "", changed);
                CU_ASSERT_EQUAL(n, changed);
                CU_ASSERT_EQUAL(n == 0, b.len == 0);
                pl_buf_free(&b);
                sched_free(r);
                free(c);
                sched_free(s);
            }
    sched_gen_opts o = {.ranks = 2, .microbatches = 4, .recompute = SCHED_RECOMPUTE_FULL};
    pl_err e;
    sched *s = sched_generate("2bw", &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(sched_csv_losses(s, &b), 3);
    CU_ASSERT_STRING_EQUAL(b.data, "its 4 iterations (it reads back as one iteration of 16 microbatches), 2bw weights (it "
                                   "reads back as flush), full recomputation (give --recompute full with the file)");
    pl_buf_free(&b);
    sched_free(s);
}

/* compute_comms needs a lowered schedule; AUTO follows s->lowered; ranks without cells are
 * written "," and read back as ranks without actions. */
static void test_csv_write_rules(void) {
    sched *s = gen("1f1b", 2, 2, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_buf b;
    pl_buf_init(&b);
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(sched_write_torch_csv(s, SCHED_CSV_COMPUTE_COMMS, &b, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "lowered"));
    pl_buf_free(&b);
    char *c = to_csv(s, SCHED_CSV_AUTO);
    CU_ASSERT_STRING_EQUAL(c, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
    free(c);
    sched_free(s);

    int place[3] = {0, 0, 0};
    s = sched_new(3, 3, 1, SCHED_PLACE_EXPLICIT, place, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int st = 0; st < 3; st++) CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_F, st, 0)), PL_OK);
    for (int st = 2; st >= 0; st--) CU_ASSERT_EQUAL(sched_push(s, 0, sched_act(SCHED_B, st, 0)), PL_OK);
    c = to_csv(s, SCHED_CSV_COMPUTE_ONLY);
    CU_ASSERT_STRING_EQUAL(c, "0F0,1F0,2F0,2B0,1B0,0B0\n,\n,\n");
    sched *r = csv(c, SCHED_LETTERS_CURRENT);
    if (r) {
        CU_ASSERT_EQUAL(r->ranks, 3);
        CU_ASSERT_EQUAL(r->rank[1].n, 0);
        CU_ASSERT_EQUAL(r->rank[2].n, 0);
        CU_ASSERT_EQUAL(r->placement, SCHED_PLACE_EXPLICIT);
        CU_ASSERT(csv_same(s, r));
    }
    sched_free(r);
    free(c);
    sched_free(s);
}

/* Reading: idle cells dropped, blanks trimmed, CRLF, quotes, a byte order mark and trailing
 * empty lines tolerated; shape and placement inferred. */
static void test_csv_read_inference(void) {
    sched *s = csv("\xEF\xBB\xBF 0F0 ,,0F1,\"0B0\", 0B1\r\n,1F0,1B0,1F1,1B1,,\r\n\r\n  \n\n", SCHED_LETTERS_CURRENT);
    if (s) {
        CU_ASSERT_EQUAL(s->ranks, 2);
        CU_ASSERT_EQUAL(s->stages, 2);
        CU_ASSERT_EQUAL(s->microbatches, 2);
        CU_ASSERT_EQUAL(s->iterations, 1);
        CU_ASSERT_EQUAL(s->chunks, 1);
        CU_ASSERT_EQUAL(s->placement, SCHED_PLACE_LOOP);
        CU_ASSERT_EQUAL(s->lowered, 0);
        CU_ASSERT_STRING_EQUAL(s->kind, "file");
        CU_ASSERT_EQUAL(s->rank[0].n, 4);
        CU_ASSERT_EQUAL(s->rank[1].n, 4);
        CU_ASSERT_EQUAL(s->src_line[1], 2);
        char *t = to_csv(s, SCHED_CSV_AUTO);
        CU_ASSERT_STRING_EQUAL(t, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
        free(t);
    }
    sched_free(s);
    /* V placement: 2 ranks, 4 stages, rank 0 holds 0 and 3 */
    s = csv("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n", SCHED_LETTERS_CURRENT);
    if (s) {
        CU_ASSERT_EQUAL(s->placement, SCHED_PLACE_V);
        CU_ASSERT_EQUAL(s->stages, 4);
        CU_ASSERT_EQUAL(s->chunks, 2);
        CU_ASSERT_EQUAL(s->stage_rank[2], 1);
    }
    sched_free(s);
    /* a trailing blank line is no row; a middle row of empty cells is a rank without actions */
    s = csv("0F0,0B0\n\n", SCHED_LETTERS_CURRENT);
    if (s) CU_ASSERT_EQUAL(s->ranks, 1);
    sched_free(s);
    s = csv("0F0,2F0,2B0,0B0\n,\n1F0\n", SCHED_LETTERS_CURRENT);
    if (s) {
        CU_ASSERT_EQUAL(s->ranks, 3);
        CU_ASSERT_EQUAL(s->rank[1].n, 0);
        CU_ASSERT_EQUAL(s->placement, SCHED_PLACE_EXPLICIT);
        CU_ASSERT_EQUAL(s->stage_rank[1], 2);
    }
    sched_free(s);
    /* lowered when any SEND/RECV appears; UNSHARD/RESHARD kept; overlap cells */
    s = csv("0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0,0RESHARD\n1RECV_F0,(1F0;1B0)OVERLAP_F_B,1SEND_B0\n", SCHED_LETTERS_CURRENT);
    if (s) {
        CU_ASSERT_EQUAL(s->lowered, 1);
        /* no STEP cell: PyTorch's optimizer step comes back after the last compute (and
         * its sends), one per stage of the rank */
        CU_ASSERT_EQUAL_FATAL(s->rank[0].n, 7);
        CU_ASSERT_EQUAL(s->rank[0].acts[0].kind, SCHED_UNSHARD);
        CU_ASSERT_EQUAL(s->rank[0].acts[5].kind, SCHED_STEP);
        CU_ASSERT_EQUAL(s->rank[0].acts[5].stage, 0);
        CU_ASSERT_EQUAL(s->rank[0].acts[6].kind, SCHED_RESHARD);
        CU_ASSERT_EQUAL_FATAL(s->rank[1].n, 4);
        CU_ASSERT_EQUAL(s->rank[1].acts[1].kind, SCHED_OVERLAP);
        CU_ASSERT_EQUAL(s->rank[1].acts[2].kind, SCHED_SEND_B);
        CU_ASSERT_EQUAL(s->rank[1].acts[3].kind, SCHED_STEP);
        CU_ASSERT_EQUAL(s->rank[1].acts[3].stage, 1);
        CU_ASSERT_EQUAL(s->microbatches, 1);
    }
    sched_free(s);
    /* legacy letters: B = input backward, BW = full backward */
    s = csv("0F0,0B0,0W0,0F1,0BW1\n", SCHED_LETTERS_LEGACY);
    if (s) {
        CU_ASSERT_EQUAL(s->rank[0].acts[1].kind, SCHED_I);
        CU_ASSERT_EQUAL(s->rank[0].acts[4].kind, SCHED_B);
        char *t = to_csv(s, SCHED_CSV_AUTO);
        CU_ASSERT_STRING_EQUAL(t, "0F0,0I0,0W0,0F1,0B1\n");
        free(t);
    }
    sched_free(s);
}

/* Bad CSV input gives PL_EINPUT with the right line:col and reason. */
static void test_csv_errors(void) {
    expect_csv_error("", SCHED_LETTERS_CURRENT, "t.csv:", "empty file");
    expect_csv_error("\n \n\r\n", SCHED_LETTERS_CURRENT, "t.csv:", "no rows");
    expect_csv_error(",,\n,\n", SCHED_LETTERS_CURRENT, "t.csv:", "no actions");
    expect_csv_error("0F0,0B0\n1F0,2FX0,1B0\n", SCHED_LETTERS_CURRENT, "t.csv:2:7:",
                     "cannot parse action '2FX0'");
    expect_csv_error("0F0, 0Q0\n", SCHED_LETTERS_CURRENT, "t.csv:1:7:", "cannot parse action '0Q0'");
    expect_csv_error("0F0,0F0x\n", SCHED_LETTERS_CURRENT, "t.csv:1:8:", "cannot parse action '0F0x'");
    expect_csv_error("0F0,0BW0\n", SCHED_LETTERS_CURRENT, "t.csv:1:6:", "legacy");
    expect_csv_error("0F0,0I0\n", SCHED_LETTERS_LEGACY, "t.csv:1:6:", "cannot parse action '0I0'");
    expect_csv_error("0F0,1F0,1B0,0B0\n1F0\n", SCHED_LETTERS_CURRENT, "t.csv:2:1:",
                     "stage 1 is on two ranks: row 1 (rank 0, line 1, column 5) and row 2 (rank 1)");
    expect_csv_error("0F0,(0F1;1B0)OVERLAP_F_B\n1F0\n", SCHED_LETTERS_CURRENT, "t.csv:2:1:",
                     "stage 1 is on two ranks");
    expect_csv_error("0F0\n2F0\n,\n3F0\n", SCHED_LETTERS_CURRENT, "t.csv:",
                     "stage 1 appears in no cell");
    /* a blank line before the last row is refused, not taken as an idle rank (io_csv.c) */
    expect_csv_error("0F0,0B0\n\n1F0,1B0\n", SCHED_LETTERS_CURRENT, "t.csv:2:1:",
                     "blank line before the last row");
    expect_csv_error("0F0,0B0\r\n \t\r\n1F0,1B0\r\n", SCHED_LETTERS_CURRENT, "t.csv:2:1:",
                     "rank without actions (rank 1)");
    expect_csv_error("\xEF\xBB\xBF\n0F0,0B0\n", SCHED_LETTERS_CURRENT, "t.csv:1:1:", "blank line before the last row");
    expect_csv_error("0F0,0F1\x7f\n", SCHED_LETTERS_CURRENT, "t.csv:1:8:", "unexpected byte 0x7f");
    expect_csv_error("0F0,2000000F0\n", SCHED_LETTERS_CURRENT, "t.csv:1:5:", "beyond the limit");
    expect_csv_error("0F0,0F20000000\n", SCHED_LETTERS_CURRENT, "t.csv:1:5:", "beyond the limit");
}

/* ---------------------------------------------------------------- golden files */

/* Compares text with the golden file name; on a mismatch says where they first differ. */
static void check_golden(const char *name, const char *text) {
    char *path = pl_test_path(GOLDEN_DIR, name);
    size_t len = 0;
    char *want = slurp(path, &len);
    if (!want) fprintf(stderr, "\n  golden file %s is missing\n", path);
    CU_ASSERT_PTR_NOT_NULL(want);
    if (want && text) {
        size_t i = 0, line = 1;
        while (want[i] && want[i] == text[i]) line += want[i++] == '\n';
        if (want[i] || text[i])
            fprintf(stderr, "\n  %s differs from the golden file at line %zu\n", name, line);
        CU_ASSERT_STRING_EQUAL(text, want);
    }
    /* the golden file also loads back to what it says */
    pl_err e;
    sched *s = sched_load(path, SCHED_LETTERS_CURRENT, &e);
    if (!s) fprintf(stderr, "\n  load %s: %s\n", path, e.msg);
    CU_ASSERT_PTR_NOT_NULL(s);
    if (s) CU_ASSERT_EQUAL(sched_validate(s, &e), PL_OK);
    sched_free(s);
    free(want);
    free(path);
}

/* Generating then writing gives the golden files byte for byte. */
static void test_golden(void) {
    sched *s = gen("gpipe", 2, 3, 0);
    if (s) {
        char *t = to_text(s);
        check_golden("gpipe_p2_m3.sched", t);
        free(t);
    }
    sched_free(s);
    s = gen("1f1b", 3, 4, 0);
    if (s) {
        char *t = to_text(s);
        check_golden("1f1b_p3_m4.sched", t);
        free(t);
        t = to_csv(s, SCHED_CSV_COMPUTE_ONLY);
        check_golden("1f1b_p3_m4.csv", t);
        free(t);
        sched *l = lowered(s);
        if (l) {
            t = to_text(l);
            check_golden("1f1b_p3_m4_lowered.sched", t);
            free(t);
        }
        sched_free(l);
    }
    sched_free(s);
    s = gen("zb-h1", 3, 4, 0);
    if (s) {
        sched *l = lowered(s);
        if (l) {
            char *t = to_csv(l, SCHED_CSV_COMPUTE_COMMS);
            check_golden("zb-h1_p3_m4_comms.csv", t);
            free(t);
        }
        sched_free(l);
    }
    sched_free(s);
    s = gen("interleaved", 2, 4, 2);
    if (s) {
        char *t = to_text(s);
        check_golden("interleaved_p2_m4_v2.sched", t);
        free(t);
    }
    sched_free(s);
}

/* ---------------------------------------------------------------- real PyTorch files */

/* Loads one file of the torch-schedules folder with the letters its name implies. */
static sched *load_torch(const char *name, pl_err *e) {
    char *path = pl_test_path(TORCH_DIR, name);
    sched *s = sched_load(path, strstr(name, "legacy") ? SCHED_LETTERS_LEGACY : SCHED_LETTERS_CURRENT, e);
    if (!s) fprintf(stderr, "\n  load %s: %s\n", name, e->msg);
    free(path);
    return s;
}

/* Every PyTorch/torchtitan CSV loads, validates, lowers and dry-runs without deadlock. */
static void test_torch_files(void) {
    DIR *d = opendir(TORCH_DIR);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct dirent *de;
    int files = 0;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 4 || strcmp(de->d_name + n - 4, ".csv") != 0) continue;
        files++;
        pl_err e;
        pl_err_clear(&e);
        sched *s = load_torch(de->d_name, &e);
        CU_ASSERT_PTR_NOT_NULL(s);
        if (!s) continue;
        int rc = sched_validate(s, &e);
        if (rc) fprintf(stderr, "\n  validate %s: %s\n", de->d_name, e.msg);
        CU_ASSERT_EQUAL(rc, PL_OK);
        sched *l = sched_lower(s, &e);
        if (!l) fprintf(stderr, "\n  lower %s: %s\n", de->d_name, e.msg);
        CU_ASSERT_PTR_NOT_NULL(l);
        if (l) {
            sched_dryrun_result r;
            rc = sched_dryrun(l, NULL, &r, &e);
            if (rc) fprintf(stderr, "\n  dry run %s: %s\n", de->d_name, e.msg);
            CU_ASSERT_EQUAL(rc, PL_OK);
            if (rc == PL_OK) {
                CU_ASSERT(r.steps > 0);
                sched_dryrun_free(&r, l->ranks);
            }
            /* the loaded file also survives the native format */
            check_text_roundtrip(l);
        }
        sched_free(l);
        sched_free(s);
    }
    closedir(d);
    CU_ASSERT(files >= 10);
}

/* Returns the malloc'd text with its empty cells (PyTorch's idle slots) dropped from every
 * line, as pipelab writes rows: the cells joined by commas, one line per row. */
static char *drop_empty_cells(const char *t) {
    char *o = malloc(strlen(t) + 2);
    size_t n = 0;
    int cells = 0; /* cells written on this line */
    for (const char *p = t; *p;) {
        const char *end = p + strcspn(p, ",\n");
        if (end > p) {
            if (cells++) o[n++] = ',';
            memcpy(o + n, p, (size_t)(end - p));
            n += (size_t)(end - p);
        }
        if (*end == '\n' || !*end) {
            o[n++] = '\n';
            cells = 0;
        }
        p = *end ? end + 1 : end;
    }
    o[n] = 0;
    return o;
}

/* The older letters are written as PyTorch wrote them: PyTorch's ZB1P schedule read from its
 * current-letter file and written with --to torch-csv-legacy gives the cells of PyTorch's own
 * legacy file (its idle slots aside), in both flavours; the legacy text reads back equal; an
 * overlapped pair has no legacy form. */
static void test_write_legacy_letters(void) {
    CU_ASSERT_FATAL(pl_test_exists(TORCH_DIR));
    const char *pairs[][2] = {{"pytorch_zb1p_2rank_2stagep_compute.csv", "pytorch_zb1p_2rank_2stagep_compute_legacy.csv"},
                              {"pytorch_zb1p_2rank_2stagep_comms.csv", "pytorch_zb1p_2rank_2stagep_comms_legacy.csv"}};
    for (int k = 0; k < 2; k++) {
        pl_err e;
        pl_err_clear(&e);
        sched *s = load_torch(pairs[k][0], &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        pl_buf b;
        pl_buf_init(&b);
        CU_ASSERT_EQUAL_FATAL(sched_write_torch_csv_letters(s, SCHED_CSV_AUTO, SCHED_LETTERS_LEGACY, &b, &e), PL_OK);
        char *path = pl_test_path(TORCH_DIR, pairs[k][1]);
        size_t len = 0;
        char *want = slurp(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(want);
        char *w = drop_empty_cells(want);
        if (strcmp(b.data, w) != 0) fprintf(stderr, "\n  legacy %s:\n%s\nwant\n%s\n", pairs[k][0], b.data, w);
        CU_ASSERT_STRING_EQUAL(b.data, w);
        sched *r = sched_read_torch_csv("l.csv", b.data, b.len, SCHED_LETTERS_LEGACY, &e);
        CU_ASSERT(r && csv_same(s, r));
        sched_free(r);
        free(w);
        free(want);
        free(path);
        pl_buf_free(&b);
        sched_free(s);
    }
    sched *o = csv("(0F1;0B0)OVERLAP_F_B\n", SCHED_LETTERS_CURRENT);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    pl_buf b;
    pl_buf_init(&b);
    pl_err e;
    CU_ASSERT_EQUAL(sched_write_torch_csv_letters(o, SCHED_CSV_AUTO, SCHED_LETTERS_LEGACY, &b, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "OVERLAP_F_B"));
    pl_buf_free(&b);
    sched_free(o);
}

/* What the loader infers from the real files. */
static void test_torch_inference(void) {
    CU_ASSERT_FATAL(pl_test_exists(TORCH_DIR));
    static const struct {
        const char *name;
        int ranks, stages, mbs, lowered;
        sched_placement pl;
    } want[] = {
        {"pytorch_zb1p_2rank_2stagep_compute.csv", 2, 4, 8, 0, SCHED_PLACE_LOOP},
        {"pytorch_zb1p_2rank_2stagep_comms.csv", 2, 4, 8, 1, SCHED_PLACE_LOOP},
        {"pytorch_dualpipev_4rank_10mb.csv", 4, 8, 10, 0, SCHED_PLACE_V},
        {"torchtitan_8rank.csv", 8, 8, 10, 0, SCHED_PLACE_LOOP},
        {"torchtitan_4rank.csv", 4, 8, 6, 0, SCHED_PLACE_LOOP},
        {"torchtitan_example.csv", 2, 4, 4, 1, SCHED_PLACE_LOOP},
        {"torchtitan_interleaved1f1b_8ranks_16mb_comms.csv", 8, 16, 16, 1, SCHED_PLACE_LOOP},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        pl_err e;
        sched *s = load_torch(want[i].name, &e);
        CU_ASSERT_PTR_NOT_NULL(s);
        if (!s) continue;
        CU_ASSERT_EQUAL(s->ranks, want[i].ranks);
        CU_ASSERT_EQUAL(s->stages, want[i].stages);
        CU_ASSERT_EQUAL(s->microbatches, want[i].mbs);
        CU_ASSERT_EQUAL(s->lowered, want[i].lowered);
        CU_ASSERT_EQUAL(s->placement, want[i].pl);
        CU_ASSERT_EQUAL(s->chunks, want[i].stages / want[i].ranks);
        CU_ASSERT_STRING_EQUAL(s->kind, "file");
        sched_free(s);
    }
    /* UNSHARD/RESHARD cells are kept */
    pl_err e;
    sched *s = load_torch("torchtitan_example.csv", &e);
    if (s) {
        CU_ASSERT_EQUAL(s->rank[0].acts[0].kind, SCHED_UNSHARD);
        CU_ASSERT_EQUAL(s->rank[0].acts[1].kind, SCHED_UNSHARD);
        CU_ASSERT_EQUAL(s->rank[0].acts[1].stage, 2);
    }
    sched_free(s);
}

/* The legacy-letter and current-letter zb1p files load to identical schedules. */
static void test_torch_legacy_equal(void) {
    CU_ASSERT_FATAL(pl_test_exists(TORCH_DIR));
    static const char *const pairs[][2] = {
        {"pytorch_zb1p_2rank_2stagep_compute.csv", "pytorch_zb1p_2rank_2stagep_compute_legacy.csv"},
        {"pytorch_zb1p_2rank_2stagep_comms.csv", "pytorch_zb1p_2rank_2stagep_comms_legacy.csv"},
    };
    for (size_t i = 0; i < 2; i++) {
        pl_err e;
        sched *a = load_torch(pairs[i][0], &e);
        sched *b = load_torch(pairs[i][1], &e);
        CU_ASSERT_PTR_NOT_NULL(a);
        CU_ASSERT_PTR_NOT_NULL(b);
        if (a && b) CU_ASSERT(sched_equal(a, b));
        /* and the legacy file read with the current letters is refused, not misread */
        char *path = pl_test_path(TORCH_DIR, pairs[i][1]);
        sched *c = sched_load(path, SCHED_LETTERS_CURRENT, &e);
        if (i == 1) {
            CU_ASSERT_PTR_NULL(c);
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "BW"));
        }
        sched_free(c);
        free(path);
        sched_free(a);
        sched_free(b);
    }
}

/* Returns the REDUCE_GRADs of stage q in s. */
static int64_t count_reduces(const sched *s, int q) {
    int64_t n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++)
            n += s->rank[r].acts[i].kind == SCHED_REDUCE_GRAD && s->rank[r].acts[i].stage == q;
    return n;
}

/* Returns compute-only s as the compute_only CSV that recent PyTorch writes (malloc'd): its
 * cells, and a REDUCE_GRAD cell after the backward (B, W, an overlap's B half) that is the
 * stage's last, as PyTorch's _add_reduce_grad puts it. */
static char *torch_csv_with_reduces(const sched *s) {
    pl_buf b;
    pl_buf_init(&b);
    int *seen = calloc((size_t)s->stages, sizeof *seen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(seen);
    char cell[96];
    for (int r = 0; r < s->ranks; r++) {
        for (size_t i = 0; i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            sched_action_format(a, cell, sizeof cell);
            pl_buf_puts(&b, i ? "," : "");
            pl_buf_puts(&b, cell);
            int st = a->kind == SCHED_OVERLAP && a->kind2 == SCHED_B ? a->stage2
                     : a->kind == SCHED_B || a->kind == SCHED_W     ? a->stage
                                                                     : -1;
            if (st >= 0 && ++seen[st] == s->microbatches) {
                snprintf(cell, sizeof cell, ",%dREDUCE_GRAD", st);
                pl_buf_puts(&b, cell);
            }
        }
        pl_buf_puts(&b, s->rank[r].n ? "\n" : ",\n");
    }
    free(seen);
    CU_ASSERT_FALSE(b.failed);
    return b.data;
}

/* The PyTorch files through lowering: each stage has exactly one REDUCE_GRAD after lowering a
 * compute_only file, with or without the REDUCE_GRAD cells recent PyTorch writes into it (the
 * same lowered schedule either way), and the lowered form keeps them one per stage through a
 * compute_comms round trip; a lowered file keeps its own. */
static void test_torch_reduce_grad(void) {
    DIR *d = opendir(TORCH_DIR);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct dirent *de;
    int compute_only = 0;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 4 || strcmp(de->d_name + n - 4, ".csv") != 0) continue;
        pl_err e;
        pl_err_clear(&e);
        sched *s = load_torch(de->d_name, &e);
        if (!s) continue;
        sched *l = lowered(s);
        for (int q = 0; l && q < s->stages; q++)
            CU_ASSERT_EQUAL(count_reduces(l, q), s->lowered ? count_reduces(s, q) : 1);
        if (s->lowered || !l) {
            sched_free(l);
            sched_free(s);
            continue;
        }
        compute_only++;
        char *text = torch_csv_with_reduces(s);
        sched *t = sched_read_torch_csv("rg.csv", text, strlen(text), SCHED_LETTERS_CURRENT, &e);
        if (!t) fprintf(stderr, "\n  %s with REDUCE_GRAD: %s\n", de->d_name, e.msg);
        CU_ASSERT_PTR_NOT_NULL(t);
        if (t) {
            CU_ASSERT_EQUAL(t->lowered, 0); /* neighbours across ranks and no SEND/RECV */
            for (int q = 0; q < t->stages; q++) CU_ASSERT_EQUAL(count_reduces(t, q), 1);
            sched *lt = lowered(t);
            if (lt) {
                if (!sched_equal(l, lt)) fprintf(stderr, "\n  %s with REDUCE_GRAD lowers differently\n", de->d_name);
                CU_ASSERT(sched_equal(l, lt));
                for (int q = 0; q < lt->stages; q++) CU_ASSERT_EQUAL(count_reduces(lt, q), 1);
                CU_ASSERT_EQUAL(sched_validate(lt, &e), PL_OK);
                /* through compute_comms and back, and lowering again: still one per stage */
                check_csv_roundtrip(lt, SCHED_CSV_COMPUTE_COMMS);
                char *c = to_csv(lt, SCHED_CSV_COMPUTE_COMMS);
                sched *r = c ? sched_read_torch_csv("rt.csv", c, strlen(c), SCHED_LETTERS_CURRENT, &e) : NULL;
                sched *lr = r ? lowered(r) : NULL;
                CU_ASSERT_PTR_NOT_NULL(lr);
                if (lr) {
                    CU_ASSERT_EQUAL(lr->lowered, 1);
                    CU_ASSERT(sched_equal(lr, lt));
                    for (int q = 0; q < lr->stages; q++) CU_ASSERT_EQUAL(count_reduces(lr, q), 1);
                }
                sched_free(lr);
                sched_free(r);
                free(c);
            }
            sched_free(lt);
        }
        sched_free(t);
        free(text);
        sched_free(l);
        sched_free(s);
    }
    closedir(d);
    CU_ASSERT(compute_only >= 6);
}

/* One rank: the lowered form has no SEND/RECV, so its compute_comms CSV is told from a
 * compute_only one by its REDUCE_GRAD cells, and reads back lowered, equal to what was written
 * (the STEPs put back where lowering puts them), valid, and lowering it again is a copy (one
 * REDUCE_GRAD, one STEP). Its compute_only CSV still reads back compute-only; with neighbour
 * stages across ranks a REDUCE_GRAD cell alone does not make a file lowered. */
static void test_csv_one_rank_comms(void) {
    static const char *const kinds[] = {"gpipe", "1f1b"};
    static const char *const want[] = {"0F0,0F1,0F2,0B0,0B1,0B2,0REDUCE_GRAD\n",
                                       "0F0,0B0,0F1,0B1,0F2,0B2,0REDUCE_GRAD\n"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        sched *s = gen(kinds[k], 1, 3, 0);
        if (!s) continue;
        sched *l = lowered(s);
        if (l) {
            CU_ASSERT_EQUAL(l->rank[0].acts[l->rank[0].n - 1].kind, SCHED_STEP);
            check_csv_roundtrip(l, SCHED_CSV_COMPUTE_COMMS);
            check_csv_roundtrip(l, SCHED_CSV_AUTO);
            char *c = to_csv(l, SCHED_CSV_COMPUTE_COMMS);
            if (c) CU_ASSERT_STRING_EQUAL(c, want[k]);
            pl_err e;
            pl_err_clear(&e);
            sched *r = c ? sched_read_torch_csv("p1.csv", c, strlen(c), SCHED_LETTERS_CURRENT, &e) : NULL;
            CU_ASSERT_PTR_NOT_NULL(r);
            if (r) {
                CU_ASSERT_EQUAL(r->lowered, 1);
                CU_ASSERT_EQUAL(r->rank[0].n, l->rank[0].n);
                CU_ASSERT(csv_same(l, r));
                CU_ASSERT_EQUAL(sched_validate(r, &e), PL_OK);
                sched *lr = lowered(r);
                if (lr) {
                    CU_ASSERT(sched_equal(lr, r));
                    CU_ASSERT_EQUAL(count_reduces(lr, 0), 1);
                }
                sched_free(lr);
            }
            sched_free(r);
            free(c);
        }
        check_csv_roundtrip(s, SCHED_CSV_COMPUTE_ONLY);
        sched_free(l);
        sched_free(s);
    }
    /* one rank, two stages: updates of both, a STEP each after the last of them */
    sched *r = csv("0F0,1F0,1B0,1REDUCE_GRAD,0B0,0REDUCE_GRAD\n", SCHED_LETTERS_CURRENT);
    if (r) {
        pl_err e;
        CU_ASSERT_EQUAL(r->lowered, 1);
        CU_ASSERT_EQUAL(r->rank[0].n, 8);
        CU_ASSERT_EQUAL(r->rank[0].acts[6].kind, SCHED_STEP);
        CU_ASSERT_EQUAL(r->rank[0].acts[7].kind, SCHED_STEP);
        CU_ASSERT_EQUAL(sched_validate(r, &e), PL_OK);
    }
    sched_free(r);
    r = csv("0F0,0F1,0B0,0B1,0REDUCE_GRAD\n1F0,1B0,1F1,1B1,1REDUCE_GRAD\n", SCHED_LETTERS_CURRENT);
    if (r) CU_ASSERT_EQUAL(r->lowered, 0);
    sched_free(r);
}

/* Files without idle cells, in the current letters, are written back byte for byte. */
static void test_torch_text_roundtrip(void) {
    CU_ASSERT_FATAL(pl_test_exists(TORCH_DIR));
    static const char *const names[] = {
        "pytorch_dualpipev_4rank_10mb.csv", "pytorch_zb1p_2rank_2stagep_comms.csv",
        "torchtitan_2rank.csv", "torchtitan_4rank.csv", "torchtitan_8rank.csv",
        "torchtitan_example.csv", "torchtitan_interleaved1f1b_8ranks_16mb_comms.csv",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *path = pl_test_path(TORCH_DIR, names[i]);
        size_t len;
        char *orig = slurp(path, &len);
        CU_ASSERT_PTR_NOT_NULL(orig);
        pl_err e;
        sched *s = load_torch(names[i], &e);
        if (orig && s) {
            char *c = to_csv(s, SCHED_CSV_AUTO);
            if (c && strcmp(c, orig) != 0) fprintf(stderr, "\n  %s is not written back as read\n", names[i]);
            if (c) CU_ASSERT_STRING_EQUAL(c, orig);
            free(c);
        }
        sched_free(s);
        free(orig);
        free(path);
    }
}

/* Returns the README's .sched example (malloc'd): the fenced block after the line that
 * introduces the native text format, so that this test follows the README. NULL when absent. */
static char *readme_sched_example(void) {
    size_t len = 0;
    char *readme = slurp(PIPELAB_TESTS_DIR "/../README.md", &len);
    if (!readme) return NULL;
    char *intro = strstr(readme, "**`.sched`**, the native text format");
    char *open = intro ? strstr(intro, "\n```\n") : NULL;
    char *body = open ? open + strlen("\n```\n") : NULL;
    char *close = body ? strstr(body, "\n```\n") : NULL;
    char *ex = NULL;
    if (close) {
        close[1] = '\0'; /* keep the block's last line end */
        ex = strdup(body);
    }
    free(readme);
    return ex;
}

/* The README's own .sched example reads, verbatim: '#' starts a comment anywhere on a line
 * (its header lines carry trailing comments), which gives the canonical schedule. A comment
 * right after a value or an action, and on a rank line, is dropped the same way. */
static void test_text_readme_example(void) {
    char *ex = readme_sched_example();
    CU_ASSERT_PTR_NOT_NULL_FATAL(ex);
    CU_ASSERT_PTR_NOT_NULL(strstr(ex, "placement loop          # loop"));
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_read_text("readme.sched", ex, strlen(ex), &e);
    if (!s) fprintf(stderr, "\n  README example: %s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    char *t = to_text(s);
    CU_ASSERT_STRING_EQUAL(t, canonical);
    free(t);
    sched_free(s);
    free(ex);
    static const char tight[] =
        "pipelab-schedule 1# version\nkind 1f1b#kind\nranks 2\nstages 2\nmicrobatches 2\niterations 1\n"
        "chunks 1\nplacement loop\nweights flush\nrecompute none\nlowered no # no\n"
        "rank 0: 0F0 0F1 0B0 0B1   # rank 0\nrank 1: 1F0 1B0 1F1 1B1#end\n";
    s = sched_read_text("tight.sched", tight, strlen(tight), &e);
    if (!s) fprintf(stderr, "\n  tight comments: %s\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    t = to_text(s);
    CU_ASSERT_STRING_EQUAL(t, canonical);
    free(t);
    sched_free(s);
    /* a comment does not stand in for a value */
    expect_text_error(edit("kind 1f1b", "kind # 1f1b"), "t.sched:3:6:", "header key 'kind' needs a value");
}

/* ---------------------------------------------------------------- sched_load */

/* sched_load dispatches on the extension and refuses empty, binary, missing and directory
 * paths with clear messages. */
static void test_load(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    pl_err e;
    char *p = put_file(dir, "a.sched", canonical, strlen(canonical));
    sched *s = sched_load(p, SCHED_LETTERS_CURRENT, &e);
    CU_ASSERT_PTR_NOT_NULL(s);
    if (s) CU_ASSERT_STRING_EQUAL(s->src_path, p);
    sched_free(s);
    remove(p);
    free(p);

    static const char csvtext[] = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";
    p = put_file(dir, "a.CSV", csvtext, strlen(csvtext));
    s = sched_load(p, SCHED_LETTERS_CURRENT, &e);
    CU_ASSERT_PTR_NOT_NULL(s);
    if (s) CU_ASSERT_STRING_EQUAL(s->kind, "file");
    sched_free(s);
    remove(p);
    free(p);

    /* a CSV under another name is read as .sched and refused for its magic */
    p = put_file(dir, "a.txt", csvtext, strlen(csvtext));
    s = sched_load(p, SCHED_LETTERS_CURRENT, &e);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "pipelab-schedule 1"));
    sched_free(s);
    remove(p);
    free(p);

    static const struct {
        const char *name;
        const char *data;
        size_t len;
        const char *want;
    } bad[] = {
        {"empty.sched", "", 0, "empty file"},
        {"empty.csv", "", 0, "empty file"},
        {"nul.sched", "pipelab-schedule 1\n\0\0\0\x01", 24, ":2:1: binary data"},
        {"nul.csv", "0F0,\0", 5, ":1:5: binary data"},
        {"latin1.csv", "0F0\n\xff\xfe", 6, ":2:1: binary data or invalid text (byte 0xff"},
        {"overlong.sched", "# \xc0\xaf", 4, "not valid UTF-8"},
        {"surrogate.sched", "# \xed\xa0\x80", 5, "not valid UTF-8"},
        {"cut.sched", "# \xe2\x82", 4, "not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = put_file(dir, bad[i].name, bad[i].data, bad[i].len);
        pl_err_clear(&e);
        s = sched_load(p, SCHED_LETTERS_CURRENT, &e);
        CU_ASSERT_PTR_NULL(s);
        CU_ASSERT_EQUAL(e.code, PL_EINPUT);
        if (!strstr(e.msg, bad[i].want) || !strstr(e.msg, bad[i].name))
            fprintf(stderr, "\n  load %s: want '%s', got '%s'\n", bad[i].name, bad[i].want, e.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i].want));
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i].name));
        sched_free(s);
        remove(p);
        free(p);
    }

    p = pl_test_path(dir, "absent.sched");
    s = sched_load(p, SCHED_LETTERS_CURRENT, &e);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(e.code, PL_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "absent.sched"));
    free(p);

    s = sched_load(dir, SCHED_LETTERS_CURRENT, &e);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is a directory"));
    remove(dir);
    free(dir);
}

void test_io_register(void) {
    static const pl_test_case cases[] = {
        {"text round trip of generated schedules", test_text_roundtrip_generated},
        {"text round trip of a hand-made schedule", test_text_roundtrip_handmade},
        {"canonical text writes back unchanged", test_text_canonical},
        {"text reader tolerates comments, CRLF, blanks", test_text_tolerant},
        {"text errors give line:col and reason", test_text_errors},
        {"the README's .sched example reads ('#' comments anywhere on a line)", test_text_readme_example},
        {"csv round trip of generated schedules", test_csv_roundtrip_generated},
        {"csv losses: the policies a CSV read-back changes", test_csv_losses},
        {"csv writing rules", test_csv_write_rules},
        {"csv reading infers the shape", test_csv_read_inference},
        {"csv errors give line:col and reason", test_csv_errors},
        {"golden files", test_golden},
        {"torch files load, validate, lower, dry-run", test_torch_files},
        {"writing the older PyTorch letters", test_write_legacy_letters},
        {"torch files: inferred shape", test_torch_inference},
        {"torch files: legacy letters load identically", test_torch_legacy_equal},
        {"torch files: csv written back byte for byte", test_torch_text_roundtrip},
        {"torch files: REDUCE_GRAD through lowering, one per stage", test_torch_reduce_grad},
        {"csv: one-rank compute_comms round trip", test_csv_one_rank_comms},
        {"sched_load dispatch and refusals", test_load},
        {NULL, NULL},
    };
    pl_test_suite("io", cases);
}
