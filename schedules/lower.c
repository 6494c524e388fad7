/* lower.c: turns a compute-only schedule into the lowered form that both engines execute:
 * explicit SEND/RECV in a deadlock-free order, REDUCE_GRAD and STEP per weight version.
 *
 * Order: the compute-only schedule is first run in unit time. A SEND follows the compute that
 * produced its data; the matching RECV goes on the receiver's list at the time the data is
 * produced, before the first compute that starts at or after that time. Along any chain of
 * waits the times strictly decrease, so with non-blocking (buffered) sends no cycle can form. */
#include "sched_int.h"

#include <stdlib.h>
#include <string.h>

/* A receive to place on a rank: its time and the action. 24 bytes. */
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

/* Returns the iteration of the newest microbatch that action a touches. */
static int action_iter(const sched *s, const sched_action *a) {
    int mb = a->mb;
    if (a->kind == SCHED_OVERLAP && a->mb2 > mb) mb = a->mb2;
    return mb < 0 ? 0 : mb / s->microbatches;
}

/* Pushes the sends that follow compute action a on rank r, and queues the matching receives
 * on the receivers (at time end). Returns PL_OK or PL_ENOMEM. */
static int emit_sends(const sched *s, sched *out, int r, const sched_action *a, int64_t end, recv_list *recv) {
    int halves = a->kind == SCHED_OVERLAP ? 2 : 1;
    for (int h = 0; h < halves; h++) {
        int kind = h == 0 ? a->kind : a->kind2;
        int stage = h == 0 ? a->stage : a->stage2;
        int mb = h == 0 ? a->mb : a->mb2;
        if (kind == SCHED_OVERLAP) kind = SCHED_F;
        if (kind == SCHED_F && stage + 1 < s->stages && s->stage_rank[stage + 1] != r) {
            if (sched_push(out, r, sched_act(SCHED_SEND_F, stage, mb))) return PL_ENOMEM;
            recv_ev ev = {end, stage + 1, mb, SCHED_RECV_F, 0};
            if (recv_push(&recv[s->stage_rank[stage + 1]], ev)) return PL_ENOMEM;
        } else if ((kind == SCHED_B || kind == SCHED_I) && stage > 0 && s->stage_rank[stage - 1] != r) {
            if (sched_push(out, r, sched_act(SCHED_SEND_B, stage, mb))) return PL_ENOMEM;
            recv_ev ev = {end, stage - 1, mb, SCHED_RECV_B, 0};
            if (recv_push(&recv[s->stage_rank[stage - 1]], ev)) return PL_ENOMEM;
        }
    }
    return PL_OK;
}

/* Finds, for each rank, the index of the last compute action of each iteration (flush STEP
 * point) and for each (stage, iteration) the last completing backward. Returns PL_OK. */
static int find_marks(const sched *s, int64_t *last_bwd, int64_t *last_iter_act) {
    int it = s->iterations > 0 ? s->iterations : 1;
    for (size_t k = 0; k < (size_t)s->stages * (size_t)it; k++) last_bwd[k] = -1;
    for (size_t k = 0; k < (size_t)s->ranks * (size_t)it; k++) last_iter_act[k] = -1;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            if (!sched_kind_is_compute((sched_kind)a->kind)) continue;
            int k = action_iter(s, a);
            if (k >= it) k = it - 1;
            last_iter_act[(size_t)r * it + k] = (int64_t)i;
            int st, mb;
            if (completes_backward(a, &st, &mb)) {
                int kb = mb / s->microbatches;
                if (kb >= it) kb = it - 1;
                last_bwd[(size_t)st * it + kb] = (int64_t)i;
            }
        }
    return PL_OK;
}

/* Pushes REDUCE_GRAD (and STEP for stash and 2bw) after the backward at index i of rank r when
 * it closes a weight version; and for flush, the STEPs of all the rank's stages after the last
 * compute of an iteration. */
static int emit_updates(const sched *s, sched *out, int r, size_t i, const int64_t *last_bwd,
                        const int64_t *last_iter_act) {
    const sched_action *a = &s->rank[r].acts[i];
    int it = s->iterations > 0 ? s->iterations : 1;
    int st, mb;
    if (completes_backward(a, &st, &mb)) {
        int kb = mb / s->microbatches;
        if (kb >= it) kb = it - 1;
        if (s->weights == SCHED_WEIGHTS_STASH) {
            if (sched_push(out, r, sched_act(SCHED_REDUCE_GRAD, st, mb)) ||
                sched_push(out, r, sched_act(SCHED_STEP, st, mb)))
                return PL_ENOMEM;
        } else if (last_bwd[(size_t)st * it + kb] == (int64_t)i) {
            if (sched_push(out, r, sched_act(SCHED_REDUCE_GRAD, st, -1))) return PL_ENOMEM;
            if (s->weights == SCHED_WEIGHTS_2BW && sched_push(out, r, sched_act(SCHED_STEP, st, -1))) return PL_ENOMEM;
        }
    }
    if (s->weights == SCHED_WEIGHTS_FLUSH) {
        int k = action_iter(s, a);
        if (k >= it) k = it - 1;
        if (last_iter_act[(size_t)r * it + k] == (int64_t)i)
            for (int q = 0; q < s->stages; q++)
                if (s->stage_rank[q] == r && sched_push(out, r, sched_act(SCHED_STEP, q, -1))) return PL_ENOMEM;
    }
    return PL_OK;
}

