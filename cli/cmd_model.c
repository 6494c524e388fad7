/* cmd_model.c: `pipelab model`: load or generate a model, print its layer table and, for a split,
 * the per-stage costs (compute, boundary transfer, memory) on a described machine. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_layout.h"
#include "cost.h"

int cli_model(int argc, char **argv);

static const char help_text[] =
    "usage: pipelab model --model SPEC [options]\n"
    "\n"
    "Loads or generates a model (an ordered table of layers) and prints its layers; with --split\n"
    "or --stages, the cost of every stage for one microbatch on the given hardware.\n"
    "\n"
    "model:\n"
    "  --model SPEC          a profile CSV (*.csv), a PipeDream graph.txt, or a generator:\n"
    "                        uniform:layers=8,fwd_s=1e-3[,bwd_s=..,param_bytes=..,out_bytes=..,stash_bytes=..]\n"
    "                        mlp:width=1024,depth=8,microbatch=32[,ffn_mult=4]\n"
    "                        transformer:layers=24,hidden=1024,heads=16,seq=1024,vocab=50257,microbatch=1\n"
    "  --microbatch B        samples per microbatch (default: the model's; profiles scale linearly)\n"
    "  --to-csv FILE         write the layer table as a profile CSV and exit\n"
    "\n"
    "hardware (needed for FLOP-based layers and for transfer times):\n"
    "  --hardware NAME|FILE  preset (cluster-a cluster-b dgx-a100 h100 h200 tpu-v3 cpu) or .ini file\n"
    "  --set KEY=VALUE       override a hardware key, e.g. link.inter.bandwidth=12.5e9 (repeatable)\n"
    "  --precision P         fp32 tf32 fp16 bf16 (default: fp16 for 2-byte models, else fp32)\n"
    "  --prefer-flops        use FLOPs when a layer has both FLOPs and measured seconds\n"
    "\n"
    "stages:\n"
    "  --split LIST          stage bounds 0,a,b,..,L or sizes =n1,n2,..\n"
    "  --stages P            even split into P stages\n"
    "  --weights flush|stash|2bw   weight versioning for memory (default flush)\n"
    "  --recompute none|full activation recomputation for memory (default none)\n"
    "  --inflight N          microbatches in flight per stage (default: P - stage, as 1F1B)\n"
    "  --format table|csv    output format (default table)\n"
    "\n"
    "GPU clusters (as pipelab simulate; needs --hardware): --tp T --pp P --dp D | --gpus N,\n"
    "  --global-batch B, --recompute none|selective|full, --sequence-parallel,\n"
    "  --distributed-optimizer, --megatron \"ARGS\": one GPU's layer table (--microbatch is b), or\n"
    "  its stages (Megatron's split by default) with the memory per GPU\n"
    "\n"
    "Stage ranks are the stage indices (rank -> node = rank / devices_per_node).\n"
    "exit status: 0 ok, 1 bad input, 2 bad usage\n";

#define MAX_SETS 64   /* --set flags at most */
#define HUMAN_MAX 32  /* room for human's text */
#define NAME_COLS 28  /* the table's column of layer names */

typedef struct opts {
    const char *model, *hardware, *split, *to_csv, *format;
    const char *sets[MAX_SETS];
    int nsets;
    int microbatch, stages, prefer_flops, precision;
    int inflight; /* --inflight N stored as N + 1; 0 = unset (1F1B default) */
    sched_weights weights;
    sched_recompute recompute;
    cli_layout lo;       /* the GPU-cluster layout flags (cli_layout.c) */
    cli_sched_args sa;   /* what cli_layout_finish fills for a schedule (unused here) */
} opts;

enum { O_MODEL = 1000, O_HW, O_SET, O_PREC, O_PREFER, O_MB, O_SPLIT, O_STAGES, O_WEIGHTS, O_RECOMP,
       O_INFLIGHT, O_FORMAT, O_TOCSV, O_HELP };

static const struct option long_opts[] = {
    CLI_LAYOUT_LONG_OPTS,
    {"model", required_argument, 0, O_MODEL},
    {"hardware", required_argument, 0, O_HW},
    {"set", required_argument, 0, O_SET},
    {"precision", required_argument, 0, O_PREC},
    {"prefer-flops", no_argument, 0, O_PREFER},
    {"microbatch", required_argument, 0, O_MB},
    {"split", required_argument, 0, O_SPLIT},
    {"stages", required_argument, 0, O_STAGES},
    {"weights", required_argument, 0, O_WEIGHTS},
    {"recompute", required_argument, 0, O_RECOMP},
    {"inflight", required_argument, 0, O_INFLIGHT},
    {"format", required_argument, 0, O_FORMAT},
    {"to-csv", required_argument, 0, O_TOCSV},
    {"help", no_argument, 0, O_HELP},
    {0, 0, 0, 0},
};

