/* sim_costs.c: the flag-driven cost model (uniform stages, per-stage CSV overrides, a
 * two-level link topology, ring all-reduce) behind the sim_costs interface. */
#include "sim.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void sim_basic_init(sim_basic *b) {
    memset(b, 0, sizeof *b);
    b->tf_s = 1;
    b->tb_s = b->ti_s = b->tw_s = -1;
    b->tcomm_s = -1;
    b->w_stash_fraction = 0.5;
    b->bandwidth_Bps = b->inter_bandwidth_Bps = 1e30;
}

void sim_basic_free(sim_basic *b) {
    free(b->stage);
    b->stage = NULL;
}

int sim_basic_check(const sim_basic *b, pl_err *e) {
    struct { const char *name; double v; } t[] = {
        {"--tf", b->tf_s}, {"--tstep", b->tstep_s}, {"--latency", b->latency_s}, {"--inter-latency", b->inter_latency_s},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!(t[i].v >= 0) || !isfinite(t[i].v)) return pl_errf(e, PL_EINPUT, "%s must be a finite time >= 0 (got %g)", t[i].name, t[i].v);
    struct { const char *name; double v; } o[] = {{"--tb", b->tb_s}, {"--ti", b->ti_s}, {"--tw", b->tw_s}, {"--tcomm", b->tcomm_s}};
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
        if (!isfinite(o[i].v) || (o[i].v < 0 && o[i].v != -1))
            return pl_errf(e, PL_EINPUT, "%s must be a finite time >= 0 (got %g)", o[i].name, o[i].v);
    if (b->bytes < 0 || b->stash_bytes < 0 || b->param_bytes < 0)
        return pl_errf(e, PL_EINPUT, "sizes in bytes (--bytes, --stash-bytes, --param-bytes) must be >= 0");
    if (!(b->w_stash_fraction >= 0 && b->w_stash_fraction <= 1))
        return pl_errf(e, PL_EINPUT, "the W stash fraction must be in [0, 1] (got %g)", b->w_stash_fraction);
    if (!(b->bandwidth_Bps > 0) || !(b->inter_bandwidth_Bps > 0) || !isfinite(b->bandwidth_Bps) ||
        !isfinite(b->inter_bandwidth_Bps))
        return pl_errf(e, PL_EINPUT,
                       "%s must be a finite number of bytes per second > 0 (got %g): a link of bandwidth 0 never "
                       "delivers; for free transfers leave it out or give --tcomm 0",
                       !(b->bandwidth_Bps > 0) || !isfinite(b->bandwidth_Bps) ? "--bandwidth" : "--inter-bandwidth",
                       !(b->bandwidth_Bps > 0) || !isfinite(b->bandwidth_Bps) ? b->bandwidth_Bps : b->inter_bandwidth_Bps);
    if (b->ranks_per_node < 0) return pl_errf(e, PL_EINPUT, "ranks per node must be >= 0");
    return PL_OK;
}

/* Returns the stage override row of stage q, or NULL. */
static const sim_stage_cost *ovr(const sim_basic *b, int q) {
    return b->stage && q >= 0 && q < b->stages ? &b->stage[q] : NULL;
}

/* Returns the F, B, I, W times of stage q after overrides and derivation (B = I + W; with
 * only B known, I = W = B / 2; with nothing known, B = 2 F). */
static void times_of(const sim_basic *b, int q, double *f, double *bb, double *i, double *w) {
    const sim_stage_cost *o = ovr(b, q);
    double tf = o && o->tf_s >= 0 ? o->tf_s : b->tf_s;
    double tb = o && o->tb_s >= 0 ? o->tb_s : b->tb_s;
    double ti = o && o->ti_s >= 0 ? o->ti_s : b->ti_s;
    double tw = o && o->tw_s >= 0 ? o->tw_s : b->tw_s;
    if (ti >= 0 && tw >= 0) {
        if (tb < 0) tb = ti + tw;
    } else if (ti >= 0) {
        tw = tb >= 0 ? tb - ti : ti;
    } else if (tw >= 0) {
        ti = tb >= 0 ? tb - tw : tw;
    } else {
        if (tb < 0) tb = 2 * tf;
        ti = tw = tb / 2;
    }
    if (tb < 0) tb = ti + tw;
    *f = tf;
    *bb = tb;
    *i = ti;
    *w = tw;
}

