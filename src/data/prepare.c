/* prepare.c - see prepare.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/error.h"
#include "core/log.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "events/jsonl.h"

/* one token per byte */
#define BYTE_VOCAB 256

struct tokens {
    uint32_t *t; /* the width dt_shard_write takes whatever the vocabulary; it narrows for version 1 */
    size_t n, cap;
};

static bool push(struct tokens *v, const unsigned char *b, size_t n)
{
    if (v->n + n > v->cap) {
        size_t cap = v->cap ? v->cap : 1 << 20;
        while (cap < v->n + n) cap *= 2;
        uint32_t *t = realloc(v->t, cap * sizeof *t);
        if (!t) return false;
        v->t = t;
        v->cap = cap;
    }
    for (size_t i = 0; i < n; i++) v->t[v->n + i] = b[i];
    v->n += n;
    return true;
}

dt_status_t dt_prepare_read_file(const char *path, unsigned char **buf, size_t *n)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return dt_error(DT_ERR_DATA, "%s: error: this is a directory; dtrun prepare reads text files\n  hint: name the "
                        "files, e.g. dtrun prepare %s/*.txt --out DIR", path, path);
    FILE *f = fopen(path, "rb");
    if (!f) return dt_error(DT_ERR_DATA, "%s: error: cannot read: %s", path, strerror(errno));
    /* the file's size and one byte more, so a regular file is read without growing the buffer (a
     * pipe or a file still growing grows it) */
    bool sized = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
    size_t cap = sized ? (size_t)st.st_size + 1 : 1 << 16, len = 0;
    unsigned char *b = malloc(cap);
    for (size_t got; b && (got = fread(b + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            unsigned char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    bool err = ferror(f);
    fclose(f);
    if (!b || err) {
        free(b);
        return dt_error(DT_ERR_DATA, "%s: error: %s after %zu bytes", path, b ? "reading failed" : "out of memory", len);
    }
    if (len > ((size_t)1 << 31)) {
        free(b);
        return dt_error(DT_ERR_DATA, "%s: error: larger than 2 GiB; split it into several files", path);
    }
    *buf = b;
    *n = len;
    return DT_SUCCESS;
}

dt_status_t dt_prepare(int nfiles, char *const *files, const char *out_dir, double val_fraction)
{
    struct tokens train = {0}, val = {0};
    dt_status_t rc = DT_SUCCESS;
    for (int i = 0; i < nfiles && rc == DT_SUCCESS; i++) {
        unsigned char *b = NULL;
        size_t n = 0;
        rc = dt_prepare_read_file(files[i], &b, &n);
        if (rc != DT_SUCCESS) break;
        size_t nval = (size_t)((double)n * val_fraction);
        if (!push(&train, b, n - nval) || !push(&val, b + n - nval, nval))
            rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory preparing %s", files[i]);
        free(b);
    }
    if (rc == DT_SUCCESS && train.n == 0)
        rc = dt_error(DT_ERR_DATA, "dtrun prepare: error: the input holds no bytes for training\n  hint: give text "
                      "files, e.g. dtrun prepare book.txt --out data/book");
    char path[4096];
    if (rc == DT_SUCCESS) rc = dt_mkdirs(out_dir);
    if (rc == DT_SUCCESS) {
        snprintf(path, sizeof path, "%s/train_000000.bin", out_dir);
        rc = dt_shard_write(path, train.t, train.n, BYTE_VOCAB);
    }
    if (rc == DT_SUCCESS && val.n) {
        snprintf(path, sizeof path, "%s/val_000000.bin", out_dir);
        rc = dt_shard_write(path, val.t, val.n, BYTE_VOCAB);
    }
    if (rc == DT_SUCCESS) {
        int version = dt_shard_version(BYTE_VOCAB);
        DT_INFO(DT_SUB_TRAIN, "prepare: %zu training and %zu validation tokens (bytes) in %s, shard version %d (%s "
                "tokens); train with data.train=%s/train_*.bin data.val=%s/val_*.bin model.vocab_size=%d",
                train.n, val.n, out_dir, version, version == DT_SHARD_V32 ? "uint32" : "uint16", out_dir, out_dir,
                BYTE_VOCAB);
    }
    free(train.t);
    free(val.t);
    return rc;
}
