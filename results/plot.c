/* plot.c: exports figure data from the results store and writes and runs gnuplot scripts. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store.h"

extern char **environ;

/* The templates embedded from results/gnuplot (plot_templates.c, generated). */
extern const struct store_plot_template { const char *name; const char *text; } store_plot_templates[];

/* Returns the text of the embedded template name, or NULL. */
static const char *template_text(const char *name) {
    for (const struct store_plot_template *t = store_plot_templates; t->name; t++)
        if (strcmp(t->name, name) == 0) return t->text;
    return NULL;
}

/* Appends s as the inside of a gnuplot double-quoted string. */
static void gp_escape(pl_buf *b, const char *s) {
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') pl_buf_putc(b, '\\');
        if (*s == '\n') pl_buf_puts(b, "\\n");
        else pl_buf_putc(b, *s);
    }
}

/* Appends template text with @TERMINAL@, @OUTPUT@ and @TITLE@ replaced. */
static void put_template(pl_buf *b, const char *text, const char *terminal, const char *output, const char *title) {
    while (*text) {
        const char *at = strchr(text, '@');
        if (!at) {
            pl_buf_puts(b, text);
            return;
        }
        pl_buf_printf(b, "%.*s", (int)(at - text), text);
        if (strncmp(at, "@TERMINAL@", 10) == 0) pl_buf_puts(b, terminal), text = at + 10;
        else if (strncmp(at, "@OUTPUT@", 8) == 0) gp_escape(b, output), text = at + 8;
        else if (strncmp(at, "@TITLE@", 7) == 0) gp_escape(b, title), text = at + 7;
        else pl_buf_putc(b, '@'), text = at + 1;
    }
}

/* Starts a script: the common template then the kind's, for a figure of w x h pixels. */
static void script_begin(pl_buf *b, const store_plot_opts *o, const char *kind, int w, int h, const char *title) {
    char term[160];
    size_t olen = o->output ? strlen(o->output) : 0;
    /* the terminal follows the output's extension (.pdf: pdfcairo, sized in inches at 72 px per inch) */
    if (olen >= 4 && strcmp(o->output + olen - 4, ".pdf") == 0)
        snprintf(term, sizeof term, "pdfcairo size %.2fin,%.2fin font \"DejaVu Sans,10\" background rgb \"white\"", w / 72.0, h / 72.0);
    else if (o->svg || (olen >= 4 && strcmp(o->output + olen - 4, ".svg") == 0))
        snprintf(term, sizeof term, "svg size %d,%d dynamic font \"DejaVu Sans,10\" background rgb \"white\"", w, h);
    else snprintf(term, sizeof term, "pngcairo size %d,%d font \"DejaVu Sans,10\" background rgb \"white\"", w, h);
    pl_buf_printf(b, "# %s figure written by pipelab %s; rerun with: gnuplot %s\n", kind, PL_VERSION, o->script);
    pl_buf_puts(b, "datafile = \"");
    gp_escape(b, o->data);
    pl_buf_puts(b, "\"\n");
    put_template(b, template_text("common"), term, o->output, o->title ? o->title : title);
    put_template(b, template_text(kind), term, o->output, o->title ? o->title : title);
}

/* Chooses a time unit for values up to max_s: fills *scale (multiply seconds) and *name. */
static void time_unit(double max_s, double *scale, const char **name) {
    if (max_s > 0 && max_s < 1e-3) *scale = 1e6, *name = "us";
    else if (max_s > 0 && max_s < 1) *scale = 1e3, *name = "ms";
    else *scale = 1, *name = "s";
}

/* Chooses a byte unit for values up to max: fills *scale (divide bytes) and *name. */
static void byte_unit(double max, double *scale, const char **name) {
    if (max >= 1024.0 * 1024 * 1024) *scale = 1024.0 * 1024 * 1024, *name = "GiB";
    else if (max >= 1024.0 * 1024) *scale = 1024.0 * 1024, *name = "MiB";
    else if (max >= 1024.0) *scale = 1024.0, *name = "KiB";
    else *scale = 1, *name = "bytes";
}

/* Measured curves: dotted lines and open squares beside the simulated ones. */
#define MEASURED_STYLE "dt (2,3) pt 4 ps 1.6"

/* ---- curves: named point sets shared by bubble, throughput and accuracy ---- */

typedef struct point { double x, y; } point;
typedef struct curve {
    char key[96];
    int color;      /* linetype 1..10 */
    int panel;      /* bubble: index of the pipeline depth */
    int dashed;     /* analytic curve */
    point *pts;
    size_t n, cap;
} curve;
typedef struct curves { curve *c; size_t n, cap; } curves;

