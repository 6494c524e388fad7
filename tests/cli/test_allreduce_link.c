/* test_allreduce_link.c: simulate and partition price REDUCE_GRAD from the profile's measured
 * all-reduce (the rule pipelab run's prediction uses): a replicated stage's simulated iteration
 * grows by exactly the measured ring of its gradients, --allreduce-link picks the transport or
 * the hardware's links, and a slow measured all-reduce stops the planner from replicating. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_common.h"
#include "pl_test.h"

/* Three equal layers of 1 ms per pass and 4 MB of parameters: on 2 free workers the planner
 * replicates the whole model (9 ms / 2) rather than split it (6 ms), unless the all-reduce costs. */
#define AR_PROFILE                                                              \
    "layer,name,fwd_s,bwd_in_s,bwd_w_s,param_bytes,out_bytes,stash_bytes\n"    \
    "0,a,1e-3,1e-3,1e-3,4000000,1000,1000\n1,b,1e-3,1e-3,1e-3,4000000,1000,1000\n" \
    "2,c,1e-3,1e-3,1e-3,4000000,1000,1000\n"
#define AR_PARAM_BYTES 12e6
/* The measured links of the profile: threads slow, MPI slower. */
#define AR_LAT_S 1e-3
#define AR_BPS 1e6
#define AR_MPI_LAT_S 2e-3
#define AR_MPI_BPS 5e5
#define AR_THREADS_KEYS "#@ allreduce_latency_s=1e-3 allreduce_Bps=1e6\n"
#define AR_MPI_KEYS "#@ allreduce_mpi_latency_s=2e-3 allreduce_mpi_Bps=5e5\n"

/* The ring all-reduce of bytes over n replicas on a link of bandwidth Bps and latency lat_s, in
 * closed form: 2 (n - 1) / n bytes / Bps + 2 (n - 1) lat_s (DESIGN.md §4). */
static double ring_s(int n, double bytes, double Bps, double lat_s) {
    return 2.0 * (n - 1) / n * bytes / Bps + 2.0 * (n - 1) * lat_s;
}

/* Writes "#@ name=three" then meta then AR_PROFILE to dir/name; returns the path (free it). */
static char *write_profile(const char *dir, const char *name, const char *meta) {
    char *p = pl_test_path(dir, name);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "#@ name=three microbatch_size=1\n%s%s", meta, AR_PROFILE);
    fclose(f);
    return p;
}

/* Returns the value of CSV column col in the first data row of out (header first), NAN if absent. */
static double csv_col(const char *out, const char *col) {
    if (!out) return NAN;
    const char *nl = strchr(out, '\n');
    if (!nl) return NAN;
    int k = 0;
    for (const char *c = out; c < nl; k++) {
        const char *e = memchr(c, ',', (size_t)(nl - c));
        size_t n = e ? (size_t)(e - c) : (size_t)(nl - c);
        if (n == strlen(col) && strncmp(c, col, n) == 0) {
            const char *v = nl + 1;
            for (int j = 0; j < k && v; j++) {
                v = strchr(v, ',');
                if (v) v++;
            }
            return v ? strtod(v, NULL) : NAN;
        }
        c = e ? e + 1 : nl;
    }
    return NAN;
}

/* Runs `pipelab cmd args --format csv` on profile prof (stderr to err, or /dev/null); returns
 * stdout (free it), NULL on failure. */
