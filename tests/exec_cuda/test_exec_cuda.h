/* test_exec_cuda.h: what the CUDA backend's test files share (test_exec_cuda.c). */
#ifndef TEST_EXEC_CUDA_H
#define TEST_EXEC_CUDA_H

#include <stddef.h>

#include "exec.h"

/* The model configuration of the run tests: h 64, f 128, b 8, 3 timed passes, on the GPU. */
exec_config run_cfg(int layers);
/* Returns ||a - b|| / ||b - base|| (base NULL: / ||b||) over n floats; NaN never passes. */
double rel_norm(const float *a, const float *b, const float *base, size_t n);
/* Relative error bounds per precision (indexed by exec_precision; test_exec_cuda.c says why):
 * one block's outputs, whole runs' weight updates, and their losses. */
extern const double BLOCK_TOL[3], UPDATE_TOL[3], LOSS_TOL[3];
/* Registers the transformer block's suite (test_exec_cuda_gpt.c). */
void exec_cuda_test_gpt_register(void);

#endif
