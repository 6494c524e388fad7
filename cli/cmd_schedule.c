/* cmd_schedule.c: `pipelab schedule`: generate or load a schedule, validate, lower, convert,
 * and print its unit-time timeline and statistics. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "pl_sched.h"
#include "sim.h"

static const char help_text[] =
    "usage: pipelab schedule (--kind K --ranks P --microbatches M | --from FILE) [options]\n"
    "\n"
    "Generates or loads a pipeline schedule, validates it, and prints its unit-time timeline\n"
    "(one row per rank, one cell per step; F, B, I, W with the microbatch) and statistics.\n"
    "\n"
    "source:\n"
    "  --kind K              generator: gpipe 1f1b pipedream 2bw interleaved looped-bfs\n"
    "                        zb-h1 zb-h2 zbv dualpipev\n"
    "  --ranks P             number of ranks (workers)\n"
    "  --microbatches M      microbatches per iteration\n"
    "  --chunks V            stages per rank (interleaved, looped-bfs)\n"
    "  --iterations N        iterations to describe (pipedream and 2bw default to 4)\n"
    "  --recompute none|full activation recomputation policy\n"
    "  --from FILE           load a .sched file or a PyTorch CSV (.csv), which sets the ranks,\n"
    "                        microbatches, chunks, iterations and recomputation (a CSV has no\n"
    "                        recomputation: --recompute gives it one)\n"
    "  --legacy-letters      read a CSV's older PyTorch letters (B = input backward, BW = full\n"
    "                        backward)\n"
    "\n"
    "actions:\n"
    "  --lowered             lower: explicit SEND/RECV, REDUCE_GRAD and STEP\n"
    "  --check               validate only; print a one-line verdict\n"
    "  --to sched|torch-csv|torch-csv-legacy  convert and write the schedule (to --output,\n"
    "                        default stdout); torch-csv-legacy: older PyTorch letters (B = input\n"
    "                        backward, BW = full backward)\n"
    "  --flavour compute_only|compute_comms   CSV flavour of torch-csv (default: by lowering)\n"
    "  -o, --output FILE     where --to writes; without --to, the format follows FILE's name:\n"
    "                        .sched (sched) or .csv (torch-csv)\n"
    "  --no-timeline         print only the statistics (the timeline is refused up front when\n"
    "                        its text would not fit --max-memory, or is over 1000000 steps wide)\n"
    "  --color auto|always|never   colour the timeline (auto: when stdout is a terminal)\n"
    "  --format table|csv|json     statistics format (default table)\n"
    "  --unit-f N --unit-b N --unit-i N --unit-w N   step costs in the dry run (default 1; under\n"
    "                        --recompute full a B or I costs one F more, as simulate prices it)\n"
    "                        (--no-timeline, --color, --format and --unit-* set what is printed:\n"
    "                        not with --to or -o, which print none of it)\n"
    "  --max-memory SIZE     memory pipelab may use (8e9, 16GiB; default: the physical memory or\n"
    "                        ulimit -v, or $PIPELAB_MAX_MEMORY); larger schedules are refused up front\n"
    "\n"
    "exit status: 0 ok, 1 bad input (message names the file, line and reason), 2 bad usage\n";

typedef struct opts {
    cli_sched_args a;
    const char *to, *output, *flavour, *color, *format;
    int lowered, check, no_timeline;
    sched_unit_costs costs;
    const char *shown; /* the long name of the first flag given of what is printed (the timeline and
                        * statistics), else NULL */
} opts;

enum { O_LOWERED = 1000, O_CHECK, O_TO, O_FLAVOUR, O_NOTL, O_COLOR, O_FORMAT, O_UF, O_UB, O_UI, O_UW, O_HELP, O_MAXMEM };