static char *run_csv(const char *cmd, const char *args, const char *prof, const char *err) {
    char *out = NULL;
    char full[2048];
    snprintf(full, sizeof full, "( cd /tmp && '%s' %s %s %s %s --format csv 2>%s )", PIPELAB_BIN, cmd,
             strcmp(cmd, "simulate") == 0 ? "--no-db --model" : "--profile", prof, args, err ? err : "/dev/null");
    if (pl_test_run(full, &out) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Returns the simulated iteration time of one stage replicated twice on profile prof with the
 * extra flags. */
static double sim_iteration(const char *prof, const char *extra, const char *err) {
    char args[512];
    snprintf(args, sizeof args, "--kind 1f1b --ranks 1 --microbatches 4 --replicas 2 %s", extra);
    char *out = run_csv("simulate", args, prof, err);
    double t = csv_col(out, "iteration_time_s");
    free(out);
    return t;
}

/* Returns 1 when file path holds text. */
static int file_has(const char *path, const char *text) {
    char *s = NULL;
    size_t n = 0;
    pl_err e;
    int ok = pl_read_file(path, 1 << 20, &s, &n, &e) == PL_OK && s && strstr(s, text);
    free(s);
    return ok;
}

/* simulate: the replicated stage's iteration is the one without a measurement (free links) plus
 * cost_ring_allreduce_s of its gradients on the transport's measured link; --allreduce-link
 * hardware ignores the measurement; mpi without an MPI measurement takes the threads' one and
 * says so. */
static void test_simulate_measured_link(void) {
    char *dir = pl_test_tmpdir();
    char *p0 = write_profile(dir, "p0.csv", ""), *pt = write_profile(dir, "pt.csv", AR_THREADS_KEYS);
    char *pb = write_profile(dir, "pb.csv", AR_THREADS_KEYS AR_MPI_KEYS), *err = pl_test_path(dir, "err.txt");
    double free_s = sim_iteration(p0, "", NULL);
    double thr = ring_s(2, AR_PARAM_BYTES, AR_BPS, AR_LAT_S);
    double mpi = ring_s(2, AR_PARAM_BYTES, AR_MPI_BPS, AR_MPI_LAT_S);
    /* The baseline in closed form: one 1F1B stage of the 3 layers, F = 3 x 1 ms = 3 ms and
     * B = 3 x (1 + 1) ms = 6 ms per microbatch; 1F1B-RR puts microbatches 0, 2 on replica 0 and
     * 1, 3 on replica 1, each replica running F B F B back to back (one stage: no warm-up, no
     * transfers), 2 x (3 + 6) = 18 ms; the flush's one all-reduce of the 12 MB over 2 replicas on
     * the free links (COST_FREE_LINK_BPS = 1e30, no latency) adds 1.2e-23 s: 18 ms (1e-9 relative,
     * the CSV's 9 significant digits). */
    CU_ASSERT_DOUBLE_EQUAL(free_s, 2 * (3e-3 + 6e-3) + ring_s(2, AR_PARAM_BYTES, 1e30, 0), 1e-9 * 18e-3);
    CU_ASSERT(fabs(sim_iteration(pt, "", NULL) - (free_s + thr)) <= 1e-9 * thr);
    CU_ASSERT(fabs(sim_iteration(pb, "", NULL) - (free_s + thr)) <= 1e-9 * thr);
    CU_ASSERT(fabs(sim_iteration(pb, "--allreduce-link mpi", NULL) - (free_s + mpi)) <= 1e-9 * mpi);
    CU_ASSERT(fabs(sim_iteration(pb, "--allreduce-link hardware", NULL) - free_s) <= 1e-12);
    CU_ASSERT(fabs(sim_iteration(pt, "--allreduce-link mpi", err) - (free_s + thr)) <= 1e-9 * thr);
    CU_ASSERT(file_has(err, "has no mpi all-reduce measurement: REDUCE_GRAD priced on its threads one"));
    CU_ASSERT(sim_iteration(p0, "", err) > 0);
    CU_ASSERT(file_has(err, "has no all-reduce measurements: REDUCE_GRAD priced on the hardware's links"));
    char line[1024];
    snprintf(line, sizeof line, "'%s' simulate --no-db --model %s --ranks 1 --allreduce-link fast 2>&1", PIPELAB_BIN, pt);
    char *out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(line, &out), 2);
    CU_ASSERT(out && strstr(out, "--allreduce-link must be threads, mpi or hardware (got 'fast')"));
    free(out);
    free(p0);
    free(pt);
    free(pb);
    free(err);
    free(dir);
}

/* partition: on free links the planner replicates the whole model over the 2 workers; with the
 * profile's slow measured all-reduce it splits it into two stages instead, each stage priced
 * with the measured ring (the data-parallel baseline too), and --allreduce-link hardware plans
 * as without the measurement. */
static void test_partition_measured_link(void) {
    char *dir = pl_test_tmpdir();
    char *p0 = write_profile(dir, "p0.csv", ""), *pt = write_profile(dir, "pt.csv", AR_THREADS_KEYS);
    char *out = run_csv("partition", "--workers 2", p0, NULL);
    CU_ASSERT(csv_col(out, "replicas") == 2 && csv_col(out, "last_layer") == 2);
    free(out);
    /* Two one-replica stages, the cut after layer 0 or 1: in exact arithmetic both give stages of
     * 3 and 6 ms and tie at 6 ms (the tie rule would keep the first found, the cut after layer 0),
     * but the planner's prefix sums make 9 ms - 3 ms one ulp above 6 ms, so which cut wins is a
     * rounding artifact and not pinned here. What is determined: the first stage's time is 3 ms
     * per layer it holds (no all-reduce on one replica), and the bottleneck (JSON below) 6 ms. */
    out = run_csv("partition", "--workers 2", pt, NULL);
    double cut = csv_col(out, "last_layer");
    CU_ASSERT(csv_col(out, "replicas") == 1 && (cut == 0 || cut == 1));
    CU_ASSERT_DOUBLE_EQUAL(csv_col(out, "time_s"), 3e-3 * (cut + 1), 1e-9 * 6e-3);
    CU_ASSERT_EQUAL(csv_col(out, "allreduce_s"), 0);
    free(out);
    out = run_csv("partition", "--workers 2 --allreduce-link hardware", pt, NULL);
    CU_ASSERT(csv_col(out, "replicas") == 2);
    free(out);
    /* the data-parallel baseline (the whole model on both workers) pays the measured ring too */
    char line[1024];
    snprintf(line, sizeof line, "( cd /tmp && '%s' partition --profile %s --workers 2 --format json 2>/dev/null )",
             PIPELAB_BIN, pt);
    CU_ASSERT_EQUAL(pl_test_run(line, &out), 0);
    const char *dp = out ? strstr(out, "\"data_parallel_s\":") : NULL;
    double want = (9e-3 + ring_s(2, AR_PARAM_BYTES, AR_BPS, AR_LAT_S)) / 2;
    CU_ASSERT(dp && fabs(strtod(dp + strlen("\"data_parallel_s\":"), NULL) - want) <= 1e-9 * want);
    /* the split's bottleneck: max(3 ms, 6 ms, cut 2 x 1000 B / 1e30 B/s) = 6 ms, config "1-1" */
    CU_ASSERT_DOUBLE_EQUAL(pl_test_json_number(out, "bottleneck_s"), 6e-3, 1e-9 * 6e-3);
    CU_ASSERT(out && strstr(out, "\"config\":\"1-1\""));
    free(out);
    free(p0);
    free(pt);
    free(dir);
}

void test_allreduce_link_cli_register(void) {
    static const pl_test_case cases[] = {
        {"simulate prices REDUCE_GRAD from the measured all-reduce", test_simulate_measured_link},
        {"a slow measured all-reduce stops the planner replicating", test_partition_measured_link},
        {NULL, NULL}};
    pl_test_suite("measured all-reduce in simulate and partition", cases);
}
