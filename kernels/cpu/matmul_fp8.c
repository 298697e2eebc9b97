/*
 * matmul_fp8.c - fp8-mixed's linear layers on the CPU, the reference of the GPU's FP8 gemms
 * (kernels.h, struct dt_fp8_q): every operand rounded to bf16, scaled, quantised to E4M3 or E5M2
 * (core/fp8.h) and kept in fp32 as the exact value of its code, then fp32 sgemm: the product of two
 * FP8 values is exact in fp32, so the only roundings are the sums', as in the GPU's fp32
 * accumulation. The scales' inverses multiply the sums (the gemm's alpha). Slow (the CPU has no FP8
 * arithmetic), so a CPU run of fp8-mixed trains as the GPU's would, for the tests.
 */
#include <math.h>
#include <string.h>
#include "core/fp8.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/convert.h"

/* scratch slots: the quantised inp, weight and dout, and the fp32 sums of a 16-bit out */
enum { S_X, S_W, S_D, S_OUT };

/* src (n values of type st) rounded to bf16, into dst as fp32; returns their amax (NaNs ignored) */
static float rounded(struct dt_kctx *kc, float *dst, const void *src, enum dt_dtype st, size_t n)
{
    if (st == DT_F32) dt_cpu_round_lp(kc, dst, src, n, DT_BF16);
    else {
        dt_cpu_convert(kc, dst, DT_F32, src, st, n);
        if (st != DT_BF16) dt_cpu_round_lp(kc, dst, dst, n, DT_BF16);
    }
    float a = 0.0f;
    #pragma omp parallel for reduction(max : a)
    for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(dst[i]));
    return a;
}

/* dst (n, fp32) = src quantised as q says; returns the inverse of the scale it used, or 0 when the
 * scratch could not be had (the op then returns: synchronize reports it) */
static float quantise(struct dt_kctx *kc, int slot, float **dst, const void *src, enum dt_dtype st, size_t n,
                      const struct dt_fp8_q *q, const char *op)
{
    float *d = dt_cpu_scratch(kc, slot, n * sizeof(float), op);
    if (!d) return 0.0f;
    float amax = rounded(kc, d, src, st, n);
    if (q->amax && amax > *q->amax) *q->amax = amax;
    float s = q->current ? dt_fp8_scale(amax, 1.0f, q->fmt, 0.0f) : *q->scale;
    enum dt_fp8_fmt f = q->fmt;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) d[i] = dt_f32_from_fp8(dt_fp8_from_f32(d[i] * s, f), f);
    *dst = d;
    return 1.0f / s;
}

/* The GPU's FP8 gemms (cuBLASLt's) take every dimension in multiples of 16, and so does this reference:
 * a call that reaches it with another shape fails the CPU's tests as it would fail on a GPU (dtrun check
 * refuses such configs) */
static bool shape_ok(struct dt_kctx *kc, const char *op, int BT, int C, int OC)
{
    if (BT > 0 && C > 0 && OC > 0 && BT % 16 == 0 && C % 16 == 0 && OC % 16 == 0) return true;
    dt_cpu_refuse(kc, "%s of %d x %d by %d x %d: the FP8 gemms take every dimension in multiples of 16 (cuBLASLt's, "
                  "on a GPU)\n  hint: compute.precision: bf16-mixed takes any shape; fp8-mixed wants model widths and "
                  "micro-batch x sequence length that are multiples of 16", op, BT, C, C, OC);
    return false;
}

