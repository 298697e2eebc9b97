/*
 * safetensors.c - see safetensors.h: Hugging Face's safetensors files and sharded checkpoints,
 * opened and checked whole (every header, offset and index entry), read tensor by tensor with
 * pread, and written shard by shard under temporary names. The values on disk are little-endian,
 * as on every host dtrun runs on (x86-64, aarch64), so fp32 tensors are read and written as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/safetensors.h"
#include "config/ynode.h"
#include "core/error.h"
#include "events/json.h"
#include "events/jsonl.h"

#define SINGLE "model.safetensors"
#define INDEX "model.safetensors.index.json"
#define SUFFIX ".index.json" /* an index of any name */
#define MAX_HEADER 100000000u /* the safetensors crate refuses longer headers (MAX_HEADER_SIZE) */
#define CHUNK ((size_t)1 << 20) /* values converted per write when storing bf16/fp16 */
#define DAMAGED "the file is damaged or was not written as safetensors: write or download it again"
#define HINT_DAMAGED "  hint: " DAMAGED

struct file {
    char *path;
    int fd;
    uint64_t size, data; /* bytes in the file; offset of the byte after the header */
};

struct dt_st_set {
    struct file *files;
    int nfiles;
    struct dt_st_tensor *t; /* sorted by name (then file) once every file is read */
    int n, cap;
    uint64_t bytes_read;    /* of tensor data, so far */
};

/* ---- reading */

static dt_status_t sys_error(const char *path, const char *what)
{
    int e = errno;
    const char *hint = e == ENOSPC || e == EDQUOT ? "\n  hint: the disk (or your quota) is full: free space, or "
                                                    "write elsewhere"
                       : e == EACCES || e == EROFS ? "\n  hint: check the permissions of the file and its directory"
                                                   : "";
    return dt_error(DT_ERR_SYSTEM, "%s: error: %s: %s%s", path, what, strerror(e), hint);
}

