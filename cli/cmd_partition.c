/* cmd_partition.c: `pipelab partition`: PipeDream's planner or GPipe-style balancing of a model on a machine. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"

static const char help_text[] =
    "usage: pipelab partition (--model SPEC | --profile FILE.csv | --graph graph.txt) --workers N [options]\n"
    "\n"
    "Splits a model into pipeline stages. pipedream (default): PipeDream's planner chooses stage\n"
    "boundaries and replicas per stage for N workers on the machine's two-level topology, minimizing\n"
    "the slowest stage (compute, weight all-reduce and boundary transfers); --hierarchy chooses how\n"
    "it searches two levels. balance: an exact\n"
    "contiguous split into N unreplicated stages minimizing the largest compute time (or memory);\n"
    "its predictions then add the machine's transfers and the data-parallel baseline's all-reduce.\n"
    "\n"
    "model:\n"
    "  --model SPEC          uniform:layers=8,fwd_s=...  mlp:width=,depth=,microbatch=\n"
    "                        transformer:layers=,hidden=,heads=,seq=,vocab=,microbatch=  or a file\n"
    "  --profile FILE.csv    a profile CSV (the executor's profiler format)\n"
    "  --graph FILE          a PipeDream graph.txt profile\n"
    "  --microbatch B        samples per microbatch (default: the model's)\n"
    "  --precision P         fp32 tf32 fp16 bf16, for FLOP-based times (default fp32)\n"
    "machine:\n"
    "  --hardware NAME|FILE  a preset (pipelab partition --list-hardware) or an INI file; without it,\n"
    "                        one server holding all workers with free links\n"
    "  --set KEY=VALUE       override a hardware key, e.g. --set link.inter.bandwidth=1.25e9\n"
    "                        (repeatable)\n"
    "  --list-hardware       print the preset names and exit\n"
    "partitioning:\n"
    "  --workers N, --ranks N   workers (pipedream) or stages (balance)\n"
    "  --method pipedream|balance\n"
    "  --allreduce ring|pipedream   weight sync model: ring 2(m-1)/m |w|/B + 2(m-1) latency\n"
    "                        (default), or PipeDream's code 4(m-1)|w|/(m B)\n"
    CLI_AR_LINK_HELP
    "  --straight            pipedream without replication\n"
    "  --hierarchy exact|pipedream   pipedream on two levels. exact (default): one exact program\n"
    "                        over all workers, stages on consecutive workers. pipedream: PipeDream's\n"
    "                        optimizer_graph_hierarchical.py, level by level: the best pipeline of\n"
    "                        every layer range on one server's devices, then the servers, each\n"
    "                        server-level stage replicating its server's pipeline. Prints its plan\n"
    "                        in PipeDream's notation, 3x(4) ; 1x(2-1-1), with PipeDream's time per\n"
    "                        stage, beside the flat form (12-2-1-1) rated as the exact planner rates\n"
    "                        plans. Workers: whole servers, or one server's; no --capacity\n"
    "  --capacity BYTES|device   memory per device (device: the hardware's memory_bytes);\n"
    "                        default unlimited\n"
    "  --by-memory           balance: minimize the largest stage memory instead of time\n"
    "  --inflight K          balance: stashed microbatches per stage (default 1F1B: p - s)\n"
    "  --weight-versions V   balance: parameter copies held (default 1)\n"
    "output:\n"
    "  --format table|csv|json   (default table)\n"
    "  -o, --output FILE     also write the partition file (pipelab simulate --partition FILE)\n"
    "\n"
    "exit status: 0 ok, 1 bad input or nothing fits (the message says why), 2 bad usage\n";

typedef struct opts {
    const char *model, *profile, *graph, *hardware, *method, *allreduce, *capacity, *format, *output, *precision,
        *hierarchy;
    const char **sets;
    int nsets;
    int workers, microbatch, straight, by_memory, inflight, weight_versions, list_hw;
    int ar_link; /* --allreduce-link: a cost_transport or CLI_AR_HARDWARE */
} opts;

enum { O_MODEL = 1000, O_PROFILE, O_GRAPH, O_MB, O_PREC, O_HW, O_SET, O_LISTHW, O_WORKERS, O_METHOD, O_AR,
       O_STRAIGHT, O_CAP, O_BYMEM, O_INFL, O_WV, O_FORMAT, O_HIER, O_ARLINK, O_HELP };

