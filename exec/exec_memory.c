/* exec_memory.c: the up-front memory checks: refuse a run or a profile whose host memory would
 * exceed the limit before anything is allocated, from the sizes the allocations will take. */
#include "exec_int.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define EXEC_MIB (1024.0 * 1024.0)
/* The largest bytes one block's state or parameters may take (exec_dims_check): far beyond any
 * memory, and small enough that the size_t products of the layouts cannot wrap. */
#define EXEC_DIMS_MAX_BYTES 0x1p60

/* The process's own memory besides what the checks count (its code and libraries, the BLAS's
 * buffers, the C library's arenas; a small run peaked at 9.4 MiB, and runs of 150-600 MiB at
 * 8.5-8.8 MiB over their allocations with 2 ranks), and each worker thread's (its stack and BLAS
 * packing buffers as far as touched). */
#define EXEC_PROCESS_BYTES (16.0 * EXEC_MIB)
#define EXEC_THREAD_BYTES (2.0 * EXEC_MIB)

int exec_dims_check(const exec_config *c, pl_err *e) {
    if (c->block == EXEC_BLOCK_GPT) {
        double rows = (double)c->microbatch_size * c->seq;
        if (rows > INT_MAX)
            return pl_errf(e, PL_EINPUT,
                           "the transformer's microbatch of %d sequences of %d tokens is %.0f rows (microbatch x seq), "
                           "more than the executor's %d; use a smaller microbatch or seq",
                           c->microbatch_size, c->seq, rows, INT_MAX);
        double scores = rows * c->heads * c->seq * sizeof(float);
        if (scores > EXEC_DIMS_MAX_BYTES)
            return pl_errf(e, PL_EINPUT,
                           "the transformer block's attention scores for one microbatch (microbatch x heads x seq x seq = "
                           "%d x %d x %d x %d floats) are %.3g bytes, more than the executor can address; use a smaller "
                           "microbatch, heads or seq",
                           c->microbatch_size, c->heads, c->seq, c->seq, scores);
    }
    exec_dims d;
    exec_dims_of(c, &d);
    double rows = d.b, f = d.f, h = d.h;
    if ((2 * rows * f + 10 * rows * h + 2 * h * f) * sizeof(float) > EXEC_DIMS_MAX_BYTES)
        return pl_errf(e, PL_EINPUT, "one block of width %d and ffn %d on %.0f rows takes more bytes than the executor can "
                                     "address; use a smaller width, ffn or microbatch", d.h, d.f, rows);
    return PL_OK;
}

/* The parts of a run's host memory (exec_check_memory), in bytes. */
typedef struct run_need {
    double ranks;   /* the ranks' arenas, bookkeeping and records (exec_host_need.arena) */
    double mail;    /* messages waiting in mailboxes (exec_host_need.held x a message) */
    double prof;    /* the profile's workers between the passes */
    double data;    /* the data set (inputs and targets) and the losses */
    double build;   /* what building the data set holds besides, before the ranks are set up */
    double total;   /* data + max(build, ranks + mail + prof) */
} run_need;

/* Fills n for the run of s with c in this process (rank: the one rank it runs, -1: all). */
static int run_need_of(const sched *s, const exec_config *c, const int *blocks, int rank, run_need *n, pl_err *e) {
    memset(n, 0, sizeof *n);
    exec_host_need h;
    int rc = exec_host_need_of(s, c, blocks, rank, &h, e);
    if (rc != PL_OK) return rc;
    exec_dims d;
    exec_dims_of(c, &d);
    int replicated = 0, nranks = 0; /* executor ranks: the profile's workers between the passes */
    for (int q = 0; q < s->stages; q++) replicated |= c->replicas && c->replicas[q] > 1;
    for (int r = 0; r < s->ranks; r++) {
        int w = 1;
        for (int q = 0; q < s->stages; q++)
            if (s->stage_rank[q] == r && c->replicas && c->replicas[q] > w) w = c->replicas[q];
        nranks += w;
    }
    double msg = (double)d.b * d.h * sizeof(float);
    if (replicated && msg < (double)EXEC_RING_PIECE_BYTES) msg = (double)EXEC_RING_PIECE_BYTES;
    n->ranks = h.arena;
    n->mail = h.held * msg;
    if (c->profile_between_reps > 0 && c->timed_passes > 0) {
        long long R = exec_prof_rounds(c->profile_between_reps), most = exec_passes_most(c) - c->warmup_passes;
        int again = exec_prof_again_stages(s); /* as exec_xrank_prof_new */
        n->prof = h.ranks * exec_prof_worker_bytes(c, nranks, (int)(R * most / c->timed_passes), again);
    }
    int P = exec_passes_most(c);
    long long M = (long long)s->microbatches * sched_iterations(s);
    n->data = exec_data_bytes(c, exec_data_used(P, M > INT_MAX ? INT_MAX : (int)M), &n->build) +
              (double)P * (double)M * sizeof(double);
    n->ranks += EXEC_PROCESS_BYTES + EXEC_THREAD_BYTES * h.ranks;
    double run = n->ranks + n->mail + n->prof;
    n->total = n->data + (n->build > run ? n->build : run);
    return PL_OK;
}