void dt_cpu_matmul_forward_fp8(struct dt_kctx *kc, void *out, enum dt_dtype ot, const void *inp, const void *weight,
                               const void *bias, enum dt_dtype wt, int BT, int C, int OC, const struct dt_fp8_q *qx,
                               const struct dt_fp8_q *qw)
{
    size_t no = (size_t)BT * OC;
    float *x, *w;
    if (!shape_ok(kc, "matmul_forward_fp8", BT, C, OC)) return;
    float ix = quantise(kc, S_X, &x, inp, DT_BF16, (size_t)BT * C, qx, "matmul_forward_fp8");
    float iw = ix ? quantise(kc, S_W, &w, weight, wt, (size_t)OC * C, qw, "matmul_forward_fp8") : 0.0f;
    float *o = ot == DT_F32 ? out : dt_cpu_scratch(kc, S_OUT, no * sizeof(float), "matmul_forward_fp8");
    if (!iw || !o) return;
    dt_cpu_gemm('N', 'T', BT, OC, C, ix * iw, x, C, w, C, 0.0f, o, OC);
    if (bias) {
        /* the bias rounded to bf16, as bf16-mixed's; its scratch is the weight's, done with */
        float *b = w;
        if (wt == DT_F32) dt_cpu_round_lp(kc, b, bias, (size_t)OC, DT_BF16);
        else dt_cpu_convert(kc, b, DT_F32, bias, wt, (size_t)OC);
        #pragma omp parallel for
        for (int i = 0; i < BT; i++)
            for (int j = 0; j < OC; j++) o[(size_t)i * OC + j] += b[j];
    }
    if (ot != DT_F32) dt_cpu_cast_to_lp(kc, out, o, no, ot);
}

void dt_cpu_matmul_backward_fp8(struct dt_kctx *kc, float *dinp, float *dweight, float *dbias, const void *dout,
                                enum dt_dtype dt, const void *inp, const void *weight, enum dt_dtype wt, int BT, int C,
                                int OC, const struct dt_fp8_q *qx, const struct dt_fp8_q *qw,
                                const struct dt_fp8_q *qg, unsigned set)
{
    size_t nd = (size_t)BT * OC;
    float *x, *w, *d;
    if (!shape_ok(kc, "matmul_backward_fp8", BT, C, OC)) return;
    float ix = quantise(kc, S_X, &x, inp, DT_BF16, (size_t)BT * C, qx, "matmul_backward_fp8");
    float iw = ix ? quantise(kc, S_W, &w, weight, wt, (size_t)OC * C, qw, "matmul_backward_fp8") : 0.0f;
    float *db = dbias ? dt_cpu_scratch(kc, S_OUT, nd * sizeof(float), "matmul_backward_fp8") : NULL;
    if (!iw || (dbias && !db)) return;
    if (dbias) {
        rounded(kc, db, dout, dt, nd);
        dt_cpu_colsum(dbias, db, BT, OC, set & DT_SET_DPARAMS);
    }
    float ig = quantise(kc, S_D, &d, dout, dt, nd, qg, "matmul_backward_fp8");
    if (!ig) return;
    dt_cpu_gemm('N', 'N', BT, C, OC, ig * iw, d, OC, w, C, set & DT_SET_DINP ? 0.0f : 1.0f, dinp, C);
    dt_cpu_gemm('T', 'N', OC, C, BT, ig * ix, d, OC, x, C, set & DT_SET_DPARAMS ? 0.0f : 1.0f, dweight, C);
}

void dt_cpu_fp8_update(struct dt_kctx *kc, float *hist, float *scale, int n, int len, bool most_recent, float margin,
                       enum dt_fp8_fmt gfmt, float *saturated)
{
    (void)kc;
    float sat = 0.0f;
    for (int i = 0; i < n; i++) {
        enum dt_fp8_fmt f = i % 3 == 2 ? gfmt : DT_FP8_E4M3;
        float last = hist[i], amax = last;
        for (int r = 1; r < len; r++) amax = fmaxf(amax, hist[(size_t)r * n + i]);
        for (int r = 0; r + 1 < len; r++) hist[(size_t)r * n + i] = hist[(size_t)(r + 1) * n + i];
        if (len > 1) hist[(size_t)(len - 1) * n + i] = last;
        hist[i] = 0.0f;
        if (last * scale[i] > 2.0f * dt_fp8_max(f)) sat += 1.0f;
        scale[i] = dt_fp8_scale(most_recent ? last : amax, scale[i], f, margin);
    }
    *saturated += sat;
}
