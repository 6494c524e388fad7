/* cost_gpu.c: GPT training on GPU clusters: the tensor x pipeline x data parallel layout, a
 * transformer layer as GPU operations (GEMMs at their shape's efficiency, memory-bound
 * elementwise work, tensor-parallel collectives), Megatron's parameter and FLOP formulas, and the
 * per-GPU layer table the simulator runs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost_int.h"

/* Bytes of an element of the mixed-precision run's activations, weights and gradients. */
#define HALF COST_FP16_BYTES
/* Bytes of a dropout mask element. */
#define MASK_BYTES 1
/* Mixed-precision Adam's state per parameter: fp32 master weights, momentum and variance. */
#define ADAM_MIXED_BYTES (3 * COST_FP32_BYTES)
/* Tensor-parallel collectives per layer and pass (Megatron: after attention and after the MLP). */
#define TP_COLLECTIVES 2

static const char *const rc_names[] = {"none", "selective", "full"};

/* Returns "none", "selective" or "full". */
const char *cost_recompute_name(cost_recompute r) { return (unsigned)r < 3 ? rc_names[r] : "?"; }

/* Returns the recomputation of a name, or -1. */
int cost_recompute_parse(const char *s) {
    for (int r = 0; r < 3; r++)
        if (strcmp(s, rc_names[r]) == 0) return r;
    return -1;
}

/* Fills l with one GPU's layout: T = P = D = v = 1, b = 1, B = 0 (one microbatch per replica),
 * no recomputation, fp16, no sequence parallelism, the optimizer on every replica, Megatron's
 * scatter/gather of the pipeline boundary on. */
void cost_layout_init(cost_layout *l) {
    memset(l, 0, sizeof *l);
    l->tp = l->pp = l->dp = l->chunks = l->microbatch = 1;
    l->precision = COST_FP16;
}

/* Returns the microbatches per iteration and pipeline, B / (b D) (B = 0: one). */
int cost_layout_microbatches(const cost_layout *l) {
    if (l->global_batch <= 0) return 1;
    return l->global_batch / (l->microbatch * l->dp);
}

/* Returns PL_OK when the layout describes a run Megatron could launch, else PL_EINPUT saying
 * what does not divide (heads by T, layers by P v, the batch by b D, ...) or what is missing. */
int cost_layout_check(const cost_layout *l, const cost_hw *hw, pl_err *e) {
    if (l->layers < 1 || l->hidden < 1 || l->heads < 1 || l->seq < 1 || l->vocab < 1)
        return pl_errf(e, PL_EINPUT, "the parallel layout needs a transformer model (layers, hidden, heads, seq and "
                       "vocab >= 1)");
    if (l->tp < 1 || l->pp < 1 || l->dp < 1 || l->chunks < 1 || l->microbatch < 1)
        return pl_errf(e, PL_EINPUT, "--tp, --pp, --dp, --chunks and --microbatch-size must be >= 1");
    if (l->hidden % l->heads)
        return pl_errf(e, PL_EINPUT, "hidden size %d is not a multiple of the %d attention heads", l->hidden, l->heads);
    if (l->heads % l->tp)
        return pl_errf(e, PL_EINPUT, "%d attention heads do not divide over --tp %d tensor-parallel ranks", l->heads,
                       l->tp);
    if ((4 * l->hidden) % l->tp || l->vocab % l->tp)
        return pl_errf(e, PL_EINPUT, "the MLP width %d and vocabulary %d must divide over --tp %d", 4 * l->hidden,
                       l->vocab, l->tp);
    if (l->layers % (l->pp * l->chunks))
        return pl_errf(e, PL_EINPUT, "%d layers do not split into %d pipeline stages x %d chunks", l->layers, l->pp,
                       l->chunks);
    if (hw && l->tp > hw->devices_per_node)
        return pl_errf(e, PL_EINPUT, "--tp %d is larger than a node of hardware %s (%d devices): tensor parallelism "
                       "stays within a node", l->tp, hw->name, hw->devices_per_node);
    if (l->sequence_parallel && l->seq % l->tp)
        return pl_errf(e, PL_EINPUT, "--sequence-parallel: sequence length %d does not divide over --tp %d", l->seq,
                       l->tp);
    long per = (long)l->microbatch * l->dp;
    if (l->global_batch > 0 && l->global_batch % per)
        return pl_errf(e, PL_EINPUT, "--global-batch %d is not a multiple of --microbatch-size %d x --dp %d = %ld",
                       l->global_batch, l->microbatch, l->dp, per);
    return PL_OK;
}

