/* cmd_compare.c: `pipelab compare`: predicted (simulated) against measured runs, with errors. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef PIPELAB_HAVE_PL_RESULTS
#include "store.h"

static const char help_text[] =
    "usage: pipelab compare [--tag T | filters] [options]\n"
    "\n"
    "Pairs every measured run with its own prediction (the simulated run `pipelab run` stored with\n"
    "it, made from a profile measured with it), or, when it has none, with the newest simulated\n"
    "run of the same configuration: schedule kind, ranks, stages, microbatches, chunks,\n"
    "iterations, weights and recompute policies, and the model, hardware, microbatch size,\n"
    "precision and partition recorded in their parameters (a parameter counts only when both runs\n"
    "carry it). For each pair it prints the predicted and\n"
    "measured iteration time, throughput, bubble fraction and peak memory with the signed relative\n"
    "error (predicted - measured) / measured; then, over all pairs, the mean absolute percentage\n"
    "error (MAPE) and the largest error of each metric.\n"
    "\n"
    "selection:\n"
    "  --tag T               runs of both kinds with this tag\n"
    "  --sim-tag T           simulated runs with this tag (overrides --tag for them)\n"
    "  --measured-tag T      measured runs with this tag (overrides --tag for them)\n"
    "  --schedule K, --ranks P, --stages S, --microbatches M, --chunks V   only those runs\n"
    "  --loose               ignore the recorded parameters; match on the run columns only\n"
    "  --actions             also break each pair down action by action, where both runs carry\n"
    "                        their timelines (`pipelab run --trace`): per rank, the time per pass\n"
    "                        of each compute kind (F, B, I, W, OVERLAP: a forward and a\n"
    "                        backward in one action, STEP) and of communication and waiting\n"
    "                        (SEND/RECV: the rank's span outside its compute and all-reduces,\n"
    "                        on both timelines alike) and of the gradient all-reduces of\n"
    "                        replicated stages (REDUCE_GRAD), predicted against\n"
    "                        measured (the median over the timed passes), with the signed error\n"
    "                        in percent (ERR) and in ms (DIFF, predicted - measured): compute\n"
    "                        error apart from schedule error; then each class's MAPE, signed\n"
    "                        mean and largest error over all pairs and ranks, and per model\n"
    "                        and recompute policy each compute class's signed mean error and\n"
    "                        MAPE, the most under-predicted compute first (an error that\n"
    "                        follows the block's shape, not the schedule)\n"
    "  --repeats             also group the pairs by configuration (the database holding several\n"
    "                        measurements of each, e.g. grids merged with `pipelab db merge`): per\n"
    "                        configuration the runs and the mean, standard deviation, least and\n"
    "                        largest of its signed iteration-time error; then the run-to-run\n"
    "                        standard deviation pooled over the configurations measured twice or\n"
    "                        more; how far apart the runs themselves ran and their predictions\n"
    "                        (the log iteration times' spread, pooled alike) and the correlation\n"
    "                        of the two, how closely a prediction follows its run's host; the\n"
    "                        MAPE, signed mean and largest of the mean errors, and the\n"
    "                        median largest |error| that one run of each configuration would show\n"
    "                        from that spread alone (normal errors, an unbiased prediction): noise\n"
    "                        apart from bias. Each configuration's T is its mean error in standard\n"
    "                        errors of the pooled spread (*: beyond Student's t at 95%); the count\n"
    "                        of those beyond, against the 5% an unbiased prediction puts there,\n"
    "                        and the signed mean's standard error over the configurations tell a\n"
    "                        lean of the model from the host's noise. Then each schedule kind's\n"
    "                        lean: the mean of its configurations' mean errors in standard errors\n"
    "                        of their spread (*: beyond Student's t at 95%), a kind the model\n"
    "                        gets wrong one way. With --format csv it prints one line per\n"
    "                        configuration\n"
    "  --overlap             also set each compute class's measured actions that ran alone (the\n"
    "                        other ranks computing during at most a tenth of their span) against\n"
    "                        those beside the others' compute (at least nine tenths), per rank and\n"
    "                        stage (a stage's first F, B, I, W of a pass left out: first touch),\n"
    "                        over the measured runs that carry their timelines: whether the ranks\n"
    "                        slow each other down by sharing the machine (memory bandwidth,\n"
    "                        caches), the share of each class's time spent alone, and by how much\n"
    "                        pricing that time at the ratio would change it\n"
    "  --tail                also split each compute class's error, per pair and rank, into the\n"
    "                        typical action (the predicted mean action against the measured\n"
    "                        median one) and the tail (the measured mean action over the median\n"
    "                        one), over the pairs that carry both timelines: whether a class's\n"
    "                        error is its typical time or the interruptions a pass sums and a\n"
    "                        profile's median leaves out, and each class's part of the compute's\n"
    "                        signed error\n"
    "  --distance            also set each backward (B, I) against its reuse distance: how many\n"
    "                        compute actions its rank runs between the microbatch's forward on the\n"
    "                        stage and it (0, 1, 2-3, 4-7, 8-15, 16 or more), its predicted time\n"
    "                        over its measured one per action, over the pairs that carry both\n"
    "                        timelines (not under full recomputation): whether the backward's cost\n"
    "                        grows with the distance where the prediction does not price it; then\n"
    "                        the same backwards by what the other ranks computed during each\n"
    "                        (alone, beside forwards, beside backwards, mixed), at distance 0 and\n"
    "                        beyond: whether it depends on what runs beside it\n"
    "options:\n"
    "  --db PATH             database (default " STORE_DEFAULT_PATH ")\n"
    "  --format table|csv|json   output (default table)\n"
    "  -o, --output FILE     write there instead of stdout\n"
    "  -h, --help            this text\n"
    "\n"
    "exit status: 0 ok (also when nothing pairs: the table says so), 1 bad input, 2 bad usage\n";

#define BYTES_PER_MIB (1024.0 * 1024.0)
#define MS_PER_S 1e3
#define ERR_WIDTH 9 /* the columns of an error in percent (pct) */

