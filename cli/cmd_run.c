/* cmd_run.c: `pipelab run`: execute a lowered schedule for real on the CPU executor (threads, or
 * one MPI process per rank), print the measurements beside the simulator's prediction from a
 * profile of this machine, and store both runs. */
#include <gsl/gsl_statistics_double.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pl_sched.h"

#ifdef PIPELAB_HAVE_PL_EXEC
#include "exec_cuda.h"
#include "run_drive.h"
#include "run_opts.h"
#include "store.h"

#define RUN_BLOCKS_PER_STAGE 2           /* the model's depth without --depth: blocks per stage */
#define RUN_PROFILE_FILE_MAX ((size_t)64 << 20) /* bytes a --profile file may have */
#define RUN_PROFILE_SRC_MAX 160          /* room for the description of an in-process profile */
#define RUN_LABEL_MAX 96                 /* room for the progress bar's label */

/* exec_run on threads, with a progress bar over rank 0's actions of all passes (a terminal
 * only; with replicas, those of rank 0's first replica). Returns exec_run's code. */
static int run_with_bar(const sched *s, exec_config *c, exec_result *r, pl_err *e) {
    char what[RUN_LABEL_MAX];
    snprintf(what, sizeof what, "pipelab run: %s, %d ranks", s->kind, s->ranks);
    uint64_t n = 0;
    for (size_t k = 0; k < s->rank[0].n; k++) {
        const sched_action *a = &s->rank[0].acts[k];
        n += !c->replicas || a->stage < 0 || sched_replica_of(a, c->replicas[a->stage]) <= 0;
    }
    c->progress = pl_progress_start(what, (uint64_t)exec_passes_most(c) * n);
    int rc = exec_run(s, c, r, e);
    pl_progress_end(c->progress);
    c->progress = NULL;
    return rc;
}

/* Adds to r's warning, when the training loss stopped being finite, from which iteration: the
 * timings still stand, the weights do not (a learning rate too high, say). */
static void warn_diverged(exec_result *r) {
    int i = 0;
    while (i < r->n_iters && isfinite(r->loss[i])) i++;
    if (i == r->n_iters) return;
    size_t n = strlen(r->warning);
    snprintf(r->warning + n, sizeof r->warning - n, "%sthe loss is not finite from iteration %d on: the training "
             "diverged (lower --lr)", n ? "; " : "", i);
}

/* Loads or generates, validates and lowers the schedule; NULL and e on error. */
static sched *get_schedule(const run_opts *o, pl_err *e) {
    /* the prediction simulates it, with its timeline when the run is traced */
    sched *s = cli_sched_get(&o->a, o->trace ? SCHED_MEM_TRACE : SCHED_MEM_SIMULATE, e);
    if (!s) return NULL;
    if (o->a.kind) s->recompute = o->a.g.recompute;
    sched *l = sched_lower_within(s, &o->a.budget, e);
    sched_free(s);
    return l;
}

/* Returns (predicted - measured) / measured, or NAN when nothing was measured. */
static double rel_err(double pred, double meas) { return meas > 0 ? (pred - meas) / meas : NAN; }

/* Writes the human table: the run, measured beside predicted (noise: the prediction's jitter and
 * drift terms, the states term's rounds and the sharing term's ratio, then its ratios per class,
 * 0 when off), and one line per rank. */
static void out_table(const run_opts *o, const sched *s, const exec_result *r, const sim_result *pr,
                      const cost_memory *mem, const char *profile_src, const double noise[7], const exec_host_probe *probe,
                      pl_buf *b) {
    pl_buf_printf(b, "schedule           %s: %d ranks, %d stages, %d microbatches, %d iteration%s per pass, weights %s, recompute %s\n",
                  s->kind, s->ranks, s->stages, s->microbatches, r->iterations_per_pass, r->iterations_per_pass == 1 ? "" : "s",
                  sched_weights_name(s->weights), sched_recompute_name(s->recompute));
    char spec[EXEC_MODEL_SPEC_MAX];
    exec_model_spec(r, spec, sizeof spec);
    pl_buf_printf(b, "model              %s (ffn %d), %zu parameter bytes; split", spec, r->ffn, r->param_bytes);
    for (int q = 0; q < r->stages; q++) pl_buf_printf(b, "%s%d", q ? "," : " ", r->stage_blocks[q]);
    pl_buf_printf(b, "\ntraining           SGD lr %g momentum %g; loss %.6g -> %.6g over %d iterations\n", r->lr, r->momentum,
                  r->loss[0], r->loss[r->n_iters - 1], r->n_iters);
    if (r->backend && strcmp(r->backend, "cuda") == 0)
        pl_buf_printf(b, "run                %s, CUDA: %s, %s GEMMs (%s); %d warm-up + %d timed passes\n",
                      o->mpi ? "MPI processes" : "threads", r->device, r->precision, r->blas, r->warmup_passes, r->timed_passes);
    else
        pl_buf_printf(b, "run                %s, %s, %d cores; %d warm-up + %d timed passes\n", o->mpi ? "MPI processes" : "threads",
                      r->blas, r->cores, r->warmup_passes, r->timed_passes);
    if (r->warning[0]) pl_buf_printf(b, "warning            %s\n", r->warning);
    pl_buf_printf(b, "\n%-22s %14s %14s %10s\n", "", "measured", "predicted", "error");
    if (pr) {
        pl_buf_printf(b, "%-22s %14.6g %14.6g %+9.1f%%\n", "iteration_time_s", r->iter_median_s, pr->iteration_time_s,
                      100 * rel_err(pr->iteration_time_s, r->iter_median_s));
        pl_buf_printf(b, "%-22s %14.6g %14.6g %+9.1f%%\n", "throughput_samples_s", r->throughput_samples_s, pr->throughput,
                      100 * rel_err(pr->throughput, r->throughput_samples_s));
    } else {
        pl_buf_printf(b, "%-22s %14.6g %14s\n", "iteration_time_s", r->iter_median_s, "-");
        pl_buf_printf(b, "%-22s %14.6g %14s\n", "throughput_samples_s", r->throughput_samples_s, "-");
    }
    double ip = r->iterations_per_pass;
    pl_buf_printf(b, "%-22s min %.6g max %.6g stddev %.3g (%d timed passes)\n", "  iteration spread", r->pass_min_s / ip,
                  r->pass_max_s / ip, r->pass_stddev_s / ip, r->timed_passes);
    pl_buf_printf(b, "%-22s %.2f%% (the standard error of the mean pass over the median)", "  steadiness", 100 * r->steadiness);
    if (r->timed_passes_most)
        pl_buf_printf(b, "; --steady %g%%: %s after %d timed passes (least %d, most %d)", 100 * r->steady_max,
                      r->steadiness <= r->steady_max ? "steady" : "not steady", r->timed_passes, r->timed_passes_least,
                      r->timed_passes_most);
    pl_buf_putc(b, '\n');
    if (pr) pl_buf_printf(b, "%-22s %s\n", "  predicted from", profile_src);
    if (pr && noise[0] > 0) {
        pl_buf_printf(b, "%-22s the median of %d simulated runs: each action at a lognormal factor of cv %.2f%% (the jitter term)",
                      "  predicted as", cli_run_sim_runs((int)noise[2]), 100 * noise[0]);
        if (noise[2] > 0)
            pl_buf_printf(b, ", the ranks' speeds as in one of the profile's %d rounds, side by side (the states term)", (int)noise[2]);
        if (noise[1] > 0) pl_buf_printf(b, ", each rank's speed at one of cv %.2f%% (the drift term)", 100 * noise[1]);
        pl_buf_putc(b, '\n');
    }
    if (pr && noise[3] > 0)
        pl_buf_printf(b, "%-22s an action alone at %.3g times its time beside the other ranks' compute (the profile's\n"
                         "%-22s F alone over its F beside the other workers: the sharing term)\n", "  predicted with", noise[3], "");
    if (pr && noise[3] > 0 && noise[5] > 0)
        pl_buf_printf(b, "%-22s per class: an F beside backwards at %.3g, a backward alone at %.3g and beside forwards at %.3g,\n"
                         "%-22s each over its time beside its own class (the sharing term per class)\n", "", noise[4], noise[5],
                      noise[6], "");
    if (probe)
        pl_buf_printf(b, "%-22s F of one dense block of width %d on %d rows: %.4g ms, %d core%s at once; %.4g ms alone\n",
                      "  host probe", EXEC_DEFAULT_HIDDEN, EXEC_DEFAULT_MICROBATCH_SIZE, 1e3 * probe->fwd_s, probe->workers,
                      probe->workers == 1 ? "" : "s", 1e3 * probe->alone_fwd_s);
    pl_buf_printf(b, "\n%-4s %4s %12s %12s %12s %8s %8s %12s %12s %12s %12s\n", "rank", "core", "busy_s", "idle_s", "comm_s",
                  "bub_frac", "pred_bf", "peak_bytes", "model_bytes", "cost_model", "pred_peak");
    for (int q = 0; q < r->ranks; q++) {
        const exec_rank_result *x = &r->rank[q];
        pl_buf_printf(b, "%-4d %4d %12.6g %12.6g %12.6g %8.4f ", q, x->core, x->busy_s, x->idle_s, x->comm_s, x->bubble_fraction);
        if (pr) pl_buf_printf(b, "%8.4f ", pr->rank[q].bubble_fraction);
        else pl_buf_printf(b, "%8s ", "-");
        pl_buf_printf(b, "%12zu %12zu ", x->peak.total_bytes, x->model_peak_bytes);
        if (mem) pl_buf_printf(b, "%12lld ", (long long)mem[q].total_bytes);
        else pl_buf_printf(b, "%12s ", "-");
        if (pr) pl_buf_printf(b, "%12lld\n", (long long)pr->rank[q].peak_bytes);
        else pl_buf_printf(b, "%12s\n", "-");
    }
    pl_buf_puts(b, "\nbub_frac: bubble_fraction, idle_s / (busy_s + idle_s) of a pass (busy: compute and STEP);\n"
                   "pred_bf: the prediction's,\n"
                   "over its bubble window (the steady state for pipedream and 2bw).\n");
    pl_buf_puts(b, "peak_bytes: all the rank tracked at its peak (weights, gradients, optimizer, stashes, buffers,\n"
                   "scratch); model_bytes: its weights, gradients, optimizer and activation stash, the part the cost\n"
                   "model describes; cost_model: cost_schedule_memory_replicas for the same schedule, model and\n"
                   "replicas (equal to model_bytes; a replicated rank: its fullest replica); pred_peak: the\n"
                   "prediction's peak, the walk of the executor's bookkeeping before the run (exec_mem_walk),\n"
                   "equal to peak_bytes.\n");
}

