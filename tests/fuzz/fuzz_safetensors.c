/*
 * fuzz_safetensors.c - Hugging Face safetensors checkpoints (ckpt/safetensors.c, what
 * model.init_from reads): dt_st_open checks the 8-byte header length, the JSON header (every
 * tensor's dtype, shape and data_offsets against the file's size, no two tensors sharing a byte)
 * and, for a sharded checkpoint, model.safetensors.index.json against the shards it names.
 * Two layouts, chosen by the first byte:
 *   - anything but '{': the bytes are one file, model.safetensors;
 *   - '{': the bytes up to the first NUL are model.safetensors.index.json, the rest its shards
 *     model-0000K-of-0000N.safetensors, separated by the 4 bytes "\0--\0" (at most 3).
 * Each is opened twice, as its directory and as its file (the single file, or the index), which
 * must agree. An opened checkpoint is walked: every tensor in name order, found again by name,
 * with a dtype, shape and element count that agree, read by dt_st_read_f32 (those of at most
 * MAX_READ bytes as fp32, into a buffer of exactly that size) without error, and widened exactly
 * (a single file's F32 and BF16 values bit for bit against its bytes; F16 values back to the same
 * half, a NaN quieted). Shard names holding a '/' are skipped: the fuzzer's files stay in the
 * target's directory.
 */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/safetensors.h"
#include "config/ynode.h"
#include "core/dtype.h"
#include "fuzz.h"

#define MAX_READ ((uint64_t)4 << 20) /* bytes of fp32 per tensor read back: larger ones are skipped */
#define MAX_SHARDS 3

static const char sep[4] = {'\0', '-', '-', '\0'};

static bool same_set(const struct dt_st_set *a, const struct dt_st_set *b)
{
    if (dt_st_count(a) != dt_st_count(b)) return false;
    for (int i = 0; i < dt_st_count(a); i++) {
        const struct dt_st_tensor *x = dt_st_at(a, i), *y = dt_st_at(b, i);
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->numel != y->numel || x->offset != y->offset)
            return false;
    }
    return true;
}

/* one tensor's values: read, and checked against the file's bytes (raw: NULL when not known) */
static void read_one(struct dt_st_set *s, const struct dt_st_tensor *t, const uint8_t *raw, size_t rawlen)
{
    size_t n = (size_t)t->numel, w = dt_dtype_size(t->dtype);
    float *v = malloc(n ? n * sizeof *v : 1);
    if (!v) dt_fuzz_fail("out of memory");
    dt_fuzz_begin();
    dt_status_t rc = dt_st_read_f32(s, t, v);
    dt_fuzz_check_error(rc, "dt_st_read_f32");
    if (rc != DT_SUCCESS) dt_fuzz_fail("tensor '%s' of an opened checkpoint does not read", t->name);
    if (raw && (t->offset > rawlen || n * w > rawlen - t->offset))
        dt_fuzz_fail("tensor '%s' (%zu bytes from byte %llu) runs past the file's %zu bytes", t->name, n * w,
                     (unsigned long long)t->offset, rawlen);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        uint16_t h = 0;
        if (raw && w == 2) memcpy(&h, raw + t->offset + 2 * i, 2);
        if (t->dtype == DT_F32) {
            if (raw && memcmp(&u, raw + t->offset + 4 * i, 4))
                dt_fuzz_fail("tensor '%s': F32 value %zu is not the file's bytes", t->name, i);
        } else if (t->dtype == DT_BF16) {
            if ((u & 0xffffu) || (raw && u >> 16 != h))
                dt_fuzz_fail("tensor '%s': BF16 value %zu reads as %08x, not its bits widened (%04x)", t->name, i,
                             (unsigned)u, (unsigned)h);
        } else {
            /* every half widens exactly: it narrows back to itself (a NaN comes back quiet) */
            uint16_t back = dt_f16_from_f32(v[i]);
            bool nan = (back & 0x7c00u) == 0x7c00u && (back & 0x3ffu);
            if (dt_f32_from_f16(back) != v[i] && !nan)
                dt_fuzz_fail("tensor '%s': F16 value %zu reads as %08x, which no half is", t->name, i, (unsigned)u);
            if (raw && back != (nan ? h | 0x200u : h))
                dt_fuzz_fail("tensor '%s': F16 value %zu (%04x) reads as %08x", t->name, i, (unsigned)h, (unsigned)u);
        }
    }
    free(v);
}

