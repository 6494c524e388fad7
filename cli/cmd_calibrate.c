/* cmd_calibrate.c: `pipelab calibrate`: fit efficiency, latency and bandwidth to measured timings
 * and write them as a hardware INI file. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"
#ifdef PIPELAB_HAVE_PL_RESULTS
#include "store.h"
#endif

/* Below this R^2 a fit gets a warning. */
#define CALIBRATE_R2_WARN 0.5

static const char help_text[] =
    "usage: pipelab calibrate (--observations FILE.csv | --db FILE --run ID --model SPEC) [options]\n"
    "\n"
    "Fits, by least squares (GSL), the compute efficiency and launch overhead\n"
    "(seconds = launch + flops / (peak x efficiency)) and, per link level, the latency alpha and\n"
    "bandwidth 1/beta (seconds = alpha + bytes x beta) to measured action timings, and writes the\n"
    "base hardware with the fitted values as an INI file. Groups without observations keep the\n"
    "base values (with --db, groups that cannot be fitted are also left, with a note).\n"
    "Observations CSV: header 'kind,flops,bytes,seconds', kind compute, intra or inter.\n"
    "\n"
    "  --observations FILE   measured timings (CSV above)\n"
    "  --db FILE --run ID    or: the ops of a run in the results database; F, B, I, W become compute\n"
    "                        observations (FLOPs of the stage from --model), SEND_F and SEND_B\n"
    "                        transfers (bytes of the cut, intra or inter by the ranks' nodes)\n"
    "  --model SPEC          the model the run trained (as in pipelab partition --model)\n"
    "  --partition FILE      its stage boundaries (default: an even split into the run's stages)\n"
    "  --microbatch B        samples per microbatch of the run (default: the model's)\n"
    "  --hardware NAME|FILE  base hardware whose other values are kept (default: the 'cpu' preset\n"
    "                        when present, else neutral defaults)\n"
    "  --set KEY=VALUE       override a base key first, e.g. --set device.flops_fp32=1e12 (repeatable)\n"
    "  --precision P         which peak the efficiency is relative to (default fp32)\n"
    "  --name NAME           [hardware] name of the result (default: base name + '-calibrated')\n"
    "  -o, --output FILE     where the INI goes (default stdout); the fit summary goes to stderr\n"
    "\n"
    "exit status: 0 ok, 1 bad input or a fit that fails (the message says why), 2 bad usage\n";

typedef struct opts {
    const char *observations, *hardware, *precision, *name, *output, *db, *run, *model, *partition;
    int microbatch;
    const char **sets;
    int nsets;
} opts;

enum { O_OBS = 1000, O_HW, O_SET, O_PREC, O_NAME, O_DB, O_RUN, O_MODEL, O_PART, O_MB, O_HELP };

static const struct option long_opts[] = {
    {"observations", required_argument, 0, O_OBS},
    {"hardware", required_argument, 0, O_HW},
    {"set", required_argument, 0, O_SET},
    {"precision", required_argument, 0, O_PREC},
    {"name", required_argument, 0, O_NAME},
    {"db", required_argument, 0, O_DB},
    {"run", required_argument, 0, O_RUN},
    {"model", required_argument, 0, O_MODEL},
    {"partition", required_argument, 0, O_PART},
    {"microbatch", required_argument, 0, O_MB},
    {"output", required_argument, 0, 'o'},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* Room for the calibration's source path in the hardware file written: its lines stay within the
 * reader's limit. */
#define CALIB_SRC_MAX 128
/* The most characters of a hardware name (cost_hw's name, NUL aside). */
#define NAME_MAX_CHARS 63

/* Returns 0 when --name's value is one the hardware file written carries and reads back as
 * given: 1 to 63 printable characters, no INI syntax (; # = [ ]), no space at either end;
 * else 1 after the usage error. */
static int name_arg(const char *v) {
    size_t n = strlen(v);
    const char *bad = n == 0 ? "is empty" : n > NAME_MAX_CHARS ? "is longer than 63 characters" : NULL;
    for (size_t i = 0; !bad && i < n; i++)
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e) bad = "has a character that is not printable ASCII";
        else if (strchr(";#=[]", v[i])) bad = "has one of ; # = [ ], which the hardware file's syntax uses";
    if (!bad && (v[0] == ' ' || v[n - 1] == ' ')) bad = "begins or ends with a space";
    if (!bad) return 0;
    cli_usage_error("calibrate", "--name %s (the [hardware] name of the file written)", bad);
    return 1;
}