static dt_status_t pread_all(const struct file *f, void *buf, size_t n, uint64_t at, const char *what)
{
    char *p = buf;
    uint64_t end = at + n;
    while (n > 0) {
        ssize_t k = pread(f->fd, p, n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sys_error(f->path, "reading failed");
        if (k == 0)
            return dt_error(DT_ERR_CKPT, "%s: error: the file ends at byte %" PRIu64 ", inside %s (bytes to %" PRIu64
                            ")\n  hint: the file shrank after it was opened: copy it again, and do not change it "
                            "while dtrun reads it", f->path, at, what, end);
        p += k;
        n -= (size_t)k;
        at += (uint64_t)k;
    }
    return DT_SUCCESS;
}

/* Parse buf as JSON whose root must be an object; `what` names it in messages. */
static dt_status_t parse_json(const char *path, const char *buf, size_t len, const char *what, const char *hint,
                              struct dt_ydoc **doc)
{
    dt_status_t rc = dt_ydoc_parse(path, buf, len, doc);
    if (rc == DT_ERR_NOMEM) return rc;
    if (rc != DT_SUCCESS) { /* ynode's line, with a hint for this file instead of a config's */
        char first[1024];
        snprintf(first, sizeof first, "%s", dt_error_msg());
        first[strcspn(first, "\n")] = '\0';
        return dt_error(DT_ERR_CKPT, "%s\n  hint: %s is not valid JSON: %s", first, what, hint);
    }
    const struct dt_ynode *root = dt_ydoc_root(*doc);
    if (root && root->kind == DT_Y_MAP) return DT_SUCCESS;
    rc = dt_error(DT_ERR_CKPT, "%s: error: %s is %s, not a JSON object\n  hint: %s", path, what,
                  root ? dt_ynode_kind_str(root->kind) : "empty", hint);
    dt_ydoc_free(*doc);
    *doc = NULL;
    return rc;
}

static const struct dt_ynode *member(const struct dt_ynode *map, const char *key)
{
    for (size_t i = 0; map->kind == DT_Y_MAP && i < map->n; i++)
        if (!strcmp(map->pairs[i].key->str, key)) return map->pairs[i].value;
    return NULL;
}

/* n as a JSON non-negative integer */
static bool uint_of(const struct dt_ynode *n, uint64_t *v)
{
    if (n->kind != DT_Y_SCALAR || n->quoted || !*n->str) return false;
    uint64_t x = 0;
    for (const char *c = n->str; *c; c++) {
        unsigned d = (unsigned)(*c - '0');
        if (d > 9 || x > (UINT64_MAX - d) / 10) return false;
        x = x * 10 + d;
    }
    *v = x;
    return true;
}

/* "[2, 3]" */
static void shape_str(const int64_t *shape, int ndim, char *buf, size_t n)
{
    int o = snprintf(buf, n, "[");
    for (int d = 0; d < ndim && o < (int)n; d++)
        o += snprintf(buf + o, n - (size_t)o, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (o < (int)n) snprintf(buf + o, n - (size_t)o, "]");
}

/* One header entry into t (its name, file and offset set by the caller); datalen: the bytes after the header. */
static dt_status_t parse_entry(const char *path, const char *name, const struct dt_ynode *v, uint64_t data,
                               uint64_t datalen, struct dt_st_tensor *t)
{
    if (v->kind != DT_Y_MAP)
        return dt_error(DT_ERR_CKPT, "%s: error: tensor '%s': its entry is %s, not an object\n" HINT_DAMAGED, path,
                        name, dt_ynode_kind_str(v->kind));
    static const char *const keys[] = {"dtype", "shape", "data_offsets"};
    const struct dt_ynode *k[3];
    for (int i = 0; i < 3; i++)
        if (!(k[i] = member(v, keys[i])))
            return dt_error(DT_ERR_CKPT, "%s: error: tensor '%s' has no %s (an entry needs dtype, shape and "
                            "data_offsets)\n" HINT_DAMAGED, path, name, keys[i]);
    const char *dt = k[0]->kind == DT_Y_SCALAR ? k[0]->str : dt_ynode_kind_str(k[0]->kind);
    if (!strcmp(dt, "F32")) t->dtype = DT_F32;
    else if (!strcmp(dt, "BF16")) t->dtype = DT_BF16;
    else if (!strcmp(dt, "F16")) t->dtype = DT_F16;
    else
        return dt_error(DT_ERR_CKPT, "%s: error: tensor '%s' has dtype %s; dtrun reads F32, BF16 and F16\n"
                        "  hint: save the checkpoint's tensors as one of them (in PyTorch: t.to(torch.bfloat16))",
                        path, name, dt);
    const struct dt_ynode *sh = k[1], *off = k[2];
    uint64_t numel = 1, dim;
    bool ok = sh->kind == DT_Y_SEQ && sh->n <= DT_ST_MAX_DIMS;
    for (size_t d = 0; ok && d < sh->n; d++) {
        ok = uint_of(sh->items[d], &dim) && dim <= INT64_MAX && !__builtin_mul_overflow(numel, dim, &numel);
        if (ok) t->shape[d] = (int64_t)dim;
    }
    if (!ok)
        return dt_error(DT_ERR_CKPT, "%s: error: tensor '%s': shape is not a list of at most %d non-negative "
                        "integers\n" HINT_DAMAGED, path, name, DT_ST_MAX_DIMS);
    t->ndim = (int)sh->n;
    uint64_t b, e, bytes;
    if (off->kind != DT_Y_SEQ || off->n != 2 || !uint_of(off->items[0], &b) || !uint_of(off->items[1], &e) || b > e)
        return dt_error(DT_ERR_CKPT, "%s: error: tensor '%s': data_offsets is not [begin, end] with begin <= end\n"
                        HINT_DAMAGED, path, name);
    bool big = __builtin_mul_overflow(numel, dt_dtype_size(t->dtype), &bytes);
    if (big || bytes != e - b) {
        char shp[128], nb[32];
        shape_str(t->shape, t->ndim, shp, sizeof shp);
        if (big) snprintf(nb, sizeof nb, "over 2^64");
        else snprintf(nb, sizeof nb, "%" PRIu64, bytes);
        return dt_error(DT_ERR_CKPT, "%s: error: tensor '%s': shape %s of %s takes %s bytes, but data_offsets [%" PRIu64
                        ", %" PRIu64 "] span %" PRIu64 "\n" HINT_DAMAGED, path, name, shp, dt, nb, b, e, e - b);
    }
    if (e > datalen)
        return dt_error(DT_ERR_CKPT, "%s: error: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] (file bytes %"
                        PRIu64 " to %" PRIu64 ") run past the end of the file (%" PRIu64 " bytes)\n  hint: the file is "
                        "truncated: copy or download it again", path, name, b, e, data + b, data + e, data + datalen);
    t->numel = (int64_t)numel;
    t->offset = data + b;
    return DT_SUCCESS;
}

static int by_offset(const void *a, const void *b)
{
    const struct dt_st_tensor *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Open one .safetensors file, check its header, and add its tensors to s. */
static dt_status_t add_file(struct dt_st_set *s, const char *path)
{
    struct file *fs = realloc(s->files, (size_t)(s->nfiles + 1) * sizeof *fs);
    if (!fs) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
    s->files = fs;
    struct file *f = &fs[s->nfiles];
    *f = (struct file){.path = strdup(path), .fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (!f->path) {
        if (f->fd >= 0) close(f->fd);
        return dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
    }
    s->nfiles++;
    struct stat st;
    if (f->fd < 0 || fstat(f->fd, &st) != 0) return sys_error(path, "cannot open the safetensors file");
    /* opened without blocking, so a FIFO or a device in a checkpoint's place cannot hang the run */
    if (!S_ISREG(st.st_mode))
        return dt_error(DT_ERR_CKPT, "%s: error: not a regular file\n  hint: a checkpoint's shards are files", path);
    f->size = (uint64_t)st.st_size;
    unsigned char len8[8];
    if (f->size < 8)
        return dt_error(DT_ERR_CKPT, "%s: error: the file is %" PRIu64 " bytes, too short for safetensors' 8-byte "
                        "header length\n" HINT_DAMAGED, path, f->size);
    DT_CHECK(pread_all(f, len8, 8, 0, "the header length"));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > MAX_HEADER || hlen > f->size - 8)
        return dt_error(DT_ERR_CKPT, "%s: error: the header length (bytes 0 to 8, little-endian) is %" PRIu64 ", "
                        "more than %s (%" PRIu64 " bytes)\n" HINT_DAMAGED, path, hlen,
                        hlen > MAX_HEADER ? "safetensors' limit" : "the file holds after it",
                        hlen > MAX_HEADER ? (uint64_t)MAX_HEADER : f->size - 8);
    f->data = 8 + hlen;
    char *head = malloc(hlen + 1);
    if (!head) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory for a %" PRIu64 "-byte header", path, hlen);
    struct dt_ydoc *doc = NULL;
    char what[64];
    snprintf(what, sizeof what, "the JSON header (file bytes 8 to %" PRIu64 ")", f->data);
    dt_status_t rc = pread_all(f, head, hlen, 8, what);
    if (rc == DT_SUCCESS) rc = parse_json(path, head, hlen, what, DAMAGED, &doc);
    free(head);
    const struct dt_ynode *root = rc == DT_SUCCESS ? dt_ydoc_root(doc) : NULL;
    int first = s->n;
    for (size_t i = 0; rc == DT_SUCCESS && i < root->n; i++) {
        const char *name = root->pairs[i].key->str;
        if (!strcmp(name, "__metadata__")) continue;
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 512;
            struct dt_st_tensor *t = realloc(s->t, (size_t)cap * sizeof *t);
            if (!t) {
                rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
                break;
            }
            s->t = t;
            s->cap = cap;
        }
        struct dt_st_tensor *t = &s->t[s->n];
        *t = (struct dt_st_tensor){.file = s->nfiles - 1};
        rc = parse_entry(path, name, root->pairs[i].value, f->data, f->size - f->data, t);
        if (rc == DT_SUCCESS && !(t->name = strdup(name)))
            rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
        if (rc == DT_SUCCESS) s->n++;
    }
    dt_ydoc_free(doc);
    /* no two tensors share a byte: in offset order, each starts at or after the end of those before */
    if (s->n > first) qsort(s->t + first, (size_t)(s->n - first), sizeof *s->t, by_offset);
    const struct dt_st_tensor *last = NULL; /* the one reaching furthest so far */
    for (int i = first; rc == DT_SUCCESS && i < s->n; i++) {
        const struct dt_st_tensor *t = &s->t[i];
        uint64_t tb = t->offset + (uint64_t)t->numel * dt_dtype_size(t->dtype);
        uint64_t lb = last ? last->offset + (uint64_t)last->numel * dt_dtype_size(last->dtype) : 0;
        if (last && t->offset < lb)
            rc = dt_error(DT_ERR_CKPT, "%s: error: tensors '%s' (data_offsets [%" PRIu64 ", %" PRIu64 "], file bytes %"
                          PRIu64 " to %" PRIu64 ") and '%s' ([%" PRIu64 ", %" PRIu64 "], file bytes %" PRIu64 " to %"
                          PRIu64 ") overlap\n" HINT_DAMAGED, path, last->name, last->offset - f->data, lb - f->data,
                          last->offset, lb, t->name, t->offset - f->data, tb - f->data, t->offset, tb);
        if (!last || tb > lb) last = t;
    }
    return rc;
}

static int by_name(const void *a, const void *b)
{
    const struct dt_st_tensor *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->file > y->file) - (x->file < y->file);
}

/* the order dt_st_find searches (qsort's base may not be NULL, even for no tensors) */
static void sort_by_name(struct dt_st_set *s)
{
    if (s->n > 0) qsort(s->t, (size_t)s->n, sizeof *s->t, by_name);
}

/* A checkpoint of one file. */
static dt_status_t add_single(struct dt_st_set *s, const char *path)
{
    DT_CHECK(add_file(s, path));
    sort_by_name(s);
    return DT_SUCCESS;
}

/* The whole of a small text file (an index), NUL-terminated. */
static dt_status_t read_text(const char *path, char **buf, size_t *len)
{
    struct file f = {.path = (char *)path, .fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    struct stat st;
    if (f.fd < 0 || fstat(f.fd, &st) != 0) {
        dt_status_t rc = sys_error(path, "cannot open the index");
        if (f.fd >= 0) close(f.fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(f.fd);
        return dt_error(DT_ERR_CKPT, "%s: error: not a regular file\n  hint: an index is a JSON file", path);
    }
    dt_status_t rc = DT_SUCCESS;
    *len = (size_t)st.st_size;
    if (st.st_size > DT_YAML_MAX_BYTES)
        rc = dt_error(DT_ERR_CKPT, "%s: error: the index is %.1f MiB, more than the %u MiB dtrun reads\n"
                      "  hint: is this a safetensors index? it holds one line per tensor", path,
                      (double)st.st_size / (1 << 20), DT_YAML_MAX_BYTES >> 20);
    else if (!(*buf = malloc(*len + 1))) rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
    else if ((rc = pread_all(&f, *buf, *len, 0, "the index")) != DT_SUCCESS) free(*buf);
    else (*buf)[*len] = '\0';
    close(f.fd);
    return rc;
}

/* model.safetensors.index.json at path and the shards it names (in dir), each checked to hold the
 * tensors the index puts in it. */
static dt_status_t add_index(struct dt_st_set *s, const char *path, const char *dir)
{
    static const char hint[] = "write the index again (or download it again with its shards)";
    char *text = NULL;
    size_t len = 0;
    DT_CHECK(read_text(path, &text, &len));
    struct dt_ydoc *doc;
    dt_status_t rc = parse_json(path, text, len, "the index", hint, &doc);
    free(text);
    DT_CHECK(rc);
    const struct dt_ynode *map = member(dt_ydoc_root(doc), "weight_map");
    if (!map || map->kind != DT_Y_MAP)
        rc = dt_error(DT_ERR_CKPT, "%s: error: the index has no \"weight_map\" object (tensor name: shard file)\n"
                      "  hint: %s", path, hint);
    for (size_t i = 0; rc == DT_SUCCESS && i < map->n; i++) {
        const char *name = map->pairs[i].key->str, *shard = map->pairs[i].value->str;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, shard ? shard : "");
        bool seen = false;
        for (int k = 0; k < s->nfiles && !seen; k++) seen = !strcmp(s->files[k].path, p);
        if (seen) continue;
        if (!shard || !*shard)
            rc = dt_error(DT_ERR_CKPT, "%s: error: weight_map gives tensor '%s' no shard file name\n  hint: %s", path,
                          name, hint);
        else if (strchr(shard, '/') || !strcmp(shard, ".") || !strcmp(shard, ".."))
            rc = dt_error(DT_ERR_CKPT, "%s: error: weight_map puts tensor '%s' in '%s', which is not a file name beside "
                          "the index\n  hint: %s", path, name, shard, hint);
        else if (access(p, F_OK) != 0 && errno == ENOENT)
            rc = dt_error(DT_ERR_CKPT, "%s: error: weight_map puts tensor '%s' in %s, which is missing\n  hint: copy "
                          "or download every shard the index names into %s", path, name, shard, dir);
        else rc = add_file(s, p);
    }
    if (rc == DT_SUCCESS) sort_by_name(s);
    for (int i = 1; rc == DT_SUCCESS && i < s->n; i++)
        if (!strcmp(s->t[i - 1].name, s->t[i].name))
            rc = dt_error(DT_ERR_CKPT, "%s: error: tensor '%s' is also in %s\n  hint: a checkpoint holds each tensor "
                          "once: remove the shard that does not belong (the index names the right one)",
                          s->files[s->t[i].file].path, s->t[i].name, s->files[s->t[i - 1].file].path);
    for (size_t i = 0; rc == DT_SUCCESS && i < map->n; i++) {
        const char *name = map->pairs[i].key->str, *shard = map->pairs[i].value->str;
        const struct dt_st_tensor *t = dt_st_find(s, name);
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, shard);
        if (!t || strcmp(s->files[t->file].path, p))
            rc = dt_error(DT_ERR_CKPT, "%s: error: weight_map puts tensor '%s' in %s, which does not hold it%s%s%s\n"
                          "  hint: the index and the shards come from different checkpoints: %s", path, name, shard,
                          t ? " (it is in " : "", t ? s->files[t->file].path : "", t ? ")" : "", hint);
    }
    dt_ydoc_free(doc);
    return rc;
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

dt_status_t dt_st_open(const char *path, struct dt_st_set **out)
{
    *out = NULL;
    struct dt_st_set *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_NOMEM, "%s: error: out of memory", path);
    struct stat st;
    char p[4200], dir[4200];
    size_t len = strlen(path);
    dt_status_t rc;
    if (stat(path, &st) != 0) {
        bool absent = errno == ENOENT;
        rc = sys_error(path, "cannot open the safetensors checkpoint");
        if (absent)
            dt_error_append("  hint: give a directory holding " SINGLE " (or " INDEX " and its shards), or a "
                            ".safetensors file");
    } else if (S_ISDIR(st.st_mode)) {
        snprintf(p, sizeof p, "%s/" SINGLE, path);
        if (is_file(p)) rc = add_single(s, p);
        else if (snprintf(p, sizeof p, "%s/" INDEX, path), is_file(p)) rc = add_index(s, p, path);
        else
            rc = dt_error(DT_ERR_CKPT, "%s: error: the directory holds neither " SINGLE " nor " INDEX "\n  hint: is it "
                          "a Hugging Face model directory? download the model's safetensors weights into it", path);
    } else if (len >= strlen(SUFFIX) && !strcmp(path + len - strlen(SUFFIX), SUFFIX)) {
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
        rc = add_index(s, path, dir);
    } else {
        rc = add_single(s, path);
    }
    if (rc != DT_SUCCESS) {
        dt_st_close(s);
        return rc;
    }
    *out = s;
    return DT_SUCCESS;
}

const struct dt_st_tensor *dt_st_find(const struct dt_st_set *s, const char *name)
{
    struct dt_st_tensor key = {.name = name, .file = -1};
    int lo = 0, hi = s->n; /* the first tensor not before (name, file -1): that name's first, if any */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (by_name(&s->t[mid], &key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->n && !strcmp(s->t[lo].name, name) ? &s->t[lo] : NULL;
}

int dt_st_count(const struct dt_st_set *s) { return s->n; }

const struct dt_st_tensor *dt_st_at(const struct dt_st_set *s, int i) { return &s->t[i]; }

dt_status_t dt_st_read_range_f32(struct dt_st_set *s, const struct dt_st_tensor *t, int64_t first, size_t n,
                                 float *dst)
{
    const struct file *f = &s->files[t->file];
    size_t es = t->dtype == DT_F32 ? 4 : 2;
    uint64_t at = t->offset + (uint64_t)first * es;
    char what[600];
    snprintf(what, sizeof what, "tensor '%.500s' (from byte %" PRIu64 ")", t->name, at);
    s->bytes_read += n * es;
    if (t->dtype == DT_F32) return pread_all(f, dst, n * sizeof(float), at, what);
    /* The 2-byte values are read into the upper half of dst and widened from the front: dst[i] (bytes
     * 4i to 4i+3) overwrites only values already widened, since value j > i starts at byte
     * 2n + 2j >= 4i + 4; so a multi-GB tensor needs no buffer besides dst. */
    unsigned char *src = (unsigned char *)dst + 2 * n;
    DT_CHECK(pread_all(f, src, 2 * n, at, what));
    uint16_t h;
    if (t->dtype == DT_BF16) {
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, src + 2 * i, 2);
            dst[i] = dt_f32_from_bf16(h);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            memcpy(&h, src + 2 * i, 2);
            dst[i] = dt_f32_from_f16(h);
        }
    }
    return DT_SUCCESS;
}

dt_status_t dt_st_read_f32(struct dt_st_set *s, const struct dt_st_tensor *t, float *dst)
{
    return dt_st_read_range_f32(s, t, 0, (size_t)t->numel, dst);
}

uint64_t dt_st_bytes_read(const struct dt_st_set *s) { return s->bytes_read; }

void dt_st_close(struct dt_st_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) free((char *)s->t[i].name);
    for (int i = 0; i < s->nfiles; i++) {
        if (s->files[i].fd >= 0) close(s->files[i].fd);
        free(s->files[i].path);
    }
    free(s->t);
    free(s->files);
    free(s);
}

