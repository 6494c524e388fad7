/* transport_threads.c: the in-process transport: bounded mailboxes (one per receiving rank)
 * under one mutex with a condition variable per rank; timed waits; abort; a barrier; and
 * detection of waits that can never be served (every running rank blocked) and of messages
 * nobody received (a mailbox not empty at a barrier between passes, or when every rank finished).
 *
 * Posted receives (post_recv / wait_recv): a rank posts the receive of a message into its own
 * buffer where its list has the RECV and waits for it where its compute needs the data. A message
 * already in the mailbox is taken at the post; one sent later goes straight into the posted
 * buffer without a mailbox slot. So the mailbox holds, at any point of a rank's list, exactly
 * the messages whose RECV it has not reached yet, as with blocking receives in list order.
 *
 * Waking up: a receiver (or a rank at the barrier) whose message is not there yet first spins
 * on its mailbox's arrival counter (up to spin_s, only when every rank has a core of its own),
 * then sleeps on its condition variable. A sleeping worker gives its core away, and on a
 * machine with other work it gets it back only when the scheduler preempts that work (ms): the
 * wake-up latency was most of the executor's schedule overhead on 2 ranks (bench_exec). */
#include <pthread.h>
#include <stdatomic.h>

#include "exec_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A spinning rank reads the clock once every SPIN_CLOCK_MASK + 1 polls of its mailbox. */
#define SPIN_CLOCK_MASK 255u

/* One stored message. */
typedef struct tmsg {
    int used;
    int src;
    exec_msg_key key;
    size_t bytes;
    unsigned char *data; /* [max_bytes] inside the box's buffer */
} tmsg;

/* One posted receive (post_recv) of a rank: where its message goes, and whether it came. */
typedef struct tpost {
    int src;
    exec_msg_key key;
    void *data;
    size_t bytes;
    int state;             /* P_* */
    size_t got;            /* P_BAD: the size the message had */
} tpost;

enum { P_WAIT = 0, P_DONE, P_BAD };

/* What a rank is blocked on. */
enum { W_NONE = 0, W_RECV, W_SEND, W_BARRIER, W_DONE };

/* The mailbox of one receiving rank. */
typedef struct tbox {
    tmsg *slot;            /* [cap] */
    int n;                 /* slots in use */
    pthread_cond_t cv;     /* signalled when the rank may proceed */
    int wait;              /* W_* */
    int wait_src;          /* W_RECV: the awaited message, W_SEND: the full box's rank */
    exec_msg_key wait_key;
    tpost *post;           /* [npost] the rank's posted receives (grown by pl_grow) */
    size_t npost, cap_post;
    _Alignas(EXEC_LINE_BYTES) _Atomic uint64_t arrivals; /* messages put in this box so far (own line) */
} tbox; /* sizeof is a multiple of 64 (the aligned member) */

/* State shared by all endpoints. */
typedef struct tboard {
    pthread_mutex_t mu;
    int p, cap;
    size_t max_bytes;
    double timeout_s;
    tbox *box;             /* [p] */
    unsigned char *buf;    /* [p, cap, max_bytes] message storage */
    int running;           /* ranks that have not finished */
    int blocked;           /* running ranks whose wait is unsatisfied */
    int aborted;
    pl_err why;
    int bar_count;
    _Atomic uint64_t bar_gen;
    _Atomic int abort_flag; /* = aborted, readable without the lock (spinners) */
    double spin_s;          /* longest spin before sleeping; 0 = sleep at once */
} tboard;

/* One endpoint (exec_transport.impl). */
typedef struct tend {
    tboard *b;
    int rank;
} tend;

/* Returns the endpoint's rank. */
static int t_rank(const exec_transport *t) { return ((const tend *)t->impl)->rank; }
/* Returns the number of ranks. */
static int t_size(const exec_transport *t) { return ((const tend *)t->impl)->b->p; }

/* Returns 1 when two keys are equal. */
static int key_eq(exec_msg_key a, exec_msg_key b) {
    return a.kind == b.kind && a.stage == b.stage && a.mb == b.mb;
}

