/* test_models.c: layer tables: analytic generators against hand numbers, profile CSV and graph.txt
 * parsing (fixtures, the real PipeDream profiles), and bad input with its message and line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_test.h"

#define FIX PIPELAB_TESTS_DIR "/cost_models/fixtures"

/* Returns 1 when a and b agree to a relative tolerance. */
static int close_rel(double a, double b, double rel) {
    return fabs(a - b) <= rel * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* Loads a model by spec; fails the test (and returns NULL) on error. */
static cost_model *open_ok(const char *spec) {
    pl_err e = {0};
    cost_model *m = cost_model_open(spec, &e);
    if (!m) fprintf(stderr, "\n  %s: %s\n", spec, e.msg);
    CU_ASSERT_PTR_NOT_NULL(m);
    return m;
}

/* Returns 1 when msg contains want. */
static int has(const char *msg, const char *want) {
    int ok = strstr(msg, want) != NULL;
    if (!ok) fprintf(stderr, "\n  message '%s' lacks '%s'\n", msg, want);
    return ok;
}

/* GPT-3 175B from the Megatron formula: L (12 h^2 + 13 h) + V h + s h = 174,604,234,752. */
static void test_gpt3_params(void) {
    cost_model *m = open_ok("transformer:layers=96,hidden=12288,heads=96,seq=2048,vocab=50257,microbatch=1");
    if (!m) return;
    CU_ASSERT_EQUAL(m->n, 98);
    CU_ASSERT_EQUAL(m->dtype_bytes, 2);
    CU_ASSERT_DOUBLE_EQUAL(cost_model_params(m), 174604234752.0, 0.5);
    CU_ASSERT(close_rel(cost_model_params(m), 174.6e9, 1e-3));
    /* one layer: 12 h^2 + 13 h = 1,812,099,072 parameters, 2 bytes each */
    CU_ASSERT_EQUAL(m->layer[1].param_bytes, 2LL * 1812099072LL);
    CU_ASSERT_EQUAL(m->layer[0].param_bytes, 2LL * (50257LL * 12288 + 2048LL * 12288));
    CU_ASSERT_EQUAL(m->layer[97].param_bytes, 0);
    cost_model_free(m);
}

/* Per-layer numbers at s = 2048, b = 1, h = 12288, a = 96: activations sbh (34 + 5 a s / h) =
 * 25,165,824 x 114 bytes; FLOPs from Megatron and the Zero Bubble table. */
static void test_transformer_layer(void) {
    cost_model *m = open_ok("transformer:layers=2,hidden=12288,heads=96,seq=2048,vocab=50257,microbatch=1");
    if (!m) return;
    const cost_layer *l = &m->layer[1];
    const double s = 2048, h = 12288, b = 1, sbh = s * b * h;
    CU_ASSERT_EQUAL(l->stash_bytes, 2868903936LL);
    CU_ASSERT_EQUAL(l->stash_recompute_bytes, 2LL * 25165824);
    CU_ASSERT_EQUAL(l->w_stash_bytes, 32LL * 25165824);
    CU_ASSERT_EQUAL(l->out_bytes, 2LL * 25165824);
    CU_ASSERT_DOUBLE_EQUAL(l->fwd_flops, 24 * b * s * h * h + 4 * b * s * s * h, 1);
    CU_ASSERT_DOUBLE_EQUAL(l->bwd_in_flops, sbh * (24 * h + 8 * s), 1);
    CU_ASSERT_DOUBLE_EQUAL(l->bwd_w_flops, sbh * 24 * h, 1);
    /* backward = 2 x forward */
    CU_ASSERT_DOUBLE_EQUAL(l->bwd_in_flops + l->bwd_w_flops, 2 * l->fwd_flops, 1);
    CU_ASSERT_EQUAL(m->cut_bytes[0], 4LL * 2048);
    CU_ASSERT_EQUAL(m->cut_bytes[1], 2LL * 25165824);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[3].fwd_flops, 2 * b * s * h * 50257, 1);
    cost_model_free(m);
    /* microbatch 4 scales activations by 4 */
    m = open_ok("transformer:layers=1,hidden=1024,heads=16,seq=1024,vocab=1000,microbatch=4");
    if (!m) return;
    CU_ASSERT_EQUAL(m->layer[1].stash_bytes, 1024LL * 4 * 1024 * (34 + 5 * 16 * 1024 / 1024));
    CU_ASSERT_EQUAL(m->microbatch_size, 4);
    cost_model_free(m);
}

/* The executor's MLP block: 4 b h f FLOPs per pass, (2 h f + f + h) 4 parameter bytes. */
static void test_mlp(void) {
    cost_model *m = open_ok("mlp:width=64,depth=3,microbatch=8");
    if (!m) return;
    CU_ASSERT_EQUAL(m->n, 3);
    const double h = 64, f = 256, b = 8;
    CU_ASSERT_DOUBLE_EQUAL(m->layer[2].fwd_flops, 4 * b * h * f, 0);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[2].bwd_w_flops, 4 * b * h * f, 0);
    CU_ASSERT_EQUAL(m->layer[0].param_bytes, (int64_t)((2 * h * f + f + h) * 4));
    CU_ASSERT_EQUAL(m->layer[0].out_bytes, (int64_t)(b * h * 4));
    CU_ASSERT_EQUAL(m->layer[0].stash_bytes, (int64_t)((b * h + 2 * b * f) * 4));
    CU_ASSERT_EQUAL(m->cut_bytes[0], (int64_t)(b * h * 4));
    cost_model_free(m);
}

