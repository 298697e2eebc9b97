/*
 * test_safetensors.c - safetensors (ckpt/safetensors.h): fp32/bf16/fp16 written and read back
 * (bf16/fp16 exactly as rounded to nearest even), sharded writing read back through the index, a
 * file built here byte by byte as the format defines it (not by our writer), and every malformed
 * file or index refused with its message.
 *     make tests/unit/test_safetensors && ./tests/unit/test_safetensors
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "dt_test.h"

/* values that bf16 and fp16 round, both ways at ties, and their edges */
static const float vals[] = {1.0f, -2.5f, 3.14159265f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-9f, 65504.0f, 70000.0f,
                             0x1p-24f, 1e-30f, -0.0f, 1e30f, 0.1f};
#define NV ((int)(sizeof vals / sizeof vals[0]))

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* an 8-byte length field (len), header's bytes, then `data` bytes of data (zeros when data is NULL) */
static void put_file(const char *path, uint64_t len, const char *header, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 8; i++) fputc((int)(len >> (8 * i)) & 0xff, f);
    fputs(header, f);
    for (size_t i = 0; i < n; i++) fputc(data ? ((const unsigned char *)data)[i] : 0, f);
    fclose(f);
}

static void put_st(const char *path, const char *header, size_t n) { put_file(path, strlen(header), header, NULL, n); }

static void refused(const char *path, const char *msg)
{
    struct dt_st_set *s = (struct dt_st_set *)&s;
    assert_int_equal(dt_st_open(path, &s), DT_ERR_CKPT);
    assert_null(s);
    assert_string_equal(dt_error_msg(), msg);
}

static float rounded(float x, enum dt_dtype t)
{
    return t == DT_BF16 ? dt_f32_from_bf16(dt_bf16_from_f32(x)) : t == DT_F16 ? dt_f32_from_f16(dt_f16_from_f32(x)) : x;
}

static void round_trip(void **state)
{
    float a[NV], b[2 * 3 * 2 * 1], one = 7.0f;
    for (int i = 0; i < NV; i++) a[i] = vals[i];
    for (int i = 0; i < 12; i++) b[i] = (float)i / 3 - 1.7f;
    struct dt_st_out out[] = {{.name = "w.bias", .ndim = 1, .shape = {NV}, .data = a},
                              {.name = "layers.0.\"q\"\\proj", .ndim = 4, .shape = {2, 3, 2, 1}, .data = b},
                              {.name = "scale", .ndim = 0, .data = &one},
                              {.name = "empty", .ndim = 2, .shape = {0, 5}, .data = NULL}};
    const enum dt_dtype types[] = {DT_F32, DT_BF16, DT_F16};
    for (int k = 0; k < 3; k++) {
        enum dt_dtype dt = types[k];
        char dir[32];
        snprintf(dir, sizeof dir, "out/%s", dt_dtype_str(dt));
        assert_int_equal(dt_st_write(dir, out, 4, dt, 0), DT_SUCCESS);
        char path[64];
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        FILE *f = fopen(path, "rb");
        unsigned char h[8];
        assert_int_equal(fread(h, 1, 8, f), 8);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--) hlen = hlen << 8 | h[i];
        assert_int_equal(hlen % 8, 0); /* the data starts 8-byte aligned */
        char head[1024] = "";
        assert_true(hlen < sizeof head);
        assert_int_equal(fread(head, 1, hlen, f), hlen);
        fclose(f);
        assert_non_null(strstr(head, "{\"__metadata__\":{\"format\":\"pt\"},\"w.bias\":{\"dtype\":"));
        assert_int_equal(!exists("out/model.safetensors.index.json"), 1);

        struct dt_st_set *s;
        assert_int_equal(dt_st_open(dir, &s), DT_SUCCESS);
        assert_int_equal(dt_st_count(s), 4);
        /* name order */
        assert_string_equal(dt_st_at(s, 0)->name, "empty");
        assert_string_equal(dt_st_at(s, 1)->name, "layers.0.\"q\"\\proj");
        assert_string_equal(dt_st_at(s, 3)->name, "w.bias");
        assert_null(dt_st_find(s, "w"));
        assert_null(dt_st_find(s, "zzz"));
        for (int i = 0; i < 4; i++) {
            const struct dt_st_tensor *t = dt_st_find(s, out[i].name);
            assert_non_null(t);
            assert_int_equal(t->dtype, dt);
            assert_int_equal(t->ndim, out[i].ndim);
            int64_t numel = 1;
            for (int d = 0; d < t->ndim; d++) {
                assert_int_equal(t->shape[d], out[i].shape[d]);
                numel *= t->shape[d];
            }
            assert_int_equal(t->numel, numel);
            float got[16];
            memset(got, 0xff, sizeof got);
            assert_int_equal(dt_st_read_f32(s, t, got), DT_SUCCESS);
            for (int j = 0; j < numel; j++) {
                float want = rounded(out[i].data[j], dt);
                assert_memory_equal(&got[j], &want, sizeof want); /* bit for bit: -0 and inf included */
            }
            assert_true(isnan(got[numel])); /* nothing written past the tensor */
        }
        dt_st_close(s);
        /* the file itself opens as well */
        assert_int_equal(dt_st_open(path, &s), DT_SUCCESS);
        assert_int_equal(dt_st_count(s), 4);
        dt_st_close(s);
    }
    /* no tensors: a header of metadata alone */
    assert_int_equal(dt_st_write("none", NULL, 0, DT_BF16, 0), DT_SUCCESS);
    struct dt_st_set *s;
    assert_int_equal(dt_st_open("none/model.safetensors", &s), DT_SUCCESS);
    assert_int_equal(dt_st_count(s), 0);
    assert_null(dt_st_find(s, "a"));
    dt_st_close(s);
}

