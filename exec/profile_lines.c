/* profile_lines.c: reading back the executor's comment lines of a profile CSV (exec/profile.c
 * writes them): the concurrency and STEP line, each worker's own times, from which a prediction
 * takes each rank's STEP and its reuse-distance ratios, and each worker's pass-length factors
 * (profile_windows.c). */
#include "cost.h"
#include "exec_int.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes read of the profile CSV's executor line and of a worker's line; a worker line's fields
 * without and with the reuse-distance times, with the first-touch times too, with the again
 * times too, and with the I next to its forward too. */
#define PROF_META_LINE_MAX 256
#define PROF_WORKER_LINE_MAX 1024
#define PROF_WORKER_FIELDS 6
#define PROF_WORKER_HOT_FIELDS 9
#define PROF_WORKER_FIRST_FIELDS 15
#define PROF_WORKER_AGAIN_FIELDS 18
#define PROF_WORKER_NEXT_FIELDS 19
#define PROF_WORKER_BACK_FIELDS 20
#define PROF_WORKER_SD_FIELDS 21
#define PROF_WORKER_VERSIONS_FIELDS 27
#define PROF_WORKER_STA_FIELDS 28 /* through step_mean_s */
#define PROF_WORKER_SHARE_FIELDS 30 /* through fwd_side_s */
#define PROF_WORKER_CLASS_FIELDS 34 /* through bwd_cross_s */

/* Returns 1 when offset i of text[len] starts a line: right after a newline, or at the start of
 * the text past a UTF-8 byte order mark (pl_bom_len, the rule of every text reader; the cost
 * model's reader skips it too), else 0. */
static int line_start(const char *text, size_t len, size_t i) {
    return i == pl_bom_len(text, len) || (i > 0 && text[i - 1] == '\n');
}

/* Returns the offset of the first line of text[len] at or after offset `from` that starts with
 * key (len when none) and copies that line, from skip bytes after its start to its end (a CR
 * before it left out), into buf[size] (cut at size - 1 bytes). */
static size_t find_line(const char *text, size_t len, size_t from, const char *key, size_t skip, char *buf, size_t size) {
    size_t kl = strlen(key);
    for (size_t i = from; i + kl <= len; i++) {
        if (!line_start(text, len, i) || memcmp(text + i, key, kl) != 0) continue;
        size_t n = 0;
        for (size_t j = i + skip; j < len && text[j] != '\n' && n + 1 < size; j++) buf[n++] = text[j];
        while (n > 0 && buf[n - 1] == '\r') n--; /* a CRLF file's line */
        buf[n] = '\0';
        return i;
    }
    return len;
}

/* The executor line's keys: concurrency, an integer >= 1 (the workers that profiled); step_s, a
 * block's STEP in seconds, and rank_drift, the ranks' drift (0: none), finite numbers >= 0. */
enum { META_CONCURRENCY, META_STEP, META_DRIFT, META_KEYS };
static const char *const meta_keys[META_KEYS] = {"concurrency", "step_s", "rank_drift"};

/* The executor line's values, meta_keys' order, and which of them it has. */
typedef struct meta_vals {
    int has[META_KEYS];
    double v[META_KEYS];
} meta_vals;

/* One "key=value" field of an executor line: its key k[kl] and its value, copied into v (cut at
 * FIELD_VALUE_MAX - 1 bytes; vl its whole length). */
#define FIELD_VALUE_MAX 64
typedef struct field {
    const char *k;
    size_t kl, vl;
    char v[FIELD_VALUE_MAX];
} field;

/* Reads the next field of s[n] from *i on into f, moving *i past it. Returns 1, 0 at the end of
 * the line, or -1 with what is wrong in why[size] for a field that is not key=value. */
