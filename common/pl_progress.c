/* pl_progress.c: the progress bar on stderr (DESIGN §8: only on a terminal, for anything that
 * takes more than a second or two). The work only stores a counter (one relaxed atomic store);
 * a thread of the bar's own draws it, so a hot loop pays nothing for the drawing and a stalled
 * one still shows its elapsed time. */
#include "pl_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Seconds of work before the bar first appears, and between redraws. */
#define SHOW_AFTER_S 1.0
#define REDRAW_S 0.1
/* Cells of the bar itself. */
#define BAR_CELLS 28

struct pl_progress {
    int fd;
    char what[96];
    uint64_t total;
    _Atomic uint64_t done;
    _Atomic int stop;
    double t0, show_after;
    int drawn;      /* a line is on the terminal (to clear at the end) */
    size_t last_len;
    pthread_t th;
    pthread_mutex_t mu; /* sleeps of the drawing thread, woken by pl_progress_end */
    pthread_cond_t cv;
};

/* Formats the line for done of total after t seconds into buf (size n); returns its length. */
size_t pl_progress_format(char *buf, size_t n, const char *what, uint64_t done, uint64_t total, double t) {
    if (done > total) done = total;
    char bar[BAR_CELLS + 1];
    int fill = total ? (int)((double)done / (double)total * BAR_CELLS) : 0;
    for (int i = 0; i < BAR_CELLS; i++) bar[i] = i < fill ? '#' : '.';
    bar[BAR_CELLS] = 0;
    int k;
    if (total)
        k = snprintf(buf, n, "%s [%s] %3d%%  %llu/%llu  %.1f s", what, bar,
                     (int)(100.0 * (double)done / (double)total), (unsigned long long)done,
                     (unsigned long long)total, t);
    else
        k = snprintf(buf, n, "%s  %.1f s", what, t);
    return k < 0 ? 0 : (size_t)k < n ? (size_t)k : n - 1;
}

/* Draws the current line over the previous one ("\r", padded with blanks where it was longer). */
static void draw(pl_progress *p) {
    char line[256];
    size_t len = pl_progress_format(line, sizeof line, p->what, atomic_load_explicit(&p->done, memory_order_relaxed),
                                    p->total, pl_now_s() - p->t0);
    char out[600];
    size_t k = 0;
    out[k++] = '\r';
    memcpy(out + k, line, len);
    k += len;
    for (size_t i = len; i < p->last_len && k < sizeof out - 1; i++) out[k++] = ' ';
    p->last_len = len;
    p->drawn = 1;
    ssize_t w = write(p->fd, out, k);
    (void)w; /* a terminal that refuses the bar loses nothing else */
}

/* Clears the drawn line (if any), so that what is printed next starts clean. */
static void clear(pl_progress *p) {
    if (!p->drawn) return;
    char out[300];
    size_t k = 0;
    out[k++] = '\r';
    for (size_t i = 0; i < p->last_len && k < sizeof out - 2; i++) out[k++] = ' ';
    out[k++] = '\r';
    ssize_t w = write(p->fd, out, k);
    (void)w;
    p->drawn = 0;
}

/* The drawing thread: draws once the work has run show_after seconds, then every REDRAW_S,
 * until stopped. */
static void *run(void *arg) {
    pl_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->stop)) {
        double now = pl_now_s(), next;
        if (now - p->t0 >= p->show_after) {
            draw(p);
            next = now + REDRAW_S;
        } else {
            next = p->t0 + p->show_after;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double wait = next - now;
        ts.tv_sec += (time_t)wait;
        ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

pl_progress *pl_progress_start_fd(int fd, int force, const char *what, uint64_t total) {
    const char *env = getenv(PL_PROGRESS_ENV);
    if (env && strcmp(env, "0") == 0) return NULL;
    if (!force && !isatty(fd)) return NULL;
    pl_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->fd = fd;
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    p->total = total;
    p->t0 = pl_now_s();
    p->show_after = SHOW_AFTER_S;
    const char *after = getenv(PL_PROGRESS_AFTER_ENV); /* seconds before the bar appears */
    double a;
    if (after && pl_parse_double(after, &a) == 0 && a >= 0 && a < 1e6) p->show_after = a;
    if (force) p->show_after = 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (p->show_after <= 0) draw(p); /* at once: also work that ends before the thread runs */
    int ok = pthread_mutex_init(&p->mu, NULL) == 0 && pthread_cond_init(&p->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_create(&p->th, NULL, run, p) != 0) {
        clear(p);
        free(p); /* no bar: the work goes on without one */
        return NULL;
    }
    return p;
}

pl_progress *pl_progress_start(const char *what, uint64_t total) {
    return pl_progress_start_fd(STDERR_FILENO, 0, what, total);
}

void pl_progress_set(pl_progress *p, uint64_t done) {
    if (p) atomic_store_explicit(&p->done, done, memory_order_relaxed);
}

void pl_progress_end(pl_progress *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    clear(p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
