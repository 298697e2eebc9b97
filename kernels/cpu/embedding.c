/* embedding.c - token + position embedding, forward and backward. */
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
    /* by channel: tokens repeat, so rows of dwte are shared between positions */
    #pragma omp parallel for
    for (int c = 0; c < C; c++) {
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                float d = dout[((size_t)b * T + t) * C + c];
                dwte[(size_t)inp[b * T + t] * C + c] += d;
                dwpe[(size_t)t * C + c] += d;
            }
        }
    }
}
