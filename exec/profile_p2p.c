/* profile_p2p.c: times the threads transport's point-to-point hand-off of a stage boundary's
 * activation between two ranks (a SEND's mailbox post, the wake-up of the receiving worker and
 * its copy out: what a pipeline's SEND/RECV costs on the critical path) by a ping-pong between
 * two threads placed as exec_run places its ranks, at sizes of 1, 4 and 16 boundaries (1/16, 1/4
 * and 1 of a boundary above 4 MiB), and fits the one-way times to cost_link_s's latency and
 * bandwidth (cost_link_fit). With one clock on both sides (threads; MPI processes on one host)
 * the one-way time is the receiver's completion minus the sender's stamp (a receiver that came
 * to its wait later marks the round late, and the fit leaves such rounds out where it can),
 * while the sender
 * computes as a run's does, each side having streamed through a rank's weights and gradients
 * before (exec_p2p_sweep: a run's hand-off comes after compute); else half the round trip.
 * Beside it, the hand-off's time on the
 * ranks' own timelines, which holds them from their compute (the simulator's send_hold_s and
 * post_hold_s): the sender's send call, and a post that finds its message already there. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "exec_int.h"
#include "platform.h"

#define P2P_RANKS 2
#define P2P_SIZES EXEC_P2P_SIZES /* 1, 4 and 16 boundaries: a copy the fit can see */
#define P2P_MIN_ROUNDS 9  /* round trips per size at least (the median is kept) */
#define P2P_MAX_ROUNDS 31 /* and at most */
#define P2P_BIG_BYTES ((size_t)4 << 20) /* boundaries above: 1/16, 1/4 and 1 boundary (memory) */
/* A rank's sweep at most (exec_int.h: exec_p2p_sweep): 64 MiB, twice the 32 MiB L3 of a Zen 5
 * core complex (the validation host's CPU family; its VM reports no true L3 size); a larger one
 * leaves the caches little colder and takes longer and more memory. */
#define P2P_SWEEP_MAX_FLOATS (((size_t)64 << 20) / sizeof(float))

typedef struct p2p_shared {
    exec_transport *t;
    size_t bytes[P2P_SIZES];
    int rounds, pin, ncpus, cpus[P2P_RANKS], small_pages;
    size_t sweep_floats; /* each rank's sweep (exec_p2p_sweep_floats) */
    double *rt_s; /* [EXEC_P2P_SERIES * P2P_SIZES * rounds] rank 0's times (exec_p2p_side: one way here) */
} p2p_shared;

/* Rank 0's stamp of its send travels in the activation's first bytes; rank 1 returns the one-way
 * time it saw in the gradient's. */
static void put_s(void *buf, double v) { memcpy(buf, &v, sizeof v); }
static double get_s(const void *buf) {
    double v;
    memcpy(&v, buf, sizeof v);
    return v;
}

/* Streams through a rank's sweep (adds to each float, as a backward accumulates its gradients):
 * what a run's compute does to the caches between two hand-offs. */
static void sweep(exec_p2p_sweep *sw) {
    for (size_t i = 0; i < sw->n; i++) sw->p[i] += 1.0f;
}

/* Sweeps once, then spins on the clock until s seconds have passed, out of the transport: a
 * sender computing after its SEND. */
static void busy_for(exec_p2p_sweep *sw, double s) {
    double t0 = pl_now_s();
    sweep(sw);
    while (pl_now_s() - t0 < s) {}
}

size_t exec_p2p_sweep_floats(const exec_config *cfg) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    size_t blocks = ((size_t)(cfg->layers > 0 ? cfg->layers : 1) + P2P_RANKS - 1) / P2P_RANKS;
    size_t n = 2 * blocks * exec_block_floats(&d); /* weights and their gradients */
    return n < P2P_SWEEP_MAX_FLOATS ? n : P2P_SWEEP_MAX_FLOATS;
}

int exec_p2p_one_way(int one_clock, const size_t *bytes) { return one_clock && bytes[0] >= sizeof(double); /* the stamp's room */ }

