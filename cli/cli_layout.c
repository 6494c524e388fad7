/* cli_layout.c: simulate's parallel-layout flags, Megatron-LM command lines read as the same
 * settings (--megatron), and the figures a layout run prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_layout.h"

/* Vocabulary when a Megatron command line does not say: GPT-2's BPE padded to a multiple of
 * 1024, the 51,200 of Narayanan et al. (SC21). */
#define DEFAULT_VOCAB 51200
/* Longest --megatron text read, and most words in it. */
#define MEGATRON_MAX_TEXT 8192
#define MEGATRON_MAX_WORDS 512
/* Largest value of a layout count. */
#define LAYOUT_MAX (1 << 24)

/* Fills lo with "nothing given". */
void cli_layout_init(cli_layout *lo) {
    memset(lo, 0, sizeof *lo);
    cost_layout_init(&lo->l);
    lo->recompute = -1;
}

/* Returns CLI_OK after reading a positive count for flag into *out, else CLI_EUSAGE. */
static int count_arg(const char *cmd, const char *flag, const char *v, int *out) {
    return cli_int_arg(cmd, flag, v, 1, LAYOUT_MAX, out) ? CLI_EUSAGE : CLI_OK;
}

/* Notes that flag asks for the layout (lo->first: the first that did). Returns lo. */
static cli_layout *asks(cli_layout *lo, const char *flag) {
    lo->active = 1;
    if (!lo->first) lo->first = flag;
    return lo;
}

/* Applies a layout flag or --recompute (see cli_layout.h). */
int cli_layout_opt(const char *cmd, int c, const char *v, cli_layout *lo, cli_sched_args *a) {
    switch (c) {
    case CLI_O_TP: return count_arg(cmd, "--tp", v, &asks(lo, "--tp")->tp);
    case CLI_O_DP: return count_arg(cmd, "--dp", v, &asks(lo, "--dp")->dp);
    case CLI_O_PP: return count_arg(cmd, "--pp", v, &asks(lo, "--pp")->pp);
    case CLI_O_GBATCH: return count_arg(cmd, "--global-batch", v, &asks(lo, "--global-batch")->gbatch);
    case CLI_O_SEQPAR: asks(lo, "--sequence-parallel")->seqpar = 1; return CLI_OK;
    case CLI_O_DISTOPT: asks(lo, "--distributed-optimizer")->distopt = 1; return CLI_OK;
    case CLI_O_FLASH: asks(lo, "--flash-attention")->flash = 1; return CLI_OK;
    case CLI_O_NOSG: asks(lo, "--no-scatter-gather")->nosg = 1; return CLI_OK;
    case CLI_O_MEGATRON: asks(lo, "--megatron")->megatron = v; return CLI_OK;
    case CLI_O_GPUS: return count_arg(cmd, "--gpus", v, &asks(lo, "--gpus")->gpus);
    case CLI_O_RECOMP: {
        int r = cost_recompute_parse(v);
        if (r < 0) return cli_usage_error(cmd, "--recompute must be none, selective or full (got '%s')", v);
        lo->recompute = r;
        if (r == COST_RC_SELECTIVE) asks(lo, "--recompute selective");
        a->g.recompute = r == COST_RC_FULL ? SCHED_RECOMPUTE_FULL : SCHED_RECOMPUTE_NONE;
        a->have_recompute = 1;
        return CLI_OK;
    }
    default: return -1;
    }
}

/* The settings a Megatron-LM command line gives (0 / -1: not given). */
typedef struct megatron_args {
    int tp, pp, layers_per_virtual, layers, hidden, heads, seq, vocab, mbs, gbs;
    int recompute, seqpar, distopt, flash, nosg, fp16, bf16;
} megatron_args;

/* Megatron-LM flags that take a number, and where it goes. */
typedef struct mg_num {
    const char *flag;
    size_t off;
} mg_num;
#define MG(flag, field) {flag, offsetof(megatron_args, field)}
static const mg_num mg_nums[] = {
    MG("--tensor-model-parallel-size", tp), MG("--pipeline-model-parallel-size", pp),
    MG("--num-layers-per-virtual-pipeline-stage", layers_per_virtual), MG("--num-layers", layers),
    MG("--hidden-size", hidden), MG("--num-attention-heads", heads), MG("--seq-length", seq),
    MG("--vocab-size", vocab), MG("--micro-batch-size", mbs), MG("--global-batch-size", gbs),
};
/* Megatron-LM switches, and where they go. */
static const mg_num mg_switches[] = {
    MG("--sequence-parallel", seqpar), MG("--use-distributed-optimizer", distopt), MG("--fp16", fp16),
    MG("--bf16", bf16), MG("--use-flash-attn", flash), MG("--no-scatter-gather-tensors-in-pipeline", nosg),
};

