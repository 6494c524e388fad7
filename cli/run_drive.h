/* run_drive.h: the glue of `pipelab run` between the executor, the simulator and the results
 * store: the executor flags run and profile share, the simulator's prediction for an executed
 * configuration and the stored run pair. Only cli/ includes it (DESIGN.md §2: the executor never
 * includes simulator headers). */
#ifndef PL_RUN_DRIVE_H
#define PL_RUN_DRIVE_H

#include <limits.h>
#include <stdint.h>

#include "cli.h"
#include "cost.h"
#include "exec.h"
#include "exec_drive.h"
#include "pl_common.h"
#include "pl_sched.h"
#include "sim.h"

/* ---------------------------------------------------------------- flags */

/* The model and backend flags that run and profile share (--width, --depth, --ffn,
 * --microbatch-size, --seed, --backend, --precision, --sm-split, --model, --no-huge-pages): option values for getopt_long
 * (below the subcommands' own, which start at 1000), the entries of its option table, what they
 * select and their limits. Their defaults are exec_config_default's. */
enum { CLI_O_WIDTH = 970, CLI_O_DEPTH, CLI_O_FFN, CLI_O_MBS, CLI_O_SEED, CLI_O_BACKEND, CLI_O_PREC, CLI_O_SMSPLIT,
       CLI_O_MODEL, CLI_O_SMALLPAGES };
#define CLI_EXEC_LONG_OPTS                                                                          \
    {"width", required_argument, 0, CLI_O_WIDTH}, {"depth", required_argument, 0, CLI_O_DEPTH},     \
    {"ffn", required_argument, 0, CLI_O_FFN}, {"microbatch-size", required_argument, 0, CLI_O_MBS}, \
    {"seed", required_argument, 0, CLI_O_SEED}, {"backend", required_argument, 0, CLI_O_BACKEND},   \
    {"precision", required_argument, 0, CLI_O_PREC}, {"sm-split", no_argument, 0, CLI_O_SMSPLIT},   \
    {"model", required_argument, 0, CLI_O_MODEL}, {"no-huge-pages", no_argument, 0, CLI_O_SMALLPAGES}
/* --no-huge-pages' help lines, which run and profile print. */
#define CLI_EXEC_PAGES_HELP                                                                                  \
    "  --no-huge-pages       keep the large buffers (each rank's arena, the profile's blocks) on the\n"      \
    "                        kernel's default pages; by default they ask for transparent huge pages\n"    \
    "                        (madvise), which wide models' passes run faster and steadier on\n"
/* --model's help lines, which run and profile print. */
#define CLI_EXEC_MODEL_HELP                                                                                  \
    "  --model SPEC          the model, in the cost models' spec form (instead of the shape flags):\n"      \
    "                        mlp:width=H,depth=L,microbatch=B[,ffn_mult=K]  the dense block (as --width\n"  \
    "                        H --depth L --microbatch-size B --ffn K H), or\n"                            \
    "                        transformer:layers=L,hidden=H,heads=A,seq=S,microbatch=B  GPT-2 decoder\n"    \
    "                        blocks (LayerNorm, causal attention, GELU MLP of 4H) on B sequences of S\n"  \
    "                        tokens per microbatch; no embedding or head (MSE against a target stack)\n"
#define CLI_EXEC_MAX_WIDTH 65536
#define CLI_EXEC_MAX_SIZE (1 << 20) /* the largest --depth, --ffn and --microbatch-size */
/* The largest --seed: a command derives seeds up to seed + 2 from it. */
#define CLI_EXEC_MAX_SEED (LONG_MAX - 2)
/* What the shared flags select beyond the exec_config fields they set. */
typedef struct cli_exec_args {
    int depth;                       /* --depth, 0 = not given (each command has its default) */
    int have_seed;                   /* 1 when --seed was given */
    uint64_t seed;                   /* --seed (each command derives its seeds from it) */
    const char *backend, *precision; /* --backend, --precision as given; NULL = not given */
    const char *model;               /* --model as given; NULL = not given */
    const char *shape_flag;          /* the last of --width, --depth, --ffn, --microbatch-size given */
} cli_exec_args;
/* Applies option c with value arg: --width, --ffn, --microbatch-size, --sm-split and --no-huge-pages to cfg, the
 * others to a. Returns -1 when c is not one of them, CLI_OK, or CLI_EUSAGE after printing what is
 * wrong with the value. */
