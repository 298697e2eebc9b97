/*
 * figures.c - which charts the report draws, and from which columns of the runs: one chart per
 * quantity with every run overlaid in its color, and one stacked chart per run for the step time
 * by phase and by op. A chart no run has a value for, or whose value never changes (the loss scale of
 * a run that does not scale its loss), is left out, with a note saying why; a step-time axis is
 * scaled to the steady steps, each life's first step marked above it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "report/page.h"

#define TOP_OPS 8 /* ops drawn apart in the stacked chart; the rest are summed */

static const char *const band_color[] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#edc948",
                                         "#b07aa1", "#ff9da7", "#9c755f", "#76b7b2", "#a0cbe8"};

static struct dt_chart *chart(struct dt_report_page *p, const char *id, const char *title, const char *xlabel,
                              const char *ylabel, enum dt_scale_kind ykind)
{
    struct dt_chart *c = p->ncharts < DT_REPORT_CHARTS_MAX ? dt_report_keep(p, calloc(1, sizeof *c)) : NULL;
    if (!c) return NULL;
    *c = (struct dt_chart){.id = id, .title = title, .xlabel = xlabel, .ylabel = ylabel, .ykind = ykind,
                           .y_from_zero = true, .xlo = 0, .xhi = p->step_hi};
    p->chart[p->ncharts++] = c;
    return c;
}

/* the legend name of a run's series: the quantity alone for one run, the run's name before it for several */
static const char *name(struct dt_report_page *p, int r, const char *what)
{
    if (p->nruns == 1) return what[0] ? what : NULL;
    return what[0] ? dt_report_printf(p, "%s %s", p->label[r], what) : p->label[r];
}

/* one line per run of metrics column col, for the runs that have a value in it */
static void lines(struct dt_report_page *p, struct dt_chart *c, enum dt_report_col col, const char *what,
                  enum dt_mark mark)
{
    for (int r = 0; c && r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        size_t i = 0;
        while (i < run->n && !isfinite(run->col[col][i])) i++;
        if (i == run->n) continue;
        dt_chart_add(c, (struct dt_series){.label = name(p, r, what), .color = p->color[r], .mark = mark,
                                           .x = run->col[DT_COL_STEP], .y = run->col[col], .n = run->n});
    }
}

/* a vertical rule where each life after the first began */
static void lives(struct dt_report_page *p, struct dt_chart *c)
{
    for (int r = 0; c && r < p->nruns; r++)
        for (int i = 1; i < p->runs[r].nlives && c->nv < DT_CHART_RULES_MAX; i++)
            c->vrule[c->nv++] = (struct dt_rule){(double)p->runs[r].life[i].from_step,
                                                 name(p, r, dt_report_printf(p, "life %d", i + 1))};
}

/* loss against steps or tokens: training (line), validation (dots), the best possible (a rule) */
static void loss(struct dt_report_page *p, bool tokens)
{
    struct dt_chart *c = chart(p, tokens ? "loss-tokens" : "loss-step", tokens ? "Loss by tokens" : "Loss by step",
                               tokens ? "tokens" : "step", "loss (nats, log scale)", DT_SCALE_LOG);
    if (!c) return;
    if (tokens) c->xhi = p->tokens_hi;
    for (int r = 0; r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        const double *ex = run->eval_step;
        if (tokens) {
            double *t = dt_report_keep(p, malloc((run->neval + 1) * sizeof *t));
            for (size_t i = 0; t && i < run->neval; i++) t[i] = dt_report_tokens_at(run, run->eval_step[i]);
            ex = t;
        }
        dt_chart_add(c, (struct dt_series){.label = name(p, r, "training"), .color = p->color[r], .mark = DT_MARK_LINE,
                                           .x = run->col[tokens ? DT_COL_TOKENS : DT_COL_STEP],
                                           .y = run->col[DT_COL_LOSS], .n = run->n});
        if (ex && run->neval)
            dt_chart_add(c, (struct dt_series){.label = name(p, r, "validation"), .color = p->color[r],
                                               .mark = DT_MARK_DOTS, .x = ex, .y = run->eval_loss, .n = run->neval});
        bool known = false; /* runs of the same source share one rule */
        for (int k = 0; k < c->nh; k++) known |= fabs(c->hrule[k].at - run->loss_floor) < 1e-9;
        if (isfinite(run->loss_floor) && !known && c->nh < DT_CHART_RULES_MAX)
            c->hrule[c->nh++] = (struct dt_rule){run->loss_floor,
                                                 dt_report_printf(p, "best possible %.4f", run->loss_floor)};
    }
    if (!tokens) lives(p, c);
}

/* a rug of the steps an fp16 overflow skipped: the records whose grad_norm is null, or whose
 * skipped_steps count grew */
