/*
 * replay.c - a fuzz target as a test of `make check`: every file of its seed corpus
 * (tests/fuzz/corpus/<name>/) and of its regressions (tests/fuzz/regress/<name>/, one
 * input per finding that was fixed) through the target's LLVMFuzzerTestOneInput,
 * in any build, sanitizers or not. The name comes from the program's
 * (tests/fuzz/replay_<name>); the tree from DT_SRCDIR. Speaks TAP: the seeds are one
 * case, each regression one case of its own; a crash ends the program after the
 * line naming the input ("# <file>"), so the log says which.
 *
 *   DT_SRCDIR=$PWD tests/fuzz/replay_config [FILE...]   (files given: those only)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The regular files of dir, sorted (malloc'd names; *n of them; NULL with *n 0 when dir is missing). */
static char **list(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char **t = realloc(v, (size_t)(*n + 1) * sizeof *v);
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!t || !p) {
            fprintf(stderr, "out of memory\n");
            exit(99);
        }
        v = t;
        snprintf(p, len, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(p);
            continue;
        }
        v[(*n)++] = p;
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp);
    return v;
}

/* One input through the target; 0, or -1 when it could not be read. */
static int run(const char *path)
{
    printf("# %s\n", path);
    fflush(stdout);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            unsigned char *t = realloc(buf, cap *= 2);
            if (!t) free(buf);
            buf = t;
        }
    }
    fclose(f);
    if (!buf) return -1;
    /* the bytes in a buffer of their own size, as libFuzzer hands them, so ASan sees any read past the end */
    unsigned char *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (!strncmp(base, "lt-", 3)) base += 3;
    if (strncmp(base, "replay_", 7)) {
        fprintf(stderr, "%s: the program's name must be replay_<target>\n", argv[0]);
        return 99;
    }
    const char *name = base + 7;
    if (argc > 1) {
        printf("1..%d\n", argc - 1);
        for (int i = 1; i < argc; i++) printf("%s %d - %s\n", run(argv[i]) ? "not ok" : "ok", i, argv[i]);
        return 0;
    }
    const char *src = getenv("DT_SRCDIR");
    char seeds[4096], regress[4096];
    snprintf(seeds, sizeof seeds, "%s/tests/fuzz/corpus/%s", src && *src ? src : ".", name);
    snprintf(regress, sizeof regress, "%s/tests/fuzz/regress/%s", src && *src ? src : ".", name);
    int ns, nr;
    char **s = list(seeds, &ns), **r = list(regress, &nr);
    printf("1..%d\n", 1 + nr);
    int bad = 0;
    for (int i = 0; i < ns; i++) bad += run(s[i]) != 0;
    /* a target without seeds tests nothing: that is a failure, not a pass */
    printf("%s 1 - %s: %d seed inputs of %s%s\n", ns && !bad ? "ok" : "not ok", name, ns, seeds,
           bad ? " (some unreadable)" : "");
    for (int i = 0; i < nr; i++) {
        int rc = run(r[i]);
        printf("%s %d - %s: regression %s\n", rc ? "not ok" : "ok", i + 2, name, strrchr(r[i], '/') + 1);
    }
    for (int i = 0; i < ns; i++) free(s[i]);
    for (int i = 0; i < nr; i++) free(r[i]);
    free(s);
    free(r);
    return 0;
}
