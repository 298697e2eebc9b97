/* timeline.c - see timeline.h. */
#include <math.h>
#include <stdio.h>
#include "report/chart.h"
#include "report/timeline.h"

static const char *const row_label[DT_EV_NKINDS] = {
    [DT_EV_START] = "start", [DT_EV_CKPT_SAVED] = "checkpoint", [DT_EV_CKPT_FAILED] = "ckpt failed",
    [DT_EV_PREEMPTED] = "preempted", [DT_EV_TASK_FAILED] = "task failed", [DT_EV_END] = "end"};

/* one mark: a dot, or a cross for a failure, with its tooltip */
static void mark(struct dt_out *o, double x, double y, const char *color, bool bad, const char *what)
{
    if (bad)
        dt_out_printf(o, "<path stroke=\"%s\" stroke-width=\"2.5\" d=\"M%.1f %.1fl8 8m0 -8l-8 8\">", color, x - 4,
                      y - 4);
    else dt_out_printf(o, "<circle fill=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\">", color, x, y);
    dt_out_printf(o, "<title>");
    dt_out_text(o, what);
    dt_out_printf(o, "</title></%s>\n", bad ? "path" : "circle");
}

void dt_report_timeline(struct dt_out *o, struct dt_out *manifest, int left, int top,
                        const struct dt_report_run *runs, int nruns, const char *const *colors, double xlo, double xhi)
{
    struct dt_chart_box b;
    dt_chart_open(o, "timeline", "Lifecycle events", left, top, 0, &b);
    struct dt_scale xs;
    if (!dt_scale_fit(&xs, DT_SCALE_LINEAR, xlo, xhi, b.px, b.px + b.pw)) {
        dt_chart_close(o, "timeline", &b, manifest);
        return;
    }
    dt_chart_xaxis(o, &b, &xs, "step");
    double row_h = b.ph / DT_EV_NKINDS, lane = fmin(8, row_h / (nruns + 1));
    for (int k = 0; k < DT_EV_NKINDS; k++) {
        double y = b.py + row_h * (k + 0.5);
        dt_out_printf(o, "<path class=\"grid\" d=\"M%.1f %.1fh%.1f\"/>\n", b.px, y, b.pw);
        dt_svg_text(o, b.px - 5, y + 4, "class=\"tick\" text-anchor=\"end\"", row_label[k]);
    }
    for (int r = 0; r < nruns; r++) {
        double offset = (r - (nruns - 1) / 2.0) * lane;
        for (int k = 0; k < DT_EV_NKINDS; k++) {
            double y = b.py + row_h * (k + 0.5) + offset;
            /* the events of this row in one pixel column: one mark (a failure's, if there is one), its
             * tooltip counting them */
            size_t shown = 0, count = 0;
            long col = -1;
            for (size_t i = 0; i <= runs[r].nev; i++) {
                const struct dt_report_event *e = i < runs[r].nev ? &runs[r].ev[i] : NULL;
                if (e && e->kind != (enum dt_report_kind)k) continue;
                long c = e ? lround(dt_scale_px(&xs, (double)e->step)) : -2;
                if (e && c == col) {
                    if (e->bad && !runs[r].ev[shown].bad) shown = i;
                    count++;
                    continue;
                }
                if (count > 0) {
                    const struct dt_report_event *f = &runs[r].ev[shown];
                    char what[160];
                    snprintf(what, sizeof what, "%zu events here; one of them: ", count);
                    struct dt_out t = {0};
                    dt_out_printf(&t, "%s%s", count > 1 ? what : "", f->what);
                    mark(o, (double)col, y, colors[r], f->bad, t.p ? t.p : f->what);
                    dt_out_free(&t);
                }
                if (!e) break;
                shown = i, count = 1, col = c;
            }
        }
    }
    dt_chart_close(o, "timeline", &b, manifest);
}
