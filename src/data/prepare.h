/*
 * prepare.h - `dtrun prepare TEXT... --out DIR [--val-fraction F]`: byte-level
 * token shards (one token per byte, vocabulary 256) in llm.c's format, so a
 * GPT can train on any text with no tokenizer. The last F of each file's
 * bytes (default 0.1) go to validation. The shards are in the version the
 * vocabulary needs (dt_shard_version): 1, uint16 tokens, for bytes.
 */
#ifndef DT_PREPARE_H
#define DT_PREPARE_H

#include <stddef.h>
#include "core/status.h"

/* Writes DIR/train_000000.bin and DIR/val_000000.bin; reports what it wrote. */
dt_status_t dt_prepare(int nfiles, char *const *files, const char *out_dir, double val_fraction);

/* `dtrun prepare TEXT... --out DIR --tokenizer PATH` (prepare_tok.c, #40): text files (one
 * document each) and JSON Lines (.jsonl, one document a line) through a Hugging Face tokenizer,
 * each document after the tokenizer's document token; shards of shard_tokens tokens, 16- or
 * 32-bit by the vocabulary, and DIR/prepare.json naming the tokenizer. */
struct dt_prepare_opts {
    int nfiles;
    char *const *files;
    const char *out_dir;
    double val_fraction; /* whole documents, spread evenly */
    const char *tokenizer;
    const char *text_key;  /* JSON Lines: the documents' field ("text") */
    size_t shard_tokens;   /* tokens a shard holds (llm.c: 10^8) */
    int threads;           /* 0: every core online */
    const char *doc_token; /* NULL: the tokenizer's BOS, or <|endoftext|> */
    /* ranks (srun, mpirun): each takes the documents that start in its equal share of the input
     * bytes and names its shards train_rNNNN_NNNNNN.bin; barrier waits for every rank */
    int rank, nranks;
    dt_status_t (*barrier)(void *arg, const char *what);
    void *barrier_arg;
};
dt_status_t dt_prepare_tokenized(const struct dt_prepare_opts *o);
/* A whole input file (at most 2 GiB), for both. */
dt_status_t dt_prepare_read_file(const char *path, unsigned char **buf, size_t *n);

#endif
