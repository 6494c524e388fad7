/* test_sim_comm.c: the flag-driven simulator's link and all-reduce costs (sim_basic) agree with
 * the cost model's (cost_transfer_s, cost_allreduce_s) on the same links. */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

/* ---------------------------------------------------------------- the hand-off's holds */

/* The test's hand-off times: the sender's, and the receiver's post before and after its message
 * arrived (sim_costs.send_hold_s, post_hold_s). */
#define HOLD_SEND_S 0.1
#define HOLD_EARLY_S 0.02
#define HOLD_LATE_S 0.05

static double hold_send(void *ctx, int src, int dst, int64_t bytes) {
    (void)ctx, (void)src, (void)dst, (void)bytes;
    return HOLD_SEND_S;
}

static double hold_post(void *ctx, int src, int dst, int64_t bytes, int arrived) {
    (void)ctx, (void)src, (void)dst, (void)bytes;
    return arrived ? HOLD_LATE_S : HOLD_EARLY_S;
}

static double hold_none(void *ctx, int src, int dst, int64_t bytes) {
    (void)ctx, (void)src, (void)dst, (void)bytes;
    return 0;
}

static double hold_negative(void *ctx, int src, int dst, int64_t bytes, int arrived) {
    (void)ctx, (void)src, (void)dst, (void)bytes, (void)arrived;
    return -1e-6;
}

sched *sim_test_lowered(const char *kind, int p, int m, int v, int iters); /* test_sim.c */

/* Runs s on b's costs with the holds (holds 0: none; 1: the test's; 2: callbacks that return 0),
 * traced, under blocking comm when blocking. Returns PL_OK or the error. */
static int run_holds(const sched *s, sim_basic *b, int holds, int blocking, sim_result *r) {
    sim_costs c = sim_basic_costs(b);
    if (holds == 1) {
        c.send_hold_s = hold_send;
        c.post_hold_s = hold_post;
    } else if (holds == 2) {
        c.send_hold_s = hold_none;
    }
    sim_config cfg;
    sim_config_init(&cfg);
    cfg.record_trace = 1;
    cfg.blocking_comm = blocking;
    pl_err e;
    int rc = sim_run(s, &c, &cfg, r, &e);
    if (rc != PL_OK) fprintf(stderr, "sim_run: %s\n", e.msg);
    return rc;
}

/* Returns the index in rank q's list of action (kind, stage, mb), -1 none. */
static long find_action(const sched *s, int q, int kind, int stage, int mb) {
    for (size_t i = 0; i < s->rank[q].n; i++) {
        const sched_action *a = &s->rank[q].acts[i];
        if (a->kind == kind && a->stage == stage && a->mb == mb) return (long)i;
    }
    return -1;
}

/* The hand-off's own times hold the ranks (sim.h, sim_costs.send_hold_s and post_hold_s):
 * - GPipe's first rank runs its forwards back to back, each SEND holding it: its k-th F starts at
 *   k (tF + hold), exactly;
 * - every RECV, on several schedules and under blocking comm too, holds its rank from its post
 *   for the late time when its message had arrived by then (the matching SEND's end, the
 *   arrival) and for the early time else: its row ends at the later of that and the arrival,
 *   and the rank's next action starts after the hold;
 * - holds that are all 0 leave every time bit for bit as without them, and holds make no run
 *   shorter (GPipe's first rank posts its receives before their messages, a hold off the
 *   critical path); a negative one is refused. */