/* Sets the recomputation from a Megatron flag, refusing a second, different one. Returns CLI_OK
 * or CLI_EUSER. */
static int mg_recompute(megatron_args *m, int r, const char *flag) {
    if (m->recompute >= 0 && m->recompute != r) {
        fprintf(stderr, "pipelab: --megatron: %s contradicts the recomputation set before (%s)\n", flag,
                cost_recompute_name((cost_recompute)m->recompute));
        return CLI_EUSER;
    }
    m->recompute = r;
    return CLI_OK;
}

/* Reads word w (and its value at *i + 1) of a Megatron command line into m, noting what pipelab
 * ignores in ign. Returns CLI_OK or CLI_EUSER after printing what is wrong. */
static int mg_word(char **w, int n, int *i, megatron_args *m, pl_buf *ign) {
    /* argparse's --flag=value: the flag is what comes before the '=', its value what follows */
    char *eq = strchr(w[*i], '=');
    if (eq) *eq = '\0';
    const char *f = w[*i];
    const char *val = eq ? eq + 1 : *i + 1 < n && strncmp(w[*i + 1], "--", 2) != 0 ? w[*i + 1] : NULL;
    int step = eq ? 0 : 1; /* words the value takes after the flag's */
    for (size_t k = 0; k < sizeof mg_nums / sizeof *mg_nums; k++) {
        if (strcmp(f, mg_nums[k].flag) != 0) continue;
        long v;
        if (!val || pl_parse_long(val, 1, LAYOUT_MAX, &v)) {
            fprintf(stderr, "pipelab: --megatron: %s needs a whole number >= 1 (got '%s')\n", f, val ? val : "");
            return CLI_EUSER;
        }
        *(int *)(void *)((char *)m + mg_nums[k].off) = (int)v; /* given twice: the last, as argparse */
        *i += step;
        return CLI_OK;
    }
    for (size_t k = 0; k < sizeof mg_switches / sizeof *mg_switches; k++)
        if (strcmp(f, mg_switches[k].flag) == 0) {
            if (eq) {
                fprintf(stderr, "pipelab: --megatron: %s takes no value (got '%s=%s')\n", f, f, val);
                return CLI_EUSER;
            }
            *(int *)(void *)((char *)m + mg_switches[k].off) = 1;
            return CLI_OK;
        }
    if (!strcmp(f, "--checkpoint-activations")) return mg_recompute(m, COST_RC_FULL, f);
    if (!strcmp(f, "--recompute-activations")) return mg_recompute(m, COST_RC_SELECTIVE, f);
    if (!strcmp(f, "--recompute-granularity")) {
        int r = val ? cost_recompute_parse(val) : -1;
        if (r != COST_RC_FULL && r != COST_RC_SELECTIVE) {
            fprintf(stderr, "pipelab: --megatron: --recompute-granularity must be full or selective (got '%s')\n",
                    val ? val : "");
            return CLI_EUSER;
        }
        *i += step;
        return mg_recompute(m, r, f);
    }
    pl_buf_printf(ign, " %s", f);
    if (val && !eq) (*i)++;
    return CLI_OK;
}

/* Reads a Megatron-LM command line into m (words split at blanks; a word not starting with "--"
 * is the value of the flag before it). Flags that do not change timing are listed once on
 * stderr. Returns CLI_OK or CLI_EUSER. */
static int mg_parse(const char *text, megatron_args *m) {
    memset(m, 0, sizeof *m);
    m->recompute = -1;
    if (strlen(text) > MEGATRON_MAX_TEXT) {
        fprintf(stderr, "pipelab: --megatron: longer than %d characters\n", MEGATRON_MAX_TEXT);
        return CLI_EUSER;
    }
    char *copy = strdup(text), *w[MEGATRON_MAX_WORDS], *save = NULL;
    if (!copy) return CLI_EUSER;
    int n = 0, rc = CLI_OK;
    for (char *t = strtok_r(copy, " \t\n\\", &save); t && n < MEGATRON_MAX_WORDS; t = strtok_r(NULL, " \t\n\\", &save))
        w[n++] = t;
    pl_buf ign;
    pl_buf_init(&ign);
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        if (strncmp(w[i], "--", 2) != 0) {
            fprintf(stderr, "pipelab: --megatron: '%s' is not a flag (word %d)\n", w[i], i + 1);
            rc = CLI_EUSER;
        } else {
            rc = mg_word(w, n, &i, m, &ign);
        }
    }
    if (rc == CLI_OK && m->fp16 && m->bf16) {
        fprintf(stderr, "pipelab: --megatron: --fp16 and --bf16 contradict each other\n");
        rc = CLI_EUSER;
    }
    if (rc == CLI_OK && ign.len) fprintf(stderr, "pipelab: --megatron: ignored (no effect on timing):%s\n", ign.data);
    pl_buf_free(&ign);
    free(copy);
    return rc;
}

