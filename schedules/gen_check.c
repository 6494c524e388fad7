/* gen_check.c: the option checks every generator family makes before anything is allocated
 * (gen_basic.c, gen_zb.c): the same rules and messages for both, written once. */
#include <stdio.h>

#include "sched_int.h"

int sched_gen_check_counts(const char *name, const sched_gen_opts *o, pl_err *e) {
    if (!o) return pl_errf(e, PL_EINPUT, "%s: no options given", name);
    if (o->ranks < 1) return pl_errf(e, PL_EINPUT, "%s: --ranks %d must be >= 1", name, o->ranks);
    if (o->ranks > SCHED_MAX_RANKS)
        return pl_errf(e, PL_EINPUT, "%s: --ranks %d exceeds the limit of %d", name, o->ranks, SCHED_MAX_RANKS);
    if (o->microbatches < 1)
        return pl_errf(e, PL_EINPUT, "%s: --microbatches %d must be >= 1", name, o->microbatches);
    return PL_OK;
}

int sched_gen_check_policies(const char *name, const sched_gen_opts *o, pl_err *e) {
    if (o->iterations < 0)
        return pl_errf(e, PL_EINPUT, "%s: --iterations %d must be >= 1 (or 0 for the default)", name,
                       o->iterations);
    if (o->recompute != SCHED_RECOMPUTE_NONE && o->recompute != SCHED_RECOMPUTE_FULL)
        return pl_errf(e, PL_EINPUT, "%s: unknown recomputation policy %d", name, (int)o->recompute);
    return PL_OK;
}

int sched_gen_check_microbatches(const char *name, const sched_gen_params *g, pl_err *e) {
    int64_t mbs = (int64_t)g->m * g->iters;
    if (mbs > SCHED_MAX_MICROBATCHES)
        return pl_errf(e, PL_EINPUT, "%s: --microbatches %d x --iterations %d = %lld exceeds the limit of %d", name,
                       g->m, g->iters, (long long)mbs, SCHED_MAX_MICROBATCHES);
    return PL_OK;
}

int64_t sched_gen_actions(const sched_gen_params *g, int per_cell) {
    return per_cell * ((int64_t)g->p * g->v) * ((int64_t)g->m * g->iters);
}

int sched_gen_check_actions(const char *name, const sched_gen_params *g, int per_cell, pl_err *e) {
    int64_t stages = (int64_t)g->p * g->v, mbs = (int64_t)g->m * g->iters, acts = sched_gen_actions(g, per_cell);
    if ((uint64_t)acts > (uint64_t)SCHED_MAX_ACTIONS)
        return pl_errf(e, PL_EINPUT, "%s: %lld stages x %lld microbatches needs %lld actions, more than the limit of %zu",
                       name, (long long)stages, (long long)mbs, (long long)acts, (size_t)SCHED_MAX_ACTIONS);
    return PL_OK;
}

int sched_gen_check_memory(const char *name, const sched_budget *b, const sched_gen_params *g, int per_cell,
                           pl_err *e) {
    int64_t stages = (int64_t)g->p * g->v, mbs = (int64_t)g->m * g->iters, acts = sched_gen_actions(g, per_cell);
    char what[160];
    snprintf(what, sizeof what, "%s: %lld stages x %lld microbatches (%lld actions)", name, (long long)stages,
             (long long)mbs, (long long)acts);
    return sched_memory_check(b, sched_gen_bytes((uint64_t)acts), what, e);
}

void sched_gen_shape_of(const sched_gen_params *g, int per_cell, sched_shape *out) {
    out->ranks = g->p;
    out->stages = g->p * g->v;
    out->microbatches = (int64_t)g->m * g->iters;
    out->compute_actions = sched_gen_actions(g, per_cell);
}
