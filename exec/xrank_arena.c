/* xrank_arena.c: a rank's up-front memory, whatever backend computes: a dry walk of its list
 * (the bookkeeping of every action, xrank.c, without compute or data) that checks it and sizes
 * every pool, then one allocation laid out as the pools, and the measurement arrays. */
#include "exec_drive.h"
#include "exec_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The per-microbatch index arrays of a stage: in_of, gin_of, act_of, wg_of, ver_of, out_f, out_b. */
#define STAGE_INDEX_ARRAYS 7
/* The pools of a rank (in caps[] order), then those of each stage after them. */
enum { CAP_IN, CAP_OUT, CAP_GIN, CAP_RANK_POOLS };
enum { CAP_VER, CAP_ACT, CAP_WG, CAP_STAGE_POOLS };
/* Returns the index in caps[] of pool k (CAP_VER ...) of local stage q. */
#define CAP_OF(q, k) (CAP_RANK_POOLS + CAP_STAGE_POOLS * (q) + (k))

/* exec_int.h. What exec_lines_alloc takes for n floats (its huge-page rounding included). */
size_t exec_lines_bytes(size_t n, int small_pages) {
    size_t bytes = exec_line_round(n > 0 ? n : 1) * sizeof(float);
    if (!small_pages && bytes >= EXEC_HUGE_MIN_BYTES) bytes = (bytes + EXEC_HUGE_BYTES - 1) / EXEC_HUGE_BYTES * EXEC_HUGE_BYTES;
    return bytes;
}