static int next_field(const char *s, size_t n, size_t *i, field *f, char *why, size_t size) {
    while (*i < n && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\r')) ++*i;
    if (*i >= n) return 0;
    size_t t0 = *i;
    while (*i < n && s[*i] != ' ' && s[*i] != '\t' && s[*i] != '\r') ++*i;
    const char *tok = s + t0, *eq = memchr(tok, '=', *i - t0);
    if (!eq || eq == tok) {
        snprintf(why, size, "'%.*s' is not key=value", (int)(*i - t0 < 64 ? *i - t0 : 64), tok);
        return -1;
    }
    f->k = tok;
    f->kl = (size_t)(eq - tok);
    f->vl = *i - t0 - f->kl - 1;
    size_t c = f->vl < FIELD_VALUE_MAX ? f->vl : FIELD_VALUE_MAX - 1;
    memcpy(f->v, eq + 1, c);
    f->v[c] = '\0';
    return 1;
}

/* Returns 1 when field f's key is key. */
static int field_is(const field *f, const char *key) { return strlen(key) == f->kl && memcmp(f->k, key, f->kl) == 0; }

/* Reads field f's value as a finite number >= 0 into *out: 0, or -1 with "KEY must be a finite
 * number >= 0 (got 'V')" in why[size]. */
static int field_time(const field *f, double *out, char *why, size_t size) {
    if (f->vl < FIELD_VALUE_MAX && pl_parse_double(f->v, out) == 0 && isfinite(*out) && *out >= 0) return 0;
    snprintf(why, size, "%.*s must be a finite number >= 0 (got '%s%s')", (int)(f->kl < 64 ? f->kl : 64), f->k, f->v,
             f->vl < FIELD_VALUE_MAX ? "" : "...");
    return -1;
}

/* Reads field f's value as an integer in [lo, hi] into *out: 0, or -1 with "KEY must be an
 * integer from LO to HI (got 'V')" ("... >= LO" where hi is INT_MAX) in why[size]. */
static int field_int(const field *f, long lo, long hi, int *out, char *why, size_t size) {
    long v = 0;
    if (f->vl < FIELD_VALUE_MAX && pl_parse_long(f->v, lo, hi, &v) == 0) {
        *out = (int)v;
        return 0;
    }
    char range[64];
    if (hi == INT_MAX) snprintf(range, sizeof range, ">= %ld", lo);
    else snprintf(range, sizeof range, "from %ld to %ld", lo, hi);
    snprintf(why, size, "%.*s must be an integer %s (got '%s%s')", (int)(f->kl < 64 ? f->kl : 64), f->k, range, f->v,
             f->vl < FIELD_VALUE_MAX ? "" : "...");
    return -1;
}

/* Parses the executor line's "key=value ..." fields in s[n] (after its key) into m. Returns 0, or
 * -1 with what is wrong in why[size]: a field that is not key=value, an unknown or repeated key,
 * a value out of its range (meta_keys), concurrency or step_s missing. */
static int meta_fields(const char *s, size_t n, meta_vals *m, char *why, size_t size) {
    memset(m, 0, sizeof *m);
    size_t i = 0;
    field f;
    int got;
    while ((got = next_field(s, n, &i, &f, why, size)) == 1) {
        int k = 0;
        while (k < META_KEYS && !field_is(&f, meta_keys[k])) k++;
        if (k == META_KEYS) {
            snprintf(why, size, "unknown key '%.*s' (known: %s, %s, %s)", (int)(f.kl < 64 ? f.kl : 64), f.k,
                     meta_keys[META_CONCURRENCY], meta_keys[META_STEP], meta_keys[META_DRIFT]);
            return -1;
        }
        if (m->has[k]) {
            snprintf(why, size, "key '%s' appears twice", meta_keys[k]);
            return -1;
        }
        int iv = 0;
        if (k == META_CONCURRENCY ? field_int(&f, 1, INT_MAX, &iv, why, size) : field_time(&f, &m->v[k], why, size))
            return -1;
        if (k == META_DRIFT && m->v[k] > COST_CV_MAX) { /* a coefficient of variation, as the simulator takes */
            snprintf(why, size, "rank_drift must be at most %d (got '%.*s')", COST_CV_MAX, (int)(f.vl < 64 ? f.vl : 64), f.v);
            return -1;
        }
        if (k == META_CONCURRENCY) m->v[k] = iv;
        m->has[k] = 1;
    }
    if (got < 0) return -1;
    for (int k = META_CONCURRENCY; k <= META_STEP; k++)
        if (!m->has[k]) {
            snprintf(why, size, "missing key '%s' (the line is \"# " EXEC_PROFILE_META
                                " concurrency=P step_s=S [rank_drift=D]\")",
                     meta_keys[k]);
            return -1;
        }
    return 0;
}

/* Returns 1 when the line text[n] is the executor line: "# pipelab-exec " and not a
 * worker's, windows or rounds line. */
static int is_meta_line(const char *text, size_t n) {
    const char *key = "# " EXEC_PROFILE_META " ";
    static const char *const other[] = {"worker=", "windows ", "rounds "};
    size_t kl = strlen(key);
    if (n < kl || memcmp(text, key, kl) != 0) return 0;
    for (size_t k = 0; k < sizeof other / sizeof *other; k++)
        if (n - kl >= strlen(other[k]) && memcmp(text + kl, other[k], strlen(other[k])) == 0) return 0;
    return 1;
}

/* Reads the first executor line of text[len] into m; returns 0, or -1 when it has none or a
 * malformed one (exec_profile_lines_check names what is wrong). */
static int meta_read(const char *text, size_t len, meta_vals *m) {
    char line[PROF_META_LINE_MAX], why[256];
    const char *key = "# " EXEC_PROFILE_META " ";
    size_t i = 0;
    for (; (i = find_line(text, len, i, key, strlen(key), line, sizeof line)) < len; i++) {
        const char *nl = memchr(text + i, '\n', len - i);
        if (is_meta_line(text + i, nl ? (size_t)(nl - (text + i)) : len - i)) break;
    }
    return i < len && meta_fields(line, strlen(line), m, why, sizeof why) == 0 ? 0 : -1;
}

int exec_profile_meta(const char *text, size_t len, int *concurrency, double *step_s) {
    meta_vals m;
    if (meta_read(text, len, &m)) return -1;
    if (concurrency) *concurrency = (int)m.v[META_CONCURRENCY];
    if (step_s) *step_s = m.v[META_STEP];
    return 0;
}

int exec_profile_drift(const char *text, size_t len, double *drift) {
    meta_vals m;
    if (meta_read(text, len, &m) || !(m.v[META_DRIFT] > 0)) return -1;
    *drift = m.v[META_DRIFT];
    return 0;
}

/* The keys of a worker line ("# pipelab-exec worker=W core=C KEY=T ..."), after worker= and core=,
 * in the order exec_worker_line writes them and the readers expect them, each with where its time
 * lives in exec_layer_profile. A line may end after any of them from step_s on (a profile of an
 * earlier pipelab): the terms whose times it lacks are then off. */
typedef struct worker_key {
    const char *key;
    size_t off;
} worker_key;
#define WORKER_KEY(k, f) {k, offsetof(exec_layer_profile, f)}
static const worker_key worker_keys[] = {
    WORKER_KEY("fwd_s", f_s), WORKER_KEY("bwd_in_s", i_s), WORKER_KEY("bwd_w_s", w_s), WORKER_KEY("step_s", step_s),
    WORKER_KEY("bwd_in0_s", i0_s), WORKER_KEY("bwd_in_hot_s", i_hot_s), WORKER_KEY("bwd_w_hot_s", w_hot_s),
    WORKER_KEY("fwd_first_s", f_first_s), WORKER_KEY("bwd_in_first_s", i_first_s),
    WORKER_KEY("bwd_w_first_s", w_first_s), WORKER_KEY("fwd_rest_s", f_rest_s), WORKER_KEY("bwd_in_rest_s", i_rest_s),
    WORKER_KEY("bwd_w_rest_s", w_rest_s), WORKER_KEY("fwd_again_s", f_again_s),
    WORKER_KEY("bwd_in_again_s", i_again_s), WORKER_KEY("bwd_w_again_s", w_again_s),
    WORKER_KEY("bwd_in_next_s", i_next_s), WORKER_KEY("fwd_back_s", f_back_s), WORKER_KEY("fwd_sd_s", f_sd_s),
    WORKER_KEY("fwd_two_s", f_two_s), WORKER_KEY("bwd_in_two_s", i_two_s), WORKER_KEY("bwd_w_two_s", w_two_s),
    WORKER_KEY("fwd_one_s", f_one_s), WORKER_KEY("bwd_in_one_s", i_one_s), WORKER_KEY("bwd_w_one_s", w_one_s),
    WORKER_KEY("step_mean_s", step_mean_s), WORKER_KEY("fwd_alone_s", f_alone_s), WORKER_KEY("fwd_side_s", f_side_s),
    WORKER_KEY("fwd_cross_s", f_cross_s), WORKER_KEY("bwd_alone_s", b_alone_s), WORKER_KEY("bwd_side_s", b_side_s),
    WORKER_KEY("bwd_cross_s", b_cross_s)};
#undef WORKER_KEY
#define WORKER_KEYS (sizeof worker_keys / sizeof *worker_keys)
_Static_assert(WORKER_KEYS + 2 == PROF_WORKER_CLASS_FIELDS, "a worker line's fields end with bwd_cross_s");

/* Returns where worker key k's time lives in p. */
static double *worker_time(exec_layer_profile *p, size_t k) { return (double *)((char *)p + worker_keys[k].off); }

void exec_worker_line(const exec_layer_profile *p, int worker, int core, pl_buf *out) {
    pl_buf_printf(out, "# " EXEC_PROFILE_META " worker=%d core=%d", worker, core);
    for (size_t k = 0; k < WORKER_KEYS; k++)
        pl_buf_printf(out, " %s=%.9g", worker_keys[k].key, *(const double *)((const char *)p + worker_keys[k].off));
    pl_buf_puts(out, "\n");
}

/* One worker line of a profile CSV: its worker, the core it ran on (-1: not pinned), how many of
 * its fields were read (worker= and core= among them: PROF_WORKER_FIELDS through step_s,
 * PROF_WORKER_HOT_FIELDS with the reuse-distance times, ...), and its times (0 where it has none). */
typedef struct worker_line {
    int w, core, fields;
    exec_layer_profile p;
} worker_line;

/* Parses a worker line's fields in s[n] ("worker=W core=C fwd_s=T ...", after "# pipelab-exec ")
 * into l. Returns 0, or -1 with what is wrong in why[size]: a field that is not key=value, a key
 * other than the one expected there (worker, core, then worker_keys in order), a worker outside
 * [0, SCHED_MAX_RANKS), a core below -1, a time that is not a finite number >= 0, a line that
 * ends before step_s. */
static int worker_parse(const char *s, size_t n, worker_line *l, char *why, size_t size) {
    memset(l, 0, sizeof *l);
    l->w = -1;
    size_t i = 0;
    field f;
    int got;
    while ((got = next_field(s, n, &i, &f, why, size)) == 1) {
        const size_t k = (size_t)l->fields;
        const char *want = k == 0 ? "worker" : k == 1 ? "core" : k - 2 < WORKER_KEYS ? worker_keys[k - 2].key : NULL;
        if (!want || !field_is(&f, want)) {
            if (want)
                snprintf(why, size, "field %zu must be %s=..., got '%.*s' (a worker line's keys, in order: worker, core, "
                                    "%s, %s, ... %s)",
                         k + 1, want, (int)(f.kl < 64 ? f.kl : 64), f.k, worker_keys[0].key, worker_keys[1].key,
                         worker_keys[WORKER_KEYS - 1].key);
            else
                snprintf(why, size, "'%.*s' after the last key of a worker line, %s", (int)(f.kl < 64 ? f.kl : 64), f.k,
                         worker_keys[WORKER_KEYS - 1].key);
            return -1;
        }
        if (k == 0 ? field_int(&f, 0, SCHED_MAX_RANKS - 1, &l->w, why, size)
            : k == 1 ? field_int(&f, -1, INT_MAX, &l->core, why, size)
                     : field_time(&f, worker_time(&l->p, k - 2), why, size))
            return -1;
        l->fields++;
    }
    if (got < 0) return -1;
    /* the forward's jitter, fwd_sd_s / fwd_s, is a coefficient of variation the simulator takes */
    if (l->fields >= PROF_WORKER_SD_FIELDS && l->p.f_sd_s > COST_CV_MAX * l->p.f_s) {
        snprintf(why, size, "fwd_sd_s must be at most %d times fwd_s (got %g against %g)", COST_CV_MAX, l->p.f_sd_s, l->p.f_s);
        return -1;
    }
    if (l->fields < PROF_WORKER_FIELDS) {
        const size_t k = (size_t)l->fields;
        snprintf(why, size, "missing key '%s' (a worker line has worker, core, %s .. %s at least)",
                 k == 0 ? "worker" : k == 1 ? "core" : worker_keys[k - 2].key, worker_keys[0].key,
                 worker_keys[PROF_WORKER_FIELDS - 3].key);
        return -1;
    }
    return 0;
}

/* Reads the worker lines of text[len] into line[w] (w in [0, ranks)). Returns how many workers
 * it found, or -1 for a malformed line (exec_profile_lines_check names what is wrong) or a
 * worker out of range. */
static int worker_lines(const char *text, size_t len, int ranks, worker_line *line) {
    const char *key = "# " EXEC_PROFILE_META " worker=";
    const size_t skip = strlen(key) - strlen("worker="), kl = strlen(key);
    int found = 0;
    for (int q = 0; q < ranks; q++) line[q].w = -1;
    worker_line *l = pl_calloc(1, sizeof *l);
    char why[256];
    for (size_t i = 0; l && i + kl <= len; i++) {
        if (!line_start(text, len, i) || memcmp(text + i, key, kl) != 0) continue;
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = (nl ? (size_t)(nl - (text + i)) : len - i) - skip;
        if (worker_parse(text + i + skip, n, l, why, sizeof why) != 0 || l->w >= ranks) {
            found = -1; /* malformed, or measured with more workers than this run has ranks */
            break;
        }
        if (line[l->w].w < 0) found++;
        line[l->w] = *l;
    }
    free(l);
    return l ? found : -1;
}

int exec_profile_worker_steps(const char *text, size_t len, int ranks, double *step_s) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1;
    for (int q = 0; q < ranks; q++) step_s[q] = found == ranks ? l[q].p.step_s : -1;
    free(l);
    return found == ranks ? 0 : -1;
}