/* Writes CSV: one row per rank with the run's numbers repeated (the host probe's two times empty
 * when none was taken; the timed passes and their steadiness, exec_steadiness, last). */
static void out_csv(const sched *s, const exec_result *r, const sim_result *pr, const cost_memory *mem,
                    const exec_host_probe *probe, pl_buf *b) {
    pl_buf_puts(b, "kind,ranks,stages,microbatches,iterations_per_pass,width,ffn,depth,microbatch_size,iteration_time_s,"
                   "iteration_min_s,iteration_max_s,iteration_stddev_s,throughput_samples_s,pred_iteration_time_s,"
                   "pred_throughput_samples_s,rel_error,rank,core,busy_s,idle_s,comm_s,bubble_fraction,pred_bubble_fraction,peak_bytes,"
                   "model_bytes,cost_model_bytes,pred_peak_bytes,host_probe_s,host_probe_alone_s,timed_passes,steadiness\n");
    double ip = r->iterations_per_pass;
    for (int q = 0; q < r->ranks; q++) {
        const exec_rank_result *x = &r->rank[q];
        pl_buf_printf(b, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,", s->kind, s->ranks, s->stages, s->microbatches,
                      r->iterations_per_pass, r->hidden, r->ffn, r->layers, r->microbatch_size, r->iter_median_s,
                      r->pass_min_s / ip, r->pass_max_s / ip, r->pass_stddev_s / ip, r->throughput_samples_s);
        if (pr) pl_buf_printf(b, "%.9g,%.9g,%.6g,", pr->iteration_time_s, pr->throughput, rel_err(pr->iteration_time_s, r->iter_median_s));
        else pl_buf_puts(b, ",,,");
        pl_buf_printf(b, "%d,%d,%.9g,%.9g,%.9g,%.9g,", q, x->core, x->busy_s, x->idle_s, x->comm_s, x->bubble_fraction);
        if (pr) pl_buf_printf(b, "%.9g,", pr->rank[q].bubble_fraction);
        else pl_buf_puts(b, ",");
        pl_buf_printf(b, "%zu,%zu,", x->peak.total_bytes, x->model_peak_bytes);
        if (mem) pl_buf_printf(b, "%lld,", (long long)mem[q].total_bytes);
        else pl_buf_puts(b, ",");
        if (pr) pl_buf_printf(b, "%lld,", (long long)pr->rank[q].peak_bytes);
        else pl_buf_puts(b, ",");
        if (probe) pl_buf_printf(b, "%.9g,%.9g,", probe->fwd_s, probe->alone_fwd_s);
        else pl_buf_puts(b, ",,");
        pl_buf_printf(b, "%d,%.6g\n", r->timed_passes, r->steadiness);
    }
}

/* Appends ,"key": and v as a JSON number (null when not finite). */
static void json_num(pl_buf *b, const char *key, double v) {
    pl_buf_printf(b, ",\"%s\":", key);
    pl_buf_number(b, v, 1);
}

/* Writes JSON: the run, the prediction (how it was made: its simulated runs, the jitter and drift
 * terms' coefficients of variation, the states term's rounds and the sharing term's ratio, noise;
 * 0 when off; its ratios per class, share_class, where it took them) and a per-rank array. */
static void out_json(const sched *s, const exec_result *r, const sim_result *pr, const double noise[7], const cost_memory *mem,
                     const cli_run_store_info *info, const int64_t ids[2], pl_buf *b) {
    double ip = r->iterations_per_pass;
    pl_buf_printf(b, "{\"kind\":\"%s\",\"ranks\":%d,\"stages\":%d,\"microbatches\":%d,\"iterations_per_pass\":%d", s->kind,
                  s->ranks, s->stages, s->microbatches, r->iterations_per_pass);
    const struct { const char *key; double v; } run[] = {
        {"iteration_time_s", r->iter_median_s}, {"iteration_min_s", r->pass_min_s / ip}, {"iteration_max_s", r->pass_max_s / ip},
        {"iteration_stddev_s", r->pass_stddev_s / ip}, {"throughput_samples_s", r->throughput_samples_s},
        {"loss_first", r->loss[0]}, {"loss_last", r->loss[r->n_iters - 1]}};
    for (size_t k = 0; k < sizeof run / sizeof run[0]; k++) json_num(b, run[k].key, run[k].v);
    pl_buf_puts(b, ",\"warning\":");
    pl_buf_json_string(b, r->warning);
    pl_buf_putc(b, ',');
    if (pr) {
        pl_buf_puts(b, "\"predicted\":{\"iteration_time_s\":");
        pl_buf_number(b, pr->iteration_time_s, 1);
        json_num(b, "throughput_samples_s", pr->throughput);
        json_num(b, "rel_error", rel_err(pr->iteration_time_s, r->iter_median_s));
        pl_buf_printf(b, ",\"simulated_runs\":%d,\"jitter_cv\":%.6g,\"drift_cv\":%.6g,\"state_rounds\":%d,\"share_alone\":%.6g",
                      noise[0] > 0 || noise[1] > 0 || noise[2] > 0 ? cli_run_sim_runs((int)noise[2]) : 1, noise[0],
                      noise[1], (int)noise[2], noise[3]);
        if (noise[5] > 0) pl_buf_printf(b, ",\"share_class\":[%.6g,%.6g,%.6g]", noise[4], noise[5], noise[6]);
        pl_buf_puts(b, "},");
    }
    pl_buf_printf(b, "\"run_ids\":[%lld,%lld],\"params\":", (long long)ids[0], (long long)ids[1]);
    cli_run_params_json(r, info, b);
    pl_buf_puts(b, ",\"per_rank\":[");
    for (int q = 0; q < r->ranks; q++) {
        const exec_rank_result *x = &r->rank[q];
        pl_buf_printf(b, "%s{\"rank\":%d,\"core\":%d,\"busy_s\":%.9g,\"idle_s\":%.9g,\"comm_s\":%.9g,\"bubble_fraction\":%.9g,"
                         "\"peak_bytes\":%zu,\"model_bytes\":%zu",
                      q ? "," : "", q, x->core, x->busy_s, x->idle_s, x->comm_s, x->bubble_fraction, x->peak.total_bytes,
                      x->model_peak_bytes);
        if (mem) pl_buf_printf(b, ",\"cost_model_bytes\":%lld", (long long)mem[q].total_bytes);
        if (pr) pl_buf_printf(b, ",\"pred_bubble_fraction\":%.9g,\"pred_peak_bytes\":%lld", pr->rank[q].bubble_fraction, (long long)pr->rank[q].peak_bytes);
        pl_buf_putc(b, '}');
    }
    pl_buf_puts(b, "]}\n");
}