static void sharded(void **state)
{
    enum { N = 5 };
    static float v[N][64];
    struct dt_st_out out[N];
    char names[N][16];
    int64_t len[N] = {64, 64, 40, 64, 8};
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < 64; j++) v[i][j] = (float)(i * 100 + j) * 0.37f;
        snprintf(names[i], sizeof names[i], "t%d", N - i); /* names not in write order */
        out[i] = (struct dt_st_out){.name = names[i], .ndim = 2, .shape = {len[i] / 8, 8}, .data = v[i]};
    }
    /* bf16: 128, 128, 80, 128, 16 bytes into shards of at most 300: [t5 t4] [t3 t2 t1] */
    assert_int_equal(dt_st_write("ck", out, N, DT_BF16, 300), DT_SUCCESS);
    assert_true(exists("ck/model-00001-of-00002.safetensors"));
    assert_true(exists("ck/model-00002-of-00002.safetensors"));
    assert_false(exists("ck/model.safetensors"));
    FILE *f = fopen("ck/model.safetensors.index.json", "r");
    char text[1024] = "";
    assert_true(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    assert_string_equal(text, "{\n  \"metadata\": {\"total_size\": 480},\n  \"weight_map\": {\n"
                              "    \"t5\": \"model-00001-of-00002.safetensors\",\n"
                              "    \"t4\": \"model-00001-of-00002.safetensors\",\n"
                              "    \"t3\": \"model-00002-of-00002.safetensors\",\n"
                              "    \"t2\": \"model-00002-of-00002.safetensors\",\n"
                              "    \"t1\": \"model-00002-of-00002.safetensors\"\n  }\n}\n");
    const char *paths[] = {"ck", "ck/model.safetensors.index.json"};
    for (int p = 0; p < 2; p++) {
        struct dt_st_set *s;
        assert_int_equal(dt_st_open(paths[p], &s), DT_SUCCESS);
        assert_int_equal(dt_st_count(s), N);
        for (int i = 0; i < N; i++) {
            const struct dt_st_tensor *t = dt_st_find(s, names[i]);
            assert_non_null(t);
            assert_int_equal(t->shape[0], len[i] / 8);
            assert_int_not_equal(t->file, dt_st_find(s, i < 2 ? "t1" : "t5")->file);
            float got[64];
            assert_int_equal(dt_st_read_f32(s, t, got), DT_SUCCESS);
            for (int j = 0; j < len[i]; j++) assert_true(got[j] == rounded(v[i][j], DT_BF16));
        }
        dt_st_close(s);
    }
    /* a tensor bigger than the limit has a shard of its own */
    assert_int_equal(dt_st_write("big", out, 3, DT_F32, 100), DT_SUCCESS);
    assert_true(exists("big/model-00003-of-00003.safetensors"));
    /* writing one file over shards removes the index, which would name shards of another checkpoint */
    assert_int_equal(dt_st_write("ck", out, 1, DT_F32, 0), DT_SUCCESS);
    assert_false(exists("ck/model.safetensors.index.json"));
    struct dt_st_set *s;
    assert_int_equal(dt_st_open("ck", &s), DT_SUCCESS);
    assert_int_equal(dt_st_count(s), 1);
    dt_st_close(s);
    /* and shards over one file remove it (the reader takes model.safetensors first, as transformers) */
    assert_int_equal(dt_st_write("ck", out, N, DT_F16, 300), DT_SUCCESS);
    assert_false(exists("ck/model.safetensors"));
    assert_int_equal(dt_st_open("ck", &s), DT_SUCCESS);
    assert_int_equal(dt_st_count(s), N);
    assert_int_equal(dt_st_find(s, "t3")->dtype, DT_F16);
    dt_st_close(s);
}

