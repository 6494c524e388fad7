/* reference.c: the sequential single-worker reference the tests use as the oracle: the same
 * model, data and update semantics, with no pipeline, threads or messages. */
#include "exec_int.h"

#include <stdlib.h>
#include <string.h>

/* Buffers for one microbatch through all L blocks. */
typedef struct ref_buf {
    float *x;       /* [L+1, b, h] block inputs; x[L] is the model output */
    float *st;      /* [L, exec_block_state_floats] each block's state */
    float *g;       /* [L+1, b, h] gradients at block inputs; g[L] = dloss/doutput */
    float *scratch; /* [exec_block_scratch_floats] */
} ref_buf;

/* Runs microbatch di of the data set forward and backward through all blocks, block l using
 * parameters w[l] and accumulating its gradients into gr[l]; returns the loss. */
static double fwd_bwd(const exec_dims *d, int L, const exec_data *dt, int di, const float *const *w,
                      float *const *gr, ref_buf *rb) {
    size_t bh = (size_t)d->b * d->h, sf = exec_block_state_floats(d);
    memcpy(rb->x, dt->x + (size_t)di * bh, bh * sizeof(float));
    for (int l = 0; l < L; l++) exec_block_fwd(d, w[l], rb->x + l * bh, rb->st + l * sf, rb->x + (l + 1) * bh);
    float *gl = rb->g + (size_t)L * bh;
    memcpy(gl, rb->x + (size_t)L * bh, bh * sizeof(float));
    double loss = exec_mse_grad(d, gl, dt->t + (size_t)di * bh);
    for (int l = L - 1; l >= 0; l--) {
        exec_block_bwd_i(d, w[l], rb->x + l * bh, rb->st + l * sf, rb->g + (l + 1) * bh, l > 0 ? rb->g + l * bh : NULL,
                         rb->scratch);
        exec_block_bwd_w(d, rb->x + l * bh, rb->st + l * sf, rb->g + (l + 1) * bh, gr[l]);
    }
    return loss;
}

/* One SGD step with the executor's float arithmetic: o = w - lr (mu m + g / n); grad zeroed. */
static void sgd(const exec_config *c, const float *w, float *o, float *grad, float *mom, size_t n, int nacc) {
    float scale = 1.0f / (float)nacc, lr = (float)c->lr, mu = (float)c->momentum;
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * scale;
        if (mom) g = mom[i] = mu * mom[i] + g;
        o[i] = w[i] - lr * g;
    }
    memset(grad, 0, n * sizeof(float));
}

/* Flush: per iteration the m microbatches with one set of weights, then one step. */
static int ref_flush(const exec_config *c, const exec_dims *d, const exec_data *dt, int iters, int m,
                     float *w, float *grad, float *mom, ref_buf *rb, const float **wp, float **gp,
                     double *loss) {
    int L = c->layers;
    size_t nf = exec_block_floats(d), n = (size_t)L * nf;
    for (int l = 0; l < L; l++) { wp[l] = w + l * nf; gp[l] = grad + l * nf; }
    for (int i = 0; i < iters; i++) {
        double ls = 0;
        for (int j = 0; j < m; j++) ls += fwd_bwd(d, L, dt, (int)(((int64_t)i * m + j) % dt->d), wp, gp, rb);
        loss[i] = ls / m;
        sgd(c, w, w, grad, mom, n, m);
    }
    return PL_OK;
}

/* The per-stage order of events in `passes` walks of s by the executor's ranks of layout L (the
 * replicas of a replicated stage, exec_config.replicas): v[q*G+g] = the version (steps before
 * it on its replica) the forward of (q, g) uses; grp[q*G+g] = the step that applies its gradient
 * (-1 none); size[q*(G+1)+k] = microbatches in step k (over all replicas: the k-th STEP of every
 * replica applies the all-reduced mean of the gradients since their previous one); nst[q] =
 * steps of stage q. Returns PL_OK or PL_ENOMEM. */