/* exec.h. The allocations would otherwise succeed one by one and the kernel kill the process
 * while it touches them. */
int exec_check_memory(const sched *s, const exec_config *c, const int *blocks, int rank, pl_err *e) {
    int rc = exec_dims_check(c, e);
    if (rc != PL_OK) return rc;
    if (c->budget.bad_env) return sched_memory_check(&c->budget, 0, "the run", e);
    run_need n;
    rc = run_need_of(s, c, blocks, rank, &n, e);
    if (rc != PL_OK) return rc;
    const char *src = NULL;
    uint64_t lim = sched_memory_limit(&c->budget, &src);
    if (n.total <= (double)lim) return PL_OK;
    exec_dims d;
    exec_dims_of(c, &d);
    double nblocks = 0;
    for (int q = 0; q < s->stages; q++) {
        /* in one process every replica holds its copy (exec_config.replicas) */
        int k = rank < 0 && c->replicas && c->replicas[q] > 1 ? c->replicas[q] : 1;
        if (rank < 0 || s->stage_rank[q] == rank) nblocks += (double)blocks[q] * k;
    }
    char need[32], have[32], ranks[32], prof[32], data[32];
    pl_human_bytes(n.total, need, sizeof need);
    pl_human_bytes((double)lim, have, sizeof have);
    pl_human_bytes(n.ranks + n.mail, ranks, sizeof ranks);
    pl_human_bytes(n.prof, prof, sizeof prof);
    pl_human_bytes(n.data + (n.build > n.ranks + n.mail + n.prof ? n.build : 0), data, sizeof data);
    return pl_errf(e, PL_EINPUT,
                   "the model does not fit: %s needs about %s (%.0f bytes%s: the process, the weights%s, stashed activations and "
                   "buffers of %.0f blocks of width %d and ffn %d%s, %s; %s%s%sthe data set and the target network, "
                   "%s), more than the %s available (%s); use a smaller model (--width, --ffn, --depth or --model), "
                   "fewer microbatches in flight, more MPI processes, or raise the limit with --max-memory or "
                   SCHED_MAX_MEMORY_ENV,
                   rank < 0 ? "the run" : "this rank's process", need, n.total,
                   c->backend == EXEC_BACKEND_CUDA ? " of host memory besides the GPU's" : "",
                   c->momentum != 0.0 ? ", gradients, momentum" : " and gradients", nblocks, d.h, d.f,
                   d.block == EXEC_BLOCK_GPT ? " (with attention scores of microbatch x heads x seq x seq floats)" : "",
                   ranks, n.prof > 0 ? "the profile's workers between the passes, " : "", n.prof > 0 ? prof : "",
                   n.prof > 0 ? "; " : "", data, have, src);
}

/* exec.h. */
int exec_check_profile_memory(const exec_config *c, int reps, int concurrency, pl_err *e) {
    int rc = exec_dims_check(c, e);
    if (rc != PL_OK || c->backend == EXEC_BACKEND_CUDA) return rc; /* the GPU's profile: its own device memory */
    if (c->budget.bad_env) return sched_memory_check(&c->budget, 0, "the profile", e);
    int k = concurrency > 1 ? concurrency : 1;
    double workers = k * exec_prof_worker_bytes(c, k, exec_prof_rounds(reps),
                                                c->profile_again_stages > 0 ? c->profile_again_stages : EXEC_PROF_AGAIN_ANY_STAGES(k));
    double ar = exec_ar_profile_bytes(c, reps), p2p = exec_p2p_profile_bytes(c, reps);
    double total = workers > ar ? workers : ar; /* one after the other, each freed before the next */
    if (p2p > total) total = p2p;
    total += EXEC_PROCESS_BYTES + EXEC_THREAD_BYTES * k;
    const char *src = NULL;
    uint64_t lim = sched_memory_limit(&c->budget, &src);
    if (total <= (double)lim) return PL_OK;
    exec_dims d;
    exec_dims_of(c, &d);
    char need[32], have[32];
    pl_human_bytes(total, need, sizeof need);
    pl_human_bytes((double)lim, have, sizeof have);
    return pl_errf(e, PL_EINPUT,
                   "the profile does not fit: profiling %d blocks of width %d and ffn %d on %d worker%s at once needs "
                   "about %s (%.0f bytes: the process, each worker's %d blocks%s, the stashed activations of %d "
                   "microbatches through them%s and a backward's scratch), more than the %s available (%s); use a smaller model (--width, --ffn, "
                   "--depth or --model), fewer workers at once, or raise the limit with --max-memory or " SCHED_MAX_MEMORY_ENV,
                   c->layers, d.h, d.f, k, k == 1 ? "" : "s", need, total, exec_prof_blocks(c, k),
                   c->momentum != 0.0 ? " with their gradients and momentum" : " with their gradients", EXEC_PROFILE_SLOTS,
                   d.block == EXEC_BLOCK_GPT ? " (with attention scores of microbatch x heads x seq x seq floats)" : "",
                   have, src);
}
