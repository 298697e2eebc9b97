/*
 * test_cuda_ops.c - every CUDA op kernel of the module (kernels/cuda/ops.cu and its siblings)
 * against its CPU twin (dt_kernels_cpu) on random inputs, with a tolerance per op written here: casts bit for bit
 * (both sides compile core/half.h), elementwise ops within a few ulp (the GPU's expf is not
 * glibc's), reductions in the CPU's fixed order (row blocks of 64) bit for bit where they add
 * without multiplying, matmuls within the rounding error bound of fp32 accumulation. Each op that
 * takes activations of the run's type is run in fp32, bf16 and fp16: a 16-bit result may differ
 * from the CPU's by the fp32 tolerance plus one unit in its last place (lp_excess). Attention has a
 * program of its own (test_cuda_attention.c). Speaks TAP into its log; where the
 * module cannot be loaded or sees no GPU it says why and exits 77, which `make check` counts as
 * skipped, so it runs for real only on a GPU node: `make check-gpu`.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include "core/half.h"
#include "cuda_check.h"
#include "kernels/formulas.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/plan.h"

/* Llama's ops on activations of each type against the CPU: RMSNorm (145 rows: two full row blocks
 * and a part; backward accumulates into values, its dweight in the CPU's block order up to the
 * fused multiply-adds nvcc may form, its 16-bit dinp the GPU's own sum rounded), rotary embeddings
 * on 3 query and 1 key/value heads of 64 and back, SwiGLU forward and backward (written) */
