/* partition_file.c: the partition file ("pipelab-partition 1"; README): the writer, and a reader
 * that refuses what it cannot take with "path:line: what". A file keeps a partition's stages,
 * replicas and provenance, and of the planner's predictions the stage times (comments carry the
 * configuration, the predicted time per minibatch and NOAM for the reader of the file). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "cost_int.h"

void cost_partition_write(const cost_partition *p, pl_buf *b) {
    const cost_partition_pred *pr = p->pred;
    pl_buf_puts(b, "pipelab-partition 1\n");
    pl_buf_printf(b, "method %s\n", p->method[0] ? p->method : "manual");
    /* names as the file carries them on a line (a hardware file's own name may begin with '#') */
    char nm[sizeof p->model > sizeof p->hardware ? sizeof p->model : sizeof p->hardware];
    if (p->model[0]) pl_buf_printf(b, "model %s\n", pl_clean_name(nm, sizeof nm, p->model, strlen(p->model)));
    if (p->hardware[0]) pl_buf_printf(b, "hardware %s\n", pl_clean_name(nm, sizeof nm, p->hardware, strlen(p->hardware)));
    pl_buf_printf(b, "layers %d\n", cost_partition_layers(p));
    pl_buf_printf(b, "workers %d\n", cost_partition_workers(p));
    pl_buf_puts(b, "# config ");
    cost_plan_config(p, b);
    pl_buf_printf(b, ", predicted %.9g s per minibatch, NOAM %d\n", pr ? pr->bottleneck_s : 0.0, cost_partition_noam(p));
    if (pr && strcmp(pr->hierarchy, "pipedream") == 0) {
        pl_buf_puts(b, "# pipedream hierarchy ");
        cost_plan_hier_config(p, b);
        pl_buf_printf(b, ", %.9g s per stage (PipeDream's cost model)\n", pr->hier_time_s);
    }
    for (int s = 0; s < p->stages; s++) {
        pl_buf_printf(b, "stage %d: layers %d-%d replicas %d", s, p->bound[s], p->bound[s + 1] - 1, p->replicas[s]);
        if (pr && pr->stage[s].time_s > 0) pl_buf_printf(b, " time_s %.9g", pr->stage[s].time_s);
        pl_buf_putc(b, '\n');
    }
}

/* Splits a line into at most max whitespace-separated words (modifies it); returns the count,
 * or max + 1 when there are more. */
static int split_words(char *s, char **w, int max) {
    int n = 0;
    while (*s) {
        while (*s && isspace((unsigned char)*s)) *s++ = '\0';
        if (!*s) break;
        if (n == max) return max + 1;
        w[n++] = s;
        while (*s && !isspace((unsigned char)*s)) s++;
    }
    return n;
}

/* Joins a "key value" provenance word list back with single spaces into dst; returns -1 when
 * it does not fit (the value is refused, never cut: a cut value would not read back the same). */
static int join_words(char **w, int from, int n, char *dst, size_t cap) {
    dst[0] = '\0';
    size_t len = 0;
    for (int k = from; k < n; k++) {
        int wrote = snprintf(dst + len, cap - len, "%s%s", k > from ? " " : "", w[k]);
        if (wrote < 0 || (size_t)wrote >= cap - len) return -1;
        len += (size_t)wrote;
    }
    return 0;
}

/* Returns the first control character of a line (tab and carriage return allowed), or -1. */
static int control_char(const char *line) {
    for (const unsigned char *c = (const unsigned char *)line; *c; c++)
        if ((*c < 0x20 && *c != '\t' && *c != '\r') || *c == 0x7f) return *c;
    return -1;
}

/* State of one partition file being read: what has been seen and declared, for the checks; the
 * stages read so far (bound[0 .. n], reps[n], time[n]) and the provenance lines (in head). */
