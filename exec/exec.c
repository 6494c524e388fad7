/* exec.c: exec_run: checks, the data set, one pinned worker thread per rank over the in-process
 * transport, and the measurements gathered into an exec_result. */
/* POSIX only here: see transport_threads.c; pinning lives in platform/. */
#undef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "exec_int.h"
#include "platform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXEC_MAX_CORES 4096
/* Longest a waiting rank spins before it sleeps (when each rank has a core; transport_threads.c;
 * -DEXEC_SPIN_S=0 builds the sleeping-only variant, for comparison). */
#ifndef EXEC_SPIN_S
#define EXEC_SPIN_S 0.1
#endif

void exec_config_default(exec_config *c) {
    memset(c, 0, sizeof *c);
    c->hidden = EXEC_DEFAULT_HIDDEN;
    c->ffn = 0;
    c->layers = 4;
    c->microbatch_size = EXEC_DEFAULT_MICROBATCH_SIZE;
    c->init_seed = 1;
    c->target_seed = 2;
    c->data_seed = 3;
    c->dataset_microbatches = EXEC_DEFAULT_DATASET_MICROBATCHES;
    c->lr = 0.05;
    c->momentum = 0.0;
    c->warmup_passes = 1;
    c->timed_passes = 5;
    c->pin = 1;
    c->timeout_s = 60.0;
}

/* The names of the fault kinds, by kind. */
static const char *const fault_names[] = {NULL, "error", "size", "exit", "kill", "drop-recv", "drop-send", "extra-send",
                                             "delay-send"};

const char *exec_fault_name(exec_fault_kind k) {
    return (int)k > 0 && (size_t)k < sizeof fault_names / sizeof *fault_names ? fault_names[k] : NULL;
}

exec_fault_kind exec_fault_parse(const char *name) {
    for (size_t k = 1; name && k < sizeof fault_names / sizeof *fault_names; k++)
        if (strcmp(name, fault_names[k]) == 0) return (exec_fault_kind)k;
    return EXEC_FAULT_NONE;
}

size_t exec_param_count(const exec_config *cfg) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    return (size_t)cfg->layers * exec_block_floats(&d);
}

int exec_stage_blocks(const sched *s, const exec_config *cfg, int *blocks, pl_err *e) {
    int L = cfg->layers, n = s->stages;
    if (cfg->stage_blocks) {
        int sum = 0;
        for (int q = 0; q < n; q++) {
            if (cfg->stage_blocks[q] < 1) return pl_errf(e, PL_EINPUT, "stage %d has %d blocks in --stage-blocks; every stage needs at least one", q, cfg->stage_blocks[q]);
            blocks[q] = cfg->stage_blocks[q];
            sum += blocks[q];
        }
        if (sum != L) return pl_errf(e, PL_EINPUT, "the stage split (--stage-blocks) has %d blocks, the model (--depth) %d", sum, L);
        return PL_OK;
    }
    if (L < n) return pl_errf(e, PL_EINPUT, "%d blocks cannot fill %d stages: give --depth %d or more (one block per stage at least)", L, n, n);
    for (int q = 0; q < n; q++) blocks[q] = L / n + (q < L % n ? 1 : 0);
    return PL_OK;
}

int exec_check_config(const exec_config *c, pl_err *e) {
    if (c->hidden < 1 || c->hidden > 65536) return pl_errf(e, PL_EINPUT, "hidden size %d out of range 1..65536", c->hidden);
    if (c->ffn < 0 || c->ffn > 1 << 20) return pl_errf(e, PL_EINPUT, "ffn size %d out of range", c->ffn);
    if (c->layers < 1) return pl_errf(e, PL_EINPUT, "layers must be at least 1");
    if (c->microbatch_size < 1) return pl_errf(e, PL_EINPUT, "microbatch size must be at least 1");
    if (c->warmup_passes < 0 || c->timed_passes < 1) return pl_errf(e, PL_EINPUT, "need warm-up >= 0 and timed passes >= 1");
    if (!(c->lr >= 0) || !(c->momentum >= 0) || c->momentum >= 1) return pl_errf(e, PL_EINPUT, "need lr >= 0 and 0 <= momentum < 1");
    if (c->dataset_microbatches < 0) return pl_errf(e, PL_EINPUT, "data set size must be positive");
    return PL_OK;
}