/* Returns the compute time of kind on stage q. */
static double basic_compute(void *ctx, int q, sched_kind k, int mb) {
    (void)mb;
    double f, bb, i, w;
    times_of(ctx, q, &f, &bb, &i, &w);
    switch (k) {
    case SCHED_F: return f;
    case SCHED_B: return bb;
    case SCHED_I: return i;
    case SCHED_W: return w;
    default: return 0;
    }
}

/* Returns the boundary bytes of stage q. */
static int64_t basic_bytes(void *ctx, int q) {
    const sim_basic *b = ctx;
    const sim_stage_cost *o = ovr(b, q);
    return o && o->bytes >= 0 ? o->bytes : b->bytes;
}

/* Returns the stash bytes of stage q. */
static int64_t basic_stash(void *ctx, int q) {
    const sim_basic *b = ctx;
    const sim_stage_cost *o = ovr(b, q);
    return o && o->stash_bytes >= 0 ? o->stash_bytes : b->stash_bytes;
}

/* Returns the part of the stash kept from I to W: the override, else the fraction. */
static int64_t basic_wstash(void *ctx, int q) {
    const sim_basic *b = ctx;
    const sim_stage_cost *o = ovr(b, q);
    if (o && o->w_stash_bytes >= 0) return o->w_stash_bytes;
    return (int64_t)llround((double)basic_stash(ctx, q) * b->w_stash_fraction);
}

/* Returns the input bytes of stage q: the output of stage q - 1 (stage 0: its own output). */
static int64_t basic_input(void *ctx, int q) {
    return basic_bytes(ctx, q > 0 ? q - 1 : 0);
}

/* Returns the parameter bytes of stage q. */
static int64_t basic_params(void *ctx, int q) {
    const sim_basic *b = ctx;
    const sim_stage_cost *o = ovr(b, q);
    return o && o->param_bytes >= 0 ? o->param_bytes : b->param_bytes;
}

/* Returns the time of one transfer: fixed, or cost_p2p_s (latency + bytes / bandwidth) of the
 * link class. */
static double basic_transfer(void *ctx, int src, int dst, int64_t bytes) {
    const sim_basic *b = ctx;
    if (b->tcomm_s >= 0) return b->tcomm_s;
    int inter = b->ranks_per_node > 0 && src / b->ranks_per_node != dst / b->ranks_per_node;
    return inter ? cost_p2p_s(b->inter_latency_s, b->inter_bandwidth_Bps, (double)bytes)
                 : cost_p2p_s(b->latency_s, b->bandwidth_Bps, (double)bytes);
}

/* Returns the ring all-reduce time (cost_ring_allreduce_s) on the inter pair when all-reduces
 * cross nodes, else the intra pair; a stage without parameters reduces nothing and costs 0, as
 * cost_allreduce_s has it for the model-driven costs. */
static double basic_allreduce(void *ctx, int q, int n, int64_t bytes) {
    (void)q;
    const sim_basic *b = ctx;
    if (bytes <= 0) return 0;
    int inter = b->allreduce_inter && b->ranks_per_node > 0;
    double bw = inter ? b->inter_bandwidth_Bps : b->bandwidth_Bps;
    double lat = inter ? b->inter_latency_s : b->latency_s;
    return cost_ring_allreduce_s(n, (double)bytes, bw, lat);
}

/* Returns the optimizer step time. */
static double basic_step(void *ctx, int q) {
    (void)q;
    return ((const sim_basic *)ctx)->tstep_s;
}

sim_costs sim_basic_costs(sim_basic *b) {
    sim_costs c = {b, basic_compute, basic_bytes, basic_stash, basic_wstash, basic_input, basic_params,
                   basic_transfer, basic_allreduce, basic_step, NULL, NULL, NULL, NULL};
    return c;
}

const char *sim_time_per_name(sim_time_per t) { return t == SIM_TIME_PER_STAGE ? "stage" : "rank"; }

int sim_time_per_parse(const char *name, sim_time_per *t) {
    if (strcmp(name, "rank") == 0) *t = SIM_TIME_PER_RANK;
    else if (strcmp(name, "stage") == 0) *t = SIM_TIME_PER_STAGE;
    else return -1;
    return 0;
}

