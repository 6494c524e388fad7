/* io_text.c: the native .sched text format: writing it, and reading it with path:line:col errors. */
#include "sched_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The format, version 1 (see DESIGN.md section 3):
 *
 *   # comment                      '#' starts a comment, on a line of its own or after the
 *                                  content of a header or rank line; blank lines are skipped
 *   pipelab-schedule 1             first other line: magic and version
 *   kind 1f1b                      then every header key exactly once, in any order
 *   ranks 4
 *   stages 4
 *   microbatches 8
 *   iterations 1
 *   chunks 1                       stages / ranks (1 when stages is not a multiple of ranks)
 *   placement loop                 loop | v | explicit R0 R1 ... (one rank per stage)
 *   weights flush                  flush | stash | 2bw
 *   recompute none                 none | full
 *   lowered no                     no | yes
 *   rank 0: 0F0 0F1 0B0 ...        then one line per rank, 0 .. ranks-1 in order
 *
 * Tokens are separated by spaces or tabs (the writer uses single spaces); CRLF line ends and a
 * UTF-8 byte order mark are tolerated. Actions use PyTorch's current letters (B = full
 * backward, I, W). The writer's output is canonical: reading it and writing again gives the
 * same bytes. */

#define FORMAT_MAGIC "pipelab-schedule"
#define FORMAT_VERSION "1"

/* ---------------------------------------------------------------- writing */

/* Returns 1 for the characters a kind name may hold: letters, digits and "_.+-", so that
 * it can be quoted in JSON, CSV and SQL without escaping. */
static int kind_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '+' || c == '-';
}

/* Returns the kind name as one token the reader accepts: at most sizeof s->kind - 1
 * characters, each kind_char (others replaced by '_'); "custom" when empty. */
static void kind_token(const sched *s, char *out, size_t n) {
    size_t len = strnlen(s->kind, sizeof s->kind);
    if (len >= n) len = n - 1;
    for (size_t i = 0; i < len; i++) out[i] = kind_char(s->kind[i]) ? s->kind[i] : '_';
    out[len] = '\0';
    if (len == 0) snprintf(out, n, "custom");
}

/* Writes s as canonical .sched text onto out. Returns PL_OK, or PL_ENOMEM when the buffer
 * could not grow (out->failed is then set). */
int sched_write_text(const sched *s, pl_buf *out) {
    char kind[sizeof s->kind];
    kind_token(s, kind, sizeof kind);
    pl_buf_puts(out, "# pipelab schedule\n");
    pl_buf_puts(out, FORMAT_MAGIC " " FORMAT_VERSION "\n");
    pl_buf_printf(out, "kind %s\n", kind);
    pl_buf_printf(out, "ranks %d\n", s->ranks);
    pl_buf_printf(out, "stages %d\n", s->stages);
    pl_buf_printf(out, "microbatches %d\n", s->microbatches);
    pl_buf_printf(out, "iterations %d\n", s->iterations);
    pl_buf_printf(out, "chunks %d\n", s->chunks);
    pl_buf_printf(out, "placement %s", sched_placement_name(s->placement));
    if (s->placement == SCHED_PLACE_EXPLICIT)
        for (int i = 0; i < s->stages; i++) pl_buf_printf(out, " %d", s->stage_rank[i]);
    pl_buf_putc(out, '\n');
    pl_buf_printf(out, "weights %s\n", sched_weights_name(s->weights));
    pl_buf_printf(out, "recompute %s\n", sched_recompute_name(s->recompute));
    pl_buf_printf(out, "lowered %s\n", s->lowered ? "yes" : "no");
    char cell[128];
    for (int r = 0; r < s->ranks && !out->failed; r++) {
        pl_buf_printf(out, "rank %d:", r);
        for (size_t i = 0; i < s->rank[r].n; i++) {
            int n = sched_action_format(&s->rank[r].acts[i], cell, sizeof cell);
            if (n < 0 || (size_t)n >= sizeof cell) return PL_EINTERNAL;
            pl_buf_putc(out, ' ');
            pl_buf_puts(out, cell);
        }
        pl_buf_putc(out, '\n');
    }
    return out->failed ? PL_ENOMEM : PL_OK;
}

