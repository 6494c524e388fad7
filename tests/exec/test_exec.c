/* test_exec.c: the executor against finite differences, a sequential reference of the same
 * training (every synchronous schedule, PipeDream stashing, 2BW), exact memory closed forms,
 * and fault handling (injected errors, wrong-size messages, memory budgets, bad schedules). */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec_drive.h"
#include "exec_int.h"
#include "exec_test.h"
#include "pl_test.h"
#include "platform/platform.h"
#include "pl_sched.h"

/* ---------------------------------------------------------------- helpers */

/* Returns the cores available to this process. */
static int exec_platform_cores_for_tests(void) {
    static int cpus[4096];
    return exec_platform_cores(cpus, 4096);
}

/* Block width of the next small_cfg (0 = 32); a width whose block is not a multiple of 16 floats
 * exercises the padded weight-version slots. */
static int g_hidden = 0;
/* The block of the next small_cfg: the transformer gets width 16, 2 heads and microbatches of 2
 * sequences of 4 tokens (8 rows, as small as the dense model's 4 rows and as fast). */
static exec_block_kind g_block = EXEC_BLOCK_MLP;

/* Returns a small model configuration for the tests: h 32 (16 for the transformer), f 2h, L
 * layers, b 4, 3 timed passes, no warm-up. */
static exec_config small_cfg(int layers) {
    exec_config c;
    exec_config_default(&c);
    c.hidden = g_hidden ? g_hidden : g_block == EXEC_BLOCK_GPT ? 16 : 32;
    c.ffn = 2 * c.hidden;
    c.layers = layers;
    c.microbatch_size = 4;
    c.dataset_microbatches = 16;
    c.lr = 0.1;
    c.momentum = 0.0;
    c.warmup_passes = 0;
    c.timed_passes = 3;
    c.oversubscribe = 1;
    c.return_weights = 1;
    c.timeout_s = 20;
    if (g_block == EXEC_BLOCK_GPT) {
        c.block = EXEC_BLOCK_GPT;
        c.heads = 2;
        c.seq = 4;
        c.microbatch_size = 2;
    }
    return c;
}

/* exec_test.h: small_cfg of the block kind `block` (the other test files'). */
exec_config exec_test_small_cfg(int layers, exec_block_kind block) {
    exec_block_kind keep = g_block;
    g_block = block;
    exec_config c = small_cfg(layers);
    g_block = keep;
    return c;
}

/* Returns the lowered schedule of a generator (NULL reported through CUnit). */
static sched *lowered(const char *kind, int p, int m, int v, int iters, sched_recompute rc) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, v, iters, rc};
    sched *s = sched_generate(kind, &o, &e);
    if (!s) {
        fprintf(stderr, "generate %s: %s\n", kind, e.msg);
        CU_FAIL("generate");
        return NULL;
    }
    s->recompute = rc;
    sched *l = sched_lower(s, &e);
    sched_free(s);
    if (!l) fprintf(stderr, "lower %s: %s\n", kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

/* exec_test.h. */
double max_rel_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if (d > m) m = d;
    }
    return m;
}

/* Runs s with c; returns the rc and fills r (caller frees) and e. */
static int run(const sched *s, const exec_config *c, exec_result *r, pl_err *e) {
    pl_err_clear(e);
    int rc = exec_run(s, c, r, e);
    if (rc != PL_OK) fprintf(stderr, "exec_run %s: %s\n", s->kind, e->msg);
    return rc;
}

/* Tolerance of weights against the sequential reference (relative to 1 + |w|). The pipelined
 * run accumulates each stage's gradient over the m microbatches in the schedule's backward
 * order (and B vs I+W order), the reference in microbatch order: fp32 addition is not
 * associative, so each step's averaged gradient may differ by about m * 2^-24 * sum |g_j|
 * (~1e-6 for m = 4, |g| < 1), times lr = 0.1, over 3 steps, amplified a little by the later
 * forward passes: well under 1e-5. (With today's generators every stage runs its backward
 * passes in microbatch order, the order the reference sums in, and the difference measured is
 * exactly 0; the tolerance is for schedules that reorder them.) A wrong microbatch, version or missing update moves the
 * weights by lr * |g| ~ 1e-3 or more, two orders of magnitude above. */
#define SYNC_TOL 1e-5

/* Checks the lowered schedule s (freed here), run with c, against the sequential reference:
 * weights and loss curve; label names it in messages. */
static void check_sched_against_reference(sched *s, exec_config c, double tol, const char *label) {
    const char *kind = label;
    int p = s->ranks, m = s->microbatches, rc = s->recompute;
    exec_result r;
    pl_err e;
    if (run(s, &c, &r, &e) != PL_OK) { CU_FAIL("exec_run"); sched_free(s); return; }
    size_t n = exec_param_count(&c);
    float *w = calloc(n, sizeof(float));
    int it = s->iterations > 0 ? s->iterations : 1;
    double *loss = calloc((size_t)c.timed_passes * it, sizeof(double));
    int rrc = exec_reference(s, &c, c.timed_passes, w, n, loss, &e);
    if (rrc != PL_OK) fprintf(stderr, "reference: %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rrc, PL_OK);
    CU_ASSERT_EQUAL(r.n_weights, n);
    double d = max_rel_diff(r.final_weights, w, n);
    /* the run really trained: the weights moved from the initial ones */
    float *w0 = calloc(n, sizeof(float));
    exec_dims dm;
    exec_dims_of(&c, &dm);
    for (int l = 0; l < c.layers; l++) exec_block_init(&dm, c.init_seed, l, w0 + (size_t)l * exec_block_floats(&dm));
    double moved = max_rel_diff(r.final_weights, w0, n);
    if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "%s p=%d m=%d recompute=%d: max rel weight diff %g\n", kind, p, m, rc, d);
    if (d > tol) fprintf(stderr, "%s p=%d m=%d recompute=%d: weights differ by %g (tol %g)\n", kind, p, m, rc, d, tol);
    CU_ASSERT(d <= tol);
    CU_ASSERT(moved > 100 * tol);
    CU_ASSERT_EQUAL(r.n_iters, c.timed_passes * it);
    for (int i = 0; i < r.n_iters; i++) {
        double ld = fabs(r.loss[i] - loss[i]) / (1e-12 + fabs(loss[i]));
        if (ld > 1e-4) fprintf(stderr, "%s iteration %d: loss %g vs reference %g\n", kind, i, r.loss[i], loss[i]);
        CU_ASSERT(ld <= 1e-4);
    }
    free(w0);
    free(w);
    free(loss);
    exec_result_free(&r);
    sched_free(s);
}

/* Checks one generated schedule against the sequential reference: weights and loss curve. */
static void check_against_reference_mom(const char *kind, int p, int m, int v, int iters, sched_recompute rc,
                                        int layers, double tol, double momentum, const int *split) {
    sched *s = lowered(kind, p, m, v, iters, rc);
    if (!s) return;
    exec_config c = small_cfg(layers);
    c.momentum = momentum;
    c.stage_blocks = split;
    check_sched_against_reference(s, c, tol, kind);
}

/* The same without momentum and with the even split. */
static void check_against_reference(const char *kind, int p, int m, int v, int iters, sched_recompute rc, int layers,
                                    double tol) {
    check_against_reference_mom(kind, p, m, v, iters, rc, layers, tol, 0.0, NULL);
}

/* ---------------------------------------------------------------- the math */

/* fp64 forward of one block and the MSE loss against t, for finite differences. */
static double block_loss64(const exec_dims *d, const double *p, const double *x, const double *t) {
    int h = d->h, f = d->f, b = d->b;
    const double *w1 = p, *b1 = w1 + (size_t)h * f, *w2 = b1 + f, *b2 = w2 + (size_t)h * f;
    double loss = 0;
    double *a = malloc((size_t)f * sizeof(double));
    for (int r = 0; r < b; r++) {
        for (int i = 0; i < f; i++) {
            double z = b1[i];
            for (int k = 0; k < h; k++) z += w1[(size_t)i * h + k] * x[(size_t)r * h + k];
            a[i] = 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
        }
        for (int o = 0; o < h; o++) {
            double y = x[(size_t)r * h + o] + b2[o];
            for (int i = 0; i < f; i++) y += w2[(size_t)o * f + i] * a[i];
            double df = y - t[(size_t)r * h + o];
            loss += df * df;
        }
    }
    free(a);
    return loss / ((double)b * h);
}

/* The weights' generator: a fill gives what exec_normal_at gives element by element (an odd
 * count included), and its numbers are N(0, std^2) with the two outputs of each Box-Muller
 * transform uncorrelated. Over n = 200001 draws the mean's standard error is std/447, the
 * variance's about 0.32%, a correlation's 1/316: bounds of 5 standard errors, which a pair that
 * repeats one output (correlation 1), a lost factor of std or a biased uniform break at once. */
static void test_normal_fill(void) {
    const size_t n = 200001;
    const double sd = 0.5;
    float *x = malloc(n * sizeof(float));
    exec_fill_normal_std(3, 9, sd, x, n);
    int same = 1;
    for (size_t i = 0; i < n; i += 997) same &= x[i] == exec_normal_at(3, 9, i, sd);
    CU_ASSERT(same);
    CU_ASSERT_EQUAL(x[n - 1], exec_normal_at(3, 9, n - 1, sd));
    double m = 0, v = 0, c = 0;
    for (size_t i = 0; i < n; i++) m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    v /= (double)(n - 1);
    for (size_t i = 0; i + 1 < n; i += 2) c += (x[i] - m) * (x[i + 1] - m);
    c /= (double)(n / 2) * v;
    CU_ASSERT(fabs(m) < 5 * sd / sqrt((double)n));
    CU_ASSERT(fabs(v / (sd * sd) - 1) < 5 * sqrt(2.0 / (double)n));
    CU_ASSERT(fabs(c) < 5 / sqrt((double)(n / 2)));
    free(x);
}

/* A fill split over threads (exec_fill_team_set) gives the values of one thread, every element:
 * an odd count over teams that split it evenly and not (a part starting on an odd element would
 * pair the wrong uniforms, a lost or doubled part would leave zeros or repeat values). */
static void test_normal_fill_team(void) {
    const size_t n = ((size_t)1 << 17) + 3;
    float *one = malloc(n * sizeof(float)), *x = malloc(n * sizeof(float));
    CU_ASSERT_FATAL(one && x);
    exec_fill_normal_std(5, 2, 0.25, one, n);
    const int teams[] = {2, 3, 7, 16};
    for (size_t k = 0; k < sizeof teams / sizeof *teams; k++) {
        memset(x, 0, n * sizeof(float));
        int old = exec_fill_team_set(teams[k]);
        exec_fill_normal_std(5, 2, 0.25, x, n);
        CU_ASSERT_EQUAL(exec_fill_team_set(old), teams[k]);
        CU_ASSERT(memcmp(x, one, n * sizeof(float)) == 0);
    }
    CU_ASSERT_EQUAL(exec_fill_team_set(1), 1); /* the default */
    free(one);
    free(x);
}

/* The data set of a run that reads its first 5 microbatches: those entries equal the whole set's
 * (inputs and targets, bit for bit), the others stay zero; and the whole set's targets equal
 * the target network run on each microbatch alone, one thread, block by block (the set's blocks
 * are filled over threads and its chunks of microbatches run on several: a chunk skipped, run
 * twice or with another block's weights differs by O(1) on O(1) targets; rows are independent,
 * so only rounding may differ: 1e-5 of the largest target). Width 128 makes the blocks' matrices long enough to be
 * filled over threads. */
static void test_data_build(void) {
    exec_config c = small_cfg(3);
    c.hidden = 128;
    c.ffn = 512;
    c.dataset_microbatches = 70; /* 256-row chunks of 64 microbatches: a part chunk too */
    pl_err e;
    pl_err_clear(&e);
    exec_data all, part;
    CU_ASSERT_FATAL(exec_data_build(&c, 0, &all, &e) == PL_OK);
    CU_ASSERT_FATAL(exec_data_build(&c, 5, &part, &e) == PL_OK);
    exec_dims d;
    exec_dims_of(&c, &d);
    size_t bh = (size_t)d.b * d.h, nb = exec_block_floats(&d), sf = exec_block_state_floats(&d);
    CU_ASSERT_EQUAL(all.n, 70);
    CU_ASSERT_EQUAL(part.n, 64); /* one whole chunk */
    CU_ASSERT_EQUAL(part.d, 70);
    CU_ASSERT(memcmp(part.x, all.x, 64 * bh * sizeof(float)) == 0);
    CU_ASSERT(memcmp(part.t, all.t, 64 * bh * sizeof(float)) == 0);
    int zero = 1;
    for (size_t i = 64 * bh; i < 70 * bh; i++) zero &= part.x[i] == 0 && part.t[i] == 0;
    CU_ASSERT(zero);
    float *p = malloc(3 * nb * sizeof(float)), *y = malloc(2 * bh * sizeof(float)), *st = malloc(sf * sizeof(float));
    CU_ASSERT_FATAL(p && y && st);
    for (int l = 0; l < 3; l++) exec_block_init(&d, c.target_seed, l, p + (size_t)l * nb);
    double worst = 0, big = 0;
    for (int k = 0; k < 70; k++) {
        memcpy(y, all.x + (size_t)k * bh, bh * sizeof(float));
        for (int l = 0; l < 3; l++) {
            exec_block_fwd(&d, p + (size_t)l * nb, y, st, y + bh);
            memcpy(y, y + bh, bh * sizeof(float));
        }
        for (size_t i = 0; i < bh; i++) {
            double r = fabs(y[i] - all.t[(size_t)k * bh + i]);
            if (r > worst) worst = r;
            if (fabs(y[i]) > big) big = fabs(y[i]);
        }
    }
    CU_ASSERT(big > 0.5 && worst < 1e-5 * big);
    free(p);
    free(y);
    free(st);
    exec_data_free(&all);
    exec_data_free(&part);
}

/* Gradient check: the fp32 split backward (I then W) against central differences of an fp64
 * forward (step 1e-5: truncation ~1e-10, rounding ~1e-11, so the fp64 side is exact to ~1e-9).
 * The fp32 gradients carry relative rounding of ~1e-6 (sums of <= 64 terms), so 2e-3 relative
 * (plus 1e-5 absolute for tiny entries) is a loose but meaningful bound: a wrong transpose,
 * GELU derivative or missing residual gives errors of order 1. */
