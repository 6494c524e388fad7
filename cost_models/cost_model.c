/* cost_model.c: the layer table: allocation, profile CSV reading and writing, model specs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_int.h"

/* ---------------------------------------------------------------- small helpers */

/* Starts a line cursor at the beginning of text[0..len), past a byte order mark (pl_bom_len). */
void cost_lines_init(cost_lines *c, const char *text, size_t len) {
    c->text = text;
    c->len = len;
    c->pos = pl_bom_len(text, len);
    c->lineno = 0;
}

/* Returns 1 with the next line (without its '\n' and a trailing '\r'), 0 at the end. */
int cost_next_line(cost_lines *c, const char **line, size_t *len) {
    if (c->pos >= c->len) return 0;
    const char *s = c->text + c->pos;
    const char *nl = memchr(s, '\n', c->len - c->pos);
    size_t n = nl ? (size_t)(nl - s) : c->len - c->pos;
    c->pos += n + (nl ? 1 : 0);
    if (n > 0 && s[n - 1] == '\r') n--;
    c->lineno++;
    *line = s;
    *len = n;
    return 1;
}

/* Returns a malloc'd NUL-terminated copy of s[0..n), or NULL on allocation failure. */
char *cost_strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* Returns 1 when s[0..n) is the whole of word. */
int cost_word_is(const char *s, size_t n, const char *word) { return strlen(word) == n && memcmp(word, s, n) == 0; }

/* Returns s advanced past leading blanks, with *n shortened past trailing blanks. */
const char *cost_trim(const char *s, size_t *n) {
    while (*n > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        (*n)--;
    }
    while (*n > 0 && (s[*n - 1] == ' ' || s[*n - 1] == '\t' || s[*n - 1] == '\r')) (*n)--;
    return s;
}

/* Returns 0 and the value when s[0..n) is a whole finite number >= 0, else -1. */
int cost_parse_nonneg(const char *s, size_t n, double *out) {
    char buf[64];
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    double v = 0;
    if (pl_parse_double(buf, &v) != 0 || v < 0) return -1;
    *out = v;
    return 0;
}

/* Returns 0 and the rounded byte count, or -1 when v is not representable (> 2^62). */
int cost_bytes_from_double(double v, int64_t *out) {
    if (!(v >= 0) || v > COST_MAX_BYTES_D) return -1;
    *out = (int64_t)llround(v);
    return 0;
}

/* cost.h. */
const char *cost_bytes_read(double v, int64_t *out) {
    if (!(v >= 0)) return "is negative";
    if (v > COST_MAX_BYTES_D) return "is too large (more than " PL_XSTR(COST_MAX_BYTES_D) " bytes)";
    if (v != floor(v)) return "is not a whole number";
    *out = (int64_t)v;
    return NULL;
}

/* ---------------------------------------------------------------- model lifetime */

/* Returns a model of n blank layers (all numbers unknown, bytes 0), or NULL with e filled. */
cost_model *cost_model_alloc(int n, pl_err *e) {
    if (n < 1 || n > COST_MAX_LAYERS) {
        pl_errf(e, PL_EINPUT, "a model needs 1 to %d layers, got %d", COST_MAX_LAYERS, n);
        return NULL;
    }
    cost_model *m = calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->n = n;
    m->microbatch_size = 1;
    m->dtype_bytes = COST_FP32_BYTES;
    m->layer = pl_calloc((size_t)n, sizeof *m->layer);
    m->cut_bytes = pl_calloc((size_t)n + 1, sizeof *m->cut_bytes);
    if (!m->layer || !m->cut_bytes) goto nomem;
    for (int i = 0; i < n; i++) {
        cost_layer *l = &m->layer[i];
        l->fwd_s = l->bwd_in_s = l->bwd_w_s = COST_UNKNOWN;
        l->fwd_flops = l->bwd_in_flops = l->bwd_w_flops = COST_UNKNOWN;
        l->stash_recompute_bytes = -1;
        l->w_stash_bytes = -1;
    }
    return m;
nomem:
    cost_model_free(m);
    pl_errf(e, PL_ENOMEM, "out of memory for a model of %d layers", n);
    return NULL;
}

/* Frees a model and its names; NULL is fine. */
void cost_model_free(cost_model *m) {
    if (!m) return;
    if (m->layer)
        for (int i = 0; i < m->n; i++) {
            free(m->layer[i].name);
            free(m->layer[i].id);
        }
    free(m->layer);
    free(m->cut_bytes);
    free(m->src_path);
    free(m);
}

/* Returns the first control character of s[0..n), or -1 (see cost_int.h). */
int cost_control_char(const char *s, size_t n) {
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c < 0x20 || c == 0x7f) return c;
    }
    return -1;
}

/* Copies a layer name into the model; returns PL_OK or PL_ENOMEM. */
int cost_layer_set_name(cost_model *m, int i, const char *name, size_t len, pl_err *e) {
    free(m->layer[i].name);
    m->layer[i].name = cost_strndup(name, len);
    if (!m->layer[i].name) return pl_errf(e, PL_ENOMEM, "out of memory");
    return PL_OK;
}

/* Chain cuts: the cut before layer k carries layer k-1's output. */
void cost_model_chain_cuts(cost_model *m) {
    for (int k = 1; k <= m->n; k++) m->cut_bytes[k] = m->layer[k - 1].out_bytes;
}

/* Uses the file name without directories and extensions as the model name. */
void cost_model_name_from_path(cost_model *m, const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strcspn(b, ".");
    if (n == 0) n = strlen(b);
    pl_clean_name(m->name, sizeof m->name, b, n); /* a name the profile CSV and partition files carry */
}

