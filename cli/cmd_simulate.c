/* cmd_simulate.c: `pipelab simulate`: generate or load a schedule, lower it, run the
 * discrete-event simulator with flag-driven costs or with a model on hardware (the cost-model
 * module through sim_setup), print metrics and store the run. This file drives those steps; the
 * flags are parsed in simulate_opts.c, the outputs written in simulate_out.c and
 * simulate_params.c, and the database handled in simulate_store.c (simulate_int.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate_int.h"

/* ---------------------------------------------------------------- the run */

/* What one simulation holds from the schedule to the outputs. */
typedef struct job {
    sched *s;              /* lowered, or compute-only (needs_lowered) */
    sim_model_setup ms;    /* the model side (--model) */
    cost_hw ar_link;       /* the profile's measured all-reduce (ms.sm.allreduce_link), when used */
    sim_basic scaled;      /* o.b with the uniform values per stage (--time-per); outlives costs */
    int *replicas;         /* [stages] a flag run's replicas per stage */
    sim_costs costs;
    sim_result r;          /* the median run (sim_repeat) */
    sim_repeat_stats st;
} job;

/* Returns 1 when the run needs the lowered schedule up front: a trace (it shows the sends and
 * receives), blocking comm, random compute times or a shared inter-node link (the heap engine's
 * cases; with --repeat, lowered once). Otherwise the simulator runs the compute-only schedule
 * with its transfers implied, and lowers it itself when it cannot. */
static int needs_lowered(const opts *o) {
    return o->trace || o->trace_json || o->c.blocking_comm || o->c.cv > 0 ||
           (o->c.shared_inter_link && o->c.ranks_per_node > 0);
}

/* Loads or generates and validates the schedule, and lowers it when the run needs it (a
 * compute-only schedule is validated by its lowering, or without the dry run when the simulator
 * runs it as it is: its stall names the waiting cycle); NULL and e on error. */
static sched *get_schedule(const opts *o, pl_err *e) {
    sched *s = cli_sched_load(&o->a, o->trace || o->trace_json ? SCHED_MEM_TRACE : SCHED_MEM_SIMULATE, e);
    if (!s) return NULL;
    if (s->lowered || !needs_lowered(o)) { /* used as it is */
        if ((s->lowered ? sched_validate(s, e) : sched_check_actions(s, e)) == PL_OK) return s;
        sched_free(s);
        return NULL;
    }
    sched *l = sched_lower_within(s, &o->a.budget, e);
    sched_free(s);
    return l;
}

/* Returns the generator kind a replicated schedule is generated again with (NULL: loaded). */
static const char *regen_kind(const opts *o) { return o->a.from ? NULL : o->a.kind; }

/* Returns the most iterations a grown run takes: sched_async_room's microbatches over the m of
 * an iteration. */
static int64_t room_iterations(const job *j) {
    int m = j->s->microbatches > 0 ? j->s->microbatches : 1;
    return sched_async_room(m) / m;
}

/* Returns 1 when n iterations of the schedule fit the memory budget: the whole command's, as
 * cli_sched_load checks the first schedule (sched_check_command_memory). */
static int memory_fits(const opts *o, int64_t n) {
    if (n < 1 || n > INT32_MAX) return 0;
    sched_gen_opts go = o->a.g;
    go.iterations = (int)n;
    sched_shape sh;
    pl_err e;
    pl_err_clear(&e);
    return sched_gen_shape(regen_kind(o), &go, &sh, &e) == PL_OK &&
           sched_check_command_memory(regen_kind(o), &sh, o->trace || o->trace_json ? SCHED_MEM_TRACE : SCHED_MEM_SIMULATE,
                                      &o->a.budget, &e) == PL_OK;
}

/* Generates an asynchronous schedule again for simulate's steady state (sim_async_schedule), or
 * a replicated one with its replicas' warm-up (sim_replicated_schedule, replicas per stage), with
 * `iterations` (0: their own counts, sim_replicated_iterations' or sched_async_iterations'; the
 * generator's when those do not fit the memory budget: memory_fits) when none were given.
 * Returns PL_OK or an error in e. */
