/* cmd_simulate.c: `pipelab simulate`: generate or load a schedule, lower it, run the
 * discrete-event simulator with flag-driven costs or with a model on hardware (the cost-model
 * module through sim_model), print metrics and store the run. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cost.h"
#include "pl_sched.h"
#include "sim.h"
#ifdef PIPELAB_HAVE_PL_RESULTS
#include "store.h"
#endif

/* Fewest iterations an asynchronous schedule with replicated stages runs by default. */
#define REPLICATED_ITERS_MIN 16

static const char help_text[] =
    "usage: pipelab simulate (--kind K --ranks P --microbatches M | --from FILE) [options]\n"
    "\n"
    "Lowers the schedule and runs it in the discrete-event simulator: one compute stream per\n"
    "rank, FIFO links per direction, all-reduces for replicated stages, memory per rank.\n"
    "Times in seconds, sizes in bytes (numbers like 80e9 are fine).\n"
    "\n"
    "schedule:\n"
    "  --kind K --ranks P --microbatches M [--chunks V] [--iterations N] [--recompute none|full]\n"
    "  --from FILE [--legacy-letters]   a .sched file or a PyTorch CSV\n"
    "\n"
    "costs from a model on hardware (instead of the flag-driven costs below):\n"
    "  --model SPEC          uniform:layers=8,fwd_s=1e-3[,bwd_s=,bwd_in_s=,bwd_w_s=,param_bytes=,\n"
    "                        out_bytes=,stash_bytes=,...]  mlp:width=,depth=,microbatch=\n"
    "                        transformer:layers=,hidden=,heads=,seq=,vocab=,microbatch=\n"
    "                        or a file: *.csv profile, otherwise a PipeDream graph.txt\n"
    "  --hardware NAME|FILE  a preset (pipelab partition --list-hardware) or an INI file; the\n"
    "                        device memory becomes the default --capacity (OOM verdict);\n"
    "                        without it: one node, free links, no FLOP rates\n"
    "  --set KEY=VALUE       override a hardware key (repeatable), e.g. topology.nodes=2,\n"
    "                        link.inter.bandwidth=12.5e9; unknown keys are errors\n"
    "  --partition FILE      stage -> layers and replicas, from pipelab partition -o FILE; its\n"
    "                        stage count must equal the schedule's\n"
    "  --split BOUNDS        layer bounds 0,4,8,12 or sizes =4,4,4 (one stage each)\n"
    "  --balance             balanced split (slowest stage's F+I+W minimized)\n"
    "                        (default: an even split of the layers over the schedule's stages)\n"
    "  --precision P         fp32 tf32 fp16 bf16 for FLOP-based times (default: fp16 for\n"
    "                        2-byte models, else fp32)\n"
    "  --microbatch-size N   also scales the model's times and activations (default: the model's)\n"
    "  also with --model: --optimizer-bytes, --w-stash-fraction, --capacity (overrides the\n"
    "  device memory; 0 = no verdict), --replicas and --replicas-stage (override the partition's).\n"
    "  Ranks take devices in order (a rank of a stage with R replicas takes R devices); a device's\n"
    "  node is device / devices_per_node, which picks the intra or inter link.\n"
    "\n"
    "compute (uniform; one fixed model across schedules by default, see --time-per):\n"
    "  --time-per rank|stage\n"
    "                        what --tf/--tb/--ti/--tw/--tstep, --stash-bytes and --param-bytes\n"
    "                        describe. rank (default): a rank's share of the model, divided over\n"
    "                        the stages it holds (interleaved v = 2: tf/2 per stage), so\n"
    "                        schedules with different chunk counts compare one model. stage:\n"
    "                        every stage gets them whole (a v-chunk run is a v-times larger model)\n"
    "  --tf S                forward time (default 1)\n"
    "  --tb S                full backward time (default 2 tf, or ti + tw)\n"
    "  --ti S --tw S         split backward: input and weight parts (B = I + W)\n"
    "  --tstep S             optimizer step per stage (default 0)\n"
    "  --stage-costs FILE    per-stage overrides, CSV with header naming columns among\n"
    "                        stage,tf,tb,ti,tw,bytes,stash_bytes,w_stash_bytes,param_bytes;\n"
    "                        one row per stage, empty cell = uniform value, '#' = comment;\n"
    "                        its values are per stage whatever --time-per says\n"
    "communication:\n"
    "  --tcomm S             fixed time per transfer (overrides the bandwidth model)\n"
    "  --bytes B             boundary activation bytes per microbatch (default 0)\n"
    "  --bandwidth BPS --latency S               intra-node link (default free)\n"
    "  --inter-bandwidth BPS --inter-latency S   inter-node link\n"
    "  --ranks-per-node N    topology: ranks r and q share a node when r/N == q/N (0 = one node)\n"
    "  --shared-inter-link   one link per node pair and direction, shared (contention)\n"
    "  --blocking-comm       sends, receives and all-reduces hold the compute stream\n"
    "data parallelism:\n"
    "  --replicas N          every stage replicated N times (ring all-reduce per REDUCE_GRAD)\n"
    "  --replicas-stage S=N  stage S replicated N times (repeatable), e.g. PipeDream's 15-1\n"
    "  --allreduce-inter     all-reduces use the inter-node link\n"
    "memory:\n"
    "  --stash-bytes B       activations stashed per microbatch per stage\n"
    "  --w-stash-fraction X  part of the stash held from I until W (default 0.5)\n"
    "  --param-bytes B       parameter bytes per stage\n"
    "  --dtype-bytes B       bytes per parameter (default 4)\n"
    "  --optimizer-bytes B   optimizer state bytes per parameter (default 8)\n"
    "  --capacity B          device memory: report an OOM verdict per rank\n"
    "  --fail-on-oom         exit 1 when a rank exceeds --capacity\n"
    "metrics and output:\n"
    "  --microbatch-size N   samples per microbatch, for throughput (default 1)\n"
    "  --cv X --seed N --repeat R   stochastic compute: lognormal factors with that coefficient\n"
    "                        of variation; mean and spread over R runs (seeds N, N+1, ...)\n"
    "  --trace               print the per-action timeline (and store it)\n"
    "  --trace-json FILE     write a Chrome trace (open in https://ui.perfetto.dev)\n"
    "  --format table|csv|json   output format (default table)\n"
    "  --tag NAME            label stored with the run\n"
    "  --db PATH             results database (default results/out/pipelab.db)\n"
    "  --no-db               do not store the run\n"
    "  --max-memory SIZE     memory pipelab may use (8e9, 16GiB; default: the physical memory or\n"
    "                        ulimit -v, or $PIPELAB_MAX_MEMORY); larger runs are refused up front\n"
    "\n"
    "exit status: 0 ok, 1 bad input or OOM with --fail-on-oom, 2 bad usage\n";

