/*
 * timeline.h - the lifecycle chart: a row per kind of event (starts and resumes on their world,
 * checkpoints saved and failed, preemptions, tasks killed from outside, the end), each event a
 * mark at its step on the same step axis as the curves, in its run's color, a failure as a cross.
 * Each mark's tooltip says what happened; of events that fall in the same pixel column one mark
 * stands for all (a checkpoint every 10 steps of a 100k-step run is 10,000 of them).
 */
#ifndef DT_REPORT_TIMELINE_H
#define DT_REPORT_TIMELINE_H

#include "report/run.h"
#include "report/svg.h"

void dt_report_timeline(struct dt_out *o, struct dt_out *manifest, int left, int top,
                        const struct dt_report_run *runs, int nruns, const char *const *colors, double xlo, double xhi);

#endif
