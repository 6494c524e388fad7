/* sched_core.c: the schedule IR itself: actions, their text form, schedules and placements. */
#include "sched_int.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const char *const kind_names[SCHED_NKINDS] = {
    "F", "B", "I", "W", "OVERLAP_F_B", "SEND_F", "RECV_F", "SEND_B", "RECV_B",
    "REDUCE_GRAD", "STEP", "UNSHARD", "RESHARD",
};

/* Returns the canonical PyTorch-style name of a kind, "?" when out of range. */
const char *sched_kind_name(sched_kind k) {
    return (unsigned)k < SCHED_NKINDS ? kind_names[k] : "?";
}

/* pl_sched.h. */
int sched_kind_is_busy(sched_kind k) { return sched_kind_is_compute(k) || k == SCHED_STEP; }

/* Returns an overlapped F + backward compound action. */
sched_action sched_overlap(int f_stage, int f_mb, sched_kind bkind, int b_stage, int b_mb) {
    sched_action a = {f_stage, f_mb, b_stage, b_mb, SCHED_OVERLAP, (uint8_t)bkind, 0};
    return a;
}

/* Formats one plain (non-compound) action; returns snprintf's count. */
static int format_plain(int stage, sched_kind k, int mb, char *buf, size_t n) {
    if (mb < 0) return snprintf(buf, n, "%d%s", stage, sched_kind_name(k));
    return snprintf(buf, n, "%d%s%d", stage, sched_kind_name(k), mb);
}

/* pl_sched.h. Older PyTorch letters: I is written B, a full backward BW; they have no overlap. */
int sched_action_format_letters(const sched_action *a, sched_letters letters, char *buf, size_t n) {
    if (letters == SCHED_LETTERS_LEGACY) {
        if (a->kind == SCHED_OVERLAP) return -1;
        const char *w = a->kind == SCHED_I ? "B" : a->kind == SCHED_B ? "BW" : NULL;
        if (w) return snprintf(buf, n, "%d%s%d", a->stage, w, a->mb);
    }
    return sched_action_format(a, buf, n);
}

/* Returns the length of the text form of a (written into buf when it fits). */
int sched_action_format(const sched_action *a, char *buf, size_t n) {
    if (a->kind == SCHED_OVERLAP) {
        char f[48], b[48];
        format_plain(a->stage, SCHED_F, a->mb, f, sizeof f);
        format_plain(a->stage2, (sched_kind)a->kind2, a->mb2, b, sizeof b);
        return snprintf(buf, n, "(%s;%s)OVERLAP_F_B", f, b);
    }
    return format_plain(a->stage, (sched_kind)a->kind, a->mb, buf, n);
}

/* Kind words in match order: longer words first so "SEND_F" is not read as "S...". */
typedef struct kind_word {
    const char *word;
    int cur, legacy; /* kind under current and legacy letters; -1 = not valid there */
    int needs_mb;    /* 1 = microbatch required, 0 = forbidden, 2 = optional */
} kind_word;

static const kind_word kind_words[] = {
    {"REDUCE_GRAD", SCHED_REDUCE_GRAD, SCHED_REDUCE_GRAD, 2},
    {"UNSHARD", SCHED_UNSHARD, SCHED_UNSHARD, 0},
    {"RESHARD", SCHED_RESHARD, SCHED_RESHARD, 0},
    {"SEND_F", SCHED_SEND_F, SCHED_SEND_F, 1},
    {"RECV_F", SCHED_RECV_F, SCHED_RECV_F, 1},
    {"SEND_B", SCHED_SEND_B, SCHED_SEND_B, 1},
    {"RECV_B", SCHED_RECV_B, SCHED_RECV_B, 1},
    {"STEP", SCHED_STEP, SCHED_STEP, 2},
    {"BW", -1, SCHED_B, 1},
    {"F", SCHED_F, SCHED_F, 1},
    {"B", SCHED_B, SCHED_I, 1},
    {"I", SCHED_I, -1, 1},
    {"W", SCHED_W, SCHED_W, 1},
};

/* Parses a non-negative decimal integer at text[*pos] (at most INT32_MAX); returns 0 on
 * success and advances *pos, -1 if no digit, -2 if too large. */
static int parse_uint(const char *t, size_t len, size_t *pos, int32_t *out) {
    size_t p = *pos;
    if (p >= len || !isdigit((unsigned char)t[p])) return -1;
    long long v = 0;
    while (p < len && isdigit((unsigned char)t[p])) {
        v = v * 10 + (t[p] - '0');
        if (v > INT32_MAX) return -2;
        p++;
    }
    *out = (int32_t)v;
    *pos = p;
    return 0;
}

