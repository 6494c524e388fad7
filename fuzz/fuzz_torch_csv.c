/* Fuzz target: the PyTorch pipelining CSV reader, in both letter conventions. A schedule that
 * reads and validates must survive a .sched round trip and lowering. */
#include "fuzz_util.h"
#include "pl_common.h"
#include "pl_sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    sched_letters letters = (data[0] & 1) ? SCHED_LETTERS_LEGACY : SCHED_LETTERS_CURRENT;
    pl_err e;
    sched *s = sched_read_torch_csv("fuzz.csv", (const char *)data + 1, size - 1, letters, &e);
    if (!s) {
        FZ_CHECK(e.code != PL_OK && e.msg[0], "a refusal without a message");
        return 0;
    }
    if (sched_total_actions(s) <= 20000 && sched_validate(s, &e) == PL_OK) {
        pl_buf a;
        pl_buf_init(&a);
        FZ_CHECK(sched_write_text(s, &a) == PL_OK, "write failed");
        sched *t = sched_read_text("again.sched", a.data, a.len, &e);
        FZ_CHECK(t != NULL, "a valid CSV schedule does not survive .sched: %s", e.msg);
        FZ_CHECK(sched_total_actions(t) == sched_total_actions(s), "actions lost in the round trip");
        sched *l = sched_lower(s, &e);
        FZ_CHECK(l != NULL, "a valid schedule failed to lower: %s", e.msg);
        pl_buf c;
        pl_buf_init(&c);
        FZ_CHECK(sched_write_torch_csv(l, SCHED_CSV_COMPUTE_COMMS, &c, &e) == PL_OK, "csv write failed: %s", e.msg);
        pl_buf_free(&c);
        sched_free(l);
        sched_free(t);
        pl_buf_free(&a);
    }
    sched_free(s);
    return 0;
}
