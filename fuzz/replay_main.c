/* replay_main.c: runs a fuzz target's entry point over files and folders given on the command
 * line, without libFuzzer. CTest uses it with any compiler to replay the seed corpora and every
 * input a fuzzing run ever found (fuzz/regress/), in the normal and the sanitizer builds. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) abort();
    size_t got;
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf) abort();
        }
    }
    fclose(f);
    /* an exact-size copy, so that reads past the input trip the sanitizers as under libFuzzer */
    unsigned char *exact = malloc(len ? len : 1);
    if (!exact) abort();
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue; /* an optional folder (an empty regress/) may be absent */
        if (!S_ISDIR(st.st_mode)) {
            bad |= replay_file(argv[i]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) continue;
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            names = realloc(names, (n + 1) * sizeof *names);
            if (!names) abort();
            size_t need = strlen(argv[i]) + strlen(de->d_name) + 2;
            names[n] = malloc(need);
            if (!names[n]) abort();
            snprintf(names[n], need, "%s/%s", argv[i], de->d_name);
            n++;
        }
        closedir(d);
        if (n) qsort(names, n, sizeof *names, cmp_str);
        for (size_t k = 0; k < n; k++) {
            if (stat(names[k], &st) == 0 && S_ISREG(st.st_mode)) {
                bad |= replay_file(names[k]);
                files++;
            }
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %d inputs\n", files);
    if (files == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    return bad;
}
