/* test_input_rules.c: the rules every cost-model input follows: a leading UTF-8 byte order mark
 * is skipped by each reader (hardware INI, profile CSV, graph.txt, partition file, observations);
 * a directory or an empty name given as a file is named as such; contradictory or repeated
 * values (bwd_s with bwd_in_s and bwd_w_s, a profile metadata key twice) and byte counts that
 * are not whole numbers are refused at file:line; compute times whose sums overflow are refused
 * by model --stages and partition as simulate refuses them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pl_test.h"

void test_input_rules_register(void);

/* The UTF-8 byte order mark some editors put at the start of a text file. */
#define BOM "\xEF\xBB\xBF"

/* Returns a malloc'd BOM followed by the file at path (NULL on failure, reported). */
static char *bom_and_file(const char *path) {
    char *text = NULL;
    size_t len = 0;
    pl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(pl_read_file(path, 1 << 20, &text, &len, &e), PL_OK);
    char *out = malloc(len + sizeof BOM);
    if (out) {
        memcpy(out, BOM, sizeof BOM - 1);
        memcpy(out + sizeof BOM - 1, text, len + 1);
    }
    free(text);
    CU_ASSERT_PTR_NOT_NULL(out);
    return out;
}

/* Runs `pipelab args`: its exit status must be rc and its output must contain want. */
static void expect_cli(const char *args, int rc, const char *want) { pl_test_cli_expect(args, rc, want); }

/* Expects e to hold want (reported when not). */
static void expect_msg(const pl_err *e, const char *want) {
    int ok = strstr(e->msg, want) != NULL;
    CU_ASSERT(ok);
    if (!ok) fprintf(stderr, "\n  '%s' lacks '%s'\n", e->msg, want);
}

/* Every cost-model reader skips a leading byte order mark and reads the rest as without it. */
static void test_bom_every_reader(void) {
    pl_err e = {0};
    char *dir = pl_test_tmpdir();
    /* hardware INI, through the file loader (libinih gets the text past the mark) and the CLI */
    char *ini = bom_and_file(PIPELAB_TESTS_DIR "/../cost_models/hardware/cpu.ini");
    char *ini_path = pl_test_path(dir, "h.ini");
    CU_ASSERT_EQUAL_FATAL(pl_write_file(ini_path, ini, strlen(ini), &e), PL_OK);
    cost_hw hw;
    cost_hw_init(&hw);
    CU_ASSERT_EQUAL(cost_hw_load(&hw, ini_path, &e), PL_OK);
    char args[1024];
    snprintf(args, sizeof args, "model --model uniform:layers=2,fwd_s=1 --hardware '%s'", ini_path);
    expect_cli(args, 0, "hardware cpu");
    /* profile CSV */
    char *csv = bom_and_file(PIPELAB_TESTS_DIR "/cost_models/fixtures/profile.csv");
    cost_model *m = cost_model_read_csv("p.csv", csv, strlen(csv), &e);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (m) CU_ASSERT_EQUAL(m->n, 3);
    if (m) CU_ASSERT_STRING_EQUAL(m->name, "tiny");
    cost_model_free(m);
    /* PipeDream graph.txt */
    char *graph = bom_and_file(PIPELAB_TESTS_DIR "/cost_models/fixtures/chain.graph.txt");
    m = cost_model_read_graph("g.txt", graph, strlen(graph), 1, &e);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (m) CU_ASSERT_EQUAL(m->n, 4);
    cost_model_free(m);
    /* partition file */
    cost_partition *p = NULL;
    CU_ASSERT_EQUAL(cost_partition_parse_text(BOM "pipelab-partition 1\nstage 0: layers 0-3 replicas 1\n", "x.part", &p, &e),
                    PL_OK);
    if (p) CU_ASSERT_EQUAL(p->stages, 1);
    cost_partition_free(p);
    /* observations */
    cost_observation *obs = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(cost_observations_parse(BOM "kind,flops,bytes,seconds\ncompute,1e9,0,1e-3\n", "o.csv", &obs, &n, &e),
                    PL_OK);
    CU_ASSERT_EQUAL(n, 1);
    free(obs);
    free(ini);
    free(ini_path);
    free(csv);
    free(graph);
    free(dir);
}

/* A directory or an empty name where a file is read: said so, by the one file reader. */
static void test_read_file_refusals(void) {
    char *dir = pl_test_tmpdir();
    char *text = NULL;
    pl_err e = {0};
    CU_ASSERT_EQUAL(pl_read_file(dir, 1 << 20, &text, NULL, &e), PL_EINPUT);
    char want[1024];
    snprintf(want, sizeof want, "%s: is a directory, not a file", dir);
    CU_ASSERT_STRING_EQUAL(e.msg, want);
    CU_ASSERT_PTR_NULL(text);
    CU_ASSERT_EQUAL(pl_read_file("", 1 << 20, &text, NULL, &e), PL_EINPUT);
    CU_ASSERT_STRING_EQUAL(e.msg, "an empty file name (expected the path of a file)");
    char args[1024];
    snprintf(args, sizeof args, "calibrate --observations '%s'", dir);
    expect_cli(args, 1, want);
    snprintf(args, sizeof args, "model --model uniform:layers=2 --hardware '%s/'", dir);
    expect_cli(args, 1, "is a directory, not a file");
    expect_cli("calibrate --observations ''", 1, "an empty file name");
    free(dir);
}

/* Reads a profile CSV from text; expects it refused with want. */
static void expect_csv_refused(const char *text, const char *want) {
    pl_err e = {0};
    cost_model *m = cost_model_read_csv("p.csv", text, strlen(text), &e);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(e.code, PL_EINPUT);
    expect_msg(&e, want);
    cost_model_free(m);
}

