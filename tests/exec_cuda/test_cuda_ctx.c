/* test_cuda_ctx.c: the GEMM context of the CUDA tests' one-block cases (test_cuda_ctx.h). */
#include "test_cuda_ctx.h"

#include <string.h>

#include "pl_test.h"

void test_cuda_ctx_init(cx_gemm_ctx *c, exec_precision prec, size_t bf_cap, pl_err *e) {
    memset(c, 0, sizeof *c);
    c->prec = prec;
    CU_ASSERT_EQUAL_FATAL(cudaStreamCreate(&c->st), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cx_blas_create(&c->h, c->st, e), PL_OK);
    if (bf_cap == 0) return;
    c->bf_cap = bf_cap;
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&c->bfa, c->bf_cap * 2), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cudaMalloc((void **)&c->bfb, c->bf_cap * 2), cudaSuccess);
}

void test_cuda_ctx_free(cx_gemm_ctx *c) {
    cudaFree(c->bfa);
    cudaFree(c->bfb);
    cx_blas_destroy(c->h);
    cudaStreamDestroy(c->st);
}
