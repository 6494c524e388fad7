/* io_csv.c: PyTorch torch.distributed.pipelining CSV schedules (read, write) and sched_load. */
#include "sched_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The CSV form: one row per rank, one cell per action in PyTorch's notation, an empty cell is
 * an idle slot. It carries no header, so reading infers the shape:
 *   ranks        = number of rows (trailing empty lines ignored). A row of empty cells (",",
 *                  as the writer puts it) is a rank without actions. A blank line before the
 *                  last row is refused: Python's csv module (PyTorch's reader) would take it
 *                  as a rank without actions too, but in a file that is almost always a stray
 *                  line, and taking it would silently add an idle rank and move every later
 *                  row to the next rank (its stages with it)
 *   stages       = 1 + the largest stage in any cell
 *   microbatches = 1 + the largest microbatch in any cell (1 when no cell has one)
 *   placement    = loop when every stage sits on row (stage mod ranks), else v when it follows
 *                  the zig-zag rule, else explicit; a stage on two rows is an error
 *   lowered      = 1 when any SEND/RECV cell appears, or, in a file where no two neighbour
 *                  stages sit on different ranks (one rank, say: its lowered form has no
 *                  SEND/RECV to show), when a REDUCE_GRAD or STEP cell appears, so that a
 *                  one-rank compute_comms file reads back as written. Elsewhere a REDUCE_GRAD
 *                  alone does not mark it: recent PyTorch writes one after each stage's last
 *                  backward into compute_only files (lowering puts its own in their place)
 *   STEP         PyTorch has no such action: its optimizer steps after the schedule. Writing
 *                drops pipelab's STEPs; reading a lowered file without any STEP cell adds,
 *                after each rank's last compute or REDUCE_GRAD (and the sends right after
 *                it), one STEP per stage the rank
 *                holds (in stage order), where sched_lower puts a flush schedule's. A file
 *                with STEP cells (pipelab's older ones) is taken as it is.
 *   chunks       = stages / ranks (as sched_new sets it), kind "file", iterations 1,
 *                  weights flush, recompute none.
 * What a CSV round trip cannot carry: the kind name, iterations (an async schedule over k
 * iterations comes back as one iteration of k*m microbatches), the weight-version and
 * recomputation policies, chunks when stages is not a multiple of ranks, idle slots (dropped
 * on read: execution is dependency-driven), and an explicit placement that happens to equal
 * the loop or v rule (it comes back as that rule). The actions, ranks, stages, microbatches,
 * placement and lowered flag come back exactly. */

/* Largest file sched_load reads. */
#define LOAD_MAX_BYTES ((size_t)256 << 20)

/* ---------------------------------------------------------------- writing */

/* Returns 1 when an action of kind k belongs in a compute_only CSV: compute actions, and the
 * FSDP UNSHARD/RESHARD that PyTorch keeps in that flavour. */
static int compute_only_kind(sched_kind k) {
    return sched_kind_is_compute(k) || k == SCHED_UNSHARD || k == SCHED_RESHARD;
}

/* Writes s as PyTorch CSV onto out in flavour fl (AUTO: compute_comms when s is lowered).
 * A rank that writes no cell gets the row "," (two empty cells) so that the row count stays
 * the rank count even for a last rank without actions. Returns PL_OK, PL_EINPUT (compute_comms
 * asked of a schedule that is not lowered, unknown flavour) or PL_ENOMEM. */
int sched_write_torch_csv(const sched *s, sched_csv_flavour fl, pl_buf *out, pl_err *e) {
    return sched_write_torch_csv_letters(s, fl, SCHED_LETTERS_CURRENT, out, e);
}

int sched_write_torch_csv_letters(const sched *s, sched_csv_flavour fl, sched_letters letters, pl_buf *out, pl_err *e) {
    if (fl == SCHED_CSV_AUTO) fl = s->lowered ? SCHED_CSV_COMPUTE_COMMS : SCHED_CSV_COMPUTE_ONLY;
    if (fl != SCHED_CSV_COMPUTE_ONLY && fl != SCHED_CSV_COMPUTE_COMMS)
        return pl_errf(e, PL_EINPUT, "unknown CSV flavour %d", (int)fl);
    if (fl == SCHED_CSV_COMPUTE_COMMS && !s->lowered)
        return pl_errf(e, PL_EINPUT, "the compute_comms CSV needs a lowered schedule (with its "
                       "sends and receives); lower it first or write compute_only");
    char cell[128];
    for (int r = 0; r < s->ranks && !out->failed; r++) {
        int cells = 0;
        for (size_t i = 0; i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            if (fl == SCHED_CSV_COMPUTE_ONLY && !compute_only_kind((sched_kind)a->kind)) continue;
            if (a->kind == SCHED_STEP) continue; /* not a PyTorch action: see the top */
            int n = sched_action_format_letters(a, letters, cell, sizeof cell);
            if (n < 0 && letters == SCHED_LETTERS_LEGACY)
                return pl_errf(e, PL_EINPUT, "rank %d, action %zu is an overlapped forward and backward, which the "
                               "older PyTorch letters cannot write (their releases have no OVERLAP_F_B)", r, i + 1);
            if (n < 0 || (size_t)n >= sizeof cell)
                return pl_errf(e, PL_EINTERNAL, "rank %d, action %zu cannot be formatted", r, i);
            if (cells++) pl_buf_putc(out, ',');
            pl_buf_puts(out, cell);
        }
        pl_buf_puts(out, cells ? "\n" : ",\n");
    }
    if (out->failed) return pl_errf(e, PL_ENOMEM, "out of memory writing the CSV");
    return PL_OK;
}

/* Appends to out, as a phrase list, the policies of s that its PyTorch CSV cannot carry and that
 * reading it back would change (see the top): several iterations, weights other than flush,
 * recomputation. Returns how many (0: the CSV reads back as the same schedule, up to the kind
 * name and idle slots). */
int sched_csv_losses(const sched *s, pl_buf *out) {
    int n = 0, it = sched_iterations(s);
    if (it > 1) {
        pl_buf_printf(out, "its %d iterations (it reads back as one iteration of %lld microbatches)", it,
                      (long long)sched_total_microbatches(s));
        n++;
    }
    if (s->weights != SCHED_WEIGHTS_FLUSH) {
        pl_buf_printf(out, "%s%s weights (it reads back as flush)", n ? ", " : "", sched_weights_name(s->weights));
        n++;
    }
    if (s->recompute != SCHED_RECOMPUTE_NONE) {
        pl_buf_printf(out, "%s%s recomputation (give --recompute %s with the file)", n ? ", " : "",
                      sched_recompute_name(s->recompute), sched_recompute_name(s->recompute));
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------- reading */

/* The actions of one row while the shape is not known yet. */
typedef struct row {
    sched_action *a;
    size_t n, cap;
} row;

/* Where each stage was first seen: row (-1 = nowhere), line and column. */
typedef struct stage_seen {
    int row, line, col;
} stage_seen;

/* Reader state. */
typedef struct csv_rd {
    const char *path;
    pl_err *e;
    row *rows;
    int nrows;
    stage_seen *seen; /* [seen_cap] indexed by stage */
    size_t seen_cap;
    int max_stage, max_mb, lowered;
    int has_step; /* a STEP cell appeared (pipelab's own older files) */
    int has_reduce; /* a REDUCE_GRAD cell appeared */
} csv_rd;

/* Fills e with "path:line:col: message" and returns PL_EINPUT. */
__attribute__((format(printf, 4, 5)))
static int csv_fail(csv_rd *c, int line, int col, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = sched_fail_atv(c->e, c->path, line, col, fmt, ap);
    va_end(ap);
    return rc;
}

/* Records that stage st appears on row rw (at line:col); returns PL_OK, PL_EINPUT when the
 * stage already appeared on another row (naming both), or PL_ENOMEM. */
static int see_stage(csv_rd *c, int st, int rw, int line, int col) {
    if ((size_t)st >= c->seen_cap) {
        size_t cap = c->seen_cap ? c->seen_cap : 64;
        while (cap <= (size_t)st) cap *= 2;
        stage_seen *ns = pl_reallocarray(c->seen, cap, sizeof *ns);
        if (!ns) return pl_errf(c->e, PL_ENOMEM, "%s: out of memory", c->path);
        for (size_t i = c->seen_cap; i < cap; i++) ns[i].row = -1;
        c->seen = ns;
        c->seen_cap = cap;
    }
    stage_seen *s = &c->seen[st];
    if (s->row < 0) {
        s->row = rw;
        s->line = line;
        s->col = col;
    } else if (s->row != rw) {
        return csv_fail(c, line, col, "stage %d is on two ranks: row %d (rank %d, line %d, "
                        "column %d) and row %d (rank %d); a stage lives on one rank", st,
                        s->row + 1, s->row, s->line, s->col, rw + 1, rw);
    }
    if (st > c->max_stage) c->max_stage = st;
    return PL_OK;
}

/* Checks one half (stage st, microbatch mb) of a parsed cell against the limits and records
 * its stage. Returns PL_OK, PL_EINPUT or PL_ENOMEM. */
static int take_half(csv_rd *c, int st, int mb, int rw, int line, int col, const char *cell) {
    if (st >= SCHED_MAX_STAGES)
        return csv_fail(c, line, col, "action '%s': stage %d is beyond the limit of %d stages",
                        cell, st, SCHED_MAX_STAGES);
    if (mb >= SCHED_MAX_MICROBATCHES)
        return csv_fail(c, line, col, "action '%s': microbatch %d is beyond the limit of %d "
                        "microbatches", cell, mb, SCHED_MAX_MICROBATCHES);
    if (mb > c->max_mb) c->max_mb = mb;
    return see_stage(c, st, rw, line, col);
}

/* Appends a to row rw; returns PL_OK or PL_ENOMEM. */
static int row_push(csv_rd *c, int rw, sched_action a) {
    row *r = &c->rows[rw];
    if (r->n == r->cap) {
        size_t cap = r->cap < 16 ? 16 : r->cap + r->cap / 2;
        sched_action *na = pl_reallocarray(r->a, cap, sizeof *na);
        if (!na) return pl_errf(c->e, PL_ENOMEM, "%s: out of memory", c->path);
        r->a = na;
        r->cap = cap;
    }
    r->a[r->n++] = a;
    return PL_OK;
}

/* Returns 1 for the blanks trimmed around cells. */
static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* Parses the cells of line p[0..n) (number line, row rw) into c->rows[rw]. Returns PL_OK,
 * PL_EINPUT or PL_ENOMEM. */
static int read_row(csv_rd *c, const char *p, size_t n, int line, int rw, sched_letters letters) {
    char q[SCHED_QUOTE_BUF];
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if ((ch < 0x20 && ch != '\t') || ch >= 0x7f)
            return csv_fail(c, line, (int)i + 1, "unexpected byte 0x%02x (a schedule CSV is "
                            "plain ASCII text)", ch);
    }
    size_t start = 0;
    while (start <= n) {
        const char *comma = memchr(p + start, ',', n - start);
        size_t end = comma ? (size_t)(comma - p) : n;
        size_t a = start, b = end;
        while (a < b && is_blank(p[a])) a++;
        while (b > a && is_blank(p[b - 1])) b--;
        if (b - a >= 2 && p[a] == '"' && p[b - 1] == '"') { /* a quoted cell */
            a++;
            b--;
            while (a < b && is_blank(p[a])) a++;
            while (b > a && is_blank(p[b - 1])) b--;
        }
        if (b > a) {
            sched_action act;
            size_t ecol = 0;
            pl_err pe;
            pl_err_clear(&pe);
            const char *cell = sched_quote(p + a, b - a, q);
            if (sched_action_parse(p + a, b - a, letters, &act, &ecol, &pe) != PL_OK)
                return csv_fail(c, line, (int)(a + ecol) + 1, "cannot parse action '%s': %s",
                                cell, pe.msg);
            int col = (int)a + 1;
            int rc = take_half(c, act.stage, act.mb, rw, line, col, cell);
            if (rc == PL_OK && act.kind == SCHED_OVERLAP)
                rc = take_half(c, act.stage2, act.mb2, rw, line, col, cell);
            if (rc == PL_OK) rc = row_push(c, rw, act);
            if (rc) return rc;
            if (sched_kind_is_comm((sched_kind)act.kind)) c->lowered = 1;
            if (act.kind == SCHED_STEP) c->has_step = 1;
            if (act.kind == SCHED_REDUCE_GRAD) c->has_reduce = 1;
        }
        if (!comma) break;
        start = end + 1;
    }
    return PL_OK;
}

/* Infers the placement from where each stage was seen: loop, else v, else explicit (filled
 * into stage_rank[stages]). Returns PL_OK, or PL_EINPUT when an explicit placement is needed
 * but some stage appears in no cell. */
static int infer_placement(csv_rd *c, int ranks, int stages, sched_placement *pl,
                           int *stage_rank) {
    static const sched_placement rules[] = {SCHED_PLACE_LOOP, SCHED_PLACE_V};
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        if (sched_place(rules[k], ranks, stages, stage_rank, NULL) != PL_OK) continue;
        int ok = 1;
        for (int s = 0; s < stages && ok; s++)
            if (c->seen[s].row >= 0 && c->seen[s].row != stage_rank[s]) ok = 0;
        if (ok) {
            *pl = rules[k];
            return PL_OK;
        }
    }
    for (int s = 0; s < stages; s++) {
        if (c->seen[s].row < 0)
            return pl_errf(c->e, PL_EINPUT, "%s: stage %d appears in no cell, so its rank cannot "
                           "be inferred (stages 0..%d go to ranks in no loop or v pattern)",
                           c->path, s, stages - 1);
        stage_rank[s] = c->seen[s].row;
    }
    *pl = SCHED_PLACE_EXPLICIT;
    return PL_OK;
}

/* Builds the schedule from the rows read. Returns it, or NULL with e filled. */
static sched *build(csv_rd *c) {
    if (c->max_stage < 0) {
        pl_errf(c->e, PL_EINPUT, "%s: no actions in the file (every cell is empty)", c->path);
        return NULL;
    }
    int ranks = c->nrows, stages = c->max_stage + 1;
    int *stage_rank = pl_calloc((size_t)stages, sizeof *stage_rank);
    if (!stage_rank) {
        pl_errf(c->e, PL_ENOMEM, "%s: out of memory", c->path);
        return NULL;
    }
    sched_placement pl = SCHED_PLACE_EXPLICIT;
    sched *s = NULL;
    if (infer_placement(c, ranks, stages, &pl, stage_rank) == PL_OK) {
        s = sched_new(ranks, stages, c->max_mb + 1, pl, stage_rank, c->e);
        if (!s) pl_err_prefix(c->e, "%s: ", c->path);
    }
    free(stage_rank);
    if (!s) return NULL;
    snprintf(s->kind, sizeof s->kind, "file");
    if (!c->lowered && (c->has_reduce || c->has_step)) { /* no SEND/RECV: lowered if none can be */
        int local = 1;
        for (int q = 0; q + 1 < stages && local; q++) local = s->stage_rank[q] == s->stage_rank[q + 1];
        c->lowered = local;
    }
    s->lowered = c->lowered;
    int *lines = pl_calloc((size_t)ranks, sizeof *lines);
    int rc = lines ? PL_OK : PL_ENOMEM;
    int add_steps = c->lowered && !c->has_step;
    for (int r = 0; r < ranks && rc == PL_OK; r++) {
        lines[r] = r + 1;
        /* the optimizer step PyTorch runs after the schedule: behind the rank's last compute
         * or gradient reduction, one STEP per stage it holds, as sched_lower places them */
        size_t after = 0; /* 1 + index of that action; 0 = the rank computes nothing */
        for (size_t i = 0; add_steps && i < c->rows[r].n; i++) {
            sched_kind k = (sched_kind)c->rows[r].a[i].kind;
            if (sched_kind_is_compute(k) || k == SCHED_REDUCE_GRAD) after = i + 1;
        }
        while (after && after < c->rows[r].n &&
               (c->rows[r].a[after].kind == SCHED_SEND_F || c->rows[r].a[after].kind == SCHED_SEND_B))
            after++; /* the sends of that compute go first */
        for (size_t i = 0; i < c->rows[r].n && rc == PL_OK; i++) {
            rc = sched_push(s, r, c->rows[r].a[i]);
            for (int q = 0; i + 1 == after && q < stages && rc == PL_OK; q++)
                if (s->stage_rank[q] == r) rc = sched_push(s, r, sched_act(SCHED_STEP, q, -1));
        }
        free(c->rows[r].a);
        c->rows[r].a = NULL;
    }
    if (rc == PL_OK) rc = sched_set_source(s, c->path, lines);
    free(lines);
    if (rc != PL_OK) {
        pl_errf(c->e, PL_ENOMEM, "%s: out of memory or more than %zu actions", c->path,
                (size_t)SCHED_MAX_ACTIONS);
        sched_free(s);
        return NULL;
    }
    return s;
}

/* Returns 1 when p[0..n) holds only blanks (and a '\r'). */
static int blank_line(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_blank(p[i]) && p[i] != '\r') return 0;
    return 1;
}

