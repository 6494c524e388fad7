/* plot.c: exports figure data from the results store and writes and runs gnuplot scripts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

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
        /* a backquote too: gnuplot runs `...` in a double-quoted string as a shell command */
        if (*s == '"' || *s == '\\' || *s == '`') pl_buf_putc(b, '\\');
        if (*s == '\n') pl_buf_puts(b, "\\n");
        else if ((unsigned char)*s < 0x20) pl_buf_printf(b, "\\%03o", (unsigned)(unsigned char)*s); /* a CR, a tab: octal */
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

/* Returns 1 when figure o is drawn as SVG (--svg or a .svg output), 2 as PDF (a .pdf output),
 * else 0 (PNG): the terminal follows the output's extension. */
static int fig_format(const store_plot_opts *o) {
    size_t olen = o->output ? strlen(o->output) : 0;
    if (olen >= 4 && strcmp(o->output + olen - 4, ".pdf") == 0) return 2;
    return o->svg || (olen >= 4 && strcmp(o->output + olen - 4, ".svg") == 0);
}

/* Starts a script: the common template then the kind's, for a figure of w x h pixels. */
static void script_begin(pl_buf *b, const store_plot_opts *o, const char *kind, int w, int h, const char *title) {
    char term[160];
    const int format = fig_format(o);
    /* the terminal follows the output's extension (.pdf: pdfcairo, sized in inches at 72 px per inch) */
    if (format == 2)
        snprintf(term, sizeof term, "pdfcairo size %.2fin,%.2fin font \"DejaVu Sans,10\" background rgb \"white\"", w / 72.0, h / 72.0);
    else if (format == 1)
        snprintf(term, sizeof term, "svg size %d,%d dynamic font \"DejaVu Sans,10\" background rgb \"white\"", w, h);
    else snprintf(term, sizeof term, "pngcairo size %d,%d font \"DejaVu Sans,10\" background rgb \"white\"", w, h);
    /* the path quoted and escaped: a newline in it would end the comment and run the rest */
    pl_buf_printf(b, "# %s figure written by pipelab %s; rerun with: gnuplot \"", kind, PL_VERSION);
    gp_escape(b, o->script);
    pl_buf_puts(b, "\"\n");
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


/* ---- looks: one colour and marker per schedule; shades tell a schedule's curves apart ---- */

/* The order schedules are listed and coloured in, so a schedule keeps its look in every figure. */
static const char *const sched_order[] = {"gpipe", "1f1b", "interleaved", "looped-bfs", "pipedream", "2bw",
                                          "zb-h1", "zb-h2", "zbv", "dualpipev", NULL};

/* Colour (Tableau 10) and marker (gnuplot point type and size) of each sched_order entry, then
 * of any other schedule (LOOK_OTHER) and of the gpipe/1f1b analytic curve (LOOK_ANALYTIC); no
 * two schedules share a marker, so 1f1b (orange squares) and zb-h1 (yellow dots) stay apart. */
static const struct look { unsigned rgb; int pt; double ps; } looks[] = {
    {0x4E79A7, 6, 1.9},  {0xF28E2B, 5, 1.1}, {0xE15759, 9, 1.3}, {0x59A14F, 11, 1.3}, {0xB07AA1, 13, 1.3},
    {0x76B7B2, 4, 1.6},  {0xEDC948, 7, 1.2}, {0x9C755F, 8, 1.5}, {0xFF9DA7, 10, 1.5}, {0x333333, 12, 1.5},
    {0x8C8C8C, 1, 1.6}, {0x111111, 0, 0},
};
enum { LOOK_OTHER = 10, LOOK_ANALYTIC = 11 };

/* A schedule's further curves take these markers in turn (none is a schedule's own); measured
 * curves are dotted with open squares. Their sizes: */
static const int variant_pts[] = {15, 14, 3, 2};
#define MEASURED_PT 4
#define VARIANT_PS 1.4
#define MEASURED_PS 1.6
/* A schedule's curves run from this fraction toward white to this fraction toward black. */
#define SHADE_LIGHT 0.45
#define SHADE_DARK 0.5
/* Line widths of runs and of analytic curves. */
#define LINE_W 2.0
#define ANALYTIC_W 1.6

/* Returns the index in looks of a key that starts with a schedule name (the longest match),
 * else LOOK_OTHER. */
static int sched_look(const char *key) {
    size_t best = 0;
    int idx = LOOK_OTHER;
    for (int i = 0; sched_order[i]; i++) {
        size_t n = strlen(sched_order[i]);
        if (strncmp(key, sched_order[i], n) == 0 && (key[n] == 0 || key[n] == ' ' || key[n] == ',') && n > best)
            best = n, idx = i;
    }
    return idx;
}

/* Returns rgb moved toward white (f > 0) or black (f < 0) by the fraction |f|. */
static unsigned shade(unsigned rgb, double f) {
    unsigned out = 0;
    for (int shift = 16; shift >= 0; shift -= 8) {
        double c = (rgb >> shift) & 0xFF;
        c = f > 0 ? c + (0xFF - c) * f : c * (1 + f);
        out |= (unsigned)lround(c) << shift;
    }
    return out;
}

/* Returns the shade fraction of a schedule's k-th of n curves: lightest first, darkest last. */
static double variant_shade(int k, int n) { return n < 2 ? 0 : SHADE_LIGHT - (SHADE_LIGHT + SHADE_DARK) * k / (n - 1); }

/* Returns the marker of a schedule's k-th curve: its own for k = 0, then variant_pts in turn. */
static int variant_pt(int own, int k) {
    return k == 0 ? own : variant_pts[(k - 1) % (int)(sizeof variant_pts / sizeof variant_pts[0])];
}

/* ---- curves: named point sets shared by bubble, throughput, memory and accuracy ---- */

typedef struct point { double x, y; } point;
/* Appended to the key of a measured run's curve. */
#define MEASURED_SUFFIX " (measured)"
typedef struct curve {
    char base[128]; /* the curve without "(measured)" or "analytic": one shade per base */
    char key[sizeof "" MEASURED_SUFFIX + 128]; /* the legend text: the base and a suffix */
    int look;       /* index in looks */
    int var[2];     /* numbers that order a schedule's curves: chunks, then another variable */
    int panel;      /* bubble: index of the panel */
    int dashed;     /* analytic curve */
    int measured;
    int shade, nshades; /* rank of its base among its schedule's bases in the figure, and their count */
    size_t run;     /* memory: the index of the run its bars show */
    point *pts;
    size_t n, cap;
} curve;
typedef struct curves { curve *c; size_t n, cap; } curves;

/* Returns the curve with proto's key and panel, creating it as a copy of proto; NULL when out
 * of memory. */
static curve *curve_get(curves *cs, const curve *proto) {
    for (size_t i = 0; i < cs->n; i++)
        if (cs->c[i].panel == proto->panel && strcmp(cs->c[i].key, proto->key) == 0) return &cs->c[i];
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? 2 * cs->cap : 8;
        curve *c = pl_reallocarray(cs->c, cap, sizeof *c);
        if (!c) return NULL;
        cs->c = c;
        cs->cap = cap;
    }
    curve *c = &cs->c[cs->n++];
    *c = *proto;
    c->pts = NULL;
    c->n = c->cap = 0;
    return c;
}

/* Sets the y of the point at x (a later run replaces an earlier one), or adds it; a point that is
 * not a number (a value a damaged database lacks) is left out. Returns 0 or -1. */
