/* exec_config.c: the executor's configuration: its defaults, its checks, the fault names. */
#include "exec_int.h"

#include <string.h>

/* Bounds of the model's shape that exec_check_config accepts. */
#define EXEC_MAX_HIDDEN 65536
#define EXEC_MAX_FFN (1 << 20)
/* The default seeds of the initial weights, the target network and the inputs. */
#define EXEC_DEFAULT_INIT_SEED 1
#define EXEC_DEFAULT_TARGET_SEED 2
#define EXEC_DEFAULT_DATA_SEED 3
#define EXEC_DEFAULT_LAYERS 4
#define EXEC_DEFAULT_LR 0.05
#define EXEC_DEFAULT_WARMUP_PASSES 1
#define EXEC_DEFAULT_TIMED_PASSES 5

void exec_config_default(exec_config *c) {
    memset(c, 0, sizeof *c);
    c->hidden = EXEC_DEFAULT_HIDDEN;
    c->ffn = 0;
    c->layers = EXEC_DEFAULT_LAYERS;
    c->microbatch_size = EXEC_DEFAULT_MICROBATCH_SIZE;
    c->init_seed = EXEC_DEFAULT_INIT_SEED;
    c->target_seed = EXEC_DEFAULT_TARGET_SEED;
    c->data_seed = EXEC_DEFAULT_DATA_SEED;
    c->dataset_microbatches = EXEC_DEFAULT_DATASET_MICROBATCHES;
    c->lr = EXEC_DEFAULT_LR;
    c->momentum = 0.0;
    c->warmup_passes = EXEC_DEFAULT_WARMUP_PASSES;
    c->timed_passes = EXEC_DEFAULT_TIMED_PASSES;
    c->pin = 1;
    c->timeout_s = EXEC_DEFAULT_TIMEOUT_S;
}

/* Returns D, the microbatches of the data set: the one reading of an unset (0) size, which the
 * data set (model.c) and the memory check both use. */
int exec_dataset_microbatches(const exec_config *c) {
    return c->dataset_microbatches > 0 ? c->dataset_microbatches : EXEC_DEFAULT_DATASET_MICROBATCHES;
}

/* The names of the fault kinds, by kind. */
static const char *const fault_names[] = {NULL, "error", "size", "exit", "kill", "drop-recv", "drop-send", "extra-send",
                                             "delay-send"};

const char *exec_fault_name(exec_fault_kind k) {
    return (int)k > 0 && (size_t)k < sizeof fault_names / sizeof *fault_names ? fault_names[k] : NULL;
}

exec_fault_kind exec_fault_parse(const char *name) {
    for (size_t k = 1; name && k < sizeof fault_names / sizeof *fault_names; k++)
        if (strcmp(name, fault_names[k]) == 0) return (exec_fault_kind)k;
    return EXEC_FAULT_NONE;
}

size_t exec_param_count(const exec_config *cfg) {
    exec_dims d;
    exec_dims_of(cfg, &d);
    return (size_t)cfg->layers * exec_block_floats(&d);
}

int exec_check_config(const exec_config *c, pl_err *e) {
    if (c->hidden < 1 || c->hidden > EXEC_MAX_HIDDEN)
        return pl_errf(e, PL_EINPUT, "hidden size %d out of range 1..%d", c->hidden, EXEC_MAX_HIDDEN);
    if (c->ffn < 0 || c->ffn > EXEC_MAX_FFN) return pl_errf(e, PL_EINPUT, "ffn size %d out of range", c->ffn);
    if (c->layers < 1) return pl_errf(e, PL_EINPUT, "layers must be at least 1");
    if (c->microbatch_size < 1) return pl_errf(e, PL_EINPUT, "microbatch size must be at least 1");
    if (c->warmup_passes < 0 || c->timed_passes < 1) return pl_errf(e, PL_EINPUT, "need warm-up >= 0 and timed passes >= 1");
    if (c->timed_passes_max != 0 && c->timed_passes_max < c->timed_passes)
        return pl_errf(e, PL_EINPUT, "the most timed passes (%d) is under the least (%d)", c->timed_passes_max, c->timed_passes);
    if (c->timed_passes_max > c->timed_passes && !(c->steady_max > 0))
        return pl_errf(e, PL_EINPUT, "timing passes until the run is steady needs a steadiness above 0");
    if (!(c->lr >= 0) || !(c->momentum >= 0) || c->momentum >= 1) return pl_errf(e, PL_EINPUT, "need lr >= 0 and 0 <= momentum < 1");
    if (c->dataset_microbatches < 0) return pl_errf(e, PL_EINPUT, "data set size must be positive");
    return exec_check_block(c, e);
}

/* exec_int.h. */
int exec_check_run(const sched *s, const exec_config *c, int *blocks, pl_err *e) {
    if (!s->lowered) return pl_errf(e, PL_EINPUT, "the executor runs lowered schedules (lower it first)");
    int rc = exec_check_config(c, e);
    if (rc) return rc;
    if (sched_validate(s, e) != PL_OK) return e->code;
    return exec_stage_blocks(s, c, blocks, e);
}

/* exec_int.h. */
int exec_check_fault(const sched_rank *list, int ranks, const exec_config *c, pl_err *e) {
    const exec_fault *f = &c->fault;
    if (f->kind == EXEC_FAULT_NONE) return PL_OK;
    int P = exec_passes_most(c);
    if (f->rank >= ranks)
        return pl_errf(e, PL_EINPUT, "the injected fault's rank %d is not in the run (ranks 0..%d)", f->rank, ranks - 1);
    const sched_rank *rk = &list[f->rank];
    if ((size_t)f->action >= rk->n)
        return pl_errf(e, PL_EINPUT, "the injected fault's action %d is past rank %d's %zu actions", f->action + 1, f->rank, rk->n);
    if (f->pass >= P)
        return pl_errf(e, PL_EINPUT, "the injected fault's pass %d is past the run's %d passes (0..%d)", f->pass, P, P - 1);
    /* the kinds that strike the first SEND (RECV) at or after the action need one there */
    int want_send = f->kind == EXEC_FAULT_BAD_SIZE || f->kind == EXEC_FAULT_DROP_SEND || f->kind == EXEC_FAULT_EXTRA_SEND ||
                    f->kind == EXEC_FAULT_DELAY_SEND,
        want_recv = f->kind == EXEC_FAULT_DROP_RECV;
    if (!want_send && !want_recv) return PL_OK;
    for (size_t k = (size_t)f->action; k < rk->n; k++) {
        sched_kind a = (sched_kind)rk->acts[k].kind;
        if (want_send ? (a == SCHED_SEND_F || a == SCHED_SEND_B) : (a == SCHED_RECV_F || a == SCHED_RECV_B)) return PL_OK;
    }
    return pl_errf(e, PL_EINPUT, "the injected fault '%s' strikes a %s, and rank %d has none at or after its action %d",
                   exec_fault_name(f->kind), want_send ? "SEND" : "RECV", f->rank, f->action + 1);
}