int cli_exec_opt(const char *cmd, int c, const char *arg, exec_config *cfg, cli_exec_args *a);
/* After parsing: --backend is cpu or cuda and --precision fp32, tf32 or bf16; sets cfg->backend
 * and cfg->precision; applies --model (cli_exec_model). Returns -1 when they hold, else
 * CLI_EUSAGE after printing which does not. */
int cli_exec_check(const char *cmd, cli_exec_args *a, exec_config *cfg);
/* Applies the model spec of --model to cfg and a->depth: "mlp:width=H,depth=L,microbatch=B
 * [,ffn_mult=K]" or "transformer:layers=L,hidden=H,heads=A,seq=S,microbatch=B", every key but
 * ffn_mult required, each once. Returns -1 once applied, else CLI_EUSAGE after printing what is
 * wrong (the key, its value, a shape flag given beside it). */
int cli_exec_model(const char *cmd, const char *spec, exec_config *cfg, cli_exec_args *a);

/* ---------------------------------------------------------------- predictions */

/* The simulator's prediction for running s with cfg, from a profile model m (per-block times
 * measured on this machine; see exec_profile_csv): the stage split of cfg (exec_stage_blocks),
 * free point-to-point links (the in-process transport copies b h floats), the simulator's default
 * communication (a RECV posts, the compute that needs its data waits for it, as the CPU
 * executor's workers do; blocking mode for the CUDA backend and stash/2bw weights), gradients in
 * fp32, optimizer state 4 bytes per parameter with momentum, else 0, microbatch size cfg's.
 * Fills r (free with sim_result_free). Returns PL_OK or an error.
 * The STEP of a stage is its blocks times cfg->pred_step_s, or, when rank_step_s is not NULL,
 * times rank_step_s[r] of its rank r (each rank's own worker's measurement). The REDUCE_GRAD of
 * a replicated stage costs cost_ring_allreduce_s of its fp32 gradient bytes over its replicas on
 * the profile's all-reduce measured on the run's transport tr (cli_allreduce_link: an MPI run
 * whose profile has no MPI measurement takes the threads' one; a profile without any predicts 0;
 * both say so on stderr). The terms (cli_run_terms; NULL: none) scale the compute times
 * (sim_reuse.c). The peak memory per rank is the executor's own (exec_mem_walk). */
