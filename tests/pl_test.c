/* pl_test.c: the CUnit runner main shared by every test binary, and small helpers. */
#include "pl_test.h"

#include <CUnit/Basic.h>
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

char *pl_test_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *pl_test_tmpdir(void) {
    char tmpl[] = "/tmp/pipelab-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
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
