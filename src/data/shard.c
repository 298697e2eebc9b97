/* shard.c - see shard.h. */
#include <errno.h>
#include <fcntl.h>
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
    dt_status_t rc = DT_SUCCESS;
    if (hdr[0] != DT_SHARD_MAGIC) {
        rc = dt_error(DT_ERR_DATA, "%s: error: not an llm.c token shard: magic %d at byte 0, expected %d\n%s", path,
                      hdr[0], DT_SHARD_MAGIC, hint_make);
    } else if (hdr[1] != DT_SHARD_VERSION) {
        rc = dt_error(DT_ERR_DATA, "%s: error: shard version %d at byte 4; dtrun reads version %d (uint16 tokens)\n%s",
                      path, hdr[1], DT_SHARD_VERSION, hint_make);
    } else if (hdr[2] < 0 || (size_t)DT_SHARD_HEADER_BYTES + 2 * (size_t)hdr[2] != size) {
        size_t want = (size_t)DT_SHARD_HEADER_BYTES + 2 * (size_t)(hdr[2] < 0 ? 0 : hdr[2]);
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
    s->ntok = (size_t)hdr[2];
    s->tokens = (const uint16_t *)((const char *)map + DT_SHARD_HEADER_BYTES);
    for (size_t i = 0; i < s->ntok; i++) {
        if (s->tokens[i] >= vocab_size) {
            rc = dt_error(DT_ERR_DATA, "%s: error: token %u at byte %zu (token %zu) is not below model.vocab_size %d\n"
                          "  hint: set model.vocab_size to the tokenizer's size (50257 for GPT-2), or re-make the "
                          "shard", path, s->tokens[i], DT_SHARD_HEADER_BYTES + 2 * i, i, vocab_size);
            dt_shard_close(s);
            return rc;
        }
    }
    return DT_SUCCESS;
}

void dt_shard_close(struct dt_shard *s)
{
    if (s->map) munmap(s->map, s->maplen);
    free(s->path);
    *s = (struct dt_shard){0};
}

dt_status_t dt_shard_write(const char *path, const uint16_t *tokens, size_t ntok)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return dt_error(DT_ERR_DATA, "%s: error: cannot write: %s", tmp, strerror(errno));
    int32_t hdr[256] = {DT_SHARD_MAGIC, DT_SHARD_VERSION, (int32_t)ntok};
    bool ok = fwrite(hdr, sizeof hdr, 1, f) == 1 && fwrite(tokens, 2, ntok, f) == ntok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return dt_error(DT_ERR_DATA, "%s: error: writing the shard failed: %s", path, strerror(errno));
    }
    return DT_SUCCESS;
}
