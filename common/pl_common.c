/* pl_common.c: errors, checked allocation, growable strings, whole-file I/O, number parsing. */
#include "pl_common.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int pl_errf(pl_err *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
        e->rank_plus1 = 0;
    }
    return code;
}

void pl_err_prefix(pl_err *e, const char *fmt, ...) {
    if (!e) return;
    char head[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t hl = strnlen(head, sizeof e->msg - 1);
    memcpy(e->msg, head, hl);
    size_t ol = strnlen(old, sizeof old);
    if (ol > sizeof e->msg - 1 - hl) ol = sizeof e->msg - 1 - hl;
    memcpy(e->msg + hl, old, ol);
    e->msg[hl + ol] = '\0';
}

void pl_err_clear(pl_err *e) {
    if (!e) return;
    e->code = PL_OK;
    e->msg[0] = '\0';
    e->rank_plus1 = 0;
}

void pl_err_set_rank(pl_err *e, int rank) {
    if (e) e->rank_plus1 = rank >= 0 ? rank + 1 : 0;
}

int pl_err_rank(const pl_err *e) { return e && e->rank_plus1 > 0 ? e->rank_plus1 - 1 : -1; }

void *pl_calloc(size_t n, size_t size) {
    if (n == 0 || size == 0) return calloc(1, 1);
    if (n > SIZE_MAX / size) return NULL;
    return calloc(n, size);
}

void *pl_reallocarray(void *p, size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    size_t total = n * size;
    return realloc(p, total ? total : 1);
}

/* Returns p, or p grown to twice its *cap elements (first when *cap is 0), or NULL (p kept):
 * the one growth rule of pipelab's growable arrays (see pl_common.h). */
void *pl_grow(void *p, size_t *cap, size_t len, size_t first, size_t size) {
    if (len < *cap) return p;
    size_t ncap = *cap ? 2 * *cap : first;
    if (ncap <= len) ncap = len + 1;
    void *np = pl_reallocarray(p, ncap, size);
    if (np) *cap = ncap;
    return np;
}

void pl_buf_init(pl_buf *b) { memset(b, 0, sizeof *b); }

void pl_buf_free(pl_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Makes room for extra more bytes plus a NUL; returns 0 on success. */
static int buf_reserve(pl_buf *b, size_t extra) {
    if (b->failed) return -1;
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) { b->failed = 1; return -1; }
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d) { b->failed = 1; return -1; }
    b->data = d;
    b->cap = cap;
    return 0;
}

void pl_buf_putc(pl_buf *b, char c) {
    if (buf_reserve(b, 1)) return;
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void pl_buf_puts(pl_buf *b, const char *s) {
    size_t n = strlen(s);
    if (buf_reserve(b, n)) return;
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

void pl_buf_printf(pl_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || buf_reserve(b, (size_t)n)) { va_end(ap2); return; }
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

void pl_buf_number(pl_buf *b, double v, int json) {
    if (!isfinite(v)) pl_buf_puts(b, json ? "null" : (isnan(v) ? "" : (v > 0 ? "inf" : "-inf")));
    else pl_buf_printf(b, "%.15g", v);
}

void pl_buf_json_body(pl_buf *b, const char *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        switch (c) {
        case '"': pl_buf_puts(b, "\\\""); break;
        case '\\': pl_buf_puts(b, "\\\\"); break;
        case '\n': pl_buf_puts(b, "\\n"); break;
        case '\r': pl_buf_puts(b, "\\r"); break;
        case '\t': pl_buf_puts(b, "\\t"); break;
        default:
            if (c < 0x20) pl_buf_printf(b, "\\u%04x", c);
            else pl_buf_putc(b, (char)c);
        }
    }
}

void pl_buf_json_string(pl_buf *b, const char *s) {
    pl_buf_putc(b, '"');
    if (s) pl_buf_json_body(b, s, strlen(s));
    pl_buf_putc(b, '"');
}

void pl_buf_csv_field(pl_buf *b, const char *s) {
    if (!s) return;
    if (!strpbrk(s, ",\"\r\n")) {
        pl_buf_puts(b, s);
        return;
    }
    pl_buf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"') pl_buf_putc(b, '"');
        pl_buf_putc(b, *s);
    }
    pl_buf_putc(b, '"');
}

int pl_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len, pl_err *e) {
    *out = NULL;
    if (out_len) *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return pl_errf(e, PL_EIO, "%s: cannot open: %s", path, strerror(errno));
    pl_buf b;
    pl_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + n > max_bytes) {
            fclose(f);
            pl_buf_free(&b);
            return pl_errf(e, PL_EINPUT, "%s: file is larger than %zu bytes", path, max_bytes);
        }
        if (buf_reserve(&b, n)) break;
        memcpy(b.data + b.len, chunk, n);
        b.len += n;
        b.data[b.len] = '\0';
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) { pl_buf_free(&b); return pl_errf(e, PL_EIO, "%s: read error", path); }
    if (b.failed) { pl_buf_free(&b); return pl_errf(e, PL_ENOMEM, "%s: out of memory", path); }
    if (!b.data) { b.data = calloc(1, 1); if (!b.data) return pl_errf(e, PL_ENOMEM, "out of memory"); }
    *out = b.data;
    if (out_len) *out_len = b.len;
    return PL_OK;
}

int pl_write_file(const char *path, const char *data, size_t len, pl_err *e) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return pl_errf(e, PL_ENOMEM, "out of memory");
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = pl_errf(e, PL_EIO, "%s: cannot write: %s", path, strerror(errno));
        free(tmp);
        return rc;
    }
    size_t w = len ? fwrite(data, 1, len, f) : 0;
    int bad = w != len;
    if (fflush(f) != 0) bad = 1;
    if (ferror(f) != 0) bad = 1;
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        int rc = pl_errf(e, PL_EIO, "%s: write failed: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return rc;
    }
    free(tmp);
    return PL_OK;
}

int pl_parse_long(const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int pl_parse_double(const char *s, double *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

double pl_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