/* Returns the GPUs of the layout, T P D. */
double cost_layout_gpus(const cost_layout *l) { return (double)l->tp * l->pp * l->dp; }

/* Returns the parameters of the GPT model, Narayanan et al. (SC21) eq. 2:
 * 12 l h^2 (1 + 13 / (12 h) + (V + s) / (12 l h)). */
double cost_gpt_params(const cost_layout *l) {
    double L = l->layers, h = l->hidden, V = l->vocab, s = l->seq;
    return 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h));
}

/* Returns the FLOPs of one iteration, Narayanan et al. (SC21) eq. 3, which counts the extra
 * forward of full activation recomputation: 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)). */
double cost_gpt_model_flops(const cost_layout *l) {
    double B = l->global_batch > 0 ? l->global_batch : (double)l->microbatch * l->dp;
    double L = l->layers, h = l->hidden, V = l->vocab, s = l->seq;
    return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
}

/* Returns the FLOPs of one iteration without any recomputation (the model FLOPs of MFU,
 * Korthikanti et al.): 72 B s l h^2 (1 + s / (6 h) + V / (12 l h)). */
double cost_gpt_mfu_flops(const cost_layout *l) {
    double B = l->global_batch > 0 ? l->global_batch : (double)l->microbatch * l->dp;
    double L = l->layers, h = l->hidden, V = l->vocab, s = l->seq;
    return 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
}

/* Returns the FLOPs the GPUs execute in one iteration (HFU): the model FLOPs plus what the
 * recomputation runs again: full, every layer's forward (24 B s l h^2 + 4 B s^2 l h); selective,
 * attention's score and context GEMMs (4 B s^2 l h); a flash kernel's backward, the score GEMM
 * (2 B s^2 l h; it makes selective recomputation moot). */
double cost_gpt_hardware_flops(const cost_layout *l) {
    double B = l->global_batch > 0 ? l->global_batch : (double)l->microbatch * l->dp;
    double L = l->layers, h = l->hidden, s = l->seq;
    double attn = 4 * B * s * s * L * h;
    double extra = l->recompute == COST_RC_FULL ? 24 * B * s * L * h * h + attn
                   : l->recompute == COST_RC_SELECTIVE && !l->flash_attention ? attn : 0;
    if (l->flash_attention) extra += attn / 2;
    return cost_gpt_mfu_flops(l) + extra;
}

/* Returns the efficiency of an m x n output GEMM (batch of them) on hw: gemm.max_efficiency
 * times the useful part of the padded tiles (tile quantization) times the busy part of the last
 * wave of tiles over the units (wave quantization); device.efficiency when no GEMM table. */
double cost_gemm_efficiency(const cost_hw *hw, double m, double n, double batch) {
    if (!(hw->gemm_max_efficiency > 0)) return hw->efficiency;
    double tm = hw->gemm_tile_m, tn = hw->gemm_tile_n;
    double rows = ceil(m / tm), cols = ceil(n / tn);
    double tiles = rows * cols * batch, waves = ceil(tiles / hw->gemm_units);
    double tile_q = (m * n) / (rows * tm * cols * tn);
    return hw->gemm_max_efficiency * tile_q * tiles / (waves * hw->gemm_units);
}

/* Returns the seconds of streaming bytes through device memory: bytes over memory_bandwidth x
 * memory_efficiency (the fraction a streaming kernel reaches; 1 when unset), 0 when the
 * bandwidth is unknown. */
double cost_stream_s(const cost_hw *hw, double bytes) {
    if (!(hw->memory_bandwidth_Bps > 0)) return 0;
    double eff = hw->memory_efficiency > 0 ? hw->memory_efficiency : 1;
    return bytes / (hw->memory_bandwidth_Bps * eff);
}

/* Returns the time of a batch of m x n x k GEMMs in 2-byte precision p: the larger of its FLOPs
 * at the shape's efficiency and its operand bytes at bw bytes/s (none when 0), plus one launch. */
static double gemm_at_s(const cost_hw *hw, cost_precision p, double m, double n, double k, double batch, double bw) {
    double flops = 2 * m * n * k * batch;
    double compute = flops / (hw->peak_flops[p] * cost_gemm_efficiency(hw, m, n, batch));
    double memory = bw > 0 ? HALF * (m * k + k * n + m * n) * batch / bw : 0;
    return (compute > memory ? compute : memory) + hw->launch_s;
}

/* Returns the time of a batch of m x n x k GEMMs in 2-byte precision p: its FLOPs at the
 * shape's efficiency or its operand bytes streamed (cost_stream_s), the larger, plus a launch. */
