/* test_version.c: the git revision a build records (pipelab --version, and every stored run) is
 * the source tree's at build time, refreshed on every build by cmake/git_rev.cmake: compared here
 * with what git says of the tree now, so a value fixed at configure time (or an unrebuilt
 * binary) fails; and the script itself on scratch trees: a commit, "-dirty" for a modified
 * tracked file, "unknown" outside a checkout, and its header left untouched when nothing changed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pl_test.h"

#define SRC_DIR PIPELAB_TESTS_DIR "/.."

/* Runs cmd; returns its output with the trailing newline removed (malloc'd), or NULL when it
 * did not exit 0. */
static char *output_of(const char *cmd) {
    char *out = NULL;
    if (pl_test_run(cmd, &out) != 0) {
        free(out);
        return NULL;
    }
    size_t n = out ? strlen(out) : 0;
    while (n && out[n - 1] == '\n') out[--n] = '\0';
    return out;
}

/* Returns 1 when the program (git, cmake) runs. */
static int have(const char *prog) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s --version >/dev/null 2>&1", prog);
    char *o = output_of(cmd);
    free(o);
    return o != NULL;
}

/* What the build should have recorded: git describe of the source tree now, or "unknown" when
 * the source tree is not the top of a checkout. NULL when it cannot be told. */
static char *expected_rev(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && test \"$(git rev-parse --show-toplevel 2>/dev/null)\" = \"$(pwd -P)\"", SRC_DIR);
    char *top = output_of(cmd);
    if (!top) return strdup("unknown");
    free(top);
    snprintf(cmd, sizeof cmd, "git -C '%s' describe --always --dirty 2>/dev/null", SRC_DIR);
    return output_of(cmd);
}

/* pipelab --version prints the revision git gives for the source tree now. */
static void test_version_matches_tree(void) {
    if (!have("git")) {
        pl_test_skip("git is not installed: the source tree's revision cannot be told");
        return;
    }
    char *want = expected_rev(), cmd[1024], suffix[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    snprintf(cmd, sizeof cmd, "'%s' --version", PIPELAB_BIN);
    char *got = output_of(cmd);
    snprintf(suffix, sizeof suffix, " (%s)", want);
    size_t n = got ? strlen(got) : 0, k = strlen(suffix);
    int ok = got && strncmp(got, "pipelab ", 8) == 0 && n > k && strcmp(got + n - k, suffix) == 0;
    if (!ok)
        fprintf(stderr, "\n  --version printed '%s' but the source tree is at '%s' (rebuild after changing the tree)\n",
                got ? got : "(nothing)", want);
    CU_ASSERT(ok);
    free(got);
    free(want);
}

/* A stored run carries the same revision as --version (simulate into a scratch database). */
static void test_run_records_rev(void) {
    char *dir = pl_test_tmpdir(), cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' --version", PIPELAB_BIN);
    char *ver = output_of(cmd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ver);
    char *rev = strrchr(ver, '(');
    CU_ASSERT_PTR_NOT_NULL_FATAL(rev);
    rev++;
    rev[strlen(rev) - 1] = '\0';
    snprintf(cmd, sizeof cmd, "'%s' simulate --kind gpipe --ranks 2 --microbatches 2 --db '%s/v.db' >/dev/null && '%s' db show 1 --db '%s/v.db' --format json",
             PIPELAB_BIN, dir, PIPELAB_BIN, dir);
    char *json = output_of(cmd), want[256];
    snprintf(want, sizeof want, "\"git_rev\": \"%s\"", rev);
    char want2[256];
    snprintf(want2, sizeof want2, "\"git_rev\":\"%s\"", rev);
    int ok = json && (strstr(json, want) || strstr(json, want2));
    if (!ok) fprintf(stderr, "\n  want %s in: %.600s\n", want, json ? json : "(nothing)");
    CU_ASSERT(ok);
    free(json);
    free(ver);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* Runs cmake/git_rev.cmake on tree and returns the header's PL_GIT_REV_TEXT value (malloc'd). */
static char *script_rev(const char *tree, const char *header) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cmake -DSRC='%s' -DOUT='%s' -P '%s/cmake/git_rev.cmake' && sed -n 's/^#define PL_GIT_REV_TEXT \"\\(.*\\)\"$/\\1/p' '%s'",
             tree, header, SRC_DIR, header);
    return output_of(cmd);
}

/* The script on scratch trees: a fresh commit, a modified tracked file, an untracked file (not
 * dirty), a plain folder, and the header kept as it is (its time too) when the value is the same. */