sched *sched_lower(const sched *s, pl_err *e) {
    if (s->lowered) {
        sched *c = sched_clone(s);
        if (!c) pl_errf(e, PL_ENOMEM, "out of memory");
        return c;
    }
    if (sched_validate(s, e) != PL_OK) return NULL;
    sched_dryrun_result dr;
    if (sched_dryrun_core(s, NULL, &dr, 1, e) != PL_OK) return NULL;
    int it = s->iterations > 0 ? s->iterations : 1;
    sched *out = sched_new(s->ranks, s->stages, s->microbatches, SCHED_PLACE_EXPLICIT, s->stage_rank, e);
    recv_list *recv = pl_calloc((size_t)s->ranks, sizeof *recv);
    int64_t *last_bwd = pl_calloc((size_t)s->stages * (size_t)it, sizeof *last_bwd);
    int64_t *last_iter = pl_calloc((size_t)s->ranks * (size_t)it, sizeof *last_iter);
    int rc = PL_OK;
    if (!out || !recv || !last_bwd || !last_iter) { rc = PL_ENOMEM; goto out; }
    memcpy(out->kind, s->kind, sizeof out->kind);
    out->placement = s->placement;
    out->iterations = s->iterations;
    out->chunks = s->chunks;
    out->weights = s->weights;
    out->recompute = s->recompute;
    out->lowered = 1;
    find_marks(s, last_bwd, last_iter);
    /* pass 1: compute actions and sends; receives queued per receiver */
    sched *tmp = sched_new(s->ranks, s->stages, s->microbatches, SCHED_PLACE_EXPLICIT, s->stage_rank, e);
    if (!tmp) { rc = PL_ENOMEM; goto out; }
    /* tmp holds, per rank, compute + sends + updates; a parallel array keeps each one's start */
    int64_t **key = pl_calloc((size_t)s->ranks, sizeof *key);
    if (!key) { sched_free(tmp); rc = PL_ENOMEM; goto out; }
    for (int r = 0; r < s->ranks && rc == PL_OK; r++) {
        const sched_rank *rk = &s->rank[r];
        size_t kcap = rk->n * 2 + 16, kn = 0;
        key[r] = pl_calloc(kcap, sizeof(int64_t));
        if (!key[r]) { rc = PL_ENOMEM; break; }
        for (size_t i = 0; i < rk->n && rc == PL_OK; i++) {
            const sched_action *a = &rk->acts[i];
            if (sched_push(tmp, r, *a)) { rc = PL_ENOMEM; break; }
            if (sched_kind_is_compute((sched_kind)a->kind)) {
                rc = emit_sends(s, tmp, r, a, dr.slot[r][i].end, recv);
                if (rc == PL_OK) rc = emit_updates(s, tmp, r, i, last_bwd, last_iter);
            }
            /* the key of a compute is its start; receives go before the first compute whose
             * start is at or after their time. Other actions carry the key of their compute. */
            if (tmp->rank[r].n > kcap) {
                size_t nc = tmp->rank[r].n * 2;
                int64_t *nk = pl_reallocarray(key[r], nc, sizeof(int64_t));
                if (!nk) { rc = PL_ENOMEM; break; }
                key[r] = nk;
                kcap = nc;
            }
            while (kn < tmp->rank[r].n) key[r][kn++] = dr.slot[r][i].start;
        }
    }
    /* pass 2: merge receives into each rank's list */
    for (int r = 0; r < s->ranks && rc == PL_OK; r++) {
        recv_list *l = &recv[r];
        if (l->n > 1) qsort(l->ev, l->n, sizeof *l->ev, recv_cmp);
        size_t q = 0;
        for (size_t j = 0; j < tmp->rank[r].n && rc == PL_OK; j++) {
            const sched_action *a = &tmp->rank[r].acts[j];
            if (sched_kind_is_compute((sched_kind)a->kind)) {
                while (q < l->n && l->ev[q].time <= key[r][j] && rc == PL_OK) {
                    if (sched_push(out, r, sched_act((sched_kind)l->ev[q].kind, l->ev[q].stage, l->ev[q].mb))) rc = PL_ENOMEM;
                    else q++;
                }
            }
            if (rc == PL_OK && sched_push(out, r, *a)) rc = PL_ENOMEM;
        }
        while (q < l->n && rc == PL_OK) {
            if (sched_push(out, r, sched_act((sched_kind)l->ev[q].kind, l->ev[q].stage, l->ev[q].mb))) rc = PL_ENOMEM;
            else q++;
        }
        free(l->ev);
        l->ev = NULL;
    }
    for (int r = 0; r < s->ranks; r++) free(key[r]);
    free(key);
    sched_free(tmp);
out:
    sched_dryrun_free(&dr, s->ranks);
    if (recv)
        for (int r = 0; r < s->ranks; r++) free(recv[r].ev);
    free(recv);
    free(last_bwd);
    free(last_iter);
    if (rc != PL_OK) {
        if (rc == PL_ENOMEM) pl_errf(e, PL_ENOMEM, "out of memory lowering the schedule");
        sched_free(out);
        return NULL;
    }
    return out;
}
