/* Fuzz target: hardware INI files. A file that parses and passes the check must write back to
 * INI text that parses to the same text again (a fixed point). */
#include "fuzz_hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fz_cstr(data, size);
    pl_err e;
    cost_hw hw;
    cost_hw_init(&hw);
    int rc = cost_hw_parse(&hw, "fuzz.ini", text, &e);
    if (rc != PL_OK) {
        FZ_CHECK(e.msg[0], "a refusal without a message");
    } else if (cost_hw_check(&hw, &e) == PL_OK) {
        fz_hw_roundtrip(&hw);
    }
    free(text);
    return 0;
}