/* The tag of the other prediction: the run's tag and one of these suffixes (the suffix alone
 * without a tag), and its room. */
#define RUN_TAG_TERMS_SUFFIX "-terms"
#define RUN_TAG_NOTERMS_SUFFIX "-noterms"
#define RUN_TAG_PASSLEN_SUFFIX "-passlen"
#define RUN_TAG_NOPASSLEN_SUFFIX "-nopasslen"
#define RUN_TAG_REST_SUFFIX "-rest"
#define RUN_TAG_REUSE_SUFFIX "-reuse"
#define RUN_TAG_FIRST_SUFFIX "-first"
#define RUN_TAG_NOAGAIN_SUFFIX "-noagain"
#define RUN_TAG_NONEXT_SUFFIX "-nonext"
#define RUN_TAG_BEFORE_SUFFIX "-before"
#define RUN_TAG_JITTER_SUFFIX "-jitter"
#define RUN_TAG_DRIFT_SUFFIX "-drift"
#define RUN_TAG_NOJITTER_SUFFIX "-nojitter"
#define RUN_TAG_NODRIFT_SUFFIX "-nodrift"
#define RUN_TAG_NOVERSIONS_SUFFIX "-noversions"
#define RUN_TAG_NOINTERRUPT_SUFFIX "-nointerrupt"
#define RUN_TAG_STEPMEAN_SUFFIX "-stepmean"
#define RUN_TAG_STATES_SUFFIX "-states"
#define RUN_TAG_NOSTATES_SUFFIX "-nostates"
#define RUN_TAG_NOSHARE_SUFFIX "-noshare"
#define RUN_TAG_SHARE_SUFFIX "-share"
#define RUN_TAG_BSTATES_SUFFIX "-bstates"
#define RUN_TAG_ONESHARE_SUFFIX "-oneshare"
#define RUN_TAG_CLASSSHARE_SUFFIX "-classshare"
#define RUN_TAG_ALT_MAX 256

/* What one `pipelab run` holds between its steps; run_state_free releases it. */
typedef struct run_state {
    sched *s;                /* the lowered schedule */
    exec_result r;           /* the measurement */
    sim_result pr;           /* the prediction, when have_pred */
    int have_pred;
    double pred_noise[7];    /* the prediction's jitter and drift terms (cli_run_terms_cv, drift),
                              * the states term's rounds (n_states), the sharing term's ratio
                              * (alone) and its ratios per class (share_cross_f, share_alone_b,
                              * share_cross_b); 0: off */
    double share_measured;   /* the sharing term's ratio the profile measured, whether the
                              * prediction took it or not (cli_run_store_info.share_alone) */
    double share_class[3];   /* its ratios per class, when have_share_class (profile_terms) */
    int have_share_class;
    sim_result pr_alt[CLI_RUN_ALTS]; /* the other predictions, when have_alt[i]: [0] with the
                              * reuse-distance and first-touch terms, or under --terms without
                              * them; [1] with the pass-length term, or under
                              * --pass-length-term without it; [2] every F, I, W at the
                              * profile round's time after its first microbatch; [3] [4] [5]
                              * the reuse-distance and first-touch terms each with the default's,
                              * and the prediction without the again term; [6] without the I
                              * next to its recomputed forward; [7] with the reuse-distance
                              * term and the kind before; [8] without the jitter and drift
                              * terms (under --no-jitter-term with them); [9] where the profile
                              * measured a drift, with the jitter term alone; [10] without the
                              * version term; [11] under --interruptions, without the
                              * interruption term; [12] each rank's STEP at the mean over
                              * its profile's rounds; [13] without the states term (the ranks'
                              * speeds of each profile round side by side, in the drift's place;
                              * under --no-jitter-term with it); [14] the other side of the
                              * sharing term; [15] the states term with the backwards at their own
                              * rounds' speeds, where the profile timed them; [16] the other side
                              * of the sharing term per class */
    int have_alt[CLI_RUN_ALTS];
    char tag_alt[CLI_RUN_ALTS][RUN_TAG_ALT_MAX]; /* their tags: the run's with a RUN_TAG_*_SUFFIX */
    int is_root;             /* 0 on the MPI ranks other than 0, which only run */
    int alike;               /* 1: the error is one every MPI process meets alike (cli_fail_alike) */
    cost_model *prof;        /* the prediction's profile model, or NULL */
    pl_buf pcsv;             /* its CSV (its per-worker lines give each rank's STEP) */
    const char *profile_src; /* where it came from: --profile's path, or src_text */
    char src_text[RUN_PROFILE_SRC_MAX]; /* the description of an in-process profile */
    cost_memory *mem;        /* [ranks] the cost model's memory per rank (exec_mem_predict), or NULL */
    exec_host_probe probe;   /* the host probe before the run, when have_probe */
    int have_probe;
} run_state;

/* Sets st to hold nothing yet. */
static void run_state_init(run_state *st) {
    memset(st, 0, sizeof *st);
    st->is_root = 1;
    st->profile_src = "";
    pl_buf_init(&st->pcsv);
}

/* Frees what st holds. */
static void run_state_free(run_state *st) {
    pl_buf_free(&st->pcsv);
    free(st->mem);
    cost_model_free(st->prof);
    if (st->have_pred) sim_result_free(&st->pr);
    for (int i = 0; i < CLI_RUN_ALTS; i++)
        if (st->have_alt[i]) sim_result_free(&st->pr_alt[i]);
    exec_result_free(&st->r);
    sched_free(st->s);
}

/* Returns e's code, or PL_EINPUT where a step failed without one, so that a failure is never
 * read as PL_OK. */
static int failed(const pl_err *e) { return e->code != PL_OK ? e->code : PL_EINPUT; }

/* The profile model of --profile FILE: its CSV appended to csv (its per-worker lines give each
 * rank's STEP), c->pred_step_s its STEP of one block (0 when it has none). NULL and e on error. */
static cost_model *file_profile(const char *path, exec_config *c, pl_buf *csv, pl_err *e) {
    char *text = NULL;
    size_t len = 0;
    if (pl_read_file(path, RUN_PROFILE_FILE_MAX, &text, &len, e) != PL_OK) return NULL;
    cost_model *m = exec_profile_lines_check(path, text, len, e) == PL_OK ? cost_model_read_csv(path, text, len, e) : NULL;
    double st = 0;
    if (m && exec_profile_meta(text, len, NULL, &st) == 0) c->pred_step_s = st;
    pl_buf_puts(csv, text);
    free(text);
    if (m && exec_profile_check(m, c, path, e) != PL_OK) {
        cost_model_free(m);
        return NULL;
    }
    return m;
}

