/* sched_int.h: internals of the schedules module shared between its files. */
#ifndef SCHED_INT_H
#define SCHED_INT_H

#include <stdarg.h>

#include "pl_sched.h"

/* The dry run; record = 0 skips the per-action slots (plain validation). */
int sched_dryrun_core(const sched *s, const sched_unit_costs *costs, sched_dryrun_result *r,
                      int record, pl_err *e);

/* sched_validate that also hands back its dry run (with the per-action slots) in *dr when dr is
 * not NULL, so that lowering runs it once; *dr is zeroed on error (free it with
 * sched_dryrun_free after PL_OK). Same checks and messages as sched_validate. */
int sched_validate_core(const sched *s, sched_dryrun_result *dr, pl_err *e);

/* Copies src's kind, iterations, chunks, placement rule, weights and recomputation policies to
 * dst (a copy's or a lowering's output, made by sched_new with src's shape). */
void sched_copy_policies(sched *dst, const sched *src);

/* Formats "path:line: rank R, action K (text): " context for messages about an action. */
void sched_where(const sched *s, int rank, size_t pos, char *buf, size_t n);

/* The file readers' messages (io_msg.c). Fills e with "path:line:col: message" (the message
 * from fmt and ap) and returns PL_EINPUT. */
int sched_fail_atv(pl_err *e, const char *path, int line, int col, const char *fmt, va_list ap);
/* Longest piece of user text quoted back in a message; a quote buffer holds it and "...". */
#define SCHED_QUOTE_MAX 48
#define SCHED_QUOTE_BUF (SCHED_QUOTE_MAX + sizeof "...")
/* Copies p[0..n) into buf (SCHED_QUOTE_BUF bytes) for quoting, shortened with "..." when
 * longer than SCHED_QUOTE_MAX; returns buf. */
const char *sched_quote(const char *p, size_t n, char *buf);

/* Shapes of the generators of gen_basic.c and gen_zb.c (the same checks and defaults as the
 * generators): PL_OK and *out, an error code, or -1 when name is not one of that file's. */
int sched_basic_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e);
int sched_zb_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e);

/* Checked, defaulted parameters of one generator call. */
typedef struct sched_gen_params {
    int p;     /* ranks */
    int m;     /* microbatches per iteration */
    int v;     /* stages per rank (chunks) */
    int iters; /* iterations */
} sched_gen_params;

/* The option checks both generator families make (gen_check.c), in this order around their
 * own chunk and stage rules; each returns PL_OK or PL_EINPUT with a message naming the flag.
 * Counts: options given, --ranks in [1, SCHED_MAX_RANKS], --microbatches >= 1. */
int sched_gen_check_counts(const char *name, const sched_gen_opts *o, pl_err *e);
/* Policies: --iterations >= 0 (0 = the default), a known recomputation policy. */
int sched_gen_check_policies(const char *name, const sched_gen_opts *o, pl_err *e);
/* Microbatches of all iterations (g->m x g->iters) within SCHED_MAX_MICROBATCHES. */
int sched_gen_check_microbatches(const char *name, const sched_gen_params *g, pl_err *e);
/* Returns the compute actions of g with per_cell of them per (stage, microbatch): 2 (F, B) or
 * 3 (F, I, W). Fits 64 bits: the factors are bounded by 2^20 stages and 2^24 microbatches. */
int64_t sched_gen_actions(const sched_gen_params *g, int per_cell);
/* Those actions within SCHED_MAX_ACTIONS. */
int sched_gen_check_actions(const char *name, const sched_gen_params *g, int per_cell, pl_err *e);
/* The memory the generator's lists take (sched_gen_bytes) within budget b. */
int sched_gen_check_memory(const char *name, const sched_budget *b, const sched_gen_params *g, int per_cell,
                           pl_err *e);
/* Makes room in every rank of s for its share of the actions of g (per_cell per stage and
 * microbatch), so that a generator's appends do not regrow the lists (pages not written stay
 * unmapped). Returns PL_OK or PL_ENOMEM. */
int sched_gen_reserve(sched *s, const sched_gen_params *g, int per_cell);
/* Fills out with the shape of g (sched_gen_shape). */
void sched_gen_shape_of(const sched_gen_params *g, int per_cell, sched_shape *out);

#endif
