/*
 * loss_scaler.c - see loss_scaler.h. The growth rule is DeepSpeed's after PR
 * #6976 (commit e440506be, June 2025): grow when
 * stable_interval = cur_iter - last_overflow_iter - 1 is positive and a
 * multiple of the window, i.e. after exactly `window` clean steps following
 * an overflow (and at iteration `window` from the start). Before that PR the
 * test was (cur_iter - last_overflow_iter) % window == 0, one step earlier.
 */
#include <math.h>
#include "core/error.h"
#include "precision/loss_scaler.h"

void dt_loss_scaler_init(struct dt_loss_scaler *s, const struct dt_loss_scaler_config *c)
{
    *s = (struct dt_loss_scaler){.dynamic = c->loss_scale == 0,
                                 .scale = c->loss_scale == 0 ? ldexp(1.0, (int)c->initial_scale_power) : c->loss_scale,
                                 .min_scale = c->min_loss_scale,
                                 .window = c->loss_scale_window,
                                 .delayed_shift = c->hysteresis,
                                 .cur_hysteresis = c->hysteresis,
                                 .consecutive = c->consecutive_hysteresis,
                                 .last_overflow_iter = -1};
}

dt_status_t dt_loss_scaler_update(struct dt_loss_scaler *s, bool overflow, int64_t step, enum dt_scale_event *ev)
{
    *ev = DT_SCALE_SAME;
    if (overflow) s->skipped++;
    if (!s->dynamic) {
        s->cur_iter++;
        return DT_SUCCESS;
    }
    if (overflow) {
        if (s->delayed_shift == 1 || s->cur_hysteresis == 1) {
            if (s->scale <= s->min_scale)
                return dt_error(DT_ERR_TRAIN, "dtrun: error: step %lld: the gradients overflow fp16 at the minimum "
                                "loss scale %g (%lld steps skipped so far)\n  hint: the model does not fit fp16's "
                                "range: use compute.precision bf16-mixed, lower optimizer.lr, or lower "
                                "compute.loss_scaler.min_loss_scale", (long long)step + 1, s->min_scale,
                                (long long)s->skipped);
            s->scale = s->scale / 2 > s->min_scale ? s->scale / 2 : s->min_scale;
            *ev = DT_SCALE_REDUCED;
        } else {
            s->cur_hysteresis--;
            *ev = DT_SCALE_CREDIT_USED;
        }
        s->last_overflow_iter = s->cur_iter;
    } else {
        if (s->consecutive) s->cur_hysteresis = s->delayed_shift;
        int64_t stable = s->cur_iter - s->last_overflow_iter - 1;
        if (stable > 0 && stable % s->window == 0) {
            if (!s->consecutive) s->cur_hysteresis = s->delayed_shift;
            s->scale *= 2;
            *ev = DT_SCALE_GREW;
        }
    }
    s->cur_iter++;
    return DT_SUCCESS;
}