int exec_profile_worker_step_means(const char *text, size_t len, int ranks, double *step_mean_s) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        ok = l[q].fields >= PROF_WORKER_STA_FIELDS && l[q].p.step_mean_s > 0;
        if (ok) step_mean_s[q] = l[q].p.step_mean_s;
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_share(const char *text, size_t len, int ranks, double *ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const exec_layer_profile *x = &l[q].p;
        ok = l[q].fields >= PROF_WORKER_SHARE_FIELDS && x->f_alone_s > 0 && x->f_side_s > 0 &&
             isfinite(x->f_alone_s / x->f_side_s);
        if (ok) ratio[q] = x->f_alone_s / x->f_side_s;
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_share_class(const char *text, size_t len, int ranks, double *ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const exec_layer_profile *x = &l[q].p;
        const double num[3] = {x->f_cross_s, x->b_alone_s, x->b_cross_s}, den[3] = {x->f_side_s, x->b_side_s, x->b_side_s};
        ok = l[q].fields >= PROF_WORKER_CLASS_FIELDS;
        for (int c = 0; ok && c < 3; c++) {
            ok = num[c] > 0 && den[c] > 0 && isfinite(num[c] / den[c]);
            if (ok) ratio[3 * q + c] = num[c] / den[c];
        }
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_reuse(const char *text, size_t len, int ranks, double *i_ratio, double *w_ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const exec_layer_profile *x = &l[q].p;
        ok = l[q].fields >= PROF_WORKER_HOT_FIELDS && x->i_s > 0 && x->w_s > 0 && x->i_hot_s > 0 && x->w_hot_s > 0 &&
             isfinite(x->i_hot_s / x->i_s) && isfinite(x->w_hot_s / x->w_s);
        if (ok) {
            i_ratio[q] = x->i_hot_s / x->i_s;
            w_ratio[q] = x->w_hot_s / x->w_s;
        }
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_first(const char *text, size_t len, int ranks, double *first, double *rest) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const exec_layer_profile *x = &l[q].p;
        const double all[3] = {x->f_s, x->i_s, x->w_s}, fi[3] = {x->f_first_s, x->i_first_s, x->w_first_s},
                     re[3] = {x->f_rest_s, x->i_rest_s, x->w_rest_s};
        ok = l[q].fields >= PROF_WORKER_FIRST_FIELDS;
        for (int c = 0; ok && c < 3; c++) {
            ok = all[c] > 0 && fi[c] > 0 && re[c] > 0 && isfinite(fi[c] / all[c]) && isfinite(re[c] / all[c]);
            if (ok) {
                first[3 * q + c] = fi[c] / all[c];
                rest[3 * q + c] = re[c] / all[c];
            }
        }
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_again(const char *text, size_t len, int ranks, double *again) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const exec_layer_profile *x = &l[q].p;
        const double all[3] = {x->f_s, x->i_s, x->w_s}, ag[3] = {x->f_again_s, x->i_again_s, x->w_again_s};
        ok = l[q].fields >= PROF_WORKER_AGAIN_FIELDS;
        for (int c = 0; ok && c < 3; c++) {
            ok = all[c] > 0 && ag[c] > 0 && isfinite(ag[c] / all[c]);
            if (ok) again[3 * q + c] = ag[c] / all[c];
        }
    }
    free(l);
    return ok ? 0 : -1;
}

/* Sets ratio[w] to time num over time den of every rank's worker line (each at that offset in
 * exec_layer_profile) when every line has at least `fields` fields and both are positive and the
 * ratio finite: returns 0; else -1 (the term is then off). */
static int worker_ratio(const char *text, size_t len, int ranks, int fields, size_t num, size_t den, double *ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const char *x = (const char *)&l[q].p;
        double a = *(const double *)(x + num), b = *(const double *)(x + den);
        ok = l[q].fields >= fields && b > 0 && a > 0 && isfinite(a / b);
        if (ok) ratio[q] = a / b;
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_versions(const char *text, size_t len, int ranks, double *ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks, timed = 0;
    for (int q = 0; ok && q < ranks; q++) {
        const exec_layer_profile *x = &l[q].p;
        const double two[3] = {x->f_two_s, x->i_two_s, x->w_two_s}, one[3] = {x->f_one_s, x->i_one_s, x->w_one_s};
        ok = l[q].fields >= PROF_WORKER_VERSIONS_FIELDS;
        int all = 1, none = 1; /* all six times positive, the ratios finite; all six 0 */
        for (int c = 0; ok && c < 3; c++) {
            all = all && two[c] > 0 && one[c] > 0 && isfinite(two[c] / one[c]);
            none = none && two[c] == 0 && one[c] == 0;
        }
        ok = ok && (all || none);
        for (int c = 0; ok && c < 3; c++) ratio[3 * q + c] = all ? two[c] / one[c] : 1;
        timed += ok && all;
    }
    free(l);
    return ok && timed > 0 ? timed : -1;
}

int exec_profile_worker_next(const char *text, size_t len, int ranks, double *ratio) {
    return worker_ratio(text, len, ranks, PROF_WORKER_NEXT_FIELDS, offsetof(exec_layer_profile, i_next_s),
                        offsetof(exec_layer_profile, i_s), ratio);
}

int exec_profile_worker_back(const char *text, size_t len, int ranks, double *ratio) {
    return worker_ratio(text, len, ranks, PROF_WORKER_BACK_FIELDS, offsetof(exec_layer_profile, f_back_s),
                        offsetof(exec_layer_profile, f_s), ratio);
}

int exec_profile_worker_jitter(const char *text, size_t len, int ranks, double *cv) {
    return worker_ratio(text, len, ranks, PROF_WORKER_SD_FIELDS, offsetof(exec_layer_profile, f_sd_s),
                        offsetof(exec_layer_profile, f_s), cv);
}

/* Reads a worker number at *s (digits, below SCHED_MAX_RANKS) into *w and moves *s past it;
 * returns 0, or -1 when there is none or it is too large. */
static int worker_number(const char **s, int *w) {
    long v = 0;
    const char *p = *s;
    for (; *p >= '0' && *p <= '9' && v < SCHED_MAX_RANKS; p++) v = 10 * v + (*p - '0');
    if (p == *s || v >= SCHED_MAX_RANKS) return -1;
    *w = (int)v;
    *s = p;
    return 0;
}

/* Parses the rest of a pass-length line, "W first_ms=1 factors=G0,...,G12" in buf, into *w and
 * g[EXEC_WINDOWS]; returns 0, or -1 when malformed (a worker that is not a number, another first
 * window, a factor that is not a positive number, another count of factors). */
static int windows_fields(const char *buf, int *w, double *g) {
    const char *s = buf;
    int used = 0;
    double first_ms = 0;
    if (worker_number(&s, w) != 0 || sscanf(s, " first_ms=%lf factors=%n", &first_ms, &used) != 1 || used == 0 ||
        fabs(first_ms - EXEC_WINDOW_FIRST_S * 1e3) > 1e-9)
        return -1;
    s += used;
    for (int j = 0; j < EXEC_WINDOWS; j++) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || !(v > 0) || !isfinite(v)) return -1;
        g[j] = v;
        s = end;
        if (j + 1 < EXEC_WINDOWS && *s++ != ',') return -1;
    }
    return *s == '\0' ? 0 : -1;
}

