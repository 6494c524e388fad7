/* cuda_mem.c: a CUDA rank's device state (cuda_exec_int.h): its streams (in its green context
 * when it has one), cuBLAS handle, the one device allocation laid out like the CPU arena (plus
 * bf16 weight copies, GEMM operand scratch, data, losses and receive slots), the upload of the
 * initial weights and data, the CUDA events that time actions and GEMMs, the publication of its
 * receive slots, and the teardown of all of it. */
#undef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "exec_cuda.h"
#include "cuda_exec_int.h"
#include "cuda_int.h"
#include "exec_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The most GEMMs of a pass that are timed (events are made for each). */
#define CX_MAX_TIMED_GEMMS (1 << 26)

/* ---------------------------------------------------------------- setup */

/* Counts an upper bound of the GEMMs rank r issues in one pass (for the GEMM timing events). */
static int gemm_bound(const cx_rank *c) {
    const exec_xrank *x = &c->x;
    const sched_rank *rk = &x->s->rank[x->r];
    long n = 1;
    for (size_t k = 0; k < rk->n; k++) {
        const sched_action *a = &rk->acts[k];
        if (!sched_kind_is_compute((sched_kind)a->kind)) continue;
        int nb = 0;
        if (a->stage >= 0 && a->stage < x->s->stages && x->loc[a->stage] >= 0) nb += x->st[x->loc[a->stage]].nb;
        if (a->kind == SCHED_OVERLAP && a->stage2 >= 0 && a->stage2 < x->s->stages && x->loc[a->stage2] >= 0)
            nb += x->st[x->loc[a->stage2]].nb;
        n += cx_blk_gemms(&x->d) * nb;
    }
    return n > CX_MAX_TIMED_GEMMS ? CX_MAX_TIMED_GEMMS : (int)n;
}

/* Bytes every part of a rank's device allocation is rounded up to (cudaMalloc's alignment). */
#define CX_ALLOC_ALIGN ((size_t)256)
/* Bytes of a bf16 element. */
#define CX_BF16_BYTES ((size_t)2)
/* The bf16 operand scratch buffers of a GEMM (A and B, cx_gemm_ctx.bfa and bfb). */
#define CX_BF16_OPERANDS 2
#define CX_GIB (1024.0 * 1024.0 * 1024.0)

/* Returns n rounded up to CX_ALLOC_ALIGN bytes. */
static size_t al256(size_t n) { return (n + CX_ALLOC_ALIGN - 1) & ~(CX_ALLOC_ALIGN - 1); }

/* The parts of a rank's one device allocation, in bytes (each rounded up by al256). */
typedef struct cx_parts {
    size_t arena, verbf, op, x, t, loss, mbox;
    size_t opn;   /* floats of one bf16 operand scratch buffer */
    size_t nloss; /* the losses (passes x microbatches) before the loss's partial sums */
} cx_parts;

/* Creates the rank's streams (in its green context when it has one) on its device. Returns
 * PL_OK or an error. */
static int cx_streams(cx_rank *c, pl_err *e) {
    CXC(cudaSetDevice(c->dev));
    if (c->green_n > 1) {
        if (cx_green_create(c->dev, c->green_n, c->green_i, &c->green, e)) return e->code;
        if (cx_green_make_current(&c->green, e)) return e->code;
        if (cx_green_stream(&c->green, &c->cs, e) || cx_green_stream(&c->green, &c->ms, e)) return e->code;
    } else {
        CXC(cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking));
        CXC(cudaStreamCreateWithFlags(&c->ms, cudaStreamNonBlocking));
    }
    return PL_OK;
}

/* Returns the sizes of the parts of rank c's allocation: arena image, bf16 version copies, bf16
 * operand scratch, data, losses, receive slots. */
static cx_parts cx_parts_of(const cx_rank *c, const exec_data *data) {
    const exec_xrank *x = &c->x;
    const exec_config *cfg = x->cfg;
    size_t bh = (size_t)x->d.b * x->d.h;
    int P = exec_passes_most(cfg), bf16 = cfg->precision == EXEC_PREC_BF16;
    int first = x->loc[0] >= 0, lastst = x->loc[x->s->stages - 1] >= 0;
    size_t D = (size_t)data->d, nrecv = (size_t)c->sh->nrecv[x->r];
    cx_parts z = {0};
    z.arena = al256(x->arena_bytes);
    if (bf16)
        for (int q = 0; q < x->nst; q++) z.verbf += al256((size_t)x->st[q].ver.cap * x->st[q].ver.stride * CX_BF16_BYTES);
    z.opn = cx_blk_bf16_floats(&x->d);
    z.op = bf16 ? CX_BF16_OPERANDS * al256(z.opn * CX_BF16_BYTES) : 0;
    z.x = first ? al256(D * bh * sizeof(float)) : 0;
    z.t = lastst ? al256(D * bh * sizeof(float)) : 0;
    z.nloss = (size_t)P * x->M;
    z.loss = al256((z.nloss + CXK_MSE_BLOCKS) * sizeof(double)); /* the losses, then the loss's partial sums */
    z.mbox = al256(nrecv * cx_al64(bh) * sizeof(float));
    return z;
}

