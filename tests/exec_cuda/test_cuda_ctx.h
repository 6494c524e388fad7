/* test_cuda_ctx.h: the GEMM context the CUDA tests' one-block cases run on (cx_gemm_ctx): a
 * stream of its own with a cuBLAS handle bound to it, in one precision (test_cuda_ctx.c). */
#ifndef TEST_CUDA_CTX_H
#define TEST_CUDA_CTX_H

#include <stddef.h>

#include "cuda_int.h"
#include "exec.h"

/* Sets c up for GEMM operands of precision prec: zeroed, a new stream, a cuBLAS handle on it
 * (cx_blas_create, its error in e) and, when bf_cap > 0, bf16 scratch of bf_cap elements for each
 * operand (none when 0). A failing CUDA or cuBLAS call fails the running test (fatally). */
void test_cuda_ctx_init(cx_gemm_ctx *c, exec_precision prec, size_t bf_cap, pl_err *e);
/* Frees c's bf16 scratch, cuBLAS handle and stream. */
void test_cuda_ctx_free(cx_gemm_ctx *c);

#endif
