/* profile_lines.c: reading back the executor's comment lines of a profile CSV (exec/profile.c
 * writes them): the concurrency and STEP line, each worker's own times, from which a prediction
 * takes each rank's STEP and its reuse-distance ratios, and each worker's pass-length factors
 * (profile_windows.c). */
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

/* Returns the offset of the first line of text[len] at or after offset `from` that starts with
 * key (len when none) and copies that line, from skip bytes after its start to its end, into
 * buf[size] (cut at size - 1 bytes). */
static size_t find_line(const char *text, size_t len, size_t from, const char *key, size_t skip, char *buf, size_t size) {
    size_t kl = strlen(key);
    for (size_t i = from; i + kl <= len; i++) {
        if ((i > 0 && text[i - 1] != '\n') || memcmp(text + i, key, kl) != 0) continue;
        size_t n = 0;
        for (size_t j = i + skip; j < len && text[j] != '\n' && n + 1 < size; j++) buf[n++] = text[j];
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

/* Parses the executor line's "key=value ..." fields in s[n] (after its key) into m. Returns 0, or
 * -1 with what is wrong in why[size]: a field that is not key=value, an unknown or repeated key,
 * a value out of its range (meta_keys), concurrency or step_s missing. */
static int meta_fields(const char *s, size_t n, meta_vals *m, char *why, size_t size) {
    memset(m, 0, sizeof *m);
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
        if (i >= n) break;
        size_t t0 = i;
        while (i < n && s[i] != ' ' && s[i] != '\t' && s[i] != '\r') i++;
        const char *tok = s + t0, *eq = memchr(tok, '=', i - t0);
        int tl = (int)(i - t0 < 64 ? i - t0 : 64);
        if (!eq || eq == tok) {
            snprintf(why, size, "'%.*s' is not key=value", tl, tok);
            return -1;
        }
        size_t kl = (size_t)(eq - tok), vl = i - t0 - kl - 1;
        int k = 0;
        while (k < META_KEYS && !(strlen(meta_keys[k]) == kl && memcmp(tok, meta_keys[k], kl) == 0)) k++;
        if (k == META_KEYS) {
            snprintf(why, size, "unknown key '%.*s' (known: %s, %s, %s)", (int)(kl < 64 ? kl : 64), tok,
                     meta_keys[META_CONCURRENCY], meta_keys[META_STEP], meta_keys[META_DRIFT]);
            return -1;
        }
        if (m->has[k]) {
            snprintf(why, size, "key '%s' appears twice", meta_keys[k]);
            return -1;
        }
        char vbuf[64];
        memcpy(vbuf, eq + 1, vl < sizeof vbuf ? vl : sizeof vbuf - 1);
        vbuf[vl < sizeof vbuf ? vl : sizeof vbuf - 1] = '\0';
        long lv = 0;
        double dv = 0;
        if (k == META_CONCURRENCY ? vl >= sizeof vbuf || pl_parse_long(vbuf, 1, INT_MAX, &lv) != 0
                                  : vl >= sizeof vbuf || pl_parse_double(vbuf, &dv) != 0 || !isfinite(dv) || dv < 0) {
            snprintf(why, size, "%s must be %s (got '%s%s')", meta_keys[k],
                     k == META_CONCURRENCY ? "an integer >= 1" : "a finite number >= 0", vbuf,
                     vl >= sizeof vbuf ? "..." : "");
            return -1;
        }
        m->v[k] = k == META_CONCURRENCY ? (double)lv : dv;
        m->has[k] = 1;
    }
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

int exec_profile_meta_check(const char *path, const char *text, size_t len, pl_err *e) {
    const size_t skip = strlen("# " EXEC_PROFILE_META " ");
    int line_no = 1;
    for (size_t i = 0; i < len; line_no++) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
        if (is_meta_line(text + i, n)) {
            meta_vals m;
            char why[256];
            if (meta_fields(text + i + skip, n - skip, &m, why, sizeof why) != 0)
                return pl_errf(e, PL_EINPUT, "%s:%d: %s", path, line_no, why);
        }
        i += n + 1;
    }
    return PL_OK;
}

/* Reads the first executor line of text[len] into m; returns 0, or -1 when it has none or a
 * malformed one (exec_profile_meta_check names what is wrong). */
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

/* One worker line of a profile CSV: its worker, the times of one block, and how many fields of
 * the line were read (PROF_WORKER_FIELDS without the reuse-distance times, PROF_WORKER_HOT_FIELDS
 * with them). */
typedef struct worker_line {
    int w, core, fields;
    double f, bi, bw, st, bi0, bih, bwh;
    double first[3], rest[3]; /* F, I, W of a round's first microbatch; of its others */
    double again[3];          /* F, I, W right after the same kind on the same blocks */
    double bin;               /* I of the last block right after its own forward */
    double fb;                /* F right after another microbatch's backwards on the same blocks */
    double fsd;               /* the forward's jitter (exec_layer_profile.f_sd_s) */
    double two[3], one[3];    /* F, I, W of the cycle on two weight versions; in place */
    double sta;               /* the STEP's mean over the rounds (exec_layer_profile.step_mean_s) */
    double fl, fs;            /* F alone and beside the other workers (f_alone_s, f_side_s) */
} worker_line;

/* Reads the worker lines of text[len] into line[w] (w in [0, ranks)). Returns how many workers
 * it found, or -1 for a malformed line or a worker out of range. */
static int worker_lines(const char *text, size_t len, int ranks, worker_line *line) {
    const char *key = "# " EXEC_PROFILE_META " worker=";
    size_t skip = strlen(key) - strlen("worker=");
    int found = 0;
    for (int q = 0; q < ranks; q++) line[q].w = -1;
    char buf[PROF_WORKER_LINE_MAX];
    for (size_t i = 0; (i = find_line(text, len, i, key, skip, buf, sizeof buf)) < len; i++) {
        worker_line l;
        memset(&l, 0, sizeof l);
        l.w = -1;
        l.fields = sscanf(buf, "worker=%d core=%d fwd_s=%lf bwd_in_s=%lf bwd_w_s=%lf step_s=%lf bwd_in0_s=%lf "
                               "bwd_in_hot_s=%lf bwd_w_hot_s=%lf fwd_first_s=%lf bwd_in_first_s=%lf bwd_w_first_s=%lf "
                               "fwd_rest_s=%lf bwd_in_rest_s=%lf bwd_w_rest_s=%lf fwd_again_s=%lf bwd_in_again_s=%lf "
                               "bwd_w_again_s=%lf bwd_in_next_s=%lf fwd_back_s=%lf fwd_sd_s=%lf fwd_two_s=%lf "
                               "bwd_in_two_s=%lf bwd_w_two_s=%lf fwd_one_s=%lf bwd_in_one_s=%lf bwd_w_one_s=%lf "
                               "step_mean_s=%lf fwd_alone_s=%lf fwd_side_s=%lf",
                          &l.w, &l.core, &l.f, &l.bi, &l.bw, &l.st, &l.bi0, &l.bih, &l.bwh, &l.first[0], &l.first[1],
                          &l.first[2], &l.rest[0], &l.rest[1], &l.rest[2], &l.again[0], &l.again[1], &l.again[2],
                          &l.bin, &l.fb, &l.fsd, &l.two[0], &l.two[1], &l.two[2], &l.one[0], &l.one[1], &l.one[2], &l.sta,
                          &l.fl, &l.fs);
        if (l.fields < PROF_WORKER_FIELDS || l.w < 0 || !(l.st >= 0) || !isfinite(l.st)) return -1;
        if (l.w >= ranks) return -1; /* measured with more workers than this run has ranks */
        if (line[l.w].w < 0) found++;
        line[l.w] = l;
    }
    return found;
}

int exec_profile_worker_steps(const char *text, size_t len, int ranks, double *step_s) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1;
    for (int q = 0; q < ranks; q++) step_s[q] = found == ranks ? l[q].st : -1;
    free(l);
    return found == ranks ? 0 : -1;
}