typedef struct opts {
    store_filter f;
    const char *db, *format, *output;
    int loose, actions, repeats, overlap, tail, distance;
} opts;

enum { O_DB = 1000, O_LOOSE, O_ACTIONS, O_FORMAT, O_REPEATS, O_OVERLAP, O_TAIL, O_DISTANCE };

static const struct option long_opts[] = {
    {"db", required_argument, 0, O_DB},
    CLI_FILTER_LONG_OPTS,
    {"loose", no_argument, 0, O_LOOSE},
    {"actions", no_argument, 0, O_ACTIONS},
    {"repeats", no_argument, 0, O_REPEATS},
    {"overlap", no_argument, 0, O_OVERLAP},
    {"tail", no_argument, 0, O_TAIL},
    {"distance", no_argument, 0, O_DISTANCE},
    {"format", required_argument, 0, O_FORMAT},
    {"output", required_argument, 0, 'o'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* Parses the flags; returns -1 to continue or an exit code to return at once. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->format = "table";
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", long_opts, NULL)) != -1) {
        int frc = cli_filter_opt("compare", c, optarg, &o->f);
        if (frc == CLI_EUSAGE) return frc;
        if (frc == CLI_OK) continue;
        switch (c) {
        case O_DB: o->db = optarg; break;
        case O_LOOSE: o->loose = 1; break;
        case O_ACTIONS: o->actions = 1; break;
        case O_REPEATS: o->repeats = 1; break;
        case O_OVERLAP: o->overlap = 1; break;
        case O_TAIL: o->tail = 1; break;
        case O_DISTANCE: o->distance = 1; break;
        case O_FORMAT: o->format = optarg; break;
        case 'o': o->output = optarg; break;
        case 'h': fputs(help_text, stdout); return CLI_OK;
        case ':': return cli_usage_error("compare", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("compare", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("compare", "unexpected argument '%s'", argv[optind]);
    const cli_output outs[] = {{"-o", o->output}};
    int rc = cli_db_flags("compare", o->db, 0, outs, sizeof outs / sizeof outs[0]);
    if (rc >= 0) return rc;
    if (strcmp(o->format, "table") && strcmp(o->format, "csv") && strcmp(o->format, "json"))
        return cli_usage_error("compare", "--format must be table, csv or json (got '%s')", o->format);
    if (o->actions && strcmp(o->format, "table"))
        return cli_usage_error("compare", "--actions prints a table (drop --format %s)", o->format);
    if (o->overlap && strcmp(o->format, "table"))
        return cli_usage_error("compare", "--overlap prints a table (drop --format %s)", o->format);
    if (o->tail && strcmp(o->format, "table"))
        return cli_usage_error("compare", "--tail prints a table (drop --format %s)", o->format);
    if (o->distance && strcmp(o->format, "table"))
        return cli_usage_error("compare", "--distance prints a table (drop --format %s)", o->format);
    if (o->repeats && !strcmp(o->format, "json"))
        return cli_usage_error("compare", "--repeats prints a table or CSV (drop --format json)");
    if (o->repeats && o->actions && !strcmp(o->format, "csv"))
        return cli_usage_error("compare", "--repeats --format csv prints the configurations alone (drop --actions)");
    return -1;
}

/* Appends a signed percentage, or "-" when undefined. */
static void pct(pl_buf *b, int width, double err) {
    if (isnan(err)) pl_buf_printf(b, "%*s", width, "-");
    else pl_buf_printf(b, "%+*.2f%%", width - 1, 100 * err);
}

/* Appends a number for CSV/JSON: %.9g, or the empty cell / null when undefined. */
static void num(pl_buf *b, double v, int json) {
    if (isnan(v) || isinf(v)) pl_buf_puts(b, json ? "null" : "");
    else pl_buf_printf(b, "%.9g", v);
}

/* The human table: one line per pair, then the summary. */
static void out_table(const store_comparison *c, pl_buf *b) {
    pl_buf_printf(b, "%-12s %3s %4s %2s %6s %6s  %11s %11s %9s  %11s %11s %9s  %7s %7s %9s  %9s %9s %9s\n", "SCHEDULE",
                  "P", "M", "V", "SIM", "MEAS", "ITER PRED", "ITER MEAS", "ERR", "SAMPLES/s P", "SAMPLES/s M", "ERR",
                  "BUBBLE P", "BUBBLE M", "ERR", "MEM P", "MEM M", "ERR");
    for (size_t i = 0; i < c->n; i++) {
        const store_pair *p = &c->pairs[i];
        pl_buf_printf(b, "%-12s %3d %4d %2d %6lld %6lld  %11.5g %11.5g ", p->meas.schedule, p->meas.ranks,
                      p->meas.microbatches, p->meas.chunks, (long long)p->sim.id, (long long)p->meas.id,
                      p->sim.iteration_time_s, p->meas.iteration_time_s);
        pct(b, ERR_WIDTH, p->err_iter);
        pl_buf_printf(b, "  %11.5g %11.5g ", p->sim.throughput_samples_s, p->meas.throughput_samples_s);
        pct(b, ERR_WIDTH, p->err_thr);
        const double bf[2] = {p->sim.bubble_fraction, p->meas.bubble_fraction};
        pl_buf_puts(b, " ");
        for (int k = 0; k < 2; k++) /* a file that holds none: "-", as its error */
            if (isnan(bf[k])) pl_buf_printf(b, " %7s", "-");
            else pl_buf_printf(b, " %6.2f%%", 100 * bf[k]);
        pl_buf_putc(b, ' ');
        if (isnan(p->err_bubble_fraction)) pl_buf_printf(b, "%9s", "-");
        else pl_buf_printf(b, "%+6.2f pp", 100 * p->err_bubble_fraction);
        pl_buf_printf(b, "  %8.4gM %8.4gM ", p->sim.peak_mem_bytes / BYTES_PER_MIB, p->meas.peak_mem_bytes / BYTES_PER_MIB);
        pct(b, ERR_WIDTH, p->err_mem);
        pl_buf_putc(b, '\n');
    }
    if (c->n == 0) pl_buf_puts(b, "(no measured run has a simulated run of the same configuration)\n");
    pl_buf_printf(b, "\n%zu pair%s; %zu measured run%s without a prediction; %zu simulated run%s considered\n", c->n,
                  c->n == 1 ? "" : "s", c->unmatched_measured, c->unmatched_measured == 1 ? "" : "s", c->simulated,
                  c->simulated == 1 ? "" : "s");
    /* points: the bubble's mean and largest difference, in percentage points */
    const struct { const char *name; const store_err_stats *st; int points; } rows[] = {
        {"iteration time", &c->iter, 0}, {"throughput", &c->thr, 0}, {"bubble fraction", &c->bubble_fraction, 1},
        {"peak memory", &c->mem, 0}};
    pl_buf_printf(b, "%-16s %9s %10s %6s\n", "METRIC", "MAPE", "MAX ERROR", "PAIRS");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        pl_buf_printf(b, "%-16s ", rows[k].name);
        int pp = rows[k].points;
        if (rows[k].st->n)
            pl_buf_printf(b, "%*.2f%s %+*.2f%s %6d\n", pp ? 6 : 8, 100 * rows[k].st->mape, pp ? " pp" : "%", pp ? 7 : 9,
                          100 * rows[k].st->max_err, pp ? " pp" : "%", rows[k].st->n);
        else pl_buf_printf(b, "%9s %10s %6d\n", "-", "-", 0);
    }
    pl_buf_puts(b, "(bubble fraction: difference predicted - measured in percentage points, pp; its MAPE\n"
                   " column is the mean absolute difference)\n");
}

/* CSV: one line per pair (errors as fractions). */
static void out_csv(const store_comparison *c, pl_buf *b) {
    pl_buf_puts(b, "schedule,ranks,stages,microbatches,chunks,sim_id,measured_id,sim_uid,measured_uid,"
                   "iteration_time_pred_s,iteration_time_meas_s,iteration_time_err,throughput_pred,throughput_meas,"
                   "throughput_err,bubble_fraction_pred,bubble_fraction_meas,bubble_fraction_err,peak_mem_pred_bytes,peak_mem_meas_bytes,peak_mem_err\n");
    for (size_t i = 0; i < c->n; i++) {
        const store_pair *p = &c->pairs[i];
        pl_buf_csv_field(b, p->meas.schedule);
        pl_buf_printf(b, ",%d,%d,%d,%d,%lld,%lld,", p->meas.ranks, p->meas.stages, p->meas.microbatches, p->meas.chunks,
                      (long long)p->sim.id, (long long)p->meas.id);
        pl_buf_csv_field(b, p->sim.uid); /* a uid holds the tag, which may hold a comma */
        pl_buf_putc(b, ',');
        pl_buf_csv_field(b, p->meas.uid);
        pl_buf_putc(b, ',');
        const double v[] = {p->sim.iteration_time_s, p->meas.iteration_time_s, p->err_iter, p->sim.throughput_samples_s,
                            p->meas.throughput_samples_s, p->err_thr, p->sim.bubble_fraction, p->meas.bubble_fraction, p->err_bubble_fraction,
                            (double)p->sim.peak_mem_bytes, (double)p->meas.peak_mem_bytes, p->err_mem};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            if (k) pl_buf_putc(b, ',');
            num(b, v[k], 0);
        }
        pl_buf_putc(b, '\n');
    }
}

/* Appends {"mape": .., "max_err": .., "pairs": n}. */
static void json_stats(pl_buf *b, const char *name, const store_err_stats *st) {
    pl_buf_printf(b, "\"%s\": {\"mape\": ", name);
    num(b, st->mape, 1);
    pl_buf_puts(b, ", \"max_err\": ");
    num(b, st->max_err, 1);
    pl_buf_printf(b, ", \"pairs\": %d}", st->n);
}

/* JSON: {"pairs": [...], "summary": {...}} with errors as fractions. */
static void out_json(const store_comparison *c, pl_buf *b) {
    pl_buf_puts(b, "{\"pairs\": [");
    for (size_t i = 0; i < c->n; i++) {
        const store_pair *p = &c->pairs[i];
        pl_buf_printf(b, "%s\n  {\"schedule\": ", i ? "," : "");
        pl_buf_json_string(b, p->meas.schedule);
        pl_buf_printf(b, ", \"ranks\": %d, \"stages\": %d, \"microbatches\": %d, \"chunks\": %d, \"sim_id\": %lld, "
                         "\"measured_id\": %lld, \"sim_uid\": ",
                      p->meas.ranks, p->meas.stages, p->meas.microbatches, p->meas.chunks, (long long)p->sim.id,
                      (long long)p->meas.id);
        pl_buf_json_string(b, p->sim.uid);
        pl_buf_puts(b, ", \"measured_uid\": ");
        pl_buf_json_string(b, p->meas.uid);
        const char *names[] = {"iteration_time_pred_s", "iteration_time_meas_s", "iteration_time_err", "throughput_pred",
                               "throughput_meas", "throughput_err", "bubble_fraction_pred", "bubble_fraction_meas", "bubble_fraction_err",
                               "peak_mem_pred_bytes", "peak_mem_meas_bytes", "peak_mem_err"};
        const double v[] = {p->sim.iteration_time_s, p->meas.iteration_time_s, p->err_iter, p->sim.throughput_samples_s,
                            p->meas.throughput_samples_s, p->err_thr, p->sim.bubble_fraction, p->meas.bubble_fraction, p->err_bubble_fraction,
                            (double)p->sim.peak_mem_bytes, (double)p->meas.peak_mem_bytes, p->err_mem};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            pl_buf_printf(b, ", \"%s\": ", names[k]);
            num(b, v[k], 1);
        }
        pl_buf_puts(b, "}");
    }
    pl_buf_printf(b, "%s],\n \"summary\": {\"pairs\": %zu, \"unmatched_measured\": %zu, \"simulated\": %zu, ",
                  c->n ? "\n" : "", c->n, c->unmatched_measured, c->simulated);
    json_stats(b, "iteration_time", &c->iter);
    pl_buf_puts(b, ", ");
    json_stats(b, "throughput", &c->thr);
    pl_buf_puts(b, ", ");
    json_stats(b, "bubble_fraction", &c->bubble_fraction); /* its errors: differences of fractions */
    pl_buf_puts(b, ", ");
    json_stats(b, "peak_mem", &c->mem);
    pl_buf_puts(b, "}}\n");
}

/* ---------------------------------------------------------------- repeated configurations */

/* Appends the model spec of run r (its parameters' model.spec, unquoted), or "-". */
static void model_spec(pl_buf *b, const store_run *r, int csv) {
    const char *v;
    size_t n;
    if (r->params_json && store_json_get(r->params_json, "model.spec", &v, &n) && n >= 2 && v[0] == '"') {
        pl_buf_printf(b, csv ? "\"%.*s\"" : "%.*s", (int)(n - 2), v + 1); /* a spec has commas, no quotes */
    } else pl_buf_puts(b, csv ? "" : "-");
}

/* The kinds' leans of --repeats (store_kind_lean), where a kind has two configurations or more. */
static void out_kind_leans(const store_comparison *c, const store_repeats *r, pl_buf *b) {
    size_t tested = 0;
    for (size_t k = 0; k < r->n_kinds; k++) tested += !isnan(r->kinds[k].t_crit);
    if (!tested) return;
    pl_buf_puts(b, "\neach schedule kind's lean: the mean of its configurations' mean errors, in standard errors of\n"
                   "their spread\n");
    pl_buf_printf(b, "%-12s %7s %9s %9s %7s\n", "SCHEDULE", "CONFIGS", "MEAN ERR", "SE", "T");
    for (size_t k = 0; k < r->n_kinds; k++) {
        const store_kind_lean *K = &r->kinds[k];
        pl_buf_printf(b, "%-12s %7d ", c->pairs[K->first].meas.schedule, K->configs);
        pct(b, ERR_WIDTH, K->mean);
        if (isnan(K->se)) pl_buf_printf(b, " %9s", "-");
        else pl_buf_printf(b, " %6.2f pt", 100 * K->se);
        if (isnan(K->t)) pl_buf_printf(b, " %7s\n", "-");
        else pl_buf_printf(b, " %+6.1f%c\n", K->t, K->beyond ? '*' : ' ');
    }
    pl_buf_printf(b, "*: beyond Student's t, %.0f%%, with CONFIGS - 1 degrees of freedom: %d of %zu kinds; an\n"
                     "unbiased prediction puts about %.1f there by chance\n",
                  100 * (1 - STORE_REPEATS_ALPHA), r->kinds_beyond, tested, STORE_REPEATS_ALPHA * (double)tested);
}

/* The table of --repeats: one line per configuration, then what the spread says. */
static void out_repeats_table(const store_comparison *c, const store_repeats *r, pl_buf *b) {
    pl_buf_puts(b, "\nthe same configurations measured again: signed iteration-time error per configuration\n");
    pl_buf_printf(b, "%-12s %3s %4s %2s %-9s %4s %9s %7s %7s %9s %9s  %s\n", "SCHEDULE", "P", "M", "V", "RECOMPUTE",
                  "RUNS", "MEAN ERR", "SD", "T", "LEAST", "LARGEST", "MODEL");
    for (size_t g = 0; g < r->n; g++) {
        const store_repeat_group *G = &r->groups[g];
        const store_run *m = &c->pairs[G->first].meas;
        pl_buf_printf(b, "%-12s %3d %4d %2d %-9s %4d ", m->schedule, m->ranks, m->microbatches, m->chunks,
                      m->recompute_policy ? m->recompute_policy : "-", G->n);
        pct(b, ERR_WIDTH, G->mean);
        if (isnan(G->sd)) pl_buf_printf(b, " %7s ", "-");
        else pl_buf_printf(b, " %4.2f pt ", 100 * G->sd);
        if (isnan(G->t)) pl_buf_printf(b, "%7s ", "-");
        else pl_buf_printf(b, "%+6.1f%c ", G->t, G->biased ? '*' : ' ');
        pct(b, ERR_WIDTH, G->min);
        pl_buf_putc(b, ' ');
        pct(b, ERR_WIDTH, G->max);
        pl_buf_puts(b, "  ");
        model_spec(b, m, 0);
        pl_buf_putc(b, '\n');
    }
    pl_buf_printf(b, "%zu configuration%s, %d measured twice or more\n", r->n, r->n == 1 ? "" : "s", r->repeated);
    if (isnan(r->pooled_sd)) pl_buf_puts(b, "run-to-run standard deviation of the error: - (no configuration measured twice)\n");
    else pl_buf_printf(b, "run-to-run standard deviation of the error, pooled: %.2f points\n", 100 * r->pooled_sd);
    if (!isnan(r->meas_sd)) {
        pl_buf_printf(b, "the runs themselves, pooled the same way: measured %.2f%% apart, predicted %.2f%% (the\n"
                         "standard deviation of the log iteration time), correlation ",
                      100 * r->meas_sd, 100 * r->pred_sd);
        if (isnan(r->track_corr)) pl_buf_puts(b, "-");
        else pl_buf_printf(b, "%.2f", r->track_corr);
        pl_buf_puts(b, ": how closely each run's\nprediction follows its host's state from one run to the next\n");
    }
    if (r->n && !isnan(r->mape_of_means)) {
        pl_buf_printf(b, "the configurations' mean errors: MAPE %.2f%%, signed mean %+.2f%%", 100 * r->mape_of_means,
                      100 * r->signed_mean_of_means);
        if (!isnan(r->signed_mean_se)) pl_buf_printf(b, " (standard error %.2f points)", 100 * r->signed_mean_se);
        pl_buf_printf(b, ", largest %+.2f%%\n", 100 * r->largest_mean);
    }
    if (!isnan(r->largest_median))
        pl_buf_printf(b, "largest |error| of one run of each configuration from that spread alone (an unbiased\n"
                         "prediction, normal errors): %.2f%% at the median\n",
                      100 * r->largest_median);
    if (!isnan(r->t_crit))
        pl_buf_printf(b, "T: a configuration's mean error in standard errors of the pooled spread; beyond %.2f\n"
                         "(*: Student's t, %.0f%%, %d degrees of freedom): %d of %zu configurations, %d of them predicted\n"
                         "short; an unbiased prediction puts about %.1f there by chance\n",
                      r->t_crit, 100 * (1 - STORE_REPEATS_ALPHA), r->dof, r->biased, r->n, r->biased_short,
                      STORE_REPEATS_ALPHA * (double)r->n);
    out_kind_leans(c, r, b);
}

/* CSV of --repeats: one line per configuration (errors as fractions). */
static void out_repeats_csv(const store_comparison *c, const store_repeats *r, pl_buf *b) {
    pl_buf_puts(b, "schedule,ranks,stages,microbatches,chunks,recompute,model,runs,iteration_time_err_mean,"
                   "iteration_time_err_sd,iteration_time_err_min,iteration_time_err_max,iteration_time_err_t,biased\n");
    for (size_t g = 0; g < r->n; g++) {
        const store_repeat_group *G = &r->groups[g];
        const store_run *m = &c->pairs[G->first].meas;
        pl_buf_printf(b, "%s,%d,%d,%d,%d,%s,", m->schedule, m->ranks, m->stages, m->microbatches, m->chunks,
                      m->recompute_policy ? m->recompute_policy : "");
        model_spec(b, m, 1);
        pl_buf_printf(b, ",%d", G->n);
        const double v[] = {G->mean, G->sd, G->min, G->max, G->t};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            pl_buf_putc(b, ',');
            num(b, v[k], 0);
        }
        pl_buf_printf(b, ",%d\n", G->biased);
    }
}