/* ---------------------------------------------------------------- reading */

/* One whitespace-separated token of a line, with its 1-based column. */
typedef struct tok {
    const char *p;
    size_t n;
    int col;
} tok;

/* One line of the input, without its line end. */
typedef struct line {
    const char *p;
    size_t n;
    int no; /* 1-based */
} line;

enum {
    K_KIND, K_RANKS, K_STAGES, K_MICROBATCHES, K_ITERATIONS, K_CHUNKS, K_PLACEMENT, K_WEIGHTS,
    K_RECOMPUTE, K_LOWERED, K_NKEYS
};
static const char *const key_names[K_NKEYS] = {
    "kind", "ranks", "stages", "microbatches", "iterations", "chunks", "placement", "weights",
    "recompute", "lowered",
};

/* Where each header key was given: its line (0 = not yet) and the column of its name. */
typedef struct hdr_entry {
    line ln;
    int col;
} hdr_entry;

/* Reader state shared by the helpers below. */
typedef struct rd {
    const char *path; /* name used in messages */
    const char *text;
    size_t len, pos;  /* pos: start of the next line */
    int lineno;       /* number of the last line read */
    line last;        /* the last line read (for end-of-file positions) */
    pl_err *e;
} rd;

/* Returns 1 for the blanks that separate tokens. */
static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Returns token t quoted into buf (SCHED_QUOTE_BUF bytes), shortened when long. */
static const char *quote(tok t, char *buf) { return sched_quote(t.p, t.n, buf); }

/* Reads the next line into *l; returns 0 at end of input. A trailing '\r' is dropped, and so is
 * a comment: from a '#' to the end of the line. */
static int next_line(rd *r, line *l) {
    if (r->pos >= r->len) return 0;
    const char *start = r->text + r->pos;
    const char *nl = memchr(start, '\n', r->len - r->pos);
    size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
    r->pos += n + (nl ? 1 : 0);
    if (n > 0 && start[n - 1] == '\r') n--;
    const char *hash = memchr(start, '#', n);
    if (hash) n = (size_t)(hash - start);
    l->p = start;
    l->n = n;
    l->no = ++r->lineno;
    r->last = *l;
    return 1;
}

/* Reads the next token of l starting at *pos into *t; returns 0 when the line has no more. */
static int next_tok(const line *l, size_t *pos, tok *t) {
    size_t p = *pos;
    while (p < l->n && is_blank(l->p[p])) p++;
    if (p >= l->n) { *pos = p; return 0; }
    size_t s = p;
    while (p < l->n && !is_blank(l->p[p])) p++;
    t->p = l->p + s;
    t->n = p - s;
    t->col = (int)s + 1;
    *pos = p;
    return 1;
}

/* Returns 1 when t spells the NUL-terminated word w. */
static int tok_is(tok t, const char *w) { return strlen(w) == t.n && memcmp(t.p, w, t.n) == 0; }

/* Fills e with "path:line:col: message" and returns PL_EINPUT. */
__attribute__((format(printf, 4, 5)))
static int fail_at(rd *r, int lineno, int col, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = sched_fail_atv(r->e, r->path, lineno, col, fmt, ap);
    va_end(ap);
    return rc;
}

/* Line and column of the end of the input, for errors about something missing there. */
static void end_pos(const rd *r, int *lineno, int *col) {
    *lineno = r->lineno > 0 ? r->lineno : 1;
    *col = r->lineno > 0 ? (int)r->last.n + 1 : 1;
}

/* Returns 1 when l is blank (a comment line is blank once next_line dropped its comment). */
static int is_skippable(const line *l) {
    size_t i = 0;
    while (i < l->n && is_blank(l->p[i])) i++;
    return i == l->n;
}

