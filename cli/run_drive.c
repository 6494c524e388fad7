/* run_drive.c: the glue of `pipelab run` that joins the executor to the simulator and the
 * results store: the executor flags run and profile share, the simulator's prediction for an
 * executed configuration, and the measured and simulated runs written to the store (run_drive.h). It lives in cli/ because the executor never
 * includes simulator or store headers (DESIGN.md §2). */
#ifdef PIPELAB_HAVE_PL_EXEC
#include "run_drive.h"

#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec_cuda.h"
#include "store.h"

/* Room for a uid of store_new_uid (it writes 37 bytes). */
#define RUN_UID_ROOM 64

/* ---------------------------------------------------------------- flags */

/* run_drive.h. Returns -1 for another command's option, CLI_OK once applied, CLI_EUSAGE after
 * printing a bad value. */
int cli_exec_opt(const char *cmd, int c, const char *arg, exec_config *cfg, cli_exec_args *a) {
    long seed;
    static const struct { int opt; const char *name; } shape[] = {
        {CLI_O_WIDTH, "--width"}, {CLI_O_DEPTH, "--depth"}, {CLI_O_FFN, "--ffn"}, {CLI_O_MBS, "--microbatch-size"}};
    for (size_t k = 0; k < sizeof shape / sizeof *shape; k++)
        if (c == shape[k].opt) a->shape_flag = shape[k].name;
    switch (c) {
    case CLI_O_WIDTH: return cli_int_arg(cmd, "--width", arg, 1, CLI_EXEC_MAX_WIDTH, &cfg->hidden) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_DEPTH: return cli_int_arg(cmd, "--depth", arg, 1, CLI_EXEC_MAX_SIZE, &a->depth) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_FFN: return cli_int_arg(cmd, "--ffn", arg, 1, CLI_EXEC_MAX_SIZE, &cfg->ffn) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_MBS:
        return cli_int_arg(cmd, "--microbatch-size", arg, 1, CLI_EXEC_MAX_SIZE, &cfg->microbatch_size) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_SEED:
        if (cli_long_arg(cmd, "--seed", arg, 0, CLI_EXEC_MAX_SEED, &seed)) return CLI_EUSAGE;
        a->seed = (uint64_t)seed;
        a->have_seed = 1;
        return CLI_OK;
    case CLI_O_BACKEND: a->backend = arg; return CLI_OK;
    case CLI_O_PREC: a->precision = arg; return CLI_OK;
    case CLI_O_SMSPLIT: cfg->sm_split = 1; return CLI_OK;
    case CLI_O_MODEL: a->model = arg; return CLI_OK;
    case CLI_O_SMALLPAGES: cfg->small_pages = 1; return CLI_OK;
    default: return -1;
    }
}

/* The keys of --model's two generators, in the order of model_keys' values. */
enum { MK_WIDTH, MK_DEPTH, MK_MBS, MK_HEADS, MK_SEQ, MK_FFN_MULT, MK_KEYS };
#define CLI_EXEC_MAX_FFN_MULT 64
#define CLI_EXEC_SPEC_MAX 256
typedef struct model_key {
    const char *name;
    int slot;     /* MK_* */
    long hi;      /* largest value */
    int required;
} model_key;
static const model_key mlp_keys[] = {{"width", MK_WIDTH, CLI_EXEC_MAX_WIDTH, 1}, {"depth", MK_DEPTH, CLI_EXEC_MAX_SIZE, 1},
                                     {"microbatch", MK_MBS, CLI_EXEC_MAX_SIZE, 1},
                                     {"ffn_mult", MK_FFN_MULT, CLI_EXEC_MAX_FFN_MULT, 0}, {NULL, 0, 0, 0}};
static const model_key gpt_keys[] = {{"layers", MK_DEPTH, CLI_EXEC_MAX_SIZE, 1}, {"hidden", MK_WIDTH, CLI_EXEC_MAX_WIDTH, 1},
                                     {"heads", MK_HEADS, CLI_EXEC_MAX_WIDTH, 1}, {"seq", MK_SEQ, CLI_EXEC_MAX_SIZE, 1},
                                     {"microbatch", MK_MBS, CLI_EXEC_MAX_SIZE, 1}, {NULL, 0, 0, 0}};

