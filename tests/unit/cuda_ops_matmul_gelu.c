/*
 * cuda_ops_matmul_gelu.c - test_cuda_ops.gpu's cases for GELU in the matmuls' epilogues (the gelu
 * trial): GELU_AUX_BIAS forward, DGELU backward, against the CPU twins (test_cuda_ops.c runs them).
 */
#include <math.h>
#include <string.h>
#include "core/half.h"
#include "cuda_check.h"
#include "cuda_ops_cases.h"
#include "kernels/cpu/cpu.h"

/* The spacing of 16-bit values of type t at x's magnitude */
static double ulp16_at(double x, enum dt_dtype t)
{
    uint16_t h = t == DT_BF16 ? dt_bf16_from_f32((float)fabs(x)) : dt_f16_from_f32((float)fabs(x));
    return wide16((uint16_t)(h + 1), t) - wide16(h, t);
}

/*
 * GELU in the matmul (DTRUN_CUDA_TRY's gelu: cuBLASLt's GELU_AUX_BIAS and DGELU epilogues, or the
 * ops apart where a shape is not aligned for them) against the CPU's composition (kernels/formulas.h's
 * tanh GELU). cuBLASLt does not document its GELU; it may evaluate tanh approximately (CUTLASS's
 * epilogues use tanh.approx.f32, relative error under 2^-10), so each check allows that much in t =
 * tanh(u): gelu = p (1 + t) / 2 moves by |p| |dt| / 2, gelu' = (1 + t) / 2 + p (1 - t^2) u' / 2 by
 * |1/2 - p t u'| |dt|, with u' = 0.79788 (1 + 0.134145 p^2). pre within the matmul's bound and an
 * ulp; out, which the epilogue takes of the unrounded sum: GELU's slope (under 1.13) times an ulp
 * of pre and the sum's bound, an ulp of out, and tanh's allowance; dpre = gelu'(pre) (dout .
 * weight): 1.2 times dinp's bound, an ulp, and tanh's allowance times |dinp|; dweight within its
 * bound, dbias bit for bit. Each check prints the largest difference in its allowances.
 */
static double tanh_t(double p) { return tanh(0.7978845608 * (p + 0.044715 * p * p * p)); }

static double gelu_allow(double p) { return 0.5 * fabs(p) * fabs(tanh_t(p)) / 1024; }

static double dgelu_allow(double p)
{
    double t = tanh_t(p), du = 0.7978845608 * (1 + 0.134145 * p * p);
    return fabs(0.5 - p * t * du) * fabs(t) / 1024;
}

/* the spacing of 16-bit values of type t at the larger of two values' magnitudes */
static double ulp16_of2(double a, double b, enum dt_dtype t) { return ulp16_at(fmax(fabs(a), fabs(b)), t); }

/* An exact case: x in {-4..4}/4, w in {-2..2}/8, 16 terms, no bias: every sum is exact in 16 bits, so
 * pre is the CPU's to the bit and out differs from the tanh GELU of it only by GELU's evaluation;
 * pre spans [-3, 4], where an erf GELU is several ulps off tanh's (2.7% at -2.5). The largest
 * difference is printed, in ulps of out. */
