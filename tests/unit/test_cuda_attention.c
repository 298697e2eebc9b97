/*
 * test_cuda_attention.c - the CUDA module's fused causal attention against the CPU's: the fp32
 * kernels (kernels/cuda/attention.cu) and the module's cuBLAS reference path, whose att must match a
 * softmax computed here in double; the 16-bit activations of the CUDA-core kernels within the fp32
 * tolerance plus an ulp; the tensor-core kernels (attention_tc.cu: bf16, fp16 at head size 64, 128)
 * within bounds derived from the roundings they add (attention_tc). Every path with grouped-query
 * heads too (NKV key/value heads under NH query heads: half as many, one), in each of the ways
 * backward sums a key/value head's gradient over its group (plan.h's dt_attn_kv_splits: in one
 * block, split in part, split per query head), and the fp32 kernels against the reference's
 * multi-head attention on the key/value heads repeated (Hugging Face's repeat_kv), the gradient
 * summed back over each group. Backward's bits the same on a second run, everywhere. And the
 * attention of generation over a cache of keys and values (attention_cached.cu) against the CPU's,
 * a prompt then a token a step, and its rows against the forward's on the whole sequence. Speaks
 * TAP; exits 77 where no module or GPU is (`make check-gpu` runs it on a GPU node).
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include "core/half.h"
#include "cuda_check.h"
#include "kernels/cuda/plan.h"

/* the kernels on trial the module runs now (plan.h's DTRUN_CUDA_TRY flags) */
static unsigned tries;

/* a case's shape for its TAP lines, with the split of backward's key/value sums */
static void shape_str(char *buf, size_t n, const char *type, int B, int T, int C, int NH, int NKV)
{
    snprintf(buf, n, "%s%sB %d T %d C %d NH %d NKV %d (head size %d, kv splits %d)", type, *type ? " " : "", B, T, C,
             NH, NKV, C / NH, dt_attn_kv_splits_tried(tries, B, T, NH, NKV));
}

/* The causal softmax of every (b, h) in double from the inputs, (B,NH,T,T), masked entries 0, and
 * each row's log-sum-exp of its scaled scores (B,NH,T): what the reference path's att and the fused
 * path's lse hold. */
static void softmax_of(const float *qkv, int B, int T, int C, int NH, int NKV, float *att, float *lse)
{
    int hs = C / NH, W = dt_attn_width(C, NH, NKV);
    double scale = 1.0f / sqrtf((float)hs); /* the kernels' float scale */
    double *s = malloc((size_t)T * sizeof *s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * W + (size_t)h * hs;
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * W + C + (size_t)(h / (NH / NKV)) * hs;
                    double dot = 0;
                    for (int d = 0; d < hs; d++) dot += (double)q[d] * k[d];
                    s[u] = dot * scale;
                    mx = fmax(mx, s[u]);
                }
                for (int u = 0; u <= t; u++) sum += exp(s[u] - mx);
                size_t row = ((size_t)b * NH + h) * T + t;
                lse[row] = (float)(mx + log(sum));
                for (int u = 0; u < T; u++) att[row * T + u] = u <= t ? (float)(exp(s[u] - mx) / sum) : 0.0f;
            }
    free(s);
}

/* qkv (B,T,W) with each key and value head repeated for every query head of its group (Hugging
 * Face's repeat_kv): the (B,T,3C) of multi-head attention that computes the same */
static float *repeat_kv(const float *qkv, int B, int T, int C, int NH, int NKV)
{
    int hs = C / NH, G = NH / NKV, W = dt_attn_width(C, NH, NKV);
    float *x = malloc((size_t)B * T * 3 * C * sizeof *x);
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < NH; h++)
            for (int d = 0; d < hs; d++) {
                const float *src = qkv + r * W;
                float *dst = x + r * 3 * C + (size_t)h * hs + d;
                dst[0] = src[(size_t)h * hs + d];
                dst[C] = src[C + (size_t)(h / G) * hs + d];
                dst[2 * C] = src[C + (size_t)(NKV + h / G) * hs + d];
            }
    return x;
}

/* the gradient of repeat_kv's (B,T,3C) folded back into (B,T,W): q's as it is, a key or value
 * head's the sum (in double) over its group's query heads */
static float *fold_kv(const float *dx, int B, int T, int C, int NH, int NKV)
{
    int hs = C / NH, G = NH / NKV, W = dt_attn_width(C, NH, NKV);
    float *d = malloc((size_t)B * T * W * sizeof *d);
    for (size_t r = 0; r < (size_t)B * T; r++) {
        const float *src = dx + r * 3 * C;
        float *dst = d + r * W;
        memcpy(dst, src, (size_t)C * sizeof *dst);
        for (int g = 0; g < NKV; g++)
            for (int j = 0; j < hs; j++) {
                double k = 0, v = 0;
                for (int h = g * G; h < (g + 1) * G; h++) {
                    k += src[C + (size_t)h * hs + j];
                    v += src[2 * C + (size_t)h * hs + j];
                }
                dst[C + (size_t)g * hs + j] = (float)k;
                dst[C + (size_t)(NKV + g) * hs + j] = (float)v;
            }
    }
    return d;
}

/*
 * The fused attention in fp32 against the CPU kernel, the cuBLAS reference path against the CPU
 * (out, dqkv) and against softmax_of (att: the CPU's fused kernel keeps only lse), and the two GPU
 * paths against each other; with grouped-query heads, the fused path also against the reference's
 * multi-head attention on repeat_kv's qkv. Backward writes dqkv: every path starts from other
 * values.
 */