/* Reads the "key=value" list after the generator's colon into v[MK_KEYS] (0 = not given) by the
 * table keys, split by the cost models' rule (cost_spec_split). Returns -1, or CLI_EUSAGE after
 * printing the bad item. */
static int model_values(const char *cmd, const char *gen, const char *list, const model_key *keys, int *v) {
    cost_spec_kv kv[32];
    pl_err e;
    int n = cost_spec_split(gen, list, kv, (int)(sizeof kv / sizeof *kv), &e);
    if (n < 0) return cli_usage_error(cmd, "--%s", e.msg);
    for (int i = 0; i < n; i++) {
        const model_key *k = keys;
        while (k->name && strcmp(k->name, kv[i].key) != 0) k++;
        if (!k->name) {
            char known[CLI_EXEC_SPEC_MAX] = "";
            for (const model_key *q = keys; q->name; q++) snprintf(known + strlen(known), sizeof known - strlen(known), " %s", q->name);
            return cli_usage_error(cmd, "--model %s: unknown key '%s' (known:%s)", gen, kv[i].key, known);
        }
        char flag[CLI_EXEC_SPEC_MAX];
        snprintf(flag, sizeof flag, "--model %.16s: %.31s", gen, kv[i].key);
        if (cli_int_arg(cmd, flag, kv[i].val, 1, k->hi, &v[k->slot])) return CLI_EUSAGE;
    }
    for (const model_key *k = keys; k->name; k++)
        if (k->required && !v[k->slot]) return cli_usage_error(cmd, "--model %s: '%s' is missing", gen, k->name);
    return -1;
}

/* run_drive.h. */
int cli_exec_model(const char *cmd, const char *spec, exec_config *cfg, cli_exec_args *a) {
    static const char form[] = "mlp:width=H,depth=L,microbatch=B[,ffn_mult=K] or "
                               "transformer:layers=L,hidden=H,heads=A,seq=S,microbatch=B";
    const char *colon = strchr(spec, ':');
    size_t gl = colon ? (size_t)(colon - spec) : strlen(spec);
    int gpt = gl == strlen("transformer") && strncmp(spec, "transformer", gl) == 0;
    if (!gpt && !(gl == strlen("mlp") && strncmp(spec, "mlp", gl) == 0))
        return cli_usage_error(cmd, "--model must be %s (got '%s')", form, spec);
    if (a->shape_flag)
        return cli_usage_error(cmd, "--model gives the model's shape; %s cannot be given beside it", a->shape_flag);
    int v[MK_KEYS] = {0};
    int rc = model_values(cmd, gpt ? "transformer" : "mlp", colon ? colon + 1 : "", gpt ? gpt_keys : mlp_keys, v);
    if (rc >= 0) return rc;
    cfg->block = gpt ? EXEC_BLOCK_GPT : EXEC_BLOCK_MLP;
    cfg->hidden = v[MK_WIDTH];
    cfg->microbatch_size = v[MK_MBS];
    cfg->ffn = v[MK_FFN_MULT] ? v[MK_FFN_MULT] * v[MK_WIDTH] : 0;
    a->depth = v[MK_DEPTH];
    if (gpt) {
        if (v[MK_WIDTH] % v[MK_HEADS] != 0)
            return cli_usage_error(cmd, "--model transformer: heads (%d) must divide hidden (%d)", v[MK_HEADS], v[MK_WIDTH]);
        cfg->heads = v[MK_HEADS];
        cfg->seq = v[MK_SEQ];
    }
    return -1;
}

/* run_drive.h. Returns -1 when --backend and --precision name what the executor has. */
int cli_exec_check(const char *cmd, cli_exec_args *a, exec_config *cfg) {
    const char *backend = a->backend ? a->backend : "cpu";
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda"))
        return cli_usage_error(cmd, "--backend must be cpu or cuda (got '%s')", backend);
    cfg->backend = strcmp(backend, "cuda") == 0 ? EXEC_BACKEND_CUDA : EXEC_BACKEND_CPU;
    if (a->precision && exec_precision_parse(a->precision, &cfg->precision))
        return cli_usage_error(cmd, "--precision must be fp32, tf32 or bf16 (got '%s')", a->precision);
    return a->model ? cli_exec_model(cmd, a->model, cfg, a) : -1;
}

/* ---------------------------------------------------------------- predictions */