/* ---- writing */

static const char *st_dtype(enum dt_dtype t) { return t == DT_F32 ? "F32" : t == DT_BF16 ? "BF16" : "F16"; }

static uint64_t out_numel(const struct dt_st_out *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

static dt_status_t write_all(int fd, const void *p, size_t n, const char *path)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sys_error(path, "writing failed");
        c += k;
        n -= (size_t)k;
    }
    return DT_SUCCESS;
}

/* t's values as dtype. */
static dt_status_t write_values(int fd, const struct dt_st_out *t, enum dt_dtype dtype, uint16_t *buf, const char *path)
{
    size_t n = (size_t)out_numel(t);
    if (dtype == DT_F32) return write_all(fd, t->data, n * sizeof(float), path);
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        if (dtype == DT_BF16)
            for (size_t i = 0; i < m; i++) buf[i] = dt_bf16_from_f32(t->data[at + i]);
        else
            for (size_t i = 0; i < m; i++) buf[i] = dt_f16_from_f32(t->data[at + i]);
        DT_CHECK(write_all(fd, buf, m * 2, path));
    }
    return DT_SUCCESS;
}

/* dir/name written whole under a temporary name, synced, then renamed: a reader never sees half a
 * file. With st, a safetensors file: text's length as 8 bytes, text (the header), then those of
 * tensors [0, n) that are in shard `shard`, as dtype; without, text alone. */
