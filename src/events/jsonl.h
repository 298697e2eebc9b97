/* jsonl.h - the events file: one JSON object a line, flushed per event, so a crash loses nothing written. */
#ifndef DT_JSONL_H
#define DT_JSONL_H

#include <stdio.h>
#include "core/status.h"

struct dt_jsonl {
    FILE *f;
    char path[4096];
};

/* Opens for append, creating parent directories. */
dt_status_t dt_jsonl_open(struct dt_jsonl *s, const char *path);
dt_status_t dt_jsonl_write(struct dt_jsonl *s, const char *line);
void dt_jsonl_close(struct dt_jsonl *s);
/* mkdir -p */
dt_status_t dt_mkdirs(const char *dir);

#endif
