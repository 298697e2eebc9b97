/*
 * test_cuda_ops.c - every CUDA kernel of the module (kernels/cuda/ops.cu) against its CPU twin
 * (dt_kernels_cpu) on random inputs, with a tolerance per op written here: casts bit for bit
 * (both sides compile core/half.h), elementwise ops within a few ulp (the GPU's expf is not
 * glibc's), reductions within what a different summation order gives. The fused attention
 * (kernels/cuda/attention.cu) is held against the CPU kernel and against the module's cuBLAS
 * reference path, whose att must match the CPU's softmax. Speaks TAP into its log; where the
 * module cannot be loaded or sees no GPU it says why and exits 77, which `make check` counts as
 * skipped, so it runs for real only on a GPU node: `make check-gpu`.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "kernels/cuda_module.h"
#include "kernels/kernels.h"

static const struct dt_cuda_ops *gpu;
static struct dt_kctx *kc; /* the CPU twins' context */
static int tap_n, failed;

static void report(int ok, const char *what, double got)
{
    printf("%sok %d - %s (max difference %.3g)\n", ok ? "" : "not ", ++tap_n, what, got);
    failed += !ok;
}

/* every call checked: a launch that never started would leave the buffers as they were */
#define CK(call)                                                                                                       \
    do {                                                                                                               \
        int e_ = (call);                                                                                               \
        if (e_) {                                                                                                      \
            printf("Bail out! %s: %s\n", #call, gpu->error_string(e_));                                                \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static float *randn(size_t n, unsigned seed)
{
    float *x = malloc(n * sizeof *x);
    srand(seed);
    for (size_t i = 0; i < n; i++) x[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 6.0f;
    return x;
}

/* a device copy of n bytes of host memory (NULL: zeroed) */
static void *dev(const void *host, size_t bytes)
{
    void *d = NULL;
    if (gpu->malloc(&d, bytes)) {
        printf("Bail out! cudaMalloc of %zu bytes failed\n", bytes);
        exit(1);
    }
    if (host) gpu->to_device(d, host, bytes);
    else {
        void *z = calloc(1, bytes);
        CK(gpu->to_device(d, z, bytes));
        free(z);
    }
    return d;
}

static float *back(const void *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    int e = gpu->synchronize();
    if (!e) e = gpu->to_host(h, d, n * sizeof *h);
    if (e) {
        printf("Bail out! a kernel or copy failed: %s\n", gpu->error_string(e));
        exit(1);
    }
    return h;
}

/* largest |a - b| / max(1, |b|) */
static double maxrel(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* units in the last place between two 16-bit floats of one type (both encodings are sign-magnitude) */
static int ulps(uint16_t a, uint16_t b)
{
    int x = a & 0x8000 ? -(a & 0x7fff) : a, y = b & 0x8000 ? -(b & 0x7fff) : b;
    return abs(x - y);
}

/* the most ulps between two arrays of 16-bit floats */
static int max_ulps(const uint16_t *a, const uint16_t *b, size_t n)
{
    int worst = 0;
    for (size_t i = 0; i < n; i++) worst = ulps(a[i], b[i]) > worst ? ulps(a[i], b[i]) : worst;
    return worst;
}

static void elementwise(void)
{
    size_t N = 100003;
    float *x = randn(N, 1), *y = randn(N, 2), *cpu = calloc(N, sizeof *cpu);
    float *dx = dev(x, N * 4), *dy = dev(y, N * 4), *dout = dev(NULL, N * 4);
    dt_kernels_cpu.gelu_forward(kc, cpu, x, N);
    CK(gpu->gelu_forward(dout, dx, N));
    float *g = back(dout, N);
    double d = maxrel(g, cpu, N);
    report(d < 1e-5, "gelu_forward", d);
    free(g);
    memcpy(cpu, y, N * 4); /* backward accumulates into what is there */
    dt_kernels_cpu.gelu_backward(kc, cpu, x, y, N);
    CK(gpu->to_device(dout, y, N * 4));
    CK(gpu->gelu_backward(dout, dx, dy, N));
    g = back(dout, N);
    d = maxrel(g, cpu, N);
    report(d < 1e-5, "gelu_backward accumulates", d);
    free(g);
    dt_kernels_cpu.residual_forward(kc, cpu, x, y, N);
    CK(gpu->residual_forward(dout, dx, dy, N));
    g = back(dout, N);
    d = maxrel(g, cpu, N);
    report(d == 0, "residual_forward", d);
    free(g);
    gpu->free(dx), gpu->free(dy), gpu->free(dout);
    free(x), free(y), free(cpu);
}

static void casts(void)
{
    size_t N = 65536 + 7;
    float *x = randn(N, 3);
    /* the edges too: every upper half-word (so every bf16 exponent and mantissa, infinities, NaNs,
     * subnormals) with a scrambled lower half, and exact ties (bf16: 0x8000; fp16: 0x1000) */
    for (size_t i = 0; i < 65536; i++) {
        uint32_t low = i % 3 == 0 ? 0x8000u : i % 3 == 1 ? 0x1000u : ((uint32_t)(i * 2654435761u) >> 17);
        uint32_t u = (uint32_t)i << 16 | low;
        memcpy(&x[i], &u, 4);
    }
    uint16_t *cpu = malloc(N * 2), *got = malloc(N * 2);
    float *dx = dev(x, N * 4);
    uint16_t *dh = dev(NULL, N * 2);
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        enum dt_dtype t = types[k];
        dt_kernels_cpu.cast_to_lp(kc, cpu, x, N, t);
        CK(gpu->cast_to_lp(dh, dx, N, (int)t));
        CK(gpu->synchronize());
        CK(gpu->to_host(got, dh, N * 2));
        size_t diff = 0;
        for (size_t i = 0; i < N; i++) diff += cpu[i] != got[i];
        char what[64];
        snprintf(what, sizeof what, "cast_to_lp %s, bit for bit", dt_dtype_str(t));
        report(diff == 0, what, (double)diff);
        float *wide = malloc(N * 4);
        dt_kernels_cpu.cast_from_lp(kc, wide, cpu, N, t);
        float *dw = dev(NULL, N * 4);
        CK(gpu->cast_from_lp(dw, dh, N, (int)t));
        float *gw = back(dw, N);
        diff = 0;
        for (size_t i = 0; i < N; i++) diff += memcmp(&wide[i], &gw[i], 4) != 0;
        snprintf(what, sizeof what, "cast_from_lp %s, bit for bit", dt_dtype_str(t));
        report(diff == 0, what, (double)diff);
        dt_kernels_cpu.round_lp(kc, wide, x, N, t);
        CK(gpu->round_lp(dw, dx, N, (int)t));
        free(gw);
        gw = back(dw, N);
        diff = 0;
        for (size_t i = 0; i < N; i++) diff += memcmp(&wide[i], &gw[i], 4) != 0;
        snprintf(what, sizeof what, "round_lp %s, bit for bit", dt_dtype_str(t));
        report(diff == 0, what, (double)diff);
        free(gw), free(wide);
        gpu->free(dw);
    }
    gpu->free(dx), gpu->free(dh);
    free(x), free(cpu), free(got);
}

static void optimizer_and_norms(void)
{
    size_t N = (1u << 20) + 3; /* more than the 256 x 256 threads of the reduction: several passes */
    float *p = randn(N, 4), *g = randn(N, 5), *m = randn(N, 6), *v = randn(N, 7);
    for (size_t i = 0; i < N; i++) v[i] = fabsf(v[i]);
    float *dp = dev(p, N * 4), *dg = dev(g, N * 4), *dm = dev(m, N * 4), *dv = dev(v, N * 4);
    dt_kernels_cpu.adamw(kc, p, g, DT_F32, 0.5f, 0.0f, m, v, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 7, NULL, DT_F32);
    CK(gpu->adamw(dp, dg, (int)DT_F32, 0.5f, 0.0f, dm, dv, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 7, NULL, (int)DT_F32));
    /* Adam's L2 penalty folded into the gradient, on the state the first update left */
    dt_kernels_cpu.adamw(kc, p, g, DT_F32, 0.5f, 0.01f, m, v, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 8, NULL, DT_F32);
    CK(gpu->adamw(dp, dg, (int)DT_F32, 0.5f, 0.01f, dm, dv, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 8, NULL, (int)DT_F32));
    float *gp = back(dp, N), *gm = back(dm, N), *gv = back(dv, N);
    double d = fmax(maxrel(gp, p, N), fmax(maxrel(gm, m, N), maxrel(gv, v, N)));
    report(d < 1e-6, "adamw then adam with l2: parameters and both moments", d);
    free(gp), free(gm), free(gv);
    /* mixed precision's step: a bf16 gradient widened as it is read, the bf16 working copy written in
     * the same pass; both sides from the CPU's state */
    CK(gpu->to_device(dp, p, N * 4));
    CK(gpu->to_device(dm, m, N * 4));
    CK(gpu->to_device(dv, v, N * 4));
    uint16_t *g16 = malloc(N * 2), *plp = malloc(N * 2), *gplp = malloc(N * 2), *own = malloc(N * 2);
    dt_kernels_cpu.cast_to_lp(kc, g16, g, N, DT_BF16);
    uint16_t *dg16 = dev(g16, N * 2), *dplp = dev(NULL, N * 2);
    dt_kernels_cpu.adamw(kc, p, g16, DT_BF16, 0.5f, 0.0f, m, v, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 9, plp, DT_BF16);
    CK(gpu->adamw(dp, dg16, (int)DT_BF16, 0.5f, 0.0f, dm, dv, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 9, dplp,
                  (int)DT_BF16));
    gp = back(dp, N), gm = back(dm, N), gv = back(dv, N);
    CK(gpu->to_host(gplp, dplp, N * 2));
    d = fmax(maxrel(gp, p, N), fmax(maxrel(gm, m, N), maxrel(gv, v, N)));
    report(d < 1e-6, "adamw, bf16 gradient: parameters and both moments", d);
    /* the copy: exactly the GPU's own parameters rounded, and at most one bf16 ulp from the CPU's
     * (parameters an fp32 ulp apart can round to either side) */
    dt_kernels_cpu.cast_to_lp(kc, own, gp, N, DT_BF16);
    int worst = max_ulps(gplp, plp, N);
    report(memcmp(own, gplp, N * 2) == 0 && worst <= 1, "adamw, bf16 copy written in the same pass", worst);
    free(gp), free(gm), free(gv), free(g16), free(plp), free(gplp), free(own);
    gpu->free(dg16), gpu->free(dplp);
    /* refused before any launch: an unknown gradient type, a copy of fp32 */
    int e1 = gpu->adamw(dp, dg, 7, 0.5f, 0.0f, dm, dv, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 9, NULL, (int)DT_F32);
    int e2 = gpu->adamw(dp, dg, (int)DT_F32, 0.5f, 0.0f, dm, dv, N, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 9, dp, (int)DT_F32);
    report(e1 != 0 && e2 != 0, "adamw refuses a gradient of no known type and an fp32 copy", (double)(e1 == 0) + (e2 == 0));
    g[17] = INFINITY, g[4242] = NAN;
    CK(gpu->to_device(dg, g, N * 4));
    double s = 0;
    size_t bad = 0;
    CK(gpu->sumsq_nonfinite(dg, (int)DT_F32, N, &s, &bad));
    size_t cpu_bad = dt_kernels_cpu.nonfinite(kc, g, DT_F32, N);
    g[17] = g[4242] = 0;
    report(bad == cpu_bad && bad == 2, "nonfinite counts the inf and the nan", (double)bad);
    CK(gpu->to_device(dg, g, N * 4));
    CK(gpu->sumsq_nonfinite(dg, (int)DT_F32, N, &s, &bad));
    double ref = dt_kernels_cpu.sumsq(kc, g, DT_F32, N);
    report(fabs(s - ref) / ref < 1e-12 && bad == 0, "sumsq in double, fp32 gradient", fabs(s - ref) / ref);
    uint16_t *h = malloc(N * 2);
    uint16_t *dh = dev(NULL, N * 2);
    static const enum dt_dtype lp[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        char what[64];
        g[99] = INFINITY;
        dt_kernels_cpu.cast_to_lp(kc, h, g, N, lp[k]);
        CK(gpu->to_device(dh, h, N * 2));
        CK(gpu->sumsq_nonfinite(dh, (int)lp[k], N, &s, &bad));
        snprintf(what, sizeof what, "nonfinite, %s gradient", dt_dtype_str(lp[k]));
        report(bad == dt_kernels_cpu.nonfinite(kc, h, lp[k], N) && bad == 1, what, (double)bad);
        g[99] = 0;
        dt_kernels_cpu.cast_to_lp(kc, h, g, N, lp[k]);
        CK(gpu->to_device(dh, h, N * 2));
        CK(gpu->sumsq_nonfinite(dh, (int)lp[k], N, &s, &bad));
        ref = dt_kernels_cpu.sumsq(kc, h, lp[k], N);
        snprintf(what, sizeof what, "sumsq, %s gradient", dt_dtype_str(lp[k]));
        report(fabs(s - ref) / ref < 1e-12, what, fabs(s - ref) / ref);
    }
    gpu->free(dp), gpu->free(dg), gpu->free(dm), gpu->free(dv), gpu->free(dh);
    free(p), free(g), free(m), free(v), free(h);
}

static void layernorm_and_positions(int C)
{
    int B = 3, T = 17, BT = B * T;
    size_t n = (size_t)BT * C;
    char what[96];
    float *x = randn(n, 8), *w = randn(C, 9), *b = randn(C, 10), *dy = randn(n, 11);
    float *out = calloc(n, 4), *mean = calloc(BT, 4), *rstd = calloc(BT, 4);
    /* backward accumulates: start from values, so "=" in place of "+=" would show */
    float *dx = randn(n, 13), *dw = randn(C, 14), *db = randn(C, 15);
    float *gdx = dev(dx, n * 4), *gdw = dev(dw, C * 4), *gdb = dev(db, C * 4);
    dt_kernels_cpu.layernorm_forward(kc, out, mean, rstd, x, w, b, BT, C);
    dt_kernels_cpu.layernorm_backward(kc, dx, dw, db, dy, x, w, mean, rstd, BT, C);
    float *gx = dev(x, n * 4), *gw = dev(w, C * 4), *gb = dev(b, C * 4), *gdy = dev(dy, n * 4);
    float *gout = dev(NULL, n * 4), *gmean = dev(NULL, BT * 4), *grstd = dev(NULL, BT * 4);
    CK(gpu->layernorm_forward(gout, gmean, grstd, gx, gw, gb, BT, C));
    float *h = back(gout, n);
    double d = maxrel(h, out, n);
    snprintf(what, sizeof what, "layernorm_forward, C = %d", C);
    report(d < 1e-5, what, d);
    free(h);
    CK(gpu->layernorm_backward(gdx, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
    float *hx = back(gdx, n), *hw = back(gdw, C), *hb = back(gdb, C);
    d = fmax(maxrel(hx, dx, n), maxrel(hw, dw, C));
    snprintf(what, sizeof what, "layernorm_backward, C = %d: dinp, dweight", C);
    report(d < 1e-4, what, d);
    snprintf(what, sizeof what, "layernorm_backward, C = %d: dbias, rows added in the CPU's order", C);
    report(maxrel(hb, db, C) == 0, what, maxrel(hb, db, C));
    free(hx), free(hw), free(hb);
    float *wpe = randn((size_t)T * C, 12), *pos = calloc(n, 4), *dwpe = randn((size_t)T * C, 16);
    float *gwpe = dev(wpe, (size_t)T * C * 4), *gpos = dev(NULL, n * 4), *gdwpe = dev(dwpe, (size_t)T * C * 4);
    dt_kernels_cpu.position_forward(kc, pos, wpe, B, T, C);
    dt_kernels_cpu.position_backward(kc, dwpe, dy, B, T, C);
    CK(gpu->position_forward(gpos, gwpe, B, T, C));
    CK(gpu->position_backward(gdwpe, gdy, B, T, C));
    float *hp = back(gpos, n), *hd = back(gdwpe, (size_t)T * C);
    report(maxrel(hp, pos, n) == 0, "position_forward", maxrel(hp, pos, n));
    d = maxrel(hd, dwpe, (size_t)T * C);
    report(d == 0, "position_backward accumulates, batches in the CPU's order", d);
    free(hp), free(hd), free(wpe), free(pos), free(dwpe);
    void *all[] = {gx, gw, gb, gdy, gout, gmean, grstd, gdx, gdw, gdb, gwpe, gpos, gdwpe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(w), free(b), free(dy), free(out), free(mean), free(rstd), free(dx), free(dw), free(db);
}

static void embeddings_and_loss(void)
{
    int n = 4 * 33, C = 96, V = 300, v0 = 100, nv = 150;
    int32_t *tok = malloc(n * sizeof *tok);
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 7919) % V); /* repeats, and tokens outside the block */
    float *table = randn((size_t)nv * C, 20), *out = randn((size_t)n * C, 21);
    float *gtab = dev(table, (size_t)nv * C * 4), *gout = dev(out, (size_t)n * C * 4);
    int32_t *gtok = dev(tok, n * sizeof *tok);
    dt_kernels_cpu.rows_forward(kc, out, tok, table, DT_F32, v0, nv, n, C);
    CK(gpu->rows_forward(gout, gtok, gtab, (int)DT_F32, v0, nv, n, C));
    float *h = back(gout, (size_t)n * C);
    report(maxrel(h, out, (size_t)n * C) == 0, "rows_forward accumulates the block's rows", maxrel(h, out, (size_t)n * C));
    free(h);
    /* a 16-bit table (a strategy's working copy), widened as it is read */
    static const enum dt_dtype tt[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        uint16_t *t16 = malloc((size_t)nv * C * 2);
        dt_kernels_cpu.cast_to_lp(kc, t16, table, (size_t)nv * C, tt[k]);
        uint16_t *gt16 = dev(t16, (size_t)nv * C * 2);
        CK(gpu->to_device(gout, out, (size_t)n * C * 4)); /* the same start on both sides */
        dt_kernels_cpu.rows_forward(kc, out, tok, t16, tt[k], v0, nv, n, C);
        CK(gpu->rows_forward(gout, gtok, gt16, (int)tt[k], v0, nv, n, C));
        h = back(gout, (size_t)n * C);
        char what[80];
        snprintf(what, sizeof what, "rows_forward, %s table, bit for bit", dt_dtype_str(tt[k]));
        report(maxrel(h, out, (size_t)n * C) == 0, what, maxrel(h, out, (size_t)n * C));
        free(h), free(t16);
        gpu->free(gt16);
    }
    /* the table's gradient into a range of it, rows repeating: the same sums in the same order */
    size_t lo = 37 * C + 5, len = 120 * C;
    float *vals = randn((size_t)n * C, 22), *dst = randn(len, 23);
    float *gvals = dev(vals, (size_t)n * C * 4), *gdst = dev(dst, len * 4);
    for (int i = 0; i < n; i++) tok[i] %= 160;
    CK(gpu->to_device(gtok, tok, n * sizeof *tok));
    dt_kernels_cpu.rows_add(kc, dst, DT_F32, lo, len, tok, vals, n, C);
    CK(gpu->rows_add(gdst, (int)DT_F32, lo, len, gtok, gvals, n, C));
    h = back(gdst, len);
    report(maxrel(h, dst, len) == 0, "rows_add fp32, repeated rows, bit for bit", maxrel(h, dst, len));
    free(h);
    uint16_t *d16 = malloc(len * 2), *g16 = malloc(len * 2);
    dt_kernels_cpu.cast_to_lp(kc, d16, dst, len, DT_BF16);
    uint16_t *gd16 = dev(d16, len * 2);
    dt_kernels_cpu.rows_add(kc, d16, DT_BF16, lo, len, tok, vals, n, C);
    CK(gpu->rows_add(gd16, (int)DT_BF16, lo, len, gtok, gvals, n, C));
    CK(gpu->synchronize());
    CK(gpu->to_host(g16, gd16, len * 2));
    report(memcmp(d16, g16, len * 2) == 0, "rows_add bf16, rounded after each add as the CPU does",
           (double)(memcmp(d16, g16, len * 2) != 0));
    /* softmax + cross-entropy on block-major logits (vb < V), loss and gradient in place */
    int BT = 45, vb = 128;
    float *logits = randn((size_t)BT * V, 24), *losses = calloc(BT, 4);
    int32_t *y = malloc(BT * sizeof *y);
    for (int i = 0; i < BT; i++) y[i] = (int32_t)((i * 131) % V);
    float *glog = dev(logits, (size_t)BT * V * 4), *gloss = dev(NULL, BT * 4);
    int32_t *gy = dev(y, BT * sizeof *y);
    float mean_cpu = dt_kernels_cpu.softmax_xent(kc, losses, logits, y, 1.0f / BT, BT, V, vb), mean_gpu = 0;
    CK(gpu->softmax_xent(gloss, glog, gy, 1.0f / BT, BT, V, vb, &mean_gpu));
    float *hl = back(gloss, BT), *hg = back(glog, (size_t)BT * V);
    double d = fmax(maxrel(hl, losses, BT), fabs((double)mean_gpu - mean_cpu));
    report(d < 1e-5, "softmax_xent: losses and their mean", d);
    d = maxrel(hg, logits, (size_t)BT * V);
    report(d < 1e-6, "softmax_xent: the gradient written in place, block-major", d);
    free(hl), free(hg);
    void *all[] = {gtab, gout, gtok, gvals, gdst, gd16, glog, gloss, gy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(tok), free(table), free(out), free(vals), free(dst), free(d16), free(g16), free(logits), free(losses), free(y);
}

/* A weight and bias already of type lp (a strategy's 16-bit copy, wt == lp), used as they are: the
 * same bits as the fp32-weight path on those values kept in fp32, and the CPU's result within the
 * tolerance of the lp matmuls. */
static void matmul_16bit_weight(void *ctx, enum dt_dtype lp, const int shape[3], bool biased)
{
    int BT = shape[0], C = shape[1], OC = shape[2];
    size_t nx = (size_t)BT * C, nw = (size_t)OC * C, ny = (size_t)BT * OC;
    float *x = randn(nx, 80), *w = randn(nw, 81), *b = randn(OC, 82), *dy = randn(ny, 83);
    float *dx = randn(nx, 84), *dw = randn(nw, 85), *db = randn(OC, 86), *out = calloc(ny, 4);
    uint16_t *w16 = malloc(nw * 2), *b16 = malloc((size_t)OC * 2);
    dt_kernels_cpu.cast_to_lp(kc, w16, w, nw, lp);
    dt_kernels_cpu.cast_to_lp(kc, b16, b, OC, lp);
    dt_kernels_cpu.cast_from_lp(kc, w, w16, nw, lp); /* the same values in fp32 */
    dt_kernels_cpu.cast_from_lp(kc, b, b16, OC, lp);
    float *gx = dev(x, nx * 4), *gdy = dev(dy, ny * 4), *gw = dev(w, nw * 4), *gb = dev(b, OC * 4);
    uint16_t *gw16 = dev(w16, nw * 2), *gb16 = dev(b16, (size_t)OC * 2);
    /* out: fp32 weight, 16-bit weight; the gradients from the same start on each path */
    float *go32 = dev(NULL, ny * 4), *go16 = dev(NULL, ny * 4);
    float *gdx32 = dev(dx, nx * 4), *gdw32 = dev(dw, nw * 4), *gdb32 = dev(db, OC * 4);
    float *gdx16 = dev(dx, nx * 4), *gdw16 = dev(dw, nw * 4), *gdb16 = dev(db, OC * 4);
    const float *gcb = biased ? gb : NULL;
    const uint16_t *gcb16 = biased ? gb16 : NULL, *cb16 = biased ? b16 : NULL;
    float *cdb = biased ? db : NULL, *gcdb32 = biased ? gdb32 : NULL, *gcdb16 = biased ? gdb16 : NULL;
    CK(gpu->matmul_forward(ctx, go32, gx, gw, gcb, (int)DT_F32, BT, C, OC, (int)lp));
    CK(gpu->matmul_forward(ctx, go16, gx, gw16, gcb16, (int)lp, BT, C, OC, (int)lp));
    CK(gpu->matmul_backward(ctx, gdx32, gdw32, gcdb32, gdy, gx, gw, (int)DT_F32, BT, C, OC, (int)lp, 0));
    CK(gpu->matmul_backward(ctx, gdx16, gdw16, gcdb16, gdy, gx, gw16, (int)lp, BT, C, OC, (int)lp, 0));
    dt_kernels_cpu.matmul_forward_lp(kc, out, x, w16, cb16, lp, BT, C, OC, lp);
    dt_kernels_cpu.matmul_backward_lp(kc, dx, dw, cdb, dy, x, w16, lp, BT, C, OC, lp, 0);
    float *o32 = back(go32, ny), *o16 = back(go16, ny), *x32 = back(gdx32, nx), *x16 = back(gdx16, nx);
    float *w32h = back(gdw32, nw), *w16h = back(gdw16, nw), *b32h = back(gdb32, OC), *b16h = back(gdb16, OC);
    char what[128];
    snprintf(what, sizeof what, "matmul_forward %s %dx%dx%d, %s weight%s: the fp32-weight path's bits", dt_dtype_str(lp),
             BT, C, OC, dt_dtype_str(lp), biased ? " and bias" : "");
    report(memcmp(o16, o32, ny * 4) == 0, what, maxrel(o16, o32, ny));
    snprintf(what, sizeof what, "matmul_backward %s %dx%dx%d, %s weight: the fp32-weight path's bits", dt_dtype_str(lp),
             BT, C, OC, dt_dtype_str(lp));
    int same = !memcmp(x16, x32, nx * 4) && !memcmp(w16h, w32h, nw * 4) && !memcmp(b16h, b32h, OC * 4);
    report(same, what, fmax(maxrel(x16, x32, nx), maxrel(w16h, w32h, nw)));
    double d = maxrel(o16, out, ny);
    snprintf(what, sizeof what, "matmul_forward %s %dx%dx%d, %s weight, vs the CPU", dt_dtype_str(lp), BT, C, OC,
             dt_dtype_str(lp));
    report(d < 1e-4, what, d);
    d = fmax(maxrel(x16, dx, nx), fmax(maxrel(w16h, dw, nw), maxrel(b16h, db, OC)));
    snprintf(what, sizeof what, "matmul_backward %s %dx%dx%d, %s weight, vs the CPU", dt_dtype_str(lp), BT, C, OC,
             dt_dtype_str(lp));
    report(d < 1e-4, what, d);
    void *all[] = {gx, gdy, gw, gb, gw16, gb16, go32, go16, gdx32, gdw32, gdb32, gdx16, gdw16, gdb16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(w), free(b), free(dy), free(dx), free(dw), free(db), free(out), free(w16), free(b16);
    free(o32), free(o16), free(x32), free(x16), free(w32h), free(w16h), free(b32h), free(b16h);
}

static void matmuls(void)
{
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    /* an odd shape, then a larger one of multiples of 16 (tensor-core algorithms, scratch growth),
     * the second without bias and dbias */
    static const int shapes[2][3] = {{67, 96, 130}, {256, 192, 384}};
    static const enum dt_dtype kinds[] = {DT_F32, DT_BF16, DT_F16};
    for (int k = 0; k < 6; k++) {
        enum dt_dtype lp = kinds[k % 3];
        int BT = shapes[k / 3][0], C = shapes[k / 3][1], OC = shapes[k / 3][2];
        bool biased = k < 3;
        float *x = randn((size_t)BT * C, 30), *w = randn((size_t)OC * C, 31), *b = randn(OC, 32);
        float *dy = randn((size_t)BT * OC, 33), *out = randn((size_t)BT * OC, 37); /* overwritten, not added to */
        /* backward accumulates, or with set overwrites: start from values */
        unsigned set = k % 2 ? DT_SET_DINP | DT_SET_DPARAMS : 0;
        float *dx = randn((size_t)BT * C, 34), *dw = randn((size_t)OC * C, 35), *db = randn(OC, 36);
        float *gx = dev(x, (size_t)BT * C * 4), *gw = dev(w, (size_t)OC * C * 4), *gb = dev(b, OC * 4);
        float *gdy = dev(dy, (size_t)BT * OC * 4), *gout = dev(out, (size_t)BT * OC * 4);
        float *gdx = dev(dx, (size_t)BT * C * 4), *gdw = dev(dw, (size_t)OC * C * 4), *gdb = dev(db, OC * 4);
        const float *cb = biased ? b : NULL, *gcb = biased ? gb : NULL;
        float *cdb = biased ? db : NULL, *gcdb = biased ? gdb : NULL;
        if (lp == DT_F32) {
            dt_kernels_cpu.matmul_forward(kc, out, x, w, cb, BT, C, OC);
            dt_kernels_cpu.matmul_backward(kc, dx, dw, cdb, dy, x, w, BT, C, OC, set);
        } else {
            dt_kernels_cpu.matmul_forward_lp(kc, out, x, w, cb, DT_F32, BT, C, OC, lp);
            dt_kernels_cpu.matmul_backward_lp(kc, dx, dw, cdb, dy, x, w, DT_F32, BT, C, OC, lp, set);
        }
        CK(gpu->matmul_forward(ctx, gout, gx, gw, gcb, (int)DT_F32, BT, C, OC, (int)lp));
        CK(gpu->matmul_backward(ctx, gdx, gdw, gcdb, gdy, gx, gw, (int)DT_F32, BT, C, OC, (int)lp, set));
        float *ho = back(gout, (size_t)BT * OC), *hx = back(gdx, (size_t)BT * C), *hw = back(gdw, (size_t)OC * C);
        float *hb = back(gdb, OC);
        double tol = lp == DT_F32 ? 1e-5 : 1e-4, d = maxrel(ho, out, (size_t)BT * OC);
        char what[96];
        snprintf(what, sizeof what, "matmul_forward %s %dx%dx%d, %s", dt_dtype_str(lp), BT, C, OC,
                 biased ? "bias fused" : "no bias");
        report(d < tol, what, d);
        d = fmax(maxrel(hx, dx, (size_t)BT * C), maxrel(hw, dw, (size_t)OC * C));
        snprintf(what, sizeof what, "matmul_backward %s %dx%dx%d: dinp, dweight %s", dt_dtype_str(lp), BT, C, OC,
                 set ? "overwritten" : "accumulate");
        report(d < tol, what, d);
        d = maxrel(hb, db, OC);
        snprintf(what, sizeof what, "matmul_backward %s %dx%dx%d: dbias%s", dt_dtype_str(lp), BT, C, OC,
                 biased ? "" : " left alone when NULL");
        report(d < 1e-5, what, d);
        void *all[] = {gx, gw, gb, gdy, gout, gdx, gdw, gdb};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
        free(x), free(w), free(b), free(dy), free(out), free(dx), free(dw), free(db), free(ho), free(hx), free(hw), free(hb);
    }
    for (int k = 0; k < 4; k++) matmul_16bit_weight(ctx, k % 2 ? DT_F16 : DT_BF16, shapes[k / 2], k < 2);
    /* refused before any launch: a weight of another 16-bit type than lp, a 16-bit weight in fp32 */
    int e1 = gpu->matmul_forward(ctx, NULL, NULL, NULL, NULL, (int)DT_F16, 4, 4, 4, (int)DT_BF16);
    int e2 = gpu->matmul_backward(ctx, NULL, NULL, NULL, NULL, NULL, NULL, (int)DT_BF16, 4, 4, 4, (int)DT_F32, 0);
    report(e1 != 0 && e2 != 0, "matmuls refuse a weight type that is neither fp32 nor lp", (double)(e1 == 0) + (e2 == 0));
    gpu->ctx_destroy(ctx);
}

static void updates_and_conversions(void)
{
    size_t N = 40001;
    float *p = randn(N, 40), *g = randn(N, 41), *b = randn(N, 42);
    float *gp = dev(p, N * 4), *gg = dev(g, N * 4), *gbuf = dev(b, N * 4);
    dt_kernels_cpu.sgd(kc, p, g, DT_F32, 0.5f, b, N, 0.1f, 0.9f, 1, 0.01f, 0, NULL, DT_F32);
    CK(gpu->sgd(gp, gg, (int)DT_F32, 0.5f, gbuf, N, 0.1f, 0.9f, 1, 0.01f, 0, NULL, (int)DT_F32));
    float *hp = back(gp, N), *hb = back(gbuf, N);
    double d = fmax(maxrel(hp, p, N), maxrel(hb, b, N));
    report(d < 1e-6, "sgd, nesterov momentum and weight decay", d);
    free(hp), free(hb);
    /* an fp16 gradient, the fp16 working copy written in the same pass, from the CPU's state */
    CK(gpu->to_device(gp, p, N * 4));
    CK(gpu->to_device(gbuf, b, N * 4));
    uint16_t *g16 = malloc(N * 2), *plp = malloc(N * 2), *gplp = malloc(N * 2), *own = malloc(N * 2);
    dt_kernels_cpu.cast_to_lp(kc, g16, g, N, DT_F16);
    uint16_t *dg16 = dev(g16, N * 2), *dplp = dev(NULL, N * 2);
    dt_kernels_cpu.sgd(kc, p, g16, DT_F16, 0.5f, b, N, 0.1f, 0.9f, 0, 0.01f, 0, plp, DT_F16);
    CK(gpu->sgd(gp, dg16, (int)DT_F16, 0.5f, gbuf, N, 0.1f, 0.9f, 0, 0.01f, 0, dplp, (int)DT_F16));
    hp = back(gp, N), hb = back(gbuf, N);
    CK(gpu->to_host(gplp, dplp, N * 2));
    d = fmax(maxrel(hp, p, N), maxrel(hb, b, N));
    report(d < 1e-6, "sgd, fp16 gradient: parameters and momentum", d);
    dt_kernels_cpu.cast_to_lp(kc, own, hp, N, DT_F16);
    int worst = max_ulps(gplp, plp, N);
    report(memcmp(own, gplp, N * 2) == 0 && worst <= 1, "sgd, fp16 copy written in the same pass", worst);
    free(hp), free(hb), free(g16), free(plp), free(gplp), free(own);
    gpu->free(dg16), gpu->free(dplp);
    uint16_t *r = malloc(N * 2), *gr16 = malloc(N * 2), *gr = dev(NULL, N * 2);
    dt_kernels_cpu.round_stochastic(kc, r, g, N, 7, 1000);
    CK(gpu->round_stochastic(gr, gg, N, 7, 1000));
    CK(gpu->synchronize());
    CK(gpu->to_host(gr16, gr, N * 2));
    report(memcmp(r, gr16, N * 2) == 0, "round_stochastic: the same noise for the same (seed, index)",
           (double)(memcmp(r, gr16, N * 2) != 0));
    /* every pair of float types, converted and accumulated */
    static const enum dt_dtype t[] = {DT_F32, DT_BF16, DT_F16};
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++) {
            size_t sa = dt_dtype_size(t[a]), sc = dt_dtype_size(t[c]);
            void *src = malloc(N * sa), *dst = malloc(N * sc), *got = malloc(N * sc);
            dt_kernels_cpu.convert(kc, src, t[a], g, DT_F32, N);
            dt_kernels_cpu.convert(kc, dst, t[c], p, DT_F32, N);
            void *gsrc = dev(src, N * sa), *gdst = dev(dst, N * sc);
            dt_kernels_cpu.accumulate(kc, dst, t[c], src, t[a], N);
            CK(gpu->convert(gdst, (int)t[c], gsrc, (int)t[a], N, 1));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, gdst, N * sc));
            char what[80];
            snprintf(what, sizeof what, "accumulate %s into %s, bit for bit", dt_dtype_str(t[a]), dt_dtype_str(t[c]));
            report(memcmp(dst, got, N * sc) == 0, what, (double)(memcmp(dst, got, N * sc) != 0));
            dt_kernels_cpu.convert(kc, dst, t[c], src, t[a], N);
            CK(gpu->convert(gdst, (int)t[c], gsrc, (int)t[a], N, 0));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, gdst, N * sc));
            snprintf(what, sizeof what, "convert %s to %s, bit for bit", dt_dtype_str(t[a]), dt_dtype_str(t[c]));
            report(memcmp(dst, got, N * sc) == 0, what, (double)(memcmp(dst, got, N * sc) != 0));
            gpu->free(gsrc), gpu->free(gdst);
            free(src), free(dst), free(got);
        }
    float *dout = calloc(N, 4), *gdout = dev(NULL, N * 4), loss = 0;
    CK(gpu->to_device(gp, p, N * 4)); /* the same outputs on both sides */
    float ref = dt_kernels_cpu.mse(kc, dout, p, g, 0.25f, N);
    CK(gpu->mse(gdout, gp, gg, 0.25f, N, &loss));
    float *hd = back(gdout, N);
    d = fmax(fabs((double)loss - ref) / ref, maxrel(hd, dout, N));
    report(d < 1e-6, "mse: the loss and its gradient", d);
    free(hd), free(dout), free(r), free(gr16), free(p), free(g), free(b);
    gpu->free(gp), gpu->free(gg), gpu->free(gbuf), gpu->free(gr), gpu->free(gdout);
}

/* log sum over u <= t of exp(scale q_t . k_u) for every (b, h, t) (B,NH,T), in double from the inputs */
static float *lse_of(const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    double scale = 1.0f / sqrtf((float)hs); /* the kernels' float scale */
    float *lse = malloc((size_t)B * NH * T * sizeof *lse);
    double *s = malloc((size_t)T * sizeof *s);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * 3 * C + C + (size_t)h * hs;
                    double dot = 0;
                    for (int d = 0; d < hs; d++) dot += (double)q[d] * k[d];
                    s[u] = dot * scale;
                    mx = fmax(mx, s[u]);
                }
                for (int u = 0; u <= t; u++) sum += exp(s[u] - mx);
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + log(sum));
            }
    free(s);
    return lse;
}