void matmul_gelu_exact(void *ctx, enum dt_dtype lp)
{
    int BT = 64, C = 16, OC = 64;
    size_t nx = (size_t)BT * C, nw = (size_t)OC * C, ny = (size_t)BT * OC, es = dt_dtype_size(lp);
    float *x = malloc(nx * 4), *w = malloc(nw * 4);
    /* pre in [-3, 4] in steps of 1/32 (checked below) */
    for (size_t i = 0; i < nx; i++) x[i] = (float)((int)((i / C + i % C / 8) % 9) - 4) / 4.0f;
    for (size_t i = 0; i < nw; i++) {
        size_t c = i / C, k = i % C;
        w[i] = (float)((int)((c + k / 8 * (1 + c % 3)) % 5) - 2) / 8.0f;
    }
    void *xt = typed(x, nx, lp), *pre = malloc(ny * es), *out = malloc(ny * es);
    void *gx = dev(xt, nx * es), *gpre = dev(NULL, ny * es), *gout = dev(NULL, ny * es);
    float *gw = dev(w, nw * 4);
    dt_cpu_matmul_gelu_forward_lp(kc, out, pre, xt, w, NULL, DT_F32, BT, C, OC, lp);
    CK(gpu->matmul_gelu_forward(ctx, gout, gpre, gx, gw, NULL, (int)DT_F32, BT, C, OC, (int)lp));
    void *hpre = back_typed(gpre, ny, lp), *hout = back_typed(gout, ny, lp);
    double worst = 0, ulps = 0, lo = 0, hi = 0;
    for (size_t i = 0; i < ny; i++) {
        double p = wide16(((uint16_t *)pre)[i], lp), o = wide16(((uint16_t *)out)[i], lp);
        double g = wide16(((uint16_t *)hout)[i], lp), ulp = ulp16_of2(g, o, lp);
        worst = fmax(worst, fmax(0.0, fabs(g - o) - ulp) / (gelu_allow(p) + 1e-30));
        ulps = fmax(ulps, fabs(g - o) / ulp);
        lo = fmin(lo, p), hi = fmax(hi, p);
    }
    char what[160];
    printf("# matmul_gelu_forward exact %s: pre in [%g, %g], out at most %.3g ulp from the tanh GELU\n", dt_dtype_str(lp),
           lo, hi, ulps);
    snprintf(what, sizeof what, "matmul_gelu_forward %s, exact sums, no bias: pre bit for bit", dt_dtype_str(lp));
    report(memcmp(hpre, pre, ny * es) == 0 && lo <= -3 && hi >= 3, what, (double)(memcmp(hpre, pre, ny * es) != 0));
    snprintf(what, sizeof what, "matmul_gelu_forward %s, exact sums: gelu(pre) within an ulp and tanh's allowance",
             dt_dtype_str(lp));
    report(worst <= 1.0, what, worst);
    free(x), free(w), free(xt), free(pre), free(out), free(hpre), free(hout);
    gpu->free(gx), gpu->free(gpre), gpu->free(gout), gpu->free(gw);
}

