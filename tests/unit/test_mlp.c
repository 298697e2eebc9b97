/*
 * test_mlp.c - the MLP's gradients against central finite differences of its
 * loss, for classification and regression, on awkward widths; and the teacher
 * source's closed-form floor.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/rng.h"
#include "data/teacher.h"
#include "dt_test.h"
#include "model/mlp.h"

static void fd(bool regression)
{
    struct dt_mlp_config c = {.in = 5, .out = 3, .nhidden = 2, .hidden = {7, 6}, .regression = regression};
    int B = 4;
    struct dt_model *m;
    assert_int_equal(dt_mlp_create(&c, &dt_kernels_cpu, dt_test_kctx(), B, &m), DT_SUCCESS);
    dt_test_own(m, NULL, 7);
    float x[20], y[12];
    int32_t labels[4] = {2, 0, 1, 2};
    struct dt_rng r = dt_rng_make(1, 2);
    for (int i = 0; i < 20; i++) x[i] = dt_rng_normal(&r);
    for (int i = 0; i < 12; i++) y[i] = dt_rng_normal(&r);
    struct dt_batch b = {.B = B, .T = 1, .x = x, .labels = labels, .y = y};
    memset(m->grads, 0, m->nparams * sizeof(float));
    m->iface.forward(m, &b, 1.0f, NULL);
    m->iface.backward(m);
    double err = 0, scale = 0;
    const float eps = 1e-2f;
    for (size_t i = 0; i < m->nparams; i++) {
        float save = m->params[i];
        m->params[i] = save + eps;
        double lp = m->iface.forward(m, &b, 0.0f, NULL);
        m->params[i] = save - eps;
        double lm = m->iface.forward(m, &b, 0.0f, NULL);
        m->params[i] = save;
        err = dt_test_worst(err, fabs((lp - lm) / (2 * eps) - m->grads[i]));
        scale = fmax(scale, fabs(m->grads[i]));
    }
    print_message("# mlp %s: %zu parameters, max error %.2e (relative %.2e)\n",
                  regression ? "regression" : "classification", m->nparams, err, err / scale);
    assert_true(err / scale < 1e-2);
    dt_model_free(m);
}

static void classification_gradients(void **state) { fd(false); }
static void regression_gradients(void **state) { fd(true); }

static void teacher(void **state)
{
    struct dt_teacher t;
    assert_int_equal(dt_teacher_init(&t, 6, 3, true, 0.25, 9), 0);
    assert_true(dt_teacher_loss_floor(&t) == 0.0625);
    float x[2 * 6], y[2 * 3], x2[6], y2[3];
    dt_teacher_batch(&t, 0, 10, 2, x, NULL, y);
    dt_teacher_batch(&t, 0, 11, 1, x2, NULL, y2);
    assert_memory_equal(x + 6, x2, sizeof x2); /* row 11 is row 11 wherever it is read */
    assert_memory_equal(y + 3, y2, sizeof y2);
    dt_teacher_free(&t);
    assert_int_equal(dt_teacher_init(&t, 6, 3, false, 0, 9), 0);
    int32_t labels[64];
    float xs[64 * 6];
    dt_teacher_batch(&t, 0, 0, 64, xs, labels, NULL);
    int seen[3] = {0};
    for (int i = 0; i < 64; i++) seen[labels[i]]++;
    assert_true(seen[0] && seen[1] && seen[2]); /* every class occurs */
    dt_teacher_free(&t);
}

DT_TESTS(T(classification_gradients), T(regression_gradients), T(teacher))
