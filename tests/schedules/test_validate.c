/* test_validate.c: the optimizer-step and gradient-reduction rules of validation (validate.c):
 * every generator's output, lowered or not, passes them; each bad STEP or REDUCE_GRAD placement
 * is refused naming the file, line and action. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"

/* Failures inside loops are counted and the first few printed, then asserted once. */
static int v_fail;
#define VFAIL(...)                                                                              \
    do {                                                                                        \
        if (v_fail++ < 12) {                                                                    \
            fprintf(stderr, "\n  test_validate: ");                                             \
            fprintf(stderr, __VA_ARGS__);                                                       \
        }                                                                                       \
    } while (0)

/* Every generator the IR has. */
static const char *const KINDS[] = {"gpipe",       "1f1b",       "pipedream", "2bw",   "interleaved",
                                    "looped-bfs", "zb-h1",      "zb-h2",     "zbv",   "dualpipev"};
#define NKINDS ((int)(sizeof KINDS / sizeof KINDS[0]))

/* Returns the STEPs of s. */
static int64_t count_steps(const sched *s) {
    int64_t n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) n += s->rank[r].acts[i].kind == SCHED_STEP;
    return n;
}

/* Returns s written as .sched text and read back from "what.sched" (so that messages name a
 * file and line), NULL with a failure noted. */
static sched *via_text(const sched *s, const char *what) {
    pl_buf b;
    pl_buf_init(&b);
    pl_err e;
    pl_err_clear(&e);
    sched *r = NULL;
    if (sched_write_text(s, &b) == PL_OK) r = sched_read_text("g.sched", b.data, b.len, &e);
    if (!r) VFAIL("%s: .sched round trip: %s", what, e.msg);
    pl_buf_free(&b);
    return r;
}

/* Returns s written as PyTorch compute_comms CSV and read back, NULL with a failure noted. */
static sched *via_csv(const sched *s, const char *what) {
    pl_buf b;
    pl_buf_init(&b);
    pl_err e;
    pl_err_clear(&e);
    sched *r = NULL;
    if (sched_write_torch_csv(s, SCHED_CSV_COMPUTE_COMMS, &b, &e) == PL_OK)
        r = sched_read_torch_csv("g.csv", b.data, b.len, SCHED_LETTERS_CURRENT, &e);
    if (!r) VFAIL("%s: CSV round trip: %s", what, e.msg);
    pl_buf_free(&b);
    return r;
}

/* Validates s (named what in failures); returns 1 when it passes. */
static int valid(const sched *s, const char *what) {
    pl_err e;
    pl_err_clear(&e);
    if (s && sched_validate(s, &e) == PL_OK) return 1;
    if (s) VFAIL("%s: %s", what, e.msg);
    return 0;
}

/* Checks one generated schedule: it validates; its lowered form validates with one STEP per
 * stage and iteration (per stage and microbatch for stash), and so does that form read back
 * from .sched text and from PyTorch CSV (which has no STEP: reading puts back a flush
 * schedule's, one per stage). */
static void check_generated(const sched *s, const char *what) {
    pl_err e;
    pl_err_clear(&e);
    if (!valid(s, what)) return;
    sched *l = sched_lower(s, &e);
    if (!l) {
        VFAIL("%s: lower: %s", what, e.msg);
        return;
    }
    int64_t per_stage = s->weights == SCHED_WEIGHTS_STASH ? sched_total_microbatches(s) : sched_iterations(s);
    if (count_steps(l) != per_stage * s->stages)
        VFAIL("%s: %lld STEPs, want %lld", what, (long long)count_steps(l), (long long)(per_stage * s->stages));
    valid(l, what);
    sched *t = via_text(l, what), *c = via_csv(l, what);
    valid(t, what);
    valid(c, what);
    /* it reads back lowered: one rank has no SEND/RECV cell, but its REDUCE_GRADs tell */
    if (c && !c->lowered) VFAIL("%s: CSV read back compute-only", what);
    if (c && count_steps(c) != c->stages) VFAIL("%s: CSV read back %lld STEPs", what, (long long)count_steps(c));
    sched_free(c);
    sched_free(t);
    sched_free(l);
}

/* Every kind over ranks 1..4, microbatches 1..8, chunks (for the kinds that take them) 2 and 3,
 * iterations default, 1 and 3, recomputation none and full: what the generator serves passes,
 * compute-only and lowered, and every kind serves some. */
