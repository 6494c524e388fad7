/* sim_setup.c: what a simulation decides before sim_run: replicas per stage, the iteration count
 * and warm-up of a schedule with replicated stages, and the model side of a run (sim.h). */
#include "sim.h"

#include <string.h>

/* Returns PL_OK after writing spec's replicas into replicas[stages], or PL_EINPUT naming the
 * --replicas-stage flag whose stage the schedule lacks (see sim.h). */
int sim_replicas_apply(const sim_replica_spec *spec, int stages, int *replicas, pl_err *e) {
    if (spec->all > 0)
        for (int q = 0; q < stages; q++) replicas[q] = spec->all;
    for (int i = 0; i < spec->n; i++) {
        if (spec->stage[i] < 0 || spec->stage[i] >= stages)
            return pl_errf(e, PL_EINPUT, "--replicas-stage %d=%d: the schedule has stages 0..%d", spec->stage[i],
                           spec->count[i], stages - 1);
        replicas[spec->stage[i]] = spec->count[i];
    }
    return PL_OK;
}

/* Returns the most replicas of any of the stages (1 when none is replicated). */
static int widest_replicas(const int *replicas, int stages) {
    int widest = 1;
    for (int q = 0; q < stages; q++)
        if (replicas[q] > widest) widest = replicas[q];
    return widest;
}

/* Returns the iterations to generate with: the given count, or enough for replicated stages to
 * settle (see sim.h). */
int sim_replicated_iterations(int iterations, sched_weights weights, const int *replicas, int stages,
                              int microbatches) {
    int widest = widest_replicas(replicas, stages);
    if (iterations != 0 || weights == SCHED_WEIGHTS_FLUSH || widest == 1) return iterations;
    int per_replica = SIM_REPLICATED_ITERS_PER_REPLICA * widest;
    int n = per_replica > SIM_REPLICATED_ITERS_MIN ? per_replica : SIM_REPLICATED_ITERS_MIN;
    int cycles = sched_async_iterations(stages, microbatches, replicas); /* a whole cycle, the drain apart */
    return cycles > n ? cycles : n;
}

int sim_async_schedule(const char *kind, const sched_gen_opts *g, const sched_budget *b, int iterations, sched **s,
                       pl_err *e) {
    if (!kind || g->iterations != 0 || (*s)->weights == SCHED_WEIGHTS_FLUSH) return PL_OK;
    sched_gen_opts go = *g;
    go.iterations = iterations > 0 ? iterations : sched_async_iterations((*s)->stages, go.microbatches, NULL);
    if (go.iterations == sched_iterations(*s)) return PL_OK;
    sched *gen = sched_generate_within(kind, &go, b, e);
    if (!gen) return e->code ? e->code : PL_EINPUT;
    sched *out = (*s)->lowered ? sched_lower_within(gen, b, e) : gen;
    if (out != gen) sched_free(gen);
    if (!out) return e->code ? e->code : PL_EINPUT;
    sched_free(*s);
    *s = out;
    return PL_OK;
}

/* Returns PL_OK after regenerating *s with the replicas' warm-up when a generated schedule has a
 * replicated stage (else leaving it), or an error in e (see sim.h). */
int sim_replicated_schedule(const char *kind, const sched_gen_opts *g, const sched_budget *b, const int *replicas,
                            sched **s, pl_err *e) {
    if (!kind || widest_replicas(replicas, (*s)->stages) == 1) return PL_OK;
    sched_gen_opts go = *g;
    go.iterations = sim_replicated_iterations(go.iterations, (*s)->weights, replicas, (*s)->stages, go.microbatches);
    sched *gen = sched_gen_replicated(kind, &go, replicas, b, e);
    if (!gen) return e->code ? e->code : PL_EINPUT;
    if (sched_validate(gen, e) != PL_OK) {
        sched_free(gen);
        return PL_EINPUT;
    }
    sched *lowered = sched_lower_within(gen, b, e);
    sched_free(gen);
    if (!lowered) return e->code ? e->code : PL_EINPUT;
    sched_free(*s);
    *s = lowered;
    return PL_OK;
}

/* Frees the adapter, the partition and the model, and zeroes ms (safe after errors). */
void sim_model_setup_free(sim_model_setup *ms) {
    sim_model_free(&ms->sm);
    cost_partition_free(ms->p);
    cost_model_free(ms->m);
    memset(ms, 0, sizeof *ms);
}

/* Returns PL_OK, or an error in e, after checking that partition p (NULL: its maker failed, e
 * says why) has the schedule's stage count; `what` names where p came from. Frees p on error. */
static int check_stages(cost_partition *p, const sched *s, const char *what, pl_err *e) {
    if (!p) return e->code ? e->code : PL_EINPUT;
    if (p->stages == s->stages) return PL_OK;
    pl_errf(e, PL_EINPUT, "%s: the partition has %d stage%s but the schedule (%s, %d ranks) has %d stages", what,
            p->stages, p->stages == 1 ? "" : "s", s->kind, s->ranks, s->stages);
    cost_partition_free(p);
    return PL_EINPUT;
}

