/* exec_test.h: what the executor's test files share: the small model, the weight comparison,
 * whether MPI runs can be tested, and running a command line. */
#ifndef EXEC_TEST_H
#define EXEC_TEST_H

#include <stddef.h>

#include "exec.h"

/* The small model every `pipelab run` of the executor's CLI tests uses (milliseconds per pass). */
#define SMALL "--width 32 --depth 4 --microbatch-size 4 --warmup 1 --timed 2 --profile-reps 3"

/* Returns a small model configuration of the block kind `block` for the tests: L layers, 3
 * timed passes and no warm-up, oversubscribed, weights returned (test_exec.c's small_cfg). */
exec_config exec_test_small_cfg(int layers, exec_block_kind block);
/* Returns the largest |a - b| / (1 + |b|) over n floats (test_exec.c). */
double max_rel_diff(const float *a, const float *b, size_t n);
/* Returns 1 when the MPI cases can run: this build has MPI and its mpirun exists
 * (test_exec_run.c). */
int have_mpirun(void);
/* Runs a shell command line; returns its exit status and its output in *out (free it) when out
 * is not NULL, else frees it (test_exec_run.c). */
int sh(const char *cmd, char **out);

#ifdef PIPELAB_MPIEXEC
/* The environment and flags of a test mpirun (root-safe, oversubscribed, no leak checks in the
 * MPI processes: the MPI library keeps its allocations to exit). */
#define MPIENV "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 "
#define MPIRUN PIPELAB_MPIEXEC " -np 2 --oversubscribe"
#endif

#endif