typedef struct cli_run_terms {
    /* [ranks] reuse distance 0: each backward right after its forward takes its stage's time
     * times the ratio of its rank r (reuse_i[r] for I, reuse_w[r] for W:
     * exec_profile_worker_reuse); NULL both: off */
    const double *reuse_i, *reuse_w;
    /* [3 ranks] first touch: the first F, I, W of a stage in its rank's list take its time times
     * first[3 r + c] of its rank r, the later ones times rest[3 r + c] (c: 0 F, 1 I, 2 W:
     * exec_profile_worker_first); NULL both: off */
    const double *first, *rest;
    /* [3 ranks] again: on a rank with several stages, an F, I, W after one on the same stage
     * takes its time times again[3 r + c] instead of its first-touch ratio
     * (exec_profile_worker_again); NULL: off */
    const double *again;
    /* [EXEC_WINDOWS ranks] the pass-length term: the pass is simulated once, then again with each
     * stage's compute and STEP times the ranks' mean factor at the first pass's length
     * (exec_window_factor_mean; rank r's factors at window + EXEC_WINDOWS r:
     * exec_profile_worker_windows); NULL: off */
    const double *window;
    /* [ranks] the I next to its recomputed forward: under full recomputation, each backward's
     * rerun is priced less what it saves the I of its stage's last layer, by the ratio next[r]
     * of its rank r (exec_profile_worker_next; sim_model.rerun_next); NULL, or reuse_i set
     * (which scales all of that I already): off */
    const double *next;
    /* [ranks] the kind before (sim.h): with reuse_i, an I right after an F of its stage takes
     * its rank's reuse_i ratio, and an F right after a B or W of its stage back[r] of its rank r
     * (exec_profile_worker_back); NULL: off */
    const double *back;
    /* [ranks] jitter: each compute action's time times a lognormal factor of mean 1 whose
     * coefficient of variation is the root mean square over the ranks of jitter[r]
     * (exec_profile_worker_jitter), and the prediction the median of CLI_RUN_JITTER_RUNS such
     * runs (sim_run_median): two balanced ranks wait on each other's slower actions, which a
     * prediction at each action's mean time leaves out; NULL: off */
    const double *jitter;
    /* the ranks' drift (exec_profile_drift, > 0; 0: off): each worker's compute times one
     * lognormal factor of mean 1 and this coefficient of variation, drawn once per simulated run
     * (sim_config.rank_cv), and the prediction the median of CLI_RUN_JITTER_RUNS such runs: two
     * balanced ranks wait on whichever is the slower over the pass, which a prediction at each
     * rank's mean speed leaves out */
    double drift;
    /* [3 ranks] the version term: the F, I and W of every stage of rank r take their times times
     * versions[3 r + c] (c: 0 F, 1 I, 2 W), its cycle on two weight versions against the same
     * cycle in place, 1 where its STEPs go in place (exec_profile_worker_versions); NULL: off */
    const double *versions;
    /* the interruption term (`pipelab profile --interruptions`; shares 0: off), two bands of
     * gaps, intr_share and intr_rate of the gaps over 0.1 ms, intr_short_share and
     * intr_short_rate of the short ones: on each rank, the F, I, W and STEP take their time over
     * 1 less the shares of the bands whose gaps their part of a profile round (EXEC_PROFILE_SLOTS
     * microbatches through the rank's stages; a STEP of each of its blocks) holds under ln 2 of at
     * the band's rate, so none at its median; the STEP not at all with step_mean. A pass holds
     * its share of the host's interruptions, which the profile's median round leaves out */
    double intr_share, intr_rate;
    /* 1: each rank's STEP at the mean over its profile's rounds (exec_layer_profile.step_mean_s),
     * which holds the gaps at their share, so the interruption term leaves it; 0: at their median
     * round (step_s) */
    int step_mean;
    /* [n_states ranks] the states term (exec_profile_worker_rounds; NULL or 0: off): each rank's
     * speed in each round of the profile, all ranks' of one round side by side, over its median
     * round; the prediction the median of runs that each take one round's speeds on all their
     * compute (sim_config.speed_draws; every round alike often, CLI_RUN_JITTER_RUNS runs at
     * least), in place of the drift term's lognormal draw: a pass waits on whichever rank is
     * slow in it, and a core's speed switches between states seconds long, on its own ("The
     * ranks' states") */
    const double *states;
    int n_states;
    /* the sharing term (sim_share_solve; 0: off): an action alone on the host takes `alone`
     * times its time beside the other ranks' compute, which is how the profile times it: the
     * profile's F alone over its F beside the other workers, in the same rounds
     * (exec_profile_worker_share; "The ranks share the host: the sharing term"); 0 for one rank
     * or a replicated stage, which sim_share_solve refuses */
    double alone;
    /* the sharing term per class (sim_share_ratios; each 0: the one ratio `alone` on all): a
     * forward beside backwards only over beside forwards, a backward alone and beside forwards
     * only over beside backwards, from the profile's backward phases
     * (exec_profile_worker_share_class; "The sharing term per class") */
    double share_cross_f, share_alone_b, share_cross_b;
    /* [n_states ranks] with the states term, the backwards' speeds in the same rounds (the
     * profile's I + W of each round, exec_profile_worker_rounds' speed_b), on each rank's B, I, W
     * and an OVERLAP's backward half, where `states` then prices its F (sim_config.speed_draws_b):
     * a host that slows its streaming work can slow the backwards more than the forwards; beside
     * the default as TAG-bstates ("The states term per class"); NULL: the states' on all compute */
    const double *states_b;
    double intr_short_share, intr_short_rate; /* the interruption term's short gaps (above) */
} cli_run_terms;
/* The stochastic runs of the jitter and drift terms, and the seed of the first. */
#define CLI_RUN_JITTER_RUNS 31
#define CLI_RUN_JITTER_SEED 1
/* The stochastic runs of a prediction: CLI_RUN_JITTER_RUNS, or with the states term's n_states > 0
 * rounds each round as often as the others, CLI_RUN_JITTER_RUNS at least. */
int cli_run_sim_runs(int n_states);
/* Returns the jitter term's coefficient of variation: the root mean square over the ranks of
 * t->jitter (0 when NULL). */
double cli_run_terms_cv(const cli_run_terms *t, int ranks);
/* Returns 1 when t prices the I next to its recomputed forward (cli_run_terms.next). */
static inline int cli_run_terms_next_on(const cli_run_terms *t) {
    return t->next && !t->reuse_i;
}
int cli_run_predict(const sched *s, const exec_config *cfg, const cost_model *m, cost_transport tr, const double *rank_step_s,
                    const cli_run_terms *terms, sim_result *r, pl_err *e);

/* ---------------------------------------------------------------- results store */

/* The other predictions a run stores beside its own (cli_run_store_info.pred_alt). */
#define CLI_RUN_ALTS 17

