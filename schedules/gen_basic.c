/* gen_basic.c: generators for gpipe, 1f1b, pipedream, 2bw, interleaved 1F1B and looped BFS. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sched_int.h"

/* Compute actions per (stage, microbatch) of this file's generators: F and B. */
#define BASIC_ACTIONS_PER_CELL 2

/* Checks o for generator `name` and fills g with defaults applied. has_chunks says whether
 * the generator takes chunks (otherwise chunks must be 0 or 1); def_chunks and def_iters are
 * the defaults for 0. Every size check (ranks, microbatches * iterations, stages, the number
 * of actions) happens here, before anything is allocated. Returns PL_OK or PL_EINPUT. */
static int gen_check_sizes(const char *name, const sched_gen_opts *o, int has_chunks, int def_chunks,
                     int def_iters, sched_gen_params *g, pl_err *e) {
    int rc = sched_gen_check_counts(name, o, e);
    if (rc != PL_OK) return rc;
    if (o->chunks < 0)
        return pl_errf(e, PL_EINPUT, "%s: --chunks %d must be >= 1 (or 0 for the default)", name,
                       o->chunks);
    if (!has_chunks && o->chunks > 1)
        return pl_errf(e, PL_EINPUT,
                       "%s: has one stage per rank; --chunks %d: it takes 1 (use interleaved "
                       "or looped-bfs for several chunks per rank)",
                       name, o->chunks);
    if ((rc = sched_gen_check_policies(name, o, e)) != PL_OK) return rc;
    g->p = o->ranks;
    g->m = o->microbatches;
    g->v = o->chunks > 0 ? o->chunks : def_chunks;
    g->iters = o->iterations > 0 ? o->iterations : def_iters;
    if ((rc = sched_gen_check_microbatches(name, g, e)) != PL_OK) return rc;
    int64_t stages = (int64_t)g->p * g->v;
    if (g->v > SCHED_MAX_STAGES || stages > SCHED_MAX_STAGES)
        return pl_errf(e, PL_EINPUT, "%s: --ranks %d x --chunks %d = %lld stages exceeds the limit of %d",
                       name, g->p, g->v, (long long)stages, SCHED_MAX_STAGES);
    return sched_gen_check_actions(name, g, BASIC_ACTIONS_PER_CELL, e);
}

/* gen_check_sizes, then the memory the generator's lists take (sched_gen_bytes) against budget b.
 * Returns PL_OK or PL_EINPUT. */
static int gen_check(const char *name, const sched_gen_opts *o, int has_chunks, int def_chunks,
                     int def_iters, const sched_budget *b, sched_gen_params *g, pl_err *e) {
    int rc = gen_check_sizes(name, o, has_chunks, def_chunks, def_iters, g, e);
    if (rc != PL_OK) return rc;
    return sched_gen_check_memory(name, b, g, BASIC_ACTIONS_PER_CELL, e);
}

/* The generators of this file with their gen_check arguments (has_chunks, default chunks,
 * default iterations). */
static const struct {
    const char *name;
    int has_chunks, def_chunks, def_iters;
} basic_kinds[] = {
    {"gpipe", 0, 1, 1}, {"1f1b", 0, 1, 1}, {"pipedream", 0, 1, 4}, {"2bw", 0, 1, 4},
    {"interleaved", 1, 2, 1}, {"looped-bfs", 1, 2, 1},
};

int sched_basic_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e) {
    for (size_t k = 0; k < sizeof basic_kinds / sizeof basic_kinds[0]; k++) {
        if (strcmp(name, basic_kinds[k].name) != 0) continue;
        sched_gen_params g = {0};
        int rc = gen_check_sizes(name, o, basic_kinds[k].has_chunks, basic_kinds[k].def_chunks,
                                 basic_kinds[k].def_iters, &g, e);
        if (rc != PL_OK) return rc;
        sched_gen_shape_of(&g, BASIC_ACTIONS_PER_CELL, out);
        return PL_OK;
    }
    return -1;
}

/* Allocates the empty schedule for checked parameters g (loop placement, p*v stages) and sets
 * its policies. Returns NULL with e filled when sched_new fails. */
static sched *gen_begin(const char *name, const sched_gen_params *g, sched_weights w,
                        sched_recompute rc, pl_err *e) {
    sched *s = sched_new(g->p, g->p * g->v, g->m, SCHED_PLACE_LOOP, NULL, e);
    if (!s) {
        pl_err_prefix(e, "%s: ", name);
        return NULL;
    }
    if (sched_gen_reserve(s, g, BASIC_ACTIONS_PER_CELL) != PL_OK) {
        sched_free(s);
        pl_errf(e, PL_ENOMEM, "%s: out of memory for %d ranks' actions", name, g->p);
        return NULL;
    }
    snprintf(s->kind, sizeof s->kind, "%s", name);
    s->chunks = g->v;
    s->iterations = g->iters;
    s->weights = w;
    s->recompute = rc;
    return s;
}