void matmul_gelu_case(void *ctx, enum dt_dtype lp, int BT, int C, int OC)
{
    size_t nx = (size_t)BT * C, nw = (size_t)OC * C, ny = (size_t)BT * OC, es = dt_dtype_size(lp);
    char what[160], shape[64];
    snprintf(shape, sizeof shape, "%s %dx%dx%d", dt_dtype_str(lp), BT, C, OC);
    float *x = randn(nx, 90), *w = randn(nw, 91), *b = randn(OC, 92);
    for (size_t i = 0; i < nw; i++) w[i] *= 0.1f; /* sums of a few units: GELU's curved part */
    void *xt = typed(x, nx, lp), *pre = malloc(ny * es), *out = malloc(ny * es);
    round_host(x, nx, lp);
    float *wr = malloc(nw * 4), *br = malloc(OC * 4);
    memcpy(wr, w, nw * 4), memcpy(br, b, OC * 4);
    round_host(wr, nw, lp), round_host(br, OC, lp);
    void *gx = dev(xt, nx * es), *gpre = dev(NULL, ny * es), *gout = dev(NULL, ny * es);
    float *gw = dev(w, nw * 4), *gb = dev(b, OC * 4);
    dt_cpu_matmul_gelu_forward_lp(kc, out, pre, xt, w, b, DT_F32, BT, C, OC, lp);
    CK(gpu->matmul_gelu_forward(ctx, gout, gpre, gx, gw, gb, (int)DT_F32, BT, C, OC, (int)lp));
    void *hpre = back_typed(gpre, ny, lp), *hout = back_typed(gout, ny, lp);
    double *S = bound(x, C, 1, wr, C, 1, NULL, br, BT, OC, C);
    double dp = mm_excess(hpre, pre, S, ny, C, lp), dout = 0;
    for (size_t i = 0; i < ny; i++) {
        double p = wide16(((uint16_t *)pre)[i], lp), o = wide16(((uint16_t *)out)[i], lp);
        double g = wide16(((uint16_t *)hout)[i], lp);
        double tol = 1.13 * (ulp16_at(p, lp) + 3.0 * (C + 2) * U32 * S[i]) + ulp16_of2(g, o, lp) + gelu_allow(p);
        double d = fabs(g - o) / tol;
        if (!(d <= dout)) dout = d;
    }
    snprintf(what, sizeof what, "matmul_gelu_forward %s: pre within the matmul's bound", shape);
    report(dp <= 1.0, what, dp);
    snprintf(what, sizeof what, "matmul_gelu_forward %s: gelu(pre) within GELU's slope times pre's error", shape);
    report(dout <= 1.0, what, dout);

    /* backward of the next layer (OC2 outputs) that read gelu(pre): dpre, its dweight and dbias */
    int OC2 = C;
    size_t nw2 = (size_t)OC2 * OC, nd = (size_t)BT * OC2;
    float *w2 = randn(nw2, 93), *dy = randn(nd, 94), *dw2 = randn(nw2, 95), *db2 = randn(OC2, 96);
    void *dyt = typed(dy, nd, lp), *dpre = malloc(ny * es);
    float *gw2 = dev(w2, nw2 * 4), *gdw2 = dev(dw2, nw2 * 4), *gdb2 = dev(db2, OC2 * 4);
    void *gdy = dev(dyt, nd * es), *gdpre = dev(NULL, ny * es), *gin = dev(out, ny * es);
    CK(gpu->to_device(gpre, pre, ny * es)); /* both sides from the CPU's pre and gelu(pre) */
    dt_cpu_matmul_dgelu_backward_lp(kc, dpre, pre, dw2, db2, dyt, lp, out, w2, DT_F32, BT, OC, OC2, lp, 0);
    CK(gpu->matmul_dgelu_backward(ctx, gdpre, gpre, gdw2, gdb2, gdy, (int)lp, gin, gw2, (int)DT_F32, BT, OC, OC2,
                                   (int)lp, 0));
    void *hdpre = back_typed(gdpre, ny, lp);
    float *hdw = back(gdw2, nw2), *hdb = back(gdb2, OC2), *dyr = malloc(nd * 4), *w2r = malloc(nw2 * 4), *inr = malloc(ny * 4);
    memcpy(dyr, dy, nd * 4), memcpy(w2r, w2, nw2 * 4);
    round_host(dyr, nd, lp), round_host(w2r, nw2, lp);
    for (size_t i = 0; i < ny; i++) inr[i] = (float)wide16(((uint16_t *)out)[i], lp);
    double *Sx = bound(dyr, OC2, 1, w2r, 1, OC, NULL, NULL, BT, OC, OC2);
    float *dw0 = randn(nw2, 95);
    double *Sw = bound(dyr, 1, OC2, inr, 1, OC, dw0, NULL, OC2, OC, BT);
    double dd = 0, dw = mm_excess(hdw, dw2, Sw, nw2, BT, DT_F32);
    for (int i = 0; i < BT; i++)
        for (int c = 0; c < OC; c++) { /* dinp = dout . weight in double, for tanh's allowance */
            size_t at = (size_t)i * OC + c;
            double dinp = 0;
            for (int k = 0; k < OC2; k++) dinp += (double)dyr[(size_t)i * OC2 + k] * w2r[(size_t)k * OC + c];
            double p = wide16(((uint16_t *)pre)[at], lp), r = wide16(((uint16_t *)dpre)[at], lp);
            double g = wide16(((uint16_t *)hdpre)[at], lp);
            double tol = 1.2 * 3.0 * (OC2 + 2) * U32 * Sx[at] + ulp16_of2(g, r, lp) + fabs(dinp) * dgelu_allow(p);
            dd = fmax(dd, fabs(g - r) / tol);
        }
    snprintf(what, sizeof what, "matmul_dgelu_backward %s: dpre within gelu' times dinp's bound and tanh's allowance",
             shape);
    report(dd <= 1.0, what, dd);
    snprintf(what, sizeof what, "matmul_dgelu_backward %s: dweight added within its bound, dbias bit for bit", shape);
    report(dw <= 1.0 && memcmp(hdb, db2, OC2 * 4) == 0, what, fmax(dw, maxrel(hdb, db2, OC2)));
    free(S), free(Sx), free(Sw), free(hpre), free(hout), free(hdpre), free(hdw), free(hdb);
    free(x), free(w), free(b), free(xt), free(pre), free(out), free(wr), free(br), free(w2), free(dy), free(dw2);
    free(db2), free(dyt), free(dpre), free(dyr), free(w2r), free(inr), free(dw0);
    void *all[] = {gx, gpre, gout, gw, gb, gw2, gdw2, gdb2, gdy, gdpre, gin};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
}