/* Returns the parameter count: param_bytes / dtype_bytes summed over layers. */
double cost_model_params(const cost_model *m) {
    double s = 0;
    for (int i = 0; i < m->n; i++) s += (double)m->layer[i].param_bytes;
    return s / (m->dtype_bytes > 0 ? m->dtype_bytes : 1);
}

/* ---------------------------------------------------------------- profile CSV */

enum {
    COL_LAYER, COL_NAME, COL_FWD_S, COL_BWD_IN_S, COL_BWD_W_S, COL_FWD_FLOPS, COL_BWD_IN_FLOPS,
    COL_BWD_W_FLOPS, COL_PARAM, COL_OUT, COL_STASH, COL_STASH_RC, COL_IN, COL_W_STASH, COL_N
};

static const char *const col_names[COL_N] = {
    "layer", "name", "fwd_s", "bwd_in_s", "bwd_w_s", "fwd_flops", "bwd_in_flops", "bwd_w_flops",
    "param_bytes", "out_bytes", "stash_bytes", "stash_recompute_bytes", "in_bytes", "w_stash_bytes"};

/* The time columns in pairs: each time needs its seconds or its FLOPs (or both). */
static const int time_pairs[][2] = {{COL_FWD_S, COL_FWD_FLOPS}, {COL_BWD_IN_S, COL_BWD_IN_FLOPS},
                                    {COL_BWD_W_S, COL_BWD_W_FLOPS}};
#define N_TIME_PAIRS ((int)(sizeof time_pairs / sizeof time_pairs[0]))

/* Returns the column index of a header name, or -1. */
static int col_find(const char *s, size_t n) {
    for (int c = 0; c < COL_N; c++)
        if (cost_word_is(s, n, col_names[c])) return c;
    return -1;
}

/* Splits line into comma-separated trimmed fields; a field may be double-quoted (RFC 4180: commas
 * inside, "" for a quote; the quotes are dropped, "" is left for csv_unquote). Returns the count
 * (up to max, or max + 1 when there are more), or -1 for an unterminated quote. */
static int split_fields(const char *line, size_t len, const char **f, size_t *fl, int max) {
    int k = 0;
    size_t i = 0;
    for (;;) {
        while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
        const char *start;
        size_t n;
        if (i < len && line[i] == '"') {
            size_t j = i + 1;
            for (;;) {
                if (j >= len) return -1;
                if (line[j] == '"') {
                    if (j + 1 < len && line[j + 1] == '"') {
                        j += 2;
                        continue;
                    }
                    break;
                }
                j++;
            }
            start = line + i + 1;
            n = j - i - 1;
            i = j + 1;
            while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
            if (i < len && line[i] != ',') return -1;
        } else {
            size_t j = i;
            while (j < len && line[j] != ',') j++;
            n = j - i;
            start = cost_trim(line + i, &n);
            i = j;
        }
        if (k >= max) return max + 1;
        f[k] = start;
        fl[k] = n;
        k++;
        if (i >= len) break;
        i++; /* the comma */
    }
    return k;
}

/* Returns a malloc'd copy of a field with "" turned into ", or NULL. */
static char *csv_unquote(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        d[k++] = s[i];
        if (s[i] == '"' && i + 1 < n && s[i + 1] == '"') i++;
    }
    d[k] = 0;
    return d;
}

#define LINK_KINDS COST_LINK_KINDS

/* The metadata keys other than the measured links' (ar_key's, which follow them in
 * meta_key_id's numbering). */
static const char *const meta_plain_key[] = {"name", "microbatch_size", "dtype_bytes", "input_bytes"};
#define META_PLAIN_KEYS (sizeof meta_plain_key / sizeof *meta_plain_key)

/* State of the CSV reader. */
typedef struct csv_meta {
    int microbatch_size, dtype_bytes;
    int64_t input_bytes;
    char name[64];
    /* each transport's profiled links (cost_link_kind's order); -1 = not given */
    cost_ar_link ar[LINK_KINDS][COST_TRANSPORTS];
    int ar_line[LINK_KINDS][COST_TRANSPORTS]; /* the line that gave the first of its two keys */
    /* the line that gave each key (by meta_key_id), 0 = not given yet */
    int key_line[META_PLAIN_KEYS + LINK_KINDS * COST_TRANSPORTS * 2];
} csv_meta;

/* The measured links' keys of a transport, in cost_link_kind's order: the all-reduce's
 * (allreduce_latency_s and allreduce_Bps for the threads, allreduce_mpi_* for MPI: the threads'
 * names predate MPI's), the point-to-point hand-off's (p2p_*, p2p_mpi_*), its sender's own time
 * (p2p_send_*, p2p_mpi_send_*) and its receiver's post (p2p_post_*, p2p_mpi_post_*). */
static const char *const ar_key[LINK_KINDS][COST_TRANSPORTS][2] = {
    {{"allreduce_latency_s", "allreduce_Bps"}, {"allreduce_mpi_latency_s", "allreduce_mpi_Bps"}},
    {{"p2p_latency_s", "p2p_Bps"}, {"p2p_mpi_latency_s", "p2p_mpi_Bps"}},
    {{"p2p_send_s", "p2p_send_Bps"}, {"p2p_mpi_send_s", "p2p_mpi_send_Bps"}},
    {{"p2p_post_s", "p2p_post_Bps"}, {"p2p_mpi_post_s", "p2p_mpi_post_Bps"}}};

/* The model's measured link of kind k on transport t. */
static cost_ar_link *model_link(cost_model *m, int k, int t) {
    cost_ar_link *const of[LINK_KINDS] = {&m->allreduce[t], &m->p2p[t], &m->p2p_send[t], &m->p2p_post[t]};
    return of[k];
}

