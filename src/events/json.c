/* json.c - see json.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "events/json.h"

static void put(struct dt_json *j, const char *s, size_t n)
{
    if (j->oom) return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1) cap *= 2;
        char *b = realloc(j->buf, cap);
        if (!b) {
            j->oom = true;
            return;
        }
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void puts_(struct dt_json *j, const char *s) { put(j, s, strlen(s)); }

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, surrogates or values past
 * U+10FFFF), or 0. */
static int utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    int n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (c > 0xf4 || n == 0) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
    if (c == 0xed && s[1] > 0x9f) return 0; /* UTF-16 surrogates */
    if (c == 0xf0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xf4 && s[1] > 0x8f) return 0; /* past U+10FFFF */
    return n;
}

void dt_json_quoted(struct dt_json *j, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    put(j, "\"", 1);
    while (*s) {
        unsigned char c = *s;
        char esc[8];
        int n;
        if (c == '"') puts_(j, "\\\"");
        else if (c == '\\') puts_(j, "\\\\");
        else if (c == '\n') puts_(j, "\\n");
        else if (c == '\t') puts_(j, "\\t");
        else if (c == '\r') puts_(j, "\\r");
        else if (c == '\b') puts_(j, "\\b");
        else if (c == '\f') puts_(j, "\\f");
        else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            puts_(j, esc);
        } else if (c < 0x80) put(j, (const char *)s, 1);
        else if ((n = utf8_len(s)) > 0) {
            put(j, (const char *)s, (size_t)n);
            s += n;
            continue;
        } else puts_(j, "\\ufffd");
        s++;
    }
    put(j, "\"", 1);
}

static void key(struct dt_json *j, const char *k)
{
    if (j->fields[j->depth]++) put(j, ",", 1);
    dt_json_quoted(j, k);
    put(j, ":", 1);
}

void dt_json_begin(struct dt_json *j)
{
    j->len = 0;
    j->depth = 0;
    j->fields[0] = 0;
    j->oom = false;
    put(j, "{", 1);
}

void dt_json_str(struct dt_json *j, const char *k, const char *val)
{
    key(j, k);
    if (val) dt_json_quoted(j, val);
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

void dt_json_bool(struct dt_json *j, const char *k, bool v)
{
    key(j, k);
    puts_(j, v ? "true" : "false");
}

void dt_json_null(struct dt_json *j, const char *k)
{
    key(j, k);
    puts_(j, "null");
}

void dt_json_obj(struct dt_json *j, const char *k)
{
    key(j, k);
    put(j, "{", 1);
    /* deeper than the writer tracks: its commas would be wrong, so the document fails as a whole */
    if (j->depth + 1 < DT_JSON_DEPTH) j->fields[++j->depth] = 0;
    else j->oom = true;
}

void dt_json_close(struct dt_json *j)
{
    put(j, "}", 1);
    if (j->depth > 0) j->depth--;
}

const char *dt_json_end(struct dt_json *j)
{
    while (j->depth > 0) dt_json_close(j);
    put(j, "}", 1);
    return j->oom ? NULL : j->buf;
}

void dt_json_free(struct dt_json *j)
{
    free(j->buf);
    *j = (struct dt_json){0};
}

void dt_json_iso_time(time_t s, int ms, char *buf, size_t n)
{
    struct tm tm;
    gmtime_r(&s, &tm);
    char head[32];
    strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%03dZ", head, ms);
}
