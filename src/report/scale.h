/*
 * scale.h - a chart axis: data values to pixels, linear or logarithmic, over a domain widened to
 * round numbers, with tick values a reader takes in at a glance (1, 2 or 5 times a power of ten;
 * decades on a log axis that spans two or more) and their labels (1.5k, 20M, 0.0003, 3e-6).
 */
#ifndef DT_REPORT_SCALE_H
#define DT_REPORT_SCALE_H

#include <stdbool.h>
#include <stddef.h>

enum dt_scale_kind { DT_SCALE_LINEAR, DT_SCALE_LOG };

struct dt_scale {
    enum dt_scale_kind kind;
    double lo, hi; /* the domain: lo < hi, both > 0 on a log axis */
    double p0, p1; /* the pixels lo and hi land on (a y axis has p1 < p0) */
};

/* Fit s to data from lo to hi, onto pixels p0..p1. A log axis takes the data's positive part (lo:
 * the least positive value). Returns false, s untouched, when there is nothing to draw (no finite
 * value; on a log axis none above 0). */
bool dt_scale_fit(struct dt_scale *s, enum dt_scale_kind kind, double lo, double hi, double p0, double p1);
/* v's pixel: NAN for a value the axis cannot show (not finite; <= 0 on a log axis) */
double dt_scale_px(const struct dt_scale *s, double v);
/* The tick values within the domain, ascending, at most max; *step: their spacing on a linear axis
 * (0 on a log axis), for dt_scale_label. Returns how many. */
int dt_scale_ticks(const struct dt_scale *s, double *ticks, int max, double *step);
/* v as a label: k, M, G, T past a thousand; as many decimals as ticks `step` apart need (step 0:
 * three significant digits) */
void dt_scale_label(double v, double step, char *buf, size_t n);

#endif
