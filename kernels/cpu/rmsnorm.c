/* rmsnorm.c - RMSNorm over C (Llama; Hugging Face's LlamaRMSNorm, in fp32), forward and backward. */
#include <math.h>
#include <omp.h>
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

DT_CLONES void dt_cpu_rmsnorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *rstd, const float *inp,
                                      const float *weight, float eps, int BT, int C)
{
    /* a 16-bit row is computed in its thread's row of tmp, then rounded into out */
    int nt = omp_get_max_threads();
    float *tmp = ot == DT_F32 ? NULL : dt_cpu_scratch(kc, 0, (size_t)nt * C * sizeof(float), "rmsnorm_forward");
    if (ot != DT_F32 && !tmp) return;
    #pragma omp parallel for num_threads(nt)
    for (int i = 0; i < BT; i++) {
        const float *x = inp + (size_t)i * C;
        float ss = 0;
        #pragma omp simd reduction(+ : ss)
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        float s = 1.0f / sqrtf(ss / C + eps);
        float *o = ot == DT_F32 ? (float *)out + (size_t)i * C : tmp + (size_t)omp_get_thread_num() * C;
        #pragma omp simd
        for (int c = 0; c < C; c++) o[c] = x[c] * s * weight[c];
        if (ot != DT_F32) dt_cpu_store(out, ot, (size_t)i * C, o, (size_t)C);
        rstd[i] = s;
    }
}

/* dweight over rows in DT_ROW_BLOCK's order: each thread owns a range of channels, CB of them summed
 * in registers at a time (layernorm.c's scheme) */
#define CB 32

static inline void weight_grads(float *dweight, const float *dout, const float *inp, const float *rstd, int BT, int C,
                                int c0, int w)
{
    float acc[CB] = {0};
    for (int r0 = 0; r0 < BT; r0 += DT_ROW_BLOCK) {
        float part[CB] = {0};
        int r1 = BT - r0 < DT_ROW_BLOCK ? BT : r0 + DT_ROW_BLOCK;
        for (int i = r0; i < r1; i++) {
            const float *dy = dout + (size_t)i * C + c0, *x = inp + (size_t)i * C + c0;
            float s = rstd[i];
            #pragma omp simd
            for (int c = 0; c < w; c++) part[c] += x[c] * s * dy[c];
        }
        #pragma omp simd
        for (int c = 0; c < w; c++) acc[c] += part[c];
    }
    for (int c = 0; c < w; c++) dweight[c0 + c] += acc[c];
}

/* y = x s w, s = (mean(x^2) + eps)^-1/2: dx = s (w dy) - x s^3 mean(w dy x) */
DT_CLONES void dt_cpu_rmsnorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt,
                                       float *dweight, const float *dout, const float *inp, const float *weight,
                                       const float *rstd, int BT, int C)
{
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *dy = dout + (size_t)i * C, *x = inp + (size_t)i * C;
        float *dx = dinp + (size_t)i * C, s = rstd[i], dot = 0;
        #pragma omp simd reduction(+ : dot)
        for (int c = 0; c < C; c++) dot += weight[c] * dy[c] * x[c];
        float k = dot / C * s * s * s;
        #pragma omp simd
        for (int c = 0; c < C; c++) dx[c] += s * weight[c] * dy[c] - x[c] * k;
        if (dinp_lp) dt_cpu_store(dinp_lp, lt, (size_t)i * C, dx, (size_t)C);
    }
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int c0 = (int)((long)C * t / nt), c1 = (int)((long)C * (t + 1) / nt);
        for (int c = c0; c < c1; c += CB) weight_grads(dweight, dout, inp, rstd, BT, C, c, c1 - c < CB ? c1 - c : CB);
    }
}
