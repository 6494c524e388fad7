/* gen_table.c: the table of schedule generators and lookup by name. */
#include "pl_sched.h"

#include <stdio.h>
#include <string.h>

const sched_generator sched_generators[] = {
    {"gpipe", "GPipe: all forwards, then all backwards, flush per iteration", sched_gen_gpipe},
    {"1f1b", "PipeDream-Flush: one forward one backward, at most p-r in flight", sched_gen_1f1b},
    {"pipedream", "PipeDream: asynchronous 1F1B with weight stashing, no flush", sched_gen_pipedream},
    {"2bw", "PipeDream-2BW: asynchronous 1F1B, double-buffered weights", sched_gen_2bw},
    {"interleaved", "Megatron interleaved 1F1B, v chunks per rank", sched_gen_interleaved},
    {"looped-bfs", "Looped BFS: breadth-first over each rank's chunks", sched_gen_looped_bfs},
    {"zb-h1", "Zero Bubble ZB-H1: split backward, 1F1B memory", sched_gen_zb_h1},
    {"zb-h2", "Zero Bubble ZB-H2: split backward, more warm-up, zero bubble", sched_gen_zb_h2},
    {"zbv", "Zero Bubble ZB-V: two chunks per rank in a V, split backward", sched_gen_zbv},
    {"dualpipev", "DualPipeV: V placement with overlapped forward and backward", sched_gen_dualpipev},
    {NULL, NULL, NULL},
};

/* Returns the generator called name, or NULL. */
const sched_generator *sched_find_generator(const char *name) {
    for (const sched_generator *g = sched_generators; g->name; g++)
        if (name && strcmp(g->name, name) == 0) return g;
    return NULL;
}

/* Generates a schedule by name within budget b; an unknown name lists the known ones. */
sched *sched_generate_within(const char *name, const sched_gen_opts *o, const sched_budget *b, pl_err *e) {
    const sched_generator *g = sched_find_generator(name);
    if (!g) {
        char known[512] = "";
        for (const sched_generator *k = sched_generators; k->name; k++) {
            if (k != sched_generators) strncat(known, ", ", sizeof known - strlen(known) - 1);
            strncat(known, k->name, sizeof known - strlen(known) - 1);
        }
        pl_errf(e, PL_EINPUT, "unknown schedule kind '%s' (known: %s)", name ? name : "", known);
        return NULL;
    }
    return g->gen(o, b, e);
}

/* Generates a schedule by name within the automatic budget. */
sched *sched_generate(const char *name, const sched_gen_opts *o, pl_err *e) { return sched_generate_within(name, o, NULL, e); }