/* Uniform layers: backward derived as 2 forward, split in halves, or given. */
static void test_uniform(void) {
    cost_model *m = open_ok("uniform:layers=4,fwd_s=0.5,param_bytes=100,out_bytes=10,stash_bytes=40");
    if (!m) return;
    CU_ASSERT_EQUAL(m->n, 4);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[3].bwd_in_s, 0.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[3].bwd_w_s, 0.5, 0);
    CU_ASSERT_EQUAL(m->cut_bytes[2], 10);
    cost_model_free(m);
    m = open_ok("uniform:layers=2,fwd_s=1,bwd_in_s=1.5,bwd_w_s=0.25");
    if (!m) return;
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].bwd_in_s, 1.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].bwd_w_s, 0.25, 0);
    cost_model_free(m);
    pl_err e = {0};
    CU_ASSERT_PTR_NULL(cost_model_open("uniform:layers=2,bogus=1", &e));
    CU_ASSERT(has(e.msg, "unknown parameter 'bogus'"));
    CU_ASSERT_PTR_NULL(cost_model_open("transformer:layers=2,hidden=100,heads=3,seq=8,vocab=10", &e));
    CU_ASSERT(has(e.msg, "heads (3) must divide hidden (100)"));
    CU_ASSERT_PTR_NULL(cost_model_open("transformer:layers=2", &e));
    CU_ASSERT(has(e.msg, "'hidden' is missing"));
    CU_ASSERT_PTR_NULL(cost_model_open("/nonexistent/model.csv", &e));
}

/* A key given twice in a generator spec is refused, whichever generator (the rule `pipelab run`
 * applies to its --model), also through the parallel layout's cost_transformer_spec; and an
 * empty item, in the middle or after a trailing comma. */
static void test_spec_duplicates(void) {
    static const struct {
        const char *spec, *want;
    } dup[] = {
        {"mlp:width=64,depth=2,microbatch=4,depth=5", "model mlp: 'depth' given twice"},
        {"transformer:layers=2,hidden=64,heads=4,seq=16,vocab=100,layers=3", "model transformer: 'layers' given twice"},
        {"uniform:layers=4,fwd_s=1e-3,layers=8", "model uniform: 'layers' given twice"},
        {"uniform:fwd_s=1e-3,fwd_s=1e-3", "model uniform: 'fwd_s' given twice"},
        /* an empty item is refused at the end as in the middle */
        {"mlp:width=64,,depth=2", "model mlp: '' is not key=value"},
        {"mlp:width=64,depth=2,microbatch=4,", "model mlp: a trailing comma (a key=value missing after it)"},
        {NULL, NULL},
    };
    for (int k = 0; dup[k].spec; k++) {
        pl_err e = {0};
        cost_model *m = cost_model_open(dup[k].spec, &e);
        CU_ASSERT_PTR_NULL(m);
        cost_model_free(m);
        CU_ASSERT(has(e.msg, dup[k].want));
    }
    cost_transformer_opts t;
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_transformer_spec("transformer:layers=2,hidden=64,heads=4,seq=16,vocab=9,heads=8", &t, &e),
                    PL_EINPUT);
    CU_ASSERT(has(e.msg, "'heads' given twice"));
    cost_model *m = open_ok("mlp:width=64,depth=2,microbatch=4");
    if (m) CU_ASSERT_EQUAL(m->n, 2);
    cost_model_free(m);
}

/* A transformer spec without a required key names that key; heads that do not divide hidden are
 * a separate error; microbatch defaults to 1. */
static void test_transformer_missing(void) {
    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"transformer:layers=2,hidden=64,heads=5,seq=16,microbatch=1", "model transformer: 'vocab' is missing"},
        {"transformer:hidden=64,heads=4,seq=16,vocab=10", "'layers' is missing"},
        {"transformer:layers=2,hidden=64,seq=16,vocab=10", "'heads' is missing"},
        {"transformer:layers=2,hidden=64,heads=4,vocab=10", "'seq' is missing"},
        {"transformer", "'layers' is missing"},
        {"transformer:layers=2,hidden=64,heads=5,seq=16,vocab=10,microbatch=1", "model transformer: heads (5) must divide hidden (64)"},
        {NULL, NULL},
    };
    for (int k = 0; bad[k].spec; k++) {
        pl_err e = {0};
        cost_model *m = cost_model_open(bad[k].spec, &e);
        CU_ASSERT_PTR_NULL(m);
        cost_model_free(m);
        CU_ASSERT(has(e.msg, bad[k].want));
        CU_ASSERT_PTR_NULL(strstr(e.msg, "must all be given"));
    }
    cost_transformer_opts o = {.layers = 2, .hidden = 64, .heads = 4, .seq = 16, .vocab = 10, .microbatch = -3};
    pl_err e = {0};
    CU_ASSERT_PTR_NULL(cost_model_transformer(&o, &e));
    CU_ASSERT(has(e.msg, "model transformer: microbatch must be >= 1 (got -3)"));
    cost_model *m = open_ok("transformer:layers=2,hidden=64,heads=4,seq=16,vocab=10");
    if (m) CU_ASSERT_EQUAL(m->microbatch_size, 1);
    cost_model_free(m);
}

