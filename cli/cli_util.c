/* cli_util.c: error printing, flag parsing and output helpers shared by the subcommands. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

int cli_fail(const pl_err *e) {
    fprintf(stderr, "pipelab: %s\n", e->msg[0] ? e->msg : "unknown error");
    return CLI_EUSER;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pipelab %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'pipelab %s --help')\n", cmd);
    return CLI_EUSAGE;
}

int cli_int_arg(const char *cmd, const char *flag, const char *val, long lo, long hi, int *out) {
    long v;
    if (pl_parse_long(val, lo, hi, &v) != 0) {
        cli_usage_error(cmd, "%s needs a whole number between %ld and %ld (got '%s')", flag, lo, hi, val ? val : "");
        return -1;
    }
    *out = (int)v;
    return 0;
}

int cli_isatty(int fd) { return isatty(fd); }

int cli_write_output(const char *path, const pl_buf *b) {
    if (b->failed) {
        fprintf(stderr, "pipelab: out of memory building the output\n");
        return CLI_EUSER;
    }
    if (!path || strcmp(path, "-") == 0) {
        if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len) {
            fprintf(stderr, "pipelab: cannot write to standard output\n");
            return CLI_EUSER;
        }
        return fflush(stdout) == 0 ? CLI_OK : CLI_EUSER;
    }
    pl_err e;
    pl_err_clear(&e);
    if (pl_write_file(path, b->data ? b->data : "", b->len, &e) != PL_OK) return cli_fail(&e);
    return CLI_OK;
}

int cli_filter_opt(const char *cmd, int c, const char *arg, store_filter *f) {
    switch (c) {
    case CLI_O_TAG: f->tag = arg; return CLI_OK;
    case CLI_O_STAG: f->sim_tag = arg; return CLI_OK;
    case CLI_O_MTAG: f->measured_tag = arg; return CLI_OK;
    case CLI_O_SCHED: f->schedule = arg; return CLI_OK;
    case CLI_O_RANKS: return cli_int_arg(cmd, "--ranks", arg, 1, 1 << 20, &f->ranks) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_STAGES: return cli_int_arg(cmd, "--stages", arg, 1, 1 << 20, &f->stages) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_MB: return cli_int_arg(cmd, "--microbatches", arg, 1, 1 << 30, &f->microbatches) ? CLI_EUSAGE : CLI_OK;
    case CLI_O_CHUNKS: return cli_int_arg(cmd, "--chunks", arg, 1, 1 << 20, &f->chunks) ? CLI_EUSAGE : CLI_OK;
    default: return -1;
    }
}