/* cost.h. Returns the key, or NULL for a kind or transport out of range. */
const char *cost_link_key(cost_link_kind k, cost_transport t, int bandwidth) {
    return k >= 0 && k < LINK_KINDS && t >= 0 && t < COST_TRANSPORTS ? ar_key[k][t][bandwidth ? 1 : 0] : NULL;
}

/* Returns the number of metadata key tok[0..kl) (an index of csv_meta's key_line), or -1 for an
 * unknown key. */
static int meta_key_id(const char *tok, size_t kl) {
    for (size_t i = 0; i < META_PLAIN_KEYS; i++)
        if (cost_word_is(tok, kl, meta_plain_key[i])) return (int)i;
    for (int k = 0; k < LINK_KINDS; k++)
        for (int t = 0; t < COST_TRANSPORTS; t++)
            for (int j = 0; j < 2; j++)
                if (cost_word_is(tok, kl, ar_key[k][t][j])) return (int)META_PLAIN_KEYS + (k * COST_TRANSPORTS + t) * 2 + j;
    return -1;
}

/* Reads the measured link's key tok[kl] = vbuf into meta. Returns -1 when tok is none of ar_key,
 * else PL_OK or PL_EINPUT ("path:line: ..."). */
static int csv_meta_ar(const char *path, int lineno, const char *tok, size_t kl, const char *vbuf, csv_meta *meta,
                       pl_err *e) {
    for (int k = 0; k < LINK_KINDS; k++)
        for (int t = 0; t < COST_TRANSPORTS; t++)
            for (int lat = 0; lat < 2; lat++) {
                if (!cost_word_is(tok, kl, ar_key[k][t][lat])) continue;
                int is_lat = lat == 0;
                double dv;
                if (pl_parse_double(vbuf, &dv) != 0 || !isfinite(dv) || (is_lat ? dv < 0 : !(dv > 0)))
                    return pl_errf(e, PL_EINPUT, "%s:%d: %s must be a %s number, got '%s'", path, lineno,
                                   ar_key[k][t][lat], is_lat ? "non-negative" : "positive", vbuf);
                *(is_lat ? &meta->ar[k][t].latency_s : &meta->ar[k][t].Bps) = dv;
                if (!meta->ar_line[k][t]) meta->ar_line[k][t] = lineno;
                return PL_OK;
            }
    return -1;
}

/* Parses a "#@ key=value ..." line into meta; returns PL_OK or PL_EINPUT ("path:line: ..."). */
static int csv_meta_line(const char *path, int lineno, const char *s, size_t n, csv_meta *meta,
                         pl_err *e) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
        if (i >= n) break;
        size_t t0 = i;
        while (i < n && s[i] != ' ' && s[i] != '\t') i++;
        const char *tok = s + t0;
        size_t tl = i - t0;
        const char *eq = memchr(tok, '=', tl);
        if (!eq || eq == tok)
            return pl_errf(e, PL_EINPUT, "%s:%d: metadata '%.*s' is not key=value", path, lineno,
                           (int)tl, tok);
        size_t kl = (size_t)(eq - tok), vl = tl - kl - 1;
        const char *v = eq + 1;
        char vbuf[64];
        if (vl == 0 || vl >= sizeof vbuf)
            return pl_errf(e, PL_EINPUT, "%s:%d: metadata '%.*s' has no usable value", path,
                           lineno, (int)kl, tok);
        memcpy(vbuf, v, vl);
        vbuf[vl] = 0;
        int id = meta_key_id(tok, kl);
        if (id >= 0 && meta->key_line[id])
            return pl_errf(e, PL_EINPUT, "%s:%d: metadata key '%.*s' given twice (first on line %d)", path, lineno,
                           (int)kl, tok, meta->key_line[id]);
        if (id >= 0) meta->key_line[id] = lineno;
        long lv;
        double dv;
        int rc;
        if (cost_word_is(tok, kl, "name")) {
            int cc = cost_control_char(vbuf, vl);
            if (cc >= 0)
                return pl_errf(e, PL_EINPUT, "%s:%d: control character 0x%02x in the model name", path, lineno, cc);
            snprintf(meta->name, sizeof meta->name, "%s", vbuf);
        } else if (cost_word_is(tok, kl, "microbatch_size")) {
            if (pl_parse_long(vbuf, 1, 1L << 30, &lv) != 0)
                return pl_errf(e, PL_EINPUT, "%s:%d: microbatch_size must be a positive integer, got '%s'",
                               path, lineno, vbuf);
            meta->microbatch_size = (int)lv;
        } else if (cost_word_is(tok, kl, "dtype_bytes")) {
            if (pl_parse_long(vbuf, 1, 64, &lv) != 0)
                return pl_errf(e, PL_EINPUT, "%s:%d: dtype_bytes must be an integer in [1, 64], got '%s'",
                               path, lineno, vbuf);
            meta->dtype_bytes = (int)lv;
        } else if (cost_word_is(tok, kl, "input_bytes")) {
            if (pl_parse_double(vbuf, &dv) != 0)
                return pl_errf(e, PL_EINPUT, "%s:%d: input_bytes must be a number, got '%s'", path, lineno, vbuf);
            const char *bad = cost_bytes_read(dv, &meta->input_bytes);
            if (bad) return pl_errf(e, PL_EINPUT, "%s:%d: input_bytes %s %s", path, lineno, vbuf, bad);
        } else if ((rc = csv_meta_ar(path, lineno, tok, kl, vbuf, meta, e)) != -1) {
            if (rc != PL_OK) return rc;
        } else {
            char known[512] = "name, microbatch_size, dtype_bytes, input_bytes";
            for (int k = 0; k < LINK_KINDS; k++)
                for (int t = 0; t < COST_TRANSPORTS; t++)
                    for (int j = 0; j < 2; j++) {
                        size_t at = strlen(known);
                        snprintf(known + at, sizeof known - at, ", %s", ar_key[k][t][j]);
                    }
            return pl_errf(e, PL_EINPUT, "%s:%d: unknown metadata key '%.*s' (known: %s)", path, lineno, (int)kl, tok, known);
        }
    }
    return PL_OK;
}