enum { O_TF = 1000, O_TB, O_TI, O_TW, O_TIMEPER,
       O_TSTEP, O_STAGECOSTS, O_TCOMM, O_BYTES, O_BW, O_LAT, O_IBW, O_ILAT, O_RPN, O_SHARED, O_BLOCK,
       O_REPL, O_REPLS, O_ARINTER, O_STASH, O_WFRAC, O_PARAM, O_DTYPE, O_OPT, O_CAP, O_FAILOOM, O_MBS,
       O_CV, O_SEED, O_REPEAT, O_TRACE, O_TRACEJSON, O_FORMAT, O_TAG, O_DB, O_NODB, O_HELP, O_MODEL, O_HW,
       O_SET, O_PARTITION, O_SPLIT, O_BALANCE, O_PREC, O_MAXMEM };

static const struct option long_opts[] = {
    CLI_SCHED_LONG_OPTS,
    {"time-per", required_argument, 0, O_TIMEPER}, {"tf", required_argument, 0, O_TF}, {"tb", required_argument, 0, O_TB},
    {"ti", required_argument, 0, O_TI}, {"tw", required_argument, 0, O_TW},
    {"tstep", required_argument, 0, O_TSTEP}, {"stage-costs", required_argument, 0, O_STAGECOSTS},
    {"tcomm", required_argument, 0, O_TCOMM}, {"bytes", required_argument, 0, O_BYTES},
    {"bandwidth", required_argument, 0, O_BW}, {"latency", required_argument, 0, O_LAT},
    {"inter-bandwidth", required_argument, 0, O_IBW}, {"inter-latency", required_argument, 0, O_ILAT},
    {"ranks-per-node", required_argument, 0, O_RPN}, {"shared-inter-link", no_argument, 0, O_SHARED},
    {"blocking-comm", no_argument, 0, O_BLOCK}, {"replicas", required_argument, 0, O_REPL},
    {"replicas-stage", required_argument, 0, O_REPLS}, {"allreduce-inter", no_argument, 0, O_ARINTER},
    {"stash-bytes", required_argument, 0, O_STASH}, {"w-stash-fraction", required_argument, 0, O_WFRAC},
    {"param-bytes", required_argument, 0, O_PARAM}, {"dtype-bytes", required_argument, 0, O_DTYPE},
    {"optimizer-bytes", required_argument, 0, O_OPT}, {"capacity", required_argument, 0, O_CAP},
    {"fail-on-oom", no_argument, 0, O_FAILOOM}, {"microbatch-size", required_argument, 0, O_MBS},
    {"cv", required_argument, 0, O_CV}, {"seed", required_argument, 0, O_SEED},
    {"repeat", required_argument, 0, O_REPEAT}, {"trace", no_argument, 0, O_TRACE},
    {"trace-json", required_argument, 0, O_TRACEJSON}, {"format", required_argument, 0, O_FORMAT},
    {"tag", required_argument, 0, O_TAG}, {"db", required_argument, 0, O_DB},
    {"no-db", no_argument, 0, O_NODB}, {"help", no_argument, 0, O_HELP},
    {"model", required_argument, 0, O_MODEL}, {"hardware", required_argument, 0, O_HW},
    {"set", required_argument, 0, O_SET}, {"partition", required_argument, 0, O_PARTITION},
    {"split", required_argument, 0, O_SPLIT}, {"balance", no_argument, 0, O_BALANCE},
    {"precision", required_argument, 0, O_PREC}, {"max-memory", required_argument, 0, O_MAXMEM}, {0, 0, 0, 0},
};

#define MAX_REPL_FLAGS 256
#define MAX_SET_FLAGS 256

/* The cost-model side of a run (--model): what was loaded and the adapter over it. */
typedef struct model_ctx {
    cost_model *m;
    cost_hw hw;
    int have_hw;           /* --hardware given */
    cost_opts co;
    cost_partition *p;     /* the partition simulated */
    const char *psource;   /* "even", "balance", "split" or "file" */
    sim_model sm;
} model_ctx;

typedef struct opts {
    cli_sched_args a;
    const char *stage_costs, *trace_json, *format, *tag, *db;
    sim_basic b;
    sim_time_per time_per; /* what the uniform flag values describe */
    double share;          /* the part of them each stage gets (sim_time_per_share) */
    sim_config c;
    int replicas_all, have_replicas_all;
    int nrepl, repl_stage[MAX_REPL_FLAGS], repl_n[MAX_REPL_FLAGS];
    int fail_on_oom, repeat, trace, no_db;
    /* costs from a model (--model); basic_flag / model_flag name the first flag of each source */
    const char *model, *hardware, *partition, *split, *precision, *basic_flag, *model_flag;
    const char *sets[MAX_SET_FLAGS];
    int nsets, balance, have_mbs, have_wfrac, have_optb, have_cap;
    const model_ctx *mc;   /* set once the model side is built (params_json, table) */
} opts;

/* Returns the long name of option code c ("--tf"), for messages. */
static const char *opt_name(int c) {
    static char buf[64];
    for (const struct option *x = long_opts; x->name; x++)
        if (x->val == c) {
            snprintf(buf, sizeof buf, "--%s", x->name);
            return buf;
        }
    return "?";
}

/* Returns 1 when option code c sets a flag-driven cost (meaningless with --model). */
static int is_basic_flag(int c) {
    switch (c) {
    case O_TF: case O_TB: case O_TI: case O_TW: case O_TIMEPER: case O_TSTEP: case O_STAGECOSTS: case O_TCOMM: case O_BYTES:
    case O_BW: case O_LAT: case O_IBW: case O_ILAT: case O_RPN: case O_ARINTER: case O_STASH: case O_PARAM:
    case O_DTYPE:
        return 1;
    default:
        return 0;
    }
}

/* Returns 1 when option code c only makes sense with --model. */
static int is_model_flag(int c) {
    return c == O_HW || c == O_SET || c == O_PARTITION || c == O_SPLIT || c == O_BALANCE || c == O_PREC;
}

/* Parses a non-negative finite number for flag into *out; returns 0, or -1 after printing a
 * usage error (exit 2: a malformed or negative value is bad usage, DESIGN.md §8). */
static int num_arg(const char *flag, const char *val, double *out) {
    return cli_num_arg("simulate", flag, val, 0, HUGE_VAL, out);
}

/* Parses a link bandwidth (a finite number > 0: a link of bandwidth 0 never delivers); returns 0 or -1. */
static int bw_arg(const char *flag, const char *val, double *out) {
    if (num_arg(flag, val, out)) return -1;
    if (*out > 0) return 0;
    cli_usage_error("simulate", "%s: must be > 0 bytes per second (got '%s'): a link of bandwidth 0 never delivers; for free "
                    "transfers leave it out or give --tcomm 0", flag, val);
    return -1;
}