/* Returns the curve with this key and panel, creating it; NULL when out of memory. */
static curve *curve_get(curves *cs, const char *key, int panel) {
    for (size_t i = 0; i < cs->n; i++)
        if (cs->c[i].panel == panel && strcmp(cs->c[i].key, key) == 0) return &cs->c[i];
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? 2 * cs->cap : 8;
        curve *c = pl_reallocarray(cs->c, cap, sizeof *c);
        if (!c) return NULL;
        cs->c = c;
        cs->cap = cap;
    }
    curve *c = &cs->c[cs->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->key, sizeof c->key, "%s", key);
    c->panel = panel;
    return c;
}

/* Sets the y of the point at x (a later run replaces an earlier one), or adds it; 0 or -1. */
static int curve_put(curve *c, double x, double y, int replace) {
    if (replace)
        for (size_t i = 0; i < c->n; i++)
            if (c->pts[i].x == x) {
                c->pts[i].y = y;
                return 0;
            }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        point *p = pl_reallocarray(c->pts, cap, sizeof *p);
        if (!p) return -1;
        c->pts = p;
        c->cap = cap;
    }
    c->pts[c->n++] = (point){x, y};
    return 0;
}

static int cmp_point(const void *a, const void *b) {
    double x = ((const point *)a)->x, y = ((const point *)b)->x;
    return (x > y) - (x < y);
}

static void curves_free(curves *cs) {
    for (size_t i = 0; i < cs->n; i++) free(cs->c[i].pts);
    free(cs->c);
    memset(cs, 0, sizeof *cs);
}

/* The order schedules are coloured in, so a schedule keeps its colour across figures. */
static const char *const sched_order[] = {"gpipe", "1f1b", "interleaved", "looped-bfs", "pipedream", "2bw",
                                          "zb-h1", "zb-h2", "zbv", "dualpipev", NULL};

/* Returns the colour (linetype 1..10) of a curve key that starts with a schedule name. */
static int sched_color(const char *key) {
    size_t best = 0;
    int idx = -1;
    for (int i = 0; sched_order[i]; i++) {
        size_t n = strlen(sched_order[i]);
        if (strncmp(key, sched_order[i], n) == 0 && (key[n] == 0 || key[n] == ' ') && n > best) best = n, idx = i;
    }
    return idx < 0 ? 10 : idx + 1;
}

/* Returns a rank for sorting curve keys: schedule order, then the key text. */
static int cmp_curve(const void *a, const void *b) {
    const curve *x = a, *y = b;
    if (x->panel != y->panel) return x->panel - y->panel;
    if (x->dashed != y->dashed) return x->dashed - y->dashed;
    int cx = sched_color(x->key), cy = sched_color(y->key);
    if (cx != cy) return cx - cy;
    return strcmp(x->key, y->key);
}

/* Writes each curve as one data block (index i = curve i), points sorted by x. */
static void curves_write(curves *cs, pl_buf *d) {
    qsort(cs->c, cs->n, sizeof *cs->c, cmp_curve);
    for (size_t i = 0; i < cs->n; i++) {
        curve *c = &cs->c[i];
        qsort(c->pts, c->n, sizeof *c->pts, cmp_point);
        pl_buf_printf(d, "# block %zu: %s\n", i, c->key);
        for (size_t k = 0; k < c->n; k++) pl_buf_printf(d, "%.10g %.10g\n", c->pts[k].x, c->pts[k].y);
        pl_buf_puts(d, "\n\n");
    }
}

/* Appends the schedule part of a curve key: "1f1b", "interleaved v=2", plus " (measured)". */
static void sched_key(char *buf, size_t n, const store_run *r) {
    int len = snprintf(buf, n, "%s", r->schedule && *r->schedule ? r->schedule : "?");
    if (r->chunks > 1 && len > 0 && (size_t)len < n) len += snprintf(buf + len, n - (size_t)len, " v=%d", r->chunks);
    if (strcmp(r->kind, "measured") == 0 && len > 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, " (measured)");
}

/* Creates the parent directories of path (like mkdir -p on its dirname); 0 or -1 with e. */
static int mkdir_parents(const char *path, pl_err *e) {
    char *p = strdup(path);
    if (!p) return pl_errf(e, PL_ENOMEM, "out of memory"), -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            pl_errf(e, PL_EIO, "%s: cannot create directory: %s", p, strerror(errno));
            free(p);
            return -1;
        }
        *s = '/';
    }
    free(p);
    return 0;
}

/* Writes the data and the script; returns PL_OK or an error code. */
static int write_both(const store_plot_opts *o, const pl_buf *d, const pl_buf *g, pl_err *e) {
    if (d->failed || g->failed) return pl_errf(e, PL_ENOMEM, "out of memory building the figure");
    if (mkdir_parents(o->data, e) || mkdir_parents(o->script, e) || mkdir_parents(o->output, e)) return e->code;
    int code = pl_write_file(o->data, d->data ? d->data : "", d->len, e);
    if (code == PL_OK) code = pl_write_file(o->script, g->data ? g->data : "", g->len, e);
    return code;
}

/* ---- timeline ---- */

