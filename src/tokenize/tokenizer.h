/*
 * tokenizer.h - Hugging Face tokenizers in C (#40): reads a tokenizer.json (or a directory holding
 * one, or GPT-2's original encoder.json/vocab.json + vocab.bpe/merges.txt) and encodes exactly as
 * Hugging Face's Rust `tokenizers` does for three families: byte-level BPE with GPT-2's
 * pre-tokenizer, Llama 3's (cl100k's regex, ignore_merges), and SentencePiece-style BPE with byte
 * fallback and the `▁` normalizer (Llama 2, TinyLlama, Mistral). Anything else a file asks for is
 * refused by name, with its place in the file.
 *
 * Special tokens are never parsed out of text: "<|endoftext|>" in a document is ordinary text.
 * Document delimiters are inserted by id (dt_tokenizer_doc_token).
 *
 * Text that is not valid UTF-8 is read with each maximal invalid subpart replaced by U+FFFD, as
 * Python's and JavaScript's decoders (WHATWG) hand such text to Hugging Face.
 *
 * A tokenizer is immutable after loading and shared by threads; each thread encodes through its
 * own dt_tok_ctx_t (scratch memory and a word cache).
 */
#ifndef DT_TOKENIZER_H
#define DT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

typedef struct dt_tokenizer *dt_tokenizer_t;
typedef struct dt_tok_ctx *dt_tok_ctx_t;

/* A growing list of token ids. */
struct dt_tok_ids {
    uint32_t *v;
    size_t n, cap;
};

/* PATH: a tokenizer.json, a directory holding tokenizer.json (or GPT-2's original files), or
 * encoder.json/vocab.json beside vocab.bpe/merges.txt. */
dt_status_t dt_tokenizer_load(const char *path, dt_tokenizer_t *out);
void dt_tokenizer_free(dt_tokenizer_t t);
/* One past the largest id, added tokens included (50257 for GPT-2, 128256 for Llama 3). */
int dt_tokenizer_vocab_size(dt_tokenizer_t t);
/* "gpt2", "llama3" or "sentencepiece": the pre-tokenizer family. */
const char *dt_tokenizer_family(dt_tokenizer_t t);
/* The path it was loaded from, as given. */
const char *dt_tokenizer_path(dt_tokenizer_t t);
/* The id of a token's exact text (added tokens included), or -1. */
int32_t dt_tokenizer_token_id(dt_tokenizer_t t, const char *text);
/* The document token prepare puts before each document: the file's BOS (<|begin_of_text|>, <s>)
 * or GPT-2's <|endoftext|> as llm.c does; -1 when the file has none of them. */
int32_t dt_tokenizer_doc_token(dt_tokenizer_t t);

dt_tok_ctx_t dt_tok_ctx_new(dt_tokenizer_t t);
void dt_tok_ctx_free(dt_tok_ctx_t c);
/* Appends the ids of text[0..n) to out (no document token). Fails only when memory runs out. */
dt_status_t dt_tokenizer_encode(dt_tok_ctx_t c, const char *text, size_t n, struct dt_tok_ids *out);
void dt_tok_ids_free(struct dt_tok_ids *ids);

/* The text of ids, as Hugging Face's decode: byte-level bytes with invalid UTF-8 replaced by
 * U+FFFD; for SentencePiece `▁` read as a space, <0xNN> runs as bytes (each byte of an invalid
 * run a U+FFFD, as ByteFallback does) and the first leading space dropped. skip_special leaves out
 * the added special tokens. Returns a NUL-terminated malloc'd string (length in *len), NULL when
 * memory runs out; ids outside the vocabulary are left out. */
char *dt_tokenizer_decode(dt_tokenizer_t t, const uint32_t *ids, size_t n, bool skip_special, size_t *len);

/* Streaming decode for generation: feed one id at a time and get the text that is complete so
 * far, never half a character. A byte run that cannot become valid UTF-8 comes out as one U+FFFD
 * per maximal invalid subpart (Hugging Face's ByteFallback gives one per byte: the difference
 * only shows on invalid output). */
struct dt_tok_stream {
    dt_tokenizer_t t;
    bool skip_special, started;
    unsigned char pend[8]; /* bytes of an unfinished character */
    int npend;
};
void dt_tok_stream_init(struct dt_tok_stream *s, dt_tokenizer_t t, bool skip_special);
/* Writes what id completes into buf (at most 64 bytes + the token's length; bufsize is checked)
 * and returns its length, or -1 when it does not fit. */
int dt_tok_stream_feed(struct dt_tok_stream *s, uint32_t id, char *buf, size_t bufsize);
/* What is left at the end (an unfinished character as U+FFFD). */
int dt_tok_stream_finish(struct dt_tok_stream *s, char *buf, size_t bufsize);

#endif