/* exec_int.h. Every buffer of the arena starts on a cache line (README: "Layout"). */
float *exec_lines_alloc(size_t n, int small_pages) {
    size_t bytes = exec_line_round(n > 0 ? n : 1) * sizeof(float);
    if (!small_pages && bytes >= EXEC_HUGE_MIN_BYTES) {
        bytes = (bytes + EXEC_HUGE_BYTES - 1) / EXEC_HUGE_BYTES * EXEC_HUGE_BYTES;
        float *p = aligned_alloc(EXEC_HUGE_BYTES, bytes);
        if (!p) return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, bytes, MADV_HUGEPAGE); /* a kernel without THP refuses: small pages then */
#endif
        memset(p, 0, bytes);
        return p;
    }
    float *p = aligned_alloc(EXEC_LINE_BYTES, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

/* Sets the pool's bookkeeping: cap slots of n floats, refs from *ip (advanced). */
static void pool_set(exec_pool *p, int cap, size_t n, int **ip) {
    p->cap = cap;
    p->used = p->peak = 0;
    p->refs = *ip;
    *ip += cap;
    memset(p->refs, 0, (size_t)cap * sizeof(int));
    p->slot_floats = n;
    p->stride = exec_line_round(n);
    p->base = NULL;
}

/* The ints of x's bookkeeping with the pool sizes in caps (layout_ints' allocation holds them and
 * nst M flag bytes). */
static size_t caps_ints(const exec_xrank *x, const int *caps) {
    size_t n_int = (size_t)caps[CAP_IN] + (size_t)caps[CAP_OUT] + (size_t)caps[CAP_GIN];
    for (int q = 0; q < x->nst; q++)
        n_int += (size_t)caps[CAP_OF(q, CAP_VER)] + (size_t)caps[CAP_OF(q, CAP_ACT)] + (size_t)caps[CAP_OF(q, CAP_WG)] +
                 STAGE_INDEX_ARRAYS * (size_t)x->M;
    return n_int;
}

/* The floats of x's arena with the pool sizes in caps: every pool's slots, each on a cache line,
 * the scratch, and each stage's gradients (and momentum). */
static size_t caps_floats(const exec_xrank *x, const int *caps) {
    size_t bh = (size_t)x->d.b * x->d.h, sf = exec_block_state_floats(&x->d), scr = exec_block_scratch_floats(&x->d);
    int mom = x->cfg->momentum != 0.0;
    size_t floats = ((size_t)caps[CAP_IN] + (size_t)caps[CAP_OUT] + (size_t)caps[CAP_GIN]) * exec_line_round(bh) + exec_line_round(scr + bh);
    for (int q = 0; q < x->nst; q++) {
        const exec_xstage *st = &x->st[q];
        size_t actf = (size_t)(st->nb - 1) * bh + (size_t)st->nb * sf, wgf = (size_t)(st->nb - 1) * bh;
        floats += (size_t)caps[CAP_OF(q, CAP_VER)] * exec_line_round(st->pfloats) +
                  (size_t)caps[CAP_OF(q, CAP_ACT)] * exec_line_round(actf) + (size_t)caps[CAP_OF(q, CAP_WG)] * exec_line_round(wgf) +
                  exec_line_round(st->pfloats) * (1 + (size_t)mom);
    }
    return floats;
}

/* Lays out x's bookkeeping in one allocation (*ints_mem) with the pool sizes in caps: the slots'
 * references and the per-microbatch indices and flags of every stage. Returns the floats the
 * arena needs for these pools (caps_floats), or 0 with e when out of memory. */
static size_t layout_ints(exec_xrank *x, const int *caps, void **ints_mem, pl_err *e) {
    size_t bh = (size_t)x->d.b * x->d.h, sf = exec_block_state_floats(&x->d);
    size_t n_int = caps_ints(x, caps);
    size_t n_flag = (size_t)x->nst * (size_t)x->M;
    char *im = pl_calloc(n_int * sizeof(int) + n_flag, 1);
    if (!im) return pl_errf(e, PL_ENOMEM, "out of memory (rank %d bookkeeping)", x->r), 0;
    *ints_mem = im;
    int *ip = (int *)(void *)im;
    unsigned char *fp = (unsigned char *)im + n_int * sizeof(int);
    pool_set(&x->in, caps[CAP_IN], bh, &ip);
    pool_set(&x->out, caps[CAP_OUT], bh, &ip);
    pool_set(&x->gin, caps[CAP_GIN], bh, &ip);
    /* every buffer starts on a 64-byte line (slots are padded to 16 floats): aligned GEMM
     * operands, and no line shared by two buffers */
    for (int q = 0; q < x->nst; q++) {
        exec_xstage *st = &x->st[q];
        size_t actf = (size_t)(st->nb - 1) * bh + (size_t)st->nb * sf, wgf = (size_t)(st->nb - 1) * bh;
        pool_set(&st->ver, caps[CAP_OF(q, CAP_VER)], st->pfloats, &ip);
        pool_set(&st->act, caps[CAP_OF(q, CAP_ACT)], actf, &ip);
        pool_set(&st->wg, caps[CAP_OF(q, CAP_WG)], wgf, &ip);
        int **index[STAGE_INDEX_ARRAYS] = {&st->in_of, &st->gin_of, &st->act_of, &st->wg_of, &st->ver_of, &st->out_f, &st->out_b};
        for (int k = 0; k < STAGE_INDEX_ARRAYS; k++, ip += x->M) *index[k] = ip;
        for (int j = 0; j < STAGE_INDEX_ARRAYS * x->M; j++) st->in_of[j] = -1;
        st->flags = fp;
        fp += x->M;
        st->nacc = st->steps = st->steps_new = 0;
        st->cur = 0;
    }
    return caps_floats(x, caps);
}

/* Starts x's memory accounting: what a rank holds from the start (scratch, gradients, optimizer
 * state), as current and peak. */
static void mem_start(exec_xrank *x) {
    size_t bh = (size_t)x->d.b * x->d.h, scr = exec_block_scratch_floats(&x->d);
    int mom = x->cfg->momentum != 0.0;
    memset(&x->cur, 0, sizeof x->cur);
    x->cur.scratch_bytes = (scr + bh) * sizeof(float);
    for (int q = 0; q < x->nst; q++) {
        x->cur.grads_bytes += x->st[q].pfloats * sizeof(float);
        if (mom) x->cur.optim_bytes += x->st[q].pfloats * sizeof(float);
    }
    x->cur.total_bytes = x->cur.scratch_bytes + x->cur.grads_bytes + x->cur.optim_bytes;
    x->peak = x->cur;
    x->pending_in_bytes = 0;
    x->model_peak_bytes = x->cur.grads_bytes + x->cur.optim_bytes;
}

/* Makes the one allocation of the rank (floats, a multiple of a cache line), points the pools
 * into it in layout_ints' order and writes every stage's initial weights. PL_OK or PL_ENOMEM. */
static int layout_floats(exec_xrank *x, size_t floats, pl_err *e) {
    size_t bh = (size_t)x->d.b * x->d.h, scr = exec_block_scratch_floats(&x->d);
    x->arena = exec_lines_alloc(floats, x->cfg->small_pages);
    if (!x->arena) {
        pl_errf(e, PL_ENOMEM, "rank %d: cannot allocate %zu bytes", x->r, floats * sizeof(float));
        pl_err_set_rank(e, x->r);
        return PL_ENOMEM;
    }
    float *p = x->arena;
    x->in.base = p;  p += (size_t)x->in.cap * x->in.stride;
    x->out.base = p; p += (size_t)x->out.cap * x->out.stride;
    x->gin.base = p; p += (size_t)x->gin.cap * x->gin.stride;
    x->scratch = p;  p += exec_line_round(scr + bh);
    for (int q = 0; q < x->nst; q++) {
        exec_xstage *st = &x->st[q];
        st->ver.base = p; p += (size_t)st->ver.cap * st->ver.stride;
        st->act.base = p; p += (size_t)st->act.cap * st->act.stride;
        st->wg.base = p;  p += (size_t)st->wg.cap * st->wg.stride;
        st->grad = p;     p += exec_line_round(st->pfloats);
        st->mom = NULL;
        if (x->cfg->momentum != 0.0) { st->mom = p; p += exec_line_round(st->pfloats); }
        for (int k = 0; k < st->nb; k++)
            exec_block_init(&x->d, x->cfg->init_seed, st->block0 + k, st->ver.base + (size_t)k * exec_block_floats(&x->d));
    }
    return PL_OK;
}

/* Lays out x's bookkeeping (into *ints_mem) and starts its memory accounting; with floats, the
 * arena too. Returns PL_OK or PL_ENOMEM. */
static int layout(exec_xrank *x, const int *caps, int floats, void **ints_mem, pl_err *e) {
    size_t n = layout_ints(x, caps, ints_mem, e);
    if (n == 0) return PL_ENOMEM;
    mem_start(x);
    x->arena_bytes = n * sizeof(float);
    return floats ? layout_floats(x, n, e) : PL_OK;
}

/* Takes the first weight version of every stage (counted as weights in use). */
static int first_versions(exec_xrank *x, pl_err *e) {
    for (int q = 0; q < x->nst; q++) {
        if (exec_xrank_take(x, &x->st[q].ver, &x->cur.weights_bytes, "weight version", e) != 0) return e->code ? e->code : PL_EINTERNAL;
        x->st[q].cur = 0;
    }
    return PL_OK;
}

/* ---------------------------------------------------------------- the dry walk */

/* The bookkeeping of a forward, an input gradient, a weight gradient, a STEP and a SEND or RECV,
 * without their compute or transfer: what every backend's worker does around them. Each
 * returns PL_OK or the error. */
static int dry_f(exec_xrank *x, int s, int j, pl_err *e) {
    exec_xf f;
    if (exec_xrank_f_begin(x, s, j, &f, e) != PL_OK) return e->code;
    exec_xrank_f_end(x, &f, j);
    return PL_OK;
}

static int dry_i(exec_xrank *x, int s, int j, pl_err *e) {
    exec_xi b;
    if (exec_xrank_i_begin(x, s, j, &b, e) != PL_OK) return e->code;
    b.st->flags[j] |= XS_IDONE;
    return PL_OK;
}

static int dry_w(exec_xrank *x, int s, int j, pl_err *e) {
    exec_xstage *st = exec_xrank_w_begin(x, s, j, e);
    if (!st) return e->code;
    exec_xrank_w_end(x, st, j);
    return PL_OK;
}

static int dry_step(exec_xrank *x, int s, pl_err *e) {
    exec_xstage *st;
    int dst;
    if (exec_xrank_step_begin(x, s, &st, &dst, e) != PL_OK) return e->code;
    if (st) exec_xrank_step_end(st, dst);
    return PL_OK;
}

static int dry_comm(exec_xrank *x, const sched_action *a, pl_err *e) {
    if (a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B) {
        int *slotp = exec_xrank_send_begin(x, a, e);
        if (!slotp) return e->code;
        exec_xrank_send_end(x, slotp);
        return PL_OK;
    }
    exec_pool *pool;
    return exec_xrank_recv_begin(x, a, &pool, e) < 0 ? e->code : PL_OK;
}

/* The bookkeeping of action a (its parts, in the order every worker runs them). */
static int dry_action(exec_xrank *x, const sched_action *a, pl_err *e) {
    int rc;
    switch (a->kind) {
    case SCHED_F: return dry_f(x, a->stage, a->mb, e);
    case SCHED_I: return dry_i(x, a->stage, a->mb, e);
    case SCHED_W: return dry_w(x, a->stage, a->mb, e);
    case SCHED_B: return (rc = dry_i(x, a->stage, a->mb, e)) ? rc : dry_w(x, a->stage, a->mb, e);
    case SCHED_OVERLAP:
        rc = dry_f(x, a->stage, a->mb, e);
        if (rc == PL_OK) rc = dry_i(x, a->stage2, a->mb2, e);
        if (rc == PL_OK && a->kind2 == SCHED_B) rc = dry_w(x, a->stage2, a->mb2, e);
        return rc;
    case SCHED_SEND_F:
    case SCHED_SEND_B:
    case SCHED_RECV_F:
    case SCHED_RECV_B: return dry_comm(x, a, e);
    case SCHED_REDUCE_GRAD: return exec_xrank_local(x, a->stage, e) ? PL_OK : PL_EINPUT; /* one replica */
    case SCHED_STEP: return dry_step(x, a->stage, e);
    case SCHED_UNSHARD:
    case SCHED_RESHARD: return PL_OK;
    default: return pl_errf(e, PL_EINPUT, "unknown action kind %d", a->kind);
    }
}

/* Walks rank x's list once without data in pools as large as could ever be needed (caps), which
 * checks the list, and leaves in caps each pool's peak (at least one slot). Returns PL_OK, or an
 * error naming the rank and the action. */
static int dry_walk(exec_xrank *x, int *caps, pl_err *e) {
    caps[CAP_IN] = x->M * x->nst + 1;
    caps[CAP_OUT] = 2 * x->M * x->nst + 1;
    caps[CAP_GIN] = x->M * x->nst + 1;
    for (int q = 0; q < x->nst; q++) {
        caps[CAP_OF(q, CAP_VER)] = x->M + 2;
        caps[CAP_OF(q, CAP_ACT)] = x->M + 1;
        caps[CAP_OF(q, CAP_WG)] = x->M + 1;
    }
    void *im = NULL;
    int rc = layout(x, caps, 0, &im, e);
    if (rc == PL_OK) {
        rc = first_versions(x, e);
        if (rc != PL_OK) {
            pl_err_prefix(e, "rank %d, its weights: ", x->r);
            pl_err_set_rank(e, x->r);
        }
    }
    const sched_rank *rk = x->list;
    for (size_t k = 0; k < rk->n && rc == PL_OK; k++) {
        rc = dry_action(x, &rk->acts[k], e);
        if (rc != PL_OK) exec_xrank_at(x, k, e);
    }
    if (rc == PL_OK) rc = exec_xrank_pass_end_check(x, e);
    if (rc == PL_OK) {
        caps[CAP_IN] = x->in.peak > 0 ? x->in.peak : 1;
        caps[CAP_OUT] = x->out.peak > 0 ? x->out.peak : 1;
        caps[CAP_GIN] = x->gin.peak > 0 ? x->gin.peak : 1;
        for (int q = 0; q < x->nst; q++) {
            caps[CAP_OF(q, CAP_VER)] = x->st[q].ver.peak;
            caps[CAP_OF(q, CAP_ACT)] = x->st[q].act.peak > 0 ? x->st[q].act.peak : 1;
            caps[CAP_OF(q, CAP_WG)] = x->st[q].wg.peak > 0 ? x->st[q].wg.peak : 1;
        }
    }
    free(im);
    return rc;
}

/* ---------------------------------------------------------------- setup */

/* Fills x's stages (those of rank r: their blocks and parameters, the local index of each
 * global stage) and the room for its pending receives. Returns PL_OK or PL_ENOMEM. */
static int stages_of(exec_xrank *x, const sched *s, const int *blocks, pl_err *e) {
    int r = x->sr;
    x->loc = pl_calloc((size_t)s->stages, sizeof *x->loc);
    if (!x->loc) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0; q < s->stages; q++) {
        x->loc[q] = -1;
        if (s->stage_rank[q] == r) x->nst++;
    }
    x->st = pl_calloc(x->nst ? (size_t)x->nst : 1, sizeof *x->st);
    if (!x->st) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (size_t k = 0; k < x->list->n; k++)
        x->cap_pend += x->list->acts[k].kind == SCHED_RECV_F || x->list->acts[k].kind == SCHED_RECV_B;
    x->pend = pl_calloc(x->cap_pend ? (size_t)x->cap_pend : 1, sizeof *x->pend);
    if (!x->pend) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0, n = 0, b0 = 0; q < s->stages; b0 += blocks[q], q++) {
        if (s->stage_rank[q] != r) continue;
        exec_xstage *st = &x->st[n];
        st->stage = q;
        st->block0 = b0;
        st->nb = blocks[q];
        st->pfloats = (size_t)blocks[q] * exec_block_floats(&x->d);
        x->loc[q] = n++;
    }
    return PL_OK;
}

