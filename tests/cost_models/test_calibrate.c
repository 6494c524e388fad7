/* test_calibrate.c: calibration recovers known parameters from seeded synthetic observations. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost.h"
#include "pl_test.h"
#include "test_partition.h"

void test_calibrate_register(void);

/* The "true" machine the observations are drawn from. */
#define PEAK 1e12
#define EFF 0.4
#define LAUNCH 5e-6
#define INTRA_A 2e-6
#define INTRA_BW 5e10
#define INTER_A 1e-5
#define INTER_BW 1.25e9

/* Draws n observations of each kind with Gaussian noise of relative size rel (seeded). */
static cost_observation *synthetic(size_t n, double rel, unsigned long seed) {
    cost_observation *o = calloc(3 * n, sizeof *o);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (size_t k = 0; k < n; k++) {
        double flops = 1e6 * pow(10.0, 3.0 * gsl_rng_uniform(r)); /* 1e6 .. 1e9 */
        double t = LAUNCH + flops / (PEAK * EFF);
        o[k] = (cost_observation){COST_OBS_COMPUTE, flops, 0, t * (1 + gsl_ran_gaussian(r, rel))};
        double b1 = 1e3 + 1e6 * gsl_rng_uniform(r);
        t = INTRA_A + b1 / INTRA_BW;
        o[n + k] = (cost_observation){COST_OBS_INTRA, 0, b1, t * (1 + gsl_ran_gaussian(r, rel))};
        double b2 = 1e3 + 1e6 * gsl_rng_uniform(r);
        t = INTER_A + b2 / INTER_BW;
        o[2 * n + k] = (cost_observation){COST_OBS_INTER, 0, b2, t * (1 + gsl_ran_gaussian(r, rel))};
    }
    gsl_rng_free(r);
    return o;
}

static void test_recovers_parameters(void) {
    cost_observation *o = synthetic(200, 0.01, 42);
    cost_fit f;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_calibrate(o, 600, PEAK, 0, &f, &e), PL_OK);
    CU_ASSERT(f.have_compute && f.have_intra && f.have_inter);
    CU_ASSERT_EQUAL(f.n_compute, 200);
    CU_ASSERT(fabs(f.efficiency - EFF) / EFF < 0.02);
    CU_ASSERT(fabs(f.intra_bw_Bps - INTRA_BW) / INTRA_BW < 0.02);
    CU_ASSERT(fabs(f.inter_bw_Bps - INTER_BW) / INTER_BW < 0.02);
    CU_ASSERT(fabs(f.intra_latency_s - INTRA_A) / INTRA_A < 0.2);
    CU_ASSERT(fabs(f.inter_latency_s - INTER_A) / INTER_A < 0.2);
    CU_ASSERT(f.launch_s >= 0 && f.launch_s < 5e-5);
    CU_ASSERT(f.compute_r2 > 0.99 && f.intra_r2 > 0.99 && f.inter_r2 > 0.99);
    free(o);
    /* Noise-free data comes back (almost) exactly. */
    o = synthetic(50, 0.0, 7);
    CU_ASSERT_EQUAL_FATAL(cost_calibrate(o, 150, PEAK, 0, &f, &e), PL_OK);
    CU_ASSERT_DOUBLE_EQUAL(f.efficiency, EFF, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(f.launch_s, LAUNCH, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(f.intra_latency_s, INTRA_A, 1e-12);
    CU_ASSERT(fabs(f.inter_bw_Bps - INTER_BW) / INTER_BW < 1e-9);
    free(o);
}

static void test_calibrate_bad_input(void) {
    cost_fit f;
    pl_err e;
    cost_observation two[2] = {{COST_OBS_COMPUTE, 1e6, 0, 1e-3}, {COST_OBS_COMPUTE, 2e6, 0, 2e-3}};
    CU_ASSERT_EQUAL(cost_calibrate(two, 2, PEAK, 0, &f, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "at least 3 observations"));
    cost_observation same[3] = {{COST_OBS_INTRA, 0, 1e6, 1e-3}, {COST_OBS_INTRA, 0, 1e6, 2e-3}, {COST_OBS_INTRA, 0, 1e6, 3e-3}};
    CU_ASSERT_EQUAL(cost_calibrate(same, 3, PEAK, 0, &f, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "two different sizes"));
    cost_observation down[3] = {{COST_OBS_INTER, 0, 1e3, 3e-3}, {COST_OBS_INTER, 0, 1e6, 2e-3}, {COST_OBS_INTER, 0, 1e7, 1e-3}};
    CU_ASSERT_EQUAL(cost_calibrate(down, 3, PEAK, 0, &f, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not positive"));
    cost_observation ok[3] = {{COST_OBS_COMPUTE, 1e6, 0, 1e-3}, {COST_OBS_COMPUTE, 2e6, 0, 2e-3}, {COST_OBS_COMPUTE, 3e6, 0, 3e-3}};
    CU_ASSERT_EQUAL(cost_calibrate(ok, 3, 0.0, 0, &f, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "peak FLOP/s"));
    CU_ASSERT_EQUAL(cost_calibrate(ok, 0, PEAK, 0, &f, &e), PL_EINPUT);
    /* Lenient: the unusable group is skipped and named, the others are fitted. */
    cost_observation mix[6] = {ok[0], ok[1], ok[2], same[0], same[1], same[2]};
    CU_ASSERT_EQUAL(cost_calibrate(mix, 6, PEAK, 0, &f, &e), PL_EINPUT);
    CU_ASSERT_EQUAL_FATAL(cost_calibrate(mix, 6, PEAK, 1, &f, &e), PL_OK);
    CU_ASSERT(f.have_compute && !f.have_intra);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.skipped, "intra-server transfer needs observations of at least two different sizes"));
    CU_ASSERT_EQUAL(cost_calibrate(same, 3, PEAK, 1, &f, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "nothing could be fitted"));
}

static void test_observations_csv(void) {
    cost_observation *o = NULL;
    size_t n = 0;
    pl_err e;
    const char *good = "# measured\nkind,flops,bytes,seconds\ncompute,1e9,,0.0025\r\nintra,,1048576,1.2e-5\n\ninter, 0 ,4096,3e-5\n";
    CU_ASSERT_EQUAL_FATAL(cost_observations_parse(good, "obs.csv", &o, &n, &e), PL_OK);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(o[0].kind, COST_OBS_COMPUTE);
    CU_ASSERT_DOUBLE_EQUAL(o[0].flops, 1e9, 0);
    CU_ASSERT_EQUAL(o[2].kind, COST_OBS_INTER);
    CU_ASSERT_DOUBLE_EQUAL(o[2].bytes, 4096, 0);
    free(o);
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"", "obs.csv:1: empty file"},
        {"kind,flops,seconds\n", "obs.csv:1: expected the header"},
        {"kind,flops,bytes,seconds\n", "obs.csv:1: no observations"},
        {"kind,flops,bytes,seconds\ncompute,1e9,0\n", "obs.csv:2: expected 4 fields"},
        {"kind,flops,bytes,seconds\ngpu,1e9,0,1\n", "obs.csv:2: unknown kind 'gpu'"},
        {"kind,flops,bytes,seconds\ncompute,,0,1\n", "obs.csv:2: flops must be"},
        {"kind,flops,bytes,seconds\nintra,0,-5,1\n", "obs.csv:2: bytes must be"},
        {"kind,flops,bytes,seconds\n\ninter,0,5,abc\n", "obs.csv:3: seconds must be"},
        {NULL, NULL},
    };
    for (int k = 0; bad[k].text; k++) {
        pl_err_clear(&e);
        CU_ASSERT_EQUAL(cost_observations_parse(bad[k].text, "obs.csv", &o, &n, &e), PL_EINPUT);
        if (!strstr(e.msg, bad[k].want)) {
            fprintf(stderr, "\ncase %d: want '%s' got '%s'\n", k, bad[k].want, e.msg);
            CU_FAIL("bad observations message");
        }
    }
}

