/*
 * cuda_ops_optim.c - test_cuda_ops.gpu's cases for the optimizer's reductions and steps: the
 * gradient's sum of squares and inf/nan count (sumsq_parts, norm2), multi-tensor AdamW (adam2),
 * against the CPU twins (test_cuda_ops.c runs them).
 */
#include <math.h>
#include <string.h>
#include "cuda_check.h"
#include "cuda_ops_cases.h"

/* module.h's sumsq_parts over one part */
static int sumsq1(const void *x, int t, size_t n, double *s, size_t *bad)
{
    struct dt_cuda_part p = {x, n};
    return gpu->sumsq_parts(mm, &p, 1, t, s, bad);
}

void optimizer_and_norms(void)
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
    CK(sumsq1(dg, (int)DT_F32, N, &s, &bad));
    size_t cpu_bad = dt_kernels_cpu.nonfinite(kc, g, DT_F32, N);
    g[17] = g[4242] = 0;
    report(bad == cpu_bad && bad == 2, "nonfinite counts the inf and the nan", (double)bad);
    CK(gpu->to_device(dg, g, N * 4));
    CK(sumsq1(dg, (int)DT_F32, N, &s, &bad));
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
        CK(sumsq1(dh, (int)lp[k], N, &s, &bad));
        snprintf(what, sizeof what, "nonfinite, %s gradient", dt_dtype_str(lp[k]));
        report(bad == dt_kernels_cpu.nonfinite(kc, h, lp[k], N) && bad == 1, what, (double)bad);
        g[99] = 0;
        dt_kernels_cpu.cast_to_lp(kc, h, g, N, lp[k]);
        CK(gpu->to_device(dh, h, N * 2));
        CK(sumsq1(dh, (int)lp[k], N, &s, &bad));
        ref = dt_kernels_cpu.sumsq(kc, h, lp[k], N);
        snprintf(what, sizeof what, "sumsq, %s gradient", dt_dtype_str(lp[k]));
        report(fabs(s - ref) / ref < 1e-12, what, fabs(s - ref) / ref);
    }
    gpu->free(dp), gpu->free(dg), gpu->free(dm), gpu->free(dv), gpu->free(dh);
    free(p), free(g), free(m), free(v), free(h);
}

/* Six slices in one launch, gradients of type gt and 16-bit copies of type pt: one empty, three with
 * Adam's L2 penalty, one undecayed, four writing a copy. For adam2's packs (8 elements, a multiple of
 * 8 into a slice, buffers aligned to them): the first four slices start on multiples of 8, with and
 * without a copy and the penalty; the fifth too, but its buffers lie 4 elements past its place, so
 * the alignment alone sends it element by element; it and the sixth end off a multiple of 8. The
 * bits of adamw slice by slice on the GPU (one element function), the parameters and moments within
 * 1e-6 of the CPU's. */
void adamw_slices_case(enum dt_dtype gt, enum dt_dtype pt)
{
    enum { NS = 6, SHIFT = 4 };
    static const size_t len[NS] = {5000, 0, 70000, 4096, 4097, 13};
    static const float wds[NS] = {0.1f, 0.1f, 0.0f, 0.1f, 0.1f, 0.1f}, l2s[NS] = {0.01f, 0, 0, 0.01f, 0, 0.01f};
    static const bool copies[NS] = {true, false, true, false, true, true};
    size_t N = SHIFT, es = dt_dtype_size(gt);
    for (int i = 0; i < NS; i++) N += len[i];
    float *p = randn(N, 50), *g32 = randn(N, 51), *m = randn(N, 52), *v = randn(N, 53);
    char *g = typed(g32, N, gt), what[160];
    for (size_t i = 0; i < N; i++) v[i] = fabsf(v[i]);
    float *dp = dev(p, N * 4), *dm = dev(m, N * 4), *dv = dev(v, N * 4);
    char *dg = dev(g, N * es);
    float *dp1 = dev(p, N * 4), *dm1 = dev(m, N * 4), *dv1 = dev(v, N * 4);
    uint16_t *d16 = dev(NULL, N * 2), *d16one = dev(NULL, N * 2);
    struct dt_cuda_adamw_slice s[NS];
    size_t at = 0;
    for (int i = 0; i < NS; i++) {
        size_t b = at + (i >= 4 ? SHIFT : 0); /* the buffers' place */
        s[i] = (struct dt_cuda_adamw_slice){dp + b, dm + b, dv + b, dg + b * es, copies[i] ? d16 + b : NULL, len[i],
                                            wds[i], l2s[i]};
        if (len[i])
            CK(gpu->adamw(dp1 + b, dg + b * es, (int)gt, 0.5f, l2s[i], dm1 + b, dv1 + b, len[i], 3e-4f, 0.9f, 0.95f,
                          1e-8f, wds[i], 7, copies[i] ? d16one + b : NULL, (int)pt));
        dt_kernels_cpu.adamw(kc, p + b, g + b * es, gt, 0.5f, l2s[i], m + b, v + b, len[i], 3e-4f, 0.9f, 0.95f, 1e-8f,
                             wds[i], 7, NULL, DT_F32);
        at += len[i];
    }
    CK(gpu->adamw_slices(mm, s, NS, (int)gt, 0.5f, 3e-4f, 0.9f, 0.95f, 1e-8f, 7, (int)pt));
    float *hp = back(dp, N), *hm = back(dm, N), *hv = back(dv, N), *hp1 = back(dp1, N), *hm1 = back(dm1, N);
    float *hv1 = back(dv1, N);
    uint16_t *h16 = back_typed(d16, N, pt), *h16one = back_typed(d16one, N, pt);
    bool same = !memcmp(hp, hp1, N * 4) && !memcmp(hm, hm1, N * 4) && !memcmp(hv, hv1, N * 4) &&
                !memcmp(h16, h16one, N * 2);
    snprintf(what, sizeof what, "adamw_slices, %s gradients, %s copies: one launch, the bits of adamw slice by slice",
             dt_dtype_str(gt), dt_dtype_str(pt));
    report(same, what, (double)!same);
    double d = fmax(maxrel(hp, p, N), fmax(maxrel(hm, m, N), maxrel(hv, v, N)));
    snprintf(what, sizeof what, "adamw_slices, %s gradients: parameters and both moments against the CPU",
             dt_dtype_str(gt));
    report(d < 1e-6, what, d);
    void *all[] = {dp, dg, dm, dv, dp1, dm1, dv1, d16, d16one};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(p), free(g32), free(g), free(m), free(v), free(hp), free(hm), free(hv), free(hp1), free(hm1), free(hv1);
    free(h16), free(h16one);
}

