/* test_setup.c: a simulation's setup through the library API (sim_setup.c): replicas per
 * stage, the replicated schedule's iteration count and regeneration, and the model side of a
 * run (model, hardware, partition and the adapter over them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"
#include "pl_sched.h"
#include "sim.h"

/* Returns kind generated on p ranks with m microbatches (generator default iterations),
 * validated and lowered, or NULL after a failed assertion. */
static sched *lowered(const char *kind, int p, int m) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts o = {p, m, 0, 0, SCHED_RECOMPUTE_NONE};
    sched *g = sched_generate(kind, &o, &e);
    CU_ASSERT_PTR_NOT_NULL(g);
    if (!g) return NULL;
    CU_ASSERT_EQUAL(sched_validate(g, &e), PL_OK);
    sched *l = sched_lower(g, &e);
    sched_free(g);
    CU_ASSERT_PTR_NOT_NULL(l);
    return l;
}

/* The iteration rule: max(16, 2 x widest replicas) for an asynchronous schedule with a
 * replicated stage, unless the iterations are given, or two cycles of its steady state past the
 * fill and the drain when more (sched_async_iterations: 10 stages, m 1, stage 0 three ways: a
 * cycle of lcm(10, 3) = 30 iterations, a drain of 12 workers - 1 = 11 iterations, 72; stages of
 * 1, 9 and 1 replicas, m 4: 1 + ceil(10 / 4) + 2 x 9 = 22); nothing else changes it. */
