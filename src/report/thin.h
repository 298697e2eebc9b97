/*
 * thin.h - a series thinned to what a chart can show: of each pixel column, the point of least and
 * the point of greatest y, in x order. A line through them covers the same pixels as one through
 * every point, so a spike (a loss jump, a slow step) stays visible, and 100k steps on a chart
 * 500 pixels wide become at most 1000 points.
 */
#ifndef DT_REPORT_THIN_H
#define DT_REPORT_THIN_H

#include <stdbool.h>
#include <stddef.h>

/* Thin the n points (x ascending) over `columns` columns spanning x0..x1 into kx, ky, which hold
 * at least min(n, 2 * columns) points; points with a non-finite x or y are left out (with a
 * positive_only, also y <= 0: a log axis cannot show them). Returns how many were kept. */
size_t dt_thin(const double *x, const double *y, size_t n, double x0, double x1, int columns, bool positive_only,
               double *kx, double *ky);

#endif