/* Parses "<stage><KIND>[<mb>]" from t[*pos..end); returns PL_OK and advances *pos, or an error
 * with *err_col set. */
static int parse_plain(const char *t, size_t end, size_t *pos, sched_letters letters,
                       int32_t *stage, int *kind, int32_t *mb, size_t *err_col, pl_err *e) {
    size_t p = *pos;
    int rc = parse_uint(t, end, &p, stage);
    if (rc == -2) { *err_col = *pos; return pl_errf(e, PL_EINPUT, "stage number is too large"); }
    if (rc) { *err_col = p; return pl_errf(e, PL_EINPUT, "expected a stage number"); }
    const kind_word *kw = NULL;
    for (size_t i = 0; i < sizeof kind_words / sizeof kind_words[0]; i++) {
        size_t wl = strlen(kind_words[i].word);
        if (p + wl <= end && memcmp(t + p, kind_words[i].word, wl) == 0) {
            int k = letters == SCHED_LETTERS_LEGACY ? kind_words[i].legacy : kind_words[i].cur;
            if (k < 0) {
                *err_col = p;
                return pl_errf(e, PL_EINPUT, "action kind '%s' is not valid with the %s letters%s",
                               kind_words[i].word, letters == SCHED_LETTERS_LEGACY ? "legacy" : "current",
                               letters == SCHED_LETTERS_LEGACY ? "" : " (older PyTorch files: use --legacy-letters)");
            }
            kw = &kind_words[i];
            *kind = k;
            p += wl;
            break;
        }
    }
    if (!kw) { *err_col = p; return pl_errf(e, PL_EINPUT, "unknown action kind"); }
    *mb = -1;
    if (p < end && isdigit((unsigned char)t[p])) {
        if (kw->needs_mb == 0) { *err_col = p; return pl_errf(e, PL_EINPUT, "%s takes no microbatch", kw->word); }
        size_t q = p;
        rc = parse_uint(t, end, &p, mb);
        if (rc) { *err_col = q; return pl_errf(e, PL_EINPUT, "microbatch number is too large"); }
    } else if (kw->needs_mb == 1) {
        *err_col = p;
        return pl_errf(e, PL_EINPUT, "%s needs a microbatch number", kw->word);
    }
    *pos = p;
    return PL_OK;
}

/* Parses one action occupying all of text[0..len). */
int sched_action_parse(const char *text, size_t len, sched_letters letters, sched_action *out,
                       size_t *err_col, pl_err *e) {
    size_t col = 0, pos = 0;
    if (!err_col) err_col = &col;
    *err_col = 0;
    if (len == 0) return pl_errf(e, PL_EINPUT, "empty action");
    if (text[0] == '(') {
        /* (<stage>F<mb>;<stage>B<mb>)OVERLAP_F_B */
        int32_t fs, fm, bs, bm;
        int fk, bk;
        pos = 1;
        int rc = parse_plain(text, len, &pos, letters, &fs, &fk, &fm, err_col, e);
        if (rc) return rc;
        if (fk != SCHED_F) { *err_col = 1; return pl_errf(e, PL_EINPUT, "the first half of an overlapped pair must be a forward"); }
        if (pos >= len || text[pos] != ';') { *err_col = pos; return pl_errf(e, PL_EINPUT, "expected ';' between the overlapped actions"); }
        size_t bstart = ++pos;
        rc = parse_plain(text, len, &pos, letters, &bs, &bk, &bm, err_col, e);
        if (rc) return rc;
        if (bk != SCHED_B && bk != SCHED_I) { *err_col = bstart; return pl_errf(e, PL_EINPUT, "the second half of an overlapped pair must be a backward (B or I)"); }
        static const char tail[] = ")OVERLAP_F_B";
        size_t tl = sizeof tail - 1;
        if (len - pos != tl || memcmp(text + pos, tail, tl) != 0) {
            *err_col = pos;
            return pl_errf(e, PL_EINPUT, "expected ')OVERLAP_F_B' to close the overlapped pair");
        }
        *out = sched_overlap(fs, fm, (sched_kind)bk, bs, bm);
        return PL_OK;
    }
    sched_action a;
    int32_t st, mb;
    int k;
    int rc = parse_plain(text, len, &pos, letters, &st, &k, &mb, err_col, e);
    if (rc) return rc;
    if (pos != len) { *err_col = pos; return pl_errf(e, PL_EINPUT, "unexpected text after the action"); }
    a = sched_act((sched_kind)k, st, mb);
    *out = a;
    return PL_OK;
}

