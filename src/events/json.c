/* json.c - see json.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "events/json.h"

static void put(struct dt_json *j, const char *s, size_t n)
{
    if (j->len + n + 2 > j->cap) {
        size_t cap = (j->cap ? j->cap : 256) * 2;
        while (cap < j->len + n + 2) cap *= 2;
        char *b = realloc(j->buf, cap);
        if (!b) return;
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(struct dt_json *j, const char *s) { put(j, s, strlen(s)); }

static void quoted(struct dt_json *j, const char *s)
{
    put(j, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"') puts_(j, "\\\"");
        else if (c == '\\') puts_(j, "\\\\");
        else if (c == '\n') puts_(j, "\\n");
        else if (c == '\t') puts_(j, "\\t");
        else if (c == '\r') puts_(j, "\\r");
        else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            puts_(j, esc);
        } else put(j, (const char *)&c, 1);
    }
    put(j, "\"", 1);
}

static void key(struct dt_json *j, const char *k)
{
    if (j->fields++) put(j, ",", 1);
    quoted(j, k);
    put(j, ":", 1);
}

void dt_json_begin(struct dt_json *j)
{
    j->len = 0;
    j->fields = 0;
    put(j, "{", 1);
}

void dt_json_str(struct dt_json *j, const char *k, const char *val)
{
    key(j, k);
    if (val) quoted(j, val);
    else puts_(j, "null");
}

void dt_json_num(struct dt_json *j, const char *k, double v)
{
    key(j, k);
    char b[40];
    if (!isfinite(v)) snprintf(b, sizeof b, "null");
    else snprintf(b, sizeof b, "%.9g", v);
    puts_(j, b);
}

void dt_json_int(struct dt_json *j, const char *k, int64_t v)
{
    key(j, k);
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    puts_(j, b);
}

const char *dt_json_end(struct dt_json *j)
{
    put(j, "}", 1);
    return j->buf ? j->buf : "{}";
}

void dt_json_free(struct dt_json *j)
{
    free(j->buf);
    *j = (struct dt_json){0};
}