int exec_p2p_side(exec_transport *t, int me, const size_t *bytes, int rounds, int one_way, void *buf, exec_p2p_sweep *sw,
                  double *rt_s, pl_err *e) {
    int per = rounds + 1, total = P2P_SIZES * per, posted = t->post_recv && t->wait_recv;
    unsigned char *out = buf, *in = out + bytes[P2P_SIZES - 1];
    one_way = exec_p2p_one_way(one_way, bytes);
    double busy_s = 0;
    int rc = PL_OK;
    /* receives as the run's workers make them where the transport can: posted ahead of the data
     * (post_recv), completed where it is needed (wait_recv); rank 1 posts each activation's a
     * round ahead, rank 0 each gradient's before its send */
    if (me == 1 && posted) rc = t->post_recv(t, 0, (exec_msg_key){EXEC_MSG_ACT, 1, 0}, in, bytes[0], e);
    for (int i = 0; rc == PL_OK && i < total; i++) {
        int k = i / per, j = i % per - 1; /* j -1: the size's untimed round trip */
        size_t n = bytes[k];
        exec_msg_key act = {EXEC_MSG_ACT, 1, i}, grad = {EXEC_MSG_GRAD, 0, i};
        if (me == 0) {
            /* timed rounds with one clock: the sender computes while its message travels, as a
             * run's does (twice the size's untimed round trip, so that the gradient lands
             * meanwhile), and posts the gradient's receive after that: a post that finds its
             * message there and takes it out */
            int late = one_way && j >= 0;
            if (posted && !late) rc = t->post_recv(t, 1, grad, in, n, e);
            if (late) sweep(sw); /* the send comes after compute, as a run's SEND does */
            double t0 = pl_now_s();
            if (one_way) put_s(out, t0);
            if (rc == PL_OK) rc = t->send(t, 1, act, out, n, e);
            double t1 = pl_now_s();
            if (rc == PL_OK && late) busy_for(sw, busy_s);
            double p0 = pl_now_s();
            if (rc == PL_OK && posted && late) rc = t->post_recv(t, 1, grad, in, n, e);
            double p1 = pl_now_s();
            if (rc == PL_OK) rc = posted ? t->wait_recv(t, 1, grad, e) : t->recv(t, 1, grad, in, n, e);
            double rt = pl_now_s() - t0;
            if (j < 0) busy_s = 2 * rt;
            if (j >= 0) {
                size_t at = (size_t)k * (size_t)rounds + (size_t)j, series = (size_t)P2P_SIZES * (size_t)rounds;
                rt_s[EXEC_P2P_TRIP * series + at] = one_way ? get_s(in) : rt;
                rt_s[EXEC_P2P_SEND * series + at] = t1 - t0;
                rt_s[EXEC_P2P_POST * series + at] = posted && late ? p1 - p0 : 0;
            }
        } else {
            /* a receiver still computing when the activation comes would add the rest of its
             * compute to the stamp's time: it returns such a round's time from its own wait,
             * negative (exec_p2p_fit leaves it out where enough rounds found it waiting) */
            double ready = pl_now_s();
            rc = posted ? t->wait_recv(t, 0, act, e) : t->recv(t, 0, act, in, n, e);
            double done = pl_now_s(), from = one_way ? get_s(in) : 0;
            double ow = one_way && ready > from ? copysign(done - ready, -1.0) : done - from;
            if (rc == PL_OK && posted && i + 1 < total)
                rc = t->post_recv(t, 0, (exec_msg_key){EXEC_MSG_ACT, 1, i + 1}, in, bytes[(i + 1) / per], e);
            if (one_way) put_s(out, ow);
            if (rc == PL_OK) rc = t->send(t, 0, grad, out, n, e);
            if (one_way && j >= 0 && (i + 1) % per != 0) sweep(sw); /* computes before it waits for the next timed */
        }
    }
    return rc;
}

/* Rank me's thread: its side of the ping-pong (exec_p2p_side), pinned as exec_run pins. */
static void *p2p_main(void *arg) {
    exec_pair_thread *a = arg;
    p2p_shared *sh = a->sh;
    if (sh->pin && sh->ncpus > 0) exec_platform_pin_self(sh->cpus[a->me % sh->ncpus]);
    exec_transport *t = &sh->t[a->me];
    void *buf = calloc(2, sh->bytes[P2P_SIZES - 1]); /* what it sends, then what it receives */
    exec_p2p_sweep sw = {exec_lines_alloc(sh->sweep_floats, sh->small_pages), sh->sweep_floats};
    if (!buf || !sw.p) {
        free(buf);
        free(sw.p);
        a->rc = pl_errf(&a->err, PL_ENOMEM, "out of memory for the point-to-point profile");
        t->abort(t, &a->err); /* the other rank's wait fails at once */
        return NULL;
    }
    int rc = exec_p2p_side(t, a->me, sh->bytes, sh->rounds, 1, buf, &sw, sh->rt_s, &a->err); /* threads: one clock */
    if (rc != PL_OK) t->abort(t, &a->err);
    a->rc = rc;
    free(buf);
    free(sw.p);
    return NULL;
}

/* A thread that did not start: a started rank 0 stops waiting for its partner. */
static void p2p_started(void *arg, int ok, pl_err *why) {
    p2p_shared *sh = arg;
    if (!ok) sh->t[0].abort(&sh->t[0], why);
}

