/* profile.c: per-block F, I and W times on the calling thread (median over repetitions), the
 * measurements `pipelab profile` turns into a cost-model profile.
 *
 * The timed work has the working set of a real run, not of one block in a loop: the L blocks of
 * the model are distinct (their own weights and gradient accumulators, as the ranks of a run
 * hold them together in the shared caches; at most PROFILE_MAX_BYTES of them, far more than any
 * last-level cache, so that wide models still fit), and microbatches go through them in rounds of
 * PROFILE_SLOTS, each with its own stashed activations: all forwards of a round (block 0 to
 * L-1), then the input gradients (block L-1 to 0) and the weight gradients of each microbatch,
 * so every backward reads activations stashed several microbatch-passes earlier, as in a
 * pipeline. A first round is untimed (page faults, BLAS warm-up). Every sample is one block,
 * one microbatch; the medians over all blocks and repetitions are kept. Timing one block on hot
 * buffers instead under-predicted the executor's per-block times: on the 2-core development VM
 * (32 MB L3), width 256 and 8 blocks, it gave F 0.45, I 0.45, W 0.29 ms where a traced run's
 * actions took 0.68-0.87, 0.51-0.74 and 0.45-0.70 ms per block, and this profile 0.64-0.83,
 * 0.59-0.76, 0.43-0.65 (docs/validate_cpu.md). */
#include "exec_int.h"

#include <stdlib.h>
#include <string.h>

/* Microbatches in flight in one profiling round: what each block keeps stashed at once. */
#define PROFILE_SLOTS 4
/* Most bytes of distinct block weights and gradients profiled (fewer blocks when they are wide). */
#define PROFILE_MAX_BYTES ((size_t)256 << 20)

/* Orders doubles ascending for qsort. */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Returns the median of v[n] (sorts v). */
static double med(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int exec_profile_layers(const exec_config *cfg, int reps, exec_layer_profile *p, pl_err *e) {
    if (reps < 1) return pl_errf(e, PL_EINPUT, "profile repetitions must be at least 1");
    exec_dims d;
    exec_dims_of(cfg, &d);
    if (d.h < 1 || d.b < 1) return pl_errf(e, PL_EINPUT, "profile needs hidden and microbatch size >= 1");
    exec_blas_init();
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, bf = (size_t)d.b * d.f;
    size_t fit = PROFILE_MAX_BYTES / (2 * nf * sizeof(float));
    const int L = (int)(cfg->layers < 1 ? 1 : (size_t)cfg->layers <= fit ? (size_t)cfg->layers : fit > 0 ? fit : 1);
    const int S = PROFILE_SLOTS;
    const int rounds = (reps + S - 1) / S; /* timed rounds of S microbatches: >= reps samples per block */
    /* per block: w [nf], g [nf]; per slot and block: x [b,h], hd [b,f], a [b,f]; per slot: the
     * output y [b,h]; gradients at the L+1 block boundaries gb [b,h]; scratch [b,f] */
    size_t per_slot = (size_t)L * (bh + 2 * bf) + bh;
    size_t floats = 2 * (size_t)L * nf + (size_t)S * per_slot + (size_t)(L + 1) * bh + bf;
    size_t ns = (size_t)rounds * S * L; /* samples of each kind */
    float *mem = pl_calloc(floats, sizeof(float));
    double *t = pl_calloc(3 * ns, sizeof(double));
    if (!mem || !t) {
        free(mem);
        free(t);
        return pl_errf(e, PL_ENOMEM, "out of memory profiling %d blocks of width %d", L, d.h);
    }
    float *w = mem, *g = w + (size_t)L * nf, *slots = g + (size_t)L * nf;
    float *gb = slots + (size_t)S * per_slot, *scr = gb + (size_t)(L + 1) * bh;
#define X(s, k) (slots + (size_t)(s) * per_slot + (size_t)(k) * (bh + 2 * bf))
#define HD(s, k) (X(s, k) + bh)
#define A(s, k) (HD(s, k) + bf)
#define Y(s) (slots + (size_t)(s) * per_slot + (size_t)L * (bh + 2 * bf))
    for (int k = 0; k < L; k++) exec_block_init(&d, cfg->init_seed, k, w + (size_t)k * nf);
    for (int s = 0; s < S; s++) exec_fill_normal(cfg->data_seed, (uint64_t)s, X(s, 0), bh);
    exec_fill_normal(cfg->data_seed, (uint64_t)S, gb + (size_t)L * bh, bh); /* the loss gradient */
    size_t nt = 0;
    for (int r = -1; r < rounds; r++) { /* r = -1 warms the pages, caches and the BLAS */
        for (int s = 0; s < S; s++)
            for (int k = 0; k < L; k++) {
                float *y = k + 1 < L ? X(s, k + 1) : Y(s);
                double t0 = pl_now_s();
                exec_block_forward(&d, w + (size_t)k * nf, X(s, k), HD(s, k), A(s, k), y);
                double t1 = pl_now_s();
                if (r >= 0) t[nt + (size_t)s * L + k] = t1 - t0;
            }
        for (int s = 0; s < S; s++) {
            /* the input gradients from the last block to the first, then the weight gradients */
            for (int k = L - 1; k >= 0; k--) {
                double t0 = pl_now_s();
                exec_block_backward_i(&d, w + (size_t)k * nf, HD(s, k), gb + (size_t)(k + 1) * bh,
                                      gb + (size_t)k * bh, scr);
                double t1 = pl_now_s();
                if (r >= 0) t[ns + nt + (size_t)s * L + k] = t1 - t0;
            }
            for (int k = L - 1; k >= 0; k--) {
                double t0 = pl_now_s();
                exec_block_backward_w(&d, X(s, k), A(s, k), HD(s, k), gb + (size_t)(k + 1) * bh, g + (size_t)k * nf);
                double t1 = pl_now_s();
                if (r >= 0) t[2 * ns + nt + (size_t)s * L + k] = t1 - t0;
            }
        }
        if (r >= 0) nt += (size_t)S * L;
        /* keep the inputs and the loss gradient bounded: the next round starts from fresh data */
        for (int s = 0; s < S; s++) exec_fill_normal(cfg->data_seed, (uint64_t)s, X(s, 0), bh);
        exec_fill_normal(cfg->data_seed, (uint64_t)S, gb + (size_t)L * bh, bh);
    }
#undef X
#undef HD
#undef A
#undef Y
    memset(p, 0, sizeof *p);
    p->f_s = med(t, ns);
    p->i_s = med(t + ns, ns);
    p->w_s = med(t + 2 * ns, ns);
    p->param_bytes = nf * sizeof(float);
    p->act_out_bytes = bh * sizeof(float);
    p->stash_bytes = (bh + 2 * bf) * sizeof(float);
    p->w_stash_bytes = (2 * bh + 2 * bf) * sizeof(float);
    free(mem);
    free(t);
    return PL_OK;
}
