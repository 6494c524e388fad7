/* test_plot.c: what pipelab plot exports, checked without looking at pixels: the pass a measured
 * timeline draws, the legend labels, one style per curve, and the accuracy figure's frame. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pl_test.h"
#include "store.h"
#include "util.h"

/* The most curves (plot elements) and compute rows a test reads back. */
#define MAX_ELEMS 64
#define MAX_ROWS 256

/* Writes figure o (kind set) with the library into dir/NAME.{png,dat,gp}, without gnuplot;
 * returns the code and fills *dat and *gp with the malloc'd text of the data and the script. */
static int prepare(const char *db, store_plot_opts *o, const char *dir, const char *name, char **dat, char **gp) {
    char file[64];
    snprintf(file, sizeof file, "%s.png", name);
    char *png = pl_test_path(dir, file);
    snprintf(file, sizeof file, "%s.dat", name);
    char *datp = pl_test_path(dir, file);
    snprintf(file, sizeof file, "%s.gp", name);
    char *gpp = pl_test_path(dir, file);
    o->output = png;
    o->data = datp;
    o->script = gpp;
    store *s = NULL;
    pl_err e;
    pl_err_clear(&e);
    int code = store_open(db, 1, &s, &e);
    if (code == PL_OK) code = store_plot_prepare(s, o, &e);
    if (code != PL_OK) fprintf(stderr, "\nplot: %s\n", e.msg);
    store_close(s);
    *dat = code == PL_OK ? tr_slurp(datp, NULL) : NULL;
    *gp = code == PL_OK ? tr_slurp(gpp, NULL) : NULL;
    o->output = o->data = o->script = NULL;
    free(png);
    free(datp);
    free(gpp);
    return code;
}

/* Makes a fresh test folder (*dir) and a new database name there (*db), and opens it for
 * writing; returns the store (asserted). */
static store *fresh_db(const char *name, char **dir, char **db) {
    *dir = pl_test_tmpdir();
    *db = pl_test_path(*dir, name);
    store *s = NULL;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_open(*db, 0, &s, &e) == PL_OK);
    return s;
}

/* Frees what fresh_db made and removes the folder. */
static void fresh_done(char *dir, char *db) {
    free(db);
    pl_test_rmdir(dir);
    free(dir);
}

/* One compute box of a timeline's data (block 0). */
typedef struct row { int rank; double mid, half; char action[32]; } row;

/* Reads the compute rows of a timeline's data into rows[MAX_ROWS]; returns their count. */
static int timeline_rows(const char *dat, row *rows) {
    int n = 0;
    for (const char *l = dat; l && *l && n < MAX_ROWS; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
        if (l[0] == '\n') break; /* the blank lines that end block 0 */
        if (l[0] == '#') continue;
        row *r = &rows[n];
        unsigned colour, label_colour;
        char label[16];
        if (sscanf(l, "%d %lf %lf %u \"%15[^\"]\" %u \"%31[^\"]\"", &r->rank, &r->mid, &r->half, &colour, label,
                   &label_colour, r->action) == 7 ||
            sscanf(l, "%d %lf %lf %u \"\" %u \"%31[^\"]\"", &r->rank, &r->mid, &r->half, &colour, &label_colour, r->action) == 6)
            n++;
    }
    return n;
}

/* One element of a plot command: its panel (the plot command it belongs to), its style (the
 * text from "with" to "title") and its title. */
typedef struct elem { int panel; char style[192], title[160]; } elem;

/* Reads the plot elements of a script into el[MAX_ELEMS]; returns their count. */
static int plot_elems(const char *gp, elem *el) {
    int n = 0, panel = -1;
    for (const char *l = gp; l && *l && n < MAX_ELEMS; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
        if (strncmp(l, "plot ", 5) == 0) panel++;
        const char *with = strstr(l, " with "), *title = strstr(l, " title \""), *end = strchr(l, '\n');
        if (!with || !title || (end && title > end) || title < with) continue;
        el[n].panel = panel;
        snprintf(el[n].style, sizeof el[n].style, "%.*s", (int)(title - with), with);
        const char *t = title + 8, *q = strchr(t, '"');
        snprintf(el[n].title, sizeof el[n].title, "%.*s", q ? (int)(q - t) : 0, t);
        n++;
    }
    return n;
}

/* Returns the element titled title, or NULL. */
static const elem *elem_titled(const elem *el, int n, const char *title) {
    for (int i = 0; i < n; i++)
        if (strcmp(el[i].title, title) == 0) return &el[i];
    return NULL;
}

/* Writes the "lc rgb" colour of a style ("#RRGGBB") to out, or "" when it has none. */
static void style_colour(const char *style, char *out, size_t n) {
    const char *c = strstr(style, "lc rgb \"");
    snprintf(out, n, "%.7s", c ? c + 8 : "");
}

/* Asserts that the elements of each panel have pairwise different styles. */
static void assert_distinct_styles(const elem *el, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (el[i].panel == el[j].panel) {
                CU_ASSERT(strcmp(el[i].style, el[j].style) != 0);
                if (strcmp(el[i].style, el[j].style) == 0) fprintf(stderr, "\nsame style: %s / %s\n", el[i].title, el[j].title);
            }
}

/* ---- the timeline of a measured run ---- */

/* The hand-made measured run: 2 ranks, one F and one B each per pass, three timed passes whose
 * ops last PASS_D[k] each; pass k starts at PASS_GAP k. Its times are 4 PASS_D[k], so its
 * median pass is pass 2 (4, 12, 8 s). */
static const double PASS_D[3] = {1, 3, 2};
#define PASS_GAP 20.0

