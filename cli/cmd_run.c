/* cmd_run.c: `pipelab run`: execute a lowered schedule for real on the CPU executor (threads, or
 * one MPI process per rank), print the measurements beside the simulator's prediction from a
 * profile of this machine, and store both runs. */
#include <getopt.h>
#include <inttypes.h>
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

/* --help, a printf format that print_help fills with the executor's defaults (exec_config_default)
 * and the profile's, so that the text and the behaviour cannot drift apart. */
static const char help_format[] =
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
    "  --width H             hidden size (default %d)\n"
    "  --depth L             blocks (default 2 x stages)\n"
    "  --ffn F               inner size (default 4 H)\n"
    "  --microbatch-size B   rows per microbatch (default %d)\n"
    CLI_EXEC_MODEL_HELP
    "  --stage-blocks N,N,.. blocks per stage (default: L split evenly, first stages take more)\n"
    "  --lr X --momentum X   SGD (default %g, %g)\n"
    "  --seed N              initial weights N, target network N+1, data N+2 (default %" PRIu64 ")\n"
    "replicas (PipeDream's 1F1B-RR, as simulate runs them):\n"
    "  --partition FILE      stage -> blocks and replicas, from pipelab partition -o FILE (its\n"
    "                        layers are the model's blocks: --depth or --model's, when given,\n"
    "                        must match)\n"
    "  --replicas-stage S=N  stage S replicated N times (repeatable; over the partition's). Each\n"
    "                        replica is a rank of its own (a thread, or an MPI process: mpirun -np\n"
    "                        the sum of the ranks' replicas); microbatch k runs on replica k mod N;\n"
    "                        REDUCE_GRAD all-reduces the replicas' gradients exactly (a ring over\n"
    "                        the mailboxes, or MPI_Allreduce); 1f1b, pipedream and 2bw are\n"
    "                        generated with PipeDream's per-replica warm-up\n"
    "run:\n"
    "  --warmup N --timed N  passes (default %d and %d)\n"
    "  --transport threads|mpi  threads in this process (default), or one MPI process per rank:\n"
    "                        mpirun -np P pipelab run --transport mpi ...\n"
    "  --oversubscribe       allow more ranks than cores (timings then measure time-slicing)\n"
    "  --no-pin              do not pin worker threads to cores\n"
    "  --timeout S           longest wait for a message before the run fails (default %g)\n"
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
    "  --profile-reps N      repetitions of the in-process profile (default %d)\n"
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
    "                        A profile whose per-worker lines time I and W at reuse distance 0\n"
    "                        (right after their forward: the one between the passes, or one of\n"
    "                        pipelab profile with several workers) predicts each such backward\n"
    "                        with its rank's ratio to the profile's I and W; the prediction\n"
    "                        without that term is stored too, under tag NAME-noterms\n"
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

enum { O_SPLIT = 1000, O_LR, O_MOM, O_WARMUP, O_TIMED, O_TRANSPORT, O_OVERSUB, O_NOPIN, O_TIMEOUT, O_BUDGET,
       O_PROFILE, O_SAVEPROF, O_PREPS, O_PCONC, O_PTIMING, O_NOPRED, O_FORMAT, O_TRACE, O_DUMP, O_TAG, O_DB, O_NODB,
       O_FAULT, O_GPUS, O_MAXMEM, O_PARTITION, O_REPLS, O_HELP };

static const struct option long_opts[] = {
    CLI_SCHED_LONG_OPTS,
    CLI_EXEC_LONG_OPTS,
    {"stage-blocks", required_argument, 0, O_SPLIT}, {"lr", required_argument, 0, O_LR},
    {"momentum", required_argument, 0, O_MOM},
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
    {"gpus", required_argument, 0, O_GPUS},
    {"max-memory", required_argument, 0, O_MAXMEM},
    {"partition", required_argument, 0, O_PARTITION}, {"replicas-stage", required_argument, 0, O_REPLS},
    {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0},
};

#define MAX_SPLIT 4096                   /* the most stages --stage-blocks gives */
#define MAX_REPL_FLAGS 256               /* the most --replicas-stage flags */
#define RUN_PROFILE_REPS 20              /* --profile-reps' default */
#define RUN_MAX_PASSES (1 << 20)         /* the largest --warmup, --timed and --profile-reps */
#define RUN_MAX_PROFILE_CONCURRENCY 256  /* the largest --profile-concurrency */
#define RUN_MAX_GPUS 4096                /* the largest --gpus */
#define RUN_MAX_MEM_BUDGET 9.2e18        /* bytes, the largest --mem-budget (below INT64_MAX) */
#define RUN_BLOCKS_PER_STAGE 2           /* the model's depth without --depth: blocks per stage */
#define RUN_PROFILE_FILE_MAX ((size_t)64 << 20) /* bytes a --profile file may have */
#define RUN_PROFILE_SRC_MAX 160          /* room for the description of an in-process profile */
#define RUN_LABEL_MAX 96                 /* room for the progress bar's label */
#define FAULT_KIND_MAX 32                /* room for --inject-fault's KIND */
#define FAULT_FIELD_MAX 24               /* room for each number of --inject-fault */

