/*
 * test_optim.c - the optimizers against updates worked out by hand on a model
 * of two views: "w" (a matrix: weight decay applies) and "b" (a bias: it does
 * not). Every step sees the same gradient, so each expected value is a short
 * closed form, written out next to it.
 *   SGD with momentum mu: buf_1 = g, buf_t = mu buf_{t-1} + g (PyTorch); the step is lr buf_t,
 *   or lr (g + mu buf_t) with Nesterov; dtrun's SGD decays decoupled, p *= 1 - lr wd, as AdamW does.
 *   Adam folds an L2 penalty wd p into the gradient before the moments; AdamW decays the
 *   parameter itself (p *= 1 - lr wd) and leaves the moments alone.
 */
#include <math.h>
#include "core/dtype.h"
#include "dt_test.h"
#include "optim/optimizer.h"

#define NEAR(a, b) assert_true(fabs((double)(a) - (b)) <= 2e-7 * fmax(1.0, fabs(b)))

/* w: 2 elements, gradient (1, -2); b: 1 element, gradient 0.5; every parameter starts at 1 */
struct tiny {
    struct dt_model m;
    struct dt_param_view views[2];
    float p[3], g[3];
};

static void tiny_init(struct tiny *t)
{
    *t = (struct tiny){.views = {{"w", 0, 2, true, 1, {2}}, {"b", 2, 1, false, 1, {1}}}, .p = {1, 1, 1}};
    t->m = (struct dt_model){.k = &dt_kernels_cpu, .kc = dt_test_kctx(), .params = t->p, .grads = t->g, .nparams = 3, .views = t->views,
                             .nviews = 2};
}

/* steps optimizer steps of o on t, each with the same gradient */
static void train(struct tiny *t, const struct dt_optim_config *c, int steps, float lr)
{
    struct dt_optimizer o;
    assert_int_equal(dt_optimizer_init(&o, c, &dt_kernels_cpu, dt_test_kctx(), 3), DT_SUCCESS);
    for (int i = 0; i < steps; i++) {
        t->g[0] = 1, t->g[1] = -2, t->g[2] = 0.5f; /* Adam's L2 folds the penalty into the buffer */
        dt_optimizer_step(&o, &t->m, lr, 1.0f);
    }
    dt_optimizer_free(&o);
}

static void sgd_momentum(void **state)
{
    struct tiny t;
    tiny_init(&t);
    train(&t, &(struct dt_optim_config){.kind = DT_OPT_SGD, .momentum = 0.9f}, 3, 0.1f);
    /* buf = g, 1.9 g, 2.71 g: p = 1 - 0.1 (1 + 1.9 + 2.71) g = 1 - 0.561 g */
    NEAR(t.p[0], 1 - 0.561);
    NEAR(t.p[1], 1 + 1.122);
    NEAR(t.p[2], 1 - 0.2805);
}

static void sgd_nesterov(void **state)
{
    struct tiny t;
    tiny_init(&t);
    train(&t, &(struct dt_optim_config){.kind = DT_OPT_SGD, .momentum = 0.9f, .nesterov = true}, 3, 0.1f);
    /* steps g + 0.9 buf: 1.9 g, 2.71 g, 3.439 g: p = 1 - 0.1 x 8.049 g */
    NEAR(t.p[0], 1 - 0.8049);
    NEAR(t.p[1], 1 + 1.6098);
    NEAR(t.p[2], 1 - 0.40245);
}

static void sgd_plain_with_decay(void **state)
{
    struct tiny t;
    tiny_init(&t);
    train(&t, &(struct dt_optim_config){.kind = DT_OPT_SGD, .weight_decay = 0.1f}, 2, 0.1f);
    /* w: p <- 0.99 p - 0.1 g twice: 0.99 (0.99 - 0.1 g) - 0.1 g = 0.9801 - 0.199 g; b: no decay */
    NEAR(t.p[0], 0.9801 - 0.199);
    NEAR(t.p[1], 0.9801 + 0.398);
    NEAR(t.p[2], 1 - 0.1);
}