/* Writes that run with the given params_json (its median pass or not) and returns its id. */
static int64_t put_measured(store *s, const char *params) {
    store_run r;
    memset(&r, 0, sizeof r);
    r.kind = "measured";
    r.tag = "passes";
    r.schedule = "1f1b";
    r.ranks = r.stages = 2;
    r.microbatches = r.chunks = r.iterations = 1;
    r.params_json = params;
    r.repetitions = 3;
    r.iteration_time_s = 8;
    static const char *const act[2][2] = {{"0F0", "0B0"}, {"1F0", "1B0"}};
    static const char *const kind[2] = {"F", "B"};
    static const double slot[2][2] = {{0, 3}, {1, 2}}; /* rank, op -> start in units of d */
    store_op ops[12];
    int k = 0;
    for (int q = 0; q < 2; q++)
        for (int pass = 0; pass < 3; pass++)
            for (int j = 0; j < 2; j++, k++) {
                double t = PASS_GAP * pass + slot[q][j] * PASS_D[pass];
                ops[k] = (store_op){q, 2 * pass + j, act[q][j], kind[j], q, 0, t, t + PASS_D[pass]};
            }
    int64_t id = -1;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT(store_write_run(s, &r, NULL, 0, ops, 12, &id, &e) == PL_OK);
    return id;
}

/* Returns the number of rows of a timeline of run id (all passes or not), 0 on error; *per_s
 * (may be NULL) gets the data's time unit per second (the header says "times in s|ms|us"). */
static int timeline_of(const char *db, const char *dir, int64_t id, int all, row *rows, char **gp, double *per_s) {
    char run[32], *dat = NULL;
    snprintf(run, sizeof run, "%lld", (long long)id);
    store_plot_opts o;
    memset(&o, 0, sizeof o);
    o.kind = STORE_PLOT_TIMELINE;
    o.run = run;
    o.all_passes = all;
    int n = prepare(db, &o, dir, "tl", &dat, gp) == PL_OK ? timeline_rows(dat, rows) : 0;
    const char *unit = dat ? strstr(dat, "times in ") : NULL;
    if (per_s) *per_s = !unit ? NAN : !strncmp(unit + 9, "us", 2) ? 1e6 : !strncmp(unit + 9, "ms", 2) ? 1e3 : 1;
    free(dat);
    return n;
}

/* The timeline of a measured run holds exactly its median pass's actions, shifted to start at
 * 0; all passes with all_passes; all of them, said so, when the run records no median pass. */
static void test_timeline_median_pass(void) {
    char *dir, *db;
    store *s = fresh_db("passes.db", &dir, &db);
    int64_t with = put_measured(s, "{\"timed_passes\":3,\"median_passes\":[2,2]}");
    int64_t without = put_measured(s, "{\"timed_passes\":3}");
    store_close(s);
    row rows[MAX_ROWS];
    char *gp = NULL;
    CU_ASSERT_EQUAL(timeline_of(db, dir, with, 0, rows, &gp, NULL), 4);
    for (int i = 0; i < 4; i++) { /* pass 2's ops last 2 s; rank 0's F starts the pass at 0 */
        CU_ASSERT_DOUBLE_EQUAL(rows[i].half, PASS_D[2] / 2, 1e-12);
        if (strcmp(rows[i].action, "0F0") == 0) CU_ASSERT_DOUBLE_EQUAL(rows[i].mid, PASS_D[2] / 2, 1e-12);
        if (strcmp(rows[i].action, "0B0") == 0) CU_ASSERT_DOUBLE_EQUAL(rows[i].mid, 3.5 * PASS_D[2], 1e-12);
    }
    CU_ASSERT_PTR_NOT_NULL(gp && strstr(gp, "timed pass 3 of 3 (the median)"));
    free(gp);
    CU_ASSERT_EQUAL(timeline_of(db, dir, with, 1, rows, &gp, NULL), 12);
    double halves = 0;
    for (int i = 0; i < 12; i++) halves += rows[i].half;
    CU_ASSERT_DOUBLE_EQUAL(halves, 4 * (PASS_D[0] + PASS_D[1] + PASS_D[2]) / 2, 1e-9);
    CU_ASSERT_PTR_NOT_NULL(gp && strstr(gp, "over all 3 timed passes"));
    free(gp);
    CU_ASSERT_EQUAL(timeline_of(db, dir, without, 0, rows, &gp, NULL), 12);
    CU_ASSERT_PTR_NOT_NULL(gp && strstr(gp, "records no median pass"));
    free(gp);
    fresh_done(dir, db);
}

/* A run whose ranks the database says are 50000 (edited there) would make a timeline 2000130
 * pixels tall: refused with a clear message, by the library (no script written) and by the
 * command (exit 1, gnuplot never called). 100000000 ranks (a timeline 4000000130 pixels tall,
 * which an int holds as -294967166) are more than any run has: the database is damaged. */
static void test_timeline_huge_ranks(void) {
    char *dir, *db;
    store *s = fresh_db("huge.db", &dir, &db);
    int64_t id = put_measured(s, "{\"timed_passes\":3,\"median_passes\":[2,2]}");
    store_close(s);
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE runs SET ranks = 50000 WHERE id = %lld", (long long)id);
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(db, sql), SQLITE_OK);
    const char *want = "has 50000 ranks: its timeline would be 2000130 pixels tall, more than a PNG or PDF "
                       "figure can be (32767; it draws at most 815 ranks, an SVG one more)";
    char run[32];
    snprintf(run, sizeof run, "%lld", (long long)id);
    store_plot_opts o;
    memset(&o, 0, sizeof o);
    o.kind = STORE_PLOT_TIMELINE;
    o.run = run;
    o.output = pl_test_path(dir, "t.png");
    o.data = pl_test_path(dir, "t.dat");
    o.script = pl_test_path(dir, "t.gp");
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_EQUAL_FATAL(store_open(db, 1, &s, &e), PL_OK);
    CU_ASSERT_EQUAL(store_plot_prepare(s, &o, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
    CU_ASSERT_NOT_EQUAL(access(o.script, F_OK), 0);
    o.svg = 1; /* an SVG may be taller, but not that tall */
    pl_err_clear(&e);
    CU_ASSERT_EQUAL(store_plot_prepare(s, &o, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than an SVG figure can be (1048576; it draws at most 26211 ranks)"));
    CU_ASSERT_NOT_EQUAL(access(o.script, F_OK), 0);
    o.svg = 0;
    store_close(s);
    /* the command: a stand-in gnuplot that leaves a mark when called */
    char *fake = pl_test_path(dir, "gnuplot"), *mark = pl_test_path(dir, "called");
    FILE *f = fopen(fake, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "#!/bin/sh\ntouch '%s'\ncp \"$1\" '%s'\n", mark, mark);
    fclose(f);
    CU_ASSERT_EQUAL(chmod(fake, 0755), 0);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "PIPELAB_GNUPLOT='%s' '%s' plot timeline %lld --db '%s' -o '%s'", fake, PIPELAB_BIN,
             (long long)id, db, o.output);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, want));
    if (!out || !strstr(out, want)) fprintf(stderr, "\n%s -> %s\n", cmd, out ? out : "(nothing)");
    CU_ASSERT_NOT_EQUAL(access(mark, F_OK), 0);
    free(out);
    /* more ranks than a run can have: the database is damaged, and nothing sized by it */
    snprintf(sql, sizeof sql, "UPDATE runs SET ranks = 100000000 WHERE id = %lld", (long long)id);
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(db, sql), SQLITE_OK);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "has 100000000 ranks: the database is damaged"));
    CU_ASSERT_NOT_EQUAL(access(mark, F_OK), 0);
    free(out);
    free(fake);
    free(mark);
    free((char *)o.output);
    free((char *)o.data);
    free((char *)o.script);
    fresh_done(dir, db);
}

