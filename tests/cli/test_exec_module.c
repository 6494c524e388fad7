/* test_exec_module.c: `pipelab run` and `pipelab profile` live in the executor module
 * pipelab-exec.so, loaded by the program for those two commands only: the program itself links
 * neither OpenBLAS nor MPI; a run through the module stores what it prints; a missing or corrupt
 * module ($PIPELAB_EXEC_MODULE) is refused with its path and the loader's reason, exit 1; the
 * other commands never look for the module. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"

/* The n-th (0-based) comma-separated field of line as a number; -1 when absent. */
static double csv_field(const char *line, int n) {
    for (int k = 0; k < n && line; k++) {
        line = strchr(line, ',');
        if (line) line++;
    }
    return line ? atof(line) : -1;
}

/* The program does not link the executor's libraries (ldd lists what it loads at start). */
static void test_program_links_no_executor_libs(void) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "ldd '%s'", PIPELAB_BIN);
    if (pl_test_run(cmd, &out) != 0) {
        free(out);
        pl_test_skip("ldd does not run here: the program's libraries cannot be listed");
        return;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT(strstr(out, "libsqlite3") != NULL); /* ldd listed the libraries */
    CU_ASSERT(strstr(out, "libopenblas") == NULL);
    CU_ASSERT(strstr(out, "libmpi") == NULL);
    free(out);
}

/* A run through the module (named by $PIPELAB_EXEC_MODULE, the one beside the program) stores
 * the iteration time it prints, with the ranks, microbatches and timed passes it was given. */
static void test_run_through_module(void) {
    char *dir = pl_test_tmpdir(), cmd[4096], bin_dir[2048], *out = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    snprintf(bin_dir, sizeof bin_dir, "%s", PIPELAB_BIN);
    char *slash = strrchr(bin_dir, '/');
    CU_ASSERT_PTR_NOT_NULL_FATAL(slash);
    *slash = '\0';
    snprintf(cmd, sizeof cmd,
             "{ PIPELAB_EXEC_MODULE='%s/pipelab-exec.so' '%s' run --kind 1f1b --ranks 2 --microbatches 4 "
             "--model mlp:width=32,depth=4,microbatch=4 --timed 3 --oversubscribe --db '%s/m.db' --format csv 2>/dev/null; }",
             bin_dir, PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    const char *row = out ? strchr(out, '\n') : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    CU_ASSERT(strncmp(out, "kind,ranks,stages,microbatches,iterations_per_pass,width,ffn,depth,microbatch_size,iteration_time_s", 97) == 0);
    double printed = csv_field(row + 1, 9);
    CU_ASSERT(printed > 0);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' db show 1 --db '%s/m.db' --format json", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT(out && strstr(out, "\"kind\": \"measured\"") != NULL);
    double stored = pl_test_json_number(out, "iteration_time_s");
    CU_ASSERT_DOUBLE_EQUAL(stored, printed, 1e-8 * printed); /* the CSV prints 9 digits */
    CU_ASSERT_EQUAL(pl_test_json_number(out, "ranks"), 2);
    CU_ASSERT_EQUAL(pl_test_json_number(out, "microbatches"), 4);
    CU_ASSERT_EQUAL(pl_test_json_number(out, "repetitions"), 3);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* $PIPELAB_EXEC_MODULE at a missing file, then at a file that is not a shared object: run and
 * profile exit 1 naming the path and why the loader refused it; simulate never loads it. */
static void test_bad_module(void) {
    char *dir = pl_test_tmpdir(), cmd[2048], path[1024], *out = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    snprintf(path, sizeof path, "%s/no-such-module.so", dir);
    static const char *const cmds[] = {"run --help", "profile --help"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "PIPELAB_EXEC_MODULE='%s' '%s' %s", path, PIPELAB_BIN, cmds[k]);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
        char want[1200];
        snprintf(want, sizeof want, "pipelab: cannot load the executor module %s: ", path);
        CU_ASSERT(out && strstr(out, want) != NULL && strstr(out, "No such file or directory") != NULL);
        CU_ASSERT(out && strstr(out, "usage:") == NULL);
        free(out);
    }
    /* a text file named .so: the loader's reason (not an ELF file) */
    snprintf(path, sizeof path, "%s/corrupt.so", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("not a shared object\n", f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "PIPELAB_EXEC_MODULE='%s' '%s' run --kind 1f1b --ranks 2 --microbatches 2 --no-db", path,
             PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    char want[2200];
    snprintf(want, sizeof want, "pipelab: cannot load the executor module %s: %s: ", path, path);
    CU_ASSERT(out && strstr(out, want) != NULL);
    free(out);
    /* the other commands do not need the module */
    snprintf(cmd, sizeof cmd, "PIPELAB_EXEC_MODULE='%s' '%s' simulate --kind 1f1b --ranks 2 --microbatches 2 --no-db",
             path, PIPELAB_BIN);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    free(out);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

void test_exec_module_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"the program links neither OpenBLAS nor MPI", test_program_links_no_executor_libs},
        {"run through the module stores what it prints", test_run_through_module},
        {"a missing or corrupt module: its path and the loader's reason, exit 1", test_bad_module},
        {NULL, NULL},
    };
    pl_test_suite("cli executor module", tcases);
}
