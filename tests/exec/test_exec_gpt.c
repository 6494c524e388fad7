/* test_exec_gpt.c: the executor's transformer block (gpt.c) against an independent fp64
 * implementation and its finite differences: the forward and loss, every parameter's gradient
 * and the input gradient, the causal mask, and the split of I into its parts. (Pipelines of this
 * block against the sequential reference: test_exec.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec_drive.h"
#include "exec_int.h"
#include "pl_test.h"

exec_config exec_test_small_cfg(int layers, exec_block_kind block); /* test_exec.c */

/* The tiny block of these tests: B = 2 sequences of S = 4 tokens (R = 8 rows), width 8, 2 heads
 * of 4 channels, ffn 16. */
#define T_SEQS 2
#define T_SEQ 4
#define T_H 8
#define T_HEADS 2
#define T_F 16

static exec_dims tiny_dims(void) {
    exec_dims d = {.h = T_H, .f = T_F, .b = T_SEQS * T_SEQ, .layers = 2, .block = EXEC_BLOCK_GPT, .heads = T_HEADS,
                   .seq = T_SEQ};
    return d;
}

/* ---------------------------------------------------------------- the fp64 oracle */

/* y [R, h] = LayerNorm(x) with gain g and bias be (eps 1e-5), in fp64. */
static void ln64(int R, int h, const double *x, const double *g, const double *be, double *y) {
    for (int r = 0; r < R; r++) {
        double mu = 0, var = 0;
        for (int c = 0; c < h; c++) mu += x[r * h + c];
        mu /= h;
        for (int c = 0; c < h; c++) var += (x[r * h + c] - mu) * (x[r * h + c] - mu);
        double rs = 1 / sqrt(var / h + 1e-5);
        for (int c = 0; c < h; c++) y[r * h + c] = g[c] * (x[r * h + c] - mu) * rs + be[c];
    }
}

/* y [R, n] = x [R, k] W^T + bias, W [n, k], in fp64. */
static void lin64(int R, int n, int k, const double *x, const double *w, const double *bias, double *y) {
    for (int r = 0; r < R; r++)
        for (int o = 0; o < n; o++) {
            double z = bias[o];
            for (int i = 0; i < k; i++) z += x[r * k + i] * w[o * k + i];
            y[r * n + o] = z;
        }
}

/* The block's forward in fp64 from the parameter layout of exec_int.h, written from the
 * definition (softmax over j <= i of q_i . k_j / sqrt(dh)), not from gpt.c. */
static void gpt64(const double *p, const double *x, double *y) {
    enum { R = T_SEQS * T_SEQ, H = T_H, F = T_F, DH = T_H / T_HEADS };
    const double *w1 = p, *b1 = w1 + H * F, *w2 = b1 + F, *b2 = w2 + H * F;
    const double *wqkv = b2 + H, *bqkv = wqkv + 3 * H * H, *wo = bqkv + 3 * H, *bo = wo + H * H;
    const double *g1 = bo + H, *be1 = g1 + H, *g2 = be1 + H, *be2 = g2 + H;
    double xn[R * H], qkv[R * 3 * H], att[R * H], x2[R * H], hid[R * F], o[R * H];
    ln64(R, H, x, g1, be1, xn);
    lin64(R, 3 * H, H, xn, wqkv, bqkv, qkv);
    for (int n = 0; n < T_SEQS; n++)
        for (int a = 0; a < T_HEADS; a++)
            for (int i = 0; i < T_SEQ; i++) {
                double s[T_SEQ], mx = -INFINITY, sum = 0;
                const double *q = qkv + (n * T_SEQ + i) * 3 * H + a * DH;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + (n * T_SEQ + j) * 3 * H + H + a * DH;
                    s[j] = 0;
                    for (int c = 0; c < DH; c++) s[j] += q[c] * k[c];
                    s[j] /= sqrt((double)DH);
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j <= i; j++) sum += s[j] = exp(s[j] - mx);
                for (int c = 0; c < DH; c++) {
                    double v = 0;
                    for (int j = 0; j <= i; j++) v += s[j] / sum * qkv[(n * T_SEQ + j) * 3 * H + 2 * H + a * DH + c];
                    att[(n * T_SEQ + i) * H + a * DH + c] = v;
                }
            }
    lin64(R, H, H, att, wo, bo, o);
    for (int i = 0; i < R * H; i++) x2[i] = x[i] + o[i];
    ln64(R, H, x2, g2, be2, xn);
    lin64(R, F, H, xn, w1, b1, hid);
    for (int i = 0; i < R * F; i++) {
        double z = hid[i];
        hid[i] = 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
    }
    lin64(R, H, F, hid, w2, b2, o);
    for (int i = 0; i < R * H; i++) y[i] = x2[i] + o[i];
}

