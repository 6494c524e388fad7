/* calibrate.c: least-squares fits (GSL) of compute efficiency and link alpha/beta from observations. */
#include <ctype.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_fit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_int.h"
#include "partition_int.h"

/* An observations file: a header line of these fields, then one observation a line. */
#define OBS_HEADER "kind,flops,bytes,seconds"
#define OBS_FIELDS 4
/* Largest observations file read, and the first capacity of the list read from it. */
#define OBS_MAX_FILE_BYTES ((size_t)256 << 20)
#define OBS_FIRST_CAP 64
/* The kinds of observation (cost_obs_kind: compute, intra, inter), each fitted on its own. */
#define N_OBS_KINDS 3
/* Largest flops, bytes or seconds an observation may give: the least-squares fit sums squares and
 * products of the values, which overflow a double (1.8e308) past about 1e154. */
#define OBS_MAX_VALUE 1e150
/* What fit_line's messages start with (dropped where they are collected into fit->skipped). */
#define CALIBRATE_PREFIX "calibrate: "

/* Returns the next comma-separated field of *s (trimmed, NUL-terminated in place), or NULL. */
static char *next_field(char **s) {
    if (!*s) return NULL;
    char *f = *s, *comma = strchr(f, ',');
    if (comma) {
        *comma = '\0';
        *s = comma + 1;
    } else {
        *s = NULL;
    }
    while (isspace((unsigned char)*f)) f++;
    size_t n = strlen(f);
    while (n && isspace((unsigned char)f[n - 1])) f[--n] = '\0';
    return f;
}

/* Parses a non-negative number field; empty means 0 when allow_empty. Returns 0, -1 when it is
 * not such a number, or 1 when it is larger than OBS_MAX_VALUE. */
static int nonneg_field(const char *f, int allow_empty, double *out) {
    if (!*f) {
        *out = 0;
        return allow_empty ? 0 : -1;
    }
    if (pl_parse_double(f, out) != 0 || !(*out >= 0)) return -1;
    return *out > OBS_MAX_VALUE ? 1 : 0;
}

/* Reads field f (named name) of line lineno into *out with nonneg_field; returns PL_OK, or
 * PL_EINPUT saying what is wrong (what: the words after "a non-negative number"). */
static int obs_field(const char *f, int allow_empty, const char *name, const char *what, const char *path,
                     int lineno, double *out, pl_err *e) {
    int r = nonneg_field(f, allow_empty, out);
    if (r > 0)
        return pl_errf(e, PL_EINPUT, "%s:%d: %s %s is too large to fit (at most %g: the least-squares sums would "
                       "overflow)", path, lineno, name, f, OBS_MAX_VALUE);
    if (r < 0)
        return pl_errf(e, PL_EINPUT, "%s:%d: %s must be a non-negative number%s (got '%s')", path, lineno, name, what, f);
    return PL_OK;
}

/* Returns 1 when the fields f[nf] are the header OBS_HEADER. */
static int is_header(char *const *f, int nf) {
    return nf == OBS_FIELDS && !strcmp(f[0], "kind") && !strcmp(f[1], "flops") && !strcmp(f[2], "bytes") &&
           !strcmp(f[3], "seconds");
}

/* Reads one observation from the fields f[nf] of line lineno; returns PL_OK and *o, or
 * PL_EINPUT saying which field is wrong. */
static int parse_observation(char *const *f, int nf, const char *path, int lineno, cost_observation *o, pl_err *e) {
    if (nf != OBS_FIELDS)
        return pl_errf(e, PL_EINPUT, "%s:%d: expected 4 fields (kind,flops,bytes,seconds), got %s", path, lineno,
                       nf > 4 ? "more" : nf == 3 ? "3" : nf == 2 ? "2" : "1");
    if (strcmp(f[0], "compute") == 0) o->kind = COST_OBS_COMPUTE;
    else if (strcmp(f[0], "intra") == 0) o->kind = COST_OBS_INTRA;
    else if (strcmp(f[0], "inter") == 0) o->kind = COST_OBS_INTER;
    else return pl_errf(e, PL_EINPUT, "%s:%d: unknown kind '%s' (expected compute, intra or inter)", path, lineno, f[0]);
    int is_comp = o->kind == COST_OBS_COMPUTE;
    if (obs_field(f[1], !is_comp, "flops", is_comp ? " for a compute observation" : "", path, lineno, &o->flops, e) ||
        obs_field(f[2], is_comp, "bytes", is_comp ? "" : " for a transfer observation", path, lineno, &o->bytes, e) ||
        obs_field(f[3], 0, "seconds", "", path, lineno, &o->seconds, e))
        return PL_EINPUT;
    return PL_OK;
}

/* Cuts the next line off *rest (NUL-terminating it in place, without its '\r'); returns it, or
 * NULL at the end. */
static char *next_line(char **rest) {
    char *line = *rest;
    if (!line) return NULL;
    char *nl = strchr(line, '\n');
    if (nl) *nl++ = '\0';
    *rest = nl;
    size_t ll = strlen(line);
    if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
    return line;
}

