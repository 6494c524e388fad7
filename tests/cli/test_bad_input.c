/* test_bad_input.c: `pipelab schedule --from FILE --check` on bad files: exit code and message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_test.h"

#define BAD_DIR PIPELAB_TESTS_DIR "/bad"
#define GOLDEN_DIR PIPELAB_TESTS_DIR "/golden"

/* One row of the table: a fixture, extra flags, the exit code and a piece of the message. */
typedef struct bad_case {
    const char *file;  /* in tests/bad */
    const char *flags; /* added after --check */
    int code;
    const char *want; /* substring of stderr */
} bad_case;

static const bad_case bad_cases[] = {
    {"unknown_action.sched", "", 1, "unknown_action.sched:13:22: cannot parse action '0X1': unknown action kind"},
    {"missing_f.sched", "", 1, "missing_f.sched:14: rank 1: stage 1 microbatch 1 is missing its forward (F)"},
    {"missing_b.sched", "", 1, "missing_b.sched:13: rank 0: stage 0 microbatch 1 is missing its backward (B, or I and W)"},
    {"missing_w.sched", "", 1, "missing_w.sched:14: rank 1: stage 1 microbatch 0 has its input backward (I) but is missing its weight backward (W)"},
    {"b_before_f.sched", "", 1, "b_before_f.sched:14: rank 1, action 3 (1B1): backward of stage 1 microbatch 1 comes before its forward"},
    {"duplicate_b.sched", "", 1, "duplicate_b.sched:13: rank 0, action 4 (0B0): duplicate backward"},
    {"w_before_i.sched", "", 1, "rank 1, action 2 (1W0): W before I"},
    {"stage_two_ranks.sched", "", 1, "stage_two_ranks.sched:14:21: action '0B1' on rank 1 belongs to stage 0"},
    {"stage_two_ranks.sched", "", 1, "two ranks"},
    {"stage_two_ranks.csv", "", 1, "stage_two_ranks.csv:2:9: stage 0 is on two ranks: row 1 (rank 0, line 1, column 1) and row 2 (rank 1)"},
    {"deadlock.sched", "", 1, "deadlock: rank 0 at action 2 (0B0) waits"},
    {"truncated.sched", "", 1, "truncated.sched:14:23: cannot parse action '1B': B needs a microbatch number"},
    {"truncated_ranks.sched", "", 1, "truncated_ranks.sched:13:24: missing the line 'rank 1:'"},
    {"huge_number.sched", "", 1, "huge_number.sched:6:14: microbatches 99999999999999999999 is out of range"},
    {"empty.sched", "", 1, "empty.sched: empty file"},
    {"empty.csv", "", 1, "empty.csv: empty file"},
    {"partial_cell.csv", "", 1, "partial_cell.csv:2:11: cannot parse action '2FX0'"},
    {"missing_key.sched", "", 1, "missing_key.sched:12:1: missing header key 'stages'"},
    {"bad_magic.sched", "", 1, "bad_magic.sched:2:1: not a pipelab schedule: expected 'pipelab-schedule 1'"},
    {"bad_version.sched", "", 1, "bad_version.sched:2:18: unsupported format version '7'"},
    {"unknown_key.sched", "", 1, "unknown_key.sched:11:1: unknown header key 'layers'"},
    {"duplicate_key.sched", "", 1, "duplicate_key.sched:5:1: duplicate header key 'ranks' (first given on line 4)"},
    {"stage_out_of_range.sched", "", 1, "stage_out_of_range.sched:14:25: action '3F0': stage 3 is out of range (stages 2)"},
    {"lowered_no_recv.sched", "", 1, "lowered_no_recv.sched:13: rank 0, action 3 (0B0): the output gradient of stage 0 microbatch 0 comes from rank 1, but no 0RECV_B0 precedes this backward"},
    {"legacy_letters.csv", "", 1, "legacy_letters.csv:1:18: cannot parse action '0BW1'"},
    {"absent.sched", "", 1, "absent.sched: cannot open"},
    {NULL, NULL, 0, NULL},
};

/* Runs the CLI on path with flags; returns its exit code and (malloc'd) stderr alone. */
static int run_check(const char *path, const char *flags, char **err) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "( '%s' schedule --from '%s' --check %s >/dev/null )", PIPELAB_BIN,
             path, flags);
    return pl_test_run(cmd, err);
}

/* Checks one bad run: exit code, a single "pipelab: " line naming the file, the substring. */
static void expect_bad(const char *path, const char *flags, int code, const char *want,
                       const char *name) {
    char *err = NULL;
    int rc = run_check(path, flags, &err);
    const char *nl = err ? strchr(err, '\n') : NULL;
    int ok = rc == code && err && strncmp(err, "pipelab: ", 9) == 0 && strstr(err, want) &&
             strstr(err, name) && nl && nl[1] == '\0';
    if (!ok)
        fprintf(stderr, "\n  %s: want exit %d and '%s', got exit %d and: %s\n", name, code, want, rc,
                err ? err : "(nothing)");
    CU_ASSERT(ok);
    free(err);
}

/* Every fixture in the table fails with its exit code and message. */
static void test_bad_table(void) {
    for (const bad_case *c = bad_cases; c->file; c++) {
        char *path = pl_test_path(BAD_DIR, c->file);
        expect_bad(path, c->flags, c->code, c->want, c->file);
        free(path);
    }
}

