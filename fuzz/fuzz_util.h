/* fuzz_util.h: helpers shared by pipelab's libFuzzer targets (fuzz/). */
#ifndef PL_FUZZ_UTIL_H
#define PL_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated copy of the input (parsers that take C strings stop at an embedded NUL). */
static inline char *fz_cstr(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* A broken invariant found by a target: print it and abort, so libFuzzer keeps the input. */
#define FZ_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz invariant failed: %s: ", #cond);                               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* 1 when two texts are equal; otherwise prints where they first differ (for the crash report). */
static inline int fz_same(const char *a, size_t na, const char *b, size_t nb) {
    if (na == nb && memcmp(a, b, na) == 0) return 1;
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    size_t from = i > 80 ? i - 80 : 0;
    fprintf(stderr, "texts differ at byte %zu:\n--- first\n%.*s\n--- second\n%.*s\n---\n", i,
            (int)((na - from) < 200 ? na - from : 200), a + from, (int)((nb - from) < 200 ? nb - from : 200),
            b + from);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
