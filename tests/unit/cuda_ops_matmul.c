/*
 * cuda_ops_matmul.c - test_cuda_ops.gpu's cases for the matmuls through cuBLASLt against the CPU
 * within fp32 accumulation's error bound, and bgradb (on trial), against the CPU twins
 * (test_cuda_ops.c runs them).
 */
#include <math.h>
#include <string.h>
#include "core/half.h"
#include "cuda_check.h"
#include "cuda_ops_cases.h"
#include "kernels/cuda/plan.h"

/* S(r, c) = sum_k |A(r, k) B(c, k)| + |init(r, c)| + |bias(c)|, A (R, K) and B (Cn, K) row-major
 * with strides (sa_r, sa_k) and (sb_c, sb_k); init and bias may be NULL */
double *bound(const float *A, size_t sa_r, size_t sa_k, const float *B, size_t sb_c, size_t sb_k, const float *init,
                     const float *bias, int R, int Cn, int K)
{
    double *S = malloc((size_t)R * Cn * sizeof *S);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < Cn; c++) {
            double s = (init ? fabs(init[(size_t)r * Cn + c]) : 0) + (bias ? fabs(bias[c]) : 0);
            for (int k = 0; k < K; k++) s += fabs((double)A[r * sa_r + k * sa_k] * B[c * sb_c + k * sb_k]);
            S[(size_t)r * Cn + c] = s;
        }
    return S;
}

/* got and ref of type t (fp32, or 16-bit: one ulp of the type off first), against 3 (K + 2) u S */
static double mm_excess_at(const void *got, const void *ref, const double *S, size_t n, int K, enum dt_dtype t,
                           size_t *worst)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fmax(0.0, off_less_ulp(got, ref, i, t)) / (3.0 * (K + 2) * U32 * S[i] + 1e-30);
        if (!(d <= m)) m = d, *worst = i;
    }
    return m;
}

double mm_excess(const void *got, const void *ref, const double *S, size_t n, int K, enum dt_dtype t)
{
    size_t worst = 0;
    return mm_excess_at(got, ref, S, n, K, t, &worst);
}

/* Where a 16-bit output is out of bounds, what each side's unrounded (fp32-output) sum was, so a
 * failure tells which side did not round once: TAP diagnostics. */
static double rounded16(float x, enum dt_dtype t)
{
    return wide16(t == DT_BF16 ? dt_bf16_from_f32(x) : dt_f16_from_f32(x), t);
}

static void mm_explain(const uint16_t *got, const uint16_t *ref, const float *got32, const float *ref32, size_t i,
                       const double *S, int K, enum dt_dtype t)
{
    printf("# worst element %zu: gpu %.9g (its fp32 output %.9g, rounded %.9g), cpu %.9g (its fp32 output %.9g, "
           "rounded %.9g), bound 3 (K+2) u S = %.3g\n",
           i, wide16(got[i], t), got32[i], rounded16(got32[i], t), wide16(ref[i], t), ref32[i],
           rounded16(ref32[i], t), 3.0 * (K + 2) * U32 * S[i]);
}

/* fp32 values rounded to lp and back, in place: the operands as the 16-bit products see them */
void round_host(float *x, size_t n, enum dt_dtype lp)
{
    if (lp != DT_F32) dt_kernels_cpu.round_lp(kc, x, x, n, lp);
}

/*
 * One shape, one operand type lp (fp32: matmul_forward/_backward; bf16, fp16: the _lp twins with
 * inp of type lp) against the CPU: forward into fp32 (and for lp, into lp: rounded once), backward
 * from dout in fp32 (rounded to lp there) and in lp, accumulating or overwriting (set). dbias: the
 * column sums of the rounded dout in the CPU's order, bit for bit.
 */
