/* layernorm.c - LayerNorm over C (eps 1e-5, as GPT-2 and PyTorch), forward and backward (llm.c's
 * formulas); the forward's output stored in any activation type. */
#include <math.h>
#include <omp.h>
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

DT_CLONES void dt_cpu_layernorm_forward(struct dt_kctx *kc, void *out, enum dt_dtype ot, float *mean, float *rstd,
                                        const float *inp, const float *weight, const float *bias, int BT, int C)
{
    /* a 16-bit row is computed in its thread's row of tmp, then rounded into out */
    int nt = omp_get_max_threads();
    float *tmp = ot == DT_F32 ? NULL : dt_cpu_scratch(kc, 0, (size_t)nt * C * sizeof(float), "layernorm_forward");
    if (ot != DT_F32 && !tmp) return;
    #pragma omp parallel num_threads(nt)
    {
        #pragma omp for
        for (int i = 0; i < BT; i++) {
            const float *x = inp + (size_t)i * C;
            float m = 0;
            #pragma omp simd reduction(+ : m)
            for (int c = 0; c < C; c++) m += x[c];
            m /= C;
            float var = 0;
            #pragma omp simd reduction(+ : var)
            for (int c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
            var /= C;
            float s = 1.0f / sqrtf(var + 1e-5f);
            float *o = ot == DT_F32 ? (float *)out + (size_t)i * C : tmp + (size_t)omp_get_thread_num() * C;
            #pragma omp simd
            for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
            if (ot != DT_F32) dt_cpu_store(out, ot, (size_t)i * C, o, (size_t)C);
            mean[i] = m;
            rstd[i] = s;
        }
    }
}

/* Parameter gradients reduce over rows in DT_ROW_BLOCK's order (cpu.h; the GPU's): each thread owns a
 * range of channels and reads the rows in order, so the sums do not depend on the thread count; a
 * block of CB channels is summed in registers and added once, not loaded and stored at every row. */
#define CB 32

static inline void param_grads(float *dweight, float *dbias, const float *dout, const float *inp, const float *mean,
                               const float *rstd, int BT, int C, int c0, int w)
{
    float aw[CB] = {0}, ab[CB] = {0};
    for (int r0 = 0; r0 < BT; r0 += DT_ROW_BLOCK) {
        float pw[CB] = {0}, pb[CB] = {0};
        int r1 = BT - r0 < DT_ROW_BLOCK ? BT : r0 + DT_ROW_BLOCK;
        for (int i = r0; i < r1; i++) {
            const float *dy = dout + (size_t)i * C + c0, *x = inp + (size_t)i * C + c0;
            float m = mean[i], s = rstd[i];
            #pragma omp simd
            for (int c = 0; c < w; c++) {
                pw[c] += (x[c] - m) * s * dy[c];
                pb[c] += dy[c];
            }
        }
        #pragma omp simd
        for (int c = 0; c < w; c++) {
            aw[c] += pw[c];
            ab[c] += pb[c];
        }
    }
    for (int c = 0; c < w; c++) {
        dweight[c0 + c] += aw[c];
        dbias[c0 + c] += ab[c];
    }
}

DT_CLONES void dt_cpu_layernorm_backward(struct dt_kctx *kc, float *dinp, void *dinp_lp, enum dt_dtype lt,
                                         float *dweight, float *dbias, const float *dout, const float *inp, const float *weight, const float *mean,
                                         const float *rstd, int BT, int C)
{
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *dy = dout + (size_t)i * C, *x = inp + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        float m = mean[i], s = rstd[i];
        float dnorm_mean = 0, dnorm_norm_mean = 0;
        #pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float dnorm = weight[c] * dy[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        #pragma omp simd
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float dnorm = weight[c] * dy[c];
            dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
        if (dinp_lp) dt_cpu_store(dinp_lp, lt, (size_t)i * C, dx, (size_t)C);
    }
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
        int c0 = (int)((long)C * t / nt), c1 = (int)((long)C * (t + 1) / nt);
        for (int c = c0; c < c1; c += CB) {
            if (c1 - c >= CB) param_grads(dweight, dbias, dout, inp, mean, rstd, BT, C, c, CB);
            else param_grads(dweight, dbias, dout, inp, mean, rstd, BT, C, c, c1 - c);
        }
    }
}
