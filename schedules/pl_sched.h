/* sched.h: the schedule IR shared by the simulator and the executor; generators, lowering,
 * validation, the unit-time dry run and the file formats (.sched, PyTorch CSV). */
#ifndef SCHED_H
#define SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "pl_common.h"

/* ---------------------------------------------------------------- actions */

/* Kinds of action. Compute kinds first (F, B, I, W, OVERLAP), then communication, then the rest. */
typedef enum sched_kind {
    SCHED_F = 0,       /* forward of (stage, mb) */
    SCHED_B,           /* full backward (input + weight gradients) */
    SCHED_I,           /* backward for the input gradient only */
    SCHED_W,           /* backward for the weight gradient only */
    SCHED_OVERLAP,     /* compound: F of (stage, mb) overlapped with B/I of (stage2, mb2) */
    SCHED_SEND_F,      /* stage sends its forward output of mb to stage+1 */
    SCHED_RECV_F,      /* stage receives its forward input of mb from stage-1 */
    SCHED_SEND_B,      /* stage sends the input gradient of mb to stage-1 */
    SCHED_RECV_B,      /* stage receives its output gradient of mb from stage+1 */
    SCHED_REDUCE_GRAD, /* gradient all-reduce of a stage (mb = -1, or the iteration-local mb) */
    SCHED_STEP,        /* optimizer step of a stage (mb = -1, or the mb whose update it applies) */
    SCHED_UNSHARD,     /* FSDP unshard of a stage's weights (read from PyTorch files, kept) */
    SCHED_RESHARD,     /* FSDP reshard of a stage's weights */
    SCHED_NKINDS
} sched_kind;

/* One action on one rank. 20 bytes. mb is the global microbatch index across iterations
 * (iteration = mb / microbatches); -1 where the kind has no microbatch. For SCHED_OVERLAP,
 * (stage, mb) is the forward half and (stage2, mb2, kind2 = SCHED_B or SCHED_I) the backward
 * half; for every other kind stage2 = mb2 = -1 and kind2 = 0. */
typedef struct sched_action {
    int32_t stage;
    int32_t mb;
    int32_t stage2;
    int32_t mb2;
    uint8_t kind;
    uint8_t kind2;
    uint16_t reserved;
} sched_action;

/* Returns the canonical name of a kind ("F", "SEND_F", "OVERLAP_F_B", ...). */
const char *sched_kind_name(sched_kind k);
/* Returns 1 for F, B, I, W and OVERLAP. Inline, like sched_kind_is_comm and sched_act: the
 * generators, lowering and the simulator call them once per action. */
static inline int sched_kind_is_compute(sched_kind k) {
    return k == SCHED_F || k == SCHED_B || k == SCHED_I || k == SCHED_W || k == SCHED_OVERLAP;
}
/* Returns 1 for the kinds a rank's busy time (and so its bubble) counts: the compute kinds and
 * STEP, the optimizer step, which also occupies the rank's compute. The simulator and the
 * executor count a bubble over the same actions. */
int sched_kind_is_busy(sched_kind k);
/* Returns 1 for SEND_F, RECV_F, SEND_B, RECV_B. */
static inline int sched_kind_is_comm(sched_kind k) {
    return k == SCHED_SEND_F || k == SCHED_RECV_F || k == SCHED_SEND_B || k == SCHED_RECV_B;
}

/* Makes a plain action (the second half unused: -1); make an overlap with sched_overlap. */
static inline sched_action sched_act(sched_kind k, int stage, int mb) {
    sched_action a = {stage, mb, -1, -1, (uint8_t)k, 0, 0};
    return a;
}
sched_action sched_overlap(int f_stage, int f_mb, sched_kind bkind, int b_stage, int b_mb);

/* Letter set used when parsing action text. CURRENT: B = full backward, I, W.
 * LEGACY (older PyTorch releases): B = input backward, BW = full backward, W. */
typedef enum sched_letters { SCHED_LETTERS_CURRENT = 0, SCHED_LETTERS_LEGACY = 1 } sched_letters;

/* Formats an action in PyTorch's notation ("0F1", "2I0", "1SEND_F0", "0REDUCE_GRAD",
 * "(0F7;7B3)OVERLAP_F_B") into buf (size n); returns the length written (like snprintf). */
