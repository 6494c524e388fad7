/* exec_module.c: `pipelab run` and `pipelab profile` in the program: each loads the executor
 * module pipelab-exec.so (exec_module.h) and calls the command there. The module is looked up
 * at $PIPELAB_EXEC_MODULE when set, else beside the program (a build tree: build/cli/), else at
 * the install location relative to the program's folder (BINDIR/../LIBDIR/pipelab/). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "exec_module.h"

/* Room for a path to the module. */
#define MODULE_PATH_MAX (PATH_MAX + 64)

/* Writes the folder of the running program, with its final '/', into dir; 0, or -1 when
 * /proc/self/exe cannot be read. */
static int program_dir(char *dir, size_t n) {
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    if (len <= 0) return -1;
    dir[len] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    slash[1] = '\0';
    return 0;
}

/* Loads the module at path and checks its table: the table, or NULL after printing why, naming
 * the path and what the loader said. */
static const cli_exec_module *load(const char *path) {
    /* The executor gives each worker one BLAS thread (exec_platform_blas_init); saying so before
     * the module loads spares OpenBLAS starting, at load, a thread pool nothing would use. A
     * value the user set is kept. */
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "pipelab: cannot load the executor module %s: %s\n", path, dlerror());
        return NULL;
    }
    const cli_exec_module *m = dlsym(h, CLI_EXEC_MODULE_SYMBOL);
    if (!m) {
        fprintf(stderr, "pipelab: %s is not a pipelab executor module: %s\n", path, dlerror());
        return NULL;
    }
    if (m->abi != CLI_EXEC_MODULE_ABI || !m->run || !m->profile) {
        fprintf(stderr, "pipelab: the executor module %s has interface %d, this program needs %d (from another build)\n",
                path, m->abi, CLI_EXEC_MODULE_ABI);
        return NULL;
    }
    return m;
}

/* The module's table, or NULL after printing why on stderr. Loaded once, never unloaded (the
 * command runs until the program exits). */
static const cli_exec_module *module(void) {
    const char *env = getenv(CLI_EXEC_MODULE_ENV);
    if (env && *env) return load(env);
    char dir[PATH_MAX], beside[MODULE_PATH_MAX], installed[MODULE_PATH_MAX];
    if (program_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, "pipelab: cannot find the executor module: /proc/self/exe is unreadable; set %s\n",
                CLI_EXEC_MODULE_ENV);
        return NULL;
    }
    snprintf(beside, sizeof beside, "%s%s", dir, CLI_EXEC_MODULE_FILE);
    snprintf(installed, sizeof installed, "%s%s/%s", dir, PIPELAB_EXEC_MODULE_REL, CLI_EXEC_MODULE_FILE);
    if (access(beside, F_OK) == 0) return load(beside);
    if (access(installed, F_OK) == 0) return load(installed);
    fprintf(stderr, "pipelab: cannot find the executor module %s (looked for %s and %s); set %s to its path\n",
            CLI_EXEC_MODULE_FILE, beside, installed, CLI_EXEC_MODULE_ENV);
    return NULL;
}

/* `pipelab run`, in the executor module. */
int cli_run(int argc, char **argv) {
    const cli_exec_module *m = module();
    return m ? m->run(argc, argv) : CLI_EUSER;
}

/* `pipelab profile`, in the executor module. */
int cli_profile(int argc, char **argv) {
    const cli_exec_module *m = module();
    return m ? m->profile(argc, argv) : CLI_EUSER;
}
