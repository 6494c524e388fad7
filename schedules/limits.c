/* limits.c: the memory budget of schedule work (generation, lowering, simulation): how much may
 * be allocated, and the shape of a generator's output computed without generating it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sched_int.h"

/* The limit set by sched_set_memory_limit (0 = automatic). */
static uint64_t forced_limit;

void sched_set_memory_limit(uint64_t bytes) { forced_limit = bytes; }

int sched_parse_bytes(const char *text, uint64_t *out) {
    if (!text || !*text) return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || errno == ERANGE || !isfinite(v) || v < 0) return -1;
    double mult = 1;
    while (*end == ' ') end++;
    if (*end) {
        static const char *const units[] = {"K", "M", "G", "T"};
        int k;
        for (k = 0; k < 4; k++)
            if (end[0] == units[k][0] || end[0] == (char)(units[k][0] + 32)) break;
        if (k == 4) return -1;
        mult = ldexp(1.0, 10 * (k + 1));
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'B' || *end == 'b') end++;
        if (*end) return -1;
    }
    v *= mult;
    if (!(v < 18446744073709551616.0)) return -1; /* 2^64 */
    *out = (uint64_t)v;
    return 0;
}

uint64_t sched_memory_limit(const char **source) {
    const char *src = "physical memory";
    if (forced_limit) {
        if (source) *source = "--max-memory";
        return forced_limit;
    }
    uint64_t env = 0;
    const char *ev = getenv("PIPELAB_MAX_MEMORY");
    if (ev && *ev && sched_parse_bytes(ev, &env) == 0 && env > 0) {
        if (source) *source = "PIPELAB_MAX_MEMORY";
        return env;
    }
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
    if (source) *source = src;
    return lim;
}

/* Formats bytes as "12.3 GiB" (or MiB / KiB / bytes) into buf. */
static void human(uint64_t bytes, char *buf, size_t n) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)bytes;
    int k = 0;
    while (v >= 1024 && k < 6) {
        v /= 1024;
        k++;
    }
    if (k == 0) snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
    else snprintf(buf, n, "%.1f %s", v, unit[k]);
}

int sched_memory_check(uint64_t bytes, const char *what, pl_err *e) {
    const char *ev = getenv("PIPELAB_MAX_MEMORY");
    uint64_t tmp;
    if (!forced_limit && ev && *ev && (sched_parse_bytes(ev, &tmp) != 0 || tmp == 0))
        return pl_errf(e, PL_EINPUT, "PIPELAB_MAX_MEMORY='%s' is not a size in bytes (e.g. 8e9 or 16GiB)", ev);
    const char *src = NULL;
    uint64_t lim = sched_memory_limit(&src);
    if (bytes != UINT64_MAX && bytes <= lim) return PL_OK; /* UINT64_MAX: the estimate overflowed */
    char need[32], have[32];
    human(bytes, need, sizeof need);
    human(lim, have, sizeof have);
    return pl_errf(e, PL_EINPUT,
                   "%s needs about %s (%llu bytes), more than the %s available (%s); use fewer "
                   "microbatches or ranks, or raise the limit with --max-memory or PIPELAB_MAX_MEMORY",
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
