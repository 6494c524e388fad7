/* gen_zb.c: split-backward generators: Zero Bubble ZB-H1, ZB-H2, ZB-V, and DualPipeV. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

/* Compute actions per (stage, microbatch) at most: F, I and W (an upper bound for DualPipeV,
 * whose overlapped pairs and full backwards take fewer). */
#define ZB_ACTIONS_PER_CELL 3

/* Checks o for generator `name` taking v stages per rank (chunks 0 or v; 1 is also accepted
 * when v is 1) and at least min_m microbatches (min_why says why). Every check happens here,
 * before anything is allocated. Returns PL_OK or PL_EINPUT with a message naming the rule. */
static int zb_check_sizes(const char *name, const sched_gen_opts *o, int v, int min_m,
                    const char *min_why, sched_gen_params *g, pl_err *e) {
    int rc = sched_gen_check_counts(name, o, e);
    if (rc != PL_OK) return rc;
    if (v == 1 && o->chunks != 0 && o->chunks != 1)
        return pl_errf(e, PL_EINPUT,
                       "%s: --chunks %d: the schedule holds one stage per rank, so --chunks is 1 "
                       "(zbv and dualpipev hold two)",
                       name, o->chunks);
    if (v == 2 && o->chunks != 0 && o->chunks != 2)
        return pl_errf(e, PL_EINPUT,
                       "%s: --chunks %d: the V placement puts exactly two stages on every rank, so "
                       "--chunks is 2",
                       name, o->chunks);
    if ((rc = sched_gen_check_policies(name, o, e)) != PL_OK) return rc;
    g->p = o->ranks;
    g->m = o->microbatches;
    g->v = v;
    g->iters = o->iterations > 0 ? o->iterations : 1;
    if (g->m < min_m)
        return pl_errf(e, PL_EINPUT, "%s: --microbatches %d must be >= %d because %s", name, g->m,
                       min_m, min_why);
    if ((rc = sched_gen_check_microbatches(name, g, e)) != PL_OK) return rc;
    int64_t stages = (int64_t)g->p * v;
    if (stages > SCHED_MAX_STAGES)
        return pl_errf(e, PL_EINPUT, "%s: %d ranks need %lld stages, more than the limit of %d",
                       name, g->p, (long long)stages, SCHED_MAX_STAGES);
    return sched_gen_check_actions(name, g, ZB_ACTIONS_PER_CELL, e);
}

/* zb_check_sizes, then the memory the generator's lists take (sched_gen_bytes) against budget b.
 * Returns PL_OK or PL_EINPUT. */
static int zb_check(const char *name, const sched_gen_opts *o, int v, int min_m,
                    const char *min_why, const sched_budget *b, sched_gen_params *g, pl_err *e) {
    int rc = zb_check_sizes(name, o, v, min_m, min_why, g, e);
    if (rc != PL_OK) return rc;
    return sched_gen_check_memory(name, b, g, ZB_ACTIONS_PER_CELL, e);
}

/* Allocates the empty flush schedule for checked parameters g: loop placement with p stages
 * when g->v is 1, V placement with 2p stages when it is 2. Returns NULL with e filled when
 * sched_new fails. */
static sched *zb_begin(const char *name, const sched_gen_params *g, sched_recompute rc, pl_err *e) {
    sched *s = sched_new(g->p, g->p * g->v, g->m, g->v == 2 ? SCHED_PLACE_V : SCHED_PLACE_LOOP,
                         NULL, e);
    if (!s) return NULL;
    if (sched_gen_reserve(s, g, ZB_ACTIONS_PER_CELL) != PL_OK) {
        sched_free(s);
        pl_errf(e, PL_ENOMEM, "%s: out of memory for %d ranks' actions", name, g->p);
        return NULL;
    }
    snprintf(s->kind, sizeof s->kind, "%s", name);
    s->chunks = g->v;
    s->iterations = g->iters;
    s->weights = SCHED_WEIGHTS_FLUSH;
    s->recompute = rc;
    return s;
}

