/* shard.c - see shard.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/error.h"
#include "data/shard.h"

static const char hint_make[] = "  hint: make shards with `dtrun prepare TEXT... --out DIR` or llm.c's dev/data scripts";

/* The first token not below vocab_size, or ntok; one loop per width keeps the whole-shard scan tight. */
static size_t first_outside(const struct dt_shard *s, int vocab_size)
{
    size_t i = 0;
    if (s->tok32) {
        /* as int64, so a token past INT32_MAX is refused like any other too large for the vocabulary */
        while (i < s->ntok && (int64_t)s->tok32[i] < vocab_size) i++;
    } else {
        while (i < s->ntok && s->tok16[i] < vocab_size) i++;
    }
    return i;
}

dt_status_t dt_shard_open(struct dt_shard *s, const char *path, int vocab_size, size_t min_tokens)
{
    *s = (struct dt_shard){0};
    int fd = open(path, O_RDONLY);
    if (fd < 0) return dt_error(DT_ERR_DATA, "%s: error: cannot open the shard: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return dt_error(DT_ERR_DATA, "%s: error: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size < DT_SHARD_HEADER_BYTES) {
        close(fd);
        return dt_error(DT_ERR_DATA, "%s: error: truncated: %zu bytes, shorter than the %d-byte shard header\n%s",
                        path, size, DT_SHARD_HEADER_BYTES, hint_make);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return dt_error(DT_ERR_DATA, "%s: error: cannot map the shard: %s", path, strerror(errno));
    s->map = map;
    s->maplen = size;
    s->path = strdup(path);
    const int32_t *hdr = map;
    size_t width = hdr[1] == DT_SHARD_V32 ? 4 : 2;
    dt_status_t rc = DT_SUCCESS;
    int want_version = hdr[0] == DT_SHARD_MAGIC32 ? DT_SHARD_V32 : DT_SHARD_V16;
    if (hdr[0] != DT_SHARD_MAGIC && hdr[0] != DT_SHARD_MAGIC32) {
        rc = dt_error(DT_ERR_DATA, "%s: error: not an llm.c token shard: magic %d at byte 0, expected %d (uint16 "
                      "tokens) or %d (uint32 tokens)\n%s", path, hdr[0], DT_SHARD_MAGIC, DT_SHARD_MAGIC32, hint_make);
    } else if (hdr[1] != want_version) {
        rc = dt_error(DT_ERR_DATA, "%s: error: shard version %d at byte 4 after magic %d, which llm.c writes with "
                      "version %d\n%s", path, hdr[1], hdr[0], want_version, hint_make);
    } else if (hdr[2] < 0 || (size_t)DT_SHARD_HEADER_BYTES + width * (size_t)hdr[2] != size) {
        size_t want = (size_t)DT_SHARD_HEADER_BYTES + width * (size_t)(hdr[2] < 0 ? 0 : hdr[2]);
        rc = dt_error(DT_ERR_DATA, "%s: error: %s: the header (byte 8) says %d tokens, %zu bytes in all, but the "
                      "file has %zu bytes\n  hint: the shard was cut off while being written or copied; make it again",
                      path, size < want ? "truncated" : "trailing bytes", hdr[2], want, size);
    } else if ((size_t)hdr[2] < min_tokens) {
        rc = dt_error(DT_ERR_DATA, "%s: error: the shard holds %d tokens, fewer than one sequence (model.seq_len + 1 "
                      "= %zu)\n  hint: lower model.seq_len, or make larger shards", path, hdr[2], min_tokens);
    }
    if (rc != DT_SUCCESS) {
        dt_shard_close(s);
        return rc;
    }
    s->version = hdr[1];
    s->ntok = (size_t)hdr[2];
    const void *tokens = (const char *)map + DT_SHARD_HEADER_BYTES;
    if (s->version == DT_SHARD_V32) s->tok32 = tokens;
    else s->tok16 = tokens;
    size_t i = first_outside(s, vocab_size);
    if (i < s->ntok) {
        rc = dt_error(DT_ERR_DATA, "%s: error: token %" PRIu32 " at byte %zu (token %zu) is not below "
                      "model.vocab_size %d\n  hint: set model.vocab_size to the tokenizer's size (50257 for GPT-2, "
                      "128256 for Llama 3), or re-make the shard", path, s->tok32 ? s->tok32[i] : s->tok16[i],
                      DT_SHARD_HEADER_BYTES + width * i, i, vocab_size);
        dt_shard_close(s);
        return rc;
    }
    return DT_SUCCESS;
}

void dt_shard_close(struct dt_shard *s)
{
    if (s->map) munmap(s->map, s->maplen);
    free(s->path);
    *s = (struct dt_shard){0};
}

void dt_shard_tokens(const struct dt_shard *s, size_t first, size_t n, int32_t *out)
{
    if (s->tok32) {
        for (size_t i = 0; i < n; i++) out[i] = (int32_t)s->tok32[first + i];
    } else {
        for (size_t i = 0; i < n; i++) out[i] = s->tok16[first + i];
    }
}

int dt_shard_version(int vocab_size) { return vocab_size - 1 > UINT16_MAX ? DT_SHARD_V32 : DT_SHARD_V16; }

dt_status_t dt_shard_write(const char *path, const uint32_t *tokens, size_t ntok, int vocab_size)
{
    /* the header counts tokens in an int32 (llm.c asserts the same) */
    if (ntok > INT32_MAX)
        return dt_error(DT_ERR_DATA, "%s: error: %zu tokens, more than one shard holds (%d)\n  hint: split the input "
                        "into several shards", path, ntok, INT32_MAX);
    /* a shard the reader would refuse for this vocabulary is the caller's bug: say so before writing it */
    for (size_t i = 0; i < ntok; i++)
        if ((int64_t)tokens[i] >= vocab_size)
            return dt_error(DT_ERR_INTERNAL, "%s: error: token %" PRIu32 " (token %zu) is not below the vocabulary's "
                            "size %d; nothing written", path, tokens[i], i, vocab_size);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return dt_error(DT_ERR_DATA, "%s: error: cannot write: %s", tmp, strerror(errno));
    int version = dt_shard_version(vocab_size);
    int32_t hdr[256] = {version == DT_SHARD_V32 ? DT_SHARD_MAGIC32 : DT_SHARD_MAGIC, version, (int32_t)ntok};
    bool ok = fwrite(hdr, sizeof hdr, 1, f) == 1;
    if (version == DT_SHARD_V32) {
        ok = ok && fwrite(tokens, 4, ntok, f) == ntok;
    } else {
        /* narrowed a block at a time, so the shard is never held twice in memory */
        uint16_t block[4096];
        for (size_t i = 0; ok && i < ntok; i += 4096) {
            size_t n = ntok - i < 4096 ? ntok - i : 4096;
            for (size_t j = 0; j < n; j++) block[j] = (uint16_t)tokens[i + j];
            ok = fwrite(block, 2, n, f) == n;
        }
    }
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return dt_error(DT_ERR_DATA, "%s: error: writing the shard failed: %s", path, strerror(errno));
    }
    return DT_SUCCESS;
}
