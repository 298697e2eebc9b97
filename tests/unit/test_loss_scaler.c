/*
 * test_loss_scaler.c - DeepSpeed's dynamic loss scaler driven by scripted
 * overflow sequences; every step's scale, event and skip count against tables
 * worked by hand from REFERENCE.md B1 (the post-June-2025 growth rule).
 */
#include <string.h>
#include "core/error.h"
#include "dt_test.h"
#include "precision/loss_scaler.h"

/* 'O' overflow, '.' clean; events: C credit used, R reduced, G grew, - same */
static void drive(const struct dt_loss_scaler_config *c, const char *flags, const double *scales, const char *events,
                  const int *skipped)
{
    struct dt_loss_scaler s;
    dt_loss_scaler_init(&s, c);
    for (int i = 0; flags[i]; i++) {
        enum dt_scale_event ev;
        assert_int_equal(dt_loss_scaler_update(&s, flags[i] == 'O', i, &ev), DT_SUCCESS);
        static const char names[] = {[DT_SCALE_SAME] = '-', [DT_SCALE_CREDIT_USED] = 'C', [DT_SCALE_REDUCED] = 'R',
                                     [DT_SCALE_GREW] = 'G'};
        if (s.scale != scales[i] || names[ev] != events[i] || s.skipped != skipped[i])
            fail_msg("step %d: scale %g event %c skipped %lld, expected %g %c %d", i, s.scale, names[ev],
                     (long long)s.skipped, scales[i], events[i], skipped[i]);
    }
}

static void hysteresis_2_window_5(void **state)
{
    (void)state;
    struct dt_loss_scaler_config c = {0, 4, 5, 2, false, 1};
    /* i0 burns a credit, i1 halves; growth after 5 clean steps (i2..i6) at i7 refills the credit */
    drive(&c, "OO......O.OO", (double[]){16, 8, 8, 8, 8, 8, 8, 16, 16, 16, 8, 4}, "CR-----GC-RR",
          (int[]){1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 4, 5});
}

static void hysteresis_1_window_1_to_the_minimum(void **state)
{
    (void)state;
    struct dt_loss_scaler_config c = {0, 3, 1, 1, false, 2};
    drive(&c, "..OO..OO", (double[]){8, 16, 8, 4, 4, 8, 4, 2}, "-GRR-GRR", (int[]){0, 0, 1, 2, 2, 2, 3, 4});
    /* one more overflow at the minimum ends the run instead of skipping forever */
    struct dt_loss_scaler s;
    dt_loss_scaler_init(&s, &c);
    const char *flags = "..OO..OOO";
    enum dt_scale_event ev;
    for (int i = 0; i < 8; i++) assert_int_equal(dt_loss_scaler_update(&s, flags[i] == 'O', i, &ev), DT_SUCCESS);
    assert_int_equal(dt_loss_scaler_update(&s, true, 8, &ev), DT_ERR_TRAIN);
    assert_string_equal(dt_error_msg(), "dtrun: error: step 9: the gradients overflow fp16 at the minimum loss scale 2 "
                                        "(5 steps skipped so far)\n  hint: the model does not fit fp16's range: use "
                                        "compute.precision bf16-mixed, lower optimizer.lr, or lower "
                                        "compute.loss_scaler.min_loss_scale");
}

static void hysteresis_3_consecutive_on_and_off(void **state)
{
    (void)state;
    /* consecutive: every clean step refills the credits, so isolated overflows never halve */
    struct dt_loss_scaler_config on = {0, 5, 5, 3, true, 1};
    drive(&on, "O.OOO.O", (double[]){32, 32, 32, 32, 16, 16, 16}, "C-CCR-C", (int[]){1, 1, 2, 3, 4, 4, 5});
    struct dt_loss_scaler_config off = {0, 5, 5, 3, false, 1};
    drive(&off, "O.OOO.O", (double[]){32, 32, 32, 16, 8, 8, 4}, "C-CRR-R", (int[]){1, 1, 2, 3, 4, 4, 5});
}

static void growth_from_the_start(void **state)
{
    (void)state;
    /* last_overflow_iter starts at -1: growth at iterations 5 and 10 (the older rule grew at 4 and 9) */
    struct dt_loss_scaler_config c = {0, 2, 5, 2, false, 1};
    drive(&c, "...........", (double[]){4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 16}, "-----G----G",
          (int[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
}

static void static_scale(void **state)
{
    (void)state;
    struct dt_loss_scaler_config c = {128, 16, 1000, 2, false, 1};
    drive(&c, "OO.OOO", (double[]){128, 128, 128, 128, 128, 128}, "------", (int[]){1, 2, 2, 3, 4, 5});
}

DT_TESTS(T(hysteresis_2_window_5), T(hysteresis_1_window_1_to_the_minimum), T(hysteresis_3_consecutive_on_and_off),
         T(growth_from_the_start), T(static_scale))
