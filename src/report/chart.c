/* chart.c - see chart.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report/chart.h"
#include "report/thin.h"

#define MARGIN_LEFT 66
#define MARGIN_RIGHT 16
#define MARGIN_BOTTOM 42
#define LEGEND_ROW 15
#define LEGEND_ROWS_MAX 3
#define CHAR_W 6.2 /* a legend character's width at 11px: enough to lay items out without measuring */
#define TICKS_MAX 16

void dt_chart_add(struct dt_chart *c, struct dt_series s)
{
    if (c->ns < DT_CHART_SERIES_MAX) c->s[c->ns++] = s;
}

static bool drawable(const struct dt_chart *c, double y) { return isfinite(y) && (c->ykind != DT_SCALE_LOG || y > 0); }

bool dt_chart_has_data(const struct dt_chart *c)
{
    for (int k = 0; k < c->ns; k++)
        for (size_t i = 0; i < c->s[k].n; i++)
            if (isfinite(c->s[k].x[i]) && drawable(c, c->s[k].y[i])) return true;
    return false;
}

void dt_chart_open(struct dt_out *o, const char *id, const char *title, int left, int top, int legend_rows,
                   struct dt_chart_box *b)
{
    double plot_top = 30 + LEGEND_ROW * legend_rows + 8;
    *b = (struct dt_chart_box){.left = left, .top = top, .px = MARGIN_LEFT, .py = plot_top,
                               .pw = DT_CHART_W - MARGIN_LEFT - MARGIN_RIGHT,
                               .ph = DT_CHART_H - plot_top - MARGIN_BOTTOM};
    dt_out_printf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-%s\" data-chart=\"%s\" class=\"chart\" "
                  "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" style=\"left:%dpx;top:%dpx\">\n", id, id,
                  DT_CHART_W, DT_CHART_H, DT_CHART_W, DT_CHART_H, left, top);
    dt_svg_text(o, 10, 18, "class=\"title\"", title);
}

void dt_chart_close(struct dt_out *o, const char *id, const struct dt_chart_box *b, struct dt_out *manifest)
{
    dt_out_printf(o, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n</svg>\n", b->px,
                  b->py, b->pw, b->ph);
    dt_out_printf(manifest, "chart-%s %d %d %d %d %.0f %.0f %.0f %.0f\n", id, b->left, b->top, DT_CHART_W,
                  DT_CHART_H, b->left + b->px, b->top + b->py, b->pw, b->ph);
}

/* an axis' ticks: at each, a grid line across the plot and the value's label */
static void ticks(struct dt_out *o, const struct dt_chart_box *b, const struct dt_scale *s, bool vertical)
{
    double t[TICKS_MAX], step;
    int n = dt_scale_ticks(s, t, TICKS_MAX, &step);
    for (int i = 0; i < n; i++) {
        double at = dt_scale_px(s, t[i]);
        char label[32];
        dt_scale_label(t[i], step, label, sizeof label);
        if (vertical) {
            dt_out_printf(o, "<path class=\"grid\" d=\"M%.1f %.1fh%.1f\"/>\n", b->px, at, b->pw);
            dt_svg_text(o, b->px - 5, at + 4, "class=\"tick\" text-anchor=\"end\"", label);
        } else {
            dt_out_printf(o, "<path class=\"grid\" d=\"M%.1f %.1fv%.1f\"/>\n", at, b->py, b->ph);
            dt_svg_text(o, at, b->py + b->ph + 14, "class=\"tick\" text-anchor=\"middle\"", label);
        }
    }
}

void dt_chart_xaxis(struct dt_out *o, const struct dt_chart_box *b, const struct dt_scale *xs, const char *xlabel)
{
    ticks(o, b, xs, false);
    dt_svg_text(o, b->px + b->pw / 2, b->py + b->ph + 32, "class=\"axis\" text-anchor=\"middle\"", xlabel);
}

static void yaxis(struct dt_out *o, const struct dt_chart_box *b, const struct dt_scale *ys, const char *ylabel)
{
    ticks(o, b, ys, true);
    dt_out_printf(o, "<text class=\"axis\" text-anchor=\"middle\" transform=\"translate(14 %.1f) rotate(-90)\">",
                  b->py + b->ph / 2);
    dt_out_text(o, ylabel);
    dt_out_printf(o, "</text>\n");
}

