/*
 * attention_cached.c - attention for generation over a cache of keys and values (kernels.h): the new
 * tokens' key and value heads are stored into the caches, then each new query walks the keys up to
 * its own position in blocks of KC with an online softmax (a running max and sum, the output
 * rescaled as the max grows), so the scores of a long context never exist whole. One (b, query
 * head) per OpenMP thread; a decode step is one query a head, a prefill the prompt's rows.
 */
#include <math.h>
#include <omp.h>
#include "kernels/cpu/cpu.h"

/* keys per block: their scores stay in L1 */
#define KC 64
#define HS_MAX DT_ATTN_CACHED_HS_MAX /* the row buffers live on a thread's stack */

void dt_cpu_attention_cached(struct dt_kctx *kc, void *out, const void *qkv, void *kcache, void *vcache,
                             enum dt_dtype at, int B, int n, int pos, int Tc, int C, int NH, int NKV)
{
    (void)kc;
    int hs = C / NH, W = C + 2 * NKV * hs, group = NH / NKV;
    if (hs > HS_MAX) return;
    size_t row = (size_t)NKV * hs; /* a cache row: one position's heads */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) {
            size_t src = ((size_t)b * n + i) * W + C, dst = ((size_t)b * Tc + pos + i) * row;
            float tmp[2 * HS_MAX];
            for (size_t o = 0; o < row; o += (size_t)hs) {
                dt_cpu_load(tmp, qkv, at, src + o, (size_t)hs);
                dt_cpu_store(kcache, at, dst + o, tmp, (size_t)hs);
                dt_cpu_load(tmp, qkv, at, src + row + o, (size_t)hs);
                dt_cpu_store(vcache, at, dst + o, tmp, (size_t)hs);
            }
        }
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float q[HS_MAX], o[HS_MAX], kv[HS_MAX], s[KC];
            size_t kv0 = (size_t)b * Tc * row + (size_t)(h / group) * hs;
            for (int i = 0; i < n; i++) {
                dt_cpu_load(q, qkv, at, ((size_t)b * n + i) * W + (size_t)h * hs, (size_t)hs);
                float m = -INFINITY, l = 0;
                int seen = pos + i + 1;
                for (int d = 0; d < hs; d++) o[d] = 0;
                for (int j0 = 0; j0 < seen; j0 += KC) {
                    int nk = seen - j0 < KC ? seen - j0 : KC;
                    float mx = m;
                    for (int j = 0; j < nk; j++) {
                        dt_cpu_load(kv, kcache, at, kv0 + (size_t)(j0 + j) * row, (size_t)hs);
                        float dot = 0;
                        #pragma omp simd reduction(+ : dot)
                        for (int d = 0; d < hs; d++) dot += q[d] * kv[d];
                        s[j] = dot * scale;
                        mx = s[j] > mx ? s[j] : mx;
                    }
                    /* the sums so far were taken against the old max: rescale them */
                    float corr = expf(m - mx);
                    l *= corr;
                    for (int d = 0; d < hs; d++) o[d] *= corr;
                    for (int j = 0; j < nk; j++) {
                        float p = expf(s[j] - mx);
                        l += p;
                        dt_cpu_load(kv, vcache, at, kv0 + (size_t)(j0 + j) * row, (size_t)hs);
                        #pragma omp simd
                        for (int d = 0; d < hs; d++) o[d] += p * kv[d];
                    }
                    m = mx;
                }
                float inv = 1.0f / l;
                for (int d = 0; d < hs; d++) o[d] *= inv;
                dt_cpu_store(out, at, ((size_t)b * n + i) * C + (size_t)h * hs, o, (size_t)hs);
            }
        }
}
