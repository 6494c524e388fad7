/* lower.c: turns a compute-only schedule into the lowered form that both engines execute:
 * explicit SEND/RECV in a deadlock-free order, REDUCE_GRAD and STEP per weight version.
 *
 * Order: the compute-only schedule is first run in unit time. A SEND follows the compute that
 * produced its data; the matching RECV goes on the receiver's list at the time the data is
 * produced, before the first compute that starts at or after that time. Along any chain of
 * waits the times strictly decrease, so with non-blocking (buffered) sends no cycle can form.
 *
 * Updates: lowering owns them. A compute-only schedule may already carry REDUCE_GRADs (PyTorch
 * puts one after each stage's last backward in its compute_only orders); lowering drops those
 * and places its own by its rule (sched_lower_after), so each stage gets exactly one per weight
 * version, before the STEP that applies it, wherever the input had them or whether it had any.
 * (A STEP is refused in a compute-only schedule by validation, before lowering.) */
#include "sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A receive to place on a rank: its time and the action. */
typedef struct recv_ev {
    int64_t time;
    int32_t stage, mb;
    int32_t kind;
    int32_t pad;
} recv_ev;

typedef struct recv_list {
    recv_ev *ev;
    size_t n, cap;
} recv_list;

/* Appends ev to l; returns 0 or -1 on allocation failure. */
static int recv_push(recv_list *l, recv_ev ev) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        recv_ev *n = pl_reallocarray(l->ev, cap, sizeof *n);
        if (!n) return -1;
        l->ev = n;
        l->cap = cap;
    }
    l->ev[l->n++] = ev;
    return 0;
}

/* Orders receives by time, then forward before backward, then stage and microbatch. */
static int recv_cmp(const void *a, const void *b) {
    const recv_ev *x = a, *y = b;
    if (x->time != y->time) return x->time < y->time ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
    return (x->mb > y->mb) - (x->mb < y->mb);
}

/* Returns 1 when action a completes the weight gradient of a stage (B, W, or an overlap whose
 * backward half is a full B); *stage and *mb receive which. */
static int completes_backward(const sched_action *a, int *stage, int *mb) {
    if (a->kind == SCHED_B || a->kind == SCHED_W) { *stage = a->stage; *mb = a->mb; return 1; }
    if (a->kind == SCHED_OVERLAP && a->kind2 == SCHED_B) { *stage = a->stage2; *mb = a->mb2; return 1; }
    return 0;
}

/* Returns the iteration of microbatch mb among it iterations (the last one also holds any
 * microbatch beyond; one iteration needs no division, which lowering would do per action). */
static inline int iter_of(const sched *s, int mb, int it) {
    if (it == 1 || mb < 0) return 0;
    int k = mb / s->microbatches;
    return k >= it ? it - 1 : k;
}

/* Returns the iteration (among it) of the newest microbatch that action a touches. */
static inline int action_iter(const sched *s, const sched_action *a, int it) {
    int mb = a->mb;
    if (a->kind == SCHED_OVERLAP && a->mb2 > mb) mb = a->mb2;
    return iter_of(s, mb, it);
}

/* The actions being built for one rank: exactly sized (counted in pass 1), so no regrowth. */
typedef struct outv {
    sched_action *a;
    size_t n;
} outv;

/* Appends x to o when o is not NULL (pass 2); returns 1 (the count) either way. */
static inline size_t put(outv *o, sched_action x) {
    if (o) o->a[o->n++] = x;
    return 1;
}

/* Writes (o != NULL) or only counts the sends that follow compute action a on rank r, and in
 * pass 1 (recv != NULL) queues the matching receives on the receivers (at time end). Returns
 * the number of sends, or (size_t)-1 when out of memory. */
static size_t emit_sends(const sched *s, outv *o, int r, const sched_action *a, int64_t end, recv_list *recv) {
    int halves = a->kind == SCHED_OVERLAP ? 2 : 1;
    size_t n = 0;
    for (int h = 0; h < halves; h++) {
        int kind = h == 0 ? a->kind : a->kind2;
        int stage = h == 0 ? a->stage : a->stage2;
        int mb = h == 0 ? a->mb : a->mb2;
        if (kind == SCHED_OVERLAP) kind = SCHED_F;
        if (kind == SCHED_F && stage + 1 < s->stages && s->stage_rank[stage + 1] != r) {
            n += put(o, sched_act(SCHED_SEND_F, stage, mb));
            recv_ev ev = {end, stage + 1, mb, SCHED_RECV_F, 0};
            if (recv && recv_push(&recv[s->stage_rank[stage + 1]], ev)) return (size_t)-1;
        } else if ((kind == SCHED_B || kind == SCHED_I) && stage > 0 && s->stage_rank[stage - 1] != r) {
            n += put(o, sched_act(SCHED_SEND_B, stage, mb));
            recv_ev ev = {end, stage - 1, mb, SCHED_RECV_B, 0};
            if (recv && recv_push(&recv[s->stage_rank[stage - 1]], ev)) return (size_t)-1;
        }
    }
    return n;
}