/* Parses argv into o; returns -1 to continue, or an exit code to return at once. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->sets = calloc((size_t)argc + 1, sizeof *o->sets);
    if (!o->sets) return cli_usage_error("calibrate", "out of memory");
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:", long_opts, NULL)) != -1) {
        switch (c) {
        case O_OBS: o->observations = optarg; break;
        case O_HW: o->hardware = optarg; break;
        case O_SET:
            if (cli_set_arg("calibrate", optarg)) return CLI_EUSAGE;
            o->sets[o->nsets++] = optarg;
            break;
        case O_PREC: o->precision = optarg; break;
        case O_NAME:
            if (name_arg(optarg)) return CLI_EUSAGE;
            o->name = optarg;
            break;
        case O_DB: o->db = optarg; break;
        case O_RUN: o->run = optarg; break;
        case O_MODEL: o->model = optarg; break;
        case O_PART: o->partition = optarg; break;
        case O_MB: if (cli_int_arg("calibrate", "--microbatch", optarg, 1, 1 << 24, &o->microbatch)) return CLI_EUSAGE; break;
        case 'o': o->output = optarg; break;
        case O_HELP: fputs(help_text, stdout); return CLI_OK;
        default: return cli_usage_error("calibrate", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("calibrate", "unexpected argument '%s'", argv[optind]);
    /* -o beside the database it reads; with --observations it reads none */
    const cli_output outs[] = {{"-o", o->output}};
    int rc = o->db ? cli_db_flags("calibrate", o->db, 0, outs, 1) : cli_outputs_check("calibrate", outs, 1);
    if (rc >= 0) return rc;
    if (!o->observations == !o->db) return cli_usage_error("calibrate", "give either --observations FILE.csv or --db FILE");
    if (o->db && (!o->run || !o->model)) return cli_usage_error("calibrate", "--db needs --run ID and --model SPEC");
    if (!o->db && (o->run || o->model || o->partition || o->microbatch))
        return cli_usage_error("calibrate", "--run, --model, --partition and --microbatch go with --db");
    if (o->precision && cost_precision_parse(o->precision) < 0)
        return cli_usage_error("calibrate", "--precision must be fp32, tf32, fp16 or bf16 (got '%s')", o->precision);
    return -1;
}

/* Returns 1 when an embedded preset of that name exists. */
static int have_preset(const char *name) {
    for (const char *const *n = cost_hw_preset_names(); n && *n; n++)
        if (strcmp(*n, name) == 0) return 1;
    return 0;
}

#ifdef PIPELAB_HAVE_PL_RESULTS
/* Returns the FLOPs of one kind of action of layers [a, b) scaled to the microbatch, or -1 when
 * some layer's FLOPs are unknown. */
static double stage_flops(const cost_model *m, int a, int b, const char *kind, double scale) {
    double sum = 0;
    for (int l = a; l < b; l++) {
        const cost_layer *y = &m->layer[l];
        double v = strcmp(kind, "F") == 0   ? y->fwd_flops
                   : strcmp(kind, "I") == 0 ? y->bwd_in_flops
                   : strcmp(kind, "W") == 0 ? y->bwd_w_flops
                   : (y->bwd_in_flops < 0 || y->bwd_w_flops < 0) ? -1.0
                                                                 : y->bwd_in_flops + y->bwd_w_flops;
        if (v < 0) return -1.0;
        sum += v;
    }
    return sum * scale;
}

/* Returns the partition of the run's layers: --partition FILE (covering the model's layers), or
 * an even split into its stages; NULL and e on error. */
static cost_partition *run_partition(const opts *o, const cost_model *m, int stages, pl_err *e) {
    if (!o->partition) return cost_partition_even(m->n, stages, e);
    cost_partition *part = NULL;
    if (cost_partition_read(o->partition, &part, e) == PL_OK && cost_partition_layers(part) != m->n) {
        pl_errf(e, PL_EINPUT, "%s: the partition covers %d layers but the model has %d", o->partition,
                cost_partition_layers(part), m->n);
        cost_partition_free(part);
        part = NULL;
    }
    return part;
}

