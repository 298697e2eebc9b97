/*
 * report.h - `dtrun report RUN_DIR... [--out FILE.html]`: one self-contained HTML page (inline
 * SVG drawn here, CSS inline, no script, nothing fetched) showing one run, or several overlaid,
 * from what they left in their run.dir: loss against steps and tokens with the synthetic source's
 * best possible loss, learning rate, tokens/s, MFU, gradient norm and loss scale with the skipped
 * steps, step time (by phase and by op when the breakdown was on), memory, the lifecycle events on
 * the same step axis, the lives of a resumed run, and the config (for several runs, the keys that
 * differ). Curves are thinned to the pixel columns (min and max of each kept), so a 100k-step run
 * makes a page well under 1 MB.
 */
#ifndef DT_REPORT_H
#define DT_REPORT_H

#include <stdio.h>
#include "core/status.h"

/* Write the page of the runs in dirs (a run.dir, or an events file) to out (NULL: report.html in
 * the run.dir of a single run, else in the current directory) through a temporary file in the same
 * directory, renamed into place: there is a whole page or none. Its path goes to msg. */
dt_status_t dt_report(int nruns, char *const *dirs, const char *out, FILE *msg);

#endif