/* Checks that a content line holds only printable ASCII and blanks. Returns PL_OK, or
 * PL_EINPUT naming the first other byte (binary data, a stray '\r', non-ASCII text). */
static int check_bytes(rd *r, const line *l) {
    for (size_t i = 0; i < l->n; i++) {
        unsigned char c = (unsigned char)l->p[i];
        if ((c < 0x20 && c != '\t') || c >= 0x7f)
            return fail_at(r, l->no, (int)i + 1,
                           "unexpected byte 0x%02x (a .sched file is plain ASCII text outside "
                           "comments)", c);
    }
    return PL_OK;
}

/* Parses token t as a whole decimal number in [lo, hi] for header key `what`. Returns PL_OK
 * with *out set, or PL_EINPUT saying whether it is not a number or out of range. */
static int parse_num(rd *r, int lineno, tok t, const char *what, long long lo, long long hi,
                     long long *out) {
    char q[SCHED_QUOTE_BUF];
    long long v = 0;
    int big = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (t.p[i] < '0' || t.p[i] > '9')
            return fail_at(r, lineno, t.col, "%s: '%s' is not a whole number", what, quote(t, q));
        if (!big) {
            v = v * 10 + (t.p[i] - '0');
            if (v > hi) big = 1;
        }
    }
    if (big || v < lo)
        return fail_at(r, lineno, t.col, "%s %s is out of range (%lld..%lld)", what, quote(t, q),
                       lo, hi);
    *out = v;
    return PL_OK;
}

/* Reads the single value token of header entry h (key k) into *t. Returns PL_OK, or
 * PL_EINPUT when the value is missing or followed by more text. */
static int one_value(rd *r, const hdr_entry *h, int k, tok *t) {
    size_t pos = (size_t)h->col - 1 + strlen(key_names[k]);
    tok extra = {NULL, 0, 0};
    char q[SCHED_QUOTE_BUF];
    if (!next_tok(&h->ln, &pos, t))
        return fail_at(r, h->ln.no, (int)h->ln.n + 1, "header key '%s' needs a value", key_names[k]);
    if (next_tok(&h->ln, &pos, &extra))
        return fail_at(r, h->ln.no, extra.col, "unexpected '%s' after the value of '%s'",
                       quote(extra, q), key_names[k]);
    return PL_OK;
}

/* Reads a numeric header value in [lo, hi]; returns PL_OK or PL_EINPUT. */
static int num_value(rd *r, const hdr_entry *h, int k, long long lo, long long hi, int *out) {
    tok t = {NULL, 0, 0};
    long long v;
    int rc = one_value(r, h, k, &t);
    if (rc == PL_OK) rc = parse_num(r, h->ln.no, t, key_names[k], lo, hi, &v);
    if (rc == PL_OK) *out = (int)v;
    return rc;
}

/* Reads a header value that must be one of the names accepted by parse (which returns -1
 * for unknown ones); `choices` lists them for the message. Returns PL_OK or PL_EINPUT. */
static int name_value(rd *r, const hdr_entry *h, int k, int (*parse)(const char *),
                      const char *choices, int *out) {
    tok t = {NULL, 0, 0};
    char q[SCHED_QUOTE_BUF];
    int rc = one_value(r, h, k, &t);
    if (rc) return rc;
    int v = t.n <= SCHED_QUOTE_MAX ? parse(quote(t, q)) : -1;
    if (v < 0)
        return fail_at(r, h->ln.no, t.col, "unknown %s '%s' (expected %s)", key_names[k],
                       quote(t, q), choices);
    *out = v;
    return PL_OK;
}

/* Parses "no" / "yes"; returns 0, 1, or -1 for anything else. */
static int parse_yes_no(const char *s) {
    return strcmp(s, "no") == 0 ? 0 : strcmp(s, "yes") == 0 ? 1 : -1;
}

/* Reads the placement value: "loop", "v" or "explicit" followed by one rank per stage.
 * stage_rank gets the explicit list (size stages). Returns PL_OK or PL_EINPUT. */
