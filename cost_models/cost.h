/* cost.h: cost models: layer tables (profiles, graph.txt, analytic), hardware descriptions, and the
 * ONE definition of compute, transfer, all-reduce and memory costs used by simulator and executor. */
#ifndef COST_H
#define COST_H

#include <stddef.h>
#include <stdint.h>

#include "pl_common.h"
#include "pl_sched.h"

/* ================================================================ models
 *
 * A model is an ordered table of layers. Every per-layer number describes ONE microbatch of
 * model->microbatch_size samples; costs at another microbatch size scale compute (seconds and
 * FLOPs) and activation bytes linearly by b / model->microbatch_size (parameter bytes do not
 * scale). Unknown numbers are negative (COST_UNKNOWN).
 *
 * Profile CSV (what the executor's profiler writes; cost_model_read_csv):
 *   - '#' starts a comment line; blank lines are ignored.
 *   - Optional metadata lines before the header: "#@ key=value [key=value ...]" with keys
 *       microbatch_size  samples per microbatch the numbers were measured at (default 1)
 *       input_bytes      bytes of the model's input per microbatch (what stage 0 receives; default 0)
 *       dtype_bytes      bytes per parameter element in param_bytes (default 4)
 *       name             model name
 *       allreduce_latency_s  the profiled ring all-reduce's per-step latency alpha, seconds
 *       allreduce_Bps        its bandwidth beta, bytes of fp32 gradient per second: the two
 *                        cost_ring_allreduce_s takes, fitted by cost_ring_allreduce_fit from the
 *                        executor's own all-reduce on the threads transport (pipelab profile);
 *                        both or neither (neither = the all-reduce was not profiled)
 *       allreduce_mpi_latency_s, allreduce_mpi_Bps  the same for the MPI transport (its
 *                        MPI_Allreduce between two processes: mpirun -np 2 pipelab profile
 *                        --transport mpi); both or neither, independent of the threads' pair
 *       p2p_latency_s, p2p_Bps  the executor's point-to-point hand-off of a stage boundary's
 *                        activation between two ranks on the threads transport (mailbox post and
 *                        wake-up of the receiving worker): latency alpha and bandwidth beta of
 *                        cost_link_s, fitted by cost_link_fit from a timed ping-pong at several
 *                        sizes; both or neither (neither = SEND/RECV priced free, as before)
 *       p2p_mpi_latency_s, p2p_mpi_Bps  the same for the MPI transport; both or neither
 *       p2p_send_s, p2p_send_Bps  the sender's own time in that hand-off (its send call: the
 *                        copy into the transport), which holds its rank: cost_p2p_s of the
 *                        message's bytes; both or neither (neither = a SEND holds its rank for
 *                        no time)
 *       p2p_post_s, p2p_post_Bps  the receiver's own time posting a receive (its RECV), which
 *                        holds its rank: p2p_post_s when the receive is posted before its message
 *                        came, cost_p2p_s of the message's bytes when the message was already
 *                        there (the copy out of the mailbox); both or neither
 *       p2p_mpi_send_s, p2p_mpi_send_Bps, p2p_mpi_post_s, p2p_mpi_post_Bps  the same for MPI
 *     Unknown metadata keys, and a key given twice, are errors.
 *   - A header line naming columns, any order, each at most once:
 *       layer                 0-based index; must be 0, 1, 2, ... in file order (required)
 *       name                  layer name (required; double-quote it, RFC 4180 style, when it
 *                             holds commas or quotes: "Conv2d(3, 64)", "" for a quote)
 *       fwd_s                 forward seconds per microbatch
 *       bwd_in_s              backward for the input gradient (I), seconds
 *       bwd_w_s               backward for the weight gradient (W), seconds
 *       fwd_flops, bwd_in_flops, bwd_w_flops   the same as FLOPs
 *       param_bytes           parameter bytes (required)
 *       out_bytes             output activation bytes: what crosses a stage boundary after this
 *                             layer (required)
 *       stash_bytes           activation bytes kept from forward to backward without
 *                             recomputation (required)
 *       stash_recompute_bytes bytes this layer keeps under full recomputation (its checkpoint);
 *                             empty = "stage input only" (see cost_stage.stash_recompute_bytes)
 *       in_bytes              bytes crossing the cut just before this layer (what a stage that
 *                             starts here receives; differs from the previous out_bytes in
 *                             branchy graphs); empty = previous layer's out_bytes (input_bytes
 *                             for layer 0)
 *       w_stash_bytes         part of the stash still held after I until W (split backward);
 *                             empty = cost_opts.w_stash_fraction x stash_bytes
 *     Unknown columns are errors. For each of fwd, bwd_in, bwd_w at least one of _s and _flops
 *     must be given (non-empty) on every row. Empty cell = unknown. Negative values are errors.
 *   Errors read "path:line: what is wrong".
 */

/* The environment variable naming a folder of hardware files NAME.ini, looked up by name before
 * the embedded presets. */
#define COST_HARDWARE_DIR_ENV "PIPELAB_HARDWARE_DIR"

#define COST_UNKNOWN (-1.0)
#define COST_MAX_LAYERS (1 << 20)
/* The largest coefficient of variation of a time that the simulator draws (its jitter and the
 * ranks' drift) and a profile may hold: above 100 the lognormal factors are mostly below 1e-4
 * (mu = -ln(1 + cv^2) / 2), so times vanish. */
#define COST_CV_MAX 100

typedef struct cost_layer {
    char *name;                   /* owned by the model */
    char *id;                     /* source id ("node12" in graph.txt), or NULL; owned */
    double fwd_s, bwd_in_s, bwd_w_s;             /* seconds per microbatch, < 0 = unknown */
    double fwd_flops, bwd_in_flops, bwd_w_flops; /* FLOPs per microbatch, < 0 = unknown */
    int64_t param_bytes;           /* parameters (one version) */
    int64_t out_bytes;             /* output activation per microbatch */
    int64_t stash_bytes;           /* kept forward -> backward, no recomputation */
    int64_t stash_recompute_bytes; /* kept under full recomputation; < 0 = stage input rule */
    int64_t w_stash_bytes;         /* held from I until W; < 0 = w_stash_fraction x stash_bytes */
    double rc_skip_s;              /* seconds of the forward that full recomputation does not run
                                    * again (a layer outside the checkpoints, a pipeline exchange);
                                    * 0 = it all runs again */
    int src_line;                  /* line in the source file, 0 for generated layers */
} cost_layer;

/* The executor's transports, whose all-reduces a profile measures apart (their names:
 * cost_transport_name). */
typedef enum cost_transport { COST_TRANSPORT_THREADS = 0, COST_TRANSPORT_MPI = 1, COST_TRANSPORTS } cost_transport;
/* A measured all-reduce link: the ring's latency alpha and bandwidth beta, as
 * cost_ring_allreduce_s takes them; Bps 0 = not measured. */
typedef struct cost_ar_link {
    double latency_s; /* seconds per ring step */
    double Bps;       /* bytes of fp32 gradient per second */
} cost_ar_link;

