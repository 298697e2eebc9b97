/* spool.c - see spool.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/error.h"
#include "core/fault.h"
#include "core/log.h"
#include "events/json.h"
#include "events/spool.h"

static void offset_path(const struct dt_spool *s, char *buf, size_t n) { snprintf(buf, n, "%s.offset", s->path); }

static dt_status_t save_offset(struct dt_spool *s)
{
    char p[4200], tmp[4300];
    offset_path(s, p, sizeof p);
    if (s->offset == 0) {
        unlink(p);
        return DT_SUCCESS;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    bool made = f != NULL;
    int err = 0;
    if (!f) {
        err = errno;
    } else if (fprintf(f, "%lld\n", (long long)s->offset) < 0) {
        err = errno;
        fclose(f); /* it leaked when fprintf failed (#16) */
    } else if (fclose(f) != 0 || rename(tmp, p) != 0) {
        err = errno;
    }
    if (err) {
        if (made) unlink(tmp); /* no half-written offset file left beside the spool */
        return dt_error(DT_ERR_SYSTEM, "%s: error: cannot record how much of the spool was sent: %s", p, strerror(err));
    }
    return DT_SUCCESS;
}

static dt_status_t write_all(int fd, const char *p, size_t n, const char *path)
{
    /* DTRUN_FAULT spool_enospc / spool_eio (fault.h): this write fails as a full or failing disk's would */
    int injected = dt_fault_now(DT_FAULT_SPOOL_ENOSPC) ? ENOSPC : dt_fault_now(DT_FAULT_SPOOL_EIO) ? EIO : 0;
    while (n > 0) {
        ssize_t k = injected ? (errno = injected, -1) : write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return dt_error(DT_ERR_SYSTEM, "%s: error: writing the webhook spool failed: %s", path, strerror(errno));
        p += k;
        n -= (size_t)k;
    }
    return DT_SUCCESS;
}

/* The first n bytes of a record, for messages: printable ASCII, the rest as '?'. */
static void excerpt(const char *rec, size_t len, char *buf, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 4 < n && i < 40; i++)
        buf[k++] = rec[i] >= 0x20 && rec[i] < 0x7f ? rec[i] : '?';
    if (len > 40 && k + 4 < n) buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
    buf[k] = '\0';
}

/*
 * Records from the offset on that are not one JSON document each (the last one torn by a crash
 * mid-write, or bytes that were never a record) go to PATH.invalid, out of the spool, named in one
 * warning with the byte offset of the first. Every complete record stays, in order; a complete
 * last record that lost only its newline gets it back.
 */
