/* rope.c - rotary position embeddings (Hugging Face's rotate-half layout), in place on the query
 * and key heads, forward and backward (the inverse rotation). */
#include "kernels/cpu/cpu.h"
#include "kernels/formulas.h"

/* every (b, t) row's first NH + NKV heads turned by dir (formulas.h) in fp32, a head's pairs
 * (x[i], x[i + hs/2]) DT_CPU_CHUNK of them at a time, any head size */
static void turn(void *qkv, enum dt_dtype at, const float *cs, int B, int T, int NH, int NKV, int hs, float dir)
{
    int half = hs / 2, width = (NH + 2 * NKV) * hs;
    #pragma omp parallel
    {
        float x1[DT_CPU_CHUNK], x2[DT_CPU_CHUNK];
        #pragma omp for
        for (int r = 0; r < B * T; r++) {
            const float *c = cs + (size_t)(r % T) * hs, *s = c + half;
            for (int h = 0; h < NH + NKV; h++) {
                size_t head = (size_t)r * width + (size_t)h * hs;
                for (int i0 = 0; i0 < half; i0 += DT_CPU_CHUNK) {
                    int k = half - i0 < DT_CPU_CHUNK ? half - i0 : DT_CPU_CHUNK;
                    dt_cpu_load(x1, qkv, at, head + i0, (size_t)k);
                    dt_cpu_load(x2, qkv, at, head + half + i0, (size_t)k);
                    for (int i = 0; i < k; i++) dt_rope_pair(&x1[i], &x2[i], c[i0 + i], s[i0 + i], dir);
                    dt_cpu_store(qkv, at, head + i0, x1, (size_t)k);
                    dt_cpu_store(qkv, at, head + half + i0, x2, (size_t)k);
                }
            }
        }
    }
}

void dt_cpu_rope_forward(struct dt_kctx *kc, void *qkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                         int NKV, int hs)
{
    turn(qkv, at, cs, B, T, NH, NKV, hs, 1.0f);
}

void dt_cpu_rope_backward(struct dt_kctx *kc, void *dqkv, enum dt_dtype at, const float *cs, int B, int T, int NH,
                          int NKV, int hs)
{
    turn(dqkv, at, cs, B, T, NH, NKV, hs, -1.0f);
}