/* The CSV fixture parses exactly, and writing then reading gives the same table. */
static void test_csv_fixture(void) {
    cost_model *m = open_ok(FIX "/profile.csv");
    if (!m) return;
    CU_ASSERT_STRING_EQUAL(m->name, "tiny");
    CU_ASSERT_EQUAL(m->n, 3);
    CU_ASSERT_EQUAL(m->microbatch_size, 4);
    CU_ASSERT_EQUAL(m->cut_bytes[0], 64);
    CU_ASSERT_EQUAL(m->cut_bytes[2], 128);
    CU_ASSERT_EQUAL(m->cut_bytes[3], 0);
    CU_ASSERT_STRING_EQUAL(m->layer[1].name, "block 1");
    CU_ASSERT_DOUBLE_EQUAL(m->layer[0].bwd_w_s, 0.003, 0);
    CU_ASSERT(m->layer[1].fwd_s < 0);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].bwd_in_flops, 2e9, 0);
    CU_ASSERT_EQUAL(m->layer[1].stash_recompute_bytes, 64);
    CU_ASSERT(m->layer[0].stash_recompute_bytes < 0);
    CU_ASSERT_EQUAL(m->layer[2].src_line, 6);
    pl_buf b;
    pl_buf_init(&b);
    pl_err e = {0};
    CU_ASSERT_EQUAL(cost_model_write_csv(m, &b, &e), PL_OK);
    cost_model *m2 = cost_model_read_csv("rt.csv", b.data, b.len, &e);
    CU_ASSERT_PTR_NOT_NULL(m2);
    if (m2) {
        CU_ASSERT_EQUAL(m2->n, m->n);
        CU_ASSERT_EQUAL(m2->microbatch_size, 4);
        for (int i = 0; i < m->n; i++) {
            CU_ASSERT_STRING_EQUAL(m2->layer[i].name, m->layer[i].name);
            CU_ASSERT_EQUAL(m2->layer[i].fwd_s, m->layer[i].fwd_s);
            CU_ASSERT_EQUAL(m2->layer[i].bwd_w_flops, m->layer[i].bwd_w_flops);
            CU_ASSERT_EQUAL(m2->layer[i].stash_bytes, m->layer[i].stash_bytes);
            CU_ASSERT_EQUAL(m2->layer[i].stash_recompute_bytes, m->layer[i].stash_recompute_bytes);
        }
        for (int k = 0; k <= m->n; k++) CU_ASSERT_EQUAL(m2->cut_bytes[k], m->cut_bytes[k]);
    }
    cost_model_free(m2);
    pl_buf_free(&b);
    cost_model_free(m);
}

/* One bad CSV: NULL and a message "bad.csv:LINE: ..." containing want. */
static void csv_bad(const char *text, int line, const char *want) {
    pl_err e = {0};
    cost_model *m = cost_model_read_csv("bad.csv", text, strlen(text), &e);
    CU_ASSERT_PTR_NULL(m);
    cost_model_free(m);
    char prefix[64];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "bad.csv:%d: ", line);
    else
        snprintf(prefix, sizeof prefix, "bad.csv: ");
    CU_ASSERT(has(e.msg, prefix));
    CU_ASSERT(has(e.msg, want));
    CU_ASSERT_EQUAL(e.code, PL_EINPUT);
}

#define HDR "layer,name,fwd_s,bwd_in_s,bwd_w_s,param_bytes,out_bytes,stash_bytes\n"

/* Malformed lines, unknown columns, negative and missing values each fail with line and reason. */
static void test_csv_bad(void) {
    csv_bad("", 0, "no header");
    csv_bad(HDR, 0, "no layers");
    csv_bad("layer,name,fwd_s,bwd_in_s,bwd_w_s,param_bytes,out_bytes,stash_bytes,color\n", 1,
            "unknown column 'color'");
    csv_bad("layer,name,fwd_s,bwd_in_s,param_bytes,out_bytes,stash_bytes\n", 1,
            "missing column 'bwd_w_s' or 'bwd_w_flops'");
    csv_bad("layer,name,fwd_s,bwd_in_s,bwd_w_s,out_bytes,stash_bytes\n", 1, "missing column 'param_bytes'");
    csv_bad("layer,name,fwd_s,fwd_s,bwd_in_s,bwd_w_s,param_bytes,out_bytes,stash_bytes\n", 1, "appears twice");
    csv_bad(HDR "0,a,1,1,1,0,0,0\n1,b,1,1,1,0,0\n", 3, "expected 8 fields, found 7");
    csv_bad(HDR "0,a,1,1,1,0,0,0,9\n", 2, "expected 8 fields, found more than 8");
    csv_bad(HDR "0,a,1,-2,1,0,0,0\n", 2, "negative value -2 for 'bwd_in_s'");
    csv_bad(HDR "0,a,1,1,1,0,0,0\n\n# c\n1,b,1,1,x1,0,0,0\n", 5, "bad number 'x1' for 'bwd_w_s'");
    csv_bad(HDR "0,a,,1,1,0,0,0\n", 2, "need 'fwd_s' or 'fwd_flops'");
    csv_bad(HDR "0,a,1,1,1,,0,0\n", 2, "missing value for 'param_bytes'");
    csv_bad(HDR "0,,1,1,1,0,0,0\n", 2, "missing value for 'name'");
    csv_bad(HDR "1,a,1,1,1,0,0,0\n", 2, "layer index 1 out of order (expected 0)");
    csv_bad("#@ microbatch_size=0\n" HDR "0,a,1,1,1,0,0,0\n", 1, "microbatch_size must be a positive integer");
    csv_bad("#@ colour=red\n" HDR "0,a,1,1,1,0,0,0\n", 1, "unknown metadata key 'colour'");
    csv_bad(HDR "#@ name=x\n0,a,1,1,1,0,0,0\n", 2, "metadata line after the header");
    csv_bad(HDR "0,\"Conv2d(3, 64),1,1,1,0,0,0\n", 2, "unterminated quote");
}

