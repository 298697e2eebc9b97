/* load.c - see ckpt.h: a checkpoint opened, checked and read by flat range; which one a run resumes from. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/manifest.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/log.h"

#define HEAD 64
#define CHUNK ((size_t)8 << 20)

/* where one saved range sits */
struct entry {
    size_t off, n;
    int file;
    off_t at;      /* byte offset of its first element of array 0 */
    off_t stride;  /* bytes from one array to the next in that file */
};

struct dt_ckpt {
    char path[4096];
    struct dt_run_state meta;
    struct dt_ckpt_file *files;
    int nfiles;
    int *fds;
    struct entry *index;
    size_t nindex;
};

static int by_off(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static uint32_t u32_at(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t u64_at(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static dt_status_t read_exact(int fd, void *buf, size_t n, off_t at, const char *path)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = pread(fd, p, n, at);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return dt_error(DT_ERR_CKPT, "%s: error: reading the checkpoint failed: %s", path, strerror(errno));
        if (k == 0) return dt_error(DT_ERR_CKPT, "%s: error: the file ends early (truncated)", path);
        p += k;
        n -= (size_t)k;
        at += k;
    }
    return DT_SUCCESS;
}

/* The whole file's XXH64 against the manifest's. */
static dt_status_t verify(int fd, const struct dt_ckpt_file *f, const char *path)
{
    char *buf = malloc(CHUNK);
    if (!buf) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory checking %s", path);
    struct dt_xxh64 h;
    dt_xxh64_init(&h, 0);
    dt_status_t rc = DT_SUCCESS;
    for (off_t at = 0; rc == DT_SUCCESS && at < f->bytes; at += (off_t)CHUNK) {
        size_t n = (size_t)(f->bytes - at) < CHUNK ? (size_t)(f->bytes - at) : CHUNK;
        rc = read_exact(fd, buf, n, at, path);
        if (rc == DT_SUCCESS) dt_xxh64_update(&h, buf, n);
    }
    free(buf);
    DT_CHECK(rc);
    uint64_t got = dt_xxh64_final(&h);
    if (got != f->xxh64)
        return dt_error(DT_ERR_CKPT, "%s: error: checksum mismatch (xxh64 %016" PRIx64 ", the manifest says %016" PRIx64
                        "): the file is corrupt", path, got, f->xxh64);
    return DT_SUCCESS;
}

/* One rank file: its size, header and range table; its ranges appended to the index. */
static dt_status_t open_file(struct dt_ckpt *c, int i, bool check)
{
    const struct dt_ckpt_file *f = &c->files[i];
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", c->path, f->name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return dt_error(DT_ERR_CKPT, "%s: error: %s: the checkpoint is incomplete", path,
                        errno == ENOENT ? "the file is missing" : strerror(errno));
    c->fds[i] = fd;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return dt_error(DT_ERR_CKPT, "%s: error: not a regular file", path);
    if (st.st_size != f->bytes)
        return dt_error(DT_ERR_CKPT, "%s: error: %lld bytes, the manifest says %lld: the file is %s", path,
                        (long long)st.st_size, (long long)f->bytes, st.st_size < f->bytes ? "truncated" : "corrupt");
    if (check) DT_CHECK(verify(fd, f, path));
    unsigned char head[HEAD];
    DT_CHECK(read_exact(fd, head, HEAD, 0, path));
    uint64_t nranges = u64_at(head + 24), elems = u64_at(head + 32), data_off = u64_at(head + 48);
    uint64_t bytes = (uint64_t)f->bytes, per = (uint64_t)c->meta.narrays * 4;
    /* every size checked against the file's before any is multiplied: a crafted header cannot wrap */
    if (memcmp(head, "DTCKPT1\n", 8) || u32_at(head + 8) != DT_CKPT_VERSION ||
        (int)u32_at(head + 20) != c->meta.narrays || nranges > bytes / 16 || data_off > bytes ||
        data_off < HEAD + nranges * 16 || elems > (bytes - data_off) / per || bytes != data_off + elems * per)
        return dt_error(DT_ERR_CKPT, "%s: error: not a dtrun checkpoint file of version %d matching its manifest",
                        path, DT_CKPT_VERSION);
    uint64_t *table = calloc(nranges * 16 + 1, 1); /* zeroed: GCC's analyzer cannot tell read_exact fills it (#16) */
    struct entry *ix = realloc(c->index, (c->nindex + nranges + 1) * sizeof *ix);
    if (!table || !ix) {
        free(table);
        if (ix) c->index = ix;
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory reading %s", path);
    }
    c->index = ix;
    dt_status_t rc = read_exact(fd, table, nranges * 16, HEAD, path);
    off_t at = (off_t)data_off;
    uint64_t sum = 0;
    uint64_t nparams = (uint64_t)c->meta.nparams;
    for (uint64_t r = 0; rc == DT_SUCCESS && r < nranges; r++) {
        uint64_t off = table[2 * r], n = table[2 * r + 1];
        if (off > nparams || n > nparams - off || n > elems - sum) {
            rc = dt_error(DT_ERR_CKPT, "%s: error: range %" PRIu64 " (%" PRIu64 " + %" PRIu64 ") lies outside the "
                          "model's %" PRIu64 " parameters or the file", path, r, off, n, nparams);
            break;
        }
        ix[c->nindex++] = (struct entry){.off = off, .n = n, .file = i, .at = at, .stride = (off_t)(elems * 4)};
        at += (off_t)(n * 4);
        sum += n;
    }
    free(table);
    if (rc == DT_SUCCESS && sum != elems)
        rc = dt_error(DT_ERR_CKPT, "%s: error: its ranges hold %" PRIu64 " elements, its header says %" PRIu64, path,
                      sum, elems);
    return rc;
}

