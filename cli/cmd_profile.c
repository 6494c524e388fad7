/* cmd_profile.c: `pipelab profile`: time one block's F, I, W and STEP on one worker or P at
 * once (median of repetitions) and write the cost model's profile CSV, the input of predictions for this machine. */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifdef PIPELAB_HAVE_PL_EXEC
#include "exec_cuda.h"
#include "exec_drive.h"
#include "run_drive.h"

/* --help, a printf format that print_help fills with the executor's defaults (exec_config_default)
 * and the profile's, so that the text and the behaviour cannot drift apart. */
static const char help_format[] =
    "usage: pipelab profile [--width H] [--depth L] [--ffn F] [--microbatch-size B] | [--model SPEC] [options]\n"
    "\n"
    "Times the forward (F), input-gradient (I) and weight-gradient (W) of one block of the\n"
    "executor's model (dense: Linear H->F, GELU, Linear F->H, residual; or --model's transformer\n"
    "block; fp32, one BLAS thread) on this thread, --reps times after one warm-up, and writes\n"
    "the medians as the cost model's profile\n"
    "CSV: L identical rows (every block has the same shape) with seconds, FLOPs and sizes per\n"
    "microbatch of B rows. `pipelab run --profile FILE` and `pipelab simulate --model FILE` read it.\n"
    "It also times the optimizer STEP of one block (SGD over its parameters); the comment line\n"
    "\"# pipelab-exec concurrency=P step_s=S\" records both, and `pipelab run` predicts STEP from it.\n"
    "On the CPU it times the replicas' all-reduce too (REDUCE_GRAD: the executor's ring over the\n"
    "mailboxes, 2 threads placed as `pipelab run` places them, sizes from one block to L blocks,\n"
    "the median of min(N, 15)) and fits the ring's latency and bandwidth:\n"
    "\"#@ allreduce_latency_s=A allreduce_Bps=B\", which `pipelab run` predicts REDUCE_GRAD from,\n"
    "and the hand-off of a stage boundary between two ranks (a ping-pong of 1, 4 and 16\n"
    "boundaries): \"#@ p2p_latency_s=A p2p_Bps=B\", which it prices SEND/RECV with, and the\n"
    "hand-off's time on the ranks' own timelines: the sender's send call (\"#@ p2p_send_s=A\n"
    "p2p_send_Bps=B\") and the receiver's post of a receive whose message already came (its copy\n"
    "out: \"#@ p2p_post_s=A p2p_post_Bps=B\"), which hold the ranks in the prediction.\n"
    "With --transport mpi, under mpirun -np 2 (or more: the first two time it), it first times\n"
    "the MPI transport's all-reduce (MPI_Allreduce of the replicas' exact integers, as an MPI\n"
    "run's) and its hand-off (nonblocking sends, polled receives) the same ways and records\n"
    "them too: \"#@ allreduce_mpi_latency_s=A allreduce_mpi_Bps=B\" and \"#@ p2p_mpi_latency_s=A\n"
    "p2p_mpi_Bps=B\", which `pipelab run --transport mpi` predicts from; process 0 then profiles\n"
    "and writes, on every core of its host whatever core the launcher bound it to, while the\n"
    "others wait with naps of a millisecond.\n"
    "\n"
    "  --width H             hidden size (default %d)\n"
    "  --depth L             blocks (rows of the profile; default %d)\n"
    "  --ffn F               inner size (default 4 H)\n"
    "  --microbatch-size B   rows per microbatch (default %d)\n"
    CLI_EXEC_MODEL_HELP
    "  --reps N              repetitions, the median is kept (default %d)\n"
    "  --seed N              weights and inputs of the timed block (default %" PRIu64 ")\n"
    "  --concurrency P       time on P threads at once, pinned to cores like `pipelab run`'s P\n"
    "                        ranks, each on its own ceil(L / P) blocks: a run computes on all its\n"
    "                        ranks at once, sharing caches and memory bandwidth (default %d: one\n"
    "                        thread alone). Profile with P = the run's ranks to predict it.\n"
    "                        cuda: P workers at once on GPU 0, as P ranks sharing it\n"
    "  --oversubscribe       allow --concurrency above this process's cores, as `pipelab run\n"
    "                        --oversubscribe` allows ranks (timings then measure time-slicing; a\n"
    "                        warning says so); without it that is refused (CPU)\n"
    "  --backend cpu|cuda    profile on this CPU (default) or on GPU 0 (CUDA events; the profile\n"
    "                        `pipelab run --backend cuda` predicts from)\n"
    "  --precision P         cuda: GEMM operands fp32 (default), tf32 or bf16\n"
    "  --sm-split            cuda: each worker inside a green context holding 1/P of the SMs\n"
    "                        (P = --concurrency): the share each of P ranks sharing a GPU gets\n"
    CLI_EXEC_PAGES_HELP
    "  --transport threads|mpi  mpi: also measure the MPI all-reduce (mpirun -np 2 pipelab profile\n"
    "                        --transport mpi ...; default threads)\n"
    "  --max-memory SIZE     memory pipelab may use (8e9, 16GiB; default: the physical memory or\n"
    "                        ulimit -v, or $PIPELAB_MAX_MEMORY); a profile whose workers' blocks and\n"
    "                        stashed microbatches need more is refused up front\n"
    "  -o, --output FILE     write the CSV there and print a summary (default: CSV on stdout)\n"
    "  --interruptions S     instead of the profile, measure the host's interruptions for S seconds\n"
    "                        on --concurrency threads pinned like the ranks: the share of the time\n"
    "                        the host takes a busy core away in gaps over 0.1 ms up to 20 ms (a\n"
    "                        longer one is a stall), and how many a second, each the median over\n"
    "                        windows of 1 s (an episode of the host's does not set them); and\n"
    "                        the same of the short gaps, over 1 us (or 20 readings of the clock,\n"
    "                        where they take longer) up to 0.1 ms, on a second line. `pipelab\n"
    "                        run --interruptions SHARE,RATE,SHORT_SHARE,SHORT_RATE` prices them\n"
    "\n"
    "exit status: 0 ok, 1 bad input, 2 bad usage\n";

