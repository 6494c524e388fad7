/* test_sim_comm.c: the flag-driven simulator's link and all-reduce costs (sim_basic) agree with
 * the cost model's (cost_transfer_s, cost_allreduce_s) on the same links. */
#include "pl_test.h"
#include "sim.h"

/* Intra and inter links of round numbers, and ranks per node. */
#define INTRA_BPS 1e10
#define INTRA_LAT_S 2e-6
#define INTER_BPS 1.25e9
#define INTER_LAT_S 1e-5
#define PER_NODE 4

/* Fills b and hw with the same two-level links. */
static void same_links(sim_basic *b, cost_hw *hw) {
    sim_basic_init(b);
    b->bandwidth_Bps = INTRA_BPS;
    b->latency_s = INTRA_LAT_S;
    b->inter_bandwidth_Bps = INTER_BPS;
    b->inter_latency_s = INTER_LAT_S;
    b->ranks_per_node = PER_NODE;
    cost_hw_init(hw);
    hw->devices_per_node = PER_NODE;
    hw->intra_bandwidth_Bps = INTRA_BPS;
    hw->intra_latency_s = INTRA_LAT_S;
    hw->inter_bandwidth_Bps = INTER_BPS;
    hw->inter_latency_s = INTER_LAT_S;
}

/* The all-reduce of `simulate --replicas` equals cost_allreduce_s bit for bit, on the intra link
 * and with --allreduce-inter on the inter link, for a few (n, bytes), 0 bytes (a stage without
 * parameters: nothing to reduce, no latency) included. */
static void test_allreduce_agrees(void) {
    static const int ns[] = {1, 2, 3, 4, 8, 16};
    static const int64_t sizes[] = {0, 1, 4096, 25000000, 553000000};
    sim_basic b;
    cost_hw hw;
    same_links(&b, &hw);
    for (int inter = 0; inter <= 1; inter++) {
        b.allreduce_inter = inter;
        sim_costs c = sim_basic_costs(&b);
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
                CU_ASSERT_EQUAL(c.allreduce_s(c.ctx, 0, ns[i], sizes[k]),
                                cost_allreduce_s(&hw, inter, ns[i], sizes[k]));
    }
    sim_basic_free(&b);
}

/* A transfer of `simulate`'s bandwidth model equals cost_transfer_s between distinct ranks, within
 * a node and across nodes. */
static void test_transfer_agrees(void) {
    static const int pairs[][2] = {{0, 1}, {2, 3}, {3, 4}, {1, 6}, {7, 8}};
    sim_basic b;
    cost_hw hw;
    same_links(&b, &hw);
    sim_costs c = sim_basic_costs(&b);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        CU_ASSERT_EQUAL(c.transfer_s(c.ctx, pairs[i][0], pairs[i][1], 1 << 20),
                        cost_transfer_s(&hw, pairs[i][0], pairs[i][1], 1 << 20));
    sim_basic_free(&b);
}

/* Registers the suite (called from test_sim.c's pl_test_register). */
void sim_comm_tests_register(void) {
    static const pl_test_case cases[] = {
        {"all-reduce agrees with the cost model", test_allreduce_agrees},
        {"transfer agrees with the cost model", test_transfer_agrees},
        {NULL, NULL},
    };
    pl_test_suite("sim vs cost model: communication", cases);
}
