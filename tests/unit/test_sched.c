/*
 * test_sched.c - schedules against values worked out by hand from the formulas
 * (DeepSpeed's lr_schedules.py, fvcore's param_scheduler.py; REFERENCE.md B3, B4).
 */
#include <math.h>
#include "dt_test.h"
#include "optim/sched.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) <= 1e-12 * fmax(1.0, fabs(b)))

static void deepspeed_warmup_lr(void **state)
{
    struct dt_sched s = {.type = DT_SCHED_WARMUP_LR, .warmup = 100, .total = 1000, .warmup_type = DT_WARMUP_LOG,
                         .warmup_min_lr = 0, .warmup_max_lr = 1e-3};
    NEAR(dt_sched_lr(&s, 0), 0.0);          /* ln(1)/ln(100) */
    NEAR(dt_sched_lr(&s, 9), 0.5e-3);       /* ln(10)/ln(100) = 1/2 */
    NEAR(dt_sched_lr(&s, 99), 1e-3);        /* ln(100)/ln(100) */
    NEAR(dt_sched_lr(&s, 5000), 1e-3);
    s.warmup_type = DT_WARMUP_LINEAR;
    NEAR(dt_sched_lr(&s, 25), 0.25e-3);
    s.warmup = 1; /* DeepSpeed raises warmup_num_steps to 2 */
    NEAR(dt_sched_lr(&s, 1), 0.5e-3);
}

static void deepspeed_warmup_decay_lr(void **state)
{
    struct dt_sched s = {.type = DT_SCHED_WARMUP_DECAY_LR, .warmup = 100, .total = 1100, .warmup_type = DT_WARMUP_LINEAR,
                         .warmup_min_lr = 1e-4, .warmup_max_lr = 1.1e-3};
    NEAR(dt_sched_lr(&s, 50), 1e-4 + 1e-3 * 0.5);
    NEAR(dt_sched_lr(&s, 100), 1.1e-3);           /* (1100-100)/(1100-100) */
    NEAR(dt_sched_lr(&s, 600), 1e-4 + 1e-3 * 0.5); /* (1100-600)/1000 */
    NEAR(dt_sched_lr(&s, 1100), 1e-4);
    NEAR(dt_sched_lr(&s, 2000), 1e-4); /* clamped at 0 */
}

static void deepspeed_warmup_cosine_lr(void **state)
{
    struct dt_sched s = {.type = DT_SCHED_WARMUP_COSINE_LR, .lr = 2e-3, .warmup = 10, .total = 110,
                         .warmup_type = DT_WARMUP_LINEAR, .warmup_min_ratio = 0.5, .cos_min_ratio = 0.1};
    NEAR(dt_sched_lr(&s, 0), 2e-3 * 0.5);
    NEAR(dt_sched_lr(&s, 5), 2e-3 * (0.5 + 0.5 * 0.5));
    NEAR(dt_sched_lr(&s, 59), 2e-3 * (0.1 + 0.9 * 0.5)); /* p = (59-10+1)/100 = 0.5 */
    NEAR(dt_sched_lr(&s, 109), 2e-3 * 0.1);               /* p = 1 */
    NEAR(dt_sched_lr(&s, 500), 2e-3 * 0.1);               /* clamped, no oscillation past total */
}

static void warmup_cosine_linear_step(void **state)
{
    struct dt_sched s = {.type = DT_SCHED_COSINE, .lr = 1.0, .warmup = 10, .total = 110, .min_lr_ratio = 0.1};
    NEAR(dt_sched_lr(&s, 0), 0.1);
    NEAR(dt_sched_lr(&s, 9), 1.0);
    NEAR(dt_sched_lr(&s, 10), 1.0);
    NEAR(dt_sched_lr(&s, 60), 0.55);
    NEAR(dt_sched_lr(&s, 110), 0.1);
    s.type = DT_SCHED_LINEAR;
    NEAR(dt_sched_lr(&s, 60), 0.55);
    s.type = DT_SCHED_CONSTANT;
    NEAR(dt_sched_lr(&s, 60), 1.0);
    s.type = DT_SCHED_STEP;
    s.step_size = 30;
    s.gamma = 0.5;
    NEAR(dt_sched_lr(&s, 59), 0.5);
    NEAR(dt_sched_lr(&s, 60), 0.25);
    s.type = DT_SCHED_MULTISTEP;
    s.milestones = (struct dt_floats){2, {20, 50}};
    NEAR(dt_sched_lr(&s, 19), 1.0);
    NEAR(dt_sched_lr(&s, 20), 0.5);
    NEAR(dt_sched_lr(&s, 50), 0.25);
}

static void fvcore_composite(void **state)
{
    struct dt_sched s = {.type = DT_SCHED_COMPOSITE, .lr = 1.0, .total = 100};
    s.phases = (struct dt_phases){2,
                                  {{DT_PHASE_LINEAR, DT_SCALING_RESCALED, 0.0, 1.0, 0.1},
                                   {DT_PHASE_COSINE, DT_SCALING_RESCALED, 1.0, 0.1, 0.9}}};
    NEAR(dt_sched_lr(&s, 5), 0.5);
    NEAR(dt_sched_lr(&s, 10), 1.0); /* the boundary belongs to the next phase */
    NEAR(dt_sched_lr(&s, 55), 0.55);
    s.phases.p[1].scaling = DT_SCALING_FIXED; /* cosine over global progress */
    NEAR(dt_sched_lr(&s, 55), 0.1 + 0.45 * (1 + cos(M_PI * 0.55)));
}

static void durations_to_steps(void **state)
{
    struct dt_step_units u = {.samples_per_step = 32, .tokens_per_step = 32 * 128, .steps_per_epoch = 250};
    assert_int_equal(dt_duration_steps((struct dt_duration){300, DT_TU_BA}, &u, 0), 300);
    assert_int_equal(dt_duration_steps((struct dt_duration){3200, DT_TU_SP}, &u, 0), 100);
    assert_int_equal(dt_duration_steps((struct dt_duration){3201, DT_TU_SP}, &u, 0), 101);
    assert_int_equal(dt_duration_steps((struct dt_duration){1e6, DT_TU_TOK}, &u, 0), 245);
    assert_int_equal(dt_duration_steps((struct dt_duration){2, DT_TU_EP}, &u, 0), 500);
    assert_int_equal(dt_duration_steps((struct dt_duration){0.1, DT_TU_DUR}, &u, 500), 50);
}

DT_TESTS(T(deepspeed_warmup_lr), T(deepspeed_warmup_decay_lr), T(deepspeed_warmup_cosine_lr),
         T(warmup_cosine_linear_step), T(fvcore_composite), T(durations_to_steps))