static const struct option long_opts[] = {
    CLI_SCHED_LONG_OPTS,
    {"lowered", no_argument, 0, O_LOWERED},
    {"check", no_argument, 0, O_CHECK},
    {"to", required_argument, 0, O_TO},
    {"flavour", required_argument, 0, O_FLAVOUR},
    {"flavor", required_argument, 0, O_FLAVOUR},
    {"output", required_argument, 0, 'o'},
    {"no-timeline", no_argument, 0, O_NOTL},
    {"color", required_argument, 0, O_COLOR},
    {"format", required_argument, 0, O_FORMAT},
    {"unit-f", required_argument, 0, O_UF},
    {"unit-b", required_argument, 0, O_UB},
    {"unit-i", required_argument, 0, O_UI},
    {"unit-w", required_argument, 0, O_UW},
    {"help", no_argument, 0, O_HELP},
    {"max-memory", required_argument, 0, O_MAXMEM},
    {0, 0, 0, 0},
};

#define MAX_UNIT 1000 /* the largest step cost of the dry run (--unit-f, -b, -i, -w) */
/* The widest timeline drawn, in steps (cells of a row): 1000000 cells are rows of megabytes that
 * no terminal or pager shows as a figure; a wider one is refused, pointing to --no-timeline (the
 * statistics) and to smaller --unit-* costs. */
#define TIMELINE_MAX_STEPS 1000000
/* Bytes of a colour sequence and its reset around a coloured cell (render.c). */
#define TIMELINE_COLOR_BYTES 14
/* Room for the statistics after the timeline (sched_render_stats: a few lines, and one per rank). */
#define TIMELINE_STATS_BYTES 4096.0
#define TIMELINE_STATS_RANK_BYTES 64.0

/* Returns 1 when path's name ends in .sched (any case): -o without --to writes .sched text there. */
static int names_sched_text(const char *path) {
    static const char ext[] = ".sched";
    size_t n = strlen(path), m = sizeof ext - 1;
    return n >= m && strcasecmp(path + n - m, ext) == 0;
}

/* Checks the conversion flags and settles what -o writes: --to's format, or without --to the
 * one its file name says, as sched_load reads it back (.sched: sched, .csv: torch-csv); any
 * other name is refused, as are --flavour without a CSV to write and --check (which writes
 * nothing) with --to or -o. Returns -1 to go on, else CLI_EUSAGE after printing what is wrong. */
static int output_args(opts *o) {
    const char *writer = o->to ? "--to" : "-o"; /* what asks for the schedule to be written */
    if (o->to && strcmp(o->to, "sched") != 0 && strcmp(o->to, "torch-csv") != 0 && strcmp(o->to, "torch-csv-legacy") != 0)
        return cli_usage_error("schedule", "--to must be sched, torch-csv or torch-csv-legacy (got '%s')", o->to);
    if (o->flavour && strcmp(o->flavour, "compute_only") != 0 && strcmp(o->flavour, "compute_comms") != 0)
        return cli_usage_error("schedule", "--flavour must be compute_only or compute_comms (got '%s')", o->flavour);
    if (o->check && (o->to || o->output))
        return cli_usage_error("schedule", "--check validates only and writes nothing: not with --to or -o");
    if (o->output && !o->to) {
        o->to = names_sched_text(o->output) ? "sched" : sched_path_is_csv(o->output) ? "torch-csv" : NULL;
        if (!o->to)
            return cli_usage_error("schedule", "-o %s: the format is not in its name (.sched or .csv); give --to sched, "
                                   "torch-csv or torch-csv-legacy", o->output);
    }
    if (o->to && o->shown)
        return cli_usage_error("schedule", "--%s sets how the timeline and statistics print, and with %s the schedule is "
                               "written instead; leave --%s out", o->shown, writer, o->shown);
    if (o->flavour && (!o->to || strcmp(o->to, "sched") == 0))
        return cli_usage_error("schedule", "--flavour is the flavour of the CSV that --to torch-csv or torch-csv-legacy "
                               "writes (or -o FILE.csv)%s", o->to ? ", not --to sched" : "");
    return -1;
}

