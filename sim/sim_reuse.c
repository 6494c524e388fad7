/* sim_reuse.c: the reuse-distance term of a backward's cost. A backward that runs right after
 * its own microbatch's forward on the same stage (nothing computed between them on the rank)
 * finds that forward's activations in cache, and so does a W right after such an I; one that
 * runs after other microbatches' work reads them back from memory. The profile between a run's passes times both (exec/profile.c: its
 * rounds keep 4 microbatches in flight, and one more microbatch runs F, I, W back to back), and
 * the prediction scales each I (B) and W of distance 0 by its rank's measured ratio. The
 * first-touch term likewise scales the first F, I and W of each stage in a rank's list and the
 * later ones by the ratios of a profile round's first microbatch and of its others, and the
 * again term an action that follows the same stage on a rank holding several (sim.h). */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

/* Returns how many compute parts a has: 0 (not a compute), 1, or 2 (an OVERLAP: its forward
 * half, then its backward half). */
static int parts_of(const sched_action *a) {
    return sched_kind_is_compute((sched_kind)a->kind) ? 1 + (a->kind == SCHED_OVERLAP) : 0;
}

/* Sets the stage, microbatch and kind of compute part `part` of a (parts_of). */
static void part_at(const sched_action *a, int part, int *stage, int64_t *mb, int *kind) {
    int ov = a->kind == SCHED_OVERLAP;
    *stage = part ? a->stage2 : a->stage;
    *mb = part ? a->mb2 : a->mb;
    *kind = ov ? (part ? a->kind2 : SCHED_F) : a->kind;
}

/* Returns the global microbatch of a compute action's backward part and its stage and kind: the
 * action itself, or an OVERLAP's second half. */
static void last_part(const sched_action *a, int *stage, int64_t *mb, int *kind) {
    part_at(a, a->kind == SCHED_OVERLAP, stage, mb, kind);
}

/* Returns the flags f, i or w of a part of kind `kind` (a B: i | w; another kind: none). */
static int kind_flags(int kind, int f, int i, int w) {
    return kind == SCHED_F ? f : kind == SCHED_I ? i : kind == SCHED_W ? w : kind == SCHED_B ? i | w : 0;
}

static void mark_hot(sim_reuse *r, const sched *s);
static void mark_again(sim_reuse *r, const sched *s);
static int mark_first(sim_reuse *r, const sched *s);

