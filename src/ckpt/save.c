/* save.c - see ckpt.h: a rank's file written by a thread of its own, and rank 0's commit. */
#define _GNU_SOURCE /* O_DIRECT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "ckpt/manifest.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/mem.h"

#define MODE 0640
#define CHUNK ((size_t)8 << 20) /* bytes per write(2) */
#define ALIGN ((size_t)4096)    /* O_DIRECT's: buffer, offset and length */

struct dt_ckpt_writer {
    char dir[4096];
    int rank, world;
    struct dt_host_mem mem;
    /* the file's image in memory, ALIGN-aligned: header, ranges, padding to data_off, arrays */
    void *base;
    unsigned char *image;
    size_t cap, size, data_off;
    int nranges, narrays;
    int64_t step;
    double copied, written; /* seconds: the copy into memory; begin to the file renamed */
    char partial[4400];
    struct dt_ckpt_file file;
    double began;
    /* the thread */
    pthread_t thread;
    pthread_mutex_t mu;
    bool running, done;
    dt_status_t rc;
    char err[1024];
};

static dt_status_t sys_error(const char *path, const char *what)
{
    int e = errno;
    return dt_error(DT_ERR_CKPT, "%s: error: %s: %s%s", path, what, strerror(e),
                    e == ENOSPC || e == EDQUOT
                        ? "\n  hint: the disk (or your quota) is full: free space, or point checkpoint.dir elsewhere"
                    : e == EACCES || e == EROFS ? "\n  hint: make checkpoint.dir writable, or point it elsewhere"
                    : e == EIO ? "\n  hint: the disk or file server reported an I/O error: check it (dmesg), or point "
                                 "checkpoint.dir elsewhere"
                               : "");
}

/* Create path (O_EXCL: a file planted there, symlink or not, is removed first, never followed). */
static int create_exclusive(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, MODE);
    if (fd < 0 && errno == EEXIST && unlink(path) == 0)
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, MODE);
    if (fd >= 0) fchmod(fd, MODE); /* whatever the umask */
    return fd;
}

/* Drop O_DIRECT from fd: true when it was set. */
static bool undirect(int fd)
{
#ifdef O_DIRECT
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT) && fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0) return true;
#endif
    (void)fd;
    return false;
}

static dt_status_t write_all(int fd, const void *p, size_t n, const char *path, struct dt_xxh64 *h)
{
    if (h) dt_xxh64_update(h, p, n);
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n < CHUNK ? n : CHUNK);
        if (k < 0 && errno == EINTR) continue;
        /* a file system whose direct I/O wants another alignment, or a short write that left the
         * offset unaligned: the rest goes through the page cache */
        if (k < 0 && errno == EINVAL && undirect(fd)) {
            DT_DEBUG(DT_SUB_CKPT, "%s: O_DIRECT refused (EINVAL): writing through the page cache", path);
            continue;
        }
        if (k < 0) return sys_error(path, "writing the checkpoint failed");
        c += k;
        n -= (size_t)k;
    }
    return DT_SUCCESS;
}

static dt_status_t fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sys_error(dir, "cannot open the directory to sync it");
    int r = fsync(fd);
    close(fd);
    return r == 0 ? DT_SUCCESS : sys_error(dir, "syncing the directory failed");
}

/* Create path for the image's writes: O_DIRECT where the file system takes it (the disk reads the
 * image itself, without a copy into the page cache competing with training for CPU and memory). */
static int create_direct(const char *path, bool *direct)
{
    int fd = create_exclusive(path);
    *direct = false;
#ifdef O_DIRECT
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        *direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0; /* tmpfs refuses: plain writes */
    }
#endif
    return fd;
}

/* The rank's file, its image written whole (O_DIRECT but for the last partial block), fsynced under a
 * temporary name, then renamed. */
