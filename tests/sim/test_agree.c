/* test_agree.c: one partition, read by the planner, the cost model and the simulator alike. The
 * predictions the planner attaches to a partition equal what the cost model computes for the
 * same partition (cost_partition_eval, cost_stage_memory) and what the simulator measures on it
 * (busy time, stashed microbatches, memory per rank); a partition written by
 * `pipelab partition -o` reads back as the same value, and the simulator takes it as it is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pl_sched.h"
#include "pl_test.h"
#include "sim.h"
#include "sim_test.h"

void sim_agree_tests_register(void);

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), 1e-9 * (1.0 + fabs((double)(b))))

/* A transformer: an embedding without compute, equal blocks, a heavy head (uneven layers). */
#define AGREE_MODEL "transformer:layers=8,hidden=256,heads=4,seq=128,vocab=30000,microbatch=1"

/* The model on a preset, as the planner sees it: its layer table and topology. */
typedef struct agree_fix {
    cost_model *m;
    cost_hw hw;
    cost_opts o;
    cost_part_layer *y;
    cost_part_topo t;
} agree_fix;

/* Opens AGREE_MODEL on preset hw into f; returns PL_OK or the error (reported through CUnit). */
static int agree_open(agree_fix *f, const char *hw) {
    pl_err e;
    pl_err_clear(&e);
    memset(f, 0, sizeof *f);
    f->m = cost_model_open(AGREE_MODEL, &e);
    int rc = f->m ? cost_hw_load(&f->hw, hw, &e) : PL_EINPUT;
    if (rc == PL_OK) {
        cost_opts_init(&f->o, f->m);
        rc = cost_part_layers_from_model(f->m, &f->hw, &f->o, &f->y, &e);
    }
    if (rc == PL_OK) cost_part_topo_from_hw(&f->hw, &f->t);
    if (rc != PL_OK) fprintf(stderr, "\n  %s on %s: %s\n", AGREE_MODEL, hw, e.msg);
    CU_ASSERT_EQUAL(rc, PL_OK);
    return rc;
}

static void agree_close(agree_fix *f) {
    free(f->y);
    cost_model_free(f->m);
}

/* Checks the planner's predictions of p (one replica per stage) against the cost model on m:
 * compute, parameter and stash bytes per stage from cost_partition_eval, memory from
 * cost_stage_memory under the weight policy w with the planner's in-flight count. Fills st. */
static void agree_cost(const cost_partition *p, const cost_model *m, const cost_hw *hw, const cost_opts *o,
                       sched_weights w, cost_stage *st) {
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(cost_partition_eval(p, m, hw, o, st, &e), PL_OK);
    for (int q = 0; q < p->stages; q++) {
        const cost_stage_pred *pr = &p->pred->stage[q];
        NEAR(st[q].f_s + st[q].b_s, pr->compute_s);
        NEAR((double)st[q].param_bytes, pr->param_bytes);
        NEAR((double)st[q].stash_bytes, pr->stash_bytes);
        cost_memory mem = {0};
        CU_ASSERT_EQUAL(cost_stage_memory(&st[q], m, o, w, SCHED_RECOMPUTE_NONE, pr->inflight, &mem, &e), PL_OK);
        NEAR((double)(mem.weights_bytes + mem.activation_bytes), pr->mem_bytes);
    }
}

/* Simulates schedule `kind` (rank q holds stage q) with mb microbatches on p and checks, per
 * rank, the simulator against the planner: busy time = mb x compute_s per iteration (plus the
 * optimizer step a flush schedule runs once an iteration, which the planner leaves out; an
 * simulated PipeDream run's steady-state busy time holds none), the most microbatches
 * stashed = the planner's in-flight count, and memory beyond gradients and optimizer state
 * (peak - static + one weight version) = the planner's mem_bytes. */