/* Quoted names keep their commas and quotes; a graph written as CSV keeps its branch cuts. */
static void test_csv_quotes_and_graph_roundtrip(void) {
    const char *text = HDR "0, \"Conv2d(3, 64, \"\"k\"\")\" ,1,1,1,0,0,0\n";
    pl_err e = {0};
    cost_model *m = cost_model_read_csv("q.csv", text, strlen(text), &e);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (m) CU_ASSERT_STRING_EQUAL(m->layer[0].name, "Conv2d(3, 64, \"k\")");
    cost_model_free(m);
    cost_model *g = cost_model_open(FIX "/branchy.graph.txt", &e);
    CU_ASSERT_PTR_NOT_NULL(g);
    if (!g) return;
    free(g->layer[1].name);
    g->layer[1].name = strdup("Linear(4, \"8\")");
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(cost_model_write_csv(g, &b, &e), PL_OK);
    m = cost_model_read_csv("g.csv", b.data, b.len, &e);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (m) {
        CU_ASSERT_STRING_EQUAL(m->layer[1].name, "Linear(4, \"8\")");
        for (int k = 0; k <= g->n; k++) CU_ASSERT_EQUAL(m->cut_bytes[k], g->cut_bytes[k]);
        for (int i = 0; i < g->n; i++) CU_ASSERT_EQUAL(m->layer[i].bwd_w_s, g->layer[i].bwd_w_s);
    }
    cost_model_free(m);
    pl_buf_free(&b);
    cost_model_free(g);
}

/* The chain fixture: 4 layers in order, times in seconds, list activations summed. */
static void test_graph_chain(void) {
    cost_model *m = open_ok(FIX "/chain.graph.txt");
    if (!m) return;
    CU_ASSERT_EQUAL(m->n, 4);
    CU_ASSERT_STRING_EQUAL(m->name, "chain");
    CU_ASSERT_STRING_EQUAL(m->layer[1].name, "Linear(4, 8)");
    CU_ASSERT_STRING_EQUAL(m->layer[1].id, "node2");
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].fwd_s, 0.002, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].bwd_in_s, 0.002, 1e-15); /* params: half/half */
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].bwd_w_s, 0.002, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[2].bwd_in_s, 0.00025, 1e-15); /* no params: all input */
    CU_ASSERT_DOUBLE_EQUAL(m->layer[2].bwd_w_s, 0, 0);
    CU_ASSERT_EQUAL(m->layer[3].out_bytes, 48);
    CU_ASSERT_EQUAL(m->layer[3].param_bytes, 72);
    int64_t cuts[5] = {0, 100, 200, 200, 48};
    for (int k = 0; k <= 4; k++) CU_ASSERT_EQUAL(m->cut_bytes[k], cuts[k]);
    cost_model_free(m);
}

/* The branchy fixture: topological order 1 2 3 4 5 from a shuffled file; the cut between the two
 * branches carries node1's output (still needed by node3) and node2's output. */
static void test_graph_branchy(void) {
    cost_model *m = open_ok(FIX "/branchy.graph.txt");
    if (!m) return;
    CU_ASSERT_EQUAL(m->n, 5);
    const char *ids[5] = {"node1", "node2", "node3", "node4", "node5"};
    for (int i = 0; i < 5; i++) CU_ASSERT_STRING_EQUAL(m->layer[i].id, ids[i]);
    int64_t cuts[6] = {0, 100, 110, 30, 30, 5};
    for (int k = 0; k <= 5; k++) CU_ASSERT_EQUAL(m->cut_bytes[k], cuts[k]);
    CU_ASSERT_EQUAL(m->layer[2].src_line, 1);
    cost_model_free(m);
}

/* One bad graph: NULL and "bad.txt:LINE: ..." containing want. */
static void graph_bad(const char *text, int line, const char *want) {
    pl_err e = {0};
    cost_model *m = cost_model_read_graph("bad.txt", text, strlen(text), 1, &e);
    CU_ASSERT_PTR_NULL(m);
    cost_model_free(m);
    char prefix[64];
    snprintf(prefix, sizeof prefix, line > 0 ? "bad.txt:%d: " : "bad.txt: ", line);
    CU_ASSERT(has(e.msg, prefix));
    CU_ASSERT(has(e.msg, want));
}

#define N(id, f) id " -- X -- forward_compute_time=" f ", backward_compute_time=1, activation_size=1, parameter_size=0\n"

