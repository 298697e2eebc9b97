/*
 * gelu.c - GELU, tanh approximation (GPT-2; PyTorch approximate="tanh").
 * Written with plain expressions: -Ofast's approximations break GeLU (llm.c #168).
 */
#include <math.h>
#include "kernels/cpu/cpu.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */

void dt_cpu_gelu_forward(float *out, const float *inp, size_t N)
{
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
    }
}

void dt_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += grad * dout[i];
    }
}
