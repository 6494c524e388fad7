/* main.c: registers the results store's suites (one file per area). */
#include "pl_test.h"

void test_store_register(void);
void test_concurrency_register(void);
void test_merge_register(void);
void test_compare_plot_register(void);
void test_plot_register(void);
void test_faults_register(void);
void test_db_cli_register(void);
void test_shard_register(void);
void test_overlap_register(void);
void test_tail_register(void);
void test_distance_register(void);
void test_write_register(void);
void test_batch_register(void);

void pl_test_register(void) {
    test_store_register();
    test_concurrency_register();
    test_merge_register();
    test_compare_plot_register();
    test_plot_register();
    test_faults_register();
    test_db_cli_register();
    test_shard_register();
    test_overlap_register();
    test_tail_register();
    test_distance_register();
    test_write_register();
    test_batch_register();
}