/* Returns the GPUs the run's ranks use: --gpus, else the visible ones, at most the ranks. */
static int gpu_count(const run_opts *o, const sched *s) {
    int G = o->c.cuda_devices;
    if (G < 1) {
        pl_err ignored;
        G = exec_cuda_devices(&ignored);
    }
    return G < s->ranks ? G : s->ranks;
}

/* Returns the workers the GPU profile times at once: the ranks that share a GPU (each in its SM
 * share under --sm-split, else all sharing the SMs), 1 (the whole GPU) for a GPU each. */
static int gpu_concurrency(const run_opts *o, const sched *s) {
    int G = gpu_count(o, s);
    int per = G > 0 ? (s->ranks + G - 1) / G : 1;
    return per > 1 ? per : 1;
}

/* Returns the threads the CPU before-profile times at once: --profile-concurrency, else the
 * ranks, at most the cores. */
static int cpu_concurrency(const run_opts *o, const sched *s) {
    if (o->pconc >= 1) return o->pconc;
    int n = exec_profile_cores();
    return s->ranks < n || n < 1 ? s->ranks : n;
}

/* The profile model measured now, before the run, on the GPU or on CPU threads
 * (gpu_concurrency, cpu_concurrency): its CSV appended to csv, its description written to
 * src[n], c->pred_step_s its STEP of one block. NULL and e on error. */
static cost_model *measured_profile(const run_opts *o, const sched *s, exec_config *c, char *src, size_t n, pl_buf *csv,
                                    pl_err *e) {
    exec_layer_profile lp;
    int rc;
    if (o->cuda) {
        int conc = gpu_concurrency(o, s);
        snprintf(src, n, "in-process GPU profile (exec_cuda_profile_layers, %s, %s)", exec_precision_name(o->c.precision),
                 conc == 1 ? "whole GPU" : o->c.sm_split ? "its ranks' workers at once, 1/N of the SMs each" : "its ranks' workers at once, sharing the SMs");
        rc = exec_cuda_profile_csv(c, o->preps, conc, NULL, csv, &lp, e);
    } else {
        int conc = cpu_concurrency(o, s), ncores = exec_profile_cores();
        /* its threads are pinned like ranks: run's rule for its ranks (exec_check_cores) */
        const char *what = "profiling threads (--profile-concurrency)";
        if (exec_check_cores(conc, ncores, o->c.oversubscribe, what, e) != PL_OK) return NULL;
        char warning[160];
        if (exec_oversubscribed(conc, ncores, what, warning, sizeof warning))
            fprintf(stderr, "pipelab run: warning: %s\n", warning);
        snprintf(src, n, "in-process profile (exec_profile_layers, %d worker%s at once)", conc, conc == 1 ? "" : "s");
        c->profile_again_stages = exec_prof_again_stages(s); /* its again streak through a stage of s */
        rc = exec_profile_csv_n(c, o->preps, conc, NULL, csv, &lp, e);
    }
    if (rc != PL_OK) return NULL;
    c->pred_step_s = lp.step_s;
    return cost_model_read_csv(o->cuda ? "in-process GPU profile" : "in-process profile", csv->data, csv->len, e);
}

/* Gets the profile model of the prediction, before the run or after it on MPI's rank 0:
 * --profile FILE, or measured now (measured_profile). Its CSV goes to st->pcsv and its source to
 * st->profile_src; c->pred_step_s is its STEP of one block (0 when a file has none). NULL and e
 * on error. */
static cost_model *get_profile(const run_opts *o, exec_config *c, run_state *st, pl_err *e) {
    c->pred_step_s = 0;
    cost_model *m;
    if (o->profile) {
        st->profile_src = o->profile;
        m = file_profile(o->profile, c, &st->pcsv, e);
    } else {
        st->profile_src = st->src_text;
        m = measured_profile(o, st->s, c, st->src_text, sizeof st->src_text, &st->pcsv, e);
    }
    /* a GPU profile's hand-off is between two ranks on one GPU; over several, rank r on GPU
     * r mod G hands off to another GPU by a peer copy, which it does not time: free */
    if (m && o->cuda && gpu_count(o, st->s) > 1) {
        m->p2p[COST_TRANSPORT_THREADS] = m->p2p_send[COST_TRANSPORT_THREADS] = (cost_ar_link){0, 0};
        m->p2p_post[COST_TRANSPORT_THREADS] = (cost_ar_link){0, 0};
    }
    return m;
}

/* The profile model the run measured between its passes (exec_config.profile_between_reps): its
 * CSV appended to st->pcsv, its description in st->profile_src, c->pred_step_s its STEP of one
 * block. NULL and e on error. */
static cost_model *run_profile(run_state *st, exec_config *c, pl_err *e) {
    snprintf(st->src_text, sizeof st->src_text,
             "in-process profile between the passes (exec_profile_layers rounds on the run's %d worker%s)", st->r.workers,
             st->r.workers == 1 ? "" : "s");
    st->profile_src = st->src_text;
    int replicated = 0;
    for (int q = 0; c->replicas && q < st->s->stages; q++) replicated |= c->replicas[q] > 1;
    /* the passes time compute only: a replicated run's all-reduce is profiled now, after them */
    exec_layer_profile *lp = &st->r.between_profile[0];
    if (replicated && exec_profile_allreduce(c, st->r.between_reps, &lp->ar_latency_s, &lp->ar_Bps, e) != PL_OK) return NULL;
    if (exec_profile_csv_between(st->s, c, &st->r, &st->pcsv, e) != PL_OK) return NULL;
    c->pred_step_s = st->r.between_profile[0].step_s;
    return cost_model_read_csv("in-process profile", st->pcsv.data, st->pcsv.len, e);
}

/* Prints the reason of a failing MPI rank before MPI_Abort ends the job. */
static void mpi_abort_print(const pl_err *why) {
    fprintf(stderr, "pipelab: run failed: %s\n", why->msg);
    fflush(stderr);
}

/* The replicas and split of --partition FILE and --replicas-stage S=N, as simulate applies them:
 * the partition's layer bounds become the stage split (its layers the model's blocks: --depth,
 * when given, must match), its replicas and then the flags' each stage's (sim_replicas_apply),
 * and a replicated 1f1b, pipedream or 2bw is generated again with PipeDream's per-replica
 * warm-up and simulate's iteration count (sim_replicated_schedule) into st->s. Returns PL_OK or
 * an error in e naming the file or the flag. */
static int replicas_setup(run_opts *o, run_state *st, pl_err *e) {
    if (!o->partition && !o->nrepl) return PL_OK;
    int S = st->s->stages;
    o->replicas = pl_calloc((size_t)S, sizeof *o->replicas);
    if (!o->replicas) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0; q < S; q++) o->replicas[q] = 1;
    if (o->partition) {
        cost_partition *p = sim_partition_read(o->partition, st->s, o->x.depth, "of --depth or --model", e);
        if (!p) return failed(e);
        o->nsplit = S;
        for (int q = 0; q < S; q++) {
            o->split[q] = p->bound[q + 1] - p->bound[q];
            o->replicas[q] = p->replicas ? p->replicas[q] : 1;
        }
        cost_partition_free(p);
    }
    sim_replica_spec rs = {0, o->nrepl, o->repl_stage, o->repl_n};
    if (sim_replicas_apply(&rs, S, o->replicas, e) != PL_OK) return PL_EINPUT;
    if (sim_replicated_schedule(o->a.from ? NULL : o->a.kind, &o->a.g, &o->a.budget, o->replicas, &st->s, e) != PL_OK)
        return failed(e);
    o->c.replicas = o->replicas;
    return PL_OK;
}

/* Sets the model's depth (--depth, the sum of --stage-blocks, or RUN_BLOCKS_PER_STAGE blocks per
 * stage) and its stage split. Returns PL_OK, or PL_EINPUT when --stage-blocks does not give one
 * count per stage of s. */
