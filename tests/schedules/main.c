/* main.c: registers the schedules module's suites (one file per area). */
#include "pl_test.h"

void test_core_register(void);
void test_gen_register(void);
void test_zb_register(void);
void test_lower_register(void);
void test_io_register(void);
void test_limits_register(void);
void test_validate_register(void);

void pl_test_register(void) {
    test_core_register();
    test_gen_register();
    test_zb_register();
    test_lower_register();
    test_io_register();
    test_limits_register();
    test_validate_register();
}
