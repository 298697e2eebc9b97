/* prepare_manifest.c - see prepare_manifest.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "data/prepare_manifest.h"
#include "events/json.h"
#include "tokenize/tjson.h"

dt_status_t dt_prepare_manifest_write(const char *dir, const struct dt_prepare_manifest *m)
{
    struct dt_json j = {0};
    dt_json_begin(&j);
    dt_json_str(&j, "tokenizer", m->tokenizer);
    dt_json_str(&j, "family", m->family);
    dt_json_int(&j, "vocab_size", m->vocab_size);
    dt_json_int(&j, "doc_token", m->doc_token);
    dt_json_int(&j, "documents", (int64_t)m->documents);
    dt_json_int(&j, "bytes", (int64_t)m->bytes);
    dt_json_int(&j, "train_tokens", (int64_t)m->train_tokens);
    dt_json_int(&j, "val_tokens", (int64_t)m->val_tokens);
    dt_json_obj(&j, "shards");
    for (int i = 0; i < m->nshards; i++) dt_json_int(&j, m->shards[i], 1);
    dt_json_close(&j);
    const char *doc = dt_json_end(&j);
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, DT_PREPARE_MANIFEST);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    dt_status_t rc = DT_SUCCESS;
    FILE *f = doc ? fopen(tmp, "w") : NULL;
    if (!doc) rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory writing it", path);
    else if (!f || fprintf(f, "%s\n", doc) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        rc = dt_error(DT_ERR_DATA, "%s: error: cannot write: %s", path, strerror(errno));
    dt_json_free(&j);
    return rc;
}

void dt_prepare_manifest_free(struct dt_prepare_manifest *m)
{
    for (int i = 0; i < m->nshards; i++) free(m->shards[i]);
    free(m->shards);
    m->shards = NULL;
    m->nshards = 0;
}

dt_status_t dt_prepare_manifest_read(const char *dir, struct dt_prepare_manifest *m, bool *found)
{
    char path[4096], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, DT_PREPARE_MANIFEST);
    memset(m, 0, sizeof *m);
    *found = false;
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? DT_SUCCESS : dt_error(DT_ERR_DATA, "%s: error: cannot read: %s", path, strerror(errno));
    char *text = NULL;
    size_t n = 0, cap = 0;
    for (size_t got = 1; got;) {
        if (n + 4096 > cap) {
            char *t = realloc(text, cap = cap * 2 + 8192);
            if (!t) break;
            text = t;
        }
        got = fread(text + n, 1, cap - n, f);
        n += got;
    }
    fclose(f);
    struct tj_doc d;
    dt_status_t rc = DT_SUCCESS;
    if (!text || tj_parse(&d, text, n, err, sizeof err)) {
        free(text);
        return dt_error(DT_ERR_DATA, "%s: error: not the manifest dtrun prepare writes (%s)\n  hint: remove it, or "
                        "run dtrun prepare again into this directory", path, text ? err : "out of memory");
    }
    const struct tj_node *root = &d.n[0], *x;
    x = tj_get(&d, root, "tokenizer");
    if (x && x->type == TJ_STR) snprintf(m->tokenizer, sizeof m->tokenizer, "%s", tj_str(&d, x));
    x = tj_get(&d, root, "family");
    if (x && x->type == TJ_STR) snprintf(m->family, sizeof m->family, "%s", tj_str(&d, x));
    x = tj_get(&d, root, "vocab_size");
    m->vocab_size = x && x->type == TJ_NUM ? (int)x->num : 0;
    x = tj_get(&d, root, "doc_token");
    m->doc_token = x && x->type == TJ_NUM ? (int32_t)x->num : -1;
    x = tj_get(&d, root, "documents");
    m->documents = x && x->type == TJ_NUM ? (uint64_t)x->num : 0;
    x = tj_get(&d, root, "train_tokens");
    m->train_tokens = x && x->type == TJ_NUM ? (uint64_t)x->num : 0;
    x = tj_get(&d, root, "val_tokens");
    m->val_tokens = x && x->type == TJ_NUM ? (uint64_t)x->num : 0;
    x = tj_get(&d, root, "shards");
    if (m->vocab_size <= 0 || !x || x->type != TJ_OBJ) {
        rc = dt_error(DT_ERR_DATA, "%s: error: no vocab_size or shards: not the manifest dtrun prepare writes\n  hint: "
                      "remove it, or run dtrun prepare again into this directory", path);
    } else if (x->len && !(m->shards = calloc(x->len, sizeof *m->shards))) {
        rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
    } else {
        for (const struct tj_node *s = tj_child(&d, x); s; s = tj_next(&d, s)) {
            const char *name = tj_key(&d, s);
            /* a name, never a path: prepare deletes these when it runs again */
            if (strchr(name, '/') || !strcmp(name, "..") || !*name) continue;
            if (!(m->shards[m->nshards] = strdup(name))) break;
            m->nshards++;
        }
        *found = true;
    }
    tj_free(&d);
    free(text);
    if (rc) dt_prepare_manifest_free(m);
    return rc;
}

dt_status_t dt_prepare_manifest_check(const char *shard_path, int vocab, const char *key)
{
    char dir[4096];
    const char *slash = strrchr(shard_path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - shard_path), shard_path);
    else snprintf(dir, sizeof dir, ".");
    if (!dir[0]) snprintf(dir, sizeof dir, "/");
    struct dt_prepare_manifest m;
    bool found;
    DT_CHECK(dt_prepare_manifest_read(dir, &m, &found));
    if (!found) return DT_SUCCESS;
    dt_status_t rc = DT_SUCCESS;
    if (vocab < m.vocab_size)
        rc = dt_error(DT_ERR_CONFIG, "model.vocab_size: error: %d is smaller than the vocabulary of the tokenizer that "
                      "made %s's shards (%d ids, %s, recorded in %s/%s)\n  hint: set model.vocab_size=%d (or larger, "
                      "e.g. padded to a multiple of 64 as nanoGPT's 50304)", vocab, key, m.vocab_size, m.tokenizer, dir,
                      DT_PREPARE_MANIFEST, m.vocab_size);
    dt_prepare_manifest_free(&m);
    return rc;
}
