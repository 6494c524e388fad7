/* test_partition_io.c: the partition file (round trip, file:line errors), PipeDream's real
 * profiles (VGG-16, the input pseudo-layer, the cluster-a preset) and pipelab partition. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pl_test.h"
#include "test_partition.h"

/* ---------------------------------------------------------------- partition file */

/* Writes text to dir/name and returns the malloc'd path. */
static char *write_tmp(const char *dir, const char *name, const char *text) {
    char *path = pl_test_path(dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

void test_partition_file(void) {
    cost_part_layer y[5];
    for (int l = 0; l < 5; l++) y[l] = (cost_part_layer){1.0 + l, 1e6, 1e5, 1e5};
    cost_part_topo t = {2, 2, 1e10, 1e-6, 1e9, 1e-5};
    cost_pipedream_opts o = {.workers = 4};
    cost_partition *p = NULL, *q = NULL;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, 5, &t, &o, &p, &e), PL_OK);
    snprintf(p->model, sizeof p->model, "toy five");
    snprintf(p->hardware, sizeof p->hardware, "cluster-a");
    pl_buf b;
    pl_buf_init(&b);
    cost_partition_write(p, &b);
    CU_ASSERT_EQUAL_FATAL(cost_partition_parse_text(b.data, "x.part", &q, &e), PL_OK);
    CU_ASSERT_STRING_EQUAL(q->method, "pipedream");
    CU_ASSERT_STRING_EQUAL(q->model, "toy five");
    CU_ASSERT_STRING_EQUAL(q->hardware, "cluster-a");
    CU_ASSERT_EQUAL(cost_partition_layers(q), 5);
    CU_ASSERT_EQUAL(cost_partition_workers(q), 4);
    CU_ASSERT_EQUAL_FATAL(q->stages, p->stages);
    for (int s = 0; s < p->stages; s++) {
        CU_ASSERT_EQUAL(q->bound[s], p->bound[s]);
        CU_ASSERT_EQUAL((q->bound[s + 1] - 1), (p->bound[s + 1] - 1));
        CU_ASSERT_EQUAL(q->replicas[s], p->replicas[s]);
        CU_ASSERT_DOUBLE_EQUAL(q->pred->stage[s].time_s, p->pred->stage[s].time_s, 1e-8 * p->pred->stage[s].time_s);
    }
    /* Writing what was read gives the same text back. */
    CU_ASSERT_EQUAL(cost_plan_evaluate(q, y, 5, &t, COST_ALLREDUCE_RING, NULL, &e), PL_OK);
    pl_buf b2;
    pl_buf_init(&b2);
    cost_partition_write(q, &b2);
    CU_ASSERT_STRING_EQUAL(b2.data, b.data);
    /* What was read is what the simulator takes, as it is. */
    CU_ASSERT_EQUAL(cost_partition_check(q, 5, &e), PL_OK);
    pl_buf_free(&b);
    pl_buf_free(&b2);
    cost_partition_free(p);
    cost_partition_free(q);

    /* A hand-written file with comments, and bad files naming file:line. */
    char *dir = pl_test_tmpdir();
    char *ok = write_tmp(dir, "ok.part",
                         "# comment\n\npipelab-partition 1\nmodel vgg16   # provenance\nstage 0: layers 0-12 replicas 15\n"
                         "stage 1: layers 13-40 replicas 1\n");
    CU_ASSERT_EQUAL_FATAL(cost_partition_read(ok, &q, &e), PL_OK);
    CU_ASSERT_EQUAL(cost_partition_workers(q), 16);
    CU_ASSERT_EQUAL(cost_partition_layers(q), 41);
    CU_ASSERT_EQUAL(cost_partition_noam(q), 2);
    CU_ASSERT_STRING_EQUAL(q->method, "manual");
    cost_partition_free(q);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"", "bad.part:1: empty file"},
        {"pipelab-schedule 1\n", "bad.part:1: not a partition file"},
        {"pipelab-partition 2\n", "bad.part:1: unsupported partition file version '2'"},
        {"pipelab-partition 1\n", "bad.part:1: no 'stage' lines"},
        {"pipelab-partition 1\nstage 0: layers 0-3 replicas 2\nstage 1: layers 5-6 replicas 1\n",
         "bad.part:3: stage 1 starts at layer 5 but must start at layer 4"},
        {"pipelab-partition 1\nstage 1: layers 0-3 replicas 2\n", "bad.part:2: stage number '1' out of order"},
        {"pipelab-partition 1\nstage 0: layers 0-3 replicas 0\n", "bad.part:2: replicas must be"},
        {"pipelab-partition 1\nstage 0: layers 3-1 replicas 1\n", "bad.part:2: layer range 3-1 is empty"},
        {"pipelab-partition 1\nstage 0: layers 0-x replicas 1\n", "bad.part:2: layer range must be"},
        {"pipelab-partition 1\nstage 0 layers 0-3 replicas 1\n", "bad.part:2: expected 'stage K:"},
        {"pipelab-partition 1\ncolour blue\n", "bad.part:2: unknown key 'colour'"},
        {"pipelab-partition 1\nlayers 4\nlayers 4\n", "bad.part:3: duplicate 'layers' line"},
        {"pipelab-partition 1\nlayers 9\nstage 0: layers 0-3 replicas 1\n", "bad.part:3: the stages cover layers 0-3 but the file says 'layers 9'"},
        {"pipelab-partition 1\nworkers 3\nstage 0: layers 0-3 replicas 2\n", "bad.part:3: the stages use 2 workers but the file says 'workers 3'"},
        {"pipelab-partition 1\nstage 0: layers 0-3 replicas 1 time_s -2\n", "bad.part:2: time_s must be"},
        {"pipelab-partition 1\nmethod\n", "bad.part:2: 'method' needs a value"},
        {NULL, NULL},
    };
    for (int k = 0; bad[k].text; k++) {
        char *path = write_tmp(dir, "bad.part", bad[k].text);
        pl_err_clear(&e);
        int rc = cost_partition_read(path, &q, &e);
        CU_ASSERT_EQUAL(rc, PL_EINPUT);
        const char *slash = strrchr(e.msg, '/');
        if (!slash || !strstr(slash, bad[k].want)) {
            fprintf(stderr, "\ncase %d: want '%s' got '%s'\n", k, bad[k].want, e.msg);
            CU_FAIL("bad partition file message");
        }
        remove(path);
        free(path);
    }
    CU_ASSERT_EQUAL(cost_partition_read("/nonexistent/x.part", &q, &e), PL_EIO);
    remove(ok);
    free(ok);
    rmdir(dir);
    free(dir);
}