static dt_status_t write_file(const char *dir, const char *name, const char *text, size_t len, bool st,
                              const struct dt_st_out *t, int n, const int *of, int shard, enum dt_dtype dtype)
{
    char final[4200], tmp[4300];
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return sys_error(tmp, "cannot create");
    bool half = st && dtype != DT_F32;
    uint16_t *buf = half ? malloc(CHUNK * sizeof *buf) : NULL;
    dt_status_t rc = half && !buf ? dt_error(DT_ERR_NOMEM, "%s: error: out of memory", tmp) : DT_SUCCESS;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)len >> (8 * i));
    if (rc == DT_SUCCESS && st) rc = write_all(fd, len8, 8, tmp);
    if (rc == DT_SUCCESS) rc = write_all(fd, text, len, tmp);
    for (int i = 0; rc == DT_SUCCESS && st && i < n; i++)
        if (of[i] == shard) rc = write_values(fd, &t[i], dtype, buf, tmp);
    free(buf);
    if (rc == DT_SUCCESS && fsync(fd) != 0) rc = sys_error(tmp, "syncing failed");
    if (close(fd) != 0 && rc == DT_SUCCESS) rc = sys_error(tmp, "closing failed");
    if (rc == DT_SUCCESS && rename(tmp, final) != 0) rc = sys_error(final, "cannot rename the written file to it");
    if (rc != DT_SUCCESS) unlink(tmp);
    return rc;
}