/* Sets x up for executor rank r of layout L (NULL: the schedule's ranks) as far as its dry
 * walk: its stages, then the walk, which leaves in *capsp (allocated, the caller frees) each
 * pool's peak and in x->peak the memory the rank's bookkeeping will account at its peak.
 * Returns PL_OK or the error. */
static int xrank_walk(exec_xrank *x, int r, const exec_layout *L, const sched *s, const exec_config *cfg,
                      const int *blocks, const exec_data *data, double *loss_mb, int **capsp, pl_err *e) {
    memset(x, 0, sizeof *x);
    x->at = -1;
    x->r = r;
    x->s = s;
    x->lay = L;
    x->sr = L ? L->srank[r] : r;
    x->rep = L ? L->rep[r] : 0;
    x->list = L ? &L->list[r] : &s->rank[r];
    x->cfg = cfg;
    exec_dims_of(cfg, &x->d);
    x->M = (int)sched_total_microbatches(s);
    x->data = data;
    x->loss_mb = loss_mb;
    int rc = stages_of(x, s, blocks, e);
    if (rc == PL_OK && L) rc = exec_xrank_reduce_setup(x, e);
    if (rc) return rc;
    *capsp = pl_calloc((size_t)CAP_OF(x->nst, 0), sizeof **capsp);
    if (!*capsp) return pl_errf(e, PL_ENOMEM, "out of memory");
    return dry_walk(x, *capsp, e);
}

