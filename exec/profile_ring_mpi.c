/* profile_ring_mpi.c: times the MPI transport's replica all-reduce (exec_xrank_reduce over
 * exec_mpi_allreduce_i64, as transport_mpi.c's replicated stages run it) between the first two
 * processes of the MPI job, with the timing loop and fit of the threads' profile
 * (profile_ring.c), so that an MPI run is predicted from its own transport (exec_drive.h); and
 * the host probe of an MPI job. Every wait on another process is timed (mpi_wait.h). */
#include <mpi.h>

#include "exec_drive.h"
#include "exec_int.h"
#include "mpi_wait.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Where a process of the all-reduce profile waits (mpi_wait.h). */
#define PR_WHERE "in the all-reduce profile"

/* The buffers of the profiles' collectives, in the endpoint's scratch block (mpi_wait.h): a
 * timeout leaves a collective pending. */
typedef struct pr_ready {
    int ok, all_ok; /* this process's memory; every one's */
} pr_ready;
typedef struct probe_bufs {
    double v[2], all[2]; /* this process's block time and success; their sums over the job */
} probe_bufs;
_Static_assert(sizeof(pr_ready) <= EXEC_MPI_SCRATCH_BYTES && sizeof(probe_bufs) <= EXEC_MPI_SCRATCH_BYTES,
               "the profiles' buffers fit an endpoint's scratch block");

/* The two timed processes: the job's waits, their communicator, and the first error of a sync
 * (pr_barrier, which returns nothing). */
typedef struct pr_pair {
    exec_mpi_end *m;
    MPI_Comm comm;
    int rc;
    pl_err err;
} pr_pair;

/* The all-reduce of v[count] over the two timed processes (exec_transport.allreduce; impl is the
 * pr_pair): a replicated run's (exec_mpi_allreduce_i64). Returns PL_OK or an error (a sync's
 * that timed out first). */
static int pr_allreduce(exec_transport *t, int stage, int64_t *v, size_t count, int max, pl_err *e) {
    (void)stage;
    pr_pair *p = t->impl;
    if (p->rc != PL_OK) {
        *e = p->err;
        return p->rc;
    }
    return exec_mpi_allreduce_i64(p->m, p->comm, v, count, max, EXEC_MEET_AR_REDUCE, PR_WHERE, e);
}

/* The MPI sync before each timed all-reduce: a meeting of the two processes (a barrier, timed;
 * of its own kind, so that a process that syncs while the other meets for its all-reduce, as
 * when one all-reduce failed on one process alone, is found out of step); after one failed,
 * none (the job is ending). */
static void pr_barrier(void *arg) {
    pr_pair *p = arg;
    if (p->rc == PL_OK) p->rc = exec_mpi_meet(p->m, p->comm, NULL, 0, EXEC_MEET_AR_SYNC, PR_WHERE, &p->err);
}

int exec_mpi_profile_allreduce(const exec_config *cfg, int reps, double *latency_s, double *bandwidth_Bps, int *is_root,
                               pl_err *e) {
    *latency_s = *bandwidth_Bps = 0;
    *is_root = 1;
    if (exec_mpi_init(e) != PL_OK || exec_mpi_timed_out(e) != PL_OK) return e->code;
    int me = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *is_root = me == 0;
    if (size < EXEC_AR_RANKS)
        return pl_errf(e, PL_EINPUT, "the all-reduce profile of the MPI transport needs %d processes or more, the job "
                                     "has %d (mpirun -np %d)", EXEC_AR_RANKS, size, EXEC_AR_RANKS);
    pr_pair pp;
    memset(&pp, 0, sizeof pp);
    pp.comm = MPI_COMM_NULL;
    /* after a run the processes but 0 come first, while rank 0 assembles the records */
    pp.m = exec_mpi_end_open(cfg->timeout_s, EXEC_MTS_PROFILE, me != 0, PR_WHERE, e);
    if (!pp.m) {
        pl_err_prefix(e, "profile of the MPI all-reduce: ");
        return e->code;
    }
    exec_ar_plan plan;
    exec_ar_plan_init(cfg, reps, &plan);
    double *t_s = pl_calloc((size_t)(EXEC_AR_SIZES * plan.reps), sizeof *t_s);
    pr_ready *b = exec_mpi_end_scratch(pp.m);
    b->ok = t_s != NULL;
    b->all_ok = 0;
    MPI_Request rq;
    MPI_Iallreduce(&b->ok, &b->all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &rq); /* no process leaves the others waiting */
    int rc = exec_mpi_meet(pp.m, MPI_COMM_WORLD, &rq, 1, EXEC_MEET_AR_READY, PR_WHERE, e);
    if (rc == PL_OK && !b->all_ok) rc = pl_errf(e, PL_ENOMEM, "out of memory for the all-reduce profile");
    if (rc == PL_OK) MPI_Comm_split(MPI_COMM_WORLD, me < EXEC_AR_RANKS ? 0 : MPI_UNDEFINED, me, &pp.comm); /* after the meeting */
    if (pp.comm != MPI_COMM_NULL) {
        int reps_of[1] = {EXEC_AR_RANKS}, base_of[1] = {0};
        exec_layout lay;
        memset(&lay, 0, sizeof lay);
        lay.ranks = EXEC_AR_RANKS;
        lay.reps = reps_of;
        lay.base = base_of;
        exec_transport t;
        memset(&t, 0, sizeof t);
        t.impl = &pp;
        t.allreduce = pr_allreduce;
        rc = exec_ar_time_rank(&t, &lay, me, &plan, pr_barrier, &pp, t_s, e);
        if (rc == PL_OK && pp.rc != PL_OK) { /* the last sync timed out */
            rc = pp.rc;
            *e = pp.err;
        }
        MPI_Comm_free(&pp.comm);
    }
    pl_err ew;
    if (exec_mpi_timed_out(&ew) == PL_OK) { /* every process: the others wait here, idle and without a
                                              * deadline, while the two time (the two's own waits are timed) */
        int rw = me < EXEC_AR_RANKS ? exec_mpi_meet(pp.m, MPI_COMM_WORLD, NULL, 0, EXEC_MEET_AR_END, PR_WHERE, &ew)
                                    : exec_mpi_meet_patient(pp.m, MPI_COMM_WORLD, NULL, 0, EXEC_MEET_AR_END, PR_WHERE, &ew);
        if (rc == PL_OK && rw != PL_OK) {
            rc = rw;
            *e = ew;
        }
    }
    exec_mpi_end_close(pp.m);
    if (rc == PL_OK && me == 0) rc = exec_ar_fit(&plan, t_s, latency_s, bandwidth_Bps, e);
    else if (rc != PL_OK) pl_err_prefix(e, "profile of the MPI all-reduce: ");
    free(t_s);
    return rc;
}

