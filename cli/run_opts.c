/* run_opts.c: the flags of `pipelab run`: --help, the option table, the parsing of each flag and
 * the checks of those that go together (run_opts.h). */
#include <ctype.h>
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
#include "run_drive.h"
#include "run_opts.h"

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
    "  --from FILE [--legacy-letters]   a .sched file or a PyTorch CSV (.csv; the file sets the\n"
    "                        ranks, microbatches, chunks, iterations and recomputation; a CSV\n"
    "                        has no recomputation: --recompute gives it one)\n"
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
    "  --replicas-stage S=N  stage S replicated N times (repeatable, once a stage; over the\n"
    "                        partition's). Each replica is a rank of its own (a thread, or an MPI\n"
    "                        process: mpirun -np the sum of the ranks' replicas); microbatch k\n"
    "                        runs on replica k mod N;\n"
    "                        REDUCE_GRAD all-reduces the replicas' gradients exactly (a ring over\n"
    "                        the mailboxes, or MPI_Allreduce); 1f1b, pipedream and 2bw are\n"
    "                        generated with PipeDream's per-replica warm-up\n"
    "run:\n"
    "  --warmup N --timed N  passes (default %d and %d)\n"
    "  --steady PCT          time more passes than --timed, up to --timed-max, until the run is\n"
    "                        steady: the standard error of the mean timed pass (their standard\n"
    "                        deviation over the square root of their number) within PCT percent\n"
    "                        of the median pass; all ranks decide alike before each pass. With\n"
    "                        the profile between the passes, each added gap holds the rounds a\n"
    "                        planned one does (the profile gains repetitions). Threads, MPI\n"
    "                        processes on one host's clock, or GPU ranks of one process\n"
    "  --timed-max N         the most timed passes with --steady (default 4 times --timed)\n"
    "  --transport threads|mpi  threads in this process (default), or one MPI process per rank:\n"
    "                        mpirun -np P pipelab run --transport mpi ...\n"
    "  --oversubscribe       allow more ranks than cores (timings then measure time-slicing)\n"
    "  --no-pin              do not pin worker threads to cores\n"
    CLI_EXEC_PAGES_HELP
    "  --no-host-probe       skip the host probe: by default (CPU backend, threads), before the\n"
    "                        run, the forward of one block of the default dense model (width 256,\n"
    "                        16 rows) is timed on the ranks' cores at once (a block each) and on\n"
    "                        one core alone, 5 repetitions, about 50 ms; stored with the run\n"
    "                        (params \"host_probe\") and printed, it tells how fast the host ran\n"
    "                        then, which a shared machine (a VM) can change by 2x from one minute\n"
    "                        to the next\n"
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
    "                        ranks (default: the ranks, at most the cores; 1 = one thread alone;\n"
    "                        more than the cores need --oversubscribe);\n"
    "                        given alone, it selects --profile-timing before\n"
    "  --save-profile FILE   write the in-process profile the prediction used (a profile CSV:\n"
    "                        between the passes, each block's row is its rank's own worker's)\n"
    "  --no-predict          no prediction\n"
    "  --terms               predict with the measured terms of a profile whose per-worker\n"
    "                        lines time them (the one between the passes, or one of pipelab\n"
    "                        profile with several workers): each backward at reuse distance 0\n"
    "                        (right after its forward) with its rank's ratio to the profile's I\n"
    "                        and W, and the first F, I, W of each stage in a rank's list (and the\n"
    "                        later ones) with the ratio of a profile round's first microbatch (of\n"
    "                        its others). Off by default: over the broad CPU grid they shortened\n"
    "                        the prediction a percent more than the runs were short\n"
    "                        (docs/validate_cpu.md). The other prediction is stored too: under\n"
    "                        tag NAME-terms, or with --terms NAME-noterms. Every prediction has\n"
    "                        the again term where the profile times it: on a rank with several\n"
    "                        stages an F, I, W right after the same kind on the same stage (an I,\n"
    "                        W after a B too) at the ratio of the profile's again times, a streak\n"
    "                        of three microbatches on the same blocks; and the version term where\n"
    "                        the profile times it: on a rank whose STEPs go into a new weight\n"
    "                        version (PipeDream's first stages, 2BW), every F, I, W at the ratio\n"
    "                        of the profile's cycle on two versions to the same cycle in place\n"
    "  --pass-length-term    predict with the pass-length term of a profile whose per-worker lines\n"
    "                        have it (as --terms): every rank's times scaled from the profile's\n"
    "                        stretches of work to a stretch as long as the predicted pass, the\n"
    "                        machine's interruptions at that scale. Off by default: over twelve\n"
    "                        broad CPU grids its noise cost more than its bias removal\n"
    "                        (docs/validate_cpu.md). The other prediction is stored too: under\n"
    "                        tag NAME-passlen, or with --pass-length-term NAME-nopasslen\n"
    "  --no-pass-length-term without it (the default)\n"
    "  --interruptions SHARE,RATE[,SHORT_SHARE,SHORT_RATE]  the host's interruptions as `pipelab\n"
    "                        profile --interruptions` measures them: the share of a busy core's\n"
    "                        time in gaps over 0.1 ms up to 20 ms, and their count a second; then\n"
    "                        the same of the short gaps, over 1 us up to 0.1 ms. The prediction\n"
    "                        prices each band: every F, I, W and STEP takes its time over 1 less\n"
    "                        the shares of the bands whose gaps the profile's round of the kind\n"
    "                        holds none of at its median (the band's rate times the round's part\n"
    "                        of the kind at most ln 2), which a pass always holds its share of\n"
    "                        (docs/validate_cpu.md, \"What the tail is made of\", \"Short\n"
    "                        gaps\"). The one without is stored too, under tag NAME-nointerrupt\n"
    "  --no-jitter-term      predict at each action's mean time, one deterministic simulated run.\n"
    "                        By default, where the profile's per-worker lines time the forward's\n"
    "                        spread (fwd_sd_s), every compute action's time is a lognormal factor\n"
    "                        of mean 1 at the ranks' root mean square of fwd_sd_s / fwd_s, and,\n"
    "                        where the workers ran side by side and their speeds drifted apart\n"
    "                        (the profile's rank_drift > 0), each rank's compute times one more\n"
    "                        such factor drawn once per simulated run; the prediction is the\n"
    "                        median of 31 such runs: balanced ranks wait on each other's slower\n"
    "                        actions and on the slower rank, which a run at mean times leaves\n"
    "                        out (docs/validate_cpu.md, \"The jitter and drift terms in the\n"
    "                        default\"). The other prediction is stored too: under NAME-nojitter\n"
    "                        (and NAME-nodrift: the jitter term alone), or with --no-jitter-term\n"
    "                        NAME-jitter and NAME-drift\n"
    "  --sharing-term        predict with the sharing term (the default on threads; over MPI, where\n"
    "                        no contended host was measured, with this flag alone), where the\n"
    "                        profile's workers timed their F alone (the others waiting) and beside\n"
    "                        each other (a profile of several workers between the passes, or one of\n"
    "                        pipelab profile on several): an action that runs while the others wait\n"
    "                        takes the mean of the workers' F alone over F beside times its profile\n"
    "                        time (which the workers take all at once), beside some of them a time\n"
    "                        between, each action at the fixed point of the pass's overlaps\n"
    "                        (processor sharing): a host whose cores slow each other down runs a\n"
    "                        pipeline's lone actions faster (docs/validate_cpu.md, \"The sharing\n"
    "                        term measured in the profile's rounds\"). The other prediction is\n"
    "                        stored too: under NAME-noshare, or without the term NAME-share\n"
    "  --no-sharing-term     without it\n"
    "  --sharing-per-class   the sharing term per class, where the profile also timed its workers'\n"
    "                        backward alone, beside the others' backwards and beside their\n"
    "                        forwards, and an F beside a backward: a backward (B, I, W) and a\n"
    "                        forward (the other busy kinds) each at its own ratios alone and beside\n"
    "                        the other class, in units of its time beside its own class\n"
    "                        (docs/validate_cpu.md, \"The sharing term per class\"). The other\n"
    "                        prediction is stored too: per class under NAME-classshare, or with\n"
    "                        this flag the one ratio on all under NAME-oneshare. Without the\n"
    "                        sharing term (--no-sharing-term, or over MPI without --sharing-term)\n"
    "                        it makes NAME-share per class; on a profile without the backward\n"
    "                        phases (an earlier pipelab's) it warns and takes the one ratio\n"
    "  (also stored, under tag NAME-rest: the prediction with every F, I, W at a profile\n"
    "                        round's time after its first microbatch, which on small blocks\n"
    "                        re-warms after the run's pass; docs/validate_cpu.md, \"Off the grid\";\n"
    "                        and under NAME-reuse, NAME-first: the prediction with the\n"
    "                        reuse-distance or the first-touch term of --terms alone; where a\n"
    "                        rank holds several stages, under NAME-noagain: without the again term;\n"
    "                        where a rank's STEPs go into a new weight version, under\n"
    "                        NAME-noversions: without the version term;\n"
    "                        under full recomputation, under NAME-nonext: the prediction without\n"
    "                        the I next to its recomputed forward, which the prediction otherwise\n"
    "                        prices from the profile's bwd_in_next_s unless --terms is given;\n"
    "                        and under NAME-before: the reuse-distance term with the kind\n"
    "                        before: an I right after an F of its stage at the distance-0 ratio,\n"
    "                        an F right after a B or W of its stage at its rank's fwd_back_s /\n"
    "                        fwd_s)\n"
    "output:\n"
    "  --format table|csv|json   (default table)\n"
    "  --trace               store one row per executed action (timelines)\n"
    "  --dump-weights FILE   write the final weights (all blocks, fp32, native byte order)\n"
    "  --tag NAME            label stored with both runs\n"
    "  --db PATH             results database (default results/out/pipelab.db)\n"
    "  --no-db               do not store\n"
    "\n"
    "A failing run (error, wrong message, memory budget, dead MPI rank) stores nothing and exits 1\n"
    "naming the rank and the action. A store that fails after the run (a full disk) prints the\n"
    "report all the same, then exits 1 saying that the results were printed but not stored.\n"
    "Under mpirun, a refusal every process meets alike is printed once, by rank 0.\n"
    "exit status: 0 ok, 1 bad input or a failed run, 2 bad usage\n";