/* The schedule flags' limits here, tighter than the generators': the executor starts one thread
 * (or process) per rank and walks every microbatch of every iteration for real. */
static const cli_sched_limits run_limits = {4096, 1 << 20, 4096, 1 << 16};

typedef struct opts {
    cli_sched_args a;
    cli_exec_args x; /* --width, --depth, --ffn, --microbatch-size, --seed, --backend, --precision */
    const char *transport, *profile, *save_profile, *format, *dump, *tag, *db;
    const char *ptiming;
    int cuda, between;
    int preps, pconc, no_predict, trace, no_db, mpi;
    int nsplit, split[MAX_SPLIT];
    const char *partition;           /* --partition FILE */
    int nrepl, repl_stage[MAX_REPL_FLAGS], repl_n[MAX_REPL_FLAGS]; /* --replicas-stage S=N, in order */
    int *replicas;                   /* [stages] what o->c.replicas points to (owned), or NULL */
    uint64_t seed;
    exec_config c;
} opts;

/* Prints --help with the defaults of exec_config_default and of the profile filled in. */
static void print_help(void) {
    exec_config d;
    exec_config_default(&d);
    printf(help_format, d.hidden, d.microbatch_size, d.lr, d.momentum, d.init_seed, d.warmup_passes, d.timed_passes,
           d.timeout_s, RUN_PROFILE_REPS);
}

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
        if (pl_parse_long(num, 1, CLI_EXEC_MAX_SIZE, &v)) break;
        o->split[o->nsplit++] = (int)v;
        p += n;
        if (*p == ',') p++;
        if (!*p) return 0;
    }
    cli_usage_error("run", "--stage-blocks: needs whole numbers >= 1 separated by commas (got '%s')", val);
    return -1;
}

/* Parses --inject-fault's [KIND:]RANK:ACTION[:PASS] into *f: KIND one of exec_fault_name's
 * (default error), each field a whole number in range: RANK >= 0, ACTION >= 1 (1-based), PASS
 * >= 0 (default 0). Returns 0, or CLI_EUSAGE after printing what is wrong. */
static int fault_arg(const char *arg, exec_fault *f) {
    exec_fault_kind fk = EXEC_FAULT_ERROR;
    const char *spec = arg;
    if ((*spec >= 'a' && *spec <= 'z') && strchr(spec, ':')) {
        char kn[FAULT_KIND_MAX];
        size_t n = strcspn(spec, ":");
        if (n >= sizeof kn) n = sizeof kn - 1;
        memcpy(kn, spec, n);
        kn[n] = '\0';
        fk = exec_fault_parse(kn);
        if (fk == EXEC_FAULT_NONE) return cli_usage_error("run", "--inject-fault: unknown kind '%s'", kn);
        spec += strcspn(spec, ":") + 1;
    }
    const char *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const char *e2 = c2 ? c2 : c1 ? c1 + strlen(c1) : NULL;
    if (!c1 || (c2 && strchr(c2 + 1, ':')))
        return cli_usage_error("run", "--inject-fault: needs [KIND:]RANK:ACTION[:PASS] (got '%s')", arg);
    char fr[FAULT_FIELD_MAX] = "", fa[FAULT_FIELD_MAX] = "", fp[FAULT_FIELD_MAX] = "0";
    long r, a, ps;
    if (c1 - spec < FAULT_FIELD_MAX) snprintf(fr, sizeof fr, "%.*s", (int)(c1 - spec), spec);
    if (e2 - c1 - 1 < FAULT_FIELD_MAX) snprintf(fa, sizeof fa, "%.*s", (int)(e2 - c1 - 1), c1 + 1);
    if (c2) snprintf(fp, sizeof fp, "%s", strlen(c2 + 1) < FAULT_FIELD_MAX ? c2 + 1 : "");
    if (pl_parse_long(fr, 0, INT_MAX, &r) || pl_parse_long(fa, 1, INT_MAX, &a) || pl_parse_long(fp, 0, INT_MAX, &ps))
        return cli_usage_error("run", "--inject-fault: rank >= 0, action >= 1 (1-based), pass >= 0 (got '%s')", arg);
    *f = (exec_fault){fk, (int)r, (int)a - 1, (int)ps};
    return 0;
}

/* Applies --partition and --replicas-stage. Returns -1 to go on, CLI_EUSAGE after printing what
 * is wrong, or -2 for another option. */