/* The host probe's collective over the job: *v (count doubles) combined by op, completed in a
 * meeting of kind (without a deadline when patient: this process waits while process 0 profiles
 * alone); in and out in m's scratch block (probe_bufs). Returns PL_OK or the meeting's error. */
static int probe_allreduce(exec_mpi_end *m, const double *in, double *out, int count, MPI_Op op, int patient,
                           exec_meet_kind kind, pl_err *e) {
    MPI_Request rq;
    MPI_Iallreduce(in ? in : MPI_IN_PLACE, out, count, MPI_DOUBLE, op, MPI_COMM_WORLD, &rq);
    return patient ? exec_mpi_meet_patient(m, MPI_COMM_WORLD, &rq, 1, kind, "in the host probe", e)
                   : exec_mpi_meet(m, MPI_COMM_WORLD, &rq, 1, kind, "in the host probe", e);
}

int exec_mpi_host_probe(exec_host_probe *p, double timeout_s, int *is_root, pl_err *e) {
    memset(p, 0, sizeof *p);
    *is_root = 1;
    if (exec_mpi_init(e) != PL_OK || exec_mpi_timed_out(e) != PL_OK) return e->code;
    int me = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *is_root = me == 0;
    exec_config c;
    exec_config_default(&c);
    c.layers = 1;
    exec_layer_profile lp;
    /* every process at once, a block each, after a meeting of them all */
    exec_mpi_end *m = exec_mpi_end_open(timeout_s, EXEC_MTS_PROBE, 0, "in the host probe", e);
    if (!m) return e->code;
    int rc = exec_profile_layers_n(&c, EXEC_HOST_PROBE_REPS, 1, &lp, e);
    probe_bufs *b = exec_mpi_end_scratch(m);
    double *v = b->v, *all = b->all;
    v[0] = rc == PL_OK ? lp.f_s : 0;
    v[1] = rc == PL_OK;
    all[0] = all[1] = 0;
    pl_err ew;
    int rw = probe_allreduce(m, v, all, 2, MPI_SUM, 0, EXEC_MEET_PROBE_ALL, &ew);
    /* then process 0 alone, the others waiting */
    if (rw == PL_OK && rc == PL_OK && all[1] == size && me == 0) rc = exec_profile_layers_n(&c, EXEC_HOST_PROBE_REPS, 1, &lp, e);
    v[1] = rc == PL_OK;
    if (rw == PL_OK) rw = probe_allreduce(m, NULL, &v[1], 1, MPI_MIN, me != 0, EXEC_MEET_PROBE_ALONE, &ew); /* the others wait for 0 */
    double sum_fwd_s = all[0], came = all[1], all_ok = v[1]; /* before the scratch block goes with m */
    exec_mpi_end_close(m);
    if (rw != PL_OK) { /* a process stood still: the job ends */
        *e = ew;
        return rw;
    }
    if (rc == PL_OK && !(came == size && all_ok > 0))
        rc = pl_errf(e, PL_EINTERNAL, "the host probe failed on another process of the MPI job");
    if (rc != PL_OK) return rc;
    p->workers = size;
    p->fwd_s = sum_fwd_s / size;
    if (me == 0) p->alone_fwd_s = lp.f_s;
    return PL_OK;
}
