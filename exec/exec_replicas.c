/* exec_replicas.c: replicated stages in the executor (PipeDream's 1F1B-RR): the layout of the
 * executor's ranks over the schedule's, and the exact all-reduce of a stage's gradients over
 * its replicas (the ring over any transport's send and recv; exec_int.h, "Replicas"). */
#include "exec_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The most executor ranks a layout may have (each is a thread or a process). */
#define EXEC_MAX_WORKERS 4096
/* Bits of magnitude the all-reduce's integers use: the sum of n of them stays below 2^63. */
#define RED_BITS 62
/* The bits of an fp32 value without its sign. */
#define RED_ABS_MASK 0x7fffffffu
/* The exponent of a gradient that is zero everywhere (below every float's). */
#define RED_EXP_NONE (-100000)

void exec_layout_free(exec_layout *L) {
    free(L->reps);
    free(L->base);
    free(L->width);
    free(L->srank);
    free(L->rep);
    free(L->list);
    free(L->acts);
    memset(L, 0, sizeof *L);
}

/* Fills L->reps and L->width from replicas and checks them against s (see exec_layout_build).
 * Returns PL_OK or PL_EINPUT. */
static int layout_widths(const sched *s, const int *replicas, exec_layout *L, pl_err *e) {
    for (int r = 0; r < s->ranks; r++) L->width[r] = 0;
    for (int q = 0; q < s->stages; q++) {
        int n = replicas ? replicas[q] : 1, r = s->stage_rank[q];
        if (r < 0 || r >= s->ranks) return pl_errf(e, PL_EINPUT, "stage %d is placed on rank %d of %d", q, r, s->ranks);
        if (n < 1 || n > EXEC_MAX_WORKERS)
            return pl_errf(e, PL_EINPUT, "stage %d has %d replicas (1 to %d)", q, n, EXEC_MAX_WORKERS);
        L->reps[q] = n;
        if (L->width[r] && L->width[r] != n)
            return pl_errf(e, PL_EINPUT, "rank %d holds stages with %d and %d replicas: the executor replicates the stages "
                           "of a rank alike (each replica is a rank of its own)", r, L->width[r], n);
        L->width[r] = n;
        if (n > 1 && s->microbatches % n != 0)
            return pl_errf(e, PL_EINPUT, "stage %d has %d replicas but an iteration has %d microbatches: 1F1B-RR runs "
                           "microbatch k on replica k mod %d, so each replica needs the same share of every iteration "
                           "(and stash a full round of %d per update): give a multiple of %d microbatches", q, n,
                           s->microbatches, n, n, n);
    }
    int64_t total = 0;
    for (int r = 0; r < s->ranks; r++) {
        if (L->width[r] < 1) L->width[r] = 1; /* a rank without stages */
        L->base[r] = (int)total;
        total += L->width[r];
    }
    if (total > EXEC_MAX_WORKERS)
        return pl_errf(e, PL_EINPUT, "the replicas make %lld ranks (at most %d)", (long long)total, EXEC_MAX_WORKERS);
    L->ranks = (int)total;
    return PL_OK;
}

/* Returns the replica of rank r's list that runs a (sched_replica_of), or -n for all n. */
static int replica_of(const sched *s, const exec_layout *L, const sched_action *a) {
    return a->stage >= 0 && a->stage < s->stages ? sched_replica_of(a, L->reps[a->stage]) : 0;
}

/* Splits each schedule rank's list among its replicas (L->list, L->acts). PL_OK or PL_ENOMEM. */
static int layout_lists(const sched *s, exec_layout *L, pl_err *e) {
    size_t total = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) {
            int j = replica_of(s, L, &s->rank[r].acts[i]);
            total += j >= 0 ? 1 : (size_t)-j;
        }
    L->acts = pl_calloc(total ? total : 1, sizeof *L->acts);
    if (!L->acts) return pl_errf(e, PL_ENOMEM, "out of memory for the replicas' lists");
    size_t off = 0;
    for (int r = 0; r < s->ranks; r++)
        for (int j = 0; j < L->width[r]; j++) {
            sched_rank *lr = &L->list[L->base[r] + j];
            lr->acts = L->acts + off;
            for (size_t i = 0; i < s->rank[r].n; i++) {
                const sched_action *a = &s->rank[r].acts[i];
                int k = replica_of(s, L, a);
                if (k == j || (k < 0 && j < -k)) lr->acts[lr->n++] = *a;
            }
            lr->cap = lr->n;
            off += lr->n;
        }
    return PL_OK;
}