/* Parses argv into o; returns -1 to continue, or an exit code to return at once. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->costs = (sched_unit_costs){1, 1, 1, 1};
    o->color = "auto";
    o->format = "table";
    opterr = 0;
    optind = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, "o:", long_opts, NULL)) != -1) {
        int src = cli_sched_opt("schedule", c, optarg, &o->a, &cli_sched_gen_limits);
        if (src == CLI_EUSAGE) return src;
        if (src == CLI_OK) continue;
        switch (c) {
        case O_LOWERED: o->lowered = 1; break;
        case O_CHECK: o->check = 1; break;
        case O_TO: o->to = optarg; break;
        case O_FLAVOUR: o->flavour = optarg; break;
        case 'o': o->output = optarg; break;
        case O_NOTL: o->no_timeline = 1; break;
        case O_COLOR: o->color = optarg; break;
        case O_FORMAT: o->format = optarg; break;
        case O_UF: if (cli_int_arg("schedule", "--unit-f", optarg, 0, MAX_UNIT, &o->costs.f)) return CLI_EUSAGE; break;
        case O_UB: if (cli_int_arg("schedule", "--unit-b", optarg, 0, MAX_UNIT, &o->costs.b)) return CLI_EUSAGE; break;
        case O_UI: if (cli_int_arg("schedule", "--unit-i", optarg, 0, MAX_UNIT, &o->costs.i)) return CLI_EUSAGE; break;
        case O_UW: if (cli_int_arg("schedule", "--unit-w", optarg, 0, MAX_UNIT, &o->costs.w)) return CLI_EUSAGE; break;
        case O_HELP: fputs(help_text, stdout); return CLI_OK;
        case O_MAXMEM: if (cli_max_memory_arg("schedule", optarg, &o->a)) return CLI_EUSAGE; break;
        default:
            return cli_usage_error("schedule", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
        if (!o->shown && (c == O_NOTL || c == O_COLOR || c == O_FORMAT || c == O_UF || c == O_UB || c == O_UI || c == O_UW))
            for (const struct option *lo = long_opts; lo->name; lo++)
                if (lo->val == c) o->shown = lo->name;
    }
    if ((rc = cli_sched_args_end("schedule", argc, argv, &o->a)) >= 0) return rc;
    if ((rc = output_args(o)) >= 0) return rc;
    if (strcmp(o->color, "auto") && strcmp(o->color, "always") && strcmp(o->color, "never"))
        return cli_usage_error("schedule", "--color must be auto, always or never");
    return cli_format_arg("schedule", o->format);
}

/* Writes the statistics as CSV (one row per rank) or JSON. */
static void stats_machine(const sched *s, const sched_dryrun_result *r, int json, pl_buf *b) {
    if (!json) {
        pl_buf_puts(b, "kind,ranks,stages,microbatches,iterations,steps,bubble_fraction,rank,busy_steps,rank_bubble_fraction,max_inflight\n");
        for (int q = 0; q < s->ranks; q++)
            pl_buf_printf(b, "%s,%d,%d,%d,%d,%lld,%.6f,%d,%lld,%.6f,%d\n", s->kind, s->ranks, s->stages,
                          s->microbatches, s->iterations, (long long)r->steps, r->bubble_fraction, q, (long long)r->busy[q],
                          r->steps ? 1.0 - (double)r->busy[q] / (double)r->steps : 0.0, r->max_inflight[q]);
        return;
    }
    pl_buf_printf(b, "{\"kind\":\"%s\",\"ranks\":%d,\"stages\":%d,\"microbatches\":%d,\"iterations\":%d,"
                     "\"placement\":\"%s\",\"weights\":\"%s\",\"recompute\":\"%s\",\"lowered\":%s,"
                     "\"actions\":%zu,\"steps\":%lld,\"bubble_fraction\":%.6f,\"per_rank\":[",
                  s->kind, s->ranks, s->stages, s->microbatches, s->iterations, sched_placement_name(s->placement),
                  sched_weights_name(s->weights), sched_recompute_name(s->recompute), s->lowered ? "true" : "false",
                  sched_total_actions(s), (long long)r->steps, r->bubble_fraction);
    for (int q = 0; q < s->ranks; q++)
        pl_buf_printf(b, "%s{\"rank\":%d,\"busy_steps\":%lld,\"max_inflight\":%d}", q ? "," : "", q,
                      (long long)r->busy[q], r->max_inflight[q]);
    pl_buf_puts(b, "]}\n");
}