/* The MSE loss of the fp64 block against t. */
static double loss64(const double *p, const double *x, const double *t) {
    enum { N = T_SEQS * T_SEQ * T_H };
    double y[N], l = 0;
    gpt64(p, x, y);
    for (int i = 0; i < N; i++) l += (y[i] - t[i]) * (y[i] - t[i]);
    return l / N;
}

/* ---------------------------------------------------------------- the tests */

/* Fills p with block 0's initial weights, then moves the LayerNorm gains and biases off 1 and 0
 * (N(0, 0.1^2) each), so that a gain or bias used in the wrong place changes the result. */
static void tiny_params(const exec_dims *d, float *p) {
    exec_block_init(d, 7, 0, p);
    size_t nf = exec_block_floats(d), ln = 4 * (size_t)d->h;
    for (size_t i = 0; i < ln; i++) p[nf - ln + i] += exec_normal_at(13, 0, i, 0.1);
}

/* Central difference of the fp64 loss along element i of v (step 1e-5: truncation ~1e-10 and
 * rounding ~1e-11 against gradients of 1e-3 and more). */
static double central(double *v, size_t i, const double *p, const double *x, const double *t) {
    const double eps = 1e-5;
    double keep = v[i];
    v[i] = keep + eps;
    double lp = loss64(p, x, t);
    v[i] = keep - eps;
    double lm = loss64(p, x, t);
    v[i] = keep;
    return (lp - lm) / (2 * eps);
}

/* The fp32 block's loss, parameter gradients (I then W) and input gradient against the fp64
 * oracle and its central differences. Bounds: the fp32 forward rounds each value with relative
 * error ~6e-8 per operation over a chain of ~10 operations and sums of <= 24 terms, so the loss
 * agrees to ~1e-6 relative (1e-5 asserted); a gradient is a sum over R = 8 rows of products of
 * such values, the largest ~1e-1, so its absolute error stays under ~1e-6, and 2e-3 relative
 * plus 2e-6 absolute is a bound a wrong transpose, head offset, mask, softmax Jacobian or
 * LayerNorm term (errors of the gradient's own size) cannot meet. */
static void test_gpt_gradcheck(void) {
    exec_dims d = tiny_dims();
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, sf = exec_block_state_floats(&d);
    float *p = calloc(nf, sizeof(float)), *g = calloc(nf, sizeof(float)), *st = calloc(sf, sizeof(float));
    float *x = calloc(bh, sizeof(float)), *t = calloc(bh, sizeof(float)), *y = calloc(bh, sizeof(float));
    float *gx = calloc(bh, sizeof(float)), *scr = calloc(exec_block_scratch_floats(&d), sizeof(float));
    double *p64 = calloc(nf, sizeof(double)), *x64 = calloc(bh, sizeof(double)), *t64 = calloc(bh, sizeof(double));
    tiny_params(&d, p);
    exec_fill_normal(11, 0, x, bh);
    exec_fill_normal(11, 1, t, bh);
    exec_blas_init();
    exec_block_fwd(&d, p, x, st, y);
    double l32 = exec_mse_grad(&d, y, t);
    exec_block_bwd_i(&d, p, x, st, y, gx, scr);
    exec_block_bwd_w(&d, x, st, y, g);
    for (size_t i = 0; i < nf; i++) p64[i] = p[i];
    for (size_t i = 0; i < bh; i++) { x64[i] = x[i]; t64[i] = t[i]; }
    double l64 = loss64(p64, x64, t64);
    CU_ASSERT(fabs(l32 - l64) <= 1e-5 * l64);
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < nf + bh; i++) {
        double num = i < nf ? central(p64, i, p64, x64, t64) : central(x64, i - nf, p64, x64, t64);
        double got = i < nf ? g[i] : gx[i - nf];
        double err = fabs(num - got) / (2e-6 + 2e-3 * fabs(num));
        if (err > worst) worst = err;
        if (err > 1) {
            if (bad < 5) fprintf(stderr, "gpt gradient %s %zu: %g, finite differences %g\n", i < nf ? "param" : "input",
                                 i < nf ? i : i - nf, got, num);
            bad++;
        }
    }
    if (getenv("PIPELAB_TEST_VERBOSE")) fprintf(stderr, "gpt gradcheck: worst error %.3g of the bound\n", worst);
    CU_ASSERT_EQUAL(bad, 0);
    free(p); free(g); free(st); free(x); free(t); free(y); free(gx); free(scr);
    free(p64); free(x64); free(t64);
}

/* Causality: changing the last token of a sequence changes no output row of an earlier token
 * (exactly: the masked probabilities are 0, so no earlier row reads it), and does change its
 * own row. */
