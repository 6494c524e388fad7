/* cuda_nccl.c: exec_cuda_mpi_run: the CUDA executor as one MPI process per rank (mpirun -np P),
 * ranks on different GPUs of one or several nodes, data between them by NCCL send/recv. Each
 * direction between two ranks that exchange data is a "channel": a 2-rank NCCL communicator
 * (bootstrapped through MPI: rank 0 makes the unique ids, MPI_Bcast sends them) and a stream on
 * each side, so channels are first-in first-out and independent of each other, as the lowered
 * schedule's buffered sends assume; a receive lands in a slot of its own and the compute stream
 * waits for it. NCCL is loaded at run time (dlopen), so builds that found nccl.h run where the
 * library is absent and say so only when this path is used. Passes are separated by
 * MPI_Barrier; a failing rank reports through the abort hook and MPI_Abort ends the job. The
 * records are gathered to rank 0 on its clock and assembled there (exec_assemble). */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_exec_int.h"
#include "exec_cuda.h"

/* ---------------------------------------------------------------- NCCL, loaded at run time */

static struct {
    void *lib;
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*error_string)(ncclResult_t);
} nc;

/* Loads libnccl once; returns PL_OK or PL_EINPUT saying it is missing. */
static int nccl_load(pl_err *e) {
    if (nc.lib) return PL_OK;
#ifndef PIPELAB_NCCL_DIR
#define PIPELAB_NCCL_DIR ""
#endif
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h && PIPELAB_NCCL_DIR[0]) h = dlopen(PIPELAB_NCCL_DIR "/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return pl_errf(e, PL_EINPUT, "the CUDA backend over MPI needs NCCL: cannot load libnccl.so.2 (%s)", dlerror());
    struct { const char *name; void **fn; } f[] = {
        {"ncclGetUniqueId", (void **)&nc.get_unique_id}, {"ncclCommInitRank", (void **)&nc.comm_init_rank},
        {"ncclCommDestroy", (void **)&nc.comm_destroy}, {"ncclSend", (void **)&nc.send}, {"ncclRecv", (void **)&nc.recv},
        {"ncclGroupStart", (void **)&nc.group_start}, {"ncclGroupEnd", (void **)&nc.group_end},
        {"ncclGetErrorString", (void **)&nc.error_string}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        *f[i].fn = dlsym(h, f[i].name);
        if (!*f[i].fn) {
            dlclose(h);
            return pl_errf(e, PL_EINPUT, "libnccl has no %s", f[i].name);
        }
    }
    nc.lib = h;
    return PL_OK;
}

/* Returns PL_OK when r is ncclSuccess, else fills e. */
static int nccl_check(ncclResult_t r, const char *what, pl_err *e) {
    if (r == ncclSuccess) return PL_OK;
    return pl_errf(e, PL_EINTERNAL, "%s: NCCL error %d: %s", what, (int)r, nc.error_string ? nc.error_string(r) : "?");
}

/* ---------------------------------------------------------------- the walker's hooks */

int cx_nccl_setup(cx_rank *c, pl_err *e) {
    size_t n = c->x.s->rank[c->x.r].n;
    c->ch_stream = pl_calloc(c->nch ? (size_t)c->nch : 1, sizeof *c->ch_stream);
    c->ev_recv = pl_calloc(n ? n : 1, sizeof *c->ev_recv);
    if (!c->ch_stream || !c->ev_recv) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int i = 0; i < c->nch; i++) CXC(cudaStreamCreateWithFlags(&c->ch_stream[i], cudaStreamNonBlocking));
    for (size_t k = 0; k < n; k++)
        if (c->x.s->rank[c->x.r].acts[k].kind == SCHED_RECV_F || c->x.s->rank[c->x.r].acts[k].kind == SCHED_RECV_B)
            CXC(cudaEventCreateWithFlags(&c->ev_recv[k], cudaEventDisableTiming));
    return PL_OK;
}

