/* pl_common.c: errors, checked allocation, growable strings, whole-file I/O, number parsing. */
#include "pl_common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Returns the length of the well-formed UTF-8 sequence (RFC 3629: no overlong form, no surrogate,
 * at most U+10FFFF) that s[0..n) starts with, 1 to 4, or 0 when its first byte starts none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t k = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F) || (s[0] == 0xF0 && s[1] < 0x90) ||
        (s[0] == 0xF4 && s[1] > 0x8F))
        return 0;
    return k;
}

/* The replacement character U+FFFD in UTF-8: what a byte that starts no UTF-8 sequence becomes in
 * a CSV field (JSON writes it as \ufffd), so that every reader takes the text. */
#define UTF8_REPLACEMENT "\xEF\xBF\xBD"

void pl_buf_json_body(pl_buf *b, const char *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c >= 0x80) { /* text from a file name, a tag: bytes that are not UTF-8 become U+FFFD */
            size_t k = utf8_len((const unsigned char *)t + i, n - i);
            if (k) pl_buf_printf(b, "%.*s", (int)k, t + i);
            else pl_buf_puts(b, "\\ufffd");
            i += k ? k - 1 : 0;
            continue;
        }
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
    int quote = strpbrk(s, ",\"\r\n") != NULL;
    if (quote) pl_buf_putc(b, '"');
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') pl_buf_putc(b, '"');
        size_t k = utf8_len((const unsigned char *)s + i, n - i);
        if (k) pl_buf_printf(b, "%.*s", (int)k, s + i);
        else pl_buf_puts(b, UTF8_REPLACEMENT); /* not UTF-8: U+FFFD, as pl_buf_json_body */
        i += k ? k - 1 : 0;
    }
    if (quote) pl_buf_putc(b, '"');
}

int pl_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len, pl_err *e) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!*path) return pl_errf(e, PL_EINPUT, "an empty file name (expected the path of a file)");
    FILE *f = fopen(path, "rb");
    if (!f) return pl_errf(e, PL_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return pl_errf(e, PL_EINPUT, "%s: is a directory, not a file", path);
    }
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
    int rerr = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (rerr) { pl_buf_free(&b); return pl_errf(e, PL_EIO, "%s: read error: %s", path, strerror(rerr)); }
    if (b.failed) { pl_buf_free(&b); return pl_errf(e, PL_ENOMEM, "%s: out of memory", path); }
    if (!b.data) { b.data = calloc(1, 1); if (!b.data) return pl_errf(e, PL_ENOMEM, "out of memory"); }
    *out = b.data;
    if (out_len) *out_len = b.len;
    return PL_OK;
}

/* The most symbolic links pl_write_file follows from the path it is given to the file it writes
 * (Linux's limit, after which open() says ELOOP). */
#define WRITE_MAX_LINKS 40

/* Returns the malloc'd path that the link text target names when read in the folder of the link
 * at link (target itself when absolute), or NULL when out of memory. */
static char *link_join(const char *link, const char *target) {
    const char *slash = strrchr(link, '/');
    if (target[0] == '/' || !slash) return strdup(target);
    size_t dl = (size_t)(slash - link) + 1, tl = strlen(target);
    char *p = malloc(dl + tl + 1);
    if (!p) return NULL;
    memcpy(p, link, dl);
    memcpy(p + dl, target, tl + 1);
    return p;
}

/* Follows path while it is a symbolic link, to the file that writing through it reaches: a
 * path that is no link (an existing file, or none yet: a dangling link's target). Returns it
 * malloc'd in *out with PL_OK, or an error naming path (a loop, an unreadable link). */
