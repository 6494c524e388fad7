/* exec.c: exec_run: checks, the data set, one pinned worker thread per rank over the in-process
 * transport, and the measurements gathered into an exec_result. */
/* POSIX only here: see transport_threads.c; pinning lives in platform/. */
#undef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "exec_int.h"
#include "platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What exec_run holds while it runs: its checks' results, the shared data and losses, the ranks'
 * states and records, the threads and the transport. */
typedef struct run_state {
    int p;                 /* ranks */
    int *blocks;           /* [stages] */
    int *cpus;             /* [EXEC_MAX_CORES] the cores of this process */
    int ncores;
    exec_data data;        /* built once, shared read-only by the workers */
    double *loss_mb;       /* [passes * iterations * m] */
    exec_xrank *xr;        /* [p] 64-byte aligned: no false sharing */
    const exec_xrank **xp; /* [p] each rank's: the steady rule's peers */
    exec_rank_record *recs;/* [p] */
    pthread_t *th;         /* [p] */
    exec_transport *t;     /* [p] endpoints */
    exec_layout lay;       /* the ranks: the schedule's, or their replicas (exec_config.replicas) */
    int cap;               /* mailbox capacity: most receives of a rank per pass */
} run_state;

/* Counts the receives in a rank's list (one pass): what its mailbox must hold at most, plus the
 * pieces of a ring all-reduce one neighbour can send ahead (at most one per replica, and one). */
static int recv_count(const exec_layout *L, int r) {
    const sched_rank *rk = &L->list[r];
    int n = 0;
    for (size_t k = 0; k < rk->n; k++) n += rk->acts[k].kind == SCHED_RECV_F || rk->acts[k].kind == SCHED_RECV_B;
    return n + (L->width[L->srank[r]] > 1 ? L->width[L->srank[r]] + 1 : 0);
}

/* Appends to e where each of the p workers stopped (the transport stopped the run, e.g. every
 * rank waited: the message names what each waited for, this adds the actions). */
static void positions(const exec_xrank *xr, int p, pl_err *e) {
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_printf(&b, "%s [", e->msg);
    for (int r = 0; r < p; r++) {
        char w[EXEC_WHERE_MAX];
        exec_xrank_where(&xr[r], w, sizeof w);
        pl_buf_printf(&b, "%srank %d at %s", r ? "; " : "", r, xr[r].rc == PL_OK ? "the end" : w);
    }
    pl_buf_putc(&b, ']');
    pl_errf(e, e->code, "%s", b.data ? b.data : e->msg);
    pl_buf_free(&b);
}

/* The checks before anything is allocated for the run: schedule, configuration, memory, and
 * ranks against cores (unless oversubscribed). Fills st's blocks and cores. PL_OK or the error. */
static int run_check(const sched *s, const exec_config *c, run_state *st, pl_err *e) {
    st->blocks = pl_calloc((size_t)s->stages, sizeof *st->blocks);
    st->cpus = pl_calloc(EXEC_MAX_CORES, sizeof *st->cpus);
    if (!st->blocks || !st->cpus) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = exec_check_run(s, c, st->blocks, e);
    if (rc == PL_OK) rc = exec_layout_build(s, c->replicas, &st->lay, e);
    if (rc == PL_OK) st->p = st->lay.ranks;
    if (rc == PL_OK) rc = exec_check_fault(st->lay.list, st->lay.ranks, c, e);
    if (rc == PL_OK) rc = exec_check_memory(s, c, st->blocks, -1, e);
    st->ncores = exec_platform_cores(st->cpus, EXEC_MAX_CORES);
    if (rc == PL_OK) rc = exec_check_cores(st->p, st->ncores, c->oversubscribe, "ranks", e);
    return rc;
}

/* One rank's setup (setup_ranks): its arena and initial weights, then its profile between the
 * passes; its own error report. */
typedef struct {
    const sched *s;
    const exec_config *c;
    run_state *st;
    int r, rc, own_thread; /* own_thread: runs in a thread of its own (joined; may pin itself) */
    pl_err err;
} rank_setup;

