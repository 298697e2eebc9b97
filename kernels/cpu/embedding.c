/* embedding.c - token + position embedding, forward and backward. */
#include <omp.h>
#include "kernels/cpu/cpu.h"

void dt_cpu_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, int B, int T, int C)
{
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)inp[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = te[c] + pe[c];
        }
    }
}

void dt_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, int B, int T, int C)
{
    /* tokens repeat, so rows of dwte are shared between positions: each thread owns a
     * range of channels and walks the rows in memory order */
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        int c0 = (int)((long)C * th / nt), c1 = (int)((long)C * (th + 1) / nt);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                float *pe = dwpe + (size_t)t * C;
                if (dwte) {
                    float *te = dwte + (size_t)inp[b * T + t] * C;
                    #pragma omp simd
                    for (int c = c0; c < c1; c++) te[c] += d[c];
                }
                #pragma omp simd
                for (int c = c0; c < c1; c++) pe[c] += d[c];
            }
        }
    }
}