static void adamw_decoupled_decay(void **state)
{
    struct tiny t;
    tiny_init(&t);
    train(&t, &(struct dt_optim_config){.kind = DT_OPT_ADAMW, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                         .weight_decay = 0.1f},
          3, 0.1f);
    /* a constant gradient makes every bias-corrected step lr g/|g| (eps aside): p_t = 0.99 p_{t-1} - 0.1 sign(g)
     * -> 0.89, 0.7811, 0.673289 for g > 0 and 1.09, 1.1791, 1.267309 for g < 0 */
    NEAR(t.p[0], 0.673289003);
    NEAR(t.p[1], 1.267308999);
    NEAR(t.p[2], 0.700000006); /* no decay: 1 - 3 x 0.1 */
}

static void adam_l2_decay(void **state)
{
    struct tiny t;
    tiny_init(&t);
    train(&t, &(struct dt_optim_config){.kind = DT_OPT_ADAM, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                         .weight_decay = 0.1f},
          3, 0.1f);
    /* g' = g + 0.1 p enters the moments. g = 1: g' = 1.1, then 1.09 with p = 0.9;
     * m2 = 0.9 x 0.11 + 0.109 = 0.208, v2 = 0.999 x 0.00121 + 0.001 x 1.1881 = 0.00239689,
     * p2 = 0.9 - 0.1 (0.208/0.19) / (sqrt(0.00239689/0.001999) + 1e-8) = 0.800024848;
     * and so on: the decay shrinks with the moments' normalisation, unlike AdamW's */
    NEAR(t.p[0], 0.700091354);
    NEAR(t.p[1], 1.299948223);
    NEAR(t.p[2], 0.700000006); /* no decay: the same as AdamW */
}

static void clipping_factor(void **state)
{
    struct tiny t;
    tiny_init(&t);
    t.g[0] = 3, t.g[1] = 4, t.g[2] = 0;
    float f;
    NEAR(dt_grad_norm(&t.m, 1.0f, &f), 5.0);
    NEAR(f, 1.0 / (5 + 1e-6)); /* torch's clip_grad_norm_: max_norm / (norm + 1e-6) */
    NEAR(dt_grad_norm(&t.m, 10.0f, &f), 5.0);
    NEAR(f, 1.0); /* below the limit: untouched */
    NEAR(dt_grad_norm(&t.m, 0.0f, &f), 5.0);
    NEAR(f, 1.0); /* 0: no clipping */
}

/* The mixed-precision update: a 16-bit gradient read as it is and the 16-bit working copy written in
 * the same pass give the bits of widening the gradient first and rounding the parameters after, for
 * both optimizers and both 16-bit types, over a length that ends inside a block, the copy starting
 * on a 16-byte boundary and off one (its streaming stores cover the aligned middle). */
static void fused_16bit_update(void **state)
{
    enum { N = 2500 };
    static float p[N], pref[N], g32[N], m[N], v[N], mref[N], vref[N];
    static uint16_t g16[N], outref[N];
    static _Alignas(16) uint16_t outbuf[N + 1];
    struct dt_kctx *kc = dt_test_kctx();
    const struct dt_kernels *k = &dt_kernels_cpu;
    enum dt_dtype ts[2] = {DT_BF16, DT_F16};
    for (int ti = 0; ti < 2; ti++)
        for (int sgd = 0; sgd < 2; sgd++) {
            enum dt_dtype t = ts[ti];
            uint16_t *out = outbuf + sgd;
            for (int i = 0; i < N; i++) {
                p[i] = pref[i] = 0.5f + 0.001f * (float)(i % 97);
                g16[i] = t == DT_BF16 ? dt_bf16_from_f32(0.01f * (float)(i % 13) - 0.05f)
                                      : dt_f16_from_f32(0.01f * (float)(i % 13) - 0.05f);
                m[i] = mref[i] = v[i] = vref[i] = 0;
            }
            k->convert(kc, g32, DT_F32, g16, t, N);
            for (int step = 1; step <= 2; step++) {
                if (sgd) {
                    k->sgd(kc, p, g16, t, 0.5f, m, N, 0.1f, 0.9f, 1, 0.01f, step == 1, out, t);
                    k->sgd(kc, pref, g32, DT_F32, 0.5f, mref, N, 0.1f, 0.9f, 1, 0.01f, step == 1, NULL, DT_F32);
                } else {
                    k->adamw(kc, p, g16, t, 0.5f, 0.0f, m, v, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, out, t);
                    k->adamw(kc, pref, g32, DT_F32, 0.5f, 0.0f, mref, vref, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step,
                             NULL, DT_F32);
                }
                k->convert(kc, outref, t, pref, DT_F32, N);
                assert_memory_equal(p, pref, sizeof p);
                assert_memory_equal(m, mref, sizeof m);
                assert_memory_equal(out, outref, sizeof outref);
            }
            assert_true(p[1] != 0.501f); /* the update moved the parameters */
        }
}

