/*
 * sched.h - learning-rate schedules, as a pure function of the optimizer step.
 *
 * `it` is the 0-based index of the step being taken (DeepSpeed's
 * last_batch_iteration after its increment). The trainer does not advance it
 * on a skipped (fp16 overflow) step, as DeepSpeed does not (REFERENCE.md B1).
 *
 *   constant, linear, cosine, step, multistep: a linear warmup lr*(it+1)/warmup,
 *     then constant; linear or cosine decay to lr*min_lr_ratio at `total`;
 *     lr*gamma^floor(it/step_size); lr*gamma^(milestones passed).
 *   warmup_lr, warmup_decay_lr, warmup_cosine_lr: DeepSpeed's WarmupLR,
 *     WarmupDecayLR, WarmupCosineLR (runtime/lr_schedules.py; REFERENCE.md B3).
 *   composite: fvcore's CompositeParamScheduler over where = it/total (B4).
 */
#ifndef DT_SCHED_H
#define DT_SCHED_H

#include <stdint.h>
#include "config/config.h"

struct dt_sched {
    int type; /* enum dt_sched_type */
    double lr;
    int64_t warmup, total, step_size;
    double min_lr_ratio, gamma;
    int warmup_type;
    double warmup_min_lr, warmup_max_lr, warmup_min_ratio, cos_min_ratio;
    struct dt_floats milestones;
    struct dt_phases phases;
};

/* What one optimizer step consumes, to turn durations into steps. */
struct dt_step_units {
    int64_t samples_per_step, tokens_per_step;
    int64_t steps_per_epoch; /* 0: no epochs (endless source) */
};

/* Steps in a duration, rounded up; `dur` units are fractions of total_steps. */
int64_t dt_duration_steps(struct dt_duration d, const struct dt_step_units *u, int64_t total_steps);
void dt_sched_from_config(struct dt_sched *s, const struct dt_config *cfg, const struct dt_step_units *u,
                          int64_t total_steps);
double dt_sched_lr(const struct dt_sched *s, int64_t it);

#endif
