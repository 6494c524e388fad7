/* profile_windows.c: the pass-length term's factors (docs/validate_cpu.md, "Interruptions and the
 * length of a pass").
 *
 * A profile's time of a kind is the median over rounds of each round's mean: the time of a
 * stretch of work a fraction of a round long. A run's iteration time is the median over passes,
 * stretches of a pass's length. The machine interrupts the work (the kernel, the hypervisor,
 * memory traffic of others) now and then, for milliseconds at a time: a median over short
 * stretches leaves most interruptions out, a median over long ones takes in their share. So the
 * factor that turns the profile's times into a pass's depends on how long the pass is.
 *
 * Each worker's timed samples, in the order it ran them, are a series of units (one kind's
 * samples of one round): a unit's actual time, and its clean time, the samples' count times the
 * profile's time of the kind. For a window of clean length T, a factor is the actual over the
 * clean time of the units from one unit on until T is covered (the last one in part); the factor
 * at T is the median over all start units whose window fits in the series, or the whole series'
 * ratio when none does. Windows are 2^j ms long, j = 0 .. EXEC_WINDOWS - 1. */
#include "exec_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double exec_window_length_s(int j) { return EXEC_WINDOW_FIRST_S * ldexp(1.0, j); }

/* Returns the factor over the window of clean length T of the n units (actual a, clean c),
 * ratios holding at least n doubles. */
static double window_median(const double *a, const double *c, size_t n, double T, double *ratios) {
    size_t nw = 0;
    double all_a = 0, all_c = 0;
    for (size_t i = 0; i < n; i++) {
        all_a += a[i];
        all_c += c[i];
    }
    for (size_t i = 0; i < n; i++) {
        double clean = 0, act = 0;
        int full = 0;
        for (size_t j = i; j < n; j++) {
            if (clean + c[j] >= T) {
                act += a[j] * (T - clean) / c[j];
                clean = T;
                full = 1;
                break;
            }
            clean += c[j];
            act += a[j];
        }
        if (!full) break; /* a later start covers less */
        ratios[nw++] = act / clean;
    }
    if (nw == 0) return all_c > 0 ? all_a / all_c : 0;
    return exec_median(ratios, nw);
}

void exec_window_factors(const double *a, const double *c, size_t n, double *g) {
    memset(g, 0, EXEC_WINDOWS * sizeof *g);
    size_t kept = 0;
    double *buf = n ? pl_calloc(3 * n, sizeof *buf) : NULL;
    if (!buf) return; /* nothing timed, or out of memory: the term stays off */
    double *ka = buf, *kc = buf + n, *ratios = buf + 2 * n;
    for (size_t i = 0; i < n; i++)
        if (c[i] > 0 && a[i] >= 0 && isfinite(a[i]) && isfinite(c[i])) {
            ka[kept] = a[i];
            kc[kept++] = c[i];
        }
    for (int j = 0; kept && j < EXEC_WINDOWS; j++) g[j] = window_median(ka, kc, kept, exec_window_length_s(j), ratios);
    free(buf);
}

double exec_window_factor(const double *g, double pass_s) {
    if (!(pass_s > 0)) return 1;
    double x = log2(pass_s / EXEC_WINDOW_FIRST_S);
    if (x <= 0) return g[0];
    if (x >= EXEC_WINDOWS - 1) return g[EXEC_WINDOWS - 1];
    int j = (int)x;
    double f = x - j;
    return g[j] * (1 - f) + g[j + 1] * f;
}

double exec_window_factor_mean(const double *g, int workers, double pass_s) {
    if (workers <= 0) return 1;
    double sum = 0;
    for (int w = 0; w < workers; w++) sum += exec_window_factor(g + (size_t)EXEC_WINDOWS * (size_t)w, pass_s);
    return sum / workers;
}

int exec_window_line(const exec_layer_profile *p, int worker, pl_buf *out) {
    for (int j = 0; j < EXEC_WINDOWS; j++)
        if (!(p->window[j] > 0)) return 0; /* not measured */
    pl_buf_printf(out, "# " EXEC_PROFILE_META " windows worker=%d first_ms=%g factors=", worker, EXEC_WINDOW_FIRST_S * 1e3);
    for (int j = 0; j < EXEC_WINDOWS; j++) pl_buf_printf(out, "%s%.6f", j ? "," : "", p->window[j]);
    pl_buf_puts(out, "\n");
    return 1;
}

int exec_rounds_line(const exec_layer_profile *p, int worker, pl_buf *out) {
    if (p->n_round_f <= 0) return 0; /* not measured */
    const int n = p->n_round_f < EXEC_STATE_ROUNDS ? p->n_round_f : EXEC_STATE_ROUNDS;
    int has_b = 0; /* the backwards' rounds, where measured */
    for (int j = 0; j < n; j++) has_b = has_b || p->round_b[j] > 0;
    pl_buf_printf(out, "# " EXEC_PROFILE_META " rounds worker=%d", worker);
    for (int list = 0; list < 1 + has_b; list++)
        for (int j = 0; j < n; j++)
            pl_buf_printf(out, "%s%.6g", j ? "," : list ? " b=" : " f=", list ? p->round_b[j] : p->round_f[j]);
    pl_buf_puts(out, "\n");
    return 1;
}
