/* test_sim.c: the simulator against closed forms (GPipe, 1F1B, interleaved, Zero Bubble),
 * hand-computed communication, memory, determinism, stochastic mode and CLI errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "pl_test.h"
#include "pl_sched.h"
#include "sim.h"
#include "sim_test.h"

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-9 * (1.0 + fabs((double)(b))))

/* Returns the lowered schedule of a generator (NULL on failure, reported through CUnit). */
static sched *lowered(const char *kind, int p, int m, int v, int iters) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, v, iters, SCHED_RECOMPUTE_NONE};
    sched *s = sched_generate(kind, &o, &e);
    if (!s) {
        fprintf(stderr, "generate %s: %s\n", kind, e.msg);
        CU_FAIL("generate");
        return NULL;
    }
    sched *l = sched_lower(s, &e);
    sched_free(s);
    if (!l) fprintf(stderr, "lower %s: %s\n", kind, e.msg);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

sched *sim_test_lowered(const char *kind, int p, int m, int v, int iters) { return lowered(kind, p, m, v, iters); }

int sim_test_run_model(const sched *s, sim_model *sm, sim_result *r, pl_err *e) {
    sim_costs c = sim_model_costs(sm);
    sim_config cfg;
    sim_config_init(&cfg);
    sim_model_config(sm, &cfg);
    return sim_run(s, &c, &cfg, r, e);
}

/* Runs s with the flag costs b and config c (NULL = defaults); returns PL_OK or the error. */
static int run(const sched *s, sim_basic *b, const sim_config *c, sim_result *r) {
    sim_config def;
    sim_config_init(&def);
    sim_costs costs = sim_basic_costs(b);
    pl_err e;
    pl_err_clear(&e);
    int rc = sim_run(s, &costs, c ? c : &def, r, &e);
    if (rc != PL_OK) fprintf(stderr, "sim_run: %s\n", e.msg);
    return rc;
}

/* Runs s (p stages) with stage q's costs sc[q], transfers of tcomm seconds and replicas rep
 * (NULL: none) into *r, and frees s. Returns PL_OK or the error. */
static int run_on_stages(sched *s, int p, sim_stage_cost *sc, double tcomm, const int *rep, sim_result *r) {
    sim_basic b;
    sim_basic_init(&b);
    b.stage = sc;
    b.stages = p;
    b.tcomm_s = tcomm;
    sim_config c;
    sim_config_init(&c);
    c.replicas = rep;
    int rc = run(s, &b, &c, r);
    sched_free(s);
    return rc;
}

/* Runs `kind` lowered on p ranks, m microbatches, n iterations, with stage q's costs sc[q] and
 * transfers of tcomm seconds, into *r. Returns PL_OK or the error (the schedule's too). */
static int run_staged(const char *kind, int p, int m, int n, sim_stage_cost *sc, double tcomm, sim_result *r) {
    sched *s = lowered(kind, p, m, 0, n);
    return s ? run_on_stages(s, p, sc, tcomm, NULL, r) : PL_EINPUT;
}

/* GPipe and 1F1B: (m + p - 1)(tF + tB) and bubble (p-1)/(m+p-1), several shapes. */
static void test_gpipe_1f1b_closed_form(void) {
    const char *kinds[] = {"gpipe", "1f1b"};
    int shapes[][2] = {{4, 8}, {3, 5}, {8, 8}, {2, 1}};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            int p = shapes[i][0], m = shapes[i][1];
            sched *s = lowered(kinds[k], p, m, 0, 0);
            if (!s) continue;
            sim_basic b;
            sim_basic_init(&b);
            b.tf_s = 1.5;
            b.tb_s = 3.25;
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
            NEAR(r.makespan_s, (m + p - 1) * (1.5 + 3.25));
            NEAR(r.iteration_time_s, (m + p - 1) * (1.5 + 3.25));
            NEAR(r.bubble_fraction, (double)(p - 1) / (m + p - 1));
            for (int q = 0; q < p; q++) NEAR(r.rank[q].bubble_fraction, (double)(p - 1) / (m + p - 1));
            NEAR(r.throughput, m / r.iteration_time_s);
            CU_ASSERT_EQUAL(r.comm_s, 0);
            sim_result_free(&r);
            sim_basic_free(&b);
            sched_free(s);
        }
}

/* Interleaved 1F1B: bubble / ideal compute = (p - 1) / (v m) (Megatron). */
static void test_interleaved_megatron(void) {
    int cases[][3] = {{4, 8, 2}, {4, 16, 4}, {2, 4, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int p = cases[i][0], m = cases[i][1], v = cases[i][2];
        sched *s = lowered("interleaved", p, m, v, 0);
        if (!s) continue;
        sim_basic b;
        sim_basic_init(&b);
        b.tf_s = 1;
        b.tb_s = 2;
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
        /* Megatron's bubble-to-compute ratio x = (p-1)/(v m); as a share of the span: x/(1+x) */
        double x = (double)(p - 1) / (v * m);
        NEAR(r.zb_bubble_rate, x / (1 + x));
        NEAR(r.makespan_s, (double)m * v * 3 + (p - 1) * 3);
        sim_result_free(&r);
        sched_free(s);
    }
}

/* Zero Bubble paper (Qi et al., Table 2; its TB is the INPUT backward, our I): 1F1B's bubble
 * is (p-1)(TF+TB+TW), ZB-H1's (p-1)(TF+TB-TW), ZB-H2's (p-1)(TF+TB-2TW), under the paper's
 * conditions (TW <= TF, TW <= TB). The bubble is the largest (span - compute) of a rank, span
 * = first start to last end; for 1F1B and ZB-H1 rank 0 starts at 0, so also the makespan's. */
static void test_zero_bubble_sizes(void) {
    int p = 4, m = 12;
    double times[][3] = {{1, 1, 1}, {2, 2, 1}, {3, 2, 1}, {1, 1, 0.5}};
    for (size_t t = 0; t < sizeof times / sizeof times[0]; t++) {
        double tf = times[t][0], ti = times[t][1], tw = times[t][2], ideal = m * (tf + ti + tw);
        struct { const char *kind; double bubble; } cases[] = {
            {"1f1b", (p - 1) * (tf + ti + tw)},
            {"zb-h1", (p - 1) * (tf + ti - tw)},
            {"zb-h2", (p - 1) * (tf + ti - 2 * tw)},
        };
        for (size_t i = 0; i < 3; i++) {
            sched *s = lowered(cases[i].kind, p, m, 0, 0);
            if (!s) continue;
            sim_basic b;
            sim_basic_init(&b);
            b.tf_s = tf;
            b.ti_s = ti;
            b.tw_s = tw;
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
            double worst = 0;
            for (int q = 0; q < p; q++)
                if (r.rank[q].span_s - r.rank[q].busy_s > worst) worst = r.rank[q].span_s - r.rank[q].busy_s;
            NEAR(worst, cases[i].bubble);
            NEAR(r.zb_bubble_rate, cases[i].bubble / (ideal + cases[i].bubble));
            if (i < 2) NEAR(r.makespan_s, ideal + cases[i].bubble);
            sim_result_free(&r);
            sched_free(s);
        }
    }
}

/* Communication: p = 2, m = 1, 1F1B. Forward F0 | transfer | F1 B1 | transfer | B0, so the
 * makespan is 2 tF + 2 tB + 2 (latency + bytes / bandwidth); with a fixed tcomm, + 2 tcomm.
 * Inter-node links apply when ranks_per_node = 1. */
static void test_comm_hand_computed(void) {
    sched *s = lowered("1f1b", 2, 1, 0, 0);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    b.tf_s = 1;
    b.tb_s = 2;
    b.bytes = 1000;
    b.bandwidth_Bps = 4000;
    b.latency_s = 0.1;
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
    NEAR(r.makespan_s, 6 + 2 * (0.1 + 0.25));
    NEAR(r.comm_s, 2 * 0.35);
    sim_result_free(&r);
    b.ranks_per_node = 1;
    b.inter_bandwidth_Bps = 1000;
    b.inter_latency_s = 0.5;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
    NEAR(r.makespan_s, 6 + 2 * (0.5 + 1.0));
    sim_result_free(&r);
    b.tcomm_s = 0.125;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
    NEAR(r.makespan_s, 6 + 2 * 0.125);
    sim_result_free(&r);
    sched_free(s);
}

/* Overlap vs blocking: 1F1B p = 2, m = 4 with comm; blocking comm can only be slower, and the
 * sender's compute stream is held: rank 0 busy time stays, its idle grows. A FIFO link
 * serializes: with gpipe the forward sends of rank 0 queue behind each other when tcomm > tF.
 * Asynchronous sends under blocking receives (the CUDA backend's streams), 0.5 s a transfer: the
 * sender's compute runs on while its copies go, so only the two hand-offs of the critical path
 * (rank 0's F3 to rank 1, rank 1's B0 back) add to (m + p - 1)(tF + tB): 11. Blocking sends hold
 * each sender for its copies: rank 0's forwards end at 1, 2.5, 4, 5.5, rank 1's at 2.5, 4, 5.5,
 * 7, its backwards at 8, 9.5, 11, 12.5, rank 0's last at 14. With the transfers free, 10. */
static void test_blocking_and_fifo(void) {
    sched *s = lowered("gpipe", 2, 4, 0, 0);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    b.tf_s = 1;
    b.tb_s = 1;
    b.tcomm_s = 3;
    sim_config c;
    sim_config_init(&c);
    sim_result r1, r2;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r1), PL_OK);
    /* sends of F0..F3 leave at 1,2,3,4 but the link is FIFO: arrivals 4, 7, 10, 13; rank 1's
     * last forward ends at 14, its backwards B0..B3 at 15..18; their gradients queue on the
     * link again: arrivals 18, 21, 24, 27, so rank 0's B3 ends at 28 */
    NEAR(r1.makespan_s, 28);
    c.blocking_comm = 1;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r2), PL_OK);
    CU_ASSERT(r2.makespan_s > r1.makespan_s);
    NEAR(r2.rank[0].busy_s, r1.rank[0].busy_s);
    sim_result_free(&r1);
    sim_result_free(&r2);
    /* asynchronous sends, blocking receives */
    b.tcomm_s = 0.5;
    sim_config_executor(&c, s, 1);
    CU_ASSERT(c.blocking_comm == 1 && c.async_send == 1);
    c.whole_run = 0;
    const double tcomm[3] = {0.5, 0.5, 0}, want[3] = {5 * 2.0 + 2 * 0.5, 14, 10};
    const int async[3] = {1, 0, 1};
    for (int k = 0; k < 3; k++) {
        b.tcomm_s = tcomm[k];
        c.async_send = async[k];
        CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r1), PL_OK);
        NEAR(r1.makespan_s, want[k]);
        if (k == 0) NEAR(r1.rank[0].busy_s, 8.0);
        sim_result_free(&r1);
    }
    sim_config_executor(&c, s, 0); /* the CPU executor's flush schedules: neither */
    CU_ASSERT(c.blocking_comm == 0 && c.async_send == 0);
    sched_free(s);
}

