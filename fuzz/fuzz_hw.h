/* fuzz_hw.h: the hardware round trip shared by the hw_ini and set_kv targets. */
#ifndef PL_FUZZ_HW_H
#define PL_FUZZ_HW_H

#include "cost.h"
#include "fuzz_util.h"
#include "pl_common.h"

/* A checked hardware description must write to INI text that parses, passes the check, and
 * writes back to the same text (a fixed point). Aborts otherwise. */
static inline void fz_hw_roundtrip(const cost_hw *hw) {
    pl_err e;
    pl_buf a, b;
    pl_buf_init(&a);
    pl_buf_init(&b);
    FZ_CHECK(cost_hw_write(hw, &a) == PL_OK && !a.failed, "write failed");
    cost_hw again;
    cost_hw_init(&again);
    FZ_CHECK(cost_hw_parse(&again, "again.ini", a.data, &e) == PL_OK, "written INI does not parse: %s", e.msg);
    FZ_CHECK(cost_hw_check(&again, &e) == PL_OK, "written INI fails the check: %s", e.msg);
    FZ_CHECK(cost_hw_write(&again, &b) == PL_OK, "second write failed");
    FZ_CHECK(fz_same(a.data, a.len, b.data, b.len), "write/parse is not a fixed point");
    pl_buf_free(&a);
    pl_buf_free(&b);
}

#endif
