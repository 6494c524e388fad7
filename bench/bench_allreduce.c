/* bench_allreduce.c: the executor's ring all-reduce over the in-process mailboxes (what
 * REDUCE_GRAD of a stage replicated on threads does with its int64 values), against copying the
 * same bytes once with memcpy: time per all-reduce, the bytes each replica sends
 * (2 (n - 1) / n x the buffer, the ring's traffic), the rate, and the ratio to memcpy.
 * usage: bench_allreduce [replicas (2)] [repetitions (20)] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "exec_int.h"
#include "platform/platform.h"

/* The most replicas the benchmark starts. */
#define BENCH_MAX_REPLICAS 64

/* One replica's thread: reps all-reduces of v[count], each timed from a common start, pinned
 * to core `core` (as the executor pins its ranks; -1 none). */
typedef struct member {
    exec_transport *t;
    int n, me, reps, rc, core;
    int64_t *v, *tmp, seq;
    size_t count, piece;
    double *took; /* [reps] seconds of each all-reduce (on replica 0) */
    pl_err e;
} member;

static void *member_main(void *arg) {
    member *m = arg;
    if (m->core >= 0) exec_platform_pin_self(m->core);
    for (int k = 0; k < m->reps && m->rc == PL_OK; k++) {
        m->rc = m->t->barrier(m->t, &m->e);
        double t0 = pl_now_s();
        if (m->rc == PL_OK)
            m->rc = exec_ring_allreduce(m->t, 0, m->n, m->me, 0, &m->seq, m->v, m->count, 0, m->tmp, m->piece, &m->e);
        m->took[k] = pl_now_s() - t0;
    }
    return NULL;
}

/* Returns the median of the reps all-reduces of count values on n replicas, -1 on failure. */
static double ring_s(int n, size_t count, int reps) {
    size_t piece = EXEC_RING_PIECE_BYTES / sizeof(int64_t);
    pl_err e;
    exec_transport *t = exec_threads_transport_new(n, n + 2, piece * sizeof(int64_t), 60, &e);
    if (!t) return -1;
    int cpus[EXEC_MAX_CORES], ncores = exec_platform_cores(cpus, EXEC_MAX_CORES);
    if (n <= ncores) exec_threads_transport_spin(t, 0.1); /* as exec_run: spin when each has a core */
    member m[BENCH_MAX_REPLICAS];
    pthread_t th[BENCH_MAX_REPLICAS];
    double *took = calloc((size_t)reps * (size_t)n, sizeof *took);
    int ok = took != NULL;
    for (int r = 0; r < n && ok; r++) {
        m[r] = (member){&t[r], n, r, reps, PL_OK, ncores > 0 ? cpus[r % ncores] : -1, calloc(count, sizeof(int64_t)),
                        calloc(piece, sizeof(int64_t)), 0, count, piece, took + (size_t)r * reps, {0}};
        for (size_t i = 0; m[r].v && i < count; i++) m[r].v[i] = (int64_t)(i % 1000) - 500;
        ok = m[r].v && m[r].tmp;
    }
    for (int r = 0; r < n && ok; r++) pthread_create(&th[r], NULL, member_main, &m[r]);
    for (int r = 0; r < n && ok; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < n; r++) ok = ok && m[r].rc == PL_OK;
    double med = ok ? exec_median(took, (size_t)reps) : -1;
    for (int r = 0; r < n; r++) { free(m[r].v); free(m[r].tmp); }
    free(took);
    exec_threads_transport_free(t, n);
    return med;
}

/* Returns the median time of copying bytes once with memcpy. */
static double memcpy_s(size_t bytes, int reps) {
    char *a = malloc(bytes), *b = malloc(bytes);
    double *v = calloc((size_t)reps, sizeof *v), med = -1;
    if (a && b && v) {
        memset(a, 1, bytes);
        memset(b, 2, bytes);
        for (int k = 0; k < reps; k++) {
            double t0 = pl_now_s();
            memcpy(b, a, bytes);
            v[k] = pl_now_s() - t0;
            a[k % bytes] = b[(k * 7) % bytes]; /* keep the copies */
        }
        med = exec_median(v, (size_t)reps);
    }
    free(a);
    free(b);
    free(v);
    return med;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 20;
    if (n < 2 || n > BENCH_MAX_REPLICAS || reps < 1) {
        fprintf(stderr, "usage: bench_allreduce [replicas 2..%d] [repetitions >= 1]\n", BENCH_MAX_REPLICAS);
        return 2;
    }
    printf("ring all-reduce over the in-process mailboxes, %d replicas (threads), median of %d; pieces of %zu KiB\n", n,
           reps, EXEC_RING_PIECE_BYTES >> 10);
    printf("%12s %12s %12s %12s %12s %10s\n", "values", "buffer_MiB", "allreduce_ms", "sent_MiB", "rate_GB/s", "x_memcpy");
    static const size_t counts[] = {1 << 14, 1 << 17, 1 << 20, 1 << 22};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        size_t bytes = counts[i] * sizeof(int64_t);
        double sent = 2.0 * (n - 1) / n * (double)bytes, ar = ring_s(n, counts[i], reps), mc = memcpy_s(bytes, reps);
        if (ar < 0) {
            fprintf(stderr, "bench_allreduce: the all-reduce of %zu values failed\n", counts[i]);
            return 1;
        }
        printf("%12zu %12.2f %12.3f %12.2f %12.2f %10.1f\n", counts[i], bytes / 1048576.0, 1e3 * ar, sent / 1048576.0,
               sent / ar / 1e9, ar / mc);
    }
    return 0;
}