double sim_time_per_share(sim_time_per t, int ranks, int stages) {
    return t == SIM_TIME_PER_RANK && stages > 0 ? (double)ranks / stages : 1.0;
}

/* Returns the time t scaled by share, keeping the "derive it" marker (negative) as it is. */
static double scaled_time(double t, double share) { return t < 0 ? t : t * share; }

sim_basic sim_basic_scaled(const sim_basic *b, double share) {
    sim_basic x = *b;
    x.tf_s = scaled_time(b->tf_s, share);
    x.tb_s = scaled_time(b->tb_s, share);
    x.ti_s = scaled_time(b->ti_s, share);
    x.tw_s = scaled_time(b->tw_s, share);
    x.tstep_s = scaled_time(b->tstep_s, share);
    x.stash_bytes = (int64_t)llround((double)b->stash_bytes * share);
    x.param_bytes = (int64_t)llround((double)b->param_bytes * share);
    return x;
}

/* Column ids of the stage CSV. */
enum { C_STAGE, C_TF, C_TB, C_TI, C_TW, C_BYTES, C_STASH, C_WSTASH, C_PARAM, C_N };
static const char *const col_names[C_N] = {"stage", "tf", "tb", "ti", "tw", "bytes", "stash_bytes", "w_stash_bytes", "param_bytes"};

/* Trims spaces in place; returns the trimmed start. */
static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

/* Largest stage-cost file read, and most cells on one of its lines. */
enum { STAGE_CSV_MAX_CELLS = 64 };
#define STAGE_CSV_MAX_BYTES ((size_t)1 << 28)

/* State of one stage-cost CSV being read. */
typedef struct stage_csv {
    const char *path;
    int line, stages, ncol, have_header;
    int col[STAGE_CSV_MAX_CELLS]; /* column id of each cell of the header */
    sim_stage_cost *st;           /* [stages] the overrides read */
    int *row_line;                /* [stages] the line that gave each stage's row, 0 = none yet */
    pl_err *e;
} stage_csv;

/* Splits a line at commas into trimmed cells; returns their count, or -1 after an error. */
static int split_cells(stage_csv *r, char *t, char **cells) {
    int nc = 0;
    for (char *p = t;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (nc == STAGE_CSV_MAX_CELLS) return pl_errf(r->e, PL_EINPUT, "%s:%d: too many columns", r->path, r->line), -1;
        cells[nc++] = trim(p);
        if (!comma) return nc;
        p = comma + 1;
    }
}

/* Reads the header's column names; returns PL_OK or the error. */
static int read_header(stage_csv *r, char **cells, int nc) {
    int seen_stage = 0;
    for (int i = 0; i < nc; i++) {
        r->col[i] = -1;
        for (int k = 0; k < C_N; k++)
            if (strcmp(cells[i], col_names[k]) == 0) r->col[i] = k;
        for (int j = 0; j < i && r->col[i] >= 0; j++)
            if (r->col[j] == r->col[i])
                return pl_errf(r->e, PL_EINPUT, "%s:%d: column '%s' appears twice", r->path, r->line, cells[i]);
        if (r->col[i] < 0) {
            pl_buf known;
            pl_buf_init(&known);
            for (int k = 0; k < C_N; k++) pl_buf_printf(&known, "%s%s", k ? "," : "", col_names[k]);
            int rc = pl_errf(r->e, PL_EINPUT, "%s:%d: unknown column '%s' (known: %s)", r->path, r->line, cells[i],
                             known.data ? known.data : "");
            pl_buf_free(&known);
            return rc;
        }
        seen_stage |= r->col[i] == C_STAGE;
    }
    r->ncol = nc;
    r->have_header = 1;
    return seen_stage ? PL_OK : pl_errf(r->e, PL_EINPUT, "%s:%d: the header needs a 'stage' column", r->path, r->line);
}

/* Returns the byte field of column c of override o, or NULL when c is a time column. */
static int64_t *byte_cell(sim_stage_cost *o, int c) {
    switch (c) {
    case C_BYTES: return &o->bytes;
    case C_STASH: return &o->stash_bytes;
    case C_WSTASH: return &o->w_stash_bytes;
    case C_PARAM: return &o->param_bytes;
    default: return NULL;
    }
}