static void test_gpt_causal(void) {
    exec_dims d = tiny_dims();
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, sf = exec_block_state_floats(&d);
    float *p = calloc(nf, sizeof(float)), *st = calloc(sf, sizeof(float)), *x = calloc(bh, sizeof(float));
    float *y1 = calloc(bh, sizeof(float)), *y2 = calloc(bh, sizeof(float));
    tiny_params(&d, p);
    exec_fill_normal(11, 0, x, bh);
    exec_block_fwd(&d, p, x, st, y1);
    size_t last = (size_t)(T_SEQ - 1) * T_H; /* sequence 0's last token */
    for (int c = 0; c < T_H; c++) x[last + c] += 1.0f;
    exec_block_fwd(&d, p, x, st, y2);
    CU_ASSERT_EQUAL(memcmp(y1, y2, last * sizeof(float)), 0);
    CU_ASSERT(memcmp(y1 + last, y2 + last, T_H * sizeof(float)) != 0);
    /* the other sequence is untouched as well */
    size_t seq1 = (size_t)T_SEQ * T_H;
    CU_ASSERT_EQUAL(memcmp(y1 + seq1, y2 + seq1, seq1 * sizeof(float)), 0);
    free(p); free(st); free(x); free(y1); free(y2);
}

/* I without the input gradient, then the input gradient alone (the profile's I0 split and the
 * first stage's I), equals I with it, bit for bit, and leaves the same state for W. */