static int curve_put(curve *c, double x, double y, int replace) {
    if (!isfinite(x) || !isfinite(y)) return 0;
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

/* Orders points by x (qsort). */
static int cmp_point(const void *a, const void *b) {
    double x = ((const point *)a)->x, y = ((const point *)b)->x;
    return (x > y) - (x < y);
}

/* Frees the curves and their points, and zeroes cs. */
static void curves_free(curves *cs) {
    for (size_t i = 0; i < cs->n; i++) free(cs->c[i].pts);
    free(cs->c);
    memset(cs, 0, sizeof *cs);
}

/* Returns the order of two curves' bases within a schedule: chunks, the other variable, text. */
static int cmp_base(const curve *x, const curve *y) {
    for (int k = 0; k < 2; k++)
        if (x->var[k] != y->var[k]) return x->var[k] - y->var[k];
    return strcmp(x->base, y->base);
}

/* Returns the order of curves in the legend: runs before analytic curves, schedule order, the
 * schedule's bases in order, simulated before measured. */
static int cmp_legend(const void *a, const void *b) {
    const curve *x = a, *y = b;
    if (x->dashed != y->dashed) return x->dashed - y->dashed;
    if (x->look != y->look) return x->look - y->look;
    int c = cmp_base(x, y);
    if (c) return c;
    if (x->measured != y->measured) return x->measured - y->measured;
    return strcmp(x->key, y->key);
}

/* cmp_legend over an array of curve pointers. */
static int cmp_legend_ptr(const void *a, const void *b) { return cmp_legend(*(const curve *const *)a, *(const curve *const *)b); }

/* Returns the order of curves in the data file: by panel, then as in the legend. */
static int cmp_curve(const void *a, const void *b) {
    const curve *x = a, *y = b;
    if (x->panel != y->panel) return x->panel - y->panel;
    return cmp_legend(a, b);
}

/* Gives each curve its shade: the rank of its base among the distinct bases of its schedule
 * (look) over the whole figure, so one base has one shade in every panel, measured or not. */
static void curves_shade(curves *cs) {
    for (size_t i = 0; i < cs->n; i++) {
        curve *c = &cs->c[i];
        c->shade = c->nshades = 0;
        for (size_t j = 0; j < cs->n; j++) {
            const curve *d = &cs->c[j];
            int first = d->look == c->look;
            for (size_t k = 0; first && k < j; k++)
                first = !(cs->c[k].look == c->look && strcmp(cs->c[k].base, d->base) == 0);
            if (!first) continue;
            c->nshades++;
            c->shade += cmp_base(d, c) < 0;
        }
    }
}

/* Sorts the curves, shades them, and writes each as one data block (index i = curve i),
 * points sorted by x. */
static void curves_write(curves *cs, pl_buf *d) {
    qsort(cs->c, cs->n, sizeof *cs->c, cmp_curve);
    curves_shade(cs);
    for (size_t i = 0; i < cs->n; i++) {
        curve *c = &cs->c[i];
        qsort(c->pts, c->n, sizeof *c->pts, cmp_point);
        pl_buf_printf(d, "# block %zu: %s\n", i, c->key);
        for (size_t k = 0; k < c->n; k++) pl_buf_printf(d, "%.10g %.10g\n", c->pts[k].x, c->pts[k].y);
        pl_buf_puts(d, "\n\n");
    }
}

/* How put_curve draws a curve. */
typedef enum draw { DRAW_LINES, DRAW_POINTS, DRAW_BOXES } draw;

/* Appends one plot element: data block index of the data file (index < 0: NaN, an entry of the
 * legend only) in the curve's look: its schedule's colour in its shade, its marker; analytic
 * curves dashed, measured ones dotted with open markers. */
static void put_curve(pl_buf *g, long index, const curve *c, draw how) {
    const struct look *l = &looks[c->look];
    unsigned rgb = shade(l->rgb, variant_shade(c->shade, c->nshades));
    const char *with = how == DRAW_POINTS ? "points" : "linespoints";
    if (index >= 0) pl_buf_printf(g, "datafile index %ld using 1:2", index);
    else pl_buf_puts(g, "NaN");
    if (how == DRAW_BOXES) pl_buf_printf(g, " with boxes lc rgb \"#%06X\"", rgb);
    else if (c->dashed) pl_buf_printf(g, " with lines lc rgb \"#%06X\" lw %.2g dt (8,5)", rgb, ANALYTIC_W);
    else if (c->measured)
        pl_buf_printf(g, " with %s lc rgb \"#%06X\" lw %.2g dt (2,3) pt %d ps %.2g", with, rgb, LINE_W, MEASURED_PT, MEASURED_PS);
    else
        pl_buf_printf(g, " with %s lc rgb \"#%06X\" lw %.2g pt %d ps %.2g", with, rgb, LINE_W, variant_pt(l->pt, c->shade),
                      c->shade ? VARIANT_PS : l->ps);
    pl_buf_puts(g, " title \"");
    gp_escape(g, c->key);
    pl_buf_puts(g, "\"");
}

/* Writes the schedule of a run as a curve's base text: "1f1b", "interleaved v=2". */
static void sched_name(char *buf, size_t n, const store_run *r) {
    const char *name = r->schedule && *r->schedule ? r->schedule : "?";
    if (r->chunks > 1) snprintf(buf, n, "%s v=%d", name, r->chunks);
    else snprintf(buf, n, "%s", name);
}

/* Fills proto (zeroed) for a run's curve: base (the schedule, then extra when not NULL), key
 * (the base, " (measured)" for a measured run), look, var = {chunks, other}, panel. */
static void run_curve(curve *proto, const store_run *r, const char *extra, int other, int panel) {
    char name[64];
    memset(proto, 0, sizeof *proto);
    sched_name(name, sizeof name, r);
    snprintf(proto->base, sizeof proto->base, "%s%s%s", name, extra ? ", " : "", extra ? extra : "");
    proto->measured = strcmp(r->kind, "measured") == 0;
    snprintf(proto->key, sizeof proto->key, "%s%s", proto->base, proto->measured ? MEASURED_SUFFIX : "");
    proto->look = sched_look(name);
    proto->var[0] = r->chunks;
    proto->var[1] = other;
    proto->panel = panel;
}

/* An x axis spanning this ratio or more is logarithmic (base 2), its ends this factor beyond
 * the data; a linear one ends this far (in its units) beyond the data. Ticks stand at the data's
 * x values when there are at most XTICS_MAX of them. */
#define LOG_RATIO 8.0
#define LOG_PAD 1.15
#define LIN_PAD 0.5
#define XTICS_MAX 12

/* Appends "set xtics (x1, x2, ...)" of the distinct x values of the curves when there are at
 * most max of them (ticks where the data is), else nothing. */
static void put_xtics(pl_buf *g, const curves *cs, int max) {
    double xs[32];
    int n = 0;
    for (size_t i = 0; i < cs->n; i++)
        for (size_t k = 0; k < cs->c[i].n && !cs->c[i].dashed; k++) {
            int seen = 0;
            for (int j = 0; j < n; j++) seen |= xs[j] == cs->c[i].pts[k].x;
            if (seen) continue;
            if (n == max || n == (int)(sizeof xs / sizeof xs[0])) return;
            xs[n++] = cs->c[i].pts[k].x;
        }
    if (n == 0) return;
    pl_buf_puts(g, "set xtics (");
    for (int j = 0; j < n; j++) pl_buf_printf(g, "%s%.10g", j ? ", " : "", xs[j]);
    pl_buf_puts(g, ")\n");
}

/* Appends the x axis of curves cs over data from lo to hi (bubble, throughput): logarithmic or
 * linear (see LOG_RATIO), and its ticks. */
static void put_x_axis(pl_buf *g, const curves *cs, double lo, double hi) {
    int logx = hi / lo >= LOG_RATIO;
    if (logx) pl_buf_puts(g, "set logscale x 2\n");
    pl_buf_printf(g, "set xrange [%.10g:%.10g]\n", logx ? lo / LOG_PAD : lo - LIN_PAD, logx ? hi * LOG_PAD : hi + LIN_PAD);
    put_xtics(g, cs, XTICS_MAX);
}

/* Appends the plot elements of the curves of cs in panel (-1: every curve), each drawn how and
 * separated as gnuplot's plot command wants them; first = 1 when no element precedes them. */
static void put_curves(pl_buf *g, const curves *cs, int panel, draw how, int first) {
    for (size_t i = 0; i < cs->n; i++) {
        if (panel >= 0 && cs->c[i].panel != panel) continue;
        pl_buf_puts(g, first ? "  " : ", \\\n  ");
        put_curve(g, (long)i, &cs->c[i], how);
        first = 0;
    }
}

/* How a figure names the tag of the runs it draws: the tag, or STORE_PLOT_NO_TAG for runs stored
 * without one (tag ''). */
#define STORE_PLOT_NO_TAG "no tag"
static const char *tag_label(const char *tag) { return tag && *tag ? tag : STORE_PLOT_NO_TAG; }

/* Writes a figure's title into buf[n]: fmt, then " (TAG)" when o selects runs by tag. */
__attribute__((format(printf, 4, 5)))
static void figure_title(char *buf, size_t n, const store_plot_opts *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (o->filter.tag && len >= 0 && (size_t)len < n) snprintf(buf + len, n - (size_t)len, " (%s)", tag_label(o->filter.tag));
}

/* Creates the parent directories of a figure file at path; 0, or -1 with e naming the one that
 * could not be made. */
static int mkdir_parents(const char *path, pl_err *e) {
    char *failed;
    int err = store_make_parents(path, &failed);
    if (err == 0) return 0;
    if (!failed) pl_errf(e, PL_ENOMEM, "out of memory");
    else pl_errf(e, PL_EIO, "%s: cannot create directory: %s", failed, strerror(err));
    free(failed);
    return -1;
}

/* Writes the data and the script; returns PL_OK or an error code. */
static int write_both(const store_plot_opts *o, const pl_buf *d, const pl_buf *g, pl_err *e) {
    if (d->failed || g->failed) return pl_errf(e, PL_ENOMEM, "out of memory building the figure");
    if (mkdir_parents(o->data, e) || mkdir_parents(o->script, e) || mkdir_parents(o->output, e)) return e->code;
    int code = pl_write_file(o->data, d->data ? d->data : "", d->len, e);
    if (code == PL_OK) code = pl_write_file(o->script, g->data ? g->data : "", g->len, e);
    return code;
}

/* Returns the "no runs" error of a selection. */
static int no_runs(const store_plot_opts *o, pl_err *e) {
    if (!o->filter.tag) return pl_errf(e, PL_EINPUT, "no runs to plot");
    if (!*o->filter.tag) return pl_errf(e, PL_EINPUT, "no runs to plot stored without a tag (--tag '')");
    return pl_errf(e, PL_EINPUT, "no runs to plot with tag %s", o->filter.tag);
}

/* What a figure is made of: the runs it draws (oldest first), their curves, and the text of its
 * data file (d) and gnuplot script (g). */
typedef struct figure {
    store_run *runs;
    size_t n;
    curves cs;
    pl_buf d, g;
} figure;

/* Starts an empty figure f (no runs, no curves, empty texts). */
static void figure_init(figure *f) {
    memset(f, 0, sizeof *f);
    pl_buf_init(&f->d);
    pl_buf_init(&f->g);
}

/* Starts figure f of the runs o selects (bubble, throughput, memory). Returns PL_OK, PL_EINPUT
 * when it selects none, or the store's error; figure_free f in every case. */
static int figure_open(store *s, const store_plot_opts *o, figure *f, pl_err *e) {
    figure_init(f);
    int code = store_select_runs(s, &o->filter, NULL, &f->runs, &f->n, e);
    if (code == PL_OK && f->n == 0) code = no_runs(o, e);
    return code;
}

/* Frees what a figure holds. */
static void figure_free(figure *f) {
    curves_free(&f->cs);
    store_runs_free(f->runs, f->n);
    pl_buf_free(&f->d);
    pl_buf_free(&f->g);
}

/* ---- timeline ---- */

/* What a timeline draws, and how: compute kinds as full-height boxes, communication as thin
 * bars under the row; prefix = 1 matches the kinds that start with kind. */
static const struct action_look {
    const char *kind;
    int prefix, compute;
    unsigned rgb;
    const char *legend;
} action_looks[] = {
    {"F", 0, 1, 0x4E79A7, "F  forward"},
    {"B", 0, 1, 0xE15759, "B  backward"},
    {"I", 0, 1, 0xF28E2B, "I  input grad"},
    {"W", 0, 1, 0x59A14F, "W  weight grad"},
    {"OVERLAP", 1, 1, 0xB07AA1, "F+B overlapped"},
    {"SEND_", 1, 0, 0x333333, "send"},
    {"RECV_", 1, 0, 0x9A9A9A, "receive wait"},
    {"REDUCE_GRAD", 0, 0, 0x76B7B2, "gradient all-reduce"},
};
#define N_ACTION_LOOKS (sizeof action_looks / sizeof action_looks[0])
/* A rank's later chunks are drawn this fraction lighter, their labels dark. */
#define LATER_CHUNK_LIGHT 0.45
#define LABEL_LIGHT 0xFFFFFFu
#define LABEL_DARK 0x222222u
/* Timeline geometry in pixels: the shortest box's width, the plot's width limits, the margins,
 * the height of a rank's row; a microbatch label needs this width per digit, plus a little. */
#define TL_MIN_BOX_PX 18.0
#define TL_MIN_PLOT_PX 900.0
#define TL_MAX_PLOT_PX 2000.0
#define TL_MARGIN_W 140
#define TL_MARGIN_H 130
#define TL_ROW_PX 40
/* The tallest timeline drawn, in pixels: cairo's largest image (pngcairo, pdfcairo), and an SVG's
 * (whose viewer draws it), and so the most ranks a timeline shows, (max - TL_MARGIN_H) / TL_ROW_PX. */
#define TL_MAX_FIG_PX 32767
#define TL_MAX_SVG_PX (1 << 20)
#define TL_DIGIT_PX 7.0
#define TL_LABEL_PAD_PX 3.0
/* The time axis ends this factor past the last drawn end. */
#define TL_END_PAD 1.005

/* Returns the index in action_looks of an op kind, or -1 (not drawn: STEP, ...). */
static int action_look(const char *kind) {
    for (size_t i = 0; i < N_ACTION_LOOKS; i++) {
        const struct action_look *a = &action_looks[i];
        if (a->prefix ? strncmp(kind, a->kind, strlen(a->kind)) == 0 : strcmp(kind, a->kind) == 0) return (int)i;
    }
    return -1;
}

int store_kind_is_compute(const char *kind) {
    int a = action_look(kind);
    return a >= 0 && action_looks[a].compute;
}

/* A timeline: the run, its ops, which of them are drawn, and the figure's extent. */
typedef struct timeline {
    store_run r;
    store_op *ops;         /* every recorded op, by rank then position (owned) */
    size_t n;
    unsigned char *drawn;  /* [n] 1 = in the figure */
    int passes, pass;      /* timed passes recorded (1: a simulation) and the one drawn (-1: all) */
    int median_known;      /* the run records its median pass (params_json median_passes) */
    double t0_s;           /* subtracted from the drawn times: the drawn pass's first start */
    int ranks;
    double tmax_s, dmin_s; /* the drawn end (from t0_s) and the shortest drawn compute */
    int *first_stage;      /* [ranks] the lowest stage a rank computes */
} timeline;

/* Returns the integer at a dotted path of a JSON object (element elem of an array there when
 * elem >= 0), or dflt when it is absent or not an integer. */
static long json_long(const char *json, const char *path, int elem, long dflt) {
    const char *v;
    size_t len;
    if (!json || !store_json_get(json, path, &v, &len)) return dflt;
    const char *p = v, *end = v + len;
    if (elem >= 0) {
        if (*p++ != '[') return dflt;
        for (int i = 0; i < elem && p; i++)
            if ((p = memchr(p, ',', (size_t)(end - p)))) p++;
        if (!p) return dflt;
    }
    char *stop;
    long x = strtol(p, &stop, 10);
    return stop == p || stop > end ? dflt : x;
}

/* Chooses the drawn ops: all of a simulation; of a measured run of several timed passes, those
 * of its median pass, the first of params_json's median_passes (the executor's choice, the pass
 * its per-rank figures come from), unless all is set or the run does not record it. A rank's
 * ops of pass k are its positions k x per .. (k+1) x per - 1, per = its ops / passes. Fills
 * drawn, passes, pass, median_known and t0_s. Returns PL_OK or PL_ENOMEM. */
static int timeline_select(timeline *t, int all) {
    t->drawn = pl_calloc(t->n ? t->n : 1, 1);
    if (!t->drawn) return PL_ENOMEM;
    int measured = strcmp(t->r.kind, "measured") == 0;
    t->passes = measured ? (int)json_long(t->r.params_json, "timed_passes", -1, t->r.repetitions) : 1;
    if (t->passes < 1) t->passes = 1;
    long mid = json_long(t->r.params_json, "median_passes", 0, -1);
    t->median_known = mid >= 0 && mid < t->passes;
    int pass = t->passes > 1 && !all && t->median_known ? (int)mid : -1;
    for (size_t a = 0, b; pass >= 0 && a < t->n; a = b) { /* whole passes on every rank? */
        for (b = a; b < t->n && t->ops[b].rank == t->ops[a].rank; b++) {}
        if ((b - a) % (size_t)t->passes) pass = -1;
    }
    t->pass = pass;
    t->t0_s = pass < 0 ? 0 : INFINITY;
    for (size_t a = 0, b; a < t->n; a = b) {
        for (b = a; b < t->n && t->ops[b].rank == t->ops[a].rank; b++) {}
        size_t per = (b - a) / (size_t)t->passes;
        for (size_t i = a; i < b; i++) {
            t->drawn[i] = pass < 0 || (size_t)t->ops[i].seq / per == (size_t)pass;
            if (t->drawn[i] && pass >= 0) t->t0_s = fmin(t->t0_s, t->ops[i].start_s);
        }
    }
    if (!isfinite(t->t0_s)) t->t0_s = 0;
    return PL_OK;
}

/* Finds the drawn extent: ranks, end, shortest compute, each rank's lowest stage. Returns PL_OK,
 * PL_EINPUT when nothing computes (a run stored without --trace), an action is on a negative
 * rank or figure o would be too tall for its ranks (TL_MAX_FIG_PX, TL_MAX_SVG_PX), or PL_ENOMEM. */
static int timeline_scan(timeline *t, const store_plot_opts *o, pl_err *e) {
    t->ranks = t->r.ranks;
    t->tmax_s = 0;
    t->dmin_s = INFINITY;
    int nc = 0;
    for (size_t i = 0; i < t->n; i++) {
        const store_op *p = &t->ops[i];
        if (!t->drawn[i]) continue;
        if (p->rank < 0)
            return pl_errf(e, PL_EINPUT, "run %lld has an action on rank %d: the database is damaged",
                           (long long)t->r.id, p->rank);
        if (p->rank >= t->ranks) t->ranks = p->rank == INT_MAX ? INT_MAX : p->rank + 1;
        t->tmax_s = fmax(t->tmax_s, p->end_s - t->t0_s);
        if (!store_kind_is_compute(p->kind)) continue;
        nc++;
        if (p->end_s > p->start_s) t->dmin_s = fmin(t->dmin_s, p->end_s - p->start_s);
    }
    if (nc == 0 || !(t->tmax_s > 0))
        return pl_errf(e, PL_EINPUT, "run %lld has no recorded compute actions to draw: simulate it with --trace",
                       (long long)t->r.id);
    const long long tall = TL_MARGIN_H + (long long)TL_ROW_PX * t->ranks; /* the figure's height */
    const int svg = fig_format(o) == 1, most = svg ? TL_MAX_SVG_PX : TL_MAX_FIG_PX;
    if (tall > most)
        return pl_errf(e, PL_EINPUT,
                       "run %lld has %d ranks: its timeline would be %lld pixels tall, more than %s figure can be "
                       "(%d; it draws at most %d ranks%s)",
                       (long long)t->r.id, t->ranks, tall, svg ? "an SVG" : "a PNG or PDF", most,
                       (most - TL_MARGIN_H) / TL_ROW_PX, svg ? "" : ", an SVG one more");
    t->first_stage = pl_calloc((size_t)t->ranks, sizeof *t->first_stage);
    if (!t->first_stage) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0; q < t->ranks; q++) t->first_stage[q] = -1;
    for (size_t i = 0; i < t->n; i++) {
        const store_op *p = &t->ops[i];
        if (t->drawn[i] && store_kind_is_compute(p->kind) && (t->first_stage[p->rank] < 0 || p->stage < t->first_stage[p->rank]))
            t->first_stage[p->rank] = p->stage;
    }
    return PL_OK;
}