/* Returns the fill colour of a compute kind, lighter for a rank's odd chunks. */
static unsigned kind_color(const char *kind, int odd_chunk) {
    unsigned c = 0xBAB0AC;
    if (strcmp(kind, "F") == 0) c = 0x4E79A7;
    else if (strcmp(kind, "B") == 0) c = 0xE15759;
    else if (strcmp(kind, "I") == 0) c = 0xF28E2B;
    else if (strcmp(kind, "W") == 0) c = 0x59A14F;
    else if (strncmp(kind, "OVERLAP", 7) == 0) c = 0xB07AA1;
    if (odd_chunk) {
        unsigned r = (c >> 16) & 255, g = (c >> 8) & 255, b = c & 255;
        r += (255 - r) * 45 / 100, g += (255 - g) * 45 / 100, b += (255 - b) * 45 / 100;
        c = r << 16 | g << 8 | b;
    }
    return c;
}

/* Returns 1 for the compute kinds drawn as full-height boxes. */
static int is_compute(const char *k) {
    return !strcmp(k, "F") || !strcmp(k, "B") || !strcmp(k, "I") || !strcmp(k, "W") || !strncmp(k, "OVERLAP", 7);
}

/* Returns 1 for the communication kinds drawn as thin bars. */
static int is_comm(const char *k) { return !strncmp(k, "SEND_", 5) || !strncmp(k, "RECV_", 5) || !strcmp(k, "REDUCE_GRAD"); }

/* Returns the thin-bar colour of a communication kind. */
static unsigned comm_color(const char *k) {
    if (!strncmp(k, "SEND_", 5)) return 0x333333;
    if (!strncmp(k, "RECV_", 5)) return 0x9A9A9A;
    return 0x76B7B2; /* REDUCE_GRAD */
}