/* Appends one compute action; returns PL_OK, or PL_ENOMEM with e filled. */
static int push(sched *s, int rank, sched_kind k, int stage, int mb, pl_err *e) {
    if (sched_push(s, rank, sched_act(k, stage, mb)) != PL_OK)
        return pl_errf(e, PL_ENOMEM, "%s: out of memory while generating rank %d", s->kind, rank);
    return PL_OK;
}

/* Emits one-forward-one-backward on rank r holding one stage, for the `count` microbatches
 * mb0 .. mb0+count-1: warm-up of min(p-r-1, count) forwards, then F of the next microbatch
 * followed by B of the oldest, then the remaining backwards. At most min(p-r, count)
 * microbatches are ever in flight. Returns PL_OK or PL_ENOMEM. */
static int emit_1f1b_warm(sched *s, int r, int64_t warm, int64_t mb0, int64_t count, pl_err *e);
static int emit_1f1b(sched *s, int r, int p, int64_t mb0, int64_t count, pl_err *e) {
    return emit_1f1b_warm(s, r, p - r - 1, mb0, count, e);
}

/* emit_1f1b with an explicit warm-up of `warm` forwards (capped at count). */
static int emit_1f1b_warm(sched *s, int r, int64_t warm, int64_t mb0, int64_t count, pl_err *e) {
    if (warm > count) warm = count;
    int rc = PL_OK;
    for (int64_t i = 0; i < warm && rc == PL_OK; i++)
        rc = push(s, r, SCHED_F, r, (int)(mb0 + i), e);
    for (int64_t j = 0; j < count - warm && rc == PL_OK; j++) {
        rc = push(s, r, SCHED_F, r, (int)(mb0 + warm + j), e);
        if (rc == PL_OK) rc = push(s, r, SCHED_B, r, (int)(mb0 + j), e);
    }
    for (int64_t j = count - warm; j < count && rc == PL_OK; j++)
        rc = push(s, r, SCHED_B, r, (int)(mb0 + j), e);
    return rc;
}

/* Frees s and returns NULL: the common failure exit after a push failed. */
static sched *gen_fail(sched *s) {
    sched_free(s);
    return NULL;
}

/* GPipe: per rank, all forwards of the iteration's microbatches, then all backwards in the
 * same microbatch order (PyTorch ScheduleGPipe); a flush per iteration. Returns the schedule
 * or NULL with e filled. */
sched *sched_gen_gpipe(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (gen_check("gpipe", o, 0, 1, 1, b, &g, e) != PL_OK) return NULL;
    sched *s = gen_begin("gpipe", &g, SCHED_WEIGHTS_FLUSH, o->recompute, e);
    if (!s) return NULL;
    for (int r = 0; r < g.p; r++)
        for (int k = 0; k < g.iters; k++) {
            int mb0 = k * g.m;
            for (int i = 0; i < g.m; i++)
                if (push(s, r, SCHED_F, r, mb0 + i, e) != PL_OK) return gen_fail(s);
            for (int i = 0; i < g.m; i++)
                if (push(s, r, SCHED_B, r, mb0 + i, e) != PL_OK) return gen_fail(s);
        }
    return s;
}

/* 1F1B (PipeDream-Flush): each iteration is a complete 1F1B block (warm-up, steady state,
 * cool-down) and ends with a flush. Returns the schedule or NULL with e filled. */
sched *sched_gen_1f1b(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (gen_check("1f1b", o, 0, 1, 1, b, &g, e) != PL_OK) return NULL;
    sched *s = gen_begin("1f1b", &g, SCHED_WEIGHTS_FLUSH, o->recompute, e);
    if (!s) return NULL;
    for (int r = 0; r < g.p; r++)
        for (int k = 0; k < g.iters; k++)
            if (emit_1f1b(s, r, g.p, (int64_t)k * g.m, g.m, e) != PL_OK) return gen_fail(s);
    return s;
}

/* Shared body of pipedream and 2bw: one continuous 1F1B over all m*iterations microbatches
 * (warm-up only at the start, drain only at the end: no flush). Returns the schedule or NULL
 * with e filled. */