static int set_blocks(run_opts *o, const sched *s, pl_err *e) {
    o->c.layers = o->x.depth ? o->x.depth : RUN_BLOCKS_PER_STAGE * s->stages;
    if (!o->nsplit) return PL_OK;
    if (o->nsplit != s->stages)
        return pl_errf(e, PL_EINPUT, "--stage-blocks gives %d stages, the schedule has %d", o->nsplit, s->stages);
    int sum = 0;
    for (int q = 0; q < o->nsplit; q++) sum += o->split[q];
    if (!o->x.depth) o->c.layers = sum;
    o->c.stage_blocks = o->split;
    return PL_OK;
}

/* Returns PL_OK when each stage of the model fits in memory (exec_check_memory), and so does the
 * profile measured before the run (exec_check_profile_memory: its buffers are freed before the
 * run's are allocated), else the error in e. */
static int check_fit(const run_opts *o, const sched *s, pl_err *e) {
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    int rc = blocks ? exec_stage_blocks(s, &o->c, blocks, e) : pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) rc = exec_check_memory(s, &o->c, blocks, -1, e);
    if (rc == PL_OK && !o->no_predict && !o->between && !o->profile) {
        exec_config pc = o->c; /* as measured_profile takes it */
        pc.profile_again_stages = exec_prof_again_stages(s);
        rc = exec_check_profile_memory(&pc, o->preps, o->cuda ? gpu_concurrency(o, s) : cpu_concurrency(o, s), e);
    }
    free(blocks);
    return rc;
}

/* Refuses before the run the outputs that could not be written after it, which would lose its
 * measurements: the database unless --no-db (cli_run_check_db: an existing one that cannot take
 * the run, a new one that cannot be made), --dump-weights and --save-profile (cli_check_output:
 * their folders must be there). Over MPI rank 0 writes them all, after the run: the process its
 * launcher names rank 0 checks them (where no launcher names the ranks, every process, as each
 * refuses bad flags), before any MPI call, so that none waits on it: it exits with status 1,
 * and the launcher ends the job. Returns PL_OK or the error naming the flag and the path. */
static int check_outputs(const run_opts *o, pl_err *e) {
    if (o->mpi && cli_launcher().rank > 0) return PL_OK;
    int rc = o->no_db ? PL_OK : cli_run_check_db(o->db, e);
    if (rc == PL_OK && o->dump) rc = cli_check_output("--dump-weights", o->dump, 0, e);
    if (rc == PL_OK && o->save_profile) rc = cli_check_output("--save-profile", o->save_profile, 0, e);
    return rc;
}

/* Gets the schedule and the model's shape, and refuses before the run what cannot go through:
 * an output that could not be written after it (check_outputs; MPI: rank 0, which writes them),
 * a --profile file the prediction could not read (read now, into st->prof; MPI: by rank 0, which
 * predicts, where the launcher names it, as check_outputs), a model that does not fit, before the
 * profile spends seconds on it (MPI: each rank checks its own share when it starts). Every MPI
 * process meets these refusals alike: they are made of the flags and of the files every process
 * reads (st->alike). Returns PL_OK or an error in e. */
static int prepare(run_opts *o, run_state *st, pl_err *e) {
    st->alike = 1;
    st->s = get_schedule(o, e);
    if (!st->s) return failed(e);
    int rc = replicas_setup(o, st, e);
    if (rc == PL_OK) rc = set_blocks(o, st->s, e);
    if (rc == PL_OK) rc = check_outputs(o, e);
    if (rc == PL_OK && o->profile && !o->no_predict && !(o->mpi && cli_launcher().rank > 0) &&
        !(st->prof = get_profile(o, &o->c, st, e)))
        rc = failed(e);
    if (rc == PL_OK && !o->mpi) rc = check_fit(o, st->s, e);
    if (rc == PL_OK) st->alike = 0;
    return rc;
}

/* Runs the schedule on the backend and transport of o, with the prediction's profile taken
 * before the run, on an idle machine, or after it: on MPI's rank 0, or from what the run's
 * workers measured between the passes. The MPI ranks other than 0 only run (st->is_root 0).
 * Returns PL_OK or an error in e. */
static int execute(run_opts *o, run_state *st, pl_err *e) {
    /* the host probe, on the cores the ranks will run on, before anything of the run */
    if (!o->no_host_probe && !o->cuda) {
        int n = exec_profile_cores(), workers = st->s->ranks < n || n < 1 ? st->s->ranks : n, root;
        /* MPI: every process of the job at once, then process 0 alone */
        if ((o->mpi ? exec_mpi_host_probe(&st->probe, o->c.timeout_s, &root, e) : exec_host_probe_measure(workers, &st->probe, e)) != PL_OK) {
            pl_err_prefix(e, "host probe: ");
            return failed(e);
        }
        st->have_probe = 1;
    }
    if (!o->no_predict && !o->mpi && !o->between && !st->prof && !(st->prof = get_profile(o, &o->c, st, e))) return failed(e);
    int rc;
    if (o->mpi && o->cuda) {
        exec_cuda_mpi_set_abort_hook(mpi_abort_print);
        rc = exec_cuda_mpi_run(st->s, &o->c, &st->r, &st->is_root, e);
    } else if (o->mpi) {
        exec_mpi_set_abort_hook(mpi_abort_print);
        rc = exec_mpi_run(st->s, &o->c, &st->r, &st->is_root, e);
        /* what exec_mpi_run returns rather than aborting the job is its refusal before the
         * workers start, which a refusal of the configuration (PL_EINPUT naming no rank: the
         * job's processes against the schedule's ranks, against their host's cores, one host for
         * --steady) every process meets alike, each by the same collective answers; a rank's own
         * failure calls the abort hook instead. Not so over NCCL, whose checks leave the ranks
         * that passed them "another rank failed its checks (see its message)": each prints. */
        st->alike = rc == PL_EINPUT && pl_err_rank(e) < 0;
    } else {
        rc = o->cuda ? exec_cuda_run(st->s, &o->c, &st->r, e) : run_with_bar(st->s, &o->c, &st->r, e);
        if (rc != PL_OK) pl_err_prefix(e, "run failed: ");
    }
    if (rc == PL_OK && (!o->mpi || st->is_root)) warn_diverged(&st->r);
    /* an MPI run predicts REDUCE_GRAD from MPI's all-reduce and SEND/RECV from its hand-off
     * (when the ranks hand off): timed now by every process, before rank 0 profiles, unless the
     * profile comes from a file (which has them or says what is used). Collectives: every
     * process calls them on the options alone, whatever its run's outcome (process 0 alone may
     * have failed assembling it), so that none is left waiting; the first error is kept. */
    int replicated = 0;
    for (int q = 0; o->c.replicas && q < st->s->stages; q++) replicated |= o->c.replicas[q] > 1;
    if (o->mpi && !o->cuda && !o->no_predict && !o->profile) {
        int root;
        pl_err ea, ep;
        int ra = replicated ? exec_mpi_profile_allreduce(&o->c, o->preps, &o->c.mpi_ar_latency_s, &o->c.mpi_ar_Bps, &root, &ea)
                            : PL_OK;
        int rp = st->s->ranks > 1 ? exec_mpi_profile_p2p(&o->c, o->preps, &o->c.mpi_p2p, &root, &ep)
                                  : PL_OK;
        if (rc == PL_OK && ra != PL_OK) {
            rc = ra;
            *e = ea;
        }
        if (rc == PL_OK && rp != PL_OK) {
            rc = rp;
            *e = ep;
        }
    }
    if (rc != PL_OK || !st->is_root || o->no_predict || st->prof) return rc;
    st->prof = o->between ? run_profile(st, &o->c, e) : get_profile(o, &o->c, st, e);
    return st->prof ? PL_OK : failed(e);
}

/* What the profile's per-worker lines give the prediction (read_profile_terms), each NULL (drift
 * 0) where the lines do not time it; the arrays point into buf, which the caller frees. */
