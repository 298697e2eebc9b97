/* elementwise.c - residual add, mean squared error. */
#include <math.h>
#include "kernels/cpu/cpu.h"

void dt_cpu_residual_forward(struct dt_kctx *kc, float *out, const float *a, const float *b, size_t N)
{
    #pragma omp parallel for simd
    for (size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

float dt_cpu_mse(struct dt_kctx *kc, float *dout, const float *out, const float *target, float dloss, size_t n)
{
    double s = 0;
    #pragma omp parallel for simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) {
        float e = out[i] - target[i];
        s += (double)e * e;
        if (dloss != 0) dout[i] = 2.0f * e * dloss;
    }
    return (float)(s / (double)n);
}