enum { O_SPLIT = 1000, O_LR, O_MOM, O_WARMUP, O_TIMED, O_TRANSPORT, O_OVERSUB, O_NOPIN, O_TIMEOUT, O_BUDGET,
       O_PROFILE, O_SAVEPROF, O_PREPS, O_PCONC, O_PTIMING, O_NOPRED, O_TERMS, O_PASSLEN, O_NOPASSLEN, O_NOJITTER, O_SHARE, O_NOSHARE, O_SHARECLASS, O_INTR, O_FORMAT, O_TRACE, O_DUMP, O_TAG, O_DB, O_NODB,
       O_FAULT, O_GPUS, O_MAXMEM, O_PARTITION, O_REPLS, O_NOPROBE, O_STEADY, O_TIMEDMAX, O_HELP };

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
    {"terms", no_argument, 0, O_TERMS},
    {"pass-length-term", no_argument, 0, O_PASSLEN},
    {"no-pass-length-term", no_argument, 0, O_NOPASSLEN},
    {"no-jitter-term", no_argument, 0, O_NOJITTER},
    {"sharing-term", no_argument, 0, O_SHARE},
    {"no-sharing-term", no_argument, 0, O_NOSHARE},
    {"sharing-per-class", no_argument, 0, O_SHARECLASS},
    {"interruptions", required_argument, 0, O_INTR},
    {"format", required_argument, 0, O_FORMAT}, {"trace", no_argument, 0, O_TRACE},
    {"dump-weights", required_argument, 0, O_DUMP}, {"tag", required_argument, 0, O_TAG},
    {"db", required_argument, 0, O_DB}, {"no-db", no_argument, 0, O_NODB},
    {"no-host-probe", no_argument, 0, O_NOPROBE},
    {"steady", required_argument, 0, O_STEADY}, {"timed-max", required_argument, 0, O_TIMEDMAX},
    {"inject-fault", required_argument, 0, O_FAULT}, /* hidden: [KIND:]RANK:ACTION[:PASS] (tests) */
    {"gpus", required_argument, 0, O_GPUS},
    {"max-memory", required_argument, 0, O_MAXMEM},
    {"partition", required_argument, 0, O_PARTITION}, {"replicas-stage", required_argument, 0, O_REPLS},
    {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0},
};