typedef struct profile_terms {
    double *buf;
    double *rank_step;   /* [ranks] each rank's STEP, when per_rank (exec_profile_worker_steps) */
    int per_rank;
    double *rank_step_mean; /* [ranks] each rank's STEP at the mean over its rounds, when
                          * per_rank_mean (exec_profile_worker_step_means) */
    int per_rank_mean;
    /* [ranks] each (cli_run_terms): the reuse-distance term's ratios, the first-touch term's,
     * the again term's, the I next to its recomputed forward, the kind before's F, the version
     * term's, the forward's jitter */
    const double *reuse_i, *reuse_w, *first, *rest, *again, *next, *back, *versions, *jitter;
    double drift;        /* the ranks' drift (exec_profile_drift), 0 without the jitter */
    double *window;      /* [EXEC_WINDOWS ranks] the pass-length factors, when windows */
    int windows;
    double *states;      /* [n_states ranks] the states term's speeds (exec_profile_worker_rounds) */
    double *states_b;    /* [n_states ranks] its backwards' speeds, where states_per_class */
    int states_per_class; /* 1: the profile's rounds timed the backwards too (its lines' b=) */
    int n_states;        /* its rounds; 0: off */
    double alone;        /* the sharing term's ratio (cli_run_terms.alone): the mean over the ranks
                          * of the profile's (exec_profile_worker_share); 0: not measured */
    double share_class[3]; /* its ratios per class (cli_run_terms.share_cross_f, share_alone_b,
                          * share_cross_b): the means over the ranks of the profile's
                          * (exec_profile_worker_share_class), the forward's cross ratio from
                          * each worker's phase by sim_share_f_cross, when share_class_on */
    int share_class_on;
} profile_terms;

/* Reads p from the profile CSV t (its worker lines) of source src for a run of `ranks` ranks.
 * A --profile file's lines were checked before the run (exec_profile_lines_check); a profile
 * measured in-process whose line fails the check (a time that is not finite) leaves that line's
 * terms off, with a warning rather than losing the run. Returns PL_OK or PL_ENOMEM in e. */