/* Malformed node and edge lines, unknown, missing and negative keys, undefined nodes, cycles. */
static void test_graph_bad(void) {
    graph_bad("", 0, "no nodes");
    graph_bad(N("node1", "1") "node2 -- oops\n", 2, "malformed node line");
    graph_bad(N("node1", "1") N("node2", "-1"), 2, "negative value '-1' for forward_compute_time");
    graph_bad(N("node1", "abc"), 1, "bad value 'abc' for forward_compute_time");
    graph_bad("node1 -- X -- forward_compute_time=1, backward_compute_time=1, activation_size=1\n", 1,
              "missing key 'parameter_size'");
    graph_bad("node1 -- X -- forward_compute_time=1, backward_compute_time=1, activation_size=1, "
              "parameter_size=0, flops=3\n", 1, "unknown key 'flops'");
    graph_bad(N("node1", "1") N("node1", "2"), 2, "node 'node1' defined twice (first on line 1)");
    graph_bad(N("node1", "1") "\tnode1 -- node9\n", 2, "undefined node 'node9'");
    graph_bad(N("node1", "1") "\tnode1 node2\n", 2, "malformed edge line");
    graph_bad(N("node1", "1") N("node2", "1") N("node3", "1") N("node4", "1")
              "\tnode1 -- node2\n\tnode2 -- node3\n\tnode3 -- node4\n\tnode4 -- node2\n", 6,
              "cycle: node2 -> node3 -> node4 -> node2");
    graph_bad(N("node1", "1") "\tnode1 -- node1\n", 2, "cycle: node1 -> node1");
    /* three outputs of 4e18 bytes (each within a size's bound) all cross the cut before node4: the
     * third's found to overflow the count */
#define BIG(id) id " -- X -- forward_compute_time=1, backward_compute_time=1, activation_size=4e18, parameter_size=0\n"
    graph_bad(BIG("node1") BIG("node2") BIG("node3") N("node4", "1")
              "\tnode1 -- node4\n\tnode2 -- node4\n\tnode3 -- node4\n", 3,
              "the outputs crossing a cut at this node add up to more bytes than 64 bits count");
#undef BIG
}

/* Expected layer counts and sums of the real PipeDream profiles (computed independently). */
typedef struct real_profile {
    const char *file;
    int nodes;
    double fwd_ms, bwd_ms, act_bytes, param_bytes;
} real_profile;

static const real_profile real[] = {
    {"alexnet.graph.txt", 23, 680.703, 40.52, 1278713860.0, 244403360.0},
    {"densenet121.graph.txt", 429, 186.489, 148.751, 12527921156.0, 31915424.0},
    {"gnmt.graph.txt", 48, 33.533, 55.883, 409159680.0, 775063808.0},
    {"gnmt_large.graph.txt", 96, 182.563, 337.89, 1355637248.0, 1110870272.0},
    {"inception_v3.graph.txt", 326, 310.969, 399.769, 16686773768.0, 108645056.0},
    {"nasnetalarge.graph.txt", 1251, 416.133, 249.21, 8587156364.0, 368958360.0},
    {"nasnetamobile.graph.txt", 921, 338.481, 261.363, 14128497164.0, 34343816.0},
    {"resnet101.graph.txt", 347, 207.723, 213.786, 14458415108.0, 178196640.0},
    {"resnet18.graph.txt", 71, 581.071, 152.296, 8582569988.0, 46758048.0},
    {"resnet50.graph.txt", 177, 201.45, 260.931, 19308728324.0, 102228128.0},
    {"resnext101.graph.txt", 347, 249.609, 318.31, 18292664324.0, 176710816.0},
    {"resnext50.graph.txt", 177, 238.961, 368.99, 24356835332.0, 100115616.0},
    {"squeezenet1_0.graph.txt", 68, 587.884, 172.119, 12476317700.0, 4993696.0},
    {"vgg16.graph.txt", 41, 251.874, 438.633, 14759219204.0, 553430176.0},
    {NULL, 0, 0, 0, 0, 0},
};

/* Every real profile parses; layer count and sums match; cuts are never negative. */
static void test_graph_real(void) {
    const char *dir = PIPELAB_PIPEDREAM_DIR;
    CU_ASSERT_FATAL(pl_test_exists(dir));
    for (const real_profile *r = real; r->file; r++) {
        char *path = pl_test_path(dir, r->file);
        pl_err e = {0};
        cost_model *m = cost_model_open(path, &e);
        if (!m) fprintf(stderr, "\n  %s: %s\n", r->file, e.msg);
        CU_ASSERT_PTR_NOT_NULL(m);
        free(path);
        if (!m) continue;
        CU_ASSERT_EQUAL(m->n, r->nodes);
        double f = 0, b = 0, act = 0, par = 0;
        int neg = 0;
        for (int i = 0; i < m->n; i++) {
            f += m->layer[i].fwd_s;
            b += m->layer[i].bwd_in_s + m->layer[i].bwd_w_s;
            act += (double)m->layer[i].out_bytes;
            par += (double)m->layer[i].param_bytes;
        }
        for (int k = 0; k <= m->n; k++) neg |= m->cut_bytes[k] < 0;
        CU_ASSERT(close_rel(f, r->fwd_ms * 1e-3, 1e-9));
        CU_ASSERT(close_rel(b, r->bwd_ms * 1e-3, 1e-9));
        CU_ASSERT(fabs(act - r->act_bytes) <= m->n);
        CU_ASSERT(fabs(par - r->param_bytes) <= m->n);
        CU_ASSERT_FALSE(neg);
        cost_model_free(m);
    }
}

