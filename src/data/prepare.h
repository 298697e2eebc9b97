/*
 * prepare.h - `dtrun prepare TEXT... --out DIR [--val-fraction F]`: byte-level
 * token shards (one token per byte, vocabulary 256) in llm.c's format, so a
 * GPT can train on any text with no tokenizer. The last F of each file's
 * bytes (default 0.1) go to validation. The shards are in the version the
 * vocabulary needs (dt_shard_version): 1, uint16 tokens, for bytes.
 */
#ifndef DT_PREPARE_H
#define DT_PREPARE_H

#include "core/status.h"

/* Writes DIR/train_000000.bin and DIR/val_000000.bin; reports what it wrote. */
dt_status_t dt_prepare(int nfiles, char *const *files, const char *out_dir, double val_fraction);

#endif
