/* main.c: registers the cost_models suites (models, hardware, costs, link and collective costs,
 * cost-model input on the command line, the rules every input follows; partitioners and
 * calibration are registered by test_partition_register in their own file). */
#include "pl_test.h"

void test_models_register(void);
void test_hw_register(void);
void test_costs_register(void);
void test_comm_register(void);
void test_gpu_register(void);
void test_cli_inputs_register(void);
void test_input_rules_register(void);
void test_partition_register(void);

/* Stand-in until the partition suite defines the real one. */
__attribute__((weak)) void test_partition_register(void) {}

void pl_test_register(void) {
    test_models_register();
    test_hw_register();
    test_costs_register();
    test_comm_register();
    test_gpu_register();
    test_cli_inputs_register();
    test_input_rules_register();
    test_partition_register();
}