/* Sets r's peak memory per rank to the executor's own (exec_mem_walk): the cost model's part,
 * which the simulator predicts, plus the buffers only the executor holds (scratch, output and
 * inner gradients, send staging), from the code that accounts them in the run. Returns PL_OK or
 * the walk's error. */
static int predict_exec_memory(const sched *s, const exec_config *cfg, sim_result *r, pl_err *e) {
    exec_mem *mem = pl_calloc((size_t)s->ranks, sizeof *mem);
    if (!mem) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = exec_mem_walk(s, cfg, mem, e);
    if (rc == PL_OK) {
        r->peak_bytes = 0;
        for (int q = 0; q < s->ranks; q++) {
            r->rank[q].peak_bytes = (int64_t)mem[q].total_bytes;
            if (r->rank[q].peak_bytes > r->peak_bytes) r->peak_bytes = r->rank[q].peak_bytes;
        }
    } else {
        pl_err_prefix(e, "prediction of the executor's memory: ");
    }
    free(mem);
    return rc;
}

/* Sets up the terms t of schedule s in reuse (sim_reuse_init): each stage's ratios are its
 * rank's worker's. PL_OK or PL_ENOMEM (reuse then holds nothing to free). */
static int terms_init(const sched *s, const cli_run_terms *t, sim_reuse *reuse, pl_err *e) {
    int rc = sim_reuse_init(reuse, s, e);
    if (rc != PL_OK) return rc;
    reuse->hot_on = t->reuse_i && t->reuse_w;
    reuse->first_on = t->first && t->rest;
    reuse->again_on = t->again != NULL;
    reuse->before_on = t->back && t->reuse_i;
    for (int q = 0; q < s->stages; q++) {
        int k = s->stage_rank[q];
        if (reuse->hot_on) {
            reuse->i_ratio[q] = t->reuse_i[k];
            reuse->w_ratio[q] = t->reuse_w[k];
        }
        if (reuse->before_on) {
            reuse->i_ratio[q] = t->reuse_i[k];
            reuse->back[q] = t->back[k];
        }
        for (int c = 0; c < SIM_FIRST_KINDS; c++) {
            if (reuse->first_on) {
                reuse->first[SIM_FIRST_KINDS * q + c] = t->first[SIM_FIRST_KINDS * k + c];
                reuse->rest[SIM_FIRST_KINDS * q + c] = t->rest[SIM_FIRST_KINDS * k + c];
            }
            if (reuse->again_on) reuse->again[SIM_FIRST_KINDS * q + c] = t->again[SIM_FIRST_KINDS * k + c];
        }
    }
    return PL_OK;
}

/* One prediction's simulation: a run, or with c->cv or c->rank_cv > 0 (the jitter and drift
 * terms) the median of CLI_RUN_JITTER_RUNS stochastic ones; with the states term's rows, each
 * row as often as the others, CLI_RUN_JITTER_RUNS runs at least. */
static int run_sim(const sched *s, const sim_costs *costs, const sim_config *c, sim_result *r, pl_err *e) {
    if (sim_config_draws(c)) return sim_run_median(s, costs, c, cli_run_sim_runs(c->speed_draws_n), r, e);
    return c->cv > 0 || c->rank_cv > 0 ? sim_run_median(s, costs, c, CLI_RUN_JITTER_RUNS, r, e) : sim_run(s, costs, c, r, e);
}

/* The share of a busy core's time that the profile left out of a kind whose part of a profile
 * round lasts `part` seconds: each band's share where the part holds a gap of the band with
 * probability under one half, its rate times the part at most ln 2 (gaps as a Poisson process). A
 * longer part holds the band's gaps at its median too, and the profile timed them. */
static double intr_left_out(const cli_run_terms *t, double part) {
    const double share[2] = {t->intr_share, t->intr_short_share}, rate[2] = {t->intr_rate, t->intr_short_rate};
    double s = 0;
    for (int b = 0; b < 2; b++)
        if (share[b] > 0 && rate[b] * part <= M_LN2) s += share[b];
    return s;
}