static void test_every_kind_validates(void) {
    static const int ps[] = {1, 2, 3, 4}, ms[] = {1, 2, 3, 4, 5, 8}, vs[] = {0, 2, 3}, its[] = {0, 1, 3};
    v_fail = 0;
    for (int k = 0; k < NKINDS; k++) {
        int served = 0, chunks = !strcmp(KINDS[k], "interleaved") || !strcmp(KINDS[k], "looped-bfs");
        for (size_t pi = 0; pi < sizeof ps / sizeof *ps; pi++)
            for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
                for (size_t vi = 0; vi < (chunks ? sizeof vs / sizeof *vs : 1); vi++)
                    for (size_t ii = 0; ii < sizeof its / sizeof *its; ii++)
                        for (int rc = 0; rc < 2; rc++) {
                            sched_gen_opts o = {.ranks = ps[pi], .microbatches = ms[mi], .chunks = vs[vi],
                                                .iterations = its[ii],
                                                .recompute = rc ? SCHED_RECOMPUTE_FULL : SCHED_RECOMPUTE_NONE};
                            pl_err e;
                            pl_err_clear(&e);
                            sched *s = sched_generate(KINDS[k], &o, &e);
                            if (!s) continue; /* refusals are test_gen's and test_zb's business */
                            char what[128];
                            snprintf(what, sizeof what, "%s p=%d m=%d v=%d it=%d rc=%d", KINDS[k], ps[pi], ms[mi],
                                     vs[vi], its[ii], rc);
                            check_generated(s, what);
                            sched_free(s);
                            served++;
                        }
        if (!served) VFAIL("%s: no grid point served", KINDS[k]);
    }
    CU_ASSERT_EQUAL(v_fail, 0);
}

/* 1f1b, pipedream and 2bw with replicated stages (PipeDream's 1F1B-RR, the replicas' lists
 * interleaved on the stage's rank) pass as well. */
static void test_replicated_validate(void) {
    static const char *const kinds[] = {"1f1b", "pipedream", "2bw"};
    static const struct { int p; int rep[4]; } reps[] = {{2, {2, 1}}, {2, {1, 3}}, {3, {2, 2, 1}}, {3, {1, 1, 4}},
                                                         {4, {3, 1, 2, 1}}};
    static const int ms[] = {2, 4, 6}, its[] = {0, 2};
    v_fail = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (size_t ri = 0; ri < sizeof reps / sizeof *reps; ri++)
            for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
                for (size_t ii = 0; ii < sizeof its / sizeof *its; ii++) {
                    sched_gen_opts o = {.ranks = reps[ri].p, .microbatches = ms[mi], .iterations = its[ii]};
                    pl_err e;
                    pl_err_clear(&e);
                    sched *s = sched_gen_replicated(kinds[k], &o, reps[ri].rep, NULL, &e);
                    char what[128];
                    snprintf(what, sizeof what, "%s replicated p=%d (%d,%d,...) m=%d it=%d", kinds[k], reps[ri].p,
                             reps[ri].rep[0], reps[ri].rep[1], ms[mi], its[ii]);
                    if (!s) VFAIL("%s: %s", what, e.msg);
                    else check_generated(s, what);
                    sched_free(s);
                }
    CU_ASSERT_EQUAL(v_fail, 0);
}

/* A replicated stage reduces its gradients once per update (sched_check_replica_reduces): every
 * replicated generator's lowered schedule passes; the PyTorch CSV read-back of a 2-iteration
 * 1f1b schedule (one REDUCE_GRAD per iteration, one STEP) passes without replicas, and is
 * refused with either stage on 2: with stage 0's at its second REDUCE_GRAD, naming the first. */
