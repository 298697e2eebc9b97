/*
 * prepare_manifest.h - DIR/prepare.json, what `dtrun prepare --tokenizer` leaves beside its shards
 * (#40): the tokenizer that made them (path, family, vocabulary size, document token), the counts,
 * and the shards it wrote. A run on those shards checks model.vocab_size against it; prepare run
 * again into DIR replaces exactly those shards.
 */
#ifndef DT_PREPARE_MANIFEST_H
#define DT_PREPARE_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

#define DT_PREPARE_MANIFEST "prepare.json"

struct dt_prepare_manifest {
    char tokenizer[4096];
    char family[32];
    int vocab_size;
    int32_t doc_token;
    uint64_t documents, train_tokens, val_tokens, bytes;
    char **shards; /* names inside DIR */
    int nshards;
};

/* Writes DIR/prepare.json atomically (through a .tmp and rename). */
dt_status_t dt_prepare_manifest_write(const char *dir, const struct dt_prepare_manifest *m);
/* Reads DIR/prepare.json; *found false (and DT_SUCCESS) when there is none. */
dt_status_t dt_prepare_manifest_read(const char *dir, struct dt_prepare_manifest *m, bool *found);
void dt_prepare_manifest_free(struct dt_prepare_manifest *m);
/* A run's check of the directory of SHARD_PATH: when it records a tokenizer, model.vocab_size
 * (vocab) must hold its ids (larger is fine: padding, as nanoGPT's 50304). key names the setting. */
dt_status_t dt_prepare_manifest_check(const char *shard_path, int vocab, const char *key);

#endif