int sched_action_format(const sched_action *a, char *buf, size_t n);
/* The same in the given letters: LEGACY writes an input backward "B" and a full backward "BW"
 * (older PyTorch releases); -1 for what those letters cannot express (an overlapped pair). */
int sched_action_format_letters(const sched_action *a, sched_letters letters, char *buf, size_t n);
/* Parses exactly one action from text[0..len); the whole text must be consumed.
 * Returns PL_OK, or PL_EINPUT with a message saying what is wrong and *err_col set to the
 * 0-based column inside text where parsing failed. */
int sched_action_parse(const char *text, size_t len, sched_letters letters, sched_action *out,
                       size_t *err_col, pl_err *e);

/* ---------------------------------------------------------------- schedule */

typedef enum sched_placement {
    SCHED_PLACE_LOOP = 0, /* stage s on rank s mod p */
    SCHED_PLACE_V,        /* 0..p-1 then p-1..0, repeating (zig-zag) */
    SCHED_PLACE_EXPLICIT  /* stage_rank[] given */
} sched_placement;

typedef enum sched_weights {
    SCHED_WEIGHTS_FLUSH = 0, /* one version, a flush per iteration */
    SCHED_WEIGHTS_STASH,     /* PipeDream weight stashing, no flush, update per microbatch */
    SCHED_WEIGHTS_2BW        /* double-buffered weights, new version every m microbatches */
} sched_weights;

typedef enum sched_recompute { SCHED_RECOMPUTE_NONE = 0, SCHED_RECOMPUTE_FULL } sched_recompute;

/* The actions of one rank, in order. */
typedef struct sched_rank {
    sched_action *acts;
    size_t n, cap;
} sched_rank;

/* A schedule: for each rank the ordered list of its actions. Owns all its memory. */
typedef struct sched {
    char kind[32];         /* generator name, or "file" for loaded schedules */
    int ranks;             /* p: workers */
    int stages;            /* virtual stages (model chunks), >= ranks when chunks > 1 */
    int microbatches;      /* m: microbatches per iteration */
    int iterations;        /* iterations described (async schedules use several) */
    int chunks;            /* stages per rank (v); informational, stages / ranks */
    sched_placement placement;
    int *stage_rank;       /* [stages] rank that holds each stage */
    sched_weights weights;
    sched_recompute recompute;
    int lowered;           /* 1 when SEND/RECV (and REDUCE_GRAD/STEP) are explicit */
    sched_rank *rank;      /* [ranks] */
    char *src_path;        /* file the schedule was read from, or NULL (owned) */
    int *src_line;         /* [ranks] line of each rank's row in that file, or NULL (owned) */
    sched_action *block;   /* a generator's lists of all ranks in one table (sched_gen_reserve:
                            * huge pages, one fault per 2 MiB), or NULL; lists inside it are not
                            * freed one by one */
    size_t block_bytes;
    int block_mapped;      /* 1 when block came from mmap (sched_big_calloc) */
} sched;

/* Tables of at least this many bytes come from an anonymous mapping with transparent huge
 * pages: touched at once (the generators' lists, the simulator's tables), 4 KiB pages would
 * cost a page fault per 4 KiB and make most accesses TLB misses. */
#define SCHED_MAP_MIN_BYTES ((size_t)8 << 20)
/* Returns n zeroed bytes (at least 1): from calloc below SCHED_MAP_MIN_BYTES, else from an
 * anonymous mapping with huge pages (*mapped = 1). NULL when out of memory. */
void *sched_big_calloc(size_t n, int *mapped);
/* Frees what sched_big_calloc returned (n and mapped as it gave them). */
void sched_big_free(void *p, size_t n, int mapped);

/* Records where a loaded schedule came from, so validation errors can say "path:line: ...".
 * Copies path; src_line gets one entry per rank. Returns PL_OK or PL_ENOMEM. */
int sched_set_source(sched *s, const char *path, const int *rank_lines);

/* Limits on sizes accepted anywhere (generators, files). Larger requests get a clear error. */
#define SCHED_MAX_RANKS 65536
#define SCHED_MAX_STAGES (1 << 20)
#define SCHED_MAX_MICROBATCHES (1 << 24)
#define SCHED_MAX_ACTIONS ((size_t)1 << 31)