static int replica_opt(int c, const char *arg, opts *o) {
    if (c == O_PARTITION) {
        o->partition = arg;
        return -1;
    }
    if (c != O_REPLS) return -2;
    if (o->nrepl == MAX_REPL_FLAGS) return cli_usage_error("run", "too many --replicas-stage flags");
    if (cli_replicas_stage_arg("run", arg, &o->repl_stage[o->nrepl], &o->repl_n[o->nrepl])) return CLI_EUSAGE;
    o->nrepl++;
    return -1;
}

/* Applies one of run's own options c with value arg (seen: the argument as given, for the error
 * of an unknown one). Returns -1 to go on, or an exit code: CLI_EUSAGE after printing what is
 * wrong, CLI_OK after --help. */
static int run_opt(int c, const char *arg, const char *seen, opts *o) {
    double v;
    int rr = replica_opt(c, arg, o);
    if (rr != -2) return rr;
    switch (c) {
    case O_SPLIT: return split_arg(arg, o) ? CLI_EUSAGE : -1;
    case O_LR: return num_arg("--lr", arg, &o->c.lr) ? CLI_EUSAGE : -1;
    case O_MOM: return num_arg("--momentum", arg, &o->c.momentum) ? CLI_EUSAGE : -1;
    case O_WARMUP: return cli_int_arg("run", "--warmup", arg, 0, RUN_MAX_PASSES, &o->c.warmup_passes) ? CLI_EUSAGE : -1;
    case O_TIMED: return cli_int_arg("run", "--timed", arg, 1, RUN_MAX_PASSES, &o->c.timed_passes) ? CLI_EUSAGE : -1;
    case O_TRANSPORT: o->transport = arg; return -1;
    case O_OVERSUB: o->c.oversubscribe = 1; return -1;
    case O_NOPIN: o->c.pin = 0; return -1;
    case O_TIMEOUT:
        if (num_arg("--timeout", arg, &v)) return CLI_EUSAGE;
        if (v <= 0) return cli_usage_error("run", "--timeout: must be > 0 (got '%s')", arg);
        o->c.timeout_s = v;
        return -1;
    case O_BUDGET:
        if (cli_num_arg("run", "--mem-budget", arg, 0, RUN_MAX_MEM_BUDGET, &v)) return CLI_EUSAGE;
        o->c.mem_budget_bytes = (size_t)v;
        return -1;
    case O_PROFILE: o->profile = arg; return -1;
    case O_PREPS: return cli_int_arg("run", "--profile-reps", arg, 1, RUN_MAX_PASSES, &o->preps) ? CLI_EUSAGE : -1;
    case O_PCONC:
        return cli_int_arg("run", "--profile-concurrency", arg, 1, RUN_MAX_PROFILE_CONCURRENCY, &o->pconc) ? CLI_EUSAGE : -1;
    case O_PTIMING: o->ptiming = arg; return -1;
    case O_SAVEPROF: o->save_profile = arg; return -1;
    case O_NOPRED: o->no_predict = 1; return -1;
    case O_FORMAT: o->format = arg; return -1;
    case O_TRACE: o->trace = 1; return -1;
    case O_DUMP: o->dump = arg; return -1;
    case O_TAG: o->tag = arg; return -1;
    case O_DB: o->db = arg; return -1;
    case O_NODB: o->no_db = 1; return -1;
    case O_FAULT: return fault_arg(arg, &o->c.fault) ? CLI_EUSAGE : -1;
    case O_GPUS: return cli_int_arg("run", "--gpus", arg, 1, RUN_MAX_GPUS, &o->c.cuda_devices) ? CLI_EUSAGE : -1;
    case O_MAXMEM: return cli_max_memory_arg("run", arg, &o->a) ? CLI_EUSAGE : -1;
    case O_HELP: print_help(); return CLI_OK;
    default: return cli_usage_error("run", "unknown or incomplete option '%s'", seen);
    }
}

/* Checks the flags of the in-process profile and settles when it is measured: between the passes
 * where it can be (the CPU executor, threads or MPI), unless a profile file, the before-profile's
 * concurrency or CUDA ask for another. Returns -1 when they hold, else CLI_EUSAGE after printing
 * which does not. */
static int check_profile_flags(opts *o) {
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
    return -1;
}

/* Checks the flags that go together after parsing (transport, backend and precision, the
 * profile's, momentum). Returns -1 when they hold, else an exit code after printing which does
 * not. */
