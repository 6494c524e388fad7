/* cuda_exec.c: exec_cuda_run: the lowered schedule on GPUs, one host thread per rank. Each rank
 * walks its action list as the CPU worker does (worker.c) through the same bookkeeping (pools
 * of slots, weight versions, memory classes: exec_xrank, sized by exec_xrank_init's dry walk,
 * kept by xrank.c's calls around each action's compute), but its compute is enqueued on a CUDA
 * stream and its data lives in one device allocation laid out like the CPU arena. SENDs copy with cudaMemcpyPeerAsync on a second stream into a receive
 * slot of the receiving rank (one per RECV action of its list), so communication overlaps
 * compute; the receiver's compute stream waits for the copy's event. CUDA events around every
 * action and every GEMM give the times. Passes end with the rank's streams drained and a
 * barrier, so receive slots are reused safely from pass to pass.
 *
 * This file is the in-process driver: the run's checks, the SEND/RECV pairing, the rank threads
 * and the result; the walker is cuda_walk.c, the device state cuda_mem.c (cuda_exec_int.h). */
#undef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "exec_cuda.h"
#include "cuda_exec_int.h"
#include "cuda_int.h"
#include "exec_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The per-action tables of a rank: send_rank, send_slot, recv_slot. */
#define CX_ACTION_TABLES 3


/* What a rank thread needs. */
typedef struct cx_arg {
    cx_rank *c;
    const exec_data *data;
} cx_arg;

/* The rank thread of the in-process driver: the rank's body, then (after every rank has drained
 * its GPU work) its teardown. */
static void *cx_main(void *arg) {
    cx_arg *ca = arg;
    cx_rank *c = ca->c;
    cx_rank_body(c, ca->data);
    if (c->rc && !exec_err_aborted(&c->err)) cx_abort(c->sh, &c->err);
    if (c->cs) (void)cudaStreamSynchronize(c->cs);
    if (c->ms) (void)cudaStreamSynchronize(c->ms);
    (void)cudaGetLastError();
    cx_exit_wait(c->sh, 1);
    cx_teardown(c);
    return NULL;
}

/* ---------------------------------------------------------------- the run */

int cx_check_config(const exec_config *c, pl_err *e) {
    int rc = exec_check_config(c, e);
    if (rc) return rc;
    if (!exec_precision_name(c->precision)) return pl_errf(e, PL_EINPUT, "unknown precision %d", (int)c->precision);
    if (c->cuda_devices < 0) return pl_errf(e, PL_EINPUT, "the number of GPUs must be >= 0");
    if (c->profile_between_reps > 0)
        return pl_errf(e, PL_EINPUT, "profiling between the passes is the CPU executor's (profile the GPU before the run)");
    if (c->fault.kind != EXEC_FAULT_NONE && c->fault.kind != EXEC_FAULT_ERROR) /* a fault test would pass unharmed */
        return pl_errf(e, PL_EINPUT, "the CUDA backend injects only the 'error' fault, not '%s'", exec_fault_name(c->fault.kind));
    if (c->replicas) /* the CUDA worker's REDUCE_GRAD reduces nothing: refuse rather than train unsynchronized */
        return pl_errf(e, PL_EINPUT, "replicated stages (exec_config.replicas) run on the CPU executor only");
    return PL_OK;
}

/* Pairs every SEND with its RECV: the receiving rank and the receive slot (the RECV's index
 * among the receiver's RECVs); every RECV gets its slot. Returns PL_OK or PL_EINPUT. */