static void skipped(struct dt_report_page *p, struct dt_chart *c)
{
    for (int r = 0; c && r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        double *x = dt_report_keep(p, malloc((run->n + 1) * sizeof *x));
        double *y = dt_report_keep(p, malloc((run->n + 1) * sizeof *y));
        if (!x || !y) return;
        size_t n = 0;
        for (size_t i = 0; i < run->n; i++) {
            double s = run->col[DT_COL_SKIPPED][i];
            if (isnan(run->col[DT_COL_GRAD_NORM][i]) || (i > 0 && s > run->col[DT_COL_SKIPPED][i - 1]))
                x[n] = run->col[DT_COL_STEP][i], y[n++] = 1;
        }
        if (n) dt_chart_add(c, (struct dt_series){.label = name(p, r, "skipped steps"), .color = p->color[r],
                                                  .mark = DT_MARK_RUG, .x = x, .y = y, .n = n});
    }
}

/* Whether record i of run is the first of a life: its first step, which warms up (JIT, page faults,
 * first touches of the buffers) at many times a steady step's time */
static bool warming(const struct dt_report_run *run, size_t i)
{
    const double *step = run->col[DT_COL_STEP];
    for (int l = 0; l < run->nlives; l++) {
        double from = (double)run->life[l].from_step;
        if (step[i] > from && (i == 0 || step[i - 1] <= from)) return true;
    }
    return i == 0;
}

/* The largest y of run's records past their lives' first (into *steady) and of those first ones (into
 * *warm) */
static void step_tops(const struct dt_report_run *run, const double *y, double *steady, double *warm)
{
    for (size_t i = 0; i < run->n; i++)
        if (isfinite(y[i])) {
            if (warming(run, i)) *warm = fmax(*warm, y[i]);
            else *steady = fmax(*steady, y[i]);
        }
}

/* A step-time axis scaled to the steady steps when a life's first step would set it (a quarter above
 * them or more): that spike is drawn at the top, marked with its value (chart.h) */
static void steady_axis(struct dt_chart *c, double steady, double warm)
{
    if (c && steady > 0 && warm > 1.25 * steady) c->y_clip = steady * 1.05;
}

/* g's columns stacked as bands, the largest TOP_OPS apart and the rest summed (order: as the records
 * list them for phases, largest first for ops) */
static void stacked(struct dt_report_page *p, int r, const struct dt_report_group *g, bool by_size, const char *id,
                    const char *title)
{
    const struct dt_report_run *run = &p->runs[r];
    int order[DT_REPORT_GROUP_MAX], n = 0;
    double mean[DT_REPORT_GROUP_MAX];
    for (int i = 0; i < g->n; i++) {
        mean[i] = 0;
        for (size_t j = 0; j < run->n; j++) mean[i] += isfinite(g->col[i][j]) ? g->col[i][j] : 0;
        if (mean[i] <= 0) continue; /* ops this model never calls */
        int k = n++;
        for (; by_size && k > 0 && mean[order[k - 1]] < mean[i]; k--) order[k] = order[k - 1];
        order[k] = i;
    }
    if (n == 0) return;
    const char *full = p->nruns > 1 ? dt_report_printf(p, "%s: %s", title, p->label[r]) : title;
    struct dt_chart *c = chart(p, dt_report_printf(p, "%s-%d", id, r + 1), full, "step", "ms per step",
                               DT_SCALE_LINEAR);
    int bands = n > TOP_OPS + 1 ? TOP_OPS + 1 : n;
    const double *below = NULL;
    for (int b = 0; c && b < bands; b++) {
        double *top = dt_report_keep(p, malloc((run->n + 1) * sizeof *top));
        if (!top) return;
        for (size_t j = 0; j < run->n; j++) {
            double v = 0;
            for (int k = b; k < (b == bands - 1 ? n : b + 1); k++) /* the last band: every op left */
                v += isfinite(g->col[order[k]][j]) ? g->col[order[k]][j] : 0;
            top[j] = (below ? below[j] : 0) + v;
        }
        const char *label = b == bands - 1 && n > bands ? dt_report_printf(p, "%d other ops", n - b)
                                                       : g->name[order[b]];
        dt_chart_add(c, (struct dt_series){.label = label, .color = band_color[b % 10], .mark = DT_MARK_BAND,
                                           .x = run->col[DT_COL_STEP], .y = top, .n = run->n, .base = below});
        below = top;
    }
    double steady = 0, warm = 0;
    if (below) step_tops(run, below, &steady, &warm);
    steady_axis(c, steady, warm);
}

/* Leave out a chart whose one series is the same number at every record of every run, with nothing
 * marked on it: it says nothing of this run (the loss scale of a run that does not scale its loss) */
