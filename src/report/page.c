/*
 * page.c - `dtrun report` (report.h): read the runs, lay the page out and write it whole.
 *
 * The layout is fixed so that a test can find every chart in a screenshot: a header whose height
 * follows from its number of lines (each one line high, cut with an ellipsis when too long), then
 * the charts, DT_CHART_W x DT_CHART_H each, two a row, at absolute positions; the positions go in
 * the manifest, an HTML comment at the end of the page (chart.h). The page is XHTML-compatible
 * markup with no script and no URL to fetch.
 */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/error.h"
#include "report/page.h"
#include "report/report.h"
#include "report/timeline.h"

#define PAD 16
#define HEADER_LINE 20
#define HEADER_TITLE 38

static const char *const run_color[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                        "#ff7f0e", "#17becf", "#e377c2", "#8c564b"};
#define NCOLORS (int)(sizeof run_color / sizeof run_color[0])

static const char style[] =
    "body{margin:0;font:13px/1.4 sans-serif;color:#222;background:#fff}\n"
    "header{box-sizing:border-box;padding:4px 16px 0;overflow:hidden}\n"
    "h1{font-size:18px;line-height:34px;height:34px;margin:0;white-space:nowrap;overflow:hidden}\n"
    "h2{font-size:15px;margin:18px 0 6px}\n"
    ".line{height:20px;line-height:20px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}\n"
    ".note{color:#8a4b00}\n"
    ".swatch{display:inline-block;width:11px;height:11px;margin-right:5px;vertical-align:-1px}\n"
    "svg.chart{position:absolute;background:#fff}\n"
    "svg text{font:11px sans-serif;fill:#444}\n"
    "svg .title{font-size:13px;font-weight:bold;fill:#222}\n"
    "svg .grid{stroke:#ececec;fill:none}\n"
    "svg .frame{fill:none;stroke:#aaa}\n"
    "svg .rule{stroke:#666;stroke-dasharray:4 3;fill:none}\n"
    "svg .rulelabel{font-size:10px;fill:#555}\n"
    "section{padding:0 16px 24px}\n"
    "td.sample{white-space:pre-wrap;font-family:monospace}\n"
    "table{border-collapse:collapse}\n"
    "td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}\n"
    "tr.bad td{color:#a00}\n"
    "pre{background:#f6f6f6;padding:8px;font-size:12px;overflow:auto}\n";

void *dt_report_keep(struct dt_report_page *p, void *mem)
{
    void **owned = mem ? realloc(p->owned, (size_t)(p->nowned + 1) * sizeof *owned) : NULL;
    if (!owned) {
        free(mem);
        p->oom = true;
        return NULL;
    }
    p->owned = owned;
    return p->owned[p->nowned++] = mem;
}


void dt_report_note(struct dt_report_page *p, char *text)
{
    char **n = text ? realloc(p->note, (size_t)(p->nnotes + 1) * sizeof *n) : NULL;
    if (!n) {
        p->oom = true;
        return;
    }
    p->note = n;
    p->note[p->nnotes++] = text;
}

/* The legend names: run_name, and where two runs share one, their directories too */
static void labels(struct dt_report_page *p)
{
    for (int r = 0; r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        const char *name = run->name ? run->name : "(unnamed)";
        bool shared = false;
        for (int q = 0; q < p->nruns; q++)
            shared |= q != r && p->runs[q].name && !strcmp(p->runs[q].name, name);
        p->label[r] = shared ? dt_report_printf(p, "%s (%s)", name, run->dir) : dt_report_printf(p, "%s", name);
        if (!p->label[r]) p->label[r] = (char *)"?";
    }
}

/* the x ranges every chart shares: steps (metrics, evals, events) and tokens */
static void ranges(struct dt_report_page *p)
{
    p->step_hi = p->tokens_hi = 1;
    for (int r = 0; r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        for (size_t i = 0; i < run->n; i++) {
            p->step_hi = fmax(p->step_hi, run->col[DT_COL_STEP][i]);
            if (isfinite(run->col[DT_COL_TOKENS][i])) p->tokens_hi = fmax(p->tokens_hi, run->col[DT_COL_TOKENS][i]);
        }
        for (size_t i = 0; i < run->neval; i++) p->step_hi = fmax(p->step_hi, run->eval_step[i]);
        for (size_t i = 0; i < run->nev; i++) p->step_hi = fmax(p->step_hi, (double)run->ev[i].step);
    }
}

static void header_line(struct dt_out *o, const char *cls, const char *text)
{
    dt_out_printf(o, "<div class=\"line%s\" title=\"", cls);
    dt_out_text(o, text);
    dt_out_printf(o, "\">");
    dt_out_text(o, text);
    dt_out_printf(o, "</div>\n");
}