static int stage_events(const sched *s, const exec_layout *L, int passes, int64_t G, int *v, int *grp, int *size, int *nst,
                        pl_err *e) {
    int M = (int)(G / passes);
    int *cur_n = pl_calloc((size_t)L->ranks * s->stages, sizeof(int)); /* backward passes since the last step */
    int *rst = pl_calloc((size_t)L->ranks * s->stages, sizeof(int));   /* steps of each (rank, stage) */
    if (!cur_n || !rst) {
        free(cur_n);
        free(rst);
        return pl_errf(e, PL_ENOMEM, "out of memory in the reference");
    }
    for (int p = 0; p < passes; p++)
        for (int r = 0; r < L->ranks; r++)
            for (size_t k = 0; k < L->list[r].n; k++) {
                const sched_action *a = &L->list[r].acts[k];
                int64_t g = (int64_t)p * M + a->mb;
                int *cn = cur_n + (size_t)r * s->stages, *ns = rst + (size_t)r * s->stages;
                if (a->kind == SCHED_F || a->kind == SCHED_OVERLAP) v[a->stage * G + g] = ns[a->stage];
                int bs = -1;
                int64_t bg = 0;
                if (a->kind == SCHED_B || a->kind == SCHED_W) { bs = a->stage; bg = g; }
                if (a->kind == SCHED_OVERLAP && a->kind2 == SCHED_B) { bs = a->stage2; bg = (int64_t)p * M + a->mb2; }
                if (bs >= 0) { grp[bs * G + bg] = ns[bs]; cn[bs]++; }
                if (a->kind == SCHED_STEP && cn[a->stage] > 0) {
                    size[a->stage * (G + 1) + ns[a->stage]] += cn[a->stage];
                    cn[a->stage] = 0;
                    ns[a->stage]++;
                    if (ns[a->stage] > nst[a->stage]) nst[a->stage] = ns[a->stage];
                }
            }
    /* gradients after the last step are never applied */
    for (int q = 0; q < s->stages; q++)
        for (int64_t g = 0; g < G; g++)
            if (grp[q * G + g] >= nst[q]) grp[q * G + g] = -1;
    free(cur_n);
    free(rst);
    return PL_OK;
}

/* What ref_versions keeps while it runs Q stages and G microbatches: per stage q and microbatch
 * g (index q*G+g) the version its forward uses (v) and the step that applies its gradient (grp,
 * -1 none), as stage_events gives them; per stage its steps (nst), each step's microbatches
 * (size) and the gradients it still waits for (left, both index q*(G+1)+k), its first block
 * (b0), the versions made so far (nver), every version (ver, for the oracle), each step's
 * gradient sum (acc) and its momentum (mom); per microbatch whether it ran (done) and its loss
 * (loss_mb); junk takes the gradients no step applies. */
typedef struct ref_vers {
    int Q;
    int64_t G;
    size_t nf; /* floats of one block */
    int *v, *grp, *size, *nst, *nver, *b0, *left;
    char *done;
    float **ver, **acc, **mom;
    double *loss_mb;
    float *junk;
} ref_vers;

/* Frees what rv holds. */
static void ref_vers_free(ref_vers *rv) {
    if (rv->ver) for (int q = 0; q < rv->Q; q++) free(rv->ver[q]);
    if (rv->acc) for (int q = 0; q < rv->Q; q++) free(rv->acc[q]);
    if (rv->mom) for (int q = 0; q < rv->Q; q++) free(rv->mom[q]);
    free(rv->v); free(rv->grp); free(rv->size); free(rv->nst); free(rv->nver); free(rv->b0); free(rv->left);
    free(rv->done); free(rv->ver); free(rv->acc); free(rv->mom); free(rv->loss_mb); free(rv->junk);
}

/* Allocates rv's arrays for Q stages, G microbatches and L blocks of nf floats, with no gradient
 * group yet (grp -1) and no stage's versions. Returns PL_OK or PL_ENOMEM (ref_vers_free frees
 * what was allocated). */
static int ref_vers_alloc(ref_vers *rv, int Q, int64_t G, int L, size_t nf, pl_err *e) {
    memset(rv, 0, sizeof *rv);
    rv->Q = Q;
    rv->G = G;
    rv->nf = nf;
    rv->v = pl_calloc((size_t)(Q * G), sizeof(int));
    rv->grp = pl_calloc((size_t)(Q * G), sizeof(int));
    rv->size = pl_calloc((size_t)(Q * (G + 1)), sizeof(int));
    rv->nst = pl_calloc((size_t)Q, sizeof(int));
    rv->nver = pl_calloc((size_t)Q, sizeof(int));
    rv->b0 = pl_calloc((size_t)Q, sizeof(int));
    rv->left = pl_calloc((size_t)(Q * (G + 1)), sizeof(int));
    rv->done = pl_calloc((size_t)G, 1);
    rv->ver = pl_calloc((size_t)Q, sizeof(float *));
    rv->acc = pl_calloc((size_t)Q, sizeof(float *));
    rv->mom = pl_calloc((size_t)Q, sizeof(float *));
    rv->loss_mb = pl_calloc((size_t)G, sizeof(double));
    rv->junk = pl_calloc((size_t)L * nf, sizeof(float));
    if (!rv->v || !rv->grp || !rv->size || !rv->nst || !rv->nver || !rv->b0 || !rv->left || !rv->done || !rv->ver ||
        !rv->acc || !rv->mom || !rv->loss_mb || !rv->junk)
        return pl_errf(e, PL_ENOMEM, "out of memory in the reference");
    for (int64_t i = 0; i < Q * G; i++) rv->grp[i] = -1;
    return PL_OK;
}