/* Returns 1 when op p runs one of its rank's later chunks (drawn lighter): the second of a V
 * placement (zbv, dualpipev), every other chunk of a looped one. */
static int later_chunk(const timeline *t, const store_op *p) {
    if (strcmp(t->r.schedule, "zbv") == 0 || strcmp(t->r.schedule, "dualpipev") == 0)
        return p->stage != t->first_stage[p->rank];
    if (t->r.chunks <= 1) return 0;
    return ((p->stage - t->first_stage[p->rank]) / (t->r.ranks > 0 ? t->r.ranks : 1)) % 2;
}

/* Writes the drawn ops, times in the figure's unit from t0_s: compute boxes (block 0: rank,
 * centre, half width, colour, microbatch label where it fits, label colour, action) and
 * communication bars (block 1: rank, centre, half width, colour); marks in have[] the action
 * looks present. Returns 1 when a rank's later chunks appear. */
static int timeline_data(const timeline *t, pl_buf *d, double scale, double px_per_s, int have[N_ACTION_LOOKS]) {
    int later = 0, ncomm = 0;
    for (int comm = 0; comm < 2; comm++) { /* block 0: compute, block 1: communication */
        pl_buf_puts(d, comm ? "\n\n# communication: rank x_center x_halfwidth colour\n"
                            : "# compute: rank x_center x_halfwidth colour label label_colour action\n");
        for (size_t i = 0; i < t->n; i++) {
            const store_op *p = &t->ops[i];
            int a = action_look(p->kind);
            if (!t->drawn[i] || a < 0 || action_looks[a].compute == comm || (comm && !(p->end_s > p->start_s))) continue;
            have[a] = 1;
            double mid = 0.5 * (p->start_s + p->end_s) - t->t0_s, half = 0.5 * (p->end_s - p->start_s);
            if (comm) {
                pl_buf_printf(d, "%d %.10g %.10g %u\n", p->rank, mid * scale, half * scale, action_looks[a].rgb);
                ncomm++;
                continue;
            }
            int odd = later_chunk(t, p);
            later |= odd;
            char label[16] = "";
            if (p->mb >= 0) snprintf(label, sizeof label, "%d", p->mb);
            if (2 * half * px_per_s < TL_DIGIT_PX * (double)strlen(label) + TL_LABEL_PAD_PX) label[0] = 0;
            pl_buf_printf(d, "%d %.10g %.10g %u \"%s\" %u \"", p->rank, mid * scale, half * scale,
                          odd ? shade(action_looks[a].rgb, LATER_CHUNK_LIGHT) : action_looks[a].rgb, label,
                          odd ? LABEL_DARK : LABEL_LIGHT);
            gp_escape(d, p->action);
            pl_buf_puts(d, "\"\n");
        }
    }
    if (ncomm == 0) pl_buf_puts(d, "0 NaN NaN 0\n");
    return later;
}

