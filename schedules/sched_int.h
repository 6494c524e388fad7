/* sched_int.h: internals of the schedules module shared between its files. */
#ifndef SCHED_INT_H
#define SCHED_INT_H

#include "pl_sched.h"

/* The dry run; record = 0 skips the per-action slots (plain validation). */
int sched_dryrun_core(const sched *s, const sched_unit_costs *costs, sched_dryrun_result *r,
                      int record, pl_err *e);

/* sched_validate that also hands back its dry run (with the per-action slots) in *dr when dr is
 * not NULL, so that lowering runs it once; *dr is zeroed on error (free it with
 * sched_dryrun_free after PL_OK). Same checks and messages as sched_validate. */
int sched_validate_core(const sched *s, sched_dryrun_result *dr, pl_err *e);

/* Formats "path:line: rank R, action K (text): " context for messages about an action. */
void sched_where(const sched *s, int rank, size_t pos, char *buf, size_t n);

/* Shapes of the generators of gen_basic.c and gen_zb.c (the same checks and defaults as the
 * generators): PL_OK and *out, an error code, or -1 when name is not one of that file's. */
int sched_basic_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e);
int sched_zb_shape(const char *name, const sched_gen_opts *o, sched_shape *out, pl_err *e);

#endif