/* Shared inter-node links: interleaved p = 4, v = 2 on two nodes of two ranks; the forward
 * 1 -> 2 and the gradient 0 -> 3 both cross node 0 -> node 1, so sharing one link per node
 * pair can only delay; with heavy transfers it does. Unshared, it equals the per-pair run. */
static void test_shared_inter_link(void) {
    sched *s = lowered("interleaved", 4, 8, 2, 0);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    b.tf_s = 1;
    b.tb_s = 2;
    b.bytes = 2000; /* 2 s per inter-node transfer, intra-node free */
    b.ranks_per_node = 2;
    b.inter_bandwidth_Bps = 1000;
    sim_config c;
    sim_config_init(&c);
    c.ranks_per_node = 2;
    sim_result r1, r2;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r1), PL_OK);
    c.shared_inter_link = 1;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r2), PL_OK);
    CU_ASSERT(r2.makespan_s > r1.makespan_s);
    NEAR(r1.makespan_s, 71); /* regression values of this engine (not a closed form) */
    NEAR(r2.makespan_s, 74);
    NEAR(r2.comm_s, r1.comm_s); /* same transfers, only queued differently */
    sim_result_free(&r1);
    sim_result_free(&r2);
    sched_free(s);
}

/* Several flush iterations: the iteration time stays (m + p - 1)(tF + tB). */
static void test_iterations(void) {
    sched *s = lowered("1f1b", 4, 6, 0, 3);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
    CU_ASSERT_EQUAL(r.iterations, 3);
    NEAR(r.iteration_time_s, 9 * 3.0);
    NEAR(r.makespan_s, 3 * 9 * 3.0);
    sim_result_free(&r);
    sched_free(s);
}

/* Synchronous schedules keep measuring their bubble over the whole run, iterations included:
 * with flushes the N iterations of 1F1B run back to back, so the fraction stays (p-1)/(m+p-1)
 * and idle is N (p-1)(tF+tB) per rank. */
static void test_sync_window_whole_run(void) {
    int p = 4, m = 6, n = 3;
    sched *s = lowered("1f1b", p, m, 0, n);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
    CU_ASSERT_EQUAL(r.steady_state, 0);
    NEAR(r.window_s, r.makespan_s);
    NEAR(r.bubble_fraction, (double)(p - 1) / (m + p - 1));
    NEAR(r.idle_s, p * n * (p - 1) * 3.0);
    for (int q = 0; q < p; q++) {
        NEAR(r.rank[q].busy_s, n * m * 3.0);
        NEAR(r.rank[q].idle_s, n * (p - 1) * 3.0);
    }
    sim_result_free(&r);
    sched_free(s);
}

/* Asynchronous schedules (PipeDream weight stashing, PipeDream-2BW) are judged in steady state:
 * bubble, busy and idle come from the window their iteration time is measured over, [end of
 * iteration 0, end of iteration N-1], busy counting the compute of iterations 1..N-1.
 *
 * Closed form, uniform stages (tF, tB), zero communication: the steady state has no bubble.
 * Let c = tF + tB and count microbatches k from the steady state on. The 1F1B timetable
 *   stage q starts F(k) at k c + q tF, and B(k) at (k + p - 1 - q) c + (q + 1) tF
 * meets every dependency with equality (F(k) on q + 1 starts when F(k) on q ends; B(k) on q
 * starts when B(k) on q + 1 ends, tB after it began) and keeps stage q busy without a gap:
 * modulo c its forward fills [q tF, (q+1) tF] and its backward [(q+1) tF, q tF + c], and after
 * F(k) it runs B(k - (p-1-q)), i.e. p - q microbatches in flight, PipeDream's 1F1B order. So
 * one iteration of m microbatches takes T = m (tF + tB) on every stage: bubble_fraction =
 * 1 - m(tF+tB)/T = 0, zb_bubble_rate = 0,
 * idle_s = 0, busy_s = L m (tF + tB) per rank, window_s = L T, whatever N >= 3 (L =
 * sim_steady_last(N, 1, drain): N - 2, or the iteration before the drain's first when m < p - 1
 * (rank 0's backwards after the one its last forward paces); equal gaps, a period of 1).
 * (Over the whole run, fill and drain included, the old figure was (p-1)(tF+tB) idle per rank:
 * 0.158 at N = 2, 0.086 at N = 4 for p = 4, m = 8.) With N < 3, or a drain that leaves no
 * iteration, there is no steady state and the window is the whole run, as the iteration time
 * is (makespan / N): GPipe's (p-1)/(m+p-1) does not apply (pipedream's iterations overlap
 * forwards and backwards), so only the identity bubble_fraction = 1 - N m (tF+tB) / makespan is
 * checked there. */
/* Unequal stages: an asynchronous schedule's steady state runs at its slowest stage, m (tF + tB)
 * of it an iteration, whatever N >= 3 (the window leaves out the fill and the drain, whose last
 * iteration ends early; N = 2 has no steady state: the whole run); and each rank's busy + idle is the
 * window, the run's bubble its idle over ranks x window. Stages (tF, tB): (1, 2), (2, 3),
 * (0.5, 1), (1, 1) on 4 ranks, m 8: 40 s an iteration, 92 s of compute, bubble 68 / 160. */
static void test_async_steady_state_unequal(void) {
    const char *kinds[] = {"pipedream", "2bw"};
    sim_stage_cost sc[4] = {{1, 2, -1, -1, -1, -1, -1, -1}, {2, 3, -1, -1, -1, -1, -1, -1},
                            {0.5, 1, -1, -1, -1, -1, -1, -1}, {1, 1, -1, -1, -1, -1, -1, -1}};
    for (int k = 0; k < 2; k++)
        for (int n = 2; n <= 8; n++) {
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(run_staged(kinds[k], 4, 8, n, sc, 0, &r), PL_OK);
            if (n >= 3) {
                NEAR(r.iteration_time_s, 40);
                NEAR(r.bubble_fraction, 68.0 / 160);
            }
            CU_ASSERT_EQUAL(r.steady_state, n >= 3);
            if (n == 2) NEAR(r.window_s, r.makespan_s);
            double idle = 0;
            for (int q = 0; q < 4; q++) {
                NEAR(r.rank[q].busy_s + r.rank[q].idle_s, r.window_s);
                CU_ASSERT(r.rank[q].idle_s >= 0);
                idle += r.rank[q].idle_s;
            }
            NEAR(r.idle_s, idle);
            NEAR(r.bubble_fraction, idle / (4 * r.window_s));
            sim_result_free(&r);
        }
}

static void test_async_steady_state_closed_form(void) {
    const char *kinds[] = {"pipedream", "2bw"};
    int shapes[][2] = {{4, 8}, {3, 5}, {2, 1}, {8, 4}};
    double tf = 1.5, tb = 3.25;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int n = 1; n <= 5; n++) {
                int p = shapes[i][0], m = shapes[i][1];
                sched *s = lowered(kinds[k], p, m, 0, n);
                if (!s) continue;
                sim_basic b;
                sim_basic_init(&b);
                b.tf_s = tf;
                b.tb_s = tb;
                sim_result r;
                CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
                /* the drain: rank 0's last p - 2 backwards after the one its last forward paces,
                 * from microbatch n m - p + 1 on; equal stages' gaps repeat every iteration */
                int drain = (n * m - p + 1) / m, L = sim_steady_last(n, 1, drain);
                CU_ASSERT_EQUAL(L, n < 3 ? 0 : drain - 1 < n - 2 ? (drain - 1 >= 1 ? drain - 1 : 0) : n - 2);
                if (L == 0) { /* no steady state: the whole run (N < 3; 8 stages, m 4, N 3) */
                    CU_ASSERT_EQUAL(r.steady_state, 0);
                    NEAR(r.window_s, r.makespan_s);
                    NEAR(r.iteration_time_s, r.makespan_s / n);
                    NEAR(r.bubble_fraction, 1 - n * m * (tf + tb) / r.makespan_s);
                } else {
                    CU_ASSERT_EQUAL(r.steady_state, 1);
                    NEAR(r.iteration_time_s, m * (tf + tb));
                    /* a period of 1 is taken once three gaps are equal, not two */
                    CU_ASSERT_EQUAL(r.steady_cycle, L >= sched_async_span(1) ? 1 : 0);
                    CU_ASSERT_EQUAL(r.steady_last, L);
                    NEAR(r.window_s, L * m * (tf + tb));
                    NEAR(r.bubble_fraction, 0);
                    NEAR(r.zb_bubble_rate, 0);
                    NEAR(r.idle_s, 0);
                    for (int q = 0; q < p; q++) {
                        NEAR(r.rank[q].busy_s, L * m * (tf + tb));
                        NEAR(r.rank[q].idle_s, 0);
                        NEAR(r.rank[q].bubble_fraction, 0);
                    }
                    /* the run still has its fill and drain: the window is not the makespan */
                    CU_ASSERT(r.makespan_s > r.window_s + (p > 1 ? tb : 0) - 1e-9);
                }
                sim_result_free(&r);
                /* whole_run (pipelab run's prediction: a measured pass of N iterations gives
                 * pass / N): the makespan over N, the window the whole run. The timetable above
                 * holds from microbatch 0: stage 0 ends B(k) at (k + p) c, so N m microbatches
                 * take (N m + p - 1)(tF + tB), each rank busy N m c and idle (p - 1) c. */
                sim_config cf;
                sim_config_init(&cf);
                cf.whole_run = 1;
                CU_ASSERT_EQUAL_FATAL(run(s, &b, &cf, &r), PL_OK);
                double c = tf + tb;
                CU_ASSERT_EQUAL(r.steady_state, 0);
                NEAR(r.makespan_s, (n * m + p - 1) * c);
                NEAR(r.iteration_time_s, r.makespan_s / n);
                NEAR(r.window_s, r.makespan_s);
                NEAR(r.bubble_fraction, (double)(p - 1) / (n * m + p - 1));
                for (int q = 0; q < p; q++) {
                    NEAR(r.rank[q].busy_s, n * m * c);
                    NEAR(r.rank[q].idle_s, (p - 1) * c);
                }
                sim_result_free(&r);
                sim_basic_free(&b);
                sched_free(s);
            }
}

/* The asynchronous steady state's cycle and its drain: with a transfer cost the ranks' 1F1B
 * alternation repeats every p microbatches, so with m < p or m not a multiple of p the
 * iterations' ends repeat every c = p / gcd(p, m) iterations with equal stages (sched_async_cycle),
 * not every one; and with m < p - 1 the drain (rank 0's backwards after the one its last forward
 * paces) spans d = ceil((p - 1) / m) iterations, which end early when a stage is slower than the
 * others. A long run's iteration gaps (its iter_end_s, the sequential reference) are periodic
 * with period c, the drain aside, and with no shorter one (PipeDream, p = 8, m = 2, tF 1, tB 2,
 * 0.1 s transfers: 6.4, 6.4, 6.4, 6.2 s); the run finds that period (steady_cycle) once its
 * window holds it twice, and its iteration time is then the mean gap over a whole cycle at
 * every N from 1 + d + 2c (sched_async_iterations, `pipelab simulate`'s default) on. With the
 * first of 4 stages twice as slow (tF, tB 2, 4 against 1, 2), m = 2, 0.1 s transfers, the
 * iterations end 12 s apart (m (tF + tB) of the slow stage) but for the drain's 10 and 8: 12 s
 * at every N from 5 to 12 (the window iterations 1..N-2 read 11 to 11.8), and no rank is busy
 * longer than the window. With a last stage of tF 1.3 and tB 1.3 against 1 and 2 (5 stages,
 * m 1, 0.3 s transfers) the gaps repeat every 4 iterations, not the 5 of the guess: 3.6, 3.6,
 * 3.2, 3.4 after a first gap of 3.0 and two of 3.6 (the fill's transient, left out of the
 * window), whose mean the run finds at every N from 15 (two periods before the drain's 4
 * iterations) to 30. */