/* Writes which of a measured run's passes the figure shows ("" for a simulation). */
static void pass_text(const timeline *t, char *buf, size_t n) {
    if (t->passes <= 1) snprintf(buf, n, "%s", "");
    else if (t->pass >= 0) snprintf(buf, n, " from the start of timed pass %d of %d (the median)", t->pass + 1, t->passes);
    else snprintf(buf, n, " over all %d timed passes%s", t->passes, t->median_known ? "" : " (the run records no median pass)");
}

/* Writes the timeline's data and script: one row per rank (rank 0 on top), the microbatch in
 * each box that has room, a legend of the actions present. */
static void timeline_write(const timeline *t, const store_plot_opts *o, pl_buf *d, pl_buf *g) {
    double scale;
    const char *unit;
    time_unit(t->tmax_s, &scale, &unit);
    /* the shortest compute box gets about TL_MIN_BOX_PX pixels, within the plot's limits */
    double plot_px = fmin(TL_MAX_PLOT_PX, fmax(TL_MIN_PLOT_PX, TL_MIN_BOX_PX * t->tmax_s / (isfinite(t->dmin_s) ? t->dmin_s : t->tmax_s)));
    int have[N_ACTION_LOOKS] = {0};
    char passes[128], title[320];
    pass_text(t, passes, sizeof passes);
    pl_buf_printf(d, "# %s run %lld, times in %s%s\n", t->r.kind, (long long)t->r.id, unit, passes);
    int later = timeline_data(t, d, scale, plot_px / t->tmax_s, have);
    const store_run *r = &t->r;
    snprintf(title, sizeof title, "%s run %lld: %s, p = %d, m = %d%s%.0d, iteration %.4g %s, bubble %.1f%%", r->kind,
             (long long)r->id, r->schedule, r->ranks, r->microbatches, r->chunks > 1 ? ", v = " : "",
             r->chunks > 1 ? r->chunks : 0, r->iteration_time_s * scale, unit, 100 * r->bubble_fraction);
    script_begin(g, o, "timeline", (int)plot_px + TL_MARGIN_W, TL_MARGIN_H + TL_ROW_PX * t->ranks, title);
    pl_buf_printf(g, "nranks = %d\nxmax = %.10g\nxlabel_text = \"time (%s)%s; labels: microbatch%s\"\n", t->ranks,
                  t->tmax_s * scale * TL_END_PAD, unit, passes, later ? "; lighter: a rank's later chunks" : "");
    pl_buf_puts(g, "set xrange [0:xmax]\nset yrange [nranks - 0.5:-0.5]\nset xlabel xlabel_text font \",11\"\nplot \\\n");
    for (size_t k = 0; k < N_ACTION_LOOKS; k++)
        if (have[k])
            pl_buf_printf(g, "  NaN with boxes fs solid lc rgb \"#%06X\" title \"%s\", \\\n", action_looks[k].rgb,
                          action_looks[k].legend);
    pl_buf_puts(g, "  datafile index 0 using 2:1:3:(box_half):4 with boxxyerror lc rgb variable notitle, \\\n"
                   "  datafile index 0 using 2:1:5:6 with labels font \",8\" tc rgb variable notitle, \\\n"
                   "  datafile index 1 using 2:($1 + bar_offset):3:(bar_half):4 with boxxyerror fs solid 1.0 noborder lc rgb variable notitle\n");
}