/* Finishes the layout flags (cli_layout_finish; the microbatch is --microbatch), which need
 * --hardware. Returns -1 to continue, or an exit code. */
static int layout_args(opts *o) {
    if (!o->hardware) return cli_usage_error("model", "the GPU-cluster layout needs --hardware");
    if (o->to_csv && (o->split || o->stages)) return cli_usage_error("model", "--to-csv writes the layers: no --split");
    sim_model_spec spec;
    sim_model_spec_init(&spec);
    spec.model = o->model;
    spec.precision = o->precision >= 0 ? cost_precision_name((cost_precision)o->precision) : NULL;
    int rc = cli_layout_finish("model", &o->lo, &o->sa, &spec, o->microbatch);
    if (rc >= 0) return rc;
    o->recompute = o->lo.l.recompute == COST_RC_FULL ? SCHED_RECOMPUTE_FULL : SCHED_RECOMPUTE_NONE;
    o->precision = o->lo.l.precision;
    if (!o->split && !o->stages && !o->to_csv) o->stages = -1; /* Megatron's split */
    return -1;
}

/* Parses argv into o; returns -1 to continue, or an exit code to return at once. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->format = "table";
    o->precision = -1;
    cli_layout_init(&o->lo);
    opterr = 0;
    optind = 1;
    int c, v;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        int lrc = cli_layout_opt("model", c == O_RECOMP ? CLI_O_RECOMP : c, optarg, &o->lo, &o->sa);
        if (lrc == CLI_EUSAGE) return lrc;
        if (lrc == CLI_OK) {
            o->recompute = o->sa.g.recompute; /* --recompute: the memory's policy too */
            continue;
        }
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_HW: o->hardware = optarg; break;
        case O_SET:
            if (o->nsets >= MAX_SETS) return cli_usage_error("model", "at most %d --set options", MAX_SETS);
            if (cli_set_arg("model", optarg)) return CLI_EUSAGE;
            o->sets[o->nsets++] = optarg;
            break;
        case O_PREC:
            o->precision = cost_precision_parse(optarg);
            if (o->precision < 0) return cli_usage_error("model", "--precision must be fp32, tf32, fp16 or bf16");
            break;
        case O_PREFER: o->prefer_flops = 1; break;
        case O_MB: if (cli_int_arg("model", "--microbatch", optarg, 1, 1 << 30, &o->microbatch)) return CLI_EUSAGE; break;
        case O_SPLIT: o->split = optarg; break;
        case O_STAGES: if (cli_int_arg("model", "--stages", optarg, 1, COST_MAX_LAYERS, &o->stages)) return CLI_EUSAGE; break;
        case O_WEIGHTS:
            v = sched_weights_parse(optarg);
            if (v < 0) return cli_usage_error("model", "--weights must be flush, stash or 2bw");
            o->weights = (sched_weights)v;
            break;
        case O_RECOMP:
            v = sched_recompute_parse(optarg);
            if (v < 0) return cli_usage_error("model", "--recompute must be none or full");
            o->recompute = (sched_recompute)v;
            break;
        case O_INFLIGHT: if (cli_int_arg("model", "--inflight", optarg, 0, 1 << 24, &o->inflight)) return CLI_EUSAGE; o->inflight++; break;
        case O_FORMAT: o->format = optarg; break;
        case O_TOCSV: o->to_csv = optarg; break;
        case O_HELP: fputs(help_text, stdout); return CLI_OK;
        default: return cli_usage_error("model", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("model", "unexpected argument '%s'", argv[optind]);
    if (o->lo.active) {
        int rc = layout_args(o);
        const cli_output outs[] = {{"--to-csv", o->to_csv}};
        return rc >= 0 ? rc : cli_outputs_check("model", outs, 1);
    }
    if (!o->model) return cli_usage_error("model", "--model is required");
    if (o->split && o->stages) return cli_usage_error("model", "give --split or --stages, not both");
    if (strcmp(o->format, "table") && strcmp(o->format, "csv"))
        return cli_usage_error("model", "--format must be table or csv");
    const cli_output outs[] = {{"--to-csv", o->to_csv}};
    return cli_outputs_check("model", outs, 1);
}