/* Reads the header line: fills colof[field] = column id; returns the field count or -1 (e). */
static int csv_header(const char *path, int lineno, const char *line, size_t len, int *colof,
                      pl_err *e) {
    const char *f[COL_N + 1];
    size_t fl[COL_N + 1];
    int nf = split_fields(line, len, f, fl, COL_N);
    if (nf < 0) {
        pl_errf(e, PL_EINPUT, "%s:%d: unterminated quote", path, lineno);
        return -1;
    }
    if (nf > COL_N) {
        pl_errf(e, PL_EINPUT, "%s:%d: header has more than %d columns (a column repeats?)", path,
                lineno, COL_N);
        return -1;
    }
    int seen[COL_N] = {0};
    for (int k = 0; k < nf; k++) {
        int c = col_find(f[k], fl[k]);
        if (c < 0) {
            pl_buf b;
            pl_buf_init(&b);
            for (int j = 0; j < COL_N; j++) pl_buf_printf(&b, "%s%s", j ? " " : "", col_names[j]);
            pl_errf(e, PL_EINPUT, "%s:%d: unknown column '%.*s' (known: %s)", path, lineno,
                    (int)fl[k], f[k], b.data ? b.data : "");
            pl_buf_free(&b);
            return -1;
        }
        if (seen[c]) {
            pl_errf(e, PL_EINPUT, "%s:%d: column '%s' appears twice", path, lineno, col_names[c]);
            return -1;
        }
        seen[c] = 1;
        colof[k] = c;
    }
    static const int required[] = {COL_LAYER, COL_NAME, COL_PARAM, COL_OUT, COL_STASH};
    for (size_t r = 0; r < sizeof required / sizeof *required; r++)
        if (!seen[required[r]]) {
            pl_errf(e, PL_EINPUT, "%s:%d: missing column '%s'", path, lineno, col_names[required[r]]);
            return -1;
        }
    for (int p = 0; p < N_TIME_PAIRS; p++)
        if (!seen[time_pairs[p][0]] && !seen[time_pairs[p][1]]) {
            pl_errf(e, PL_EINPUT, "%s:%d: missing column '%s' or '%s'", path, lineno,
                    col_names[time_pairs[p][0]], col_names[time_pairs[p][1]]);
            return -1;
        }
    return nf;
}

/* One parsed row: cells by column id, with presence flags. */
typedef struct csv_row {
    int has[COL_N];
    double v[COL_N];
    const char *name;
    size_t name_len;
    long layer;
} csv_row;

/* Parses one data row; returns PL_OK or PL_EINPUT naming line and column. */
static int csv_row_parse(const char *path, int lineno, const char *line, size_t len, const int *colof,
                         int nf, csv_row *r, pl_err *e) {
    const char *f[COL_N + 1];
    size_t fl[COL_N + 1];
    int got = split_fields(line, len, f, fl, nf);
    if (got < 0) return pl_errf(e, PL_EINPUT, "%s:%d: unterminated quote or text after a closing quote", path, lineno);
    if (got != nf)
        return pl_errf(e, PL_EINPUT, "%s:%d: expected %d fields, found %s%d", path, lineno, nf,
                       got > nf ? "more than " : "", got > nf ? nf : got);
    memset(r, 0, sizeof *r);
    for (int k = 0; k < nf; k++) {
        int c = colof[k];
        if (c == COL_NAME) {
            if (fl[k] == 0) return pl_errf(e, PL_EINPUT, "%s:%d: missing value for 'name'", path, lineno);
            int cc = cost_control_char(f[k], fl[k]);
            if (cc >= 0)
                return pl_errf(e, PL_EINPUT, "%s:%d: control character 0x%02x in the layer name", path, lineno, cc);
            r->name = f[k];
            r->name_len = fl[k];
            r->has[c] = 1;
            continue;
        }
        if (fl[k] == 0) continue;
        char buf[64];
        if (fl[k] >= sizeof buf)
            return pl_errf(e, PL_EINPUT, "%s:%d: value of '%s' is too long", path, lineno, col_names[c]);
        memcpy(buf, f[k], fl[k]);
        buf[fl[k]] = 0;
        if (c == COL_LAYER) {
            if (pl_parse_long(buf, 0, COST_MAX_LAYERS, &r->layer) != 0)
                return pl_errf(e, PL_EINPUT, "%s:%d: bad layer index '%s'", path, lineno, buf);
            r->has[c] = 1;
            continue;
        }
        double v = 0;
        if (pl_parse_double(buf, &v) != 0)
            return pl_errf(e, PL_EINPUT, "%s:%d: bad number '%s' for '%s'", path, lineno, buf, col_names[c]);
        if (v < 0)
            return pl_errf(e, PL_EINPUT, "%s:%d: negative value %s for '%s'", path, lineno, buf, col_names[c]);
        int64_t bytes;
        const char *bad = c >= COL_PARAM ? cost_bytes_read(v, &bytes) : NULL;
        if (bad) return pl_errf(e, PL_EINPUT, "%s:%d: value %s for '%s' %s", path, lineno, buf, col_names[c], bad);
        r->v[c] = v;
        r->has[c] = 1;
    }
    static const int required[] = {COL_LAYER, COL_PARAM, COL_OUT, COL_STASH};
    for (size_t q = 0; q < sizeof required / sizeof *required; q++)
        if (!r->has[required[q]])
            return pl_errf(e, PL_EINPUT, "%s:%d: missing value for '%s'", path, lineno,
                           col_names[required[q]]);
    for (int p = 0; p < N_TIME_PAIRS; p++)
        if (!r->has[time_pairs[p][0]] && !r->has[time_pairs[p][1]])
            return pl_errf(e, PL_EINPUT, "%s:%d: missing value: need '%s' or '%s'", path, lineno,
                           col_names[time_pairs[p][0]], col_names[time_pairs[p][1]]);
    return PL_OK;
}

