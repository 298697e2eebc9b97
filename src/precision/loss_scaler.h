/*
 * loss_scaler.h - DeepSpeed's loss scaler for fp16 (REFERENCE.md B1), exactly:
 * loss_scale 0 means dynamic, starting at 2^initial_scale_power; an overflow
 * halves the scale once `hysteresis` overflows have used up their credits
 * (or every time, with hysteresis 1), never below min_loss_scale; the scale
 * doubles after loss_scale_window clean steps since the last overflow, which
 * also refills the credits (with consecutive_hysteresis every clean step
 * refills them). A non-zero loss_scale is static. The caller skips the
 * optimizer step (and the LR schedule) whenever update() was told of an
 * overflow; an overflow at the minimum scale with no credit left is an error,
 * not an endless stream of skipped steps (REFERENCE.md problems 28-30).
 */
#ifndef DT_LOSS_SCALER_H
#define DT_LOSS_SCALER_H

#include <stdbool.h>
#include <stdint.h>
#include "core/status.h"

struct dt_loss_scaler_config {
    double loss_scale; /* 0: dynamic */
    int64_t initial_scale_power, loss_scale_window, hysteresis;
    bool consecutive_hysteresis;
    double min_loss_scale;
};

/* what the last update did, for a log line only when something changed */
enum dt_scale_event { DT_SCALE_SAME, DT_SCALE_CREDIT_USED, DT_SCALE_REDUCED, DT_SCALE_GREW };

struct dt_loss_scaler {
    bool dynamic;
    double scale, min_scale;
    int64_t window, delayed_shift, cur_hysteresis;
    bool consecutive;
    int64_t cur_iter, last_overflow_iter;
    int64_t skipped; /* optimizer steps skipped for overflow */
};

void dt_loss_scaler_init(struct dt_loss_scaler *s, const struct dt_loss_scaler_config *c);
/* Once per optimizer step, with the step's global overflow flag. Fails (DT_ERR_TRAIN) on an
 * overflow that would have to go below the minimum scale. */
dt_status_t dt_loss_scaler_update(struct dt_loss_scaler *s, bool overflow, int64_t step, enum dt_scale_event *ev);

#endif