/* Memory budget (limits.c). Work whose size grows with the schedule (generating, lowering,
 * simulating, executing) estimates its bytes before allocating and is refused when they exceed
 * the budget its caller passes in (sched_generate_within, sched_lower_within, the generators,
 * sim_config.budget, sched_check_command_memory, exec_config.budget); the library reads no environment
 * and keeps no limit of its own. A NULL or zeroed budget is the automatic one: the smaller of
 * the physical memory and the address-space / data-segment limits. */
typedef struct sched_budget {
    uint64_t bytes;      /* the limit; 0 = automatic */
    const char *source;  /* what set bytes, named in refusals ("--max-memory", SCHED_MAX_MEMORY_ENV) */
    const char *bad_env; /* a value of SCHED_MAX_MEMORY_ENV that is not a size (or 0), else NULL:
                          * every check refuses, quoting it */
} sched_budget;
/* The environment variable the CLI reads the budget from when --max-memory is not given. */
#define SCHED_MAX_MEMORY_ENV "PIPELAB_MAX_MEMORY"
/* Fills b from --max-memory's bytes (flag_bytes; 0 = not given) and the value of
 * SCHED_MAX_MEMORY_ENV (env_value; NULL or empty = unset): the flag wins, then a size in the
 * variable (anything else there is kept in bad_env), else the automatic limit. */
void sched_budget_init(sched_budget *b, uint64_t flag_bytes, const char *env_value);
/* Returns b's limit in bytes (b NULL: the automatic one); *source (may be NULL) names where it
 * comes from. */
uint64_t sched_memory_limit(const sched_budget *b, const char **source);
/* Parses a size ("8e9", "16GiB", "512M", binary units); returns 0 and *out, or -1. */
int sched_parse_bytes(const char *text, uint64_t *out);
/* Returns PL_OK when bytes fit b's limit (b NULL: the automatic one), else PL_EINPUT: "WHAT
 * needs about N GiB (B bytes), more than the L GiB available (source); ...", or when b has a
 * bad_env "PIPELAB_MAX_MEMORY='lots' is not a size in bytes ...". bytes = UINT64_MAX stands for
 * an estimate that overflowed 64 bits and is always refused. */
int sched_memory_check(const sched_budget *b, uint64_t bytes, const char *what, pl_err *e);
/* Bytes a generator allocates for n actions (the action lists, with their growth slack). */
#define sched_gen_bytes(n) ((uint64_t)(n) * (uint64_t)sizeof(sched_action) * 3 / 2 + ((uint64_t)1 << 20))

/* Allocates an empty schedule with the given shape and placement (stage_rank filled for
 * LOOP and V; for EXPLICIT pass stage_rank, copied). Returns NULL and fills e on error. */
sched *sched_new(int ranks, int stages, int microbatches, sched_placement pl,
                 const int *stage_rank, pl_err *e);
void sched_free(sched *s);
/* Returns a deep copy, or NULL on allocation failure. */
sched *sched_clone(const sched *s);
/* sched_push's path when the rank's list is full or the rank does not exist (call sched_push). */
int sched_push_grow(sched *s, int rank, sched_action a);
/* Appends an action to a rank's list; returns PL_OK or PL_ENOMEM (PL_EINTERNAL for a rank
 * outside the schedule). Inline: generators call it once per action, and the action then
 * goes from registers to the list. */
static inline int sched_push(sched *s, int rank, sched_action a) {
    if (rank >= 0 && rank < s->ranks && s->rank[rank].n < s->rank[rank].cap) {
        sched_rank *rk = &s->rank[rank];
        rk->acts[rk->n++] = a;
        return PL_OK;
    }
    return sched_push_grow(s, rank, a);
}
/* Total number of actions over all ranks. */
size_t sched_total_actions(const sched *s);
/* Returns the iterations s runs (its iterations field, 1 when unset), and the microbatches of
 * all of them (microbatches x iterations): the one reading of an unset count. */
int sched_iterations(const sched *s);
int64_t sched_total_microbatches(const sched *s);
/* Returns 1 when stage q steps after each of its backwards, one STEP for each (as many STEPs of q
 * in s's lists as actions that complete one of its microbatches' gradients: B, W, an OVERLAP's B
 * half): PipeDream's weight stashing, an update per microbatch. 0 otherwise: a flush (a STEP an
 * iteration), 2BW (one every m microbatches), lists without STEPs (not lowered). */
