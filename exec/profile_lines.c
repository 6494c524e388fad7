/* profile_lines.c: reading back the executor's comment lines of a profile CSV (exec/profile.c
 * writes them): the concurrency and STEP line, each worker's own times, from which a prediction
 * takes each rank's STEP and its reuse-distance ratios, and each worker's pass-length factors
 * (profile_windows.c). */
#include "exec_int.h"

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

/* Copies the profile's "# pipelab-exec concurrency=..." line, after its key, into line[size];
 * returns 0, or -1 when text[len] has none. */
static int meta_line(const char *text, size_t len, char *line, size_t size) {
    const char *key = "# " EXEC_PROFILE_META " ";
    return find_line(text, len, 0, key, strlen(key), line, size) == len ? -1 : 0;
}

int exec_profile_meta(const char *text, size_t len, int *concurrency, double *step_s) {
    char line[PROF_META_LINE_MAX];
    if (meta_line(text, len, line, sizeof line)) return -1;
    int c = 0;
    double st = 0;
    if (sscanf(line, "concurrency=%d step_s=%lf", &c, &st) != 2 || c < 1 || !(st >= 0)) return -1;
    if (concurrency) *concurrency = c;
    if (step_s) *step_s = st;
    return 0;
}

int exec_profile_drift(const char *text, size_t len, double *drift) {
    char line[PROF_META_LINE_MAX];
    if (meta_line(text, len, line, sizeof line)) return -1;
    const char *at = strstr(line, " rank_drift=");
    double d = 0;
    if (!at || sscanf(at, " rank_drift=%lf", &d) != 1 || !(d > 0) || !isfinite(d)) return -1;
    *drift = d;
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