/* Orders doubles ascending for qsort. */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double exec_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int exec_median_passes(const double *pass_s, int n, int mid[2]) {
    mid[0] = mid[1] = 0;
    if (n <= 0) return PL_OK;
    int *ord = pl_calloc((size_t)n, sizeof *ord);
    if (!ord) return PL_ENOMEM;
    for (int t = 0; t < n; t++) ord[t] = t;
    for (int t = 1; t < n; t++) /* insertion sort by pass time, stable: ties keep pass order */
        for (int u = t; u > 0 && pass_s[ord[u]] < pass_s[ord[u - 1]]; u--) {
            int x = ord[u];
            ord[u] = ord[u - 1];
            ord[u - 1] = x;
        }
    mid[0] = ord[(n - 1) / 2];
    mid[1] = ord[n / 2];
    free(ord);
    return PL_OK;
}

void exec_result_free(exec_result *r) {
    if (!r) return;
    free(r->stage_blocks);
    free(r->pass_s);
    free(r->loss);
    free(r->final_weights);
    if (r->rank)
        for (int q = 0; q < r->ranks; q++) free(r->rank[q].ops);
    free(r->rank);
    free(r->between_profile);
    memset(r, 0, sizeof *r);
}

/* Counts the receives in a rank's list (one pass): what its mailbox must hold at most. */
static int recv_count(const sched *s, int r) {
    int n = 0;
    for (size_t k = 0; k < s->rank[r].n; k++)
        n += s->rank[r].acts[k].kind == SCHED_RECV_F || s->rank[r].acts[k].kind == SCHED_RECV_B;
    return n;
}

void exec_rank_record_free(exec_rank_record *r) {
    if (!r) return;
    free(r->pass_start_s);
    free(r->ops);
    free(r->loss_mb);
    free(r->weights);
    memset(r, 0, sizeof *r);
}