int sched_stage_steps_each_backward(const sched *s, int q);
/* Replicated stages (PipeDream's 1F1B-RR): the replica of a stage of n replicas that performs
 * a: microbatch k on replica k mod n; -n for an action of every replica (REDUCE_GRAD and STEP
 * without a microbatch: flush and 2bw); 0 for the rest and whenever n <= 1. The one rule by
 * which the simulator's replica streams and the executor's replica ranks split a rank's list. */
int sched_replica_of(const sched_action *a, int n);

/* Weight versions of one stage (one replica of it), the one rule by which the cost model's walk,
 * the simulator and the executor count them. A forward uses the newest version. A STEP after at
 * least one backward writes a new version when a microbatch in flight (its forward ran, the end
 * of its backward, B or W, not yet) uses the newest, and updates the newest in place otherwise;
 * a STEP after no backward changes nothing. An older version is freed when the backward of the
 * last microbatch that uses it ends. The stage holds the newest version and every older one in
 * use: 1 throughout a flush schedule (sched_check puts each STEP after its iteration's backwards
 * and before the next iteration's forwards), up to the microbatches in flight under PipeDream's
 * stashing, and up to 2 under 2BW; the last stage of a straight pipeline, whose backward follows
 * its forward, holds 1 under both. */
typedef struct sched_versions {
    int32_t *ver_of; /* [mbs] the version each microbatch in flight uses; -1 when none */
    int32_t *refs;   /* [mbs + 1] microbatches in flight on each version */
    int64_t mbs;     /* microbatches (global numbers 0..mbs-1) */
    int32_t newest;  /* the newest version */
    int32_t held;    /* versions held now */
    int32_t acc;     /* backwards since the last STEP */
} sched_versions;
/* Starts the count of a stage of mbs microbatches: one version held. PL_OK or PL_ENOMEM. */
int sched_versions_init(sched_versions *v, int64_t mbs);
void sched_versions_free(sched_versions *v);
/* A forward of mb starts (it uses the newest version). */
void sched_versions_forward(sched_versions *v, int64_t mb);
/* The backward of mb ends (B, or the W of a split one): returns -1 when it freed an older
 * version, else 0. */
int sched_versions_backward(sched_versions *v, int64_t mb);
/* A STEP starts: returns 1 when it writes a new version, else 0. */
int sched_versions_step(sched_versions *v);
/* Fills stage_rank[] for a placement rule; returns PL_OK or PL_EINPUT. */
int sched_place(sched_placement pl, int ranks, int stages, int *stage_rank, pl_err *e);
/* Names of enum values, and parsing them back (return -1 when unknown). */
const char *sched_placement_name(sched_placement p);
const char *sched_weights_name(sched_weights w);
const char *sched_recompute_name(sched_recompute r);
int sched_placement_parse(const char *s);
int sched_weights_parse(const char *s);
int sched_recompute_parse(const char *s);
/* Returns 1 when both schedules are identical (shape, policies, every action). */
int sched_equal(const sched *a, const sched *b);

/* ---------------------------------------------------------------- generators */

typedef struct sched_gen_opts {
    int ranks;        /* p */
    int microbatches; /* m, per iteration */
    int chunks;       /* v: stages per rank (interleaved, looped-bfs; zbv/dualpipev use 2); 0 = default */
    int iterations;   /* 0 = default (1 for flush schedules, 4 for pipedream and 2bw; pipelab
                       * simulate runs these with sched_async_iterations) */
    sched_recompute recompute;
} sched_gen_opts;

/* The size of what a generator would produce, computed with the generator's own checks and
 * defaults but without generating: ranks, stages, microbatches x iterations, and an upper bound
 * of its compute actions (2 per stage and microbatch, 3 for split-backward kinds). */
typedef struct sched_shape {
    int ranks, stages;
    int64_t microbatches;
    int64_t compute_actions;
} sched_shape;
/* Returns PL_OK and *out, or the error the generator would give (unknown kind, bad sizes); the
 * memory budget is left to the caller (sched_check_command_memory covers a whole run). */
int sched_gen_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e);

/* Memory budget of a whole `pipelab simulate` (or `pipelab schedule`) run, checked before the
 * schedule is generated: sh from sched_gen_shape (or the counts of a loaded schedule), bytes
 * per compute action measured on every generator (limits.c), against budget b (NULL: the
 * automatic one).
 * Returns PL_OK, or PL_EINPUT: "simulating 1f1b (4 ranks, 4 stages, 16000000 microbatches:
 * 128000000 compute actions) needs about 30.5 GiB (...), more than the 22.0 GiB available
 * (physical memory); ...". Arithmetic is overflow-checked. */