/* ---------------------------------------------------------------- schedules */

static const char *const placement_names[] = {"loop", "v", "explicit"};
static const char *const weights_names[] = {"flush", "stash", "2bw"};
static const char *const recompute_names[] = {"none", "full"};

const char *sched_placement_name(sched_placement p) { return (unsigned)p < 3 ? placement_names[p] : "?"; }
const char *sched_weights_name(sched_weights w) { return (unsigned)w < 3 ? weights_names[w] : "?"; }
const char *sched_recompute_name(sched_recompute r) { return (unsigned)r < 2 ? recompute_names[r] : "?"; }

/* Returns the index of s in names[0..n), or -1. */
static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (s && strcmp(names[i], s) == 0) return i;
    return -1;
}

int sched_placement_parse(const char *s) { return name_index(placement_names, 3, s); }
int sched_weights_parse(const char *s) { return name_index(weights_names, 3, s); }
int sched_recompute_parse(const char *s) { return name_index(recompute_names, 2, s); }

/* Fills stage_rank for LOOP (s mod p) and V (zig-zag 0..p-1, p-1..0, ...). */
int sched_place(sched_placement pl, int ranks, int stages, int *stage_rank, pl_err *e) {
    if (ranks < 1 || stages < 1) return pl_errf(e, PL_EINPUT, "ranks and stages must be positive");
    for (int s = 0; s < stages; s++) {
        if (pl == SCHED_PLACE_LOOP) {
            stage_rank[s] = s % ranks;
        } else if (pl == SCHED_PLACE_V) {
            int round = s / ranks, off = s % ranks;
            stage_rank[s] = (round % 2 == 0) ? off : ranks - 1 - off;
        } else {
            return pl_errf(e, PL_EINPUT, "explicit placement needs a stage-to-rank list");
        }
    }
    return PL_OK;
}

/* Allocates an empty schedule; returns NULL with e filled on bad shapes or no memory. */
sched *sched_new(int ranks, int stages, int microbatches, sched_placement pl,
                 const int *stage_rank, pl_err *e) {
    if (ranks < 1 || ranks > SCHED_MAX_RANKS) {
        pl_errf(e, PL_EINPUT, "ranks must be between 1 and %d (got %d)", SCHED_MAX_RANKS, ranks);
        return NULL;
    }
    if (stages < 1 || stages > SCHED_MAX_STAGES) {
        pl_errf(e, PL_EINPUT, "stages must be between 1 and %d (got %d)", SCHED_MAX_STAGES, stages);
        return NULL;
    }
    if (microbatches < 1 || microbatches > SCHED_MAX_MICROBATCHES) {
        pl_errf(e, PL_EINPUT, "microbatches must be between 1 and %d (got %d)", SCHED_MAX_MICROBATCHES, microbatches);
        return NULL;
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) { pl_errf(e, PL_ENOMEM, "out of memory"); return NULL; }
    s->ranks = ranks;
    s->stages = stages;
    s->microbatches = microbatches;
    s->iterations = 1;
    s->chunks = stages % ranks == 0 ? stages / ranks : 1;
    s->placement = pl;
    snprintf(s->kind, sizeof s->kind, "custom");
    s->stage_rank = pl_calloc((size_t)stages, sizeof *s->stage_rank);
    s->rank = pl_calloc((size_t)ranks, sizeof *s->rank);
    if (!s->stage_rank || !s->rank) {
        sched_free(s);
        pl_errf(e, PL_ENOMEM, "out of memory allocating a schedule of %d ranks", ranks);
        return NULL;
    }
    if (pl == SCHED_PLACE_EXPLICIT) {
        if (!stage_rank) { sched_free(s); pl_errf(e, PL_EINPUT, "explicit placement needs a stage-to-rank list"); return NULL; }
        for (int i = 0; i < stages; i++) {
            if (stage_rank[i] < 0 || stage_rank[i] >= ranks) {
                pl_errf(e, PL_EINPUT, "placement puts stage %d on rank %d, but there are %d ranks", i, stage_rank[i], ranks);
                sched_free(s);
                return NULL;
            }
            s->stage_rank[i] = stage_rank[i];
        }
    } else if (sched_place(pl, ranks, stages, s->stage_rank, e) != PL_OK) {
        sched_free(s);
        return NULL;
    }
    return s;
}

