/* test_cli_inputs.c: the commands that read cost-model input (model, simulate, partition) refuse
 * it whole: a generator key given twice, a transformer spec without a key, a hardware file with a
 * value out of range (naming the file and the key's line), a NUL byte or no [device] section, a
 * profile with a NUL byte, and simulate's --replicas-stage for one stage twice; each exits
 * non-zero with its message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pl_test.h"

void test_cli_inputs_register(void);

/* A small simulate run on hardware HW (a preset or a path), completed by the caller. */
#define SIM_ON(hw) "simulate --kind 1f1b --ranks 2 --microbatches 2 --no-db --hardware " hw " "

/* Runs `pipelab args`: its exit status must be rc and its output must contain want. */
static void expect(const char *args, int rc, const char *want) { pl_test_cli_expect(args, rc, want); }

/* Writes text[0..len) to dir/name; returns the malloc'd path. */
static char *write_in(const char *dir, const char *name, const char *text, size_t len) {
    char *path = pl_test_path(dir, name);
    pl_err e = {0};
    CU_ASSERT_EQUAL(pl_write_file(path, text, len, &e), PL_OK);
    return path;
}

/* A generator key given twice: model, simulate and partition all refuse it (exit 1). */
static void test_duplicate_keys(void) {
    expect("model --hardware h100 --model 'mlp:width=64,depth=2,microbatch=4,depth=5'", 1,
           "pipelab: model mlp: 'depth' given twice");
    expect(SIM_ON("h100") "--model 'transformer:layers=2,hidden=64,heads=4,seq=16,vocab=100,layers=3'", 1,
           "model transformer: 'layers' given twice");
    expect("partition --workers 2 --model 'uniform:layers=4,fwd_s=1e-3,layers=8'", 1,
           "model uniform: 'layers' given twice");
    expect("model --model 'uniform:layers=4,fwd_s=1e-3'", 0, "4 layers");
}

/* A transformer spec without vocab names vocab; heads that do not divide hidden say so. */
static void test_transformer_missing(void) {
    expect("model --model transformer:layers=2,hidden=64,heads=5,seq=16,microbatch=1", 1,
           "pipelab: model transformer: 'vocab' is missing");
    expect("model --model transformer:layers=2,hidden=64,heads=5,seq=16,vocab=10,microbatch=1", 1,
           "pipelab: model transformer: heads (5) must divide hidden (64)");
}

/* Hardware files: values out of range name the file and the key's line (not the name the file
 * gives, h100's here), 0 and -1 bandwidths get the same range; a NUL byte and a file without a
 * [device] section are refused; --set names its flag. */
static void test_hardware_files(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    static const char head[] = "[hardware]\nname = h100\n[device]\nflops_fp32 = 1e12\n";
    static const struct {
        const char *name, *tail, *want;
    } bad[] = {
        {"eff2.ini", "efficiency = 2\n", "eff2.ini:5: device.efficiency must be in (0, 1] (fraction of peak), got '2'"},
        {"bw0.ini", "[link.intra]\nbandwidth = 0\n", "bw0.ini:6: link.intra.bandwidth must be > 0 (bytes/s), got '0'"},
        {"bwm.ini", "[link.intra]\nbandwidth = -1\n", "bwm.ini:6: link.intra.bandwidth must be > 0 (bytes/s), got '-1'"},
        {"gemm5.ini", "[gemm]\nmax_efficiency = 5\n", "gemm5.ini:6: gemm.max_efficiency must be in [0, 1]"},
        {"sect.ini", "[gemmm]\n", "sect.ini:5: unknown section [gemmm] (known: hardware, device, topology, link.intra, "
                                   "link.inter, gemm, collective)"},
        {NULL, NULL, NULL},
    };
    char args[4096], text[512];
    for (int k = 0; bad[k].name; k++) {
        snprintf(text, sizeof text, "%s%s", head, bad[k].tail);
        char *path = write_in(dir, bad[k].name, text, strlen(text));
        snprintf(args, sizeof args, SIM_ON("%s") "--model uniform:layers=4,fwd_s=1e-3", path);
        expect(args, 1, bad[k].want);
        remove(path);
        free(path);
    }
    static const char nul[] = "[hardware]\nname = x\n[device]\nflops_fp32 = 1\0e12\n";
    char *path = write_in(dir, "nul.ini", nul, sizeof nul - 1);
    snprintf(args, sizeof args, SIM_ON("%s") "--model uniform:layers=4,fwd_s=1e-3", path);
    expect(args, 1, "nul.ini:4: not a text file (a NUL byte at offset 43)");
    remove(path);
    free(path);
    path = write_in(dir, "empty.ini", "", 0);
    snprintf(args, sizeof args, SIM_ON("%s") "--model uniform:layers=4,fwd_s=1e-3", path);
    expect(args, 1, "empty.ini: no [device] section");
    snprintf(args, sizeof args, "model --hardware %s --model uniform:layers=4,fwd_s=1e-3", path);
    expect(args, 1, "empty.ini: no [device] section");
    remove(path);
    free(path);
    expect(SIM_ON("h100") "--model uniform:layers=4,fwd_s=1e-3 --set device.efficiency=3", 1,
           "--set device.efficiency=3: device.efficiency must be in (0, 1]");
    rmdir(dir);
    free(dir);
}