#define PROFILE_DEPTH 8          /* --depth's default: rows of the profile */
#define PROFILE_REPS 50          /* --reps' default */
#define PROFILE_MAX_REPS (1 << 24)
#define PROFILE_CONCURRENCY 1    /* --concurrency's default: one thread alone */
#define PROFILE_MAX_CONCURRENCY 256
#define PROFILE_WARNING_MAX 256  /* bytes of the oversubscription warning (as exec_result.warning's) */

enum { O_REPS = 1000, O_CONC, O_OUT, O_TRANSPORT, O_INTR, O_MAXMEM, O_OVERSUB, O_HELP };

static const struct option long_opts[] = {
    CLI_EXEC_LONG_OPTS,
    {"reps", required_argument, 0, O_REPS}, {"concurrency", required_argument, 0, O_CONC},
    {"output", required_argument, 0, O_OUT}, {"transport", required_argument, 0, O_TRANSPORT},
    {"interruptions", required_argument, 0, O_INTR}, {"max-memory", required_argument, 0, O_MAXMEM},
    {"oversubscribe", no_argument, 0, O_OVERSUB}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0},
};

typedef struct opts {
    exec_config c;
    cli_exec_args x; /* --width, --depth, --ffn, --microbatch-size, --seed, --backend, --precision */
    int reps, conc;
    int mpi;          /* --transport mpi */
    cli_sched_args a; /* its max_memory: --max-memory (the budget: o->c.budget) */
    double intr_s;    /* --interruptions S (0: the profile) */
    const char *path; /* -o, NULL = stdout */
} opts;

/* Prints --help with the defaults of exec_config_default and of the profile filled in. */
static void print_help(void) {
    exec_config d;
    exec_config_default(&d);
    printf(help_format, d.hidden, PROFILE_DEPTH, d.microbatch_size, PROFILE_REPS, d.init_seed, PROFILE_CONCURRENCY);
}

