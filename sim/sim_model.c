/* sim_model.c: the cost-model module behind the sim_costs interface: per-stage costs of a
 * partitioned layer table on a hardware description, placed on devices by schedule rank. */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frees what sim_model_init allocated and zeroes sm; returns nothing (safe after errors). */
void sim_model_free(sim_model *sm) {
    if (!sm) return;
    free(sm->stage);
    free(sm->bound);
    free(sm->replicas);
    free(sm->device);
    free(sm->stage_device);
    free(sm->step_s);
    memset(sm, 0, sizeof *sm);
}

/* Returns PL_OK after placing ranks on devices in order, each taking as many devices as the
 * largest replica count among its stages; PL_EINPUT when the hardware has too few devices. */
static int place(sim_model *sm, const sched *s, pl_err *e) {
    int *width = pl_calloc((size_t)s->ranks, sizeof *width);
    if (!width) return pl_errf(e, PL_ENOMEM, "out of memory");
    for (int r = 0; r < s->ranks; r++) width[r] = 1;
    for (int q = 0; q < s->stages; q++) {
        int r = s->stage_rank[q];
        if (r >= 0 && r < s->ranks && sm->replicas[q] > width[r]) width[r] = sm->replicas[q];
    }
    int64_t next = 0;
    for (int r = 0; r < s->ranks; r++) {
        sm->device[r] = (int)next;
        next += width[r];
        if (next > COST_PART_MAX_WORKERS * 16) {
            free(width);
            return pl_errf(e, PL_EINPUT, "the placement needs more than %d devices", COST_PART_MAX_WORKERS * 16);
        }
    }
    free(width);
    sm->devices = (int)next;
    for (int q = 0; q < s->stages; q++) {
        int r = s->stage_rank[q];
        sm->stage_device[q] = r >= 0 && r < s->ranks ? sm->device[r] : 0;
    }
    int64_t have = (int64_t)sm->hw.nodes * sm->hw.devices_per_node;
    if (sm->devices > have) {
        int dpn = sm->hw.devices_per_node > 0 ? sm->hw.devices_per_node : 1;
        return pl_errf(e, PL_EINPUT,
                       "the schedule needs %d devices (%d ranks%s) but hardware %s has %d node%s x %d devices; "
                       "raise topology.nodes to %d",
                       sm->devices, s->ranks, sm->devices > s->ranks ? ", replicas included" : "",
                       sm->hw.name[0] ? sm->hw.name : "-", sm->hw.nodes, sm->hw.nodes == 1 ? "" : "s",
                       sm->hw.devices_per_node, (sm->devices + dpn - 1) / dpn);
    }
    return PL_OK;
}