/* Exports a run's ops as a Gantt chart: of a measured run, its median pass (all passes with
 * o->all_passes). */
static int plot_timeline(store *s, const store_plot_opts *o, pl_err *e) {
    if (!o->run) return pl_errf(e, PL_EINPUT, "timeline needs a run (integer id, uid or uid prefix)");
    timeline t;
    memset(&t, 0, sizeof t);
    int code = store_get_run(s, o->run, &t.r, e);
    if (code != PL_OK) return code;
    pl_buf d, g;
    pl_buf_init(&d);
    pl_buf_init(&g);
    code = store_get_ops(s, t.r.id, &t.ops, &t.n, e);
    if (code == PL_OK && timeline_select(&t, o->all_passes) != PL_OK) code = pl_errf(e, PL_ENOMEM, "out of memory");
    if (code == PL_OK) code = timeline_scan(&t, o, e);
    if (code == PL_OK) {
        timeline_write(&t, o, &d, &g);
        code = write_both(o, &d, &g, e);
    }
    free(t.first_stage);
    free(t.drawn);
    store_ops_free(t.ops, t.n);
    store_run_clear(&t.r);
    pl_buf_free(&d);
    pl_buf_free(&g);
    return code;
}

/* ---- bubble ---- */

/* Bubble figure geometry in pixels: a panel and its margins (tick and axis labels, the panel's
 * title), the figure's title, the legend column (a sample, then about this much per
 * character), a legend line; at most this many panels. */
#define BB_PANEL_W 620
#define BB_PANEL_H 450
#define BB_MARGIN_L 80
#define BB_MARGIN_R 24
#define BB_MARGIN_T 40
#define BB_MARGIN_B 60
#define BB_TITLE_H 70
#define BB_KEY_SAMPLE_PX 130
#define BB_KEY_CHAR_PX 7
#define BB_KEY_MAX_PX 560
#define BB_KEY_LINE_PX 19
#define BB_MAX_PANELS 16
/* Points on each analytic curve. */
#define ANALYTIC_POINTS 200

/* A panel of the bubble figure: one pipeline depth, and one tag when the runs carry several. */
typedef struct panel { int ranks; const char *tag; } panel;

/* Adds the analytic curve of one panel (ranks p) over m in [m0, m1]: v = 1 for gpipe/1f1b,
 * (p-1)/(m+p-1); v >= 2 for interleaved, Megatron's bubble/compute ratio (p-1)/(v m) as a
 * fraction of the iteration, (p-1)/(v m + p - 1). It shares the shade of the runs it
 * describes. Returns 0 or -1 (out of memory). */
static int analytic(curves *cs, int panel, int p, int v, double m0, double m1) {
    curve proto;
    memset(&proto, 0, sizeof proto);
    if (v <= 1) {
        snprintf(proto.base, sizeof proto.base, "gpipe, 1f1b");
        snprintf(proto.key, sizeof proto.key, "gpipe, 1f1b analytic (p-1)/(m+p-1)");
        proto.look = LOOK_ANALYTIC;
    } else {
        snprintf(proto.base, sizeof proto.base, "interleaved v=%d", v);
        snprintf(proto.key, sizeof proto.key, "interleaved v=%d analytic (p-1)/(%dm+p-1)", v, v);
        proto.look = sched_look("interleaved");
    }
    proto.var[0] = v;
    proto.panel = panel;
    proto.dashed = 1;
    curve *c = curve_get(cs, &proto);
    if (!c) return -1;
    if (c->n) return 0;
    for (int k = 0; k <= ANALYTIC_POINTS; k++) {
        double m = m0 * pow(m1 / m0, (double)k / ANALYTIC_POINTS);
        if (curve_put(c, m, (p - 1.0) / ((v <= 1 ? 1 : v) * m + p - 1.0), 0)) return -1;
    }
    return 0;
}

/* Returns the v of the analytic curve that describes a run: 1 for gpipe and 1f1b, its chunks
 * for interleaved, 0 when there is none. */
static int analytic_v(const store_run *r) {
    if (r->chunks <= 1 && (strcmp(r->schedule, "gpipe") == 0 || strcmp(r->schedule, "1f1b") == 0)) return 1;
    return strcmp(r->schedule, "interleaved") == 0 && r->chunks > 1 ? r->chunks : 0;
}

/* Returns the tag that tells run r's panel apart: its tag when the runs carry several, else NULL. */
static const char *panel_tag(const store_run *r, int several) { return several ? (r->tag ? r->tag : "") : NULL; }

/* Returns the index of the panel of depth ranks and tag (NULL: any) among pn[np], or np. */
static int panel_find(const panel *pn, int np, int ranks, const char *tag) {
    int k = 0;
    while (k < np && !(pn[k].ranks == ranks && (!tag || strcmp(pn[k].tag, tag) == 0))) k++;
    return k;
}

/* Finds the panels: one per pipeline depth, and per tag when the runs carry several (tags in
 * the order their first runs were stored), depths ascending; panel_of[i] gets run i's. Returns
 * the number of panels, or -1 when there are more than BB_MAX_PANELS. */
static int bubble_panels(const store_run *runs, size_t n, panel *pn, int *panel_of) {
    int several = 0, np = 0;
    for (size_t i = 1; i < n; i++) several |= strcmp(runs[i].tag ? runs[i].tag : "", runs[0].tag ? runs[0].tag : "") != 0;
    for (size_t i = 0; i < n; i++) {
        const char *tag = panel_tag(&runs[i], several);
        if (panel_find(pn, np, runs[i].ranks, tag) < np) continue;
        if (np == BB_MAX_PANELS) return -1;
        pn[np++] = (panel){runs[i].ranks, tag};
    }
    for (int j = 1; j < np; j++) /* depths ascending; stable, so tags keep their order */
        for (int k = j; k > 0 && pn[k].ranks < pn[k - 1].ranks; k--) {
            panel t = pn[k];
            pn[k] = pn[k - 1];
            pn[k - 1] = t;
        }
    for (size_t i = 0; i < n; i++) panel_of[i] = panel_find(pn, np, runs[i].ranks, panel_tag(&runs[i], several));
    return np;
}

/* Appends "set lmargin ... bmargin at screen" for the pixel box x0..x1 (from the left), y0..y1
 * (from the top) of a w x h figure. */
static void put_margins(pl_buf *g, double x0, double x1, double y0, double y1, int w, int h) {
    pl_buf_printf(g, "set lmargin at screen %.4f\nset rmargin at screen %.4f\nset tmargin at screen %.4f\n"
                     "set bmargin at screen %.4f\n", x0 / w, x1 / w, 1 - y0 / h, 1 - y1 / h);
}

/* Writes the bubble figure's script: the panels in a grid, each framed alike, then one legend
 * of every curve (in legend order, each key once) in a column on the right. */
static int bubble_script(const store_plot_opts *o, const curves *cs, const panel *pn, int np, double mmin,
                         double mmax, const char *title, pl_buf *g) {
    const curve **keys = pl_calloc(cs->n ? cs->n : 1, sizeof *keys);
    if (!keys) return -1;
    size_t nk = 0, maxlen = 0;
    int dashed = 0;
    for (size_t i = 0; i < cs->n; i++) {
        size_t k = 0;
        while (k < nk && strcmp(keys[k]->key, cs->c[i].key) != 0) k++;
        if (k == nk) keys[nk++] = &cs->c[i];
        if (strlen(cs->c[i].key) > maxlen) maxlen = strlen(cs->c[i].key);
        dashed |= cs->c[i].dashed;
    }
    qsort(keys, nk, sizeof *keys, cmp_legend_ptr);
    int cols = np <= 3 ? np : 2, rows = (np + cols - 1) / cols;
    int key_w = (int)fmin(BB_KEY_MAX_PX, BB_KEY_SAMPLE_PX + BB_KEY_CHAR_PX * (double)maxlen);
    int w = cols * BB_PANEL_W + key_w, h = BB_TITLE_H + rows * BB_PANEL_H;
    if (h < BB_TITLE_H + BB_MARGIN_T + (int)nk * BB_KEY_LINE_PX) h = BB_TITLE_H + BB_MARGIN_T + (int)nk * BB_KEY_LINE_PX;
    script_begin(g, o, "bubble", w, h, title);
    put_x_axis(g, cs, mmin, mmax);
    pl_buf_puts(g, "set multiplot title \"");
    gp_escape(g, o->title ? o->title : title);
    pl_buf_printf(g, "\\nlines: runs in the database%s\" font \",13\"\n", dashed ? "; dashed: analytic" : "");
    for (int p = 0; p < np; p++) {
        int c = p % cols, r = p / cols;
        put_margins(g, c * BB_PANEL_W + BB_MARGIN_L, (c + 1) * BB_PANEL_W - BB_MARGIN_R, BB_TITLE_H + r * BB_PANEL_H + BB_MARGIN_T,
                    BB_TITLE_H + (r + 1) * BB_PANEL_H - BB_MARGIN_B, w, h);
        pl_buf_printf(g, "set title \"p = %d ranks%s", pn[p].ranks, pn[p].tag ? ": " : "");
        if (pn[p].tag) gp_escape(g, tag_label(pn[p].tag));
        pl_buf_puts(g, "\" font \",12\"\nplot \\\n");
        put_curves(g, cs, p, DRAW_LINES, 1);
        pl_buf_puts(g, "\n");
    }
    pl_buf_puts(g, "# the legend: every curve once, beside the panels\n"
                   "unset title\nunset xlabel\nunset ylabel\nunset border\nunset tics\nunset grid\nunset logscale\n"
                   "set xrange [0:1]\nset yrange [0:1]\nset key inside left top Left reverse samplen 4 spacing 1.15\n");
    put_margins(g, cols * BB_PANEL_W + 4, w - 4, BB_TITLE_H + BB_MARGIN_T, h - 4, w, h);
    pl_buf_puts(g, "plot \\\n");
    for (size_t k = 0; k < nk; k++) {
        pl_buf_puts(g, k ? ", \\\n  " : "  ");
        put_curve(g, -1, keys[k], DRAW_LINES);
    }
    pl_buf_puts(g, "\nunset multiplot\n");
    free(keys);
    return 0;
}