/* exec_xrank_init for executor rank r of layout L (NULL: the schedule's ranks). */
static int xrank_init_in(exec_xrank *x, int r, const exec_layout *L, const sched *s, const exec_config *cfg,
                         const int *blocks, const exec_data *data, double *loss_mb, pl_err *e) {
    int *caps = NULL;
    int rc = xrank_walk(x, r, L, s, cfg, blocks, data, loss_mb, &caps, e);
    if (rc == PL_OK) rc = layout(x, caps, 1, &x->ints_mem, e);
    if (rc == PL_OK) rc = first_versions(x, e);
    free(caps);
    return rc;
}

/* exec.h. The dry walk of every executor rank (the bookkeeping the run does around its
 * compute, in list order, so the run accounts the same bytes whatever the timing); a
 * replicated rank reports its replica with the largest total, as exec_fold_replicas does. */
int exec_mem_walk(const sched *s, const exec_config *cfg, exec_mem *out, pl_err *e) {
    memset(out, 0, (size_t)s->ranks * sizeof *out);
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    if (!blocks) return pl_errf(e, PL_ENOMEM, "out of memory");
    exec_layout L;
    int rc = exec_stage_blocks(s, cfg, blocks, e);
    if (rc == PL_OK) rc = exec_layout_build(s, cfg->replicas, &L, e);
    else memset(&L, 0, sizeof L);
    for (int r = 0; r < L.ranks && rc == PL_OK; r++) {
        exec_xrank x;
        int *caps = NULL;
        rc = xrank_walk(&x, r, &L, s, cfg, blocks, NULL, NULL, &caps, e);
        exec_mem *o = &out[L.srank[r]];
        if (rc == PL_OK && x.peak.total_bytes > o->total_bytes) *o = x.peak;
        free(caps);
        exec_xrank_free(&x);
    }
    exec_layout_free(&L);
    free(blocks);
    return rc;
}

