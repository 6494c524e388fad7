/* render.c: the unit-time timeline drawn in the terminal (one row per rank, one cell per
 * step, as in the pipeline figures of the GPipe, PipeDream and Megatron papers) and stats. */
#include "sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes the cell text of compute action a into buf: "F3", or "2F3" when ranks hold several
 * stages (PyTorch notation). For an overlapped pair, half 0 is the forward and half 1 the
 * backward, each marked with '*'. Returns the length. */
static int cell_text(const sched *s, const sched_action *a, int half, char *buf, size_t n) {
    int with_stage = s->stages != s->ranks;
    int kind = a->kind, stage = a->stage, mb = a->mb;
    if (a->kind == SCHED_OVERLAP && half == 1) {
        kind = a->kind2;
        stage = a->stage2;
        mb = a->mb2;
    } else if (a->kind == SCHED_OVERLAP) {
        kind = SCHED_F;
    }
    const char *k = sched_kind_name((sched_kind)kind);
    const char *mark = a->kind == SCHED_OVERLAP ? "*" : "";
    if (with_stage) return snprintf(buf, n, "%d%s%d%s", stage, k, mb, mark);
    return snprintf(buf, n, "%s%d%s", k, mb, mark);
}

/* Returns the ANSI colour sequence for a kind (background colour plus black text). */
static const char *color_of(int kind, int chunk) {
    static const char *const f[2] = {"\033[30;44m", "\033[30;104m"};
    static const char *const b[2] = {"\033[30;42m", "\033[30;102m"};
    static const char *const i[2] = {"\033[30;43m", "\033[30;103m"};
    static const char *const w[2] = {"\033[30;45m", "\033[30;105m"};
    int c = chunk & 1;
    switch (kind) {
    case SCHED_F: return f[c];
    case SCHED_B: return b[c];
    case SCHED_I: return i[c];
    case SCHED_W: return w[c];
    default: return "\033[30;46m";
    }
}

void sched_render_timeline(const sched *s, const sched_dryrun_result *r, int color, pl_buf *b) {
    int64_t steps = r->steps;
    int width = 1;
    char t[96];
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++)
            if (sched_kind_is_compute((sched_kind)s->rank[q].acts[i].kind)) {
                for (int h = 0; h < 2; h++) {
                    int l = cell_text(s, &s->rank[q].acts[i], h, t, sizeof t);
                    if (l > width) width = l;
                }
            }
    int label = snprintf(t, sizeof t, "rank %d", s->ranks - 1);
    /* ruler: a step number every 5 cells */
    pl_buf_printf(b, "%*s  ", label, "step");
    for (int64_t k = 0; k < steps; k++) {
        if (k % 5 == 0) {
            int l = snprintf(t, sizeof t, "%lld", (long long)k);
            pl_buf_puts(b, t);
            for (int p = l; p < width + 1; p++) pl_buf_putc(b, ' ');
        } else {
            for (int p = 0; p < width + 1; p++) pl_buf_putc(b, ' ');
        }
    }
    pl_buf_putc(b, '\n');
    for (int q = 0; q < s->ranks; q++) {
        pl_buf_printf(b, "%*s |", label, (snprintf(t, sizeof t, "rank %d", q), t));
        int64_t now = 0;
        const sched_rank *rk = &s->rank[q];
        for (size_t i = 0; i < rk->n; i++) {
            const sched_action *a = &rk->acts[i];
            if (!sched_kind_is_compute((sched_kind)a->kind)) continue;
            const sched_slot *sl = &r->slot[q][i];
            for (; now < sl->start; now++) {
                for (int p = 0; p < width; p++) pl_buf_putc(b, '.');
                pl_buf_putc(b, '|');
            }
            int chunk = s->chunks > 1 ? a->stage / s->ranks : 0;
            /* an overlapped pair shows its forward for the first step, then its backward */
            int64_t dur = sl->end - sl->start;
            int64_t f_end = a->kind == SCHED_OVERLAP ? sl->start + (dur > 1 ? dur / 2 : 1) : sl->end;
            for (; now < sl->end; now++) {
                int half = now >= f_end;
                int l = cell_text(s, a, half, t, sizeof t);
                int ck = a->kind == SCHED_OVERLAP ? (half ? a->kind2 : SCHED_F) : a->kind;
                if (color) pl_buf_puts(b, color_of(ck, chunk));
                pl_buf_puts(b, t);
                for (int p = l; p < width; p++) pl_buf_putc(b, ' ');
                if (color) pl_buf_puts(b, "\033[0m");
                pl_buf_putc(b, '|');
            }
        }
        for (; now < steps; now++) {
            for (int p = 0; p < width; p++) pl_buf_putc(b, '.');
            pl_buf_putc(b, '|');
        }
        pl_buf_putc(b, '\n');
    }
}

void sched_render_stats(const sched *s, const sched_dryrun_result *r, pl_buf *b) {
    pl_buf_printf(b, "kind            %s\n", s->kind);
    pl_buf_printf(b, "ranks           %d\n", s->ranks);
    pl_buf_printf(b, "stages          %d (placement %s)\n", s->stages, sched_placement_name(s->placement));
    pl_buf_printf(b, "microbatches    %d x %d iteration%s\n", s->microbatches, s->iterations,
                  s->iterations == 1 ? "" : "s");
    pl_buf_printf(b, "policies        weights %s, recompute %s%s\n", sched_weights_name(s->weights),
                  sched_recompute_name(s->recompute), s->lowered ? ", lowered" : "");
    pl_buf_printf(b, "actions         %zu\n", sched_total_actions(s));
    pl_buf_printf(b, "unit-time steps %lld\n", (long long)r->steps);
    pl_buf_printf(b, "bubble fraction %.4f\n", r->bubble_fraction);
    for (int q = 0, shown = 0; q < s->ranks && !shown; q++)
        for (size_t i = 0; i < s->rank[q].n && !shown; i++)
            if (s->rank[q].acts[i].kind == SCHED_OVERLAP) {
                pl_buf_puts(b, "legend          * = half of an overlapped forward/backward pair\n");
                shown = 1;
            }
    pl_buf_puts(b, "per rank        busy steps / bubble / most microbatches in flight\n");
    for (int q = 0; q < s->ranks; q++) {
        double bub = r->steps ? 1.0 - (double)r->busy[q] / (double)r->steps : 0.0;
        pl_buf_printf(b, "  rank %-3d      %lld / %.4f / %d\n", q, (long long)r->busy[q], bub, r->max_inflight[q]);
    }
}
