/* run_drive.h: the glue of `pipelab run` between the executor, the simulator and the results
 * store: the simulator's prediction for an executed configuration and the stored run pair.
 * Only cli/ includes it (DESIGN.md §2: the executor never includes simulator headers). */
#ifndef PL_RUN_DRIVE_H
#define PL_RUN_DRIVE_H

#include <stdint.h>

#include "cost.h"
#include "exec.h"
#include "exec_drive.h"
#include "pl_common.h"
#include "pl_sched.h"
#include "sim.h"

/* ---------------------------------------------------------------- predictions */

/* The simulator's prediction for running s with cfg, from a profile model m (per-block times
 * measured on this machine; see exec_profile_csv): the stage split of cfg (exec_stage_blocks),
 * free links (the in-process transport copies b h floats), the simulator's default
 * communication (a RECV posts, the compute that needs its data waits for it, as the CPU
 * executor's workers do; blocking mode for the CUDA backend and stash/2bw weights), gradients in
 * fp32, optimizer state 4 bytes per parameter with momentum, else 0, microbatch size cfg's. Fills r (free with
 * sim_result_free). Returns PL_OK or an error.
 * The STEP of a stage is its blocks times cfg->pred_step_s, or, when rank_step_s is not NULL,
 * times rank_step_s[r] of its rank r (each rank's own worker's measurement). */
int cli_run_predict(const sched *s, const exec_config *cfg, const cost_model *m, const double *rank_step_s, sim_result *r,
                    pl_err *e);

/* ---------------------------------------------------------------- results store */

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
} cli_run_store_info;

/* Appends the configuration JSON stored with both runs (model, optimizer, split, passes,
 * transport, profile source) to b. */
void cli_run_params_json(const exec_result *r, const cli_run_store_info *info, pl_buf *b);

/* Writes the measured run r (kind "measured", per-rank metrics, ops when info->with_ops) and,
 * when pred is not NULL, the simulator's prediction (kind "simulated", same tag, schedule,
 * counts, policies and params_json) to the store, each in one transaction; ids (may be NULL)
 * get the two run ids (0 for a missing prediction). Returns PL_OK or an error. */
/* Checks before a run that an existing database can take it (writable, not corrupt, not of a
 * newer schema), so that a bad --db is refused before the work, not after; a file that does not
 * exist yet is left to be created when the run is stored. Returns PL_OK or the store's error. */
int cli_run_check_db(const char *path, pl_err *e);
int cli_run_store(const sched *s, const exec_result *r, const sim_result *pred, const cli_run_store_info *info,
                  int64_t ids[2], pl_err *e);

#endif