static int check_flags(opts *o) {
    if (strcmp(o->transport, "threads") && strcmp(o->transport, "mpi"))
        return cli_usage_error("run", "--transport must be threads or mpi");
    o->mpi = strcmp(o->transport, "mpi") == 0;
    int rc = cli_exec_check("run", &o->x, &o->c);
    if (rc >= 0) return rc;
    o->cuda = o->c.backend == EXEC_BACKEND_CUDA;
    if (!o->cuda && (o->c.precision != EXEC_PREC_FP32 || o->c.sm_split || o->c.cuda_devices))
        return cli_usage_error("run", "--precision other than fp32, --sm-split and --gpus need --backend cuda");
    rc = check_profile_flags(o);
    if (rc >= 0) return rc;
    if ((o->partition || o->nrepl) && o->cuda)
        return cli_usage_error("run", "--partition and --replicas-stage run on the CPU backend (not --backend cuda): the "
                                      "CUDA backend has no gradient all-reduce between GPUs");
    if (o->partition && o->nsplit) return cli_usage_error("run", "give --partition or --stage-blocks, not both");
    if (o->c.momentum >= 1) {
        fprintf(stderr, "pipelab run: --momentum must be below 1\n");
        return CLI_EUSER;
    }
    return -1;
}

/* Parses argv into o: the executor's defaults (exec_config_default), then the flags. Returns -1
 * to continue, or an exit code. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    exec_config_default(&o->c);
    o->transport = "threads";
    o->format = "table";
    o->preps = RUN_PROFILE_REPS;
    opterr = 0;
    optind = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        rc = cli_sched_opt("run", c, optarg, &o->a, &run_limits);
        if (rc < 0) rc = cli_exec_opt("run", c, optarg, &o->c, &o->x);
        if (rc == CLI_OK) continue;
        if (rc < 0) rc = run_opt(c, optarg, argv[optind - 1], o);
        if (rc >= 0) return rc;
    }
    rc = cli_sched_args_end("run", argc, argv, &o->a);
    if (rc < 0) rc = cli_format_arg("run", o->format);
    if (rc < 0) rc = check_flags(o);
    if (rc >= 0) return rc;
    /* the seeds of the initial weights, the target network and the data */
    o->seed = o->x.have_seed ? o->x.seed : o->c.init_seed;
    o->c.init_seed = o->seed;
    o->c.target_seed = o->seed + 1;
    o->c.data_seed = o->seed + 2;
    o->c.record_ops = o->trace;
    o->c.return_weights = o->dump != NULL;
    o->c.budget = o->a.budget;
    return -1;
}

/* exec_run on threads, with a progress bar over rank 0's actions of all passes (a terminal
 * only; with replicas, those of rank 0's first replica). Returns exec_run's code. */
static int run_with_bar(const sched *s, exec_config *c, exec_result *r, pl_err *e) {
    char what[RUN_LABEL_MAX];
    snprintf(what, sizeof what, "pipelab run: %s, %d ranks", s->kind, s->ranks);
    uint64_t n = 0;
    for (size_t k = 0; k < s->rank[0].n; k++) {
        const sched_action *a = &s->rank[0].acts[k];
        n += !c->replicas || a->stage < 0 || sched_replica_of(a, c->replicas[a->stage]) <= 0;
    }
    c->progress = pl_progress_start(what, (uint64_t)(c->warmup_passes + c->timed_passes) * n);
    int rc = exec_run(s, c, r, e);
    pl_progress_end(c->progress);
    c->progress = NULL;
    return rc;
}

/* Loads or generates, validates and lowers the schedule; NULL and e on error. */
static sched *get_schedule(const opts *o, pl_err *e) {
    /* the prediction simulates it, with its timeline when the run is traced */
    sched *s = cli_sched_get(&o->a, o->trace ? SCHED_MEM_TRACE : SCHED_MEM_SIMULATE, e);
    if (!s) return NULL;
    if (o->a.kind) s->recompute = o->a.g.recompute;
    sched *l = sched_lower_within(s, &o->a.budget, e);
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
    char spec[EXEC_MODEL_SPEC_MAX];
    exec_model_spec(r, spec, sizeof spec);
    pl_buf_printf(b, "model              %s (ffn %d), %zu parameter bytes; split", spec, r->ffn, r->param_bytes);
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
    pl_buf_puts(b, "\nbub_frac: bubble_fraction, idle_s / (busy_s + idle_s) of a pass (busy: compute and STEP);\n"
                   "pred_bf: the prediction's,\n"
                   "over its bubble window (the steady state for pipedream and 2bw).\n");
    pl_buf_puts(b, "peak_bytes: all the rank tracked at its peak (weights, gradients, optimizer, stashes, buffers,\n"
                   "scratch); model_bytes: its weights, gradients, optimizer and activation stash, the part the cost\n"
                   "model describes; cost_model: cost_schedule_memory_replicas for the same schedule, model and\n"
                   "replicas (equal to model_bytes; a replicated rank: its fullest replica); pred_peak: the\n"
                   "prediction's peak, the walk of the executor's bookkeeping before the run (exec_mem_walk),\n"
                   "equal to peak_bytes.\n");
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
                     "\"throughput_samples_s\":%.9g,\"loss_first\":%.9g,\"loss_last\":%.9g,\"warning\":",
                  s->kind, s->ranks, s->stages, s->microbatches, r->iterations_per_pass, r->iter_median_s, r->pass_min_s / ip,
                  r->pass_max_s / ip, r->pass_stddev_s / ip, r->throughput_samples_s, r->loss[0], r->loss[r->n_iters - 1]);
    pl_buf_json_string(b, r->warning);
    pl_buf_putc(b, ',');
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