static void test_handoff_holds(void) {
    sched *g = sim_test_lowered("gpipe", 2, 4, 0, 0);
    if (!g) return;
    sim_basic b;
    sim_basic_init(&b);
    b.tf_s = 1;
    b.tb_s = 2;
    b.tcomm_s = 0.01;
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run_holds(g, &b, 1, 0, &r), PL_OK);
    int k = 0;
    for (size_t i = 0; i < g->rank[0].n; i++)
        if (g->rank[0].acts[i].kind == SCHED_F) {
            CU_ASSERT_DOUBLE_EQUAL(r.trace[0][i].start_s, k * (b.tf_s + HOLD_SEND_S), 1e-12);
            k++;
        }
    CU_ASSERT_EQUAL(k, 4);
    sim_result_free(&r);
    sched_free(g);
    static const struct { const char *kind; int p, m, v; } cases[] = {
        {"gpipe", 2, 4, 0}, {"1f1b", 4, 8, 0}, {"zb-h1", 3, 6, 0}, {"interleaved", 2, 4, 2}};
    int all_early = 0, all_late = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int blocking = 0; blocking <= 1; blocking++) {
            sched *s = sim_test_lowered(cases[c].kind, cases[c].p, cases[c].m, cases[c].v, 0);
            if (!s) continue;
            b.tcomm_s = 0.3; /* long enough that some posts come before their message, some after */
            sim_result r0, r1, r2;
            CU_ASSERT_EQUAL_FATAL(run_holds(s, &b, 0, blocking, &r0), PL_OK);
            CU_ASSERT_EQUAL_FATAL(run_holds(s, &b, 1, blocking, &r1), PL_OK);
            CU_ASSERT_EQUAL_FATAL(run_holds(s, &b, 2, blocking, &r2), PL_OK);
            int early = 0, late = 0, bad = 0, same = r0.makespan_s == r2.makespan_s;
            for (int q = 0; q < s->ranks; q++) {
                same &= memcmp(r0.trace[q], r2.trace[q], s->rank[q].n * sizeof(sim_slot)) == 0;
                for (size_t i = 0; i < s->rank[q].n; i++) {
                    const sched_action *a = &s->rank[q].acts[i];
                    if (a->kind != SCHED_RECV_F && a->kind != SCHED_RECV_B) continue;
                    int fwd = a->kind == SCHED_RECV_F, from = fwd ? a->stage - 1 : a->stage + 1;
                    long j = find_action(s, s->stage_rank[from], fwd ? SCHED_SEND_F : SCHED_SEND_B, from, a->mb);
                    const sim_slot *rv = &r1.trace[q][i];
                    if (j < 0) {
                        bad++;
                        continue;
                    }
                    double arr = r1.trace[s->stage_rank[from]][j].end_s; /* the SEND's row ends at the arrival */
                    int arrived = arr < rv->start_s;
                    /* an arrival at the very time of the post is the events' tie: either hold */
                    if (arr == rv->start_s) arrived = rv->end_s - rv->start_s > (HOLD_EARLY_S + HOLD_LATE_S) / 2;
                    double held = rv->start_s + (arrived ? HOLD_LATE_S : HOLD_EARLY_S);
                    early += !arrived;
                    late += arrived;
                    /* a RECV's row ends when its data is there (sim_run.c), after its hold */
                    bad += fabs(rv->end_s - fmax(held, arr)) > 1e-12;
                    bad += i + 1 < s->rank[q].n && r1.trace[q][i + 1].start_s < held - 1e-12;
                }
            }
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT(same);
            CU_ASSERT(r1.makespan_s >= r0.makespan_s);
            all_early += early;
            all_late += late;
            if (bad || !same) fprintf(stderr, "holds on %s (blocking %d): %d bad\n", cases[c].kind, blocking, bad);
            sim_result_free(&r0);
            sim_result_free(&r1);
            sim_result_free(&r2);
            sched_free(s);
        }
    CU_ASSERT(all_early > 0 && all_late > 0); /* both rules met */
    /* a negative hold is refused, naming the boundary */
    sched *s = sim_test_lowered("1f1b", 2, 2, 0, 0);
    if (s) {
        sim_costs c = sim_basic_costs(&b);
        c.post_hold_s = hold_negative;
        sim_config cfg;
        sim_config_init(&cfg);
        sim_result r;
        pl_err e;
        pl_err_clear(&e);
        CU_ASSERT_EQUAL(sim_run(s, &c, &cfg, &r, &e), PL_EINPUT);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "negative or undefined hand-off time at the boundary of stage 0"));
        sched_free(s);
    }
    sim_basic_free(&b);
}

/* Registers the suite (called from test_sim.c's pl_test_register). */
void sim_comm_tests_register(void) {
    static const pl_test_case cases[] = {
        {"all-reduce agrees with the cost model", test_allreduce_agrees},
        {"transfer agrees with the cost model", test_transfer_agrees},
        {"the hand-off's own times hold the sender and the receiver", test_handoff_holds},
        {NULL, NULL},
    };
    pl_test_suite("sim vs cost model: communication", cases);
}
