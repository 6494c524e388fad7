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

/* Stash and 2bw: each microbatch runs with the versions its forwards used on every stage; each
 * stage's step k makes version k+1 from version k and the mean gradient of its microbatches.
 * Microbatches run in the first order in which their versions exist. */
static int ref_versions(const sched *s, const exec_config *c, const exec_dims *d, const exec_data *dt,
                        int passes, const int *blocks, ref_buf *rb, const float **wp, float **gp,
                        float *weights, double *loss, pl_err *e) {
    int Q = s->stages, L = c->layers, m = s->microbatches;
    int64_t G = (int64_t)passes * m * sched_iterations(s);
    size_t nf = exec_block_floats(d);
    int *v = pl_calloc((size_t)(Q * G), sizeof(int)), *grp = pl_calloc((size_t)(Q * G), sizeof(int));
    int *size = pl_calloc((size_t)(Q * (G + 1)), sizeof(int)), *nst = pl_calloc((size_t)Q, sizeof(int));
    int *nver = pl_calloc((size_t)Q, sizeof(int)), *b0 = pl_calloc((size_t)Q, sizeof(int));
    int *left = pl_calloc((size_t)(Q * (G + 1)), sizeof(int));
    char *done = pl_calloc((size_t)G, 1);
    float **ver = pl_calloc((size_t)Q, sizeof(float *)), **acc = pl_calloc((size_t)Q, sizeof(float *));
    float **mom = pl_calloc((size_t)Q, sizeof(float *));
    double *loss_mb = pl_calloc((size_t)G, sizeof(double));
    float *junk = pl_calloc((size_t)L * nf, sizeof(float));
    int rc = PL_OK;
    if (!v || !grp || !size || !nst || !nver || !b0 || !left || !done || !ver || !acc || !mom || !loss_mb || !junk) {
        rc = pl_errf(e, PL_ENOMEM, "out of memory in the reference");
        goto out;
    }
    for (int64_t i = 0; i < Q * G; i++) grp[i] = -1;
    exec_layout lay;
    rc = exec_layout_build(s, c->replicas, &lay, e);
    if (rc == PL_OK) rc = stage_events(s, &lay, passes, G, v, grp, size, nst, e);
    exec_layout_free(&lay);
    if (rc != PL_OK) goto out;
    for (int q = 0; q < Q; q++) {
        b0[q] = q ? b0[q - 1] + blocks[q - 1] : 0;
        size_t pf = (size_t)blocks[q] * nf;
        ver[q] = pl_calloc((size_t)(nst[q] + 1) * pf, sizeof(float)); /* every version, for the oracle */
        acc[q] = pl_calloc((size_t)(nst[q] + 1) * pf, sizeof(float));
        mom[q] = c->momentum != 0 ? pl_calloc(pf, sizeof(float)) : NULL;
        if (!ver[q] || !acc[q] || (c->momentum != 0 && !mom[q])) { rc = pl_errf(e, PL_ENOMEM, "out of memory in the reference"); goto out; }
        for (int k = 0; k < blocks[q]; k++) exec_block_init(d, c->init_seed, b0[q] + k, ver[q] + k * nf);
        nver[q] = 1;
        for (int k = 0; k < nst[q]; k++) left[q * (G + 1) + k] = size[q * (G + 1) + k];
    }
    int64_t ndone = 0;
    while (ndone < G) {
        int progress = 0;
        for (int64_t g = 0; g < G; g++) {
            if (done[g]) continue;
            int ready = 1;
            for (int q = 0; q < Q && ready; q++) ready = v[q * G + g] < nver[q];
            if (!ready) continue;
            for (int q = 0; q < Q; q++) {
                size_t pf = (size_t)blocks[q] * nf;
                int k = grp[q * G + g];
                for (int l = 0; l < blocks[q]; l++) {
                    wp[b0[q] + l] = ver[q] + (size_t)v[q * G + g] * pf + l * nf;
                    gp[b0[q] + l] = (k >= 0 ? acc[q] + (size_t)k * pf : junk + (size_t)b0[q] * nf) + l * nf;
                }
            }
            loss_mb[g] = fwd_bwd(d, L, dt, (int)(g % dt->d), wp, gp, rb);
            done[g] = 1;
            ndone++;
            progress = 1;
            for (int q = 0; q < Q; q++)
                if (grp[q * G + g] >= 0) left[q * (G + 1) + grp[q * G + g]]--;
            /* make every version whose gradients are complete */
            for (int q = 0; q < Q; q++) {
                size_t pf = (size_t)blocks[q] * nf;
                while (nver[q] <= nst[q] && left[q * (G + 1) + nver[q] - 1] == 0) {
                    int k = nver[q] - 1;
                    sgd(c, ver[q] + (size_t)k * pf, ver[q] + (size_t)(k + 1) * pf, acc[q] + (size_t)k * pf, mom[q], pf,
                        size[q * (G + 1) + k]);
                    nver[q]++;
                }
            }
            break; /* restart from the oldest microbatch: new versions may enable it */
        }
        if (!progress) { rc = pl_errf(e, PL_EINPUT, "reference: the schedule's weight versions form a cycle"); goto out; }
    }
    for (int q = 0; q < Q; q++) {
        size_t pf = (size_t)blocks[q] * nf;
        memcpy(weights + (size_t)b0[q] * nf, ver[q] + (size_t)nst[q] * pf, pf * sizeof(float));
    }
    exec_iteration_losses(loss_mb, (int)(G / m), m, loss);
out:
    if (ver) for (int q = 0; q < Q; q++) free(ver[q]);
    if (acc) for (int q = 0; q < Q; q++) free(acc[q]);
    if (mom) for (int q = 0; q < Q; q++) free(mom[q]);
    free(v); free(grp); free(size); free(nst); free(nver); free(b0); free(left); free(done);
    free(ver); free(acc); free(mom); free(loss_mb); free(junk);
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
    rc = exec_data_build(c, &dt, e);
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