static void test_replica_reduces(void) {
    static const char *const kinds[] = {"1f1b", "pipedream", "2bw"};
    int rep[2] = {2, 1};
    pl_err e;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        sched_gen_opts o = {.ranks = 2, .microbatches = 4, .iterations = 2};
        pl_err_clear(&e);
        sched *g = sched_gen_replicated(kinds[k], &o, rep, NULL, &e);
        sched *l = g ? sched_lower(g, &e) : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(l);
        CU_ASSERT_EQUAL(sched_check_replica_reduces(l, rep, &e), PL_OK);
        sched_free(l);
        sched_free(g);
    }
    sched_gen_opts o = {.ranks = 2, .microbatches = 2, .iterations = 2};
    sched *g = sched_generate("1f1b", &o, &e);
    sched *l = g ? sched_lower(g, &e) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL_FATAL(sched_write_torch_csv(l, SCHED_CSV_COMPUTE_COMMS, &b, &e), PL_OK);
    sched *c = sched_read_torch_csv("t.csv", b.data, b.len, SCHED_LETTERS_CURRENT, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    size_t at[2] = {0, 0}, n = 0; /* rank 0's first two REDUCE_GRADs */
    for (size_t i = 0; i < c->rank[0].n && n < 2; i++)
        if (c->rank[0].acts[i].kind == SCHED_REDUCE_GRAD) at[n++] = i;
    CU_ASSERT_EQUAL_FATAL(n, 2);
    int one[2] = {1, 1}, second[2] = {1, 2};
    CU_ASSERT_EQUAL(sched_check_replica_reduces(c, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(sched_check_replica_reduces(c, one, &e), PL_OK);
    CU_ASSERT_EQUAL(sched_check_replica_reduces(c, second, &e), PL_EINPUT); /* rank 1's stage: its own REDUCE_GRADs */
    CU_ASSERT_EQUAL(sched_check_replica_reduces(c, rep, &e), PL_EINPUT);
    char want[256];
    snprintf(want, sizeof want,
             "t.csv:1: rank 0, action %zu (0REDUCE_GRAD): stage 0 has 2 replicas and reduced its gradients at action %zu "
             "already, with no STEP between",
             at[1] + 1, at[0] + 1);
    if (strncmp(e.msg, want, strlen(want)) != 0) fprintf(stderr, "\nwant %s\ngot  %s\n", want, e.msg);
    CU_ASSERT_EQUAL(strncmp(e.msg, want, strlen(want)), 0);
    pl_buf_free(&b);
    sched_free(c);
    sched_free(l);
    sched_free(g);
}

/* ---------------------------------------------------------------- bad placements */

/* How a case edits the actions of one rank line. */
enum { OP_MOVE, OP_DROP, OP_DUP, OP_APPEND, OP_REPLACE, OP_INSERT };

/* A generated schedule with one rank's list edited, and the error it must give. */
typedef struct bad_case {
    const char *kind;
    int p, m, v, iters, lowered;
    int rank, op;
    const char *tok; /* the action edited: the first one so spelled */
    const char *at;  /* OP_MOVE: moved before the first action so spelled; OP_REPLACE: the new text;
                      * OP_INSERT: tok (a new action) goes before the first action so spelled */
    const char *where; /* the message's start: "file:line: rank R, action K (text): "; NULL: valid */
    const char *why;   /* a piece of its reason */
} bad_case;

/* Returns the index of the first token equal to t among n, or n. */
static size_t find_tok(char **tk, size_t n, const char *t) {
    size_t i = 0;
    while (i < n && strcmp(tk[i], t) != 0) i++;
    return i;
}

/* Rewrites line (a "rank R: ..." line, NUL-terminated, in a buffer of cap bytes) by c's edit.
 * Returns 0, or -1 when an action named by c is not on the line. */
static int edit_line(char *line, size_t cap, const bad_case *c) {
    char *tk[1024], *save = NULL, copy[8192];
    size_t n = 0;
    snprintf(copy, sizeof copy, "%s", line);
    char *head = strtok_r(copy, " ", &save), *num = strtok_r(NULL, " ", &save);
    for (char *t = strtok_r(NULL, " ", &save); t && n < 1023; t = strtok_r(NULL, " ", &save)) tk[n++] = t;
    int added = c->op == OP_APPEND || c->op == OP_INSERT; /* tok is a new action */
    size_t i = find_tok(tk, n, c->tok);
    if (!added && i == n) return -1;
    char *moved = added ? (char *)c->tok : tk[i];
    switch (c->op) {
    case OP_DROP:
    case OP_MOVE: memmove(tk + i, tk + i + 1, (n - i - 1) * sizeof *tk), n--; break;
    case OP_DUP: memmove(tk + i + 1, tk + i, (n - i) * sizeof *tk), n++; break;
    case OP_APPEND: tk[n++] = (char *)c->tok; break;
    case OP_REPLACE: tk[i] = (char *)c->at; break;
    case OP_INSERT: break;
    default: return -1;
    }
    if (c->op == OP_MOVE || c->op == OP_INSERT) {
        size_t j = find_tok(tk, n, c->at);
        if (j == n) return -1;
        memmove(tk + j + 1, tk + j, (n - j) * sizeof *tk);
        tk[j] = moved;
        n++;
    }
    size_t len = (size_t)snprintf(line, cap, "%s %s", head, num);
    for (size_t k = 0; k < n && len < cap; k++) len += (size_t)snprintf(line + len, cap - len, " %s", tk[k]);
    return len < cap ? 0 : -1;
}

/* Returns the .sched text of case c's schedule with its edit made (malloc'd), NULL with a
 * failure on error. The header is 12 lines, so rank R is line 13 + R. */
static char *bad_text(const bad_case *c) {
    sched_gen_opts o = {.ranks = c->p, .microbatches = c->m, .chunks = c->v, .iterations = c->iters};
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_generate(c->kind, &o, &e), *l = s && c->lowered ? sched_lower(s, &e) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(sched_write_text(l ? l : s, &b), PL_OK);
    sched_free(l);
    sched_free(s);
    char key[32], *out = malloc(b.len + 256);
    snprintf(key, sizeof key, "\nrank %d:", c->rank);
    char *at = b.data ? strstr(b.data, key) : NULL;
    int ok = at && out;
    if (ok) {
        char line[8192];
        char *end = strchr(at + 1, '\n');
        snprintf(line, sizeof line, "%.*s", (int)(end - at - 1), at + 1);
        ok = edit_line(line, sizeof line, c) == 0;
        if (ok) sprintf(out, "%.*s%s%s", (int)(at + 1 - b.data), b.data, line, end);
    }
    if (!ok) fprintf(stderr, "\n  cannot edit %s rank %d at '%s'\n", c->kind, c->rank, c->tok);
    CU_ASSERT(ok);
    pl_buf_free(&b);
    if (!ok) {
        free(out);
        return NULL;
    }
    return out;
}

/* Reads case c's edited text as "t.sched" and checks the verdict of validation. */
static void check_bad(const bad_case *c) {
    char *text = bad_text(c);
    if (!text) return;
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_read_text("t.sched", text, strlen(text), &e);
    if (!s) fprintf(stderr, "\n  %s: read: %s\n", c->kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    int rc = sched_validate(s, &e);
    int ok = c->where ? rc == PL_EINPUT && strncmp(e.msg, c->where, strlen(c->where)) == 0 && strstr(e.msg, c->why)
                      : rc == PL_OK;
    if (!ok)
        fprintf(stderr, "\n  %s rank %d '%s': want '%s...%s', got '%s'\n", c->kind, c->rank, c->tok,
                c->where ? c->where : "(valid)", c->why ? c->why : "", rc == PL_OK ? "(valid)" : e.msg);
    CU_ASSERT(ok);
    /* sched_check_actions (validation without the dry run) gives the same verdict */
    CU_ASSERT_EQUAL(sched_check_actions(s, &e), rc);
    sched_free(s);
    free(text);
}

/* Each misplaced, missing or doubled STEP of every weight policy is refused with the file, the
 * rank's line, the action (its position and text) and the reason; a STEP moved earlier but
 * still after its own stage's backwards (another stage of the rank still computing) passes. */
static void test_bad_steps_refused(void) {
    static const bad_case cases[] = {
        /* flush (the audit's case): early, missing, doubled, before REDUCE_GRAD; rank 0:
         * 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE_GRAD 0STEP */
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_MOVE, "0STEP", "0F1", "t.sched:13: rank 0, action 3 (0STEP): ",
         "STEP of stage 0 for iteration 0 comes before 2 of the stage's 2 backwards"},
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_DROP, "0STEP", NULL, "t.sched:13: rank 0, action 8 (0B1): ",
         "no STEP of stage 0 for iteration 0 follows this"},
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_DUP, "0STEP", NULL, "t.sched:13: rank 0, action 11 (0STEP): ",
         "second STEP of stage 0 for iteration 0 (the first is action 10"},
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_MOVE, "0STEP", "0REDUCE_GRAD", "t.sched:13: rank 0, action 9 (0STEP): ",
         "before the REDUCE_GRAD of the gradient of its backward at action 8 (0B1)"},
        {"1f1b", 2, 2, 0, 0, 1, 1, OP_MOVE, "1STEP", "1F1", "t.sched:14: rank 1, action 6 (1STEP): ",
         "comes before 1 of the stage's 2 backwards"},
        /* a compute-only schedule: lowering adds the STEPs, so one written there would double */
        {"1f1b", 2, 2, 0, 0, 0, 0, OP_APPEND, "0STEP", NULL, "t.sched:13: rank 0, action 5 (0STEP): ",
         "STEP in a schedule marked compute-only"},
        /* compute-only over 2 iterations: the next iteration's forward before the rank's last
         * compute of this one, after which lowering puts the flush STEP (0F0 0F1 0B0 0F2 0B1) */
        {"gpipe", 2, 2, 0, 2, 0, 0, OP_MOVE, "0F2", "0B1", "t.sched:13: rank 0, action 4 (0F2): ",
         "forward of stage 0 microbatch 2 (iteration 1) comes before the stage's STEP for iteration 0"},
        /* flush over 2 iterations: the next iteration's forward needs the STEP first */
        {"gpipe", 2, 2, 0, 2, 1, 0, OP_MOVE, "0STEP", "0SEND_F2", "t.sched:13: rank 0, action 10 (0F2): ",
         "forward of stage 0 microbatch 2 (iteration 1) comes before the stage's STEP for iteration 0"},
        {"gpipe", 2, 2, 0, 2, 1, 0, OP_DROP, "0STEP", NULL, "t.sched:13: rank 0, action 10 (0F2): ",
         "forward of stage 0 microbatch 2 (iteration 1)"},
        {"gpipe", 2, 2, 0, 2, 1, 0, OP_DUP, "0STEP", NULL, "t.sched:13: rank 0, action 11 (0STEP): ",
         "second STEP of stage 0 for iteration 0"},
        /* split backward: the STEP waits for the W */
        {"zb-h1", 2, 2, 0, 0, 1, 0, OP_MOVE, "0STEP", "0W1", "t.sched:13: rank 0, action 10 (0STEP): ",
         "comes before 1 of the stage's 2 backwards of that iteration (B, or W where the backward is split)"},
        /* two stages per rank: each stage's STEP follows its own backwards */
        {"interleaved", 2, 2, 2, 0, 1, 0, OP_MOVE, "2STEP", "0RECV_B0", NULL, NULL},
        {"interleaved", 2, 2, 2, 0, 1, 0, OP_MOVE, "0STEP", "0RECV_B1", "t.sched:13: rank 0, action 20 (0STEP): ",
         "STEP of stage 0 for iteration 0 comes before 1 of the stage's 2 backwards"},
        /* an overlapped pair's B half is a backward of its stage */
        {"dualpipev", 2, 4, 0, 0, 1, 0, OP_MOVE, "3STEP", "0RECV_B1", "t.sched:13: rank 0, action 23 (3STEP): ",
         "STEP of stage 3 for iteration 0 comes before 1 of the stage's 4 backwards"},
        /* 2bw over 2 iterations: forwards of the next iteration may pass the STEP, backwards not */
        {"2bw", 2, 2, 0, 2, 1, 1, OP_MOVE, "1STEP", "1SEND_B2", "t.sched:14: rank 1, action 12 (1B2): ",
         "backward of stage 1 microbatch 2 (iteration 1) comes before the stage's STEP for iteration 0; 2BW"},
        {"2bw", 2, 2, 0, 2, 1, 0, OP_MOVE, "0STEP", "0F2", "t.sched:13: rank 0, action 7 (0STEP): ",
         "comes before 1 of the stage's 2 backwards"},
        {"2bw", 2, 2, 0, 2, 1, 1, OP_DUP, "1STEP", NULL, "t.sched:14: rank 1, action 11 (1STEP): ",
         "second STEP of stage 1 for iteration 0"},
        /* stash: a STEP right after each backward, naming it; rank 1 is 1RECV_F0 1F0 1RECV_F1
         * 1B0 1SEND_B0 1REDUCE_GRAD0 1STEP0 1F1 1B1 1SEND_B1 1REDUCE_GRAD1 1STEP1 1RECV_F2 1F2 1B2 ... */
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_DROP, "1STEP1", NULL, "t.sched:14: rank 1, action 14 (1B2): ",
         "comes before the STEP of the stage's previous backward (action 9, 1B1)"},
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_REPLACE, "1STEP1", "1STEP0", "t.sched:14: rank 1, action 12 (1STEP0): ",
         "names microbatch 0, but the backward it follows is microbatch 1 (action 9)"},
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_DUP, "1STEP0", NULL, "t.sched:14: rank 1, action 8 (1STEP0): ",
         "second STEP of stage 1 after its backward of microbatch 0 (the first is action 7)"},
        {"pipedream", 2, 2, 0, 2, 1, 0, OP_MOVE, "0STEP0", "0F0", "t.sched:13: rank 0, action 1 (0STEP0): ",
         "STEP of stage 0 comes before any backward of the stage"},
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_DROP, "1STEP3", NULL, "t.sched:14: rank 1, action 21 (1B3): ",
         "no STEP of stage 1 follows this backward of microbatch 3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_bad(&cases[i]);
}

