/*
 * shard.h - llm.c / nanoGPT token shards (llm.c dev/data/data_common.py
 * write_datafile and HEADERS_INFO): a header of 256 int32 (magic, version, token
 * count), then the tokens, little-endian: magic 20240520 version 1 holds uint16
 * tokens (GPT-2's 50257), magic 20240801 version 7 uint32 ones (Llama 3's 128256,
 * any vocabulary past 65536). A shard is
 * mapped read-only and checked whole when opened, so a bad file stops the run
 * before any training: wrong magic or version, truncation, a token >=
 * vocab_size, or fewer tokens than one sequence, each named with the file and
 * byte offset.
 */
#ifndef DT_SHARD_H
#define DT_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

/* llm.c's two (magic, version) pairs: "gpt-2" and "llama-3" */
#define DT_SHARD_MAGIC 20240520   /* with version 1 */
#define DT_SHARD_V16 1            /* uint16 tokens */
#define DT_SHARD_MAGIC32 20240801 /* with version 7 */
#define DT_SHARD_V32 7            /* uint32 tokens */
#define DT_SHARD_HEADER_BYTES 1024

struct dt_shard {
    char *path;
    int version;           /* DT_SHARD_V16 or DT_SHARD_V32: which of the two below is set */
    const uint16_t *tok16; /* (ntok) in the mapping */
    const uint32_t *tok32; /* (ntok) in the mapping */
    size_t ntok;
    void *map;
    size_t maplen;
};

/* min_tokens: at least one sequence (seq_len + 1). */
dt_status_t dt_shard_open(struct dt_shard *s, const char *path, int vocab_size, size_t min_tokens);
void dt_shard_close(struct dt_shard *s);
/* Tokens first .. first+n-1 of an open shard as the model takes them (every one
 * was checked below vocab_size, so it fits an int32). */
void dt_shard_tokens(const struct dt_shard *s, size_t first, size_t n, int32_t *out);
/* The version a vocabulary's shards need: 1 while its largest token fits uint16, else 7. */
int dt_shard_version(int vocab_size);
/* Write a shard (dtrun prepare, tests) of tokens below vocab_size, in the
 * version that vocabulary needs: atomically, through path.tmp and rename. */
dt_status_t dt_shard_write(const char *path, const uint32_t *tokens, size_t ntok, int vocab_size);

#endif
