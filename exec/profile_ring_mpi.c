/* profile_ring_mpi.c: times the MPI transport's replica all-reduce (exec_xrank_reduce over
 * MPI_Allreduce of int64, as transport_mpi.c's replicated stages run it) between the first two
 * processes of the MPI job, with the timing loop and fit of the threads' profile
 * (profile_ring.c), so that an MPI run is predicted from its own transport (exec_drive.h). */
#include <mpi.h>

#include "exec_drive.h"
#include "exec_int.h"

#include <stdlib.h>
#include <string.h>

/* The all-reduce of v[count] over the two timed processes (exec_transport.allreduce; impl is
 * their communicator): MPI_Allreduce of int64, sum or max, as a replicated run's. Returns PL_OK
 * or an error. */
static int pr_allreduce(exec_transport *t, int stage, int64_t *v, size_t count, int max, pl_err *e) {
    (void)stage;
    if (count > (size_t)0x7fffffff) return pl_errf(e, PL_EINPUT, "all-reduce of %zu values is too large", count);
    MPI_Comm *c = t->impl;
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, (int)count, MPI_INT64_T, max ? MPI_MAX : MPI_SUM, *c);
    return rc == MPI_SUCCESS ? PL_OK : pl_errf(e, PL_EINTERNAL, "MPI_Allreduce of the all-reduce profile failed");
}

/* The MPI sync before each timed all-reduce: a barrier of the two processes. */
static void pr_barrier(void *arg) { MPI_Barrier(*(MPI_Comm *)arg); }

int exec_mpi_profile_allreduce(const exec_config *cfg, int reps, double *latency_s, double *bandwidth_Bps, int *is_root,
                               pl_err *e) {
    *latency_s = *bandwidth_Bps = 0;
    *is_root = 1;
    if (exec_mpi_init(e) != PL_OK) return e->code;
    int me = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *is_root = me == 0;
    if (size < EXEC_AR_RANKS)
        return pl_errf(e, PL_EINPUT, "the all-reduce profile of the MPI transport needs %d processes or more, the job "
                                     "has %d (mpirun -np %d)", EXEC_AR_RANKS, size, EXEC_AR_RANKS);
    exec_ar_plan plan;
    exec_ar_plan_init(cfg, reps, &plan);
    double *t_s = pl_calloc((size_t)(EXEC_AR_SIZES * plan.reps), sizeof *t_s);
    int ok = t_s != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* no process leaves the others waiting */
    if (!all_ok) {
        free(t_s);
        return pl_errf(e, PL_ENOMEM, "out of memory for the all-reduce profile");
    }
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, me < EXEC_AR_RANKS ? 0 : MPI_UNDEFINED, me, &pair);
    int rc = PL_OK;
    if (pair != MPI_COMM_NULL) {
        int reps_of[1] = {EXEC_AR_RANKS}, base_of[1] = {0};
        exec_layout lay;
        memset(&lay, 0, sizeof lay);
        lay.ranks = EXEC_AR_RANKS;
        lay.reps = reps_of;
        lay.base = base_of;
        exec_transport t;
        memset(&t, 0, sizeof t);
        t.impl = &pair;
        t.allreduce = pr_allreduce;
        rc = exec_ar_time_rank(&t, &lay, me, &plan, pr_barrier, &pair, t_s, e);
        MPI_Comm_free(&pair);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the others wait here, idle, while the two time */
    if (rc == PL_OK && me == 0) rc = exec_ar_fit(&plan, t_s, latency_s, bandwidth_Bps, e);
    else if (rc != PL_OK) pl_err_prefix(e, "profile of the MPI all-reduce: ");
    free(t_s);
    return rc;
}

int exec_mpi_host_probe(exec_host_probe *p, int *is_root, pl_err *e) {
    memset(p, 0, sizeof *p);
    *is_root = 1;
    if (exec_mpi_init(e) != PL_OK) return e->code;
    int me = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *is_root = me == 0;
    exec_config c;
    exec_config_default(&c);
    c.layers = 1;
    exec_layer_profile lp;
    /* every process at once, a block each */
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = exec_profile_layers_n(&c, EXEC_HOST_PROBE_REPS, 1, &lp, e);
    double v[2] = {rc == PL_OK ? lp.f_s : 0, rc == PL_OK}, all[2] = {0, 0};
    MPI_Allreduce(v, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    /* then process 0 alone, the others waiting */
    if (rc == PL_OK && all[1] == size && me == 0) rc = exec_profile_layers_n(&c, EXEC_HOST_PROBE_REPS, 1, &lp, e);
    v[1] = rc == PL_OK;
    MPI_Allreduce(MPI_IN_PLACE, &v[1], 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    if (rc == PL_OK && !(all[1] == size && v[1] > 0))
        rc = pl_errf(e, PL_EINTERNAL, "the host probe failed on another process of the MPI job");
    if (rc != PL_OK) return rc;
    p->workers = size;
    p->fwd_s = all[0] / size;
    if (me == 0) p->alone_fwd_s = lp.f_s;
    return PL_OK;
}