double cost_gemm_s(const cost_hw *hw, cost_precision p, double m, double n, double k, double batch) {
    double bytes = HALF * (m * k + k * n + m * n) * batch, t = cost_stream_s(hw, bytes);
    return gemm_at_s(hw, p, m, n, k, batch, t > 0 ? bytes / t : 0);
}

/* Returns the time of one of the attention core's batched GEMMs (the s x s scores against a
 * head's d): as cost_gemm_s, its bytes at gemm.attention_bandwidth x the memory bandwidth when
 * that is set (such GEMMs, d = 64-160 deep or wide, stream far below a copy kernel). */
double cost_attention_gemm_s(const cost_hw *hw, cost_precision p, double m, double n, double k, double batch) {
    if (!(hw->gemm_attention_bandwidth > 0)) return cost_gemm_s(hw, p, m, n, k, batch);
    return gemm_at_s(hw, p, m, n, k, batch, hw->memory_bandwidth_Bps * hw->gemm_attention_bandwidth);
}

/* Returns the time of a memory-bound operation moving bytes: streamed, plus a launch. */
static double mem_op_s(const cost_hw *hw, double bytes) { return cost_stream_s(hw, bytes) + hw->launch_s; }

/* Bytes per element of a parameter's gradient accumulation into Megatron-LM's contiguous
 * gradient buffer (megatron/model/distributed.py, the backward hook's main_grad.add_(grad)):
 * read the fresh gradient and the buffer, write the buffer, all in the 2-byte gradient type. */
#define GRAD_ACCUM_BYTES (3 * HALF)
/* Parameter tensors of a transformer layer: QKV, projection and the two MLP weights with their
 * biases, and the two layernorms' scale and shift. */
#define LAYER_TENSORS 12

/* Returns the seconds of adding one microbatch's gradients of params parameters in `tensors`
 * tensors into the gradient buffer: GRAD_ACCUM_BYTES a parameter, a launch a tensor. */
double cost_gpt_grad_accum_s(const cost_hw *hw, double params, int tensors) {
    return cost_stream_s(hw, GRAD_ACCUM_BYTES * params) + tensors * hw->launch_s;
}

/* Returns the tensor-parallel collective of one layer boundary: an all-reduce of bytes over T
 * on the intra link at the collective efficiency, or under sequence parallelism the
 * all-gather / reduce-scatter pair that replaces it. */
static double tp_collective_s(const cost_layout *l, const cost_hw *hw, double bytes) {
    if (l->tp <= 1) return 0;
    double bw = hw->intra_bandwidth_Bps * hw->coll_intra_efficiency, lat = hw->intra_latency_s;
    if (l->sequence_parallel)
        return cost_ring_allgather_s(l->tp, bytes, bw, lat) + cost_ring_reduce_scatter_s(l->tp, bytes, bw, lat);
    return cost_ring_allreduce_s(l->tp, bytes, bw, lat);
}

/* FLOPs of a fused attention kernel's backward over its forward's: FlashAttention's backward
 * runs five s x s x d products (the scores again, and four gradients) against the forward's two. */
#define FLASH_BACKWARD_RATIO 2.5

/* Returns a fused (flash) attention kernel's time on one GPU for `passes` forwards' worth of
 * FLOPs: the score and context products, 4 b s^2 h / t FLOPs per forward, at
 * gemm.attention_efficiency (the score GEMM's efficiency when 0), or its Q, K, V and output
 * bytes at memory bandwidth, plus one launch. */
static double flash_attention_s(const cost_layout *l, const cost_hw *hw, double passes) {
    double b = l->microbatch, s = l->seq, h = l->hidden, a = l->heads, t = l->tp;
    double eff = hw->gemm_attention_efficiency > 0 ? hw->gemm_attention_efficiency
                                                   : cost_gemm_efficiency(hw, s, s, b * a / t);
    double compute = passes * 4 * b * s * s * h / t / (hw->peak_flops[l->precision] * eff);
    double memory = cost_stream_s(hw, passes * 4 * HALF * b * s * h / t);
    return (compute > memory ? compute : memory) + hw->launch_s;
}

/* Bytes per score element (b a s^2 / T of them, fp16) of the attention core's memory-bound
 * kernels in Megatron-LM of 2021 (no flash attention): the fused scale-mask-softmax reads the
 * scores and writes the probabilities; dropout (PyTorch's) reads them, writes its output and a
 * one-byte mask. Backward: dropout's reads the gradient and the mask and writes; softmax's reads
 * the gradient and its own output and writes. */