static void test_script(void) {
    if (!have("git") || !have("cmake")) {
        pl_test_skip("git or cmake is not installed");
        return;
    }
    char *dir = pl_test_tmpdir(), cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir repo plain && cd repo && git init -q && echo a > f && git add f && "
             "git -c user.name=t -c user.email=t@example.com commit -q -m one && git rev-parse --short HEAD",
             dir);
    char *hash = output_of(cmd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hash);
    char repo[1024], plain[1024], header[1024];
    snprintf(repo, sizeof repo, "%s/repo", dir);
    snprintf(plain, sizeof plain, "%s/plain", dir);
    snprintf(header, sizeof header, "%s/out/pl_git_rev.h", dir);
    snprintf(cmd, sizeof cmd, "git -C '%s' describe --always", repo);
    char *clean = output_of(cmd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(clean);
    CU_ASSERT(strncmp(clean, hash, strlen(hash)) == 0);

    char *got = script_rev(repo, header);
    CU_ASSERT(got && strcmp(got, clean) == 0);
    free(got);
    /* unchanged value: the header is not rewritten (its time stays at 2001) */
    snprintf(cmd, sizeof cmd, "touch -d 2001-01-01 '%s'", header);
    free(output_of(cmd));
    got = script_rev(repo, header);
    CU_ASSERT(got && strcmp(got, clean) == 0);
    free(got);
    struct stat st;
    CU_ASSERT(stat(header, &st) == 0 && st.st_mtime < 1000000000 + 86400 * 366);
    /* an untracked file is not a change; a modified tracked file is */
    snprintf(cmd, sizeof cmd, "echo x > '%s/new' && git -C '%s' status --porcelain >/dev/null", repo, repo);
    free(output_of(cmd));
    got = script_rev(repo, header);
    CU_ASSERT(got && strcmp(got, clean) == 0);
    free(got);
    snprintf(cmd, sizeof cmd, "echo b > '%s/f'", repo);
    free(output_of(cmd));
    got = script_rev(repo, header);
    char dirty[256];
    snprintf(dirty, sizeof dirty, "%s-dirty", clean);
    CU_ASSERT(got && strcmp(got, dirty) == 0);
    free(got);
    CU_ASSERT(stat(header, &st) == 0 && st.st_mtime > 1000000000 + 86400 * 366); /* rewritten */
    /* a new commit: the new hash */
    snprintf(cmd, sizeof cmd, "cd '%s' && git -c user.name=t -c user.email=t@example.com commit -q -am two && git describe --always", repo);
    char *second = output_of(cmd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(second);
    CU_ASSERT(strcmp(second, clean) != 0);
    got = script_rev(repo, header);
    CU_ASSERT(got && strcmp(got, second) == 0);
    free(got);
    /* a folder that is no checkout (a tarball), and one inside a checkout that is not its top */
    got = script_rev(plain, header);
    CU_ASSERT(got && strcmp(got, "unknown") == 0);
    free(got);
    snprintf(cmd, sizeof cmd, "mkdir '%s/sub'", repo);
    free(output_of(cmd));
    char sub[1100];
    snprintf(sub, sizeof sub, "%s/sub", repo);
    got = script_rev(sub, header);
    CU_ASSERT(got && strcmp(got, "unknown") == 0);
    free(got);
    free(second);
    free(clean);
    free(hash);
    CU_ASSERT_EQUAL(pl_test_rmdir(dir), 0);
    free(dir);
}

/* pipelab --help lists the environment variables it reads, each with what it does: every
 * variable named in the source's getenv calls (PATH aside). */
static void test_help_environment(void) {
    static const char *const names[] = {"PIPELAB_MAX_MEMORY", "PIPELAB_PROGRESS ", "PIPELAB_PROGRESS_AFTER",
                                        "PIPELAB_HARDWARE_DIR", "PIPELAB_GNUPLOT", "PIPELAB_GNUPLOT_TIMEOUT", "PIPELAB_CUDA_SYNC"};
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --help", PIPELAB_BIN);
    char *out = NULL;
    CU_ASSERT_EQUAL(pl_test_run(cmd, &out), 0);
    const char *env = out ? strstr(out, "\nenvironment:\n") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(env);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strstr(env, names[i])) fprintf(stderr, "\n  --help does not name %s\n", names[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(env, names[i]));
    }
    free(out);
}

void test_version_cli_register(void) {
    static const pl_test_case tcases[] = {
        {"--version is the source tree's git revision now", test_version_matches_tree},
        {"a stored run carries that revision", test_run_records_rev},
        {"cmake/git_rev.cmake: commit, -dirty, unknown, header kept", test_script},
        {"pipelab --help lists the environment variables", test_help_environment},
        {NULL, NULL},
    };
    pl_test_suite("cli version", tcases);
}