/* Ops the database holds damaged (a text time, an end before its start, a rank the run does not
 * have, no kind) are refused by the reader, naming the run and the action, rather than drawn or
 * compared as if valid; and a run of more ranks than any has refuses compare --tail at once (it
 * sized its tables by them: 300 GB). */
static void test_damaged_ops(void) {
    char *dir, *db;
    store *s = fresh_db("ops.db", &dir, &db);
    int64_t id = put_measured(s, "{\"timed_passes\":3,\"median_passes\":[2,2]}");
    store_close(s);
    static const struct { const char *set, *says; } cases[] = {
        {"end_s = start_s - 1", "(rank 0, 0B0): an end before its start: the database is damaged"},
        {"start_s = 'abc'", "a value that is not a number: the database is damaged"},
        {"end_s = NULL", "a value that is not a number"},
        {"rank = 5", "(rank 5, 0B0): a rank the run does not have"},
        {"kind = NULL", "(rank 0, 0B0): no kind"},
        {"start_s = 1e999", "a time that is not a number"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char sql[256];
        char *copy = pl_test_path(dir, "bad.db");
        char cp[2048];
        snprintf(cp, sizeof cp, "cp '%s' '%s'", db, copy);
        CU_ASSERT_EQUAL_FATAL(pl_test_run(cp, NULL), 0);
        snprintf(sql, sizeof sql, "UPDATE ops SET %s WHERE run_id = %lld AND action = '0B0'", cases[k].set, (long long)id);
        CU_ASSERT_EQUAL_FATAL(tr_raw_sql(copy, sql), SQLITE_OK);
        pl_err e;
        pl_err_clear(&e);
        CU_ASSERT_EQUAL_FATAL(store_open(copy, 1, &s, &e), PL_OK);
        store_op *ops = NULL;
        size_t n = 5;
        CU_ASSERT_EQUAL(store_get_ops(s, id, &ops, &n, &e), PL_EINPUT);
        CU_ASSERT(ops == NULL && n == 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[k].says));
        if (!strstr(e.msg, cases[k].says)) fprintf(stderr, "\n%s: %s\n", cases[k].set, e.msg);
        store_close(s);
        free(copy);
    }
    /* the command: compare --tail on a run of two billion ranks */
    char sql[128], cmd[2048], *out = NULL;
    snprintf(sql, sizeof sql, "UPDATE runs SET ranks = 2000000000 WHERE id = %lld", (long long)id);
    CU_ASSERT_EQUAL_FATAL(tr_raw_sql(db, sql), SQLITE_OK);
    snprintf(cmd, sizeof cmd, "'%s' compare --db '%s' --tail", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "has 2000000000 ranks: the database is damaged"));
    free(out);
    fresh_done(dir, db);
}

/* Returns median_passes[0] of a run's params_json, or -1. */
static int median_pass_of(const char *params) {
    const char *v;
    size_t n;
    return params && store_json_get(params, "median_passes", &v, &n) && v[0] == '[' ? atoi(v + 1) : -1;
}

/* A real `pipelab run --trace` of 3 timed passes records its median pass, and its timeline holds
 * exactly the compute actions of that pass (each rank's list: its ops / 3), box for box. */
static void test_timeline_real_run(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "run.db");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s run --kind 1f1b --ranks 2 --microbatches 2 --width 8 --depth 2 --microbatch-size 2 "
             "--timed 3 --no-predict --oversubscribe --trace --tag real --db %s --format csv", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    store *s = NULL;
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_open(db, 1, &s, &e) == PL_OK);
    store_run r;
    CU_ASSERT_FATAL(store_get_run(s, "1", &r, &e) == PL_OK);
    int mid = median_pass_of(r.params_json);
    CU_ASSERT(mid >= 0 && mid < 3);
    store_op *ops = NULL;
    size_t n = 0;
    CU_ASSERT_FATAL(store_get_ops(s, r.id, &ops, &n, &e) == PL_OK);
    store_close(s);
    row rows[MAX_ROWS];
    char *gp = NULL;
    double per_s;
    int nr = timeline_of(db, dir, r.id, 0, rows, &gp, &per_s);
    free(gp);
    /* the compute ops of pass mid: rank q's positions mid x per .. (mid + 1) x per - 1 */
    int want = 0, matched = 0, count[2] = {0, 0};
    for (size_t i = 0; i < n; i++) count[ops[i].rank]++;
    for (size_t i = 0; i < n; i++) {
        const store_op *p = &ops[i];
        if (p->seq / (count[p->rank] / 3) != mid || (strcmp(p->kind, "F") && strcmp(p->kind, "B") && strcmp(p->kind, "I") && strcmp(p->kind, "W")))
            continue;
        want++;
        for (int k = 0; k < nr; k++)
            matched += rows[k].rank == p->rank && strcmp(rows[k].action, p->action) == 0 &&
                       fabs(rows[k].half - 0.5 * per_s * (p->end_s - p->start_s)) < 1e-6 * per_s;
    }
    CU_ASSERT(want >= 8); /* 2 ranks x 2 microbatches x (F, B) at least */
    CU_ASSERT_EQUAL(nr, want);
    CU_ASSERT_EQUAL(matched, want);
    CU_ASSERT_EQUAL(timeline_of(db, dir, r.id, 1, rows, &gp, NULL), 3 * want);
    free(gp);
    store_ops_free(ops, n);
    store_run_clear(&r);
    fresh_done(dir, db);
}

