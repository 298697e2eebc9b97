/* test_checksum.c - XXH64 against the published test vectors, streamed in any pieces; a manifest
 * written and read back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/manifest.h"
#include "core/checksum.h"
#include "core/error.h"
#include "dt_test.h"

static void vectors(void **state)
{
    /* xxhsum -H64 of "", "a", "abc" (the reference implementation's own sanity values) */
    assert_true(dt_xxh64("", 0, 0) == 0xEF46DB3751D8E999ull);
    assert_true(dt_xxh64("a", 1, 0) == 0xD24EC4F1A98C6E5Bull);
    assert_true(dt_xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ull);
}

static void streaming(void **state)
{
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i * 7 + 3);
    uint64_t whole = dt_xxh64(buf, sizeof buf, 0);
    static const size_t pieces[] = {1, 3, 31, 32, 33, 64, 999};
    for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
        struct dt_xxh64 h;
        dt_xxh64_init(&h, 0);
        for (size_t at = 0; at < sizeof buf; at += pieces[p])
            dt_xxh64_update(&h, buf + at, sizeof buf - at < pieces[p] ? sizeof buf - at : pieces[p]);
        assert_true(dt_xxh64_final(&h) == whole);
    }
    buf[500] ^= 1; /* one flipped bit changes it */
    assert_true(dt_xxh64(buf, sizeof buf, 0) != whole);
}

static void manifest_round_trip(void **state)
{
    const char *dir = "."; /* the fixture's fresh directory, which teardown removes */
    struct dt_run_state m = {.step = 40, .opt_steps = 38, .samples = 320, .tokens = 10240, .run_id = "0123456789abcdef",
                             .scaler = {.scale = 32768, .cur_hysteresis = 1, .cur_iter = 40, .last_overflow_iter = 7,
                                        .skipped = 2},
                             .loss = 2.5, .val_loss = NAN, .seed = 18446744073709551615ull,
                             .config_hash = "sha256:ab", .model = "gpt n_layer=2", .nparams = 1000,
                             .optimizer = "adamw", .narrays = 3, .strategy = "zero3", .precision = "bf16-mixed",
                             .stage = 3, .world = 4, .restart = 1, .saved_at = "2026-11-23T10:00:00.000Z"};
    struct dt_ckpt_file files[2] = {{"rank-00000-of-00002.bin", 123, 0xfedcba9876543210ull},
                                    {"rank-00001-of-00002.bin", 456, 1}};
    char *text = dt_manifest_text(&m, files, 2), path[64];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    free(text);
    struct dt_run_state r;
    struct dt_ckpt_file *got;
    int n;
    assert_int_equal(dt_manifest_read(dir, &r, &got, &n), DT_SUCCESS);
    assert_int_equal(n, 2);
    assert_string_equal(got[1].name, "rank-00001-of-00002.bin");
    assert_true(got[0].xxh64 == 0xfedcba9876543210ull && got[1].bytes == 456);
    assert_true(r.step == 40 && r.opt_steps == 38 && r.samples == 320 && r.tokens == 10240 && r.seed == m.seed);
    assert_true(r.scaler.scale == 32768 && r.scaler.skipped == 2 && r.scaler.last_overflow_iter == 7);
    assert_true(r.loss == 2.5 && isnan(r.val_loss) && r.world == 4 && r.stage == 3 && r.restart == 1);
    assert_string_equal(r.strategy, "zero3");
    free(got);
    /* a file name that leaves the directory is refused */
    snprintf(files[0].name, sizeof files[0].name, "../escape.bin");
    text = dt_manifest_text(&m, files, 2);
    f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    free(text);
    assert_int_equal(dt_manifest_read(dir, &r, &got, &n), DT_ERR_CKPT);
    assert_non_null(strstr(dt_error_msg(), "manifest.json: error: the manifest is incomplete or malformed"));
}

DT_TESTS(T(vectors), T(streaming), T(manifest_round_trip))
