/*
 * json.h - build one JSON object per event: keys in call order, strings
 * escaped (quote, backslash, control characters as \u00XX; UTF-8 passes
 * through), non-finite numbers as null (JSON has no NaN).
 */
#ifndef DT_JSON_H
#define DT_JSON_H

#include <stddef.h>
#include <stdint.h>

struct dt_json {
    char *buf;
    size_t len, cap;
    int fields;
};

void dt_json_begin(struct dt_json *j);
void dt_json_str(struct dt_json *j, const char *key, const char *val);
void dt_json_num(struct dt_json *j, const char *key, double v);
void dt_json_int(struct dt_json *j, const char *key, int64_t v);
/* The finished object (owned by j until dt_json_free). */
const char *dt_json_end(struct dt_json *j);
void dt_json_free(struct dt_json *j);

#endif