/* ---------------------------------------------------------------- action breakdown */

/* The classes of the breakdown: compute kinds (OVERLAP: a forward overlapped with a backward in
 * one action, dualpipev's), then communication and waiting, and the gradient all-reduce
 * (REDUCE_GRAD: a collective of a replicated stage's replicas). */
enum { AC_F, AC_B, AC_I, AC_W, AC_OVERLAP, AC_STEP, AC_COMM, AC_REDUCE, AC_N };
static const char *const ac_name[AC_N] = {"F", "B", "I", "W", "OVERLAP", "STEP", "SEND/RECV", "REDUCE_GRAD"};

/* Returns the class of an op kind name (the other non-compute kinds count as communication). */
static int ac_of(const char *kind) {
    if (kind && strcmp(kind, sched_kind_name(SCHED_OVERLAP)) == 0) return AC_OVERLAP;
    for (int i = 0; i <= AC_STEP; i++)
        if (kind && strcmp(kind, ac_name[i]) == 0) return i;
    return kind && strcmp(kind, ac_name[AC_REDUCE]) == 0 ? AC_REDUCE : AC_COMM;
}

/* Orders doubles ascending for qsort. */
static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rows of the breakdown beside the classes: all compute, and the rank's span. */
enum { AC_COMPUTE = AC_N, AC_SPAN, AC_ROWS };

