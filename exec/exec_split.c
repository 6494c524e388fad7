/* exec_split.c: the stage split: which contiguous blocks of the model each stage holds. */
#include "exec_int.h"

int exec_stage_blocks(const sched *s, const exec_config *cfg, int *blocks, pl_err *e) {
    int L = cfg->layers, n = s->stages;
    if (cfg->stage_blocks) {
        int sum = 0;
        for (int q = 0; q < n; q++) {
            if (cfg->stage_blocks[q] < 1) return pl_errf(e, PL_EINPUT, "stage %d has %d blocks in --stage-blocks; every stage needs at least one", q, cfg->stage_blocks[q]);
            blocks[q] = cfg->stage_blocks[q];
            sum += blocks[q];
        }
        if (sum != L) return pl_errf(e, PL_EINPUT, "the stage split (--stage-blocks) has %d blocks, the model (--depth) %d", sum, L);
        return PL_OK;
    }
    if (L < n)
        return pl_errf(e, PL_EINPUT, "%d blocks cannot fill %d stages: give the model %d blocks or more (--depth, or "
                       "depth= or layers= in --model; one block per stage at least)", L, n, n);
    for (int q = 0; q < n; q++) blocks[q] = L / n + (q < L % n ? 1 : 0);
    return PL_OK;
}