void cx_nccl_teardown(cx_rank *c) {
    size_t n = c->x.s->rank[c->x.r].n;
    if (c->ev_recv)
        for (size_t k = 0; k < n; k++) if (c->ev_recv[k]) cudaEventDestroy(c->ev_recv[k]);
    if (c->ch_stream)
        for (int i = 0; i < c->nch; i++) if (c->ch_stream[i]) cudaStreamDestroy(c->ch_stream[i]);
    if (c->ch_comm)
        for (int i = 0; i < c->nch; i++) if (c->ch_comm[i]) nc.comm_destroy((ncclComm_t)c->ch_comm[i]);
    free(c->ev_recv);
    free(c->ch_stream);
    c->ev_recv = NULL;
    c->ch_stream = NULL;
}

int cx_nccl_send(cx_rank *c, size_t k, const float *src, size_t n, int o, pl_err *e) {
    int ch = c->ch_of[k];
    cudaStream_t st = c->ch_stream[ch];
    CXC(cudaEventRecord(c->ev_tmp, c->cs)); /* the data is ready when the compute so far is */
    CXC(cudaStreamWaitEvent(st, c->ev_tmp, 0));
    CXC(cudaEventRecord(c->ev_act[2 * k], st));
    if (nccl_check(nc.send(src, n, ncclFloat, c->ch_peer[ch], (ncclComm_t)c->ch_comm[ch], st), "ncclSend", e)) return e->code;
    CXC(cudaEventRecord(c->ev_out[o], st));
    CXC(cudaEventRecord(c->ev_act[2 * k + 1], st));
    c->out_busy[o] = 1;
    return PL_OK;
}

int cx_nccl_recv(cx_rank *c, size_t k, float *dst, size_t n, pl_err *e) {
    int ch = c->ch_of[k];
    cudaStream_t st = c->ch_stream[ch];
    float *slot = c->d_mbox + (size_t)c->recv_slot[k] * cx_al64(n);
    if (nccl_check(nc.recv(slot, n, ncclFloat, c->ch_peer[ch], (ncclComm_t)c->ch_comm[ch], st), "ncclRecv", e)) return e->code;
    CXC(cudaEventRecord(c->ev_recv[k], st));
    CXC(cudaStreamWaitEvent(c->cs, c->ev_recv[k], 0));
    CXC(cudaMemcpyAsync(dst, slot, n * sizeof(float), cudaMemcpyDeviceToDevice, c->cs));
    return PL_OK;
}

int cx_nccl_join(cx_rank *c, pl_err *e) {
    for (int i = 0; i < c->nch; i++) {
        CXC(cudaEventRecord(c->ev_join, c->ch_stream[i]));
        CXC(cudaStreamWaitEvent(c->cs, c->ev_join, 0));
    }
    return PL_OK;
}

int cx_nccl_barrier(cx_rank *c, pl_err *e) {
    if (MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS) return PL_OK;
    pl_errf(e, PL_EINTERNAL, "rank %d: MPI_Barrier failed", c->x.r);
    pl_err_set_rank(e, c->x.r);
    return PL_EINTERNAL;
}

/* ---------------------------------------------------------------- channels */

/* The source rank of RECV a, the destination rank of SEND a. */
static int recv_src(const sched *s, const sched_action *a) {
    return s->stage_rank[a->kind == SCHED_RECV_F ? a->stage - 1 : a->stage + 1];
}
static int send_dst(const sched *s, const sched_action *a) {
    return s->stage_rank[a->kind == SCHED_SEND_F ? a->stage + 1 : a->stage - 1];
}

/* Lists the channels (ordered rank pairs a -> b with data) in one order every rank computes:
 * from[c], to[c]; returns their number (or -1, out of memory). Checks that each channel's
 * SENDs on a come in the order of the RECVs on b (first-in first-out). */