/* Parses observations text (the header OBS_HEADER, then one observation a line; blank and '#'
 * lines skipped) from path; returns PL_OK and a malloc'd array, or PL_EINPUT naming path:line. */
int cost_observations_parse(const char *text, const char *path, cost_observation **out, size_t *n, pl_err *e) {
    *out = NULL;
    *n = 0;
    if (!path) path = "<observations>";
    if (!text) text = "";
    char *copy = strdup(text + pl_bom_len(text, strlen(text)));
    if (!copy) return pl_errf(e, PL_ENOMEM, "%s: out of memory", path);
    cost_observation *v = NULL;
    size_t len = 0, cap = 0;
    int lineno = 0, last_line = 1, have_header = 0, rc = PL_OK;
    for (char *rest = copy, *line; rc == PL_OK && (line = next_line(&rest)) != NULL;) {
        lineno++;
        const char *t = line;
        while (isspace((unsigned char)*t)) t++;
        if (!*t || *t == '#') continue;
        last_line = lineno;
        char *cur = line, *f[OBS_FIELDS + 1];
        int nf = 0;
        while (nf < OBS_FIELDS + 1 && (f[nf] = next_field(&cur)) != NULL) nf++;
        if (!have_header) {
            have_header = is_header(f, nf);
            if (!have_header) rc = pl_errf(e, PL_EINPUT, "%s:%d: expected the header '" OBS_HEADER "'", path, lineno);
            continue;
        }
        cost_observation o;
        if ((rc = parse_observation(f, nf, path, lineno, &o, e)) != PL_OK) break;
        cost_observation *nv = pl_grow(v, &cap, len, OBS_FIRST_CAP, sizeof *nv);
        if (!nv) {
            rc = pl_errf(e, PL_ENOMEM, "%s:%d: out of memory", path, lineno);
            break;
        }
        v = nv;
        v[len++] = o;
    }
    free(copy);
    if (rc == PL_OK && !have_header) rc = pl_errf(e, PL_EINPUT, "%s:1: empty file, expected the header '" OBS_HEADER "'", path);
    if (rc == PL_OK && len == 0) rc = pl_errf(e, PL_EINPUT, "%s:%d: no observations after the header", path, last_line);
    if (rc != PL_OK) {
        free(v);
        return rc;
    }
    *out = v;
    *n = len;
    return PL_OK;
}

/* Reads and parses the observations file at path (text, at most OBS_MAX_FILE_BYTES); returns
 * PL_OK and a malloc'd array, or the error naming the file. */
int cost_observations_read(const char *path, cost_observation **out, size_t *n, pl_err *e) {
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    *n = 0;
    int rc = pl_read_file(path, OBS_MAX_FILE_BYTES, &text, &len, e);
    if (rc != PL_OK) return rc;
    rc = pl_text_check(path, text, len, e);
    if (rc == PL_OK) rc = cost_observations_parse(text, path, out, n, e);
    free(text);
    return rc;
}

/* One straight-line fit y = c0 + c1 x with a non-negative intercept. */
typedef struct line_fit {
    double c0, c1, r2;
} line_fit;

/* Returns PL_EINPUT saying that the fit of what (sizes xmin to xmax) did not give finite numbers. */
static int overflowed(const char *what, double xmin, double xmax, pl_err *e) {
    return pl_errf(e, PL_EINPUT, "calibrate: %s: the least-squares fit overflowed (sizes %g to %g): the values are "
                   "too large, too small or too far apart to fit in double precision", what, xmin, xmax);
}

/* Fits y = c0 + c1 x by ordinary least squares (gsl_fit_linear); when c0 comes out negative,
 * refits through the origin (gsl_fit_mul) so latencies and launch overheads stay physical.
 * Returns PL_OK, or PL_EINPUT (with what) when there are fewer than 3 points, x does not vary,
 * or the slope is not positive. */
static int fit_line(const double *x, const double *y, size_t n, const char *what, line_fit *f, pl_err *e) {
    if (n < 3) return pl_errf(e, PL_EINPUT, "calibrate: %s needs at least 3 observations (got %zu)", what, n);
    double xmin = x[0], xmax = x[0], ymean = 0;
    for (size_t k = 0; k < n; k++) {
        if (x[k] < xmin) xmin = x[k];
        if (x[k] > xmax) xmax = x[k];
        ymean += y[k];
    }
    ymean /= (double)n;
    if (!(xmax > xmin))
        return pl_errf(e, PL_EINPUT, "calibrate: %s needs observations of at least two different sizes", what);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    double c0, c1, cov00, cov01, cov11, sumsq;
    int st = gsl_fit_linear(x, 1, y, 1, n, &c0, &c1, &cov00, &cov01, &cov11, &sumsq);
    if (st == GSL_SUCCESS && c0 < 0) {
        c0 = 0;
        st = gsl_fit_mul(x, 1, y, 1, n, &c1, &cov11, &sumsq);
    }
    gsl_set_error_handler(old);
    if (st != GSL_SUCCESS) return pl_errf(e, PL_EINPUT, "calibrate: %s: the least-squares fit failed (%s)", what, gsl_strerror(st));
    if (!isfinite(c0) || !isfinite(c1) || !isfinite(sumsq))
        return overflowed(what, xmin, xmax, e);
    if (!(c1 > 0))
        return pl_errf(e, PL_EINPUT, "calibrate: %s: the fitted time per unit is %g, not positive; the observations do not "
                       "grow with size", what, c1);
    double tss = 0;
    for (size_t k = 0; k < n; k++) tss += (y[k] - ymean) * (y[k] - ymean);
    if (!isfinite(tss) || !isfinite(1.0 / c1))
        return overflowed(what, xmin, xmax, e);
    f->c0 = c0;
    f->c1 = c1;
    f->r2 = tss > 0 ? 1.0 - sumsq / tss : 1.0;
    return PL_OK;
}