static int placement_value(rd *r, const hdr_entry *h, int ranks, int stages,
                           sched_placement *pl, int *stage_rank) {
    size_t pos = (size_t)h->col - 1 + strlen(key_names[K_PLACEMENT]);
    tok t = {NULL, 0, 0};
    char q[SCHED_QUOTE_BUF];
    if (!next_tok(&h->ln, &pos, &t))
        return fail_at(r, h->ln.no, (int)h->ln.n + 1, "header key 'placement' needs a value");
    int v = t.n <= SCHED_QUOTE_MAX ? sched_placement_parse(quote(t, q)) : -1;
    if (v < 0)
        return fail_at(r, h->ln.no, t.col, "unknown placement '%s' (expected loop, v, or "
                       "explicit followed by one rank per stage)", quote(t, q));
    *pl = (sched_placement)v;
    if (*pl != SCHED_PLACE_EXPLICIT) {
        if (next_tok(&h->ln, &pos, &t))
            return fail_at(r, h->ln.no, t.col, "unexpected '%s' after placement %s (only "
                           "explicit takes a list of ranks)", quote(t, q), sched_placement_name(*pl));
        return PL_OK;
    }
    int n = 0;
    while (next_tok(&h->ln, &pos, &t)) {
        if (n == stages)
            return fail_at(r, h->ln.no, t.col, "placement explicit lists more ranks than the "
                           "%d stages", stages);
        long long rk;
        char what[64];
        snprintf(what, sizeof what, "placement: rank of stage %d", n);
        int rc = parse_num(r, h->ln.no, t, what, 0, ranks - 1, &rk);
        if (rc) return rc;
        stage_rank[n++] = (int)rk;
    }
    if (n < stages)
        return fail_at(r, h->ln.no, (int)h->ln.n + 1, "placement explicit lists %d rank%s, but "
                       "there are %d stages (one rank per stage)", n, n == 1 ? "" : "s", stages);
    return PL_OK;
}

/* Checks that header entries are all present; at is the line where the header ended (0 =
 * end of input). Returns PL_OK or PL_EINPUT naming the first missing key. */
static int check_header_complete(rd *r, const hdr_entry *hdr, int at) {
    for (int k = 0; k < K_NKEYS; k++) {
        if (hdr[k].ln.no) continue;
        int lineno = at, col = 1;
        if (!at) end_pos(r, &lineno, &col);
        return fail_at(r, lineno, col, "missing header key '%s' (every header key must be given "
                       "once, before the rank lines)", key_names[k]);
    }
    return PL_OK;
}

/* Checks chunks against ranks and stages: it is the stages per rank, stages / ranks, and 1 when
 * stages is not a multiple of ranks (an explicit placement of uneven shares), as sched_new sets
 * it and every writer writes it. The results store and the plots label runs by it (interleaved
 * v=2), so a header that disagrees is refused rather than carried. Returns PL_OK or PL_EINPUT at
 * the value of 'chunks'. */
static int chunks_value(rd *r, const hdr_entry *hdr, int ranks, int stages, int chunks) {
    int want = stages % ranks == 0 ? stages / ranks : 1;
    if (chunks == want) return PL_OK;
    tok t = {NULL, 0, 0};
    one_value(r, &hdr[K_CHUNKS], K_CHUNKS, &t);
    if (stages % ranks != 0)
        return fail_at(r, hdr[K_CHUNKS].ln.no, t.col, "chunks %d does not match stages %d (line %d) and ranks %d "
                       "(line %d): stages is not a multiple of ranks, so chunks must be 1", chunks, stages,
                       hdr[K_STAGES].ln.no, ranks, hdr[K_RANKS].ln.no);
    return fail_at(r, hdr[K_CHUNKS].ln.no, t.col, "chunks %d does not match stages %d (line %d) and ranks %d (line "
                   "%d): chunks is the stages per rank, stages / ranks = %d", chunks, stages, hdr[K_STAGES].ln.no,
                   ranks, hdr[K_RANKS].ln.no, want);
}