#define RUN_PROFILE_REPS 20              /* --profile-reps' default */
#define RUN_MAX_PASSES (1 << 20)         /* the largest --warmup, --timed and --profile-reps */
#define RUN_MAX_PROFILE_CONCURRENCY 256  /* the largest --profile-concurrency */
#define RUN_MAX_GPUS 4096                /* the largest --gpus */
#define RUN_MAX_MEM_BUDGET 9.2e18        /* bytes, the largest --mem-budget (below INT64_MAX) */
#define FAULT_KIND_MAX 32                /* room for --inject-fault's KIND */
#define RUN_TAG_MAX 200                  /* --tag's characters, the longest suffix within 256 */
#define FAULT_FIELD_MAX 24               /* room for each number of --inject-fault */

/* The schedule flags' limits here, tighter than the generators': the executor starts one thread
 * (or process) per rank and walks every microbatch of every iteration for real. */
static const cli_sched_limits run_limits = {4096, 1 << 20, 4096, 1 << 16};

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

/* The largest --interruptions share (half of a core's time taken away) and rate a second. */
#define RUN_MAX_INTR_SHARE 0.5
#define RUN_MAX_INTR_RATE 1e6

/* Parses --interruptions SHARE,RATE[,SHORT_SHARE,SHORT_RATE] into o; returns 0, or -1 after
 * printing a usage error. */