/* Turns ops[nops] of a run into observations v (room for nops): F/B/I/W compute with the FLOPs
 * of their stage of m under part (scaled to the run's microbatch), SEND_F/SEND_B transfers of
 * the cut's bytes between the ranks of the two stages, intra or inter by hw's nodes. Returns how
 * many it wrote. */
static size_t observations(const store_op *ops, size_t nops, const cost_model *m, const cost_partition *part,
                           const cost_hw *hw, double scale, int *rank_of, cost_observation *v) {
    size_t n = 0;
    for (int s = 0; s < part->stages; s++) rank_of[s] = -1;
    for (size_t k = 0; k < nops; k++)
        if (ops[k].stage >= 0 && ops[k].stage < part->stages && rank_of[ops[k].stage] < 0) rank_of[ops[k].stage] = ops[k].rank;
    for (size_t k = 0; k < nops; k++) {
        const store_op *op = &ops[k];
        const char *kd = op->kind ? op->kind : "";
        double secs = op->end_s - op->start_s;
        if (op->stage < 0 || op->stage >= part->stages || !(secs >= 0)) continue;
        int a = part->bound[op->stage], b = part->bound[op->stage + 1];
        if (!strcmp(kd, "F") || !strcmp(kd, "B") || !strcmp(kd, "I") || !strcmp(kd, "W")) {
            double fl = stage_flops(m, a, b, kd, scale);
            if (fl > 0) v[n++] = (cost_observation){COST_OBS_COMPUTE, fl, 0, secs};
        } else if (!strcmp(kd, "SEND_F") || !strcmp(kd, "SEND_B")) {
            int fwd = strcmp(kd, "SEND_F") == 0, peer = op->stage + (fwd ? 1 : -1);
            if (peer < 0 || peer >= part->stages || rank_of[peer] < 0) continue;
            double bytes = (double)(m->cut_bytes ? m->cut_bytes[fwd ? b : a] : 0) * scale;
            if (bytes <= 0 || rank_of[peer] == op->rank) continue;
            int inter = cost_ranks_inter(hw, op->rank, rank_of[peer]);
            v[n++] = (cost_observation){inter ? COST_OBS_INTER : COST_OBS_INTRA, 0, bytes, secs};
        }
    }
    return n;
}

/* Turns the ops of a stored run into observations (F/B/I/W compute, SEND_F/SEND_B transfers);
 * returns PL_OK and a malloc'd array, or an error. */
static int obs_from_db(const opts *o, const cost_hw *hw, cost_observation **out, size_t *nout, pl_err *e) {
    *out = NULL;
    *nout = 0;
    store *db = NULL;
    store_run run;
    memset(&run, 0, sizeof run);
    store_op *ops = NULL;
    size_t nops = 0, n = 0;
    cost_model *m = NULL;
    cost_partition *part = NULL;
    int *rank_of = NULL;
    cost_observation *v = NULL;
    int rc = store_open(o->db, 1, &db, e);
    char key[CLI_RUN_KEY_MAX]; /* "p:X", as pipelab db list prints a prediction's id */
    if (rc == PL_OK) rc = store_get_run(db, cli_run_key(o->run, key, sizeof key), &run, e);
    if (rc == PL_OK) rc = store_get_ops(db, run.id, &ops, &nops, e);
    if (rc == PL_OK && nops == 0) rc = pl_errf(e, PL_EINPUT, "%s: run %s has no recorded actions", o->db, o->run);
    if (rc == PL_OK && !(m = cost_model_open(o->model, e))) rc = e->code ? e->code : PL_EINPUT;
    if (rc == PL_OK && !(part = run_partition(o, m, run.stages, e))) rc = e->code ? e->code : PL_EINPUT;
    if (rc == PL_OK && part->stages != run.stages)
        rc = pl_errf(e, PL_EINPUT, "the partition has %d stages but run %s has %d", part->stages, o->run, run.stages);
    if (rc == PL_OK && (!(rank_of = calloc((size_t)part->stages, sizeof *rank_of)) || !(v = calloc(nops, sizeof *v))))
        rc = pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) {
        double scale = (double)(o->microbatch ? o->microbatch : m->microbatch_size) / (double)m->microbatch_size;
        n = observations(ops, nops, m, part, hw, scale, rank_of, v);
        if (n == 0)
            rc = pl_errf(e, PL_EINPUT, "%s: run %s has no compute action with known FLOPs and no transfer to fit", o->db, o->run);
    }
    free(rank_of);
    cost_partition_free(part);
    cost_model_free(m);
    store_ops_free(ops, nops);
    store_run_clear(&run);
    store_close(db);
    if (rc != PL_OK) {
        free(v);
        return rc;
    }
    *out = v;
    *nout = n;
    return PL_OK;
}
#endif