/* The interruption term (cli_run_terms.intr_share, intr_short_share): per rank, each of F, I, W
 * and the STEP takes its time over 1 less the share its profile round's part left out
 * (intr_left_out), the STEP not at all when at the rounds' mean (step_mean), which holds the gaps
 * already. A round times EXEC_PROFILE_SLOTS microbatches through the rank's blocks, each kind
 * apart, and a STEP of each block: the kind's part of a round lasts the slots times the rank's
 * stages' times of it, the STEP's the rank's stages' STEPs (docs/validate_cpu.md, "What the
 * tail is made of", "Short gaps"). */
static void interruption_term(sim_model *sm, const sched *s, const cli_run_terms *t) {
    for (int r = 0; r < s->ranks; r++) {
        double part[4] = {0, 0, 0, 0};
        for (int q = 0; q < sm->stages; q++)
            if (s->stage_rank[q] == r) {
                part[0] += EXEC_PROFILE_SLOTS * sm->stage[q].f_s;
                part[1] += EXEC_PROFILE_SLOTS * sm->stage[q].i_s;
                part[2] += EXEC_PROFILE_SLOTS * sm->stage[q].w_s;
                part[3] += sm->step_s[q];
            }
        double f[4];
        for (int k = 0; k < 4; k++) f[k] = 1 / (1 - intr_left_out(t, part[k]));
        for (int q = 0; q < sm->stages; q++)
            if (s->stage_rank[q] == r) {
                sim_model_scale_fiw(sm, q, f);
                if (!t->step_mean) sm->step_s[q] *= f[3];
            }
    }
}

/* Sets the profile's measured times in sm, a model of s without hardware: each stage's STEP
 * (the profile's of one block, or its rank's own when rank_step_s is given, times its blocks),
 * the point-to-point link of transport tr and the hand-off's hold on the ranks, the all-reduce
 * link (in *link) of replicated stages, and the version and interruption terms of t. */
static void model_times(sim_model *sm, const sched *s, const exec_config *cfg, const cost_model *m, cost_transport tr,
                        const double *rank_step_s, const cli_run_terms *t, cost_hw *link) {
    /* no hardware, so no memory bandwidth for cost_step_s: the STEP of a stage is its blocks
     * times the profile's measured STEP of one block (exec_profile_layers_n), when it has one,
     * or its rank's own */
    if (cfg->pred_step_s > 0)
        for (int q = 0; q < sm->stages; q++) sm->step_s[q] = cfg->pred_step_s * (sm->bound[q + 1] - sm->bound[q]);
    for (int q = 0; rank_step_s && q < sm->stages; q++)
        sm->step_s[q] = rank_step_s[s->stage_rank[q]] * (sm->bound[q + 1] - sm->bound[q]);
    /* SEND/RECV on the profile's measured point-to-point link of the run's transport (the
     * ranks' hand-off), else free as without hardware */
    if (cost_model_p2p_link(m, tr, &sm->hw)) {
        /* and the hand-off's own time on the sender and the receiver, which holds them */
        sm->send_hold = m->p2p_send[tr];
        sm->post_hold = m->p2p_post[tr];
    }
    int replicated = 0;
    for (int q = 0; q < sm->stages; q++) replicated |= sm->replicas[q] > 1;
    if (cli_allreduce_link("run", m, (int)tr, replicated, "0 (free links)", link) >= 0) sm->allreduce_link = link;
    /* the version term: the F, I and W of each stage that steps after each of its backwards at
     * its rank's ratio of the cycle on two weight versions to the cycle in place (docs/
     * validate_cpu.md, "Two weight versions: the version term") */
    for (int q = 0; t->versions && q < sm->stages; q++)
        if (sched_stage_steps_each_backward(s, q)) sim_model_scale_fiw(sm, q, t->versions + 3 * s->stage_rank[q]);
    if (t->intr_share > 0 || t->intr_short_share > 0) interruption_term(sm, s, t);
}

/* run_drive.h. */
int cli_run_sim_runs(int n_states) {
    if (n_states <= 0) return CLI_RUN_JITTER_RUNS;
    return (CLI_RUN_JITTER_RUNS + n_states - 1) / n_states * n_states;
}

/* run_drive.h. */
double cli_run_terms_cv(const cli_run_terms *t, int ranks) {
    double cv2 = 0;
    for (int q = 0; t->jitter && q < ranks; q++) cv2 += t->jitter[q] * t->jitter[q] / ranks;
    return sqrt(cv2);
}

/* Fills c, the simulator's configuration of the prediction of s on sm: the executor's, the
 * budget, the trace, and the jitter and drift terms of t. */