/* Marks the run aborted with why (first reason wins) and wakes everybody; mu held. */
static void abort_locked(tboard *b, const pl_err *why) {
    if (!b->aborted) {
        b->aborted = 1;
        b->why = *why;
        atomic_store(&b->abort_flag, 1);
    }
    for (int r = 0; r < b->p; r++) pthread_cond_broadcast(&b->box[r].cv);
}

/* Describes what rank r waits for into buf. */
static void describe_wait(const tboard *b, int r, char *buf, size_t n) {
    const tbox *x = &b->box[r];
    if (x->wait == W_RECV)
        snprintf(buf, n, "rank %d waits for %s of stage %d microbatch %lld from rank %d", r,
                 exec_msg_what(x->wait_key.kind), x->wait_key.stage,
                 (long long)x->wait_key.mb, x->wait_src);
    else if (x->wait == W_SEND)
        snprintf(buf, n, "rank %d waits for room in rank %d's full mailbox", r, x->wait_src);
    else if (x->wait == W_BARRIER)
        snprintf(buf, n, "rank %d waits at the barrier", r);
    else
        snprintf(buf, n, "rank %d", r);
}

/* Called with mu held when one more rank blocks or finishes: when every running rank is blocked
 * nobody can make progress, so the run is aborted with a report. Returns 1 then. */
static int check_stuck(tboard *b) {
    if (b->running == 0 || b->blocked < b->running || b->aborted) return 0;
    pl_err why;
    pl_buf m;
    pl_buf_init(&m);
    pl_buf_puts(&m, "the run cannot make progress (every running rank waits): ");
    int first = 1;
    for (int r = 0; r < b->p; r++) {
        if (b->box[r].wait == W_NONE || b->box[r].wait == W_DONE) continue;
        char d[EXEC_WAIT_TEXT_MAX];
        describe_wait(b, r, d, sizeof d);
        pl_buf_printf(&m, "%s%s", first ? "" : "; ", d);
        first = 0;
    }
    pl_errf(&why, PL_EINPUT, "%s", m.data ? m.data : "stuck");
    pl_buf_free(&m);
    abort_locked(b, &why);
    return 1;
}

/* Called with mu held where every message sent so far must have been received (every rank at
 * the barrier between passes, or every rank finished): a message still in a mailbox was sent to
 * a rank that never received it, and the run is aborted naming both ranks and the message.
 * Returns 1 then. */
static int check_undelivered(tboard *b) {
    if (b->aborted) return 0;
    for (int r = 0; r < b->p; r++)
        for (int i = 0; i < b->cap && b->box[r].n > 0; i++) {
            const tmsg *m = &b->box[r].slot[i];
            if (!m->used) continue;
            pl_err why;
            pl_errf(&why, PL_EINPUT, "rank %d sent %s of stage %d microbatch %lld to rank %d, which never received them "
                    "(%d message%s left in its mailbox at the %s)", m->src,
                    exec_msg_what(m->key.kind), m->key.stage, (long long)m->key.mb, r,
                    b->box[r].n, b->box[r].n == 1 ? "" : "s", b->running ? "barrier between passes" : "end of the run");
            pl_err_set_rank(&why, m->src); /* the sender's error */
            abort_locked(b, &why);
            return 1;
        }
    return 0;
}

/* The longest wait a deadline holds (s): about 31 years. */
#define DEADLINE_MAX_S 1e9

/* Computes the absolute deadline timeout_s from now on CLOCK_REALTIME (condvar clock). */
static struct timespec deadline_of(double timeout_s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* a wait of more than DEADLINE_MAX_S never ends in practice, and a longer one would not fit
     * the deadline's seconds (pthread_cond_timedwait then fails at once, and the wait spins) */
    if (!(timeout_s < DEADLINE_MAX_S)) timeout_s = DEADLINE_MAX_S;
    double whole = (double)(long)timeout_s;
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec += (long)((timeout_s - whole) * EXEC_NS_PER_S);
    if (ts.tv_nsec >= EXEC_NS_PER_S) { ts.tv_sec++; ts.tv_nsec -= EXEC_NS_PER_S; }
    return ts;
}

/* Waits on rank r's condvar until *done() style state changes; returns PL_OK when woken by a
 * state change (the caller rechecks), PL_EINTERNAL on abort or timeout (e filled). mu held. */