static int regenerate(const opts *o, job *j, const int *replicas, int iterations, pl_err *e) {
    sched_gen_opts go = o->a.g;
    if (iterations == 0 && go.iterations == 0 && regen_kind(o) && j->s->weights != SCHED_WEIGHTS_FLUSH) {
        int n = sim_replicated_iterations(0, j->s->weights, replicas, j->s->stages, go.microbatches);
        if (n == 0) n = sched_async_iterations(j->s->stages, go.microbatches, NULL);
        if (!memory_fits(o, n)) iterations = sched_iterations(j->s);
    }
    int replicated = 0;
    for (int q = 0; replicas && q < j->s->stages; q++) replicated |= replicas[q] > 1;
    if (!replicated) /* else sim_replicated_schedule generates it, iterations and all */
        return sim_async_schedule(regen_kind(o), &go, &o->a.budget, iterations, &j->s, e) != PL_OK ? PL_EINPUT : PL_OK;
    if (go.iterations == 0) go.iterations = iterations;
    return sim_replicated_schedule(regen_kind(o), &go, &o->a.budget, replicas, &j->s, e) != PL_OK ? PL_EINPUT : PL_OK;
}

/* Builds the model side of the run (sim_setup), regenerates a replicated schedule, and fills
 * the config and j->costs from the model. Returns PL_OK or an error in e. */
static int model_costs(opts *o, job *j, pl_err *e) {
    if (sim_model_setup_build(&j->ms, &o->spec, j->s, e) != PL_OK) return PL_EINPUT;
    if (regenerate(o, j, j->ms.sm.replicas, 0, e) != PL_OK) return PL_EINPUT;
    int replicated = 0;
    for (int q = 0; q < j->ms.sm.stages; q++) replicated |= j->ms.sm.replicas[q] > 1;
    o->ar_used = o->spec.layout ? -1 : cli_allreduce_link("simulate", j->ms.m, o->ar_link, replicated, "the hardware's links",
                                                          &j->ar_link);
    if (o->ar_used >= 0) j->ms.sm.allreduce_link = &j->ar_link;
    int64_t cap_bytes = o->c.capacity_bytes;
    sim_model_config(&j->ms.sm, &o->c);
    if (o->have_cap) o->c.capacity_bytes = cap_bytes; /* --capacity 0 turns the verdict off */
    o->ms = &j->ms;
    j->costs = sim_model_costs(&j->ms.sm);
    if (o->fail_on_oom && o->c.capacity_bytes <= 0)
        return pl_errf(e, PL_EINPUT, "--fail-on-oom: hardware %s has no device.memory_bytes; give --capacity", j->ms.sm.hw.name);
    return PL_OK;
}

/* Checks the flag-driven costs, reads --stage-costs, scales the uniform values per stage,
 * applies the replicas (regenerating a replicated schedule) and fills j->costs. Returns PL_OK
 * or an error in e. */
static int flag_costs(opts *o, job *j, pl_err *e) {
    if (sim_basic_check(&o->b, e) != PL_OK) return PL_EINPUT;
    if (o->stage_costs && sim_basic_load_csv(&o->b, o->stage_costs, j->s->stages, e) != PL_OK) return PL_EINPUT;
    o->share = sim_time_per_share(o->time_per, j->s->ranks, j->s->stages); /* the pipeline's, before replicas */
    j->scaled = sim_basic_scaled(&o->b, o->share);
    j->replicas = pl_calloc((size_t)j->s->stages, sizeof *j->replicas);
    if (!j->replicas) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0; q < j->s->stages; q++) j->replicas[q] = 1;
    if (sim_replicas_apply(&o->spec.replicas, j->s->stages, j->replicas, e) != PL_OK) return PL_EINPUT;
    if (regenerate(o, j, j->replicas, 0, e) != PL_OK) return PL_EINPUT;
    o->c.replicas = j->replicas;
    j->costs = sim_basic_costs(&j->scaled);
    return PL_OK;
}

/* Runs the simulation --repeat times (with a progress bar) into j->st, the median run into j->r,
 * recording its trace when `trace` is 1 and --trace or --trace-json asked for it. Returns PL_OK
 * or an error in e. */