/* exec_int.h. Each executor rank's dry walk (as exec_mem_walk), its pools sized as its setup
 * sizes them: the arena exec_lines_alloc takes (weight versions, stashes, buffers, gradients,
 * momentum), the bookkeeping's ints, the pass records and op records, and the slots that can
 * hold a received message at once (see exec_host_need). */
int exec_host_need_of(const sched *s, const exec_config *cfg, const int *blocks, int srank, exec_host_need *out,
                      pl_err *e) {
    memset(out, 0, sizeof *out);
    exec_layout L;
    int rc = exec_layout_build(s, cfg->replicas, &L, e);
    int P = exec_passes_most(cfg), timed = P - cfg->warmup_passes;
    for (int r = 0; r < L.ranks && rc == PL_OK; r++) {
        if (srank >= 0 && L.srank[r] != srank) continue;
        exec_xrank x;
        int *caps = NULL;
        rc = xrank_walk(&x, r, &L, s, cfg, blocks, NULL, NULL, &caps, e);
        if (rc == PL_OK) {
            double arena = (double)exec_lines_bytes(caps_floats(&x, caps), cfg->small_pages);
            arena += (double)caps_ints(&x, caps) * sizeof(int) + (double)x.nst * x.M;
            arena += (double)EXEC_REC_ARRAYS * P * sizeof(double);
            if (cfg->record_ops) arena += (double)x.list->n * (timed > 0 ? timed : 1) * sizeof(exec_op);
            /* a message waits in a mailbox only for a microbatch in flight at a stage boundary:
             * its F output while the sender's stash holds it, its gradient until the receiver's
             * I (the act, in and gin pools' peaks, twice), and a replica's ring pieces */
            int ring = L.width[L.srank[r]] > 1 ? L.width[L.srank[r]] + 1 : 0;
            double held = caps[CAP_IN] + caps[CAP_GIN], recvs = ring;
            for (int q = 0; q < x.nst; q++) held += caps[CAP_OF(q, CAP_ACT)];
            held = 2 * held + ring;
            for (size_t k = 0; k < x.list->n; k++)
                recvs += x.list->acts[k].kind == SCHED_RECV_F || x.list->acts[k].kind == SCHED_RECV_B;
            if (cfg->mailbox_capacity > 0 && cfg->mailbox_capacity < recvs) recvs = cfg->mailbox_capacity;
            if (held > recvs) held = recvs; /* no more than the pass's receives are ever there */
            if (srank < 0) {
                out->arena += arena;
                out->held += held;
                out->ranks++;
            } else if (arena + held > out->arena + out->held) { /* the process runs one replica */
                out->arena = arena;
                out->held = held;
                out->ranks = 1;
            }
        }
        free(caps);
        exec_xrank_free(&x);
    }
    exec_layout_free(&L);
    return rc;
}

