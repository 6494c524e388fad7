/* cmd_plot.c: `pipelab plot KIND`: exports figure data from the database and runs gnuplot. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef PIPELAB_HAVE_PL_RESULTS
#include "store.h"

#define FIGURES_DIR "results/out/figures"

static const char help_text[] =
    "usage: pipelab plot KIND [RUN] [options]\n"
    "\n"
    "Exports data from the results database and draws it with gnuplot (PNG, SVG or PDF). Next to\n"
    "the figure it leaves the data (FIGURE.dat) and the script (FIGURE.gp): `gnuplot FIGURE.gp`\n"
    "redraws it.\n"
    "\n"
    "kinds:\n"
    "  timeline RUN     Gantt chart of one run (id, uid, uid prefix, or the id pipelab db list\n"
    "                   prints) recorded with --trace (simulate or run): one row per rank; F, B,\n"
    "                   I, W in their colours with the microbatch number; sends, receive waits\n"
    "                   and all-reduces as thin bars under each row; a rank's later chunks\n"
    "                   lighter. Of a measured run, its median pass (the pass its per-rank\n"
    "                   figures come from); --all-passes draws every timed pass\n"
    "  bubble           bubble fraction (idle / (ranks x iteration time)) against microbatches, one\n"
    "                   panel per pipeline depth p (and per tag, when the runs carry several),\n"
    "                   one curve per schedule; dashed: the analytic (p-1)/(m+p-1) of gpipe and\n"
    "                   1f1b, and (p-1)/(v m+p-1) of interleaved with v chunks (Megatron's\n"
    "                   bubble-to-compute ratio (p-1)/(v m) as a fraction of the iteration,\n"
    "                   r/(1+r)); one legend beside the panels\n"
    "  throughput       samples/s against the pipeline depth p (ranks; --x: stages or\n"
    "                   microbatches), one curve per schedule and chunks per rank v, and per\n"
    "                   value of m (or of p, against m) when it varies: \"interleaved v=2, p = 8\"\n"
    "  memory           peak memory of each rank, one bar per schedule (newest run of each;\n"
    "                   the runs must share one pipeline depth: use --ranks)\n"
    "  accuracy         predicted against measured iteration time of the pairs `pipelab compare`\n"
    "                   finds, with the y = x line and the +-5% band; the axes frame the data\n"
    "                   (logarithmic when it spans more than a factor 4)\n"
    "\n"
    "Curves of one schedule share its colour and differ in shade and marker; measured curves\n"
    "are dotted with open squares.\n"
    "\n"
    "selection (bubble, throughput, memory, accuracy):\n"
    "  --tag T, --schedule K, --ranks P, --stages S, --microbatches M, --chunks V\n"
    "                        (--tag '': the runs stored without a tag)\n"
    "  --sim-tag T, --measured-tag T, --loose   accuracy: as in pipelab compare\n"
    "options:\n"
    "  --db PATH             database (default " STORE_DEFAULT_PATH ")\n"
    "  -o, --output FILE     figure (default " FIGURES_DIR "/KIND[-RUN|-TAG].png; characters\n"
    "                        of RUN or TAG outside A-Z a-z 0-9 . _ - become _, then a hash of it\n"
    "                        follows, as it does a name that ends in - and 8 hex digits, or\n"
    "                        one past 160 characters, cut there; --tag '' is KIND--811c9dc5,\n"
    "                        the hash of the empty name); its extension chooses the\n"
    "                        format: .png, .svg or .pdf\n"
    "                        (gnuplot's pngcairo, svg and pdfcairo terminals)\n"
    "  --svg                 SVG instead of PNG for the default name\n"
    "  --x ranks|stages|microbatches   throughput's x axis (default ranks)\n"
    "  --all-passes          timeline of a measured run: every timed pass, not the median one\n"
    "  --title TEXT          replace the title\n"
    "  -h, --help            this text\n"
    "\n"
    "gnuplot comes from $PIPELAB_GNUPLOT or PATH (Debian: apt-get install gnuplot-nox). It reads\n"
    "/dev/null and runs in a process group of its own: when it runs past $" STORE_GNUPLOT_TIMEOUT_ENV "\n"
    "seconds (default " PL_XSTR(STORE_GNUPLOT_TIMEOUT_S) "), or pipelab gets SIGINT, SIGTERM or SIGHUP, the group\n"
    "is killed and the figure it was writing removed.\n"
    "exit status: 0 ok, 1 bad input or a failed figure (no such run, nothing to plot, no gnuplot,\n"
    "gnuplot failed or was stopped), 2 bad usage\n";

typedef struct opts {
    store_plot_opts p;
    const char *db, *kind_name, *x;
    char run_key[CLI_RUN_KEY_MAX]; /* RUN as the store takes it ("p:X", as pipelab db list prints a prediction) */
} opts;

enum { O_DB = 1000, O_LOOSE, O_SVG, O_X, O_TITLE, O_ALL_PASSES };

