/* sim_queue_int.h: the heap engine's event queue: a 4-ary heap of events ordered by (time,
 * insertion order), so that every run is deterministic, and the events' payloads. Static
 * inline: it is the heap engine's hot path, and the engines include it (sim_rules_int.h). */
#ifndef SIM_QUEUE_INT_H
#define SIM_QUEUE_INT_H

#include <stdlib.h>

#include "sim_int.h"

__extension__ typedef unsigned __int128 sim_u128;

/* An event: 128-bit key (time bits, insertion number) and what happens (a payload below). */
struct sim_ev {
    sim_u128 key;
    uint64_t payload;
};

/* Event kinds, in the top bits of the payload. */
enum { SIM_EV_COMPUTE_END = 0, SIM_EV_ARRIVE = 1, SIM_EV_REDUCE_END = 2, SIM_EV_STEP_END = 3, SIM_EV_HOLD_END = 4 };

/* Payload layout: kind << SIM_EV_KIND_SHIFT | value. The value of an arrival is table <<
 * SIM_EV_TABLE_SHIFT | cell index; the others' is hi << SIM_EV_HI_SHIFT | lo: a compute end's
 * (stream, pc), an all-reduce end's (members, stage; 0 members: not replicated) and a deferred
 * step end's (replica, stage). Streams (SIM_MAX_STREAMS) fit hi, cell indices (stages x
 * microbatches) fit the 48 bits below the table. */
#define SIM_EV_KIND_SHIFT 56
#define SIM_EV_HI_SHIFT 32
#define SIM_EV_TABLE_SHIFT 48
#define SIM_EV_VALUE_MASK (((uint64_t)1 << SIM_EV_KIND_SHIFT) - 1)
#define SIM_EV_INDEX_MASK (((uint64_t)1 << SIM_EV_TABLE_SHIFT) - 1)

/* Returns the payload of an event of kind with value (hi, lo). */
static inline uint64_t sim_ev_pack(int kind, uint32_t hi, uint32_t lo) {
    return (uint64_t)kind << SIM_EV_KIND_SHIFT | (uint64_t)hi << SIM_EV_HI_SHIFT | lo;
}

/* Returns the payload of the arrival of table's time of cell idx. */
static inline uint64_t sim_ev_pack_arrive(int table, int64_t idx) {
    return (uint64_t)SIM_EV_ARRIVE << SIM_EV_KIND_SHIFT | (uint64_t)table << SIM_EV_TABLE_SHIFT | (uint64_t)idx;
}

/* The fields of a payload: its kind, hi and lo (sim_ev_pack), table and index (arrivals). */
static inline int sim_ev_kind(uint64_t p) { return (int)(p >> SIM_EV_KIND_SHIFT); }
static inline uint32_t sim_ev_hi(uint64_t p) { return (uint32_t)((p & SIM_EV_VALUE_MASK) >> SIM_EV_HI_SHIFT); }
static inline uint32_t sim_ev_lo(uint64_t p) { return (uint32_t)p; }
static inline int sim_ev_table(uint64_t p) { return (int)((p & SIM_EV_VALUE_MASK) >> SIM_EV_TABLE_SHIFT); }
static inline int64_t sim_ev_index(uint64_t p) { return (int64_t)(p & SIM_EV_INDEX_MASK); }

/* Returns the time of an event. */
static inline double sim_ev_time(const sim_ev *x) {
    uint64_t bits = (uint64_t)(x->key >> 64);
    double t;
    memcpy(&t, &bits, sizeof t);
    return t;
}

/* Children per node: half the levels of a binary heap, and the four children share lines. */
#define SIM_HEAP_ARITY 4
/* Events the queue first makes room for. */
#define SIM_HEAP_FIRST_CAP 1024

/* Returns the ordering key of an event at time t (>= 0) inserted as number seq: the bits of a
 * non-negative double order like the double, so (time, insertion order) is one integer. */
static inline sim_u128 sim_ev_key(double t, uint64_t seq) {
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (sim_u128)bits << 64 | seq;
}

/* Pushes an event at time t with payload p; returns 0, or -1 when out of memory. */
static inline int sim_ev_push(sim_eng *g, double t, uint64_t p) {
    if (g->hn == g->hcap) {
        size_t cap = g->hcap ? g->hcap * 2 : SIM_HEAP_FIRST_CAP;
        sim_ev *nh = pl_reallocarray(g->heap, cap, sizeof *nh);
        if (!nh) return -1;
        g->heap = nh;
        g->hcap = cap;
    }
    if (t == 0) t = 0; /* -0.0 -> +0.0 */
    sim_ev x = {sim_ev_key(t, g->seq++), p};
    size_t i = g->hn++;
    while (i > 0) {
        size_t parent = (i - 1) / SIM_HEAP_ARITY;
        if (x.key >= g->heap[parent].key) break;
        g->heap[i] = g->heap[parent];
        i = parent;
    }
    g->heap[i] = x;
    return 0;
}

/* Returns the index of the earliest of the children c .. c + SIM_HEAP_ARITY - 1 (those below n). */
static inline size_t sim_ev_min_child(const sim_ev *h, size_t c, size_t n) {
    if (c + SIM_HEAP_ARITY - 1 < n) {
        size_t a = h[c + 1].key < h[c].key ? c + 1 : c;
        size_t b = h[c + 3].key < h[c + 2].key ? c + 3 : c + 2;
        return h[b].key < h[a].key ? b : a;
    }
    size_t m = c;
    for (size_t j = c + 1; j < n; j++)
        if (h[j].key < h[m].key) m = j;
    return m;
}

/* Pops the earliest event (the queue is not empty) into *out. */
static inline void sim_ev_pop(sim_eng *g, sim_ev *out) {
    *out = g->heap[0];
    sim_ev x = g->heap[--g->hn];
    size_t i = 0, n = g->hn;
    sim_ev *h = g->heap;
    for (;;) {
        size_t c = SIM_HEAP_ARITY * i + 1;
        if (c >= n) break;
        size_t m = sim_ev_min_child(h, c, n);
        if (h[m].key >= x.key) break;
        h[i] = h[m];
        i = m;
    }
    if (n) h[i] = x;
}

#endif
