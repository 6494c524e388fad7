/* Fuzz target: the profile CSV (what `pipelab profile` writes, and users edit). A profile that
 * reads must write back to a CSV that reads to the same text, and its stage costs must be
 * finite. */
#include <math.h>

#include "cost.h"
#include "fuzz_util.h"
#include "pl_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
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