/* Exports a run's ops: compute boxes (index 0) and communication bars (index 1). */
static int plot_timeline(store *s, const store_plot_opts *o, pl_err *e) {
    if (!o->run) return pl_errf(e, PL_EINPUT, "timeline needs a run (integer id, uid or uid prefix)");
    store_run r;
    int code = store_get_run(s, o->run, &r, e);
    if (code != PL_OK) return code;
    store_op *ops = NULL;
    size_t n = 0;
    pl_buf d, g;
    pl_buf_init(&d);
    pl_buf_init(&g);
    int *first_stage = NULL;
    code = store_get_ops(s, r.id, &ops, &n, e);
    if (code != PL_OK) goto done;
    int ranks = r.ranks;
    double tmax = 0, dmin = INFINITY;
    int nc = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].rank + 1 > ranks) ranks = ops[i].rank + 1;
        if (ops[i].end_s > tmax) tmax = ops[i].end_s;
        if (is_compute(ops[i].kind)) {
            nc++;
            if (ops[i].end_s - ops[i].start_s > 0) dmin = fmin(dmin, ops[i].end_s - ops[i].start_s);
        }
    }
    if (nc == 0 || !(tmax > 0)) {
        code = pl_errf(e, PL_EINPUT, "run %lld has no recorded compute actions to draw: simulate it with --trace",
                       (long long)r.id);
        goto done;
    }
    /* The lowest stage each rank holds: stages above it are later chunks (drawn lighter). */
    first_stage = pl_calloc((size_t)ranks, sizeof *first_stage);
    if (!first_stage) {
        code = pl_errf(e, PL_ENOMEM, "out of memory");
        goto done;
    }
    for (int q = 0; q < ranks; q++) first_stage[q] = -1;
    for (size_t i = 0; i < n; i++)
        if (is_compute(ops[i].kind) && (first_stage[ops[i].rank] < 0 || ops[i].stage < first_stage[ops[i].rank]))
            first_stage[ops[i].rank] = ops[i].stage;
    double scale;
    const char *unit;
    time_unit(tmax, &scale, &unit);
    /* Width: the shortest compute box gets about 18 pixels, within 900..3000 pixels of plot. */
    double plot_px = fmin(3000, fmax(900, 18 * tmax / (isfinite(dmin) ? dmin : tmax)));
    int w = (int)plot_px + 140, h = 130 + 36 * ranks;
    double px_per_s = plot_px / tmax;
    int have[5] = {0, 0, 0, 0, 0}, have_comm[3] = {0, 0, 0}, chunks = 0;
    pl_buf_puts(&d, "# compute: rank x_center x_halfwidth colour label label_colour\n");
    for (size_t i = 0; i < n; i++) {
        const store_op *p = &ops[i];
        if (!is_compute(p->kind)) continue;
        int odd = r.chunks > 1 ? ((p->stage - first_stage[p->rank]) / (r.ranks > 0 ? r.ranks : 1)) % 2 : 0;
        if (strcmp(r.schedule, "zbv") == 0 || strcmp(r.schedule, "dualpipev") == 0) odd = p->stage != first_stage[p->rank];
        if (odd) chunks = 1;
        char label[16] = "";
        if (p->mb >= 0) snprintf(label, sizeof label, "%d", p->mb);
        /* A label is drawn only where it fits (about 7 pixels per digit at the figure's font). */
        if ((p->end_s - p->start_s) * px_per_s < 7.0 * (double)strlen(label) + 3) label[0] = 0;
        const char *k = p->kind;
        have[!strcmp(k, "F") ? 0 : !strcmp(k, "B") ? 1 : !strcmp(k, "I") ? 2 : !strcmp(k, "W") ? 3 : 4] = 1;
        pl_buf_printf(&d, "%d %.10g %.10g %u \"%s\" %u\n", p->rank, 0.5 * (p->start_s + p->end_s) * scale,
                      0.5 * (p->end_s - p->start_s) * scale, kind_color(k, odd), label, odd ? 0x222222u : 0xFFFFFFu);
    }
    pl_buf_puts(&d, "\n\n# communication: rank x_center x_halfwidth colour\n");
    int ncomm = 0;
    for (size_t i = 0; i < n; i++) {
        const store_op *p = &ops[i];
        if (!is_comm(p->kind) || !(p->end_s > p->start_s)) continue;
        have_comm[!strncmp(p->kind, "SEND_", 5) ? 0 : !strncmp(p->kind, "RECV_", 5) ? 1 : 2] = 1;
        pl_buf_printf(&d, "%d %.10g %.10g %u\n", p->rank, 0.5 * (p->start_s + p->end_s) * scale,
                      0.5 * (p->end_s - p->start_s) * scale, comm_color(p->kind));
        ncomm++;
    }
    if (ncomm == 0) pl_buf_puts(&d, "0 NaN NaN 0\n");
    char title[256];
    snprintf(title, sizeof title, "%s run %lld: %s, p = %d, m = %d%s%.0d, iteration %.4g %s, bubble %.1f%%",
             r.kind, (long long)r.id, r.schedule, r.ranks, r.microbatches, r.chunks > 1 ? ", v = " : "",
             r.chunks > 1 ? r.chunks : 0, r.iteration_time_s * scale, unit, 100 * r.bubble_fraction);
    script_begin(&g, o, "timeline", w, h, title);
    pl_buf_printf(&g, "nranks = %d\nxmax = %.10g\nxlabel_text = \"time (%s); labels: microbatch%s\"\n", ranks,
                  tmax * scale * 1.005, unit, chunks ? "; lighter: a rank's later chunks" : "");
    pl_buf_printf(&g, "set xrange [0:xmax]\nset yrange [nranks - 0.5:-0.5]\nset xlabel xlabel_text font \",11\"\n");
    pl_buf_puts(&g, "plot \\\n");
    static const char *const names[5] = {"F  forward", "B  backward", "I  input grad", "W  weight grad", "F+B overlapped"};
    static const unsigned colors[5] = {0x4E79A7, 0xE15759, 0xF28E2B, 0x59A14F, 0xB07AA1};
    for (int k = 0; k < 5; k++)
        if (have[k]) pl_buf_printf(&g, "  NaN with boxes fs solid lc rgb \"#%06X\" title \"%s\", \\\n", colors[k], names[k]);
    static const char *const cnames[3] = {"send", "receive wait", "gradient all-reduce"};
    static const unsigned ccolors[3] = {0x333333, 0x9A9A9A, 0x76B7B2};
    for (int k = 0; k < 3; k++)
        if (have_comm[k]) pl_buf_printf(&g, "  NaN with boxes fs solid lc rgb \"#%06X\" title \"%s\", \\\n", ccolors[k], cnames[k]);
    pl_buf_puts(&g, "  datafile index 0 using 2:1:3:(0.36):4 with boxxyerror lc rgb variable notitle, \\\n"
                    "  datafile index 0 using 2:1:5:6 with labels font \",8\" tc rgb variable notitle, \\\n"
                    "  datafile index 1 using 2:($1 + 0.44):3:(0.045):4 with boxxyerror fs solid 1.0 noborder lc rgb variable notitle\n");
    code = write_both(o, &d, &g, e);
done:
    free(first_stage);
    store_ops_free(ops, n);
    store_run_clear(&r);
    pl_buf_free(&d);
    pl_buf_free(&g);
    return code;
}

/* ---- bubble ---- */

/* Adds the analytic curve of one panel (ranks p) over m in [m0, m1]: v = 0 for gpipe/1f1b,
 * (p-1)/(m+p-1); v >= 2 for interleaved, Megatron's bubble/compute ratio (p-1)/(v m) as a
 * fraction of the iteration, (p-1)/(v m + p - 1). Returns 0 or -1 (out of memory). */