/* A file as the safetensors crate writes one, built by hand from the format's definition: the
 * header with spaces after separators (as Python's json.dumps), padding, a gap in the data. */
static void independent_file(void **state)
{
    const char *head = "{\"__metadata__\": {\"format\": \"pt\", \"note\": \"x\"}, "
                       "\"b\": {\"dtype\": \"F16\", \"shape\": [3], \"data_offsets\": [8, 14]}, "
                       "\"a\": {\"dtype\": \"BF16\", \"shape\": [2, 2], \"data_offsets\": [0, 8]}, "
                       "\"c\": {\"shape\": [], \"dtype\": \"F32\", \"data_offsets\": [16, 20]}}";
    char padded[512];
    size_t n = strlen(head);
    snprintf(padded, sizeof padded, "%s%*s", head, (int)((16 - (8 + n) % 8) % 8), "");
    assert_int_equal((8 + strlen(padded)) % 8, 0);
    static const unsigned char data[20] = {
        0x80, 0x3f, 0x00, 0xc0, 0xc0, 0x3f, 0x49, 0x40, /* a: bf16 1, -2, 1.5, 3.140625 */
        0x00, 0x3c, 0xff, 0x7b, 0x01, 0x00,             /* b: fp16 1, 65504, 2^-24 */
        0xee, 0xee,                                     /* unused */
        0xcd, 0xcc, 0xcc, 0x3d};                        /* c: fp32 0.1f */
    put_file("hub.safetensors", strlen(padded), padded, data, sizeof data);
    struct dt_st_set *s;
    assert_int_equal(dt_st_open("hub.safetensors", &s), DT_SUCCESS);
    assert_int_equal(dt_st_count(s), 3);
    const struct dt_st_tensor *a = dt_st_find(s, "a"), *b = dt_st_find(s, "b"), *c = dt_st_find(s, "c");
    assert_int_equal(a->dtype, DT_BF16);
    assert_int_equal(a->ndim, 2);
    assert_int_equal(a->offset, 8 + strlen(padded));
    assert_int_equal(b->dtype, DT_F16);
    assert_int_equal(c->ndim, 0);
    assert_int_equal(c->numel, 1);
    float fa[4], fb[3], fc[1];
    assert_int_equal(dt_st_read_f32(s, a, fa), DT_SUCCESS);
    assert_int_equal(dt_st_read_f32(s, b, fb), DT_SUCCESS);
    assert_int_equal(dt_st_read_f32(s, c, fc), DT_SUCCESS);
    assert_true(fa[0] == 1.0f && fa[1] == -2.0f && fa[2] == 1.5f && fa[3] == 3.140625f);
    assert_true(fb[0] == 1.0f && fb[1] == 65504.0f && fb[2] == 0x1p-24f);
    assert_true(fc[0] == 0.1f);
    dt_st_close(s);
}