/* Every parameter saved exactly once. */
static dt_status_t check_cover(struct dt_ckpt *c)
{
    qsort(c->index, c->nindex, sizeof *c->index, by_off);
    size_t next = 0;
    for (size_t i = 0; i < c->nindex; i++) {
        if (c->index[i].off != next)
            return dt_error(DT_ERR_CKPT, "%s: error: the rank files %s parameters %zu..%zu, so this is not a "
                            "consistent checkpoint", c->path, c->index[i].off > next ? "leave out" : "overlap at",
                            next < c->index[i].off ? next : c->index[i].off,
                            (next > c->index[i].off ? next : c->index[i].off) - 1);
        next += c->index[i].n;
    }
    if (next != (size_t)c->meta.nparams)
        return dt_error(DT_ERR_CKPT, "%s: error: the rank files hold %zu parameters, the manifest says %lld", c->path,
                        next, (long long)c->meta.nparams);
    return DT_SUCCESS;
}

dt_status_t dt_ckpt_open(const char *path, bool check, struct dt_ckpt **out)
{
    *out = NULL;
    struct dt_ckpt *c = calloc(1, sizeof *c);
    if (!c) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory opening %s", path);
    snprintf(c->path, sizeof c->path, "%s", path);
    size_t len = strlen(c->path);
    while (len > 1 && c->path[len - 1] == '/') c->path[--len] = '\0';
    dt_status_t rc = dt_manifest_read(c->path, &c->meta, &c->files, &c->nfiles);
    if (rc == DT_SUCCESS) {
        c->fds = malloc((size_t)c->nfiles * sizeof *c->fds);
        if (!c->fds) rc = dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory opening %s", path);
        for (int i = 0; c->fds && i < c->nfiles; i++) c->fds[i] = -1;
    }
    for (int i = 0; rc == DT_SUCCESS && i < c->nfiles; i++) rc = open_file(c, i, check);
    if (rc == DT_SUCCESS) rc = check_cover(c);
    if (rc == DT_SUCCESS && check && c->meta.fp8_tensors) { /* fp8-mixed's state, checked as the ranks' files */
        size_t n = (size_t)c->meta.fp8_tensors * (1 + (size_t)c->meta.fp8_history) * sizeof(float);
        void *buf = malloc(n);
        rc = buf ? dt_ckpt_read_extra(c, "fp8.bin", buf, n, c->meta.fp8_xxh64)
                 : dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory checking %s", path);
        free(buf);
    }
    if (rc != DT_SUCCESS) {
        dt_ckpt_close(c);
        return rc;
    }
    *out = c;
    return DT_SUCCESS;
}

const struct dt_run_state *dt_ckpt_state(const struct dt_ckpt *c) { return &c->meta; }
const char *dt_ckpt_path(const struct dt_ckpt *c) { return c->path; }

dt_status_t dt_ckpt_read(const struct dt_ckpt *c, int array, size_t off, size_t n, float *dst)
{
    if (n == 0) return DT_SUCCESS;
    if (array < 0 || array >= c->meta.narrays || off > (size_t)c->meta.nparams || n > (size_t)c->meta.nparams - off)
        return dt_error(DT_ERR_CKPT, "%s: error: elements %zu..%zu of array %d are not in this checkpoint (%lld "
                        "parameters, %d arrays)", c->path, off, off + n, array, (long long)c->meta.nparams,
                        c->meta.narrays);
    /* the last entry starting at or before off */
    size_t lo = 0, hi = c->nindex - 1;
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (c->index[mid].off <= off) lo = mid;
        else hi = mid - 1;
    }
    for (size_t i = lo, done = 0; done < n; i++) {
        const struct entry *e = &c->index[i];
        size_t from = off + done - e->off, k = e->n - from < n - done ? e->n - from : n - done;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", c->path, c->files[e->file].name);
        DT_CHECK(read_exact(c->fds[e->file], dst + done, k * 4, e->at + e->stride * array + (off_t)from * 4, path));
        done += k;
    }
    return DT_SUCCESS;
}