/* Merges one setting: the flag's value (0 = not given) and Megatron's (0 = not given) must agree.
 * Sets *dst to the one given (dflt when neither). Returns CLI_OK or CLI_EUSER. */
static int merge(const char *flag, int mine, const char *mg_flag, int theirs, int dflt, int *dst) {
    if (mine && theirs && mine != theirs) {
        fprintf(stderr, "pipelab: %s %d contradicts --megatron's %s %d\n", flag, mine, mg_flag, theirs);
        return CLI_EUSER;
    }
    *dst = mine ? mine : theirs ? theirs : dflt;
    return CLI_OK;
}

/* Fills lo->l's model sizes from the transformer spec, or from Megatron's (which must agree).
 * Returns CLI_OK or CLI_EUSER. */
static int model_sizes(cli_layout *lo, const megatron_args *m, const char *spec) {
    cost_transformer_opts t = {0};
    pl_err e;
    pl_err_clear(&e);
    if (spec && cost_transformer_spec(spec, &t, &e) != PL_OK) return cli_fail(&e);
    cost_layout *l = &lo->l;
    if (merge("--model layers", t.layers, "--num-layers", m->layers, 0, &l->layers) ||
        merge("--model hidden", t.hidden, "--hidden-size", m->hidden, 0, &l->hidden) ||
        merge("--model heads", t.heads, "--num-attention-heads", m->heads, 0, &l->heads) ||
        merge("--model seq", t.seq, "--seq-length", m->seq, 0, &l->seq) ||
        merge("--model vocab", t.vocab, "--vocab-size", m->vocab, lo->megatron ? DEFAULT_VOCAB : 0, &l->vocab))
        return CLI_EUSER;
    if (!l->layers || !l->hidden || !l->heads || !l->seq || !l->vocab) {
        fprintf(stderr, "pipelab: the parallel layout needs the model: --model transformer:layers=L,hidden=H,heads=A,"
                        "seq=S,vocab=V or the same in --megatron\n");
        return CLI_EUSER;
    }
    return CLI_OK;
}

/* Fills lo->l's parallel settings from the flags and Megatron's. Returns CLI_OK or CLI_EUSER. */
static int parallel_settings(cli_layout *lo, const megatron_args *m, const cli_sched_args *a, int mbs) {
    cost_layout *l = &lo->l;
    int ranks = a->have_ranks ? a->g.ranks : 0, chunks = a->g.chunks > 1 ? a->g.chunks : 0, mg_chunks = 0;
    if (lo->pp && ranks && lo->pp != ranks) {
        fprintf(stderr, "pipelab: --pp %d and --ranks %d contradict each other\n", lo->pp, ranks);
        return CLI_EUSER;
    }
    if (m->layers_per_virtual && m->layers && m->pp) mg_chunks = m->layers / (m->layers_per_virtual * (m->pp ? m->pp : 1));
    if (merge("--tp", lo->tp, "--tensor-model-parallel-size", m->tp, 1, &l->tp) ||
        merge("--pp", lo->pp ? lo->pp : ranks, "--pipeline-model-parallel-size", m->pp, 1, &l->pp) ||
        merge("--chunks", chunks, "--num-layers-per-virtual-pipeline-stage (as chunks)", mg_chunks, 1, &l->chunks) ||
        merge("--microbatch-size", mbs, "--micro-batch-size", m->mbs, 1, &l->microbatch) ||
        merge("--global-batch", lo->gbatch, "--global-batch-size", m->gbs, 0, &l->global_batch))
        return CLI_EUSER;
    if (m->layers_per_virtual && (!m->layers || m->layers % (m->layers_per_virtual * l->pp))) {
        fprintf(stderr, "pipelab: --megatron: --num-layers-per-virtual-pipeline-stage %d does not divide the layers "
                        "of a pipeline stage\n", m->layers_per_virtual);
        return CLI_EUSER;
    }
    if (lo->recompute >= 0 && m->recompute >= 0 && lo->recompute != m->recompute) {
        fprintf(stderr, "pipelab: --recompute %s contradicts --megatron's %s recomputation\n",
                cost_recompute_name((cost_recompute)lo->recompute), cost_recompute_name((cost_recompute)m->recompute));
        return CLI_EUSER;
    }
    l->recompute = (cost_recompute)(lo->recompute >= 0 ? lo->recompute : m->recompute >= 0 ? m->recompute : COST_RC_NONE);
    l->dp = lo->dp ? lo->dp : 1;
    if (lo->gpus) { /* Megatron's D: the world size over T P */
        long tpp = (long)l->tp * l->pp;
        if (lo->gpus % tpp || (lo->dp && (long)lo->dp * tpp != lo->gpus)) {
            fprintf(stderr, "pipelab: --gpus %d does not divide into tensor %d x pipeline %d%s\n", lo->gpus, l->tp,
                    l->pp, lo->dp ? " x --dp" : " groups");
            return CLI_EUSER;
        }
        l->dp = (int)(lo->gpus / tpp);
    }
    l->sequence_parallel = lo->seqpar || m->seqpar;
    l->distributed_optimizer = lo->distopt || m->distopt;
    l->flash_attention = lo->flash || m->flash;
    l->no_scatter_gather = lo->nosg || m->nosg;
    l->precision = m->bf16 ? COST_BF16 : COST_FP16;
    return CLI_OK;
}