/* ---------------------------------------------------------------- real profile */

/* Opens PipeDream's published VGG-16 profile (its absence fails the calling test). */
static cost_model *open_vgg16(pl_err *e) {
    const char *path = PIPELAB_PIPEDREAM_DIR "/vgg16.graph.txt";
    CU_ASSERT_FATAL(pl_test_exists(path));
    pl_err_clear(e);
    cost_model *m = cost_model_open(path, e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    return m;
}

/* The all-reduce of P bytes over m replicas on a link of bandwidth B and latency lat, in closed
 * form (cost.h, cost_allreduce_model): ring 2 (m-1)/m P/B + 2 (m-1) lat, PipeDream's code
 * 4 (m-1) P / (m B) (no latency); m = 1 costs nothing. */
static double ref_allreduce_s(cost_allreduce_model ar, int m, double P, double B, double lat) {
    if (m <= 1) return 0.0;
    if (ar == COST_ALLREDUCE_PIPEDREAM) return 4.0 * (m - 1) * P / (m * B);
    return 2.0 * (m - 1) / m * P / B + 2.0 * (m - 1) * lat;
}

/* Sums time_s (tsum) and param_bytes (psum) of layers [i, j). */
static void ref_sums(const cost_part_layer *y, int i, int j, double *tsum, double *psum) {
    *tsum = *psum = 0;
    for (int l = i; l < j; l++) *tsum += y[l].time_s, *psum += y[l].param_bytes;
}

/* Data parallelism over all 16 workers of 4 servers of 4 (the planner's baseline, cost.h): one
 * stage of every layer, its all-reduce PipeDream's two levels on > 1 server, over the g = 4
 * replicas one server holds on the intra link plus over the s = 4 servers on the inter link, each
 * of all the parameter bytes P; time (sum T + S) / 16. */
static double ref_dp16_s(const cost_part_layer *y, int n, const cost_part_topo *t, cost_allreduce_model ar) {
    double T, P;
    ref_sums(y, 0, n, &T, &P);
    double S = ref_allreduce_s(ar, 4, P, t->intra_bw_Bps, t->intra_latency_s) +
               ref_allreduce_s(ar, 4, P, t->inter_bw_Bps, t->inter_latency_s);
    return (T + S) / 16;
}

/* Returns 1 when |x - want| <= rel x |want|. */
static int near_rel(double x, double want, double rel) { return fabs(x - want) <= rel * fabs(want); }

/* Evaluates the plan bounds/replicas with the planner's cost model (cost_plan_evaluate) and
 * returns its bottleneck (INFINITY on error). */
static double eval_bottleneck(const cost_part_layer *y, int n, const cost_part_topo *t, int stages, const int *bounds,
                              const int *reps, cost_partition **keep) {
    pl_err e;
    pl_err_clear(&e);
    cost_partition *q = mk_part(stages, bounds, reps);
    double b = cost_plan_evaluate(q, y, n, t, COST_ALLREDUCE_RING, NULL, &e) == PL_OK ? q->pred->bottleneck_s : INFINITY;
    if (keep) *keep = q;
    else cost_partition_free(q);
    return b;
}

/* VGG-16 on 4 servers of 4 (PCIe inside, 10 Gbps between, no latency), 16 workers. The planner is
 * an exact program over every contiguous plan, so its bottleneck must be no larger than that of
 * any plan evaluated on its own: pure data parallelism (also against its closed form), straight
 * pipelines, and every plan of two or three stages (exhaustively: 40 cuts x 15 replica splits,
 * and 780 cut pairs x 105 replica triples). The planner's 14-2 (cut after layer 24) is then
 * derived, not copied: it is the best of all two- and three-stage plans found by that search. */
void test_vgg16_cluster(void) {
    pl_err e;
    cost_model *m = open_vgg16(&e);
    cost_hw hw;
    cost_hw_init(&hw);
    hw.devices_per_node = 4;
    hw.nodes = 4;
    hw.intra_bandwidth_Bps = 12e9;  /* PCIe */
    hw.inter_bandwidth_Bps = 1.25e9; /* 10 Gbps */
    cost_part_layer *y = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_part_layers_from_model(m, &hw, NULL, &y, &e), PL_OK);
    const int n = m->n;
    CU_ASSERT_EQUAL_FATAL(n, 41);
    cost_part_topo t;
    cost_part_topo_from_hw(&hw, &t);
    cost_pipedream_opts o = {.workers = 16};
    cost_partition *p = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, n, &t, &o, &p, &e), PL_OK);
    const double best = p->pred->bottleneck_s;
    /* one_worker_s is the sum of the layer times; data_parallel_s the closed form above */
    double T, P;
    ref_sums(y, 0, n, &T, &P);
    CU_ASSERT(near_rel(p->pred->one_worker_s, T, 1e-12));
    CU_ASSERT(near_rel(p->pred->speedup_vs_one, T / best, 1e-12));
    const double dp = ref_dp16_s(y, n, &t, COST_ALLREDUCE_RING);
    CU_ASSERT(near_rel(p->pred->data_parallel_s, dp, 1e-12));
    CU_ASSERT(near_rel(p->pred->speedup_vs_dp, dp / best, 1e-12));
    /* pure data parallelism, evaluated as a plan, is the same closed form and no better */
    CU_ASSERT(near_rel(eval_bottleneck(y, n, &t, 1, (const int[]){0, n}, (const int[]){16}, NULL), dp, 1e-12));
    CU_ASSERT(best <= dp);
    /* straight pipelines of 16 one-replica stages: the even split, and a compute-balanced one */
    int bnd[17], one[16];
    for (int s = 0; s < 16; s++) one[s] = 1;
    cost_partition *ev = cost_partition_even(n, 16, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    memcpy(bnd, ev->bound, sizeof bnd);
    cost_partition_free(ev);
    CU_ASSERT(best <= eval_bottleneck(y, n, &t, 16, bnd, one, NULL));
    cost_balance_opts bo = {.stages = 16};
    cost_partition *bal = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_plan_balance(y, n, &bo, &bal, &e), PL_OK);
    memcpy(bnd, bal->bound, sizeof bnd);
    cost_partition_free(bal);
    CU_ASSERT(best <= eval_bottleneck(y, n, &t, 16, bnd, one, NULL));
    /* every plan of two and three stages on the 16 workers */
    double best2 = INFINITY, best3 = INFINITY;
    int cut2 = -1, r2 = -1;
    for (int c = 1; c < n; c++)
        for (int r = 1; r < 16; r++) {
            double b = eval_bottleneck(y, n, &t, 2, (const int[]){0, c, n}, (const int[]){r, 16 - r}, NULL);
            if (b < best2) best2 = b, cut2 = c, r2 = r;
        }
    for (int c1 = 1; c1 < n - 1; c1++)
        for (int c2 = c1 + 1; c2 < n; c2++)
            for (int ra = 1; ra < 15; ra++)
                for (int rb = 1; ra + rb < 16; rb++) {
                    double b = eval_bottleneck(y, n, &t, 3, (const int[]){0, c1, c2, n},
                                               (const int[]){ra, rb, 16 - ra - rb}, NULL);
                    if (b < best3) best3 = b;
                }
    CU_ASSERT(best <= best2);
    CU_ASSERT(best <= best3);
    /* the best two-stage plan beats every three-stage one and is what the planner returns */
    CU_ASSERT(best2 < best3);
    char want[32];
    snprintf(want, sizeof want, "%d-%d", r2, 16 - r2);
    pl_buf b;
    pl_buf_init(&b);
    cost_plan_config(p, &b);
    CU_ASSERT_STRING_EQUAL(b.data, want);
    CU_ASSERT_STRING_EQUAL(b.data, "14-2"); /* and pinned, as on the cluster-a preset below */
    CU_ASSERT_EQUAL(p->bound[1], cut2);
    CU_ASSERT_DOUBLE_EQUAL(best, best2, 0);
    fprintf(stderr, "\n  vgg16 on 4x4 (10 Gbps): config %s, NOAM %d, %.3f ms per minibatch, %.2fx one worker, %.2fx DP\n",
            b.data, cost_partition_noam(p), p->pred->bottleneck_s * 1e3, p->pred->speedup_vs_one, p->pred->speedup_vs_dp);
    pl_buf_free(&b);
    cost_partition_free(p);
    free(y);
    cost_model_free(m);
}