static void predict_config(sim_config *c, sim_model *sm, const sched *s, const exec_config *cfg, const cli_run_terms *t) {
    sim_config_init(c);
    sim_model_config(sm, c);
    c->budget = cfg->budget;
    c->record_trace = cfg->record_ops; /* a traced run stores the predicted timeline beside it */
    sim_config_executor(c, s, cfg->backend == EXEC_BACKEND_CUDA);
    c->cv = cli_run_terms_cv(t, s->ranks); /* the jitter term */
    c->rank_cv = t->drift; /* the drift term: each worker's speed drawn once per run */
    c->speed_draws = t->states; /* the states term, in its place where the profile has rounds */
    c->speed_draws_b = t->states ? t->states_b : NULL;
    c->speed_draws_n = t->states ? t->n_states : 0;
    c->seed = CLI_RUN_JITTER_SEED;
}

/* run_drive.h. Returns PL_OK with r filled, or the error of the profile check, the stage split
 * or the simulator (prefixed "prediction: "). */
int cli_run_predict(const sched *s, const exec_config *cfg, const cost_model *m, cost_transport tr, const double *rank_step_s,
                    const cli_run_terms *terms, sim_result *r, pl_err *e) {
    static const cli_run_terms none;
    const cli_run_terms *t = terms ? terms : &none;
    memset(r, 0, sizeof *r);
    int rc = exec_profile_check(m, cfg, m->src_path ? m->src_path : "profile", e);
    if (rc) return rc;
    cost_partition *p = exec_cost_partition(s, cfg, e);
    if (!p) return e->code;
    cost_opts o;
    exec_cost_opts(m, cfg, &o);
    sim_model sm;
    memset(&sm, 0, sizeof sm);
    rc = sim_model_init(&sm, s, m, p, NULL, &o, e);
    cost_hw link;
    if (rc == PL_OK) model_times(&sm, s, cfg, m, tr, rank_step_s, t, &link);
    /* the I next to its recomputed forward, per stage from its rank */
    double *next = NULL;
    if (rc == PL_OK && cli_run_terms_next_on(t) && !(next = pl_calloc((size_t)sm.stages, sizeof *next)))
        rc = pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0; next && q < sm.stages; q++) next[q] = t->next[s->stage_rank[q]];
    sm.rerun_next = next;
    /* the reuse-distance, first-touch and again terms */
    sim_reuse reuse;
    int with_reuse = rc == PL_OK && ((t->reuse_i && t->reuse_w) || (t->first && t->rest) || t->again || (t->back && t->reuse_i));
    if (with_reuse && (rc = terms_init(s, t, &reuse, e)) == PL_OK) sm.reuse = &reuse;
    with_reuse = with_reuse && rc == PL_OK;
    double **share = NULL;
    if (rc == PL_OK) {
        sim_config c;
        predict_config(&c, &sm, s, cfg, t);
        sim_costs costs = sim_model_costs(&sm);
        /* the sharing term: each action's factor at the fixed point of the run's overlaps */
        int iters = 0;
        if (t->alone > 0) {
            const sim_share_ratios q = {t->alone, t->share_cross_f, t->share_alone_b, t->share_cross_b};
            rc = sim_share_solve(s, &costs, &c, &q, &share, &iters, e);
        }
        c.act_scale = (const double *const *)share;
        if (rc == PL_OK) rc = run_sim(s, &costs, &c, r, e);
        if (rc == PL_OK && t->window) {
            /* the pass-length term: every rank's times at the scale of the predicted pass, by the
             * workers' mean factor */
            double f = exec_window_factor_mean(t->window, s->ranks, r->makespan_s);
            for (int q = 0; q < sm.stages; q++) sim_model_scale_stage(&sm, q, f);
            sim_result_free(r);
            costs = sim_model_costs(&sm);
            rc = run_sim(s, &costs, &c, r, e);
        }
        if (rc) pl_err_prefix(e, "prediction: ");
    }
    if (rc == PL_OK) rc = predict_exec_memory(s, cfg, r, e);
    sim_share_free(s, share);
    if (with_reuse) sim_reuse_free(&reuse);
    free(next);
    sim_model_free(&sm);
    cost_partition_free(p);
    return rc;
}

/* ---------------------------------------------------------------- results store */