static int run_simulation(opts *o, job *j, int trace, pl_err *e) {
    o->c.record_trace = trace && (o->trace || o->trace_json);
    char what[sizeof "pipelab simulate: , -2147483648 ranks" + sizeof j->s->kind];
    snprintf(what, sizeof what, "pipelab simulate: %s, %d ranks", j->s->kind, j->s->ranks);
    /* the runs, and the median one run again (sim_repeat) */
    o->c.progress = pl_progress_start(what, (uint64_t)(o->repeat + (o->repeat > 1)) * sched_total_actions(j->s));
    int rc = sim_repeat(j->s, &j->costs, &o->c, o->repeat, &j->st, &j->r, e);
    pl_progress_end(o->c.progress);
    o->c.progress = NULL;
    return rc;
}

/* Returns 1 when a run may be grown (run_grown): a generated asynchronous schedule whose
 * iterations were not given, run deterministically (random gaps never repeat). */
static int growable(const opts *o, const job *j) {
    return regen_kind(o) && o->a.g.iterations == 0 && j->s->weights != SCHED_WEIGHTS_FLUSH && !o->c.whole_run &&
           !(o->c.cv > 0) && !(o->c.rank_cv > 0);
}

/* Runs the simulation (run_simulation), and again with more iterations until the steady state's
 * iteration time holds (growable runs only): where the gaps did not repeat, with the run's
 * steady_need (the costs gave a longer period than sched_async_cycle's guess, or the fill a
 * longer transient: 2BW, p 2, m 1, stage 0 F 0.7 B 2, stage 1 F 1 B 1.3 three ways, read 2.483 s
 * at 16 iterations for a steady 2.7 s); where they did, with twice the iterations, until three
 * runs in a row, each twice as long as the one before, give one iteration time. A replicated
 * stage's warm-up can repeat for a while before the steady state: 2BW, p 6, m 1, gaps of 8.7 s
 * for 18 iterations, then 9.5 s for good; PipeDream, p 8, m 1, two stages twice on 4 nodes of
 * cluster-b, gaps alternating 0 and 2.0148 s for 35 iterations, then 0 and 2.0668 s, which a run
 * of 52 iterations, whose drain spans 17, still reads as the first. A run asks for at most the
 * room's iterations (room_iterations: steady_need can guess past it), and one the memory budget
 * refuses (memory_fits) is not made: the last run stays, whose table says when its gaps did not
 * repeat. Where three runs agreed, the first and shortest of them is the one reported (its
 * figures are theirs), so that its table and trace are no longer than they need be. The runs
 * record no trace until the reported one, run again with it when --trace or --trace-json asked.
 * Returns PL_OK or an error in e. */
static int run_grown(opts *o, job *j, pl_err *e) {
    int grow = growable(o, j), rc = run_simulation(o, j, !grow, e), held = 0, seen_n = 0;
    double seen = NAN; /* the iteration time of the last run whose gaps repeated, of seen_n iterations */
    const int *replicas = o->spec.model ? j->ms.sm.replicas : j->replicas;
    while (rc == PL_OK && grow) {
        const sim_result *r = &j->r;
        int64_t n = r->steady_need > r->iterations ? r->steady_need : 2 * (int64_t)r->iterations;
        if (r->steady_cycle) {
            double t = r->iteration_time_s;
            held = fabs(t - seen) <= 1e-9 * fabs(t) ? held + 1 : 0;
            if (held == 2) break; /* held over two runs, each twice as long as the one before */
            if (held == 0) {
                seen = t;
                seen_n = r->iterations;
            }
            n = 2 * (int64_t)r->iterations;
        } else {
            held = 0;
            seen = NAN;
        }
        if (n > room_iterations(j)) n = room_iterations(j);
        if (n <= r->iterations || !memory_fits(o, n)) break;
        sched *keep = sched_clone(j->s);
        if (!keep) return pl_errf(e, PL_ENOMEM, "out of memory");
        pl_err ge;
        pl_err_clear(&ge);
        if (regenerate(o, j, replicas, (int)n, &ge) != PL_OK) {
            sched_free(j->s);
            j->s = keep;
            break;
        }
        sched_free(keep);
        sim_result_free(&j->r);
        rc = run_simulation(o, j, 0, e);
    }
    int back = held == 2 && seen_n < j->r.iterations; /* the first of the three that agreed */
    if (rc == PL_OK && grow && (back || o->trace || o->trace_json)) {
        if (back && regenerate(o, j, replicas, seen_n, e) != PL_OK) return PL_EINPUT;
        sim_result_free(&j->r);
        rc = run_simulation(o, j, 1, e);
    }
    return rc;
}