/* Gives each stage of rv (blocks[q] blocks each) its first block, room for all its versions and
 * gradient sums, version 0 (the initial weights) and its steps' pending gradients. Returns PL_OK
 * or PL_ENOMEM. */
static int ref_vers_start(ref_vers *rv, const exec_config *c, const exec_dims *d, const int *blocks, pl_err *e) {
    int64_t G = rv->G;
    size_t nf = rv->nf;
    for (int q = 0; q < rv->Q; q++) {
        rv->b0[q] = q ? rv->b0[q - 1] + blocks[q - 1] : 0;
        size_t pf = (size_t)blocks[q] * nf;
        rv->ver[q] = pl_calloc((size_t)(rv->nst[q] + 1) * pf, sizeof(float)); /* every version, for the oracle */
        rv->acc[q] = pl_calloc((size_t)(rv->nst[q] + 1) * pf, sizeof(float));
        rv->mom[q] = c->momentum != 0 ? pl_calloc(pf, sizeof(float)) : NULL;
        if (!rv->ver[q] || !rv->acc[q] || (c->momentum != 0 && !rv->mom[q]))
            return pl_errf(e, PL_ENOMEM, "out of memory in the reference");
        for (int k = 0; k < blocks[q]; k++) exec_block_init(d, c->init_seed, rv->b0[q] + k, rv->ver[q] + k * nf);
        rv->nver[q] = 1;
        for (int k = 0; k < rv->nst[q]; k++) rv->left[q * (G + 1) + k] = rv->size[q * (G + 1) + k];
    }
    return PL_OK;
}

/* Returns 1 when microbatch g has not run and every version its forwards use exists. */
static int ref_vers_ready(const ref_vers *rv, int64_t g) {
    if (rv->done[g]) return 0;
    int ready = 1;
    for (int q = 0; q < rv->Q && ready; q++) ready = rv->v[q * rv->G + g] < rv->nver[q];
    return ready;
}

/* Runs microbatch g with its versions, its gradients into its steps' sums, then makes every
 * version whose gradients are complete. */
static void ref_vers_run(ref_vers *rv, int64_t g, const exec_config *c, const exec_dims *d, const exec_data *dt,
                         const int *blocks, ref_buf *rb, const float **wp, float **gp) {
    int64_t G = rv->G;
    size_t nf = rv->nf;
    for (int q = 0; q < rv->Q; q++) {
        size_t pf = (size_t)blocks[q] * nf;
        int k = rv->grp[q * G + g];
        for (int l = 0; l < blocks[q]; l++) {
            wp[rv->b0[q] + l] = rv->ver[q] + (size_t)rv->v[q * G + g] * pf + l * nf;
            gp[rv->b0[q] + l] = (k >= 0 ? rv->acc[q] + (size_t)k * pf : rv->junk + (size_t)rv->b0[q] * nf) + l * nf;
        }
    }
    rv->loss_mb[g] = fwd_bwd(d, c->layers, dt, (int)(g % dt->d), wp, gp, rb);
    rv->done[g] = 1;
    for (int q = 0; q < rv->Q; q++)
        if (rv->grp[q * G + g] >= 0) rv->left[q * (G + 1) + rv->grp[q * G + g]]--;
    /* make every version whose gradients are complete */
    for (int q = 0; q < rv->Q; q++) {
        size_t pf = (size_t)blocks[q] * nf;
        while (rv->nver[q] <= rv->nst[q] && rv->left[q * (G + 1) + rv->nver[q] - 1] == 0) {
            int k = rv->nver[q] - 1;
            sgd(c, rv->ver[q] + (size_t)k * pf, rv->ver[q] + (size_t)(k + 1) * pf, rv->acc[q] + (size_t)k * pf, rv->mom[q],
                pf, rv->size[q * (G + 1) + k]);
            rv->nver[q]++;
        }
    }
}

/* Stash and 2bw: each microbatch runs with the versions its forwards used on every stage; each
 * stage's step k makes version k+1 from version k and the mean gradient of its microbatches.
 * Microbatches run in the first order in which their versions exist. */