/* sim.h. Returns the partition, or NULL and e. */
cost_partition *sim_partition_read(const char *path, const sched *s, int layers, const char *model, pl_err *e) {
    cost_partition *p = NULL;
    if (cost_partition_read(path, &p, e) != PL_OK) return NULL;
    if (check_stages(p, s, path, e) != PL_OK) return NULL;
    if (cost_partition_check(p, layers > 0 ? layers : p->bound[p->stages], e) != PL_OK) {
        pl_err_prefix(e, "%s: model %s: ", path, model);
        cost_partition_free(p);
        return NULL;
    }
    return p;
}

/* Returns the partition read from spec->partition, checked against the schedule's stages and
 * the model's layers (so its errors name the file), or NULL and e. */
static cost_partition *partition_file(const sim_model_spec *spec, const sched *s, const cost_model *m, pl_err *e) {
    return sim_partition_read(spec->partition, s, m->n, m->name, e);
}

/* Returns the partition spec names for schedule s (a file, a split, a balanced split, or even
 * over s->stages) with the replicas spec asks for, and sets ms->psource; NULL and e on error. */
static cost_partition *pick_partition(const sim_model_spec *spec, const sched *s, sim_model_setup *ms, pl_err *e) {
    cost_partition *p = NULL;
    if (spec->partition) {
        ms->psource = "file";
        if (!(p = partition_file(spec, s, ms->m, e))) return NULL;
    } else {
        if (spec->split) {
            p = cost_partition_parse(spec->split, ms->m->n, e);
            ms->psource = "split";
        } else if (spec->balance) {
            p = sim_model_balance(ms->m, ms->have_hw ? &ms->hw : NULL, &ms->co, s->stages, e);
            ms->psource = "balance";
        } else {
            p = cost_partition_even(ms->m->n, s->stages, e);
            if (!p) pl_err_prefix(e, "model %s: ", ms->m->name);
            ms->psource = "even";
        }
        if (check_stages(p, s, spec->split ? "--split" : "--balance", e) != PL_OK) return NULL;
    }
    if (sim_replicas_apply(&spec->replicas, p->stages, p->replicas, e) != PL_OK) {
        cost_partition_free(p);
        return NULL;
    }
    return p;
}

/* Returns PL_OK after loading spec's hardware into ms (with its overrides, checked), or when
 * spec names none; else an error in e. */
int sim_setup_load_hardware(const sim_model_spec *spec, sim_model_setup *ms, pl_err *e) {
    if (!spec->hardware) return PL_OK;
    if (cost_hw_load(&ms->hw, spec->hardware, e) != PL_OK) return PL_EINPUT;
    for (int k = 0; k < spec->nsets; k++)
        if (cost_hw_set_kv(&ms->hw, spec->sets[k], e) != PL_OK) return PL_EINPUT;
    if (cost_hw_check(&ms->hw, e) != PL_OK) return PL_EINPUT;
    ms->have_hw = 1;
    return PL_OK;
}

/* Returns PL_OK after filling ms->co from the model's defaults and spec's overrides, or
 * PL_EINPUT for a precision or W stash fraction out of range. */
static int cost_options(const sim_model_spec *spec, sim_model_setup *ms, pl_err *e) {
    cost_opts_init(&ms->co, ms->m);
    if (spec->microbatch_size > 0) ms->co.microbatch_size = spec->microbatch_size;
    if (spec->precision) {
        int prec = cost_precision_parse(spec->precision);
        if (prec < 0) return pl_errf(e, PL_EINPUT, "unknown precision '%s' (fp32, tf32, fp16 or bf16)", spec->precision);
        ms->co.precision = (cost_precision)prec;
    }
    if (spec->optimizer_bytes_per_param >= 0) ms->co.optimizer_bytes_per_param = spec->optimizer_bytes_per_param;
    if (!(spec->w_stash_fraction < 0)) { /* NaN is refused below, like any value past 1 */
        if (!(spec->w_stash_fraction <= 1))
            return pl_errf(e, PL_EINPUT, "the W stash fraction must be in [0, 1] (got %g)", spec->w_stash_fraction);
        ms->co.w_stash_fraction = spec->w_stash_fraction;
    }
    return PL_OK;
}

/* Fills spec with nothing asked for: the model's and cost_opts_init's defaults throughout. */
void sim_model_spec_init(sim_model_spec *spec) {
    memset(spec, 0, sizeof *spec);
    spec->optimizer_bytes_per_param = -1;
    spec->w_stash_fraction = -1;
}

/* Returns PL_OK after building the model side of schedule s from spec into ms, or the first
 * error in e; ms holds what was made either way (see sim.h). */
int sim_model_setup_build(sim_model_setup *ms, const sim_model_spec *spec, const sched *s, pl_err *e) {
    memset(ms, 0, sizeof *ms);
    if (spec->layout) return sim_layout_setup_build(ms, spec, s, e);
    ms->m = cost_model_open(spec->model, e);
    if (!ms->m) return e->code ? e->code : PL_EINPUT;
    int rc = sim_setup_load_hardware(spec, ms, e);
    if (rc == PL_OK) rc = cost_options(spec, ms, e);
    if (rc != PL_OK) return rc;
    ms->p = pick_partition(spec, s, ms, e);
    if (!ms->p) return e->code ? e->code : PL_EINPUT;
    rc = sim_model_init(&ms->sm, s, ms->m, ms->p, ms->have_hw ? &ms->hw : NULL, &ms->co, e);
    if (rc == PL_EINPUT && !ms->have_hw) pl_err_prefix(e, "without --hardware: ");
    return rc;
}