/* Appends the layer table (times at the chosen microbatch where they can be computed). */
static int layer_table(const cost_model *m, const cost_hw *hw, const cost_opts *co, int csv, pl_buf *b,
                       pl_err *e) {
    char h1[HUMAN_MAX], h2[HUMAN_MAX], h3[HUMAN_MAX];
    if (csv)
        pl_buf_puts(b, "layer,id,name,f_s,i_s,w_s,param_bytes,in_bytes,out_bytes,stash_bytes\n");
    else
        pl_buf_printf(b, "%5s  %-*s %11s %11s %11s %12s %12s %12s\n", "layer", NAME_COLS, "name", "F (s)", "I (s)",
                      "W (s)", "params", "out", "stash");
    for (int i = 0; i < m->n; i++) {
        const cost_layer *l = &m->layer[i];
        double f, ib, w;
        if (cost_layer_times(m, i, hw, co, &f, &ib, &w, e) != PL_OK) return PL_EINPUT;
        if (csv) {
            pl_buf_printf(b, "%d,", i);
            pl_buf_csv_field(b, l->id); /* names such as "Conv2d(3, 64, kernel_size=(11, 11))": quoted */
            pl_buf_putc(b, ',');
            pl_buf_csv_field(b, l->name);
            pl_buf_printf(b, ",%.9g,%.9g,%.9g,%lld,%lld,%lld,%lld\n", f, ib, w, (long long)l->param_bytes,
                          (long long)m->cut_bytes[i], (long long)l->out_bytes, (long long)l->stash_bytes);
        } else {
            char name[NAME_COLS + 1];
            snprintf(name, sizeof name, "%s", l->name ? l->name : "");
            pl_buf_printf(b, "%5d  %-*s %11.4g %11.4g %11.4g %12s %12s %12s\n", i, NAME_COLS, name, f, ib, w,
                          pl_human_bytes((double)l->param_bytes, h1, sizeof h1),
                          pl_human_bytes((double)l->out_bytes, h2, sizeof h2),
                          pl_human_bytes((double)l->stash_bytes, h3, sizeof h3));
        }
    }
    return PL_OK;
}

/* Appends the per-stage table of a partition; returns PL_OK or the error of a stage whose memory
 * does not count in 64 bits. */
static int stage_table(const cost_model *m, const cost_hw *hw, const cost_opts *co, const opts *o,
                       const cost_partition *p, const cost_stage *st, int csv, pl_buf *b, pl_err *e) {
    char h1[HUMAN_MAX], h2[HUMAN_MAX], h3[HUMAN_MAX];
    if (csv)
        pl_buf_puts(b, "stage,first,end,f_s,i_s,w_s,b_s,b_recompute_s,in_bytes,out_bytes,param_bytes,"
                       "stash_bytes,stash_recompute_bytes,send_s,inflight,memory_bytes\n");
    else
        pl_buf_printf(b, "%5s %9s %10s %10s %10s %10s %10s %12s %12s %10s %4s %12s\n", "stage", "layers", "F (s)",
                      "I (s)", "W (s)", "B (s)", "B+F (s)", "params", "out", "send (s)", "mbs", "memory");
    for (int s = 0; s < p->stages; s++) {
        int inflight = o->inflight ? o->inflight - 1 : p->stages - s;
        cost_memory mem;
        if (cost_stage_memory(&st[s], m, co, o->weights, o->recompute, inflight, &mem, e) != PL_OK) return PL_EINPUT;
        double send = s + 1 < p->stages && hw ? cost_transfer_s(hw, s, s + 1, st[s].out_bytes) : 0;
        if (csv) {
            pl_buf_printf(b, "%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%lld,%lld,%lld,%lld,%.9g,%d,%lld\n", s,
                          st[s].first, st[s].end, st[s].f_s, st[s].i_s, st[s].w_s, st[s].b_s, st[s].b_recompute_s,
                          (long long)st[s].in_bytes, (long long)st[s].out_bytes, (long long)st[s].param_bytes,
                          (long long)st[s].stash_bytes, (long long)st[s].stash_recompute_bytes, send, inflight,
                          (long long)mem.total_bytes);
        } else {
            char layers[24];
            snprintf(layers, sizeof layers, "%d-%d", st[s].first, st[s].end - 1);
            pl_buf_printf(b, "%5d %9s %10.4g %10.4g %10.4g %10.4g %10.4g %12s %12s %10.4g %4d %12s\n", s, layers,
                          st[s].f_s, st[s].i_s, st[s].w_s, st[s].b_s, st[s].b_recompute_s,
                          pl_human_bytes((double)st[s].param_bytes, h1, sizeof h1),
                          pl_human_bytes((double)st[s].out_bytes, h2, sizeof h2), send, inflight,
                          pl_human_bytes((double)mem.total_bytes, h3, sizeof h3));
        }
    }
    return PL_OK;
}