typedef struct part_reader {
    const char *path;
    int lineno, last_line;
    int have_magic, have_layers, have_workers, have_method;
    int declared_layers, declared_workers, cap;
    int n, workers;
    int *bound, *reps;
    double *time;
    cost_partition head;
    pl_err *e;
} part_reader;

/* Reads the magic line 'pipelab-partition 1'; returns PL_OK or the error. */
static int read_magic(part_reader *r, char **w, int n) {
    if (strcmp(w[0], "pipelab-partition") != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: not a partition file (the first line must be 'pipelab-partition 1')",
                       r->path, r->lineno);
    if (n != 2 || strcmp(w[1], "1") != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: unsupported partition file version '%s' (this build reads 1)", r->path,
                       r->lineno, n > 1 ? w[1] : "");
    r->have_magic = 1;
    return PL_OK;
}

/* Reads a 'method', 'model' or 'hardware' line into its text field; returns PL_OK or the error. */
static int read_text_key(part_reader *r, char **w, int n) {
    cost_partition *out = &r->head;
    if (n < 2) return pl_errf(r->e, PL_EINPUT, "%s:%d: '%s' needs a value", r->path, r->lineno, w[0]);
    char *dst = w[0][1] == 'e' ? out->method : w[0][1] == 'o' ? out->model : out->hardware;
    size_t dcap = w[0][1] == 'e' ? sizeof out->method : w[0][1] == 'o' ? sizeof out->model : sizeof out->hardware;
    if (dst[0] || (dst == out->method && r->have_method))
        return pl_errf(r->e, PL_EINPUT, "%s:%d: duplicate '%s' line", r->path, r->lineno, w[0]);
    if (join_words(w, 1, n, dst, dcap) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: '%s' value longer than %zu characters", r->path, r->lineno, w[0], dcap - 1);
    if (dst == out->method) r->have_method = 1;
    return PL_OK;
}

/* Reads a 'layers N' or 'workers N' line (checked against the stages at the end); returns
 * PL_OK or the error. */
static int read_count_key(part_reader *r, char **w, int n) {
    int is_layers = w[0][0] == 'l';
    if (is_layers ? r->have_layers : r->have_workers)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: duplicate '%s' line", r->path, r->lineno, w[0]);
    long hi = is_layers ? COST_PART_MAX_LAYERS : COST_PART_MAX_WORKERS, v;
    if (n != 2 || pl_parse_long(w[1], 1, hi, &v) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: '%s' needs one whole number between 1 and %ld", r->path, r->lineno, w[0], hi);
    if (is_layers) r->have_layers = 1, r->declared_layers = (int)v;
    else r->have_workers = 1, r->declared_workers = (int)v;
    return PL_OK;
}

/* Reads the layer range FIRST-LAST of a stage line into *a, *b: contiguous with the stage
 * before and not empty. Returns PL_OK or the error. */
static int read_layer_range(part_reader *r, char *range, long *a, long *b) {
    char *dash = strchr(range, '-');
    if (!dash) return pl_errf(r->e, PL_EINPUT, "%s:%d: layer range '%s' must be FIRST-LAST", r->path, r->lineno, range);
    *dash = '\0';
    if (pl_parse_long(range, 0, COST_PART_MAX_LAYERS - 1, a) != 0 ||
        pl_parse_long(dash + 1, 0, COST_PART_MAX_LAYERS - 1, b) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: layer range must be two whole numbers FIRST-LAST", r->path, r->lineno);
    if (*b < *a) return pl_errf(r->e, PL_EINPUT, "%s:%d: layer range %ld-%ld is empty", r->path, r->lineno, *a, *b);
    int expect = r->n ? r->bound[r->n] : 0;
    if (*a != expect)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: stage %d starts at layer %ld but must start at layer %d (stages are contiguous)",
                       r->path, r->lineno, r->n, *a, expect);
    return PL_OK;
}

/* Appends a stage of layers a..b on r replicas taking time_s t; returns PL_OK or the error. */
static int push_stage(part_reader *r, long a, long b, long reps, double t) {
    if (r->n == r->cap) {
        int nc = r->cap ? r->cap * 2 : 8;
        int *nb = pl_reallocarray(r->bound, (size_t)nc + 1, sizeof *nb);
        if (nb) r->bound = nb;
        int *nr = pl_reallocarray(r->reps, (size_t)nc, sizeof *nr);
        if (nr) r->reps = nr;
        double *nt = pl_reallocarray(r->time, (size_t)nc, sizeof *nt);
        if (nt) r->time = nt;
        if (!nb || !nr || !nt) return pl_errf(r->e, PL_ENOMEM, "%s:%d: out of memory", r->path, r->lineno);
        r->cap = nc;
    }
    r->bound[r->n] = (int)a;
    r->bound[r->n + 1] = (int)b + 1;
    r->reps[r->n] = (int)reps;
    r->time[r->n++] = t;
    if (r->workers + (int)reps > COST_PART_MAX_WORKERS)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: more than %d workers in all", r->path, r->lineno, COST_PART_MAX_WORKERS);
    r->workers += (int)reps;
    return PL_OK;
}

/* Reads a line 'stage K: layers FIRST-LAST replicas R [time_s T]'; returns PL_OK or the error. */
static int read_stage(part_reader *r, char **w, int n) {
    size_t kl = n > 1 ? strlen(w[1]) : 0;
    if (n < 6 || kl < 2 || w[1][kl - 1] != ':' || strcmp(w[2], "layers") != 0 || strcmp(w[4], "replicas") != 0 ||
        (n != 6 && n != 8) || (n == 8 && strcmp(w[6], "time_s") != 0))
        return pl_errf(r->e, PL_EINPUT, "%s:%d: expected 'stage K: layers FIRST-LAST replicas R [time_s T]'", r->path,
                       r->lineno);
    w[1][kl - 1] = '\0';
    long k, a, b, reps;
    if (pl_parse_long(w[1], 0, COST_PART_MAX_LAYERS, &k) != 0 || k != r->n)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: stage number '%s' out of order (expected %d)", r->path, r->lineno, w[1],
                       r->n);
    int rc = read_layer_range(r, w[3], &a, &b);
    if (rc != PL_OK) return rc;
    if (pl_parse_long(w[5], 1, COST_PART_MAX_WORKERS, &reps) != 0)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: replicas must be a whole number between 1 and %d (got '%s')", r->path,
                       r->lineno, COST_PART_MAX_WORKERS, w[5]);
    double t = 0;
    if (n == 8 && (pl_parse_double(w[7], &t) != 0 || t < 0))
        return pl_errf(r->e, PL_EINPUT, "%s:%d: time_s must be a non-negative number (got '%s')", r->path, r->lineno, w[7]);
    return push_stage(r, a, b, reps, t);
}