/* Fills the marks of m (allocated, m->iterations set): for each rank the index of the last
 * compute action of each iteration (flush STEP point) and for each (stage, iteration) the last
 * completing backward. */
static void find_marks(const sched *s, sched_marks *m) {
    int it = m->iterations;
    int64_t *last_bwd = m->last_bwd, *last_iter_act = m->last_iter;
    for (size_t k = 0; k < (size_t)s->stages * (size_t)it; k++) last_bwd[k] = -1;
    for (size_t k = 0; k < (size_t)s->ranks * (size_t)it; k++) last_iter_act[k] = -1;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            if (!sched_kind_is_compute((sched_kind)a->kind)) continue;
            int k = action_iter(s, a, it);
            last_iter_act[(size_t)r * it + k] = (int64_t)i;
            int st, mb;
            if (completes_backward(a, &st, &mb)) {
                int kb = iter_of(s, mb, it);
                last_bwd[(size_t)st * it + kb] = (int64_t)i;
            }
        }
}

int sched_marks_find(const sched *s, sched_marks *m, pl_err *e) {
    memset(m, 0, sizeof *m);
    m->iterations = sched_iterations(s);
    m->last_bwd = pl_calloc((size_t)s->stages * (size_t)m->iterations, sizeof *m->last_bwd);
    m->last_iter = pl_calloc((size_t)s->ranks * (size_t)m->iterations, sizeof *m->last_iter);
    if (!m->last_bwd || !m->last_iter) {
        sched_marks_free(m);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    find_marks(s, m);
    return PL_OK;
}

void sched_marks_free(sched_marks *m) {
    free(m->last_bwd);
    free(m->last_iter);
    memset(m, 0, sizeof *m);
}

/* Writes (o != NULL) or counts REDUCE_GRAD (and STEP for stash and 2bw) after the backward a at
 * index i of rank r when it closes a weight version; and for flush, the STEPs of all the rank's
 * stages after the last compute of an iteration. Returns the number of actions. */
static size_t emit_updates(const sched *s, outv *o, int r, size_t i, const sched_action *a, const sched_marks *m) {
    const int64_t *last_bwd = m->last_bwd, *last_iter_act = m->last_iter;
    int it = m->iterations;
    size_t n = 0;
    int st, mb;
    if (completes_backward(a, &st, &mb)) {
        int kb = iter_of(s, mb, it);
        if (s->weights == SCHED_WEIGHTS_STASH) {
            n += put(o, sched_act(SCHED_REDUCE_GRAD, st, mb));
            n += put(o, sched_act(SCHED_STEP, st, mb));
        } else if (last_bwd[(size_t)st * it + kb] == (int64_t)i) {
            n += put(o, sched_act(SCHED_REDUCE_GRAD, st, -1));
            if (s->weights == SCHED_WEIGHTS_2BW) n += put(o, sched_act(SCHED_STEP, st, -1));
        }
    }
    if (s->weights == SCHED_WEIGHTS_FLUSH) {
        int k = action_iter(s, a, it);
        if (last_iter_act[(size_t)r * it + k] == (int64_t)i)
            for (int q = 0; q < s->stages; q++)
                if (s->stage_rank[q] == r) n += put(o, sched_act(SCHED_STEP, q, -1));
    }
    return n;
}

size_t sched_lower_after(const sched *s, const sched_marks *m, int r, size_t i, const sched_action *a,
                         sched_action *out) {
    outv o = {out, 0};
    outv *op = out ? &o : NULL;
    return emit_sends(s, op, r, a, 0, NULL) + emit_updates(s, op, r, i, a, m);
}

/* Sorts a receiver's list by recv_cmp. It is a concatenation of runs that are already sorted
 * (each sender's receives, in the sender's order: unit-time ends strictly increase along a
 * rank, and an overlap's F half comes before its B half), so runs are merged instead of
 * sorting from scratch; the order is the same (recv_cmp is total on distinct receives).
 * Returns 0 or -1 when out of memory. */
static int recv_sort(recv_list *l) {
    size_t n = l->n;
    if (n < 2) return 0;
    size_t nruns = 1;
    for (size_t i = 1; i < n; i++)
        if (recv_cmp(&l->ev[i - 1], &l->ev[i]) > 0) nruns++;
    if (nruns == 1) return 0;
    size_t *run = pl_calloc(nruns + 1, sizeof *run);
    recv_ev *tmp = pl_reallocarray(NULL, n, sizeof *tmp);
    if (!run || !tmp) {
        free(run);
        free(tmp);
        return -1;
    }
    size_t k = 0;
    run[k++] = 0;
    for (size_t i = 1; i < n; i++)
        if (recv_cmp(&l->ev[i - 1], &l->ev[i]) > 0) run[k++] = i;
    run[k] = n;
    recv_ev *src = l->ev, *dst = tmp;
    while (nruns > 1) {
        size_t out = 0;
        for (size_t j = 0; j < nruns; j += 2) {
            size_t a = run[j], am = run[j + 1];
            size_t b = am, bm = j + 1 < nruns ? run[j + 2] : am; /* odd run out: copied */
            size_t d = a;
            while (a < am && b < bm) dst[d++] = recv_cmp(&src[b], &src[a]) < 0 ? src[b++] : src[a++];
            while (a < am) dst[d++] = src[a++];
            while (b < bm) dst[d++] = src[b++];
            run[out++] = run[j];
        }
        run[out] = n;
        nruns = out;
        recv_ev *t = src;
        src = dst;
        dst = t;
    }
    if (src != l->ev) memcpy(l->ev, src, n * sizeof *src);
    free(tmp);
    free(run);
    return 0;
}

/* Per compute action, what lowering holds at its peak besides the input: the dry run's slot,
 * up to four lowered actions (the action, a send, a receive, an update) and two queued
 * receives. */
#define LOWERED_PER_COMPUTE 4
#define RECVS_PER_COMPUTE 2
#define LOWER_BYTES_PER_ACTION \
    (sizeof(sched_slot) + LOWERED_PER_COMPUTE * sizeof(sched_action) + RECVS_PER_COMPUTE * sizeof(recv_ev))

/* Returns PL_OK when lowering s fits memory budget b, checked before anything is allocated;
 * else PL_EINPUT with the bytes it needs. */
static int lower_check_memory(const sched *s, const sched_budget *b, pl_err *e) {
    uint64_t n = sched_total_actions(s), need = 0;
    char what[160];
    snprintf(what, sizeof what, "lowering %s (%d ranks, %d stages, %d microbatches, %llu actions)", s->kind, s->ranks,
             s->stages, s->microbatches, (unsigned long long)n);
    if (__builtin_mul_overflow(n, (uint64_t)LOWER_BYTES_PER_ACTION, &need)) need = UINT64_MAX;
    return sched_memory_check(b, need, what, e);
}

/* The work of one lowering: the input, its dry run, the output and the tables between them. */
typedef struct lowering {
    const sched *s;
    sched_dryrun_result dr; /* validation's unit-time run: the slots that order the receives */
    sched *out;
    recv_list *recv;        /* [ranks] receives queued on each receiver */
    size_t *extra;          /* [ranks] actions each rank gets besides its receives: its input's
                             * (less the REDUCE_GRADs dropped), sends and updates */
    sched_marks marks;      /* where the updates go (find_marks) */
} lowering;

/* Allocates the output (with the input's shape and policies, marked lowered) and the tables of
 * lw. Returns PL_OK or PL_ENOMEM. */
static int lower_alloc(lowering *lw, pl_err *e) {
    const sched *s = lw->s;
    lw->out = sched_new(s->ranks, s->stages, s->microbatches, SCHED_PLACE_EXPLICIT, s->stage_rank, e);
    lw->recv = pl_calloc((size_t)s->ranks, sizeof *lw->recv);
    lw->extra = pl_calloc((size_t)s->ranks, sizeof *lw->extra);
    if (!lw->out || !lw->recv || !lw->extra || sched_marks_find(s, &lw->marks, e) != PL_OK) return PL_ENOMEM;
    sched_copy_policies(lw->out, s);
    lw->out->lowered = 1;
    return PL_OK;
}

/* Returns 1 when the input's non-compute action a goes to the output as it is: all but a
 * REDUCE_GRAD, which lowering places itself (see the top). */
static int kept_as_is(const sched_action *a) { return a->kind != SCHED_REDUCE_GRAD; }

/* Pass 1: queues the receives per receiver (in sender order) and counts each rank's actions
 * besides its receives (kept input, sends, updates). Returns PL_OK or PL_ENOMEM. */
static int lower_count(lowering *lw) {
    const sched *s = lw->s;
    for (int r = 0; r < s->ranks; r++) {
        const sched_rank *rk = &s->rank[r];
        for (size_t i = 0; i < rk->n; i++) {
            const sched_action *a = &rk->acts[i];
            if (!sched_kind_is_compute((sched_kind)a->kind)) {
                lw->extra[r] += (size_t)kept_as_is(a);
                continue;
            }
            lw->extra[r]++;
            size_t ns = emit_sends(s, NULL, r, a, lw->dr.slot[r][i].end, lw->recv);
            if (ns == (size_t)-1) return PL_ENOMEM;
            lw->extra[r] += ns + emit_updates(s, NULL, r, i, a, &lw->marks);
        }
    }
    return PL_OK;
}

/* Returns the receive queued as ev, as an action. */
static sched_action recv_action(const recv_ev *ev) { return sched_act((sched_kind)ev->kind, ev->stage, ev->mb); }

/* Pass 2 for rank r: before each compute the receives whose time is at or before its start,
 * then the compute, its sends and updates; the input's other actions in place, but for its
 * REDUCE_GRADs (dropped); the remaining receives at the end. The list is exactly as long as
 * pass 1 counted. Returns PL_OK or PL_ENOMEM. */
static int lower_rank(lowering *lw, int r) {
    const sched *s = lw->s;
    recv_list *l = &lw->recv[r];
    if (recv_sort(l)) return PL_ENOMEM;
    const sched_rank *rk = &s->rank[r];
    size_t cap = lw->extra[r] + l->n;
    if (cap == 0) return PL_OK;
    outv o = {pl_reallocarray(NULL, cap, sizeof(sched_action)), 0};
    if (!o.a) return PL_ENOMEM;
    size_t q = 0;
    for (size_t i = 0; i < rk->n; i++) {
        const sched_action *a = &rk->acts[i];
        if (!sched_kind_is_compute((sched_kind)a->kind)) {
            if (kept_as_is(a)) o.a[o.n++] = *a;
            continue;
        }
        int64_t key = lw->dr.slot[r][i].start;
        for (; q < l->n && l->ev[q].time <= key; q++) o.a[o.n++] = recv_action(&l->ev[q]);
        o.a[o.n++] = *a;
        o.n += sched_lower_after(s, &lw->marks, r, i, a, o.a + o.n);
    }
    for (; q < l->n; q++) o.a[o.n++] = recv_action(&l->ev[q]);
    lw->out->rank[r].acts = o.a;
    lw->out->rank[r].n = lw->out->rank[r].cap = o.n;
    free(l->ev);
    l->ev = NULL;
    return PL_OK;
}

/* Frees the tables of lw (not the output). */
static void lower_free(lowering *lw) {
    sched_dryrun_free(&lw->dr, lw->s->ranks);
    if (lw->recv)
        for (int r = 0; r < lw->s->ranks; r++) free(lw->recv[r].ev);
    free(lw->recv);
    free(lw->extra);
    sched_marks_free(&lw->marks);
}

sched *sched_lower_within(const sched *s, const sched_budget *b, pl_err *e) {
    if (s->lowered) {
        sched *c = sched_clone(s);
        if (!c) pl_errf(e, PL_ENOMEM, "out of memory");
        return c;
    }
    if (lower_check_memory(s, b, e) != PL_OK) return NULL;
    lowering lw = {.s = s};
    if (sched_validate_core(s, &lw.dr, e) != PL_OK) return NULL;
    int rc = lower_alloc(&lw, e);
    if (rc == PL_OK) rc = lower_count(&lw);
    for (int r = 0; r < s->ranks && rc == PL_OK; r++) rc = lower_rank(&lw, r);
    if (rc == PL_OK && sched_total_actions(lw.out) > SCHED_MAX_ACTIONS) rc = PL_ENOMEM;
    lower_free(&lw);
    if (rc != PL_OK) {
        pl_errf(e, PL_ENOMEM, "out of memory lowering the schedule");
        sched_free(lw.out);
        return NULL;
    }
    return lw.out;
}

/* Lowers s within the automatic budget. */
sched *sched_lower(const sched *s, pl_err *e) { return sched_lower_within(s, NULL, e); }
