/* test_layout.c: simulate's GPU-cluster layout on the command line: --megatron with Megatron-LM's
 * flag names gives the same run as pipelab's own flags; what does not divide, what contradicts
 * and what does not fit exits 1 with a message naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"

/* The 39.1B row of Megatron-LM's Table 1 as pipelab flags, and as a Megatron command line. */
#define MODEL39 "--model transformer:layers=48,hidden=8192,heads=64,seq=2048,vocab=51200 "
#define FLAGS39 MODEL39 "--tp 8 --pp 2 --gpus 512 --microbatch-size 4 --global-batch 1536 --recompute full"
#define MEGATRON39                                                                                         \
    "--megatron '--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 --num-layers 48 "        \
    "--hidden-size 8192 --num-attention-heads 64 --seq-length 2048 --max-position-embeddings 2048 "       \
    "--micro-batch-size 4 --global-batch-size 1536 --lr 6.0e-5 --checkpoint-activations --fp16 "          \
    "--train-iters 100'"
#define SIMULATE "( cd /tmp && '" PIPELAB_BIN "' simulate --no-db --hardware dgx-a100 "

/* Runs simulate with args (stderr to /dev/null unless keep_err); returns its output, rc in *rc. */
static char *simulate(const char *args, int keep_err, int *rc) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, SIMULATE "%s --format csv %s)", args, keep_err ? "" : "2>/dev/null");
    char *out = NULL;
    *rc = pl_test_run(cmd, &out);
    return out;
}

/* --megatron gives byte for byte the run of the equivalent flags, and lists the arguments that
 * do not change timing once on stderr. */
static void test_megatron_equals_flags(void) {
    int rc1, rc2, rc3;
    char *a = simulate(FLAGS39, 0, &rc1);
    char *b = simulate("--gpus 512 " MEGATRON39, 0, &rc2);
    CU_ASSERT_EQUAL(rc1, 0);
    CU_ASSERT_EQUAL(rc2, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "tflops_per_gpu"));
    char *c = simulate("--gpus 512 " MEGATRON39 " >/dev/null", 1, &rc3);
    CU_ASSERT_PTR_NOT_NULL(c && strstr(c, "pipelab: --megatron: ignored (no effect on timing): "
                                          "--max-position-embeddings --lr --train-iters\n"));
    /* argparse's --flag=value form reads as --flag value, and a flag given twice takes its last
     * value, as argparse does */
    int rc4;
    char *d = simulate("--gpus 512 --megatron '--tensor-model-parallel-size=8 --pipeline-model-parallel-size 4 "
                       "--pipeline-model-parallel-size=2 --num-layers=48 --hidden-size=8192 --num-attention-heads 64 "
                       "--seq-length=2048 --max-position-embeddings=2048 --micro-batch-size=4 --global-batch-size=1536 "
                       "--lr=6.0e-5 --checkpoint-activations --fp16 --train-iters=100'",
                       0, &rc4);
    CU_ASSERT_EQUAL(rc4, 0);
    CU_ASSERT(d && strcmp(d, a) == 0);
    free(a);
    free(b);
    free(c);
    free(d);
}

/* One refused command line: its arguments and the message it must print. */
typedef struct refused {
    const char *args, *msg;
} refused;

static const refused refusals[] = {
    {MODEL39 "--tp 8 --pp 2 --gpus 500 --global-batch 1536", "pipelab: --gpus 500 does not divide into tensor 8 x pipeline 2 groups\n"},
    {"--model transformer:layers=48,hidden=7680,heads=60,seq=2048,vocab=51200 --tp 8 --gpus 64",
     "pipelab: 60 attention heads do not divide over --tp 8 tensor-parallel ranks\n"},
    {MODEL39 "--tp 8 --pp 2 --gpus 512 --microbatch-size 4 --global-batch 1000",
     "pipelab: --global-batch 1000 is not a multiple of --microbatch-size 4 x --dp 32 = 128\n"},
    {MODEL39 "--tp 8 --pp 5 --gpus 40", "pipelab: 48 layers do not split into 5 pipeline stages x 1 chunks\n"},
    {"--megatron '--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 8 --fp16=1'",
     "pipelab: --megatron: --fp16 takes no value (got '--fp16=1')\n"},
    {MODEL39 "--tp 4 --megatron '--tensor-model-parallel-size 8'",
     "pipelab: --tp 4 contradicts --megatron's --tensor-model-parallel-size 8\n"},
    {MODEL39 "--recompute selective --megatron '--checkpoint-activations'",
     "pipelab: --recompute selective contradicts --megatron's full recomputation\n"},
    {"--megatron '--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 8 --fp16 --bf16'",
     "pipelab: --megatron: --fp16 and --bf16 contradict each other\n"},
    {"--megatron '--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 8 --checkpoint-activations "
     "--recompute-granularity selective'",
     "pipelab: --megatron: --recompute-granularity contradicts the recomputation set before (full)\n"},
    {NULL, NULL},
};