/* ---- legends and styles ---- */

/* Simulates into db: 1f1b on 2 and 4 ranks, interleaved v = 2 and 4 on 2 ranks, m = 4 and 8,
 * under tag (the run stores its stages, p v, beside its ranks). */
static void simulate_mix(const char *db, const char *tag, double tcomm) {
    static const char *const shapes[] = {"--kind 1f1b --ranks 2", "--kind 1f1b --ranks 4",
                                         "--kind interleaved --chunks 2 --ranks 2", "--kind interleaved --chunks 4 --ranks 2"};
    char cmd[1024];
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int m = 4; m <= 8; m *= 2) {
            snprintf(cmd, sizeof cmd, "%s simulate %s --microbatches %d --tcomm %g --tag '%s' --db %s --format csv",
                     PIPELAB_BIN, shapes[k], m, tcomm, tag, db);
            CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
        }
}

/* Throughput labels interleaved by its ranks and chunks ("interleaved v=2, p = 2" for a run of 4
 * stages), draws it at its ranks by default, and gives each curve its own style; curves of one
 * schedule differ in colour (shade). */
static void test_throughput_labels(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "mix.db");
    simulate_mix(db, "mix", 0);
    store_plot_opts o;
    memset(&o, 0, sizeof o);
    o.kind = STORE_PLOT_THROUGHPUT;
    o.x = STORE_X_MICROBATCHES;
    char *dat = NULL, *gp = NULL;
    CU_ASSERT_FATAL(prepare(db, &o, dir, "thr", &dat, &gp) == PL_OK);
    elem el[MAX_ELEMS];
    int n = plot_elems(gp, el);
    CU_ASSERT_EQUAL(n, 4);
    static const char *const want[] = {"1f1b, p = 2", "1f1b, p = 4", "interleaved v=2, p = 2", "interleaved v=4, p = 2"};
    for (int k = 0; k < 4; k++) CU_ASSERT_PTR_NOT_NULL(elem_titled(el, n, want[k]));
    CU_ASSERT_PTR_NULL(strstr(gp, "p = 8"));
    assert_distinct_styles(el, n);
    char c1[16], c2[16];
    const elem *a = elem_titled(el, n, want[2]), *b = elem_titled(el, n, want[3]);
    if (a && b) {
        style_colour(a->style, c1, sizeof c1);
        style_colour(b->style, c2, sizeof c2);
        CU_ASSERT(c1[0] && strcmp(c1, c2) != 0);
    }
    free(dat);
    free(gp);
    /* against the pipeline depth (the default): interleaved on 2 ranks sits at x = 2, not 4 or 8 */
    o.x = STORE_X_RANKS;
    CU_ASSERT_FATAL(prepare(db, &o, dir, "thr2", &dat, &gp) == PL_OK);
    const char *blk = strstr(dat, ": interleaved v=4, m = 4\n");
    CU_ASSERT_PTR_NOT_NULL(blk);
    CU_ASSERT(blk && strncmp(strchr(blk, '\n') + 1, "2 ", 2) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(gp, "pipeline depth p (ranks)"));
    free(dat);
    free(gp);
    fresh_done(dir, db);
}

/* Bubble: every curve of a panel has its own style; an analytic curve has the shade of the runs
 * it describes; runs of two tags get a panel each, and the legend lists each curve once. */
static void test_bubble_styles(void) {
    char *dir = pl_test_tmpdir();
    char *db = pl_test_path(dir, "mix.db");
    simulate_mix(db, "no communication", 0);
    simulate_mix(db, "transfer 0.05", 0.05);
    store_plot_opts o;
    memset(&o, 0, sizeof o);
    o.kind = STORE_PLOT_BUBBLE;
    o.filter.ranks = 2;
    char *dat = NULL, *gp = NULL;
    CU_ASSERT_FATAL(prepare(db, &o, dir, "bub", &dat, &gp) == PL_OK);
    elem el[MAX_ELEMS];
    int n = plot_elems(gp, el);
    /* two panels of 1f1b, interleaved v=2 and v=4 and their analytic curves, then the legend */
    CU_ASSERT_EQUAL(n, 3 * 6);
    CU_ASSERT_PTR_NOT_NULL(strstr(gp, "set title \"p = 2 ranks: no communication\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(gp, "set title \"p = 2 ranks: transfer 0.05\""));
    assert_distinct_styles(el, n);
    char run2[16], ana2[16], run4[16];
    for (int i = 0; i < n; i++) {
        if (el[i].panel != 0) continue;
        if (!strcmp(el[i].title, "interleaved v=2")) style_colour(el[i].style, run2, sizeof run2);
        if (!strcmp(el[i].title, "interleaved v=2 analytic (p-1)/(2m+p-1)")) style_colour(el[i].style, ana2, sizeof ana2);
        if (!strcmp(el[i].title, "interleaved v=4")) style_colour(el[i].style, run4, sizeof run4);
    }
    CU_ASSERT_STRING_EQUAL(run2, ana2);
    CU_ASSERT_STRING_NOT_EQUAL(run2, run4);
    free(dat);
    free(gp);
    fresh_done(dir, db);
}

/* ---- accuracy ---- */