static int analytic(curves *cs, int panel, int p, int v, double m0, double m1) {
    char key[96];
    if (v <= 1) snprintf(key, sizeof key, "gpipe, 1f1b analytic (p-1)/(m+p-1)");
    else snprintf(key, sizeof key, "interleaved v=%d analytic (p-1)/(%dm+p-1)", v, v);
    curve *c = curve_get(cs, key, panel);
    if (!c) return -1;
    c->dashed = 1;
    c->color = v <= 1 ? 10 : sched_color("interleaved");
    if (c->n) return 0;
    for (int k = 0; k <= 200; k++) {
        double m = m0 * pow(m1 / m0, k / 200.0);
        if (curve_put(c, m, (p - 1.0) / ((v <= 1 ? 1 : v) * m + p - 1.0), 0)) return -1;
    }
    return 0;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Exports bubble fraction against microbatches: one panel per pipeline depth. */
static int plot_bubble(store *s, const store_plot_opts *o, pl_err *e) {
    store_run *runs = NULL;
    size_t n = 0;
    int code = store_select_runs(s, &o->filter, NULL, &runs, &n, e);
    if (code != PL_OK) return code;
    curves cs = {0};
    pl_buf d, g;
    pl_buf_init(&d);
    pl_buf_init(&g);
    int depths[16], nd = 0;
    if (n == 0) {
        code = pl_errf(e, PL_EINPUT, "no runs to plot%s%s", o->filter.tag ? " with tag " : "", o->filter.tag ? o->filter.tag : "");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (int k = 0; k < nd; k++) found |= depths[k] == runs[i].ranks;
        if (!found) {
            if (nd == 16) {
                code = pl_errf(e, PL_EINPUT, "runs with more than 16 pipeline depths: choose some with --ranks");
                goto done;
            }
            depths[nd++] = runs[i].ranks;
        }
    }
    qsort(depths, (size_t)nd, sizeof *depths, cmp_int);
    double mmin = INFINITY, mmax = 0;
    for (size_t i = 0; i < n; i++) {
        const store_run *r = &runs[i];
        int panel = 0;
        while (depths[panel] != r->ranks) panel++;
        char key[96];
        sched_key(key, sizeof key, r);
        curve *c = curve_get(&cs, key, panel);
        if (!c || curve_put(c, r->microbatches, r->bubble_fraction, 1)) goto oom;
        c->color = sched_color(key);
        mmin = fmin(mmin, r->microbatches);
        mmax = fmax(mmax, r->microbatches);
    }
    if (mmax <= mmin) mmax = mmin + 1;
    size_t nmeasured = cs.n;
    for (size_t i = 0; i < nmeasured; i++) {
        const curve *c = &cs.c[i];
        int p = depths[c->panel], v = 0;
        if (!strncmp(c->key, "gpipe", 5) || (!strncmp(c->key, "1f1b", 4) && !strstr(c->key, "v=")))
            v = 1;
        else if (!strncmp(c->key, "interleaved v=", 14)) v = atoi(c->key + 14);
        if (v && analytic(&cs, c->panel, p, v, mmin, mmax)) goto oom;
    }
    curves_write(&cs, &d);
    int cols = nd <= 1 ? 1 : 2, rows = (nd + cols - 1) / cols;
    char title[256];
    snprintf(title, sizeof title, "Bubble fraction against microbatches%s%s", o->filter.tag ? " (" : "",
             o->filter.tag ? o->filter.tag : "");
    if (o->filter.tag) strncat(title, ")", sizeof title - strlen(title) - 1);
    script_begin(&g, o, "bubble", cols == 1 ? 1150 : 2000, 120 + rows * (cols == 1 ? 560 : 470), title);
    if (mmax / mmin >= 8) pl_buf_puts(&g, "set logscale x 2\n");
    pl_buf_printf(&g, "set xrange [%.10g:%.10g]\n", mmin / (mmax / mmin >= 8 ? 1.15 : 1), mmax * (mmax / mmin >= 8 ? 1.15 : 1));
    pl_buf_printf(&g, "set multiplot layout %d,%d title \"", rows, cols);
    gp_escape(&g, o->title ? o->title : title);
    pl_buf_puts(&g, "\\nlines: runs in the database; dashed: analytic\" font \",13\"\nunset title\n");
    for (int pnl = 0; pnl < nd; pnl++) {
        pl_buf_printf(&g, "set title \"p = %d ranks\" font \",12\"\nplot \\\n", depths[pnl]);
        int first = 1;
        for (size_t i = 0; i < cs.n; i++) {
            const curve *c = &cs.c[i];
            if (c->panel != pnl) continue;
            pl_buf_printf(&g, "%s  datafile index %zu using 1:2 with %s lt %d %s title \"", first ? "" : ", \\\n", i,
                          c->dashed ? "lines" : "linespoints", c->color,
                          c->dashed ? "dt (8,5) lw 1.6" : strstr(c->key, "(measured)") ? MEASURED_STYLE : "");
            gp_escape(&g, c->key);
            pl_buf_puts(&g, "\"");
            first = 0;
        }
        pl_buf_puts(&g, "\n");
    }
    pl_buf_puts(&g, "unset multiplot\n");
    code = write_both(o, &d, &g, e);
    goto done;
oom:
    code = pl_errf(e, PL_ENOMEM, "out of memory");
done:
    curves_free(&cs);
    store_runs_free(runs, n);
    pl_buf_free(&d);
    pl_buf_free(&g);
    return code;
}

/* ---- throughput ---- */

/* Exports throughput against stages (or microbatches), one curve per schedule (and per value of
 * the other variable when several occur). */
static int plot_throughput(store *s, const store_plot_opts *o, pl_err *e) {
    store_run *runs = NULL;
    size_t n = 0;
    int code = store_select_runs(s, &o->filter, NULL, &runs, &n, e);
    if (code != PL_OK) return code;
    curves cs = {0};
    pl_buf d, g;
    pl_buf_init(&d);
    pl_buf_init(&g);
    if (n == 0) {
        code = pl_errf(e, PL_EINPUT, "no runs to plot%s%s", o->filter.tag ? " with tag " : "", o->filter.tag ? o->filter.tag : "");
        goto done;
    }
    /* Does the other variable (m when x = stages, stages when x = m) vary within a schedule? */
    int varies = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(runs[i].schedule, runs[j].schedule) && runs[i].chunks == runs[j].chunks &&
                (o->x_microbatches ? runs[i].stages != runs[j].stages : runs[i].microbatches != runs[j].microbatches))
                varies = 1;
    double xmin = INFINITY, xmax = 0;
    for (size_t i = 0; i < n; i++) {
        const store_run *r = &runs[i];
        char key[96], full[128];
        sched_key(key, sizeof key, r);
        if (varies) snprintf(full, sizeof full, "%s, %s = %d", key, o->x_microbatches ? "p" : "m",
                             o->x_microbatches ? r->stages : r->microbatches);
        else snprintf(full, sizeof full, "%s", key);
        curve *c = curve_get(&cs, full, 0);
        double x = o->x_microbatches ? r->microbatches : r->stages;
        if (!c || curve_put(c, x, r->throughput_samples_s, 1)) {
            code = pl_errf(e, PL_ENOMEM, "out of memory");
            goto done;
        }
        c->color = sched_color(key);
        xmin = fmin(xmin, x);
        xmax = fmax(xmax, x);
    }
    curves_write(&cs, &d);
    char title[256];
    snprintf(title, sizeof title, "Throughput against %s%s%s%s", o->x_microbatches ? "microbatches" : "pipeline stages",
             o->filter.tag ? " (" : "", o->filter.tag ? o->filter.tag : "", o->filter.tag ? ")" : "");
    script_begin(&g, o, "throughput", 1000, 650, title);
    pl_buf_printf(&g, "set xlabel \"%s\" font \",11\"\n", o->x_microbatches ? "microbatches per iteration (m)" : "pipeline stages");
    if (xmax / xmin >= 8) pl_buf_puts(&g, "set logscale x 2\n");
    pl_buf_printf(&g, "set xrange [%.10g:%.10g]\n", xmax / xmin >= 8 ? xmin / 1.15 : xmin - 0.5, xmax / xmin >= 8 ? xmax * 1.15 : xmax + 0.5);
    pl_buf_puts(&g, "plot \\\n");
    for (size_t i = 0; i < cs.n; i++) {
        pl_buf_printf(&g, "%s  datafile index %zu using 1:2 with linespoints lt %d %s title \"", i ? ", \\\n" : "", i, cs.c[i].color,
                      strstr(cs.c[i].key, "(measured)") ? MEASURED_STYLE : "");
        gp_escape(&g, cs.c[i].key);
        pl_buf_puts(&g, "\"");
    }
    pl_buf_puts(&g, "\n");
    code = write_both(o, &d, &g, e);
done:
    curves_free(&cs);
    store_runs_free(runs, n);
    pl_buf_free(&d);
    pl_buf_free(&g);
    return code;
}