double dt_chart_legend_item(struct dt_out *o, double x, double y, const char *color, enum dt_mark mark,
                            const char *label)
{
    if (mark == DT_MARK_BAND) dt_out_printf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"9\" fill=\"%s\"/>\n",
                                            x, y - 8, color);
    else if (mark == DT_MARK_DOTS)
        dt_out_printf(o, "<path d=\"M%.1f %.1fh0.1\" stroke=\"%s\" stroke-width=\"5\" stroke-linecap=\"round\"/>\n",
                      x + 7, y - 4, color);
    else dt_out_printf(o, "<path d=\"M%.1f %.1fh16\" stroke=\"%s\" stroke-width=\"%s\"%s/>\n", x, y - 4, color,
                       mark == DT_MARK_RUG ? "1" : "2", mark == DT_MARK_DASHED ? " stroke-dasharray=\"5 3\"" : "");
    dt_svg_text(o, x + 20, y, "class=\"legend\"", label);
    return x + 20 + CHAR_W * (double)strlen(label) + 14;
}

/* the legend's rows: items left to right, a new row when one is full, at most LEGEND_ROWS_MAX
 * (the rest left out: the page's notes say what the marks are); with o NULL, only count them */
static int legend(const struct dt_chart *c, struct dt_out *o)
{
    double x = 10, limit = DT_CHART_W - 10;
    int row = 0;
    for (int k = 0; k < c->ns; k++) {
        const struct dt_series *s = &c->s[k];
        if (!s->label) continue;
        double w = 20 + CHAR_W * (double)strlen(s->label) + 14;
        if (x + w > limit && x > 10) row++, x = 10;
        if (row == LEGEND_ROWS_MAX) return row;
        if (o) dt_chart_legend_item(o, x, 30 + LEGEND_ROW * (row + 1), s->color, s->mark, s->label);
        x += w;
    }
    return x > 10 ? row + 1 : row;
}

/* the y range of the marks and rules, as the axis will show it */
static bool y_range(const struct dt_chart *c, double mul, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (int k = 0; k < c->ns; k++) {
        const struct dt_series *s = &c->s[k];
        if (s->mark == DT_MARK_RUG) continue;
        for (size_t i = 0; i < s->n; i++) {
            double v[2] = {s->y[i] * mul, s->base ? s->base[i] * mul : NAN};
            for (int j = 0; j < 2; j++)
                if (drawable(c, v[j])) *lo = fmin(*lo, v[j]), *hi = fmax(*hi, v[j]);
        }
    }
    for (int k = 0; k < c->nh; k++)
        if (drawable(c, c->hrule[k].at)) *lo = fmin(*lo, c->hrule[k].at * mul), *hi = fmax(*hi, c->hrule[k].at * mul);
    if (c->y_clip > 0) *hi = fmin(*hi, c->y_clip * mul);
    if (c->y_from_zero && c->ykind == DT_SCALE_LINEAR) *lo = fmin(*lo, 0);
    if (c->ykind == DT_SCALE_LINEAR) *hi += (*hi - *lo) * 0.03; /* a flat line at the top stays off the frame */
    return *lo <= *hi;
}

/* thin s's (x, y) to the plot's columns and map to pixels; returns the points in kx, ky */
static size_t project(const struct dt_chart *c, const struct dt_scale *xs, const struct dt_scale *ys,
                      const double *x, const double *y, size_t n, double mul, int columns, double *kx, double *ky)
{
    size_t k = dt_thin(x, y, n, xs->lo, xs->hi, columns, c->ykind == DT_SCALE_LOG, kx, ky);
    for (size_t i = 0; i < k; i++) kx[i] = dt_scale_px(xs, kx[i]), ky[i] = dt_scale_px(ys, ky[i] * mul);
    return k;
}

/* points above the axis' top drawn on it */
static void clip(const struct dt_chart_box *b, double *ky, size_t n)
{
    for (size_t i = 0; i < n; i++) ky[i] = fmax(ky[i], b->py);
}

/* each point of the series above the clip: a small triangle at the top, pointing up, and its value */
static void spikes(const struct dt_chart *c, const struct dt_chart_box *b, const struct dt_scale *xs, double mul,
                   struct dt_out *o)
{
    int shown = 0;
    for (int k = 0; k < c->ns && shown < 4; k++) {
        const struct dt_series *s = &c->s[k];
        if (s->mark == DT_MARK_RUG) continue;
        for (size_t i = 0; i < s->n && shown < 4; i++) {
            if (!(s->y[i] > c->y_clip) || (s->mark == DT_MARK_BAND && k + 1 < c->ns)) continue;
            double x = dt_scale_px(xs, s->x[i]);
            if (!isfinite(x)) continue;
            char label[48];
            snprintf(label, sizeof label, "%.4g (step %.0f)", s->y[i] * mul, s->x[i]);
            dt_out_printf(o, "<path class=\"spike\" fill=\"%s\" d=\"M%.1f %.1fl-4 7h8z\"/>\n", s->color, x, b->py);
            dt_svg_text(o, x + 6, b->py + 10 + 11 * shown, "class=\"rulelabel\"", label);
            shown++;
        }
    }
}