/* Writes a measured run and its own prediction (iteration times meas_s, pred_s). */
static void put_pair(store *s, const char *uid, int m, double meas_s, double pred_s) {
    char puid[64];
    snprintf(puid, sizeof puid, "%s%s", STORE_PREDICTION_PREFIX, uid);
    for (int k = 0; k < 2; k++) {
        store_run r;
        memset(&r, 0, sizeof r);
        r.kind = k ? "simulated" : "measured";
        r.uid = k ? puid : uid;
        r.tag = "acc";
        r.schedule = "1f1b";
        r.ranks = r.stages = 2;
        r.microbatches = m;
        r.chunks = r.iterations = 1;
        r.iteration_time_s = k ? pred_s : meas_s;
        pl_err e;
        pl_err_clear(&e);
        CU_ASSERT(store_write_run(s, &r, NULL, 0, NULL, 0, NULL, &e) == PL_OK);
    }
}

/* Returns the accuracy figure's x range of db in *lo, *hi (in its unit) and whether it is
 * logarithmic; -1 on error. */
static int accuracy_range(const char *db, const char *dir, double *lo, double *hi) {
    store_plot_opts o;
    memset(&o, 0, sizeof o);
    o.kind = STORE_PLOT_ACCURACY;
    char *dat = NULL, *gp = NULL;
    int rc = -1;
    if (prepare(db, &o, dir, "acc", &dat, &gp) == PL_OK && strstr(gp, "title \"y = x\"") && strstr(gp, "title \"+-5%\"")) {
        const char *x = strstr(gp, "set xrange [");
        if (x && sscanf(x, "set xrange [%lf:%lf]", lo, hi) == 2) rc = strstr(gp, "set logscale xy") != NULL;
    }
    free(dat);
    free(gp);
    return rc;
}

/* Points between 30 and 36 ms get a frame around them, not one from the origin; points from 1 to
 * 100 ms a logarithmic one. Both hold every point and keep the y = x line and the band. */
static void test_accuracy_frame(void) {
    char *dir, *db;
    store *s = fresh_db("acc.db", &dir, &db);
    put_pair(s, "a", 4, 0.030, 0.031);
    put_pair(s, "b", 8, 0.036, 0.034);
    store_close(s);
    double lo, hi;
    CU_ASSERT_EQUAL(accuracy_range(db, dir, &lo, &hi), 0);
    CU_ASSERT(lo > 20 && lo < 30 && hi > 36 && hi < 45); /* ms */
    pl_err e;
    pl_err_clear(&e);
    CU_ASSERT_FATAL(store_open(db, 0, &s, &e) == PL_OK);
    put_pair(s, "c", 16, 0.001, 0.0011);
    put_pair(s, "d", 32, 0.1, 0.09);
    store_close(s);
    CU_ASSERT_EQUAL(accuracy_range(db, dir, &lo, &hi), 1);
    CU_ASSERT(lo > 0 && lo < 1 && hi > 100);
    fresh_done(dir, db);
}

/* ---- the command line ---- */

/* --all-passes draws every pass (the CLI's flag reaches the figure) and applies to timelines
 * only; --x takes ranks, stages or microbatches. */
static void test_plot_flags(void) {
    char *dir, *db;
    store *s = fresh_db("passes.db", &dir, &db);
    int64_t id = put_measured(s, "{\"timed_passes\":3,\"median_passes\":[2,2]}");
    store_close(s);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s plot bubble --all-passes --db %s -o %s/b.png", PIPELAB_BIN, db, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "--all-passes"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s plot throughput --x depth --db %s -o %s/t.png", PIPELAB_BIN, db, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 2);
    free(out);
    if (pl_test_run("command -v gnuplot >/dev/null", NULL) != 0) {
        fprintf(stderr, "(gnuplot not on PATH: --all-passes figure not drawn) ");
    } else {
        snprintf(cmd, sizeof cmd, "%s plot timeline %lld --all-passes --db %s -o %s/t.png", PIPELAB_BIN, (long long)id, db, dir);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
        free(out);
        char *dat = pl_test_path(dir, "t.dat"), *text = tr_slurp(dat, NULL);
        row rows[MAX_ROWS];
        CU_ASSERT_EQUAL(text ? timeline_rows(text, rows) : 0, 12);
        free(text);
        free(dat);
    }
    fresh_done(dir, db);
}

/* Writes an executable stand-in gnuplot at dir/name that copies its script to dir/mark (proof it
 * ran) and writes a non-empty figure at the script's "set output" path; returns its path. */
static char *fake_gnuplot(const char *dir, const char *name, const char *mark) {
    char *fake = pl_test_path(dir, name), *m = pl_test_path(dir, mark);
    FILE *f = fopen(fake, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "#!/bin/sh\ncp \"$1\" '%s'\nout=$(sed -n 's/^set output \"\\(.*\\)\"$/\\1/p' \"$1\")\n"
               "[ -n \"$out\" ] && echo figure > \"$out\"\n", m);
    fclose(f);
    CU_ASSERT_EQUAL(chmod(fake, 0755), 0);
    free(m);
    return fake;
}

/* Sets the environment variable name to value (NULL: unsets it). */
static void set_env(const char *name, const char *value) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
}

/* PIPELAB_GNUPLOT naming a program without a '/' is looked up on PATH, as execvp looks it up:
 * the library finds the first executable one (not a file that cannot run) and names what it did
 * not find; `pipelab plot` draws with it; a value with a '/' is still a path. */