static void attention_f32(void *ctx, int B, int T, int C, int NH, int NKV)
{
    size_t nqkv = (size_t)B * T * dt_attn_width(C, NH, NKV), nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    size_t nlse = (size_t)B * NH * T;
    char shape[96], what[224];
    shape_str(shape, sizeof shape, "", B, T, C, NH, NKV);
    float *qkv = randn(nqkv, 50), *dout = randn(nout, 51);
    for (size_t i = 0; i < nqkv; i++) qkv[i] *= 0.5f; /* scores of about a unit: rows neither flat nor one-hot */
    float *junk = randn(nqkv, 52), *dqkv = malloc(nqkv * 4);
    memcpy(dqkv, junk, nqkv * 4);
    float *out = calloc(nout, 4), *lse_cpu = calloc(nlse, 4), *att = malloc(natt * 4), *lse = malloc(nlse * 4);
    float *scratch = malloc(dt_kernels_cpu.attention_scratch(B, T, C, NH, NKV, DT_F32) * sizeof *scratch + 1);
    dt_kernels_cpu.attention_forward(kc, out, lse_cpu, qkv, DT_F32, B, T, C, NH, NKV);
    dt_kernels_cpu.attention_backward(kc, dqkv, dout, qkv, out, lse_cpu, scratch, DT_F32, B, T, C, NH, NKV);
    softmax_of(qkv, B, T, C, NH, NKV, att, lse);

    float *gqkv = dev(qkv, nqkv * 4), *gdout = dev(dout, nout * 4), *gout = dev(NULL, nout * 4);
    float *glse = dev(NULL, nlse * 4), *gd = dev(junk, nqkv * 4), *gd2 = dev(NULL, nqkv * 4);
    float *gscr = dev(NULL, gpu->attention_scratch(B, T, C, NH, NKV, (int)DT_F32) * 4);
    CK(gpu->attention_forward(gout, glse, gqkv, (int)DT_F32, B, T, C, NH, NKV));
    float *fo = back(gout, nout), *fl = back(glse, nlse);
    double d = maxrel(fo, out, nout);
    snprintf(what, sizeof what, "attention fused forward fp32 %s: out vs the CPU", shape);
    report(d < 1e-5, what, d);
    d = fmax(maxrel(fl, lse, nlse), maxrel(fl, lse_cpu, nlse));
    snprintf(what, sizeof what, "attention fused forward fp32 %s: lse, the scores' log-sum-exp, and the CPU's", shape);
    report(d < 1e-5, what, d);
    CK(gpu->attention_backward(gd, gdout, gqkv, gout, glse, gscr, (int)DT_F32, B, T, C, NH, NKV));
    CK(gpu->attention_backward(gd2, gdout, gqkv, gout, glse, gscr, (int)DT_F32, B, T, C, NH, NKV));
    float *fd = back(gd, nqkv), *fd2 = back(gd2, nqkv);
    d = maxrel(fd, dqkv, nqkv);
    snprintf(what, sizeof what, "attention fused backward fp32 %s: dqkv written, vs the CPU", shape);
    report(d < 5e-5, what, d);
    snprintf(what, sizeof what, "attention fused backward fp32 %s: the same bits on a second run", shape);
    report(memcmp(fd, fd2, nqkv * 4) == 0, what, (double)(memcmp(fd, fd2, nqkv * 4) != 0));

    float *rout = dev(NULL, nout * 4), *ratt = dev(NULL, natt * 4), *rd = dev(junk, nqkv * 4);
    float *rscr = dev(NULL, gpu->attention_ref_scratch(NH, T) * 4);
    CK(gpu->attention_forward_ref(ctx, rout, ratt, gqkv, B, T, C, NH, NKV));
    float *ro = back(rout, nout), *ra = back(ratt, natt);
    size_t above = 0; /* the masked entries: exactly 0 */
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        for (int u = (int)(r % T) + 1; u < T; u++) above += ra[r * T + u] != 0;
    d = fmax(maxrel(ro, out, nout), maxrel(ra, att, natt));
    snprintf(what, sizeof what, "attention reference forward %s: out vs the CPU, att vs the softmax in double", shape);
    report(d < 1e-5 && above == 0, what, d);
    CK(gpu->attention_backward_ref(ctx, rd, gdout, gqkv, ratt, rscr, B, T, C, NH, NKV));
    float *rdh = back(rd, nqkv);
    d = maxrel(rdh, dqkv, nqkv);
    snprintf(what, sizeof what, "attention reference backward %s: dqkv written, vs the CPU", shape);
    report(d < 5e-5, what, d);
    d = fmax(maxrel(fo, ro, nout), maxrel(fd, rdh, nqkv));
    snprintf(what, sizeof what, "attention fused vs reference %s: out, dqkv", shape);
    report(d < 5e-5, what, d);
    if (NKV < NH) {
        /* the reference's multi-head attention (ratt and rscr hold its att and datt) */
        size_t nx = (size_t)B * T * 3 * C;
        float *x = repeat_kv(qkv, B, T, C, NH, NKV), *gx = dev(x, nx * 4), *xout = dev(NULL, nout * 4);
        float *xd = dev(NULL, nx * 4);
        CK(gpu->attention_forward_ref(ctx, xout, ratt, gx, B, T, C, NH, NH));
        CK(gpu->attention_backward_ref(ctx, xd, gdout, gx, ratt, rscr, B, T, C, NH, NH));
        float *xo = back(xout, nout), *xdh = back(xd, nx), *folded = fold_kv(xdh, B, T, C, NH, NKV);
        d = fmax(maxrel(fo, xo, nout), maxrel(fd, folded, nqkv));
        snprintf(what, sizeof what,
                 "attention fused %s vs the reference on repeat_kv's heads: out, dq, and dk, dv summed over each group",
                 shape);
        report(d < 5e-5, what, d);
        gpu->free(gx), gpu->free(xout), gpu->free(xd);
        free(x), free(xo), free(xdh), free(folded);
    }

    void *all[] = {gqkv, gdout, gout, glse, gd, gd2, gscr, rout, ratt, rd, rscr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(qkv), free(dout), free(junk), free(dqkv), free(out), free(lse_cpu), free(att), free(lse), free(scratch);
    free(fo), free(fl), free(fd), free(fd2), free(ro), free(ra), free(rdh);
}

/*
 * The fused attention on 16-bit activations (t) against the CPU's: both widen qkv, compute in fp32
 * and round out and dqkv once, so the fp32 tolerances hold after one ulp of t (lp_excess). Backward
 * runs on both sides from the CPU's out and lse, so that a 1-ulp difference in out does not reach
 * Drow.
 */
static void attention_lp(int B, int T, int C, int NH, int NKV, enum dt_dtype t)
{
    size_t nqkv = (size_t)B * T * dt_attn_width(C, NH, NKV), nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    char shape[112], what[224];
    shape_str(shape, sizeof shape, dt_dtype_str(t), B, T, C, NH, NKV);
    float *qkv = randn(nqkv, 53), *dout = randn(nout, 54), *junk = randn(nqkv, 55);
    for (size_t i = 0; i < nqkv; i++) qkv[i] *= 0.5f;
    uint16_t *q16 = typed(qkv, nqkv, t), *d16 = typed(junk, nqkv, t), *out = malloc(nout * 2);
    float *lse = calloc(nlse, 4);
    float *scratch = malloc(dt_kernels_cpu.attention_scratch(B, T, C, NH, NKV, t) * sizeof *scratch + 1);
    dt_kernels_cpu.attention_forward(kc, out, lse, q16, t, B, T, C, NH, NKV);
    void *gqkv = dev(q16, nqkv * 2), *gout = dev(NULL, nout * 2), *gd = dev(d16, nqkv * 2), *gd2 = dev(NULL, nqkv * 2);
    float *glse = dev(NULL, nlse * 4), *gdout = dev(dout, nout * 4);
    float *gscr = dev(NULL, gpu->attention_scratch(B, T, C, NH, NKV, (int)t) * 4);
    CK(gpu->attention_forward(gout, glse, gqkv, (int)t, B, T, C, NH, NKV));
    uint16_t *fo = back_typed(gout, nout, t);
    float *fl = back(glse, nlse);
    double d = lp_excess(fo, out, nout, t);
    snprintf(what, sizeof what, "attention fused forward %s: out vs the CPU, within 1 ulp + 1e-5", shape);
    report(d < 1e-5, what, d);
    d = maxrel(fl, lse, nlse);
    snprintf(what, sizeof what, "attention fused forward %s: lse vs the CPU", shape);
    report(d < 1e-5, what, d);
    dt_kernels_cpu.attention_backward(kc, d16, dout, q16, out, lse, scratch, t, B, T, C, NH, NKV);
    CK(gpu->to_device(gout, out, nout * 2));
    CK(gpu->to_device(glse, lse, nlse * 4));
    CK(gpu->attention_backward(gd, gdout, gqkv, gout, glse, gscr, (int)t, B, T, C, NH, NKV));
    CK(gpu->attention_backward(gd2, gdout, gqkv, gout, glse, gscr, (int)t, B, T, C, NH, NKV));
    uint16_t *fd = back_typed(gd, nqkv, t), *fd2 = back_typed(gd2, nqkv, t);
    d = lp_excess(fd, d16, nqkv, t);
    snprintf(what, sizeof what, "attention fused backward %s: dqkv written, vs the CPU, within 1 ulp + 5e-5", shape);
    report(d < 5e-5, what, d);
    snprintf(what, sizeof what, "attention fused backward %s: the same bits on a second run", shape);
    report(memcmp(fd, fd2, nqkv * 2) == 0, what, (double)(memcmp(fd, fd2, nqkv * 2) != 0));
    void *all[] = {gqkv, gout, gd, gd2, glse, gdout, gscr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(qkv), free(dout), free(junk), free(q16), free(d16), free(out), free(lse), free(scratch);
    free(fo), free(fl), free(fd), free(fd2);
}

/*
 * The tensor-core attention (kernels/cuda/attention_tc.cu: bf16 and fp16, head size 64 or 128)
 * against the CPU kernel on the same 16-bit qkv. The CPU keeps P, dS and dout in fp32; the GPU
 * rounds each to the 16-bit type before its product (P before P V and P^T dO, dS before dS K and
 * dS^T Q, dout as it is staged), so the two differ by a few 16-bit rounding units of the products'
 * magnitudes, not of the results. The bounds, per element, u the type's unit roundoff (bf16 2^-8,
 * fp16 2^-11: a rounding moves x by at most u |x|, or by f = 2^-25 in fp16's subnormal range, bf16
 * f = 0), u32 = 2^-24, P the softmax in double (softmax_of), all sums over the visible pairs:
 *   scores: both sides sum D exact products (16 x 16 bits is exact in fp32) in fp32, the tensor
 *     cores possibly truncating: |dS| <= 3 (D + 2) u32 sum_d |q k| (as mm_excess), scaled, plus the
 *     base-2 exponent's rounding; eps(t) = that over row t's keys + 8 u32 (1 + |lse| + max |s|) is
 *     the relative error it and exp2f leave in each P(t,u);
 *   out(t,d) = sum_u P~ v / l, P~ = P (1 + u): |d| <= (u + 2 eps + 4 (T + 8) u32) sum_u P |v|
 *     + f sum_u |v| (l is the fp32 sum, >= 1, of the unrounded p);
 *   lse(t): eps(t) + (2 T + 16) u32 (the sum of T exp, its log);
 *   dV(u,d) = sum_t P~ dO~: |d| <= sum_t (2u + u^2 + eps + 2 (N T + 8) u32) P |dO| + f sum_t (|dO| + P),
 *     t over the queries of every query head of the key/value head's group (N = NH / NKV of them,
 *     so N T terms in one fp32 sum);
 *   dS(t,u) = P (dO~ . v - Drow), rounded: with E = sum_d |dO v|, F = sum_d |dO o| (Drow's terms) and
 *     G = E + F >= |dP - Drow|: |d| <= c P G + f (1 + P sum_d |v|), c = u (2 + u) + eps + 2 (D + 8) u32;
 *   dQ(t,d) = scale sum_u dS~ k: |d| <= scale sum_u ((c + 2 (T + 8) u32) P G + f (1 + P sum |v|)) |k|,
 *     dK(u,d) the same over t of the group's query heads with |q|, 2 (N T + 8) u32 for the sum's.
 * Each stored 16-bit result is rounded once on each side: the check (tc_excess) takes one ulp off
 * |got - ref| and divides by the bound; at most 1 passes. These are worst cases, reached only when
 * every rounding goes the same way; a wrong mask or tile (a term missing or doubled) is a whole
 * term, which in fp16 (u = 2^-11) is far over them, the same template serving both types.
 * Backward starts on both sides from the CPU's out and lse, as attention_lp's does.
 */

struct tc_case {
    int B, T, C, NH, NKV, hs;
    double u, f, scale;
    const float *q;   /* the widened qkv (B,T,W) */
    const float *att; /* P (B,NH,T,T) */
    const float *lse; /* the CPU's (B,NH,T) */
};

/* got and ref of 16-bit type t: (|got - ref| - one ulp at the larger) / bound, the largest, >= 0 */
static double tc_excess(const uint16_t *got, const uint16_t *ref, const double *bound, size_t n, enum dt_dtype t)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double g = wide16(got[i], t), r = wide16(ref[i], t);
        uint16_t big = (got[i] & 0x7fff) > (ref[i] & 0x7fff) ? got[i] & 0x7fff : ref[i] & 0x7fff;
        double ulp = wide16((uint16_t)(big + 1), t) - wide16(big, t);
        double d = fmax(0.0, fabs(g - r) - ulp) / (bound[i] + 1e-30);
        if (!(d <= m)) m = d; /* a NaN counts as a failure */
    }
    return m;
}

