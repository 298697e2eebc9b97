/*
 * test_matmul_lp.c - mixed-precision matmuls against their definition: the
 * operands rounded to bf16/fp16 by the portable conversion, widened back and
 * multiplied in fp32 (exact products, so only the summation order may differ),
 * forward and backward, on 16-bit activations; a 16-bit output is the fp32 one
 * rounded once; and rounding really happens (fp32 gives other values);
 * weights stored in 16 bits give the bits of the same weights rounded from fp32.
 * The cross-entropy on 16-bit logits against the fp32 one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "core/fault.h"
#include "core/rng.h"
#include "dt_test.h"
#include "kernels/cpu/cpu.h"

enum { BT = 64, C = 96, OC = 160 };

static float *randn(size_t n, uint64_t stream)
{
    float *x = malloc(n * sizeof *x);
    struct dt_rng r = dt_rng_make(11, stream);
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * dt_rng_uniform(&r) - 1.0f;
    return x;
}

/* x rounded to t and widened again, as a new array */
static float *rounded(const float *x, size_t n, enum dt_dtype t)
{
    float *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = t == DT_BF16 ? dt_f32_from_bf16(dt_bf16_from_f32(x[i]))
                                                       : dt_f32_from_f16(dt_f16_from_f32(x[i]));
    return y;
}