static void test_gnuplot_on_path(void) {
    char *dir = pl_test_tmpdir(), *other = pl_test_path(dir, "other");
    CU_ASSERT_EQUAL_FATAL(mkdir(other, 0755), 0);
    char *fake = fake_gnuplot(dir, "fakeplot", "called"), *late = fake_gnuplot(other, "fakeplot", "late");
    char *noexec = pl_test_path(dir, "noexec");
    FILE *f = fopen(noexec, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    /* the library, in this process: PATH and PIPELAB_GNUPLOT set, then put back */
    const char *was_path = getenv("PATH"), *was_gp = getenv(STORE_GNUPLOT_ENV);
    char *old_path = was_path ? strdup(was_path) : NULL, *old_gp = was_gp ? strdup(was_gp) : NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s:%s:%s", dir, other, old_path ? old_path : "/usr/bin:/bin");
    setenv("PATH", path, 1);
    pl_err e;
    pl_err_clear(&e);
    setenv(STORE_GNUPLOT_ENV, "fakeplot", 1);
    char *found = store_gnuplot_find(&e);
    CU_ASSERT_PTR_NOT_NULL(found);
    CU_ASSERT(found && strcmp(found, fake) == 0); /* the first on PATH */
    free(found);
    setenv(STORE_GNUPLOT_ENV, "noexec", 1);
    found = store_gnuplot_find(&e);
    CU_ASSERT_PTR_NULL(found);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "PIPELAB_GNUPLOT=noexec: no executable program noexec on PATH"));
    free(found);
    setenv(STORE_GNUPLOT_ENV, "no-such-gnuplot", 1);
    found = store_gnuplot_find(&e);
    CU_ASSERT_PTR_NULL(found);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no executable program no-such-gnuplot on PATH"));
    free(found);
    setenv(STORE_GNUPLOT_ENV, late, 1); /* a path: taken as it is */
    found = store_gnuplot_find(&e);
    CU_ASSERT(found && strcmp(found, late) == 0);
    free(found);
    setenv(STORE_GNUPLOT_ENV, noexec, 1);
    found = store_gnuplot_find(&e);
    CU_ASSERT_PTR_NULL(found);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is not an executable program"));
    free(found);
    set_env("PATH", old_path);
    set_env(STORE_GNUPLOT_ENV, old_gp);
    free(old_path);
    free(old_gp);
    /* the command: the audit's `PIPELAB_GNUPLOT=gnuplot pipelab plot bubble`, with a stand-in */
    char *db = pl_test_path(dir, "mix.db"), *mark = pl_test_path(dir, "called"), *png = pl_test_path(dir, "b.png");
    simulate_mix(db, "no communication", 0);
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "PATH='%s':\"$PATH\" PIPELAB_GNUPLOT=fakeplot '%s' plot bubble --ranks 2 --db '%s' -o '%s'",
             dir, PIPELAB_BIN, db, png);
    int rc = pl_test_run(cmd, &out);
    if (rc != 0) fprintf(stderr, "\n%s -> %s\n", cmd, out ? out : "(nothing)");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(access(mark, F_OK), 0);
    CU_ASSERT_EQUAL(access(png, F_OK), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "PATH='%s':\"$PATH\" PIPELAB_GNUPLOT=no-such-gnuplot '%s' plot bubble --ranks 2 --db '%s' -o '%s'",
             dir, PIPELAB_BIN, db, png);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "no executable program no-such-gnuplot on PATH"));
    free(out);
    free(png);
    free(mark);
    free(noexec);
    free(late);
    free(fake);
    free(other);
    fresh_done(dir, db);
}

/* The default figure names of tags that differ only in characters a file name does not keep ("a
 * b", "a/b", "a_b") differ: each plot prints its own path, and every figure is there afterwards
 * (they all once wrote bubble-a_b.png, each over the last); a tag of kept characters alone keeps
 * its plain name (validate_cpu.sh's accuracy-validate_cpu.png), unless it ends as a hashed name
 * does: the tag that is "a b"'s figure name ("a_b-" and 8 hex digits) gets a name of its own.
 * Drawn by a stand-in gnuplot, in a fresh folder (the default path is relative). */