/* element d of query head h's q (w 0), or of the k (1) or v (2) of its key/value head, at (b, t) */
static double tc_qkv(const struct tc_case *c, int w, int b, int t, int h, int d)
{
    int head = w == 0 ? h : c->NH + (w - 1) * c->NKV + h / (c->NH / c->NKV);
    return c->q[((size_t)b * c->T + t) * dt_attn_width(c->C, c->NH, c->NKV) + (size_t)head * c->hs + d];
}

/* eps(t) of (b, h) (above), into eps[T] */
static void tc_eps(const struct tc_case *c, int b, int h, double *eps)
{
    for (int t = 0; t < c->T; t++) {
        double worst = 0, smax = 0;
        for (int u = 0; u <= t; u++) {
            double abs_sum = 0, dot = 0;
            for (int d = 0; d < c->hs; d++) {
                double x = tc_qkv(c, 0, b, t, h, d) * tc_qkv(c, 1, b, u, h, d);
                abs_sum += fabs(x), dot += x;
            }
            worst = fmax(worst, abs_sum);
            smax = fmax(smax, fabs(dot * c->scale));
        }
        double lse = c->lse[((size_t)b * c->NH + h) * c->T + t];
        eps[t] = c->scale * 3.0 * (c->hs + 2) * U32 * worst + 8 * U32 * (1 + fabs(lse) + smax);
    }
}