/* The header of shard `shard`: its tensors in order, the data padded to start 8-byte aligned. */
static dt_status_t shard_header(const struct dt_st_out *t, int n, const int *of, int shard, enum dt_dtype dtype,
                                struct dt_json *q, char **text, size_t *len)
{
    FILE *h = open_memstream(text, len);
    if (!h) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for a safetensors header");
    fprintf(h, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (of[i] != shard) continue;
        q->len = 0;
        dt_json_quoted(q, t[i].name);
        fprintf(h, ",%s:{\"dtype\":\"%s\",\"shape\":[", q->oom ? "" : q->buf, st_dtype(dtype));
        for (int d = 0; d < t[i].ndim; d++) fprintf(h, "%s%" PRId64, d ? "," : "", t[i].shape[d]);
        uint64_t end = at + out_numel(&t[i]) * dt_dtype_size(dtype);
        fprintf(h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at, end);
        at = end;
    }
    fputc('}', h);
    for (long pos = ftell(h); pos >= 0 && pos % 8; pos++) fputc(' ', h);
    bool bad = ferror(h) || q->oom;
    if (fclose(h) != 0 || bad) {
        free(*text);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for a safetensors header");
    }
    return DT_SUCCESS;
}

/* model.safetensors.index.json: which shard holds each tensor. */
static dt_status_t write_index(const char *dir, const struct dt_st_out *t, int n, const int *of, int nshards,
                               uint64_t total, struct dt_json *q)
{
    char *text;
    size_t len;
    FILE *h = open_memstream(&text, &len);
    if (!h) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the safetensors index");
    fprintf(h, "{\n  \"metadata\": {\"total_size\": %" PRIu64 "},\n  \"weight_map\": {", total);
    for (int i = 0; i < n; i++) {
        q->len = 0;
        dt_json_quoted(q, t[i].name);
        fprintf(h, "%s\n    %s: \"model-%05d-of-%05d.safetensors\"", i ? "," : "", q->oom ? "" : q->buf, of[i] + 1,
                nshards);
    }
    fprintf(h, "\n  }\n}\n");
    bool bad = ferror(h) || q->oom;
    if (fclose(h) != 0 || bad) {
        free(text);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the safetensors index");
    }
    dt_status_t rc = write_file(dir, INDEX, text, len, false, NULL, 0, NULL, 0, DT_F32);
    free(text);
    return rc;
}

