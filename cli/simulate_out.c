/* simulate_out.c: the outputs of `pipelab simulate` (simulate_int.h): the metric tables, the
 * human table, CSV and JSON, and the rows of the stored run. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate_int.h"

/* ---------------------------------------------------------------- the metric table
 * Every metric simulate writes, once: the table, the CSV, the JSON and the stored run read
 * their names, values and order from run_metrics and rank_metrics. A new metric is one entry. */


/* The struct a run metric's value lives in: the schedule, the median run's result (the one run
 * without --repeat; sim_repeat), or the statistics over the --repeat runs. */
typedef enum { FROM_SCHED, FROM_RESULT, FROM_STATS } metric_from;
/* How a value is held: a name (a char array), an int, a size_t, an int64_t, a double, or an int
 * flag (0 or 1). */
typedef enum { MT_NAME, MT_INT, MT_SIZE, MT_I64, MT_REAL, MT_FLAG } metric_type;
/* The metric_type of member f of struct T, from its C type, so that a table entry cannot
 * disagree with the struct (a type without a metric_type does not compile); FLAG_OF asks for an
 * int and makes it a flag. */
#define TYPE_OF(T, f) _Generic(((T *)0)->f, char *: MT_NAME, int: MT_INT, size_t: MT_SIZE, int64_t: MT_I64, double: MT_REAL)
#define FLAG_OF(T, f) _Generic(((T *)0)->f, int: MT_FLAG)
/* The outputs a metric appears in. */
enum { IN_TABLE = 1, IN_CSV = 2, IN_JSON = 4, IN_ALL = IN_TABLE | IN_CSV | IN_JSON };

/* Significant digits of every real in CSV and JSON and in the table, and the decimals the
 * table gives a fraction. */
#define METRIC_DIGITS 9
#define FRACTION_DECIMALS 6
/* Width of the table's labels ("makespan_s" and its padding); a space follows. */
#define TABLE_LABEL_WIDTH 18

/* One metric of a run. */
typedef struct metric {
    const char *name;        /* the table's label, the CSV column and the JSON key */
    metric_from from;
    size_t off;              /* offset of the value in its struct */
    metric_type type;
    unsigned in;             /* IN_TABLE | IN_CSV | IN_JSON */
    int fraction;            /* 1: the table writes FRACTION_DECIMALS decimals */
    const char *unit;        /* the table's unit after the value; NULL when the name carries it */
    const char *help;        /* the table's note after the value, in parentheses, or NULL */
    void (*note)(const report *, pl_buf *); /* the table's note when it depends on the run, or NULL */
    int stored;              /* 1: a column of the stored run, at store_off in store_run */
    size_t store_off;
} metric;

#define AT_SCHED(f) .from = FROM_SCHED, .off = offsetof(sched, f), .type = TYPE_OF(sched, f)
#define AT_RESULT(f) .from = FROM_RESULT, .off = offsetof(sim_result, f), .type = TYPE_OF(sim_result, f)
#define FLAG_AT_RESULT(f) .from = FROM_RESULT, .off = offsetof(sim_result, f), .type = FLAG_OF(sim_result, f)
#define AT_STATS(f) .from = FROM_STATS, .off = offsetof(sim_repeat_stats, f), .type = TYPE_OF(sim_repeat_stats, f)
#define STORED_AS(f) .stored = 1, .store_off = offsetof(store_run, f)