static void *rank_setup_main(void *arg) {
    rank_setup *u = arg;
    run_state *st = u->st;
    exec_xrank *x = &st->xr[u->r];
    /* on the core the rank will run on (run_threads), so that its memory is first touched there,
     * as a rank's own process would */
    if (u->own_thread && u->c->pin && st->ncores > 0) (void)exec_platform_pin_self(st->cpus[u->r % st->ncores]);
    u->rc = exec_xrank_setup_in(x, u->r, &st->lay, u->s, u->c, st->blocks, &st->data, st->loss_mb, &u->err);
    if (u->rc == PL_OK && u->c->profile_between_reps > 0) u->rc = exec_xrank_prof_new(x, u->c, st->p, &u->err);
    return NULL;
}

/* Sets up every rank (rank_setup_main), as many at once as there are cores: writing the initial
 * weights of a wide model and its profile's blocks takes seconds a rank, which one thread would
 * add up. Each rank touches only its own state. Returns PL_OK or the lowest failing rank's error. */
static int setup_ranks(const sched *s, const exec_config *c, run_state *st, pl_err *e) {
    int p = st->p, at_once = st->ncores > 1 ? st->ncores : 1;
    rank_setup *u = pl_calloc((size_t)p, sizeof *u);
    pthread_t *th = pl_calloc((size_t)p, sizeof *th);
    int rc = u && th ? PL_OK : pl_errf(e, PL_ENOMEM, "out of memory");
    for (int r0 = 0; r0 < p && rc == PL_OK; r0 += at_once) {
        int r1 = r0 + at_once < p ? r0 + at_once : p;
        for (int r = r0; r < r1; r++) {
            u[r] = (rank_setup){.s = s, .c = c, .st = st, .r = r, .own_thread = 1};
            if (pthread_create(&th[r], NULL, rank_setup_main, &u[r]) != 0) {
                u[r].own_thread = 0; /* no thread: in this one, unpinned */
                rank_setup_main(&u[r]);
            }
        }
        for (int r = r0; r < r1; r++)
            if (u[r].own_thread) pthread_join(th[r], NULL);
        for (int r = r0; r < r1 && rc == PL_OK; r++)
            if (u[r].rc != PL_OK) {
                *e = u[r].err;
                rc = u[r].rc;
            }
    }
    free(u);
    free(th);
    return rc;
}

/* Allocates the run's arrays, builds the data set, sets up every rank (and its profile between
 * the passes) and makes the transport. Returns PL_OK or the error. */
static int run_setup(const sched *s, const exec_config *c, run_state *st, pl_err *e) {
    int p = st->p, P = exec_passes_most(c), M = s->microbatches * sched_iterations(s);
    st->loss_mb = pl_calloc((size_t)P * (size_t)M, sizeof(double));
    st->xr = aligned_alloc(_Alignof(exec_xrank), (size_t)p * sizeof *st->xr);
    if (st->xr) memset(st->xr, 0, (size_t)p * sizeof *st->xr);
    st->recs = pl_calloc((size_t)p, sizeof *st->recs);
    st->th = pl_calloc((size_t)p, sizeof *st->th);
    st->xp = pl_calloc((size_t)p, sizeof *st->xp);
    if (!st->loss_mb || !st->xr || !st->th || !st->recs || !st->xp) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int r = 0; r < p; r++) st->xp[r] = &st->xr[r];
    int rc = exec_data_build(c, exec_data_used(P, M), &st->data, e);
    if (rc == PL_OK) rc = setup_ranks(s, c, st, e);
    if (rc) return rc;
    st->cap = 1;
    for (int r = 0; r < p; r++) {
        int n = recv_count(&st->lay, r);
        if (n > st->cap) st->cap = n;
    }
    if (c->mailbox_capacity > 0) st->cap = c->mailbox_capacity;
    size_t msg_bytes = (size_t)st->xr[0].d.b * (size_t)st->xr[0].d.h * sizeof(float); /* a microbatch's rows */
    if (st->lay.ranks > s->ranks && msg_bytes < EXEC_RING_PIECE_BYTES) msg_bytes = EXEC_RING_PIECE_BYTES; /* all-reduce pieces */
    st->t = exec_threads_transport_new(p, st->cap, msg_bytes, c->timeout_s, e);
    if (!st->t) return e->code;
    /* waiting ranks spin before sleeping when each has its own core (transport_threads.c) */
    if (p <= st->ncores) exec_threads_transport_spin(st->t, EXEC_SPIN_S);
    return PL_OK;
}

/* Starts one worker thread per rank (each pins itself) and joins them. Returns PL_OK, or
 * PL_EINTERNAL when a thread could not start (the run is aborted then). */