/* Reads a PyTorch CSV schedule (text[0..len), need not be NUL-terminated) with the given
 * letter set; path names it in messages and is recorded as its source (NULL: "<csv>", none
 * recorded). Returns the schedule, or NULL with e filled ("path:line:col: what is wrong"). */
sched *sched_read_torch_csv(const char *path, const char *text, size_t len, sched_letters letters,
                            pl_err *e) {
    csv_rd c;
    memset(&c, 0, sizeof c);
    c.path = path ? path : "<csv>";
    c.e = e;
    c.max_stage = c.max_mb = -1;
    sched *s = NULL;
    if (len == 0) {
        pl_errf(e, PL_EINPUT, "%s: empty file", c.path);
        return NULL;
    }
    size_t pos = pl_bom_len(text, len);
    /* Count the rows: every line up to the last one that is not blank. */
    size_t nlines = 0, last = 0;
    for (size_t p = pos; p < len;) {
        const char *nl = memchr(text + p, '\n', len - p);
        size_t n = nl ? (size_t)(nl - (text + p)) : len - p;
        nlines++;
        if (!blank_line(text + p, n)) last = nlines;
        p += n + 1;
    }
    if (last == 0) {
        pl_errf(e, PL_EINPUT, "%s: no rows (the file has only blank lines)", c.path);
        return NULL;
    }
    if (last > SCHED_MAX_RANKS) {
        pl_errf(e, PL_EINPUT, "%s:%d:1: more than %d rows (one row per rank, at most %d ranks)",
                c.path, SCHED_MAX_RANKS + 1, SCHED_MAX_RANKS, SCHED_MAX_RANKS);
        return NULL;
    }
    c.nrows = (int)last;
    c.rows = pl_calloc((size_t)c.nrows, sizeof *c.rows);
    if (!c.rows) {
        pl_errf(e, PL_ENOMEM, "%s: out of memory", c.path);
        return NULL;
    }
    int ok = 1;
    for (int rw = 0; rw < c.nrows && ok; rw++) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        size_t body = n > 0 && text[pos + n - 1] == '\r' ? n - 1 : n;
        if (blank_line(text + pos, n)) { /* before the last row: see the top */
            csv_fail(&c, rw + 1, 1, "blank line before the last row: taken as a row it would be a rank without "
                     "actions (rank %d) and move every later row to the next rank; delete it, or write ',' (a row "
                     "of empty cells) for a rank that really has no actions", rw);
            ok = 0;
            break;
        }
        ok = read_row(&c, text + pos, body, rw + 1, rw, letters) == PL_OK;
        pos += n + 1;
    }
    if (ok) s = build(&c);
    if (s && !path) sched_set_source(s, NULL, NULL);
    for (int rw = 0; rw < c.nrows; rw++) free(c.rows[rw].a);
    free(c.rows);
    free(c.seen);
    return s;
}

