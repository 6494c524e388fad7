/* cmd_simulate.c: `pipelab simulate`: generate or load a schedule, lower it, run the
 * discrete-event simulator with flag-driven costs or with a model on hardware (the cost-model
 * module through sim_setup), print metrics and store the run. */
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_layout.h"
#include "cost.h"
#include "pl_sched.h"
#include "sim.h"
#include "store.h" /* the stored columns the metric table names */

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
    CLI_AR_LINK_HELP
    "  also with --model: --optimizer-bytes, --w-stash-fraction, --capacity (overrides the\n"
    "  device memory; 0 = no verdict), --replicas and --replicas-stage (override the partition's).\n"
    "  Ranks take devices in order (a rank of a stage with R replicas takes R devices); a device's\n"
    "  node is device / devices_per_node, which picks the intra or inter link.\n"
    "\n"
    "GPU clusters: tensor x pipeline x data parallel GPT training (with --model transformer:...\n"
    "or --megatron, and --hardware; the schedule is generated: 1f1b, or interleaved with --chunks):\n"
    "  --tp T --dp D --pp P  tensor (within a node), data and pipeline parallel sizes (--pp = --ranks)\n"
    "  --gpus N              D = N / (T P) (refused when it does not divide)\n"
    "  --global-batch B      samples per iteration; microbatches = B / (--microbatch-size x D)\n"
    "  --recompute none|selective|full   selective: attention's core (Korthikanti et al.)\n"
    "  --sequence-parallel   --distributed-optimizer (optimizer state sharded over D)\n"
    "  --flash-attention     attention as one fused kernel (no s^2 tensors kept)\n"
    "  --no-scatter-gather   each tensor rank sends the whole pipeline boundary (default: 1/T each)\n"
    "  --megatron \"ARGS\"    the same from a Megatron-LM command line (its flag names)\n"
    "  prints model_flops, tflops_per_gpu, mfu, hfu and the memory per GPU by part; a layout that\n"
    "  does not divide, or does not fit the device, exits 1\n"
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
       O_SET, O_PARTITION, O_SPLIT, O_BALANCE, O_PREC, O_MAXMEM, O_ARLINK };

static const struct option long_opts[] = {
    CLI_SCHED_LONG_OPTS, CLI_LAYOUT_LONG_OPTS,
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
    {"precision", required_argument, 0, O_PREC}, {"max-memory", required_argument, 0, O_MAXMEM},
    {"allreduce-link", required_argument, 0, O_ARLINK}, {0, 0, 0, 0},
};

#define MAX_REPL_FLAGS 256
#define MAX_SET_FLAGS 256

typedef struct opts {
    cli_sched_args a;
    const char *stage_costs, *trace_json, *format, *tag, *db;
    sim_basic b;
    sim_time_per time_per; /* what the uniform flag values describe */
    double share;          /* the part of them each stage gets (sim_time_per_share) */
    sim_config c;
    int repl_stage[MAX_REPL_FLAGS], repl_n[MAX_REPL_FLAGS]; /* --replicas-stage S=N, in order */
    int fail_on_oom, repeat, trace, no_db, have_cap;
    /* the long names (without "--") of the first flag-driven cost flag and of the first flag
     * that needs --model, for the refusals of check_opts */
    const char *basic_flag, *model_flag;
    const char *sets[MAX_SET_FLAGS];
    /* --model and the flags that go with it; its replicas (--replicas, --replicas-stage) serve
     * flag runs too, and point at repl_stage and repl_n */
    sim_model_spec spec;
    const sim_model_setup *ms; /* set once the model side is built (params_json, table) */
    cli_layout lo;             /* --tp, --dp, --pp, --global-batch, ... (cli_layout.c) */
    sim_layout_report lr;      /* a layout run's figures, once simulated (have_lr) */
    int have_lr;
    int ar_link;               /* --allreduce-link: a cost_transport or CLI_AR_HARDWARE */
    int ar_used;               /* the transport whose measured all-reduce prices REDUCE_GRAD, or -1 */
} opts;

