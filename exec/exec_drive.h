/* exec_drive.h: what `pipelab run` and `pipelab profile` need around the executor: the profile
 * CSV of this machine, the cost model's view of an executed configuration (options, split,
 * memory prediction), and the MPI driver. The simulator's prediction and the store records are
 * cli/run_drive.h's (the executor never includes simulator or store headers). */
#ifndef EXEC_DRIVE_H
#define EXEC_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "cost.h"
#include "exec.h"
#include "pl_common.h"
#include "pl_sched.h"

/* ---------------------------------------------------------------- profile */

/* Measures one block of cfg's shape (h, f, b) with exec_profile_layers (reps repetitions, the
 * medians) and appends the cost model's profile CSV (cost.h) to out: cfg->layers identical rows
 * "block<k>" with fwd_s, bwd_in_s, bwd_w_s, the FLOPs (4 b h f each), param_bytes, out_bytes,
 * stash_bytes (the block's input and state: b h + 2 b f floats for the dense block), stash_recompute_bytes empty (the stage-input rule: the
 * executor keeps only the stage input under full recomputation) and w_stash_bytes = stash_bytes
 * (the executor keeps a microbatch's activations until its W). host (may be NULL) goes in a
 * comment. If p is not NULL it gets the measured medians. Returns PL_OK or an error. */
int exec_profile_csv(const exec_config *cfg, int reps, const char *host, pl_buf *out,
                     exec_layer_profile *p, pl_err *e);

/* Checks that a profile model describes cfg's model: cfg->layers layers whose param_bytes and
 * out_bytes are those of a block of cfg's shape at the profile's microbatch size. Returns PL_OK
 * or PL_EINPUT naming the mismatch (path = where the profile came from, for the message). */
int exec_profile_check(const cost_model *m, const exec_config *cfg, const char *path, pl_err *e);

/* ---------------------------------------------------------------- the cost model's view */

/* Fills o for the executor's model m and cfg: fp32 gradients, optimizer state 4 bytes per
 * parameter with momentum (else none), cfg's microbatch size. */
void exec_cost_opts(const cost_model *m, const exec_config *cfg, cost_opts *o);

/* Returns cfg's stage split of s as a cost partition (free with cost_partition_free), or NULL
 * and e on error. */
cost_partition *exec_cost_partition(const sched *s, const exec_config *cfg, pl_err *e);

/* The cost model's memory per rank for s and cfg (cost_model_mlp when f is a multiple of h,
 * else the profile CSV's sizes; cost_stage_eval over cfg's split; cost_schedule_memory with
 * gradients 4 bytes and optimizer state 4 bytes per parameter with momentum, else 0). Fills
 * out[s->ranks]. Equal to exec_rank_result.model_peak_bytes (README: "Memory"). Returns PL_OK or
 * an error. */
int exec_mem_predict(const sched *s, const exec_config *cfg, cost_memory *out, pl_err *e);

/* The executor's own peak memory per rank for s and cfg, before it runs: each rank's dry walk
 * (xrank_arena.c: the bookkeeping of every action in list order, without compute), the same
 * code that sizes and accounts its buffers, so the result equals the run's
 * exec_rank_result.peak: the cost model's part (model_peak_bytes) plus the executor's own
 * buffers (scratch, output and inner gradients, send staging, received inputs). A replicated
 * rank gives its replica with the largest total. Fills out[s->ranks]; PL_OK or the error. */
int exec_mem_walk(const sched *s, const exec_config *cfg, exec_mem *out, pl_err *e);

/* ---------------------------------------------------------------- MPI (transport_mpi.c) */

/* Returns 1 when this build has the MPI transport. */
int exec_mpi_available(void);

