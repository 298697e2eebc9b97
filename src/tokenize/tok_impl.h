/*
 * tok_impl.h - the tokenizer's insides, shared by the files of src/tokenize/: load.c fills it,
 * split.c cuts text into pieces (pre-tokenizers), bpe.c merges a piece, encode.c runs the
 * pipeline, decode.c goes back to text.
 */
#ifndef DT_TOK_IMPL_H
#define DT_TOK_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tokenize/tokenizer.h"

enum tok_split { SPLIT_GPT2, SPLIT_LLAMA3, SPLIT_NONE };

struct dt_tokenizer {
    char *path;
    enum tok_split split;
    bool spm;           /* SentencePiece-style: `▁` for spaces, BPE over characters, byte fallback */
    bool metaspace;     /* the Metaspace pre-tokenizer instead of the normalizer: no `▁` put before a
                         * text that starts with one (or with a space) */
    bool ignore_merges; /* a piece that is a token whole is that token (Llama 3) */
    bool byte_fallback;
    bool spm_cut;       /* a long SentencePiece text may be cut before a `▁` that follows another
                         * character: checked at load that no merged token holds such a pair */
    int32_t nvocab;     /* one past the largest id */
    /* each id's text: raw bytes for byte-level files (ByteLevel's alphabet undone), UTF-8 with `▁`
     * for SentencePiece; ids missing from the file (holes in the numbering) have len 0 and no entry in vh */
    char *pool;
    uint32_t *off, *len;
    uint8_t *special;   /* per id: an added special token (left out by decode's skip_special) */
    int16_t *byteval;   /* per id: the byte of a <0xNN> token, else -1 */
    int32_t *vh;        /* text -> id, open addressing; -1 empty */
    uint32_t vmask;
    uint64_t *mk;       /* merges: (left id << 32 | right id) -> rank and result, open addressing */
    uint32_t *mrank;
    int32_t *mres;
    uint32_t mmask;
    int32_t byte_tok[256]; /* byte-level: the id of each byte; SentencePiece: <0xNN>'s id or -1 */
    int32_t ascii[128];    /* SentencePiece: each ASCII character's token, -1 none (looked up once at load) */
    int32_t unk;
    int32_t doc;
};

#define TOK_NO_MERGE UINT32_MAX

uint64_t dt_tok_hash(const void *p, size_t n);
int32_t dt_tok_lookup(const struct dt_tokenizer *t, const char *s, size_t n);
/* The rank of merging ids a and b (TOK_NO_MERGE when none) and the merged id in *res. */
static inline uint32_t dt_tok_merge(const struct dt_tokenizer *t, int32_t a, int32_t b, int32_t *res)
{
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = (uint32_t)(h >> 32) & t->mmask;; i = (i + 1) & t->mmask) {
        if (t->mres[i] < 0) return TOK_NO_MERGE;
        if (t->mk[i] == k) {
            *res = t->mres[i];
            return t->mrank[i];
        }
    }
}

/* A pre-tokenizer: the end of the piece that starts at s[i] (i < n). */
size_t dt_tok_split_gpt2(const unsigned char *s, size_t n, size_t i);
size_t dt_tok_split_llama3(const unsigned char *s, size_t n, size_t i);

/* Per-thread scratch for BPE (bpe.c). */
struct bpe_scratch {
    int32_t *id;
    int32_t *prev, *next;
    struct bpe_entry { uint32_t rank, pos; int32_t a, b; } *heap;
    size_t cap, hcap;
};
/* Merges the symbols sym[0..n) in place; returns the count left, or -1 when memory runs out. */
long dt_tok_bpe(const struct dt_tokenizer *t, struct bpe_scratch *s, int32_t *sym, size_t n);
void dt_tok_bpe_free(struct bpe_scratch *s);

#endif