int exec_layout_build(const sched *s, const int *replicas, exec_layout *L, pl_err *e) {
    memset(L, 0, sizeof *L);
    L->reps = pl_calloc((size_t)s->stages, sizeof *L->reps);
    L->base = pl_calloc((size_t)s->ranks, sizeof *L->base);
    L->width = pl_calloc((size_t)s->ranks, sizeof *L->width);
    if (!L->reps || !L->base || !L->width) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = layout_widths(s, replicas, L, e);
    if (rc == PL_OK) rc = sched_check_replica_reduces(s, replicas, e); /* one reduce per update */
    if (rc) return rc;
    L->srank = pl_calloc((size_t)L->ranks, sizeof *L->srank);
    L->rep = pl_calloc((size_t)L->ranks, sizeof *L->rep);
    L->list = pl_calloc((size_t)L->ranks, sizeof *L->list);
    if (!L->srank || !L->rep || !L->list) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int r = 0; r < s->ranks; r++)
        for (int j = 0; j < L->width[r]; j++) {
            L->srank[L->base[r] + j] = r;
            L->rep[L->base[r] + j] = j;
        }
    if (L->ranks == s->ranks) { /* nothing replicated: the schedule's own lists */
        for (int r = 0; r < s->ranks; r++) L->list[r] = s->rank[r];
        return PL_OK;
    }
    return layout_lists(s, L, e);
}

/* ---------------------------------------------------------------- the ring */

/* Sends chunk cs of v (to next) and receives chunk cr (from prev) piece by piece, alternating,
 * so that no mailbox holds more than a few pieces; a received piece is summed (or maxed) into
 * v when combine, else copied. Where the transport posts receives, piece i's receive is posted
 * before piece i is sent, so that the sender copies straight into tmp (no mailbox copy). Keys:
 * (EXEC_MSG_REDUCE, stage, seq0 + piece). Returns PL_OK or the transport's error. */
static int ring_step(exec_transport *t, int next, int prev, int stage, int64_t seq0, int64_t *v, const size_t *cut, int cs,
                     int cr, int combine, int max, int64_t *tmp, size_t piece, pl_err *e) {
    size_t ns = cut[cs + 1] - cut[cs], nr = cut[cr + 1] - cut[cr];
    size_t ps = (ns + piece - 1) / piece, pr = (nr + piece - 1) / piece;
    for (size_t i = 0; i < ps || i < pr; i++) {
        exec_msg_key k = {EXEC_MSG_REDUCE, stage, seq0 + (int64_t)i};
        size_t ro = i * piece, rn = i < pr ? (nr - ro < piece ? nr - ro : piece) : 0;
        int posted = i < pr && t->post_recv && t->wait_recv;
        if (posted && t->post_recv(t, prev, k, tmp, rn * sizeof *v, e) != PL_OK) return e->code;
        if (i < ps) {
            size_t o = i * piece, c = ns - o < piece ? ns - o : piece;
            int rc = t->send(t, next, k, v + cut[cs] + o, c * sizeof *v, e);
            if (rc) return rc;
        }
        if (i < pr) {
            size_t o = ro, c = rn;
            int rc = posted ? t->wait_recv(t, prev, k, e) : t->recv(t, prev, k, tmp, c * sizeof *v, e);
            if (rc) return rc;
            int64_t *d = v + cut[cr] + o;
            for (size_t j = 0; j < c; j++)
                d[j] = !combine ? tmp[j] : max ? (tmp[j] > d[j] ? tmp[j] : d[j]) : d[j] + tmp[j];
        }
    }
    return PL_OK;
}

