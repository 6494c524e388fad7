/* pl_common.h: small helpers shared by every pipelab module (errors, checked allocation, text). */
#ifndef PL_COMMON_H
#define PL_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define PL_VERSION "0.1.0"
/* The git revision of this build: `git describe --always --dirty` of the source tree when it was
 * built ("-dirty": tracked files differed from HEAD), or "unknown" (a source tarball). */
const char *pl_git_rev(void);
#define PIPELAB_GIT_REV (pl_git_rev())

/* A macro's value spelled as a string literal: PL_XSTR(LIMIT) for "600" in a message or help. */
#define PL_STR_(x) #x
#define PL_XSTR(x) PL_STR_(x)

/* Error codes returned by library functions. User errors (bad input) are PL_EINPUT. */
enum {
    PL_OK = 0,
    PL_EINPUT = 1,   /* bad input: a file, a flag value, a schedule that cannot run */
    PL_ENOMEM = 2,   /* an allocation failed or would be too large */
    PL_EIO = 3,      /* a file could not be read or written */
    PL_EINTERNAL = 4 /* a broken invariant inside pipelab */
};

/* An error report: library functions fill it and return its code; only cli/ prints it. */
typedef struct pl_err {
    int code;
    char msg[1024];
    int rank_plus1; /* the rank whose error this is, whose message then starts "rank R", plus one;
                     * 0 = none, so that a zero-initialised pl_err names no rank
                     * (pl_err_set_rank, pl_err_rank) */
} pl_err;

/* Fills e (if not NULL) with a printf-style message and returns code; a new message names no
 * rank until pl_err_set_rank says so. */