/* Parses argv into o: the executor's defaults (exec_config_default) and the profile's, then the
 * flags. Returns -1 to continue, or an exit code. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    exec_config_default(&o->c);
    o->reps = PROFILE_REPS;
    o->conc = PROFILE_CONCURRENCY;
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "o:", long_opts, NULL)) != -1) {
        int rc = cli_exec_opt("profile", ch, optarg, &o->c, &o->x);
        if (rc == CLI_EUSAGE) return rc;
        if (rc == CLI_OK) continue;
        switch (ch) {
        case O_CONC:
            if (cli_int_arg("profile", "--concurrency", optarg, 1, PROFILE_MAX_CONCURRENCY, &o->conc)) return CLI_EUSAGE;
            break;
        case O_REPS: if (cli_int_arg("profile", "--reps", optarg, 1, PROFILE_MAX_REPS, &o->reps)) return CLI_EUSAGE; break;
        case 'o':
        case O_OUT: o->path = optarg; break;
        case O_TRANSPORT:
            if (strcmp(optarg, "threads") && strcmp(optarg, "mpi"))
                return cli_usage_error("profile", "--transport must be threads or mpi (got '%s')", optarg);
            o->mpi = strcmp(optarg, "mpi") == 0;
            break;
        case O_INTR:
            if (cli_num_arg("profile", "--interruptions", optarg, EXEC_GAP_MAX_S, EXEC_INTERRUPTIONS_MAX_S, &o->intr_s))
                return CLI_EUSAGE;
            break;
        case O_MAXMEM: if (cli_max_memory_arg("profile", optarg, &o->a)) return CLI_EUSAGE; break;
        case O_OVERSUB: o->c.oversubscribe = 1; break;
        case O_HELP: print_help(); return CLI_OK;
        default: return cli_usage_error("profile", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("profile", "unexpected argument '%s'", argv[optind]);
    int rc = cli_exec_check("profile", &o->x, &o->c);
    if (rc >= 0) return rc;
    if (o->c.backend != EXEC_BACKEND_CUDA && (o->c.precision != EXEC_PREC_FP32 || o->c.sm_split))
        return cli_usage_error("profile", "--precision other than fp32 and --sm-split need --backend cuda");
    if (o->intr_s > 0 && (o->mpi || o->c.backend == EXEC_BACKEND_CUDA || o->path))
        return cli_usage_error("profile", "--interruptions measures this host's cores and prints two lines (drop "
                                          "--transport mpi, --backend cuda and -o)");
    if (o->mpi && o->c.backend == EXEC_BACKEND_CUDA)
        return cli_usage_error("profile", "--transport mpi profiles the CPU executor's all-reduce (the CUDA backend has no "
                                          "replicas)");
    o->c.layers = o->x.depth ? o->x.depth : PROFILE_DEPTH;
    sched_budget_init(&o->c.budget, o->a.max_memory, getenv(SCHED_MAX_MEMORY_ENV)); /* as run's (cli_sched_check) */
    if (o->x.have_seed) { /* the target network keeps its default */
        o->c.init_seed = o->x.seed;
        o->c.data_seed = o->x.seed + 2;
    }
    const cli_output outs[] = {{"-o", o->path}}; /* before minutes of profiling */
    return cli_outputs_check("profile", outs, 1);
}

/* Prints a measured hand-off (exec_p2p; nothing when it was not measured): its link, and the
 * sender's and the receiver's own times where measured. */
static void print_p2p(const char *who, const exec_p2p *h) {
    if (!(h->Bps > 0)) return;
    printf("hand-off           %s: latency %.3g s, %.4g GB/s", who, h->latency_s, h->Bps / 1e9);
    if (h->send_Bps > 0) printf("; send %.3g s + %.4g GB/s", h->send_s, h->send_Bps / 1e9);
    if (h->post_Bps > 0) printf("; post %.3g s + %.4g GB/s (message there)", h->post_s, h->post_Bps / 1e9);
    printf("\n");
}