/* Reads one line (comments already cut off); returns PL_OK or the error. */
static int read_line(part_reader *r, char *line) {
    enum { MAX_WORDS = 15 };
    char *w[MAX_WORDS + 1];
    int n = split_words(line, w, MAX_WORDS);
    if (n == 0) return PL_OK;
    r->last_line = r->lineno;
    if (n > MAX_WORDS) return pl_errf(r->e, PL_EINPUT, "%s:%d: too many words on the line", r->path, r->lineno);
    if (!r->have_magic) return read_magic(r, w, n);
    if (strcmp(w[0], "method") == 0 || strcmp(w[0], "model") == 0 || strcmp(w[0], "hardware") == 0)
        return read_text_key(r, w, n);
    if (strcmp(w[0], "layers") == 0 || strcmp(w[0], "workers") == 0) return read_count_key(r, w, n);
    if (strcmp(w[0], "stage") == 0) return read_stage(r, w, n);
    return pl_errf(r->e, PL_EINPUT, "%s:%d: unknown key '%s' (expected method, model, hardware, layers, workers or stage)",
                   r->path, r->lineno, w[0]);
}

/* Checks the whole file once read: a magic line, stages, and the declared layer and worker
 * counts. Returns PL_OK or the error. */
static int check_read(const part_reader *r) {
    if (!r->have_magic) return pl_errf(r->e, PL_EINPUT, "%s:1: empty file, expected 'pipelab-partition 1'", r->path);
    if (r->n == 0) return pl_errf(r->e, PL_EINPUT, "%s:%d: no 'stage' lines", r->path, r->last_line);
    int last = r->bound[r->n] - 1;
    if (r->have_layers && last + 1 != r->declared_layers)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: the stages cover layers 0-%d but the file says 'layers %d'", r->path,
                       r->last_line, last, r->declared_layers);
    if (r->have_workers && r->workers != r->declared_workers)
        return pl_errf(r->e, PL_EINPUT, "%s:%d: the stages use %d workers but the file says 'workers %d'", r->path,
                       r->last_line, r->workers, r->declared_workers);
    return PL_OK;
}