static void test_calibrate_cli(void) {
    CU_ASSERT_FATAL(cli_has("calibrate"));
    char *dir = pl_test_tmpdir();
    char *obs = pl_test_path(dir, "obs.csv"), *ini = pl_test_path(dir, "fitted.ini");
    cost_observation *o = synthetic(100, 0.005, 3);
    FILE *f = fopen(obs, "w");
    fprintf(f, "kind,flops,bytes,seconds\n");
    static const char *const kinds[] = {"compute", "intra", "inter"};
    for (int k = 0; k < 300; k++) fprintf(f, "%s,%.17g,%.17g,%.17g\n", kinds[o[k].kind], o[k].flops, o[k].bytes, o[k].seconds);
    fclose(f);
    free(o);
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s calibrate --observations %s --set device.flops_fp32=1e12 -o %s", PIPELAB_BIN, obs, ini);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    int warned = out && strstr(out, "warning") != NULL;
    free(out);
    out = NULL;
    cost_hw hw;
    pl_err e;
    CU_ASSERT_EQUAL_FATAL(cost_hw_load(&hw, ini, &e), PL_OK);
    CU_ASSERT(fabs(hw.efficiency - EFF) / EFF < 0.02);
    CU_ASSERT(fabs(hw.inter_bandwidth_Bps - INTER_BW) / INTER_BW < 0.02);
    CU_ASSERT(fabs(hw.intra_bandwidth_Bps - INTRA_BW) / INTRA_BW < 0.02);
    /* the synthetic fit is good: no warning; a fit that explains little gets one */
    CU_ASSERT(!warned);
    FILE *g = fopen(obs, "w");
    fprintf(g, "kind,flops,bytes,seconds\ncompute,1e9,0,0.005\ncompute,2e9,0,0.001\ncompute,3e9,0,0.006\n"
               "compute,1e9,0,0.002\ncompute,2e9,0,0.007\ncompute,3e9,0,0.003\n"); /* R^2 = 1/28 */
    fclose(g);
    snprintf(cmd, sizeof cmd, "%s calibrate --observations %s --set device.flops_fp32=1e13 -o %s", PIPELAB_BIN, obs, ini);
    char *out2 = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out2), 0);
    CU_ASSERT_PTR_NOT_NULL(out2 ? strstr(out2, "warning: the compute fit explains 4% of the variation of its times (R^2 0.04") : NULL);
    free(out2);
    snprintf(cmd, sizeof cmd, "%s calibrate --observations %s/missing.csv", PIPELAB_BIN, dir);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    free(out);
    remove(obs);
    remove(ini);
    free(obs);
    free(ini);
    rmdir(dir);
    free(dir);
}

