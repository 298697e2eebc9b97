/* svg.c - see svg.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/svg.h"

static bool grow(struct dt_out *o, size_t need)
{
    if (o->oom) return false;
    if (o->len + need + 1 <= o->cap) return true;
    size_t cap = o->cap ? o->cap : 65536;
    while (cap < o->len + need + 1) cap *= 2;
    char *p = realloc(o->p, cap);
    if (!p) {
        o->oom = true;
        return false;
    }
    o->p = p;
    o->cap = cap;
    return true;
}

static void put(struct dt_out *o, const char *s, size_t n)
{
    if (!grow(o, n)) return;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void out_vprintf(struct dt_out *o, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n >= 0 && grow(o, (size_t)n)) {
        vsnprintf(o->p + o->len, (size_t)n + 1, fmt, again);
        o->len += (size_t)n;
    }
    va_end(again);
}

void dt_out_printf(struct dt_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out_vprintf(o, fmt, ap);
    va_end(ap);
}

char *dt_out_format(const char *fmt, ...)
{
    struct dt_out o = {0};
    va_list ap;
    va_start(ap, fmt);
    out_vprintf(&o, fmt, ap);
    va_end(ap);
    if (!o.oom && !o.p) grow(&o, 0); /* "": a buffer all the same */
    if (o.oom) dt_out_free(&o);
    return o.p;
}

/* Bytes in the UTF-8 sequence at s that XML may hold (RFC 3629: no overlong forms, surrogates or
 * values past U+10FFFF), or 0 */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

void dt_out_text(struct dt_out *o, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        size_t n;
        if (*s == '&') put(o, "&amp;", 5), n = 1;
        else if (*s == '<') put(o, "&lt;", 4), n = 1;
        else if (*s == '>') put(o, "&gt;", 4), n = 1;
        else if (*s == '"') put(o, "&quot;", 6), n = 1;
        else if (*s == '\'') put(o, "&#39;", 5), n = 1;
        else if ((*s >= 0x20 && *s < 0x80) || *s == '\t' || *s == '\n' || *s == '\r') put(o, (const char *)s, 1), n = 1;
        else if (*s >= 0x80 && (n = utf8_seq(s)) > 0) put(o, (const char *)s, n);
        else put(o, "\xef\xbf\xbd", 3), n = 1; /* U+FFFD */
        s += n;
    }
}

void dt_out_free(struct dt_out *o)
{
    free(o->p);
    *o = (struct dt_out){0};
}

/* n points as path commands (`first`, then the implicit lineto), in order or from the last */
static void points(struct dt_out *o, const double *x, const double *y, size_t n, bool reverse, const char *first)
{
    for (size_t k = 0; k < n; k++) {
        size_t i = reverse ? n - 1 - k : k;
        dt_out_printf(o, "%s%.1f %.1f", k == 0 ? first : " ", x[i], y[i]);
    }
}

void dt_svg_line(struct dt_out *o, const double *x, const double *y, size_t n, const char *attrs)
{
    if (n == 0) return;
    dt_out_printf(o, "<path %s d=\"", attrs);
    points(o, x, y, n, false, "M");
    /* a lone point would draw nothing: a dot of the line's width instead */
    if (n == 1) dt_out_printf(o, "h0.1");
    dt_out_printf(o, "\"/>\n");
}

void dt_svg_band(struct dt_out *o, const double *tx, const double *ty, size_t tn, const double *bx,
                 const double *by, size_t bn, const char *attrs)
{
    if (tn == 0) return;
    dt_out_printf(o, "<path %s d=\"", attrs);
    points(o, tx, ty, tn, false, "M");
    points(o, bx, by, bn, true, "L");
    dt_out_printf(o, "Z\"/>\n");
}

void dt_svg_dots(struct dt_out *o, const double *x, const double *y, size_t n, const char *attrs)
{
    if (n == 0) return;
    dt_out_printf(o, "<path %s stroke-linecap=\"round\" d=\"", attrs);
    for (size_t i = 0; i < n; i++) dt_out_printf(o, "M%.1f %.1fh0.1", x[i], y[i]);
    dt_out_printf(o, "\"/>\n");
}

void dt_svg_text(struct dt_out *o, double x, double y, const char *attrs, const char *text)
{
    dt_out_printf(o, "<text x=\"%.1f\" y=\"%.1f\" %s>", x, y, attrs);
    dt_out_text(o, text);
    dt_out_printf(o, "</text>\n");
}