static dt_status_t set_aside_invalid(struct dt_spool *s, bool *rewritten)
{
    *rewritten = false;
    FILE *in = fdopen(dup(s->fd), "r");
    if (!in || fseeko(in, s->offset, SEEK_SET) != 0) {
        if (in) fclose(in);
        return dt_error(DT_ERR_SYSTEM, "%s: error: cannot read the webhook spool: %s", s->path, strerror(errno));
    }
    char *line = NULL, tmp[4200], aside[4200], first[200] = "", ex[64];
    size_t cap = 0;
    ssize_t len;
    int64_t at = s->offset, first_at = -1;
    int bad = 0;
    bool torn_ok = false; /* the last record is whole but for its newline */
    FILE *out = NULL, *inv = NULL;
    snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
    snprintf(aside, sizeof aside, "%s.invalid", s->path);
    dt_status_t rc = DT_SUCCESS;
    /* two passes: the first only looks; the second, when something is invalid, rewrites */
    for (int pass = 0; pass < 2 && rc == DT_SUCCESS; pass++) {
        if (pass == 1) {
            if (!bad) break;
            out = fopen(tmp, "w");
            inv = fopen(aside, "a");
            if (!out || !inv || fseeko(in, s->offset, SEEK_SET) != 0) {
                rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot set invalid spool records aside: %s", s->path,
                              strerror(errno));
                break;
            }
            at = s->offset;
        }
        while ((len = getline(&line, &cap, in)) > 0) {
            bool nl = line[len - 1] == '\n';
            size_t body = (size_t)len - nl;
            bool ok = body > 0 && dt_json_valid(line, body);
            if (pass == 0 && !ok) {
                if (!bad++) {
                    first_at = at;
                    excerpt(line, body, ex, sizeof ex);
                    snprintf(first, sizeof first, "%s: %zu bytes: \"%s\"",
                             nl ? "not a JSON document" : "torn, no end of line", body, ex);
                }
            }
            if (pass == 0 && ok && !nl) torn_ok = true;
            if (pass == 1) {
                FILE *to = ok ? out : inv;
                fwrite(line, 1, body, to);
                fputc('\n', to);
            }
            at += len;
        }
    }
    free(line);
    fclose(in);
    if (inv && fclose(inv) != 0 && rc == DT_SUCCESS)
        rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot write set-aside records: %s", aside, strerror(errno));
    if (out && fclose(out) != 0 && rc == DT_SUCCESS)
        rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot rewrite the webhook spool: %s", tmp, strerror(errno));
    if (rc == DT_SUCCESS && bad) {
        if (rename(tmp, s->path) != 0)
            return dt_error(DT_ERR_SYSTEM, "%s: error: cannot replace the webhook spool: %s", s->path, strerror(errno));
        DT_WARN("%s: %d invalid record%s set aside in %s (the first at byte %lld, %s); every complete record is "
                "sent as usual", s->path, bad, bad > 1 ? "s" : "", aside, (long long)first_at, first);
        *rewritten = true;
        return DT_SUCCESS;
    }
    if (rc != DT_SUCCESS) unlink(tmp);
    if (rc == DT_SUCCESS && torn_ok && (rc = write_all(s->fd, "\n", 1, s->path)) == DT_SUCCESS) s->size++;
    return rc;
}

static dt_status_t open_file(struct dt_spool *s, const char *path)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    s->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (s->fd < 0)
        return dt_error(DT_ERR_SYSTEM, "%s: error: cannot open the webhook spool: %s\n  hint: is run.dir writable?",
                        path, strerror(errno));
    struct stat st;
    fstat(s->fd, &st);
    s->size = st.st_size;
    s->offset = 0;
    char p[4200];
    offset_path(s, p, sizeof p);
    FILE *f = fopen(p, "r");
    long long off = 0;
    if (f) {
        if (fscanf(f, "%lld", &off) != 1 || off < 0 || off > s->size) off = 0; /* resend rather than lose */
        fclose(f);
    }
    s->offset = off;
    return DT_SUCCESS;
}

dt_status_t dt_spool_open(struct dt_spool *s, const char *path)
{
    DT_CHECK(open_file(s, path));
    bool rewritten;
    dt_status_t rc = set_aside_invalid(s, &rewritten);
    if (rc != DT_SUCCESS || !rewritten) return rc;
    /* the rewritten spool holds only what was pending */
    dt_spool_close(s);
    s->offset = 0;
    DT_CHECK(save_offset(s));
    return open_file(s, path);
}

void dt_spool_remove(struct dt_spool *s)
{
    char p[4200];
    dt_spool_close(s);
    offset_path(s, p, sizeof p);
    unlink(s->path);
    unlink(p);
}

void dt_spool_close(struct dt_spool *s)
{
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
}


dt_status_t dt_spool_append(struct dt_spool *s, const char *line)
{
    size_t n = strlen(line);
    char *b = malloc(n + 1);
    if (!b) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory spooling an event");
    memcpy(b, line, n);
    b[n] = '\n';
    dt_status_t rc = write_all(s->fd, b, n + 1, s->path); /* one write: a reader never sees half a line */
    free(b);
    if (rc == DT_SUCCESS) s->size += (int64_t)n + 1;
    else if (ftruncate(s->fd, s->size) != 0) /* a failed write may have left part of the line */
        DT_WARN("%s: cannot cut off a partly written record: %s (the next open sets it aside)", s->path,
                strerror(errno));
    return rc;
}