static int plan_channels(const sched *s, int **from, int **to, pl_err *e) {
    int p = s->ranks, cap = p * p, n = 0;
    int *fa = pl_calloc((size_t)cap, sizeof(int)), *fb = pl_calloc((size_t)cap, sizeof(int));
    if (!fa || !fb) { free(fa); free(fb); pl_errf(e, PL_ENOMEM, "out of memory"); return -1; }
    for (int r = 0; r < p; r++)
        for (size_t k = 0; k < s->rank[r].n; k++) {
            const sched_action *a = &s->rank[r].acts[k];
            if (a->kind != SCHED_SEND_F && a->kind != SCHED_SEND_B) continue;
            int d = send_dst(s, a), seen = 0;
            for (int c = 0; c < n && !seen; c++) seen = fa[c] == r && fb[c] == d;
            if (!seen) { fa[n] = r; fb[n] = d; n++; }
        }
    for (int c = 0; c < n; c++) {
        const sched_rank *ra = &s->rank[fa[c]], *rb = &s->rank[fb[c]];
        size_t i = 0, j = 0;
        for (;;) {
            while (i < ra->n && !((ra->acts[i].kind == SCHED_SEND_F || ra->acts[i].kind == SCHED_SEND_B) &&
                                  send_dst(s, &ra->acts[i]) == fb[c])) i++;
            while (j < rb->n && !((rb->acts[j].kind == SCHED_RECV_F || rb->acts[j].kind == SCHED_RECV_B) &&
                                  recv_src(s, &rb->acts[j]) == fa[c])) j++;
            if (i >= ra->n || j >= rb->n) break;
            const sched_action *x = &ra->acts[i], *y = &rb->acts[j];
            int fwd = x->kind == SCHED_SEND_F;
            if (y->kind != (fwd ? SCHED_RECV_F : SCHED_RECV_B) || y->stage != (fwd ? x->stage + 1 : x->stage - 1) || y->mb != x->mb) {
                char tx[EXEC_ACTION_TEXT_MAX], ty[EXEC_ACTION_TEXT_MAX];
                sched_action_format(x, tx, sizeof tx);
                sched_action_format(y, ty, sizeof ty);
                pl_errf(e, PL_EINPUT, "NCCL channels are first-in first-out, but rank %d sends %s (action %zu) to rank %d "
                        "where rank %d receives %s (action %zu) first", fa[c], tx, i + 1, fb[c], fb[c], ty, j + 1);
                free(fa);
                free(fb);
                return -1;
            }
            i++;
            j++;
        }
        if (i < ra->n || j < rb->n) {
            pl_errf(e, PL_EINPUT, "rank %d's sends to rank %d do not pair with rank %d's receives", fa[c], fb[c], fb[c]);
            free(fa);
            free(fb);
            return -1;
        }
    }
    *from = fa;
    *to = fb;
    return n;
}

/* ---------------------------------------------------------------- records to rank 0 */

/* Ping-pongs per rank of the clock alignment (the one of least round trip counts). */
#define NCCL_CLOCK_PINGS 8
/* Tags on MPI_COMM_WORLD: the parts of a record, the clock's ping-pong. */
enum { TAG_REC_HEAD = 80, TAG_REC_ARRAYS, TAG_REC_PEAK, TAG_REC_OPS, TAG_REC_LOSS, TAG_REC_WEIGHTS, TAG_PING = 90, TAG_PONG };
/* The fields of a record's header, in the order sent. */
enum { H_RANK, H_PASSES, H_OPS, H_WEIGHTS, H_CORE, H_LOSS, H_ALLOCATED, H_MODEL_PEAK, H_FIELDS };

/* Returns rank r's clock minus rank 0's (ping-pongs, the one of the shortest round trip). Called
 * by rank 0 and rank r together. */
