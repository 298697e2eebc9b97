/*
 * json_valid.c - whether bytes are one JSON document (RFC 8259: an object,
 * array, string, number, true, false or null, with whitespace around it),
 * in UTF-8. The spool checks its records with it before sending them, so a
 * record torn by a crash mid-write is set aside instead of sent or dropped.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include "events/json.h"

#define MAX_DEPTH 64

struct cur {
    const unsigned char *p, *end;
};

static void ws(struct cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool lit(struct cur *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n)) return false;
    c->p += n;
    return true;
}

static bool hex(unsigned char h) { return (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'); }

/* one UTF-8 sequence of 2 to 4 bytes, shortest form, no surrogates, at most U+10FFFF */
static bool utf8(struct cur *c)
{
    unsigned char b = *c->p;
    int n = b >= 0xf0 && b <= 0xf4 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 && b <= 0xdf ? 2 : 0;
    if (!n || c->end - c->p < n) return false;
    unsigned cp = b & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((c->p[i] & 0xc0) != 0x80) return false;
        cp = cp << 6 | (c->p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return false;
    c->p += n;
    return true;
}

static bool string(struct cur *c)
{
    c->p++; /* the opening quote */
    while (c->p < c->end) {
        unsigned char b = *c->p;
        if (b == '"') {
            c->p++;
            return true;
        }
        if (b < 0x20) return false;
        if (b == '\\') {
            if (c->end - c->p < 2) return false;
            unsigned char e = c->p[1];
            if (e == 'u') {
                if (c->end - c->p < 6 || !hex(c->p[2]) || !hex(c->p[3]) || !hex(c->p[4]) || !hex(c->p[5]))
                    return false;
                c->p += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                c->p += 2;
            } else {
                return false;
            }
        } else if (b >= 0x80) {
            if (!utf8(c)) return false;
        } else {
            c->p++;
        }
    }
    return false;
}

static bool digits(struct cur *c)
{
    const unsigned char *s = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    return c->p > s;
}

static bool number(struct cur *c)
{
    if (*c->p == '-') c->p++;
    if (c->p < c->end && *c->p == '0') c->p++;
    else if (!digits(c)) return false;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!digits(c)) return false;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (!digits(c)) return false;
    }
    return true;
}

static bool value(struct cur *c, int depth)
{
    ws(c);
    if (c->p >= c->end || depth > MAX_DEPTH) return false;
    unsigned char b = *c->p;
    if (b == '"') return string(c);
    if (b == '-' || (b >= '0' && b <= '9')) return number(c);
    if (b == 't') return lit(c, "true");
    if (b == 'f') return lit(c, "false");
    if (b == 'n') return lit(c, "null");
    if (b != '{' && b != '[') return false;
    unsigned char close = b == '{' ? '}' : ']';
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return true;
    }
    for (;;) {
        if (close == '}') {
            ws(c);
            if (c->p >= c->end || *c->p != '"' || !string(c)) return false;
            ws(c);
            if (c->p >= c->end || *c->p != ':') return false;
            c->p++;
        }
        if (!value(c, depth + 1)) return false;
        ws(c);
        if (c->p >= c->end) return false;
        if (*c->p == close) {
            c->p++;
            return true;
        }
        if (*c->p != ',') return false;
        c->p++;
    }
}

bool dt_json_valid(const char *s, size_t n)
{
    struct cur c = {(const unsigned char *)s, (const unsigned char *)s + n};
    if (!value(&c, 0)) return false;
    ws(&c);
    return c.p == c.end;
}