int exec_profile_worker_windows(const char *text, size_t len, int ranks, double *g, int *bad_line) {
    const char *key = "# " EXEC_PROFILE_META " windows worker=";
    int found = 0, line_no = 1;
    size_t counted = 0; /* the lines of text before offset counted are in line_no */
    if (bad_line) *bad_line = 0;
    char *seen = pl_calloc((size_t)(ranks > 0 ? ranks : 1), 1);
    if (!seen) return -1;
    char buf[PROF_WORKER_LINE_MAX];
    for (size_t i = 0; (i = find_line(text, len, i, key, strlen(key), buf, sizeof buf)) < len; i++) {
        for (; counted < i; counted++) line_no += text[counted] == '\n';
        int w = -1;
        double row[EXEC_WINDOWS];
        if (windows_fields(buf, &w, row) != 0) {
            found = -2;
            break;
        }
        if (w >= ranks) { /* measured with more workers than this run has ranks */
            found = -1;
            break;
        }
        memcpy(g + (size_t)w * EXEC_WINDOWS, row, sizeof row);
        if (!seen[w]) found++;
        seen[w] = 1;
    }
    free(seen);
    if (found == -2) {
        if (bad_line) *bad_line = line_no;
        return -2;
    }
    return found == ranks ? 0 : -1;
}