#define DAMAGED "\n  hint: the file is damaged or was not written as safetensors: write or download it again"

static void bad_files(void **state)
{
    /* 5 bytes: the length field itself is cut */
    FILE *f = fopen("short.safetensors", "wb");
    fwrite("\1\0\0\0\0", 1, 5, f);
    fclose(f);
    refused("short.safetensors", "short.safetensors: error: the file is 5 bytes, too short for safetensors' 8-byte "
            "header length" DAMAGED);
    put_file("long.safetensors", 1000, "{}", NULL, 6);
    refused("long.safetensors", "long.safetensors: error: the header length (bytes 0 to 8, little-endian) is 1000, "
            "more than the file holds after it (8 bytes)" DAMAGED);
    put_file("huge.safetensors", 200000000, "{}", NULL, 6);
    refused("huge.safetensors", "huge.safetensors: error: the header length (bytes 0 to 8, little-endian) is "
            "200000000, more than safetensors' limit (100000000 bytes)" DAMAGED);
    /* a header, the data's length, the message */
    static const struct {
        const char *header;
        size_t data;
        const char *msg;
    } bad[] = {
        {"[1, 2]  ", 0,
         "t.safetensors: error: the JSON header (file bytes 8 to 16) is a list, not a JSON object" DAMAGED},
        {"{\"a\": {\"dtype\": }", 0,
         "t.safetensors:2:1: error: YAML syntax: did not find expected ',' or '}' (while parsing a flow mapping at "
         "line 1, column 1)\n  hint: the JSON header (file bytes 8 to 25) is not valid JSON: the file is damaged or "
         "was not written as safetensors: write or download it again"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "t.safetensors: error: tensor 'a' has no dtype (an entry needs dtype, shape and data_offsets)" DAMAGED},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8,
         "t.safetensors: error: tensor 'a' has no shape (an entry needs dtype, shape and data_offsets)" DAMAGED},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8,
         "t.safetensors: error: tensor 'a' has no data_offsets (an entry needs dtype, shape and data_offsets)" DAMAGED},
        {"{\"a\":[]}", 0, "t.safetensors: error: tensor 'a': its entry is a list, not an object" DAMAGED},
        {"{\"pos\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
         "t.safetensors: error: tensor 'pos' has dtype I64; dtrun reads F32, BF16 and F16\n"
         "  hint: save the checkpoint's tensors as one of them (in PyTorch: t.to(torch.bfloat16))"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
         "t.safetensors: error: tensor 'a': shape is not a list of at most 4 non-negative integers" DAMAGED},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
         "t.safetensors: error: tensor 'a': shape is not a list of at most 4 non-negative integers" DAMAGED},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
         "t.safetensors: error: tensor 'a': data_offsets is not [begin, end] with begin <= end" DAMAGED},
        {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24,
         "t.safetensors: error: tensor 'a': shape [2, 3] of BF16 takes 12 bytes, but data_offsets [0, 24] span 24"
         DAMAGED},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}} ", 12,
         "t.safetensors: error: tensor 'a': data_offsets [0, 16] (file bytes 64 to 80) run past the end of the file "
         "(76 bytes)\n  hint: the file is truncated: copy or download it again"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]},"
         "\"c\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[12,16]}}", 16,
         "t.safetensors: error: tensors 'a' (data_offsets [0, 16], file bytes 171 to 187) and 'b' ([4, 8], file bytes "
         "175 to 179) overlap" DAMAGED},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_st("t.safetensors", bad[i].header, bad[i].data);
        refused("t.safetensors", bad[i].msg);
    }
    assert_int_equal(mkdir("empty", 0755), 0);
    refused("empty", "empty: error: the directory holds neither model.safetensors nor model.safetensors.index.json\n"
            "  hint: is it a Hugging Face model directory? download the model's safetensors weights into it");
    struct dt_st_set *s;
    assert_int_equal(dt_st_open("nothere", &s), DT_ERR_SYSTEM);
    assert_string_equal(dt_error_msg(), "nothere: error: cannot open the safetensors checkpoint: No such file or "
                        "directory\n  hint: give a directory holding model.safetensors (or "
                        "model.safetensors.index.json and its shards), or a .safetensors file");
}