static int interruptions_arg(const char *val, run_opts *o) {
    char buf[256];
    double v[4] = {-1, -1, -1, -1};
    int n = 0, ok = strlen(val) < sizeof buf;
    if (ok) {
        strcpy(buf, val);
        char *save = NULL;
        for (char *f = strtok_r(buf, ",", &save); f && ok; f = strtok_r(NULL, ",", &save))
            ok = n < 4 && !pl_parse_double(f, &v[n++]);
    }
    /* no empty field either ("0.01,,5" would lose one to strtok), nor a blank one may skip */
    for (const char *c = val; ok && *c; c++)
        ok = !isspace((unsigned char)*c) && !(*c == ',' && (c == val || c[1] == ',' || c[1] == '\0'));
    ok = ok && (n == 2 || n == 4);
    for (int k = 0; ok && k < n; k++)
        ok = v[k] >= 0 && v[k] <= (k % 2 ? RUN_MAX_INTR_RATE : RUN_MAX_INTR_SHARE);
    if (ok && n == 4) ok = v[0] + v[2] <= RUN_MAX_INTR_SHARE;
    if (!ok) {
        cli_usage_error("run", "--interruptions: needs SHARE,RATE or SHARE,RATE,SHORT_SHARE,SHORT_RATE with each share "
                               "from 0 to %g (the two together too) and each rate from 0 to %g a second (got '%s'; "
                               "`pipelab profile --interruptions S` measures them)",
                        RUN_MAX_INTR_SHARE, RUN_MAX_INTR_RATE, val);
        return -1;
    }
    o->intr_share = v[0];
    o->intr_rate = v[1];
    o->intr_short_share = n == 4 ? v[2] : 0;
    o->intr_short_rate = n == 4 ? v[3] : 0;
    return 0;
}