int exec_assemble(const sched *s, const exec_config *c, const exec_rank_record *recs, exec_result *out,
                  pl_err *e) {
    memset(out, 0, sizeof *out);
    int p = s->ranks, T = c->timed_passes, W = c->warmup_passes, P = W + T;
    int it = sched_iterations(s);
    for (int r = 0; r < p; r++)
        if (recs[r].passes != P || recs[r].rank != r)
            return pl_errf(e, PL_EINPUT, "record %d is of rank %d with %d passes; expected rank %d with %d", r,
                           recs[r].rank, recs[r].passes, r, P);
    exec_dims d;
    exec_dims_of(c, &d);
    memcpy(out->kind, s->kind, sizeof out->kind);
    out->ranks = p;
    out->stages = s->stages;
    out->microbatches = s->microbatches;
    out->iterations_per_pass = it;
    out->weights = s->weights;
    out->recompute = s->recompute;
    out->hidden = d.h;
    out->ffn = d.f;
    out->layers = c->layers;
    out->microbatch_size = d.b;
    out->lr = c->lr;
    out->momentum = c->momentum;
    out->warmup_passes = W;
    out->timed_passes = T;
    out->blas = exec_blas_init();
    out->cores = 0; /* the driver fills in what it knows (exec_run: the cores of this process) */
    out->param_bytes = exec_param_count(c) * sizeof(float);
    out->stage_blocks = pl_calloc((size_t)s->stages, sizeof(int));
    out->pass_s = pl_calloc((size_t)T, sizeof(double));
    out->n_iters = P * it;
    out->loss = pl_calloc((size_t)out->n_iters, sizeof(double));
    out->rank = pl_calloc((size_t)p, sizeof *out->rank);
    double *tmp = pl_calloc((size_t)T, sizeof(double));
    int rc = PL_OK;
    if (!out->stage_blocks || !out->pass_s || !out->loss || !out->rank || !tmp) {
        rc = pl_errf(e, PL_ENOMEM, "out of memory assembling results");
        goto fail;
    }
    rc = exec_stage_blocks(s, c, out->stage_blocks, e);
    if (rc) goto fail;
    /* pass times: first start to last end over all ranks (one clock) */
    double base = recs[0].pass_start_s[W], sum = 0, sum2 = 0;
    for (int t = 0; t < T; t++) {
        int q = W + t;
        double st = recs[0].pass_start_s[q], en = recs[0].pass_end_s[q];
        for (int r = 1; r < p; r++) {
            if (recs[r].pass_start_s[q] < st) st = recs[r].pass_start_s[q];
            if (recs[r].pass_end_s[q] > en) en = recs[r].pass_end_s[q];
        }
        if (t == 0) base = st;
        out->pass_s[t] = tmp[t] = en - st;
        sum += en - st;
        sum2 += (en - st) * (en - st);
    }
    out->pass_min_s = out->pass_max_s = out->pass_s[0];
    for (int t = 1; t < T; t++) {
        if (out->pass_s[t] < out->pass_min_s) out->pass_min_s = out->pass_s[t];
        if (out->pass_s[t] > out->pass_max_s) out->pass_max_s = out->pass_s[t];
    }
    double mean = sum / T, var = sum2 / T - mean * mean;
    out->pass_stddev_s = var > 0 ? sqrt(var) : 0;
    out->pass_median_s = exec_median(tmp, (size_t)T);
    out->iter_median_s = out->pass_median_s / it;
    out->throughput_samples_s = out->pass_median_s > 0 ? (double)s->microbatches * d.b * it / out->pass_median_s : 0;
    /* the per-rank figures come from the pass(es) whose time is the median (the middle one, or
     * the middle two averaged), as the iteration time does: busy + idle is then the pass time,
     * and one slow pass cannot inflate the idle time and bubble of an otherwise typical run */
    int *mid = out->median_pass, nmid = T % 2 ? 1 : 2;
    if (exec_median_passes(out->pass_s, T, mid) != PL_OK) {
        rc = pl_errf(e, PL_ENOMEM, "out of memory assembling results");
        goto fail;
    }
    out->zb_bubble_rate = NAN;
    for (int r = 0; r < p; r++) {
        exec_rank_result *rr = &out->rank[r];
        const exec_rank_record *rc_ = &recs[r];
        double busy = 0, comm = 0, tot = 0, gs = 0, gf = 0, span = 0;
        for (int k = 0; k < nmid; k++) {
            int t = mid[k];
            busy += rc_->busy_s[W + t];
            span += rc_->span_s ? rc_->span_s[W + t] : 0;
            comm += rc_->comm_s[W + t];
            gs += rc_->gemm_s[W + t];
            gf += rc_->gemm_flops[W + t];
            tot += out->pass_s[t];
        }
        rr->busy_s = busy / nmid;
        rr->comm_s = comm / nmid;
        rr->gemm_s = gs / nmid;
        rr->gemm_flops = gf / nmid;
        rr->idle_s = (tot - busy) / nmid;
        rr->bubble_fraction = tot > 0 ? (tot - busy) / tot : 0;
        if (span > 0) { /* the paper's rate: the worst rank's idle share of its own span */
            double rate = (span - busy) / span;
            if (rate < 0) rate = 0;
            if (isnan(out->zb_bubble_rate) || rate > out->zb_bubble_rate) out->zb_bubble_rate = rate;
        }
        rr->peak = rc_->peak;
        rr->allocated_bytes = rc_->allocated_bytes;
        rr->model_peak_bytes = rc_->model_peak_bytes;
        rr->core = rc_->core;
        if (rc_->n_ops) {
            rr->ops = pl_calloc(rc_->n_ops, sizeof *rr->ops);
            if (!rr->ops) { rc = pl_errf(e, PL_ENOMEM, "out of memory copying the op records"); goto fail; }
            rr->n_ops = rc_->n_ops;
            for (size_t k = 0; k < rr->n_ops; k++) {
                rr->ops[k] = rc_->ops[k];
                rr->ops[k].start_s -= base;
                rr->ops[k].end_s -= base;
            }
        }
    }
    const double *loss_mb = recs[s->stage_rank[s->stages - 1]].loss_mb;
    for (int i = 0; i < out->n_iters; i++) {
        double l = 0;
        for (int j = 0; j < s->microbatches; j++) l += loss_mb[(size_t)i * s->microbatches + j];
        out->loss[i] = l / s->microbatches;
    }
    if (c->return_weights) {
        out->n_weights = exec_param_count(c);
        out->final_weights = pl_calloc(out->n_weights, sizeof(float));
        if (!out->final_weights) { rc = pl_errf(e, PL_ENOMEM, "out of memory copying weights"); goto fail; }
        size_t nf = exec_block_floats(&d);
        for (int q = 0, b0 = 0; q < s->stages; b0 += out->stage_blocks[q], q++) {
            const float *src = recs[s->stage_rank[q]].weights + (size_t)b0 * nf;
            memcpy(out->final_weights + (size_t)b0 * nf, src, (size_t)out->stage_blocks[q] * nf * sizeof(float));
        }
    }
    int profiled = p > 0;
    for (int r = 0; r < p; r++) profiled = profiled && recs[r].has_prof;
    if (profiled) {
        /* the profile between the passes: each worker's own, and over all of them the median of
         * theirs (the in-process executor replaces it by the median over all their rounds) */
        out->between_profile = pl_calloc((size_t)p + 1, sizeof *out->between_profile);
        double *v = pl_calloc((size_t)p, sizeof *v);
        if (!out->between_profile || !v) {
            free(v);
            rc = pl_errf(e, PL_ENOMEM, "out of memory");
            goto fail;
        }
        out->between_reps = c->profile_between_reps;
        exec_layer_profile *all = &out->between_profile[0];
        double *kind[5] = {&all->f_s, &all->i_s, &all->w_s, &all->step_s, &all->i0_s};
        for (int k = 0; k < 5; k++) {
            for (int r = 0; r < p; r++) v[r] = recs[r].prof_s[k];
            *kind[k] = exec_median(v, (size_t)p);
        }
        free(v);
        for (int r = 0; r <= p; r++) {
            exec_layer_profile *lp = &out->between_profile[r];
            if (r > 0) {
                const double *v = recs[r - 1].prof_s;
                lp->f_s = v[0], lp->i_s = v[1], lp->w_s = v[2], lp->step_s = v[3], lp->i0_s = v[4];
            }
            lp->concurrency = p;
            exec_profile_sizes(&d, lp);
        }
    }
    free(tmp);
    return PL_OK;
fail:
    free(tmp);
    exec_result_free(out);
    return rc;
}

