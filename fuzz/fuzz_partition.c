/* Fuzz target: partition files ("pipelab-partition 1") and --partition lists ("0,4,8" or
 * "=4,4"). A file that parses must write back to text that parses to the same text. */
#include "cost.h"
#include "fuzz_util.h"
#include "pl_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *text = fz_cstr(data + 1, size - 1);
    pl_err e;
    if (data[0] & 1) {
        /* a --partition list against a model of 1..64 layers */
        int n = 1 + (data[0] >> 2);
        cost_partition *p = cost_partition_parse(text, n, &e);
        if (p) {
            FZ_CHECK(p->bound[0] == 0 && p->bound[p->stages] == n, "bounds do not cover the %d layers", n);
            for (int s = 0; s < p->stages; s++)
                FZ_CHECK(p->bound[s] < p->bound[s + 1] && p->replicas[s] >= 1, "stage %d is empty", s);
            cost_partition_free(p);
        } else {
            FZ_CHECK(e.msg[0], "a refusal without a message");
        }
    } else {
        cost_partition *plan = NULL;
        if (cost_partition_parse_text(text, "fuzz.part", &plan, &e) == PL_OK) {
            pl_buf a, b;
            pl_buf_init(&a);
            pl_buf_init(&b);
            cost_partition_write(plan, &a);
            FZ_CHECK(!a.failed, "write failed");
            cost_partition *again = NULL;
            FZ_CHECK(cost_partition_parse_text(a.data, "again.part", &again, &e) == PL_OK,
                     "written partition does not parse: %s", e.msg);
            cost_partition_write(again, &b);
            FZ_CHECK(fz_same(a.data, a.len, b.data, b.len), "write/parse is not a fixed point");
            cost_partition_free(again);
            cost_partition_free(plan);
            pl_buf_free(&a);
            pl_buf_free(&b);
        } else {
            FZ_CHECK(e.msg[0], "a refusal without a message");
        }
    }
    free(text);
    return 0;
}