static void test_default_names(void) {
    char *dir = pl_test_tmpdir(), *db = pl_test_path(dir, "n.db");
    char *fake = fake_gnuplot(dir, "fakeplot", "called");
    const char *tags[] = {"a b", "a/b", "a_b", "plain-1.0"}; /* the last two kept as they are */
    char cmd[8192], paths[4][1024];
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "'%s' simulate --kind 1f1b --ranks 2 --microbatches 2 --tag '%s' --db '%s' >/dev/null",
                 PIPELAB_BIN, tags[i], db);
        CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    }
    for (int i = 0; i < 4; i++) {
        char *out = NULL;
        snprintf(cmd, sizeof cmd, "cd '%s' && PIPELAB_GNUPLOT='%s' '%s' plot bubble --tag '%s' --db '%s'", dir, fake,
                 PIPELAB_BIN, tags[i], db);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
        const char *at = out ? strstr(out, "results/out/figures/bubble-") : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        if (!at) at = ""; /* not reached (the assertion above is fatal); said for the compiler */
        size_t len = strcspn(at, " \n");
        snprintf(paths[i], sizeof paths[i], "%.*s", (int)len, at);
        free(out);
    }
    CU_ASSERT_STRING_EQUAL(paths[2], "results/out/figures/bubble-a_b.png");
    CU_ASSERT_STRING_EQUAL(paths[3], "results/out/figures/bubble-plain-1.0.png");
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < i; j++) CU_ASSERT(strcmp(paths[i], paths[j]) != 0);
        char *p = pl_test_path(dir, paths[i]);
        CU_ASSERT(pl_test_exists(p));
        free(p);
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(paths[0], "bubble-a_b-"));
    /* a tag equal to the name "a b" was drawn as: "a_b-" and its 8 hex digits */
    char look[64], *out = NULL;
    snprintf(look, sizeof look, "%.12s", strstr(paths[0], "bubble-") + strlen("bubble-"));
    snprintf(cmd, sizeof cmd, "'%s' simulate --kind gpipe --ranks 2 --microbatches 2 --tag '%s' --db '%s' >/dev/null",
             PIPELAB_BIN, look, db);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && PIPELAB_GNUPLOT='%s' '%s' plot bubble --tag '%s' --db '%s'", dir, fake,
             PIPELAB_BIN, look, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    const char *at = out ? strstr(out, "results/out/figures/bubble-") : NULL;
    CU_ASSERT_PTR_NOT_NULL(at);
    if (at) {
        CU_ASSERT(strncmp(at, paths[0], strlen(paths[0])) != 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(at, look)); /* its own name first, then its hash */
    }
    free(out);
    /* tags of 300 characters that differ in their last: names cut at 160 characters, each with
     * its own hash, within a file system's 255 bytes (one once failed: "File name too long") */
    char tag[2][301], got[2][1024];
    for (int t = 0; t < 2; t++) {
        memset(tag[t], 'a', 300);
        tag[t][299] = t ? 'c' : 'b';
        tag[t][300] = '\0';
        snprintf(cmd, sizeof cmd, "'%s' simulate --kind gpipe --ranks 2 --microbatches 2 --tag '%s' --db '%s' >/dev/null",
                 PIPELAB_BIN, tag[t], db);
        CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
        snprintf(cmd, sizeof cmd, "cd '%s' && PIPELAB_GNUPLOT='%s' '%s' plot bubble --tag '%s' --db '%s'", dir, fake,
                 PIPELAB_BIN, tag[t], db);
        out = NULL;
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
        const char *p = out ? strstr(out, "results/out/figures/bubble-") : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        snprintf(got[t], sizeof got[t], "%.*s", (int)strcspn(p, " \n"), p);
        const char *base = strrchr(got[t], '/') + 1;
        CU_ASSERT_EQUAL(strlen(base), strlen("bubble-") + 160 + 9 + strlen(".png"));
        free(out);
    }
    CU_ASSERT(strcmp(got[0], got[1]) != 0);
    /* --tag '': the runs stored without a tag; their figure is not "bubble-.png" but
     * "bubble--" and the empty name's hash, its title says "no tag", and with none such runs the
     * refusal says so */
    snprintf(cmd, sizeof cmd, "cd '%s' && PIPELAB_GNUPLOT='%s' '%s' plot bubble --tag '' --db '%s'", dir, fake, PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "no runs to plot stored without a tag (--tag '')"));
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' simulate --kind gpipe --ranks 2 --microbatches 2 --db '%s' >/dev/null", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && PIPELAB_GNUPLOT='%s' '%s' plot bubble --tag '' --db '%s'", dir, fake, PIPELAB_BIN, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "results/out/figures/bubble--811c9dc5.png")); /* FNV-1a of "" */
    free(out);
    char *script = pl_test_path(dir, "results/out/figures/bubble--811c9dc5.gp");
    FILE *gp = fopen(script, "r");
    CU_ASSERT_PTR_NOT_NULL(gp);
    int titled = 0;
    char line[1024];
    while (gp && fgets(line, sizeof line, gp)) titled |= strstr(line, "(no tag)") != NULL;
    if (gp) fclose(gp);
    CU_ASSERT(titled);
    free(script);
    free(fake);
    fresh_done(dir, db);
}

/* A gnuplot killed by a signal is named so, with the signal (it once read "exit status -1"); one
 * that exits 3 gives its status. */
static void test_gnuplot_killed(void) {
    char *dir = pl_test_tmpdir(), *prog = pl_test_path(dir, "dies"), *script = pl_test_path(dir, "s.gp");
    char *fig = pl_test_path(dir, "f.png");
    const char *body[] = {"#!/bin/sh\nkill -9 $$\n", "#!/bin/sh\nexit 3\n"};
    const char *says[] = {"gnuplot was killed by signal 9", "(exit status 3)"};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(prog, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs(body[k], f);
        fclose(f);
        CU_ASSERT_EQUAL(chmod(prog, 0755), 0);
        pl_err e;
        pl_err_clear(&e);
        CU_ASSERT_NOT_EQUAL(store_plot_gnuplot(prog, script, fig, STORE_GNUPLOT_TIMEOUT_S, &e), PL_OK);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, says[k]));
    }
    free(prog);
    free(script);
    free(fig);
    pl_test_rmdir(dir);
    free(dir);
}

/* PIPELAB_GNUPLOT naming a path that holds no program says why: no such file, or a folder (the
 * audit's `PIPELAB_GNUPLOT=/nonexistent`, a folder there, had been reported as "Permission
 * denied" by the exec that followed), by the library and by `pipelab plot` (exit 1, nothing
 * drawn). */
static void test_gnuplot_missing(void) {
    char *dir = pl_test_tmpdir(), *missing = pl_test_path(dir, "no-gnuplot"), *db = pl_test_path(dir, "g.db");
    char *png = pl_test_path(dir, "g.png");
    const char *was_gp = getenv(STORE_GNUPLOT_ENV);
    char *old_gp = was_gp ? strdup(was_gp) : NULL;
    const struct { const char *value; int err; } cases[] = {{missing, ENOENT}, {dir, EISDIR}};
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' simulate --kind 1f1b --ranks 2 --microbatches 2 --db '%s' >/dev/null", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[1024];
        snprintf(want, sizeof want, "%s=%s is not an executable program (%s)", STORE_GNUPLOT_ENV, cases[i].value,
                 strerror(cases[i].err));
        pl_err e;
        pl_err_clear(&e);
        setenv(STORE_GNUPLOT_ENV, cases[i].value, 1);
        char *found = store_gnuplot_find(&e);
        CU_ASSERT_PTR_NULL(found);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
        free(found);
        set_env(STORE_GNUPLOT_ENV, old_gp);
        char *out = NULL;
        snprintf(cmd, sizeof cmd, "PIPELAB_GNUPLOT='%s' '%s' plot bubble --db '%s' -o '%s'", cases[i].value, PIPELAB_BIN,
                 db, png);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
        CU_ASSERT(out && strstr(out, want) && !strstr(out, strerror(EACCES)));
        free(out);
        CU_ASSERT(!pl_test_exists(png));
    }
    free(old_gp);
    free(png);
    free(missing);
    fresh_done(dir, db);
}