/* Returns the decimal digits of v >= 0. */
static int digits(long long v) {
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Refuses (PL_EINPUT) the unit-time timeline of s (sched_render_timeline) when it is wider than
 * TIMELINE_MAX_STEPS steps, or first when its text would not fit the budget: (ranks + 1) rows (the
 * ruler, then each rank) of r->steps cells, each as wide as the widest cell text plus '|', and
 * with colour each busy cell's sequences; the buffer that holds it grows by doubling, so up to
 * twice that is held, beside the schedule (sched_command_memory). Returns PL_OK or the error. */
static int timeline_check(const opts *o, const sched *s, const sched_dryrun_result *r, int color, pl_err *e) {
    const char *what = o->a.from ? o->a.from : s->kind;
    /* the widest cell: "F12" or, with several stages a rank, "3F12"; '*' marks an overlapped pair */
    int mb = 0, stage = 0, kind = 1, mark = 0;
    double busy = 0;
    for (int q = 0; q < s->ranks; q++) {
        busy += (double)r->busy[q];
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            if (!sched_kind_is_compute((sched_kind)a->kind)) continue;
            int two = a->kind == SCHED_OVERLAP;
            mb = a->mb > mb ? a->mb : mb;
            mb = two && a->mb2 > mb ? a->mb2 : mb;
            stage = a->stage > stage ? a->stage : stage;
            stage = two && a->stage2 > stage ? a->stage2 : stage;
            mark |= two;
            int k = (int)strlen(sched_kind_name((sched_kind)(two ? a->kind2 : a->kind)));
            kind = k > kind ? k : kind;
        }
    }
    int width = (s->stages != s->ranks ? digits(stage) : 0) + kind + digits(mb) + mark;
    double label = strlen("rank ") + digits(s->ranks - 1) + 3;
    double text = (s->ranks + 1.0) * (label + (double)r->steps * (width + 1)) + (color ? busy * TIMELINE_COLOR_BYTES : 0) +
                  TIMELINE_STATS_BYTES + TIMELINE_STATS_RANK_BYTES * s->ranks;
    /* besides the schedule and its dry run, which the command holds already (cli_sched_load's check) */
    sched_shape sh = {s->ranks, s->stages, sched_total_microbatches(s), (int64_t)sched_total_actions(s)};
    double bytes = 2 * text + (double)sched_command_memory(&sh, SCHED_MEM_SCHEDULE);
    char desc[192];
    snprintf(desc, sizeof desc, "drawing the timeline of %s (%d ranks, %lld steps, cells of %d characters: about %.0f bytes "
             "of text) beside the schedule", what, s->ranks, (long long)r->steps, width + 1, text);
    int rc = sched_memory_check(&o->a.budget, bytes >= 0x1p64 ? UINT64_MAX : (uint64_t)bytes, desc, e);
    if (rc != PL_OK) {
        pl_err why = *e;
        return pl_errf(e, rc, "%s; or give --no-timeline for the statistics alone", why.msg);
    }
    if (r->steps > TIMELINE_MAX_STEPS)
        return pl_errf(e, PL_EINPUT,
                       "the timeline of %s is %lld steps wide, more than the %d drawn at most; give --no-timeline for "
                       "the statistics alone, or smaller --unit-f, --unit-b, --unit-i, --unit-w or fewer microbatches",
                       what, (long long)r->steps, TIMELINE_MAX_STEPS);
    return PL_OK;
}