/* Appends actions to one rank for one iteration. Microbatch indices given to it are local to
 * the iteration; those >= limit are dropped (generators that pad a short iteration up to the
 * size their pattern needs use this: removing whole microbatches from a deadlock-free order
 * keeps it deadlock-free). The first failure sticks in rc and later appends do nothing. */
typedef struct emitter {
    sched *s;
    int rank;
    int mb0;   /* global index of the iteration's microbatch 0 */
    int limit; /* microbatches that exist in the iteration */
    int rc;
    pl_err *e;
} emitter;

/* Appends a plain action; records PL_ENOMEM (with e filled) on failure. */
static void put(emitter *em, sched_kind k, int stage, int mb) {
    if (em->rc != PL_OK || mb >= em->limit) return;
    if (sched_push(em->s, em->rank, sched_act(k, stage, em->mb0 + mb)) != PL_OK)
        em->rc = pl_errf(em->e, PL_ENOMEM, "%s: out of memory while generating rank %d",
                         em->s->kind, em->rank);
}

/* Appends an overlapped forward (f_stage, f_mb) and backward (bk of b_stage, b_mb). */
static void put_overlap(emitter *em, int f_stage, int f_mb, sched_kind bk, int b_stage,
                        int b_mb) {
    if (em->rc != PL_OK) return;
    sched_action a = sched_overlap(f_stage, em->mb0 + f_mb, bk, b_stage, em->mb0 + b_mb);
    if (sched_push(em->s, em->rank, a) != PL_OK)
        em->rc = pl_errf(em->e, PL_ENOMEM, "%s: out of memory while generating rank %d",
                         em->s->kind, em->rank);
}

/* Frees s and returns NULL: the common failure exit. */
static sched *zb_fail(sched *s) {
    sched_free(s);
    return NULL;
}

/* The per-rank pattern of a generator: appends one iteration of rank r to em. */
typedef void (*rank_fn)(emitter *em, const sched_gen_params *g, int r);

/* Runs fn for every rank and iteration of a fresh schedule. Returns the schedule, or NULL
 * with e filled on allocation failure. */
static sched *zb_build(const char *name, const sched_gen_params *g, sched_recompute rc, rank_fn fn,
                       pl_err *e) {
    sched *s = zb_begin(name, g, rc, e);
    if (!s) return NULL;
    for (int r = 0; r < g->p; r++)
        for (int k = 0; k < g->iters; k++) {
            emitter em = {s, r, k * g->m, g->m, PL_OK, e};
            fn(&em, g, r);
            if (em.rc != PL_OK) return zb_fail(s);
        }
    return s;
}

/* ZB-H1 (Qi et al., ICLR 2024, Fig. 3 top; the order of PyTorch's ZB1P with one stage per
 * rank and of sail-sg's ZeroBubbleH1Pipeline): rank r warms up with min(p-1-r, m) forwards as
 * in 1F1B, then repeats F, I and, from its (r+1)-th repetition on, the oldest pending W; the
 * cool-down does I then W, and the W passes still pending close the iteration. Delaying W by r
 * repetitions gives every rank the same min(m, p) microbatches in flight (F done, W not done)
 * while activations held until I stay at 1F1B's p-r. With unit costs and m >= p the makespan
 * is 3m + p - 1 and rank r idles p-1-r steps between its first and last action: the paper's
 * bubble (p-1)(tF+tB-tW) on the first rank. */
static void zb_h1_rank(emitter *em, const sched_gen_params *g, int r) {
    int p = g->p, m = g->m, st = r;
    int warm = p - 1 - r < m ? p - 1 - r : m;
    int f = 0, i = 0, w = 0, k = 0;
    for (; f < warm; f++) put(em, SCHED_F, st, f);
    for (; f < m; k++) {
        put(em, SCHED_F, st, f++);
        put(em, SCHED_I, st, i++);
        if (k >= r) put(em, SCHED_W, st, w++);
    }
    for (; i < m; k++) {
        put(em, SCHED_I, st, i++);
        if (k >= r) put(em, SCHED_W, st, w++);
    }
    for (; w < m; w++) put(em, SCHED_W, st, w);
}

