/*
 * test_kernels_fd.c - every CPU kernel's backward against central finite
 * differences of L = sum(out * R) for a random R (ggml's MODE_GRAD idea), on
 * small awkward shapes. Error: max |numeric - analytic| / max |analytic|.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/rng.h"
#include "dt_test.h"
#include "kernels/kernels.h"

static const struct dt_kernels *K = &dt_kernels_cpu;

static float *rnd(size_t n, float scale, uint64_t stream)
{
    float *x = malloc(n * sizeof *x);
    struct dt_rng r = dt_rng_make(42, stream);
    for (size_t i = 0; i < n; i++) x[i] = scale * dt_rng_normal(&r);
    return x;
}

/* The forward under test writes `nout` floats into out from the inputs it closes over. */
struct fd {
    void (*forward)(struct fd *f, float *out);
    size_t nout;
    const float *R;
    void *ctx;
};

static double objective(struct fd *f)
{
    float *out = calloc(f->nout, sizeof *out);
    f->forward(f, out);
    double s = 0;
    for (size_t i = 0; i < f->nout; i++) s += (double)out[i] * f->R[i];
    free(out);
    return s;
}

static void check(struct fd *f, const char *name, float *x, size_t n, const float *analytic, double tol)
{
    double err = 0, scale = 1e-6;
    const float eps = 1e-2f;
    for (size_t i = 0; i < n; i++) {
        float save = x[i];
        x[i] = save + eps;
        double lp = objective(f);
        x[i] = save - eps;
        double lm = objective(f);
        x[i] = save;
        double num = (lp - lm) / (2 * eps);
        err = fmax(err, fabs(num - analytic[i]));
        scale = fmax(scale, fabs(analytic[i]));
    }
    print_message("# %-22s max error %.2e (relative %.2e)\n", name, err, err / scale);
    if (err / scale > tol) fail_msg("%s: finite differences disagree: relative error %.3g > %.3g", name, err / scale, tol);
}

/* ---------------------------------------------------------------- matmul */
struct mm {
    float *inp, *w, *b;
    int BT, C, OC;
};
static void mm_fwd(struct fd *f, float *out)
{
    struct mm *m = f->ctx;
    K->matmul_forward(out, m->inp, m->w, m->b, m->BT, m->C, m->OC);
}
static void matmul(void **state)
{
    struct mm m = {rnd(5 * 7, 1, 1), rnd(3 * 7, 1, 2), rnd(3, 1, 3), 5, 7, 3};
    float *R = rnd(5 * 3, 1, 4);
    float *di = calloc(35, 4), *dw = calloc(21, 4), *db = calloc(3, 4);
    K->matmul_backward(di, dw, db, R, m.inp, m.w, 5, 7, 3);
    struct fd f = {mm_fwd, 15, R, &m};
    check(&f, "matmul dinp", m.inp, 35, di, 1e-3);
    check(&f, "matmul dweight", m.w, 21, dw, 1e-3);
    check(&f, "matmul dbias", m.b, 3, db, 1e-3);
    free(m.inp), free(m.w), free(m.b), free(R), free(di), free(dw), free(db);
}

/* ---------------------------------------------------------------- layernorm */
struct ln {
    float *inp, *w, *b, *mean, *rstd;
    int BT, C;
};
static void ln_fwd(struct fd *f, float *out)
{
    struct ln *l = f->ctx;
    K->layernorm_forward(out, l->mean, l->rstd, l->inp, l->w, l->b, l->BT, l->C);
}
static void layernorm(void **state)
{
    int BT = 4, C = 9;
    struct ln l = {rnd(BT * C, 1, 5), rnd(C, 1, 6), rnd(C, 1, 7), calloc(BT, 4), calloc(BT, 4), BT, C};
    float *R = rnd(BT * C, 1, 8), *out = calloc(BT * C, 4);
    float *di = calloc(BT * C, 4), *dw = calloc(C, 4), *db = calloc(C, 4);
    K->layernorm_forward(out, l.mean, l.rstd, l.inp, l.w, l.b, BT, C);
    K->layernorm_backward(di, dw, db, R, l.inp, l.w, l.mean, l.rstd, BT, C);
    struct fd f = {ln_fwd, (size_t)BT * C, R, &l};
    check(&f, "layernorm dinp", l.inp, BT * C, di, 5e-3);
    check(&f, "layernorm dweight", l.w, C, dw, 1e-3);
    check(&f, "layernorm dbias", l.b, C, db, 1e-3);
    free(l.inp), free(l.w), free(l.b), free(l.mean), free(l.rstd), free(R), free(out), free(di), free(dw), free(db);
}

