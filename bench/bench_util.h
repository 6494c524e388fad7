/* bench_util.h: what the executor benchmarks (bench_exec, bench_cuda) share: the schedules they
 * run and the ideal pass time they compare a measured pass with. Messages start with prog. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include "exec.h"
#include "pl_sched.h"

/* Returns the lowered schedule kind for p ranks and m microbatches, no recomputation (NULL on
 * error, printed). */
sched *bench_lowered(const char *prog, const char *kind, int p, int m);

/* Returns the ideal time of timed pass `pass` of r's schedule s: the simulator with each stage's
 * mean measured F/B/I/W durations in that pass, its mean STEP, free communication (-1 when the
 * simulator fails, printed). */
double bench_ideal_pass_s(const char *prog, const sched *s, const exec_result *r, int pass);

#endif
