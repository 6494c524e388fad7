/* Fuzz target: hardware INI files. A file that parses and passes the check must write back to
 * INI text that parses to the same text again (a fixed point). */
#include "cost.h"
#include "fuzz_util.h"
#include "pl_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fz_cstr(data, size);
    pl_err e;
    cost_hw hw;
    cost_hw_init(&hw);
    int rc = cost_hw_parse(&hw, "fuzz.ini", text, &e);
    if (rc != PL_OK) {
        FZ_CHECK(e.msg[0], "a refusal without a message");
    } else if (cost_hw_check(&hw, &e) == PL_OK) {
        pl_buf a, b;
        pl_buf_init(&a);
        pl_buf_init(&b);
        FZ_CHECK(cost_hw_write(&hw, &a) == PL_OK && !a.failed, "write failed");
        cost_hw again;
        cost_hw_init(&again);
        FZ_CHECK(cost_hw_parse(&again, "again.ini", a.data, &e) == PL_OK, "written INI does not parse: %s", e.msg);
        FZ_CHECK(cost_hw_check(&again, &e) == PL_OK, "written INI fails the check: %s", e.msg);
        FZ_CHECK(cost_hw_write(&again, &b) == PL_OK, "second write failed");
        FZ_CHECK(fz_same(a.data, a.len, b.data, b.len), "write/parse is not a fixed point");
        pl_buf_free(&a);
        pl_buf_free(&b);
    }
    free(text);
    return 0;
}