static sched *gen_async_1f1b(const char *name, sched_weights w, const sched_gen_opts *o,
                             const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (gen_check(name, o, 0, 1, 4, b, &g, e) != PL_OK) return NULL;
    sched *s = gen_begin(name, &g, w, o->recompute, e);
    if (!s) return NULL;
    int64_t total = (int64_t)g.m * g.iters;
    for (int r = 0; r < g.p; r++)
        if (emit_1f1b(s, r, g.p, 0, total, e) != PL_OK) return gen_fail(s);
    return s;
}

/* PipeDream (asynchronous 1F1B with weight stashing, default 4 iterations). Returns the
 * schedule or NULL with e filled. */
sched *sched_gen_pipedream(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    return gen_async_1f1b("pipedream", SCHED_WEIGHTS_STASH, o, b, e);
}

/* PipeDream-2BW: PipeDream's order with double-buffered weights (default 4 iterations).
 * Returns the schedule or NULL with e filled. */
sched *sched_gen_2bw(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    return gen_async_1f1b("2bw", SCHED_WEIGHTS_2BW, o, b, e);
}

/* Megatron's microbatch group size per virtual stage (microbatch_group_size_per_vp_stage)
 * for m microbatches on p ranks. Megatron requires p <= N <= m and that the last group
 * (m mod N) be empty or hold at least p microbatches; it defaults to N = p, which serves
 * every m that is a multiple of p. For other m >= p we take the smallest N that Megatron
 * accepts (one always exists: N = m). For m < p Megatron refuses, but PyTorch's
 * ScheduleInterleaved1F1B runs one round of m microbatches, so N = m. Returns N. */
static int interleaved_group(int m, int p) {
    if (m < p) return m;
    for (int n = p; n < m; n++) {
        int rem = m % n;
        if (rem == 0 || rem >= p) return n;
    }
    return m;
}

/* A place in Megatron's schedule table of interleaved 1F1B: microbatches go in groups of n
 * (the last group may be shorter); within a group every chunk runs the group's microbatches
 * before the next chunk. Walked one virtual microbatch (0 .. m*v-1) at a time. */
typedef struct ilv_cursor {
    int m, v, n, full; /* full: groups of exactly n microbatches */
    int grp, chunk, j; /* the group, the chunk, the microbatch within the group */
} ilv_cursor;

/* Returns a cursor at virtual microbatch 0 of the table of m microbatches, v chunks, groups of n. */
static ilv_cursor ilv_start(int m, int v, int n) { return (ilv_cursor){m, v, n, m / n, 0, 0, 0}; }

/* Returns the microbatch at cursor u (its chunk is u->chunk). */
static int ilv_mb(const ilv_cursor *u) { return u->grp * u->n + u->j; }

/* Moves cursor u to the next virtual microbatch. */
static void ilv_next(ilv_cursor *u) {
    int len = u->grp < u->full ? u->n : u->m - u->full * u->n;
    if (++u->j < len) return;
    u->j = 0;
    if (++u->chunk < u->v) return;
    u->chunk = 0;
    u->grp++;
}

/* Interleaved 1F1B (Megatron-LM virtual pipeline): rank r holds stages r, r+p, ..., r+(v-1)p.
 * Forwards follow Megatron's schedule table (groups of n microbatches per chunk), backwards
 * the same table with the chunk order reversed; warm-up is 2(p-r-1) + (v-1)n forwards
 * (capped at m*v), then one forward and one backward, then the remaining backwards. With
 * v = 1 the warm-up is Megatron's non-interleaved p-r-1 and the order equals 1f1b's.
 * Returns the schedule or NULL with e filled. */
sched *sched_gen_interleaved(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (gen_check("interleaved", o, 1, 2, 1, b, &g, e) != PL_OK) return NULL;
    int p = g.p, m = g.m, v = g.v;
    int n = v > 1 ? interleaved_group(m, p) : 1;
    sched *s = gen_begin("interleaved", &g, SCHED_WEIGHTS_FLUSH, o->recompute, e);
    if (!s) return NULL;
    int64_t total = (int64_t)m * v;
    for (int r = 0; r < p; r++) {
        int64_t warm = v > 1 ? 2 * (int64_t)(p - r - 1) + (int64_t)(v - 1) * n : p - r - 1;
        if (warm > total) warm = total;
        for (int k = 0; k < g.iters; k++) {
            int mb0 = k * m;
            int64_t fi = 0, bi = 0; /* next forward / backward virtual microbatch */
            ilv_cursor fu = ilv_start(m, v, n), bu = fu;
            while (fi < total || bi < total) {
                /* warm-up: forwards only; steady: F then B; cool-down: backwards only */
                if (fi < total) {
                    if (push(s, r, SCHED_F, fu.chunk * p + r, mb0 + ilv_mb(&fu), e) != PL_OK) return gen_fail(s);
                    ilv_next(&fu);
                    fi++;
                    if (fi <= warm) continue;
                }
                if (push(s, r, SCHED_B, (v - 1 - bu.chunk) * p + r, mb0 + ilv_mb(&bu), e) != PL_OK)
                    return gen_fail(s);
                ilv_next(&bu);
                bi++;
            }
        }
    }
    return s;
}