/* Stores line f fitted to the observations of kind in fit: compute gives the efficiency (of
 * peak_flops) and the launch overhead, a transfer kind its link's latency and bandwidth. */
static void store_fit(cost_fit *fit, int kind, const line_fit *f, double peak_flops) {
    if (kind == COST_OBS_COMPUTE) {
        fit->have_compute = 1;
        fit->efficiency = 1.0 / (peak_flops * f->c1);
        fit->launch_s = f->c0;
        fit->compute_r2 = f->r2;
    } else if (kind == COST_OBS_INTRA) {
        fit->have_intra = 1;
        fit->intra_latency_s = f->c0;
        fit->intra_bw_Bps = 1.0 / f->c1;
        fit->intra_r2 = f->r2;
    } else {
        fit->have_inter = 1;
        fit->inter_latency_s = f->c0;
        fit->inter_bw_Bps = 1.0 / f->c1;
        fit->inter_r2 = f->r2;
    }
}

/* Fits each kind of observation with a line (fit_line) into fit; lenient skips a kind that
 * cannot be fitted, saying why in fit->skipped. Returns PL_OK when some kind was fitted, else
 * PL_EINPUT saying why not. */
int cost_calibrate(const cost_observation *obs, size_t n, double peak_flops, int lenient, cost_fit *fit, pl_err *e) {
    memset(fit, 0, sizeof *fit);
    fit->peak_flops = peak_flops;
    double *x = pl_calloc(n ? n : 1, sizeof(double)), *y = pl_calloc(n ? n : 1, sizeof(double));
    if (!x || !y) {
        free(x);
        free(y);
        return pl_errf(e, PL_ENOMEM, "calibrate: out of memory");
    }
    static const char *const names[N_OBS_KINDS] = {"compute", "intra-server transfer", "inter-server transfer"};
    size_t counts[N_OBS_KINDS] = {0, 0, 0};
    int rc = PL_OK, fitted = 0;
    for (int kind = 0; kind < N_OBS_KINDS && rc == PL_OK; kind++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            if ((int)obs[k].kind != kind) continue;
            x[m] = kind == COST_OBS_COMPUTE ? obs[k].flops : obs[k].bytes;
            y[m] = obs[k].seconds;
            m++;
        }
        counts[kind] = m;
        if (m == 0) continue;
        line_fit f = {0, 0, 0};
        rc = fit_line(x, y, m, names[kind], &f, e);
        if (rc == PL_OK && kind == COST_OBS_COMPUTE && !(peak_flops > 0))
            rc = pl_errf(e, PL_EINPUT, "calibrate: compute observations need the device's peak FLOP/s to give an "
                         "efficiency (set device.flops_<precision> in the hardware file or with --set)");
        else if (rc == PL_OK && kind == COST_OBS_COMPUTE && !(isfinite(peak_flops * f.c1) && peak_flops * f.c1 > 0))
            rc = pl_errf(e, PL_EINPUT, "calibrate: compute: the fitted time per flop %g times the peak %g FLOP/s is "
                         "out of the range of a double; the efficiency cannot be computed", f.c1, peak_flops);
        if (rc == PL_EINPUT && lenient) {
            size_t used = strlen(fit->skipped);
            size_t prefix = sizeof CALIBRATE_PREFIX - 1;
            snprintf(fit->skipped + used, sizeof fit->skipped - used, "%s%s", used ? "; " : "",
                     e->msg + (strncmp(e->msg, CALIBRATE_PREFIX, prefix) == 0 ? prefix : 0));
            rc = PL_OK;
            continue;
        }
        if (rc != PL_OK) break;
        fitted = 1;
        store_fit(fit, kind, &f, peak_flops);
    }
    free(x);
    free(y);
    fit->n_compute = counts[COST_OBS_COMPUTE];
    fit->n_intra = counts[COST_OBS_INTRA];
    fit->n_inter = counts[COST_OBS_INTER];
    if (rc == PL_OK && !fitted)
        rc = fit->skipped[0] ? pl_errf(e, PL_EINPUT, "calibrate: nothing could be fitted: %s", fit->skipped)
                             : pl_errf(e, PL_EINPUT, "calibrate: no observations to fit");
    return rc;
}