static dt_status_t write_file(struct dt_ckpt_writer *w)
{
    char tmp[4600], final[4600];
    snprintf(w->file.name, sizeof w->file.name, "rank-%05d-of-%05d.bin", w->rank, w->world);
    snprintf(final, sizeof final, "%s/%s", w->partial, w->file.name);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    bool direct;
    int fd = create_direct(tmp, &direct);
    if (fd < 0) return sys_error(tmp, "cannot create the checkpoint file");
    struct dt_xxh64 h;
    dt_xxh64_init(&h, 0);
    dt_status_t rc = DT_SUCCESS;
    int injected = dt_fault_hit(DT_FAULT_ENOSPC, w->step, w->rank) ? ENOSPC
                   : dt_fault_hit(DT_FAULT_EIO, w->step, w->rank)  ? EIO
                                                                    : 0;
    if (injected) {
        errno = injected;
        rc = sys_error(tmp, "writing the checkpoint failed");
    }
    size_t whole = direct ? w->size / ALIGN * ALIGN : w->size, half = whole / 2 / ALIGN * ALIGN;
    if (rc == DT_SUCCESS) rc = write_all(fd, w->image, half, tmp, &h);
    if (rc == DT_SUCCESS && dt_fault_hit(DT_FAULT_KILL_SAVE, w->step, w->rank)) raise(SIGKILL);
    if (rc == DT_SUCCESS && dt_fault_hit(DT_FAULT_STOP_SAVE, w->step, w->rank)) raise(SIGSTOP);
    if (rc == DT_SUCCESS) rc = write_all(fd, w->image + half, whole - half, tmp, &h);
    if (rc == DT_SUCCESS && whole < w->size) { /* the tail is not a whole block: written plainly */
        undirect(fd);
        rc = write_all(fd, w->image + whole, w->size - whole, tmp, &h);
    }
    if (rc == DT_SUCCESS && fsync(fd) != 0) rc = sys_error(tmp, "syncing the checkpoint file failed");
    if (close(fd) != 0 && rc == DT_SUCCESS) rc = sys_error(tmp, "closing the checkpoint file failed");
    if (rc == DT_SUCCESS && rename(tmp, final) != 0) rc = sys_error(final, "cannot rename the checkpoint file");
    if (rc == DT_SUCCESS) rc = fsync_dir(w->partial);
    if (rc != DT_SUCCESS) unlink(tmp);
    w->file.bytes = (int64_t)w->size;
    w->file.xxh64 = dt_xxh64_final(&h);
    return rc;
}