/* the bounds of out (B,T,C) and lse (B,NH,T) */
static void tc_forward_bounds(const struct tc_case *c, double *bout, double *blse)
{
    int T = c->T, hs = c->hs;
    double *eps = malloc((size_t)T * sizeof *eps);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++) {
            tc_eps(c, b, h, eps);
            const float *P = c->att + ((size_t)b * c->NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                blse[((size_t)b * c->NH + h) * T + t] = eps[t] + (2.0 * T + 16) * U32;
                for (int d = 0; d < hs; d++) {
                    double a = 0, sv = 0;
                    for (int u = 0; u <= t; u++) {
                        double v = fabs(tc_qkv(c, 2, b, u, h, d));
                        a += P[(size_t)t * T + u] * v, sv += v;
                    }
                    bout[((size_t)b * T + t) * c->C + (size_t)h * hs + d] =
                        (c->u + 2 * eps[t] + 4.0 * (T + 8) * U32) * a + c->f * sv;
                }
            }
        }
    free(eps);
}

/* the bounds of dqkv (B,T,W), from dout (fp32) and out (the CPU's, widened): a key or value head's
 * the sum of its group's query heads' */
static void tc_backward_bounds(const struct tc_case *c, const float *dout, const float *out, double *bd)
{
    int T = c->T, hs = c->hs, C = c->C, N = c->NH / c->NKV, W = dt_attn_width(C, c->NH, c->NKV);
    double *eps = malloc((size_t)T * sizeof *eps), *w = malloc((size_t)T * T * sizeof *w);
    double *fl = malloc((size_t)T * T * sizeof *fl), *cs = malloc((size_t)T * sizeof *cs);
    double sum_q = 2.0 * (T + 8) * U32, sum_kv = 2.0 * ((double)N * T + 8) * U32; /* the fp32 sums' */
    for (size_t i = 0; i < (size_t)c->B * T * W; i++) bd[i] = 0;
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++) {
            tc_eps(c, b, h, eps);
            const float *P = c->att + ((size_t)b * c->NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + (size_t)h * hs, *o = out + (size_t)b * T * C + (size_t)h * hs;
            /* dS's bound: cs(t) w(t,u), and fl the floor */
            for (int t = 0; t < T; t++) {
                double F = 0;
                for (int d = 0; d < hs; d++) F += fabs((double)dy[(size_t)t * C + d] * o[(size_t)t * C + d]);
                cs[t] = c->u * (2 + c->u) + eps[t] + 2.0 * (hs + 8) * U32;
                for (int u = 0; u <= t; u++) {
                    double E = 0, sv = 0;
                    for (int d = 0; d < hs; d++) {
                        E += fabs(dy[(size_t)t * C + d] * tc_qkv(c, 2, b, u, h, d));
                        sv += fabs(tc_qkv(c, 2, b, u, h, d));
                    }
                    double p = P[(size_t)t * T + u];
                    w[(size_t)t * T + u] = p * (E + F);
                    fl[(size_t)t * T + u] = c->f * (1 + p * sv);
                }
            }
            for (int t = 0; t < T; t++)
                for (int d = 0; d < hs; d++) {
                    double dq = 0, dk = 0, dv = 0;
                    /* dQ(t): over keys u <= t; dK(t), dV(t) (t the key): over queries s >= t */
                    for (int u = 0; u <= t; u++)
                        dq += ((cs[t] + sum_q) * w[(size_t)t * T + u] + fl[(size_t)t * T + u]) *
                              fabs(tc_qkv(c, 1, b, u, h, d));
                    for (int s = t; s < T; s++) {
                        double p = P[(size_t)s * T + t], g = fabs(dy[(size_t)s * C + d]);
                        dk += ((cs[s] + sum_kv) * w[(size_t)s * T + t] + fl[(size_t)s * T + t]) *
                              fabs(tc_qkv(c, 0, b, s, h, d));
                        dv += (2 * c->u + c->u * c->u + eps[s] + sum_kv) * p * g + c->f * (g + p);
                    }
                    size_t row = ((size_t)b * T + t) * W, kv = (size_t)(h / N) * hs + d;
                    bd[row + (size_t)h * hs + d] = c->scale * dq;
                    bd[row + C + kv] += c->scale * dk;
                    bd[row + C + (size_t)c->NKV * hs + kv] += dv;
                }
        }
    free(eps), free(w), free(fl), free(cs);
}