/* Loads the hardware into hw and generates one GPU's layer table of the layout into *m
 * (cost_gpt_model). Returns PL_OK or an error in e. */
static int layout_model(const opts *o, cost_hw *hw, cost_model **m, pl_err *e) {
    if (cost_hw_load(hw, o->hardware, e) != PL_OK) return PL_EINPUT;
    for (int k = 0; k < o->nsets; k++)
        if (cost_hw_set_kv(hw, o->sets[k], e) != PL_OK) return PL_EINPUT;
    if (cost_hw_check(hw, e) != PL_OK) return PL_EINPUT;
    *m = cost_gpt_model(&o->lo.l, hw, e);
    *hw = cost_layout_pipeline_hw(hw, &o->lo.l); /* stage s on pipeline rank s: its links */
    return *m ? PL_OK : PL_EINPUT;
}

/* Entry point of `pipelab model`; returns an exit code. */
int cli_model(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = o.lo.active ? NULL : cost_model_open(o.model, &e);
    if (!m && !o.lo.active) return cli_fail(&e);
    cost_hw hw, *hwp = NULL;
    cost_partition *p = NULL;
    cost_stage *st = NULL;
    pl_buf b;
    pl_buf_init(&b);
    if (o.lo.active && layout_model(&o, &hw, &m, &e) != PL_OK) goto fail;
    if (o.to_csv) {
        if (cost_model_write_csv(m, &b, &e) != PL_OK) goto fail;
        rc = cli_write_output(o.to_csv, &b);
        goto done;
    }
    if (o.lo.active) {
        hwp = &hw; /* loaded by layout_model */
    } else if (o.hardware) {
        if (cost_hw_load(&hw, o.hardware, &e) != PL_OK) goto fail;
        for (int k = 0; k < o.nsets; k++)
            if (cost_hw_set_kv(&hw, o.sets[k], &e) != PL_OK) goto fail;
        if (cost_hw_check(&hw, &e) != PL_OK) goto fail;
        hwp = &hw;
    } else if (o.nsets) {
        rc = cli_usage_error("model", "--set needs --hardware");
        goto done;
    }
    cost_opts co;
    cost_opts_init(&co, m);
    if (o.lo.active) co.optimizer_bytes_per_param = cost_gpt_optimizer_bytes(&o.lo.l);
    if (o.microbatch) co.microbatch_size = o.microbatch;
    if (o.precision >= 0) co.precision = (cost_precision)o.precision;
    co.prefer_flops = o.prefer_flops;
    int csv = strcmp(o.format, "csv") == 0;
    if (!csv) {
        char h1[HUMAN_MAX];
        double params_bytes = 0;
        for (int i = 0; i < m->n; i++) params_bytes += (double)m->layer[i].param_bytes;
        pl_buf_printf(&b, "model %s (%s): %d layers, %.4g parameters (%s), microbatch %d (described at %d)",
                      m->name, m->source, m->n, cost_model_params(m), pl_human_bytes(params_bytes, h1, sizeof h1),
                      co.microbatch_size, m->microbatch_size);
        if (hwp) pl_buf_printf(&b, ", hardware %s, %s", hwp->name, cost_precision_name(co.precision));
        const cost_layout *l = &o.lo.l;
        if (o.lo.active)
            pl_buf_printf(&b, "\none GPU of T %d x P %d (v %d) x D %d, recompute %s: its share of every layer (the "
                          "whole model: %.4g parameters, Narayanan et al. eq. 2); stage s on pipeline rank s",
                          l->tp, l->pp, l->chunks, l->dp, cost_recompute_name(l->recompute), cost_gpt_params(l));
        pl_buf_puts(&b, "\n\n");
    }
    if (!o.split && !o.stages) {
        if (layer_table(m, hwp, &co, csv, &b, &e) != PL_OK) goto fail;
    } else {
        p = o.split ? cost_partition_parse(o.split, m->n, &e)
            : o.stages < 0 ? cost_gpt_partition(&o.lo.l, &e) : cost_partition_even(m->n, o.stages, &e);
        if (!p) goto fail;
        st = pl_calloc((size_t)p->stages, sizeof *st);
        if (!st) {
            pl_errf(&e, PL_ENOMEM, "out of memory");
            goto fail;
        }
        if (cost_partition_eval(p, m, hwp, &co, st, &e) != PL_OK) goto fail;
        if (stage_table(m, hwp, &co, &o, p, st, csv, &b, &e) != PL_OK) goto fail;
    }
    rc = cli_write_output(NULL, &b);
    goto done;
fail:
    rc = cli_fail(&e);
done:
    pl_buf_free(&b);
    free(st);
    cost_partition_free(p);
    cost_model_free(m);
    return rc;
}