/* Returns PL_OK and fills sm (see sim.h); on error sm holds what was allocated (free it). */
int sim_model_init(sim_model *sm, const sched *s, const cost_model *m, const cost_partition *p, const cost_hw *hw,
                   const cost_opts *o, pl_err *e) {
    memset(sm, 0, sizeof *sm);
    if (!s || !m || m->n < 1) return pl_errf(e, PL_EINPUT, "sim_model: a schedule and a model with layers are needed");
    if (s->stages < 1 || s->ranks < 1) return pl_errf(e, PL_EINPUT, "sim_model: the schedule has no stages");
    sm->m = m;
    sm->stages = s->stages;
    sm->ranks = s->ranks;
    if (o) sm->o = *o;
    else cost_opts_init(&sm->o, m);
    if (hw) {
        sm->hw = *hw;
    } else {
        cost_hw_init(&sm->hw);
        snprintf(sm->hw.name, sizeof sm->hw.name, "free-links");
    }
    cost_partition *even = NULL;
    if (!p) {
        even = cost_partition_even(m->n, s->stages, e);
        if (!even) {
            pl_err_prefix(e, "model %s: ", m->name);
            return e->code ? e->code : PL_EINPUT;
        }
        p = even;
    }
    int rc = PL_OK;
    if (p->stages != s->stages) {
        rc = pl_errf(e, PL_EINPUT, "the partition has %d stage%s but the schedule (%s, %d ranks) has %d stages",
                     p->stages, p->stages == 1 ? "" : "s", s->kind, s->ranks, s->stages);
        goto out;
    }
    if (cost_partition_check(p, m->n, e) != PL_OK) {
        pl_err_prefix(e, "model %s: ", m->name);
        rc = PL_EINPUT;
        goto out;
    }
    size_t S = (size_t)s->stages;
    sm->stage = pl_calloc(S, sizeof *sm->stage);
    sm->bound = pl_calloc(S + 1, sizeof *sm->bound);
    sm->replicas = pl_calloc(S, sizeof *sm->replicas);
    sm->device = pl_calloc((size_t)s->ranks, sizeof *sm->device);
    sm->stage_device = pl_calloc(S, sizeof *sm->stage_device);
    sm->step_s = pl_calloc(S, sizeof *sm->step_s);
    if (!sm->stage || !sm->bound || !sm->replicas || !sm->device || !sm->stage_device || !sm->step_s) {
        rc = pl_errf(e, PL_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(sm->bound, p->bound, (S + 1) * sizeof *sm->bound);
    for (size_t q = 0; q < S; q++) sm->replicas[q] = p->replicas ? p->replicas[q] : 1;
    if (!hw) {
        /* No hardware: one node with every device the placement needs. */
        sm->hw.nodes = 1;
        sm->hw.devices_per_node = COST_PART_MAX_WORKERS * 16;
    }
    if ((rc = cost_hw_check(&sm->hw, e)) != PL_OK) goto out;
    if ((rc = place(sm, s, e)) != PL_OK) goto out;
    if (!hw) sm->hw.devices_per_node = sm->devices;
    if (cost_partition_eval(p, m, &sm->hw, &sm->o, sm->stage, e) != PL_OK) {
        rc = PL_EINPUT;
        goto out;
    }
    for (size_t q = 0; q < S; q++) sm->step_s[q] = cost_step_s(&sm->hw, &sm->o, m, sm->stage[q].param_bytes);
out:
    cost_partition_free(even);
    return rc;
}

void sim_model_scale_stage(sim_model *sm, int q, double f) {
    cost_stage *st = &sm->stage[q];
    double *t[] = {&st->f_s,         &st->i_s,           &st->w_s,          &st->b_s,        &st->rerun_s,
                   &st->b_recompute_s, &st->i_recompute_s, &st->i_last_s, &sm->step_s[q]};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) *t[i] *= f;
}

void sim_model_scale_fiw(sim_model *sm, int q, const double r[3]) {
    cost_stage *st = &sm->stage[q];
    double di = (r[1] - 1) * st->i_s, dw = (r[2] - 1) * st->w_s, dr = (r[0] - 1) * st->rerun_s;
    st->f_s *= r[0];
    st->rerun_s += dr;
    st->i_s += di;
    st->i_last_s *= r[1];
    st->w_s += dw;
    st->b_s += di + dw;
    st->b_recompute_s += di + dw + dr;
    st->i_recompute_s += di + dr;
}

/* Returns the compute time of kind on stage q for one microbatch (the same for every mb unless
 * the reuse-distance term is set). */
static double model_compute(void *ctx, int q, sched_kind k, int mb) {
    const sim_model *sm = ctx;
    const cost_stage *st = &sm->stage[q];
    if (sm->reuse) return sim_reuse_time(sm->reuse, st, q, k, mb); /* by reuse distance */
    switch (k) {
    case SCHED_F: return st->f_s;
    case SCHED_B: return st->b_s;
    case SCHED_I: return st->i_s;
    case SCHED_W: return st->w_s;
    default: return 0;
    }
}

/* Returns the time full recomputation adds to a backward of stage q: the forward it runs
 * again (cost_stage.rerun_s), less what that saves the I of the stage's last layer right after
 * it (sim_model.rerun_next). That I takes its own measured ratio in place of the factor the
 * reuse-distance terms give the backward's other I (model_compute), so the backward's sum stays
 * positive whatever the ratios: the rerun alone may not be. */
static double model_rerun(void *ctx, int q, int mb) {
    const sim_model *sm = ctx;
    const cost_stage *st = &sm->stage[q];
    if (!sm->rerun_next) return st->rerun_s;
    double fi = sm->reuse && st->i_s > 0 ? sim_reuse_time(sm->reuse, st, q, SCHED_I, mb) / st->i_s : 1;
    return st->rerun_s - (fi - sm->rerun_next[q]) * st->i_last_s;
}

/* Returns the bytes crossing the cut after stage q (its output; the gradient back is as big). */
static int64_t model_boundary(void *ctx, int q) {
    return ((const sim_model *)ctx)->stage[q].out_bytes;
}

/* Returns the activation bytes a microbatch keeps on stage q from F until its backward. */
static int64_t model_stash(void *ctx, int q) {
    return ((const sim_model *)ctx)->stage[q].stash_bytes;
}

/* Returns the part of stage q's stash held from I until W. */
static int64_t model_wstash(void *ctx, int q) {
    return ((const sim_model *)ctx)->stage[q].w_stash_bytes;
}

/* Returns the bytes a microbatch keeps on stage q under full recomputation (its checkpoint). */
static int64_t model_input(void *ctx, int q) {
    return ((const sim_model *)ctx)->stage[q].stash_recompute_bytes;
}

/* Returns one weight version's bytes on stage q. */
static int64_t model_params(void *ctx, int q) {
    return ((const sim_model *)ctx)->stage[q].param_bytes;
}

/* Returns the point-to-point time between two schedule ranks, on the link their devices'
 * nodes imply (cost_transfer_s: latency + bytes / bandwidth). */
static double model_transfer(void *ctx, int src, int dst, int64_t bytes) {
    const sim_model *sm = ctx;
    if (src < 0 || dst < 0 || src >= sm->ranks || dst >= sm->ranks) return -1;
    return cost_transfer_s(&sm->hw, sm->device[src], sm->device[dst], bytes);
}

/* Returns the point-to-point time between replica i of schedule rank src and replica j of
 * rank dst: replica i of a rank sits on its device device[rank] + i (see place). */
static double model_replica_transfer(void *ctx, int src, int i, int dst, int j, int64_t bytes) {
    const sim_model *sm = ctx;
    if (src < 0 || dst < 0 || src >= sm->ranks || dst >= sm->ranks || i < 0 || j < 0) return -1;
    return cost_transfer_s(&sm->hw, sm->device[src] + i, sm->device[dst] + j, bytes);
}

/* Returns the ring all-reduce time of stage q over its replica group; the inter link when the
 * group [first device, first device + replicas) spans two nodes; allreduce_link's intra link
 * when set. */
static double model_allreduce(void *ctx, int q, int replicas, int64_t bytes) {
    const sim_model *sm = ctx;
    if (replicas <= 1) return 0;
    if (q < 0 || q >= sm->stages) return -1;
    if (sm->allreduce_link) return cost_allreduce_s(sm->allreduce_link, 0, replicas, bytes);
    int first = sm->stage_device[q], last = first + replicas - 1;
    return cost_allreduce_s(&sm->hw, cost_ranks_inter(&sm->hw, first, last), replicas, bytes);
}

/* Returns the optimizer step time of stage q. */
static double model_step(void *ctx, int q) {
    const sim_model *sm = ctx;
    return q >= 0 && q < sm->stages ? sm->step_s[q] : 0;
}

/* Returns the sender's own time in a hand-off of bytes (sim_model.send_hold). */
static double model_send_hold(void *ctx, int src, int dst, int64_t bytes) {
    const sim_model *sm = ctx;
    (void)src;
    (void)dst;
    return cost_p2p_s(sm->send_hold.latency_s, sm->send_hold.Bps, (double)bytes);
}

/* Returns the receiver's own time posting a receive of bytes: its latency when posted before
 * the message arrived, else with the copy out (sim_model.post_hold). */
static double model_post_hold(void *ctx, int src, int dst, int64_t bytes, int arrived) {
    const sim_model *sm = ctx;
    (void)src;
    (void)dst;
    return cost_p2p_s(sm->post_hold.latency_s, sm->post_hold.Bps, arrived ? (double)bytes : 0);
}

/* Returns the sim_costs view whose ctx is sm (the engine reads stage costs through it). */
sim_costs sim_model_costs(sim_model *sm) {
    sim_costs c = {sm, model_compute, model_boundary, model_stash, model_wstash, model_input, model_params,
                   model_transfer, model_allreduce, model_step, model_replica_transfer, model_rerun,
                   sm->send_hold.Bps > 0 ? model_send_hold : NULL, sm->post_hold.Bps > 0 ? model_post_hold : NULL};
    return c;
}

/* Fills the model-dependent fields of c (see sim.h) so the engine's memory and throughput
 * use the model's dtype, the opts' optimizer bytes and microbatch, and the device memory. */
void sim_model_config(const sim_model *sm, sim_config *c) {
    c->replicas = sm->replicas;
    c->dtype_bytes = sm->m->dtype_bytes > 0 ? sm->m->dtype_bytes : 4;
    c->optimizer_bytes_per_param = sm->o.optimizer_bytes_per_param;
    c->microbatch_size = sm->o.microbatch_size > 0 ? sm->o.microbatch_size : sm->m->microbatch_size;
    c->ranks_per_node = sm->hw.devices_per_node;
    if (c->capacity_bytes <= 0 && sm->hw.memory_bytes > 0 && sm->hw.memory_bytes < 9.2e18)
        c->capacity_bytes = (int64_t)sm->hw.memory_bytes;
}

/* Returns the balanced partition (see sim.h), or NULL and e. */
cost_partition *sim_model_balance(const cost_model *m, const cost_hw *hw, const cost_opts *o, int stages, pl_err *e) {
    cost_opts dflt;
    if (!o) {
        cost_opts_init(&dflt, m);
        o = &dflt;
    }
    cost_part_layer *y = NULL;
    if (cost_part_layers_from_model(m, hw, o, &y, e) != PL_OK) return NULL;
    cost_balance_opts bo = {.stages = stages};
    cost_partition *p = NULL;
    int rc = cost_plan_balance(y, m->n, &bo, &p, e);
    free(y);
    if (rc != PL_OK) pl_err_prefix(e, "model %s: balanced split: ", m->name);
    return p;
}