/* Each row's errors over the ranks of all pairs (where the measured time is > 0): their count,
 * sum, sum of absolute values and the largest in absolute value. */
typedef struct ac_errs {
    int n[AC_ROWS];
    double sum[AC_ROWS], abs[AC_ROWS], max[AC_ROWS];
} ac_errs;

/* Adds the error of row c (pred against meas) to acc. */
static void ac_note(ac_errs *acc, int c, double pred, double meas) {
    if (!(meas > 0)) return;
    double err = (pred - meas) / meas;
    acc->n[c]++;
    acc->sum[c] += err;
    acc->abs[c] += fabs(err);
    if (fabs(err) > fabs(acc->max[c])) acc->max[c] = err;
}

/* Returns the SEND/RECV row of a rank from its span, compute and all-reduce rows (the measured
 * ones the medians over the passes): the rank's communication and waiting, on both timelines
 * alike (the simulator's RECV lasts until the data is there; the executor's returns at once and
 * its compute waits for the data, time that no op row holds). */
static double ac_comm_wait(double span, double compute, double reduce) {
    double w = span - compute - reduce;
    return w > 0 ? w : 0;
}

/* Appends rank r's rows of a pair's breakdown to b (a class neither timeline has is left out)
 * and notes their errors in acc. */
static void rank_rows(pl_buf *b, int r, const double *pred, const double *meas, ac_errs *acc) {
    for (int c = 0; c < AC_ROWS; c++) {
        if (c < AC_N && pred[c] == 0 && meas[c] == 0) continue;
        pl_buf_printf(b, "%4d  %-10s %10.4f %10.4f ", r, c < AC_N ? ac_name[c] : c == AC_COMPUTE ? "compute" : "span",
                      MS_PER_S * pred[c], MS_PER_S * meas[c]);
        /* a REDUCE_GRAD the prediction prices at 0 (a stage without replicas: the executor's
         * no-op) has no relative error: "-", its measured bookkeeping in DIFF alone */
        int noop = c == AC_REDUCE && pred[c] == 0;
        pct(b, ERR_WIDTH, meas[c] > 0 && !noop ? (pred[c] - meas[c]) / meas[c] : NAN);
        pl_buf_printf(b, " %+10.4f\n", MS_PER_S * (pred[c] - meas[c])); /* the absolute error, ms */
        /* a class the prediction prices at 0 (the REDUCE_GRAD of a stage without replicas, a
         * no-op) has no relative error to average: left out of the summary */
        if (pred[c] > 0) ac_note(acc, c, pred[c], meas[c]);
    }
}

