/* mpi_wait.h: the MPI transport's timed waits (transport_mpi.c), shared with the host probe and
 * the all-reduce profile (profile_ring_mpi.c). MPI builds only.
 *
 * Every wait of an MPI process on another process's progress is polled against the timeout
 * (exec_config.timeout_s, `pipelab run --timeout`): point-to-point messages, the barrier between
 * passes, and the collectives, which are started nonblocking and completed together with a
 * token from every other member (a meeting, exec_mpi_meet), so that a timeout names the ranks
 * that never came and where this rank waited for them (MPI_Comm_split, which has no nonblocking
 * form, and the replicas' all-reduce, whose nonblocking form is slower, come right after a
 * meeting). A token carries its meeting's kind (exec_meet_kind: one per place in pipelab's code
 * that holds a meeting) and `where`, checked on receipt: a token of a meeting of another kind or
 * place is an internal error naming both, never paired with this one by its order alone. Tokens
 * pair in order (one per member and meeting, on one tag), so meetings of one kind repeated more
 * often on one member than on another pair among themselves unseen, and the drift is caught at
 * the next meeting of another kind. When several members time out waiting for the same ranks, or
 * find the same meetings out of step, the lowest-numbered says so, the others deferring to it
 * (transport_mpi.c's meet_defer), so that the job prints one line.
 * Only the tokens' receives are cancelled after a timeout (cancelling a collective is
 * erroneous); the process must then end the job, as after any meeting that leaves a request
 * pending (an MPI error, meetings out of step): every later entry point returns at once
 * (exec_mpi_timed_out) and exec_mpi_finalize calls MPI_Abort rather than waiting for the others.
 * What a request left pending may still use outlives it: the buffers of a collective completed
 * in a meeting lie in its endpoint's scratch block (exec_mpi_end_scratch), never on the stack of
 * a function that returns after the timeout; the block, the endpoint's tokens and its messages'
 * buffers are kept, not freed, once a request was left pending (exec_mpi_end_close), and no
 * meeting starts after that, so none is reused while pending. */
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

/* The kinds of meetings (exec_mpi_meet's kind): one per place in pipelab's code that holds one,
 * so that members holding meetings of different places find it out (above). */
typedef enum exec_meet_kind {
    EXEC_MEET_NONE = 0,
    EXEC_MEET_HOST_ENTER,   /* the job's processes on a host: before MPI_Comm_split_type */
    EXEC_MEET_HOST_CORES,   /* their cores, on the host's communicator */
    EXEC_MEET_HOST_PAIR,    /* whether the first two processes share a host */
    EXEC_MEET_HOST_WORST,   /* the host with the most processes beyond its cores, the job's cores */
    EXEC_MEET_HOST_NAME,    /* that host's name and counts */
    EXEC_MEET_JOIN_HOSTS,   /* the steady rule's check that the job is on one host */
    EXEC_MEET_JOIN_COMMS,   /* the run's communicators (MPI_Comm_idup) */
    EXEC_MEET_STAGE_SPLIT,  /* before the replicated stages' communicators (MPI_Comm_split) */
    EXEC_MEET_BARRIER,      /* the barrier between passes (its message counts) */
    EXEC_MEET_TEST_EXTRA,   /* the test hook's extra meeting (EXEC_MTS_EXTRA) */
    EXEC_MEET_PASS_TIMES,   /* the steady rule's pass times */
    EXEC_MEET_REPLICAS,     /* before the all-reduce of a stage's replicas */
    EXEC_MEET_RUN_END,      /* the end of the run (its message counts) */
    EXEC_MEET_GATHER,       /* before the records go to rank 0 */
    EXEC_MEET_P2P_READY,    /* the hand-off profile: every process's memory */
    EXEC_MEET_P2P_END,      /* the hand-off profile's end */
    EXEC_MEET_AR_READY,     /* the all-reduce profile: every process's memory */
    EXEC_MEET_AR_SYNC,      /* the all-reduce profile: the sync before each timed all-reduce */
    EXEC_MEET_AR_REDUCE,    /* the all-reduce profile: before each all-reduce */
    EXEC_MEET_AR_END,       /* the all-reduce profile's end */
    EXEC_MEET_PROBE_ALL,    /* the host probe: every process's block */
    EXEC_MEET_PROBE_ALONE,  /* the host probe: process 0's block alone */
    EXEC_MEET_KINDS
} exec_meet_kind;

/* Bytes of an endpoint's scratch block (exec_mpi_end_scratch) for its users beyond
 * transport_mpi.c. */
#define EXEC_MPI_SCRATCH_BYTES 64

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
/* Returns m's scratch block, EXEC_MPI_SCRATCH_BYTES long, aligned for any type: the buffers of
 * the collectives its caller completes in m's meetings (above), one function's at a time. */
void *exec_mpi_end_scratch(exec_mpi_end *m);

/* Meets every other member of comm (this process a member) and completes the ncoll nonblocking
 * collectives coll[] started on it (0: a barrier; their buffers in m's scratch block, as above),
 * waiting at most the timeout. kind is the place in pipelab's code that meets (one of its own),
 * `where` says where this process waits ("in the host probe"), both the same on every member
 * (its tokens carry them). Returns PL_OK, or the error: after the timeout "rank R: timed out
 * after T s: rank R waits WHERE for rank Q" (Q the members whose token never came, by their rank
 * in the job), or "rank R: internal error: meetings out of step: ..." when a token of a meeting
 * of another kind or place came (the line of the lowest-numbered member concerned, the others
 * deferring to it). */
int exec_mpi_meet(exec_mpi_end *m, MPI_Comm comm, MPI_Request *coll, int ncoll, exec_meet_kind kind, const char *where,
                  pl_err *e);
/* exec_mpi_meet without a deadline, for a process that waits while others work (the processes
 * outside a profile's pair while the two time, the others while process 0 profiles alone): they
 * are not late. One of those working that stands still is named by the timed waits of the
 * processes working beside it, whose timeout ends the job. */
int exec_mpi_meet_patient(exec_mpi_end *m, MPI_Comm comm, MPI_Request *coll, int ncoll, exec_meet_kind kind,
                          const char *where, pl_err *e);

/* The exact all-reduce of the replicas' gradients as a run does it (a meeting of comm's members,
 * of `kind`, then MPI_Allreduce of int64, sum or max, among members that all came): v[count] in place.
 * Returns PL_OK or the error of exec_mpi_meet. */
int exec_mpi_allreduce_i64(exec_mpi_end *m, MPI_Comm comm, int64_t *v, size_t count, int max, exec_meet_kind kind,
                           const char *where, pl_err *e);

/* Returns PL_OK, or PL_EINTERNAL (e says so) when a wait of this process timed out before, or a
 * meeting left a request pending otherwise: the job is ending, and nothing waits on the others
 * any more. */
int exec_mpi_timed_out(pl_err *e);

#endif