/* The tag of the prediction stored without the measured terms: the run's tag and this suffix
 * (the suffix alone without a tag), and its room. */
#define RUN_TAG_OFF_SUFFIX "-noterms"
#define RUN_TAG_OFF_MAX 256

/* What one `pipelab run` holds between its steps; run_state_free releases it. */
typedef struct run_state {
    sched *s;                /* the lowered schedule */
    exec_result r;           /* the measurement */
    sim_result pr;           /* the prediction, when have_pred */
    int have_pred;
    sim_result pr_off;       /* the prediction without the reuse-distance term, when have_off */
    int have_off;
    char tag_off[RUN_TAG_OFF_MAX]; /* its tag: the run's with RUN_TAG_OFF_SUFFIX */
    int is_root;             /* 0 on the MPI ranks other than 0, which only run */
    cost_model *prof;        /* the prediction's profile model, or NULL */
    pl_buf pcsv;             /* its CSV (its per-worker lines give each rank's STEP) */
    const char *profile_src; /* where it came from: --profile's path, or src_text */
    char src_text[RUN_PROFILE_SRC_MAX]; /* the description of an in-process profile */
    cost_memory *mem;        /* [ranks] the cost model's memory per rank (exec_mem_predict), or NULL */
} run_state;

/* Sets st to hold nothing yet. */
static void run_state_init(run_state *st) {
    memset(st, 0, sizeof *st);
    st->is_root = 1;
    st->profile_src = "";
    pl_buf_init(&st->pcsv);
}

/* Frees what st holds. */
static void run_state_free(run_state *st) {
    pl_buf_free(&st->pcsv);
    free(st->mem);
    cost_model_free(st->prof);
    if (st->have_pred) sim_result_free(&st->pr);
    if (st->have_off) sim_result_free(&st->pr_off);
    exec_result_free(&st->r);
    sched_free(st->s);
}

/* Returns e's code, or PL_EINPUT where a step failed without one, so that a failure is never
 * read as PL_OK. */
static int failed(const pl_err *e) { return e->code != PL_OK ? e->code : PL_EINPUT; }

/* The profile model of --profile FILE: its CSV appended to csv (its per-worker lines give each
 * rank's STEP), c->pred_step_s its STEP of one block (0 when it has none). NULL and e on error. */
static cost_model *file_profile(const char *path, exec_config *c, pl_buf *csv, pl_err *e) {
    char *text = NULL;
    size_t len = 0;
    if (pl_read_file(path, RUN_PROFILE_FILE_MAX, &text, &len, e) != PL_OK) return NULL;
    cost_model *m = cost_model_read_csv(path, text, len, e);
    double st = 0;
    if (m && exec_profile_meta(text, len, NULL, &st) == 0) c->pred_step_s = st;
    pl_buf_puts(csv, text);
    free(text);
    if (m && exec_profile_check(m, c, path, e) != PL_OK) {
        cost_model_free(m);
        return NULL;
    }
    return m;
}

/* Returns the ranks the GPU profile times at once: under --sm-split the ranks that share a GPU
 * (each in its SM share), else 1 (the whole GPU). */
static int gpu_concurrency(const opts *o, const sched *s) {
    int G = o->c.cuda_devices;
    if (G < 1) {
        pl_err ignored;
        G = exec_cuda_devices(&ignored);
    }
    int per = G > 0 ? (s->ranks + G - 1) / G : 1;
    return o->c.sm_split && per > 1 ? per : 1;
}

/* Returns the threads the CPU before-profile times at once: --profile-concurrency, else the
 * ranks, at most the cores. */
static int cpu_concurrency(const opts *o, const sched *s) {
    if (o->pconc >= 1) return o->pconc;
    int n = exec_profile_cores();
    return s->ranks < n || n < 1 ? s->ranks : n;
}

/* The profile model measured now, before the run, on the GPU or on CPU threads
 * (gpu_concurrency, cpu_concurrency): its CSV appended to csv, its description written to
 * src[n], c->pred_step_s its STEP of one block. NULL and e on error. */