#define SOFTMAX_FWD_BYTES (2 * HALF)
#define DROPOUT_FWD_BYTES (2 * HALF + MASK_BYTES)
#define DROPOUT_BWD_BYTES (2 * HALF + MASK_BYTES)
#define SOFTMAX_BWD_BYTES (3 * HALF)
/* Bytes per context element (b s h / T) of the [b, a, s, d] -> [s, b, a d] permute copy before
 * the projection (read, write), and of its gradient's copy back. */
#define PERMUTE_BYTES (2 * HALF)

/* Returns the attention core's forward on one GPU: score GEMM Q K^T (s x s x d per head),
 * softmax, dropout, context GEMM (s x d x s), the context's permute copy; or one flash kernel.
 * It is the part selective recomputation runs again. */
double cost_gpt_attention_fwd_s(const cost_layout *l, const cost_hw *hw) {
    double b = l->microbatch, s = l->seq, h = l->hidden, a = l->heads, t = l->tp;
    double heads = b * a / t, dh = h / a, scores = heads * s * s;
    if (l->flash_attention) return flash_attention_s(l, hw, 1);
    return cost_attention_gemm_s(hw, l->precision, s, s, dh, heads) + mem_op_s(hw, SOFTMAX_FWD_BYTES * scores) +
           mem_op_s(hw, DROPOUT_FWD_BYTES * scores) + cost_attention_gemm_s(hw, l->precision, s, dh, s, heads) +
           mem_op_s(hw, PERMUTE_BYTES * b * s * h / t);
}

/* Returns the attention core's backward on one GPU: the permute's copy back, dropout's and
 * softmax's backward, and the four GEMMs of the two products' gradients: dP = dC V^T
 * (s x s x d), and dV = P^T dC, dQ = dS K, dK = dS^T Q (s x d x s each); a flash kernel's
 * backward at FLASH_BACKWARD_RATIO times its forward's FLOPs. */
double cost_gpt_attention_bwd_s(const cost_layout *l, const cost_hw *hw) {
    double b = l->microbatch, s = l->seq, h = l->hidden, a = l->heads, t = l->tp;
    double heads = b * a / t, dh = h / a, scores = heads * s * s;
    if (l->flash_attention) return flash_attention_s(l, hw, FLASH_BACKWARD_RATIO);
    return mem_op_s(hw, PERMUTE_BYTES * b * s * h / t) + mem_op_s(hw, DROPOUT_BWD_BYTES * scores) +
           mem_op_s(hw, SOFTMAX_BWD_BYTES * scores) + cost_attention_gemm_s(hw, l->precision, s, s, dh, heads) +
           3 * cost_attention_gemm_s(hw, l->precision, s, dh, s, heads);
}

/* Returns one GPU's parameters of a transformer layer: the four weight matrices and the
 * column-split biases divided over T; the row-split biases and the layernorms whole. */
static double layer_params(const cost_layout *l) {
    double h = l->hidden, t = l->tp;
    return (12 * h * h + 7 * h) / t + 6 * h;
}

/* Returns the forward, input-backward and weight-backward seconds of one transformer layer on
 * one GPU (T tensor ranks, microbatch b), by part (cost.h): the four weight GEMMs (QKV,
 * projection, MLP up and down), the attention core, layernorms, GeLU, dropout and residuals, and
 * the tensor-parallel collectives on the critical path. The backward runs each weight GEMM twice
 * (data gradient in I, weight gradient in W), the attention core's backward
 * (cost_gpt_attention_bwd_s) and the elementwise work at twice the bytes; selective
 * recomputation adds the attention core's forward to I; W adds the weight gradients' accumulation
 * into the gradient buffer (cost_gpt_grad_accum_s). */