/* ZB-H2 (Qi et al., Fig. 3 bottom): rank r warms up with 2(p-r)-1 forwards (2p-1 on the first
 * rank, the paper's peak), repeats I, W, F while the first rank's forwards last, then defers
 * W: 2r repetitions of I, F, then 2(p-r)-1 of I, W, then the 2r deferred W passes. The last
 * rank ends with 2p-1 W passes, mirroring the first rank's 2p-1 warm-up forwards: the
 * trapezoid becomes a parallelogram in which rank r is busy without a gap from step r to
 * 3m + r under unit costs (the paper's bubble (p-1)(tF+tB-2tW) = 0), makespan 3m + p - 1.
 * The pattern needs n = 2p-1 microbatches; smaller m is served by building it for 2p-1 and
 * dropping the microbatches that do not exist. */
static void zb_h2_rank(emitter *em, const sched_gen_params *g, int r) {
    int p = g->p, st = r;
    int n = g->m > 2 * p - 1 ? g->m : 2 * p - 1;
    int f = 0, i = 0, w = 0;
    for (int j = 0; j < 2 * (p - r) - 1; j++) put(em, SCHED_F, st, f++);
    for (int j = 0; j < n - 2 * p + 1; j++) {
        put(em, SCHED_I, st, i++);
        put(em, SCHED_W, st, w++);
        put(em, SCHED_F, st, f++);
    }
    for (int j = 0; j < 2 * r; j++) {
        put(em, SCHED_I, st, i++);
        put(em, SCHED_F, st, f++);
    }
    for (int j = 0; j < 2 * (p - r) - 1; j++) {
        put(em, SCHED_I, st, i++);
        put(em, SCHED_W, st, w++);
    }
    for (int j = 0; j < 2 * r; j++) put(em, SCHED_W, st, w++);
}

/* ZB-V (Qi et al., Section 6; the order of PyTorch's ScheduleZBVZeroBubble): rank r holds
 * chunk 0 = stage r and chunk 1 = stage 2p-1-r. Warm-up: 2(p-r)-1 chunk-0 forwards, r pairs
 * (F1, F0), then p-r triples (F1, I1, W1). Steady: (F0, I0, W0, F1, I1, W1) until both chunks
 * have run n forwards, n = max(m, 2p-1). Cool-down: r pairs (I0, I1), p-r pairs (I0, W0),
 * then the pending W of chunk 1 and of chunk 0. Microbatches >= m are dropped, as PyTorch
 * does. With unit costs and m >= 2p-1 every rank is busy without a gap from step r to 6m + r
 * (zero bubble), and 2p chunk activations (one 1F1B's worth of memory) are in flight. */
static void zbv_rank(emitter *em, const sched_gen_params *g, int r) {
    int p = g->p, s0 = r, s1 = 2 * p - 1 - r;
    int n = g->m > 2 * p - 1 ? g->m : 2 * p - 1;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    for (int j = 0; j < 2 * (p - r) - 1; j++) put(em, SCHED_F, s0, f0++);
    for (int j = 0; j < r; j++) {
        put(em, SCHED_F, s1, f1++);
        put(em, SCHED_F, s0, f0++);
    }
    for (int j = 0; j < p - r; j++) {
        put(em, SCHED_F, s1, f1++);
        put(em, SCHED_I, s1, b1);
        put(em, SCHED_W, s1, b1++);
    }
    while (f1 < f0 || f0 < n) {
        if (f0 < n) put(em, SCHED_F, s0, f0++);
        put(em, SCHED_I, s0, b0);
        put(em, SCHED_W, s0, b0++);
        put(em, SCHED_F, s1, f1++);
        put(em, SCHED_I, s1, b1);
        put(em, SCHED_W, s1, b1++);
    }
    int w0 = b0, w1 = b1;
    for (int j = 0; j < r; j++) {
        put(em, SCHED_I, s0, b0++);
        put(em, SCHED_I, s1, b1++);
    }
    for (int j = 0; j < p - r; j++) {
        put(em, SCHED_I, s0, b0++);
        put(em, SCHED_W, s0, w0++);
    }
    while (w1 < b1) put(em, SCHED_W, s1, w1++);
    while (w0 < b0) put(em, SCHED_W, s0, w0++);
}

