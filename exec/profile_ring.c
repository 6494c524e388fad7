/* profile_ring.c: times the executor's own replica all-reduce (exec_xrank_reduce: the exact
 * integer all-reduce) between two ranks at sizes spanning the model's stages, and fits the
 * ring's latency and bandwidth (cost_ring_allreduce_fit) for the profile CSV: the timing loop of
 * one rank and the fit (any transport), and the threads transport's ring over its mailboxes on
 * threads placed as exec_run places them. MPI's side is profile_ring_mpi.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "exec_int.h"
#include "platform.h"

#define AR_MAX_REPS 15  /* the all-reduce's repetitions at most (the median is kept) */
#define AR_MAILBOX 4    /* mailbox slots: the ring holds a piece or two in flight */

typedef struct ar_shared {
    exec_transport *t;
    exec_layout lay;
    int reps_of[1], base_of[1];
    pthread_barrier_t bar;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate; /* 0: wait, 1: go, -1: a thread did not start, leave */
    exec_ar_plan plan;
    int pin, ncpus, cpus[EXEC_AR_RANKS];
    double *t_s; /* [EXEC_AR_SIZES * reps] rank 0's times */
} ar_shared;

/* exec_int.h. Returns PL_OK or the first error; each all-reduce is timed from the sync to its
 * return on this rank (the ring ends on a rank only once the other's last piece arrived). */
int exec_ar_time_rank(exec_transport *t, const exec_layout *lay, int me, const exec_ar_plan *pl, void (*sync)(void *arg),
                      void *arg, double *t_s, pl_err *e) {
    exec_xrank x;
    exec_xstage st;
    memset(&x, 0, sizeof x);
    memset(&st, 0, sizeof st);
    int loc = 0;
    size_t most = pl->floats[EXEC_AR_SIZES - 1];
    x.r = me;
    x.lay = lay;
    x.rep = me;
    x.nst = 1;
    x.st = &st;
    x.loc = &loc;
    x.t = t;
    st.pfloats = most;
    st.grad = exec_lines_alloc(most, pl->small_pages); /* on a line, as a run's gradients (exec_int.h) */
    int rc = st.grad ? exec_xrank_reduce_setup(&x, e) : pl_errf(e, PL_ENOMEM, "out of memory for the all-reduce");
    for (size_t i = 0; rc == PL_OK && i < most; i++) st.grad[i] = (float)(1 + me) * 1e-3f * (float)(i % 7);
    for (int k = 0; k < EXEC_AR_SIZES; k++) {
        st.pfloats = pl->floats[k];
        for (int j = -1; j < pl->reps; j++) {
            sync(arg); /* every rank takes every sync, also after an error */
            double t0 = pl_now_s();
            if (rc == PL_OK) rc = exec_xrank_reduce(&x, &st, e);
            if (me == 0 && j >= 0) t_s[k * pl->reps + j] = pl_now_s() - t0;
        }
    }
    free(st.grad);
    free(x.red);
    free(x.red_seq);
    return rc;
}

/* The threads' sync: the barrier of both ranks. */
static void ar_barrier(void *arg) { pthread_barrier_wait(arg); }

/* Runs rank me's all-reduces on its thread, pinned as exec_run pins its ranks. */
static void *ar_main(void *arg) {
    exec_pair_thread *a = arg;
    ar_shared *sh = a->sh;
    pthread_mutex_lock(&sh->mu);
    while (sh->gate == 0) pthread_cond_wait(&sh->cv, &sh->mu);
    int go = sh->gate > 0;
    pthread_mutex_unlock(&sh->mu);
    if (!go) return NULL;
    if (sh->pin && sh->ncpus > 0) exec_platform_pin_self(sh->cpus[a->me % sh->ncpus]);
    a->rc = exec_ar_time_rank(&sh->t[a->me], &sh->lay, a->me, &sh->plan, ar_barrier, &sh->bar, sh->t_s, &a->err);
    return NULL;
}

/* The barrier needs both ranks: none passes the gate before both exist. */
static void ar_started(void *arg, int ok, pl_err *why) {
    (void)why;
    ar_shared *sh = arg;
    pthread_mutex_lock(&sh->mu);
    sh->gate = ok ? 1 : -1;
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* Returns the median of v[0..n) (sorts it). */
static double ar_median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* exec_int.h. */
int exec_pair_run(void *sh, void *(*main)(void *), void (*started)(void *sh, int ok, pl_err *why), const char *what,
                  pl_err *e) {
    exec_pair_thread a[EXEC_AR_RANKS];
    pthread_t th[EXEC_AR_RANKS];
    int n = 0, rc = PL_OK;
    for (int i = 0; i < EXEC_AR_RANKS; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].sh = sh;
        a[i].me = i;
    }
    for (; n < EXEC_AR_RANKS; n++)
        if (pthread_create(&th[n], NULL, main, &a[n]) != 0) {
            rc = pl_errf(e, PL_EINTERNAL, "cannot start the %s's thread %d", what, n);
            break;
        }
    started(sh, rc == PL_OK, e);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    for (int i = 0; rc == PL_OK && i < EXEC_AR_RANKS; i++)
        if (a[i].rc) {
            *e = a[i].err;
            rc = a[i].rc;
        }
    return rc;
}