/* one shape of the tensor-core path: forward and backward against the CPU within the bounds, and
 * backward's bits the same on a second run */
static void attention_tc(int B, int T, int C, int NH, int NKV, enum dt_dtype t)
{
    size_t nqkv = (size_t)B * T * dt_attn_width(C, NH, NKV), nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    char shape[112], what[224];
    shape_str(shape, sizeof shape, dt_dtype_str(t), B, T, C, NH, NKV);
    float *qkv = randn(nqkv, 56), *dout = randn(nout, 57), *junk = randn(nqkv, 58);
    for (size_t i = 0; i < nqkv; i++) qkv[i] *= 0.5f; /* scores of about a unit, as attention_f32's */
    uint16_t *q16 = typed(qkv, nqkv, t), *d16 = typed(junk, nqkv, t), *out = malloc(nout * 2);
    float *qw = malloc(nqkv * 4), *ow = malloc(nout * 4), *lse = calloc(nlse, 4), *lse_d = malloc(nlse * 4);
    float *att = malloc((size_t)B * NH * T * T * 4);
    float *scratch = malloc(dt_kernels_cpu.attention_scratch(B, T, C, NH, NKV, t) * sizeof *scratch + 1);
    dt_kernels_cpu.convert(kc, qw, DT_F32, q16, t, nqkv);
    dt_kernels_cpu.attention_forward(kc, out, lse, q16, t, B, T, C, NH, NKV);
    dt_kernels_cpu.convert(kc, ow, DT_F32, out, t, nout);
    softmax_of(qw, B, T, C, NH, NKV, att, lse_d);
    struct tc_case tc = {.B = B, .T = T, .C = C, .NH = NH, .NKV = NKV, .hs = C / NH, .q = qw, .att = att, .lse = lse};
    tc.u = t == DT_BF16 ? 1.0 / 256 : 1.0 / 2048;
    tc.f = t == DT_BF16 ? 0.0 : 1.0 / 33554432.0;
    tc.scale = 1.0f / sqrtf((float)tc.hs);
    double *bout = malloc(nout * sizeof *bout), *blse = malloc(nlse * sizeof *blse), *bd = malloc(nqkv * sizeof *bd);
    tc_forward_bounds(&tc, bout, blse);
    tc_backward_bounds(&tc, dout, ow, bd);

    void *gqkv = dev(q16, nqkv * 2), *gout = dev(NULL, nout * 2), *gd = dev(d16, nqkv * 2), *gd2 = dev(d16, nqkv * 2);
    void *gd3 = dev(d16, nqkv * 2);
    float *glse = dev(NULL, nlse * 4), *gdout = dev(dout, nout * 4);
    /* the scratch dkv2 needs (plan.h), so that it can be switched on below */
    gpu->set_tries(tries | DT_CUDA_TRY_DKV2);
    float *gscr = dev(NULL, gpu->attention_scratch(B, T, C, NH, NKV, (int)t) * 4);
    gpu->set_tries(tries);
    CK(gpu->attention_forward(gout, glse, gqkv, (int)t, B, T, C, NH, NKV));
    uint16_t *fo = back_typed(gout, nout, t);
    float *fl = back(glse, nlse);
    double d = tc_excess(fo, out, bout, nout, t);
    snprintf(what, sizeof what, "attention tensor cores forward %s: out vs the CPU, in units of its bound", shape);
    report(d <= 1.0, what, d);
    d = 0;
    for (size_t i = 0; i < nlse; i++) {
        double e = fabs((double)fl[i] - lse[i]) / blse[i];
        if (!(e <= d)) d = e; /* a NaN counts as a failure */
    }
    snprintf(what, sizeof what, "attention tensor cores forward %s: lse vs the CPU, in units of its bound", shape);
    report(d <= 1.0, what, d);
    CK(gpu->to_device(gout, out, nout * 2));
    CK(gpu->to_device(glse, lse, nlse * 4));
    dt_kernels_cpu.attention_backward(kc, d16, dout, q16, out, lse, scratch, t, B, T, C, NH, NKV);
    CK(gpu->attention_backward(gd, gdout, gqkv, gout, glse, gscr, (int)t, B, T, C, NH, NKV));
    CK(gpu->attention_backward(gd2, gdout, gqkv, gout, glse, gscr, (int)t, B, T, C, NH, NKV));
    uint16_t *fd = back_typed(gd, nqkv, t), *fd2 = back_typed(gd2, nqkv, t);
    d = tc_excess(fd, d16, bd, nqkv, t);
    snprintf(what, sizeof what, "attention tensor cores backward %s: dqkv written, vs the CPU, in units of its bound",
             shape);
    report(d <= 1.0, what, d);
    snprintf(what, sizeof what, "attention tensor cores backward %s: the same bits on a second run", shape);
    report(memcmp(fd, fd2, nqkv * 2) == 0, what, (double)(memcmp(fd, fd2, nqkv * 2) != 0));
    /* the other dq kernel (dq2 on trial, or dq in use), the other dK, dV kernel (dkv2 on trial, or dkv
     * in use) and dkv3 (dkv2 in tiles of 32 queries): the same sums in the same order, the same bits,
     * each run into junk; the flags: (tries without clear) ^ flip */
    static const struct {
        unsigned clear, flip;
        const char *pair;
    } others[] = {{0, DT_CUDA_TRY_DQ2, "dq and dq2"},
                  {0, DT_CUDA_TRY_DKV2, "dkv and dkv2"},
                  {DT_CUDA_TRY_DKV2, DT_CUDA_TRY_DKV3, "dkv and dkv3"}};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        CK(gpu->to_device(gd3, d16, nqkv * 2));
        gpu->set_tries((tries & ~others[i].clear) ^ others[i].flip);
        CK(gpu->attention_backward(gd3, gdout, gqkv, gout, glse, gscr, (int)t, B, T, C, NH, NKV));
        gpu->set_tries(tries);
        uint16_t *fd3 = back_typed(gd3, nqkv, t);
        bool same = memcmp(fd, fd3, nqkv * 2) == 0;
        snprintf(what, sizeof what, "attention tensor cores backward %s: %s give the same bits", shape, others[i].pair);
        report(same, what, (double)!same);
        free(fd3);
    }
    void *all[] = {gqkv, gout, gd, gd2, gd3, glse, gdout, gscr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(qkv), free(dout), free(junk), free(q16), free(d16), free(out), free(qw), free(ow), free(lse), free(lse_d);
    free(att), free(scratch), free(bout), free(blse), free(bd), free(fo), free(fl), free(fd), free(fd2);
}

