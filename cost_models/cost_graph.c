/* cost_graph.c: PipeDream graph.txt profiles: parse nodes and edges, order topologically, count
 * the activations that cross every cut (branches and skip connections included). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_int.h"

/* One node as read. */
typedef struct gnode {
    const char *id;      /* points into text */
    size_t id_len;
    const char *desc;
    size_t desc_len;
    double fwd_ms, bwd_ms, act_bytes, param_bytes;
    long long num;       /* N of "nodeN", or a huge value when the id has another form */
    int line;
} gnode;

/* One edge as read (indices resolved after all nodes are known). */
typedef struct gedge {
    const char *a, *b;
    size_t al, bl;
    int ia, ib;
    int line;
} gedge;

/* Everything the parser collects. */
typedef struct graph {
    gnode *node;
    int n;
    size_t cap;
    gedge *edge;
    int ne;
    size_t ecap;
    struct gid *sorted;  /* [n] ids sorted by bytes, for lookups */
} graph;

/* First capacity of the node and edge lists (doubled as they fill). */
#define GRAPH_FIRST_CAP 64
/* What node_number gives an id that is not "nodeN": above every N it can read. */
#define NODE_NUMBER_OTHER ((long long)1 << 62)
/* Longest "nodeN" id node_number reads: "node" and 18 digits, so N fits a long long. */
#define NODE_ID_MAX_LEN 22

/* An id with its node index, sorted for binary search. */
typedef struct gid {
    const char *id;
    size_t len;
    int idx;
} gid;

/* Releases the parser's arrays. */
static void graph_free(graph *g) {
    free(g->node);
    free(g->edge);
    free(g->sorted);
}

/* Finds the first occurrence of " -- " in s[0..n) at or after from; returns its offset or -1. */
static long find_sep(const char *s, size_t n, size_t from) {
    for (size_t i = from; i + 4 <= n; i++)
        if (s[i] == ' ' && s[i + 1] == '-' && s[i + 2] == '-' && s[i + 3] == ' ') return (long)i;
    return -1;
}

/* Parses a value: a number, or a list "[a; b; c]" whose entries are summed. Returns 0 or -1. */
static int parse_value(const char *s, size_t n, double *out) {
    s = cost_trim(s, &n);
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        double sum = 0;
        size_t i = 1, end = n - 1;
        if (i == end) return -1;
        while (i <= end) {
            size_t j = i;
            while (j < end && s[j] != ';') j++;
            size_t l = j - i;
            const char *t = cost_trim(s + i, &l);
            double v;
            if (cost_parse_nonneg(t, l, &v) != 0) return -1;
            sum += v;
            i = j + 1;
        }
        *out = sum;
        return 0;
    }
    return cost_parse_nonneg(s, n, out);
}

/* Parses the attribute list of a node line into nd; returns PL_OK or PL_EINPUT. */
static int parse_attrs(const char *path, int line, const char *s, size_t n, gnode *nd, pl_err *e) {
    enum { NKEYS = 4 };
    static const char *const keys[NKEYS] = {"forward_compute_time", "backward_compute_time",
                                            "activation_size", "parameter_size"};
    double *dst[NKEYS] = {&nd->fwd_ms, &nd->bwd_ms, &nd->act_bytes, &nd->param_bytes};
    int seen[NKEYS] = {0};
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        int depth = 0;
        while (j < n && (s[j] != ',' || depth > 0)) {
            if (s[j] == '[') depth++;
            if (s[j] == ']') depth--;
            j++;
        }
        size_t l = j - i;
        const char *t = cost_trim(s + i, &l);
        i = j + 1;
        if (l == 0) return pl_errf(e, PL_EINPUT, "%s:%d: empty attribute", path, line);
        const char *eq = memchr(t, '=', l);
        if (!eq) return pl_errf(e, PL_EINPUT, "%s:%d: attribute '%.*s' is not key=value", path, line, (int)l, t);
        size_t kl = (size_t)(eq - t);
        int k = -1;
        for (int q = 0; q < NKEYS; q++)
            if (cost_word_is(t, kl, keys[q])) k = q;
        if (k < 0)
            return pl_errf(e, PL_EINPUT, "%s:%d: unknown key '%.*s' (known: forward_compute_time, "
                           "backward_compute_time, activation_size, parameter_size)", path, line, (int)kl, t);
        if (seen[k]) return pl_errf(e, PL_EINPUT, "%s:%d: key '%s' repeats", path, line, keys[k]);
        seen[k] = 1;
        const char *v = eq + 1;
        size_t vl = l - kl - 1;
        size_t tl = vl;
        const char *tv = cost_trim(v, &tl);
        if (tl > 0 && tv[0] == '-')
            return pl_errf(e, PL_EINPUT, "%s:%d: negative value '%.*s' for %s", path, line, (int)tl, tv, keys[k]);
        if (parse_value(v, vl, dst[k]) != 0)
            return pl_errf(e, PL_EINPUT, "%s:%d: bad value '%.*s' for %s", path, line, (int)tl, tv, keys[k]);
    }
    for (int q = 0; q < NKEYS; q++)
        if (!seen[q]) return pl_errf(e, PL_EINPUT, "%s:%d: missing key '%s'", path, line, keys[q]);
    return PL_OK;
}