static void *writer_main(void *arg)
{
    struct dt_ckpt_writer *w = arg;
    dt_status_t rc = write_file(w);
    double t = dt_now() - w->began;
    pthread_mutex_lock(&w->mu);
    w->written = t;
    w->rc = rc;
    if (rc != DT_SUCCESS) snprintf(w->err, sizeof w->err, "%s", dt_error_msg());
    w->done = true;
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void *big_alloc(void *ctx, size_t bytes) { return dt_alloc_big(bytes); }
static void big_free(void *ctx, void *p) { dt_free_big(p); }

dt_status_t dt_ckpt_writer_open(const char *dir, int rank, int world, const struct dt_host_mem *mem,
                                struct dt_ckpt_writer **out)
{
    struct dt_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the checkpoint writer");
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    w->rank = rank;
    w->world = world;
    w->mem = mem ? *mem : (struct dt_host_mem){big_alloc, big_free, NULL};
    pthread_mutex_init(&w->mu, NULL);
    *out = w;
    return DT_SUCCESS;
}

/* Room for an image of size bytes, its pages touched now (first touch is slow on these VMs). */
static dt_status_t reserve(struct dt_ckpt_writer *w, size_t size)
{
    if (size <= w->cap) return DT_SUCCESS;
    if (w->base) w->mem.free(w->mem.ctx, w->base);
    w->base = w->mem.alloc(w->mem.ctx, size + ALIGN);
    w->cap = 0;
    if (!w->base)
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the checkpoint's copy of the state (%zu MiB)",
                        size >> 20);
    w->image = (unsigned char *)(((uintptr_t)w->base + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    w->cap = size;
    for (size_t i = 0; i < size; i += 4096) w->image[i] = 0;
    return DT_SUCCESS;
}

static size_t image_size(int nranges, int narrays, const struct dt_range *ranges, size_t *data_off)
{
    size_t elems = 0;
    for (int i = 0; i < nranges; i++) elems += ranges[i].n;
    *data_off = (64 + (size_t)nranges * 16 + ALIGN - 1) / ALIGN * ALIGN;
    return *data_off + elems * (size_t)narrays * sizeof(float);
}

dt_status_t dt_ckpt_writer_reserve(struct dt_ckpt_writer *w, const struct dt_range *ranges, int nranges, int narrays)
{
    size_t off;
    return reserve(w, image_size(nranges, narrays, ranges, &off));
}

dt_status_t dt_ckpt_begin(struct dt_ckpt_writer *w, int64_t step, const char *tag, const struct dt_range *ranges,
                          int nranges, int narrays,
                          dt_status_t (*get)(void *ctx, int array, size_t off, size_t n, float *dst), void *ctx)
{
    if (w->running)
        return dt_error(DT_ERR_INTERNAL, "dtrun: error: a checkpoint save began while the last was still written");
    w->began = dt_now();
    size_t data_off, size = image_size(nranges, narrays, ranges, &data_off), elems = 0;
    DT_CHECK(reserve(w, size));
    for (int i = 0; i < nranges; i++) elems += ranges[i].n;
    w->size = size;
    w->data_off = data_off;
    w->nranges = nranges;
    w->narrays = narrays;
    w->step = step;
    /* header (ckpt.h), the ranges, zeros to data_off */
    unsigned char *head = w->image;
    memset(head, 0, data_off);
    memcpy(head, "DTCKPT1\n", 8);
    uint32_t u32[4] = {DT_CKPT_VERSION, (uint32_t)w->rank, (uint32_t)w->world, (uint32_t)narrays};
    uint64_t u64[4] = {(uint64_t)nranges, elems, (uint64_t)step, data_off};
    memcpy(head + 8, u32, sizeof u32);
    memcpy(head + 24, u64, sizeof u64);
    for (int i = 0; i < nranges; i++) {
        uint64_t r[2] = {ranges[i].off, ranges[i].n};
        memcpy(head + 64 + 16 * (size_t)i, r, sizeof r);
    }
    /* the copy: what training waits for */
    float *data = (float *)(w->image + data_off);
    size_t at = 0;
    for (int a = 0; a < narrays; a++)
        for (int i = 0; i < nranges; i++) {
            DT_CHECK(get(ctx, a, ranges[i].off, ranges[i].n, data + at));
            at += ranges[i].n;
        }
    w->copied = dt_now() - w->began;
    snprintf(w->partial, sizeof w->partial, "%s/step-%08lld.partial-%s", w->dir, (long long)step, tag);
    if (mkdir(w->dir, 0750) != 0 && errno != EEXIST) return sys_error(w->dir, "cannot create checkpoint.dir");
    if (mkdir(w->partial, 0750) != 0 && errno != EEXIST) return sys_error(w->partial, "cannot create the checkpoint");
    struct stat st;
    if (lstat(w->partial, &st) != 0 || !S_ISDIR(st.st_mode))
        return dt_error(DT_ERR_CKPT, "%s: error: is not a directory (a symlink planted there?); nothing is written "
                        "through it\n  hint: remove it", w->partial);
    w->done = false;
    w->running = true;
    int e = pthread_create(&w->thread, NULL, writer_main, w);
    if (e != 0) {
        w->running = false;
        return dt_error(DT_ERR_SYSTEM, "dtrun: error: cannot start the checkpoint writer thread: %s\n  hint: the "
                        "process is out of threads or memory (ulimit -u, ulimit -v)", strerror(e));
    }
    return DT_SUCCESS;
}

bool dt_ckpt_busy(struct dt_ckpt_writer *w)
{
    if (!w->running) return false;
    pthread_mutex_lock(&w->mu);
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    return !done;
}

dt_status_t dt_ckpt_wait(struct dt_ckpt_writer *w, struct dt_ckpt_file *f, double *seconds)
{
    if (!w->running) return dt_error(DT_ERR_INTERNAL, "dtrun: error: no checkpoint save to wait for");
    pthread_join(w->thread, NULL);
    w->running = false;
    *f = w->file;
    *seconds = w->written; /* not until now: a finished file may wait for the next step boundary */
    DT_DEBUG(DT_SUB_CKPT, "%s: %.1f MiB, copied into memory in %.3f s, on disk %.3f s after", f->name,
             (double)f->bytes / 1048576, w->copied, w->written - w->copied);
    return w->rc == DT_SUCCESS ? DT_SUCCESS : dt_error(w->rc, "%s", w->err);
}

void dt_ckpt_writer_close(struct dt_ckpt_writer *w)
{
    if (!w) return;
    if (w->running) pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    if (w->base) w->mem.free(w->mem.ctx, w->base);
    free(w);
}

/* ---- rank 0's commit */

static dt_status_t write_bytes(const char *dir, const char *name, const void *data, size_t n)
{
    char tmp[4600], final[4600];
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    int fd = create_exclusive(tmp);
    if (fd < 0) return sys_error(tmp, "cannot create");
    dt_status_t rc = write_all(fd, data, n, tmp, NULL);
    if (rc == DT_SUCCESS && fsync(fd) != 0) rc = sys_error(tmp, "syncing failed");
    if (close(fd) != 0 && rc == DT_SUCCESS) rc = sys_error(tmp, "closing failed");
    if (rc == DT_SUCCESS && rename(tmp, final) != 0) rc = sys_error(final, "cannot rename");
    if (rc != DT_SUCCESS) unlink(tmp);
    return rc;
}

static dt_status_t write_small(const char *dir, const char *name, const char *text)
{
    return write_bytes(dir, name, text, strlen(text));
}

dt_status_t dt_ckpt_write_extra(const char *dir, int64_t step, const char *tag, const char *name, const void *data,
                                size_t n)
{
    char partial[4400];
    snprintf(partial, sizeof partial, "%s/step-%08lld.partial-%s", dir, (long long)step, tag);
    return write_bytes(partial, name, data, n);
}

/* A checkpoint directory and its files (no subdirectories are made in one); a symlink in its place
 * is removed itself, never followed. */
static void remove_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if ((errno == ELOOP || errno == ENOTDIR) && unlink(path) != 0)
            DT_WARN("%s: could not remove it: %s", path, strerror(errno));
        return;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    if (rmdir(path) != 0) DT_WARN("%s: could not remove it: %s", path, strerror(errno));
}

static int by_step(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? 1 : x > y ? -1 : 0; /* newest first */
}

/* The steps of checkpoint.dir's step-<N> directories (malloc'd), newest first; the others whose
 * names start with "step-<N>." go to each(). */
static long long *list_steps(const char *dir, int *n, void (*each)(const char *path, const char *rest, void *ctx),
                             void *ctx)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    long long *steps = NULL;
    int cap = 0, count = 0; /* counted here, not in *n, which each() could reach through ctx */
    struct dirent *e;
    char path[4600];
    while ((e = readdir(d))) {
        long long s;
        int used = 0;
        if (sscanf(e->d_name, "step-%lld%n", &s, &used) != 1) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[used] != '\0') {
            if (each) each(path, e->d_name + used, ctx);
            continue;
        }
        if (count == cap) {
            long long *g = realloc(steps, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *g);
            if (!g) break;
            steps = g;
        }
        steps[count++] = s;
    }
    closedir(d);
    if (count > 1) qsort(steps, (size_t)count, sizeof *steps, by_step);
    *n = count;
    return steps;
}

