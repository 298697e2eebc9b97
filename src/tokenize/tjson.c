/* tjson.c - see tjson.h. A recursive-descent parser with an explicit depth limit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenize/tjson.h"

#define MAX_DEPTH 64

struct parser {
    struct tj_doc *d;
    const char *s, *end;
    const char *start;
    char *err;
    size_t errsize;
};

static int fail(struct parser *p, const char *what)
{
    unsigned line = 1;
    for (const char *c = p->start; c < p->s && c < p->end; c++) line += *c == '\n';
    snprintf(p->err, p->errsize, "line %u: %s", line, what);
    return -1;
}

static void ws(struct parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t')) p->s++;
}

static long new_node(struct parser *p, int type)
{
    struct tj_doc *d = p->d;
    if (d->nn == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024;
        struct tj_node *n = realloc(d->n, cap * sizeof *n);
        if (!n) return -1;
        d->n = n;
        d->cap = cap;
    }
    struct tj_node *n = &d->n[d->nn];
    memset(n, 0, sizeof *n);
    n->type = (uint8_t)type;
    return (long)d->nn++;
}

static int hex4(const char *s, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned x = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;
        if (x == 16) return -1;
        *v = *v * 16 + x;
    }
    return 0;
}

static char *put_utf8(char *o, unsigned c)
{
    if (c < 0x80) {
        *o++ = (char)c;
    } else if (c < 0x800) {
        *o++ = (char)(0xC0 | c >> 6);
        *o++ = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *o++ = (char)(0xE0 | c >> 12);
        *o++ = (char)(0x80 | (c >> 6 & 0x3F));
        *o++ = (char)(0x80 | (c & 0x3F));
    } else {
        *o++ = (char)(0xF0 | c >> 18);
        *o++ = (char)(0x80 | (c >> 12 & 0x3F));
        *o++ = (char)(0x80 | (c >> 6 & 0x3F));
        *o++ = (char)(0x80 | (c & 0x3F));
    }
    return o;
}

/* A string at p->s (the opening quote) into the pool; its offset in *off and length in *len. The
 * pool was sized to the input, and a decoded string plus its NUL never outgrows its quoted text. */
static int string(struct parser *p, uint32_t *off, uint32_t *len)
{
    struct tj_doc *d = p->d;
    char *o = d->pool + d->npool, *o0 = o;
    p->s++;
    for (;;) {
        if (p->s >= p->end) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') break;
        if (c < 0x20) return fail(p, "control character inside a string");
        if (c != '\\') {
            *o++ = (char)c;
            p->s++;
            continue;
        }
        if (p->s + 1 >= p->end) return fail(p, "unterminated string");
        char e = p->s[1];
        p->s += 2;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned u, u2;
            if (p->end - p->s < 4 || hex4(p->s, &u)) return fail(p, "bad \\u escape");
            p->s += 4;
            if (u >= 0xD800 && u < 0xDC00) {
                if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' || hex4(p->s + 2, &u2) || u2 < 0xDC00 ||
                    u2 >= 0xE000)
                    return fail(p, "a \\u escape of a high surrogate not followed by a low one");
                p->s += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00);
            } else if (u >= 0xDC00 && u < 0xE000) {
                return fail(p, "a \\u escape of a lone low surrogate");
            }
            o = put_utf8(o, u);
            break;
        }
        default: return fail(p, "unknown escape in a string");
        }
    }
    p->s++;
    *off = (uint32_t)d->npool;
    *len = (uint32_t)(o - o0);
    *o++ = 0;
    d->npool += (size_t)(o - o0);
    return 0;
}

static long value(struct parser *p, int depth);