/* Builds the empty schedule from a complete header. Returns it, or NULL with e filled. */
static sched *build_from_header(rd *r, const hdr_entry *hdr) {
    int ranks = 0, stages = 0, mbs = 0, iters = 0, chunks = 0, weights = 0, recompute = 0, lowered = 0;
    sched_placement pl = SCHED_PLACE_LOOP;
    if (num_value(r, &hdr[K_RANKS], K_RANKS, 1, SCHED_MAX_RANKS, &ranks) ||
        num_value(r, &hdr[K_STAGES], K_STAGES, 1, SCHED_MAX_STAGES, &stages) ||
        num_value(r, &hdr[K_MICROBATCHES], K_MICROBATCHES, 1, SCHED_MAX_MICROBATCHES, &mbs) ||
        num_value(r, &hdr[K_ITERATIONS], K_ITERATIONS, 1, SCHED_MAX_MICROBATCHES, &iters) ||
        num_value(r, &hdr[K_CHUNKS], K_CHUNKS, 1, stages, &chunks))
        return NULL;
    if (chunks_value(r, hdr, ranks, stages, chunks) != PL_OK) return NULL;
    if ((long long)mbs * iters > SCHED_MAX_MICROBATCHES) {
        tok t = {NULL, 0, 0};
        one_value(r, &hdr[K_ITERATIONS], K_ITERATIONS, &t);
        fail_at(r, hdr[K_ITERATIONS].ln.no, t.col, "microbatches (%d) x iterations (%d) = %lld "
                "exceeds the limit of %d microbatches", mbs, iters, (long long)mbs * iters,
                SCHED_MAX_MICROBATCHES);
        return NULL;
    }
    if (name_value(r, &hdr[K_WEIGHTS], K_WEIGHTS, sched_weights_parse, "flush, stash or 2bw", &weights) ||
        name_value(r, &hdr[K_RECOMPUTE], K_RECOMPUTE, sched_recompute_parse, "none or full", &recompute) ||
        name_value(r, &hdr[K_LOWERED], K_LOWERED, parse_yes_no, "no or yes", &lowered))
        return NULL;
    tok kt = {NULL, 0, 0};
    char q[SCHED_QUOTE_BUF];
    if (one_value(r, &hdr[K_KIND], K_KIND, &kt)) return NULL;
    if (kt.n >= sizeof ((sched *)0)->kind) {
        fail_at(r, hdr[K_KIND].ln.no, kt.col, "kind '%s' is longer than %zu characters",
                quote(kt, q), sizeof ((sched *)0)->kind - 1);
        return NULL;
    }
    for (size_t i = 0; i < kt.n; i++)
        if (!kind_char(kt.p[i])) {
            fail_at(r, hdr[K_KIND].ln.no, kt.col + (int)i, "kind '%s': character '%c' is not "
                    "allowed (letters, digits and _ . + - only)", quote(kt, q), kt.p[i]);
            return NULL;
        }
    int *stage_rank = pl_calloc((size_t)stages, sizeof *stage_rank);
    if (!stage_rank) {
        pl_errf(r->e, PL_ENOMEM, "%s: out of memory for %d stages", r->path, stages);
        return NULL;
    }
    sched *s = NULL;
    if (placement_value(r, &hdr[K_PLACEMENT], ranks, stages, &pl, stage_rank) == PL_OK) {
        s = sched_new(ranks, stages, mbs, pl, stage_rank, r->e);
        if (!s) pl_err_prefix(r->e, "%s:%d: ", r->path, hdr[K_PLACEMENT].ln.no);
    }
    free(stage_rank);
    if (!s) return NULL;
    memcpy(s->kind, kt.p, kt.n);
    s->kind[kt.n] = '\0';
    s->iterations = iters;
    s->chunks = chunks;
    s->weights = (sched_weights)weights;
    s->recompute = (sched_recompute)recompute;
    s->lowered = lowered;
    return s;
}

