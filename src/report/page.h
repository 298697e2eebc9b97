/*
 * page.h - the pieces the report page (report.h) is made of, and what they share: the runs read,
 * their colors and legend names, the step and token ranges every chart spans, the charts chosen
 * (figures.c), notes for the page, and the memory the charts point into.
 */
#ifndef DT_REPORT_PAGE_H
#define DT_REPORT_PAGE_H

#include <stdbool.h>
#include "report/chart.h"
#include "report/run.h"
#include "report/svg.h"

#define DT_REPORT_CHARTS_MAX 40

struct dt_report_page {
    struct dt_report_run *runs;
    int nruns;
    const char *const *color; /* a run's color in every chart */
    char **label;             /* a run's name in legends: its run_name, with its directory where two share one */
    double step_hi, tokens_hi;
    struct dt_chart *chart[DT_REPORT_CHARTS_MAX];
    int ncharts;
    char **note; /* about the page as a whole: charts left out, and why */
    int nnotes;
    void **owned; /* series and labels the charts point into */
    int nowned;
    bool oom;
};

/* The charts of the runs, in page order (figures.c); the timeline is drawn apart (timeline.h). */
void dt_report_figures(struct dt_report_page *p);
/* The sections under the charts: each run's lives, its lifecycle events, its config (tables.c). */
void dt_report_tables(const struct dt_report_page *p, struct dt_out *o);
/* mem, owned by the page from now on (NULL: out of memory, noted); returns it */
void *dt_report_keep(struct dt_report_page *p, void *mem);
/* formatted text owned by the page */
#define dt_report_printf(p, ...) ((char *)dt_report_keep((p), dt_out_format(__VA_ARGS__)))
void dt_report_note(struct dt_report_page *p, char *text);

#endif
