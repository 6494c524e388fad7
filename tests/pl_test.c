/* pl_test.c: the CUnit runner main shared by every test binary, and small helpers. */
#include "pl_test.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

int pl_test_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int pl_test_run(const char *cmd, char **output) {
    size_t n = strlen(cmd) + 16;
    char *full = malloc(n);
    snprintf(full, n, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += r;
        if (cap - len < 2) { cap *= 2; buf = realloc(buf, cap); }
    }
    buf[len] = '\0';
    int st = pclose(p);
    if (output) *output = buf; else free(buf);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

void pl_test_cli_expect(const char *args, int rc, const char *want) {
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s %s", PIPELAB_BIN, args);
    int got = pl_test_run(cmd, &out);
    CU_ASSERT_EQUAL(got, rc);
    int ok = out && strstr(out, want);
    CU_ASSERT(ok);
    if (got != rc || !ok) fprintf(stderr, "\n  %s: exit %d (want %d), output '%s' lacks '%s'\n", args, got, rc, out ? out : "", want);
    free(out);
}

char *pl_test_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* The directories pl_test_tmpdir made, which main removes after the tests (pl_test.h). */
static char **made;
static size_t nmade;

char *pl_test_tmpdir(void) {
    char tmpl[] = "/tmp/pipelab-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    char **grown = d ? realloc(made, (nmade + 1) * sizeof *made) : NULL;
    if (grown && (grown[nmade] = strdup(d))) made = grown, nmade++;
    else if (grown) made = grown;
    return d ? strdup(d) : NULL;
}

/* nftw's callbacks of pl_test_rmdir: the first pass makes every folder writable (so that what
 * it holds can go), the second removes the tree bottom up. */
static int make_writable(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)ftw;
    if (flag == FTW_D) chmod(path, (st->st_mode & 07777) | S_IRWXU);
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0) {
        fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

int pl_test_rmdir(const char *dir) {
    static const char prefix[] = "/tmp/pipelab-test-";
    if (!dir || strncmp(dir, prefix, sizeof prefix - 1) != 0 || strstr(dir, "..")) {
        fprintf(stderr, "pl_test_rmdir: %s is not a test's temporary directory: left alone\n", dir ? dir : "(null)");
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 && errno == ENOENT) return 0; /* gone already */
    nftw(dir, make_writable, 16, FTW_PHYS);
    return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

/* Removes what pl_test_tmpdir made and is still there, unless PIPELAB_TEST_KEEP is set (to look
 * at a failed test's files); returns how many could not be removed. */
static unsigned remove_made(void) {
    const char *keep = getenv("PIPELAB_TEST_KEEP");
    unsigned left = 0;
    for (size_t i = 0; i < nmade; i++) {
        if (keep && *keep) fprintf(stderr, "kept %s (PIPELAB_TEST_KEEP)\n", made[i]);
        else if (pl_test_rmdir(made[i]) != 0) left++;
        free(made[i]);
    }
    free(made);
    made = NULL, nmade = 0;
    return left;
}

static unsigned skipped;

void pl_test_skip(const char *why) {
    CU_pTest t = CU_get_current_test();
    fprintf(stderr, "\n  SKIPPED %s: %s\n", t && t->pName ? t->pName : "?", why);
    skipped++;
}

void pl_test_suite(const char *name, const pl_test_case *cases) {
    CU_pSuite s = CU_add_suite(name, NULL, NULL);
    if (!s) { fprintf(stderr, "cannot add suite %s\n", name); exit(2); }
    for (const pl_test_case *c = cases; c->name; c++)
        if (!CU_add_test(s, c->name, c->fn)) { fprintf(stderr, "cannot add test %s\n", c->name); exit(2); }
}

int main(void) {
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    pl_test_register();
    CU_basic_set_mode(CU_BRM_NORMAL);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned ran = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (remove_made()) failed++; /* a test left what it cannot remove: a file made read-only, say */
    if (skipped) fprintf(stderr, "%u of %u tests skipped (their reasons above)\n", skipped, ran);
    if (ran == 0 || (skipped == ran && !failed)) return 77;
    return failed ? 1 : 0;
}

/* pl_test.h */
char *pl_test_json_string(const char *json, const char *after, const char *key) {
    const char *p = strstr(json, after);
    if (!p) return NULL;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *end = strchr(p, '}'), *v = strstr(p, pat);
    if (!v || (end && v > end && strcmp(key, "text") != 0)) return NULL;
    v += strlen(pat);
    char *out = malloc(strlen(v) + 1);
    size_t n = 0;
    for (; *v && *v != '"'; v++) {
        if (*v != '\\') { out[n++] = *v; continue; }
        v++;
        if (*v == 'n') out[n++] = '\n';
        else if (*v == 't') out[n++] = '\t';
        else if (*v == 'r') out[n++] = '\r';
        else if (*v == 'u') { out[n++] = (char)strtol((char[]){v[1], v[2], v[3], v[4], 0}, NULL, 16); v += 4; }
        else out[n++] = *v;
    }
    out[n] = 0;
    return out;
}

double pl_test_json_number(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}