/* run_drive.h. Appends one JSON object to b (nothing to return: b records a failed allocation). */
void cli_run_params_json(const exec_result *r, const cli_run_store_info *info, pl_buf *b) {
    /* keys that `pipelab compare` matches on: model.spec, hardware.name, microbatch_size,
     * precision, partition.bounds, partition.replicas (results/store.h) */
    char host[CLI_HOST_MAX] = "";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    char spec[EXEC_MODEL_SPEC_MAX];
    exec_model_spec(r, spec, sizeof spec);
    pl_buf_printf(b, "{\"model\":{\"spec\":\"%s", spec);
    /* the CUDA backend names its GPUs (exec_result.device), so compare pairs runs per device */
    int gpu = r->backend && strcmp(r->backend, "cuda") == 0;
    pl_buf_printf(b, "\",\"width\":%d,\"ffn\":%d,\"depth\":%d,\"param_bytes\":%zu},\"hardware\":{\"name\":\"%s",
                  r->hidden, r->ffn, r->layers, r->param_bytes, gpu ? "cuda:" : "cpu:");
    pl_buf_json_body(b, host, strlen(host));
    if (gpu) {
        pl_buf_putc(b, ':');
        pl_buf_json_body(b, r->device, strlen(r->device));
    }
    pl_buf_printf(b, "\",\"blas\":\"%s\",\"cores\":%d},\"microbatch_size\":%d,\"precision\":\"%s\","
                     "\"partition\":{\"bounds\":[0", r->blas ? r->blas : "", r->cores, r->microbatch_size,
                  r->precision ? r->precision : "fp32");
    for (int q = 0, sum = 0; q < r->stages; q++) pl_buf_printf(b, ",%d", sum += r->stage_blocks[q]);
    pl_buf_puts(b, "],\"replicas\":[");
    for (int q = 0; q < r->stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", r->stage_replicas ? r->stage_replicas[q] : 1);
    /* median_passes: the timed passes the run's figures come from (exec_median_passes); pipelab
     * plot timeline draws the first */
    pl_buf_printf(b, "]},\"lr\":%.9g,\"momentum\":%.9g,\"warmup_passes\":%d,\"timed_passes\":%d,"
                     "\"median_passes\":[%d,%d],\"iterations_per_pass\":%d,\"huge_pages\":%s,\"transport\":\"%s\",\"profile\":",
                  r->lr, r->momentum, r->warmup_passes, r->timed_passes, r->median_pass[0], r->median_pass[1],
                  r->iterations_per_pass, r->huge_pages ? "true" : "false", info->transport ? info->transport : "threads");
    pl_buf_json_string(b, info->profile);
    pl_buf_putc(b, ',');
    if (r->timed_passes_most)
        pl_buf_printf(b, "\"steady\":{\"max\":%.9g,\"timed_least\":%d,\"timed_most\":%d,\"steadiness\":%.9g},", r->steady_max,
                      r->timed_passes_least, r->timed_passes_most, r->steadiness);
    if (info->host_probe)
        pl_buf_printf(b, "\"host_probe\":{\"workers\":%d,\"fwd_s\":%.9g,\"alone_fwd_s\":%.9g},", info->host_probe->workers,
                      info->host_probe->fwd_s, info->host_probe->alone_fwd_s);
    if (info->share_alone > 0) pl_buf_printf(b, "\"share_alone\":%.6g,", info->share_alone);
    if (info->share_class)
        pl_buf_printf(b, "\"share_class\":[%.6g,%.6g,%.6g],", info->share_class[0], info->share_class[1], info->share_class[2]);
    if (info->interruptions)
        pl_buf_printf(b, "\"interruptions\":{\"share\":%.9g,\"rate\":%.9g,\"short_share\":%.9g,\"short_rate\":%.9g},",
                      info->interruptions[0], info->interruptions[1], info->interruptions[2], info->interruptions[3]);
    const char *roles[] = {"schedule", "profile"}, *paths[] = {info->from, info->profile_file};
    cli_inputs_json(b, roles, paths, 2);
    pl_buf_puts(b, "}");
}

/* Fills the fields both runs share (configuration and provenance). */
static void run_common(const sched *s, const exec_result *r, const cli_run_store_info *info, const char *pj, store_run *run) {
    memset(run, 0, sizeof *run);
    cli_store_run_sched(run, s);
    run->tag = info->tag;
    run->cmdline = info->cmdline;
    run->iterations = r->iterations_per_pass;
    run->params_json = pj;
    run->seed = info->seed;
}

/* Fills run (after run_common) and rm[ranks] with the measured results of r; returns the number
 * of actions the ranks recorded. */
static size_t measured_run(const exec_result *r, store_run *run, store_rank_metric *rm) {
    double idle = 0, comm = 0, bub = 0;
    int64_t peak = 0;
    size_t nops = 0;
    int p = r->ranks;
    for (int q = 0; q < p; q++) {
        const exec_rank_result *x = &r->rank[q];
        idle += x->idle_s;
        comm += x->comm_s;
        bub += x->bubble_fraction;
        if ((int64_t)x->peak.total_bytes > peak) peak = (int64_t)x->peak.total_bytes;
        rm[q] = (store_rank_metric){q, x->busy_s, x->idle_s, x->bubble_fraction, x->comm_s, (int64_t)x->peak.total_bytes};
        nops += x->n_ops;
    }
    run->kind = "measured";
    run->iteration_time_s = r->iter_median_s;
    run->throughput_samples_s = r->throughput_samples_s;
    run->idle_s = idle;
    run->bubble_fraction = p > 0 ? bub / p : 0;
    run->zb_bubble_rate = r->zb_bubble_rate; /* NAN when not measured */
    run->comm_time_s = comm;
    run->peak_mem_bytes = peak;
    run->repetitions = r->timed_passes;
    run->iteration_time_stddev_s = r->iterations_per_pass > 0 ? r->pass_stddev_s / r->iterations_per_pass : r->pass_stddev_s;
    return nops;
}

/* Fills run (after run_common) and rm[ranks] with the prediction pred. */
static void predicted_run(const sim_result *pred, int ranks, store_run *run, store_rank_metric *rm) {
    run->kind = "simulated";
    run->iteration_time_s = pred->iteration_time_s;
    run->throughput_samples_s = pred->throughput;
    run->idle_s = pred->idle_s;
    run->bubble_fraction = pred->bubble_fraction;
    run->zb_bubble_rate = pred->zb_bubble_rate;
    run->comm_time_s = pred->comm_s;
    run->peak_mem_bytes = pred->peak_bytes;
    run->oom = pred->oom;
    run->repetitions = 1;
    for (int q = 0; q < ranks; q++) {
        const sim_rank_stats *x = &pred->rank[q];
        rm[q] = (store_rank_metric){q, x->busy_s, x->idle_s, x->bubble_fraction, x->comm_s, x->peak_bytes};
    }
}

/* Fills o with one op row per action the ranks of r recorded (nops of them, rank by rank).
 * Returns PL_OK or PL_ENOMEM in e. */
static int measured_ops(const exec_result *r, size_t nops, cli_op_rows *o, pl_err *e) {
    int rc = cli_op_rows_alloc(o, nops, e);
    if (rc != PL_OK) return rc;
    size_t k = 0;
    for (int q = 0; q < r->ranks; q++)
        for (size_t i = 0; i < r->rank[q].n_ops; i++, k++) {
            const exec_op *x = &r->rank[q].ops[i];
            cli_op_rows_set(o, k, q, (int)i, &x->act, x->start_s, x->end_s);
        }
    return PL_OK;
}

/* run_drive.h. Returns cli_check_output's verdict on a new database (or a folder there), else
 * store_open's. */
int cli_run_check_db(const char *path, pl_err *e) {
    if (!path || !*path) path = STORE_DEFAULT_PATH;
    /* a new file: the store makes its missing folders, and its -wal and -shm beside it; a
     * folder there: named as such */
    struct stat st;
    if (stat(path, &st) != 0 || S_ISDIR(st.st_mode)) return cli_check_output("--db", path, 1, e);
    store *db = NULL;
    int rc = store_open(path, 0, &db, e);
    store_close(db);
    return rc;
}

/* Writes info->pred_alt[i], another prediction (run_drive.h), as a simulated run of its own
 * (tag info->tag_alt[i]; uid STORE_PREDICTION_PREFIX, that tag, STORE_PREDICTION_ALT_SEP and
 * muid, the measured run's; its timeline when ops are stored) into db, rm[ranks] its scratch.
 * Returns PL_OK or the error. */
static int store_alt(const sched *s, const exec_result *r, const cli_run_store_info *info, int i, const char *pj,
                     const char *muid, store *db, store_rank_metric *rm, pl_err *e) {
    store_run run;
    run_common(s, r, info, pj, &run);
    run.tag = info->tag_alt[i];
    pl_buf uid;
    pl_buf_init(&uid);
    pl_buf_printf(&uid, "%s%s%c%s", STORE_PREDICTION_PREFIX, run.tag ? run.tag : "", STORE_PREDICTION_ALT_SEP, muid);
    if (uid.failed) {
        pl_buf_free(&uid);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    run.uid = uid.data;
    predicted_run(info->pred_alt[i], r->ranks, &run, rm);
    cli_op_rows ops = {0};
    int rc = PL_OK;
    if (info->with_ops && info->pred_alt[i]->trace) rc = cli_op_rows_trace(&ops, s, info->pred_alt[i]->trace, e);
    if (rc == PL_OK) rc = store_write_run(db, &run, rm, r->ranks, ops.ops, ops.n, NULL, e);
    cli_op_rows_free(&ops);
    pl_buf_free(&uid);
    return rc;
}

/* run_drive.h. Returns PL_OK once the measured run and its predictions are written, all in one
 * batch (store_begin): else the first error, with none of them stored. */
int cli_run_store(const sched *s, const exec_result *r, const sim_result *pred, const cli_run_store_info *info,
                  int64_t ids[2], pl_err *e) {
    if (ids) ids[0] = ids[1] = 0;
    int p = r->ranks, rc = PL_OK;
    pl_buf pj, puid;
    pl_buf_init(&pj);
    pl_buf_init(&puid);
    cli_run_params_json(r, info, &pj);
    store_rank_metric *rm = pl_calloc((size_t)p, sizeof *rm);
    cli_op_rows ops = {0};
    store *db = NULL;
    /* the measured run, and its prediction's uid: STORE_PREDICTION_PREFIX and its own */
    char muid[RUN_UID_ROOM];
    store_new_uid(muid, sizeof muid);
    pl_buf_printf(&puid, "%s%s", STORE_PREDICTION_PREFIX, muid);
    if (!rm || pj.failed || puid.failed) { rc = pl_errf(e, PL_ENOMEM, "out of memory"); goto out; }
    store_run run;
    run_common(s, r, info, pj.data, &run);
    run.uid = muid;
    size_t nops = measured_run(r, &run, rm);
    if (info->with_ops && nops && (rc = measured_ops(r, nops, &ops, e)) != PL_OK) goto out;
    rc = store_open(info->db_path, 0, &db, e);
    if (rc) goto out;
    /* one batch: an interruption or an error leaves neither a measured run without its
     * predictions nor predictions without it */
    rc = store_begin(db, e);
    if (rc) goto out;
    rc = store_write_run(db, &run, rm, p, ops.ops, ops.n, ids ? &ids[0] : NULL, e);
    if (rc || !pred) goto out;
    /* the prediction beside it: same configuration, linked to it by its uid; with the predicted
     * timeline (one pass) when the measured one is stored, so that predicted and measured
     * durations can be compared action by action (compute against waiting) */
    run_common(s, r, info, pj.data, &run);
    run.uid = puid.data;
    predicted_run(pred, p, &run, rm);
    cli_op_rows_free(&ops);
    if (info->with_ops && pred->trace && (rc = cli_op_rows_trace(&ops, s, pred->trace, e)) != PL_OK) goto out;
    rc = store_write_run(db, &run, rm, p, ops.ops, ops.n, ids ? &ids[1] : NULL, e);
    for (int i = 0; rc == PL_OK && i < CLI_RUN_ALTS; i++)
        if (info->pred_alt[i]) rc = store_alt(s, r, info, i, pj.data, muid, db, rm, e);
out:
    if (db && rc == PL_OK) rc = store_commit(db, e);
    store_rollback(db);
    if (rc != PL_OK && ids) ids[0] = ids[1] = 0; /* nothing was stored */
    store_close(db);
    free(rm);
    cli_op_rows_free(&ops);
    pl_buf_free(&pj);
    pl_buf_free(&puid);
    return rc;
}

#endif
