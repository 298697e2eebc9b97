/*
 * cuda_ops_llama.c - test_cuda_ops.gpu's cases for Llama's ops: RMSNorm, rotary embeddings and
 * SwiGLU, and their packed twins on trial (rms2, swiglu2), against the CPU twins (test_cuda_ops.c
 * runs them).
 */
#include <math.h>
#include <string.h>
#include "core/half.h"
#include "cuda_check.h"
#include "cuda_ops_cases.h"
#include "kernels/cuda/plan.h"
#include "kernels/formulas.h"

/* Llama's ops on activations of each type against the CPU: RMSNorm (145 rows: two full row blocks
 * and a part; backward accumulates into values, its dweight in the CPU's block order up to the
 * fused multiply-adds nvcc may form, its 16-bit dinp the GPU's own sum rounded), rotary embeddings
 * on 3 query and 1 key/value heads of 64 and back, SwiGLU forward and backward (written) */
void llama_ops(void)
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
void swiglu_packs(void)
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
void rmsnorm_odd_width(void)
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