/* The notes of the table's lines that depend on the run. */
static void note_events(const report *p, pl_buf *b) { pl_buf_printf(b, " (%zu events)", p->r->events); }
static void note_iteration(const report *p, pl_buf *b) {
    const sim_result *r = p->r;
    if (!r->steady_state) {
        if (p->s->weights != SCHED_WEIGHTS_FLUSH && r->iterations >= 3 && !p->o->c.whole_run)
            pl_buf_printf(b, "  (no steady state: the fill and the drain span the %d iterations, so this is the whole "
                          "run's; try --iterations %d)", r->iterations, r->steady_need);
        return;
    }
    pl_buf_printf(b, "  (steady state: iterations %d..%d, the fill and the drain left out", r->steady_first, r->steady_last);
    if (r->steady_cycle > 1)
        pl_buf_printf(b, "; %d whole cycles of the %d iterations its gaps repeat with)",
                      (r->steady_last - r->steady_first + 1) / r->steady_cycle, r->steady_cycle);
    else if (r->steady_cycle == 0 && !(p->o->c.cv > 0) && !(p->o->c.rank_cv > 0)) /* random gaps never repeat */
        pl_buf_printf(b, "; its iteration gaps do not repeat within it: more iterations, e.g. --iterations %d, may "
                      "move the figure)", r->steady_need);
    else
        pl_buf_putc(b, ')');
}
static void note_window(const report *p, pl_buf *b) {
    if (p->r->steady_state)
        pl_buf_printf(b, "  (steady state: iterations %d..%d, where busy, idle and bubble are measured)", p->r->steady_first,
                      p->r->steady_last);
    else
        pl_buf_puts(b, "  (the whole run, where busy, idle and bubble are measured)");
}
static void note_zb(const report *p, pl_buf *b) {
    pl_buf_printf(b, "  (Zero Bubble paper: (cost - m(TF+TB+TW)) / cost, worst rank%s)", p->r->steady_state ? "" : ", over its span");
}
static void note_capacity(const report *p, pl_buf *b) {
    if (p->o->c.capacity_bytes > 0)
        pl_buf_printf(b, "  capacity %lld: %s", (long long)p->o->c.capacity_bytes, p->r->oom ? "OUT OF MEMORY" : "fits");
}

/* The run's metrics, in the order of every output. The stored iteration time and throughput
 * are the means over the --repeat runs (the one run's own without it); the stored bubble
 * figures are the median run's, like the rank rows. */
static const metric run_metrics[] = {
    {.name = "kind", AT_SCHED(kind), .in = IN_CSV | IN_JSON, STORED_AS(schedule)},
    {.name = "ranks", AT_SCHED(ranks), .in = IN_CSV | IN_JSON, STORED_AS(ranks)},
    {.name = "stages", AT_SCHED(stages), .in = IN_CSV | IN_JSON, STORED_AS(stages)},
    {.name = "microbatches", AT_SCHED(microbatches), .in = IN_CSV | IN_JSON, STORED_AS(microbatches)},
    {.name = "chunks", AT_SCHED(chunks), STORED_AS(chunks)},
    {.name = "iterations", AT_RESULT(iterations), .in = IN_CSV | IN_JSON, STORED_AS(iterations)},
    {.name = "actions", AT_RESULT(actions), .in = IN_TABLE | IN_JSON, .note = note_events},
    {.name = "makespan_s", AT_RESULT(makespan_s), .in = IN_ALL},
    {.name = "iteration_time_s", AT_RESULT(iteration_time_s), .in = IN_ALL, .note = note_iteration},
    {.name = "throughput", AT_RESULT(throughput), .in = IN_ALL, .unit = "samples/s"},
    {.name = "window_s", AT_RESULT(window_s), .in = IN_ALL, .note = note_window},
    {.name = "steady_state", FLAG_AT_RESULT(steady_state), .in = IN_JSON},
    {.name = "steady_cycle", AT_RESULT(steady_cycle), .in = IN_JSON},
    {.name = "bubble_fraction", AT_RESULT(bubble_fraction), .in = IN_ALL, .fraction = 1,
     .help = "idle / (ranks x window)", STORED_AS(bubble_fraction)},
    {.name = "idle_s", AT_RESULT(idle_s), .in = IN_ALL,
     .help = "idle seconds in the window, summed over ranks", STORED_AS(idle_s)},
    {.name = "zb_bubble_rate", AT_RESULT(zb_bubble_rate), .in = IN_ALL, .fraction = 1, .note = note_zb,
     STORED_AS(zb_bubble_rate)},
    {.name = "comm_s", AT_RESULT(comm_s), .in = IN_ALL, .help = "sum of transfer times",
     STORED_AS(comm_time_s)},
    {.name = "peak_mem_bytes", AT_RESULT(peak_bytes), .in = IN_ALL, .note = note_capacity,
     STORED_AS(peak_mem_bytes)},
    {.name = "oom", FLAG_AT_RESULT(oom), .in = IN_CSV | IN_JSON, STORED_AS(oom)},
    {.name = "repeat", AT_STATS(repeat), .in = IN_CSV | IN_JSON, STORED_AS(repetitions)},
    {.name = "seed", AT_STATS(median_seed), .in = IN_JSON}, /* the median run's (stored as the run's seed) */
    {.name = "iteration_time_mean_s", AT_STATS(iter_mean_s), .in = IN_CSV | IN_JSON,
     STORED_AS(iteration_time_s)},
    {.name = "iteration_time_stddev_s", AT_STATS(iter_sd_s), .in = IN_CSV | IN_JSON,
     STORED_AS(iteration_time_stddev_s)},
    {.name = "throughput_mean", AT_STATS(thr_mean), .in = IN_JSON, STORED_AS(throughput_samples_s)},
    {.name = "throughput_stddev", AT_STATS(thr_sd), .in = IN_JSON},
};