static int resolve_links(const char *path, char **out, pl_err *e) {
    char *cur = strdup(path);
    if (!cur) return pl_errf(e, PL_ENOMEM, "out of memory");
    char target[PATH_MAX];
    struct stat st;
    for (int hops = 0; lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
        ssize_t n = hops < WRITE_MAX_LINKS ? readlink(cur, target, sizeof target - 1) : -1;
        if (n < 0) {
            int rc = pl_errf(e, PL_EIO, "%s: cannot follow the link %s: %s", path, cur,
                             strerror(hops < WRITE_MAX_LINKS ? errno : ELOOP));
            free(cur);
            return rc;
        }
        target[n] = '\0';
        char *next = link_join(cur, target);
        free(cur);
        if (!(cur = next)) return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    *out = cur;
    return PL_OK;
}

/* Writes data[0..len) to the open fd, retrying short writes and interruptions; returns 0, or
 * -1 with errno set. */
static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Writes data into the existing file at file that is no regular file (a device, a FIFO) in
 * place: it cannot be replaced by a renamed copy and stays what it is (O_TRUNC, which Linux
 * ignores for these, empties a regular file put there meanwhile). Returns PL_OK or PL_EIO
 * naming path, the name the caller gave. */
static int write_in_place(const char *path, const char *file, const char *data, size_t len, pl_err *e) {
    int fd = open(file, O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return pl_errf(e, PL_EIO, "%s: cannot write: %s", path, strerror(errno));
    int bad = write_all(fd, data, len);
    int err = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    return bad ? pl_errf(e, PL_EIO, "%s: write failed: %s", path, strerror(err)) : PL_OK;
}

/* Creates a fresh temporary file beside file (file.tmp.PID, or file.tmp.PID-K when that name is
 * taken; O_EXCL: never through a link put there); returns its descriptor with its malloc'd name in *tmp,
 * or -1 with errno set. */
static int open_temporary(const char *file, char **tmp) {
    size_t n = strlen(file) + 64;
    if (!(*tmp = malloc(n))) {
        errno = ENOMEM;
        return -1;
    }
    for (int k = 0;; k++) {
        if (k) snprintf(*tmp, n, "%s.tmp.%ld-%d", file, (long)getpid(), k);
        else snprintf(*tmp, n, "%s.tmp.%ld", file, (long)getpid());
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST || k >= 100) {
            if (fd < 0) {
                free(*tmp);
                *tmp = NULL;
            }
            return fd;
        }
    }
}

/* Replaces the regular file at file (or creates it) all or nothing: a temporary file beside it,
 * given old's permission bits when old is not NULL (where the file system keeps them), then
 * renamed over it. Returns PL_OK or PL_EIO
 * naming path, the name the caller gave. */
static int write_replace(const char *path, const char *file, const struct stat *old, const char *data, size_t len,
                         pl_err *e) {
    char *tmp = NULL;
    int fd = open_temporary(file, &tmp);
    if (fd < 0) return pl_errf(e, PL_EIO, "%s: cannot write: %s", path, strerror(errno));
    if (old) (void)fchmod(fd, old->st_mode & 0777); /* best effort: some file systems keep their own */
    int bad = write_all(fd, data, len) != 0;
    int err = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (!bad && rename(tmp, file) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad) unlink(tmp);
    free(tmp);
    return bad ? pl_errf(e, PL_EIO, "%s: write failed: %s", path, strerror(err)) : PL_OK;
}

/* pl_common.h. Writes through links to the file they reach; a regular file (or a new one) is
 * replaced all or nothing, anything else that exists there (a device, a FIFO) is written in
 * place and stays what it is. Returns PL_OK or an error naming path. */
int pl_write_file(const char *path, const char *data, size_t len, pl_err *e) {
    char *file = NULL;
    int code = resolve_links(path, &file, e);
    if (code != PL_OK) return code;
    struct stat st;
    int exists = stat(file, &st) == 0;
    if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) code = write_in_place(path, file, data, len, e);
    else code = write_replace(path, file, exists && S_ISREG(st.st_mode) ? &st : NULL, data, len, e);
    free(file);
    return code;
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

int pl_text_check(const char *path, const char *text, size_t len, pl_err *e) {
    const char *nul = memchr(text, '\0', len);
    if (!nul) return PL_OK;
    int line = 1;
    for (const char *p = text; p < nul; p++) line += *p == '\n';
    return pl_errf(e, PL_EINPUT, "%s:%d: not a text file (a NUL byte at offset %zu)", path, line, (size_t)(nul - text));
}

char *pl_clean_name(char *dst, size_t n, const char *src, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && src[i];) {
        unsigned char c = (unsigned char)src[i];
        size_t k = utf8_len((const unsigned char *)src + i, len - i);
        int bad = !k || c < 0x20 || c == 0x7f || strchr("#;=[],\"", c) != NULL;
        size_t w = bad ? 1 : k;
        if (o + w >= n) break; /* whole characters only */
        if (bad) dst[o++] = '_';
        else memcpy(dst + o, src + i, k), o += k;
        i += k ? k : 1;
    }
    if (n) dst[o] = '\0';
    return dst;
}

const char *pl_human_bytes(double bytes, char *buf, size_t n) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    const int last = (int)(sizeof unit / sizeof unit[0]) - 1;
    double v = bytes;
    int k = 0;
    while (v >= 1024.0 && k < last) {
        v /= 1024.0;
        k++;
    }
    if (k == 0) snprintf(buf, n, "%.0f bytes", bytes);
    else snprintf(buf, n, "%.1f %s", v, unit[k]);
    return buf;
}

size_t pl_bom_len(const char *text, size_t len) {
    static const char bom[] = "\xEF\xBB\xBF";
    size_t n = sizeof bom - 1;
    return len >= n && memcmp(text, bom, n) == 0 ? n : 0;
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