/* Bytes read of one rounds line: its key and two lists of EXEC_STATE_ROUNDS times. */
#define PROF_ROUNDS_LINE_MAX (64 + 48 * EXEC_STATE_ROUNDS)

/* Parses a list "T0,T1,..." at *s into t[*n] (up to EXEC_STATE_ROUNDS), up to the end of the
 * line or a space, and moves *s past it; returns 0, or -1 when malformed or empty. */
static int rounds_list(const char **s, double *t, int *n) {
    *n = 0;
    while (**s && **s != ' ') {
        char *end;
        double v = strtod(*s, &end);
        if (end == *s || !(v >= 0) || !isfinite(v) || *n >= EXEC_STATE_ROUNDS) return -1;
        t[(*n)++] = v;
        *s = end;
        if (**s && **s != ' ' && *(*s)++ != ',') return -1;
    }
    return *n > 0 ? 0 : -1;
}

/* Parses the rest of a rounds line, "W f=T0,T1,..." and optionally " b=U0,U1,..." (as many) in
 * buf, into *w, t[*n] and b[*n] (0 where the line has no b=); returns 0, or -1 when malformed. */
static int rounds_fields(const char *buf, int *w, double *t, double *b, int *n) {
    int used = 0, nb = 0;
    *n = 0;
    const char *s = buf;
    if (worker_number(&s, w) != 0 || sscanf(s, " f=%n", &used) != 0 || used == 0) return -1;
    s += used;
    if (rounds_list(&s, t, n) != 0) return -1;
    memset(b, 0, (size_t)*n * sizeof *b);
    if (!*s) return 0;
    if (strncmp(s, " b=", 3) != 0) return -1;
    s += 3;
    return rounds_list(&s, b, &nb) == 0 && nb == *n && !*s ? 0 : -1;
}

