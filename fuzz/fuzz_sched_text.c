/* Fuzz target: the .sched reader. A schedule that reads must write back to text that reads to
 * the same text (a fixed point), and validation, the dry run and lowering must not crash. */
#include "fuzz_util.h"
#include "pl_common.h"
#include "pl_sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_err e;
    sched *s = sched_read_text("fuzz.sched", (const char *)data, size, &e);
    if (!s) {
        FZ_CHECK(e.code != PL_OK && e.msg[0], "a refusal without a message");
        return 0;
    }
    pl_buf a, b;
    pl_buf_init(&a);
    pl_buf_init(&b);
    FZ_CHECK(sched_write_text(s, &a) == PL_OK && !a.failed, "write failed");
    sched *t = sched_read_text("again.sched", a.data, a.len, &e);
    FZ_CHECK(t != NULL, "written text does not read back: %s", e.msg);
    FZ_CHECK(sched_write_text(t, &b) == PL_OK, "second write failed");
    FZ_CHECK(fz_same(a.data, a.len, b.data, b.len), "write/read is not a fixed point");
    if (sched_total_actions(s) <= 20000 && sched_validate(s, &e) == PL_OK) {
        sched *l = sched_lower(s, &e);
        FZ_CHECK(l != NULL, "a valid schedule failed to lower: %s", e.msg);
        FZ_CHECK(sched_validate(l, &e) == PL_OK, "a lowered schedule is invalid: %s", e.msg);
        sched_free(l);
    }
    sched_free(t);
    sched_free(s);
    pl_buf_free(&a);
    pl_buf_free(&b);
    return 0;
}
