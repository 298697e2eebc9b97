/*
 * gelu.c - GELU, tanh approximation (GPT-2; PyTorch approximate="tanh").
 * tanh(u) is written as 1 - 2/(exp(2u) + 1) so the loops vectorize: kernels
 * build with -fno-math-errno, which lets GCC call glibc's vector expf (libmvec,
 * a few ulp) instead of scalar tanhf, 10% of a 124M step otherwise. No -Ofast:
 * its reassociation breaks GeLU (llm.c #168).
 */
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"
#include "kernels/formulas.h"

DT_CLONES void dt_cpu_gelu_forward(struct dt_kctx *kc, float *out, const float *inp, size_t N)
{
    #pragma omp parallel for simd
    for (size_t i = 0; i < N; i++) {
        out[i] = dt_gelu(inp[i]);
    }
}

DT_CLONES void dt_cpu_gelu_backward(struct dt_kctx *kc, float *dinp, const float *inp, const float *dout, size_t N)
{
    #pragma omp parallel for simd
    for (size_t i = 0; i < N; i++) {
        dinp[i] += dt_gelu_grad(inp[i]) * dout[i];
    }
}