static void matmul_case(void *ctx, enum dt_dtype lp, int BT, int C, int OC, bool biased, unsigned set)
{
    size_t nx = (size_t)BT * C, nw = (size_t)OC * C, ny = (size_t)BT * OC, es = dt_dtype_size(lp);
    char what[160], shape[96];
    snprintf(shape, sizeof shape, "%s %dx%dx%d%s", dt_dtype_str(lp), BT, C, OC, biased ? "" : ", no bias");
    float *x = randn(nx, 30), *w = randn(nw, 31), *b = randn(OC, 32), *dy = randn(ny, 33);
    float *dx0 = randn(nx, 34), *dw0 = randn(nw, 35), *db0 = randn(OC, 36);
    void *xt = typed(x, nx, lp); /* inp of type lp */
    round_host(x, nx, lp);
    float *wr = malloc(nw * 4), *dyr = malloc(ny * 4);
    memcpy(wr, w, nw * 4), memcpy(dyr, dy, ny * 4);
    round_host(wr, nw, lp), round_host(dyr, ny, lp);
    const float *cb = biased ? b : NULL;
    void *gx = dev(xt, nx * es);
    float *gw = dev(w, nw * 4), *gb = dev(b, OC * 4), *gdy = dev(dy, ny * 4);
    const float *gcb = biased ? gb : NULL;

    /* forward, out of type ot: fp32, and lp itself (the fp32 outputs kept to explain a failure) */
    float *out32 = NULL, *h32 = NULL;
    for (int o = 0; o < (lp == DT_F32 ? 1 : 2); o++) {
        enum dt_dtype ot = o ? lp : DT_F32;
        size_t os = dt_dtype_size(ot), worst = 0;
        void *out = malloc(ny * os), *gout = dev(NULL, ny * os);
        if (lp == DT_F32) dt_kernels_cpu.matmul_forward(kc, out, x, w, cb, BT, C, OC);
        else dt_kernels_cpu.matmul_forward_lp(kc, out, ot, xt, w, cb, DT_F32, BT, C, OC, lp);
        CK(gpu->matmul_forward(ctx, gout, (int)ot, gx, gw, gcb, (int)DT_F32, BT, C, OC, (int)lp));
        void *h = back_typed(gout, ny, ot);
        double *S = bound(x, C, 1, wr, C, 1, NULL, cb, BT, OC, C);
        double d = mm_excess_at(h, out, S, ny, C, ot, &worst);
        snprintf(what, sizeof what, "matmul_forward %s, out %s: within 3 (K+2) u sum|terms|", shape, dt_dtype_str(ot));
        report(d <= 1.0, what, d);
        if (o && !(d <= 1.0)) mm_explain(h, out, h32, out32, worst, S, C, ot);
        free(S);
        if (o) free(h), free(out);
        else out32 = out, h32 = h;
        gpu->free(gout);
    }
    free(out32), free(h32);

    /* backward from dout of type dt: fp32, and (16-bit lp) lp itself */
    for (int o = 0; o < (lp == DT_F32 ? 1 : 2); o++) {
        enum dt_dtype dt = o ? lp : DT_F32;
        void *dyt = typed(dy, ny, dt), *gdyt = dev(dyt, ny * dt_dtype_size(dt));
        float *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = malloc(OC * 4);
        memcpy(dx, dx0, nx * 4), memcpy(dw, dw0, nw * 4), memcpy(db, db0, OC * 4);
        float *gdx = dev(dx0, nx * 4), *gdw = dev(dw0, nw * 4), *gdb = dev(db0, OC * 4);
        float *cdb = biased ? db : NULL, *gcdb = biased ? gdb : NULL;
        if (lp == DT_F32) dt_kernels_cpu.matmul_backward(kc, dx, dw, cdb, dy, x, w, BT, C, OC, set);
        else dt_kernels_cpu.matmul_backward_lp(kc, dx, dw, cdb, dyt, dt, xt, w, DT_F32, BT, C, OC, lp, set);
        CK(gpu->matmul_backward(ctx, gdx, gdw, gcdb, gdyt, (int)dt, gx, gw, (int)DT_F32, BT, C, OC, (int)lp, set));
        float *hx = back(gdx, nx), *hw = back(gdw, nw), *hb = back(gdb, OC);
        /* dinp(BT, C) = dout(BT, OC) . weight(OC, C): K = OC; dweight(OC, C) = dout^T . inp: K = BT */
        double *Sx = bound(dyr, OC, 1, wr, 1, C, set & DT_SET_DINP ? NULL : dx0, NULL, BT, C, OC);
        double *Sw = bound(dyr, 1, OC, x, 1, C, set & DT_SET_DPARAMS ? NULL : dw0, NULL, OC, C, BT);
        double d = fmax(mm_excess(hx, dx, Sx, nx, OC, DT_F32), mm_excess(hw, dw, Sw, nw, BT, DT_F32));
        snprintf(what, sizeof what, "matmul_backward %s, dout %s: dinp, dweight %s, within 3 (K+2) u sum|terms|", shape,
                 dt_dtype_str(dt), set ? "overwritten" : "accumulate");
        report(d <= 1.0, what, d);
        if ((trying & DT_CUDA_TRY_BGRADB) && biased && lp != DT_F32) {
            /* bgradb: the BT rounded douts summed in cuBLASLt's order (on tensor cores, whose adds may
             * truncate: the gemm checks' 3 in place of 1), the CPU's in its own, and the add into db0
             * one rounding more. Where dout's rows are 16-byte aligned (the models' widths) the
             * epilogue must have run: dbias's bits then are not the column sums' */
            double worst = 0;
            for (int j = 0; j < OC; j++) {
                double S = set & DT_SET_DPARAMS ? 0 : fabs(db0[j]);
                for (int i = 0; i < BT; i++) S += fabs(dyr[(size_t)i * OC + j]);
                double r = fabs((double)hb[j] - db[j]) / (3.0 * (BT + 1) * U32 * S);
                if (!(r <= worst)) worst = r; /* a nan fails */
            }
            bool rows16 = OC * es % 16 == 0, taken = memcmp(hb, db, OC * 4) != 0;
            snprintf(what, sizeof what, "matmul_backward %s, dout %s: dbias %s in the BGRADB epilogue%s, within 3 (BT + 1) "
                     "u sum|terms| of the CPU's", shape, dt_dtype_str(dt), set ? "written" : "added",
                     rows16 ? " (16-byte rows: taken)" : taken ? "" : " (not taken: the sums apart)");
            report(worst <= 1.0 && (!rows16 || taken), what, worst);
        } else {
            snprintf(what, sizeof what, "matmul_backward %s, dout %s: dbias %s", shape, dt_dtype_str(dt),
                     biased ? "in the CPU's order, bit for bit" : "left alone when NULL");
            report(memcmp(hb, db, OC * 4) == 0, what, maxrel(hb, db, OC));
        }
        free(Sx), free(Sw), free(hx), free(hw), free(hb), free(dx), free(dw), free(db), free(dyt);
        gpu->free(gdx), gpu->free(gdw), gpu->free(gdb), gpu->free(gdyt);
    }
    void *all[] = {gx, gw, gb, gdy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0), free(xt), free(wr), free(dyr);
}