static void bad_index(void **state)
{
    float v[4] = {1, 2, 3, 4};
    struct dt_st_out out[] = {{.name = "a", .ndim = 1, .shape = {4}, .data = v},
                              {.name = "b", .ndim = 1, .shape = {4}, .data = v}};
    assert_int_equal(dt_st_write("ck", out, 2, DT_F32, 16), DT_SUCCESS);
    const char *index = "ck/model.safetensors.index.json";
    dt_test_write(index, "{\"metadata\": {}, \"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                         "\"b\": \"model-00003-of-00003.safetensors\"}}");
    refused("ck", "ck/model.safetensors.index.json: error: weight_map puts tensor 'b' in "
            "model-00003-of-00003.safetensors, which is missing\n"
            "  hint: copy or download every shard the index names into ck");
    dt_test_write(index, "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                         "\"b\": \"model-00001-of-00002.safetensors\"}}");
    refused("ck", "ck/model.safetensors.index.json: error: weight_map puts tensor 'b' in "
            "model-00001-of-00002.safetensors, which does not hold it\n  hint: the index and the shards come from "
            "different checkpoints: write the index again (or download it again with its shards)");
    dt_test_write(index, "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", "
                         "\"c\": \"model-00002-of-00002.safetensors\"}}");
    refused("ck", "ck/model.safetensors.index.json: error: weight_map puts tensor 'c' in "
            "model-00002-of-00002.safetensors, which does not hold it\n  hint: the index and the shards come from "
            "different checkpoints: write the index again (or download it again with its shards)");
    /* b in both shards */
    assert_int_equal(rename("ck/model-00001-of-00002.safetensors", "ck/first.safetensors"), 0);
    assert_int_equal(dt_st_write("ck", out + 1, 1, DT_F32, 0), DT_SUCCESS);
    assert_int_equal(rename("ck/model.safetensors", "ck/model-00001-of-00002.safetensors"), 0);
    dt_test_write(index, "{\"weight_map\": {\"b\": \"model-00001-of-00002.safetensors\", "
                         "\"a\": \"first.safetensors\", \"c\": \"model-00002-of-00002.safetensors\"}}");
    refused("ck/model.safetensors.index.json", "ck/model-00002-of-00002.safetensors: error: tensor 'b' is also in "
            "ck/model-00001-of-00002.safetensors\n  hint: a checkpoint holds each tensor once: remove the shard that "
            "does not belong (the index names the right one)");
    dt_test_write(index, "{\"metadata\": {}}");
    refused("ck", "ck/model.safetensors.index.json: error: the index has no \"weight_map\" object (tensor name: "
            "shard file)\n  hint: write the index again (or download it again with its shards)");
    dt_test_write(index, "\"weight_map\"");
    refused("ck", "ck/model.safetensors.index.json: error: the index is a scalar, not a JSON object\n"
            "  hint: write the index again (or download it again with its shards)");
    /* a shard named by a path: never read outside the checkpoint's directory */
    dt_test_write(index, "{\"weight_map\": {\"a\": \"../ck/first.safetensors\"}}");
    refused("ck", "ck/model.safetensors.index.json: error: weight_map puts tensor 'a' in '../ck/first.safetensors', "
            "which is not a file name beside the index\n"
            "  hint: write the index again (or download it again with its shards)");
    /* a FIFO in a shard's place is refused at once, not waited on */
    assert_int_equal(mkfifo("ck/fifo.safetensors", 0644), 0);
    dt_test_write(index, "{\"weight_map\": {\"a\": \"fifo.safetensors\"}}");
    refused("ck", "ck/fifo.safetensors: error: not a regular file\n  hint: a checkpoint's shards are files");
}

DT_TESTS(T(round_trip), T(sharded), T(independent_file), T(bad_files), T(bad_index))