void cost_gpt_layer_parts(const cost_layout *l, const cost_hw *hw, cost_gpt_parts *out) {
    double b = l->microbatch, s = l->seq, h = l->hidden, t = l->tp;
    double tok = b * s, tok_sp = l->sequence_parallel ? tok / t : tok;
    cost_precision p = l->precision;
    double gemm = cost_gemm_s(hw, p, tok, 3 * h / t, h, 1) + cost_gemm_s(hw, p, tok, h, h / t, 1) +
                  cost_gemm_s(hw, p, tok, 4 * h / t, h, 1) + cost_gemm_s(hw, p, tok, h, 4 * h / t, 1);
    /* weight gradients: (in x out) outputs over the tokens */
    double wgrad = cost_gemm_s(hw, p, h, 3 * h / t, tok, 1) + cost_gemm_s(hw, p, h / t, h, tok, 1) +
                   cost_gemm_s(hw, p, h, 4 * h / t, tok, 1) + cost_gemm_s(hw, p, 4 * h / t, h, tok, 1);
    double core = cost_gpt_attention_fwd_s(l, hw);
    double ln = mem_op_s(hw, 2 * HALF * tok_sp * h);                           /* read x, write y */
    double gelu = mem_op_s(hw, 2 * HALF * tok * 4 * h / t);
    double resid = mem_op_s(hw, (3 * HALF + MASK_BYTES) * tok_sp * h);         /* dropout + add */
    double elem = 2 * ln + gelu + 2 * resid;
    /* the QKV projection's bias: PyTorch's linear adds it after the GEMM for the 3-D [s, b, h]
     * input (read, write; the other three biases are fused into GeLU and bias-dropout-add), and
     * its gradient is a sum over the tokens (read) */
    double qkv = tok * 3 * h / t, bias_f = mem_op_s(hw, 2 * HALF * qkv), bias_w = mem_op_s(hw, HALF * qkv);
    double comm = TP_COLLECTIVES * tp_collective_s(l, hw, HALF * tok * h);
    memset(out, 0, sizeof *out);
    out->f[COST_PART_GEMM] = gemm;
    out->f[COST_PART_ATTENTION] = core;
    out->f[COST_PART_ELEMENTWISE] = elem + bias_f;
    out->f[COST_PART_TP_COMM] = comm;
    /* backward: the same collectives */
    out->i[COST_PART_GEMM] = gemm;
    out->i[COST_PART_ATTENTION] = cost_gpt_attention_bwd_s(l, hw) +
                                  (l->recompute == COST_RC_SELECTIVE && !l->flash_attention ? core : 0);
    out->i[COST_PART_ELEMENTWISE] = 2 * elem;
    out->i[COST_PART_TP_COMM] = comm;
    out->w[COST_PART_GEMM] = wgrad;
    out->w[COST_PART_ELEMENTWISE] = bias_w + cost_gpt_grad_accum_s(hw, layer_params(l), LAYER_TENSORS);
}

/* Returns the sum of a part vector. */
static double parts_sum(const double *v) {
    double x = 0;
    for (int k = 0; k < COST_NPARTS; k++) x += v[k];
    return x;
}

/* Returns the activation bytes one microbatch keeps per transformer layer on one GPU, after
 * Korthikanti et al. (2022), Table 2: sbh (10 + 24 / t + 5 a s / (h t)) without recomputation
 * (sbh (34 + 5 a s / h) / t with sequence parallelism); selective drops the 5 a s / h attention
 * term; full keeps the layer input, 2 sbh (/ t with sequence parallelism). */
static double layer_stash_bytes(const cost_layout *l, cost_recompute rc) {
    double b = l->microbatch, s = l->seq, h = l->hidden, a = l->heads, t = l->tp, sbh = s * b * h;
    double attn = rc == COST_RC_SELECTIVE || l->flash_attention ? 0 : 5 * a * s / h; /* the s^2 tensors */
    if (rc == COST_RC_FULL) return 2 * sbh / (l->sequence_parallel ? t : 1);
    if (l->sequence_parallel) return sbh * (34 + attn) / t;
    return sbh * (10 + 24 / t + attn / t);
}

/* Fills the embedding (layer 0) of one GPU: its vocabulary shard and the position table, a
 * memory-bound lookup, the token ids kept. Returns 0 or -1 on byte overflow. */
static int embedding_layer(const cost_layout *l, const cost_hw *hw, cost_layer *y) {
    double b = l->microbatch, s = l->seq, h = l->hidden, t = l->tp, tok = b * s;
    y->fwd_s = mem_op_s(hw, 2 * HALF * tok * h);
    y->bwd_in_s = 0;
    /* scatter-add of the gradient rows, then the table's accumulation into the gradient buffer */
    y->bwd_w_s = mem_op_s(hw, 2 * HALF * tok * h) + cost_gpt_grad_accum_s(hw, (l->vocab * h / t + s * h), 2);
    y->rc_skip_s = y->fwd_s; /* outside the checkpointed transformer layers: never run again */
    double out = HALF * tok * h / t;
    return cost_bytes_from_double((l->vocab * h / t + s * h) * HALF, &y->param_bytes) ||
           cost_bytes_from_double(out, &y->out_bytes) || cost_bytes_from_double(COST_FP32_BYTES * tok, &y->stash_bytes) ||
           cost_bytes_from_double(COST_FP32_BYTES * tok, &y->stash_recompute_bytes) ||
           cost_bytes_from_double(COST_FP32_BYTES * tok, &y->w_stash_bytes)
               ? -1 : 0;
}