/* Parses a byte count (a non-negative number below 2^63, rounded) into *out; returns 0 or -1. */
static int bytes_arg(const char *flag, const char *val, int64_t *out) {
    double v;
    if (cli_num_arg("simulate", flag, val, 0, 9.2e18, &v)) return -1;
    *out = (int64_t)llround(v);
    return 0;
}

/* Parses argv into o; returns -1 to continue, or an exit code. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    sim_basic_init(&o->b);
    sim_config_init(&o->c);
    o->format = "table";
    o->repeat = 1;
    o->replicas_all = 1;
    opterr = 0;
    optind = 1;
    int c;
    static char basic_name[64], model_name[64];
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        if (is_basic_flag(c) && !o->basic_flag) o->basic_flag = strcpy(basic_name, opt_name(c));
        if (is_model_flag(c) && !o->model_flag) o->model_flag = strcpy(model_name, opt_name(c));
        int src = cli_sched_opt("simulate", c, optarg, &o->a, &cli_sched_gen_limits);
        if (src == CLI_EUSAGE) return src;
        if (src == CLI_OK) continue;
        switch (c) {
        case O_TIMEPER:
            if (sim_time_per_parse(optarg, &o->time_per))
                return cli_usage_error("simulate", "--time-per: must be rank or stage (got '%s')", optarg);
            break;
        case O_TF: if (num_arg("--tf", optarg, &o->b.tf_s)) return CLI_EUSAGE; break;
        case O_TB: if (num_arg("--tb", optarg, &o->b.tb_s)) return CLI_EUSAGE; break;
        case O_TI: if (num_arg("--ti", optarg, &o->b.ti_s)) return CLI_EUSAGE; break;
        case O_TW: if (num_arg("--tw", optarg, &o->b.tw_s)) return CLI_EUSAGE; break;
        case O_TSTEP: if (num_arg("--tstep", optarg, &o->b.tstep_s)) return CLI_EUSAGE; break;
        case O_STAGECOSTS: o->stage_costs = optarg; break;
        case O_TCOMM: if (num_arg("--tcomm", optarg, &o->b.tcomm_s)) return CLI_EUSAGE; break;
        case O_BYTES: if (bytes_arg("--bytes", optarg, &o->b.bytes)) return CLI_EUSAGE; break;
        case O_BW: if (bw_arg("--bandwidth", optarg, &o->b.bandwidth_Bps)) return CLI_EUSAGE; break;
        case O_LAT: if (num_arg("--latency", optarg, &o->b.latency_s)) return CLI_EUSAGE; break;
        case O_IBW: if (bw_arg("--inter-bandwidth", optarg, &o->b.inter_bandwidth_Bps)) return CLI_EUSAGE; break;
        case O_ILAT: if (num_arg("--inter-latency", optarg, &o->b.inter_latency_s)) return CLI_EUSAGE; break;
        case O_RPN: if (cli_int_arg("simulate", "--ranks-per-node", optarg, 0, SCHED_MAX_RANKS, &o->b.ranks_per_node)) return CLI_EUSAGE; break;
        case O_SHARED: o->c.shared_inter_link = 1; break;
        case O_BLOCK: o->c.blocking_comm = 1; break;
        case O_REPL: if (cli_int_arg("simulate", "--replicas", optarg, 1, 1 << 20, &o->replicas_all)) return CLI_EUSAGE; o->have_replicas_all = 1; break;
        case O_REPLS: {
            const char *eq = strchr(optarg, '=');
            long st, n;
            char sbuf[32];
            if (!eq || (size_t)(eq - optarg) >= sizeof sbuf) return cli_usage_error("simulate", "--replicas-stage: needs S=N (got '%s')", optarg);
            memcpy(sbuf, optarg, (size_t)(eq - optarg));
            sbuf[eq - optarg] = '\0';
            if (pl_parse_long(sbuf, 0, SCHED_MAX_STAGES, &st) || pl_parse_long(eq + 1, 1, 1 << 20, &n))
                return cli_usage_error("simulate", "--replicas-stage: needs S=N with S >= 0 and N >= 1 (got '%s')", optarg);
            if (o->nrepl == MAX_REPL_FLAGS) return cli_usage_error("simulate", "too many --replicas-stage flags");
            o->repl_stage[o->nrepl] = (int)st;
            o->repl_n[o->nrepl++] = (int)n;
            break;
        }
        case O_ARINTER: o->b.allreduce_inter = 1; break;
        case O_STASH: if (bytes_arg("--stash-bytes", optarg, &o->b.stash_bytes)) return CLI_EUSAGE; break;
        case O_WFRAC: if (cli_num_arg("simulate", "--w-stash-fraction", optarg, 0, 1, &o->b.w_stash_fraction)) return CLI_EUSAGE; o->have_wfrac = 1; break;
        case O_PARAM: if (bytes_arg("--param-bytes", optarg, &o->b.param_bytes)) return CLI_EUSAGE; break;
        case O_DTYPE: if (num_arg("--dtype-bytes", optarg, &o->c.dtype_bytes)) return CLI_EUSAGE; break;
        case O_OPT: if (num_arg("--optimizer-bytes", optarg, &o->c.optimizer_bytes_per_param)) return CLI_EUSAGE; o->have_optb = 1; break;
        case O_CAP: if (bytes_arg("--capacity", optarg, &o->c.capacity_bytes)) return CLI_EUSAGE; o->have_cap = 1; break;
        case O_FAILOOM: o->fail_on_oom = 1; break;
        case O_MBS: if (cli_int_arg("simulate", "--microbatch-size", optarg, 1, 1 << 30, &o->c.microbatch_size)) return CLI_EUSAGE; o->have_mbs = 1; break;
        case O_CV: if (cli_num_arg("simulate", "--cv", optarg, 0, 100, &o->c.cv)) return CLI_EUSAGE; break;
        case O_SEED: {
            long sd;
            if (cli_long_arg("simulate", "--seed", optarg, 0, 0x7fffffffffffffffL, &sd)) return CLI_EUSAGE;
            o->c.seed = (uint64_t)sd;
            break;
        }
        case O_REPEAT: if (cli_int_arg("simulate", "--repeat", optarg, 1, 1000000, &o->repeat)) return CLI_EUSAGE; break;
        case O_TRACE: o->trace = 1; break;
        case O_TRACEJSON: o->trace_json = optarg; break;
        case O_FORMAT: o->format = optarg; break;
        case O_TAG: o->tag = optarg; break;
        case O_DB: o->db = optarg; break;
        case O_NODB: o->no_db = 1; break;
        case O_MAXMEM: if (cli_max_memory_arg("simulate", optarg)) return CLI_EUSAGE; break;
        case O_HELP: fputs(help_text, stdout); return CLI_OK;
        case O_MODEL: o->model = optarg; break;
        case O_HW: o->hardware = optarg; break;
        case O_SET:
            if (o->nsets == MAX_SET_FLAGS) return cli_usage_error("simulate", "too many --set flags");
            if (!strchr(optarg, '=')) return cli_usage_error("simulate", "--set needs KEY=VALUE (got '%s')", optarg);
            o->sets[o->nsets++] = optarg;
            break;
        case O_PARTITION: o->partition = optarg; break;
        case O_SPLIT: o->split = optarg; break;
        case O_BALANCE: o->balance = 1; break;
        case O_PREC:
            if (cost_precision_parse(optarg) < 0)
                return cli_usage_error("simulate", "--precision must be fp32, tf32, fp16 or bf16 (got '%s')", optarg);
            o->precision = optarg;
            break;
        default: return cli_usage_error("simulate", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("simulate", "unexpected argument '%s'", argv[optind]);
    int rc = cli_sched_check("simulate", &o->a);
    if (rc >= 0) return rc;
    if (strcmp(o->format, "table") && strcmp(o->format, "csv") && strcmp(o->format, "json"))
        return cli_usage_error("simulate", "--format must be table, csv or json");
    if (o->model && o->basic_flag)
        return cli_usage_error("simulate", "%s is a flag-driven cost; with --model the costs come from the model and "
                               "the hardware (use --hardware and --set instead)", o->basic_flag);
    if (!o->model && o->model_flag) return cli_usage_error("simulate", "%s needs --model", o->model_flag);
    if (!!o->partition + !!o->split + o->balance > 1)
        return cli_usage_error("simulate", "give at most one of --partition, --split and --balance");
    if (o->nsets && !o->hardware)
        return cli_usage_error("simulate", "--set needs --hardware (the preset or INI file it overrides)");
    if (o->fail_on_oom && o->c.capacity_bytes <= 0 && !o->hardware)
        return cli_usage_error("simulate", "--fail-on-oom needs --capacity (or --model with --hardware)");
    if (o->c.dtype_bytes <= 0) return cli_usage_error("simulate", "--dtype-bytes: must be > 0");
    o->c.ranks_per_node = o->b.ranks_per_node;
    return -1;
}

/* Appends the JSON object of a model run's parameters: the model (spec, name, layers), the
 * hardware (name or file, --set overrides, the effective values), the partition (source, layer
 * bounds, replicas) and the cost options, plus the run configuration shared with flag runs. */