/* The other layout's entry point, left by an earlier write into dir, would be read instead of (or
 * beside) what was just written. */
static dt_status_t remove_stale(const char *dir, const char *name)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (unlink(p) != 0 && errno != ENOENT) return sys_error(p, "cannot remove the earlier checkpoint's file");
    return DT_SUCCESS;
}

dt_status_t dt_st_write(const char *dir, const struct dt_st_out *t, int n, enum dt_dtype dtype,
                        uint64_t max_shard_bytes)
{
    if (dtype != DT_F32 && dtype != DT_BF16 && dtype != DT_F16)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: safetensors are written as fp32, bf16 or fp16, not %s",
                        dt_dtype_str(dtype));
    for (int i = 0; i < n; i++) {
        bool ok = t[i].ndim >= 0 && t[i].ndim <= DT_ST_MAX_DIMS && (t[i].data || out_numel(&t[i]) == 0);
        for (int d = 0; ok && d < t[i].ndim; d++) ok = t[i].shape[d] >= 0;
        if (!ok)
            return dt_error(DT_ERR_INTERNAL, "dtrun: error: tensor '%s' to write has a bad shape or no data",
                            t[i].name);
    }
    DT_CHECK(dt_mkdirs(dir));
    /* shards filled in order: a new one when the next tensor would pass the limit */
    int *of = malloc(((size_t)n + 1) * sizeof *of), nshards = 1; /* of[i]: tensor i's shard (+1: no malloc(0)) */
    if (!of) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    uint64_t used = 0, total = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = out_numel(&t[i]) * dt_dtype_size(dtype);
        if (max_shard_bytes && used > 0 && used + bytes > max_shard_bytes) {
            nshards++;
            used = 0;
        }
        of[i] = nshards - 1;
        used += bytes;
        total += bytes;
    }
    struct dt_json q = {.len = 0};
    dt_status_t rc = DT_SUCCESS;
    for (int k = 0; rc == DT_SUCCESS && k < nshards; k++) {
        char name[64], *text;
        size_t len;
        if (nshards == 1) snprintf(name, sizeof name, SINGLE);
        else snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, nshards);
        rc = shard_header(t, n, of, k, dtype, &q, &text, &len);
        if (rc == DT_SUCCESS) {
            rc = write_file(dir, name, text, len, true, t, n, of, k, dtype);
            free(text);
        }
    }
    /* single: the new file is read before any index, which then goes; sharded: an earlier single
     * file would be read first, so it goes before the index that makes the shards a checkpoint */
    if (rc == DT_SUCCESS) rc = remove_stale(dir, nshards == 1 ? INDEX : SINGLE);
    if (rc == DT_SUCCESS && nshards > 1) rc = write_index(dir, t, n, of, nshards, total, &q);
    dt_json_free(&q);
    free(of);
    return rc;
}
