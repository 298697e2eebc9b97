/*
 * json.h - build one JSON document per event: keys in call order, strings
 * escaped (quote, backslash, control characters; UTF-8 passes through and
 * any byte that is not part of valid UTF-8 becomes U+FFFD, so the output is
 * always valid JSON), non-finite numbers as null (JSON has no NaN). Nested
 * objects open with dt_json_obj and close with dt_json_close.
 */
#ifndef DT_JSON_H
#define DT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define DT_JSON_DEPTH 8

struct dt_json {
    char *buf;
    size_t len, cap;
    int depth;
    int fields[DT_JSON_DEPTH]; /* members written at each open level */
    bool oom;
};

/* j zeroed before its first use (its buffer is reused by later documents) */
void dt_json_begin(struct dt_json *j);
void dt_json_str(struct dt_json *j, const char *key, const char *val); /* val NULL: null */
void dt_json_num(struct dt_json *j, const char *key, double v);
void dt_json_int(struct dt_json *j, const char *key, int64_t v);
void dt_json_bool(struct dt_json *j, const char *key, bool v);
void dt_json_null(struct dt_json *j, const char *key);
void dt_json_obj(struct dt_json *j, const char *key);
void dt_json_close(struct dt_json *j);
/* The finished document (owned by j until dt_json_free); NULL if memory ran out or objects nested
 * more than DT_JSON_DEPTH - 1 deep. */
const char *dt_json_end(struct dt_json *j);
void dt_json_free(struct dt_json *j);
/* s as a JSON string literal, quotes included, appended to j's buffer without a key (for tests). */
void dt_json_quoted(struct dt_json *j, const char *s);
/* Whether s[0..n) is one JSON document in UTF-8 (json_valid.c). */
bool dt_json_valid(const char *s, size_t n);
/* s seconds since the epoch and ms milliseconds as the records carry times:
 * "2026-11-23T18:05:40.123Z", UTC; shared with the SPANK plugin's task_failed */
void dt_json_iso_time(time_t s, int ms, char *buf, size_t n);

#endif