/* Returns m written by cost_model_write_csv and read back (NULL, asserted, when it fails). */
static cost_model *csv_roundtrip(const cost_model *m) {
    pl_err e = {0};
    pl_buf b;
    pl_buf_init(&b);
    CU_ASSERT_EQUAL(cost_model_write_csv(m, &b, &e), PL_OK);
    cost_model *m2 = cost_model_read_csv("rt.csv", b.data, b.len, &e);
    CU_ASSERT_PTR_NOT_NULL(m2);
    pl_buf_free(&b);
    return m2;
}

/* The profiled all-reduce link round-trips through the CSV writer and reader; a profile without
 * it reads as "not profiled" (0); a malformed or lone value is refused naming path:line. */
static void test_csv_allreduce_keys(void) {
    const char *text = "#@ name=m microbatch_size=2\n#@ allreduce_latency_s=4.25e-05 allreduce_Bps=1.5e9\n"
                       "layer,name,fwd_s,bwd_in_s,bwd_w_s,param_bytes,out_bytes,stash_bytes\n0,a,1,1,1,400,8,8\n";
    pl_err e = {0};
    cost_model *m = cost_model_read_csv("ar.csv", text, strlen(text), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->allreduce[COST_TRANSPORT_THREADS].latency_s, 4.25e-05);
    CU_ASSERT_EQUAL(m->allreduce[COST_TRANSPORT_THREADS].Bps, 1.5e9);
    CU_ASSERT_EQUAL(m->allreduce[COST_TRANSPORT_MPI].Bps, 0); /* an older file: threads only */
    cost_model *m2 = csv_roundtrip(m);
    if (m2) {
        CU_ASSERT_EQUAL(m2->allreduce[COST_TRANSPORT_THREADS].latency_s, m->allreduce[COST_TRANSPORT_THREADS].latency_s);
        CU_ASSERT_EQUAL(m2->allreduce[COST_TRANSPORT_THREADS].Bps, m->allreduce[COST_TRANSPORT_THREADS].Bps);
    }
    cost_model_free(m2);
    cost_model_free(m);
    const char *plain = HDR "0,a,1,1,1,400,8,8\n";
    m = cost_model_read_csv("p.csv", plain, strlen(plain), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->allreduce[COST_TRANSPORT_THREADS].Bps, 0);
    cost_model_free(m);
    csv_bad("#@ name=m\n#@ allreduce_latency_s=1e-5 allreduce_Bps=fast\n" HDR "0,a,1,1,1,4,8,8\n", 2,
            "allreduce_Bps must be a positive number, got 'fast'");
    csv_bad("#@ allreduce_latency_s=-1 allreduce_Bps=1e9\n" HDR "0,a,1,1,1,4,8,8\n", 1,
            "allreduce_latency_s must be a non-negative number");
    csv_bad("#@ allreduce_Bps=0\n" HDR "0,a,1,1,1,4,8,8\n", 1, "allreduce_Bps must be a positive number");
    csv_bad("\n#@ allreduce_latency_s=1e-5\n" HDR "0,a,1,1,1,4,8,8\n", 2, "allreduce_latency_s and allreduce_Bps come together");
    csv_bad("#@ allreduce_alpha=1\n" HDR "0,a,1,1,1,4,8,8\n", 1, "unknown metadata key 'allreduce_alpha'");
}

/* The MPI all-reduce keys: read apart from the threads' (either pair alone, or both), round-trip
 * through the writer, and a malformed or lone value is refused naming path:line and the key. */