/* Builds the partition read: stages, provenance (method "manual" when the file names none), and
 * the stage times as predictions with their maximum as the bottleneck. Returns PL_OK or PL_ENOMEM. */
static int finish_read(const part_reader *r, cost_partition **out) {
    cost_partition *p = cost_partition_new(r->n);
    if (!p || !cost_partition_attach_pred(p)) {
        cost_partition_free(p);
        return pl_errf(r->e, PL_ENOMEM, "%s: out of memory", r->path);
    }
    memcpy(p->bound, r->bound, ((size_t)r->n + 1) * sizeof *p->bound);
    memcpy(p->replicas, r->reps, (size_t)r->n * sizeof *p->replicas);
    memcpy(p->method, r->head.method, sizeof p->method);
    memcpy(p->model, r->head.model, sizeof p->model);
    memcpy(p->hardware, r->head.hardware, sizeof p->hardware);
    if (!r->have_method) snprintf(p->method, sizeof p->method, "manual");
    for (int s = 0, a = 0; s < p->stages; a += p->replicas[s++]) {
        p->pred->stage[s].first_worker = a;
        p->pred->stage[s].time_s = r->time[s];
        if (r->time[s] > p->pred->bottleneck_s) p->pred->bottleneck_s = r->time[s];
    }
    *out = p;
    return PL_OK;
}

int cost_partition_parse_text(const char *text, const char *path, cost_partition **out, pl_err *e) {
    *out = NULL;
    part_reader r = {.path = path ? path : "<partition>", .last_line = 1, .e = e};
    if (!text) text = "";
    char *copy = strdup(text + pl_bom_len(text, strlen(text)));
    if (!copy) return pl_errf(e, PL_ENOMEM, "%s: out of memory", r.path);
    int rc = PL_OK;
    for (char *line = copy, *nl; line && rc == PL_OK; line = nl) {
        nl = strchr(line, '\n');
        if (nl) *nl++ = '\0';
        r.lineno++;
        int cc = control_char(line);
        if (cc >= 0) {
            rc = pl_errf(e, PL_EINPUT, "%s:%d: control character 0x%02x in the line (a partition file is text)", r.path,
                         r.lineno, cc);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        rc = read_line(&r, line);
    }
    free(copy);
    if (rc == PL_OK) rc = check_read(&r);
    if (rc == PL_OK) rc = finish_read(&r, out);
    free(r.bound);
    free(r.reps);
    free(r.time);
    return rc;
}

int cost_partition_read(const char *path, cost_partition **out, pl_err *e) {
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = pl_read_file(path, (size_t)64 << 20, &text, &len, e);
    if (rc != PL_OK) return rc;
    rc = pl_text_check(path, text, len, e);
    if (rc == PL_OK) rc = cost_partition_parse_text(text, path, out, e);
    free(text);
    return rc;
}