/* exec.h. The allocations would otherwise succeed one by one and the kernel kill the process
 * while it touches them. */
int exec_check_memory(const sched *s, const exec_config *c, const int *blocks, int rank, pl_err *e) {
    exec_dims d;
    exec_dims_of(c, &d);
    double nf = (double)exec_block_floats(&d), per = 2.0 + (c->momentum != 0.0), nblocks = 0;
    int nranks = rank < 0 ? s->ranks : 1;
    for (int q = 0; q < s->stages; q++)
        if (rank < 0 || s->stage_rank[q] == rank) nblocks += blocks[q];
    double bytes = 4.0 * nf * per * nblocks;
    if (c->profile_between_reps > 0) bytes += 4.0 * nf * per * exec_prof_blocks(c, s->ranks) * nranks;
    double D = c->dataset_microbatches > 0 ? c->dataset_microbatches : 64;
    bytes += 4.0 * (2.0 * D * d.b * d.h + nf);
    const char *src = NULL;
    uint64_t lim = sched_memory_limit(&src);
    if (bytes <= (double)lim) return PL_OK;
    double gib = 1024.0 * 1024.0 * 1024.0, mib = 1024.0 * 1024.0;
    int in_gib = (double)lim >= gib;
    return pl_errf(e, PL_EINPUT,
                   "the model does not fit: %s needs at least %.1f %s%s (the weights%s of %.0f blocks of width %d and ffn "
                   "%d, %sthe data set and the target network), more than the %.1f %s available (%s); use a smaller "
                   "--width, --ffn or --depth, more MPI processes, or raise the limit with --max-memory or "
                   "PIPELAB_MAX_MEMORY",
                   rank < 0 ? "the run" : "this rank's process", bytes / (in_gib ? gib : mib), in_gib ? "GiB" : "MiB",
                   c->backend == EXEC_BACKEND_CUDA ? " of host memory besides the GPU's" : "",
                   c->momentum != 0.0 ? ", gradients and momentum" : " and gradients", nblocks, d.h, d.f,
                   c->profile_between_reps > 0 ? "the profile's blocks between the passes, " : "",
                   (double)lim / (in_gib ? gib : mib), in_gib ? "GiB" : "MiB", src);
}

/* Checks what every entry point checks: a lowered, valid schedule and a sane configuration;
 * fills blocks[stages]. Returns PL_OK or the error. */
static int check_run(const sched *s, const exec_config *c, int *blocks, pl_err *e) {
    if (!s->lowered) return pl_errf(e, PL_EINPUT, "the executor runs lowered schedules (lower it first)");
    int rc = exec_check_config(c, e);
    if (rc) return rc;
    if (sched_validate(s, e) != PL_OK) return e->code;
    return exec_stage_blocks(s, c, blocks, e);
}

