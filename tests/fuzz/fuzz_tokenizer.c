/*
 * fuzz_tokenizer.c - the tokenizer.json reader and the tokenizer it builds (src/tokenize/, #40):
 * the input is the file. When it loads, the same bytes are encoded as a text (any bytes: invalid
 * UTF-8 included), decoded whole and streamed id by id; every id must be in the vocabulary, and
 * for a byte-level file the decoded text must be the input as UTF-8 repairs it.
 */
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_fuzz_init();
    char path[4096];
    dt_fuzz_write("tokenizer.json", data, size, path, sizeof path);
    dt_tokenizer_t t = NULL;
    dt_fuzz_begin();
    dt_status_t rc = dt_tokenizer_load(path, &t);
    dt_fuzz_check_error(rc, "dt_tokenizer_load");
    if (rc != DT_SUCCESS) return 0;
    dt_tok_ctx_t c = dt_tok_ctx_new(t);
    struct dt_tok_ids ids = {0};
    if (!c) dt_fuzz_fail("dt_tok_ctx_new failed");
    if (dt_tokenizer_encode(c, (const char *)data, size, &ids) != DT_SUCCESS) dt_fuzz_fail("encode failed");
    for (size_t i = 0; i < ids.n; i++)
        if (ids.v[i] >= (uint32_t)dt_tokenizer_vocab_size(t)) dt_fuzz_fail("id %u outside the vocabulary", ids.v[i]);
    size_t n;
    char *text = dt_tokenizer_decode(t, ids.v, ids.n, false, &n);
    if (!text) dt_fuzz_fail("decode failed");
    if (strcmp(dt_tokenizer_family(t), "sentencepiece")) {
        unsigned char *want = malloc(3 * size + 1);
        size_t wn = dt_utf8_repair(data, size, want);
        if (wn != n || memcmp(want, text, n)) dt_fuzz_fail("byte-level: decode(encode(x)) is not x repaired");
        free(want);
    }
    struct dt_tok_stream s;
    dt_tok_stream_init(&s, t, false);
    char buf[1 << 16];
    for (size_t i = 0; i < ids.n; i++)
        if (dt_tok_stream_feed(&s, ids.v[i], buf, sizeof buf) < 0) dt_fuzz_fail("the stream refused a token");
    dt_tok_stream_finish(&s, buf, sizeof buf);
    free(text);
    dt_tok_ids_free(&ids);
    dt_tok_ctx_free(c);
    dt_tokenizer_free(t);
    return 0;
}