/* Sets the time field of column c of override o to v (c not a byte column). */
static void set_time_cell(sim_stage_cost *o, int c, double v) {
    switch (c) {
    case C_TF: o->tf_s = v; break;
    case C_TB: o->tb_s = v; break;
    case C_TI: o->ti_s = v; break;
    case C_TW: o->tw_s = v; break;
    default: break;
    }
}

/* Reads one row: its stage number, then each non-empty cell into that stage's override.
 * Returns PL_OK or the error. */
static int read_row(stage_csv *r, char **cells, int nc) {
    if (nc != r->ncol) return pl_errf(r->e, PL_EINPUT, "%s:%d: %d cells, the header has %d", r->path, r->line, nc, r->ncol);
    long q = -1;
    for (int i = 0; i < nc; i++)
        if (r->col[i] == C_STAGE && pl_parse_long(cells[i], 0, r->stages - 1, &q) != 0)
            return pl_errf(r->e, PL_EINPUT, "%s:%d: stage must be a whole number in 0..%d (got '%s')", r->path, r->line,
                           r->stages - 1, cells[i]);
    if (r->row_line[q])
        return pl_errf(r->e, PL_EINPUT, "%s:%d: stage %ld has a row already (line %d)", r->path, r->line, q,
                       r->row_line[q]);
    r->row_line[q] = r->line;
    for (int i = 0; i < nc; i++) {
        if (r->col[i] == C_STAGE || !*cells[i]) continue;
        double v;
        if (pl_parse_double(cells[i], &v) != 0 || v < 0)
            return pl_errf(r->e, PL_EINPUT, "%s:%d: %s must be a number >= 0 (got '%s')", r->path, r->line,
                           col_names[r->col[i]], cells[i]);
        int64_t *bytes = byte_cell(&r->st[q], r->col[i]);
        const char *bad = bytes ? cost_bytes_read(v, bytes) : NULL;
        if (bad)
            return pl_errf(r->e, PL_EINPUT, "%s:%d: %s '%s' %s", r->path, r->line, col_names[r->col[i]], cells[i],
                           bad);
        if (!bytes) set_time_cell(&r->st[q], r->col[i], v);
    }
    return PL_OK;
}

/* Reads every line of text (blank and '#' lines skipped): the header, then the rows. Returns
 * PL_OK or the error. */
static int read_lines(stage_csv *r, char *text) {
    char *save = NULL;
    for (char *ln = text; ln; ln = save) {
        char *nl = strchr(ln, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl) *nl = '\0';
        r->line++;
        char *t = trim(ln);
        if (!*t || *t == '#') continue;
        char *cells[STAGE_CSV_MAX_CELLS];
        int nc = split_cells(r, t, cells);
        if (nc < 0) return r->e->code;
        int rc = r->have_header ? read_row(r, cells, nc) : read_header(r, cells, nc);
        if (rc != PL_OK) return rc;
    }
    if (!r->have_header)
        return pl_errf(r->e, PL_EINPUT, "%s:1: empty file (expected a header line such as stage,tf,tb)", r->path);
    return PL_OK;
}

int sim_basic_load_csv(sim_basic *b, const char *path, int stages, pl_err *e) {
    char *text;
    size_t len;
    int rc = pl_read_file(path, STAGE_CSV_MAX_BYTES, &text, &len, e);
    if (rc != PL_OK) return rc;
    if (pl_text_check(path, text, len, e) != PL_OK) {
        free(text);
        return PL_EINPUT;
    }
    stage_csv r = {.path = path, .stages = stages, .e = e};
    r.st = pl_calloc((size_t)stages, sizeof *r.st);
    r.row_line = pl_calloc((size_t)stages, sizeof *r.row_line);
    if (!r.st || !r.row_line) {
        free(r.st);
        free(r.row_line);
        free(text);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    for (int q = 0; q < stages; q++) r.st[q] = (sim_stage_cost){-1, -1, -1, -1, -1, -1, -1, -1};
    rc = read_lines(&r, text + pl_bom_len(text, len));
    free(text);
    free(r.row_line);
    if (rc != PL_OK) {
        free(r.st);
        return rc;
    }
    free(b->stage);
    b->stage = r.st;
    b->stages = stages;
    return PL_OK;
}
