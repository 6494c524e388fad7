/* cmd_profile.c: `pipelab profile`: time one dense block's F, I, W and STEP on one worker or P at
 * once (median of repetitions) and write the cost model's profile CSV, the input of predictions for this machine. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifdef PIPELAB_HAVE_PL_EXEC
#include "exec_cuda.h"
#include "exec_drive.h"

static const char help_text[] =
    "usage: pipelab profile [--width H] [--depth L] [--ffn F] [--microbatch-size B] [options]\n"
    "\n"
    "Times the forward (F), input-gradient (I) and weight-gradient (W) of one dense block of the\n"
    "executor's model (Linear H->F, GELU, Linear F->H, residual; fp32, one BLAS thread) on this\n"
    "thread, --reps times after one warm-up, and writes the medians as the cost model's profile\n"
    "CSV: L identical rows (every block has the same shape) with seconds, FLOPs and sizes per\n"
    "microbatch of B rows. `pipelab run --profile FILE` and `pipelab simulate --model FILE` read it.\n"
    "It also times the optimizer STEP of one block (SGD over its parameters); the comment line\n"
    "\"# pipelab-exec concurrency=P step_s=S\" records both, and `pipelab run` predicts STEP from it.\n"
    "\n"
    "  --width H             hidden size (default 256)\n"
    "  --depth L             blocks (rows of the profile; default 8)\n"
    "  --ffn F               inner size (default 4 H)\n"
    "  --microbatch-size B   rows per microbatch (default 16)\n"
    "  --reps N              repetitions, the median is kept (default 50)\n"
    "  --seed N              weights and inputs of the timed block (default 1)\n"
    "  --concurrency P       time on P threads at once, pinned to cores like `pipelab run`'s P\n"
    "                        ranks, each on its own ceil(L / P) blocks: a run computes on all its\n"
    "                        ranks at once, sharing caches and memory bandwidth (default 1: one\n"
    "                        thread alone). Profile with P = the run's ranks to predict it.\n"
    "  --backend cpu|cuda    profile on this CPU (default) or on GPU 0 (CUDA events; the profile\n"
    "                        `pipelab run --backend cuda` predicts from)\n"
    "  --precision P         cuda: GEMM operands fp32 (default), tf32 or bf16\n"
    "  --sm-split            cuda: time inside a green context holding 1/P of the SMs (P =\n"
    "                        --concurrency): the share each of P ranks sharing a GPU gets\n"
    "  -o, --output FILE     write the CSV there and print a summary (default: CSV on stdout)\n"
    "\n"
    "exit status: 0 ok, 1 bad input, 2 bad usage\n";

enum { O_WIDTH = 1000, O_DEPTH, O_FFN, O_MBS, O_REPS, O_SEED, O_CONC, O_OUT, O_BACKEND, O_PREC, O_SMSPLIT, O_HELP };

static const struct option long_opts[] = {
    {"width", required_argument, 0, O_WIDTH}, {"depth", required_argument, 0, O_DEPTH},
    {"ffn", required_argument, 0, O_FFN}, {"microbatch-size", required_argument, 0, O_MBS},
    {"reps", required_argument, 0, O_REPS}, {"seed", required_argument, 0, O_SEED},
    {"concurrency", required_argument, 0, O_CONC}, {"output", required_argument, 0, O_OUT},
    {"backend", required_argument, 0, O_BACKEND}, {"precision", required_argument, 0, O_PREC},
    {"sm-split", no_argument, 0, O_SMSPLIT}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0},
};

int cli_profile(int argc, char **argv) {
    exec_config c;
    exec_config_default(&c);
    c.hidden = 256;
    c.layers = 8;
    c.microbatch_size = 16;
    int reps = 50, conc = 1;
    const char *path = NULL, *backend = "cpu", *prec = NULL;
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "o:", long_opts, NULL)) != -1) {
        switch (ch) {
        case O_WIDTH: if (cli_int_arg("profile", "--width", optarg, 1, 65536, &c.hidden)) return CLI_EUSAGE; break;
        case O_DEPTH: if (cli_int_arg("profile", "--depth", optarg, 1, 1 << 20, &c.layers)) return CLI_EUSAGE; break;
        case O_FFN: if (cli_int_arg("profile", "--ffn", optarg, 1, 1 << 20, &c.ffn)) return CLI_EUSAGE; break;
        case O_MBS: if (cli_int_arg("profile", "--microbatch-size", optarg, 1, 1 << 20, &c.microbatch_size)) return CLI_EUSAGE; break;
        case O_CONC: if (cli_int_arg("profile", "--concurrency", optarg, 1, 256, &conc)) return CLI_EUSAGE; break;
        case O_REPS: if (cli_int_arg("profile", "--reps", optarg, 1, 1 << 24, &reps)) return CLI_EUSAGE; break;
        case O_SEED: {
            long sd;
            if (cli_long_arg("profile", "--seed", optarg, 0, 0x7fffffffffffffffL - 2, &sd)) return CLI_EUSAGE;
            c.init_seed = (uint64_t)sd;
            c.data_seed = (uint64_t)sd + 2;
            break;
        }
        case 'o':
        case O_OUT: path = optarg; break;
        case O_BACKEND: backend = optarg; break;
        case O_PREC: prec = optarg; break;
        case O_SMSPLIT: c.sm_split = 1; break;
        case O_HELP: fputs(help_text, stdout); return CLI_OK;
        default: return cli_usage_error("profile", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("profile", "unexpected argument '%s'", argv[optind]);
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda"))
        return cli_usage_error("profile", "--backend must be cpu or cuda (got '%s')", backend);
    int cuda = strcmp(backend, "cuda") == 0;
    if (prec && exec_precision_parse(prec, &c.precision))
        return cli_usage_error("profile", "--precision must be fp32, tf32 or bf16 (got '%s')", prec);
    if (!cuda && (c.precision != EXEC_PREC_FP32 || c.sm_split))
        return cli_usage_error("profile", "--precision other than fp32 and --sm-split need --backend cuda");
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    pl_err e;
    pl_err_clear(&e);
    pl_buf out;
    pl_buf_init(&out);
    exec_layer_profile p;
    int rc = CLI_OK;
    int prc = cuda ? exec_cuda_profile_csv(&c, reps, conc, host[0] ? host : NULL, &out, &p, &e)
                   : exec_profile_csv_n(&c, reps, conc, host[0] ? host : NULL, &out, &p, &e);
    if (prc != PL_OK) {
        rc = cli_fail(&e);
    } else {
        rc = cli_write_output(path, &out);
        if (rc == CLI_OK && path && strcmp(path, "-") != 0)
            printf("profile            %d blocks of width %d, ffn %d, microbatch %d: F %.6g s, I %.6g s, W %.6g s, "
                   "STEP %.6g s (median of %d, %d worker%s at once)\nwritten            %s\n",
                   c.layers, c.hidden, c.ffn ? c.ffn : 4 * c.hidden, c.microbatch_size, p.f_s, p.i_s, p.w_s, p.step_s,
                   reps, conc, conc == 1 ? "" : "s", path);
    }
    pl_buf_free(&out);
    return rc;
}

#else

/* Returns CLI_EUSER: this build has no executor. */
int cli_profile(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipelab: this build has no executor (exec/)\n");
    return CLI_EUSER;
}

#endif