/* Returns 1 when every one of R ranks finished round k (its F in t[r K + k] > 0). */
static int round_finished(const double *t, size_t R, size_t K, int k) {
    int all = 1;
    for (size_t r = 0; r < R; r++) all = all && t[r * K + (size_t)k] > 0;
    return all;
}

/* Sets each rank's column of speed[kept rows of ranks] over its median. */
static void over_median(double *speed, size_t R, int kept, double *v) {
    for (size_t r = 0; r < R && kept; r++) {
        for (int k = 0; k < kept; k++) v[k] = speed[R * (size_t)k + r];
        double med = exec_median(v, (size_t)kept);
        for (int k = 0; k < kept; k++) speed[R * (size_t)k + r] /= med;
    }
}

int exec_profile_worker_rounds(const char *text, size_t len, int ranks, double *speed, double *speed_b, int *bad_line) {
    const char *key = "# " EXEC_PROFILE_META " rounds worker=";
    if (bad_line) *bad_line = 0;
    if (ranks < 1) return 0;
    const size_t R = (size_t)ranks, K = EXEC_STATE_ROUNDS;
    double *t = pl_calloc(2 * R * K + K, sizeof *t); /* F [ranks][K], the backwards alike, then one rank's kept rounds */
    int *n = pl_calloc(R, sizeof *n);
    char *buf = pl_calloc(PROF_ROUNDS_LINE_MAX, 1);
    int rc = t && n && buf ? 0 : -1, line_no = 1;
    size_t counted = 0;
    for (size_t i = 0; rc == 0 && (i = find_line(text, len, i, key, strlen(key), buf, PROF_ROUNDS_LINE_MAX)) < len; i++) {
        for (; counted < i; counted++) line_no += text[counted] == '\n';
        int w = -1, cnt = 0;
        double row[EXEC_STATE_ROUNDS], row_b[EXEC_STATE_ROUNDS];
        if (rounds_fields(buf, &w, row, row_b, &cnt) != 0) {
            if (bad_line) *bad_line = line_no;
            rc = -2;
        } else if (w < ranks) {
            memcpy(t + (size_t)w * K, row, (size_t)cnt * sizeof *row);
            memcpy(t + R * K + (size_t)w * K, row_b, (size_t)cnt * sizeof *row_b);
            n[w] = cnt;
        }
    }
    int kept = 0;
    if (rc == 0) {
        int most = EXEC_STATE_ROUNDS, with_b = 1;
        const double *tb = t + R * K;
        for (size_t r = 0; r < R; r++) most = n[r] < most ? n[r] : most;
        for (int k = 0; k < most; k++) /* the backwards, where every rank's line has them */
            if (round_finished(t, R, K, k))
                for (size_t r = 0; r < R; r++) with_b = with_b && tb[r * K + (size_t)k] > 0;
        for (int k = 0; k < most; k++) { /* the rounds every rank finished */
            if (!round_finished(t, R, K, k)) continue;
            for (size_t r = 0; r < R; r++) {
                speed[R * (size_t)kept + r] = t[r * K + (size_t)k];
                if (speed_b) speed_b[R * (size_t)kept + r] = with_b ? tb[r * K + (size_t)k] : t[r * K + (size_t)k];
            }
            kept++;
        }
        if (kept < EXEC_STATE_MIN_ROUNDS) kept = 0;
        over_median(speed, R, kept, t + 2 * R * K);
        if (speed_b) over_median(speed_b, R, kept, t + 2 * R * K);
    }
    free(t);
    free(n);
    free(buf);
    return rc == -2 ? -2 : kept;
}