dt_status_t dt_spool_prepend(struct dt_spool *s, char *const *lines, int n)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return dt_error(DT_ERR_SYSTEM, "%s: error: cannot rewrite the webhook spool: %s", tmp, strerror(errno));
    dt_status_t rc = DT_SUCCESS;
    for (int i = 0; i < n && rc == DT_SUCCESS; i++) {
        rc = write_all(fd, lines[i], strlen(lines[i]), tmp);
        if (rc == DT_SUCCESS) rc = write_all(fd, "\n", 1, tmp);
    }
    char buf[65536];
    for (int64_t off = s->offset; rc == DT_SUCCESS && off < s->size;) {
        ssize_t k = pread(s->fd, buf, sizeof buf, off);
        if (k <= 0) {
            rc = dt_error(DT_ERR_SYSTEM, "%s: error: reading the webhook spool failed: %s", s->path,
                          k < 0 ? strerror(errno) : "unexpected end of file");
            break;
        }
        rc = write_all(fd, buf, (size_t)k, tmp);
        off += k;
    }
    if (close(fd) != 0 && rc == DT_SUCCESS)
        rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot write the webhook spool: %s", tmp, strerror(errno));
    if (rc == DT_SUCCESS && rename(tmp, s->path) != 0)
        rc = dt_error(DT_ERR_SYSTEM, "%s: error: cannot replace the webhook spool: %s", s->path, strerror(errno));
    if (rc != DT_SUCCESS) {
        unlink(tmp);
        return rc;
    }
    dt_spool_close(s);
    s->offset = 0;
    DT_CHECK(save_offset(s));
    char path[sizeof s->path];
    memcpy(path, s->path, sizeof path);
    return dt_spool_open(s, path);
}

int dt_spool_read(struct dt_spool *s, int max, char ***out, char **buf, int64_t *bytes)
{
    *out = NULL;
    *buf = NULL;
    *bytes = 0;
    size_t cap = 1 << 16, len = 0;
    char *b = NULL;
    int n = 0;
    /* read until max lines are whole, or the spool ends */
    for (;;) {
        char *nb = realloc(b, cap + 1);
        if (!nb) break;
        b = nb;
        ssize_t k = pread(s->fd, b + len, cap - len, s->offset + (int64_t)len);
        if (k <= 0) break;
        len += (size_t)k;
        n = 0;
        for (size_t i = 0; i < len && n < max; i++) n += b[i] == '\n';
        if (n >= max || s->offset + (int64_t)len >= s->size) break;
        cap *= 2;
    }
    if (!b) return 0;
    char **v = malloc((size_t)max * sizeof *v);
    n = 0;
    size_t start = 0;
    if (v)
        for (size_t i = 0; i < len && n < max; i++)
            if (b[i] == '\n') {
                b[i] = '\0';
                v[n++] = b + start;
                start = i + 1;
            }
    *out = v;
    *buf = b;
    *bytes = (int64_t)start;
    return v ? n : 0;
}

dt_status_t dt_spool_consume(struct dt_spool *s, int64_t bytes)
{
    s->offset += bytes;
    if (s->offset >= s->size) {
        if (ftruncate(s->fd, 0) != 0)
            return dt_error(DT_ERR_SYSTEM, "%s: error: cannot empty the webhook spool: %s", s->path, strerror(errno));
        s->offset = s->size = 0;
    }
    return save_offset(s);
}

int64_t dt_spool_count(const struct dt_spool *s)
{
    int64_t n = 0;
    char buf[65536];
    for (int64_t off = s->offset; off < s->size;) {
        ssize_t k = pread(s->fd, buf, sizeof buf, off);
        if (k <= 0) break;
        for (ssize_t i = 0; i < k; i++) n += buf[i] == '\n';
        off += k;
    }
    return n;
}