/* A header and a row of a profile CSV with one parameter byte count, for the cases below. */
#define CSV_HEAD "layer,name,fwd_s,bwd_in_s,bwd_w_s,param_bytes,out_bytes,stash_bytes\n"

/* Values that contradict or repeat each other, and fractional byte counts, are refused. */
static void test_contradictions(void) {
    pl_err e = {0};
    cost_model *m = cost_model_open("uniform:layers=2,fwd_s=1e-3,bwd_s=1,bwd_in_s=1,bwd_w_s=1", &e);
    CU_ASSERT_PTR_NULL(m);
    expect_msg(&e, "model uniform: give bwd_s, or bwd_in_s and bwd_w_s, not both");
    cost_model_free(m);
    m = cost_model_open("uniform:layers=2,fwd_flops=1e9,bwd_w_s=1", &e);
    CU_ASSERT_PTR_NULL(m);
    expect_msg(&e, "model uniform: give times (bwd_w_s) or fwd_flops, not both");
    cost_model_free(m);
    m = cost_model_open("uniform:layers=2,fwd_flops=1e9", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].fwd_flops, 1e9, 0);
    cost_model_free(m);
    m = cost_model_open("uniform:layers=2,fwd_s=1e-3,bwd_in_s=1,bwd_w_s=0.5", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_DOUBLE_EQUAL(m->layer[1].bwd_in_s + m->layer[1].bwd_w_s, 1.5, 0);
    cost_model_free(m);
    m = cost_model_open("uniform:layers=2,param_bytes=100.5", &e);
    CU_ASSERT_PTR_NULL(m);
    expect_msg(&e, "model uniform: param_bytes 100.5 is not a whole number");
    cost_model_free(m);
    /* a metadata key twice, on two lines or on one; a measured link's key too */
    expect_csv_refused("#@ microbatch_size=2\n#@ microbatch_size=3\n" CSV_HEAD "0,a,1,1,1,4,4,4\n",
                       "p.csv:2: metadata key 'microbatch_size' given twice (first on line 1)");
    expect_csv_refused("#@ name=a dtype_bytes=2 name=b\n" CSV_HEAD "0,a,1,1,1,4,4,4\n",
                       "p.csv:1: metadata key 'name' given twice (first on line 1)");
    expect_csv_refused("#@ p2p_Bps=1e9 p2p_latency_s=0\n#@ p2p_Bps=2e9\n" CSV_HEAD "0,a,1,1,1,4,4,4\n",
                       "p.csv:2: metadata key 'p2p_Bps' given twice (first on line 1)");
    /* byte counts are whole numbers of at most 4.6e18 */
    expect_csv_refused(CSV_HEAD "0,a,1,1,1,100.5,4,4\n", "p.csv:2: value 100.5 for 'param_bytes' is not a whole number");
    expect_csv_refused(CSV_HEAD "0,a,1,1,1,4,4,1e19\n",
                       "p.csv:2: value 1e19 for 'stash_bytes' is too large (more than 4.6e18 bytes)");
    expect_csv_refused("#@ input_bytes=7.5\n" CSV_HEAD "0,a,1,1,1,4,4,4\n", "p.csv:1: input_bytes 7.5 is not a whole number");
    static const char good[] = "#@ microbatch_size=2 input_bytes=1e3\n" CSV_HEAD "0,a,1,1,1,1e2,4,4\n";
    m = cost_model_read_csv("p.csv", good, strlen(good), &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(m->layer[0].param_bytes, 100);
    CU_ASSERT_EQUAL(m->cut_bytes[0], 1000);
    cost_model_free(m);
}

/* Times whose sum overflows a double: model --stages and partition refuse them as simulate
 * does ("... overflowed ...: compute or transfer times too large to add up"), exit 1; each
 * layer's own values are finite here, only the stage's and the layer's sums are not. */
static void test_time_overflow(void) {
    expect_cli("model --model 'uniform:layers=8,fwd_s=1e308,bwd_s=1e308' --stages 2", 1,
               "model uniform, the stage of layers 0-3: its time overflowed (F inf s): compute or transfer times too "
               "large to add up");
    expect_cli("partition --workers 2 --model 'uniform:layers=8,fwd_s=1e308,bwd_s=1e308'", 1,
               "partition: layer 0: its time overflowed (F + I + W inf s)");
    expect_cli("partition --workers 2 --model 'uniform:layers=8,fwd_s=1e308,bwd_s=0'", 1,
               "partition: the time of all 8 layers overflowed (sum inf s)");
    pl_err e = {0};
    cost_model *m = cost_model_open("uniform:layers=2,fwd_s=1e308", &e); /* B = 2 x fwd_s: inf */
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    cost_opts o;
    cost_opts_init(&o, m);
    double f, i, w;
    CU_ASSERT_EQUAL(cost_layer_times(m, 1, NULL, &o, &f, &i, &w, &e), PL_EINPUT);
    expect_msg(&e, "model uniform, layer 1: its time overflowed (I inf s)");
    cost_model_free(m);
}

void test_input_rules_register(void) {
    static const pl_test_case cases[] = {
        {"a byte order mark is skipped by every reader", test_bom_every_reader},
        {"a directory or an empty name as a file", test_read_file_refusals},
        {"contradictory, repeated and fractional values are refused", test_contradictions},
        {"time sums that overflow are refused by model --stages and partition", test_time_overflow},
        {NULL, NULL},
    };
    pl_test_suite("input rules", cases);
}