/* Bytes per logit (b s V / T of them) of Megatron-LM's vocabulary-parallel cross entropy
 * (megatron/mpu/cross_entropy.py) over logits cast to fp32: forward, the cast (read 2, write 4),
 * max (read), subtract the max, exp and divide by the sum in place (read and write each), the
 * sum (read); backward, the gradient's in-place scaling (read, write) and its cast back to fp16. */
#define CE_FWD_BYTES (HALF + 9 * COST_FP32_BYTES)
#define CE_BWD_BYTES (HALF + 3 * COST_FP32_BYTES)

/* Fills the head (last layer) of one GPU: final layernorm, the logits GEMM against its tied
 * vocabulary shard, the vocabulary-parallel cross entropy over fp32 logits (and its small
 * all-reduces). Keeps its input and the fp32 logits (Korthikanti's 4 s b V / t). */
static int head_layer(const cost_layout *l, const cost_hw *hw, cost_layer *y) {
    double b = l->microbatch, s = l->seq, h = l->hidden, t = l->tp, V = l->vocab, tok = b * s;
    double logits = tok * V / t;
    double ln = mem_op_s(hw, 2 * HALF * tok * h);
    double ce_f = mem_op_s(hw, CE_FWD_BYTES * logits), ce_b = mem_op_s(hw, CE_BWD_BYTES * logits);
    y->fwd_s = ln + cost_gemm_s(hw, l->precision, tok, V / t, h, 1) + ce_f + tp_collective_s(l, hw, HALF * tok * h);
    y->bwd_in_s = ln + cost_gemm_s(hw, l->precision, tok, h, V / t, 1) + ce_b + tp_collective_s(l, hw, HALF * tok * h);
    /* the gradient buffer takes the final layernorm's and, on a last stage apart from the first,
     * its copy of the tied word embeddings' */
    double tied = l->pp > 1 ? V * h / t : 0;
    y->bwd_w_s = cost_gemm_s(hw, l->precision, h, V / t, tok, 1) + cost_gpt_grad_accum_s(hw, 2 * h + tied, 2 + (tied > 0));
    y->rc_skip_s = y->fwd_s; /* outside the checkpointed transformer layers: never run again */
    return cost_bytes_from_double(0, &y->param_bytes) || cost_bytes_from_double(0, &y->out_bytes) ||
           cost_bytes_from_double(HALF * tok * h + COST_FP32_BYTES * logits, &y->stash_bytes) ||
           cost_bytes_from_double(HALF * tok * h, &y->stash_recompute_bytes) ||
           cost_bytes_from_double(HALF * tok * h + HALF * logits, &y->w_stash_bytes)
               ? -1 : 0;
}

/* Bytes per element of the received boundary that PyTorch's all_gather into a list of tensors
 * copies again: it gathers into a flat buffer and copies each of the T pieces out (read, write).
 * Megatron-LM's gather_split_1d_tensor (megatron/mpu/utils.py) called it until 2022, when the
 * code moved to _all_gather_base because the list form "does internal copies". */
#define GATHER_COPY_BYTES (2 * HALF)

/* Returns the seconds one pipeline exchange holds a GPU's compute stream under Megatron-LM,
 * whose batch_isend_irecv is waited for and the device synchronized after it
 * (megatron/p2p_communication.py; Megatron-Core's batch_p2p_sync default keeps the
 * synchronization): the boundary's transfer, 1/T of b s h halves with scatter/gather, on the
 * link between neighbouring pipeline ranks (inter-node unless a node holds several) at the
 * fraction of it NCCL reaches ([collective]: the exchange is NCCL traffic on the same NIC or
 * NVLink), and with scatter/gather the all-gather that rebuilds it over the tensor group with
 * the list all_gather's copy out, a launch a piece (GATHER_COPY_BYTES). 0 for P = 1. */
double cost_gpt_exchange_s(const cost_layout *l, const cost_hw *hw) {
    if (l->pp <= 1) return 0;
    double t = l->tp, elems = (double)l->microbatch * l->seq * l->hidden, whole = HALF * elems;
    int split = !l->no_scatter_gather || l->sequence_parallel;
    cost_hw pipe = cost_layout_pipeline_hw(hw, l), nccl = *hw;
    nccl.intra_bandwidth_Bps *= hw->coll_intra_efficiency;
    nccl.inter_bandwidth_Bps *= hw->coll_inter_efficiency;
    double x = cost_link_s(&nccl, pipe.devices_per_node <= 1, (int64_t)(split ? whole / t : whole));
    if (split && !l->sequence_parallel && l->tp > 1)
        x += cost_ring_allgather_s(l->tp, whole, nccl.intra_bandwidth_Bps, hw->intra_latency_s) +
             cost_stream_s(hw, GATHER_COPY_BYTES * elems) + l->tp * hw->launch_s;
    return x;
}