static void params_json_model(const opts *o, const model_ctx *mc, pl_buf *b) {
    const cost_hw *hw = &mc->sm.hw;
    pl_buf_puts(b, "{\"costs\":\"model\",\"model\":{\"spec\":");
    pl_buf_json_string(b, o->model);
    pl_buf_puts(b, ",\"name\":");
    pl_buf_json_string(b, mc->m->name);
    pl_buf_printf(b, ",\"source\":\"%s\",\"layers\":%d,\"microbatch_size\":%d,\"dtype_bytes\":%d,\"params\":%.9g}",
                  mc->m->source, mc->m->n, mc->m->microbatch_size, mc->m->dtype_bytes, cost_model_params(mc->m));
    pl_buf_puts(b, ",\"hardware\":{\"spec\":");
    pl_buf_json_string(b, o->hardware ? o->hardware : "");
    pl_buf_puts(b, ",\"name\":");
    pl_buf_json_string(b, hw->name);
    pl_buf_puts(b, ",\"set\":[");
    for (int k = 0; k < o->nsets; k++) {
        if (k) pl_buf_putc(b, ',');
        pl_buf_json_string(b, o->sets[k]);
    }
    pl_buf_printf(b, "],\"nodes\":%d,\"devices_per_node\":%d,\"peak_flops\":%.9g,\"efficiency\":%.9g,"
                     "\"memory_bytes\":%.9g,\"memory_bandwidth_Bps\":%.9g,\"launch_s\":%.9g,\"intra_bandwidth_Bps\":%.9g,"
                     "\"intra_latency_s\":%.9g,\"inter_bandwidth_Bps\":%.9g,\"inter_latency_s\":%.9g}",
                  hw->nodes, hw->devices_per_node, hw->peak_flops[mc->co.precision], hw->efficiency, hw->memory_bytes,
                  hw->memory_bandwidth_Bps, hw->launch_s, hw->intra_bandwidth_Bps, hw->intra_latency_s,
                  hw->inter_bandwidth_Bps, hw->inter_latency_s);
    pl_buf_printf(b, ",\"partition\":{\"source\":\"%s\",\"file\":", mc->psource);
    pl_buf_json_string(b, o->partition ? o->partition : "");
    pl_buf_puts(b, ",\"bounds\":[");
    for (int q = 0; q <= mc->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", mc->sm.bound[q]);
    pl_buf_puts(b, "],\"replicas\":[");
    for (int q = 0; q < mc->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", mc->sm.replicas[q]);
    pl_buf_printf(b, "]},\"microbatch_size\":%d,\"precision\":\"%s\",\"optimizer_bytes\":%.9g,\"w_stash_fraction\":%.9g,"
                     "\"grad_bytes_per_param\":%.9g,\"shared_inter_link\":%d,\"blocking_comm\":%d,\"capacity_bytes\":%lld,"
                     "\"cv\":%.9g,\"repeat\":%d}",
                  mc->co.microbatch_size, cost_precision_name(mc->co.precision), mc->co.optimizer_bytes_per_param,
                  mc->co.w_stash_fraction, mc->co.grad_bytes_per_param, o->c.shared_inter_link, o->c.blocking_comm,
                  (long long)o->c.capacity_bytes, o->c.cv, o->repeat);
}

/* Returns path when it names a regular file (a --model or --hardware value can be a preset or
 * a spec instead), else NULL. */
static const char *file_or_null(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) ? path : NULL;
}

static void params_json_costs(const opts *o, pl_buf *b);

/* Appends the JSON object of the cost and hardware parameters (stored with the run), with the
 * files the run read (cli_inputs_json) as its last key. */
static void params_json(const opts *o, pl_buf *b) {
    if (o->mc) params_json_model(o, o->mc, b);
    else params_json_costs(o, b);
    if (b->len && b->data[b->len - 1] == '}') { /* reopen the object for the inputs */
        b->len--;
        b->data[b->len] = 0;
        pl_buf_putc(b, ',');
        const char *roles[] = {"schedule", "model", "hardware", "partition"};
        const char *paths[] = {o->a.from, file_or_null(o->model), file_or_null(o->hardware), o->partition};
        cli_inputs_json(b, roles, paths, 4);
        pl_buf_putc(b, '}');
    }
}

/* The flag-driven costs' part of params_json. */
static void params_json_costs(const opts *o, pl_buf *b) {
    pl_buf_printf(b, "{\"costs\":\"flags\",\"time_per\":\"%s\",\"stage_share\":%.9g,\"tf_s\":%.9g,\"tb_s\":%.9g,\"ti_s\":%.9g,\"tw_s\":%.9g,\"tstep_s\":%.9g,\"tcomm_s\":%.9g,"
                     "\"bytes\":%lld,\"bandwidth_Bps\":%.9g,\"latency_s\":%.9g,\"inter_bandwidth_Bps\":%.9g,"
                     "\"inter_latency_s\":%.9g,\"ranks_per_node\":%d,\"shared_inter_link\":%d,\"blocking_comm\":%d,"
                     "\"stash_bytes\":%lld,\"w_stash_fraction\":%.9g,\"param_bytes\":%lld,\"dtype_bytes\":%.9g,"
                     "\"optimizer_bytes\":%.9g,\"capacity_bytes\":%lld,\"microbatch_size\":%d,\"cv\":%.9g,"
                     "\"repeat\":%d,\"replicas\":%d,\"stage_costs\":",
                  sim_time_per_name(o->time_per), o->share, o->b.tf_s, o->b.tb_s, o->b.ti_s, o->b.tw_s, o->b.tstep_s,
                  o->b.tcomm_s, (long long)o->b.bytes,
                  o->b.bandwidth_Bps, o->b.latency_s, o->b.inter_bandwidth_Bps, o->b.inter_latency_s, o->b.ranks_per_node,
                  o->c.shared_inter_link, o->c.blocking_comm, (long long)o->b.stash_bytes, o->b.w_stash_fraction,
                  (long long)o->b.param_bytes, o->c.dtype_bytes, o->c.optimizer_bytes_per_param,
                  (long long)o->c.capacity_bytes, o->c.microbatch_size, o->c.cv, o->repeat, o->replicas_all);
    pl_buf_json_string(b, o->stage_costs ? o->stage_costs : "");
    pl_buf_puts(b, ",\"replicas_stage\":[");
    for (int i = 0; i < o->nrepl; i++) pl_buf_printf(b, "%s[%d,%d]", i ? "," : "", o->repl_stage[i], o->repl_n[i]);
    pl_buf_puts(b, "]}");
}

/* Writes the table's line that says what the flag-driven compute times describe. */
static void out_table_time_per(const opts *o, pl_buf *b) {
    pl_buf_printf(b, "costs              flags, --time-per %s: ", sim_time_per_name(o->time_per));
    if (o->time_per == SIM_TIME_PER_STAGE || o->share == 1)
        pl_buf_printf(b, "each stage runs --tf %g%s\n", o->b.tf_s,
                      o->time_per == SIM_TIME_PER_STAGE ? "" : " (one stage per rank)");
    else
        pl_buf_printf(b, "a rank's share over its stages, each stage runs %.6g of it (--tf %g: %.6g per stage)\n",
                      o->share, o->b.tf_s, o->b.tf_s * o->share);
}

/* Writes the human table. */
static void out_table(const opts *o, const sched *s, const sim_result *r, const sim_repeat_stats *st, pl_buf *b) {
    pl_buf_printf(b, "schedule           %s: %d ranks, %d stages, %d microbatches, %d iteration%s, weights %s, recompute %s\n",
                  s->kind, s->ranks, s->stages, s->microbatches, r->iterations, r->iterations == 1 ? "" : "s",
                  sched_weights_name(s->weights), sched_recompute_name(s->recompute));
    if (o->mc) {
        const model_ctx *mc = o->mc;
        pl_buf_printf(b, "costs              model %s (%s, %d layers, microbatch %d, %s) on %s (%d x %d devices)\n",
                      mc->m->name, mc->m->source, mc->m->n, mc->co.microbatch_size, cost_precision_name(mc->co.precision),
                      mc->sm.hw.name[0] ? mc->sm.hw.name : "-", mc->sm.hw.nodes, mc->sm.hw.devices_per_node);
        pl_buf_printf(b, "partition          %s%s%s: bounds ", mc->psource, o->partition ? " " : "",
                      o->partition ? o->partition : "");
        for (int q = 0; q <= mc->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", mc->sm.bound[q]);
        pl_buf_puts(b, ", replicas ");
        for (int q = 0; q < mc->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "-" : "", mc->sm.replicas[q]);
        pl_buf_putc(b, '\n');
    } else
        out_table_time_per(o, b);
    pl_buf_printf(b, "actions            %zu (%zu events)\n", r->actions, r->events);
    pl_buf_printf(b, "makespan_s         %.9g\n", r->makespan_s);
    pl_buf_printf(b, "iteration_time_s   %.9g%s\n", r->iteration_time_s, r->iterations > 1 ? "  (steady state, first iteration left out)" : "");
    pl_buf_printf(b, "throughput         %.9g samples/s\n", r->throughput);
    if (r->steady_state)
        pl_buf_printf(b, "window_s           %.9g  (steady state: iterations 1..%d, where busy, idle and bubble are measured)\n",
                      r->window_s, r->iterations - 1);
    else
        pl_buf_printf(b, "window_s           %.9g  (the whole run, where busy, idle and bubble are measured)\n", r->window_s);
    pl_buf_printf(b, "bubble_fraction    %.6f  (idle / (ranks x window))\n", r->bubble_fraction);
    pl_buf_printf(b, "idle_s             %.9g  (idle seconds in the window, summed over ranks)\n", r->idle_s);
    pl_buf_printf(b, "zb_bubble_rate     %.6f  (Zero Bubble paper: (cost - m(TF+TB+TW)) / cost, worst rank%s)\n",
                  r->zb_bubble_rate, r->steady_state ? "" : ", over its span");
    pl_buf_printf(b, "comm_s             %.9g  (sum of transfer times)\n", r->comm_s);
    pl_buf_printf(b, "peak_mem_bytes     %lld", (long long)r->peak_bytes);
    if (o->c.capacity_bytes > 0)
        pl_buf_printf(b, "  capacity %lld: %s", (long long)o->c.capacity_bytes, r->oom ? "OUT OF MEMORY" : "fits");
    pl_buf_putc(b, '\n');
    if (st && st->repeat > 1)
        pl_buf_printf(b, "stochastic         cv %.4g over %d runs: iteration_time_s mean %.9g stddev %.9g min %.9g max %.9g;"
                         " throughput mean %.9g stddev %.9g; bubble_fraction mean %.6f stddev %.6f\n",
                      o->c.cv, st->repeat, st->iter_mean_s, st->iter_sd_s, st->iter_min_s, st->iter_max_s, st->thr_mean,
                      st->thr_sd, st->bubble_fraction_mean, st->bubble_fraction_sd);
    pl_buf_printf(b, "\n%-5s %14s %14s %15s %14s %14s %16s %6s %8s %4s\n", "rank", "busy_s", "idle_s", "bubble_fraction", "comm_s",
                  "reduce_s", "peak_bytes", "stash", "versions", "oom");
    for (int q = 0; q < s->ranks; q++) {
        const sim_rank_stats *x = &r->rank[q];
        pl_buf_printf(b, "%-5d %14.9g %14.9g %15.6f %14.9g %14.9g %16lld %6d %8d %4s\n", q, x->busy_s, x->idle_s, x->bubble_fraction,
                      x->comm_s, x->reduce_s, (long long)x->peak_bytes, x->peak_stash_mbs, x->peak_weight_versions,
                      x->oom ? "yes" : "no");
    }
}

/* Writes CSV: one row per rank with the run's metrics repeated. */
static void out_csv(const opts *o, const sched *s, const sim_result *r, const sim_repeat_stats *st, pl_buf *b) {
    const char *time_per = o->mc ? "model" : sim_time_per_name(o->time_per);
    pl_buf_puts(b, "kind,ranks,stages,microbatches,iterations,makespan_s,iteration_time_s,throughput,window_s,bubble_fraction,idle_s,zb_bubble_rate,"
                   "comm_s,peak_mem_bytes,oom,repeat,iteration_time_mean_s,iteration_time_stddev_s,rank,busy_s,idle_s,"
                   "rank_bubble_fraction,rank_comm_s,rank_reduce_s,rank_peak_bytes,peak_stash_mbs,peak_weight_versions,rank_oom,"
                   "time_per\n");
    for (int q = 0; q < s->ranks; q++) {
        const sim_rank_stats *x = &r->rank[q];
        pl_buf_printf(b, "%s,%d,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%d,%d,%.9g,%.9g,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%d,%d,%d,%s\n",
                      s->kind, s->ranks, s->stages, s->microbatches, r->iterations, r->makespan_s, r->iteration_time_s,
                      r->throughput, r->window_s, r->bubble_fraction, r->idle_s, r->zb_bubble_rate, r->comm_s,
                      (long long)r->peak_bytes, r->oom, st->repeat, st->iter_mean_s, st->iter_sd_s, q, x->busy_s, x->idle_s,
                      x->bubble_fraction, x->comm_s, x->reduce_s,
                      (long long)x->peak_bytes, x->peak_stash_mbs, x->peak_weight_versions, x->oom, time_per);
    }
}

/* Writes JSON: the run's metrics and a per-rank array. */
static void out_json(const opts *o, const sched *s, const sim_result *r, const sim_repeat_stats *st, pl_buf *b) {
    pl_buf_printf(b, "{\"kind\":\"%s\",\"ranks\":%d,\"stages\":%d,\"microbatches\":%d,\"iterations\":%d,\"actions\":%zu,"
                     "\"makespan_s\":%.9g,\"iteration_time_s\":%.9g,\"throughput\":%.9g,\"window_s\":%.9g,\"steady_state\":%s,"
                     "\"bubble_fraction\":%.9g,\"idle_s\":%.9g,\"zb_bubble_rate\":%.9g,"
                     "\"comm_s\":%.9g,\"peak_mem_bytes\":%lld,\"oom\":%s,\"repeat\":%d,\"iteration_time_mean_s\":%.9g,"
                     "\"iteration_time_stddev_s\":%.9g,\"throughput_mean\":%.9g,\"throughput_stddev\":%.9g,\"params\":",
                  s->kind, s->ranks, s->stages, s->microbatches, r->iterations, r->actions, r->makespan_s,
                  r->iteration_time_s, r->throughput, r->window_s, r->steady_state ? "true" : "false", r->bubble_fraction,
                  r->idle_s, r->zb_bubble_rate, r->comm_s, (long long)r->peak_bytes,
                  r->oom ? "true" : "false", st->repeat, st->iter_mean_s, st->iter_sd_s, st->thr_mean, st->thr_sd);
    params_json(o, b);
    pl_buf_puts(b, ",\"per_rank\":[");
    for (int q = 0; q < s->ranks; q++) {
        const sim_rank_stats *x = &r->rank[q];
        pl_buf_printf(b, "%s{\"rank\":%d,\"busy_s\":%.9g,\"idle_s\":%.9g,\"bubble_fraction\":%.9g,\"comm_s\":%.9g,\"reduce_s\":%.9g,"
                         "\"peak_bytes\":%lld,\"peak_stash_mbs\":%d,\"peak_weight_versions\":%d,\"oom\":%s}",
                      q ? "," : "", q, x->busy_s, x->idle_s, x->bubble_fraction, x->comm_s, x->reduce_s, (long long)x->peak_bytes,
                      x->peak_stash_mbs, x->peak_weight_versions, x->oom ? "true" : "false");
    }
    pl_buf_puts(b, "]}\n");
}

#ifdef PIPELAB_HAVE_PL_RESULTS
/* Stores the run (with per-action rows when traced) in db, opened before simulating so that a
 * database that cannot take the run is refused before any work. Returns an exit code. */
static int store_it(store *db, const opts *o, int argc, char **argv, const sched *s, const sim_result *r,
                    const sim_repeat_stats *st) {
    pl_err e;
    pl_err_clear(&e);
    pl_buf cmd, pj;
    pl_buf_init(&cmd);
    pl_buf_init(&pj);
    pl_buf_puts(&cmd, "pipelab");
    for (int i = 0; i < argc; i++) pl_buf_printf(&cmd, " %s", argv[i]);
    params_json(o, &pj);
    store_run run;
    memset(&run, 0, sizeof run);
    run.kind = "simulated";
    run.tag = o->tag;
    run.cmdline = cmd.data;
    run.schedule = s->kind;
    run.ranks = s->ranks;
    run.stages = s->stages;
    run.microbatches = s->microbatches;
    run.chunks = s->chunks;
    run.iterations = r->iterations;
    run.weights_policy = sched_weights_name(s->weights);
    run.recompute_policy = sched_recompute_name(s->recompute);
    run.params_json = pj.data;
    run.seed = o->c.seed;
    run.iteration_time_s = st->repeat > 1 ? st->iter_mean_s : r->iteration_time_s;
    run.throughput_samples_s = st->repeat > 1 ? st->thr_mean : r->throughput;
    run.idle_s = r->idle_s;
    run.bubble_fraction = r->bubble_fraction; /* the first run's, like idle_s and the rank rows */
    run.zb_bubble_rate = r->zb_bubble_rate;
    run.comm_time_s = r->comm_s;
    run.peak_mem_bytes = r->peak_bytes;
    run.oom = r->oom;
    run.repetitions = st->repeat;
    run.iteration_time_stddev_s = st->iter_sd_s;
    store_rank_metric *rm = pl_calloc((size_t)s->ranks, sizeof *rm);
    cli_op_rows ops = {0};
    int rc = CLI_OK;
    if (!rm) { pl_errf(&e, PL_ENOMEM, "out of memory"); rc = cli_fail(&e); goto out; }
    for (int q = 0; q < s->ranks; q++) {
        const sim_rank_stats *x = &r->rank[q];
        rm[q] = (store_rank_metric){q, x->busy_s, x->idle_s, x->bubble_fraction, x->comm_s, x->peak_bytes};
    }
    if (r->trace && cli_op_rows_trace(&ops, s, r->trace, &e) != PL_OK) { rc = cli_fail(&e); goto out; }
    if (store_write_run(db, &run, rm, s->ranks, ops.ops, ops.n, NULL, &e) != PL_OK) rc = cli_fail(&e);
out:
    free(rm);
    cli_op_rows_free(&ops);
    pl_buf_free(&cmd);
    pl_buf_free(&pj);
    return rc;
}
#endif

/* Loads or generates, validates and lowers the schedule; NULL and e on error. */
static sched *get_schedule(const opts *o, pl_err *e) {
    sched *s = cli_sched_get(&o->a, o->trace || o->trace_json ? SIM_MEM_TRACE : SIM_MEM_SIMULATE, e);
    if (!s) return NULL;
    sched *l = sched_lower(s, e);
    sched_free(s);
    return l;
}

/* A generated 1f1b, pipedream or 2bw schedule with replicated stages is generated again with
 * PipeDream's per-replica warm-up (sched_gen_replicated), validated and lowered into *s.
 * Returns PL_OK (also when nothing changes) or an error in e. */
static int regen_replicated(const opts *o, sched **s, const int *replicas, pl_err *e) {
    int maxrep = 1;
    for (int q = 0; q < (*s)->stages; q++)
        if (replicas[q] > maxrep) maxrep = replicas[q];
    if (maxrep == 1 || !o->a.kind || o->a.from) return PL_OK;
    sched_gen_opts go = o->a.g;
    /* replicas settle slowly: at the generators' default of 4 iterations VGG-16's 14-2 reads 23%
     * fast (37.1 ms per minibatch against 48.1 over 40); unless --iterations says otherwise, run
     * REPLICATED_ITERS_MIN or two per replica of the widest stage (47.6 ms: within 1%) */
    if (go.iterations == 0 && (*s)->weights != SCHED_WEIGHTS_FLUSH)
        go.iterations = maxrep * 2 > REPLICATED_ITERS_MIN ? maxrep * 2 : REPLICATED_ITERS_MIN;
    sched *g = sched_gen_replicated(o->a.kind, &go, replicas, e);
    if (!g) return e->code ? e->code : PL_EINPUT;
    if (sched_validate(g, e) != PL_OK) {
        sched_free(g);
        return PL_EINPUT;
    }
    sched *l = sched_lower(g, e);
    sched_free(g);
    if (!l) return e->code ? e->code : PL_EINPUT;
    sched_free(*s);
    *s = l;
    return PL_OK;
}

/* Frees what build_model made; safe on a zeroed ctx. */
static void model_ctx_free(model_ctx *mc) {
    sim_model_free(&mc->sm);
    cost_partition_free(mc->p);
    cost_model_free(mc->m);
    memset(mc, 0, sizeof *mc);
}

/* Returns the partition the options name for schedule s (file, --split, --balance, or even
 * over s->stages), with --replicas / --replicas-stage applied, or NULL and e. A partition file
 * is checked here against the schedule's stages and the model's layers, so its errors name it. */
static cost_partition *model_partition(const opts *o, const sched *s, model_ctx *mc, pl_err *e) {
    cost_partition *p = NULL;
    const cost_hw *hw = mc->have_hw ? &mc->hw : NULL;
    if (o->partition) {
        cost_plan plan;
        if (cost_partition_read(o->partition, &plan, e) != PL_OK) return NULL;
        p = cost_plan_to_partition(&plan);
        cost_plan_free(&plan);
        if (!p) {
            pl_errf(e, PL_ENOMEM, "out of memory");
            return NULL;
        }
        mc->psource = "file";
        if (p->stages != s->stages) {
            pl_errf(e, PL_EINPUT, "%s: the partition has %d stage%s but the schedule (%s, %d ranks) has %d stages",
                    o->partition, p->stages, p->stages == 1 ? "" : "s", s->kind, s->ranks, s->stages);
            cost_partition_free(p);
            return NULL;
        }
        if (cost_partition_check(p, mc->m->n, e) != PL_OK) {
            pl_err_prefix(e, "%s: model %s: ", o->partition, mc->m->name);
            cost_partition_free(p);
            return NULL;
        }
    } else if (o->split) {
        p = cost_partition_parse(o->split, mc->m->n, e);
        mc->psource = "split";
    } else if (o->balance) {
        p = sim_model_balance(mc->m, hw, &mc->co, s->stages, e);
        mc->psource = "balance";
    } else {
        p = cost_partition_even(mc->m->n, s->stages, e);
        if (!p) pl_err_prefix(e, "model %s: ", mc->m->name);
        mc->psource = "even";
    }
    if (!p) return NULL;
    if (p->stages != s->stages) {
        pl_errf(e, PL_EINPUT, "--%s: the partition has %d stage%s but the schedule (%s, %d ranks) has %d stages",
                o->split ? "split" : "balance", p->stages, p->stages == 1 ? "" : "s", s->kind, s->ranks, s->stages);
        cost_partition_free(p);
        return NULL;
    }
    if (o->have_replicas_all)
        for (int q = 0; q < p->stages; q++) p->replicas[q] = o->replicas_all;
    for (int i = 0; i < o->nrepl; i++) {
        if (o->repl_stage[i] >= p->stages) {
            pl_errf(e, PL_EINPUT, "--replicas-stage %d=%d: the schedule has stages 0..%d", o->repl_stage[i], o->repl_n[i],
                    p->stages - 1);
            cost_partition_free(p);
            return NULL;
        }
        p->replicas[o->repl_stage[i]] = o->repl_n[i];
    }
    return p;
}

/* Builds the model side of a run (--model): loads the model and hardware, applies --set,
 * --microbatch-size, --precision, --optimizer-bytes and --w-stash-fraction, picks the partition
 * and builds the adapter. Returns PL_OK or an error in e (mc holds what was made; free it). */
static int build_model(const opts *o, const sched *s, model_ctx *mc, pl_err *e) {
    memset(mc, 0, sizeof *mc);
    mc->m = cost_model_open(o->model, e);
    if (!mc->m) return e->code ? e->code : PL_EINPUT;
    if (o->hardware) {
        if (cost_hw_load(&mc->hw, o->hardware, e) != PL_OK) return PL_EINPUT;
        for (int k = 0; k < o->nsets; k++)
            if (cost_hw_set_kv(&mc->hw, o->sets[k], e) != PL_OK) return PL_EINPUT;
        if (cost_hw_check(&mc->hw, e) != PL_OK) return PL_EINPUT;
        mc->have_hw = 1;
    }
    cost_opts_init(&mc->co, mc->m);
    if (o->have_mbs) mc->co.microbatch_size = o->c.microbatch_size;
    if (o->precision) mc->co.precision = (cost_precision)cost_precision_parse(o->precision);
    if (o->have_optb) mc->co.optimizer_bytes_per_param = o->c.optimizer_bytes_per_param;
    if (o->have_wfrac) {
        if (!(o->b.w_stash_fraction <= 1))
            return pl_errf(e, PL_EINPUT, "the W stash fraction must be in [0, 1] (got %g)", o->b.w_stash_fraction);
        mc->co.w_stash_fraction = o->b.w_stash_fraction;
    }
    mc->p = model_partition(o, s, mc, e);
    if (!mc->p) return e->code ? e->code : PL_EINPUT;
    int rc = sim_model_init(&mc->sm, s, mc->m, mc->p, mc->have_hw ? &mc->hw : NULL, &mc->co, e);
    if (rc == PL_EINPUT && !mc->have_hw) pl_err_prefix(e, "without --hardware: ");
    return rc;
}

int cli_simulate(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) {
        sim_basic_free(&o.b);
        return rc;
    }
    pl_err e;
    pl_err_clear(&e);
    int *replicas = NULL;
    sim_result r;
    memset(&r, 0, sizeof r);
    pl_buf out;
    pl_buf_init(&out);
    model_ctx mc;
    memset(&mc, 0, sizeof mc);
    sim_costs costs;
    sim_basic scaled; /* o.b with the uniform values per stage (--time-per); outlives costs */
    sched *s = NULL;
#ifdef PIPELAB_HAVE_PL_RESULTS
    store *db = NULL; /* opened first: a read-only, corrupt or newer database is refused before any work */
    if (!o.no_db && store_open(o.db, 0, &db, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
#endif
    s = get_schedule(&o, &e);
    if (!s) { rc = cli_fail(&e); goto done; }
    if (o.model) {
        if (build_model(&o, s, &mc, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
        if (regen_replicated(&o, &s, mc.sm.replicas, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
        int64_t cap_bytes = o.c.capacity_bytes;
        sim_model_config(&mc.sm, &o.c);
        if (o.have_cap) o.c.capacity_bytes = cap_bytes; /* --capacity 0 turns the verdict off */
        o.mc = &mc;
        costs = sim_model_costs(&mc.sm);
        if (o.fail_on_oom && o.c.capacity_bytes <= 0) {
            pl_errf(&e, PL_EINPUT, "--fail-on-oom: hardware %s has no device.memory_bytes; give --capacity", mc.sm.hw.name);
            rc = cli_fail(&e);
            goto done;
        }
        goto simulate;
    }
    if (sim_basic_check(&o.b, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
    if (o.stage_costs && sim_basic_load_csv(&o.b, o.stage_costs, s->stages, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
    o.share = sim_time_per_share(o.time_per, s->ranks, s->stages); /* the pipeline's, before replicas */
    scaled = sim_basic_scaled(&o.b, o.share);
    replicas = pl_calloc((size_t)s->stages, sizeof *replicas);
    if (!replicas) { pl_errf(&e, PL_ENOMEM, "out of memory"); rc = cli_fail(&e); goto done; }
    for (int q = 0; q < s->stages; q++) replicas[q] = o.replicas_all;
    for (int i = 0; i < o.nrepl; i++) {
        if (o.repl_stage[i] >= s->stages) {
            pl_errf(&e, PL_EINPUT, "--replicas-stage %d=%d: the schedule has stages 0..%d", o.repl_stage[i], o.repl_n[i], s->stages - 1);
            rc = cli_fail(&e);
            goto done;
        }
        replicas[o.repl_stage[i]] = o.repl_n[i];
    }
    if (regen_replicated(&o, &s, replicas, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
    o.c.replicas = replicas;
    costs = sim_basic_costs(&scaled);
simulate:
    o.c.record_trace = o.trace || o.trace_json;
    sim_repeat_stats st;
    char what[96];
    snprintf(what, sizeof what, "pipelab simulate: %s, %d ranks", s->kind, s->ranks);
    o.c.progress = pl_progress_start(what, (uint64_t)o.repeat * sched_total_actions(s));
    int src = sim_repeat(s, &costs, &o.c, o.repeat, &st, &r, &e);
    pl_progress_end(o.c.progress);
    o.c.progress = NULL;
    if (src != PL_OK) { rc = cli_fail(&e); goto done; }
    if (strcmp(o.format, "json") == 0) out_json(&o, s, &r, &st, &out);
    else if (strcmp(o.format, "csv") == 0) out_csv(&o, s, &r, &st, &out);
    else out_table(&o, s, &r, &st, &out);
    if (o.trace) {
        pl_buf_putc(&out, '\n');
        sim_trace_table(s, &r, &out, &e);
    }
    rc = cli_write_output(NULL, &out);
    if (rc == CLI_OK && o.trace_json) {
        pl_buf tj;
        pl_buf_init(&tj);
        if (sim_trace_chrome(s, &r, &tj, &e) != PL_OK) rc = cli_fail(&e);
        else rc = cli_write_output(o.trace_json, &tj);
        pl_buf_free(&tj);
    }
#ifdef PIPELAB_HAVE_PL_RESULTS
    if (rc == CLI_OK && db) rc = store_it(db, &o, argc, argv, s, &r, &st);
#endif
    if (rc == CLI_OK && r.oom && o.fail_on_oom) {
        for (int q = 0; q < s->ranks; q++)
            if (r.rank[q].oom) {
                pl_errf(&e, PL_EINPUT, "out of memory: rank %d peaks at %lld bytes, capacity %lld", q,
                        (long long)r.rank[q].peak_bytes, (long long)o.c.capacity_bytes);
                break;
            }
        rc = cli_fail(&e);
    }
done:
#ifdef PIPELAB_HAVE_PL_RESULTS
    store_close(db);
#endif
    pl_buf_free(&out);
    sim_result_free(&r);
    free(replicas);
    sim_basic_free(&o.b);
    model_ctx_free(&mc);
    sched_free(s);
    return rc;
}
