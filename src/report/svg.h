/*
 * svg.h - the page as it is written: a growable text buffer, text escaped for XML, and the few SVG
 * shapes the charts draw. The page is XHTML-compatible markup, so an XML parser reads it (the tests
 * parse it: a broken tag fails them). Coordinates are written to a tenth of a pixel, which is all a
 * screen shows and keeps a page of 100k-step curves small.
 */
#ifndef DT_REPORT_SVG_H
#define DT_REPORT_SVG_H

#include <stdbool.h>
#include <stddef.h>

struct dt_out {
    char *p;
    size_t len, cap;
    bool oom; /* an allocation failed: the rest is dropped, and the caller refuses the page */
};

void dt_out_printf(struct dt_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the formatted text in a buffer of its own (free it); NULL when memory ran out */
char *dt_out_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* s as XML text or attribute value: & < > " ' escaped; control characters other than tab and
 * newline, and bytes that are not UTF-8 (a run name is any bytes), become U+FFFD, so the page stays
 * well-formed */
void dt_out_text(struct dt_out *o, const char *s);
void dt_out_free(struct dt_out *o);

/* A polyline through n points, in pixels, as one <path>; attrs (class, stroke, ...) go in as they
 * are. Nothing for n == 0. */
void dt_svg_line(struct dt_out *o, const double *x, const double *y, size_t n, const char *attrs);
/* The area between two polylines: top left to right, then bottom right to left (a stacked band). */
void dt_svg_band(struct dt_out *o, const double *tx, const double *ty, size_t tn, const double *bx,
                 const double *by, size_t bn, const char *attrs);
/* a dot at each of n points (zero-length strokes with round caps: one <path> for them all) */
void dt_svg_dots(struct dt_out *o, const double *x, const double *y, size_t n, const char *attrs);
/* text at (x, y), escaped */
void dt_svg_text(struct dt_out *o, double x, double y, const char *attrs, const char *text);

#endif