/* every tensor of an opened checkpoint (raw: the single file's bytes, or NULL) */
static void walk(struct dt_st_set *s, const uint8_t *raw, size_t rawlen)
{
    int n = dt_st_count(s);
    if (n < 0) dt_fuzz_fail("dt_st_count is %d", n);
    for (int i = 0; i < n; i++) {
        const struct dt_st_tensor *t = dt_st_at(s, i);
        if (!t || !t->name) dt_fuzz_fail("tensor %d of %d has no name", i, n);
        if (i > 0 && strcmp(dt_st_at(s, i - 1)->name, t->name) >= 0)
            dt_fuzz_fail("tensors %d '%s' and %d '%s' are not in name order (or one name twice)", i - 1,
                         dt_st_at(s, i - 1)->name, i, t->name);
        if (dt_st_find(s, t->name) != t) dt_fuzz_fail("dt_st_find does not find tensor '%s'", t->name);
        if (t->dtype != DT_F32 && t->dtype != DT_BF16 && t->dtype != DT_F16)
            dt_fuzz_fail("tensor '%s' has dtype %d", t->name, (int)t->dtype);
        if (t->ndim < 0 || t->ndim > DT_ST_MAX_DIMS) dt_fuzz_fail("tensor '%s' has %d dimensions", t->name, t->ndim);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) dt_fuzz_fail("tensor '%s': dimension %d is %lld", t->name, d, (long long)t->shape[d]);
            if (__builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel))
                dt_fuzz_fail("tensor '%s': its shape's product passes 2^64", t->name);
        }
        if (t->numel < 0 || (uint64_t)t->numel != numel)
            dt_fuzz_fail("tensor '%s' has %lld elements, its shape %llu", t->name, (long long)t->numel,
                         (unsigned long long)numel);
        if (numel <= MAX_READ / sizeof(float)) read_one(s, t, raw, rawlen);
    }
    const struct dt_st_tensor *x = dt_st_find(s, "\x01none");
    if (x && strcmp(x->name, "\x01none")) dt_fuzz_fail("dt_st_find(\"\\x01none\") finds '%s'", x->name);
}

/* path opened as path and as alt, which must agree; the first walked */
static void open_both(const char *path, const char *alt, const uint8_t *raw, size_t rawlen)
{
    struct dt_st_set *a, *b;
    dt_fuzz_begin();
    dt_status_t ra = dt_st_open(path, &a);
    dt_fuzz_check_error(ra, "dt_st_open");
    if (ra != DT_SUCCESS && a) dt_fuzz_fail("dt_st_open failed, yet gave a checkpoint");
    dt_fuzz_begin();
    dt_status_t rb = dt_st_open(alt, &b);
    dt_fuzz_check_error(rb, "dt_st_open");
    if ((ra == DT_SUCCESS) != (rb == DT_SUCCESS) || (ra == DT_SUCCESS && !same_set(a, b)))
        dt_fuzz_fail("%s and %s open differently", path, alt);
    if (ra == DT_SUCCESS) walk(a, raw, rawlen);
    dt_st_close(a);
    dt_st_close(b);
}

/* Whether a weight_map value holds a '/': a shard outside the target's directory (any file of the
 * machine's, or a FIFO whose open would block), which the fuzzer is not given. */
static bool leaves_dir(const char *text, size_t len)
{
    struct dt_ydoc *doc;
    if (dt_ydoc_parse("index", text, len, &doc) != DT_SUCCESS) return false; /* dt_st_open refuses it too */
    const struct dt_ynode *root = dt_ydoc_root(doc), *map = NULL;
    for (size_t i = 0; root && root->kind == DT_Y_MAP && i < root->n; i++)
        if (!strcmp(root->pairs[i].key->str, "weight_map")) map = root->pairs[i].value;
    bool out = false;
    for (size_t i = 0; map && map->kind == DT_Y_MAP && i < map->n; i++) {
        const struct dt_ynode *v = map->pairs[i].value;
        if (v->kind == DT_Y_SCALAR && v->str && strchr(v->str, '/')) out = true;
    }
    dt_ydoc_free(doc);
    return out;
}

static void sharded(const uint8_t *data, size_t size)
{
    char dir[512], index[512], path[512], name[64];
    mkdir(dt_fuzz_path("sharded", dir, sizeof dir), 0700);
    const uint8_t *nul = memchr(data, '\0', size);
    size_t ilen = nul ? (size_t)(nul - data) : size;
    char *text = dt_fuzz_str(data, ilen);
    bool out = leaves_dir(text, ilen);
    free(text);
    dt_fuzz_write("sharded/model.safetensors.index.json", data, ilen, index, sizeof index);
    /* the shards: what follows the NUL, split at each separator */
    const uint8_t *start[MAX_SHARDS + 1], *end[MAX_SHARDS + 1];
    int n = 0;
    if (nul) {
        const uint8_t *p = nul + 1, *stop = data + size;
        while (n < MAX_SHARDS) {
            start[n] = p;
            const uint8_t *q = n + 1 < MAX_SHARDS ? memmem(p, (size_t)(stop - p), sep, sizeof sep) : NULL;
            end[n++] = q ? q : stop;
            if (!q) break;
            p = q + sizeof sep;
        }
    }
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "sharded/model-%05d-of-%05d.safetensors", i + 1, n);
        dt_fuzz_write(name, start[i], (size_t)(end[i] - start[i]), path, sizeof path);
    }
    if (!out) open_both(dir, index, NULL, 0);
    /* nothing left for the next input */
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "sharded/model-%05d-of-%05d.safetensors", i + 1, n);
        unlink(dt_fuzz_path(name, path, sizeof path));
    }
    unlink(index);
}

static void single(const uint8_t *data, size_t size)
{
    char dir[512], path[512];
    mkdir(dt_fuzz_path("single", dir, sizeof dir), 0700);
    dt_fuzz_write("single/model.safetensors", data, size, path, sizeof path);
    open_both(dir, path, data, size);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 0 && data[0] == '{') sharded(data, size);
    else single(data, size);
    return 0;
}