/* the gradient's sum of squares and inf/nan count from places 0, 1 and 3 elements in (under norm2:
 * a head before the first 16-byte boundary, packs, a tail), fp32, bf16 and fp16, an inf at the
 * first, middle and last element, against the CPU */
void sumsq_offsets(void)
{
    static const enum dt_dtype t[] = {DT_F32, DT_BF16, DT_F16};
    size_t n = 100003, cap = n + 3;
    float *g = randn(cap, 99);
    int bad_cases = 0;
    double worst = 0;
    for (int k = 0; k < 3; k++)
        for (size_t off = 0; off < 4; off += off ? 2 : 1)
            for (int inf = 0; inf < 2; inf++) {
                size_t es = dt_dtype_size(t[k]);
                if (inf) g[off] = g[off + n / 2] = g[off + n - 1] = INFINITY;
                void *h = typed(g, cap, t[k]);
                char *d = dev(h, cap * es);
                double s = 0;
                size_t bad = 0;
                CK(sumsq1(d + off * es, (int)t[k], n, &s, &bad));
                size_t cbad = dt_kernels_cpu.nonfinite(kc, (char *)h + off * es, t[k], n);
                bad_cases += bad != cbad || bad != (inf ? 3u : 0u);
                if (!inf) {
                    double ref = dt_kernels_cpu.sumsq(kc, (char *)h + off * es, t[k], n);
                    worst = fmax(worst, fabs(s - ref) / ref);
                }
                if (inf) g[off] = g[off + n / 2] = g[off + n - 1] = 1.0f;
                gpu->free(d);
                free(h);
            }
    /* fewer elements than the head before the first boundary: 1, 2 and 5 from one element in */
    static const size_t shorts[] = {1, 2, 5};
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) {
            size_t es = dt_dtype_size(t[k]), m = shorts[j];
            g[1] = INFINITY;
            void *h = typed(g, cap, t[k]);
            char *d = dev(h, cap * es);
            double s = 0;
            size_t bad = 0;
            CK(sumsq1(d + es, (int)t[k], m, &s, &bad));
            double ref = dt_kernels_cpu.sumsq(kc, (char *)h + es, t[k], m);
            bad_cases += bad != 1 || !(isinf(s) && isinf(ref));
            g[1] = 1.0f;
            gpu->free(d);
            free(h);
        }
    report(bad_cases == 0 && worst < 1e-12,
           "sumsq_parts from aligned and unaligned places, each type, 1 to 100003 elements: the CPU's count, its "
           "sum within 1e-12", worst);
    /* DT_CUDA_PARTS_MAX parts in one call, each its own length and place, an inf in some: each part's
     * results those of the part alone, bit for bit; more parts than that refused */
    g[0] = INFINITY;
    char *d = dev(g, cap * 4);
    struct dt_cuda_part parts[DT_CUDA_PARTS_MAX + 1];
    double sq[DT_CUDA_PARTS_MAX + 1], one;
    size_t nb[DT_CUDA_PARTS_MAX + 1], bone;
    for (int i = 0; i <= DT_CUDA_PARTS_MAX; i++)
        parts[i] = (struct dt_cuda_part){d + (size_t)(i * 771 % 1000) * 4, (size_t)1 + (size_t)i * 757 % 99000};
    CK(gpu->sumsq_parts(mm, parts, DT_CUDA_PARTS_MAX, (int)DT_F32, sq, nb));
    int differ = 0;
    for (int i = 0; i < DT_CUDA_PARTS_MAX; i++) {
        CK(sumsq1(parts[i].x, (int)DT_F32, parts[i].n, &one, &bone));
        differ += memcmp(&one, &sq[i], sizeof one) != 0 || bone != nb[i] || bone != (parts[i].x == d);
    }
    int over = gpu->sumsq_parts(mm, parts, DT_CUDA_PARTS_MAX + 1, (int)DT_F32, sq, nb);
    report(differ == 0 && over != 0, "sumsq_parts: 128 parts in one call give each part's own results, 129 refused",
           (double)differ);
    gpu->free(d);
    g[0] = 1.0f;
    free(g);
}
