/* bench_host.c: how often the host stops this machine's cores for tens of milliseconds, under the
 * load patterns of a pipeline's ranks. On the development VM single actions of a run took about
 * 100 ms longer than their class's median, a few times a minute, while the guest never switched
 * the worker out (docs/validate_cpu.md, "Each kind's lean; the host's stalls"); this measures
 * that apart from pipelab's executor.
 *
 * Each pattern runs for SECONDS (default 20) on its threads, each of which writes a buffer of
 * 1 MiB of its own over and over (or, in the last pattern, only reads the clock) and reads the
 * clock every 4 KiB: a gap of more than STALL_S between two readings, where a 4 KiB stretch takes
 * about a microsecond, is a stall. Patterns, as a pipeline's ranks load the cores:
 *   both cores writing, without a break       PipeDream's and 2BW's steady state, no bubble
 *   both cores writing, 5 ms off every 100 ms  ranks that wait for each other now and then
 *   one core writing                           one rank busy, the other waiting
 *   both cores reading the clock alone         no memory written
 * Prints per pattern the busy seconds, the stalls, stalls per busy second, their median and
 * longest, and the share of busy time they took; then the interruptions short of a stall, gaps
 * over GAP_S (a hundred stretches' time) up to STALL_S, which a run's actions of a few
 * milliseconds meet far more often: per busy second, their median and their share of busy time
 * (docs/validate_cpu.md, "What the tail is made of"). Printed, not asserted.
 * Usage: bench_host [SECONDS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pl_common.h"

#define STALL_S 0.02
#define GAP_S 1e-4
#define BUF_BYTES (1u << 20)
#define STRETCH_FLOATS 1024 /* 4 KiB between two readings of the clock */
#define MAX_STALLS 4096
#define MAX_GAPS 65536

/* One load pattern. */
typedef struct pattern {
    const char *name;
    int threads;
    int write;            /* 1: write the buffer; 0: read the clock alone */
    double on_s, off_s;   /* busy on_s, then idle off_s (off_s 0: never idle) */
} pattern;

static const pattern patterns[] = {
    {"both cores writing, without a break", 2, 1, 0, 0},
    {"both cores writing, 5 ms off every 100 ms", 2, 1, 0.095, 0.005},
    {"one core writing", 1, 1, 0, 0},
    {"both cores reading the clock alone", 2, 0, 0, 0},
};

/* One thread's run of a pattern and what it saw. */
typedef struct loader {
    const pattern *p;
    double t0, seconds;
    double busy_s;
    double stall[MAX_STALLS];
    int stalls;
    double gap[MAX_GAPS]; /* gaps over GAP_S up to STALL_S (the first MAX_GAPS) */
    int gaps;
    double gap_s;         /* their time, all of them */
    long gaps_all;        /* their count, all of them */
    float sink;
} loader;

static void sleep_s(double s) {
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

static void *load(void *arg) {
    loader *L = arg;
    float *buf = NULL;
    size_t n = BUF_BYTES / sizeof(float);
    if (L->p->write) {
        buf = malloc(BUF_BYTES);
        if (!buf) return NULL;
        memset(buf, 0, BUF_BYTES);
    }
    double last = pl_now_s(), on_start = last;
    for (size_t i = 0;; i = (i + STRETCH_FLOATS) % n) {
        if (buf)
            for (size_t j = i; j < i + STRETCH_FLOATS; j += 16) buf[j] += 1.0f; /* one float per line */
        double t = pl_now_s();
        if (t - last > STALL_S && L->stalls < MAX_STALLS) L->stall[L->stalls++] = t - last;
        if (t - last > GAP_S && t - last <= STALL_S) {
            if (L->gaps < MAX_GAPS) L->gap[L->gaps++] = t - last;
            L->gap_s += t - last;
            L->gaps_all++;
        }
        last = t;
        if (t - L->t0 > L->seconds) break;
        if (L->p->off_s > 0 && t - on_start > L->p->on_s) {
            L->busy_s += t - on_start;
            sleep_s(L->p->off_s);
            on_start = last = pl_now_s();
        }
    }
    L->busy_s += last - on_start;
    if (buf) L->sink = buf[0];
    free(buf);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 20;
    if (argc > 2 || !(seconds > 0)) {
        fprintf(stderr, "usage: bench_host [SECONDS]\n");
        return 2;
    }
    printf("stalls: gaps over %.0f ms between two readings of the clock %u bytes of writes apart, %.0f s a pattern\n",
           1e3 * STALL_S, STRETCH_FLOATS * 4u, seconds);
    printf("%-44s %7s %7s %9s %9s %9s %7s\n", "pattern", "busy s", "stalls", "per s", "median ms", "longest", "share");
    enum { PATTERNS = sizeof patterns / sizeof *patterns };
    double g_per_s[PATTERNS], g_median[PATTERNS], g_share[PATTERNS];
    for (size_t k = 0; k < sizeof patterns / sizeof *patterns; k++) {
        const pattern *p = &patterns[k];
        loader *L = calloc((size_t)p->threads, sizeof *L);
        pthread_t th[2];
        if (!L) return 1;
        double t0 = pl_now_s();
        int started = 0;
        for (int i = 0; i < p->threads; i++) {
            L[i] = (loader){.p = p, .t0 = t0, .seconds = seconds};
            if (pthread_create(&th[i], NULL, load, &L[i]) == 0) started++;
        }
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        double busy = 0, all[2 * MAX_STALLS], lost = 0;
        int n = 0;
        for (int i = 0; i < started; i++) {
            busy += L[i].busy_s;
            for (int j = 0; j < L[i].stalls; j++) lost += all[n++] = L[i].stall[j];
        }
        qsort(all, (size_t)n, sizeof *all, cmp_double);
        printf("%-44s %7.1f %7d %9.3f", p->name, busy, n, busy > 0 ? n / busy : 0);
        if (n) printf(" %9.1f %9.1f", 1e3 * all[n / 2], 1e3 * all[n - 1]);
        else printf(" %9s %9s", "-", "-");
        printf(" %6.2f%%\n", busy > 0 ? 100 * lost / busy : 0);
        /* the gaps short of a stall, the threads' together */
        double *g = malloc(2 * MAX_GAPS * sizeof *g), gs = 0;
        long ga = 0;
        int ng = 0;
        for (int i = 0; i < started; i++) {
            gs += L[i].gap_s;
            ga += L[i].gaps_all;
            for (int j = 0; g && j < L[i].gaps; j++) g[ng++] = L[i].gap[j];
        }
        if (g && ng) qsort(g, (size_t)ng, sizeof *g, cmp_double);
        g_per_s[k] = busy > 0 ? (double)ga / busy : 0;
        g_median[k] = g && ng ? g[ng / 2] : 0;
        g_share[k] = busy > 0 ? gs / busy : 0;
        free(g);
        free(L);
    }
    printf("\ninterruptions short of a stall: gaps over %.1f ms up to %.0f ms\n", 1e3 * GAP_S, 1e3 * STALL_S);
    printf("%-44s %9s %10s %7s\n", "pattern", "per s", "median ms", "share");
    for (int k = 0; k < PATTERNS; k++)
        printf("%-44s %9.1f %10.3f %6.2f%%\n", patterns[k].name, g_per_s[k], 1e3 * g_median[k], 100 * g_share[k]);
    return 0;
}