/* Loads the base hardware (--hardware, else the 'cpu' preset when there is one, else neutral
 * defaults named "machine") into hw and applies --set; *base gets its name, NULL for the
 * defaults. Returns PL_OK or an error in e. */
static int base_hardware(const opts *o, cost_hw *hw, const char **base, pl_err *e) {
    *base = o->hardware ? o->hardware : have_preset("cpu") ? "cpu" : NULL;
    if (*base) {
        int rc = cost_hw_load(hw, *base, e);
        if (rc != PL_OK) return rc;
    } else {
        cost_hw_init(hw);
        snprintf(hw->name, sizeof hw->name, "machine");
    }
    for (int k = 0; k < o->nsets; k++) {
        int rc = cost_hw_set_kv(hw, o->sets[k], e);
        if (rc != PL_OK) return rc;
    }
    return PL_OK;
}

/* Reads the observations of --observations FILE or of --db's run into *obs[*n]. Returns an exit
 * code (CLI_OK, or after printing what is wrong). */
static int get_observations(const opts *o, const cost_hw *hw, cost_observation **obs, size_t *n) {
    pl_err e;
    pl_err_clear(&e);
    if (o->observations) return cost_observations_read(o->observations, obs, n, &e) == PL_OK ? CLI_OK : cli_fail(&e);
#ifdef PIPELAB_HAVE_PL_RESULTS
    return obs_from_db(o, hw, obs, n, &e) == PL_OK ? CLI_OK : cli_fail(&e);
#else
    (void)hw;
    return cli_usage_error("calibrate", "--db needs a build with the results store");
#endif
}

/* Puts the fitted values of f into hw and names it: --name, or the base's name with
 * "-calibrated"; its description and source say what it was calibrated from (src) on what base. */
static void apply_fit(const opts *o, const cost_fit *f, const char *base, const char *src, cost_hw *hw) {
    if (f->have_compute) hw->efficiency = f->efficiency, hw->launch_s = f->launch_s;
    if (f->have_intra) hw->intra_bandwidth_Bps = f->intra_bw_Bps, hw->intra_latency_s = f->intra_latency_s;
    if (f->have_inter) hw->inter_bandwidth_Bps = f->inter_bw_Bps, hw->inter_latency_s = f->inter_latency_s;
    if (o->name) {
        snprintf(hw->name, sizeof hw->name, "%s", o->name);
    } else {
        char nm[sizeof hw->name];
        snprintf(nm, sizeof nm, "%.48s-calibrated", hw->name[0] ? hw->name : "machine");
        memcpy(hw->name, nm, sizeof nm);
    }
    /* the path as the hardware file can carry it on a line and read back (pl_clean_name) */
    char csrc[CALIB_SRC_MAX], desc[sizeof hw->description];
    pl_clean_name(csrc, sizeof csrc, src, strlen(src));
    snprintf(desc, sizeof desc, "%.60s, calibrated from %.80s", base ? base : "neutral defaults", csrc);
    memcpy(hw->description, desc, sizeof desc);
    snprintf(hw->source, sizeof hw->source, "pipelab calibrate %s %s", o->observations ? "--observations" : "--db", csrc);
}

/* Prints the fit's summary on stderr: each fitted group, the groups left at the base values, and
 * a warning for a fit whose R^2 is below CALIBRATE_R2_WARN (a line that explains little of the
 * times it was fitted to predicts little either). */
