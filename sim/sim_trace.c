/* sim_trace.c: exports a simulated timeline as Chrome trace JSON (Perfetto) or a text table. */
#include "sim.h"

/* Returns 1 when the kind runs on the communication track of the trace. */
static int on_comm_track(int kind) {
    return sched_kind_is_comm((sched_kind)kind) || kind == SCHED_REDUCE_GRAD;
}

int sim_trace_chrome(const sched *s, const sim_result *r, pl_buf *out, pl_err *e) {
    if (!r->trace) return pl_errf(e, PL_EINPUT, "the run kept no trace (record_trace was off)");
    pl_buf_puts(out, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    int first = 1;
    for (int q = 0; q < s->ranks; q++) {
        pl_buf_printf(out, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n"
                           "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"compute\"}},\n"
                           "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"comm\"}}",
                      first ? "" : ",\n", q, q, q, q);
        first = 0;
        for (size_t i = 0; i < s->rank[q].n; i++) {
            const sched_action *a = &s->rank[q].acts[i];
            const sim_slot *sl = &r->trace[q][i];
            char name[96];
            sched_action_format(a, name, sizeof name);
            double ts_us = sl->start_s * 1e6, dur_us = (sl->end_s - sl->start_s) * 1e6;
            pl_buf_printf(out, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.6f,\"dur\":%.6f,"
                               "\"args\":{\"stage\":%d,\"mb\":%d,\"seq\":%zu}}",
                          name, sched_kind_name((sched_kind)a->kind), q, on_comm_track(a->kind), ts_us,
                          dur_us < 0 ? 0 : dur_us, a->stage, a->mb, i);
            if (sched_kind_is_compute((sched_kind)a->kind))
                pl_buf_printf(out, ",\n{\"name\":\"memory\",\"ph\":\"C\",\"pid\":%d,\"ts\":%.6f,\"args\":{\"bytes\":%lld}}",
                              q, sl->end_s * 1e6, (long long)sl->mem_bytes);
        }
    }
    pl_buf_puts(out, "\n]}\n");
    return out->failed ? pl_errf(e, PL_ENOMEM, "out of memory writing the trace") : PL_OK;
}

int sim_trace_table(const sched *s, const sim_result *r, pl_buf *out, pl_err *e) {
    if (!r->trace) return pl_errf(e, PL_EINPUT, "the run kept no trace (record_trace was off)");
    pl_buf_printf(out, "%-5s %-6s %-22s %14s %14s %14s %14s\n", "rank", "seq", "action", "start_s", "end_s", "dur_s", "mem_bytes");
    for (int q = 0; q < s->ranks; q++)
        for (size_t i = 0; i < s->rank[q].n; i++) {
            char name[96];
            sched_action_format(&s->rank[q].acts[i], name, sizeof name);
            const sim_slot *sl = &r->trace[q][i];
            pl_buf_printf(out, "%-5d %-6zu %-22s %14.9g %14.9g %14.9g %14lld\n", q, i, name, sl->start_s, sl->end_s,
                          sl->end_s - sl->start_s, (long long)sl->mem_bytes);
        }
    return out->failed ? pl_errf(e, PL_ENOMEM, "out of memory writing the trace") : PL_OK;
}
