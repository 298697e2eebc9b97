/*
 * dt_test.h - helpers shared by the cmocka unit tests. Each test runs in a
 * fresh temporary directory, so config files are written as "t.yaml" and
 * messages name them that way.
 */
#ifndef DT_TEST_H
#define DT_TEST_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "config/config.h"
#include "config/resolve.h"

int dt_test_setup(void **state);
int dt_test_teardown(void **state);
void dt_test_write(const char *name, const char *text);
/* Load `yaml` (NULL: no file) plus NULL-terminated overrides and resolve with
 * `geo` (NULL: one process, no allocation, no GPU). cfg must be freed. */
dt_status_t dt_test_config(struct dt_config *cfg, const struct dt_geometry *geo, const char *yaml, ...);
struct dt_kctx;
/* The CPU kernels' context (kernels.h), one per test process, destroyed at exit. */
struct dt_kctx *dt_test_kctx(void);
struct dt_model;
struct dt_param_source;
/* m given its own buffers (a model without a strategy, model.h), filled from s unless s is NULL (s is
 * closed); the model's random init with seed when s is NULL and seed is not 0 */
void dt_test_own(struct dt_model *m, struct dt_param_source *s, uint64_t seed);
/* Collect what is written to stderr between begin and end (malloc'd). */
void dt_test_stderr_begin(void);
char *dt_test_stderr_end(void);

/* the larger of worst and x, a NaN x counting as infinite: fmax passes over a NaN, so a worst error
 * taken with it cannot fail on a NaN result */
static inline double dt_test_worst(double worst, double x) { return isnan(x) ? INFINITY : x > worst ? x : worst; }

#define DT_TESTS(...)                                                                                   \
    int main(void)                                                                                      \
    {                                                                                                   \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                                                \
        return cmocka_run_group_tests(tests, NULL, NULL);                                               \
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, dt_test_setup, dt_test_teardown)

#endif