/* Makes the rank's one device allocation (the parts z, then the cuBLAS workspace) and points
 * its buffers into it; *ws = the workspace. Returns PL_OK or an error. */
static int cx_alloc(cx_rank *c, const cx_parts *z, void **ws, pl_err *e) {
    exec_xrank *x = &c->x;
    c->dmem_bytes = z->arena + z->verbf + z->op + z->x + z->t + z->loss + z->mbox + CX_BLAS_WS_BYTES;
    void *mem = NULL;
    cudaError_t ast = cudaMalloc(&mem, c->dmem_bytes);
    if (ast != cudaSuccess) {
        (void)cudaGetLastError();
        /* cx_rank_body names the rank and GPU */
        return pl_errf(e, PL_ENOMEM, "cannot allocate its %zu bytes (%.2f GiB: weights, gradients, stashes, buffers, data) "
                       "on the GPU: %s; use a smaller --width, --ffn, --depth or --microbatch-size, or more GPUs",
                       c->dmem_bytes, (double)c->dmem_bytes / CX_GIB, cudaGetErrorString(ast));
    }
    c->dmem = mem;
    char *p = c->dmem;
    c->d_arena = (float *)(void *)p;
    p += z->arena;
    if (x->cfg->precision == EXEC_PREC_BF16) {
        c->d_verbf = pl_calloc((size_t)x->nst, sizeof *c->d_verbf);
        if (!c->d_verbf) return pl_errf(e, PL_ENOMEM, "out of memory");
        for (int q = 0; q < x->nst; q++) {
            c->d_verbf[q] = (uint16_t *)(void *)p;
            p += al256((size_t)x->st[q].ver.cap * x->st[q].ver.stride * CX_BF16_BYTES);
        }
        c->g.bfa = (uint16_t *)(void *)p;
        c->g.bfb = (uint16_t *)(void *)(p + al256(z->opn * CX_BF16_BYTES));
        c->g.bf_cap = z->opn;
        p += z->op;
    }
    c->d_x = z->x ? (float *)(void *)p : NULL;
    p += z->x;
    c->d_t = z->t ? (float *)(void *)p : NULL;
    p += z->t;
    c->d_loss = (double *)(void *)p;
    c->d_loss_part = c->d_loss + z->nloss;
    p += z->loss;
    c->d_mbox = (float *)(void *)p;
    p += z->mbox;
    *ws = p;
    return PL_OK;
}

/* Uploads the arena as exec_xrank_init laid it out (initial weights, zeroed gradients), the
 * data the rank's stages read, zeroed losses and the bf16 version copies; waits for them.
 * Returns PL_OK or an error. */
static int cx_upload(cx_rank *c, const exec_data *data, const cx_parts *z, pl_err *e) {
    exec_xrank *x = &c->x;
    size_t xbytes = (size_t)data->d * (size_t)x->d.b * x->d.h * sizeof(float);
    CXC(cudaMemcpyAsync(c->d_arena, x->arena, x->arena_bytes, cudaMemcpyHostToDevice, c->cs));
    if (c->d_x) CXC(cudaMemcpyAsync(c->d_x, data->x, xbytes, cudaMemcpyHostToDevice, c->cs));
    if (c->d_t) CXC(cudaMemcpyAsync(c->d_t, data->t, xbytes, cudaMemcpyHostToDevice, c->cs));
    CXC(cudaMemsetAsync(c->d_loss, 0, z->loss, c->cs));
    if (c->d_verbf)
        for (int q = 0; q < x->nst; q++)
            CXC(cxk_to_bf16(c->cs, c->d_verbf[q], dslot(c, &x->st[q].ver, 0), (size_t)x->st[q].ver.cap * x->st[q].ver.stride));
    CXC(cudaStreamSynchronize(c->cs));
    return PL_OK;
}

/* Creates the rank's events: start and end of each action, SEND arrivals, send slots' copies,
 * GEMM timing, pass start and end. Returns PL_OK or an error. */