/* A profile CSV with a NUL byte is refused with its line, not read up to the NUL. */
static void test_profile_nul(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    static const char csv[] = "layer,name,fwd_s,bwd_in_s,bwd_w_s,param_bytes,out_bytes,stash_bytes\n"
                              "0,a,1,1,1,0,0,0\n\0" "1,b,x\n";
    char *path = write_in(dir, "p.csv", csv, sizeof csv - 1);
    char args[4096];
    snprintf(args, sizeof args, "model --model %s", path);
    expect(args, 1, "p.csv:3: not a text file (a NUL byte at offset");
    remove(path);
    free(path);
    rmdir(dir);
    free(dir);
}

/* simulate's and run's --replicas-stage for one stage twice is refused (usage, exit 2); two
 * stages are fine. */
static void test_replicas_stage_twice(void) {
    expect("simulate --kind 1f1b --ranks 2 --microbatches 4 --no-db --replicas-stage 0=2 --replicas-stage 0=3", 2,
           "--replicas-stage 0=3: stage 0 is given twice (first 0=2)");
    expect("run --kind 1f1b --ranks 2 --microbatches 4 --no-db --replicas-stage 1=2 --replicas-stage 1=3", 2,
           "pipelab run: --replicas-stage 1=3: stage 1 is given twice (first 1=2)");
    expect("simulate --kind 1f1b --ranks 2 --microbatches 4 --no-db --replicas-stage 0=2 --replicas-stage 1=3", 0,
           "bubble_fraction");
}

/* Counts the fields of one CSV line (RFC 4180 quoting) starting at s; moves *s past its end. */
static int csv_fields(const char **s) {
    int n = 1, quoted = 0;
    for (; **s && (quoted || **s != '\n'); (*s)++) {
        if (**s == '"') quoted = !quoted;
        else if (**s == ',' && !quoted) n++;
    }
    if (**s) (*s)++;
    return n;
}

/* model --format csv of PipeDream's AlexNet profile, whose layer names hold commas
 * ("Conv2d(3, 64, kernel_size=(11, 11), ...)"): every row has the header's 10 fields. */
static void test_model_csv_quoted(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s model --model %s/../cost_models/profiles/pipedream/alexnet.graph.txt --format csv",
             PIPELAB_BIN, PIPELAB_TESTS_DIR);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, &out), 0);
    int rows = 0, bad = 0;
    for (const char *s = out; s && *s;) {
        rows++;
        bad += csv_fields(&s) != 10;
    }
    CU_ASSERT(rows > 10);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, ",\"Conv2d(3, 64, kernel_size=(11, 11)"));
    free(out);
}

void test_cli_inputs_register(void) {
    static const pl_test_case cases[] = {
        {"a generator key given twice (model, simulate, partition)", test_duplicate_keys},
        {"transformer spec: the missing key, heads divide hidden", test_transformer_missing},
        {"hardware files: FILE:LINE ranges, NUL, empty, --set", test_hardware_files},
        {"profile CSV with a NUL byte", test_profile_nul},
        {"--replicas-stage for one stage twice", test_replicas_stage_twice},
        {"model --format csv quotes names with commas", test_model_csv_quoted},
        {NULL, NULL},
    };
    pl_test_suite("cost-model input on the command line", cases);
}