static void drop_constant(struct dt_report_page *p, struct dt_chart *c, enum dt_report_col col, const char *why)
{
    double v = NAN;
    for (int r = 0; r < p->nruns; r++)
        for (size_t i = 0; i < p->runs[r].n; i++) {
            double x = p->runs[r].col[col][i];
            if (!isfinite(x)) continue;
            if (isfinite(v) && x != v) return;
            v = x;
        }
    for (int k = 0; k < c->ns; k++)
        if (c->s[k].mark == DT_MARK_RUG) return;
    if (!isfinite(v)) return;
    for (int k = 0; k < p->ncharts; k++)
        if (p->chart[k] == c) {
            memmove(&p->chart[k], &p->chart[k + 1], (size_t)(p->ncharts - k - 1) * sizeof p->chart[0]);
            p->ncharts--;
            dt_report_note(p, dt_report_printf(p, "%s: not drawn: %g at every step (%s)", c->title, v, why));
            return;
        }
}

static void memory(struct dt_report_page *p)
{
    double most = 0;
    for (int r = 0; r < p->nruns; r++)
        for (int c = DT_COL_HOST_MEM; c <= DT_COL_DEV_RESERVED; c++)
            for (size_t i = 0; i < p->runs[r].n; i++)
                if (isfinite(p->runs[r].col[c][i])) most = fmax(most, p->runs[r].col[c][i]);
    bool gib = most >= 1 << 30;
    struct dt_chart *c = chart(p, "memory", "Memory", "step", gib ? "GiB" : "MiB", DT_SCALE_LINEAR);
    if (!c) return;
    c->y_scale = gib ? 1.0 / (1 << 30) : 1.0 / (1 << 20);
    lines(p, c, DT_COL_HOST_MEM, "host peak RSS", DT_MARK_LINE);
    lines(p, c, DT_COL_DEV_ALLOC, "device peak allocated", DT_MARK_DASHED);
    lines(p, c, DT_COL_DEV_RESERVED, "device reserved", DT_MARK_DOTS);
}

/* leave out a chart without data, saying why */
static void drop_empty(struct dt_report_page *p, int from, const char *why)
{
    for (int k = from; k < p->ncharts; k++) {
        if (dt_chart_has_data(p->chart[k])) continue;
        dt_report_note(p, dt_report_printf(p, "%s: not drawn: %s", p->chart[k]->title, why));
        memmove(&p->chart[k], &p->chart[k + 1], (size_t)(p->ncharts - k - 1) * sizeof p->chart[0]);
        p->ncharts--, k--;
    }
}

void dt_report_figures(struct dt_report_page *p)
{
    loss(p, false);
    loss(p, true);
    struct dt_chart *c = chart(p, "lr", "Learning rate", "step", "learning rate", DT_SCALE_LINEAR);
    lines(p, c, DT_COL_LR, "", DT_MARK_LINE);
    c = chart(p, "throughput", "Throughput", "step", "tokens/s", DT_SCALE_LINEAR);
    lines(p, c, DT_COL_TOKENS_PER_S, "", DT_MARK_LINE);
    drop_empty(p, 0, "no record has a value for it");
    int at = p->ncharts;
    c = chart(p, "mfu", "Model FLOPs utilization", "step", "MFU (%)", DT_SCALE_LINEAR);
    if (c) c->y_scale = 100;
    lines(p, c, DT_COL_MFU, "", DT_MARK_LINE);
    drop_empty(p, at, "mfu is null in every record (no peak rate known for the device: set events.peak_tflops)");
    at = p->ncharts;
    c = chart(p, "grad-norm", "Gradient norm", "step", "global gradient norm (log scale)", DT_SCALE_LOG);
    lines(p, c, DT_COL_GRAD_NORM, "", DT_MARK_LINE);
    skipped(p, c);
    c = chart(p, "loss-scale", "Loss scale", "step", "loss scale (log scale)", DT_SCALE_LOG);
    lines(p, c, DT_COL_LOSS_SCALE, "", DT_MARK_LINE);
    skipped(p, c);
    if (c) drop_constant(p, c, DT_COL_LOSS_SCALE, "only 16-mixed scales its loss, and then the scale moves");
    c = chart(p, "step-time", "Step time", "step", "ms per step (slowest rank)", DT_SCALE_LINEAR);
    lines(p, c, DT_COL_STEP_MS, "", DT_MARK_LINE);
    double steady = 0, warm = 0;
    for (int r = 0; r < p->nruns; r++) step_tops(&p->runs[r], p->runs[r].col[DT_COL_STEP_MS], &steady, &warm);
    steady_axis(c, steady, warm);
    memory(p);
    drop_empty(p, at, "no record has a value for it");
    at = p->ncharts;
    for (int r = 0; r < p->nruns; r++) {
        stacked(p, r, &p->runs[r].phases, false, "phases", "Step time by phase");
        stacked(p, r, &p->runs[r].ops, true, "ops", "Step time by op");
    }
    if (p->ncharts == at)
        dt_report_note(p, dt_report_printf(p, "Step time by phase and by op: not recorded (set "
                                              "events.wall_clock_breakdown: true)"));
}