/* bf16 and fp16, head sizes 64 and 128, T within one 64-row tile, at its edges and over several
 * (partial last tiles: 63, 65, 200; the backward's 32-row tiles at 128 too); at head size 64, four
 * query heads on two key/value heads and on one, each group's sums split per query head; and enough
 * blocks of keys (B 64) that a dkv block sums two query heads: whole groups at head sizes 64 and 128,
 * and a group of four split in two */
static void attention_tc_cases(void)
{
    static const int Ts[] = {1, 63, 64, 65, 200}, hss[] = {64, 128};
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 2; i++)
            for (size_t j = 0; j < sizeof Ts / sizeof Ts[0]; j++) attention_tc(2, Ts[j], 2 * hss[i], 2, 2, types[k]);
        for (int NKV = 2; NKV >= 1; NKV--)
            for (size_t j = 1; j < sizeof Ts / sizeof Ts[0]; j++) attention_tc(2, Ts[j], 256, 4, NKV, types[k]);
        attention_tc(64, 65, 256, 4, 2, types[k]);
        attention_tc(64, 65, 512, 4, 2, types[k]);
        attention_tc(64, 65, 256, 4, 1, types[k]);
    }
}

/* how backward sums a key/value head's gradient over its group: 0 in one block (multi-head
 * attention's too), 1 split in part, 2 split per query head */