/* What a stored pair of runs carries besides the results. */
typedef struct cli_run_store_info {
    const char *db_path;   /* NULL = STORE_DEFAULT_PATH */
    const char *tag;       /* may be NULL */
    const char *cmdline;   /* may be NULL */
    const char *transport; /* "threads" or "mpi" */
    const char *profile;   /* where the prediction's profile came from */
    const char *from;      /* the schedule file (--from), or NULL */
    const char *profile_file; /* the profile CSV read (--profile), or NULL */
    uint64_t seed;
    int with_ops;          /* 1 = store one op row per executed action of the timed passes */
    /* the other predictions, each NULL or stored too, as a run of its own under its tag_alt:
     * [0] with the measured terms (or under --terms without them), [1] with the pass-length
     * term (or under --pass-length-term without it), [2] with every F, I, W at the time of a
     * profile round's microbatches after its first (the first-touch term's rest ratio on all),
     * [3] [4] [5] with the reuse-distance and the first-touch term alone, and without the again
     * term, [6] without the I next to its recomputed forward (cli_run_terms.next), [7] with the
     * reuse-distance term and the kind before, [8] without the jitter and drift terms (under
     * --no-jitter-term with them), [9] where the profile measured a drift, with the jitter term
     * alone, [10] without the version term, [11] under --interruptions without the interruption
     * term, [12] each rank's STEP at the mean over its profile's rounds (cli_run_terms.step_mean),
     * [13] .. [15] the other side of the states and the sharing term and the states term per
     * class, [16] the other side of the sharing term per class */
    const sim_result *pred_alt[CLI_RUN_ALTS];
    const char *tag_alt[CLI_RUN_ALTS];
    const exec_host_probe *host_probe; /* the host probe taken before the run, or NULL */
    double share_alone;    /* the sharing term's ratio the profile measured (whether the
                            * prediction took it or not); 0: not measured */
    const double *share_class; /* [3] its ratios per class the profile measured (the means of
                            * cli_run_terms.share_cross_f, share_alone_b, share_cross_b), or NULL */
    const double *interruptions; /* [4] the host's interruptions the prediction priced (run
                            * --interruptions SHARE,RATE,SHORT_SHARE,SHORT_RATE), or NULL; the
                            * predictions stored beside share these params, TAG-nointerrupt too */
} cli_run_store_info;

/* Appends the configuration JSON stored with both runs (model, optimizer, split, passes,
 * transport, profile source, the host probe when taken: "host_probe":{"workers":P,"fwd_s":S,
 * "alone_fwd_s":S}, the sharing term's measured ratio when measured: "share_alone":R, and its
 * ratios per class when measured: "share_class":[F beside backwards, backward alone, backward
 * beside forwards], and the host's interruptions when priced: "interruptions":{"share":S,
 * "rate":R,"short_share":S,"short_rate":R}) to b. */
void cli_run_params_json(const exec_result *r, const cli_run_store_info *info, pl_buf *b);

/* Checks before a run that the database at path (NULL: STORE_DEFAULT_PATH) can take it, so that
 * a bad --db is refused before the work, not after: an existing one writable, not corrupt, not
 * of a newer schema (store_open, which leaves it in WAL mode at this schema); one that does not
 * exist yet creatable where the store will make it (cli_check_output with its folders made:
 * every folder of its path there a folder, the deepest writable; a folder at path is named as
 * such), without creating anything.
 * Returns PL_OK or the error naming the path. */
int cli_run_check_db(const char *path, pl_err *e);
/* Writes the measured run r (kind "measured", per-rank metrics, ops when info->with_ops) and,
 * when pred is not NULL, the simulator's prediction (kind "simulated", same tag, schedule,
 * counts, policies and params_json) to the store, all in one transaction (store_begin: all of
 * them are stored or none); ids (may be NULL) get the two run ids (0 for a missing prediction,
 * both 0 when nothing was stored). With pred, each info->pred_alt[i] is stored
 * as well (simulated, tag info->tag_alt[i], uid "prediction-", that tag, '@' and the measured
 * run's uid: STORE_PREDICTION_ALT_SEP), so that `compare --measured-tag T
 * --sim-tag T-terms` (or T-noterms, T-nopasslen, T-passlen) gives the other prediction's errors
 * from the same measured runs.
 * Returns PL_OK or an error. */
int cli_run_store(const sched *s, const exec_result *r, const sim_result *pred, const cli_run_store_info *info,
                  int64_t ids[2], pl_err *e);

#endif
