/* cuda_mpi_absent.c: the multi-process CUDA entry points in a build without them (no CUDA, or
 * CUDA without MPI and nccl.h at configure time; else cuda_nccl.c): each refuses, saying what
 * is missing. */
#include "exec_cuda.h"

#include <string.h>

int exec_cuda_mpi_available(void) { return 0; }

void exec_cuda_mpi_set_abort_hook(void (*hook)(const pl_err *why)) { (void)hook; }

void exec_cuda_mpi_finalize(void) {}

int exec_cuda_mpi_run(const sched *s, const exec_config *cfg, exec_result *out, int *is_root, pl_err *e) {
    memset(out, 0, sizeof *out);
    if (is_root) *is_root = 1;
#ifndef PIPELAB_EXEC_CUDA
    return exec_cuda_run(s, cfg, out, e); /* the whole backend is missing: its own refusal */
#else
    (void)s;
    (void)cfg;
    return pl_errf(e, PL_EINPUT, "the CUDA backend over MPI processes is not built in this pipelab (it needs MPI and "
                                 "nccl.h at configure time); run the CUDA backend with threads in one process "
                                 "(--transport threads)");
#endif
}