static int read_profile_terms(const pl_buf *t, const char *src, int ranks, profile_terms *p, pl_err *e) {
    memset(p, 0, sizeof *p);
    pl_err bad;
    if (exec_profile_lines_check(src, t->data ? t->data : "", t->len, &bad) != PL_OK)
        fprintf(stderr, "pipelab run: warning: %s; the prediction leaves out the terms of that line\n", bad.msg);
    const size_t R = (size_t)ranks, S = SIM_FIRST_KINDS;
    double *b = pl_calloc(R * (11 + 3 * S + EXEC_WINDOWS + 2 * EXEC_STATE_ROUNDS), sizeof *b);
    if (!b) return pl_errf(e, PL_ENOMEM, "out of memory");
    p->buf = b;
    const char *text = t->data ? t->data : "";
    const size_t n = t->len;
    double *ri = b, *rw = ri + R, *fi = rw + R, *fr = fi + S * R, *ag = fr + S * R, *nx = ag + S * R, *fb = nx + R,
           *vr = fb + R, *jt = vr + 3 * R;
    p->rank_step = jt + R;
    p->window = p->rank_step + R;
    p->rank_step_mean = p->window + EXEC_WINDOWS * R;
    p->states = p->rank_step_mean + R;
    p->states_b = p->states + EXEC_STATE_ROUNDS * R;
    double *share = p->states_b + EXEC_STATE_ROUNDS * R;
    p->per_rank = exec_profile_worker_steps(text, n, ranks, p->rank_step) == 0;
    p->per_rank_mean = p->per_rank && exec_profile_worker_step_means(text, n, ranks, p->rank_step_mean) == 0;
    if (exec_profile_worker_reuse(text, n, ranks, ri, rw) == 0) p->reuse_i = ri, p->reuse_w = rw;
    if (exec_profile_worker_first(text, n, ranks, fi, fr) == 0) p->first = fi, p->rest = fr;
    if (exec_profile_worker_again(text, n, ranks, ag) == 0) p->again = ag;
    if (exec_profile_worker_next(text, n, ranks, nx) == 0) p->next = nx;
    if (exec_profile_worker_back(text, n, ranks, fb) == 0) p->back = fb;
    if (exec_profile_worker_versions(text, n, ranks, vr) > 0) p->versions = vr;
    if (exec_profile_worker_jitter(text, n, ranks, jt) == 0) p->jitter = jt;
    if (p->jitter) (void)exec_profile_drift(text, n, &p->drift);
    p->windows = exec_profile_worker_windows(text, n, ranks, p->window, NULL) == 0;
    p->n_states = exec_profile_worker_rounds(text, n, ranks, p->states, p->states_b, NULL);
    if (p->n_states < 0) p->n_states = 0; /* not after exec_profile_lines_check */
    for (size_t k = 0; p->n_states > 0 && k < (size_t)p->n_states * R; k++)
        p->states_per_class = p->states_per_class || p->states_b[k] != p->states[k];
    if (exec_profile_worker_share(text, n, ranks, share) == 0) p->alone = gsl_stats_mean(share, 1, R);
    double *cls = pl_calloc(3 * R, sizeof *cls);
    if (!cls) {
        free(p->buf);
        p->buf = NULL;
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    if (p->alone > 0 && exec_profile_worker_share_class(text, n, ranks, cls) == 0) {
        for (size_t q = 0; q < R; q++) cls[3 * q] = sim_share_f_cross(cls[3 * q], share[q], ranks);
        for (int c = 0; c < 3; c++) p->share_class[c] = gsl_stats_mean(cls + c, 3, R);
        p->share_class_on = p->share_class[0] > 0; /* a forward beside backwards that the model cannot price: off */
    }
    free(cls);
    return PL_OK;
}

/* The prediction's terms from p:
 * - with `measured`, the reuse-distance and first-touch terms (the default leaves them beside:
 *   with the profile's buffers on cache lines as the run's, they shorten the prediction by about
 *   1% more than the runs are short; docs/validate_cpu.md);
 * - the again term, where a rank holds several stages ("The again samples: a streak, and a B's
 *   order"), the I next to its recomputed forward ("The I next to its recomputed forward") and
 *   the version term where a rank's STEPs go into a new weight version ("Two weight versions:
 *   the version term");
 * - the pass-length term under --pass-length-term;
 * - the jitter and drift terms unless --no-jitter-term ("The jitter and drift terms in the
 *   default"), and with them the states term in the drift's place where the profile has its
 *   rounds ("The ranks' states");
 * - the interruption term under --interruptions ("What the tail is made of");
 * - the sharing term unless --no-sharing-term, where the profile timed its workers' F alone and
 *   beside each other ("The sharing term measured in the profile's rounds"), per class under
 *   --sharing-per-class where it timed the backwards' phases too ("The sharing term per class":
 *   on the AMD host its ratios read 0.99-1.01 and cost 0.1-0.5 points of MAPE in noise). */
static cli_run_terms terms_of(const run_opts *o, const profile_terms *p, int measured) {
    const int states = o->jitter && p->jitter && p->n_states > 0; /* in the drift's place */
    cli_run_terms t = {NULL, NULL, NULL, NULL, p->again, p->windows && o->pass_length ? p->window : NULL, p->next, NULL,
                       o->jitter ? p->jitter : NULL, o->jitter && !states ? p->drift : 0, p->versions, o->intr_share,
                       o->intr_rate, 0, states ? p->states : NULL, states ? p->n_states : 0, o->sharing ? p->alone : 0,
                       0, 0, 0, NULL, o->intr_short_share, o->intr_short_rate};
    if (o->sharing && o->share_class && p->share_class_on) {
        t.share_cross_f = p->share_class[0];
        t.share_alone_b = p->share_class[1];
        t.share_cross_b = p->share_class[2];
    }
    if (measured) {
        t.reuse_i = p->reuse_i;
        t.reuse_w = p->reuse_w;
        t.first = p->first;
        t.rest = p->rest;
    }
    return t;
}

/* Simulates the run's schedule on its profile with terms t into r, each stage's STEP from p's
 * per-rank STEP where it has one (at the mean over its rounds under t->step_mean); returns PL_OK
 * or an error in e. */
static int predict_one(const run_opts *o, const run_state *st, const profile_terms *p, const cli_run_terms *t, sim_result *r,
                       pl_err *e) {
    cost_transport tr = o->mpi ? COST_TRANSPORT_MPI : COST_TRANSPORT_THREADS;
    const double *step = t->step_mean ? p->rank_step_mean : p->per_rank ? p->rank_step : NULL;
    return cli_run_predict(st->s, &o->c, st->prof, tr, step, t, r, e);
}

/* Makes the prediction stored beside in slot i, under the run's tag with suffix sfx, from terms
 * t; returns PL_OK or an error in e. */
static int predict_beside(const run_opts *o, run_state *st, const profile_terms *p, const cli_run_terms *t, int i,
                          const char *sfx, pl_err *e) {
    int rc = predict_one(o, st, p, t, &st->pr_alt[i], e);
    st->have_alt[i] = rc == PL_OK;
    snprintf(st->tag_alt[i], sizeof st->tag_alt[i], "%s%s", o->tag ? o->tag : "", sfx);
    return rc;
}

/* Makes the predictions stored beside the one on terms m (run_state.pr_alt, in its order), each
 * where p times what it changes: what each term moves, and the terms left out of the default.
 * Returns PL_OK or the first error in e. */
static int predict_others(const run_opts *o, run_state *st, const profile_terms *p, const cli_run_terms *m, pl_err *e) {
    cli_run_terms t[CLI_RUN_ALTS];
    const char *sfx[CLI_RUN_ALTS];
    int on[CLI_RUN_ALTS];
    for (int i = 0; i < CLI_RUN_ALTS; i++) t[i] = *m;
    /* [0] the other side of --terms */
    t[0] = terms_of(o, p, !o->terms);
    on[0] = p->reuse_i || p->first;
    sfx[0] = o->terms ? RUN_TAG_NOTERMS_SUFFIX : RUN_TAG_TERMS_SUFFIX;
    /* [1] the other side of --pass-length-term */
    t[1].window = m->window ? NULL : p->window;
    on[1] = p->windows;
    sfx[1] = m->window ? RUN_TAG_NOPASSLEN_SUFFIX : RUN_TAG_PASSLEN_SUFFIX;
    /* [2] every F, I, W at the time of a profile round's microbatches after its first: a round
     * follows a pass in its gap, which evicted the profile's buffers, and on small blocks its
     * first microbatch ran up to 40% slower, where a pass's first action of a stage does not
     * (docs/validate_cpu.md, "Off the grid") */
    t[2] = terms_of(o, p, 0);
    t[2].first = t[2].rest = p->rest;
    on[2] = p->first != NULL;
    sfx[2] = RUN_TAG_REST_SUFFIX;
    /* [3] [4] the reuse-distance and the first-touch term each alone beside the default's, [5]
     * the default without the again term: which of them moves which configurations ("Repeats":
     * each fixes the points of its own cause and shortens the rest) */
    t[3] = t[4] = terms_of(o, p, 0);
    t[3].reuse_i = p->reuse_i;
    t[3].reuse_w = p->reuse_w;
    t[4].first = p->first;
    t[4].rest = p->rest;
    t[5].again = NULL;
    on[3] = p->reuse_i != NULL;
    on[4] = p->first != NULL;
    on[5] = p->again != NULL;
    sfx[3] = RUN_TAG_REUSE_SUFFIX;
    sfx[4] = RUN_TAG_FIRST_SUFFIX;
    sfx[5] = RUN_TAG_NOAGAIN_SUFFIX;
    /* [6] without the I next to its recomputed forward, where the prediction prices it */
    t[6].next = NULL;
    on[6] = cli_run_terms_next_on(m) && st->s->recompute == SCHED_RECOMPUTE_FULL;
    sfx[6] = RUN_TAG_NONEXT_SUFFIX;
    /* [7] the reuse-distance term and the kind before: an I right after an F of its stage at the
     * distance-0 ratio, an F right after a B or W of its stage at the profile's F after the
     * backwards ("The kind before") */
    t[7].reuse_i = p->reuse_i;
    t[7].reuse_w = p->reuse_w;
    t[7].back = p->back;
    on[7] = p->reuse_i && p->back;
    sfx[7] = RUN_TAG_BEFORE_SUFFIX;
    /* [8] the other side of the jitter and drift terms: without both (with both under
     * --no-jitter-term), and [9] where the profile measured a drift, the jitter term alone */
    t[8].jitter = o->jitter ? NULL : p->jitter;
    t[8].states = o->jitter || p->n_states <= 0 ? NULL : p->states; /* and the states term with them */
    t[8].n_states = t[8].states ? p->n_states : 0;
    t[8].drift = o->jitter || t[8].states ? 0 : p->drift;
    on[8] = p->jitter != NULL;
    sfx[8] = o->jitter ? RUN_TAG_NOJITTER_SUFFIX : p->drift > 0 ? RUN_TAG_DRIFT_SUFFIX : RUN_TAG_JITTER_SUFFIX;
    t[9].jitter = p->jitter;
    t[9].drift = 0;
    t[9].states = NULL;
    t[9].n_states = 0;
    on[9] = p->jitter && p->drift > 0;
    sfx[9] = o->jitter ? RUN_TAG_NODRIFT_SUFFIX : RUN_TAG_JITTER_SUFFIX;
    /* [10] without the version term, where the prediction has it */
    t[10].versions = NULL;
    on[10] = m->versions != NULL;
    sfx[10] = RUN_TAG_NOVERSIONS_SUFFIX;
    /* [11] without the interruption term, where --interruptions gives the host's */
    t[11].intr_share = t[11].intr_rate = t[11].intr_short_share = t[11].intr_short_rate = 0;
    on[11] = o->intr_share > 0 || o->intr_short_share > 0;
    sfx[11] = RUN_TAG_NOINTERRUPT_SUFFIX;
    /* [12] each rank's STEP at the mean over its profile's rounds, less the host's stalls, which
     * holds the gaps the interruption term prices ("The STEP's two speeds") */
    t[12].step_mean = 1;
    on[12] = p->per_rank_mean;
    sfx[12] = RUN_TAG_STEPMEAN_SUFFIX;
    /* [13] the other side of the states term (each profile round's speeds of the ranks side by
     * side, in place of the drift term's draw): without it, the drift term's lognormal, where
     * the prediction has it; with it under --no-jitter-term ("The ranks' states") */
    t[13].states = m->states ? NULL : p->states;
    t[13].n_states = m->states ? 0 : p->n_states;
    t[13].drift = m->states ? p->drift : 0;
    on[13] = p->jitter && p->n_states > 0;
    sfx[13] = m->states ? RUN_TAG_NOSTATES_SUFFIX : RUN_TAG_STATES_SUFFIX;
    /* [14] the other side of the sharing term, where the profile measured its ratio: the
     * default's, per class under --sharing-per-class where the profile has the ratios */
    t[14].alone = m->alone > 0 ? 0 : p->alone;
    if (m->alone <= 0 && o->share_class && p->share_class_on) {
        t[14].share_cross_f = p->share_class[0];
        t[14].share_alone_b = p->share_class[1];
        t[14].share_cross_b = p->share_class[2];
    }
    on[14] = p->alone > 0;
    sfx[14] = m->alone > 0 ? RUN_TAG_NOSHARE_SUFFIX : RUN_TAG_SHARE_SUFFIX;
    /* [15] the states term with each round's backwards (I + W) at their own speeds, where the
     * profile's rounds lines time them and the prediction has the term: on a quiet host it
     * spread the runs' errors more than F's speeds on all compute ("The states term per class") */
    t[15].states_b = p->states_per_class ? p->states_b : NULL;
    on[15] = m->states && p->states_per_class;
    sfx[15] = RUN_TAG_BSTATES_SUFFIX;
    /* [16] the other side of the sharing term per class, where the prediction has the term and
     * the profile timed the backwards' phases: per class, or the one ratio on all under
     * --sharing-per-class */
    const int per_class = m->share_alone_b > 0; /* --sharing-per-class */
    t[16].share_cross_f = per_class ? 0 : p->share_class[0];
    t[16].share_alone_b = per_class ? 0 : p->share_class[1];
    t[16].share_cross_b = per_class ? 0 : p->share_class[2];
    on[16] = m->alone > 0 && p->share_class_on;
    sfx[16] = per_class ? RUN_TAG_ONESHARE_SUFFIX : RUN_TAG_CLASSSHARE_SUFFIX;
    int rc = PL_OK;
    for (int i = 0; rc == PL_OK && i < CLI_RUN_ALTS; i++)
        if (on[i]) rc = predict_beside(o, st, p, &t[i], i, sfx[i], e);
    return rc;
}

/* Makes the prediction from the profile, each stage's STEP on its rank's core when the profile
 * has one worker per rank (between the passes, whose block rows are the ranks' own too; or P
 * workers at once), else the STEP over all of them, and the predictions stored beside it; then
 * writes --save-profile. Returns PL_OK or an error in e. */
static int predict(const run_opts *o, run_state *st, pl_err *e) {
    profile_terms p;
    int rc = read_profile_terms(&st->pcsv, st->profile_src, st->s->ranks, &p, e);
    if (rc != PL_OK) return rc;
    /* the sharing term's ratio, the profile's (read_profile_terms), but for replicated stages,
     * which the simulator's term does not serve */
    for (int q = 0; o->c.replicas && q < st->s->stages; q++)
        if (o->c.replicas[q] > 1) p.alone = 0, p.share_class_on = 0;
    if (o->share_class && p.alone > 0 && !p.share_class_on)
        fprintf(stderr, "pipelab run: warning: --sharing-per-class: the profile (%s) has no ratios per class (its worker lines "
                        "end before bwd_cross_s, or its forward beside backwards reads <= 0); the sharing term takes its one "
                        "ratio\n", st->profile_src);
    const cli_run_terms m = terms_of(o, &p, o->terms);
    rc = predict_one(o, st, &p, &m, &st->pr, e);
    st->have_pred = rc == PL_OK;
    st->pred_noise[0] = cli_run_terms_cv(&m, st->s->ranks);
    st->pred_noise[1] = m.drift;
    st->pred_noise[2] = m.states ? m.n_states : 0;
    st->pred_noise[3] = m.alone;
    st->share_measured = p.alone;
    memcpy(st->share_class, p.share_class, sizeof st->share_class);
    st->have_share_class = p.share_class_on;
    st->pred_noise[4] = m.share_cross_f;
    st->pred_noise[5] = m.share_alone_b;
    st->pred_noise[6] = m.share_cross_b;
    if (rc == PL_OK) rc = predict_others(o, st, &p, &m, e);
    free(p.buf);
    if (rc != PL_OK) return rc;
    const pl_buf *t = &st->pcsv;
    return o->save_profile && t->len ? pl_write_file(o->save_profile, t->data, t->len, e) : PL_OK;
}

/* Writes --dump-weights, stores the measured and predicted runs (unless --no-db) and puts the
 * report in o's format into out, with the cost model's memory per rank beside the measured. A
 * store that fails (a full disk, a database gone read-only during the run) stored nothing (one
 * transaction, rolled back) and loses no measurement: the report is put into out all the same,
 * as under --no-db (run ids 0), and e says that it was printed but not stored. Returns PL_OK or
 * an error in e. */
static int report(const run_opts *o, run_state *st, int argc, char **argv, pl_buf *out, pl_err *e) {
    const sched *s = st->s;
    const sim_result *pr = st->have_pred ? &st->pr : NULL;
    st->mem = pl_calloc((size_t)s->ranks, sizeof *st->mem);
    if (st->mem && exec_mem_predict(s, &o->c, st->mem, e) != PL_OK) return failed(e);
    const exec_result *r = &st->r;
    if (o->dump && pl_write_file(o->dump, (const char *)r->final_weights, r->n_weights * sizeof(float), e) != PL_OK)
        return failed(e);
    pl_buf cmd;
    pl_buf_init(&cmd);
    pl_buf_puts(&cmd, "pipelab");
    for (int i = 0; i < argc; i++) pl_buf_printf(&cmd, " %s", argv[i]);
    cli_run_store_info info = {o->db, o->tag, cmd.data, o->transport, pr ? st->profile_src : "", o->a.from, o->profile,
                               o->seed, o->trace, {NULL}, {NULL}, NULL, st->share_measured,
                               st->have_share_class ? st->share_class : NULL, NULL};
    for (int i = 0; i < CLI_RUN_ALTS; i++) {
        info.pred_alt[i] = st->have_alt[i] ? &st->pr_alt[i] : NULL;
        info.tag_alt[i] = st->tag_alt[i];
    }
    info.host_probe = st->have_probe ? &st->probe : NULL;
    /* what --interruptions gave where the prediction priced it (a share over 0), so that a
     * stored run says which host state it was priced for */
    const double intr[4] = {o->intr_share, o->intr_rate, o->intr_short_share, o->intr_short_rate};
    if (pr && (intr[0] > 0 || intr[2] > 0)) info.interruptions = intr;
    int64_t ids[2] = {0, 0};
    int rc = o->no_db ? PL_OK : cli_run_store(s, r, pr, &info, ids, e);
    if (strcmp(o->format, "json") == 0) out_json(s, r, pr, st->pred_noise, st->mem, &info, ids, out);
    else if (strcmp(o->format, "csv") == 0) out_csv(s, r, pr, st->mem, info.host_probe, out);
    else out_table(o, s, r, pr, st->mem, st->profile_src, st->pred_noise, info.host_probe, out);
    if (rc == PL_OK && !o->no_db && strcmp(o->format, "table") == 0)
        pl_buf_printf(out, "stored             measured run %lld, simulated run %lld in %s%s%s\n", (long long)ids[0],
                      (long long)ids[1], o->db ? o->db : STORE_DEFAULT_PATH, o->tag ? ", tag " : "", o->tag ? o->tag : "");
    if (rc != PL_OK)
        pl_err_prefix(e, "the run's results were printed but not stored in %s (nothing of the run was written): ",
                      o->db ? o->db : STORE_DEFAULT_PATH);
    pl_buf_free(&cmd);
    return rc;
}

/* Entry point of `pipelab run`: parse, prepare, execute, predict, report; returns an exit code. */
int cli_run(int argc, char **argv) {
    run_opts o;
    int rc = run_opts_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    pl_err e;
    pl_err_clear(&e);
    run_state st;
    run_state_init(&st);
    pl_buf out;
    pl_buf_init(&out);
    int code = prepare(&o, &st, &e);
    if (code == PL_OK) code = execute(&o, &st, &e);
    if (code == PL_OK && st.is_root && st.prof) code = predict(&o, &st, &e);
    if (code == PL_OK && st.is_root) code = report(&o, &st, argc, argv, &out, &e);
    /* the report, wherever one was made (a failed store's too), before any error */
    rc = st.is_root && out.len ? cli_write_output(NULL, &out) : CLI_OK;
    if (code != PL_OK) rc = st.alike ? cli_fail_alike(&e) : cli_fail(&e);
    if (o.mpi && o.cuda) exec_cuda_mpi_finalize();
    else if (o.mpi) exec_mpi_finalize();
    pl_buf_free(&out);
    run_state_free(&st);
    free(o.replicas);
    return rc;
}

#else

/* Returns CLI_EUSER: this build has no executor. */
int cli_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipelab: this build has no executor (exec/)\n");
    return CLI_EUSER;
}

#endif