void *sched_big_calloc(size_t n, int *mapped) {
    *mapped = 0;
    if (n < SCHED_MAP_MIN_BYTES) return calloc(n ? n : 1, 1);
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *mapped = 1;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

void sched_big_free(void *p, size_t n, int mapped) {
    if (p && mapped) munmap(p, n);
    else free(p);
}

/* Returns 1 when list a lies in s's block (freed with it, not alone). */
static int in_block(const sched *s, const sched_action *a) {
    return s->block && a >= s->block && (const char *)a < (const char *)s->block + s->block_bytes;
}

void sched_free(sched *s) {
    if (!s) return;
    if (s->rank)
        for (int r = 0; r < s->ranks; r++)
            if (!in_block(s, s->rank[r].acts)) free(s->rank[r].acts);
    sched_big_free(s->block, s->block_bytes, s->block_mapped);
    free(s->rank);
    free(s->stage_rank);
    free(s->src_path);
    free(s->src_line);
    free(s);
}

/* pl_sched.h. Appends a to rank's list, growing it by 1.5x; returns PL_OK or PL_ENOMEM. */
int sched_push_grow(sched *s, int rank, sched_action a) {
    if (rank < 0 || rank >= s->ranks) return PL_EINTERNAL;
    sched_rank *rk = &s->rank[rank];
    if (rk->n == rk->cap) {
        if (sched_total_actions(s) >= SCHED_MAX_ACTIONS) return PL_ENOMEM;
        size_t cap = rk->cap < 16 ? 16 : rk->cap + rk->cap / 2;
        int moved = in_block(s, rk->acts); /* a list in the block moves out to grow */
        sched_action *na = pl_reallocarray(moved ? NULL : rk->acts, cap, sizeof *na);
        if (!na) return PL_ENOMEM;
        if (moved) memcpy(na, rk->acts, rk->n * sizeof *na);
        rk->acts = na;
        rk->cap = cap;
    }
    rk->acts[rk->n++] = a;
    return PL_OK;
}

int sched_gen_reserve(sched *s, const sched_gen_params *g, int per_cell) {
    size_t per_rank = (size_t)(sched_gen_actions(g, per_cell) / g->p);
    if (!s->block && per_rank > 0 && sched_total_actions(s) == 0) { /* one table, rank after rank */
        s->block_bytes = per_rank * (size_t)s->ranks * sizeof *s->block;
        s->block = sched_big_calloc(s->block_bytes, &s->block_mapped);
        if (!s->block) return PL_ENOMEM;
        for (int r = 0; r < s->ranks; r++) {
            free(s->rank[r].acts);
            s->rank[r].acts = s->block + (size_t)r * per_rank;
            s->rank[r].cap = per_rank;
        }
        return PL_OK;
    }
    for (int r = 0; r < s->ranks; r++) {
        sched_rank *rk = &s->rank[r];
        if (per_rank <= rk->cap) continue;
        sched_action *na = pl_reallocarray(rk->acts, per_rank, sizeof *na);
        if (!na) return PL_ENOMEM;
        rk->acts = na;
        rk->cap = per_rank;
    }
    return PL_OK;
}

size_t sched_total_actions(const sched *s) {
    size_t n = 0;
    for (int r = 0; r < s->ranks; r++) n += s->rank[r].n;
    return n;
}

int sched_iterations(const sched *s) { return s->iterations > 0 ? s->iterations : 1; }

int64_t sched_total_microbatches(const sched *s) { return (int64_t)s->microbatches * sched_iterations(s); }

int sched_stage_steps_each_backward(const sched *s, int q) {
    int64_t steps = 0, bwd = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            steps += a->kind == SCHED_STEP && a->stage == q;
            bwd += (a->kind == SCHED_B || a->kind == SCHED_W) && a->stage == q;
            bwd += a->kind == SCHED_OVERLAP && a->kind2 == SCHED_B && a->stage2 == q;
        }
    return steps > 0 && steps == bwd;
}

int sched_replica_of(const sched_action *a, int n) {
    if (n <= 1) return 0;
    if (a->mb < 0) return a->kind == SCHED_REDUCE_GRAD || a->kind == SCHED_STEP ? -n : 0;
    return (int)(a->mb % n);
}

/* sched_int.h. The fields sched_new does not set from its arguments. */
void sched_copy_policies(sched *dst, const sched *src) {
    memcpy(dst->kind, src->kind, sizeof dst->kind);
    dst->iterations = src->iterations;
    dst->chunks = src->chunks;
    dst->placement = src->placement;
    dst->weights = src->weights;
    dst->recompute = src->recompute;
}