long long *dt_ckpt_steps(const char *dir, int *n) { return list_steps(dir, n, NULL, NULL); }

static void drop_leftover(const char *path, const char *rest, void *ctx)
{
    (void)ctx;
    if (!strncmp(rest, ".partial-", 9) || !strncmp(rest, ".old-", 5)) remove_dir(path);
}

/* Keep the keep newest step-<N> (0: all), the one just saved and the protected one (compared by
 * inode: it may be named by another path); drop leftovers of interrupted saves. */
static void prune(const char *dir, int keep, long long saved, const char *protect)
{
    struct stat keep_st = {0}, st;
    bool has_protect = protect && protect[0] && stat(protect, &keep_st) == 0;
    int n;
    long long *steps = list_steps(dir, &n, drop_leftover, NULL);
    char path[4600];
    for (int i = keep; keep > 0 && i < n; i++) {
        snprintf(path, sizeof path, "%s/step-%08lld", dir, steps[i]);
        if (steps[i] == saved ||
            (has_protect && stat(path, &st) == 0 && st.st_dev == keep_st.st_dev && st.st_ino == keep_st.st_ino))
            continue;
        remove_dir(path);
    }
    free(steps);
}

int dt_ckpt_supersede(const char *dir, long long after, const char *tag, char *names, size_t n)
{
    int k;
    long long *steps = list_steps(dir, &k, NULL, NULL);
    int moved = 0;
    names[0] = '\0';
    for (int i = 0; i < k && steps[i] > after; i++) {
        char from[4400], to[4500];
        snprintf(from, sizeof from, "%s/step-%08lld", dir, steps[i]);
        snprintf(to, sizeof to, "%s.superseded-%s", from, tag);
        if (rename(from, to) != 0) continue;
        size_t len = strlen(names);
        snprintf(names + len, n - len, "%sstep-%08lld", moved ? ", " : "", steps[i]);
        moved++;
    }
    free(steps);
    return moved;
}