/* Growable list of parsed rows plus the cut overrides. */
typedef struct csv_rows {
    cost_layer *l;
    int64_t *in_bytes; /* -1 = chain rule */
    int n;
    size_t cap, in_cap; /* of l and of in_bytes */
} csv_rows;

/* First capacity of the row list (doubled as it fills). */
#define CSV_FIRST_ROWS 64

/* Appends one row to the list; returns PL_OK or PL_ENOMEM. */
static int csv_rows_push(csv_rows *rs, const csv_row *r, int lineno, pl_err *e) {
    cost_layer *nl = pl_grow(rs->l, &rs->cap, (size_t)rs->n, CSV_FIRST_ROWS, sizeof *nl);
    if (!nl) return pl_errf(e, PL_ENOMEM, "out of memory");
    rs->l = nl;
    int64_t *ni = pl_grow(rs->in_bytes, &rs->in_cap, (size_t)rs->n, CSV_FIRST_ROWS, sizeof *ni);
    if (!ni) return pl_errf(e, PL_ENOMEM, "out of memory");
    rs->in_bytes = ni;
    cost_layer *l = &rs->l[rs->n];
    memset(l, 0, sizeof *l);
    l->name = csv_unquote(r->name, r->name_len);
    if (!l->name) return pl_errf(e, PL_ENOMEM, "out of memory");
#define OPT(col) (r->has[col] ? r->v[col] : COST_UNKNOWN)
    l->fwd_s = OPT(COL_FWD_S);
    l->bwd_in_s = OPT(COL_BWD_IN_S);
    l->bwd_w_s = OPT(COL_BWD_W_S);
    l->fwd_flops = OPT(COL_FWD_FLOPS);
    l->bwd_in_flops = OPT(COL_BWD_IN_FLOPS);
    l->bwd_w_flops = OPT(COL_BWD_W_FLOPS);
#undef OPT
    cost_bytes_from_double(r->v[COL_PARAM], &l->param_bytes);
    cost_bytes_from_double(r->v[COL_OUT], &l->out_bytes);
    cost_bytes_from_double(r->v[COL_STASH], &l->stash_bytes);
    l->stash_recompute_bytes = -1;
    if (r->has[COL_STASH_RC]) cost_bytes_from_double(r->v[COL_STASH_RC], &l->stash_recompute_bytes);
    l->w_stash_bytes = -1;
    if (r->has[COL_W_STASH]) cost_bytes_from_double(r->v[COL_W_STASH], &l->w_stash_bytes);
    rs->in_bytes[rs->n] = -1;
    if (r->has[COL_IN]) cost_bytes_from_double(r->v[COL_IN], &rs->in_bytes[rs->n]);
    l->src_line = lineno;
    rs->n++;
    return PL_OK;
}

/* Frees the row list (and the names still owned by it). */
static void csv_rows_free(csv_rows *rs) {
    for (int i = 0; i < rs->n; i++) free(rs->l[i].name);
    free(rs->l);
    free(rs->in_bytes);
}

/* Builds the model of the rows read from path (taking their names) with meta's settings; the
 * cuts follow the chain rule unless a row gives its in_bytes. Returns it, or NULL with e. */
static cost_model *csv_model(const char *path, csv_rows *rs, const csv_meta *meta, pl_err *e) {
    cost_model *m = cost_model_alloc(rs->n, e);
    if (!m) return NULL;
    for (int i = 0; i < rs->n; i++) {
        m->layer[i] = rs->l[i];
        rs->l[i].name = NULL;
    }
    m->microbatch_size = meta->microbatch_size;
    m->dtype_bytes = meta->dtype_bytes;
    m->cut_bytes[0] = meta->input_bytes;
    for (int k = 0; k < LINK_KINDS; k++)
        for (int t = 0; t < COST_TRANSPORTS; t++)
            if (meta->ar[k][t].Bps > 0) *model_link(m, k, t) = meta->ar[k][t];
    cost_model_chain_cuts(m);
    for (int i = 0; i < rs->n; i++)
        if (rs->in_bytes[i] >= 0) m->cut_bytes[i] = rs->in_bytes[i];
    snprintf(m->source, sizeof m->source, "csv");
    if (meta->name[0])
        snprintf(m->name, sizeof m->name, "%s", meta->name);
    else
        cost_model_name_from_path(m, path);
    m->src_path = cost_strndup(path, strlen(path));
    if (!m->src_path) {
        cost_model_free(m);
        pl_errf(e, PL_ENOMEM, "out of memory");
        return NULL;
    }
    return m;
}