typedef struct cost_model {
    char name[64];            /* "transformer", "gnmt", file stem, ... */
    char source[16];          /* "csv", "graph", "uniform", "mlp", "transformer" */
    int n;                    /* layers */
    cost_layer *layer;        /* [n] in pipeline order (topological order for graphs) */
    int64_t *cut_bytes;       /* [n + 1] bytes crossing a cut before position k per microbatch:
                               * [0] = the model input, [n] = the last layer's output; for a
                               * graph, the sum of out_bytes of every node before k with an edge
                               * to a node at or after k (branches and skips counted). */
    int microbatch_size;      /* samples the per-layer numbers describe (>= 1) */
    int dtype_bytes;          /* bytes per parameter element (to count parameters) */
    char *src_path;           /* file it came from, or NULL; owned */
    cost_ar_link allreduce[COST_TRANSPORTS]; /* profiled all-reduce link of each transport
                               * (metadata above); Bps 0 = not profiled on that transport */
    cost_ar_link p2p[COST_TRANSPORTS]; /* profiled point-to-point link of each transport
                               * (latency_s, Bps of cost_link_s); Bps 0 = not profiled */
    cost_ar_link p2p_send[COST_TRANSPORTS]; /* the sender's own time in a hand-off (cost_p2p_s of
                               * the message's bytes); Bps 0 = not profiled */
    cost_ar_link p2p_post[COST_TRANSPORTS]; /* the receiver's post of a receive: latency_s when
                               * posted before its message came, cost_p2p_s of the bytes (the copy
                               * out) after; Bps 0 = not profiled */
} cost_model;

/* The measured links a profile CSV keeps (cost_model's allreduce, p2p, p2p_send, p2p_post). */
typedef enum cost_link_kind {
    COST_LINK_ALLREDUCE = 0, COST_LINK_P2P = 1, COST_LINK_P2P_SEND = 2, COST_LINK_P2P_POST = 3, COST_LINK_KINDS
} cost_link_kind;
/* The profile CSV's metadata key of transport t's measured link of kind k: its latency
 * (bandwidth 0: "allreduce_latency_s", "p2p_mpi_latency_s", "p2p_send_s", ...) or its bandwidth
 * ("allreduce_Bps", "p2p_post_Bps", ...); NULL for a kind or transport out of range. */
const char *cost_link_key(cost_link_kind k, cost_transport t, int bandwidth);

/* Frees a model and everything it owns; NULL is fine. */
void cost_model_free(cost_model *m);

/* Checks a byte count read from an input (a profile CSV, a --stage-costs file, a model spec):
 * a whole number from 0 to 4.6e18 (just under 2^62, so that sums of a few still fit int64_t).
 * Returns NULL with *out set, or what is wrong with v, to follow the value's name in a message:
 * "is negative", "is not a whole number" or "is too large (more than 4.6e18 bytes)". */
const char *cost_bytes_read(double v, int64_t *out);

/* Returns PL_OK when t_s, a sum of seconds, is finite; else PL_EINPUT with "WHAT overflowed
 * (LABEL T s): compute or transfer times too large to add up" (WHAT from fmt): the one refusal of
 * times whose sum overflows a double (a layer's, a stage's, a partition's, the simulated
 * makespan). */