static void test_async_cycle(void) {
    CU_ASSERT_EQUAL(sched_async_cycle(8, 2, NULL), 4);
    CU_ASSERT_EQUAL(sched_async_cycle(4, 8, NULL), 1);
    CU_ASSERT_EQUAL(sched_async_cycle(8, 3, NULL), 8);
    CU_ASSERT_EQUAL(sched_async_cycle(3, 3, (const int[]){1, 2, 1}), 2); /* lcm(3, 2) = 6 */
    CU_ASSERT_EQUAL(sched_async_span(1), 3); /* two periods, and two comparisons */
    CU_ASSERT_EQUAL(sched_async_span(2), 4);
    CU_ASSERT_EQUAL(sched_async_span(5), 10);
    CU_ASSERT_EQUAL(sched_async_iterations(4, 8, NULL), 5); /* 1 + 1 + sched_async_span(1) */
    CU_ASSERT_EQUAL(sched_async_room(8), SCHED_ASYNC_DEFAULT_MBS); /* max(5 m, 4096) */
    CU_ASSERT_EQUAL(sched_async_room(2000), 10000);
    /* the shortest default fits the room at any m (the total of 2^24 microbatches aside) */
    CU_ASSERT_EQUAL(sched_async_iterations(8, 1024, NULL), 5);
    CU_ASSERT_EQUAL(sched_async_iterations(8, 1 << 20, NULL), 5);
    CU_ASSERT_EQUAL(sched_async_iterations(2000, 1024, NULL), 4); /* 1 + 2 + 2 x 125 past the room */
    CU_ASSERT_EQUAL(sched_async_iterations(8, 2, NULL), 13); /* 1 + ceil(7 / 2) + 2 x 4 */
    CU_ASSERT_EQUAL(sched_async_iterations(1000, 999, NULL), 4); /* a cycle past the room */
    const char *kinds[] = {"pipedream", "2bw"};
    for (int k = 0; k < 2; k++)
        for (int m = 1; m <= 3; m++) {
            int p = 8, c = sched_async_cycle(p, m, NULL), d = (p - 1 + m - 1) / m, big = 5 * c + 1 + d;
            sim_basic b;
            sim_basic_init(&b);
            b.tcomm_s = 0.1;
            sim_result r;
            sched *s = lowered(kinds[k], p, m, 0, big);
            if (!s) continue;
            CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
            sched_free(s);
            double gap[64], cyc = 0;
            for (int i = 1; i < big; i++) gap[i] = r.iter_end_s[i] - r.iter_end_s[i - 1];
            for (int i = 1; i <= c; i++) cyc += gap[i];
            cyc /= c;
            for (int i = 1; i + c < big - d; i++) NEAR(gap[i + c], gap[i]); /* period c, the drain aside */
            for (int e = 1; e < c; e++) {
                int same = 1;
                for (int i = 1; i + e < big - d; i++) same &= fabs(gap[i + e] - gap[i]) < 1e-9;
                if (c % e == 0) CU_ASSERT(!same); /* no shorter period */
            }
            sim_result_free(&r);
            CU_ASSERT_EQUAL(sched_async_iterations(p, m, NULL), 1 + d + 2 * c);
            for (int n = 1 + d + 2 * c; n <= 1 + d + 4 * c; n++) {
                s = lowered(kinds[k], p, m, 0, n);
                if (!s) continue;
                CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
                CU_ASSERT_EQUAL(r.steady_cycle, c);
                CU_ASSERT_EQUAL(r.steady_need, 1 + d + 2 * c);
                CU_ASSERT_EQUAL(r.steady_last % c, 0);
                if (fabs(r.iteration_time_s - cyc) > 1e-9)
                    fprintf(stderr, "\n  %s p=%d m=%d N=%d: %.9g, the cycle's mean gap %.9g\n", kinds[k], p, m, n,
                            r.iteration_time_s, cyc);
                NEAR(r.iteration_time_s, cyc);
                sim_result_free(&r);
                sched_free(s);
            }
        }
    /* a period other than the guess: a last stage of equal F and B */
    sim_stage_cost sl[5] = {{1, 2, -1, -1, -1, -1, -1, -1}, {1, 2, -1, -1, -1, -1, -1, -1}, {1, 2, -1, -1, -1, -1, -1, -1},
                            {1, 2, -1, -1, -1, -1, -1, -1}, {1.3, 1.3, -1, -1, -1, -1, -1, -1}};
    for (int n = 15; n <= 30; n++) {
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(run_staged("pipedream", 5, 1, n, sl, 0.3, &r), PL_OK);
        CU_ASSERT_EQUAL(r.steady_cycle, 4);
        if (fabs(r.iteration_time_s - 3.45) > 1e-9)
            fprintf(stderr, "\n  last stage 1.3, 1.3, N=%d: %.9g, want 3.45\n", n, r.iteration_time_s);
        NEAR(r.iteration_time_s, 3.45);
        sim_result_free(&r);
    }
    /* a slow first stage: the drain's iterations end early */
    sim_stage_cost sc[4] = {{2, 4, -1, -1, -1, -1, -1, -1}, {1, 2, -1, -1, -1, -1, -1, -1},
                            {1, 2, -1, -1, -1, -1, -1, -1}, {1, 2, -1, -1, -1, -1, -1, -1}};
    for (int k = 0; k < 2; k++)
        for (int n = 5; n <= 12; n++) {
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(run_staged(kinds[k], 4, 2, n, sc, 0.1, &r), PL_OK);
            if (fabs(r.iteration_time_s - 12) > 1e-9)
                fprintf(stderr, "\n  %s slow first stage N=%d: %.9g, want 12\n", kinds[k], n, r.iteration_time_s);
            NEAR(r.iteration_time_s, 12);
            for (int q = 0; q < 4; q++) CU_ASSERT(r.rank[q].busy_s <= r.window_s + 1e-9);
            sim_result_free(&r);
        }
    /* two equal gaps in a row are no period: 2BW, p 4, m 2, 0.3 s transfers, stages of F 1, 0.7,
     * 1, 1 and B 2, 1.3, 2, 1.3: gaps 6.2, 6, 6.2, then 6.2, 6, 6.2 again (a period of 3, mean
     * 6.1333 s); at N = 7 the range before the drain holds gaps 6.2, 6, 6.2, 6.2, whose last two
     * once read as a period of 1 (6.2 s) */
    sim_stage_cost s4[4] = {{1, 2, -1, -1, -1, -1, -1, -1}, {0.7, 1.3, -1, -1, -1, -1, -1, -1},
                            {1, 2, -1, -1, -1, -1, -1, -1}, {1, 1.3, -1, -1, -1, -1, -1, -1}};
    sim_result r7, r14;
    CU_ASSERT_EQUAL_FATAL(run_staged("2bw", 4, 2, 7, s4, 0.3, &r7), PL_OK);
    CU_ASSERT_EQUAL(r7.steady_cycle, 0);
    CU_ASSERT(r7.steady_need > 7); /* more iterations asked for */
    CU_ASSERT_EQUAL_FATAL(run_staged("2bw", 4, 2, 14, s4, 0.3, &r14), PL_OK);
    CU_ASSERT_EQUAL(r14.steady_cycle, 3);
    NEAR(r14.iteration_time_s, 18.4 / 3);
    sim_result_free(&r7);
    sim_result_free(&r14);
}

/* Returns stage-replicated `kind` (sched_gen_replicated, lowered) on p ranks, m microbatches, n
 * iterations, stage q's costs sc[q] and replicas rep[q], transfers of tcomm s, run into *r. */
static int run_replicated(const char *kind, int p, int m, int n, sim_stage_cost *sc, const int *rep, double tcomm,
                          sim_result *r) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, 0, n, SCHED_RECOMPUTE_NONE};
    sched *g = sched_gen_replicated(kind, &o, rep, NULL, &e), *s = g ? sched_lower(g, &e) : NULL;
    sched_free(g);
    if (!s) {
        fprintf(stderr, "replicated %s: %s\n", kind, e.msg);
        return PL_EINPUT;
    }
    return run_on_stages(s, p, sc, tcomm, rep, r);
}

/* A drain that starts before drain_first's estimate: 2BW, p 2, m 1, stage 0 twice (F 1, B 2;
 * stage 1 F 1, B 1.3; 0.1 s transfers). Its iterations end 3 s apart, but the last one before
 * the estimated drain only 2 s after the one before it, so the whole range held no period and
 * the window kept that gap: 2.941 s at N = 20, 2.923 at the default 16. The window's search
 * drops such trailing gaps (up to the drain's ceil((W - 1) / m) iterations) and reads the mean
 * gap of a long run's middle at every N from 8 to 24. */
static void test_async_early_drain(void) {
    sim_stage_cost sc[2] = {{1, 2, -1, -1, -1, -1, -1, -1}, {1, 1.3, -1, -1, -1, -1, -1, -1}};
    const int rep[2] = {2, 1};
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run_replicated("2bw", 2, 1, 64, sc, rep, 0.1, &r), PL_OK);
    double mid = (r.iter_end_s[40] - r.iter_end_s[20]) / 20; /* far from the fill and the drain */
    NEAR(mid, 3);
    sim_result_free(&r);
    for (int n = 8; n <= 24; n++) {
        CU_ASSERT_EQUAL_FATAL(run_replicated("2bw", 2, 1, n, sc, rep, 0.1, &r), PL_OK);
        if (fabs(r.iteration_time_s - mid) > 1e-9) fprintf(stderr, "\n  early drain N=%d: %.9g, want %.9g\n", n, r.iteration_time_s, mid);
        NEAR(r.iteration_time_s, mid);
        CU_ASSERT_EQUAL(r.steady_cycle, 1);
        sim_result_free(&r);
    }
}

/* Past the fill, the asynchronous bubble does not depend on how many iterations are simulated:
 * with a transfer cost the steady state does have a bubble (each microbatch's round trip
 * between neighbouring stages waits for two transfers), and it is the same at N = 3 ... 8
 * (the whole-run figure it replaces fell with N: the fill and drain were averaged away). Also
 * the accounting identities: busy of a rank = L m (tF+tB) (the window's iterations' work, L =
 * sim_steady_last(N, 1, N)), idle = window - busy, bubble_fraction = sum idle / (p window), window =
 * L T. */