enum { SCHED_MEM_SIMULATE = 0, SCHED_MEM_TRACE = 1, SCHED_MEM_SCHEDULE = 2 };
int sched_check_command_memory(const char *kind, const sched_shape *sh, int mode, const sched_budget *b, pl_err *e);
/* The bytes sched_check_command_memory compares with the limit (UINT64_MAX when they overflow 64 bits). */
uint64_t sched_command_memory(const sched_shape *sh, int mode);

typedef struct sched_generator {
    const char *name;    /* "gpipe", "1f1b", ... */
    const char *summary; /* one line for --help */
    /* Builds the compute-only schedule within budget b (NULL: the automatic one); returns NULL
     * and fills e when the parameters cannot be served, saying why. */
    sched *(*gen)(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
} sched_generator;

/* The table of generators, terminated by {NULL}. */
extern const sched_generator sched_generators[];
/* Finds a generator by name; NULL when unknown. */
const sched_generator *sched_find_generator(const char *name);
/* Generates by name within budget b (NULL: the automatic one); unknown names give an error
 * listing the known ones. sched_generate is sched_generate_within the automatic budget. */
sched *sched_generate_within(const char *name, const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_generate(const char *name, const sched_gen_opts *o, pl_err *e);

/* The generators, each within budget b (NULL: the automatic one). */
sched *sched_gen_gpipe(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_gen_1f1b(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_gen_pipedream(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
/* 1f1b, pipedream or 2bw with replicas[stage] data-parallel replicas per stage ([ranks]; NULL =
 * all 1): PipeDream's per-replica warm-up (gen_basic.c); other kinds as sched_generate_within. */
sched *sched_gen_replicated(const char *name, const sched_gen_opts *o, const int *replicas, const sched_budget *b,
                            pl_err *e);
sched *sched_gen_2bw(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
/* A guess at the cycle of an asynchronous 1F1B's steady state (pipedream, 2bw), in iterations:
 * the ranks' alternation repeats every P microbatches, P = the lcm of the stages and of each
 * stage's replicas (replicas[stages], NULL = none; microbatch k runs on replica k mod n), and an
 * iteration's m microbatches meet it at the same phase again after lcm(P, m) microbatches, so
 * with equal stages the iterations' ends repeat every P / gcd(P, m) iterations (PipeDream, 8
 * stages, m = 2, 0.1 s transfers: 6.4, 6.4, 6.4, 6.2 s, then again). Unequal costs can make
 * the period another (the simulator finds the period in each run: sim_result.steady_cycle);
 * this sizes runs. 1 for counts below 1; at most SCHED_ASYNC_CYCLE_MAX. */
int sched_async_cycle(int stages, int microbatches, const int *replicas);
#define SCHED_ASYNC_CYCLE_MAX (1 << 20)
/* The gaps between iteration ends that must repeat with a period of `cycle` (>= 1) iterations
 * before a run's window takes it for the steady state's: two periods, and two comparisons at
 * least, so that two equal gaps in a row are not taken for a period of 1: max(2 cycle, cycle + 2). */
int sched_async_span(int cycle);
/* The iterations `pipelab simulate` runs pipedream and 2bw with when none are given: the fill's
 * iteration, the drain's ceil((W - 1) / m) (W: the workers, stages plus the replicas' extra;
 * the first stage's warm-up of W - 1 microbatches ends running backwards alone), and
 * sched_async_span of sched_async_cycle's cycle between them (so the window finds its period
 * twice; `pipelab simulate` runs longer when the costs give another period), at least 4,
 * while the iterations' microbatches stay within sched_async_room (else 4);
 * 4 for counts below 1. The generators' default stays 4 (`pipelab run` and `schedule`). */
int sched_async_iterations(int stages, int microbatches, const int *replicas);
#define SCHED_ASYNC_DEFAULT_MBS 4096
/* The most microbatches `pipelab simulate` runs an asynchronous schedule of `microbatches` an
 * iteration for without --iterations: max(5 m, SCHED_ASYNC_DEFAULT_MBS), 5 m the shortest default
 * (a fill, a drain and a period of 1's sched_async_span, so that a long pipeline of many
 * microbatches finds its period); sched_async_iterations, and the growth of cmd_simulate.c. */
int64_t sched_async_room(int microbatches);
sched *sched_gen_interleaved(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_gen_looped_bfs(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_gen_zb_h1(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_gen_zb_h2(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_gen_zbv(const sched_gen_opts *o, const sched_budget *b, pl_err *e);
sched *sched_gen_dualpipev(const sched_gen_opts *o, const sched_budget *b, pl_err *e);

/* ---------------------------------------------------------------- lowering, validation */

/* Returns a lowered copy of a compute-only schedule: SEND/RECV between stages on different
 * ranks in an order that cannot deadlock (the sender places the matching receive on the
 * receiver's list), REDUCE_GRAD after the last backward of each stage per weight version, and
 * STEP after it (per iteration for flush, per microbatch for stash, every m for 2bw). The
 * input's own REDUCE_GRADs (recent PyTorch writes them into compute_only orders) are dropped
 * for these, so each stage has exactly one per weight version whether or not it had any.
 * A schedule that is already lowered is copied. NULL and e on error (invalid or deadlocking,
 * or more memory than budget b allows; NULL: the automatic one). sched_lower is
 * sched_lower_within the automatic budget. */
sched *sched_lower_within(const sched *s, const sched_budget *b, pl_err *e);
sched *sched_lower(const sched *s, pl_err *e);

/* Where lowering puts REDUCE_GRAD and STEP: for each (stage, iteration) the index of the last
 * action completing a backward of the stage, for each (rank, iteration) the index of the rank's
 * last compute action of the iteration (-1: none). */
typedef struct sched_marks {
    int iterations;
    int64_t *last_bwd;  /* [stages x iterations] */
    int64_t *last_iter; /* [ranks x iterations] */
} sched_marks;
/* Finds the marks of compute-only schedule s into m (free with sched_marks_free). Returns PL_OK
 * or PL_ENOMEM. */
int sched_marks_find(const sched *s, sched_marks *m, pl_err *e);
void sched_marks_free(sched_marks *m);
/* The actions lowering puts right after compute action a, at index i of rank r of compute-only
 * schedule s (marks m): its sends, then its updates (REDUCE_GRAD, STEP). Writes them to out
 * when not NULL (room for 4 plus the stages of rank r); returns how many. Lowering and the
 * simulator's compute-only runs (transfers implied) both place them with it. */
size_t sched_lower_after(const sched *s, const sched_marks *m, int r, size_t i, const sched_action *a,
                         sched_action *out);

/* Checks a schedule (compute-only or lowered) and returns PL_OK or PL_EINPUT with a message
 * naming rank, position, action and reason: completeness (one F and one B or I+W per stage
 * and microbatch), order (F before I/B, I before W), placement (a stage lives on one rank),
 * send/receive pairing (lowered), optimizer steps, and deadlock freedom (via the dry run).
 * Optimizer steps, per stage in its rank's order, as lowering places them: a lowered schedule
 * has, for flush and 2bw weights, exactly one STEP per iteration, after every backward of the
 * iteration (B, W, an OVERLAP's B half), flush's before the stage's first forward of the next
 * iteration and 2bw's before its first backward of it; for stash, one STEP right after each
 * backward (before the next), naming its microbatch (flush and 2bw STEPs name none); where the
 * stage has REDUCE_GRADs, each STEP also comes after the REDUCE_GRAD of the gradients it applies.
 * Gradient reductions of a lowered schedule, per stage in its rank's order: each REDUCE_GRAD
 * comes after a backward of the stage that no earlier one reduced (none before the stage's
 * first backward, no second with no backward between); the stage's REDUCE_GRADs all name
 * microbatches or none, and one that names a microbatch names the backward it follows, each
 * backward having its own before the stage's next (as lowering places stash's: a replicated
 * stage runs REDUCE_GRAD k on the replica of microbatch k alone). Several REDUCE_GRADs per
 * weight version pass: a multi-iteration schedule read back from PyTorch CSV has one per
 * original iteration before its one STEP. A compute-only schedule has no STEP (lowering adds
 * them), and its REDUCE_GRADs are not checked (lowering replaces them). */
int sched_validate(const sched *s, pl_err *e);
/* sched_validate without the dry run: every check but deadlock freedom, for a caller that runs
 * the schedule next and calls sched_validate for the message when the run stalls (the
 * simulator on a compute-only schedule). Same messages. */
int sched_check_actions(const sched *s, pl_err *e);
/* Checks lowered schedule s against replicas[stages] (data-parallel replicas per stage; NULL:
 * none): a stage with two or more reduces its gradients at most once per update (no second
 * REDUCE_GRAD of the stage before its next STEP). The replicas' all-reduce sums the whole
 * gradient buffer, so a second one would sum again what the first already summed. sched_validate
 * lets such a schedule through (without replicas it is harmless, and a multi-iteration schedule
 * read back from a PyTorch CSV has that shape). Returns PL_OK or PL_EINPUT naming the action. */
int sched_check_replica_reduces(const sched *s, const int *replicas, pl_err *e);

/* Per-kind durations for the dry run, in steps (default 1 each; OVERLAP costs F + its B/I). */
typedef struct sched_unit_costs {
    int f, b, i, w;
} sched_unit_costs;

/* One executed action of the dry run. */
typedef struct sched_slot {
    int64_t start, end; /* steps */
} sched_slot;

/* Result of the unit-time dry run. */
typedef struct sched_dryrun_result {
    int64_t steps;          /* makespan in steps */
    int64_t *busy;          /* [ranks] steps spent computing */
    double bubble_fraction; /* 1 - sum(busy) / (ranks * steps) */
    int *max_inflight;      /* [ranks] most (stage, mb) stashes held at once: F done, B (or W) not yet;
                             * with several chunks per rank each chunk's stash counts */
    sched_slot **slot;      /* [ranks][n actions of that rank] start/end of each action */
} sched_dryrun_result;

/* Executes the schedule in unit time: each compute action takes its cost in steps, comm takes
 * none, a RECV waits for its SEND, a compute waits for its data. On deadlock returns PL_EINPUT
 * naming the waiting ranks and their actions. costs NULL = all ones. */
int sched_dryrun(const sched *s, const sched_unit_costs *costs, sched_dryrun_result *r, pl_err *e);
void sched_dryrun_free(sched_dryrun_result *r, int ranks);

/* Renders the unit-time timeline (one row per rank, one cell per step) into b; color adds ANSI
 * colours. Plus a statistics block: steps, bubble, microbatches in flight per rank. */
void sched_render_timeline(const sched *s, const sched_dryrun_result *r, int color, pl_buf *b);
void sched_render_stats(const sched *s, const sched_dryrun_result *r, pl_buf *b);

/* ---------------------------------------------------------------- files */

typedef enum sched_csv_flavour {
    SCHED_CSV_AUTO = 0,     /* detect on read: compute_comms when any SEND/RECV cell appears */
    SCHED_CSV_COMPUTE_ONLY,
    SCHED_CSV_COMPUTE_COMMS
} sched_csv_flavour;

/* Native .sched text (always the current letters). Reading errors are "path:line:col: what is wrong". */
int sched_write_text(const sched *s, pl_buf *out);
sched *sched_read_text(const char *path, const char *text, size_t len, pl_err *e);

/* PyTorch torch.distributed.pipelining CSV: one row per rank, one cell per action, empty cell =
 * idle slot (dropped on read: execution is dependency-driven). compute_only writes compute
 * actions only; compute_comms writes a lowered schedule with every action but STEP, which
 * PyTorch does not have (reading a lowered file without STEP puts back a flush schedule's). */
int sched_write_torch_csv(const sched *s, sched_csv_flavour fl, pl_buf *out, pl_err *e);
/* The same in the given letters (LEGACY for older PyTorch releases; an overlapped pair is then
 * PL_EINPUT, since those releases have no OVERLAP_F_B). */
int sched_write_torch_csv_letters(const sched *s, sched_csv_flavour fl, sched_letters letters, pl_buf *out, pl_err *e);
sched *sched_read_torch_csv(const char *path, const char *text, size_t len, sched_letters letters,
                            pl_err *e);
/* Appends to out what of s its PyTorch CSV cannot carry and its reading would change (several
 * iterations, weights other than flush, recomputation), as comma-separated phrases; returns how
 * many (0: none). */
int sched_csv_losses(const sched *s, pl_buf *out);

/* Returns 1 when sched_load reads path as a PyTorch CSV: its name ends in .csv (any case); else
 * 0 (.sched text). */
int sched_path_is_csv(const char *path);
/* Loads a file by extension (sched_path_is_csv: PyTorch CSV, anything else = .sched); NULL and e
 * on error. */
sched *sched_load(const char *path, sched_letters letters, pl_err *e);

#endif