static void agree_sim(const char *kind, int mb, const cost_partition *p, const cost_model *m, const cost_hw *hw,
                      const cost_opts *o) {
    sched *s = sim_test_lowered(kind, p->stages, mb, 0, 0);
    if (!s) return;
    pl_err e;
    pl_err_clear(&e);
    sim_model sm;
    CU_ASSERT_EQUAL_FATAL(sim_model_init(&sm, s, m, p, hw, o, &e), PL_OK);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(sim_test_run_model(s, &sm, &r, &e), PL_OK);
    double iters = r.steady_state ? r.window_s / r.iteration_time_s : 1.0;
    for (int q = 0; q < p->stages; q++) {
        const cost_stage_pred *pr = &p->pred->stage[q];
        const sim_rank_stats *k = &r.rank[q];
        /* the planner leaves the optimizer step out; a flush schedule runs it once an iteration */
        double step = s->weights == SCHED_WEIGHTS_FLUSH ? sm.step_s[q] : 0.0;
        NEAR(k->busy_s, iters * (mb * pr->compute_s + step));
        CU_ASSERT_EQUAL(k->peak_stash_mbs, pr->inflight);
        NEAR((double)(k->peak_bytes - k->static_bytes) + pr->param_bytes, pr->mem_bytes);
    }
    sim_result_free(&r);
    sim_model_free(&sm);
    sched_free(s);
}

/* GPipe-style balancing, 1F1B's memory rule (one weight version, p - s microbatches in flight on
 * stage s): the planner, the cost model and a 1F1B simulation give the same numbers. */
static void test_balance_agrees(void) {
    agree_fix f;
    if (agree_open(&f, "h100") != PL_OK) {
        agree_close(&f);
        return;
    }
    pl_err e;
    cost_balance_opts bo = {.stages = 4};
    cost_partition *p = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_balance(f.y, f.m->n, &bo, &p, &e), PL_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p->pred);
    cost_stage st[4];
    agree_cost(p, f.m, &f.hw, &f.o, SCHED_WEIGHTS_FLUSH, st);
    agree_sim("1f1b", 8, p, f.m, &f.hw, &f.o);
    /* the split is what sim_model_balance hands the simulator */
    cost_partition *b = sim_model_balance(f.m, &f.hw, &f.o, 4, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (int q = 0; q <= 4; q++) CU_ASSERT_EQUAL(b->bound[q], p->bound[q]);
    cost_partition_free(b);
    cost_partition_free(p);
    agree_close(&f);
}

/* PipeDream's planner, straight pipeline: its memory rule (ceil(workers from s on / r) versions
 * of weights and stashes) against weight stashing in the cost model and in a simulated
 * PipeDream (async 1F1B) run. */
