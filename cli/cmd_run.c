/* cmd_run.c: `pipelab run`: execute a lowered schedule for real on the CPU executor (threads, or
 * one MPI process per rank), print the measurements beside the simulator's prediction from a
 * profile of this machine, and store both runs. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pl_sched.h"

#ifdef PIPELAB_HAVE_PL_EXEC
#include "exec_cuda.h"
#include "run_drive.h"
#include "store.h"

static const char help_text[] =
    "usage: pipelab run (--kind K --ranks P --microbatches M | --from FILE) [options]\n"
    "\n"
    "Lowers the schedule and executes it on a real fp32 model, one worker per rank: a stack of\n"
    "dense blocks (Linear h->f, GELU, Linear f->h, residual) trained with SGD against a fixed\n"
    "random target network. Warm-up passes, then timed passes (one pass = one walk of the\n"
    "lowered schedule). Prints iteration time, throughput, per-rank busy/idle/bubble and peak\n"
    "memory beside the simulator's prediction for the same configuration, made from a profile\n"
    "of this machine, and stores both (kind \"measured\" and \"simulated\", same tag).\n"
    "\n"
    "schedule:\n"
    "  --kind K --ranks P --microbatches M [--chunks V] [--iterations N] [--recompute none|full]\n"
    "  --from FILE [--legacy-letters]   a .sched file or a PyTorch CSV\n"
    "model:\n"
    "  --width H             hidden size (default 256)\n"
    "  --depth L             blocks (default 2 x stages)\n"
    "  --ffn F               inner size (default 4 H)\n"
    "  --microbatch-size B   rows per microbatch (default 16)\n"
    "  --stage-blocks N,N,.. blocks per stage (default: L split evenly, first stages take more)\n"
    "  --lr X --momentum X   SGD (default 0.05, 0)\n"
    "  --seed N              initial weights N, target network N+1, data N+2 (default 1)\n"
    "run:\n"
    "  --warmup N --timed N  passes (default 1 and 5)\n"
    "  --transport threads|mpi  threads in this process (default), or one MPI process per rank:\n"
    "                        mpirun -np P pipelab run --transport mpi ...\n"
    "  --oversubscribe       allow more ranks than cores (timings then measure time-slicing)\n"
    "  --no-pin              do not pin worker threads to cores\n"
    "  --timeout S           longest wait for a message before the run fails (default 60)\n"
    "  --mem-budget B        per-rank memory budget in bytes; exceeding it fails the run\n"
    "  --max-memory SIZE     memory pipelab may use in this process (8e9, 16GiB; default: the\n"
    "                        physical memory or ulimit -v, or $PIPELAB_MAX_MEMORY); a schedule or\n"
    "                        model that needs more is refused before the run\n"
    "  --backend cpu|cuda    where the ranks compute (default cpu). cuda: cuBLAS GEMMs and CUDA\n"
    "                        kernels, rank r on GPU r mod G, peer copies between ranks on a\n"
    "                        stream of their own (threads in this process)\n"
    "  --precision P         cuda: GEMM operands fp32 (default), tf32 or bf16; fp32 accumulation\n"
    "  --sm-split            cuda: ranks sharing a GPU each get an equal, fixed share of its SMs\n"
    "                        (green contexts), so one GPU emulates a multi-GPU pipeline\n"
    "  --gpus N              cuda: use the first N visible GPUs (default all)\n"
    "                        With --transport mpi: one process per rank, one GPU each, NCCL\n"
    "                        send/recv between them (mpirun -np P, P = ranks)\n"
    "prediction:\n"
    "  --profile FILE        profile CSV from `pipelab profile` (default: profile in-process)\n"
    "  --profile-reps N      repetitions of the in-process profile (default 20)\n"
    "  --profile-timing between|before  when the in-process profile is measured. between\n"
    "                        (default with the CPU backend, threads or MPI): by the run's own\n"
    "                        workers, in the gaps before its timed passes, each on its rank's\n"
    "                        core, so that a machine whose speed drifts is profiled at the\n"
    "                        moments it runs; outside the pass times. before: just before the\n"
    "                        run, on threads of its own (MPI: after, on rank 0; CUDA: before)\n"
    "  --profile-concurrency N  workers the before-profile times at once, pinned like the\n"
    "                        ranks (default: the ranks, at most the cores; 1 = one thread alone);\n"
    "                        given alone, it selects --profile-timing before\n"
    "  --save-profile FILE   write the in-process profile the prediction used (a profile CSV:\n"
    "                        between the passes, each block's row is its rank's own worker's)\n"
    "  --no-predict          no prediction\n"
    "output:\n"
    "  --format table|csv|json   (default table)\n"
    "  --trace               store one row per executed action (timelines)\n"
    "  --dump-weights FILE   write the final weights (all blocks, fp32, native byte order)\n"
    "  --tag NAME            label stored with both runs\n"
    "  --db PATH             results database (default results/out/pipelab.db)\n"
    "  --no-db               do not store\n"
    "\n"
    "A failing run (error, wrong message, memory budget, dead MPI rank) stores nothing and exits 1\n"
    "naming the rank and the action.\n"
    "exit status: 0 ok, 1 bad input or a failed run, 2 bad usage\n";

enum { O_WIDTH = 1000, O_DEPTH, O_FFN, O_MBS,
       O_SPLIT, O_LR, O_MOM, O_SEED, O_WARMUP, O_TIMED, O_TRANSPORT, O_OVERSUB, O_NOPIN, O_TIMEOUT, O_BUDGET,
       O_PROFILE, O_SAVEPROF, O_PREPS, O_PCONC, O_PTIMING, O_NOPRED, O_FORMAT, O_TRACE, O_DUMP, O_TAG, O_DB, O_NODB, O_FAULT, O_BACKEND, O_PREC, O_SMSPLIT, O_GPUS, O_MAXMEM, O_HELP };

static const struct option long_opts[] = {
    CLI_SCHED_LONG_OPTS,
    {"width", required_argument, 0, O_WIDTH}, {"depth", required_argument, 0, O_DEPTH},
    {"ffn", required_argument, 0, O_FFN}, {"microbatch-size", required_argument, 0, O_MBS},
    {"stage-blocks", required_argument, 0, O_SPLIT}, {"lr", required_argument, 0, O_LR},
    {"momentum", required_argument, 0, O_MOM}, {"seed", required_argument, 0, O_SEED},
    {"warmup", required_argument, 0, O_WARMUP}, {"timed", required_argument, 0, O_TIMED},
    {"transport", required_argument, 0, O_TRANSPORT}, {"oversubscribe", no_argument, 0, O_OVERSUB},
    {"no-pin", no_argument, 0, O_NOPIN}, {"timeout", required_argument, 0, O_TIMEOUT},
    {"mem-budget", required_argument, 0, O_BUDGET}, {"profile", required_argument, 0, O_PROFILE},
    {"profile-reps", required_argument, 0, O_PREPS}, {"profile-concurrency", required_argument, 0, O_PCONC},
    {"profile-timing", required_argument, 0, O_PTIMING}, {"save-profile", required_argument, 0, O_SAVEPROF}, {"no-predict", no_argument, 0, O_NOPRED},
    {"format", required_argument, 0, O_FORMAT}, {"trace", no_argument, 0, O_TRACE},
    {"dump-weights", required_argument, 0, O_DUMP}, {"tag", required_argument, 0, O_TAG},
    {"db", required_argument, 0, O_DB}, {"no-db", no_argument, 0, O_NODB},
    {"inject-fault", required_argument, 0, O_FAULT}, /* hidden: [KIND:]RANK:ACTION[:PASS] (tests) */
    {"backend", required_argument, 0, O_BACKEND}, {"precision", required_argument, 0, O_PREC},
    {"sm-split", no_argument, 0, O_SMSPLIT}, {"gpus", required_argument, 0, O_GPUS},
    {"max-memory", required_argument, 0, O_MAXMEM},
    {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0},
};

