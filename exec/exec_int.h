/* exec_int.h: internals of the executor shared between its files: the model's math, the data,
 * the per-rank state the workers walk with, and the in-process transport. */
#ifndef EXEC_INT_H
#define EXEC_INT_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"

/* ---------------------------------------------------------------- shapes and math (model.c) */

/* The shape of one block and of a microbatch. */
typedef struct exec_dims {
    int h, f, b;
    int layers; /* L, scales W2's initial size (0 counts as 1) */
} exec_dims;

/* Floats of one block's parameters: W1 [f, h], b1 [f], W2 [h, f], b2 [h], in that order. */
size_t exec_block_floats(const exec_dims *d);

/* Fills the parameters of block `block` (p[exec_block_floats]) from seed: W1 ~ N(0, 1/h),
 * W2 ~ N(0, 1/(2 L f)) (GPT-2's residual scaling, so L blocks add O(1) to the residual stream),
 * biases ~ N(0, 0.01^2). Depends only on (seed, L, block, element). */
void exec_block_init(const exec_dims *d, uint64_t seed, int block, float *p);

/* Fills n floats with N(0, 1) numbers from (seed, stream), element by element. */
void exec_fill_normal(uint64_t seed, uint64_t stream, float *x, size_t n);

/* Forward of one block for b rows: hpre = x W1^T + b1 [b, f]; act = gelu(hpre) [b, f];
 * y = x + act W2^T + b2 [b, h]. y must not alias x. */
void exec_block_forward(const exec_dims *d, const float *p, const float *x, float *hpre,
                        float *act, float *y);
/* Input-gradient half of the backward: in place hd: hpre [b, f] -> dH [b, f]; gx [b, h] =
 * gy + dH W1 (skipped when gx is NULL). scratch holds b x f floats. */
void exec_block_backward_i(const exec_dims *d, const float *p, float *hd, const float *gy,
                           float *gx, float *scratch);
/* Weight-gradient half: accumulates into gp (the block's gradient, same layout as p):
 * dW1 += dH^T x, db1 += sum dH, dW2 += gy^T act, db2 += sum gy. */
void exec_block_backward_w(const exec_dims *d, const float *x, const float *act, const float *dh,
                           const float *gy, float *gp);
/* Turns y [b, h] in place into dL/dy for the MSE loss against t and returns the loss
 * mean((y - t)^2) (computed in double). */
double exec_mse_grad(const exec_dims *d, float *y, const float *t);

/* The data set: D microbatches of inputs and targets. */
typedef struct exec_data {
    int d;      /* D */
    float *x;   /* [D, b, h] inputs */
    float *t;   /* [D, b, h] targets: the target network's outputs */
} exec_data;

/* Builds the data set for cfg (inputs from data_seed, targets through the L-block target
 * network from target_seed). Returns PL_OK or PL_ENOMEM. */
int exec_data_build(const exec_config *cfg, exec_data *out, pl_err *e);
void exec_data_free(exec_data *dt);

/* Reads the calling thread's GEMM clock: *s = seconds spent inside the model's sgemm calls so
 * far, *flops = their FLOPs (2 M N K each). Differences over an interval give its GEMM time. */
void exec_gemm_clock(double *s, double *flops);

/* Returns the name of the BLAS in use and makes it use one thread per caller. */
const char *exec_blas_init(void);

/* Fills dims from cfg (f = 4h when 0). */
void exec_dims_of(const exec_config *cfg, exec_dims *d);

/* ---------------------------------------------------------------- the in-process transport */

/* Makes p endpoints sharing one set of mailboxes of capacity cap messages of at most
 * max_bytes each per rank; waits give up after timeout_s. Returns the array (free with
 * exec_threads_transport_free) or NULL and e. */
exec_transport *exec_threads_transport_new(int p, int cap, size_t max_bytes, double timeout_s,
                                           pl_err *e);
void exec_threads_transport_free(exec_transport *t, int p);
/* Makes waiting ranks spin up to spin_s on their mailbox (or the barrier) before sleeping; for
 * runs where every rank has a core of its own (0 = sleep at once, the default). */
void exec_threads_transport_spin(exec_transport *t, double spin_s);
/* Returns 1 and copies the abort reason when the run was aborted. */
int exec_threads_transport_why(exec_transport *t, pl_err *why);

/* ---------------------------------------------------------------- workers (worker.c) */