dt_status_t dt_ckpt_read_extra(const struct dt_ckpt *c, const char *name, void *dst, size_t n, uint64_t xxh64)
{
    char path[4600];
    snprintf(path, sizeof path, "%s/%s", c->path, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dt_error(DT_ERR_CKPT, "%s: error: cannot open it: %s (the manifest lists it)\n  hint: the checkpoint "
                        "is incomplete; resume from another (checkpoint.resume: PATH)", path, strerror(errno));
    struct stat st;
    dt_status_t rc = fstat(fd, &st) != 0 || (size_t)st.st_size != n
                         ? dt_error(DT_ERR_CKPT, "%s: error: %lld bytes, the manifest's state needs %zu\n  hint: the "
                                    "checkpoint is damaged; resume from another (checkpoint.resume: PATH)", path,
                                    (long long)st.st_size, n)
                         : read_exact(fd, dst, n, 0, path);
    close(fd);
    uint64_t h;
    if (rc == DT_SUCCESS && (h = dt_xxh64(dst, n, 0)) != xxh64)
        rc = dt_error(DT_ERR_CKPT, "%s: error: checksum %016" PRIx64 ", the manifest says %016" PRIx64 "\n  hint: the "
                      "checkpoint is damaged; resume from another (checkpoint.resume: PATH)", path, h, xxh64);
    return rc;
}

void dt_ckpt_close(struct dt_ckpt *c)
{
    if (!c) return;
    for (int i = 0; c->fds && i < c->nfiles; i++)
        if (c->fds[i] >= 0) close(c->fds[i]);
    free(c->fds);
    free(c->files);
    free(c->index);
    free(c);
}

dt_status_t dt_ckpt_find(const char *dir, const char *resume, char *path, size_t n, bool *found)
{
    *found = false;
    path[0] = '\0';
    if (!strcmp(resume, "none")) return DT_SUCCESS;
    struct dt_ckpt *c;
    if (strcmp(resume, "auto")) { /* one named checkpoint: it must be valid */
        DT_CHECK(dt_ckpt_open(resume, true, &c));
        snprintf(path, n, "%s", dt_ckpt_path(c));
        dt_ckpt_close(c);
        *found = true;
        return DT_SUCCESS;
    }
    if (access(dir, F_OK) != 0 && errno == ENOENT) return DT_SUCCESS; /* a first run */
    int k;
    long long *steps = dt_ckpt_steps(dir, &k);
    if (!steps && access(dir, R_OK | X_OK) != 0)
        return dt_error(DT_ERR_CKPT, "%s: error: cannot read checkpoint.dir: %s", dir, strerror(errno));
    for (int i = 0; i < k && !*found; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/step-%08lld", dir, steps[i]);
        if (dt_ckpt_open(p, true, &c) != DT_SUCCESS) {
            DT_WARN("checkpoint.resume auto: skipping %s, not a valid checkpoint: %s", p, dt_error_msg());
            continue;
        }
        dt_ckpt_close(c);
        snprintf(path, n, "%s", p);
        *found = true;
    }
    free(steps);
    return DT_SUCCESS;
}

dt_status_t dt_ckpt_describe(const struct dt_ckpt *c, FILE *out)
{
    const struct dt_run_state *m = &c->meta;
    fprintf(out, "%s: a valid dtrun checkpoint (format version %d; every file's size and xxh64 checked)\n", c->path,
            DT_CKPT_VERSION);
    fprintf(out, "  step %lld (optimizer steps %lld), %lld samples, %lld tokens\n", (long long)m->step,
            (long long)m->opt_steps, (long long)m->samples, (long long)m->tokens);
    fprintf(out, "  run %s, saved %s, restart %d\n", m->run_id, m->saved_at, m->restart);
    fprintf(out, "  model %s, %lld parameters; optimizer %s (%d arrays of fp32 per parameter)\n", m->model,
            (long long)m->nparams, m->optimizer, m->narrays);
    fprintf(out, "  written by %s (stage %d) on %d rank%s, precision %s; config %s\n", m->strategy, m->stage, m->world,
            m->world == 1 ? "" : "s", m->precision, m->config_hash);
    char val[32] = "none yet";
    if (m->val_loss == m->val_loss) snprintf(val, sizeof val, "%.6f", m->val_loss);
    fprintf(out, "  loss scale %g (%lld steps skipped); last validation loss %s\n", m->scaler.scale,
            (long long)m->scaler.skipped, val);
    int64_t total = 0;
    for (int i = 0; i < c->nfiles; i++) {
        fprintf(out, "  %-28s %12lld bytes  xxh64 %016" PRIx64 "\n", c->files[i].name, (long long)c->files[i].bytes,
                c->files[i].xxh64);
        total += c->files[i].bytes;
    }
    fprintf(out, "  %d file%s, %.1f MiB\n", c->nfiles, c->nfiles == 1 ? "" : "s", (double)total / 1048576);
    return DT_SUCCESS;
}