/* Values too large for the least-squares sums are refused where they are read, with the file and
 * line; a fit that still comes out non-finite (sizes too small to square) says it overflowed,
 * never "-nan ... do not grow with size"; the command exits 1 naming the file and line. */
static void test_calibrate_overflow(void) {
    static const struct {
        const char *row, *want;
    } big[] = {
        {"compute,1e300,0,1e-300", "obs.csv:4: flops 1e300 is too large to fit (at most 1e+150"},
        {"compute,2e300,0,1e300", "obs.csv:4: flops 2e300 is too large to fit"},
        {"compute,1.5e308,0,1e308", "obs.csv:4: flops 1.5e308 is too large to fit"},
        {"intra,0,1e6,1e200", "obs.csv:4: seconds 1e200 is too large to fit"},
        {"inter,0,1e151,1", "obs.csv:4: bytes 1e151 is too large to fit"},
        {NULL, NULL},
    };
    cost_observation *o = NULL;
    size_t n = 0;
    pl_err e;
    for (int k = 0; big[k].row; k++) {
        char text[256];
        snprintf(text, sizeof text, "kind,flops,bytes,seconds\ncompute,1e9,0,1e-3\ncompute,2e9,0,2e-3\n%s\n", big[k].row);
        pl_err_clear(&e);
        CU_ASSERT_EQUAL(cost_observations_parse(text, "obs.csv", &o, &n, &e), PL_EINPUT);
        if (!strstr(e.msg, big[k].want)) {
            fprintf(stderr, "\ncase %d: want '%s' got '%s'\n", k, big[k].want, e.msg);
            CU_FAIL("too-large observation message");
        }
    }
    /* the largest value taken still fits */
    CU_ASSERT_EQUAL(cost_observations_parse("kind,flops,bytes,seconds\ncompute,1e150,0,1\n", "obs.csv", &o, &n, &e), PL_OK);
    free(o);
    cost_fit f;
    cost_observation tiny[3] = {{COST_OBS_COMPUTE, 1e-300, 0, 1}, {COST_OBS_COMPUTE, 2e-300, 0, 2}, {COST_OBS_COMPUTE, 3e-300, 0, 3}};
    CU_ASSERT_EQUAL(cost_calibrate(tiny, 3, PEAK, 0, &f, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "calibrate: compute: the least-squares fit overflowed (sizes 1e-300 to 3e-300)"));
    CU_ASSERT_PTR_NULL(strstr(e.msg, "nan"));
    cost_observation huge[3] = {{COST_OBS_INTRA, 0, 1e300, 1e-300}, {COST_OBS_INTRA, 0, 2e300, 1e300}, {COST_OBS_INTRA, 0, 1.5e308, 1e308}};
    CU_ASSERT_EQUAL(cost_calibrate(huge, 3, PEAK, 0, &f, &e), PL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "intra-server transfer: the least-squares fit overflowed"));
    CU_ASSERT_PTR_NULL(strstr(e.msg, "nan"));

    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char *obs = pl_test_path(dir, "obs.csv");
    FILE *g = fopen(obs, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    fprintf(g, "kind,flops,bytes,seconds\ncompute,1e300,0,1e-300\ncompute,2e300,0,1e300\ncompute,1.5e308,0,1e308\n");
    fclose(g);
    char cmd[2048], *out = NULL, want[1024];
    snprintf(cmd, sizeof cmd, "%s calibrate --observations %s --set device.flops_fp32=1e12", PIPELAB_BIN, obs);
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 1);
    snprintf(want, sizeof want, "%s:2: flops 1e300 is too large to fit", obs);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want) : NULL);
    CU_ASSERT_PTR_NULL(out ? strstr(out, "nan") : NULL);
    free(out);
    remove(obs);
    free(obs);
    rmdir(dir);
    free(dir);
}

void test_calibrate_register(void) {
    static const pl_test_case cases[] = {
        {"calibration recovers known parameters (seeded noise)", test_recovers_parameters},
        {"calibration refuses unusable observations", test_calibrate_bad_input},
        {"observations CSV and its file:line errors", test_observations_csv},
        {"pipelab calibrate (CLI)", test_calibrate_cli},
        {"values too large to fit: file:line, no NaN", test_calibrate_overflow},
        {NULL, NULL},
    };
    pl_test_suite("calibrate", cases);
}
