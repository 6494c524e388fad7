/* validate.c: checks a schedule (compute-only or lowered) and reports the first problem with
 * its rank, position, action and reason. */
#include "sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per (stage, mb), which action kinds were seen so far: one bit each (a second one of a kind is
 * an error the moment it is seen), so the eight fit one byte per (stage, mb). */
enum { C_F, C_B, C_I, C_W, C_SENDF, C_RECVF, C_SENDB, C_RECVB, C_N };

typedef struct vstate {
    const sched *s;
    int64_t M;
    uint8_t *seen; /* [stages x M] bit c: kind class c seen */
} vstate;

void sched_where(const sched *s, int rank, size_t pos, char *buf, size_t n) {
    char act[96] = "?";
    if (rank >= 0 && rank < s->ranks && pos < s->rank[rank].n)
        sched_action_format(&s->rank[rank].acts[pos], act, sizeof act);
    if (s->src_path && s->src_line)
        snprintf(buf, n, "%s:%d: rank %d, action %zu (%s): ", s->src_path, s->src_line[rank], rank, pos + 1, act);
    else if (s->src_path)
        snprintf(buf, n, "%s: rank %d, action %zu (%s): ", s->src_path, rank, pos + 1, act);
    else
        snprintf(buf, n, "rank %d, action %zu (%s): ", rank, pos + 1, act);
}