/* Runs s with cfg as one rank of an MPI job (mpirun -np P, P = s->ranks): MPI_Init (threads:
 * funneled), the same worker code over the MPI transport (exec_run_rank), clocks aligned to
 * rank 0's, the records gathered to rank 0 and assembled there (exec_assemble). On rank 0
 * *is_root = 1 and out holds the run (free with exec_result_free); on the others *is_root = 0
 * and out is empty. A failing rank calls the abort hook (exec_mpi_set_abort_hook) with the
 * message naming rank and action, then MPI_Abort, which ends every process of the job. Every
 * wait on another process (the set-up's collectives, messages, barriers, the replicas'
 * all-reduce, the records' gathering) gives up after cfg->timeout_s the same way, naming the
 * ranks that never came and where it waited. Call exec_mpi_finalize before exiting. Returns
 * PL_OK or an error found before the workers ran. */
int exec_mpi_run(const sched *s, const exec_config *cfg, exec_result *out, int *is_root, pl_err *e);

/* Times the MPI transport's all-reduce of replicas (REDUCE_GRAD: exec_xrank_reduce over
 * MPI_Allreduce of int64, as exec_mpi_run's replicas run it) between the first two processes of
 * the MPI job (collective: every process calls it; MPI_Init when nobody has), at the sizes and
 * repetitions of exec_profile_allreduce, and fits the medians with cost_ring_allreduce_fit on
 * rank 0 (*is_root 1): *latency_s and *bandwidth_Bps (the others get 0). Needs 2 processes or
 * more. Call exec_mpi_finalize before exiting. Returns PL_OK or an error. */
int exec_mpi_profile_allreduce(const exec_config *cfg, int reps, double *latency_s, double *bandwidth_Bps, int *is_root,
                               pl_err *e);

/* Times the MPI transport's point-to-point hand-off of a stage boundary (its nonblocking send of
 * a private copy and its receive posted ahead and polled, as exec_mpi_run's ranks move
 * activations) between the
 * first two processes of the MPI job (collective: every process calls it; MPI_Init when nobody
 * has): the ping-pong of exec_profile_p2p (exec_p2p_side, its sizes and rounds: one-way times
 * when the two share a host, else half round trips; a process waits as the run's do), fitted on
 * rank 0 (*is_root 1) to *out as exec_profile_p2p's (the others get zeros). Needs 2 processes or more.
 * Returns PL_OK or an error. */
int exec_mpi_profile_p2p(const exec_config *cfg, int reps, exec_p2p *out, int *is_root, pl_err *e);

/* The host probe of an MPI job (exec_host_probe_measure's work, exec.h): every process times the
 * F of one block at once (fwd_s: the mean of the processes' medians; workers: the processes),
 * then process 0 alone while the others wait (alone_fwd_s, on process 0, *is_root 1).
 * Collective: every process calls it (MPI_Init when nobody has). Each wait for the other
 * processes gives up after timeout_s (0: the default, as exec_config.timeout_s), naming the
 * processes that never came ("rank R: timed out after T s: rank R waits in the host probe for
 * rank Q"); exec_mpi_finalize then ends the job. Returns PL_OK or an error, on every process
 * when any failed. */
int exec_mpi_host_probe(exec_host_probe *p, double timeout_s, int *is_root, pl_err *e);

/* Sets what is called with the reason just before MPI_Abort (the CLI prints it). */
void exec_mpi_set_abort_hook(void (*hook)(const pl_err *why));

/* Finalizes MPI when exec_mpi_run initialized it. A process done before the others waits for
 * them at a barrier it polls with naps (MPI_Finalize's own wait keeps a core busy), without a
 * timeout (rank 0 may profile and predict for long). A process whose wait on the others timed
 * out (any exec_mpi_* call; its error printed by the caller) ends the job instead (MPI_Abort,
 * exit status 1). */
void exec_mpi_finalize(void);

/* For the first process of an MPI job that profiles alone while the others wait in
 * exec_mpi_finalize (`pipelab profile --transport mpi`): lets it run on every core of its host,
 * whatever core the launcher bound it to, so that the threads' all-reduce and hand-off are timed
 * on two cores, as a threads run places its ranks. Returns 0, or -1 when the system refuses (the
 * binding stays). */
int exec_mpi_profile_unbind(void);

#endif