/* Exports bubble fraction against microbatches: one panel per pipeline depth (and tag), one
 * curve per schedule, the analytic curves dashed. */
static int plot_bubble(store *s, const store_plot_opts *o, pl_err *e) {
    figure f;
    int code = figure_open(s, o, &f, e);
    panel pn[BB_MAX_PANELS];
    int *panel_of = NULL, np = 0;
    if (code != PL_OK) goto done;
    if (!(panel_of = pl_calloc(f.n, sizeof *panel_of))) goto oom;
    if ((np = bubble_panels(f.runs, f.n, pn, panel_of)) < 0) {
        code = pl_errf(e, PL_EINPUT, "runs of more than %d pipeline depths and tags: choose some with --ranks or --tag",
                       BB_MAX_PANELS);
        goto done;
    }
    double mmin = INFINITY, mmax = 0;
    for (size_t i = 0; i < f.n; i++) mmin = fmin(mmin, f.runs[i].microbatches), mmax = fmax(mmax, f.runs[i].microbatches);
    if (mmax <= mmin) mmax = mmin + 1;
    for (size_t i = 0; i < f.n; i++) {
        const store_run *r = &f.runs[i];
        curve proto, *c;
        run_curve(&proto, r, NULL, 0, panel_of[i]);
        if (!(c = curve_get(&f.cs, &proto)) || curve_put(c, r->microbatches, r->bubble_fraction, 1)) goto oom;
        if (analytic_v(r) && analytic(&f.cs, panel_of[i], r->ranks, analytic_v(r), mmin, mmax)) goto oom;
    }
    curves_write(&f.cs, &f.d);
    char title[256];
    figure_title(title, sizeof title, o, "Bubble fraction against microbatches");
    if (bubble_script(o, &f.cs, pn, np, mmin, mmax, title, &f.g)) goto oom;
    code = write_both(o, &f.d, &f.g, e);
    goto done;
oom:
    code = pl_errf(e, PL_ENOMEM, "out of memory");
done:
    free(panel_of);
    figure_free(&f);
    return code;
}

/* ---- throughput ---- */

/* Size in pixels of the throughput and accuracy figures. */
#define THR_W 1000
#define THR_H 650
#define ACC_W 800
#define ACC_H 760

/* The throughput figure's x axes (store_plot_x): in the title, and as the axis label. */
static const char *const x_names[] = {"pipeline depth", "pipeline stages", "microbatches"};
static const char *const x_labels[] = {"pipeline depth p (ranks)", "pipeline stages (p x chunks per rank)",
                                       "microbatches per iteration (m)"};

/* Returns run r's value on axis a (the throughput figure's x, or the variable beside it). */
static int axis_value(const store_run *r, store_plot_x a) {
    return a == STORE_X_MICROBATCHES ? r->microbatches : a == STORE_X_STAGES ? r->stages : r->ranks;
}

/* Returns 1 when the other variable takes several values within one schedule's runs, so that
 * each value needs a curve of its own. */
static int other_varies(const store_run *runs, size_t n, store_plot_x other) {
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(runs[i].schedule, runs[j].schedule) && runs[i].chunks == runs[j].chunks &&
                axis_value(&runs[i], other) != axis_value(&runs[j], other))
                return 1;
    return 0;
}

/* Exports throughput against the pipeline depth p (or the stages, or the microbatches): one curve
 * per schedule, and per value of the variable beside x (m, or p when x is m) when it varies
 * within a schedule, labelled "interleaved v=2, p = 8" (p: ranks, v: chunks per rank). */
static int plot_throughput(store *s, const store_plot_opts *o, pl_err *e) {
    figure f;
    int code = figure_open(s, o, &f, e);
    if (code != PL_OK) goto done;
    store_plot_x other = o->x == STORE_X_MICROBATCHES ? STORE_X_RANKS : STORE_X_MICROBATCHES;
    int varies = other_varies(f.runs, f.n, other);
    double xmin = INFINITY, xmax = 0;
    for (size_t i = 0; i < f.n; i++) {
        const store_run *r = &f.runs[i];
        char extra[32];
        snprintf(extra, sizeof extra, "%s = %d", other == STORE_X_RANKS ? "p" : "m", axis_value(r, other));
        curve proto, *c;
        run_curve(&proto, r, varies ? extra : NULL, axis_value(r, other), 0);
        double x = axis_value(r, o->x);
        if (!(c = curve_get(&f.cs, &proto)) || curve_put(c, x, r->throughput_samples_s, 1)) {
            code = pl_errf(e, PL_ENOMEM, "out of memory");
            goto done;
        }
        xmin = fmin(xmin, x);
        xmax = fmax(xmax, x);
    }
    curves_write(&f.cs, &f.d);
    char title[256];
    figure_title(title, sizeof title, o, "Throughput against %s", x_names[o->x]);
    script_begin(&f.g, o, "throughput", THR_W, THR_H, title);
    pl_buf_printf(&f.g, "set xlabel \"%s\" font \",11\"\n", x_labels[o->x]);
    put_x_axis(&f.g, &f.cs, xmin, xmax);
    pl_buf_puts(&f.g, "plot \\\n");
    put_curves(&f.g, &f.cs, -1, DRAW_LINES, 1);
    pl_buf_puts(&f.g, "\n");
    code = write_both(o, &f.d, &f.g, e);
done:
    figure_free(&f);
    return code;
}

/* ---- memory ---- */

/* Size of the memory figure: width per rank and per bar within its group, limits, height. */
#define MEM_W_BASE 120
#define MEM_W_RANK 40
#define MEM_W_BAR 14
#define MEM_W_MIN 900
#define MEM_W_MAX 1800
#define MEM_H 600
/* The bars of a rank fill this part of its slot; a bar fills this part of its own; the x axis
 * runs this far (in ranks) past the first and the last rank. */
#define MEM_GROUP_W 0.8
#define MEM_BAR_FILL 0.92
#define MEM_X_PAD 0.6

/* Picks the newest run of each schedule (curve key) into cs, one curve each with its run
 * index; the runs must share one pipeline depth. Returns PL_OK or an error code. */
static int memory_pick(const store_run *runs, size_t n, curves *cs, pl_err *e) {
    for (size_t i = 0; i < n; i++) {
        if (runs[i].ranks != runs[0].ranks)
            return pl_errf(e, PL_EINPUT, "the runs have %d and %d ranks: choose one pipeline depth with --ranks",
                           runs[0].ranks, runs[i].ranks);
        curve proto, *c;
        run_curve(&proto, &runs[i], NULL, 0, 0);
        if (!(c = curve_get(cs, &proto))) return pl_errf(e, PL_ENOMEM, "out of memory");
        c->run = i; /* runs are oldest first: the newest of each schedule wins */
    }
    qsort(cs->c, cs->n, sizeof *cs->c, cmp_curve);
    return PL_OK;
}

/* The rank metrics of the run each memory curve shows: m[k], nm[k] of curve k (owned), and the
 * largest peak among them. */