/* ---------------------------------------------------------------- attention */
struct at {
    float *qkv, *att;
    int B, T, C, NH;
};
static void at_fwd(struct fd *f, float *out)
{
    struct at *a = f->ctx;
    K->attention_forward(out, a->att, a->qkv, a->B, a->T, a->C, a->NH);
}
static void attention(void **state)
{
    int B = 2, T = 5, C = 6, NH = 2;
    struct at a = {rnd((size_t)B * T * 3 * C, 1, 9), calloc((size_t)B * NH * T * T, 4), B, T, C, NH};
    float *R = rnd((size_t)B * T * C, 1, 10), *out = calloc((size_t)B * T * C, 4);
    float *dqkv = calloc((size_t)B * T * 3 * C, 4), *scratch = calloc(dt_kernels_attention_scratch(T), 4);
    K->attention_forward(out, a.att, a.qkv, B, T, C, NH);
    K->attention_backward(dqkv, R, a.qkv, a.att, scratch, B, T, C, NH);
    struct fd f = {at_fwd, (size_t)B * T * C, R, &a};
    check(&f, "attention dqkv", a.qkv, (size_t)B * T * 3 * C, dqkv, 5e-3);
    free(a.qkv), free(a.att), free(R), free(out), free(dqkv), free(scratch);
}

/* ---------------------------------------------------------------- gelu */
static void gelu_fwd(struct fd *f, float *out) { K->gelu_forward(out, f->ctx, f->nout); }
static void gelu(void **state)
{
    float *x = rnd(40, 2, 11), *R = rnd(40, 1, 12), *dx = calloc(40, 4);
    K->gelu_backward(dx, x, R, 40);
    struct fd f = {gelu_fwd, 40, R, x};
    check(&f, "gelu dinp", x, 40, dx, 1e-3);
    free(x), free(R), free(dx);
}

/* ---------------------------------------------------------------- embedding */
struct em {
    int32_t *tok;
    float *wte, *wpe;
    int B, T, C;
};
static void em_fwd(struct fd *f, float *out)
{
    struct em *e = f->ctx;
    K->encoder_forward(out, e->tok, e->wte, e->wpe, e->B, e->T, e->C);
}
static void embedding(void **state)
{
    int32_t tok[6] = {3, 1, 3, 0, 2, 3}; /* repeats: gradients of a row add up */
    struct em e = {tok, rnd(4 * 5, 1, 13), rnd(3 * 5, 1, 14), 2, 3, 5};
    float *R = rnd(30, 1, 15), *dte = calloc(20, 4), *dpe = calloc(15, 4);
    K->encoder_backward(dte, dpe, R, tok, 2, 3, 5);
    struct fd f = {em_fwd, 30, R, &e};
    check(&f, "embedding dwte", e.wte, 20, dte, 1e-3);
    check(&f, "embedding dwpe", e.wpe, 15, dpe, 1e-3);
    free(e.wte), free(e.wpe), free(R), free(dte), free(dpe);
}

/* ---------------------------------------------------------------- softmax + cross-entropy */
struct sx {
    float *logits;
    int32_t *targets;
    int BT, V;
};
/* L = sum of losses: one output per row, R = 1 */
static void sx_fwd(struct fd *f, float *out)
{
    struct sx *s = f->ctx;
    float *copy = malloc((size_t)s->BT * s->V * 4);
    memcpy(copy, s->logits, (size_t)s->BT * s->V * 4);
    K->softmax_xent(out, copy, s->targets, 0.0f, s->BT, s->V);
    free(copy);
}
static void softmax_xent(void **state)
{
    int BT = 3, V = 7;
    int32_t targets[3] = {6, 0, 3};
    struct sx s = {rnd((size_t)BT * V, 2, 16), targets, BT, V};
    float ones[3] = {1, 1, 1}, losses[3];
    float *grad = malloc((size_t)BT * V * 4);
    memcpy(grad, s.logits, (size_t)BT * V * 4);
    K->softmax_xent(losses, grad, targets, 1.0f, BT, V); /* dloss 1: gradient of the sum */
    struct fd f = {sx_fwd, (size_t)BT, ones, &s};
    check(&f, "softmax_xent dlogits", s.logits, (size_t)BT * V, grad, 1e-3);
    free(s.logits), free(grad);
}

/* the reductions the optimizer and the loss scaler use, against closed forms */
static void reductions(void **state)
{
    size_t n = 100003; /* odd, so no vector width divides it */
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (i % 2) ? 3.0f : -4.0f;
    assert_true(K->sumsq(x, n) == 50002.0 * 16 + 50001.0 * 9); /* 50002 even indices hold -4 */
    assert_int_equal(K->nonfinite(x, n), 0);
    x[7] = INFINITY;
    x[n - 1] = NAN;
    x[500] = -INFINITY;
    assert_int_equal(K->nonfinite(x, n), 3);
    float out[3] = {1, 2, 3}, target[3] = {1, 0, 6}, d[3];
    assert_true(K->mse(d, out, target, 0.5f, 3) == (0 + 4 + 9) / 3.0f);
    assert_true(d[1] == 2.0f && d[2] == -3.0f); /* 2 (out - target) * 0.5 */
    free(x);
}

DT_TESTS(T(matmul), T(layernorm), T(attention), T(gelu), T(embedding), T(softmax_xent), T(reductions))