static int wait_locked(tboard *b, int r, const struct timespec *dl, pl_err *e) {
    if (b->aborted) return pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg);
    int rc = pthread_cond_timedwait(&b->box[r].cv, &b->mu, dl);
    if (b->aborted) return pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg);
    if (rc == ETIMEDOUT) {
        char d[EXEC_WAIT_TEXT_MAX];
        describe_wait(b, r, d, sizeof d);
        pl_errf(e, PL_EINTERNAL, "timed out after %g s: %s", b->timeout_s, d);
        abort_locked(b, e);
        return PL_EINTERNAL;
    }
    return PL_OK;
}

/* Spins (mu not held) until *v differs from old, the run is aborted, or until_s passes. Returns
 * 1 when something changed (the caller locks and rechecks), 0 when the spin ran out. */
static int spin_until(tboard *b, const _Atomic uint64_t *v, uint64_t old, double until_s) {
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != old || atomic_load_explicit(&b->abort_flag, memory_order_relaxed))
            return 1;
        if ((i & SPIN_CLOCK_MASK) == 0 && pl_now_s() > until_s) return 0;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

/* Marks rank r blocked on w (counting it) and checks for a stuck run; mu held. */
static void block_locked(tboard *b, int r, int w) {
    b->box[r].wait = w;
    b->blocked++;
    check_stuck(b);
}

/* Clears rank r's wait (counting it); mu held. */
static void unblock_locked(tboard *b, int r) {
    if (b->box[r].wait == W_NONE || b->box[r].wait == W_DONE) return;
    b->box[r].wait = W_NONE;
    b->blocked--;
}

/* Copies a message into dst's mailbox, waiting (timed, abortable) while it is full; wakes dst
 * when it waits for exactly this message. Returns PL_OK or the error. */