static void test_async_bubble_iteration_invariance(void) {
    const char *kinds[] = {"pipedream", "2bw"};
    int p = 4, m = 8;
    for (int k = 0; k < 2; k++) {
        double ref_bubble = -1, ref_iter = -1;
        for (int n = 3; n <= 8; n++) {
            sched *s = lowered(kinds[k], p, m, 0, n);
            if (!s) continue;
            sim_basic b;
            sim_basic_init(&b);
            b.tcomm_s = 0.5;
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
            CU_ASSERT_EQUAL(r.steady_state, 1);
            NEAR(r.window_s, sim_steady_last(n, 1, n) * r.iteration_time_s); /* m = 2p: a cycle of 1, no early drain */
            double idle = 0;
            for (int q = 0; q < p; q++) {
                NEAR(r.rank[q].busy_s, sim_steady_last(n, 1, n) * m * 3.0);
                NEAR(r.rank[q].idle_s, r.window_s - r.rank[q].busy_s);
                NEAR(r.rank[q].bubble_fraction, r.rank[q].idle_s / r.window_s);
                idle += r.rank[q].idle_s;
            }
            NEAR(r.idle_s, idle);
            NEAR(r.bubble_fraction, idle / (p * r.window_s));
            NEAR(r.bubble_fraction, 1 - m * 3.0 / r.iteration_time_s);
            CU_ASSERT(r.bubble_fraction > 0.05); /* the transfers do cost something */
            if (ref_bubble < 0) {
                ref_bubble = r.bubble_fraction;
                ref_iter = r.iteration_time_s;
            } else {
                NEAR(r.bubble_fraction, ref_bubble);
                NEAR(r.iteration_time_s, ref_iter);
            }
            sim_result_free(&r);
            sim_basic_free(&b);
            sched_free(s);
        }
    }
}

/* Memory: 1F1B stashes p - r microbatches on rank r, GPipe m; pipedream keeps as many weight
 * versions as stashed microbatches; 2bw keeps 2, but 1 on the last rank, whose backward follows
 * its forward so that no microbatch is in flight across its STEP (sched_versions); peak bytes
 * follow. */
static void test_memory(void) {
    int p = 4, m = 8;
    sim_basic b;
    sim_basic_init(&b);
    b.stash_bytes = 1000;
    b.param_bytes = 400;
    sim_config c;
    sim_config_init(&c);
    c.optimizer_bytes_per_param = 8; /* 2 bytes per parameter byte with dtype 4 */
    sim_result r;
    sched *s = lowered("1f1b", p, m, 0, 0);
    if (s) {
        CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
        for (int q = 0; q < p; q++) {
            CU_ASSERT_EQUAL(r.rank[q].peak_stash_mbs, p - q);
            CU_ASSERT_EQUAL(r.rank[q].peak_weight_versions, 1);
            /* weights 400 + grads 400 + optimizer 800 + stash */
            CU_ASSERT_EQUAL(r.rank[q].peak_bytes, 1600 + (int64_t)(p - q) * 1000);
        }
        sim_result_free(&r);
        sched_free(s);
    }
    s = lowered("gpipe", p, m, 0, 0);
    if (s) {
        CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
        for (int q = 0; q < p; q++) CU_ASSERT_EQUAL(r.rank[q].peak_stash_mbs, m);
        /* OOM verdict */
        sim_result_free(&r);
        c.capacity_bytes = 1600 + 4000;
        CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
        CU_ASSERT_EQUAL(r.oom, 1);
        CU_ASSERT_EQUAL(r.rank[0].oom, 1);
        sim_result_free(&r);
        c.capacity_bytes = 1600 + 8000;
        CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
        CU_ASSERT_EQUAL(r.oom, 0);
        sim_result_free(&r);
        c.capacity_bytes = 0;
        sched_free(s);
    }
    s = lowered("pipedream", p, m, 0, 4);
    if (s) {
        CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
        for (int q = 0; q < p; q++) {
            CU_ASSERT_EQUAL(r.rank[q].peak_weight_versions, r.rank[q].peak_stash_mbs);
            CU_ASSERT_EQUAL(r.rank[q].peak_stash_mbs, p - q);
            CU_ASSERT_EQUAL(r.rank[q].peak_bytes, 1200 + (int64_t)(p - q) * (1000 + 400));
        }
        /* steady state: one iteration of m microbatches takes m (tF + tB) on the bottleneck */
        NEAR(r.iteration_time_s, m * 3.0);
        sim_result_free(&r);
        sched_free(s);
    }
    s = lowered("2bw", p, m, 0, 4);
    if (s) {
        CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
        for (int q = 0; q < p; q++) {
            int v = q < p - 1 ? 2 : 1;
            CU_ASSERT_EQUAL(r.rank[q].peak_weight_versions, v);
            CU_ASSERT_EQUAL(r.rank[q].peak_bytes, 1200 + (int64_t)v * 400 + (int64_t)(p - q) * 1000);
        }
        NEAR(r.iteration_time_s, m * 3.0);
        sim_result_free(&r);
        sched_free(s);
    }
}

/* Recompute full: stash only the input, each backward pays one more forward. */
static void test_recompute(void) {
    int p = 2, m = 4;
    pl_err e;
    sched_gen_opts o = {p, m, 0, 0, SCHED_RECOMPUTE_FULL};
    sched *g = sched_generate("1f1b", &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    sched *s = sched_lower(g, &e);
    sched_free(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_basic b;
    sim_basic_init(&b);
    b.tf_s = 1;
    b.tb_s = 2;
    b.bytes = 10;
    b.stash_bytes = 1000;
    sim_config c;
    sim_config_init(&c);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
    NEAR(r.makespan_s, (m + p - 1) * (1 + 2 + 1));
    /* rank 0: 2 inputs stashed (20), plus one rebuilt stash during a backward (990) */
    CU_ASSERT_EQUAL(r.rank[0].peak_bytes, 2 * 10 + 990);
    sim_result_free(&r);
    sched_free(s);
}

/* Data parallel: a replicated stage's REDUCE_GRAD costs the ring all-reduce at the end of
 * the flush (nothing to overlap with in 1F1B at the last backward), and its replicas share the
 * microbatches (k on replica k mod 4: replica 0 runs microbatch 0, replica 1 microbatch 1). */
static void test_replicas_allreduce(void) {
    sched *s = lowered("1f1b", 2, 2, 0, 0);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    b.param_bytes = 3000;
    b.bandwidth_Bps = 1000;
    b.latency_s = 0.01;
    b.tcomm_s = 0;
    int rep[2] = {1, 4};
    sim_config c;
    sim_config_init(&c);
    sim_result r0, r1;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r0), PL_OK);
    c.replicas = rep;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r1), PL_OK);
    double ar = 2.0 * 3 / 4 * 3000 / 1000 + 2 * 3 * 0.01;
    /* unreplicated: stage 1's last backward ends at 7 (rank 1), rank 0's last at 9. Replicated
     * (tf 1, tb 2): rank 0 F0 [0,1] F1 [1,2]; replica 0 of stage 1 F0 [1,2] B0 [2,4], replica 1
     * F1 [2,3] B1 [3,5]; replicas 2 and 3 have no microbatch and join the all-reduce at once, so
     * it starts when replica 1 joins at 5 and ends at 5 + 4.56, past rank 0's last end (8) */
    NEAR(r0.makespan_s, 9);
    NEAR(r1.makespan_s, 5 + ar);
    NEAR(r1.rank[1].reduce_s, ar);
    NEAR(r1.rank[1].busy_s, (3 + 3 + 0 + 0) / 4.0); /* the mean over the replicas */
    sim_result_free(&r0);
    sim_result_free(&r1);
    sched_free(s);
}

/* Determinism: two runs give identical traces (bitwise), also in stochastic mode; different
 * seeds give different times, and a cv of 0 gives the deterministic result. */
static void test_determinism_and_stochastic(void) {
    sched *s = lowered("interleaved", 4, 8, 2, 0);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    b.tcomm_s = 0.1;
    sim_config c;
    sim_config_init(&c);
    c.record_trace = 1;
    c.cv = 0.2;
    c.seed = 42;
    sim_result r1, r2, r3;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r1), PL_OK);
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r2), PL_OK);
    int same = 1;
    for (int q = 0; q < s->ranks; q++)
        same &= memcmp(r1.trace[q], r2.trace[q], s->rank[q].n * sizeof(sim_slot)) == 0;
    CU_ASSERT(same);
    c.seed = 43;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r3), PL_OK);
    CU_ASSERT(r3.makespan_s != r1.makespan_s);
    /* every action has a trace slot with start <= end */
    int ok = 1;
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) ok &= r1.trace[q][i].start_s >= 0 && r1.trace[q][i].end_s >= r1.trace[q][i].start_s;
    CU_ASSERT(ok);
    sim_result_free(&r1);
    sim_result_free(&r2);
    sim_result_free(&r3);
    /* repeat statistics: mean near the deterministic time, positive spread */
    sim_repeat_stats st;
    pl_err e;
    sim_costs costs = sim_basic_costs(&b);
    c.record_trace = 0;
    c.cv = 0.1;
    CU_ASSERT_EQUAL(sim_repeat(s, &costs, &c, 20, &st, NULL, &e), PL_OK);
    c.cv = 0;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r1), PL_OK);
    CU_ASSERT(st.iter_sd_s > 0);
    CU_ASSERT(st.iter_min_s <= st.iter_mean_s && st.iter_mean_s <= st.iter_max_s);
    CU_ASSERT(fabs(st.iter_mean_s - r1.iteration_time_s) < 0.2 * r1.iteration_time_s);
    sim_result_free(&r1);
    sched_free(s);
}

/* GPipe on 2 ranks, m 16, F 1 and B 2 on each, no transfer time, into b, costs and a default c:
 * two ranks that do equal work. NULL when the schedule cannot be made. */
static sched *balanced_gpipe(sim_basic *b, sim_costs *costs, sim_config *c) {
    sched *s = lowered("gpipe", 2, 16, 0, 0);
    sim_basic_init(b);
    b->tf_s = 1;
    b->tb_s = 2;
    *costs = sim_basic_costs(b);
    sim_config_init(c);
    return s;
}

/* The median of stochastic runs (sim_run_median, and sim_repeat's, which simulate --repeat
 * shows and stores beside the runs' mean, least and most): its result is the run whose iteration
 * time is the median of the seeds' own (each run alone with sim_run: the sequential reference),
 * the lower middle one for an even count, with its trace; a cv of 0 gives the deterministic run. On two
 * ranks that do equal work (GPipe, F 1 and B 2 on each, m 16, no transfer time) a deterministic
 * run waits only in the fill and drain, (p - 1)(F + B) = 3 of its (m + p - 1)(F + B) = 51; with
 * jitter (cv 0.3) each rank waits on the other's slower actions too, so the median run is longer,
 * though each action's mean time is the same. */
