/*
 * test_loader.c - the sampler: every shard window once per epoch, a new order each epoch, reproducible;
 * token shards in both of llm.c's formats (magic 20240520 version 1: uint16 tokens; magic 20240801 version 7:
 * uint32, for vocabularies past 65536, #30)
 * read back exactly and refused with the same checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config/resolve.h"
#include "core/error.h"
#include "data/loader.h"
#include "data/shard.h"
#include "dt_test.h"

static void epochs_are_permutations(void **state)
{
    /* 3 shards; token value = window id so a sequence names its window */
    int T = 4, per[3] = {5, 3, 7};
    int id = 0;
    for (int s = 0; s < 3; s++) {
        size_t n = (size_t)per[s] * T + 1;
        uint32_t *tok = calloc(n, sizeof *tok);
        for (int w = 0; w < per[s]; w++)
            for (int t = 0; t < T; t++) tok[w * T + t] = (uint32_t)(id + w);
        id += per[s];
        char path[64];
        snprintf(path, sizeof path, "s_%d.bin", s);
        assert_int_equal(dt_shard_write(path, tok, n, 256), DT_SUCCESS);
        free(tok);
    }
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "data.train=s_*.bin", "model.seq_len=4", NULL), DT_SUCCESS);
    struct dt_dataset d, again;
    assert_int_equal(dt_dataset_open(&d, &cfg, false), DT_SUCCESS);
    assert_int_equal(dt_dataset_open(&again, &cfg, false), DT_SUCCESS);
    assert_int_equal(dt_dataset_windows(&d), 15);
    int32_t row[5], row2[5];
    int order[2][15];
    for (int e = 0; e < 2; e++) {
        int seen[15] = {0};
        for (int i = 0; i < 15; i++) {
            dt_dataset_batch(&d, e * 15 + i, 1, row);
            dt_dataset_batch(&again, e * 15 + i, 1, row2);
            assert_memory_equal(row, row2, sizeof row); /* reproducible from the sample index alone */
            seen[row[0]]++;
            order[e][i] = row[0];
        }
        for (int w = 0; w < 15; w++) assert_int_equal(seen[w], 1);
    }
    assert_memory_not_equal(order[0], order[1], sizeof order[0]);
    dt_dataset_close(&d);
    dt_dataset_close(&again);
    dt_config_free(&cfg);
}

static void synthetic_is_a_function_of_the_index(void **state)
{
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, NULL), DT_SUCCESS);
    struct dt_dataset tr, va;
    assert_int_equal(dt_dataset_open(&tr, &cfg, false), DT_SUCCESS);
    assert_int_equal(dt_dataset_open(&va, &cfg, true), DT_SUCCESS);
    int T = (int)cfg.model.seq_len;
    int32_t *a = malloc(4 * (T + 1) * sizeof *a), *b = malloc(4 * (T + 1) * sizeof *b);
    dt_dataset_batch(&tr, 100, 4, a);
    dt_dataset_batch(&tr, 102, 2, b); /* samples 102, 103 again, read from another offset */
    assert_memory_equal(a + 2 * (T + 1), b, 2 * (T + 1) * sizeof *a);
    dt_dataset_batch(&va, 100, 1, b);
    assert_memory_not_equal(a, b, (T + 1) * sizeof *a); /* validation is another stream */
    for (int i = 0; i < 4 * (T + 1); i++) assert_true(a[i] >= 0 && a[i] < cfg.data.synthetic.alphabet);
    free(a);
    free(b);
    dt_dataset_close(&tr);
    dt_dataset_close(&va);
    dt_config_free(&cfg);
}

// ----------------------------------------------------------------------------
// shard versions

#define LLAMA3_VOCAB 128256

/* The file's bytes (malloc'd) and their number. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void spill(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* dt_shard_open must fail with exactly `want` as the message. */
static void refused(const char *path, int vocab, size_t min_tokens, const char *want)
{
    struct dt_shard s;
    assert_int_equal(dt_shard_open(&s, path, vocab, min_tokens), DT_ERR_DATA);
    assert_string_equal(dt_error_msg(), want);
}

static void version_follows_the_vocabulary(void **state)
{
    /* 65536 tokens still fit uint16 (the largest is 65535); one more needs uint32 */
    assert_int_equal(dt_shard_version(256), DT_SHARD_V16);
    assert_int_equal(dt_shard_version(50257), DT_SHARD_V16);
    assert_int_equal(dt_shard_version(65536), DT_SHARD_V16);
    assert_int_equal(dt_shard_version(65537), DT_SHARD_V32);
    assert_int_equal(dt_shard_version(LLAMA3_VOCAB), DT_SHARD_V32);
    uint32_t tok[9] = {0, 1, 255, 7, 8, 9, 10, 11, 12};
    assert_int_equal(dt_shard_write("v1.bin", tok, 9, 256), DT_SUCCESS);
    size_t n;
    unsigned char *b = slurp("v1.bin", &n);
    int32_t hdr[3];
    memcpy(hdr, b, sizeof hdr);
    assert_int_equal(n, DT_SHARD_HEADER_BYTES + 2 * 9); /* llm.c's GPT-2 layout, byte for byte */
    assert_true(hdr[0] == DT_SHARD_MAGIC && hdr[1] == 1 && hdr[2] == 9);
    assert_true(b[DT_SHARD_HEADER_BYTES + 4] == 255 && b[DT_SHARD_HEADER_BYTES + 5] == 0);
    free(b);
    /* the writer refuses what the reader would */
    tok[4] = 256;
    assert_int_equal(dt_shard_write("bad.bin", tok, 9, 256), DT_ERR_INTERNAL);
    assert_string_equal(dt_error_msg(), "bad.bin: error: token 256 (token 4) is not below the vocabulary's size 256; "
                                        "nothing written");
    assert_int_equal(access("bad.bin", F_OK), -1);
}