/* Reads a profile CSV; returns the model or NULL with "path:line: what" in e. */
cost_model *cost_model_read_csv(const char *path, const char *text, size_t len, pl_err *e) {
    if (!path) path = "<csv>";
    cost_lines c;
    cost_lines_init(&c, text, len);
    csv_meta meta = {.microbatch_size = 1, .dtype_bytes = COST_FP32_BYTES, .input_bytes = 0};
    for (int k = 0; k < LINK_KINDS; k++)
        for (int t = 0; t < COST_TRANSPORTS; t++) meta.ar[k][t] = (cost_ar_link){-1, -1};
    csv_rows rs = {0};
    int colof[COL_N];
    int nf = 0;
    const char *line;
    size_t n;
    while (cost_next_line(&c, &line, &n)) {
        const char *s = cost_trim(line, &n);
        if (n == 0) continue;
        if (n >= 2 && s[0] == '#' && s[1] == '@') {
            if (nf > 0) {
                pl_errf(e, PL_EINPUT, "%s:%d: metadata line after the header", path, c.lineno);
                goto fail;
            }
            if (csv_meta_line(path, c.lineno, s + 2, n - 2, &meta, e) != PL_OK) goto fail;
            continue;
        }
        if (s[0] == '#') continue;
        if (nf == 0) {
            nf = csv_header(path, c.lineno, s, n, colof, e);
            if (nf < 0) goto fail;
            continue;
        }
        csv_row r;
        if (csv_row_parse(path, c.lineno, s, n, colof, nf, &r, e) != PL_OK) goto fail;
        if (r.layer != rs.n) {
            pl_errf(e, PL_EINPUT, "%s:%d: layer index %ld out of order (expected %d)", path,
                    c.lineno, r.layer, rs.n);
            goto fail;
        }
        if (rs.n >= COST_MAX_LAYERS) {
            pl_errf(e, PL_EINPUT, "%s:%d: more than %d layers", path, c.lineno, COST_MAX_LAYERS);
            goto fail;
        }
        if (csv_rows_push(&rs, &r, c.lineno, e) != PL_OK) goto fail;
    }
    if (nf == 0) {
        pl_errf(e, PL_EINPUT, "%s: no header line (empty profile)", path);
        goto fail;
    }
    if (rs.n == 0) {
        pl_errf(e, PL_EINPUT, "%s: no layers after the header", path);
        goto fail;
    }
    for (int k = 0; k < LINK_KINDS; k++)
        for (int t = 0; t < COST_TRANSPORTS; t++)
            if ((meta.ar[k][t].latency_s < 0) != (meta.ar[k][t].Bps < 0)) {
                pl_errf(e, PL_EINPUT, "%s:%d: %s and %s come together", path, meta.ar_line[k][t], ar_key[k][t][0],
                        ar_key[k][t][1]);
                goto fail;
            }
    cost_model *m = csv_model(path, &rs, &meta, e);
    csv_rows_free(&rs);
    return m;
fail:
    csv_rows_free(&rs);
    return NULL;
}

/* Appends a number cell (",value" or "," when unknown). */
static void put_num(pl_buf *b, double v) {
    if (v < 0)
        pl_buf_putc(b, ',');
    else
        pl_buf_printf(b, ",%.17g", v);
}

/* Writes the model as a profile CSV; returns PL_OK, or PL_EINPUT for a name with a comma. */
int cost_model_write_csv(const cost_model *m, pl_buf *out, pl_err *e) {
    char name[64];
    snprintf(name, sizeof name, "%s", m->name[0] ? m->name : "model");
    for (char *p = name; *p; p++)
        if (*p == ' ' || *p == '\t') *p = '_';
    pl_buf_printf(out, "# pipelab layer profile (see cost_models/cost.h)\n");
    pl_buf_printf(out, "#@ name=%s microbatch_size=%d dtype_bytes=%d input_bytes=%lld\n", name,
                  m->microbatch_size, m->dtype_bytes, (long long)m->cut_bytes[0]);
    for (int k = 0; k < LINK_KINDS; k++)
        for (int t = 0; t < COST_TRANSPORTS; t++) {
            const cost_ar_link *l = model_link((cost_model *)m, k, t);
            if (l->Bps > 0)
                pl_buf_printf(out, "#@ %s=%.17g %s=%.17g\n", ar_key[k][t][0], l->latency_s, ar_key[k][t][1], l->Bps);
        }
    for (int c = 0; c < COL_N; c++) pl_buf_printf(out, "%s%s", c ? "," : "", col_names[c]);
    pl_buf_putc(out, '\n');
    for (int i = 0; i < m->n; i++) {
        const cost_layer *l = &m->layer[i];
        const char *nm = l->name && l->name[0] ? l->name : "layer";
        if (strchr(nm, '\n') || strchr(nm, '\r'))
            return pl_errf(e, PL_EINPUT, "layer %d: name contains a line break", i);
        pl_buf_printf(out, "%d,", i);
        if (strpbrk(nm, ",\"") || nm[0] == ' ' || nm[strlen(nm) - 1] == ' ') {
            pl_buf_putc(out, '"');
            for (const char *c = nm; *c; c++) {
                if (*c == '"') pl_buf_putc(out, '"');
                pl_buf_putc(out, *c);
            }
            pl_buf_putc(out, '"');
        } else {
            pl_buf_puts(out, nm);
        }
        put_num(out, l->fwd_s);
        put_num(out, l->bwd_in_s);
        put_num(out, l->bwd_w_s);
        put_num(out, l->fwd_flops);
        put_num(out, l->bwd_in_flops);
        put_num(out, l->bwd_w_flops);
        pl_buf_printf(out, ",%lld,%lld,%lld", (long long)l->param_bytes, (long long)l->out_bytes,
                      (long long)l->stash_bytes);
        put_num(out, (double)l->stash_recompute_bytes);
        int64_t chain = i == 0 ? m->cut_bytes[0] : m->layer[i - 1].out_bytes;
        if (i > 0 && m->cut_bytes[i] != chain)
            pl_buf_printf(out, ",%lld", (long long)m->cut_bytes[i]);
        else
            pl_buf_putc(out, ',');
        put_num(out, (double)l->w_stash_bytes);
        pl_buf_putc(out, '\n');
    }
    if (out->failed) return pl_errf(e, PL_ENOMEM, "out of memory");
    return PL_OK;
}