static const struct option long_opts[] = {
    {"db", required_argument, 0, O_DB},
    CLI_FILTER_LONG_OPTS,
    {"loose", no_argument, 0, O_LOOSE},
    {"svg", no_argument, 0, O_SVG},
    {"x", required_argument, 0, O_X},
    {"title", required_argument, 0, O_TITLE},
    {"all-passes", no_argument, 0, O_ALL_PASSES},
    {"output", required_argument, 0, 'o'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

static const struct { const char *name; store_plot_kind kind; } kinds[] = {
    {"timeline", STORE_PLOT_TIMELINE}, {"bubble", STORE_PLOT_BUBBLE}, {"throughput", STORE_PLOT_THROUGHPUT},
    {"memory", STORE_PLOT_MEMORY},     {"accuracy", STORE_PLOT_ACCURACY},
};

/* The values of --x, in store_plot_x's order. */
static const char *const axes[] = {"ranks", "stages", "microbatches"};

/* Returns where path's extension starts (its last '.' after the last '/'), or its end when it
 * has none. */
static const char *path_ext(const char *path) {
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    return dot && (!slash || dot > slash) ? dot : path + strlen(path);
}

/* Parses the flags and KIND [RUN]; returns -1 to continue or an exit code. */
static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    optind = 0;
    opterr = 0;
    int c;
    store_filter *f = &o->p.filter;
    while ((c = getopt_long(argc, argv, ":o:h", long_opts, NULL)) != -1) {
        int frc = cli_filter_opt("plot", c, optarg, f);
        if (frc == CLI_EUSAGE) return frc;
        if (frc == CLI_OK) continue;
        switch (c) {
        case O_DB: o->db = optarg; break;
        case O_LOOSE: o->p.loose = 1; break;
        case O_SVG: o->p.svg = 1; break;
        case O_X: o->x = optarg; break;
        case O_TITLE: o->p.title = optarg; break;
        case O_ALL_PASSES: o->p.all_passes = 1; break;
        case 'o': o->p.output = optarg; break;
        case 'h': fputs(help_text, stdout); return CLI_OK;
        case ':': return cli_usage_error("plot", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("plot", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return cli_usage_error("plot", "which figure? KIND is timeline, bubble, throughput, memory or accuracy");
    o->kind_name = argv[optind++];
    size_t k = 0;
    while (k < sizeof kinds / sizeof kinds[0] && strcmp(kinds[k].name, o->kind_name) != 0) k++;
    if (k == sizeof kinds / sizeof kinds[0])
        return cli_usage_error("plot", "unknown figure '%s' (timeline, bubble, throughput, memory or accuracy)", o->kind_name);
    o->p.kind = kinds[k].kind;
    if (o->p.kind == STORE_PLOT_TIMELINE) {
        if (optind >= argc) return cli_usage_error("plot", "timeline needs a RUN (integer id, uid or uid prefix)");
        o->p.run = cli_run_key(argv[optind++], o->run_key, sizeof o->run_key);
    }
    if (optind < argc) return cli_usage_error("plot", "unexpected argument '%s'", argv[optind]);
    int rc = cli_db_flags("plot", o->db, 0, NULL, 0); /* its files: check_outputs, once they are named */
    if (rc >= 0) return rc;
    o->p.x = STORE_X_RANKS;
    while (o->x && (size_t)o->p.x < sizeof axes / sizeof axes[0] && strcmp(o->x, axes[o->p.x])) o->p.x++;
    if (o->x && (size_t)o->p.x == sizeof axes / sizeof axes[0])
        return cli_usage_error("plot", "--x must be ranks, stages or microbatches (got '%s')", o->x);
    if (o->x && o->p.kind != STORE_PLOT_THROUGHPUT) return cli_usage_error("plot", "--x applies to the throughput figure");
    if (o->p.all_passes && o->p.kind != STORE_PLOT_TIMELINE)
        return cli_usage_error("plot", "--all-passes applies to the timeline figure");
    if (o->p.output) { /* the format follows the name: results/plot.c picks the terminal from it */
        const char *ext = path_ext(o->p.output);
        if (strcmp(ext, ".png") != 0 && strcmp(ext, ".svg") != 0 && strcmp(ext, ".pdf") != 0)
            return cli_usage_error("plot", "--output: '%s' should end in .png, .svg or .pdf (the figure's format)", o->p.output);
        if (o->p.svg && strcmp(ext, ".svg") != 0)
            return cli_usage_error("plot", "--svg: the output '%s' is not a .svg file", o->p.output);
        o->p.svg = strcmp(ext, ".svg") == 0;
    }
    return -1;
}

/* Returns a malloc'd "stem" + ext, where stem is path without its extension. */
static char *with_ext(const char *path, const char *ext) {
    size_t stem = (size_t)(path_ext(path) - path);
    size_t n = stem + strlen(ext) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%.*s%s", (int)stem, path, ext);
    return s;
}

/* Returns the malloc'd default figure path: results/out/figures/KIND[-RUN|-TAG].png|svg, with
 * characters outside [A-Za-z0-9._-] of the suffix replaced by '_' and then, so that two tags
 * that differ only there ("a b", "a/b", "a_b") do not write one figure, "-" and 8 hex digits of
 * the suffix's 32-bit FNV-1a hash (also after a kept suffix that ends as such a name does). A
 * suffix keeps its first PLOT_NAME_KEEP characters, the hash following when it had more, so that
 * the file name stays within the 255 bytes a file system allows. An empty tag (--tag '': the runs
 * stored without one) is a changed suffix too: KIND--HASH, not KIND-. */
#define PLOT_NAME_KEEP 160
static char *default_output(const opts *o) {
    const char *suffix = o->p.run ? o->p.run : o->p.filter.tag;
    size_t n = strlen(FIGURES_DIR) + strlen(o->kind_name) + (suffix ? strlen(suffix) : 0) + sizeof "/--12345678.png";
    char *s = malloc(n);
    if (!s) return NULL;
    int len = snprintf(s, n, "%s/%s", FIGURES_DIR, o->kind_name);
    if (suffix) {
        s[len++] = '-';
        int changed = !*suffix;
        uint32_t hash = 2166136261u; /* FNV-1a's offset basis and prime */
        for (const char *p = suffix; *p; p++) {
            char ch = *p;
            int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
            if ((size_t)(p - suffix) < PLOT_NAME_KEEP) s[len++] = ok ? ch : '_';
            changed |= !ok || (size_t)(p - suffix) >= PLOT_NAME_KEEP;
            hash = (hash ^ (unsigned char)ch) * 16777619u;
        }
        /* a kept name that ends as a hashed one does ("a_b-10a3f9f2", the name of the tag "a b")
         * gets its own hash too, so that it cannot be another tag's figure; in either case, for
         * file systems that ignore it */
        size_t sl = strlen(suffix);
        int hashed_look = sl >= 9 && suffix[sl - 9] == '-' && strspn(suffix + sl - 8, "0123456789abcdefABCDEF") == 8;
        if (changed || hashed_look) len += snprintf(s + len, n - (size_t)len, "-%08" PRIx32, hash);
    }
    snprintf(s + len, n - (size_t)len, "%s", o->p.svg ? ".svg" : ".png");
    return s;
}

/* Refuses the files plot writes (the figure out, its data file and its script beside it) where
 * one is the database --db names. Returns -1 to go on, or the exit code of the refusal (a usage
 * error). */
static int check_outputs(const opts *o, const char *out, const char *data, const char *script) {
    const char *files[] = {data, script}, *roles[] = {"data file", "gnuplot script"};
    pl_err e;
    pl_err_clear(&e);
    if (store_check_output(o->db, o->p.output ? "-o" : "the figure", out, &e) != PL_OK)
        return cli_usage_error("plot", "%s", e.msg);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        pl_buf what;
        pl_buf_init(&what);
        pl_buf_printf(&what, "%s%s's %s", o->p.output ? "-o " : "", out, roles[i]);
        int code = what.failed ? pl_errf(&e, PL_ENOMEM, "out of memory") : store_check_output(o->db, what.data, files[i], &e);
        pl_buf_free(&what);
        if (code != PL_OK) return code == PL_ENOMEM ? cli_fail(&e) : cli_usage_error("plot", "%s", e.msg);
    }
    return -1;
}

/* Entry point of `pipelab plot`: exports the data, writes the gnuplot script and runs it; prints
 * the figure's path and returns an exit code. */
int cli_plot(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    pl_err e;
    pl_err_clear(&e);
    char *gnuplot = NULL;
    char *out = o.p.output ? strdup(o.p.output) : default_output(&o);
    char *data = out ? with_ext(out, ".dat") : NULL, *script = out ? with_ext(out, ".gp") : NULL;
    store *s = NULL;
    if (!out || !data || !script) {
        pl_errf(&e, PL_ENOMEM, "out of memory");
        rc = cli_fail(&e);
        goto done;
    }
    if ((rc = check_outputs(&o, out, data, script)) >= 0) goto done;
    double limit_s;
    if (store_gnuplot_timeout(&limit_s, &e) != PL_OK || !(gnuplot = store_gnuplot_find(&e))) {
        rc = cli_fail(&e);
        goto done;
    }
    o.p.output = out;
    o.p.data = data;
    o.p.script = script;
    if (store_open(o.db, 1, &s, &e) != PL_OK || store_plot_prepare(s, &o.p, &e) != PL_OK) {
        rc = cli_fail(&e);
        goto done;
    }
    store_close(s);
    s = NULL;
    if (store_plot_gnuplot(gnuplot, script, out, limit_s, &e) != PL_OK) {
        rc = cli_fail(&e);
        goto done;
    }
    printf("%s\n", out);
    rc = CLI_OK;
done:
    store_close(s);
    free(gnuplot);
    free(out);
    free(data);
    free(script);
    return rc;
}

#else
/* Returns CLI_EUSER: this build has no results store. */
int cli_plot(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "pipelab plot: this build has no results store (SQLite)\n");
    return CLI_EUSER;
}
#endif