int pl_errf(pl_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes the message already in e with a printf-style context ("file:line: "). */
void pl_err_prefix(pl_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears e to PL_OK with an empty message and no rank. */
void pl_err_clear(pl_err *e);
/* Records that e is rank's error (rank >= 0; its message starts by naming it; pl_err_prefix
 * keeps it), or that it names no rank (rank < 0). */
void pl_err_set_rank(pl_err *e, int rank);
/* Returns the rank e is the error of, or -1 when it names none. */
int pl_err_rank(const pl_err *e);

/* Checked allocation: returns NULL on overflow of n*size or on failure. */
void *pl_calloc(size_t n, size_t size);
void *pl_reallocarray(void *p, size_t n, size_t size);
/* Makes room for element len of a growable array p of *cap elements of size bytes: returns p
 * when len < *cap, else p reallocated to twice *cap elements (first when *cap is 0) with *cap
 * updated, or NULL when out of memory (p is then untouched and still the caller's). */
void *pl_grow(void *p, size_t *cap, size_t len, size_t first, size_t size);

/* Growable byte string used to build text output and files. */
typedef struct pl_buf {
    char *data;
    size_t len, cap;
    int failed; /* set when an allocation failed; later appends are ignored */
} pl_buf;

void pl_buf_init(pl_buf *b);
void pl_buf_free(pl_buf *b);
void pl_buf_putc(pl_buf *b, char c);
void pl_buf_puts(pl_buf *b, const char *s);
void pl_buf_printf(pl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends a double as CSV or JSON number text (%.15g). Non-finite values: JSON gets null; CSV gets
 * an empty field for NAN (a value not recorded) and inf/-inf otherwise. */
void pl_buf_number(pl_buf *b, double v, int json);
/* The one JSON and CSV text writer of pipelab's outputs.
 * pl_buf_json_body appends t[0..n) as the inside of a JSON string: quote and backslash escaped,
 * \n \r \t as such, other control characters as \u00XX, UTF-8 as it is, and a byte that starts
 * no well-formed UTF-8 sequence (a tag or file name in another encoding) as \ufffd, so that every
 * JSON reader takes the text. pl_buf_json_string appends s quoted that way (NULL as ""). */
void pl_buf_json_body(pl_buf *b, const char *t, size_t n);
void pl_buf_json_string(pl_buf *b, const char *s);
/* Appends s as one CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma,
 * quote or line break; NULL as an empty field; a byte that is not UTF-8 as U+FFFD, as above. */
void pl_buf_csv_field(pl_buf *b, const char *s);

/* Reads a whole file into a NUL-terminated buffer, byte for byte (a byte order mark included:
 * see pl_bom_len); returns PL_OK or an error naming the path. An empty path, a directory and
 * files larger than max_bytes are refused. */
int pl_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len, pl_err *e);
/* Writes len bytes to the file at path. A symbolic link is followed (a dangling one to the file
 * its target names) and stays a link; a regular file there, or none, is replaced atomically (a
 * temporary file beside it, with the old file's permission bits, renamed over it), so readers
 * see the old or the new content, never a part; an existing file of another kind (a character
 * or block device, a FIFO) is written in place and stays what it is. Returns PL_OK or an error
 * naming path. */
int pl_write_file(const char *path, const char *data, size_t len, pl_err *e);

/* Returns the length of the UTF-8 byte order mark that text[0..len) starts with: 3, or 0 when
 * it has none. Every text reader of pipelab (schedules, CSVs, INI, partition and graph files)
 * skips it, by this one rule; line and column numbers count from after it. */
size_t pl_bom_len(const char *text, size_t len);
/* Returns PL_OK when text[0..len) read from path holds no NUL byte, else PL_EINPUT
 * "path:line: not a text file (a NUL byte at offset N)": the one check of every file reader,
 * whose parsers would otherwise stop at the NUL and ignore the rest. */
int pl_text_check(const char *path, const char *text, size_t len, pl_err *e);
/* Writes a byte count for people into buf[n]: "512 bytes", then one decimal in the largest binary
 * unit it reaches ("1.5 KiB", "12.3 GiB", up to EiB); returns buf. The one form of every message
 * and table that prints sizes. */
const char *pl_human_bytes(double bytes, char *buf, size_t n);
/* Copies text src[0..len) into dst[n] as a name pipelab's files carry on one line and read back
 * as written: a control character, a byte that is not UTF-8 and the syntax of its files
 * (# ; = [ ] , ") each become '_', and a name longer than n - 1 bytes is cut at a character's
 * boundary. For names taken from file names (a model's, a hardware file's, a calibration's
 * source). Returns dst. */
char *pl_clean_name(char *dst, size_t n, const char *src, size_t len);

/* Parses a whole decimal integer in [lo, hi]; returns 0 on success, -1 on junk or range error. */
int pl_parse_long(const char *s, long lo, long hi, long *out);
/* Parses a whole finite double; returns 0 on success, -1 otherwise. */
int pl_parse_double(const char *s, double *out);

/* Monotonic wall-clock time in seconds. */
double pl_now_s(void);

/* A progress bar on stderr for long work (DESIGN §8): drawn only when stderr is a terminal and
 * PIPELAB_PROGRESS is not "0", first after a second of work (PIPELAB_PROGRESS_AFTER seconds when
 * set), redrawn every 0.1 s by a thread of
 * its own, and cleared by pl_progress_end, so that piped output and short runs never see it:
 *   pipelab simulate [##############..............]  50%  5/10  1.3 s
 * The work only calls pl_progress_set (one relaxed atomic store: fine in a hot loop, from any
 * thread). Every function accepts NULL (no bar). */
typedef struct pl_progress pl_progress;
/* The environment variables that steer the bar: "0" turns it off; seconds before it appears. */
#define PL_PROGRESS_ENV "PIPELAB_PROGRESS"
#define PL_PROGRESS_AFTER_ENV "PIPELAB_PROGRESS_AFTER"
/* Starts a bar for total steps (0: elapsed time only); NULL when no bar is drawn. */
pl_progress *pl_progress_start(const char *what, uint64_t total);
/* The same on fd; force draws at once even when fd is not a terminal (tests). */
pl_progress *pl_progress_start_fd(int fd, int force, const char *what, uint64_t total);
void pl_progress_set(pl_progress *p, uint64_t done);
/* Stops the drawing, clears the line and frees p. */
void pl_progress_end(pl_progress *p);
/* Formats the bar's line for done of total after t seconds into buf (size n); returns its length. */
size_t pl_progress_format(char *buf, size_t n, const char *what, uint64_t done, uint64_t total, double t);

#endif