/* ---------------------------------------------------------------- model specs */

typedef cost_spec_kv spec_kv;

/* cost.h. */
int cost_spec_split(const char *gen, const char *s, cost_spec_kv *kv, int max, pl_err *e) {
    int n = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        const char *eq = memchr(s, '=', len);
        if (!eq || eq == s) {
            pl_errf(e, PL_EINPUT, "model %s: '%.*s' is not key=value", gen, (int)len, s);
            return -1;
        }
        size_t kl = (size_t)(eq - s), vl = len - kl - 1;
        if (n >= max || kl >= sizeof kv->key || vl >= sizeof kv->val || vl == 0) {
            pl_errf(e, PL_EINPUT, "model %s: bad parameter '%.*s'", gen, (int)len, s);
            return -1;
        }
        memcpy(kv[n].key, s, kl);
        kv[n].key[kl] = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(kv[i].key, kv[n].key) == 0) {
                pl_errf(e, PL_EINPUT, "model %s: '%s' given twice", gen, kv[n].key);
                return -1;
            }
        memcpy(kv[n].val, eq + 1, vl);
        kv[n].val[vl] = 0;
        n++;
        s += len;
        if (*s == ',' && !*++s) { /* a comma must be followed by another key=value */
            pl_errf(e, PL_EINPUT, "model %s: a trailing comma (a key=value missing after it)", gen);
            return -1;
        }
    }
    return n;
}

/* Parses an integer parameter in [lo, hi]; returns PL_OK or PL_EINPUT naming it. */
static int spec_int(const char *gen, const spec_kv *kv, long lo, long hi, int *out, pl_err *e) {
    long v;
    if (pl_parse_long(kv->val, lo, hi, &v) != 0)
        return pl_errf(e, PL_EINPUT, "model %s: %s must be an integer in [%ld, %ld], got '%s'", gen,
                       kv->key, lo, hi, kv->val);
    *out = (int)v;
    return PL_OK;
}

/* Parses a non-negative number parameter; returns PL_OK or PL_EINPUT naming it. */
static int spec_num(const char *gen, const spec_kv *kv, double *out, pl_err *e) {
    double v = 0;
    if (pl_parse_double(kv->val, &v) != 0 || v < 0)
        return pl_errf(e, PL_EINPUT, "model %s: %s must be a non-negative number, got '%s'", gen,
                       kv->key, kv->val);
    *out = v;
    return PL_OK;
}

/* Parses a byte-count parameter; returns PL_OK or PL_EINPUT. */
static int spec_bytes(const char *gen, const spec_kv *kv, int64_t *out, pl_err *e) {
    double v = 0;
    if (spec_num(gen, kv, &v, e) != PL_OK) return e ? e->code : PL_EINPUT;
    const char *bad = cost_bytes_read(v, out);
    if (bad) return pl_errf(e, PL_EINPUT, "model %s: %s %s %s", gen, kv->key, kv->val, bad);
    return PL_OK;
}

/* Builds a uniform model from spec parameters. */
static cost_model *open_uniform(const spec_kv *kv, int n, pl_err *e) {
    cost_uniform_opts o;
    cost_uniform_defaults(&o);
    const char *time_key = NULL; /* a time given, which fwd_flops would silently override */
    for (int i = 0; i < n; i++) {
        const char *k = kv[i].key;
        int rc;
        if (!strcmp(k, "fwd_s") || !strcmp(k, "bwd_s") || !strcmp(k, "bwd_in_s") || !strcmp(k, "bwd_w_s")) time_key = k;
        if (!strcmp(k, "layers")) rc = spec_int("uniform", &kv[i], 1, COST_MAX_LAYERS, &o.layers, e);
        else if (!strcmp(k, "microbatch")) rc = spec_int("uniform", &kv[i], 1, 1 << 30, &o.microbatch, e);
        else if (!strcmp(k, "fwd_s")) rc = spec_num("uniform", &kv[i], &o.fwd_s, e);
        else if (!strcmp(k, "bwd_s")) rc = spec_num("uniform", &kv[i], &o.bwd_s, e);
        else if (!strcmp(k, "bwd_in_s")) rc = spec_num("uniform", &kv[i], &o.bwd_in_s, e);
        else if (!strcmp(k, "bwd_w_s")) rc = spec_num("uniform", &kv[i], &o.bwd_w_s, e);
        else if (!strcmp(k, "fwd_flops")) rc = spec_num("uniform", &kv[i], &o.fwd_flops, e);
        else if (!strcmp(k, "param_bytes")) rc = spec_bytes("uniform", &kv[i], &o.param_bytes, e);
        else if (!strcmp(k, "out_bytes")) rc = spec_bytes("uniform", &kv[i], &o.out_bytes, e);
        else if (!strcmp(k, "stash_bytes")) rc = spec_bytes("uniform", &kv[i], &o.stash_bytes, e);
        else if (!strcmp(k, "stash_recompute_bytes"))
            rc = spec_bytes("uniform", &kv[i], &o.stash_recompute_bytes, e);
        else if (!strcmp(k, "w_stash_bytes")) rc = spec_bytes("uniform", &kv[i], &o.w_stash_bytes, e);
        else
            rc = pl_errf(e, PL_EINPUT,
                         "model uniform: unknown parameter '%s' (known: layers microbatch fwd_s bwd_s "
                         "bwd_in_s bwd_w_s fwd_flops param_bytes out_bytes stash_bytes "
                         "stash_recompute_bytes w_stash_bytes)", k);
        if (rc != PL_OK) return NULL;
    }
    if (time_key && o.fwd_flops > 0) {
        pl_errf(e, PL_EINPUT, "model uniform: give times (%s) or fwd_flops, not both: with fwd_flops every "
                "layer's times come from the hardware's FLOP rate", time_key);
        return NULL;
    }
    return cost_model_uniform(&o, e);
}