/* max |a - b| / max |b|; infinite where a is not finite (fmax would pass over a NaN) */
static double rel(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

static uint16_t *narrowed(struct dt_kctx *kc, const float *x, size_t n, enum dt_dtype t)
{
    uint16_t *y = malloc(n * sizeof *y);
    dt_cpu_cast_to_lp(kc, y, x, n, t);
    return y;
}

static void check(enum dt_dtype t)
{
    struct dt_kctx *kc = dt_test_kctx();
    float *x = randn(BT * C, 1), *w = randn(OC * C, 2), *bias = randn(OC, 3), *dout = randn(BT * OC, 4);
    float *xr = rounded(x, BT * C, t), *wr = rounded(w, OC * C, t), *dr = rounded(dout, BT * OC, t);
    float *br = rounded(bias, OC, t);
    /* the activations in t, as the model stores them */
    uint16_t *xl = narrowed(kc, x, BT * C, t), *dl = narrowed(kc, dout, BT * OC, t);
    static float out[BT * OC], ref[BT * OC], full[BT * OC];
    dt_cpu_matmul_forward_lp(kc, out, DT_F32, xl, w, bias, DT_F32, BT, C, OC, t);
    dt_cpu_matmul_forward(kc, ref, xr, wr, br, BT, C, OC); /* the bias rounded too, as autocast's F.linear */
    dt_cpu_matmul_forward(kc, full, x, w, bias, BT, C, OC);
    double e = rel(out, ref, BT * OC), r = rel(full, ref, BT * OC);
    if (e > 1e-6) fail_msg("%s forward differs from rounded fp32 by %g", dt_dtype_str(t), e);
    if (r < 1e-4) fail_msg("%s forward equals fp32 (%g): nothing was rounded", dt_dtype_str(t), r);
    /* a 16-bit output: the fp32 one rounded once */
    static uint16_t o16[BT * OC];
    uint16_t *oref = narrowed(kc, out, BT * OC, t);
    dt_cpu_matmul_forward_lp(kc, o16, t, xl, w, bias, DT_F32, BT, C, OC, t);
    assert_memory_equal(o16, oref, sizeof o16);

    static float dx[BT * C], dw[OC * C], db[OC], rdx[BT * C], rdw[OC * C], rdb[OC];
    for (int i = 0; i < BT * C; i++) dx[i] = rdx[i] = 0.5f; /* backward accumulates */
    for (int i = 0; i < OC * C; i++) dw[i] = rdw[i] = -0.25f;
    for (int i = 0; i < OC; i++) db[i] = rdb[i] = 1.0f;
    dt_cpu_matmul_backward_lp(kc, dx, dw, db, dout, DT_F32, xl, w, DT_F32, BT, C, OC, t, 0);
    /* the bias gradient sums the output gradient as the products read it, rounded */
    dt_cpu_matmul_backward(kc, rdx, rdw, NULL, dr, xr, wr, BT, C, OC, 0);
    dt_cpu_colsum(rdb, dr, BT, OC, false);
    if ((e = rel(dx, rdx, BT * C)) > 1e-6) fail_msg("%s dinp differs by %g", dt_dtype_str(t), e);
    if ((e = rel(dw, rdw, OC * C)) > 1e-6) fail_msg("%s dweight differs by %g", dt_dtype_str(t), e);
    assert_memory_equal(db, rdb, sizeof db);
    /* overwritten (DT_SET_*): from NaN, what the reference adds to zeros; dout already in t */
    for (int i = 0; i < BT * C; i++) dx[i] = NAN, rdx[i] = 0;
    for (int i = 0; i < OC * C; i++) dw[i] = NAN, rdw[i] = 0;
    for (int i = 0; i < OC; i++) db[i] = NAN, rdb[i] = 0;
    dt_cpu_matmul_backward_lp(kc, dx, dw, db, dl, t, xl, w, DT_F32, BT, C, OC, t, DT_SET_DINP | DT_SET_DPARAMS);
    dt_cpu_matmul_backward(kc, rdx, rdw, NULL, dr, xr, wr, BT, C, OC, 0);
    dt_cpu_colsum(rdb, dr, BT, OC, false);
    if ((e = rel(dx, rdx, BT * C)) > 1e-6) fail_msg("%s dinp overwritten differs by %g", dt_dtype_str(t), e);
    if ((e = rel(dw, rdw, OC * C)) > 1e-6) fail_msg("%s dweight overwritten differs by %g", dt_dtype_str(t), e);
    if ((e = rel(db, rdb, OC)) > 1e-6) fail_msg("%s dbias overwritten differs by %g", dt_dtype_str(t), e);

    /* the weight and bias stored in t (a strategy's 16-bit storage, wt = t): the same bits as from fp32 */
    uint16_t *w16 = malloc((OC * C + OC) * sizeof *w16);
    dt_cpu_cast_to_lp(kc, w16, w, OC * C, t);
    dt_cpu_cast_to_lp(kc, w16 + OC * C, bias, OC, t);
    static float out16[BT * OC];
    dt_cpu_matmul_forward_lp(kc, out, DT_F32, xl, w, bias, DT_F32, BT, C, OC, t);
    dt_cpu_matmul_forward_lp(kc, out16, DT_F32, xl, w16, w16 + OC * C, t, BT, C, OC, t);
    assert_memory_equal(out16, out, sizeof out);
    static float dx16[BT * C], dw16[OC * C];
    for (int i = 0; i < BT * C; i++) dx[i] = dx16[i] = 0.5f;
    for (int i = 0; i < OC * C; i++) dw[i] = dw16[i] = -0.25f;
    dt_cpu_matmul_backward_lp(kc, dx, dw, NULL, dout, DT_F32, xl, w, DT_F32, BT, C, OC, t, 0);
    dt_cpu_matmul_backward_lp(kc, dx16, dw16, NULL, dout, DT_F32, xl, w16, t, BT, C, OC, t, 0);
    assert_memory_equal(dx16, dx, sizeof dx);
    assert_memory_equal(dw16, dw, sizeof dw);
    /* and a stored weight really is read: another weight gives another output */
    w16[0] ^= 0x4000;
    dt_cpu_matmul_forward_lp(kc, out16, DT_F32, xl, w16, w16 + OC * C, t, BT, C, OC, t);
    if (!memcmp(out16, out, sizeof out)) fail_msg("%s forward ignored the 16-bit weight", dt_dtype_str(t));
    free(w16);
    free(br);
    free(x);
    free(w);
    free(bias);
    free(dout);
    free(xr);
    free(wr);
    free(dr);
    free(xl);
    free(dl);
    free(oref);
}

static void bf16_onednn(void **state)
{
    struct dt_kctx *kc = dt_test_kctx();
    (void)state;
    dt_cpu_bf16_gemm_select(kc, 1);
    check(DT_BF16);
}

static void bf16_sgemm(void **state)
{
    struct dt_kctx *kc = dt_test_kctx();
    (void)state;
    dt_cpu_bf16_gemm_select(kc, 0);
    check(DT_BF16);
}

static void fp16(void **state)
{
    (void)state;
    check(DT_F16);
}

/* The 16-bit cross-entropy against the fp32 one on the same rounded logits: the same losses, and
 * dlogits that are the fp32 ones rounded (within one rounding step), in the block-major layout. */
static void xent_lp(enum dt_dtype t)
{
    struct dt_kctx *kc = dt_test_kctx();
    enum { R = 5, V = 300, VB = 64 }; /* 5 blocks, the last one 44 wide */
    int32_t targets[R] = {0, 299, 64, 127, 255};
    float *x = randn(R * V, 5);
    for (int i = 0; i < R * V; i++) x[i] *= 4;
    float *ref = rounded(x, R * V, t), losses[R], ref_losses[R];
    uint16_t *lp = malloc(R * V * sizeof *lp);
    for (int i = 0; i < R; i++)
        for (int v = 0; v < V; v++) {
            int b = v / VB, n = V - b * VB < VB ? V - b * VB : VB;
            lp[R * b * VB + i * n + v - b * VB] = t == DT_BF16 ? dt_bf16_from_f32(x[i * V + v])
                                                               : dt_f16_from_f32(x[i * V + v]);
        }
    float dloss = 0.2f;
    float mean = dt_cpu_softmax_xent_lp(kc, losses, lp, targets, dloss, R, V, VB, t, NULL);
    float ref_mean = dt_cpu_softmax_xent(kc, ref_losses, ref, targets, dloss, R, V, V, NULL);
    assert_true(fabsf(mean - ref_mean) <= 1e-6f * fabsf(ref_mean));
    for (int i = 0; i < R; i++) assert_true(fabsf(losses[i] - ref_losses[i]) <= 1e-6f * fabsf(ref_losses[i]));
    double step = t == DT_BF16 ? 0x1p-8 : 0x1p-11, worst = 0;
    for (int i = 0; i < R; i++)
        for (int v = 0; v < V; v++) {
            int b = v / VB, n = V - b * VB < VB ? V - b * VB : VB;
            uint16_t h = lp[R * b * VB + i * n + v - b * VB];
            float d = t == DT_BF16 ? dt_f32_from_bf16(h) : dt_f32_from_f16(h), r = ref[i * V + v];
            worst = dt_test_worst(worst, fabs((double)d - r) / (fabs(r) * 2 * step + 6e-8));
            if (v == targets[i] && !(d < 0)) fail_msg("row %d: dlogit of the target is %g, not negative", i, d);
        }
    if (worst > 1) fail_msg("%s dlogits differ from fp32 by %g rounding steps", dt_dtype_str(t), worst);
    free(x), free(ref), free(lp);
}
static void xent_bf16(void **state) { (void)state; xent_lp(DT_BF16); }
static void xent_fp16(void **state) { (void)state; xent_lp(DT_F16); }

/* Past the shapes a fixed table held (64), a shape is still multiplied by its own oneDNN primitive:
 * the same bits as a context that meets that shape first (#38: the 65th shape took sgemm, a
 * different summation order, for the rest of the run) */
static void many_shapes(void **state)
{
    (void)state;
    enum { N = 80, K = 96, O = 48 };
    struct dt_kctx *a, *b;
    assert_int_equal(dt_cpu_ctx_create(-1, &a), DT_SUCCESS);
    assert_int_equal(dt_cpu_ctx_create(-1, &b), DT_SUCCESS);
    dt_cpu_bf16_gemm_select(a, 1);
    dt_cpu_bf16_gemm_select(b, 1);
    float *x = randn((size_t)N * K, 5), *w = randn((size_t)O * K, 6);
    uint16_t *xl = narrowed(a, x, (size_t)N * K, DT_BF16);
    float *ya = malloc((size_t)N * O * sizeof *ya), *yb = malloc((size_t)N * O * sizeof *yb);
    const char *path = dt_cpu_matmul_lp_path(a, DT_BF16);
    for (int rows = 1; rows <= N; rows++) /* N shapes, one per row count */
        dt_cpu_matmul_forward_lp(a, ya, DT_F32, xl, w, NULL, DT_F32, rows, K, O, DT_BF16);
    dt_cpu_matmul_forward_lp(b, yb, DT_F32, xl, w, NULL, DT_F32, N, K, O, DT_BF16);
    assert_int_equal(dt_cpu_failure(a, 1), DT_SUCCESS);
    assert_memory_equal(ya, yb, (size_t)N * O * sizeof *ya);
    print_message("# %s\n", path);
    free(x), free(w), free(xl), free(ya), free(yb);
    dt_cpu_ctx_destroy(a);
    dt_cpu_ctx_destroy(b);
}

/* a scratch request that fails (malloc under memory pressure: DTRUN_FAULT=nomem) ends the 16-bit
 * cross-entropy at once and is said at the next synchronize, naming the op (#38: each thread's block
 * was malloc'd unchecked) */
static void xent_out_of_memory(void **state)
{
    (void)state;
    enum { R = 4, V = 300, VB = 64 };
    struct dt_kctx *kc;
    assert_int_equal(dt_cpu_ctx_create(-1, &kc), DT_SUCCESS);
    uint16_t lp[R * V] = {0};
    int32_t targets[R] = {1, 2, 3, 4};
    float losses[R];
    setenv("DTRUN_FAULT", "nomem@2", 1);
    assert_int_equal(dt_fault_init(), DT_SUCCESS);
    dt_fault_at(1, 0);
    assert_false(isnan(dt_cpu_softmax_xent_lp(kc, losses, lp, targets, 1.0f / R, R, V, VB, DT_BF16, NULL)));
    assert_int_equal(dt_cpu_failure(kc, 1), DT_SUCCESS);
    dt_fault_at(2, 0);
    assert_true(isnan(dt_cpu_softmax_xent_lp(kc, losses, lp, targets, 1.0f / R, R, V, VB, DT_BF16, NULL)));
    assert_int_equal(dt_cpu_failure(kc, 2), DT_ERR_NOMEM);
    assert_non_null(strstr(dt_error_msg(), "dtrun: error: step 2: out of memory for "));
    assert_non_null(strstr(dt_error_msg(), " bytes of the CPU kernels' scratch in softmax_xent\n  hint: lower "
                                           "data.micro_batch_size or enable model.activation_checkpointing"));
    unsetenv("DTRUN_FAULT");
    assert_int_equal(dt_fault_init(), DT_SUCCESS);
    dt_cpu_ctx_destroy(kc);
}

DT_TESTS(T(bf16_onednn), T(bf16_sgemm), T(fp16), T(xent_bf16), T(xent_fp16), T(many_shapes), T(xent_out_of_memory))