static cost_model *measured_profile(const opts *o, const sched *s, exec_config *c, char *src, size_t n, pl_buf *csv,
                                    pl_err *e) {
    exec_layer_profile lp;
    int rc;
    if (o->cuda) {
        int conc = gpu_concurrency(o, s);
        snprintf(src, n, "in-process GPU profile (exec_cuda_profile_layers, %s%s)", exec_precision_name(o->c.precision),
                 conc > 1 ? ", 1/N of the SMs" : ", whole GPU");
        rc = exec_cuda_profile_csv(c, o->preps, conc, NULL, csv, &lp, e);
    } else {
        int conc = cpu_concurrency(o, s);
        snprintf(src, n, "in-process profile (exec_profile_layers, %d worker%s at once)", conc, conc == 1 ? "" : "s");
        rc = exec_profile_csv_n(c, o->preps, conc, NULL, csv, &lp, e);
    }
    if (rc != PL_OK) return NULL;
    c->pred_step_s = lp.step_s;
    return cost_model_read_csv(o->cuda ? "in-process GPU profile" : "in-process profile", csv->data, csv->len, e);
}

/* Gets the profile model of the prediction, before the run or after it on MPI's rank 0:
 * --profile FILE, or measured now (measured_profile). Its CSV goes to st->pcsv and its source to
 * st->profile_src; c->pred_step_s is its STEP of one block (0 when a file has none). NULL and e
 * on error. */
static cost_model *get_profile(const opts *o, exec_config *c, run_state *st, pl_err *e) {
    c->pred_step_s = 0;
    if (o->profile) {
        st->profile_src = o->profile;
        return file_profile(o->profile, c, &st->pcsv, e);
    }
    st->profile_src = st->src_text;
    return measured_profile(o, st->s, c, st->src_text, sizeof st->src_text, &st->pcsv, e);
}

/* The profile model the run measured between its passes (exec_config.profile_between_reps): its
 * CSV appended to st->pcsv, its description in st->profile_src, c->pred_step_s its STEP of one
 * block. NULL and e on error. */
static cost_model *run_profile(run_state *st, exec_config *c, pl_err *e) {
    snprintf(st->src_text, sizeof st->src_text,
             "in-process profile between the passes (exec_profile_layers rounds on the run's %d worker%s)", st->r.workers,
             st->r.workers == 1 ? "" : "s");
    st->profile_src = st->src_text;
    int replicated = 0;
    for (int q = 0; c->replicas && q < st->s->stages; q++) replicated |= c->replicas[q] > 1;
    /* the passes time compute only: a replicated run's all-reduce is profiled now, after them */
    exec_layer_profile *lp = &st->r.between_profile[0];
    if (replicated && exec_profile_allreduce(c, st->r.between_reps, &lp->ar_latency_s, &lp->ar_Bps, e) != PL_OK) return NULL;
    if (exec_profile_csv_between(st->s, c, &st->r, &st->pcsv, e) != PL_OK) return NULL;
    c->pred_step_s = st->r.between_profile[0].step_s;
    return cost_model_read_csv("in-process profile", st->pcsv.data, st->pcsv.len, e);
}

/* Prints the reason of a failing MPI rank before MPI_Abort ends the job. */
static void mpi_abort_print(const pl_err *why) {
    fprintf(stderr, "pipelab: run failed: %s\n", why->msg);
    fflush(stderr);
}

/* The replicas and split of --partition FILE and --replicas-stage S=N, as simulate applies them:
 * the partition's layer bounds become the stage split (its layers the model's blocks: --depth,
 * when given, must match), its replicas and then the flags' each stage's (sim_replicas_apply),
 * and a replicated 1f1b, pipedream or 2bw is generated again with PipeDream's per-replica
 * warm-up and simulate's iteration count (sim_replicated_schedule) into st->s. Returns PL_OK or
 * an error in e naming the file or the flag. */
static int replicas_setup(opts *o, run_state *st, pl_err *e) {
    if (!o->partition && !o->nrepl) return PL_OK;
    int S = st->s->stages;
    o->replicas = pl_calloc((size_t)S, sizeof *o->replicas);
    if (!o->replicas) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int q = 0; q < S; q++) o->replicas[q] = 1;
    if (o->partition) {
        cost_partition *p = sim_partition_read(o->partition, st->s, o->x.depth, "of --depth or --model", e);
        if (!p) return failed(e);
        o->nsplit = S;
        for (int q = 0; q < S; q++) {
            o->split[q] = p->bound[q + 1] - p->bound[q];
            o->replicas[q] = p->replicas ? p->replicas[q] : 1;
        }
        cost_partition_free(p);
    }
    sim_replica_spec rs = {0, o->nrepl, o->repl_stage, o->repl_n};
    if (sim_replicas_apply(&rs, S, o->replicas, e) != PL_OK) return PL_EINPUT;
    if (sim_replicated_schedule(o->a.from ? NULL : o->a.kind, &o->a.g, &o->a.budget, o->replicas, &st->s, e) != PL_OK)
        return failed(e);
    o->c.replicas = o->replicas;
    return PL_OK;
}