static void llama_ops(void)
{
    enum { B = 5, T = 29, BT = B * T, C = 96, NH = 3, NKV = 1, HS = 64, W = (NH + 2 * NKV) * HS, H = 77 };
    float *x = randn(BT * C, 60), *w = randn(C, 61), *dy = randn(BT * C, 62), *q = randn((size_t)BT * W, 63);
    float *u = randn((size_t)BT * 2 * H, 64), *du = randn((size_t)BT * H, 65), *dx0 = randn(BT * C, 66);
    float *cs = malloc(T * HS * sizeof *cs), *rstd = calloc(BT, 4), *dw = calloc(C, 4), *dx = malloc(BT * C * 4);
    dt_rope_table(cs, T, HS, 500000.0f);
    float *gx = dev(x, BT * C * 4), *gw = dev(w, C * 4), *gdy = dev(dy, BT * C * 4), *grstd = dev(NULL, BT * 4);
    float *gcs = dev(cs, T * HS * 4), *gdu = dev(du, (size_t)BT * H * 4), *gdx = dev(dx0, BT * C * 4);
    float *gdw = dev(NULL, C * 4);
    char what[128];
    for (int k = 0; k < 3; k++) {
        enum dt_dtype t = act_types[k];
        size_t es = dt_dtype_size(t);
        void *cpu = malloc((size_t)BT * W * es), *gout = dev(NULL, (size_t)BT * W * es);
        dt_kernels_cpu.rmsnorm_forward(kc, cpu, t, rstd, x, w, 1e-5f, BT, C);
        CK(gpu->rmsnorm_forward(gout, (int)t, grstd, gx, gw, 1e-5f, BT, C));
        void *h = back_typed(gout, BT * C, t);
        float *hr = back(grstd, BT);
        double d = fmax(act_diff(h, cpu, BT * C, t), maxrel(hr, rstd, BT));
        snprintf(what, sizeof what, "rmsnorm_forward %s: out, rstd", dt_dtype_str(t));
        report(d < 1e-5, what, d);
        free(h), free(hr);
        /* backward from the CPU's rstd on both sides */
        CK(gpu->to_device(grstd, rstd, BT * 4));
        CK(gpu->to_device(gdx, dx0, BT * C * 4));
        CK(gpu->to_device(gdw, dw, C * 4));
        memcpy(dx, dx0, BT * C * 4);
        float *cdw = calloc(C, 4);
        memcpy(cdw, dw, C * 4);
        dt_kernels_cpu.rmsnorm_backward(kc, dx, NULL, DT_F32, cdw, dy, x, w, rstd, BT, C);
        CK(gpu->rmsnorm_backward(mm, gdx, t == DT_F32 ? NULL : gout, (int)t, gdw, gdy, gx, gw, grstd, BT, C));
        float *hx = back(gdx, BT * C), *hw = back(gdw, C);
        d = fmax(maxrel(hx, dx, BT * C), maxrel(hw, cdw, C));
        snprintf(what, sizeof what, "rmsnorm_backward, %s copy: dinp, dweight", dt_dtype_str(t));
        report(d < 1e-4, what, d);
        if (t != DT_F32) {
            uint16_t *hl = back_typed(gout, BT * C, t);
            size_t off = 0;
            for (int i = 0; i < BT * C; i++)
                off += hl[i] != (t == DT_BF16 ? dt_bf16_from_f32(hx[i]) : dt_f16_from_f32(hx[i]));
            snprintf(what, sizeof what, "rmsnorm_backward: the %s copy of dinp is its sum rounded", dt_dtype_str(t));
            report(off == 0, what, (double)off);
            free(hl);
        }
        free(hx), free(hw), free(cdw);
        /* rope there and back: in place on the query and key heads, the values untouched */
        for (int dir = 0; dir < 2; dir++) {
            void *qt = typed(q, (size_t)BT * W, t);
            CK(gpu->to_device(gout, qt, (size_t)BT * W * es));
            if (dir) dt_kernels_cpu.rope_backward(kc, qt, t, cs, B, T, NH, NKV, HS);
            else dt_kernels_cpu.rope_forward(kc, qt, t, cs, B, T, NH, NKV, HS);
            CK(gpu->rope(gout, (int)t, gcs, B, T, NH, NKV, HS, dir));
            h = back_typed(gout, (size_t)BT * W, t);
            d = act_diff(h, qt, (size_t)BT * W, t);
            snprintf(what, sizeof what, "rope_%s %s, grouped heads", dir ? "backward" : "forward", dt_dtype_str(t));
            report(d < 1e-5, what, d);
            free(h), free(qt);
        }
        /* SwiGLU */
        void *ut = typed(u, (size_t)BT * 2 * H, t), *gu = dev(ut, (size_t)BT * 2 * H * es);
        dt_kernels_cpu.swiglu_forward(kc, cpu, ut, t, BT, H);
        CK(gpu->swiglu_forward(gout, gu, (int)t, BT, H));
        h = back_typed(gout, (size_t)BT * H, t);
        d = act_diff(h, cpu, (size_t)BT * H, t);
        snprintf(what, sizeof what, "swiglu_forward %s", dt_dtype_str(t));
        report(d < 1e-5, what, d);
        free(h);
        dt_kernels_cpu.swiglu_backward(kc, cpu, ut, du, t, BT, H);
        CK(gpu->swiglu_backward(gout, gu, gdu, (int)t, BT, H));
        h = back_typed(gout, (size_t)BT * 2 * H, t);
        d = act_diff(h, cpu, (size_t)BT * 2 * H, t);
        snprintf(what, sizeof what, "swiglu_backward %s writes dinp", dt_dtype_str(t));
        report(d < 1e-5, what, d);
        free(h), free(ut), free(cpu);
        gpu->free(gu), gpu->free(gout);
    }
    void *all[] = {gx, gw, gdy, grstd, gcs, gdu, gdx, gdw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(w), free(dy), free(q), free(u), free(du), free(dx0), free(cs), free(rstd), free(dw), free(dx);
}

/* SwiGLU on trial (swiglu2, plan.h): forward and backward with the same bits as the kernels in use,
 * each type, over 145 rows of 96 columns (12 packs a row) and over 65537 rows of 8 (past the grid's
 * 65535 rows: strided); llama_ops' 77 columns are no multiple of 8, so the kernels in use take them */
static void swiglu_packs(void)
{
    static const int shapes[][2] = {{145, 96}, {65537, 8}};
    for (int s = 0; s < 2; s++) {
        int BT = shapes[s][0], H = shapes[s][1];
        size_t n = (size_t)BT * H;
        float *u = randn(2 * n, 70), *dy = randn(n, 71), *gdy = dev(dy, n * 4), *junk = randn(2 * n, 72);
        for (int k = 0; k < 3; k++) {
            enum dt_dtype t = act_types[k];
            size_t es = dt_dtype_size(t);
            void *ut = typed(u, 2 * n, t), *jt = typed(junk, 2 * n, t), *gu = dev(ut, 2 * n * es);
            void *go = dev(NULL, 2 * n * es), *got[2][2];
            for (int trial = 0; trial < 2; trial++) { /* each into junk: a row left unwritten differs */
                gpu->set_tries(trial ? DT_CUDA_TRY_SWIGLU2 : 0);
                CK(gpu->to_device(go, jt, 2 * n * es));
                CK(gpu->swiglu_forward(go, gu, (int)t, BT, H));
                got[trial][0] = back_typed(go, n, t);
                CK(gpu->to_device(go, jt, 2 * n * es));
                CK(gpu->swiglu_backward(go, gu, gdy, (int)t, BT, H));
                got[trial][1] = back_typed(go, 2 * n, t);
            }
            gpu->set_tries(0);
            char what[160];
            void *cpu = malloc(2 * n * es);
            for (int dir = 0; dir < 2; dir++) {
                bool same = memcmp(got[0][dir], got[1][dir], (dir ? 2 : 1) * n * es) == 0;
                snprintf(what, sizeof what, "swiglu2 %s %s, %d rows of %d: the bits of the kernel in use",
                         dir ? "backward" : "forward", dt_dtype_str(t), BT, H);
                report(same, what, (double)!same);
                if (dir) dt_kernels_cpu.swiglu_backward(kc, cpu, ut, dy, t, BT, H);
                else dt_kernels_cpu.swiglu_forward(kc, cpu, ut, t, BT, H);
                double d = act_diff(got[1][dir], cpu, (dir ? 2 : 1) * n, t);
                snprintf(what, sizeof what, "swiglu2 %s %s, %d rows of %d: vs the CPU", dir ? "backward" : "forward",
                         dt_dtype_str(t), BT, H);
                report(d < 1e-5, what, d);
                free(got[0][dir]), free(got[1][dir]);
            }
            free(cpu);
            free(ut), free(jt), gpu->free(gu), gpu->free(go);
        }
        free(u), free(dy), free(junk), gpu->free(gdy);
    }
}

/* RMSNorm over rows of 77 channels (fewer than some lanes' share: a warp's lanes take 3 or 2 each
 * under rms2) and 9 rows (a block of rows part full): forward and backward, bf16, against the CPU */
static void rmsnorm_odd_width(void)
{
    enum { BT = 9, C = 77 };
    float *x = randn(BT * C, 70), *w = randn(C, 71), *dy = randn(BT * C, 72), *dx = randn(BT * C, 73);
    float *rstd = calloc(BT, 4), *dw = calloc(C, 4);
    uint16_t *out = malloc(BT * C * 2);
    float *gx = dev(x, BT * C * 4), *gw = dev(w, C * 4), *gdy = dev(dy, BT * C * 4), *gdx = dev(dx, BT * C * 4);
    float *grstd = dev(NULL, BT * 4), *gdw = dev(NULL, C * 4);
    uint16_t *gout = dev(NULL, BT * C * 2);
    dt_kernels_cpu.rmsnorm_forward(kc, out, DT_BF16, rstd, x, w, 1e-5f, BT, C);
    CK(gpu->rmsnorm_forward(gout, (int)DT_BF16, grstd, gx, gw, 1e-5f, BT, C));
    void *h = back_typed(gout, BT * C, DT_BF16);
    float *hr = back(grstd, BT);
    double d = fmax(act_diff(h, out, BT * C, DT_BF16), maxrel(hr, rstd, BT));
    CK(gpu->to_device(grstd, rstd, BT * 4)); /* backward from the CPU's rstd on both sides */
    dt_kernels_cpu.rmsnorm_backward(kc, dx, NULL, DT_F32, dw, dy, x, w, rstd, BT, C);
    CK(gpu->rmsnorm_backward(mm, gdx, NULL, (int)DT_BF16, gdw, gdy, gx, gw, grstd, BT, C));
    float *hx = back(gdx, BT * C), *hw = back(gdw, C);
    d = fmax(d, fmax(maxrel(hx, dx, BT * C), maxrel(hw, dw, C)));
    report(d < 1e-4, "rmsnorm 9 rows of 77 channels, bf16: out, rstd, dinp, dweight", d);
    free(h), free(hr), free(hx), free(hw), free(x), free(w), free(dy), free(dx), free(rstd), free(dw), free(out);
    void *all[] = {gx, gw, gdy, gdx, grstd, gdw, gout};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
}

/* GELU and the residual add on activations of each type; GELU's backward writes dinp */
static void elementwise(void)
{
    size_t N = 100003;
    float *x = randn(N, 1), *y = randn(N, 2), *a = randn(N, 3), *res = calloc(N, 4);
    for (int k = 0; k < 3; k++) {
        enum dt_dtype t = act_types[k];
        size_t es = dt_dtype_size(t);
        char what[96];
        void *xt = typed(x, N, t), *yt = typed(y, N, t), *cpu = malloc(N * es);
        void *dx = dev(xt, N * es), *dyt = dev(yt, N * es), *dout = dev(NULL, N * es);
        float *dy32 = dev(y, N * 4), *da = dev(a, N * 4), *dres = dev(NULL, N * 4);
        /* from the buffers' start (16-byte packs, N odd: a tail), and one element in (element by element) */
        for (size_t o = 0; o < 2; o++) {
            const char *at = o ? ", one element past an alignment" : "";
            size_t n = N - o;
            void *xo = (char *)xt + o * es, *co = (char *)cpu + o * es, *go = (char *)dout + o * es;
            const void *gxo = (const char *)dx + o * es;
            dt_kernels_cpu.gelu_forward(kc, co, xo, t, n);
            CK(gpu->gelu_forward(go, gxo, (int)t, n));
            void *g = back_typed(go, n, t);
            double d = act_diff(g, co, n, t);
            snprintf(what, sizeof what, "gelu_forward %s%s", dt_dtype_str(t), at);
            report(d < 1e-5, what, d);
            free(g);
            /* written, not added: the buffer starts from other values on both sides */
            memcpy(cpu, yt, N * es);
            dt_kernels_cpu.gelu_backward(kc, co, xo, y + o, t, n);
            CK(gpu->to_device(dout, yt, N * es));
            CK(gpu->gelu_backward(go, gxo, dy32 + o, (int)t, n));
            g = back_typed(go, n, t);
            d = act_diff(g, co, n, t);
            snprintf(what, sizeof what, "gelu_backward %s writes dinp%s", dt_dtype_str(t), at);
            report(d < 1e-5, what, d);
            free(g);
        }
        /* one fp32 add of exactly widened values: the CPU's bits */
        dt_kernels_cpu.residual_forward(kc, res, a, yt, t, N);
        CK(gpu->residual_forward(dres, da, dyt, (int)t, N));
        float *h = back(dres, N);
        snprintf(what, sizeof what, "residual_forward fp32 + %s, bit for bit", dt_dtype_str(t));
        report(memcmp(h, res, N * 4) == 0, what, maxrel(h, res, N));
        free(h), free(xt), free(yt), free(cpu);
        gpu->free(dx), gpu->free(dyt), gpu->free(dout), gpu->free(dy32), gpu->free(da), gpu->free(dres);
    }
    /* refused before any launch: a type of no activation */
    int e1 = gpu->gelu_forward(NULL, NULL, 7, N), e2 = gpu->residual_forward(NULL, NULL, NULL, 7, N);
    report(e1 != 0 && e2 != 0, "gelu and residual refuse an unknown type", (double)(e1 == 0) + (e2 == 0));
    free(x), free(y), free(a), free(res);
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


/* module.h's sumsq_parts over one part */
static int sumsq1(const void *x, int t, size_t n, double *s, size_t *bad)
{
    struct dt_cuda_part p = {x, n};
    return gpu->sumsq_parts(mm, &p, 1, t, s, bad);
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
static void adamw_slices_case(enum dt_dtype gt, enum dt_dtype pt)
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

/* B*T = 145 rows: two full blocks of 64 and a part, so the row blocks' order shows */
static void layernorm_and_positions(int C)
{
    int B = 5, T = 29, BT = B * T;
    size_t n = (size_t)BT * C;
    char what[128];
    float *x = randn(n, 8), *w = randn(C, 9), *b = randn(C, 10), *dy = randn(n, 11);
    float *mean = calloc(BT, 4), *rstd = calloc(BT, 4);
    float *gx = dev(x, n * 4), *gw = dev(w, C * 4), *gb = dev(b, C * 4), *gdy = dev(dy, n * 4);
    float *gmean = dev(NULL, BT * 4), *grstd = dev(NULL, BT * 4);
    for (int k = 0; k < 3; k++) {
        enum dt_dtype t = act_types[k];
        void *cpu = malloc(n * dt_dtype_size(t)), *gout = dev(NULL, n * dt_dtype_size(t));
        dt_kernels_cpu.layernorm_forward(kc, cpu, t, mean, rstd, x, w, b, BT, C);
        CK(gpu->layernorm_forward(gout, (int)t, gmean, grstd, gx, gw, gb, BT, C));
        void *h = back_typed(gout, n, t);
        float *hm = back(gmean, BT), *hr = back(grstd, BT);
        double d = fmax(act_diff(h, cpu, n, t), fmax(maxrel(hm, mean, BT), maxrel(hr, rstd, BT)));
        snprintf(what, sizeof what, "layernorm_forward %s, C = %d: out, mean, rstd", dt_dtype_str(t), C);
        report(d < 1e-5, what, d);
        free(h), free(hm), free(hr), free(cpu);
        gpu->free(gout);
    }
    /* backward accumulates: start from values, so "=" in place of "+=" would show; both sides from
     * the CPU's mean and rstd */
    float *dx = randn(n, 13), *dw = randn(C, 14), *db = randn(C, 15);
    float *gdx = dev(dx, n * 4), *gdw = dev(dw, C * 4), *gdb = dev(db, C * 4);
    CK(gpu->to_device(gmean, mean, BT * 4));
    CK(gpu->to_device(grstd, rstd, BT * 4));
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    dt_kernels_cpu.layernorm_backward(kc, dx, NULL, DT_F32, dw, db, dy, x, w, mean, rstd, BT, C);
    CK(gpu->layernorm_backward(ctx, gdx, NULL, DT_F32, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
    float *hx = back(gdx, n), *hw = back(gdw, C), *hb = back(gdb, C);
    /* dinp: sums over C in another order; dweight: the CPU's order, but nvcc and GCC may fuse the
     * product's last multiply with the add differently (an fp32 rounding per row, 145 rows) */
    double d = fmax(maxrel(hx, dx, n), maxrel(hw, dw, C));
    snprintf(what, sizeof what, "layernorm_backward, C = %d: dinp, dweight", C);
    report(d < 1e-4, what, d);
    snprintf(what, sizeof what, "layernorm_backward, C = %d: dbias, row blocks in the CPU's order, bit for bit", C);
    report(memcmp(hb, db, C * 4) == 0, what, maxrel(hb, db, C));
    /* the same bits on a second run (no atomics) */
    float *hw1 = hw, *hb1 = hb;
    CK(gpu->to_device(gdw, dw, C * 4));
    CK(gpu->to_device(gdb, db, C * 4));
    CK(gpu->layernorm_backward(ctx, gdx, NULL, DT_F32, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
    hw = back(gdw, C), hb = back(gdb, C);
    dt_kernels_cpu.layernorm_backward(kc, dx, NULL, DT_F32, dw, db, dy, x, w, mean, rstd, BT, C);
    snprintf(what, sizeof what, "layernorm_backward, C = %d: a second pass adds the same sums again", C);
    report(memcmp(hb, db, C * 4) == 0 && maxrel(hw, dw, C) < 1e-4, what, maxrel(hw, dw, C));
    /* the residual stream's gradient rounded into a 16-bit copy in the same pass: the GPU's own sum */
    uint16_t *glp = dev(NULL, n * 2);
    CK(gpu->layernorm_backward(ctx, gdx, glp, (int)DT_BF16, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
    float *hx2 = back(gdx, n);
    uint16_t *hl = back_typed(glp, n, DT_BF16);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += hl[i] != dt_bf16_from_f32(hx2[i]);
    snprintf(what, sizeof what, "layernorm_backward, C = %d: the bf16 copy of dinp is its sum rounded", C);
    report(off == 0, what, (double)off);
    free(hx2), free(hl);
    gpu->free(glp);
    free(hx), free(hw), free(hb), free(hw1), free(hb1);
    gpu->ctx_destroy(ctx);
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
    void *all[] = {gx, gw, gb, gdy, gmean, grstd, gdx, gdw, gdb, gwpe, gpos, gdwpe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(x), free(w), free(b), free(dy), free(mean), free(rstd), free(dx), free(dw), free(db);
}

/*
 * A table's gradient into a range of it, the CPU's sums in the CPU's order, bit for bit, for a table
 * of each type. The cases: rows repeating within one stretch of the kernel's 256 entries; many
 * stretches (nrows 3000) over more table rows than the kernel's 1024 groups, so a block owns several
 * rows, with a token that repeats hundreds of times; a range starting and ending inside rows.
 */
static void rows_add_cases(void)
{
    static const struct {
        int nrows, width, V, lo_row, lo_col, len_rows;
    } cases[] = {{132, 96, 160, 37, 5, 120}, {3000, 40, 2500, 3, 17, 2400}, {700, 300, 50, 0, 0, 50}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int nrows = cases[k].nrows, width = cases[k].width, V = cases[k].V;
        size_t lo = (size_t)cases[k].lo_row * width + (size_t)cases[k].lo_col, len = (size_t)cases[k].len_rows * width;
        int32_t *tok = malloc(nrows * sizeof *tok);
        for (int i = 0; i < nrows; i++) tok[i] = i % 5 == 0 ? 7 : (int32_t)(((unsigned)i * 7919u) % (unsigned)V);
        float *vals = randn((size_t)nrows * width, 22 + (unsigned)k), *dst = randn(len, 23 + (unsigned)k);
        float *gvals = dev(vals, (size_t)nrows * width * 4);
        int32_t *gtok = dev(tok, nrows * sizeof *tok);
        for (int ti = 0; ti < 3; ti++) {
            enum dt_dtype t = act_types[ti];
            size_t es = dt_dtype_size(t);
            void *d = typed(dst, len, t), *gd = dev(d, len * es);
            dt_kernels_cpu.rows_add(kc, d, t, lo, len, tok, vals, nrows, width);
            CK(gpu->rows_add(mm, gd, (int)t, lo, len, gtok, gvals, nrows, width));
            void *h = back_typed(gd, len, t);
            char what[128];
            snprintf(what, sizeof what, "rows_add %s, %d entries of width %d, repeated rows, bit for bit", dt_dtype_str(t),
                     nrows, width);
            report(memcmp(h, d, len * es) == 0, what, (double)(memcmp(h, d, len * es) != 0));
            free(h), free(d);
            gpu->free(gd);
        }
        gpu->free(gvals), gpu->free(gtok);
        free(tok), free(vals), free(dst);
    }
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
    /* softmax + cross-entropy on block-major logits (vb < V), loss and gradient in place */
    int BT = 45, vb = 128;
    float *logits = randn((size_t)BT * V, 24), *losses = calloc(BT, 4);
    int32_t *y = malloc(BT * sizeof *y);
    for (int i = 0; i < BT; i++) y[i] = (int32_t)((i * 131) % V);
    float *glog = dev(logits, (size_t)BT * V * 4), *gloss = dev(NULL, BT * 4);
    int32_t *gy = dev(y, BT * sizeof *y);
    float mean_cpu = dt_kernels_cpu.softmax_xent(kc, losses, logits, y, 1.0f / BT, BT, V, vb, NULL), mean_gpu = 0;
    CK(gpu->to_device(glog, logits, (size_t)BT * V * 4)); /* again, its mean into a sink on the device */
    double *gacc = dev(NULL, sizeof(double)), acc = 0.25;
    CK(gpu->to_device(gacc, &acc, sizeof acc));
    CK(gpu->softmax_xent(gloss, glog, gy, 0.0f, BT, V, vb, NULL, gacc, 2.0));
    CK(gpu->softmax_xent(gloss, glog, gy, 1.0f / BT, BT, V, vb, &mean_gpu, NULL, 1.0));
    CK(gpu->to_host(&acc, gacc, sizeof acc));
    float *hl = back(gloss, BT), *hg = back(glog, (size_t)BT * V);
    double d = fmax(maxrel(hl, losses, BT), fabs((double)mean_gpu - mean_cpu));
    report(d < 1e-5, "softmax_xent: losses and their mean", d);
    /* the device's tree and the host's row order may differ in double's last bit, not in the float */
    d = fabs(acc - (0.25 + (double)mean_gpu / 2.0));
    report(d == 0, "softmax_xent: the mean into a sink on the device, as the host adds it", d);
    d = maxrel(hg, logits, (size_t)BT * V);
    report(d < 1e-6, "softmax_xent: the gradient written in place, block-major", d);
    free(hl), free(hg);
    void *all[] = {gtab, gout, gtok, glog, gloss, gy, gacc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) gpu->free(all[i]);
    free(tok), free(table), free(out), free(logits), free(losses), free(y);
}

/*
 * The matmuls' tolerance, from the arithmetic: each output is a sum of K exact products (fp32 x
 * fp32 in fp32 is not exact, but its rounding is one of the K + 2 below; 16-bit x 16-bit is exact in
 * fp32) plus at most an initial value (accumulation) and a bias, added in fp32 in some order. Any
 * order of recursive or blocked summation, fused or not, is within gamma_{K+2} S ~ (K + 2) u S of the
 * exact sum, S the sum of the terms' magnitudes and u = 2^-24 (Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., section 3.1). The CPU rounds to nearest; tensor cores' fp32
 * accumulation may truncate (Fasi et al. 2021), up to twice that per add. So the two results lie
 * within 3 (K + 2) u S of each other. bound() returns S per output element, in double; mm_excess
 * the largest |got - ref| / (3 (K + 2) u S) (for 16-bit outputs after one ulp of the type is taken
 * off, lp_excess's argument): at most 1 when the GPU is right. A term missing or doubled is an
 * error of about |a b|, far above (K + 2) u S for the shapes here; TF32 (a 2^-11 relative error per
 * product) is caught by its own test below.
 */

/* S(r, c) = sum_k |A(r, k) B(c, k)| + |init(r, c)| + |bias(c)|, A (R, K) and B (Cn, K) row-major
 * with strides (sa_r, sa_k) and (sb_c, sb_k); init and bias may be NULL */
static double *bound(const float *A, size_t sa_r, size_t sa_k, const float *B, size_t sb_c, size_t sb_k, const float *init,
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
        double g, r, ulp = 0;
        if (t == DT_F32) {
            g = ((const float *)got)[i], r = ((const float *)ref)[i];
        } else {
            uint16_t hg = ((const uint16_t *)got)[i], hr = ((const uint16_t *)ref)[i];
            uint16_t big = (hg & 0x7fff) > (hr & 0x7fff) ? hg & 0x7fff : hr & 0x7fff;
            g = wide16(hg, t), r = wide16(hr, t), ulp = wide16((uint16_t)(big + 1), t) - wide16(big, t);
        }
        double d = fmax(0.0, fabs(g - r) - ulp) / (3.0 * (K + 2) * U32 * S[i] + 1e-30);
        if (!(d <= m)) m = d, *worst = i;
    }
    return m;
}

static double mm_excess(const void *got, const void *ref, const double *S, size_t n, int K, enum dt_dtype t)
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
static void round_host(float *x, size_t n, enum dt_dtype lp)
{
    if (lp != DT_F32) dt_kernels_cpu.round_lp(kc, x, x, n, lp);
}

/*
 * One shape, one operand type lp (fp32: matmul_forward/_backward; bf16, fp16: the _lp twins with
 * inp of type lp) against the CPU: forward into fp32 (and for lp, into lp: rounded once), backward
 * from dout in fp32 (rounded to lp there) and in lp, accumulating or overwriting (set). dbias: the
 * column sums of the rounded dout in the CPU's order, bit for bit.
 */
/* the kernels on trial matmul_case holds to their own checks (bgradb's dbias) */
static unsigned trying;

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
static void matmul_gelu_exact(void *ctx, enum dt_dtype lp)
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

static void matmul_gelu_case(void *ctx, enum dt_dtype lp, int BT, int C, int OC)
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

static void matmuls(void)
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
static void bgradb_cases(void)
{
    void *ctx = NULL;
    CK(gpu->ctx_create(&ctx));
    static const int shapes[3][3] = {{256, 192, 384}, {256, 768, 768}, {67, 96, 130}};
    for (int k = 0; k < 12; k++)
        matmul_case(ctx, k % 2 ? DT_F16 : DT_BF16, shapes[k / 4][0], shapes[k / 4][1], shapes[k / 4][2], true,
                    k % 4 < 2 ? DT_SET_DINP | DT_SET_DPARAMS : 0);
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
    float ref = dt_kernels_cpu.mse(kc, dout, p, g, 0.25f, N, NULL);
    CK(gpu->mse(mm, gdout, gp, gg, 0.25f, N, &loss, NULL, 1.0));
    float *hd = back(gdout, N);
    d = fmax(fabs((double)loss - ref) / ref, maxrel(hd, dout, N));
    report(d < 1e-6, "mse: the loss and its gradient", d);
    double *gacc = dev(NULL, sizeof(double)), acc = -1;
    CK(gpu->to_device(gacc, &acc, sizeof acc));
    CK(gpu->mse(mm, gdout, gp, gg, 0.0f, N, NULL, gacc, 4.0));
    CK(gpu->to_host(&acc, gacc, sizeof acc));
    report(acc == -1 + (double)loss / 4, "mse: the mean into a sink on the device, the host's bits", acc);
    gpu->free(gacc);
    free(hd), free(dout), free(r), free(gr16), free(p), free(g), free(b);
    gpu->free(gp), gpu->free(gg), gpu->free(gbuf), gpu->free(gr), gpu->free(gdout);
}

/* 16-bit logits: V = 300 in blocks of 128 (the last block's rows at addresses of every parity: the
 * kernel's row in shared memory, read 16 bytes at a time from a boundary), and V = 120001, whose row
 * (234 KiB) fits no device's shared memory (the kernel's passes over global memory) */
static void loss_lp_at(int BT, int V, int vb)
{
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
        float mean_cpu = dt_kernels_cpu.softmax_xent_lp(kc, losses, lg, y, 1.0f / BT, BT, V, vb, t, NULL), mean_gpu = 0;
        CK(gpu->softmax_xent_lp(gloss, glg, gy, 1.0f / BT, BT, V, vb, (int)t, &mean_gpu, NULL, 1.0));
        float *hl = back(gloss, BT);
        CK(gpu->to_host(got, glg, n * 2));
        double d = fmax(maxrel(hl, losses, BT), fabs((double)mean_gpu - mean_cpu));
        snprintf(what, sizeof what, "softmax_xent_lp %s, V = %d: losses and their mean", dt_dtype_str(t), V);
        report(d < 1e-5, what, d);
        int worst = 0;
        for (size_t i = 0; i < n; i++) worst = ulps(got[i], lg[i]) > worst ? ulps(got[i], lg[i]) : worst;
        /* the GPU's expf is not glibc's: a few fp32 ulp, at most one after rounding to 16 bits */
        snprintf(what, sizeof what, "softmax_xent_lp %s, V = %d: the gradient in place, block-major, within 1 ulp",
                 dt_dtype_str(t), V);
        report(worst <= 1, what, worst);
        free(hl);
        gpu->free(glg);
    }
    gpu->free(gy), gpu->free(gloss);
    free(y), free(x), free(losses), free(lg), free(got);
}

static void loss_lp(void)
{
    loss_lp_at(45, 300, 128);
    loss_lp_at(3, 120001, 15040);
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

/* convert and accumulate between every pair of types on n = 1031 elements (a tail of 7 past packs of
 * 8), from and to places aligned to a pack (8 elements in) and not (1 and 3 elements in), bit for bit
 * with the CPU: under convert2 the packed kernel and its fallback */
static void convert_offsets(void)
{
    static const enum dt_dtype t[] = {DT_F32, DT_BF16, DT_F16};
    static const size_t offs[2][2] = {{8, 8}, {1, 3}};
    size_t n = 1031, cap = n + 8;
    float *src32 = randn(cap, 97), *dst32 = randn(cap, 98);
    int bad = 0;
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++)
            for (int o = 0; o < 2; o++)
                for (int add = 0; add < 2; add++) {
                    size_t sa = dt_dtype_size(t[a]), sc = dt_dtype_size(t[c]), so = offs[o][0], dof = offs[o][1];
                    void *src = typed(src32, cap, t[a]), *dst = typed(dst32, cap, t[c]), *got = malloc(cap * sc);
                    char *gsrc = dev(src, cap * sa), *gdst = dev(dst, cap * sc);
                    void *d = (char *)dst + dof * sc, *s = (char *)src + so * sa;
                    if (add) dt_kernels_cpu.accumulate(kc, d, t[c], s, t[a], n);
                    else dt_kernels_cpu.convert(kc, d, t[c], s, t[a], n);
                    CK(gpu->convert(gdst + dof * sc, (int)t[c], gsrc + so * sa, (int)t[a], n, add));
                    CK(gpu->synchronize());
                    CK(gpu->to_host(got, gdst, cap * sc));
                    bad += memcmp(got, dst, cap * sc) != 0;
                    gpu->free(gsrc), gpu->free(gdst);
                    free(src), free(dst), free(got);
                }
    report(bad == 0, "convert and accumulate, every pair of types, 1031 elements at aligned and unaligned places, "
           "bit for bit", bad);
    free(src32), free(dst32);
}

/* colsum2 (plan.h) against the kernels in use, bit for bit: layernorm's dweight and dbias, RMSNorm's
 * dweight and a bias's column sums (fp32, bf16 and fp16 douts; test_cuda_fp8.gpu the bf16-rounded
 * sums of fp8-mixed's dbias), at 200 rows (three blocks of 64 and a part) and widths the packs take
 * (768: 192 fp32 packs in three blocks of 64 threads, 96 16-bit ones in two, the second half idle;
 * 3072, GPT-2's fc: 12 blocks and 6) or leave to the kernels in use (772 for 16 bits) */
static void row_sums_packed(void)
{
    int BT = 200, differ = 0;
    static const int widths[] = {768, 772, 3072};
    for (int wi = 0; wi < 3; wi++) {
        int C = widths[wi];
        size_t n = (size_t)BT * C;
        float *x = randn(n, 31), *w = randn(C, 32), *dy = randn(n, 33), *mean = randn(BT, 34), *rstd = randn(BT, 35);
        float *gx = dev(x, n * 4), *gw = dev(w, C * 4), *gdy = dev(dy, n * 4), *gmean = dev(mean, BT * 4);
        float *grstd = dev(rstd, BT * 4), *gdx = dev(NULL, n * 4), *gdw = dev(NULL, C * 4), *gdb = dev(NULL, C * 4);
        float *got[2][4];
        for (int trial = 0; trial < 2; trial++) {
            gpu->set_tries(trial ? DT_CUDA_TRY_COLSUM2 : 0);
            CK(gpu->memset(gdw, 0, C * 4));
            CK(gpu->memset(gdb, 0, C * 4));
            CK(gpu->layernorm_backward(mm, gdx, NULL, (int)DT_F32, gdw, gdb, gdy, gx, gw, gmean, grstd, BT, C));
            got[trial][0] = back(gdw, C), got[trial][1] = back(gdb, C);
            CK(gpu->memset(gdw, 0, C * 4));
            CK(gpu->rmsnorm_backward(mm, gdx, NULL, (int)DT_F32, gdw, gdy, gx, gw, grstd, BT, C));
            got[trial][2] = back(gdw, C);
            /* a bias's column sums: dout (BT, C) of each type, the matmul's own shapes small */
            float *sums = malloc(3 * C * 4);
            for (int k = 0; k < 3; k++) {
                enum dt_dtype t = act_types[k];
                size_t es = dt_dtype_size(t);
                void *h = typed(dy, n, t), *hi = typed(x, (size_t)BT * 16, t), *gd = dev(h, n * es);
                void *gi = dev(hi, (size_t)BT * 16 * es);
                float *gwt = dev(w, (size_t)16 * C * 4), *gdi = dev(NULL, (size_t)BT * 16 * 4);
                float *gdwt = dev(NULL, (size_t)16 * C * 4);
                CK(gpu->matmul_backward(mm, gdi, gdwt, gdb, gd, (int)t, gi, gwt, (int)DT_F32, BT, 16, C, (int)t,
                                        DT_SET_DINP | DT_SET_DPARAMS));
                float *hb = back(gdb, C);
                memcpy(sums + k * C, hb, C * 4);
                free(hb), free(h), free(hi);
                gpu->free(gd), gpu->free(gi), gpu->free(gwt), gpu->free(gdi), gpu->free(gdwt);
            }
            got[trial][3] = sums;
        }
        gpu->set_tries(0);
        for (int j = 0; j < 4; j++) {
            size_t m = j == 3 ? 3 * (size_t)C : (size_t)C;
            differ += memcmp(got[0][j], got[1][j], m * 4) != 0;
            free(got[0][j]), free(got[1][j]);
        }
        free(x), free(w), free(dy), free(mean), free(rstd);
        gpu->free(gx), gpu->free(gw), gpu->free(gdy), gpu->free(gmean), gpu->free(grstd), gpu->free(gdx);
        gpu->free(gdw), gpu->free(gdb);
    }
    report(differ == 0, "colsum2: layernorm's dweight and dbias, RMSNorm's dweight, column sums of fp32, bf16 and "
                        "fp16 douts at 200 rows and widths 768, 772 and 3072: the bits of the kernels in use", differ);
}

/* the gradient's sum of squares and inf/nan count from places 0, 1 and 3 elements in (under norm2:
 * a head before the first 16-byte boundary, packs, a tail), fp32, bf16 and fp16, an inf at the
 * first, middle and last element, against the CPU */
static void sumsq_offsets(void)
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

int main(void)
{
    int rc = cuda_check_start();
    if (rc) return rc;
    elementwise();
    casts();
    optimizer_and_norms();
    llama_ops();
    adamw_slices_case(DT_F32, DT_BF16);
    adamw_slices_case(DT_BF16, DT_BF16);
    adamw_slices_case(DT_F16, DT_F16);
    layernorm_and_positions(768);
    layernorm_and_positions(77); /* fewer channels than threads, and odd */
    embeddings_and_loss();
    rows_add_cases();
    matmuls();
    updates_and_conversions();
    loss_lp();
    narrow_widen();
    convert_offsets();
    sumsq_offsets();
    rmsnorm_odd_width();
    swiglu_packs();
    row_sums_packed();
    /* the kernels on trial (plan.h's DTRUN_CUDA_TRY), held to the same checks as those in use (gelu's
     * ops are the matmuls' above: the flag only tells the model to call them) */
    gpu->set_tries(trying = DT_CUDA_TRY_ALL);
    report_prefix = "on trial (xent2, rows2, convert2, norm2, rms2, resid2, adam2, colsum2, bgradb): ";
    elementwise();
    optimizer_and_norms();
    llama_ops();
    adamw_slices_case(DT_F32, DT_BF16); /* adam2: against adamw slice by slice, which stays in use */
    adamw_slices_case(DT_BF16, DT_BF16);
    adamw_slices_case(DT_F16, DT_F16);
    embeddings_and_loss();
    rows_add_cases();
    updates_and_conversions();
    loss_lp();
    convert_offsets();
    sumsq_offsets();
    rmsnorm_odd_width();
    /* bgradb: a bias's gradient in the weight's gemm */
    gpu->set_tries(trying = DT_CUDA_TRY_BGRADB);
    report_prefix = "on trial (bgradb): ";
    bgradb_cases();
    gpu->set_tries(trying = 0);
    return cuda_check_finish();
}