/* Prints what was measured and where it was written (with -o FILE). */
static void print_summary(const opts *o, const exec_layer_profile *p) {
    const exec_config *c = &o->c;
    printf("profile            %d blocks of width %d, ffn %d, microbatch %d: F %.6g s, I %.6g s, W %.6g s, "
           "STEP %.6g s (median of %d, %d worker%s at once)\n",
           c->layers, c->hidden, c->ffn ? c->ffn : 4 * c->hidden, c->microbatch_size, p->f_s, p->i_s, p->w_s, p->step_s,
           o->reps, o->conc, o->conc == 1 ? "" : "s");
    if (p->ar_Bps > 0) printf("all-reduce         threads: latency %.3g s, %.4g GB/s\n", p->ar_latency_s, p->ar_Bps / 1e9);
    if (c->mpi_ar_Bps > 0) printf("all-reduce         MPI: latency %.3g s, %.4g GB/s\n", c->mpi_ar_latency_s, c->mpi_ar_Bps / 1e9);
    print_p2p(c->backend == EXEC_BACKEND_CUDA ? "GPU" : "threads", &p->p2p);
    print_p2p("MPI", &c->mpi_p2p);
    printf("written            %s\n", o->path);
}

/* Run's rule for its ranks (exec_check_cores) on `workers` workers (what: what they are) and
 * ncores cores: more workers than cores are refused without --oversubscribe, and with it a
 * warning goes to stderr (when say). Returns PL_OK or the error. */
static int check_workers(const opts *o, int workers, int ncores, const char *what, int say, pl_err *e) {
    if (exec_check_cores(workers, ncores, o->c.oversubscribe, what, e) != PL_OK) return e->code;
    char warning[PROFILE_WARNING_MAX];
    if (say && exec_oversubscribed(workers, ncores, what, warning, sizeof warning))
        fprintf(stderr, "pipelab profile: warning: %s\n", warning);
    return PL_OK;
}

/* The threads the CPU profile (or --interruptions) pins like ranks against this process's cores
 * (check_workers). Returns PL_OK or the error. */
static int check_cores(const opts *o, pl_err *e) {
    return check_workers(o, o->conc, exec_profile_cores(), "profiling threads (--concurrency)", 1, e);
}

/* The processes of `pipelab profile --transport mpi` against their host's cores (check_workers),
 * as `pipelab run --transport mpi` checks its ranks: the first two time the MPI all-reduce and
 * hand-off while the others wait at a barrier MPI polls, so more processes than cores time
 * time-slicing. Checked before MPI starts, so that every process refuses alike and none waits on
 * another: the job's processes on this host as its launcher counts them (cli_launcher; nothing
 * is checked where it does not say) against the host's online cores, not this process's: the
 * launcher binds each process to its own core before it starts. Online cores are at least the
 * cores the processes have together, so a refusal is never wrong; a cpuset narrower than the
 * host goes unseen here (run's check unites the processes' affinity masks over MPI). The
 * launcher's rank 0 alone warns. Returns PL_OK or the error. */
static int check_mpi_cores(const opts *o, pl_err *e) {
    cli_launch l = cli_launcher();
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    if (l.local < 1 || ncores < 1 || ncores > INT_MAX) return PL_OK;
    return check_workers(o, l.local, (int)ncores, "MPI processes", l.rank <= 0, e);
}

/* `pipelab profile --interruptions S`: measures and prints the host's interruptions; returns an
 * exit code. */