/* Sets the model's depth (--depth, the sum of --stage-blocks, or RUN_BLOCKS_PER_STAGE blocks per
 * stage) and its stage split. Returns PL_OK, or PL_EINPUT when --stage-blocks does not give one
 * count per stage of s. */
static int set_blocks(opts *o, const sched *s, pl_err *e) {
    o->c.layers = o->x.depth ? o->x.depth : RUN_BLOCKS_PER_STAGE * s->stages;
    if (!o->nsplit) return PL_OK;
    if (o->nsplit != s->stages)
        return pl_errf(e, PL_EINPUT, "--stage-blocks gives %d stages, the schedule has %d", o->nsplit, s->stages);
    int sum = 0;
    for (int q = 0; q < o->nsplit; q++) sum += o->split[q];
    if (!o->x.depth) o->c.layers = sum;
    o->c.stage_blocks = o->split;
    return PL_OK;
}

/* Returns PL_OK when each stage of the model fits in memory (exec_check_memory), else its error
 * in e. */
static int check_fit(const opts *o, const sched *s, pl_err *e) {
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    int rc = blocks ? exec_stage_blocks(s, &o->c, blocks, e) : pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) rc = exec_check_memory(s, &o->c, blocks, -1, e);
    free(blocks);
    return rc;
}

/* Gets the schedule and the model's shape, and refuses before the run what cannot go through: a
 * database that cannot take the run (MPI: rank 0 stores, after), a model that does not fit,
 * before the profile spends seconds on it (MPI: each rank checks its own share when it starts).
 * Returns PL_OK or an error in e. */
static int prepare(opts *o, run_state *st, pl_err *e) {
    st->s = get_schedule(o, e);
    if (!st->s) return failed(e);
    int rc = replicas_setup(o, st, e);
    if (rc == PL_OK) rc = set_blocks(o, st->s, e);
    if (rc == PL_OK && !o->no_db && !o->mpi) rc = cli_run_check_db(o->db, e);
    if (rc == PL_OK && !o->mpi) rc = check_fit(o, st->s, e);
    return rc;
}

/* Runs the schedule on the backend and transport of o, with the prediction's profile taken
 * before the run, on an idle machine, or after it: on MPI's rank 0, or from what the run's
 * workers measured between the passes. The MPI ranks other than 0 only run (st->is_root 0).
 * Returns PL_OK or an error in e. */
static int execute(opts *o, run_state *st, pl_err *e) {
    if (!o->no_predict && !o->mpi && !o->between && !(st->prof = get_profile(o, &o->c, st, e))) return failed(e);
    int rc;
    if (o->mpi && o->cuda) {
        exec_cuda_mpi_set_abort_hook(mpi_abort_print);
        rc = exec_cuda_mpi_run(st->s, &o->c, &st->r, &st->is_root, e);
    } else if (o->mpi) {
        exec_mpi_set_abort_hook(mpi_abort_print);
        rc = exec_mpi_run(st->s, &o->c, &st->r, &st->is_root, e);
    } else {
        rc = o->cuda ? exec_cuda_run(st->s, &o->c, &st->r, e) : run_with_bar(st->s, &o->c, &st->r, e);
        if (rc != PL_OK) pl_err_prefix(e, "run failed: ");
    }
    /* an MPI run predicts REDUCE_GRAD from MPI's all-reduce: timed now by every process, before
     * rank 0 profiles, unless the profile comes from a file (which has it or says what is used) */
    int replicated = 0;
    for (int q = 0; o->c.replicas && q < st->s->stages; q++) replicated |= o->c.replicas[q] > 1;
    if (rc == PL_OK && o->mpi && !o->cuda && replicated && !o->no_predict && !o->profile) {
        int root;
        rc = exec_mpi_profile_allreduce(&o->c, o->preps, &o->c.mpi_ar_latency_s, &o->c.mpi_ar_Bps, &root, e);
    }
    if (rc != PL_OK || !st->is_root || o->no_predict || st->prof) return rc;
    st->prof = o->between ? run_profile(st, &o->c, e) : get_profile(o, &o->c, st, e);
    return st->prof ? PL_OK : failed(e);
}

/* Makes the prediction from the profile, each stage's STEP on its rank's core when the profile
 * has one worker per rank (between the passes, whose block rows are the ranks' own too; or P
 * workers at once), else the STEP over all of them; then writes --save-profile. Returns PL_OK or
 * an error in e. */