dt_status_t dt_ckpt_commit(const char *dir, const char *tag, const struct dt_run_state *meta,
                           const struct dt_ckpt_file *files, int nfiles, int keep, const char *protect, char *path,
                           size_t n)
{
    char partial[4400], final[4400], old[4500];
    snprintf(partial, sizeof partial, "%s/step-%08lld.partial-%s", dir, (long long)meta->step, tag);
    snprintf(final, sizeof final, "%s/step-%08lld", dir, (long long)meta->step);
    char *text = dt_manifest_text(meta, files, nfiles);
    if (!text) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory writing a manifest");
    dt_status_t rc = write_small(partial, "manifest.json", text);
    free(text);
    if (rc == DT_SUCCESS) rc = fsync_dir(partial);
    /* every rank's file is here: a checkpoint.dir local to each node would give each node its own */
    for (int i = 0; rc == DT_SUCCESS && i < nfiles; i++) {
        char f[4600];
        struct stat fs;
        snprintf(f, sizeof f, "%s/%s", partial, files[i].name);
        if (lstat(f, &fs) != 0 || !S_ISREG(fs.st_mode) || fs.st_size != files[i].bytes)
            rc = dt_error(DT_ERR_CKPT, "%s: error: rank %d wrote this file, but rank 0 %s\n  hint: checkpoint.dir "
                          "must be on a file system every node sees", f, i,
                          lstat(f, &fs) != 0 ? "does not see it" : "sees another size");
    }
    /* a checkpoint of this step from an earlier life of the run goes, once this one has its name */
    struct stat st;
    bool aside = false;
    snprintf(old, sizeof old, "%s.old-%s", final, tag);
    if (rc == DT_SUCCESS && lstat(final, &st) == 0) {
        if (rename(final, old) != 0) rc = sys_error(final, "cannot move the earlier checkpoint aside");
        else aside = true;
    }
    if (rc == DT_SUCCESS && rename(partial, final) != 0) rc = sys_error(final, "cannot rename the checkpoint");
    if (rc == DT_SUCCESS) rc = fsync_dir(dir);
    if (rc == DT_SUCCESS && aside) remove_dir(old);
    char latest[64];
    snprintf(latest, sizeof latest, "step-%08lld\n", (long long)meta->step);
    if (rc == DT_SUCCESS) rc = write_small(dir, "latest", latest);
    if (rc == DT_SUCCESS) rc = fsync_dir(dir);
    if (rc == DT_SUCCESS) prune(dir, keep, meta->step, protect);
    snprintf(path, n, "%s", final);
    return rc;
}