static void test_median_run(void) {
    sim_basic b;
    sim_costs costs;
    sim_config c;
    sched *s = balanced_gpipe(&b, &costs, &c);
    if (!s) return;
    pl_err e;
    sim_result det, med;
    CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &det, &e), PL_OK);
    NEAR(det.iteration_time_s, 51);
    c.cv = 0.3;
    c.seed = 7;
    c.record_trace = 1;
    enum { N = 9 };
    for (int runs = N - 1; runs <= N; runs++) {
        double it[N];
        for (int k = 0; k < runs; k++) {
            sim_config one = c;
            one.seed = c.seed + (uint64_t)k;
            one.record_trace = 0;
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &one, &r, &e), PL_OK);
            it[k] = r.iteration_time_s;
            sim_result_free(&r);
        }
        for (int i = 1; i < runs; i++) /* insertion sort */
            for (int j = i; j > 0 && it[j] < it[j - 1]; j--) {
                double t = it[j];
                it[j] = it[j - 1];
                it[j - 1] = t;
            }
        CU_ASSERT_EQUAL_FATAL(sim_run_median(s, &costs, &c, runs, &med, &e), PL_OK);
        CU_ASSERT_EQUAL(med.iteration_time_s, it[(runs - 1) / 2]);
        CU_ASSERT_PTR_NOT_NULL(med.trace);
        CU_ASSERT(med.iteration_time_s > det.iteration_time_s);
        sim_result_free(&med);
        /* simulate --repeat: the same median run, and the summary over the runs */
        sim_repeat_stats st;
        CU_ASSERT_EQUAL_FATAL(sim_repeat(s, &costs, &c, runs, &st, &med, &e), PL_OK);
        CU_ASSERT_EQUAL(med.iteration_time_s, it[(runs - 1) / 2]);
        CU_ASSERT_PTR_NOT_NULL(med.trace);
        double sum = 0;
        for (int k = 0; k < runs; k++) sum += it[k];
        NEAR(st.iter_mean_s, sum / runs);
        CU_ASSERT_EQUAL(st.iter_min_s, it[0]);
        CU_ASSERT_EQUAL(st.iter_max_s, it[runs - 1]);
        sim_result_free(&med);
    }
    c.cv = 0;
    CU_ASSERT_EQUAL_FATAL(sim_run_median(s, &costs, &c, 3, &med, &e), PL_OK);
    CU_ASSERT_EQUAL(med.iteration_time_s, det.iteration_time_s);
    sim_result_free(&med);
    CU_ASSERT_EQUAL(sim_run_median(s, &costs, &c, 0, &med, &e), PL_EINPUT);
    sim_result_free(&det);
    sched_free(s);
}

/* The ranks' drift (sim_config.rank_cv): each stream's compute times one lognormal factor of
 * mean 1, drawn once per run from the seed, in stream order. GPipe on 2 ranks, F 1 and B 2 on
 * each, m 16, no transfer time: with speeds s0, s1 the forwards end at F0 + F1 + (m - 1) max(F),
 * and the backwards, which start on the last rank, (m - 1) max(B) + B0 + B1 after that, so the
 * iteration is 3 (s0 + s1) + 45 max(s0, s1) (51 at s0 = s1 = 1). The factors are GSL's first two
 * draws of that seed: the closed form against the engine. Drawn factors make the slower rank
 * set the pace, so the median of 9 runs is longer than 51; 0 is the deterministic run; a
 * negative one is refused. */
static void test_rank_drift(void) {
    sim_basic b;
    sim_costs costs;
    sim_config c;
    sched *s = balanced_gpipe(&b, &costs, &c);
    if (!s) return;
    pl_err e;
    sim_result r;
    c.rank_cv = 0.2;
    for (uint64_t seed = 5; seed < 8; seed++) {
        c.seed = seed;
        gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        gsl_rng_set(g, (unsigned long)seed);
        double sigma = sqrt(log(1 + c.rank_cv * c.rank_cv));
        double s0 = gsl_ran_lognormal(g, -sigma * sigma / 2, sigma), s1 = gsl_ran_lognormal(g, -sigma * sigma / 2, sigma);
        gsl_rng_free(g);
        CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &r, &e), PL_OK);
        NEAR(r.iteration_time_s, 3 * (s0 + s1) + 45 * (s0 > s1 ? s0 : s1));
        NEAR(r.rank[0].busy_s, 3 * 16 * s0);
        sim_result_free(&r);
    }
    CU_ASSERT_EQUAL_FATAL(sim_run_median(s, &costs, &c, 9, &r, &e), PL_OK);
    CU_ASSERT(r.iteration_time_s > 51 + 1e-9);
    sim_result_free(&r);
    c.rank_cv = 0;
    CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &r, &e), PL_OK);
    NEAR(r.iteration_time_s, 51);
    sim_result_free(&r);
    c.rank_cv = -0.1;
    CU_ASSERT_EQUAL(sim_run(s, &costs, &c, &r, &e), PL_EINPUT);
    sched_free(s);
}

/* The states term (sim_config.speed_draws): a run of seed k takes row k mod n of the ranks'
 * speeds, in place of rank_cv's draw. The GPipe of test_rank_drift, iteration 3 (s0 + s1) + 45
 * max(s0, s1); rows (1, 1), (1.5, 1), (1, 2), (1, 1), (2, 1): 51, 75, 99, 51, 99. Each rank's
 * median speed is 1 (51), but the median of the five runs is 75: a pass waits on whichever rank
 * is slow in it. A speed that is not > 0 is refused.
 * Per class (sim_config.speed_draws_b): the rows of speed_draws then price the forwards and those
 * of speed_draws_b the backwards. With F speeds f0, f1 and B speeds b0, b1 the forwards end at
 * f0 + f1 + 15 max(f0, f1) and the backwards 2 (b0 + b1) + 30 max(b0, b1) after that: F rows
 * (1, 1), (1.5, 1), (1, 1) with B rows (1, 2), (1, 1), (0.5, 1) give 17 + 66 = 83, 25 + 34 = 59
 * and 17 + 33 = 50, where the F rows on all compute give 51, 75 and 51. A backward speed that is
 * not > 0 is refused too. */
static void test_speed_draws(void) {
    sim_basic b;
    sim_costs costs;
    sim_config c;
    sched *s = balanced_gpipe(&b, &costs, &c);
    if (!s) return;
    pl_err e;
    sim_result r;
    double rows[10] = {1, 1, 1.5, 1, 1, 2, 1, 1, 2, 1};
    const double want[5] = {51, 75, 99, 51, 99};
    c.speed_draws = rows;
    c.speed_draws_n = 5;
    c.rank_cv = 0.2; /* left out where rows are given */
    for (uint64_t seed = 0; seed < 7; seed++) {
        c.seed = seed;
        CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &r, &e), PL_OK);
        NEAR(r.iteration_time_s, want[seed % 5]);
        sim_result_free(&r);
    }
    c.seed = 0;
    CU_ASSERT_EQUAL_FATAL(sim_run_median(s, &costs, &c, 5, &r, &e), PL_OK);
    NEAR(r.iteration_time_s, 75);
    sim_result_free(&r);
    rows[3] = 0;
    CU_ASSERT_EQUAL(sim_run(s, &costs, &c, &r, &e), PL_EINPUT);
    /* per class */
    double fw[6] = {1, 1, 1.5, 1, 1, 1}, bw[6] = {1, 2, 1, 1, 0.5, 1};
    const double per_class[3] = {83, 59, 50}, on_all[3] = {51, 75, 51};
    c.speed_draws = fw;
    c.speed_draws_n = 3;
    for (int split = 0; split < 2; split++) {
        c.speed_draws_b = split ? bw : NULL;
        for (uint64_t seed = 0; seed < 3; seed++) {
            c.seed = seed;
            CU_ASSERT_EQUAL_FATAL(sim_run(s, &costs, &c, &r, &e), PL_OK);
            NEAR(r.iteration_time_s, split ? per_class[seed] : on_all[seed]);
            sim_result_free(&r);
        }
    }
    bw[5] = 0;
    CU_ASSERT_EQUAL(sim_run(s, &costs, &c, &r, &e), PL_EINPUT);
    sched_free(s);
}

/* Runs s with the sharing term's factors for `alone` (sim_share_solve) into r; returns the runs
 * the fixed point took, or -1. rows: the factors, to free with sim_share_free. */
static int shared_run_q(sched *s, const sim_costs *costs, sim_config *c, const sim_share_ratios *q, double ***rows,
                        sim_result *r) {
    pl_err e;
    int iters = 0;
    CU_ASSERT_EQUAL(sim_share_solve(s, costs, c, q, rows, &iters, &e), PL_OK);
    if (!*rows) return -1;
    c->act_scale = (const double *const *)*rows;
    int rc = sim_run(s, costs, c, r, &e);
    c->act_scale = NULL;
    CU_ASSERT_EQUAL(rc, PL_OK);
    return rc == PL_OK ? iters : -1;
}
/* shared_run_q with the one ratio `alone` (sim_share_ratios' zeros for the others). */
static int shared_run(sched *s, const sim_costs *costs, sim_config *c, double alone, double ***rows, sim_result *r) {
    return shared_run_q(s, costs, c, &(sim_share_ratios){alone, 0, 0, 0}, rows, r);
}

/* The sharing term (sim_share_solve): an action alone takes `alone` times its time beside the
 * other rank's compute. GPipe on 2 ranks, m 16, F 1, B 2, free transfers: rank 0's first F, rank
 * 1's last F and its first B, and rank 0's last B run alone, everything else in pairs, so the
 * pass takes 45 + 6 alone (51 at alone 1). With a STEP of 1 on each rank, rank 1's STEP runs
 * beside the first half of rank 0's last B: under processor sharing that B's first unit runs
 * beside, its second alone, then rank 0's STEP alone: 46 + 6 alone. Factors of a run where
 * nothing overlaps are `alone` exactly; at alone 1 they are all 1 and the run is the plain one.
 * On three ranks with one microbatch every action runs alone: 9 alone. A factor that is not > 0
 * is refused, and so is a schedule of one rank. */
