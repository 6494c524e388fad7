/* test_progress.c: the progress bar (common/pl_progress.c; DESIGN §8): its line, its drawing
 * and clearing, and that pipelab draws it on a terminal only (a pseudo-terminal from `script`
 * against a pipe), so that scripts reading pipelab's output never see it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pl_common.h"
#include "pl_test.h"

/* The line: the label, a bar of 28 cells filled in proportion, the percentage, the counts and
 * the elapsed time; with no total, the elapsed time alone. */
static void test_format(void) {
    char b[256];
    pl_progress_format(b, sizeof b, "x", 5, 10, 1.3);
    CU_ASSERT_STRING_EQUAL(b, "x [##############..............]  50%  5/10  1.3 s");
    pl_progress_format(b, sizeof b, "y", 0, 7, 0);
    CU_ASSERT_STRING_EQUAL(b, "y [............................]   0%  0/7  0.0 s");
    pl_progress_format(b, sizeof b, "z", 9, 7, 2); /* more than the total: full, not over */
    CU_ASSERT_STRING_EQUAL(b, "z [############################] 100%  7/7  2.0 s");
    pl_progress_format(b, sizeof b, "w", 3, 0, 4.25);
    CU_ASSERT_STRING_EQUAL(b, "w  4.2 s");
    size_t n = pl_progress_format(b, 8, "a long label", 1, 2, 0); /* cut to the buffer */
    CU_ASSERT_EQUAL(n, 7);
    CU_ASSERT_STRING_EQUAL(b, "a long ");
}

/* Drawn over itself with '\r' while the work runs, and cleared at the end (blanks over the
 * last line, then '\r'), so that the next output starts at the line's beginning. */
static void test_draw_and_clear(void) {
    int fd[2];
    CU_ASSERT_FATAL(pipe(fd) == 0);
    pl_progress *p = pl_progress_start_fd(fd[1], 1, "t", 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    pl_progress_set(p, 3);
    usleep(350000); /* a few redraws (every 0.1 s) */
    pl_progress_end(p);
    close(fd[1]);
    char out[8192];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof out - 1 && (k = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)k;
    out[n] = 0;
    close(fd[0]);
    CU_ASSERT(n > 0 && out[0] == '\r');
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\rt [#####################.......]  75%  3/4  "));
    const char *last = strrchr(out, '\r'); /* the clearing ends the output */
    CU_ASSERT_PTR_NOT_NULL_FATAL(last);
    CU_ASSERT_EQUAL(last[1], 0);
    const char *prev = last - 1;
    while (prev > out && *prev == ' ') prev--;
    CU_ASSERT_EQUAL(*prev, '\r'); /* only blanks between the two */
    CU_ASSERT(last - prev - 1 >= (long)strlen("t [############################]  75%  3/4  0.0 s"));
    /* NULL is no bar: every call accepts it */
    pl_progress_set(NULL, 1);
    pl_progress_end(NULL);
    /* not a terminal, not forced: no bar */
    CU_ASSERT_PTR_NULL(pl_progress_start_fd(fd[0], 0, "t", 4));
}

/* `pipelab run` and `pipelab simulate` draw their bars on a terminal and never into a pipe; with PIPELAB_PROGRESS=0
 * not on a terminal either. PIPELAB_PROGRESS_AFTER=0 draws at once (a second otherwise), so
 * that a short run shows it too. */
static void test_cli_terminal_only(void) {
    char *out = NULL;
    if (pl_test_run("script --version >/dev/null 2>&1", &out) != 0) {
        free(out);
        pl_test_skip("no `script` (util-linux) for a pseudo-terminal: skipped");
        return;
    }
    free(out);
    const char *args = "run --kind 1f1b --ranks 2 --microbatches 8 --width 64 --timed 3 --no-predict --no-db";
    char cmd[2048];
    /* a pipe: stderr alone, no '\r' and no bar */
    snprintf(cmd, sizeof cmd, "PIPELAB_PROGRESS_AFTER=0 '%s' %s 2>&1 >/dev/null", PIPELAB_BIN, args);
    out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT(out == NULL || (strchr(out, '\r') == NULL && strstr(out, "[#") == NULL && strstr(out, "[.") == NULL));
    free(out);
    /* a terminal: the bar, and the table after it */
    snprintf(cmd, sizeof cmd, "PIPELAB_PROGRESS_AFTER=0 script -qec \"'%s' %s\" /dev/null", PIPELAB_BIN, args);
    out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "\rpipelab run: 1f1b, 2 ranks [") : NULL);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "iteration_time_s") : NULL);
    free(out);
    /* simulate's bar over its actions */
    snprintf(cmd, sizeof cmd, "PIPELAB_PROGRESS_AFTER=0 script -qec \"'%s' simulate --kind 1f1b --ranks 2 "
             "--microbatches 64 --no-db\" /dev/null", PIPELAB_BIN);
    out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "\rpipelab simulate: 1f1b, 2 ranks [") : NULL);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, "iteration_time_s") : NULL);
    free(out);
    snprintf(cmd, sizeof cmd, "PIPELAB_PROGRESS=0 PIPELAB_PROGRESS_AFTER=0 script -qec \"'%s' %s\" /dev/null", PIPELAB_BIN, args);
    out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT(out == NULL || strstr(out, "\rpipelab run:") == NULL);
    free(out);
}

void test_progress_cli_register(void) {
    static const pl_test_case cases[] = {{"progress line", test_format},
                                         {"drawn over itself, cleared at the end", test_draw_and_clear},
                                         {"pipelab draws it on a terminal only", test_cli_terminal_only},
                                         {NULL, NULL}};
    pl_test_suite("progress bar", cases);
}