int exec_profile_worker_step_means(const char *text, size_t len, int ranks, double *step_mean_s) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        ok = l[q].fields >= PROF_WORKER_STA_FIELDS && l[q].sta > 0 && isfinite(l[q].sta);
        if (ok) step_mean_s[q] = l[q].sta;
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_share(const char *text, size_t len, int ranks, double *ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        ok = l[q].fields >= PROF_WORKER_SHARE_FIELDS && l[q].fl > 0 && l[q].fs > 0 && isfinite(l[q].fl / l[q].fs);
        if (ok) ratio[q] = l[q].fl / l[q].fs;
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_reuse(const char *text, size_t len, int ranks, double *i_ratio, double *w_ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const worker_line *x = &l[q];
        ok = x->fields >= PROF_WORKER_HOT_FIELDS && x->bi > 0 && x->bw > 0 && x->bih > 0 && x->bwh > 0 &&
             isfinite(x->bih) && isfinite(x->bwh);
        if (ok) {
            i_ratio[q] = x->bih / x->bi;
            w_ratio[q] = x->bwh / x->bw;
        }
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_first(const char *text, size_t len, int ranks, double *first, double *rest) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const worker_line *x = &l[q];
        const double all[3] = {x->f, x->bi, x->bw};
        ok = x->fields >= PROF_WORKER_FIRST_FIELDS;
        for (int c = 0; ok && c < 3; c++) {
            ok = all[c] > 0 && x->first[c] > 0 && x->rest[c] > 0 && isfinite(x->first[c]) && isfinite(x->rest[c]);
            if (ok) {
                first[3 * q + c] = x->first[c] / all[c];
                rest[3 * q + c] = x->rest[c] / all[c];
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
        const worker_line *x = &l[q];
        const double all[3] = {x->f, x->bi, x->bw};
        ok = x->fields >= PROF_WORKER_AGAIN_FIELDS;
        for (int c = 0; ok && c < 3; c++) {
            ok = all[c] > 0 && x->again[c] > 0 && isfinite(x->again[c]);
            if (ok) again[3 * q + c] = x->again[c] / all[c];
        }
    }
    free(l);
    return ok ? 0 : -1;
}

/* Sets ratio[w] to field num over field den of every rank's worker line (each at that offset in
 * worker_line) when every line has at least `fields` fields and both are positive and finite:
 * returns 0; else -1 (the term is then off). */
static int worker_ratio(const char *text, size_t len, int ranks, int fields, size_t num, size_t den, double *ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks;
    for (int q = 0; ok && q < ranks; q++) {
        const char *x = (const char *)&l[q];
        double a = *(const double *)(x + num), b = *(const double *)(x + den);
        ok = l[q].fields >= fields && b > 0 && a > 0 && isfinite(a);
        if (ok) ratio[q] = a / b;
    }
    free(l);
    return ok ? 0 : -1;
}

int exec_profile_worker_versions(const char *text, size_t len, int ranks, double *ratio) {
    worker_line *l = pl_calloc((size_t)(ranks > 0 ? ranks : 1), sizeof *l);
    int found = l ? worker_lines(text, len, ranks, l) : -1, ok = found == ranks, timed = 0;
    for (int q = 0; ok && q < ranks; q++) {
        const worker_line *x = &l[q];
        ok = x->fields >= PROF_WORKER_VERSIONS_FIELDS;
        int all = 1, none = 1; /* all six times positive and finite; all six 0 */
        for (int c = 0; ok && c < 3; c++) {
            all = all && x->two[c] > 0 && x->one[c] > 0 && isfinite(x->two[c]) && isfinite(x->one[c]);
            none = none && x->two[c] == 0 && x->one[c] == 0;
        }
        ok = ok && (all || none);
        for (int c = 0; ok && c < 3; c++) ratio[3 * q + c] = all ? x->two[c] / x->one[c] : 1;
        timed += ok && all;
    }
    free(l);
    return ok && timed > 0 ? timed : -1;
}

int exec_profile_worker_next(const char *text, size_t len, int ranks, double *ratio) {
    return worker_ratio(text, len, ranks, PROF_WORKER_NEXT_FIELDS, offsetof(worker_line, bin), offsetof(worker_line, bi), ratio);
}

int exec_profile_worker_back(const char *text, size_t len, int ranks, double *ratio) {
    return worker_ratio(text, len, ranks, PROF_WORKER_BACK_FIELDS, offsetof(worker_line, fb), offsetof(worker_line, f), ratio);
}

int exec_profile_worker_jitter(const char *text, size_t len, int ranks, double *cv) {
    return worker_ratio(text, len, ranks, PROF_WORKER_SD_FIELDS, offsetof(worker_line, fsd), offsetof(worker_line, f), cv);
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
        int w = -1, used = 0;
        double first_ms = 0;
        if (sscanf(buf, "%d first_ms=%lf factors=%n", &w, &first_ms, &used) != 2 || used == 0 || w < 0 ||
            fabs(first_ms - EXEC_WINDOW_FIRST_S * 1e3) > 1e-9) {
            found = -2;
            break;
        }
        if (w >= ranks) { /* measured with more workers than this run has ranks */
            found = -1;
            break;
        }
        const char *s = buf + used;
        int j = 0;
        for (; j < EXEC_WINDOWS; j++) {
            char *end;
            double v = strtod(s, &end);
            if (end == s || !(v > 0) || !isfinite(v)) break;
            g[(size_t)w * EXEC_WINDOWS + (size_t)j] = v;
            s = end;
            if (j + 1 < EXEC_WINDOWS && *s++ != ',') break;
        }
        if (j != EXEC_WINDOWS || *s != '\0') {
            found = -2;
            break;
        }
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
    if (sscanf(buf, "%d f=%n", w, &used) != 1 || used == 0 || *w < 0) return -1;
    const char *s = buf + used;
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