/* State of one DualPipeV rank: the next microbatch of each kind per local chunk and the FIFO
 * of weight passes owed by input-only backwards. */
typedef struct dpv_state {
    int stage[2];  /* chunk 0 = stage r, chunk 1 = stage 2p-1-r */
    int f[2];      /* next forward */
    int b[2];      /* next backward (B or I) */
    int *wq_chunk; /* pending W: chunk and microbatch, in I order */
    int *wq_mb;
    int wq_head, wq_tail;
} dpv_state;

/* Appends the next forward of chunk c. */
static void dpv_f(emitter *em, dpv_state *d, int c) {
    put(em, SCHED_F, d->stage[c], d->f[c]++);
}

/* Appends the next backward of chunk c: full B, or I with its W queued for later. */
static void dpv_b(emitter *em, dpv_state *d, int c, int split) {
    int mb = d->b[c]++;
    put(em, split ? SCHED_I : SCHED_B, d->stage[c], mb);
    if (split) {
        d->wq_chunk[d->wq_tail] = c;
        d->wq_mb[d->wq_tail++] = mb;
    }
}

/* Appends the oldest queued W, if any. */
static void dpv_w(emitter *em, dpv_state *d) {
    if (d->wq_head == d->wq_tail) return;
    int c = d->wq_chunk[d->wq_head], mb = d->wq_mb[d->wq_head++];
    put(em, SCHED_W, d->stage[c], mb);
}

/* Appends the next forward of chunk fc overlapped with the next full backward of chunk bc. */
static void dpv_overlap(emitter *em, dpv_state *d, int fc, int bc) {
    put_overlap(em, d->stage[fc], d->f[fc]++, SCHED_B, d->stage[bc], d->b[bc]++);
}

/* DualPipeV (DeepSeek's DualPipe folded into a V, in the order of PyTorch's
 * ScheduleDualPipeV): with chunk 0 = stage r and chunk 1 = stage 2p-1-r, rank r runs
 * 1. 2(p-r-1) F0; 2. r+1 pairs (F0, F1); 3. p-r-1 triples (I1, W, F1);
 * 4. m-2p+r+1 pairs of overlaps (F0 with B1, F1 with B0), the last rank's first one plain;
 * 5. p-r-1 pairs (B1, F1 overlapped with B0); 6. r+1 pairs (B1, B0), switching to I for the
 * rest of the iteration half-way (before B1 on odd ranks, before B0 on even ones);
 * 7. p-r-1 pairs (W, B0 or I0); 8. the remaining W passes (r+1 of them). Needs m >= 2p. */
static void dualpipev_rank(emitter *em, const sched_gen_params *g, int r) {
    int p = g->p, m = g->m;
    dpv_state d = {{r, 2 * p - 1 - r}, {0, 0}, {0, 0}, NULL, NULL, 0, 0};
    d.wq_chunk = calloc((size_t)2 * (size_t)m, sizeof *d.wq_chunk);
    d.wq_mb = calloc((size_t)2 * (size_t)m, sizeof *d.wq_mb);
    if (!d.wq_chunk || !d.wq_mb) {
        em->rc = pl_errf(em->e, PL_ENOMEM, "dualpipev: out of memory while generating rank %d", r);
        free(d.wq_chunk);
        free(d.wq_mb);
        return;
    }
    for (int j = 0; j < 2 * (p - r - 1); j++) dpv_f(em, &d, 0);
    for (int j = 0; j < r + 1; j++) {
        dpv_f(em, &d, 0);
        dpv_f(em, &d, 1);
    }
    for (int j = 0; j < p - r - 1; j++) {
        dpv_b(em, &d, 1, 1);
        dpv_w(em, &d);
        dpv_f(em, &d, 1);
    }
    for (int j = 0; j < m - 2 * p + r + 1; j++) {
        if (j == 0 && r == p - 1) {
            dpv_f(em, &d, 0);
            dpv_b(em, &d, 1, 0);
        } else {
            dpv_overlap(em, &d, 0, 1);
        }
        dpv_overlap(em, &d, 1, 0);
    }
    for (int j = 0; j < p - r - 1; j++) {
        dpv_b(em, &d, 1, 0);
        dpv_overlap(em, &d, 1, 0);
    }
    int split = 0, half = (r + 1) / 2;
    for (int j = 0; j < r + 1; j++) {
        if (j == half && r % 2 == 1) split = 1;
        dpv_b(em, &d, 1, split);
        if (j == half && r % 2 == 0) split = 1;
        dpv_b(em, &d, 0, split);
    }
    for (int j = 0; j < p - r - 1; j++) {
        dpv_w(em, &d);
        dpv_b(em, &d, 0, split);
    }
    for (int j = 0; j < r + 1; j++) dpv_w(em, &d);
    free(d.wq_chunk);
    free(d.wq_mb);
}