/* the header: the title, a line per run, a line per note; returns its height */
static int header(const struct dt_report_page *p, struct dt_out *o)
{
    int lines = p->nruns + p->nnotes;
    for (int r = 0; r < p->nruns; r++) lines += p->runs[r].nnotes;
    int h = HEADER_TITLE + HEADER_LINE * lines + 8;
    dt_out_printf(o, "<header style=\"height:%dpx\">\n<h1>dtrun report: ", h);
    for (int r = 0; r < p->nruns; r++) {
        dt_out_text(o, p->label[r]);
        if (r < p->nruns - 1) dt_out_printf(o, " vs ");
    }
    dt_out_printf(o, "</h1>\n");
    for (int r = 0; r < p->nruns; r++) {
        const struct dt_report_run *run = &p->runs[r];
        const struct dt_report_life *last = run->nlives ? &run->life[run->nlives - 1] : NULL;
        dt_out_printf(o, "<div class=\"line\"><span class=\"swatch\" style=\"background:%s\"></span>", p->color[r]);
        dt_out_text(o, p->label[r]);
        dt_out_printf(o, ": ");
        dt_out_text(o, run->events_path);
        dt_out_printf(o, ": %zu records, to step %lld, %d li%s; ", run->records,
                      run->n ? (long long)run->col[DT_COL_STEP][run->n - 1] : 0LL, run->nlives,
                      run->nlives == 1 ? "fe" : "ves");
        dt_out_text(o, last && last->ended ? last->ended : "no end recorded: still running, or killed");
        dt_out_printf(o, "</div>\n");
    }
    for (int r = 0; r < p->nruns; r++)
        for (int i = 0; i < p->runs[r].nnotes; i++) header_line(o, " note", p->runs[r].note[i]);
    for (int i = 0; i < p->nnotes; i++) header_line(o, " note", p->note[i]);
    dt_out_printf(o, "</header>\n");
    return h;
}

/* the charts, two a row under the header, and the timeline after the two loss charts */
static void charts(struct dt_report_page *p, int top, struct dt_out *o, struct dt_out *manifest)
{
    int n = p->ncharts + 1, at = p->ncharts < 2 ? p->ncharts : 2;
    for (int s = 0; s < n; s++) {
        int left = PAD + (s % 2) * (DT_CHART_W + PAD), y = top + (s / 2) * (DT_CHART_H + PAD);
        if (s == at) dt_report_timeline(o, manifest, left, y, p->runs, p->nruns, p->color, 0, p->step_hi);
        else dt_chart_render(p->chart[s < at ? s : s - 1], left, y, o, manifest);
    }
    /* room for the absolutely placed charts in the flow, so the sections come after them */
    dt_out_printf(o, "<div style=\"height:%dpx\"></div>\n", ((n + 1) / 2) * (DT_CHART_H + PAD));
}

static dt_status_t write_whole(const char *path, const struct dt_out *page)
{
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dirname(dir), strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return dt_error(DT_ERR_SYSTEM, "%s: error: cannot write the report: %s\n  hint: give --out a file in a "
                        "directory you can write", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    bool ok = f && fchmod(fd, 0644) == 0 && fwrite(page->p, 1, page->len, f) == page->len;
    int err = errno;
    if (f ? fclose(f) != 0 : close(fd) != 0) ok = false, err = errno;
    if (ok && rename(tmp, path) != 0) ok = false, err = errno;
    if (!ok) {
        unlink(tmp);
        return dt_error(DT_ERR_SYSTEM, "%s: error: cannot write the report: %s\n  hint: give --out a file in a "
                        "directory you can write, with room for it", path, strerror(err));
    }
    return DT_SUCCESS;
}

static void page_free(struct dt_report_page *p)
{
    for (int r = 0; r < p->nruns; r++) dt_report_run_free(&p->runs[r]);
    free(p->runs);
    free(p->label);
    for (int i = 0; i < p->nowned; i++) free(p->owned[i]);
    free(p->owned);
    free(p->note);
}

dt_status_t dt_report(int nruns, char *const *dirs, const char *out, FILE *msg)
{
    struct dt_report_page p = {.color = run_color, .nruns = nruns};
    p.runs = calloc((size_t)nruns, sizeof *p.runs);
    p.label = calloc((size_t)nruns, sizeof *p.label);
    if (!p.runs || !p.label) {
        page_free(&p);
        return dt_error(DT_ERR_NOMEM, "dtrun: error: out of memory");
    }
    if (nruns > NCOLORS) {
        page_free(&p);
        return dt_error(DT_ERR_USAGE, "dtrun: error: %d runs to compare; one page shows at most %d\n  hint: compare "
                        "fewer runs at a time", nruns, NCOLORS);
    }
    dt_status_t rc = DT_SUCCESS;
    for (int r = 0; r < nruns && rc == DT_SUCCESS; r++) rc = dt_report_run_read(dirs[r], &p.runs[r]);
    char path[4200];
    struct stat st;
    if (out) snprintf(path, sizeof path, "%s", out);
    else if (nruns == 1 && stat(dirs[0], &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(path, sizeof path, "%s/report.html", dirs[0]);
    else snprintf(path, sizeof path, "report.html");
    struct dt_out o = {0}, manifest = {0};
    if (rc == DT_SUCCESS) {
        labels(&p);
        ranges(&p);
        dt_report_figures(&p);
        dt_out_printf(&o, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
                      "<meta charset=\"utf-8\"/>\n<title>dtrun report: ");
        for (int r = 0; r < nruns; r++) {
            dt_out_text(&o, p.label[r]);
            if (r < nruns - 1) dt_out_printf(&o, " vs ");
        }
        dt_out_printf(&o, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", style);
        int top = header(&p, &o);
        charts(&p, top, &o, &manifest);
        dt_report_tables(&p, &o);
        dt_out_printf(&o, "<!-- dtrun-report-charts: id left top width height plot_left plot_top plot_width "
                      "plot_height\n%s-->\n</body>\n</html>\n", manifest.p ? manifest.p : "");
        if (o.oom || manifest.oom || p.oom) rc = dt_error(DT_ERR_NOMEM, "%s: error: out of memory making the report",
                                                          path);
    }
    if (rc == DT_SUCCESS) rc = write_whole(path, &o);
    if (rc == DT_SUCCESS) fprintf(msg, "dtrun: report of %d run%s written to %s (%.0f KiB)\n", nruns,
                                  nruns > 1 ? "s" : "", path, (double)o.len / 1024);
    dt_out_free(&o);
    dt_out_free(&manifest);
    page_free(&p);
    return rc;
}