/* Returns N when id is "nodeN" (N decimal), else a value above every such N. */
static long long node_number(const char *id, size_t n) {
    const size_t prefix = sizeof "node" - 1;
    if (n <= prefix || n > NODE_ID_MAX_LEN || memcmp(id, "node", prefix) != 0) return NODE_NUMBER_OTHER;
    long long v = 0;
    for (size_t i = prefix; i < n; i++) {
        if (id[i] < '0' || id[i] > '9') return NODE_NUMBER_OTHER;
        v = v * 10 + (id[i] - '0');
    }
    return v;
}

/* Reads a node line ("id -- desc -- attrs"); returns PL_OK or PL_EINPUT. */
static int read_node(graph *g, const char *path, int line, const char *s, size_t n, pl_err *e) {
    long s1 = find_sep(s, n, 0);
    long s2 = -1;
    for (long p = s1; p >= 0; p = find_sep(s, n, (size_t)p + 4)) s2 = p;
    if (s1 < 0 || s2 == s1)
        return pl_errf(e, PL_EINPUT, "%s:%d: malformed node line (expected 'nodeN -- Description -- "
                       "forward_compute_time=.., backward_compute_time=.., activation_size=.., "
                       "parameter_size=..')", path, line);
    gnode *nn = pl_grow(g->node, &g->cap, (size_t)g->n, GRAPH_FIRST_CAP, sizeof *nn);
    if (!nn) return pl_errf(e, PL_ENOMEM, "out of memory");
    g->node = nn;
    gnode *nd = &g->node[g->n];
    memset(nd, 0, sizeof *nd);
    size_t il = (size_t)s1;
    nd->id = cost_trim(s, &il);
    nd->id_len = il;
    if (il == 0 || memchr(nd->id, ' ', il) || memchr(nd->id, '\t', il))
        return pl_errf(e, PL_EINPUT, "%s:%d: bad node id '%.*s'", path, line, (int)il, nd->id);
    size_t dl = (size_t)(s2 - s1 - 4);
    nd->desc = cost_trim(s + s1 + 4, &dl);
    nd->desc_len = dl;
    int cc = cost_control_char(nd->desc, dl);
    if (cc >= 0)
        return pl_errf(e, PL_EINPUT, "%s:%d: control character 0x%02x in the node description", path, line, cc);
    nd->line = line;
    nd->num = node_number(nd->id, il);
    if (parse_attrs(path, line, s + s2 + 4, n - (size_t)s2 - 4, nd, e) != PL_OK) return PL_EINPUT;
    if (g->n >= COST_MAX_LAYERS) return pl_errf(e, PL_EINPUT, "%s:%d: more than %d nodes", path, line, COST_MAX_LAYERS);
    g->n++;
    return PL_OK;
}

/* Reads an edge line ("\tA -- B"); returns PL_OK or PL_EINPUT. */
static int read_edge(graph *g, const char *path, int line, const char *s, size_t n, pl_err *e) {
    long p = find_sep(s, n, 0);
    if (p < 0 || find_sep(s, n, (size_t)p + 4) >= 0)
        return pl_errf(e, PL_EINPUT, "%s:%d: malformed edge line (expected '<tab>nodeA -- nodeB')", path, line);
    gedge *ne = pl_grow(g->edge, &g->ecap, (size_t)g->ne, GRAPH_FIRST_CAP, sizeof *ne);
    if (!ne) return pl_errf(e, PL_ENOMEM, "out of memory");
    g->edge = ne;
    gedge *ed = &g->edge[g->ne];
    size_t al = (size_t)p, bl = n - (size_t)p - 4;
    ed->a = cost_trim(s, &al);
    ed->al = al;
    ed->b = cost_trim(s + p + 4, &bl);
    ed->bl = bl;
    ed->line = line;
    if (al == 0 || bl == 0 || memchr(ed->a, ' ', al) || memchr(ed->b, ' ', bl))
        return pl_errf(e, PL_EINPUT, "%s:%d: malformed edge line (expected '<tab>nodeA -- nodeB')", path, line);
    g->ne++;
    return PL_OK;
}