static int interruptions(const opts *o) {
    pl_err e;
    pl_err_clear(&e);
    exec_interruptions r;
    if (check_cores(o, &e) != PL_OK) return cli_fail(&e);
    if (exec_interruptions_measure(o->conc, o->intr_s, &r, &e) != PL_OK) return cli_fail(&e);
    printf("interruptions      share %.6g (%.2f%% of the time in gaps over %g ms up to %g ms, %.1f a second), %d "
           "worker%s at once, %g s; medians over %d window%s, over the whole time %.2f%%\n",
           r.share, 100 * r.share, 1e3 * EXEC_GAP_MIN_S, 1e3 * EXEC_GAP_MAX_S, r.per_s, r.workers, r.workers == 1 ? "" : "s",
           r.seconds, r.windows, r.windows == 1 ? "" : "s", 100 * r.share_all);
    printf("short gaps         share %.6g (%.2f%% of the time in gaps over %.3g ms up to %g ms, %.1f a second), ",
           r.short_share, 100 * r.short_share, 1e3 * r.short_min_s, 1e3 * EXEC_GAP_MIN_S, r.short_per_s);
    if (r.short_min_s >= EXEC_GAP_MIN_S)
        printf("not measured: a reading of the clock takes over %g ms / %d here\n", 1e3 * EXEC_GAP_MIN_S, EXEC_GAP_READS);
    else
        printf("the same medians, over the whole time %.2f%%\n", 100 * r.short_share_all);
    return CLI_OK;
}

/* Entry point of `pipelab profile`: measures and writes the profile CSV (with -o FILE, a summary
 * on stdout); returns an exit code. */
int cli_profile(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    if (o.intr_s > 0) return interruptions(&o);
    const exec_config *c = &o.c;
    char host[CLI_HOST_MAX] = "";
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    pl_err e;
    pl_err_clear(&e);
    pl_buf out;
    pl_buf_init(&out);
    exec_layer_profile p;
    int is_root = 1;
    /* refused before anything is allocated or measured (every MPI process alike, before MPI:
     * printed once) */
    if (exec_check_profile_memory(c, o.reps, o.conc, &e) != PL_OK || (o.mpi && check_mpi_cores(&o, &e) != PL_OK)) {
        pl_buf_free(&out);
        return cli_fail_alike(&e);
    }
    /* MPI first, on every process of the job; then process 0 alone profiles and writes */
    int prc = o.mpi ? exec_mpi_profile_allreduce(c, o.reps, &o.c.mpi_ar_latency_s, &o.c.mpi_ar_Bps, &is_root, &e) : PL_OK;
    if (o.mpi) { /* a collective too: every process calls it, whatever the all-reduce's outcome on it */
        pl_err ep;
        int rp = exec_mpi_profile_p2p(c, o.reps, &o.c.mpi_p2p, &is_root, &ep);
        if (prc == PL_OK && rp != PL_OK) {
            prc = rp;
            e = ep;
        }
    }
    if (prc == PL_OK && !is_root) {
        exec_mpi_finalize(); /* waits, napping, until process 0 has profiled */
        pl_buf_free(&out);
        return CLI_OK;
    }
    /* process 0 profiles alone: on every core of its host, as a threads run's ranks sit, not on
     * the one core the launcher bound it to (its threads' hand-off read 10-20 us there) */
    if (prc == PL_OK && o.mpi && exec_mpi_profile_unbind() != 0)
        fprintf(stderr, "pipelab profile: warning: could not leave the core the MPI launcher bound process 0 to; the "
                        "threads' all-reduce and hand-off are timed on it\n");
    if (prc == PL_OK && c->backend == EXEC_BACKEND_CPU) prc = check_cores(&o, &e); /* on the cores it profiles on */
    if (prc == PL_OK)
        prc = c->backend == EXEC_BACKEND_CUDA
                  ? exec_cuda_profile_csv(c, o.reps, o.conc, host[0] ? host : NULL, &out, &p, &e)
                  : exec_profile_csv_n(c, o.reps, o.conc, host[0] ? host : NULL, &out, &p, &e);
    if (prc != PL_OK) {
        rc = cli_fail(&e);
    } else {
        rc = cli_write_output(o.path, &out);
        if (rc == CLI_OK && o.path && strcmp(o.path, "-") != 0) print_summary(&o, &p);
    }
    if (o.mpi) exec_mpi_finalize();
    pl_buf_free(&out);
    return rc;
}

#else

/* Returns CLI_EUSER: this build has no executor. */
int cli_profile(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipelab: this build has no executor (exec/)\n");
    return CLI_EUSER;
}

#endif