/* Parses "N,N,..." into o->split; returns 0 or -1 (usage error printed). */
static int split_arg(const char *val, run_opts *o) {
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
        if (!*p) return 0;
        p++; /* the comma, which a number must follow */
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
static int replica_opt(int c, const char *arg, run_opts *o) {
    if (c == O_PARTITION) {
        o->partition = arg;
        return -1;
    }
    if (c != O_REPLS) return -2;
    if (o->nrepl == MAX_REPL_FLAGS) return cli_usage_error("run", "too many --replicas-stage flags");
    if (cli_replicas_stage_arg("run", arg, o->repl_stage, o->repl_n, o->nrepl)) return CLI_EUSAGE;
    o->nrepl++;
    return -1;
}

/* Applies one of run's own options c with value arg (seen: the argument as given, for the error
 * of an unknown one). Returns -1 to go on, or an exit code: CLI_EUSAGE after printing what is
 * wrong, CLI_OK after --help. */
static int run_opt(int c, const char *arg, const char *seen, run_opts *o) {
    double v;
    int rr = replica_opt(c, arg, o);
    if (rr != -2) return rr;
    switch (c) {
    case O_SPLIT: return split_arg(arg, o) ? CLI_EUSAGE : -1;
    case O_LR: return num_arg("--lr", arg, &o->c.lr) ? CLI_EUSAGE : -1;
    case O_MOM:
        if (num_arg("--momentum", arg, &o->c.momentum)) return CLI_EUSAGE;
        if (o->c.momentum >= 1) return cli_usage_error("run", "--momentum: must be below 1 (got '%s')", arg);
        return -1;
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
    case O_NOPROBE: o->no_host_probe = 1; return -1;
    case O_STEADY: return cli_num_arg("run", "--steady", arg, 1e-6, 1e6, &o->steady_pct) ? CLI_EUSAGE : -1;
    case O_TIMEDMAX: return cli_int_arg("run", "--timed-max", arg, 1, RUN_MAX_PASSES, &o->timed_max) ? CLI_EUSAGE : -1;
    case O_TERMS: o->terms = 1; return -1;
    case O_PASSLEN: o->pass_length = 1; return -1;
    case O_NOPASSLEN: o->pass_length = 0; return -1;
    case O_NOJITTER: o->jitter = 0; return -1;
    case O_SHARE: o->sharing = 1; return -1;
    case O_NOSHARE: o->sharing = 0; return -1;
    case O_SHARECLASS: o->share_class = 1; return -1;
    case O_INTR: return interruptions_arg(arg, o) ? CLI_EUSAGE : -1;
    case O_FORMAT: o->format = arg; return -1;
    case O_TRACE: o->trace = 1; return -1;
    case O_DUMP: o->dump = arg; return -1;
    case O_TAG:
        /* the predictions beside the run are stored as TAG-SUFFIX, in room of 256 (cmd_run.c) */
        if (strlen(arg) > RUN_TAG_MAX)
            return cli_usage_error("run", "--tag: at most %d characters (got %zu): the predictions stored beside the "
                                   "run take its tag with a suffix", RUN_TAG_MAX, strlen(arg));
        o->tag = arg;
        return -1;
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
static int check_profile_flags(run_opts *o) {
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

/* Checks --steady and --timed-max and sets the executor's rule from them (exec_config.steady_max,
 * timed_passes_max). Returns -1 when they hold, else CLI_EUSAGE after printing which does not. */
static int check_steady(run_opts *o) {
    if (o->timed_max && !o->steady_pct) return cli_usage_error("run", "--timed-max is the most passes of --steady: give both");
    if (!o->steady_pct) return -1;
    if (o->cuda && o->mpi) return cli_usage_error("run", "--steady is not for MPI processes on GPUs (--backend cuda --transport mpi)");
    int most = o->timed_max ? o->timed_max : (o->c.timed_passes > RUN_MAX_PASSES / 4 ? RUN_MAX_PASSES : 4 * o->c.timed_passes);
    if (most < o->c.timed_passes)
        return cli_usage_error("run", "--timed-max %d is under --timed %d", most, o->c.timed_passes);
    o->c.timed_passes_max = most;
    o->c.steady_max = o->steady_pct / 100;
    return -1;
}

/* Checks the flags that go together after parsing (transport, backend and precision, the
 * profile's). Returns -1 when they hold, else an exit code after printing which does
 * not. */
static int check_flags(run_opts *o) {
    if (strcmp(o->transport, "threads") && strcmp(o->transport, "mpi"))
        return cli_usage_error("run", "--transport must be threads or mpi");
    o->mpi = strcmp(o->transport, "mpi") == 0;
    /* the sharing term by default on threads, where a contended host put the pipeline's lone
     * actions at 0.63 of those beside; over MPI no such host was measured, and on a quiet one the
     * term cost its default grid 0.20 points of MAPE (docs/validate_cpu.md, "The sharing term
     * measured in the profile's rounds") */
    if (o->sharing < 0) o->sharing = !o->mpi;
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
    if ((o->terms || o->pass_length) && o->cuda)
        return cli_usage_error("run", "--terms and --pass-length-term read the CPU profile's per-worker lines, which "
                                      "the CUDA profile does not time (not with --backend cuda)");
    if ((o->intr_share > 0 || o->intr_short_share > 0) && o->cuda)
        return cli_usage_error("run", "--interruptions prices the host's interruptions of a busy CPU core (not with "
                                      "--backend cuda)");
    return check_steady(o);
}

/* Parses argv into o: the executor's defaults (exec_config_default), then the flags. Returns -1
 * to continue, or an exit code. */
int run_opts_parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    exec_config_default(&o->c);
    o->transport = "threads";
    o->format = "table";
    o->preps = RUN_PROFILE_REPS;
    o->jitter = 1;
    o->sharing = -1; /* check_flags: on threads, off over MPI */
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
    const cli_output outs[] = {{"--dump-weights", o->dump}, {"--save-profile", o->save_profile}};
    if (rc < 0) rc = cli_db_flags("run", o->db, o->no_db, outs, sizeof outs / sizeof outs[0]);
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

#endif