/* Compares two ids as byte strings (shorter first on a common prefix). */
static int id_cmp(const char *a, size_t al, const char *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c) return c;
    if (al != bl) return al < bl ? -1 : 1;
    return 0;
}

/* Orders ids by bytes, then by node index. */
static int cmp_id(const void *x, const void *y) {
    const gid *a = x, *b = y;
    int c = id_cmp(a->id, a->len, b->id, b->len);
    return c ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

/* Returns the node index of an id, or -1. */
static int lookup(const graph *g, const char *id, size_t n) {
    int lo = 0, hi = g->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = id_cmp(g->sorted[mid].id, g->sorted[mid].len, id, n);
        if (!c) return g->sorted[mid].idx;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* Orders edges by (source, target), to drop repeats. */
static int cmp_edge(const void *x, const void *y) {
    const gedge *a = x, *b = y;
    if (a->ia != b->ia) return a->ia < b->ia ? -1 : 1;
    if (a->ib != b->ib) return a->ib < b->ib ? -1 : 1;
    return a->line - b->line;
}

/* Returns 1 when node a should come before node b among ready nodes (smaller N, then earlier). */
static int before(const graph *g, int a, int b) {
    if (g->node[a].num != g->node[b].num) return g->node[a].num < g->node[b].num;
    return a < b;
}

/* Min-heap of ready node indices: adds v. */
static void heap_push(const graph *g, int *h, int *hn, int v) {
    int i = (*hn)++;
    h[i] = v;
    while (i > 0 && before(g, h[i], h[(i - 1) / 2])) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

/* Removes and returns the first ready node of the heap (see before). */
static int heap_pop(const graph *g, int *h, int *hn) {
    int top = h[0];
    h[0] = h[--(*hn)];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *hn && before(g, h[l], h[m])) m = l;
        if (r < *hn && before(g, h[r], h[m])) m = r;
        if (m == i) break;
        int t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
    return top;
}

/* Describes a cycle among the nodes left after Kahn's algorithm: walks predecessors (every left
 * node has one that is also left) until a node repeats. Returns PL_EINPUT with
 * "path:line: cycle: a -> b -> a", line of one edge of the cycle. */
static int report_cycle(const graph *g, const char *path, const int *indeg, const int *pstart,
                        const int *pred, const int *pline, pl_err *e) {
    int start = -1;
    for (int i = 0; i < g->n && start < 0; i++)
        if (indeg[i] > 0) start = i;
    if (start < 0) return pl_errf(e, PL_EINTERNAL, "%s: cycle expected but none found", path);
    int *seen = pl_calloc((size_t)g->n, sizeof *seen); /* step + 1 at which a node was visited */
    int *walk = pl_calloc((size_t)g->n + 1, sizeof *walk);
    int *wline = pl_calloc((size_t)g->n + 1, sizeof *wline);
    if (!seen || !walk || !wline) {
        free(seen);
        free(walk);
        free(wline);
        return pl_errf(e, PL_ENOMEM, "out of memory");
    }
    int v = start, steps = 0;
    while (!seen[v]) {
        seen[v] = steps + 1;
        walk[steps] = v;
        int next = -1, ln = 0;
        for (int k = pstart[v]; k < pstart[v + 1]; k++)
            if (indeg[pred[k]] > 0) {
                next = pred[k];
                ln = pline[k];
                break;
            }
        wline[steps] = ln; /* edge next -> v */
        steps++;
        v = next;
        if (v < 0) break;
    }
    if (v < 0) {
        free(seen);
        free(walk);
        free(wline);
        return pl_errf(e, PL_EINTERNAL, "%s: cycle walk lost its way", path);
    }
    /* walk[first..steps-1] goes backwards along the cycle, walk[first] == v */
    int first = seen[v] - 1;
    pl_buf b;
    pl_buf_init(&b);
    int line = wline[first];
    /* forward order, starting at walk[first]: walk[first], walk[steps-1], ..., walk[first+1] */
    const gnode *x = &g->node[walk[first]];
    pl_buf_printf(&b, "%.*s", (int)x->id_len, x->id);
    for (int k = steps - 1; k >= first; k--) {
        x = &g->node[walk[k]];
        pl_buf_printf(&b, " -> %.*s", (int)x->id_len, x->id);
        if (wline[k] && (line == 0 || wline[k] < line)) line = wline[k];
    }
    int rc = pl_errf(e, PL_EINPUT, "%s:%d: cycle: %s", path, line, b.data ? b.data : "?");
    pl_buf_free(&b);
    free(seen);
    free(walk);
    free(wline);
    return rc;
}

/* Sorts the ids for lookups, refuses an id defined twice, resolves every edge's ends to node
 * indices and drops repeated edges (one edge carries the activation once). Returns PL_OK, or
 * PL_EINPUT / PL_ENOMEM with e. */
static int resolve_edges(graph *g, const char *path, pl_err *e) {
    g->sorted = pl_calloc((size_t)g->n, sizeof *g->sorted);
    if (!g->sorted) return pl_errf(e, PL_ENOMEM, "out of memory reading %s", path);
    for (int i = 0; i < g->n; i++) g->sorted[i] = (gid){g->node[i].id, g->node[i].id_len, i};
    qsort(g->sorted, (size_t)g->n, sizeof *g->sorted, cmp_id);
    for (int i = 1; i < g->n; i++) {
        const gnode *a = &g->node[g->sorted[i - 1].idx], *b = &g->node[g->sorted[i].idx];
        if (a->id_len == b->id_len && memcmp(a->id, b->id, a->id_len) == 0)
            return pl_errf(e, PL_EINPUT, "%s:%d: node '%.*s' defined twice (first on line %d)", path,
                           b->line > a->line ? b->line : a->line, (int)a->id_len, a->id,
                           b->line > a->line ? a->line : b->line);
    }
    for (int k = 0; k < g->ne; k++) {
        gedge *ed = &g->edge[k];
        ed->ia = lookup(g, ed->a, ed->al);
        ed->ib = lookup(g, ed->b, ed->bl);
        if (ed->ia < 0 || ed->ib < 0)
            return pl_errf(e, PL_EINPUT, "%s:%d: edge names undefined node '%.*s'", path, ed->line,
                           ed->ia < 0 ? (int)ed->al : (int)ed->bl, ed->ia < 0 ? ed->a : ed->b);
    }
    if (g->ne > 1) qsort(g->edge, (size_t)g->ne, sizeof *g->edge, cmp_edge);
    int ne = 0;
    for (int k = 0; k < g->ne; k++)
        if (ne == 0 || g->edge[k].ia != g->edge[ne - 1].ia || g->edge[k].ib != g->edge[ne - 1].ib)
            g->edge[ne++] = g->edge[k];
    g->ne = ne;
    return PL_OK;
}

/* The graph's edges by node, and its topological order: node v's successors are
 * succ[sstart[v] .. sstart[v+1]), its predecessors pred[pstart[v] .. pstart[v+1]) with the
 * line of each edge in pline; order[p] is the node at position p, pos[v] the position of v. */
typedef struct adjacency {
    int *indeg, *sstart, *succ, *pstart, *pred, *pline, *order, *pos;
} adjacency;

/* Frees the arrays of a. */
static void adjacency_free(adjacency *a) {
    free(a->indeg);
    free(a->sstart);
    free(a->succ);
    free(a->pstart);
    free(a->pred);
    free(a->pline);
    free(a->order);
    free(a->pos);
}

/* Fills the successor and predecessor lists and in-degrees of a (zeroed) from g's resolved
 * edges; returns PL_OK or PL_ENOMEM (naming path). */
static int adjacency_build(const graph *g, adjacency *a, const char *path, pl_err *e) {
    int n = g->n, ne = g->ne;
    a->indeg = pl_calloc((size_t)n, sizeof *a->indeg);
    a->sstart = pl_calloc((size_t)n + 1, sizeof *a->sstart);
    a->pstart = pl_calloc((size_t)n + 1, sizeof *a->pstart);
    a->succ = pl_calloc((size_t)ne + 1, sizeof *a->succ);
    a->pred = pl_calloc((size_t)ne + 1, sizeof *a->pred);
    a->pline = pl_calloc((size_t)ne + 1, sizeof *a->pline);
    a->order = pl_calloc((size_t)n, sizeof *a->order);
    a->pos = pl_calloc((size_t)n, sizeof *a->pos);
    int *sfill = pl_calloc((size_t)n, sizeof *sfill), *pfill = pl_calloc((size_t)n, sizeof *pfill);
    int ok = a->indeg && a->sstart && a->pstart && a->succ && a->pred && a->pline && a->order && a->pos && sfill && pfill;
    for (int k = 0; ok && k < ne; k++) {
        a->sstart[g->edge[k].ia + 1]++;
        a->pstart[g->edge[k].ib + 1]++;
        a->indeg[g->edge[k].ib]++;
    }
    for (int i = 0; ok && i < n; i++) {
        a->sstart[i + 1] += a->sstart[i];
        a->pstart[i + 1] += a->pstart[i];
    }
    for (int k = 0; ok && k < ne; k++) {
        int x = g->edge[k].ia, y = g->edge[k].ib;
        a->succ[a->sstart[x] + sfill[x]++] = y;
        a->pred[a->pstart[y] + pfill[y]] = x;
        a->pline[a->pstart[y] + pfill[y]++] = g->edge[k].line;
    }
    free(sfill);
    free(pfill);
    return ok ? PL_OK : pl_errf(e, PL_ENOMEM, "out of memory reading %s", path);
}

/* Orders the nodes topologically into a->order and a->pos (Kahn's algorithm; among ready nodes
 * the smaller N of "nodeN", then the earlier line). Returns PL_OK, PL_EINPUT naming a cycle,
 * or PL_ENOMEM. */
static int topo_order(const graph *g, adjacency *a, const char *path, pl_err *e) {
    int *heap = pl_calloc((size_t)g->n, sizeof *heap);
    if (!heap) return pl_errf(e, PL_ENOMEM, "out of memory reading %s", path);
    int hn = 0, done = 0;
    for (int i = 0; i < g->n; i++)
        if (a->indeg[i] == 0) heap_push(g, heap, &hn, i);
    while (hn > 0) {
        int v = heap_pop(g, heap, &hn);
        a->pos[v] = done;
        a->order[done++] = v;
        for (int k = a->sstart[v]; k < a->sstart[v + 1]; k++)
            if (--a->indeg[a->succ[k]] == 0) heap_push(g, heap, &hn, a->succ[k]);
    }
    free(heap);
    if (done < g->n) {
        report_cycle(g, path, a->indeg, a->pstart, a->pred, a->pline, e);
        return PL_EINPUT;
    }
    return PL_OK;
}

/* The error of a cut whose crossing outputs add up past int64 (a node's line). */
#define COST_GRAPH_CUT_OVERFLOW "%s:%d: the outputs crossing a cut at this node add up to more bytes than 64 bits count"

/* Fills layer p of m from the node at position p: times (ms to s; a node with parameters
 * splits its backward evenly into I and W, one without has no W), sizes, and adds its output
 * to diff[] at every cut it crosses. Returns PL_OK, or PL_EINPUT / PL_ENOMEM with e. */
static int layer_from_node(const graph *g, const adjacency *a, int p, cost_model *m, int64_t *diff,
                           const char *path, pl_err *e) {
    const gnode *nd = &g->node[a->order[p]];
    cost_layer *l = &m->layer[p];
    if (cost_layer_set_name(m, p, nd->desc, nd->desc_len, e) != PL_OK) return PL_ENOMEM;
    if (!(l->id = cost_strndup(nd->id, nd->id_len))) return pl_errf(e, PL_ENOMEM, "out of memory reading %s", path);
    l->fwd_s = nd->fwd_ms * 1e-3;
    double bwd_s = nd->bwd_ms * 1e-3;
    l->bwd_in_s = nd->param_bytes > 0 ? bwd_s / 2 : bwd_s;
    l->bwd_w_s = nd->param_bytes > 0 ? bwd_s / 2 : 0;
    if (cost_bytes_from_double(nd->param_bytes, &l->param_bytes) != 0 ||
        cost_bytes_from_double(nd->act_bytes, &l->out_bytes) != 0)
        return pl_errf(e, PL_EINPUT, "%s:%d: size too large", path, nd->line);
    l->stash_bytes = l->out_bytes;
    l->src_line = nd->line;
    /* the output of position p crosses every cut k with p < k <= last consumer */
    int last = p;
    for (int k = a->sstart[a->order[p]]; k < a->sstart[a->order[p] + 1]; k++)
        if (a->pos[a->succ[k]] > last) last = a->pos[a->succ[k]];
    if (last > p && (__builtin_add_overflow(diff[p + 1], l->out_bytes, &diff[p + 1]) ||
                     __builtin_sub_overflow(diff[last + 1], l->out_bytes, &diff[last + 1])))
        return pl_errf(e, PL_EINPUT, COST_GRAPH_CUT_OVERFLOW,
                       path, nd->line);
    return PL_OK;
}

/* Builds the model of the ordered graph: a layer per node, the bytes crossing every cut (a
 * running sum of diff), the graph's name and path. Returns it, or NULL with e. */
static cost_model *model_from_order(const graph *g, const adjacency *a, const char *path, int microbatch_size,
                                    pl_err *e) {
    int n = g->n;
    int64_t *diff = pl_calloc((size_t)n + 2, sizeof *diff);
    if (!diff) {
        pl_errf(e, PL_ENOMEM, "out of memory reading %s", path);
        return NULL;
    }
    cost_model *m = cost_model_alloc(n, e);
    for (int p = 0; m && p < n; p++)
        if (layer_from_node(g, a, p, m, diff, path, e) != PL_OK) {
            cost_model_free(m);
            m = NULL;
        }
    if (m) {
        int64_t run = 0;
        m->cut_bytes[0] = 0;
        for (int k = 1; m && k < n; k++) {
            if (__builtin_add_overflow(run, diff[k], &run)) { /* the outputs crossing cut k, summed */
                pl_errf(e, PL_EINPUT, COST_GRAPH_CUT_OVERFLOW, path, g->node[a->order[k]].line);
                cost_model_free(m);
                m = NULL;
                break;
            }
            m->cut_bytes[k] = run;
        }
    }
    if (m) {
        m->cut_bytes[n] = m->layer[n - 1].out_bytes;
        m->microbatch_size = microbatch_size;
        m->dtype_bytes = COST_FP32_BYTES;
        snprintf(m->source, sizeof m->source, "graph");
        cost_model_name_from_path(m, path);
        if (!(m->src_path = cost_strndup(path, strlen(path)))) {
            pl_errf(e, PL_ENOMEM, "out of memory reading %s", path);
            cost_model_free(m);
            m = NULL;
        }
    }
    free(diff);
    return m;
}

/* Resolves edges, orders nodes topologically and builds the model. NULL and e on error. */
static cost_model *graph_build(graph *g, const char *path, int microbatch_size, pl_err *e) {
    if (resolve_edges(g, path, e) != PL_OK) return NULL;
    adjacency a = {0};
    cost_model *m = NULL;
    if (adjacency_build(g, &a, path, e) == PL_OK && topo_order(g, &a, path, e) == PL_OK)
        m = model_from_order(g, &a, path, microbatch_size, e);
    adjacency_free(&a);
    return m;
}

/* Reads a graph.txt profile; returns the model in topological order, or NULL with e. */
cost_model *cost_model_read_graph(const char *path, const char *text, size_t len,
                                  int microbatch_size, pl_err *e) {
    if (!path) path = "<graph>";
    if (microbatch_size < 1) {
        pl_errf(e, PL_EINPUT, "%s: microbatch size must be >= 1", path);
        return NULL;
    }
    graph g = {0};
    cost_lines c;
    cost_lines_init(&c, text, len);
    const char *line;
    size_t n;
    while (cost_next_line(&c, &line, &n)) {
        size_t tn = n;
        const char *t = cost_trim(line, &tn);
        if (tn == 0 || t[0] == '#') continue;
        int rc = (line[0] == '\t' || line[0] == ' ') ? read_edge(&g, path, c.lineno, t, tn, e)
                                                     : read_node(&g, path, c.lineno, t, tn, e);
        if (rc != PL_OK) {
            graph_free(&g);
            return NULL;
        }
    }
    if (g.n == 0) {
        graph_free(&g);
        pl_errf(e, PL_EINPUT, "%s: no nodes", path);
        return NULL;
    }
    cost_model *m = graph_build(&g, path, microbatch_size, e);
    graph_free(&g);
    return m;
}