/* Appends the breakdown of one pair to b: per rank, each class's time per pass predicted (the
 * simulated timeline, one pass) against measured (median over the timed passes), all compute
 * together, and the rank's span (its first action's start to its last compute end). Sets
 * comp[0], comp[1] to the largest compute per pass of a rank, predicted and measured. Returns
 * 0, or -1 (nothing written) when a run lacks its timeline or the two do not line up. */
static int pair_actions(store *db, const store_pair *p, pl_buf *b, double comp[2], ac_errs *acc, pl_err *e) {
    store_op *so = NULL, *mo = NULL;
    size_t ns = 0, nm = 0;
    int ok = -1;
    double *v = NULL;
    comp[0] = comp[1] = 0;
    if (store_get_ops(db, p->sim.id, &so, &ns, e) != PL_OK || store_get_ops(db, p->meas.id, &mo, &nm, e) != PL_OK) goto out;
    int T = p->meas.repetitions > 0 ? p->meas.repetitions : 1, R = p->meas.ranks;
    if (ns == 0 || nm != (size_t)T * ns || R < 1) goto out;
    v = pl_calloc((size_t)T * AC_ROWS, sizeof *v);
    if (!v) goto out;
    pl_buf_printf(b, "\n%s P=%d M=%d V=%d (simulated run %lld, measured run %lld): time per pass, ms\n", p->meas.schedule,
                  p->meas.ranks, p->meas.microbatches, p->meas.chunks, (long long)p->sim.id, (long long)p->meas.id);
    pl_buf_printf(b, "%4s  %-10s %10s %10s %9s %10s\n", "RANK", "ACTIONS", "PREDICTED", "MEASURED", "ERR", "DIFF");
    size_t s0 = 0, m0 = 0;
    for (int r = 0; r < R; r++) {
        size_t n = 0;
        while (s0 + n < ns && so[s0 + n].rank == r) n++;
        if (n == 0 || m0 + (size_t)T * n > nm) goto out;
        double pred[AC_ROWS] = {0}, meas[AC_ROWS];
        double end = so[s0].start_s;
        for (size_t i = 0; i < n; i++) {
            const store_op *o = &so[s0 + i];
            int c = ac_of(o->kind);
            pred[c] += o->end_s - o->start_s;
            if (c != AC_COMM && c != AC_REDUCE) {
                pred[AC_COMPUTE] += o->end_s - o->start_s;
                if (o->end_s > end) end = o->end_s;
            }
        }
        pred[AC_SPAN] = end - so[s0].start_s;
        pred[AC_COMM] = ac_comm_wait(pred[AC_SPAN], pred[AC_COMPUTE], pred[AC_REDUCE]);
        for (int t = 0; t < T; t++) {
            /* pass t of rank r: its n actions, in order */
            const store_op *o = &mo[m0 + (size_t)t * n];
            end = o[0].start_s;
            for (size_t i = 0; i < n; i++) {
                if (o[i].rank != r || o[i].seq != (int)((size_t)t * n + i)) goto out;
                int c = ac_of(o[i].kind);
                v[(size_t)c * T + t] += o[i].end_s - o[i].start_s;
                if (c != AC_COMM && c != AC_REDUCE) {
                    v[(size_t)AC_COMPUTE * T + t] += o[i].end_s - o[i].start_s;
                    if (o[i].end_s > end) end = o[i].end_s;
                }
            }
            v[(size_t)AC_SPAN * T + t] = end - o[0].start_s;
        }
        for (int c = 0; c < AC_ROWS; c++) {
            qsort(v + (size_t)c * T, (size_t)T, sizeof *v, cmp_dbl);
            const double *x = v + (size_t)c * T;
            meas[c] = T % 2 ? x[T / 2] : 0.5 * (x[T / 2 - 1] + x[T / 2]);
        }
        meas[AC_COMM] = ac_comm_wait(meas[AC_SPAN], meas[AC_COMPUTE], meas[AC_REDUCE]);
        rank_rows(b, r, pred, meas, acc);
        memset(v, 0, (size_t)T * AC_ROWS * sizeof *v);
        if (pred[AC_COMPUTE] > comp[0]) comp[0] = pred[AC_COMPUTE];
        if (meas[AC_COMPUTE] > comp[1]) comp[1] = meas[AC_COMPUTE];
        s0 += n;
        m0 += (size_t)T * n;
    }
    ok = 0;
out:
    free(v);
    store_ops_free(so, ns);
    store_ops_free(mo, nm);
    return ok;
}