/* exec_int.h. */
int exec_gate_pass(exec_gate *g) {
    pthread_mutex_lock(&g->mu);
    while (g->state == 0) pthread_cond_wait(&g->cv, &g->mu);
    int go = g->state > 0;
    pthread_mutex_unlock(&g->mu);
    return go;
}

/* exec_int.h. */
int exec_team_run(int n, void *(*main)(void *), void *args, size_t size, exec_gate *g, const char *what, pl_err *e) {
    pthread_t *th = pl_calloc((size_t)(n > 0 ? n : 1), sizeof *th);
    if (!th) return pl_errf(e, PL_ENOMEM, "out of memory");
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->state = 0;
    int rc = PL_OK, started = 0;
    for (; started < n; started++)
        if (pthread_create(&th[started], NULL, main, (char *)args + (size_t)started * size) != 0) {
            rc = pl_errf(e, PL_EINTERNAL, "cannot start %s %d of %d", what, started + 1, n);
            break;
        }
    pthread_mutex_lock(&g->mu);
    g->state = rc == PL_OK ? 1 : -1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(th);
    return rc;
}

/* exec_int.h. Sizes spanning the model's stages: one block, half the blocks, all of them (a
 * quarter, a half and one block for a one-block model). */
void exec_ar_plan_init(const exec_config *cfg, int reps, exec_ar_plan *pl) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    size_t nf = exec_block_floats(&d), L = (size_t)(cfg->layers > 0 ? cfg->layers : 1);
    if (L == 1) {
        pl->floats[0] = nf / 4 ? nf / 4 : 1;
        pl->floats[1] = nf / 2 ? nf / 2 : 1;
        pl->floats[2] = nf;
    } else {
        pl->floats[0] = nf;
        pl->floats[1] = nf * ((L + 1) / 2);
        pl->floats[2] = nf * L;
    }
    pl->reps = reps < 1 ? 1 : reps > AR_MAX_REPS ? AR_MAX_REPS : reps;
    pl->small_pages = cfg->small_pages;
}

/* exec_int.h. Returns PL_OK or the fit's error. */
int exec_ar_fit(const exec_ar_plan *pl, double *t_s, double *latency_s, double *bandwidth_Bps, pl_err *e) {
    double bytes[EXEC_AR_SIZES], t[EXEC_AR_SIZES];
    for (int k = 0; k < EXEC_AR_SIZES; k++) {
        bytes[k] = (double)(pl->floats[k] * sizeof(float)); /* fp32 gradient bytes: a stage's param_bytes */
        t[k] = ar_median(t_s + k * pl->reps, pl->reps);
    }
    int rc = cost_ring_allreduce_fit(EXEC_AR_RANKS, bytes, t, EXEC_AR_SIZES, latency_s, bandwidth_Bps, e);
    if (rc) pl_err_prefix(e, "profile of the all-reduce: ");
    return rc;
}

/* exec_int.h. Each rank's gradients of the largest size (exec_ar_time_rank) and the mailboxes. */
double exec_ar_profile_bytes(const exec_config *cfg, int reps) {
    exec_ar_plan pl;
    exec_ar_plan_init(cfg, reps, &pl);
    return EXEC_AR_RANKS * ((double)exec_lines_bytes(pl.floats[EXEC_AR_SIZES - 1], pl.small_pages) +
                            (double)AR_MAILBOX * EXEC_RING_PIECE_BYTES);
}

int exec_profile_allreduce(const exec_config *cfg, int reps, double *latency_s, double *bandwidth_Bps, pl_err *e) {
    ar_shared sh;
    memset(&sh, 0, sizeof sh);
    exec_ar_plan_init(cfg, reps, &sh.plan);
    sh.reps_of[0] = EXEC_AR_RANKS;
    sh.lay.ranks = EXEC_AR_RANKS;
    sh.lay.reps = sh.reps_of;
    sh.lay.base = sh.base_of;
    sh.ncpus = exec_platform_cores(sh.cpus, EXEC_AR_RANKS);
    sh.pin = cfg->pin; /* as exec_run pins its ranks */
    sh.t_s = pl_calloc((size_t)(EXEC_AR_SIZES * sh.plan.reps), sizeof *sh.t_s);
    if (!sh.t_s) return pl_errf(e, PL_ENOMEM, "out of memory");
    sh.t = exec_threads_transport_new(EXEC_AR_RANKS, AR_MAILBOX, EXEC_RING_PIECE_BYTES, cfg->timeout_s, e);
    if (!sh.t) {
        free(sh.t_s);
        return e->code;
    }
    if (sh.ncpus >= EXEC_AR_RANKS) exec_threads_transport_spin(sh.t, EXEC_SPIN_S); /* each rank has a core */
    pthread_barrier_init(&sh.bar, NULL, EXEC_AR_RANKS);
    pthread_mutex_init(&sh.mu, NULL);
    pthread_cond_init(&sh.cv, NULL);
    int rc = exec_pair_run(&sh, ar_main, ar_started, "all-reduce", e);
    pthread_barrier_destroy(&sh.bar);
    pthread_cond_destroy(&sh.cv);
    pthread_mutex_destroy(&sh.mu);
    exec_threads_transport_free(sh.t, EXEC_AR_RANKS);
    if (rc == PL_OK) rc = exec_ar_fit(&sh.plan, sh.t_s, latency_s, bandwidth_Bps, e);
    else pl_err_prefix(e, "profile of the all-reduce: ");
    free(sh.t_s);
    return rc;
}
