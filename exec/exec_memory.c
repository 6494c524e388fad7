/* exec_memory.c: the up-front memory check: refuses a run whose least host memory exceeds the
 * limit before anything is allocated. */
#include "exec_int.h"

/* Floats every parameter takes: one weight version and its gradient (and the momentum). */
#define EXEC_FLOATS_PER_PARAM 2.0
/* Floats of the data set per element of a microbatch: its input and its target. */
#define EXEC_DATA_FLOATS_PER_ELEM 2.0
#define EXEC_MIB (1024.0 * 1024.0)
#define EXEC_GIB (1024.0 * EXEC_MIB)

/* exec.h. The allocations would otherwise succeed one by one and the kernel kill the process
 * while it touches them. */
int exec_check_memory(const sched *s, const exec_config *c, const int *blocks, int rank, pl_err *e) {
    exec_dims d;
    exec_dims_of(c, &d);
    const double fl = (double)sizeof(float);
    double nf = (double)exec_block_floats(&d), per = EXEC_FLOATS_PER_PARAM + (c->momentum != 0.0), nblocks = 0;
    int nranks = rank < 0 ? s->ranks : 1;
    for (int q = 0; q < s->stages; q++) {
        /* in one process every replica holds its copy (exec_config.replicas) */
        int n = rank < 0 && c->replicas && c->replicas[q] > 1 ? c->replicas[q] : 1;
        if (rank < 0 || s->stage_rank[q] == rank) nblocks += (double)blocks[q] * n;
        nranks += n - 1;
    }
    double bytes = fl * nf * per * nblocks;
    if (c->profile_between_reps > 0) bytes += fl * nf * per * exec_prof_blocks(c, s->ranks) * nranks;
    double D = exec_dataset_microbatches(c);
    bytes += fl * (EXEC_DATA_FLOATS_PER_ELEM * D * d.b * d.h + nf);
    const char *src = NULL;
    uint64_t lim = sched_memory_limit(&c->budget, &src);
    if (bytes <= (double)lim) return PL_OK;
    int in_gib = (double)lim >= EXEC_GIB;
    double unit = in_gib ? EXEC_GIB : EXEC_MIB;
    return pl_errf(e, PL_EINPUT,
                   "the model does not fit: %s needs at least %.1f %s%s (the weights%s of %.0f blocks of width %d and ffn "
                   "%d, %sthe data set and the target network), more than the %.1f %s available (%s); use a smaller "
                   "--width, --ffn or --depth, more MPI processes, or raise the limit with --max-memory or "
                   SCHED_MAX_MEMORY_ENV,
                   rank < 0 ? "the run" : "this rank's process", bytes / unit, in_gib ? "GiB" : "MiB",
                   c->backend == EXEC_BACKEND_CUDA ? " of host memory besides the GPU's" : "",
                   c->momentum != 0.0 ? ", gradients and momentum" : " and gradients", nblocks, d.h, d.f,
                   c->profile_between_reps > 0 ? "the profile's blocks between the passes, " : "",
                   (double)lim / unit, in_gib ? "GiB" : "MiB", src);
}