/* Each refusal exits 1 with its message; a model that does not fit names its memory by part. */
static void test_refused(void) {
    for (const refused *r = refusals; r->args; r++) {
        char args[1024];
        snprintf(args, sizeof args, "%s >/dev/null", r->args);
        int rc;
        char *err = simulate(args, 1, &rc);
        if (rc != 1 || !err || strcmp(err, r->msg) != 0)
            fprintf(stderr, "\n  simulate %s: want exit 1 and '%s', got %d and '%s'\n", r->args, r->msg, rc, err ? err : "");
        CU_ASSERT_EQUAL(rc, 1);
        CU_ASSERT(err && strcmp(err, r->msg) == 0);
        free(err);
    }
    int rc;
    char *err = simulate(MODEL39 "--tp 1 --pp 1 --gpus 512 --global-batch 512 >/dev/null", 1, &rc);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "pipelab: the model does not fit: pipeline rank 0 needs "));
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "(weights 78.19, gradients 78.19, optimizer 469.2, activations "));
    free(err);
}

/* pipelab model with the same layout: stage 0's memory (cost_stage_memory, 1F1B's 2 in flight)
 * is the simulator's peak of pipeline rank 0, and its stages are Megatron's split. */
static void test_model_agrees(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "( cd /tmp && '%s' model --hardware dgx-a100 " MODEL39 "--tp 8 --pp 2 --gpus 512 "
             "--microbatch 4 --global-batch 1536 --recompute full --format csv 2>&1 )", PIPELAB_BIN);
    char *model = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &model), 0);
    int rc;
    char *sim = simulate(FLAGS39, 0, &rc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(model);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sim);
    /* model: stage,first,end,...,memory_bytes (last column); simulate: peak_mem_bytes column */
    const char *row0 = strstr(model, "\n0,0,25,");
    CU_ASSERT_PTR_NOT_NULL_FATAL(row0);
    const char *eol = strchr(row0 + 1, '\n'), *comma = eol;
    while (comma > row0 && comma[-1] != ',') comma--;
    long long mem = atoll(comma);
    char want[64];
    snprintf(want, sizeof want, ",%.9g,", (double)mem);
    CU_ASSERT_PTR_NOT_NULL(strstr(sim, want)); /* peak_mem_bytes of rank 0 in the layout columns */
    CU_ASSERT_PTR_NOT_NULL(strstr(model, "\n1,25,50,"));
    free(model);
    free(sim);
}

/* A stored layout run keeps its figures (params_json.parallel), as simulate printed them. */
static void test_stored(void) {
    char dir[] = "/tmp/pipelab-test-layout-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' simulate --db %s/l.db --hardware dgx-a100 " FLAGS39 " --format json 2>&1", PIPELAB_BIN,
             dir);
    char *printed = NULL, *stored = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &printed), 0);
    snprintf(cmd, sizeof cmd, "'%s' db show 1 --db %s/l.db --format json 2>&1", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &stored), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(printed);
    CU_ASSERT_PTR_NOT_NULL_FATAL(stored);
    const char *a = strstr(printed, "\"parallel\":{"), *b = strstr(stored, "\"parallel\":{");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    size_t n = (size_t)(strchr(a, '}') - a);
    CU_ASSERT(strncmp(a, b, n + 1) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"tflops_per_gpu\":"));
    /* the record keeps every hardware key it was priced on, the GPU ones included */
    CU_ASSERT_PTR_NOT_NULL(strstr(stored, "\"gemm.attention_bandwidth\":0.47999999999999998"));
    CU_ASSERT_PTR_NOT_NULL(strstr(stored, "\"device.memory_efficiency\":0.88"));
    CU_ASSERT_PTR_NOT_NULL(strstr(stored, "\"collective.inter_efficiency\":0.84999999999999998"));
    free(printed);
    free(stored);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
}

void test_layout_cli_register(void) {
    static const pl_test_case cases[] = {
        {"--megatron gives the run of the equivalent flags", test_megatron_equals_flags},
        {"layouts that do not divide, contradict or fit are refused", test_refused},
        {"pipelab model's stage memory is the simulator's peak", test_model_agrees},
        {"a stored layout run keeps its figures", test_stored},
        {NULL, NULL},
    };
    pl_test_suite("cli GPU-cluster layout", cases);
}