int cost_time_check(double t_s, const char *label, pl_err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads a profile CSV (format above) from text[0..len); path is used in messages.
 * Returns the model, or NULL with e filled ("path:line: what"). */
cost_model *cost_model_read_csv(const char *path, const char *text, size_t len, pl_err *e);
/* Writes a model in the profile CSV format (with metadata lines); round-trips with read. */
int cost_model_write_csv(const cost_model *m, pl_buf *out, pl_err *e);

/* Reads a PipeDream graph.txt profile. Node lines
 *   nodeN -- Description -- forward_compute_time=MS, backward_compute_time=MS,
 *            activation_size=BYTES, parameter_size=BYTES
 * (activation_size may be a list "[a; b; c]": summed), edge lines "\tnodeA -- nodeB".
 * Times are milliseconds per minibatch; they become seconds; the minibatch is taken as one
 * microbatch of `microbatch_size` samples (pass 1 when unknown).
 * Layers are ordered topologically (Kahn's algorithm; ties broken by the smallest node number N,
 * then by first appearance in the file). Backward split: nodes without parameters have I = the
 * whole backward and W = 0; nodes with parameters get I = W = backward / 2.
 * out_bytes = stash_bytes = activation_size, stash_recompute_bytes unknown (stage input rule);
 * cut_bytes as described above; cut_bytes[0] = 0.
 * Errors: malformed lines, unknown or missing keys, negative values, duplicate nodes, edges to
 * undefined nodes, and cycles ("path:line: cycle: node3 -> node5 -> node3"). */
cost_model *cost_model_read_graph(const char *path, const char *text, size_t len,
                                  int microbatch_size, pl_err *e);

/* Analytic generators. Each returns a model of microbatch_size = the given microbatch. */
typedef struct cost_uniform_opts {
    int layers;                    /* L >= 1 */
    int microbatch;                /* samples per microbatch (default 1) */
    double fwd_s, bwd_s;           /* seconds; bwd split I = W = bwd / 2 unless given below */
    double bwd_in_s, bwd_w_s;      /* < 0 = derived from bwd_s (or 2 fwd_s when bwd_s < 0); given,
                                    * both and without bwd_s (bwd_s with them is an error) */
    double fwd_flops;              /* > 0: FLOP-based instead (bwd_in = bwd_w = fwd_flops) */
    int64_t param_bytes, out_bytes, stash_bytes; /* per layer */
    int64_t w_stash_bytes;         /* < 0 = fraction rule */
    int64_t stash_recompute_bytes; /* < 0 = stage input rule */
} cost_uniform_opts;
/* Defaults: 1 layer, microbatch 1, fwd 1 s, bwd derived (2 s), no FLOPs, 0 bytes, rule. */
void cost_uniform_defaults(cost_uniform_opts *o);
cost_model *cost_model_uniform(const cost_uniform_opts *o, pl_err *e);

/* The executor's dense block, fp32: Linear h -> f (f = ffn_mult * h), GELU, Linear f -> h, residual.
 * Per block and microbatch b: fwd = bwd_in = bwd_w = 4 b h f FLOPs (two GEMMs of 2 b h f;
 * elementwise work ignored); params (2 h f + f + h) * 4 bytes; out b h * 4; stash (b h + 2 b f) * 4
 * (block input, pre- and post-GELU); recompute stash b h * 4 (the block input). */
typedef struct cost_mlp_opts {
    int width, depth, microbatch; /* h, L, b */
    int ffn_mult;                 /* default 4 */
} cost_mlp_opts;
cost_model *cost_model_mlp(const cost_mlp_opts *o, pl_err *e);

/* GPT-style transformer in fp16/bf16 (2-byte params and activations), microbatch b:
 *   layer 0   "embedding": params (V h + s h) * 2, no compute, out 2 s b h, input 4 s b (int32 ids)
 *   layers 1..L "layer k": fwd 24 b s h^2 + 4 b s^2 h FLOPs (Megatron); backward split as the
 *             Zero Bubble paper's Table 1: I = 24 b s h^2 + 8 b s^2 h, W = 24 b s h^2;
 *             params (12 h^2 + 13 h) * 2; out 2 s b h; stash s b h (34 + 5 a s / h) (Korthikanti,
 *             no recomputation); recompute stash 2 s b h; W stash 32 s b h (Zero Bubble Table 1).
 *   layer L+1 "head": logits with the tied embedding (no params of its own): fwd = I = W =
 *             2 b s h V FLOPs; stash 2 s b h + 4 s b V (input and fp32 logits); out 0.
 * Parameter total = L (12 h^2 + 13 h) + V h + s h (GPT-3 175B: 174.6e9). */
typedef struct cost_transformer_opts {
    int layers, hidden, heads, seq, vocab, microbatch; /* L, h, a, s, V, b */
} cost_transformer_opts;
/* A field 0 is a key not given: the error names it ("'vocab' is missing"); heads must divide hidden. */
cost_model *cost_model_transformer(const cost_transformer_opts *o, pl_err *e);
/* One key=value of a generator spec ("gen:k=v,k=v"). */
typedef struct cost_spec_kv {
    char key[32];
    char val[64];
} cost_spec_kv;

/* Splits a generator spec's "k=v,k=v" (after the colon) into kv[max]: every item key=value with
 * a non-empty value, no key given twice (the rule of every --model spec, the executor's too);
 * errors read "model GEN: ...". Returns the count, or -1 with e. */
int cost_spec_split(const char *gen, const char *s, cost_spec_kv *kv, int max, pl_err *e);

/* Reads the parameters of a "transformer:..." spec (the syntax cost_model_open takes) into o. */
int cost_transformer_spec(const char *spec, cost_transformer_opts *o, pl_err *e);

/* Opens a model from a spec used on command lines:
 *   "uniform:layers=8,fwd_s=1e-3,bwd_s=2e-3,param_bytes=...,out_bytes=...,stash_bytes=..."
 *   "mlp:width=1024,depth=8,microbatch=32"
 *   "transformer:layers=24,hidden=1024,heads=16,seq=1024,vocab=50257,microbatch=1"
 *   "gpt3-175b" style named presets are not provided; anything else is a file path:
 *   *.csv = profile CSV, otherwise graph.txt (microbatch_size 1); a file with a NUL byte is refused.
 * Unknown generator keys and a key given twice are errors, as are values that contradict each
 * other (uniform: bwd_s beside bwd_in_s/bwd_w_s; a time beside fwd_flops, which sets every
 * time from the hardware's FLOP rate). Returns NULL and e on error. */
cost_model *cost_model_open(const char *spec, pl_err *e);

/* Sum of param_bytes / dtype_bytes over all layers. */
double cost_model_params(const cost_model *m);

/* ================================================================ hardware
 *
 * INI file (libinih), values are plain numbers in SI base units (FLOP/s, bytes, bytes/s, s):
 *   [hardware]   name, description, source                 (free text)
 *   [device]     flops_fp32, flops_tf32, flops_fp16, flops_bf16   peak FLOP/s (0 = unsupported)
 *                efficiency        achievable fraction of peak, (0, 1]
 *                memory_bytes      capacity per device
 *                memory_bandwidth  bytes/s
 *                memory_efficiency fraction of memory_bandwidth a streaming kernel reaches, (0, 1]
 *                                  (default 1; cost_stream_Bps)
 *                launch_overhead   seconds per layer per compute action (kernel launch)
 *   [topology]   nodes, devices_per_node
 *   [link.intra] bandwidth, latency   between devices of one node (bytes/s, s)
 *   [link.inter] bandwidth, latency   between nodes, per device pair
 *   [gemm]       max_efficiency    fraction of peak a large GEMM reaches (0 = device.efficiency)
 *                units, tile_m, tile_n   SMs and the output tile: tile and wave quantization
 *                attention_efficiency    a fused (flash) attention kernel's fraction of peak
 *                attention_bandwidth     fraction of memory_bandwidth the attention core's batched
 *                                        GEMMs stream at (0 = as any kernel: memory_efficiency)
 *   [collective] intra_efficiency, inter_efficiency   bus bandwidth / link bandwidth (default 1)
 * Unknown sections or keys are errors "path:line: ...". Overrides use "section.key"
 * ("link.inter.bandwidth", "device.flops_fp32"). Presets are embedded in the binary at build
 * time from cost_models/hardware/NAME.ini; PIPELAB_HARDWARE_DIR (env) is searched first. */

typedef enum cost_precision {
    COST_FP32 = 0,
    COST_TF32,
    COST_FP16,
    COST_BF16,
    COST_NPREC
} cost_precision;

/* Returns "fp32", "tf32", "fp16", "bf16". */
const char *cost_precision_name(cost_precision p);
/* Returns the precision for a name, or -1. */
int cost_precision_parse(const char *s);

typedef struct cost_hw {
    char name[64];
    char description[160];
    char source[256];
    double peak_flops[COST_NPREC]; /* FLOP/s per device */
    double efficiency;             /* achievable / peak */
    double memory_bytes;           /* capacity per device */
    double memory_bandwidth_Bps;
    double memory_efficiency;      /* achievable / memory_bandwidth_Bps */
    double launch_s;               /* per layer per compute action */
    int nodes, devices_per_node;
    double intra_bandwidth_Bps, intra_latency_s;
    double inter_bandwidth_Bps, inter_latency_s;
    /* [gemm]: GEMM efficiency by shape (cost_gemm_s); max_efficiency 0 = device.efficiency flat */
    double gemm_max_efficiency;    /* large-GEMM fraction of peak */
    double gemm_attention_efficiency; /* a fused attention kernel's fraction of peak (0 = the
                                         score GEMM's efficiency) */
    double gemm_attention_bandwidth; /* the attention core's batched GEMMs' fraction of the
                                         memory bandwidth (0 = memory_efficiency) */
    int gemm_units;                /* processors a GEMM's tiles are spread over (SMs) */
    int gemm_tile_m, gemm_tile_n;  /* output tile of the library's kernel */
    /* [collective]: fraction of the link bandwidth a large collective reaches (bus bandwidth) */
    double coll_intra_efficiency, coll_inter_efficiency;
} cost_hw;

/* Fills hw with neutral defaults (1 node of 1 device, nothing known: 0 FLOP/s, efficiency 1,
 * free links: bandwidth 1e30, latency 0). */
void cost_hw_init(cost_hw *hw);
/* Parses INI text over hw (keys not in the text keep their value). A value out of its key's range
 * (efficiencies in (0, 1], gemm fractions in [0, 1], bandwidths > 0, counts >= 1, other numbers
 * >= 0) is refused at its line. Returns PL_OK or PL_EINPUT ("path:line: unknown key 'x' in
 * [device]", "path:line: device.efficiency must be in (0, 1] ..."). */
int cost_hw_parse(cost_hw *hw, const char *path, const char *text, pl_err *e);
/* Loads a preset by name ("h100") or an .ini path (contains '/' or ends in ".ini"), after
 * cost_hw_init, then checks it. A file must be text (a NUL byte: "path:line: not a text file")
 * and have a [device] section (an empty file has none). Returns PL_OK or an error naming the
 * file (and line), or listing the known presets. */
int cost_hw_load(cost_hw *hw, const char *name_or_path, pl_err *e);
/* Sets one key ("link.inter.bandwidth" = "12.5e9"); unknown key or a value out of the key's range
 * (as cost_hw_parse) -> PL_EINPUT. */
int cost_hw_set(cost_hw *hw, const char *key, const char *value, pl_err *e);
/* Applies "KEY=VALUE" (the CLI's --set argument); its errors start "--set KEY=VALUE: ". */
int cost_hw_set_kv(cost_hw *hw, const char *key_eq_value, pl_err *e);
/* Checks every key against its range (cost_hw_parse's): what was set in the structure itself. */
int cost_hw_check(const cost_hw *hw, pl_err *e);
/* Writes hw as an INI file (calibration writes fitted values this way); parses back equal. */
int cost_hw_write(const cost_hw *hw, pl_buf *out);
/* Writes every key of hw as one JSON object {"section.name": value} (numbers exactly, %.17g). */
int cost_hw_json(const cost_hw *hw, pl_buf *out);
/* Names of the embedded presets, NULL-terminated; and the INI text of one (NULL if unknown). */
const char *const *cost_hw_preset_names(void);
const char *cost_hw_preset_text(const char *name);

/* ================================================================ costs */

/* Everything besides model, partition and hardware that a cost depends on. */
typedef struct cost_opts {
    int microbatch_size;            /* samples per microbatch (default: the model's) */
    cost_precision precision;       /* for FLOP-based times (default fp32) */
    int prefer_flops;               /* 1: use FLOPs when both FLOPs and seconds are known */
    double grad_bytes_per_param;    /* gradient buffer (default: model dtype_bytes) */
    double optimizer_bytes_per_param; /* optimizer state (default 8: Adam m, v in fp32) */
    double w_stash_fraction;        /* part of the stash held from I until W (default 0.5) */
} cost_opts;

/* Fills o with the defaults above for model m (m may be NULL: microbatch 1, grad 4 bytes). */
void cost_opts_init(cost_opts *o, const cost_model *m);

/* Per-layer compute seconds of one microbatch under hw and o: seconds as given (scaled by
 * microbatch), else flops / (peak[precision] * efficiency) + launch_s. Returns PL_OK, or
 * PL_EINPUT when a time is unknown and cannot be derived (no FLOPs, or peak 0) or overflows
 * (cost_time_check). */
int cost_layer_times(const cost_model *m, int layer, const cost_hw *hw, const cost_opts *o,
                     double *f_s, double *i_s, double *w_s, pl_err *e);

/* Costs of one stage = layers [first, end) for one microbatch. */
typedef struct cost_stage {
    int first, end;                 /* layers [first, end) */
    double f_s, i_s, w_s;           /* forward, input backward, weight backward */
    double b_s;                     /* i_s + w_s */
    double rerun_s;                 /* the forward full recomputation runs again: f_s less the
                                     * layers' rc_skip_s */
    double b_recompute_s;           /* b_s + rerun_s */
    double i_recompute_s;           /* i_s + rerun_s (split backward under recomputation) */
    double i_last_s;                /* the input backward of its last layer (end - 1), the first
                                     * its backward runs */
    int64_t param_bytes;            /* one weight version */
    int64_t in_bytes;               /* cut_bytes[first]: received per microbatch (and gradient sent) */
    int64_t out_bytes;              /* cut_bytes[end]: sent per microbatch */
    int64_t stash_bytes;            /* kept per in-flight microbatch, no recomputation */
    int64_t stash_recompute_bytes;  /* kept under full recomputation: sum over layers of
                                     * stash_recompute_bytes, where an unknown value counts the
                                     * stage input (in_bytes) for the first layer and 0 after */
    int64_t w_stash_bytes;          /* held from I until W: sum of layers' w_stash_bytes (unknown:
                                     * w_stash_fraction x that layer's stash_bytes) */
} cost_stage;

/* Fills st for layers [first, end). Returns PL_OK or PL_EINPUT (bad range, unknown time, times
 * whose sum overflows: cost_time_check). */
int cost_stage_eval(const cost_model *m, int first, int end, const cost_hw *hw,
                    const cost_opts *o, cost_stage *st, pl_err *e);

/* Prefix sums for O(1) stage costs over any range (what partitioners want). */
typedef struct cost_prefix {
    int n;
    double *f_s, *i_s, *w_s;          /* [n + 1] prefix sums of per-layer times */
    int64_t *param_bytes, *stash_bytes, *w_stash_bytes; /* [n + 1] prefix sums */
    int64_t *rc_bytes;                /* [n + 1] prefix sums of max(0, stash_recompute_bytes) */
    double *rc_skip_s;                /* [n + 1] prefix sums of rc_skip_s */
    const cost_model *m;
    cost_opts o;
} cost_prefix;
int cost_prefix_init(cost_prefix *p, const cost_model *m, const cost_hw *hw, const cost_opts *o,
                     pl_err *e);
void cost_prefix_free(cost_prefix *p);
/* Same result as cost_stage_eval over [first, end), in O(1). */
void cost_prefix_stage(const cost_prefix *p, int first, int end, cost_stage *st);

/* Link and collective costs (cost_comm.c), the one home of these formulas for the planner, the
 * simulator and the cost model. bytes are the payload of the whole collective.
 *   cost_p2p_s                  latency + bytes / bandwidth (0 bytes still pays the latency)
 *   cost_ring_allreduce_s       2 (n - 1) / n * bytes / bandwidth + 2 (n - 1) latency
 *   cost_ring_reduce_scatter_s  (n - 1) / n * bytes / bandwidth + (n - 1) latency: the ring's
 *   cost_ring_allgather_s       first and second halves, each exactly half the all-reduce
 *   cost_pipedream_allreduce_s  4 (n - 1) bytes / (n bandwidth), PipeDream optimizer's model
 * Every collective over n <= 1 replicas costs 0. */
double cost_p2p_s(double latency_s, double bandwidth_Bps, double bytes);
double cost_ring_allreduce_s(int n, double bytes, double bandwidth_Bps, double latency_s);
double cost_ring_reduce_scatter_s(int n, double bytes, double bandwidth_Bps, double latency_s);
double cost_ring_allgather_s(int n, double bytes, double bandwidth_Bps, double latency_s);
double cost_pipedream_allreduce_s(int n, double bytes, double bandwidth_Bps);
/* Inverts cost_ring_allreduce_s: fits the latency alpha and bandwidth beta of a ring of n >= 2
 * replicas to k >= 2 measured times t[i] of bytes[i] (least squares of t = 2 (n - 1) alpha +
 * 2 (n - 1) / n bytes / beta). A negative alpha, or times that do not grow with the bytes, are
 * refitted through the origin (alpha = 0). Returns PL_OK with *latency_s and *bandwidth_Bps, or
 * PL_EINPUT when the sizes are not distinct or the times are not positive. */
/* The bandwidth of a free link (a hardware without links, cost_hw_init), bytes per second. */
#define COST_FREE_LINK_BPS 1e30
/* Inverts cost_link_s: fits latency alpha and bandwidth beta of a point-to-point link from k >= 2
 * one-way times t[i] of bytes[i] (the least-squares line of cost_ring_allreduce_fit, with its
 * fallback to the line through the origin for a negative latency; times that do not grow with the
 * size give their mean as alpha on a free link, beta COST_FREE_LINK_BPS). Returns PL_OK or
 * PL_EINPUT. */
int cost_link_fit(const double *bytes, const double *t, int k, double *latency_s, double *bandwidth_Bps, pl_err *e);
int cost_ring_allreduce_fit(int n, const double *bytes, const double *t, int k, double *latency_s,
                            double *bandwidth_Bps, pl_err *e);
/*   cost_tree_allreduce_s       pipelined tree: 2 bytes / bandwidth + 2 ceil(log2 n) latency
 *   cost_hier_allreduce_s       local x nodes replicas: reduce-scatter in each node (ring), ring
 *                               all-reduce of the 1/local shards across nodes, all-gather in each
 *                               node: both intra halves plus cost_ring_allreduce_s(nodes,
 *                               bytes / local) on the inter link */
double cost_tree_allreduce_s(int n, double bytes, double bandwidth_Bps, double latency_s);
double cost_hier_allreduce_s(int local, int nodes, double bytes, double intra_Bps, double intra_lat_s,
                             double inter_Bps, double inter_lat_s);

/* Link of a rank pair: rank -> node = rank / devices_per_node. Returns 1 when the ranks sit on
 * different nodes. */
int cost_ranks_inter(const cost_hw *hw, int rank_a, int rank_b);
/* Point-to-point transfer: latency + bytes / bandwidth of the intra or inter link (0 bytes on
 * the same rank costs 0). */
double cost_link_s(const cost_hw *hw, int inter, int64_t bytes);
double cost_transfer_s(const cost_hw *hw, int src_rank, int dst_rank, int64_t bytes);
/* Ring all-reduce (cost_ring_allreduce_s) of bytes over n replicas on the inter link when inter,
 * else intra. n <= 1 or bytes <= 0 costs 0. */
double cost_allreduce_s(const cost_hw *hw, int inter, int replicas, int64_t bytes);
/* The transport's name as the command line and the stored runs spell it: "threads", "mpi". */
const char *cost_transport_name(cost_transport t);
/* The one rule for pricing REDUCE_GRAD from a profile (pipelab run, simulate and partition call
 * it): the profile's all-reduce measured on transport want, else, for MPI, the one measured on
 * the threads; *used (may be NULL) gets the transport whose measurement it is. Fills link with
 * a neutral hardware (cost_hw_init) whose intra link is the measured latency and bandwidth, so
 * that cost_allreduce_s(link, 0, n, bytes) is the measured ring, and returns 1; returns 0 when
 * the profile measured no all-reduce (link untouched). */
int cost_model_allreduce_link(const cost_model *m, cost_transport want, cost_hw *link, cost_transport *used);
/* The one rule for pricing SEND/RECV from a profile: sets hw's intra link (the link between the
 * ranks of one node, where a CPU run's ranks sit) to the profile's point-to-point link measured
 * on transport tr, so that cost_transfer_s is its alpha + bytes / beta, and returns 1; returns 0
 * when the profile measured none on tr (hw untouched: free links, as before). */
int cost_model_p2p_link(const cost_model *m, cost_transport tr, cost_hw *hw);
/* Optimizer step of param_bytes on one device, memory-bound: reads and writes weights and
 * optimizer state, reads gradients, over memory_bandwidth. 0 when bandwidth unknown. */
double cost_step_s(const cost_hw *hw, const cost_opts *o, const cost_model *m,
                   int64_t param_bytes);

/* The memory one compute action changes: the one rule that every memory walk (the simulator's
 * engine, cost_schedule_memory, the executor's prediction) calls. A stage's per-microbatch sizes:
 * stash (kept from F until the backward, no recomputation), w_stash (held from I until W) and
 * checkpoint (kept under full recomputation); cost_mem_sizes_make caps the last two at the stash.
 * At the START of an action: F adds the stash (the checkpoint under full recomputation); B and I
 * under full recomputation add stash - checkpoint (the rebuilt activations replace the
 * checkpoint). At its END: B frees the stash, I frees stash - w_stash, W frees w_stash. Every
 * other kind (and the other phase) changes nothing. */
typedef struct cost_mem_sizes {
    int64_t stash, w_stash, checkpoint;
} cost_mem_sizes;
/* (inline: the simulator's engines call it on every compute action) */
static inline cost_mem_sizes cost_mem_sizes_make(int64_t stash, int64_t w_stash, int64_t checkpoint) {
    cost_mem_sizes z = {stash, w_stash < stash ? w_stash : stash, checkpoint < stash ? checkpoint : stash};
    return z;
}
static inline int64_t cost_mem_delta(const cost_mem_sizes *z, sched_kind kind, int at_end, int recompute_full) {
    if (!at_end) {
        if (kind == SCHED_F) return recompute_full ? z->checkpoint : z->stash;
        if ((kind == SCHED_B || kind == SCHED_I) && recompute_full) return z->stash - z->checkpoint;
        return 0;
    }
    if (kind == SCHED_B) return -z->stash;
    if (kind == SCHED_I) return -(z->stash - z->w_stash);
    if (kind == SCHED_W) return -z->w_stash;
    return 0;
}

/* Memory of one stage on one rank. */
typedef struct cost_memory {
    int64_t weights_bytes;     /* param_bytes x versions */
    int64_t grad_bytes;        /* one gradient buffer */
    int64_t optimizer_bytes;   /* optimizer state */
    int64_t activation_bytes;  /* stash x in-flight microbatches */
    int64_t total_bytes;
    int versions;              /* weight versions held */
} cost_memory;

/* Memory of a stage with `inflight` microbatches between forward and backward, in the steady
 * state of sched_versions' rule: versions = 1 (flush), inflight (stash), 2 (2bw; 1 when at most
 * one microbatch is in flight, as on a straight pipeline's last stage); activations = inflight x stash_bytes, or,
 * under full recomputation, (inflight - 1) x stash_recompute_bytes plus one full stash: the
 * microbatch whose backward runs holds its rebuilt activations instead of its checkpoint.
 * Returns PL_OK, or PL_EINPUT when a part does not count in 64 bits (*out then unset). */
int cost_stage_memory(const cost_stage *st, const cost_model *m, const cost_opts *o, sched_weights weights,
                      sched_recompute rc, int inflight, cost_memory *out, pl_err *e);

/* Memory per rank of a schedule: gradients and optimizer state summed over the stages the rank
 * holds, plus the peak over the rank's actions in order of its weight versions and activations
 * together. Versions follow sched_versions (a STEP writes a new one while a microbatch in flight
 * uses the newest; the end of the last backward using an older one frees it). Activations: F
 * adds the stage's stash (its checkpoint under full recomputation), B frees it (rebuilding the
 * full stash first under recomputation), I frees all but w_stash_bytes (rebuilding first under
 * recomputation) and W frees the rest. out[k].weights_bytes and activation_bytes are the parts at
 * the moment of the peak (their sum with the gradients and optimizer state is total_bytes), and
 * versions the most held at once (summed over the rank's stages), as the executor counts them.
 * stages[] indexed by schedule stage; out[ranks]. Returns PL_OK or the dry run's error. */
int cost_schedule_memory(const sched *s, const cost_stage *stages, const cost_model *m,
                         const cost_opts *o, cost_memory *out, pl_err *e);
/* cost_schedule_memory with stage q replicated replicas[q] ways (NULL: none; PipeDream's
 * 1F1B-RR): each replica of a rank is a device of its own holding the rank's stages' weights
 * (the versions of its own microbatches and STEPs), gradients
 * and optimizer state, and the stashes of its own microbatches only (k mod n, sched_replica_of);
 * out[k] is the replica of rank k with the largest total, as the simulator and the executor
 * report a replicated rank. */
int cost_schedule_memory_replicas(const sched *s, const cost_stage *stages, const int *replicas, const cost_model *m,
                                  const cost_opts *o, cost_memory *out, pl_err *e);

/* ================================================================ partitions
 *
 * THE partition type, used by the planner, the partition file, the simulator and the executor:
 * stage s holds layers [bound[s], bound[s + 1]), replicated replicas[s] ways on consecutive
 * workers. Provenance (method, model, hardware) says where it came from; pred, when not NULL, is
 * what the planner predicts for it (cost_plan_*; a partition file keeps the stage times only).
 * (Partitioners and the partition file format live in partition*.c; their declarations go in
 * the section below, owned by the partition code.) */

/* What the planner predicts for one stage, and where it placed it. */
typedef struct cost_stage_pred {
    int first_worker;     /* workers first_worker .. first_worker + replicas - 1 */
    int servers;          /* hierarchy pipedream on two levels: servers the server-level stage
                             holding this stage is replicated on (replicas / servers devices of
                             each); 0 for any other plan */
    int server_stage;     /* that server-level stage's index (when servers > 0) */
    double compute_s;     /* compute of one minibatch on one replica (sum of layer time_s) */
    double allreduce_s;   /* weight synchronization of one round, seconds (0 if replicas 1) */
    double time_s;        /* (compute_s + allreduce_s) / replicas: per-minibatch stage time */
    double transfer_in_s; /* boundary transfer time charged to the input side (0 for stage 0) */
    double param_bytes, stash_bytes;
    int inflight;         /* minibatches in flight on one replica (stashed versions) */
    double mem_bytes;     /* per-device memory: see cost_plan_pipedream / _balance */
} cost_stage_pred;

/* The planner's predictions for a whole partition; stage[] has one entry per stage. */
typedef struct cost_partition_pred {
    double bottleneck_s;    /* predicted time per minibatch: max over stage times and transfers */
    double one_worker_s;    /* whole model on one worker, no communication */
    double data_parallel_s; /* all workers replicate the whole model (same all-reduce model) */
    double speedup_vs_one;  /* one_worker_s / bottleneck_s */
    double speedup_vs_dp;   /* data_parallel_s / bottleneck_s */
    double peak_mem_bytes;  /* max over stages of mem_bytes */
    char hierarchy[16];     /* method pipedream: "exact" or "pipedream" (cost_hierarchy); else "" */
    double hier_time_s;     /* hierarchy pipedream: time per stage under PipeDream's level-by-level
                               rules (partition_hier.c); bottleneck_s rates the same stages with
                               the flat cost model */
    cost_stage_pred stage[]; /* [stages] */
} cost_partition_pred;

typedef struct cost_partition {
    int stages;
    int *bound;     /* [stages + 1]: bound[0] = 0, bound[stages] = n, strictly increasing */
    int *replicas;  /* [stages], each >= 1 */
    char method[32];    /* "pipedream", "balance", "manual", or what a file said; "" when none */
    char model[128];    /* provenance: model name (may be "") */
    char hardware[128]; /* provenance: hardware name (may be "") */
    cost_partition_pred *pred; /* NULL: no predictions attached */
} cost_partition;

/* Allocates a partition of `stages` stages (bounds 0, replicas 1, no predictions). NULL on ENOMEM. */
cost_partition *cost_partition_new(int stages);
/* Frees the partition and its predictions. */
void cost_partition_free(cost_partition *p);
/* Attaches a zeroed prediction block (replacing any); returns it, or NULL on ENOMEM. */
cost_partition_pred *cost_partition_attach_pred(cost_partition *p);
/* Layers covered (bound[stages]), workers used (sum of replicas), and PipeDream's NOAM
 * (ceil(workers / replicas of stage 0)). */
int cost_partition_layers(const cost_partition *p);
int cost_partition_workers(const cost_partition *p);
int cost_partition_noam(const cost_partition *p);
/* Even split of n layers into stages (the first n % stages stages get one more layer). */
cost_partition *cost_partition_even(int n, int stages, pl_err *e);
/* Parses "0,4,8,12" (bounds, n + 1 values ending in n) or "4,4,4" with a leading '=' for sizes
 * ("=4,4,4"); checks against n layers. NULL and e on error. */
cost_partition *cost_partition_parse(const char *text, int n, pl_err *e);
/* Checks bounds against a model of n layers. */
int cost_partition_check(const cost_partition *p, int n, pl_err *e);
/* Fills st[stages] for a partition. */
int cost_partition_eval(const cost_partition *p, const cost_model *m, const cost_hw *hw,
                        const cost_opts *o, cost_stage *st, pl_err *e);

/* ================================================================ GPU clusters (cost_gpu.c)
 *
 * GPT training laid out as Megatron-LM does it: tensor parallel T within a node, pipeline P
 * (v chunks per rank: interleaving), data parallel D; microbatch b, global batch B, so
 * m = B / (b D) microbatches per pipeline and iteration. cost_gpt_model describes ONE GPU: each
 * transformer layer is its operations, each costing max(FLOPs at the GEMM efficiency of its shape
 * (cost_gemm_efficiency), bytes at memory bandwidth) + launch; elementwise and normalization
 * work is memory-bound; the tensor-parallel collectives (2 per layer and pass, all-reduce or
 * all-gather + reduce-scatter with sequence parallelism) sit in the layer's time on the intra
 * link. Parameters and activations are the GPU's share (activations after Korthikanti et al.).
 * Layer 0 is the embedding, layer L + 1 the head with the loss (cost_gpt_partition puts them on
 * the first and the last stage). */
typedef enum cost_recompute { COST_RC_NONE = 0, COST_RC_SELECTIVE = 1, COST_RC_FULL = 2 } cost_recompute;
/* Returns "none", "selective", "full"; cost_recompute_parse returns the value of a name or -1. */
const char *cost_recompute_name(cost_recompute r);
int cost_recompute_parse(const char *s);

typedef struct cost_layout {
    int layers, hidden, heads, seq, vocab; /* l, h, a, s, V */
    int tp, pp, dp, chunks;                /* T, P, D, v */
    int microbatch, global_batch;          /* b, B (0: b D, one microbatch) */
    int sequence_parallel;                 /* activations outside the GEMMs split over T */
    int distributed_optimizer;             /* optimizer state sharded over D (ZeRO-1) */
    cost_recompute recompute;              /* selective: attention's core is recomputed */
    int no_scatter_gather;                 /* 1: each tensor rank sends the whole b s h boundary
                                            * (Megatron's scatter/gather off) */
    int flash_attention;                   /* attention as one fused kernel (FlashAttention):
                                            * no s^2 tensors in memory, scores recomputed in
                                            * the backward, at gemm.attention_efficiency */
    cost_precision precision;              /* fp16 or bf16 */
} cost_layout;
void cost_layout_init(cost_layout *l);
/* Returns PL_OK or PL_EINPUT naming what does not divide: heads by T, layers by P v, the global
 * batch by b D, the sequence by T under sequence parallelism, T larger than a node (hw may be
 * NULL). */
int cost_layout_check(const cost_layout *l, const cost_hw *hw, pl_err *e);
int cost_layout_microbatches(const cost_layout *l);      /* B / (b D) */
double cost_layout_gpus(const cost_layout *l);            /* T P D */
double cost_gpt_params(const cost_layout *l);             /* Narayanan et al. SC21 eq. 2 */
double cost_gpt_model_flops(const cost_layout *l);        /* eq. 3 (counts full recomputation) */
double cost_gpt_mfu_flops(const cost_layout *l);          /* 72 B s l h^2 (1 + s/6h + V/12lh) */
double cost_gpt_hardware_flops(const cost_layout *l);     /* plus what the recomputation reruns */
/* GEMM efficiency of an m x n output (batch of them) and the time of a batched m x n x k GEMM. */
double cost_gemm_efficiency(const cost_hw *hw, double m, double n, double batch);
double cost_gemm_s(const cost_hw *hw, cost_precision p, double m, double n, double k, double batch);
/* A batched GEMM of the attention core (scores against a head's d): cost_gemm_s with its bytes
 * at gemm.attention_bandwidth of the memory bandwidth when that is set. */
double cost_attention_gemm_s(const cost_hw *hw, cost_precision p, double m, double n, double k, double batch);
/* Seconds to stream bytes through device memory at the achievable bandwidth,
 * memory_bandwidth x memory_efficiency (0 when the bandwidth is unknown); no launch. */
double cost_stream_s(const cost_hw *hw, double bytes);
/* Seconds of 2021 Megatron-LM's attention core on one GPU (score and context batched GEMMs,
 * fused scale-mask-softmax, dropout with its one-byte mask, the context's permute copy, or one
 * fused kernel with flash attention): its forward, and its backward (without recomputation). */
double cost_gpt_attention_fwd_s(const cost_layout *l, const cost_hw *hw);
double cost_gpt_attention_bwd_s(const cost_layout *l, const cost_hw *hw);
/* Seconds one GPU spends adding a microbatch's weight gradients of `params` parameters in
 * `tensors` tensors into the data-parallel gradient buffer (Megatron's main_grad): read both,
 * write the sum, in the 2-byte gradient type, one launch per tensor. */
double cost_gpt_grad_accum_s(const cost_hw *hw, double params, int tensors);
/* Seconds one pipeline exchange (the stage boundary's transfer and, with scatter/gather, its
 * all-gather over T) holds the compute stream: Megatron-LM synchronizes the device after its
 * point-to-point calls. Charged to each stage's first layer, forward and backward; 0 for P = 1. */
double cost_gpt_exchange_s(const cost_layout *l, const cost_hw *hw);
/* Seconds of Megatron-LM's mixed-precision Adam step on one GPU holding param_bytes of fp16
 * weights (58 bytes a parameter, 52 of them on the distributed optimizer's 1 / D share). */
double cost_gpt_step_s(const cost_layout *l, const cost_hw *hw, int64_t param_bytes);
/* One transformer layer's seconds on one GPU by part, for its F, I and W. */
enum { COST_PART_GEMM, COST_PART_ATTENTION, COST_PART_ELEMENTWISE, COST_PART_TP_COMM, COST_NPARTS };
typedef struct cost_gpt_parts {
    double f[COST_NPARTS], i[COST_NPARTS], w[COST_NPARTS];
} cost_gpt_parts;
void cost_gpt_layer_parts(const cost_layout *l, const cost_hw *hw, cost_gpt_parts *out);
/* One GPU's layer table (seconds, bytes) and Megatron's stage split; NULL and e on error. */
cost_model *cost_gpt_model(const cost_layout *l, const cost_hw *hw, pl_err *e);
cost_partition *cost_gpt_partition(const cost_layout *l, pl_err *e);
/* The hardware the pipeline of a layout sees: a rank per tensor group, devices_per_node / (T D)
 * of them per node (at least 1), nodes enough for P. */
cost_hw cost_layout_pipeline_hw(const cost_hw *hw, const cost_layout *l);
/* Data-parallel gradient synchronization of one GPU's param_bytes over D replicas
 * (hierarchical; not overlapped with the backward, as in the Megatron-LM of SC21). */
double cost_gpt_sync_s(const cost_layout *l, const cost_hw *hw, int64_t param_bytes);
/* Optimizer state per parameter: 12 bytes (fp32 master, m, v), / D when distributed. */
double cost_gpt_optimizer_bytes(const cost_layout *l);
/* Memory of one GPU by part, bytes. */
typedef struct cost_gpt_memory {
    double weights_bytes, grad_bytes, optimizer_bytes, activation_bytes, total_bytes;
} cost_gpt_memory;
/* Weights, gradients (fp16) and optimizer state of a GPU holding param_bytes of weights. */
cost_gpt_memory cost_gpt_static_memory(const cost_layout *l, int64_t param_bytes);

/* ================================================================ partitioners, calibration
 * (declarations owned by partition*.c / calibrate*.c) */

/* ---- partitioners and calibration ---- */
/* (cost_models/partition.c, cost_models/calibrate.c; README: `pipelab partition`, `calibrate`.) */

/* One layer as the partitioners see it (plain numbers; cost_part_layers_from_model fills them). */
typedef struct cost_part_layer {
    double time_s;       /* forward + backward compute of one minibatch on one device, seconds */
    double param_bytes;  /* parameter bytes */
    double out_bytes;    /* activation bytes crossing a cut placed right after this layer */
    double stash_bytes;  /* activation bytes a minibatch keeps on the device until its backward */
} cost_part_layer;

/* The machine as the partitioners see it: a two-level topology and its links. */
typedef struct cost_part_topo {
    int devices_per_server;   /* devices in one server (>= 1) */
    int servers;              /* servers (>= 1); workers beyond servers x devices are refused */
    double intra_bw_Bps;      /* bandwidth between devices of one server, bytes/s (> 0) */
    double intra_latency_s;   /* latency of one intra-server message, seconds (>= 0) */
    double inter_bw_Bps;      /* bandwidth between servers, bytes/s (> 0) */
    double inter_latency_s;   /* latency of one inter-server message, seconds (>= 0) */
} cost_part_topo;

/* How a replicated stage synchronizes its weights once per minibatch round. */
typedef enum cost_allreduce_model {
    COST_ALLREDUCE_RING = 0,      /* ring: 2(m-1)/m x |w|/B + 2(m-1) x latency (DESIGN.md §4) */
    COST_ALLREDUCE_PIPEDREAM = 1  /* PipeDream's optimizer code: 4(m-1)|w| / (m B) */
} cost_allreduce_model;

/* How PipeDream's planner searches a two-level topology. */
typedef enum cost_hierarchy {
    COST_HIERARCHY_EXACT = 0,    /* one exact program over all workers (stages on consecutive workers) */
    COST_HIERARCHY_PIPEDREAM = 1 /* PipeDream's optimizer_graph_hierarchical.py: the devices of a
                                    server first, then the servers, each server-level stage running
                                    one server's pipeline on each of its servers */
} cost_hierarchy;

/* Options of PipeDream's planner. */
typedef struct cost_pipedream_opts {
    int workers;                   /* workers to use, all of them (1 .. servers x devices) */
    cost_allreduce_model allreduce;
    double capacity_bytes;         /* per-device memory limit; 0 = unlimited */
    int straight;                  /* 1: no replication (every stage 1 replica) */
    cost_hierarchy hierarchy;      /* COST_HIERARCHY_PIPEDREAM: no capacity; workers a multiple of a
                                      server's devices, or at most one server */
    cost_ar_link ar_link;          /* Bps > 0: every replicated stage's all-reduce is a ring of its
                                      replicas on this measured link (cost_model_allreduce_link),
                                      whatever servers they span; else on topo's links. The exact
                                      hierarchy only (PipeDream's levels keep their links) */
} cost_pipedream_opts;

/* Options of the GPipe/torchgpipe-style balancer. */
typedef struct cost_balance_opts {
    int stages;             /* p: stages (= workers), 1 .. layers */
    int by_memory;          /* 1: minimize the largest stage memory instead of the largest time */
    double capacity_bytes;  /* per-device memory limit; 0 = unlimited */
    int inflight;           /* stashed microbatches per stage; 0 = 1F1B: p - s on stage s */
    int weight_versions;    /* copies of the parameters held; 0 = 1 */
} cost_balance_opts;

/* Limits: larger inputs are refused with a clear error. */
#define COST_PART_MAX_LAYERS 100000
#define COST_PART_MAX_WORKERS 4096

/* PipeDream's planner (Narayanan et al., SOSP'19 §3.1), generalized to a flat placement on a
 * two-level topology: stages take consecutive workers in order. Costs of stage s on workers
 * [a, a + r): compute C = sum of time_s; all-reduce S over the stage's parameters on the intra link
 * when its workers share a server, else the inter link; stage time (C + S) / r (synchronization
 * not overlapped, as in PipeDream's code). Boundary after stage s: 2 x (latency + out_bytes / B) /
 * min(r_s, r_s+1), intra only when both stages lie in one server. Memory per device of stage s:
 * inflight x (params + stash) with inflight = ceil(workers from s to the end / r_s) (weight
 * stashing keeps one version per in-flight minibatch). Minimizes the largest stage or transfer
 * time, exactly (DP over layer prefix, workers used, replicas of the last stage). Ties: first
 * found with stage starts and replica counts tried in ascending order. With o->hierarchy
 * COST_HIERARCHY_PIPEDREAM it plans level by level instead (partition_hier.c): the stages come in
 * flat form with servers / server_stage set, hier_time_s is PipeDream's time per stage, and the
 * predictions above rate the same stages.
 * Returns PL_OK and *out (its predictions attached; free with cost_partition_free), or PL_EINPUT
 * saying why nothing fits. */
int cost_plan_pipedream(const cost_part_layer *layers, int nlayers, const cost_part_topo *topo,
                        const cost_pipedream_opts *o, cost_partition **out, pl_err *e);

/* Exact contiguous split of the layers into o->stages stages (one worker each) minimizing the
 * largest stage compute time (or, with by_memory, the largest stage memory), under the capacity.
 * Stage memory: params x weight_versions + stash x inflight. Ties: the lexicographically smallest
 * list of stage boundaries. O(L^2 p). Returns PL_OK and *out, or PL_EINPUT when nothing fits. */
int cost_plan_balance(const cost_part_layer *layers, int nlayers, const cost_balance_opts *o,
                      cost_partition **out, pl_err *e);

/* Attaches (or refills) the predictions of a partition (workers assigned in order) with the
 * planner's cost model; topo NULL = one server, infinite links. For method "balance" the memory
 * uses the balance formula with o_balance (may be NULL); placement the planner chose (servers,
 * server_stage) is kept. Returns PL_OK or PL_EINPUT when the stages do not cover the layers. */
int cost_plan_evaluate(cost_partition *p, const cost_part_layer *layers, int nlayers,
                       const cost_part_topo *topo, cost_allreduce_model ar,
                       const cost_balance_opts *o_balance, pl_err *e);

/* All-reduce time of bytes over r replicas on a link (bandwidth bw_Bps, latency lat_s) under the
 * planner's model m: cost_ring_allreduce_s or cost_pipedream_allreduce_s (cost_comm.c). */
double cost_part_allreduce_s(cost_allreduce_model m, double bytes, int r, double bw_Bps, double lat_s);

/* Builds the partitioners' layer table from a model on hardware: time_s = F + I + W of one
 * microbatch (cost_layer_times), param_bytes, out_bytes = cut_bytes[l + 1] (branches counted),
 * stash_bytes. Returns PL_OK and a malloc'd array of m->n layers, or the error of a time that
 * cannot be derived. */
int cost_part_layers_from_model(const cost_model *m, const cost_hw *hw, const cost_opts *o,
                                cost_part_layer **out, pl_err *e);
/* Fills t with the topology and links of hw. */
void cost_part_topo_from_hw(const cost_hw *hw, cost_part_topo *t);

/* "15-1": replicas per stage joined by '-', appended to b. */
void cost_plan_config(const cost_partition *p, pl_buf *b);
/* PipeDream's notation of a two-level plan, "3x(4) ; 1x(2-1-1)" (servers x (the pipeline on each
 * server's devices), per server-level stage), appended to b; cost_plan_config's for other plans. */
void cost_plan_hier_config(const cost_partition *p, pl_buf *b);
/* Returns 1 when giving each stage consecutive workers (the flat form: partition files, the
 * simulator) places a plan as PipeDream does, 0 when a server-level stage on several servers runs
 * a pipeline of several stages on each (4x(3-1): stage 0 on devices 0-2 of every server). */
int cost_plan_hier_consecutive(const cost_partition *p);

/* Partition file ("pipelab-partition 1"; README). The writer appends text to b; the reader
 * returns PL_OK and *out (predictions attached: the stage times the file gives, 0 where it gives
 * none, and their maximum as bottleneck_s), or PL_EINPUT with "path:line: what". */
void cost_partition_write(const cost_partition *p, pl_buf *b);
int cost_partition_parse_text(const char *text, const char *path, cost_partition **out, pl_err *e);
int cost_partition_read(const char *path, cost_partition **out, pl_err *e);

/* ---- calibration */

/* One measured action: what it did and how long it took. */
typedef enum cost_obs_kind {
    COST_OBS_COMPUTE = 0, /* a compute action of `flops` floating-point operations */
    COST_OBS_INTRA = 1,   /* a transfer of `bytes` between devices of one server */
    COST_OBS_INTER = 2    /* a transfer of `bytes` between servers */
} cost_obs_kind;

typedef struct cost_observation {
    cost_obs_kind kind;
    double flops, bytes, seconds;
} cost_observation;

/* Reads a CSV of observations with header `kind,flops,bytes,seconds` (kind: compute, intra,
 * inter); a value above 1e150 is refused (the fit's sums of squares would overflow). Returns
 * PL_OK and a malloc'd array, or PL_EINPUT with "path:line: what". */
int cost_observations_parse(const char *text, const char *path, cost_observation **out, size_t *n,
                            pl_err *e);
int cost_observations_read(const char *path, cost_observation **out, size_t *n, pl_err *e);

/* The fitted parameters; have_* says which groups had enough observations (>= 3). */
typedef struct cost_fit {
    int have_compute, have_intra, have_inter;
    size_t n_compute, n_intra, n_inter;
    double peak_flops;          /* the peak used to turn seconds per flop into efficiency */
    double efficiency;          /* achieved / peak: 1 / (peak x slope) */
    double launch_s;            /* intercept of the compute fit (kernel launch overhead) */
    double compute_r2;
    double intra_latency_s, intra_bw_Bps, intra_r2; /* alpha, 1/beta */
    double inter_latency_s, inter_bw_Bps, inter_r2;
    char skipped[512];          /* lenient mode: why groups were left out ("" when none) */
} cost_fit;

/* Least-squares fits (GSL): compute seconds = launch + flops / (peak x efficiency); transfer
 * seconds = alpha + bytes x beta per link level. Negative intercepts are clamped to 0 (refit
 * through the origin). A group with observations but fewer than 3, one size only, a fit that
 * overflows (values too large or too small for a double), or a slope that is not positive is an
 * error (PL_EINPUT saying which group), or with lenient = 1 is
 * skipped (have_* = 0, the reason in fit->skipped); no group fitted is always an error. */
int cost_calibrate(const cost_observation *obs, size_t n, double peak_flops, int lenient, cost_fit *fit,
                   pl_err *e);

#endif