static void test_pipedream_agrees(void) {
    agree_fix f;
    if (agree_open(&f, "h100") != PL_OK) {
        agree_close(&f);
        return;
    }
    pl_err e;
    cost_pipedream_opts po = {.workers = 4, .straight = 1};
    cost_partition *p = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(f.y, f.m->n, &f.t, &po, &p, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(p->stages, 4);
    cost_stage st[4];
    agree_cost(p, f.m, &f.hw, &f.o, SCHED_WEIGHTS_STASH, st);
    agree_sim("pipedream", 8, p, f.m, &f.hw, &f.o);
    cost_partition_free(p);
    agree_close(&f);
}

/* Returns 1 when a and b are the same partition: stages, bounds, replicas, provenance and the
 * stage times (to the 9 digits a file keeps). */
static int same_partition(const cost_partition *a, const cost_partition *b) {
    if (a->stages != b->stages || strcmp(a->method, b->method) || strcmp(a->model, b->model) ||
        strcmp(a->hardware, b->hardware) || !a->pred != !b->pred)
        return 0;
    for (int q = 0; q < a->stages; q++) {
        if (a->bound[q + 1] != b->bound[q + 1] || a->replicas[q] != b->replicas[q]) return 0;
        double x = a->pred ? a->pred->stage[q].time_s : 0, y = b->pred ? b->pred->stage[q].time_s : 0;
        if (fabs(x - y) > 1e-8 * fabs(x)) return 0;
    }
    return a->bound[0] == b->bound[0];
}

/* `pipelab partition -o FILE` writes the partition the planner returns for the same inputs:
 * the file reads back as the same value, writing that value gives the file's bytes again, and
 * the simulator's reader takes it unchanged. */
static void test_partition_file_roundtrip(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s partition --model '%s' --hardware cluster-a --workers 8 -o %s/p.part", PIPELAB_BIN,
             AGREE_MODEL, dir);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    free(out);
    char *path = pl_test_path(dir, "p.part");
    pl_err e;
    pl_err_clear(&e);
    cost_partition *q = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_partition_read(path, &q, &e), PL_OK);
    /* the planner on the same inputs */
    agree_fix f;
    CU_ASSERT_EQUAL_FATAL(agree_open(&f, "cluster-a"), PL_OK);
    cost_pipedream_opts po = {.workers = 8};
    cost_partition *p = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(f.y, f.m->n, &f.t, &po, &p, &e), PL_OK);
    snprintf(p->model, sizeof p->model, "%s", f.m->name);
    snprintf(p->hardware, sizeof p->hardware, "%s", f.hw.name);
    CU_ASSERT(same_partition(p, q));
    CU_ASSERT_EQUAL(cost_partition_noam(q), cost_partition_noam(p));
    /* the file keeps the stage times, not the transfers: what is read predicts the slowest stage
     * until the planner's cost model rates it again, which gives back all its predictions */
    double slowest = 0;
    for (int k = 0; k < q->stages; k++)
        if (p->pred->stage[k].time_s > slowest) slowest = p->pred->stage[k].time_s;
    NEAR(q->pred->bottleneck_s, slowest);
    CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(q, f.y, f.m->n, &f.t, COST_ALLREDUCE_RING, NULL, &e), PL_OK);
    CU_ASSERT_EQUAL(q->pred->bottleneck_s, p->pred->bottleneck_s);
    CU_ASSERT_EQUAL(q->pred->peak_mem_bytes, p->pred->peak_mem_bytes);
    CU_ASSERT_EQUAL(q->pred->data_parallel_s, p->pred->data_parallel_s);
    for (int k = 0; k < q->stages; k++) {
        const cost_stage_pred *x = &q->pred->stage[k], *z = &p->pred->stage[k];
        CU_ASSERT(x->first_worker == z->first_worker && x->time_s == z->time_s && x->transfer_in_s == z->transfer_in_s &&
                  x->mem_bytes == z->mem_bytes && x->inflight == z->inflight);
    }
    /* byte for byte: the planner's value written, and the value read written again */
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(pl_read_file(path, (size_t)1 << 20, &text, &len, &e), PL_OK);
    pl_buf a, b;
    pl_buf_init(&a);
    pl_buf_init(&b);
    cost_partition_write(p, &a);
    cost_partition_write(q, &b);
    CU_ASSERT_STRING_EQUAL(a.data, text);
    CU_ASSERT_STRING_EQUAL(b.data, text);
    /* the simulator reads the same value */
    sched *s = sim_test_lowered("1f1b", q->stages, 4, 0, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    cost_partition *r = sim_partition_read(path, s, f.m->n, f.m->name, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(same_partition(r, q));
    cost_partition_free(r);
    sched_free(s);
    pl_buf_free(&a);
    pl_buf_free(&b);
    free(text);
    cost_partition_free(p);
    cost_partition_free(q);
    agree_close(&f);
    remove(path);
    free(path);
    rmdir(dir);
    free(dir);
}

/* Registers the suite (called from test_sim.c's pl_test_register). */
void sim_agree_tests_register(void) {
    static const pl_test_case cases[] = {
        {"balance: planner = cost model = simulator", test_balance_agrees},
        {"pipedream: planner = cost model = simulator", test_pipedream_agrees},
        {"partition -o reads back the same", test_partition_file_roundtrip},
        {NULL, NULL},
    };
    pl_test_suite("sim_agree", cases);
}
