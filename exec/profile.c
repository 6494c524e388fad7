/* profile.c: per-block F, I and W times on the calling thread (median over repetitions), the
 * measurements `pipelab profile` turns into a cost-model profile. */
#include "exec_int.h"

#include <stdlib.h>
#include <string.h>

/* Orders doubles ascending for qsort. */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Returns the median of v[n] (sorts v). */
static double med(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int exec_profile_layers(const exec_config *cfg, int reps, exec_layer_profile *p, pl_err *e) {
    if (reps < 1) return pl_errf(e, PL_EINPUT, "profile repetitions must be at least 1");
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (d.h < 1 || d.b < 1) return pl_errf(e, PL_EINPUT, "profile needs hidden and microbatch size >= 1");
    exec_blas_init();
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, bf = (size_t)d.b * d.f;
    /* w [nf], g [nf], x [b,h], y [b,h], gy [b,h], gx [b,h], hd [b,f], a [b,f], scratch [b,f] */
    float *mem = pl_calloc(2 * nf + 4 * bh + 3 * bf, sizeof(float));
    double *t = pl_calloc(3 * (size_t)reps, sizeof(double));
    if (!mem || !t) { free(mem); free(t); return pl_errf(e, PL_ENOMEM, "out of memory profiling"); }
    float *w = mem, *g = w + nf, *x = g + nf, *y = x + bh, *gy = y + bh, *gx = gy + bh;
    float *hd = gx + bh, *a = hd + bf, *scr = a + bf;
    exec_block_init(&d, cfg->init_seed, 0, w);
    exec_fill_normal(cfg->data_seed, 0, x, bh);
    exec_fill_normal(cfg->data_seed, 1, gy, bh);
    for (int r = -1; r < reps; r++) { /* r = -1 warms the caches and the BLAS */
        double t0 = pl_now_s();
        exec_block_forward(&d, w, x, hd, a, y);
        double t1 = pl_now_s();
        exec_block_backward_i(&d, w, hd, gy, gx, scr);
        double t2 = pl_now_s();
        exec_block_backward_w(&d, x, a, hd, gy, g);
        double t3 = pl_now_s();
        if (r >= 0) { t[r] = t1 - t0; t[reps + r] = t2 - t1; t[2 * reps + r] = t3 - t2; }
    }
    memset(p, 0, sizeof *p);
    p->f_s = med(t, reps);
    p->i_s = med(t + reps, reps);
    p->w_s = med(t + 2 * reps, reps);
    p->param_bytes = nf * sizeof(float);
    p->act_out_bytes = bh * sizeof(float);
    p->stash_bytes = (bh + 2 * bf) * sizeof(float);
    p->w_stash_bytes = (2 * bh + 2 * bf) * sizeof(float);
    free(mem);
    free(t);
    return PL_OK;
}
