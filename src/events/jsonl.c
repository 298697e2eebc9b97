/* jsonl.c - see jsonl.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/error.h"
#include "events/events.h"
#include "events/jsonl.h"

dt_status_t dt_mkdirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (*s == '/' || end) {
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return dt_error(DT_ERR_SYSTEM, "%s: error: cannot create the directory: %s", p, strerror(errno));
            if (end) break;
            *s = '/';
        }
    }
    return DT_SUCCESS;
}

dt_status_t dt_jsonl_open(struct dt_jsonl *s, const char *path)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        DT_CHECK(dt_mkdirs(dir));
    }
    s->f = fopen(path, "a");
    if (!s->f) return dt_error(DT_ERR_SYSTEM, "%s: error: cannot open the events file: %s", path, strerror(errno));
    return DT_SUCCESS;
}

dt_status_t dt_jsonl_write(struct dt_jsonl *s, const char *line)
{
    if (!s->f) return DT_SUCCESS;
    if (fputs(line, s->f) < 0 || fputc('\n', s->f) < 0 || fflush(s->f) != 0)
        return dt_error(DT_ERR_SYSTEM, "%s: error: writing the events file failed: %s", s->path, strerror(errno));
    return DT_SUCCESS;
}

void dt_jsonl_close(struct dt_jsonl *s)
{
    if (s->f) fclose(s->f);
    s->f = NULL;
}

struct jsonl_sink {
    struct dt_sink sink;
    struct dt_jsonl f;
};

static dt_status_t jsonl_emit(struct dt_sink *s, const struct dt_event *e)
{
    return dt_jsonl_write(&((struct jsonl_sink *)s->ctx)->f, e->json);
}

static void jsonl_close(struct dt_sink *s, double deadline)
{
    (void)deadline;
    struct jsonl_sink *j = s->ctx;
    dt_jsonl_close(&j->f);
    free(j);
}

dt_status_t dt_sink_jsonl(const char *path, struct dt_sink **out)
{
    struct jsonl_sink *j = calloc(1, sizeof *j);
    if (!j) return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory for the events file");
    dt_status_t rc = dt_jsonl_open(&j->f, path);
    if (rc != DT_SUCCESS) {
        free(j);
        return rc;
    }
    j->sink = (struct dt_sink){.name = "jsonl", .emit = jsonl_emit, .close = jsonl_close, .ctx = j};
    *out = &j->sink;
    return DT_SUCCESS;
}