static int plan_comm(const sched *s, cx_rank *cr, cx_shared *sh, pl_err *e) {
    for (int r = 0; r < s->ranks; r++) {
        const sched_rank *rk = &s->rank[r];
        int n = 0;
        for (size_t k = 0; k < rk->n; k++) {
            cr[r].recv_slot[k] = -1;
            if (rk->acts[k].kind == SCHED_RECV_F || rk->acts[k].kind == SCHED_RECV_B) cr[r].recv_slot[k] = n++;
        }
        sh->nrecv[r] = n;
        sh->box[r] = pl_calloc(n ? (size_t)n : 1, sizeof(cx_box));
        if (!sh->box[r]) return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    for (int r = 0; r < s->ranks; r++) {
        const sched_rank *rk = &s->rank[r];
        for (size_t k = 0; k < rk->n; k++) {
            const sched_action *a = &rk->acts[k];
            cr[r].send_rank[k] = cr[r].send_slot[k] = -1;
            if (a->kind != SCHED_SEND_F && a->kind != SCHED_SEND_B) continue;
            int fwd = a->kind == SCHED_SEND_F, to = fwd ? a->stage + 1 : a->stage - 1;
            if (to < 0 || to >= s->stages) {
                pl_errf(e, PL_EINPUT, "rank %d, action %zu: no stage %d to send to", r, k + 1, to);
                pl_err_set_rank(e, r);
                return PL_EINPUT;
            }
            int dst = s->stage_rank[to];
            const sched_rank *rd = &s->rank[dst];
            for (size_t q = 0; q < rd->n; q++) {
                const sched_action *b = &rd->acts[q];
                if (b->kind == (fwd ? SCHED_RECV_F : SCHED_RECV_B) && b->stage == to && b->mb == a->mb) {
                    cr[r].send_rank[k] = dst;
                    cr[r].send_slot[k] = cr[dst].recv_slot[q];
                    break;
                }
            }
            if (cr[r].send_rank[k] < 0) {
                pl_errf(e, PL_EINPUT, "rank %d, action %zu: rank %d never receives this message", r, k + 1, dst);
                pl_err_set_rank(e, r);
                return PL_EINPUT;
            }
        }
    }
    return PL_OK;
}

int cx_record_of(cx_rank *c, const double *loss_mb, exec_rank_record *rec, pl_err *e) {
    return exec_xrank_record(&c->x, loss_mb, c->dmem_bytes, rec, e); /* core -1: none pinned */
}

int cx_setup_rank(cx_rank *c, int r, const sched *s, const exec_config *cfg, const int *blocks,
                  const exec_data *data, double *loss_mb, pl_err *e) {
    int rc = exec_xrank_setup(&c->x, r, s, cfg, blocks, data, loss_mb, e);
    if (rc) return rc;
    size_t n = s->rank[r].n ? s->rank[r].n : 1;
    c->send_rank = pl_calloc(CX_ACTION_TABLES * n, sizeof(int));
    if (!c->send_rank) return pl_errf(e, PL_ENOMEM, "out of memory");
    c->send_slot = c->send_rank + n;
    c->recv_slot = c->send_rank + 2 * n;
    const char *sync = getenv(EXEC_CUDA_SYNC_ENV);
    c->sync_each = sync && sync[0] == '1';
    return PL_OK;
}

void cx_free_rank(cx_rank *c) {
    exec_xrank_free(&c->x);
    free(c->send_rank);
    c->send_rank = NULL;
}
/* Lets every pair of GPUs in use reach each other's memory directly where the hardware can
 * (cudaMemcpyPeerAsync works either way; without peer access it is staged through the host). */
static int enable_peers(int G, pl_err *e) {
    for (int a = 0; a < G; a++) {
        CXC(cudaSetDevice(a));
        for (int b = 0; b < G; b++) {
            int can = 0;
            if (a == b) continue;
            CXC(cudaDeviceCanAccessPeer(&can, a, b));
            if (!can) continue;
            cudaError_t st = cudaDeviceEnablePeerAccess(b, 0);
            if (st == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
            else CXC(st);
        }
    }
    return PL_OK;
}

void cx_result_device(exec_result *out, const exec_config *cfg, const char *desc) {
    out->backend = "cuda";
    out->precision = exec_precision_name(cfg->precision);
    out->blas = "cublas";
    size_t dl = strlen(desc) < sizeof out->device ? strlen(desc) : sizeof out->device - 1;
    memcpy(out->device, desc, dl);
    out->device[dl] = '\0';
}

/* What exec_cuda_run holds while it runs: the GPUs, the split, the shared data and losses, the
 * ranks, their records and threads, and what the rank threads share. */
typedef struct cx_run {
    int p, G;              /* ranks, GPUs used */
    int *blocks;           /* [stages] */
    exec_data data;
    double *loss_mb;       /* [passes * iterations * m] */
    cx_rank *cr;           /* [p] */
    const exec_xrank **xp; /* [p] each rank's bookkeeping: the steady rule's peers */
    cx_arg *args;          /* [p] */
    exec_rank_record *recs;/* [p] */
    pthread_t *th;         /* [p] */
    cx_shared sh;
} cx_run;

/* The checks before anything is allocated: a lowered, valid schedule, the configuration, the
 * GPUs (run->G), green contexts when asked, the split and the host memory. PL_OK or the error. */
static int cx_run_check(const sched *s, const exec_config *cfg, cx_run *run, pl_err *e) {
    if (!s->lowered) return pl_errf(e, PL_EINPUT, "the executor runs lowered schedules (lower it first)");
    int rc = cx_check_config(cfg, e);
    if (rc) return rc;
    if (sched_validate(s, e) != PL_OK) return e->code;
    if (exec_check_fault(s->rank, s->ranks, cfg, e) != PL_OK) return e->code;
    int ndev = exec_cuda_devices(e);
    if (ndev < 1) return e->code;
    if (cfg->cuda_devices > ndev)
        return pl_errf(e, PL_EINPUT, "%d GPUs asked for, %d visible", cfg->cuda_devices, ndev);
    run->G = cfg->cuda_devices > 0 ? cfg->cuda_devices : ndev;
    if (run->G > run->p) run->G = run->p;
    if (cfg->sm_split && run->p > run->G && cx_green_init(e) != PL_OK) return e->code;
    run->blocks = pl_calloc((size_t)s->stages, sizeof *run->blocks);
    if (!run->blocks) return pl_errf(e, PL_ENOMEM, "out of memory");
    rc = exec_stage_blocks(s, cfg, run->blocks, e);
    if (rc == PL_OK) rc = exec_check_memory(s, cfg, run->blocks, -1, e);
    return rc;
}

/* Allocates the run's arrays and shared state, builds the data set, sets up every rank on its
 * GPU (and SM share) and plans the transfers. Returns PL_OK or the error. */
static int cx_run_setup(const sched *s, const exec_config *cfg, cx_run *run, pl_err *e) {
    int p = run->p, G = run->G, P = exec_passes_most(cfg), M = s->microbatches * sched_iterations(s);
    run->loss_mb = pl_calloc((size_t)P * (size_t)M, sizeof(double));
    run->cr = aligned_alloc(_Alignof(cx_rank), (size_t)p * sizeof *run->cr);
    if (run->cr) memset(run->cr, 0, (size_t)p * sizeof *run->cr);
    run->args = pl_calloc((size_t)p, sizeof *run->args);
    run->recs = pl_calloc((size_t)p, sizeof *run->recs);
    run->th = pl_calloc((size_t)p, sizeof *run->th);
    run->xp = pl_calloc((size_t)p, sizeof *run->xp);
    cx_shared *sh = &run->sh;
    sh->p = p;
    sh->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : EXEC_DEFAULT_TIMEOUT_S;
    sh->spin_s = cx_spin_s(p); /* each rank's thread spins for its messages when it has a core */
    sh->box = pl_calloc((size_t)p, sizeof *sh->box);
    sh->nrecv = pl_calloc((size_t)p, sizeof *sh->nrecv);
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->cv, NULL);
    if (!run->loss_mb || !run->cr || !run->args || !run->recs || !run->th || !run->xp || !sh->box || !sh->nrecv)
        return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = exec_data_build(cfg, 0, &run->data, e); /* all D: the devices hold the whole set */
    for (int r = 0; r < p && rc == PL_OK; r++) {
        cx_rank *c = &run->cr[r];
        rc = cx_setup_rank(c, r, s, cfg, run->blocks, &run->data, run->loss_mb, e);
        c->sh = sh;
        run->xp[r] = &c->x;
        c->x.peers = run->xp; /* the steady rule reads every rank's pass times (xrank.c) */
        c->x.npeers = p;
        c->dev = r % G;
        int share = p / G + (r % G < p % G ? 1 : 0); /* ranks on this GPU */
        c->green_n = cfg->sm_split && share > 1 ? share : 0;
        c->green_i = r / G;
    }
    if (rc == PL_OK) rc = plan_comm(s, run->cr, sh, e);
    if (rc == PL_OK) rc = enable_peers(G, e);
    return rc;
}

/* Starts one thread per rank and joins them; returns PL_OK when every rank finished, else the
 * first failure's code and message (the abort reason, or a rank's own error). */
static int cx_run_threads(cx_run *run, pl_err *e) {
    int p = run->p, started = 0;
    for (int r = 0; r < p; r++) {
        run->args[r].c = &run->cr[r];
        run->args[r].data = &run->data;
        if (pthread_create(&run->th[r], NULL, cx_main, &run->args[r]) != 0) {
            pl_err why;
            pl_errf(&why, PL_EINTERNAL, "cannot start the thread of rank %d", r);
            cx_abort(&run->sh, &why);
            cx_exit_wait_none(&run->sh, p - r); /* the ranks never started count as done */
            break;
        }
        started++;
    }
    for (int r = 0; r < started; r++) pthread_join(run->th[r], NULL);
    if (atomic_load(&run->sh.aborted)) {
        int rc = run->sh.why.code ? run->sh.why.code : PL_EINTERNAL;
        pl_errf(e, rc, "%s", run->sh.why.msg);
        pl_err_set_rank(e, pl_err_rank(&run->sh.why));
        return rc;
    }
    for (int r = 0; r < p; r++)
        if (run->cr[r].rc) {
            *e = run->cr[r].err;
            return run->cr[r].rc;
        }
    return PL_OK;
}

/* Assembles the ranks' records into out and describes the GPUs that ran it. PL_OK or the error. */
static int cx_run_results(const sched *s, const exec_config *cfg, cx_run *run, exec_result *out, pl_err *e) {
    int p = run->p, G = run->G, rc = PL_OK;
    for (int r = 0; r < p && rc == PL_OK; r++) rc = cx_record_of(&run->cr[r], run->loss_mb, &run->recs[r], e);
    if (rc == PL_OK) rc = exec_assemble(s, cfg, run->recs, out, e);
    if (rc != PL_OK) return rc;
    char name[CX_NAME_MAX] = "";
    int sms = 0;
    pl_err ig;
    cx_device_props(0, name, sizeof name, &sms, &ig);
    int per = (p + G - 1) / G;
    char dv[CX_DEVICE_TEXT_MAX];
    snprintf(dv, sizeof dv, "%.64s x%d, %d SMs each, %d rank%s per GPU%s", name, G, sms, per, per == 1 ? "" : "s",
             cfg->sm_split && per > 1 ? ", SMs split (green contexts)" : "");
    cx_result_device(out, cfg, dv);
    out->cores = 0;
    if (per > 1 && !cfg->sm_split)
        snprintf(out->warning, sizeof out->warning,
                 "%d ranks share each GPU without --sm-split: their kernels compete for the same SMs", per);
    return PL_OK;
}

/* Frees what the run held (its mutex and condition variable once set up). */
static void cx_run_free(cx_run *run, int shared) {
    int p = run->p;
    if (run->cr)
        for (int r = 0; r < p; r++) cx_free_rank(&run->cr[r]);
    if (run->recs)
        for (int r = 0; r < p; r++) exec_rank_record_free(&run->recs[r]);
    if (run->sh.box)
        for (int r = 0; r < p; r++) free(run->sh.box[r]);
    free(run->sh.box);
    free(run->sh.nrecv);
    if (shared) {
        pthread_mutex_destroy(&run->sh.mu);
        pthread_cond_destroy(&run->sh.cv);
    }
    exec_data_free(&run->data);
    free(run->cr);
    free(run->args);
    free(run->recs);
    free(run->th);
    free(run->xp);
    free(run->loss_mb);
    free(run->blocks);
}

int exec_cuda_run(const sched *s, const exec_config *cfg, exec_result *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    cx_run run;
    memset(&run, 0, sizeof run);
    run.p = s->ranks;
    int rc = cx_run_check(s, cfg, &run, e);
    if (rc) {
        cx_run_free(&run, 0);
        return rc;
    }
    exec_blas_init();
    rc = cx_run_setup(s, cfg, &run, e);
    if (rc == PL_OK) rc = cx_run_threads(&run, e);
    if (rc == PL_OK) rc = cx_run_results(s, cfg, &run, out, e);
    cx_run_free(&run, 1);
    if (rc != PL_OK) exec_result_free(out);
    return rc;
}
