/* limits.c: the memory budget of schedule work (generation, lowering, simulation): how much may
 * be allocated, the shape of a generator's output computed without generating it, and the
 * estimate of a whole command (`pipelab simulate`, `pipelab schedule`) from that shape. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sched_int.h"

/* Letters of the binary units a size may end with, in order: K = 2^10, M = 2^20, G = 2^30,
 * T = 2^40 (either case, optionally followed by i and B). */
static const char size_units[] = "KMGT";
/* Bits between two binary units. */
#define UNIT_BITS 10

int sched_parse_bytes(const char *text, uint64_t *out) {
    if (!text || !*text) return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || errno == ERANGE || !isfinite(v) || v < 0) return -1;
    double mult = 1;
    while (*end == ' ') end++;
    if (*end) {
        const char *u = strchr(size_units, toupper((unsigned char)*end));
        if (!u) return -1;
        mult = ldexp(1.0, UNIT_BITS * (int)(u - size_units + 1));
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'B' || *end == 'b') end++;
        if (*end) return -1;
    }
    v *= mult;
    if (!(v < 0x1p64)) return -1; /* does not fit 64 bits */
    *out = (uint64_t)v;
    return 0;
}

void sched_budget_init(sched_budget *b, uint64_t flag_bytes, const char *env_value) {
    memset(b, 0, sizeof *b);
    uint64_t env = 0;
    if (flag_bytes > 0) {
        b->bytes = flag_bytes;
        b->source = "--max-memory";
    } else if (env_value && *env_value && sched_parse_bytes(env_value, &env) == 0 && env > 0) {
        b->bytes = env;
        b->source = SCHED_MAX_MEMORY_ENV;
    } else if (env_value && *env_value) {
        b->bad_env = env_value;
    }
}

/* Returns the automatic limit: the physical memory, or a smaller address-space or data-segment
 * limit; *source names which. */
static uint64_t automatic_limit(const char **source) {
    const char *src = "physical memory";
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t lim = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < lim) {
        lim = (uint64_t)rl.rlim_cur;
        src = "the address-space limit (ulimit -v)";
    }
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < lim) {
        lim = (uint64_t)rl.rlim_cur;
        src = "the data-segment limit (ulimit -d)";
    }
    *source = src;
    return lim;
}

uint64_t sched_memory_limit(const sched_budget *b, const char **source) {
    const char *src = NULL;
    uint64_t lim = b && b->bytes ? b->bytes : automatic_limit(&src);
    if (source) *source = b && b->bytes ? b->source : src;
    return lim;
}

int sched_memory_check(const sched_budget *b, uint64_t bytes, const char *what, pl_err *e) {
    if (b && b->bad_env)
        return pl_errf(e, PL_EINPUT, SCHED_MAX_MEMORY_ENV "='%s' is not a size in bytes (e.g. 8e9 or 16GiB)", b->bad_env);
    const char *src = NULL;
    uint64_t lim = sched_memory_limit(b, &src);
    if (bytes != UINT64_MAX && bytes <= lim) return PL_OK; /* UINT64_MAX: the estimate overflowed */
    char need[32], have[32];
    pl_human_bytes((double)bytes, need, sizeof need);
    pl_human_bytes((double)lim, have, sizeof have);
    return pl_errf(e, PL_EINPUT,
                   "%s needs about %s (%llu bytes), more than the %s available (%s); use fewer "
                   "microbatches or ranks, or raise the limit with --max-memory or " SCHED_MAX_MEMORY_ENV,
                   what, need, (unsigned long long)bytes, have, src);
}

int sched_gen_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e) {
    memset(out, 0, sizeof *out);
    if (!sched_find_generator(name)) {
        sched *none = sched_generate(name, o, e); /* the unknown-kind message, listing the kinds */
        sched_free(none);
        return e && e->code ? e->code : PL_EINPUT;
    }
    int rc = sched_basic_shape(name, o, out, e);
    if (rc == -1) rc = sched_zb_shape(name, o, out, e);
    if (rc == -1) return pl_errf(e, PL_EINTERNAL, "%s: no shape for this generator", name);
    return rc;
}

/* Bytes per compute action (2 per stage and microbatch, 3 with split backward) that `pipelab
 * simulate` needs at its peak: the compute-only schedule, its validation and lowering (about
 * three lowered actions per compute action), and the engine's tables. Measured on every
 * generator (tests/sim/test_limits.c keeps it an upper bound): at most 160 bytes, 1200 with the
 * trace (timeline slots, the printed table, the Chrome JSON, the stored op rows). */
#define SCHED_SIM_BYTES_PER_ACTION 256u
#define SCHED_TRACE_BYTES_PER_ACTION 1536u
/* The same for `pipelab schedule` (generation, validation, lowering, the dry run): at most 160. */
#define SCHED_LIST_BYTES_PER_ACTION 256u
/* What a run needs besides its actions: a fixed part, and a part per rank and per stage. */
#define SCHED_RUN_FIXED_BYTES ((uint64_t)16 << 20)
#define SCHED_RUN_BYTES_PER_RANK 1024u
#define SCHED_RUN_BYTES_PER_STAGE 256u

uint64_t sched_command_memory(const sched_shape *sh, int mode) {
    uint64_t per = mode == SCHED_MEM_TRACE ? SCHED_TRACE_BYTES_PER_ACTION
                   : mode == SCHED_MEM_SCHEDULE ? SCHED_LIST_BYTES_PER_ACTION : SCHED_SIM_BYTES_PER_ACTION;
    uint64_t bytes = 0;
    uint64_t fixed = SCHED_RUN_FIXED_BYTES + (uint64_t)(sh->ranks > 0 ? sh->ranks : 0) * SCHED_RUN_BYTES_PER_RANK +
                     (uint64_t)(sh->stages > 0 ? sh->stages : 0) * SCHED_RUN_BYTES_PER_STAGE;
    int over = sh->compute_actions < 0 ||
               __builtin_mul_overflow((uint64_t)sh->compute_actions, per, &bytes) ||
               __builtin_add_overflow(bytes, fixed, &bytes);
    return over ? UINT64_MAX : bytes;
}

int sched_check_command_memory(const char *kind, const sched_shape *sh, int mode, const sched_budget *b, pl_err *e) {
    uint64_t bytes = sched_command_memory(sh, mode);
    char what[192];
    snprintf(what, sizeof what, "%s%s (%d ranks, %d stages, %lld microbatches: %lld compute actions)",
             mode == SCHED_MEM_SCHEDULE ? "" : "simulating ", kind ? kind : "the schedule", sh->ranks, sh->stages,
             (long long)sh->microbatches, (long long)sh->compute_actions);
    return sched_memory_check(b, bytes, what, e);
}