/* Returns the ZB-H1 schedule (see zb_h1_rank), or NULL with e filled. Serves every m >= 1. */
sched *sched_gen_zb_h1(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (zb_check("zb-h1", o, 1, 1, "", b, &g, e) != PL_OK) return NULL;
    return zb_build("zb-h1", &g, o->recompute, zb_h1_rank, e);
}

/* Returns the ZB-H2 schedule (see zb_h2_rank), or NULL with e filled. Serves every m >= 1;
 * the zero-bubble parallelogram needs m >= 2p-1. */
sched *sched_gen_zb_h2(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (zb_check("zb-h2", o, 1, 1, "", b, &g, e) != PL_OK) return NULL;
    return zb_build("zb-h2", &g, o->recompute, zb_h2_rank, e);
}

/* Returns the ZB-V schedule (see zbv_rank), or NULL with e filled. Serves every m >= 1 as
 * PyTorch does; zero bubble needs m >= 2p-1. */
sched *sched_gen_zbv(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (zb_check("zbv", o, 2, 1, "", b, &g, e) != PL_OK) return NULL;
    return zb_build("zbv", &g, o->recompute, zbv_rank, e);
}

/* Checks o for DualPipeV (m >= 2p, see sched_gen_dualpipev), with memory budget b when mem;
 * returns PL_OK or PL_EINPUT. */
static int dualpipev_check(const sched_gen_opts *o, int mem, const sched_budget *b, sched_gen_params *g, pl_err *e) {
    int min_m = o && o->ranks >= 1 && o->ranks <= SCHED_MAX_RANKS ? 2 * o->ranks : 1;
    const char *why = "DualPipeV needs at least as many microbatches as stages (2 x ranks) to fill its warm-up";
    return mem ? zb_check("dualpipev", o, 2, min_m, why, b, g, e) : zb_check_sizes("dualpipev", o, 2, min_m, why, g, e);
}

/* Returns the DualPipeV schedule (see dualpipev_rank), or NULL with e filled. Refuses
 * m < 2p, as PyTorch does: the steady phase of the first rank needs as many microbatches as
 * there are stages. */
sched *sched_gen_dualpipev(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (dualpipev_check(o, 1, b, &g, e) != PL_OK) return NULL;
    return zb_build("dualpipev", &g, o->recompute, dualpipev_rank, e);
}

int sched_zb_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e) {
    sched_gen_params g;
    int rc;
    if (strcmp(name, "zb-h1") == 0 || strcmp(name, "zb-h2") == 0) rc = zb_check_sizes(name, o, 1, 1, "", &g, e);
    else if (strcmp(name, "zbv") == 0) rc = zb_check_sizes(name, o, 2, 1, "", &g, e);
    else if (strcmp(name, "dualpipev") == 0) rc = dualpipev_check(o, 0, NULL, &g, e);
    else return -1;
    if (rc != PL_OK) return rc;
    sched_gen_shape_of(&g, ZB_ACTIONS_PER_CELL, out);
    return PL_OK;
}