/* Looped BFS (PyTorch ScheduleLoopedBFS): rank r runs all forwards of its first local stage,
 * then of its next local stage, ...; then the backwards of its local stages in reverse stage
 * order, each over the microbatches in reverse order (as PyTorch does). Any m and v work.
 * Returns the schedule or NULL with e filled. */
sched *sched_gen_looped_bfs(const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    sched_gen_params g;
    if (gen_check("looped-bfs", o, 1, 2, 1, b, &g, e) != PL_OK) return NULL;
    sched *s = gen_begin("looped-bfs", &g, SCHED_WEIGHTS_FLUSH, o->recompute, e);
    if (!s) return NULL;
    for (int r = 0; r < g.p; r++)
        for (int k = 0; k < g.iters; k++) {
            int mb0 = k * g.m;
            for (int c = 0; c < g.v; c++)
                for (int i = 0; i < g.m; i++)
                    if (push(s, r, SCHED_F, c * g.p + r, mb0 + i, e) != PL_OK) return gen_fail(s);
            for (int c = g.v - 1; c >= 0; c--)
                for (int i = g.m - 1; i >= 0; i--)
                    if (push(s, r, SCHED_B, c * g.p + r, mb0 + i, e) != PL_OK) return gen_fail(s);
        }
    return s;
}

/* 1f1b, pipedream and 2bw with data-parallel replicas per stage (PipeDream's 1F1B-RR): the
 * replica k mod n of a stage replicated n ways runs microbatch k, and each replica warms up
 * with PipeDream's count, (workers - 1 - workers of the earlier stages) / n (integer division;
 * workers = the sum of replicas; the runtime's num_warmup_minibatches, so the input stage keeps
 * NOAM = ceil(workers / n) microbatches in flight per replica). A rank's list interleaves its
 * replicas' lists, so its warm-up is n times the replica's: a simulator stream that walks the
 * microbatches k = j mod n of the list sees exactly replica j's order. replicas NULL or all 1
 * gives sched_generate's schedule. Other kinds are generated as sched_generate does. */
sched *sched_gen_replicated(const char *name, const sched_gen_opts *o, const int *replicas, const sched_budget *b,
                            pl_err *e) {
    int kind = !name ? -1 : strcmp(name, "1f1b") == 0 ? 0 : strcmp(name, "pipedream") == 0 ? 1
                          : strcmp(name, "2bw") == 0 ? 2 : -1;
    int any = 0;
    if (kind >= 0 && replicas)
        for (int q = 0; q < o->ranks; q++) {
            if (replicas[q] < 1) {
                pl_errf(e, PL_EINPUT, "%s: stage %d has %d replicas (at least 1)", name, q, replicas[q]);
                return NULL;
            }
            if (replicas[q] > 1) any = 1;
        }
    if (!any) return sched_generate_within(name, o, b, e);
    sched_gen_params g;
    if (gen_check(name, o, 0, 1, kind == 0 ? 1 : 4, b, &g, e) != PL_OK) return NULL;
    sched *s = gen_begin(name, &g, kind == 0 ? SCHED_WEIGHTS_FLUSH : kind == 1 ? SCHED_WEIGHTS_STASH : SCHED_WEIGHTS_2BW,
                         o->recompute, e);
    if (!s) return NULL;
    int64_t workers = 0, before = 0;
    for (int r = 0; r < g.p; r++) workers += replicas[r];
    for (int r = 0; r < g.p; r++) {
        int64_t n = replicas[r], left = workers - 1 - before;
        int64_t warm = n * (left > 0 ? left / n : 0);
        before += n;
        if (kind == 0) {
            for (int k = 0; k < g.iters; k++)
                if (emit_1f1b_warm(s, r, warm, (int64_t)k * g.m, g.m, e) != PL_OK) return gen_fail(s);
        } else if (emit_1f1b_warm(s, r, warm, 0, (int64_t)g.m * g.iters, e) != PL_OK) {
            return gen_fail(s);
        }
    }
    return s;
}