/* One metric of a rank (sim_rank_stats). Every output keys a rank's metrics by the rank
 * itself, first: the "rank" column and key, and store_rank_metric.rank. */
typedef struct rank_metric {
    const char *name;        /* the JSON key */
    const char *csv;         /* the CSV column (a rank_ prefix where the run has the name) */
    const char *label;       /* the table's column */
    int width;               /* the table column's width */
    size_t off;              /* offset of the value in sim_rank_stats */
    metric_type type;
    int fraction;            /* 1: the table writes FRACTION_DECIMALS decimals */
    int stored;              /* 1: a column of the stored rank row, at store_off in store_rank_metric */
    size_t store_off;
} rank_metric;

#define RANK_KEY_WIDTH 5
#define AT_RANK(f) .off = offsetof(sim_rank_stats, f), .type = TYPE_OF(sim_rank_stats, f)
#define FLAG_AT_RANK(f) .off = offsetof(sim_rank_stats, f), .type = FLAG_OF(sim_rank_stats, f)
#define RANK_STORED_AS(f) .stored = 1, .store_off = offsetof(store_rank_metric, f)

static const rank_metric rank_metrics[] = {
    {"busy_s", "busy_s", "busy_s", 14, AT_RANK(busy_s), RANK_STORED_AS(busy_s)},
    {"idle_s", "idle_s", "idle_s", 14, AT_RANK(idle_s), RANK_STORED_AS(idle_s)},
    {"bubble_fraction", "rank_bubble_fraction", "bubble_fraction", 15, AT_RANK(bubble_fraction), .fraction = 1,
     RANK_STORED_AS(bubble_fraction)},
    {"comm_s", "rank_comm_s", "comm_s", 14, AT_RANK(comm_s), RANK_STORED_AS(comm_s)},
    {"reduce_s", "rank_reduce_s", "reduce_s", 14, AT_RANK(reduce_s)},
    {"peak_bytes", "rank_peak_bytes", "peak_bytes", 16, AT_RANK(peak_bytes), RANK_STORED_AS(peak_mem_bytes)},
    {"peak_stash_mbs", "peak_stash_mbs", "stash", 6, AT_RANK(peak_stash_mbs)},
    {"peak_weight_versions", "peak_weight_versions", "versions", 8, AT_RANK(peak_weight_versions)},
    {"oom", "rank_oom", "oom", 4, FLAG_AT_RANK(oom)},
};

#define NRUN_METRICS (sizeof run_metrics / sizeof run_metrics[0])
#define NRANK_METRICS (sizeof rank_metrics / sizeof rank_metrics[0])

/* Returns where run metric m's value lives in the run p reports. */
static const void *run_value(const metric *m, const report *p) {
    const void *base = m->from == FROM_SCHED ? (const void *)p->s : m->from == FROM_RESULT ? (const void *)p->r : (const void *)p->st;
    return (const char *)base + m->off;
}

/* Returns where rank metric m's value of rank q lives. */
static const void *rank_value(const rank_metric *m, const report *p, int q) {
    return (const char *)&p->r->rank[q] + m->off;
}

/* Appends the value at v of type t as output `in` (IN_TABLE, IN_CSV or IN_JSON) writes it:
 * reals with METRIC_DIGITS significant digits (in the table, a fraction with FRACTION_DECIMALS
 * decimals), a flag as true/false in JSON, 0/1 in CSV and yes/no in the table, a name quoted in
 * JSON and as a field in CSV. width pads the table's columns (0: none). */