static long container(struct parser *p, int depth, int type)
{
    long me = new_node(p, type);
    if (me < 0) return fail(p, "out of memory");
    char close = type == TJ_ARR ? ']' : '}';
    p->s++;
    ws(p);
    uint32_t last = 0, count = 0;
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return me;
    }
    for (;;) {
        uint32_t key = 0, klen;
        ws(p);
        if (type == TJ_OBJ) {
            if (p->s >= p->end || *p->s != '"') return fail(p, "expected a key in quotes");
            if (string(p, &key, &klen)) return -1;
            ws(p);
            if (p->s >= p->end || *p->s != ':') return fail(p, "expected ':' after a key");
            p->s++;
        }
        long v = value(p, depth + 1);
        if (v < 0) return -1;
        p->d->n[v].key = key;
        if (last) p->d->n[last].next = (uint32_t)v;
        else p->d->n[me].child = (uint32_t)v;
        last = (uint32_t)v;
        count++;
        ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            continue;
        }
        if (p->s < p->end && *p->s == close) {
            p->s++;
            break;
        }
        return fail(p, type == TJ_ARR ? "expected ',' or ']'" : "expected ',' or '}'");
    }
    p->d->n[me].len = count;
    return me;
}

static long value(struct parser *p, int depth)
{
    if (depth > MAX_DEPTH) return fail(p, "nested deeper than 64 levels");
    ws(p);
    if (p->s >= p->end) return fail(p, "unexpected end of file");
    char c = *p->s;
    if (c == '{' || c == '[') return container(p, depth, c == '{' ? TJ_OBJ : TJ_ARR);
    if (c == '"') {
        long me = new_node(p, TJ_STR);
        if (me < 0) return fail(p, "out of memory");
        uint32_t off, len;
        if (string(p, &off, &len)) return -1;
        p->d->n[me].str = off;
        p->d->n[me].len = len;
        return me;
    }
    static const struct { const char *w; int type; } words[] = {{"null", TJ_NULL}, {"true", TJ_TRUE}, {"false", TJ_FALSE}};
    for (size_t i = 0; i < 3; i++) {
        size_t l = strlen(words[i].w);
        if ((size_t)(p->end - p->s) >= l && !memcmp(p->s, words[i].w, l)) {
            p->s += l;
            long me = new_node(p, words[i].type);
            return me < 0 ? fail(p, "out of memory") : me;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t k = 0;
        while (p->s < p->end && k < sizeof buf - 1 && strchr("+-0123456789.eE", *p->s)) buf[k++] = *p->s++;
        buf[k] = 0;
        char *e;
        double v = strtod(buf, &e);
        if (*e) return fail(p, "malformed number");
        long me = new_node(p, TJ_NUM);
        if (me < 0) return fail(p, "out of memory");
        p->d->n[me].num = v;
        return me;
    }
    return fail(p, "unexpected character (not the start of a JSON value)");
}

int tj_parse(struct tj_doc *d, const char *text, size_t len, char *err, size_t errsize)
{
    memset(d, 0, sizeof *d);
    if (len >= UINT32_MAX / 2) {
        snprintf(err, errsize, "larger than 2 GiB");
        return -1;
    }
    d->pool = malloc(len + 1);
    if (!d->pool) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    d->pool[0] = 0;
    d->npool = 1; /* offset 0: the empty string, the key of members of arrays */
    struct parser p = {d, text, text + len, text, err, errsize};
    long root = value(&p, 0);
    if (root < 0) goto bad;
    ws(&p);
    if (p.s != p.end) {
        fail(&p, "text after the end of the JSON value");
        goto bad;
    }
    return 0;
bad:
    tj_free(d);
    return -1;
}

void tj_free(struct tj_doc *d)
{
    free(d->n);
    free(d->pool);
    memset(d, 0, sizeof *d);
}

const struct tj_node *tj_get(const struct tj_doc *d, const struct tj_node *o, const char *key)
{
    if (!o || o->type != TJ_OBJ) return NULL;
    for (const struct tj_node *m = tj_child(d, o); m; m = tj_next(d, m))
        if (!strcmp(tj_key(d, m), key)) return m;
    return NULL;
}