/* ---- memory ---- */

/* Exports peak memory per rank: for each schedule (its newest run) one bar per rank. */
static int plot_memory(store *s, const store_plot_opts *o, pl_err *e) {
    store_run *runs = NULL;
    size_t n = 0;
    int code = store_select_runs(s, &o->filter, NULL, &runs, &n, e);
    if (code != PL_OK) return code;
    pl_buf d, g;
    pl_buf_init(&d);
    pl_buf_init(&g);
    size_t *pick = pl_calloc(n ? n : 1, sizeof *pick);
    char (*keys)[96] = pl_calloc(n ? n : 1, sizeof *keys);
    store_rank_metric **m = pl_calloc(n ? n : 1, sizeof *m);
    int *nm = pl_calloc(n ? n : 1, sizeof *nm);
    size_t np = 0;
    if (!pick || !keys || !m || !nm) {
        code = pl_errf(e, PL_ENOMEM, "out of memory");
        goto done;
    }
    if (n == 0) {
        code = pl_errf(e, PL_EINPUT, "no runs to plot%s%s", o->filter.tag ? " with tag " : "", o->filter.tag ? o->filter.tag : "");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (runs[i].ranks != runs[0].ranks) {
            code = pl_errf(e, PL_EINPUT, "the runs have %d and %d ranks: choose one pipeline depth with --ranks",
                           runs[0].ranks, runs[i].ranks);
            goto done;
        }
        char key[96];
        sched_key(key, sizeof key, &runs[i]);
        size_t k = 0;
        while (k < np && strcmp(keys[k], key) != 0) k++;
        if (k == np) np++;
        snprintf(keys[k], sizeof keys[k], "%s", key);
        pick[k] = i; /* runs are oldest first: the newest of each schedule wins */
    }
    /* Order the schedules like every other figure. */
    for (size_t a = 1; a < np; a++)
        for (size_t b = a; b > 0 && (sched_color(keys[b]) < sched_color(keys[b - 1]) ||
                                     (sched_color(keys[b]) == sched_color(keys[b - 1]) && strcmp(keys[b], keys[b - 1]) < 0));
             b--) {
            char t[96];
            memcpy(t, keys[b], sizeof t);
            memcpy(keys[b], keys[b - 1], sizeof t);
            memcpy(keys[b - 1], t, sizeof t);
            size_t ti = pick[b];
            pick[b] = pick[b - 1];
            pick[b - 1] = ti;
        }
    double maxb = 0;
    for (size_t k = 0; k < np; k++) {
        code = store_get_rank_metrics(s, runs[pick[k]].id, &m[k], &nm[k], e);
        if (code != PL_OK) goto done;
        for (int q = 0; q < nm[k]; q++) maxb = fmax(maxb, (double)m[k][q].peak_mem_bytes);
    }
    if (!(maxb > 0)) {
        code = pl_errf(e, PL_EINPUT, "peak memory is 0 in every selected run: simulate with --model, or with "
                                     "--param-bytes and --stash-bytes");
        goto done;
    }
    double scale;
    const char *unit;
    byte_unit(maxb, &scale, &unit);
    double bw = 0.8 / (double)np;
    for (size_t k = 0; k < np; k++) {
        pl_buf_printf(&d, "# block %zu: %s (run %lld)\n", k, keys[k], (long long)runs[pick[k]].id);
        for (int q = 0; q < nm[k]; q++)
            pl_buf_printf(&d, "%.6g %.10g\n", m[k][q].rank - 0.4 + (k + 0.5) * bw, (double)m[k][q].peak_mem_bytes / scale);
        pl_buf_puts(&d, "\n\n");
    }
    char title[256];
    snprintf(title, sizeof title, "Peak memory per rank, p = %d%s%s%s", runs[0].ranks, o->filter.tag ? " (" : "",
             o->filter.tag ? o->filter.tag : "", o->filter.tag ? ")" : "");
    script_begin(&g, o, "memory", (int)fmin(1800, fmax(900, 120 + runs[0].ranks * (40 + 14 * (double)np))), 600, title);
    pl_buf_printf(&g, "set ylabel \"peak memory (%s)\" font \",11\"\nset xrange [-0.6:%d.6]\nset boxwidth %.6g absolute\nplot \\\n",
                  unit, runs[0].ranks - 1, bw * 0.92);
    for (size_t k = 0; k < np; k++) {
        pl_buf_printf(&g, "%s  datafile index %zu using 1:2 with boxes lt %d title \"", k ? ", \\\n" : "", k, sched_color(keys[k]));
        gp_escape(&g, keys[k]);
        pl_buf_puts(&g, "\"");
    }
    pl_buf_puts(&g, "\n");
    code = write_both(o, &d, &g, e);
done:
    for (size_t k = 0; k < np && m; k++) free(m[k]);
    free(m);
    free(nm);
    free(keys);
    free(pick);
    store_runs_free(runs, n);
    pl_buf_free(&d);
    pl_buf_free(&g);
    return code;
}