static void put_value(pl_buf *b, int in, metric_type t, const void *v, int fraction, int width) {
    switch (t) {
    case MT_NAME:
        if (in == IN_JSON) pl_buf_json_string(b, v);
        else if (in == IN_CSV) pl_buf_csv_field(b, v);
        else pl_buf_printf(b, "%*s", width, (const char *)v);
        break;
    case MT_INT: pl_buf_printf(b, "%*d", width, *(const int *)v); break;
    case MT_SIZE: pl_buf_printf(b, "%*zu", width, *(const size_t *)v); break;
    case MT_I64: pl_buf_printf(b, "%*lld", width, (long long)*(const int64_t *)v); break;
    case MT_REAL:
        if (in == IN_TABLE && fraction) pl_buf_printf(b, "%*.*f", width, FRACTION_DECIMALS, *(const double *)v);
        else pl_buf_printf(b, "%*.*g", width, METRIC_DIGITS, *(const double *)v);
        break;
    case MT_FLAG: {
        int on = *(const int *)v;
        if (in == IN_JSON) pl_buf_puts(b, on ? "true" : "false");
        else if (in == IN_CSV) pl_buf_printf(b, "%d", on);
        else pl_buf_printf(b, "%*s", width, on ? "yes" : "no");
        break;
    }
    }
}

/* Copies the value at v of type t into the stored field at dst (a store_run or
 * store_rank_metric member of the same type; a name becomes a pointer to its text). */
static void store_value(void *dst, metric_type t, const void *v) {
    switch (t) {
    case MT_NAME: *(const char **)dst = v; break;
    case MT_INT: case MT_FLAG: *(int *)dst = *(const int *)v; break;
    case MT_I64: *(int64_t *)dst = *(const int64_t *)v; break;
    case MT_REAL: *(double *)dst = *(const double *)v; break;
    case MT_SIZE: break; /* no stored column holds a count of this type */
    }
}

/* Writes a table line's label, padded to TABLE_LABEL_WIDTH, and the space after it. */
static void table_label(pl_buf *b, const char *label) { pl_buf_printf(b, "%-*s ", TABLE_LABEL_WIDTH, label); }

/* Writes the table's line that says what the flag-driven compute times describe. */
static void out_table_time_per(const opts *o, pl_buf *b) {
    table_label(b, "costs");
    pl_buf_printf(b, "flags, --time-per %s: ", sim_time_per_name(o->time_per));
    if (o->time_per == SIM_TIME_PER_STAGE || o->share == 1)
        pl_buf_printf(b, "each stage runs --tf %g%s\n", o->b.tf_s,
                      o->time_per == SIM_TIME_PER_STAGE ? "" : " (one stage per rank)");
    else
        pl_buf_printf(b, "a rank's share over its stages, each stage runs %.6g of it (--tf %g: %.6g per stage)\n",
                      o->share, o->b.tf_s, o->b.tf_s * o->share);
}