static int run_threads(const exec_config *c, run_state *st, pl_err *e) {
    int started = 0, rc = PL_OK;
    for (int r = 0; r < st->p; r++) {
        st->xr[r].t = &st->t[r];
        st->xr[r].peers = st->xp; /* the steady rule reads every rank's pass times (xrank.c) */
        st->xr[r].npeers = st->p;
        if (c->pin && st->ncores > 0) st->xr[r].core = st->cpus[r % st->ncores];
        if (pthread_create(&st->th[r], NULL, exec_worker_main, &st->xr[r]) != 0) {
            pl_err why;
            pl_errf(&why, PL_EINTERNAL, "cannot start the worker thread of rank %d", r);
            st->t[0].abort(&st->t[0], &why);
            rc = pl_errf(e, PL_EINTERNAL, "%s", why.msg);
            break;
        }
        started++;
    }
    for (int r = 0; r < started; r++) pthread_join(st->th[r], NULL);
    return rc;
}

/* Returns PL_OK when every worker finished, else the first failure's code and message: the
 * transport's abort reason (a worker's error, or the transport's own, e.g. every rank waiting,
 * to which where each worker stopped is added), else a worker's own error. */
static int run_failure(run_state *st, pl_err *e) {
    pl_err why;
    if (exec_threads_transport_why(st->t, &why)) {
        /* the first failure is the cause; the others were stopped by it */
        int rc = why.code ? why.code : PL_EINTERNAL;
        pl_errf(e, rc, "%s", why.msg);
        pl_err_set_rank(e, pl_err_rank(&why));
        if (pl_err_rank(&why) < 0) positions(st->xr, st->p, e); /* the transport's own reason */
        return rc;
    }
    for (int r = 0; r < st->p; r++)
        if (st->xr[r].rc) {
            *e = st->xr[r].err;
            return st->xr[r].rc;
        }
    return PL_OK;
}

/* Turns the finished workers into out: their records assembled, the profile between the passes
 * over all workers' rounds, the cores and the oversubscription warning. PL_OK or the error. */
static int run_results(const sched *s, const exec_config *c, run_state *st, exec_result *out, pl_err *e) {
    int p = st->p, rc = PL_OK;
    for (int r = 0; r < p && rc == PL_OK; r++)
        rc = exec_xrank_record(&st->xr[r], st->loss_mb, st->xr[r].arena_bytes, &st->recs[r], e);
    if (rc == PL_OK) rc = exec_assemble(s, c, st->recs, out, e);
    if (rc == PL_OK && out->between_profile) {
        /* in one process, the profile over all workers is the median over all their rounds */
        exec_prof_worker **pw = pl_calloc((size_t)p, sizeof *pw);
        if (!pw) rc = pl_errf(e, PL_ENOMEM, "out of memory");
        for (int r = 0; rc == PL_OK && r < p; r++) pw[r] = st->xr[r].prof;
        if (rc == PL_OK) rc = exec_prof_worker_collect(pw, p, c, &out->between_profile[0], NULL, e);
        free(pw);
    }
    if (rc != PL_OK) return rc;
    out->cores = st->ncores;
    (void)exec_oversubscribed(p, st->ncores, "ranks", out->warning, sizeof out->warning);
    return PL_OK;
}

/* Frees what the run held. */
static void run_free(run_state *st) {
    if (st->xr)
        for (int r = 0; r < st->p; r++) exec_xrank_free(&st->xr[r]);
    if (st->recs)
        for (int r = 0; r < st->p; r++) exec_rank_record_free(&st->recs[r]);
    if (st->t) exec_threads_transport_free(st->t, st->p);
    exec_data_free(&st->data);
    exec_layout_free(&st->lay);
    free(st->xr);
    free(st->recs);
    free(st->th);
    free(st->xp);
    free(st->loss_mb);
    free(st->blocks);
    free(st->cpus);
}

int exec_run(const sched *s, const exec_config *c, exec_result *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    run_state st;
    memset(&st, 0, sizeof st);
    st.p = s->ranks;
    int rc = run_check(s, c, &st, e);
    if (rc == PL_OK) {
        exec_blas_init();
        rc = run_setup(s, c, &st, e);
    }
    if (rc == PL_OK) rc = run_threads(c, &st, e);
    if (rc == PL_OK) rc = run_failure(&st, e);
    if (rc == PL_OK) rc = run_results(s, c, &st, out, e);
    run_free(&st);
    if (rc != PL_OK) exec_result_free(out);
    return rc;
}