typedef struct memory_rows {
    store_rank_metric **m;
    int *nm;
    size_t n;
    double max_bytes;
} memory_rows;

/* Frees what memory_read gathered. */
static void memory_rows_free(memory_rows *mr) {
    for (size_t k = 0; mr->m && k < mr->n; k++) free(mr->m[k]);
    free(mr->m);
    free(mr->nm);
}

/* Reads the rank metrics of each curve's run into mr (zeroed); returns PL_OK, PL_EINPUT when no
 * run has a peak memory, or the store's error. */
static int memory_read(store *s, const figure *f, memory_rows *mr, pl_err *e) {
    memset(mr, 0, sizeof *mr);
    mr->m = pl_calloc(f->cs.n, sizeof *mr->m);
    mr->nm = pl_calloc(f->cs.n, sizeof *mr->nm);
    if (!mr->m || !mr->nm) return pl_errf(e, PL_ENOMEM, "out of memory");
    mr->n = f->cs.n;
    int code = PL_OK;
    for (size_t k = 0; k < f->cs.n && code == PL_OK; k++) {
        code = store_get_rank_metrics(s, f->runs[f->cs.c[k].run].id, &mr->m[k], &mr->nm[k], e);
        for (int q = 0; code == PL_OK && q < mr->nm[k]; q++)
            mr->max_bytes = fmax(mr->max_bytes, (double)mr->m[k][q].peak_mem_bytes);
    }
    if (code == PL_OK && !(mr->max_bytes > 0))
        code = pl_errf(e, PL_EINPUT, "peak memory is 0 in every selected run: simulate with --model, or with "
                                     "--param-bytes and --stash-bytes");
    return code;
}

/* Writes the memory figure's script: a bar per rank and schedule, bars of width bw, in unit. */
static void memory_script(figure *f, const store_plot_opts *o, double bw, const char *unit) {
    int p = f->runs[0].ranks;
    char title[256];
    figure_title(title, sizeof title, o, "Peak memory per rank, p = %d", p);
    script_begin(&f->g, o, "memory",
                 (int)fmin(MEM_W_MAX, fmax(MEM_W_MIN, MEM_W_BASE + p * (MEM_W_RANK + MEM_W_BAR * (double)f->cs.n))), MEM_H,
                 title);
    pl_buf_printf(&f->g, "set ylabel \"peak memory (%s)\" font \",11\"\nset xrange [%.10g:%.10g]\nset boxwidth %.6g absolute\n"
                         "plot \\\n", unit, -MEM_X_PAD, p - 1 + MEM_X_PAD, bw * MEM_BAR_FILL);
    put_curves(&f->g, &f->cs, -1, DRAW_BOXES, 1);
    pl_buf_puts(&f->g, "\n");
}

/* Exports peak memory per rank: for each schedule (its newest run) one bar per rank. */
static int plot_memory(store *s, const store_plot_opts *o, pl_err *e) {
    figure f;
    memory_rows mr = {0};
    int code = figure_open(s, o, &f, e);
    if (code == PL_OK) code = memory_pick(f.runs, f.n, &f.cs, e);
    if (code == PL_OK) code = memory_read(s, &f, &mr, e);
    if (code != PL_OK) goto done;
    double scale, bw = MEM_GROUP_W / (double)f.cs.n;
    const char *unit;
    byte_unit(mr.max_bytes, &scale, &unit);
    for (size_t k = 0; k < f.cs.n; k++)
        for (int q = 0; q < mr.nm[k]; q++)
            if (curve_put(&f.cs.c[k], mr.m[k][q].rank - MEM_GROUP_W / 2 + (k + 0.5) * bw,
                          (double)mr.m[k][q].peak_mem_bytes / scale, 0)) {
                code = pl_errf(e, PL_ENOMEM, "out of memory");
                goto done;
            }
    curves_write(&f.cs, &f.d);
    memory_script(&f, o, bw, unit);
    code = write_both(o, &f.d, &f.g, e);
done:
    memory_rows_free(&mr);
    figure_free(&f);
    return code;
}

/* ---- accuracy ---- */

/* The axes frame the data: logarithmic when it spans more than ACC_LOG_RATIO (its ends a factor
 * ACC_LOG_PAD beyond), else linear with ACC_PAD of the largest value (or ACC_SPREAD_PAD of the
 * spread, when more) beyond each end, so that points close together are not crammed into a
 * corner; the band is +-ACC_BAND around y = x. */
#define ACC_LOG_RATIO 4.0
#define ACC_LOG_PAD 1.25
#define ACC_PAD 0.06
#define ACC_SPREAD_PAD 0.1
#define ACC_BAND 0.05

/* Writes the accuracy figure's script: axes framing the iteration times lo..hi (seconds, shown
 * times scale in unit), the band around y = x, a point set per schedule. */
static void accuracy_script(figure *f, const store_plot_opts *o, const store_comparison *c, double lo, double hi,
                            double scale, const char *unit) {
    int logs = lo > 0 && hi / lo > ACC_LOG_RATIO;
    double pad = fmax(ACC_PAD * hi, ACC_SPREAD_PAD * (hi - lo));
    double x0 = (logs ? lo / ACC_LOG_PAD : fmax(0, lo - pad)) * scale, x1 = (logs ? hi * ACC_LOG_PAD : hi + pad) * scale;
    char title[256];
    snprintf(title, sizeof title, "Predicted against measured iteration time\n%zu runs: MAPE %.2f%%, max error %+.2f%%",
             c->n, 100 * c->iter.mape, 100 * c->iter.max_err);
    pl_buf *g = &f->g;
    script_begin(g, o, "accuracy", ACC_W, ACC_H, title);
    if (logs) pl_buf_puts(g, "set logscale xy\n");
    pl_buf_printf(g, "set xrange [%.10g:%.10g]\nset yrange [%.10g:%.10g]\n", x0, x1, x0, x1);
    pl_buf_printf(g, "set xlabel \"measured iteration time (%s)\" font \",11\"\n"
                     "set ylabel \"predicted iteration time (%s)\" font \",11\"\nset samples 400\nplot \\\n", unit, unit);
    pl_buf_printf(g, "  '+' using 1:(%.6g*$1):(%.6g*$1) with filledcurves fc rgb \"#e3e3e3\" fs solid 1.0 title \"+-%g%%\", \\\n"
                     "  x with lines lc rgb \"#555555\" lw 1.5 title \"y = x\"",
                  1 - ACC_BAND, 1 + ACC_BAND, 100 * ACC_BAND);
    put_curves(g, &f->cs, -1, DRAW_POINTS, 0);
    pl_buf_puts(g, "\n");
}

/* Exports predicted against measured iteration time for every pair store_compare finds. */
static int plot_accuracy(store *s, const store_plot_opts *o, pl_err *e) {
    store_comparison c;
    int code = store_compare(s, &o->filter, o->loose, &c, e);
    if (code != PL_OK) return code;
    figure f;
    figure_init(&f);
    if (c.n == 0) {
        code = pl_errf(e, PL_EINPUT, "no measured run has a simulated run of the same configuration (%zu measured, "
                                     "%zu simulated selected); see pipelab compare --help",
                       c.unmatched_measured, c.simulated);
        goto done;
    }
    /* a pair is drawn where both runs recorded a time (a database edited by hand may lack one) */
    double lo = INFINITY, hi = 0, scale;
    size_t drawn = 0;
    for (size_t i = 0; i < c.n; i++) {
        double a = c.pairs[i].meas.iteration_time_s, b = c.pairs[i].sim.iteration_time_s;
        if (!(a > 0 && b > 0 && isfinite(a) && isfinite(b))) continue;
        lo = fmin(lo, fmin(a, b));
        hi = fmax(hi, fmax(a, b));
        drawn++;
    }
    if (drawn == 0) {
        code = pl_errf(e, PL_EINPUT, "none of the %zu pairs has a positive iteration time in both runs: the database is "
                       "damaged", c.n);
        goto done;
    }
    const char *unit;
    time_unit(hi, &scale, &unit);
    for (size_t i = 0; i < c.n; i++) {
        double a = c.pairs[i].meas.iteration_time_s, b = c.pairs[i].sim.iteration_time_s;
        if (!(a > 0 && b > 0 && isfinite(a) && isfinite(b))) continue;
        curve proto, *cv;
        run_curve(&proto, &c.pairs[i].sim, NULL, 0, 0);
        if (!(cv = curve_get(&f.cs, &proto)) ||
            curve_put(cv, c.pairs[i].meas.iteration_time_s * scale, c.pairs[i].sim.iteration_time_s * scale, 0)) {
            code = pl_errf(e, PL_ENOMEM, "out of memory");
            goto done;
        }
    }
    curves_write(&f.cs, &f.d);
    accuracy_script(&f, o, &c, lo, hi, scale, unit);
    code = write_both(o, &f.d, &f.g, e);
done:
    figure_free(&f);
    store_comparison_free(&c);
    return code;
}