/* Merges the flags and --megatron into the layout and the schedule's flags (see cli_layout.h). */
int cli_layout_finish(const char *cmd, cli_layout *lo, cli_sched_args *a, sim_model_spec *spec, int mbs) {
    if (!lo->active) return -1;
    if (!spec->model && !lo->megatron)
        return cli_usage_error(cmd, "%s is a setting of the parallel layout, which needs the model: --model "
                               "transformer:layers=L,hidden=H,heads=A,seq=S,vocab=V (or --megatron)", lo->first);
    if (a->from) return cli_usage_error(cmd, "the parallel layout generates its schedule: use --kind, not --from");
    if (a->have_mb) return cli_usage_error(cmd, "%s asks for the parallel layout, whose microbatches are --global-batch / "
                                           "(--microbatch-size x --dp): leave --microbatches out", lo->first);
    megatron_args m;
    int rc = lo->megatron ? mg_parse(lo->megatron, &m) : (mg_parse("", &m), CLI_OK);
    if (rc == CLI_OK) rc = model_sizes(lo, &m, spec->model);
    if (rc == CLI_OK) rc = parallel_settings(lo, &m, a, mbs);
    if (rc != CLI_OK) return rc;
    if (spec->precision) { /* --precision: a 2-byte type, as Megatron's --fp16 / --bf16 */
        int p = cost_precision_parse(spec->precision);
        if ((p != COST_FP16 && p != COST_BF16) || ((m.fp16 || m.bf16) && p != (int)lo->l.precision)) {
            fprintf(stderr, "pipelab: --precision %s: the layout trains in mixed precision, fp16 or bf16%s\n",
                    spec->precision, m.fp16 || m.bf16 ? ", as --megatron says" : "");
            return CLI_EUSER;
        }
        lo->l.precision = (cost_precision)p;
    }
    pl_err e;
    pl_err_clear(&e);
    if (cost_layout_check(&lo->l, NULL, &e) != PL_OK) return cli_fail(&e);
    a->g.ranks = lo->l.pp;
    a->have_ranks = 1;
    a->g.chunks = lo->l.chunks;
    a->g.microbatches = cost_layout_microbatches(&lo->l);
    a->have_mb = 1;
    a->g.recompute = lo->l.recompute == COST_RC_FULL ? SCHED_RECOMPUTE_FULL : SCHED_RECOMPUTE_NONE;
    if (!a->kind) a->kind = lo->l.chunks > 1 ? "interleaved" : "1f1b";
    spec->layout = &lo->l;
    if (!spec->model) spec->model = "megatron"; /* the sizes came from --megatron */
    return -1;
}

/* The figures of a layout run, in order: name, value, unit (table only). */
typedef struct layout_fig {
    const char *name;
    double v;
    const char *unit;
} layout_fig;
#define NFIGS 24

