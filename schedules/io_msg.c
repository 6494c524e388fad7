/* io_msg.c: the error messages of the two file readers (io_text.c, io_csv.c): positions as
 * "path:line:col: " and user text quoted back, shortened. */
#include <stdio.h>
#include <string.h>

#include "sched_int.h"

int sched_fail_atv(pl_err *e, const char *path, int line, int col, const char *fmt, va_list ap) {
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return pl_errf(e, PL_EINPUT, "%s:%d:%d: %s", path, line, col, msg);
}

const char *sched_quote(const char *p, size_t n, char *buf) {
    size_t k = n <= SCHED_QUOTE_MAX ? n : SCHED_QUOTE_MAX;
    memcpy(buf, p, k);
    strcpy(buf + k, n > k ? "..." : "");
    return buf;
}