static int kv_sum_kind(int B, int T, int NH, int NKV)
{
    int S = dt_attn_kv_splits(B, T, NH, NKV);
    return S == 1 ? 0 : S < NH / NKV ? 1 : 2;
}

static void attention_shapes(void)
{
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    /* B, T, C, NH, NKV: head sizes padded to 32, 64 and 128 columns (16, 24, 100 not multiples of
     * anything), T not a multiple of the 32-row tiles nor of the blocks' 16 or 32 own rows, T = 1;
     * GPT-2's head size 64 and a 128. Then grouped-query heads, half as many and one (multi-query),
     * at head sizes 24 and 32 (the 16-bit CUDA-core kernels), 64 and 128 (the tensor cores), a
     * group of 6, and key/value sums in one block (B NKV blocks of keys reach DT_ATTN_KV_BLOCKS),
     * split in part and split per query head. */
    static const int shapes[][5] = {{2, 37, 48, 2, 2},    {3, 33, 64, 4, 4},     {2, 100, 128, 2, 2},
                                    {1, 70, 256, 2, 2},   {1, 45, 200, 2, 2},    {2, 1, 64, 1, 1},
                                    {1, 131, 256, 4, 4},  {1, 77, 256, 2, 2},    {2, 37, 96, 4, 2},
                                    {3, 45, 96, 4, 1},    {4, 64, 192, 6, 1},    {32, 128, 256, 8, 2},
                                    {2, 100, 256, 4, 2},  {1, 70, 256, 4, 1},    {1, 70, 512, 4, 2},
                                    {32, 100, 512, 8, 4}, {32, 100, 512, 8, 2},  {64, 64, 256, 8, 4}};
    int kinds[3] = {0};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int B = shapes[i][0], T = shapes[i][1], C = shapes[i][2], NH = shapes[i][3], NKV = shapes[i][4];
        attention_f32(ctx, B, T, C, NH, NKV);
        /* head sizes 64 and 128 in 16 bits run on the tensor cores, with their own bounds */
        int hs = C / NH;
        (hs == 64 || hs == 128 ? attention_tc : attention_lp)(B, T, C, NH, NKV, i % 2 ? DT_F16 : DT_BF16);
        if (NKV < NH) kinds[kv_sum_kind(B, T, NH, NKV)]++;
    }
    report(kinds[0] && kinds[1] && kinds[2],
           "attention's grouped-query cases sum key/value gradients in one block, split in part, split per head",
           (double)!kinds[0] + !kinds[1] + !kinds[2]);
    /* refused before any launch, so no buffers */
    int e1 = gpu->attention_forward(NULL, NULL, NULL, (int)DT_F32, 1, 4, 272, 2, 2);
    int e2 = gpu->attention_forward(NULL, NULL, NULL, (int)DT_BF16, 1, 4, 65, 2, 2);
    int e3 = gpu->attention_forward(NULL, NULL, NULL, 7, 1, 4, 64, 2, 2);
    report(e1 != 0 && e2 != 0 && e3 != 0, "attention fused refuses head size 136, heads not dividing C, an unknown type",
           (double)(e1 == 0) + (e2 == 0) + (e3 == 0));
    int g[6] = {gpu->attention_forward(NULL, NULL, NULL, (int)DT_F32, 1, 4, 64, 4, 3),
                gpu->attention_forward(NULL, NULL, NULL, (int)DT_BF16, 1, 4, 256, 4, 0),
                gpu->attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, (int)DT_F16, 1, 4, 256, 4, 3),
                gpu->attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, (int)DT_F32, 1, 4, 64, 2, 4),
                gpu->attention_forward_ref(ctx, NULL, NULL, NULL, 1, 4, 64, 4, 3),
                gpu->attention_backward_ref(ctx, NULL, NULL, NULL, NULL, NULL, 1, 4, 64, 4, 0)};
    int accepted = 0;
    for (int i = 0; i < 6; i++) accepted += g[i] == 0;
    report(!accepted, "attention refuses key/value heads not dividing the query heads, or none (every path)",
           (double)accepted);
    gpu->ctx_destroy(ctx);
}

/*
 * Generation over a cache of keys and values (attention_cached, kernels.h) against the CPU kernel on
 * the same inputs, as a model calls it: a prompt of PROMPT rows at position 0, then one row a step
 * up to the cache's TC rows (past the kernel's 32-key tiles twice). After every call, out within
 * the forward's tolerances (act_diff: 1e-5 in fp32, one ulp more in 16 bits; the two sum in other
 * orders) and both caches the CPU's bits, rows not yet written still zero. Then the rows of every
 * step together against the CPU's attention_forward on the whole sequence: the same queries over
 * the same keys, up to the order of the sums.
 */
#define PROMPT 7
#define TC 70

