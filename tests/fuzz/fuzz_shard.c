/*
 * fuzz_shard.c - llm.c token shards (data/shard.c): the bytes as a shard file opened by
 * dt_shard_open, which checks the 1024-byte header (magic and version: 20240520 and 1, or
 * 20240801 and 7; the token count
 * against the file's size in that version's token width) and every token against the
 * vocabulary. Twice: as GPT-2 (50257 tokens, sequences of 64) and byte-level (256
 * tokens, sequences of 8). An opened shard must hold what its header says, and no token
 * the vocabulary lacks.
 */
#include "data/shard.h"
#include "fuzz.h"

static void open_as(const char *path, int vocab, size_t min_tokens)
{
    struct dt_shard s;
    dt_fuzz_begin();
    dt_status_t rc = dt_shard_open(&s, path, vocab, min_tokens);
    dt_fuzz_check_error(rc, "dt_shard_open");
    if (rc != DT_SUCCESS) return;
    size_t width = s.version == DT_SHARD_V32 ? 4 : 2;
    if (s.ntok < min_tokens || s.maplen != DT_SHARD_HEADER_BYTES + width * s.ntok)
        dt_fuzz_fail("an opened shard holds %zu tokens in %zu bytes", s.ntok, s.maplen);
    for (size_t i = 0; i < s.ntok; i++) {
        int32_t t;
        dt_shard_tokens(&s, i, 1, &t);
        if (t < 0 || t >= vocab) dt_fuzz_fail("token %zu is %d, not below %d", i, t, vocab);
    }
    dt_shard_close(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    dt_fuzz_write("train_000.bin", data, size, path, sizeof path);
    open_as(path, 50257, 65);
    open_as(path, 256, 9);
    return 0;
}