/* Returns a deep copy, NULL when out of memory. */
sched *sched_clone(const sched *s) {
    sched *c = sched_new(s->ranks, s->stages, s->microbatches, SCHED_PLACE_EXPLICIT, s->stage_rank, NULL);
    if (!c) return NULL;
    sched_copy_policies(c, s);
    c->lowered = s->lowered;
    for (int r = 0; r < s->ranks; r++) {
        size_t n = s->rank[r].n;
        if (n) {
            c->rank[r].acts = pl_reallocarray(NULL, n, sizeof(sched_action));
            if (!c->rank[r].acts) { sched_free(c); return NULL; }
            memcpy(c->rank[r].acts, s->rank[r].acts, n * sizeof(sched_action));
        }
        c->rank[r].n = c->rank[r].cap = n;
    }
    if (s->src_path && sched_set_source(c, s->src_path, s->src_line) != PL_OK) { sched_free(c); return NULL; }
    return c;
}

int sched_set_source(sched *s, const char *path, const int *rank_lines) {
    free(s->src_path);
    free(s->src_line);
    s->src_path = NULL;
    s->src_line = NULL;
    if (!path) return PL_OK;
    s->src_path = strdup(path);
    if (!s->src_path) return PL_ENOMEM;
    if (rank_lines) {
        s->src_line = pl_calloc((size_t)s->ranks, sizeof *s->src_line);
        if (!s->src_line) return PL_ENOMEM;
        memcpy(s->src_line, rank_lines, (size_t)s->ranks * sizeof *s->src_line);
    }
    return PL_OK;
}

/* Returns 1 when a and b have the same shape, policies and actions (kind names and sources
 * are not compared). */
int sched_equal(const sched *a, const sched *b) {
    if (a->ranks != b->ranks || a->stages != b->stages || a->microbatches != b->microbatches ||
        a->iterations != b->iterations || a->placement != b->placement || a->weights != b->weights ||
        a->recompute != b->recompute || a->lowered != b->lowered)
        return 0;
    if (memcmp(a->stage_rank, b->stage_rank, (size_t)a->stages * sizeof(int)) != 0) return 0;
    for (int r = 0; r < a->ranks; r++) {
        if (a->rank[r].n != b->rank[r].n) return 0;
        for (size_t i = 0; i < a->rank[r].n; i++) {
            const sched_action *x = &a->rank[r].acts[i], *y = &b->rank[r].acts[i];
            if (x->kind != y->kind || x->stage != y->stage || x->mb != y->mb) return 0;
            if (x->kind == SCHED_OVERLAP && (x->kind2 != y->kind2 || x->stage2 != y->stage2 || x->mb2 != y->mb2))
                return 0;
        }
    }
    return 1;
}

/* Returns the greatest common divisor of a and b (>= 1 each). */
static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int sched_async_cycle(int stages, int microbatches, const int *replicas) {
    if (stages < 1 || microbatches < 1) return 1;
    int64_t P = stages;
    for (int q = 0; replicas && q < stages && P <= SCHED_ASYNC_CYCLE_MAX; q++)
        if (replicas[q] > 1) P = P / gcd64(P, replicas[q]) * replicas[q];
    int64_t c = P / gcd64(P, microbatches);
    return c > SCHED_ASYNC_CYCLE_MAX ? SCHED_ASYNC_CYCLE_MAX : (int)c;
}

int sched_async_span(int cycle) {
    int64_t c = cycle > 1 ? cycle : 1, span = 2 * c > c + 2 ? 2 * c : c + 2;
    return span > INT32_MAX ? INT32_MAX : (int)span;
}

int64_t sched_async_room(int microbatches) {
    int64_t m = microbatches > 0 ? microbatches : 1, shortest = 2 + sched_async_span(1); /* fill, drain, period 1 */
    return shortest * m > SCHED_ASYNC_DEFAULT_MBS ? shortest * m : SCHED_ASYNC_DEFAULT_MBS;
}

int sched_async_iterations(int stages, int microbatches, const int *replicas) {
    if (stages < 1 || microbatches < 1) return 4;
    int64_t workers = 0;
    for (int q = 0; q < stages; q++) workers += replicas && replicas[q] > 1 ? replicas[q] : 1;
    /* the drain: the first stage's warm-up of workers - 1 microbatches, over m an iteration */
    int64_t drain = (workers - 1 + microbatches - 1) / microbatches;
    int64_t n = (int64_t)sched_async_span(sched_async_cycle(stages, microbatches, replicas)) + 1 + (drain > 1 ? drain : 1);
    if (n <= 4 || n * microbatches > sched_async_room(microbatches)) return 4;
    return (int)n;
}