/* the fused attention and the cuBLAS reference path, each against the CPU kernel and each other */
static void attention(void *ctx, int B, int T, int C, int NH)
{
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    size_t nlse = (size_t)B * NH * T;
    char shape[64], what[160];
    snprintf(shape, sizeof shape, "B %d T %d C %d NH %d (head size %d)", B, T, C, NH, C / NH);
    float *qkv = randn(nqkv, 50), *dout = randn(nout, 51);
    for (size_t i = 0; i < nqkv; i++) qkv[i] *= 0.5f; /* scores of about a unit: rows neither flat nor one-hot */
    /* backward accumulates: start from values */
    float *dqkv0 = randn(nqkv, 52), *dqkv = malloc(nqkv * 4);
    memcpy(dqkv, dqkv0, nqkv * 4);
    float *out = calloc(nout, 4), *att = calloc(natt, 4);
    float *scratch = malloc(dt_kernels_cpu.attention_scratch(B, NH, T) * sizeof *scratch);
    dt_kernels_cpu.attention_forward(kc, out, att, qkv, B, T, C, NH);
    dt_kernels_cpu.attention_backward(kc, dqkv, dout, qkv, out, att, scratch, B, T, C, NH);
    float *lse = lse_of(qkv, B, T, C, NH);

    float *gqkv = dev(qkv, nqkv * 4), *gdout = dev(dout, nout * 4), *gout = dev(NULL, nout * 4);
    float *glse = dev(NULL, nlse * 4), *gd = dev(dqkv0, nqkv * 4), *gd2 = dev(dqkv0, nqkv * 4);
    float *gscr = dev(NULL, gpu->attention_scratch(B, NH, T) * 4);
    CK(gpu->attention_forward(gout, glse, gqkv, B, T, C, NH));
    float *fo = back(gout, nout), *fl = back(glse, nlse);
    double d = maxrel(fo, out, nout);
    snprintf(what, sizeof what, "attention fused forward %s: out vs the CPU", shape);
    report(d < 1e-5, what, d);
    d = maxrel(fl, lse, nlse);
    snprintf(what, sizeof what, "attention fused forward %s: lse, the scores' log-sum-exp", shape);
    report(d < 1e-5, what, d);
    CK(gpu->attention_backward(gd, gdout, gqkv, gout, glse, gscr, B, T, C, NH));
    CK(gpu->attention_backward(gd2, gdout, gqkv, gout, glse, gscr, B, T, C, NH));
    float *fd = back(gd, nqkv), *fd2 = back(gd2, nqkv);
    d = maxrel(fd, dqkv, nqkv);
    snprintf(what, sizeof what, "attention fused backward %s: dqkv accumulates, vs the CPU", shape);
    report(d < 5e-5, what, d);
    snprintf(what, sizeof what, "attention fused backward %s: the same bits on a second run", shape);
    report(memcmp(fd, fd2, nqkv * 4) == 0, what, (double)(memcmp(fd, fd2, nqkv * 4) != 0));

    float *rout = dev(NULL, nout * 4), *ratt = dev(NULL, natt * 4), *rd = dev(dqkv0, nqkv * 4);
    float *rscr = dev(NULL, gpu->attention_ref_scratch(NH, T) * 4);
    CK(gpu->attention_forward_ref(ctx, rout, ratt, gqkv, B, T, C, NH));
    float *ro = back(rout, nout), *ra = back(ratt, natt);
    size_t above = 0; /* the masked entries: exactly 0, as the CPU writes them */
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        for (int u = (int)(r % T) + 1; u < T; u++) above += ra[r * T + u] != 0;
    d = fmax(maxrel(ro, out, nout), maxrel(ra, att, natt));
    snprintf(what, sizeof what, "attention reference forward %s: out, att vs the CPU", shape);
    report(d < 1e-5 && above == 0, what, d);
    CK(gpu->attention_backward_ref(ctx, rd, gdout, gqkv, ratt, rscr, B, T, C, NH));
    float *rdh = back(rd, nqkv);
    d = maxrel(rdh, dqkv, nqkv);
    snprintf(what, sizeof what, "attention reference backward %s: dqkv vs the CPU", shape);
    report(d < 5e-5, what, d);
    d = fmax(maxrel(fo, ro, nout), maxrel(fd, rdh, nqkv));
    snprintf(what, sizeof what, "attention fused vs reference %s: out, dqkv", shape);
    report(d < 5e-5, what, d);

    void *all[] = {gqkv, gdout, gout, glse, gd, gd2, gscr, rout, ratt, rd, rscr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(qkv), free(dout), free(dqkv0), free(dqkv), free(out), free(att), free(scratch), free(lse);
    free(fo), free(fl), free(fd), free(fd2), free(ro), free(ra), free(rdh);
}

static void attention_shapes(void)
{
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    /* head sizes padded to 32, 64 and 128 columns (16, 24, 100 not multiples of anything), T
     * not a multiple of the 32-row tiles nor of the blocks' 16 or 32 own rows, T = 1 */
    static const int shapes[][4] = {{2, 37, 48, 2}, {3, 33, 64, 4}, {2, 100, 128, 2},
                                    {1, 70, 256, 2}, {1, 45, 200, 2}, {2, 1, 64, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        attention(ctx, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
    gpu->ctx_destroy(ctx);
    /* refused before any launch, so no buffers */
    int e1 = gpu->attention_forward(NULL, NULL, NULL, 1, 4, 272, 2);
    int e2 = gpu->attention_forward(NULL, NULL, NULL, 1, 4, 65, 2);
    report(e1 != 0 && e2 != 0, "attention fused refuses head size 136 and heads not dividing C",
           (double)(e1 == 0) + (e2 == 0));
}

static void loss_lp(void)
{
    int BT = 45, V = 300, vb = 128;
    size_t n = (size_t)BT * V;
    int32_t *y = malloc(BT * sizeof *y);
    for (int i = 0; i < BT; i++) y[i] = (int32_t)((i * 131) % V);
    float *x = randn(n, 60), *losses = calloc(BT, 4);
    uint16_t *lg = malloc(n * 2), *got = malloc(n * 2);
    int32_t *gy = dev(y, BT * sizeof *y);
    float *gloss = dev(NULL, BT * 4);
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int k = 0; k < 2; k++) {
        enum dt_dtype t = types[k];
        char what[96];
        dt_kernels_cpu.cast_to_lp(kc, lg, x, n, t);
        uint16_t *glg = dev(lg, n * 2);
        float mean_cpu = dt_kernels_cpu.softmax_xent_lp(kc, losses, lg, y, 1.0f / BT, BT, V, vb, t), mean_gpu = 0;
        CK(gpu->softmax_xent_lp(gloss, glg, gy, 1.0f / BT, BT, V, vb, (int)t, &mean_gpu));
        float *hl = back(gloss, BT);
        CK(gpu->to_host(got, glg, n * 2));
        double d = fmax(maxrel(hl, losses, BT), fabs((double)mean_gpu - mean_cpu));
        snprintf(what, sizeof what, "softmax_xent_lp %s: losses and their mean", dt_dtype_str(t));
        report(d < 1e-5, what, d);
        int worst = 0;
        for (size_t i = 0; i < n; i++) worst = ulps(got[i], lg[i]) > worst ? ulps(got[i], lg[i]) : worst;
        /* the GPU's expf is not glibc's: a few fp32 ulp, at most one after rounding to 16 bits */
        snprintf(what, sizeof what, "softmax_xent_lp %s: the gradient in place, block-major, within 1 ulp",
                 dt_dtype_str(t));
        report(worst <= 1, what, worst);
        free(hl);
        gpu->free(glg);
    }
    gpu->free(gy), gpu->free(gloss);
    free(y), free(x), free(losses), free(lg), free(got);
}

static void narrow_widen(void)
{
    /* under and over the kernels' 4096-value head, the larger through several ordered passes */
    static const size_t sizes[] = {1000, 100003};
    static const enum dt_dtype types[] = {DT_BF16, DT_F16};
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2; k++) {
            size_t n = sizes[s];
            enum dt_dtype t = types[k];
            char what[96];
            float *x = randn(n, 70), *got = malloc(n * 4);
            /* magnitudes from 2^-24 to 2^23: fp16's subnormals and overflow too */
            for (size_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)(i % 48) - 24);
            float *g = dev(x, n * 4);
            dt_kernels_cpu.narrow_inplace(kc, x, n, t);
            CK(gpu->narrow_inplace(g, n, (int)t));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, g, n * 4));
            snprintf(what, sizeof what, "narrow_inplace %s, %zu values, bit for bit", dt_dtype_str(t), n);
            report(memcmp(got, x, n * 2) == 0, what, (double)(memcmp(got, x, n * 2) != 0));
            dt_kernels_cpu.widen_inplace(kc, x, n, t);
            CK(gpu->widen_inplace(g, n, (int)t));
            CK(gpu->synchronize());
            CK(gpu->to_host(got, g, n * 4));
            snprintf(what, sizeof what, "widen_inplace %s, %zu values, bit for bit", dt_dtype_str(t), n);
            report(memcmp(got, x, n * 4) == 0, what, (double)(memcmp(got, x, n * 4) != 0));
            gpu->free(g);
            free(x), free(got);
        }
}

int main(void)
{
    const struct dt_cuda_module *m;
    if (dt_cuda_module_get(&m) != DT_SUCCESS) {
        const char *msg = dt_error_msg();
        printf("1..0 # SKIP no CUDA module: %.*s\n", (int)strcspn(msg, "\n"), msg);
        return 77;
    }
    char why[200] = "";
    if (m->device_count(why, sizeof why) == 0) {
        printf("1..0 # SKIP %s\n", why);
        return 77;
    }
    gpu = m->ops;
    if (dt_kernels_cpu.ctx_create(-1, &kc) != DT_SUCCESS || gpu->set_device(0)) {
        printf("Bail out! cannot start the CPU kernels or select GPU 0\n");
        return 1;
    }
    elementwise();
    casts();
    optimizer_and_norms();
    layernorm_and_positions(768);
    layernorm_and_positions(77); /* fewer channels than threads, and odd */
    embeddings_and_loss();
    matmuls();
    updates_and_conversions();
    attention_shapes();
    loss_lp();
    narrow_widen();
    dt_kernels_cpu.ctx_destroy(kc);
    printf("1..%d\n", tap_n);
    return failed ? 1 : 0;
}
