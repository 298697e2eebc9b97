/*
 * breakdown.h - the trainer's use of the op profile (kernels/profile.h) when
 * events.wall_clock_breakdown is on: ms per step of each op for a metrics record, and at the end
 * of the run one table, ops sorted by time, with their share of the mean step and what was spent
 * outside them (communication waits, the host's own work).
 */
#ifndef DT_BREAKDOWN_H
#define DT_BREAKDOWN_H

#include <stdbool.h>
#include <stdint.h>
#include "kernels/kernels.h"

/* ms per step of each op over the steps since the last call (ms_per_step holds
 * dt_kprofile_of(kc)->n values), and start the next interval; in_total false: leave these steps
 * out of the run's table (the first step, when it is reported alone: page faults, JIT) */
void dt_breakdown_interval(struct dt_kctx *kc, int64_t steps, double *ms_per_step, bool in_total);
/* the table over the whole run: steps trained in train_s seconds */
void dt_breakdown_log(struct dt_kctx *kc, int64_t steps, double train_s);

#endif