/* Checks that the first content line l is "pipelab-schedule 1". Returns PL_OK or PL_EINPUT. */
static int check_magic(rd *r, const line *l) {
    size_t pos = 0;
    tok t = {NULL, 0, 0}, v = {NULL, 0, 0};
    char q[SCHED_QUOTE_BUF];
    next_tok(l, &pos, &t);
    if (!tok_is(t, FORMAT_MAGIC))
        return fail_at(r, l->no, t.col, "not a pipelab schedule: expected '" FORMAT_MAGIC " "
                       FORMAT_VERSION "' as the first line, found '%s'", quote(t, q));
    if (!next_tok(l, &pos, &v))
        return fail_at(r, l->no, (int)l->n + 1, "expected the format version after '"
                       FORMAT_MAGIC "' (this pipelab reads version " FORMAT_VERSION ")");
    if (!tok_is(v, FORMAT_VERSION))
        return fail_at(r, l->no, v.col, "unsupported format version '%s' (this pipelab reads "
                       "version " FORMAT_VERSION ")", quote(v, q));
    if (next_tok(l, &pos, &t))
        return fail_at(r, l->no, t.col, "unexpected '%s' after the format version", quote(t, q));
    return PL_OK;
}

/* Checks one parsed action a (token t) on rank rk against the header: stage and microbatch
 * ranges, placement, and SEND/RECV only in a lowered schedule. Returns PL_OK or PL_EINPUT. */
static int check_action(rd *r, const sched *s, int rk, const sched_action *a, int lineno, tok t) {
    char q[SCHED_QUOTE_BUF];
    long long mbmax = (long long)s->microbatches * s->iterations;
    int halves = a->kind == SCHED_OVERLAP ? 2 : 1;
    for (int h = 0; h < halves; h++) {
        int st = h ? a->stage2 : a->stage, mb = h ? a->mb2 : a->mb;
        if (st < 0 || st >= s->stages)
            return fail_at(r, lineno, t.col, "action '%s': stage %d is out of range (stages %d)",
                           quote(t, q), st, s->stages);
        if (mb >= mbmax)
            return fail_at(r, lineno, t.col, "action '%s': microbatch %d is out of range "
                           "(microbatches %d x iterations %d = %lld)", quote(t, q), mb,
                           s->microbatches, s->iterations, mbmax);
        if (s->stage_rank[st] != rk)
            return fail_at(r, lineno, t.col, "action '%s' on rank %d belongs to stage %d, which "
                           "the placement (%s) puts on rank %d; a stage cannot run on two ranks",
                           quote(t, q), rk, st, sched_placement_name(s->placement),
                           s->stage_rank[st]);
    }
    if (!s->lowered && sched_kind_is_comm((sched_kind)a->kind))
        return fail_at(r, lineno, t.col, "action '%s' is a send or receive, but the header says "
                       "'lowered no'", quote(t, q));
    return PL_OK;
}

/* Parses the rank line l, which must be "rank <expect>: actions...", onto rank expect of s.
 * Returns PL_OK, PL_EINPUT, or PL_ENOMEM. */
