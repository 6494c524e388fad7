/* sched_int.h: internals of the schedules module shared between its files. */
#ifndef SCHED_INT_H
#define SCHED_INT_H

#include "pl_sched.h"

/* The dry run; record = 0 skips the per-action slots (used by lowering on large schedules). */
int sched_dryrun_core(const sched *s, const sched_unit_costs *costs, sched_dryrun_result *r,
                      int record, pl_err *e);

/* Formats "path:line: rank R, action K (text): " context for messages about an action. */
void sched_where(const sched *s, int rank, size_t pos, char *buf, size_t n);

#endif