int exec_run_rank(const sched *s, const exec_config *c, exec_transport *t, exec_rank_record *rec, pl_err *e) {
    memset(rec, 0, sizeof *rec);
    int r = t->rank(t);
    if (t->size(t) != s->ranks) return pl_errf(e, PL_EINPUT, "the transport has %d ranks, the schedule %d", t->size(t), s->ranks);
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    if (!blocks) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = check_run(s, c, blocks, e);
    if (rc == PL_OK) rc = exec_check_memory(s, c, blocks, r, e);
    exec_blas_init();
    int P = c->warmup_passes + c->timed_passes, M = (int)sched_total_microbatches(s);
    exec_data data;
    memset(&data, 0, sizeof data);
    exec_xrank x;
    memset(&x, 0, sizeof x);
    double *loss_mb = pl_calloc((size_t)P * (size_t)M, sizeof(double));
    if (rc == PL_OK && !loss_mb) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) rc = exec_data_build(c, &data, e);
    if (rc == PL_OK) rc = exec_xrank_setup(&x, r, s, c, blocks, &data, loss_mb, e);
    if (rc == PL_OK && c->profile_between_reps > 0) {
        /* the profile between the passes: this rank's worker's blocks and buffers */
        x.prof = exec_prof_worker_new(c, r, s->ranks, exec_prof_rounds(c->profile_between_reps), e);
        if (!x.prof) {
            rc = e->code;
            pl_err_prefix(e, "rank %d, the profile between the passes: ", r);
        }
    }
    if (rc == PL_OK) {
        int cpus[EXEC_MAX_CORES];
        int n = exec_platform_cores(cpus, EXEC_MAX_CORES);
        if (c->pin && n > 0) x.core = cpus[r % n];
        x.t = t;
        exec_worker_main(&x);
        rc = x.rc;
        if (rc) *e = x.err;
    } else {
        pl_err why = *e;
        if (strncmp(why.msg, "rank ", 5) != 0) pl_err_prefix(&why, "rank %d: ", r); /* else it names the rank */
        t->abort(t, &why);
        if (t->finished) t->finished(t);
    }
    if (rc == PL_OK) rc = exec_xrank_record(&x, loss_mb, x.arena_bytes, rec, e);
    exec_xrank_free(&x);
    exec_data_free(&data);
    free(loss_mb);
    free(blocks);
    return rc;
}

/* Appends to e where each of the p workers stopped (the transport stopped the run, e.g. every
 * rank waited: the message names what each waited for, this adds the actions). */
static void positions(const exec_xrank *xr, int p, pl_err *e) {
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_printf(&b, "%s [", e->msg);
    for (int r = 0; r < p; r++) {
        char w[160];
        exec_xrank_where(&xr[r], w, sizeof w);
        pl_buf_printf(&b, "%srank %d at %s", r ? "; " : "", r, xr[r].rc == PL_OK ? "the end" : w);
    }
    pl_buf_putc(&b, ']');
    pl_errf(e, e->code, "%s", b.data ? b.data : e->msg);
    pl_buf_free(&b);
}