/* Writes len bytes to dir/name; returns the malloc'd path. */
static char *put(const char *dir, const char *name, const unsigned char *data, size_t len) {
    char *p = pl_test_path(dir, name);
    FILE *f = fopen(p, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
    return p;
}

/* Binary garbage (made here, not committed), invalid text and a directory are refused. */
static void test_binary_garbage(void) {
    char *dir = pl_test_tmpdir();
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    unsigned char junk[512];
    unsigned x = 12345u;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (unsigned char)(x >> 16);
    }
    memcpy(junk, "\x7f" "ELF\x02\x01\x01\0", 8);
    char *p = put(dir, "garbage.sched", junk, sizeof junk);
    expect_bad(p, "", 1, "garbage.sched:1:8: binary data (a NUL byte)", "garbage.sched");
    remove(p);
    free(p);
    p = put(dir, "garbage.csv", junk, sizeof junk);
    expect_bad(p, "", 1, "binary data", "garbage.csv");
    remove(p);
    free(p);
    static const unsigned char latin1[] = "0F0,0B0\n# caf\xe9\n";
    p = put(dir, "latin1.csv", latin1, sizeof latin1 - 1);
    expect_bad(p, "", 1, "latin1.csv:2:6: binary data or invalid text (byte 0xe9", "latin1.csv");
    remove(p);
    free(p);
    expect_bad(dir, "", 1, "is a directory", "pipelab-test-");
    remove(dir);
    free(dir);
}

/* Valid files pass --check with exit 0: the golden files, and a legacy-letter CSV when the
 * flag says so. */
static void test_good_files(void) {
    static const char *const golden[] = {
        "gpipe_p2_m3.sched", "1f1b_p3_m4.sched", "1f1b_p3_m4_lowered.sched", "1f1b_p3_m4.csv",
        "zb-h1_p3_m4_comms.csv", "interleaved_p2_m4_v2.sched", NULL,
    };
    for (const char *const *g = golden; *g; g++) {
        char *path = pl_test_path(GOLDEN_DIR, *g);
        char cmd[2048], *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s' schedule --from '%s' --check", PIPELAB_BIN, path);
        int rc = pl_test_run(cmd, &out);
        if (rc != 0) fprintf(stderr, "\n  %s: exit %d: %s\n", *g, rc, out ? out : "");
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "ok") ? out : NULL);
        free(out);
        free(path);
    }
    char *path = pl_test_path(BAD_DIR, "legacy_letters.csv");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' schedule --from '%s' --check --legacy-letters", PIPELAB_BIN, path);
    int rc = pl_test_run(cmd, &out);
    if (rc != 0) fprintf(stderr, "\n  legacy_letters.csv --legacy-letters: exit %d: %s\n", rc, out ? out : "");
    CU_ASSERT_EQUAL(rc, 0);
    free(out);
    free(path);
}

/* Usage errors exit 2, not 1. */
static void test_usage_errors(void) {
    static const char *const args[] = {"schedule --check", "schedule --check --from", NULL};
    for (const char *const *a = args; *a; a++) {
        char cmd[2048], *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s' %s", PIPELAB_BIN, *a);
        int rc = pl_test_run(cmd, &out);
        if (rc != 2) fprintf(stderr, "\n  '%s': exit %d: %s\n", *a, rc, out ? out : "");
        CU_ASSERT_EQUAL(rc, 2);
        free(out);
    }
}

void pl_test_register(void) {
    static const pl_test_case cases[] = {
        {"bad input files", test_bad_table},
        {"binary garbage and directories", test_binary_garbage},
        {"good files pass --check", test_good_files},
        {"usage errors exit 2", test_usage_errors},
        {NULL, NULL},
    };
    pl_test_suite("cli bad input", cases);
    { void test_limits_cli_register(void); test_limits_cli_register(); } /* test_limits.c */
    { void test_sched_flags_cli_register(void); test_sched_flags_cli_register(); } /* test_sched_flags.c */
    { void test_flag_values_cli_register(void); test_flag_values_cli_register(); } /* test_flag_values.c */
    { void test_sim_db_cli_register(void); test_sim_db_cli_register(); } /* test_sim_db.c */
    { void test_version_cli_register(void); test_version_cli_register(); } /* test_version.c */
    { void test_progress_cli_register(void); test_progress_cli_register(); } /* test_progress.c */
    { void test_layout_cli_register(void); test_layout_cli_register(); } /* test_layout.c */
    { void test_compare_cli_register(void); test_compare_cli_register(); } /* test_compare.c */
    { void test_allreduce_link_cli_register(void); test_allreduce_link_cli_register(); } /* test_allreduce_link.c */
    { void test_exec_module_cli_register(void); test_exec_module_cli_register(); } /* test_exec_module.c */
    { void test_run_outputs_cli_register(void); test_run_outputs_cli_register(); } /* test_run_outputs.c */
    { void test_run_failures_cli_register(void); test_run_failures_cli_register(); } /* test_run_failures.c */
    { void test_silent_flags_cli_register(void); test_silent_flags_cli_register(); } /* test_silent_flags.c */
}