/* Fills e with "where: reason" for the action at (rank, pos) and returns PL_EINPUT. */
static int fail_at(const sched *s, int rank, size_t pos, pl_err *e, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail_at(const sched *s, int rank, size_t pos, pl_err *e, const char *fmt, ...) {
    char where[1024], why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    sched_where(s, rank, pos, where, sizeof where);
    pl_errf(e, PL_EINPUT, "%s%s", where, why);
    if (!s->src_path) pl_err_set_rank(e, rank); /* the message starts "rank R" */
    return PL_EINPUT;
}

/* Fills e with "path: reason" for a problem that has no single position. */
static int fail_global(const sched *s, pl_err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_global(const sched *s, pl_err *e, const char *fmt, ...) {
    char why[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (s->src_path) return pl_errf(e, PL_EINPUT, "%s: %s", s->src_path, why);
    return pl_errf(e, PL_EINPUT, "%s", why);
}

/* Fills e with "path:line: rank R: reason" for a problem of one rank's list as a whole (an
 * action it lacks): the line of the rank in the file, when the schedule came from one. */
static int fail_rank(const sched *s, int rank, pl_err *e, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_rank(const sched *s, int rank, pl_err *e, const char *fmt, ...) {
    char why[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (s->src_path && s->src_line && rank >= 0 && rank < s->ranks)
        return pl_errf(e, PL_EINPUT, "%s:%d: rank %d: %s", s->src_path, s->src_line[rank], rank, why);
    if (s->src_path) return pl_errf(e, PL_EINPUT, "%s: rank %d: %s", s->src_path, rank, why);
    pl_errf(e, PL_EINPUT, "rank %d: %s", rank, why);
    pl_err_set_rank(e, rank);
    return PL_EINPUT;
}

/* Returns the counter slot of (stage, mb). */
static size_t ix(const vstate *v, int stage, int mb) { return (size_t)stage * (size_t)v->M + (size_t)mb; }

/* Returns 1 when an action of class c of (stage, mb) slot k was seen. */
static int has(const vstate *v, int c, size_t k) { return v->seen[k] >> c & 1; }

/* Notes an action of class c of slot k. */
static void mark(vstate *v, int c, size_t k) { v->seen[k] |= (uint8_t)(1u << c); }

/* Checks that stage and mb of one half of an action are in range and on this rank. */
static int check_half(const vstate *v, int rank, size_t pos, int stage, int mb, int need_mb, pl_err *e) {
    const sched *s = v->s;
    if (stage < 0 || stage >= s->stages)
        return fail_at(s, rank, pos, e, "stage %d does not exist (the schedule has %d stages)", stage, s->stages);
    if (need_mb && (mb < 0 || mb >= v->M))
        return fail_at(s, rank, pos, e, "microbatch %d does not exist (the schedule has %lld microbatches)", mb, (long long)v->M);
    if (!need_mb && mb >= v->M)
        return fail_at(s, rank, pos, e, "microbatch %d does not exist (the schedule has %lld microbatches)", mb, (long long)v->M);
    if (s->stage_rank[stage] != rank)
        return fail_at(s, rank, pos, e, "stage %d is on two ranks: the placement puts it on rank %d, this action is on rank %d",
                       stage, s->stage_rank[stage], rank);
    return PL_OK;
}

/* Returns 1 when the neighbour stage (stage + dir) exists and lives on another rank. */
static int cross(const sched *s, int stage, int dir) {
    int n = stage + dir;
    return n >= 0 && n < s->stages && s->stage_rank[n] != s->stage_rank[stage];
}

/* Checks a forward of (stage, mb) at (rank, pos) against what came before it. */
static int check_forward(vstate *v, int rank, size_t pos, int stage, int mb, pl_err *e) {
    const sched *s = v->s;
    size_t k = ix(v, stage, mb);
    if (has(v, C_F, k)) return fail_at(s, rank, pos, e, "duplicate forward of stage %d microbatch %d", stage, mb);
    if (s->lowered && cross(s, stage, -1) && !has(v, C_RECVF, k))
        return fail_at(s, rank, pos, e, "the input of stage %d microbatch %d comes from rank %d, but no %dRECV_F%d precedes this forward",
                       stage, mb, s->stage_rank[stage - 1], stage, mb);
    mark(v, C_F, k);
    return PL_OK;
}

/* Checks a backward (B or I) of (stage, mb). */
static int check_backward(vstate *v, int rank, size_t pos, int kind, int stage, int mb, pl_err *e) {
    const sched *s = v->s;
    size_t k = ix(v, stage, mb);
    if (has(v, C_B, k) || has(v, C_I, k))
        return fail_at(s, rank, pos, e, "duplicate backward of stage %d microbatch %d", stage, mb);
    if (!has(v, C_F, k))
        return fail_at(s, rank, pos, e, "backward of stage %d microbatch %d comes before its forward", stage, mb);
    if (s->lowered && cross(s, stage, +1) && !has(v, C_RECVB, k))
        return fail_at(s, rank, pos, e, "the output gradient of stage %d microbatch %d comes from rank %d, but no %dRECV_B%d precedes this backward",
                       stage, mb, s->stage_rank[stage + 1], stage, mb);
    mark(v, kind == SCHED_B ? C_B : C_I, k);
    return PL_OK;
}

/* Checks one action at (rank, pos); returns PL_OK or an error. */
static int check_action(vstate *v, int rank, size_t pos, pl_err *e) {
    const sched *s = v->s;
    const sched_action *a = &s->rank[rank].acts[pos];
    int k = a->kind;
    if (k >= SCHED_NKINDS) return fail_at(s, rank, pos, e, "unknown action kind %d", k);
    int need_mb = k != SCHED_REDUCE_GRAD && k != SCHED_STEP && k != SCHED_UNSHARD && k != SCHED_RESHARD;
    int rc = check_half(v, rank, pos, a->stage, a->mb, need_mb, e);
    if (rc) return rc;
    if (sched_kind_is_comm((sched_kind)k) && !s->lowered)
        return fail_at(s, rank, pos, e, "communication action in a schedule marked compute-only (set 'lowered yes')");
    size_t i = need_mb ? ix(v, a->stage, a->mb) : 0;
    switch (k) {
    case SCHED_F: return check_forward(v, rank, pos, a->stage, a->mb, e);
    case SCHED_B:
    case SCHED_I: return check_backward(v, rank, pos, k, a->stage, a->mb, e);
    case SCHED_W:
        if (has(v, C_W, i)) return fail_at(s, rank, pos, e, "duplicate W of stage %d microbatch %d", a->stage, a->mb);
        if (has(v, C_B, i)) return fail_at(s, rank, pos, e, "W of stage %d microbatch %d after a full backward (B already computed the weight gradient)", a->stage, a->mb);
        if (!has(v, C_I, i)) return fail_at(s, rank, pos, e, "W before I: the weight gradient of stage %d microbatch %d needs its input-gradient backward first", a->stage, a->mb);
        mark(v, C_W, i);
        return PL_OK;
    case SCHED_OVERLAP:
        if (a->kind2 != SCHED_B && a->kind2 != SCHED_I) return fail_at(s, rank, pos, e, "the second half of an overlapped pair must be B or I");
        rc = check_half(v, rank, pos, a->stage2, a->mb2, 1, e);
        if (rc) return rc;
        rc = check_forward(v, rank, pos, a->stage, a->mb, e);
        return rc ? rc : check_backward(v, rank, pos, a->kind2, a->stage2, a->mb2, e);
    case SCHED_SEND_F:
        if (!cross(s, a->stage, +1)) return fail_at(s, rank, pos, e, "stage %d has no next stage on another rank to send to", a->stage);
        if (!has(v, C_F, i)) return fail_at(s, rank, pos, e, "sends the output of stage %d microbatch %d before its forward", a->stage, a->mb);
        if (has(v, C_SENDF, i)) return fail_at(s, rank, pos, e, "duplicate send");
        mark(v, C_SENDF, i);
        return PL_OK;
    case SCHED_SEND_B:
        if (!cross(s, a->stage, -1)) return fail_at(s, rank, pos, e, "stage %d has no previous stage on another rank to send to", a->stage);
        if (!has(v, C_B, i) && !has(v, C_I, i)) return fail_at(s, rank, pos, e, "sends the input gradient of stage %d microbatch %d before its backward", a->stage, a->mb);
        if (has(v, C_SENDB, i)) return fail_at(s, rank, pos, e, "duplicate send");
        mark(v, C_SENDB, i);
        return PL_OK;
    case SCHED_RECV_F:
        if (!cross(s, a->stage, -1)) return fail_at(s, rank, pos, e, "stage %d has no previous stage on another rank to receive from", a->stage);
        if (has(v, C_RECVF, i)) return fail_at(s, rank, pos, e, "duplicate receive");
        mark(v, C_RECVF, i);
        return PL_OK;
    case SCHED_RECV_B:
        if (!cross(s, a->stage, +1)) return fail_at(s, rank, pos, e, "stage %d has no next stage on another rank to receive from", a->stage);
        if (has(v, C_RECVB, i)) return fail_at(s, rank, pos, e, "duplicate receive");
        mark(v, C_RECVB, i);
        return PL_OK;
    default: return PL_OK;
    }
}

/* After the scan: every (stage, mb) has its F and its backward, and sends pair with receives. */
static int check_complete(const vstate *v, pl_err *e) {
    const sched *s = v->s;
    for (int st = 0; st < s->stages; st++)
        for (int64_t mb = 0; mb < v->M; mb++) {
            size_t k = ix(v, st, (int)mb);
            int r = s->stage_rank[st];
            if (!has(v, C_F, k))
                return fail_rank(s, r, e, "stage %d microbatch %lld is missing its forward (F)", st, (long long)mb);
            if (!has(v, C_B, k) && !has(v, C_I, k))
                return fail_rank(s, r, e, "stage %d microbatch %lld is missing its backward (B, or I and W)", st, (long long)mb);
            if (has(v, C_I, k) && !has(v, C_W, k))
                return fail_rank(s, r, e, "stage %d microbatch %lld has its input backward (I) but is missing its weight backward (W)", st, (long long)mb);
            if (!s->lowered) continue;
            if (cross(s, st, +1)) {
                if (!has(v, C_SENDF, k)) return fail_rank(s, r, e, "stage %d microbatch %lld: never sends the forward output (%dSEND_F%lld) that rank %d needs", st, (long long)mb, st, (long long)mb, s->stage_rank[st + 1]);
                if (!has(v, C_RECVF, ix(v, st + 1, (int)mb))) return fail_rank(s, s->stage_rank[st + 1], e, "no %dRECV_F%lld matches the send of stage %d microbatch %lld from rank %d", st + 1, (long long)mb, st, (long long)mb, r);
            }
            if (cross(s, st, -1)) {
                if (!has(v, C_SENDB, k)) return fail_rank(s, r, e, "stage %d microbatch %lld: never sends the input gradient (%dSEND_B%lld) that rank %d needs", st, (long long)mb, st, (long long)mb, s->stage_rank[st - 1]);
                if (!has(v, C_RECVB, ix(v, st - 1, (int)mb))) return fail_rank(s, s->stage_rank[st - 1], e, "no %dRECV_B%lld matches the gradient of stage %d microbatch %lld sent from rank %d", st - 1, (long long)mb, st, (long long)mb, r);
            }
        }
    return PL_OK;
}

/* ---------------------------------------------------------------- updates (REDUCE_GRAD, STEP) */

/* What the update check keeps per stage while it walks the stage's rank in order. */
typedef struct stage_upd {
    int64_t bwd;          /* backwards completed so far (B, W, an OVERLAP's B half) */
    int64_t bwd_at_step;  /* bwd at the stage's last STEP */
    size_t last_bwd;      /* position of the last of them on the rank */
    size_t last_step;     /* position of the last STEP */
    int32_t last_bwd_mb;  /* its microbatch */
    int32_t steps;        /* STEPs so far: the version the next STEP closes */
    int64_t bwd_at_reduce; /* bwd at the stage's last REDUCE_GRAD */
    size_t last_reduce;   /* position of that REDUCE_GRAD */
    size_t first_reduce;  /* position of the stage's first REDUCE_GRAD in its list (reduces) */
    uint8_t dirty;        /* a backward not yet followed by a REDUCE_GRAD */
    uint8_t reduces;      /* the stage has a REDUCE_GRAD somewhere */
    uint8_t named;        /* its first REDUCE_GRAD names a microbatch: one per backward (reduces) */
    uint8_t reduced;      /* a REDUCE_GRAD of the stage came so far */
} stage_upd;

/* The update check's state: the schedule, its totals and the per-stage table. */
typedef struct ustate {
    const sched *s;
    int64_t versions; /* STEPs each stage makes: one per iteration (flush, 2bw) or per backward (stash) */
    stage_upd *st;    /* [stages] */
} ustate;

/* Returns the rule of s's weight policy, for messages. */
static const char *upd_rule(const sched *s) {
    if (s->weights == SCHED_WEIGHTS_STASH)
        return "PipeDream's weight stashing steps each stage once after each of its backwards, naming its microbatch";
    if (s->weights == SCHED_WEIGHTS_2BW)
        return "2BW steps each stage once per iteration, after the stage's last backward of the iteration and "
               "before its first of the next";
    return "a flush schedule steps each stage once per iteration, after the stage's last backward of the iteration "
           "and before its first forward of the next";
}

/* Returns the rule of a stage's REDUCE_GRADs, for messages: named when they name microbatches
 * (one per backward, as lowering places PipeDream's), else one per weight version. */
static const char *red_rule(int named) {
    if (named)
        return "a stage whose REDUCE_GRADs name microbatches reduces the gradient of each of its backwards once, "
               "right after it (before its next backward), naming its microbatch: a replicated stage runs "
               "REDUCE_GRAD k on the replica of microbatch k";
    return "each REDUCE_GRAD of a stage reduces the gradients of the stage's backwards since its previous one; "
           "lowering puts one after the stage's last backward of each weight version, before its STEP";
}

/* Writes "microbatch MB" or, for mb < 0, "no microbatch" into buf (n bytes); returns buf. */
static const char *mb_text(int mb, char *buf, size_t n) {
    if (mb < 0) snprintf(buf, n, "no microbatch");
    else snprintf(buf, n, "microbatch %d", mb);
    return buf;
}

/* Writes the text of stage q's last backward (at q->last_bwd on rank) into buf; returns buf. */
static const char *last_bwd_text(const sched *s, int rank, const stage_upd *q, char *buf, size_t n) {
    sched_action_format(&s->rank[rank].acts[q->last_bwd], buf, n);
    return buf;
}

/* Returns the version (the STEP that must come before it) whose gradient a backward of mb
 * adds to: its iteration (flush, 2bw) or the stage's count of backwards so far (stash). */
static int64_t upd_version(const ustate *u, const stage_upd *q, int mb) {
    return u->s->weights == SCHED_WEIGHTS_STASH ? q->bwd : mb / u->s->microbatches;
}

/* Notes a backward completing stage's gradient of mb at (rank, pos): refused when the STEP of
 * an earlier version is still missing, or, where the stage's REDUCE_GRADs name microbatches,
 * the REDUCE_GRAD of its previous backward. */
static int upd_backward(ustate *u, int rank, size_t pos, int stage, int mb, pl_err *e) {
    const sched *s = u->s;
    stage_upd *q = &u->st[stage];
    int64_t v = upd_version(u, q, mb);
    char prev[96];
    if (v > q->steps && s->weights == SCHED_WEIGHTS_STASH)
        return fail_at(s, rank, pos, e, "backward of stage %d microbatch %d comes before the STEP of the stage's previous "
                       "backward (action %zu, %s); %s", stage, mb, q->last_bwd + 1,
                       last_bwd_text(s, rank, q, prev, sizeof prev), upd_rule(s));
    if (v > q->steps)
        return fail_at(s, rank, pos, e, "backward of stage %d microbatch %d (iteration %lld) comes before the stage's STEP "
                       "for iteration %d; %s", stage, mb, (long long)v, q->steps, upd_rule(s));
    if (q->reduces && q->named && q->dirty)
        return fail_at(s, rank, pos, e, "backward of stage %d microbatch %d comes before the REDUCE_GRAD of the stage's "
                       "previous backward (action %zu, %s); %s", stage, mb, q->last_bwd + 1,
                       last_bwd_text(s, rank, q, prev, sizeof prev), red_rule(1));
    q->bwd++;
    q->last_bwd = pos;
    q->last_bwd_mb = mb;
    q->dirty = 1;
    return PL_OK;
}

/* Checks a forward of (stage, mb) at (rank, pos) of a flush schedule: it uses the weights that
 * the STEP of the previous iteration wrote, so that STEP comes first. */
static int upd_forward(ustate *u, int rank, size_t pos, int stage, int mb, pl_err *e) {
    const sched *s = u->s;
    int64_t it = mb / s->microbatches;
    if (s->weights != SCHED_WEIGHTS_FLUSH || it <= u->st[stage].steps) return PL_OK;
    return fail_at(s, rank, pos, e, "forward of stage %d microbatch %d (iteration %lld) comes before the stage's STEP for "
                   "iteration %d, so it would run on the old weights; %s", stage, mb, (long long)it, u->st[stage].steps,
                   upd_rule(s));
}

/* Checks the STEP of stage at (rank, pos): not a second one for the same version, after every
 * backward of its version, after the REDUCE_GRAD of them (when the stage reduces), and in a
 * stash schedule naming the microbatch of the backward it follows (flush and 2bw: naming none,
 * so that every replica of a replicated stage steps). */
static int upd_step(ustate *u, int rank, size_t pos, int stage, int mb, pl_err *e) {
    const sched *s = u->s;
    stage_upd *q = &u->st[stage];
    int stash = s->weights == SCHED_WEIGHTS_STASH;
    char prev[96];
    if (q->steps > 0 && q->bwd == q->bwd_at_step) {
        if (stash)
            return fail_at(s, rank, pos, e, "second STEP of stage %d after its backward of microbatch %d (the first is "
                           "action %zu); %s", stage, q->last_bwd_mb, q->last_step + 1, upd_rule(s));
        return fail_at(s, rank, pos, e, "second STEP of stage %d for iteration %d (the first is action %zu, and no "
                       "backward of the stage comes between); %s", stage, q->steps - 1, q->last_step + 1, upd_rule(s));
    }
    if (!stash && mb >= 0)
        return fail_at(s, rank, pos, e, "STEP of stage %d names microbatch %d, but a STEP that applies the stage's "
                       "gradients of a whole iteration names none (a replicated stage runs a STEP naming microbatch k "
                       "on the replica of k alone); %s", stage, mb, upd_rule(s));
    int64_t need = stash ? (int64_t)q->steps + 1 : ((int64_t)q->steps + 1) * s->microbatches;
    if (q->bwd < need && stash)
        return fail_at(s, rank, pos, e, "STEP of stage %d comes before any backward of the stage; %s", stage, upd_rule(s));
    if (q->bwd < need)
        return fail_at(s, rank, pos, e, "STEP of stage %d for iteration %d comes before %lld of the stage's %d backwards "
                       "of that iteration (B, or W where the backward is split); %s", stage, q->steps,
                       (long long)(need - q->bwd), s->microbatches, upd_rule(s));
    if (stash && mb != q->last_bwd_mb)
        return fail_at(s, rank, pos, e, "STEP of stage %d names %s, but the backward it follows is microbatch %d "
                       "(action %zu); %s", stage, mb_text(mb, prev, sizeof prev), q->last_bwd_mb, q->last_bwd + 1,
                       upd_rule(s));
    if (q->reduces && q->dirty)
        return fail_at(s, rank, pos, e, "STEP of stage %d comes before the REDUCE_GRAD of the gradient of its backward at "
                       "action %zu (%s): a lowered schedule reduces a stage's gradients, then steps", stage,
                       q->last_bwd + 1, last_bwd_text(s, rank, q, prev, sizeof prev));
    q->steps++;
    q->bwd_at_step = q->bwd;
    q->last_step = pos;
    return PL_OK;
}

/* Checks the REDUCE_GRAD of stage (naming mb, or -1) at (rank, pos): it reduces the gradient of
 * at least one backward of the stage that no earlier REDUCE_GRAD of it reduced (not before any,
 * not a second with no backward between), names microbatches as the stage's first REDUCE_GRAD
 * does (q->reduces: a lowered list's own), and when it names one, names the backward it follows.
 * Several REDUCE_GRADs per weight version pass: a multi-iteration schedule read back from PyTorch
 * CSV (one iteration, one STEP) has one per original iteration before its STEP. */
static int upd_reduce(ustate *u, int rank, size_t pos, int stage, int mb, pl_err *e) {
    const sched *s = u->s;
    stage_upd *q = &u->st[stage];
    int each = mb >= 0 || s->weights == SCHED_WEIGHTS_STASH; /* one per backward */
    char first[96], name[32];
    if (q->reduces && (mb >= 0) != q->named) {
        sched_action_format(&s->rank[rank].acts[q->first_reduce], first, sizeof first);
        return fail_at(s, rank, pos, e, "REDUCE_GRAD of stage %d names %s, but the stage's first (action %zu, %s) %s: "
                       "a stage's REDUCE_GRADs name the microbatch of each backward (an all-reduce of the replica that "
                       "ran it) or none (an all-reduce of every replica); %s", stage, mb_text(mb, name, sizeof name),
                       q->first_reduce + 1, first, q->named ? "names one" : "names none", red_rule(q->named));
    }
    if (q->bwd == 0)
        return fail_at(s, rank, pos, e, "REDUCE_GRAD of stage %d comes before any backward of the stage, so it has no "
                       "gradient to reduce; %s", stage, red_rule(mb >= 0));
    if (q->reduced && q->bwd == q->bwd_at_reduce && each)
        return fail_at(s, rank, pos, e, "second REDUCE_GRAD of stage %d after its backward of microbatch %d (the first "
                       "is action %zu); %s", stage, q->last_bwd_mb, q->last_reduce + 1, red_rule(mb >= 0));
    if (q->reduced && q->bwd == q->bwd_at_reduce)
        return fail_at(s, rank, pos, e, "second REDUCE_GRAD of stage %d for iteration %d (the first is action %zu, and "
                       "no backward of the stage comes between); %s", stage, q->last_bwd_mb / s->microbatches,
                       q->last_reduce + 1, red_rule(0));
    if (mb >= 0 && mb != q->last_bwd_mb)
        return fail_at(s, rank, pos, e, "REDUCE_GRAD of stage %d names microbatch %d, but the backward it follows is "
                       "microbatch %d (action %zu); %s", stage, mb, q->last_bwd_mb, q->last_bwd + 1, red_rule(1));
    q->reduced = 1;
    q->bwd_at_reduce = q->bwd;
    q->last_reduce = pos;
    q->dirty = 0;
    return PL_OK;
}

/* Checks action a of the update walk, at (rank, pos) or, an action lowering would put after
 * the compute there, reported at it; returns PL_OK or the error. */
static int upd_act(ustate *u, int rank, size_t pos, const sched_action *a, pl_err *e) {
    int rc = PL_OK;
    switch (a->kind) {
    case SCHED_F: return upd_forward(u, rank, pos, a->stage, a->mb, e);
    case SCHED_B:
    case SCHED_W: return upd_backward(u, rank, pos, a->stage, a->mb, e);
    case SCHED_OVERLAP:
        rc = upd_forward(u, rank, pos, a->stage, a->mb, e);
        if (rc == PL_OK && a->kind2 == SCHED_B) rc = upd_backward(u, rank, pos, a->stage2, a->mb2, e);
        return rc;
    case SCHED_REDUCE_GRAD: return upd_reduce(u, rank, pos, a->stage, a->mb, e);
    case SCHED_STEP: return upd_step(u, rank, pos, a->stage, a->mb, e);
    default: return PL_OK;
    }
}

/* Checks the action at (rank, pos) of the update walk. */
static int upd_action(ustate *u, int rank, size_t pos, pl_err *e) {
    return upd_act(u, rank, pos, &u->s->rank[rank].acts[pos], e);
}

/* A compute-only schedule's updates where lowering will put them (sched_lower_after: a flush
 * schedule's STEPs after each rank's last compute of an iteration, 2BW's and stashing's after
 * the backward that closes a version): an order whose next iteration's forward (flush) or
 * backward (2BW) comes before them is refused here, at the compute that comes too early, rather
 * than when it is lowered or run. Returns PL_OK or the error. */
static int check_implied_updates(ustate *u, pl_err *e) {
    const sched *s = u->s;
    sched_marks m;
    int rc = sched_marks_find(s, &m, e);
    if (rc != PL_OK) return rc;
    sched_action *after = pl_calloc((size_t)s->stages + 4, sizeof *after);
    if (!after) rc = pl_errf(e, PL_ENOMEM, "out of memory validating the schedule");
    for (int r = 0; r < s->ranks && rc == PL_OK; r++)
        for (size_t p = 0; p < s->rank[r].n && rc == PL_OK; p++) {
            const sched_action *a = &s->rank[r].acts[p];
            if (a->kind == SCHED_REDUCE_GRAD) continue; /* lowering replaces the order's own */
            rc = upd_action(u, r, p, e);
            if (rc != PL_OK || !sched_kind_is_compute((sched_kind)a->kind)) continue;
            size_t n = sched_lower_after(s, &m, r, p, a, after);
            for (size_t j = 0; j < n && rc == PL_OK; j++) rc = upd_act(u, r, p, &after[j], e);
        }
    free(after);
    sched_marks_free(&m);
    return rc;
}

/* A compute-only schedule holds no STEP: lowering (and the simulator's run of the compute-only
 * form) adds each stage's own, so a STEP here would be a second one. */
static int check_no_step(const sched *s, pl_err *e) {
    for (int r = 0; r < s->ranks; r++)
        for (size_t p = 0; p < s->rank[r].n; p++)
            if (s->rank[r].acts[p].kind == SCHED_STEP)
                return fail_at(s, r, p, e, "STEP in a schedule marked compute-only: lowering adds each stage's optimizer "
                               "steps itself, so this one would be a second; remove it, or give the whole lowered form "
                               "('lowered yes')");
    return PL_OK;
}

/* The optimizer steps of a lowered schedule, per stage on its rank in order: the STEPs of
 * s->weights' rule (upd_rule) and no others, each after the REDUCE_GRAD of the gradients it
 * applies when the stage has REDUCE_GRADs; and the REDUCE_GRADs themselves (upd_reduce,
 * red_rule), none reducing nothing. Runs after check_complete (every backward is there once).
 * Returns PL_OK, PL_EINPUT or PL_ENOMEM. */
static int check_updates(const sched *s, int64_t M, pl_err *e) {
    if (!s->lowered && check_no_step(s, e) != PL_OK) return PL_EINPUT;
    ustate u = {s, s->weights == SCHED_WEIGHTS_STASH ? M : sched_iterations(s), NULL};
    u.st = pl_calloc((size_t)s->stages, sizeof *u.st);
    if (!u.st) return pl_errf(e, PL_ENOMEM, "out of memory validating the schedule");
    for (int r = 0; r < s->ranks && s->lowered; r++)
        for (size_t p = 0; p < s->rank[r].n; p++) {
            const sched_action *a = &s->rank[r].acts[p];
            stage_upd *q = &u.st[a->stage];
            if (a->kind != SCHED_REDUCE_GRAD || q->reduces) continue;
            q->reduces = 1;
            q->named = a->mb >= 0;
            q->first_reduce = p;
        }
    int rc = PL_OK;
    if (!s->lowered) rc = check_implied_updates(&u, e);
    for (int r = 0; r < s->ranks && rc == PL_OK && s->lowered; r++)
        for (size_t p = 0; p < s->rank[r].n && rc == PL_OK; p++) rc = upd_action(&u, r, p, e);
    for (int q = 0; q < s->stages && rc == PL_OK; q++) {
        const stage_upd *t = &u.st[q];
        if (t->steps >= u.versions) continue;
        if (s->weights == SCHED_WEIGHTS_STASH)
            rc = fail_at(s, s->stage_rank[q], t->last_bwd, e, "no STEP of stage %d follows this backward of microbatch %d; "
                         "%s", q, t->last_bwd_mb, upd_rule(s));
        else
            rc = fail_at(s, s->stage_rank[q], t->last_bwd, e, "no STEP of stage %d for iteration %d follows this, the "
                         "stage's last backward of the iteration; %s", q, t->steps, upd_rule(s));
    }
    free(u.st);
    return rc;
}

/* Orders (stage, microbatch) keys for qsort. */
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A schedule whose shape (stages x microbatches) is large but whose actions cannot cover it:
 * names the first (stage, microbatch) without a forward in time and memory proportional to the
 * actions, not to the shape (a file that declares a huge shape with a few actions must not
 * allocate the shape). Returns PL_EINPUT, or PL_OK when every F is present (not expected). */
static int first_missing_forward(const sched *s, int64_t M, size_t total, pl_err *e) {
    int64_t *key = pl_calloc(total ? total : 1, sizeof *key);
    if (!key) return pl_errf(e, PL_ENOMEM, "out of memory validating the schedule");
    size_t n = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t p = 0; p < s->rank[r].n; p++) {
            const sched_action *a = &s->rank[r].acts[p];
            if ((a->kind == SCHED_F || a->kind == SCHED_OVERLAP) && a->stage >= 0 && a->stage < s->stages &&
                a->mb >= 0 && a->mb < M)
                key[n++] = (int64_t)a->stage * M + a->mb;
        }
    qsort(key, n, sizeof *key, cmp_i64);
    int64_t want = 0;
    for (size_t k = 0; k < n && key[k] <= want; k++)
        if (key[k] == want) want++;
    free(key);
    if (want >= (int64_t)s->stages * M) return PL_OK;
    int st = (int)(want / M);
    return fail_rank(s, s->stage_rank[st], e, "stage %d microbatch %lld is missing its forward (F)", st,
                     (long long)(want % M));
}

/* The validation: every check, and the dry run (deadlock) when dry, handing it back in *dr
 * when dr is not NULL. Returns PL_OK or PL_EINPUT with the message. */
static int validate(const sched *s, sched_dryrun_result *dr, int dry, pl_err *e) {
    if (dr) memset(dr, 0, sizeof *dr);
    vstate v;
    memset(&v, 0, sizeof v);
    v.s = s;
    v.M = sched_total_microbatches(s);
    if ((double)s->stages * (double)v.M > (double)((int64_t)1 << 34))
        return fail_global(s, e, "schedule too large to validate: %d stages x %lld microbatches", s->stages, (long long)v.M);
    for (int r = 0; r < s->ranks; r++)
        if (s->rank[r].n > 0) break;
        else if (r == s->ranks - 1) return fail_global(s, e, "the schedule has no actions");
    /* every (stage, microbatch) needs a forward and a backward, and one action holds at most two */
    size_t total = sched_total_actions(s);
    if ((double)s->stages * (double)v.M > (double)(1 << 20) && (double)total < (double)s->stages * (double)v.M) {
        int frc = first_missing_forward(s, v.M, total, e);
        if (frc != PL_OK) return frc;
        return fail_global(s, e, "%zu actions cannot hold the forwards and backwards of %d stages x %lld microbatches",
                           total, s->stages, (long long)v.M);
    }
    int rc = PL_OK;
    v.seen = pl_calloc((size_t)s->stages * (size_t)v.M, 1);
    if (!v.seen) { rc = pl_errf(e, PL_ENOMEM, "out of memory validating the schedule"); goto out; }
    for (int r = 0; r < s->ranks && rc == PL_OK; r++)
        for (size_t p = 0; p < s->rank[r].n && rc == PL_OK; p++) rc = check_action(&v, r, p, e);
    if (rc == PL_OK) rc = check_complete(&v, e);
    if (rc == PL_OK) rc = check_updates(s, v.M, e);
    if (rc == PL_OK && dry) {
        sched_dryrun_result res;
        rc = sched_dryrun_core(s, NULL, dr ? dr : &res, dr != NULL, e);
        if (rc == PL_OK && !dr) sched_dryrun_free(&res, s->ranks);
        else if (rc == PL_EINPUT && s->src_path) pl_err_prefix(e, "%s: ", s->src_path);
    }
out:
    free(v.seen);
    return rc;
}

int sched_validate_core(const sched *s, sched_dryrun_result *dr, pl_err *e) { return validate(s, dr, 1, e); }

int sched_validate(const sched *s, pl_err *e) { return validate(s, NULL, 1, e); }

int sched_check_replica_reduces(const sched *s, const int *replicas, pl_err *e) {
    if (!replicas || !s->lowered) return PL_OK;
    size_t *first = pl_calloc((size_t)s->stages, sizeof *first); /* 1 + the stage's REDUCE_GRAD since its STEP */
    if (!first) return pl_errf(e, PL_ENOMEM, "out of memory");
    int rc = PL_OK;
    for (int r = 0; rc == PL_OK && r < s->ranks; r++)
        for (size_t i = 0; rc == PL_OK && i < s->rank[r].n; i++) {
            const sched_action *a = &s->rank[r].acts[i];
            if ((a->kind != SCHED_REDUCE_GRAD && a->kind != SCHED_STEP) || a->stage < 0 || a->stage >= s->stages ||
                replicas[a->stage] < 2)
                continue;
            size_t *f = &first[a->stage];
            if (a->kind == SCHED_STEP) *f = 0;
            else if (*f)
                rc = fail_at(s, r, i, e,
                             "stage %d has %d replicas and reduced its gradients at action %zu already, with no STEP "
                             "between: the replicas' all-reduce sums the whole gradient, so this one would count the "
                             "microbatches before action %zu %d times (a schedule of several iterations read back "
                             "from a PyTorch CSV has one REDUCE_GRAD per iteration and one STEP: write it with one "
                             "iteration, or run it without replicas)",
                             a->stage, replicas[a->stage], *f, *f, replicas[a->stage]);
            else *f = i + 1;
        }
    free(first);
    return rc;
}

int sched_check_actions(const sched *s, pl_err *e) { return validate(s, NULL, 0, e); }
