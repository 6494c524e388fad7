/* bench_stream.c: the executor's optimizer STEP (exec_sgd_step) over time, on each core. On the
 * development VM one core's speed at a streaming loop switches between two states 1.6-1.8 times
 * apart that last seconds, on each core on its own; a profile round's STEP takes the state of
 * its moment and a pass's STEPs, summed, the mix of its seconds. It is the STEP's noise between a
 * profile and its passes, which neither the rounds' median (the prediction's) nor their mean
 * (TAG-stepmean, exec_mean_less_stalls) takes out (docs/validate_cpu.md, "The STEP's two
 * speeds"). This measures it apart from pipelab's run.
 *
 * Each pattern runs for SECONDS (default 20): its threads, pinned to the first cores, each STEP
 * a block of MIB MiB of parameters (default 8: a dense block of width 512 holds 8.4 MB) into a
 * second buffer and back, its gradients cleared, back to back, with a learning rate of 0 read
 * through a volatile (the update is computed and the weights stay). Per window of WINDOW_S the
 * mean time of one STEP; per core, over the windows: the 10th, 50th and 90th percentiles, the
 * ratio of the 90th to the 10th, the share of windows in the slow state (over the geometric mean
 * of the two percentiles), the mean stretch of windows in one state, and the mean over the
 * windows against their median, which is what the two estimators of a profile's STEP differ by
 * over that many seconds. Printed, not asserted.
 * Usage: bench_stream [SECONDS [MIB]] */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_int.h"
#include "pl_common.h"
#include "platform/platform.h"

#define WINDOW_S 0.25
#define MAX_WINDOWS 4096

/* One load pattern: threads STEP at once. */
typedef struct pattern {
    const char *name;
    int threads;
} pattern;

static const pattern patterns[] = {
    {"both cores stepping", 2},
    {"one core stepping", 1},
};

/* One thread's run and what it saw. */
typedef struct stepper {
    int cpu;              /* core to pin to; -1: none */
    double seconds;
    size_t floats;
    double win[MAX_WINDOWS]; /* mean seconds of a STEP in each window */
    int windows;
    int failed;
    float sink;
} stepper;

static void *step_loop(void *arg) {
    stepper *S = arg;
    static volatile float lr_zero = 0.0f;
    if (S->cpu >= 0) (void)exec_platform_pin_self(S->cpu);
    size_t n = S->floats;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *g = malloc(n * sizeof *g);
    if (!a || !b || !g) {
        S->failed = 1;
        free(a);
        free(b);
        free(g);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        a[i] = b[i] = 1.0f / (float)(1 + i % 97);
        g[i] = 0;
    }
    double t0 = pl_now_s(), w0 = t0, sum = 0;
    long cnt = 0;
    for (int k = 0;; k++) {
        float *from = k % 2 ? b : a, *to = k % 2 ? a : b;
        double s = pl_now_s();
        exec_sgd_step(to, from, g, NULL, n, 1.0f, lr_zero, 0.0f);
        double e = pl_now_s();
        sum += e - s;
        cnt++;
        if (e - w0 >= WINDOW_S) {
            if (S->windows < MAX_WINDOWS) S->win[S->windows++] = sum / (double)cnt;
            sum = 0;
            cnt = 0;
            w0 = e;
        }
        if (e - t0 > S->seconds) break;
    }
    S->sink = a[0] + b[n - 1];
    free(a);
    free(b);
    free(g);
    return NULL;
}

static int cmp_double(const void *x, const void *y) {
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

/* Prints one core's line over its windows w[n]. */
static void report(const char *name, int cpu, const double *w, int n) {
    if (n < 4) {
        printf("%-22s %4d %7d  (too few windows)\n", name, cpu, n);
        return;
    }
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return;
    memcpy(s, w, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double p10 = s[n / 10], p50 = s[n / 2], p90 = s[(9 * n) / 10], cut = sqrt(p10 * p90), mean = 0;
    int slow = 0, runs = 1;
    for (int i = 0; i < n; i++) {
        mean += w[i] / n;
        slow += w[i] > cut;
        if (i > 0 && (w[i] > cut) != (w[i - 1] > cut)) runs++;
    }
    printf("%-22s %4d %7d %8.3f %8.3f %8.3f %6.2f %6.0f%% %9.2f %+9.1f%%\n", name, cpu, n, 1e3 * p10, 1e3 * p50,
           1e3 * p90, p90 / p10, 100.0 * slow / n, WINDOW_S * n / runs, 100 * (mean / p50 - 1));
    free(s);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 20, mib = argc > 2 ? atof(argv[2]) : 8;
    if (argc > 3 || !(seconds > 0) || !(mib > 0) || mib > 1024) {
        fprintf(stderr, "usage: bench_stream [SECONDS [MIB]]\n");
        return 2;
    }
    int cpus[2], ncpu = exec_platform_cores(cpus, 2);
    size_t floats = (size_t)(mib * 1048576.0 / sizeof(float));
    printf("the executor's STEP of %.0f MiB of parameters back to back, %.0f s a pattern, windows of %.2f s\n", mib,
           seconds, WINDOW_S);
    printf("%-22s %4s %7s %8s %8s %8s %6s %7s %9s %10s\n", "pattern", "core", "windows", "p10 ms", "p50 ms", "p90 ms",
           "p90/10", "slow", "stretch s", "mean/p50");
    for (size_t k = 0; k < sizeof patterns / sizeof *patterns; k++) {
        const pattern *p = &patterns[k];
        stepper *S = calloc((size_t)p->threads, sizeof *S);
        pthread_t th[2];
        int started[2] = {0, 0};
        if (!S) return 1;
        for (int i = 0; i < p->threads; i++) {
            S[i].cpu = i < ncpu ? cpus[i] : -1;
            S[i].seconds = seconds;
            S[i].floats = floats;
            started[i] = pthread_create(&th[i], NULL, step_loop, &S[i]) == 0;
        }
        for (int i = 0; i < p->threads; i++)
            if (started[i]) pthread_join(th[i], NULL);
        for (int i = 0; i < p->threads; i++) {
            if (!started[i] || S[i].failed) {
                fprintf(stderr, "bench_stream: %s: thread %d did not run (out of memory or threads)\n", p->name, i);
                free(S);
                return 1;
            }
            report(p->name, S[i].cpu, S[i].win, S[i].windows);
        }
        free(S);
    }
    return 0;
}
