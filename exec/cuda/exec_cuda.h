/* exec_cuda.h: the executor's CUDA backend: the same lowered schedule and model as the CPU
 * executor (exec.h), on GPUs: cuBLAS GEMMs (fp32, tf32 or bf16 operands, fp32 accumulation),
 * small kernels for the rest, one allocation per rank, CUDA events around every action. In a
 * build without CUDA every entry point fails with a clear "not built" error. */
#ifndef EXEC_CUDA_H
#define EXEC_CUDA_H

#include <stddef.h>

#include "exec.h"
#include "pl_common.h"
#include "pl_sched.h"

/* Returns 1 when this build has the CUDA backend (nvcc found at configure time), else 0. */
int exec_cuda_built(void);

/* Returns the number of usable GPUs (>= 1), or 0 with e saying why none can be used (not built,
 * no driver, no device). Never fails otherwise. */
int exec_cuda_devices(pl_err *e);

/* Returns the name of a precision ("fp32", "tf32", "bf16"), or NULL for an unknown value. */
const char *exec_precision_name(exec_precision p);
/* Parses "fp32", "tf32" or "bf16" into *p; returns 0, or -1 for anything else. */
int exec_precision_parse(const char *name, exec_precision *p);

/* Runs the lowered schedule s on GPUs with one host thread per rank in this process, as
 * exec_run does on CPU threads, and fills out the same way (out->backend "cuda", precision and
 * device set). Placement: rank r on GPU r mod G (G = cfg->cuda_devices or all visible); when
 * ranks outnumber GPUs, ranks sharing a GPU each have their own streams, and with cfg->sm_split
 * each its own green context holding an equal share of the SMs. Data between ranks moves with
 * cudaMemcpyPeerAsync on each rank's communication stream (overlapping its compute stream).
 * Returns PL_OK or an error naming the rank and the action (PL_EINPUT for a bad schedule or
 * configuration, PL_ENOMEM for a budget or a failed allocation, PL_EINTERNAL for a CUDA error);
 * on error out holds nothing to free. */
int exec_cuda_run(const sched *s, const exec_config *cfg, exec_result *out, pl_err *e);

/* Returns 1 when this build has the multi-process CUDA path (NCCL send/recv bootstrapped through
 * MPI), else 0. */
int exec_cuda_mpi_available(void);

/* As exec_mpi_run (exec_drive.h) with the CUDA backend: one MPI process per rank (mpirun -np P),
 * each on its own GPU (GPU = its rank among the node's ranks), NCCL send/recv between them over
 * one 2-rank communicator and stream per direction and pair, bootstrapped through MPI; the
 * records gathered to rank 0 (*is_root) and assembled there. Errors found before the ranks
 * start are returned on every rank; a rank failing later calls the abort hook with the message
 * naming rank and action, then MPI_Abort ends the job. Returns PL_EINPUT with a "not built"
 * message where exec_cuda_mpi_available() is 0. Call exec_cuda_mpi_finalize before exiting. */
int exec_cuda_mpi_run(const sched *s, const exec_config *cfg, exec_result *out, int *is_root, pl_err *e);
/* Sets what a failing rank calls with the reason just before MPI_Abort (the CLI prints it). */
void exec_cuda_mpi_set_abort_hook(void (*hook)(const pl_err *why));
/* Finalizes MPI when exec_cuda_mpi_run initialized it. */
void exec_cuda_mpi_finalize(void);

/* Times F, I, W and STEP of one block of cfg's shape on GPU 0 in cfg->precision (CUDA events,
 * median of reps after warm-up), over cfg->layers distinct blocks so weights are not cache-hot.
 * concurrency > 1: that many workers at once on GPU 0 (as that many ranks sharing it compute),
 * each on its own ceil(layers / concurrency) blocks; with cfg->sm_split each inside the green
 * context of 1/concurrency of the SMs its rank gets. concurrency 1: the whole GPU.
 * Fills p (sizes as exec_profile_layers). Returns PL_OK or an error. */
int exec_cuda_profile_layers(const exec_config *cfg, int reps, int concurrency, exec_layer_profile *p, pl_err *e);

/* The profile CSV of exec_profile_csv_n (exec.h) measured with exec_cuda_profile_layers. */
int exec_cuda_profile_csv(const exec_config *cfg, int reps, int concurrency, const char *host, pl_buf *out,
                          exec_layer_profile *p, pl_err *e);

/* Measures cuBLAS on GPU 0: C [m, n] = A [m, k] B [k, n] in precision prec, reps timed products
 * after warm-up on random operands (never zeros), and returns the median rate in *flops_per_s.
 * Returns PL_OK or an error. */
int exec_cuda_gemm_rate(int m, int n, int k, exec_precision prec, int reps, double *flops_per_s, pl_err *e);

/* Fills name[n] with GPU dev's name and returns its SM count, or -1 with e. */
int exec_cuda_device_info(int dev, char *name, size_t n, pl_err *e);

#endif
