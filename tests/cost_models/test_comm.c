/* test_comm.c: the link and collective formulas of cost_comm.c pinned to their closed forms. */
#include <math.h>

#include "cost.h"
#include "pl_test.h"

/* A link of round numbers: 1 GB/s, 10 microseconds. */
#define BW_BPS 1e9
#define LAT_S 1e-5
/* Relative tolerance of a closed form computed in another order. */
#define REL_TOL 1e-12

/* Point-to-point: latency + bytes / bandwidth; 0 bytes still pays the latency. */
static void test_p2p(void) {
    CU_ASSERT_DOUBLE_EQUAL(cost_p2p_s(LAT_S, BW_BPS, 1e6), 1e-5 + 1e-3, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_p2p_s(LAT_S, BW_BPS, 0), LAT_S, 0);
    CU_ASSERT_DOUBLE_EQUAL(cost_p2p_s(0, 2 * BW_BPS, 1e6), 5e-4, 1e-18);
}

/* Ring: 2 (n-1)/n bytes/bw + 2 (n-1) latency for several n; n = 1 (and n <= 0) costs 0; the
 * reduce-scatter and the all-gather are each exactly half of it. */
static void test_ring(void) {
    static const int ns[] = {2, 3, 4, 8, 64};
    static const double sizes[] = {1.0, 8e6, 3.3e9};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            int n = ns[i];
            double b = sizes[k];
            double want = 2.0 * (n - 1) / n * b / BW_BPS + 2.0 * (n - 1) * LAT_S;
            double ar = cost_ring_allreduce_s(n, b, BW_BPS, LAT_S);
            CU_ASSERT_DOUBLE_EQUAL(ar, want, want * REL_TOL);
            CU_ASSERT_DOUBLE_EQUAL(cost_ring_reduce_scatter_s(n, b, BW_BPS, LAT_S), ar / 2, ar * REL_TOL);
            CU_ASSERT_DOUBLE_EQUAL(cost_ring_allgather_s(n, b, BW_BPS, LAT_S), ar / 2, ar * REL_TOL);
        }
    /* n = 4, 8 MB at 1 GB/s: 2 * 3/4 * 8 ms + 6 * 10 us = 12.06 ms */
    CU_ASSERT_DOUBLE_EQUAL(cost_ring_allreduce_s(4, 8e6, BW_BPS, LAT_S), 0.01206, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_ring_allreduce_s(1, 8e6, BW_BPS, LAT_S), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(cost_ring_allreduce_s(0, 8e6, BW_BPS, LAT_S), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(cost_ring_reduce_scatter_s(1, 8e6, BW_BPS, LAT_S), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(cost_ring_allgather_s(1, 8e6, BW_BPS, LAT_S), 0, 0);
}

/* PipeDream's 4 (n-1) bytes / (n bw), no latency; the planner's dispatcher picks each model. */
static void test_pipedream_and_planner(void) {
    /* n = 4, 8 MB at 1 GB/s: 4 * 3 * 8e6 / 4e9 = 24 ms */
    CU_ASSERT_DOUBLE_EQUAL(cost_pipedream_allreduce_s(4, 8e6, BW_BPS), 0.024, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_pipedream_allreduce_s(1, 8e6, BW_BPS), 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(cost_part_allreduce_s(COST_ALLREDUCE_PIPEDREAM, 8e6, 4, BW_BPS, LAT_S), 0.024, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_part_allreduce_s(COST_ALLREDUCE_RING, 8e6, 4, BW_BPS, LAT_S), 0.01206, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(cost_part_allreduce_s(COST_ALLREDUCE_RING, 8e6, 1, BW_BPS, LAT_S), 0, 0);
}

/* The hardware-level wrappers are the same formulas on hw's links (bytes 0 costs 0 there). */
static void test_hw_wrappers(void) {
    cost_hw hw;
    cost_hw_init(&hw);
    hw.devices_per_node = 4;
    hw.intra_bandwidth_Bps = BW_BPS;
    hw.intra_latency_s = LAT_S;
    hw.inter_bandwidth_Bps = BW_BPS / 10;
    hw.inter_latency_s = 10 * LAT_S;
    CU_ASSERT_EQUAL(cost_allreduce_s(&hw, 0, 4, 8000000), cost_ring_allreduce_s(4, 8e6, BW_BPS, LAT_S));
    CU_ASSERT_EQUAL(cost_allreduce_s(&hw, 1, 4, 8000000),
                    cost_ring_allreduce_s(4, 8e6, BW_BPS / 10, 10 * LAT_S));
    CU_ASSERT_EQUAL(cost_allreduce_s(&hw, 0, 4, 0), 0);
    CU_ASSERT_EQUAL(cost_transfer_s(&hw, 3, 4, 1000), cost_p2p_s(10 * LAT_S, BW_BPS / 10, 1000));
    CU_ASSERT_EQUAL(cost_transfer_s(&hw, 0, 3, 1000), cost_p2p_s(LAT_S, BW_BPS, 1000));
    CU_ASSERT_EQUAL(cost_link_s(&hw, 0, 0), 0);
}

/* cost_ring_allreduce_fit inverts cost_ring_allreduce_s: times the formula gives at three sizes
 * give back its latency and bandwidth, for rings of 2 and 5; a negative intercept is taken as 0
 * latency, and so are times that fall with the size (the least-squares line through the origin);
 * equal sizes and times that are not positive are refused. */
static void test_ring_fit(void) {
    static const int ns[] = {2, 5};
    static const double bytes[] = {2.1e6, 8.4e6, 1.68e7};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        double t[3], lat = -1, bw = -1;
        for (int i = 0; i < 3; i++) t[i] = cost_ring_allreduce_s(ns[k], bytes[i], 1.7e8, 4.2e-3);
        pl_err e = {0};
        CU_ASSERT_EQUAL(cost_ring_allreduce_fit(ns[k], bytes, t, 3, &lat, &bw, &e), PL_OK);
        CU_ASSERT(fabs(lat - 4.2e-3) <= 1e-12);
        CU_ASSERT(fabs(bw - 1.7e8) <= 1e-6 * 1.7e8);
    }
    double t0[2] = {1.0e-3, 3.0e-3}, two[2] = {1e6, 3e6}, lat, bw;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_ring_allreduce_fit(2, two, t0, 2, &lat, &bw, &e), PL_OK); /* through the origin */
    CU_ASSERT_DOUBLE_EQUAL(lat, 0, 1e-15);
    CU_ASSERT(fabs(cost_ring_allreduce_s(2, 1e6, bw, lat) - 1.0e-3) < 1e-4);
    double same[2] = {1e6, 1e6}, falling[2] = {3e-3, 1e-3}, zero[2] = {0, 0};
    CU_ASSERT_EQUAL(cost_ring_allreduce_fit(2, same, t0, 2, &lat, &bw, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(cost_ring_allreduce_fit(2, two, zero, 2, &lat, &bw, &e), PL_EINPUT);
    /* through the origin: slope sum(x t) / sum(x^2) = (3e3 + 3e3) / 1e13 = 6e-10 s per byte, so
     * the 1 MB point is predicted 0.6 ms (ring of 2: 2 (n - 1) / n = 1, beta = 1 / 6e-10) */
    CU_ASSERT_EQUAL(cost_ring_allreduce_fit(2, two, falling, 2, &lat, &bw, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(lat, 0, 1e-15);
    CU_ASSERT(fabs(cost_ring_allreduce_s(2, 1e6, bw, lat) - 0.6e-3) < 1e-12);
}

void test_comm_register(void) {
    static const pl_test_case cases[] = {
        {"point-to-point", test_p2p},
        {"ring all-reduce and its halves", test_ring},
        {"PipeDream all-reduce, planner models", test_pipedream_and_planner},
        {"hardware wrappers", test_hw_wrappers},
        {"ring all-reduce fit round trip", test_ring_fit},
        {NULL, NULL},
    };
    pl_test_suite("link and collective costs", cases);
}