/* A weight and bias already of type lp (a strategy's 16-bit copy, wt == lp), used as they are: the
 * same bits as the fp32-weight path on those values kept in fp32, and the CPU's result within the
 * bound of the lp matmuls, out in fp32 and in lp. */
static void matmul_16bit_weight(void *ctx, enum dt_dtype lp, const int shape[3], bool biased)
{
    int BT = shape[0], C = shape[1], OC = shape[2];
    size_t nx = (size_t)BT * C, nw = (size_t)OC * C, ny = (size_t)BT * OC;
    float *x = randn(nx, 80), *w = randn(nw, 81), *b = randn(OC, 82), *dy = randn(ny, 83);
    float *dx = randn(nx, 84), *dw = randn(nw, 85), *db = randn(OC, 86), *out = calloc(ny, 4);
    uint16_t *w16 = malloc(nw * 2), *b16 = malloc((size_t)OC * 2), *x16 = malloc(nx * 2);
    uint16_t *out16 = malloc(ny * 2);
    dt_kernels_cpu.cast_to_lp(kc, w16, w, nw, lp);
    dt_kernels_cpu.cast_to_lp(kc, b16, b, OC, lp);
    dt_kernels_cpu.cast_to_lp(kc, x16, x, nx, lp);
    dt_kernels_cpu.cast_from_lp(kc, w, w16, nw, lp); /* the same values in fp32 */
    dt_kernels_cpu.cast_from_lp(kc, b, b16, OC, lp);
    dt_kernels_cpu.cast_from_lp(kc, x, x16, nx, lp);
    uint16_t *gx = dev(x16, nx * 2);
    float *gdy = dev(dy, ny * 4), *gw = dev(w, nw * 4), *gb = dev(b, OC * 4);
    uint16_t *gw16 = dev(w16, nw * 2), *gb16 = dev(b16, (size_t)OC * 2), *go16l = dev(NULL, ny * 2);
    /* out: fp32 weight, 16-bit weight; the gradients from the same start on each path */
    float *go32 = dev(NULL, ny * 4), *go16 = dev(NULL, ny * 4);
    float *gdx32 = dev(dx, nx * 4), *gdw32 = dev(dw, nw * 4), *gdb32 = dev(db, OC * 4);
    float *gdx16 = dev(dx, nx * 4), *gdw16 = dev(dw, nw * 4), *gdb16 = dev(db, OC * 4);
    const float *gcb = biased ? gb : NULL, *cb = biased ? b : NULL;
    const uint16_t *gcb16 = biased ? gb16 : NULL, *cb16 = biased ? b16 : NULL;
    float *cdb = biased ? db : NULL, *gcdb32 = biased ? gdb32 : NULL, *gcdb16 = biased ? gdb16 : NULL;
    CK(gpu->matmul_forward(ctx, go32, (int)DT_F32, gx, gw, gcb, (int)DT_F32, BT, C, OC, (int)lp));
    CK(gpu->matmul_forward(ctx, go16, (int)DT_F32, gx, gw16, gcb16, (int)lp, BT, C, OC, (int)lp));
    CK(gpu->matmul_forward(ctx, go16l, (int)lp, gx, gw16, gcb16, (int)lp, BT, C, OC, (int)lp));
    CK(gpu->matmul_backward(ctx, gdx32, gdw32, gcdb32, gdy, (int)DT_F32, gx, gw, (int)DT_F32, BT, C, OC, (int)lp, 0));
    CK(gpu->matmul_backward(ctx, gdx16, gdw16, gcdb16, gdy, (int)DT_F32, gx, gw16, (int)lp, BT, C, OC, (int)lp, 0));
    dt_kernels_cpu.matmul_forward_lp(kc, out, DT_F32, x16, w16, cb16, lp, BT, C, OC, lp);
    dt_kernels_cpu.matmul_forward_lp(kc, out16, lp, x16, w16, cb16, lp, BT, C, OC, lp);
    float *dyr = malloc(ny * 4), *dx0 = malloc(nx * 4), *dw0 = malloc(nw * 4);
    memcpy(dyr, dy, ny * 4), memcpy(dx0, dx, nx * 4), memcpy(dw0, dw, nw * 4);
    round_host(dyr, ny, lp);
    dt_kernels_cpu.matmul_backward_lp(kc, dx, dw, cdb, dy, DT_F32, x16, w16, lp, BT, C, OC, lp, 0);
    float *o32 = back(go32, ny), *o16 = back(go16, ny), *x32 = back(gdx32, nx), *x16h = back(gdx16, nx);
    float *w32h = back(gdw32, nw), *w16h = back(gdw16, nw), *b32h = back(gdb32, OC), *b16h = back(gdb16, OC);
    uint16_t *o16l = back_typed(go16l, ny, lp);
    char what[160];
    snprintf(what, sizeof what, "matmul_forward %s %dx%dx%d, %s weight%s: the fp32-weight path's bits", dt_dtype_str(lp),
             BT, C, OC, dt_dtype_str(lp), biased ? " and bias" : "");
    report(memcmp(o16, o32, ny * 4) == 0, what, maxrel(o16, o32, ny));
    snprintf(what, sizeof what, "matmul_backward %s %dx%dx%d, %s weight: the fp32-weight path's bits", dt_dtype_str(lp),
             BT, C, OC, dt_dtype_str(lp));
    int same = !memcmp(x16h, x32, nx * 4) && !memcmp(w16h, w32h, nw * 4) && !memcmp(b16h, b32h, OC * 4);
    report(same, what, fmax(maxrel(x16h, x32, nx), maxrel(w16h, w32h, nw)));
    double *S = bound(x, C, 1, w, C, 1, NULL, cb, BT, OC, C);
    double d = fmax(mm_excess(o16, out, S, ny, C, DT_F32), mm_excess(o16l, out16, S, ny, C, lp));
    snprintf(what, sizeof what, "matmul_forward %s %dx%dx%d, %s weight, out fp32 and %s, vs the CPU", dt_dtype_str(lp), BT,
             C, OC, dt_dtype_str(lp), dt_dtype_str(lp));
    report(d <= 1.0, what, d);
    double *Sx = bound(dyr, OC, 1, w, 1, C, dx0, NULL, BT, C, OC), *Sw = bound(dyr, 1, OC, x, 1, C, dw0, NULL, OC, C, BT);
    d = fmax(mm_excess(x16h, dx, Sx, nx, OC, DT_F32), mm_excess(w16h, dw, Sw, nw, BT, DT_F32));
    snprintf(what, sizeof what, "matmul_backward %s %dx%dx%d, %s weight, vs the CPU (dbias bit for bit)",
             dt_dtype_str(lp), BT, C, OC, dt_dtype_str(lp));
    report(d <= 1.0 && memcmp(b16h, db, OC * 4) == 0, what, d);
    void *all[] = {gx, gdy, gw, gb, gw16, gb16, go16l, go32, go16, gdx32, gdw32, gdb32, gdx16, gdw16, gdb16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(w), free(b), free(dy), free(dx), free(dw), free(db), free(out), free(w16), free(b16), free(x16);
    free(out16), free(o32), free(o16), free(x32), free(x16h), free(w32h), free(w16h), free(b32h), free(b16h), free(o16l);
    free(S), free(Sx), free(Sw), free(dyr), free(dx0), free(dw0);
}

/*
 * Two properties a tolerance cannot show. fp32 is multiplied in fp32, not TF32: with inp 1 + 2^-20
 * and weight 1 the output is exactly 1 + 2^-20 (TF32 keeps 10 bits of mantissa: it gives 1). A 16-bit
 * out is rounded once, after the bias: with inp (1, 2^-(m+1)), weight (1, 1) and bias 2^-20 (m the
 * type's mantissa bits) the sum 1 + 2^-(m+1) + 2^-20 rounds to 1 + 2^-m; rounding the product sum
 * first would give 1 (a tie, to even), and 1 + 2^-20 rounds to 1 again. Both with a 16-bit bias (the
 * epilogue's; at an address 2 bytes past an alignment, as a slice of the parameters may be) and an
 * fp32 one (rounded after the fp32 sum).
 */
static void matmul_exact(void *ctx)
{
    enum { N = 16 };
    float x[N * N] = {0}, w[N * N] = {0}, b[N], out[N * N];
    for (int i = 0; i < N; i++) x[i * N] = 1.0f + ldexpf(1.0f, -20), w[i * N] = 1.0f, b[i] = 0.0f;
    float *gx = dev(x, sizeof x), *gw = dev(w, sizeof w), *go = dev(NULL, sizeof out);
    CK(gpu->matmul_forward(ctx, go, (int)DT_F32, gx, gw, NULL, (int)DT_F32, N, N, N, (int)DT_F32));
    float *h = back(go, N * N);
    int bad = 0;
    for (int i = 0; i < N; i++) /* column 0 of weight's rows is 1: every output is x[i][0] */
        for (int o = 0; o < N; o++) bad += h[i * N + o] != 1.0f + ldexpf(1.0f, -20);
    report(bad == 0, "matmul_forward fp32: fp32 products, not TF32 (1 + 2^-20 kept)", bad);
    free(h);
    gpu->free(gx), gpu->free(gw), gpu->free(go);
    static const enum dt_dtype lp[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        int m = lp[k] == DT_BF16 ? 7 : 10;
        for (int i = 0; i < N * N; i++) x[i] = w[i] = 0.0f;
        for (int i = 0; i < N; i++) {
            x[i * N] = 1.0f, x[i * N + 1] = ldexpf(1.0f, -(m + 1));
            w[i * N] = w[i * N + 1] = 1.0f;
            b[i] = ldexpf(1.0f, -20);
        }
        uint16_t *x16 = typed(x, N * N, lp[k]), *w16 = typed(w, N * N, lp[k]), *b16 = typed(b, N, lp[k]);
        uint16_t b16off[N + 1] = {0};
        memcpy(b16off + 1, b16, N * 2);
        uint16_t cpu[N * N], want = lp[k] == DT_BF16 ? dt_bf16_from_f32(1.0f + ldexpf(1.0f, -m))
                                                     : dt_f16_from_f32(1.0f + ldexpf(1.0f, -m));
        uint16_t *gx16 = dev(x16, N * N * 2), *gw16 = dev(w16, N * N * 2), *gb16 = dev(b16off, (N + 1) * 2);
        uint16_t *go16 = dev(NULL, N * N * 2);
        float *gw32 = dev(w, sizeof w), *gb32 = dev(b, sizeof b);
        for (int f32 = 0; f32 < 2; f32++) {
            if (f32) CK(gpu->matmul_forward(ctx, go16, (int)lp[k], gx16, gw32, gb32, (int)DT_F32, N, N, N, (int)lp[k]));
            else CK(gpu->matmul_forward(ctx, go16, (int)lp[k], gx16, gw16, gb16 + 1, (int)lp[k], N, N, N, (int)lp[k]));
            dt_kernels_cpu.matmul_forward_lp(kc, cpu, lp[k], x16, f32 ? (const void *)w : w16, f32 ? (const void *)b : b16,
                                             f32 ? DT_F32 : lp[k], N, N, N, lp[k]);
            uint16_t *g = back_typed(go16, N * N, lp[k]);
            bad = 0;
            for (int i = 0; i < N * N; i++) bad += g[i] != want || cpu[i] != want;
            char what[128];
            snprintf(what, sizeof what, "matmul_forward %s, out %s, %s bias: the sum and the bias rounded once",
                     dt_dtype_str(lp[k]), dt_dtype_str(lp[k]), f32 ? "fp32" : dt_dtype_str(lp[k]));
            report(bad == 0, what, bad);
            free(g);
        }
        free(x16), free(w16), free(b16);
        gpu->free(gx16), gpu->free(gw16), gpu->free(gb16), gpu->free(go16), gpu->free(gw32), gpu->free(gb32);
    }
}

/* inp at an address 2 bytes past an alignment, as a slice of an activation or parameter buffer may
 * start: the CPU's result within the bound, bf16 */
static void matmul_offset(void *ctx)
{
    enum { BT = 33, C = 64, OC = 40 };
    float *x = randn(BT * C, 90), *w = randn(OC * C, 91), *b = randn(OC, 92);
    uint16_t *xt = typed(x, BT * C, DT_BF16), *ref = malloc(BT * OC * 2);
    round_host(x, BT * C, DT_BF16);
    float *wr = malloc(OC * C * 4), *br = malloc(OC * 4);
    memcpy(wr, w, OC * C * 4), memcpy(br, b, OC * 4);
    round_host(wr, OC * C, DT_BF16), round_host(br, OC, DT_BF16);
    uint16_t *gx = dev(NULL, (BT * C + 1) * 2), *go = dev(NULL, BT * OC * 2);
    float *gw = dev(w, OC * C * 4), *gb = dev(b, OC * 4);
    CK(gpu->to_device(gx + 1, xt, BT * C * 2));
    CK(gpu->matmul_forward(ctx, go, (int)DT_BF16, gx + 1, gw, gb, (int)DT_F32, BT, C, OC, (int)DT_BF16));
    dt_kernels_cpu.matmul_forward_lp(kc, ref, DT_BF16, xt, w, b, DT_F32, BT, C, OC, DT_BF16);
    void *h = back_typed(go, BT * OC, DT_BF16);
    double *S = bound(x, C, 1, wr, C, 1, NULL, br, BT, OC, C);
    size_t worst = 0;
    double d = mm_excess_at(h, ref, S, BT * OC, C, DT_BF16, &worst);
    report(d <= 1.0, "matmul_forward bf16 with inp 2 bytes past an alignment: within 3 (K+2) u sum|terms|", d);
    if (!(d <= 1.0)) { /* the same product into fp32 on both sides, to tell which did not round once */
        float *ref32 = malloc(BT * OC * 4), *go32 = dev(NULL, BT * OC * 4);
        dt_kernels_cpu.matmul_forward_lp(kc, ref32, DT_F32, xt, w, b, DT_F32, BT, C, OC, DT_BF16);
        CK(gpu->matmul_forward(ctx, go32, (int)DT_F32, gx + 1, gw, gb, (int)DT_F32, BT, C, OC, (int)DT_BF16));
        float *h32 = back(go32, BT * OC);
        mm_explain(h, ref, h32, ref32, worst, S, C, DT_BF16);
        free(ref32), free(h32);
        gpu->free(go32);
    }
    free(S), free(h), free(x), free(w), free(b), free(xt), free(ref), free(wr), free(br);
    gpu->free(gx), gpu->free(go), gpu->free(gw), gpu->free(gb);
}

/* K = 16384 with M = N = 16: an algorithm that splits K. Each output is 1 (k = 0) + 2^-(m+1)
 * (k = K - 1) + the bias 2^-20, m the 16-bit type's mantissa bits: rounded once, 1 + 2^-m; a
 * reduction of the splits in the 16-bit type would round 1 + 2^-(m+1) to 1 first (ties to even). */
static void matmul_split_k(void *ctx)
{
    enum { N = 16, K = 16384 };
    static const enum dt_dtype lp[] = {DT_BF16, DT_F16};
    float *x = calloc((size_t)N * K, 4), *w = calloc((size_t)N * K, 4), b[N];
    for (int k = 0; k < 2; k++) {
        int m = lp[k] == DT_BF16 ? 7 : 10;
        for (int i = 0; i < N; i++) {
            x[(size_t)i * K] = 1.0f, x[(size_t)i * K + K - 1] = ldexpf(1.0f, -(m + 1));
            w[(size_t)i * K] = w[(size_t)i * K + K - 1] = 1.0f;
            b[i] = ldexpf(1.0f, -20);
        }
        void *x16 = typed(x, (size_t)N * K, lp[k]), *w16 = typed(w, (size_t)N * K, lp[k]), *b16 = typed(b, N, lp[k]);
        void *gx = dev(x16, (size_t)N * K * 2), *gw = dev(w16, (size_t)N * K * 2), *gb = dev(b16, N * 2);
        void *go = dev(NULL, N * N * 2);
        CK(gpu->matmul_forward(ctx, go, (int)lp[k], gx, gw, gb, (int)lp[k], N, K, N, (int)lp[k]));
        uint16_t *g = back_typed(go, N * N, lp[k]), want = lp[k] == DT_BF16 ? dt_bf16_from_f32(1.0f + ldexpf(1.0f, -m))
                                                                           : dt_f16_from_f32(1.0f + ldexpf(1.0f, -m));
        int bad = 0;
        for (int i = 0; i < N * N; i++) bad += g[i] != want;
        char what[128];
        snprintf(what, sizeof what, "matmul_forward %s, K = %d (split): the sum and the bias rounded once",
                 dt_dtype_str(lp[k]), K);
        report(bad == 0, what, bad);
        free(g), free(x16), free(w16), free(b16);
        gpu->free(gx), gpu->free(gw), gpu->free(gb), gpu->free(go);
    }
    free(x), free(w);
}

void matmuls(void)
{
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    /* an odd shape, then a larger one of multiples of 16 (tensor-core algorithms, scratch growth),
     * the second without bias and dbias; BT 67 and 256: one part block of rows and four full ones */
    /* and an odd OC, as the 124M LM head's last vocabulary block has (1105 columns): a 16-bit D whose
     * rows start 2 bytes past an alignment */
    static const int shapes[3][3] = {{67, 96, 130}, {256, 192, 384}, {67, 96, 131}};
    static const enum dt_dtype kinds[] = {DT_F32, DT_BF16, DT_F16};
    for (int k = 0; k < 9; k++)
        matmul_case(ctx, kinds[k % 3], shapes[k / 3][0], shapes[k / 3][1], shapes[k / 3][2], k < 3 || k >= 6,
                    k % 2 ? DT_SET_DINP | DT_SET_DPARAMS : 0);
    matmul_offset(ctx);
    matmul_split_k(ctx);
    for (int k = 0; k < 4; k++) matmul_16bit_weight(ctx, k % 2 ? DT_F16 : DT_BF16, shapes[k / 2], k < 2);
    matmul_exact(ctx);
    /* the epilogues' shape (16-byte rows), and one they do not take (the ops apart) */
    for (int k = 0; k < 4; k++) matmul_gelu_case(ctx, k % 2 ? DT_F16 : DT_BF16, k < 2 ? 256 : 67, 192, k < 2 ? 384 : 130);
    matmul_gelu_exact(ctx, DT_BF16);
    matmul_gelu_exact(ctx, DT_F16);
    /* refused before any launch: a weight of another 16-bit type than lp, a 16-bit weight in fp32,
     * an output or dout of another 16-bit type than lp */
    int e1 = gpu->matmul_forward(ctx, NULL, (int)DT_F32, NULL, NULL, NULL, (int)DT_F16, 4, 4, 4, (int)DT_BF16);
    int e2 = gpu->matmul_backward(ctx, NULL, NULL, NULL, NULL, (int)DT_F32, NULL, NULL, (int)DT_BF16, 4, 4, 4,
                                  (int)DT_F32, 0);
    int e3 = gpu->matmul_forward(ctx, NULL, (int)DT_F16, NULL, NULL, NULL, (int)DT_F32, 4, 4, 4, (int)DT_BF16);
    int e4 = gpu->matmul_backward(ctx, NULL, NULL, NULL, NULL, (int)DT_BF16, NULL, NULL, (int)DT_F32, 4, 4, 4,
                                  (int)DT_F16, 0);
    report(e1 && e2 && e3 && e4, "matmuls refuse a weight, out or dout type that is neither fp32 nor lp",
           (double)(!e1 + !e2 + !e3 + !e4));
    gpu->ctx_destroy(ctx);
}

/* bgradb (on trial): the biased backward in bf16 and fp16, dbias written and added, at the shapes of
 * the models (16-byte rows: 384, and GPT-2's 768) and at one cuBLASLt's aligned kernels do not take
 * (130 columns); matmul_case holds dbias to its bound and, at the first, to the epilogue's having run */
void bgradb_cases(void)
{
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    static const int shapes[3][3] = {{256, 192, 384}, {256, 768, 768}, {67, 96, 130}};
    for (int k = 0; k < 12; k++)
        matmul_case(ctx, k % 2 ? DT_F16 : DT_BF16, shapes[k / 4][0], shapes[k / 4][1], shapes[k / 4][2], true,
                    k % 4 < 2 ? DT_SET_DINP | DT_SET_DPARAMS : 0);
    gpu->ctx_destroy(ctx);
}