/* Each doubled, empty or misnamed REDUCE_GRAD of a lowered file, and a STEP naming a microbatch
 * where it applies a whole iteration, is refused with the file, the rank's line, the action and
 * the reason; a REDUCE_GRAD between two backwards of one iteration (several per weight version,
 * as a multi-iteration CSV reads back) passes. */
static void test_bad_reduces_refused(void) {
    static const bad_case cases[] = {
        /* flush: rank 0 is 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE_GRAD 0STEP */
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_DUP, "0REDUCE_GRAD", NULL, "t.sched:13: rank 0, action 10 (0REDUCE_GRAD): ",
         "second REDUCE_GRAD of stage 0 for iteration 0 (the first is action 9, and no backward of the stage comes "
         "between); each REDUCE_GRAD of a stage reduces the gradients of the stage's backwards since its previous one"},
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_APPEND, "0REDUCE_GRAD", NULL, "t.sched:13: rank 0, action 11 (0REDUCE_GRAD): ",
         "second REDUCE_GRAD of stage 0 for iteration 0 (the first is action 9"},
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_INSERT, "0REDUCE_GRAD", "0F0", "t.sched:13: rank 0, action 1 (0REDUCE_GRAD): ",
         "REDUCE_GRAD of stage 0 comes before any backward of the stage, so it has no gradient to reduce"},
        /* one before the last backward and none after it: the STEP would apply an unreduced
         * gradient (rank 1: 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1REDUCE_GRAD 1STEP) */
        {"1f1b", 2, 2, 0, 0, 1, 1, OP_MOVE, "1REDUCE_GRAD", "1F1", "t.sched:14: rank 1, action 10 (1STEP): ",
         "STEP of stage 1 comes before the REDUCE_GRAD of the gradient of its backward at action 8 (1B1)"},
        /* one more between the two backwards: two per iteration, as a CSV read-back has */
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_INSERT, "0REDUCE_GRAD", "0RECV_B1", NULL, NULL},
        /* a REDUCE_GRAD naming a microbatch in a flush schedule: run by one replica, so every
         * backward needs its own */
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_REPLACE, "0REDUCE_GRAD", "0REDUCE_GRAD1", "t.sched:13: rank 0, action 8 (0B1): ",
         "backward of stage 0 microbatch 1 comes before the REDUCE_GRAD of the stage's previous backward (action 6, "
         "0B0); a stage whose REDUCE_GRADs name microbatches"},
        {"1f1b", 2, 2, 0, 0, 1, 0, OP_REPLACE, "0STEP", "0STEP1", "t.sched:13: rank 0, action 10 (0STEP1): ",
         "STEP of stage 0 names microbatch 1, but a STEP that applies the stage's gradients of a whole iteration "
         "names none"},
        /* 2bw over 2 iterations: one per iteration, the second iteration's after its backwards */
        {"2bw", 2, 2, 0, 2, 1, 1, OP_DUP, "1REDUCE_GRAD", NULL, "t.sched:14: rank 1, action 10 (1REDUCE_GRAD): ",
         "second REDUCE_GRAD of stage 1 for iteration 0 (the first is action 9"},
        {"2bw", 2, 2, 0, 2, 1, 1, OP_REPLACE, "1STEP", "1STEP0", "t.sched:14: rank 1, action 10 (1STEP0): ",
         "STEP of stage 1 names microbatch 0, but"},
        /* split backward: the REDUCE_GRAD after the last W; zb-h1 rank 1 ends 1W0 1W1 1REDUCE_GRAD 1STEP */
        {"zb-h1", 2, 2, 0, 0, 1, 1, OP_DUP, "1REDUCE_GRAD", NULL, "t.sched:14: rank 1, action ",
         "second REDUCE_GRAD of stage 1 for iteration 0"},
        /* stash: rank 1 is 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1REDUCE_GRAD0 1STEP0 1F1 1B1 1SEND_B1
         * 1REDUCE_GRAD1 1STEP1 ... */
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_DUP, "1REDUCE_GRAD0", NULL, "t.sched:14: rank 1, action 7 (1REDUCE_GRAD0): ",
         "second REDUCE_GRAD of stage 1 after its backward of microbatch 0 (the first is action 6)"},
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_REPLACE, "1REDUCE_GRAD1", "1REDUCE_GRAD0",
         "t.sched:14: rank 1, action 11 (1REDUCE_GRAD0): ",
         "REDUCE_GRAD of stage 1 names microbatch 0, but the backward it follows is microbatch 1 (action 9)"},
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_REPLACE, "1REDUCE_GRAD1", "1REDUCE_GRAD",
         "t.sched:14: rank 1, action 11 (1REDUCE_GRAD): ",
         "REDUCE_GRAD of stage 1 names no microbatch, but the stage's first (action 6, 1REDUCE_GRAD0) names one"},
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_MOVE, "1REDUCE_GRAD0", "1B0", "t.sched:14: rank 1, action 4 (1REDUCE_GRAD0): ",
         "REDUCE_GRAD of stage 1 comes before any backward of the stage"},
        {"pipedream", 2, 2, 0, 2, 1, 1, OP_REPLACE, "1STEP1", "1STEP", "t.sched:14: rank 1, action 12 (1STEP): ",
         "STEP of stage 1 names no microbatch, but the backward it follows is microbatch 1 (action 9)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_bad(&cases[i]);
}