static int ref_versions(const sched *s, const exec_config *c, const exec_dims *d, const exec_data *dt,
                        int passes, const int *blocks, ref_buf *rb, const float **wp, float **gp,
                        float *weights, double *loss, pl_err *e) {
    int Q = s->stages, m = s->microbatches;
    int64_t G = (int64_t)passes * m * sched_iterations(s);
    ref_vers rv;
    int rc = ref_vers_alloc(&rv, Q, G, c->layers, exec_block_floats(d), e);
    if (rc == PL_OK) {
        exec_layout lay;
        rc = exec_layout_build(s, c->replicas, &lay, e);
        if (rc == PL_OK) rc = stage_events(s, &lay, passes, G, rv.v, rv.grp, rv.size, rv.nst, e);
        exec_layout_free(&lay);
    }
    if (rc == PL_OK) rc = ref_vers_start(&rv, c, d, blocks, e);
    for (int64_t ndone = 0; rc == PL_OK && ndone < G; ndone++) {
        /* the oldest microbatch whose versions exist: each run may make new versions */
        int64_t g = 0;
        while (g < G && !ref_vers_ready(&rv, g)) g++;
        if (g == G) rc = pl_errf(e, PL_EINPUT, "reference: the schedule's weight versions form a cycle");
        else ref_vers_run(&rv, g, c, d, dt, blocks, rb, wp, gp);
    }
    if (rc == PL_OK) {
        size_t nf = rv.nf;
        for (int q = 0; q < Q; q++) {
            size_t pf = (size_t)blocks[q] * nf;
            memcpy(weights + (size_t)rv.b0[q] * nf, rv.ver[q] + (size_t)rv.nst[q] * pf, pf * sizeof(float));
        }
        exec_iteration_losses(rv.loss_mb, (int)(G / m), m, loss);
    }
    ref_vers_free(&rv);
    return rc;
}

int exec_reference(const sched *s, const exec_config *c, int passes, float *weights,
                   size_t n_weights, double *loss, pl_err *e) {
    exec_dims d;
    exec_dims_of(c, &d);
    int L = c->layers;
    size_t nf = exec_block_floats(&d), n = (size_t)L * nf;
    if (n_weights != n) return pl_errf(e, PL_EINPUT, "reference: weights hold %zu floats, the model %zu", n_weights, n);
    if (passes < 1) return pl_errf(e, PL_EINPUT, "reference: passes must be at least 1");
    int *blocks = pl_calloc((size_t)s->stages, sizeof(int));
    if (!blocks) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = exec_stage_blocks(s, c, blocks, e);
    if (rc) { free(blocks); return rc; }
    exec_data dt;
    rc = exec_data_build(c, 0, &dt, e);
    if (rc) { free(blocks); return rc; }
    size_t bh = (size_t)d.b * d.h, sf = exec_block_state_floats(&d);
    ref_buf rb;
    float *buf = pl_calloc(2 * (size_t)(L + 1) * bh + (size_t)L * sf + exec_block_scratch_floats(&d), sizeof(float));
    float *grad = pl_calloc(n, sizeof(float));
    float *mom = c->momentum != 0 ? pl_calloc(n, sizeof(float)) : NULL;
    const float **wp = pl_calloc((size_t)L, sizeof *wp);
    float **gp = pl_calloc((size_t)L, sizeof *gp);
    if (!buf || !grad || !wp || !gp || (c->momentum != 0 && !mom)) {
        rc = pl_errf(e, PL_ENOMEM, "out of memory in the reference");
        goto out;
    }
    exec_blas_init();
    rb.x = buf;
    rb.g = rb.x + (size_t)(L + 1) * bh;
    rb.st = rb.g + (size_t)(L + 1) * bh;
    rb.scratch = rb.st + (size_t)L * sf;
    if (s->weights == SCHED_WEIGHTS_FLUSH) {
        for (int l = 0; l < L; l++) exec_block_init(&d, c->init_seed, l, weights + l * nf);
        rc = ref_flush(c, &d, &dt, passes * sched_iterations(s), s->microbatches, weights, grad, mom,
                       &rb, wp, gp, loss);
    } else {
        rc = ref_versions(s, c, &d, &dt, passes, blocks, &rb, wp, gp, weights, loss, e);
    }
out:
    free(buf);
    free(grad);
    free(mom);
    free(wp);
    free(gp);
    free(blocks);
    exec_data_free(&dt);
    return rc;
}
