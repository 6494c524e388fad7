/* Fuzz target: command-line overrides (--set KEY=VALUE), one per input line, applied over a
 * preset chosen by the first byte. After every accepted override that passes the check, the
 * hardware must write to INI text that parses back to the same text. */
#include "fuzz_hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *const *names = cost_hw_preset_names();
    int npresets = 0;
    while (names[npresets]) npresets++;
    pl_err e;
    cost_hw hw;
    FZ_CHECK(cost_hw_load(&hw, names[data[0] % npresets], &e) == PL_OK, "preset: %s", e.msg);
    char *text = fz_cstr(data + 1, size - 1);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cost_hw before = hw;
        if (cost_hw_set_kv(&hw, line, &e) != PL_OK) {
            FZ_CHECK(e.msg[0], "a refusal without a message");
            continue;
        }
        if (cost_hw_check(&hw, &e) != PL_OK) {
            FZ_CHECK(e.msg[0], "a failed check without a message");
            hw = before;
            continue;
        }
        fz_hw_roundtrip(&hw);
    }
    free(text);
    return 0;
}