/* PipeDream's input pseudo-node carries the data-loading wait as forward time: no compute. */
void test_input_pseudo_layer(void) {
    const char *text =
        "node1 -- Input -- forward_compute_time=600.000, backward_compute_time=0.000, activation_size=100.0, parameter_size=0.000\n"
        "node2 -- Linear(4, 8) -- forward_compute_time=2.000, backward_compute_time=4.000, activation_size=200.0, parameter_size=160.000\n"
        "node3 -- Inputish -- forward_compute_time=1.000, backward_compute_time=1.000, activation_size=200.0, parameter_size=0.000\n"
        "\tnode1 -- node2\n\tnode2 -- node3\n";
    pl_err e;
    pl_err_clear(&e);
    cost_model *m = cost_model_read_graph("in.txt", text, strlen(text), 1, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[0].fwd_s, 0.6, 1e-12); /* the reader keeps what the file says */
    cost_part_layer *y = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_part_layers_from_model(m, NULL, NULL, &y, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(y[0].time_s, 0.0, 0);        /* the planner drops it, as PipeDream does */
    CU_ASSERT_DOUBLE_EQUAL(y[0].out_bytes, 100.0, 0);   /* its bytes still cross a cut after it */
    CU_ASSERT_DOUBLE_EQUAL(y[1].time_s, 0.006, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(y[2].time_s, 0.002, 1e-12);  /* has a backward: a real layer */
    free(y);
    cost_model_free(m);
}

/* VGG-16 on the cluster-a preset, 16 workers. The PipeDream paper (SOSP'19 Table 1) ran 15-1
 * (stage 1 = the three Linear layers, msr-fiddle/pipedream runtime/image_classification/models/
 * vgg16/gpus=16). Under PipeDream's cost model on this published profile our planner finds 14-2
 * (conv5 block + classifier on two replicas), with 15-1 within a few percent: pinned here so that
 * a change of the cost model that moves the answer is seen. */
void test_vgg16_cluster_a_preset(void) {
    pl_err e;
    cost_model *m = open_vgg16(&e);
    cost_hw hw;
    CU_ASSERT_EQUAL_FATAL(cost_hw_load(&hw, "cluster-a", &e), PL_OK);
    cost_part_layer *y = NULL;
    CU_ASSERT_EQUAL_FATAL(cost_part_layers_from_model(m, &hw, NULL, &y, &e), PL_OK);
    CU_ASSERT_EQUAL_FATAL(m->n, 41);
    CU_ASSERT_DOUBLE_EQUAL(y[0].time_s, 0.0, 0); /* Input: 17.972 ms of data loading dropped */
    cost_part_topo t;
    cost_part_topo_from_hw(&hw, &t);
    static const cost_allreduce_model ars[2] = {COST_ALLREDUCE_RING, COST_ALLREDUCE_PIPEDREAM};
    for (int k = 0; k < 2; k++) {
        cost_pipedream_opts o = {.workers = 16, .allreduce = ars[k]};
        cost_partition *p = NULL;
        CU_ASSERT_EQUAL_FATAL(cost_plan_pipedream(y, m->n, &t, &o, &p, &e), PL_OK);
        pl_buf b;
        pl_buf_init(&b);
        cost_plan_config(p, &b);
        CU_ASSERT_STRING_EQUAL(b.data, "14-2");
        CU_ASSERT_EQUAL(p->bound[1], k == 0 ? 25 : 26);
        CU_ASSERT_DOUBLE_EQUAL(p->pred->one_worker_s, 0.672535, 1e-9);
        /* speedup_vs_dp in closed form from the layer table, for 14-2 cut before layer c (25 or
         * 26): stage 0 = layers [0, c) on workers 0-13 (4 servers, holding 4, 4, 4, 2: g = 4,
         * s = 4), S0 = AR(P0, 4, intra) + AR(P0, 4, inter), time (T0 + S0) / 14; stage 1 =
         * layers [c, 41) on workers 14-15 (one server), S1 = AR(P1, 2, intra), time (T1 + S1) / 2;
         * the cut spans servers: 2 (inter latency + out_bytes[c-1] / inter bw) / min(14, 2). The
         * bottleneck is the largest of the three; data parallelism (T + AR(P, 4, intra) +
         * AR(P, 4, inter)) / 16 (ref_dp16_s). */
        const int c = p->bound[1];
        double T0, P0, T1, P1;
        ref_sums(y, 0, c, &T0, &P0);
        ref_sums(y, c, m->n, &T1, &P1);
        double t0 = (T0 + ref_allreduce_s(ars[k], 4, P0, t.intra_bw_Bps, t.intra_latency_s) +
                     ref_allreduce_s(ars[k], 4, P0, t.inter_bw_Bps, t.inter_latency_s)) / 14;
        double t1 = (T1 + ref_allreduce_s(ars[k], 2, P1, t.intra_bw_Bps, t.intra_latency_s)) / 2;
        double x = 2 * (t.inter_latency_s + y[c - 1].out_bytes / t.inter_bw_Bps) / 2;
        double bn = fmax(t0, fmax(t1, x)), dp = ref_dp16_s(y, m->n, &t, ars[k]);
        CU_ASSERT(near_rel(p->pred->bottleneck_s, bn, 1e-12));
        CU_ASSERT(near_rel(p->pred->data_parallel_s, dp, 1e-12));
        CU_ASSERT(near_rel(p->pred->speedup_vs_dp, dp / bn, 1e-12));
        /* The paper's 15-1: every conv layer on 15 replicas, the classifier (34-40) on one. */
        cost_partition *q = mk_part(2, (const int[]){0, 34, 41}, (const int[]){15, 1});
        CU_ASSERT_EQUAL_FATAL(cost_plan_evaluate(q, y, m->n, &t, ars[k], NULL, &e), PL_OK);
        CU_ASSERT(q->pred->bottleneck_s >= p->pred->bottleneck_s);
        CU_ASSERT(q->pred->bottleneck_s < 1.1 * p->pred->bottleneck_s);
        fprintf(stderr, "\n  vgg16 cluster-a 16 (%s): %s %.3f ms (%.2fx DP); 15-1 %.3f ms (%.2fx DP)",
                k ? "pipedream" : "ring", b.data, p->pred->bottleneck_s * 1e3, p->pred->speedup_vs_dp, q->pred->bottleneck_s * 1e3,
                q->pred->speedup_vs_dp);
        pl_buf_free(&b);
        cost_partition_free(p);
        cost_partition_free(q);
    }
    free(y);
    cost_model_free(m);
}


void test_partition_cli(void) {
    CU_ASSERT_FATAL(cli_has("partition"));
    char *dir = pl_test_tmpdir();
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "%s partition --model 'uniform:layers=8,fwd_s=1e-3,bwd_s=2e-3,param_bytes=1000000,out_bytes=1000,"
             "stash_bytes=1000' --set topology.nodes=2 --set topology.devices_per_node=2 --workers 4 "
             "--method balance -o %s/p.part",
             PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "stage"));
    free(out);
    char *part = pl_test_path(dir, "p.part");
    cost_partition *q = NULL;
    pl_err e;
    CU_ASSERT_EQUAL(cost_partition_read(part, &q, &e), PL_OK);
    CU_ASSERT_EQUAL(q->stages, 4);
    CU_ASSERT_EQUAL(q->bound[1], 2);
    cost_partition_free(q);
    /* 8 uniform layers of the defaults (fwd 1 s + bwd 2 s = 3 s, no bytes) on 4 free-link workers:
     * nothing to communicate, so every plan costs 24 s / (workers) at best and 6 s is reached by
     * many (4, 2-2, 1-1-1-1, ...). The tie rule (cost.h: first found, stage starts and replica
     * counts ascending; the last stage's replicas tried from 1) keeps r = 1 for the last stage,
     * whose first start reaching 6 s is layer 6, and so on back: 1-1-1-1 on layers 0-1, 2-3, 4-5,
     * 6-7, 6 s per minibatch. */
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=8' --workers 4 --format json", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"config\":\"1-1-1-1\""));
    CU_ASSERT_DOUBLE_EQUAL(pl_test_json_number(out, "bottleneck_s"), 6.0, 1e-12);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"first_layer\":2,\"last_layer\":3,") &&
                           strstr(out, "\"first_layer\":6,\"last_layer\":7,"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=8' --workers 4 --method nope", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
    free(out);
    snprintf(cmd, sizeof cmd,
             "%s partition --model 'uniform:layers=8,param_bytes=1000000' --workers 4 --capacity 10", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "fits in 10 bytes"));
    free(out);
    /* without --capacity a plan may exceed the device: a note says so (here 4 GB of weights
     * on one stage, with versions and gradients, against a 1 GB device); within it, none */
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=2,param_bytes=2e9' --set device.memory_bytes=1e9 "
             "--workers 2 --method balance", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "more than the 0.9 GiB of a") && strstr(out, "--capacity device"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s partition --model 'uniform:layers=2,param_bytes=1e3' --set device.memory_bytes=1e9 "
             "--workers 2 --method balance", PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT(out == NULL || strstr(out, "note:") == NULL);
    free(out);
    remove(part);
    free(part);
    rmdir(dir);
    free(dir);
}