static int t_send(exec_transport *t, int dst, exec_msg_key key, const void *data, size_t bytes,
                  pl_err *e) {
    tend *en = t->impl;
    tboard *b = en->b;
    if (dst < 0 || dst >= b->p) return pl_errf(e, PL_EINPUT, "send to rank %d of %d", dst, b->p);
    if (bytes > b->max_bytes)
        return pl_errf(e, PL_EINPUT, "message of %zu bytes exceeds the mailbox limit of %zu bytes", bytes, b->max_bytes);
    pthread_mutex_lock(&b->mu);
    tbox *x = &b->box[dst];
    if (!b->aborted) {
        /* a receive posted for it: the message goes straight into its buffer */
        for (size_t i = 0; i < x->npost; i++) {
            tpost *p = &x->post[i];
            if (p->state != P_WAIT || p->src != en->rank || !key_eq(p->key, key)) continue;
            if (bytes == p->bytes) {
                memcpy(p->data, data, bytes);
                p->state = P_DONE;
            } else {
                p->state = P_BAD;
                p->got = bytes;
            }
            atomic_fetch_add_explicit(&x->arrivals, 1, memory_order_release);
            if (x->wait == W_RECV && x->wait_src == en->rank && key_eq(x->wait_key, key)) {
                unblock_locked(b, dst);
                pthread_cond_broadcast(&x->cv);
            }
            pthread_mutex_unlock(&b->mu);
            return PL_OK;
        }
    }
    struct timespec dl = deadline_of(b->timeout_s);
    int rc = PL_OK;
    while (x->n == b->cap) {
        b->box[en->rank].wait_src = dst;
        block_locked(b, en->rank, W_SEND);
        rc = wait_locked(b, en->rank, &dl, e);
        unblock_locked(b, en->rank);
        if (rc != PL_OK) break;
    }
    if (rc == PL_OK && b->aborted) rc = pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg);
    if (rc == PL_OK) {
        int i = 0;
        while (x->slot[i].used) i++;
        tmsg *m = &x->slot[i];
        m->used = 1;
        m->src = en->rank;
        m->key = key;
        m->bytes = bytes;
        memcpy(m->data, data, bytes);
        x->n++;
        atomic_fetch_add_explicit(&x->arrivals, 1, memory_order_release);
        if (x->wait == W_RECV && x->wait_src == en->rank && key_eq(x->wait_key, key)) {
            unblock_locked(b, dst);
            pthread_cond_broadcast(&x->cv);
        }
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Returns the slot of rank r's mailbox holding the message key from src, -1 none; mu held. */
static int find_msg(const tboard *b, int r, int src, exec_msg_key key) {
    const tbox *x = &b->box[r];
    for (int i = 0; i < b->cap && x->n > 0; i++)
        if (x->slot[i].used && x->slot[i].src == src && key_eq(x->slot[i].key, key)) return i;
    return -1;
}

/* Takes the message in slot i of rank r's mailbox into data (a size other than bytes is an
 * error) and frees the slot, waking a sender blocked on the full box. Returns PL_OK or the
 * error; mu held. */
static int take_msg(tboard *b, int r, int i, void *data, size_t bytes, pl_err *e) {
    tbox *x = &b->box[r];
    tmsg *m = &x->slot[i];
    int rc = PL_OK;
    if (m->bytes != bytes) rc = pl_errf(e, PL_EINPUT, "message from rank %d has %zu bytes, expected %zu", m->src, m->bytes, bytes);
    else memcpy(data, m->data, bytes);
    m->used = 0;
    x->n--;
    /* a sender blocked on this full box may proceed */
    for (int q = 0; q < b->p; q++)
        if (b->box[q].wait == W_SEND && b->box[q].wait_src == r) {
            unblock_locked(b, q);
            pthread_cond_broadcast(&b->box[q].cv);
        }
    return rc;
}

/* One wait of a rank for a message (b->mu held): first spins on its arrivals counter with the
 * lock released (*spin_end = 0 once spun out: sleep from then on), then sleeps, counted as
 * blocked on (src, key), until woken or the deadline. Returns PL_OK (look again) or the error. */
static int recv_wait_step(tboard *b, int rank, int src, exec_msg_key key, struct timespec *dl, double *spin_end,
                          pl_err *e) {
    tbox *x = &b->box[rank];
    if (*spin_end > 0) {
        uint64_t seen = atomic_load_explicit(&x->arrivals, memory_order_relaxed);
        pthread_mutex_unlock(&b->mu);
        int changed = spin_until(b, &x->arrivals, seen, *spin_end);
        pthread_mutex_lock(&b->mu);
        if (!changed) *spin_end = 0;
        return PL_OK;
    }
    x->wait_src = src;
    x->wait_key = key;
    block_locked(b, rank, W_RECV);
    int rc = wait_locked(b, rank, dl, e);
    unblock_locked(b, rank);
    return rc;
}

/* Takes the message key from src out of this rank's mailbox into data, waiting (timed,
 * abortable) until it arrives; a size other than bytes is an error. Returns PL_OK or the error. */
static int t_recv(exec_transport *t, int src, exec_msg_key key, void *data, size_t bytes, pl_err *e) {
    tend *en = t->impl;
    tboard *b = en->b;
    pthread_mutex_lock(&b->mu);
    struct timespec dl = deadline_of(b->timeout_s);
    int rc = PL_OK;
    double spin_end = b->spin_s > 0 ? pl_now_s() + b->spin_s : 0;
    for (;;) {
        if (b->aborted) { rc = pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg); break; }
        int found = find_msg(b, en->rank, src, key);
        if (found >= 0) {
            rc = take_msg(b, en->rank, found, data, bytes, e);
            break;
        }
        rc = recv_wait_step(b, en->rank, src, key, &dl, &spin_end, e);
        if (rc != PL_OK) break;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Posts the receive of key from src into data: takes the message now when it is in the mailbox,
 * else records the receive, which t_send then fills. Returns PL_OK or the error (aborted, a
 * message of the wrong size, out of memory). */
static int t_post_recv(exec_transport *t, int src, exec_msg_key key, void *data, size_t bytes, pl_err *e) {
    tend *en = t->impl;
    tboard *b = en->b;
    pthread_mutex_lock(&b->mu);
    tbox *x = &b->box[en->rank];
    int rc = PL_OK;
    if (b->aborted) rc = pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg);
    if (rc == PL_OK) {
        tpost *np = pl_grow(x->post, &x->cap_post, x->npost, EXEC_FIRST_POSTS, sizeof *np);
        if (!np) rc = pl_errf(e, PL_ENOMEM, "out of memory posting a receive");
        else x->post = np;
    }
    if (rc == PL_OK) {
        int found = find_msg(b, en->rank, src, key);
        if (found >= 0) rc = take_msg(b, en->rank, found, data, bytes, e);
        if (rc == PL_OK) x->post[x->npost++] = (tpost){src, key, data, bytes, found >= 0 ? P_DONE : P_WAIT, 0};
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Completes the receive posted for (src, key): waits (spinning first as t_recv does; timed,
 * abortable, counted as a blocked rank) until its message is in its buffer. Returns PL_OK or the
 * error (a message of the wrong size, aborted, timed out, nothing posted). */
static int t_wait_recv(exec_transport *t, int src, exec_msg_key key, pl_err *e) {
    tend *en = t->impl;
    tboard *b = en->b;
    pthread_mutex_lock(&b->mu);
    tbox *x = &b->box[en->rank];
    size_t i = 0;
    while (i < x->npost && !(x->post[i].src == src && key_eq(x->post[i].key, key))) i++;
    if (i == x->npost) {
        pthread_mutex_unlock(&b->mu);
        return pl_errf(e, PL_EINTERNAL, "no receive of %s of stage %d microbatch %lld from rank %d was posted",
                       exec_msg_what(key.kind), key.stage, (long long)key.mb, src);
    }
    struct timespec dl = deadline_of(b->timeout_s);
    int rc = PL_OK;
    double spin_end = b->spin_s > 0 ? pl_now_s() + b->spin_s : 0;
    for (;;) {
        if (b->aborted) { rc = pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg); break; }
        tpost *p = &x->post[i];
        if (p->state == P_BAD) rc = pl_errf(e, PL_EINPUT, "message from rank %d has %zu bytes, expected %zu", src, p->got, p->bytes);
        if (p->state != P_WAIT) break;
        rc = recv_wait_step(b, en->rank, src, key, &dl, &spin_end, e);
        if (rc != PL_OK) break;
    }
    x->post[i] = x->post[--x->npost]; /* done with it, whatever happened */
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Waits until every rank arrived (generation counter; timed, abortable). Returns PL_OK or the
 * error. */
static int t_barrier(exec_transport *t, pl_err *e) {
    tend *en = t->impl;
    tboard *b = en->b;
    pthread_mutex_lock(&b->mu);
    int rc = PL_OK;
    if (b->aborted) rc = pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg);
    else if (b->bar_count + 1 == b->p && check_undelivered(b)) {
        rc = pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg); /* the others wake aborted */
    } else if (++b->bar_count == b->p) {
        b->bar_count = 0;
        b->bar_gen++;
        for (int r = 0; r < b->p; r++)
            if (b->box[r].wait == W_BARRIER) {
                unblock_locked(b, r);
                pthread_cond_broadcast(&b->box[r].cv);
            }
    } else {
        uint64_t gen = b->bar_gen;
        struct timespec dl = deadline_of(b->timeout_s);
        if (b->spin_s > 0) {
            pthread_mutex_unlock(&b->mu);
            spin_until(b, &b->bar_gen, gen, pl_now_s() + b->spin_s);
            pthread_mutex_lock(&b->mu);
            if (b->aborted) rc = pl_errf(e, PL_EINTERNAL, EXEC_ABORTED "%s", b->why.msg);
        }
        while (gen == b->bar_gen && rc == PL_OK) {
            block_locked(b, en->rank, W_BARRIER);
            rc = wait_locked(b, en->rank, &dl, e);
            unblock_locked(b, en->rank);
        }
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

/* Aborts the run for every rank with why. */
static void t_abort(exec_transport *t, const pl_err *why) {
    tboard *b = ((tend *)t->impl)->b;
    pthread_mutex_lock(&b->mu);
    abort_locked(b, why);
    pthread_mutex_unlock(&b->mu);
}

/* Marks this rank done, so that waits nobody can serve are detected. */
static void t_finished(exec_transport *t) {
    tend *en = t->impl;
    tboard *b = en->b;
    pthread_mutex_lock(&b->mu);
    b->box[en->rank].wait = W_DONE;
    b->running--;
    if (b->running == 0) check_undelivered(b);
    check_stuck(b);
    pthread_mutex_unlock(&b->mu);
}

exec_transport *exec_threads_transport_new(int p, int cap, size_t max_bytes, double timeout_s,
                                           pl_err *e) {
    if (p < 1 || cap < 1) {
        pl_errf(e, PL_EINPUT, "transport needs at least one rank and one mailbox slot");
        return NULL;
    }
    tboard *b = pl_calloc(1, sizeof *b);
    exec_transport *t = pl_calloc((size_t)p, sizeof *t);
    tend *en = pl_calloc((size_t)p, sizeof *en);
    if (b) {
        b->box = aligned_alloc(_Alignof(tbox), (size_t)p * sizeof *b->box); /* 64-byte aligned boxes */
        if (b->box) memset(b->box, 0, (size_t)p * sizeof *b->box);
        b->buf = pl_calloc((size_t)p * (size_t)cap, max_bytes ? max_bytes : 1);
    }
    if (!b || !t || !en || !b->box || !b->buf) {
        if (b) { free(b->box); free(b->buf); }
        free(b);
        free(t);
        free(en);
        pl_errf(e, PL_ENOMEM, "out of memory making %d mailboxes of %d messages", p, cap);
        return NULL;
    }
    /* adaptive (glibc): a rank that finds the lock held spins a little before it sleeps. The
     * sections are short, and a sleep on a contended lock costs a futex wake-up (3-4 us on a VM)
     * where the other rank held the lock for well under a microsecond */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
#if defined(__GLIBC__)
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(&b->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    b->p = p;
    b->cap = cap;
    b->max_bytes = max_bytes;
    b->timeout_s = timeout_s > 0 ? timeout_s : EXEC_DEFAULT_TIMEOUT_S;
    b->running = p;
    for (int r = 0; r < p; r++) {
        tbox *x = &b->box[r];
        pthread_cond_init(&x->cv, NULL);
        x->slot = pl_calloc((size_t)cap, sizeof *x->slot);
        if (!x->slot) {
            for (int q = 0; q <= r; q++) { free(b->box[q].slot); pthread_cond_destroy(&b->box[q].cv); }
            pthread_mutex_destroy(&b->mu);
            free(b->box); free(b->buf); free(b); free(t); free(en);
            pl_errf(e, PL_ENOMEM, "out of memory making mailboxes");
            return NULL;
        }
        for (int i = 0; i < cap; i++) x->slot[i].data = b->buf + ((size_t)r * cap + i) * max_bytes;
        en[r].b = b;
        en[r].rank = r;
        t[r].impl = &en[r];
        t[r].rank = t_rank;
        t[r].size = t_size;
        t[r].send = t_send;
        t[r].recv = t_recv;
        t[r].barrier = t_barrier;
        t[r].abort = t_abort;
        t[r].finished = t_finished;
        t[r].post_recv = t_post_recv;
        t[r].wait_recv = t_wait_recv;
    }
    return t;
}

void exec_threads_transport_spin(exec_transport *t, double spin_s) {
    tboard *b = ((tend *)t[0].impl)->b;
    pthread_mutex_lock(&b->mu);
    b->spin_s = spin_s > 0 ? spin_s : 0;
    pthread_mutex_unlock(&b->mu);
}

int exec_threads_transport_why(exec_transport *t, pl_err *why) {
    tboard *b = ((tend *)t[0].impl)->b;
    pthread_mutex_lock(&b->mu);
    int a = b->aborted;
    if (a && why) *why = b->why;
    pthread_mutex_unlock(&b->mu);
    return a;
}

void exec_threads_transport_free(exec_transport *t, int p) {
    if (!t) return;
    tend *en = t[0].impl;
    tboard *b = en->b;
    for (int r = 0; r < p; r++) {
        free(b->box[r].slot);
        free(b->box[r].post);
        pthread_cond_destroy(&b->box[r].cv);
    }
    pthread_mutex_destroy(&b->mu);
    free(b->box);
    free(b->buf);
    free(b);
    free(en);
    free(t);
}