/* Fills the transformer layers 1..L of one GPU from one layer's times and sizes; 0 or -1. */
static int transformer_layers(const cost_layout *l, const cost_hw *hw, cost_model *m) {
    cost_gpt_parts lp;
    cost_gpt_layer_parts(l, hw, &lp);
    double b = l->microbatch, s = l->seq, h = l->hidden, t = l->tp;
    /* the stage boundary: b s h halves, split 1/T over the tensor ranks with Megatron's
     * scatter/gather or sequence parallelism, else whole from every tensor rank */
    double out = HALF * b * s * h / (l->no_scatter_gather && !l->sequence_parallel ? 1 : t);
    int full = l->recompute == COST_RC_FULL, per = l->layers / (l->pp * l->chunks);
    double whole = layer_stash_bytes(l, full ? COST_RC_NONE : l->recompute), ckpt = layer_stash_bytes(l, COST_RC_FULL);
    double exchange = cost_gpt_exchange_s(l, hw);
    for (int i = 1; i <= l->layers; i++) {
        cost_layer *y = &m->layer[i];
        /* a stage's first layer carries its blocking pipeline exchange, each pass */
        double x = (i - 1) % per == 0 ? exchange : 0;
        y->fwd_s = parts_sum(lp.f) + x;
        y->bwd_in_s = parts_sum(lp.i) + x;
        y->bwd_w_s = parts_sum(lp.w);
        y->rc_skip_s = x; /* recomputation reruns the layer, not the exchange */
        /* Full recomputation runs layer by layer: a stage keeps its layers' checkpoints, and
         * the microbatch in backward one layer's rebuilt activations on top, carried by the
         * stage's first layer (cost_mem_delta adds stash - checkpoint at the backward). */
        double stash = full ? ckpt + ((i - 1) % per == 0 ? whole : 0) : whole;
        if (cost_bytes_from_double(layer_params(l) * HALF, &y->param_bytes) || cost_bytes_from_double(out, &y->out_bytes) ||
            cost_bytes_from_double(stash, &y->stash_bytes) || cost_bytes_from_double(ckpt, &y->stash_recompute_bytes) ||
            cost_bytes_from_double(stash / 2, &y->w_stash_bytes))
            return -1;
    }
    return 0;
}

/* Returns the layer table of one GPU of the layout (see cost.h), or NULL and e. */
cost_model *cost_gpt_model(const cost_layout *l, const cost_hw *hw, pl_err *e) {
    if (cost_layout_check(l, hw, e) != PL_OK) return NULL;
    if (!(hw->peak_flops[l->precision] > 0)) {
        pl_errf(e, PL_EINPUT, "hardware %s has no %s peak (device.flops_%s)", hw->name,
                cost_precision_name(l->precision), cost_precision_name(l->precision));
        return NULL;
    }
    cost_model *m = cost_model_alloc(l->layers + 2, e);
    if (!m) return NULL;
    int bad = cost_layer_set_name(m, 0, "embedding", strlen("embedding"), e) != PL_OK ||
              cost_layer_set_name(m, l->layers + 1, "head", strlen("head"), e) != PL_OK;
    for (int i = 1; !bad && i <= l->layers; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "layer %d", i);
        bad = cost_layer_set_name(m, i, name, (size_t)n, e) != PL_OK;
    }
    if (bad) {
        cost_model_free(m);
        return NULL;
    }
    if (embedding_layer(l, hw, &m->layer[0]) || transformer_layers(l, hw, m) ||
        head_layer(l, hw, &m->layer[l->layers + 1])) {
        cost_model_free(m);
        pl_errf(e, PL_EINPUT, "model gpt: sizes overflow");
        return NULL;
    }
    m->microbatch_size = l->microbatch;
    m->dtype_bytes = HALF;
    m->cut_bytes[0] = (int64_t)(COST_FP32_BYTES * (double)l->microbatch * l->seq); /* token ids */
    cost_model_chain_cuts(m);
    snprintf(m->name, sizeof m->name, "gpt-tp%d", l->tp);
    snprintf(m->source, sizeof m->source, "gpt");
    return m;
}

/* Returns Megatron's split of the L + 2 layers over P v stages: L / (P v) transformer layers
 * each, the embedding with the first and the head with the last; NULL and e on error. */