/* The multi-tensor step: AdamW and Adam slices of one buffer made by dt_optimizer_slice (decayed and
 * not, a 16-bit copy written for some), applied in one call, give the bits of dt_optimizer_update
 * slice by slice; SGD makes no slices. */
static void slices_one_call(void **state)
{
    enum { N = 3000, NS = 5 };
    static const size_t cut[NS + 1] = {0, 7, 1024, 1500, 2999, N};
    static float p[N], pref[N], g[N];
    static uint16_t out[N], outref[N];
    const struct dt_kernels *k = &dt_kernels_cpu;
    struct dt_kctx *kc = dt_test_kctx();
    for (int kind = 0; kind < 3; kind++) {
        struct dt_optim_config c = {(enum dt_optim_kind)kind, 0.9f, 0.95f, 1e-8f, 0.1f, 0.9f, false};
        struct dt_optimizer o, oref;
        assert_int_equal(dt_optimizer_init(&o, &c, k, kc, N), DT_SUCCESS);
        assert_int_equal(dt_optimizer_init(&oref, &c, k, kc, N), DT_SUCCESS);
        for (int i = 0; i < N; i++) p[i] = pref[i] = 0.5f + 0.001f * (float)(i % 97), g[i] = 0.01f * (float)(i % 13) - 0.05f;
        for (int step = 0; step < 2; step++) {
            struct dt_adamw_slice s[NS];
            int ns = 0;
            dt_optimizer_begin(&o);
            dt_optimizer_begin(&oref);
            for (int i = 0; i < NS; i++) {
                size_t at = cut[i], n = cut[i + 1] - cut[i];
                void *plp = i % 2 ? out + at : NULL, *plpref = i % 2 ? outref + at : NULL;
                bool made = dt_optimizer_slice(&o, p + at, g + at, plp, at, n, i != 2, &s[ns]);
                assert_int_equal(made, kind != DT_OPT_SGD);
                if (made) ns++;
                else dt_optimizer_update(&o, p + at, g + at, DT_F32, plp, DT_BF16, at, n, i != 2, 1e-3f, 0.5f);
                dt_optimizer_update(&oref, pref + at, g + at, DT_F32, plpref, DT_BF16, at, n, i != 2, 1e-3f, 0.5f);
            }
            dt_optimizer_apply(&o, s, ns, DT_F32, DT_BF16, 1e-3f, 0.5f);
            assert_memory_equal(p, pref, sizeof p);
            assert_memory_equal(out, outref, sizeof out);
            assert_memory_equal(o.m, oref.m, sizeof p);
            if (kind != DT_OPT_SGD) assert_memory_equal(o.v, oref.v, sizeof p);
        }
        assert_true(p[1] != 0.501f);
        dt_optimizer_free(&o);
        dt_optimizer_free(&oref);
    }
}

DT_TESTS(T(sgd_momentum), T(sgd_nesterov), T(sgd_plain_with_decay), T(adamw_decoupled_decay), T(adam_l2_decay),
         T(clipping_factor), T(fused_16bit_update), T(slices_one_call))
