/* sim_links.c: the links of a run: one per (rank pair, direction) that some stage boundary
 * uses (or per node pair and direction when inter-node links are shared), one per (replica
 * pair, direction) at a replicated boundary, and the transfer time of each boundary. */
#include <math.h>
#include <stdlib.h>

#include "sim_int.h"

/* Link keys: a rank (or node) pair is src << KEY_SRC_SHIFT | dst; the keys of node pairs
 * (shared inter-node links) have KEY_NODE_PAIR set, so that they never meet a rank pair's. */
#define KEY_SRC_SHIFT 31
#define KEY_NODE_PAIR ((int64_t)1 << 62)

/* Orders link keys (src, dst) for deduplication. */
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Returns the link key of a transfer src -> dst: a rank pair, or a node pair when shared. */
static int64_t link_key(const sim_eng *g, int src, int dst) {
    int rpn = g->cfg->ranks_per_node;
    if (g->cfg->shared_inter_link && rpn > 0 && src / rpn != dst / rpn)
        return KEY_NODE_PAIR | ((int64_t)(src / rpn) << KEY_SRC_SHIFT) | (dst / rpn);
    return ((int64_t)src << KEY_SRC_SHIFT) | dst;
}

/* Fills keys with the sorted, unique link keys of the nb boundaries (both directions); returns
 * how many. */
static size_t unique_keys(const sim_eng *g, size_t nb, int64_t *keys) {
    const int *sr = g->s->stage_rank;
    for (size_t b = 0; b < nb; b++) {
        keys[2 * b] = link_key(g, sr[b], sr[b + 1]);
        keys[2 * b + 1] = link_key(g, sr[b + 1], sr[b]);
    }
    qsort(keys, 2 * nb, sizeof *keys, cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < 2 * nb; i++)
        if (u == 0 || keys[u - 1] != keys[i]) keys[u++] = keys[i];
    return u;
}

/* Sets npair of each boundary between two ranks with a replicated side: one link per replica
 * pair and direction, the pair of microbatch k being k mod lcm(n1, n2) (at most one per
 * microbatch). Returns the replica-pair links this adds (both directions). */
static size_t replica_pairs(sim_eng *g, size_t nb) {
    size_t extra = 0;
    for (size_t b = 0; b < nb; b++) {
        int r1 = g->reps[b], r2 = g->reps[b + 1];
        g->st[b].npair = 0;
        if ((r1 > 1 || r2 > 1) && g->s->stage_rank[b] != g->s->stage_rank[b + 1]) {
            int64_t x = r1, y = r2;
            while (y) { int64_t t = x % y; x = y; y = t; }
            int64_t l = (int64_t)r1 / x * r2;
            if (l > g->M) l = g->M;
            if (l < 1) l = 1;
            g->st[b].npair = (int32_t)l;
            extra += 2 * (size_t)l;
        }
    }
    return extra;
}

/* Sets boundary b's links (among the nkeys unique keys) and transfer times of bytes each way.
 * Returns PL_OK or PL_EINPUT for a negative time or size. */
static int boundary_link(sim_eng *g, size_t b, const int64_t *keys, size_t nkeys, int64_t bytes, pl_err *e) {
    int src = g->s->stage_rank[b], dst = g->s->stage_rank[b + 1];
    int64_t kf = link_key(g, src, dst), kb = link_key(g, dst, src);
    sim_stage_state *st = &g->st[b];
    st->link_f = (int32_t)((int64_t *)bsearch(&kf, keys, nkeys, sizeof *keys, cmp_i64) - keys);
    st->link_b = (int32_t)((int64_t *)bsearch(&kb, keys, nkeys, sizeof *keys, cmp_i64) - keys);
    st->xfer_f_s = src == dst ? 0 : g->c->transfer_s(g->c->ctx, src, dst, bytes);
    st->xfer_b_s = src == dst ? 0 : g->c->transfer_s(g->c->ctx, dst, src, bytes);
    if (!(st->xfer_f_s >= 0) || !(st->xfer_b_s >= 0) || bytes < 0)
        return pl_errf(e, PL_EINPUT, "negative transfer time or size at the boundary of stage %zu", b);
    return PL_OK;
}

/* Gives replicated boundary b its replica-pair links from link u on (npair forward, then npair
 * back) with their transfer times of bytes. Returns PL_OK or PL_EINPUT for a negative time. */
