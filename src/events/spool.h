/*
 * spool.h - an ordered file of event documents, one a line, read from a
 * persistent offset: what the webhook could not send yet. Appends and the
 * offset survive the process (PATH and PATH.offset), so a later run or
 * `dtrun events flush` continues where this one stopped.
 */
#ifndef DT_SPOOL_H
#define DT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

struct dt_spool {
    char path[4096];
    int fd;
    int64_t offset; /* first byte not yet delivered */
    int64_t size;
};

/* Open (creating) path and its offset; records from the offset on that are not whole JSON
 * documents (torn by a crash mid-write) are set aside in PATH.invalid, with one warning. */
dt_status_t dt_spool_open(struct dt_spool *s, const char *path);
void dt_spool_close(struct dt_spool *s);
/* Close and delete the spool and its offset file (everything was delivered). */
void dt_spool_remove(struct dt_spool *s);
static inline bool dt_spool_pending(const struct dt_spool *s) { return s->offset < s->size; }
dt_status_t dt_spool_append(struct dt_spool *s, const char *line);
/* Put lines[0..n) before what is pending (they are older); rewrites the file. */
dt_status_t dt_spool_prepend(struct dt_spool *s, char *const *lines, int n);
/* Up to max lines from the offset: out[i] point into *buf (malloc'd, caller frees); *bytes is what
 * they span, for dt_spool_consume. */
int dt_spool_read(struct dt_spool *s, int max, char ***out, char **buf, int64_t *bytes);
/* Mark bytes as delivered; an empty spool is truncated. */
dt_status_t dt_spool_consume(struct dt_spool *s, int64_t bytes);
/* Lines not yet delivered. */
int64_t dt_spool_count(const struct dt_spool *s);

#endif