int exec_run(const sched *s, const exec_config *c, exec_result *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    int p = s->ranks;
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    int *cpus = pl_calloc(EXEC_MAX_CORES, sizeof *cpus);
    if (!blocks || !cpus) { free(blocks); free(cpus); return pl_errf(e, PL_ENOMEM, "out of memory"); }
    int rc = check_run(s, c, blocks, e);
    if (rc == PL_OK) rc = exec_check_memory(s, c, blocks, -1, e);
    int ncores = exec_platform_cores(cpus, EXEC_MAX_CORES);
    if (rc == PL_OK && p > ncores && !c->oversubscribe)
        rc = pl_errf(e, PL_EINPUT, "%d ranks but only %d cores available; give --oversubscribe (exec_config.oversubscribe) "
                     "to run anyway (timings would then measure time-slicing)", p, ncores);
    if (rc) { free(blocks); free(cpus); return rc; }
    exec_blas_init();
    int P = c->warmup_passes + c->timed_passes, it = sched_iterations(s);
    int M = s->microbatches * it;
    exec_data data;
    memset(&data, 0, sizeof data);
    double *loss_mb = pl_calloc((size_t)P * (size_t)M, sizeof(double));
    exec_xrank *xr = aligned_alloc(_Alignof(exec_xrank), (size_t)p * sizeof *xr); /* no false sharing */
    if (xr) memset(xr, 0, (size_t)p * sizeof *xr);
    exec_rank_record *recs = pl_calloc((size_t)p, sizeof *recs);
    pthread_t *th = pl_calloc((size_t)p, sizeof *th);
    exec_transport *t = NULL;
    int started = 0;
    if (!loss_mb || !xr || !th || !recs) { rc = pl_errf(e, PL_ENOMEM, "out of memory"); goto done; }
    rc = exec_data_build(c, &data, e); /* once, shared read-only by the workers */
    if (rc) goto done;
    int cap = 1;
    for (int r = 0; r < p && rc == PL_OK; r++) {
        rc = exec_xrank_setup(&xr[r], r, s, c, blocks, &data, loss_mb, e);
        int n = recv_count(s, r);
        if (n > cap) cap = n;
    }
    /* the profile between the passes: each worker's blocks and buffers, beside its arena */
    for (int r = 0; r < p && rc == PL_OK && c->profile_between_reps > 0; r++) {
        xr[r].prof = exec_prof_worker_new(c, r, p, exec_prof_rounds(c->profile_between_reps), e);
        if (!xr[r].prof) {
            rc = e->code;
            pl_err_prefix(e, "rank %d, the profile between the passes: ", r);
        }
    }
    if (rc) goto done;
    if (c->mailbox_capacity > 0) cap = c->mailbox_capacity;
    t = exec_threads_transport_new(p, cap, (size_t)c->microbatch_size * (size_t)c->hidden * sizeof(float), c->timeout_s, e);
    if (!t) { rc = e->code; goto done; }
    /* waiting ranks spin before sleeping when each has its own core (transport_threads.c) */
    if (p <= ncores) exec_threads_transport_spin(t, EXEC_SPIN_S);
    for (int r = 0; r < p; r++) {
        xr[r].t = &t[r];
        if (c->pin && ncores > 0) xr[r].core = cpus[r % ncores]; /* the worker pins itself */
        int err = pthread_create(&th[r], NULL, exec_worker_main, &xr[r]);
        if (err) {
            pl_err why;
            pl_errf(&why, PL_EINTERNAL, "cannot start the worker thread of rank %d", r);
            t[0].abort(&t[0], &why);
            rc = pl_errf(e, PL_EINTERNAL, "%s", why.msg);
            break;
        }
        started++;
    }
    for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
    if (rc) goto done;
    pl_err why;
    if (exec_threads_transport_why(t, &why)) {
        /* the first failure is the cause; the others were stopped by it */
        rc = why.code ? why.code : PL_EINTERNAL;
        pl_errf(e, rc, "%s", why.msg);
        if (strncmp(why.msg, "rank ", 5) != 0) positions(xr, p, e); /* the transport's own reason */
        goto done;
    }
    for (int r = 0; r < p; r++)
        if (xr[r].rc) { rc = xr[r].rc; *e = xr[r].err; goto done; }
    for (int r = 0; r < p && rc == PL_OK; r++) rc = exec_xrank_record(&xr[r], loss_mb, xr[r].arena_bytes, &recs[r], e);
    if (rc == PL_OK) rc = exec_assemble(s, c, recs, out, e);
    if (rc == PL_OK && out->between_profile) {
        /* in one process, the profile over all workers is the median over all their rounds */
        exec_prof_worker **pw = pl_calloc((size_t)p, sizeof *pw);
        if (!pw) rc = pl_errf(e, PL_ENOMEM, "out of memory");
        for (int r = 0; rc == PL_OK && r < p; r++) pw[r] = xr[r].prof;
        if (rc == PL_OK) rc = exec_prof_worker_collect(pw, p, c, &out->between_profile[0], NULL, e);
        free(pw);
    }
    if (rc == PL_OK) {
        out->cores = ncores;
        if (p > ncores)
            snprintf(out->warning, sizeof out->warning,
                     "%d ranks on %d cores: oversubscribed, timings measure time-slicing", p, ncores);
    }
done:
    if (xr)
        for (int r = 0; r < p; r++) exec_xrank_free(&xr[r]);
    if (recs)
        for (int r = 0; r < p; r++) exec_rank_record_free(&recs[r]);
    if (t) exec_threads_transport_free(t, p);
    exec_data_free(&data);
    free(xr);
    free(recs);
    free(th);
    free(loss_mb);
    free(blocks);
    free(cpus);
    if (rc != PL_OK) exec_result_free(out);
    return rc;
}