static int cx_events(cx_rank *c, pl_err *e) {
    exec_xrank *x = &c->x;
    const sched_rank *rk = &x->s->rank[x->r];
    size_t n = rk->n;
    c->ev_act = pl_calloc(2 * (n ? n : 1), sizeof *c->ev_act);
    c->ev_send = pl_calloc(n ? n : 1, sizeof *c->ev_send);
    c->ev_out = pl_calloc((size_t)x->out.cap, sizeof *c->ev_out);
    c->out_busy = pl_calloc((size_t)x->out.cap, sizeof *c->out_busy);
    c->cap_gemm = gemm_bound(c);
    c->ev_gemm = pl_calloc(2 * (size_t)c->cap_gemm, sizeof *c->ev_gemm);
    if (!c->ev_act || !c->ev_send || !c->ev_out || !c->out_busy || !c->ev_gemm) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (size_t k = 0; k < 2 * n; k++) CXC(cudaEventCreate(&c->ev_act[k]));
    for (size_t k = 0; k < n; k++)
        if (rk->acts[k].kind == SCHED_SEND_F || rk->acts[k].kind == SCHED_SEND_B)
            CXC(cudaEventCreateWithFlags(&c->ev_send[k], cudaEventDisableTiming));
    for (int o = 0; o < x->out.cap; o++) CXC(cudaEventCreateWithFlags(&c->ev_out[o], cudaEventDisableTiming));
    for (int k = 0; k < 2 * c->cap_gemm; k++) CXC(cudaEventCreate(&c->ev_gemm[k]));
    CXC(cudaEventCreate(&c->ev_p0));
    CXC(cudaEventCreate(&c->ev_end));
    CXC(cudaEventCreateWithFlags(&c->ev_tmp, cudaEventDisableTiming));
    CXC(cudaEventCreateWithFlags(&c->ev_join, cudaEventDisableTiming));
    c->g.ev = c->ev_gemm;
    c->g.cap_ev = c->cap_gemm;
    return PL_OK;
}

/* Publishes this rank's receive slots, and the events of its sends in its receivers' slots. */
static void cx_publish(cx_rank *c) {
    exec_xrank *x = &c->x;
    const sched_rank *rk = &x->s->rank[x->r];
    size_t bh = (size_t)x->d.b * x->d.h;
    for (size_t k = 0; k < rk->n; k++) {
        const sched_action *a = &rk->acts[k];
        if (a->kind == SCHED_RECV_F || a->kind == SCHED_RECV_B) {
            cx_box *b = &c->sh->box[x->r][c->recv_slot[k]];
            b->dptr = c->d_mbox + (size_t)c->recv_slot[k] * cx_al64(bh);
            b->dev = c->dev;
        } else if (a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B) {
            c->sh->box[c->send_rank[k]][c->send_slot[k]].arrived = c->ev_send[k];
        }
    }
}

/* Creates the rank's streams (in its green context when it has one), cuBLAS handle and events,
 * makes its one device allocation, uploads the initial weights and the data it needs, and
 * publishes its receive slots. Runs on the rank's thread. Returns PL_OK or an error. */
int cx_setup(cx_rank *c, const exec_data *data, pl_err *e) {
    if (cx_streams(c, e) != PL_OK) return e->code;
    cx_parts z = cx_parts_of(c, data);
    void *ws = NULL;
    if (cx_alloc(c, &z, &ws, e) != PL_OK || cx_upload(c, data, &z, e) != PL_OK) return e->code;
    /* cuBLAS on the compute stream, with its workspace from the allocation */
    if (cx_blas_create(&c->blas, c->cs, e) || cx_blas_workspace(c->blas, ws, CX_BLAS_WS_BYTES, e)) return e->code;
    c->g.h = c->blas;
    c->g.st = c->cs;
    c->g.prec = c->x.cfg->precision;
    if (cx_events(c, e) != PL_OK) return e->code;
#ifdef PIPELAB_CUDA_NCCL
    if (c->nccl) return cx_nccl_setup(c, e); /* no shared slots: NCCL moves the data */
#endif
    cx_publish(c);
    return PL_OK;
}

void cx_teardown(cx_rank *c) {
    size_t n = c->x.s ? c->x.s->rank[c->x.r].n : 0;
    if (c->ev_act)
        for (size_t k = 0; k < 2 * n; k++) if (c->ev_act[k]) cudaEventDestroy(c->ev_act[k]);
    if (c->ev_send)
        for (size_t k = 0; k < n; k++) if (c->ev_send[k]) cudaEventDestroy(c->ev_send[k]);
    if (c->ev_out)
        for (int o = 0; o < c->x.out.cap; o++) if (c->ev_out[o]) cudaEventDestroy(c->ev_out[o]);
    if (c->ev_gemm)
        for (int k = 0; k < 2 * c->cap_gemm; k++) if (c->ev_gemm[k]) cudaEventDestroy(c->ev_gemm[k]);
    cudaEvent_t ev[] = {c->ev_p0, c->ev_end, c->ev_tmp, c->ev_join};
    for (size_t k = 0; k < sizeof ev / sizeof *ev; k++) if (ev[k]) cudaEventDestroy(ev[k]);
#ifdef PIPELAB_CUDA_NCCL
    if (c->nccl) cx_nccl_teardown(c);
#endif
    cx_blas_destroy(c->blas);
    if (c->cs) cudaStreamDestroy(c->cs);
    if (c->ms) cudaStreamDestroy(c->ms);
    if (c->dmem) cudaFree(c->dmem);
    cx_green_destroy(&c->green);
    free(c->ev_act);
    free(c->ev_send);
    free(c->ev_out);
    free(c->out_busy);
    free(c->ev_gemm);
    free(c->d_verbf);
    c->ev_act = c->ev_send = c->ev_out = c->ev_gemm = NULL;
    c->out_busy = NULL;
    c->d_verbf = NULL;
    c->blas = NULL;
    c->cs = c->ms = NULL;
    c->dmem = NULL;
}