static void attention_cached(int B, int NH, int NKV, int hs, enum dt_dtype t)
{
    int C = NH * hs, W = dt_attn_width(C, NH, NKV);
    size_t esz = dt_dtype_size(t), nqkv = (size_t)B * TC * W, nout = (size_t)B * TC * C;
    size_t ncache = (size_t)B * TC * NKV * hs;
    char shape[112], what[224];
    snprintf(shape, sizeof shape, "%s B %d NH %d NKV %d head size %d, a prompt of %d then one a step to %d",
             dt_dtype_str(t), B, NH, NKV, hs, PROMPT, TC);
    float *x = randn(nqkv, 59);
    for (size_t i = 0; i < nqkv; i++) x[i] *= 0.5f; /* scores of about a unit, as attention_f32's */
    char *qkv = typed(x, nqkv, t), *step = malloc((size_t)B * PROMPT * W * esz);
    char *kcpu = calloc(ncache, esz), *vcpu = calloc(ncache, esz), *ocpu = malloc((size_t)B * PROMPT * C * esz);
    char *rows = malloc(nout * esz), *ref = malloc(nout * esz);
    float *lse = malloc((size_t)B * NH * TC * sizeof *lse);
    void *gq = dev(NULL, (size_t)B * PROMPT * W * esz), *go = dev(NULL, (size_t)B * PROMPT * C * esz);
    void *gk = dev(NULL, ncache * esz), *gv = dev(NULL, ncache * esz);
    double d = 0;
    int caches_differ = 0;
    for (int pos = 0, n = PROMPT; pos < TC; pos += n, n = 1) {
        /* the call's qkv (B,n,W): rows pos .. pos + n - 1 of each batch row's sequence */
        for (int b = 0; b < B; b++)
            memcpy(step + (size_t)b * n * W * esz, qkv + ((size_t)b * TC + pos) * W * esz, (size_t)n * W * esz);
        CK(gpu->to_device(gq, step, (size_t)B * n * W * esz));
        CK(gpu->attention_cached(go, gq, gk, gv, (int)t, B, n, pos, TC, C, NH, NKV));
        dt_kernels_cpu.attention_cached(kc, ocpu, step, kcpu, vcpu, t, B, n, pos, TC, C, NH, NKV);
        char *o = back_typed(go, (size_t)B * n * C, t), *k = back_typed(gk, ncache, t), *v = back_typed(gv, ncache, t);
        d = fmax(d, act_diff(o, ocpu, (size_t)B * n * C, t));
        caches_differ += memcmp(k, kcpu, ncache * esz) != 0 || memcmp(v, vcpu, ncache * esz) != 0;
        for (int b = 0; b < B; b++)
            memcpy(rows + ((size_t)b * TC + pos) * C * esz, o + (size_t)b * n * C * esz, (size_t)n * C * esz);
        free(o), free(k), free(v);
    }
    snprintf(what, sizeof what, "attention cached %s: out vs the CPU at every step", shape);
    report(d < 1e-5, what, d);
    snprintf(what, sizeof what, "attention cached %s: the key and value caches the CPU's bits at every step", shape);
    report(!caches_differ, what, (double)caches_differ);
    dt_kernels_cpu.attention_forward(kc, ref, lse, qkv, t, B, TC, C, NH, NKV);
    d = act_diff(rows, ref, nout, t);
    snprintf(what, sizeof what, "attention cached %s: the steps' rows vs the CPU's attention_forward on the sequence",
             shape);
    report(d < 1e-5, what, d);
    void *all[] = {gq, go, gk, gv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(qkv), free(step), free(kcpu), free(vcpu), free(ocpu), free(rows), free(ref), free(lse);
}

/* fp32, bf16 and fp16; B 1 and 2; multi-head, multi-query and grouped-query heads at head sizes 16,
 * 64 and 128 (a warp's columns partly idle, whole, several), and 200 and 256 (the second column of
 * a thread, partly and whole); then the shapes it refuses */
static void attention_cached_cases(void)
{
    static const int heads[][2] = {{4, 4}, {4, 1}, {8, 2}}, hss[] = {16, 64, 128};
    for (int k = 0; k < 3; k++) {
        for (int B = 1; B <= 2; B++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) attention_cached(B, heads[i][0], heads[i][1], hss[j], act_types[k]);
        attention_cached(1, 4, 2, 200, act_types[k]);
        attention_cached(2, 2, 1, 256, act_types[k]);
    }
    /* refused before any launch, so no buffers */
    int e[4] = {gpu->attention_cached(NULL, NULL, NULL, NULL, (int)DT_F32, 1, 1, 0, 4, 544, 2, 2),
                gpu->attention_cached(NULL, NULL, NULL, NULL, (int)DT_BF16, 1, 2, 3, 4, 256, 4, 4),
                gpu->attention_cached(NULL, NULL, NULL, NULL, (int)DT_F16, 1, 1, 0, 4, 256, 4, 3),
                gpu->attention_cached(NULL, NULL, NULL, NULL, 7, 1, 1, 0, 4, 256, 4, 4)};
    int accepted = 0;
    for (int i = 0; i < 4; i++) accepted += e[i] == 0;
    report(!accepted,
           "attention cached refuses head size 272, pos + n past the cache, key/value heads not dividing the query "
           "heads, an unknown type",
           (double)accepted);
}

int main(void)
{
    int rc = cuda_check_start();
    if (rc) return rc;
    attention_shapes();
    attention_tc_cases();
    attention_cached_cases();
    /* dq, dK and dV on trial (plan.h's DTRUN_CUDA_TRY dq2, dkv2), held to the same checks; then no
     * group split (kv1) */
    gpu->set_tries(tries = DT_CUDA_TRY_DQ2 | DT_CUDA_TRY_DKV2);
    report_prefix = "on trial (dq2, dkv2): ";
    attention_tc_cases();
    gpu->set_tries(tries = DT_CUDA_TRY_KV1);
    report_prefix = "on trial (kv1): ";
    attention_tc_cases();
    gpu->set_tries(tries = 0);
    return cuda_check_finish();
}
