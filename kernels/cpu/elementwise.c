/* elementwise.c - residual add (fp32 plus an activation of any type), mean squared error. */
#include <math.h>
#include "kernels/cpu/cpu.h"

void dt_cpu_chunks(void *out, enum dt_dtype ot, const void *inp, enum dt_dtype it, size_t n, dt_cpu_chunk_fn f,
                   const void *arg)
{
    #pragma omp parallel for schedule(static)
    for (size_t c = 0; c < n; c += DT_CPU_CHUNK) {
        float x[DT_CPU_CHUNK];
        size_t k = n - c < DT_CPU_CHUNK ? n - c : DT_CPU_CHUNK;
        dt_cpu_load(x, inp, it, c, k);
        f(x, c, k, arg);
        dt_cpu_store(out, ot, c, x, k);
    }
}

/* x += the fp32 residual a from element i0 on */
static void add(float *x, size_t i0, size_t k, const void *a)
{
    const float *r = (const float *)a + i0;
    #pragma omp simd
    for (size_t i = 0; i < k; i++) x[i] += r[i];
}

void dt_cpu_residual_forward(struct dt_kctx *kc, float *out, const float *a, const void *b, enum dt_dtype bt, size_t N)
{
    if (bt == DT_F32) {
        const float *y = b;
        #pragma omp parallel for simd
        for (size_t i = 0; i < N; i++) out[i] = a[i] + y[i];
        return;
    }
    dt_cpu_chunks(out, DT_F32, b, bt, N, add, a);
}

float dt_cpu_mse(struct dt_kctx *kc, float *dout, const float *out, const float *target, float dloss, size_t n,
                 const struct dt_loss_sink *sink)
{
    double s = 0;
    #pragma omp parallel for simd reduction(+ : s)
    for (size_t i = 0; i < n; i++) {
        float e = out[i] - target[i];
        s += (double)e * e;
        if (dloss != 0) dout[i] = 2.0f * e * dloss;
    }
    return dt_loss_out((float)(s / (double)n), sink);
}