int exec_xrank_init(exec_xrank *x, int r, const sched *s, const exec_config *cfg,
                    const int *blocks, const exec_data *data, double *loss_mb, pl_err *e) {
    return xrank_init_in(x, r, NULL, s, cfg, blocks, data, loss_mb, e);
}

int exec_xrank_setup(exec_xrank *x, int r, const sched *s, const exec_config *c, const int *blocks,
                     const exec_data *data, double *loss_mb, pl_err *e) {
    return exec_xrank_setup_in(x, r, NULL, s, c, blocks, data, loss_mb, e);
}

int exec_xrank_setup_in(exec_xrank *x, int r, const exec_layout *L, const sched *s, const exec_config *c,
                        const int *blocks, const exec_data *data, double *loss_mb, pl_err *e) {
    int P = exec_passes_most(c);
    int rc = xrank_init_in(x, r, L, s, c, blocks, data, loss_mb, e);
    if (rc) return rc;
    x->core = -1;
    x->pass_start_s = pl_calloc(EXEC_REC_ARRAYS * (size_t)P, sizeof(double));
    if (!x->pass_start_s) return pl_errf(e, PL_ENOMEM, "out of memory");
    double **arrays[EXEC_REC_ARRAYS] = {&x->pass_start_s, &x->pass_end_s, &x->busy_s, &x->comm_s,
                                        &x->gemm_s, &x->gemm_flops, &x->ready_s, &x->span_s};
    for (int k = 1; k < EXEC_REC_ARRAYS; k++) *arrays[k] = x->pass_start_s + (size_t)k * P;
    if (c->timed_passes_max > c->timed_passes) {
        /* the pass times, then a pass start and end pointer of each executor rank (npeers) */
        size_t ranks = (size_t)(L ? L->ranks : s->ranks), nv = (size_t)c->timed_passes_max;
        x->steady_v = pl_calloc(nv + (2 * ranks * sizeof(void *) + sizeof(double) - 1) / sizeof(double), sizeof(double));
        if (!x->steady_v) return pl_errf(e, PL_ENOMEM, "out of memory");
        x->steady_p = (const double **)(void *)(x->steady_v + nv);
    }
    if (c->record_ops) {
        x->cap_ops = x->list->n * (size_t)(P - c->warmup_passes);
        x->ops = pl_calloc(x->cap_ops ? x->cap_ops : 1, sizeof *x->ops);
        if (!x->ops) return pl_errf(e, PL_ENOMEM, "out of memory for the op records");
    }
    return PL_OK;
}