static void v2_tokens_read_back_exactly(void **state)
{
    /* tokens on both sides of 65535 and Llama 3's largest: a uint16 read would wrap them */
    enum { T = 4, N = 3 * T + 1 };
    uint32_t tok[N] = {0, 65535, 65536, 65537, 100000, 128255, 1, 2, 70000, 90000, 5, 6, 127999};
    assert_int_equal(dt_shard_write("v2.bin", tok, N, LLAMA3_VOCAB), DT_SUCCESS);
    size_t n;
    unsigned char *b = slurp("v2.bin", &n);
    int32_t hdr[3];
    memcpy(hdr, b, sizeof hdr);
    assert_int_equal(n, DT_SHARD_HEADER_BYTES + 4 * N);
    assert_true(hdr[0] == 20240801 && hdr[1] == 7 && hdr[2] == N);
    /* little-endian uint32, as llm.c writes them: 65536 is 00 00 01 00 */
    assert_memory_equal(b + DT_SHARD_HEADER_BYTES + 4 * 2, "\x00\x00\x01\x00", 4);
    free(b);

    struct dt_shard s;
    assert_int_equal(dt_shard_open(&s, "v2.bin", LLAMA3_VOCAB, T + 1), DT_SUCCESS);
    assert_int_equal(s.version, DT_SHARD_V32);
    assert_int_equal(s.ntok, N);
    int32_t got[N];
    dt_shard_tokens(&s, 0, N, got);
    for (int i = 0; i < N; i++) assert_int_equal(got[i], tok[i]);
    dt_shard_close(&s);

    /* through the loader: validation reads windows in order, T + 1 tokens at stride T */
    struct dt_config cfg;
    assert_int_equal(dt_test_config(&cfg, NULL, NULL, "data.train=v2.bin", "data.val=v2.bin", "model.seq_len=4",
                                    "model.vocab_size=128256", NULL),
                     DT_SUCCESS);
    struct dt_dataset d;
    assert_int_equal(dt_dataset_open(&d, &cfg, true), DT_SUCCESS);
    assert_int_equal(dt_dataset_windows(&d), 3);
    int32_t rows[3][T + 1];
    dt_dataset_batch(&d, 0, 3, &rows[0][0]);
    for (int w = 0; w < 3; w++)
        for (int t = 0; t <= T; t++) assert_int_equal(rows[w][t], tok[w * T + t]);
    dt_dataset_close(&d);
    dt_config_free(&cfg);
}

static void v2_checks_match_v1(void **state)
{
    uint32_t tok[9] = {1, 2, 3, 100000, 5, 6, 7, 8, 9};
    assert_int_equal(dt_shard_write("v2.bin", tok, 9, LLAMA3_VOCAB), DT_SUCCESS);
    /* the offset counts 4-byte tokens: token 3 is at byte 1024 + 12 */
    refused("v2.bin", 65537, 9,
            "v2.bin: error: token 100000 at byte 1036 (token 3) is not below model.vocab_size 65537\n"
            "  hint: set model.vocab_size to the tokenizer's size (50257 for GPT-2, 128256 for Llama 3), or re-make "
            "the shard");

    /* past INT32_MAX: refused as too large, not wrapped to a negative id */
    size_t n;
    unsigned char *b = slurp("v2.bin", &n);
    memcpy(b + DT_SHARD_HEADER_BYTES + 4 * 5, "\xff\xff\xff\xff", 4);
    spill("huge.bin", b, n);
    refused("huge.bin", LLAMA3_VOCAB, 9,
            "huge.bin: error: token 4294967295 at byte 1044 (token 5) is not below model.vocab_size 128256\n"
            "  hint: set model.vocab_size to the tokenizer's size (50257 for GPT-2, 128256 for Llama 3), or re-make "
            "the shard");

    /* cut to what 9 uint16 tokens would take: the header's count is read in the shard's width */
    spill("cut.bin", b, DT_SHARD_HEADER_BYTES + 2 * 9);
    refused("cut.bin", LLAMA3_VOCAB, 9,
            "cut.bin: error: truncated: the header (byte 8) says 9 tokens, 1060 bytes in all, but the file has 1042 "
            "bytes\n  hint: the shard was cut off while being written or copied; make it again");
    spill("long.bin", b, n - 2); /* not a whole token short: still the count that decides */
    refused("long.bin", LLAMA3_VOCAB, 9,
            "long.bin: error: truncated: the header (byte 8) says 9 tokens, 1060 bytes in all, but the file has 1058 "
            "bytes\n  hint: the shard was cut off while being written or copied; make it again");

    refused("v2.bin", LLAMA3_VOCAB, 17,
            "v2.bin: error: the shard holds 9 tokens, fewer than one sequence (model.seq_len + 1 = 17)\n"
            "  hint: lower model.seq_len, or make larger shards");

    b[4] = 1; /* the uint16 version after the uint32 magic */
    spill("v3.bin", b, n);
    refused("v3.bin", LLAMA3_VOCAB, 9,
            "v3.bin: error: shard version 1 at byte 4 after magic 20240801, which llm.c writes with version 7\n"
            "  hint: make shards with `dtrun prepare TEXT... --out DIR` or llm.c's dev/data scripts");
    free(b);
}

DT_TESTS(T(epochs_are_permutations), T(synthetic_is_a_function_of_the_index), T(version_follows_the_vocabulary),
         T(v2_tokens_read_back_exactly), T(v2_checks_match_v1))
