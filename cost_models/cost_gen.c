/* cost_gen.c: analytic model generators: uniform layers, the executor's MLP, a GPT transformer. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost_int.h"

/* Names layers [first, end) of m "what i" (i: the layer's index); returns PL_OK or PL_ENOMEM. */
static int name_layers(cost_model *m, int first, int end, const char *what, pl_err *e) {
    for (int i = first; i < end; i++) {
        char name[32];
        int nl = snprintf(name, sizeof name, "%s %d", what, i);
        if (cost_layer_set_name(m, i, name, (size_t)nl, e) != PL_OK) return PL_ENOMEM;
    }
    return PL_OK;
}

/* Returns a model of n layers named "what i", or NULL with e. */
static cost_model *named_model(int n, const char *what, pl_err *e) {
    cost_model *m = cost_model_alloc(n, e);
    if (m && name_layers(m, 0, n, what, e) != PL_OK) {
        cost_model_free(m);
        return NULL;
    }
    return m;
}

/* Fills the uniform options with defaults: 1 layer, microbatch 1, 1 s forward, backward derived. */
void cost_uniform_defaults(cost_uniform_opts *o) {
    memset(o, 0, sizeof *o);
    o->layers = 1;
    o->microbatch = 1;
    o->fwd_s = 1.0;
    o->bwd_s = -1;
    o->bwd_in_s = -1;
    o->bwd_w_s = -1;
    o->fwd_flops = -1;
    o->stash_recompute_bytes = -1;
    o->w_stash_bytes = -1;
}

/* Returns L identical layers; backward: given I and W, else bwd_s split in halves, else 2 fwd
 * (bwd_s together with I and W is refused). */
cost_model *cost_model_uniform(const cost_uniform_opts *o, pl_err *e) {
    if (o->microbatch < 1) {
        pl_errf(e, PL_EINPUT, "model uniform: microbatch must be >= 1");
        return NULL;
    }
    if (o->fwd_s < 0 && o->fwd_flops <= 0) {
        pl_errf(e, PL_EINPUT, "model uniform: give fwd_s >= 0 or fwd_flops > 0");
        return NULL;
    }
    if ((o->bwd_in_s >= 0) != (o->bwd_w_s >= 0)) {
        pl_errf(e, PL_EINPUT, "model uniform: give both bwd_in_s and bwd_w_s, or neither");
        return NULL;
    }
    if (o->bwd_s >= 0 && o->bwd_in_s >= 0) {
        pl_errf(e, PL_EINPUT, "model uniform: give bwd_s, or bwd_in_s and bwd_w_s, not both (bwd_s is their sum)");
        return NULL;
    }
    if (o->param_bytes < 0 || o->out_bytes < 0 || o->stash_bytes < 0) {
        pl_errf(e, PL_EINPUT, "model uniform: byte sizes must be >= 0");
        return NULL;
    }
    cost_model *m = named_model(o->layers, "layer", e);
    if (!m) return NULL;
    double bi = o->bwd_in_s, bw = o->bwd_w_s;
    if (bi < 0) {
        double b = o->bwd_s >= 0 ? o->bwd_s : 2 * o->fwd_s;
        bi = bw = b / 2;
    }
    for (int i = 0; i < m->n; i++) {
        cost_layer *l = &m->layer[i];
        if (o->fwd_flops > 0) {
            l->fwd_flops = l->bwd_in_flops = l->bwd_w_flops = o->fwd_flops;
        } else {
            l->fwd_s = o->fwd_s;
            l->bwd_in_s = bi;
            l->bwd_w_s = bw;
        }
        l->param_bytes = o->param_bytes;
        l->out_bytes = o->out_bytes;
        l->stash_bytes = o->stash_bytes;
        l->stash_recompute_bytes = o->stash_recompute_bytes;
        l->w_stash_bytes = o->w_stash_bytes;
    }
    m->microbatch_size = o->microbatch;
    m->cut_bytes[0] = o->out_bytes; /* the input is taken to be the size of a layer's output */
    cost_model_chain_cuts(m);
    snprintf(m->name, sizeof m->name, "uniform");
    snprintf(m->source, sizeof m->source, "uniform");
    return m;
}

/* Returns the executor's dense-block MLP in fp32 (see cost.h for the per-block formulas). */
cost_model *cost_model_mlp(const cost_mlp_opts *o, pl_err *e) {
    int mult = o->ffn_mult > 0 ? o->ffn_mult : 4;
    if (o->width < 1 || o->depth < 1 || o->microbatch < 1) {
        pl_errf(e, PL_EINPUT, "model mlp: width, depth and microbatch must be >= 1 (got %d, %d, %d)",
                o->width, o->depth, o->microbatch);
        return NULL;
    }
    double h = o->width, f = (double)mult * o->width, b = o->microbatch;
    int64_t param, out, stash, rc, wst;
    if (cost_bytes_from_double((2 * h * f + f + h) * 4, &param) || cost_bytes_from_double(b * h * 4, &out) ||
        cost_bytes_from_double((b * h + 2 * b * f) * 4, &stash) || cost_bytes_from_double(b * h * 4, &rc) ||
        cost_bytes_from_double((b * h + b * f) * 4, &wst)) {
        pl_errf(e, PL_EINPUT, "model mlp: sizes overflow");
        return NULL;
    }
    cost_model *m = named_model(o->depth, "block", e);
    if (!m) return NULL;
    for (int i = 0; i < m->n; i++) {
        cost_layer *l = &m->layer[i];
        l->fwd_flops = l->bwd_in_flops = l->bwd_w_flops = 4 * b * h * f; /* two GEMMs of 2bhf */
        l->param_bytes = param;
        l->out_bytes = out;
        l->stash_bytes = stash;          /* block input, pre-GELU, post-GELU */
        l->stash_recompute_bytes = rc;   /* block input */
        l->w_stash_bytes = wst;          /* the two GEMM inputs W needs: x and GELU output */
    }
    m->microbatch_size = o->microbatch;
    m->dtype_bytes = COST_FP32_BYTES;
    m->cut_bytes[0] = out;
    cost_model_chain_cuts(m);
    snprintf(m->name, sizeof m->name, "mlp");
    snprintf(m->source, sizeof m->source, "mlp");
    return m;
}

