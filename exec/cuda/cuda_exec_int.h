/* cuda_exec_int.h: the CUDA executor's rank state and the pieces of its walker (cuda_walk.c) and
 * device state (cuda_mem.c) that the in-process driver (cuda_exec.c) and the MPI + NCCL driver
 * (cuda_nccl.c) share. */
#ifndef EXEC_CUDA_EXEC_INT_H
#define EXEC_CUDA_EXEC_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "cuda_int.h"
#include "exec_int.h"

/* cuBLAS workspace per rank (NVIDIA's advice for Hopper), taken from the rank's allocation. */
#define CX_BLAS_WS_BYTES ((size_t)32 << 20)

/* ---------------------------------------------------------------- shared state */

/* Where one RECV action's message lands: a slot on the receiver's GPU, filled by the one sender
 * whose SEND pairs with it. seq = pass + 1 once the sender has enqueued the copy and recorded
 * `arrived` after it. */
typedef struct cx_box {
    _Atomic int seq;
    cudaEvent_t arrived; /* the sender's event (its device and context) */
    float *dptr;         /* [b h] on the receiver's GPU */
    int dev;
} cx_box;

/* What the rank threads share: receive slots, the barrier, the abort reason. */
typedef struct cx_shared {
    int p;
    cx_box **box;   /* [p][nrecv[r]] */
    int *nrecv;     /* [p] */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int bar_count, bar_gen;
    int exit_count; /* ranks done with their GPU work (teardown waits for all: peers copy into
                     * each other's memory) */
    _Atomic int aborted;
    pl_err why;     /* the first failure (under mu) */
    double timeout_s;
    double spin_s;  /* longest a rank's host spins for a message before it naps (cx_spin_s) */
} cx_shared;

/* ---------------------------------------------------------------- the hand-off (cuda_walk.c)
 * A message from one rank's stream to another's, as the walk's SEND and RECV move it and the
 * profile times it (cuda_profile.c): the sender's communication stream waits for its compute so
 * far and copies the data into the receiver's box (cx_box_copy), records the box's `arrived`
 * after the copy, and the sender's host publishes the message's number (cx_box_publish); the
 * receiver's host waits for that number (cx_box_wait), then its compute stream waits for
 * `arrived` and copies the box out (cx_box_take). */

/* What cx_box_wait returns. */
enum { CX_WAIT_OK, CX_WAIT_ABORTED, CX_WAIT_TIMEOUT };
/* Enqueues on ms the copy of bytes from src (on GPU src_dev) into box b (on GPU b->dev). */
int cx_box_copy(const cx_box *b, const float *src, int src_dev, size_t bytes, cudaStream_t ms, pl_err *e);
/* Tells b's receiver that message seq has been enqueued, `arrived` recorded after it. */
void cx_box_publish(cx_box *b, int seq);
/* Waits on the host until b holds message seq: polls (spinning up to spin_s, then napping),
 * CX_WAIT_ABORTED as soon as *aborted is set, CX_WAIT_TIMEOUT after timeout_s. */
int cx_box_wait(cx_box *b, int seq, _Atomic int *aborted, double spin_s, double timeout_s);
/* Enqueues on cs the wait for b's `arrived` and the copy of bytes out of b into dst. */
int cx_box_take(const cx_box *b, float *dst, size_t bytes, cudaStream_t cs, pl_err *e);
/* Longest a host thread waiting for a message spins before it naps: EXEC_SPIN_S when each of
 * `threads` waiting threads can have a core of its own (a wake-up from a nap adds tens of
 * microseconds to every hand-off), else 0. */
double cx_spin_s(int threads);