#define MAX_SPLIT 4096

/* The schedule flags' limits here, tighter than the generators': the executor starts one thread
 * (or process) per rank and walks every microbatch of every iteration for real. */
static const cli_sched_limits run_limits = {4096, 1 << 20, 4096, 1 << 16};

typedef struct opts {
    cli_sched_args a;
    const char *transport, *profile, *save_profile, *format, *dump, *tag, *db;
    const char *backend, *precision, *ptiming;
    int cuda, between;
    int depth, preps, pconc, no_predict, trace, no_db, mpi;
    int nsplit, split[MAX_SPLIT];
    uint64_t seed;
    exec_config c;
} opts;

/* Parses a finite number >= 0 for flag; returns 0, or -1 after printing a usage error. */
static int num_arg(const char *flag, const char *val, double *out) {
    return cli_num_arg("run", flag, val, 0, HUGE_VAL, out);
}

/* Parses "N,N,..." into o->split; returns 0 or -1 (usage error printed). */
static int split_arg(const char *val, opts *o) {
    o->nsplit = 0;
    const char *p = val;
    while (*p) {
        char num[32];
        size_t n = strcspn(p, ",");
        long v;
        if (n == 0 || n >= sizeof num || o->nsplit == MAX_SPLIT) break;
        memcpy(num, p, n);
        num[n] = '\0';
        if (pl_parse_long(num, 1, 1 << 20, &v)) break;
        o->split[o->nsplit++] = (int)v;
        p += n;
        if (*p == ',') p++;
        if (!*p) return 0;
    }
    cli_usage_error("run", "--stage-blocks: needs whole numbers >= 1 separated by commas (got '%s')", val);
    return -1;
}