/* ---- accuracy ---- */

/* Exports predicted against measured iteration time for every pair store_compare finds. */
static int plot_accuracy(store *s, const store_plot_opts *o, pl_err *e) {
    store_comparison c;
    int code = store_compare(s, &o->filter, o->loose, &c, e);
    if (code != PL_OK) return code;
    curves cs = {0};
    pl_buf d, g;
    pl_buf_init(&d);
    pl_buf_init(&g);
    if (c.n == 0) {
        code = pl_errf(e, PL_EINPUT, "no measured run has a simulated run of the same configuration (%zu measured, "
                                     "%zu simulated selected); see pipelab compare --help",
                       c.unmatched_measured, c.simulated);
        goto done;
    }
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < c.n; i++) {
        lo = fmin(lo, fmin(c.pairs[i].meas.iteration_time_s, c.pairs[i].sim.iteration_time_s));
        hi = fmax(hi, fmax(c.pairs[i].meas.iteration_time_s, c.pairs[i].sim.iteration_time_s));
    }
    double scale;
    const char *unit;
    time_unit(hi, &scale, &unit);
    for (size_t i = 0; i < c.n; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s", c.pairs[i].meas.schedule);
        if (c.pairs[i].meas.chunks > 1) snprintf(key + strlen(key), sizeof key - strlen(key), " v=%d", c.pairs[i].meas.chunks);
        curve *cv = curve_get(&cs, key, 0);
        if (!cv || curve_put(cv, c.pairs[i].meas.iteration_time_s * scale, c.pairs[i].sim.iteration_time_s * scale, 0)) {
            code = pl_errf(e, PL_ENOMEM, "out of memory");
            goto done;
        }
        cv->color = sched_color(key);
    }
    curves_write(&cs, &d);
    int logs = lo > 0 && hi / lo > 20;
    double x0 = logs ? lo * scale / 1.3 : 0, x1 = hi * scale * (logs ? 1.3 : 1.08);
    char title[256];
    snprintf(title, sizeof title, "Predicted against measured iteration time\n%zu runs: MAPE %.2f%%, max error %+.2f%%",
             c.n, 100 * c.iter.mape, 100 * c.iter.max_err);
    script_begin(&g, o, "accuracy", 800, 760, title);
    if (logs) pl_buf_puts(&g, "set logscale xy\n");
    pl_buf_printf(&g, "set xrange [%.10g:%.10g]\nset yrange [%.10g:%.10g]\n", x0, x1, x0, x1);
    pl_buf_printf(&g, "set xlabel \"measured iteration time (%s)\" font \",11\"\n"
                      "set ylabel \"predicted iteration time (%s)\" font \",11\"\nset samples 400\nplot \\\n", unit, unit);
    pl_buf_puts(&g, "  '+' using 1:(0.95*$1):(1.05*$1) with filledcurves fc rgb \"#e3e3e3\" fs solid 1.0 title \"+-5%\", \\\n"
                    "  x with lines lc rgb \"#555555\" lw 1.5 title \"y = x\"");
    for (size_t i = 0; i < cs.n; i++) {
        pl_buf_printf(&g, ", \\\n  datafile index %zu using 1:2 with points lt %d ps 1.4 title \"", i, cs.c[i].color);
        gp_escape(&g, cs.c[i].key);
        pl_buf_puts(&g, "\"");
    }
    pl_buf_puts(&g, "\n");
    code = write_both(o, &d, &g, e);
