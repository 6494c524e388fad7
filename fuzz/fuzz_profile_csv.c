/* Fuzz target: the profile CSV (what `pipelab profile` writes, and users edit). A profile that
 * reads must write back to a CSV that reads to the same text, and its stage costs must be
 * finite. Its executor lines ("# pipelab-exec ...") that pass `pipelab run --profile`'s check
 * must read back: no pass-length or rounds line its reader calls malformed, and every term a
 * reader takes from them finite. */
#include <math.h>

#include "cost.h"
#include "exec.h"
#include "fuzz_util.h"
#include "pl_common.h"

/* The most ranks the executor lines are read for. */
#define FZ_RANKS 4

/* Checks the executor lines of text[len] as `pipelab run --profile` does, then reads them back
 * for 1 .. FZ_RANKS ranks. */
static void executor_lines(const char *text, size_t len) {
    pl_err e;
    int rc = exec_profile_lines_check("fuzz.csv", text, len, &e);
    if (rc != PL_OK) {
        FZ_CHECK(e.code == rc && e.msg[0], "a refusal of an executor line without a message");
        return;
    }
    static double a[FZ_RANKS * EXEC_STATE_ROUNDS], b[FZ_RANKS * EXEC_STATE_ROUNDS], g[FZ_RANKS * EXEC_WINDOWS];
    for (int ranks = 1; ranks <= FZ_RANKS; ranks++) {
        int bad = 0;
        FZ_CHECK(exec_profile_worker_windows(text, len, ranks, g, &bad) != -2,
                 "a checked pass-length line is malformed to its reader (line %d)", bad);
        int kept = exec_profile_worker_rounds(text, len, ranks, a, b, &bad);
        FZ_CHECK(kept != -2, "a checked rounds line is malformed to its reader (line %d)", bad);
        for (int k = 0; k < kept * ranks; k++)
            FZ_CHECK(isfinite(a[k]) && a[k] > 0 && isfinite(b[k]) && b[k] > 0, "a round's speed %g, %g", a[k], b[k]);
        if (exec_profile_worker_steps(text, len, ranks, a) == 0)
            for (int q = 0; q < ranks; q++) FZ_CHECK(isfinite(a[q]) && a[q] >= 0, "worker %d's STEP %g", q, a[q]);
        if (exec_profile_worker_reuse(text, len, ranks, a, b) == 0)
            for (int q = 0; q < ranks; q++)
                FZ_CHECK(isfinite(a[q]) && a[q] > 0 && isfinite(b[q]) && b[q] > 0, "worker %d's reuse ratios", q);
        if (exec_profile_worker_first(text, len, ranks, a, b) == 0)
            for (int k = 0; k < 3 * ranks; k++)
                FZ_CHECK(isfinite(a[k]) && a[k] > 0 && isfinite(b[k]) && b[k] > 0, "a first-touch ratio");
        if (exec_profile_worker_versions(text, len, ranks, a) > 0)
            for (int k = 0; k < 3 * ranks; k++) FZ_CHECK(isfinite(a[k]) && a[k] > 0, "a version ratio %g", a[k]);
        if (exec_profile_worker_share(text, len, ranks, a) == 0)
            for (int q = 0; q < ranks; q++) FZ_CHECK(isfinite(a[q]) && a[q] > 0, "worker %d's sharing ratio", q);
        if (exec_profile_worker_share_class(text, len, ranks, a) == 0)
            for (int k = 0; k < 3 * ranks; k++) FZ_CHECK(isfinite(a[k]) && a[k] > 0, "a sharing ratio per class %g", a[k]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    executor_lines((const char *)data, size);
    pl_err e;
    cost_model *m = cost_model_read_csv("fuzz.csv", (const char *)data, size, &e);
    if (!m) {
        FZ_CHECK(e.code != PL_OK && e.msg[0], "a refusal without a message");
        return 0;
    }
    pl_buf a, b;
    pl_buf_init(&a);
    pl_buf_init(&b);
    FZ_CHECK(cost_model_write_csv(m, &a, &e) == PL_OK, "write failed: %s", e.msg);
    cost_model *r = cost_model_read_csv("again.csv", a.data, a.len, &e);
    FZ_CHECK(r != NULL, "written profile does not read back: %s", e.msg);
    FZ_CHECK(cost_model_write_csv(r, &b, &e) == PL_OK, "second write failed: %s", e.msg);
    FZ_CHECK(fz_same(a.data, a.len, b.data, b.len), "write/read is not a fixed point");
    cost_hw hw;
    FZ_CHECK(cost_hw_load(&hw, "cpu", &e) == PL_OK, "preset: %s", e.msg);
    cost_opts o;
    cost_opts_init(&o, m);
    cost_stage st;
    if (cost_stage_eval(m, 0, m->n, &hw, &o, &st, &e) == PL_OK)
        FZ_CHECK(isfinite(st.f_s) && isfinite(st.b_s) && st.f_s >= 0 && st.b_s >= 0,
                 "stage time not finite and non-negative: F %g B %g", st.f_s, st.b_s);
    cost_model_free(r);
    cost_model_free(m);
    pl_buf_free(&a);
    pl_buf_free(&b);
    return 0;
}