void exec_xrank_free(exec_xrank *x) {
    free(x->arena);
    free(x->ints_mem);
    free(x->st);
    free(x->loc);
    free(x->pend);
    free(x->red);
    free(x->red_seq);
    free(x->ops);
    free(x->pass_start_s);
    free(x->steady_v);
    exec_prof_worker_free(x->prof);
    memset(x, 0, sizeof *x);
}

/* The stage of rank x that holds its k-th block (its stages in order, each stage's blocks in
 * order), with *k turned into the block's index in that stage; NULL when x holds k blocks or
 * fewer, or the stage has no weights yet. */
static exec_xstage *held_stage(const exec_xrank *x, int *k) {
    for (int q = 0; q < x->nst && *k >= 0; q++) {
        exec_xstage *st = &x->st[q];
        if (*k < st->nb) return st->ver.base ? st : NULL;
        *k -= st->nb;
    }
    return NULL;
}

const float *exec_xrank_held_block(const exec_xrank *x, int k) {
    const exec_xstage *st = held_stage(x, &k);
    return st ? st->ver.base + (size_t)k * exec_block_floats(&x->d) : NULL;
}

int exec_xrank_held_state(const exec_xrank *x, int k, float **w, float **out, float **g, float **mom) {
    exec_xstage *st = held_stage(x, &k);
    if (!st || st->nacc != 0) return 0;
    size_t at = (size_t)k * exec_block_floats(&x->d);
    *w = *out = exec_pool_slot(&st->ver, st->cur) + at;
    /* the slot the stage's next STEP into a new version would take (exec_pool_get's: the first
     * free one), when most of its STEPs so far went into a new version */
    for (int i = 0; 2 * st->steps_new > st->steps && i < st->ver.cap; i++)
        if (st->ver.refs[i] == 0) {
            *out = exec_pool_slot(&st->ver, i) + at;
            break;
        }
    *g = st->grad + at;
    *mom = st->mom ? st->mom + at : NULL;
    return 1;
}

int exec_xrank_steps_each_backward(const exec_xrank *x) {
    int any = 0;
    for (int q = 0; x->s && q < x->s->stages; q++) {
        if (x->s->stage_rank[q] != x->r) continue;
        if (!sched_stage_steps_each_backward(x->s, q)) return 0;
        any = 1;
    }
    return any;
}

const float *exec_xrank_initial_block(const exec_xrank *x, int b) {
    for (int q = 0; q < x->nst; q++) {
        const exec_xstage *st = &x->st[q];
        /* setup wrote block block0 + k's initial weights at ver.base + k floats of a block */
        if (st->ver.base && b >= st->block0 && b < st->block0 + st->nb)
            return st->ver.base + (size_t)(b - st->block0) * exec_block_floats(&x->d);
    }
    return NULL;
}