/* Returns 1 when s[n] starts with the string p. */
static int starts_with(const char *s, size_t n, const char *p) { return n >= strlen(p) && memcmp(s, p, strlen(p)) == 0; }

/* The kinds of executor line, as exec_profile_lines_check names them. */
enum { LINE_META, LINE_WORKER, LINE_WINDOWS, LINE_ROUNDS, LINE_KINDS };
static const char *const line_kind[LINE_KINDS] = {"executor line", "worker line", "pass-length line", "rounds line"};

/* Checks the executor line s[n] (after "# pipelab-exec ") of kind `kind` other than LINE_META:
 * 0 and its worker in *w, or -1 with what is wrong in why[size]. */
static int check_worker_kind(int kind, const char *s, size_t n, int *w, char *why, size_t size) {
    if (kind == LINE_WORKER) {
        worker_line *l = pl_calloc(1, sizeof *l);
        int rc = l ? worker_parse(s, n, l, why, size) : -1;
        if (!l) snprintf(why, size, "out of memory");
        *w = l ? l->w : -1;
        free(l);
        return rc;
    }
    const size_t skip = strlen(kind == LINE_WINDOWS ? "windows worker=" : "rounds worker=");
    const size_t max = kind == LINE_WINDOWS ? PROF_WORKER_LINE_MAX : PROF_ROUNDS_LINE_MAX;
    int rc = -1;
    char *buf = n - skip < max ? pl_calloc(max, 1) : NULL;
    if (buf) {
        memcpy(buf, s + skip, n - skip);
        while (n > skip && buf[n - skip - 1] == '\r') buf[--n - skip] = '\0';
        double *t = pl_calloc(2 * EXEC_STATE_ROUNDS, sizeof *t);
        int cnt = 0;
        rc = !t ? -1 : kind == LINE_WINDOWS ? windows_fields(buf, w, t) : rounds_fields(buf, w, t, t + EXEC_STATE_ROUNDS, &cnt);
        free(t);
    }
    if (rc != 0 && kind == LINE_WINDOWS)
        snprintf(why, size, "a malformed %s (# " EXEC_PROFILE_META " windows worker=W first_ms=%g factors= and %d positive "
                            "numbers, comma-separated)",
                 line_kind[kind], EXEC_WINDOW_FIRST_S * 1e3, EXEC_WINDOWS);
    else if (rc != 0)
        snprintf(why, size, "a malformed %s (# " EXEC_PROFILE_META " rounds worker=W f= and up to %d numbers >= 0, "
                            "comma-separated, optionally b= and as many)",
                 line_kind[kind], EXEC_STATE_ROUNDS);
    free(buf);
    return rc;
}