static void marks(const struct dt_chart *c, const struct dt_chart_box *b, const struct dt_scale *xs,
                  const struct dt_scale *ys, double mul, double *buf, int columns, struct dt_out *o)
{
    size_t room = 2 * (size_t)columns + 2;
    double *kx = buf, *ky = buf + room, *bx = buf + 2 * room, *by = buf + 3 * room;
    for (int k = 0; k < c->ns; k++) {
        const struct dt_series *s = &c->s[k];
        char attrs[160];
        size_t n = project(c, xs, ys, s->x, s->y, s->n, mul, columns, kx, ky);
        clip(b, ky, n);
        if (s->mark == DT_MARK_BAND) {
            size_t m = 0;
            if (s->base) {
                m = project(c, xs, ys, s->x, s->base, s->n, mul, columns, bx, by);
                clip(b, by, m);
            } else if (n > 0) { /* down to the axis */
                bx[0] = kx[0], bx[1] = kx[n - 1], by[0] = by[1] = b->py + b->ph;
                m = 2;
            }
            snprintf(attrs, sizeof attrs, "fill=\"%s\" fill-opacity=\"0.85\" stroke=\"none\"", s->color);
            dt_svg_band(o, kx, ky, n, bx, by, m, attrs);
        } else if (s->mark == DT_MARK_DOTS) {
            snprintf(attrs, sizeof attrs, "stroke=\"%s\" stroke-width=\"4\"", s->color);
            dt_svg_dots(o, kx, ky, n, attrs);
        } else if (s->mark == DT_MARK_RUG) { /* a tick at the bottom of the plot per column with a point */
            dt_out_printf(o, "<path stroke=\"%s\" stroke-width=\"1.5\" d=\"", s->color);
            for (size_t i = 0; i < n; i++)
                if (i == 0 || kx[i] - kx[i - 1] >= 1) dt_out_printf(o, "M%.1f %.1fv-10", kx[i], b->py + b->ph);
            dt_out_printf(o, "\"/>\n");
        } else {
            snprintf(attrs, sizeof attrs, "fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s", s->color,
                     s->mark == DT_MARK_DASHED ? " stroke-dasharray=\"5 3\"" : "");
            dt_svg_line(o, kx, ky, n, attrs);
        }
    }
}

static void rules(const struct dt_chart *c, const struct dt_chart_box *b, const struct dt_scale *xs,
                  const struct dt_scale *ys, double mul, struct dt_out *o)
{
    for (int k = 0; k < c->nv; k++) {
        double x = dt_scale_px(xs, c->vrule[k].at);
        if (!isfinite(x)) continue;
        dt_out_printf(o, "<path class=\"rule\" d=\"M%.1f %.1fv%.1f\"/>\n", x, b->py, b->ph);
        dt_svg_text(o, x + 3, b->py + 11, "class=\"rulelabel\"", c->vrule[k].label);
    }
    for (int k = 0; k < c->nh; k++) {
        double y = dt_scale_px(ys, c->hrule[k].at * mul);
        if (!isfinite(y)) continue;
        dt_out_printf(o, "<path class=\"rule\" d=\"M%.1f %.1fh%.1f\"/>\n", b->px, y, b->pw);
        dt_svg_text(o, b->px + b->pw - 4, y - 4, "class=\"rulelabel\" text-anchor=\"end\"", c->hrule[k].label);
    }
}

void dt_chart_render(const struct dt_chart *c, int left, int top, struct dt_out *o, struct dt_out *manifest)
{
    struct dt_chart_box b;
    dt_chart_open(o, c->id, c->title, left, top, legend(c, NULL), &b);
    legend(c, o);
    double mul = c->y_scale ? c->y_scale : 1, lo, hi;
    struct dt_scale xs, ys;
    int columns = (int)b.pw;
    double *buf = malloc(4 * (2 * (size_t)columns + 2) * sizeof *buf);
    /* coordinates inside the <svg>: its style places it on the page */
    if (buf && y_range(c, mul, &lo, &hi) && dt_scale_fit(&xs, DT_SCALE_LINEAR, c->xlo, c->xhi, b.px, b.px + b.pw) &&
        dt_scale_fit(&ys, c->ykind, lo, hi, b.py + b.ph, b.py)) {
        yaxis(o, &b, &ys, c->ylabel);
        dt_chart_xaxis(o, &b, &xs, c->xlabel);
        rules(c, &b, &xs, &ys, mul, o);
        marks(c, &b, &xs, &ys, mul, buf, columns, o);
        if (c->y_clip > 0) spikes(c, &b, &xs, mul, o);
    } else if (!buf) {
        o->oom = true;
    }
    free(buf);
    dt_chart_close(o, c->id, &b, manifest);
}