/* Sets the byte fields of a layer from doubles; returns 0, or -1 when one is too large. */
static int set_bytes(cost_layer *l, double param, double out, double stash, double rc, double wst) {
    if (cost_bytes_from_double(param, &l->param_bytes) || cost_bytes_from_double(out, &l->out_bytes) ||
        cost_bytes_from_double(stash, &l->stash_bytes) ||
        cost_bytes_from_double(rc, &l->stash_recompute_bytes) ||
        cost_bytes_from_double(wst, &l->w_stash_bytes))
        return -1;
    return 0;
}

/* Returns the GPT-style transformer: embedding, L Megatron layers, tied LM head (see cost.h). */
cost_model *cost_model_transformer(const cost_transformer_opts *o, pl_err *e) {
    const struct { const char *name; int v; } need[] = {{"layers", o->layers}, {"hidden", o->hidden},
                                                        {"heads", o->heads},   {"seq", o->seq},
                                                        {"vocab", o->vocab},   {"microbatch", o->microbatch}};
    for (size_t k = 0; k < sizeof need / sizeof *need; k++)
        if (need[k].v < 1) {
            if (need[k].v == 0)
                pl_errf(e, PL_EINPUT, "model transformer: '%s' is missing (layers, hidden, heads, seq and vocab "
                        "are required, microbatch defaults to 1)", need[k].name);
            else
                pl_errf(e, PL_EINPUT, "model transformer: %s must be >= 1 (got %d)", need[k].name, need[k].v);
            return NULL;
        }
    if (o->hidden % o->heads != 0) {
        pl_errf(e, PL_EINPUT, "model transformer: heads (%d) must divide hidden (%d)", o->heads, o->hidden);
        return NULL;
    }
    if (o->layers > COST_MAX_LAYERS - 2) {
        pl_errf(e, PL_EINPUT, "model transformer: too many layers");
        return NULL;
    }
    double L = o->layers, h = o->hidden, a = o->heads, s = o->seq, V = o->vocab, b = o->microbatch;
    (void)L;
    cost_model *m = cost_model_alloc(o->layers + 2, e);
    if (!m) return NULL;
    const double sbh = s * b * h;
    int bad = 0, bad_name = 0;
    /* embedding: word (V h) and position (s h) tables, fp16; keeps the token ids for backward */
    cost_layer *l = &m->layer[0];
    bad_name |= cost_layer_set_name(m, 0, "embedding", 9, e) != PL_OK;
    l->fwd_flops = l->bwd_in_flops = l->bwd_w_flops = 0;
    bad |= set_bytes(l, (V * h + s * h) * 2, 2 * sbh, 4 * s * b, 4 * s * b, 4 * s * b);
    bad_name |= name_layers(m, 1, o->layers + 1, "layer", e) != PL_OK;
    for (int i = 1; i <= o->layers; i++) {
        l = &m->layer[i];
        l->fwd_flops = 24 * b * s * h * h + 4 * b * s * s * h;    /* Megatron */
        l->bwd_in_flops = 24 * b * s * h * h + 8 * b * s * s * h; /* Zero Bubble Table 1: B */
        l->bwd_w_flops = 24 * b * s * h * h;                      /* Zero Bubble Table 1: W */
        bad |= set_bytes(l, (12 * h * h + 13 * h) * 2, 2 * sbh,
                         sbh * (34 + 5 * a * s / h), /* Korthikanti et al., no recomputation */
                         2 * sbh,                    /* full recomputation: the layer input */
                         32 * sbh);                  /* Zero Bubble Table 1: memory W needs */
    }
    l = &m->layer[o->layers + 1];
    bad_name |= cost_layer_set_name(m, o->layers + 1, "head", 4, e) != PL_OK;
    l->fwd_flops = l->bwd_in_flops = l->bwd_w_flops = 2 * b * s * h * V;
    /* tied to the word embedding: no parameters of its own; keeps its input and fp32 logits,
     * W keeps the input and the fp16 logits gradient */
    bad |= set_bytes(l, 0, 0, 2 * sbh + 4 * s * b * V, 2 * sbh, 2 * sbh + 2 * s * b * V);
    if (bad || bad_name) {
        cost_model_free(m);
        if (!bad_name) pl_errf(e, PL_EINPUT, "model transformer: sizes overflow");
        return NULL;
    }
    m->microbatch_size = o->microbatch;
    m->dtype_bytes = COST_FP16_BYTES;
    m->cut_bytes[0] = (int64_t)(4 * s * b); /* int32 token ids */
    cost_model_chain_cuts(m);
    snprintf(m->name, sizeof m->name, "transformer");
    snprintf(m->source, sizeof m->source, "transformer");
    return m;
}