static int predict(const opts *o, run_state *st, pl_err *e) {
    const pl_buf *t = &st->pcsv;
    double *rank_step = pl_calloc((size_t)st->s->ranks, sizeof *rank_step);
    if (!rank_step) return pl_errf(e, PL_ENOMEM, "out of memory");
    int per_rank = exec_profile_worker_steps(t->data ? t->data : "", t->len, st->s->ranks, rank_step) == 0;
    /* the reuse-distance term when the profile's worker lines time it; then the prediction
     * without it too, stored beside (RUN_TAG_OFF_SUFFIX) */
    cost_transport tr = o->mpi ? COST_TRANSPORT_MPI : COST_TRANSPORT_THREADS;
    double *ri = pl_calloc(2 * (size_t)st->s->ranks, sizeof *ri), *rw = ri ? ri + st->s->ranks : NULL;
    int reuse = ri && exec_profile_worker_reuse(t->data ? t->data : "", t->len, st->s->ranks, ri, rw) == 0;
    const double *steps = per_rank ? rank_step : NULL;
    int rc = ri ? cli_run_predict(st->s, &o->c, st->prof, tr, steps, reuse ? ri : NULL, reuse ? rw : NULL, &st->pr, e)
                : pl_errf(e, PL_ENOMEM, "out of memory");
    st->have_pred = rc == PL_OK;
    if (rc == PL_OK && reuse) {
        rc = cli_run_predict(st->s, &o->c, st->prof, tr, steps, NULL, NULL, &st->pr_off, e);
        st->have_off = rc == PL_OK;
        snprintf(st->tag_off, sizeof st->tag_off, "%s" RUN_TAG_OFF_SUFFIX, o->tag ? o->tag : "");
    }
    free(rank_step);
    free(ri);
    if (rc != PL_OK) return rc;
    return o->save_profile && t->len ? pl_write_file(o->save_profile, t->data, t->len, e) : PL_OK;
}

/* Writes --dump-weights, stores the measured and predicted runs (unless --no-db) and puts the
 * report in o's format into out, with the cost model's memory per rank beside the measured.
 * Returns PL_OK or an error in e. */
static int report(const opts *o, run_state *st, int argc, char **argv, pl_buf *out, pl_err *e) {
    const sched *s = st->s;
    const sim_result *pr = st->have_pred ? &st->pr : NULL;
    st->mem = pl_calloc((size_t)s->ranks, sizeof *st->mem);
    if (st->mem && exec_mem_predict(s, &o->c, st->mem, e) != PL_OK) return failed(e);
    const exec_result *r = &st->r;
    if (o->dump && pl_write_file(o->dump, (const char *)r->final_weights, r->n_weights * sizeof(float), e) != PL_OK)
        return failed(e);
    pl_buf cmd;
    pl_buf_init(&cmd);
    pl_buf_puts(&cmd, "pipelab");
    for (int i = 0; i < argc; i++) pl_buf_printf(&cmd, " %s", argv[i]);
    cli_run_store_info info = {o->db, o->tag, cmd.data, o->transport, pr ? st->profile_src : "", o->a.from, o->profile,
                               o->seed, o->trace, st->have_off ? &st->pr_off : NULL, st->tag_off};
    int64_t ids[2] = {0, 0};
    int rc = o->no_db ? PL_OK : cli_run_store(s, r, pr, &info, ids, e);
    if (rc == PL_OK && strcmp(o->format, "json") == 0) out_json(s, r, pr, st->mem, &info, ids, out);
    else if (rc == PL_OK && strcmp(o->format, "csv") == 0) out_csv(s, r, pr, st->mem, out);
    else if (rc == PL_OK) out_table(o, s, r, pr, st->mem, st->profile_src, out);
    if (rc == PL_OK && !o->no_db && strcmp(o->format, "table") == 0)
        pl_buf_printf(out, "stored             measured run %lld, simulated run %lld in %s%s%s\n", (long long)ids[0],
                      (long long)ids[1], o->db ? o->db : STORE_DEFAULT_PATH, o->tag ? ", tag " : "", o->tag ? o->tag : "");
    pl_buf_free(&cmd);
    return rc;
}

/* Entry point of `pipelab run`: parse, prepare, execute, predict, report; returns an exit code. */
int cli_run(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    pl_err e;
    pl_err_clear(&e);
    run_state st;
    run_state_init(&st);
    pl_buf out;
    pl_buf_init(&out);
    int code = prepare(&o, &st, &e);
    if (code == PL_OK) code = execute(&o, &st, &e);
    if (code == PL_OK && st.is_root && st.prof) code = predict(&o, &st, &e);
    if (code == PL_OK && st.is_root) code = report(&o, &st, argc, argv, &out, &e);
    if (code != PL_OK) rc = cli_fail(&e);
    else rc = st.is_root ? cli_write_output(NULL, &out) : CLI_OK;
    if (o.mpi && o.cuda) exec_cuda_mpi_finalize();
    else if (o.mpi) exec_mpi_finalize();
    pl_buf_free(&out);
    run_state_free(&st);
    free(o.replicas);
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