/* Returns the long name of option code c ("tf"), for messages; it lives in long_opts. */
static const char *opt_name(int c) {
    for (const struct option *x = long_opts; x->name; x++)
        if (x->val == c) return x->name;
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
    return c == O_HW || c == O_SET || c == O_PARTITION || c == O_SPLIT || c == O_BALANCE || c == O_PREC || c == O_ARLINK;
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

/* Returns the exit code of a flag parser's answer: CLI_EUSAGE when it failed (it printed why). */
static int usage_if(int failed) { return failed ? CLI_EUSAGE : CLI_OK; }

/* The option parsers below apply option c with value v to o. Each returns -1 when c is not
 * one of its options, CLI_OK, or CLI_EUSAGE after printing what is wrong with v. */

/* Compute flags: --time-per, --tf, --tb, --ti, --tw, --tstep, --stage-costs. */
static int parse_compute_opt(opts *o, int c, const char *v) {
    switch (c) {
    case O_TIMEPER:
        if (sim_time_per_parse(v, &o->time_per))
            return cli_usage_error("simulate", "--time-per: must be rank or stage (got '%s')", v);
        return CLI_OK;
    case O_TF: return usage_if(num_arg("--tf", v, &o->b.tf_s));
    case O_TB: return usage_if(num_arg("--tb", v, &o->b.tb_s));
    case O_TI: return usage_if(num_arg("--ti", v, &o->b.ti_s));
    case O_TW: return usage_if(num_arg("--tw", v, &o->b.tw_s));
    case O_TSTEP: return usage_if(num_arg("--tstep", v, &o->b.tstep_s));
    case O_STAGECOSTS: o->stage_costs = v; return CLI_OK;
    default: return -1;
    }
}

/* Communication flags: transfers, links, topology, blocking. */
static int parse_comm_opt(opts *o, int c, const char *v) {
    switch (c) {
    case O_TCOMM: return usage_if(num_arg("--tcomm", v, &o->b.tcomm_s));
    case O_BYTES: return usage_if(bytes_arg("--bytes", v, &o->b.bytes));
    case O_BW: return usage_if(bw_arg("--bandwidth", v, &o->b.bandwidth_Bps));
    case O_LAT: return usage_if(num_arg("--latency", v, &o->b.latency_s));
    case O_IBW: return usage_if(bw_arg("--inter-bandwidth", v, &o->b.inter_bandwidth_Bps));
    case O_ILAT: return usage_if(num_arg("--inter-latency", v, &o->b.inter_latency_s));
    case O_RPN: return usage_if(cli_int_arg("simulate", "--ranks-per-node", v, 0, SCHED_MAX_RANKS, &o->b.ranks_per_node));
    case O_SHARED: o->c.shared_inter_link = 1; return CLI_OK;
    case O_BLOCK: o->c.blocking_comm = 1; return CLI_OK;
    case O_ARINTER: o->b.allreduce_inter = 1; return CLI_OK;
    default: return -1;
    }
}

/* Memory flags; --w-stash-fraction and --optimizer-bytes serve the model's costs too. */
static int parse_memory_opt(opts *o, int c, const char *v) {
    switch (c) {
    case O_STASH: return usage_if(bytes_arg("--stash-bytes", v, &o->b.stash_bytes));
    case O_WFRAC:
        if (cli_num_arg("simulate", "--w-stash-fraction", v, 0, 1, &o->b.w_stash_fraction)) return CLI_EUSAGE;
        o->spec.w_stash_fraction = o->b.w_stash_fraction;
        return CLI_OK;
    case O_PARAM: return usage_if(bytes_arg("--param-bytes", v, &o->b.param_bytes));
    case O_DTYPE: return usage_if(num_arg("--dtype-bytes", v, &o->c.dtype_bytes));
    case O_OPT:
        if (num_arg("--optimizer-bytes", v, &o->c.optimizer_bytes_per_param)) return CLI_EUSAGE;
        o->spec.optimizer_bytes_per_param = o->c.optimizer_bytes_per_param;
        return CLI_OK;
    case O_CAP:
        o->have_cap = 1;
        return usage_if(bytes_arg("--capacity", v, &o->c.capacity_bytes));
    case O_FAILOOM: o->fail_on_oom = 1; return CLI_OK;
    default: return -1;
    }
}

/* Data-parallel flags: --replicas N and --replicas-stage S=N (into o->spec.replicas). */
static int parse_replicas_opt(opts *o, int c, const char *v) {
    sim_replica_spec *rs = &o->spec.replicas;
    if (c == O_REPL) return usage_if(cli_int_arg("simulate", "--replicas", v, 1, CLI_MAX_REPLICAS, &rs->all));
    if (c != O_REPLS) return -1;
    if (rs->n == MAX_REPL_FLAGS) return cli_usage_error("simulate", "too many --replicas-stage flags");
    if (cli_replicas_stage_arg("simulate", v, &o->repl_stage[rs->n], &o->repl_n[rs->n])) return CLI_EUSAGE;
    rs->n++;
    return CLI_OK;
}

/* Run and output flags: samples per microbatch, stochastic runs, traces, format, store. */
static int parse_output_opt(opts *o, int c, const char *v) {
    switch (c) {
    case O_MBS:
        if (cli_int_arg("simulate", "--microbatch-size", v, 1, 1 << 30, &o->c.microbatch_size)) return CLI_EUSAGE;
        o->spec.microbatch_size = o->c.microbatch_size;
        return CLI_OK;
    case O_CV: return usage_if(cli_num_arg("simulate", "--cv", v, 0, 100, &o->c.cv));
    case O_SEED: {
        long sd;
        if (cli_long_arg("simulate", "--seed", v, 0, 0x7fffffffffffffffL, &sd)) return CLI_EUSAGE;
        o->c.seed = (uint64_t)sd;
        return CLI_OK;
    }
    case O_REPEAT: return usage_if(cli_int_arg("simulate", "--repeat", v, 1, 1000000, &o->repeat));
    case O_TRACE: o->trace = 1; return CLI_OK;
    case O_TRACEJSON: o->trace_json = v; return CLI_OK;
    case O_FORMAT: o->format = v; return CLI_OK;
    case O_TAG: o->tag = v; return CLI_OK;
    case O_DB: o->db = v; return CLI_OK;
    case O_NODB: o->no_db = 1; return CLI_OK;
    case O_MAXMEM: return usage_if(cli_max_memory_arg("simulate", v, &o->a));
    default: return -1;
    }
}

/* Model flags: --model, --hardware, --set, --partition, --split, --balance, --precision. */
static int parse_model_opt(opts *o, int c, const char *v) {
    sim_model_spec *sp = &o->spec;
    switch (c) {
    case O_MODEL: sp->model = v; return CLI_OK;
    case O_HW: sp->hardware = v; return CLI_OK;
    case O_SET:
        if (sp->nsets == MAX_SET_FLAGS) return cli_usage_error("simulate", "too many --set flags");
        if (!strchr(v, '=')) return cli_usage_error("simulate", "--set needs KEY=VALUE (got '%s')", v);
        o->sets[sp->nsets++] = v;
        return CLI_OK;
    case O_PARTITION: sp->partition = v; return CLI_OK;
    case O_SPLIT: sp->split = v; return CLI_OK;
    case O_BALANCE: sp->balance = 1; return CLI_OK;
    case O_ARLINK: return cli_allreduce_link_arg("simulate", v, &o->ar_link) ? CLI_EUSAGE : CLI_OK;
    case O_PREC:
        if (cost_precision_parse(v) < 0)
            return cli_usage_error("simulate", "--precision must be fp32, tf32, fp16 or bf16 (got '%s')", v);
        sp->precision = v;
        return CLI_OK;
    default: return -1;
    }
}

typedef int (*opt_parser)(opts *o, int c, const char *v);
/* Every option parser of simulate's own flags; each option belongs to one of them. */
static const opt_parser opt_parsers[] = {parse_compute_opt, parse_comm_opt, parse_memory_opt, parse_replicas_opt,
                                         parse_output_opt, parse_model_opt};

/* Fills o with the defaults of every flag. */
static void opts_init(opts *o) {
    memset(o, 0, sizeof *o);
    sim_basic_init(&o->b);
    sim_config_init(&o->c);
    sim_model_spec_init(&o->spec);
    cli_layout_init(&o->lo);
    o->spec.sets = o->sets;
    o->spec.replicas.stage = o->repl_stage;
    o->spec.replicas.count = o->repl_n;
    o->format = "table";
    o->repeat = 1;
    o->ar_used = -1;
}

/* Returns -1 when no argument is left over after the flags and the parsed flags go together,
 * else CLI_EUSAGE after printing which do not. */
static int check_opts(int argc, char **argv, opts *o) {
    int rc = cli_sched_args_end("simulate", argc, argv, &o->a);
    if (rc < 0) rc = cli_format_arg("simulate", o->format);
    if (rc >= 0) return rc;
    const sim_model_spec *sp = &o->spec;
    if (sp->model && o->basic_flag)
        return cli_usage_error("simulate", "--%s is a flag-driven cost; with --model the costs come from the model and "
                               "the hardware (use --hardware and --set instead)", o->basic_flag);
    if (!sp->model && o->model_flag) return cli_usage_error("simulate", "--%s needs --model", o->model_flag);
    if (sp->layout && (sp->replicas.all || sp->replicas.n || sp->partition || sp->split || sp->balance))
        return cli_usage_error("simulate", "the parallel layout replicates with --dp and splits as Megatron does: no "
                               "--replicas, --replicas-stage, --partition, --split or --balance");
    if (!!sp->partition + !!sp->split + sp->balance > 1)
        return cli_usage_error("simulate", "give at most one of --partition, --split and --balance");
    if (sp->nsets && !sp->hardware)
        return cli_usage_error("simulate", "--set needs --hardware (the preset or INI file it overrides)");
    if (o->fail_on_oom && o->c.capacity_bytes <= 0 && !sp->hardware)
        return cli_usage_error("simulate", "--fail-on-oom needs --capacity (or --model with --hardware)");
    if (o->c.dtype_bytes <= 0) return cli_usage_error("simulate", "--dtype-bytes: must be > 0");
    o->c.ranks_per_node = o->b.ranks_per_node;
    o->c.budget = o->a.budget;
    return -1;
}

/* Parses argv into o; returns -1 to continue, or an exit code (--help: CLI_OK). */
static int parse(int argc, char **argv, opts *o) {
    opts_init(o);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        if (is_basic_flag(c) && !o->basic_flag) o->basic_flag = opt_name(c);
        if (is_model_flag(c) && !o->model_flag) o->model_flag = opt_name(c);
        int rc = cli_layout_opt("simulate", c, optarg, &o->lo, &o->a);
        if (rc == CLI_EUSAGE) return rc;
        if (rc == CLI_OK) continue;
        rc = cli_sched_opt("simulate", c, optarg, &o->a, &cli_sched_gen_limits);
        if (rc == CLI_EUSAGE) return rc;
        if (rc == CLI_OK) continue;
        if (c == O_HELP) {
            fputs(help_text, stdout);
            return CLI_OK;
        }
        for (size_t k = 0; rc < 0 && k < sizeof opt_parsers / sizeof opt_parsers[0]; k++) rc = opt_parsers[k](o, c, optarg);
        if (rc < 0) return cli_usage_error("simulate", "unknown or incomplete option '%s'", argv[optind - 1]);
        if (rc != CLI_OK) return rc;
    }
    int rc = cli_layout_finish("simulate", &o->lo, &o->a, &o->spec, o->spec.microbatch_size);
    return rc >= 0 ? rc : check_opts(argc, argv, o);
}