/* Builds an MLP model from spec parameters. */
static cost_model *open_mlp(const spec_kv *kv, int n, pl_err *e) {
    cost_mlp_opts o = {.width = 0, .depth = 0, .microbatch = 1, .ffn_mult = 4};
    for (int i = 0; i < n; i++) {
        const char *k = kv[i].key;
        int rc;
        if (!strcmp(k, "width")) rc = spec_int("mlp", &kv[i], 1, 1 << 24, &o.width, e);
        else if (!strcmp(k, "depth")) rc = spec_int("mlp", &kv[i], 1, COST_MAX_LAYERS, &o.depth, e);
        else if (!strcmp(k, "microbatch")) rc = spec_int("mlp", &kv[i], 1, 1 << 30, &o.microbatch, e);
        else if (!strcmp(k, "ffn_mult")) rc = spec_int("mlp", &kv[i], 1, 64, &o.ffn_mult, e);
        else
            rc = pl_errf(e, PL_EINPUT, "model mlp: unknown parameter '%s' (known: width depth microbatch ffn_mult)", k);
        if (rc != PL_OK) return NULL;
    }
    return cost_model_mlp(&o, e);
}

/* Reads transformer spec parameters into o (microbatch 1 unless given); PL_OK or PL_EINPUT. */
static int transformer_params(const spec_kv *kv, int n, cost_transformer_opts *o, pl_err *e) {
    memset(o, 0, sizeof *o);
    o->microbatch = 1;
    for (int i = 0; i < n; i++) {
        const char *k = kv[i].key;
        int *dst = !strcmp(k, "layers")       ? &o->layers
                   : !strcmp(k, "hidden")     ? &o->hidden
                   : !strcmp(k, "heads")      ? &o->heads
                   : !strcmp(k, "seq")        ? &o->seq
                   : !strcmp(k, "vocab")      ? &o->vocab
                   : !strcmp(k, "microbatch") ? &o->microbatch
                                              : NULL;
        if (!dst)
            return pl_errf(e, PL_EINPUT,
                           "model transformer: unknown parameter '%s' (known: layers hidden heads seq vocab microbatch)", k);
        if (spec_int("transformer", &kv[i], 1, 1 << 30, dst, e) != PL_OK) return PL_EINPUT;
    }
    return PL_OK;
}

/* Builds a transformer model from spec parameters. */
static cost_model *open_transformer(const spec_kv *kv, int n, pl_err *e) {
    cost_transformer_opts o;
    if (transformer_params(kv, n, &o, e) != PL_OK) return NULL;
    return cost_model_transformer(&o, e);
}

/* Parses a "transformer:k=v,..." spec into o; returns PL_OK or PL_EINPUT (not a transformer
 * spec, or a bad parameter). */
int cost_transformer_spec(const char *spec, cost_transformer_opts *o, pl_err *e) {
    static const char gen[] = "transformer";
    size_t gl = strlen(gen);
    if (!spec || strncmp(spec, gen, gl) != 0 || (spec[gl] != 0 && spec[gl] != ':'))
        return pl_errf(e, PL_EINPUT, "model '%s' is not a transformer:layers=..,hidden=..,heads=..,seq=..,vocab=.. "
                       "spec, which the parallel layout needs", spec ? spec : "");
    spec_kv kv[32];
    int n = cost_spec_split(gen, spec[gl] ? spec + gl + 1 : "", kv, 32, e);
    if (n < 0) return PL_EINPUT;
    return transformer_params(kv, n, o, e);
}

/* Opens a generator spec ("mlp:width=..") or a profile file; returns NULL with e on error. */
cost_model *cost_model_open(const char *spec, pl_err *e) {
    static const char *const gens[] = {"uniform", "mlp", "transformer"};
    for (int g = 0; g < 3; g++) {
        size_t gl = strlen(gens[g]);
        if (strncmp(spec, gens[g], gl) != 0 || (spec[gl] != 0 && spec[gl] != ':')) continue;
        spec_kv kv[32];
        int n = cost_spec_split(gens[g], spec[gl] ? spec + gl + 1 : "", kv, 32, e);
        if (n < 0) return NULL;
        if (g == 0) return open_uniform(kv, n, e);
        if (g == 1) return open_mlp(kv, n, e);
        return open_transformer(kv, n, e);
    }
    char *text = NULL;
    size_t len = 0;
    if (pl_read_file(spec, (size_t)1 << 30, &text, &len, e) != PL_OK) {
        pl_err_prefix(e, "model '%s' is neither a generator (uniform, mlp, transformer) nor a readable file: ", spec);
        return NULL;
    }
    if (pl_text_check(spec, text, len, e) != PL_OK) {
        free(text);
        return NULL;
    }
    size_t sl = strlen(spec);
    cost_model *m;
    if (sl >= 4 && strcmp(spec + sl - 4, ".csv") == 0)
        m = cost_model_read_csv(spec, text, len, e);
    else
        m = cost_model_read_graph(spec, text, len, 1, e);
    free(text);
    return m;
}
