/*
 * attention.c - causal multi-head self-attention. Per (batch, head) the score
 * and value products are sgemm calls on strided views into qkv (B,T,3C), run
 * one (b,h) per OpenMP thread; oneDNN runs single-threaded inside a parallel
 * region, so the pool is never oversubscribed.
 */
#include <omp.h>
#include <string.h>
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/vmath.h"

size_t dt_cpu_attention_saved(int B, int NH, int T) { return (size_t)B * NH * T * T; }
size_t dt_cpu_attention_scratch(int B, int NH, int T)
{
    (void)B, (void)NH;
    return (size_t)2 * T * T * (size_t)omp_get_max_threads();
}

DT_CLONES void dt_cpu_attention_forward(struct dt_kctx *kc, float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * 3 * C + h * hs;
            const float *k = q + C, *v = q + 2 * C;
            float *a = att + ((size_t)b * NH + h) * T * T;
            dt_cpu_gemm('N', 'T', T, T, hs, scale, q, 3 * C, k, 3 * C, 0.0f, a, T);
            for (int t = 0; t < T; t++) {
                float *row = a + (size_t)t * T;
                float mx = -INFINITY;
                #pragma omp simd reduction(max : mx)
                for (int u = 0; u <= t; u++) mx = row[u] > mx ? row[u] : mx;
                float sum = 0;
                #pragma omp simd reduction(+ : sum)
                for (int u = 0; u <= t; u++) {
                    row[u] = expf(row[u] - mx);
                    sum += row[u];
                }
                float inv = 1.0f / sum;
                for (int u = 0; u <= t; u++) row[u] *= inv;
                for (int u = t + 1; u < T; u++) row[u] = 0;
            }
            dt_cpu_gemm('N', 'N', T, hs, T, 1.0f, a, T, v, 3 * C, 0.0f, out + (size_t)b * T * C + h * hs, C);
        }
    }
}

void dt_cpu_attention_backward(struct dt_kctx *kc, float *dqkv, const float *dout, const float *qkv, const float *out,
                               const float *att, float *scratch,
                               int B, int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            float *datt = scratch + (size_t)2 * T * T * omp_get_thread_num(), *dpre = datt + (size_t)T * T;
            const float *q = qkv + (size_t)b * T * 3 * C + h * hs;
            const float *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + (size_t)b * T * 3 * C + h * hs;
            float *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * NH + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + h * hs;
            dt_cpu_gemm('N', 'T', T, T, hs, 1.0f, dy, C, v, 3 * C, 0.0f, datt, T);
            dt_cpu_gemm('T', 'N', T, hs, T, 1.0f, a, T, dy, C, 1.0f, dv, 3 * C);
            for (int t = 0; t < T; t++) {
                const float *ar = a + (size_t)t * T;
                const float *dr = datt + (size_t)t * T;
                float *pr = dpre + (size_t)t * T;
                float dot = 0;
                for (int u = 0; u <= t; u++) dot += ar[u] * dr[u];
                for (int u = 0; u <= t; u++) pr[u] = ar[u] * (dr[u] - dot);
                for (int u = t + 1; u < T; u++) pr[u] = 0;
            }
            dt_cpu_gemm('N', 'N', T, hs, T, scale, dpre, T, k, 3 * C, 1.0f, dq, 3 * C);
            dt_cpu_gemm('T', 'N', T, hs, T, scale, dpre, T, q, 3 * C, 1.0f, dk, 3 * C);
        }
    }
}