/* Writes the data and script of the figure o asks for; returns PL_OK or the figure's error. */
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

/* Returns 0 when path is a regular file this user may execute, else why not as an errno value:
 * stat's (ENOENT: no such file), EISDIR for a folder, EACCES for another kind of file or one
 * without execute permission. */
static int program_errno(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (!S_ISREG(st.st_mode)) return EACCES;
    return access(path, X_OK) == 0 ? 0 : errno;
}

/* Returns the malloc'd path of the program name on PATH, as execvp finds it (the first regular,
 * executable file PATH_DIR/name; an empty entry is the current directory), or NULL. */
static char *path_lookup(const char *name) {
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin"; /* execvp's default */
    size_t nlen = strlen(name);
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        char *cand = malloc(len + nlen + 3);
        if (!cand) return NULL;
        snprintf(cand, len + nlen + 3, "%.*s/%s", (int)(len ? len : 1), len ? path : ".", name);
        if (program_errno(cand) == 0) return cand;
        free(cand);
        path = colon ? colon + 1 : NULL;
    }
    return NULL;
}

/* Returns the malloc'd path of gnuplot ($PIPELAB_GNUPLOT: a path when it holds a '/', else a
 * program looked up on PATH; unset, "gnuplot" on PATH), or NULL with e. */
char *store_gnuplot_find(pl_err *e) {
    const char *env = getenv(STORE_GNUPLOT_ENV);
    if (env && *env) {
        if (strchr(env, '/')) {
            int err = program_errno(env);
            if (err == 0) return strdup(env);
            pl_errf(e, PL_EINPUT, "%s=%s is not an executable program (%s)", STORE_GNUPLOT_ENV, env, strerror(err));
            return NULL;
        }
        char *found = path_lookup(env);
        if (!found) pl_errf(e, PL_EINPUT, "%s=%s: no executable program %s on PATH", STORE_GNUPLOT_ENV, env, env);
        return found;
    }
    char *found = path_lookup("gnuplot");
    if (!found)
        pl_errf(e, PL_EINPUT, "gnuplot not found on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox) "
                              "or set PIPELAB_GNUPLOT to the program");
    return found;
}

int store_gnuplot_timeout(double *seconds, pl_err *e) {
    const char *env = getenv(STORE_GNUPLOT_TIMEOUT_ENV);
    *seconds = STORE_GNUPLOT_TIMEOUT_S;
    if (!env || !*env) return PL_OK;
    if (pl_parse_double(env, seconds) != 0 || !(*seconds > 0) || *seconds > STORE_GNUPLOT_TIMEOUT_MAX_S)
        return pl_errf(e, PL_EINPUT, "%s=%s: wants the seconds one gnuplot run may take, above 0 and at most %g",
                       STORE_GNUPLOT_TIMEOUT_ENV, env, STORE_GNUPLOT_TIMEOUT_MAX_S);
    return PL_OK;
}

/* The signal that ended pipelab's wait for gnuplot (SIGINT, SIGTERM, SIGHUP), 0 none: gnuplot
 * runs in a process group of its own, which the terminal's ^C does not reach, so the wait passes
 * such a signal on to it before pipelab ends. */
static volatile sig_atomic_t gnuplot_sig;
static void gnuplot_on_signal(int sig) { gnuplot_sig = sig; }
static const int gnuplot_sigs[] = {SIGINT, SIGTERM, SIGHUP};
#define GNUPLOT_NSIGS (sizeof gnuplot_sigs / sizeof gnuplot_sigs[0])

/* The longest nap between two looks at gnuplot (ns): a figure is noticed within it. */
#define GNUPLOT_NAP_MAX_NS 50000000L

/* Stops gnuplot's process group (pid leads it: a wrapper script's gnuplot goes too) and reaps
 * pid into *st. */
static void gnuplot_stop(pid_t pid, int *st) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, st, 0) < 0 && errno == EINTR) {}
}

/* Waits for gnuplot (pid, the leader of its process group) to end, at most limit seconds: past
 * it, or on SIGINT, SIGTERM or SIGHUP, its group is killed and output (which it may have left
 * half written) removed; such a signal then ends pipelab as it would have. Returns PL_OK with the
 * wait status in *st (also of a gnuplot that ended just as the limit passed), or the error. */
static int gnuplot_wait(pid_t pid, double limit, const char *script, const char *output, int *st, pl_err *e) {
    struct sigaction on, old[GNUPLOT_NSIGS];
    memset(&on, 0, sizeof on);
    on.sa_handler = gnuplot_on_signal;
    sigemptyset(&on.sa_mask);
    gnuplot_sig = 0;
    for (size_t i = 0; i < GNUPLOT_NSIGS; i++) { /* a signal pipelab ignores stays ignored */
        sigaction(gnuplot_sigs[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN) sigaction(gnuplot_sigs[i], &on, NULL);
    }
    double t0 = pl_now_s();
    long nap_ns = 1000000L; /* 1 ms, doubling up to GNUPLOT_NAP_MAX_NS: a quick figure is not held up */
    int code = PL_OK, stopped = 0;
    for (;;) {
        pid_t got = waitpid(pid, st, WNOHANG);
        if (got == pid) break;
        if (got < 0 && errno != EINTR) {
            gnuplot_stop(pid, st);
            code = pl_errf(e, PL_EIO, "waiting for gnuplot: %s", strerror(errno));
            break;
        }
        if (gnuplot_sig || pl_now_s() - t0 > limit) {
            gnuplot_stop(pid, st);
            /* ended by itself just before: its own status stands */
            stopped = WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL;
            if (stopped) remove(output);
            if (stopped && !gnuplot_sig)
                code = pl_errf(e, PL_EIO, "gnuplot did not finish within %g s on %s, and was stopped (%s sets the limit)",
                               limit, script, STORE_GNUPLOT_TIMEOUT_ENV);
            break;
        }
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL); /* a signal cuts it short */
        nap_ns = nap_ns * 2 < GNUPLOT_NAP_MAX_NS ? nap_ns * 2 : GNUPLOT_NAP_MAX_NS;
    }
    for (size_t i = 0; i < GNUPLOT_NSIGS; i++) sigaction(gnuplot_sigs[i], &old[i], NULL);
    if (gnuplot_sig) raise(gnuplot_sig); /* ends pipelab, unless the caller handles it */
    if (gnuplot_sig && code == PL_OK && stopped)
        code = pl_errf(e, PL_EIO, "gnuplot was stopped by signal %d (%s)", (int)gnuplot_sig, strsignal(gnuplot_sig));
    return code;
}

/* Runs gnuplot on script in a process group of its own, its input /dev/null (a script that waits
 * for a key does not wait on the terminal), at most limit_s seconds (store.h); returns PL_OK
 * when it succeeded and wrote a non-empty output. */
int store_plot_gnuplot(const char *gnuplot, const char *script, const char *output, double limit_s, pl_err *e) {
    char *argv[] = {(char *)"gnuplot", (char *)script, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    if (posix_spawn_file_actions_init(&fa) != 0) return pl_errf(e, PL_ENOMEM, "out of memory");
    if (posix_spawnattr_init(&at) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    int rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (rc == 0) rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    if (rc == 0) rc = posix_spawnattr_setpgroup(&at, 0);
    pid_t pid;
    int spawned = rc == 0 ? posix_spawn(&pid, gnuplot, &fa, &at, argv, environ) : -1;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) return pl_errf(e, PL_ENOMEM, "cannot set up gnuplot's process: %s", strerror(rc));
    if (spawned != 0)
        return pl_errf(e, PL_EIO, "cannot run %s (with its input from /dev/null): %s", gnuplot, strerror(spawned));
    int st;
    int code = gnuplot_wait(pid, limit_s, script, output, &st, e);
    if (code != PL_OK) return code;
    if (WIFSIGNALED(st)) {
        remove(output); /* what it wrote of the figure, if anything */
        return pl_errf(e, PL_EIO, "gnuplot was killed by signal %d (%s) on %s; its messages are above", WTERMSIG(st),
                       strsignal(WTERMSIG(st)), script);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return pl_errf(e, PL_EINPUT, "gnuplot failed on %s (exit status %d); its messages are above", script,
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    struct stat sb;
    if (stat(output, &sb) != 0 || sb.st_size == 0)
        return pl_errf(e, PL_EIO, "%s: gnuplot wrote no figure (script %s)", output, script);
    return PL_OK;
}
