/* mpi_absent.c: the MPI entry points of a build without MPI (PIPELAB_MPI=OFF or MPI not found):
 * they say so. The real ones are in transport_mpi.c. */
#include "exec_drive.h"

#include <string.h>

/* Returns 0: this build has no MPI transport. */
int exec_mpi_available(void) { return 0; }

/* Returns PL_EINPUT: there is no MPI transport in this build. */
int exec_mpi_run(const sched *s, const exec_config *cfg, exec_result *out, int *is_root, pl_err *e) {
    (void)s;
    (void)cfg;
    memset(out, 0, sizeof *out);
    *is_root = 1;
    return pl_errf(e, PL_EINPUT, "this pipelab was built without MPI (configure with -DPIPELAB_MPI=ON and an MPI "
                                 "installation); use --transport threads");
}

/* Returns PL_EINPUT: there is no MPI transport to profile in this build. */
int exec_mpi_profile_allreduce(const exec_config *cfg, int reps, double *latency_s, double *bandwidth_Bps, int *is_root,
                               pl_err *e) {
    (void)cfg;
    (void)reps;
    *latency_s = *bandwidth_Bps = 0;
    *is_root = 1;
    return pl_errf(e, PL_EINPUT, "this pipelab was built without MPI: no MPI all-reduce to profile");
}

/* Returns PL_EINPUT: there is no MPI transport to profile in this build. */
int exec_mpi_profile_p2p(const exec_config *cfg, int reps, exec_p2p *out, int *is_root, pl_err *e) {
    (void)cfg;
    (void)reps;
    memset(out, 0, sizeof *out);
    *is_root = 1;
    return pl_errf(e, PL_EINPUT, "this pipelab was built without MPI: no MPI hand-off to profile");
}

/* Returns PL_EINPUT: there is no MPI job to probe in this build. */
int exec_mpi_host_probe(exec_host_probe *p, double timeout_s, int *is_root, pl_err *e) {
    (void)timeout_s;
    memset(p, 0, sizeof *p);
    *is_root = 1;
    return pl_errf(e, PL_EINPUT, "this pipelab was built without MPI: no MPI job to probe");
}

/* Ignores the hook: nothing here aborts. */
void exec_mpi_set_abort_hook(void (*hook)(const pl_err *why)) { (void)hook; }

/* Nothing to finalize. */
void exec_mpi_finalize(void) {}

/* Returns 0: without MPI no launcher bound this process. */
int exec_mpi_profile_unbind(void) { return 0; }