cost_partition *cost_gpt_partition(const cost_layout *l, pl_err *e) {
    if (cost_layout_check(l, NULL, e) != PL_OK) return NULL;
    int stages = l->pp * l->chunks, per = l->layers / stages;
    cost_partition *p = cost_partition_new(stages);
    if (!p) {
        pl_errf(e, PL_ENOMEM, "out of memory");
        return NULL;
    }
    for (int q = 1; q < stages; q++) p->bound[q] = 1 + q * per;
    p->bound[stages] = l->layers + 2;
    return p;
}

/* Returns the hardware a layout's pipeline sees: each pipeline rank a tensor group, so
 * devices_per_node / (T D) ranks per node (at least 1; Megatron's rank order puts the D replicas
 * between pipeline neighbours), and enough nodes for P ranks. */
cost_hw cost_layout_pipeline_hw(const cost_hw *hw, const cost_layout *l) {
    cost_hw p = *hw;
    int per = hw->devices_per_node / (l->tp * l->dp);
    p.devices_per_node = per > 0 ? per : 1;
    p.nodes = (l->pp + p.devices_per_node - 1) / p.devices_per_node;
    return p;
}

/* Returns the data-parallel gradient synchronization of param_bytes (one GPU's share of a
 * stage) over D replicas, hierarchical (cost_hier_allreduce_s): Megatron orders ranks tensor
 * first, then data parallel, so a node holds devices_per_node / T replicas of the same shard;
 * the distributed optimizer's reduce-scatter + all-gather moves the same bytes. 0 when D = 1. */
double cost_gpt_sync_s(const cost_layout *l, const cost_hw *hw, int64_t param_bytes) {
    if (l->dp <= 1 || param_bytes <= 0) return 0;
    int local = hw->devices_per_node / l->tp;
    if (local < 1) local = 1;
    if (local > l->dp) local = l->dp;
    int nodes = (l->dp + local - 1) / local;
    double grads = (double)param_bytes; /* fp16 gradients, as big as the fp16 weights */
    return cost_hier_allreduce_s(local, nodes, grads, hw->intra_bandwidth_Bps * hw->coll_intra_efficiency,
                                 hw->intra_latency_s, hw->inter_bandwidth_Bps * hw->coll_inter_efficiency,
                                 hw->inter_latency_s);
}

/* Bytes per parameter of Megatron-LM's mixed-precision optimizer step (megatron/optimizer/
 * optimizer.py, apex's fused kernels) on the parameters a GPU updates: copy the fp16 gradient to
 * the fp32 main gradient (read 2, write 4), unscale it and check for inf (read, write 4), the
 * gradient norm for clipping (read 4), Adam (read weight, gradient, m and v, write weight, m and
 * v: 16 + 12), copy the fp32 weight back to the fp16 model (read 4, write 2). */
#define STEP_UPDATE_BYTES ((HALF + COST_FP32_BYTES) + 2 * COST_FP32_BYTES + COST_FP32_BYTES + \
                           7 * COST_FP32_BYTES + (COST_FP32_BYTES + HALF))
/* ... and on every gradient of the GPU: zeroing the gradient buffer (write 2) and its division by
 * D before the all-reduce (read, write 2). */
#define STEP_BUFFER_BYTES (3 * HALF)
/* Kernels of a step: the five passes above and the buffer's two. */
#define STEP_KERNELS 7

/* Returns the seconds of one GPU's optimizer step holding param_bytes of fp16 weights: the
 * update passes over its share (1 / D with the distributed optimizer), the buffer passes over
 * all its gradients, streamed, a launch per pass (apex's multi-tensor kernels). */
double cost_gpt_step_s(const cost_layout *l, const cost_hw *hw, int64_t param_bytes) {
    double params = (double)param_bytes / HALF, updated = l->distributed_optimizer ? params / l->dp : params;
    return cost_stream_s(hw, STEP_UPDATE_BYTES * updated + STEP_BUFFER_BYTES * params) + STEP_KERNELS * hw->launch_s;
}

/* Returns the optimizer state bytes per parameter of one GPU: mixed-precision Adam's 12, over D
 * with the distributed optimizer. */
double cost_gpt_optimizer_bytes(const cost_layout *l) {
    return l->distributed_optimizer ? (double)ADAM_MIXED_BYTES / l->dp : ADAM_MIXED_BYTES;
}

/* Returns the memory of one GPU holding param_bytes of fp16 weights, by part (cost.h). */
cost_gpt_memory cost_gpt_static_memory(const cost_layout *l, int64_t param_bytes) {
    cost_gpt_memory r;
    memset(&r, 0, sizeof r);
    double params = (double)param_bytes / HALF;
    r.weights_bytes = (double)param_bytes;
    r.grad_bytes = (double)param_bytes;
    r.optimizer_bytes = params * cost_gpt_optimizer_bytes(l);
    return r;
}