/* Warns on stderr when the PyTorch CSV just written (to path, NULL: stdout) left out policies of
 * s that reading it back would change (sched_csv_losses). */
static void csv_losses_warning(const sched *s, const char *path) {
    pl_buf b;
    pl_buf_init(&b);
    if (sched_csv_losses(s, &b) > 0 && !b.failed)
        fprintf(stderr, "pipelab schedule: warning: %s does not carry %s; .sched keeps them\n",
                path ? path : "the PyTorch CSV", b.data);
    pl_buf_free(&b);
}

/* Entry point of `pipelab schedule`: checks, converts or dry-runs the schedule and prints the
 * result; returns an exit code. */
int cli_schedule(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    pl_err e;
    pl_err_clear(&e);
    sched *s = cli_sched_get(&o.a, SCHED_MEM_SCHEDULE, &e);
    if (!s) return cli_fail(&e);
    if (o.lowered && !s->lowered) {
        sched *l = sched_lower_within(s, &o.a.budget, &e);
        sched_free(s);
        if (!l) return cli_fail(&e);
        s = l;
        if (sched_validate(s, &e) != PL_OK) {
            pl_err_prefix(&e, "internal error: the lowered schedule is invalid: ");
            sched_free(s);
            return cli_fail(&e);
        }
    }
    pl_buf out;
    pl_buf_init(&out);
    if (o.check) {
        pl_buf_printf(&out, "ok: %s: %d ranks, %d stages, %d microbatches, %zu actions, valid and deadlock-free\n",
                      o.a.from ? o.a.from : s->kind, s->ranks, s->stages, s->microbatches, sched_total_actions(s));
        rc = cli_write_output(NULL, &out);
    } else if (o.to) {
        if (strcmp(o.to, "sched") == 0) {
            rc = sched_write_text(s, &out) == PL_OK ? CLI_OK : CLI_EUSER;
        } else {
            sched_csv_flavour fl = !o.flavour ? SCHED_CSV_AUTO
                                   : strcmp(o.flavour, "compute_only") == 0 ? SCHED_CSV_COMPUTE_ONLY
                                                                            : SCHED_CSV_COMPUTE_COMMS;
            sched_letters lt = strcmp(o.to, "torch-csv-legacy") == 0 ? SCHED_LETTERS_LEGACY : SCHED_LETTERS_CURRENT;
            rc = sched_write_torch_csv_letters(s, fl, lt, &out, &e) == PL_OK ? CLI_OK : cli_fail(&e);
        }
        if (rc == CLI_OK) rc = cli_write_output(o.output, &out);
        if (rc == CLI_OK && strcmp(o.to, "sched") != 0) csv_losses_warning(s, o.output);
    } else {
        sched_dryrun_result r;
        if (sched_dryrun(s, &o.costs, &r, &e) != PL_OK) {
            rc = cli_fail(&e);
        } else {
            int color = strcmp(o.color, "always") == 0 || (strcmp(o.color, "auto") == 0 && cli_isatty(1));
            int table = strcmp(o.format, "table") == 0;
            rc = CLI_OK;
            if (table && !o.no_timeline && timeline_check(&o, s, &r, color, &e) != PL_OK) {
                rc = cli_fail(&e);
            } else if (table) {
                if (!o.no_timeline) {
                    sched_render_timeline(s, &r, color, &out);
                    pl_buf_putc(&out, '\n');
                }
                sched_render_stats(s, &r, &out);
            } else {
                stats_machine(s, &r, strcmp(o.format, "json") == 0, &out);
            }
            if (rc == CLI_OK) rc = cli_write_output(NULL, &out);
            sched_dryrun_free(&r, s->ranks);
        }
    }
    pl_buf_free(&out);
    sched_free(s);
    return rc;
}