static double clock_offset(int me, int r) {
    double best_rtt = HUGE_VAL, off = 0, t[2];
    for (int i = 0; i < NCCL_CLOCK_PINGS; i++) {
        if (me == 0) {
            t[0] = pl_now_s();
            MPI_Send(t, 1, MPI_DOUBLE, r, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(&t[1], 1, MPI_DOUBLE, r, TAG_PONG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t1 = pl_now_s();
            if (t1 - t[0] < best_rtt) {
                best_rtt = t1 - t[0];
                off = t[1] - 0.5 * (t[0] + t1);
            }
        } else {
            MPI_Recv(t, 1, MPI_DOUBLE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            t[1] = pl_now_s();
            MPI_Send(&t[1], 1, MPI_DOUBLE, 0, TAG_PONG, MPI_COMM_WORLD);
        }
    }
    return off;
}

/* Sends rank r's record to rank 0. */
static void send_record(const exec_rank_record *r, size_t nl) {
    long long h[H_FIELDS] = {r->rank, r->passes, (long long)r->n_ops, (long long)r->n_weights, r->core, (long long)nl,
                             (long long)r->allocated_bytes, (long long)r->model_peak_bytes};
    MPI_Send(h, H_FIELDS, MPI_LONG_LONG, 0, TAG_REC_HEAD, MPI_COMM_WORLD);
    MPI_Send(r->pass_start_s, EXEC_REC_ARRAYS * r->passes, MPI_DOUBLE, 0, TAG_REC_ARRAYS, MPI_COMM_WORLD);
    MPI_Send(&r->peak, (int)sizeof r->peak, MPI_BYTE, 0, TAG_REC_PEAK, MPI_COMM_WORLD);
    if (r->n_ops) MPI_Send(r->ops, (int)(r->n_ops * sizeof *r->ops), MPI_BYTE, 0, TAG_REC_OPS, MPI_COMM_WORLD);
    MPI_Send(r->loss_mb, (int)nl, MPI_DOUBLE, 0, TAG_REC_LOSS, MPI_COMM_WORLD);
    MPI_Send(r->weights, (int)r->n_weights, MPI_FLOAT, 0, TAG_REC_WEIGHTS, MPI_COMM_WORLD);
}

/* Receives the record of rank src on rank 0, its times shifted by -off onto rank 0's clock. */
static int recv_record(int src, double off, exec_rank_record *r, pl_err *e) {
    long long h[H_FIELDS];
    memset(r, 0, sizeof *r);
    MPI_Recv(h, H_FIELDS, MPI_LONG_LONG, src, TAG_REC_HEAD, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    r->rank = (int)h[H_RANK];
    r->passes = (int)h[H_PASSES];
    r->n_ops = (size_t)h[H_OPS];
    r->n_weights = (size_t)h[H_WEIGHTS];
    r->core = (int)h[H_CORE];
    size_t nl = (size_t)h[H_LOSS];
    r->allocated_bytes = (size_t)h[H_ALLOCATED];
    r->model_peak_bytes = (size_t)h[H_MODEL_PEAK];
    r->pass_start_s = pl_calloc(EXEC_REC_ARRAYS * (size_t)r->passes, sizeof(double));
    r->ops = r->n_ops ? pl_calloc(r->n_ops, sizeof *r->ops) : NULL;
    r->loss_mb = pl_calloc(nl ? nl : 1, sizeof(double));
    r->weights = pl_calloc(r->n_weights ? r->n_weights : 1, sizeof(float));
    if (!r->pass_start_s || (r->n_ops && !r->ops) || !r->loss_mb || !r->weights)
        return pl_errf(e, PL_ENOMEM, "out of memory receiving rank %d's record", src);
    int P = r->passes;
    exec_rank_record_arrays(r);
    MPI_Recv(r->pass_start_s, EXEC_REC_ARRAYS * P, MPI_DOUBLE, src, TAG_REC_ARRAYS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&r->peak, (int)sizeof r->peak, MPI_BYTE, src, TAG_REC_PEAK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (r->n_ops) MPI_Recv(r->ops, (int)(r->n_ops * sizeof *r->ops), MPI_BYTE, src, TAG_REC_OPS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(r->loss_mb, (int)nl, MPI_DOUBLE, src, TAG_REC_LOSS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(r->weights, (int)r->n_weights, MPI_FLOAT, src, TAG_REC_WEIGHTS, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int q = 0; q < P; q++) {
        r->pass_start_s[q] -= off;
        r->pass_end_s[q] -= off;
        if (r->ready_s[q] != 0) r->ready_s[q] -= off;
    }
    for (size_t k = 0; k < r->n_ops; k++) {
        r->ops[k].start_s -= off;
        r->ops[k].end_s -= off;
    }
    return PL_OK;
}

/* ---------------------------------------------------------------- the driver */

static int g_inited;
static void (*g_hook)(const pl_err *why);

int exec_cuda_mpi_available(void) { return 1; }

void exec_cuda_mpi_set_abort_hook(void (*hook)(const pl_err *why)) { g_hook = hook; }

void exec_cuda_mpi_finalize(void) {
    int fin = 0;
    if (!g_inited) return;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    g_inited = 0;
}

/* Reports why through the hook and ends the whole job. */
static void die(const pl_err *why) {
    if (g_hook) g_hook(why);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The checks every rank makes alike, then those that depend on the machine (GPU, NCCL): all
 * ranks agree on the outcome. Fills blocks and *dev. Returns PL_OK or the error. */
static int checks(const sched *s, const exec_config *cfg, int rank, int size, int *blocks, int *dev, pl_err *e) {
    int rc = PL_OK;
    if (size != s->ranks) rc = pl_errf(e, PL_EINPUT, "the schedule has %d ranks, the MPI job %d processes (mpirun -np %d)", s->ranks, size, s->ranks);
    if (rc == PL_OK && !s->lowered) rc = pl_errf(e, PL_EINPUT, "the executor runs lowered schedules (lower it first)");
    if (rc == PL_OK) rc = cx_check_config(cfg, e);
    if (rc == PL_OK && cfg->sm_split) rc = pl_errf(e, PL_EINPUT, "--sm-split is for ranks sharing a GPU; NCCL needs one GPU per rank");
    if (rc == PL_OK && cfg->timed_passes_max > cfg->timed_passes) /* no ranks' pass times to read, no allmax */
        rc = pl_errf(e, PL_EINPUT, "timing passes until the run is steady is for one process's GPU ranks, not MPI + NCCL");
    if (rc == PL_OK && sched_validate(s, e) != PL_OK) rc = e->code;
    if (rc == PL_OK) rc = exec_check_fault(s->rank, s->ranks, cfg, e);
    if (rc == PL_OK) rc = exec_stage_blocks(s, cfg, blocks, e);
    if (rc == PL_OK) rc = exec_check_memory(s, cfg, blocks, rank, e);
    if (rc == PL_OK) {
        int ndev = exec_cuda_devices(e);
        MPI_Comm node;
        int lr = 0, ln = 1;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_rank(node, &lr);
            MPI_Comm_size(node, &ln);
            MPI_Comm_free(&node);
        }
        int G = cfg->cuda_devices > 0 && cfg->cuda_devices < ndev ? cfg->cuda_devices : ndev;
        if (ndev < 1) rc = e->code;
        else if (ln > G) {
            rc = pl_errf(e, PL_EINPUT, "rank %d: %d ranks on this node but %d GPUs; NCCL needs one GPU per rank", rank, ln, G);
            pl_err_set_rank(e, rank);
        }
        else *dev = lr;
    }
    if (rc == PL_OK) rc = nccl_load(e);
    int bad = rc != PL_OK, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && !bad) rc = pl_errf(e, PL_EINPUT, "another rank failed its checks (see its message)");
    return rc;
}

/* Makes rank me's channels: ids from rank 0, one 2-rank communicator each (one NCCL group),
 * and the channel of each of its SENDs and RECVs. Returns PL_OK or the error. */
static int make_channels(cx_rank *c, const sched *s, int me, pl_err *e) {
    int *fa = NULL, *fb = NULL;
    int C = plan_channels(s, &fa, &fb, e);
    if (C < 0) return e->code;
    int rc = PL_OK;
    ncclUniqueId *ids = pl_calloc(C ? (size_t)C : 1, sizeof *ids);
    int *mine = pl_calloc(C ? (size_t)C : 1, sizeof(int));
    size_t n = s->rank[me].n;
    c->ch_of = pl_calloc(n ? n : 1, sizeof(int));
    c->ch_comm = pl_calloc(C ? (size_t)C : 1, sizeof(void *));
    c->ch_peer = pl_calloc(C ? (size_t)C : 1, sizeof(int));
    if (!ids || !mine || !c->ch_of || !c->ch_comm || !c->ch_peer) { rc = pl_errf(e, PL_ENOMEM, "out of memory"); goto out; }
    for (int i = 0; i < C && me == 0; i++)
        if ((rc = nccl_check(nc.get_unique_id(&ids[i]), "ncclGetUniqueId", e))) goto out;
    if (C && MPI_Bcast(ids, (int)(C * sizeof *ids), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
        rc = pl_errf(e, PL_EINTERNAL, "MPI_Bcast of the NCCL ids failed");
        goto out;
    }
    c->nch = 0;
    for (int i = 0; i < C; i++) {
        mine[i] = -1;
        if (fa[i] == me || fb[i] == me) mine[i] = c->nch++;
    }
    if ((rc = cx_cuda_check(cudaSetDevice(c->dev), "cudaSetDevice", __FILE__, __LINE__, e))) goto out;
    if ((rc = nccl_check(nc.group_start(), "ncclGroupStart", e))) goto out;
    for (int i = 0; i < C && rc == PL_OK; i++) {
        if (mine[i] < 0) continue;
        int in = fa[i] == me ? 0 : 1; /* the sender is rank 0 of the channel */
        c->ch_peer[mine[i]] = 1 - in;
        ncclComm_t cm = NULL;
        rc = nccl_check(nc.comm_init_rank(&cm, 2, ids[i], in), "ncclCommInitRank", e);
        c->ch_comm[mine[i]] = cm;
    }
    int rc2 = nccl_check(nc.group_end(), "ncclGroupEnd", e);
    if (rc == PL_OK) rc = rc2;
    for (size_t k = 0; k < n && rc == PL_OK; k++) {
        const sched_action *a = &s->rank[me].acts[k];
        c->ch_of[k] = -1;
        int send = a->kind == SCHED_SEND_F || a->kind == SCHED_SEND_B, recv = a->kind == SCHED_RECV_F || a->kind == SCHED_RECV_B;
        if (!send && !recv) continue;
        int from = send ? me : recv_src(s, a), to = send ? send_dst(s, a) : me;
        for (int i = 0; i < C; i++)
            if (fa[i] == from && fb[i] == to) c->ch_of[k] = mine[i];
    }
out:
    free(ids);
    free(mine);
    free(fa);
    free(fb);
    return rc;
}

/* What one process of exec_cuda_mpi_run holds: its rank of size, its GPU, the split, the data,
 * the losses, its rank's state and record, the records gathered on rank 0. */
typedef struct cx_proc {
    int me, size, dev;
    int *blocks;           /* [stages] */
    exec_data data;
    double *loss_mb;       /* [passes * iterations * m] */
    cx_rank *c;
    cx_shared sh;
    exec_rank_record mine;
    exec_rank_record *recs;/* [size] on rank 0, else NULL */
} cx_proc;

/* Initializes MPI (unless the caller did) and fills pr's rank and size. PL_OK or the error. */
static int cx_mpi_start(cx_proc *pr, pl_err *e) {
    int inited = 0, prov = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &prov) != MPI_SUCCESS) return pl_errf(e, PL_EINTERNAL, "MPI_Init failed");
        g_inited = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &pr->me);
    MPI_Comm_size(MPI_COMM_WORLD, &pr->size);
    return PL_OK;
}

/* Allocates this process's state, builds the data set and sets up its rank on its GPU with its
 * receive slots and NCCL channels. Returns PL_OK or the error. */
static int cx_mpi_setup(const sched *s, const exec_config *cfg, cx_proc *pr, pl_err *e) {
    int me = pr->me, P = exec_passes_most(cfg), M = s->microbatches * sched_iterations(s);
    pr->loss_mb = pl_calloc((size_t)P * (size_t)M, sizeof(double));
    pr->c = aligned_alloc(_Alignof(cx_rank), sizeof *pr->c);
    pr->sh.p = s->ranks;
    pr->sh.timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : EXEC_DEFAULT_TIMEOUT_S;
    pr->sh.nrecv = pl_calloc((size_t)s->ranks, sizeof *pr->sh.nrecv);
    pr->recs = me == 0 ? pl_calloc((size_t)pr->size, sizeof *pr->recs) : NULL;
    if (pr->c) memset(pr->c, 0, sizeof *pr->c);
    if (!pr->loss_mb || !pr->c || !pr->sh.nrecv || (me == 0 && !pr->recs)) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = exec_data_build(cfg, 0, &pr->data, e); /* all D: the device holds the whole set */
    if (rc == PL_OK) rc = cx_setup_rank(pr->c, me, s, cfg, pr->blocks, &pr->data, pr->loss_mb, e);
    if (rc != PL_OK) return rc;
    cx_rank *c = pr->c;
    c->sh = &pr->sh;
    c->dev = pr->dev;
    c->nccl = 1;
    int nr = 0;
    for (size_t k = 0; k < s->rank[me].n; k++) {
        sched_kind kd = (sched_kind)s->rank[me].acts[k].kind;
        c->recv_slot[k] = kd == SCHED_RECV_F || kd == SCHED_RECV_B ? nr++ : -1;
    }
    pr->sh.nrecv[me] = nr;
    return make_channels(c, s, me, e);
}

/* Sends every rank's record to rank 0 on its clock; there assembles them into out and
 * describes the GPUs. Ends the job on an error while gathering. Returns PL_OK or the error. */
static int cx_mpi_gather(const sched *s, const exec_config *cfg, cx_proc *pr, exec_result *out, pl_err *e) {
    int me = pr->me, P = exec_passes_most(cfg), M = s->microbatches * sched_iterations(s);
    for (int r = 1; r < pr->size; r++) {
        if (me != 0 && me != r) continue;
        double off = clock_offset(me, r);
        if (me == r) send_record(&pr->mine, (size_t)P * (size_t)M);
        else if (recv_record(r, off, &pr->recs[r], e) != PL_OK) die(e);
    }
    if (me != 0) return PL_OK;
    pr->recs[0] = pr->mine;
    memset(&pr->mine, 0, sizeof pr->mine);
    int rc = exec_assemble(s, cfg, pr->recs, out, e);
    if (rc != PL_OK) return rc;
    char name[CX_NAME_MAX] = "";
    int sms = 0;
    pl_err ig;
    cx_device_props(pr->dev, name, sizeof name, &sms, &ig);
    char dv[CX_DEVICE_TEXT_MAX];
    snprintf(dv, sizeof dv, "%.64s, %d SMs, %d MPI ranks, one GPU each, NCCL", name, sms, pr->size);
    cx_result_device(out, cfg, dv);
    return PL_OK;
}

/* Frees what the process held. */
static void cx_proc_free(cx_proc *pr) {
    if (pr->recs)
        for (int r = 0; r < pr->size; r++) exec_rank_record_free(&pr->recs[r]);
    exec_rank_record_free(&pr->mine);
    if (pr->c) {
        free(pr->c->ch_of);
        free(pr->c->ch_comm);
        free(pr->c->ch_peer);
        cx_free_rank(pr->c);
    }
    free(pr->c);
    free(pr->recs);
    free(pr->sh.nrecv);
    free(pr->loss_mb);
    free(pr->blocks);
    exec_data_free(&pr->data);
}

int exec_cuda_mpi_run(const sched *s, const exec_config *cfg, exec_result *out, int *is_root, pl_err *e) {
    memset(out, 0, sizeof *out);
    if (is_root) *is_root = 1;
    cx_proc pr;
    memset(&pr, 0, sizeof pr);
    pr.size = 1;
    int rc = cx_mpi_start(&pr, e);
    if (rc) return rc;
    if (is_root) *is_root = pr.me == 0;
    pr.blocks = pl_calloc((size_t)s->stages, sizeof *pr.blocks);
    if (!pr.blocks) return pl_errf(e, PL_ENOMEM, "out of memory");
    rc = checks(s, cfg, pr.me, pr.size, pr.blocks, &pr.dev, e);
    if (rc) {
        free(pr.blocks);
        return rc;
    }
    exec_blas_init();
    rc = cx_mpi_setup(s, cfg, &pr, e);
    if (rc == PL_OK) rc = cx_rank_body(pr.c, &pr.data);
    if (rc) {
        pl_err why = pr.c && pr.c->rc ? pr.c->err : *e;
        die(&why); /* does not return */
    }
    cx_teardown(pr.c);
    rc = cx_record_of(pr.c, pr.loss_mb, &pr.mine, e);
    if (rc) die(e);
    rc = cx_mpi_gather(s, cfg, &pr, out, e);
    cx_proc_free(&pr);
    return rc;
}
