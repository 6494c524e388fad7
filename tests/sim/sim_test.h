/* sim_test.h: helpers the sim suites share (defined in test_sim.c). */
#ifndef PL_SIM_TEST_H
#define PL_SIM_TEST_H

#include "pl_sched.h"
#include "sim.h"

/* Returns the lowered schedule of a generator: p ranks, m microbatches, v chunks (0: the
 * generator's), iters iterations (0: its default); NULL on failure, reported through CUnit. */
sched *sim_test_lowered(const char *kind, int p, int m, int v, int iters);
/* Runs s on an initialized sim_model, its costs under the config sim_model_config gives;
 * returns sim_run's code. */
int sim_test_run_model(const sched *s, sim_model *sm, sim_result *r, pl_err *e);

#endif