/* Adds the errors of from to into. */
static void ac_merge(ac_errs *into, const ac_errs *from) {
    for (int c = 0; c < AC_ROWS; c++) {
        into->n[c] += from->n[c];
        into->sum[c] += from->sum[c];
        into->abs[c] += from->abs[c];
        if (fabs(from->max[c]) > fabs(into->max[c])) into->max[c] = from->max[c];
    }
}

/* The pairs of one model and recompute policy (the measured runs' model.spec and policy) and
 * their errors per class. */
typedef struct ac_model {
    const store_run *meas; /* the first pair's measured run: its spec and policy */
    int pairs;
    ac_errs acc;
} ac_model;

/* Returns 1 when runs a and b have the same model spec and recompute policy. */
static int same_model(const store_run *a, const store_run *b) {
    const char *va = NULL, *vb = NULL;
    size_t na = 0, nb = 0;
    int ha = a->params_json && store_json_get(a->params_json, "model.spec", &va, &na);
    int hb = b->params_json && store_json_get(b->params_json, "model.spec", &vb, &nb);
    const char *ra = a->recompute_policy ? a->recompute_policy : "", *rb = b->recompute_policy ? b->recompute_policy : "";
    return ha == hb && na == nb && (!ha || memcmp(va, vb, na) == 0) && strcmp(ra, rb) == 0;
}

