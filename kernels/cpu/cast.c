/* cast.c - fp32 <-> bf16/fp16 arrays on the OpenMP pool (conversion is memory bound). */
#include <omp.h>
#include "kernels/cpu/cpu.h"

void dt_cpu_cast_to_lp(uint16_t *dst, const float *src, size_t n, enum dt_dtype t)
{
    static const struct dt_convert *cv;
    if (!cv) cv = dt_convert_fast();
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        size_t a = n * (size_t)th / (size_t)nt, b = n * (size_t)(th + 1) / (size_t)nt;
        if (t == DT_BF16) cv->bf16_from_f32(dst + a, src + a, b - a);
        else cv->f16_from_f32(dst + a, src + a, b - a);
    }
}

void dt_cpu_cast_from_lp(float *dst, const uint16_t *src, size_t n, enum dt_dtype t)
{
    static const struct dt_convert *cv;
    if (!cv) cv = dt_convert_fast();
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        size_t a = n * (size_t)th / (size_t)nt, b = n * (size_t)(th + 1) / (size_t)nt;
        if (t == DT_BF16) cv->f32_from_bf16(dst + a, src + a, b - a);
        else cv->f32_from_f16(dst + a, src + a, b - a);
    }
}

void dt_cpu_round_lp(float *dst, const float *src, size_t n, enum dt_dtype t)
{
    static const struct dt_convert *cv;
    if (!cv) cv = dt_convert_fast();
    #pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        size_t a = n * (size_t)th / (size_t)nt, b = n * (size_t)(th + 1) / (size_t)nt;
        if (t == DT_BF16) cv->bf16_round(dst + a, src + a, b - a);
        else cv->f16_round(dst + a, src + a, b - a);
    }
}