static void test_sharing_term(void) {
    sim_basic b;
    sim_costs costs;
    sim_config c;
    sched *s = balanced_gpipe(&b, &costs, &c);
    if (!s) return;
    pl_err e;
    sim_result r;
    double **rows = NULL;
    const double alone[3] = {1, 0.5, 0.8};
    for (int j = 0; j < 3; j++) {
        if (shared_run(s, &costs, &c, alone[j], &rows, &r) < 0) break;
        NEAR(r.iteration_time_s, 45 + 6 * alone[j]);
        NEAR(rows[0][0], alone[j]);
        sim_result_free(&r);
        sim_share_free(s, rows);
    }
    b.tstep_s = 1;
    costs = sim_basic_costs(&b);
    for (int j = 0; j < 3; j++) {
        int it = shared_run(s, &costs, &c, alone[j], &rows, &r);
        if (it < 0) break;
        CU_ASSERT(it >= 2 || alone[j] == 1); /* a partial overlap takes more than one run to settle */
        CU_ASSERT_DOUBLE_EQUAL(r.iteration_time_s, 46 + 6 * alone[j], 1e-6);
        sim_result_free(&r);
        if (j == 1) { /* a factor that is not > 0 is refused */
            rows[1][0] = 0;
            c.act_scale = (const double *const *)rows;
            CU_ASSERT_EQUAL(sim_run(s, &costs, &c, &r, &e), PL_EINPUT);
            c.act_scale = NULL;
        }
        sim_share_free(s, rows);
    }
    CU_ASSERT_EQUAL(sim_share_solve(s, &costs, &c, &(sim_share_ratios){0}, &rows, &(int){0}, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(sim_share_solve(s, &costs, &c, &(sim_share_ratios){0.5, -1, 0, 0}, &rows, &(int){0}, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(sim_share_solve(s, &costs, &c, &(sim_share_ratios){0.5, 0, NAN, 0}, &rows, &(int){0}, &e), PL_EINPUT);
    sched_free(s);
    /* three ranks, one microbatch: each action runs alone, 3 (F + B) STEPs aside */
    s = lowered("gpipe", 3, 1, 0, 0);
    if (!s) return;
    b.tstep_s = 0;
    costs = sim_basic_costs(&b);
    if (shared_run(s, &costs, &c, 0.5, &rows, &r) >= 0) {
        NEAR(r.iteration_time_s, 9 * 0.5);
        sim_result_free(&r);
        sim_share_free(s, rows);
    }
    sched_free(s);
    s = lowered("gpipe", 1, 4, 0, 0);
    if (!s) return;
    CU_ASSERT_EQUAL(sim_share_solve(s, &costs, &c, &(sim_share_ratios){0.5, 0, 0, 0}, &rows, &(int){0}, &e), PL_EINPUT);
    CU_ASSERT_PTR_NULL(rows);
    sched_free(s);
}

/* The sharing term per class (sim_share_ratios): a forward alone at f_alone, a backward alone at
 * b_alone, each beside the other class at f_cross and b_cross. GPipe on 2 ranks, m 16, F 1, B 2
 * (test_sharing_term): two F and two B run alone and nothing beside the other class, so the pass
 * takes 45 + 2 f_alone + 4 b_alone whatever the cross ratios. 1F1B on 2 ranks, m 2, F 1, B 1:
 * rank 0's first F alone, then F beside F, rank 1's B of microbatch 0 alone, rank 0's B of it
 * beside rank 1's F of microbatch 1 (both at the cross ratio c, so that they end together), then
 * two B alone: f_alone + 1 + 3 b_alone + c (6 with every ratio 1). Every ratio at 1 gives
 * factors of 1. GPipe on 3 ranks with one microbatch runs every action alone: 3 f_alone + 6 b_alone. On 3
 * ranks the forward's cross ratio from an F beside one backward and one forward is the inverse
 * of gF (sim_share_f_cross). */
static void test_sharing_term_per_class(void) {
    sim_basic b;
    sim_costs costs;
    sim_config c;
    sched *s = balanced_gpipe(&b, &costs, &c);
    if (!s) return;
    double **rows = NULL;
    sim_result r;
    const sim_share_ratios g[2] = {{0.5, 0, 0.8, 0}, {0.5, 3, 0.8, 2}};
    for (int j = 0; j < 2; j++) {
        if (shared_run_q(s, &costs, &c, &g[j], &rows, &r) < 0) break;
        NEAR(r.iteration_time_s, 45 + 2 * 0.5 + 4 * 0.8);
        sim_result_free(&r);
        sim_share_free(s, rows);
    }
    sched_free(s);
    s = lowered("1f1b", 2, 2, 0, 0);
    if (!s) return;
    b.tf_s = b.tb_s = 1;
    costs = sim_basic_costs(&b);
    const double cross[3] = {1.5, 1, 0.7};
    for (int j = 0; j < 3; j++) {
        if (shared_run_q(s, &costs, &c, &(sim_share_ratios){0.5, cross[j], 0.8, cross[j]}, &rows, &r) < 0) break;
        NEAR(r.iteration_time_s, 0.5 + 1 + 3 * 0.8 + cross[j]);
        sim_result_free(&r);
        sim_share_free(s, rows);
    }
    if (shared_run_q(s, &costs, &c, &(sim_share_ratios){1, 1, 1, 1}, &rows, &r) >= 0) {
        NEAR(r.iteration_time_s, 6);
        for (int q = 0; q < s->ranks; q++)
            for (size_t i = 0; i < s->rank[q].n; i++) CU_ASSERT_DOUBLE_EQUAL(rows[q][i], 1, 1e-12);
        sim_result_free(&r);
        sim_share_free(s, rows);
    }
    sched_free(s);
    /* three ranks, one microbatch, F 1, B 2: every action alone, 3 F at f_alone and 3 B at b_alone */
    s = lowered("gpipe", 3, 1, 0, 0);
    if (!s) return;
    b.tb_s = 2;
    costs = sim_basic_costs(&b);
    if (shared_run_q(s, &costs, &c, &(sim_share_ratios){0.5, 2, 0.8, 3}, &rows, &r) >= 0) {
        NEAR(r.iteration_time_s, 3 * 0.5 + 6 * 0.8);
        sim_result_free(&r);
        sim_share_free(s, rows);
    }
    sched_free(s);
    /* gF(kf 1, kb 1) on 3 ranks = f_alone + (1 - f_alone) / 2 + (f_cross - f_alone) / 2 */
    NEAR(sim_share_f_cross(0.9, 0.6, 2), 0.9);
    double fc = sim_share_f_cross(0.9, 0.6, 3);
    NEAR(0.6 + (1 - 0.6) / 2 + (fc - 0.6) / 2, 0.9);
}

/* Chrome trace and table name every action. */
static void test_trace_export(void) {
    sched *s = lowered("1f1b", 2, 2, 0, 0);
    if (!s) return;
    sim_basic b;
    sim_basic_init(&b);
    sim_config c;
    sim_config_init(&c);
    c.record_trace = 1;
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(s, &b, &c, &r), PL_OK);
    pl_buf out;
    pl_buf_init(&out);
    pl_err e;
    CU_ASSERT_EQUAL(sim_trace_chrome(s, &r, &out, &e), PL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(out.data, "\"traceEvents\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out.data, "\"name\":\"1B1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out.data, "\"name\":\"0SEND_F0\""));
    pl_buf_free(&out);
    pl_buf_init(&out);
    CU_ASSERT_EQUAL(sim_trace_table(s, &r, &out, &e), PL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(out.data, "0RECV_B1"));
    pl_buf_free(&out);
    sim_result_free(&r);
    sched_free(s);
}

/* A compute-only order that carries its own REDUCE_GRADs (as PyTorch's compute_only CSVs do)
 * simulates as the same order without them: lowering places one per stage after its last
 * backward, so 2 ranks x (4 computes + 2 sends + 2 receives + REDUCE_GRAD + STEP) = 20 actions
 * and 1F1B's (m + p - 1)(tF + tB) = 9 s at tF = 1, tB = 2 either way. */
static void test_compute_only_reduce_grad(void) {
    static const char with[] = "0F0,0F1,0B0,0B1,0REDUCE_GRAD\n1F0,1B0,1F1,1B1,1REDUCE_GRAD\n";
    static const char without[] = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";
    const char *texts[] = {with, without};
    sim_basic b;
    sim_basic_init(&b);
    for (int k = 0; k < 2; k++) {
        pl_err e;
        sched *s = sched_read_torch_csv(k ? "without.csv" : "with.csv", texts[k], strlen(texts[k]), SCHED_LETTERS_CURRENT, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_FALSE(s->lowered);
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
        CU_ASSERT_EQUAL(r.actions, 20);
        NEAR(r.makespan_s, 9);
        sim_result_free(&r);
        sched_free(s);
    }
    sim_basic_free(&b);
}

/* Stage CSV: overrides apply; errors name file:line. */
static void test_stage_csv(void) {
    char *dir = pl_test_tmpdir();
    char *good = pl_test_path(dir, "good.csv"), *bad = pl_test_path(dir, "bad.csv");
    FILE *f = fopen(good, "w");
    fputs("# per-stage costs\nstage,tf,tb\n0,2,4\n1,,\n", f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("stage,tf\n0,1\n1,-3\n", f);
    fclose(f);
    sim_basic b;
    sim_basic_init(&b);
    pl_err e;
    CU_ASSERT_EQUAL(sim_basic_load_csv(&b, good, 2, &e), PL_OK);
    sched *s = lowered("1f1b", 2, 1, 0, 0);
    if (s) {
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(run(s, &b, NULL, &r), PL_OK);
        NEAR(r.makespan_s, 2 + 1 + 2 + 4); /* F0 on 0 (2), F on 1 (1), B on 1 (2), B on 0 (4) */
        sim_result_free(&r);
        sched_free(s);
    }
    CU_ASSERT_EQUAL(sim_basic_load_csv(&b, bad, 2, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.csv:3:"));
    /* a column named twice, or a stage given two rows, would leave one value unread: refused */
    f = fopen(bad, "w");
    fputs("stage,tf,tf\n0,5,1\n1,5,1\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(sim_basic_load_csv(&b, bad, 2, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.csv:1: column 'tf' appears twice"));
    f = fopen(bad, "w");
    fputs("stage,tf,tb\n0,5,2\n\n0,1,2\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(sim_basic_load_csv(&b, bad, 2, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.csv:4: stage 0 has a row already (line 2)"));
    /* a NUL byte: the reader would stop there and ignore the rest of the file */
    f = fopen(bad, "w");
    fwrite("stage,tf,tb\n0,1,2\n1,1.5,3\0,9,9,bogus\n", 1, 37, f);
    fclose(f);
    CU_ASSERT_EQUAL(sim_basic_load_csv(&b, bad, 2, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.csv:3: not a text file (a NUL byte at offset 25)"));
    sim_basic_free(&b);
    free(good);
    free(bad);
    free(dir);
}

/* Stage CSV byte cells: a whole number up to 4.6e18 (cost_bytes_read), refused at file:line
 * otherwise (a value past 2^63 used to become 0 bytes); a leading byte order mark is skipped. */
static void test_stage_csv_bytes(void) {
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "costs.csv");
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"stage,tf,tb,stash_bytes,param_bytes,bytes\n0,1,2,1e20,1e20,1e20\n1,1,2,5,5,5\n",
         "costs.csv:2: stash_bytes '1e20' is too large (more than 4.6e18 bytes)"},
        {"stage,bytes\n0,5\n1,9.3e18\n", "costs.csv:3: bytes '9.3e18' is too large"},
        {"stage,w_stash_bytes\n0,2.5\n", "costs.csv:2: w_stash_bytes '2.5' is not a whole number"},
        {"\xEF\xBB\xBFstage,tf,param_bytes\n0,3,4096\n", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(pl_write_file(path, cases[i].text, strlen(cases[i].text), &e), PL_OK);
        sim_basic b;
        sim_basic_init(&b);
        int rc = sim_basic_load_csv(&b, path, 2, &e);
        if (cases[i].want) {
            CU_ASSERT_EQUAL(rc, PL_EINPUT);
            CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].want));
            if (!strstr(e.msg, cases[i].want)) fprintf(stderr, "\n  case %zu: '%s' lacks '%s'\n", i, e.msg, cases[i].want);
        } else {
            CU_ASSERT_EQUAL_FATAL(rc, PL_OK);
            CU_ASSERT_DOUBLE_EQUAL(b.stage[0].tf_s, 3, 0);
            CU_ASSERT_EQUAL(b.stage[0].param_bytes, 4096);
        }
        sim_basic_free(&b);
    }
    free(path);
    free(dir);
}

/* Negative compute costs are refused; an unlowered schedule's trace is refused. */
static void test_library_errors(void) {
    pl_err e;
    sched_gen_opts o = {2, 2, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate("1f1b", &o, &e);
    sim_basic b;
    sim_basic_init(&b);
    sim_result r;
    sim_config c;
    sim_config_init(&c);
    c.record_trace = 1;
    CU_ASSERT_EQUAL(run(g, &b, &c, &r), PL_EINPUT);
    sched *s = sched_lower(g, &e);
    b.tf_s = -1;
    CU_ASSERT_EQUAL(sim_basic_check(&b, &e), PL_EINPUT);
    CU_ASSERT_EQUAL(run(s, &b, NULL, &r), PL_EINPUT);
    sched_free(g);
    sched_free(s);
}

/* Returns 1 when two results agree bit for bit (every summary figure, iteration end and rank
 * statistic; the engine's state size aside). */
static int same_result(const sim_result *a, const sim_result *b) {
    if (a->ranks != b->ranks || a->iterations != b->iterations || a->actions != b->actions || a->events != b->events)
        return 0;
    const double x[] = {a->makespan_s, a->iteration_time_s, a->throughput, a->window_s, a->bubble_fraction,
                        a->zb_bubble_rate, a->idle_s, a->comm_s};
    const double y[] = {b->makespan_s, b->iteration_time_s, b->throughput, b->window_s, b->bubble_fraction,
                        b->zb_bubble_rate, b->idle_s, b->comm_s};
    if (memcmp(x, y, sizeof x) || a->peak_bytes != b->peak_bytes || a->oom != b->oom) return 0;
    if (memcmp(a->iter_end_s, b->iter_end_s, (size_t)a->iterations * sizeof *a->iter_end_s)) return 0;
    return memcmp(a->rank, b->rank, (size_t)a->ranks * sizeof *a->rank) == 0;
}

/* A compute-only schedule runs with its transfers and updates implied, and gives the lowered
 * schedule's result bit for bit: every generator, with transfers, steps, stashes and memory, and
 * with uneven transfer times (then lowered inside sim_run). */
static void test_compute_only_equals_lowered(void) {
    const char *kinds[] = {"gpipe", "1f1b", "pipedream", "2bw", "interleaved", "looped-bfs", "zb-h1", "zb-h2", "zbv", "dualpipev"};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (int uneven = 0; uneven < 2; uneven++) {
            pl_err e;
            pl_err_clear(&e);
            int chunked = !strcmp(kinds[k], "interleaved") || !strcmp(kinds[k], "looped-bfs");
            sched_gen_opts o = {4, 8, chunked ? 2 : 0, 2, SCHED_RECOMPUTE_NONE};
            sched *g = sched_generate(kinds[k], &o, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(g);
            CU_ASSERT_EQUAL(sched_check_actions(g, &e), PL_OK);
            sched *l = sched_lower(g, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(l);
            sim_basic b;
            sim_basic_init(&b);
            b.tcomm_s = uneven ? -1 : 0.25;
            b.bytes = 1000;
            b.bandwidth_Bps = 1e4;
            b.inter_bandwidth_Bps = 3e3;
            b.ranks_per_node = uneven ? 2 : 0;
            b.tstep_s = 0.5;
            b.stash_bytes = 100;
            b.param_bytes = 10;
            sim_result rc, rl;
            CU_ASSERT_EQUAL_FATAL(run(g, &b, NULL, &rc), PL_OK);
            CU_ASSERT_EQUAL_FATAL(run(l, &b, NULL, &rl), PL_OK);
            CU_ASSERT(same_result(&rc, &rl));
            CU_ASSERT(rc.comm_s > 0);
            /* even transfers, flush: the flow engine ran the compute-only list (a smaller stream) */
            if (!uneven && g->weights == SCHED_WEIGHTS_FLUSH) CU_ASSERT(rc.state_bytes < rl.state_bytes);
            if (uneven || g->weights != SCHED_WEIGHTS_FLUSH) CU_ASSERT_EQUAL(rc.state_bytes, rl.state_bytes);
            sim_result_free(&rc);
            sim_result_free(&rl);
            sim_basic_free(&b);
            sched_free(g);
            sched_free(l);
        }
}

/* A deadlocking compute-only schedule, run without a dry run first, stalls and reports the
 * waiting cycle with ranks and actions (the dry run's message). */
static void test_compute_only_deadlock(void) {
    pl_err e;
    pl_err_clear(&e);
    sched *s = sched_load(PIPELAB_TESTS_DIR "/bad/deadlock.sched", SCHED_LETTERS_CURRENT, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(sched_check_actions(s, &e), PL_OK);
    sim_basic b;
    sim_basic_init(&b);
    sim_config c;
    sim_config_init(&c);
    sim_costs costs = sim_basic_costs(&b);
    sim_result r;
    CU_ASSERT_EQUAL(sim_run(s, &costs, &c, &r, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "deadlock: rank 0 at action 2 (0B0) waits for 1B0 or 1I0 on rank 1 -> rank 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "(a cycle)"));
    sim_basic_free(&b);
    sched_free(s);
}

/* The CLI: bad input exits 1 with a message; a good run prints the table. */
static void test_cli(void) {
    struct { const char *args; int rc; const char *msg; } cases[] = {
        {"--kind 1f1b --ranks 4 --microbatches 8 --no-db", 0, "iteration"},
        {"--kind 1f1b --ranks 4 --microbatches 8 --tf -1 --no-db", 2, "--tf: must not be negative"}, /* usage error */
        {"--kind nosuch --ranks 4 --microbatches 8 --no-db", 1, "nosuch"},
        {"--from /nonexistent/file.sched --no-db", 1, "nonexistent"},
        {"--kind gpipe --ranks 4 --microbatches 8 --stash-bytes 1000 --capacity 2000 --fail-on-oom --no-db", 1, "out of memory"},
        {"--kind 1f1b --ranks 2 --microbatches 2 --stage-costs /nonexistent.csv --no-db", 1, "nonexistent"},
        {"--kind 1f1b --ranks 2 --microbatches 2 --format csv --no-db", 0, "iteration_time_s"},
        {"--kind 1f1b --ranks 2 --microbatches 2 --format json --no-db", 0, "\"iteration_time_s\""},
        {"--kind 1f1b --ranks 2 --microbatches 2 --trace --no-db", 0, "0SEND_F1"},
        {"--kind 1f1b --ranks 2 --microbatches 2 --cv 0.1 --seed 3 --repeat 5 --no-db", 0, "stddev"},
        {"--kind 1f1b --ranks 2 --microbatches 2 --replicas-stage 5=2 --no-db", 1, "stage"},
        /* replicas settle slowly: an asynchronous schedule runs max(16, 2 x replicas) iterations
         * first by default (without replicas sched_async_iterations, 1 + 1 + sched_async_span(1)
         * = 5 here), then twice and four times as many, which give the same iteration time, and
         * reports the first; what --iterations says otherwise */
        {"--kind pipedream --ranks 2 --microbatches 4 --replicas-stage 0=3 --no-db", 0, "4 microbatches, 16 iterations"},
        {"--kind pipedream --ranks 2 --microbatches 4 --replicas-stage 0=10 --no-db", 0, "4 microbatches, 20 iterations"},
        {"--kind pipedream --ranks 2 --microbatches 4 --replicas-stage 0=3 --iterations 3 --no-db", 0, "4 microbatches, 3 iterations"},
        {"--kind pipedream --ranks 2 --microbatches 4 --no-db", 0, "4 microbatches, 5 iterations"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s simulate %s", PIPELAB_BIN, cases[i].args);
        char *out = NULL;
        int rc = pl_test_run(cmd, &out);
        if (rc != cases[i].rc || !strstr(out, cases[i].msg)) fprintf(stderr, "\n%s -> %d\n%s\n", cmd, rc, out);
        CU_ASSERT_EQUAL(rc, cases[i].rc);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, cases[i].msg));
        free(out);
    }
}

/* Returns the number after "key": in the JSON `pipelab simulate ARGS --format json --no-db`
 * prints (NAN when the run fails or the key is absent). */
static double sim_json_number(const char *args, const char *key) {
    char cmd[1024];
    int w = snprintf(cmd, sizeof cmd, "%s simulate %s --format json --no-db", PIPELAB_BIN, args);
    CU_ASSERT_FATAL(w > 0 && (size_t)w < sizeof cmd); /* a cut command would run something else */
    char *out = NULL;
    int rc = pl_test_run(cmd, &out);
    double v = rc == 0 ? pl_test_json_number(out, key) : NAN;
    if (isnan(v)) fprintf(stderr, "\n%s -> %d\n%s\n", cmd, rc, out ? out : "");
    free(out);
    return v;
}

/* `simulate` runs a generated asynchronous schedule again with more iterations when its default
 * count finds no period (a fill's transient longer than the guess): 2BW, p 2, m 1, stage 0 F 0.7
 * B 2, stage 1 F 1 B 1.3 three ways. Its gaps are 2.3 s for six iterations, then stage 0's
 * F + B = 2.7 s for good (stage 1's three replicas take 2.3 / 3 an iteration). The default 16
 * iterations read 2.483 s (the transient in the window); grown to 32, 2.7, which 64 and 128
 * iterations confirm, and the run of 32 is the one reported. With --iterations 16 it runs 16
 * as told. */
static void test_cli_grows(void) {
    char *dir = pl_test_tmpdir();
    char *csv = pl_test_path(dir, "stages.csv");
    FILE *f = fopen(csv, "w");
    if (!f) {
        CU_FAIL("stages.csv");
        free(csv);
        free(dir);
        return;
    }
    fputs("stage,tf,tb\n0,0.7,2\n1,1,1.3\n", f);
    fclose(f);
    char args[1024];
    snprintf(args, sizeof args, "--kind 2bw --ranks 2 --microbatches 1 --stage-costs %s --tcomm 0 --replicas-stage 1=3", csv);
    NEAR(sim_json_number(args, "iteration_time_s"), 0.7 + 2);
    CU_ASSERT_EQUAL(sim_json_number(args, "iterations"), 32);
    CU_ASSERT_EQUAL(sim_json_number(args, "steady_cycle"), 1);
    snprintf(args, sizeof args, "--kind 2bw --ranks 2 --microbatches 1 --stage-costs %s --tcomm 0 --replicas-stage 1=3 "
             "--iterations 16", csv);
    CU_ASSERT_EQUAL(sim_json_number(args, "iterations"), 16);
    CU_ASSERT_EQUAL(sim_json_number(args, "steady_cycle"), 0);
    CU_ASSERT(sim_json_number(args, "iteration_time_s") < 2.7 - 0.1);
    /* a transient that repeats: 2BW, p 6, m 1, stage 2 twice; its gaps are stage 1's F + B, 8.7 s,
     * for 18 iterations, then the slowest stage's, stage 5's 1.5 + 8 = 9.5 s, for good. Runs
     * whose windows held only the first read 8.7 s (period 1); three runs in a row that agree,
     * each twice as long as the one before, read the slowest stage's */
    f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("stage,tf,tb\n0,0.4,8\n1,7,1.7\n2,0.5,3\n3,0.1,5\n4,1.5,0.7\n5,1.5,8\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--kind 2bw --ranks 6 --microbatches 1 --stage-costs %s --replicas-stage 2=2", csv);
    NEAR(sim_json_number(args, "iteration_time_s"), 1.5 + 8);
    /* a short chance repetition before the drain is no period: 2BW, p 12, m 10, two replicas a
     * stage, 1 s transfers, gaps 25, 23, 25, 25, 23, ... repeating every 12, once read a period of 2
     * (24 s) in gaps 4..9; the default reads what 1,080 iterations read */
    const char *twelve = "--kind 2bw --ranks 12 --microbatches 10 --tcomm 1 --replicas 2";
    snprintf(args, sizeof args, "%s --iterations 1080", twelve);
    double want = sim_json_number(args, "iteration_time_s");
    CU_ASSERT_EQUAL(sim_json_number(args, "steady_cycle"), 12);
    NEAR(sim_json_number(twelve, "iteration_time_s"), want);
    CU_ASSERT(fabs(want - 24) > 0.1);
    /* a run grows within the memory budget: under --max-memory 22e6 the 26 iterations of this
     * replicated default (refused with --iterations 26) and the growth past them are not run; the
     * generator's 4 are */
    const char *tight = "--kind pipedream --ranks 12 --microbatches 31 --tcomm 2 --replicas-stage 1=3 --trace "
                        "--max-memory 22e6";
    CU_ASSERT_EQUAL(sim_json_number(tight, "iterations"), 4);
    snprintf(args, sizeof args, "%s simulate %s --iterations 26 --no-db", PIPELAB_BIN, tight);
    char *out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(args, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--max-memory"));
    free(out);
    /* a replicated stage with m past 256 keeps its max(16, 2 x replicas) iterations (the room of
     * microbatches is the growth's, not theirs): one stage seven ways, m (tF + tB) / 7 */
    CU_ASSERT_DOUBLE_EQUAL(sim_json_number("--kind pipedream --ranks 1 --microbatches 300 --tf 1 --tb 2 --replicas-stage 0=7",
                                           "iteration_time_s"), 300.0 * 3 / 7, 1e-6); /* JSON's 9 digits */
    /* a guess of the period past the room (the replicas' lcm: 6,178 iterations for 1,365) runs
     * the room's iterations, not none: stage 2's m (F + B) = 3 x 21 s, where 16 read 39 s */
    f = fopen(csv, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("stage,tf,tb\n0,1,2\n1,2,1\n2,8,13\n3,1,0.6666666666666666\n4,5,9\n5,1.5,0.5\n6,0.5,4\n7,0.75,2\n"
          "8,4.5,1.3333333333333333\n9,7,3\n10,2.25,1\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--kind 2bw --ranks 11 --microbatches 3 --stage-costs %s --tcomm 2 --replicas-stage 1=3 "
             "--replicas-stage 0=8 --replicas-stage 8=6 --replicas-stage 4=8 --replicas-stage 3=8 --replicas-stage 6=5 "
             "--replicas-stage 9=3 --replicas-stage 10=2 --replicas-stage 7=7", csv);
    NEAR(sim_json_number(args, "iteration_time_s"), 3 * (8 + 13));
    free(csv);
    free(dir);
}

/* --time-per: by default the flag times are a rank's share, so 1F1B and interleaved with v
 * chunks simulate one model, and interleaved reaches Megatron's (m + (p-1)/v)(tF + tB) against
 * 1F1B's (m + p - 1)(tF + tB); --time-per stage gives every chunk the whole times, a model v times
 * larger: (v m + p - 1)(tF + tB). Weights follow the same rule (--param-bytes), the boundary
 * activation does not. */
static void test_time_per(void) {
    const int p = 4, m = 8;
    const double tf = 1, tb = 2;
    char args[256];
    snprintf(args, sizeof args, "--kind 1f1b --ranks %d --microbatches %d --tf %g --tb %g", p, m, tf, tb);
    CU_ASSERT_DOUBLE_EQUAL(sim_json_number(args, "iteration_time_s"), (m + p - 1) * (tf + tb), 1e-9);
    for (int v = 2; v <= 4; v *= 2) {
        for (int per_stage = 0; per_stage <= 1; per_stage++) {
            snprintf(args, sizeof args, "--kind interleaved --chunks %d --ranks %d --microbatches %d --tf %g --tb %g%s", v, p,
                     m, tf, tb, per_stage ? " --time-per stage" : "");
            double want = per_stage ? (v * m + p - 1) * (tf + tb) : (m + (p - 1.0) / v) * (tf + tb);
            CU_ASSERT_DOUBLE_EQUAL(sim_json_number(args, "iteration_time_s"), want, 1e-9);
        }
    }
    /* explicit rank equals the default; zbv holds 2 stages per rank */
    snprintf(args, sizeof args, "--kind zbv --ranks %d --microbatches %d --tf 1 --ti 1 --tw 1 --time-per rank", p, m);
    double zbv_rank = sim_json_number(args, "iteration_time_s");
    snprintf(args, sizeof args, "--kind zbv --ranks %d --microbatches %d --tf 1 --ti 1 --tw 1 --time-per stage", p, m);
    CU_ASSERT_DOUBLE_EQUAL(sim_json_number(args, "iteration_time_s"), 2 * zbv_rank, 1e-9);
    /* weights: per rank the same bytes whatever v; per stage v times as many */
    const char *mem = "--ranks 4 --microbatches 8 --param-bytes 1000 --dtype-bytes 4 --optimizer-bytes 8";
    snprintf(args, sizeof args, "--kind 1f1b %s", mem);
    double one = sim_json_number(args, "peak_mem_bytes");
    CU_ASSERT(one > 0);
    snprintf(args, sizeof args, "--kind interleaved --chunks 2 %s", mem);
    CU_ASSERT_DOUBLE_EQUAL(sim_json_number(args, "peak_mem_bytes"), one, 0.5);
    snprintf(args, sizeof args, "--kind interleaved --chunks 2 %s --time-per stage", mem);
    CU_ASSERT_DOUBLE_EQUAL(sim_json_number(args, "peak_mem_bytes"), 2 * one, 0.5);
    /* refusals name the flag */
    static const struct { const char *args, *msg; } bad[] = {
        {"--kind 1f1b --ranks 2 --microbatches 2 --time-per layer --no-db", "--time-per: must be rank or stage"},
        {"--kind 1f1b --ranks 2 --microbatches 2 --time-per rank --model uniform:layers=4,fwd_s=1e-3 --no-db", "--time-per"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s simulate %s", PIPELAB_BIN, bad[i].args);
        char *out = NULL;
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, bad[i].msg));
        free(out);
    }
}

/* The CLI stores the run in the database given by --db and writes the Chrome trace file. */
static void test_cli_outputs(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "runs.db"), *tj = pl_test_path(dir, "trace.json");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s simulate --kind zb-h1 --ranks 2 --microbatches 3 --ti 1 --tw 1 --blocking-comm --tcomm 0.5 "
             "--trace --trace-json %s --db %s --tag unit", PIPELAB_BIN, tj, db);
    char *out = NULL;
    int rc = pl_test_run(cmd, &out);
    if (rc != 0) fprintf(stderr, "\n%s -> %d\n%s\n", cmd, rc, out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(pl_test_exists(db));
    CU_ASSERT(pl_test_exists(tj));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "1SEND_B2"));
    free(out);
    char *text = NULL;
    size_t len = 0;
    pl_err e;
    CU_ASSERT_EQUAL(pl_read_file(tj, 1 << 24, &text, &len, &e), PL_OK);
    if (text) CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"name\":\"0W2\""));
    free(text);
    free(db);
    free(tj);
    free(dir);
}

void pl_test_register(void) {
    static const pl_test_case cases[] = {
        {"gpipe and 1f1b closed form", test_gpipe_1f1b_closed_form},
        {"interleaved Megatron bubble", test_interleaved_megatron},
        {"zero bubble sizes", test_zero_bubble_sizes},
        {"communication hand-computed", test_comm_hand_computed},
        {"blocking comm, asynchronous sends and FIFO links", test_blocking_and_fifo},
        {"shared inter-node link", test_shared_inter_link},
        {"iterations", test_iterations},
        {"sync bubble over the whole run", test_sync_window_whole_run},
        {"async steady-state and whole-run closed forms", test_async_steady_state_closed_form},
        {"async steady state on unequal stages: the slowest stage, busy + idle = window", test_async_steady_state_unequal},
        {"async bubble invariant in iterations", test_async_bubble_iteration_invariance},
        {"async steady state: whole cycles", test_async_cycle},
        {"async steady state: a drain sooner than estimated", test_async_early_drain},
        {"simulate grows a run whose gaps did not repeat", test_cli_grows},
        {"memory", test_memory},
        {"recompute", test_recompute},
        {"replicas all-reduce", test_replicas_allreduce},
        {"determinism and stochastic", test_determinism_and_stochastic},
        {"the median of stochastic runs: the seeds' median, longer on balanced ranks", test_median_run},
        {"the ranks' drift: one factor a stream a run, the closed form of its seed", test_rank_drift},
        {"the states term: the ranks' speeds a row a run (the backwards' apart where given), the median of the rows' runs", test_speed_draws},
        {"the sharing term: actions alone at their ratio, processor sharing's closed forms", test_sharing_term},
        {"the sharing term per class: each class alone and beside the other at its ratios", test_sharing_term_per_class},
        {"trace export", test_trace_export},
        {"stage csv", test_stage_csv},
        {"stage csv bytes: whole, at most 4.6e18, after a byte order mark", test_stage_csv_bytes},
        {"a compute-only order's own REDUCE_GRADs are not walked twice", test_compute_only_reduce_grad},
        {"library errors", test_library_errors},
        {"compute-only runs equal lowered runs", test_compute_only_equals_lowered},
        {"compute-only deadlock names the cycle", test_compute_only_deadlock},
        {"cli", test_cli},
        {"cli outputs", test_cli_outputs},
        {"--time-per rank and stage", test_time_per},
        {NULL, NULL},
    };
    pl_test_suite("sim", cases);
    { void sim_model_tests_register(void); sim_model_tests_register(); } /* test_sim_model.c */
    { void sim_limits_tests_register(void); sim_limits_tests_register(); } /* test_limits.c */
    { void sim_replicas_tests_register(void); sim_replicas_tests_register(); } /* test_replicas.c */
    { void sim_setup_tests_register(void); sim_setup_tests_register(); } /* test_setup.c */
    { void sim_comm_tests_register(void); sim_comm_tests_register(); } /* test_sim_comm.c */
    { void sim_layout_tests_register(void); sim_layout_tests_register(); } /* test_layout.c */
    { void sim_reuse_tests_register(void); sim_reuse_tests_register(); } /* test_reuse.c */
    { void sim_agree_tests_register(void); sim_agree_tests_register(); } /* test_agree.c */
}