/* Appends the JSON object of a model run's parameters: the model (spec, name, layers), the
 * hardware (name or file, --set overrides, the effective values), the partition (source, layer
 * bounds, replicas) and the cost options, plus the run configuration shared with flag runs. */
static void params_json_model(const opts *o, const sim_model_setup *ms, pl_buf *b) {
    const cost_hw *hw = &ms->sm.hw;
    const sim_model_spec *sp = &o->spec;
    pl_buf_puts(b, "{\"costs\":\"model\",\"model\":{\"spec\":");
    pl_buf_json_string(b, sp->model);
    pl_buf_puts(b, ",\"name\":");
    pl_buf_json_string(b, ms->m->name);
    pl_buf_printf(b, ",\"source\":\"%s\",\"layers\":%d,\"microbatch_size\":%d,\"dtype_bytes\":%d,\"params\":%.9g}",
                  ms->m->source, ms->m->n, ms->m->microbatch_size, ms->m->dtype_bytes, cost_model_params(ms->m));
    pl_buf_puts(b, ",\"hardware\":{\"spec\":");
    pl_buf_json_string(b, sp->hardware ? sp->hardware : "");
    pl_buf_puts(b, ",\"name\":");
    pl_buf_json_string(b, hw->name);
    pl_buf_puts(b, ",\"set\":[");
    for (int k = 0; k < sp->nsets; k++) {
        if (k) pl_buf_putc(b, ',');
        pl_buf_json_string(b, sp->sets[k]);
    }
    pl_buf_printf(b, "],\"peak_flops\":%.9g,\"keys\":", hw->peak_flops[ms->co.precision]);
    cost_hw_json(hw, b);
    pl_buf_putc(b, '}');
    /* the measured all-reduce that priced REDUCE_GRAD instead of the hardware's links, if any */
    pl_buf_printf(b, ",\"allreduce_link\":\"%s\"", o->ar_used >= 0 ? cost_transport_name((cost_transport)o->ar_used) : "hardware");
    if (ms->sm.allreduce_link)
        pl_buf_printf(b, ",\"allreduce_latency_s\":%.9g,\"allreduce_Bps\":%.9g", ms->sm.allreduce_link->intra_latency_s,
                      ms->sm.allreduce_link->intra_bandwidth_Bps);
    pl_buf_printf(b, ",\"partition\":{\"source\":\"%s\",\"file\":", ms->psource);
    pl_buf_json_string(b, sp->partition ? sp->partition : "");
    pl_buf_puts(b, ",\"bounds\":[");
    for (int q = 0; q <= ms->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", ms->sm.bound[q]);
    pl_buf_puts(b, "],\"replicas\":[");
    for (int q = 0; q < ms->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", ms->sm.replicas[q]);
    pl_buf_printf(b, "]},\"microbatch_size\":%d,\"precision\":\"%s\",\"optimizer_bytes\":%.9g,\"w_stash_fraction\":%.9g,"
                     "\"grad_bytes_per_param\":%.9g,\"shared_inter_link\":%d,\"blocking_comm\":%d,\"capacity_bytes\":%lld,"
                     "\"cv\":%.9g,\"repeat\":%d}",
                  ms->co.microbatch_size, cost_precision_name(ms->co.precision), ms->co.optimizer_bytes_per_param,
                  ms->co.w_stash_fraction, ms->co.grad_bytes_per_param, o->c.shared_inter_link, o->c.blocking_comm,
                  (long long)o->c.capacity_bytes, o->c.cv, o->repeat);
    if (o->have_lr) { /* reopen the object for the layout's figures */
        b->len--;
        pl_buf_puts(b, ",\"parallel\":");
        cli_layout_json(&o->lr, o->spec.layout, b);
        pl_buf_putc(b, '}');
    }
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
    if (o->ms) params_json_model(o, o->ms, b);
    else params_json_costs(o, b);
    if (b->len && b->data[b->len - 1] == '}') { /* reopen the object for the inputs */
        b->len--;
        b->data[b->len] = 0;
        pl_buf_putc(b, ',');
        const char *roles[] = {"schedule", "model", "hardware", "partition"};
        const char *paths[] = {o->a.from, file_or_null(o->spec.model), file_or_null(o->spec.hardware), o->spec.partition};
        cli_inputs_json(b, roles, paths, sizeof roles / sizeof roles[0]);
        pl_buf_putc(b, '}');
    }
}

/* The flag-driven costs' part of params_json ("replicas": --replicas, 1 when not given). */
static void params_json_costs(const opts *o, pl_buf *b) {
    const sim_replica_spec *rs = &o->spec.replicas;
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
                  (long long)o->c.capacity_bytes, o->c.microbatch_size, o->c.cv, o->repeat, rs->all > 0 ? rs->all : 1);
    pl_buf_json_string(b, o->stage_costs ? o->stage_costs : "");
    pl_buf_puts(b, ",\"replicas_stage\":[");
    for (int i = 0; i < rs->n; i++) pl_buf_printf(b, "%s[%d,%d]", i ? "," : "", rs->stage[i], rs->count[i]);
    pl_buf_puts(b, "]}");
}

/* ---------------------------------------------------------------- the metric table
 * Every metric simulate writes, once: the table, the CSV, the JSON and the stored run read
 * their names, values and order from run_metrics and rank_metrics. A new metric is one entry. */

/* What every output of a run reads. */
typedef struct report {
    const opts *o;
    const sched *s;
    const sim_result *r;           /* the first run's result */
    const sim_repeat_stats *st;    /* statistics over the --repeat runs */
} report;

/* The struct a run metric's value lives in: the schedule, the first run's result, or the
 * statistics over the --repeat runs. */
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
    if (p->r->iterations > 1) pl_buf_puts(b, "  (steady state, first iteration left out)");
}
static void note_window(const report *p, pl_buf *b) {
    if (p->r->steady_state)
        pl_buf_printf(b, "  (steady state: iterations 1..%d, where busy, idle and bubble are measured)", p->r->iterations - 1);
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
 * are the means over the --repeat runs (the first run's own with one run); the stored bubble
 * figures are the first run's, like the rank rows. */
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
                         " throughput mean %.9g stddev %.9g; bubble_fraction mean %.6f stddev %.6f\n",
                      o->c.cv, st->repeat, st->iter_mean_s, st->iter_sd_s, st->iter_min_s, st->iter_max_s, st->thr_mean,
                      st->thr_sd, st->bubble_fraction_mean, st->bubble_fraction_sd);
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

/* Writes JSON: the run's metrics, its parameters (params_json) and a per-rank array. */
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
    params_json(p->o, b);
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
static void store_rows(const report *p, const char *cmdline, const char *pj, store_run *run, store_rank_metric *rm) {
    memset(run, 0, sizeof *run);
    run->kind = "simulated";
    run->tag = p->o->tag;
    run->cmdline = cmdline;
    run->weights_policy = sched_weights_name(p->s->weights);
    run->recompute_policy = sched_recompute_name(p->s->recompute);
    run->params_json = pj;
    run->seed = p->o->c.seed;
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

/* Stores the run (with per-action rows when traced) in db, opened before simulating so that a
 * database that cannot take the run is refused before any work. Returns an exit code. */
static int store_it(store *db, const report *p, int argc, char **argv) {
    const sched *s = p->s;
    pl_err e;
    pl_err_clear(&e);
    pl_buf cmd, pj;
    pl_buf_init(&cmd);
    pl_buf_init(&pj);
    pl_buf_puts(&cmd, "pipelab");
    for (int i = 0; i < argc; i++) pl_buf_printf(&cmd, " %s", argv[i]);
    params_json(p->o, &pj);
    store_run run;
    store_rank_metric *rm = pl_calloc((size_t)s->ranks, sizeof *rm);
    cli_op_rows ops = {0};
    int rc = CLI_OK;
    if (!rm) { pl_errf(&e, PL_ENOMEM, "out of memory"); rc = cli_fail(&e); goto out; }
    store_rows(p, cmd.data, pj.data, &run, rm);
    if (p->r->trace && cli_op_rows_trace(&ops, s, p->r->trace, &e) != PL_OK) { rc = cli_fail(&e); goto out; }
    if (store_write_run(db, &run, rm, s->ranks, ops.ops, ops.n, NULL, &e) != PL_OK) rc = cli_fail(&e);
out:
    free(rm);
    cli_op_rows_free(&ops);
    pl_buf_free(&cmd);
    pl_buf_free(&pj);
    return rc;
}
#endif

/* ---------------------------------------------------------------- the run */

/* What one simulation holds from the schedule to the outputs. */
typedef struct job {
    sched *s;              /* lowered, or compute-only (needs_lowered) */
    sim_model_setup ms;    /* the model side (--model) */
    cost_hw ar_link;       /* the profile's measured all-reduce (ms.sm.allreduce_link), when used */
    sim_basic scaled;      /* o.b with the uniform values per stage (--time-per); outlives costs */
    int *replicas;         /* [stages] a flag run's replicas per stage */
    sim_costs costs;
    sim_result r;          /* the first run's */
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

/* Builds the model side of the run (sim_setup), regenerates a replicated schedule, and fills
 * the config and j->costs from the model. Returns PL_OK or an error in e. */
static int model_costs(opts *o, job *j, pl_err *e) {
    if (sim_model_setup_build(&j->ms, &o->spec, j->s, e) != PL_OK) return PL_EINPUT;
    if (sim_replicated_schedule(regen_kind(o), &o->a.g, &o->a.budget, j->ms.sm.replicas, &j->s, e) != PL_OK)
        return PL_EINPUT;
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
    if (sim_replicated_schedule(regen_kind(o), &o->a.g, &o->a.budget, j->replicas, &j->s, e) != PL_OK) return PL_EINPUT;
    o->c.replicas = j->replicas;
    j->costs = sim_basic_costs(&j->scaled);
    return PL_OK;
}

/* Runs the simulation --repeat times (with a progress bar) into j->r and j->st. Returns PL_OK
 * or an error in e. */
static int run_simulation(opts *o, job *j, pl_err *e) {
    o->c.record_trace = o->trace || o->trace_json;
    char what[sizeof "pipelab simulate: , -2147483648 ranks" + sizeof j->s->kind];
    snprintf(what, sizeof what, "pipelab simulate: %s, %d ranks", j->s->kind, j->s->ranks);
    o->c.progress = pl_progress_start(what, (uint64_t)o->repeat * sched_total_actions(j->s));
    int rc = sim_repeat(j->s, &j->costs, &o->c, o->repeat, &j->st, &j->r, e);
    pl_progress_end(o->c.progress);
    o->c.progress = NULL;
    return rc;
}

/* Prints the run in the chosen format (with the trace table under --trace) and writes the
 * Chrome trace of --trace-json. Returns an exit code. */
static int write_outputs(const report *p) {
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

/* The steps of a simulation once the flags are parsed and the database (db, or NULL) is open:
 * schedule, costs, simulation, outputs, store, OOM verdict. Returns an exit code. */
static int simulate(opts *o, job *j, store *db, int argc, char **argv) {
    pl_err e;
    pl_err_clear(&e);
    if (!(j->s = get_schedule(o, &e))) return cli_fail(&e);
    int rc = o->spec.model ? model_costs(o, j, &e) : flag_costs(o, j, &e);
    if (rc == PL_OK) rc = run_simulation(o, j, &e);
    if (rc != PL_OK) return cli_fail(&e);
    if (o->spec.layout) {
        sim_layout_report_fill(&j->ms, o->spec.layout, &j->r, &o->lr);
        o->have_lr = 1;
    }
    report p = {o, j->s, &j->r, &j->st};
    rc = write_outputs(&p);
#ifdef PIPELAB_HAVE_PL_RESULTS
    if (rc == CLI_OK && db) rc = store_it(db, &p, argc, argv);
#else
    (void)db, (void)argc, (void)argv;
#endif
    if (rc == CLI_OK) rc = oom_verdict(o, &j->r);
    return rc;
}

int cli_simulate(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) {
        sim_basic_free(&o.b);
        return rc;
    }
    job j;
    memset(&j, 0, sizeof j);
    store *db = NULL; /* opened first: a read-only, corrupt or newer database is refused before any work */
#ifdef PIPELAB_HAVE_PL_RESULTS
    pl_err e;
    pl_err_clear(&e);
    if (!o.no_db && store_open(o.db, 0, &db, &e) != PL_OK) rc = cli_fail(&e);
    else rc = simulate(&o, &j, db, argc, argv);
    store_close(db);
#else
    rc = simulate(&o, &j, db, argc, argv);
#endif
    sim_result_free(&j.r);
    free(j.replicas);
    sim_basic_free(&o.b);
    sim_model_setup_free(&j.ms);
    sched_free(j.s);
    return rc;
}