/* Writes an executable shell script body at dir/name; returns its malloc'd path. */
static char *script_file(const char *dir, const char *name, const char *body) {
    char *path = pl_test_path(dir, name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(body, f);
    fclose(f);
    CU_ASSERT_EQUAL(chmod(path, 0755), 0);
    return path;
}

/* A gnuplot that does not end is stopped after $PIPELAB_GNUPLOT_TIMEOUT seconds and named so
 * (exit 1), with its process group: a wrapper script that runs the hung program without exec
 * takes the program with it (else it would hold pipelab's output open for a minute). The figure
 * it may have half written is removed, an older one of that name too. A value that is no time
 * above 0 is refused before anything is written. gnuplot reads /dev/null, not pipelab's input,
 * so that a script that waits for a key cannot wait there. */
static void test_gnuplot_timeout(void) {
    char *dir = pl_test_tmpdir(), *db = pl_test_path(dir, "t.db"), *png = pl_test_path(dir, "t.png");
    char *mark = pl_test_path(dir, "stdin"), *dat = pl_test_path(dir, "t.dat");
    char body[2048];
    char *hang = script_file(dir, "hang", "#!/bin/sh\nexec sleep 60\n");
    char *wrap = script_file(dir, "wrap", "#!/bin/sh\nsleep 60\necho done\n"); /* no exec: sh waits for its child */
    snprintf(body, sizeof body, "#!/bin/sh\nreadlink /proc/self/fd/0 > '%s'\n", mark);
    char *input = script_file(dir, "input", body);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' simulate --kind 1f1b --ranks 2 --microbatches 2 --db '%s' >/dev/null", PIPELAB_BIN, db);
    CU_ASSERT_EQUAL_FATAL(pl_test_run(cmd, NULL), 0);
    const char *progs[] = {hang, wrap};
    for (int k = 0; k < 2; k++) {
        FILE *old = fopen(png, "w"); /* an older figure of the name */
        CU_ASSERT_PTR_NOT_NULL_FATAL(old);
        fputs("old figure", old);
        fclose(old);
        snprintf(cmd, sizeof cmd, "PIPELAB_GNUPLOT='%s' PIPELAB_GNUPLOT_TIMEOUT=0.5 '%s' plot bubble --db '%s' -o '%s'",
                 progs[k], PIPELAB_BIN, db, png);
        double t0 = pl_now_s();
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
        double took = pl_now_s() - t0;
        CU_ASSERT(took < 30); /* stopped, the wrapper's sleep too (pl_test_run reads to the end) */
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "gnuplot did not finish within 0.5 s on "));
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "PIPELAB_GNUPLOT_TIMEOUT sets the limit"));
        if (!out || !strstr(out, "did not finish") || took >= 30)
            fprintf(stderr, "\n%s -> %s (%.1f s)\n", cmd, out ? out : "(nothing)", took);
        free(out);
        CU_ASSERT(!pl_test_exists(png));
    }
    /* pipelab's own input is a file, which gnuplot does not get (it writes no figure: exit 1) */
    snprintf(cmd, sizeof cmd, "PIPELAB_GNUPLOT='%s' '%s' plot bubble --db '%s' -o '%s' < '%s'", input, PIPELAB_BIN, db, png, db);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "gnuplot wrote no figure"));
    free(out);
    char in[64] = "";
    FILE *f = fopen(mark, "r");
    CU_ASSERT_PTR_NOT_NULL(f);
    if (f) {
        CU_ASSERT_PTR_NOT_NULL(fgets(in, sizeof in, f));
        fclose(f);
    }
    CU_ASSERT_STRING_EQUAL(in, "/dev/null\n");
    remove(dat);
    const char *bad[] = {"0", "-1", "soon", "5s", "1e9", "nan", "inf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        remove(mark);
        snprintf(cmd, sizeof cmd, "PIPELAB_GNUPLOT='%s' PIPELAB_GNUPLOT_TIMEOUT='%s' '%s' plot bubble --db '%s' -o '%s'", input,
                 bad[i], PIPELAB_BIN, db, png);
        CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
        char want[256];
        snprintf(want, sizeof want, "PIPELAB_GNUPLOT_TIMEOUT=%s: wants the seconds one gnuplot run may take, above 0 and at most 1e+07",
                 bad[i]);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, want));
        if (!out || !strstr(out, want)) fprintf(stderr, "\n%s -> %s\n", cmd, out ? out : "(nothing)");
        free(out);
        CU_ASSERT(!pl_test_exists(mark)); /* refused before gnuplot ran */
        CU_ASSERT(!pl_test_exists(dat));  /* and before the figure's data was written */
    }
    free(input);
    free(wrap);
    free(hang);
    free(dat);
    free(mark);
    free(png);
    fresh_done(dir, db);
}

void test_plot_register(void) {
    unsetenv(STORE_GNUPLOT_TIMEOUT_ENV); /* the caller's limit: the default here */
    static const pl_test_case cases[] = {
        {"timeline of a measured run: its median pass", test_timeline_median_pass},
        {"timeline of a real run: the median pass's actions", test_timeline_real_run},
        {"timeline of a run with 50000 ranks refused; 100000000: a damaged database", test_timeline_huge_ranks},
        {"damaged ops and a run of two billion ranks: refused as damaged", test_damaged_ops},
        {"throughput: labels by ranks and chunks, one style per curve", test_throughput_labels},
        {"bubble: one style per curve, panels per tag", test_bubble_styles},
        {"accuracy: the axes frame the data", test_accuracy_frame},
        {"plot flags", test_plot_flags},
        {"default figure names: tags that differ in dropped characters do not collide", test_default_names},
        {"PIPELAB_GNUPLOT without a '/': looked up on PATH", test_gnuplot_on_path},
        {"PIPELAB_GNUPLOT naming no program: says why (no such file, a folder)", test_gnuplot_missing},
        {"a gnuplot killed by a signal, or failing, is named so", test_gnuplot_killed},
        {"a gnuplot that does not end is stopped at PIPELAB_GNUPLOT_TIMEOUT; it reads /dev/null", test_gnuplot_timeout},
        {NULL, NULL},
    };
    pl_test_suite("plot", cases);
}
