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

DT_CLONES static void gelu_chunk(float *x, size_t i0, size_t k, const void *arg)
{
    #pragma omp simd
    for (size_t i = 0; i < k; i++) x[i] = dt_gelu(x[i]);
}

/* x = GELU'(x) * dout, dout the fp32 gradient from element i0 on */
DT_CLONES static void gelu_grad_chunk(float *x, size_t i0, size_t k, const void *dout)
{
    const float *d = (const float *)dout + i0;
    #pragma omp simd
    for (size_t i = 0; i < k; i++) x[i] = dt_gelu_grad(x[i]) * d[i];
}

DT_CLONES void dt_cpu_gelu_forward(struct dt_kctx *kc, void *out, const void *inp, enum dt_dtype at, size_t N)
{
    if (at == DT_F32) {
        float *o = out;
        const float *x = inp;
        #pragma omp parallel for simd
        for (size_t i = 0; i < N; i++) o[i] = dt_gelu(x[i]);
        return;
    }
    dt_cpu_chunks(out, at, inp, at, N, gelu_chunk, NULL);
}

DT_CLONES void dt_cpu_gelu_backward(struct dt_kctx *kc, void *dinp, const void *inp, const float *dout, enum dt_dtype at,
                                    size_t N)
{
    if (at == DT_F32) {
        float *d = dinp;
        const float *x = inp;
        #pragma omp parallel for simd
        for (size_t i = 0; i < N; i++) d[i] = dt_gelu_grad(x[i]) * dout[i];
        return;
    }
    dt_cpu_chunks(dinp, at, inp, at, N, gelu_grad_chunk, dout);
}