static void test_csv_allreduce_mpi_keys(void) {
    const char *text = "#@ name=m\n#@ allreduce_latency_s=4e-05 allreduce_Bps=1.5e9\n"
                       "#@ allreduce_mpi_latency_s=2.5e-05 allreduce_mpi_Bps=3e9\n" HDR "0,a,1,1,1,400,8,8\n";
    pl_err e = {0};
    cost_model *m = cost_model_read_csv("mpi.csv", text, strlen(text), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->allreduce[COST_TRANSPORT_THREADS].Bps, 1.5e9);
    CU_ASSERT_EQUAL(m->allreduce[COST_TRANSPORT_MPI].latency_s, 2.5e-05);
    CU_ASSERT_EQUAL(m->allreduce[COST_TRANSPORT_MPI].Bps, 3e9);
    cost_model *m2 = csv_roundtrip(m);
    if (m2) {
        CU_ASSERT_EQUAL(m2->allreduce[COST_TRANSPORT_MPI].latency_s, 2.5e-05);
        CU_ASSERT_EQUAL(m2->allreduce[COST_TRANSPORT_MPI].Bps, 3e9);
        CU_ASSERT_EQUAL(m2->allreduce[COST_TRANSPORT_THREADS].Bps, 1.5e9);
    }
    /* the one rule of the link: MPI's for MPI, the threads' for threads, and the threads' for
     * MPI when the profile has no MPI measurement */
    cost_hw link;
    cost_transport used = COST_TRANSPORTS;
    CU_ASSERT_EQUAL(cost_model_allreduce_link(m, COST_TRANSPORT_MPI, &link, &used), 1);
    CU_ASSERT(used == COST_TRANSPORT_MPI && link.intra_bandwidth_Bps == 3e9 && link.intra_latency_s == 2.5e-05);
    CU_ASSERT_EQUAL(cost_allreduce_s(&link, 0, 2, 1000), cost_ring_allreduce_s(2, 1000, 3e9, 2.5e-05));
    CU_ASSERT_EQUAL(cost_model_allreduce_link(m, COST_TRANSPORT_THREADS, &link, &used), 1);
    CU_ASSERT(used == COST_TRANSPORT_THREADS && link.intra_bandwidth_Bps == 1.5e9);
    cost_model_free(m2);
    cost_model_free(m);
    const char *threads_only = "#@ allreduce_latency_s=4e-05 allreduce_Bps=1.5e9\n" HDR "0,a,1,1,1,400,8,8\n";
    m = cost_model_read_csv("t.csv", threads_only, strlen(threads_only), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(cost_model_allreduce_link(m, COST_TRANSPORT_MPI, &link, &used), 1);
    CU_ASSERT(used == COST_TRANSPORT_THREADS && link.intra_bandwidth_Bps == 1.5e9);
    cost_model_free(m);
    const char *plain = HDR "0,a,1,1,1,400,8,8\n";
    m = cost_model_read_csv("p.csv", plain, strlen(plain), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(cost_model_allreduce_link(m, COST_TRANSPORT_MPI, &link, &used), 0);
    cost_model_free(m);
    const char *mpi_only = "#@ allreduce_mpi_latency_s=0 allreduce_mpi_Bps=2e9\n" HDR "0,a,1,1,1,400,8,8\n";
    m = cost_model_read_csv("m.csv", mpi_only, strlen(mpi_only), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(m->allreduce[COST_TRANSPORT_MPI].Bps == 2e9 && m->allreduce[COST_TRANSPORT_THREADS].Bps == 0);
    CU_ASSERT_EQUAL(cost_model_allreduce_link(m, COST_TRANSPORT_THREADS, &link, &used), 0);
    cost_model_free(m);
    csv_bad("#@ name=m\n\n#@ allreduce_mpi_latency_s=1e-5 allreduce_mpi_Bps=slow\n" HDR "0,a,1,1,1,4,8,8\n", 3,
            "allreduce_mpi_Bps must be a positive number, got 'slow'");
    csv_bad("#@ allreduce_mpi_latency_s=-2 allreduce_mpi_Bps=1e9\n" HDR "0,a,1,1,1,4,8,8\n", 1,
            "allreduce_mpi_latency_s must be a non-negative number");
    csv_bad("#@ allreduce_latency_s=1e-5 allreduce_Bps=1e9\n#@ allreduce_mpi_Bps=1e9\n" HDR "0,a,1,1,1,4,8,8\n", 2,
            "allreduce_mpi_latency_s and allreduce_mpi_Bps come together");
    csv_bad("#@ allreduce_mpi_alpha=1\n" HDR "0,a,1,1,1,4,8,8\n", 1,
            "unknown metadata key 'allreduce_mpi_alpha' (known: name, microbatch_size, dtype_bytes, input_bytes, "
            "allreduce_latency_s, allreduce_Bps, allreduce_mpi_latency_s, allreduce_mpi_Bps, p2p_latency_s, p2p_Bps, "
            "p2p_mpi_latency_s, p2p_mpi_Bps, p2p_send_s, p2p_send_Bps, p2p_mpi_send_s, p2p_mpi_send_Bps, p2p_post_s, "
            "p2p_post_Bps, p2p_mpi_post_s, p2p_mpi_post_Bps)");
}

/* The point-to-point keys: read apart from the all-reduce's, round-trip through the writer, set
 * the intra link of a hardware to cost_link_s's alpha + bytes / beta on their own transport only
 * (none: the hardware untouched), cost_link_fit inverts cost_link_s, and a malformed or lone value
 * is refused naming path:line and the key. */
static void test_csv_p2p_keys(void) {
    const char *text = "#@ name=m\n#@ allreduce_latency_s=4e-05 allreduce_Bps=1.5e9\n"
                       "#@ p2p_latency_s=2.5e-05 p2p_Bps=3e9\n" HDR "0,a,1,1,1,400,8,8\n";
    pl_err e = {0};
    cost_model *m = cost_model_read_csv("p2p.csv", text, strlen(text), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(m->p2p[COST_TRANSPORT_THREADS].latency_s == 2.5e-05 && m->p2p[COST_TRANSPORT_THREADS].Bps == 3e9);
    CU_ASSERT(m->p2p[COST_TRANSPORT_MPI].Bps == 0 && m->allreduce[COST_TRANSPORT_THREADS].Bps == 1.5e9);
    cost_model *m2 = csv_roundtrip(m);
    CU_ASSERT(m2 && m2->p2p[COST_TRANSPORT_THREADS].latency_s == 2.5e-05 && m2->p2p[COST_TRANSPORT_THREADS].Bps == 3e9);
    CU_ASSERT(m2 && m2->allreduce[COST_TRANSPORT_THREADS].Bps == 1.5e9 && m2->p2p[COST_TRANSPORT_MPI].Bps == 0);
    cost_model_free(m2);
    cost_hw hw, before;
    cost_hw_init(&hw);
    hw.devices_per_node = 2;
    before = hw;
    CU_ASSERT_EQUAL(cost_model_p2p_link(m, COST_TRANSPORT_MPI, &hw), 0);
    CU_ASSERT(memcmp(&hw, &before, sizeof hw) == 0);
    CU_ASSERT_EQUAL(cost_model_p2p_link(m, COST_TRANSPORT_THREADS, &hw), 1);
    CU_ASSERT_DOUBLE_EQUAL(cost_transfer_s(&hw, 0, 1, 3000), 2.5e-05 + 3000 / 3e9, 1e-18);
    cost_model_free(m);
    double bytes[3] = {1e3, 2e3, 4e3}, t[3], lat = 0, bw = 0;
    for (int i = 0; i < 3; i++) t[i] = 7e-6 + bytes[i] / 2e9;
    CU_ASSERT_EQUAL(cost_link_fit(bytes, t, 3, &lat, &bw, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(lat, 7e-6, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(bw / 2e9, 1, 1e-9);
    CU_ASSERT_EQUAL(cost_link_fit(bytes, t, 1, &lat, &bw, &e), PL_EINPUT);
    double flat[3] = {4e-6, 3e-6, 2e-6}; /* no growth with the size: the mean, all latency */
    CU_ASSERT_EQUAL(cost_link_fit(bytes, flat, 3, &lat, &bw, &e), PL_OK);
    CU_ASSERT(fabs(lat - 3e-6) <= 1e-18 && bw == COST_FREE_LINK_BPS);
    csv_bad("#@ name=m\n#@ p2p_latency_s=1e-5 p2p_Bps=fast\n" HDR "0,a,1,1,1,4,8,8\n", 2,
            "p2p_Bps must be a positive number, got 'fast'");
    csv_bad("#@ p2p_mpi_latency_s=-1 p2p_mpi_Bps=1e9\n" HDR "0,a,1,1,1,4,8,8\n", 1,
            "p2p_mpi_latency_s must be a non-negative number");
    csv_bad("\n\n#@ p2p_Bps=1e9\n" HDR "0,a,1,1,1,4,8,8\n", 3, "p2p_latency_s and p2p_Bps come together");
}

/* The hand-off's own times (p2p_send_*, p2p_post_* and their MPI pairs): each pair lands in its
 * own field of its own transport, round-trips through the writer, and a lone or malformed value
 * is refused naming path:line and the key. */
static void test_csv_handoff_keys(void) {
    const char *text = "#@ name=m\n#@ p2p_latency_s=2.5e-05 p2p_Bps=3e9\n#@ p2p_send_s=6e-07 p2p_send_Bps=9e9\n"
                       "#@ p2p_post_s=2e-07 p2p_post_Bps=8e9 p2p_mpi_send_s=1.5e-06 p2p_mpi_send_Bps=4e9\n" HDR
                       "0,a,1,1,1,400,8,8\n";
    pl_err e = {0};
    cost_model *m = cost_model_read_csv("h.csv", text, strlen(text), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    int read = 0; /* the models checked: the file's, then its round trip's */
    for (int pass = 0; pass < 2 && m; pass++, read++) {
        const cost_ar_link *s = m->p2p_send, *p = m->p2p_post;
        CU_ASSERT(s[COST_TRANSPORT_THREADS].latency_s == 6e-07 && s[COST_TRANSPORT_THREADS].Bps == 9e9);
        CU_ASSERT(p[COST_TRANSPORT_THREADS].latency_s == 2e-07 && p[COST_TRANSPORT_THREADS].Bps == 8e9);
        CU_ASSERT(s[COST_TRANSPORT_MPI].latency_s == 1.5e-06 && s[COST_TRANSPORT_MPI].Bps == 4e9);
        CU_ASSERT(p[COST_TRANSPORT_MPI].Bps == 0 && m->p2p[COST_TRANSPORT_THREADS].Bps == 3e9);
        cost_model *m2 = pass == 0 ? csv_roundtrip(m) : NULL;
        cost_model_free(m);
        m = m2;
    }
    CU_ASSERT_EQUAL(read, 2);
    csv_bad("#@ name=m\n#@ p2p_post_s=1e-7 p2p_post_Bps=0\n" HDR "0,a,1,1,1,4,8,8\n", 2,
            "p2p_post_Bps must be a positive number, got '0'");
    csv_bad("#@ p2p_mpi_send_s=1e-6\n" HDR "0,a,1,1,1,4,8,8\n", 1, "p2p_mpi_send_s and p2p_mpi_send_Bps come together");
}

void test_models_register(void) {
    static const pl_test_case cases[] = {
        {"GPT-3 175B parameter count", test_gpt3_params},
        {"transformer per-layer FLOPs and bytes", test_transformer_layer},
        {"mlp block formulas", test_mlp},
        {"uniform generator and spec errors", test_uniform},
        {"a spec key given twice is refused", test_spec_duplicates},
        {"transformer spec: the missing key, heads divide hidden", test_transformer_missing},
        {"profile CSV fixture and round trip", test_csv_fixture},
        {"bad profile CSV lines", test_csv_bad},
        {"profiled all-reduce metadata", test_csv_allreduce_keys},
        {"profiled MPI all-reduce metadata and the link rule", test_csv_allreduce_mpi_keys},
        {"profiled point-to-point metadata and the link rule", test_csv_p2p_keys},
        {"the hand-off's own times on the sender and the receiver", test_csv_handoff_keys},
        {"quoted names, graph to CSV round trip", test_csv_quotes_and_graph_roundtrip},
        {"graph.txt chain fixture", test_graph_chain},
        {"graph.txt branchy fixture cuts", test_graph_branchy},
        {"bad graph.txt input", test_graph_bad},
        {"real PipeDream profiles", test_graph_real},
        {NULL, NULL},
    };
    pl_test_suite("cost models", cases);
}