/* A pool of equal slots with reference counts; slot i is free when refs[i] == 0. */
typedef struct exec_pool {
    int cap;            /* slots */
    int used, peak;     /* slots in use now, and at most */
    int *refs;          /* [cap] */
    float *base;        /* [cap, stride], NULL in the dry walk */
    size_t slot_floats; /* floats of one slot (what a taken slot counts in memory) */
    size_t stride;      /* slot_floats rounded up to 16 floats: every slot starts on 64 bytes */
} exec_pool;

/* Per (stage, microbatch) progress flags. */
enum { XS_FDONE = 1, XS_GOUT = 2, XS_IDONE = 4 };

/* One stage held by a rank. */
typedef struct exec_xstage {
    int stage, block0, nb;  /* global stage, first block, blocks */
    size_t pfloats;         /* nb x block floats */
    exec_pool ver;          /* weight versions [cap, pfloats] */
    int cur;                /* the newest version */
    float *grad;            /* [pfloats] accumulated since the last STEP */
    float *mom;             /* [pfloats] momentum, NULL without */
    int nacc;               /* backward passes accumulated in grad */
    exec_pool act;          /* activations [cap, act floats]: x[1..nb-1] [b,h], H/dH [nb][b,f],
                             * A [nb][b,f] */
    exec_pool wg;           /* inner gradients from I until W [cap, (nb-1) b h]: g[1..nb-1] [b,h] */
    int *in_of, *gin_of, *act_of, *wg_of, *ver_of, *out_f, *out_b; /* [M] slot of each local
                             * microbatch in its pool, -1 none */
    unsigned char *flags;   /* [M] XS_* */
} exec_xstage;

/* The state of one rank's worker. Everything is allocated up front in `arena`. */
typedef struct exec_xrank {
    _Alignas(64) int r;     /* 64-byte aligned and sized: the ranks' states, which their threads
                             * write at every action, share no cache line */
    const sched *s;
    const exec_config *cfg;
    exec_dims d;
    int M;                  /* microbatches per pass: iterations x m */
    int nst;
    exec_xstage *st;        /* [nst] */
    int *loc;               /* [stages] local index of a stage, -1 elsewhere */
    exec_pool in;           /* stage inputs x0 [b,h] */
    exec_pool gin;          /* stage output gradients gout [b,h] */
    exec_pool out;          /* send staging [b,h] */
    float *scratch;         /* [b*f + b*h]: dA, a throw-away output */
    const exec_data *data;
    double *loss_mb;        /* [passes * M] shared; written only for the last stage */
    exec_transport *t;
    int dry;
    int pass;
    int64_t goff;           /* global microbatch of local mb 0 in this pass */
    exec_mem cur, peak;
    size_t pending_in_bytes;  /* stage inputs present before their F (received or handed over):
                               * buffers, not yet the cost model's stash */
    size_t model_peak_bytes;  /* most of weights + grads + optimizer + stash - pending_in_bytes at
                               * once: what the cost model's memory counts (exec_mem_predict) */
    float *arena;           /* the one float allocation */
    size_t arena_bytes;
    void *ints_mem;         /* bookkeeping (slot indices, references, flags) */
    int core;               /* pinned core, -1 none */
    /* measurement */
    double *pass_start_s, *pass_end_s, *busy_s, *comm_s; /* [passes] */
    double *gemm_s, *gemm_flops; /* [passes] inside the model's sgemm calls (exec_gemm_clock) */
    exec_op *ops;
    size_t n_ops, cap_ops;
    pl_err err;
    int rc;
    long at;                /* the action being executed (0-based), -1 between actions: where
                             * a stopped or vanished worker was (exec_run's messages) */
} exec_xrank;

/* Sets up rank r: walks its list once without data (checking it and sizing every pool), then
 * allocates once. Returns PL_OK, or an error naming the rank and action. */
int exec_xrank_init(exec_xrank *x, int r, const sched *s, const exec_config *cfg,
                    const int *blocks, const exec_data *data, double *loss_mb, pl_err *e);
void exec_xrank_free(exec_xrank *x);
/* The worker thread's body: warm-up and timed passes over the list (arg: exec_xrank *). A worker
 * whose thread ends early (pthread_exit between actions: EXEC_FAULT_EXIT) reports it from a
 * cleanup handler: x->rc, x->err naming the action it was on, the run aborted, the rank
 * finished. The thread is not cancellable while it walks. x stays with its owner (exec_run frees
 * it after the join; a rank that vanishes inside exec_run_rank never returns, so its state is
 * lost with the thread, as a crashed process's would be). */
void *exec_worker_main(void *arg);
/* Writes "action K (text) of pass P" (or "between actions of pass P") for where x is into buf. */
void exec_xrank_where(const exec_xrank *x, char *buf, size_t n);

#endif
