/* exec_rank.c: exec_run_rank: one rank's worker on the calling thread over any transport (the
 * entry of an MPI process, or of a test's threads), from the checks to its record. */
#include "exec_int.h"
#include "platform.h"

#include <stdlib.h>
#include <string.h>

int exec_run_rank(const sched *s, const exec_config *c, exec_transport *t, exec_rank_record *rec, pl_err *e) {
    memset(rec, 0, sizeof *rec);
    int r = t->rank(t);
    exec_layout lay;
    int rc = exec_layout_build(s, c->replicas, &lay, e);
    if (rc == PL_OK && t->size(t) != lay.ranks)
        rc = pl_errf(e, PL_EINPUT, "the transport has %d ranks, the schedule%s %d", t->size(t),
                     lay.ranks != s->ranks ? " with its replicas" : "", lay.ranks);
    int *blocks = pl_calloc((size_t)s->stages, sizeof *blocks);
    if (rc == PL_OK && !blocks) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc != PL_OK) {
        exec_layout_free(&lay);
        free(blocks);
        return rc;
    }
    rc = exec_check_run(s, c, blocks, e);
    if (rc == PL_OK) rc = exec_check_fault(lay.list, lay.ranks, c, e);
    if (rc == PL_OK) rc = exec_check_memory(s, c, blocks, lay.srank[r], e);
    exec_blas_init();
    if (rc == PL_OK && c->timed_passes_max > c->timed_passes && !t->allmax)
        rc = pl_errf(e, PL_EINPUT, "timing passes until the run is steady needs a transport that combines the ranks' pass "
                                   "times (MPI's)");
    int P = exec_passes_most(c), M = (int)sched_total_microbatches(s); /* a run timed until steady: its most */
    exec_data data;
    memset(&data, 0, sizeof data);
    exec_xrank x;
    memset(&x, 0, sizeof x);
    double *loss_mb = pl_calloc((size_t)P * (size_t)M, sizeof(double));
    if (rc == PL_OK && !loss_mb) rc = pl_errf(e, PL_ENOMEM, "out of memory");
    if (rc == PL_OK) rc = exec_data_build(c, exec_data_used(P, M), &data, e);
    if (rc == PL_OK) rc = exec_xrank_setup_in(&x, r, &lay, s, c, blocks, &data, loss_mb, e);
    if (rc == PL_OK && c->profile_between_reps > 0) rc = exec_xrank_prof_new(&x, c, lay.ranks, e);
    if (rc == PL_OK) {
        int cpus[EXEC_MAX_CORES];
        int n = exec_platform_cores(cpus, EXEC_MAX_CORES);
        if (c->pin && n > 0) x.core = cpus[r % n];
        x.t = t;
        exec_worker_main(&x);
        rc = x.rc;
        if (rc) *e = x.err;
    } else {
        pl_err why = *e;
        if (pl_err_rank(&why) < 0) { /* else it names its rank */
            pl_err_prefix(&why, "rank %d: ", r);
            pl_err_set_rank(&why, r);
        }
        t->abort(t, &why);
        if (t->finished) t->finished(t);
    }
    if (rc == PL_OK) rc = exec_xrank_record(&x, loss_mb, x.arena_bytes, rec, e);
    exec_xrank_free(&x);
    exec_layout_free(&lay);
    exec_data_free(&data);
    free(loss_mb);
    free(blocks);
    return rc;
}