/* Returns CLI_EUSER after naming the first rank over capacity when --fail-on-oom asks for it,
 * else CLI_OK. */
static int oom_verdict(const opts *o, const sim_result *r) {
    pl_err e;
    pl_err_clear(&e);
    if (o->have_lr && o->lr.oom) { /* a layout that does not fit is refused */
        const cost_gpt_memory *m = &o->lr.mem;
        pl_errf(&e, PL_EINPUT, "the model does not fit: pipeline rank %d needs %.4g GB per GPU (weights %.4g, gradients "
                "%.4g, optimizer %.4g, activations %.4g), more than the %.4g GB of a device; raise --tp or --pp, "
                "or use --recompute or --distributed-optimizer", o->lr.peak_rank, m->total_bytes / 1e9,
                m->weights_bytes / 1e9, m->grad_bytes / 1e9, m->optimizer_bytes / 1e9, m->activation_bytes / 1e9,
                o->lr.capacity_bytes / 1e9);
        return cli_fail(&e);
    }
    if (!r->oom || !o->fail_on_oom) return CLI_OK;
    for (int q = 0; q < r->ranks; q++)
        if (r->rank[q].oom) {
            pl_errf(&e, PL_EINPUT, "out of memory: rank %d peaks at %lld bytes, capacity %lld", q,
                    (long long)r->rank[q].peak_bytes, (long long)o->c.capacity_bytes);
            break;
        }
    return cli_fail(&e);
}

/* The steps of a simulation once the flags are parsed and the database (d, its db NULL with
 * --no-db) is open: schedule, costs, simulation, outputs, store, OOM verdict. Returns an exit
 * code. */
static int simulate(opts *o, job *j, simulate_db *d, int argc, char **argv) {
    pl_err e;
    pl_err_clear(&e);
    if (!(j->s = get_schedule(o, &e))) return cli_fail(&e);
    int rc = o->spec.model ? model_costs(o, j, &e) : flag_costs(o, j, &e);
    if (rc == PL_OK) rc = run_grown(o, j, &e);
    if (rc != PL_OK) return cli_fail(&e);
    if (o->spec.layout) {
        sim_layout_report_fill(&j->ms, o->spec.layout, &j->r, &o->lr);
        o->have_lr = 1;
    }
    report p = {o, j->s, &j->r, &j->st};
    rc = simulate_write_outputs(&p);
#ifdef PIPELAB_HAVE_PL_RESULTS
    if (rc == CLI_OK && d->db) rc = simulate_store(d, &p, argc, argv);
#else
    (void)d, (void)argc, (void)argv;
#endif
    if (rc == CLI_OK) rc = oom_verdict(o, &j->r);
    return rc;
}

int cli_simulate(int argc, char **argv) {
    opts o;
    int rc = simulate_parse(argc, argv, &o);
    if (rc >= 0) {
        sim_basic_free(&o.b);
        return rc;
    }
    job j;
    memset(&j, 0, sizeof j);
    simulate_db d = {0}; /* opened first: a read-only, corrupt or newer database is refused before any work */
#ifdef PIPELAB_HAVE_PL_RESULTS
    rc = simulate_db_open(&o, &d);
    if (rc == CLI_OK) rc = simulate(&o, &j, &d, argc, argv);
    simulate_db_close(&d); /* removes a file it created when nothing was stored */
#else
    rc = simulate(&o, &j, &d, argc, argv);
#endif
    sim_result_free(&j.r);
    free(j.replicas);
    sim_basic_free(&o.b);
    sim_model_setup_free(&j.ms);
    sched_free(j.s);
    return rc;
}
