/*
 * shard.h - llm.c / nanoGPT token shards: a header of 256 int32 (magic
 * 20240520, version 1, token count), then uint16 tokens. A shard is mapped
 * read-only and checked whole when opened, so a bad file stops the run before
 * any training: wrong magic or version, truncation, a token >= vocab_size, or
 * fewer tokens than one sequence, each named with the file and byte offset.
 */
#ifndef DT_SHARD_H
#define DT_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

#define DT_SHARD_MAGIC 20240520
#define DT_SHARD_VERSION 1
#define DT_SHARD_HEADER_BYTES 1024

struct dt_shard {
    char *path;
    const uint16_t *tokens;
    size_t ntok;
    void *map;
    size_t maplen;
};

/* min_tokens: at least one sequence (seq_len + 1). */
dt_status_t dt_shard_open(struct dt_shard *s, const char *path, int vocab_size, size_t min_tokens);
void dt_shard_close(struct dt_shard *s);
/* Write a shard (dtrun prepare, tests): atomically, through path.tmp and rename. */
dt_status_t dt_shard_write(const char *path, const uint16_t *tokens, size_t ntok);

#endif