static void print_fit(const cost_fit *f, const char *src) {
    fprintf(stderr, "calibrated from %s:\n", src);
    if (f->have_compute)
        fprintf(stderr, "  compute  %zu observations: efficiency %.4g of %.4g FLOP/s, launch %.4g s (R^2 %.4f)\n",
                f->n_compute, f->efficiency, f->peak_flops, f->launch_s, f->compute_r2);
    if (f->have_intra)
        fprintf(stderr, "  intra    %zu observations: latency %.4g s, bandwidth %.4g B/s (R^2 %.4f)\n", f->n_intra,
                f->intra_latency_s, f->intra_bw_Bps, f->intra_r2);
    if (f->have_inter)
        fprintf(stderr, "  inter    %zu observations: latency %.4g s, bandwidth %.4g B/s (R^2 %.4f)\n", f->n_inter,
                f->inter_latency_s, f->inter_bw_Bps, f->inter_r2);
    if (f->skipped[0]) fprintf(stderr, "  left at the base values: %s\n", f->skipped);
    const struct { int have; double r2; const char *what, *how; } fits[] = {
        {f->have_compute, f->compute_r2, "compute", "FLOPs (vary --width, --ffn or --microbatch-size)"},
        {f->have_intra, f->intra_r2, "intra", "bytes"},
        {f->have_inter, f->inter_r2, "inter", "bytes"}};
    for (size_t k = 0; k < sizeof fits / sizeof fits[0]; k++)
        if (fits[k].have && fits[k].r2 < CALIBRATE_R2_WARN)
            fprintf(stderr, "  warning: the %s fit explains %.0f%% of the variation of its times (R^2 %.2f < %.1f): its "
                            "observations span too narrow a range of %s, or are noisy; the file is written, but its "
                            "%s parameters predict little\n",
                    fits[k].what, 100 * fits[k].r2, fits[k].r2, CALIBRATE_R2_WARN, fits[k].how, fits[k].what);
}

/* Runs the command after parsing: base hardware, observations, fit, checks, summary, INI file.
 * Returns an exit code. */
static int run(const opts *o) {
    pl_err e;
    pl_err_clear(&e);
    cost_hw hw;
    const char *base;
    if (base_hardware(o, &hw, &base, &e) != PL_OK) return cli_fail(&e);
    cost_observation *obs = NULL;
    size_t n = 0;
    const char *src = o->observations ? o->observations : o->db;
    int rc = get_observations(o, &hw, &obs, &n);
    if (rc != CLI_OK) return rc;
    int prec = o->precision ? cost_precision_parse(o->precision) : COST_FP32;
    cost_fit f;
    rc = cost_calibrate(obs, n, hw.peak_flops[prec], o->db != NULL, &f, &e);
    free(obs);
    if (rc != PL_OK) {
        pl_err_prefix(&e, "%s: ", src);
        return cli_fail(&e);
    }
    if (f.have_compute && f.efficiency > 1.0) {
        pl_errf(&e, PL_EINPUT,
                "%s: the fitted efficiency %.4g exceeds 1: the %s peak (%.4g FLOP/s) is lower than what was measured; "
                "set device.flops_%s",
                src, f.efficiency, cost_precision_name((cost_precision)prec), hw.peak_flops[prec],
                cost_precision_name((cost_precision)prec));
        return cli_fail(&e);
    }
    apply_fit(o, &f, base, src, &hw);
    if (cost_hw_check(&hw, &e) != PL_OK) {
        pl_err_prefix(&e, "the calibrated hardware is inconsistent: ");
        return cli_fail(&e);
    }
    print_fit(&f, src);
    pl_buf out;
    pl_buf_init(&out);
    if (cost_hw_write(&hw, &out) != PL_OK) {
        pl_buf_free(&out);
        pl_errf(&e, PL_EINTERNAL, "cannot write the hardware file");
        return cli_fail(&e);
    }
    rc = cli_write_output(o->output, &out);
    pl_buf_free(&out);
    return rc;
}

/* Entry point of `pipelab calibrate`; returns an exit code. */
int cli_calibrate(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc < 0) rc = run(&o);
    free(o.sets);
    return rc;
}