/* Adds one pair's errors to its model's group in models[0 .. *n) (a new group when none has its
 * model; models has room for every pair). */
static void ac_model_note(ac_model *models, size_t *n, const store_run *meas, const ac_errs *one) {
    size_t g = 0;
    while (g < *n && !same_model(models[g].meas, meas)) g++;
    if (g == *n) {
        memset(&models[g], 0, sizeof models[g]);
        models[g].meas = meas;
        (*n)++;
    }
    models[g].pairs++;
    ac_merge(&models[g].acc, one);
}

/* The compute classes of the per-model table, in its column order. */
static const int ac_model_cols[] = {AC_F, AC_B, AC_I, AC_W, AC_STEP, AC_COMPUTE};
#define AC_MODEL_COLS ((int)(sizeof ac_model_cols / sizeof ac_model_cols[0]))

/* The signed mean compute error of a model's pairs (NaN without any). */
static double ac_model_compute(const ac_model *m) {
    return m->acc.n[AC_COMPUTE] ? m->acc.sum[AC_COMPUTE] / m->acc.n[AC_COMPUTE] : NAN;
}

/* qsort order of ac_model: the most under-predicted compute first, models without one last. */
static int cmp_model_compute(const void *pa, const void *pb) {
    double a = ac_model_compute(pa), b = ac_model_compute(pb);
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

/* Appends, per model and recompute policy, each compute class's signed mean error over its
 * pairs' ranks with its MAPE in brackets ("-" where no rank has the class), the most
 * under-predicted compute first (models sorted in place): where a class's error follows the
 * block's shape (wide blocks on few rows, say) rather than the schedule. */
static void out_model_errors(ac_model *models, size_t n, pl_buf *b) {
    qsort(models, n, sizeof *models, cmp_model_compute);
    pl_buf_puts(b, "\nper model and recompute policy: each class's signed mean error over the ranks of its pairs "
                   "(MAPE in brackets), the most under-predicted compute first\n");
    pl_buf_printf(b, "%-9s %5s", "RECOMPUTE", "PAIRS");
    for (int k = 0; k < AC_MODEL_COLS; k++) {
        int c = ac_model_cols[k];
        pl_buf_printf(b, " %15s", c < AC_N ? ac_name[c] : "compute");
    }
    pl_buf_puts(b, "  MODEL\n");
    for (size_t g = 0; g < n; g++) {
        const ac_model *m = &models[g];
        pl_buf_printf(b, "%-9s %5d", m->meas->recompute_policy ? m->meas->recompute_policy : "-", m->pairs);
        for (int k = 0; k < AC_MODEL_COLS; k++) {
            int c = ac_model_cols[k];
            if (m->acc.n[c] == 0) pl_buf_printf(b, " %15s", "-");
            else pl_buf_printf(b, " %+6.2f%% (%4.2f%%)", 100 * m->acc.sum[c] / m->acc.n[c], 100 * m->acc.abs[c] / m->acc.n[c]);
        }
        pl_buf_puts(b, "  ");
        model_spec(b, m->meas, 0);
        pl_buf_putc(b, '\n');
    }
}

/* Appends the errors of each class over the ranks of all pairs: MAPE, signed mean, largest. */
static void out_class_errors(const ac_errs *acc, pl_buf *b) {
    pl_buf_printf(b, "\nper class over all pairs and ranks (time per pass, predicted against measured)\n%-10s %7s %9s %9s %9s\n",
                  "CLASS", "RANKS", "MAPE", "MEAN ERR", "LARGEST");
    for (int c = 0; c < AC_ROWS; c++) {
        if (c == AC_SPAN || acc->n[c] == 0) continue;
        pl_buf_printf(b, "%-10s %7d %8.2f%% ", c < AC_N ? ac_name[c] : "compute", acc->n[c], 100 * acc->abs[c] / acc->n[c]);
        pct(b, ERR_WIDTH, acc->sum[c] / acc->n[c]);
        pct(b, ERR_WIDTH + 1, acc->max[c]);
        pl_buf_putc(b, '\n');
    }
}

/* Appends the action breakdown of every pair that has both timelines, then a summary: for each
 * pair the error of the busiest rank's compute per pass beside the iteration time's error, and
 * their MAPEs: where the compute error is as large as the iteration's, the per-action times are
 * what the prediction gets wrong; where it is small, the schedule (waiting, communication). */
static void out_actions(store *db, const store_comparison *c, pl_buf *b) {
    size_t done = 0;
    double sum_c = 0, sum_i = 0;
    pl_buf sum;
    pl_buf_init(&sum);
    ac_errs acc;
    memset(&acc, 0, sizeof acc);
    size_t nmodels = 0;
    ac_model *models = pl_calloc(c->n ? c->n : 1, sizeof *models);
    pl_buf_puts(b, "\nper action class (compute: all compute actions; span: the rank's first action to its last compute end;\n"
                   "SEND/RECV: the span's time outside compute and all-reduces, communication and waiting)\n");
    pl_buf_printf(&sum, "\n%-12s %3s %4s %2s %7s  %10s %10s %9s  %9s\n", "SCHEDULE", "P", "M", "V", "MEAS", "COMPUTE P",
                  "COMPUTE M", "ERR", "ITER ERR");
    for (size_t i = 0; i < c->n; i++) {
        const store_pair *p = &c->pairs[i];
        pl_err e;
        pl_err_clear(&e);
        pl_buf one;
        pl_buf_init(&one);
        double comp[2];
        ac_errs one_acc;
        memset(&one_acc, 0, sizeof one_acc);
        if (pair_actions(db, p, &one, comp, &one_acc, &e) == 0 && comp[1] > 0) {
            pl_buf_puts(b, one.data ? one.data : "");
            ac_merge(&acc, &one_acc);
            if (models) ac_model_note(models, &nmodels, &p->meas, &one_acc);
            double ec = (comp[0] - comp[1]) / comp[1];
            pl_buf_printf(&sum, "%-12s %3d %4d %2d %7lld  %10.4f %10.4f ", p->meas.schedule, p->meas.ranks,
                          p->meas.microbatches, p->meas.chunks, (long long)p->meas.id, MS_PER_S * comp[0], MS_PER_S * comp[1]);
            pct(&sum, ERR_WIDTH, ec);
            pl_buf_puts(&sum, "  ");
            pct(&sum, ERR_WIDTH, p->err_iter);
            pl_buf_putc(&sum, '\n');
            sum_c += fabs(ec);
            sum_i += isnan(p->err_iter) ? 0 : fabs(p->err_iter);
            done++;
        }
        pl_buf_free(&one);
    }
    if (done) {
        pl_buf_printf(b, "\nthe busiest rank's compute per pass (ms) against the iteration time\n%s", sum.data ? sum.data + 1 : "");
        pl_buf_printf(b, "MAPE: compute %.2f%%, iteration time %.2f%% (%zu pair%s)\n", 100 * sum_c / (double)done,
                      100 * sum_i / (double)done, done, done == 1 ? "" : "s");
    }
    if (done) out_class_errors(&acc, b);
    if (done && models) out_model_errors(models, nmodels, b);
    free(models);
    if (done < c->n)
        pl_buf_printf(b, "\n%zu pair%s without both timelines (run with --trace)\n", c->n - done, c->n - done == 1 ? "" : "s");
    pl_buf_free(&sum);
}

/* Entry point of `pipelab compare`; returns an exit code. */
int cli_compare(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    pl_err e;
    pl_err_clear(&e);
    store *s = NULL;
    if (store_open(o.db, 1, &s, &e) != PL_OK) return cli_fail(&e);
    store_comparison c;
    if (store_compare(s, &o.f, o.loose, &c, &e) != PL_OK) {
        store_close(s);
        return cli_fail(&e);
    }
    store_repeats rep;
    memset(&rep, 0, sizeof rep);
    if (o.repeats && store_compare_repeats(&c, o.loose, &rep, &e) != PL_OK) {
        store_comparison_free(&c);
        store_close(s);
        return cli_fail(&e);
    }
    pl_buf b;
    pl_buf_init(&b);
    if (!strcmp(o.format, "csv")) {
        if (o.repeats) out_repeats_csv(&c, &rep, &b);
        else out_csv(&c, &b);
    } else if (!strcmp(o.format, "json")) out_json(&c, &b);
    else {
        out_table(&c, &b);
        if (o.repeats) out_repeats_table(&c, &rep, &b);
    }
    if (o.actions) out_actions(s, &c, &b);
    if (o.overlap) cli_compare_overlap(s, &c, &b);
    if (o.tail) cli_compare_tail(s, &c, &b);
    if (o.distance) cli_compare_distance(s, &c, &b);
    store_repeats_free(&rep);
    store_close(s);
    store_comparison_free(&c);
    rc = cli_write_output(o.output, &b);
    pl_buf_free(&b);
    return rc;
}

#else

/* Returns CLI_EUSER: this build has no results store. */
int cli_compare(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipelab compare: this build has no results store (SQLite)\n");
    return CLI_EUSER;
}
#endif