static void test_gpt_split_i(void) {
    exec_dims d = tiny_dims();
    size_t nf = exec_block_floats(&d), bh = (size_t)d.b * d.h, sf = exec_block_state_floats(&d);
    float *p = calloc(nf, sizeof(float)), *s1 = calloc(sf, sizeof(float)), *s2 = calloc(sf, sizeof(float));
    float *x = calloc(bh, sizeof(float)), *y = calloc(bh, sizeof(float)), *gy = calloc(bh, sizeof(float));
    float *g1 = calloc(bh, sizeof(float)), *g2 = calloc(bh, sizeof(float));
    float *scr = calloc(exec_block_scratch_floats(&d), sizeof(float));
    tiny_params(&d, p);
    exec_fill_normal(11, 0, x, bh);
    exec_fill_normal(11, 2, gy, bh);
    exec_block_fwd(&d, p, x, s1, y);
    memcpy(s2, s1, sf * sizeof(float));
    exec_block_bwd_i(&d, p, x, s1, gy, g1, scr);
    exec_block_bwd_i(&d, p, x, s2, gy, NULL, scr);
    exec_block_bwd_gx(&d, p, x, s2, gy, g2);
    CU_ASSERT_EQUAL(memcmp(g1, g2, bh * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(s1, s2, sf * sizeof(float)), 0);
    free(p); free(s1); free(s2); free(x); free(y); free(gy); free(g1); free(g2); free(scr);
}

/* Sizes: the parameters of a GPT-2 block (12 h^2 + 13 h at f = 4h, the cost model's count),
 * and FLOPs in Megatron's and Zero Bubble's closed forms at f = 4h. */
static void test_gpt_sizes(void) {
    exec_dims d = {.h = 64, .f = 256, .b = 3 * 16, .layers = 1, .block = EXEC_BLOCK_GPT, .heads = 4, .seq = 16};
    double h = 64, R = 48, S = 16;
    CU_ASSERT_EQUAL(exec_block_floats(&d), (size_t)(12 * 64 * 64 + 13 * 64));
    double f, i, i0, w;
    exec_block_flops(&d, &f, &i, &i0, &w);
    CU_ASSERT_DOUBLE_EQUAL(f, 24 * R * h * h + 4 * R * S * h, 1e-6 * f);
    CU_ASSERT_DOUBLE_EQUAL(i, 24 * R * h * h + 8 * R * S * h, 1e-6 * i);
    CU_ASSERT_DOUBLE_EQUAL(w, 24 * R * h * h, 1e-6 * w);
}

/* The executor's tracked model memory of a transformer run equals the cost model's
 * (exec_mem_predict over the profile sizes of the block: input and state until W), rank by rank,
 * with and without full recomputation, for whole and split backwards. */
static void test_gpt_memory_equals_cost_model(void) {
    static const char *kinds[] = {"gpipe", "1f1b", "zb-h1", "interleaved"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (int rcp = SCHED_RECOMPUTE_NONE; rcp <= SCHED_RECOMPUTE_FULL; rcp++) {
            pl_err e;
            sched_gen_opts go = {2, 4, strcmp(kinds[k], "interleaved") == 0 ? 2 : 0, 0, (sched_recompute)rcp};
            sched *g = sched_generate(kinds[k], &go, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(g);
            sched *s = sched_lower(g, &e);
            sched_free(g);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
            exec_config c = exec_test_small_cfg(2 * s->stages, EXEC_BLOCK_GPT);
            c.timed_passes = 1;
            exec_result r;
            CU_ASSERT_EQUAL_FATAL(exec_run(s, &c, &r, &e), PL_OK);
            cost_memory mem[2];
            CU_ASSERT_EQUAL_FATAL(exec_mem_predict(s, &c, mem, &e), PL_OK);
            for (int q = 0; q < 2; q++) {
                if ((int64_t)r.rank[q].model_peak_bytes != mem[q].total_bytes)
                    fprintf(stderr, "%s recompute %d rank %d: executor %zu, cost model %lld\n", kinds[k], rcp, q,
                            r.rank[q].model_peak_bytes, (long long)mem[q].total_bytes);
                CU_ASSERT_EQUAL((int64_t)r.rank[q].model_peak_bytes, mem[q].total_bytes);
            }
            exec_result_free(&r);
            sched_free(s);
        }
}

/* The transformer's spec on the command line. */
#define T_SPEC "transformer:layers=4,hidden=16,heads=2,seq=4,microbatch=2"
#define T_RUN "run --kind zb-h1 --ranks 2 --microbatches 4 --warmup 1 --timed 2 --profile-reps 3 --no-db"

/* Runs `pipelab ARGS`; returns its exit status and its output in *out (caller frees). */
static int pipelab(const char *args, char **out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s", PIPELAB_BIN, args);
    return pl_test_run(cmd, out);
}

/* pipelab run and profile take --model: a transformer run trains and is predicted from a
 * profile of its own blocks (written by pipelab profile --model, read back and checked); a
 * profile of another model is refused naming the file; bad specs are usage errors (exit 2)
 * that name the key; with mpirun, MPI processes give the threads' weights byte for byte. */
static void test_gpt_cli(void) {
    char *dir = pl_test_tmpdir(), *csv = pl_test_path(dir, "gpt.csv"), *mlp = pl_test_path(dir, "mlp.csv");
    char args[1024], *out = NULL;
    CU_ASSERT_EQUAL(pipelab(T_RUN " --model " T_SPEC, &out), 0);
    CU_ASSERT(out && strstr(out, "model              " T_SPEC) != NULL);
    free(out);
    snprintf(args, sizeof args, "profile --model " T_SPEC " --reps 3 -o %s", csv);
    CU_ASSERT_EQUAL_FATAL(pipelab(args, NULL), 0);
    snprintf(args, sizeof args, T_RUN " --model " T_SPEC " --profile %s", csv);
    out = NULL;
    CU_ASSERT_EQUAL(pipelab(args, &out), 0);
    CU_ASSERT(out && strstr(out, csv) != NULL);
    free(out);
    snprintf(args, sizeof args, "profile --model mlp:width=16,depth=4,microbatch=2 --reps 3 -o %s", mlp);
    CU_ASSERT_EQUAL_FATAL(pipelab(args, NULL), 0);
    snprintf(args, sizeof args, T_RUN " --model " T_SPEC " --profile %s", mlp);
    out = NULL;
    CU_ASSERT_EQUAL(pipelab(args, &out), 1);
    CU_ASSERT(out && strstr(out, mlp) != NULL && strstr(out, "transformer block") != NULL);
    free(out);
    static const struct { const char *flags, *says; } bad[] = {
        {"--model transformer:layers=4,hidden=16,heads=3,seq=4,microbatch=2", "heads (3) must divide hidden (16)"},
        {"--model transformer:layers=4,hidden=16,heads=2,microbatch=2", "'seq' is missing"},
        {"--model transformer:layers=4,hidden=16,heads=2,seq=4,microbatch=2,vocab=100", "unknown key 'vocab'"},
        {"--model mlp:width=32,depth=x,microbatch=4", "depth"},
        {"--model mlp:width=32,depth=2,depth=3,microbatch=4", "'depth' given twice"},
        {"--model gpt:layers=2", "--model must be"},
        {"--width 32 --model mlp:width=32,depth=2,microbatch=4", "--width cannot be given beside it"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(args, sizeof args, T_RUN " %s", bad[i].flags);
        out = NULL;
        CU_ASSERT_EQUAL(pipelab(args, &out), 2);
        if (!out || !strstr(out, bad[i].says)) fprintf(stderr, "%s: %s\n", bad[i].flags, out ? out : "(no output)");
        CU_ASSERT(out && strstr(out, bad[i].says) != NULL);
        free(out);
    }
#ifdef PIPELAB_MPIEXEC
    /* one MPI process per rank trains the transformer to the same bytes as threads */
    if (exec_mpi_available() && pl_test_exists(PIPELAB_MPIEXEC)) {
        char *wt = pl_test_path(dir, "w_threads.bin"), *wm = pl_test_path(dir, "w_mpi.bin"), cmd[2048];
        snprintf(args, sizeof args, T_RUN " --model " T_SPEC " --no-predict --dump-weights %s", wt);
        CU_ASSERT_EQUAL(pipelab(args, NULL), 0);
        snprintf(cmd, sizeof cmd, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 "
                 "timeout 120 " PIPELAB_MPIEXEC " -np 2 --oversubscribe %s " T_RUN " --transport mpi --model " T_SPEC
                 " --no-predict --dump-weights %s", PIPELAB_BIN, wm);
        CU_ASSERT_EQUAL(pl_test_run(cmd, NULL), 0);
        snprintf(cmd, sizeof cmd, "cmp %s %s", wt, wm);
        CU_ASSERT_EQUAL(pl_test_run(cmd, NULL), 0);
        free(wt);
        free(wm);
    }
#endif
    free(csv);
    free(mlp);
    free(dir);
}

/* The ten schedule kinds the validation grids cover. */
enum { KINDS = 10 };
static const char *const kinds[KINDS] = {"gpipe", "1f1b", "pipedream", "2bw", "interleaved", "looped-bfs", "zb-h1", "zb-h2",
                                         "zbv", "dualpipev"};

/* Returns 1 when v is in set[*n], else adds it (at most max) and returns 0. */
static int seen(int *set, int *n, int max, int v) {
    for (int i = 0; i < *n; i++)
        if (set[i] == v) return 1;
    if (*n < max) set[(*n)++] = v;
    return 0;
}

/* validate_cpu.sh --broad's grid (experiments/validate_broad.sh) holds what it promises:
 * at least 60 points on 2 ranks, every one of the ten kinds, recomputation on and off, both
 * blocks, dense widths from 128 to 1024, m from p = 2 to 8p = 16, several depths, microbatch
 * sizes and sequence lengths; and every point's schedule generates. */
static void test_broad_grid(void) {
    enum { MAXV = 16 };
    char cmd[1024], args[256], *out = NULL;
    snprintf(cmd, sizeof cmd, "bash -c 'source %s/../experiments/validate_broad.sh && broad_points'", PIPELAB_TESTS_DIR);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    int n = 0, per_kind[KINDS] = {0}, full = 0, gpt = 0, bad = 0;
    int widths[MAXV], nw = 0, ms[MAXV], nm = 0, depths[MAXV], nd = 0, mbs[MAXV], nb = 0, seqs[MAXV], ns = 0;
    for (char *save = NULL, *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        char kind[32], rc[8], spec[256];
        int m, w, d, b, sq;
        if (sscanf(line, "%31s %d %7s %255s", kind, &m, rc, spec) != 4) { bad++; continue; }
        for (int k = 0; k < KINDS; k++) per_kind[k] += strcmp(kind, kinds[k]) == 0;
        full += strcmp(rc, "full") == 0;
        seen(ms, &nm, MAXV, m);
        if (sscanf(spec, "mlp:width=%d,depth=%d,microbatch=%d", &w, &d, &b) == 3) {
            seen(widths, &nw, MAXV, w);
            seen(depths, &nd, MAXV, d);
            seen(mbs, &nb, MAXV, b);
        } else if (sscanf(spec, "transformer:layers=%d,hidden=%d,heads=%*d,seq=%d,microbatch=%d", &d, &w, &sq, &b) == 4) {
            gpt++;
            seen(seqs, &ns, MAXV, sq);
        } else {
            bad++;
        }
        snprintf(args, sizeof args, "schedule --kind %s --ranks 2 --microbatches %d%s", kind, m,
                 strcmp(kind, "interleaved") == 0 || strcmp(kind, "looped-bfs") == 0 ? " --chunks 2" : "");
        if (pipelab(args, NULL) != 0) { fprintf(stderr, "broad point not generated: %s\n", line); bad++; }
    }
    CU_ASSERT(n >= 60);
    CU_ASSERT_EQUAL(bad, 0);
    for (int k = 0; k < KINDS; k++) CU_ASSERT(per_kind[k] >= 5);
    CU_ASSERT(full > 0 && full < n && gpt > 0 && gpt < n);
    CU_ASSERT(seen(widths, &nw, MAXV, 128) && seen(widths, &nw, MAXV, 1024));
    CU_ASSERT(seen(ms, &nm, MAXV, 2) && seen(ms, &nm, MAXV, 16));
    CU_ASSERT(nd >= 3 && nb >= 3 && ns >= 3);
    free(out);
}

/* Prints offgrid_points N SEED (experiments/validate_broad.sh) into *out (to free). */
static int offgrid(int n, int seed, char **out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash -c 'source %s/../experiments/validate_broad.sh && offgrid_points %d %d'", PIPELAB_TESTS_DIR, n,
             seed);
    return pl_test_run(cmd, out);
}

/* validate_cpu.sh --offgrid's draw: one seed gives one list and another seed another; every
 * point is valid (its schedule generates, with its chunks; every stage holds a block) and none
 * is a broad point; the draw reaches what the broad grid never takes: 3 and 4 chunks, odd
 * depths (unequal stages), an inner size of twice the width, heads of 32 dimensions and m
 * outside 2, 3, 4, 6, 8, 12, 16. */
static void test_offgrid_points(void) {
    enum { N = 40 };
    char *a = NULL, *b = NULL, *c = NULL, *grid = NULL, cmd[1024], args[256];
    CU_ASSERT_EQUAL_FATAL(offgrid(N, 7, &a), 0);
    CU_ASSERT_EQUAL_FATAL(offgrid(N, 7, &b), 0);
    CU_ASSERT_EQUAL_FATAL(offgrid(N, 8, &c), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT(strcmp(a, c) != 0);
    snprintf(cmd, sizeof cmd, "bash -c 'source %s/../experiments/validate_broad.sh && broad_points'", PIPELAB_TESTS_DIR);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &grid), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(grid);
    /* the broad points, each between newlines, so that a whole line is looked for */
    size_t glen = strlen(grid) + 3;
    char *g = malloc(glen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    snprintf(g, glen, "\n%s\n", grid);
    int n = 0, bad = 0, chunks34 = 0, odd = 0, ffn2 = 0, head32 = 0, m_off = 0;
    for (char *save = NULL, *line = strtok_r(a, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        char kind[32], rc[8], spec[256], point[320];
        int m, v, d, w, h, heads, sq, mb, known = 0;
        if (sscanf(line, "%31s %d %7s %255s %d", kind, &m, rc, spec, &v) != 5) { bad++; continue; }
        for (int k = 0; k < KINDS; k++) known |= strcmp(kind, kinds[k]) == 0;
        int chunked = strcmp(kind, "interleaved") == 0 || strcmp(kind, "looped-bfs") == 0;
        int two = strcmp(kind, "zbv") == 0 || strcmp(kind, "dualpipev") == 0;
        if (!known || m < 2 || m > 16 || (chunked ? v < 2 || v > 4 : v != (two ? 2 : 1))) bad++;
        if (strcmp(kind, "dualpipev") == 0 && m < 4) bad++;
        if (sscanf(spec, "transformer:layers=%d,hidden=%d,heads=%d,seq=%d,microbatch=%d", &d, &h, &heads, &sq, &mb) == 5) {
            head32 += h == 32 * heads;
            if (h % heads != 0) bad++;
        } else if (sscanf(spec, "mlp:width=%d,depth=%d,microbatch=%d", &w, &d, &mb) == 3) {
            ffn2 += strstr(spec, ",ffn_mult=2") != NULL;
        } else {
            bad++;
            continue;
        }
        if (d < 2 * v) bad++;
        odd += d % 2;
        chunks34 += chunked && v > 2;
        m_off += m == 5 || m == 7 || m == 9 || m == 10 || m == 11 || m == 13 || m == 14 || m == 15;
        snprintf(point, sizeof point, "\n%s %d %s %s\n", kind, m, rc, spec);
        if (strstr(g, point)) { fprintf(stderr, "off-grid point is a broad point: %s\n", line); bad++; }
        snprintf(args, sizeof args, "schedule --kind %s --ranks 2 --microbatches %d%s%.0d", kind, m, chunked ? " --chunks " : "",
                 chunked ? v : 0);
        if (pipelab(args, NULL) != 0) { fprintf(stderr, "off-grid point not generated: %s\n", line); bad++; }
    }
    CU_ASSERT_EQUAL(n, N);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(chunks34 > 0 && odd > 0 && ffn2 > 0 && head32 > 0 && m_off > 0);
    free(a);
    free(b);
    free(c);
    free(g);
    free(grid);
}

/* Runs SHELL (after sourcing experiments/validate_broad.sh) on a file holding CSV; returns its exit
 * status, its output in *out (to free). */
static int broad_shell(const char *csv, const char *shell, char **out) {
    char *dir = pl_test_tmpdir(), *path = pl_test_path(dir, "in.csv"), *cmd = NULL;
    static const char form[] = "bash -c 'source %s/../experiments/validate_broad.sh && { %s; } < %s'";
    FILE *f = fopen(path, "w");
    int rc = -1, n = snprintf(NULL, 0, form, PIPELAB_TESTS_DIR, shell, path);
    if (f) {
        fputs(csv, f);
        fclose(f);
        /* the whole command, however long the folders' names: a cut one would run something else */
        if (n > 0 && (cmd = malloc((size_t)n + 1)) != NULL) {
            snprintf(cmd, (size_t)n + 1, form, PIPELAB_TESTS_DIR, shell, path);
            rc = pl_test_run(cmd, out);
        }
    }
    free(cmd);
    pl_test_rmdir(dir);
    free(path);
    free(dir);
    return rc;
}

/* Asserts that text holds line (a whole line). */
static void has_line(const char *text, const char *line) {
    char want[256];
    snprintf(want, sizeof want, "\n%s\n", line);
    const char *at = text ? strstr(text, want) : NULL;
    if (!at) fprintf(stderr, "\nmissing line '%s' in:\n%s\n", line, text ? text : "(none)");
    CU_ASSERT_PTR_NOT_NULL(at);
}

/* validate_cpu.sh --broad's targets (experiments/validate_broad.sh): broad_targets over pairs
 * (iteration time, bubble and memory, each with its threshold) and, through repeat_means, over
 * `pipelab compare --repeats`' configuration means, whose quoted model column holds commas:
 * iteration time only, in closed form. A --repeats CSV without its mean column is refused. */
static void test_broad_targets(void) {
    char *out = NULL;
    static const char pairs[] = "schedule,iteration_time_err,bubble_fraction_err,peak_mem_err\n"
                                "gpipe,0.01,0.005,0\n"
                                "1f1b,-0.02,-0.01,0\n";
    CU_ASSERT_EQUAL(broad_shell(pairs, "broad_targets", &out), 0);
    has_line(out, "  iteration time MAPE                        1.50%    <= 2%   met");
    has_line(out, "  iteration time largest error              -2.00%    <= 5%   met");
    has_line(out, "  iteration time signed mean error          -0.50%");
    has_line(out, "  bubble fraction mean |difference|          0.75 pp  <= 1.5   met");
    has_line(out, "  bubble fraction signed mean difference    -0.25 pp");
    has_line(out, "  peak memory MAPE                           0.00%    <= 2%   met");
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "targets over 2 pairs ") : NULL);
    free(out);
    static const char repeats[] =
        "schedule,ranks,stages,microbatches,chunks,recompute,model,runs,iteration_time_err_mean,iteration_time_err_sd,"
        "iteration_time_err_min,iteration_time_err_max,iteration_time_err_t,biased\n"
        "gpipe,2,2,4,1,none,\"mlp:width=128,depth=4,microbatch=8,ffn_mult=4\",2,0.01,0.002,0.008,0.012,0.9,0\n"
        "1f1b,2,2,8,1,full,\"transformer:layers=4,hidden=128,heads=2,seq=64,microbatch=4\",2,-0.03,0.01,-0.04,-0.02,-2.7,1\n"
        "zbv,2,2,3,2,none,\"mlp:width=256,depth=12,microbatch=32,ffn_mult=4\",3,0.06,0.02,0.04,0.08,6.6,1\n";
    CU_ASSERT_EQUAL(broad_shell(repeats, "repeat_means | broad_targets means", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "targets over 3 means ") : NULL);
    has_line(out, "  iteration time MAPE                        3.33%    <= 2%   MISSED");
    has_line(out, "  iteration time largest error              +6.00%    <= 5%   MISSED");
    has_line(out, "  iteration time signed mean error          +1.33%");
    CU_ASSERT_PTR_NULL(out ? strstr(out, "bubble") : NULL);
    CU_ASSERT_PTR_NULL(out ? strstr(out, "memory") : NULL);
    free(out);
    CU_ASSERT_NOT_EQUAL(broad_shell("schedule,runs\ngpipe,2\n", "repeat_means", &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "no iteration_time_err_mean column") : NULL);
    free(out);
}

/* validate_cpu.sh's filters of pairs (experiments/validate_broad.sh): pairs_within keeps the
 * header and the pairs whose measured run's value in a "UID VALUE" file is within the bound, and
 * leaves out the runs the file lacks; host_slowdowns divides each probe by the host's own speed,
 * the 10th percentile by nearest rank of the history's last column (of 11 probes the 2nd
 * smallest, of 10 the 1st); run_contended marks a run the others took RUN_BUSY_MAX% from (3 by
 * default, the bound itself included). Closed forms. */
static void test_pairs_filters(void) {
    char *dir = pl_test_tmpdir(), *vals = pl_test_path(dir, "vals"), *hist = pl_test_path(dir, "hist"), shell[1024];
    FILE *f = fopen(vals, "w");
    if (f) {
        fputs("u1 1.0\nu2 2.5\nu3 1.5\n", f);
        fclose(f);
    }
    char *out = NULL;
    static const char pairs[] = "schedule,measured_uid,iteration_time_err\n"
                                "gpipe,u1,0.01\n"
                                "1f1b,u2,0.09\n"
                                "zbv,u3,-0.02\n"
                                "2bw,u4,0.5\n";
    snprintf(shell, sizeof shell, "pairs_within %s 1.5", vals);
    CU_ASSERT_EQUAL(broad_shell(pairs, shell, &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "schedule,measured_uid,iteration_time_err\ngpipe,u1,0.01\nzbv,u3,-0.02\n");
    free(out);
    snprintf(shell, sizeof shell, "pairs_within %s 1.5 | broad_targets", vals);
    CU_ASSERT_EQUAL(broad_shell(pairs, shell, &out), 0);
    has_line(out, "  iteration time MAPE                        1.50%    <= 2%   met");
    free(out);
    /* the history: probes 1..11 ms (shuffled), the 10th percentile 2 ms */
    f = fopen(hist, "w");
    if (f) {
        static const int ms[] = {7, 3, 11, 1, 9, 2, 10, 4, 8, 6, 5};
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) fprintf(f, "1796306949 validate_cpu %g\n", ms[i] * 1e-3);
        fclose(f);
    }
    snprintf(shell, sizeof shell, "host_slowdowns %s", hist);
    CU_ASSERT_EQUAL(broad_shell("u1 0.002\nu2 0.0031\n", shell, &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "u1 1.000\nu2 1.550\n");
    free(out);
    /* of 10 probes the smallest; none: nothing */
    snprintf(shell, sizeof shell, "sed -i 1d %s && host_slowdowns %s", hist, hist);
    CU_ASSERT_EQUAL(broad_shell("u1 0.002\n", shell, &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "u1 2.000\n");
    free(out);
    CU_ASSERT_EQUAL(broad_shell("u1 0.002\n", "host_slowdowns /dev/null", &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "");
    free(out);
    /* a run the others took 3% of the CPUs from or more is contended (run_contended), 2% not;
     * RUN_BUSY_MAX moves the bound */
    CU_ASSERT_EQUAL(broad_shell("", "for p in 0 2 3 8 10; do run_contended $p && echo -n \"$p \"; done", &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "3 8 10 ");
    free(out);
    CU_ASSERT_EQUAL(broad_shell("", "RUN_BUSY_MAX=9 && for p in 3 8 9; do run_contended $p && echo -n \"$p \"; done", &out), 0);
    CU_ASSERT_STRING_EQUAL(out ? out : "", "9 ");
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(vals);
    free(hist);
    free(dir);
}

/* validate_broad.sh's point_timed: a run's timed passes, counted in iterations (pipedream's pass
 * holds 4, `pipelab schedule`'s): at least TIMED iterations and MIN_TIMED_S seconds at
 * RATE_GFLOPS, at least TIMED_PASSES_MIN passes of several iterations. Closed forms: the dense
 * block of width 128 on 8 rows is 4 * 4 * 8 * 128^2 = 2097152 FLOPs forward; with 4 blocks the
 * busier rank does 2, F, I and W, so 1f1b m 2 is est = 2 * 2 * 2097152 * 3 / 20e9 = 1.258 ms an
 * iteration, ceil(0.25 s / est) = 199 passes, pipedream's 4 a pass ceil(49.7) = 50; long
 * iterations take the floors: 5 passes, and pipedream ceil(5 / 4) = 2, so 3 (ceil(20 / 4) = 5
 * with TIMED 20). */
static void test_point_timed(void) {
    static const struct {
        const char *kind, *spec;
        int m, timed, want;
    } cases[] = {
        {"1f1b", "mlp:width=128,depth=4,microbatch=8", 2, 5, 199},
        {"pipedream", "mlp:width=128,depth=4,microbatch=8", 2, 5, 50},
        {"1f1b", "mlp:width=512,depth=12,microbatch=32", 8, 5, 5},
        {"pipedream", "mlp:width=512,depth=12,microbatch=32", 8, 5, 3},
        {"2bw", "mlp:width=512,depth=12,microbatch=32", 8, 20, 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char shell[512], *out = NULL;
        snprintf(shell, sizeof shell, "PL=%s TIMED=%d MIN_TIMED_S=0.25 RATE_GFLOPS=20 TIMED_PASSES_MIN=3; point_timed %s %d none %s",
                 PIPELAB_BIN, cases[i].timed, cases[i].kind, cases[i].m, cases[i].spec);
        CU_ASSERT_EQUAL(broad_shell("", shell, &out), 0);
        CU_ASSERT_EQUAL(out ? atoi(out) : -1, cases[i].want);
        if (!out || atoi(out) != cases[i].want) fprintf(stderr, "point_timed %s m %d %s: %s\n", cases[i].kind, cases[i].m, cases[i].spec, out ? out : "");
        free(out);
    }
}

void exec_test_gpt_register(void);
void exec_test_gpt_register(void) {
    static const pl_test_case cases[] = {
        {"transformer block: loss and gradients against fp64 finite differences", test_gpt_gradcheck},
        {"transformer block: causal attention", test_gpt_causal},
        {"transformer block: I = I without dx, then dx", test_gpt_split_i},
        {"transformer block: parameters and FLOPs closed forms", test_gpt_sizes},
        {"transformer: tracked memory equals the cost model", test_gpt_memory_equals_cost_model},
        {"transformer: pipelab run and profile --model", test_gpt_cli},
        {"validate_cpu.sh --broad: the grid it promises", test_broad_grid},
        {"validate_cpu.sh --offgrid: a seeded draw off the broad grid", test_offgrid_points},
        {"validate_cpu.sh --broad: its targets over the runs and over the configurations' means", test_broad_targets},
        {"validate_cpu.sh: the steady and unslowed-host pairs, the host's slowdowns, contended runs", test_pairs_filters},
        {"validate_cpu.sh --broad: timed passes counted in iterations", test_point_timed},
        {NULL, NULL}};
    pl_test_suite("exec transformer block", cases);
}