static int read_rank_line(rd *r, sched *s, int expect, const int *rank_lines, const line *l) {
    char q[SCHED_QUOTE_BUF];
    size_t pos = 0;
    tok t = {NULL, 0, 0};
    next_tok(l, &pos, &t); /* "rank" */
    while (pos < l->n && is_blank(l->p[pos])) pos++;
    size_t ns = pos;
    long long v = 0;
    int big = 0;
    while (pos < l->n && l->p[pos] >= '0' && l->p[pos] <= '9') {
        v = v * 10 + (l->p[pos] - '0');
        if (v > SCHED_MAX_RANKS) {
            big = 1;
            v = SCHED_MAX_RANKS + 1;
        }
        pos++;
    }
    if (pos == ns)
        return fail_at(r, l->no, (int)ns + 1, "expected a rank number after 'rank'");
    if (pos >= l->n || l->p[pos] != ':')
        return fail_at(r, l->no, (int)pos + 1, "expected ':' after 'rank %.*s'", (int)(pos - ns),
                       l->p + ns);
    if (big || v >= s->ranks)
        return fail_at(r, l->no, (int)ns + 1, "rank %.*s is out of range (ranks %d)",
                       (int)(pos - ns) < SCHED_QUOTE_MAX ? (int)(pos - ns) : SCHED_QUOTE_MAX, l->p + ns, s->ranks);
    if (v < expect)
        return fail_at(r, l->no, (int)ns + 1, "second line for rank %lld (the first is line %d)",
                       v, rank_lines[v]);
    if (v > expect)
        return fail_at(r, l->no, (int)ns + 1, "expected the line 'rank %d:' here, found 'rank "
                       "%lld:' (one line per rank, in order 0..%d)", expect, v, s->ranks - 1);
    pos++; /* ':' */
    while (next_tok(l, &pos, &t)) {
        sched_action a;
        size_t ecol = 0;
        pl_err pe;
        pl_err_clear(&pe);
        if (sched_action_parse(t.p, t.n, SCHED_LETTERS_CURRENT, &a, &ecol, &pe) != PL_OK)
            return fail_at(r, l->no, t.col + (int)ecol, "cannot parse action '%s': %s",
                           quote(t, q), pe.msg);
        int rc = check_action(r, s, expect, &a, l->no, t);
        if (rc) return rc;
        if (sched_push(s, expect, a) != PL_OK)
            return pl_errf(r->e, PL_ENOMEM, "%s:%d:%d: out of memory or more than %zu actions",
                           r->path, l->no, t.col, (size_t)SCHED_MAX_ACTIONS);
    }
    return PL_OK;
}

/* Returns the key index of token t, or -1. */
static int key_index(tok t) {
    for (int k = 0; k < K_NKEYS; k++)
        if (tok_is(t, key_names[k])) return k;
    return -1;
}

/* The reader's progress through the lines after the magic: the header entries, then the
 * schedule (built at the first rank line) and the lines of its ranks. */
typedef struct body {
    hdr_entry hdr[K_NKEYS];
    sched *s;
    int *rank_lines; /* [ranks] line of each rank's row */
    int nranks;      /* rank lines read */
} body;

/* Builds b's schedule from its header, complete at line at (0 = the end of input). Returns
 * PL_OK, or an error code with e filled. */
static int body_begin(rd *r, body *b, int at) {
    int rc = check_header_complete(r, b->hdr, at);
    if (rc != PL_OK) return rc;
    if (!(b->s = build_from_header(r, b->hdr))) return r->e && r->e->code ? r->e->code : PL_EINPUT;
    return PL_OK;
}

/* Reads the rank line l (first token t, "rank") onto the next rank, building the schedule and
 * the table of rank lines at the first one. Returns PL_OK, or an error code with e filled. */
static int body_rank_line(rd *r, body *b, const line *l, tok t) {
    int rc;
    if (!b->s) {
        if ((rc = body_begin(r, b, l->no)) != PL_OK) return rc;
        b->rank_lines = pl_calloc((size_t)b->s->ranks, sizeof *b->rank_lines);
        if (!b->rank_lines) return pl_errf(r->e, PL_ENOMEM, "%s: out of memory", r->path);
    }
    if (b->nranks == b->s->ranks)
        return fail_at(r, l->no, t.col, "extra rank line: all %d ranks already have their line", b->s->ranks);
    if ((rc = read_rank_line(r, b->s, b->nranks, b->rank_lines, l)) != PL_OK) return rc;
    b->rank_lines[b->nranks++] = l->no;
    return PL_OK;
}

/* Notes the header line l (first token t): a known key, once, before the rank lines. Returns
 * PL_OK, or PL_EINPUT saying what the line is instead. */