int exec_ring_allreduce(exec_transport *t, int group0, int n, int me, int stage, int64_t *seq, int64_t *v, size_t count,
                        int max, int64_t *tmp, size_t piece, pl_err *e) {
    if (n <= 1) return PL_OK;
    size_t cut[EXEC_MAX_WORKERS + 1];
    if (n > EXEC_MAX_WORKERS) return pl_errf(e, PL_EINPUT, "%d replicas (at most %d)", n, EXEC_MAX_WORKERS);
    for (int c = 0; c <= n; c++) cut[c] = count * (size_t)c / (size_t)n;
    if (piece < 1) piece = 1;
    /* messages per step: the largest chunk's pieces; each step's keys follow the previous one's */
    int64_t per = (int64_t)((cut[1] + piece) / piece) + 1;
    int next = group0 + (me + 1) % n, prev = group0 + (me + n - 1) % n, rc = PL_OK;
    /* reduce-scatter: after n - 1 steps this replica holds chunk me + 1 over all replicas */
    for (int k = 0; k < n - 1 && rc == PL_OK; k++)
        rc = ring_step(t, next, prev, stage, *seq + k * per, v, cut, (me - k + n) % n, (me - k - 1 + 2 * n) % n, 1, max, tmp,
                       piece, e);
    /* all-gather: the reduced chunks go round once */
    for (int k = 0; k < n - 1 && rc == PL_OK; k++)
        rc = ring_step(t, next, prev, stage, *seq + (n - 1 + k) * per, v, cut, (me + 1 - k + n) % n, (me - k + n) % n, 0, 0,
                       tmp, piece, e);
    *seq += 2 * (int64_t)(n - 1) * per;
    return rc;
}

/* ---------------------------------------------------------------- the exact all-reduce */

/* Elements of one message of the ring (EXEC_RING_PIECE_BYTES). */
static size_t ring_piece(const exec_xrank *x) {
    (void)x;
    return EXEC_RING_PIECE_BYTES / sizeof(int64_t);
}

int exec_xrank_reduce_setup(exec_xrank *x, pl_err *e) {
    size_t most = 0;
    for (int q = 0; q < x->nst; q++)
        if (x->lay->reps[x->st[q].stage] > 1 && x->st[q].pfloats > most) most = x->st[q].pfloats;
    if (most == 0) return PL_OK;
    x->red_n = most + 1 + ring_piece(x);
    x->red = pl_calloc(x->red_n, sizeof *x->red);
    x->red_seq = pl_calloc((size_t)x->nst, sizeof *x->red_seq);
    if (!x->red || !x->red_seq) return pl_errf(e, PL_ENOMEM, "rank %d: out of memory for the all-reduce", x->r);
    return PL_OK;
}

/* Combines v[count] over stage q's replicas (sum, or max): the transport's all-reduce, else the
 * ring over its messages. Returns PL_OK or the error. */
static int combine(exec_xrank *x, int q, int64_t *v, size_t count, int max, pl_err *e) {
    if (x->t->allreduce) return x->t->allreduce(x->t, q, v, count, max, e);
    size_t most = x->red_n - 1 - ring_piece(x);
    return exec_ring_allreduce(x->t, x->lay->base[x->sr], x->lay->reps[q], x->rep, q, &x->red_seq[x->loc[q]], v, count, max,
                               x->red + most + 1, ring_piece(x), e);
}

/* Returns ceil(log2 n) for n >= 1. */
static int ceil_log2(int n) {
    int b = 0;
    while ((1L << b) < n) b++;
    return b;
}

