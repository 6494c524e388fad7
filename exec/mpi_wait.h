/* mpi_wait.h: the MPI transport's timed waits (transport_mpi.c), shared with the host probe and
 * the all-reduce profile (profile_ring_mpi.c). MPI builds only.
 *
 * Every wait of an MPI process on another process's progress is polled against the timeout
 * (exec_config.timeout_s, `pipelab run --timeout`): point-to-point messages, the barrier between
 * passes, and the collectives, which are started nonblocking and completed together with a
 * token from every other member (a meeting, exec_mpi_meet), so that a timeout names the ranks
 * that never came and where this rank waited for them (MPI_Comm_split, which has no nonblocking
 * form, and the replicas' all-reduce, whose nonblocking form is slower, come right after a
 * meeting). A token carries its meeting (its number on the communicator and `where`), checked on
 * receipt: a token of another meeting is an internal error naming both, never paired with this
 * one by its order alone. When several members time out waiting for the same ranks, the
 * lowest-numbered says so, the others deferring to it (transport_mpi.c's meet_defer), so that
 * the job prints one line naming the rank that stood still and where.
 * Only the tokens' receives are cancelled after a timeout (cancelling a collective is
 * erroneous); the process must then end the job: every later entry point returns at once
 * (exec_mpi_timed_out) and exec_mpi_finalize calls MPI_Abort rather than waiting for the others.
 * What a request left pending may still use outlives it: the buffers of a collective completed
 * in a meeting are static, per process, never on the stack of a function that returns after the
 * timeout (no meeting starts after one, so none is reused while pending); an endpoint's tokens
 * and messages' buffers are kept, not freed, once a wait timed out (exec_mpi_end_close). */
#ifndef EXEC_MPI_WAIT_H
#define EXEC_MPI_WAIT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "pl_common.h"

/* Where the test-only EXEC_MPI_TEST_STOP_ENV ("R:name", exec_int.h) stops rank R, once: its
 * second barrier between passes (barrier), its first wait for a message after it (wait), the
 * start of the host probe (probe), of the run's set-up (join), its first all-reduce of a
 * replicated stage after the first barrier (allreduce), the steady rule's exchange of the pass
 * times (steady), the gathering of the records on rank 0 (gather), the start of the first MPI
 * profile (the all-reduce's or the hand-off's) after the run (profile). Not a stop: at its second
 * barrier between passes, rank R first holds a meeting the others do not hold (extra), so that
 * its tokens meet another meeting's. */
enum {
    EXEC_MTS_NONE = 0,
    EXEC_MTS_BARRIER,
    EXEC_MTS_WAIT,
    EXEC_MTS_PROBE,
    EXEC_MTS_JOIN,
    EXEC_MTS_ALLREDUCE,
    EXEC_MTS_STEADY,
    EXEC_MTS_GATHER,
    EXEC_MTS_PROFILE,
    EXEC_MTS_EXTRA,
    EXEC_MTS_POINTS
};

/* The waits of one MPI process over the whole job (transport_mpi.c's endpoint). */
typedef struct mend exec_mpi_end;

/* Opens the waits of this process over MPI_COMM_WORLD, each at most timeout_s (0: the default,
 * EXEC_DEFAULT_TIMEOUT_S): stops here first when the test hook names this process at `stop`
 * (EXEC_MTS_*), then meets the others (`where`, as exec_mpi_meet; as exec_mpi_meet_patient when
 * patient) to learn how the job's processes share this host's cores, which sets how long a wait
 * spins before it naps (as a run's). Collective over the job. Returns it (exec_mpi_end_close),
 * or NULL with the error (no memory, or the meeting's). */
exec_mpi_end *exec_mpi_end_open(double timeout_s, int stop, int patient, const char *where, pl_err *e);
void exec_mpi_end_close(exec_mpi_end *m);

/* Meets every other member of comm (this process a member) and completes the ncoll nonblocking
 * collectives coll[] started on it (0: a barrier; their buffers static, as above), waiting at
 * most the timeout. `where` says where this process waits ("in the host probe"), the same on
 * every member (it names the meeting in its tokens). Returns PL_OK, or the error: after the
 * timeout "rank R: timed out after T s: rank R waits WHERE for rank Q" (Q the members whose
 * token never came, by their rank in the job; the line of the lowest-numbered member that timed
 * out, the others deferring to it), or "rank R: internal error: meetings out of step: ..." when
 * a token of another meeting came. */
int exec_mpi_meet(exec_mpi_end *m, MPI_Comm comm, MPI_Request *coll, int ncoll, const char *where, pl_err *e);
/* exec_mpi_meet without a deadline, for a process that waits while others work (the processes
 * outside a profile's pair while the two time, the others while process 0 profiles alone): they
 * are not late. One of those working that stands still is named by the timed waits of the
 * processes working beside it, whose timeout ends the job. */
int exec_mpi_meet_patient(exec_mpi_end *m, MPI_Comm comm, MPI_Request *coll, int ncoll, const char *where, pl_err *e);

/* The exact all-reduce of the replicas' gradients as a run does it (a meeting of comm's members,
 * then MPI_Allreduce of int64, sum or max, among members that all came): v[count] in place.
 * Returns PL_OK or the error of exec_mpi_meet. */
int exec_mpi_allreduce_i64(exec_mpi_end *m, MPI_Comm comm, int64_t *v, size_t count, int max, const char *where,
                           pl_err *e);

/* Returns PL_OK, or PL_EINTERNAL (e says so) when a wait of this process timed out before: the
 * job is ending, and nothing waits on the others any more. */
int exec_mpi_timed_out(pl_err *e);

#endif
