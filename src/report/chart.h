/*
 * chart.h - one chart of the report: an <svg> of a fixed size at a fixed place on the page, with
 * its title, legend, axes (units in their labels, ticks, a light grid) and marks: lines, dots,
 * stacked bands, a rug of ticks along the bottom (skipped steps), vertical rules (the lives of a
 * resumed run) and horizontal ones (the best possible loss). An axis may stop short of a spike, which
 * is then drawn at its top, marked with its value.
 *
 * Each <svg> has an id and data-chart naming it, and each chart adds a line to the page's
 * manifest, "ID LEFT TOP WIDTH HEIGHT PLOT_LEFT PLOT_TOP PLOT_WIDTH PLOT_HEIGHT" in CSS pixels of
 * the page, so a test can find every chart in a screenshot. Marks are drawn in saturated colors and
 * everything else (axes, grid, text, rules) in greys, so the test can tell a chart with marks from
 * an empty frame by the colors in its plot box.
 */
#ifndef DT_REPORT_CHART_H
#define DT_REPORT_CHART_H

#include <stdbool.h>
#include <stddef.h>
#include "report/scale.h"
#include "report/svg.h"

#define DT_CHART_W 600
#define DT_CHART_H 300
#define DT_CHART_SERIES_MAX 48
#define DT_CHART_RULES_MAX 32

enum dt_mark { DT_MARK_LINE, DT_MARK_DASHED, DT_MARK_DOTS, DT_MARK_BAND, DT_MARK_RUG };

struct dt_series {
    const char *label; /* in the legend; NULL: not there */
    const char *color;
    enum dt_mark mark;
    const double *x, *y; /* n points, x ascending; a non-finite y is no point */
    size_t n;
    const double *base; /* DT_MARK_BAND: the band's lower edge at each x (NULL: the axis) */
};

struct dt_rule {
    double at;
    const char *label;
};

struct dt_chart {
    const char *id, *title, *xlabel, *ylabel;
    enum dt_scale_kind ykind;
    bool y_from_zero;      /* a linear y axis that starts at 0 (rates, memory, times) */
    double xlo, xhi;       /* the x domain's data range, shared by every chart on the same axis */
    double y_scale;        /* every y is multiplied by it (bytes to GiB, a fraction to %); 0: 1 */
    double y_clip;         /* the axis' top at most this (before y_scale): a point above it is drawn at the
                            * top, marked with its value (a run's first step, which JIT and page faults
                            * make many times a steady one); 0: none */
    struct dt_series s[DT_CHART_SERIES_MAX];
    int ns;
    struct dt_rule vrule[DT_CHART_RULES_MAX], hrule[DT_CHART_RULES_MAX];
    int nv, nh;
};

/* the chart's box on the page and its plot area inside it, in page pixels */
struct dt_chart_box {
    int left, top;
    double px, py, pw, ph;
};

/* Add a series (dropped past DT_CHART_SERIES_MAX); whether c has a point to draw in any series. */
void dt_chart_add(struct dt_chart *c, struct dt_series s);
bool dt_chart_has_data(const struct dt_chart *c);
/* Write c at (left, top); its manifest line goes to manifest. */
void dt_chart_render(const struct dt_chart *c, int left, int top, struct dt_out *o, struct dt_out *manifest);

/* The pieces, for charts of another shape (the timeline): open the <svg> with its title and
 * `legend_rows` rows of legend room, returning its plot area; the x axis along the plot's bottom;
 * close it. */
void dt_chart_open(struct dt_out *o, const char *id, const char *title, int left, int top, int legend_rows,
                   struct dt_chart_box *b);
void dt_chart_xaxis(struct dt_out *o, const struct dt_chart_box *b, const struct dt_scale *xs, const char *xlabel);
void dt_chart_close(struct dt_out *o, const char *id, const struct dt_chart_box *b, struct dt_out *manifest);
/* a legend item at (x, y): its mark, then its label; returns the x after it */
double dt_chart_legend_item(struct dt_out *o, double x, double y, const char *color, enum dt_mark mark,
                            const char *label);

#endif