static int body_key_line(rd *r, body *b, const line *l, tok t) {
    char q[SCHED_QUOTE_BUF];
    int k = key_index(t);
    if (k < 0 && t.n > 4 && memcmp(t.p, "rank", 4) == 0)
        return fail_at(r, l->no, t.col, "expected 'rank <number>:' with a blank after 'rank', "
                       "found '%s'", quote(t, q));
    if (k < 0 && b->s)
        return fail_at(r, l->no, t.col, "unexpected '%s' after the rank lines (expected 'rank %d:')",
                       quote(t, q), b->nranks);
    if (k < 0)
        return fail_at(r, l->no, t.col, "unknown header key '%s' (expected one of kind, ranks, "
                       "stages, microbatches, iterations, chunks, placement, weights, "
                       "recompute, lowered, or a 'rank R:' line)", quote(t, q));
    if (b->s)
        return fail_at(r, l->no, t.col, "header key '%s' after the rank lines (the header comes "
                       "first)", key_names[k]);
    if (b->hdr[k].ln.no)
        return fail_at(r, l->no, t.col, "duplicate header key '%s' (first given on line %d)",
                       key_names[k], b->hdr[k].ln.no);
    b->hdr[k].ln = *l;
    b->hdr[k].col = t.col;
    return PL_OK;
}

/* After the last line: the schedule (built here when no rank line came), a line for every
 * rank, the source recorded. Returns PL_OK, or an error code with e filled. */
static int body_end(rd *r, body *b) {
    int rc;
    if (!b->s && (rc = body_begin(r, b, 0)) != PL_OK) return rc;
    if (b->nranks < b->s->ranks) {
        int lineno, col;
        end_pos(r, &lineno, &col);
        return fail_at(r, lineno, col, "missing the line 'rank %d:' (ranks %d, but the file has %d rank "
                       "line%s; is it truncated?)", b->nranks, b->s->ranks, b->nranks, b->nranks == 1 ? "" : "s");
    }
    if (sched_set_source(b->s, r->path, b->rank_lines) != PL_OK)
        return pl_errf(r->e, PL_ENOMEM, "%s: out of memory", r->path);
    return PL_OK;
}

/* Reads the lines after the magic: header, then rank lines. Returns the schedule, or NULL
 * with e filled. */
static sched *read_body(rd *r) {
    body b;
    memset(&b, 0, sizeof b);
    int rc = PL_OK;
    line l;
    while (rc == PL_OK && next_line(r, &l)) {
        if (is_skippable(&l)) continue;
        if ((rc = check_bytes(r, &l)) != PL_OK) break;
        size_t pos = 0;
        tok t = {NULL, 0, 0};
        next_tok(&l, &pos, &t);
        rc = tok_is(t, "rank") ? body_rank_line(r, &b, &l, t) : body_key_line(r, &b, &l, t);
    }
    if (rc == PL_OK) rc = body_end(r, &b);
    free(b.rank_lines);
    if (rc == PL_OK) return b.s;
    sched_free(b.s);
    return NULL;
}

/* Reads a .sched text (text[0..len), need not be NUL-terminated); path names it in messages
 * and is recorded as the schedule's source (NULL: "<text>", no source recorded). Returns the
 * schedule, or NULL with e filled ("path:line:col: what is wrong"). */
sched *sched_read_text(const char *path, const char *text, size_t len, pl_err *e) {
    rd r;
    memset(&r, 0, sizeof r);
    r.path = path ? path : "<text>";
    r.text = text;
    r.len = len;
    r.e = e;
    if (len == 0) {
        pl_errf(e, PL_EINPUT, "%s: empty file", r.path);
        return NULL;
    }
    r.pos = pl_bom_len(text, len);
    line l;
    int found = 0;
    while (next_line(&r, &l))
        if (!is_skippable(&l)) { found = 1; break; }
    if (!found) {
        pl_errf(e, PL_EINPUT, "%s: no schedule in the file (only blank and comment lines; "
                "expected '" FORMAT_MAGIC " " FORMAT_VERSION "')", r.path);
        return NULL;
    }
    if (check_bytes(&r, &l) || check_magic(&r, &l)) return NULL;
    sched *s = read_body(&r);
    if (s && !path) sched_set_source(s, NULL, NULL);
    return s;
}
