/* exec_module_table.c: the one symbol the executor module pipelab-exec.so exports: its
 * entry-point table (exec_module.h), which the program's exec_module.c looks up after loading. */
#include "cli.h"
#include "exec_module.h"

__attribute__((visibility("default"))) const cli_exec_module pipelab_exec_module = {
    .abi = CLI_EXEC_MODULE_ABI,
    .run = cli_run,
    .profile = cli_profile,
};
