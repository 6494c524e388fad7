/* exec_module.h: the executor module pipelab-exec.so, which holds `pipelab run` and `pipelab
 * profile` with the executor (exec/) and its libraries (OpenBLAS, MPI, the CUDA runtime). The
 * program loads it for those two commands only (exec_module.c), so that the others start without
 * those libraries; the module exports one symbol, its entry-point table (exec_module_table.c). */
#ifndef PIPELAB_CLI_EXEC_MODULE_H
#define PIPELAB_CLI_EXEC_MODULE_H

/* The table's layout: a module whose abi differs is refused (an older or newer build). */
#define CLI_EXEC_MODULE_ABI 1
/* The name of the table the module exports. */
#define CLI_EXEC_MODULE_SYMBOL "pipelab_exec_module"
/* The module's file name, beside the program (a build) or in LIBDIR/pipelab/ (an install). */
#define CLI_EXEC_MODULE_FILE "pipelab-exec.so"
/* A path to the module, tried instead of the usual places. */
#define CLI_EXEC_MODULE_ENV "PIPELAB_EXEC_MODULE"

typedef struct cli_exec_module {
    int abi;                             /* CLI_EXEC_MODULE_ABI of the module's build */
    int (*run)(int argc, char **argv);   /* cli_run: `pipelab run` */
    int (*profile)(int argc, char **argv); /* cli_profile: `pipelab profile` */
} cli_exec_module;

#endif