/* ---------------------------------------------------------------- loading */

/* Returns the length (1..4) of the valid UTF-8 sequence at p[0..n), or 0 when invalid
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *p, size_t n) {
    if (p[0] < 0x80) return 1;
    size_t k;
    uint32_t cp;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) {
        k = 2;
        cp = p[0] & 0x1Fu;
    } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        k = 3;
        cp = p[0] & 0x0Fu;
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        k = 4;
        cp = p[0] & 0x07u;
    } else {
        return 0;
    }
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return k;
}

/* Checks that text[0..len) looks like text: no NUL byte, valid UTF-8. Returns PL_OK, or
 * PL_EINPUT saying where the binary data starts. */
static int check_text(const char *path, const char *text, size_t len, pl_err *e) {
    int line = 1, col = 1;
    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *)text + i;
        if (*p == 0)
            return pl_errf(e, PL_EINPUT, "%s:%d:%d: binary data (a NUL byte), not a schedule "
                           "file", path, line, col);
        size_t k = utf8_len(p, len - i);
        if (k == 0)
            return pl_errf(e, PL_EINPUT, "%s:%d:%d: binary data or invalid text (byte 0x%02x is "
                           "not valid UTF-8), not a schedule file", path, line, col, *p);
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
        i += k;
    }
    return PL_OK;
}

/* pl_sched.h. Returns 1 when path ends in ".csv" (any case). */
int sched_path_is_csv(const char *path) {
    size_t n = strlen(path);
    return n >= 4 && strcasecmp(path + n - 4, ".csv") == 0;
}

/* Loads the schedule in file path: PyTorch CSV when the name ends in .csv (read with the
 * given letters), else native .sched text (which always uses the current letters). Refuses
 * directories, files over 256 MiB, empty files and binary data with a clear message.
 * Returns the schedule (its source recorded), or NULL with e filled. */
sched *sched_load(const char *path, sched_letters letters, pl_err *e) {
    char *text = NULL;
    size_t len = 0;
    if (pl_read_file(path, LOAD_MAX_BYTES, &text, &len, e) != PL_OK) return NULL;
    sched *s = NULL;
    if (len == 0)
        pl_errf(e, PL_EINPUT, "%s: empty file", path);
    else if (check_text(path, text, len, e) == PL_OK)
        s = sched_path_is_csv(path) ? sched_read_torch_csv(path, text, len, letters, e)
                                    : sched_read_text(path, text, len, e);
    free(text);
    return s;
}
