/* cuda_absent.c: the CUDA backend's entry points in a build without CUDA (no nvcc at configure
 * time, or -DPIPELAB_CUDA=OFF): each one refuses with a message that says so (the multi-process
 * ones: cuda_mpi_absent.c). */
#include "exec_cuda.h"

#include <string.h>

/* Fills e with the "not built" message and returns PL_EINPUT. */
static int not_built(pl_err *e) {
    return pl_errf(e, PL_EINPUT, "the CUDA backend is not built in this pipelab (configure with nvcc on the PATH, "
                                 "or -DPIPELAB_CUDA=ON); use --backend cpu");
}

int exec_cuda_built(void) { return 0; }

int exec_cuda_devices(pl_err *e) {
    not_built(e);
    return 0;
}

int exec_cuda_run(const sched *s, const exec_config *cfg, exec_result *out, pl_err *e) {
    (void)s;
    (void)cfg;
    memset(out, 0, sizeof *out);
    return not_built(e);
}

int exec_cuda_profile_layers(const exec_config *cfg, int reps, int concurrency, exec_layer_profile *p, pl_err *e) {
    (void)cfg;
    (void)reps;
    (void)concurrency;
    memset(p, 0, sizeof *p);
    return not_built(e);
}

int exec_cuda_profile_csv(const exec_config *cfg, int reps, int concurrency, const char *host, pl_buf *out,
                          exec_layer_profile *p, pl_err *e) {
    (void)cfg;
    (void)reps;
    (void)concurrency;
    (void)host;
    (void)out;
    if (p) memset(p, 0, sizeof *p);
    return not_built(e);
}

int exec_cuda_gemm_rate(int m, int n, int k, exec_precision prec, int reps, double *flops_per_s, pl_err *e) {
    (void)m;
    (void)n;
    (void)k;
    (void)prec;
    (void)reps;
    *flops_per_s = 0;
    return not_built(e);
}

int exec_cuda_device_info(int dev, char *name, size_t n, pl_err *e) {
    (void)dev;
    if (name && n) name[0] = '\0';
    not_built(e);
    return -1;
}
