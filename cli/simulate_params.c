/* simulate_params.c: the parameters JSON of `pipelab simulate` (simulate_int.h), printed by
 * --format json and stored with the run: a model run's model, hardware and partition, or the
 * flag-driven costs, and the files the run read. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "simulate_int.h"

/* Appends the JSON object of a model run's parameters: the model (spec, name, layers), the
 * hardware (name or file, --set overrides, the effective values), the partition (source, layer
 * bounds, replicas) and the cost options, plus the run configuration shared with flag runs. */
static void params_json_model(const opts *o, const sim_model_setup *ms, pl_buf *b) {
    const cost_hw *hw = &ms->sm.hw;
    const sim_model_spec *sp = &o->spec;
    pl_buf_puts(b, "{\"costs\":\"model\",\"model\":{\"spec\":");
    pl_buf_json_string(b, sp->model);
    pl_buf_puts(b, ",\"name\":");
    pl_buf_json_string(b, ms->m->name);
    pl_buf_printf(b, ",\"source\":\"%s\",\"layers\":%d,\"microbatch_size\":%d,\"dtype_bytes\":%d,\"params\":%.9g}",
                  ms->m->source, ms->m->n, ms->m->microbatch_size, ms->m->dtype_bytes, cost_model_params(ms->m));
    pl_buf_puts(b, ",\"hardware\":{\"spec\":");
    pl_buf_json_string(b, sp->hardware ? sp->hardware : "");
    pl_buf_puts(b, ",\"name\":");
    pl_buf_json_string(b, hw->name);
    pl_buf_puts(b, ",\"set\":[");
    for (int k = 0; k < sp->nsets; k++) {
        if (k) pl_buf_putc(b, ',');
        pl_buf_json_string(b, sp->sets[k]);
    }
    pl_buf_printf(b, "],\"peak_flops\":%.9g,\"keys\":", hw->peak_flops[ms->co.precision]);
    cost_hw_json(hw, b);
    pl_buf_putc(b, '}');
    /* the measured all-reduce that priced REDUCE_GRAD instead of the hardware's links, if any */
    pl_buf_printf(b, ",\"allreduce_link\":\"%s\"", o->ar_used >= 0 ? cost_transport_name((cost_transport)o->ar_used) : "hardware");
    if (ms->sm.allreduce_link)
        pl_buf_printf(b, ",\"allreduce_latency_s\":%.9g,\"allreduce_Bps\":%.9g", ms->sm.allreduce_link->intra_latency_s,
                      ms->sm.allreduce_link->intra_bandwidth_Bps);
    pl_buf_printf(b, ",\"partition\":{\"source\":\"%s\",\"file\":", ms->psource);
    pl_buf_json_string(b, sp->partition ? sp->partition : "");
    pl_buf_puts(b, ",\"bounds\":[");
    for (int q = 0; q <= ms->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", ms->sm.bound[q]);
    pl_buf_puts(b, "],\"replicas\":[");
    for (int q = 0; q < ms->sm.stages; q++) pl_buf_printf(b, "%s%d", q ? "," : "", ms->sm.replicas[q]);
    pl_buf_printf(b, "]},\"microbatch_size\":%d,\"precision\":\"%s\",\"optimizer_bytes\":%.9g,\"w_stash_fraction\":%.9g,"
                     "\"grad_bytes_per_param\":%.9g,\"shared_inter_link\":%d,\"blocking_comm\":%d,\"capacity_bytes\":%lld,"
                     "\"cv\":%.9g,\"repeat\":%d}",
                  ms->co.microbatch_size, cost_precision_name(ms->co.precision), ms->co.optimizer_bytes_per_param,
                  ms->co.w_stash_fraction, ms->co.grad_bytes_per_param, o->c.shared_inter_link, o->c.blocking_comm,
                  (long long)o->c.capacity_bytes, o->c.cv, o->repeat);
    if (o->have_lr) { /* reopen the object for the layout's figures */
        b->len--;
        pl_buf_puts(b, ",\"parallel\":");
        cli_layout_json(&o->lr, o->spec.layout, b);
        pl_buf_putc(b, '}');
    }
}

/* Returns path when it names a regular file (a --model or --hardware value can be a preset or
 * a spec instead), else NULL. */
static const char *file_or_null(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) ? path : NULL;
}

static void params_json_costs(const opts *o, pl_buf *b);

/* Appends the JSON object of the cost and hardware parameters (stored with the run), with the
 * files the run read (cli_inputs_json) as its last key. */
void simulate_params_json(const opts *o, pl_buf *b) {
    if (o->ms) params_json_model(o, o->ms, b);
    else params_json_costs(o, b);
    if (b->len && b->data[b->len - 1] == '}') { /* reopen the object for the inputs */
        b->len--;
        b->data[b->len] = 0;
        pl_buf_putc(b, ',');
        const char *roles[] = {"schedule", "model", "hardware", "partition"};
        const char *paths[] = {o->a.from, file_or_null(o->spec.model), file_or_null(o->spec.hardware), o->spec.partition};
        cli_inputs_json(b, roles, paths, sizeof roles / sizeof roles[0]);
        pl_buf_putc(b, '}');
    }
}

/* The flag-driven costs' part of simulate_params_json ("replicas": --replicas, 1 when not given). */
static void params_json_costs(const opts *o, pl_buf *b) {
    const sim_replica_spec *rs = &o->spec.replicas;
    pl_buf_printf(b, "{\"costs\":\"flags\",\"time_per\":\"%s\",\"stage_share\":%.9g,\"tf_s\":%.9g,\"tb_s\":%.9g,\"ti_s\":%.9g,\"tw_s\":%.9g,\"tstep_s\":%.9g,\"tcomm_s\":%.9g,"
                     "\"bytes\":%lld,\"bandwidth_Bps\":%.9g,\"latency_s\":%.9g,\"inter_bandwidth_Bps\":%.9g,"
                     "\"inter_latency_s\":%.9g,\"ranks_per_node\":%d,\"shared_inter_link\":%d,\"blocking_comm\":%d,"
                     "\"stash_bytes\":%lld,\"w_stash_fraction\":%.9g,\"param_bytes\":%lld,\"dtype_bytes\":%.9g,"
                     "\"optimizer_bytes\":%.9g,\"capacity_bytes\":%lld,\"microbatch_size\":%d,\"cv\":%.9g,"
                     "\"repeat\":%d,\"replicas\":%d,\"stage_costs\":",
                  sim_time_per_name(o->time_per), o->share, o->b.tf_s, o->b.tb_s, o->b.ti_s, o->b.tw_s, o->b.tstep_s,
                  o->b.tcomm_s, (long long)o->b.bytes,
                  o->b.bandwidth_Bps, o->b.latency_s, o->b.inter_bandwidth_Bps, o->b.inter_latency_s, o->b.ranks_per_node,
                  o->c.shared_inter_link, o->c.blocking_comm, (long long)o->b.stash_bytes, o->b.w_stash_fraction,
                  (long long)o->b.param_bytes, o->c.dtype_bytes, o->c.optimizer_bytes_per_param,
                  (long long)o->c.capacity_bytes, o->c.microbatch_size, o->c.cv, o->repeat, rs->all > 0 ? rs->all : 1);
    pl_buf_json_string(b, o->stage_costs ? o->stage_costs : "");
    pl_buf_puts(b, ",\"replicas_stage\":[");
    for (int i = 0; i < rs->n; i++) pl_buf_printf(b, "%s[%d,%d]", i ? "," : "", rs->stage[i], rs->count[i]);
    pl_buf_puts(b, "]}");
}