/* One rank: the CPU worker's bookkeeping plus its device state. */
typedef struct cx_rank {
    exec_xrank x;            /* pools, stages, memory accounting, measurement; its host arena mirrors
                              * the device's */
    cx_shared *sh;
    int dev, green_n, green_i;
    cx_green green;
    cudaStream_t cs, ms;     /* compute, communication */
    cublasHandle_t blas;
    cx_gemm_ctx g;
    char *dmem;              /* the one device allocation */
    size_t dmem_bytes;
    float *d_arena;          /* device image of x.arena */
    uint16_t **d_verbf;      /* [nst] bf16 copies of each stage's version slots (bf16 only) */
    float *d_x, *d_t;        /* data set inputs / targets [D, b, h] (stage 0 / last stage only) */
    double *d_loss;          /* [passes M] */
    double *d_loss_part;     /* [CXK_MSE_BLOCKS] the loss's partial sums (cxk_mse_grad) */
    float *d_mbox;           /* [nrecv, al16(b h)] receive slots */
    int *send_rank, *send_slot, *recv_slot; /* [n actions] */
    cudaEvent_t *ev_act;     /* [2 n] start/end of each action of a pass */
    cudaEvent_t *ev_send;    /* [n] arrival events of SENDs (NULL elsewhere) */
    cudaEvent_t *ev_out;     /* [out.cap] when a send slot's copy is done */
    int *out_busy;           /* [out.cap] 1 = a copy may still read the slot */
    cudaEvent_t ev_p0, ev_end, ev_tmp, ev_join;
    cudaEvent_t *ev_gemm;    /* [2 cap_gemm] */
    int cap_gemm;
    int sync_each;           /* PIPELAB_CUDA_SYNC=1: drain after every action (names a failing kernel's action) */
    /* MPI processes (cuda_nccl.c): transfers by NCCL over one 2-rank communicator and one stream
     * per direction and peer ("channel"), into this rank's receive slots */
    int nccl;
    int nch;
    cudaStream_t *ch_stream; /* [nch] */
    void **ch_comm;          /* [nch] ncclComm_t */
    int *ch_peer;            /* [nch] the other rank's index in the channel's communicator */
    int *ch_of;              /* [n actions] the channel of a SEND or RECV, -1 otherwise */
    cudaEvent_t *ev_recv;    /* [n] a RECV's transfer done */
    int rc;
    pl_err err;
} cx_rank;

/* ---------------------------------------------------------------- the walker (cuda_walk.c) */

/* Returns the device floats of slot i of host pool p. */
static inline float *dslot(const cx_rank *c, const exec_pool *p, int i) {
    return c->d_arena + (p->base - c->x.arena) + (size_t)i * p->stride;
}

/* Stops the run: every waiting or later wait fails with why's message. */
void cx_abort(cx_shared *sh, const pl_err *why);
/* Waits until every rank has drained its GPU work (n arrivals, abort or not): no rank frees
 * memory that a peer's copy may still touch. */
void cx_exit_wait(cx_shared *sh, int n);
/* Counts n ranks that never started as done with their GPU work (wakes the others). */
void cx_exit_wait_none(cx_shared *sh, int n);
/* On the rank's thread, its device set (and green context current): device setup, a barrier,
 * the passes, the weights and losses copied back. Returns PL_OK or the error (c->err). */
int cx_rank_body(cx_rank *c, const exec_data *data);

/* ---------------------------------------------------------------- device state (cuda_mem.c) */

/* Creates the rank's streams (in its green context when it has one), cuBLAS handle and events,
 * makes its one device allocation, uploads the initial weights and the data it needs, and
 * publishes its receive slots. Runs on the rank's thread. Returns PL_OK or an error. */
int cx_setup(cx_rank *c, const exec_data *data, pl_err *e);
/* Releases the rank's device state (on its thread). */
void cx_teardown(cx_rank *c);

/* ---------------------------------------------------------------- the driver (cuda_exec.c) */

/* Checks the configuration's numbers (exec_check_config, then the GPU's own). */
int cx_check_config(const exec_config *c, pl_err *e);
/* Sets up rank r's host side: bookkeeping and measurement arrays (exec_xrank_setup), the
 * action tables (send_rank, send_slot, recv_slot: filled by the driver). */
int cx_setup_rank(cx_rank *c, int r, const sched *s, const exec_config *cfg, const int *blocks, const exec_data *data,
                  double *loss_mb, pl_err *e);
void cx_free_rank(cx_rank *c);
/* Moves what rank c measured and holds into rec. */
int cx_record_of(cx_rank *c, const double *loss_mb, exec_rank_record *rec, pl_err *e);
/* Marks out as the CUDA backend's (backend, precision, BLAS) run on the GPUs described by desc
 * (cut to exec_result.device's size). */
void cx_result_device(exec_result *out, const exec_config *cfg, const char *desc);

/* ---------------------------------------------------------------- NCCL (cuda_nccl.c) */

#ifdef PIPELAB_CUDA_NCCL
/* Creates the channel streams and receive events (in cx_setup). */
int cx_nccl_setup(cx_rank *c, pl_err *e);
void cx_nccl_teardown(cx_rank *c);
/* The transfer of SEND k from src (after the compute so far), recording ev_out[o] after it. */
int cx_nccl_send(cx_rank *c, size_t k, const float *src, size_t n, int o, pl_err *e);
/* The transfer of RECV k into its receive slot; the compute stream waits for it, then copies
 * the slot into dst. */
int cx_nccl_recv(cx_rank *c, size_t k, float *dst, size_t n, pl_err *e);
/* Makes the compute stream wait for every channel stream (end of a pass). */
int cx_nccl_join(cx_rank *c, pl_err *e);
/* The barrier between passes (MPI). */
int cx_nccl_barrier(cx_rank *c, pl_err *e);
#endif

#endif
