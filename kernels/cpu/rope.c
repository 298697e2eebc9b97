/* rope.c - rotary position embeddings (Hugging Face's rotate-half layout), in place on the query
 * and key heads, forward and backward (the inverse rotation). */
#include "kernels/cpu/cpu.h"
#include "kernels/formulas.h"

/* every (b, t) row's first NH + NKV heads turned by dir (formulas.h), a row at a time in fp32 */
static void turn(void *qkv, enum dt_dtype at, const float *cs, int B, int T, int NH, int NKV, int hs, float dir)
{
    int half = hs / 2, width = (NH + 2 * NKV) * hs, n = (NH + NKV) * hs;
    #pragma omp parallel
    {
        float row[DT_CPU_CHUNK];
        #pragma omp for
        for (int r = 0; r < B * T; r++) {
            const float *c = cs + (size_t)(r % T) * hs, *s = c + half;
            size_t at0 = (size_t)r * width;
            for (int h0 = 0; h0 < n; h0 += DT_CPU_CHUNK / hs * hs) { /* whole heads at a time */
                int k = n - h0 < DT_CPU_CHUNK / hs * hs ? n - h0 : DT_CPU_CHUNK / hs * hs;
                dt_cpu_load(row, qkv, at, at0 + h0, (size_t)k);
                for (int h = 0; h < k; h += hs)
                    for (int i = 0; i < half; i++) dt_rope_pair(&row[h + i], &row[h + half + i], c[i], s[i], dir);
                dt_cpu_store(qkv, at, at0 + h0, row, (size_t)k);
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
