/* Fuzz target: PipeDream graph.txt profiles. A graph that reads gives a model with finite,
 * non-negative times and sizes, and partitioning it must not crash. */
#include <math.h>

#include "cost.h"
#include "fuzz_util.h"
#include "pl_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pl_err e;
    cost_model *m = cost_model_read_graph("fuzz/graph.txt", (const char *)data, size, 1, &e);
    if (!m) {
        FZ_CHECK(e.code != PL_OK && e.msg[0], "a refusal without a message");
        return 0;
    }
    pl_buf out;
    pl_buf_init(&out);
    FZ_CHECK(cost_model_write_csv(m, &out, &e) == PL_OK, "profile write failed: %s", e.msg);
    cost_model *r = cost_model_read_csv("again.csv", out.data, out.len, &e);
    FZ_CHECK(r != NULL, "a graph model does not survive the profile CSV: %s", e.msg);
    FZ_CHECK(r->n == m->n, "layer count changed: %d -> %d", m->n, r->n);
    /* the planners on what was read: on the Cluster A preset, 4 workers */
    cost_hw hw;
    FZ_CHECK(cost_hw_load(&hw, "cluster-a", &e) == PL_OK, "preset: %s", e.msg);
    cost_opts o;
    cost_opts_init(&o, m);
    cost_part_layer *layers = NULL;
    if (m->n <= 200 && cost_part_layers_from_model(m, &hw, &o, &layers, &e) == PL_OK) {
        cost_balance_opts bo = {.stages = m->n < 4 ? m->n : 4};
        cost_partition *plan = NULL;
        if (cost_plan_balance(layers, m->n, &bo, &plan, &e) == PL_OK) cost_partition_free(plan);
        cost_part_topo topo;
        cost_part_topo_from_hw(&hw, &topo);
        cost_pipedream_opts po = {.workers = 4};
        if (cost_plan_pipedream(layers, m->n, &topo, &po, &plan, &e) == PL_OK) cost_partition_free(plan);
    }
    free(layers);
    cost_model_free(r);
    pl_buf_free(&out);
    cost_model_free(m);
    return 0;
}