/* Writes the table's lines that say what the model run simulated: model, hardware, partition. */
static void out_table_model(const opts *o, const sim_model_setup *ms, pl_buf *b) {
    table_label(b, "costs");
    pl_buf_printf(b, "model %s (%s, %d layers, microbatch %d, %s) on %s (%d x %d devices)\n", ms->m->name, ms->m->source,
                  ms->m->n, ms->co.microbatch_size, cost_precision_name(ms->co.precision),
                  ms->sm.hw.name[0] ? ms->sm.hw.name : "-", ms->sm.hw.nodes, ms->sm.hw.devices_per_node);
    table_label(b, "partition");
    pl_buf_printf(b, "%s%s%s: bounds ", ms->psource, o->spec.partition ? " " : "", o->spec.partition ? o->spec.partition : "");
    for (int q = 0; q <= ms->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", ms->sm.bound[q]);
    pl_buf_puts(b, ", replicas ");
    for (int q = 0; q < ms->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "-" : "", ms->sm.replicas[q]);
    pl_buf_putc(b, '\n');
    const cost_hw *l = ms->sm.allreduce_link;
    if (!l) return;
    table_label(b, "all-reduce");
    pl_buf_printf(b, "ring on the profile's measured %s link: latency %.3g s, %.4g GB/s\n",
                  cost_transport_name((cost_transport)o->ar_used), l->intra_latency_s, l->intra_bandwidth_Bps / 1e9);
}

/* Writes the table's rank part: a header line and a line per rank. */
static void out_table_ranks(const report *p, pl_buf *b) {
    pl_buf_printf(b, "\n%-*s", RANK_KEY_WIDTH, "rank");
    for (size_t k = 0; k < NRANK_METRICS; k++) pl_buf_printf(b, " %*s", rank_metrics[k].width, rank_metrics[k].label);
    pl_buf_putc(b, '\n');
    for (int q = 0; q < p->s->ranks; q++) {
        pl_buf_printf(b, "%-*d", RANK_KEY_WIDTH, q);
        for (size_t k = 0; k < NRANK_METRICS; k++) {
            const rank_metric *m = &rank_metrics[k];
            pl_buf_putc(b, ' ');
            put_value(b, IN_TABLE, m->type, rank_value(m, p, q), m->fraction, m->width);
        }
        pl_buf_putc(b, '\n');
    }
}

/* Writes the human table: what ran, a line per run metric, the spread of stochastic runs, and
 * the ranks. */
static void out_table(const report *p, pl_buf *b) {
    const opts *o = p->o;
    const sched *s = p->s;
    const sim_repeat_stats *st = p->st;
    table_label(b, "schedule");
    pl_buf_printf(b, "%s: %d ranks, %d stages, %d microbatches, %d iteration%s, weights %s, recompute %s\n", s->kind,
                  s->ranks, s->stages, s->microbatches, p->r->iterations, p->r->iterations == 1 ? "" : "s",
                  sched_weights_name(s->weights), sched_recompute_name(s->recompute));
    if (o->ms) out_table_model(o, o->ms, b);
    else out_table_time_per(o, b);
    if (o->have_lr) cli_layout_table(&o->lr, o->spec.layout, b);
    for (size_t k = 0; k < NRUN_METRICS; k++) {
        const metric *m = &run_metrics[k];
        if (!(m->in & IN_TABLE)) continue;
        table_label(b, m->name);
        put_value(b, IN_TABLE, m->type, run_value(m, p), m->fraction, 0);
        if (m->unit) pl_buf_printf(b, " %s", m->unit);
        if (m->help) pl_buf_printf(b, "  (%s)", m->help);
        if (m->note) m->note(p, b);
        pl_buf_putc(b, '\n');
    }
    if (st->repeat > 1) {
        table_label(b, "stochastic");
        pl_buf_printf(b, "cv %.4g over %d runs: iteration_time_s mean %.9g stddev %.9g min %.9g max %.9g;"
                         " throughput mean %.9g stddev %.9g; bubble_fraction mean %.6f stddev %.6f;"
                         " the other rows: the median run, seed %lld\n",
                      o->c.cv, st->repeat, st->iter_mean_s, st->iter_sd_s, st->iter_min_s, st->iter_max_s, st->thr_mean,
                      st->thr_sd, st->bubble_fraction_mean, st->bubble_fraction_sd, (long long)st->median_seed);
    }
    out_table_ranks(p, b);
}

/* Writes CSV: a header, then one row per rank with the run's metrics repeated, the rank's, and
 * what the flag costs describe (time_per: rank, stage, or model). */
static void out_csv(const report *p, pl_buf *b) {
    const char *time_per = p->o->ms ? "model" : sim_time_per_name(p->o->time_per);
    for (size_t k = 0; k < NRUN_METRICS; k++)
        if (run_metrics[k].in & IN_CSV) pl_buf_printf(b, "%s,", run_metrics[k].name);
    pl_buf_puts(b, "rank");
    for (size_t k = 0; k < NRANK_METRICS; k++) pl_buf_printf(b, ",%s", rank_metrics[k].csv);
    pl_buf_puts(b, ",time_per");
    if (p->o->have_lr) cli_layout_csv(&p->o->lr, 1, b);
    pl_buf_putc(b, '\n');
    for (int q = 0; q < p->s->ranks; q++) {
        for (size_t k = 0; k < NRUN_METRICS; k++) {
            const metric *m = &run_metrics[k];
            if (!(m->in & IN_CSV)) continue;
            put_value(b, IN_CSV, m->type, run_value(m, p), m->fraction, 0);
            pl_buf_putc(b, ',');
        }
        pl_buf_printf(b, "%d", q);
        for (size_t k = 0; k < NRANK_METRICS; k++) {
            pl_buf_putc(b, ',');
            put_value(b, IN_CSV, rank_metrics[k].type, rank_value(&rank_metrics[k], p, q), 0, 0);
        }
        pl_buf_putc(b, ',');
        pl_buf_csv_field(b, time_per);
        if (p->o->have_lr) cli_layout_csv(&p->o->lr, 0, b);
        pl_buf_putc(b, '\n');
    }
}

/* Writes JSON: the run's metrics, its parameters (simulate_params_json) and a per-rank array. */
static void out_json(const report *p, pl_buf *b) {
    const char *sep = "{";
    for (size_t k = 0; k < NRUN_METRICS; k++) {
        const metric *m = &run_metrics[k];
        if (!(m->in & IN_JSON)) continue;
        pl_buf_printf(b, "%s\"%s\":", sep, m->name);
        put_value(b, IN_JSON, m->type, run_value(m, p), 0, 0);
        sep = ",";
    }
    pl_buf_puts(b, ",\"params\":");
    simulate_params_json(p->o, b);
    pl_buf_puts(b, ",\"per_rank\":[");
    for (int q = 0; q < p->s->ranks; q++) {
        pl_buf_printf(b, "%s{\"rank\":%d", q ? "," : "", q);
        for (size_t k = 0; k < NRANK_METRICS; k++) {
            pl_buf_printf(b, ",\"%s\":", rank_metrics[k].name);
            put_value(b, IN_JSON, rank_metrics[k].type, rank_value(&rank_metrics[k], p, q), 0, 0);
        }
        pl_buf_putc(b, '}');
    }
    pl_buf_puts(b, "]}\n");
}

#ifdef PIPELAB_HAVE_PL_RESULTS
/* Fills run and rm[ranks] with what the metric tables store, and run with what describes the
 * run (command line cmdline, parameters pj). */
void simulate_store_rows(const report *p, const char *cmdline, const char *pj, store_run *run, store_rank_metric *rm) {
    memset(run, 0, sizeof *run);
    run->kind = "simulated";
    run->tag = p->o->tag;
    run->cmdline = cmdline;
    run->weights_policy = sched_weights_name(p->s->weights);
    run->recompute_policy = sched_recompute_name(p->s->recompute);
    run->params_json = pj;
    run->seed = (uint64_t)p->st->median_seed; /* the run whose rows and trace are stored */
    for (size_t k = 0; k < NRUN_METRICS; k++)
        if (run_metrics[k].stored)
            store_value((char *)run + run_metrics[k].store_off, run_metrics[k].type, run_value(&run_metrics[k], p));
    for (int q = 0; q < p->s->ranks; q++) {
        rm[q].rank = q;
        for (size_t k = 0; k < NRANK_METRICS; k++)
            if (rank_metrics[k].stored)
                store_value((char *)&rm[q] + rank_metrics[k].store_off, rank_metrics[k].type,
                            rank_value(&rank_metrics[k], p, q));
    }
}
#endif

/* Prints the run in the chosen format (with the trace table under --trace) and writes the
 * Chrome trace of --trace-json. Returns an exit code. */
int simulate_write_outputs(const report *p) {
    const opts *o = p->o;
    pl_err e;
    pl_err_clear(&e);
    pl_buf out;
    pl_buf_init(&out);
    if (strcmp(o->format, "json") == 0) out_json(p, &out);
    else if (strcmp(o->format, "csv") == 0) out_csv(p, &out);
    else out_table(p, &out);
    if (o->trace) {
        pl_buf_putc(&out, '\n');
        sim_trace_table(p->s, p->r, &out, &e);
    }
    int rc = cli_write_output(NULL, &out);
    pl_buf_free(&out);
    if (rc == CLI_OK && o->trace_json) {
        pl_buf tj;
        pl_buf_init(&tj);
        if (sim_trace_chrome(p->s, p->r, &tj, &e) != PL_OK) rc = cli_fail(&e);
        else rc = cli_write_output(o->trace_json, &tj);
        pl_buf_free(&tj);
    }
    return rc;
}