done:
    curves_free(&cs);
    store_comparison_free(&c);
    pl_buf_free(&d);
    pl_buf_free(&g);
    return code;
}

int store_plot_prepare(store *s, const store_plot_opts *o, pl_err *e) {
    if (!o->output || !o->data || !o->script) return pl_errf(e, PL_EINTERNAL, "plot: output, data and script paths needed");
    switch (o->kind) {
    case STORE_PLOT_TIMELINE: return plot_timeline(s, o, e);
    case STORE_PLOT_BUBBLE: return plot_bubble(s, o, e);
    case STORE_PLOT_THROUGHPUT: return plot_throughput(s, o, e);
    case STORE_PLOT_MEMORY: return plot_memory(s, o, e);
    case STORE_PLOT_ACCURACY: return plot_accuracy(s, o, e);
    }
    return pl_errf(e, PL_EINTERNAL, "plot: unknown kind %d", (int)o->kind);
}

char *store_gnuplot_find(pl_err *e) {
    const char *env = getenv("PIPELAB_GNUPLOT");
    if (env && *env) {
        if (access(env, X_OK) == 0) return strdup(env);
        pl_errf(e, PL_EINPUT, "PIPELAB_GNUPLOT=%s is not an executable program", env);
        return NULL;
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        if (len > 0) {
            char *cand = malloc(len + 9);
            if (!cand) break;
            snprintf(cand, len + 9, "%.*s/gnuplot", (int)len, path);
            struct stat st;
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) return cand;
            free(cand);
        }
        path = colon ? colon + 1 : NULL;
    }
    pl_errf(e, PL_EINPUT, "gnuplot not found on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox) "
                          "or set PIPELAB_GNUPLOT to the program");
    return NULL;
}

int store_plot_gnuplot(const char *gnuplot, const char *script, const char *output, pl_err *e) {
    char *argv[] = {(char *)"gnuplot", (char *)script, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, gnuplot, NULL, NULL, argv, environ);
    if (rc != 0) return pl_errf(e, PL_EIO, "cannot run %s: %s", gnuplot, strerror(rc));
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return pl_errf(e, PL_EIO, "waiting for gnuplot: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return pl_errf(e, PL_EINPUT, "gnuplot failed on %s (exit status %d); its messages are above", script,
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    struct stat sb;
    if (stat(output, &sb) != 0 || sb.st_size == 0)
        return pl_errf(e, PL_EIO, "%s: gnuplot wrote no figure (script %s)", output, script);
    return PL_OK;
}