static const struct option long_opts[] = {
    {"model", required_argument, 0, O_MODEL},
    {"profile", required_argument, 0, O_PROFILE},
    {"graph", required_argument, 0, O_GRAPH},
    {"microbatch", required_argument, 0, O_MB},
    {"precision", required_argument, 0, O_PREC},
    {"hardware", required_argument, 0, O_HW},
    {"set", required_argument, 0, O_SET},
    {"list-hardware", no_argument, 0, O_LISTHW},
    {"workers", required_argument, 0, O_WORKERS},
    {"ranks", required_argument, 0, O_WORKERS},
    {"method", required_argument, 0, O_METHOD},
    {"allreduce", required_argument, 0, O_AR},
    {"allreduce-link", required_argument, 0, O_ARLINK},
    {"straight", no_argument, 0, O_STRAIGHT},
    {"hierarchy", required_argument, 0, O_HIER},
    {"capacity", required_argument, 0, O_CAP},
    {"by-memory", no_argument, 0, O_BYMEM},
    {"inflight", required_argument, 0, O_INFL},
    {"weight-versions", required_argument, 0, O_WV},
    {"format", required_argument, 0, O_FORMAT},
    {"output", required_argument, 0, 'o'},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* Parses argv into o; returns -1 to continue, or an exit code to return at once. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->method = "pipedream";
    o->allreduce = "ring";
    o->format = "table";
    o->sets = calloc((size_t)argc + 1, sizeof *o->sets);
    if (!o->sets) return cli_usage_error("partition", "out of memory");
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "o:", long_opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_PROFILE: o->profile = optarg; break;
        case O_GRAPH: o->graph = optarg; break;
        case O_MB: if (cli_int_arg("partition", "--microbatch", optarg, 1, 1 << 24, &o->microbatch)) return CLI_EUSAGE; break;
        case O_PREC: o->precision = optarg; break;
        case O_HW: o->hardware = optarg; break;
        case O_SET:
            if (cli_set_arg("partition", optarg)) return CLI_EUSAGE;
            o->sets[o->nsets++] = optarg;
            break;
        case O_LISTHW: o->list_hw = 1; break;
        case O_WORKERS: if (cli_int_arg("partition", "--workers", optarg, 1, COST_PART_MAX_WORKERS, &o->workers)) return CLI_EUSAGE; break;
        case O_METHOD: o->method = optarg; break;
        case O_AR: o->allreduce = optarg; break;
        case O_ARLINK: if (cli_allreduce_link_arg("partition", optarg, &o->ar_link)) return CLI_EUSAGE; break;
        case O_STRAIGHT: o->straight = 1; break;
        case O_HIER: o->hierarchy = optarg; break;
        case O_CAP: o->capacity = optarg; break;
        case O_BYMEM: o->by_memory = 1; break;
        case O_INFL: if (cli_int_arg("partition", "--inflight", optarg, 1, 1 << 24, &o->inflight)) return CLI_EUSAGE; break;
        case O_WV: if (cli_int_arg("partition", "--weight-versions", optarg, 1, 1 << 20, &o->weight_versions)) return CLI_EUSAGE; break;
        case O_FORMAT: o->format = optarg; break;
        case 'o': o->output = optarg; break;
        case O_HELP: fputs(help_text, stdout); return CLI_OK;
        default: return cli_usage_error("partition", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (o->list_hw) return -1;
    if (optind < argc) return cli_usage_error("partition", "unexpected argument '%s'", argv[optind]);
    if (!!o->model + !!o->profile + !!o->graph != 1)
        return cli_usage_error("partition", "give exactly one of --model, --profile and --graph");
    if (o->workers < 1) return cli_usage_error("partition", "give --workers N (or --ranks N)");
    if (strcmp(o->method, "pipedream") && strcmp(o->method, "balance"))
        return cli_usage_error("partition", "--method must be pipedream or balance (got '%s')", o->method);
    if (o->hierarchy && strcmp(o->hierarchy, "exact") && strcmp(o->hierarchy, "pipedream"))
        return cli_usage_error("partition", "--hierarchy must be exact or pipedream (got '%s')", o->hierarchy);
    if (strcmp(o->allreduce, "ring") && strcmp(o->allreduce, "pipedream"))
        return cli_usage_error("partition", "--allreduce must be ring or pipedream (got '%s')", o->allreduce);
    if (strcmp(o->format, "table") && strcmp(o->format, "csv") && strcmp(o->format, "json"))
        return cli_usage_error("partition", "--format must be table, csv or json");
    if (o->precision && cost_precision_parse(o->precision) < 0)
        return cli_usage_error("partition", "--precision must be fp32, tf32, fp16 or bf16 (got '%s')", o->precision);
    int balance = strcmp(o->method, "balance") == 0;
    if (balance && o->straight) return cli_usage_error("partition", "--straight is for --method pipedream");
    if (balance && o->hierarchy) return cli_usage_error("partition", "--hierarchy is for --method pipedream");
    if (o->hierarchy && strcmp(o->hierarchy, "pipedream") == 0 && o->capacity)
        return cli_usage_error("partition", "--capacity is for --hierarchy exact (the pipedream hierarchy plans "
                               "without a memory limit, as PipeDream's optimizer does by default)");
    if (!balance && (o->by_memory || o->inflight || o->weight_versions))
        return cli_usage_error("partition", "--by-memory, --inflight and --weight-versions are for --method balance");
    const cli_output outs[] = {{"-o", o->output}};
    return cli_outputs_check("partition", outs, 1);
}

/* Loads the model named by the options; returns it or NULL with e filled. */
static cost_model *load_model(const opts *o, pl_err *e) {
    if (o->model) return cost_model_open(o->model, e);
    const char *path = o->profile ? o->profile : o->graph;
    char *text = NULL;
    size_t len = 0;
    if (pl_read_file(path, (size_t)256 << 20, &text, &len, e) != PL_OK) return NULL;
    cost_model *m = o->profile ? cost_model_read_csv(path, text, len, e) : cost_model_read_graph(path, text, len, 1, e);
    free(text);
    return m;
}

/* Appends the plan as a table, CSV (one row per stage) or JSON. */
static void render(const cost_partition *p, const cost_hw *hw, const char *format, pl_buf *b) {
    const cost_partition_pred *pr = p->pred;
    int layers = cost_partition_layers(p), workers = cost_partition_workers(p);
    if (strcmp(format, "csv") == 0) {
        pl_buf_puts(b, "stage,first_layer,last_layer,replicas,first_worker,compute_s,allreduce_s,time_s,transfer_in_s,"
                       "inflight,param_bytes,stash_bytes,mem_bytes,servers,server_stage\n");
        for (int s = 0; s < p->stages; s++) {
            const cost_stage_pred *st = &pr->stage[s];
            pl_buf_printf(b, "%d,%d,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%d,%.0f,%.0f,%.0f,%d,%d\n", s, p->bound[s],
                          p->bound[s + 1] - 1, p->replicas[s], st->first_worker, st->compute_s, st->allreduce_s, st->time_s,
                          st->transfer_in_s, st->inflight, st->param_bytes, st->stash_bytes, st->mem_bytes, st->servers,
                          st->servers ? st->server_stage : -1);
        }
        return;
    }
    if (strcmp(format, "json") == 0) {
        pl_buf_puts(b, "{\"method\":");
        pl_buf_json_string(b, p->method);
        pl_buf_puts(b, ",\"model\":");
        pl_buf_json_string(b, p->model);
        pl_buf_puts(b, ",\"hardware\":");
        pl_buf_json_string(b, p->hardware);
        pl_buf_puts(b, ",\"hierarchy\":");
        pl_buf_json_string(b, pr->hierarchy);
        pl_buf_puts(b, ",\"config\":\"");
        cost_plan_config(p, b);
        pl_buf_puts(b, "\",\"hierarchy_config\":\"");
        cost_plan_hier_config(p, b);
        pl_buf_printf(b, "\",\"hierarchy_time_s\":%.9g,\"hierarchy_consecutive\":%s,", pr->hier_time_s,
                      cost_plan_hier_consecutive(p) ? "true" : "false");
        pl_buf_printf(b, "\"layers\":%d,\"workers\":%d,\"noam\":%d,\"bottleneck_s\":%.9g,\"one_worker_s\":%.9g,"
                         "\"data_parallel_s\":%.9g,\"speedup_vs_one\":%.6g,\"speedup_vs_dp\":%.6g,\"peak_mem_bytes\":%.0f,"
                         "\"stages\":[",
                      layers, workers, cost_partition_noam(p), pr->bottleneck_s, pr->one_worker_s, pr->data_parallel_s,
                      pr->speedup_vs_one, pr->speedup_vs_dp, pr->peak_mem_bytes);
        for (int s = 0; s < p->stages; s++) {
            const cost_stage_pred *st = &pr->stage[s];
            pl_buf_printf(b, "%s{\"first_layer\":%d,\"last_layer\":%d,\"replicas\":%d,\"first_worker\":%d,"
                             "\"compute_s\":%.9g,\"allreduce_s\":%.9g,\"time_s\":%.9g,\"transfer_in_s\":%.9g,"
                             "\"inflight\":%d,\"mem_bytes\":%.0f}",
                          s ? "," : "", p->bound[s], p->bound[s + 1] - 1, p->replicas[s], st->first_worker, st->compute_s,
                          st->allreduce_s, st->time_s, st->transfer_in_s, st->inflight, st->mem_bytes);
        }
        pl_buf_puts(b, "]}\n");
        return;
    }
    pl_buf_printf(b, "model %s (%d layers), hardware %s (%d x %d devices), method %s%s%s, %d workers\n",
                  p->model[0] ? p->model : "-", layers, p->hardware[0] ? p->hardware : "-", hw->nodes,
                  hw->devices_per_node, p->method, pr->hierarchy[0] ? ", hierarchy " : "", pr->hierarchy, workers);
    pl_buf_puts(b, "config ");
    cost_plan_config(p, b);
    pl_buf_printf(b, "   NOAM %d   predicted %.6g ms per minibatch   peak memory %.3f GiB\n", cost_partition_noam(p),
                  pr->bottleneck_s * 1e3, pr->peak_mem_bytes / 1073741824.0);
    if (strcmp(pr->hierarchy, "pipedream") == 0) {
        pl_buf_puts(b, "pipedream config ");
        cost_plan_hier_config(p, b);
        pl_buf_printf(b, "   time per stage %.6g ms (PipeDream's level-by-level cost model; the predicted time above "
                         "rates the same stages as the exact hierarchy does)\n", pr->hier_time_s * 1e3);
        if (!cost_plan_hier_consecutive(p))
            pl_buf_puts(b, "note: PipeDream runs each server-level stage's pipeline on every one of its servers; the "
                           "flat form above (partition file, simulate) gives each stage consecutive devices instead\n");
    }
    pl_buf_printf(b, "throughput %.3gx one worker (%.6g ms), %.3gx data parallelism over %d workers (%.6g ms)\n\n",
                  pr->speedup_vs_one, pr->one_worker_s * 1e3, pr->speedup_vs_dp, workers, pr->data_parallel_s * 1e3);
    pl_buf_printf(b, "%-5s %-11s %8s %-11s %12s %12s %12s %12s %8s %10s\n", "stage", "layers", "replicas", "workers",
                  "compute_ms", "allreduce_ms", "time_ms", "xfer_in_ms", "inflight", "mem_GiB");
    for (int s = 0; s < p->stages; s++) {
        const cost_stage_pred *st = &pr->stage[s];
        char lay[32], wk[32];
        snprintf(lay, sizeof lay, "%d-%d", p->bound[s], p->bound[s + 1] - 1);
        snprintf(wk, sizeof wk, "%d-%d", st->first_worker, st->first_worker + p->replicas[s] - 1);
        pl_buf_printf(b, "%-5d %-11s %8d %-11s %12.6g %12.6g %12.6g %12.6g %8d %10.3f\n", s, lay, p->replicas[s], wk,
                      st->compute_s * 1e3, st->allreduce_s * 1e3, st->time_s * 1e3, st->transfer_in_s * 1e3, st->inflight,
                      st->mem_bytes / 1073741824.0);
    }
}

/* Plans model m on hw with the options' method (capacity cap bytes, 0 = none); returns PL_OK
 * and *p (predictions attached), or the library's error in e. */
static int make_plan(const opts *o, const cost_model *m, const cost_hw *hw, double cap, cost_partition **p, pl_err *e) {
    cost_opts co;
    cost_opts_init(&co, m);
    if (o->microbatch) co.microbatch_size = o->microbatch;
    if (o->precision) co.precision = (cost_precision)cost_precision_parse(o->precision);
    cost_part_layer *y = NULL;
    int rc = cost_part_layers_from_model(m, hw, &co, &y, e);
    if (rc != PL_OK) return rc;
    cost_part_topo t;
    cost_part_topo_from_hw(hw, &t);
    /* the profile's measured all-reduce prices every replicated stage's (and so the replication
     * decision), as run and simulate price REDUCE_GRAD (cli_allreduce_link) */
    cost_hw link;
    cost_ar_link measured = {0, 0};
    if (cli_allreduce_link("partition", m, o->ar_link, 0, "the hardware's links", &link) >= 0)
        measured = (cost_ar_link){link.intra_latency_s, link.intra_bandwidth_Bps};
    cost_allreduce_model ar = strcmp(o->allreduce, "pipedream") == 0 ? COST_ALLREDUCE_PIPEDREAM : COST_ALLREDUCE_RING;
    if (strcmp(o->method, "balance") == 0) {
        cost_balance_opts bo = {.stages = o->workers, .by_memory = o->by_memory, .capacity_bytes = cap,
                                .inflight = o->inflight, .weight_versions = o->weight_versions};
        rc = cost_plan_balance(y, m->n, &bo, p, e);
        /* The split balances compute only; the predictions add the machine's transfers and the
         * data-parallel baseline's all-reduce. */
        if (rc == PL_OK && (rc = cost_plan_evaluate(*p, y, m->n, &t, ar, &bo, e)) != PL_OK) {
            cost_partition_free(*p);
            *p = NULL;
        }
    } else {
        cost_pipedream_opts po = {.workers = o->workers, .capacity_bytes = cap, .straight = o->straight,
                                  .allreduce = ar, .ar_link = measured};
        if (o->hierarchy && strcmp(o->hierarchy, "pipedream") == 0) po.hierarchy = COST_HIERARCHY_PIPEDREAM;
        rc = cost_plan_pipedream(y, m->n, &t, &po, p, e);
        int replicated = 0;
        for (int q = 0; rc == PL_OK && q < (*p)->stages; q++) replicated |= (*p)->replicas[q] > 1;
        if (replicated) /* says what priced the replicas when it is not the measurement asked for */
            cli_allreduce_link("partition", m, o->ar_link, 1, "the hardware's links", &link);
    }
    free(y);
    return rc;
}

/* Runs the command after parsing; returns an exit code. */
static int run(const opts *o) {
    pl_err e;
    pl_err_clear(&e);
    if (o->list_hw) {
        pl_buf b;
        pl_buf_init(&b);
        for (const char *const *n = cost_hw_preset_names(); n && *n; n++) pl_buf_printf(&b, "%s\n", *n);
        int rc = cli_write_output(NULL, &b);
        pl_buf_free(&b);
        return rc;
    }
    cost_hw hw;
    if (o->hardware) {
        if (cost_hw_load(&hw, o->hardware, &e) != PL_OK) return cli_fail(&e);
    } else {
        cost_hw_init(&hw);
        hw.nodes = 1;
        hw.devices_per_node = o->workers;
        snprintf(hw.name, sizeof hw.name, "free-links");
    }
    for (int k = 0; k < o->nsets; k++)
        if (cost_hw_set_kv(&hw, o->sets[k], &e) != PL_OK) return cli_fail(&e);
    if (cost_hw_check(&hw, &e) != PL_OK) return cli_fail(&e);
    double cap = 0;
    if (o->capacity) {
        if (strcmp(o->capacity, "device") == 0) {
            cap = hw.memory_bytes;
            if (!(cap > 0)) return cli_usage_error("partition", "--capacity: 'device', but the hardware has no device.memory_bytes");
        } else if (pl_parse_double(o->capacity, &cap) != 0 || cap <= 0) {
            return cli_usage_error("partition", "--capacity: needs a positive number of bytes or 'device' (got '%s')", o->capacity);
        }
    }
    cost_model *m = load_model(o, &e);
    if (!m) return cli_fail(&e);
    cost_partition *p = NULL;
    int rc = make_plan(o, m, &hw, cap, &p, &e);
    if (rc != PL_OK) {
        cost_model_free(m);
        return cli_fail(&e);
    }
    snprintf(p->model, sizeof p->model, "%s", m->name);
    snprintf(p->hardware, sizeof p->hardware, "%s", hw.name);
    cost_model_free(m);
    pl_buf out;
    pl_buf_init(&out);
    render(p, &hw, o->format, &out);
    rc = cli_write_output(NULL, &out);
    /* no --capacity: the plan is free to exceed a device (PipeDream's planner ignores memory);
     * say so when it does, rather than print a configuration that cannot run */
    if (rc == CLI_OK && !o->capacity && hw.memory_bytes > 0 && p->pred->peak_mem_bytes > hw.memory_bytes)
        fprintf(stderr, "pipelab partition: note: this configuration needs %.1f GiB on its fullest device, more than "
                        "the %.1f GiB of a %s device; %s--capacity device plans within it\n",
                p->pred->peak_mem_bytes / 1073741824.0, hw.memory_bytes / 1073741824.0, hw.name,
                strcmp(p->pred->hierarchy, "pipedream") == 0 ? "--hierarchy exact " : "");
    if (rc == CLI_OK && o->output) {
        pl_buf f;
        pl_buf_init(&f);
        cost_partition_write(p, &f);
        rc = cli_write_output(o->output, &f);
        pl_buf_free(&f);
    }
    pl_buf_free(&out);
    cost_partition_free(p);
    return rc;
}

int cli_partition(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc < 0) rc = run(&o);
    free(o.sets);
    return rc;
}
