/* cast.c - fp32 <-> bf16/fp16 arrays on the OpenMP pool (conversion is memory bound). */
#include <omp.h>
#include <stdbool.h>
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu.h"

enum op { TO_LP, FROM_LP, ROUND };

/* Each thread converts its share of the n elements. */
static void split(enum op op, enum dt_dtype t, void *dst, const void *src, size_t n)
{
    static const struct dt_convert *cv;
    if (!cv) cv = dt_convert_fast();
    bool bf = t == DT_BF16;
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        size_t a = n * (size_t)th / (size_t)nt, k = n * (size_t)(th + 1) / (size_t)nt - a;
        if (op == TO_LP) (bf ? cv->bf16_from_f32 : cv->f16_from_f32)((uint16_t *)dst + a, (const float *)src + a, k);
        else if (op == FROM_LP) (bf ? cv->f32_from_bf16 : cv->f32_from_f16)((float *)dst + a, (const uint16_t *)src + a, k);
        else (bf ? cv->bf16_round : cv->f16_round)((float *)dst + a, (const float *)src + a, k);
    }
}

void dt_cpu_cast_to_lp(struct dt_kctx *kc, uint16_t *dst, const float *src, size_t n, enum dt_dtype t) { split(TO_LP, t, dst, src, n); }
void dt_cpu_cast_from_lp(struct dt_kctx *kc, float *dst, const uint16_t *src, size_t n, enum dt_dtype t) { split(FROM_LP, t, dst, src, n); }
void dt_cpu_round_lp(struct dt_kctx *kc, float *dst, const float *src, size_t n, enum dt_dtype t) { split(ROUND, t, dst, src, n); }