static void test_gradcheck(void) {
    exec_dims d = {.h = 8, .f = 16, .b = 3, .layers = 1};
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, bf = (size_t)d.b * d.f;
    float *p = calloc(nf, sizeof(float)), *g = calloc(nf, sizeof(float));
    float *x = calloc(bh, sizeof(float)), *t = calloc(bh, sizeof(float)), *y = calloc(bh, sizeof(float));
    float *hd = calloc(bf, sizeof(float)), *a = calloc(bf, sizeof(float)), *scr = calloc(bf, sizeof(float));
    float *gx = calloc(bh, sizeof(float));
    exec_block_init(&d, 7, 0, p);
    exec_fill_normal(11, 0, x, bh);
    exec_fill_normal(11, 1, t, bh);
    exec_blas_init();
    exec_block_forward(&d, p, x, hd, a, y);
    double l32 = exec_mse_grad(&d, y, t);
    exec_block_backward_i(&d, p, hd, y, gx, scr);
    exec_block_backward_w(&d, x, a, hd, y, g);
    double *p64 = calloc(nf, sizeof(double)), *x64 = calloc(bh, sizeof(double)), *t64 = calloc(bh, sizeof(double));
    for (size_t i = 0; i < nf; i++) p64[i] = p[i];
    for (size_t i = 0; i < bh; i++) { x64[i] = x[i]; t64[i] = t[i]; }
    CU_ASSERT_DOUBLE_EQUAL(l32, block_loss64(&d, p64, x64, t64), 1e-5);
    const double eps = 1e-5;
    int bad = 0;
    for (size_t i = 0; i < nf; i++) {
        double keep = p64[i];
        p64[i] = keep + eps;
        double lp = block_loss64(&d, p64, x64, t64);
        p64[i] = keep - eps;
        double lm = block_loss64(&d, p64, x64, t64);
        p64[i] = keep;
        double num = (lp - lm) / (2 * eps);
        if (fabs(num - g[i]) > 1e-5 + 2e-3 * fabs(num)) bad++;
    }
    for (size_t i = 0; i < bh; i++) {
        double keep = x64[i];
        x64[i] = keep + eps;
        double lp = block_loss64(&d, p64, x64, t64);
        x64[i] = keep - eps;
        double lm = block_loss64(&d, p64, x64, t64);
        x64[i] = keep;
        double num = (lp - lm) / (2 * eps);
        if (fabs(num - gx[i]) > 1e-5 + 2e-3 * fabs(num)) bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(p); free(g); free(x); free(t); free(y); free(hd); free(a); free(scr); free(gx);
    free(p64); free(x64); free(t64);
}

/* Returns a copy of compute-only s where every B is replaced by I then W. */
static sched *split_b(const sched *s) {
    pl_err e;
    sched *o = sched_new(s->ranks, s->stages, s->microbatches, SCHED_PLACE_EXPLICIT, s->stage_rank, &e);
    memcpy(o->kind, s->kind, sizeof o->kind);
    o->iterations = s->iterations;
    o->chunks = s->chunks;
    o->weights = s->weights;
    o->recompute = s->recompute;
    for (int r = 0; r < s->ranks; r++)
        for (size_t k = 0; k < s->rank[r].n; k++) {
            sched_action a = s->rank[r].acts[k];
            if (a.kind == SCHED_B) {
                sched_push(o, r, sched_act(SCHED_I, a.stage, a.mb));
                sched_push(o, r, sched_act(SCHED_W, a.stage, a.mb));
            } else {
                sched_push(o, r, a);
            }
        }
    return o;
}

/* B is exactly I then W: 1f1b with B and with every B split gives bit-identical weights. */
static void test_i_plus_w_equals_b(void) {
    pl_err e;
    sched_gen_opts o = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate("1f1b", &o, &e);
    sched *si = split_b(s);
    sched *l1 = sched_lower(s, &e), *l2 = sched_lower(si, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l2);
    exec_config c = small_cfg(4);
    exec_result r1, r2;
    CU_ASSERT_EQUAL_FATAL(run(l1, &c, &r1, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(run(l2, &c, &r2, &e), PL_OK);
    CU_ASSERT_EQUAL(memcmp(r1.final_weights, r2.final_weights, r1.n_weights * sizeof(float)), 0);
    exec_result_free(&r1);
    exec_result_free(&r2);
    sched_free(s); sched_free(si); sched_free(l1); sched_free(l2);
}

/* Full recomputation gives bit-identical weights and losses (same kernels, same inputs), and
 * less stash memory. */
static void test_recompute_identical(void) {
    const char *kinds[] = {"1f1b", "zb-h1"};
    for (int k = 0; k < 2; k++) {
        sched *a = lowered(kinds[k], 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
        sched *b = lowered(kinds[k], 2, 4, 0, 0, SCHED_RECOMPUTE_FULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(a);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        exec_config c = small_cfg(4);
        exec_result r1, r2;
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(run(a, &c, &r1, &e), PL_OK);
        CU_ASSERT_EQUAL_FATAL(run(b, &c, &r2, &e), PL_OK);
        CU_ASSERT_EQUAL(memcmp(r1.final_weights, r2.final_weights, r1.n_weights * sizeof(float)), 0);
        for (int i = 0; i < r1.n_iters; i++) CU_ASSERT_EQUAL(r1.loss[i], r2.loss[i]);
        /* rank 0 keeps two microbatches: recomputation keeps their inputs only; the last rank
         * keeps one, whose activations exist during its backward either way */
        CU_ASSERT(r2.rank[0].peak.stash_bytes < r1.rank[0].peak.stash_bytes);
        CU_ASSERT(r2.rank[1].peak.stash_bytes <= r1.rank[1].peak.stash_bytes);
        exec_result_free(&r1);
        exec_result_free(&r2);
        sched_free(a);
        sched_free(b);
    }
}

/* A run whose arenas ask for huge pages (the default; width 384: each rank's arena is over
 * EXEC_HUGE_MIN_BYTES) trains exactly as one on small pages, and says which it asked for. */
static void test_huge_pages_identical(void) {
    sched *a = lowered("1f1b", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    g_hidden = 384;
    exec_config c = small_cfg(4);
    g_hidden = 0;
    exec_result r1, r2;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(run(a, &c, &r1, &e), PL_OK);
    c.small_pages = 1;
    CU_ASSERT_EQUAL_FATAL(run(a, &c, &r2, &e), PL_OK);
    CU_ASSERT(r1.rank[0].peak.total_bytes >= EXEC_HUGE_MIN_BYTES);
    CU_ASSERT_EQUAL(r1.huge_pages, 1);
    CU_ASSERT_EQUAL(r2.huge_pages, 0);
    CU_ASSERT_EQUAL_FATAL(r1.n_weights, r2.n_weights);
    CU_ASSERT_EQUAL(memcmp(r1.final_weights, r2.final_weights, r1.n_weights * sizeof(float)), 0);
    for (int i = 0; i < r1.n_iters; i++) CU_ASSERT_EQUAL(r1.loss[i], r2.loss[i]);
    exec_result_free(&r1);
    exec_result_free(&r2);
    sched_free(a);
}

/* ---------------------------------------------------------------- schedules vs the reference */

static void sync_schedule(const char *kind, int p, int m, int v, int layers) {
    check_against_reference(kind, p, m, v, 0, SCHED_RECOMPUTE_NONE, layers, SYNC_TOL);
    check_against_reference(kind, p, m, v, 0, SCHED_RECOMPUTE_FULL, layers, SYNC_TOL);
}

static void test_gpipe(void) { sync_schedule("gpipe", 2, 4, 0, 4); sync_schedule("gpipe", 4, 4, 0, 4); }
static void test_1f1b(void) { sync_schedule("1f1b", 2, 4, 0, 4); sync_schedule("1f1b", 4, 8, 0, 5); }
static void test_interleaved(void) { sync_schedule("interleaved", 2, 4, 2, 4); sync_schedule("interleaved", 4, 8, 2, 8); }
static void test_zb_h1(void) { sync_schedule("zb-h1", 2, 4, 0, 4); sync_schedule("zb-h1", 4, 8, 0, 4); }
static void test_zb_h2(void) { sync_schedule("zb-h2", 2, 4, 0, 4); sync_schedule("zb-h2", 4, 8, 0, 4); }
static void test_zbv(void) { sync_schedule("zbv", 2, 4, 0, 4); sync_schedule("zbv", 4, 8, 0, 8); }
static void test_dualpipev(void) { sync_schedule("dualpipev", 2, 4, 0, 4); }

/* The transformer block through every schedule kind, with and without full recomputation,
 * against the same sequential reference (the arithmetic order is the dense block's case: exact
 * in practice, SYNC_TOL allowed); full recomputation gives bit-identical weights. */
static void test_gpt_every_kind(void) {
    static const struct { const char *kind; int p, m, v, iters; } k[] = {
        {"gpipe", 2, 4, 0, 0}, {"1f1b", 2, 4, 0, 0}, {"interleaved", 2, 4, 2, 0}, {"looped-bfs", 2, 4, 2, 0},
        {"zb-h1", 2, 4, 0, 0}, {"zb-h2", 2, 4, 0, 0}, {"zbv", 2, 4, 0, 0}, {"dualpipev", 2, 4, 0, 0},
        {"pipedream", 2, 4, 0, 2}, {"2bw", 2, 4, 0, 3}};
    g_block = EXEC_BLOCK_GPT;
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        for (int rc = SCHED_RECOMPUTE_NONE; rc <= SCHED_RECOMPUTE_FULL; rc++)
            check_against_reference(k[i].kind, k[i].p, k[i].m, k[i].v, k[i].iters, (sched_recompute)rc,
                                    k[i].v ? 4 : 2 * k[i].p, SYNC_TOL);
    test_recompute_identical();
    g_block = EXEC_BLOCK_MLP;
}

/* PyTorch's own CSV files train like the sequential reference. A compute_comms file has no
 * STEP (PyTorch steps its optimizer after the schedule): reading it puts one per stage back,
 * without which the run would not train at all. */
static void test_torch_files(void) {
    const char *names[] = {"pytorch_zb1p_2rank_2stagep_comms.csv", "pytorch_zb1p_2rank_2stagep_compute.csv",
                           "torchtitan_interleaved1f1b_8ranks_16mb_comms.csv",
                           "pytorch_dualpipev_4rank_10mb.csv"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char *path = pl_test_path(PIPELAB_TORCH_DIR, names[k]);
        pl_err e;
        pl_err_clear(&e);
        sched *f = sched_load(path, SCHED_LETTERS_CURRENT, &e);
        free(path);
        if (!f) fprintf(stderr, "load %s: %s\n", names[k], e.msg);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(sched_validate(f, &e), PL_OK);
        sched *s = sched_lower(f, &e);
        sched_free(f);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        int steps = 0;
        for (int r = 0; r < s->ranks; r++)
            for (size_t i = 0; i < s->rank[r].n; i++) steps += s->rank[r].acts[i].kind == SCHED_STEP;
        CU_ASSERT_EQUAL(steps, s->stages); /* one per stage and pass */
        exec_config c = small_cfg(s->stages);
        c.timed_passes = 2;
        check_sched_against_reference(s, c, SYNC_TOL, names[k]);
    }
}

/* PipeDream (weight stashing, an update per microbatch) and 2BW against the sequential
 * reference of the same semantics. With one microbatch per update there is no reassociation
 * (stash); 2BW averages m gradients like flush, hence the same tolerance. */
static void test_pipedream(void) {
    check_against_reference("pipedream", 2, 4, 0, 2, SCHED_RECOMPUTE_NONE, 4, SYNC_TOL);
    check_against_reference("pipedream", 3, 3, 0, 2, SCHED_RECOMPUTE_FULL, 3, SYNC_TOL);
}
/* Weight versions live in slots padded to 16 floats: with hidden 10 (ffn 20: 430 floats per
 * block) the final weights must still be read from the newest version's slot. pipedream and 2bw
 * end on a version other than slot 0. */
static void test_versions_padded_slots(void) {
    g_hidden = 10;
    check_against_reference("pipedream", 2, 4, 0, 2, SCHED_RECOMPUTE_NONE, 4, SYNC_TOL);
    check_against_reference("2bw", 2, 4, 0, 3, SCHED_RECOMPUTE_NONE, 4, SYNC_TOL);
    check_against_reference("1f1b", 2, 4, 0, 1, SCHED_RECOMPUTE_NONE, 4, SYNC_TOL);
    g_hidden = 0;
}

static void test_2bw(void) {
    check_against_reference("2bw", 2, 4, 0, 3, SCHED_RECOMPUTE_NONE, 4, SYNC_TOL);
    check_against_reference("2bw", 3, 3, 0, 3, SCHED_RECOMPUTE_FULL, 3, SYNC_TOL);
}

/* Momentum (optimizer state per stage) and an uneven explicit split of the blocks. */
static void test_momentum_and_split(void) {
    static const int split[2] = {3, 1};
    check_against_reference_mom("1f1b", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE, 4, SYNC_TOL, 0.9, split);
    check_against_reference_mom("zb-h2", 2, 4, 0, 0, SCHED_RECOMPUTE_FULL, 4, SYNC_TOL, 0.9, split);
    check_against_reference_mom("pipedream", 2, 4, 0, 2, SCHED_RECOMPUTE_NONE, 4, SYNC_TOL, 0.9, split);
    check_against_reference_mom("2bw", 2, 4, 0, 3, SCHED_RECOMPUTE_FULL, 4, SYNC_TOL, 0.9, NULL);
}

/* The async references really differ from flush training (the test would notice a wrong
 * policy): pipedream's final weights are not those of flush 1f1b on the same data. */
static void test_stash_differs_from_flush(void) {
    sched *a = lowered("pipedream", 2, 4, 0, 1, SCHED_RECOMPUTE_NONE);
    sched *b = lowered("1f1b", 2, 4, 0, 1, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(4);
    size_t n = exec_param_count(&c);
    float *wa = calloc(n, sizeof(float)), *wb = calloc(n, sizeof(float));
    double la[8], lb[8];
    pl_err e;
    CU_ASSERT_EQUAL(exec_reference(a, &c, 2, wa, n, la, &e), PL_OK);
    CU_ASSERT_EQUAL(exec_reference(b, &c, 2, wb, n, lb, &e), PL_OK);
    CU_ASSERT(max_rel_diff(wa, wb, n) > 1e-3);
    free(wa); free(wb);
    sched_free(a); sched_free(b);
}

/* Training works: the loss of the last iteration is well below the first. */
static void test_loss_falls(void) {
    sched *s = lowered("1f1b", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(4);
    c.timed_passes = 30;
    c.warmup_passes = 2;
    c.momentum = 0.9;
    c.lr = 0.05;
    c.record_ops = 1;
    exec_result r;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(run(s, &c, &r, &e), PL_OK);
    CU_ASSERT(r.loss[r.n_iters - 1] < 0.5 * r.loss[0]);
    CU_ASSERT(r.pass_median_s > 0);
    CU_ASSERT(r.throughput_samples_s > 0);
    CU_ASSERT_EQUAL(r.n_iters, 32);
    for (int q = 0; q < 2; q++) {
        const exec_rank_result *rr = &r.rank[q];
        CU_ASSERT(rr->bubble_fraction >= 0 && rr->bubble_fraction < 1);
        CU_ASSERT(rr->busy_s > 0 && rr->busy_s <= r.pass_max_s);
        /* every action of every timed pass, in order, inside its pass, on one clock */
        CU_ASSERT_EQUAL(rr->n_ops, (size_t)c.timed_passes * s->rank[q].n);
        int ordered = 1;
        for (size_t k = 0; k < rr->n_ops; k++) {
            const exec_op *op = &rr->ops[k];
            if (op->start_s < 0 || op->end_s < op->start_s) ordered = 0;
            if (k && op->start_s < rr->ops[k - 1].end_s) ordered = 0;
            if (op->act.kind != s->rank[q].acts[k % s->rank[q].n].kind) ordered = 0;
            if (op->pass != (int)(k / s->rank[q].n)) ordered = 0;
        }
        CU_ASSERT(ordered);
        /* busy is the compute and STEP rows of the median pass(es), as the simulator counts a
         * bubble (a STEP counted idle read the measured bubble too large) */
        double busy = 0, step = 0;
        for (size_t k = 0; k < rr->n_ops; k++) {
            const exec_op *op = &rr->ops[k];
            if (op->pass != r.median_pass[0] && op->pass != r.median_pass[1]) continue;
            double d = (op->end_s - op->start_s) * (r.median_pass[0] == r.median_pass[1] ? 1 : 0.5);
            if (sched_kind_is_busy((sched_kind)op->act.kind)) busy += d;
            if (op->act.kind == SCHED_STEP) step += d;
        }
        CU_ASSERT(step > 0);
        CU_ASSERT_DOUBLE_EQUAL(rr->busy_s, busy, 1e-9 * (1 + busy));
    }
    CU_ASSERT(r.pass_min_s <= r.pass_median_s && r.pass_median_s <= r.pass_max_s);
    exec_result_free(&r);
    sched_free(s);
}

/* ---------------------------------------------------------------- memory */

/* 1F1B flush, p = 4 ranks, m = 8, one block per stage (L = 4), no momentum, h 32, f 64, b 4.
 * What a rank holds, in bytes:
 *   weights, one version (flush)      P = 4 (2hf + f + h)
 *   gradient accumulator              P
 *   scratch: dA [b,f] + y [b,h]       S = 4 (bf + bh)
 *   per microbatch between its F and its backward: the block input, H and gelu(H),
 *                                     A = 4 (bh + 2bf)   (the cost model's MLP stash per block)
 *   a received stage input, before its F          X = 4 bh
 *   a microbatch's output gradient, until its W   G = 4 bh
 *   a send staging buffer, until its SEND         C = 4 bh
 * 1F1B keeps p - r microbatches between F and B on rank r. Rank 0 peaks at its last warm-up
 * forward (p A, its output waiting in C). A rank r > 0 peaks inside a backward: p - r
 * microbatches in flight, the next input already received (the lowering places RECV_F when the
 * data is produced, which is before this backward), the output gradient being consumed and the
 * input gradient being written to C:
 *   peak(0) = 2P + S + p A + C
 *   peak(r) = 2P + S + (p - r) A + X + G + C     (r > 0)
 * checked exactly, class by class. */
static void test_memory_closed_form(void) {
    int p = 4, m = 8;
    sched *s = lowered("1f1b", p, m, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(4);
    c.timed_passes = 1;
    exec_result r;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(run(s, &c, &r, &e), PL_OK);
    size_t h = 32, f = 64, b = 4;
    size_t P = 4 * (2 * h * f + f + h), S = 4 * (b * f + b * h), A = 4 * (b * h + 2 * b * f);
    size_t X = 4 * b * h, G = 4 * b * h, C = 4 * b * h;
    for (int q = 0; q < p; q++) {
        const exec_mem *pk = &r.rank[q].peak;
        size_t stash = (size_t)(p - q) * A + (q > 0 ? X : 0), bwd = q > 0 ? G : 0;
        CU_ASSERT_EQUAL(pk->weights_bytes, P);
        CU_ASSERT_EQUAL(pk->grads_bytes, P);
        CU_ASSERT_EQUAL(pk->optim_bytes, 0);
        CU_ASSERT_EQUAL(pk->scratch_bytes, S);
        CU_ASSERT_EQUAL(pk->stash_bytes, stash);
        CU_ASSERT_EQUAL(pk->bwd_bytes, bwd);
        CU_ASSERT_EQUAL(pk->comm_bytes, C);
        CU_ASSERT_EQUAL(pk->total_bytes, 2 * P + S + stash + bwd + C);
        /* each pool was sized to its own peak by the dry walk; the pools peak together except
         * on rank 0, whose output-gradient slot (G) is live only after its forward peak */
        CU_ASSERT_EQUAL(r.rank[q].allocated_bytes, pk->total_bytes + (q == 0 ? G : 0));
    }
    exec_result_free(&r);
    sched_free(s);
}

/* PipeDream (stash), 2 ranks, m = 4, 2 iterations, 2 blocks per stage: PipeDream's p - r weight
 * versions on rank r. Rank 0 at its STEP after B(j): microbatch j+1 is in flight on the version
 * its forward used, and the update writes a new version (the newest one is in use, so not in
 * place): 2 versions, the older one freed by the next backward. Rank 1 (last stage) runs F
 * then B then STEP: nothing in flight at the STEP, so it updates in place: 1 version. The
 * momentum buffer adds one P per rank. */
static void test_memory_stash_versions(void) {
    sched *s = lowered("pipedream", 2, 4, 0, 2, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(4);
    c.timed_passes = 1;
    c.momentum = 0.5;
    exec_result r;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(run(s, &c, &r, &e), PL_OK);
    size_t P = 2 * 4 * (2 * 32 * 64 + 64 + 32);
    CU_ASSERT_EQUAL(r.rank[0].peak.optim_bytes, P);
    CU_ASSERT_EQUAL(r.rank[1].peak.weights_bytes, P);
    CU_ASSERT_EQUAL(r.rank[0].peak.weights_bytes, 2 * P);
    CU_ASSERT_EQUAL(r.rank[1].peak.optim_bytes, P);
    exec_result_free(&r);
    sched_free(s);
}

/* The executor's peak memory predicted before a run (exec_mem_walk, the dry walk of its
 * bookkeeping) is the run's accounted peak, byte for byte and class by class, on every rank and
 * over several passes: both blocks, recomputation on and off, flush, stash and 2bw weights,
 * interleaved and V placements. It exceeds the cost model's part (model_peak_bytes) by the
 * executor's own buffers. */
static void test_memory_walk_is_measured(void) {
    static const struct { const char *kind; int m, v, iters, gpt, rc, mom; } k[] = {
        {"1f1b", 4, 0, 0, 0, 0, 0}, {"zb-h1", 4, 0, 0, 1, 1, 0}, {"pipedream", 4, 0, 2, 0, 1, 1},
        {"2bw", 4, 0, 3, 1, 0, 0},  {"interleaved", 4, 2, 0, 0, 1, 0}, {"dualpipev", 4, 0, 0, 1, 0, 1},
        {"gpipe", 3, 0, 0, 1, 1, 0}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        sched *s = lowered(k[i].kind, 2, k[i].m, k[i].v, k[i].iters, k[i].rc ? SCHED_RECOMPUTE_FULL : SCHED_RECOMPUTE_NONE);
        exec_config c = exec_test_small_cfg(k[i].v || !strcmp(k[i].kind, "dualpipev") ? 8 : 4,
                                             k[i].gpt ? EXEC_BLOCK_GPT : EXEC_BLOCK_MLP);
        c.momentum = k[i].mom ? 0.5 : 0.0;
        exec_mem pred[2];
        exec_result r;
        pl_err e;
        pl_err_clear(&e);
        CU_ASSERT_EQUAL_FATAL(exec_mem_walk(s, &c, pred, &e), PL_OK);
        CU_ASSERT_EQUAL_FATAL(run(s, &c, &r, &e), PL_OK);
        for (int q = 0; q < 2; q++) {
            const exec_mem *a = &pred[q], *b = &r.rank[q].peak;
            CU_ASSERT_EQUAL(a->total_bytes, b->total_bytes);
            CU_ASSERT_EQUAL(a->weights_bytes, b->weights_bytes);
            CU_ASSERT_EQUAL(a->stash_bytes, b->stash_bytes);
            CU_ASSERT_EQUAL(a->bwd_bytes, b->bwd_bytes);
            CU_ASSERT_EQUAL(a->comm_bytes, b->comm_bytes);
            CU_ASSERT_EQUAL(a->scratch_bytes, b->scratch_bytes);
            CU_ASSERT(a->total_bytes > r.rank[q].model_peak_bytes);
            if (a->total_bytes != b->total_bytes)
                fprintf(stderr, "%s rank %d: walk %zu, run %zu\n", k[i].kind, q, a->total_bytes, b->total_bytes);
        }
        exec_result_free(&r);
        sched_free(s);
    }
}

/* ---------------------------------------------------------------- faults */

/* An injected error on one rank stops the whole run quickly with a message naming the rank
 * and the action; the error code comes back. */
static void test_fault_error(void) {
    sched *s = lowered("1f1b", 4, 8, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(4);
    c.fault.kind = EXEC_FAULT_ERROR;
    c.fault.rank = 2;
    c.fault.action = 5;
    c.fault.pass = 1;
    exec_result r;
    pl_err e;
    pl_err_clear(&e);
    double t0 = pl_now_s();
    int rc = exec_run(s, &c, &r, &e);
    double dt = pl_now_s() - t0;
    CU_ASSERT_EQUAL(rc, PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "rank 2, action 6") != NULL);
    CU_ASSERT(strstr(e.msg, "injected fault") != NULL);
    CU_ASSERT(dt < 5.0);
    sched_free(s);
}

/* A message of the wrong size is caught by the receiver, which names itself and the action. */
static void test_fault_bad_size(void) {
    sched *s = lowered("gpipe", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(4);
    c.fault.kind = EXEC_FAULT_BAD_SIZE;
    c.fault.rank = 0;
    c.fault.action = 0;
    c.fault.pass = 0;
    exec_result r;
    pl_err e;
    pl_err_clear(&e);
    double t0 = pl_now_s();
    int rc = exec_run(s, &c, &r, &e);
    CU_ASSERT(pl_now_s() - t0 < 5.0);
    CU_ASSERT_EQUAL(rc, PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "rank 1, action") != NULL);
    CU_ASSERT(strstr(e.msg, "RECV_F0") != NULL);
    CU_ASSERT(strstr(e.msg, "has 508 bytes, expected 512") != NULL);
    sched_free(s);
}

/* A memory budget below what a rank needs fails with PL_ENOMEM naming the rank and action. */
static void test_fault_budget(void) {
    sched *s = lowered("gpipe", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(4);
    c.mem_budget_bytes = 40000; /* fixed part 4 * (2P + S) = 35072 fits; the stashes do not */
    exec_result r;
    pl_err e;
    pl_err_clear(&e);
    int rc = exec_run(s, &c, &r, &e);
    CU_ASSERT_EQUAL(rc, PL_ENOMEM);
    CU_ASSERT(strstr(e.msg, "rank ") != NULL && strstr(e.msg, "memory budget") != NULL);
    sched_free(s);
}

/* The blocks a profiling thread holds: a rank's whole share while its weights and gradients are
 * within the cap, the larger of 256 MiB and a thread's share of twice the last-level cache the
 * system reports (a host whose cache holds a stage's wide blocks must stream as many as the rank
 * does); fewer, at least one, beyond it. */
static void test_profile_blocks_cap(void) {
    exec_config c;
    exec_config_default(&c);
    c.hidden = 1024;
    c.ffn = 4096;
    c.layers = 8;
    c.microbatch_size = 8;
    exec_dims d;
    exec_dims_of(&c, &d);
    double bytes = 2.0 * (double)exec_block_floats(&d) * sizeof(float); /* weights and gradients */
    long long llc = exec_platform_llc_bytes();
    CU_ASSERT(llc >= 0);
    double cap = (double)llc > (double)(256 << 20) ? (double)llc : (double)(256 << 20); /* 2 LLC / 2 threads */
    int fit = (int)(cap / bytes), want = fit < 4 ? (fit > 0 ? fit : 1) : 4;
    CU_ASSERT_EQUAL(exec_prof_blocks(&c, 2), want); /* 4 of 8 on each of 2 threads, at most the cap */
    CU_ASSERT_EQUAL(exec_prof_blocks(&c, 8), 1);    /* the share of 8 threads: 1 */
    c.layers = 64; /* a share of 32 blocks: what the cap allows, each of 2 threads half of 2 LLC */
    CU_ASSERT_EQUAL(exec_prof_blocks(&c, 2), fit < 32 ? (fit > 0 ? fit : 1) : 32);
    c.layers = 8;
    c.hidden = 128;
    c.ffn = 512;
    CU_ASSERT_EQUAL(exec_prof_blocks(&c, 2), 4); /* narrow: the whole share */
    CU_ASSERT_EQUAL(exec_prof_blocks(&c, 1), 8);
    c.hidden = 16384;
    c.ffn = 65536;
    CU_ASSERT_EQUAL(exec_prof_blocks(&c, 1), 1); /* 8 GiB a block: one, whatever the cap */
}

/* A schedule whose receive never gets its message is refused with a precise message, and a
 * compute-only schedule is refused (it must be lowered first). */
static void test_bad_schedule(void) {
    sched *s = lowered("gpipe", 2, 2, 0, 0, SCHED_RECOMPUTE_NONE);
    /* drop rank 0's first SEND_F */
    sched_rank *rk = &s->rank[0];
    for (size_t k = 0; k < rk->n; k++)
        if (rk->acts[k].kind == SCHED_SEND_F) {
            memmove(&rk->acts[k], &rk->acts[k + 1], (rk->n - k - 1) * sizeof *rk->acts);
            rk->n--;
            break;
        }
    exec_config c = small_cfg(4);
    exec_result r;
    pl_err e;
    pl_err_clear(&e);
    int rc = exec_run(s, &c, &r, &e);
    CU_ASSERT_EQUAL(rc, PL_EINPUT);
    CU_ASSERT(strlen(e.msg) > 0);
    sched_free(s);
    pl_err_clear(&e);
    sched_gen_opts o = {2, 2, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *raw = sched_generate("gpipe", &o, &e);
    CU_ASSERT_EQUAL(exec_run(raw, &c, &r, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "lowered") != NULL);
    sched_free(raw);
}

/* Too few blocks for the stages, and more ranks than cores without oversubscription. */
static void test_config_errors(void) {
    sched *s = lowered("gpipe", 4, 2, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(3);
    exec_result r;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_run(s, &c, &r, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "3 blocks cannot fill 4 stages") != NULL);
    sched_free(s);
    /* one more rank than cores, without oversubscription: refused before anything runs */
    int cores = exec_platform_cores_for_tests();
    sched *big = lowered("gpipe", cores + 1, 1, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config cb = small_cfg(cores + 1);
    cb.oversubscribe = 0;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_run(big, &cb, &r, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "give --oversubscribe") != NULL);
    sched_free(big);
}

/* The in-process transport: a receive that nobody can serve (the only other rank finished)
 * fails at once naming what it waits for; one whose sender merely never sends fails at the
 * timeout; a message of the wrong size is refused; an abort wakes a waiter with its reason. */
static void test_transport(void) {
    pl_err e;
    float buf[8] = {0};
    exec_msg_key k = {EXEC_MSG_ACT, 1, 3};
    exec_transport *t = exec_threads_transport_new(2, 2, sizeof buf, 0.2, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t[0].rank(&t[0]), 0);
    CU_ASSERT_EQUAL(t[1].size(&t[1]), 2);
    CU_ASSERT_EQUAL(t[0].send(&t[0], 1, k, buf, sizeof buf, &e), PL_OK);
    CU_ASSERT_EQUAL(t[1].recv(&t[1], 0, k, buf, sizeof buf - 4, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "has 32 bytes, expected 28") != NULL);
    double t0 = pl_now_s();
    CU_ASSERT_EQUAL(t[1].recv(&t[1], 0, k, buf, sizeof buf, &e), PL_EINTERNAL);
    CU_ASSERT(strstr(e.msg, "timed out after 0.2 s: rank 1 waits for activations of stage 1 microbatch 3 from rank 0") != NULL);
    CU_ASSERT(pl_now_s() - t0 < 2.0);
    exec_threads_transport_free(t, 2);

    t = exec_threads_transport_new(2, 2, sizeof buf, 30, &e);
    t[0].finished(&t[0]);
    t0 = pl_now_s();
    CU_ASSERT_EQUAL(t[1].recv(&t[1], 0, k, buf, sizeof buf, &e), PL_EINTERNAL);
    CU_ASSERT(strstr(e.msg, "cannot make progress") != NULL);
    CU_ASSERT(pl_now_s() - t0 < 1.0);
    pl_err why;
    CU_ASSERT(exec_threads_transport_why(t, &why));
    exec_threads_transport_free(t, 2);
}

/* More ranks than cores with oversubscription allowed: the run works and says so once. */
static void test_oversubscribe_warning(void) {
    int cores = exec_platform_cores_for_tests();
    if (cores > 8) { /* keep the test small on big machines */
        pl_test_skip("more than 8 cores: its cores + 1 ranks would make a large run");
        return;
    }
    sched *s = lowered("gpipe", cores + 1, 2, 0, 0, SCHED_RECOMPUTE_NONE);
    exec_config c = small_cfg(cores + 1);
    c.timed_passes = 1;
    exec_result r;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(run(s, &c, &r, &e), PL_OK);
    CU_ASSERT(strstr(r.warning, "oversubscribed") != NULL);
    exec_result_free(&r);
    sched_free(s);
}

/* The profiler returns positive medians and the sizes of one block. */
static void test_profile(void) {
    exec_config c = small_cfg(1);
    exec_layer_profile p;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(exec_profile_layers(&c, 5, &p, &e), PL_OK);
    CU_ASSERT(p.f_s > 0 && p.i_s > 0 && p.w_s > 0);
    CU_ASSERT(p.i0_s > 0 && p.i0_s < p.i_s); /* the I of a first block: one GEMM and a copy fewer */
    CU_ASSERT_EQUAL(p.param_bytes, 4 * (2 * 32 * 64 + 64 + 32));
    CU_ASSERT_EQUAL(p.act_out_bytes, 4 * 4 * 32);
    CU_ASSERT_EQUAL(p.stash_bytes, 4 * (4 * 32 + 2 * 4 * 64));
}

/* exec_lines_alloc's buffers start on a cache line and are zeroed, whatever their size, and
 * exec_line_round pads to the next whole line; the profile lays its buffers out with them (a
 * width whose rows are not whole lines, hidden 10, still profiles: its slots are padded). One of
 * EXEC_HUGE_MIN_BYTES or more starts on a huge page (2 MiB) unless small_pages, and every float
 * of it can be written (its padding to whole huge pages is inside the allocation). */
static void test_lines(void) {
    const size_t big = EXEC_HUGE_MIN_BYTES / sizeof(float);
    const size_t sizes[] = {0, 1, 15, 16, 17, 1000, 4099, big - 1, big, big + 17, 3 * big + 1};
    for (int small = 0; small <= 1; small++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i], r = exec_line_round(n);
            CU_ASSERT(r >= n && r < n + EXEC_LINE_FLOATS && r % EXEC_LINE_FLOATS == 0);
            float *p = exec_lines_alloc(n, small);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            CU_ASSERT_EQUAL((uintptr_t)p % EXEC_LINE_BYTES, 0);
            if (!small && r * sizeof(float) >= EXEC_HUGE_MIN_BYTES) CU_ASSERT_EQUAL((uintptr_t)p % EXEC_HUGE_BYTES, 0);
            int zero = 1;
            for (size_t j = 0; j < n; j++) zero &= p[j] == 0.0f;
            CU_ASSERT(zero);
            for (size_t j = 0; j < n; j++) p[j] = 1.0f;
            free(p);
        }
    g_hidden = 10;
    exec_config c = small_cfg(1);
    g_hidden = 0;
    exec_layer_profile q;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(exec_profile_layers(&c, 3, &q, &e), PL_OK);
    CU_ASSERT(q.f_s > 0 && q.i_s > 0 && q.w_s > 0 && isfinite(q.w_s));
}

/* The host probe: one worker's both-at-once time is its alone time; with two, each is a forward
 * of the default dense block, so between what 10 TFLOP/s and 1 MFLOP/s would take (a probe that
 * timed nothing falls out); no worker is refused. */
/* One side of the hand-off profile on a thread (test_p2p_side). */
#define P2P_TEST_SWEEP 4096
typedef struct p2p_arg {
    exec_transport *t;
    int me, one_way, rc;
    const size_t *bytes;
    double *rt;
    pl_err e;
    float sweep[P2P_TEST_SWEEP]; /* what the side streams through between its hand-offs */
    float *big;                  /* instead, where not NULL: big_n floats */
    size_t big_n;
} p2p_arg;

static void *p2p_thread(void *v) {
    p2p_arg *a = v;
    void *buf = calloc(2, a->bytes[EXEC_P2P_SIZES - 1]);
    exec_p2p_sweep sw = {a->big ? a->big : a->sweep, a->big ? a->big_n : P2P_TEST_SWEEP};
    a->rc = buf ? exec_p2p_side(&a->t[a->me], a->me, a->bytes, 9, a->one_way, buf, &sw, a->rt, &a->e) : PL_ENOMEM;
    free(buf);
    return NULL;
}

/* Asserts that exec_p2p_fit of t [EXEC_P2P_SIZES 9] over `ways` gives 2 us + bytes / 1 GB/s. */
static void p2p_fit_is(const size_t *bytes, const double *t, double ways) {
    double lat = 0, bps = 0;
    pl_err e;
    CU_ASSERT_EQUAL(exec_p2p_fit(bytes, t, 9, ways, &lat, &bps, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(lat, 2e-6, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(bps / 1e9, 1, 1e-6);
}

/* The hand-off profile (exec_p2p_side, exec_p2p_sweep_floats, exec_p2p_fit, exec_p2p_fit_all): the
 * sweeps each side makes, counted in what they add; with one clock, each
 * timed round's one-way time travels in the messages' stamps (a positive time under a second: a
 * stamp lost or read before its message landed is a clock reading of the past or the whole
 * clock); every send call is timed, and the posts after the spin in one-way rounds only (none
 * else); the fit of times a + bytes / B exact for one way, and of their doubles as round trips,
 * gives a and B; the fit of all three series gives each part its own, the post's only one way. */
static void test_p2p_side(void) {
    const size_t bytes[EXEC_P2P_SIZES] = {1024, 4096, 16384};
    for (int one_way = 0; one_way <= 1; one_way++) {
        pl_err e;
        exec_transport *t = exec_threads_transport_new(2, 2, bytes[EXEC_P2P_SIZES - 1], 30, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        double rt[EXEC_P2P_SERIES * EXEC_P2P_SIZES * 9];
        for (int i = 0; i < EXEC_P2P_SERIES * EXEC_P2P_SIZES * 9; i++) rt[i] = -1;
        p2p_arg a[2] = {{t, 0, one_way, 0, bytes, rt, {0}, {0}, NULL, 0}, {t, 1, one_way, 0, bytes, NULL, {0}, {0}, NULL, 0}};
        pthread_t th[2];
        for (int r = 0; r < 2; r++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, p2p_thread, &a[r]), 0);
        for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
        CU_ASSERT(a[0].rc == PL_OK && a[1].rc == PL_OK);
        for (int i = 0; i < EXEC_P2P_SIZES * 9; i++) {
            double trip = rt[EXEC_P2P_TRIP * EXEC_P2P_SIZES * 9 + i]; /* one way: negative where its receiver came late */
            CU_ASSERT(one_way ? fabs(trip) < 1 && (trip > 0 || signbit(trip)) : trip > 0 && trip < 1);
            CU_ASSERT(rt[EXEC_P2P_SEND * EXEC_P2P_SIZES * 9 + i] > 0 && rt[EXEC_P2P_SEND * EXEC_P2P_SIZES * 9 + i] < 1);
            double post = rt[EXEC_P2P_POST * EXEC_P2P_SIZES * 9 + i];
            CU_ASSERT(one_way ? post > 0 && post < 1 : post == 0);
        }
        /* one way, each side streams through its sweep before each timed hand-off: rank 0 before
         * its send and while it waits (2 a round, 3 sizes x 9), rank 1 after its gradient's send
         * but the last of each size (3 x 8); round trips sweep nothing */
        for (int r = 0; r < 2; r++) {
            float want = one_way ? (float)(r == 0 ? 2 * EXEC_P2P_SIZES * 9 : EXEC_P2P_SIZES * 8) : 0;
            int same = 1;
            for (int i = 0; i < P2P_TEST_SWEEP; i++) same &= a[r].sweep[i] == want;
            CU_ASSERT(same);
        }
        exec_threads_transport_free(t, 2);
    }
    /* the sweep of a rank: the weights and gradients of ceil(L / 2) blocks */
    exec_config c = small_cfg(1);
    exec_dims d;
    c.layers = 5;
    exec_dims_of(&c, &d);
    CU_ASSERT_EQUAL(exec_p2p_sweep_floats(&c), 2 * 3 * exec_block_floats(&d));
    double t1[EXEC_P2P_SIZES * 9], t2[EXEC_P2P_SIZES * 9];
    for (int k = 0; k < EXEC_P2P_SIZES; k++)
        for (int j = 0; j < 9; j++) {
            t1[k * 9 + j] = 2e-6 + (double)bytes[k] / 1e9 + (j == 4 ? 0 : (j < 4 ? -1e-6 : 1e-3)); /* the median exact */
            t2[k * 9 + j] = 2 * t1[k * 9 + j];
        }
    pl_err e;
    p2p_fit_is(bytes, t1, 1);
    p2p_fit_is(bytes, t2, 2);
    /* rounds whose receiver came late (negative) are left out where 3 or more are not: 5 at the
     * line (the middle one exact) beside 4 late ones of 0.1 us; with 2 rounds not late (1 ms
     * each), the median is over all 9 as magnitudes, 7 of them late at the line */
    for (int k = 0; k < EXEC_P2P_SIZES; k++)
        for (int j = 0; j < 9; j++) {
            double at = 2e-6 + (double)bytes[k] / 1e9;
            t1[k * 9 + j] = j < 4 ? -1e-7 : at + (j == 6 ? 0 : (j < 6 ? -1e-6 : 1e-3));
            t2[k * 9 + j] = j < 2 ? 1e-3 : -at;
        }
    t1[4] = -0.0; /* a late round of no time still counts as late; one late round fewer before it */
    t1[0] = 2e-6 + (double)bytes[0] / 1e9 - 1e-6;
    p2p_fit_is(bytes, t1, 1);
    p2p_fit_is(bytes, t2, 1);
    /* the three series: trips 2 us + bytes / 1 GB/s, sends 0.5 us + bytes / 8 GB/s, posts 0.2 us + bytes / 4 GB/s */
    double all[EXEC_P2P_SERIES * EXEC_P2P_SIZES * 9];
    const double a_s[EXEC_P2P_SERIES] = {2e-6, 5e-7, 2e-7}, b_s[EXEC_P2P_SERIES] = {1e9, 8e9, 4e9};
    for (int q = 0; q < EXEC_P2P_SERIES; q++)
        for (int k = 0; k < EXEC_P2P_SIZES; k++)
            for (int j = 0; j < 9; j++) all[(q * EXEC_P2P_SIZES + k) * 9 + j] = a_s[q] + (double)bytes[k] / b_s[q];
    for (int one_way = 0; one_way <= 1; one_way++) {
        exec_p2p h;
        CU_ASSERT_EQUAL(exec_p2p_fit_all(bytes, all, 9, one_way, &h, &e), PL_OK);
        if (one_way) CU_ASSERT(fabs(h.latency_s - 2e-6) < 1e-12 && fabs(h.Bps / 1e9 - 1) < 1e-6);
        if (!one_way) CU_ASSERT(fabs(h.latency_s - 1e-6) < 1e-12 && fabs(h.Bps / 2e9 - 1) < 1e-6); /* round trips: halved */
        CU_ASSERT(fabs(h.send_s - 5e-7) < 1e-12 && fabs(h.send_Bps / 8e9 - 1) < 1e-6);
        if (one_way) CU_ASSERT(fabs(h.post_s - 2e-7) < 1e-12 && fabs(h.post_Bps / 4e9 - 1) < 1e-6);
        if (!one_way) CU_ASSERT(h.post_s == 0 && h.post_Bps == 0); /* round trips: posts not timed */
    }
    /* one way needs one clock and room for the stamp: a model of width 1 on one row (4 bytes) times round trips */
    const size_t tiny[EXEC_P2P_SIZES] = {4, 16, 64}, room[EXEC_P2P_SIZES] = {8, 32, 128};
    CU_ASSERT(exec_p2p_one_way(1, bytes) && exec_p2p_one_way(1, room));
    CU_ASSERT(!exec_p2p_one_way(1, tiny) && !exec_p2p_one_way(0, bytes));
}

/* A receiver still computing when the activation comes (its sweep much longer than the
 * sender's: a slower core, or its memory slower) does not lengthen the hand-off that the one-way
 * times measure: such a round comes back marked late (negative), most rounds do here (after each
 * timed round but the last of a size the receiver sweeps 16 MiB, the sender 16 KiB), and the
 * fit's median (exec_p2p_fit) stays well under the receiver's sweep, where timing from the stamp
 * alone reads that sweep whole. The receiver's sweeps are counted in what they add. */
static void test_p2p_late_receiver(void) {
    const size_t bytes[EXEC_P2P_SIZES] = {1024, 4096, 16384}, n = (size_t)4 << 20; /* 16 MiB */
    pl_err e;
    exec_transport *t = exec_threads_transport_new(2, 2, bytes[EXEC_P2P_SIZES - 1], 30, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    float *big = calloc(n, sizeof *big);
    if (!big) exec_threads_transport_free(t, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    exec_p2p_sweep sw = {big, n};
    double sweep_s = HUGE_VAL;
    for (int r = 0; r < 3; r++) { /* the fastest of three, the first touching its pages */
        double t0 = pl_now_s();
        for (size_t i = 0; i < sw.n; i++) sw.p[i] += 1.0f; /* as the profile's sweep */
        double s = pl_now_s() - t0;
        if (s < sweep_s) sweep_s = s;
    }
    double rt[EXEC_P2P_SERIES * EXEC_P2P_SIZES * 9];
    for (size_t i = 0; i < sizeof rt / sizeof *rt; i++) rt[i] = NAN;
    p2p_arg a[2] = {{t, 0, 1, 0, bytes, rt, {0}, {0}, NULL, 0}, {t, 1, 1, 0, bytes, NULL, {0}, {0}, big, n}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++) CU_ASSERT_EQUAL_FATAL(pthread_create(&th[r], NULL, p2p_thread, &a[r]), 0);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    CU_ASSERT(a[0].rc == PL_OK && a[1].rc == PL_OK);
    CU_ASSERT(big[0] == (float)(3 + EXEC_P2P_SIZES * 8)); /* it swept: 3 here, 8 a size there */
    int late = 0;
    for (int i = 0; i < EXEC_P2P_SIZES * 9; i++) late += signbit(rt[EXEC_P2P_TRIP * EXEC_P2P_SIZES * 9 + i]) != 0;
    CU_ASSERT(late >= EXEC_P2P_SIZES * 9 / 2);
    double lat = NAN, bps = NAN;
    CU_ASSERT_EQUAL(exec_p2p_fit(bytes, rt + EXEC_P2P_TRIP * EXEC_P2P_SIZES * 9, 9, 1, &lat, &bps, &e), PL_OK);
    CU_ASSERT(lat >= 0 && lat < sweep_s / 4);
    for (int k = 0; k < EXEC_P2P_SIZES; k++) /* each size alone as well: its time at the fit's line */
        CU_ASSERT(lat + (double)bytes[k] / bps < sweep_s / 4);
    exec_threads_transport_free(t, 2);
    free(big);
}

/* A thread pinned to one core (as an MPI launcher binds a process) runs, once unbound, on as
 * many cores as the process had: exec_platform_unbind_self, which `pipelab profile --transport
 * mpi`'s first process calls before it profiles the threads' hand-off alone. */
typedef struct unbind_arg {
    int pinned, unbound, rc;
} unbind_arg;

static void *unbind_thread(void *v) {
    unbind_arg *a = v;
    int cpus[4096];
    int n = exec_platform_cores(cpus, 4096);
    a->rc = n > 0 ? exec_platform_pin_self(cpus[n - 1]) : -1;
    a->pinned = exec_platform_cores(cpus, 4096);
    if (a->rc == 0) a->rc = exec_platform_unbind_self();
    a->unbound = exec_platform_cores(cpus, 4096);
    return NULL;
}

static void test_platform_unbind(void) {
    unbind_arg a = {0, 0, -1};
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, unbind_thread, &a), 0);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(a.rc, 0);
    CU_ASSERT_EQUAL(a.pinned, 1);
    CU_ASSERT(a.unbound >= exec_platform_cores_for_tests()); /* this thread's process was not bound */
}

static void test_host_probe(void) {
    pl_err e;
    exec_host_probe p;
    CU_ASSERT_EQUAL(exec_host_probe_measure(0, &p, &e), PL_EINPUT);
    CU_ASSERT_EQUAL_FATAL(exec_host_probe_measure(1, &p, &e), PL_OK);
    CU_ASSERT_EQUAL(p.workers, 1);
    CU_ASSERT(p.fwd_s > 0 && p.fwd_s == p.alone_fwd_s);
    CU_ASSERT_EQUAL_FATAL(exec_host_probe_measure(2, &p, &e), PL_OK);
    CU_ASSERT_EQUAL(p.workers, 2);
    /* two GEMMs of b x h x 4h, 2 FLOPs each multiply-add */
    double flops = 2.0 * 2.0 * EXEC_DEFAULT_MICROBATCH_SIZE * EXEC_DEFAULT_HIDDEN * 4.0 * EXEC_DEFAULT_HIDDEN;
    for (int k = 0; k < 2; k++) {
        double t = k ? p.alone_fwd_s : p.fwd_s;
        CU_ASSERT(t > flops / 1e13 && t < flops / 1e6);
    }
}

/* The host's interruptions: the bands' bounds (each exclusive below, inclusive above; a short
 * floor raised by a slow clock moves the short band's lower bound alone); refusals; 2.5 s make 2
 * whole windows of 1 s, 0.3 s one; each share a fraction of the time and the rate not negative;
 * the short floor a microsecond at least and under 0.1 ms. */
static void test_interruptions(void) {
    CU_ASSERT_EQUAL(exec_gap_band(EXEC_GAP_SHORT_MIN_S, EXEC_GAP_SHORT_MIN_S), -1);
    CU_ASSERT_EQUAL(exec_gap_band(1.5e-6, EXEC_GAP_SHORT_MIN_S), 1);
    CU_ASSERT_EQUAL(exec_gap_band(EXEC_GAP_MIN_S, EXEC_GAP_SHORT_MIN_S), 1);
    CU_ASSERT_EQUAL(exec_gap_band(1.0001e-4, EXEC_GAP_SHORT_MIN_S), 0);
    CU_ASSERT_EQUAL(exec_gap_band(EXEC_GAP_MAX_S, EXEC_GAP_SHORT_MIN_S), 0);
    CU_ASSERT_EQUAL(exec_gap_band(0.0201, EXEC_GAP_SHORT_MIN_S), -1);
    CU_ASSERT_EQUAL(exec_gap_band(1.5e-6, 2e-5), -1);
    CU_ASSERT_EQUAL(exec_gap_band(3e-5, 2e-5), 1);
    CU_ASSERT_EQUAL(exec_gap_band(5e-5, EXEC_GAP_MIN_S), -1); /* no short band: only the long one */
    CU_ASSERT_EQUAL(exec_gap_band(2e-4, EXEC_GAP_MIN_S), 0);
    pl_err e;
    exec_interruptions r;
    CU_ASSERT_EQUAL(exec_interruptions_measure(0, 1, &r, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(exec_interruptions_measure(1, 0, &r, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(exec_interruptions_measure(1, EXEC_INTERRUPTIONS_MAX_S * 2, &r, &e), PL_EINPUT);
    static const double secs[] = {2.5, 0.3};
    static const int windows[] = {2, 1};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL_FATAL(exec_interruptions_measure(2, secs[k], &r, &e), PL_OK);
        CU_ASSERT_EQUAL(r.workers, 2);
        CU_ASSERT_EQUAL(r.windows, windows[k]);
        CU_ASSERT(r.share >= 0 && r.share < 1 && r.share_all >= 0 && r.share_all < 1 && r.per_s >= 0);
        /* every gap counted lasts over EXEC_GAP_MIN_S: the share is at least the rate's worth */
        CU_ASSERT(r.share_all >= 0 && (r.per_s == 0 || r.share > 0));
        CU_ASSERT(r.short_share >= 0 && r.short_share < 1 && r.short_share_all >= 0 && r.short_share_all < 1);
        CU_ASSERT(r.short_per_s >= 0 && (r.short_per_s == 0 || r.short_share > 0));
        CU_ASSERT(r.short_min_s >= EXEC_GAP_SHORT_MIN_S && r.short_min_s <= EXEC_GAP_MIN_S);
    }
}

/* Timing until steady (exec_config.timed_passes_max, steady_max): exec_steadiness in closed form;
 * the gaps past the planned ones hold the profile's rounds as the planned ones; a run that is steady at once times its
 * least passes, one that never is its most, and one between stops at the first count whose
 * steadiness is within the target (the assembled pass times are the ones the workers decided on);
 * in every case it trained as the sequential reference over the passes it reports, and recorded
 * every action of them; a bad rule is refused. */
static void test_steady_rule(void) {
    const double v[] = {1, 2, 3, 4, 5};
    CU_ASSERT_DOUBLE_EQUAL(exec_steadiness(v, 5), sqrt(2.0) / sqrt(5.0) / 3.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_steadiness(v, 1), 0, 0);
    CU_ASSERT(isnan(exec_steadiness(v, 0)));
    /* the gaps a run adds past its planned ones continue the spread: over 3 planned gaps and 9 in
     * all, three times the rounds; none opens with the warm-up round */
    int open = -1, R = exec_prof_rounds(30), sum = 0;
    for (int g = 0; g < 9; g++) {
        sum += exec_prof_gap_rounds(30, 3, g, g == 0, 0, &open);
        CU_ASSERT_EQUAL(open, g == 0);
    }
    CU_ASSERT_EQUAL(sum, 3 * R);
    /* steady at once (a standard error of 10^4 medians: under load one pass in three took 5
     * times the others and missed 100%), never, and between */
    const double targets[] = {1e4, 1e-12, 0.02};
    for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
        sched *s = lowered("gpipe", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        exec_config c = small_cfg(4);
        c.timed_passes = 3;
        c.timed_passes_max = 9;
        c.steady_max = targets[k];
        c.record_ops = 1;
        c.profile_between_reps = 2; /* every gap holds a round or none, the added ones as well */
        exec_result r;
        pl_err e;
        if (run(s, &c, &r, &e) != PL_OK) { CU_FAIL("exec_run"); sched_free(s); continue; }
        int T = r.timed_passes;
        CU_ASSERT_EQUAL(r.timed_passes_least, 3);
        CU_ASSERT_EQUAL(r.timed_passes_most, 9);
        CU_ASSERT_DOUBLE_EQUAL(r.steady_max, targets[k], 0);
        if (k == 0) CU_ASSERT_EQUAL(T, 3);
        /* never steady, unless this host's clock gave every pass the same time (a tie of two short
         * passes to the nanosecond happened under load): then steady at once */
        if (k == 1) CU_ASSERT(T == 9 || r.steadiness <= targets[k]);
        CU_ASSERT(T >= 3 && T <= 9);
        CU_ASSERT_DOUBLE_EQUAL(r.steadiness, exec_steadiness(r.pass_s, T), 1e-12);
        for (int t = 3; t < T; t++) CU_ASSERT(exec_steadiness(r.pass_s, t) > targets[k]);
        CU_ASSERT(T == 9 || exec_steadiness(r.pass_s, T) <= targets[k]);
        CU_ASSERT_EQUAL(r.n_iters, T);
        /* the profile's medians over the rounds run, not over its room for the most passes */
        CU_ASSERT_PTR_NOT_NULL_FATAL(r.between_profile);
        CU_ASSERT(r.between_profile[0].f_s > 0 && r.between_profile[0].i_s > 0 && r.between_profile[0].w_s > 0);
        for (int q = 0; q < r.ranks; q++) CU_ASSERT_EQUAL(r.rank[q].n_ops, (size_t)T * s->rank[q].n);
        /* the sequential reference over the passes the run reports */
        size_t n = exec_param_count(&c);
        float *w = calloc(n, sizeof(float));
        double *loss = calloc((size_t)T, sizeof(double));
        CU_ASSERT_EQUAL_FATAL(exec_reference(s, &c, T, w, n, loss, &e), PL_OK);
        CU_ASSERT(max_rel_diff(r.final_weights, w, n) <= SYNC_TOL);
        for (int i = 0; i < T; i++) CU_ASSERT(fabs(r.loss[i] - loss[i]) <= 1e-4 * fabs(loss[i]));
        free(w);
        free(loss);
        exec_result_free(&r);
        sched_free(s);
    }
    /* a bad rule: most under least, no target; the CUDA backend takes a good one too */
    exec_config c = small_cfg(4);
    pl_err e;
    c.timed_passes_max = 2;
    c.steady_max = 0.01;
    CU_ASSERT_EQUAL(exec_check_config(&c, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "most timed passes (2) is under the least (3)") != NULL);
    c.timed_passes_max = 9;
    c.steady_max = 0;
    CU_ASSERT_EQUAL(exec_check_config(&c, &e), PL_EINPUT);
    c.steady_max = 0.01;
    CU_ASSERT_EQUAL(exec_check_config(&c, &e), PL_OK);
    c.backend = EXEC_BACKEND_CUDA;
    CU_ASSERT_EQUAL(exec_check_config(&c, &e), PL_OK);
}

/* The rounds of the profile between the passes, gap by gap (exec_prof_gap_rounds): the timed
 * ones add up to exec_prof_rounds(reps) and differ by at most one between gaps; the first gap
 * opens with the warm-up round, and every other gap with timed rounds opens with an untimed one
 * when the rounds are short (none when long), while a gap without any (fewer rounds than gaps),
 * or before a warm-up pass, runs none; and a round's FLOPs, which decide it, in closed form. */
static void test_profile_gap_rounds(void) {
    const int cases[][2] = {{30, 4}, {30, 199}, {160, 20}, {4, 1}, {60, 8}};
    for (int opens = 0; opens <= 1; opens++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int reps = cases[c][0], G = cases[c][1], R = exec_prof_rounds(reps), sum = 0, lo = R, hi = 0, opened = 0;
            for (int g = 0; g < G; g++) {
                int open, n = exec_prof_gap_rounds(reps, G, g, g == 0, opens, &open);
                sum += n;
                lo = n < lo ? n : lo;
                hi = n > hi ? n : hi;
                CU_ASSERT_EQUAL(open, g == 0 || (opens && n > 0));
                opened += open;
            }
            CU_ASSERT_EQUAL(sum, R);
            CU_ASSERT(hi - lo <= 1);
            /* untimed rounds: one a gap with timed rounds when the rounds are short, and the first
             * gap's in any case */
            int with = R < G ? R : G;
            CU_ASSERT_EQUAL(opened, opens ? with + (exec_prof_gap_rounds(reps, G, 0, 1, 1, &(int){0}) == 0) : 1);
        }
    /* 8 rounds over 199 gaps: gap 24 holds the first after gap 0's none, one timed and one untimed */
    int open;
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(30, 199, 0, 1, 1, &open), 0);
    CU_ASSERT_EQUAL(open, 1);
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(30, 199, 1, 0, 1, &open), 0);
    CU_ASSERT_EQUAL(open, 0);
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(30, 199, 24, 0, 1, &open), 1);
    CU_ASSERT_EQUAL(open, 1);
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(30, 199, 24, 0, 0, &open), 1); /* long rounds: none */
    CU_ASSERT_EQUAL(open, 0);
    /* before a warm-up pass: the warm-up round alone, or nothing */
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(30, 4, -1, 1, 1, &open), 0);
    CU_ASSERT_EQUAL(open, 1);
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(30, 4, -1, 1, 0, &open), 0);
    CU_ASSERT_EQUAL(open, 1);
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(30, 4, -1, 0, 1, &open), 0);
    CU_ASSERT_EQUAL(open, 0);
    /* no repetitions: no round at all */
    CU_ASSERT_EQUAL(exec_prof_gap_rounds(0, 4, 2, 0, 1, &open), 0);
    CU_ASSERT_EQUAL(open, 0);
    /* a round's FLOPs: 4 slots and the distance-0 microbatch through each of a worker's blocks,
     * with the again samples' streak of 3 microbatches through a stage's worth of them; dense
     * block of width h, inner f, b rows: F = I = W = 4 b h f. 8 blocks on 2 workers: 4 each;
     * a 2-chunk schedule's 4 stages (a profile without a schedule stands for one): 2 again; 8
     * one-block stages: 1; 3 stages: 8 / 3 rounded, 3; 2 stages (none held twice by a rank, no
     * samples in a run, but the rule): 4, all the worker's blocks, never more. */
    exec_config c = small_cfg(8);
    double fiw = 3.0 * 4 * c.microbatch_size * c.hidden * c.ffn;
    CU_ASSERT_DOUBLE_EQUAL(exec_prof_round_flops(&c, 2, 0), 4 * 5 * fiw, 1e-9 * fiw);
    CU_ASSERT_DOUBLE_EQUAL(exec_prof_round_flops(&c, 2, 4), (4 * 5 + 3 * 2) * fiw, 1e-9 * fiw);
    CU_ASSERT_DOUBLE_EQUAL(exec_prof_round_flops(&c, 2, EXEC_PROF_AGAIN_ANY_STAGES(2)), (4 * 5 + 3 * 2) * fiw, 1e-9 * fiw);
    CU_ASSERT_DOUBLE_EQUAL(exec_prof_round_flops(&c, 2, 8), (4 * 5 + 3 * 1) * fiw, 1e-9 * fiw);
    CU_ASSERT_EQUAL(exec_prof_again_blocks(&c, 4, 0), 0);
    CU_ASSERT_EQUAL(exec_prof_again_blocks(&c, 4, 8), 1);
    CU_ASSERT_EQUAL(exec_prof_again_blocks(&c, 4, 3), 3);
    CU_ASSERT_EQUAL(exec_prof_again_blocks(&c, 4, 2), 4);
    CU_ASSERT_EQUAL(exec_prof_again_blocks(&c, 4, 16), 1);
    /* a 14-block model's 2-chunk schedule on 2 ranks: stages of 4, 4, 3, 3, and 4 again (as the
     * half of a worker's 7, rounded up, before) */
    c.layers = 14;
    CU_ASSERT_EQUAL(exec_prof_again_blocks(&c, 7, 4), 4);
    c.layers = 8;
    /* a run's schedule: its stages where a rank holds several, else none */
    sched *sl = lowered("looped-bfs", 2, 4, 4, 1, SCHED_RECOMPUTE_NONE), *so = lowered("1f1b", 2, 4, 1, 1, SCHED_RECOMPUTE_NONE);
    CU_ASSERT_FATAL(sl && so);
    CU_ASSERT_EQUAL(exec_prof_again_stages(sl), 8);
    CU_ASSERT_EQUAL(exec_prof_again_stages(so), 0);
    CU_ASSERT_EQUAL(exec_prof_again_stages(NULL), 0);
    sched_free(sl);
    sched_free(so);
    CU_ASSERT_EQUAL(exec_prof_opens(&c, 2, 4), 1);
    /* width 1024 (inner 4096), 8 blocks on 2 workers: with 16 rows 20 x 3 x 268 MFLOP = 16.1
     * GFLOP a round, over the 8 of PROFILE_OPEN_MAX_FLOPS; with 4 rows 4.0, under */
    c.hidden = 1024;
    c.ffn = 4096;
    c.microbatch_size = 16;
    CU_ASSERT_EQUAL(exec_prof_opens(&c, 2, 0), 0);
    c.microbatch_size = 4;
    CU_ASSERT_EQUAL(exec_prof_opens(&c, 2, 0), 1);
}

/* What exec_xrank_setup_in needs beside a rank: the schedule's layout under a configuration, the
 * blocks of each stage, the data set and the loss record (rank_env_free). */
typedef struct rank_env {
    exec_layout lay;
    int blocks[4];
    exec_data data;
    double *loss_mb;
} rank_env;

static void rank_env_init(rank_env *v, const sched *s, const exec_config *c) {
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(exec_layout_build(s, c->replicas, &v->lay, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_check_run(s, c, v->blocks, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_data_build(c, 0, &v->data, &e), PL_OK);
    v->loss_mb = calloc(64, sizeof(double));
}

static void rank_env_free(rank_env *v) {
    free(v->loss_mb);
    exec_data_free(&v->data);
    exec_layout_free(&v->lay);
}

/* The profile between the passes copies its blocks' initial weights from its rank's arena where
 * the rank holds them (1f1b: all; interleaved, stages 0 and 2 on rank 0: blocks 0 and 2 of
 * its 0 and 1) and draws the others: every block equals exec_block_init's, bit for bit; a rank
 * holds no block outside its stages. Its F and I read the blocks the rank holds where the
 * passes do (its k-th block: the rank's k-th, in the arena), and its own copy for a block
 * beyond them (1f1b on 3 layers: rank 1 holds one block of the profile's two). */
static void test_profile_copied_weights(void) {
    for (int v = 1; v <= 3; v++) {
        sched *s = lowered(v == 2 ? "interleaved" : "1f1b", 2, 4, v == 2 ? 2 : 0, 0, SCHED_RECOMPUTE_NONE);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        exec_config c = small_cfg(v == 3 ? 3 : 4);
        c.profile_between_reps = 8;
        pl_err e;
        pl_err_clear(&e);
        rank_env env;
        rank_env_init(&env, s, &c);
        const int *blocks = env.blocks;
        exec_dims d;
        exec_dims_of(&c, &d);
        size_t nf = exec_block_floats(&d);
        float *want = malloc(nf * sizeof(float));
        int copied = 0, drawn = 0;
        for (int r = 0; r < 2; r++) {
            exec_xrank x;
            memset(&x, 0, sizeof x);
            CU_ASSERT_EQUAL_FATAL(exec_xrank_setup_in(&x, r, &env.lay, s, &c, env.blocks, &env.data, env.loss_mb, &e), PL_OK);
            CU_ASSERT_EQUAL_FATAL(exec_xrank_prof_new(&x, &c, 2, &e), PL_OK);
            int L = 0;
            const float *w = exec_prof_worker_weights(x.prof, &L);
            CU_ASSERT_EQUAL(L, 2);
            for (int k = 0; k < L && w; k++) {
                int b = r * L + k;
                exec_block_init(&d, c.init_seed, b, want);
                CU_ASSERT(memcmp(w + (size_t)k * nf, want, nf * sizeof(float)) == 0);
                const float *held = exec_xrank_initial_block(&x, b);
                copied += held != NULL;
                drawn += held == NULL;
                if (held) CU_ASSERT(memcmp(held, want, nf * sizeof(float)) == 0);
            }
            /* 1f1b: rank r holds stage r's blocks; interleaved: blocks r and r + 2 */
            int first = r == 0 ? 0 : blocks[0], held_n = 0;
            for (int b = 0; b < 4; b++) {
                int holds = v == 2 ? b % 2 == r : b >= first && b < first + blocks[r] && b < c.layers;
                CU_ASSERT_EQUAL(exec_xrank_initial_block(&x, b) != NULL, holds);
                if (holds) CU_ASSERT_PTR_EQUAL(exec_xrank_held_block(&x, held_n++), exec_xrank_initial_block(&x, b));
            }
            CU_ASSERT_PTR_NULL(exec_xrank_held_block(&x, held_n));
            for (int k = 0; k < L && w; k++)
                CU_ASSERT_PTR_EQUAL(exec_prof_worker_block(x.prof, k), k < held_n ? exec_xrank_held_block(&x, k) : w + (size_t)k * nf);
            exec_xrank_free(&x);
        }
        CU_ASSERT_EQUAL(copied, v == 1 ? 4 : v == 2 ? 2 : 3);
        CU_ASSERT_EQUAL(drawn, v == 1 ? 0 : v == 2 ? 2 : 1);
        free(want);
        rank_env_free(&env);
        sched_free(s);
    }
}

/* In a gap, the profile's F, I, W and STEP work on the rank's newest weights, gradients and
 * momentum, where the run's do (exec_prof_worker_lend): for each block the rank holds whose stage
 * has accumulated nothing since its STEP, and on the profile's own for the others (1f1b on 3
 * layers: rank 1 holds one block of the profile's two; a stage with a gradient accumulated lends
 * nothing; PipeDream with its newest weights in the second version slot of rank 0: that slot,
 * its STEP into the free first slot once most of the stage's STEPs went into a new version). The rounds leave
 * the rank's gradients zero and its weights bit for bit as they were, they move its momentum,
 * and unlend puts that back bit for bit and returns the W and STEP to the profile's own memory. */
static void test_profile_lent_state(void) {
    for (int v = 1; v <= 4; v++) {
        sched *s = lowered(v == 4 ? "pipedream" : "1f1b", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        exec_config c = small_cfg(v == 2 ? 3 : 4);
        c.momentum = 0.5;
        c.profile_between_reps = 8;
        pl_err e;
        pl_err_clear(&e);
        rank_env env;
        rank_env_init(&env, s, &c);
        exec_dims d;
        exec_dims_of(&c, &d);
        size_t nf = exec_block_floats(&d);
        for (int r = 0; r < 2; r++) {
            exec_xrank x;
            memset(&x, 0, sizeof x);
            CU_ASSERT_EQUAL_FATAL(exec_xrank_setup_in(&x, r, &env.lay, s, &c, env.blocks, &env.data, env.loss_mb, &e), PL_OK);
            CU_ASSERT_EQUAL_FATAL(exec_xrank_prof_new(&x, &c, 2, &e), PL_OK);
            exec_xstage *st = &x.st[0];
            if (v == 3) st->nacc = 1; /* a gradient accumulated: its blocks stay the rank's alone */
            if (v == 4 && r == 0) {
                /* the newest weights in the second slot, as an out-of-place STEP leaves them */
                CU_ASSERT_FATAL(st->ver.cap >= 2);
                memcpy(exec_pool_slot(&st->ver, 1), exec_pool_slot(&st->ver, 0), st->pfloats * sizeof(float));
                st->ver.refs[1] = 1;
                st->ver.refs[0] = 0;
                st->cur = 1;
                st->steps = 3;
                st->steps_new = 2;
                for (size_t i = 0; i < st->pfloats; i++) st->ver.base[i] = 12345.0f; /* free: what the STEP writes */
            }
            const float *out = v == 4 && r == 0 ? st->ver.base : exec_pool_slot(&st->ver, st->cur);
            const float *newest = exec_pool_slot(&st->ver, st->cur);
            for (size_t i = 0; i < st->pfloats; i++) st->mom[i] = 0.25f * (float)(i % 7) - 0.5f;
            size_t n = st->pfloats;
            float *w0 = malloc(n * sizeof(float)), *m0 = malloc(n * sizeof(float));
            memcpy(w0, newest, n * sizeof(float));
            memcpy(m0, st->mom, n * sizeof(float));
            int L = 0, held = v == 3 ? 0 : st->nb < 2 ? st->nb : 2;
            const float *own = exec_prof_worker_weights(x.prof, &L);
            CU_ASSERT_EQUAL(L, 2);
            const float *own_g[2] = {exec_prof_worker_grad(x.prof, 0), exec_prof_worker_grad(x.prof, 1)};
            CU_ASSERT(own_g[0] && own_g[0] != own && own_g[1] == own_g[0] + nf);
            CU_ASSERT_EQUAL(exec_prof_worker_lend(x.prof, &x), held);
            for (int k = 0; k < L; k++) {
                CU_ASSERT_PTR_EQUAL(exec_prof_worker_grad(x.prof, k), k < held ? st->grad + (size_t)k * nf : own_g[k]);
                if (k < held) CU_ASSERT_PTR_EQUAL(exec_prof_worker_block(x.prof, k), newest + (size_t)k * nf);
                if (k < held) CU_ASSERT_PTR_EQUAL(exec_prof_worker_step_out(x.prof, k), out + (size_t)k * nf);
            }
            exec_prof_worker_round(x.prof, 1, 1);
            exec_prof_worker_round(x.prof, 0, 0);
            exec_prof_worker_round(x.prof, 0, 0);
            int gzero = 1, mmoved = 0;
            for (size_t i = 0; i < n; i++) {
                gzero &= st->grad[i] == 0.0f;
                mmoved |= st->mom[i] != m0[i];
            }
            CU_ASSERT(gzero);
            CU_ASSERT_EQUAL(mmoved, held > 0);
            CU_ASSERT_EQUAL(memcmp(newest, w0, n * sizeof(float)), 0);
            if (out != newest) /* the held blocks' STEP wrote the newest weights there (learning rate 0) */
                CU_ASSERT_EQUAL(memcmp(out, w0, (size_t)held * nf * sizeof(float)), 0);
            exec_prof_worker_unlend(x.prof);
            CU_ASSERT_EQUAL(memcmp(st->mom, m0, n * sizeof(float)), 0);
            for (int k = 0; k < L; k++) CU_ASSERT_PTR_EQUAL(exec_prof_worker_grad(x.prof, k), own_g[k]);
            free(w0);
            free(m0);
            exec_xrank_free(&x);
        }
        rank_env_free(&env);
        sched_free(s);
    }
}

/* Weight versions in flight (PipeDream's stashing, 2BW): a run profiled between its passes, whose
 * rounds STEP into the rank's free version slots once most of its STEPs go there (PipeDream's
 * first stage here: 9 of 12 STEPs, then 15 of 16, ...), trains bit for bit as one that is not,
 * with momentum. PipeDream's rank 0 also steps after each backward, so its worker times the
 * cycle on two versions and in place (prof_versions: all six times positive; the cycle's STEPs
 * at learning rate 0 and its Ws into the gradients leave the training as it is), and the CSV's
 * worker lines give its ratios of the two cycles; rank 1 steps in place and 2BW's first stage
 * once every m microbatches, so their workers time none (all six 0, ratio 1). */
static void test_profile_between_versions(void) {
    const char *kinds[2] = {"pipedream", "2bw"};
    for (int v = 0; v < 2; v++) {
        sched *s = lowered(kinds[v], 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        exec_config c = small_cfg(4);
        c.momentum = 0.5;
        c.timed_passes = 4;
        exec_result plain, prof;
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(run(s, &c, &plain, &e), PL_OK);
        c.profile_between_reps = 30;
        CU_ASSERT_EQUAL_FATAL(run(s, &c, &prof, &e), PL_OK);
        CU_ASSERT_EQUAL_FATAL(prof.n_weights, plain.n_weights);
        CU_ASSERT_EQUAL(memcmp(prof.final_weights, plain.final_weights, plain.n_weights * sizeof(float)), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(prof.between_profile);
        for (int r = 0; r < 2; r++) {
            const exec_layer_profile *w = &prof.between_profile[1 + r];
            const double t[6] = {w->f_two_s, w->i_two_s, w->w_two_s, w->f_one_s, w->i_one_s, w->w_one_s};
            for (int k = 0; k < 6; k++) CU_ASSERT(v == 0 && r == 0 ? t[k] > 0 && isfinite(t[k]) : t[k] == 0);
        }
        pl_buf csv;
        pl_buf_init(&csv);
        CU_ASSERT_EQUAL(exec_profile_csv_between(s, &c, &prof, &csv, &e), PL_OK);
        double vr[6];
        CU_ASSERT_EQUAL(exec_profile_worker_versions(csv.data, csv.len, 2, vr), v == 0 ? 1 : -1);
        const exec_layer_profile *w0 = &prof.between_profile[1];
        const double two[3] = {w0->f_two_s, w0->i_two_s, w0->w_two_s}, one[3] = {w0->f_one_s, w0->i_one_s, w0->w_one_s};
        for (int k = 0; v == 0 && k < 3; k++) {
            CU_ASSERT_DOUBLE_EQUAL(vr[k], two[k] / one[k], 1e-6 * vr[k]); /* 9 significant digits */
            CU_ASSERT_EQUAL(vr[3 + k], 1.0);
        }
        pl_buf_free(&csv);
        exec_result_free(&plain);
        exec_result_free(&prof);
        sched_free(s);
    }
}

/* A run profiled between its passes trains exactly as one that is not (the profile's rounds work
 * on the rank's weights, gradients and momentum and leave them as they were), keeps its passes, and returns each worker's profile and the pooled one,
 * which lies between the workers' own (the median of pooled rounds lies between the medians of
 * the parts). Also with no warm-up pass (the profile's warm-up round then opens the first gap),
 * and with more rounds than gaps; 1F1B (one stage a rank: no again samples) without it, the
 * interleaved schedule (two) with it. */
static void test_profile_between(void) {
    for (int warm = 0; warm <= 1; warm++) {
        sched *s = lowered(warm ? "interleaved" : "1f1b", 2, 4, warm ? 2 : 0, 0, SCHED_RECOMPUTE_NONE);
        exec_config c = small_cfg(4);
        c.momentum = 0.5;
        c.warmup_passes = warm;
        exec_result plain, prof;
        pl_err e;
        CU_ASSERT_EQUAL_FATAL(run(s, &c, &plain, &e), PL_OK);
        CU_ASSERT_PTR_NULL(plain.between_profile);
        CU_ASSERT(isnan(plain.rank[0].start_after_ready_s) && isnan(plain.rank[1].start_after_ready_s));
        c.profile_between_reps = 30; /* 8 rounds over 4 gaps */
        CU_ASSERT_EQUAL_FATAL(run(s, &c, &prof, &e), PL_OK);
        CU_ASSERT_EQUAL(prof.timed_passes, 3);
        CU_ASSERT_EQUAL(prof.n_weights, plain.n_weights);
        CU_ASSERT_EQUAL(memcmp(prof.final_weights, plain.final_weights, plain.n_weights * sizeof(float)), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(prof.between_profile);
        CU_ASSERT_EQUAL(prof.between_reps, 30);
        /* each pass starts on every rank after every rank's rounds and read-back: the ranks start
         * together, as a pass without the rounds does (else the rank that read back last starts
         * late, and the pass, first start to last end, counts its lateness) */
        for (int r = 0; r < 2; r++) CU_ASSERT(prof.rank[r].start_after_ready_s >= 0);
        const exec_layer_profile *all = &prof.between_profile[0], *w0 = &prof.between_profile[1], *w1 = &prof.between_profile[2];
        CU_ASSERT_EQUAL(all->concurrency, 2);
        CU_ASSERT_EQUAL(all->param_bytes, 4 * (2 * 32 * 64 + 64 + 32));
        /* F, I, W, STEP, and I and W at reuse distance 0 */
        double a[6] = {all->f_s, all->i_s, all->w_s, all->step_s, all->i_hot_s, all->w_hot_s},
               x0[6] = {w0->f_s, w0->i_s, w0->w_s, w0->step_s, w0->i_hot_s, w0->w_hot_s},
               x1[6] = {w1->f_s, w1->i_s, w1->w_s, w1->step_s, w1->i_hot_s, w1->w_hot_s};
        for (int k = 0; k < 6; k++) {
            CU_ASSERT(x0[k] > 0 && x1[k] > 0);
            CU_ASSERT(a[k] >= fmin(x0[k], x1[k]) && a[k] <= fmax(x0[k], x1[k]));
        }
        /* the CSV's worker lines carry them, and the prediction reads back their ratios */
        pl_buf csv;
        pl_buf_init(&csv);
        CU_ASSERT_EQUAL(exec_profile_csv_between(s, &c, &prof, &csv, &e), PL_OK);
        double ri[2], rw[2];
        CU_ASSERT_EQUAL(exec_profile_worker_reuse(csv.data, csv.len, 2, ri, rw), 0);
        CU_ASSERT_DOUBLE_EQUAL(ri[1], w1->i_hot_s / w1->i_s, 1e-6 * ri[1]); /* 9 significant digits */
        CU_ASSERT_DOUBLE_EQUAL(rw[0], w0->w_hot_s / w0->w_s, 1e-6 * rw[0]);
        CU_ASSERT_EQUAL(exec_profile_worker_reuse(csv.data, csv.len, 3, ri, rw), -1); /* a worker missing */
        /* each worker's pass-length factors, one per window, read back */
        double win[2 * EXEC_WINDOWS];
        CU_ASSERT_EQUAL(exec_profile_worker_windows(csv.data, csv.len, 2, win, NULL), 0);
        /* each worker's rounds, in the same gaps: as many on both, F and the backwards timed in
         * each (the states term's lines read back with as many speeds of each) */
        CU_ASSERT(w0->n_round_f > 0 && w0->n_round_f == w1->n_round_f);
        CU_ASSERT_PTR_NOT_NULL(strstr(csv.data, "# " EXEC_PROFILE_META " rounds worker=1 f="));
        for (int k = 0; k < w1->n_round_f; k++) CU_ASSERT(w0->round_b[k] > 0 && w1->round_b[k] > 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(csv.data, " b="));
        for (int j = 0; j < 2 * EXEC_WINDOWS; j++) CU_ASSERT(win[j] > 0 && isfinite(win[j]));
        CU_ASSERT_DOUBLE_EQUAL(win[EXEC_WINDOWS + 2], w1->window[2], 1e-6 * win[EXEC_WINDOWS + 2]);
        /* relative to the stretch of the worker's own medians: 1 there */
        double ref = exec_window_reference_s(w1, exec_prof_blocks(&c, 2));
        CU_ASSERT(ref > 0);
        CU_ASSERT_DOUBLE_EQUAL(exec_window_factor(w1->window, ref), 1.0, 1e-9);
        /* the first-touch times: a round's first microbatch and its 3 others, whose mean over the
         * round is the kind's round mean (F, I, W: the medians of those means lie between) */
        const double fx[3] = {w0->f_first_s, w0->i_first_s, w0->w_first_s}, rx[3] = {w0->f_rest_s, w0->i_rest_s, w0->w_rest_s};
        double fi[6], fr[6];
        CU_ASSERT_EQUAL(exec_profile_worker_first(csv.data, csv.len, 2, fi, fr), 0);
        for (int k = 0; k < 3; k++) {
            CU_ASSERT(fx[k] > 0 && rx[k] > 0);
            CU_ASSERT_DOUBLE_EQUAL(fi[k], fx[k] / x0[k], 1e-6 * fi[k]);
            CU_ASSERT_DOUBLE_EQUAL(fr[k], rx[k] / x0[k], 1e-6 * fr[k]);
        }
        CU_ASSERT_DOUBLE_EQUAL(fi[3], w1->f_first_s / w1->f_s, 1e-6 * fi[3]);
        /* the again times (F, I, W right after the same kind on the same blocks), read back as
         * ratios to the worker's times */
        const double ax[3] = {w1->f_again_s, w1->i_again_s, w1->w_again_s}, x1f[3] = {w1->f_s, w1->i_s, w1->w_s};
        double ag[6];
        CU_ASSERT_EQUAL(exec_profile_worker_again(csv.data, csv.len, 2, ag), warm ? 0 : -1);
        for (int k = 0; k < 3; k++) {
            CU_ASSERT(warm ? ax[k] > 0 && w0->f_again_s > 0 : ax[k] == 0);
            if (warm) CU_ASSERT_DOUBLE_EQUAL(ag[3 + k], ax[k] / x1f[k], 1e-6 * ag[3 + k]);
        }
        /* the I of the last block next to its forward: timed by every worker, and its ratio to
         * the worker's I read back */
        double nx[2];
        CU_ASSERT(w0->i_next_s > 0 && w1->i_next_s > 0);
        CU_ASSERT_EQUAL(exec_profile_worker_next(csv.data, csv.len, 2, nx), 0);
        CU_ASSERT_DOUBLE_EQUAL(nx[0], w0->i_next_s / w0->i_s, 1e-6 * nx[0]);
        CU_ASSERT_DOUBLE_EQUAL(nx[1], w1->i_next_s / w1->i_s, 1e-6 * nx[1]);
        CU_ASSERT_EQUAL(exec_profile_worker_next(csv.data, csv.len, 3, nx), -1); /* a worker missing */
        /* the sharing term's F alone and beside: timed by every worker, their ratio read back */
        double sr[2];
        CU_ASSERT(w0->f_alone_s > 0 && w0->f_side_s > 0 && w1->f_alone_s > 0 && w1->f_side_s > 0);
        CU_ASSERT_EQUAL(exec_profile_worker_share(csv.data, csv.len, 2, sr), 0);
        CU_ASSERT_DOUBLE_EQUAL(sr[1], w1->f_alone_s / w1->f_side_s, 1e-6 * sr[1]);
        /* per class: F beside a backward, the backward alone, beside backwards and beside
         * forwards, timed by every worker, their ratios read back; a backward takes longer than
         * its F (its I and W each about an F) */
        double cr[6];
        CU_ASSERT(w0->f_cross_s > 0 && w0->b_alone_s > 0 && w0->b_side_s > 0 && w0->b_cross_s > 0);
        CU_ASSERT(w1->f_cross_s > 0 && w1->b_alone_s > 0 && w1->b_side_s > w1->f_side_s && w1->b_cross_s > 0);
        CU_ASSERT_EQUAL(exec_profile_worker_share_class(csv.data, csv.len, 2, cr), 0);
        CU_ASSERT_DOUBLE_EQUAL(cr[3], w1->f_cross_s / w1->f_side_s, 1e-6 * cr[3]);
        CU_ASSERT_DOUBLE_EQUAL(cr[4], w1->b_alone_s / w1->b_side_s, 1e-6 * cr[4]);
        CU_ASSERT_DOUBLE_EQUAL(cr[5], w1->b_cross_s / w1->b_side_s, 1e-6 * cr[5]);
        pl_buf_free(&csv);
        exec_result_free(&plain);
        exec_result_free(&prof);
        sched_free(s);
    }
}

/* A worker line without the reuse-distance times (a profile written before they existed) still
 * gives its STEP, and no ratios: the term is then off. */
static void test_profile_reuse_lines(void) {
    const char *old = "# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=1\n"
                      "# pipelab-exec worker=1 core=1 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=5 bwd_in0_s=1\n";
    const char *hot = "# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=1 bwd_in_hot_s=1 "
                      "bwd_w_hot_s=2.4\n"
                      "# pipelab-exec worker=1 core=1 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=5 bwd_in0_s=1 bwd_in_hot_s=1.5 "
                      "bwd_w_hot_s=3\n";
    double st[2], ri[2], rw[2];
    CU_ASSERT_EQUAL(exec_profile_worker_steps(old, strlen(old), 2, st), 0);
    CU_ASSERT_DOUBLE_EQUAL(st[1], 5.0, 0);
    CU_ASSERT_EQUAL(exec_profile_worker_reuse(old, strlen(old), 2, ri, rw), -1);
    double sta[2] = {-1, -1};
    CU_ASSERT_EQUAL(exec_profile_worker_step_means(old, strlen(old), 2, sta), -1); /* none: TAG-stepmean off */
    CU_ASSERT_EQUAL(exec_profile_worker_steps(hot, strlen(hot), 2, st), 0);
    CU_ASSERT_EQUAL(exec_profile_worker_reuse(hot, strlen(hot), 2, ri, rw), 0);
    CU_ASSERT_DOUBLE_EQUAL(ri[0], 0.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(rw[0], 0.8, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ri[1], 0.75, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(rw[1], 1.0, 1e-15);
    /* the first-touch times: ratios of a round's first microbatch and of its others to the
     * worker's time; lines without them (both above) leave the term off */
    const char *first = "# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=1 bwd_in_hot_s=1 "
                        "bwd_w_hot_s=2.4 fwd_first_s=1.5 bwd_in_first_s=2.5 bwd_w_first_s=6 fwd_rest_s=0.75 "
                        "bwd_in_rest_s=1.5 bwd_w_rest_s=2.25\n"
                        "# pipelab-exec worker=1 core=1 fwd_s=2 bwd_in_s=2 bwd_w_s=3 step_s=5 bwd_in0_s=1 bwd_in_hot_s=1.5 "
                        "bwd_w_hot_s=3 fwd_first_s=3 bwd_in_first_s=2 bwd_w_first_s=3 fwd_rest_s=1 bwd_in_rest_s=2 "
                        "bwd_w_rest_s=3\n";
    double fi[6], fr[6];
    CU_ASSERT_EQUAL(exec_profile_worker_first(old, strlen(old), 2, fi, fr), -1);
    CU_ASSERT_EQUAL(exec_profile_worker_first(hot, strlen(hot), 2, fi, fr), -1);
    CU_ASSERT_EQUAL(exec_profile_worker_first(first, strlen(first), 2, fi, fr), 0);
    const double want_fi[6] = {1.5, 1.25, 2, 1.5, 1, 1}, want_fr[6] = {0.75, 0.75, 0.75, 0.5, 1, 1};
    for (int k = 0; k < 6; k++) {
        CU_ASSERT_DOUBLE_EQUAL(fi[k], want_fi[k], 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(fr[k], want_fr[k], 1e-15);
    }
    CU_ASSERT_EQUAL(exec_profile_worker_reuse(first, strlen(first), 2, ri, rw), 0); /* still read */
    CU_ASSERT_DOUBLE_EQUAL(rw[0], 0.8, 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_first(first, strlen(first), 3, fi, fr), -1); /* a worker missing */
    /* the again times: ratios to the worker's time; lines without them leave the term off and
     * keep the others */
    double ag[6];
    CU_ASSERT_EQUAL(exec_profile_worker_again(first, strlen(first), 2, ag), -1);
    const char *again = "# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=1 bwd_in_hot_s=1 "
                        "bwd_w_hot_s=2.4 fwd_first_s=1.5 bwd_in_first_s=2.5 bwd_w_first_s=6 fwd_rest_s=0.75 "
                        "bwd_in_rest_s=1.5 bwd_w_rest_s=2.25 fwd_again_s=0.5 bwd_in_again_s=1 bwd_w_again_s=2.4\n"
                        "# pipelab-exec worker=1 core=1 fwd_s=2 bwd_in_s=2 bwd_w_s=3 step_s=5 bwd_in0_s=1 bwd_in_hot_s=1.5 "
                        "bwd_w_hot_s=3 fwd_first_s=3 bwd_in_first_s=2 bwd_w_first_s=3 fwd_rest_s=1 bwd_in_rest_s=2 "
                        "bwd_w_rest_s=3 fwd_again_s=1.5 bwd_in_again_s=2 bwd_w_again_s=1.5\n";
    CU_ASSERT_EQUAL(exec_profile_worker_again(again, strlen(again), 2, ag), 0);
    const double want_ag[6] = {0.5, 0.5, 0.8, 0.75, 1, 0.5};
    for (int k = 0; k < 6; k++) CU_ASSERT_DOUBLE_EQUAL(ag[k], want_ag[k], 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_first(again, strlen(again), 2, fi, fr), 0); /* still read */
    CU_ASSERT_DOUBLE_EQUAL(fr[0], 0.75, 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_again(again, strlen(again), 3, ag), -1); /* a worker missing */
    /* the I next to its forward: its ratio to the worker's I; lines without it (all above) leave
     * the term off, and the again times are still read beside it */
    double nx[2];
    CU_ASSERT_EQUAL(exec_profile_worker_next(again, strlen(again), 2, nx), -1);
    const char *next = "# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=1 bwd_in_hot_s=1 "
                       "bwd_w_hot_s=2.4 fwd_first_s=1.5 bwd_in_first_s=2.5 bwd_w_first_s=6 fwd_rest_s=0.75 "
                       "bwd_in_rest_s=1.5 bwd_w_rest_s=2.25 fwd_again_s=0.5 bwd_in_again_s=1 bwd_w_again_s=2.4 "
                       "bwd_in_next_s=1.5\n"
                       "# pipelab-exec worker=1 core=1 fwd_s=2 bwd_in_s=2 bwd_w_s=3 step_s=5 bwd_in0_s=1 bwd_in_hot_s=1.5 "
                       "bwd_w_hot_s=3 fwd_first_s=3 bwd_in_first_s=2 bwd_w_first_s=3 fwd_rest_s=1 bwd_in_rest_s=2 "
                       "bwd_w_rest_s=3 fwd_again_s=1.5 bwd_in_again_s=2 bwd_w_again_s=1.5 bwd_in_next_s=1.8\n";
    CU_ASSERT_EQUAL(exec_profile_worker_next(next, strlen(next), 2, nx), 0);
    CU_ASSERT_DOUBLE_EQUAL(nx[0], 0.75, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(nx[1], 0.9, 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_again(next, strlen(next), 2, ag), 0);
    CU_ASSERT_DOUBLE_EQUAL(ag[5], 0.5, 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_next(next, strlen(next), 3, nx), -1); /* a worker missing */
    /* the cycle on two weight versions: the ratio of each of its F, I, W to the cycle in place
     * where a worker timed it, 1 where its six times are 0; lines without them (all above), or
     * with some of the six and not all, leave the term off; no worker timing it, too */
    double vr[6];
    CU_ASSERT_EQUAL(exec_profile_worker_versions(next, strlen(next), 2, vr), -1);
    const char *head0 = "# pipelab-exec worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=1 bwd_in_hot_s=1 "
                        "bwd_w_hot_s=2.4 fwd_first_s=1.5 bwd_in_first_s=2.5 bwd_w_first_s=6 fwd_rest_s=0.75 "
                        "bwd_in_rest_s=1.5 bwd_w_rest_s=2.25 fwd_again_s=0.5 bwd_in_again_s=1 bwd_w_again_s=2.4 "
                        "bwd_in_next_s=1.5 fwd_back_s=1.2 fwd_sd_s=0.1 ";
    const char *head1 = "# pipelab-exec worker=1 core=1 fwd_s=2 bwd_in_s=2 bwd_w_s=3 step_s=5 bwd_in0_s=1 bwd_in_hot_s=1.5 "
                        "bwd_w_hot_s=3 fwd_first_s=3 bwd_in_first_s=2 bwd_w_first_s=3 fwd_rest_s=1 bwd_in_rest_s=2 "
                        "bwd_w_rest_s=3 fwd_again_s=1.5 bwd_in_again_s=2 bwd_w_again_s=1.5 bwd_in_next_s=1.8 "
                        "fwd_back_s=2.2 fwd_sd_s=0.2 ";
    char two[2048], part[2048], none[2048];
    snprintf(two, sizeof two, "%sfwd_two_s=1.1 bwd_in_two_s=2.5 bwd_w_two_s=3.3 fwd_one_s=1 bwd_in_one_s=2 bwd_w_one_s=3\n%s"
             "fwd_two_s=0 bwd_in_two_s=0 bwd_w_two_s=0 fwd_one_s=0 bwd_in_one_s=0 bwd_w_one_s=0\n", head0, head1);
    snprintf(part, sizeof part, "%sfwd_two_s=1.1 bwd_in_two_s=2.5 bwd_w_two_s=3.3 fwd_one_s=1 bwd_in_one_s=2 bwd_w_one_s=3\n%s"
             "fwd_two_s=1 bwd_in_two_s=0 bwd_w_two_s=0 fwd_one_s=0 bwd_in_one_s=0 bwd_w_one_s=0\n", head0, head1);
    snprintf(none, sizeof none, "%sfwd_two_s=0 bwd_in_two_s=0 bwd_w_two_s=0 fwd_one_s=0 bwd_in_one_s=0 bwd_w_one_s=0\n%s"
             "fwd_two_s=0 bwd_in_two_s=0 bwd_w_two_s=0 fwd_one_s=0 bwd_in_one_s=0 bwd_w_one_s=0\n", head0, head1);
    CU_ASSERT_EQUAL(exec_profile_worker_versions(two, strlen(two), 2, vr), 1);
    const double want_vr[6] = {1.1, 1.25, 1.1, 1, 1, 1};
    for (int k = 0; k < 6; k++) CU_ASSERT_DOUBLE_EQUAL(vr[k], want_vr[k], 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_next(two, strlen(two), 2, nx), 0); /* the others still read */
    CU_ASSERT_DOUBLE_EQUAL(nx[1], 0.9, 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_versions(part, strlen(part), 2, vr), -1);
    CU_ASSERT_EQUAL(exec_profile_worker_versions(none, strlen(none), 2, vr), -1);
    CU_ASSERT_EQUAL(exec_profile_worker_versions(two, strlen(two), 3, vr), -1); /* a worker missing */
    /* the STEP's mean over the rounds, after the cycle's six: each worker's, the others still read; lines
     * without it (all above) or with a zero leave TAG-stepmean off */
    CU_ASSERT_EQUAL(exec_profile_worker_step_means(two, strlen(two), 2, sta), -1);
    char med[2048], zero[2048];
    const char *cyc = "fwd_two_s=0 bwd_in_two_s=0 bwd_w_two_s=0 fwd_one_s=0 bwd_in_one_s=0 bwd_w_one_s=0";
    snprintf(med, sizeof med, "%s%s step_mean_s=3.5\n%s%s step_mean_s=4.5\n", head0, cyc, head1, cyc);
    snprintf(zero, sizeof zero, "%s%s step_mean_s=3.5\n%s%s step_mean_s=0\n", head0, cyc, head1, cyc);
    CU_ASSERT_EQUAL(exec_profile_worker_step_means(med, strlen(med), 2, sta), 0);
    CU_ASSERT_DOUBLE_EQUAL(sta[0], 3.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(sta[1], 4.5, 0);
    CU_ASSERT_EQUAL(exec_profile_worker_steps(med, strlen(med), 2, st), 0);
    CU_ASSERT_DOUBLE_EQUAL(st[1], 5.0, 0);
    CU_ASSERT_EQUAL(exec_profile_worker_step_means(zero, strlen(zero), 2, sta), -1);
    CU_ASSERT_EQUAL(exec_profile_worker_step_means(med, strlen(med), 3, sta), -1); /* a worker missing */
    /* the sharing term's F alone and beside, after the STEP's mean: each worker's ratio, the
     * others still read; lines without them (all above), or with a zero, leave the term off */
    double sr[2] = {-1, -1};
    CU_ASSERT_EQUAL(exec_profile_worker_share(med, strlen(med), 2, sr), -1);
    char shr[2048], shz[2048];
    snprintf(shr, sizeof shr, "%s%s step_mean_s=3.5 fwd_alone_s=0.6 fwd_side_s=0.8\n%s%s step_mean_s=4.5 fwd_alone_s=1.5 "
             "fwd_side_s=1.2\n", head0, cyc, head1, cyc);
    snprintf(shz, sizeof shz, "%s%s step_mean_s=3.5 fwd_alone_s=0.6 fwd_side_s=0.8\n%s%s step_mean_s=4.5 fwd_alone_s=1.5 "
             "fwd_side_s=0\n", head0, cyc, head1, cyc);
    CU_ASSERT_EQUAL(exec_profile_worker_share(shr, strlen(shr), 2, sr), 0);
    CU_ASSERT_DOUBLE_EQUAL(sr[0], 0.75, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sr[1], 1.25, 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_step_means(shr, strlen(shr), 2, sta), 0);
    CU_ASSERT_DOUBLE_EQUAL(sta[1], 4.5, 0);
    CU_ASSERT_EQUAL(exec_profile_worker_share(shz, strlen(shz), 2, sr), -1);
    CU_ASSERT_EQUAL(exec_profile_worker_share(shr, strlen(shr), 3, sr), -1); /* a worker missing */
    /* per class: lines that end at fwd_side_s (a profile of an earlier pipelab) give no ratios
     * per class, the one ratio still read */
    double cr[6] = {0};
    CU_ASSERT_EQUAL(exec_profile_worker_share_class(shr, strlen(shr), 2, cr), -1);
}

/* The ranks' drift. exec_lag1_variance: a series that holds +a for 12 values and then -a for 12
 * (a persistent difference between two workers) has mean 0, lag-1 autocovariance
 * (22 - 1) a^2 / 23 and variance 24 a^2 / 23, so 22 a^2 / 23 with the mean's bias put back
 * (variance / 24); one that alternates +a, -a (what varies from one round to the next alone)
 * -a^2 + a^2 / 23, so no drift; independent values (GSL's gaussian draws, 20000 series of 8)
 * read 0 on average within 4 standard errors, where the lag-1 autocovariance alone reads
 * -variance / 8; one value of 1 (an interrupted round) is clipped to 3 robust standard
 * deviations (1.4826 a here) about the median 0, so the first series with its fifth value 1
 * gives what that value at 3 x 1.4826 a gives. exec_drift_of: two workers whose rounds' F ratio
 * holds e^a for 12 rounds and then e^-a have a drift of sqrt(22 a^2 / 23 / 2) (a round more on
 * one worker is left out); a third worker with the first's rounds adds a pair with no drift and
 * one with the same, sqrt(22 a^2 / 23 / 3); alternating rounds, 7 rounds side by side or one
 * worker have none. exec_profile_drift reads the profile's line. */
/* exec_lag1_variance of independent values: 0 on average (test_rank_drift). */
static void lag1_unbiased(void) {
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    gsl_rng_set(g, 7);
    const int series = 20000;
    double sum = 0, sum2 = 0, d[8], tmp[8];
    for (int s = 0; s < series; s++) {
        for (int k = 0; k < 8; k++) d[k] = gsl_ran_gaussian(g, 1.0);
        double v = exec_lag1_variance(d, 8, tmp);
        sum += v;
        sum2 += v * v;
    }
    gsl_rng_free(g);
    double mean = sum / series, se = sqrt((sum2 / series - mean * mean) / series);
    CU_ASSERT(fabs(mean) < 4 * se);
    CU_ASSERT(se < 0.01); /* and the lag-1 autocovariance alone, -1/8, is far outside */
}

static void test_rank_drift(void) {
    const double a = 0.02;
    double d[24], tmp[24];
    for (int k = 0; k < 24; k++) d[k] = k < 12 ? a : -a;
    CU_ASSERT_DOUBLE_EQUAL(exec_lag1_variance(d, 24, tmp), 22 * a * a / 23, 1e-15);
    for (int k = 0; k < 24; k++) d[k] = k % 2 ? -a : a;
    CU_ASSERT_DOUBLE_EQUAL(exec_lag1_variance(d, 24, tmp), -a * a + a * a / 23, 1e-15);
    lag1_unbiased();
    double clipped[24];
    for (int k = 0; k < 24; k++) d[k] = clipped[k] = k < 12 ? a : -a;
    d[4] = 1;
    clipped[4] = 3 * 1.4826 * a;
    double mu = 0, want = 0;
    for (int k = 0; k < 24; k++) mu += clipped[k] / 24;
    for (int k = 0; k < 23; k++) want += (clipped[k] - mu) * (clipped[k + 1] - mu) / 23;
    for (int k = 0; k < 24; k++) want += (clipped[k] - mu) * (clipped[k] - mu) / 23 / 24;
    CU_ASSERT_DOUBLE_EQUAL(exec_lag1_variance(d, 24, tmp), want, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(d[4], clipped[4], 1e-15); /* clipped in place */
    /* the drift over the workers' rounds */
    double m0[25], m1[24], m2[24], scratch[64];
    for (int k = 0; k < 25; k++) m0[k] = 2.0;
    for (int k = 0; k < 24; k++) {
        m1[k] = 2.0 * exp(k < 12 ? -a : a); /* log(m0 / m1) = +a, then -a */
        m2[k] = 2.0;
    }
    const double *means[3] = {m0, m1, m2};
    size_t n[3] = {25, 24, 24};
    CU_ASSERT_DOUBLE_EQUAL(exec_drift_of(means, n, 2, scratch), sqrt(22 * a * a / 23 / 2), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_drift_of(means, n, 3, scratch), sqrt(22 * a * a / 23 / 3), 1e-12);
    CU_ASSERT_EQUAL(exec_drift_of(means, n, 1, scratch), 0);
    size_t few[2] = {7, 7};
    CU_ASSERT_EQUAL(exec_drift_of(means, few, 2, scratch), 0);
    for (int k = 0; k < 24; k++) m1[k] = 2.0 * exp(k % 2 ? -a : a);
    CU_ASSERT_EQUAL(exec_drift_of(means, n, 2, scratch), 0);
    /* the profile's line: a positive drift, else the term off */
    double drift = -1;
    const char *line = "# x\n# " EXEC_PROFILE_META " concurrency=2 step_s=0.001 rank_drift=0.0125\n";
    CU_ASSERT_EQUAL(exec_profile_drift(line, strlen(line), &drift), 0);
    CU_ASSERT_DOUBLE_EQUAL(drift, 0.0125, 1e-15);
    const char *off[] = {"# " EXEC_PROFILE_META " concurrency=2 step_s=0.001 rank_drift=0\n",
                         "# " EXEC_PROFILE_META " concurrency=2 step_s=0.001\n",
                         "# " EXEC_PROFILE_META " concurrency=2 step_s=0.001 rank_drift=x\n", "# nothing\n"};
    for (size_t k = 0; k < sizeof off / sizeof *off; k++) {
        drift = 7;
        CU_ASSERT_EQUAL(exec_profile_drift(off[k], strlen(off[k]), &drift), -1);
        CU_ASSERT_EQUAL(drift, 7);
    }
}

/* The pass-length factors of a series whose units take 0.5 ms by the profile's medians and whose
 * every 16th unit is interrupted for 5 ms more: a window of 8 ms (16 units) or longer holds one
 * interruption per 8 ms wherever it starts, (8 + 5) / 8 = 1.625, also beyond the series (its whole
 * ratio); windows of 1 and 2 ms mostly hold none (median 1). */
static void test_window_factors(void) {
    double a[64], c[64], g[EXEC_WINDOWS];
    for (int i = 0; i < 64; i++) {
        c[i] = 0.5e-3;
        a[i] = i % 16 == 15 ? 5.5e-3 : 0.5e-3;
    }
    exec_window_factors(a, c, 64, g);
    CU_ASSERT_DOUBLE_EQUAL(g[0], 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(g[1], 1.0, 1e-12);
    for (int j = 3; j < EXEC_WINDOWS; j++) CU_ASSERT_DOUBLE_EQUAL(g[j], 1.625, 1e-12);
    /* a window that ends inside a unit takes that unit's share: units of 0.75 ms by the medians,
     * every other one twice as long, windows of 1 ms */
    double a2[8], c2[8], g2[EXEC_WINDOWS];
    for (int i = 0; i < 8; i++) {
        c2[i] = 0.75e-3;
        a2[i] = i % 2 ? 1.5e-3 : 0.75e-3; /* ratio 1 or 2 */
    }
    exec_window_factors(a2, c2, 8, g2);
    /* starts 0..6 fit: from a unit of ratio 1, (0.75 + 0.25 x 2) / 1 = 1.25 (4 of them); from one
     * of ratio 2, (1.5 + 0.25) / 1 = 1.75 (3): median 1.25 (whole units would give 1.5 each) */
    CU_ASSERT_DOUBLE_EQUAL(g2[0], 1.25, 1e-12);
    /* a window longer than the series: its whole ratio (4 x 0.75 + 4 x 1.5) / 6 = 1.5 */
    CU_ASSERT_DOUBLE_EQUAL(g2[EXEC_WINDOWS - 1], 1.5, 1e-12);
    /* no clean time: the term is off (all 0) */
    double z[4] = {0, 0, 0, 0};
    exec_window_factors(a, z, 4, g);
    for (int j = 0; j < EXEC_WINDOWS; j++) CU_ASSERT_EQUAL(g[j], 0.0);
    /* the factor at a pass's length: linear in log2 of it between windows, the ends beyond */
    for (int j = 0; j < EXEC_WINDOWS; j++) g[j] = 1 + 0.01 * j;
    CU_ASSERT_DOUBLE_EQUAL(exec_window_length_s(3), 8e-3, 1e-18);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor(g, 4e-3), 1.02, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor(g, 4e-3 * sqrt(2.0)), 1.025, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor(g, 1e-4), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor(g, 100.0), 1.12, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor(g, 0), 1.0, 0);
    /* the workers' mean: a second worker's factors 1 + 0.03 j give (1.02 + 1.06) / 2 at 4 ms and
     * (1.025 + 1.075) / 2 between 4 and 8 ms; one worker its own; none 1 */
    double g3[2 * EXEC_WINDOWS];
    for (int j = 0; j < EXEC_WINDOWS; j++) g3[j] = g[j], g3[EXEC_WINDOWS + j] = 1 + 0.03 * j;
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor_mean(g3, 2, 4e-3), 1.04, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor_mean(g3, 2, 4e-3 * sqrt(2.0)), 1.05, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor_mean(g3, 1, 4e-3), 1.02, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_window_factor_mean(g3, 0, 4e-3), 1.0, 0);
    /* the CSV's windows lines and reading them back */
    exec_layer_profile p[2];
    memset(p, 0, sizeof p);
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(exec_window_line(&p[0], 0, &b), 0); /* not measured: no line */
    CU_ASSERT_EQUAL(b.len, 0);
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < EXEC_WINDOWS; j++) p[w].window[j] = 1 + 0.001 * j + 0.5 * w;
    for (int w = 0; w < 2; w++) CU_ASSERT_EQUAL(exec_window_line(&p[w], w, &b), 1);
    double r[2 * EXEC_WINDOWS];
    int line = -1;
    CU_ASSERT_EQUAL_FATAL(exec_profile_worker_windows(b.data, b.len, 2, r, &line), 0);
    CU_ASSERT_EQUAL(line, 0);
    for (int w = 0; w < 2; w++)
        for (int j = 0; j < EXEC_WINDOWS; j++) CU_ASSERT_DOUBLE_EQUAL(r[w * EXEC_WINDOWS + j], p[w].window[j], 1e-6);
    CU_ASSERT_EQUAL(exec_profile_worker_windows(b.data, b.len, 3, r, NULL), -1); /* a worker missing */
    CU_ASSERT_EQUAL(exec_profile_worker_windows(b.data, b.len, 1, r, NULL), -1); /* more workers than ranks */
    CU_ASSERT_EQUAL(exec_profile_worker_windows("# no windows\n", 13, 1, r, &line), -1);
    const char *bad[] = {"# pipelab-exec windows worker=0 first_ms=1 factors=1,1,1\n",
                         "# pipelab-exec windows worker=0 first_ms=2 factors=1,1,1,1,1,1,1,1,1,1,1,1,1\n",
                         "# pipelab-exec windows worker=0 first_ms=1 factors=1,1,1,1,1,1,1,1,1,1,1,1,-1\n",
                         "# pipelab-exec windows worker=0 first_ms=1 factors=1,1,1,1,1,1,1,1,1,1,1,1,1,1\n",
                         "# pipelab-exec windows worker=x first_ms=1 factors=1,1,1,1,1,1,1,1,1,1,1,1,1\n"};
    int bad_at;
    /* malformed: -2 and the line, here the third (after a header and a comment) */
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[256];
        snprintf(text, sizeof text, "layer,name\n# a comment\n%s", bad[k]);
        bad_at = 0;
        CU_ASSERT_EQUAL(exec_profile_worker_windows(text, strlen(text), 1, r, &bad_at), -2);
        CU_ASSERT_EQUAL(bad_at, 3);
    }
    const char *good = "# pipelab-exec windows worker=0 first_ms=1 factors=1,1,1,1,1,1,1,1,1,1,1,1,1.5\n";
    CU_ASSERT_EQUAL(exec_profile_worker_windows(good, strlen(good), 1, r, NULL), 0);
    CU_ASSERT_DOUBLE_EQUAL(r[EXEC_WINDOWS - 1], 1.5, 0);
    pl_buf_free(&b);
}

/* The profile CSV's executor line (exec_profile_lines_check), checked as the cost model checks
 * "#@" metadata: a good line (the one exec_profile_csv_n writes, keys in any order, without
 * rank_drift) passes and reads back; a STEP or drift of nan or below 0, a concurrency of 0, an
 * unknown, repeated or missing key, a field that is not key=value each give "FILE:LINE: ..."
 * naming the key and the value; the worker, windows and rounds lines are not this line. */
static void test_profile_meta_line(void) {
    const char *head = "# pipelab profile: a comment\n#@ microbatch_size=2\n";
    static const struct {
        const char *line, *want;
    } bad[] = {
        {"concurrency=2 step_s=nan rank_drift=0", "f.csv:3: step_s must be a finite number >= 0 (got 'nan')"},
        {"concurrency=2 step_s=-1 rank_drift=0", "f.csv:3: step_s must be a finite number >= 0 (got '-1')"},
        {"concurrency=2 step_s=inf", "f.csv:3: step_s must be a finite number >= 0 (got 'inf')"},
        {"concurrency=0 step_s=0.001 rank_drift=0", "f.csv:3: concurrency must be an integer >= 1 (got '0')"},
        {"concurrency=1.5 step_s=0.001", "f.csv:3: concurrency must be an integer >= 1 (got '1.5')"},
        {"concurrency=2 step_s=0.001 rank_drift=nan", "f.csv:3: rank_drift must be a finite number >= 0 (got 'nan')"},
        {"concurrency=2 step_s=0.001 rank_drift=-0.5", "f.csv:3: rank_drift must be a finite number >= 0 (got '-0.5')"},
        {"concurrency=2 step_s=0.001 colour=red", "f.csv:3: unknown key 'colour' (known: concurrency, step_s, rank_drift)"},
        {"concurrency=2 step_s=0.001 step_s=0.002", "f.csv:3: key 'step_s' appears twice"},
        {"concurrency=2", "f.csv:3: missing key 'step_s'"},
        {"step_s=0.001", "f.csv:3: missing key 'concurrency'"},
        {"concurrency=2 step_s=0.001 x", "f.csv:3: 'x' is not key=value"},
    };
    char text[512];
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        snprintf(text, sizeof text, "%s# " EXEC_PROFILE_META " %s\nlayer,name\n", head, bad[k].line);
        pl_err e = {0};
        CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", text, strlen(text), &e), PL_EINPUT);
        if (!strstr(e.msg, bad[k].want)) fprintf(stderr, "\n%s: got '%s'\n", bad[k].line, e.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[k].want));
        int c = 7;
        CU_ASSERT_EQUAL(exec_profile_meta(text, strlen(text), &c, NULL), -1); /* not read either */
        CU_ASSERT_EQUAL(c, 7);
    }
    /* good lines; the worker, windows and rounds lines after them are not checked as this one */
    static const char *const good[] = {
        "concurrency=2 step_s=0.00025 rank_drift=0.0125\n"
        "# " EXEC_PROFILE_META " worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 bwd_in0_s=1\n"
        "# " EXEC_PROFILE_META " windows worker=0 first_ms=1 factors=1,1,1,1,1,1,1,1,1,1,1,1,1\n"
        "# " EXEC_PROFILE_META " rounds worker=0 f=1,2,3\n",
        "rank_drift=0.0125 step_s=0.00025 concurrency=2\r\n",
        "concurrency=2 step_s=2.5e-4\n",
        "concurrency=1 step_s=0 rank_drift=0\n"};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        snprintf(text, sizeof text, "%s# " EXEC_PROFILE_META " %slayer,name\n", head, good[k]);
        pl_err e = {0};
        CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", text, strlen(text), &e), PL_OK);
        if (e.code != PL_OK) fprintf(stderr, "\n%s", e.msg);
        int c = 0;
        double st = -1, drift = -1;
        CU_ASSERT_EQUAL(exec_profile_meta(text, strlen(text), &c, &st), 0);
        CU_ASSERT_EQUAL(c, k == 3 ? 1 : 2);
        CU_ASSERT_DOUBLE_EQUAL(st, k == 3 ? 0 : 0.00025, 1e-18);
        CU_ASSERT_EQUAL(exec_profile_drift(text, strlen(text), &drift), k < 2 ? 0 : -1);
        if (k < 2) CU_ASSERT_DOUBLE_EQUAL(drift, 0.0125, 1e-18);
    }
    /* no executor line: nothing to check, nothing read */
    pl_err e = {0};
    CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", head, strlen(head), &e), PL_OK);
    CU_ASSERT_EQUAL(exec_profile_meta(head, strlen(head), NULL, NULL), -1);
}

/* A profile CSV that starts with a UTF-8 byte order mark, its executor line first: the line
 * check reads past the mark as the cost model's reader does (a malformed line is refused as line
 * 1, a good one passes) and the readers take the executor and worker lines there. */
static void test_profile_lines_bom(void) {
    static const char bom[] = "\xEF\xBB\xBF";
    char text[512];
    snprintf(text, sizeof text, "%s# " EXEC_PROFILE_META " concurrency=2 step_s=nan\nlayer,name\n", bom);
    pl_err e = {0};
    CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", text, strlen(text), &e), PL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "f.csv:1: step_s must be a finite number >= 0 (got 'nan')");
    snprintf(text, sizeof text, "%s# " EXEC_PROFILE_META " worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n"
             "# " EXEC_PROFILE_META " worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=5\n", bom);
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", text, strlen(text), &e), PL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "f.csv:2: a second worker line of worker 0 (the first is line 1)");
    snprintf(text, sizeof text, "%s# " EXEC_PROFILE_META " concurrency=2 step_s=0.25\n"
             "# " EXEC_PROFILE_META " worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\nlayer,name\n", bom);
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", text, strlen(text), &e), PL_OK);
    int c = 0;
    double st = -1, step = -1;
    CU_ASSERT_EQUAL(exec_profile_meta(text, strlen(text), &c, &st), 0);
    CU_ASSERT_EQUAL(c, 2);
    CU_ASSERT_DOUBLE_EQUAL(st, 0.25, 0);
    CU_ASSERT_EQUAL(exec_profile_worker_steps(text, strlen(text), 1, &step), 0);
    CU_ASSERT_DOUBLE_EQUAL(step, 4, 0);
    /* a worker line first, past the mark */
    snprintf(text, sizeof text, "%s# " EXEC_PROFILE_META " worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n", bom);
    step = -1;
    CU_ASSERT_EQUAL(exec_profile_worker_steps(text, strlen(text), 1, &step), 0);
    CU_ASSERT_DOUBLE_EQUAL(step, 4, 0);
}

/* The worker lines (exec_worker_line, exec_profile_lines_check, the readers): a profile's times
 * written as the golden line below, every key in its place, and read back; a malformed line, a
 * worker's second line of a kind or a second executor line refused with FILE:LINE and what is
 * wrong, and the readers take no term from a malformed line. */
static void test_profile_worker_lines(void) {
    exec_layer_profile p;
    memset(&p, 0, sizeof p);
    p.f_s = 0.25;
    p.i_s = 0.5;
    p.w_s = 0.75;
    p.step_s = 1.0;
    p.i0_s = 1.25;
    p.i_hot_s = 1.5;
    p.w_hot_s = 1.75;
    p.f_first_s = 2.0;
    p.i_first_s = 2.25;
    p.w_first_s = 2.5;
    p.f_rest_s = 2.75;
    p.i_rest_s = 3.0;
    p.w_rest_s = 3.25;
    p.f_again_s = 3.5;
    p.i_again_s = 3.75;
    p.w_again_s = 4.0;
    p.i_next_s = 4.25;
    p.f_back_s = 4.5;
    p.f_sd_s = 4.75;
    p.f_two_s = 5.0;
    p.i_two_s = 5.25;
    p.w_two_s = 5.5;
    p.f_one_s = 5.75;
    p.i_one_s = 6.0;
    p.w_one_s = 6.25;
    p.step_mean_s = 6.5;
    p.f_alone_s = 6.75;
    p.f_side_s = 7.0;
    p.f_cross_s = 7.25;
    p.b_alone_s = 7.5;
    p.b_side_s = 8.0;
    p.b_cross_s = 8.5;
    pl_buf b;
    pl_buf_init(&b);
    exec_worker_line(&p, 1, -1, &b);
    const char *golden = "# " EXEC_PROFILE_META " worker=1 core=-1 fwd_s=0.25 bwd_in_s=0.5 bwd_w_s=0.75 step_s=1 bwd_in0_s=1.25 bwd_in_hot_s=1.5 bwd_w_hot_s=1.75 fwd_first_s=2 bwd_in_first_s=2.25 bwd_w_first_s=2.5 fwd_rest_s=2.75 bwd_in_rest_s=3 bwd_w_rest_s=3.25 fwd_again_s=3.5 bwd_in_again_s=3.75 bwd_w_again_s=4 bwd_in_next_s=4.25 fwd_back_s=4.5 fwd_sd_s=4.75 fwd_two_s=5 bwd_in_two_s=5.25 bwd_w_two_s=5.5 fwd_one_s=5.75 bwd_in_one_s=6 bwd_w_one_s=6.25 step_mean_s=6.5 fwd_alone_s=6.75 fwd_side_s=7 fwd_cross_s=7.25 bwd_alone_s=7.5 bwd_side_s=8 bwd_cross_s=8.5\n";
    CU_ASSERT_STRING_EQUAL(b.data, golden);
    exec_worker_line(&p, 0, 3, &b);
    pl_err e = {0};
    CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", b.data, b.len, &e), PL_OK);
    double step[2] = {0, 0}, share[2] = {0, 0}, ir[2] = {0, 0}, wr[2] = {0, 0};
    CU_ASSERT_EQUAL(exec_profile_worker_steps(b.data, b.len, 2, step), 0);
    CU_ASSERT_DOUBLE_EQUAL(step[0], 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(step[1], 1.0, 0);
    CU_ASSERT_EQUAL(exec_profile_worker_share(b.data, b.len, 2, share), 0);
    CU_ASSERT_DOUBLE_EQUAL(share[1], 6.75 / 7.0, 1e-15);
    double cls[6] = {0};
    CU_ASSERT_EQUAL(exec_profile_worker_share_class(b.data, b.len, 2, cls), 0);
    CU_ASSERT_DOUBLE_EQUAL(cls[3], 7.25 / 7.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cls[4], 7.5 / 8.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cls[5], 8.5 / 8.0, 1e-15);
    CU_ASSERT_EQUAL(exec_profile_worker_reuse(b.data, b.len, 2, ir, wr), 0);
    CU_ASSERT_DOUBLE_EQUAL(ir[0], 1.5 / 0.5, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(wr[0], 1.75 / 0.75, 1e-15);
    pl_buf_free(&b);
    static const struct {
        const char *lines, *want;
    } bad[] = {
        {"worker=0 core=0 fwd_s=nan bwd_in_s=2 bwd_w_s=3 step_s=4\n", "f.csv:2: fwd_s must be a finite number >= 0 (got 'nan')"},
        {"worker=0 core=0 fwd_s=1 bwd_in_s=-2 bwd_w_s=3 step_s=4\n", "f.csv:2: bwd_in_s must be a finite number >= 0 (got '-2')"},
        {"worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3\n", "f.csv:2: missing key 'step_s'"},
        {"worker=0 core=0 fwd_s=1 bwd_w_s=3 bwd_in_s=2 step_s=4\n", "f.csv:2: field 4 must be bwd_in_s=..., got 'bwd_w_s'"},
        {"worker=-1 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n", "f.csv:2: worker must be an integer from 0 to 65535 (got '-1')"},
        {"worker=0 core=-2 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n", "f.csv:2: core must be an integer >= -1 (got '-2')"},
        {"worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4 x\n", "f.csv:2: 'x' is not key=value"},
        {"worker=0 core=0 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n# " EXEC_PROFILE_META " worker=0 core=1 fwd_s=1 bwd_in_s=2 bwd_w_s=3 step_s=4\n",
         "f.csv:3: a second worker line of worker 0 (the first is line 2)"},
        {"windows worker=0 first_ms=1 factors=1,1\n", "f.csv:2: a malformed pass-length line"},
        {"windows worker=0 first_ms=1 factors=1,1,1,1,1,1,1,1,1,1,1,1,1\n# " EXEC_PROFILE_META " windows worker=0 first_ms=1 factors=1,1,1,1,1,1,1,1,1,1,1,1,1\n",
         "f.csv:3: a second pass-length line of worker 0 (the first is line 2)"},
        {"rounds worker=0 f=1,-2\n", "f.csv:2: a malformed rounds line"},
        {"rounds worker=99999 f=1,2\n", "f.csv:2: a malformed rounds line"},
        {"concurrency=1 step_s=0\n", "f.csv:2: a second executor line (the first is line 1)"},
    };
    char text[1024];
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        snprintf(text, sizeof text, "# " EXEC_PROFILE_META " concurrency=2 step_s=1\n# " EXEC_PROFILE_META " %s", bad[k].lines);
        pl_err e2 = {0};
        CU_ASSERT_EQUAL(exec_profile_lines_check("f.csv", text, strlen(text), &e2), PL_EINPUT);
        if (!strstr(e2.msg, bad[k].want)) fprintf(stderr, "\n%s: got '%s'\n", bad[k].lines, e2.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, bad[k].want));
        if (k < 7) { /* the readers take nothing from a malformed worker line */
            double st[1] = {0};
            CU_ASSERT_EQUAL(exec_profile_worker_steps(text, strlen(text), 1, st), -1);
        }
    }
    /* a full line with a key past the last one */
    snprintf(text, sizeof text, "%.*s colour=red\n", (int)(strlen(golden) - 1), golden);
    pl_err e3 = {0};
    CU_ASSERT_EQUAL(exec_profile_lines_check("g.csv", text, strlen(text), &e3), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e3.msg, "g.csv:1: 'colour' after the last key of a worker line, bwd_cross_s"));
}

/* The states term's rounds lines (exec_rounds_line, exec_profile_worker_rounds): each worker's F
 * of each round written and read back as its speed over its median round, the rounds of both
 * ranks side by side. Worker 0 runs 10 rounds at 2 ms and 4 ms by turns in pairs, worker 1 at 3
 * ms but 6 ms in rounds 2 and 7; round 5 of worker 1 did not finish (0), so 9 rounds remain, and
 * worker 0's median among them is 2 ms (5 at 2 ms, 4 at 4 ms). The backwards (b=) go their own
 * way: worker 0's 5 ms but 10 ms in round 3, worker 1's 5 ms and 7.5 ms by turns (odd rounds
 * slow: among the 9, 5 at 5 ms, so its median is 5 ms). Lines without b= give the backwards F's
 * speeds. Fewer than EXEC_STATE_MIN_ROUNDS rounds together, a worker missing or a malformed line
 * (a b= of another count too) turn the term off or fail with the line's number. */
static void test_state_rounds(void) {
    exec_layer_profile p[2];
    memset(p, 0, sizeof p);
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(exec_rounds_line(&p[0], 0, &b), 0); /* not measured: no line */
    CU_ASSERT_EQUAL(b.len, 0);
    const double w0[10] = {2e-3, 2e-3, 4e-3, 4e-3, 2e-3, 2e-3, 4e-3, 4e-3, 2e-3, 2e-3};
    for (int k = 0; k < 10; k++) {
        p[0].round_f[k] = w0[k];
        p[1].round_f[k] = k == 2 || k == 7 ? 6e-3 : k == 5 ? 0 : 3e-3;
    }
    p[0].n_round_f = p[1].n_round_f = 10;
    for (int w = 0; w < 2; w++) CU_ASSERT_EQUAL(exec_rounds_line(&p[w], w, &b), 1);
    CU_ASSERT_PTR_NULL(strstr(b.data, " b=")); /* no backwards measured: no b= */
    double sp[2 * EXEC_STATE_ROUNDS], sb[2 * EXEC_STATE_ROUNDS];
    int line = -1;
    CU_ASSERT_EQUAL_FATAL(exec_profile_worker_rounds(b.data, b.len, 2, sp, sb, &line), 9);
    CU_ASSERT_EQUAL(line, 0);
    for (int k = 0, j = 0; k < 10; k++) {
        if (k == 5) continue;
        CU_ASSERT_DOUBLE_EQUAL(sp[2 * j], w0[k] / 2e-3, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(sp[2 * j + 1], k == 2 || k == 7 ? 2.0 : 1.0, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(sb[2 * j], sp[2 * j], 0); /* F's, without b= */
        CU_ASSERT_DOUBLE_EQUAL(sb[2 * j + 1], sp[2 * j + 1], 0);
        j++;
    }
    for (int k = 0; k < 10; k++) { /* the backwards, measured */
        p[0].round_b[k] = k == 3 ? 10e-3 : 5e-3;
        p[1].round_b[k] = k == 5 ? 0 : k % 2 ? 7.5e-3 : 5e-3;
    }
    pl_buf_free(&b);
    pl_buf_init(&b);
    for (int w = 0; w < 2; w++) CU_ASSERT_EQUAL(exec_rounds_line(&p[w], w, &b), 1);
    CU_ASSERT_EQUAL_FATAL(exec_profile_worker_rounds(b.data, b.len, 2, sp, sb, &line), 9);
    for (int k = 0, j = 0; k < 10; k++) {
        if (k == 5) continue;
        CU_ASSERT_DOUBLE_EQUAL(sp[2 * j], w0[k] / 2e-3, 1e-9); /* F's unchanged */
        CU_ASSERT_DOUBLE_EQUAL(sb[2 * j], k == 3 ? 2.0 : 1.0, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(sb[2 * j + 1], k % 2 ? 1.5 : 1.0, 1e-9);
        j++;
    }
    CU_ASSERT_EQUAL(exec_profile_worker_rounds(b.data, b.len, 3, sp, NULL, NULL), 0); /* a worker missing */
    CU_ASSERT_EQUAL(exec_profile_worker_rounds(b.data, b.len, 1, sp, NULL, NULL), 10); /* one rank: its own */
    p[1].n_round_f = 8; /* 7 rounds together, round 5 left out: too few */
    pl_buf_free(&b);
    pl_buf_init(&b);
    for (int w = 0; w < 2; w++) exec_rounds_line(&p[w], w, &b);
    CU_ASSERT_EQUAL(exec_profile_worker_rounds(b.data, b.len, 2, sp, NULL, NULL), 0);
    CU_ASSERT_EQUAL(exec_profile_worker_rounds("# no rounds\n", 12, 1, sp, NULL, NULL), 0);
    const char *bad[] = {"# pipelab-exec rounds worker=0 f=1,2,-3\n", "# pipelab-exec rounds worker=x f=1,2\n",
                         "# pipelab-exec rounds worker=0 f=\n", "# pipelab-exec rounds worker=0 f=1;2\n",
                         "# pipelab-exec rounds worker=0 f=1,2 b=1\n", "# pipelab-exec rounds worker=0 f=1,2 b=1,-2\n",
                         "# pipelab-exec rounds worker=0 f=1,2 c=1,2\n", "# pipelab-exec rounds worker=0 f=1,2 b=1,2,3\n"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[256];
        snprintf(text, sizeof text, "layer,name\n# a comment\n%s", bad[k]);
        line = 0;
        CU_ASSERT_EQUAL(exec_profile_worker_rounds(text, strlen(text), 1, sp, NULL, &line), -2);
        CU_ASSERT_EQUAL(line, 3);
    }
    pl_buf_free(&b);
}

/* A run whose memory exceeds the limit is refused before it allocates, naming what it needs and
 * the limit; the same run fits a larger limit. Threads (the whole model in this process) and one
 * rank's process (only its share of the blocks counts). */
static void test_memory_refused_up_front(void) {
    sched *s = lowered("gpipe", 2, 4, 0, 0, SCHED_RECOMPUTE_NONE);
    g_hidden = 256;
    exec_config c = small_cfg(4); /* 4 blocks of 2 x 256 x 512 + 768 floats: 1 051 648 bytes each */
    g_hidden = 0;
    c.timed_passes = 1;
    exec_result r;
    pl_err e;
    /* the process (16 MiB, and 2 MiB a rank), the ranks' arenas (weight versions, gradients,
     * stashes, buffers: over 8 MiB for the 4 blocks), the data set: over 28 MiB */
    sched_budget_init(&c.budget, 0, "24MiB"); /* as the CLI fills it from $PIPELAB_MAX_MEMORY */
    CU_ASSERT_EQUAL(exec_run(s, &c, &r, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "does not fit") != NULL && strstr(e.msg, "4 blocks of width 256") != NULL &&
              strstr(e.msg, "needs about") != NULL && strstr(e.msg, "more than the 24.0 MiB available (PIPELAB_MAX_MEMORY)") != NULL);
    /* one rank's process holds 2 of the 4 blocks: over 16 MiB with the process's own */
    exec_transport *t = exec_threads_transport_new(2, 8, 4 * 256 * sizeof(float), 5, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    sched_budget_init(&c.budget, 0, "16MiB");
    exec_rank_record rec;
    CU_ASSERT_EQUAL(exec_run_rank(s, &c, &t[0], &rec, &e), PL_EINPUT);
    CU_ASSERT(strstr(e.msg, "this rank's process") != NULL && strstr(e.msg, "2 blocks") != NULL);
    exec_threads_transport_free(t, 2);
    sched_budget_init(&c.budget, 0, "64MiB");
    CU_ASSERT_EQUAL(exec_run(s, &c, &r, &e), PL_OK);
    exec_result_free(&r);
    sched_free(s);
}

void exec_test_rank_register(void); /* test_exec_rank.c */
void exec_test_run_register(void);  /* test_exec_run.c */
void exec_test_faults_register(void); /* test_exec_faults.c */
void exec_test_replicas_register(void); /* test_exec_replicas.c */
void exec_test_gpt_register(void);    /* test_exec_gpt.c */
void exec_test_history_register(void); /* test_exec_history.c */
void exec_test_cuda_absent_register(void); /* test_exec_cuda_absent.c */
void exec_test_profile_cores_register(void); /* test_exec_profile_cores.c */

void pl_test_register(void) {
    static const pl_test_case math[] = {
        {"the weights' generator: fills match single draws, N(0, std^2), pairs uncorrelated", test_normal_fill},
        {"the weights' generator split over threads: the same values", test_normal_fill_team},
        {"the data set: the entries a run reads, its targets those of the target network", test_data_build},
        {"gradient check of one block (fp64 finite differences)", test_gradcheck},
        {"I then W equals B", test_i_plus_w_equals_b},
        {"recomputation gives identical weights", test_recompute_identical},
        {"huge pages give identical weights", test_huge_pages_identical},
        {"profile one block", test_profile},
        {"cache-line and huge-page buffers (exec_lines_alloc)", test_lines},
        {"profile between the passes: each gap's timed and opening rounds", test_profile_gap_rounds},
        {"the host probe: one forward of the default block, together and alone", test_host_probe},
        {"the host's interruptions: windows, fractions, refusals", test_interruptions},
        {"the hand-off profile: one-way times in the stamps, the fit over one way or two", test_p2p_side},
        {"the hand-off profile: a receiver late from its compute does not lengthen the hand-off", test_p2p_late_receiver},
        {"a thread bound to one core runs on all of the process's once unbound", test_platform_unbind},
        {"profile between the passes: same training, each worker's times", test_profile_between},
        {"profile between the passes: its blocks' weights copied from the rank's or drawn, read where the rank keeps them", test_profile_copied_weights},
        {"profile between the passes: its W and STEP on the rank's gradients, weights and momentum in a gap, the momentum put back", test_profile_lent_state},
        {"profile between the passes: weight versions in flight, same training", test_profile_between_versions},
        {"profile worker lines: the reuse-distance ratios, old lines without them", test_profile_reuse_lines},
        {"pass-length factors: windows over a worker's samples, their lines", test_window_factors},
        {"the profile's executor line: every key known and in range, else FILE:LINE", test_profile_meta_line},
        {"a profile CSV's byte order mark: its executor lines checked and read past it", test_profile_lines_bom},
        {"the worker, pass-length and rounds lines: written and read by one key table, else FILE:LINE",
         test_profile_worker_lines},
        {"the states term's rounds: each worker's speed over its median round, side by side", test_state_rounds},
        {"the ranks' drift: the persistent variance of a series, the profile's line", test_rank_drift},
        {"a model that does not fit is refused up front", test_memory_refused_up_front},
        {NULL, NULL}};
    static const pl_test_case sched_cases[] = {
        {"gpipe = sequential", test_gpipe},
        {"1f1b = sequential", test_1f1b},
        {"interleaved = sequential", test_interleaved},
        {"zb-h1 = sequential", test_zb_h1},
        {"zb-h2 = sequential", test_zb_h2},
        {"zbv = sequential", test_zbv},
        {"dualpipev = sequential", test_dualpipev},
        {"PyTorch's CSV files = sequential", test_torch_files},
        {"pipedream = stash reference", test_pipedream},
        {"2bw = 2bw reference", test_2bw},
        {"weight versions in padded slots (hidden 10)", test_versions_padded_slots},
        {"momentum and an uneven split", test_momentum_and_split},
        {"stash reference differs from flush", test_stash_differs_from_flush},
        {"loss falls", test_loss_falls},
        {"transformer: every schedule kind = sequential", test_gpt_every_kind},
        {NULL, NULL}};
    static const pl_test_case mem[] = {
        {"1f1b peak memory closed form", test_memory_closed_form},
        {"pipedream weight versions", test_memory_stash_versions},
        {"executor's memory walked before the run = measured", test_memory_walk_is_measured},
        {NULL, NULL}};
    static const pl_test_case faults[] = {
        {"injected error stops the run", test_fault_error},
        {"wrong-size message", test_fault_bad_size},
        {"memory budget", test_fault_budget},
        {"the profile's blocks: a rank's share, within a thread's share of twice the last-level cache", test_profile_blocks_cap},
        {"bad schedule refused", test_bad_schedule},
        {"configuration errors", test_config_errors},
        {"timing until steady: the rule, the passes, the training", test_steady_rule},
        {"in-process transport: sizes, timeout, stuck", test_transport},
        {"oversubscription warning", test_oversubscribe_warning},
        {NULL, NULL}};
    pl_test_suite("exec math", math);
    pl_test_suite("exec schedules", sched_cases);
    pl_test_suite("exec memory", mem);
    pl_test_suite("exec faults", faults);
    exec_test_rank_register();
    exec_test_run_register();
    exec_test_faults_register();
    exec_test_replicas_register();
    exec_test_gpt_register();
    exec_test_history_register();
    exec_test_cuda_absent_register();
    exec_test_profile_cores_register();
}