/* Parses argv into o; returns -1 to continue, or an exit code. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    exec_config_default(&o->c);
    o->c.hidden = 256;
    o->c.microbatch_size = 16;
    o->transport = "threads";
    o->format = "table";
    o->preps = 20;
    o->seed = 1;
    opterr = 0;
    optind = 1;
    int c;
    double v;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        int src = cli_sched_opt("run", c, optarg, &o->a, &run_limits);
        if (src == CLI_EUSAGE) return src;
        if (src == CLI_OK) continue;
        switch (c) {
        case O_WIDTH: if (cli_int_arg("run", "--width", optarg, 1, 65536, &o->c.hidden)) return CLI_EUSAGE; break;
        case O_DEPTH: if (cli_int_arg("run", "--depth", optarg, 1, 1 << 20, &o->depth)) return CLI_EUSAGE; break;
        case O_FFN: if (cli_int_arg("run", "--ffn", optarg, 1, 1 << 20, &o->c.ffn)) return CLI_EUSAGE; break;
        case O_MBS: if (cli_int_arg("run", "--microbatch-size", optarg, 1, 1 << 20, &o->c.microbatch_size)) return CLI_EUSAGE; break;
        case O_SPLIT: if (split_arg(optarg, o)) return CLI_EUSAGE; break;
        case O_LR: if (num_arg("--lr", optarg, &o->c.lr)) return CLI_EUSAGE; break;
        case O_MOM: if (num_arg("--momentum", optarg, &o->c.momentum)) return CLI_EUSAGE; break;
        case O_SEED: {
            long sd;
            if (cli_long_arg("run", "--seed", optarg, 0, 0x7fffffffffffffffL - 2, &sd)) return CLI_EUSAGE;
            o->seed = (uint64_t)sd;
            break;
        }
        case O_WARMUP: if (cli_int_arg("run", "--warmup", optarg, 0, 1 << 20, &o->c.warmup_passes)) return CLI_EUSAGE; break;
        case O_TIMED: if (cli_int_arg("run", "--timed", optarg, 1, 1 << 20, &o->c.timed_passes)) return CLI_EUSAGE; break;
        case O_TRANSPORT: o->transport = optarg; break;
        case O_OVERSUB: o->c.oversubscribe = 1; break;
        case O_NOPIN: o->c.pin = 0; break;
        case O_TIMEOUT:
            if (num_arg("--timeout", optarg, &v)) return CLI_EUSAGE;
            if (v <= 0) return cli_usage_error("run", "--timeout: must be > 0 (got '%s')", optarg);
            o->c.timeout_s = v;
            break;
        case O_BUDGET: if (cli_num_arg("run", "--mem-budget", optarg, 0, 9.2e18, &v)) return CLI_EUSAGE; o->c.mem_budget_bytes = (size_t)v; break;
        case O_PROFILE: o->profile = optarg; break;
        case O_PREPS: if (cli_int_arg("run", "--profile-reps", optarg, 1, 1 << 20, &o->preps)) return CLI_EUSAGE; break;
        case O_PCONC: if (cli_int_arg("run", "--profile-concurrency", optarg, 1, 256, &o->pconc)) return CLI_EUSAGE; break;
        case O_PTIMING: o->ptiming = optarg; break;
        case O_SAVEPROF: o->save_profile = optarg; break;
        case O_NOPRED: o->no_predict = 1; break;
        case O_FORMAT: o->format = optarg; break;
        case O_TRACE: o->trace = 1; break;
        case O_DUMP: o->dump = optarg; break;
        case O_TAG: o->tag = optarg; break;
        case O_DB: o->db = optarg; break;
        case O_NODB: o->no_db = 1; break;
        case O_FAULT: {
            /* [KIND:]RANK:ACTION[:PASS], KIND one of exec_fault_name's (default error) */
            exec_fault_kind fk = EXEC_FAULT_ERROR;
            const char *spec = optarg;
            if ((*spec >= 'a' && *spec <= 'z') && strchr(spec, ':')) {
                char kn[32];
                size_t n = strcspn(spec, ":");
                if (n >= sizeof kn) n = sizeof kn - 1;
                memcpy(kn, spec, n);
                kn[n] = '\0';
                fk = exec_fault_parse(kn);
                if (fk == EXEC_FAULT_NONE) return cli_usage_error("run", "--inject-fault: unknown kind '%s'", kn);
                spec += strcspn(spec, ":") + 1;
            }
            /* each field a whole number in range: rank >= 0, action >= 1 (1-based), pass >= 0 */
            const char *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            const char *e2 = c2 ? c2 : c1 ? c1 + strlen(c1) : NULL;
            if (!c1 || (c2 && strchr(c2 + 1, ':')))
                return cli_usage_error("run", "--inject-fault: needs [KIND:]RANK:ACTION[:PASS] (got '%s')", optarg);
            char fr[24] = "", fa[24] = "", fp[24] = "0";
            long r, a, ps;
            if (c1 - spec < 24) snprintf(fr, sizeof fr, "%.*s", (int)(c1 - spec), spec);
            if (e2 - c1 - 1 < 24) snprintf(fa, sizeof fa, "%.*s", (int)(e2 - c1 - 1), c1 + 1);
            if (c2) snprintf(fp, sizeof fp, "%s", strlen(c2 + 1) < 24 ? c2 + 1 : "");
            if (pl_parse_long(fr, 0, INT_MAX, &r) || pl_parse_long(fa, 1, INT_MAX, &a) || pl_parse_long(fp, 0, INT_MAX, &ps))
                return cli_usage_error("run", "--inject-fault: rank >= 0, action >= 1 (1-based), pass >= 0 (got '%s')", optarg);
            o->c.fault = (exec_fault){fk, (int)r, (int)a - 1, (int)ps};
            break;
        }
        case O_BACKEND: o->backend = optarg; break;
        case O_PREC: o->precision = optarg; break;
        case O_SMSPLIT: o->c.sm_split = 1; break;
        case O_GPUS: if (cli_int_arg("run", "--gpus", optarg, 1, 4096, &o->c.cuda_devices)) return CLI_EUSAGE; break;
        case O_MAXMEM: if (cli_max_memory_arg("run", optarg)) return CLI_EUSAGE; break;
        case O_HELP: fputs(help_text, stdout); return CLI_OK;
        default: return cli_usage_error("run", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
    int rc = cli_sched_check("run", &o->a);
    if (rc >= 0) return rc;
    if (strcmp(o->format, "table") && strcmp(o->format, "csv") && strcmp(o->format, "json"))
        return cli_usage_error("run", "--format must be table, csv or json");
    if (strcmp(o->transport, "threads") && strcmp(o->transport, "mpi"))
        return cli_usage_error("run", "--transport must be threads or mpi");
    o->mpi = strcmp(o->transport, "mpi") == 0;
    if (!o->backend) o->backend = "cpu";
    if (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda"))
        return cli_usage_error("run", "--backend must be cpu or cuda (got '%s')", o->backend);
    o->cuda = strcmp(o->backend, "cuda") == 0;
    o->c.backend = o->cuda ? EXEC_BACKEND_CUDA : EXEC_BACKEND_CPU;
    if (o->precision && exec_precision_parse(o->precision, &o->c.precision))
        return cli_usage_error("run", "--precision must be fp32, tf32 or bf16 (got '%s')", o->precision);
    if (!o->cuda && (o->c.precision != EXEC_PREC_FP32 || o->c.sm_split || o->c.cuda_devices))
        return cli_usage_error("run", "--precision other than fp32, --sm-split and --gpus need --backend cuda");
    /* when the in-process profile is measured: between the passes where it can be (the CPU
     * executor, threads or MPI), unless a profile file, the before-profile's concurrency or CUDA
     * ask for another */
    if (o->ptiming && strcmp(o->ptiming, "between") && strcmp(o->ptiming, "before"))
        return cli_usage_error("run", "--profile-timing must be between or before (got '%s')", o->ptiming);
    if (o->ptiming && (o->profile || o->no_predict))
        return cli_usage_error("run", "--profile-timing is for the in-process profile: not with --profile or --no-predict");
    int can_between = !o->cuda && !o->profile && !o->no_predict;
    if (o->ptiming && strcmp(o->ptiming, "between") == 0) {
        if (!can_between)
            return cli_usage_error("run", "--profile-timing between needs the CPU backend");
        if (o->pconc)
            return cli_usage_error("run", "--profile-concurrency is the before-profile's; between the passes the "
                                          "run's own workers profile");
    }
    if (o->pconc && o->cuda)
        return cli_usage_error("run", "--profile-concurrency is the CPU before-profile's (the CUDA profile times "
                                      "the ranks sharing a GPU with --sm-split)");
    if (o->save_profile && (o->profile || o->no_predict))
        return cli_usage_error("run", "--save-profile writes the in-process profile: not with --profile or --no-predict");
    o->between = can_between && (o->ptiming ? strcmp(o->ptiming, "between") == 0 : o->pconc == 0);
    if (o->between) o->c.profile_between_reps = o->preps;
    if (o->c.momentum >= 1) {
        fprintf(stderr, "pipelab run: --momentum must be below 1\n");
        return CLI_EUSER;
    }
    o->c.init_seed = o->seed;
    o->c.target_seed = o->seed + 1;
    o->c.data_seed = o->seed + 2;
    o->c.record_ops = o->trace;
    o->c.return_weights = o->dump != NULL;
    return -1;
}

/* exec_run on threads, with a progress bar over rank 0's actions of all passes (a terminal
 * only). Returns exec_run's code. */
static int run_with_bar(const sched *s, exec_config *c, exec_result *r, pl_err *e) {
    char what[96];
    snprintf(what, sizeof what, "pipelab run: %s, %d ranks", s->kind, s->ranks);
    c->progress = pl_progress_start(what, (uint64_t)(c->warmup_passes + c->timed_passes) * s->rank[0].n);
    int rc = exec_run(s, c, r, e);
    pl_progress_end(c->progress);
    c->progress = NULL;
    return rc;
}

/* Loads or generates, validates and lowers the schedule; NULL and e on error. */
static sched *get_schedule(const opts *o, pl_err *e) {
    /* the prediction simulates it, with its timeline when the run is traced */
    sched *s = cli_sched_get(&o->a, o->trace ? SIM_MEM_TRACE : SIM_MEM_SIMULATE, e);
    if (!s) return NULL;
    if (o->a.kind) s->recompute = o->a.g.recompute;
    sched *l = sched_lower(s, e);
    sched_free(s);
    return l;
}

/* Returns (predicted - measured) / measured, or NAN when nothing was measured. */
static double rel_err(double pred, double meas) { return meas > 0 ? (pred - meas) / meas : NAN; }

/* Writes the human table: the run, measured beside predicted, and one line per rank. */
static void out_table(const opts *o, const sched *s, const exec_result *r, const sim_result *pr,
                      const cost_memory *mem, const char *profile_src, pl_buf *b) {
    pl_buf_printf(b, "schedule           %s: %d ranks, %d stages, %d microbatches, %d iteration%s per pass, weights %s, recompute %s\n",
                  s->kind, s->ranks, s->stages, s->microbatches, r->iterations_per_pass, r->iterations_per_pass == 1 ? "" : "s",
                  sched_weights_name(s->weights), sched_recompute_name(s->recompute));
    pl_buf_printf(b, "model              mlp: width %d, ffn %d, depth %d, microbatch %d rows, %zu parameter bytes; split",
                  r->hidden, r->ffn, r->layers, r->microbatch_size, r->param_bytes);
    for (int q = 0; q < r->stages; q++) pl_buf_printf(b, "%s%d", q ? "," : " ", r->stage_blocks[q]);
    pl_buf_printf(b, "\ntraining           SGD lr %g momentum %g; loss %.6g -> %.6g over %d iterations\n", r->lr, r->momentum,
                  r->loss[0], r->loss[r->n_iters - 1], r->n_iters);
    if (r->backend && strcmp(r->backend, "cuda") == 0)
        pl_buf_printf(b, "run                %s, CUDA: %s, %s GEMMs (%s); %d warm-up + %d timed passes\n",
                      o->mpi ? "MPI processes" : "threads", r->device, r->precision, r->blas, r->warmup_passes, r->timed_passes);
    else
        pl_buf_printf(b, "run                %s, %s, %d cores; %d warm-up + %d timed passes\n", o->mpi ? "MPI processes" : "threads",
                      r->blas, r->cores, r->warmup_passes, r->timed_passes);
    if (r->warning[0]) pl_buf_printf(b, "warning            %s\n", r->warning);
    pl_buf_printf(b, "\n%-22s %14s %14s %10s\n", "", "measured", "predicted", "error");
    if (pr) {
        pl_buf_printf(b, "%-22s %14.6g %14.6g %+9.1f%%\n", "iteration_time_s", r->iter_median_s, pr->iteration_time_s,
                      100 * rel_err(pr->iteration_time_s, r->iter_median_s));
        pl_buf_printf(b, "%-22s %14.6g %14.6g %+9.1f%%\n", "throughput_samples_s", r->throughput_samples_s, pr->throughput,
                      100 * rel_err(pr->throughput, r->throughput_samples_s));
    } else {
        pl_buf_printf(b, "%-22s %14.6g %14s\n", "iteration_time_s", r->iter_median_s, "-");
        pl_buf_printf(b, "%-22s %14.6g %14s\n", "throughput_samples_s", r->throughput_samples_s, "-");
    }
    double ip = r->iterations_per_pass;
    pl_buf_printf(b, "%-22s min %.6g max %.6g stddev %.3g (%d timed passes)\n", "  iteration spread", r->pass_min_s / ip,
                  r->pass_max_s / ip, r->pass_stddev_s / ip, r->timed_passes);
    if (pr) pl_buf_printf(b, "%-22s %s\n", "  predicted from", profile_src);
    pl_buf_printf(b, "\n%-4s %4s %12s %12s %12s %8s %8s %12s %12s %12s %12s\n", "rank", "core", "busy_s", "idle_s", "comm_s",
                  "bub_frac", "pred_bf", "peak_bytes", "model_bytes", "cost_model", "pred_peak");
    for (int q = 0; q < r->ranks; q++) {
        const exec_rank_result *x = &r->rank[q];
        pl_buf_printf(b, "%-4d %4d %12.6g %12.6g %12.6g %8.4f ", q, x->core, x->busy_s, x->idle_s, x->comm_s, x->bubble_fraction);
        if (pr) pl_buf_printf(b, "%8.4f ", pr->rank[q].bubble_fraction);
        else pl_buf_printf(b, "%8s ", "-");
        pl_buf_printf(b, "%12zu %12zu ", x->peak.total_bytes, x->model_peak_bytes);
        if (mem) pl_buf_printf(b, "%12lld ", (long long)mem[q].total_bytes);
        else pl_buf_printf(b, "%12s ", "-");
        if (pr) pl_buf_printf(b, "%12lld\n", (long long)pr->rank[q].peak_bytes);
        else pl_buf_printf(b, "%12s\n", "-");
    }
    pl_buf_puts(b, "\nbub_frac: bubble_fraction, idle_s / (busy_s + idle_s) of a pass; pred_bf: the prediction's,\n"
                   "over its bubble window (the steady state for pipedream and 2bw).\n");
    pl_buf_puts(b, "peak_bytes: all the rank tracked at its peak (weights, gradients, optimizer, stashes, buffers,\n"
                   "scratch); model_bytes: its weights, gradients, optimizer and activation stash, the part the cost\n"
                   "model describes; cost_model: cost_schedule_memory for the same schedule and model (equal to\n"
                   "model_bytes); pred_peak: the simulator's peak.\n");
}

/* Writes CSV: one row per rank with the run's numbers repeated. */
static void out_csv(const sched *s, const exec_result *r, const sim_result *pr, const cost_memory *mem, pl_buf *b) {
    pl_buf_puts(b, "kind,ranks,stages,microbatches,iterations_per_pass,width,ffn,depth,microbatch_size,iteration_time_s,"
                   "iteration_min_s,iteration_max_s,iteration_stddev_s,throughput_samples_s,pred_iteration_time_s,"
                   "pred_throughput_samples_s,rel_error,rank,core,busy_s,idle_s,comm_s,bubble_fraction,pred_bubble_fraction,peak_bytes,"
                   "model_bytes,cost_model_bytes,pred_peak_bytes\n");
    double ip = r->iterations_per_pass;
    for (int q = 0; q < r->ranks; q++) {
        const exec_rank_result *x = &r->rank[q];
        pl_buf_printf(b, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,", s->kind, s->ranks, s->stages, s->microbatches,
                      r->iterations_per_pass, r->hidden, r->ffn, r->layers, r->microbatch_size, r->iter_median_s,
                      r->pass_min_s / ip, r->pass_max_s / ip, r->pass_stddev_s / ip, r->throughput_samples_s);
        if (pr) pl_buf_printf(b, "%.9g,%.9g,%.6g,", pr->iteration_time_s, pr->throughput, rel_err(pr->iteration_time_s, r->iter_median_s));
        else pl_buf_puts(b, ",,,");
        pl_buf_printf(b, "%d,%d,%.9g,%.9g,%.9g,%.9g,", q, x->core, x->busy_s, x->idle_s, x->comm_s, x->bubble_fraction);
        if (pr) pl_buf_printf(b, "%.9g,", pr->rank[q].bubble_fraction);
        else pl_buf_puts(b, ",");
        pl_buf_printf(b, "%zu,%zu,", x->peak.total_bytes, x->model_peak_bytes);
        if (mem) pl_buf_printf(b, "%lld,", (long long)mem[q].total_bytes);
        else pl_buf_puts(b, ",");
        if (pr) pl_buf_printf(b, "%lld\n", (long long)pr->rank[q].peak_bytes);
        else pl_buf_puts(b, "\n");
    }
}

/* Writes JSON: the run, the prediction and a per-rank array. */
static void out_json(const sched *s, const exec_result *r, const sim_result *pr, const cost_memory *mem,
                     const cli_run_store_info *info, const int64_t ids[2], pl_buf *b) {
    double ip = r->iterations_per_pass;
    pl_buf_printf(b, "{\"kind\":\"%s\",\"ranks\":%d,\"stages\":%d,\"microbatches\":%d,\"iterations_per_pass\":%d,"
                     "\"iteration_time_s\":%.9g,\"iteration_min_s\":%.9g,\"iteration_max_s\":%.9g,\"iteration_stddev_s\":%.9g,"
                     "\"throughput_samples_s\":%.9g,\"loss_first\":%.9g,\"loss_last\":%.9g,\"warning\":\"%s\",",
                  s->kind, s->ranks, s->stages, s->microbatches, r->iterations_per_pass, r->iter_median_s, r->pass_min_s / ip,
                  r->pass_max_s / ip, r->pass_stddev_s / ip, r->throughput_samples_s, r->loss[0], r->loss[r->n_iters - 1],
                  r->warning);
    if (pr)
        pl_buf_printf(b, "\"predicted\":{\"iteration_time_s\":%.9g,\"throughput_samples_s\":%.9g,\"rel_error\":%.6g},",
                      pr->iteration_time_s, pr->throughput, rel_err(pr->iteration_time_s, r->iter_median_s));
    pl_buf_printf(b, "\"run_ids\":[%lld,%lld],\"params\":", (long long)ids[0], (long long)ids[1]);
    cli_run_params_json(r, info, b);
    pl_buf_puts(b, ",\"per_rank\":[");
    for (int q = 0; q < r->ranks; q++) {
        const exec_rank_result *x = &r->rank[q];
        pl_buf_printf(b, "%s{\"rank\":%d,\"core\":%d,\"busy_s\":%.9g,\"idle_s\":%.9g,\"comm_s\":%.9g,\"bubble_fraction\":%.9g,"
                         "\"peak_bytes\":%zu,\"model_bytes\":%zu",
                      q ? "," : "", q, x->core, x->busy_s, x->idle_s, x->comm_s, x->bubble_fraction, x->peak.total_bytes,
                      x->model_peak_bytes);
        if (mem) pl_buf_printf(b, ",\"cost_model_bytes\":%lld", (long long)mem[q].total_bytes);
        if (pr) pl_buf_printf(b, ",\"pred_bubble_fraction\":%.9g,\"pred_peak_bytes\":%lld", pr->rank[q].bubble_fraction, (long long)pr->rank[q].peak_bytes);
        pl_buf_putc(b, '}');
    }
    pl_buf_puts(b, "]}\n");
}

/* Gets the profile model of the prediction: --profile FILE, or measured now on min(ranks, cores)
 * threads at once (--profile-concurrency). Sets c->pred_step_s to the profile's STEP of one block
 * (0 when a file has none). Returns NULL and e on error; *src describes where it came from. */
static cost_model *get_profile(const opts *o, const sched *s, exec_config *c, const char **src, pl_buf *csv, pl_err *e) {
    c->pred_step_s = 0;
    if (o->profile) {
        *src = o->profile;
        char *text = NULL;
        size_t len = 0;
        if (pl_read_file(o->profile, 64u << 20, &text, &len, e) != PL_OK) return NULL;
        cost_model *m = cost_model_read_csv(o->profile, text, len, e);
        double st = 0;
        if (m && exec_profile_meta(text, len, NULL, &st) == 0) c->pred_step_s = st;
        pl_buf_puts(csv, text); /* its per-worker lines give each rank's STEP (cli_run) */
        free(text);
        if (m && exec_profile_check(m, c, o->profile, e) != PL_OK) {
            cost_model_free(m);
            return NULL;
        }
        return m;
    }
    if (o->cuda) {
        /* on the GPU: alone, or (--sm-split) in the SM share of one of the ranks sharing GPU 0 */
        int G = o->c.cuda_devices;
        if (G < 1) {
            pl_err ig;
            G = exec_cuda_devices(&ig);
        }
        int per = G > 0 ? (s->ranks + G - 1) / G : 1;
        int conc = o->c.sm_split && per > 1 ? per : 1;
        static char gsrc[128];
        snprintf(gsrc, sizeof gsrc, "in-process GPU profile (exec_cuda_profile_layers, %s%s)", exec_precision_name(o->c.precision),
                 conc > 1 ? ", 1/N of the SMs" : ", whole GPU");
        *src = gsrc;
        cost_model *m = NULL;
        exec_layer_profile lp;
        if (exec_cuda_profile_csv(c, o->preps, conc, NULL, csv, &lp, e) == PL_OK) {
            m = cost_model_read_csv("in-process GPU profile", csv->data, csv->len, e);
            c->pred_step_s = lp.step_s;
        }
        return m;
    }
    int conc = o->pconc;
    if (conc < 1) {
        int n = exec_profile_cores();
        conc = s->ranks < n || n < 1 ? s->ranks : n;
    }
    static char srcbuf[96];
    snprintf(srcbuf, sizeof srcbuf, "in-process profile (exec_profile_layers, %d worker%s at once)", conc, conc == 1 ? "" : "s");
    *src = srcbuf;
    cost_model *m = NULL;
    exec_layer_profile lp;
    if (exec_profile_csv_n(c, o->preps, conc, NULL, csv, &lp, e) == PL_OK) {
        m = cost_model_read_csv("in-process profile", csv->data, csv->len, e);
        c->pred_step_s = lp.step_s;
    }
    return m;
}

/* The profile model a run measured between its passes (exec_config.profile_between_reps), with
 * c->pred_step_s its STEP of one block, its CSV appended to t. NULL and e on error; *src
 * describes it. */
static cost_model *run_profile(const sched *s, const exec_result *r, exec_config *c, const char **src, pl_buf *t, pl_err *e) {
    static char srcbuf[128];
    snprintf(srcbuf, sizeof srcbuf, "in-process profile between the passes (exec_profile_layers rounds on the run's %d worker%s)",
             r->ranks, r->ranks == 1 ? "" : "s");
    *src = srcbuf;
    cost_model *m = NULL;
    if (exec_profile_csv_between(s, c, r, t, e) == PL_OK) {
        m = cost_model_read_csv("in-process profile", t->data, t->len, e);
        c->pred_step_s = r->between_profile[0].step_s;
    }
    return m;
}

/* Prints the reason of a failing MPI rank before MPI_Abort ends the job. */
static void mpi_abort_print(const pl_err *why) {
    fprintf(stderr, "pipelab: run failed: %s\n", why->msg);
    fflush(stderr);
}

int cli_run(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    rc = CLI_OK;
    pl_err e;
    pl_err_clear(&e);
    exec_result r;
    memset(&r, 0, sizeof r);
    sim_result pr;
    memset(&pr, 0, sizeof pr);
    int have_pred = 0, is_root = 1;
    cost_model *prof = NULL;
    cost_memory *mem = NULL;
    const char *profile_src = "";
    pl_buf out, cmd, pcsv;
    pl_buf_init(&out);
    pl_buf_init(&cmd);
    pl_buf_init(&pcsv);
    double *rank_step = NULL;
    sched *s = get_schedule(&o, &e);
    if (!s) { rc = cli_fail(&e); goto done; }
    o.c.layers = o.depth ? o.depth : 2 * s->stages;
    if (o.nsplit) {
        if (o.nsplit != s->stages) {
            pl_errf(&e, PL_EINPUT, "--stage-blocks gives %d stages, the schedule has %d", o.nsplit, s->stages);
            rc = cli_fail(&e);
            goto done;
        }
        int sum = 0;
        for (int q = 0; q < o.nsplit; q++) sum += o.split[q];
        if (!o.depth) o.c.layers = sum;
        o.c.stage_blocks = o.split;
    }
    /* a database that cannot take the run is refused before the run (MPI: rank 0 stores, after) */
    if (!o.no_db && !o.mpi && cli_run_check_db(o.db, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
    /* a model that does not fit is refused before the profile spends seconds on it (MPI: each
     * rank checks its own share when it starts) */
    if (!o.mpi) {
        int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
        int mrc = blocks ? exec_stage_blocks(s, &o.c, blocks, &e) : pl_errf(&e, PL_ENOMEM, "out of memory");
        if (mrc == PL_OK) mrc = exec_check_memory(s, &o.c, blocks, -1, &e);
        free(blocks);
        if (mrc != PL_OK) { rc = cli_fail(&e); goto done; }
    }
    /* the prediction's profile first: measured before the run, on an idle machine (between the
     * passes: after the run, from what its workers measured) */
    if (!o.no_predict && !o.mpi && !o.between) {
        prof = get_profile(&o, s, &o.c, &profile_src, &pcsv, &e);
        if (!prof) { rc = cli_fail(&e); goto done; }
    }
    if (o.cuda && o.mpi) {
        exec_cuda_mpi_set_abort_hook(mpi_abort_print);
        if (exec_cuda_mpi_run(s, &o.c, &r, &is_root, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
        if (!is_root) goto done; /* rank 0 reports and stores */
        if (!o.no_predict) {
            prof = get_profile(&o, s, &o.c, &profile_src, &pcsv, &e);
            if (!prof) { rc = cli_fail(&e); goto done; }
        }
    } else if (o.cuda) {
        if (exec_cuda_run(s, &o.c, &r, &e) != PL_OK) {
            pl_err_prefix(&e, "run failed: ");
            rc = cli_fail(&e);
            goto done;
        }
    } else if (o.mpi) {
        exec_mpi_set_abort_hook(mpi_abort_print);
        if (exec_mpi_run(s, &o.c, &r, &is_root, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
        if (!is_root) goto done; /* rank 0 reports and stores */
        if (!o.no_predict) {
            /* between the passes: what every rank's worker measured, gathered on rank 0 */
            prof = o.between ? run_profile(s, &r, &o.c, &profile_src, &pcsv, &e)
                             : get_profile(&o, s, &o.c, &profile_src, &pcsv, &e);
            if (!prof) { rc = cli_fail(&e); goto done; }
        }
    } else if (run_with_bar(s, &o.c, &r, &e) != PL_OK) {
        pl_err_prefix(&e, "run failed: ");
        rc = cli_fail(&e);
        goto done;
    } else if (o.between) {
        prof = run_profile(s, &r, &o.c, &profile_src, &pcsv, &e);
        if (!prof) { rc = cli_fail(&e); goto done; }
    }
    if (prof) {
        /* each stage's STEP on its rank's core when the profile has one worker per rank (between
         * the passes, whose block rows are the ranks' own too; or P workers at once), else the
         * STEP over all of them */
        rank_step = pl_calloc((size_t)s->ranks, sizeof *rank_step);
        if (!rank_step) { pl_errf(&e, PL_ENOMEM, "out of memory"); rc = cli_fail(&e); goto done; }
        if (exec_profile_worker_steps(pcsv.data ? pcsv.data : "", pcsv.len, s->ranks, rank_step) != 0) {
            free(rank_step);
            rank_step = NULL;
        }
        if (cli_run_predict(s, &o.c, prof, rank_step, &pr, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
        have_pred = 1;
        if (o.save_profile && pcsv.len && pl_write_file(o.save_profile, pcsv.data, pcsv.len, &e) != PL_OK) {
            rc = cli_fail(&e);
            goto done;
        }
    }
    mem = pl_calloc((size_t)s->ranks, sizeof *mem);
    if (mem && exec_mem_predict(s, &o.c, mem, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
    if (o.dump && pl_write_file(o.dump, (const char *)r.final_weights, r.n_weights * sizeof(float), &e) != PL_OK) {
        rc = cli_fail(&e);
        goto done;
    }
    pl_buf_puts(&cmd, "pipelab");
    for (int i = 0; i < argc; i++) pl_buf_printf(&cmd, " %s", argv[i]);
    cli_run_store_info info = {o.db, o.tag, cmd.data, o.transport, have_pred ? profile_src : "", o.a.from, o.profile,
                               o.seed, o.trace};
    int64_t ids[2] = {0, 0};
    if (!o.no_db && cli_run_store(s, &r, have_pred ? &pr : NULL, &info, ids, &e) != PL_OK) { rc = cli_fail(&e); goto done; }
    if (strcmp(o.format, "json") == 0) out_json(s, &r, have_pred ? &pr : NULL, mem, &info, ids, &out);
    else if (strcmp(o.format, "csv") == 0) out_csv(s, &r, have_pred ? &pr : NULL, mem, &out);
    else {
        out_table(&o, s, &r, have_pred ? &pr : NULL, mem, profile_src, &out);
        if (!o.no_db)
            pl_buf_printf(&out, "stored             measured run %lld, simulated run %lld in %s%s%s\n", (long long)ids[0],
                          (long long)ids[1], o.db ? o.db : STORE_DEFAULT_PATH, o.tag ? ", tag " : "", o.tag ? o.tag : "");
    }
    rc = cli_write_output(NULL, &out);
done:
    if (o.mpi && !o.cuda) exec_mpi_finalize();
    if (o.mpi && o.cuda) exec_cuda_mpi_finalize();
    pl_buf_free(&out);
    pl_buf_free(&cmd);
    pl_buf_free(&pcsv);
    free(rank_step);
    free(mem);
    cost_model_free(prof);
    if (have_pred) sim_result_free(&pr);
    exec_result_free(&r);
    sched_free(s);
    return rc;
}

#else

/* Returns CLI_EUSER: this build has no executor. */
int cli_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipelab: this build has no executor (exec/)\n");
    return CLI_EUSER;
}

#endif
