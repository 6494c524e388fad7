/* main.c: the pipelab program: dispatches to one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#ifdef PIPELAB_HAVE_PL_COST
#include "cost.h"
#endif
#ifdef PIPELAB_HAVE_PL_EXEC
#include "exec.h"
#include "exec_module.h"
#endif
#ifdef PIPELAB_HAVE_PL_RESULTS
#include "store.h"
#endif

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

static const subcommand commands[] = {
    {"schedule", cli_schedule, "generate, load, validate, convert and draw pipeline schedules"},
    {"simulate", cli_simulate, "simulate a schedule on described hardware: time, bubbles, memory"},
    {"model", cli_model, "load or generate a model; print its layers and per-stage costs"},
    {"partition", cli_partition, "split a model into pipeline stages (PipeDream planner, balanced split)"},
    {"calibrate", cli_calibrate, "fit efficiency, latency and bandwidth to measured timings; write a hardware file"},
    {"compare", cli_compare, "predicted against measured runs of one configuration: errors, MAPE"},
    {"plot", cli_plot, "draw figures from the database with gnuplot (timeline, bubble, throughput, memory, accuracy)"},
    {"db", cli_db, "list, show, export and merge results databases"},
    {"run", cli_run, "execute a schedule for real on the CPU executor; measured beside predicted"},
    {"profile", cli_profile, "time one block's F, I and W on this machine; write the profile CSV"},
    {NULL, NULL, NULL},
};

/* The environment variables pipelab reads, each named where it is read, with what it does. */
static const struct { const char *name, *what; } environment[] = {
    {SCHED_MAX_MEMORY_ENV, "memory pipelab may use, as --max-memory (8e9, 16GiB); the flag wins"},
    {PL_PROGRESS_ENV, "0 turns the progress bar off (it is drawn on a terminal only)"},
    {PL_PROGRESS_AFTER_ENV, "seconds of work before the progress bar appears (default 1)"},
#ifdef PIPELAB_HAVE_PL_COST
    {COST_HARDWARE_DIR_ENV, "a folder of hardware files NAME.ini, looked up before the presets"},
#endif
#ifdef PIPELAB_HAVE_PL_RESULTS
    {STORE_GNUPLOT_ENV, "the gnuplot program pipelab plot runs (default: gnuplot on PATH)"},
    {STORE_GNUPLOT_TIMEOUT_ENV, "seconds one gnuplot run may take before pipelab plot stops it and fails (default " PL_XSTR(STORE_GNUPLOT_TIMEOUT_S) ")"},
#endif
#ifdef PIPELAB_HAVE_PL_EXEC
    {EXEC_CUDA_SYNC_ENV, "1: the CUDA backend synchronizes after every action (debugging)"},
    {CLI_EXEC_MODULE_ENV, "the executor module (" CLI_EXEC_MODULE_FILE ") run and profile load, instead of the one beside pipelab or installed"},
#endif
};

/* Prints the list of subcommands and the environment variables. */
static void usage(FILE *f) {
    fprintf(f, "usage: pipelab COMMAND [options]   (pipelab COMMAND --help for details)\n\ncommands:\n");
    for (const subcommand *c = commands; c->name; c++) fprintf(f, "  %-10s %s\n", c->name, c->summary);
    fprintf(f, "\nenvironment:\n");
    for (size_t i = 0; i < sizeof environment / sizeof environment[0]; i++)
        fprintf(f, "  %-24s %s\n", environment[i].name, environment[i].what);
}

/* Runs the subcommand argv[1] names (its argv starting at the name); returns its exit code, or
 * CLI_EUSAGE for a missing or unknown one. */
int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EUSAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pipelab %s (%s)\n", PL_VERSION, PIPELAB_GIT_REV);
        return CLI_OK;
    }
    for (const subcommand *c = commands; c->name; c++)
        if (strcmp(argv[1], c->name) == 0) return c->run(argc - 1, argv + 1);
    fprintf(stderr, "pipelab: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EUSAGE;
}