/* Returns text with the first occurrence of cut removed (malloc'd), NULL when it has none. */
static char *without(const char *text, const char *cut) {
    const char *at = strstr(text, cut);
    char *out = at ? malloc(strlen(text) + 1) : NULL;
    if (out) sprintf(out, "%.*s%s", (int)(at - text), text, at + strlen(cut));
    return out;
}

/* A lowered PyTorch CSV reads back as a flush schedule of one iteration (what the format
 * carries): pipedream's REDUCE_GRADs name their microbatches, so a row missing one is refused
 * at the backward after it (a replicated stage would wait in that microbatch's all-reduce);
 * 2bw over 3 iterations keeps its three REDUCE_GRADs per stage before the one STEP, and
 * passes. */
static void test_bad_reduces_csv(void) {
    static const struct { const char *kind, *cut, *where, *why; } cs[] = {
        {"pipedream", ",1REDUCE_GRAD0", "t.csv:2: rank 1, action 7 (1B1): ",
         "backward of stage 1 microbatch 1 comes before the REDUCE_GRAD of the stage's previous backward (action 4, 1B0)"},
        {"pipedream", ",0REDUCE_GRAD5", "t.csv:1: rank 0, action ",
         "(0STEP): STEP of stage 0 comes before the REDUCE_GRAD of the gradient of its backward at action"},
        {"2bw", "", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        sched_gen_opts o = {.ranks = 2, .microbatches = 2, .iterations = 3};
        pl_err e;
        pl_err_clear(&e);
        sched *s = sched_generate(cs[i].kind, &o, &e), *l = s ? sched_lower(s, &e) : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(l);
        pl_buf b;
        pl_buf_init(&b);
        CU_ASSERT_EQUAL_FATAL(sched_write_torch_csv(l, SCHED_CSV_COMPUTE_COMMS, &b, &e), PL_OK);
        char *text = without(b.data, cs[i].cut);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        sched *r = sched_read_torch_csv("t.csv", text, strlen(text), SCHED_LETTERS_CURRENT, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        int rc = sched_validate(r, &e);
        int ok = cs[i].where ? rc == PL_EINPUT && strncmp(e.msg, cs[i].where, strlen(cs[i].where)) == 0 &&
                                   strstr(e.msg, cs[i].why)
                             : rc == PL_OK;
        if (!ok)
            fprintf(stderr, "\n  csv %s: want '%s...%s', got '%s'\n", cs[i].kind, cs[i].where ? cs[i].where : "(valid)",
                    cs[i].why ? cs[i].why : "", rc == PL_OK ? "(valid)" : e.msg);
        CU_ASSERT(ok);
        sched_free(r);
        free(text);
        pl_buf_free(&b);
        sched_free(l);
        sched_free(s);
    }
}

/* The same rules on a PyTorch CSV that carries STEP cells (taken as they are): a doubled STEP,
 * and a rank left without one; and on a doubled REDUCE_GRAD cell; the line is the rank's row.
 * Without a file, the message starts with the rank (an early STEP, a doubled REDUCE_GRAD). */
static void test_bad_steps_csv_and_memory(void) {
    sched_gen_opts o = {.ranks = 2, .microbatches = 2};
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_generate("1f1b", &o, &e), *l = s ? sched_lower(s, &e) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL_FATAL(sched_write_torch_csv(l, SCHED_CSV_COMPUTE_COMMS, &b, &e), PL_OK);
    static const struct { const char *cells, *where, *why; } cs[] = {
        {",0STEP,0STEP", "t.csv:1: rank 0, action 11 (0STEP): ", "second STEP of stage 0"},
        {",0STEP", "t.csv:2: rank 1, action 7 (1B1): ", "no STEP of stage 1 for iteration 0"},
        /* a doubled REDUCE_GRAD cell (the STEP reading adds goes after the second) */
        {",0REDUCE_GRAD", "t.csv:1: rank 0, action 10 (0REDUCE_GRAD): ",
         "second REDUCE_GRAD of stage 0 for iteration 0 (the first is action 9"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        char text[4096];
        size_t row0 = (size_t)(strchr(b.data, '\n') - b.data);
        snprintf(text, sizeof text, "%.*s%s%s", (int)row0, b.data, cs[i].cells, b.data + row0);
        sched *r = sched_read_torch_csv("t.csv", text, strlen(text), SCHED_LETTERS_CURRENT, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        CU_ASSERT_EQUAL(sched_validate(r, &e), PL_EINPUT);
        int ok = strncmp(e.msg, cs[i].where, strlen(cs[i].where)) == 0 && strstr(e.msg, cs[i].why);
        if (!ok) fprintf(stderr, "\n  csv: want '%s...%s', got '%s'\n", cs[i].where, cs[i].why, e.msg);
        CU_ASSERT(ok);
        sched_free(r);
    }
    pl_buf_free(&b);
    /* in memory: the early STEP of rank 0 */
    sched_action *a = l->rank[0].acts;
    size_t n = l->rank[0].n;
    sched_action step = a[n - 1];
    memmove(a + 3, a + 2, (n - 3) * sizeof *a);
    a[2] = step;
    CU_ASSERT_EQUAL(sched_validate(l, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0, action 3 (0STEP): STEP of stage 0 for iteration 0 comes before"));
    CU_ASSERT_EQUAL(strncmp(e.msg, "rank 0", 6), 0);
    sched_free(l);
    /* in memory: a doubled REDUCE_GRAD of rank 1 (1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1
     * 1SEND_B1 1REDUCE_GRAD 1STEP becomes ... 1REDUCE_GRAD 1REDUCE_GRAD 1STEP) */
    l = sched_lower(s, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    sched_rank *rk = &l->rank[1];
    CU_ASSERT_EQUAL_FATAL(rk->acts[rk->n - 2].kind, SCHED_REDUCE_GRAD);
    CU_ASSERT_EQUAL_FATAL(sched_push(l, 1, rk->acts[rk->n - 1]), PL_OK);
    rk->acts[rk->n - 2] = rk->acts[rk->n - 3];
    static const char want[] = "rank 1, action 10 (1REDUCE_GRAD): second REDUCE_GRAD of stage 1 for iteration 0 (the "
                               "first is action 9";
    CU_ASSERT_EQUAL(sched_validate(l, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(strncmp(e.msg, want, strlen(want)), 0);
    sched_free(l);
    sched_free(s);
}

void test_validate_register(void) {
    static const pl_test_case cases[] = {
        {"every kind's schedules pass the STEP and REDUCE_GRAD rules", test_every_kind_validates},
        {"replicated 1f1b, pipedream, 2bw pass", test_replicated_validate},
        {"a replicated stage reduces once per update", test_replica_reduces},
        {"misplaced, missing, doubled STEPs refused with file, line, action", test_bad_steps_refused},
        {"STEP and REDUCE_GRAD rules on CSV files and in memory", test_bad_steps_csv_and_memory},
        {"doubled, empty, misnamed REDUCE_GRADs refused with file, line, action", test_bad_reduces_refused},
        {"REDUCE_GRAD rule on CSV read-backs of pipedream and 2bw", test_bad_reduces_csv},
        {NULL, NULL},
    };
    pl_test_suite("schedules/validate", cases);
}