int exec_profile_lines_check(const char *path, const char *text, size_t len, pl_err *e) {
    const char *key = "# " EXEC_PROFILE_META " ";
    const size_t skip = strlen(key);
    int meta_line = 0, line_no = 1, rc = PL_OK;
    int *seen = NULL; /* [kind - 1][worker]: the line of each worker's line of each kind, 0 none */
    /* line 1 starts past a byte order mark, as the cost model's reader reads the file */
    for (size_t i = pl_bom_len(text, len); rc == PL_OK && i < len; line_no++) {
        const char *ln = text + i, *nl = memchr(ln, '\n', len - i);
        size_t n = nl ? (size_t)(nl - ln) : len - i;
        i += n + 1;
        if (!starts_with(ln, n, key)) continue;
        const char *s = ln + skip;
        const size_t sn = n - skip;
        const int kind = starts_with(s, sn, "worker=")           ? LINE_WORKER
                         : starts_with(s, sn, "windows worker=") ? LINE_WINDOWS
                         : starts_with(s, sn, "rounds worker=")  ? LINE_ROUNDS
                                                                 : LINE_META;
        char why[320];
        int w = -1;
        if (kind == LINE_META) {
            meta_vals m;
            if (meta_fields(s, sn, &m, why, sizeof why) != 0)
                rc = pl_errf(e, PL_EINPUT, "%s:%d: %s", path, line_no, why);
            else if (meta_line)
                rc = pl_errf(e, PL_EINPUT, "%s:%d: a second %s (the first is line %d); a profile has one", path, line_no,
                             line_kind[kind], meta_line);
            meta_line = line_no;
            continue;
        }
        if (check_worker_kind(kind, s, sn, &w, why, sizeof why) != 0) {
            rc = pl_errf(e, PL_EINPUT, "%s:%d: %s", path, line_no, why);
            continue;
        }
        if (!seen && !(seen = pl_calloc((size_t)(LINE_KINDS - 1) * SCHED_MAX_RANKS, sizeof *seen))) {
            rc = pl_errf(e, PL_ENOMEM, "out of memory");
            continue;
        }
        int *first = &seen[(size_t)(kind - 1) * SCHED_MAX_RANKS + (size_t)w];
        if (*first)
            rc = pl_errf(e, PL_EINPUT, "%s:%d: a second %s of worker %d (the first is line %d)", path, line_no,
                         line_kind[kind], w, *first);
        *first = line_no;
    }
    free(seen);
    return rc;
}