int exec_p2p_fit(const size_t *bytes, const double *t_s, int rounds, double ways, double *latency_s, double *bandwidth_Bps,
                 pl_err *e) {
    double b[P2P_SIZES], t[P2P_SIZES], v[P2P_MAX_ROUNDS];
    if (rounds < 1 || rounds > P2P_MAX_ROUNDS) return pl_errf(e, PL_EINPUT, "%d rounds a size (1 to %d)", rounds, P2P_MAX_ROUNDS);
    for (int k = 0; k < P2P_SIZES; k++) {
        const double *s = t_s + k * rounds;
        size_t on = 0;
        for (int j = 0; j < rounds; j++)
            if (!signbit(s[j])) v[on++] = s[j];
        if (on < EXEC_P2P_ON_TIME_MIN) { /* too few rounds found their receiver waiting: all of them */
            on = 0;
            for (int j = 0; j < rounds; j++) v[on++] = fabs(s[j]);
        }
        b[k] = (double)bytes[k];
        t[k] = exec_median(v, on) / ways;
    }
    return cost_link_fit(b, t, P2P_SIZES, latency_s, bandwidth_Bps, e);
}

int exec_p2p_fit_all(const size_t *bytes, const double *rt_s, int rounds, int one_way, exec_p2p *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    size_t series = (size_t)P2P_SIZES * (size_t)rounds;
    int rc = exec_p2p_fit(bytes, rt_s + EXEC_P2P_TRIP * series, rounds, one_way ? 1 : 2, &out->latency_s, &out->Bps, e);
    if (rc == PL_OK) rc = exec_p2p_fit(bytes, rt_s + EXEC_P2P_SEND * series, rounds, 1, &out->send_s, &out->send_Bps, e);
    if (rc == PL_OK && one_way)
        rc = exec_p2p_fit(bytes, rt_s + EXEC_P2P_POST * series, rounds, 1, &out->post_s, &out->post_Bps, e);
    return rc;
}

void exec_p2p_plan(const exec_config *cfg, int reps, size_t *bytes, int *rounds) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    size_t boundary = (size_t)d.b * (size_t)d.h * sizeof(float); /* a microbatch's rows, as exec_run's messages */
    size_t base = boundary > P2P_BIG_BYTES ? boundary / 16 : boundary; /* a big boundary is the largest size */
    for (int k = 0; k < P2P_SIZES; k++) bytes[k] = base << (2 * k);
    *rounds = reps < P2P_MIN_ROUNDS ? P2P_MIN_ROUNDS : reps > P2P_MAX_ROUNDS ? P2P_MAX_ROUNDS : reps;
}

/* exec_int.h. Each rank's send and receive buffers (p2p_main), a mailbox slot of the largest
 * size and its sweep each. */
double exec_p2p_profile_bytes(const exec_config *cfg, int reps) {
    size_t bytes[P2P_SIZES];
    int rounds;
    exec_p2p_plan(cfg, reps, bytes, &rounds);
    double sweep = (double)exec_lines_bytes(exec_p2p_sweep_floats(cfg), cfg->small_pages);
    return P2P_RANKS * (3.0 * (double)bytes[P2P_SIZES - 1] + sweep) +
           EXEC_P2P_SERIES * P2P_SIZES * (double)rounds * sizeof(double);
}

int exec_profile_p2p(const exec_config *cfg, int reps, exec_p2p *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    p2p_shared sh;
    memset(&sh, 0, sizeof sh);
    exec_p2p_plan(cfg, reps, sh.bytes, &sh.rounds);
    sh.ncpus = exec_platform_cores(sh.cpus, P2P_RANKS);
    sh.pin = cfg->pin; /* as exec_run pins its ranks */
    sh.sweep_floats = exec_p2p_sweep_floats(cfg);
    sh.small_pages = cfg->small_pages;
    sh.rt_s = pl_calloc((size_t)(EXEC_P2P_SERIES * P2P_SIZES * sh.rounds), sizeof *sh.rt_s);
    if (!sh.rt_s) return pl_errf(e, PL_ENOMEM, "out of memory");
    sh.t = exec_threads_transport_new(P2P_RANKS, 1, sh.bytes[P2P_SIZES - 1], cfg->timeout_s, e);
    int rc = sh.t ? PL_OK : e->code;
    if (sh.t && sh.ncpus >= P2P_RANKS) exec_threads_transport_spin(sh.t, EXEC_SPIN_S); /* as exec_run: a core each */
    if (rc == PL_OK) rc = exec_pair_run(&sh, p2p_main, p2p_started, "point-to-point profile", e);
    int one_way = exec_p2p_one_way(1, sh.bytes); /* threads: one clock */
    if (rc == PL_OK) rc = exec_p2p_fit_all(sh.bytes, sh.rt_s, sh.rounds, one_way, out, e);
    if (rc) pl_err_prefix(e, "profile of the point-to-point hand-off: ");
    if (sh.t) exec_threads_transport_free(sh.t, P2P_RANKS);
    free(sh.rt_s);
    return rc;
}