int exec_xrank_reduce(exec_xrank *x, exec_xstage *st, pl_err *e) {
    int q = st->stage, n = x->lay ? x->lay->reps[q] : 1;
    if (n <= 1) return PL_OK;
    size_t cnt = st->pfloats;
    /* the largest |g|: non-negative floats order as their bit patterns (an integer max, which
     * vectorizes), and infinity and NaN have the largest (refused below) */
    uint32_t top_bits = 0;
    for (size_t i = 0; i < cnt; i++) {
        uint32_t b;
        memcpy(&b, &st->grad[i], sizeof b);
        b &= RED_ABS_MASK;
        top_bits = b > top_bits ? b : top_bits;
    }
    float big;
    memcpy(&big, &top_bits, sizeof big);
    for (size_t i = 0; !isfinite(big) && i < cnt; i++)
        if (!isfinite(st->grad[i]))
            return pl_errf(e, PL_EINPUT, "stage %d: gradient element %zu is not finite (%g)", q, i, (double)st->grad[i]);
    int ex = 0;
    if (big > 0.0f) frexpf(big, &ex);
    int64_t top = big > 0.0f ? ex : RED_EXP_NONE;
    int rc = combine(x, q, &top, 1, 1, e); /* the largest exponent of all replicas */
    if (rc) return rc;
    int S = top == RED_EXP_NONE ? 0 : RED_BITS - (int)top - ceil_log2(n);
    /* scaling by a power of two is exact in double (S stays far inside its exponent range) */
    double up = ldexp(1.0, S), down = ldexp(1.0, -S);
    int64_t *v = x->red;
    for (size_t i = 0; i < cnt; i++) v[i] = llrint((double)st->grad[i] * up);
    v[cnt] = st->nacc;
    rc = combine(x, q, v, cnt + 1, 0, e);
    if (rc) return rc;
    for (size_t i = 0; i < cnt; i++) st->grad[i] = (float)((double)v[i] * down);
    st->nacc = (int)v[cnt];
    return PL_OK;
}

/* ---------------------------------------------------------------- results of a replicated rank */

/* Moves into out the op records of r's w replicas (each[j], T timed passes of their own lists)
 * in the order of r's list, pass by pass. Returns PL_OK or PL_ENOMEM. */
static int fold_ops(const exec_layout *L, const sched *s, int r, exec_rank_result *each, exec_rank_result *out, pl_err *e) {
    int w = L->width[r];
    size_t n = s->rank[r].n, T = each[0].n_ops / (L->list[L->base[r]].n ? L->list[L->base[r]].n : 1);
    size_t cur[EXEC_MAX_WORKERS] = {0};
    out->ops = pl_calloc(T * n > 0 ? T * n : 1, sizeof *out->ops);
    if (!out->ops) return pl_errf(e, PL_ENOMEM, "out of memory for the op records");
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < n; i++) {
            int j = replica_of(s, L, &s->rank[r].acts[i]);
            if (j < 0) { /* all replicas ran it: replica 0's record, the others' skipped */
                for (int k = 1; k < -j && k < w; k++) cur[k]++;
                j = 0;
            }
            if (cur[j] < each[j].n_ops) out->ops[out->n_ops++] = each[j].ops[cur[j]++];
        }
    return PL_OK;
}

int exec_fold_replicas(const exec_layout *L, const sched *s, int r, exec_rank_result *each, exec_rank_result *out,
                       pl_err *e) {
    int w = L->width[r];
    if (w == 1) { /* the rank itself */
        *out = each[0];
        each[0].ops = NULL;
        each[0].n_ops = 0;
        return PL_OK;
    }
    int top = 0;
    for (int j = 1; j < w; j++)
        if (each[j].peak.total_bytes > each[top].peak.total_bytes) top = j;
    *out = each[top];
    out->core = each[0].core;
    out->ops = NULL;
    out->n_ops = 0;
    out->busy_s = out->gemm_s = out->gemm_flops = out->idle_s = out->bubble_fraction = out->comm_s = 0;
    for (int j = 0; j < w; j++) {
        out->busy_s += each[j].busy_s / w;
        out->gemm_s += each[j].gemm_s / w;
        out->gemm_flops += each[j].gemm_flops / w;
        out->idle_s += each[j].idle_s / w;
        out->bubble_fraction += each[j].bubble_fraction / w;
        out->comm_s += each[j].comm_s;
        if (each[j].allocated_bytes > out->allocated_bytes) out->allocated_bytes = each[j].allocated_bytes;
        if (each[j].model_peak_bytes > out->model_peak_bytes) out->model_peak_bytes = each[j].model_peak_bytes;
        out->start_after_ready_s = fmin(out->start_after_ready_s, each[j].start_after_ready_s);
    }
    return each[0].n_ops ? fold_ops(L, s, r, each, out, e) : PL_OK;
}
