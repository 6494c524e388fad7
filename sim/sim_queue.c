/* sim_queue.c: the heap engine's event queue: a 4-ary heap of events ordered by (time,
 * insertion order), so that every run is deterministic. */
#include <stdlib.h>

#include "sim_int.h"

/* Children per node: half the levels of a binary heap, and the four children share lines. */
#define HEAP_ARITY 4
/* Events the queue first makes room for. */
#define HEAP_FIRST_CAP 1024

/* Returns the ordering key of an event at time t (>= 0) inserted as number seq: the bits of a
 * non-negative double order like the double, so (time, insertion order) is one integer. */
static inline sim_u128 ev_key(double t, uint64_t seq) {
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (sim_u128)bits << 64 | seq;
}

int sim_ev_push(sim_eng *g, double t, uint64_t p) {
    if (g->hn == g->hcap) {
        size_t cap = g->hcap ? g->hcap * 2 : HEAP_FIRST_CAP;
        sim_ev *nh = pl_reallocarray(g->heap, cap, sizeof *nh);
        if (!nh) return -1;
        g->heap = nh;
        g->hcap = cap;
    }
    if (t == 0) t = 0; /* -0.0 -> +0.0 */
    sim_ev x = {ev_key(t, g->seq++), p};
    size_t i = g->hn++;
    while (i > 0) {
        size_t parent = (i - 1) / HEAP_ARITY;
        if (x.key >= g->heap[parent].key) break;
        g->heap[i] = g->heap[parent];
        i = parent;
    }
    g->heap[i] = x;
    return 0;
}

/* Returns the index of the earliest of the children c .. c + HEAP_ARITY - 1 (those below n). */
static inline size_t min_child(const sim_ev *h, size_t c, size_t n) {
    if (c + HEAP_ARITY - 1 < n) {
        size_t a = h[c + 1].key < h[c].key ? c + 1 : c;
        size_t b = h[c + 3].key < h[c + 2].key ? c + 3 : c + 2;
        return h[b].key < h[a].key ? b : a;
    }
    size_t m = c;
    for (size_t j = c + 1; j < n; j++)
        if (h[j].key < h[m].key) m = j;
    return m;
}

void sim_ev_pop(sim_eng *g, sim_ev *out) {
    *out = g->heap[0];
    sim_ev x = g->heap[--g->hn];
    size_t i = 0, n = g->hn;
    sim_ev *h = g->heap;
    for (;;) {
        size_t c = HEAP_ARITY * i + 1;
        if (c >= n) break;
        size_t m = min_child(h, c, n);
        if (h[m].key >= x.key) break;
        h[i] = h[m];
        i = m;
    }
    if (n) h[i] = x;
}