static int boundary_pairs(sim_eng *g, size_t b, size_t u, int64_t bytes, pl_err *e) {
    int src = g->s->stage_rank[b], dst = g->s->stage_rank[b + 1];
    sim_stage_state *st = &g->st[b];
    int l = st->npair, r1 = g->reps[b], r2 = g->reps[b + 1];
    st->link_f = (int32_t)u;
    st->link_b = (int32_t)u + l;
    for (int p = 0; p < l; p++) {
        int i = p % r1, j = p % r2; /* replica i of stage b sends to replica j of b + 1 */
        double tf, tb;
        if (g->c->replica_transfer_s) {
            tf = g->c->replica_transfer_s(g->c->ctx, src, i, dst, j, bytes);
            tb = g->c->replica_transfer_s(g->c->ctx, dst, j, src, i, bytes);
        } else {
            tf = st->xfer_f_s;
            tb = st->xfer_b_s;
        }
        if (!(tf >= 0) || !(tb >= 0))
            return pl_errf(e, PL_EINPUT, "negative transfer time at the boundary of stage %zu (replicas %d -> %d)",
                           b, i, j);
        g->link_xfer[u + (size_t)p] = tf;
        g->link_xfer[u + (size_t)l + (size_t)p] = tb;
    }
    return PL_OK;
}

/* Sets every boundary's links and times: the rank-pair links are the first nkeys, the
 * replica-pair links follow. Returns PL_OK or PL_EINPUT. */
static int set_boundaries(sim_eng *g, size_t nb, const int64_t *keys, size_t nkeys, pl_err *e) {
    size_t u = nkeys; /* the first free replica-pair link */
    for (size_t b = 0; b < nb; b++) {
        int64_t bytes = g->c->boundary_bytes(g->c->ctx, (int)b);
        int rc = boundary_link(g, b, keys, nkeys, bytes, e);
        if (rc != PL_OK) return rc;
        if (g->st[b].npair == 0) continue;
        if ((rc = boundary_pairs(g, b, u, bytes, e)) != PL_OK) return rc;
        u += 2 * (size_t)g->st[b].npair;
    }
    return PL_OK;
}

/* Sets the hand-off's own times of every boundary (sim_eng.hold) from the costs' optional
 * send_hold_s and post_hold_s; leaves hold NULL when there are none or all are 0. Returns PL_OK,
 * or PL_EINPUT for a negative time, PL_ENOMEM. */
static int set_holds(sim_eng *g, size_t nb, pl_err *e) {
    const sim_costs *c = g->c;
    if ((!c->send_hold_s && !c->post_hold_s) || nb == 0) return PL_OK;
    g->hold = pl_calloc(nb * SIM_HOLDS, sizeof *g->hold);
    if (!g->hold) return pl_errf(e, PL_ENOMEM, "out of memory setting up links");
    int any = 0;
    for (size_t b = 0; b < nb; b++) {
        int src = g->s->stage_rank[b], dst = g->s->stage_rank[b + 1];
        if (src == dst) continue; /* no hand-off between a rank's own stages */
        int64_t bytes = c->boundary_bytes(c->ctx, (int)b);
        double *h = g->hold + b * SIM_HOLDS;
        if (c->send_hold_s) {
            h[SIM_HOLD_SEND_F] = c->send_hold_s(c->ctx, src, dst, bytes);
            h[SIM_HOLD_SEND_B] = c->send_hold_s(c->ctx, dst, src, bytes);
        }
        if (c->post_hold_s)
            for (int late = 0; late < 2; late++) {
                h[SIM_HOLD_POST_F + late] = c->post_hold_s(c->ctx, src, dst, bytes, late);
                h[SIM_HOLD_POST_B + late] = c->post_hold_s(c->ctx, dst, src, bytes, late);
            }
        for (int j = 0; j < SIM_HOLDS; j++) {
            if (!(h[j] >= 0) || !isfinite(h[j]))
                return pl_errf(e, PL_EINPUT, "negative or undefined hand-off time at the boundary of stage %zu", b);
            any |= h[j] > 0;
        }
    }
    if (!any) {
        free(g->hold);
        g->hold = NULL;
    }
    return PL_OK;
}

int sim_setup_links(sim_eng *g, pl_err *e) {
    int S = g->s->stages;
    size_t nb = S > 1 ? (size_t)(S - 1) : 0;
    int64_t *keys = pl_calloc(2 * nb + 1, sizeof *keys);
    if (!keys) return pl_errf(e, PL_ENOMEM, "out of memory setting up links");
    size_t u = unique_keys(g, nb, keys);
    size_t extra = replica_pairs(g, nb);
    int rc = PL_OK;
    if (u + extra > (size_t)INT32_MAX) rc = pl_errf(e, PL_EINPUT, "too many links (%zu replica pairs)", extra);
    if (rc == PL_OK) {
        g->nlinks = (int)(u + extra);
        g->link_free = pl_calloc(u + extra + 1, sizeof(double));
        if (extra) g->link_xfer = pl_calloc(u + extra + 1, sizeof(double));
        if (!g->link_free || (extra && !g->link_xfer)) rc = pl_errf(e, PL_ENOMEM, "out of memory setting up links");
    }
    if (rc == PL_OK) rc = set_boundaries(g, nb, keys, u, e);
    if (rc == PL_OK) rc = set_holds(g, nb, e);
    free(keys);
    return rc;
}