/* Fills f[NFIGS] with r's figures. */
static void figures(const sim_layout_report *r, layout_fig *f) {
    layout_fig x[NFIGS] = {
        {"gpus", r->gpus, ""},
        {"microbatches_per_pipeline", r->microbatches, ""},
        {"params", r->params, "(Narayanan et al. eq. 2)"},
        {"model_flops", r->model_flops, "per iteration (Narayanan et al. eq. 3, counts full recomputation)"},
        {"tflops_per_gpu", r->tflops_per_gpu, "TFLOP/s (model_flops / iteration / GPUs)"},
        {"mfu", r->mfu, "(72 B s l h^2 (1 + s/6h + V/12lh) / iteration / GPUs / peak)"},
        {"hfu", r->hfu, "(FLOPs executed, recomputation included / iteration / GPUs / peak)"},
        {"peak_mem_bytes", r->mem.total_bytes, ""},
        {"peak_mem_rank", r->peak_rank, "(pipeline rank)"},
        {"mem_weights_bytes", r->mem.weights_bytes, "fp16"},
        {"mem_grad_bytes", r->mem.grad_bytes, "fp16"},
        {"mem_optimizer_bytes", r->mem.optimizer_bytes, "fp32 master, Adam m and v"},
        {"mem_activation_bytes", r->mem.activation_bytes, "peak stashes and working set"},
        {"capacity_bytes", r->capacity_bytes, ""},
        {"oom", r->oom, ""},
        {"rank0_gemm_s", r->part_s[COST_PART_GEMM], "s per iteration on pipeline rank 0: weight GEMMs"},
        {"rank0_attention_s", r->part_s[COST_PART_ATTENTION], "s: attention core (score, softmax, dropout, context)"},
        {"rank0_elementwise_s", r->part_s[COST_PART_ELEMENTWISE], "s: layernorms, GeLU, dropout, residuals"},
        {"rank0_tp_comm_s", r->part_s[COST_PART_TP_COMM], "s: tensor-parallel collectives"},
        {"rank0_dp_sync_s", r->dp_sync_s, "s: data-parallel gradient synchronization"},
        {"rank0_optimizer_s", r->optimizer_s, "s: optimizer step"},
        {"rank0_exchange_s", r->exchange_s, "s: blocking pipeline exchanges (transfer, all-gather)"},
        {"rank0_idle_s", r->idle_s, "s: idle (pipeline bubble, waits for data)"},
        {"rank0_other_s", r->other_s, "s: embedding (and head when P = 1), embedding all-reduce"},
    };
    memcpy(f, x, sizeof x);
}

/* Appends the table lines of a layout run. */
void cli_layout_table(const sim_layout_report *r, const cost_layout *l, pl_buf *b) {
    layout_fig f[NFIGS];
    figures(r, f);
    pl_buf_printf(b, "%-18s T %d x P %d (v %d) x D %d, b %d, B %d, recompute %s%s%s%s, %s\n", "layout", l->tp, l->pp,
                  l->chunks, l->dp, l->microbatch, l->global_batch, cost_recompute_name(l->recompute),
                  l->sequence_parallel ? ", sequence parallel" : "",
                  l->distributed_optimizer ? ", distributed optimizer" : "",
                  l->flash_attention ? ", flash attention" : "", cost_precision_name(l->precision));
    for (int k = 0; k < NFIGS; k++)
        pl_buf_printf(b, "%-18s %.9g %s\n", f[k].name, f[k].v, f[k].unit);
}

/* Appends the CSV header (header = 1) or row cells of a layout run, each with a leading comma. */
void cli_layout_csv(const sim_layout_report *r, int header, pl_buf *b) {
    layout_fig f[NFIGS];
    figures(r, f);
    for (int k = 0; k < NFIGS; k++) {
        if (header) pl_buf_printf(b, ",%s", f[k].name);
        else pl_buf_printf(b, ",%.9g", f[k].v);
    }
}

/* Appends the JSON object of a layout run: the layout and its figures. */
void cli_layout_json(const sim_layout_report *r, const cost_layout *l, pl_buf *b) {
    layout_fig f[NFIGS];
    figures(r, f);
    pl_buf_printf(b, "{\"tp\":%d,\"pp\":%d,\"chunks\":%d,\"dp\":%d,\"microbatch_size\":%d,\"global_batch\":%d,"
                     "\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"seq\":%d,\"vocab\":%d,\"recompute\":\"%s\","
                     "\"sequence_parallel\":%d,\"distributed_optimizer\":%d,\"flash_attention\":%d,\"scatter_gather\":%d,\"precision\":\"%s\"",
                  l->tp, l->pp, l->chunks, l->dp, l->microbatch, l->global_batch, l->layers, l->hidden, l->heads,
                  l->seq, l->vocab, cost_recompute_name(l->recompute), l->sequence_parallel,
                  l->distributed_optimizer, l->flash_attention, !l->no_scatter_gather,
                  cost_precision_name(l->precision));
    for (int k = 0; k < NFIGS; k++) pl_buf_printf(b, ",\"%s\":%.9g", f[k].name, f[k].v);
    pl_buf_putc(b, '}');
}
