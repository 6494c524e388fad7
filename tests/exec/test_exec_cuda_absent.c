/* test_exec_cuda_absent.c: the CUDA backend where no GPU can be used (tests/exec_cuda covers it
 * where one can): `pipelab run` and `pipelab profile` with --backend cuda exit 1 naming what is
 * missing (the driver, or a device) and suggesting --backend cpu, and store nothing; and the
 * reasons cx_no_gpu_why gives for each finding (no driver, an old one, the toolkit's stub, every
 * GPU hidden by CUDA_VISIBLE_DEVICES, no device), which need no GPU either. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_cuda.h"
#include "exec_test.h"
#include "pl_test.h"
#ifdef PIPELAB_EXEC_CUDA
#include "cuda_int.h"
#endif

void exec_test_cuda_absent_register(void);

/* The small 2-rank run and profile the refusals are asked for. */
#define CUDA_RUN "run --kind 1f1b --ranks 2 --microbatches 4 --width 64 --depth 4 --timed 1 --backend cuda"
#define CUDA_PROFILE "profile --width 64 --depth 4 --reps 3 --backend cuda"

/* Returns 1 when the NVIDIA driver's library loads in this process. */
static int driver_loads(void) {
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != NULL;
}

/* Checks that out is one refusal naming what is missing and what to use instead. */
static void expect_refusal(const char *cmd, int rc, const char *out, int driver) {
    int ok = rc == 1 && out && strstr(out, "no usable GPU: ") && strstr(out, "use --backend cpu") &&
             strstr(out, driver ? "GPU" : "no NVIDIA driver found (libcuda.so.1 is not installed)");
    if (!ok) fprintf(stderr, "%s\nexit %d:\n%s\n", cmd, rc, out ? out : "");
    CU_ASSERT(ok);
}

/* Without a usable GPU, run (with a database, under any CUDA_VISIBLE_DEVICES, in bf16 with
 * --sm-split) and profile exit 1 with the reason and --backend cpu, and write no database. */
static void test_refused_without_gpu(void) {
    pl_err e;
    pl_err_clear(&e);
    if (!exec_cuda_built()) {
        pl_test_skip("the CUDA backend is not built");
        return;
    }
    if (exec_cuda_devices(&e) > 0) {
        pl_test_skip("a GPU is usable here (tests/exec_cuda runs on it)");
        return;
    }
    int driver = driver_loads();
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *db = pl_test_path(dir, "c.db");
    const char *envs[] = {"", "CUDA_VISIBLE_DEVICES= ", "CUDA_VISIBLE_DEVICES=0 ", "CUDA_VISIBLE_DEVICES=7,3 "};
    const char *args[] = {CUDA_RUN " --db %s", CUDA_RUN " --precision bf16 --sm-split --db %s",
                          CUDA_RUN " --precision tf32 --no-db", CUDA_PROFILE,
                          CUDA_PROFILE " --precision bf16 --sm-split --concurrency 2"};
    for (size_t i = 0; i < sizeof envs / sizeof *envs; i++)
        for (size_t k = 0; k < sizeof args / sizeof *args; k++) {
            char line[512], cmd[1024], *out = NULL;
            snprintf(line, sizeof line, args[k], db);
            snprintf(cmd, sizeof cmd, "%s%s %s", envs[i], PIPELAB_BIN, line);
            int rc = sh(cmd, &out);
            expect_refusal(cmd, rc, out, driver);
            free(out);
            CU_ASSERT(!pl_test_exists(db));
        }
    /* the library's own words, as the command line prints them */
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "use --backend cpu"));
    if (!driver) CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "libcuda.so.1 is not installed"));
    rmdir(dir);
    free(db);
    free(dir);
}

/* Each finding's reason: the missing driver first, whatever else holds; an old driver with both
 * versions; the toolkit's stub; CUDA_VISIBLE_DEVICES hiding every GPU; no device node; every one
 * ending in the way out. */
static void test_no_gpu_reasons(void) {
#ifdef PIPELAB_EXEC_CUDA
    static const struct {
        cx_no_gpu w;
        const char *want[3];
    } cases[] = {
        {{cudaErrorInsufficientDriver, 0, 0, NULL, 0, 13000},
         {"no NVIDIA driver found (libcuda.so.1 is not installed)", "needs a GPU and its driver", NULL}},
        {{cudaErrorNoDevice, 0, 1, "", 0, 13000}, {"no NVIDIA driver found", NULL, NULL}},
        {{cudaErrorInsufficientDriver, 1, 1, NULL, 12020, 13000},
         {"supports CUDA up to 12.2", "built with CUDA 13.0", "newer driver"}},
        {{cudaErrorInsufficientDriver, 1, 1, NULL, 0, 13000}, {"cudaErrorInsufficientDriver", "CUDA 13.0", "newer driver"}},
        {{cudaErrorStubLibrary, 1, 0, NULL, 0, 13000}, {"stub", "LD_LIBRARY_PATH", NULL}},
        {{cudaErrorNoDevice, 1, 1, "", 13000, 13000}, {"CUDA_VISIBLE_DEVICES='' hides every GPU", "unset it", NULL}},
        {{cudaSuccess, 1, 1, "9", 13000, 13000}, {"CUDA_VISIBLE_DEVICES='9'", NULL, NULL}},
        {{cudaErrorNoDevice, 1, 0, NULL, 13000, 13000}, {"no /dev/nvidiactl", NULL, NULL}},
        {{cudaErrorNoDevice, 1, 1, NULL, 13000, 13000}, {"the NVIDIA driver finds no GPU", NULL, NULL}},
        {{cudaErrorDevicesUnavailable, 1, 1, NULL, 13000, 13000}, {"cudaErrorDevicesUnavailable", NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pl_err e;
        pl_err_clear(&e);
        cx_no_gpu_why(&cases[i].w, &e);
        CU_ASSERT_EQUAL(e.code, PL_EINPUT);
        int ok = strncmp(e.msg, "no usable GPU: ", 15) == 0 && strstr(e.msg, "use --backend cpu");
        for (int k = 0; k < 3 && cases[i].want[k]; k++) ok = ok && strstr(e.msg, cases[i].want[k]);
        if (!ok) fprintf(stderr, "case %zu: %s\n", i, e.msg);
        CU_ASSERT(ok);
    }
#else
    pl_test_skip("the CUDA backend is not built");
#endif
}

void exec_test_cuda_absent_register(void) {
    static const pl_test_case cases[] = {
        {"--backend cuda without a usable GPU: exit 1, the reason, --backend cpu, no database", test_refused_without_gpu},
        {"no usable GPU: the reason of each finding", test_no_gpu_reasons},
        {NULL, NULL}};
    pl_test_suite("exec cuda absent", cases);
}