int sim_reuse_init(sim_reuse *r, const sched *s, pl_err *e) {
    memset(r, 0, sizeof *r);
    r->stages = s->stages;
    r->mbs = sched_total_microbatches(s);
    r->hot = pl_calloc((size_t)s->stages * (size_t)(r->mbs > 0 ? r->mbs : 1), sizeof *r->hot);
    r->i_ratio = pl_calloc((size_t)s->stages, sizeof *r->i_ratio);
    r->w_ratio = pl_calloc((size_t)s->stages, sizeof *r->w_ratio);
    r->first = pl_calloc(SIM_FIRST_KINDS * (size_t)s->stages, sizeof *r->first);
    r->rest = pl_calloc(SIM_FIRST_KINDS * (size_t)s->stages, sizeof *r->rest);
    r->again = pl_calloc(SIM_FIRST_KINDS * (size_t)s->stages, sizeof *r->again);
    r->back = pl_calloc((size_t)s->stages, sizeof *r->back);
    if (!r->hot || !r->i_ratio || !r->w_ratio || !r->first || !r->rest || !r->again || !r->back) {
        sim_reuse_free(r);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    for (int q = 0; q < s->stages; q++) r->i_ratio[q] = r->w_ratio[q] = r->back[q] = 1;
    for (int i = 0; i < SIM_FIRST_KINDS * s->stages; i++) r->first[i] = r->rest[i] = r->again[i] = 1;
    r->hot_on = 1;
    mark_hot(r, s);
    mark_again(r, s);
    if (mark_first(r, s) == 0) return PL_OK;
    sim_reuse_free(r);
    return pl_errf(e, PL_ENOMEM, "out of memory");
}

/* What one compute part of a rank's list (parts_of) is handed to a marker: stage q, global
 * microbatch mb, kind; ctx the marker's own. */
typedef void part_fn(sim_reuse *r, const sched *s, int q, int64_t mb, int kind, void *ctx);

/* Calls fn for each compute part of rank k's list, in list order. */
static void each_part(sim_reuse *r, const sched *s, int k, part_fn *fn, void *ctx) {
    for (size_t i = 0; i < s->rank[k].n; i++) {
        const sched_action *a = &s->rank[k].acts[i];
        for (int part = 0; part < parts_of(a); part++) {
            int q, kind;
            int64_t mb;
            part_at(a, part, &q, &mb, &kind);
            fn(r, s, q, mb, kind, ctx);
        }
    }
}

/* Returns stage q's flags of microbatch mb, or NULL when out of range. */
static uint16_t *flags_at(sim_reuse *r, const sched *s, int q, int64_t mb) {
    return q >= 0 && q < s->stages && mb >= 0 && mb < r->mbs ? &r->hot[(size_t)q * (size_t)r->mbs + (size_t)mb] : NULL;
}

/* mark_first's part: the first of its kinds on its stage (ctx: SIM_FIRST_* met so far per stage). */
static void first_part(sim_reuse *r, const sched *s, int q, int64_t mb, int kind, void *ctx) {
    uint8_t *seen = ctx;
    uint16_t *h = flags_at(r, s, q, mb);
    if (!h) return;
    int f = kind_flags(kind, SIM_FIRST_F, SIM_FIRST_I, SIM_FIRST_W);
    *h |= (uint16_t)(f & ~seen[q]);
    seen[q] |= (uint8_t)f;
}

/* Marks, on every rank, the first F, I (or B) and W (or B) of each stage in list order (an
 * OVERLAP: its forward half and its backward half). Returns 0, or -1 out of memory. */
static int mark_first(sim_reuse *r, const sched *s) {
    uint8_t *seen = pl_calloc((size_t)(s->stages > 0 ? s->stages : 1), 1);
    if (!seen) return -1;
    for (int k = 0; k < s->ranks; k++) each_part(r, s, k, first_part, seen);
    free(seen);
    return 0;
}

/* Marks the distance-0 backwards of every rank's list, and the kind before (SIM_WARM_I,
 * SIM_BACK_F). */
static void mark_hot(sim_reuse *r, const sched *s) {
    int full = s->recompute == SCHED_RECOMPUTE_FULL;
    for (int k = 0; k < s->ranks; k++) {
        int ps = -1, pk = -1; /* the rank's previous compute: its last part's stage, mb, kind */
        int64_t pm = -1;
        for (size_t i = 0; i < s->rank[k].n; i++) {
            const sched_action *a = &s->rank[k].acts[i];
            if (!sched_kind_is_compute((sched_kind)a->kind)) continue;
            int q = a->stage, kind = a->kind;
            int64_t mb = a->mb;
            if (q >= 0 && q < s->stages && mb >= 0 && mb < r->mbs) {
                uint16_t *h = &r->hot[(size_t)q * (size_t)r->mbs + (size_t)mb];
                int after = ps == q && pm == mb; /* the previous compute was this microbatch's */
                /* under full recomputation every backward follows its own recomputed forward */
                if ((kind == SCHED_I || kind == SCHED_B) && (full || (after && pk == SCHED_F))) *h |= SIM_HOT_I;
                /* a W right after its own I, itself at distance 0: F, I, W back to back */
                if (kind == SCHED_W && after && pk == SCHED_I && (*h & SIM_HOT_I)) *h |= SIM_HOT_W;
                /* the kind before: an I right after an F of its stage (another microbatch's, or
                 * its own when the distance-0 term is off); an F right after a B or W of it */
                if ((kind == SCHED_I || kind == SCHED_B) && ps == q && pk == SCHED_F) *h |= SIM_WARM_I;
                if (kind == SCHED_F && ps == q && (pk == SCHED_B || pk == SCHED_W)) *h |= SIM_BACK_F;
            }
            last_part(a, &ps, &pm, &pk);
        }
    }
}

/* The rank's previous compute part, for again_part. */
typedef struct again_prev {
    int q, kind;
} again_prev;

/* mark_again's part: an F again when the rank's previous part was an F on its stage, an I when it
 * was an I or a B there, a W when it was a W or a B there (a B: each half by its own). The same
 * kind only, as the profile times it: on a rank with several stages an F right after a B on its
 * stage ran no faster than one after another stage's work, where one right after an F did
 * (interleaved and looped-bfs, width 768 on 16 rows: 2.87 ms against 2.88 and 2.71 on rank 0;
 * docs/validate_cpu.md, "Again: the same kind only"). */
static void again_part(sim_reuse *r, const sched *s, int q, int64_t mb, int kind, void *ctx) {
    again_prev *prev = ctx;
    uint16_t *h = flags_at(r, s, q, mb);
    int was = q == prev->q ? kind_flags(prev->kind, SIM_AGAIN_F, SIM_AGAIN_I, SIM_AGAIN_W) : 0;
    if (h) *h |= (uint16_t)(was & kind_flags(kind, SIM_AGAIN_F, SIM_AGAIN_I, SIM_AGAIN_W));
    prev->q = q;
    prev->kind = kind;
}

/* Marks, on every rank that holds more than one stage, each compute part whose rank's previous
 * compute part (an OVERLAP's forward half for its backward half) was of the same kind on the same
 * stage (again_part). */
static void mark_again(sim_reuse *r, const sched *s) {
    for (int k = 0; k < s->ranks; k++) {
        int several = 0;
        again_prev prev = {-1, -1};
        for (int q = 0; q < s->stages && several < 2; q++) several += s->stage_rank[q] == k;
        if (several >= 2) each_part(r, s, k, again_part, &prev);
    }
}

void sim_reuse_free(sim_reuse *r) {
    free(r->hot);
    free(r->i_ratio);
    free(r->w_ratio);
    free(r->first);
    free(r->rest);
    free(r->again);
    free(r->back);
    memset(r, 0, sizeof *r);
}

int sim_reuse_flags(const sim_reuse *r, int q, int64_t mb) {
    if (!r || q < 0 || q >= r->stages || r->mbs <= 0) return 0;
    mb %= r->mbs;
    return mb < 0 ? 0 : r->hot[(size_t)q * (size_t)r->mbs + (size_t)mb];
}

/* Returns the first-touch factor of kind c (0 F, 1 I, 2 W) on stage q for flags h: 1 without
 * the term, else the stage's first or rest ratio. */
static double touch(const sim_reuse *r, int q, int c, int h) {
    static const int flag[SIM_FIRST_KINDS] = {SIM_FIRST_F, SIM_FIRST_I, SIM_FIRST_W};
    if (!r->first_on) return 1;
    return h & flag[c] ? r->first[SIM_FIRST_KINDS * q + c] : r->rest[SIM_FIRST_KINDS * q + c];
}

/* Returns the first-touch factor of a distance-0 action of kind c on stage q for flags h: its
 * distance-0 ratio is timed on warm weights (the profile's hot microbatch ends a round), so the
 * first of its kind on the stage takes the first ratio over the rest ratio on top, the others
 * nothing; 1 without the term. */
static double touch_hot(const sim_reuse *r, int q, int c, int h) {
    double t = touch(r, q, c, h), rest = r->first_on ? r->rest[SIM_FIRST_KINDS * q + c] : 1;
    return t == rest ? 1 : t / rest;
}

/* Returns the factor of a part of kind c (0 F, 1 I, 2 W) on stage q with flags h that is not at
 * distance 0: its again ratio when it follows the same stage on its rank and the term is on (the
 * profile times it after its round, with the blocks warm: it replaces the first-touch factor),
 * else the first-touch factor. */
static double factor(const sim_reuse *r, int q, int c, int h) {
    static const int flag[SIM_FIRST_KINDS] = {SIM_AGAIN_F, SIM_AGAIN_I, SIM_AGAIN_W};
    return r->again_on && (h & flag[c]) ? r->again[SIM_FIRST_KINDS * q + c] : touch(r, q, c, h);
}

double sim_reuse_time(const sim_reuse *r, const cost_stage *st, int q, sched_kind k, int64_t mb) {
    int h = sim_reuse_flags(r, q, mb);
    if (!r->hot_on) h &= ~(SIM_HOT_I | SIM_HOT_W);
    double ri = h & SIM_HOT_I ? r->i_ratio[q] : 1, rw = h & SIM_HOT_W ? r->w_ratio[q] : 1;
    int on = r->first_on;
    int warm = r->before_on && (h & SIM_WARM_I);
    switch (k) {
    case SCHED_F: return st->f_s * (r->before_on && (h & SIM_BACK_F) ? r->back[q] : factor(r, q, 0, h));
    case SCHED_I:
        if (h & SIM_HOT_I) return on ? st->i_s * ri * touch_hot(r, q, 1, h) : st->i_s * ri;
        return st->i_s * (warm ? r->i_ratio[q] : factor(r, q, 1, h));
    case SCHED_W:
        if (h & SIM_HOT_W) return on ? st->w_s * rw * touch_hot(r, q, 2, h) : st->w_s * rw;
        return st->w_s * factor(r, q, 2, h);
    /* a B's weight part follows its input part at once: both hot when the B follows its F */
    case SCHED_B: {
        if (h & SIM_HOT_I)
            return on ? st->i_s * ri * touch_hot(r, q, 1, h) + st->w_s * r->w_ratio[q] * touch_hot(r, q, 2, h)
                      : st->i_s * ri + st->w_s * r->w_ratio[q];
        double fi = warm ? r->i_ratio[q] : factor(r, q, 1, h), fw = factor(r, q, 2, h);
        return on || fi != 1 || fw != 1 ? st->i_s * fi + st->w_s * fw : st->b_s;
    }
    default: return 0;
    }
}
