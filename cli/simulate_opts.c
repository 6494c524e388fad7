/* simulate_opts.c: the flags of `pipelab simulate`: --help, the option table, the parsing of
 * each flag and the checks of those that go together (simulate_int.h). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate_int.h"

static const char help_text[] =
    "usage: pipelab simulate (--kind K --ranks P --microbatches M | --from FILE) [options]\n"
    "\n"
    "Lowers the schedule and runs it in the discrete-event simulator: one compute stream per\n"
    "rank, FIFO links per direction, all-reduces for replicated stages, memory per rank.\n"
    "Times in seconds, sizes in bytes (numbers like 80e9 are fine).\n"
    "\n"
    "schedule:\n"
    "  --kind K --ranks P --microbatches M [--chunks V] [--iterations N] [--recompute none|full]\n"
    "                        pipedream and 2bw without --iterations run 1 + ceil((P - 1) / M) +\n"
    "                        max(2 c, c + 2) iterations, c = P / gcd(P, M) (at least 4; with a\n"
    "                        replicated stage at least 16 and twice its replicas), so that the\n"
    "                        iteration gaps repeat twice before the drain, then more, until\n"
    "                        three runs, each twice as long, agree; the first of them is shown\n"
    "                        (README, \"Simulating\")\n"
    "  --from FILE [--legacy-letters]   a .sched file or a PyTorch CSV (.csv; the file sets the\n"
    "                        ranks, microbatches, chunks, iterations and recomputation; a CSV\n"
    "                        has no recomputation: --recompute gives it one)\n"
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
    "or --megatron, and --hardware; the schedule is generated: 1f1b, or interleaved with --chunks;\n"
    "no --microbatches):\n"
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
    "  --replicas-stage S=N  stage S replicated N times (repeatable, once a stage), e.g. 15-1\n"
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
    "                        of variation; mean and spread over R runs (seeds N, N+1, ...):\n"
    "                        the table, trace and rank rows are the median run's (by iteration\n"
    "                        time); the stored row's iteration time and throughput the means,\n"
    "                        its bubble the median run's\n"
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
    if (cli_replicas_stage_arg("simulate", v, o->repl_stage, o->repl_n, rs->n)) return CLI_EUSAGE;
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
        if (cli_set_arg("simulate", v)) return CLI_EUSAGE;
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
    const cli_output outs[] = {{"--trace-json", o->trace_json}};
    if (rc < 0) rc = cli_db_flags("simulate", o->db, o->no_db, outs, sizeof outs / sizeof outs[0]);
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
    if (o->c.seed > (uint64_t)INT64_MAX - (uint64_t)(o->repeat - 1))
        return cli_usage_error("simulate", "--seed %llu with --repeat %d: the runs' seeds (--seed to --seed + %d) must "
                               "stay within %lld", (unsigned long long)o->c.seed, o->repeat, o->repeat - 1,
                               (long long)INT64_MAX);
    o->c.ranks_per_node = o->b.ranks_per_node;
    o->c.budget = o->a.budget;
    return -1;
}

/* Parses argv into o; returns -1 to continue, or an exit code (--help: CLI_OK). */
int simulate_parse(int argc, char **argv, opts *o) {
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