static void test_replicated_iterations(void) {
    const int vgg[] = {14, 2}, narrow[] = {3, 1}, wide[] = {1, 9, 1}, none[] = {1, 1};
    CU_ASSERT_EQUAL(sim_replicated_iterations(0, SCHED_WEIGHTS_STASH, vgg, 2, 4), 28);
    CU_ASSERT_EQUAL(sim_replicated_iterations(0, SCHED_WEIGHTS_STASH, narrow, 2, 4), SIM_REPLICATED_ITERS_MIN);
    CU_ASSERT_EQUAL(SIM_REPLICATED_ITERS_MIN, 16);
    CU_ASSERT_EQUAL(sim_replicated_iterations(0, SCHED_WEIGHTS_2BW, wide, 3, 4), 22); /* 1 + 3 + 2 x 9 */
    CU_ASSERT_EQUAL(sim_replicated_iterations(5, SCHED_WEIGHTS_STASH, vgg, 2, 4), 5);   /* given */
    CU_ASSERT_EQUAL(sim_replicated_iterations(0, SCHED_WEIGHTS_FLUSH, vgg, 2, 4), 0);   /* synchronous */
    CU_ASSERT_EQUAL(sim_replicated_iterations(0, SCHED_WEIGHTS_STASH, none, 2, 4), 0);  /* not replicated */
    const int ten[] = {3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    CU_ASSERT_EQUAL(sim_replicated_iterations(0, SCHED_WEIGHTS_STASH, ten, 10, 1), 72);
}

/* --replicas then --replicas-stage, in order, over what is there; a stage past the schedule's
 * is refused with the flag's text. */
static void test_replicas_apply(void) {
    pl_err e;
    pl_err_clear(&e);
    const int stage[] = {1, 1}, count[] = {3, 4};
    int rep[3] = {1, 5, 1};
    sim_replica_spec keep = {0, 0, NULL, NULL};
    CU_ASSERT_EQUAL(sim_replicas_apply(&keep, 3, rep, &e), PL_OK);
    CU_ASSERT(rep[0] == 1 && rep[1] == 5 && rep[2] == 1);
    sim_replica_spec both = {2, 2, stage, count};
    CU_ASSERT_EQUAL(sim_replicas_apply(&both, 3, rep, &e), PL_OK);
    CU_ASSERT(rep[0] == 2 && rep[1] == 4 && rep[2] == 2); /* the last flag for a stage wins */
    const int far[] = {5}, two[] = {2};
    sim_replica_spec past = {0, 1, far, two};
    CU_ASSERT_EQUAL(sim_replicas_apply(&past, 3, rep, &e), PL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "--replicas-stage 5=2: the schedule has stages 0..2");
}

/* A generated asynchronous schedule with a replicated stage comes back with the rule's
 * iterations, lowered; a loaded one (no kind) or one without replicas stays as it is. */
static void test_replicated_schedule(void) {
    pl_err e;
    pl_err_clear(&e);
    sched_gen_opts g = {2, 4, 0, 0, SCHED_RECOMPUTE_NONE};
    const int rep[] = {3, 1}, ones[] = {1, 1};
    sched *s = lowered("pipedream", 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sched *before = s;
    CU_ASSERT_EQUAL(sim_replicated_schedule(NULL, &g, NULL, rep, &s, &e), PL_OK);
    CU_ASSERT_PTR_EQUAL(s, before);
    CU_ASSERT_EQUAL(sim_replicated_schedule("pipedream", &g, NULL, ones, &s, &e), PL_OK);
    CU_ASSERT_PTR_EQUAL(s, before);
    CU_ASSERT_EQUAL(sim_replicated_schedule("pipedream", &g, NULL, rep, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(s->iterations, SIM_REPLICATED_ITERS_MIN);
    CU_ASSERT_EQUAL(s->lowered, 1);
    CU_ASSERT_EQUAL(s->stages, 2);
    g.iterations = 3;
    CU_ASSERT_EQUAL(sim_replicated_schedule("pipedream", &g, NULL, rep, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(s->iterations, 3);
    sched_free(s);
}

/* Builds spec's model side of s into ms; returns the code and leaves the message in e. */
static int build(sim_model_setup *ms, const sim_model_spec *spec, const sched *s, pl_err *e) {
    pl_err_clear(e);
    return sim_model_setup_build(ms, spec, s, e);
}

/* A model with an even split gives the expected stage bounds; replicas, hardware and cost
 * options apply; a split, a balanced split, and their refusals. */
static void test_model_setup(void) {
    pl_err e;
    sched *s = lowered("1f1b", 3, 6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_model_spec spec;
    sim_model_spec_init(&spec);
    spec.model = "uniform:layers=8,fwd_s=1e-3";
    sim_model_setup ms;
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(ms.psource, "even");
    const int even[] = {0, 3, 6, 8}; /* 8 layers over 3 stages: the first 8 % 3 get one more */
    for (int q = 0; q <= 3; q++) CU_ASSERT_EQUAL(ms.sm.bound[q], even[q]);
    for (int q = 0; q < 3; q++) CU_ASSERT_EQUAL(ms.sm.replicas[q], 1);
    CU_ASSERT_EQUAL(ms.have_hw, 0);
    sim_model_setup_free(&ms);

    const int stage[] = {1}, count[] = {3};
    spec.replicas = (sim_replica_spec){2, 1, stage, count};
    spec.hardware = "h100";
    spec.microbatch_size = 4;
    spec.precision = "bf16";
    spec.w_stash_fraction = 0.25;
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_OK);
    CU_ASSERT(ms.sm.replicas[0] == 2 && ms.sm.replicas[1] == 3 && ms.sm.replicas[2] == 2);
    CU_ASSERT_EQUAL(ms.p->replicas[1], 3);
    CU_ASSERT_EQUAL(ms.have_hw, 1);
    CU_ASSERT_STRING_EQUAL(ms.sm.hw.name, "h100");
    CU_ASSERT_EQUAL(ms.co.microbatch_size, 4);
    CU_ASSERT_EQUAL(ms.co.precision, (cost_precision)cost_precision_parse("bf16"));
    CU_ASSERT_DOUBLE_EQUAL(ms.co.w_stash_fraction, 0.25, 0);
    sim_model_setup_free(&ms);

    sim_model_spec_init(&spec);
    spec.model = "uniform:layers=8,fwd_s=1e-3";
    spec.split = "0,1,2,8";
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(ms.psource, "split");
    CU_ASSERT(ms.sm.bound[1] == 1 && ms.sm.bound[2] == 2 && ms.sm.bound[3] == 8);
    sim_model_setup_free(&ms);
    spec.split = "0,4,8";
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "--split: the partition has 2 stages but the schedule (1f1b, 3 ranks) has 3 stages");
    sim_model_setup_free(&ms);

    spec.split = NULL;
    spec.balance = 1;
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(ms.psource, "balance");
    CU_ASSERT(ms.sm.bound[0] == 0 && ms.sm.bound[3] == 8);
    sim_model_setup_free(&ms);

    spec.balance = 0;
    spec.w_stash_fraction = 2;
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "the W stash fraction must be in [0, 1] (got 2)");
    sim_model_setup_free(&ms);
    spec.w_stash_fraction = -1;
    const int far[] = {3}, two[] = {2};
    spec.replicas = (sim_replica_spec){0, 1, far, two};
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "--replicas-stage 3=2: the schedule has stages 0..2");
    sim_model_setup_free(&ms);
    sched_free(s);
}

/* A partition file: its stages and replicas, its path and source; a file whose stage count
 * differs from the schedule's is refused naming the file. */
static void test_model_setup_partition_file(void) {
    static const char text[] = "pipelab-partition 1\nmethod balance\nlayers 8\nworkers 3\n"
                               "stage 0: layers 0-4 replicas 2\nstage 1: layers 5-7 replicas 1\n";
    char *dir = pl_test_tmpdir();
    char *path = pl_test_path(dir, "part.txt");
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(pl_write_file(path, text, sizeof text - 1, &e), PL_OK);
    sim_model_spec spec;
    sim_model_spec_init(&spec);
    spec.model = "uniform:layers=8,fwd_s=1e-3";
    spec.partition = path;
    sim_model_setup ms;
    sched *s = lowered("1f1b", 2, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(ms.psource, "file");
    CU_ASSERT(ms.sm.bound[1] == 5 && ms.sm.bound[2] == 8);
    CU_ASSERT(ms.sm.replicas[0] == 2 && ms.sm.replicas[1] == 1);
    sim_model_setup_free(&ms);
    sched_free(s);
    s = lowered("1f1b", 3, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(build(&ms, &spec, s, &e), PL_EINPUT);
    char want[1024];
    snprintf(want, sizeof want, "%s: the partition has 2 stages but the schedule (1f1b, 3 ranks) has 3 stages", path);
    CU_ASSERT_STRING_EQUAL(e.msg, want);
    sim_model_setup_free(&ms);
    sched_free(s);
    remove(path);
    remove(dir);
    free(path);
    free(dir);
}

/* Registers the suite (called from test_sim.c's pl_test_register). */
void sim_setup_tests_register(void) {
    static const pl_test_case cases[] = {
        {"replicated iterations rule", test_replicated_iterations},
        {"replicas apply", test_replicas_apply},
        {"replicated schedule regenerated", test_replicated_schedule},
        {"model setup: even split, replicas, options, refusals", test_model_setup},
        {"model setup: partition file", test_model_setup_partition_file},
        {NULL, NULL},
    };
    pl_test_suite("sim_setup", cases);
}
